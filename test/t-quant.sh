#!/bin/sh
# compressed-tensors pack-quantized W4A16 checkpoints (scripts/gen-checkpoint
# --w4a16), the layout vLLM's CompressedTensorsWNA16 keeps per rank (the
# engine suite's llama-w4a16* cases compare it with vLLM byte for byte):
#  - X.weight_packed [rows, cols/8] I32 cut and fused like X.weight;
#  - X.weight_scale [rows, groups]: rows like the weight, groups cut beside a
#    column split (o_proj, down_proj); one per channel ([rows, 1]) whole;
#  - X.weight_shape [2] whole; a fused one is its last part's (v, up);
#  - attn.k/v/q_scale F32 [1] and k/v/q_zero_point [1] added per layer;
# and a split that would cut a group or an int32 word refused with exit 3,
# one line naming the tensor, nothing written.  GPTQ and AWQ checkpoints
# (--gptq, --awq), as vLLM's AutoGPTQ and AutoAWQ methods keep them (the
# engine suite's llama-gptq* and llama-awq cases byte for byte): X.qweight,
# X.scales and X.qzeros are [in, out], so a column-parallel layer cuts
# dimension 1 and its fused parts lie side by side there, a row-parallel
# one cuts dimension 0 (one group, GPTQ per channel: whole); g_idx goes;
# experts stack them (check_experts below).  compressed-tensors NVFP4
# (--nvfp4) as check_nvfp4 says.  Refused from config.json: GPTQ with
# activation order, formats wshard does not write (bitsandbytes,
# compressed-tensors' MXFP4).
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

S="--layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --vocab 1000 --shards 2 --seed 5"

# shows WHAT PATTERN...: inspect's output ($T/out) matches each PATTERN
# (grep); a failure names WHAT.
shows() {
	what=$1
	shift
	for want in "$@"; do
		grep -q "$want" "$T/out" || fail "${what:+$what: }inspect does not show '$want'"
	done
}

# check OUT SRC TP: the rank files against SRC, by the rules above.
check() {
	py_st "$1" "$2" "$3" <<'PY' || fail "$1: rank files differ from the layout"
import glob, os, struct, sys
out, src, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
from st import read

def cols(t, r):
    dt, shape, b = t
    rows, c = shape
    w = len(b) // rows // c
    k = c // tp
    return b"".join(b[(i * c + r * k) * w:(i * c + r * k + k) * w] for i in range(rows))

def rows(t, r):
    dt, shape, b = t
    k = len(b) // tp
    return b[r * k:(r + 1) * k]

s = read(glob.glob(os.path.join(src, "*.safetensors")))
bad = 0
for r in range(tp):
    o = read(glob.glob(os.path.join(out, "model-rank-%d-part-*.safetensors" % r)))
    L = "model.layers.1."
    want = {
        L + "self_attn.o_proj.weight_packed": cols(s[L + "self_attn.o_proj.weight_packed"], r),
        L + "mlp.down_proj.weight_scale": (cols(s[L + "mlp.down_proj.weight_scale"], r)
                                           if s[L + "mlp.down_proj.weight_scale"][1][1] > 1
                                           else s[L + "mlp.down_proj.weight_scale"][2]),
        L + "mlp.gate_up_proj.weight_packed": rows(s[L + "mlp.gate_proj.weight_packed"], r)
                                             + rows(s[L + "mlp.up_proj.weight_packed"], r),
        L + "self_attn.qkv_proj.weight_shape": s[L + "self_attn.v_proj.weight_shape"][2],
        L + "self_attn.o_proj.weight_shape": s[L + "self_attn.o_proj.weight_shape"][2],
        L + "self_attn.attn.k_scale": struct.pack("<f", 1.0),
        L + "self_attn.attn.v_zero_point": b"\0\0",
    }
    for k, v in want.items():
        if k not in o or o[k][2] != v:
            print("rank %d: %s %s" % (r, k, "missing" if k not in o else "differs"))
            bad += 1
    if any(k.endswith(".weight") and "proj" in k for k in o if "lm_head" not in k):
        print("rank %d: an unquantized projection weight" % r)
        bad += 1
sys.exit(bad > 0)
PY
}

ncases=0
# layout CHECK SRC TP ARG: converts SRC into $T/out-NAME-tpTP (NAME the
# source's name after "src-") at --tp TP, checks it with CHECK OUT SRC TP
# ARG and verifies it.
layout() {
	o=$T/out-${2##*/src-}-tp$3
	ncases=$((ncases + 1))
	if expect_exit 0 "$WSHARD" convert -q --tp "$3" "$2" "$o"; then
		"$1" "$o" "$2" "$3" "$4"
		expect_exit 0 "$WSHARD" verify "$o"
	fi
}

for g in 128 0; do
	gen "$T/src-g$g" $S --w4a16 "$g"
	for tp in 1 2; do
		layout check "$T/src-g$g" "$tp" -
	done
done
echo "   group 128 and per channel at tp 1 and 2: the rank files hold vLLM's layout"

# compressed-tensors NVFP4 (--nvfp4), as vLLM's CompressedTensorsW4A4Fp4
# keeps it (the engine suite's llama-nvfp4* cases byte for byte):
# X.weight_packed U8 [rows, cols/2] and X.weight_scale F8_E4M3
# [rows, cols/16] cut and fused like the weight; X.weight_global_scale and
# X.input_global_scale F32 [1] one element per fused part, whole beside a
# column split.  ModelOpt's NVFP4 (--nvfp4 modelopt) the same under its
# names: X.weight, X.weight_scale, X.weight_scale_2, X.input_scale; Quark's
# MXFP4 (--mxfp4 quark) as compressed-tensors' MXFP4 under X.weight, and
# its MXFP6 (--mxfp4 quark6: four values in three bytes) alike.
# Experts as vLLM's NVFP4 MoE methods stack them (qwen3_moe-nvfp4*):
# w13's bytes and group scales the rank's gate rows then its up rows, w2's
# cut by columns; the per-tensor scales [E, 2] for w13 (gate's, up's: the
# input scales too, not collapsed as FP8's are) and [E] for w2.
check_nvfp4() {
	py_st "$@" <<'PY' || fail "$1: rank files differ from NVFP4's layout"
import glob, os, sys
import st
out, src, tp, v = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
a16, mx = v == "a16", v in ("mxfp4", "quark_mx", "quark_mx6")
s = st.read(glob.glob(os.path.join(src, "*.safetensors")))
# ModelOpt's names: X.weight, X.weight_scale_2, X.input_scale (scalars)
packed, gscale, iscale = (("weight", "weight_scale_2", "input_scale") if v in ("modelopt", "quark_mx", "quark_mx6") else
                          ("weight_packed", "weight_global_scale", "input_global_scale"))
rows = lambda t, r: st.rank_rows(t, r, tp)
cols = lambda t, r: st.rank_cols(t, r, tp)
L = "model.layers.1."
E = len({k.split(".")[5] for k in s if k.startswith(L + "mlp.experts.")})
x = lambda e, p, n: s[L + "mlp.experts.%d.%s_proj.%s" % (e, p, n)]
O = L + "mlp.experts.routed_experts."
bad = 0
for r in range(tp):
    o = st.read(glob.glob(os.path.join(out, "model-rank-%d-part-*.safetensors" % r)))
    want = {}
    for n in (packed, "weight_scale"):
        want[L + "self_attn.qkv_proj." + n] = b"".join(
            rows(s[L + "self_attn.%s_proj.%s" % (p, n)], r) for p in "qkv")
        want[L + "self_attn.o_proj." + n] = cols(s[L + "self_attn.o_proj." + n], r)
        if E:
            want[O + "w13_" + n] = b"".join(rows(x(e, "gate", n), r) + rows(x(e, "up", n), r)
                                            for e in range(E))
            want[O + "w2_" + n] = b"".join(cols(x(e, "down", n), r) for e in range(E))
        else:
            want[L + "mlp.gate_up_proj." + n] = b"".join(
                rows(s[L + "mlp.%s_proj.%s" % (p, n)], r) for p in ("gate", "up"))
    for n in () if mx else (gscale,) + (() if a16 else (iscale,)):
        want[L + "self_attn.qkv_proj." + n] = b"".join(
            s[L + "self_attn.%s_proj.%s" % (p, n)][2] for p in "qkv")
        if E:
            want[O + "w13_" + n] = b"".join(x(e, "gate", n)[2] + x(e, "up", n)[2] for e in range(E))
            want[O + "w2_" + n] = b"".join(x(e, "down", n)[2] for e in range(E))
        else:
            want[L + "mlp.down_proj." + n] = s[L + "mlp.down_proj." + n][2]
    for k, b in want.items():
        if k not in o or o[k][2] != b:
            print("rank %d: %s %s" % (r, k, "missing" if k not in o else "differs"))
            bad += 1
    if a16 and any(k.endswith(iscale) for k in o):
        print("rank %d: an input_global_scale without FP4 activations" % r)
        bad += 1
    if mx and any(k.endswith("global_scale") for k in o):
        print("rank %d: a global scale for MXFP4" % r)
        bad += 1
    if E and not a16 and not mx and o.get(O + "w13_" + iscale, (0, [0]))[1] != [E, 2]:
        print("rank %d: w13_%s is not [E, 2]" % (r, iscale))
        bad += 1
sys.exit(bad > 0)
PY
}

M4="--arch qwen3_moe --layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --vocab 1000 --experts 4 --moe-intermediate 256 --shards 2 --seed 9"
for v in w4a4 a16 modelopt mxfp4 quark_mx quark_mx6 moe:w4a4 moe:modelopt moe:mxfp4 moe:quark_mx; do
	q="--nvfp4 ${v#moe:}"
	[ "${v#moe:}" = mxfp4 ] && q="--mxfp4 a16"
	[ "${v#moe:}" = quark_mx ] && q="--mxfp4 quark"
	[ "$v" = quark_mx6 ] && q="--mxfp4 quark6"
	case $v in
	moe:*) v=${v#moe:} src=$T/src-nvfp4moe-$v; gen "$src" $M4 $q ;;
	*) src=$T/src-nvfp4-$v; gen "$src" $S $q ;;
	esac
	for tp in 1 2; do
		layout check_nvfp4 "$src" "$tp" "$v"
	done
