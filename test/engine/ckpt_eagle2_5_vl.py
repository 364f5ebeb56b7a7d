"""NVIDIA Eagle 2.5 (Eagle2_5_VLForConditionalGeneration: nvidia/Eagle2.5-8B,
model_type eagle_2_5_vl, remote code), tiny, as vLLM 0.32 reads it
(model_executor/models/eagle2_5_vl.py, siglip.py, qwen2.py).

The model: a SigLIP tower (transformers' SiglipVisionModel, its names
as transformers 4.x wrote them, vision_model.*, under the release's
vision_model., so vision_model.vision_model.*; its pooling head kept, as the release holds
it and vLLM drops it), the projector mlp1 (nn.Sequential: LayerNorm(4*Hv),
Linear(4*Hv, hidden), GELU, Linear(hidden, hidden): indices 0, 1, 3; random,
seeded) and the text model of text_config (transformers' Qwen2ForCausalLM,
Qwen2-7B's form in the release: q/k/v biases, untied) under
language_model. (language_model.model.*, language_model.lm_head.*).  The
tower: 3 layers of 4 heads of 16 over one 56x56 tile of 14-pixel patches,
pixel-shuffled 2x2 into 4 image tokens.

config.json as the release writes it: vision_config (model_type
siglip_vision_model), text_config (Qwen2ForCausalLM), select_layer,
force_image_size, downsample_ratio, dynamic_image_size, use_thumbnail,
min/max_dynamic_tiles (the release's configuration) and min/max_dynamic_patch
(which vLLM's Eagle2_5_VLProcessingInfo reads), image_token_index (the
<IMG_CONTEXT> token), auto_map to configuration_eagle2_5_vl.py beside it
(a minimal version of the release's, for trust_remote_code: neither
transformers nor vLLM 0.32 knows the model type eagle_2_5_vl).

The processor is vLLM's own InternVLProcessor (transformers_utils/
processors/internvl.py), the tokenizer ckpt_internvl_chat.py's: <img> 997,
</img> 996, <IMG_CONTEXT> 999, <video> 995, <image> 994; a prompt's image
stands at <image>, which vLLM replaces by <img> + <IMG_CONTEXT> x 4 + </img>.

    ckpt_eagle2_5_vl.py OUT [select_layer=N]
"""
import os

CONFIG_PY = '''"""Eagle 2.5's configuration (the keys of NVIDIA's
configuration_eagle2_5_vl.py), written for the wshard test checkpoints."""
from transformers import AutoConfig, SiglipVisionConfig
from transformers.configuration_utils import PretrainedConfig

LLM_TYPES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
             "Qwen3ForCausalLM": "qwen3"}


class Eagle2_5_VLConfig(PretrainedConfig):
    model_type = "eagle_2_5_vl"
    is_composition = True

    def __init__(self, vision_config=None, text_config=None, use_backbone_lora=0,
                 use_llm_lora=0, pad2square=False, select_layer=-4, force_image_size=None,
                 downsample_ratio=0.5, template=None, dynamic_image_size=False,
                 use_thumbnail=False, loss_version="v1", min_dynamic_tiles=1,
                 max_dynamic_tiles=6, mlp_checkpoint=False, image_token_index=151667,
                 use_pixel_shuffle=True, mlp_connector_layers=2, **kwargs):
        super().__init__(**kwargs)
        vision_config = dict(vision_config or {"model_type": "siglip_vision_model"})
        text_config = dict(text_config or {"architectures": ["Qwen2ForCausalLM"]})
        if vision_config.get("model_type", "siglip_vision_model") != "siglip_vision_model":
            raise ValueError("Unsupported model_type: %s" % vision_config["model_type"])
        vision_config.pop("model_type", None)
        self.vision_config = SiglipVisionConfig(**vision_config)
        arch = text_config["architectures"][0]
        if arch not in LLM_TYPES:
            raise ValueError("Unsupported architecture: %s" % arch)
        text_config.pop("model_type", None)
        self.text_config = AutoConfig.for_model(LLM_TYPES[arch], **text_config)
        self.use_backbone_lora = use_backbone_lora
        self.use_llm_lora = use_llm_lora
        self.pad2square = pad2square
        self.select_layer = select_layer
        self.force_image_size = force_image_size
        self.downsample_ratio = downsample_ratio
        self.template = template
        self.dynamic_image_size = dynamic_image_size
        self.use_thumbnail = use_thumbnail
        self.loss_version = loss_version
        self.min_dynamic_tiles = min_dynamic_tiles
        self.max_dynamic_tiles = max_dynamic_tiles
        self.mlp_checkpoint = mlp_checkpoint
        self.image_token_index = image_token_index
        self.use_pixel_shuffle = use_pixel_shuffle
        self.mlp_connector_layers = mlp_connector_layers
        self.tie_word_embeddings = self.text_config.tie_word_embeddings
'''

VIT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
           num_attention_heads=4, num_channels=3, image_size=56, patch_size=14,
           hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6)


