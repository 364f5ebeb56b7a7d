#!/bin/sh
# Crash consistency and hostile environments for convert: a convert killed
# with SIGKILL (injected at three points, and from outside) leaves no
# wshard.json and nothing changed outside OUT, and --force then recovers;
# a full disk, a read-only OUT, an unreadable or growing source give one
# clear line and exit 3 or 4 with nothing that looks complete; the source
# is only ever read; two converts into one OUT never mix, also when the
# lock changes hands; and an OUT that holds a file wshard did not write is
# never emptied, even with --force.  Checks that need another user (root
# ignores permission bits) run wshard as nobody; the full disk is a 2 MiB
# tmpfs, mounted only when root; the lock handover needs strace (it delays
# one flock call).  Each check that cannot run says "skipped: ...".
# $S holds several generator options: split on purpose.
# shellcheck disable=SC2086,SC1091
. "$(dirname "$0")/lib.sh"

unset WSHARD_FAULT WSHARD_FAULT_PROCESS WSHARD_TEST_HOLD WSHARD_INJECT_VALIDATE

S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 250"
# Wide tensors: few of them, so big checkpoints generate and convert fast.
WIDE="--hidden 512 --heads 8 --kv-heads 2 --intermediate 1024 --vocab 1024"

# exit_in WHAT RC CODES...: RC is one of CODES.
exit_in() {
	what=$1 rc=$2; shift 2
	for c in "$@"; do [ "$rc" = "$c" ] && return 0; done
	fail "$what: exit $rc, expected one of $*; stderr: $(head -c 400 "$T/err")"
	return 1
}
# no_temps WHAT OUT: OUT holds no temporary file.
no_temps() {
	tmps=$(find "$2" -name '.*.wshard-tmp' 2>/dev/null | head -3)
	[ -z "$tmps" ] || fail "$1: temporary files left: $tmps"
}
# incomplete WHAT OUT: OUT holds no manifest and no temporary file.
incomplete() {
	[ ! -e "$2/wshard.json" ] || fail "$1: '$2/wshard.json' exists after a failed convert"
	no_temps "$@"
}
# outside PARENT OUTNAME FILE: every entry under PARENT but OUT (type,
# mode, size, mtime) and every file's checksum, to compare before/after.
outside() {
	(cd "$1" && find . -mindepth 1 -path "./$2" -prune -o \
		-printf '%p %y %m %s %T@\n' | LC_ALL=C sort &&
		find . -mindepth 1 -path "./$2" -prune -o -type f -print |
		LC_ALL=C sort | xargs sha256sum) >"$3"
}
# same WHAT A B: files A and B are identical.
same() { cmp -s "$2" "$3" || fail "$1: changed: $(diff "$2" "$3" | head -6 | tr '\n' ' ')"; }
# sums DIR FILE: sha256 of every file of DIR (but OUT's lock file, which
# a convert may leave: locking needs it to outlive the run).
sums() {
	(cd "$1" && find . -type f ! -name .wshard.lock | LC_ALL=C sort |
		xargs sha256sum) >"$2"
}
# locked OUT: a convert holds OUT's lock (without flock(1): its file exists).
if command -v flock >/dev/null 2>&1; then
	locked() { [ -e "$1/.wshard.lock" ] && ! flock -n "$1/.wshard.lock" true 2>/dev/null; }
else
	locked() { [ -e "$1/.wshard.lock" ]; }
