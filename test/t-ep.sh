#!/bin/sh
# Expert parallelism (convert --expert-parallel): the layout of vLLM's
# --enable-expert-parallel.
#
# (a) Qwen3-MoE with 5 experts (not divisible by 2 or 4), Mixtral with 4 and
#     Qwen2-MoE (shared expert) with 4, at tp 2 (and the Qwen3-MoE at 4):
#     every expert tensor of rank r is, byte for byte, the tp-1 output's
#     stacked tensor at rank r's experts (vLLM's determine_expert_map,
#     linear: E/N each, one more on each of the first E mod N ranks), every
#     other tensor (attention, routers, the shared expert) is the plain
#     tensor-parallel output's; `wshard verify` passes.
# (b) --expert-placement round_robin: vLLM 0.32 places these families
#     linearly (round_robin needs grouped routing), so the rank files are
#     the linear ones; the manifest keeps the option asked for and records
#     the placement held; inspect shows it; verify passes (the options
#     round-trip).
# (c) mpirun -np 1|2|3|4 gives byte-identical output to one process, each
#     process reading a share, the shares summing to the tensor bytes; one
#     process reads exactly the tensor bytes (each expert once).
# (d) a tensor-parallel output and an expert-parallel one into the same OUT
#     without --force: refused (exit 2) like any earlier output; --force
#     replaces it.
# (e) a manifest whose "parallel" placement contradicts its options: verify
#     reports it; one whose options name an unknown placement is not a
#     valid manifest (exit 3).
# (f) --expert-placement without --expert-parallel, or an unknown placement:
#     usage errors (exit 2, one line); fewer experts than ranks: exit 3.
# shellcheck disable=SC2086,SC1091
. "$(dirname "$0")/lib.sh"

need_reference
PLAIN="env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK"

S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --vocab 250 --seed 5"
gen "$T/q3" --arch qwen3_moe $S --experts 5 --head-dim 16 --intermediate 128 \
	--moe-intermediate 32 --shards 3
gen "$T/mx" --arch mixtral $S --experts 4 --intermediate 96 --shards 2
gen "$T/q2" --arch qwen2_moe $S --experts 4 --intermediate 128 --moe-intermediate 32 \
	--shared-intermediate 96

# conv OUT ARGS...: a quiet single-process convert into $T/OUT.
conv() { o=$1; shift; $PLAIN "$WSHARD" convert -q "$@" "$T/$o" >"$T/cerr" 2>&1 ||
	fail "convert $* $o: $(head -c 400 "$T/cerr")"; }

# ep_check LABEL EP TP1 TPN N: (a)'s comparison.
ep_check() {
	"$PYTHON" - "$2" "$3" "$4" "$5" <<'EOF' || fail "$1: expert-parallel layout"
import glob, json, struct, sys
ep, one, tpn, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
class T:  # a tensor as (shape, raw bytes); t[list] takes experts of dim 0
    def __init__(s, shape, b): s.shape, s.b = tuple(shape), b
    def __getitem__(s, es):
        k = len(s.b) // s.shape[0]
        return T((len(es),) + s.shape[1:], b"".join(s.b[e * k:(e + 1) * k] for e in es))
    def tobytes(s): return s.b
def rank(d, r):
    t = {}
    for p in sorted(glob.glob(f"{d}/model-rank-{r}-part-*.safetensors")):
        raw = open(p, "rb").read()
        h = struct.unpack("<Q", raw[:8])[0]
        for k, v in json.loads(raw[8:8 + h]).items():
            if k != "__metadata__":
                a, b = v["data_offsets"]
                t[k] = T(v["shape"], raw[8 + h + a:8 + h + b])
    return t
def local(E, r):  # vLLM 0.32 determine_expert_map, linear
    base, rem = divmod(E, n)
    start = r * base + min(r, rem)
    return list(range(start, start + base + (1 if r < rem else 0)))
full, bad = rank(one, 0), 0
for r in range(n):
    got, plain = rank(ep, r), rank(tpn, r)
    if sorted(got) != sorted(plain):
        print(f"rank {r}: names differ from the tp output"); bad += 1
    for k, v in got.items():
        if ".routed_experts." in k:
            want = full[k][local(full[k].shape[0], r)]
        else:
            want = plain[k]
        if v.shape != want.shape or v.tobytes() != want.tobytes():
            print(f"rank {r}: {k}: {v.shape}, want {want.shape}"); bad += 1
sys.exit(1 if bad else 0)
EOF
}

