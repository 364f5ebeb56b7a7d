#!/bin/sh
# Archives in and out.
#  1. Input: a generated sharded Llama packed as .tar, .tar.gz, .tar.xz,
#     .zip and .tar.zst, at the archive root and under one top folder,
#     converts to the same bytes as the directory (every rank file and
#     copied file; the manifest but its "source"); so does mpirun -np 2 for
#     .tar (both processes read) and .tar.zst (process 0 reads everything);
#     inspect reads the archive and verify takes it as --source.
#  1b. The order the source is read in does not change a byte of the rank
#     files: archives whose members are shuffled (tar, tar.zst, zip), a
#     tar made by tar -cf (readdir order), and two copies of the directory
#     whose readdir orders differ (made in opposite orders, on a tmpfs
#     where it shows: checked with ls -U), converted also with
#     --max-memory 1MiB, --checksum xxh3-64 and under mpirun -np 2, all
#     give the directory's rank files (cmp).
#  2. Hostile archives (absolute path, "..", symlink out, hardlink, device,
#     fifo, duplicate entry, truncated member, tar.gz and zip bombs past
#     100:1) are refused: exit 3, one stderr line naming the entry.
#  3. Output: --archive tar.zst twice gives the same bytes; each rank's
#     archive extracts to the directory output's files of that rank, the
#     copied files and the manifest without "archives", with fixed entry
#     headers; tar and tar.gz too; the manifest lists each archive's size;
#     --archive-only leaves the archives and wshard.json, which verify
#     --quick checks; an injected manifest failure leaves neither; --force
#     replaces archives; mpirun -np 2 writes the same files.
# Word splitting of $(...) and $C is on purpose; file names here are plain.
# shellcheck disable=SC1091,SC2086,SC2046,SC2015,SC2012,SC2010
. "$(dirname "$0")/lib.sh"

"$PYTHON" -c 'import json, tarfile, zipfile' 2>/dev/null || {
	echo "skipped: no usable $PYTHON"; exit 77; }
ZSTD=$(command -v zstd 2>/dev/null)
[ -n "$ZSTD" ] || echo "note: no zstd(1): the .tar.zst input cases are skipped"

S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 250 --shards 2"
C="convert -q --validate host --tp 2"
H=$T/h.py

cat >"$H" <<'EOF'
import io, json, os, random, subprocess, sys, tarfile, zipfile

def members(src):
    return sorted(f for f in os.listdir(src) if not f.startswith('.'))

def shuffled(src):
    """SRC's files in a fixed shuffled order, the weight files out of order."""
    names = members(src)
    random.Random(27).shuffle(names)
    weights = [f for f in names if f.endswith('.safetensors')]
    return names[::-1] if weights == sorted(weights) else names

def pack(src, out, fmt, top, order='sorted'):
    """SRC's files into OUT ('-': stdout) as FMT, under 'model/' if top,
    in name order or ORDER 'shuffled'."""
    pre = 'model/' if top == 'top' else ''
    files = shuffled(src) if order == 'shuffled' else members(src)
    if fmt == 'zip':
        with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
            for f in files:
                z.write(os.path.join(src, f), pre + f)
        return
    mode = {'tar': 'w', 'tar.gz': 'w:gz', 'tar.xz': 'w:xz'}[fmt]
    fo = sys.stdout.buffer if out == '-' else None
    with tarfile.open(None if fo else out, mode if not fo else 'w|', fileobj=fo) as t:
        if top == 'top':
            t.add(src, arcname='model', recursive=False)
        for f in files:
            t.add(os.path.join(src, f), arcname=pre + f)

def names(path):
    """The member names of an archive, in archive order."""
    if path.endswith('.zip'):
        n = zipfile.ZipFile(path).namelist()
    elif path.endswith('.zst'):
        data = subprocess.run(['zstd', '-dcq', path], check=True, stdout=subprocess.PIPE).stdout
        n = tarfile.open(fileobj=io.BytesIO(data)).getnames()
    else:
        n = tarfile.open(path).getnames()
    for x in n:
        print(x)

def load(path, drop):
    with open(path) as f:
        d = json.load(f)
    for k in drop:
        d.pop(k, None)
    return d

