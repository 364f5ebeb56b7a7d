"""Ling 2.0 (BailingMoeV2ForCausalLM: inclusionAI Ling-mini-2.0,
Ling-flash-2.0, Ling-1T, Ring-*-2.0) and Ling 1.x (BailingMoeForCausalLM:
Ling-lite(-1.5), Ling-plus, Ling-Coder-lite) as the releases ship them,
tiny.  Both are remote code (model_type bailing_moe / bailing_moe_v2) that
transformers 5.19 lacks, and vLLM 0.32 registers no config class for them,
so config.json carries auto_map to a configuration_*.py written beside it
(a minimal class with the release's keys and defaults): vLLM needs
trust_remote_code for it.

The network is built with transformers' own Glm4MoeForCausalLM (GLM-4.5):
the same decoder as Ling 2.0 -- GQA, per-head RMSNorm on q and k before a
neox rope on half of each head, the first layers dense, then sigmoid-routed
experts with a correction bias, grouped top-k and one shared expert -- and
its tensors are rewritten into the release's names:

  model.embed_tokens                   -> model.word_embeddings
  layers.N.self_attn.q/k/v_proj        -> layers.N.attention.query_key_value
                                          (rows: all q heads, all k, all v;
                                          with their biases where use_qkv_bias)
  layers.N.self_attn.q_norm / k_norm   -> layers.N.attention.query_layernorm /
                                          key_layernorm (use_qk_norm only)
  layers.N.self_attn.o_proj            -> layers.N.attention.dense
  layers.N.mlp.gate.e_score_correction_bias -> layers.N.mlp.gate.expert_bias
                                          (F32, as released; only with
                                          moe_router_enable_expert_bias)
  everything else (norms, dense mlp.gate/up/down_proj, mlp.gate.weight,
  mlp.experts.E.*_proj, mlp.shared_experts.*_proj, model.norm, lm_head)
  keeps its name.

Variants (keywords of make): v1 (Ling 1.x: BailingMoeForCausalLM,
model_type bailing_moe, no qk norm, softmax routing without expert bias,
2 shared experts, no dense layer), tie (tie_word_embeddings, no lm_head),
mtp (num_nextn_predict_layers 1 and one MTP layer model.layers.L.* after the
L decoder layers, as llama.cpp's and SGLang's Ling 2.0 loaders expect it:
enorm, hnorm, eh_proj, final_layernorm beside a full MoE layer), qkv_bias
(use_qkv_bias: a query_key_value bias), router_dtype (None leaves the key
out: the router in the model's dtype), linear_bias (use_bias: biases on
query_key_value, attention.dense and the dense and shared MLPs), rmsnorm
(False: use_rmsnorm false, vLLM's qk norms become LayerNorms), norm_head
(v1: norm_head true, vLLM normalises lm_head on loading), shared (shared
experts: their width together is moe_shared_expert_intermediate_size),
bias_mean and bias_dtype (the expert bias's common offset and dtype).  No
tokenizer: vLLM runs token-id prompts with skip_tokenizer_init.
"""
import os

from ckpt_io import remote_config_py

# Ling 2.0's configuration keys and defaults (Param-2's release reuses them)
V2_DEFAULTS = dict(
    vocab_size=157184, hidden_size=2048, intermediate_size=5120, num_hidden_layers=20,
    num_attention_heads=16, num_key_value_heads=4, hidden_act='silu',
    use_qkv_bias=False, use_bias=False, rms_norm_eps=1e-06, tie_word_embeddings=False,
    embedding_dropout=0.0, attention_dropout=0.0, output_dropout=0.0,
    initializer_range=0.02, max_position_embeddings=32768, rope_theta=600000.0,
    use_cache=True, max_window_layers=20, rope_scaling=None, pad_token_id=156892,
    eos_token_id=156892, num_experts=256, num_shared_experts=1, num_experts_per_tok=8,
    n_group=8, topk_group=4, moe_intermediate_size=512, first_k_dense_replace=1,
    head_dim=128, output_router_logits=False, use_qk_norm=True,
    num_nextn_predict_layers=0, mtp_loss_scaling_factor=0,
    moe_router_enable_expert_bias=True, routed_scaling_factor=1.0)
