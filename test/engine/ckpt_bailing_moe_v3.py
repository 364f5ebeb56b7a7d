"""Ling 3 (BailingMoeV3ForCausalLM: inclusionAI Ling-3.0-tiny,
Ling-3.0-flash) as the releases ship it, tiny.  Remote code (model_type
bailing_hybrid, configuration_bailing_moe_v3.BailingMoeV3Config) that
transformers 5.19 lacks and vLLM 0.32 registers no config class for (only
the VL model's text config, bailing_moe_v3_vl.py): config.json carries
auto_map to a configuration_bailing_moe_v3.py written beside it (the
release's keys and defaults), so vLLM needs trust_remote_code.

Layers: KDA linear attention, except every layer_group_size-th (and any
left over past the last whole group), which is MLA with q LoRA and a
head-wise output gate; the first first_k_dense_replace layers a dense MLP,
then sigmoid-routed experts with a correction bias and one shared expert.
Here layer_group_size 2 over 4 layers: 0 KDA + dense, 1 MLA + experts,
2 KDA + experts, 3 MLA + experts; then one MTP layer (model.layers.4:
num_nextn_predict_layers 1), which BailingMoeV3ForCausalLM drops and
BailingMoeV3MTPModel loads.

The network is built with transformers' own KimiLinearForCausalLM (the
same KDA, MLA, dense MLP, router, correction bias and shared expert), its
tensors rewritten into the release's names and layout (the names a Ling
3 loader checks against Ling-3.0-tiny's index; dtypes as noted):

  model.embed_tokens                 -> model.word_embeddings
  layers.N.self_attn.*               -> layers.N.attention.*
  MLA o_proj                         -> attention.dense
  KDA f_a_proj/f_b_proj, g_a/g_b     -> f_proj [P, H], g_proj [P, H]
                                        (no_kda_lora: full rank; fresh)
  KDA A_log [1, 1, heads, 1]         -> A_log [heads]; A_log and dt_bias
                                        in F32, the conv weights [P, 1, K]
                                        BF16 (vLLM holds all in F32)
  MLA (gated, head_wise)             +  attention.g_proj [heads, H] (fresh)
  block_sparse_moe.gate_proj ...     -> mlp.gate_proj ... (the dense layer)
  block_sparse_moe.gate.weight       -> mlp.gate.weight
  block_sparse_moe.gate.e_score_correction_bias -> mlp.gate.expert_bias (F32)
  block_sparse_moe.experts.E.w1/w3/w2 -> mlp.experts.E.gate/up/down_proj
  block_sparse_moe.shared_experts.*  -> mlp.shared_experts.*

The MTP layer: an MLA + MoE decoder layer (layer 3's tensors, fresh
values) with enorm, hnorm [H], eh_proj [H, 2H] and final_layernorm [H], as
vLLM's BailingMoeV3MultiTokenPredictorLayer loads them (its head and
embedding are the model's lm_head and word_embeddings).  No tokenizer:
vLLM runs token-id prompts with skip_tokenizer_init.
"""
import os

import ckpt_bailing_moe
from ckpt_io import remote_config_py

CONFIG_V3_PY = remote_config_py(
    "BailingMoeV3Config", "bailing_hybrid",
    """BailingMoeV3Config: the keys and defaults of the Ling 3 releases'
configuration_bailing_moe_v3.py, written for the wshard test checkpoints.""",
    dict(ckpt_bailing_moe.HYBRID_DEFAULTS, rope_parameters=None, partial_rotary_factor=None,
         moe_shared_expert_intermediate_size=512,
         gated_attention_proj_granularity_type=None, no_kda_lora=False,
         kda_safe_gate=False, kda_lower_bound=None, short_conv_kernel_size=4),
    ["self.rope_parameters = dict(self.rope_parameters or self.rope_scaling or {})",
     "self.rope_parameters.setdefault('rope_type', 'default')",
     "self.rope_parameters.setdefault('rope_theta', self.rope_theta)"]
    + ckpt_bailing_moe.HYBRID_DERIVED)

H, HEADS, HD, V = 256, 4, 64, 1000      # KDA and MLA share num_attention_heads
L, GROUP, DENSE = 4, 2, 1               # layers, layer_group_size, first_k_dense_replace
E, I_MOE, I = 8, 128, 512
Q_LORA, KV_LORA, NOPE, ROPE, VHD = 64, 64, 32, 32, 32
CONV = 4