def siglip_mlp1_tensors(vcfg, make_text):
    """A SigLIP tower (vcfg) under vision_model.vision_model., the text model
    make_text() builds under language_model. and the InternVL-style
    projector mlp1 (LayerNorm, Linear, GELU, Linear, for a pixel shuffle of
    0.5) between them, BF16, seeded and drawn alike for every release that
    holds them so (Eagle 2.5, Llama Nemotron VL): name -> tensor."""
    import torch
    import transformers
    torch.manual_seed(1234)
    vision = transformers.SiglipVisionModel(vcfg).to(torch.bfloat16)
    text = make_text().to(torch.bfloat16)
    hv, h = vcfg.hidden_size, text.config.hidden_size
    mlp1 = torch.nn.Sequential(torch.nn.LayerNorm(4 * hv), torch.nn.Linear(4 * hv, h),
                               torch.nn.GELU(), torch.nn.Linear(h, h)).to(torch.bfloat16)
    new = {}
    with torch.no_grad():
        # transformers 5's SiglipVisionModel holds the transformer's modules
        # itself (embeddings.*, encoder.*, post_layernorm.*, head.*); 4.x and
        # the release nest them under vision_model.
        for prefix, m in (("vision_model.vision_model.", vision), ("mlp1.", mlp1),
                          ("language_model.", text)):
            for p in m.parameters():
                p.add_(torch.randn_like(p) * 0.02)
            for k, t in m.state_dict().items():
                new[prefix + k] = t.detach().clone().contiguous()
    return new


def make(out, select_layer=-1):
    import torch
    import transformers
    from ckpt_io import save_shards, write_release_config
    from make_ckpt import COMMON, word_tokenizer
    select_layer = int(select_layer)
    vcfg = transformers.SiglipVisionConfig(**VIT)
    tcfg = transformers.Qwen2Config(**dict(COMMON, tie_word_embeddings=False,
                                           bos_token_id=2, eos_token_id=1, pad_token_id=0))
    new = siglip_mlp1_tensors(vcfg, lambda: transformers.Qwen2ForCausalLM(tcfg))
    h = tcfg.hidden_size
    assert "vision_model.vision_model.head.probe" in new
    assert "language_model.model.layers.0.self_attn.q_proj.bias" in new
    os.makedirs(out, exist_ok=True)
    # shards as the release writes them: the tower and projector, then the
    # text model's layers, the head last
    groups = [sorted(k for k in new if not k.startswith("language_model.")),
              sorted(k for k in new if k.startswith("language_model.model.")
                     and ".layers." not in k)]
    for n in range(tcfg.num_hidden_layers):
        groups.append(sorted(k for k in new
                             if k.startswith("language_model.model.layers.%d." % n)))
    groups.append(["language_model.lm_head.weight"])
    assert sum(map(len, groups)) == len(new)
    save_shards(out, new, groups)

    text_config = tcfg.to_dict()
    text_config["architectures"] = ["Qwen2ForCausalLM"]
    text_config.pop("dtype", None)
    text_config.pop("head_dim", None)  # Qwen2's releases write none
    text_config["torch_dtype"] = "bfloat16"
    text_config["use_cache"] = True
    vision_config = vcfg.to_dict()
    vision_config.pop("dtype", None)
    vision_config["torch_dtype"] = "bfloat16"
    c = {"architectures": ["Eagle2_5_VLForConditionalGeneration"],
         "auto_map": {"AutoConfig": "configuration_eagle2_5_vl.Eagle2_5_VLConfig",
                      "AutoModel": "modeling_eagle2_5_vl.Eagle2_5_VLForConditionalGeneration",
                      "AutoModelForCausalLM":
                          "modeling_eagle2_5_vl.Eagle2_5_VLForConditionalGeneration"},
         "downsample_ratio": 0.5, "dynamic_image_size": False, "force_image_size": 56,
         "image_token_index": 999, "loss_version": "efficient_v2_cp_head",
         "max_dynamic_patch": 1, "max_dynamic_tiles": 1, "min_dynamic_patch": 1,
         "min_dynamic_tiles": 1, "mlp_checkpoint": False, "mlp_connector_layers": 2,
         "model_type": "eagle_2_5_vl", "pad2square": False, "select_layer": select_layer,
         "template": "qwen2-chat", "text_config": text_config,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "transformers_version": None, "use_backbone_lora": 0, "use_llm_lora": 0,
         "use_pixel_shuffle": True, "use_thumbnail": False,
         "vision_config": vision_config}
    write_release_config(out, c, {"configuration_eagle2_5_vl.py": CONFIG_PY})
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<img>": 997, "</img>": 996, "<IMG_CONTEXT>": 999,
               "<video>": 995, "<image>": 994}
    word_tokenizer(tcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def make_sel(out):
    """select_layer -2: vLLM builds the tower 2 layers deep, without its
    post_layernorm (SiglipVisionTransformer's require_post_norm)."""
    make(out, select_layer=-2)
