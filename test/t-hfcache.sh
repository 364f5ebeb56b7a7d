#!/bin/sh
# A repo id as the source, found in the local HuggingFace hub cache.
#  1. The caches are built with huggingface_hub's own layout functions
#     (repo_folder_name, _create_symlink into blobs/ named by sha256 or git
#     hash, _cache_commit_hash_for_specific_revision for refs/) and checked
#     with the library: scan_cache_dir() lists the repo with its revisions
#     and refs, snapshot_download(repo_id, local_files_only=True) returns
#     the snapshot that wshard uses.
#  2. convert acme/tiny (with HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and
#     HOME alone: where huggingface_hub's constants say the cache is),
#     --revision with a tag and with a commit hash: the same files, byte
#     for byte, as converting the snapshot's plain folder; the manifest
#     records the path as given, the repo id, the revision and the commit;
#     inspect shows them (of the checkpoint and of the output).
#  3. verify finds the source again by repo id at the recorded commit
#     (after refs/main has moved on), else at the recorded snapshot path;
#     --source takes a repo id.
#  4. A local folder of the same name wins over the cache.
#  5. Refused, exit 6, one stderr line saying where wshard looked and that
#     `hf download` fetches it, nothing written: an unknown repo id, an
#     unknown revision (branch and hash), a ref naming a missing snapshot,
#     a snapshot lacking a shard or holding config.json alone; verify
#     when the cache lost the source.
#     Exit 2: --revision with a local path, or a malformed revision.
# shellcheck disable=SC1091,SC2086
. "$(dirname "$0")/lib.sh"

"$PYTHON" -c 'import huggingface_hub' 2>/dev/null || {
	echo "skipped: $PYTHON lacks huggingface_hub"; exit 77; }

S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 250 --shards 2"
C="convert -q --validate host --tp 2"
H=$T/h.py
A=1111111111111111111111111111111111111111
B=2222222222222222222222222222222222222222
X=3333333333333333333333333333333333333333

cat >"$H" <<'EOF'
import hashlib, json, os, sys

def add(cache, repo, src, commit, *refs):
    """SRC's files as snapshot COMMIT of REPO in CACHE, as hf_hub_download
    leaves them: blobs named by their etag, links from the snapshot."""
    from huggingface_hub.file_download import (
        repo_folder_name, _create_symlink, _cache_commit_hash_for_specific_revision)
    from huggingface_hub.utils.sha import git_hash
    storage = os.path.join(cache, repo_folder_name(repo_id=repo, repo_type="model"))
    os.makedirs(os.path.join(storage, "blobs"), exist_ok=True)
    snap = os.path.join(storage, "snapshots", commit)
    os.makedirs(snap, exist_ok=True)
    for f in sorted(os.listdir(src)):
        data = open(os.path.join(src, f), "rb").read()
        # LFS files (the weights) are stored under their sha256, others
        # under their git blob hash, as the Hub's etags name them
        etag = hashlib.sha256(data).hexdigest() if f.endswith(".safetensors") else git_hash(data)
        blob = os.path.join(storage, "blobs", etag)
        with open(blob, "wb") as o:
            o.write(data)
        _create_symlink(blob, os.path.join(snap, f), new_blob=True)
    for r in refs:
        _cache_commit_hash_for_specific_revision(storage, r, commit)

def check(cache, repo, revs):
    """huggingface_hub sees REPO in CACHE with the revisions REVS
    (commit=ref,ref...) and snapshot_download finds each."""
    from huggingface_hub import scan_cache_dir, snapshot_download
    info = scan_cache_dir(cache)
    if info.warnings:
        sys.exit("scan_cache_dir warnings: %s" % info.warnings)
    r = [x for x in info.repos if x.repo_id == repo]
    if len(r) != 1 or r[0].repo_type != "model":
        sys.exit("scan_cache_dir does not list %s: %s" % (repo, [x.repo_id for x in info.repos]))
    want = {}
    for x in revs.split():
        c, _, names = x.partition("=")
        want[c] = set(names.split(",")) - {""}
    got = {v.commit_hash: set(v.refs) for v in r[0].revisions}
    if got != want:
        sys.exit("scan_cache_dir revisions %s, expected %s" % (got, want))
    for c, names in want.items():
        for rev in [c] + sorted(names):
            p = snapshot_download(repo, revision=rev, cache_dir=cache, local_files_only=True)
            if os.path.realpath(p) != os.path.realpath(
                    os.path.join(r[0].repo_path, "snapshots", c)):
                sys.exit("snapshot_download(%s, revision=%s) gave %s" % (repo, rev, p))

