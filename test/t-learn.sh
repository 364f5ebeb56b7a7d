#!/bin/sh
# scripts/learn-rules explain: rules learned from rank states (the engine's
# own run of it is `make learn-table`).  wshard's built-in output stands in
# for vLLM's state here (the engine suite proves the two equal), so the
# learner's own test runs without the engine:
# (a) Llama, Qwen3-MoE, Phi-3 (q/k/v and gate/up unpacked from one
#     source), Gemma 3 and Qwen2-MoE at tp 1, 2 and 4 (kv heads 2: at tp 4
#     each kv head is held by two ranks) and at tp 1 with two pipeline
#     stages: the learned file converts to the states byte for byte, so to
#     the built-in output; it fuses q/k/v, gate/up and the experts' w1/w3,
#     cuts the embedding by vocabulary, writes a layer that a block of
#     lib/rules/blocks writes alike as that block (Llama's, Gemma 3's
#     beside its own norms), keeps the attention scales as
#     constants and puts Llama's embedding on the first stage, its norm and
#     head on the last (Qwen3-MoE's on every stage); tied embeddings
#     (Llama's, Gemma 3's), which vLLM holds under the head's name, become
#     a tie with a rule for an untied checkpoint's head.
# (b) a state holding a tensor transposed, or a value no source holds,
#     is refused (exit 1) naming the tensor, and no rules are written.
# shellcheck disable=SC2086,SC1091
. "$(dirname "$0")/lib.sh"

LEARN="$PYTHON $ROOT/scripts/learn-rules"
PLAIN="env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK"
S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --vocab 250 --intermediate 128 \
--experts 4 --head-dim 16 --moe-intermediate 32 --seed 5"

states() {  # ARCH: $T/ARCH/src and its built-in output at tp 1, 2, 4
	case $1 in
	*-tied) gen "$T/$1/src" --arch "${1%-tied}" $S --tie ;;
	*) gen "$T/$1/src" --arch "$1" $S ;;
	esac
	for tp in 1 2 4; do
		$PLAIN "$WSHARD" convert -q --tp $tp "$T/$1/src" "$T/$1/s$tp" 2>"$T/cerr" ||
			fail "$1: convert --tp $tp: $(cat "$T/cerr")"
	done
	$PLAIN "$WSHARD" convert -q --tp 1 --pp 2 "$T/$1/src" "$T/$1/pp" 2>"$T/cerr" ||
		fail "$1: convert --pp 2: $(cat "$T/cerr")"
}

for a in llama llama-tied qwen3_moe phi3 gemma3 qwen2_moe; do
	states $a
	WSHARD="$WSHARD" $LEARN explain -o "$T/$a.json" "$T/$a/src" \
		"$T/$a/s1" "$T/$a/s2" "$T/$a/s4" "$T/$a/pp" >"$T/out" 2>&1 ||
		fail "$a: learn-rules explain: $(cat "$T/out")"
	grep -q "byte for byte at tp 1, 2, 4 and at tp 1, pp 2" "$T/out" || fail "$a: $(cat "$T/out")"
done
grep -q '"fuse": "qkv.q"' "$T/qwen3_moe.json" || fail "qwen3_moe: no q/k/v fuse learned"
# Llama's layers and Gemma 3's (beside its own norms) are lib/rules/blocks'
grep -q '{"use": "llama_layer", "prefix": "model.layers.{n}."}' "$T/llama.json" ||
	fail "llama: its layers are not written as the llama_layer block"
grep -q '{"use": "llama_layer", "prefix": "model.layers.{n}."}' "$T/gemma3.json" &&
	grep -q '"match": "model.layers.{n}.self_attn.q_norm.weight"' "$T/gemma3.json" ||
	fail "gemma3: not the llama_layer block and its own norms"
grep -q '"pipeline": {"layers": "model.layers.{n}.", "stages": \[{"lm_head.weight": "last"}, {"model.embed_tokens.weight": "first"}, {"model.norm.weight": "last"}\]}' \
	"$T/llama.json" || fail "llama: pipeline stages not learned"
grep -q '"tie": {"source": "model.embed_tokens.weight", "output": "lm_head.weight", "drop": \["lm_head.weight"\]' \
	"$T/llama-tied.json" || fail "llama-tied: no tie learned"
grep -q '"model.embed_tokens.weight": "all"' "$T/qwen3_moe.json" ||
	fail "qwen3_moe: the embedding is not on every stage"
grep -q '"match": "model.embed_tokens.weight", "split": "vocab"' "$T/llama.json" ||
	fail "llama: the embedding is not cut by vocabulary"
grep -q '{"attn_scales": "model.layers.{n}.self_attn.attn"}' \
	"$T/llama.json" || fail "llama: no attention scale constant"
grep -q '"fuse": "w13.w1", "output": "model.layers.{n}.mlp.experts.routed_experts.w13_weight"' \
	"$T/qwen3_moe.json" || fail "qwen3_moe: experts' w1 not fused and stacked"
grep -q '"unpack": "qkv"' "$T/phi3.json" && grep -q '"unpack": "gate_up"' "$T/phi3.json" ||
	fail "phi3: q/k/v or gate/up not unpacked"

# (b) a transposed o_proj in rank 1's state at tp 2; a constant that is no
# scalar
"$PYTHON" - "$ROOT/test" "$T/llama" <<'EOF' || fail "cannot tamper the states"
import glob, os, shutil, struct, sys
sys.path.insert(0, sys.argv[1])
import st
d = sys.argv[2]
for name, make in (("s2x", "transpose"), ("s2c", "const")):
    shutil.copytree(f"{d}/s2", f"{d}/{name}")
    for p in glob.glob(f"{d}/{name}/model-rank-1-part-*.safetensors"):
        t = st.read([p])
        k = "model.layers.1.self_attn.o_proj.weight"
        if k in t and make == "transpose":
            dt, (r, c), b = t[k]
            rows = [b[i * c * 2:(i + 1) * c * 2] for i in range(r)]
            t[k] = (dt, [c, r], b"".join(rows[i][j * 2:j * 2 + 2]
                                        for j in range(c) for i in range(r)))
        if k in t and make == "const":
            t["model.layers.1.self_attn.attn.scale_table"] = (
                "F32", [4], struct.pack("<4f", 1, 2, 3, 4))
        st.write(p, t)
EOF
for s in s2x s2c; do
	rm -f "$T/bad.json"
	code=0
	WSHARD="$WSHARD" $LEARN explain -o "$T/bad.json" "$T/llama/src" "$T/llama/s1" \
		"$T/llama/$s" >"$T/out" 2>&1 || code=$?
	[ "$code" = 1 ] || fail "$s: exit $code, want 1: $(cat "$T/out")"
	[ ! -e "$T/bad.json" ] || fail "$s: rules written for a state it did not explain"
done
grep -q "model.layers.1.self_attn.attn.scale_table: F32 \[4\]: a value vLLM makes itself" "$T/out" ||
	fail "s2c: $(cat "$T/out")"
finish
