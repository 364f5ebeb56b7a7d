#!/usr/bin/env python3
"""The engine load benchmark behind `scripts/bench --engine`: vLLM's weight
loading from a HuggingFace checkpoint against from wshard's output of it.

    bench.py --wshard BIN --work DIR [--models dense,moe] [--tp 2,4]
             [--runs 3] [--layers 12] [--moe-layers 48] [--experts 128]

Models, made once with transformers' own classes (random BF16 weights, meta
device then to_empty and normal_ init, save_pretrained in a few shards) in
WORK/<model>-<shape>/ and reused when that directory exists:

  dense  Llama (hidden 2048, 16 heads, 4 kv heads of 128, intermediate
         5632, vocab 32000); 12 layers is 1.34 GB, 111 tensors
  moe    Qwen3-MoE with many small experts (hidden 256, 8 heads and 4 kv
         heads of 64, 128 experts of intermediate 128, 8 per token, vocab
         32000); 48 layers is 1.28 GB, 18,867 tensors

Each model is converted once per tensor-parallel size (`wshard convert -q
--force --tp TP`, timed), then loaded RUNS times from each side, the
checkpoint (load_format auto), the output with vLLM's sharded_state and
the output with wshard's plugin (load_format wshard, lib/vllm) in turn
(the side that goes first rotates every run), every load a fresh engine in
its own process group (oracle.py time), killed after.  Page cache:

  warm  the model's files read once before the load
  cold  before the load: sync, /proc/sys/vm/drop_caches (where writable:
        root) and every file of the model evicted with posix_fadvise
        DONTNEED; mincore checks that none of it is left resident

Reports per model, tp and cache the best of the runs (and the spread) of
the load, of the wall time of LLM(), and the bytes of the model's files
the load read.  Load: the slowest worker's time from the start of its
loader's load_model to the end of load_weights, the model built and its
weights loaded (not the kernels' repacking after it, the same either
way; the hook records each worker's: WSHARD_BENCH_TIMES).  The engine
serves only once every worker has loaded, and the wshard load format
starts reading the rank's files while the model is built; the progress
lines also give the slowest load_weights alone.  vLLM's own "Loading
weights took" is worker 0's alone; it is shown as the w0 ratio.  It
misleads: the workers start loading up to a second apart (building the
model shares the cores), and from one checkpoint the first to start fills
the page cache for the others, so worker 0's own figure shrinks when it
trails, while from rank files each worker reads only its own.

Bytes read: through every cold load (none of the model's files resident
before it), the pages of the model's files in the page cache, by mincore
every half second and once after the engine is gone, their union: exactly
the pages the load, all its workers together, read from storage, readahead
included.  Polled rather than counted once at the end because this kernel's
DAMON pages out page cache it deems cold (one end-only count missed 2 MB of
0.44 GB); a poll of 1.3 GB of files costs about 6 ms, and warm loads are
polled too (the same cost on both sides; a warm load whose files partly
left the page cache says so in its progress line).  /proc/PID/io is not
used: rchar misses the page faults of safetensors' mmap, and read_bytes
charges a page that several workers read to whichever faulted first (and,
after drop_caches, counts the Python libraries re-read too).  Per worker:
for the output, worker R reads only model-rank-R-part-* (vLLM's
ShardedStateLoader globs its rank's files), so its share is the bytes read
of those files plus of the small shared ones; the largest rank is shown.
For the checkpoint every worker opens every file and get_tensor()s every
tensor (vLLM's safetensors_weights_iterator, no expert parallelism) before
narrowing it to its rank: each worker reads all of it, so per worker is the
whole count.  The warm rows read the same pages from the page cache; their
bytes columns repeat the cold count (where there is no cold count, "-")."""
import argparse
import ctypes
import ctypes.util
import glob
import json
import mmap
import os
import re
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULTS = {"models": "dense,moe", "tp": "2,4", "runs": 3, "layers": 12,
            "moe_layers": 48, "experts": 128}


# ---------------------------------------------------------------- models

def _save(model, path, shard):
    tmp = path + ".tmp"
    if os.path.isdir(tmp):
        import shutil
        shutil.rmtree(tmp)
    model.save_pretrained(tmp, max_shard_size=shard)
    os.rename(tmp, path)


