#!/bin/sh
# wshard inspect: every corrupt safetensors file and every bad checkpoint
# directory is refused with exit 3 and exactly one stderr line naming what
# is wrong (never a crash); a generated checkpoint lists exactly the tensors
# its safetensors headers hold (read here in Python), with a --json summary
# that adds up and a --filter that selects; an unused consolidated.safetensors
# is reported; on a converted output, the ranks and one rank's tensors.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

# refused WHAT CODE ARGS...: wshard ARGS exits CODE (a signal is reported as
# a crash), one line on stderr, nothing on stdout.  Returns 1 on a wrong code.
refused() {
	what=$1 code=$2; shift 2
	"$WSHARD" "$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -ge 128 ]; then
		fail "$what: wshard $* crashed (exit $got): $(head -c 400 "$T/err")"
		return 1
	fi
	if [ "$got" -ne "$code" ]; then
		fail "$what: wshard $* exited $got, expected $code: $(head -c 400 "$T/err")"
		return 1
	fi
	one_line "$what"
	[ -s "$T/out" ] && fail "$what: output on stdout: $(head -c 200 "$T/out")"
	return 0
}

# Python helpers reading safetensors headers: every line "name dtype bytes file"
# for the files given, sorted by name.
cat >"$T/headers.py" <<'EOF'
import json, os, struct, sys
rows = []
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    for name, e in h.items():
        if name == "__metadata__":
            continue
        b, e2 = e["data_offsets"]
        rows.append((name, e["dtype"], e2 - b, os.path.basename(path)))
for r in sorted(rows):
    print("%s %s %d %s" % r)
EOF
headers() { "$PYTHON" "$T/headers.py" "$@"; }

# ------------------------------------------------------------------ corrupt

ncorrupt=0
for f in "$ROOT"/fixtures/corrupt/*.safetensors; do
	[ -e "$f" ] || continue
	ncorrupt=$((ncorrupt + 1))
	name=$(basename "$f")
	if refused "corrupt $name" 3 inspect "$f"; then
		err_has "corrupt $name" "'$f'"
	fi
	refused "corrupt $name --json" 3 inspect --json "$f"
done
[ "$ncorrupt" -ge 40 ] || fail "only $ncorrupt corrupt fixtures found under $ROOT/fixtures/corrupt"

# A file named relative to the working directory is named as it was given.
if (cd "$ROOT/fixtures/corrupt" && refused "relative name" 3 inspect truncated.safetensors); then
	err_has "relative name" "truncated.safetensors"
fi
refused "missing path" 3 inspect "$T/no-such-file.safetensors" &&
	err_has "missing path" "$T/no-such-file.safetensors"

# --------------------------------------------------------------- bad-ckpt

# expected CASE: a string the message for fixtures/bad-ckpt/CASE must hold.
expected() {
	case $1 in
	absolute-path) echo "'/tmp/model-00002-of-00002.safetensors'" ;;
	corrupt-shard) echo "model-00002-of-00002.safetensors" ;;
	dotdot-path) echo "'../outside.safetensors'" ;;
	duplicate-index-key) echo "model.safetensors.index.json" ;;
	invalid-index-json) echo "model.safetensors.index.json" ;;
	missing-file) echo "'model-00002-of-00002.safetensors'" ;;
	missing-tensor) echo "'lm_head.weight'" ;;
	no-weights) echo "holds neither" ;;
	symlink-outside) echo "a link that leaves the directory" ;;
	tensor-in-two-files) echo "'model.norm.weight'" ;;
	unmapped-tensor) echo "'model.stray.weight'" ;;
	weight-map-empty) echo "weight_map is empty" ;;
	weight-map-not-object) echo "weight_map" ;;
	weight-map-value-not-string) echo "'model.norm.weight'" ;;
	wrong-file) echo "'lm_head.weight'" ;;
	*) echo "" ;;
	esac
}
nbad=0
for d in "$ROOT"/fixtures/bad-ckpt/*/; do
	[ -d "$d" ] || continue
	d=${d%/}
	c=$(basename "$d")
	nbad=$((nbad + 1))
	want=$(expected "$c")
	[ -n "$want" ] || { fail "bad-ckpt $c: no expected message in t-inspect.sh"; continue; }
	if refused "bad-ckpt $c" 3 inspect "$d"; then
		err_has "bad-ckpt $c" "$want"
		err_has "bad-ckpt $c" "$d"
	fi
done
[ "$nbad" -ge 10 ] || fail "only $nbad bad checkpoints found under $ROOT/fixtures/bad-ckpt"

# ---------------------------------------------------------- a good checkpoint

SRC=$T/src
gen "$SRC" --arch qwen2 --layers 2 --hidden 64 --heads 8 --kv-heads 2 \
	--intermediate 128 --vocab 250 --shards 3 --norm-dtype F32
headers "$SRC"/model-*.safetensors >"$T/want"
[ "$(wc -l <"$T/want")" -eq 27 ] || fail "generator wrote $(wc -l <"$T/want") tensors, expected 27"

