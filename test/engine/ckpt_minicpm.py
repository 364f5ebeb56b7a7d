"""MiniCPM (MiniCPMForCausalLM, openbmb's remote code, model_type "minicpm")
as vLLM 0.32 reads it, tiny.  transformers 5.19 has no MiniCPM class: the
weights are made by its LlamaForCausalLM (dense) or MixtralForCausalLM (MoE)
and rewritten in the release's layout, with a configuration_minicpm.py of
our own (the release ships one; vLLM reads the config through it, so it
needs trust_remote_code); no tokenizer (the prompts are token ids).

    make(out)          openbmb/MiniCPM-2B-sft-bf16's form: tied embeddings
                       (no lm_head.weight, no tie_word_embeddings key: the
                       config class defaults it to true), no model_type
                       (auto_map alone), scale_emb / scale_depth /
                       dim_model_base.
    make_untied(out)   openbmb/MiniCPM4-8B's form: model_type "minicpm",
                       tie_word_embeddings false and an lm_head.weight, GQA,
                       LongRoPE rope_scaling.
    make_moe(out)      openbmb/MiniCPM-MoE-8x2B's form: every layer a MoE,
                       model.layers.N.mlp.gate.weight [E, H] and
                       model.layers.N.mlp.experts.E.w1/w2/w3.weight (Mixtral's
                       per-expert names under mlp. instead of
                       block_sparse_moe.), num_experts / num_experts_per_tok,
                       tied.

Layer tensors are Llama's names (model.layers.N.self_attn.q_proj, ...,
mlp.gate_proj/up_proj/down_proj); nothing is scaled into the weights:
vLLM applies scale_emb, scale_depth/sqrt(L) and hidden/dim_model_base at run
time (minicpm.py:385-394, 444, 606, 642).
"""

CONFIG_PY = '''"""MiniCPM's configuration (model_type "minicpm"), as the release's
configuration_minicpm.py defines it: the keys vLLM reads, with the class's
defaults (tie_word_embeddings true, num_key_value_heads = the heads,
scale_emb, scale_depth and dim_model_base 1)."""
from transformers import PretrainedConfig


class MiniCPMConfig(PretrainedConfig):
    model_type = "minicpm"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(self, vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                 num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=None,
                 hidden_act="silu", max_position_embeddings=2048, initializer_range=0.02,
                 rms_norm_eps=1e-6, use_cache=True, pad_token_id=None, bos_token_id=1,
                 eos_token_id=2, tie_word_embeddings=True, rope_theta=10000.0,
                 rope_scaling=None, attention_bias=False, attention_dropout=0.0,
                 scale_emb=1, dim_model_base=1, scale_depth=1, **kwargs):
        self.vocab_size = vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = (num_attention_heads if num_key_value_heads is None
                                    else num_key_value_heads)
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.use_cache = use_cache
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.attention_bias = attention_bias
        self.attention_dropout = attention_dropout
        self.scale_emb = scale_emb
        self.dim_model_base = dim_model_base
        self.scale_depth = scale_depth
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id, tie_word_embeddings=tie_word_embeddings,
                         **kwargs)
'''

AUTO_MAP = {"AutoConfig": "configuration_minicpm.MiniCPMConfig",
            "AutoModel": "modeling_minicpm.MiniCPMModel",
            "AutoModelForCausalLM": "modeling_minicpm.MiniCPMForCausalLM"}


def _build(out, moe, tied, seed=1234):
    import torch
    import transformers
    from ckpt_io import perturb_and_save
    from make_ckpt import COMMON
    kw = dict(COMMON, tie_word_embeddings=tied, bos_token_id=1, eos_token_id=2)
    if moe:
        cfg = transformers.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **kw)
        cls = transformers.MixtralForCausalLM
    else:
        cfg = transformers.LlamaConfig(**kw)
        cls = transformers.LlamaForCausalLM
    cfg.dtype = torch.bfloat16
    torch.manual_seed(seed)
    model = cls(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    return cfg


def _release_config(out, cfg, extra):
    """config.json as openbmb writes it: Llama's keys, MiniCPM's scales,
    auto_map to the configuration module beside it."""
    from ckpt_io import write_release_config
    c = {"architectures": ["MiniCPMForCausalLM"], "auto_map": AUTO_MAP,
         "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
         "hidden_size": cfg.hidden_size, "initializer_range": 0.1,
         "intermediate_size": cfg.intermediate_size,
         "max_position_embeddings": cfg.max_position_embeddings,
         "num_attention_heads": cfg.num_attention_heads,
         "num_hidden_layers": cfg.num_hidden_layers,
         "num_key_value_heads": cfg.num_key_value_heads, "rms_norm_eps": 1e-05,
         "rope_scaling": None, "torch_dtype": "bfloat16", "transformers_version": "4.36.0",
         "use_cache": True, "vocab_size": cfg.vocab_size,
         # MiniCPM's muP scales (2B: 12, 256, 1.4); dim_model_base 64 makes
         # the tiny model's width scale 4, as the 2B's is 9
         "scale_emb": 12, "dim_model_base": 64, "scale_depth": 1.4}
    c.update(extra)
    write_release_config(out, c, {"configuration_minicpm.py": CONFIG_PY})


def make(out):
    cfg = _build(out, moe=False, tied=True)
    _release_config(out, cfg, {})


def make_untied(out):
    cfg = _build(out, moe=False, tied=False, seed=1235)
    half = cfg.head_dim // 2
    _release_config(out, cfg, {
        "model_type": "minicpm", "tie_word_embeddings": False,
        "max_position_embeddings": 1024,
        "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "longrope", "original_max_position_embeddings": 512,
                         "short_factor": [1.0 + i / half for i in range(half)],
                         "long_factor": [1.0 + 2 * i / half for i in range(half)]},
        "scale_emb": 12, "dim_model_base": 64, "scale_depth": 1.4, "mup_denominator": 32})


def make_moe(out):
    from ckpt_io import rewrite_shards
    cfg = _build(out, moe=True, tied=True, seed=1236)

    def shard(tensors):
        for name in list(tensors):
            if ".block_sparse_moe." in name:
                tensors[name.replace(".block_sparse_moe.", ".mlp.")] = tensors.pop(name)
    rewrite_shards(out, shard)
    _release_config(out, cfg, {"num_experts": cfg.num_local_experts,
                               "num_experts_per_tok": cfg.num_experts_per_tok})
