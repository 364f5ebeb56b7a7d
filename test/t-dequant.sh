#!/bin/sh
# A rule's "dequant" (DeepSeek-V3.2's and GLM-5's FP8 indexer.wk, which vLLM
# dequantizes to BF16 as it loads it, to fuse it with a BF16 tensor) end to
# end: an F8_E4M3 weight with F32 block scales fused with a BF16 one, and
# one with a vector of E8M0 scales (one a row, named weight_scale) cut by
# rows, are written as each element in F32 times its block's scale,
# rounded to BF16 (computed here independently, in Python), their scales
# left out and named so in the manifest; verify re-derives them.  A weight
# without its scale, scales that do not divide it into blocks, and a
# compressed archive (read front to back, once) are refused before
# anything is written, with one line naming the tensor.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

gen "$T/src" --arch llama --layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 \
	--vocab 256 --extra-tensor idx.wp.weight:2x16
# the FP8 tensors, in a file of their own beside the generated one
add_fp8() {  # DIR SCALE_SHAPE: idx.wk's scale [R, C] as given ("none": no scale)
	py_st "$1" "$2" <<'PY' || fail "adding the FP8 tensors failed"
import json, os, random, struct, sys
import st
d, shape = sys.argv[1], sys.argv[2]
rnd = random.Random(7)
fp8 = lambda n: bytes(rnd.choice([b for b in range(256) if b & 0x7f != 0x7f]) for _ in range(n))
t = {"idx.wk.weight": ("F8_E4M3", [8, 16], fp8(128)),
     "idx.wq.weight": ("F8_E4M3", [8, 16], fp8(128)),
     # one E8M0 scale a row: 2^(v - 127)
     "idx.wq.weight_scale": ("F8_E8M0", [8], bytes([120, 127, 130, 101, 140, 127, 126, 133]))}
if shape != "none":
    r, c = map(int, shape.split("x"))
    vals = [0.013, 1.0, 3.5e-3, 0.75, 1e-4, 2.0, 0.3, 5.0][:r * c]
    t["idx.wk.weight_scale_inv"] = ("F32", [r, c], struct.pack("<%df" % (r * c), *vals))
st.write(os.path.join(d, "model-fp8.safetensors"), t)
files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
wm = {k: f for f in files for k in st.read([os.path.join(d, f)])}
json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
PY
}
for v in good:2x2 noscale:none badscale:3x2; do
	rm -rf "$T/$v"
	cp -r "$T/src" "$T/${v%%:*}"
	add_fp8 "$T/${v%%:*}" "${v#*:}"
done
{
	printf '{"name": "dq", "architectures": ["LlamaForCausalLM"],\n'
	printf '"fused": {"wkp": {"parts": ["wk", "wp"], "split": "replicate"}}, "tensors": [\n'
	printf '{"match": "idx.wk.weight", "dequant": true, "fuse": "wkp.wk", "output": "idx.wkp.weight"},\n'
	printf '{"match": "idx.wp.weight", "fuse": "wkp.wp", "output": "idx.wkp.weight"},\n'
	printf '{"match": "idx.wq.weight", "dequant": true, "split": "row"}'
	llama_whole
	printf '\n]}\n'
} >"$T/dq.json"

expect_exit 0 "$WSHARD" convert -q --no-sync --tp 2 --rules "$T/dq.json" "$T/good" "$T/o"
expect_exit 0 "$WSHARD" verify "$T/o"
grep -q '"idx.wk.weight_scale_inv"' "$T/o/wshard.json" && grep -q '"idx.wq.weight_scale"' "$T/o/wshard.json" ||
	fail "the manifest does not name the scales left out"
grep -q 'computed in memory' "$T/o/wshard.json" && fail "the manifest lists the file of computed tensors"
for r in 0 1; do
	py_st "$T/good" "$T/o" $r <<'PY' || fail "rank $r: not x times its block's scale in BF16"
import glob, struct, sys
import st
src, out, r = sys.argv[1], sys.argv[2], int(sys.argv[3])


def fp8(b):
    """float8_e4m3fn as a float (exact)."""
    e, m = (b >> 3) & 15, b & 7
    v = (1 + m / 8) * 2.0 ** (e - 7) if e else m * 2.0 ** -9
    return -v if b & 0x80 else v


def bf16(f):
    """f (exactly an F32 product: at most 4 + 24 significant bits) rounded
    to F32, then to BF16 (nearest, ties to even), as two bytes."""
    u = struct.unpack("<I", struct.pack("<f", f))[0]
    return struct.pack("<H", (u + 0x7fff + ((u >> 16) & 1)) >> 16)


s = st.read(glob.glob(src + "/*.safetensors"))
o = st.read(glob.glob("%s/model-rank-%d-part-*.safetensors" % (out, r)))
wk, sc = s["idx.wk.weight"][2], struct.unpack("<4f", s["idx.wk.weight_scale_inv"][2])
want = b"".join(bf16(fp8(wk[i * 16 + j]) * sc[i // 4 * 2 + j // 8]) for i in range(8) for j in range(16))
want += s["idx.wp.weight"][2]
got = o["idx.wkp.weight"]
if got[0] != "BF16" or got[1] != [10, 16] or got[2] != want:
    sys.exit("idx.wkp.weight: %s %s" % (got[0], got[1]))
wq, e8 = s["idx.wq.weight"][2], s["idx.wq.weight_scale"][2]
want = b"".join(bf16(fp8(wq[i * 16 + j]) * 2.0 ** (e8[i] - 127))
                for i in range(4 * r, 4 * r + 4) for j in range(16))
got = o["idx.wq.weight"]
if got[0] != "BF16" or got[1] != [4, 16] or got[2] != want:
    sys.exit("idx.wq.weight: %s %s" % (got[0], got[1]))
if any(k.endswith(("_scale", "_scale_inv")) for k in o):
    sys.exit("a scale was written")
PY
done

if expect_exit 3 "$WSHARD" convert -q --no-sync --tp 2 --rules "$T/dq.json" "$T/noscale" "$T/out-noscale"; then
	one_line "an FP8 weight without its scale"
	err_has "an FP8 weight without its scale" "tensor 'idx.wk.weight': F8_E4M3 without its weight_scale_inv"
	[ -e "$T/out-noscale" ] && fail "a refused convert left $T/out-noscale"
fi
if expect_exit 3 "$WSHARD" convert -q --no-sync --tp 2 --rules "$T/dq.json" "$T/badscale" "$T/out-bad"; then
	one_line "scales that divide no blocks"
	err_has "scales that divide no blocks" "tensor 'idx.wk.weight': its scale 'idx.wk.weight_scale_inv' (F32, 2 dimensions) does not divide it"
fi
tgz "$T/good" "$T/good.tar.gz"
if expect_exit 3 "$WSHARD" convert -q --no-sync --tp 2 --rules "$T/dq.json" "$T/good.tar.gz" "$T/out-gz"; then
	one_line "a dequant from a compressed archive"
	err_has "a dequant from a compressed archive" "tensor 'idx.wk.weight': \"dequant\" reads the tensor before the stream does"
	[ -e "$T/out-gz" ] && fail "a refused convert left $T/out-gz"
fi
finish
