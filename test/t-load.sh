#!/bin/sh
# t-load.sh - libwshard's loader (wshard_load_*, what the vLLM plugin of
# lib/vllm calls), through ctypes with numpy buffers (test/load_check.py):
#  1. every rank of a tp 2 Llama loads, 1 and 3 threads, each tensor equal
#     to what its rank file's own header points at; a tensor larger than a
#     read piece (1 MiB; 12 MiB) included; the same with xxh3-64 and sha256 sums
#     (hashed again whole) as with crc64-nvme (pieces' sums joined);
#  2. refused, the message naming both sides: another tp, engine release or
#     engine, pipeline stages (either way), expert parallelism (either way;
#     a model without experts loads either way), a rank out of range, no
#     wshard.json, a manifest of another format;
#  3. refused, naming the file and tensor: a flipped data byte (each sum),
#     a renamed tensor in a header, a truncated file; a tensor given no
#     memory; with no_checksums the flipped byte goes through unseen;
#  4. libwshard.so exports the device destinations; a CUDA build links the
#     CUDA runtime in, statically and hidden (no cuda* symbol exported,
#     no libcudart.so needed), so that the engine's own is not replaced.
#     (The device path itself: test/test_load.c.)
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "skipped: $PYTHON lacks numpy"; exit 77; }
LIB=$ROOT/${B:-build/rel-cuda0}/libwshard.so
[ -f "$LIB" ] || { fail "no $LIB (make builds it)"; finish; }
CHECK="$PYTHON $ROOT/test/load_check.py $LIB"
case $B in
*san*)	# an ASan library loads into a plain python only behind its runtime
	CHECK="env LD_PRELOAD=$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)
	ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 $CHECK" ;;
esac

gen "$T/src" --layers 2 --hidden 1024 --heads 8 --kv-heads 4 --intermediate 512 \
	--vocab 12288 --shards 2
for ck in crc64-nvme xxh3-64 sha256; do
	"$WSHARD" convert -q --tp 2 --checksum $ck "$T/src" "$T/out-$ck" ||
		fail "convert --checksum $ck failed"
	$CHECK ok "$T/out-$ck" 2 || fail "$ck: the loaded bytes differ"
done
O=$T/out-crc64-nvme
$CHECK prefetch "$O" 2 || fail "prefetch: $O's rank files not read into the page cache"

# refuse LABEL OUT CODE TEXT WANT
refuse() {
	$CHECK refuse "$2" "$3" "$4" "$5" >"$T/msg" 2>&1 || fail "$1: $(cat "$T/msg")"
}
refuse "tp 4" "$O" 1 "made for tensor-parallel size 2, the engine runs 4" '{"tp": 4}'
refuse "release" "$O" 1 "made for vllm@0.32, loading in vllm==0.33.0" \
	'{"tp": 2, "engine": "vllm==0.33.0"}'
refuse "0.3 is not 0.32" "$O" 1 "loading in vllm==0.3" '{"tp": 2, "engine": "vllm==0.3"}'
refuse "engine" "$O" 1 "made for vllm@0.32, loading in sglang==0.32.0" \
	'{"tp": 2, "engine": "sglang==0.32.0"}'
refuse "pp 2" "$O" 1 "pipeline-parallel size 2" '{"tp": 2, "pp": 2}'
"$WSHARD" convert -q --tp 2 --pp 2 "$T/src" "$T/stages" || fail "convert --pp 2 failed"
refuse "stages, pp 1" "$T/stages" 1 "made for 2 pipeline stages, the engine runs pipeline-parallel size 1" \
	'{"tp": 2}'
refuse "stages, stage 2" "$T/stages" 1 "no stage 2 (2 stages)" '{"tp": 2, "pp": 2, "stage": 2}'
$CHECK stage "$T/stages" "$T/out-crc64-nvme" || fail "stages: a stage's rank loads otherwise"
# expert parallelism: refused either way for a model with experts; a
# model without is laid out alike, and loads either way
gen "$T/moe" --arch mixtral --layers 2 --hidden 256 --heads 4 --kv-heads 2 --experts 4 \
	--intermediate 96 --vocab 512