done
echo "   NVFP4 (compressed-tensors' with FP4 activations and weight-only, ModelOpt's) and MXFP4 (compressed-tensors', Quark's), dense and experts, and Quark's MXFP6 (dense), at tp 1 and 2: vLLM's layout"

# check_inout OUT SRC TP METHOD: GPTQ's or AWQ's rank files against SRC.
check_inout() {
	"$PYTHON" - "$@" "$ROOT/test" <<'PY' || fail "$1: rank files differ from the layout"
import glob, os, sys
out, src, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, sys.argv[5])
import st

def read(paths):
    return {k: (shape, b) for k, (dt, shape, b) in st.read(paths).items()}

def beside(parts, r, kv=None):
    # each row: rank r's columns of every part in turn
    rows = parts[0][0][0]
    out = b""
    for i in range(rows):
        for j, (shape, b) in enumerate(parts):
            w = len(b) // rows // shape[1]
            k = shape[1] // tp
            out += b[(i * shape[1] + r * k) * w:(i * shape[1] + r * k + k) * w]
    return out

def rows(t, r):
    shape, b = t
    if shape[0] == 1:
        return b
    k = len(b) // tp
    return b[r * k:(r + 1) * k]

s = read(glob.glob(os.path.join(src, "*.safetensors")))
bad = 0
L = "model.layers.1."
for r in range(tp):
    o = read(glob.glob(os.path.join(out, "model-rank-%d-part-*.safetensors" % r)))
    want = {}
    for x in ("qweight", "scales", "qzeros"):
        want[L + "self_attn.qkv_proj." + x] = beside(
            [s[L + "self_attn.%s_proj.%s" % (p, x)] for p in "qkv"], r)
        want[L + "mlp.gate_up_proj." + x] = beside(
            [s[L + "mlp.%s_proj.%s" % (p, x)] for p in ("gate", "up")], r)
        want[L + "self_attn.o_proj." + x] = rows(s[L + "self_attn.o_proj." + x], r)
        want[L + "mlp.down_proj." + x] = rows(s[L + "mlp.down_proj." + x], r)
    for k, v in want.items():
        if k not in o or o[k][1] != v:
            print("rank %d: %s %s" % (r, k, "missing" if k not in o else "differs"))
            bad += 1
    if [k for k in o if k.endswith(".g_idx")]:
        print("rank %d: g_idx written" % r)
        bad += 1
sys.exit(bad > 0)
PY
}

