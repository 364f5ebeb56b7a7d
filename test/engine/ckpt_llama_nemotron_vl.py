"""NVIDIA's Llama Nemotron VL embedding model and reranker, tiny, as vLLM
0.32 reads them (model_executor/models/nemotron_vl.py: LlamaNemotronVLModel
-> LlamaNemotronVLForEmbedding, LlamaNemotronVLForSequenceClassification;
siglip.py, llama.py; model_executor/models/config.py LlamaNemotronVLConfig).

The embedding model (nvidia/llama-nemotron-embed-vl-1b-v2's form,
model_type llama_nemotron_vl, remote code): transformers' SiglipVisionModel
under vision_model. (its transformers 4.x names, so
vision_model.vision_model.*, the pooling head kept as the release holds it:
vLLM drops it), the bidirectional Llama text model of llm_config saved as
a bare LlamaModel (LlamaBidirectionalModel) under language_model.
(language_model.layers.*, .embed_tokens., .norm.: no LM head) and the
projector mlp1 (nn.Sequential: LayerNorm(4*Hv), Linear(4*Hv, hidden), GELU,
Linear(hidden, hidden): indices 0, 1, 3).  Random, seeded.  The tower: 2
layers of 4 heads of 16 over one 56x56 tile of 14-pixel patches,
pixel-shuffled 2x2 into 4 image tokens; the text model make_ckpt.py's
COMMON.

The reranker (make_cls; nvidia/llama-nemotron-rerank-vl-1b-v2's form): the
same model under model., llm_config's architecture
LlamaBidirectionalForSequenceClassification (num_labels 1), and its head
score.weight [1, hidden] at the top; no language_model.score (vLLM builds
one and fills it with random values: nemotron_vl.py's load_weights).

config.json as the releases write it (LlamaNemotronVLConfig's keys:
vision_config with model_type siglip_vision_model, llm_config with its
architectures and model_type llama_bidirec, select_layer, force_image_size,
downsample_ratio, dynamic_image_size, use_thumbnail, min/max_dynamic_patch,
max_input_tiles, pooling, img_context_token_id, query/passage prefixes),
with configuration_llama_nemotron_vl.py beside it (a minimal version of
the release's, for trust_remote_code: neither transformers nor vLLM 0.32
knows the model type llama_nemotron_vl; vLLM remaps llm_config to
text_config).

The processor is vLLM's LlamaNemotronVLEmbedProcessor (InternVL's with
SigLIP's normalisation), the tokenizer ckpt_internvl_chat.py's: <img> 997,
</img> 996, <IMG_CONTEXT> 999, <video> 995, <image> 994; a prompt's image
stands at <image>, which vLLM replaces by <img> + <IMG_CONTEXT> x 4 + </img>.

    ckpt_llama_nemotron_vl.py OUT
"""
import json
import os

CONFIG_PY = '''"""Llama Nemotron VL's configuration (the keys of NVIDIA's
LlamaNemotronVLConfig), written for the wshard test checkpoints."""
from transformers import LlamaConfig, SiglipVisionConfig
from transformers.configuration_utils import PretrainedConfig


class LlamaBidirectionalConfig(LlamaConfig):
    model_type = "llama_bidirec"

    def __init__(self, pooling="avg", temperature=1.0, **kwargs):
        self.pooling = pooling
        self.temperature = temperature
        super().__init__(**kwargs)


class LlamaNemotronVLConfig(PretrainedConfig):
    model_type = "llama_nemotron_vl"
    is_composition = True
    has_no_defaults_at_init = True

    def __init__(self, vision_config=None, llm_config=None, use_backbone_lora=0,
                 use_llm_lora=0, select_layer=-1, force_image_size=None,
                 downsample_ratio=0.5, template=None, dynamic_image_size=False,
                 use_thumbnail=False, min_dynamic_patch=1, max_dynamic_patch=6,
                 mlp_checkpoint=True, pre_feature_reduction=False, keep_aspect_ratio=False,
                 vocab_size=-1, q_max_length=512, p_max_length=10240,
                 query_prefix="query:", passage_prefix="passage:", pooling="last",
                 bidirectional_attention=False, max_input_tiles=2,
                 img_context_token_id=128258, **kwargs):
        vision_config = dict(vision_config or {"model_type": "siglip_vision_model"})
        llm_config = dict(llm_config or {"architectures": ["LlamaBidirectionalModel"]})
        if vision_config.get("model_type") != "siglip_vision_model":
            raise ValueError("Unsupported model_type: %s" % vision_config.get("model_type"))
        vision_config.pop("model_type", None)
        self.vision_config = SiglipVisionConfig(**vision_config)
        if llm_config["architectures"][0] not in (
                "LlamaBidirectionalModel", "LlamaBidirectionalForSequenceClassification"):
            raise ValueError("Unsupported architecture: %s" % llm_config["architectures"][0])
        llm_config.pop("model_type", None)
        self.llm_config = LlamaBidirectionalConfig(**llm_config)
        self.vocab_size = self.llm_config.vocab_size
        self.use_backbone_lora = use_backbone_lora
        self.use_llm_lora = use_llm_lora
        self.select_layer = select_layer
        self.force_image_size = force_image_size
        self.downsample_ratio = downsample_ratio
        self.template = template
        self.dynamic_image_size = dynamic_image_size
        self.use_thumbnail = use_thumbnail
        self.min_dynamic_patch = min_dynamic_patch
        self.max_dynamic_patch = max_dynamic_patch
        self.mlp_checkpoint = mlp_checkpoint
        self.pre_feature_reduction = pre_feature_reduction
        self.keep_aspect_ratio = keep_aspect_ratio
        self.q_max_length = q_max_length
        self.p_max_length = p_max_length
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.pooling = pooling
        self.bidirectional_attention = bidirectional_attention
        self.img_context_token_id = img_context_token_id
        self.max_input_tiles = max_input_tiles
        super().__init__(**kwargs)
'''

