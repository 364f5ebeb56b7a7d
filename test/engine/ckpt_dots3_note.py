"""rednote-hilab's dots3 NOTE (Dots3NoteForCausalLM) as vLLM 0.32 reads it,
tiny, its text model and multi-token-prediction layer.

transformers 5.19 has no dots3 class (it has Dots1 for dots.llm1, a plain
DeepSeek-V3-like MoE); model_type dots3_note is vLLM's own config
(vllm/transformers_utils/configs/dots3_note.py: DeepseekV3Config with
n_group/topk_group 1, indexer_rope_interleave and num_nextn_predict_layers
1 by default), and its model (vllm/models/dots3_note/nvidia) reads the
names written here, from a fixed seed:

  - layer_types "sliding_attention" layers: SWA MLA with their own widths
    (swa_num_attention_heads, swa_q_lora_rank, swa_kv_lora_rank,
    swa_qk_nope/rope_head_dim, swa_v_head_dim), an output gate g_proj
    (swa_attention_gate_type: "headwise" [heads, H], else [heads*v, H])
    and k_rope_only_layernorm [rope]; the indexer tensors a sliding layer
    ships are dropped by vLLM (model.py _adapt_weights);
  - "full_attention" layers: DeepSeek-V3.2's DSA (MLA with the indexer:
    wq_b, wk, weights_proj, k_norm weight and bias), with g_proj
    (attention_gate_type) and k_rope_only_layernorm;
  - DeepSeek's MoE from first_k_dense_replace on (router, F32 correction
    bias, experts, n_shared_experts shared experts), dense MLPs before;
  - one MTP layer model.layers.{L} (sliding attention, mtp_layer_types'
    default; a dense MLP: vLLM's Dots3NoteDecoderLayer builds experts only
    below num_hidden_layers), enorm, hnorm, eh_proj, shared_head.norm and
    .head, and the MTP embedding at model.mtp.embed_tokens (nvidia/mtp.py
    _adapt_weights).

No vision_config or audio_config: vLLM builds no tower then (its mapper
drops visual./audio_tower.).  vLLM's __init__ reads the image pad token's id
from added_tokens.json.
"""
import json
import os

H, V, L = 256, 1000, 2
CONFIG = dict(
    architectures=["Dots3NoteForCausalLM"], model_type="dots3_note",
    vocab_size=V, hidden_size=H, intermediate_size=384, moe_intermediate_size=128,
    num_hidden_layers=L, num_attention_heads=4, num_key_value_heads=4,
    q_lora_rank=128, kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=64,
    v_head_dim=64, attention_gate_type="headwise",
    swa_num_attention_heads=8, swa_q_lora_rank=96, swa_kv_lora_rank=192,
    swa_qk_nope_head_dim=32, swa_qk_rope_head_dim=64, swa_v_head_dim=32,
    swa_attention_gate_type="elementwise", swa_rope_theta=10000.0,
    sliding_window_size=64, layer_types=["sliding_attention", "full_attention"],
    apply_mla_qkv_lora_rescale=True,
    index_n_heads=4, index_head_dim=128, index_topk=64,
    n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=2,
    first_k_dense_replace=1, moe_layer_freq=1, n_group=1, topk_group=1,
    routed_scaling_factor=2.5, norm_topk_prob=True, topk_method="noaux_tc",
    scoring_func="sigmoid", hidden_act="silu", rms_norm_eps=1e-6,
    max_position_embeddings=512, rope_theta=10000.0, num_nextn_predict_layers=1,
    tie_word_embeddings=False, bos_token_id=2, eos_token_id=1, pad_token_id=0,
    dtype="bfloat16")
SPECIAL = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
           "<|img|>": 990, "<|imgpad|>": 991, "<|endofimg|>": 992,
           "<|audio_comp_start|>": 993, "<|audio_comp_pad|>": 994,
           "<|audio_comp_end|>": 995, "<|video_pad|>": 996}


