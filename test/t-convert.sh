#!/bin/sh
# Converts generated checkpoints of every supported architecture at tp 1, 2,
# 4 and 8 (and special cases: sharded sources, tied embeddings, inv_freq, a
# tied checkpoint still carrying lm_head.weight, F16/F32/BF16/FP8/F6/F4,
# no attention scales, several parts per rank, padding-only vocab shards,
# tensors bigger than the copy buffer) and compares
# each output with test/reference.py, an independent implementation of
# OUTPUT-CONTRACT.md.  Also checks that converting twice is byte-identical,
# and that --dry-run writes nothing and prints the tensors convert writes
# (and, with --archive, each rank's archive).
# $S holds several generator options: split on purpose.
# shellcheck disable=SC2086,SC1091
. "$(dirname "$0")/lib.sh"

need_reference

# conv NAME SRC TP [OPTIONS...]: see convert_checked in lib.sh.
conv() { convert_checked "$@"; }

# Default shape: 8 heads, 2 kv heads (tp 4 and 8 replicate kv heads),
# hidden 64, intermediate 128, vocab 250 (padded to 256).
S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 250"

# arch, generator extras (dtypes and shard counts vary across architectures)
while read -r arch extra; do
	[ -n "$arch" ] || continue
	gen "$T/src-$arch" --arch "$arch" $S $extra --seed 7
	for tp in 1 2 4 8; do
		conv "$arch" "$T/src-$arch" "$tp"
	done
done <<EOF
llama --dtype BF16
mistral --dtype F16 --shards 3
qwen2 --dtype BF16 --shards 2
qwen3 --dtype F32 --head-dim 16
gemma --dtype BF16 --head-dim 16
gemma2 --dtype F16 --head-dim 12 --shards 3
gemma3 --dtype BF16 --head-dim 16 --shards 2
phi3 --dtype BF16
EOF

# Tied Llama: only lm_head.weight, built from model.embed_tokens.weight.
gen "$T/src-tied" $S --tie --dtype F16
conv tied "$T/src-tied" 2
conv tied "$T/src-tied" 8

# Tied checkpoints that still carry an lm_head.weight of other bytes:
# Llama's written untied (as vLLM loads it), Gemma's skipped (its code
# ties whatever the config says).
gen "$T/src-tied-lm" $S --tie --lm-head --shards 2
conv tied-lm "$T/src-tied-lm" 4
gen "$T/src-gemma-lm" --arch gemma $S --head-dim 16 --lm-head
conv gemma-lm "$T/src-gemma-lm" 2

# tie_word_embeddings absent: the class default (Llama untied, Gemma tied).
gen "$T/src-notie-key" $S --omit-config tie_word_embeddings
conv notie-key "$T/src-notie-key" 2
gen "$T/src-gemma2-key" --arch gemma2 $S --head-dim 16 --omit-config tie_word_embeddings
conv gemma2-key "$T/src-gemma2-key" 4
gen "$T/src-gemma3-key" --arch gemma3 $S --head-dim 16 --omit-config tie_word_embeddings
conv gemma3-key "$T/src-gemma3-key" 2
# Gemma 3 untied (vLLM ties only when the config says so): its own lm_head.
gen "$T/src-gemma3-untied" --arch gemma3 $S --head-dim 16 --no-tie
conv gemma3-untied "$T/src-gemma3-untied" 2

# num_key_value_heads and head_dim absent: kv = heads, hd = hidden / heads.
gen "$T/src-mha" $S --kv-heads 8 --omit-config num_key_value_heads --dtype F32
conv mha "$T/src-mha" 4

# Old checkpoint with rotary_emb.inv_freq: skipped.
gen "$T/src-invfreq" $S --inv-freq --shards 3
conv invfreq "$T/src-invfreq" 2

