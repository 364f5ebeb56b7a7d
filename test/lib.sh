# Shared helpers for the test/t-*.sh scripts (sourced).
set -u
: "${WSHARD:?WSHARD must name the wshard binary}"
: "${PYTHON:=python3}"
ROOT=${WSHARD_TEST_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
T=$(mktemp -d "${TMPDIR:-/tmp}/wshard-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
fails=0
# fail MESSAGE: records a failure and goes on.
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect_exit CODE CMD...: runs CMD, stdout to $T/out, stderr to $T/err.
expect_exit() {
	want=$1; shift
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" != "$want" ]; then
		fail "$* exited $got, expected $want; stderr: $(head -c 400 "$T/err")"
		return 1
	fi
	return 0
}
# has NAME TP SHAPE: rank 0 of the --dry-run plan saved as $T/plan-TP holds
# NAME in BF16 with SHAPE ("[a, b]").
has() {
	grep -qF "  $1 BF16 $3 " "$T/plan-$2" ||
		fail "tp $2: $1 is not $3: $(grep -F "  $1 " "$T/plan-$2" | head -n 1)"
}
# one_line WHAT: stderr ($T/err) is exactly one line, and not empty.
one_line() {
	n=$(grep -c . "$T/err")
	if [ "$n" -ne 1 ] || [ "$(wc -l <"$T/err")" -ne 1 ]; then
		fail "$1: stderr has $n lines, expected one: $(head -c 400 "$T/err")"
	fi
}
# err_has WHAT STRING: stderr contains STRING (fixed string).
err_has() {
	grep -qF -- "$2" "$T/err" || fail "$1: stderr does not mention '$2': $(head -c 400 "$T/err")"
}
# py_st ARGS... <<'PY': runs the Python program on stdin with ARGS as
# sys.argv[1:] and test/ on its path (st.py, the safetensors reader and
# writer the checks share).
py_st() { PYTHONPATH="$ROOT/test${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - "$@"; }
# same_files A B WHAT HOW FILE...: each FILE is byte for byte the same in
# folders A and B; one that is not fails as "WHAT: FILE differs HOW".
same_files() {
	sf_a=$1 sf_b=$2 sf_what=$3 sf_how=$4
	shift 4
	for sf_f in "$@"; do
		cmp -s "$sf_a/$sf_f" "$sf_b/$sf_f" || fail "$sf_what: $sf_f differs $sf_how"
	done
}
# The rank files of a tp 2 output (same_files' FILEs, unquoted).
TP2_RANKS="model-rank-0-part-0.safetensors model-rank-1-part-0.safetensors"
# tgz DIR ARCHIVE: DIR's files packed as a gzip-compressed tar (a source
# read front to back, once).
tgz() {
	"$PYTHON" - "$1" "$2" <<'PY' || fail "packing $2 failed"
import os, sys, tarfile
with tarfile.open(sys.argv[2], "w:gz") as t:
    for f in sorted(os.listdir(sys.argv[1])):
        t.add(os.path.join(sys.argv[1], f), f)
PY
}
# gen DIR ARGS...: generates a checkpoint with the fixture generator.
# The rules entries keeping every tensor of gen's Llama checkpoint, and the
# names given, whole on each rank: each entry after ",\n", for a "tensors" list.
llama_whole() {
	for n in "$@" model.embed_tokens.weight model.norm.weight lm_head.weight; do
		printf ',\n{"match": "%s", "split": "replicate"}' "$n"
	done
	for n in input_layernorm post_attention_layernorm self_attn.q_proj self_attn.k_proj \
		self_attn.v_proj self_attn.o_proj mlp.gate_proj mlp.up_proj mlp.down_proj; do
		printf ',\n{"match": "model.layers.{n}.%s.weight", "split": "replicate"}' "$n"
	done
}
gen() { d=$1; shift; "$PYTHON" "$ROOT/scripts/gen-checkpoint" "$@" "$d" >/dev/null || fail "gen-checkpoint $* failed"; }
finish() { [ "$fails" -eq 0 ] && exit 0; echo "$fails failure(s)"; exit 1; }
# run_mpi NP ARGS...: mpirun with a time limit, so that a hang fails the
# test.  Open MPI's own allocations show up as leaks under LeakSanitizer
# (from dlopen'd plugins no suppression can name), so leak checking is off
# inside MPI jobs; the single-process runs keep it.
run_mpi() {
	np=$1; shift
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		timeout 120 mpirun --oversubscribe -np "$np" "$@"
}

# The independent reference (test/reference.py) and its Python packages.
REF="$ROOT/test/reference.py"
# need_reference: skips the script (exit 77) when $PYTHON lacks them.
need_reference() {
	"$PYTHON" -c 'import numpy, safetensors, xxhash, awscrt' 2>/dev/null || {
		echo "skipped: $PYTHON lacks numpy, safetensors, xxhash or awscrt"; exit 77; }
}

# manifest_printed LABEL OUT: OUT/wshard.json holds exactly what a JSON
# printer gives for its content with one space of indent per level (convert
# prints it a piece at a time, never from one tree).
manifest_printed() {
	"$PYTHON" - "$2/wshard.json" <<'EOF' || fail "$1: wshard.json is not JSON printed with indent 1"
import json, sys
b = open(sys.argv[1], encoding="utf-8").read()
sys.exit(b != json.dumps(json.loads(b), indent=1, ensure_ascii=False) + "\n")
EOF
}

# convert_checked NAME SRC TP [OPTIONS...]: converts SRC at TP into
# $out=$T/NAME-tpTP with OPTIONS (ones reference.py also takes), runs
# `wshard verify` on it and compares it with the reference.  Counts the case
# in $ncases.  Returns 1 when the convert failed or the reference disagrees.
ncases=0
convert_checked() {
	name=$1 src=$2 tp=$3; shift 3
	out=$T/$name-tp$tp
	ncases=$((ncases + 1))
	[ -d "$src" ] || { fail "$name tp $tp: no source (generator failed)"; return 1; }
	"$WSHARD" convert --tp "$tp" "$@" "$src" "$out" >"$T/cout" 2>"$T/cerr"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		fail "$name tp $tp: wshard convert${*:+ $*} exited $rc: $(head -c 400 "$T/cerr")"
		return 1
	fi
	if ! "$WSHARD" verify "$out" >"$T/vout" 2>&1; then
		fail "$name tp $tp: wshard verify failed: $(head -c 400 "$T/vout")"
	fi
	manifest_printed "$name tp $tp" "$out"
	if ! "$PYTHON" "$REF" check "$src" "$out" --tp "$tp" "$@" >"$T/rout" 2>&1; then
		fail "$name tp $tp ($*): output differs from the reference:"
		head -n 15 "$T/rout" | sed 's/^/    /'
		[ "$(wc -l <"$T/rout")" -gt 15 ] && tail -n 1 "$T/rout" | sed 's/^/    /'
		return 1
	fi
	return 0
}
