#!/bin/sh
# Distribution under mpirun (DESIGN.md "Distribution"): MPI process p of P
# writes TP ranks p, p+P, ...; the source is read once across processes.
#
# (a) for llama (GQA, kv 2 < tp 4), qwen2 (biases), phi3 (fused
#     projections) and qwen3_moe (16 small experts a layer: many source
#     tensors share one exchange; again with --max-memory 1M, so that
#     they share it in smaller groups), all from sharded sources
#     (--shards 3), and for a larger
#     llama forcing many read windows (--max-memory 1M) and several parts per
#     rank (--max-file-size), `mpirun -np 1|2|3|4 wshard convert --tp 4` and
#     `mpirun -np 2 wshard convert --tp 8` give rank files (and copied files)
#     byte-identical to the single-process run, and a wshard.json equal to
#     it except for its "run" object; the single-process output is checked
#     once against test/reference.py.
# (b) run.bytes_read has one entry per process, each process reads a share,
#     and the shares sum to source.tensor_bytes (untied models); with -np 3
#     --tp 4, process 0 (ranks 0 and 3) reads the pieces of its two ranks
#     of the tensors no two ranks share, about twice each other's share.
# (c) a read or write fault in one process, a manifest fault in process 0
#     and a round-trip fault (WSHARD_INJECT_VALIDATE, --validate host): every
#     process exits with the same non-zero code on its own (checked with
#     mpirun told not to abort the job), mpirun exits with it, one error line,
#     no hang, and OUT holds no wshard.json, rank file, temporary file or lock.
# (d) more processes than ranks is a usage error (exit 2) naming both numbers.
# (e) after a failure (also one that replaced an earlier output), a rerun with
#     --force succeeds.
# (f) on one node with no point-to-point layer chosen, Open MPI is asked for
#     ob1 (no other pml component is loaded); `--mca pml ^ucx` given to
#     mpirun is left alone (cm is loaded).
# (g) --no-sync with mpirun's session directory ($TMPDIR) on OUT's file
#     system: process 0 prints one note naming the directory and the way
#     round it; none with -q, and none with the session directory in
#     /dev/shm (a tmpfs, where OUT is not).
# Also: a plain run (no mpirun variables) never initialises MPI.
# shellcheck disable=SC2086,SC1091
. "$(dirname "$0")/lib.sh"

need_reference
command -v mpirun >/dev/null 2>&1 || { echo "skipped: no mpirun"; exit 77; }
command -v timeout >/dev/null 2>&1 || { echo "skipped: no timeout(1)"; exit 77; }

# Never let a variable of an enclosing MPI job make the "plain" runs MPI ones.
PLAIN="env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK"
unset WSHARD_FAULT WSHARD_FAULT_PROCESS WSHARD_INJECT_VALIDATE

# Under ASan (make check), LeakSanitizer reports Open MPI's own allocations
# (from components dlclose'd by then) in every MPI process.  Most mpirun runs
# turn leak detection off; those with leaks=1 keep it, suppressing only leaks
# whose full stack (slow unwinding, so only a few runs) goes through MPI.
cat >"$T/lsan.supp" <<'EOF'
leak:libmpi.so
leak:libopen-pal.so
leak:libopen-rte.so
leak:libhwloc.so
leak:libpmix.so
leak:libevent
leak:MPI_Init
EOF
asan_off="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
lsan_mpi="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$T/lsan.supp:fast_unwind_on_malloc=0:print_suppressions=0"
leaks=0

# Each MPI process records its own exit status in $T/rc/rc.RANK.
mkdir -p "$T/rc"
cat >"$T/wrap.sh" <<EOF
#!/bin/sh
"\$@"
rc=\$?
echo \$rc >"$T/rc/rc.\${OMPI_COMM_WORLD_RANK:-x}"
exit \$rc
EOF
chmod +x "$T/wrap.sh"