def where():
    """The hub cache huggingface_hub uses in this environment."""
    from huggingface_hub import constants
    print(constants.HF_HUB_CACHE)

def snapshot(repo, rev):
    """The folder snapshot_download(local_files_only=True) returns here."""
    from huggingface_hub import snapshot_download
    print(os.path.realpath(snapshot_download(repo, revision=rev, local_files_only=True)))

def source(path, *keys):
    """The manifest's source.KEY values, one a line ('-' when absent)."""
    s = json.load(open(path))["source"]
    for k in keys:
        print(s.get(k, "-"))

def mancmp(a, b):
    """Manifests A and B equal but for "source"."""
    x, y = json.load(open(a)), json.load(open(b))
    x.pop("source"); y.pop("source")
    if x != y:
        sys.exit("differ in: " + ", ".join(sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))))

{"add": add, "check": check, "where": where, "snapshot": snapshot,
 "source": source, "mancmp": mancmp}[sys.argv[1]](*sys.argv[2:])
EOF

# Run wshard and Python with only the cache variables given.
clean() { env -u HF_HUB_CACHE -u HUGGINGFACE_HUB_CACHE -u HF_HOME -u XDG_CACHE_HOME "$@"; }

gen "$T/src" $S --seed 3
gen "$T/src2" $S --seed 4
"$WSHARD" $C "$T/src" "$T/plain" 2>"$T/err" || fail "plain convert failed: $(head -c 400 "$T/err")"
"$WSHARD" $C "$T/src2" "$T/plain2" 2>"$T/err" || fail "plain convert failed: $(head -c 400 "$T/err")"
ls "$T/plain" >"$T/plain.list"

# same_output NAME OUT PLAIN: OUT holds PLAIN's files byte for byte, and
# the same manifest but its "source".
same_output() {
	ls "$2" >"$T/out.list"
	cmp -s "$T/plain.list" "$T/out.list" || fail "$1: files $(tr '\n' ' ' <"$T/out.list")"
	while read -r f; do
		[ "$f" = wshard.json ] || cmp -s "$3/$f" "$2/$f" ||
			fail "$1: '$f' differs from the plain folder's output"
	done <"$T/plain.list"
	"$PYTHON" "$H" mancmp "$3/wshard.json" "$2/wshard.json" >"$T/mc" 2>&1 ||
		fail "$1: manifest $(cat "$T/mc")"
}

# source_is NAME OUT PATH REPO REVISION COMMIT: the manifest's source.
source_is() {
	n=$1 out=$2; shift 2
	got=$("$PYTHON" "$H" source "$out/wshard.json" path repo_id revision commit | tr '\n' ' ')
	[ "$got" = "$* " ] || fail "$n: manifest source $got, expected $*"
}

# ---- 1. caches in huggingface_hub's layout --------------------------------

hub=$T/hub
"$PYTHON" "$H" add "$hub" acme/tiny "$T/src" $A main || fail "cannot build the cache"
"$PYTHON" "$H" add "$hub" acme/tiny "$T/src2" $B v2 || fail "cannot build the cache"
"$PYTHON" "$H" check "$hub" acme/tiny "$A=main $B=v2" || fail "huggingface_hub: the cache is not what it should be"
[ -L "$hub/models--acme--tiny/snapshots/$A/config.json" ] || fail "snapshot files are not links"
snapA=$(cd "$hub/models--acme--tiny/snapshots/$A" && pwd -P)
[ "$(clean HF_HUB_CACHE="$hub" "$PYTHON" "$H" snapshot acme/tiny main)" = "$snapA" ] ||
	fail "huggingface_hub does not find acme/tiny main at '$snapA'"

# The same cache, found through each variable, where huggingface_hub looks.
mkdir -p "$T/home/hub" "$T/xdg/huggingface" "$T/user/.cache/huggingface"
cp -a "$hub/." "$T/home/hub/"
cp -a "$hub" "$T/xdg/huggingface/hub"
cp -a "$hub" "$T/user/.cache/huggingface/hub"
for v in "HF_HOME=$T/home" "XDG_CACHE_HOME=$T/xdg" "HOME=$T/user"; do
	w=$(clean "$v" "$PYTHON" "$H" where)
	case $v in
	HF_HOME=*) want=$T/home/hub ;;
	XDG*) want=$T/xdg/huggingface/hub ;;
	*) want=$T/user/.cache/huggingface/hub ;;
	esac
	[ "$w" = "$want" ] || fail "$v: huggingface_hub's cache is '$w', expected '$want'"
