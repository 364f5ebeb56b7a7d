"""Intern-S1-Pro (InternS1ProForConditionalGeneration, model_type
interns1_pro), tiny, as vLLM 0.32 reads it (model_executor/models/
interns1_pro.py).

Neither transformers 5.19 nor vLLM 0.32 knows the model type: the release
is remote code.  vLLM builds it as Qwen3-VL-MoE (the Qwen3-VL tower,
interns1_pro.py:576; a Qwen3-MoE text model, :457-492) with its own
decoder layer: Fourier position embedding (FoPE) in place of mrope
(:382-394), whose two coefficient tensors the checkpoint holds once for
the whole text model, model.language_model.rotary_emb.{sin,cos}_coef
[num_key_value_heads, D, D] (D the inverse frequencies kept, here
num_inv_freq), and a router of its own beside the experts (:185-189);
the time-series encoder, model.time_series.*, dropped (:630).  Its experts
one tensor an expert (experts.E.{gate,up,down}_proj), as the release ships
them.

So the checkpoint is make_ckpt.py's qwen3_vl_moe (transformers' own
Qwen3VLMoeForConditionalGeneration) without deepstack mergers (vLLM's
InternS1Pro class builds no deepstack buffers), its fused experts cut
into one tensor an expert, the two FoPE tensors and a stand-in
time-series tensor added, and config.json's model type, architecture and
rope parameters the release's (rope_type default with fope_init_factor,
fope_sep_head and num_inv_freq; no mrope_section), auto_map to a minimal
configuration module (Qwen3VLMoeConfig under the model type).
"""
import os

CONFIG_PY = '''"""Intern-S1-Pro's configuration, minimal, written for the wshard test
checkpoints: Qwen3-VL-MoE's under the release's model type."""
from transformers import Qwen3VLMoeConfig


class InternS1ProConfig(Qwen3VLMoeConfig):
    model_type = "interns1_pro"
'''

NUM_INV_FREQ = 8


def make(out):
    import torch
    from ckpt_io import read_tensors, save_shards, update_config
    from make_ckpt import make as make_ckpt
    make_ckpt("qwen3_vl_moe", out)
    src = read_tensors(out)
    with open(os.path.join(out, "config.json")) as f:
        import json
        cfg = json.load(f)
    text = cfg["text_config"]
    kv = text["num_key_value_heads"]
    sd = {}
    for k, t in src.items():
        if k.endswith(".mlp.experts.gate_up_proj"):	# [E, H, 2I] as Qwen ships it
            inter = t.shape[2] // 2
            for e in range(t.shape[0]):
                base = k[:-len("gate_up_proj")] + "%d." % e
                sd[base + "gate_proj.weight"] = t[e, :, :inter].t().contiguous()
                sd[base + "up_proj.weight"] = t[e, :, inter:].t().contiguous()
        elif k.endswith(".mlp.experts.down_proj"):	# [E, I, H]
            for e in range(t.shape[0]):
                sd[k[:-len("down_proj")] + "%d.down_proj.weight" % e] = t[e].t().contiguous()
        elif ".deepstack_merger_list." not in k:
            sd[k] = t
    g = torch.Generator().manual_seed(21)
    eye = torch.eye(NUM_INV_FREQ).expand(kv, -1, -1)
    dtype = sd["model.language_model.norm.weight"].dtype
    for name in ("sin_coef", "cos_coef"):
        # near the identity (FoPE's start, plain RoPE) so answers stay sane
        sd["model.language_model.rotary_emb." + name] = (
            eye + torch.randn(kv, NUM_INV_FREQ, NUM_INV_FREQ, generator=g) * 0.05).to(dtype)
    sd["model.time_series.encoder.proj.weight"] = (
        torch.randn(64, 16, generator=g) * 0.02).to(dtype)
    import glob
    for path in glob.glob(os.path.join(out, "*.safetensors")):
        os.remove(path)
    lm = "model.language_model.layers."
    layers = sorted({int(k[len(lm):].split(".")[0]) for k in sd if k.startswith(lm)})
    groups = [sorted(k for k in sd if not k.startswith(lm))]
    for n in layers:
        groups.append(sorted(k for k in sd if k.startswith(lm + "%d." % n)))
    save_shards(out, sd, groups)

    def config(c):
        c.update(architectures=["InternS1ProForConditionalGeneration"],
                 model_type="interns1_pro",
                 auto_map={"AutoConfig": "configuration_interns1_pro.InternS1ProConfig"})
        rope = {"rope_type": "default",
                "rope_theta": c["text_config"]["rope_parameters"]["rope_theta"],
                "fope_init_factor": 0.5, "fope_sep_head": True,
                "num_inv_freq": NUM_INV_FREQ}
        c["text_config"]["rope_parameters"] = rope
        c["text_config"]["rope_scaling"] = dict(rope)
        c["vision_config"]["deepstack_visual_indexes"] = []
    update_config(out, config)
    with open(os.path.join(out, "configuration_interns1_pro.py"), "w") as f:
        f.write(CONFIG_PY)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