# mpi NP [MPIRUN-OPTIONS... --] ARGS...: runs wshard ARGS under
# `mpirun -np NP` (wrapped in timeout); stdout in $T/out, stderr in $T/err,
# returns mpirun's status.
mpi() {
	np=$1; shift
	mopts=
	case " $* " in *" -- "*)
		while [ "$1" != "--" ]; do mopts="$mopts $1"; shift; done
		shift ;;
	esac
	rm -f "$T"/rc/rc.*
	if [ "$leaks" = 1 ]; then
		aopt=${ASAN_OPTIONS:-} lopt=$lsan_mpi
	else
		aopt=$asan_off lopt=${LSAN_OPTIONS:-}
	fi
	ASAN_OPTIONS=$aopt LSAN_OPTIONS=$lopt \
	timeout 120 mpirun --oversubscribe --bind-to none -np "$np" \
		-x ASAN_OPTIONS -x LSAN_OPTIONS $mopts \
		"$T/wrap.sh" "$WSHARD" "$@" </dev/null >"$T/out" 2>"$T/err"
	mrc=$?
	[ "$mrc" -eq 124 ] && fail "mpirun -np $np wshard $*: timed out (hang?)"
	return "$mrc"
}

# same_out LABEL A B: A and B hold the same files, all byte-identical except
# wshard.json, whose content is equal once "run" is deleted from both.
same_out() {
	label=$1 a=$2 b=$3
	[ -e "$b/wshard.json" ] || { fail "$label: no wshard.json in $b"; return 1; }
	(cd "$a" && ls -A) >"$T/la"
	(cd "$b" && ls -A) >"$T/lb"
	cmp -s "$T/la" "$T/lb" ||
		fail "$label: different file lists: $(diff "$T/la" "$T/lb" | tr '\n' ' ')"
	n=0
	while read -r f; do
		[ "$f" = wshard.json ] && continue
		[ -e "$b/$f" ] || continue
		n=$((n + 1))
		cmp -s "$a/$f" "$b/$f" || fail "$label: $f differs from the single-process run"
	done <"$T/la"
	grep -q '^model-rank-' "$T/la" || fail "$label: no rank files in $a"
	manifest_printed "$label" "$b"
	"$PYTHON" - "$a/wshard.json" "$b/wshard.json" <<'EOF' || fail "$label: wshard.json differs beyond \"run\""
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for d in (a, b):
    d.pop("run", None)
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print("    key %r differs" % k)
    sys.exit(1)
EOF
}

# reads_ok LABEL OUT NP: run.processes is NP, run.bytes_read has NP entries,
# each non-zero, summing to source.tensor_bytes.
reads_ok() {
	"$PYTHON" - "$2/wshard.json" "$3" <<'EOF' || fail "$1: bytes read"
import json, sys
m = json.load(open(sys.argv[1]))
np_ = int(sys.argv[2])
run, want = m.get("run", {}), m["source"]["tensor_bytes"]
br = run.get("bytes_read")
bad = []
if run.get("processes") != np_:
    bad.append("run.processes %r, expected %d" % (run.get("processes"), np_))
if not isinstance(br, list) or len(br) != np_:
    bad.append("run.bytes_read %r: expected %d entries" % (br, np_))
elif sum(br) != want:
    bad.append("run.bytes_read %r sums to %d, source.tensor_bytes is %d" % (br, sum(br), want))
elif min(br) == 0:
    bad.append("run.bytes_read %r: a process read nothing" % (br,))
for b in bad:
    print("    " + b)
sys.exit(1 if bad else 0)
EOF
}

# no_output LABEL OUT: nothing of a finished output is left in OUT.
no_output() {
	[ -d "$2" ] || return 0
	left=
	for f in "$2"/wshard.json "$2"/model-rank-* "$2"/.*.wshard-tmp "$2"/.wshard.lock; do
		[ -e "$f" ] && left="$left ${f##*/}"
	done
	[ -z "$left" ] || fail "$1: left behind in OUT: $left"
}

# one_error LABEL PATTERN: stderr holds exactly one "wshard:" error line (the
# host-validation notice aside), matching the extended regex PATTERN.
one_error() {
	grep '^wshard: ' "$T/err" | grep -v 'validating on the host' >"$T/errl"
	n=$(wc -l <"$T/errl")
	[ "$n" -eq 1 ] || fail "$1: $n wshard error lines, expected 1: $(head -c 600 "$T/errl")"
	grep -Eq "$2" "$T/errl" || fail "$1: error line does not match /$2/: $(head -c 300 "$T/errl")"
}

