#!/bin/sh
# Gemma 3 with its vision tower at full size: a checkpoint with
# google/gemma-3-4b-it's config.json (its text_config names neither the
# heads, the kv heads, head_dim nor the vocabulary; its vision_config not
# num_channels) and its tensor names and shapes, written sparse (8.6 GB of
# holes), planned with --dry-run at tp 1, 2, 4 and 8.  The rules' defaults
# (transformers' Gemma3TextConfig and SiglipVisionConfig) fill the gaps as
# transformers and vLLM do; without them the plan would stop at the first
# missing key.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

src=$T/gemma-3-4b
mkdir -p "$src"
py_st "$src" <<'PY' || fail "writing the sparse checkpoint failed"
import json, os, sys
out = sys.argv[1]
import st
cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
       "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
       "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
       "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
                       "model_type": "gemma3_text", "num_hidden_layers": 34,
                       "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                       "sliding_window": 1024},
       "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
       "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                         "model_type": "siglip_vision_model", "num_attention_heads": 16,
                         "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f)
H, I, V, L, HD = 2560, 10240, 262208, 34, 256
VH, VI = 1152, 4304
t = {"language_model.model.embed_tokens.weight": [V, H],
     "language_model.model.norm.weight": [H]}
for n in range(L):
    p = "language_model.model.layers.%d." % n
    for nm in ("input_layernorm", "post_attention_layernorm",
               "pre_feedforward_layernorm", "post_feedforward_layernorm"):
        t[p + nm + ".weight"] = [H]
    t[p + "self_attn.q_proj.weight"] = [8 * HD, H]
    t[p + "self_attn.k_proj.weight"] = [4 * HD, H]
    t[p + "self_attn.v_proj.weight"] = [4 * HD, H]
    t[p + "self_attn.o_proj.weight"] = [H, 8 * HD]
    t[p + "self_attn.q_norm.weight"] = [HD]
    t[p + "self_attn.k_norm.weight"] = [HD]
    t[p + "mlp.gate_proj.weight"] = [I, H]
    t[p + "mlp.up_proj.weight"] = [I, H]
    t[p + "mlp.down_proj.weight"] = [H, I]
P = "vision_tower.vision_model."
t[P + "embeddings.patch_embedding.weight"] = [VH, 3, 14, 14]
t[P + "embeddings.patch_embedding.bias"] = [VH]
t[P + "embeddings.position_embedding.weight"] = [4096, VH]
for n in range(27):
    e = P + "encoder.layers.%d." % n
    for nm in ("layer_norm1", "layer_norm2", "self_attn.out_proj", "mlp.fc2"):
        t[e + nm + ".bias"] = [VH]
    for nm in ("layer_norm1", "layer_norm2"):
        t[e + nm + ".weight"] = [VH]
    for q in "qkv":
        t[e + "self_attn.%s_proj.weight" % q] = [VH, VH]
        t[e + "self_attn.%s_proj.bias" % q] = [VH]
    t[e + "self_attn.out_proj.weight"] = [VH, VH]
    t[e + "mlp.fc1.weight"] = [VI, VH]
    t[e + "mlp.fc1.bias"] = [VI]
    t[e + "mlp.fc2.weight"] = [VH, VI]
t[P + "post_layernorm.weight"] = [VH]
t[P + "post_layernorm.bias"] = [VH]
t["multi_modal_projector.mm_input_projection_weight"] = [VH, H]
t["multi_modal_projector.mm_soft_emb_norm.weight"] = [VH]
st.write_sparse(os.path.join(out, "model.safetensors"), t)
PY

# q/k/v rows a rank: 8 heads and 4 kv heads of 256 (the defaults); at
# tp 8 each kv head is on two ranks
for tq in 1:4096 2:2048 4:1024 8:768; do
	tp=${tq%:*}
	expect_exit 0 "$WSHARD" convert --dry-run --tp "$tp" "$src" "$T/dest" || continue
	cp "$T/out" "$T/plan-$tp"
	[ -e "$T/dest" ] && fail "tp $tp: --dry-run created OUT"
	has language_model.model.layers.33.self_attn.qkv_proj.weight "$tp" "[${tq#*:}, 2560]"
	has language_model.lm_head.weight "$tp" "[$((262208 / tp)), 2560]"
	has vision_tower.vision_model.encoder.layers.26.self_attn.qkv_proj.weight "$tp" "[$((3456 / tp)), 1152]"
	has vision_tower.vision_model.encoder.layers.26.mlp.fc1.bias "$tp" "[$((4304 / tp))]"
	has vision_tower.vision_model.embeddings.patch_embedding.weight "$tp" "[1152, 3, 14, 14]"
done
# tp 16: 8 attention heads cannot be split 16 ways (vLLM asserts it too)
expect_exit 3 "$WSHARD" convert --dry-run --tp 16 "$src" "$T/dest" &&
	err_has "tp 16" "num_attention_heads"
finish
