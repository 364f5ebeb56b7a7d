#!/bin/sh
# A rule's "reshape": the output's header gives the rank's elements other
# dimensions (GLM-5-Next's A_log: [heads] cut by rows, held
# [1, 1, heads/tp, 1] by vLLM), the bytes as the split writes them; a
# reshape to another element count is refused before anything is written.
# (test/engine/run glm5_next checks the real layout against vLLM.)
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

SRC=$T/src
mkdir -p "$SRC"
py_st "$SRC" <<'PY' || fail "writing the checkpoint failed"
import json, os, struct, sys
import st
out = sys.argv[1]
t = {"a.A_log": ("F32", [8], b"".join(struct.pack("<f", float(i)) for i in range(8))),
     "a.w": ("BF16", [8, 4], bytes(range(64)))}
st.write(os.path.join(out, "model.safetensors"), t)
json.dump({"architectures": ["ReshapeTest"], "heads": 8},
          open(os.path.join(out, "config.json"), "w"))
PY
rules() {
	cat >"$T/rules.json" <<EOF
{"name": "reshape", "architectures": ["ReshapeTest"], "tensors": [
 {"match": "a.A_log", "split": "row", "reshape": [1, 1, "$1", 1]},
 {"match": "a.w", "split": "row", "reshape": ["heads/tp", 2, 2]}]}
EOF
}

rules "heads/tp"
for tp in 1 2 4; do
	expect_exit 0 "$WSHARD" convert --tp "$tp" --rules "$T/rules.json" --validate off \
		"$SRC" "$T/out$tp" || continue
	expect_exit 0 "$WSHARD" verify "$T/out$tp" || fail "tp $tp: verify failed"
	py_st "$T/out$tp" "$tp" <<'PY' || fail "tp $tp: not the reshaped rows"
import glob, os, struct, sys
import st
out, tp = sys.argv[1], int(sys.argv[2])
bad = []
for r in range(tp):
    o = st.read(glob.glob(os.path.join(out, f"model-rank-{r}-part-*.safetensors")))
    n = 8 // tp
    want = b"".join(struct.pack("<f", float(i)) for i in range(r * n, (r + 1) * n))
    if o["a.A_log"][1] != [1, 1, n, 1] or o["a.A_log"][2] != want:
        bad.append(f"rank {r}: A_log {o['a.A_log'][1]}")
    if o["a.w"][1] != [n, 2, 2] or o["a.w"][2] != bytes(range(64))[r * 8 * n:(r + 1) * 8 * n]:
        bad.append(f"rank {r}: w {o['a.w'][1]}")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
done

# the elements must stay: 8 heads, 2 a rank at tp 4, not 3
rules "3"
expect_exit 3 "$WSHARD" convert --tp 4 --rules "$T/rules.json" "$SRC" "$T/bad" &&
	err_has "reshape to 3" "\"reshape\" to 3 elements, a rank holds 2" && one_line "reshape to 3"
[ -e "$T/bad" ] && fail "a refused reshape left an output"
finish
