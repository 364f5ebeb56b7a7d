#!/bin/sh
# A rule's "zero_mean" (Param-2's and Sarvam-105B's router bias, which vLLM
# replaces by x - x.mean() as it loads) end to end: each rank holds the
# BF16 vector less its mean, as F32 (the rule's dtype), the manifest names
# the mean, verify re-derives it; a compressed archive (read front to back,
# once) and a matrix are refused before anything is written, with one line
# naming the tensor.  PyTorch's summation order itself is test_fpconv's.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

gen "$T/src" --arch llama --layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 \
	--vocab 256 --extra-tensor router.bias:8 --extra-tensor router.mat:4x2
# rules NAME ZERO OTHER: every tensor whole on each rank, router.ZERO
# zero-meaned
rules() {
	{
		printf '{"name": "%s", "architectures": ["LlamaForCausalLM"], "tensors": [\n' "$1"
		printf '{"match": "router.%s", "split": "replicate", "dtype": "F32", "zero_mean": true}' "$2"
		llama_whole "router.$3"
		printf '\n]}\n'
	} >"$T/$1.json"
}
rules vec bias mat
rules mat mat bias

expect_exit 0 "$WSHARD" convert -q --no-sync --tp 2 --rules "$T/vec.json" "$T/src" "$T/o"
grep -q '"minus_mean"' "$T/o/wshard.json" || fail "the manifest does not name the mean"
expect_exit 0 "$WSHARD" verify "$T/o"
# the 8 BF16 values sum exactly in F32, so PyTorch's mean is the exact one
# rounded to F32, then to BF16; x - mean is rounded to BF16, written F32
for r in 0 1; do
	py_st "$T/src" "$T/o" $r <<'PY' || fail "rank $r: router.bias is not x - mean(x)"
import glob, struct, sys
from fractions import Fraction
import st
src, out, r = sys.argv[1], sys.argv[2], int(sys.argv[3])


def bf16(f):
    """f rounded to BF16 (nearest, ties to even), as a float."""
    u = struct.unpack("<I", struct.pack("<f", f))[0]
    u = (u + 0x7fff + ((u >> 16) & 1)) >> 16 << 16
    return struct.unpack("<f", struct.pack("<I", u))[0]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


dt, shape, b = st.read(glob.glob(src + "/*.safetensors"))["router.bias"]
xs = [struct.unpack("<f", b"\0\0" + b[2 * i:2 * i + 2])[0] for i in range(8)]
m = bf16(f32(sum(Fraction(x) for x in xs) / 8))
want = struct.pack("<8f", *[bf16(f32(x - m)) for x in xs])
o = st.read(glob.glob("%s/model-rank-%d-part-*.safetensors" % (out, r)))["router.bias"]
sys.exit(0 if o[0] == "F32" and o[2] == want else 1)
PY
done

tgz "$T/src" "$T/src.tar.gz"
if expect_exit 3 "$WSHARD" convert -q --no-sync --tp 2 --rules "$T/vec.json" "$T/src.tar.gz" "$T/out-gz"; then
	one_line "a zero_mean from a compressed archive"
	err_has "a zero_mean from a compressed archive" "router.bias"
	[ -e "$T/out-gz" ] && fail "a refused convert left $T/out-gz"
fi
if expect_exit 3 "$WSHARD" convert -q --no-sync --tp 2 --rules "$T/mat.json" "$T/src" "$T/out-mat"; then
	one_line "a zero_mean matrix"
	err_has "a zero_mean matrix" "tensor 'router.mat': \"zero_mean\" needs a vector"
fi
finish