def mancmp(a, b, *drop):
    """Manifests A and B equal once the top-level keys DROP are removed."""
    x, y = load(a, drop), load(b, drop)
    if x != y:
        keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
        print('differ in: ' + ', '.join(keys))
        sys.exit(1)

def tarinfo(path, name, data=b'', **kw):
    i = tarfile.TarInfo(name)
    i.size = len(data)
    for k, v in kw.items():
        setattr(i, k, v)
    return i, io.BytesIO(data) if data else None

def hostile(src, out):
    """One tar per kind of hostile entry, after a valid checkpoint."""
    cases = {
        'absolute': [tarinfo(None, '/etc/evil.json', b'{}')],
        'dotdot': [tarinfo(None, 'sub/../../evil.json', b'{}')],
        'symlink': [tarinfo(None, 'evil.json', type=tarfile.SYMTYPE, linkname='../../etc/passwd')],
        'hardlink': [tarinfo(None, 'evil.json', type=tarfile.LNKTYPE, linkname='config.json')],
        'chardev': [tarinfo(None, 'evil.json', type=tarfile.CHRTYPE, devmajor=1, devminor=3)],
        'fifo': [tarinfo(None, 'evil.json', type=tarfile.FIFOTYPE)],
        'duplicate': [tarinfo(None, 'config.json', b'{"a": 1}')],
    }
    for name, extra in cases.items():
        with tarfile.open(os.path.join(out, name + '.tar'), 'w', format=tarfile.GNU_FORMAT) as t:
            for f in members(src):
                t.add(os.path.join(src, f), arcname=f)
            for i, data in extra:
                t.addfile(i, data)
    # truncated: the last member says 1 MiB, 1000 bytes follow, no end blocks
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.GNU_FORMAT) as t:
        for f in members(src):
            t.add(os.path.join(src, f), arcname=f)
        end = buf.tell()
    raw = buf.getvalue()[:end]
    i = tarfile.TarInfo('zz-truncated.json')
    i.size = 1 << 20
    with open(os.path.join(out, 'truncated.tar'), 'wb') as f:
        f.write(raw + i.tobuf(tarfile.GNU_FORMAT) + b'x' * 1000)

class Zeros(io.RawIOBase):
    def __init__(self, n):
        self.n = n
    def readable(self):
        return True
    def readinto(self, b):
        k = min(len(b), self.n)
        b[:k] = bytes(k)
        self.n -= k
        return k

def bombs(src, out):
    """200 MB of zeros (about 1 MB compressed) beside a valid checkpoint."""
    n, name = 200 << 20, 'zz-bomb.json'
    with tarfile.open(os.path.join(out, 'bomb.tar.gz'), 'w:gz', compresslevel=1) as t:
        for f in members(src):
            t.add(os.path.join(src, f), arcname=f)
        i = tarfile.TarInfo(name)
        i.size = n
        t.addfile(i, Zeros(n))
    with zipfile.ZipFile(os.path.join(out, 'bomb.zip'), 'w', zipfile.ZIP_DEFLATED,
                         compresslevel=1) as z:
        for f in members(src):
            z.write(os.path.join(src, f), f)
        with z.open(name, 'w', force_zip64=True) as w:
            for _ in range(n >> 20):
                w.write(bytes(1 << 20))

def extract(path, out):
    """Extracts an output archive, checks its entry headers, prints the names."""
    if path.endswith('.zst'):
        data = subprocess.run(['zstd', '-dcq', path], check=True, stdout=subprocess.PIPE).stdout
        t = tarfile.open(fileobj=io.BytesIO(data))
    else:
        t = tarfile.open(path)
    bad = []
    for m in t.getmembers():
        if not m.isreg() or '/' in m.name or m.mtime != 0 or m.uid or m.gid or \
           m.uname or m.gname or m.mode != 0o644 or m.pax_headers:
            bad.append(m.name)
        print(m.name)
    t.extractall(out)
    if bad:
        print('entries with unexpected headers: ' + ', '.join(bad), file=sys.stderr)
        sys.exit(1)

