#!/bin/sh
# t-validate.sh - the round trip's late checks: while CUDA starts, convert
# writes unchecked and reads those bytes back through the validator once
# it opens.  WSHARD_VALIDATE_LATE=N makes a run do that for its first N
# bytes with any backend, so the path runs here with the host backend:
# - the rank files and manifest are those of a run that checked as it
#   wrote, every byte validated, the late ones counted in --json (dense
#   and MoE, whose expert tensors are gathered before they are written;
#   one process and two MPI processes);
# - a fault injected into a late check fails the run with exit 5, one line
#   naming the rank, tensor and byte, and no wshard.json;
# - --validate gpu whose device cannot be opened once the late checks
#   begin fails the run with exit 5 naming CUDA and no wshard.json
#   (skipped where a GPU is usable).
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

unset WSHARD_FAULT WSHARD_FAULT_PROCESS WSHARD_TEST_HOLD WSHARD_INJECT_VALIDATE \
	WSHARD_VALIDATE_LATE

gen "$T/dense" --arch llama --hidden 512 --heads 8 --kv-heads 4 --intermediate 1024 \
	--vocab 4000 --target-bytes 30000000 --shards 2
gen "$T/moe" --arch qwen3_moe --layers 4 --hidden 256 --heads 4 --kv-heads 2 --experts 32 \
	--moe-intermediate 64 --vocab 4000 --shards 2

# same WHAT A B [files]: the rank files of A and B are identical, and so
# are their manifests but for the timings (unless "files").
same() {
	for f in "$2"/*.safetensors; do
		cmp -s "$f" "$3/${f##*/}" || fail "$1: ${f##*/} differs from a run checked as written"
	done
	[ "${4:-}" = files ] && return
	strip='seconds|created'
	grep -Ev "$strip" "$2/wshard.json" >"$T/m1"
	grep -Ev "$strip" "$3/wshard.json" >"$T/m2"
	diff "$T/m1" "$T/m2" >"$T/diff" 2>&1 ||
		fail "$1: manifests differ: $(head -c 400 "$T/diff")"

}

# late_ok WHAT OUT: --json ($T/out) says every byte written was validated
# and some of them late.
late_ok() {
	"$PYTHON" - "$T/out" "$1" <<'PY' || fail "$1: $(tail -c 300 "$T/out")"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert j["bytes_validated"] == j["bytes_written"], "not every byte validated"
assert 0 < j["bytes_validated_late"] <= j["bytes_written"], "no late checks"
PY
}

for m in dense moe; do
	expect_exit 0 "$WSHARD" convert -q --tp 2 --validate host "$T/$m" "$T/$m-now"
	for late in 1000000 100000000; do
		if WSHARD_VALIDATE_LATE=$late expect_exit 0 "$WSHARD" convert --json --tp 2 \
			--validate host "$T/$m" "$T/$m-late"; then
			late_ok "$m, first $late bytes late"
			same "$m, first $late bytes late" "$T/$m-now" "$T/$m-late"
		fi
		rm -rf "$T/$m-late"
	done
	# the fault lands in the late checks' validator (each validator counts
	# its own bytes from its opening)
	if WSHARD_VALIDATE_LATE=100000000 WSHARD_INJECT_VALIDATE=5000 expect_exit 5 \
		"$WSHARD" convert --tp 2 --validate host "$T/$m" "$T/$m-fault"; then
		one_line "$m: a fault in a late check"
		grep -Eq "round trip changed byte [0-9]+ of rank [0-9] tensor '[^']+'" "$T/err" ||
			fail "$m: a late fault's message names no rank, tensor and byte: $(cat "$T/err")"
	fi
	[ ! -e "$T/$m-fault/wshard.json" ] || fail "$m: a late fault left a manifest"
done

expect_exit 2 env WSHARD_VALIDATE_LATE=x "$WSHARD" convert --tp 2 --validate host \
	"$T/dense" "$T/bad" && err_has "a bad WSHARD_VALIDATE_LATE" WSHARD_VALIDATE_LATE

if command -v mpirun >/dev/null 2>&1; then
	if WSHARD_VALIDATE_LATE=1000000 expect_exit 0 run_mpi 2 -x WSHARD_VALIDATE_LATE \
		"$WSHARD" convert --json --tp 2 --validate host "$T/moe" "$T/moe-mpi"; then
		late_ok "moe, two processes"
		same "moe, two processes" "$T/moe-now" "$T/moe-mpi" files
	fi
else
	echo "skipped: two processes (no mpirun)"
fi

if [ "${CUDA:-0}" = 1 ] && [ -e /dev/nvidiactl ] && [ "${CUDA_VISIBLE_DEVICES-unset}" != "" ]; then
	echo "skipped: --validate gpu failing late (a GPU is usable here)"
else
	if WSHARD_VALIDATE_LATE=1000000 expect_exit 5 "$WSHARD" convert --tp 2 \
		--validate gpu "$T/dense" "$T/gpu"; then
		one_line "--validate gpu failing late"
		err_has "--validate gpu failing late" CUDA
	fi
	[ ! -e "$T/gpu/wshard.json" ] || fail "--validate gpu failing late left a manifest"
fi

finish
