"""Intern-S1 and Intern-S1-mini (InternS1ForConditionalGeneration, model_type
interns1: internlm/Intern-S1, Intern-S1-FP8's BF16 parent, Intern-S1-mini),
tiny, as vLLM 0.32 reads them (model_executor/models/interns1.py,
interns1_vit.py: the class that also serves transformers'
InternVLForConditionalGeneration).

Intern-S1's remote code (modeling_interns1.py) is transformers'
InternVL -hf model under other class names: the same modules, and
save_pretrained (transformers 4.53, its _checkpoint_conversion_mapping)
writes the same names vLLM's hf_to_vllm_mapper reads:

    model.language_model.*               the Qwen3-MoE (Intern-S1) or Qwen3 (-mini) text model
    lm_head.weight
    model.vision_tower.embeddings.{cls_token, position_embeddings, patch_embeddings.projection.*}
    model.vision_tower.encoder.layer.N.attention.{q,k,v}_proj.{weight[,bias]}
    model.vision_tower.encoder.layer.N.attention.{q_norm,k_norm}.weight   (use_qk_norm)
    model.vision_tower.encoder.layer.N.attention.projection_layer.*
    model.vision_tower.encoder.layer.N.{lambda_1, lambda_2}
    model.vision_tower.encoder.layer.N.{layernorm_before, layernorm_after}.weight[, .bias]
    model.vision_tower.encoder.layer.N.mlp.{fc1, fc2}.*
    model.multi_modal_projector.{layer_norm, linear_1, linear_2}.*

(the release's InternS1Model and InternS1ForConditionalGeneration set
_checkpoint_conversion_mapping = {}, so its save writes the module names).
So the model is transformers' own InternVLForConditionalGeneration (the
MoE's experts one tensor an expert, as 4.x and 5.x write them), whose
save_pretrained in 5.19 writes the legacy -hf names (language_model.model.,
language_model.lm_head., vision_tower., multi_modal_projector.): renamed
to the release's above (release_names); config.json is the release's: model_type interns1, the
architecture InternS1ForConditionalGeneration, auto_map, the tower's
model_type interns1_vision; configuration_interns1.py beside it (a
minimal version of the release's, for trust_remote_code: neither
transformers 5.19 nor vLLM 0.32 knows the model type interns1).

make (Intern-S1's form): a Qwen3-MoE text model (4 experts, 2 a token), an
InternViT-6B-like tower (RMSNorm without biases, no q/k/v bias, q_norm and
k_norm over all heads: use_qk_norm); make_mini (Intern-S1-mini's): a
Qwen3 text model and an InternViT-300M-like tower (LayerNorm with biases,
q/k/v biases, no q/k norm).  3 tower layers of 4 heads of 16 over one
56x56 tile of 14-pixel patches, pixel-shuffled 2x2 into 4 image tokens;
make_ckpt.py's word-level tokenizer and InternVLProcessor (vLLM's
InternS1ProcessingInfo loads transformers' InternVLProcessor).
"""

CONFIG_PY = '''"""Intern-S1's configuration (the keys of internlm/Intern-S1's
configuration_interns1.py), written for the wshard test checkpoints."""
from transformers import AutoConfig
from transformers.configuration_utils import PretrainedConfig


class InternS1VisionConfig(PretrainedConfig):
    model_type = "interns1_vision"
    base_config_key = "vision_config"

    def __init__(self, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                 attention_bias=False, use_qk_norm=False, intermediate_size=4096,
                 hidden_act="gelu", hidden_dropout_prob=0.0, attention_dropout=0.0,
                 projection_dropout=0.0, initializer_range=0.02, norm_type="layer_norm",
                 layer_norm_eps=1e-06, image_size=[448, 448], patch_size=[14, 14],
                 num_channels=3, use_mask_token=False, use_absolute_position_embeddings=True,
                 layer_scale_init_value=0.1, use_mean_pooling=True, drop_path_rate=0.0,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.attention_bias = attention_bias
        self.use_qk_norm = use_qk_norm
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_dropout = attention_dropout
        self.projection_dropout = projection_dropout
        self.initializer_range = initializer_range
        self.norm_type = norm_type
        self.layer_norm_eps = layer_norm_eps
        self.image_size = list(image_size) if isinstance(image_size, (list, tuple)) \\
            else [image_size, image_size]
        self.patch_size = list(patch_size) if isinstance(patch_size, (list, tuple)) \\
            else [patch_size, patch_size]
        self.num_channels = num_channels
        self.use_mask_token = use_mask_token
        self.use_absolute_position_embeddings = use_absolute_position_embeddings
        self.layer_scale_init_value = layer_scale_init_value
        self.use_mean_pooling = use_mean_pooling
        self.drop_path_rate = drop_path_rate


class InternS1Config(PretrainedConfig):
    model_type = "interns1"
    sub_configs = {"text_config": AutoConfig, "vision_config": InternS1VisionConfig}

    def __init__(self, vision_config=None, text_config=None, image_token_id=151667,
                 image_seq_length=256, downsample_ratio=0.5, projector_hidden_act="gelu",
                 vision_feature_layer=-1, vision_feature_select_strategy="default", **kwargs):
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        self.image_token_id = image_token_id
        self.image_seq_length = image_seq_length
        self.downsample_ratio = downsample_ratio
        self.projector_hidden_act = projector_hidden_act
        self.vision_feature_layer = vision_feature_layer
        self.vision_feature_select_strategy = vision_feature_select_strategy
        if isinstance(vision_config, dict):
            vision_config = InternS1VisionConfig(**vision_config)
        elif vision_config is None:
            vision_config = InternS1VisionConfig()
        self.vision_config = vision_config
        if isinstance(text_config, dict):
            text_config = CONFIG_MAPPING[text_config.get("model_type", "qwen2")](**text_config)
        elif text_config is None:
            text_config = CONFIG_MAPPING["qwen2"]()
        self.text_config = text_config
        super().__init__(**kwargs)
'''

