#!/bin/sh
# Kimi-K2.5 at full size: a checkpoint with moonshotai/Kimi-K2.5's
# config.json (the tower's sizes as vt_hidden_size and so on, which
# transformers does not read: the rules' defaults, K2.5's own sizes, stand)
# and its tensor names and shapes, the routed experts in BF16, written
# sparse (2 TB of holes), planned with --dry-run at tp 8 and 16 and with
# --expert-parallel at tp 8; tp 32 refused (16 tower heads).  Then as
# Moonshot ships it, the routed experts compressed-tensors INT4 in groups of
# 32 (208,550 tensors): the same at tp 8 and 16 and with expert parallelism.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

src=$T/kimi-k25
mkdir -p "$src"
py_st "$src" <<'PY' || fail "writing the sparse checkpoint failed"
import json, os, sys
out = sys.argv[1]
import st
H, L, NH, E, I, MI, V = 7168, 61, 64, 384, 18432, 2048, 163840
QL, KL, NOPE, ROPE, VD = 1536, 512, 128, 64, 128
VH, VI, VL, VP = 1152, 4304, 27, 14
text = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": NH,
        "num_key_value_heads": NH, "intermediate_size": I, "moe_intermediate_size": MI,
        "n_routed_experts": E, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "first_k_dense_replace": 1, "q_lora_rank": QL, "kv_lora_rank": KL,
        "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE, "v_head_dim": VD,
        "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
        "scoring_func": "sigmoid", "vocab_size": V, "num_nextn_predict_layers": 0,
        "tie_word_embeddings": False}
cfg = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
       "text_config": text, "tie_word_embeddings": False,
       "media_placeholder_token_id": 163605, "use_unified_vision_chunk": True,
       "vision_config": {"init_pos_emb_height": 64, "init_pos_emb_width": 64,
                         "init_pos_emb_time": 4, "merge_kernel_size": [2, 2],
                         "mm_hidden_size": VH, "patch_size": VP, "text_hidden_size": H,
                         "vt_hidden_size": VH, "vt_intermediate_size": VI,
                         "vt_num_attention_heads": 16, "vt_num_hidden_layers": VL}}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f)
m = "language_model.model."
t = {m + "embed_tokens.weight": [V, H], "language_model.lm_head.weight": [V, H],
     m + "norm.weight": [H]}
for n in range(L):
    p = m + "layers.%d." % n
    a = p + "self_attn."
    t.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
              a + "q_a_proj.weight": [QL, H], a + "q_a_layernorm.weight": [QL],
              a + "q_b_proj.weight": [NH * (NOPE + ROPE), QL],
              a + "kv_a_proj_with_mqa.weight": [KL + ROPE, H], a + "kv_a_layernorm.weight": [KL],
              a + "kv_b_proj.weight": [NH * (NOPE + VD), KL], a + "o_proj.weight": [H, NH * VD]})
    if n == 0:
        t.update({p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
                  p + "mlp.down_proj.weight": [H, I]})
        continue
    t.update({p + "mlp.gate.weight": [E, H], p + "mlp.gate.e_score_correction_bias": [E],
              p + "mlp.shared_experts.gate_proj.weight": [MI, H],
              p + "mlp.shared_experts.up_proj.weight": [MI, H],
              p + "mlp.shared_experts.down_proj.weight": [H, MI]})
    for e in range(E):
        x = p + "mlp.experts.%d." % e
        t.update({x + "gate_proj.weight": [MI, H], x + "up_proj.weight": [MI, H],
                  x + "down_proj.weight": [H, MI]})
v = "vision_tower."
t.update({v + "patch_embed.proj.weight": [VH, 3, VP, VP], v + "patch_embed.proj.bias": [VH],
          v + "patch_embed.pos_emb.weight": [64, 64, VH],
          v + "encoder.final_layernorm.weight": [VH], v + "encoder.final_layernorm.bias": [VH],
          "mm_projector.pre_norm.weight": [VH], "mm_projector.pre_norm.bias": [VH],
          "mm_projector.proj.0.weight": [4 * VH, 4 * VH], "mm_projector.proj.0.bias": [4 * VH],
          "mm_projector.proj.2.weight": [H, 4 * VH], "mm_projector.proj.2.bias": [H]})
for n in range(VL):
    b = v + "encoder.blocks.%d." % n
    t.update({b + "norm0.weight": [VH], b + "norm0.bias": [VH], b + "norm1.weight": [VH],
              b + "norm1.bias": [VH], b + "wqkv.weight": [3 * VH, VH], b + "wqkv.bias": [3 * VH],
              b + "wo.weight": [VH, VH], b + "wo.bias": [VH],
              b + "mlp.fc0.weight": [VI, VH], b + "mlp.fc0.bias": [VI],
              b + "mlp.fc1.weight": [VH, VI], b + "mlp.fc1.bias": [VH]})
st.write_sparse(os.path.join(out, "model.safetensors"), t)
PY