V2_DERIVED = ["self.head_dim = self.head_dim or self.hidden_size // self.num_attention_heads"]
# and what Ling 2.5's and Ling 3's (hybrid, MLA) add alike
HYBRID_DEFAULTS = dict(
    V2_DEFAULTS, layer_group_size=5, kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64,
    v_head_dim=128, qk_nope_head_dim=128, rope_interleave=True, score_function='sigmoid',
    scoring_func='sigmoid', seq_aux=True, topk_method='noaux_tc', router_dtype='fp32')
HYBRID_DERIVED = V2_DERIVED + ["self.qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim"]
CONFIG_V2_PY = remote_config_py(
    "BailingMoeV2Config", "bailing_moe_v2",
    """BailingMoeV2Config: the keys and defaults of the Ling 2.0 releases'
configuration_bailing_moe_v2.py, written for the wshard test checkpoints.""",
    V2_DEFAULTS, V2_DERIVED)

CONFIG_V1_PY = remote_config_py(
    "BailingMoeConfig", "bailing_moe",
    """BailingMoeConfig: the keys and defaults of Ling 1.x's
configuration_bailing_moe.py (inclusionAI/Ling, models/), written for the
wshard test checkpoints.""",
    dict(
        vocab_size=30592, hidden_size=1024, intermediate_size=None, num_hidden_layers=24,
        num_attention_heads=16, num_key_value_heads=0, hidden_act='silu',
        use_qkv_bias=False, use_bias=True, rms_norm_eps=1e-05, norm_head=False,
        tie_word_embeddings=False, embedding_dropout=0.1, attention_dropout=0.1,
        output_dropout=0.1, initializer_range=0.02, max_position_embeddings=16384,
        rope_theta=10000.0, use_cache=True, use_sliding_window=False, sliding_window=4096,
        max_window_layers=28, rope_scaling=None, pad_token_id=126081, num_experts=16,
        num_shared_experts=0, num_experts_per_tok=2, norm_topk_prob=True,
        moe_intermediate_size=None, first_k_dense_replace=0, head_dim=None,
        output_router_logits=False),
    ["self.head_dim = self.head_dim or self.hidden_size // self.num_attention_heads"])