def archives(path):
    """name size for each of the manifest's archives, and whether sizes match."""
    d = json.load(open(path))
    for r, a in enumerate(d['archives']):
        real = os.path.getsize(os.path.join(os.path.dirname(path), a['name']))
        print(a['rank'] == r and a['size'] == real and len(a['checksum']) >= 16, a['name'])

def run(path):
    print(' '.join(str(x) for x in json.load(open(path))['run']['bytes_read']))

cmd = sys.argv[1]
{'pack': pack, 'names': names, 'mancmp': mancmp, 'hostile': hostile, 'bombs': bombs,
 'extract': extract, 'archives': archives, 'run': run}[cmd](*sys.argv[2:])
EOF

gen "$T/src" $S --seed 3
"$WSHARD" $C "$T/src" "$T/dir" 2>"$T/err" || fail "directory convert failed: $(head -c 400 "$T/err")"
TB=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["source"]["tensor_bytes"])' \
	"$T/dir/wshard.json")
ls "$T/dir" >"$T/dir.list"

# same_output NAME OUT [KEY...]: OUT holds the files of $T/dir, byte for byte,
# and its manifest equals $T/dir's without "source" and the KEYs.
same_output() {
	name=$1 out=$2; shift 2
	if [ ! -e "$out/wshard.json" ]; then
		fail "$name: no manifest in '$out'"
		return 1
	fi
	ls "$out" >"$T/out.list"
	cmp -s "$T/dir.list" "$T/out.list" || fail "$name: files differ from the directory's output"
	while read -r f; do
		[ "$f" = wshard.json ] || cmp -s "$T/dir/$f" "$out/$f" ||
			fail "$name: '$f' differs from the directory's output"
	done <"$T/dir.list"
	"$PYTHON" "$H" mancmp "$T/dir/wshard.json" "$out/wshard.json" source "$@" >"$T/mc" ||
		fail "$name: manifest $(cat "$T/mc")"
}

# ---- 1. archives as input ------------------------------------------------

for top in root top; do
	for fmt in tar tar.gz tar.xz zip tar.zst; do
		a=$T/in-$top.$fmt
		if [ "$fmt" = tar.zst ]; then
			[ -n "$ZSTD" ] || continue
			"$PYTHON" "$H" pack "$T/src" - tar "$top" | "$ZSTD" -q -o "$a" ||
				fail "cannot make $a"
		else
			"$PYTHON" "$H" pack "$T/src" "$a" "$fmt" "$top" || fail "cannot make $a"
		fi
		expect_exit 0 "$WSHARD" $C "$a" "$T/o-$top-$fmt" &&
			same_output "input $fmt ($top)" "$T/o-$top-$fmt"
	done
done

