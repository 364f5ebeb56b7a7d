#!/bin/sh
# GPT-2's Conv1D weights, 2-D sources "transpose"d after their cut: a
# one-layer checkpoint in the Hub's names (no "transformer.", each layer's
# causal-mask buffers attn.bias and attn.masked_bias), F32 and BF16,
# converted at tp 1, 2 and 4.  Every rank tensor is compared with what
# vLLM's gpt2.py loads, worked out here element by element: the source
# transposed (W.t()), then c_attn's q, k and v each cut by rows
# (QKVParallelLinear), c_fc by rows, the c_proj weights by columns (and
# with --dtype bf16, rounded); the buffers are left out.  A matrix over a read thread's share of
# --max-memory (hidden 1024, 1MiB) and mpirun give the same bytes;
# --dry-run names the cut of a transposed matrix.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

# ckpt DIR DTYPE [HIDDEN]: hidden 32 (or HIDDEN), 4 heads, 64 positions,
# vocabulary 128.
ckpt() {
	mkdir -p "$1"
	py_st "$@" <<'PY' || fail "writing $1 failed"
import json, os, random, struct, sys
import st
out, dt = sys.argv[1], sys.argv[2]
H, P, V = int(sys.argv[3]) if len(sys.argv) > 3 else 32, 64, 128
es = 4 if dt == "F32" else 2


def rnd(shape, seed):
    n = 1
    for d in shape:
        n *= d
    r = random.Random(seed)
    if dt == "F32":     # numbers, for --dtype to round
        return (dt, shape, b"".join(struct.pack("<f", r.uniform(-2, 2)) for _ in range(n)))
    return (dt, shape, r.randbytes(n * es))


t = {"wte.weight": rnd([V, H], 1), "wpe.weight": rnd([P, H], 2),
     "ln_f.weight": rnd([H], 3), "ln_f.bias": rnd([H], 4),
     "h.0.attn.bias": ("F32", [1, 1, P, P], b"".join(
         struct.pack("<f", 1.0 if j <= i else 0.0) for i in range(P) for j in range(P))),
     "h.0.attn.masked_bias": ("F32", [], struct.pack("<f", -1e4))}
for k, (name, shape) in enumerate([("ln_1.weight", [H]), ("ln_1.bias", [H]),
                                   ("ln_2.weight", [H]), ("ln_2.bias", [H]),
                                   ("attn.c_attn.weight", [H, 3 * H]),
                                   ("attn.c_attn.bias", [3 * H]),
                                   ("attn.c_proj.weight", [H, H]), ("attn.c_proj.bias", [H]),
                                   ("mlp.c_fc.weight", [H, 4 * H]), ("mlp.c_fc.bias", [4 * H]),
                                   ("mlp.c_proj.weight", [4 * H, H]),
                                   ("mlp.c_proj.bias", [H])]):
    t["h.0." + name] = rnd(shape, 10 + k)
st.write(os.path.join(out, "model.safetensors"), t)
json.dump({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": H,
           "n_head": 4, "n_layer": 1, "n_positions": P, "vocab_size": V},
          open(os.path.join(out, "config.json"), "w"))
PY
}

