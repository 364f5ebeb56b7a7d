"""Tiny dots.ocr checkpoint (rednote-hilab/dots.ocr, DotsOCRForCausalLM) in
the layout the release ships and vLLM 0.32's dots_ocr.py loads.

    make(out)        the release's layout: tower without biases
                     (vision_config.use_bias false), post_trunk_norm on
    make_bias(out)   the same with the tower's linear biases
                     (use_bias true), which vLLM's blocks honour

The text model is transformers 5.19's own Qwen2ForCausalLM (model.*,
lm_head.weight; untied as the release); the tower is built here from torch
parts under the release's names (modeling_dots_vision.py): vision_tower.
patch_embed.patchifier.proj (a Conv2d with a bias) and .norm (RMSNorm,
transformers' Qwen2RMSNorm), blocks.N.norm1/norm2 (RMSNorm), attn.qkv (one
nn.Linear, q then k then v rows) and attn.proj, mlp.fc1, fc2 and fc3 (the
SwiGLU), post_trunk_norm, and the merger: ln_q (LayerNorm with a bias),
mlp.0 and mlp.2 (nn.Linear with biases).  Random weights, fixed seed,
BF16, every parameter perturbed as make_ckpt.py does.

config.json is the release's: model_type dots_ocr, a Qwen2 config with
image_token_id, video_token_id and vision_config (DotsVisionConfig's keys),
auto_map naming configuration_dots.DotsOCRConfig, written beside it (reduced
to what vLLM reads): vLLM 0.32 has a DotsOCRConfig of its own
(transformers_utils/configs/dotsocr.py) but does not register model_type
dots_ocr, so the config loads only as the release's remote code
(trust_remote_code=True).

Tiny sizes: COMMON's text model (2 layers, vocab 1000); a tower of 2 blocks
of 4 heads over 64 channels (SwiGLU 128 wide), 14-pixel patches, merged 2x2
into the text model's 256; temporal_patch_size 1 as the release.  vLLM's
processor is Qwen2-VL's (Qwen2VLProcessor, the image pad <|imgpad|>):
make_ckpt.py's word-level tokenizer with <|img|> (997), <|endofimg|> (996),
<|imgpad|> (image_token_id, 999) and <|video_pad|> (998), and
Qwen2VLImageProcessor sizing every image 56x56 (4x4 patches, 4 tokens).
"""
import json
import os

VISION = dict(embed_dim=64, hidden_size=256, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_channels=3, patch_size=14, spatial_merge_size=2,
              temporal_patch_size=1, rms_norm_eps=1e-5, use_bias=False,
              attn_implementation="flash_attention_2", initializer_range=0.02,
              init_merger_std=0.02, is_causal=False, post_norm=True)

REMOTE_CONFIG = '''"""dots.ocr's configuration, reduced to what vLLM 0.32 reads
(configuration_dots.py in rednote-hilab's release)."""
from transformers import PretrainedConfig
from transformers.models.qwen2 import Qwen2Config


class DotsVisionConfig(PretrainedConfig):
    model_type = "dots_vit"

    def __init__(self, embed_dim=1536, hidden_size=1536, intermediate_size=4224,
                 num_hidden_layers=42, num_attention_heads=12, num_channels=3,
                 patch_size=14, spatial_merge_size=2, temporal_patch_size=1,
                 rms_norm_eps=1e-5, use_bias=False, post_norm=True, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_channels = num_channels
        self.patch_size = patch_size
        self.spatial_merge_size = spatial_merge_size
        self.temporal_patch_size = temporal_patch_size
        self.rms_norm_eps = rms_norm_eps
        self.use_bias = use_bias
        self.post_norm = post_norm


class DotsOCRConfig(Qwen2Config):
    model_type = "dots_ocr"

    def __init__(self, image_token_id=151665, video_token_id=151656,
                 vision_config=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.image_token_id = image_token_id
        self.video_token_id = video_token_id
        self.vision_config = DotsVisionConfig(**(vision_config or {}))
'''


