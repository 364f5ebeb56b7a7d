#!/usr/bin/env python3
"""plugin_check.py - the vLLM plugin's load_rank (lib/vllm) with torch on the
CPU, no engine: parameters as vLLM allocates them, read as sharded_state
would fill them (test/engine/run runs it first).

    plugin_check.py OUT TP      OUT: a wshard output of a Llama at tp TP

Checks, rank by rank: every parameter equal to safetensors' reading of the
rank files, whether read in place (contiguous, same dtype) or through the
host pool: one F32 where the file holds BF16 (converted, as copy_ does),
one padded (more rows than the file: the file's rows first, the padding
untouched), one strided (a transposed view).  Then refusals, each one
line naming the tensor: a parameter the rank lacks, a tensor with no
parameter, a parameter smaller than its tensor; a speculative draft's
load from an output not converted as the draft; and a DeepSeek-V4 or V4.1
model vLLM built sequence parallel.
"""
import glob
import json
import os
import sys

import torch
from safetensors import safe_open

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "lib", "vllm"))
import wshard_vllm  # noqa: E402

EMBED = "model.embed_tokens.weight"
NORM = "model.norm.weight"


def same(a, b):
    """Byte for byte (random weights hold NaNs)."""
    return torch.equal(a.contiguous().view(-1).view(torch.uint8),
                       b.contiguous().view(-1).view(torch.uint8))


def files(out, r):
    t = {}
    for f in glob.glob(os.path.join(out, f"model-rank-{r}-part-*.safetensors")):
        with safe_open(f, framework="pt") as st:
            for k in st.keys():
                t[k] = st.get_tensor(k)
    return t


def params(ref):
    """Empty parameters like ref's, with the three that go through the pool."""
    p = {k: torch.full_like(v, 7) for k, v in ref.items()}
    p[NORM] = torch.full(ref[NORM].shape, 7.0, dtype=torch.float32)
    e = ref[EMBED]
    p[EMBED] = torch.full((e.shape[0] + 8, e.shape[1]), 7, dtype=e.dtype)
    k = next(k for k in ref if k.endswith("o_proj.weight"))
    p[k] = torch.full(tuple(reversed(ref[k].shape)), 7, dtype=ref[k].dtype).t()
    return p, k


def refused(out, tp, state, text):
    try:
        wshard_vllm.load_rank(out, state, {"tp": tp, "rank": 0})
    except wshard_vllm.WshardLoadError as e:
        if text in str(e) and "\n" not in str(e):
            return None
        return f"refused with '{e}', expected '{text}'"
    return f"not refused, expected '{text}'"


class Hooked(torch.nn.Module):
    """openPangu's shape: a model whose post_weight_load calls its layers'
    own, and layers that count their calls."""

    def __init__(self, depth=2):
        super().__init__()
        self.calls = 0
        self.inner = torch.nn.ModuleList([Hooked(depth - 1) for _ in range(2)] if depth else [])

    def post_weight_load(self):
        self.calls += 1
        for m in self.inner:
            m.post_weight_load()


def after_load():
    """after_load runs each outermost hook once, not each module's again."""
    top = torch.nn.Sequential(torch.nn.Linear(2, 2), Hooked())
    ran = wshard_vllm.after_load(top)
    counts = [m.calls for m in top.modules() if isinstance(m, Hooked)]
    if ran != ["1"] or counts != [1] * 7:
        return f"after_load ran on {ran}, calls {counts}, expected ['1'] and seven 1s"
    return None