def make(out, v1=False, tie=False, mtp=False, qkv_bias=False, router_dtype="fp32",
         linear_bias=False, rmsnorm=True, norm_head=False, shared=None, bias_mean=0.0,
         bias_dtype=None):
    import torch
    import transformers
    from ckpt_io import layer_shards, save_shards, saved_tensors, write_release_config
    H, nh, kv, hd, V = 256, 4, 2, 64, 1000
    L = 3
    E, I_moe, I = 8, 128, 512
    shared = shared or (2 if v1 else 1)
    dense = 0 if v1 else 1
    cfg = transformers.Glm4MoeConfig(
        hidden_size=H, intermediate_size=I, num_hidden_layers=L + (1 if mtp else 0),
        num_attention_heads=nh, num_key_value_heads=kv, head_dim=hd, vocab_size=V,
        max_position_embeddings=512, attention_bias=qkv_bias or linear_bias, use_qk_norm=not v1,
        partial_rotary_factor=1.0 if v1 else 0.5, n_routed_experts=E,
        n_shared_experts=shared, num_experts_per_tok=2, moe_intermediate_size=I_moe,
        first_k_dense_replace=dense, n_group=1 if v1 else 2, topk_group=1,
        routed_scaling_factor=1.0 if v1 else 2.5, norm_topk_prob=True,
        tie_word_embeddings=tie, rms_norm_eps=1e-6)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Glm4MoeForCausalLM(cfg).to(torch.bfloat16)
    sd = saved_tensors(model, out)
    gen = torch.Generator().manual_seed(7)
    new = {"model.word_embeddings.weight": sd.pop("model.embed_tokens.weight"),
           "model.norm.weight": sd.pop("model.norm.weight")}
    if not tie:
        new["lm_head.weight"] = sd.pop("lm_head.weight")
    sd.pop("lm_head.weight", None)
    for n in range(cfg.num_hidden_layers):
        p = "model.layers.%d." % n
        for kind in ("weight", "bias") if (qkv_bias or linear_bias) else ("weight",):
            new[p + "attention.query_key_value." + kind] = torch.cat(
                [sd.pop(p + "self_attn.%s_proj.%s" % (x, kind)) for x in "qkv"], 0).contiguous()
        new[p + "attention.dense.weight"] = sd.pop(p + "self_attn.o_proj.weight")
        if not v1:
            new[p + "attention.query_layernorm.weight"] = sd.pop(p + "self_attn.q_norm.weight")
            new[p + "attention.key_layernorm.weight"] = sd.pop(p + "self_attn.k_norm.weight")
        bias = sd.pop(p + "mlp.gate.e_score_correction_bias", None)
        if bias is not None and not v1:
            # the release keeps the router's correction bias in F32
            b = torch.randn(E, generator=gen) * 0.1
            if bias_mean:
                # as trained biases are: an offset every expert shares
                b = b + bias_mean
            new[p + "mlp.gate.expert_bias"] = b.to(bias_dtype or torch.float32)
        for k in [k for k in sd if k.startswith(p)]:
            new[k] = sd.pop(k)
        if mtp and n == L:
            # the MTP layer's own tensors (BailingMoeV2MTPLayer): enorm,
            # hnorm and final_layernorm [H], eh_proj [H, 2H]
            for name, shape in (("enorm.weight", (H,)), ("hnorm.weight", (H,)),
                                ("final_layernorm.weight", (H,)),
                                ("eh_proj.weight", (H, 2 * H))):
                new[p + name] = (1.0 + torch.randn(shape, generator=gen) * 0.02
                                 if len(shape) == 1 else
                                 torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)
    assert not [k for k in sd if not k.endswith("inv_freq")], list(sd)
    if linear_bias:
        # use_bias: biases on attention.dense and on the dense and shared
        # MLPs' projections (vLLM's RowParallel/MergedColumnParallel
        # bias=config.use_bias); the routed experts have none
        for name in [k for k in new if k.endswith(".weight") and (
                ".attention.dense." in k or ".mlp.gate_proj." in k or ".mlp.up_proj." in k
                or ".mlp.down_proj." in k or ".shared_experts." in k)]:
            new[name[:-len("weight")] + "bias"] = (
                torch.randn(new[name].shape[0], generator=gen) * 0.02).to(torch.bfloat16)
    # shards as the releases write them: the embedding, a layer a shard,
    # then the final norm and head
    os.makedirs(out, exist_ok=True)
    save_shards(out, new, layer_shards(new, "model.word_embeddings.weight",
                                       cfg.num_hidden_layers))
    common = {"attention_dropout": 0.0, "embedding_dropout": 0.0, "output_dropout": 0.0,
              "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02,
              "intermediate_size": I, "max_position_embeddings": 512,
              "moe_intermediate_size": I_moe, "norm_topk_prob": True,
              "num_attention_heads": nh, "num_experts": E, "num_experts_per_tok": 2,
              "num_hidden_layers": L, "num_key_value_heads": kv,
              "num_shared_experts": shared, "first_k_dense_replace": dense, "head_dim": hd,
              "rms_norm_eps": 1e-06, "rope_scaling": None, "tie_word_embeddings": tie,
              "torch_dtype": "bfloat16", "use_bias": linear_bias, "use_qkv_bias": qkv_bias,
              "use_cache": True, "vocab_size": V, "pad_token_id": 0, "eos_token_id": 1}
    if v1:
        # Ling-lite-1.5's keys (inclusionAI/Ling-lite-1.5 config.json)
        c = dict(common, architectures=["BailingMoeForCausalLM"], model_type="bailing_moe",
                 auto_map={"AutoConfig": "configuration_bailing_moe.BailingMoeConfig",
                           "AutoModel": "modeling_bailing_moe.BailingMoeModel",
                           "AutoModelForCausalLM": "modeling_bailing_moe.BailingMoeForCausalLM"},
                 norm_head=norm_head, norm_softmax=False, output_router_logits=False,
                 rope_theta=600000.0, max_window_layers=28, use_sliding_window=False,
                 sliding_window=4096, transformers_version="4.36.0")
        code = {"configuration_bailing_moe.py": CONFIG_V1_PY}
    else:
        # Ling-mini-2.0's keys (inclusionAI/Ling-mini-2.0 config.json)
        c = dict(common, architectures=["BailingMoeV2ForCausalLM"], model_type="bailing_moe_v2",
                 auto_map={"AutoConfig": "configuration_bailing_moe_v2.BailingMoeV2Config",
                           "AutoModel": "modeling_bailing_moe_v2.BailingMoeV2Model",
                           "AutoModelForCausalLM":
                               "modeling_bailing_moe_v2.BailingMoeV2ForCausalLM"},
                 n_group=2, topk_group=1, routed_scaling_factor=2.5, score_function="sigmoid",
                 moe_router_enable_expert_bias=True,
                 moe_shared_expert_intermediate_size=I_moe * shared,
                 use_qk_norm=True, use_rmsnorm=rmsnorm, partial_rotary_factor=0.5,
                 rope_theta=600000.0, max_window_layers=L, output_router_logits=False,
                 num_nextn_predict_layers=1 if mtp else 0, mtp_loss_scaling_factor=0,
                 transformers_version="4.52.3")
        if router_dtype is not None:
            c["router_dtype"] = router_dtype
        code = {"configuration_bailing_moe_v2.py": CONFIG_V2_PY}
    write_release_config(out, dict(sorted(c.items())), code)


