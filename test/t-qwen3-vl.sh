#!/bin/sh
# Qwen3-VL-MoE at full size: a checkpoint with the dimensions of
# Qwen/Qwen3-VL-30B-A3B-Instruct's config.json (48 layers, 128 experts of
# 768 fused as Qwen stores them, 32 heads and 4 kv heads of 128, a tower of
# 27 blocks with deepstack mergers after blocks 8, 16 and 24) and its tensor
# names and shapes, written sparse (62 GB of holes), planned with --dry-run
# at tp 1, 2, 4 and 8 and with --expert-parallel at tp 8.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

src=$T/qwen3-vl-30b-a3b
mkdir -p "$src"
py_st "$src" <<'PY' || fail "writing the sparse checkpoint failed"
import json, os, sys
out = sys.argv[1]
import st
H, L, NH, KV, HD, E, MI, V = 2048, 48, 32, 4, 128, 128, 768, 151936
VH, VI, VD, P, M, OH = 1152, 4304, 27, 16, 2, 2048
cfg = {"architectures": ["Qwen3VLMoeForConditionalGeneration"], "model_type": "qwen3_vl_moe",
       "image_token_id": 151655, "video_token_id": 151656,
       "vision_start_token_id": 151652, "vision_end_token_id": 151653,
       "tie_word_embeddings": False,
       "text_config": {"model_type": "qwen3_vl_moe_text", "hidden_size": H,
                       "num_hidden_layers": L, "num_attention_heads": NH,
                       "num_key_value_heads": KV, "head_dim": HD, "intermediate_size": 6144,
                       "num_experts": E, "num_experts_per_tok": 8,
                       "moe_intermediate_size": MI, "decoder_sparse_step": 1,
                       "mlp_only_layers": [], "norm_topk_prob": True, "vocab_size": V,
                       "rms_norm_eps": 1e-06, "dtype": "bfloat16",
                       "rope_scaling": {"mrope_interleaved": True,
                                        "mrope_section": [24, 20, 20], "rope_type": "default"},
                       "rope_theta": 5000000},
       "vision_config": {"model_type": "qwen3_vl_moe", "depth": VD, "hidden_size": VH,
                         "intermediate_size": VI, "num_heads": 16, "in_channels": 3,
                         "patch_size": P, "spatial_merge_size": M, "temporal_patch_size": 2,
                         "out_hidden_size": OH, "num_position_embeddings": 2304,
                         "deepstack_visual_indexes": [8, 16, 24], "hidden_act": "gelu_pytorch_tanh"}}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f)
t = {"model.language_model.embed_tokens.weight": [V, H], "lm_head.weight": [V, H],
     "model.language_model.norm.weight": [H]}
for n in range(L):
    p = "model.language_model.layers.%d." % n
    t.update(st.attention_shapes(p, H, NH, KV, HD))
    t[p + "self_attn.q_norm.weight"] = [HD]
    t[p + "self_attn.k_norm.weight"] = [HD]
    t[p + "mlp.gate.weight"] = [E, H]
    t[p + "mlp.experts.gate_up_proj"] = [E, H, 2 * MI]
    t[p + "mlp.experts.down_proj"] = [E, MI, H]
v = "model.visual."
t[v + "patch_embed.proj.weight"] = [VH, 3, 2, P, P]
t[v + "patch_embed.proj.bias"] = [VH]
t[v + "pos_embed.weight"] = [2304, VH]
for n in range(VD):
    b = v + "blocks.%d." % n
    for nm in ("norm1", "norm2"):
        t[b + nm + ".weight"] = [VH]
        t[b + nm + ".bias"] = [VH]
    t[b + "attn.qkv.weight"] = [3 * VH, VH]
    t[b + "attn.qkv.bias"] = [3 * VH]
    t[b + "attn.proj.weight"] = [VH, VH]
    t[b + "attn.proj.bias"] = [VH]
    t[b + "mlp.linear_fc1.weight"] = [VI, VH]
    t[b + "mlp.linear_fc1.bias"] = [VI]
    t[b + "mlp.linear_fc2.weight"] = [VH, VI]
    t[b + "mlp.linear_fc2.bias"] = [VH]
W = VH * M * M
for m, norm in [("merger.", VH)] + [("deepstack_merger_list.%d." % i, W) for i in range(3)]:
    t[v + m + "norm.weight"] = [norm]
    t[v + m + "norm.bias"] = [norm]
    t[v + m + "linear_fc1.weight"] = [W, W]
    t[v + m + "linear_fc1.bias"] = [W]
    t[v + m + "linear_fc2.weight"] = [OH, W]
    t[v + m + "linear_fc2.bias"] = [OH]
st.write_sparse(os.path.join(out, "model.safetensors"), t)
PY

L=language_model.model.layers.47
# q/k/v rows a rank: 32 heads and 4 kv heads of 128; at tp 8 each kv head
# is on two ranks
for tq in 1:5120 2:2560 4:1280 8:768; do
	tp=${tq%:*}
	expect_exit 0 "$WSHARD" convert --dry-run --tp "$tp" "$src" "$T/dest" || continue
	cp "$T/out" "$T/plan-$tp"
	[ -e "$T/dest" ] && fail "tp $tp: --dry-run created OUT"
	has $L.self_attn.qkv_proj.weight "$tp" "[${tq#*:}, 2048]"
	has $L.mlp.experts.routed_experts.w13_weight "$tp" "[128, $((1536 / tp)), 2048]"
	has $L.mlp.experts.routed_experts.w2_weight "$tp" "[128, 2048, $((768 / tp))]"
	has language_model.lm_head.weight "$tp" "[$((151936 / tp)), 2048]"
	has visual.blocks.26.attn.qkv.weight "$tp" "[$((3456 / tp)), 1152]"
	has visual.deepstack_merger_list.2.linear_fc1.weight "$tp" "[$((4608 / tp)), 4608]"
	has visual.deepstack_merger_list.2.linear_fc2.weight "$tp" "[2048, $((4608 / tp))]"
done
# expert parallel at tp 8: 16 whole experts a rank
expect_exit 0 "$WSHARD" convert --dry-run --tp 8 --expert-parallel "$src" "$T/dest" &&
	cp "$T/out" "$T/plan-ep" && has $L.mlp.experts.routed_experts.w13_weight ep "[16, 1536, 2048]"
# tp 16 divides everything (each kv head on 4 ranks, 269 rows of the
# tower's MLP, 48 columns of each expert's down_proj)
expect_exit 0 "$WSHARD" convert --dry-run --tp 16 "$src" "$T/dest" && cp "$T/out" "$T/plan-16" &&
	has $L.mlp.experts.routed_experts.w2_weight 16 "[128, 2048, 48]"
# tp 32: the tower's MLP does not
expect_exit 3 "$WSHARD" convert --dry-run --tp 32 "$src" "$T/dest" &&
	err_has "tp 32" "vision_config.intermediate_size=4304 is not divisible by --tp 32"
finish