for q in gptq:128 gptq:-1 awq:128; do
	m=${q%%:*} g=${q#*:}
	gen "$T/src-$m$g" $S "--$m" "$g"
	for tp in 1 2; do
		layout check_inout "$T/src-$m$g" "$tp" "$m"
	done
done
echo "   GPTQ (groups of 128, per channel) and AWQ at tp 1 and 2: vLLM's layout"

# GPTQ's and AWQ's experts, stacked as vLLM's AutoGPTQ and AutoAWQ MoE
# methods hold them (the engine suite's qwen3_moe-gptq* and -awq cases byte
# for byte): w13_qweight, _scales and _qzeros [E, in, 2 out/N] with each
# expert's gate and up columns side by side, w2_* [E, in/N, out] cut by
# input rows (one group, per channel: whole); GPTQ's zero w13_bias
# [E, 2I/N] and w2_bias [E, H] in the model's dtype; under
# --expert-parallel each rank's experts whole.
check_experts() {
	py_st "$@" <<'PY' || fail "$1: rank files differ from the experts' layout"
import glob, os, sys
import st
out, src, tp, method, ep = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "ep"

read = st.read
cut_cols = lambda t, r, n: st.rank_cols(t, r, n, split=True)
cut_rows = st.rank_rows
s = read(glob.glob(os.path.join(src, "*.safetensors")))
E = 1 + max(int(k.split(".")[5]) for k in s if ".mlp.experts." in k)
bad = 0
L = "model.layers.1.mlp."
O = L + "experts.routed_experts."
for r in range(tp):
    o = read(glob.glob(os.path.join(out, "model-rank-%d-part-*.safetensors" % r)))
    mine = range(r * E // tp, (r + 1) * E // tp) if ep else range(E)
    n, q = (1, 0) if ep else (tp, r)
    for x in ("qweight", "scales", "qzeros"):
        gate_up = b"".join(b"".join(g + u for g, u in zip(
            cut_cols(s[L + "experts.%d.gate_proj.%s" % (e, x)], q, n),
            cut_cols(s[L + "experts.%d.up_proj.%s" % (e, x)], q, n))) for e in mine)
        down = b"".join(cut_rows(s[L + "experts.%d.down_proj.%s" % (e, x)], q, n) for e in mine)
        for name, want in (("w13_" + x, gate_up), ("w2_" + x, down)):
            if O + name not in o or o[O + name][2] != want:
                print("rank %d: %s %s" % (r, name, "missing" if O + name not in o else "differs"))
                bad += 1
    for name, width in (("w13_bias", o[O + "w13_scales"][1][2]), ("w2_bias", o[O + "w2_scales"][1][2])):
        want = ("BF16", [len(mine), width], bytes(2 * len(mine) * width))
        if method == "awq" and O + name in o:
            print("rank %d: %s written for AWQ" % (r, name))
            bad += 1
        elif method == "gptq" and o.get(O + name) != want:
            print("rank %d: %s is not %s zeros" % (r, name, want[1]))
            bad += 1
sys.exit(bad > 0)
PY
}

M="--arch qwen3_moe --layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --vocab 1000 --experts 4 --moe-intermediate 256 --shards 2 --seed 7"
for q in gptq:128 gptq:-1 awq:128; do
	m=${q%%:*} g=${q#*:}
	gen "$T/src-moe-$m$g" $M "--$m" "$g"
	for lay in 1 2 2:ep; do
		ncases=$((ncases + 1))
		tp=${lay%:ep} o=$T/out-moe-$m$g-$lay ep=
		[ "$lay" = 2:ep ] && ep=--expert-parallel
		if expect_exit 0 "$WSHARD" convert -q --tp "$tp" $ep "$T/src-moe-$m$g" "$o"; then
			check_experts "$o" "$T/src-moe-$m$g" "$tp" "$m" "${ep:+ep}"
			expect_exit 0 "$WSHARD" verify "$o"
		fi
	done
done
echo "   GPTQ (groups of 128, per channel) and AWQ experts at tp 1, 2 and 2 --expert-parallel: vLLM's layout"

# A GPTQ config without modules_in_block_to_quantize gets the source's
# quantized modules (what vLLM would read from the source's headers: its
# own reading of the output's fused names finds none); every other key as
# the source has it.  AWQ's config is copied as it is.
ncases=$((ncases + 1))
"$PYTHON" - "$T/src-gptq128" "$T/out-gptq128-tp2" "$T/src-awq128" "$T/out-awq128-tp2" <<'PY' ||
import json, os, sys
src, out, asrc, aout = sys.argv[1:]
a = json.load(open(os.path.join(src, "config.json")))
b = json.load(open(os.path.join(out, "config.json")))
mods = b["quantization_config"].pop("modules_in_block_to_quantize", None)
want = sorted({k.rsplit(".", 1)[0] for k in json.load(open(os.path.join(src, "model.safetensors.index.json")))["weight_map"]
               if k.endswith((".qweight", ".qzeros", ".g_idx"))})
if "modules_in_block_to_quantize" in a["quantization_config"]:
    sys.exit("the source already lists them")
if sorted(mods or []) != want:
    sys.exit("modules_in_block_to_quantize %s, want %s" % (mods, want[:4]))
if a != b:
    sys.exit("config.json changed beyond the modules")
if open(os.path.join(asrc, "config.json"), "rb").read() != open(os.path.join(aout, "config.json"), "rb").read():
    sys.exit("AWQ's config.json was changed")
PY
	fail "GPTQ's config.json: the quantized modules are not listed as the source has them"
echo "   GPTQ's config.json lists the source's quantized modules"

# ModelOpt's older form, its quantization in hf_quant_config.json alone,
# is read as config.json's quantization_config (as vLLM does): the KV-cache
# scales vLLM's ModelOpt method adds are written, the file is copied.
ncases=$((ncases + 1))
gen "$T/src-hfq" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--fp8 per-tensor --input-scale --omit-config quantization_config
echo '{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": null}}' \
	>"$T/src-hfq/hf_quant_config.json"
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src-hfq" "$T/out-hfq" &&
   expect_exit 0 "$WSHARD" inspect --rank 1 "$T/out-hfq"; then
	shows "hf_quant_config.json" "quantization: modelopt" "layers.0.self_attn.attn.k_scale  *BF16  *\[\]" \
				     "qkv_proj.input_scale  *F32  *\[3\]"
	cmp -s "$T/src-hfq/hf_quant_config.json" "$T/out-hfq/hf_quant_config.json" ||
		fail "hf_quant_config.json not copied"
	grep -q quantization_config "$T/out-hfq/config.json" && fail "config.json changed"
fi
echo "   ModelOpt's hf_quant_config.json alone: taken as the quantization"

# fbgemm_fp8 (Meta's -FP8 releases): FBGEMMFp8LinearMethod keeps beside each
# FP8 weight and its weight_scale [rows, 1] (F32 whatever the checkpoint's
# dtype) an input_scale_ub the checkpoint lacks, F32 [] of
# activation_scale_ub; no KV-cache scales.
ncases=$((ncases + 1))
gen "$T/src-fbgemm" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--fp8 per-channel --set-config 'quantization_config={"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]}'
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src-fbgemm" "$T/out-fbgemm" &&
   expect_exit 0 "$WSHARD" inspect --rank 1 "$T/out-fbgemm"; then
	shows "fbgemm_fp8" "qkv_proj.weight_scale  *F32  *\[96,1\]" "qkv_proj.input_scale_ub  *F32  *\[\]" \
			   "o_proj.input_scale_ub  *F32  *\[\]" "gate_up_proj.input_scale_ub  *F32  *\[\]" \
			   "down_proj.input_scale_ub  *F32  *\[\]"
	grep -q "k_scale  *BF16" "$T/out" && fail "fbgemm_fp8: KV-cache scales written"
	py_st "$T/out-fbgemm" <<'PY' || fail "fbgemm_fp8: input_scale_ub is not activation_scale_ub"
import glob, os, struct, sys
from st import read
o = read(glob.glob(os.path.join(sys.argv[1], "model-rank-1-part-*.safetensors")))
ub = [k for k in o if k.endswith(".input_scale_ub")]
assert len(ub) == 4 and all(o[k][2] == struct.pack("<f", 1200.0) for k in ub), ub
PY
fi
echo "   fbgemm_fp8: input_scale_ub beside each FP8 layer"

# Quark's FP8 per tensor (AMD's -FP8-KV releases): k_proj's and v_proj's
# output scales are the attention's k_scale and v_scale, as vLLM's
# cache-scale mapper loads them (in the model's dtype, shape []); q_scale
# and prob_scale keep -1.0; the linear scales are FP8's per-tensor ones.
ncases=$((ncases + 1))
QFP8='{"weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}, "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}}'
gen "$T/src-quarkkv" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--fp8 per-tensor --input-scale --extra-tensor model.layers.0.self_attn.k_proj.output_scale:1 \
	--extra-tensor model.layers.0.self_attn.v_proj.output_scale: \
	--set-config "quantization_config={\"quant_method\": \"quark\", \"global_quant_config\": $QFP8, \"exclude\": [\"lm_head\"]}"
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src-quarkkv" "$T/out-quarkkv" &&
   expect_exit 0 "$WSHARD" inspect --rank 1 "$T/out-quarkkv"; then
	shows "quark" "qkv_proj.weight_scale  *F32  *\[3\]" "qkv_proj.input_scale  *F32  *\[3\]" \
		      "attn.k_scale  *BF16  *\[\]" "attn.v_scale  *BF16  *\[\]"
	grep -q "output_scale" "$T/out" && fail "quark: an output_scale written as itself"
	py_st "$T/out-quarkkv" "$T/src-quarkkv" <<'PY' || fail "quark: k_scale and v_scale are not k_proj's and v_proj's output scales"
import glob, os, struct, sys
from st import read
s = read(glob.glob(os.path.join(sys.argv[2], "*.safetensors")))
L = "model.layers.0.self_attn."
for r in range(2):
    o = read(glob.glob(os.path.join(sys.argv[1], "model-rank-%d-part-*.safetensors" % r)))
    for x in "kv":
        assert o[L + "attn.%s_scale" % x][2] == s[L + "%s_proj.output_scale" % x][2], x
    for x in ("q", "prob"):
        assert o[L + "attn.%s_scale" % x][2] == struct.pack("<H", 0xbf80), x
PY
fi
echo "   quark: k_proj's and v_proj's output scales as the attention's k_scale and v_scale"

# Quark's FP8 experts (vLLM's QuarkW8A8Fp8MoEMethod, per tensor) as FP8's
# per-tensor experts: w13_weight_scale [E, 2] F32 (gate's, up's),
# w2_weight_scale [E], w13_input_scale [E] (gate's: vLLM keeps one an
# expert for both, equal in Quark's exports) and w2_input_scale [E].
ncases=$((ncases + 1))
gen "$T/src-quarkmoe" --arch qwen3_moe --layers 1 --hidden 64 --heads 2 --kv-heads 2 \
	--head-dim 32 --intermediate 128 --vocab 256 --experts 2 --moe-intermediate 64 --fp8 per-tensor \
	--input-scale --set-config "quantization_config={\"quant_method\": \"quark\", \"global_quant_config\": $QFP8}"
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src-quarkmoe" "$T/out-quarkmoe" &&
   expect_exit 0 "$WSHARD" inspect --rank 1 "$T/out-quarkmoe"; then
	shows "quark experts" "w13_weight  *F8_E4M3  *\[2,64,64\]" "w2_weight  *F8_E4M3  *\[2,64,32\]" \
			      "w13_weight_scale  *F32  *\[2,2\]" "w2_weight_scale  *F32  *\[2\]" \
			      "w13_input_scale  *F32  *\[2\]" "w2_input_scale  *F32  *\[2\]"
	py_st "$T/out-quarkmoe" "$T/src-quarkmoe" <<'PY' || fail "quark experts: scales differ from the checkpoint's"
import glob, os, sys
import st
s = st.read(glob.glob(os.path.join(sys.argv[2], "*.safetensors")))
x = lambda e, p, n: s["model.layers.0.mlp.experts.%d.%s_proj.%s" % (e, p, n)][2]
O = "model.layers.0.mlp.experts.routed_experts."
for r in range(2):
    o = st.read(glob.glob(os.path.join(sys.argv[1], "model-rank-%d-part-*.safetensors" % r)))
    want = {"w13_weight_scale": [x(e, p, "weight_scale") for e in range(2) for p in ("gate", "up")],
            "w2_weight_scale": [x(e, "down", "weight_scale") for e in range(2)],
            "w13_input_scale": [x(e, "gate", "input_scale") for e in range(2)],
            "w2_input_scale": [x(e, "down", "input_scale") for e in range(2)]}
    for k, v in want.items():
        assert o[O + k][2] == b"".join(v), (r, k)
PY
fi
echo "   quark: FP8 experts per tensor as vLLM's QuarkW8A8Fp8MoEMethod holds them"
# Quark's FP8 in 128x128 blocks (vLLM's QuarkW8A8Fp8PerBlock and its MoE
# method's per_block): X.weight_scale [ceil(rows/128), ceil(cols/128)] cut
# and fused as DeepSeek's X.weight_scale_inv, written under Quark's name.
ncases=$((ncases + 1))
gen "$T/src-quarkblk" --arch qwen3_moe --layers 1 --hidden 256 --heads 4 --kv-heads 4 \
	--head-dim 64 --intermediate 512 --vocab 256 --experts 2 --moe-intermediate 256 --fp8 quark-block
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src-quarkblk" "$T/out-quarkblk" &&
   expect_exit 0 "$WSHARD" inspect --rank 1 "$T/out-quarkblk"; then
	shows "quark blocks" "qkv_proj.weight_scale  *F32  *\[3,2\]" "o_proj.weight_scale  *F32  *\[2,1\]" \
			     "w13_weight_scale  *F32  *\[2,2,2\]" "w2_weight_scale  *F32  *\[2,2,1\]"
	grep -q "scale_inv" "$T/out" && fail "quark blocks: a scale written as DeepSeek's weight_scale_inv"
	py_st "$T/out-quarkblk" "$T/src-quarkblk" <<'PY' || fail "quark blocks: scales are not the checkpoint's blocks"
import glob, os, sys
import st
s = st.read(glob.glob(os.path.join(sys.argv[2], "*.safetensors")))
x = lambda n: s["model.layers.0." + n][2]
for r in range(2):
    o = st.read(glob.glob(os.path.join(sys.argv[1], "model-rank-%d-part-*.safetensors" % r)))
    # q, k, v: 256 rows each, 2 block rows of 2 columns (8 bytes a row), one a rank
    qkv = b"".join(x("self_attn.%s_proj.weight_scale" % p)[8 * r:8 * r + 8] for p in "qkv")
    assert o["model.layers.0.self_attn.qkv_proj.weight_scale"][2] == qkv, r
    # o_proj: 256 input columns, a block column a rank
    oo = x("self_attn.o_proj.weight_scale")
    assert o["model.layers.0.self_attn.o_proj.weight_scale"][2] == oo[4 * r:4 * r + 4] + oo[8 + 4 * r:12 + 4 * r], r
PY
fi
echo "   quark: FP8 in 128x128 blocks as vLLM's QuarkW8A8Fp8PerBlock holds them"
# Quark's FP8 per channel with per-token activations (PTPC): weight_scale
# 1-D, a row's scale each, as vLLM's QuarkW8A8Fp8 holds it
# (ChannelQuantScaleParameter over the output rows): q/k/v's fused and cut
# by heads, gate/up's by rows, o_proj's and down_proj's whole; the experts'
# w13_weight_scale [E, 2I/tp] (gate's rows, then up's), w2_weight_scale
# [E, H] whole (QuarkW8A8Fp8MoEMethod per channel).
ncases=$((ncases + 1))
QPTPC='{"weight": {"dtype": "fp8_e4m3", "qscheme": "per_channel", "ch_axis": 0, "is_dynamic": false}, "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_channel", "ch_axis": 1, "is_dynamic": true}}'
gen "$T/src-quarkpc" --arch qwen3_moe --layers 2 --hidden 64 --heads 2 --kv-heads 2 \
	--head-dim 32 --intermediate 128 --vocab 256 --experts 2 --moe-intermediate 64 \
	--dense-layers 1 --fp8 per-row \
	--set-config "quantization_config={\"quant_method\": \"quark\", \"global_quant_config\": $QPTPC, \"exclude\": [\"lm_head\"]}"
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src-quarkpc" "$T/out-quarkpc" &&
   expect_exit 0 "$WSHARD" inspect --rank 1 "$T/out-quarkpc"; then
	shows "quark per channel" "0.self_attn.qkv_proj.weight_scale  *F32  *\[96\]" \
				  "0.self_attn.o_proj.weight_scale  *F32  *\[64\]" \
				  "routed_experts.w13_weight_scale  *F32  *\[2,64\]" \
				  "routed_experts.w2_weight_scale  *F32  *\[2,64\]" \
				  "1.mlp.gate_up_proj.weight_scale  *F32  *\[128\]" \
				  "1.mlp.down_proj.weight_scale  *F32  *\[64\]"
	grep -q "input_scale" "$T/out" && fail "quark per channel: an input scale written"
	py_st "$T/out-quarkpc" "$T/src-quarkpc" <<'PY' || fail "quark per channel: scales are not the checkpoint's rows"
import glob, os, sys
import st
s = st.read(glob.glob(os.path.join(sys.argv[2], "*.safetensors")))
x = lambda n: s["model.layers." + n + ".weight_scale"][2]
half = lambda b, r: b[r * len(b) // 2:(r + 1) * len(b) // 2]
E = "0.mlp.experts.routed_experts."
for r in range(2):
    o = st.read(glob.glob(os.path.join(sys.argv[1], "model-rank-%d-part-*.safetensors" % r)))
    y = lambda n: o["model.layers." + n + "_scale"][2]
    for l in range(2):
        assert y("%d.self_attn.qkv_proj.weight" % l) == b"".join(
            half(x("%d.self_attn.%s_proj" % (l, p)), r) for p in "qkv"), (r, l, "qkv")
        assert y("%d.self_attn.o_proj.weight" % l) == x("%d.self_attn.o_proj" % l), (r, l, "o")
    assert y(E + "w13_weight") == b"".join(
        half(x("0.mlp.experts.%d.%s_proj" % (e, p)), r) for e in range(2) for p in ("gate", "up"))
    assert y(E + "w2_weight") == b"".join(
        x("0.mlp.experts.%d.down_proj" % e) for e in range(2))
    assert y("1.mlp.gate_up_proj.weight") == half(x("1.mlp.gate_proj"), r) + half(x("1.mlp.up_proj"), r)
    assert y("1.mlp.down_proj.weight") == x("1.mlp.down_proj")
PY
fi
echo "   quark: FP8 per channel (PTPC), dense and experts, as vLLM's QuarkW8A8Fp8 holds it"
# Quark's INT8 experts (vLLM's QuarkW8A8Int8MoEMethod) as its FP8 experts,
# I8 zero points beside the scales: per tensor w13_weight_scale and
# w13_weight_zero_point [E, 2] (gate's, up's), w2's [E]; per channel
# [E, 2I/tp] (gate's rows of the rank, then up's) and [E, H] whole;
# w13_input_scale [E] (gate's), w13_input_zero_point [E, 2], w2's [E]; at
# tp 2, and under --expert-parallel each rank's own experts whole.
for q in int8 int8c; do
	ncases=$((ncases + 1))
	gen "$T/src-quark$q" --arch qwen3_moe --layers 1 --hidden 64 --heads 2 --kv-heads 2 \
		--head-dim 32 --intermediate 128 --vocab 256 --experts 2 --moe-intermediate 64 \
		--fp8 quark-$q --input-scale
	if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src-quark$q" "$T/out-quark$q" &&
	   expect_exit 0 "$WSHARD" convert -q --tp 2 --expert-parallel "$T/src-quark$q" "$T/out-quark${q}ep" &&
	   expect_exit 0 "$WSHARD" inspect --rank 1 "$T/out-quark$q"; then
		if [ $q = int8 ]; then w13="2,2" w2="2"; else w13="2,64" w2="2,64"; fi
		shows "quark $q experts" "w13_weight  *I8  *\[2,64,64\]" "w2_weight  *I8  *\[2,64,32\]" \
					 "w13_weight_scale  *F32  *\[$w13\]" "w2_weight_scale  *F32  *\[$w2\]" \
					 "w13_weight_zero_point  *I8  *\[$w13\]" "w2_weight_zero_point  *I8  *\[$w2\]" \
					 "w13_input_scale  *F32  *\[2\]" "w2_input_scale  *F32  *\[2\]" \
					 "w13_input_zero_point  *I8  *\[2,2\]" "w2_input_zero_point  *I8  *\[2\]"
		py_st "$T/out-quark$q" "$T/src-quark$q" "$T/out-quark${q}ep" <<'PY' || fail "quark $q experts: scales or zero points differ from the checkpoint's"
import glob, os, sys
import st
s = st.read(glob.glob(os.path.join(sys.argv[2], "*.safetensors")))
x = lambda e, p, n: s["model.layers.0.mlp.experts.%d.%s_proj.%s" % (e, p, n)][2]
half = lambda b, r: b[r * len(b) // 2:(r + 1) * len(b) // 2]
O = "model.layers.0.mlp.experts.routed_experts."
for out, ep in ((sys.argv[1], False), (sys.argv[3], True)):
    for r in range(2):
        o = st.read(glob.glob(os.path.join(out, "model-rank-%d-part-*.safetensors" % r)))
        es = [r] if ep else range(2)
        cut = (lambda b: b) if ep else (lambda b: half(b, r))
        want = {"w13_input_scale": [x(e, "gate", "input_scale") for e in es],
                "w2_input_scale": [x(e, "down", "input_scale") for e in es],
                "w13_input_zero_point": [x(e, p, "input_zero_point") for e in es for p in ("gate", "up")],
                "w2_input_zero_point": [x(e, "down", "input_zero_point") for e in es],
                "w13_weight": [cut(x(e, p, "weight")) for e in es for p in ("gate", "up")]}
        for n in ("weight_scale", "weight_zero_point"):
            # per tensor: a scalar an expert's part; per channel: its rows
            rows = len(s["model.layers.0.mlp.experts.0.gate_proj." + n][1]) == 1
            want["w13_" + n] = [cut(x(e, p, n)) if rows else x(e, p, n)
                                for e in es for p in ("gate", "up")]
            want["w2_" + n] = [x(e, "down", n) for e in es]
        for k, v in want.items():
            assert o[O + k][2] == b"".join(v), (out, r, k)
PY
	fi
done
echo "   quark: INT8 experts per tensor and per channel as vLLM's QuarkW8A8Int8MoEMethod holds them"
gen "$T/src-hfqbad" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256
echo '{"producer": {"name": "modelopt"}}' >"$T/src-hfqbad/hf_quant_config.json"

# The manifest records each tensor's quantization role and the scheme;
# inspect shows them; verify finds a role changed in the manifest.
ncases=$((ncases + 1))
o=$T/out-gptq128-tp2
expect_exit 0 "$WSHARD" inspect --rank 1 --filter '*layers.1.mlp*' "$o" &&
	shows "" "quantization: gptq" "down_proj.qweight .* quant: weight" \
		 "gate_up_proj.scales .* quant: scale" "down_proj.qzeros .* quant: zero_point"
grep -q "layernorm.weight.*quant" "$T/out" && fail "inspect gives a norm a quantization role"
"$PYTHON" - "$o/wshard.json" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('"quant": "zero_point"', '"quant": "scale"', 1)
open(p, "w").write(s)
PY
expect_exit 1 "$WSHARD" verify "$o" &&
	grep -q "qzeros': the source gives it quant \"zero_point\", the manifest \"scale\"" "$T/out" ||
	fail "verify does not find the changed role: $(head -c 300 "$T/out")"
echo "   quant roles: in the manifest, shown by inspect, checked by verify"

# refused NAME TP WANT SRC: exit 3, one line with WANT, no output.
refused() {
	ncases=$((ncases + 1))
	if expect_exit 3 "$WSHARD" convert --tp "$2" "$4" "$T/out-$1"; then
		one_line "$1"
		err_has "$1" "$3"
		echo "   $1 refused: $(cat "$T/err")"
	fi
	[ -e "$T/out-$1" ] && fail "$1: an output was written"
}
# o_proj's 256 input columns in groups of 128: 64 a rank at tp 4.
refused group 4 "o_proj.weight_scale': dimension 1 holds 2 groups of 128 input columns" "$T/src-g128"
# down_proj's 72 input columns are 9 words: 4.5 a rank at tp 2.
gen "$T/src-word" --layers 1 --hidden 64 --heads 2 --kv-heads 2 --intermediate 72 \
	--vocab 256 --w4a16 0
refused word 2 "down_proj.weight_packed': dimension 1 holds 9 int32 words of 8 packed values; --tp 2 would cut a word" "$T/src-word"

# GPTQ's o_proj: 256 input rows in groups of 128, 2 groups; AWQ's gate_proj
# 72 outputs, 9 words of 8: 4.5 a rank at tp 2.
refused gptq-group 4 "o_proj.qzeros': dimension 0 holds 2 groups of 128 input rows (quantization_config group_size); --tp 4 would cut a group" "$T/src-gptq128"
gen "$T/src-awqword" --layers 1 --hidden 64 --heads 2 --kv-heads 2 --intermediate 72 \
	--vocab 256 --awq 36
refused awq-word 2 "gate_proj.qweight': dimension 1 holds 9 int32 words of 8 packed values; --tp 2 would cut a word" "$T/src-awqword"

# Experts vLLM would take into its MoE WNA16 layout (which repacks them):
# a hidden size of 64, not a multiple of 128; 128 intermediate rows in
# groups of 128, 64 a rank at tp 2.
gen "$T/src-moe-h64" --arch qwen3_moe --layers 1 --hidden 64 --heads 2 --kv-heads 2 \
	--head-dim 32 --intermediate 128 --vocab 256 --experts 2 --moe-intermediate 128 --gptq 32
refused moe-hidden 2 "experts.0.gate_proj.qweight': vLLM takes GPTQ experts of hidden size 64, 64 intermediate rows a rank and group_size 32 into its MoE WNA16 layout, which wshard does not write" "$T/src-moe-h64"
gen "$T/src-moe-share" --arch qwen3_moe --layers 1 --hidden 128 --heads 2 --kv-heads 2 \
	--head-dim 64 --intermediate 256 --vocab 256 --experts 2 --moe-intermediate 128 --awq 128
refused moe-share 2 "AWQ experts of hidden size 128, 64 intermediate rows a rank and group_size 128 into its MoE WNA16 layout" "$T/src-moe-share"

refused hfq-bad 2 "hf_quant_config.json': not a JSON object with a \"quantization\" object" "$T/src-hfqbad"
# Settings vLLM refuses and formats wshard does not write: from config.json.
gen "$T/src-actorder" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--gptq 32 --set-config 'quantization_config={"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": true, "sym": true}'
refused actorder 2 "quantization_config.desc_act is true: vLLM no longer takes GPTQ with activation order" "$T/src-actorder"
gen "$T/src-bnb" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--set-config 'quantization_config={"quant_method": "bitsandbytes", "load_in_4bit": true}'
refused bnb 2 "quantization_config.quant_method \"bitsandbytes\" is not supported yet" "$T/src-bnb"
# A method wshard has no layout for (its parameters in vLLM unchecked), and
# ModelOpt algorithms other than FP8 and NVFP4, or an NVFP4 KV cache.
gen "$T/src-quark" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--fp8 per-tensor --set-config 'quantization_config={"quant_method": "quark"}'
refused quark 2 "quantization_config.global_quant_config: only Quark's static FP8 weights per tensor or per channel, with FP8 activations per tensor or per token (dtype fp8_e4m3; qscheme per_tensor or per_channel), its FP8 weights in 128 x 128 blocks with float scales and dynamic FP8 activations in groups of 128 (qscheme per_block, per_group), its static symmetric INT8 weights per tensor or per channel, with INT8 activations static per tensor or dynamic per token (dtype int8), its MXFP4, MXFP6 and MXFP8 weights (dtype fp4, fp6_e3m2, fp6_e2m3 or fp8_e4m3, per_group of 32, scale_format e8m0; activations dynamic or none) and its W4A16 weights (dtype int4 or uint4 in groups, export pack_method order or reorder, no activation quantization, every config alike) are supported yet" "$T/src-quark"
gen "$T/src-quarkmx" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--fp8 per-tensor --set-config "quantization_config={\"quant_method\": \"quark\", \"global_quant_config\": $QFP8, \"layer_quant_config\": {\"*v_proj\": {\"weight\": {\"dtype\": \"fp4\", \"qscheme\": \"per_group\"}}}}"
refused quark-mxfp4 2 "quantization_config.layer_quant_config.*v_proj: only Quark's static FP8 weights per tensor or per channel" "$T/src-quarkmx"
# Quark's INT8 with asymmetric weights (vLLM's _is_w8a8_int8 takes
# symmetric ones only) and its W4A16 INT4 without an export pack_method
# (vLLM's _is_w4a16_int4 wants "order" or "reorder"): refused.
QI8='{"dtype": "int8", "qscheme": "per_tensor", "symmetric": false, "is_dynamic": false}'
gen "$T/src-quarki8" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--set-config "quantization_config={\"quant_method\": \"quark\", \"global_quant_config\": {\"weight\": $QI8, \"input_tensors\": $QI8}}"
refused quark-int8asym 2 "quantization_config.global_quant_config: only Quark's static FP8 weights" "$T/src-quarki8"
gen "$T/src-quarki4" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--set-config 'quantization_config={"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "uint4", "qscheme": "per_group", "group_size": 128, "symmetric": false}, "input_tensors": null}}'
refused quark-int4 2 "quantization_config.global_quant_config: only Quark's static FP8 weights" "$T/src-quarki4"
# Quark's MXFP8 (vLLM's QuarkOCP_MX, mxfp8_e4m3): X.weight F8_E4M3 with a
# U8 X.weight_scale a group of 32 inputs, cut as a group scale (a group cut
# refused: 96 input columns, 1.5 groups a rank at tp 2); its experts, which
# vLLM's OCP MX MoE method does not take, refused.
gen "$T/src-quarkmx8" --layers 1 --hidden 64 --heads 2 --kv-heads 2 --intermediate 128 \
	--vocab 256 --fp8 quark-mx
ncases=$((ncases + 1))
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src-quarkmx8" "$T/out-quarkmx8" &&
   expect_exit 0 "$WSHARD" inspect --rank 1 "$T/out-quarkmx8"; then
	shows "quark mxfp8" "qkv_proj.weight  *F8_E4M3  *\[96,64\]" "qkv_proj.weight_scale  *U8  *\[96,2\]" \
			    "o_proj.weight_scale  *U8  *\[64,1\]" "down_proj.weight_scale  *U8  *\[64,2\]"
fi
echo "   quark: MXFP8 as vLLM's QuarkOCP_MX holds it"
gen "$T/src-quarkmx8c" --layers 1 --hidden 64 --heads 2 --kv-heads 2 --intermediate 96 \
	--vocab 256 --fp8 quark-mx
refused quark-mxfp8-group 2 "down_proj.weight_scale': dimension 1 holds 3 groups of input columns; --tp 2 would cut a group" "$T/src-quarkmx8c"
gen "$T/src-quarkmx8moe" --arch qwen3_moe --layers 1 --hidden 64 --heads 2 --kv-heads 2 \
	--head-dim 32 --intermediate 128 --vocab 256 --experts 2 --moe-intermediate 64 --fp8 quark-mx
refused quark-mxfp8-moe 2 "tensor 'model.layers.0.mlp.experts.0.gate_proj.weight': Quark's MXFP8 experts are not supported (vLLM 0.32 loads MXFP8 in linear layers only)" "$T/src-quarkmx8moe"
# Quark's MXFP6 experts (vLLM's OCP MX MoE method, unchecked): refused.
gen "$T/src-quarkmx6moe" $M4 --mxfp4 quark6
refused quark-mxfp6-moe 2 "experts.0.gate_proj.weight': Quark's MXFP6 experts are not supported yet" "$T/src-quarkmx6moe"
# Quark's FP8 blocks: a cut through a block (an expert's 256 rows, 64 a
# rank at tp 4) and E8M0 block scales (scale_type float8_e8m0fnu) refused.
refused quark-block-cut 4 "tensor 'model.layers.0.mlp.experts.0.gate_proj.weight': each rank's 64 rows do not fall on the 128-row blocks of 'model.layers.0.mlp.experts.0.gate_proj.weight_scale' (the quantization config's block size)" "$T/src-quarkblk"
gen "$T/src-quarke8" --layers 1 --hidden 256 --heads 4 --kv-heads 4 --intermediate 512 --vocab 256 \
	--fp8 quark-block --set-config 'quantization_config={"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp8_e4m3", "qscheme": "per_block", "block_size": [128, 128], "symmetric": true, "is_dynamic": false, "scale_type": "float8_e8m0fnu"}, "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_group", "group_size": 128, "symmetric": true, "is_dynamic": true}}}'
refused quark-block-e8m0 2 "quantization_config.global_quant_config: only Quark's static FP8 weights" "$T/src-quarke8"
# Quark's W4A16 (AWQ's [in, out] tensors under X.weight, X.weight_scale,
# X.weight_zero_point): o_proj's 256 input rows in 2 groups of 128, 64 a
# rank at tp 4; gate_proj's 72 outputs, 9 words of 8, 4.5 a rank at tp 2;
# o_proj's 128 input rows one group of 128, which vLLM's QuarkW4A16Int4
# cuts too (no group whole on every rank, as GPTQ's per channel).
gen "$T/src-quarkw4" --layers 1 --hidden 256 --heads 4 --kv-heads 4 --intermediate 512 \
	--vocab 256 --awq 128 --quark-names
refused quark-w4a16-group 4 "o_proj.weight_scale': dimension 0 holds 2 groups of 128 input rows (quantization_config group_size); --tp 4 would cut a group" "$T/src-quarkw4"
gen "$T/src-quarkw4w" --layers 1 --hidden 64 --heads 2 --kv-heads 2 --intermediate 72 \
	--vocab 256 --awq 36 --quark-names
refused quark-w4a16-word 2 "gate_proj.weight': dimension 1 holds 9 int32 words of 8 packed values; --tp 2 would cut a word" "$T/src-quarkw4w"
gen "$T/src-quarkw4one" --layers 1 --hidden 128 --heads 2 --kv-heads 2 --intermediate 256 \
	--vocab 256 --awq 128 --quark-names
refused quark-w4a16-one 2 "o_proj.weight_scale': dimension 0 holds 1 group of 128 input rows" "$T/src-quarkw4one"
# Quark's INT8 experts with dynamic activations: vLLM's
# QuarkW8A8Int8MoEMethod.create_weights registers w13_input_zero_point
# [E, 2] and w2_input_zero_point [E] (torch.zeros) whatever the
# activations, and no input scales; the checkpoint has none of them:
# zeros on every rank, [2, 2] and [2] at tp 2, [1, 2] and [1] under
# --expert-parallel, the weights, scales and zero points as the static
# ones' (checked above).
ncases=$((ncases + 1))
gen "$T/src-quarki8dyn" --arch qwen3_moe --layers 1 --hidden 64 --heads 2 --kv-heads 2 \
	--head-dim 32 --intermediate 128 --vocab 256 --experts 2 --moe-intermediate 64 --fp8 quark-int8c
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src-quarki8dyn" "$T/out-quarki8dyn" &&
   expect_exit 0 "$WSHARD" convert -q --tp 2 --expert-parallel "$T/src-quarki8dyn" "$T/out-quarki8dynep"; then
	py_st "$T/out-quarki8dyn" "$T/out-quarki8dynep" <<'PY' || fail "quark int8 dynamic experts: input zero points are not vLLM's zeros"
import glob, os, sys
import st
O = "model.layers.0.mlp.experts.routed_experts."
# (experts a rank, w13 rows an expert: cut at tp 2, whole by expert)
for out, e, rows in ((sys.argv[1], 2, 64), (sys.argv[2], 1, 128)):
    for r in range(2):
        o = st.read(glob.glob(os.path.join(out, "model-rank-%d-part-*.safetensors" % r)))
        assert o[O + "w13_input_zero_point"][:2] == ("I8", [e, 2]), (out, r, o[O + "w13_input_zero_point"][:2])
        assert o[O + "w13_input_zero_point"][2] == bytes(2 * e), (out, r)
        assert o[O + "w2_input_zero_point"][:2] == ("I8", [e]), (out, r, o[O + "w2_input_zero_point"][:2])
        assert o[O + "w2_input_zero_point"][2] == bytes(e), (out, r)
        assert not any(k.endswith("input_scale") for k in o), (out, r)
        assert sum(k.endswith("_input_zero_point") for k in o) == 2, (out, r)
        assert o[O + "w13_weight_zero_point"][1] == [e, rows], (out, r)
PY
fi
echo "   quark: INT8 experts with dynamic activations, vLLM's zero input zero points written"
# Its experts: vLLM's QuarkW4A16Int4MoEMethod repacks them as it loads
# them (quark_moe.py get_weight_loader, convert_quark_tensor): each int32
# [in, out/8] word's nibbles (reordered by pack_method "reorder", XORed
# with 8 where symmetric) transposed, two a byte, w13_weight U8
# [E, 2I/tp, H/2] and w2_weight [E, H, I/tp/2]; zero points [out/2,
# groups] (w13 [E, I/tp, H/g], w2 [E, H/2, I/tp/g]); scales transposed.
# Hidden 128, 256 intermediate rows, groups of 128 (one a rank at tp 2),
# "order" asymmetric as gen-checkpoint writes it and "reorder" symmetric
# (the same words under another config): every byte at tp 2 against the
# repacking done here.  Under --expert-parallel vLLM 0.32 loads none (its
# loader stores the zero points at the global expert index): refused.
gen "$T/src-quarkw4moe" --arch qwen3_moe --layers 1 --hidden 128 --heads 4 --kv-heads 2 \
	--head-dim 64 --intermediate 256 --vocab 256 --experts 2 --moe-intermediate 256 --awq 128 --quark-names
gen "$T/src-quarkw4moes" --arch qwen3_moe --layers 1 --hidden 128 --heads 4 --kv-heads 2 \
	--head-dim 64 --intermediate 256 --vocab 256 --experts 2 --moe-intermediate 256 --awq 128 --quark-names \
	--set-config 'quantization_config={"quant_method": "quark", "exclude": ["lm_head"], "export": {"pack_method": "reorder"}, "global_quant_config": {"weight": {"dtype": "int4", "qscheme": "per_group", "ch_axis": 1, "group_size": 128, "symmetric": true, "is_dynamic": false}, "input_tensors": null, "output_tensors": null, "bias": null}}'
# vLLM's create_weights halves the group size while a rank's intermediate
# rows are no multiple of it, repeating each scale and zero point
# (group_size_div_factor) before its weight loader cuts them: 128 rows, 64
# a rank at tp 2 (groups of 64, each repeated twice, rank 1 keeping the
# second copy of w2's only group); 384 rows at tp 2 (192 a rank: groups of
# 64, w2's 3 groups repeated, a rank keeping 3 of the 6, rank 0 groups 0
# to 1, rank 1 groups 1 to 2) and tp 4 (96 a rank: groups of 32, 12
# repeated, 3 a rank, rank 1 keeping the last of group 0 and two of 1).
gen "$T/src-quarkw4moecut" --arch qwen3_moe --layers 1 --hidden 128 --heads 4 --kv-heads 2 \
	--head-dim 64 --intermediate 256 --vocab 256 --experts 2 --moe-intermediate 128 --awq 128 --quark-names
gen "$T/src-quarkw4moer" --arch qwen3_moe --layers 1 --hidden 128 --heads 8 --kv-heads 4 \
	--head-dim 64 --intermediate 512 --vocab 256 --experts 2 --moe-intermediate 384 --awq 128 --quark-names
for c in "quarkw4moe 256 2" "quarkw4moes 256 2" "quarkw4moecut 128 2" "quarkw4moer 384 2" \
	 "quarkw4moer 384 4"; do
	v=${c%% *} i=${c#* } tp=${c##* }
	i=${i%% *} o=$v-$tp
	ncases=$((ncases + 1))
	if expect_exit 0 "$WSHARD" convert -q --tp "$tp" "$T/src-$v" "$T/out-$o" &&
	   expect_exit 0 "$WSHARD" verify "$T/out-$o"; then
		py_st "$T/src-$v" "$T/out-$o" "$v" "$i" "$tp" <<'PY' || fail "$o: W4A16 experts are not vLLM's repacked bytes"
import glob, os, struct, sys
import st
src = st.read(glob.glob(os.path.join(sys.argv[1], "*.safetensors")))
sym = sys.argv[3].endswith("s")
pos = [0, 4, 1, 5, 2, 6, 3, 7] if sym else list(range(8))   # reorder iff symmetric here

def nibbles(t):
    """quark_int4_weight_loader's view of int32 [rows, cols/8]: [rows][cols] values"""
    dt, (rows, words), b = t
    assert dt == "I32"
    out = []
    for r in range(rows):
        ws = struct.unpack_from("<%dI" % words, b, r * words * 4)
        out.append([((w >> 4 * pos[c]) & 0xF) ^ (8 if sym else 0) for w in ws for c in range(8)])
    return out

def weight(t, c0, c1, r0, r1):
    """U8 [out, in/2] of output columns [c0, c1), input rows [r0, r1)"""
    v = nibbles(t)
    return bytes(v[i][o] | v[i + 1][o] << 4 for o in range(c0, c1) for i in range(r0, r1, 2))

H, I, G, TP = 128, int(sys.argv[4]), 128, int(sys.argv[5])
share, g, F = I // TP, G, 1
while share % g or H % g:   # quark_moe.py create_weights
    g, F = g // 2, F * 2
C = share // g              # a rank's w2 groups of g

def zeros(t, c0, c1, r0, r1):
    """U8 [out/2, groups], groups [r0, r1) of each repeated F times"""
    v = nibbles(t)
    return bytes(v[q // F][o] | v[q // F][o + 1] << 4 for o in range(c0, c1, 2) for q in range(r0, r1))

def scale(t, c0, c1, r0, r1):
    """[out, groups] of BF16 [groups, out], each group repeated F times"""
    dt, (rows, cols), b = t
    return b"".join(b[(q // F * cols + o) * 2:(q // F * cols + o) * 2 + 2]
                    for o in range(c0, c1) for q in range(r0, r1))

E = "model.layers.0.mlp.experts.%d.%s_proj.weight"
O = "model.layers.0.mlp.experts.routed_experts."
for out, tp, ep in ((sys.argv[2], TP, False),):
    for r in range(tp):
        o = st.read(glob.glob(os.path.join(out, "model-rank-%d-part-*.safetensors" % r)))
        experts = [r] if ep else [0, 1]
        i0 = 0 if ep else r * share
        want = {"w13_weight": ("U8", [H // 2]), "w2_weight": ("U8", [share // 2]),
                "w13_weight_scale": ("BF16", [H // g]), "w2_weight_scale": ("BF16", [C]),
                "w13_weight_zero_point": ("U8", [H // g]), "w2_weight_zero_point": ("U8", [C])}
        rows = {"w13_weight": 2 * share, "w2_weight": H, "w13_weight_scale": 2 * share,
                "w2_weight_scale": H, "w13_weight_zero_point": share, "w2_weight_zero_point": H // 2}
        for k, (dt, last) in want.items():
            assert o[O + k][:2] == (dt, [len(experts), rows[k]] + last), (out, r, k, o[O + k][:2])
        assert not any(k.endswith(("qweight", "qzeros", "scales")) for k in o), (out, r)
        for n, k, f in (("weight", "weight", weight), ("weight_scale", "weight_scale", scale),
                        ("weight_zero_point", "weight_zero_point", zeros)):
            w13, w2 = b"", b""
            for e in experts:
                t = lambda p: src[(E % (e, p)) + n[len("weight"):]]
                # w13: gate's then up's outputs [i0, i0 + share), every input
                # (group); w2: every output, inputs (groups) of the rank's rows
                ins = H if n == "weight" else H // g
                w13 += f(t("gate"), i0, i0 + share, 0, ins) + f(t("up"), i0, i0 + share, 0, ins)
                a, b = (i0, i0 + share) if n == "weight" else (r * C, r * C + C)
                w2 += f(t("down"), 0, H, a, b)
            assert o[O + "w13_" + k][2] == w13, (out, r, k)
            assert o[O + "w2_" + k][2] == w2, (out, r, k)
PY
	fi
done
echo "   quark: W4A16 experts repacked as vLLM loads them (order, reorder and XOR; tp 2; groups repeated at tp 2 and 4)"
ncases=$((ncases + 1))
if expect_exit 3 "$WSHARD" convert -q --tp 2 --expert-parallel "$T/src-quarkw4moe" "$T/out-quarkw4moe-ep"; then
	err_has quark-w4a16-ep "experts.0.gate_proj.weight': Quark's W4A16 experts under --expert-parallel: vLLM 0.32 cannot load them (QuarkW4A16Int4MoEMethod's weight loader stores each zero point at the global expert index, past a rank's own experts)"
fi
[ -e "$T/out-quarkw4moe-ep" ] && fail "quark-w4a16-ep: an output was written"
# Where even groups of 32 do not divide a rank's rows, vLLM's
# create_weights fails its assert (group_size >= 32): 32 rows in groups of
# 32, 16 a rank at tp 2, refused before anything is written.
gen "$T/src-quarkw4moe32" --arch qwen3_moe --layers 1 --hidden 128 --heads 2 --kv-heads 2 \
	--head-dim 64 --intermediate 256 --vocab 256 --experts 2 --moe-intermediate 32 --awq 32 --quark-names
refused quark-w4a16-moe 2 "experts.0.gate_proj.weight': Quark's W4A16 experts of hidden size 128 and 16 intermediate rows a rank (tp 2) cut a word of 8 or a group of 32 that vLLM's QuarkW4A16Int4MoEMethod cannot halve (its create_weights asserts groups of 32 or more)" "$T/src-quarkw4moe32"
# vLLM holds a zero point beside every W4A16 weight: one missing is refused.
gen "$T/src-quarkw4z" --layers 1 --hidden 256 --heads 4 --kv-heads 4 --intermediate 512 \
	--vocab 256 --awq 128 --quark-names --drop-tensor model.layers.0.mlp.up_proj.weight_zero_point
refused quark-w4a16-zero 2 "tensor 'model.layers.0.mlp.up_proj.weight': Quark's W4A16 weight without its 'model.layers.0.mlp.up_proj.weight_zero_point', which vLLM holds beside it" "$T/src-quarkw4z"
# compressed-tensors' KV-cache scales from the checkpoint: not checked.
gen "$T/src-ctkv" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--fp8 per-channel --extra-tensor model.layers.0.self_attn.k_proj.output_scale: \
	--set-config 'quantization_config={"quant_method": "compressed-tensors", "format": "float-quantized"}'
refused ct-kv 2 "compressed-tensors' KV-cache scales from the checkpoint ('model.layers.0.self_attn.attn.k_scale') are not supported yet" "$T/src-ctkv"
gen "$T/src-fbgemmub" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--fp8 per-channel --set-config 'quantization_config={"quant_method": "fbgemm_fp8", "modules_to_not_convert": []}'
refused fbgemm-ub 2 "quantization_config of fbgemm_fp8 needs a number activation_scale_ub and a modules_to_not_convert" "$T/src-fbgemmub"
gen "$T/src-momixed" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--fp8 per-tensor --set-config 'quantization_config={"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}'
refused modelopt-mixed 2 "quantization_config.quant_algo \"MIXED_PRECISION\" is not supported yet (ModelOpt's FP8 and NVFP4 are)" "$T/src-momixed"
gen "$T/src-mokv" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--fp8 per-tensor --set-config 'quantization_config={"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "NVFP4"}'
refused modelopt-kv 2 "quantization_config.kv_cache_quant_algo \"NVFP4\" is not supported yet (ModelOpt's FP8 and NVFP4 are, with an FP8 KV cache or none)" "$T/src-mokv"
# ModelOpt's NVFP4 with no activations quantized: vLLM's W4A16_NVFP4.
gen "$T/src-mow4a16" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--nvfp4 modelopt --set-config 'quantization_config={"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null}}}'
refused modelopt-w4a16 2 "quantization_config: NVFP4 without input_activations in its config_groups is weight-only NVFP4 (vLLM's W4A16_NVFP4), not supported yet" "$T/src-mow4a16"
gen "$T/src-mxfp4fp8" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--mxfp4 a8fp8
refused mxfp4-fp8 2 "quantization_config.config_groups.group_0: MXFP4 weights with 8-bit activations are not supported yet" "$T/src-mxfp4fp8"
gen "$T/src-mxfp4ct" --layers 1 --hidden 64 --heads 2 --intermediate 128 --vocab 256 \
	--set-config 'quantization_config={"quant_method": "compressed-tensors", "config_groups": {"group_0": {"format": "mxfp6-pack-quantized"}}}'
refused mxfp6ct 2 "has format \"mxfp6-pack-quantized\", not supported yet" "$T/src-mxfp4ct"
# MXFP4's down_proj: 96 input columns, 3 groups of 32: 1.5 a rank at tp 2.
gen "$T/src-mxfp4grp" --layers 1 --hidden 64 --heads 2 --kv-heads 2 --intermediate 96 \
	--vocab 256 --mxfp4 a4
refused mxfp4-group 2 "down_proj.weight_scale': dimension 1 holds 3 groups of 32 input columns (quantization_config group_size); --tp 2 would cut a group" "$T/src-mxfp4grp"
gen "$T/src-quarkmxgrp" --layers 1 --hidden 64 --heads 2 --kv-heads 2 --intermediate 96 \
	--vocab 256 --mxfp4 quark
refused quark-mxfp4-group 2 "down_proj.weight_scale': dimension 1 holds 3 groups of input columns; --tp 2 would cut a group" "$T/src-quarkmxgrp"
# NVFP4's down_proj: 96 input columns, 6 groups of 16: 1.5 a rank at tp 4.
gen "$T/src-nvfp4grp" --layers 1 --hidden 64 --heads 4 --kv-heads 4 --intermediate 96 \
	--vocab 256 --nvfp4 a16
refused nvfp4-group 4 "down_proj.weight_scale': dimension 1 holds 6 groups of 16 input columns (quantization_config group_size); --tp 4 would cut a group" "$T/src-nvfp4grp"

echo "$ncases quantized cases"
finish