# F32 Mistral, F16 Qwen2 (bias dtypes follow), one layer.
gen "$T/src-mistral32" --arch mistral $S --layers 1 --dtype F32
conv mistral32 "$T/src-mistral32" 2
gen "$T/src-qwen2f16" --arch qwen2 $S --dtype F16 --kv-heads 4
conv qwen2f16 "$T/src-qwen2f16" 4

# Vocab smaller than a tp shard: ranks 2..7 hold only zero padding.
gen "$T/src-tinyvocab" $S --vocab 10
conv tinyvocab "$T/src-tinyvocab" 8

# Without the attention scale scalars.
conv noscales "$T/src-llama" 2 --no-attn-scales
conv noscales "$T/src-phi3" 8 --no-attn-scales

# A small --max-file-size: several parts per rank; the 64x250 embedding
# shard alone (32768 B at tp 1) is bigger than the limit and gets its own part.
conv parts "$T/src-llama" 1 --max-file-size 12000
conv parts "$T/src-qwen2" 2 --max-file-size 12000
for r in 0 1; do
	[ -e "$T/parts-tp2/model-rank-$r-part-1.safetensors" ] ||
		fail "parts tp 2: rank $r has a single part despite --max-file-size 12000"
done

# Other dtypes: FP8 weights with BF16 norms and biases, F6 with F32 norms,
# and F4 everywhere (1-D norms of sub-byte elements: 64 x 4 bits = 32 bytes).
gen "$T/src-fp8" --arch qwen2 $S --dtype F8_E4M3 --norm-dtype BF16
conv fp8 "$T/src-fp8" 2
conv fp8 "$T/src-fp8" 8
gen "$T/src-f6" --arch gemma2 $S --head-dim 16 --dtype F6_E2M3 --norm-dtype F32
conv f6 "$T/src-f6" 4
gen "$T/src-f4" $S --dtype F4
conv f4 "$T/src-f4" 2

# A float32 checkpoint without --dtype: written as it is, with a note that
# vLLM serves it downcast (--dtype writes that); none with --dtype or -q.
"$WSHARD" convert --tp 2 "$T/src-mistral32" "$T/f32-note" >/dev/null 2>"$T/cerr" ||
	fail "float32 note: convert failed: $(head -c 300 "$T/cerr")"
grep -q "^wshard: note: config.json's dtype is float32, which vLLM serves as bfloat16 .*--dtype bf16 or f16" "$T/cerr" ||
	fail "float32 note: not printed: $(head -c 300 "$T/cerr")"
for o in "--dtype bf16" "-q"; do
	# shellcheck disable=SC2086
	"$WSHARD" convert --tp 2 $o "$T/src-mistral32" "$T/f32-nonote" >/dev/null 2>"$T/cerr" ||
		fail "float32 note ($o): convert failed: $(head -c 300 "$T/cerr")"
	grep -q "float32" "$T/cerr" && fail "float32 note: printed with $o"
	rm -rf "$T/f32-nonote"
done
"$WSHARD" convert --tp 2 "$T/src-qwen2f16" "$T/f16-nonote" >/dev/null 2>"$T/cerr"
grep -q "float32" "$T/cerr" && fail "float32 note: printed for a float16 checkpoint"

# SHA-256 checksums in the manifest.
conv sha256 "$T/src-qwen3" 2 --checksum sha256

# Tensors bigger than the 1 MiB buffer budget: copied in several chunks;
# with --max-file-size 1M some tensors also get parts of their own.
gen "$T/src-big" $S --hidden 256 --intermediate 3072 --vocab 3001 --shards 2
conv big "$T/src-big" 1 --max-memory 1M
conv big "$T/src-big" 4 --max-memory 1M --max-file-size 1M
# The checksums that need each file read back (the default, CRC-64/NVME,
# is summed from the pieces as they are written, in any order).
conv xxh3 "$T/src-big" 4 --max-memory 1M --max-file-size 1M --checksum xxh3-64

