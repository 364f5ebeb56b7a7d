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
# gen DIR ARGS...: generates a checkpoint with the fixture generator.
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
