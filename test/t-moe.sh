#!/bin/sh
# Mixture-of-experts checkpoints: Mixtral (block_sparse_moe.experts.{e}.w1/
# w2/w3) and Qwen3-MoE (mlp.experts.{e}.gate/up/down_proj) at tp 1, 2 and 4
# (tp 4 replicates the 2 kv heads), Qwen2-MoE (q/k/v biases, shared expert
# and its gate) at tp 2, a Qwen3-MoE with a dense layer (mlp_only_layers), all
# compared with test/reference.py: experts.w13_weight [E, 2I/tp, H] (per
# expert w1 rows of rank r, then w3 rows), experts.w2_weight [E, H, I/tp],
# routers replicated.  `wshard verify` passes on every output.  Streaming:
# experts of 1.5 MiB converted with --max-memory 1M give byte-identical files
# to a default conversion.  256 small experts (assembled in memory, then
# written at once) verify in three runs and match a conversion with a 1 MiB
# budget.  A missing expert and an expert count that
# contradicts config.json are refused (exit 3, one line).
# $S holds several generator options: split on purpose.
# shellcheck disable=SC2086,SC1091
. "$(dirname "$0")/lib.sh"

need_reference


# conv NAME SRC TP [OPTIONS...]: see convert_checked in lib.sh.
conv() { convert_checked "$@"; }

# 8 heads, 2 kv heads, hidden 64, vocab 250; 4 experts.
S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --vocab 250 --experts 4 --seed 11"

gen "$T/src-mixtral" --arch mixtral $S --intermediate 96
gen "$T/src-qwen3moe" --arch qwen3_moe $S --head-dim 16 --intermediate 128 \
	--moe-intermediate 64 --shards 2
for tp in 1 2 4; do
	conv mixtral "$T/src-mixtral" "$tp"
	conv qwen3moe "$T/src-qwen3moe" "$tp"
done

# Qwen2-MoE: biases, shared expert (intermediate 96) and its [1, H] gate.
gen "$T/src-qwen2moe" --arch qwen2_moe $S --intermediate 128 --moe-intermediate 32 \
	--shared-intermediate 96 --shards 3
conv qwen2moe "$T/src-qwen2moe" 2

# Mixtral in F16, 8 experts, one layer, no attention scales.
gen "$T/src-mixtral16" --arch mixtral $S --layers 1 --experts 8 --intermediate 64 --dtype F16
conv mixtral16 "$T/src-mixtral16" 2 --no-attn-scales

# Qwen3-MoE whose layer 1 is dense (mlp_only_layers [1]): gate_up_proj there.
gen "$T/src-qwen3dense" --arch qwen3_moe $S --head-dim 16 --intermediate 128 \
	--moe-intermediate 32 --dense-layers 1
conv qwen3dense "$T/src-qwen3dense" 4
if [ -e "$T/qwen3dense-tp4/wshard.json" ]; then
	grep -q '"model.layers.1.mlp.gate_up_proj.weight"' "$T/qwen3dense-tp4/wshard.json" ||
		fail "qwen3dense: no dense gate_up_proj in layer 1"
fi

# Streaming: each expert weight is 1536 x 512 BF16 = 1.5 MiB, more than the
# 1 MiB buffer budget; the output must not depend on --max-memory.
gen "$T/src-big" --arch mixtral --layers 1 --hidden 512 --heads 8 --kv-heads 2 \
	--intermediate 1536 --vocab 250 --experts 3 --seed 5
conv big "$T/src-big" 2 --max-memory 1M
if [ -e "$T/big-tp2/wshard.json" ]; then
	"$WSHARD" convert --tp 2 "$T/src-big" "$T/big-default" >/dev/null 2>"$T/cerr" ||
		fail "big: default convert failed: $(head -c 400 "$T/cerr")"
	same_files "$T/big-tp2" "$T/big-default" big "between --max-memory 1M and the default" \
		$TP2_RANKS
fi

# Many small experts: their stacked tensors are assembled in memory from
# pieces the read threads bring and written once (lib/output/gather.c); the
# manifest's checksums must hold whichever thread completes a tensor, and
# the output must not depend on whether a tensor was gathered (a budget of
# 1 MiB gathers almost none) nor on the number of stream threads (one per
# CPU up to 8: WSHARD_STREAM_THREADS sets it, 1 is the one-thread loop).
gen "$T/src-many" --arch qwen3_moe --layers 3 --hidden 64 --heads 4 --kv-heads 2 \
	--head-dim 16 --intermediate 128 --moe-intermediate 16 --experts 256 --seed 9
for i in 1 2 3; do
	rm -rf "$T/many"
	if "$WSHARD" convert -q --tp 2 "$T/src-many" "$T/many" 2>"$T/cerr"; then
		"$WSHARD" verify --source "$T/src-many" "$T/many" >"$T/vout" 2>&1 ||
			fail "many experts, run $i: verify: $(head -c 400 "$T/vout")"
	else
		fail "many experts: convert failed: $(head -c 400 "$T/cerr")"
	fi
done
if "$WSHARD" convert -q --tp 2 --max-memory 1M "$T/src-many" "$T/many-1m" 2>"$T/cerr"; then
	same_files "$T/many" "$T/many-1m" "many experts" "between --max-memory 1M and the default" \
		$TP2_RANKS
else
	fail "many experts: convert --max-memory 1M failed: $(head -c 400 "$T/cerr")"
fi
for n in 1 8; do
	rm -rf "$T/many-t$n"
	if WSHARD_STREAM_THREADS=$n "$WSHARD" convert -q --tp 2 "$T/src-many" "$T/many-t$n" 2>"$T/cerr"; then
		same_files "$T/many" "$T/many-t$n" "many experts" \
			"between $n stream threads and the default" $TP2_RANKS wshard.json
	else
		fail "many experts: convert with $n stream threads failed: $(head -c 400 "$T/cerr")"
	fi
done

# Refused: an expert tensor missing, and more experts than config.json says.
gen "$T/src-noexp" --arch mixtral $S --layers 1 --intermediate 96 \
	--drop-tensor model.layers.0.block_sparse_moe.experts.2.w3.weight
if expect_exit 3 "$WSHARD" convert --tp 2 "$T/src-noexp" "$T/noexp"; then
	[ "$(grep -c . "$T/err")" -eq 1 ] || fail "missing expert: stderr is not one line: $(cat "$T/err")"
	grep -q "experts.2.w3" "$T/err" || fail "missing expert: stderr does not name it: $(cat "$T/err")"
fi
[ -e "$T/noexp/wshard.json" ] && fail "missing expert: an output was written"
gen "$T/src-nexp" --arch qwen3_moe $S --layers 1 --head-dim 16 --moe-intermediate 32 \
	--set-config num_experts=3
if expect_exit 3 "$WSHARD" convert --tp 2 "$T/src-nexp" "$T/nexp"; then
	[ "$(grep -c . "$T/err")" -eq 1 ] || fail "expert count: stderr is not one line: $(cat "$T/err")"
fi
[ -e "$T/nexp/wshard.json" ] && fail "expert count: an output was written"

echo "$ncases MoE conversions checked against the reference"
finish