done

# ---- 2. convert by repo id ----------------------------------------------

o=$T/by-id
expect_exit 0 clean HF_HUB_CACHE="$hub" "$WSHARD" $C acme/tiny "$o" &&
	same_output "HF_HUB_CACHE" "$o" "$T/plain"
source_is "HF_HUB_CACHE" "$o" acme/tiny acme/tiny main $A
[ "$("$PYTHON" "$H" source "$o/wshard.json" realpath)" = "$snapA" ] ||
	fail "manifest realpath is not the snapshot '$snapA'"
expect_exit 0 clean HUGGINGFACE_HUB_CACHE="$hub" "$WSHARD" $C acme/tiny "$T/legacy" &&
	same_output "HUGGINGFACE_HUB_CACHE" "$T/legacy" "$T/plain"
expect_exit 0 clean HF_HUB_CACHE="$hub" HF_HOME="$T/nowhere" "$WSHARD" $C acme/tiny "$T/first" &&
	same_output "HF_HUB_CACHE before HF_HOME" "$T/first" "$T/plain"
for v in "HF_HOME=$T/home" "XDG_CACHE_HOME=$T/xdg" "HOME=$T/user"; do
	n=${v%%=*}
	expect_exit 0 clean "$v" "$WSHARD" $C acme/tiny "$T/by-$n" &&
		same_output "$n" "$T/by-$n" "$T/plain"
done

for rev in v2 $B; do
	o=$T/rev-$rev
	expect_exit 0 clean HF_HUB_CACHE="$hub" "$WSHARD" $C --revision $rev acme/tiny "$o" &&
		same_output "--revision $rev" "$o" "$T/plain2"
	source_is "--revision $rev" "$o" acme/tiny acme/tiny $rev $B
done
expect_exit 0 clean HF_HUB_CACHE="$hub" "$WSHARD" $C --revision main acme/tiny "$T/rev-main" &&
	same_output "--revision main" "$T/rev-main" "$T/plain"

# inspect: the checkpoint by repo id lists what the folder lists, and names
# the revision; the output names its source's repo id and commit.
"$WSHARD" inspect "$T/src2" >"$T/i-dir" 2>&1
if expect_exit 0 clean HF_HUB_CACHE="$hub" "$WSHARD" inspect --revision v2 acme/tiny; then
	grep -v '^repo: \|^snapshot: ' "$T/out" | cmp -s "$T/i-dir" - ||
		fail "inspect acme/tiny differs from inspect of the folder"
	grep -qx "repo: acme/tiny  revision: v2  commit: $B" "$T/out" ||
		fail "inspect names no revision: $(grep '^repo' "$T/out")"
fi
expect_exit 0 clean HF_HUB_CACHE="$hub" "$WSHARD" inspect --json acme/tiny &&
	{ "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["repo_id"] == "acme/tiny" and d["revision"] == "main" and d["commit"] == sys.argv[2] and d["path"] == "acme/tiny"))' "$T/out" $A ||
		fail "inspect --json: $(head -c 300 "$T/out")"; }
expect_exit 0 "$WSHARD" inspect "$T/rev-v2" &&
	{ grep -qx "source repo: acme/tiny  revision: v2  commit: $B" "$T/out" ||
		fail "inspect of the output: $(head -c 300 "$T/out")"; }

# ---- 3. verify -------------------------------------------------------------

expect_exit 0 clean HF_HUB_CACHE="$hub" "$WSHARD" verify "$T/by-id"
expect_exit 0 clean HF_HUB_CACHE="$hub" "$WSHARD" verify "$T/rev-v2"
expect_exit 0 clean HF_HUB_CACHE="$hub" "$WSHARD" verify --source acme/tiny "$T/rev-v2"
# main moves on to B: the output made from A still verifies (by commit)
printf %s $B >"$hub/models--acme--tiny/refs/main"
expect_exit 0 clean HF_HUB_CACHE="$hub" "$WSHARD" verify "$T/by-id"
# this process's cache does not hold it: the snapshot path recorded does
expect_exit 0 clean HF_HUB_CACHE="$T/empty" "$WSHARD" verify "$T/by-id"
# ... the differences are found all the same
cp -a "$T/by-id" "$T/changed"
printf 'x' | dd of="$T/changed/model-rank-1-part-0.safetensors" bs=1 seek=2000 conv=notrunc 2>/dev/null
expect_exit 1 clean HF_HUB_CACHE="$hub" "$WSHARD" verify "$T/changed"