if expect_exit 0 "$WSHARD" inspect "$SRC"; then
	[ -s "$T/err" ] && fail "inspect: stderr not empty: $(head -c 200 "$T/err")"
	# The table runs up to the first empty line: name dtype [shape] bytes file.
	sed '/^$/,$d' "$T/out" | awk '{ print $1, $2, $(NF-1), $NF }' | LC_ALL=C sort >"$T/got"
	LC_ALL=C sort "$T/want" >"$T/want.s"
	cmp -s "$T/got" "$T/want.s" || {
		fail "inspect: tensor table differs from the headers:"
		diff "$T/want.s" "$T/got" | head -10 | sed 's/^/    /'
	}
	grep -qx "tensors: 27" "$T/out" || fail "inspect: no 'tensors: 27' line"
	grep -qx "files: 3" "$T/out" || fail "inspect: no 'files: 3' line"
	grep -q "^architecture: Qwen2ForCausalLM" "$T/out" || fail "inspect: architecture not shown"
	grep -q "^ignored:" "$T/out" && fail "inspect: reports an ignored file where there is none"
fi

# --json: valid, with counts and sums that agree with each other and the headers.
cat >"$T/check-json.py" <<'EOF'
import collections, json, sys
doc = json.load(open(sys.argv[1]))
want = [l.split() for l in open(sys.argv[2])]
prefix = sys.argv[3] if len(sys.argv) > 3 else ""
want = [w for w in want if w[0].startswith(prefix)]
errs = []
t = doc["tensors"]
if doc["tensor_count"] != len(t) or len(t) != len(want):
    errs.append("tensor_count %s, %d listed, %d expected" % (doc["tensor_count"], len(t), len(want)))
if sorted(x["name"] for x in t) != sorted(w[0] for w in want):
    errs.append("names differ from the headers")
total = sum(int(w[2]) for w in want)
if doc["total_bytes"] != total or sum(x["bytes"] for x in t) != total:
    errs.append("total_bytes %s, tensors sum %d, headers %d"
                % (doc["total_bytes"], sum(x["bytes"] for x in t), total))
per = collections.Counter()
for w in want:
    per[w[1]] += int(w[2])
if doc["bytes_per_dtype"] != dict(per) or sum(doc["bytes_per_dtype"].values()) != doc["total_bytes"]:
    errs.append("bytes_per_dtype %s, expected %s" % (doc["bytes_per_dtype"], dict(per)))
for x in t:
    w = [w for w in want if w[0] == x["name"]]
    if w and (x["dtype"] != w[0][1] or x["bytes"] != int(w[0][2]) or x["file"] != w[0][3]):
        errs.append("%s: %s, expected %s" % (x["name"], x, w[0]))
        break
print("\n".join(errs))
sys.exit(1 if errs else 0)
EOF
if expect_exit 0 "$WSHARD" inspect --json "$SRC"; then
	"$PYTHON" "$T/check-json.py" "$T/out" "$T/want" >"$T/jerr" 2>&1 ||
		fail "inspect --json: $(head -c 600 "$T/jerr")"
	"$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["file_count"] == 3 and d["ignored_files"] == [] and d["architecture"] == "Qwen2ForCausalLM"))' "$T/out" ||
		fail "inspect --json: file_count, ignored_files or architecture wrong"
fi

# --filter: only the tensors of layer 0.
if expect_exit 0 "$WSHARD" inspect --filter 'model.layers.0.*' "$SRC"; then
	sed '/^$/,$d' "$T/out" | awk '{ print $1 }' | LC_ALL=C sort >"$T/got"
	grep '^model\.layers\.0\.' "$T/want" | awk '{ print $1 }' | LC_ALL=C sort >"$T/want0"
	[ -s "$T/want0" ] || fail "no layer-0 tensors in the generated checkpoint"
	cmp -s "$T/got" "$T/want0" || fail "inspect --filter: $(diff "$T/want0" "$T/got" | head -5 | tr '\n' ' ')"
	grep -qx "tensors: $(wc -l <"$T/want0")" "$T/out" || fail "inspect --filter: wrong tensor count line"
fi
if expect_exit 0 "$WSHARD" inspect --json --filter 'model.layers.0.*' "$SRC"; then
	"$PYTHON" "$T/check-json.py" "$T/out" "$T/want" model.layers.0. >"$T/jerr" 2>&1 ||
		fail "inspect --json --filter: $(head -c 600 "$T/jerr")"
fi
if expect_exit 0 "$WSHARD" inspect --filter 'no.such.*' "$SRC"; then
	grep -qx "tensors: 0" "$T/out" || fail "inspect --filter matching nothing: no 'tensors: 0'"
fi

