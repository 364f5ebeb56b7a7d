#!/bin/sh
# A "qkv" operator of five parts (MiniMax-M3's sparse-attention layers:
# q, k, v, the indexer's q cut by kv heads as k is, the indexer's k whole
# on every rank), at tp 1, 2 and 4 (4 ranks, 2 kv heads: each kv head on
# two ranks), and an extra's "if" (a scale only in the layers whose config
# entry says so).  Each row of a source holds its own index, so a rank's
# rows say where they came from.  (test/engine/run minimax_m3 checks the
# real layout against vLLM.)
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

SRC=$T/src
mkdir -p "$SRC"
py_st "$SRC" <<'PY' || fail "writing the checkpoint failed"
import json, os, struct, sys
import st
out = sys.argv[1]


def rows(n, base):
    return ("BF16", [n, 4], b"".join(struct.pack("<HHHH", base + i, 0, 0, 0) for i in range(n)))


t = {}
for n in (0, 1):
    p = f"l.{n}."
    t.update({p + "q": rows(16, 100), p + "k": rows(4, 200), p + "v": rows(4, 300),
              p + "iq": rows(4, 400), p + "ik": rows(2, 500)})
st.write(os.path.join(out, "model.safetensors"), t)
json.dump({"architectures": ["Qkv5Test"], "num_attention_heads": 8, "num_key_value_heads": 2,
           "head_dim": 2, "hidden_size": 4, "num_hidden_layers": 2, "sparse": [0, 1]},
          open(os.path.join(out, "config.json"), "w"))
PY
cat >"$T/rules.json" <<'EOF'
{"name": "qkv5", "architectures": ["Qkv5Test"],
 "fused": {"qkv5": {"parts": ["q", "k", "v", "iq", "ik"], "split": "qkv"}},
 "tensors": [
  {"match": "l.{n}.q", "fuse": "qkv5.q", "output": "l.{n}.qkv"},
  {"match": "l.{n}.k", "fuse": "qkv5.k", "output": "l.{n}.qkv"},
  {"match": "l.{n}.v", "fuse": "qkv5.v", "output": "l.{n}.qkv"},
  {"match": "l.{n}.iq", "fuse": "qkv5.iq", "output": "l.{n}.qkv"},
  {"match": "l.{n}.ik", "fuse": "qkv5.ik", "output": "l.{n}.qkv"}],
 "extra": [{"name": "l.{n}.scale", "value": 1.0, "if": "sparse[n] == 1"}]}
EOF

for tp in 1 2 4; do
	expect_exit 0 "$WSHARD" convert --tp "$tp" --rules "$T/rules.json" --validate off \
		"$SRC" "$T/out$tp" || continue
	expect_exit 0 "$WSHARD" verify "$T/out$tp" || fail "tp $tp: verify failed"
	py_st "$T/out$tp" "$tp" <<'PY' || fail "tp $tp: not q, k, v, index q by kv head, index k whole"
import glob, os, struct, sys
import st
out, tp = sys.argv[1], int(sys.argv[2])
bad = []
for r in range(tp):
    o = st.read(glob.glob(os.path.join(out, f"model-rank-{r}-part-*.safetensors")))
    # q: 16 rows (8 heads of 2) in tp parts; k, v, iq: 2 heads of 2 rows,
    # a rank's own (tp <= 2) or its kv head r // (tp // 2)
    q = list(range(100 + r * 16 // tp, 100 + (r + 1) * 16 // tp))
    kv = (list(range(r * 4 // tp, (r + 1) * 4 // tp)) if tp <= 2
          else [2 * (r // (tp // 2)), 2 * (r // (tp // 2)) + 1])
    want = q + [200 + i for i in kv] + [300 + i for i in kv] + [400 + i for i in kv] + [500, 501]
    for n in (0, 1):
        d = o[f"l.{n}.qkv"][2]
        got = [struct.unpack_from("<H", d, 8 * i)[0] for i in range(len(d) // 8)]
        if got != want:
            bad.append(f"rank {r} layer {n}: rows {got}, want {want}")
    if "l.0.scale" in o or o.get("l.1.scale", (0, 0, b""))[2] != struct.pack("<f", 1.0):
        bad.append(f"rank {r}: the scale is not in layer 1 alone")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
done
finish
