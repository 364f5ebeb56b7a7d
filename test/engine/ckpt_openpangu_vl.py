"""openPangu-VL (OpenPanguVLForConditionalGeneration), tiny, as vLLM 0.32
reads it (model_executor/models/openpangu_vl.py).

Neither transformers 5.19 nor vLLM 0.32 knows the model type: the release
is remote code, its config.json flat (the text model's keys at the top, as
PanguEmbeddedForCausalLM reads them, openpangu_vl.py:860-864) with a
vision_config.  vLLM's mapper (:829-836) reads the text model under
model. or model.language_model., the head lm_head., the tower under
model.visual.: a Qwen2.5-VL-like window-attention ViT of RMSNorm blocks
(attn.q/k/v or a fused attn.qkv with biases, attn.proj, a SiLU-gated MLP
gate_proj/up_proj/down_proj with biases), final_layernorm, one patch
merger per selected layer (merger.I: ln_q, mlp.0, mlp.2) and
vision_projection.fc1 (a plain nn.Linear, :665-673).

The text model is ckpt_openpangu's openPangu-Embedded (transformers'
LlamaForCausalLM with q/k/v/o biases) under the release's names; the
tower's tensors are drawn here (no transformers class holds it): 2 blocks
of 64 wide, 4 heads, a SiLU MLP of 128, two mergers (the default
mm_unit_vision_select_layer [-1, -3]).
"""
import os

CONFIG_PY = '''"""openPangu-VL's configuration, minimal, written for the wshard test
checkpoints: the text model's keys at the top, the tower's under
vision_config."""
from transformers.configuration_utils import PretrainedConfig


class OpenPanguVLVisionConfig(PretrainedConfig):
    model_type = "openpangu_vl_vision"
    base_config_key = "vision_config"


class OpenPanguVLConfig(PretrainedConfig):
    model_type = "openpangu_vl"
    sub_configs = {"vision_config": OpenPanguVLVisionConfig}

    def __init__(self, vision_config=None, **kwargs):
        if isinstance(vision_config, dict) or vision_config is None:
            vision_config = OpenPanguVLVisionConfig(**(vision_config or {}))
        self.vision_config = vision_config
        super().__init__(**kwargs)
'''

VISION = {"depth": 2, "hidden_size": 64, "num_heads": 4, "intermediate_size": 128,
          "hidden_act": "silu", "patch_size": 14, "temporal_patch_size": 2,
          "in_channels": 3, "spatial_merge_size": 2, "window_size": 112,
          "fullatt_block_indexes": [1], "out_hidden_size": 128,
          "mm_unit_vision_select_layer": [-1, -3], "rms_norm_eps": 1e-6}
TOKENS = {"image_token_id": 999, "video_token_id": 998,
          "vision_start_token_id": 997, "vision_end_token_id": 996}


def _tower(g, dtype, hidden_text):
    from ckpt_io import noise
    v = VISION
    h, i = v["hidden_size"], v["intermediate_size"]
    m = h * v["spatial_merge_size"] ** 2
    rnd = noise(g, s=0.02, dtype=dtype)
    sd = {"model.visual.patch_embed.proj.weight":
          rnd(h, v["in_channels"], v["temporal_patch_size"], v["patch_size"], v["patch_size"]),
          "model.visual.final_layernorm.weight": rnd(h, base=1.0),
          "model.visual.vision_projection.fc1.weight": rnd(hidden_text, v["out_hidden_size"]),
          "model.visual.vision_projection.fc1.bias": rnd(hidden_text)}
    for n in range(v["depth"]):
        b = "model.visual.blocks.%d." % n
        sd[b + "norm1.weight"] = rnd(h, base=1.0)
        sd[b + "norm2.weight"] = rnd(h, base=1.0)
        for p in ("q", "k", "v"):
            sd[b + "attn.%s.weight" % p] = rnd(h, h)
            sd[b + "attn.%s.bias" % p] = rnd(h)
        sd[b + "attn.proj.weight"] = rnd(h, h)
        sd[b + "attn.proj.bias"] = rnd(h)
        for p in ("gate_proj", "up_proj"):
            sd[b + "mlp.%s.weight" % p] = rnd(i, h)
            sd[b + "mlp.%s.bias" % p] = rnd(i)
        sd[b + "mlp.down_proj.weight"] = rnd(h, i)
        sd[b + "mlp.down_proj.bias"] = rnd(h)
    for k in range(len(v["mm_unit_vision_select_layer"])):
        b = "model.visual.merger.%d." % k
        sd[b + "ln_q.weight"] = rnd(h, base=1.0)
        sd[b + "mlp.0.weight"] = rnd(m, m)
        sd[b + "mlp.0.bias"] = rnd(m)
        sd[b + "mlp.2.weight"] = rnd(v["out_hidden_size"], m)
        sd[b + "mlp.2.bias"] = rnd(v["out_hidden_size"])
    return sd


def make(out):
    import json
    import torch
    from ckpt_io import add_to_first_shard, update_config
    from ckpt_openpangu import make_embedded
    from make_ckpt import qwen3_vl_processor
    make_embedded(out)
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    g = torch.Generator().manual_seed(31)
    add_to_first_shard(out, _tower(g, torch.bfloat16, cfg["hidden_size"]))

    def config(c):
        c.update(architectures=["OpenPanguVLForConditionalGeneration"],
                 model_type="openpangu_vl",
                 auto_map={"AutoConfig": "configuration_openpangu_vl.OpenPanguVLConfig"},
                 vision_config=dict(VISION), **TOKENS)
    update_config(out, config)
    for f in os.listdir(out):
        if f.startswith("configuration_openpangu_") and f != "configuration_openpangu_vl.py":
            os.remove(os.path.join(out, f))
    with open(os.path.join(out, "configuration_openpangu_vl.py"), "w") as f:
        f.write(CONFIG_PY)

    import transformers
    text = transformers.LlamaConfig(vocab_size=cfg["vocab_size"], **TOKENS)
    qwen3_vl_processor(out, text, "Qwen2_5_VLProcessor", "Qwen2VLVideoProcessor")


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