# A lone shard: its own tensors only.
f1=$(ls "$SRC"/model-00001-of-00003.safetensors)
headers "$f1" >"$T/want1"
if expect_exit 0 "$WSHARD" inspect "$f1"; then
	sed '/^$/,$d' "$T/out" | awk '{ print $1 }' | LC_ALL=C sort >"$T/got"
	awk '{ print $1 }' "$T/want1" | LC_ALL=C sort | cmp -s - "$T/got" ||
		fail "inspect of a lone shard lists other tensors"
fi

# An unused consolidated.safetensors: reported, its tensors not listed.
IGN=$T/with-consolidated
cp -R "$SRC" "$IGN"
cp "$ROOT/fixtures/good/all-dtypes.safetensors" "$IGN/consolidated.safetensors"
if expect_exit 0 "$WSHARD" inspect "$IGN"; then
	grep -q "^ignored: consolidated.safetensors" "$T/out" ||
		fail "inspect: the unused consolidated.safetensors is not reported"
	grep -q "^t_bool" "$T/out" && fail "inspect: lists the tensors of the ignored file"
	grep -qx "tensors: 27" "$T/out" || fail "inspect: the ignored file changes the count"
fi
if expect_exit 0 "$WSHARD" inspect --json "$IGN"; then
	"$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["ignored_files"] != ["consolidated.safetensors"])' "$T/out" ||
		fail "inspect --json: ignored_files is not [consolidated.safetensors]"
fi

# ------------------------------------------------------------ usage errors

refused "no PATH" 2 inspect
refused "two PATHs" 2 inspect "$SRC" "$SRC"
refused "unknown option" 2 inspect --frobnicate "$SRC"
refused "--rank on a checkpoint" 2 inspect --rank 0 "$SRC"
refused "--rank not a number" 2 inspect --rank x "$SRC"
refused "--filter without a value" 2 inspect "$SRC" --filter
if expect_exit 0 "$WSHARD" inspect --help; then
	grep -q "usage: wshard inspect" "$T/out" || fail "inspect --help: no usage on stdout"
fi

# --------------------------------------------------------- converted output

OUT=$T/out-tp2
if "$WSHARD" convert -q --tp 2 "$SRC" "$OUT" >"$T/cout" 2>"$T/cerr"; then
	[ -s "$T/cout" ] && fail "convert -q printed on stdout: $(head -c 200 "$T/cout")"
	if expect_exit 0 "$WSHARD" inspect "$OUT"; then
		grep -q "^rank 0: " "$T/out" || fail "inspect OUT: no rank 0"
		grep -q "^rank 1: " "$T/out" || fail "inspect OUT: no rank 1"
		grep -q "^rank 2: " "$T/out" && fail "inspect OUT: a rank 2 at tp 2"
		grep -q "tp: 2" "$T/out" || fail "inspect OUT: tp 2 not shown"
		grep -q "model-rank-1-part-0.safetensors" "$T/out" || fail "inspect OUT: rank 1's file not listed"
	fi
	headers "$OUT"/model-rank-1-part-*.safetensors >"$T/want-r1"
	if expect_exit 0 "$WSHARD" inspect --rank 1 "$OUT"; then
		grep -E -v '^(wshard output|architecture|source|rank [0-9]+):|^  ' "$T/out" |
			awk '{ print $1, $2, $(NF-1), $NF }' | LC_ALL=C sort >"$T/got"
		LC_ALL=C sort "$T/want-r1" | cmp -s - "$T/got" || {
			fail "inspect --rank 1: tensors differ from rank 1's files:"
			LC_ALL=C sort "$T/want-r1" | diff - "$T/got" | head -10 | sed 's/^/    /'
		}
		grep -q "^rank 1: $(wc -l <"$T/want-r1") tensors" "$T/out" ||
			fail "inspect --rank 1: wrong tensor count in '$(grep '^rank 1' "$T/out")'"
		grep -q "^rank 0: " "$T/out" && fail "inspect --rank 1 shows rank 0"
	fi
	if expect_exit 0 "$WSHARD" inspect --rank 1 --filter 'model.layers.0.*' "$OUT"; then
		n=$(grep -c '^model\.' "$T/out")
		m=$(grep -c '^model\.layers\.0\.' "$T/out")
		if [ "$n" -eq 0 ] || [ "$n" -ne "$m" ]; then
			fail "inspect --rank 1 --filter: $n tensors listed, $m of layer 0"
		fi
	fi
	if expect_exit 0 "$WSHARD" inspect --json "$OUT"; then
		"$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["tp"] == 2 and len(d["ranks"]) == 2))' "$T/out" ||
			fail "inspect --json OUT: not tp 2 with 2 ranks"
	fi
	if refused "--rank 5" 2 inspect --rank 5 "$OUT"; then
		err_has "--rank 5" "rank 5"
	fi
	refused "--rank 2" 2 inspect --rank 2 "$OUT"
else
	fail "convert -q --tp 2 failed: $(head -c 400 "$T/cerr")"
fi

echo "$ncorrupt corrupt files and $nbad bad checkpoints checked"
finish