# ---- 4. a local folder of the same name wins --------------------------------

mkdir -p "$T/cwd/acme"
cp -r "$T/src2" "$T/cwd/acme/tiny"
if (cd "$T/cwd" && clean HF_HUB_CACHE="$hub" "$WSHARD" $C acme/tiny "$T/local") 2>"$T/err"; then
	same_output "local folder" "$T/local" "$T/plain2"
	source_is "local folder" "$T/local" acme/tiny - - -
else
	fail "local folder acme/tiny: $(head -c 400 "$T/err")"
fi

# ---- 5. refused ------------------------------------------------------------

# a repo whose download stopped before its second shard
mkdir "$T/part"
cp "$T/src"/* "$T/part/"
rm "$T/part/model-00002-of-00002.safetensors"
"$PYTHON" "$H" add "$hub" acme/broken "$T/part" $X main || fail "cannot build acme/broken"

# refused NAME CODE WORDS ARGS...: wshard ARGS exits CODE with one stderr
# line holding each of the |-separated WORDS; OUT ($T/bad) is not created.
refused() {
	n=$1 code=$2 words=$3; shift 3
	rm -rf "$T/bad"
	if expect_exit "$code" clean HF_HUB_CACHE="$hub" "$@"; then
		one_line "$n"
		echo "$words" | tr '|' '\n' | while read -r w; do
			grep -qF -- "$w" "$T/err" || echo "$w"
		done >"$T/miss"
		[ -s "$T/miss" ] && fail "$n: stderr lacks $(tr '\n' ' ' <"$T/miss"): $(cat "$T/err")"
	fi
	[ -e "$T/bad" ] && fail "$n: '$T/bad' was created"
}
refused "unknown repo" 6 "'acme/nope'|$hub/models--acme--nope|hf download acme/nope" \
	"$WSHARD" $C acme/nope "$T/bad"
refused "unknown branch" 6 "'nope'|$hub/models--acme--tiny/refs/nope|hf download acme/tiny --revision nope" \
	"$WSHARD" $C --revision nope acme/tiny "$T/bad"
refused "unknown commit" 6 "$hub/models--acme--tiny/snapshots/$X|hf download acme/tiny --revision $X" \
	"$WSHARD" $C --revision $X acme/tiny "$T/bad"
refused "missing shard" 6 "acme/broken|$X|'model-00002-of-00002.safetensors' is missing|hf download acme/broken" \
	"$WSHARD" $C acme/broken "$T/bad"
# a repo of which only config.json was fetched (as AutoConfig does)
mkdir "$T/cfg"
cp "$T/src/config.json" "$T/cfg/"
"$PYTHON" "$H" add "$hub" acme/config-only "$T/cfg" $X main || fail "cannot build acme/config-only"
refused "config only" 6 "acme/config-only|neither|hf download acme/config-only" \
	"$WSHARD" $C acme/config-only "$T/bad"
printf %s $X >"$hub/models--acme--tiny/refs/gone"
refused "ref without snapshot" 6 "'gone'|$X|$hub/models--acme--tiny/snapshots/$X|hf download acme/tiny --revision gone" \
	"$WSHARD" $C --revision gone acme/tiny "$T/bad"
refused "inspect unknown repo" 6 "hf download acme/nope" "$WSHARD" inspect acme/nope
refused "--revision with a path" 2 "--revision" "$WSHARD" $C --revision main "$T/src" "$T/bad"
refused "--revision with no repo id" 2 "--revision" "$WSHARD" $C --revision main a/b/c "$T/bad"
refused "--revision .." 2 "--revision" "$WSHARD" $C --revision ../../x acme/tiny "$T/bad"
refused "not a repo id" 3 "cannot open 'no-such-dir'" "$WSHARD" $C no-such-dir "$T/bad"
# verify once the cache and the snapshot are both gone
mv "$hub/models--acme--tiny" "$T/moved"
refused "verify, source gone" 6 "acme/tiny|hf download acme/tiny" "$WSHARD" verify "$T/by-id"
mv "$T/moved" "$hub/models--acme--tiny"

finish
