"""Ling 2.5 / Ring 2.5 (BailingMoeV2_5ForCausalLM: inclusionAI Ling-2.5-1T,
Ring-2.5-1T) as the releases ship them, tiny.  Remote code (model_type
bailing_hybrid) that transformers 5.19 lacks and vLLM 0.32 registers no
config class for, so config.json carries auto_map to a
configuration_bailing_moe_v2_5.py written beside it (a minimal class with
the release's keys and defaults, those of inclusionAI's
configuration_bailing_moe_v2_5.py): vLLM needs trust_remote_code.

No transformers class holds the model (its modeling_bailing_moe_v2_5.py
needs flash-linear-attention), so the tensors are made with torch directly
under the release's names (modeling_bailing_moe_v2_5.py):

  model.word_embeddings, model.norm, lm_head
  model.layers.N.input_layernorm / post_attention_layernorm
  lightning (linear) attention layers, where (N+1) % layer_group_size != 0:
    attention.query_key_value [3*heads*head_dim, H] (all q heads, all k,
    all v: num_attention_heads each), attention.query_layernorm /
    key_layernorm [head_dim] (use_qk_norm), attention.g_proj
    [heads*head_dim, H], attention.g_norm [heads*head_dim] (a group RMSNorm
    of group_norm_size groups), attention.dense [H, heads*head_dim]
  MLA layers, the others: attention.q_proj (no q LoRA, as the releases;
    q_a_proj, q_a_layernorm and q_b_proj with q_lora_rank),
    attention.kv_a_proj_with_mqa, attention.kv_a_layernorm,
    attention.kv_b_proj, attention.dense [H, heads*v_head_dim]
  the first first_k_dense_replace layers a dense MLP (mlp.gate/up/down_proj),
  the others MoE: mlp.gate.weight (F32, router_dtype fp32),
  mlp.gate.expert_bias (F32), mlp.experts.E.gate/up/down_proj,
  mlp.shared_experts.gate/up/down_proj
  with mtp: num_nextn_predict_layers 1 and the MTP layer model.layers.L.*
  after the L decoder layers (BailingMoeV2_5MTPLayer: enorm, hnorm,
  eh_proj [H, 2H], input_layernorm, MLA attention, MoE,
  post_attention_layernorm, final_layernorm).

BF16 but the router and its bias.  No tokenizer: vLLM runs token-id
prompts with skip_tokenizer_init.
"""
import os

import ckpt_bailing_moe
from ckpt_io import remote_config_py

CONFIG_PY = remote_config_py(
    "BailingMoeV2_5Config", "bailing_hybrid",
    """BailingMoeV2_5Config: the keys and defaults of the Ling 2.5 / Ring 2.5
releases' configuration_bailing_moe_v2_5.py, written for the wshard test
checkpoints.""",
    dict(ckpt_bailing_moe.HYBRID_DEFAULTS, group_norm_size=4, linear_silu=False,
         partial_rotary_factor=0.5),
    ckpt_bailing_moe.HYBRID_DERIVED)