VIT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
           num_attention_heads=4, num_channels=3, image_size=56, patch_size=14,
           hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6)


def _model(cls_head):
    """The embedding model's tensors (the release's names) and configs."""
    import torch
    import transformers
    from make_ckpt import COMMON
    vcfg = transformers.SiglipVisionConfig(**VIT)
    tcfg = transformers.LlamaConfig(**dict(COMMON, tie_word_embeddings=False, bos_token_id=2,
                                           eos_token_id=1, pad_token_id=0,
                                           rope_theta=500000.0))
    from ckpt_eagle2_5_vl import siglip_mlp1_tensors
    new = siglip_mlp1_tensors(vcfg, lambda: transformers.LlamaModel(tcfg))
    h = tcfg.hidden_size
    with torch.no_grad():
        if cls_head:
            new["score.weight"] = (torch.randn(1, h) * 0.05).to(torch.bfloat16)
    assert "vision_model.vision_model.head.probe" in new
    assert "language_model.layers.0.self_attn.q_proj.weight" in new
    return new, vcfg, tcfg


def make(out, cls_head=False):
    import torch  # noqa: F401
    from ckpt_io import save_shards, write_release_config
    from make_ckpt import word_tokenizer
    new, vcfg, tcfg = _model(cls_head)
    if cls_head:
        new = {k if k == "score.weight" else "model." + k: t for k, t in new.items()}
    os.makedirs(out, exist_ok=True)
    # two shards, as the 1B releases ship them: the tower, projector and
    # head, then the text model
    text = sorted(k for k in new if ".language_model." in "." + k)
    save_shards(out, new, [sorted(set(new) - set(text)), text])

    llm_config = tcfg.to_dict()
    llm_config["architectures"] = (["LlamaBidirectionalForSequenceClassification"] if cls_head
                                   else ["LlamaBidirectionalModel"])
    llm_config["model_type"] = "llama_bidirec"
    llm_config["pooling"] = "avg"
    llm_config["temperature"] = 1.0
    llm_config.pop("dtype", None)
    llm_config["torch_dtype"] = "bfloat16"
    if cls_head:
        llm_config["id2label"] = {"0": "LABEL_0"}
        llm_config["label2id"] = {"LABEL_0": 0}
    else:
        llm_config.pop("id2label", None)
        llm_config.pop("label2id", None)
    vision_config = vcfg.to_dict()
    vision_config.pop("dtype", None)
    vision_config["torch_dtype"] = "bfloat16"
    arch = ("LlamaNemotronVLForSequenceClassification" if cls_head
            else "LlamaNemotronVLModel")
    c = {"architectures": [arch],
         "auto_map": {"AutoConfig": "configuration_llama_nemotron_vl.LlamaNemotronVLConfig",
                      "AutoModel": "modeling_llama_nemotron_vl." + arch},
         "bidirectional_attention": False, "downsample_ratio": 0.5,
         "dynamic_image_size": True, "force_image_size": 56,
         "img_context_token_id": 999, "keep_aspect_ratio": False, "llm_config": llm_config,
         "max_dynamic_patch": 1, "max_input_tiles": 1, "min_dynamic_patch": 1,
         "mlp_checkpoint": True, "model_type": "llama_nemotron_vl",
         "p_max_length": 10240, "passage_prefix": "passage:", "pooling": "avg",
         "ps_version": "v2",
         "pre_feature_reduction": False, "q_max_length": 512, "query_prefix": "query:",
         "select_layer": -1, "template": "bidirectional-llama-retriever",
         "torch_dtype": "bfloat16", "transformers_version": None,
         "use_backbone_lora": 0, "use_llm_lora": 0, "use_thumbnail": True,
         "vision_config": vision_config}
    write_release_config(out, c, {"configuration_llama_nemotron_vl.py": CONFIG_PY})
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<img>": 997, "</img>": 996, "<IMG_CONTEXT>": 999,
               "<video>": 995, "<image>": 994}
    word_tokenizer(tcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def make_cls(out):
    """The reranker: the embedding model under model., score.weight at the
    top."""
    make(out, cls_head=True)


# Llama-3.1-Nemotron-Nano-VL (Llama_Nemotron_Nano_VL ->
# LlamaNemotronVLChatModel): vLLM builds its C-RADIO tower with
# AutoModel.from_config(config.vision_config, trust_remote_code) from the
# release's remote code (nvidia/C-RADIOv2-H's hf_model.py, named by
# vision_config's auto_map with the "--" repository form), plain
# transformers modules whole on every rank.  No network here: the stand-in
# below is a small ViT under C-RADIO's names (radio_model.input_conditioner.
# norm_mean / norm_std, radio_model.summary_idxs, radio_model.model.
# patch_generator.embedder / pos_embed / cls_token.token, radio_model.model.
# blocks.N.norm1 / attn.qkv / attn.proj / norm2 / mlp.fc1 / mlp.fc2) whose
# forward(x) returns C-RADIO's output (summary, features) but none of its
# position interpolation; the configuration registers it with AutoModel
# (local code) instead of naming another repository.
NANO_CONFIG_PY = '''"""Llama-3.1-Nemotron-Nano-VL's configuration (the keys of NVIDIA's
configuration.py), written for the wshard test checkpoints; its vision
config is the stand-in C-RADIO's (radio_standin.py)."""
from transformers import LlamaConfig
from transformers.configuration_utils import PretrainedConfig

from .radio_standin import RADIOConfig


class Nemotron_Nano_VL_Config(PretrainedConfig):
    model_type = "Llama_Nemotron_Nano_VL"
    is_composition = True

    def __init__(self, vision_config=None, llm_config=None, force_image_size=None,
                 downsample_ratio=0.5, template=None, ps_version="v1",
                 image_tag_type="internvl", projector_hidden_size=4096,
                 vit_hidden_size=1280, **kwargs):
        super().__init__(**kwargs)
        self.vision_config = RADIOConfig(**(vision_config or {}))
        self.text_config = LlamaConfig(**(llm_config or {}))
        self.force_image_size = force_image_size
        self.downsample_ratio = downsample_ratio
        self.template = template
        self.ps_version = ps_version
        self.image_tag_type = image_tag_type
        self.projector_hidden_size = projector_hidden_size
        self.vit_hidden_size = vit_hidden_size
'''

RADIO_PY = '''"""A stand-in for C-RADIO (nvidia/C-RADIOv2-H's hf_model.py) for the wshard
test checkpoints: C-RADIO's parameter names and output, a plain ViT's
forward."""
from types import SimpleNamespace

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers.configuration_utils import PretrainedConfig


class RADIOConfig(PretrainedConfig):
    model_type = "radio_standin"

    def __init__(self, args=None, version="radio_v2.5-h", patch_size=16,
                 max_resolution=2048, preferred_resolution=(768, 768), adaptor_names=None,
                 adaptor_configs=None, vitdet_window_size=None,
                 feature_normalizer_config=None, inter_feature_normalizer_config=None,
                 **kwargs):
        self.args = args or {}
        self.version = version
        self.patch_size = patch_size
        self.max_resolution = max_resolution
        self.preferred_resolution = list(preferred_resolution)
        self.adaptor_names = adaptor_names
        self.adaptor_configs = adaptor_configs or {}
        self.vitdet_window_size = vitdet_window_size
        self.feature_normalizer_config = feature_normalizer_config
        self.inter_feature_normalizer_config = inter_feature_normalizer_config
        super().__init__(**kwargs)


class InputConditioner(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("norm_mean", torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1))
        self.register_buffer("norm_std", torch.tensor(std, dtype=torch.float32).view(-1, 1, 1))

    def forward(self, x):
        return (x.float() - self.norm_mean) / self.norm_std


class ClsToken(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(n, d))


class PatchGenerator(nn.Module):
    def __init__(self, p, grid, n_cls, d):
        super().__init__()
        self.p = p
        self.embedder = nn.Linear(3 * p * p, d, bias=False)
        self.pos_embed = nn.Parameter(torch.zeros(1, grid * grid, d))
        self.cls_token = ClsToken(n_cls, d)

    def forward(self, x):
        b, c, h, w = x.shape
        p = self.p
        x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
        x = self.embedder(x.reshape(b, (h // p) * (w // p), c * p * p)) + self.pos_embed
        return torch.cat([self.cls_token.token.unsqueeze(0).expand(b, -1, -1), x], dim=1)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, d))


class Mlp(nn.Module):
    def __init__(self, d, i):
        super().__init__()
        self.fc1 = nn.Linear(d, i)
        self.fc2 = nn.Linear(i, d)

    def forward(self, x):
        return self.fc2(nn.functional.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d, heads, i):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, eps=1e-6)
        self.attn = Attention(d, heads)
        self.norm2 = nn.LayerNorm(d, eps=1e-6)
        self.mlp = Mlp(d, i)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, a, p, grid):
        super().__init__()
        d = a["hidden_size"]
        self.patch_generator = PatchGenerator(p, grid, a["num_cls_tokens"] + a["num_registers"], d)
        self.blocks = nn.ModuleList(Block(d, a["num_attention_heads"], a["intermediate_size"])
                                    for _ in range(a["num_hidden_layers"]))


class RadioCore(nn.Module):
    def __init__(self, config):
        super().__init__()
        a = config.args
        self.input_conditioner = InputConditioner(a["norm_mean"], a["norm_std"])
        self.model = VisionTransformer(a, config.patch_size,
                                       config.preferred_resolution[0] // config.patch_size)
        self.register_buffer("summary_idxs", torch.arange(a["num_cls_tokens"]))


class RADIOModel(PreTrainedModel):
    config_class = RADIOConfig
    base_model_prefix = "radio_model"

    def __init__(self, config):
        super().__init__(config)
        self.radio_model = RadioCore(config)
        self.post_init()

    def _init_weights(self, module):
        pass

    def forward(self, x):
        r = self.radio_model
        a = self.config.args
        dtype = r.model.patch_generator.embedder.weight.dtype
        h = r.model.patch_generator(r.input_conditioner(x).to(dtype))
        for block in r.model.blocks:
            h = block(h)
        skip = a["num_cls_tokens"] + a["num_registers"]
        return SimpleNamespace(summary=h[:, r.summary_idxs].flatten(1), features=h[:, skip:])


AutoModel.register(RADIOConfig, RADIOModel, exist_ok=True)
'''

IMAGE_PY = '''"""A stand-in for Llama-3.1-Nemotron-Nano-VL's image_processing.py for the
wshard test checkpoints: vLLM reads image_size, max_num_tiles and
use_thumbnail from it and processes images itself."""
from transformers.image_processing_utils import BaseImageProcessor


class NemotronNanoVLImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values"]

    def __init__(self, image_size=512, max_num_tiles=12, use_thumbnail=True,
                 norm_mean=None, norm_std=None, **kwargs):
        super().__init__(**kwargs)
        self.image_size = image_size
        self.max_num_tiles = max_num_tiles
        self.use_thumbnail = use_thumbnail
        self.norm_mean = norm_mean
        self.norm_std = norm_std
'''

NANO_ARGS = {"model": "vit_huge_patch16_224", "hidden_size": 32, "num_hidden_layers": 2,
             "num_attention_heads": 4, "intermediate_size": 128, "num_cls_tokens": 2,
             "num_registers": 2, "cpe_max_size": 2048, "register_multiple": 4,
             "cls_token_per_teacher": True,
             "norm_mean": [0.48145466, 0.4578275, 0.40821073],
             "norm_std": [0.26862954, 0.26130258, 0.27577711],
             "teachers": [{"name": "siglip2-g", "use_summary": True},
                          {"name": "dfn_clip", "use_summary": True}]}


def make_nano(out):
    """Llama-3.1-Nemotron-Nano-VL-8B-V1's form: the stand-in C-RADIO under
    vision_model., mlp1 (LayerNorm(4*Hv), Linear(4*Hv, projector_hidden_size),
    GELU, Linear(projector_hidden_size, hidden)), the Llama text model under
    language_model. (untied), one 64x64 tile of 16-pixel patches."""
    import importlib.util
    import sys
    import tempfile

    import torch
    import transformers
    from ckpt_io import save_shards, write_release_config
    from make_ckpt import COMMON, word_tokenizer
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "radio_standin.py")
        with open(path, "w") as f:
            f.write(RADIO_PY)
        spec = importlib.util.spec_from_file_location("radio_standin", path)
        radio = importlib.util.module_from_spec(spec)
        sys.modules["radio_standin"] = radio
        spec.loader.exec_module(radio)
    vcfg = radio.RADIOConfig(args=NANO_ARGS, patch_size=16, preferred_resolution=[64, 64],
                             max_resolution=2048)
    tcfg = transformers.LlamaConfig(**dict(COMMON, tie_word_embeddings=False, bos_token_id=2,
                                           eos_token_id=1, pad_token_id=0,
                                           rope_theta=500000.0))
    torch.manual_seed(4321)
    vision = radio.RADIOModel(vcfg)
    text = transformers.LlamaForCausalLM(tcfg).to(torch.bfloat16)
    hv, h, ph = NANO_ARGS["hidden_size"], tcfg.hidden_size, 48
    mlp1 = torch.nn.Sequential(torch.nn.LayerNorm(4 * hv), torch.nn.Linear(4 * hv, ph),
                               torch.nn.GELU(), torch.nn.Linear(ph, h)).to(torch.bfloat16)
    new = {}
    with torch.no_grad():
        for p in vision.parameters():
            p.copy_(torch.randn_like(p) * 0.05 + (1.0 if p.dim() == 1 and p.shape[0] == hv
                                                  else 0.0))
            p.data = p.data.to(torch.bfloat16)
        for prefix, m in (("vision_model.", vision), ("mlp1.", mlp1), ("language_model.", text)):
            if m is not vision:
                for p in m.parameters():
                    p.add_(torch.randn_like(p) * 0.02)
            for k, t in m.state_dict().items():
                new[prefix + k] = t.detach().clone().contiguous()
    assert new["vision_model.radio_model.input_conditioner.norm_mean"].dtype == torch.float32
    assert new["vision_model.radio_model.model.blocks.0.attn.qkv.weight"].dtype == torch.bfloat16
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in new if not k.startswith("language_model.")),
              sorted(k for k in new if k.startswith("language_model."))]
    save_shards(out, new, groups)

    llm_config = tcfg.to_dict()
    llm_config["architectures"] = ["LlamaForCausalLM"]
    llm_config.pop("dtype", None)
    llm_config["torch_dtype"] = "bfloat16"
    vision_config = vcfg.to_dict()
    vision_config.pop("dtype", None)
    vision_config.pop("model_type", None)
    vision_config["auto_map"] = {"AutoConfig": "radio_standin.RADIOConfig"}
    vision_config["torch_dtype"] = "bfloat16"
    c = {"architectures": ["Llama_Nemotron_Nano_VL"],
         "auto_map": {"AutoConfig": "configuration.Nemotron_Nano_VL_Config",
                      "AutoModel": "modeling.Llama_Nemotron_Nano_VL",
                      "AutoModelForCausalLM": "modeling.Llama_Nemotron_Nano_VL"},
         "downsample_ratio": 0.5, "force_image_size": 64, "image_tag_type": "internvl",
         "img_context_token_id": 994, "llm_config": llm_config,
         "model_type": "Llama_Nemotron_Nano_VL", "projector_hidden_size": ph,
         "ps_version": "v2", "template": "llama-3.1-nemotron-nano-vl",
         "torch_dtype": "bfloat16", "transformers_version": None,
         "vision_config": vision_config, "vit_hidden_size": hv}
    write_release_config(out, c, {"configuration.py": NANO_CONFIG_PY,
                                  "radio_standin.py": RADIO_PY,
                                  "image_processing.py": IMAGE_PY})
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump({"auto_map": {"AutoImageProcessor":
                                "image_processing.NemotronNanoVLImageProcessor"},
                   "image_processor_type": "NemotronNanoVLImageProcessor",
                   "image_size": 64, "max_num_tiles": 1, "use_thumbnail": True,
                   "norm_mean": NANO_ARGS["norm_mean"], "norm_std": NANO_ARGS["norm_std"]},
                  f, indent=2)
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<img>": 997, "</img>": 996, "<image>": 994, "<video>": 995}
    word_tokenizer(tcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