for m in q3 mx q2; do
	conv $m-1 --tp 1 "$T/$m"
	conv $m-2 --tp 2 "$T/$m"
	conv $m-ep2 --tp 2 --expert-parallel "$T/$m"
	ep_check "$m ep 2" "$T/$m-ep2" "$T/$m-1" "$T/$m-2" 2
	$PLAIN "$WSHARD" verify "$T/$m-ep2" >"$T/vout" 2>&1 || fail "$m ep 2: verify: $(head -c 300 "$T/vout")"
done
conv q3-4 --tp 4 "$T/q3"
conv q3-ep4 --tp 4 --expert-parallel "$T/q3"
ep_check "q3 ep 4" "$T/q3-ep4" "$T/q3-1" "$T/q3-4" 4

# (b) round_robin falls back to linear, as in vLLM.
conv q3-rr --tp 2 --expert-parallel --expert-placement round_robin "$T/q3"
for f in "$T"/q3-ep2/model-rank-*; do
	cmp -s "$f" "$T/q3-rr/${f##*/}" || fail "round_robin: ${f##*/} differs from linear"
done
"$PYTHON" - "$T/q3-rr/wshard.json" <<'EOF' || fail "round_robin: manifest options/parallel"
import json, sys
m = json.load(open(sys.argv[1]))
o, p = m["options"], m["parallel"]
sys.exit(not (o["expert_parallel"] is True and o["expert_placement"] == "round_robin"
              and p == {"tp": 2, "pp": 1, "pp_layers": None, "experts": True, "expert_parallel": True,
                        "expert_placement": "linear"}))
EOF
$PLAIN "$WSHARD" inspect "$T/q3-rr" >"$T/iout" 2>&1
grep -q '^expert parallel: linear placement, whole experts per rank (asked: round_robin)$' "$T/iout" ||
	fail "inspect round_robin: $(head -c 300 "$T/iout")"
$PLAIN "$WSHARD" inspect "$T/q3-2" | grep -q '^expert parallel' && fail "inspect tp: shows expert parallel"
$PLAIN "$WSHARD" verify "$T/q3-rr" >"$T/vout" 2>&1 || fail "round_robin: verify: $(head -c 300 "$T/vout")"

# (c) mpirun gives the single-process bytes; reads divide the experts.
"$PYTHON" - "$T/q3-ep4/wshard.json" <<'EOF' || fail "one process: bytes_read is not the tensor bytes"
import json, sys
m = json.load(open(sys.argv[1]))
sys.exit(m["run"]["bytes_read"] != [m["source"]["tensor_bytes"]])
EOF
if command -v mpirun >/dev/null 2>&1; then
	for np in 1 2 3 4; do
		rm -rf "$T/mpi"
		run_mpi $np "$WSHARD" convert -q --tp 4 --expert-parallel "$T/q3" "$T/mpi" \
			>"$T/mout" 2>&1 || { fail "mpirun -np $np: $(head -c 300 "$T/mout")"; continue; }
		for f in "$T"/q3-ep4/model-rank-*; do
			cmp -s "$f" "$T/mpi/${f##*/}" || fail "mpirun -np $np: ${f##*/} differs"
		done
		"$PYTHON" - "$T/mpi/wshard.json" "$np" <<'EOF' || fail "mpirun -np $np: bytes_read"
import json, sys
m = json.load(open(sys.argv[1]))
br = m["run"]["bytes_read"]
ok = len(br) == int(sys.argv[2]) and sum(br) == m["source"]["tensor_bytes"] and all(br)
if not ok:
    print(br, m["source"]["tensor_bytes"])
sys.exit(not ok)
EOF
	done
else
	echo "note: no mpirun, (c) checked for one process only"
fi

# (d) a TP output then an EP one into the same OUT.
expect_exit 2 $PLAIN "$WSHARD" convert -q --tp 2 --expert-parallel "$T/q3" "$T/q3-2" &&
	{ one_line "ep over tp"; err_has "ep over tp" "pass --force"; }
expect_exit 0 $PLAIN "$WSHARD" convert -q --force --tp 2 --expert-parallel "$T/q3" "$T/q3-2"
cmp -s "$T/q3-2/model-rank-1-part-0.safetensors" "$T/q3-ep2/model-rank-1-part-0.safetensors" ||
	fail "--force: the expert-parallel output did not replace the tp one"