def is_kda(n):
    """vLLM's _is_kda_layer (and the release's modeling code)."""
    return not ((n + 1) % GROUP == 0 or n >= L // GROUP * GROUP)


def make(out):
    import torch
    import transformers
    from ckpt_io import layer_shards, noise, save_shards, saved_tensors, write_release_config
    P = HEADS * HD
    types = ["linear_attention" if is_kda(n) else "full_attention" for n in range(L)]
    tc = transformers.KimiLinearConfig(
        vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L,
        num_attention_heads=HEADS, num_key_value_heads=HEADS, q_lora_rank=Q_LORA,
        kv_lora_rank=KV_LORA, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=VHD,
        moe_intermediate_size=I_MOE, num_local_experts=E, num_experts_per_tok=2,
        n_shared_experts=1, linear_num_heads=HEADS, linear_head_dim=HD,
        linear_conv_kernel_dim=CONV, layer_types=types,
        mlp_layer_types=["dense" if n < DENSE else "sparse" for n in range(L)],
        max_position_embeddings=512, tie_word_embeddings=False, pad_token_id=0,
        bos_token_id=2, eos_token_id=1)
    tc.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.KimiLinearForCausalLM(tc).to(torch.bfloat16)
    sd = saved_tensors(model, out)
    g = torch.Generator().manual_seed(4321)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    t = {"model.word_embeddings.weight": sd.pop("model.embed_tokens.weight"),
         "model.norm.weight": sd.pop("model.norm.weight"),
         "lm_head.weight": sd.pop("lm_head.weight")}
    for n in range(L):
        p = "model.layers.%d." % n
        for k in [k for k in sd if k.startswith(p)]:
            v = sd.pop(k)
            rest = k[len(p):]
            if rest.startswith("self_attn."):
                a = rest[len("self_attn."):]
                if a in ("f_a_proj.weight", "f_b_proj.weight", "g_a_proj.weight",
                         "g_b_proj.weight"):
                    continue                 # no_kda_lora: full-rank f/g below
                if a == "A_log":
                    v = v.reshape(-1).float()
                elif a == "dt_bias":
                    v = v.float()
                elif a == "o_proj.weight" and not is_kda(n):
                    a = "dense.weight"
                t[p + "attention." + a] = v
            elif rest.startswith("block_sparse_moe."):
                m = rest[len("block_sparse_moe."):]
                if m.startswith("experts."):
                    _, e, w, kind = m.split(".")
                    m = "experts.%s.%s_proj.%s" % (
                        e, {"w1": "gate", "w3": "up", "w2": "down"}[w], kind)
                elif m == "gate.e_score_correction_bias":
                    # the release keeps the router's correction bias in F32
                    v, m = (torch.randn(E, generator=g) * 0.1).float(), "gate.expert_bias"
                t[p + "mlp." + m] = v
            else:
                t[k] = v
        if is_kda(n):
            t[p + "attention.f_proj.weight"] = rnd(P, H)
            t[p + "attention.g_proj.weight"] = rnd(P, H)
        else:
            t[p + "attention.g_proj.weight"] = rnd(HEADS, H)
    assert not sd, list(sd)
    # the MTP layer (model.layers.L): an MLA + MoE layer as the last one,
    # fresh values, and its own norms and projection
    q, p = "model.layers.%d." % (L - 1), "model.layers.%d." % L
    for k in [k for k in t if k.startswith(q)]:
        v = t[k]
        t[p + k[len(q):]] = (torch.randn(E, generator=g) * 0.1).float() if \
            k.endswith("expert_bias") else rnd(*v.shape, base=int(k.endswith("norm.weight")))
    for name, shape in (("enorm.weight", (H,)), ("hnorm.weight", (H,)),
                        ("final_layernorm.weight", (H,)), ("eh_proj.weight", (H, 2 * H))):
        t[p + name] = rnd(*shape, base=int(len(shape) == 1))
    t = {k: v.contiguous() for k, v in t.items()}
    os.makedirs(out, exist_ok=True)
    save_shards(out, t, layer_shards(t, "model.word_embeddings.weight", L + 1))
    # Ling-3.0-tiny's keys (a BailingMoeV3ForCausalLM config.json)
    c = {"architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_hybrid",
         "auto_map": {"AutoConfig": "configuration_bailing_moe_v3.BailingMoeV3Config",
                      "AutoModel": "modeling_bailing_moe_v3.BailingMoeV3Model",
                      "AutoModelForCausalLM": "modeling_bailing_moe_v3.BailingMoeV3ForCausalLM"},
         "attention_dropout": 0.0, "embedding_dropout": 0.0, "output_dropout": 0.0,
         "dtype": "bfloat16", "eos_token_id": 1, "pad_token_id": 0,
         "first_k_dense_replace": DENSE, "gated_attention_proj_granularity_type": "head_wise",
         "head_dim": HD, "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02,
         "intermediate_size": I, "kda_lower_bound": -5, "kda_safe_gate": True,
         "kv_lora_rank": KV_LORA, "layer_group_size": GROUP, "max_position_embeddings": 512,
         "max_window_layers": L, "moe_intermediate_size": I_MOE,
         "moe_router_enable_expert_bias": True, "moe_shared_expert_intermediate_size": I_MOE,
         "mtp_loss_scaling_factor": 0, "n_group": 2, "no_kda_lora": True,
         "norm_topk_prob": True, "num_attention_heads": HEADS, "num_experts": E,
         "num_experts_per_tok": 2, "num_hidden_layers": L, "num_key_value_heads": HEADS,
         "num_nextn_predict_layers": 1, "num_shared_experts": 1, "output_router_logits": False,
         "partial_rotary_factor": 0.5, "q_lora_rank": Q_LORA, "qk_head_dim": NOPE + ROPE,
         "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE, "rms_norm_eps": 1e-06,
         "rope_interleave": True,
         "rope_parameters": {"partial_rotary_factor": 0.5, "rope_theta": 6000000,
                             "rope_type": "default"},
         "rope_theta": 6000000, "routed_scaling_factor": 2.5, "router_dtype": "fp32",
         "score_function": "sigmoid", "scoring_func": "sigmoid", "seq_aux": True,
         "short_conv_kernel_size": CONV, "tie_word_embeddings": False, "topk_group": 1,
         "topk_method": "noaux_tc", "transformers_version": "5.8.1", "use_bias": False,
         "use_cache": True, "use_qk_norm": True, "use_qkv_bias": False, "v_head_dim": VHD,
         "vocab_size": V}
    write_release_config(out, dict(sorted(c.items())), {"configuration_bailing_moe_v3.py":
                                                         CONFIG_V3_PY})