def tower(v):
    """The release's DotsVisionTransformer parameters (name: module), made
    of torch parts."""
    import torch.nn as nn
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm
    e, i, b = v["embed_dim"], v["intermediate_size"], v["use_bias"]
    m = v["embed_dim"] * v["spatial_merge_size"] ** 2
    t = nn.Module()
    t.patch_embed = nn.Module()
    t.patch_embed.patchifier = nn.Module()
    t.patch_embed.patchifier.proj = nn.Conv2d(v["num_channels"], e, v["patch_size"],
                                              v["patch_size"])
    t.patch_embed.patchifier.norm = Qwen2RMSNorm(e, v["rms_norm_eps"])
    t.blocks = nn.ModuleList()
    for _ in range(v["num_hidden_layers"]):
        blk = nn.Module()
        blk.attn = nn.Module()
        blk.attn.qkv = nn.Linear(e, 3 * e, bias=b)
        blk.attn.proj = nn.Linear(e, e, bias=b)
        blk.norm1 = Qwen2RMSNorm(e, v["rms_norm_eps"])
        blk.mlp = nn.Module()
        blk.mlp.fc1 = nn.Linear(e, i, bias=b)
        blk.mlp.fc2 = nn.Linear(i, e, bias=b)
        blk.mlp.fc3 = nn.Linear(e, i, bias=b)
        blk.norm2 = Qwen2RMSNorm(e, v["rms_norm_eps"])
        t.blocks.append(blk)
    if v["post_norm"]:
        t.post_trunk_norm = Qwen2RMSNorm(e, v["rms_norm_eps"])
    t.merger = nn.Module()
    t.merger.ln_q = nn.LayerNorm(e, eps=1e-6)
    t.merger.mlp = nn.Sequential(nn.Linear(m, m), nn.GELU(), nn.Linear(m, v["hidden_size"]))
    return t


def make(out, use_bias=False):
    import torch
    import transformers
    from ckpt_io import add_to_first_shard, perturb, perturb_and_save, write_release_config
    from make_ckpt import COMMON, word_tokenizer
    text = dict(COMMON, bos_token_id=2, eos_token_id=1, tie_word_embeddings=False,
                rope_theta=1000000.0, rms_norm_eps=1e-6, hidden_act="silu")
    cfg = transformers.Qwen2Config(**text)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    v = dict(VISION, use_bias=use_bias, hidden_size=text["hidden_size"])
    vt = tower(v).to(torch.bfloat16)
    perturb(vt)
    add_to_first_shard(out, {"vision_tower." + k: t.contiguous()
                             for k, t in vt.state_dict().items()})
    with open(os.path.join(out, "config.json")) as f:
        hf = json.load(f)
    rel = {k: hf[k] for k in ("attention_dropout", "bos_token_id", "eos_token_id",
                              "hidden_act", "hidden_size", "initializer_range",
                              "intermediate_size", "max_position_embeddings",
                              "max_window_layers", "num_attention_heads", "num_hidden_layers",
                              "num_key_value_heads", "rms_norm_eps", "sliding_window",
                              "tie_word_embeddings", "use_cache", "use_sliding_window",
                              "vocab_size") if k in hf}
    rel.update({"architectures": ["DotsOCRForCausalLM"], "model_type": "dots_ocr",
                "auto_map": {"AutoConfig": "configuration_dots.DotsOCRConfig"},
                "attention_bias": True, "rope_theta": 1000000.0, "rope_scaling": None,
                "torch_dtype": "bfloat16", "image_token_id": 999, "video_token_id": 998,
                "vision_config": v})
    write_release_config(out, rel, {"configuration_dots.py": REMOTE_CONFIG})
    # vLLM's processor is Qwen2-VL's: a tokenizer with the image pad, and
    # Qwen2-VL's image processor with the tower's patch sizes
    tok = word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                               "<|img|>": 997, "<|endofimg|>": 996, "<|imgpad|>": 999,
                               "<|video_pad|>": 998}, "<pad>", "<eos>", "<bos>", "<unk>",
                         extra_special_tokens={"image_token": "<|imgpad|>",
                                               "video_token": "<|video_pad|>"})
    px = 56 * 56
    ip = transformers.Qwen2VLImageProcessor(
        size={"shortest_edge": px, "longest_edge": px}, patch_size=14, merge_size=2,
        temporal_patch_size=1)
    vp = transformers.Qwen2VLVideoProcessor(
        size={"shortest_edge": px, "longest_edge": 2 * px}, patch_size=14, merge_size=2,
        temporal_patch_size=1)
    transformers.Qwen2VLProcessor(image_processor=ip, tokenizer=tok,
                                  video_processor=vp).save_pretrained(out)


def make_bias(out):
    make(out, use_bias=True)