# Determinism: converting twice gives byte-identical files.
for arch in qwen2 gemma2; do
	a=$T/det-$arch-a b=$T/det-$arch-b
	for o in "$a" "$b"; do
		"$WSHARD" convert --tp 4 "$T/src-$arch" "$o" >/dev/null 2>"$T/cerr" ||
			fail "determinism $arch: convert failed: $(head -c 400 "$T/cerr")"
	done
	if [ ! -e "$a/wshard.json" ] || [ ! -e "$b/wshard.json" ]; then
		continue
	fi
	(cd "$a" && ls -A) >"$T/la"
	(cd "$b" && ls -A) >"$T/lb"
	cmp -s "$T/la" "$T/lb" || fail "determinism $arch: the two outputs hold different files"
	while read -r f; do
		cmp -s "$a/$f" "$b/$f" || fail "determinism $arch: $f differs between two runs"
	done <"$T/la"
done

# A HuggingFace cache snapshot: the snapshot's files are links into the
# repository's blob store (REPO/snapshots/REV/x -> ../../blobs/HASH).
hub=$T/hub/models--org--llama
mkdir -p "$hub/blobs" "$hub/snapshots/0123abc"
gen "$T/hubsrc" $S --shards 2
for f in "$T/hubsrc"/*; do
	h=$(sha256sum "$f" | cut -c1-40)
	mv "$f" "$hub/blobs/$h"
	ln -s "../../blobs/$h" "$hub/snapshots/0123abc/$(basename "$f")"
done
conv hf-cache "$hub/snapshots/0123abc" 2
[ -L "$T/hf-cache-tp2/config.json" ] && fail "hf-cache: config.json copied as a link"
# ... but a link out of the repository is still refused.
ln -sf "$T/hubsrc-outside.safetensors" "$hub/snapshots/0123abc/model-00001-of-00002.safetensors"
cp "$hub/blobs/$(ls "$hub/blobs" | head -n 1)" "$T/hubsrc-outside.safetensors"
"$WSHARD" convert --tp 2 "$hub/snapshots/0123abc" "$T/hf-out" >/dev/null 2>"$T/cerr" &&
	fail "hf-cache: a link leaving the repository was accepted"
grep -q "leaves the directory" "$T/cerr" || fail "hf-cache: $(head -c 300 "$T/cerr")"

# --dry-run: exit 0, OUT never created, and for every rank the tensors the
# real conversion writes, in the same files; with --archive, each rank's
# archive.
gen "$T/src-dry" $S --shards 2
if conv dry "$T/src-dry" 4; then
	if ! "$WSHARD" convert --dry-run --tp 4 "$T/src-dry" "$T/dry-out" >"$T/dout" 2>"$T/derr"; then
		fail "--dry-run exited non-zero: $(head -c 300 "$T/derr")"
	fi
	[ -e "$T/dry-out" ] && fail "--dry-run created OUT"
	"$PYTHON" - "$T/dry-tp4/wshard.json" "$T/dout" <<'EOF' || fail "--dry-run: the plan it prints is not what convert wrote"
import json, re, sys
m = json.load(open(sys.argv[1]))
want = {r["rank"]: [(t["name"], t["file"]) for t in r["tensors"]] for r in m["ranks"]}
got, rank = {}, None
for line in open(sys.argv[2]):
    h = re.match(r"rank (\d+): ", line)
    if h:
        rank = int(h.group(1))
        got[rank] = []
        continue
    t = re.match(r"  (\S+) \S+ \[[^]]*\] \d+ bytes -> (\S+)$", line)
    if t:
        got[rank].append((t.group(1), t.group(2)))
for r in sorted(set(want) | set(got)):
    if want.get(r) != got.get(r):
        print("    rank %s: printed %r, written %r" % (r, got.get(r, [])[:3], want.get(r, [])[:3]))
        sys.exit(1)
EOF
	"$WSHARD" convert -n --tp 4 --archive tar.gz --archive-only "$T/src-dry" "$T/dry-out" >"$T/dout" 2>&1 ||
		fail "--dry-run --archive exited non-zero: $(head -c 300 "$T/dout")"
	[ -e "$T/dry-out" ] && fail "--dry-run --archive created OUT"
	for r in 0 1 2 3; do
		grep -qx "  packed into rank-$r.tar.gz, its files then removed (--archive-only)" "$T/dout" ||
			fail "--dry-run --archive: no archive line for rank $r"
	done
fi

# with_extra NAME EXTRA: $T/src-NAME converted at tp 2 into $T/NAME-out by
# llama.json with the extra EXTRA (JSON) added, and verified; stderr in
# $T/NAME-err.
with_extra() {
	gen "$T/src-$1" $S
	py_st "$ROOT/lib/rules/llama.json" "$T/$1.json" "$2" <<'EOF' || fail "$1: rules not written"
import json, sys
r = json.load(open(sys.argv[1]))
r["extra"].append(json.loads(sys.argv[3]))
json.dump(r, open(sys.argv[2], "w"))
EOF
	"$WSHARD" convert --tp 2 --rules "$T/$1.json" "$T/src-$1" "$T/$1-out" >/dev/null 2>"$T/$1-err" &&
		"$WSHARD" verify "$T/$1-out" >/dev/null 2>>"$T/$1-err"
}

# An "arange" extra (BERT's position_ids buffer): I64 [1, N] of 0 .. N - 1
# on every rank, N from config.json; verify re-derives it.
if with_extra ar '{"name": "model.position_ids", "arange": "max_position_embeddings + 3"}'; then
	py_st "$T/src-ar/config.json" "$T"/ar-out/model-rank-*.safetensors <<'EOF' ||
import json, struct, sys
import st
n = json.load(open(sys.argv[1]))["max_position_embeddings"] + 3
want = ("I64", [1, n], struct.pack("<%dq" % n, *range(n)))
for p in sys.argv[2:]:
    got = st.read([p]).get("model.position_ids")
    if got != want:
        sys.exit("%s: position_ids %r" % (p, got and got[:2]))
EOF
		fail "arange: the output's position_ids are not 0 .. N - 1"
else
	fail "arange: convert or verify failed: $(head -c 300 "$T/ar-err")"
fi

# A "sinusoid" extra (Whisper's position table, Voxtral's): F32 [N, C] on
# every rank, each F32 step of transformers' sinusoids correctly rounded;
# verify re-derives it.
if with_extra sn '{"name": "model.pos.weight", "sinusoid": [37, "hidden_size"]}'; then
	py_st "$T/src-sn/config.json" "$T"/sn-out/model-rank-*.safetensors <<'EOF' ||
import json, math, sys
import numpy as np
import st
c = json.load(open(sys.argv[1]))["hidden_size"]
h = c // 2
w = np.exp((np.float32(-math.log(10000) / (h - 1)) * np.arange(h, dtype=np.float32))
           .astype(np.float64)).astype(np.float32)
x = (np.arange(37, dtype=np.float32)[:, None] * w[None, :]).astype(np.float64)
want = np.concatenate([np.sin(x), np.cos(x)], 1).astype("<f4").tobytes()
for p in sys.argv[2:]:
    got = st.read([p]).get("model.pos.weight")
    if got != ("F32", [37, c], want):
        sys.exit("%s: pos %r" % (p, got and got[:2]))
EOF
		fail "sinusoid: the output's table is not transformers' sinusoids"
else
	fail "sinusoid: convert or verify failed: $(head -c 300 "$T/sn-err")"
fi

# A sentence-transformers model: the module folders modules.json names
# (1_Pooling, 2_Dense) are copied with their files, which vLLM reads for
# the pooling and Dense layers; a folder it does not name (onnx) and a
# path leaving the folder are not.  --force replaces them; a tar of the
# checkpoint gives the same.
gen "$T/src-st" $S
mkdir -p "$T/src-st/1_Pooling" "$T/src-st/2_Dense" "$T/src-st/onnx" "$T/st-evil"
cat >"$T/src-st/modules.json" <<'EOF'
[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
 {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
 {"idx": 3, "name": "3", "path": "../st-evil", "type": "sentence_transformers.models.Normalize"}]
EOF
echo '{"pooling_mode_mean_tokens": true}' >"$T/src-st/1_Pooling/config.json"
echo '{"in_features": 64, "out_features": 32}' >"$T/src-st/2_Dense/config.json"
printf 'dense weights' >"$T/src-st/2_Dense/model.safetensors"
printf 'onnx' >"$T/src-st/onnx/model.onnx"
printf 'x' >"$T/st-evil/secret"
# st_out DIR: the files in folders of output DIR, and those its manifest
# lists as copied
st_out() {
	(cd "$1" && find . -mindepth 2 -type f | sort)
	py_st "$1/wshard.json" <<'EOF'
import json, sys
print(" ".join(sorted(c for c in json.load(open(sys.argv[1]))["source"]["copied"] if "/" in c)))
EOF
}
want_st="./1_Pooling/config.json
./2_Dense/config.json
./2_Dense/model.safetensors
1_Pooling/config.json 2_Dense/config.json 2_Dense/model.safetensors"
for run in first again; do
	if "$WSHARD" convert --force --tp 2 "$T/src-st" "$T/st-out" >/dev/null 2>"$T/sterr"; then
		got=$(st_out "$T/st-out")
		[ "$got" = "$want_st" ] || fail "sentence-transformers ($run): copied $got"
		cmp -s "$T/src-st/2_Dense/model.safetensors" "$T/st-out/2_Dense/model.safetensors" ||
			fail "sentence-transformers ($run): 2_Dense/model.safetensors differs"
	else
		fail "sentence-transformers ($run): convert failed: $(head -c 300 "$T/sterr")"
	fi
done
# ... and vLLM serves it with its pooling runner, which holds no LM head:
# none is written (the manifest says why), a tied embedding keeps its own
# name, and with --pp the last stage holds it too.
py_st "$T/st-out/wshard.json" "$T"/st-out/model-rank-*.safetensors <<'EOF' ||
import json, sys
import st
m = json.load(open(sys.argv[1]))
why = {x["name"]: x["reason"] for x in m.get("left_out", [])}
assert "pooling runner" in why.get("lm_head.weight", ""), why
for p in sys.argv[2:]:
    t = st.read([p])
    assert "lm_head.weight" not in t and "model.embed_tokens.weight" in t, (p, sorted(t)[:4])
EOF
	fail "sentence-transformers: an LM head written, or not said"
gen "$T/src-st-tied" $S --tie
cp "$T/src-st/modules.json" "$T/src-st-tied/" && cp -r "$T/src-st/1_Pooling" "$T/src-st-tied/"
if "$WSHARD" convert --tp 1 --pp 2 "$T/src-st-tied" "$T/st-tied" >/dev/null 2>"$T/sterr"; then
	py_st "$T"/st-tied/model-pp-0-*.safetensors "$T"/st-tied/model-pp-1-*.safetensors <<'EOF' ||
import sys
import st
for p in sys.argv[1:]:
    t = st.read([p])
    assert "lm_head.weight" not in t and "model.embed_tokens.weight" in t, (p, sorted(t)[:4])
EOF
		fail "sentence-transformers, tied, --pp 2: not the embedding on both stages"
else
	fail "sentence-transformers, tied, --pp 2: convert failed: $(head -c 300 "$T/sterr")"
fi
(cd "$T/src-st" && tar -cf "$T/src-st.tar" ./*)
if "$WSHARD" convert --tp 2 "$T/src-st.tar" "$T/st-tar" >/dev/null 2>"$T/sterr"; then
	got=$(st_out "$T/st-tar")
	[ "$got" = "$want_st" ] || fail "sentence-transformers from a tar: copied $got"
else
	fail "sentence-transformers from a tar: convert failed: $(head -c 300 "$T/sterr")"
fi

echo "$ncases conversions checked against the reference"
finish
