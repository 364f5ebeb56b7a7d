#!/bin/sh
# DeepSeek-V4-Pro's layout from scripts/gen-checkpoint --arch deepseek_v4
# (the generator of scripts/bench --model v4pro), reduced:
#  - --v4 pro gives V4-Pro's counts: 61 layers, 384 experts, 6 per token,
#    3 hash layers, one MTP layer, compress_ratios 128, 128, then 4 and 128
#    alternating (30 CSA, 31 HCA), 0 for the MTP layer;
#  - six layers with V4-Pro's first compress_ratios and its 3 hash layers,
#    8 FP4 experts, an MTP layer: convert --tp 2 passes verify --source;
#    mtp.* is left out (its reason given), only the hash layers hold
#    tid2eid (I32) and only the others the router's bias, only ratio 4
#    layers an indexer, every compressed layer a compressor;
#  - hash tables in I64 (--tid2eid-i64, as transformers writes them) give
#    the same I32 output as the I32 ones DeepSeek's inference code declares;
#  - the same with --expert-parallel (linear): every routed-expert tensor of
#    rank r is the tp-1 output's at rank r's experts (4 each), everything
#    else the tp-2 output's; verify --source passes.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

"$PYTHON" - "$ROOT/scripts" <<'EOF' || fail "--v4 pro's counts"
import sys
sys.path.insert(0, sys.argv[1])
from gen_dsv4 import PRESETS
p = PRESETS["pro"]
r = p["ratios"]
assert (p["layers"], p["experts"], p["per_tok"], p["hash_layers"], p["mtp"]) == \
    (61, 384, 6, 3, 1), p
assert len(r) == 62 and r[:4] == [128, 128, 4, 128] and r[-1] == 0, r
assert r[:61].count(4) == 30 and r[:61].count(128) == 31, r
EOF

S="--arch deepseek_v4 --layers 6 --compress-ratios 128,128,4,128,4,128,0 --hash-layers 3
--mtp-layers 1 --experts 8 --experts-per-tok 6 --hidden 64 --heads 4 --head-dim 128
--moe-intermediate 256 --index-heads 2 --index-head-dim 64 --vocab 512 --shards 3 --seed 3"
# shellcheck disable=SC2086
gen "$T/src" $S
# shellcheck disable=SC2086
gen "$T/src64" $S --tid2eid-i64

conv() { o=$1; shift; "$WSHARD" convert -q "$@" "$T/src" "$T/$o" >"$T/cerr" 2>&1 ||
	fail "convert $* $o: $(head -c 400 "$T/cerr")"; }
conv o1 --tp 1
conv o2 --tp 2
conv ep --tp 2 --expert-parallel
for o in o2 ep; do
	expect_exit 0 "$WSHARD" verify --source "$T/src" "$T/$o"
done
"$WSHARD" convert -q --tp 2 "$T/src64" "$T/o64" >"$T/cerr" 2>&1 ||
	fail "convert (I64 tables): $(head -c 400 "$T/cerr")"

echo "== the layers' tensors, mtp.* left out"
py_st "$T" <<'EOF' || fail "DeepSeek-V4-Pro layout"
import glob, json, struct, sys
T = sys.argv[1]
import st

def rank(d, r):
    return st.read(sorted(glob.glob(f"{d}/model-rank-{r}-part-*.safetensors")))

man = json.load(open(f"{T}/o2/wshard.json"))
left = [x["name"] for x in man["left_out"]]
assert left and all(n.startswith("mtp.0.") for n in left), left[:3]
assert all("multi-token prediction" in x["reason"] for x in man["left_out"])
o2 = rank(f"{T}/o2", 0)
for n, ratio in enumerate([128, 128, 4, 128, 4, 128]):
    L = f"model.layers.{n}."
    tid = o2.get(L + "ffn.experts.gate.tid2eid")
    bias = L + "ffn.experts.gate.e_score_correction_bias"
    if n < 3:
        assert tid and tid[0] == "I32" and tid[1] == [512, 6], (n, tid and tid[:2])
        assert bias not in o2, n
    else:
        assert tid is None and o2[bias][0] == "F32", n
    idx = L + "attn.indexer.wq_b.weight"
    assert (idx in o2) == (ratio == 4), (n, ratio)
    assert L + "attn.compressor.fused_wkv_wgate.weight" in o2, n
    w = o2[L + "ffn.experts.routed_experts.w13_weight"]
    assert w[0] == "U8" and w[1] == [8, 256, 32], w[:2]
print("   %d mtp.* tensors left out" % len(left))
o64 = rank(f"{T}/o64", 0)
for n in range(3):
    k = f"model.layers.{n}.ffn.experts.gate.tid2eid"
    assert o64[k] == o2[k], n
src = open(sorted(glob.glob(f"{T}/src64/*.safetensors"))[0], "rb").read()
assert b'"tid2eid"' not in src and b'"dtype":"I64"' in src

# expert parallelism: rank r holds experts 4r..4r+3 whole
one = rank(f"{T}/o1", 0)
for r in range(2):
    ep, plain = rank(f"{T}/ep", r), rank(f"{T}/o2", r)
    assert sorted(ep) == sorted(plain), r
    for k, (dt, shape, b) in ep.items():
        if ".routed_experts." in k:
            fdt, fshape, fb = one[k]
            per = len(fb) // fshape[0]
            want = fb[4 * r * per:(4 * r + 4) * per]
            assert shape == [4] + fshape[1:] and b == want, (r, k)
        else:
            assert (dt, shape, b) == plain[k], (r, k)
print("   expert parallel: 4 whole experts a rank, the rest as tp 2")
EOF

finish