fi
# wait_locked OUT: waits up to 20 s for a convert to take OUT's lock.
wait_locked() {
	i=0
	while [ $i -lt 200 ]; do
		locked "$1" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
# opened FILE: how many open file descriptors of ours refer to FILE.
opened() { find /proc/[0-9]*/fd -lname "$1" 2>/dev/null | wc -l; }
# recover WHAT SRC OUT TP: convert --force then a full verify succeed.
recover() {
	"$WSHARD" convert -q --force --tp "$4" "$2" "$3" >"$T/out" 2>"$T/err" ||
		{ fail "$1: convert --force after the crash exited $?: $(head -c 400 "$T/err")"; return 1; }
	"$WSHARD" verify "$3" >"$T/out" 2>"$T/err" ||
		fail "$1: verify after the recovery exited $?: $(head -c 400 "$T/err")"
}

# Unprivileged runs: as nobody when root, else as ourselves.
if [ "$(id -u)" = 0 ]; then
	if command -v setpriv >/dev/null 2>&1; then
		as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	else
		as_user() { runuser -u nobody -- "$@"; }
	fi
	chmod 755 "$T"
else
	as_user() { "$@"; }
fi
unpriv=1
as_user "$WSHARD" --help >/dev/null 2>&1 || {
	echo "skipped: cannot run $WSHARD as an unprivileged user (permission checks)"
	unpriv=0
}

gen "$T/src" $S --shards 2

# ---------------------------------------------------------------- killed
# SIGKILL while writing a rank file, between ranks (one rank renamed, one
# still temporary), and just before the manifest.
for point in kill-write kill-seal kill-manifest; do
	p=$T/k-$point
	mkdir -p "$p"
	cp -R "$T/src" "$p/src"
	outside "$p" out "$T/before"
	WSHARD_FAULT=$point "$WSHARD" convert -q --tp 2 "$p/src" "$p/out" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" -eq 137 ] || fail "$point: convert exited $rc, expected 137 (SIGKILL)"
	incomplete_left=$(find "$p/out" -name '.*.wshard-tmp' | wc -l)
	[ ! -e "$p/out/wshard.json" ] || fail "$point: wshard.json exists after SIGKILL"
	[ "$point" = kill-manifest ] || [ "$incomplete_left" -gt 0 ] ||
		fail "$point: no temporary file left: the fault point did not fire mid-write"
	outside "$p" out "$T/after"
	same "$point: outside OUT" "$T/before" "$T/after"
	expect_exit 3 "$WSHARD" verify --quick "$p/out" && err_has "$point: verify" wshard.json
	expect_exit 2 "$WSHARD" convert -q --tp 2 "$p/src" "$p/out" &&
		err_has "$point: convert without --force" "--force"
	recover "$point" "$p/src" "$p/out" 2
	outside "$p" out "$T/after"
	same "$point: outside OUT after the recovery" "$T/before" "$T/after"
done

# The same under mpirun: process 1 dies between its ranks, mpirun ends
# the job; no manifest, and --force recovers.
if command -v mpirun >/dev/null 2>&1; then
	p=$T/k-mpi
	mkdir -p "$p"
	cp -R "$T/src" "$p/src"
	outside "$p" out "$T/before"
	run_mpi 2 -x WSHARD_FAULT=kill-seal -x WSHARD_FAULT_PROCESS=1 \
		"$WSHARD" convert -q --tp 4 "$p/src" "$p/out" >"$T/out" 2>"$T/err"
	rc=$?
	if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
		fail "mpi kill-seal: mpirun exited $rc, expected a failure (not a hang)"
	fi
	[ ! -e "$p/out/wshard.json" ] || fail "mpi kill-seal: wshard.json exists after SIGKILL"
	recover "mpi kill-seal" "$p/src" "$p/out" 4
	outside "$p" out "$T/after"
	same "mpi kill-seal: outside OUT" "$T/before" "$T/after"
fi

# A real SIGKILL from outside, at a moment we do not choose.  The convert
# may have finished: then its output must verify.
p=$T/k-ext
mkdir -p "$p"
gen "$p/big" $WIDE --target-bytes 200000000 --shards 3
outside "$p" out "$T/before"
for delay in 0.1 0.4; do
	: >"$T/hold"
	WSHARD_TEST_HOLD=$T/hold "$WSHARD" convert -q --force --tp 2 "$p/big" "$p/out" \
		>"$T/out" 2>"$T/err" &
	pid=$!
	wait_locked "$p/out" || fail "external kill: the convert never took OUT's lock"
	rm -f "$T/hold"
	sleep "$delay"
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rc=$?
	if [ "$rc" -eq 0 ]; then
		echo "external kill after $delay s: the convert had finished"
		"$WSHARD" verify "$p/out" >"$T/out" 2>"$T/err" ||
			fail "external kill: finished output does not verify: $(head -c 400 "$T/out")"
	elif [ "$rc" -eq 137 ]; then
		echo "external kill after $delay s: killed mid-run"
		if [ -e "$p/out/wshard.json" ]; then
			# Killed after the manifest was in place: complete.
			"$WSHARD" verify "$p/out" >"$T/out" 2>"$T/err" ||
				fail "external kill: a manifest was left but the output does not verify"
		fi
	else
		fail "external kill after $delay s: convert exited $rc: $(head -c 400 "$T/err")"
	fi
	recover "external kill" "$p/big" "$p/out" 2
done
outside "$p" out "$T/after"
same "external kill: outside OUT" "$T/before" "$T/after"
rm -rf "$p"

# ------------------------------------------------------------- disk full
mnt=$T/full
mkdir "$mnt"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=2m tmpfs "$mnt" 2>/dev/null; then
	trap 'umount "$mnt" 2>/dev/null; rm -rf "$T"' EXIT
	trap 'exit 130' INT TERM
	gen "$T/mid" $WIDE --target-bytes 6000000
	expect_exit 4 "$WSHARD" convert -q --tp 2 "$T/mid" "$mnt/out"
	one_line "disk full"
	err_has "disk full" "model-rank-"
	err_has "disk full" "No space left on device"
	incomplete "disk full" "$mnt/out"
	left=$(find "$mnt/out" -mindepth 1 ! -name .wshard.lock 2>/dev/null | head -3)
	[ -z "$left" ] || fail "disk full: files left in OUT: $left"
	used=$(df -k "$mnt" | awk 'NR == 2 { print $3 }')
	[ "$used" -lt 64 ] || fail "disk full: $used KiB still used on the tmpfs"
	umount "$mnt" || fail "disk full: cannot unmount the tmpfs"
else
	echo "skipped: cannot mount tmpfs"
fi

# --------------------------------------------------- permissions and races
if [ "$unpriv" = 1 ]; then
	# Read-only OUT: an existing empty directory nobody may not write.
	u=$T/u
	mkdir -p "$u/ro-out"
	chmod 777 "$u"
	chmod 555 "$u/ro-out"
	chmod -R a+rX "$T/src"
	as_user "$WSHARD" convert -q --tp 2 "$T/src" "$u/ro-out" >"$T/out" 2>"$T/err"
	rc=$?
	exit_in "read-only OUT" "$rc" 3 4 && one_line "read-only OUT"
	err_has "read-only OUT" "$u/ro-out"
	err_has "read-only OUT" "Permission denied"
	[ -z "$(ls -A "$u/ro-out")" ] || fail "read-only OUT: something was written"

	# Unreadable source file.
	cp -R "$T/src" "$u/src-000"
	chmod 000 "$u/src-000/model-00002-of-00002.safetensors"
	as_user "$WSHARD" convert -q --tp 2 "$u/src-000" "$u/out-000" >"$T/out" 2>"$T/err"
	rc=$?
	exit_in "unreadable source" "$rc" 3 4 && one_line "unreadable source"
	err_has "unreadable source" "model-00002-of-00002.safetensors"
	err_has "unreadable source" "Permission denied"
	incomplete "unreadable source" "$u/out-000"

	# Source opened read-only: no write bit anywhere, convert and verify as
	# nobody and as ourselves, and not a byte of it changes.
	cp -R "$T/src" "$u/src-ro"
	chmod -R a-w "$u/src-ro"
	sums "$u/src-ro" "$T/sums-before"
	for who in user self; do
		o=$u/out-ro-$who
		if [ $who = user ]; then run=as_user; else run=; fi
		$run "$WSHARD" convert -q --tp 2 "$u/src-ro" "$o" >"$T/out" 2>"$T/err" ||
			fail "read-only source ($who): convert exited $?: $(head -c 400 "$T/err")"
		$run "$WSHARD" verify "$o" >"$T/out" 2>"$T/err" ||
			fail "read-only source ($who): verify exited $?: $(head -c 400 "$T/err")"
	done
	sums "$u/src-ro" "$T/sums-after"
	same "read-only source: checksums" "$T/sums-before" "$T/sums-after"
	chmod -R u+w "$u/src-ro"
else
	echo "skipped: read-only OUT, unreadable source, source as another user"
fi

# The source grows while convert runs: hold it, append, release.
cp -R "$T/src" "$T/grow"
o=$T/out-grow
: >"$T/hold"
WSHARD_TEST_HOLD=$T/hold "$WSHARD" convert -q --tp 2 "$T/grow" "$o" >"$T/out" 2>"$T/err" &
pid=$!
if wait_locked "$o"; then
	printf 'appended' >>"$T/grow/model-00001-of-00002.safetensors"
	rm -f "$T/hold"
	wait "$pid"
	rc=$?
	exit_in "growing source" "$rc" 3 4 && one_line "growing source"
	err_has "growing source" "model-00001-of-00002.safetensors"
	err_has "growing source" "changed size"
	incomplete "growing source" "$o"
else
	rm -f "$T/hold"
	wait "$pid"
	fail "growing source: the convert never took OUT's lock"
fi

# Two converts into one OUT: the second finds it locked (exit 4), the
# first completes untouched, and the output is the first's alone (tp 2,
# no file of the second's tp 4).
o=$T/out-two
: >"$T/hold"
WSHARD_TEST_HOLD=$T/hold "$WSHARD" convert -q --tp 2 "$T/src" "$o" >"$T/out1" 2>"$T/err1" &
pid=$!
if wait_locked "$o"; then
	if expect_exit 4 "$WSHARD" convert -q --force --tp 4 "$T/src" "$o"; then
		one_line "second convert"
		err_has "second convert" "locked"
	fi
	rm -f "$T/hold"
	wait "$pid" || fail "first convert exited $?: $(head -c 400 "$T/err1")"
	expect_exit 0 "$WSHARD" verify "$o"
	grep -q '"tp": 2' "$o/wshard.json" 2>/dev/null || fail "two converts: the manifest is not the first's"
	for f in "$o"/model-rank-[23]-*; do
		[ -e "$f" ] && fail "two converts: '$f' of the second (tp 4) in OUT"
	done
	no_temps "two converts" "$o"
else
	rm -f "$T/hold"
	wait "$pid"
	fail "two converts: the first never took OUT's lock"
fi

# The lock changes hands: B opens OUT's lock file while A holds it, and
# (strace delays its flock) locks only after A has finished.  B then holds
# the lock, so C must be refused; B's output must be whole.  (A lock file
# unlinked on release lets B lock a dead inode and C a new one: both run.)
if command -v strace >/dev/null 2>&1 &&
	strace -f -o /dev/null -e inject=flock:delay_enter=1 true 2>/dev/null; then
	o=$T/out-handover
	: >"$T/holdA"
	: >"$T/holdB"
	WSHARD_TEST_HOLD=$T/holdA "$WSHARD" convert -q --tp 2 "$T/src" "$o" >/dev/null 2>&1 &
	a=$!
	if wait_locked "$o"; then
		# LeakSanitizer cannot run under ptrace: no leak check for B.
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		WSHARD_TEST_HOLD=$T/holdB strace -f -o /dev/null \
			-e inject=flock:delay_enter=3000000:when=1 \
			"$WSHARD" convert -q --force --tp 2 "$T/src" "$o" >"$T/outB" 2>"$T/errB" &
		b=$!
		# A releases only once B has the lock file open (its flock pending).
		i=0
		while [ $i -lt 100 ] && [ "$(opened "$o/.wshard.lock")" -lt 2 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		rm -f "$T/holdA"
		wait "$a" || fail "lock handover: A exited $?"
		sleep 4
		expect_exit 4 "$WSHARD" convert -q --force --tp 2 "$T/src" "$o" &&
			err_has "lock handover: C" "locked"
		rm -f "$T/holdB"
		wait "$b" || fail "lock handover: B exited $?: $(head -c 400 "$T/errB")"
		expect_exit 0 "$WSHARD" verify "$o"
	else
		rm -f "$T/holdA" "$T/holdB"
		wait "$a"
		fail "lock handover: A never took OUT's lock"
	fi
	rm -f "$T/holdB"
else
	echo "skipped: lock handover (no strace with fault injection)"
fi

# --no-sync: no fsync, fdatasync or sync_file_range at all (strace counts
# them), where the default syncs every file it renames into place; the
# manifest says which; the output is the same, and a kill still leaves no
# manifest.
if command -v strace >/dev/null 2>&1; then
	for mode in sync no-sync; do
		o=$T/out-$mode
		flag=
		[ "$mode" = no-sync ] && flag=--no-sync
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
			strace -f -qq -o "$T/strace-$mode" -e trace=fsync,fdatasync,sync_file_range \
			"$WSHARD" convert -q $flag --archive tar --tp 2 "$T/src" "$o" >"$T/out" 2>"$T/err" ||
			fail "$mode: convert failed: $(head -c 400 "$T/err")"
		n=$(grep -c -E '^[0-9]+ +(fsync|fdatasync|sync_file_range)\(' "$T/strace-$mode")
		synced=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["synced"])' "$o/wshard.json")
		if [ "$mode" = sync ]; then
			# two rank files, two archives, the copies and the manifest
			[ "$n" -ge 5 ] || fail "sync: only $n sync calls by a default convert"
			[ "$synced" = True ] || fail "sync: manifest run.synced is $synced"
		else
			[ "$n" -eq 0 ] || fail "--no-sync: $n sync calls: $(grep -E 'sync' "$T/strace-$mode" | head -3)"
			[ "$synced" = False ] || fail "--no-sync: manifest run.synced is $synced"
		fi
		expect_exit 0 "$WSHARD" verify "$o"
		# the bytes against the independent reference, where it can run
		# (it knows no archives: it reads a copy of OUT without them)
		if "$PYTHON" -c 'import numpy, safetensors, xxhash, awscrt' 2>/dev/null; then
			rm -rf "$T/ref-$mode"
			mkdir "$T/ref-$mode"
			find "$o" -maxdepth 1 -type f ! -name 'rank-*.tar' -exec cp {} "$T/ref-$mode/" \;
			"$PYTHON" "$REF" check "$T/src" "$T/ref-$mode" --tp 2 >"$T/rout" 2>&1 ||
				fail "$mode: output differs from the reference: $(head -c 400 "$T/rout")"
		fi
	done
	# (the archives differ: each holds the manifest, which says run.synced)
	same_files "$T/out-sync" "$T/out-no-sync" --no-sync "from the synced run's" $TP2_RANKS config.json
else
	echo "skipped: --no-sync makes no sync call (no strace)"
fi
p=$T/k-nosync
WSHARD_FAULT=kill-seal "$WSHARD" convert -q --no-sync --tp 2 "$T/src" "$p" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 137 ] || fail "--no-sync kill-seal: convert exited $rc, expected 137 (SIGKILL)"
[ ! -e "$p/wshard.json" ] || fail "--no-sync kill-seal: wshard.json exists after SIGKILL"
recover "--no-sync kill-seal" "$T/src" "$p" 2

