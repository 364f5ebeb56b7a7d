#!/bin/sh
# --dtype bf16|f16|f32: F32/F16/BF16 tensors converted with round-to-nearest-
# even while sharding, checked value by value by test/reference.py (NaN stays
# NaN, any payload; infinities stay infinite; values past F16's range become
# inf; ties round to even, subnormals included).  The sources carry
# --special-values: every 7th element is a NaN, an infinity, -0.0, a
# subnormal, a tie between two F16 or BF16 values or a value that overflows
# F16.  First a self-test of the reference's conversion against a
# hand-written table.  Cases: BF16 -> f16 / f32 / bf16 (unchanged, NaN
# payloads kept), F32 -> bf16 / f16, F16 -> f32 / bf16, a Qwen2-MoE -> f32,
# an FP8 model -> bf16 / f16 (F8 weights and F32 scales unchanged, norms and
# embeddings converted only when their dtype differs), tensors bigger than
# --max-memory 1M converted in chunks.  config.json's torch_dtype and the
# manifest's options.dtype follow; `wshard verify` passes on each.
# $S holds several generator options: split on purpose.
# shellcheck disable=SC2086,SC1091
. "$(dirname "$0")/lib.sh"

need_reference


# The reference's conversion against values worked out by hand.
"$PYTHON" - "$ROOT/test" <<'EOF' || fail "the reference's conversion disagrees with the table"
import sys
import numpy as np
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import reference as ref

NAN = None  # any NaN
table = [  # from, bits, to, bits
    ("F32", 0x3F801000, "F16", 0x3C00), ("F32", 0x3F803000, "F16", 0x3C02),  # ties to even
    ("F32", 0x3F801001, "F16", 0x3C01), ("F32", 0xBF801000, "F16", 0xBC00),
    ("F32", 0x3F808000, "BF16", 0x3F80), ("F32", 0x3F818000, "BF16", 0x3F82),
    ("F32", 0x3F807FFF, "BF16", 0x3F80), ("F32", 0x3F808001, "BF16", 0x3F81),
    ("F32", 0x478CA000, "F16", 0x7C00), ("F32", 0xC78CA000, "F16", 0xFC00),  # +-72000
    ("F32", 0x478CA000, "BF16", 0x478D),
    ("F32", 0x477FF000, "F16", 0x7C00), ("F32", 0x477FEFFF, "F16", 0x7BFF),  # 65520 tie -> inf
    ("F32", 0x477FE000, "F16", 0x7BFF),
    ("F32", 0x7F7FFFFF, "BF16", 0x7F80), ("F32", 0x7F7F8000, "BF16", 0x7F80),
    ("F32", 0x7F7F7FFF, "BF16", 0x7F7F), ("F32", 0x7F7FFFFF, "F16", 0x7C00),
    ("F32", 0x33000000, "F16", 0x0000), ("F32", 0x33C00000, "F16", 0x0002),  # subnormal ties
    ("F32", 0x34200000, "F16", 0x0002), ("F32", 0x32FFFFFF, "F16", 0x0000),
    ("F32", 0x33000001, "F16", 0x0001), ("F32", 0x33800000, "F16", 0x0001),
    ("F32", 0x38800000, "F16", 0x0400), ("F32", 0x38000000, "F16", 0x0200),
    ("F32", 0x80000000, "F16", 0x8000), ("F32", 0x80000000, "BF16", 0x8000),
    ("F32", 0x00000001, "F16", 0x0000), ("F32", 0x00000001, "BF16", 0x0000),
    ("F32", 0x807FFFFF, "BF16", 0x8080), ("F32", 0x807FFFFF, "F16", 0x8000),
    ("F32", 0x7F800000, "F16", 0x7C00), ("F32", 0xFF800000, "BF16", 0xFF80),
    ("F32", 0x7F800001, "F16", NAN), ("F32", 0x7F800001, "BF16", NAN),
    ("F32", 0xFFC00123, "BF16", NAN), ("F32", 0x7FFFFFFF, "F16", NAN),
    ("BF16", 0x3300, "F16", 0x0000), ("BF16", 0x33C0, "F16", 0x0002),
    ("BF16", 0x3420, "F16", 0x0002), ("BF16", 0x3340, "F16", 0x0001),
    ("BF16", 0x4780, "F16", 0x7C00), ("BF16", 0x477F, "F16", 0x7BF8),
    ("BF16", 0x0001, "F16", 0x0000), ("BF16", 0x8000, "F16", 0x8000),
    ("BF16", 0x7F81, "F16", NAN), ("BF16", 0xFF80, "F16", 0xFC00),
    ("BF16", 0x3F80, "F32", 0x3F800000), ("BF16", 0x0001, "F32", 0x00010000),
    ("BF16", 0x7FC1, "F32", NAN),
    ("F16", 0x3C04, "BF16", 0x3F80), ("F16", 0x3C0C, "BF16", 0x3F82),
    ("F16", 0x3C05, "BF16", 0x3F81), ("F16", 0x0001, "BF16", 0x3380),
    ("F16", 0x7BFF, "BF16", 0x4780), ("F16", 0x7C01, "BF16", NAN),
    ("F16", 0x0001, "F32", 0x33800000), ("F16", 0x83FF, "F32", 0xB87FC000),
    ("F16", 0x7C00, "F32", 0x7F800000), ("F16", 0xFE01, "F32", NAN),
]
size = {"F32": 4, "F16": 2, "BF16": 2}
bad = 0
for frm, a, to, b in table:
    raw = np.frombuffer(a.to_bytes(size[frm], "little"), dtype=np.uint8)
    got = int.from_bytes(bytes(ref.convert_bytes(raw, frm, to)), "little")
    isnan = bool(ref.nan_mask(np.frombuffer(got.to_bytes(size[to], "little"), dtype=np.uint8), to)[0])
    if (b is NAN and not isnan) or (b is not NAN and got != b):
        print("%s 0x%x -> %s: got 0x%x, expected %s" % (frm, a, to, got, "NaN" if b is NAN else hex(b)))
        bad += 1
