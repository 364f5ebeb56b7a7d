#!/bin/sh
# wshard verify: converts a generated Llama (GQA, 2 source shards) at tp 2
# and tp 4, then damages fresh copies of the good output and checks that
# verify catches each damage with the right difference line on stdout, exit
# 1 and one summary line on stderr:
#  1. a flipped byte inside a tensor's data (exact byte offset + checksum),
#  2. header bytes changed: a tensor renamed, a shape changed (still valid
#     safetensors) and a shape digit / JSON character (no longer valid),
#  3. a truncated rank file, 4. a deleted one, 5. an extra tensor,
#  6. q and k rows swapped in a qkv_proj with the manifest's size and
#     checksums updated: --quick passes, only the source comparison catches it,
#  7. a different source (same shapes, other seed) via --source,
#  8. a manifest whose tp was edited;
#  9. an intact output passes (plain, --quick, --rank, --json, mpirun -np 2)
#     and a damaged one under mpirun prints each line once;
# 10. unreadable inputs and usage errors: exit 3 / 2 with one stderr line.
# Also: the source directory is never modified.
# $S holds several generator options: split on purpose.
# shellcheck disable=SC2086,SC2015,SC1091
. "$(dirname "$0")/lib.sh"

need_reference

S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 250 --shards 2"
F0=model-rank-0-part-0.safetensors
F1=model-rank-1-part-0.safetensors
QKV0=model.layers.0.self_attn.qkv_proj.weight

# Helpers that edit safetensors files and manifests in place.
cat >"$T/h.py" <<'EOF'
import hashlib, json, struct, sys, xxhash
from awscrt import checksums

def digest(m, data):
    # the digest in the algorithm the manifest names
    algo = m['options']['checksum']
    if algo == 'crc64-nvme':
        return '%016x' % checksums.crc64nvme(data)
    if algo == 'sha256':
        return hashlib.sha256(data).hexdigest()
    return xxhash.xxh3_64_hexdigest(data)

def load(path):
    with open(path, 'rb') as f:
        raw = f.read()
    n = struct.unpack('<Q', raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:], 8 + n

def save(path, hdr, data):
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * (-(8 + len(h)) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + data)

cmd, path = sys.argv[1], sys.argv[2]
if cmd == 'offset':            # offset FILE TENSOR K: file offset of data byte K
    hdr, _, start = load(path)
    print(start + hdr[sys.argv[3]]['data_offsets'][0] + int(sys.argv[4]))
elif cmd == 'flip':            # flip FILE OFFSET: inverts one byte
    with open(path, 'r+b') as f:
        off = int(sys.argv[3]); f.seek(off); b = f.read(1)
        f.seek(off); f.write(bytes([b[0] ^ 0xff]))
elif cmd == 'hsub':            # hsub FILE OLD NEW: same-length edit in the header
    old, new = sys.argv[3].encode(), sys.argv[4].encode()
    assert len(old) == len(new)
    with open(path, 'rb') as f:
        raw = f.read()
    n = struct.unpack('<Q', raw[:8])[0]
    i = raw.find(old, 8, 8 + n)
    assert i >= 0, 'not in the header: %r' % old
    with open(path, 'r+b') as f:
        f.seek(i); f.write(new)
elif cmd == 'addtensor':       # addtensor FILE NAME: a valid file with one more tensor
    hdr, data, _ = load(path)
    hdr[sys.argv[3]] = {'dtype': 'BF16', 'shape': [4, 4],
                        'data_offsets': [len(data), len(data) + 32]}
    save(path, hdr, data + bytes(range(32)))