def attention(t, p, c, rnd, sliding):
    s = "swa_" if sliding else ""
    heads = c[s + "num_attention_heads"]
    ql, kl = c[s + "q_lora_rank"], c[s + "kv_lora_rank"]
    nope, rope, v = c[s + "qk_nope_head_dim"], c[s + "qk_rope_head_dim"], c[s + "v_head_dim"]
    gate = c[s + "attention_gate_type"]
    a = p + "self_attn."
    t[a + "q_a_proj.weight"] = rnd(ql, H)
    t[a + "q_a_layernorm.weight"] = rnd(ql, one=True)
    t[a + "q_b_proj.weight"] = rnd(heads * (nope + rope), ql)
    t[a + "kv_a_proj_with_mqa.weight"] = rnd(kl + rope, H)
    t[a + "kv_a_layernorm.weight"] = rnd(kl, one=True)
    t[a + "kv_b_proj.weight"] = rnd(heads * (nope + v), kl)
    t[a + "o_proj.weight"] = rnd(H, heads * v)
    t[a + "g_proj.weight"] = rnd(heads if gate == "headwise" else heads * v, H)
    t[a + "k_rope_only_layernorm.weight"] = rnd(rope, one=True)
    # the indexer: a sliding layer's too, as the release ships it (vLLM
    # drops those)
    i = a + "indexer."
    t[i + "wq_b.weight"] = rnd(c["index_n_heads"] * c["index_head_dim"], c["q_lora_rank"])
    t[i + "wk.weight"] = rnd(c["index_head_dim"], H)
    t[i + "weights_proj.weight"] = rnd(c["index_n_heads"], H)
    t[i + "k_norm.weight"] = rnd(c["index_head_dim"], one=True, dtype="f32")
    t[i + "k_norm.bias"] = rnd(c["index_head_dim"], dtype="f32")


def mlp(t, p, c, rnd, moe):
    m = p + "mlp."
    if not moe:
        I = c["intermediate_size"]
        t[m + "gate_proj.weight"] = rnd(I, H)
        t[m + "up_proj.weight"] = rnd(I, H)
        t[m + "down_proj.weight"] = rnd(H, I)
        return
    I, E = c["moe_intermediate_size"], c["n_routed_experts"]
    t[m + "gate.weight"] = rnd(E, H)
    t[m + "gate.e_score_correction_bias"] = rnd(E, dtype="f32")
    for e in range(E):
        t[m + f"experts.{e}.gate_proj.weight"] = rnd(I, H)
        t[m + f"experts.{e}.up_proj.weight"] = rnd(I, H)
        t[m + f"experts.{e}.down_proj.weight"] = rnd(H, I)
    S = I * c["n_shared_experts"]
    t[m + "shared_experts.gate_proj.weight"] = rnd(S, H)
    t[m + "shared_experts.up_proj.weight"] = rnd(S, H)
    t[m + "shared_experts.down_proj.weight"] = rnd(H, S)


def make(out):
    import torch
    from ckpt_io import save_shards
    from make_ckpt import word_tokenizer
    os.makedirs(out, exist_ok=True)
    c = CONFIG
    g = torch.Generator().manual_seed(3303)

    def rnd(*shape, one=False, dtype="bf16"):
        x = torch.randn(*shape, generator=g) * 0.02
        x = x + 1 if one else x
        return x.to(torch.float32 if dtype == "f32" else torch.bfloat16)

    t = {"model.embed_tokens.weight": rnd(V, H), "model.norm.weight": rnd(H, one=True),
         "lm_head.weight": rnd(V, H)}
    for n in range(L + 1):
        p = f"model.layers.{n}."
        t[p + "input_layernorm.weight"] = rnd(H, one=True)
        t[p + "post_attention_layernorm.weight"] = rnd(H, one=True)
        sliding = n >= L or c["layer_types"][n] == "sliding_attention"
        attention(t, p, c, rnd, sliding)
        if n >= L:
            for k in [k for k in t if k.startswith(p + "self_attn.indexer.")]:
                del t[k]
        mlp(t, p, c, rnd, c["first_k_dense_replace"] <= n < L)
    p = f"model.layers.{L}."
    t[p + "enorm.weight"] = rnd(H, one=True)
    t[p + "hnorm.weight"] = rnd(H, one=True)
    t[p + "eh_proj.weight"] = rnd(H, 2 * H)
    t[p + "shared_head.norm.weight"] = rnd(H, one=True)
    t[p + "shared_head.head.weight"] = rnd(V, H)
    t["model.mtp.embed_tokens.weight"] = rnd(V, H)
    # two shards as a release has them, the MTP layer in the last
    mtp = [k for k in t if k.startswith((p, "model.mtp."))]
    save_shards(out, t, [sorted(k for k in t if k not in mtp), sorted(mtp)])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}, f)

    class C:
        def get_text_config(self):
            return type("T", (), {"vocab_size": V})()
    tok = word_tokenizer(C(), SPECIAL, "<pad>", "<eos>", "<bos>", "<unk>")
    tok.save_pretrained(out)
    with open(os.path.join(out, "added_tokens.json"), "w") as f:
        json.dump({k: v for k, v in SPECIAL.items() if v >= 990}, f, indent=2)