# A foreign file in OUT: refused with exit 2, with or without --force,
# and neither it nor the earlier output is touched.
o=$T/out-foreign
"$WSHARD" convert -q --tp 2 "$T/src" "$o" >/dev/null 2>&1 || fail "foreign: first convert failed"
echo 'my notes' >"$o/NOTES.txt"
sums "$o" "$T/f-before"
for force in "" --force; do
	if expect_exit 2 "$WSHARD" convert -q $force --tp 4 "$T/src" "$o"; then
		one_line "foreign file ${force:-no --force}"
		err_has "foreign file ${force:-no --force}" NOTES.txt
	fi
	sums "$o" "$T/f-after"
	same "foreign file ${force:-no --force}" "$T/f-before" "$T/f-after"
done
expect_exit 0 "$WSHARD" verify "$o"
# Only a foreign file: still nothing deleted.
mkdir "$T/out-only"
echo 'keep me' >"$T/out-only/keep.bin"
expect_exit 2 "$WSHARD" convert -q --force --tp 2 "$T/src" "$T/out-only"
[ -f "$T/out-only/keep.bin" ] || fail "foreign only: keep.bin was deleted"
# Foreign files that happen to bear the names of the source's non-weight
# files, in a directory no wshard run ever touched (no manifest, lock,
# rank or temporary file): not an earlier output, so not replaced.
mkdir "$T/out-named"
echo '{"mine": true}' >"$T/out-named/config.json"
echo 'my tokenizer' >"$T/out-named/tokenizer.json"
sums "$T/out-named" "$T/n-before"
expect_exit 2 "$WSHARD" convert -q --force --tp 2 "$T/src" "$T/out-named"
sums "$T/out-named" "$T/n-after"
same "foreign files named like the source's config.json, tokenizer.json" \
	"$T/n-before" "$T/n-after"

finish
