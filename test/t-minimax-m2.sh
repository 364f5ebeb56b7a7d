#!/bin/sh
# MiniMax-M2 at full size: a checkpoint with the dimensions of
# MiniMaxAI/MiniMax-M2's config.json (62 layers, 256 experts of 1536, 48
# heads and 8 kv heads of 128, q/k norms over all heads together) and its
# tensor names and shapes, written sparse (230 GB of holes), planned with
# --dry-run at tp 4, 8 and 16 (kv heads on two ranks each: k_norm's kv head
# whole) and with --expert-parallel at tp 8.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

src=$T/minimax-m2
mkdir -p "$src"
py_st "$src" <<'PY' || fail "writing the sparse checkpoint failed"
import json, os, sys
out = sys.argv[1]
import st
H, L, NH, KV, HD, E, I, V = 3072, 62, 48, 8, 128, 256, 1536, 200064
cfg = {"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
       "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": NH,
       "num_key_value_heads": KV, "head_dim": HD, "intermediate_size": I,
       "num_local_experts": E, "num_experts_per_tok": 8, "vocab_size": V,
       "rotary_dim": 64, "scoring_func": "sigmoid", "use_routing_bias": True,
       "use_qk_norm": True, "qk_norm_type": "per_layer", "tie_word_embeddings": False,
       "rms_norm_eps": 1e-06, "rope_theta": 5000000, "torch_dtype": "bfloat16"}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f)
t = {"model.embed_tokens.weight": [V, H], "lm_head.weight": [V, H], "model.norm.weight": [H]}
for n in range(L):
    p = "model.layers.%d." % n
    t.update(st.attention_shapes(p, H, NH, KV, HD))
    t[p + "self_attn.q_norm.weight"] = [NH * HD]
    t[p + "self_attn.k_norm.weight"] = [KV * HD]
    t[p + "block_sparse_moe.gate.weight"] = [E, H]
    t[p + "block_sparse_moe.e_score_correction_bias"] = [E]
    for e in range(E):
        x = p + "block_sparse_moe.experts.%d." % e
        t[x + "w1.weight"] = [I, H]
        t[x + "w3.weight"] = [I, H]
        t[x + "w2.weight"] = [H, I]
st.write_sparse(os.path.join(out, "model.safetensors"), t)
PY

L=model.layers.61
for tp in 4 8 16; do
	expect_exit 0 "$WSHARD" convert --dry-run --tp "$tp" "$src" "$T/dest" || continue
	cp "$T/out" "$T/plan-$tp"
	[ -e "$T/dest" ] && fail "tp $tp: --dry-run created OUT"
	has $L.self_attn.q_norm.weight "$tp" "[$((6144 / tp))]"
	# 8 kv heads of 128: a rank's share, or its one head at tp 16
	kv=$((1024 / tp)); [ "$tp" -gt 8 ] && kv=128
	has $L.self_attn.k_norm.weight "$tp" "[$kv]"
	has $L.block_sparse_moe.experts.routed_experts.w13_weight "$tp" "[256, $((3072 / tp)), 3072]"
	has $L.block_sparse_moe.experts.routed_experts.w2_weight "$tp" "[256, 3072, $((1536 / tp))]"
done
grep -qF "  $L.block_sparse_moe.gate.weight F32 [256, 3072] " "$T/plan-8" ||
	fail "the router is not F32 [256, 3072]"
expect_exit 0 "$WSHARD" convert --dry-run --tp 8 --expert-parallel "$src" "$T/dest" &&
	cp "$T/out" "$T/plan-ep" &&
	has $L.block_sparse_moe.experts.routed_experts.w13_weight ep "[32, 3072, 3072]"
# tp 32: 48 heads do not divide
expect_exit 3 "$WSHARD" convert --dry-run --tp 32 "$src" "$T/dest" &&
	err_has "tp 32" "num_attention_heads=48 is not divisible by --tp 32"
finish