# ranks_ok LABEL SRC OUT TP [BF16]: every rank tensor of OUT as vLLM holds
# it (with BF16, an F32 source's elements rounded to BF16, to nearest even).
ranks_ok() {
	py_st "$@" >"$T/ranks" 2>&1 <<'PY' || fail "$1: $(cat "$T/ranks")"
import glob, struct, sys
import st
src = st.read([sys.argv[2] + "/model.safetensors"])
out, tp = sys.argv[3], int(sys.argv[4])
bf16 = len(sys.argv) > 5


def to_bf16(e):
    u = struct.unpack("<I", e)[0]
    u += 0x7FFF + (u >> 16 & 1)
    return struct.pack("<H", u >> 16 & 0xFFFF)


def mat(name):
    """The source as a list of rows, each a list of elements (bytes)."""
    dt, shape, b = src["h.0." + name]
    es = len(b) // (shape[0] * shape[1])
    return [[b[(i * shape[1] + j) * es:(i * shape[1] + j + 1) * es]
             for j in range(shape[1])] for i in range(shape[0])]


def t(m):
    return [list(c) for c in zip(*m)]


def vec(name):
    dt, shape, b = src["h.0." + name]
    es = len(b) // shape[0]
    return [[b[i * es:(i + 1) * es]] for i in range(shape[0])]


def rows(m, r, parts=1):
    n = len(m) // parts
    return [x for p in range(parts) for x in m[p * n + r * n // tp:p * n + (r + 1) * n // tp]]


def cols(m, r):
    n = len(m[0])
    return [x[r * n // tp:(r + 1) * n // tp] for x in m]


bad = []
for r in range(tp):
    got = st.read(glob.glob("%s/model-rank-%d-part-*.safetensors" % (out, r)))
    want = {"attn.c_attn.weight": rows(t(mat("attn.c_attn.weight")), r, 3),
            "attn.c_attn.bias": rows(vec("attn.c_attn.bias"), r, 3),
            "attn.c_proj.weight": cols(t(mat("attn.c_proj.weight")), r),
            "mlp.c_fc.weight": rows(t(mat("mlp.c_fc.weight")), r),
            "mlp.c_fc.bias": rows(vec("mlp.c_fc.bias"), r),
            "mlp.c_proj.weight": cols(t(mat("mlp.c_proj.weight")), r)}
    for k, w in want.items():
        dt, shape, b = got["transformer.h.0." + k]
        flat = b"".join(to_bf16(e) if bf16 else e for row in w for e in row)
        if b != flat or (len(shape) == 2 and shape != [len(w), len(w[0])]):
            bad.append("rank %d: %s %s is not vLLM's" % (r, k, shape))
    if any(".attn.bias" in k or "masked_bias" in k for k in got):
        bad.append("rank %d holds the causal-mask buffers" % r)
    if "lm_head.weight" not in got:
        bad.append("rank %d has no lm_head.weight (tied to wte)" % r)
print("; ".join(bad[:3]))
sys.exit(1 if bad else 0)
PY
}

nc=0
for dt in BF16 F32; do
	ckpt "$T/gpt2-$dt" "$dt"
	for tp in 1 2 4; do
		o=$T/out-$dt-$tp
		expect_exit 0 "$WSHARD" convert -q --no-sync --tp "$tp" "$T/gpt2-$dt" "$o" &&
			ranks_ok "$dt tp $tp" "$T/gpt2-$dt" "$o" "$tp"
		nc=$((nc + 1))
	done
done
expect_exit 0 "$WSHARD" verify "$T/out-F32-2"
# --dtype bf16: each element of a transposed piece rounded on its way
for tp in 1 2; do
	o=$T/out-bf16-$tp
	expect_exit 0 "$WSHARD" convert -q --no-sync --tp "$tp" --dtype bf16 "$T/gpt2-F32" "$o" &&
		ranks_ok "F32 as BF16, tp $tp" "$T/gpt2-F32" "$o" "$tp" BF16
	nc=$((nc + 1))
done
expect_exit 0 "$WSHARD" convert --dry-run --tp 2 "$T/gpt2-BF16" "$T/dry"
grep -qF "h.0.mlp.c_proj.weight [0, 64) of dimension 0, transposed" "$T/out" &&
	grep -qF "h.0.attn.c_attn.weight [32, 48) of dimension 1, transposed" "$T/out" ||
	fail "--dry-run does not name the transposed cuts: $(grep -F c_ "$T/out" | head -n 4)"
# a matrix larger than a read thread's share of --max-memory is read in
# tiles, and under mpirun: the same bytes
ckpt "$T/big" BF16 1024
expect_exit 0 "$WSHARD" convert -q --no-sync --tp 2 "$T/big" "$T/big-64"
expect_exit 0 "$WSHARD" convert -q --no-sync --tp 2 --max-memory 1MiB "$T/big" "$T/big-1"
expect_exit 0 run_mpi 2 "$WSHARD" convert -q --no-sync --tp 2 --max-memory 1MiB "$T/big" \
	"$T/big-mpi"
for r in 0 1; do
	for o in big-1 big-mpi; do
		cmp -s "$T/big-64/model-rank-$r-part-0.safetensors" \
			"$T/$o/model-rank-$r-part-0.safetensors" || fail "$o: rank $r differs"
	done
done
# a cut that does not divide is refused before anything is written
expect_exit 3 "$WSHARD" convert -q --tp 3 "$T/gpt2-BF16" "$T/bad"
one_line "tp 3"
[ -e "$T/bad/wshard.json" ] && fail "a refused convert left a manifest"
echo "gpt2: $nc conversions as vLLM loads them"
finish