def make(out, mtp=True, q_lora=False):
    import torch
    from ckpt_io import layer_shards, save_shards, write_release_config
    # MLA as make_ckpt.py's MLA (vLLM's CPU MLA backend takes kv_lora_rank +
    # qk_rope_head_dim in 320, 512, 576 only); lightning attention with
    # group_norm_size 4 (vLLM needs tp <= group_norm_size, dividing it) and
    # 16-wide heads (groups of 16 channels)
    H, nh, hd, V = 256, 4, 16, 1000
    L, G = 4, 2                      # layers 0, 2 lightning; 1, 3 MLA
    E, I_moe, I = 8, 128, 512
    kv_lora, q_lora_rank, nope, rope, vd = 256, 128, 64, 64, 64
    gen = torch.Generator().manual_seed(1234)

    def mat(*shape):
        return (torch.randn(shape, generator=gen) * 0.05).to(torch.bfloat16)

    def norm(n):
        return (1.0 + torch.randn(n, generator=gen) * 0.05).to(torch.bfloat16)

    t = {"model.word_embeddings.weight": mat(V, H), "model.norm.weight": norm(H),
         "lm_head.weight": mat(V, H)}

    def mla(p):
        if q_lora:
            t[p + "attention.q_a_proj.weight"] = mat(q_lora_rank, H)
            t[p + "attention.q_a_layernorm.weight"] = norm(q_lora_rank)
            t[p + "attention.q_b_proj.weight"] = mat(nh * (nope + rope), q_lora_rank)
        else:
            t[p + "attention.q_proj.weight"] = mat(nh * (nope + rope), H)
        t[p + "attention.kv_a_proj_with_mqa.weight"] = mat(kv_lora + rope, H)
        t[p + "attention.kv_a_layernorm.weight"] = norm(kv_lora)
        t[p + "attention.kv_b_proj.weight"] = mat(nh * (nope + vd), kv_lora)
        t[p + "attention.dense.weight"] = mat(H, nh * vd)

    def moe(p):
        t[p + "mlp.gate.weight"] = (torch.randn(E, H, generator=gen) * 0.05).float()
        t[p + "mlp.gate.expert_bias"] = (torch.randn(E, generator=gen) * 0.1).float()
        for e in range(E):
            for x in ("gate", "up"):
                t[p + "mlp.experts.%d.%s_proj.weight" % (e, x)] = mat(I_moe, H)
            t[p + "mlp.experts.%d.down_proj.weight" % e] = mat(H, I_moe)
        for x in ("gate", "up"):
            t[p + "mlp.shared_experts.%s_proj.weight" % x] = mat(I_moe, H)
        t[p + "mlp.shared_experts.down_proj.weight"] = mat(H, I_moe)

    for n in range(L):
        p = "model.layers.%d." % n
        t[p + "input_layernorm.weight"] = norm(H)
        t[p + "post_attention_layernorm.weight"] = norm(H)
        if (n + 1) % G:
            t[p + "attention.query_key_value.weight"] = mat(3 * nh * hd, H)
            t[p + "attention.query_layernorm.weight"] = norm(hd)
            t[p + "attention.key_layernorm.weight"] = norm(hd)
            t[p + "attention.g_proj.weight"] = mat(nh * hd, H)
            t[p + "attention.g_norm.weight"] = norm(nh * hd)
            t[p + "attention.dense.weight"] = mat(H, nh * hd)
        else:
            mla(p)
        if n < 1:
            for x in ("gate", "up"):
                t[p + "mlp.%s_proj.weight" % x] = mat(I, H)
            t[p + "mlp.down_proj.weight"] = mat(H, I)
        else:
            moe(p)
    if mtp:
        p = "model.layers.%d." % L
        for x in ("input_layernorm", "post_attention_layernorm", "enorm", "hnorm",
                  "final_layernorm"):
            t[p + x + ".weight"] = norm(H)
        t[p + "eh_proj.weight"] = mat(H, 2 * H)
        mla(p)
        moe(p)
    os.makedirs(out, exist_ok=True)
    save_shards(out, t, layer_shards(t, "model.word_embeddings.weight", L + (1 if mtp else 0)))
    # Ring-2.5-1T's keys (inclusionAI/Ring-2.5-1T config.json), tiny
    c = {"architectures": ["BailingMoeV2_5ForCausalLM"], "model_type": "bailing_hybrid",
         "auto_map": {"AutoConfig": "configuration_bailing_moe_v2_5.BailingMoeV2_5Config",
                      "AutoModel": "modeling_bailing_moe_v2_5.BailingMoeV2_5Model",
                      "AutoModelForCausalLM":
                          "modeling_bailing_moe_v2_5.BailingMoeV2_5ForCausalLM"},
         "attention_dropout": 0.0, "embedding_dropout": 0.0, "output_dropout": 0.0,
         "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02,
         "intermediate_size": I, "max_position_embeddings": 512,
         "moe_intermediate_size": I_moe, "moe_shared_expert_intermediate_size": I_moe,
         "norm_topk_prob": True, "num_attention_heads": nh, "num_experts": E,
         "num_experts_per_tok": 2, "num_hidden_layers": L, "num_key_value_heads": nh,
         "num_shared_experts": 1, "first_k_dense_replace": 1, "head_dim": hd,
         "rms_norm_eps": 1e-06, "rope_scaling": None, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16", "use_bias": False, "use_qkv_bias": False,
         "use_cache": True, "vocab_size": V, "pad_token_id": 0, "eos_token_id": 1,
         "n_group": 2, "topk_group": 1, "routed_scaling_factor": 2.5,
         "score_function": "sigmoid", "scoring_func": "sigmoid", "topk_method": "noaux_tc",
         "moe_router_enable_expert_bias": True, "router_dtype": "fp32",
         "use_qk_norm": True, "use_rmsnorm": True, "partial_rotary_factor": 0.5,
         "rope_theta": 6000000.0, "max_window_layers": L, "output_router_logits": False,
         "num_nextn_predict_layers": 1 if mtp else 0, "mtp_loss_scaling_factor": 0,
         "layer_group_size": G, "group_norm_size": 4, "linear_silu": False,
         "kv_lora_rank": kv_lora, "q_lora_rank": q_lora_rank if q_lora else None,
         "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "v_head_dim": vd,
         "rope_interleave": True, "transformers_version": "4.57.1"}
    write_release_config(out, dict(sorted(c.items())), {"configuration_bailing_moe_v2_5.py": CONFIG_PY})


def make_qlora(out):
    make(out, q_lora=True)
