"""Sarvam-105B (SarvamMLAForCausalLM: sarvamai/sarvam-105b) as its release
ships it, tiny: DeepSeek-V3's layout and names (MLA without q LoRA:
self_attn.q_proj; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj;
mlp.gate.weight and mlp.gate.e_score_correction_bias; experts one tensor an
expert; shared experts), built with transformers' DeepseekV3ForCausalLM.
The model is remote code (model_type sarvam_mla) with no config class in
transformers 5.19 or vLLM 0.32, so config.json carries auto_map to a
configuration_sarvam_mla.py with the release's keys (vLLM needs
trust_remote_code).  The router's correction bias has an offset every
expert shares, as trained ones do, so vLLM's zero-mean of it on loading
changes every value.  vLLM's CPU MLA backend needs kv_lora_rank +
qk_rope_head_dim in (320, 512, 576): 256 + 64.

Variants (keywords of make): q_lora (q_lora_rank 128: q_a_proj,
q_a_layernorm, q_b_proj; vLLM 0.32 loads it but its MLA forward asserts a
fused_qkv_a_proj that SarvamMLAAttention never builds, so no engine case
runs it), moe_layer_freq (2: four layers, layer 2 dense
between MoE layers 1 and 3), bias_dtype ("BF16"), shared (0: no shared
expert), tie (tie_word_embeddings, no lm_head).  No tokenizer: vLLM runs
token-id prompts with skip_tokenizer_init.
"""
import os

SARVAM_MLA_CONFIG_PY = '''"""SarvamMLAConfig: the keys and defaults of sarvamai/sarvam-105b's
configuration (model_type sarvam_mla; DeepSeek-V2/V3's MLA keys with
Sarvam's MoE keys), written for the wshard test checkpoints."""
from transformers.configuration_utils import PretrainedConfig


class SarvamMLAConfig(PretrainedConfig):
    model_type = "sarvam_mla"

    def __init__(self, vocab_size=262144, hidden_size=4096, intermediate_size=16384,
                 moe_intermediate_size=2048, num_hidden_layers=32, num_attention_heads=64,
                 num_key_value_heads=64, num_experts=128, num_shared_experts=1,
                 num_experts_per_tok=8, first_k_dense_replace=1, moe_layer_freq=1,
                 routed_scaling_factor=2.5, norm_topk_prob=True, q_lora_rank=None,
                 kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                 v_head_dim=128, head_dim=576, hidden_act="silu",
                 max_position_embeddings=131072, initializer_range=0.006,
                 rms_norm_eps=1e-06, use_cache=True, pad_token_id=0, bos_token_id=None,
                 eos_token_id=1, tie_word_embeddings=False, rope_theta=10000.0,
                 rope_scaling=None, attention_bias=False, attention_dropout=0.0,
                 **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.moe_intermediate_size = moe_intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_experts = num_experts
        self.num_shared_experts = num_shared_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.first_k_dense_replace = first_k_dense_replace
        self.moe_layer_freq = moe_layer_freq
        self.routed_scaling_factor = routed_scaling_factor
        self.norm_topk_prob = norm_topk_prob
        self.q_lora_rank = q_lora_rank
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.v_head_dim = v_head_dim
        self.head_dim = head_dim
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.use_cache = use_cache
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.attention_bias = attention_bias
        self.attention_dropout = attention_dropout
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id, tie_word_embeddings=tie_word_embeddings,
                         **kwargs)
'''

H, NH, V = 256, 4, 1000
E, I_MOE, I_DENSE = 8, 128, 512