L=language_model.model.layers.60
B=vision_tower.encoder.blocks.26
for tp in 8 16; do
	expect_exit 0 "$WSHARD" convert --dry-run --tp "$tp" "$src" "$T/dest" || continue
	cp "$T/out" "$T/plan-$tp"
	[ -e "$T/dest" ] && fail "tp $tp: --dry-run created OUT"
	has $L.self_attn.mla_attn.q_b_proj.weight "$tp" "[$((12288 / tp)), 1536]"
	has $L.self_attn.fused_qkv_a_proj.weight "$tp" "[2112, 7168]"
	has $L.mlp.experts.routed_experts.w13_weight "$tp" "[384, $((4096 / tp)), 7168]"
	has $L.mlp.experts.routed_experts.w2_weight "$tp" "[384, 7168, $((2048 / tp))]"
	# q, k and v each cut by the 16 heads of 72
	has $B.wqkv.weight "$tp" "[$((3456 / tp)), 1152]"
	has $B.mlp.fc0.weight "$tp" "[$((4304 / tp)), 1152]"
	has $B.wo.weight "$tp" "[1152, $((1152 / tp))]"
	has mm_projector.linear_1.weight "$tp" "[4608, 4608]"
done
expect_exit 0 "$WSHARD" convert --dry-run --tp 8 --expert-parallel "$src" "$T/dest" &&
	cp "$T/out" "$T/plan-ep" &&
	has $L.mlp.experts.routed_experts.w13_weight ep "[48, 4096, 7168]"
expect_exit 3 "$WSHARD" convert --dry-run --tp 32 "$src" "$T/dest" &&
	err_has "tp 32" "vision_config.num_attention_heads=16 is not divisible by --tp 32" &&
	one_line "tp 32"

# As shipped: routed experts INT4 (pack-quantized, groups of 32), the rest
# left BF16 by the quantization config's ignore list.
py_st "$src" <<'PY' || fail "writing the INT4 checkpoint failed"
import json, os, sys
out = sys.argv[1]
import st
cfg = json.load(open(os.path.join(out, "config.json")))
q = {"quant_method": "compressed-tensors", "format": "pack-quantized",
     "quantization_status": "compressed",
     "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                   "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                                               "strategy": "group", "group_size": 32,
                                               "dynamic": False, "actorder": None}}},
     "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]}
cfg["quantization_config"] = q
cfg["text_config"]["quantization_config"] = q
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f)
hdr = st.read_header(os.path.join(out, "model.safetensors"))
t, i32 = {}, {}
for k, v in hdr.items():
    s = v["shape"]
    if ".mlp.experts." in k:
        base = k[:-len(".weight")]
        i32[base + ".weight_packed"] = [s[0], s[1] // 8]
        t[base + ".weight_scale"] = [s[0], s[1] // 32]
        i32[base + ".weight_shape"] = [2]
    else:
        t[k] = s
os.remove(os.path.join(out, "model.safetensors"))
st.write_sparse(os.path.join(out, "model-00001-of-00002.safetensors"), t)
st.write_sparse(os.path.join(out, "model-00002-of-00002.safetensors"), i32, "I32", 4)
wm = {k: "model-00001-of-00002.safetensors" for k in t}
wm.update({k: "model-00002-of-00002.safetensors" for k in i32})
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {}, "weight_map": wm}, f)
PY
E=$L.mlp.experts.routed_experts
for tp in 8 16; do
	expect_exit 0 "$WSHARD" convert --dry-run --tp "$tp" "$src" "$T/dest" || continue
	cp "$T/out" "$T/plan-int4-$tp"
	# 2I/tp rows of H/8 words; one scale per 32 columns; weight_shape in
	# the model's dtype, as vLLM's FusedMoE makes it
	for want in "w13_weight_packed I32 [384, $((4096 / tp)), 896]" \
		"w13_weight_scale BF16 [384, $((4096 / tp)), 224]" \
		"w2_weight_packed I32 [384, 7168, $((256 / tp))]" \
		"w2_weight_scale BF16 [384, 7168, $((64 / tp))]" \
		"w13_weight_shape BF16 [384, 2]" "w2_weight_shape BF16 [384, 2]"; do
		grep -qF "  $E.$want " "$T/plan-int4-$tp" ||
			fail "INT4 tp $tp: not $want: $(grep -F "  $E.${want%% *} " "$T/plan-int4-$tp")"
	done
	has $L.self_attn.mla_attn.o_proj.weight "int4-$tp" "[7168, $((8192 / tp))]"
done
expect_exit 0 "$WSHARD" convert --dry-run --tp 8 --expert-parallel "$src" "$T/dest" &&
	grep -qF "  $E.w13_weight_packed I32 [48, 4096, 896] " "$T/out" ||
	fail "INT4 expert parallel: $(grep -F "  $E.w13_weight_packed " "$T/out" | head -n 1)"
finish