def _init(cls, cfg):
    import torch
    cfg.dtype = torch.bfloat16
    torch.manual_seed(0)
    with torch.device("meta"):
        model = cls(cfg)
    model = model.to_empty(device="cpu").to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    return model


def make_dense(path, layers):
    import transformers
    cfg = transformers.LlamaConfig(
        hidden_size=2048, intermediate_size=5632, num_hidden_layers=layers,
        num_attention_heads=16, num_key_value_heads=4, head_dim=128,
        vocab_size=32000, max_position_embeddings=2048,
        tie_word_embeddings=False)
    _save(_init(transformers.LlamaForCausalLM, cfg), path, "500MB")


def make_moe(path, layers, experts):
    import transformers
    cfg = transformers.Qwen3MoeConfig(
        hidden_size=256, intermediate_size=512, num_hidden_layers=layers,
        num_attention_heads=8, num_key_value_heads=4, head_dim=64,
        num_experts=experts, num_experts_per_tok=8, moe_intermediate_size=128,
        decoder_sparse_step=1, mlp_only_layers=[], vocab_size=32000,
        max_position_embeddings=2048, tie_word_embeddings=False)
    _save(_init(transformers.Qwen3MoeForCausalLM, cfg), path, "400MB")


def model_dirs(a):
    """[(name, dir, description maker, make function)] for --models."""
    out = []
    for m in a.models:
        if m == "dense":
            d = os.path.join(a.work, "dense-%dL" % a.layers)
            out.append((m, d, "Llama BF16, %d layers" % a.layers,
                        lambda d=d: make_dense(d, a.layers)))
        else:
            d = os.path.join(a.work, "moe-%dL-%dE" % (a.moe_layers, a.experts))
            out.append((m, d, "Qwen3-MoE BF16, %d layers x %d experts (8 a token)"
                        % (a.moe_layers, a.experts),
                        lambda d=d: make_moe(d, a.moe_layers, a.experts)))
    return out


def st_tensors(path):
    """Tensors in the safetensors headers of the files in PATH."""
    n = 0
    for f in glob.glob(os.path.join(path, "*.safetensors")):
        with open(f, "rb") as fh:
            (hl,) = struct.unpack("<Q", fh.read(8))
            n += sum(1 for k in json.loads(fh.read(hl)) if k != "__metadata__")
    return n


def files(path):
    return sorted(f for f in glob.glob(os.path.join(path, "*"))
                  if os.path.isfile(f))


# ---------------------------------------------------------------- page cache

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
PAGE = mmap.PAGESIZE