VITS = {
    # InternViT-6B's form (Intern-S1): RMSNorm, no q/k/v bias, q/k norms
    "6b": dict(attention_bias=False, use_qk_norm=True, norm_type="rms_norm"),
    # InternViT-300M's form (Intern-S1-mini)
    "300m": dict(attention_bias=True, use_qk_norm=False, norm_type="layer_norm"),
}

TEXT_ARCH = {"qwen3_moe": "Qwen3MoeForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def make(out, text="qwen3_moe", vit="6b"):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, write_release_config
    from make_ckpt import COMMON, internvl_processor
    tc = dict(COMMON, model_type=text, tie_word_embeddings=False,
              bos_token_id=2, eos_token_id=1, pad_token_id=0)
    if text == "qwen3_moe":
        # Intern-S1's form: every layer MoE (Qwen3-235B-A22B's), no shared expert
        tc.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256,
                  decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True)
    vc = dict(VITS[vit], hidden_size=64, intermediate_size=128, num_hidden_layers=3,
              num_attention_heads=4, layer_norm_eps=1e-6, image_size=[56, 56],
              patch_size=[14, 14])
    cfg = transformers.InternVLConfig(
        image_token_id=999, image_seq_length=4, downsample_ratio=0.5,
        tie_word_embeddings=False, vision_feature_layer=-1,
        vision_config=vc, text_config=tc)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.InternVLForConditionalGeneration(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    release_names(out)
    write_release_config(out, release_config(cfg, text), {"configuration_interns1.py": CONFIG_PY})
    internvl_processor(out, cfg)


def release_names(out):
    """transformers 5.19 saves InternVL under the legacy -hf names; the
    release has its modules' names (model.language_model. ..., lm_head.)."""
    from ckpt_io import rename_tensors
    pairs = (("language_model.model.", "model.language_model."),
             ("language_model.lm_head.", "lm_head."),
             ("vision_tower.", "model.vision_tower."),
             ("multi_modal_projector.", "model.multi_modal_projector."))

    def rename(k):
        for a, b in pairs:
            if k.startswith(a):
                return b + k[len(a):]
        raise ValueError("unexpected tensor " + k)
    rename_tensors(out, rename)


def release_config(cfg, text):
    """config.json as internlm/Intern-S1 ships it (its keys; the tiny sizes)."""
    t = cfg.text_config.to_dict()
    t.pop("dtype", None)
    t["architectures"] = [TEXT_ARCH[text]]
    t["torch_dtype"] = "bfloat16"
    t["use_cache"] = True
    if text == "qwen3_moe" and t.get("num_experts") is None:
        # transformers 5 writes num_local_experts; the release (4.x) num_experts
        t["num_experts"] = t.pop("num_local_experts")
    v = cfg.vision_config
    vision = {"architectures": ["InternVisionModel"], "attention_bias": v.attention_bias,
              "attention_dropout": 0.0, "drop_path_rate": 0.0, "dropout": 0.0,
              "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
              "hidden_size": v.hidden_size, "image_size": list(v.image_size),
              "initializer_factor": 0.1, "initializer_range": 1e-10,
              "intermediate_size": v.intermediate_size, "layer_norm_eps": v.layer_norm_eps,
              "layer_scale_init_value": 0.1, "model_type": "interns1_vision",
              "norm_type": v.norm_type, "num_attention_heads": v.num_attention_heads,
              "num_channels": 3, "num_hidden_layers": v.num_hidden_layers,
              "patch_size": list(v.patch_size), "projection_dropout": 0.0,
              "torch_dtype": "bfloat16", "use_absolute_position_embeddings": True,
              "use_mask_token": False, "use_mean_pooling": True, "use_qk_norm": v.use_qk_norm}
    return {"architectures": ["InternS1ForConditionalGeneration"],
            "auto_map": {"AutoConfig": "configuration_interns1.InternS1Config",
                         "AutoModel": "modeling_interns1.InternS1Model",
                         "AutoModelForCausalLM": "modeling_interns1.InternS1ForConditionalGeneration"},
            "downsample_ratio": cfg.downsample_ratio, "image_seq_length": cfg.image_seq_length,
            "image_token_id": cfg.image_token_id, "model_type": "interns1",
            "projector_hidden_act": "gelu", "text_config": t, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "transformers_version": "4.53.0",
            "vision_config": vision, "vision_feature_layer": -1,
            "vision_feature_select_strategy": "default"}


def make_mini(out):
    """Intern-S1-mini's form: Qwen3, InternViT-300M."""
    make(out, text="qwen3", vit="300m")
