#!/usr/bin/env python3
"""The engine load-time benchmark behind `scripts/bench --engine`: vLLM's
weight loading from a HuggingFace checkpoint against from wshard's output of
it, at one tensor-parallel size, in one run.

    bench.py --wshard BIN --work DIR [--tp 2] [--runs 3] [--layers 12]

Makes a BF16 Llama checkpoint with transformers' own class (hidden 2048, 16
heads, 4 kv heads of 128, intermediate 5632, vocab 32000; 12 layers is about
1.6 GB), converts it with `wshard convert --tp TP`, then loads each RUNS
times, alternating, every load a fresh engine in its own process group
(oracle.py time).  Reports per side the best of vLLM's own "Loading weights
took" (the slowest worker) and of the wall time of LLM(), and their ratios,
with a warm page cache (the tree read once first) and, where this process
may write /proc/sys/vm/drop_caches (root), a cold one (dropped before each
load)."""
import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def make_ckpt(path, layers):
    import torch
    import transformers
    cfg = transformers.LlamaConfig(
        hidden_size=2048, intermediate_size=5632, num_hidden_layers=layers,
        num_attention_heads=16, num_key_value_heads=4, head_dim=128,
        vocab_size=32000, max_position_embeddings=2048,
        tie_word_embeddings=False)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(0)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg)
    model = model.to_empty(device="cpu").to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    model.save_pretrained(path, max_shard_size="500MB")


def warm(path):
    for f in sorted(glob.glob(os.path.join(path, "*"))):
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def load_once(model, tp, fmt, work, tag):
    out = os.path.join(work, tag + ".json")
    log = os.path.join(work, tag + ".log")
    with open(log, "w") as lf:
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "oracle.py"),
                              "time", model, str(tp), fmt, out],
                             stdout=lf, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=900)
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    text = open(log).read()
    if rc != 0:
        sys.exit("bench: vLLM failed on %s (see %s)" % (model, log))
    took = [float(x) for x in re.findall(r"Loading weights took ([0-9.]+) seconds", text)]
    return max(took) if took else float("nan"), json.load(open(out))["llm_init_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wshard", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--layers", type=int, default=12)
    a = ap.parse_args()
    src, out = os.path.join(a.work, "src"), os.path.join(a.work, "out")
    if not os.path.isdir(src):
        make_ckpt(src, a.layers)
    size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(src, "*.safetensors")))
    t0 = time.perf_counter()
    subprocess.run([a.wshard, "convert", "-q", "--force", "--tp", str(a.tp), src, out],
                   check=True)
    conv = time.perf_counter() - t0
    cold = drop_caches()
    modes = ("warm", "cold") if cold else ("warm",)
    best = {(side, m): [float("inf")] * 2 for side in ("src", "out") for m in modes}
    for i in range(a.runs):
        for m in modes:
            for side, model, fmt in (("src", src, "auto"), ("out", out, "sharded_state")):
                if m == "warm":
                    warm(model)
                else:
                    drop_caches()
                w, init = load_once(model, a.tp, fmt, a.work, "%s-%s-%d" % (side, m, i))
                b = best[side, m]
                best[side, m] = [min(b[0], w), min(b[1], init)]
    print("engine load, vLLM %s, tp %d, Llama BF16 %.2f GB, best of %d (seconds)"
          % (__import__("vllm").__version__, a.tp, size / 1e9, a.runs))
    print("%-42s %14s %10s" % ("", "weights loaded", "LLM()"))
    for m in modes:
        s_, o_ = best["src", m], best["out", m]
        print("%-42s %14.2f %10.2f" % ("HF checkpoint, %s page cache" % m, *s_))
        print("%-42s %14.2f %10.2f" % ("wshard output (sharded_state), %s" % m, *o_))
        print("%-42s %14.2f %10.2f" % ("ratio output / checkpoint, %s" % m,
                                       o_[0] / s_[0], o_[1] / s_[1]))
    if not cold:
        print("(no cold rows: /proc/sys/vm/drop_caches is not writable)")
    print("wshard convert --tp %d (once, synced): %.2f s" % (a.tp, conv))


if __name__ == "__main__":
    main()
