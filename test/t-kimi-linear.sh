#!/bin/sh
# Kimi Linear at full size: a checkpoint with the dimensions of
# moonshotai/Kimi-Linear-48B-A3B's config.json (hidden 2304; 27 layers, KDA
# in 20 and MLA in 7 as linear_attn_config numbers them from 1; KDA 32 heads
# of 128; MLA 32 heads without rope, kv_lora_rank 512; 256 experts of 1024,
# the first layer dense) and its tensor names and shapes, written sparse,
# planned with --dry-run at tp 4, at tp 8 (vLLM pads each rank's 128 expert
# rows to 256: zero rows after w13's gate and up halves, zero columns after
# w2's) and with --expert-parallel (no padding).
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

src=$T/kimi-linear
mkdir -p "$src"
py_st "$src" <<'PY' || fail "writing the sparse checkpoint failed"
import json, os, sys
out = sys.argv[1]
import st
H, L, NH, I, E, MI, V = 2304, 27, 32, 9216, 256, 1024, 163840
KH, KD, KL, NOPE, ROPE, VD = 32, 128, 512, 128, 64, 128
full = [4, 8, 12, 16, 20, 24, 27]
cfg = {"architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear",
       "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": NH,
       "num_key_value_heads": NH, "intermediate_size": I, "vocab_size": V,
       "linear_attn_config": {"kda_layers": [n for n in range(1, L + 1) if n not in full],
                              "full_attn_layers": full, "num_heads": KH, "head_dim": KD,
                              "short_conv_kernel_size": 4},
       "num_experts": E, "moe_intermediate_size": MI, "num_experts_per_token": 8,
       "num_shared_experts": 1, "first_k_dense_replace": 1, "moe_layer_freq": 1,
       "kv_lora_rank": KL, "q_lora_rank": None, "qk_nope_head_dim": NOPE,
       "qk_rope_head_dim": ROPE, "v_head_dim": VD, "mla_use_nope": True,
       "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f)
t = {"model.embed_tokens.weight": [V, H], "lm_head.weight": [V, H], "model.norm.weight": [H]}
for n in range(L):
    p = "model.layers.%d." % n
    a = p + "self_attn."
    t.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
              a + "o_proj.weight": [H, NH * VD]})
    if n + 1 in full:
        t.update({a + "q_proj.weight": [NH * (NOPE + ROPE), H],
                  a + "kv_a_proj_with_mqa.weight": [KL + ROPE, H],
                  a + "kv_a_layernorm.weight": [KL], a + "kv_b_proj.weight": [NH * (NOPE + VD), KL]})
    else:
        for x in "qkv":
            t[a + x + "_proj.weight"] = [KH * KD, H]
            t[a + x + "_conv1d.weight"] = [KH * KD, 1, 4]
        t.update({a + "b_proj.weight": [KH, H], a + "f_a_proj.weight": [KD, H],
                  a + "f_b_proj.weight": [KH * KD, KD], a + "g_a_proj.weight": [KD, H],
                  a + "g_b_proj.weight": [KH * KD, KD], a + "A_log": [1, 1, KH, 1],
                  a + "dt_bias": [KH * KD], a + "o_norm.weight": [KD]})
    if n == 0:
        t.update({p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
                  p + "mlp.down_proj.weight": [H, I]})
        continue
    m = p + "block_sparse_moe."
    t.update({m + "gate.weight": [E, H], m + "gate.e_score_correction_bias": [E],
              m + "shared_experts.gate_proj.weight": [MI, H],
              m + "shared_experts.up_proj.weight": [MI, H],
              m + "shared_experts.down_proj.weight": [H, MI]})
    for e in range(E):
        x = m + "experts.%d." % e
        t.update({x + "w1.weight": [MI, H], x + "w3.weight": [MI, H], x + "w2.weight": [H, MI]})
st.write_sparse(os.path.join(out, "model.safetensors"), t)
PY

K=model.layers.25.self_attn
M=model.layers.26.self_attn
E=model.layers.26.block_sparse_moe.experts.routed_experts
expect_exit 0 "$WSHARD" convert --dry-run --tp 4 "$src" "$T/dest" && cp "$T/out" "$T/plan-4" && {
	[ -e "$T/dest" ] && fail "--dry-run created OUT"
	# q, k, v and b by heads (3 x 1024 + 8), f_a's 128 rows whole
	has $K.in_proj_qkvgfab.weight 4 "[3208, 2304]"
	has $K.f_b_proj.weight 4 "[1024, 128]"
	has $K.g_a_proj.weight 4 "[128, 2304]"
	for want in "$K.conv1d.weight F32 [3072, 1, 4]" "$K.A_log F32 [8]" "$K.dt_bias F32 [1024]" \
		"$E.e_score_correction_bias F32 [256]"; do
		grep -qF "  $want " "$T/plan-4" || fail "tp 4: not $want"
	done
	has $M.q_proj.weight 4 "[1536, 2304]"
	has $M.kv_a_proj_with_mqa.weight 4 "[576, 2304]"
	has $E.w13_weight 4 "[256, 512, 2304]"
	has $E.w2_weight 4 "[256, 2304, 256]"
	grep -qF "  model.layers.26.self_attn._k_scale " "$T/plan-4" ||
		fail "tp 4: the MLA layer has no _k_scale"
	grep -qF "  model.layers.25.self_attn._k_scale " "$T/plan-4" &&
		fail "tp 4: a KDA layer has a _k_scale"
}
expect_exit 0 "$WSHARD" convert --dry-run --tp 4 --expert-parallel "$src" "$T/dest" &&
	cp "$T/out" "$T/plan-ep" && has $E.w13_weight ep "[64, 2048, 2304]"
expect_exit 0 "$WSHARD" convert --dry-run --tp 8 "$src" "$T/dest" && cp "$T/out" "$T/plan-8" && {
	has $E.w13_weight 8 "[256, 512, 2304]"
	has $E.w2_weight 8 "[256, 2304, 256]"
	# rank 1's expert 0: its gate rows, 128 zero rows, its up rows, zeros
	awk '/^rank 1:/ {r = 1} /^rank 2:/ {r = 0}
	     r && /w13_weight/ {w = 1; next} r && w && /^  [^ ]/ {exit}
	     r && w && n < 4 {print; n++}' "$T/plan-8" >"$T/w13-8"
	printf '%s\n' \
		"    model.layers.1.block_sparse_moe.experts.0.w1.weight rows [128, 256)" \
		"    zeros 589824 bytes" \
		"    model.layers.1.block_sparse_moe.experts.0.w3.weight rows [128, 256)" \
		"    zeros 589824 bytes" | cmp -s - "$T/w13-8" ||
		fail "tp 8: rank 1's w13 is not gate, zeros, up, zeros: $(cat "$T/w13-8")"
	grep -qF "experts.0.w2.weight rows [0, 2304) cols [128, 256), each row zero-padded" "$T/plan-8" ||
		fail "tp 8: w2's columns are not padded"
}
expect_exit 0 "$WSHARD" convert --dry-run --tp 8 --expert-parallel "$src" "$T/dest" &&
	cp "$T/out" "$T/plan-ep8" && has $E.w13_weight ep8 "[32, 2048, 2304]"
expect_exit 0 "$WSHARD" convert --dry-run --tp 16 "$src" "$T/dest" &&
	cp "$T/out" "$T/plan-16" && has $E.w2_weight 16 "[256, 2304, 256]"
finish