# Under MPI: an uncompressed tar is read in place by both processes; a
# compressed one only front to back, by process 0.
for fmt in tar tar.zst; do
	[ "$fmt" = tar.zst ] && [ -z "$ZSTD" ] && continue
	o=$T/mpi-$fmt
	if run_mpi 2 "$WSHARD" $C "$T/in-root.$fmt" "$o" >"$T/out" 2>"$T/err"; then
		same_output "mpirun input $fmt" "$o" run
		set -- $("$PYTHON" "$H" run "$o/wshard.json")
		if [ "$fmt" = tar ]; then
			[ $# -eq 2 ] && [ "$2" -gt 0 ] && [ $(($1 + $2)) -eq "$TB" ] ||
				fail "mpirun input tar: bytes_read $*, expected both processes to share $TB"
		else
			[ "$*" = "$TB 0" ] ||
				fail "mpirun input tar.zst: bytes_read $*, expected process 0 to read $TB"
		fi
	else
		fail "mpirun input $fmt: convert failed: $(head -c 400 "$T/err")"
	fi
done

"$WSHARD" inspect "$T/src" >"$T/i-dir" 2>&1
for a in "$T/in-root.tar" "$T/in-top.zip"; do
	expect_exit 0 "$WSHARD" inspect "$a" && { cmp -s "$T/i-dir" "$T/out" ||
		fail "inspect '$a' differs from inspect of the directory"; }
done
[ -n "$ZSTD" ] && expect_exit 0 "$WSHARD" verify --source "$T/in-top.tar.zst" "$T/dir"
expect_exit 0 "$WSHARD" verify --source "$T/in-root.tar.gz" "$T/dir"
expect_exit 0 "$WSHARD" verify "$T/o-top-tar"

# ---- 1b. read order ---------------------------------------------------------

# same_ranks NAME OUT: OUT's rank files are the directory output's, byte for byte.
same_ranks() {
	ls "$2" | grep '^model-rank-' >"$T/out.list"
	grep '^model-rank-' "$T/dir.list" | cmp -s - "$T/out.list" ||
		fail "$1: rank files $(tr '\n' ' ' <"$T/out.list")differ from the directory's"
	while read -r f; do
		cmp -s "$T/dir/$f" "$2/$f" || fail "$1: '$f' differs from the directory's output"
	done <"$T/out.list"
}

# unsorted NAME: the list in $T/names is not in name order (else the case
# would prove nothing).
unsorted() {
	sort "$T/names" | cmp -s - "$T/names" && fail "$1: members in name order: $(tr '\n' ' ' <"$T/names")"
}

for fmt in tar zip tar.zst; do
	a=$T/shuf.$fmt
	if [ "$fmt" = tar.zst ]; then
		[ -n "$ZSTD" ] || continue
		"$PYTHON" "$H" pack "$T/src" - tar root shuffled | "$ZSTD" -q -o "$a" ||
			fail "cannot make $a"
	else
		"$PYTHON" "$H" pack "$T/src" "$a" "$fmt" root shuffled || fail "cannot make $a"
	fi
	"$PYTHON" "$H" names "$a" | grep 'safetensors$' >"$T/names" && unsorted "shuffled $fmt"
	expect_exit 0 "$WSHARD" $C "$a" "$T/shuf-$fmt" &&
		same_output "shuffled $fmt" "$T/shuf-$fmt"
	expect_exit 0 "$WSHARD" $C --max-memory 1MiB --checksum xxh3-64 "$a" "$T/shuf-mem-$fmt" &&
		same_ranks "shuffled $fmt, --max-memory 1MiB --checksum xxh3-64" "$T/shuf-mem-$fmt"
	[ "$fmt" = zip ] && continue
	if run_mpi 2 "$WSHARD" $C "$a" "$T/shuf-mpi-$fmt" >"$T/out" 2>"$T/err"; then
		same_ranks "mpirun shuffled $fmt" "$T/shuf-mpi-$fmt"
	else
		fail "mpirun shuffled $fmt: convert failed: $(head -c 400 "$T/err")"
	fi
done

# Two copies of the directory, made file by file in opposite orders: on a
# tmpfs readdir returns them in the order they were made (ext4 returns
# names in hash order, the same for both).
D=$(mktemp -d /dev/shm/wshard-test.XXXXXX 2>/dev/null) || D=$T/rd && mkdir -p "$D"
trap 'rm -rf "$T" "$D"' EXIT
mkdir "$D/fwd" "$D/rev"
for f in $(ls "$T/src"); do cp "$T/src/$f" "$D/fwd/"; done
for f in $(ls -r "$T/src"); do cp "$T/src/$f" "$D/rev/"; done
ls -U "$D/fwd" >"$T/fwd.list"
ls -U "$D/rev" >"$T/rev.list"
cmp -s "$T/fwd.list" "$T/rev.list" &&
	echo "note: '$D' lists both copies in the same order; the readdir case is weaker"
for d in fwd rev; do
	expect_exit 0 "$WSHARD" $C "$D/$d" "$T/rd-$d" && same_output "directory made $d" "$T/rd-$d"
	expect_exit 0 "$WSHARD" $C --max-memory 1MiB "$D/$d" "$T/rd-mem-$d" &&
		same_ranks "directory made $d, --max-memory 1MiB" "$T/rd-mem-$d"
done
# tar(1) stores the members in readdir order: a tar of the copy that lists
# its weight files out of name order
u=
for d in fwd rev; do
	grep 'safetensors$' "$T/$d.list" | sort -c 2>/dev/null || u=$D/$d
done
if [ -z "$u" ]; then
	echo "note: '$D' lists the weight files in name order; tar -cf case skipped"
elif tar -cf "$T/gnu.tar" -C "$u" . 2>"$T/err"; then
	tar -tf "$T/gnu.tar" | grep 'safetensors$' >"$T/names" && unsorted "tar -cf"
	expect_exit 0 "$WSHARD" $C "$T/gnu.tar" "$T/gnu" && same_output "tar -cf" "$T/gnu"
else
	fail "tar -cf: $(head -c 400 "$T/err")"
fi

# ---- 2. hostile archives ---------------------------------------------------

mkdir "$T/bad"
"$PYTHON" "$H" hostile "$T/src" "$T/bad" || fail "cannot make the hostile archives"
"$PYTHON" "$H" bombs "$T/src" "$T/bad" || fail "cannot make the bombs"
while read -r file entry; do
	if expect_exit 3 "$WSHARD" $C "$T/bad/$file" "$T/bad-out"; then
		[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "'$entry'" "$T/err" ||
			fail "$file: expected one line naming '$entry', got: $(head -c 400 "$T/err")"
	fi
	[ -e "$T/bad-out/wshard.json" ] && fail "$file: a manifest was written"
	rm -rf "$T/bad-out"
done <<EOF
absolute.tar /etc/evil.json
dotdot.tar sub/../../evil.json
symlink.tar evil.json
hardlink.tar evil.json
chardev.tar evil.json
fifo.tar evil.json
duplicate.tar config.json
truncated.tar zz-truncated.json
bomb.tar.gz zz-bomb.json
bomb.zip zz-bomb.json
EOF
rm -f "$T"/bad/bomb.*

# ---- 3. archives as output -------------------------------------------------

# check_archives NAME OUT FMT [KEY...]: each rank's archive in OUT extracts
# to the directory output's files of that rank, the copied files and, last,
# the manifest without "archives": byte for byte, or without the KEYs too.
check_archives() {
	name=$1 out=$2 fmt=$3; shift 3
	"$PYTHON" "$H" archives "$out/wshard.json" >"$T/al" 2>&1 || {
		fail "$name: no \"archives\" in the manifest: $(head -c 300 "$T/al")"; return 1; }
	grep -qv '^True ' "$T/al" && fail "$name: manifest's archives: $(cat "$T/al")"
	for r in 0 1; do
		x=$T/x-$r
		rm -rf "$x" && mkdir "$x"
		if ! "$PYTHON" "$H" extract "$out/rank-$r.$fmt" "$x" >"$T/names" 2>"$T/err"; then
			fail "$name: rank $r: $(head -c 400 "$T/err")"
			continue
		fi
		{ grep -v '^model-rank-\|^wshard.json$' "$T/dir.list"
		  grep "^model-rank-$r-" "$T/dir.list"; echo wshard.json; } >"$T/want"
		cmp -s "$T/want" "$T/names" ||
			fail "$name: rank $r: entries $(tr '\n' ' ' <"$T/names"), expected $(tr '\n' ' ' <"$T/want")"
		while read -r f; do
			[ "$f" = wshard.json ] && [ $# -gt 0 ] && continue
			cmp -s "$T/dir/$f" "$x/$f" || fail "$name: rank $r: '$f' differs from the directory's"
		done <"$T/names"
		[ $# -eq 0 ] || "$PYTHON" "$H" mancmp "$T/dir/wshard.json" "$x/wshard.json" "$@" \
			>"$T/mc" || fail "$name: rank $r: manifest $(cat "$T/mc")"
	done
}

o1=$T/ao1 o2=$T/ao2
expect_exit 0 "$WSHARD" $C --archive tar.zst "$T/src" "$o1"
sleep 1		# a clock in the bytes would show
expect_exit 0 "$WSHARD" $C --archive tar.zst "$T/src" "$o2"
for f in rank-0.tar.zst rank-1.tar.zst wshard.json; do
	cmp -s "$o1/$f" "$o2/$f" || fail "--archive tar.zst: '$f' differs between two runs"
done
"$PYTHON" "$H" mancmp "$T/dir/wshard.json" "$o1/wshard.json" archives >"$T/mc" ||
	fail "--archive: manifest $(cat "$T/mc") besides \"archives\""
while read -r f; do
	[ "$f" = wshard.json ] || cmp -s "$T/dir/$f" "$o1/$f" ||
		fail "--archive tar.zst: '$f' differs from the directory's output"
done <"$T/dir.list"
check_archives "--archive tar.zst" "$o1" tar.zst
expect_exit 0 "$WSHARD" verify "$o1"

for fmt in tar tar.gz; do
	expect_exit 0 "$WSHARD" $C --archive $fmt "$T/src" "$T/a-$fmt" &&
		check_archives "--archive $fmt" "$T/a-$fmt" $fmt
done
# gzip header: no mtime, no file name
set -- $(od -An -tu1 -N10 "$T/a-tar.gz/rank-0.tar.gz")
[ "$4 $5 $6 $7 $8" = "0 0 0 0 0" ] || fail "--archive tar.gz: gzip header flags/mtime $4 $5 $6 $7 $8"

# --archive-only: only the archives and the manifest stay; verify --quick
# checks the archives, a full verify says it needs the directory form.
ao=$T/only
expect_exit 0 "$WSHARD" $C --archive tar.zst --archive-only "$T/src" "$ao"
[ "$(cd "$ao" && ls -A | tr '\n' ' ')" = "rank-0.tar.zst rank-1.tar.zst wshard.json " ] ||
	fail "--archive-only: OUT holds $(cd "$ao" && ls -A | tr '\n' ' ')"
for f in rank-0.tar.zst rank-1.tar.zst wshard.json; do
	cmp -s "$o1/$f" "$ao/$f" || fail "--archive-only: '$f' differs from the --archive run's"
done
expect_exit 0 "$WSHARD" verify --quick "$ao"
if expect_exit 3 "$WSHARD" verify "$ao"; then
	[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q 'only rank archives' "$T/err" ||
		fail "verify --archive-only output: $(head -c 400 "$T/err")"
fi
x=$T/only-x1
mkdir "$x" && "$PYTHON" "$H" extract "$ao/rank-1.tar.zst" "$x" >/dev/null &&
	expect_exit 0 "$WSHARD" verify --rank 1 "$x"
cp "$ao/rank-1.tar.zst" "$T/keep"
printf 'x' | dd of="$ao/rank-1.tar.zst" bs=1 seek=100 conv=notrunc 2>/dev/null
expect_exit 1 "$WSHARD" verify --quick "$ao" &&
	{ grep -q "^rank 1: archive 'rank-1.tar.zst': checksum" "$T/out" ||
		fail "damaged archive: $(head -c 300 "$T/out")"; }
cp "$T/keep" "$ao/rank-1.tar.zst"

# --force replaces an archive output, whatever the format.
expect_exit 2 "$WSHARD" $C --archive tar "$T/src" "$ao"
expect_exit 0 "$WSHARD" $C --archive tar --force "$T/src" "$ao" &&
	check_archives "--force over --archive-only" "$ao" tar
[ -e "$ao/rank-0.tar.zst" ] && fail "--force left the old rank-0.tar.zst"

# A failure before the manifest leaves neither archives nor manifest.
for only in "" --archive-only; do
	f=$T/fault$only
	expect_exit 4 env WSHARD_FAULT=manifest "$WSHARD" $C --archive tar.zst $only "$T/src" "$f"
	left=$(cd "$f" && ls -A | grep 'rank-\|wshard.json\|wshard-tmp' | tr '\n' ' ')
	[ -z "$left" ] || fail "WSHARD_FAULT=manifest $only: left $left"
done

# Under MPI each process packs its own ranks.
m=$T/mpi-out
if run_mpi 2 "$WSHARD" $C --archive tar.gz "$T/src" "$m" >"$T/out" 2>"$T/err"; then
	check_archives "mpirun --archive tar.gz" "$m" tar.gz run
	expect_exit 0 "$WSHARD" verify --quick "$m"
else
	fail "mpirun --archive: convert failed: $(head -c 400 "$T/err")"
fi

expect_exit 2 "$WSHARD" $C --archive zip "$T/src" "$T/u"
expect_exit 2 "$WSHARD" $C --archive-only "$T/src" "$T/u"

finish