# all_exit LABEL NP CODE: each of the NP processes recorded exit status CODE.
all_exit() {
	got=$(cat "$T"/rc/rc.* 2>/dev/null | sort | uniq -c | tr -s ' \n' ' ')
	n=$(cat "$T"/rc/rc.* 2>/dev/null | grep -c "^$3\$")
	[ "$n" -eq "$2" ] || fail "$1: per-process exit statuses (count status):$got; expected $2 x $3"
}

# ---------------------------------------------------------------- (a), (b)
S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 250 --shards 3"
B="--layers 1 --hidden 512 --heads 8 --kv-heads 2 --intermediate 1024 --vocab 4000 --shards 3"
BOPT="--max-memory 1M --max-file-size 2M"

# name|generator options|extra convert options
while IFS='|' read -r name gopts copts; do
	[ -n "$name" ] || continue
	src=$T/src-$name
	case $name in big) gen "$src" $B $gopts ;; *) gen "$src" $S $gopts ;; esac
	[ -d "$src" ] || continue
	for tp in 4 8; do
		base=$T/$name-tp$tp-single
		if ! $PLAIN "$WSHARD" convert -q --tp $tp $copts "$src" "$base" 2>"$T/err"; then
			fail "$name tp $tp: single-process convert failed: $(head -c 400 "$T/err")"
			continue
		fi
		mfs=
		case $copts in *--max-file-size*) mfs="--max-file-size 2M" ;; esac
		if [ $tp = 4 ] && ! "$PYTHON" "$REF" check "$src" "$base" --tp $tp $mfs >"$T/rout" 2>&1; then
			fail "$name tp $tp: single-process output differs from the reference:"
			head -n 10 "$T/rout" | sed 's/^/    /'
		fi
	done
	[ "$name" = big ] && [ ! -e "$T/big-tp4-single/model-rank-0-part-1.safetensors" ] &&
		fail "big: expected several parts per rank with --max-file-size 2M"
	case $name in big) runs="4:2 4:3" ;; *) runs="4:1 4:2 4:3 4:4 8:2" ;; esac
	for r in $runs; do
		tp=${r%:*} np=${r#*:}
		out=$T/$name-tp$tp-np$np
		label="$name mpirun -np $np --tp $tp"
		leaks=0
		[ "$name" = llama ] && [ "$np" = 2 ] && leaks=1
		if ! mpi $np convert -q --tp $tp $copts "$src" "$out"; then
			fail "$label: exit $mrc: $(head -c 400 "$T/err")"
			continue
		fi
		all_exit "$label" $np 0
		same_out "$label" "$T/$name-tp$tp-single" "$out"
		reads_ok "$label" "$out" $np
		# process 0 writes ranks 0 and 3, the others one rank each: it
		# reads the pieces of two ranks of every tensor that no two
		# ranks share (embeddings, q, gate/up, down), so about twice as
		# much as each of the others (equal thirds, by blocks of rows,
		# when every such tensor went through MPI exchanges)
		[ "$name" = big ] && [ "$np" = 3 ] && ! "$PYTHON" -c '
import json, sys
br = json.load(open(sys.argv[1]))["run"]["bytes_read"]
print(br)
sys.exit(0 if br[0] > 1.5 * br[1] and br[0] > 1.5 * br[2] else 1)' "$out/wshard.json" >"$T/br" &&
			fail "$label: run.bytes_read $(cat "$T/br"): expected process 0 to read its two ranks' pieces itself"
		rm -rf "$out"
	done
	reads_ok "$name single process" "$T/$name-tp4-single" 1
	echo "$name: single process and mpirun (tp:np) $runs checked"
done <<EOF
llama|--arch llama --dtype BF16 --seed 3|
qwen2|--arch qwen2 --dtype F16 --seed 4|
phi3|--arch phi3 --dtype BF16 --seed 5|
big|--arch llama --dtype BF16 --seed 6|$BOPT
qwen3moe|--arch qwen3_moe --dtype BF16 --seed 7 --head-dim 16 --moe-intermediate 32 --experts 16|
moesmall|--arch qwen3_moe --dtype BF16 --seed 8 --head-dim 16 --moe-intermediate 32 --experts 16|--max-memory 1M
EOF

# A plain run does not initialise MPI: a singleton MPI_Init would create an
# Open MPI session directory under TMPDIR.
mkdir -p "$T/tmpdir"
if ! $PLAIN TMPDIR="$T/tmpdir" "$WSHARD" convert -q --tp 4 "$T/src-llama" "$T/plain" 2>"$T/err"; then
	fail "plain run without mpirun failed: $(head -c 400 "$T/err")"
else
	[ -z "$(ls -A "$T/tmpdir")" ] ||
		fail "a plain run initialised MPI (left $(find "$T/tmpdir" -mindepth 1 -maxdepth 1 | tr '\n' ' ') in TMPDIR)"
	same_out "plain run" "$T/llama-tp4-single" "$T/plain"
fi

# ---------------------------------------------------------------- (c), (e)
src=$T/src-llama
base=$T/llama-tp4-single

# fault LABEL NP CODE PATTERN ENV... -- CONVERT-ARGS...: runs the failing
# convert into $T/fault twice: with mpirun's default abort-on-failure (its
# exit status is CODE, one error line matching PATTERN, OUT clean), and with
# mpirun told not to abort, so each process must fail with CODE on its own.
fault() {
	label=$1 np=$2 code=$3 pat=$4; shift 4
	xs='' vars=''
	while [ "$1" != "--" ]; do
		vars="$vars $1"; xs="$xs -x ${1%%=*}"; shift
	done
	shift
	for abort in 1 0; do
		# shellcheck disable=SC2163
		(export $vars; mpi $np --mca orte_abort_on_non_zero_status $abort $xs -- \
			convert -q --tp 4 "$@" "$src" "$T/fault")
		rc=$?
		cp "$T/err" "$T/err.$abort"
		[ "$rc" -eq 124 ] && { fail "$label: hang"; return 1; }
		if [ $abort = 1 ]; then
			[ "$rc" -eq "$code" ] ||
				fail "$label: mpirun exited $rc, expected $code: $(head -c 400 "$T/err")"
			one_error "$label" "$pat"
		fi
		# with abort on, mpirun may kill the others before they exit
		[ $abort = 0 ] && all_exit "$label" $np $code
		no_output "$label (abort $abort)" "$T/fault"
	done
	return 0
}

rm -rf "$T/fault"
leaks=1
fault "read fault in process 1 of 2" 2 4 'injected' \
	WSHARD_FAULT=read WSHARD_FAULT_PROCESS=1 --
leaks=0
# (e) rerun after the failure, with --force
if mpi 2 convert -q --force --tp 4 "$src" "$T/fault"; then
	same_out "rerun after a read fault" "$base" "$T/fault"
else
	fail "rerun with --force after a read fault: exit $mrc: $(head -c 400 "$T/err")"
fi
# The fault run replaces that earlier output (--force): it must not leave a
# manifest or rank files behind either.
fault "write fault in process 1 of 2, replacing an output" 2 4 'injected' \
	WSHARD_FAULT=write WSHARD_FAULT_PROCESS=1 -- --force
fault "write fault in process 0 of 3" 3 4 'injected' \
	WSHARD_FAULT=write WSHARD_FAULT_PROCESS=0 -- --force
fault "read fault in process 2 of 4" 4 4 'injected' \
	WSHARD_FAULT=read WSHARD_FAULT_PROCESS=2 -- --force
fault "manifest fault in process 0 of 2" 2 4 'injected' \
	WSHARD_FAULT=manifest WSHARD_FAULT_PROCESS=0 -- --force
fault "round-trip fault, --validate host, 2 processes" 2 5 \
	"rank [0-9]+.*'[^']+'|'[^']+'.*rank [0-9]+" \
	WSHARD_INJECT_VALIDATE=100 -- --force --validate host
grep -Eq 'byte [0-9]+|offset [0-9]+' "$T/errl" ||
	fail "round-trip fault: the message names no byte offset: $(head -c 300 "$T/errl")"
grep -q "tensor" "$T/errl" ||
	fail "round-trip fault: the message names no tensor: $(head -c 300 "$T/errl")"
if mpi 2 convert -q --force --tp 4 "$src" "$T/fault"; then
	same_out "rerun after a round-trip fault" "$base" "$T/fault"
else
	fail "rerun with --force after a round-trip fault: exit $mrc: $(head -c 400 "$T/err")"
fi

# ---------------------------------------------------------------- (f)
# On one node, with no point-to-point layer chosen, wshard asks for ob1 (no
# time spent probing cm's network libraries or UCX); a layer chosen on the
# mpirun command line is left alone.  pml_base_verbose makes each process
# name the components it loads.
rm -rf "$T/pml"
if mpi 2 --mca pml_base_verbose 10 -- convert -q --tp 4 "$src" "$T/pml"; then
	grep -q 'select: component ob1 selected' "$T/err" ||
		fail "one node, no pml chosen: ob1 was not selected: $(grep 'select' "$T/err" | head -c 300)"
	grep -q 'found loaded component cm' "$T/err" &&
		fail "one node, no pml chosen: the cm pml was loaded too: $(grep 'found loaded' "$T/err" | head -c 300)"
	same_out "mpirun, pml chosen by wshard" "$base" "$T/pml"
else
	fail "mpirun -np 2 with pml_base_verbose: exit $mrc: $(head -c 400 "$T/err")"
fi
rm -rf "$T/pml"
# (only where Open MPI has a cm layer to load)
if ! ompi_info 2>/dev/null | grep -q 'MCA pml: cm'; then
	echo "   (no cm pml in this Open MPI: the --mca pml ^ucx case is not run)"
elif mpi 2 --mca pml ^ucx --mca pml_base_verbose 10 -- convert -q --tp 4 "$src" "$T/pml"; then
	grep -q 'found loaded component cm' "$T/err" ||
		fail "--mca pml ^ucx: the user's choice was overridden (cm not loaded): $(grep 'found loaded' "$T/err" | head -c 300)"
	same_out "mpirun --mca pml ^ucx" "$base" "$T/pml"
else
	fail "mpirun -np 2 --mca pml ^ucx: exit $mrc: $(head -c 400 "$T/err")"
fi
rm -rf "$T/pml"

# ---------------------------------------------------------------- (g)
mkdir -p "$T/session"
rm -rf "$T/ns"
if TMPDIR="$T/session" mpi 2 convert --no-sync --tp 4 "$src" "$T/ns"; then
	n=$(grep -c "^wshard: note: Open MPI's session directory '$T/session/.*TMPDIR=/dev/shm" "$T/err")
	[ "$n" -eq 1 ] || fail "--no-sync, session directory beside OUT: $n notes, expected 1: $(head -c 400 "$T/err")"
else
	fail "mpirun -np 2 --no-sync: exit $mrc: $(head -c 400 "$T/err")"
fi
rm -rf "$T/ns"
TMPDIR="$T/session" mpi 2 convert -q --no-sync --tp 4 "$src" "$T/ns" ||
	fail "mpirun -np 2 -q --no-sync: exit $mrc: $(head -c 400 "$T/err")"
grep -q 'session directory' "$T/err" && fail "-q --no-sync: the session note was printed"
rm -rf "$T/ns"
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
   [ "$(stat -c %d /dev/shm)" != "$(stat -c %d "$T")" ]; then
	TMPDIR=/dev/shm mpi 2 convert --no-sync --tp 4 "$src" "$T/ns" ||
		fail "TMPDIR=/dev/shm mpirun -np 2 --no-sync: exit $mrc: $(head -c 400 "$T/err")"
	grep -q 'session directory' "$T/err" &&
		fail "session directory in /dev/shm: the note was printed: $(head -c 400 "$T/err")"
fi
rm -rf "$T/ns"

# ---------------------------------------------------------------- (d)
rm -rf "$T/over"
mpi 4 convert -q --tp 2 "$src" "$T/over"
rc=$?
[ "$rc" -eq 2 ] || fail "mpirun -np 4 --tp 2: mpirun exited $rc, expected 2: $(head -c 400 "$T/err")"
one_error "mpirun -np 4 --tp 2" '(^|[^0-9])4([^0-9]|$).*(^|[^0-9])2([^0-9]|$)|(^|[^0-9])2([^0-9]|$).*(^|[^0-9])4([^0-9]|$)'
no_output "mpirun -np 4 --tp 2" "$T/over"
mpi 4 --mca orte_abort_on_non_zero_status 0 -- convert -q --tp 2 "$src" "$T/over"
all_exit "mpirun -np 4 --tp 2" 4 2
no_output "mpirun -np 4 --tp 2" "$T/over"

finish