def make(out, q_lora=False, moe_layer_freq=1, bias_dtype="F32", shared=1, tie=False):
    import torch
    import transformers
    from ckpt_io import layer_shards, save_shards, saved_tensors, write_release_config
    L = 4 if moe_layer_freq > 1 else 3
    cfg = transformers.DeepseekV3Config(
        hidden_size=H, intermediate_size=I_DENSE, moe_intermediate_size=I_MOE,
        num_hidden_layers=L, num_attention_heads=NH, num_key_value_heads=NH,
        n_routed_experts=E, n_shared_experts=max(shared, 1), num_experts_per_tok=2,
        first_k_dense_replace=1, n_group=1, topk_group=1, routed_scaling_factor=2.5,
        norm_topk_prob=True, q_lora_rank=128 if q_lora else None, kv_lora_rank=256,
        qk_nope_head_dim=64, qk_rope_head_dim=64, v_head_dim=64, vocab_size=V,
        max_position_embeddings=512, tie_word_embeddings=tie, rms_norm_eps=1e-6)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.DeepseekV3ForCausalLM(cfg).to(torch.bfloat16)
    sd = saved_tensors(model, out)
    gen = torch.Generator().manual_seed(7)
    if tie:
        sd.pop("lm_head.weight", None)
    for n in range(L):
        p = "model.layers.%d." % n
        if sd.pop(p + "mlp.gate.e_score_correction_bias", None) is not None:
            b = torch.randn(E, generator=gen) * 0.05 + 0.7
            sd[p + "mlp.gate.e_score_correction_bias"] = b.to(
                torch.bfloat16 if bias_dtype == "BF16" else torch.float32)
        if n >= 1 and (n - 1) % moe_layer_freq != 0:
            # a dense layer between MoE layers (moe_layer_freq): its own
            # intermediate_size MLP, as the release's class builds it
            for k in [k for k in sd if k.startswith(p + "mlp.")]:
                del sd[k]
            for name, shape in (("gate_proj", (I_DENSE, H)), ("up_proj", (I_DENSE, H)),
                                ("down_proj", (H, I_DENSE))):
                sd[p + "mlp.%s.weight" % name] = (
                    torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)
        if shared == 0:
            for k in [k for k in sd if k.startswith(p + "mlp.shared_experts.")]:
                del sd[k]
    new = {k: v for k, v in sd.items() if not k.endswith("inv_freq")}
    # shards as the release writes them: the embedding, a layer a shard,
    # then the final norm and head
    os.makedirs(out, exist_ok=True)
    save_shards(out, new, layer_shards(new, "model.embed_tokens.weight", L))
    c = {"architectures": ["SarvamMLAForCausalLM"], "model_type": "sarvam_mla",
         "auto_map": {"AutoConfig": "configuration_sarvam_mla.SarvamMLAConfig",
                      "AutoModelForCausalLM": "modeling_sarvam_mla.SarvamMLAForCausalLM"},
         "hidden_size": H, "intermediate_size": I_DENSE, "moe_intermediate_size": I_MOE,
         "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": NH,
         "num_experts": E, "num_shared_experts": shared, "num_experts_per_tok": 2,
         "first_k_dense_replace": 1, "moe_layer_freq": moe_layer_freq,
         "routed_scaling_factor": 2.5, "norm_topk_prob": True,
         "q_lora_rank": 128 if q_lora else None, "kv_lora_rank": 256,
         "qk_nope_head_dim": 64, "qk_rope_head_dim": 64, "v_head_dim": 64,
         "head_dim": 320, "hidden_act": "silu", "max_position_embeddings": 512,
         "rms_norm_eps": 1e-06, "vocab_size": V, "tie_word_embeddings": tie,
         "torch_dtype": "bfloat16", "rope_theta": 10000.0,
         "rope_scaling": {"type": "deepseek_yarn", "factor": 4.0,
                          "original_max_position_embeddings": 128, "beta_fast": 32,
                          "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
         "moe_router_enable_expert_bias": True, "score_function": "sigmoid",
         "router_dtype": "fp32", "pad_token_id": 0, "eos_token_id": 1, "use_cache": True,
         "transformers_version": "4.57.2"}
    write_release_config(out, c, {"configuration_sarvam_mla.py": SARVAM_MLA_CONFIG_PY})


def make_freq2(out):
    make(out, moe_layer_freq=2, bias_dtype="BF16")


def make_tied(out):
    make(out, shared=0, tie=True)