elif cmd == 'swaprows':        # swaprows FILE TENSOR A B N MANIFEST RANK
    name, a, b, n, man, rank = sys.argv[3], *map(int, sys.argv[4:7]), sys.argv[7], int(sys.argv[8])
    hdr, data, _ = load(path)
    t = hdr[name]
    row = t['data_offsets'][1] - t['data_offsets'][0]
    row //= t['shape'][0]
    base = t['data_offsets'][0]
    buf = bytearray(data[base:t['data_offsets'][1]])
    ra, rb = buf[a * row:(a + n) * row], buf[b * row:(b + n) * row]
    assert ra != rb
    buf[a * row:(a + n) * row], buf[b * row:(b + n) * row] = rb, ra
    data = data[:base] + bytes(buf) + data[t['data_offsets'][1]:]
    save(path, hdr, data)
    with open(path, 'rb') as f:
        whole = f.read()
    with open(man) as f:
        m = json.load(f)
    r = m['ranks'][rank]
    fname = path.rsplit('/', 1)[-1]
    for fe in r['files']:
        if fe['name'] == fname:
            fe['size'] = len(whole)
            fe['checksum'] = digest(m, whole)
    for te in r['tensors']:
        if te['name'] == name:
            te['checksum'] = digest(m, bytes(buf))
    with open(man, 'w') as f:
        json.dump(m, f, indent=2)
elif cmd == 'filesum':         # filesum FILE MANIFEST RANK: manifest's file checksum follows the file
    man, rank = sys.argv[3], int(sys.argv[4])
    with open(path, 'rb') as f:
        whole = f.read()
    with open(man) as f:
        m = json.load(f)
    for fe in m['ranks'][rank]['files']:
        if fe['name'] == path.rsplit('/', 1)[-1]:
            fe['checksum'] = digest(m, whole)
    with open(man, 'w') as f:
        json.dump(m, f, indent=2)
elif cmd == 'setjson':         # setjson MANIFEST KEY JSON-VALUE
    with open(path) as f:
        m = json.load(f)
    m[sys.argv[3]] = json.loads(sys.argv[4])
    with open(path, 'w') as f:
        json.dump(m, f, indent=2)
elif cmd == 'checkjson':       # checkjson FILE: prints ok and the number of differences
    with open(path) as f:
        d = json.load(f)
    print(d['ok'], len(d['differences']))
EOF
py() { "$PYTHON" "$T/h.py" "$@" || fail "h.py $* failed"; }

