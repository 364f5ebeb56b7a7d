#!/bin/sh
# LongCat-Flash at full size: a checkpoint with the dimensions of
# meituan-longcat/LongCat-Flash-Chat's config.json (28 layers of two MLA
# blocks and two dense MLPs beside 512 routed experts of 2048 and 256
# zero-computation ones, 64 heads) and its tensor names and shapes, written
# sparse, planned with --dry-run at tp 8 and 16 and with --expert-parallel
# at tp 8, its MTP layer (model.mtp.*) left out, and its MTP draft
# (LongCatFlashMTPModel) at tp 8; the MLA LoRA norms multiplied as vLLM multiplies them
# (sqrt(6144 / 1536) = 2 and sqrt(6144 / 512)), or not without
# mla_scale_*_lora.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

src=$T/longcat-flash
mkdir -p "$src"
py_st "$src" <<'PY' || fail "writing the sparse checkpoint failed"
import json, os, sys
out = sys.argv[1]
import st
H, L, NH, QL, KL, NOPE, ROPE, VD = 6144, 28, 64, 1536, 512, 128, 64, 128
F, EF, E, Z, V = 12288, 2048, 512, 256, 131072
cfg = {"architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash",
       "hidden_size": H, "num_layers": L, "num_attention_heads": NH, "q_lora_rank": QL,
       "kv_lora_rank": KL, "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE,
       "v_head_dim": VD, "ffn_hidden_size": F, "expert_ffn_hidden_size": EF,
       "n_routed_experts": E, "zero_expert_num": Z, "zero_expert_type": "identity",
       "moe_topk": 12, "vocab_size": V, "mla_scale_q_lora": True, "mla_scale_kv_lora": True,
       "routed_scaling_factor": 6.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f)
t = {"model.embed_tokens.weight": [V, H], "lm_head.weight": [V, H], "model.norm.weight": [H]}
for n in range(L):
    p = "model.layers.%d." % n
    for b in range(2):
        a = p + "self_attn.%d." % b
        t[p + "input_layernorm.%d.weight" % b] = [H]
        t[p + "post_attention_layernorm.%d.weight" % b] = [H]
        t[a + "q_a_proj.weight"] = [QL, H]
        t[a + "q_a_layernorm.weight"] = [QL]
        t[a + "q_b_proj.weight"] = [NH * (NOPE + ROPE), QL]
        t[a + "kv_a_proj_with_mqa.weight"] = [KL + ROPE, H]
        t[a + "kv_a_layernorm.weight"] = [KL]
        t[a + "kv_b_proj.weight"] = [NH * (NOPE + VD), KL]
        t[a + "o_proj.weight"] = [H, NH * VD]
        m = p + "mlps.%d." % b
        t[m + "gate_proj.weight"] = [F, H]
        t[m + "up_proj.weight"] = [F, H]
        t[m + "down_proj.weight"] = [H, F]
    t[p + "mlp.router.classifier.weight"] = [E + Z, H]
    t[p + "mlp.router.e_score_correction_bias"] = [E + Z]
    for e in range(E):
        x = p + "mlp.experts.%d." % e
        t[x + "gate_proj.weight"] = [EF, H]
        t[x + "up_proj.weight"] = [EF, H]
        t[x + "down_proj.weight"] = [H, EF]
# the MTP layer under the release's names (vLLM's longcat_flash_mtp.py)
m = "model.mtp.layers.0."
t.update({"model.mtp.embed_tokens.weight": [V, H], "model.mtp.norm.weight": [H],
          m + "eh_proj.weight": [H, 2 * H], m + "enorm.m.weight": [H], m + "hnorm.m.weight": [H],
          m + "input_layernorm.weight": [H], m + "post_attention_layernorm.weight": [H],
          m + "self_attn.q_a_proj.weight": [QL, H], m + "self_attn.q_a_layernorm.weight": [QL],
          m + "self_attn.q_b_proj.weight": [NH * (NOPE + ROPE), QL],
          m + "self_attn.kv_a_proj_with_mqa.weight": [KL + ROPE, H],
          m + "self_attn.kv_a_layernorm.weight": [KL],
          m + "self_attn.kv_b_proj.weight": [NH * (NOPE + VD), KL],
          m + "self_attn.o_proj.weight": [H, NH * VD],
          m + "transformer_layer.mlp.gate_proj.weight": [F, H],
          m + "transformer_layer.mlp.up_proj.weight": [F, H],
          m + "transformer_layer.mlp.down_proj.weight": [H, F]})
st.write_sparse(os.path.join(out, "model.safetensors"), t)
PY

L=model.layers.27
for tp in 8 16; do
	expect_exit 0 "$WSHARD" convert --dry-run --tp "$tp" "$src" "$T/dest" || continue
	cp "$T/out" "$T/plan-$tp"
	has $L.self_attn.1.mla_attn.q_b_proj.weight "$tp" "[$((12288 / tp)), 1536]"
	has $L.self_attn.1.mla_attn.o_proj.weight "$tp" "[6144, $((8192 / tp))]"
	has $L.self_attn.1.fused_qkv_a_proj.weight "$tp" "[2112, 6144]"
	has $L.mlps.1.gate_up_proj.weight "$tp" "[$((24576 / tp)), 6144]"
	has $L.mlp.experts.routed_experts.w13_weight "$tp" "[512, $((4096 / tp)), 6144]"
	has $L.mlp.experts.routed_experts.w2_weight "$tp" "[512, 6144, $((2048 / tp))]"
done
grep -qF "  $L.mlp.router.classifier.weight F32 [768, 6144] " "$T/plan-8" ||
	fail "the router is not F32 over 768 experts"
