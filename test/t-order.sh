#!/bin/sh
# t-order.sh - a rank's data lies in the order vLLM's sharded_state loader
# reads it: each file's keys sorted by name, files in part order.  Over
# every rank's parts, the names and their data offsets only go forward
# (no backward jump), for a dense model, a MoE with stacked experts, FP8
# blocks, several parts a rank, one process and two under mpirun, and a
# source archive whose members are stored in reverse name order.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

# jumps LABEL OUT TP: fails unless every rank of OUT reads forward.
jumps() {
	"$PYTHON" - "$2" "$3" >"$T/jumps" 2>&1 <<'EOF' || fail "$1: $(cat "$T/jumps")"
import glob, json, struct, sys
out, tp = sys.argv[1], int(sys.argv[2])
bad = []
for r in range(tp):
    parts = sorted(glob.glob("%s/model-rank-%d-part-*.safetensors" % (out, r)),
                   key=lambda f: int(f.rsplit("-", 1)[1].split(".")[0]))
    if not parts:
        bad.append("rank %d: no files" % r)
    prev = None
    for f in parts:
        with open(f, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            head = json.loads(fh.read(n))
        head.pop("__metadata__", None)
        end = 0
        for k in sorted(head):            # safe_open(f).keys() order
            b, e = head[k]["data_offsets"]
            if b < end:
                bad.append("%s: '%s' at %d lies before the end of the one read before it (%d)"
                           % (f.rsplit("/", 1)[1], k, b, end))
            if prev is not None and k < prev:
                bad.append("%s: '%s' sorts before '%s' of the part before" % (f, k, prev))
            end, prev = e, k
print("; ".join(bad[:3]))
sys.exit(1 if bad else 0)
EOF
}

gen "$T/llama" --arch llama --shards 2
gen "$T/moe" --arch qwen3_moe --shards 3 --experts 8
gen "$T/fp8" --arch qwen3_moe --fp8 block --fp8-block 16
n=0
for m in llama moe fp8; do
	for tp in 2 4; do
		for size in 5GiB 64KiB; do
			o=$T/$m-$tp-$size
			expect_exit 0 "$WSHARD" convert -q --no-sync --tp "$tp" --max-file-size "$size" \
				"$T/$m" "$o" && jumps "$m tp $tp parts of $size" "$o" "$tp"
			n=$((n + 1))
		done
	done
done

o=$T/moe-mpi
expect_exit 0 run_mpi 2 "$WSHARD" convert -q --no-sync --tp 4 --max-file-size 64KiB \
	"$T/moe" "$o" && jumps "moe tp 4 under mpirun -np 2" "$o" 4
n=$((n + 1))

# Members stored in reverse name order: the data order must not follow them.
(cd "$T/moe" && ls | sort -r | tar -cf "$T/moe-rev.tar" -T -) || fail "tar failed"
o=$T/moe-rev
expect_exit 0 "$WSHARD" convert -q --no-sync --tp 2 "$T/moe-rev.tar" "$o" &&
	jumps "moe from a reverse-ordered tar" "$o" 2 &&
	for f in "$T/moe-2-5GiB"/model-rank-*.safetensors; do
		cmp -s "$f" "$o/${f##*/}" || fail "moe: ${f##*/} differs when the tar's members are reversed"
	done
n=$((n + 1))

echo "   $n outputs read forward, rank by rank"
finish