gen "$T/src" $S --seed 7
gen "$T/other" $S --seed 8
(cd "$T" && sha256sum src/* other/*) >"$T/sums.before"
for tp in 2 4; do
	"$WSHARD" convert -q --tp $tp "$T/src" "$T/good$tp" 2>"$T/err" ||
		{ fail "convert --tp $tp: $(head -c 400 "$T/err")"; finish; }
done

# fresh NAME TP: a copy of the good tp-TP output in $T/NAME ($D).
fresh() { D=$T/$1; rm -rf "$D"; cp -R "$T/good$2" "$D"; }
# has WHAT LINE: stdout ($T/out) holds LINE (fixed string, whole line).
has() { grep -qxF -- "$2" "$T/out" || fail "$1: no line '$2' on stdout: $(head -c 600 "$T/out")"; }
# has_re WHAT RE: some stdout line matches the basic regular expression RE.
has_re() { grep -q -- "$2" "$T/out" || fail "$1: no line matching '$2' on stdout: $(head -c 600 "$T/out")"; }
# nlines WHAT N: stdout holds exactly N difference lines (plus the final one).
nlines() {
	n=$(($(grep -c . "$T/out") - 1))
	[ "$n" -eq "$2" ] || fail "$1: $n difference lines, expected $2: $(head -c 600 "$T/out")"
}
# bad WHAT ARGS...: verify ARGS exits 1, ends with DIFFERENCES FOUND and one
# stderr line whose count equals the number of difference lines.
bad() {
	what=$1; shift
	expect_exit 1 "$WSHARD" verify "$@" || { cat "$T/out"; return 1; }
	one_line "$what"
	tail -n 1 "$T/out" | grep -q ': DIFFERENCES FOUND$' ||
		fail "$what: last line: $(tail -n 1 "$T/out")"
	n=$(($(grep -c . "$T/out") - 1))
	grep -qE "^wshard: $n differences? found in '" "$T/err" ||
		fail "$what: stderr '$(cat "$T/err")' does not count the $n difference lines"
}
# good WHAT ARGS...: verify ARGS exits 0 and the last line ends with ": OK".
good() {
	what=$1; shift
	expect_exit 0 "$WSHARD" verify "$@" || { cat "$T/out"; return 1; }
	tail -n 1 "$T/out" | grep -q ': OK$' || fail "$what: last line: $(tail -n 1 "$T/out")"
	[ "$(grep -c . "$T/out")" -eq 1 ] || fail "$what: more than one line: $(head -c 400 "$T/out")"
	[ -s "$T/err" ] && fail "$what: stderr not empty: $(head -c 400 "$T/err")"
}

# 9 (first): intact outputs.
for tp in 2 4; do
	good "intact tp $tp" "$T/good$tp"
	good "intact tp $tp --quick" --quick "$T/good$tp"
	grep -q '(quick: no source comparison): OK$' "$T/out" || fail "--quick: not marked: $(cat "$T/out")"
	good "intact tp $tp --rank 1" --rank 1 "$T/good$tp"
	grep -q '^verified 1 rank,' "$T/out" || fail "--rank 1: $(cat "$T/out")"
	good "intact tp $tp --source" --source "$T/src" "$T/good$tp"
	expect_exit 0 "$WSHARD" verify --json "$T/good$tp" &&
		[ "$(py checkjson "$T/out")" = "True 0" ] ||
		fail "--json tp $tp: $(head -c 400 "$T/out")"
done

# 1. a flipped byte inside a tensor's data (tp 2 rank 1, tp 4 rank 3).
fresh flip 2
T1=model.layers.1.mlp.down_proj.weight
py flip "$D/$F1" "$(py offset "$D/$F1" $T1 100)"
bad "flip tp 2" "$D"
has "flip tp 2" "rank 1: tensor '$T1': bytes differ from the source at byte offset 100 (element 50)"
has_re "flip tp 2" "^rank 1: file '$F1': checksum [0-9a-f]*, manifest says [0-9a-f]*$"
has_re "flip tp 2" "^rank 1: tensor '$T1': checksum [0-9a-f]*, manifest says [0-9a-f]*$"
nlines "flip tp 2" 3
bad "flip tp 2 --rank 1" --rank 1 "$D"
has "flip tp 2 --rank 1" "rank 1: tensor '$T1': bytes differ from the source at byte offset 100 (element 50)"
good "flip tp 2 --rank 0" --rank 0 "$D"
bad "flip tp 2 --quick" --quick "$D"
has_re "flip tp 2 --quick" "^rank 1: file '$F1': checksum "
has_re "flip tp 2 --quick" "^rank 1: tensor '$T1': checksum "
nlines "flip tp 2 --quick" 2
expect_exit 1 "$WSHARD" verify --json "$D" &&
	[ "$(py checkjson "$T/out")" = "False 3" ] || fail "flip --json: $(head -c 400 "$T/out")"
FLIP2=$D

fresh flip4 4
F3=model-rank-3-part-0.safetensors
py flip "$D/$F3" "$(py offset "$D/$F3" $QKV0 1234)"
bad "flip tp 4" "$D"
has "flip tp 4" "rank 3: tensor '$QKV0': bytes differ from the source at byte offset 1234 (element 617)"
has_re "flip tp 4" "^rank 3: file '$F3': checksum "
has_re "flip tp 4" "^rank 3: tensor '$QKV0': checksum "
nlines "flip tp 4" 3
# the comparison runs on every stream thread: the same report from 8 and 1
for n in 8 1; do
	export WSHARD_STREAM_THREADS=$n
	bad "flip tp 4, $n stream threads" "$D"
	has "flip tp 4, $n stream threads" "rank 3: tensor '$QKV0': bytes differ from the source at byte offset 1234 (element 617)"
	nlines "flip tp 4, $n stream threads" 3
done
unset WSHARD_STREAM_THREADS

# 2. header edits.  A renamed tensor (valid safetensors, one byte):
fresh hname 2
py hsub "$D/$F0" '"model.norm.weight"' '"model.norm.weighx"'
bad "header rename" "$D"
has_re "header rename" "^rank 0: file '$F0': checksum "
has "header rename" "rank 0: tensor 'model.norm.weight': missing from '$F0'"
has "header rename" "rank 0: tensor 'model.norm.weighx': extra in '$F0', not in the manifest"
nlines "header rename" 3
# a transposed shape (same byte count, still valid):
fresh hshape 2
py hsub "$D/$F1" '"shape":[64,32]' '"shape":[32,64]'
bad "header shape" "$D"
has_re "header shape" "^rank 1: file '$F1': checksum "
has "header shape" "rank 1: tensor 'model.layers.0.self_attn.o_proj.weight': shape [32, 64], manifest says [64, 32]"
nlines "header shape" 2
# one shape digit changed: the shape no longer fits data_offsets:
fresh hdigit 2
py hsub "$D/$F1" '"shape":[64,32]' '"shape":[64,33]'
bad "header digit" "$D"
has_re "header digit" "^rank 1: file '$F1': checksum "
has_re "header digit" "^rank 1: file '$F1': not valid safetensors: .*model.layers.0.self_attn.o_proj.weight"
nlines "header digit" 2
# not JSON any more:
fresh hjson 2
py hsub "$D/$F0" '{"__metadata__"' '["__metadata__"'
bad "header json" "$D"
has_re "header json" "^rank 0: file '$F0': checksum "
has_re "header json" "^rank 0: file '$F0': not valid safetensors: .*JSON"
nlines "header json" 2

# 3. a truncated rank file (inside the data, then inside the header).
fresh trunc 2
size=$(wc -c <"$D/$F1")
truncate -s 50000 "$D/$F1"
bad "truncated" "$D"
has "truncated" "rank 1: file '$F1': size 50000, manifest says $size"
has_re "truncated" "^rank 1: file '$F1': checksum "
has_re "truncated" "^rank 1: file '$F1': not valid safetensors: "
nlines "truncated" 3
truncate -s 100 "$D/$F1"
bad "truncated header" "$D"
has "truncated header" "rank 1: file '$F1': size 100, manifest says $size"
has_re "truncated header" "^rank 1: file '$F1': not valid safetensors: "
nlines "truncated header" 3

# 4. a deleted rank file.
fresh deleted 4
rm "$D/model-rank-2-part-0.safetensors"
bad "deleted" "$D"
has "deleted" "rank 2: file 'model-rank-2-part-0.safetensors': missing"
nlines "deleted" 1
bad "deleted --quick" --quick "$D"
has "deleted --quick" "rank 2: file 'model-rank-2-part-0.safetensors': missing"

# 5. an extra tensor in a rank file.
fresh extra 2
py addtensor "$D/$F1" model.extra.weight
bad "extra tensor" "$D"
has "extra tensor" "rank 1: tensor 'model.extra.weight': extra in '$F1', not in the manifest"
has_re "extra tensor" "^rank 1: file '$F1': size [0-9]*, manifest says $size$"
has_re "extra tensor" "^rank 1: file '$F1': checksum "
nlines "extra tensor" 3

# 6. the 8 k rows and the first 8 q rows of rank 1's qkv_proj swapped, the
# manifest updated to match: only the source comparison can tell.
fresh swap 2
py swaprows "$D/$F1" $QKV0 0 32 8 "$D/wshard.json" 1
good "qk swap --quick" --quick "$D"
bad "qk swap" "$D"
has "qk swap" "rank 1: tensor '$QKV0': bytes differ from the source at byte offset 0 (element 0)"
nlines "qk swap" 1
good "qk swap --rank 0" --rank 0 "$D"

# 7. the wrong source: same shapes, other seed.
bad "wrong source" --source "$T/other" "$T/good2"
has_re "wrong source" "^rank 0: tensor '$QKV0': bytes differ from the source at byte offset "
has_re "wrong source" "^rank 1: tensor 'lm_head.weight': bytes differ from the source at byte offset 0 "
grep -v "bytes differ from the source" "$T/out" | grep -q '^rank' &&
	fail "wrong source: other kinds of lines: $(grep -v 'bytes differ' "$T/out" | head -5)"
grep -q "_scale'" "$T/out" && fail "wrong source: a constant scale reported as different"

# 8. the manifest's tp edited.
fresh tp 2
py setjson "$D/wshard.json" tp 4
bad "tp edited" "$D"
has "tp edited" "manifest: tp 4 but 2 ranks listed"
fresh tp1 4
py setjson "$D/wshard.json" tp 2
bad "tp edited 4->2" "$D"
has "tp edited 4->2" "manifest: tp 2 but 4 ranks listed"

bad "tp edited --quick" --quick "$T/tp"
has "tp edited --quick" "manifest: tp 4 but 2 ranks listed"

# 8b. a flipped byte with the file checksum rewritten to match: the stale
# per-tensor checksum still tells, without the source.
fresh tsum 2
py flip "$D/$F1" "$(py offset "$D/$F1" $T1 10)"
py filesum "$D/$F1" "$D/wshard.json" 1
bad "tensor checksum --quick" --quick "$D"
has_re "tensor checksum --quick" "^rank 1: tensor '$T1': checksum [0-9a-f]*, manifest says [0-9a-f]*$"
nlines "tensor checksum --quick" 1

# 9 (continued): under mpirun, only process 0 prints.
if command -v mpirun >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then
	expect_exit 0 run_mpi 2 "$WSHARD" verify "$T/good4" &&
		{ tail -n 1 "$T/out" | grep -q '^verified 4 ranks, .*: OK$' ||
			fail "mpirun intact: $(head -c 400 "$T/out")"; }
	[ "$(grep -c . "$T/out")" -eq 1 ] || fail "mpirun intact: $(head -c 400 "$T/out")"
	expect_exit 1 run_mpi 2 "$WSHARD" verify "$FLIP2"
	n=$(grep -cxF "rank 1: tensor '$T1': bytes differ from the source at byte offset 100 (element 50)" "$T/out")
	[ "$n" -eq 1 ] || fail "mpirun flip: the line printed $n times: $(head -c 600 "$T/out")"
	nlines "mpirun flip" 3
	[ "$(grep -c 'DIFFERENCES FOUND' "$T/out")" -eq 1 ] || fail "mpirun flip: $(cat "$T/out")"
	[ "$(grep -c '^wshard: ' "$T/err")" -eq 1 ] ||
		fail "mpirun flip: stderr: $(head -c 400 "$T/err")"
	expect_exit 1 run_mpi 2 "$WSHARD" verify "$T/flip4"
	nlines "mpirun flip tp 4" 3
	has "mpirun flip tp 4" "rank 3: tensor '$QKV0': bytes differ from the source at byte offset 1234 (element 617)"
else
	echo "note: no mpirun or timeout, mpirun cases skipped"
fi

# 10. unreadable inputs and usage errors.
fresh nomanifest 2
rm "$D/wshard.json"
expect_exit 3 "$WSHARD" verify "$D" && one_line "no wshard.json"
grep -q 'wshard.json' "$T/err" || fail "no wshard.json: $(cat "$T/err")"
fresh version 2
py setjson "$D/wshard.json" format_version 99
expect_exit 3 "$WSHARD" verify "$D" && one_line "format_version 99"
grep -q 'format_version 99' "$T/err" || fail "format_version 99: $(cat "$T/err")"
# format_version 1 (written before stacked experts' runs) is still read
py setjson "$D/wshard.json" format_version 1
expect_exit 0 "$WSHARD" verify "$D"
expect_exit 0 "$WSHARD" inspect "$D"
py setjson "$D/wshard.json" format_version 0
expect_exit 3 "$WSHARD" verify "$D" && one_line "format_version 0"
grep -q 'format_version 0 is not one this wshard knows (1 to 2)' "$T/err" ||
	fail "format_version 0: $(cat "$T/err")"
expect_exit 3 "$WSHARD" verify --source "$T/nonexistent" "$T/good2" && one_line "missing --source"
grep -q 'nonexistent' "$T/err" || fail "missing --source: $(cat "$T/err")"
expect_exit 2 "$WSHARD" verify --rank 9 "$T/good2" && one_line "--rank 9"
expect_exit 2 "$WSHARD" verify && one_line "no OUT"
expect_exit 2 "$WSHARD" verify --bogus "$T/good2" && one_line "unknown option"

# The source was never modified.
(cd "$T" && sha256sum src/* other/*) >"$T/sums.after"
cmp -s "$T/sums.before" "$T/sums.after" || fail "verify modified a source directory"
# nor was the good output.
good "intact tp 2 at the end" "$T/good2"

finish