sys.exit(1 if bad else 0)
EOF

# conv NAME SRC TP [OPTIONS...]: see convert_checked in lib.sh.
conv() { convert_checked "$@"; }

# specials OUT DTYPE [KIND...]: the converted output holds every kind of
# special value (so the comparison was not vacuous): NaN, +inf, -inf, -0.0
# and the KINDs given (subnormal).
specials() {
	"$PYTHON" - "$@" <<'EOF' || fail "$1: the converted output lacks special values"
import glob, json, struct, sys
import numpy as np
out, dt, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
u = {"F16": "<u2", "BF16": "<u2", "F32": "<u4"}[dt]
exp_bits = {"F16": (10, 5), "BF16": (7, 8), "F32": (23, 8)}[dt]
vals = []
for f in glob.glob(out + "/model-rank-*.safetensors"):
    raw = open(f, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    for k, v in json.loads(raw[8:8 + n]).items():
        if k != "__metadata__" and v["dtype"] == dt and not k.endswith("scale"):
            a, b = v["data_offsets"]
            vals.append(np.frombuffer(raw[8 + n + a:8 + n + b], dtype=u))
x = np.concatenate(vals).astype(np.uint64)
m, e = exp_bits
sign, mag = x >> np.uint64(m + e), x & np.uint64((1 << (m + e)) - 1)
inf = np.uint64(((1 << e) - 1) << m)
have = {"NaN": (mag > inf).any(), "+inf": ((mag == inf) & (sign == 0)).any(),
        "-inf": ((mag == inf) & (sign == 1)).any(), "-0.0": ((mag == 0) & (sign == 1)).any(),
        "subnormal": ((mag > 0) & (mag < np.uint64(1 << m))).any()}
missing = [k for k, v in have.items() if not v and (k != "subnormal" or k in extra)]
if missing:
    print("%s: no %s in the %s tensors" % (out, ", ".join(missing), dt))
sys.exit(1 if missing else 0)
EOF
}

S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 250 --special-values"

gen "$T/src-bf16" $S --dtype BF16 --seed 21
conv bf16-f16 "$T/src-bf16" 2 --dtype f16 && specials "$T/bf16-f16-tp2" F16 subnormal
conv bf16-f32 "$T/src-bf16" 4 --dtype f32
conv bf16-bf16 "$T/src-bf16" 2 --dtype bf16

gen "$T/src-f32" --arch qwen2 $S --dtype F32 --seed 22
conv f32-bf16 "$T/src-f32" 2 --dtype bf16 && specials "$T/f32-bf16-tp2" BF16 subnormal
conv f32-f16 "$T/src-f32" 2 --dtype f16 && specials "$T/f32-f16-tp2" F16 subnormal

gen "$T/src-f16" --arch qwen3 $S --head-dim 16 --dtype F16 --seed 23 --shards 2
conv f16-f32 "$T/src-f16" 2 --dtype f32 && specials "$T/f16-f32-tp2" F32
conv f16-bf16 "$T/src-f16" 4 --dtype bf16

gen "$T/src-moe" --arch qwen2_moe $S --experts 3 --moe-intermediate 32 \
	--shared-intermediate 64 --seed 24
conv moe-f32 "$T/src-moe" 2 --dtype f32

# FP8: F8_E4M3 weights and F32 scales are never converted; BF16 norms,
# biases and embeddings stay BF16 under bf16 and become F16 under f16.
gen "$T/src-fp8" --arch qwen2 $S --fp8 per-tensor --input-scale --seed 25
conv fp8-bf16 "$T/src-fp8" 2 --dtype bf16
conv fp8-f16 "$T/src-fp8" 2 --dtype f16
if [ -e "$T/fp8-bf16-tp2/wshard.json" ]; then
	py_st "$T/src-fp8" "$T/fp8-bf16-tp2" <<'EOF' || fail "fp8 --dtype bf16: dtypes, config or manifest wrong"
import json, sys
from st import read_header as header
src, out = sys.argv[1:]
s, o = header(src + "/model.safetensors"), header(out + "/model-rank-0-part-0.safetensors")
bad = []
def want(name, dt):
    if o.get(name, {}).get("dtype") != dt:
        bad.append("%s is %s, expected %s" % (name, o.get(name, {}).get("dtype"), dt))
p = "model.layers.0."
for n in ("self_attn.qkv_proj.weight", "self_attn.o_proj.weight", "mlp.gate_up_proj.weight",
          "mlp.down_proj.weight"):
    want(p + n, "F8_E4M3")
for n in ("self_attn.qkv_proj.weight_scale", "self_attn.qkv_proj.input_scale",
          "self_attn.o_proj.weight_scale", "mlp.down_proj.input_scale", "self_attn.attn._k_scale"):
    want(p + n, "F32")
for n in (p + "input_layernorm.weight", p + "self_attn.qkv_proj.bias", "model.norm.weight",
          "model.embed_tokens.weight", "lm_head.weight"):
    want(n, "BF16")
cfg = json.load(open(out + "/config.json"))
scfg = json.load(open(src + "/config.json"))
if cfg.get("torch_dtype") != "bfloat16":
    bad.append("config.json torch_dtype is %r" % cfg.get("torch_dtype"))
if cfg.get("quantization_config") != scfg["quantization_config"]:
    bad.append("config.json quantization_config changed")
m = json.load(open(out + "/wshard.json"))
if str(m.get("options", {}).get("dtype")).upper() != "BF16":
    bad.append("manifest options.dtype is %r" % m.get("options", {}).get("dtype"))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
fi

# Chunked conversion: 3072 x 256 F32 tensors (3 MiB) with --max-memory 1M
# give the same bytes as a default run.
gen "$T/src-big" --layers 1 --hidden 256 --heads 8 --kv-heads 2 --intermediate 3072 \
	--vocab 3001 --dtype F32 --special-values --seed 26
conv big-bf16 "$T/src-big" 2 --dtype bf16 --max-memory 1M
if [ -e "$T/big-bf16-tp2/wshard.json" ]; then
	"$WSHARD" convert --tp 2 --dtype bf16 "$T/src-big" "$T/big-default" >/dev/null 2>"$T/cerr" ||
		fail "big: default convert failed: $(head -c 400 "$T/cerr")"
	same_files "$T/big-bf16-tp2" "$T/big-default" big "between --max-memory 1M and the default" \
		$TP2_RANKS
fi

# vLLM's --dtype names, in any case, are wshard's: the same bytes
if [ -e "$T/big-default/wshard.json" ]; then
	"$WSHARD" convert --tp 2 --dtype BFloat16 "$T/src-big" "$T/big-torch" >/dev/null 2>"$T/cerr" ||
		fail "big: --dtype BFloat16 failed: $(head -c 400 "$T/cerr")"
	same_files "$T/big-torch" "$T/big-default" big "between --dtype BFloat16 and bf16" $TP2_RANKS
fi
"$WSHARD" convert --tp 2 --dtype fp8 "$T/src-big" "$T/big-fp8" >/dev/null 2>"$T/cerr"
rc=$?
[ "$rc" = 2 ] && grep -q "'fp8' is not bf16, f16 or f32" "$T/cerr" && [ ! -e "$T/big-fp8" ] ||
	fail "--dtype fp8: want status 2 naming it, nothing written (status $rc: $(head -c 300 "$T/cerr"))"

echo "$ncases conversions checked value by value"
finish
