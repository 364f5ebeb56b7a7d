"""DeciLM / Nemotron-NAS (DeciLMForCausalLM, model_type "nemotron-nas": NVIDIA's
Llama-3.1-Nemotron-51B, Llama-3.3-Nemotron-Super-49B-v1/v1.5,
Llama-3.1-Nemotron-Ultra-253B) as NVIDIA releases it, tiny.  transformers
has no class for it (the release ships remote code): the weights come from
transformers' own LlamaForCausalLM, whose decoder layers are rebuilt one by
one with transformers' LlamaAttention and LlamaMLP at each layer's own kv
heads (num_attention_heads // n_heads_in_group) and FFN width
(_ffn_mult_to_intermediate_size(ffn_mult, hidden_size)), and whose
no_op sublayers are removed with their norms (the release holds no tensor
for them: a no_op attention has no input_layernorm, a no_op FFN no
post_attention_layernorm).  config.json is the release's: block_configs
per layer, intermediate_size and num_key_value_heads null, auto_map to the
remote code, which is written beside it (configuration_decilm.py,
block_config.py: the parts vLLM's AutoConfig needs; vLLM 0.32 reads
block_configs[i].attention.no_op etc. as attributes, so the checkpoint
loads only with trust_remote_code=True).

    make(out)         6 layers (4 heads of 64, hidden 256): kv 2 / FFN 512;
                      no attention / FFN 256; kv 1 / no FFN; neither (an
                      empty layer, as 81 of Ultra-253B's 162 are);
                      kv 4 / FFN 1024; kv 2 / FFN 256 (ffn_mult 2.625,
                      1.3125, 5.25, 1.0: 448, 224, 896, 170 rounded up to
                      256)

Nemotron-51B's replace_with_linear layers (self_attn.linear_attn.weight,
mlp.linear_mlp.weight) are not made: vLLM 0.32 cannot build them (a
TypeError in nemotron_nas.py), and wshard refuses their tensors.
"""

TEXT = dict(hidden_size=256, num_attention_heads=4, head_dim=64, vocab_size=1000,
            max_position_embeddings=512)

# (n_heads_in_group or "no_op" or "linear", ffn_mult or "no_op" or "linear")
LAYERS = [(2, 2.625), ("no_op", 1.3125), (4, "no_op"), ("no_op", "no_op"), (1, 5.25),
          (2, 1.0)]

BLOCK_CONFIG_PY = '''\
"""Block configs of a Nemotron-NAS (DeciLM) model, as NVIDIA's release's
block_config.py declares them (the fields its config.json holds)."""
import dataclasses
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class AttentionConfig:
    no_op: bool = False
    replace_with_linear: bool = False
    sparsify: Optional[list] = None
    n_heads_in_group: Optional[int] = None
    window_length: Optional[int] = None
    num_sink_tokens: Optional[int] = None
    use_prefill_window_in_sink_attention: bool = False
    unshifted_sink: bool = False


@dataclass(frozen=True)
class FFNConfig:
    no_op: bool = False
    replace_with_linear: bool = False
    sparsify: Optional[list] = None
    ffn_mult: Optional[float] = None


@dataclass(frozen=True)
class BlockConfig:
    attention: Any = dataclasses.field(default_factory=AttentionConfig)
    ffn: Any = dataclasses.field(default_factory=FFNConfig)

    def __post_init__(self):
        if isinstance(self.attention, dict):
            object.__setattr__(self, "attention", AttentionConfig(**self.attention))
        if isinstance(self.ffn, dict):
            object.__setattr__(self, "ffn", FFNConfig(**self.ffn))
'''

CONFIGURATION_DECILM_PY = '''\
"""DeciLMConfig as NVIDIA's release's configuration_decilm.py defines it: a
LlamaConfig with per-layer block_configs (NVIDIA's sets intermediate_size
and num_key_value_heads to None after LlamaConfig's __init__, which
transformers 5 refuses)."""
import dataclasses

from transformers import LlamaConfig

from .block_config import BlockConfig


class DeciLMConfig(LlamaConfig):
    model_type = "nemotron-nas"

    def __init__(self, block_configs=None, **kwargs):
        if block_configs is not None and isinstance(block_configs[0], dict):
            block_configs = [BlockConfig(**conf) for conf in block_configs]
        # the release's config.json has both null (each layer has its own);
        # transformers 5's LlamaConfig, a strict dataclass, takes no None for
        # them: its defaults stand in (vLLM 0.32 reads neither for this model)
        for key in ("intermediate_size", "num_key_value_heads"):
            if kwargs.get(key, 0) is None:
                del kwargs[key]
        super().__init__(**kwargs)
        if block_configs is not None:
            assert len(block_configs) == self.num_hidden_layers
        self.block_configs = block_configs

    def to_dict(self):
        d = super().to_dict()
        if self.block_configs is not None:
            d["block_configs"] = [dataclasses.asdict(c) for c in self.block_configs]
        return d
'''


