"""InternVL 2.5 / 3 / 3.5 in OpenGVLab's original remote-code layout
(InternVLChatModel, model_type internvl_chat: OpenGVLab/InternVL2_5-*,
InternVL3-1B..78B, InternVL3_5-* without -HF), tiny, as vLLM 0.32 reads it
(model_executor/models/internvl.py, intern_vit.py).

Transformers has no class for this layout, so the model is transformers'
InternVLForConditionalGeneration (the -hf layout), rewritten back into the
original one: the inverse of transformers' convert_internvl_weights_to_hf.py
(ORIGINAL_TO_CONVERTED_KEY_MAPPING_VISION / _MULTI, q/k/v split of attn.qkv):

    model.vision_tower.embeddings.cls_token            -> vision_model.embeddings.class_embedding
    model.vision_tower.embeddings.position_embeddings  -> vision_model.embeddings.position_embedding
    model.vision_tower.embeddings.patch_embeddings.projection.*
                                                       -> vision_model.embeddings.patch_embedding.*
    model.vision_tower.encoder.layer.N.attention.q/k/v_proj.{weight,bias}
                                                       -> vision_model.encoder.layers.N.attn.qkv.*
                                                          (q rows, then k, then v: [3*Hv, Hv])
    ...attention.projection_layer.*                    -> ...attn.proj.*
    ...attention.q_norm / k_norm                       -> ...attn.q_norm / k_norm  (InternViT-6B)
    ...lambda_1 / lambda_2                             -> ...ls1 / ls2
    ...layernorm_before / layernorm_after              -> ...norm1 / norm2
    ...mlp.fc1 / fc2                                   -> ...mlp.fc1 / fc2
    model.multi_modal_projector.layer_norm / linear_1 / linear_2
                                                       -> mlp1.0 / mlp1.1 / mlp1.3
    model.language_model.*                             -> language_model.model.*
    lm_head.*                                          -> language_model.lm_head.*

llm="qwen2" (InternVL 2.5 / 3), "qwen3" and "qwen3_moe" (InternVL 3.5; the
MoE's experts written one by one, as the release has them), "llama"
(InternVL2-40B/76B's Yi and Llama 3, InternVL3-9B's InternLM3 holds the
same names).  With llm="internlm2" (InternVL2 / 2.5 -2B, -8B, -20B/26B: InternLM2 / 2.5
text models) the text model is further rewritten as ckpt_internlm2.py does
(tok_embeddings, attention.wqkv packed by kv group, feed_forward.w1/w3/w2,
attention_norm, ffn_norm, output).

vit="300m" (InternViT-300M-448px-V2_5's form: LayerNorm with biases, q/k/v
biases, no q/k norm; 4 heads of 16) or vit="6b" (InternViT-6B's form:
RMSNorm without biases, no q/k/v bias, q_norm/k_norm over all heads
(qk_normalization); 5 heads of 16, which tp 2 and 4 do not divide, so that
vLLM keeps that tower's attention whole there), or vit="6b4" (the same with 4
heads, cut per head).  All 3 layers over one
56x56 tile of 14-pixel patches, pixel-shuffled 2x2 into 4 image tokens.

config.json is the release's (InternVLChatConfig.to_dict()'s keys:
llm_config, vision_config with model_type intern_vit_6b, select_layer,
force_image_size, downsample_ratio, ps_version, dynamic_image_size,
min/max_dynamic_patch, use_thumbnail, template, auto_map), and
configuration_internvl_chat.py / configuration_intern_vit.py (and
configuration_internlm2.py) beside it, minimal versions of the release's
for trust_remote_code: neither transformers nor vLLM 0.32 knows the model
type internvl_chat (vLLM only remaps llm_config to text_config,
transformers_utils/config.py _CONFIG_ATTRS_MAPPING).

The tokenizer: vLLM's own InternVLProcessor (transformers_utils/processors/
internvl.py) takes the tokenizer alone (its image processor is vLLM's,
sized from the config) and looks up <img>, </img> and <IMG_CONTEXT> by text;
a prompt's image stands at the text "<image>", which vLLM replaces by
<img> + <IMG_CONTEXT> x 4 + </img>.  Word-level, as make_ckpt.py's
internvl_processor: <img> 997, </img> 996, <IMG_CONTEXT> 999,
<video> 995, <image> 994.

    ckpt_internvl_chat.py OUT [llm=qwen2|llama|qwen3|qwen3_moe|internlm2] [vit=300m|6b|6b4] [tie=0|1] [select_layer=N]
"""
import os