expect_exit 0 "$WSHARD" convert --dry-run --tp 8 --expert-parallel "$src" "$T/dest" &&
	cp "$T/out" "$T/plan-ep" &&
	has $L.mlp.experts.routed_experts.w13_weight ep "[64, 4096, 6144]"
grep -qF "model.mtp." "$T/plan-8" && fail "the target's plan holds the MTP layer"

# The MTP draft (LongCatFlashMTPModel): the one MTP layer as layer 56
# (2 * num_layers), its MLP dense, the draft's embedding cut by vocabulary.
D=model.layers.56
if expect_exit 0 "$WSHARD" convert --dry-run --tp 8 --architecture LongCatFlashMTPModel \
	"$src" "$T/dest-mtp"; then
	cp "$T/out" "$T/plan-mtp"
	has model.embed_tokens.weight mtp "[16384, 6144]"
	has $D.eh_proj.weight mtp "[6144, 12288]"
	has $D.final_layernorm.weight mtp "[6144]"
	has $D.mtp_block.self_attn.fused_qkv_a_proj.weight mtp "[2112, 6144]"
	has $D.mtp_block.self_attn.mla_attn.q_b_proj.weight mtp "[1536, 1536]"
	has $D.mtp_block.mlp.gate_up_proj.weight mtp "[3072, 6144]"
	has $D.mtp_block.mlp.down_proj.weight mtp "[6144, 1536]"
	grep -qF "lm_head" "$T/plan-mtp" && fail "the draft's plan holds an lm_head"
fi

# The norms' factors on real bytes: one small layer of the same config,
# every tensor zero but the norms, 1.0: q_a_layernorm times sqrt(64 / 32)
# (BF16 0x3fb5, 1.4140625), kv_a_layernorm times sqrt(64 / 16) (2.0); and
# without mla_scale_*_lora, as they are.
for scaled in true false; do
	py_st "$T/small-$scaled" "$scaled" <<'PY' || fail "writing the small checkpoint failed"
import json, os, sys
out, scaled = sys.argv[1], sys.argv[2] == "true"
import st
os.makedirs(out)
H, NH, QL, KL, D, F, EF, E, Z, V = 64, 2, 32, 16, 16, 64, 32, 2, 1, 128
cfg = {"architectures": ["LongcatFlashForCausalLM"], "hidden_size": H, "num_layers": 1,
       "num_attention_heads": NH, "q_lora_rank": QL, "kv_lora_rank": KL,
       "qk_nope_head_dim": D, "qk_rope_head_dim": D, "v_head_dim": D,
       "ffn_hidden_size": F, "expert_ffn_hidden_size": EF, "n_routed_experts": E,
       "zero_expert_num": Z, "vocab_size": V, "mla_scale_q_lora": scaled,
       "mla_scale_kv_lora": scaled, "tie_word_embeddings": False}
json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
shapes = {"model.embed_tokens.weight": [V, H], "lm_head.weight": [V, H],
          "model.norm.weight": [H]}
p = "model.layers.0."
for b in range(2):
    a = p + "self_attn.%d." % b
    shapes.update({p + "input_layernorm.%d.weight" % b: [H],
                   p + "post_attention_layernorm.%d.weight" % b: [H],
                   a + "q_a_proj.weight": [QL, H], a + "q_a_layernorm.weight": [QL],
                   a + "q_b_proj.weight": [NH * 2 * D, QL],
                   a + "kv_a_proj_with_mqa.weight": [KL + D, H],
                   a + "kv_a_layernorm.weight": [KL], a + "kv_b_proj.weight": [NH * 2 * D, KL],
                   a + "o_proj.weight": [H, NH * D],
                   p + "mlps.%d.gate_proj.weight" % b: [F, H],
                   p + "mlps.%d.up_proj.weight" % b: [F, H],
                   p + "mlps.%d.down_proj.weight" % b: [H, F]})
shapes.update({p + "mlp.router.classifier.weight": [E + Z, H],
               p + "mlp.router.e_score_correction_bias": [E + Z]})
for e in range(E):
    x = p + "mlp.experts.%d." % e
    shapes.update({x + "gate_proj.weight": [EF, H], x + "up_proj.weight": [EF, H],
                   x + "down_proj.weight": [H, EF]})
t = {}
for k, s in shapes.items():
    n = 1
    for d in s:
        n *= d
    one = k.endswith(("q_a_layernorm.weight", "kv_a_layernorm.weight"))
    t[k] = ("BF16", s, (b"\x80\x3f" if one else b"\0\0") * n)
st.write(os.path.join(out, "model.safetensors"), t)
PY
	expect_exit 0 "$WSHARD" convert -q --tp 1 "$T/small-$scaled" "$T/out-$scaled" || continue
	expect_exit 0 "$WSHARD" verify "$T/out-$scaled"
	py_st "$T/out-$scaled" "$scaled" <<'PY' || fail "$scaled: the norms are not multiplied as vLLM multiplies them"
import glob, json, os, sys
out, scaled = sys.argv[1], sys.argv[2] == "true"
import st
o = st.read(glob.glob(os.path.join(out, "*.safetensors")))
q = o["model.layers.0.self_attn.1.mla_attn.q_a_layernorm.weight"][2]
kv = o["model.layers.0.self_attn.0.kv_a_layernorm.weight"][2]
want = (b"\xb5\x3f", b"\x00\x40") if scaled else (b"\x80\x3f", b"\x80\x3f")
assert q == want[0] * 32 and kv == want[1] * 16, (q[:4], kv[:4])
m = json.load(open(os.path.join(out, "wshard.json")))
srcs = [s for t in m["ranks"][0]["tensors"] if t["name"].endswith("1.mla_attn.q_a_layernorm.weight")
        for s in t["sources"]]
assert (abs(srcs[0].get("times", 0) - 2 ** 0.5) < 1e-6) == scaled, srcs
PY
done
finish
