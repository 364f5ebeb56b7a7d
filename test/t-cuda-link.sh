#!/bin/sh
# t-cuda-link.sh - a CUDA build carries the CUDA backend inside the binary
# (cudart linked statically, no libcudart.so needed at run time), and
# `convert --validate gpu` where no GPU is usable fails with exit 5, a
# message that names CUDA, and no manifest.  On a CUDA build on a machine
# with a GPU, the same command must succeed instead.  The link checks are
# skipped in a CUDA=0 build; the --validate gpu check runs in both (there
# the message says "built without CUDA").
. "$(dirname "$0")/lib.sh"

if [ ! -x "$WSHARD" ]; then
	fail "no binary '$WSHARD'"
	finish
fi

# --- the CUDA backend is linked in, statically ---------------------
if [ "${CUDA:-0}" = 1 ]; then
	if command -v nm >/dev/null 2>&1 && nm "$WSHARD" >"$T/syms" 2>/dev/null &&
	   [ -s "$T/syms" ]; then
		for s in wshard_vcuda_open wshard_vcuda_check cudaGetDeviceCount \
			 cudaMemcpyAsync; do
			grep -q " $s\$" "$T/syms" ||
				fail "symbol '$s' missing from $WSHARD"
		done
	else
		# A stripped binary still holds the kernel's name for the
		# runtime's registration.
		strings "$WSHARD" | grep -q vsum_kernel ||
			fail "no CUDA checksum kernel in $WSHARD"
	fi
	if command -v ldd >/dev/null 2>&1; then
		ldd "$WSHARD" >"$T/ldd" 2>&1
		if grep -E 'libcudart|libcuda\.so' "$T/ldd" >/dev/null; then
			fail "$WSHARD links CUDA dynamically: $(grep -E 'libcuda' "$T/ldd")"
		fi
	fi
	# Machine code for sm_80 and sm_90 plus PTX, when the tool is there.
	cuobjdump=${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump
	if [ -x "$cuobjdump" ]; then
		"$cuobjdump" --list-elf "$WSHARD" >"$T/elf" 2>&1
		"$cuobjdump" --list-ptx "$WSHARD" >"$T/ptx" 2>&1
		for a in sm_80 sm_90; do
			grep -q "$a" "$T/elf" || fail "no $a code in $WSHARD"
		done
		[ -s "$T/ptx" ] && grep -q ptx "$T/ptx" || fail "no PTX in $WSHARD"
	fi
fi

# --- --validate gpu without a usable GPU ---------------------------
gpu_usable=0
if [ "${CUDA:-0}" = 1 ] && [ -e /dev/nvidiactl ] &&
   [ "${CUDA_VISIBLE_DEVICES-unset}" != "" ]; then
	gpu_usable=1
fi

before=$fails
gen "$T/src" --arch llama
if [ "$fails" -eq "$before" ]; then
	if [ "$gpu_usable" = 1 ]; then
		expect_exit 0 timeout 300 "$WSHARD" convert --tp 1 \
			--validate gpu "$T/src" "$T/o"
		grep -q '"validated_by": "cuda:' "$T/o/wshard.json" ||
			fail "convert --validate gpu on a GPU: no rank validated by cuda in the manifest"
		expect_exit 0 "$WSHARD" verify "$T/o"
	else
		if expect_exit 5 timeout 120 "$WSHARD" convert --tp 1 \
			--validate gpu "$T/src" "$T/o"; then
			grep -q CUDA "$T/err" ||
				fail "--validate gpu error does not mention CUDA: $(cat "$T/err")"
		fi
		[ ! -e "$T/o/wshard.json" ] ||
			fail "a failed --validate gpu left a manifest"
	fi
fi

finish
