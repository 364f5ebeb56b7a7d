#!/bin/sh
# FP8 checkpoints (F8_E4M3 linear weights, F32 scales, BF16 norms and
# embeddings) against test/reference.py, whose scale rules are:
#  - per-tensor X.weight_scale / X.input_scale (shape [] or [1]) fused into
#    one element per part: qkv_proj.weight_scale [s_q, s_k, s_v],
#    gate_up_proj [s_gate, s_up]; beside o_proj / down_proj kept whole;
#  - per-channel X.weight_scale [rows, 1] cut and fused like the weight rows,
#    k/v scales replicated with their kv head at tp > kv;
#  - block-wise X.weight_scale_inv [ceil(rows/B), ceil(cols/B)] (B from
#    quantization_config.weight_block_size) cut in whole blocks: rows beside a
#    row split, columns beside a column split;
#  - MoE experts: vLLM's names experts.w13_weight_scale, w13_input_scale,
#    w2_weight_scale, w13_weight_scale_inv ...; per-tensor w13 weight scales
#    [E, 2], w2 weight scales and input scales one value per expert [E].
# A block-wise model whose tp split cuts a 128 block must be refused with
# exit 3 and one line on stderr, nothing written; config.json (and its
# quantization_config) is copied unchanged; `wshard verify` passes.
# $S holds several generator options: split on purpose.
# shellcheck disable=SC2086,SC1091
. "$(dirname "$0")/lib.sh"

need_reference


# conv NAME SRC TP [OPTIONS...]: convert_checked (lib.sh), and config.json's
# quantization_config must come through unchanged.
conv() {
	convert_checked "$@" || return 1
	"$PYTHON" - "$2/config.json" "$out/config.json" <<'EOF' || fail "$1 tp $3: quantization_config changed"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if "quantization_config" in a and a["quantization_config"] == b.get("quantization_config") else 1)
EOF
	return 0
}

# refused NAME SRC TP: convert must exit 3 with one stderr line and write nothing.
refused() {
	name=$1 src=$2 tp=$3
	out=$T/$name-tp$tp
	ncases=$((ncases + 1))
	[ -d "$src" ] || { fail "$name tp $tp: no source (generator failed)"; return 1; }
	"$WSHARD" convert --tp "$tp" "$src" "$out" >"$T/cout" 2>"$T/cerr"
	rc=$?
	if [ "$rc" -ne 3 ]; then
		fail "$name tp $tp: wshard convert exited $rc, expected 3 (a split that cuts an FP8 block)"
	elif [ "$(grep -c . "$T/cerr")" -ne 1 ]; then
		fail "$name tp $tp: stderr is not one line: $(head -c 400 "$T/cerr")"
	else
		echo "   $name tp $tp refused: $(cat "$T/cerr")"
	fi
	[ -e "$out/wshard.json" ] && fail "$name tp $tp: an output was written"
	return 0
}

# Per-tensor and per-channel: 8 heads, 2 kv heads (tp 4 replicates k/v and
# their scales), with input scales.
S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 250 --seed 3"
gen "$T/src-tensor" $S --fp8 per-tensor --input-scale
conv tensor "$T/src-tensor" 2
conv tensor "$T/src-tensor" 4
gen "$T/src-tensor1" --arch qwen2 $S --fp8 per-tensor --input-scale --fp8-scalar-shape 1 --shards 2
conv tensor1 "$T/src-tensor1" 2
conv tensor1 "$T/src-tensor1" 4
gen "$T/src-channel" --arch qwen3 $S --head-dim 16 --fp8 per-channel --input-scale --norm-dtype F32
conv channel "$T/src-channel" 2
conv channel "$T/src-channel" 4
gen "$T/src-channel8" $S --fp8 per-channel
conv channel8 "$T/src-channel8" 8

# Block-wise 128 x 128: q, k, v of 2 heads of 128, hidden 256, intermediate
# 512: every rank's rows and columns are whole blocks at tp 2.
B="--layers 1 --hidden 256 --heads 2 --head-dim 128 --vocab 250 --fp8 block --seed 4"
gen "$T/src-block" $B --kv-heads 2 --intermediate 512
conv block "$T/src-block" 1
conv block "$T/src-block" 2
# one kv head at tp 2: the k/v block rows are replicated with the head
gen "$T/src-blockkv1" $B --kv-heads 1 --intermediate 256
conv blockkv1 "$T/src-blockkv1" 2
# 4 heads of 64 and 4 kv heads: each rank's q and k rows are 128 (one
# block), so the split is block-aligned although a block holds 2 heads
gen "$T/src-block64" --layers 1 --hidden 256 --heads 4 --kv-heads 4 --head-dim 64 \
	--intermediate 512 --vocab 250 --fp8 block --seed 4
conv block64 "$T/src-block64" 2

# Splits that cut a block: refused.  Intermediate 384 = 3 blocks (not
# divisible by 2); intermediate 192 = 2 blocks, but each rank's 96 rows (and
# down_proj's 96 columns) cut the first block; 64 q rows per rank at tp 4.
gen "$T/src-cut3" $B --kv-heads 2 --intermediate 384
refused cut3 "$T/src-cut3" 2
gen "$T/src-cut96" $B --kv-heads 2 --intermediate 192
refused cut96 "$T/src-cut96" 2
refused block64 "$T/src-block64" 4

# MoE experts with FP8 scales: per-tensor with input scales (Qwen3-MoE with
# [] scales, Qwen2-MoE with [1] scales and a shared expert), per-channel
# (Mixtral), block-wise 32 x 32 (Mixtral).
M="--layers 1 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 --vocab 250 --experts 3 --seed 8"
gen "$T/src-moetensor" --arch qwen3_moe $M --intermediate 128 --moe-intermediate 64 \
	--fp8 per-tensor --input-scale
conv moetensor "$T/src-moetensor" 2
gen "$T/src-moetensor1" --arch qwen2_moe $M --intermediate 128 --moe-intermediate 64 \
	--shared-intermediate 64 --fp8 per-tensor --input-scale --fp8-scalar-shape 1
conv moetensor1 "$T/src-moetensor1" 2
gen "$T/src-moechannel" --arch mixtral $M --intermediate 64 --fp8 per-channel
conv moechannel "$T/src-moechannel" 2
gen "$T/src-moeblock" --arch mixtral $M --intermediate 128 --fp8 block --fp8-block 32
conv moeblock "$T/src-moeblock" 2

echo "$ncases FP8 cases"
finish