def ffn_mult_to_intermediate_size(ffn_mult, n_embd):
    """vLLM's _ffn_mult_to_intermediate_size (nemotron_nas.py:60): int() of
    a float product, then up to a multiple of 256."""
    i = int(2 * ffn_mult * n_embd / 3)
    return i if i % 256 == 0 else i + 256 - i % 256


def block_configs(layers):
    out = []
    for attn, ffn in layers:
        a = dict(n_heads_in_group=None, no_op=False, num_sink_tokens=None,
                 replace_with_linear=False, sparsify=None, unshifted_sink=False,
                 use_prefill_window_in_sink_attention=False, window_length=None)
        if attn == "no_op":
            a["no_op"] = True
        elif attn == "linear":
            a["replace_with_linear"] = True
        else:
            a["n_heads_in_group"] = attn
        f = dict(ffn_mult=None, no_op=False, replace_with_linear=False, sparsify=None)
        if ffn == "no_op":
            f["no_op"] = True
        elif ffn == "linear":
            f["replace_with_linear"] = True
        else:
            f["ffn_mult"] = ffn
        out.append({"attention": a, "ffn": f})
    return out


def make(out, layers=LAYERS):
    import torch
    import transformers
    from torch import nn
    from transformers.models.llama import modeling_llama as ml
    from ckpt_io import perturb_and_save
    H = TEXT["hidden_size"]
    heads = TEXT["num_attention_heads"]
    cfg = transformers.LlamaConfig(**TEXT, num_hidden_layers=len(layers),
                                   num_key_value_heads=heads, intermediate_size=512,
                                   rope_theta=500000.0, tie_word_embeddings=False,
                                   bos_token_id=2, eos_token_id=1, pad_token_id=0)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.LlamaForCausalLM(cfg)
    for i, (attn, ffn) in enumerate(layers):
        layer = model.model.layers[i]
        if attn == "no_op":
            del layer.self_attn, layer.input_layernorm
        elif attn == "linear":
            layer.self_attn = nn.Module()
            layer.self_attn.linear_attn = nn.Linear(H, H, bias=False)
        else:
            c = transformers.LlamaConfig(**dict(cfg.to_dict(), num_key_value_heads=heads // attn))
            layer.self_attn = ml.LlamaAttention(c, i)
        if ffn == "no_op":
            del layer.mlp, layer.post_attention_layernorm
        elif ffn == "linear":
            layer.mlp = nn.Module()
            layer.mlp.linear_mlp = nn.Linear(H, H, bias=False)
        else:
            c = transformers.LlamaConfig(**dict(cfg.to_dict(), intermediate_size=(
                ffn_mult_to_intermediate_size(ffn, H))))
            layer.mlp = ml.LlamaMLP(c)
    model = model.to(torch.bfloat16)
    perturb_and_save(model, out)
    released(out, layers, cfg)


def released(out, layers, cfg):
    """config.json as NVIDIA's release has it (transformers 4.x's
    save of its DeciLMConfig), and the remote code it names."""
    from ckpt_io import write_release_config
    c = {
        "architectures": ["DeciLMForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "auto_map": {"AutoConfig": "configuration_decilm.DeciLMConfig",
                     "AutoModelForCausalLM": "modeling_decilm.DeciLMForCausalLM"},
        "block_configs": block_configs(layers),
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "hidden_act": "silu",
        "hidden_size": TEXT["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": None,
        "max_position_embeddings": TEXT["max_position_embeddings"],
        "mlp_bias": False,
        "model_type": "nemotron-nas",
        "num_attention_heads": TEXT["num_attention_heads"],
        "num_hidden_layers": len(layers),
        "num_key_value_heads": None,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 256, "rope_type": "llama3"},
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.48.3",
        "use_cache": True,
        "vocab_size": TEXT["vocab_size"],
    }
    write_release_config(out, c, {"block_config.py": BLOCK_CONFIG_PY,
                                  "configuration_decilm.py": CONFIGURATION_DECILM_PY})
