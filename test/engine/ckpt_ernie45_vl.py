"""Tiny ERNIE-4.5-VL MoE checkpoint (Ernie4_5_VLMoeForConditionalGeneration)
in the layout vLLM 0.32's ernie45_vl.py / ernie45_vl_moe.py load, made with
transformers 5.19's own class (random weights, fixed seed, BF16, every
parameter perturbed as make_ckpt.py does) and save_pretrained with 1MB
shards.

    make(out)          Baidu's release layout (what vLLM reads), tied
    make_untied(out)   the same untied, as the 424B release
    make(out, hf_names=True)  the tower named as transformers saves it
                       (model.vision_model.*), which vLLM cannot load

transformers' save_pretrained already writes Baidu's tensor names (its
conversion_mapping "ernie4_5_vl_moe" is reversed on save: experts per index,
text 0..E-1 then vision E..2E-1, mlp.gate.weight / weight_1 stored [H, E],
moe_statics.e_score_correction_bias [2, E], resampler spatial_linear.0/2/3)
except the tower, which it saves as model.vision_model.* where Baidu ships
vision_model.* (vLLM's hf_to_vllm_mapper sends model.* to the language
model, whose load_weights drops every "vision_model" name).

Its config.json (model_type ernie4_5_vl_moe, nested text_config) is not one
vLLM can build the model from (ernie45_vl_moe.py reads moe_layer_start_index,
list-valued moe_num_experts, im_patch_id, pixel_hidden_size, vision_config
.embed_dim / .mlp_ratio ... from the top level), so the config is rewritten
in Baidu's form (model_type ernie4_5_moe_vl) with a small remote-code
configuration class beside it, as Baidu's release has
(configuration_ernie_45t_vl.py): vLLM needs trust_remote_code=True for it.

Tiny config (in make_ckpt.py's style): the text model of COMMON with 3
layers (layer 0 dense, 1-2 MoE), 4 text + 4 vision experts of 128 and 64
rows (moe_intermediate_size [128, 64]), top-2, 2 shared experts (256 wide);
a DFNRope tower of 2 blocks of 4 heads over 64 channels (mlp 256, 14-pixel
patches) and the resampler (64*2*2 = 256 wide, temporal conv on).
"""
import json
import os

ERNIE45_VL = dict(
    image_token_id=999, video_token_id=998, image_start_token_id=997,
    image_end_token_id=996, video_start_token_id=995, video_end_token_id=994,
    text_config=dict(num_hidden_layers=3, moe_num_experts=4, moe_k=2,
                     moe_intermediate_size=[128, 64], moe_num_shared_experts=2,
                     mlp_layer_types=["dense", "sparse", "sparse"],
                     bos_token_id=1, eos_token_id=2, pad_token_id=0,
                     # head_dim 64: vLLM's 3-D rope takes freq_allocation
                     # (20) for t and (64/2 - 20)/2 = 6 each for h and w
                     rope_parameters={"rope_type": "default", "rope_theta": 500000.0,
                                      "mrope_section": [6, 6, 20]}),
    vision_config=dict(depth=2, hidden_size=64, num_heads=4, intermediate_size=256,
                       patch_size=14, spatial_merge_size=2, temporal_merge_size=2))

REMOTE_CONFIG = '''"""Baidu's ERNIE-4.5-VL configuration, reduced to what vLLM 0.32 reads
(configuration_ernie_45t_vl.py in Baidu's release)."""
from transformers import PretrainedConfig


class DFNRopeVisionTransformerConfig(PretrainedConfig):
    model_type = "DFNRope_vision_transformer"

    def __init__(self, depth=32, embed_dim=1280, hidden_size=1280, hidden_act="quick_gelu",
                 mlp_ratio=4, num_heads=16, in_channels=3, patch_size=14,
                 spatial_merge_size=2, **kwargs):
        super().__init__(**kwargs)
        self.depth = depth
        self.embed_dim = embed_dim
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.mlp_ratio = mlp_ratio
        self.num_heads = num_heads
        self.in_channels = in_channels
        self.patch_size = patch_size
        self.spatial_merge_size = spatial_merge_size


class Ernie4_5_VLMoEConfig(PretrainedConfig):
    model_type = "ernie4_5_moe_vl"

    def __init__(self, vision_config=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(vision_config, PretrainedConfig):
            self.vision_config = vision_config
        else:
            self.vision_config = DFNRopeVisionTransformerConfig(**(vision_config or {}))
'''


