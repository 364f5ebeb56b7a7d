"""Intern-S2-Preview (InternS2PreviewForConditionalGeneration, model_type
intern_s2_preview) and Intern-S2-Mobius (InternS2MobiusForConditionalGeneration,
model_type interns2_mobius), tiny, as vLLM 0.32 reads them
(model_executor/models/interns2_preview.py, interns2_mobius.py).

Neither transformers 5.19 nor vLLM 0.32 knows either model type: the
releases are remote code.  vLLM builds Intern-S2-Preview as Qwen3.5-MoE
with its vision tower (InternS2PreviewForConditionalGeneration extends
Qwen3_5MoeForConditionalGeneration, interns2_preview.py:32) and drops a
time-series encoder, model.time_series.* (interns2_preview.py:34-38), so
its checkpoint is make_ckpt.py's qwen3_5_vl_moe (transformers' own
Qwen3_5MoeForConditionalGeneration, the MTP block Qwen ships beside it)
with a stand-in time-series tensor and config.json's model type and
architecture the release's, auto_map to a minimal configuration module
(Qwen3_5MoeConfig under the model type).

Intern-S2-Mobius keeps Qwen3.5's layers but its routed experts are banks
shared by layers: text_config.num_blocks MoE blocks,
model.language_model.meta_mlp.B.{gate, experts.E.{gate,up,down}_proj},
layer N using bank N % num_blocks (interns2_mobius.py:268, 307-313); each
layer keeps its gated shared expert (mlp.shared_expert.*,
mlp.shared_expert_gate) and, with text_config.layer_scale, two [1, 1,
hidden] scales attn_layer_scale and ffn_layer_scale (:225-228).  Its MTP
layer is Qwen3.5-MoE's with text_config.mtp_num_experts experts, top
mtp_num_experts_per_tok (config/speculative.py:938-959), and the same two
scales (Qwen3_5DecoderLayer reads layer_scale too, qwen3_5.py:195-209).  Built from the
same checkpoint: layer B's router and experts become bank B (2 banks over
4 layers), the other layers' dropped; the MTP layer keeps its first 2 of
4 experts (mtp_num_experts 2).
"""
import os

PREVIEW_PY = '''"""Intern-S2-Preview's configuration, minimal, written for the wshard
test checkpoints: Qwen3.5-MoE's under the release's model type."""
from transformers import Qwen3_5MoeConfig


class InternS2PreviewConfig(Qwen3_5MoeConfig):
    model_type = "intern_s2_preview"
'''

MOBIUS_PY = '''"""Intern-S2-Mobius' configuration, minimal, written for the wshard test
checkpoints: Qwen3.5-MoE's under the release's model type, its
text_config holding num_blocks, layer_scale, mtp_num_experts and
mtp_num_experts_per_tok besides."""
from transformers import Qwen3_5MoeConfig


class InternS2MobiusConfig(Qwen3_5MoeConfig):
    model_type = "interns2_mobius"
'''

NUM_BLOCKS = 2
MTP_EXPERTS = 2


def _release(out, arch, model_type, module, cls, code, text=None):
    """config.json as the release has it: ARCH, MODEL_TYPE, auto_map to
    MODULE.CLS (CODE written beside it), text_config updated by TEXT."""
    from ckpt_io import update_config

    def cfg(c):
        c.update(architectures=[arch], model_type=model_type,
                 auto_map={"AutoConfig": "%s.%s" % (module, cls)})
        c["text_config"].update(text or {})
    update_config(out, cfg)
    with open(os.path.join(out, module + ".py"), "w") as f:
        f.write(code)


def make_preview(out):
    import torch
    from ckpt_io import add_to_first_shard
    from make_ckpt import make as make_ckpt
    make_ckpt("qwen3_5_vl_moe", out)
    g = torch.Generator().manual_seed(11)
    # a stand-in for the time-series encoder vLLM leaves out
    add_to_first_shard(out, {"model.time_series.encoder.proj.weight":
                             (torch.randn(64, 16, generator=g) * 0.02).to(torch.bfloat16)})
    _release(out, "InternS2PreviewForConditionalGeneration", "intern_s2_preview",
             "configuration_interns2_preview", "InternS2PreviewConfig", PREVIEW_PY)


def make_mobius(out):
    import glob
    import torch
    from ckpt_io import read_tensors, save_shards
    from make_ckpt import make as make_ckpt
    make_ckpt("qwen3_5_vl_moe", out)
    src = read_tensors(out)
    lm = "model.language_model."
    layers = 1 + max(int(k[len(lm + "layers."):].split(".")[0])
                     for k in src if k.startswith(lm + "layers."))
    hidden = src[lm + "norm.weight"].shape[0]
    sd = {}
    for k, t in src.items():
        if k.startswith(lm + "layers.") and (".mlp.experts." in k or k.endswith(".mlp.gate.weight")):
            n = int(k[len(lm + "layers."):].split(".")[0])
            if n < NUM_BLOCKS:		# layer B's router and experts: bank B
                rest = k[len(lm + "layers.%d.mlp." % n):]
                sd[lm + "meta_mlp.%d.%s" % (n, rest)] = t
            continue
        if k.startswith("mtp.layers.0.mlp.experts."):
            if int(k.split(".")[5]) >= MTP_EXPERTS:
                continue
        if k == "mtp.layers.0.mlp.gate.weight":
            t = t[:MTP_EXPERTS].clone()
        sd[k] = t
    g = torch.Generator().manual_seed(12)
    # (the MTP layer's too: Qwen3_5DecoderLayer reads layer_scale as well)
    for layer in [lm + "layers.%d." % n for n in range(layers)] + ["mtp.layers.0."]:
        for s in ("attn_layer_scale", "ffn_layer_scale"):
            sd[layer + s] = (torch.randn(1, 1, hidden, generator=g) * 0.1).to(torch.bfloat16)
    for path in glob.glob(os.path.join(out, "*.safetensors")):
        os.remove(path)
    groups = [sorted(k for k in sd if not k.startswith(lm + "layers.")
                     and not k.startswith(lm + "meta_mlp.")),
              sorted(k for k in sd if k.startswith(lm + "meta_mlp."))]
    for n in range(layers):
        groups.append(sorted(k for k in sd if k.startswith(lm + "layers.%d." % n)))
    assert sum(len(g) for g in groups) == len(sd)
    save_shards(out, sd, groups)
    _release(out, "InternS2MobiusForConditionalGeneration", "interns2_mobius",
             "configuration_interns2_mobius", "InternS2MobiusConfig", MOBIUS_PY,
             dict(num_blocks=NUM_BLOCKS, layer_scale=True, mtp_num_experts=MTP_EXPERTS,
                  mtp_num_experts_per_tok=2))


if __name__ == "__main__":
    import sys
    (make_mobius if sys.argv[2:] == ["mobius"] else make_preview)(sys.argv[1])