"$WSHARD" convert -q --tp 2 "$T/moe" "$T/moe-tp" || fail "convert mixtral failed"
"$WSHARD" convert -q --tp 2 --expert-parallel "$T/moe" "$T/moe-ep" ||
	fail "convert mixtral --expert-parallel failed"
refuse "ep" "$T/moe-tp" 1 "made without expert parallelism, the engine runs with" \
	'{"tp": 2, "ep": true}'
refuse "no ep" "$T/moe-ep" 1 "made with expert parallelism, the engine runs without" '{"tp": 2}'
refuse "dense, ep" "$O" 0 "" '{"tp": 2, "ep": true}'
"$WSHARD" convert -q --tp 2 --expert-parallel "$T/src" "$T/dense-ep" ||
	fail "convert llama --expert-parallel failed"
refuse "dense made with ep" "$T/dense-ep" 0 "" '{"tp": 2}'
"$WSHARD" inspect "$T/dense-ep" | grep -qx "expert parallel: asked, but the model has no experts (the layout of tp alone)" ||
	fail "inspect of a dense output made with --expert-parallel: no line saying it has no experts"
refuse "rank 2" "$O" 1 "no rank 2 (2 ranks)" '{"tp": 2, "rank": 2}'
refuse "patch release" "$O" 0 "" '{"tp": 2, "engine": "vllm==0.32.7"}'
mkdir "$T/empty"
refuse "no manifest" "$T/empty" 1 "wshard.json" '{"tp": 2}'
cp -r "$O" "$T/foreign"
sed -i 's/"format": "wshard"/"format": "other"/' "$T/foreign/wshard.json"
refuse "foreign manifest" "$T/foreign" 1 "wshard.json" '{"tp": 2}'

F0=model-rank-0-part-0.safetensors
E=model.embed_tokens.weight
# flip OUT NAME: flips a byte of tensor NAME (rank 0) 9 MiB in (a later read piece than the first)
flip() {
	py_st "$1/$F0" "$2" <<'PY' || fail "cannot flip a byte of $1/$F0"
import sys
from st import flip_byte
flip_byte(sys.argv[1], sys.argv[2], 9437185)
PY
}
for ck in crc64-nvme xxh3-64 sha256; do
	cp -r "$T/out-$ck" "$T/flip-$ck"
	flip "$T/flip-$ck" $E
	refuse "flipped byte, $ck" "$T/flip-$ck" 6 \
		"$F0': tensor '$E' does not match its checksum ($ck" '{"tp": 2}'
done
# with no_checksums the flipped byte loads (WSHARD_LOAD_CHECKSUMS=0)
refuse "no checksums" "$T/flip-crc64-nvme" 0 "" '{"tp": 2, "nosum": true}'

cp -r "$O" "$T/renamed"
sed -i '1s/model.norm.weight/model.norm.weighs/' "$T/renamed/$F0"
refuse "renamed in the header" "$T/renamed" 6 \
	"tensor 'model.norm.weight' is missing, listed in its entry in wshard.json" '{"tp": 2}'
cp -r "$O" "$T/short"
truncate -s -1 "$T/short/$F0"
refuse "truncated" "$T/short" 1 "$F0': tensor 'model.norm.weight': data_offsets" '{"tp": 2}'
refuse "no memory" "$O" 2 "tensor '$E': no memory given" "{\"tp\": 2, \"skip\": \"$E\"}"

if command -v nm >/dev/null 2>&1 && nm -D --defined-only "$LIB" >"$T/dyn" 2>/dev/null; then
	for s in wshard_load_dest_device wshard_load_has_device; do
		grep -q " T $s\$" "$T/dyn" || fail "$LIB does not export $s"
	done
	if grep -E ' (cuda|__cuda)[A-Za-z_]*$' "$T/dyn" >"$T/cudasyms"; then
		fail "$LIB exports CUDA runtime symbols: $(head -n 3 "$T/cudasyms" | tr '\n' ' ')"
	fi
	if [ "${CUDA:-0}" = 1 ]; then
		nm "$LIB" | grep -q ' cudaMemcpyAsync$' ||
			fail "$LIB (a CUDA build) has no CUDA runtime linked in"
	fi
fi
if command -v ldd >/dev/null 2>&1 && ldd "$LIB" 2>/dev/null | grep -q libcudart; then
	fail "$LIB links the CUDA runtime dynamically"
fi
finish