def page_vector(path):
    """(the page vector of PATH: byte i bit 0 set when page i is in the
    page cache, size), from a mapping of it that touches nothing."""
    size = os.path.getsize(path)
    if size == 0:
        return b"", 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap " + path)
        try:
            vec = ctypes.create_string_buffer((size + PAGE - 1) // PAGE)
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore " + path)
            return vec.raw, size
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def _count(raw, size):
    """Bytes of the pages set in RAW (the last page counted to the end of
    the file only)."""
    n = sum(b & 1 for b in raw)
    if raw and raw[-1] & 1:
        return (n - 1) * PAGE + (size - (len(raw) - 1) * PAGE)
    return n * PAGE


def resident(path):
    """Bytes of PATH in the page cache now."""
    return _count(*page_vector(path))


class Touched:
    """The pages of a set of files seen in the page cache at any poll since
    it was made: after an eviction, the pages the load read.  Polled through
    the load, not only counted after it: this kernel's DAMON pages out page
    cache it deems cold, and a count taken only at the end missed 2 MB of
    a 0.44 GB load."""

    def __init__(self, paths):
        self.acc = {f: 0 for f in paths}
        self.low = None  # the fewest bytes resident at one poll

    def poll(self):
        now = 0
        for f in self.acc:
            raw, size = page_vector(f)
            self.acc[f] |= int.from_bytes(raw, "little")
            now += _count(raw, size)
        self.low = now if self.low is None else min(self.low, now)

    def bytes(self):
        out = {}
        for f, acc in self.acc.items():
            size = os.path.getsize(f)
            npages = (size + PAGE - 1) // PAGE
            raw = acc.to_bytes(npages, "little") if npages else b""
            out[os.path.basename(f)] = _count(raw, size)
        return out


def warm(path):
    for f in files(path):
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


def evict(path):
    """Cold for PATH: drop_caches where allowed, and PATH's files evicted
    (posix_fadvise DONTNEED, after sync: clean pages go).  Returns the bytes
    still resident."""
    drop_caches()
    os.sync()
    for f in files(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return sum(resident(f) for f in files(path))


def read_bytes(res, tp, out):
    """(all workers, per worker) of RES (file name: bytes read)."""
    total = sum(res.values())
    if not out:
        return total, total
    rank = re.compile(r"model-rank-(\d+)-part-\d+\.safetensors$")
    per = [0] * tp
    shared = 0
    for name, b in res.items():
        m = rank.match(name)
        if m and int(m.group(1)) < tp:
            per[int(m.group(1))] += b
        else:
            shared += b
    return total, max(per) + shared


# ---------------------------------------------------------------- loads

def load_once(model, tp, fmt, work, tag, touched=None):
    """(vLLM's weight loading s, LLM() s) of one load in a fresh engine;
    TOUCHED (a Touched) polled every half second through it."""
    out = os.path.join(work, tag + ".json")
    log = os.path.join(work, tag + ".log")
    times = os.path.join(work, tag + ".times")
    import shutil
    shutil.rmtree(times, ignore_errors=True)
    with open(log, "w") as lf:
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "oracle.py"),
                              "time", model, str(tp), fmt, out],
                             stdout=lf, stderr=subprocess.STDOUT,
                             start_new_session=True,
                             env=dict(os.environ, WSHARD_BENCH_TIMES=times))
        t_end = time.monotonic() + 1800
        try:
            while True:
                if touched:
                    touched.poll()
                try:
                    rc = p.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() > t_end:
                        rc = "timeout"
                        break
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    # the workers gone before the page cache is counted
    for _ in range(100):
        try:
            os.killpg(p.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    if touched:
        touched.poll()
    text = open(log).read()
    if rc != 0:
        sys.exit("bench: vLLM failed on %s (%s; see %s)" % (model, rc, log))
    took = [float(x) for x in re.findall(r"Loading weights took ([0-9.]+) seconds", text)]
    spans = [json.load(open(f)) for f in glob.glob(os.path.join(times, "worker-*.json"))]
    shutil.rmtree(times, ignore_errors=True)
    if len(spans) != tp:
        sys.exit("bench: %d of %d workers recorded their load (%s)" % (len(spans), tp, log))
    # the model built and its weights loaded; not process_weights_after_
    # loading, the same repacking whichever way the weights came
    load = max(w["end"] - w["model_start"] for w in spans)
    weights = max(w["end"] - w["start"] for w in spans)
    return (load, weights, took[0] if took else float("nan"),
            json.load(open(out))["llm_init_s"])


def convert(wshard, src, out, tp):
    for attempt in range(5):
        t0 = time.perf_counter()
        r = subprocess.run([wshard, "convert", "-q", "--force", "--tp", str(tp),
                            src, out], stderr=subprocess.PIPE, text=True)
        if r.returncode == 0:
            return time.perf_counter() - t0
        sys.stderr.write(r.stderr)
        if not re.search(r"Permission denied|Text file busy", r.stderr) \
                and r.returncode != 126:
            break
        time.sleep(5)  # the binary being rebuilt
    sys.exit("bench: wshard convert --tp %d %s failed" % (tp, src))


# ---------------------------------------------------------------- report

def gb(b):
    return "%.3f" % (b / 1e9)


def best(xs):
    """'best' with the spread of the runs: '12.34 +5%' (max over min)."""
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    lo, hi = min(xs), max(xs)
    if len(xs) == 1:
        return "%.2f" % lo
    return "%.2f +%d%%" % (lo, round(100 * (hi - lo) / lo))


def reproduce(a):
    cmd = ["scripts/bench", "--engine"]
    for key, opt in (("models", "--model"), ("tp", "--tp")):
        v = ",".join(str(x) for x in getattr(a, key))
        if v != DEFAULTS[key]:
            cmd += [opt, v]
    if a.runs != DEFAULTS["runs"]:
        cmd += ["--runs", str(a.runs)]
    extra = []
    for key in ("layers", "moe_layers", "experts"):
        if getattr(a, key) != DEFAULTS[key]:
            extra += ["--" + key.replace("_", "-"), str(getattr(a, key))]
    if extra:
        cmd += ["--"] + extra
    return " ".join(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wshard", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default=DEFAULTS["models"],
                    help="dense, moe or both (default %(default)s)")
    ap.add_argument("--tp", default=DEFAULTS["tp"],
                    help="tensor-parallel sizes (default %(default)s)")
    ap.add_argument("--runs", type=int, default=DEFAULTS["runs"])
    ap.add_argument("--layers", type=int, default=DEFAULTS["layers"],
                    help="dense layers (default %(default)s)")
    ap.add_argument("--moe-layers", type=int, default=DEFAULTS["moe_layers"])
    ap.add_argument("--experts", type=int, default=DEFAULTS["experts"])
    a = ap.parse_args()
    a.models = [m for m in a.models.split(",") if m]
    a.tp = [int(t) for t in str(a.tp).split(",") if t]
    if not a.models or any(m not in ("dense", "moe") for m in a.models):
        sys.exit("bench: --models takes dense, moe or dense,moe")
    if not a.tp or any(t < 1 for t in a.tp) or a.runs < 1:
        sys.exit("bench: --tp takes sizes >= 1 (2,4), --runs a count >= 1")
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)

    import vllm
    # cold: is eviction effective here?  (drop_caches needs root;
    # posix_fadvise does not)
    can_drop = drop_caches()
    rows, heads, convs = [], [], []
    t_start = time.time()
    for name, src, desc, make in model_dirs(a):
        if not os.path.isdir(src):
            print("bench: making %s in %s" % (desc, src), file=sys.stderr)
            make()
        size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(src, "*.safetensors")))
        nfiles = len(glob.glob(os.path.join(src, "*.safetensors")))
        heads.append("%-5s %s: %s tensors, %.2f GB in %d file(s)"
                     % (name, desc, format(st_tensors(src), ","), size / 1e9, nfiles))
        cold_ok = evict(src) == 0
        modes = ("warm", "cold") if cold_ok else ("warm",)
        if not cold_ok:
            print("bench: %s stays in the page cache after eviction: no cold rows"
                  % src, file=sys.stderr)
        for tp in a.tp:
            out = os.path.join(a.work, "%s-out-tp%d" % (os.path.basename(src), tp))
            convs.append("wshard convert --tp %d of %s (once, synced): %.2f s"
                         % (tp, name, convert(a.wshard, src, out, tp)))
            sides = (("src", src, "auto"), ("out", out, "sharded_state"),
                     ("wsh", out, "wshard"))
            res = {(s, m): {"w": [], "w0": [], "init": [], "rd": None}
                   for s, _, _ in sides for m in modes}
            for i in range(a.runs):
                for m in modes:
                    k = i % len(sides)
                    for side, model, fmt in sides[k:] + sides[:k]:
                        left = 0
                        if m == "warm":
                            warm(model)
                        else:
                            left = evict(model)
                        # polled in warm loads too: the same cost for both
                        touched = Touched(files(model))
                        tag = "%s-tp%d-%s-%s-%d" % (name, tp, side, m, i)
                        w, weights, w0, init = load_once(model, tp, fmt, a.work, tag, touched)
                        r = res[side, m]
                        r["w"].append(w)
                        r["w0"].append(w0)
                        r["init"].append(init)
                        note = ""
                        total = sum(os.path.getsize(f) for f in files(model))
                        if m == "warm" and touched.low is not None and touched.low < total:
                            # DAMON's pageout (see Bytes read above)
                            note = ", %s GB of it left the page cache during the load" \
                                % gb(total - touched.low)
                        if m == "cold":
                            rd = read_bytes(touched.bytes(), tp, side != "src")
                            if left:
                                note = " (%s GB resident before: not counted)" % gb(left)
                            else:
                                # the largest count of the runs (they agree
                                # but for readahead at the edges)
                                r["rd"] = max(r["rd"] or (0, 0), rd)
                            note = ", read %s GB, %s GB a worker%s" % (gb(rd[0]), gb(rd[1]), note)
                        print("  %s tp %d %s %-10s run %d: load %.2f s (weights %.2f s,"
                              " worker 0's %.2f s), LLM() %.2f s%s"
                              % (name, tp, m, {"src": "checkpoint", "out": "output",
                                               "wsh": "wshard"}[side],
                                 i + 1, w, weights, w0, init, note), file=sys.stderr)
            import shutil
            shutil.rmtree(out, ignore_errors=True)
            for m in modes:
                rows.append((name, tp, m, res["src", m], res["out", m], res["wsh", m],
                             res["src", "cold"]["rd"] if "cold" in modes else None,
                             res["out", "cold"]["rd"] if "cold" in modes else None))

    print()
    print("engine load benchmark: vLLM %s, %d cores, %.0f GiB RAM, %s"
          % (vllm.__version__, os.cpu_count(),
             os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
             os.uname().release))
    for h in heads:
        print(h)
    print("checkpoint: load_format auto; output: wshard convert --tp TP, "
          "load_format sharded_state (out) and wshard (wsh, the plugin: "
          "read and checksummed by libwshard); every load a fresh engine")
    print("seconds: best of %d runs, +N%% the slowest run over the best; "
          "load: the slowest worker's model built and weights loaded "
          "(load_model to the end of load_weights; vLLM's \"Loading weights took\" is worker 0's "
          "alone: w0 ratio)" % a.runs)
    print("cold: sync, %s and the model's files evicted (posix_fadvise "
          "DONTNEED), none of them resident before the load (mincore)"
          % ("drop_caches 3" if can_drop else "drop_caches not writable (no root)"))
    print("GB read: cold loads, the pages of the model's files that came "
          "into the page cache during the load (mincore every 0.5 s and after, "
          "none before) = read from storage, readahead included; warm rows "
          "repeat it (the same pages, from the page cache)")
    print("GB/worker: output, worker R's own model-rank-R files (largest rank) "
          "+ shared files; checkpoint, every worker get_tensor()s every "
          "tensor of every file (= all)")
    print()
    hdr = ("%-5s %2s %-5s | %-12s %-12s %-12s %5s %5s %5s | %-12s %-12s %-12s | %8s %8s"
           " | %8s %8s %6s"
           % ("model", "tp", "page", "load ckpt", "load out", "load wsh",
              "ratio", "ratio", "w0", "LLM() ckpt", "LLM() out", "LLM() wsh", "GB ckpt",
              "GB out", "GB/wkr", "GB/wkr", "out/"))
    hdr2 = ("%-5s %2s %-5s | %-12s %-12s %-12s %5s %5s %5s | %-12s %-12s %-12s | %8s %8s"
            " | %8s %8s %6s"
            % ("", "", "cache", "s", "s", "s", "out/", "wsh/", "out/", "s", "s", "s", "all",
               "all", "ckpt", "out", "ckpt"))
    print(hdr)
    print(hdr2)
    print("-" * len(hdr))
    for name, tp, m, s, o, wsh, rs, ro in rows:
        def ratio(x, k="w"):
            xs, ss = [v for v in x[k] if v == v], [v for v in s[k] if v == v]
            return min(xs) / min(ss) if xs and ss and min(ss) > 0 else float("nan")
        print("%-5s %2d %-5s | %-12s %-12s %-12s %5.2f %5.2f %5.2f | %-12s %-12s %-12s"
              " | %8s %8s | %8s %8s %6s"
              % (name, tp, m, best(s["w"]), best(o["w"]), best(wsh["w"]), ratio(o),
                 ratio(wsh), ratio(o, "w0"), best(s["init"]), best(o["init"]),
                 best(wsh["init"]),
                 gb(rs[0]) if rs else "-", gb(ro[0]) if ro else "-",
                 gb(rs[1]) if rs else "-", gb(ro[1]) if ro else "-",
                 "%.3f" % (ro[1] / rs[1]) if rs and ro and rs[1] else "-"))
    print()
    for c in convs:
        print(c)
    print("reproduce: %s   (%.0f min)" % (reproduce(a), (time.time() - t_start) / 60))


if __name__ == "__main__":
    main()