VIT_PY = '''"""InternViT's configuration (the keys of OpenGVLab's
configuration_intern_vit.py), written for the wshard test checkpoints."""
from transformers.configuration_utils import PretrainedConfig


class InternVisionConfig(PretrainedConfig):
    model_type = "intern_vit_6b"

    def __init__(self, num_channels=3, patch_size=14, image_size=224, qkv_bias=False,
                 hidden_size=3200, num_attention_heads=25, intermediate_size=12800,
                 qk_normalization=True, num_hidden_layers=48, use_flash_attn=True,
                 hidden_act="gelu", norm_type="rms_norm", layer_norm_eps=1e-6, dropout=0.0,
                 drop_path_rate=0.0, attention_dropout=0.0, initializer_range=0.02,
                 initializer_factor=0.1, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.dropout = dropout
        self.drop_path_rate = drop_path_rate
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_channels = num_channels
        self.patch_size = patch_size
        self.image_size = image_size
        self.initializer_range = initializer_range
        self.initializer_factor = initializer_factor
        self.attention_dropout = attention_dropout
        self.layer_norm_eps = layer_norm_eps
        self.hidden_act = hidden_act
        self.norm_type = norm_type
        self.qkv_bias = qkv_bias
        self.qk_normalization = qk_normalization
        self.use_flash_attn = use_flash_attn
'''

CHAT_PY = '''"""InternVL's configuration (the keys of OpenGVLab's
configuration_internvl_chat.py), written for the wshard test checkpoints."""
from transformers import AutoConfig
from transformers.configuration_utils import PretrainedConfig

from .configuration_intern_vit import InternVisionConfig
%(internlm2_import)s

LLM_TYPES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
             "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe"}


class InternVLChatConfig(PretrainedConfig):
    model_type = "internvl_chat"
    is_composition = True

    def __init__(self, vision_config=None, llm_config=None, use_backbone_lora=0,
                 use_llm_lora=0, select_layer=-1, force_image_size=None,
                 downsample_ratio=0.5, template=None, dynamic_image_size=False,
                 use_thumbnail=False, ps_version="v1", min_dynamic_patch=1,
                 max_dynamic_patch=6, **kwargs):
        super().__init__(**kwargs)
        vision_config = dict(vision_config or {})
        llm_config = dict(llm_config or {"architectures": ["Qwen2ForCausalLM"]})
        self.vision_config = InternVisionConfig(**vision_config)
        arch = llm_config["architectures"][0]
        if arch == "InternLM2ForCausalLM":
            self.llm_config = InternLM2Config(**llm_config)
        elif arch in LLM_TYPES:
            llm_config.pop("model_type", None)
            self.llm_config = AutoConfig.for_model(LLM_TYPES[arch], **llm_config)
        else:
            raise ValueError("Unsupported architecture: %%s" %% arch)
        self.use_backbone_lora = use_backbone_lora
        self.use_llm_lora = use_llm_lora
        self.select_layer = select_layer
        self.force_image_size = force_image_size
        self.downsample_ratio = downsample_ratio
        self.template = template
        self.dynamic_image_size = dynamic_image_size
        self.use_thumbnail = use_thumbnail
        self.ps_version = ps_version
        self.min_dynamic_patch = min_dynamic_patch
        self.max_dynamic_patch = max_dynamic_patch
'''