def refuses_draft(out):
    """A speculative draft's load from a wshard output of another
    architecture (out: the target's) is refused in one line naming both;
    the target's, with or without a draft configured, is not, nor the
    draft's from an output converted as the draft (--architecture)."""
    import tempfile
    from types import SimpleNamespace as NS
    target, draft = NS(architectures=["MiMoForCausalLM"]), NS(architectures=["MiMoMTPModel"])
    vc = NS(speculative_config=NS(draft_model_config=draft))
    with tempfile.TemporaryDirectory() as made:
        with open(os.path.join(made, "wshard.json"), "w") as f:
            json.dump({"architecture": "MiMoMTPModel"}, f)
        try:
            wshard_vllm.refuse_draft(vc, draft, made)
        except wshard_vllm.WshardLoadError as e:
            return f"the draft's own output refused: '{e}'"
    try:
        wshard_vllm.refuse_draft(vc, target, out)
        wshard_vllm.refuse_draft(NS(speculative_config=None), target, out)
        wshard_vllm.refuse_draft(vc, draft, out)
    except wshard_vllm.WshardLoadError as e:
        if ("MiMoMTPModel" in str(e) and "--architecture MiMoMTPModel" in str(e) and
                "draft_load_config" in str(e) and "\n" not in str(e)):
            return None
        return f"draft refused with '{e}'"
    return "a speculative draft's load was not refused"


def refuses_sequence_parallel(out):
    """A DeepSeek-V4 or V4.1 model vLLM built sequence parallel (a module
    of vllm.models.deepseek_v4* with use_sequence_parallel True) is refused
    in one line; one without, or another family's module, is not."""
    def model(sp, where):
        layer = type("DeepseekV4DecoderLayer", (torch.nn.Module,), {"__module__": where})()
        layer.use_sequence_parallel = sp
        return torch.nn.Sequential(torch.nn.Linear(2, 2), layer)
    try:
        wshard_vllm.refuse_sequence_parallel(
            model(False, "vllm.models.deepseek_v41.nvidia.model"), out)
        wshard_vllm.refuse_sequence_parallel(model(True, "vllm.models.qwen4_exp.nvidia.model"), out)
    except wshard_vllm.WshardLoadError as e:
        return f"refused without sequence parallelism: '{e}'"
    try:
        wshard_vllm.refuse_sequence_parallel(
            model(True, "vllm.models.deepseek_v41.nvidia.model"), out)
    except wshard_vllm.WshardLoadError as e:
        if "built 1 sequence parallel" in str(e) and "\n" not in str(e):
            return None
        return f"sequence parallelism refused with '{e}'"
    return "a sequence-parallel DeepSeek-V4.1 was not refused"


def main(out, tp):
    bad = [after_load(), refuses_draft(out), refuses_sequence_parallel(out)]
    for r in range(tp):
        ref = files(out, r)
        p, strided = params(ref)
        wshard_vllm.load_rank(out, p, {"tp": tp, "rank": r,
                                       "engine": "vllm==0.32.0"})
        for k, v in ref.items():
            got = p[k]
            if k == EMBED:
                if not same(got[-8:], torch.full_like(got[-8:], 7)):
                    bad.append(f"rank {r}: {k}: the padding rows changed")
                got = got[:v.shape[0]]
            if not same(got, v.to(got.dtype)):
                bad.append(f"rank {r}: {k} differs")
        if p[strided].is_contiguous():
            bad.append(f"{strided} was meant to be strided")
    ref = files(out, 0)
    p, _ = params(ref)
    p["model.extra.weight"] = torch.empty(4)
    bad.append(refused(out, tp, p, "lacks 1 of the model's tensors, "
                       "'model.extra.weight' first"))
    p, _ = params(ref)
    del p[NORM]
    bad.append(refused(out, tp, p, f"tensor '{NORM}' of rank 0 is no parameter"))
    p, _ = params(ref)
    p[NORM] = torch.empty(ref[NORM].shape[0] - 1, dtype=ref[NORM].dtype)
    bad.append(refused(out, tp, p, f"tensor '{NORM}' is BF16"))
    bad = [b for b in bad if b]
    for b in bad:
        print(b)
    print(f"plugin: {tp} ranks read in place and through the pool, "
          f"{'ok' if not bad else 'FAILED'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