def baidu_config(hf):
    """Baidu's config.json for transformers' saved one (a dict)."""
    t, v = hf["text_config"], hf["vision_config"]
    moe = [i for i, k in enumerate(t["mlp_layer_types"]) if k == "sparse"]
    assert moe == list(range(moe[0], t["num_hidden_layers"])), "MoE layers must be a tail"
    return {
        "architectures": ["Ernie4_5_VLMoeForConditionalGeneration"],
        "model_type": "ernie4_5_moe_vl",
        "auto_map": {"AutoConfig": "configuration_ernie4_5_vl.Ernie4_5_VLMoEConfig"},
        "torch_dtype": "bfloat16",
        **{k: t[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                             "num_attention_heads", "num_key_value_heads", "head_dim",
                             "vocab_size", "max_position_embeddings", "rms_norm_eps",
                             "hidden_act", "use_bias", "bos_token_id", "eos_token_id",
                             "pad_token_id")},
        "tie_word_embeddings": hf.get("tie_word_embeddings", True),
        "rope_theta": t["rope_parameters"]["rope_theta"],
        "freq_allocation": t["rope_parameters"]["mrope_section"][2],
        "rope_3d": True,
        # both modalities' experts: vLLM asserts the two counts are equal
        "moe_num_experts": [t["moe_num_experts"]] * 2,
        "moe_intermediate_size": t["moe_intermediate_size"],
        "moe_k": t["moe_k"],
        "moe_num_shared_experts": t["moe_num_shared_experts"],
        "moe_layer_start_index": [moe[0], moe[0]],
        "moe_layer_end_index": [moe[-1], moe[-1]],
        "moe_layer_interval": 1,
        "moe_use_aux_free": True,
        "im_patch_id": hf["image_token_id"],
        **{k: hf[k] for k in ("image_start_token_id", "image_end_token_id",
                              "video_start_token_id", "video_end_token_id")},
        "pixel_hidden_size": v["hidden_size"],
        "spatial_conv_size": v["spatial_merge_size"],
        "temporal_conv_size": v["temporal_merge_size"],
        "use_temporal_conv": True,
        "vision_config": {"depth": v["depth"], "embed_dim": v["hidden_size"],
                          "hidden_size": v["hidden_size"], "hidden_act": v["hidden_act"],
                          "mlp_ratio": v["intermediate_size"] // v["hidden_size"],
                          "num_heads": v["num_heads"], "in_channels": v["in_channels"],
                          "patch_size": v["patch_size"],
                          "spatial_merge_size": v["spatial_merge_size"]},
    }


def make(out, hf_names=False, untied=False):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, rename_prefix, write_release_config
    from make_ckpt import COMMON, word_tokenizer
    over = dict(ERNIE45_VL, text_config=dict(COMMON, **ERNIE45_VL["text_config"]))
    if untied:
        over["tie_word_embeddings"] = False
        over["text_config"]["tie_word_embeddings"] = False
    cfg = transformers.Ernie4_5_VLMoeConfig(**over)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Ernie4_5_VLMoeForConditionalGeneration(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    if not hf_names:
        rename_prefix(out, "model.vision_model.", "vision_model.")
    with open(os.path.join(out, "config.json")) as f:
        hf = json.load(f)
    write_release_config(out, baidu_config(hf),
                         {"configuration_ernie4_5_vl.py": REMOTE_CONFIG})
    # vLLM builds ERNIE-4.5-VL's processor (transformers') before loading,
    # even for text prompts: a word-level tokenizer with its image tokens
    tok = word_tokenizer(cfg.text_config, {
        "<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "<|IMAGE_PLACEHOLDER|>": 999,
        "<|VIDEO_PLACEHOLDER|>": 998, "<|IMAGE_START|>": 997, "<|IMAGE_END|>": 996,
        "<|VIDEO_START|>": 995, "<|VIDEO_END|>": 994}, "<pad>", "</s>", "<s>", "<unk>",
        extra_special_tokens={
            "image_token": "<|IMAGE_PLACEHOLDER|>", "video_token": "<|VIDEO_PLACEHOLDER|>",
            "image_start_token": "<|IMAGE_START|>", "image_end_token": "<|IMAGE_END|>",
            "video_start_token": "<|VIDEO_START|>", "video_end_token": "<|VIDEO_END|>"})
    transformers.Ernie4_5_VLMoeProcessor(
        # Baidu's processor config names the pixel bounds min_pixels and
        # max_pixels, which vLLM reads with trust_remote_code: 56x56 to
        # 112x112 images (4 to 16 tokens)
        image_processor=transformers.Ernie4_5_VLMoeImageProcessor(size={
            "min_pixels": 56 * 56, "max_pixels": 112 * 112}),
        video_processor=transformers.Ernie4_5_VLMoeVideoProcessor(draw_on_frames=False),
        tokenizer=tok).save_pretrained(out)


def make_untied(out):
    make(out, untied=True)