VITS = {
    # InternViT-300M-448px-V2_5 (InternVL 2.5 / 3 / 3.5 below 38B)
    "300m": dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                 qkv_bias=True, qk_normalization=False, norm_type="layer_norm"),
    # InternViT-6B-448px-V2_5 (InternVL 2.5 / 3 38B and 78B, 3.5 241B)
    "6b": dict(hidden_size=80, intermediate_size=160, num_attention_heads=5,
               qkv_bias=False, qk_normalization=True, norm_type="rms_norm"),
    # InternViT-6B's form with heads that tp 2 and 4 divide (cut per head,
    # q_norm/k_norm still whole)
    "6b4": dict(hidden_size=80, intermediate_size=160, num_attention_heads=4,
                qkv_bias=False, qk_normalization=True, norm_type="rms_norm"),
}

LLM_ARCH = {"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM",
            "qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
            "internlm2": "InternLM2ForCausalLM"}


def make(out, llm="qwen2", vit="300m", tie=False, select_layer=-1):
    import torch
    import transformers
    from ckpt_io import perturb, save_shards
    from make_ckpt import COMMON, word_tokenizer
    v = VITS[vit]
    text_type = "llama" if llm == "internlm2" else llm
    text = dict(COMMON, model_type=text_type, tie_word_embeddings=bool(tie),
                bos_token_id=2, eos_token_id=1, pad_token_id=0)
    if llm == "qwen3_moe":
        # InternVL3_5-30B-A3B's form: every layer MoE, no shared expert
        text.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256,
                    decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True)
    cfg = transformers.InternVLConfig(
        image_token_id=999, image_seq_length=4, tie_word_embeddings=bool(tie),
        downsample_ratio=0.5, vision_feature_layer=-1,
        vision_config={"hidden_size": v["hidden_size"],
                       "intermediate_size": v["intermediate_size"],
                       "num_hidden_layers": 3,
                       "num_attention_heads": v["num_attention_heads"],
                       "attention_bias": v["qkv_bias"], "use_qk_norm": v["qk_normalization"],
                       "norm_type": v["norm_type"], "layer_norm_eps": 1e-6,
                       "image_size": [56, 56], "patch_size": [14, 14]},
        text_config=text)
    torch.manual_seed(1234)
    model = transformers.InternVLForConditionalGeneration(cfg).to(torch.bfloat16)
    perturb(model)
    sd = {k: t.detach().clone().contiguous() for k, t in model.state_dict().items()}
    new = {}
    # the tower
    vt = "model.vision_tower."
    e = vt + "embeddings."
    new["vision_model.embeddings.class_embedding"] = sd.pop(e + "cls_token")
    new["vision_model.embeddings.position_embedding"] = sd.pop(e + "position_embeddings")
    for s in ("weight", "bias"):
        new["vision_model.embeddings.patch_embedding." + s] = sd.pop(
            e + "patch_embeddings.projection." + s)
    ren = {"attention.projection_layer.": "attn.proj.", "attention.q_norm.": "attn.q_norm.",
           "attention.k_norm.": "attn.k_norm.", "lambda_1": "ls1", "lambda_2": "ls2",
           "layernorm_before.": "norm1.", "layernorm_after.": "norm2.",
           "mlp.fc1.": "mlp.fc1.", "mlp.fc2.": "mlp.fc2."}
    for n in range(cfg.vision_config.num_hidden_layers):
        p = vt + "encoder.layer.%d." % n
        o = "vision_model.encoder.layers.%d." % n
        for s in ("weight", "bias"):
            if p + "attention.q_proj." + s in sd:
                new[o + "attn.qkv." + s] = torch.cat(
                    [sd.pop(p + "attention.%s_proj.%s" % (x, s)) for x in "qkv"]).contiguous()
        for k in [k for k in sd if k.startswith(p)]:
            rest = k[len(p):]
            for a, b in ren.items():
                if rest.startswith(a):
                    new[o + b + rest[len(a):]] = sd.pop(k)
                    break
    # the projector
    for a, b in (("layer_norm.", "mlp1.0."), ("linear_1.", "mlp1.1."), ("linear_2.", "mlp1.3.")):
        for s in ("weight", "bias"):
            new[b + s] = sd.pop("model.multi_modal_projector." + a + s)
    # the text model
    lm = {}
    for k in [k for k in sd if k.startswith("model.language_model.")]:
        lm["model." + k[len("model.language_model."):]] = sd.pop(k)
    head = sd.pop("lm_head.weight")
    if not tie:
        lm["lm_head.weight"] = head
    if llm == "internlm2":
        from ckpt_internlm2 import release_names
        lm = release_names(lm, cfg.text_config)
    if llm == "qwen3_moe":
        lm = per_expert(lm)
    for k, t in lm.items():
        new["language_model." + k] = t
    assert not sd, sorted(sd)
    # shards as the releases write them: the tower and projector, then the
    # text model's layers, the head last
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in new if not k.startswith("language_model.")),
              sorted(k for k in new if k.startswith("language_model.") and ".layers." not in k
                     and "lm_head" not in k and "output" not in k)]
    for n in range(cfg.text_config.num_hidden_layers):
        groups.append(sorted(k for k in new if ".layers.%d." % n in k
                             and k.startswith("language_model.")))
    groups.append(sorted(k for k in new if k in ("language_model.lm_head.weight",
                                                    "language_model.output.weight")))
    groups = [g for g in groups if g]
    assert sum(map(len, groups)) == len(new)
    save_shards(out, new, groups)
    write_config(out, cfg, llm, vit, tie, int(select_layer))
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<img>": 997, "</img>": 996, "<IMG_CONTEXT>": cfg.image_token_id,
               "<video>": 995, "<image>": 994}
    word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def per_expert(lm):
    """transformers 5 holds a layer's experts fused (mlp.experts.gate_up_proj
    [E, 2I, H], gate rows first; mlp.experts.down_proj [E, H, I]); the
    release has them one by one (mlp.experts.E.gate_proj / up_proj /
    down_proj.weight), as transformers' save_pretrained writes them."""
    new = {}
    for k, t in lm.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            p = k[:-len("gate_up_proj")]
            inter = t.shape[1] // 2
            for e in range(t.shape[0]):
                new[p + "%d.gate_proj.weight" % e] = t[e, :inter].contiguous()
                new[p + "%d.up_proj.weight" % e] = t[e, inter:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            p = k[:-len("down_proj")]
            for e in range(t.shape[0]):
                new[p + "%d.down_proj.weight" % e] = t[e].contiguous()
        else:
            new[k] = t
    return new


def write_config(out, cfg, llm, vit, tie, select_layer=-1):
    from ckpt_io import write_release_config
    v = VITS[vit]
    tc = cfg.text_config
    if llm == "internlm2":
        from ckpt_internlm2 import CONFIG_PY as INTERNLM2_PY
        llm_config = {"architectures": ["InternLM2ForCausalLM"], "attn_implementation": "eager",
                      "auto_map": {"AutoConfig": "configuration_internlm2.InternLM2Config",
                                   "AutoModel": "modeling_internlm2.InternLM2ForCausalLM",
                                   "AutoModelForCausalLM":
                                       "modeling_internlm2.InternLM2ForCausalLM"},
                      "bias": False, "bos_token_id": 2, "eos_token_id": 1,
                      "hidden_act": "silu", "hidden_size": tc.hidden_size,
                      "initializer_range": 0.02, "intermediate_size": tc.intermediate_size,
                      "max_position_embeddings": tc.max_position_embeddings,
                      "model_type": "internlm2",
                      "num_attention_heads": tc.num_attention_heads,
                      "num_hidden_layers": tc.num_hidden_layers,
                      "num_key_value_heads": tc.num_key_value_heads, "pad_token_id": 0,
                      "pretraining_tp": 1, "rms_norm_eps": 1e-05,
                      "rope_scaling": {"factor": 2.0, "type": "dynamic"},
                      "rope_theta": 1000000, "tie_word_embeddings": bool(tie),
                      "torch_dtype": "bfloat16", "use_cache": True,
                      "vocab_size": tc.vocab_size}
    else:
        llm_config = tc.to_dict()
        llm_config["architectures"] = [LLM_ARCH[llm]]
        llm_config.pop("dtype", None)
        llm_config["torch_dtype"] = "bfloat16"
        llm_config["use_cache"] = True
        if llm == "qwen3_moe" and llm_config.get("num_experts") is None:
            # transformers 5 writes num_local_experts; the release (4.x) num_experts
            llm_config.pop("num_experts", None)
            llm_config["num_experts"] = llm_config.pop("num_local_experts")
        if llm in ("qwen2", "llama"):
            # Qwen2.5's and Llama's releases write no head_dim (Qwen3's do)
            llm_config.pop("head_dim", None)
    vision_config = {"architectures": ["InternVisionModel"], "attention_dropout": 0.0,
                     "drop_path_rate": 0.0, "dropout": 0.0, "hidden_act": "gelu",
                     "hidden_size": v["hidden_size"], "image_size": 56,
                     "initializer_factor": 0.1, "initializer_range": 1e-10,
                     "intermediate_size": v["intermediate_size"], "layer_norm_eps": 1e-6,
                     "model_type": "intern_vit_6b", "norm_type": v["norm_type"],
                     "num_attention_heads": v["num_attention_heads"], "num_channels": 3,
                     "num_hidden_layers": 3, "patch_size": 14,
                     "qk_normalization": v["qk_normalization"], "qkv_bias": v["qkv_bias"],
                     "torch_dtype": "bfloat16", "use_flash_attn": False}
    c = {"architectures": ["InternVLChatModel"],
         "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig",
                      "AutoModel": "modeling_internvl_chat.InternVLChatModel",
                      "AutoModelForCausalLM": "modeling_internvl_chat.InternVLChatModel"},
         "downsample_ratio": 0.5, "dynamic_image_size": False, "force_image_size": 56,
         "llm_config": llm_config, "max_dynamic_patch": 1, "min_dynamic_patch": 1,
         "model_type": "internvl_chat", "pad2square": False, "ps_version": "v2",
         "select_layer": select_layer, "template": "internvl2_5", "tie_word_embeddings": bool(tie),
         "torch_dtype": "bfloat16", "transformers_version": None, "use_backbone_lora": 0,
         "use_llm_lora": 0, "use_thumbnail": False, "vision_config": vision_config}
    code = {"configuration_intern_vit.py": VIT_PY,
            "configuration_internvl_chat.py": CHAT_PY % {
                "internlm2_import": "from .configuration_internlm2 import InternLM2Config"
                if llm == "internlm2" else "InternLM2Config = None"}}
    if llm == "internlm2":
        code["configuration_internlm2.py"] = INTERNLM2_PY
    write_release_config(out, c, code)


# the variants make_ckpt.py's OWN table names (module:function)
def make_6b(out):
    """Qwen2 with InternViT-6B's form (5 heads: attention whole at tp 2, 4)."""
    make(out, vit="6b")


def make_6b4(out):
    """Qwen2 with InternViT-6B's form, 4 heads (q/k norms beside cut heads)."""
    make(out, vit="6b4")


def make_tie(out):
    make(out, tie=True)


def make_llama(out):
    make(out, llm="llama", vit="6b")


def make_qwen3(out):
    make(out, llm="qwen3")


def make_qwen3_moe(out):
    make(out, llm="qwen3_moe")


def make_internlm2(out):
    make(out, llm="internlm2")