# (e) "parallel" contradicting the options.
sed 's/"expert_placement": "linear"/"expert_placement": "round_robin"/' \
	"$T/q3-ep2/wshard.json" >"$T/m.json" && cp "$T/m.json" "$T/q3-ep2/wshard.json"
expect_exit 1 $PLAIN "$WSHARD" verify "$T/q3-ep2" &&
	grep -qF "manifest: expert placement round_robin, but its options give linear" "$T/out" ||
	fail "verify: tampered placement: $(head -c 300 "$T/out")"

sed 's/"expert_placement": "round_robin"/"expert_placement": "rr"/' \
	"$T/q3-rr/wshard.json" >"$T/m.json" && cp "$T/m.json" "$T/q3-rr/wshard.json"
expect_exit 3 $PLAIN "$WSHARD" verify "$T/q3-rr" &&
	{ one_line "unknown placement"; err_has "unknown placement" '"options"."expert_placement" is not linear or round_robin'; }

# (f) usage errors.
expect_exit 2 "$WSHARD" convert --tp 2 --expert-placement linear "$T/q3" "$T/x" &&
	{ one_line "placement alone"; err_has "placement alone" "--expert-placement needs --expert-parallel"; }
expect_exit 2 "$WSHARD" convert --tp 2 --expert-parallel --expert-placement rr "$T/q3" "$T/x" &&
	{ one_line "bad placement"; err_has "bad placement" "'rr' is not linear or round_robin"; }
expect_exit 3 "$WSHARD" convert --tp 8 --expert-parallel "$T/q3" "$T/x" &&
	{ one_line "fewer experts"; err_has "fewer experts" "5 experts for 8 ranks"; }

# (g) experts stacked as vLLM holds them, [E, 2I, H] and [E, H, I] (Gemma
# 4's; a rule's "experts" with "split": "col", no transpose): at tp 2 and
# 3, rank r's tensors are the source's rows of its experts (5 of them:
# 3 and 2, or 2, 2 and 1), gate_up's chunks uncut; verify passes.
gen "$T/g4" --layers 1 --hidden 16 --heads 2 --kv-heads 2 --intermediate 32 --vocab 64 \
	--extra-tensor model.layers.0.experts.gate_up_proj:5x24x16 \
	--extra-tensor model.layers.0.experts.down_proj:5x16x12
cat >"$T/g4.json" <<'EOF2'
{"name": "stacked-experts", "architectures": ["LlamaForCausalLM"],
 "tensors": [
  {"match": "model.layers.{n}.experts.gate_up_proj", "output": "model.layers.{n}.experts.w13_weight", "split": "col", "chunks": 2, "experts": true},
  {"match": "model.layers.{n}.experts.down_proj", "output": "model.layers.{n}.experts.w2_weight", "split": "col", "rows": 2, "experts": true},
  {"match": "model.*", "split": "skip"},
  {"match": "lm_head.*", "split": "skip", "optional": true}]}
EOF2
for tp in 2 3; do
	$PLAIN "$WSHARD" convert -q --tp $tp --expert-parallel --rules "$T/g4.json" "$T/g4" "$T/g4-ep$tp" ||
		fail "stacked experts at tp $tp: convert failed"
	py_st "$T/g4" "$T/g4-ep$tp" $tp <<'PY' || fail "stacked experts at tp $tp: not the rank's experts whole"
import glob, os, sys
import st
src, out, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = st.read(glob.glob(os.path.join(src, "*.safetensors")))
first = 0
bad = 0
for r in range(tp):
    n = 5 // tp + (1 if r < 5 % tp else 0)  # vLLM's linear placement
    o = st.read(glob.glob(os.path.join(out, "model-rank-%d-part-*.safetensors" % r)))
    for a, b in (("gate_up_proj", "w13_weight"), ("down_proj", "w2_weight")):
        dt, shape, data = s["model.layers.0.experts." + a]
        per = len(data) // shape[0]
        got = o.get("model.layers.0.experts." + b)
        if got is None or got[1] != [n] + shape[1:] or got[2] != data[first * per:(first + n) * per]:
            print("rank %d: %s %s" % (r, b, "missing" if got is None else got[1]))
            bad += 1
    first += n
sys.exit(bad > 0)
PY
	$PLAIN "$WSHARD" verify "$T/g4-ep$tp" >"$T/out" 2>&1 || fail "stacked experts at tp $tp: verify: $(tail -n 2 "$T/out")"
done
echo "   experts stacked as vLLM holds them: each rank's whole, at tp 2 and 3"
finish