SARVAM_MOE_CONFIG_PY = remote_config_py(
    "SarvamMoEConfig", "sarvam_moe",
    """SarvamMoEConfig: the keys and defaults of sarvamai/sarvam-30b's
configuration_sarvam_moe.py, written for the wshard test checkpoints.""",
    dict(
        vocab_size=262144, hidden_size=4096, intermediate_size=8192, num_hidden_layers=19,
        num_attention_heads=16, num_key_value_heads=4, hidden_act='silu',
        use_qkv_bias=False, use_bias=False, rms_norm_eps=1e-06, tie_word_embeddings=False,
        embedding_dropout=0.0, attention_dropout=0.0, output_dropout=0.0,
        initializer_range=0.006, max_position_embeddings=4096, rope_theta=10000.0,
        use_cache=True, max_window_layers=19, rope_scaling=None, pad_token_id=0,
        eos_token_id=1, num_experts=128, num_shared_experts=1, num_experts_per_tok=6,
        n_group=1, topk_group=1, moe_intermediate_size=1024, first_k_dense_replace=1,
        head_dim=256, output_router_logits=False, use_qk_norm=True,
        moe_router_enable_expert_bias=True, routed_scaling_factor=2.5),
    ["self.head_dim = self.head_dim or self.hidden_size // self.num_attention_heads"])


def make_sarvam(out):
    """Sarvam-30B (SarvamMoEForCausalLM, sarvamai/sarvam-30b): Ling 2.0's
    tensors under Ling's names, with its own config class (head_dim 256
    by default, where Ling's is 128)."""
    from ckpt_io import update_config
    make(out)
    os.remove(os.path.join(out, "configuration_bailing_moe_v2.py"))

    def sarvam(c):
        c.update(architectures=["SarvamMoEForCausalLM"], model_type="sarvam_moe",
                 auto_map={"AutoConfig": "configuration_sarvam_moe.SarvamMoEConfig",
                           "AutoModel": "modeling_sarvam_moe.SarvamMoEModel",
                           "AutoModelForCausalLM": "modeling_sarvam_moe.SarvamMoEForCausalLM"},
                 partial_rotary_factor=1.0, rope_theta=8000000.0,
                 transformers_version="4.57.1")
        c.pop("num_nextn_predict_layers", None)
        c.pop("mtp_loss_scaling_factor", None)
    update_config(out, sarvam)
    with open(os.path.join(out, "configuration_sarvam_moe.py"), "w") as f:
        f.write(SARVAM_MOE_CONFIG_PY)


def make_v1(out):
    make(out, v1=True)
