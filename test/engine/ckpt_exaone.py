"""EXAONE 3.0 / 3.5 (ExaoneForCausalLM, LG AI Research's remote code,
model_type "exaone") as vLLM 0.32 reads it, tiny.  transformers 5.19 has
EXAONE 4 but no EXAONE 3 class: the weights are made by its
LlamaForCausalLM and renamed to the release's GPT-2-like names, with a
configuration_exaone.py of our own (the release ships one; vLLM reads the
config through it, so it needs trust_remote_code); no tokenizer (the
prompts are token ids).

    make(out)          LGAI-EXAONE/EXAONE-3.5-2.4B-Instruct's form: tied
                       embeddings (no lm_head.weight), llama3 rope_scaling.
    make_untied(out)   EXAONE-3.0-7.8B-Instruct's / EXAONE-3.5-7.8B's and
                       -32B's form: tie_word_embeddings false, lm_head.weight.

Names (Llama's -> the release's):
    model.embed_tokens                -> transformer.wte
    model.layers.N.input_layernorm    -> transformer.h.N.ln_1
    model.layers.N.self_attn.q/k/v_proj -> transformer.h.N.attn.attention.q/k/v_proj
    model.layers.N.self_attn.o_proj   -> transformer.h.N.attn.attention.out_proj
    model.layers.N.post_attention_layernorm -> transformer.h.N.ln_2
    model.layers.N.mlp.gate_proj / up_proj / down_proj -> transformer.h.N.mlp.c_fc_0 / c_fc_1 / c_proj
    model.norm                        -> transformer.ln_f
    lm_head                           -> lm_head
config.json names the layers num_layers (ExaoneConfig's attribute_map makes
it num_hidden_layers), the norms' epsilon layer_norm_epsilon and the
activation activation_function.
"""
import re

CONFIG_PY = '''"""EXAONE 3's configuration (model_type "exaone"), as the release's
configuration_exaone.py defines it: the keys vLLM reads, with the class's
defaults (num_layers as num_hidden_layers, tie_word_embeddings true,
num_key_value_heads = the heads, intermediate_size 4 x hidden_size)."""
from transformers import PretrainedConfig


class ExaoneConfig(PretrainedConfig):
    model_type = "exaone"
    keys_to_ignore_at_inference = ["past_key_values"]
    attribute_map = {"num_hidden_layers": "num_layers"}

    def __init__(self, vocab_size=102400, max_position_embeddings=2048, hidden_size=2048,
                 num_layers=32, num_attention_heads=32, num_key_value_heads=None,
                 intermediate_size=None, activation_function="silu", rope_theta=10000.0,
                 rope_scaling=None, embed_dropout=0.0, attention_dropout=0.0,
                 layer_norm_epsilon=1e-5, initializer_range=0.02, use_cache=True,
                 bos_token_id=0, eos_token_id=2, tie_word_embeddings=True, **kwargs):
        self.vocab_size = vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = (num_attention_heads if num_key_value_heads is None
                                    else num_key_value_heads)
        self.intermediate_size = intermediate_size or hidden_size * 4
        self.activation_function = activation_function
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.embed_dropout = embed_dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.use_cache = use_cache
        super().__init__(bos_token_id=bos_token_id, eos_token_id=eos_token_id,
                         tie_word_embeddings=tie_word_embeddings, **kwargs)
'''

AUTO_MAP = {"AutoConfig": "configuration_exaone.ExaoneConfig",
            "AutoModelForCausalLM": "modeling_exaone.ExaoneForCausalLM",
            "AutoModelForSequenceClassification": "modeling_exaone.ExaoneForSequenceClassification"}

RENAMES = [(r"^model\.embed_tokens\.", "transformer.wte."),
           (r"^model\.norm\.", "transformer.ln_f."),
           (r"^model\.layers\.(\d+)\.input_layernorm\.", r"transformer.h.\1.ln_1."),
           (r"^model\.layers\.(\d+)\.post_attention_layernorm\.", r"transformer.h.\1.ln_2."),
           (r"^model\.layers\.(\d+)\.self_attn\.([qkv])_proj\.", r"transformer.h.\1.attn.attention.\2_proj."),
           (r"^model\.layers\.(\d+)\.self_attn\.o_proj\.", r"transformer.h.\1.attn.attention.out_proj."),
           (r"^model\.layers\.(\d+)\.mlp\.gate_proj\.", r"transformer.h.\1.mlp.c_fc_0."),
           (r"^model\.layers\.(\d+)\.mlp\.up_proj\.", r"transformer.h.\1.mlp.c_fc_1."),
           (r"^model\.layers\.(\d+)\.mlp\.down_proj\.", r"transformer.h.\1.mlp.c_proj.")]


def release_name(name):
    for a, b in RENAMES:
        new, k = re.subn(a, b, name)
        if k:
            return new
    return name


def _make(out, tied, extra, seed):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, rename_tensors, write_release_config
    from make_ckpt import COMMON
    cfg = transformers.LlamaConfig(**dict(COMMON, tie_word_embeddings=tied, bos_token_id=1,
                                          eos_token_id=2, pad_token_id=0))
    cfg.dtype = torch.bfloat16
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    rename_tensors(out, release_name)
    c = {"activation_function": "silu", "architectures": ["ExaoneForCausalLM"],
         "attention_dropout": 0.0, "auto_map": AUTO_MAP, "bos_token_id": 1,
         "embed_dropout": 0.0, "eos_token_id": 2, "hidden_size": cfg.hidden_size,
         "initializer_range": 0.02, "intermediate_size": cfg.intermediate_size,
         "layer_norm_epsilon": 1e-05, "max_position_embeddings": cfg.max_position_embeddings,
         "model_type": "exaone", "num_attention_heads": cfg.num_attention_heads,
         "num_key_value_heads": cfg.num_key_value_heads, "num_layers": cfg.num_hidden_layers,
         "pad_token_id": 0, "rope_scaling": None, "rope_theta": 500000.0,
         "tie_word_embeddings": tied, "torch_dtype": "bfloat16",
         "transformers_version": "4.43.1", "use_cache": True, "vocab_size": cfg.vocab_size}
    c.update(extra)
    write_release_config(out, c, {"configuration_exaone.py": CONFIG_PY})


def make(out):
    _make(out, True, {"max_position_embeddings": 1024, "rope_theta": 1000000.0,
                      "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0,
                                       "low_freq_factor": 1.0,
                                       "original_max_position_embeddings": 128,
                                       "rope_type": "llama3"}}, 1234)


def make_untied(out):
    _make(out, False, {}, 1235)
