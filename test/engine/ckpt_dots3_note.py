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

The towers under vision_encoder. (vLLM's DotsMoEVitModel, nvidia/vision.py:
a patch embedding, blocks with fused qkv, q/k norms and SwiGLU MLPs fc1/fc2/
fc3, the MoE blocks' experts, F32 gate_weight and router_bias as
pyramid_num_routed says, the post-trunk norm and the pixel-shuffle adapter)
and audio_encoder. (Dots3NoteAudioModel, nvidia/audio.py: the conv2d stem,
Whisper-like layers with RoPE and RMSNorm, the adapter), in F32, with
vision_config and audio_config (vLLM builds each tower only where
config.json has its section).  The vision config says sdpa and no FP8
experts (the release's FlashAttention 3 and FP8 expert path are vLLM's
forward and post-load repacking, not its loaded state).  vLLM's __init__
reads the image pad token's id from added_tokens.json, its processor
preprocessor_config.json's vision_config.
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
VISION = dict(embed_dim=64, hidden_size=64, intermediate_size=128, moe_intermediate_size=64,
              num_hidden_layers=2, num_attention_heads=2, num_channels=3, patch_size=14,
              spatial_merge_size=2, temporal_patch_size=1, use_bias=False, use_qk_norm=True,
              pyramid_num_routed=[0, 4], capacity_factor=2.0, router_scoring_func="sigmoid",
              adapter_in_dim=64, adapter_out_dim=H, adapter_merge_size=2,
              adapter_type="pixel_shuffle_mlp", attn_implementation="sdpa",
              enable_fp8_moe=False, enable_torch_compile=False)
AUDIO = dict(whisper_config=dict(d_model=64, encoder_layers=2, encoder_attention_heads=2,
                                 encoder_ffn_dim=128, num_mel_bins=128,
                                 max_source_positions=1500),
             whisper_adapter_in_dim=64, whisper_adapter_out_dim=H, downsample_hidden_size=32)
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


def towers(t, rnd):
    """The towers' tensors, F32, as vLLM's modules name them."""
    f = dict(dtype="f32")
    v, d = "vision_encoder.", VISION["embed_dim"]
    p = VISION["patch_size"]
    t[v + "patch_embed.proj.weight"] = rnd(d, 3, p, p, **f)
    t[v + "patch_embed.proj.bias"] = rnd(d, **f)
    t[v + "patch_embed.norm.weight"] = rnd(d, one=True, **f)
    hd = d // VISION["num_attention_heads"]
    for n, routed in enumerate(VISION["pyramid_num_routed"]):
        b = v + f"blocks.{n}."
        t[b + "attn.qkv.weight"] = rnd(3 * d, d, **f)
        t[b + "attn.proj.weight"] = rnd(d, d, **f)
        t[b + "attn.q_norm.weight"] = rnd(hd, one=True, **f)
        t[b + "attn.k_norm.weight"] = rnd(hd, one=True, **f)
        t[b + "norm_1.weight"] = rnd(d, one=True, **f)
        t[b + "norm_2.weight"] = rnd(d, one=True, **f)
        if not routed:
            i = VISION["intermediate_size"]
            t[b + "mlp.fc1.weight"] = rnd(i, d, **f)
            t[b + "mlp.fc2.weight"] = rnd(d, i, **f)
            t[b + "mlp.fc3.weight"] = rnd(i, d, **f)
            continue
        i = VISION["moe_intermediate_size"]
        t[b + "mlp.gate_weight"] = rnd(routed, d, **f)
        t[b + "mlp.router_bias"] = rnd(routed, **f)
        for e in range(routed):
            t[b + f"mlp.experts.{e}.fc1.weight"] = rnd(i, d, **f)
            t[b + f"mlp.experts.{e}.fc2.weight"] = rnd(d, i, **f)
            t[b + f"mlp.experts.{e}.fc3.weight"] = rnd(i, d, **f)
    t[v + "post_trunk_norm.weight"] = rnd(d, one=True, **f)
    m = d * VISION["adapter_merge_size"] ** 2
    t[v + "adapter.proj.0.weight"] = rnd(m, one=True, **f)
    t[v + "adapter.proj.0.bias"] = rnd(m, **f)
    t[v + "adapter.proj.1.weight"] = rnd(H, m, **f)
    t[v + "adapter.proj.1.bias"] = rnd(H, **f)
    t[v + "adapter.proj.3.weight"] = rnd(H, H, **f)
    t[v + "adapter.proj.3.bias"] = rnd(H, **f)
    a, w = "audio_encoder.", AUDIO["whisper_config"]
    d, c = w["d_model"], AUDIO["downsample_hidden_size"]
    s = a + "dots_encoder.speech_encoder."
    t[s + "conv2d1.weight"] = rnd(c, 1, 3, 3, **f)
    t[s + "conv2d1.bias"] = rnd(c, **f)
    for k in ("conv2d2", "conv2d3"):
        t[s + k + ".weight"] = rnd(c, c, 3, 3, **f)
        t[s + k + ".bias"] = rnd(c, **f)
    t[s + "conv_out.weight"] = rnd(d, c * w["num_mel_bins"] // 8, **f)
    for n in range(w["encoder_layers"]):
        b = s + f"layers.{n}."
        for k in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t[b + f"self_attn.{k}.weight"] = rnd(d, d, **f)
            if k != "k_proj":
                t[b + f"self_attn.{k}.bias"] = rnd(d, **f)
        t[b + "self_attn_layer_norm.weight"] = rnd(d, one=True, **f)
        t[b + "fc1.weight"] = rnd(w["encoder_ffn_dim"], d, **f)
        t[b + "fc1.bias"] = rnd(w["encoder_ffn_dim"], **f)
        t[b + "fc2.weight"] = rnd(d, w["encoder_ffn_dim"], **f)
        t[b + "fc2.bias"] = rnd(d, **f)
        t[b + "final_layer_norm.weight"] = rnd(d, one=True, **f)
    t[s + "layer_norm.weight"] = rnd(d, one=True, **f)
    t[a + "audio_adapter.proj.0.weight"] = rnd(d, one=True, **f)
    t[a + "audio_adapter.proj.0.bias"] = rnd(d, **f)
    t[a + "audio_adapter.proj.1.weight"] = rnd(H, d, **f)
    t[a + "audio_adapter.proj.1.bias"] = rnd(H, **f)
    t[a + "audio_adapter.proj.3.weight"] = rnd(H, H, **f)
    t[a + "audio_adapter.proj.3.bias"] = rnd(H, **f)


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
    towers(t, rnd)
    # two shards as a release has them, the MTP layer in the last
    mtp = [k for k in t if k.startswith((p, "model.mtp."))]
    save_shards(out, t, [sorted(k for k in t if k not in mtp), sorted(mtp)])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(c, vision_config=VISION, audio_config=AUDIO), f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}, f)

    class C:
        def get_text_config(self):
            return type("T", (), {"vocab_size": V})()
    tok = word_tokenizer(C(), SPECIAL, "<pad>", "<eos>", "<bos>", "<unk>")
    tok.save_pretrained(out)
    # the image processor's settings, which vLLM's processor reads
    # (common/processor.py: preprocessor_config.json's vision_config), small
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump({"vision_config": {
            "min_pixels": 56 * 56, "max_pixels": 112 * 112, "patch_size": VISION["patch_size"],
            "temporal_patch_size": 1, "merge_size": 2,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711]}}, f, indent=2)
    with open(os.path.join(out, "added_tokens.json"), "w") as f:
        json.dump({k: v for k, v in SPECIAL.items() if v >= 990}, f, indent=2)
