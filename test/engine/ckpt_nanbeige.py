"""Nanbeige 4.2 (NanbeigeForCausalLM: Nanbeige/Nanbeige4.2-3B, remote code,
model_type "nanbeige") as vLLM 0.32 reads it, tiny.  vLLM has no model of
its own for it: the registry sends it to its Transformers backend
(TransformersForCausalLM), which builds the network from the model's own
transformers code and cuts it by the config's base_model_tp_plan (q, k, v,
gate and up colwise, o and down rowwise), fusing q, k and v into qkv_proj
and gate and up into gate_up_proj as it does for any Llama-shaped model.

transformers 5.19 has no Nanbeige class and the release's modeling code is
not here: the network is transformers' LlamaForCausalLM, whose tensors and
names are the release's (its weight map is Llama's: model.embed_tokens,
model.layers.N.self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, the two
norms, model.norm, an untied lm_head), with head_dim decoupled from
hidden_size as the release has it (48 heads of 128 over 3072 there).
config.json carries the release's keys (num_loops, skip_loop_final_norm and
the research switches, all off) and auto_map to a configuration_nanbeige.py
and a modeling_nanbeige.py written beside it: stand-ins that hold the
release's config keys and tp plan and run the layers once (num_loops 1;
the release runs its stack twice over the same weights, which changes no
tensor).  No tokenizer: the prompts are token ids.

    make(out)
"""

CONFIG_PY = '''"""NanbeigeConfig: the keys and tp plan of the release's
configuration_nanbeige.py (Nanbeige4.2-3B), written for the wshard test
checkpoints over transformers' LlamaConfig (the research switches are
kept as keys; all are off in the release)."""
from transformers import LlamaConfig


class NanbeigeConfig(LlamaConfig):
    model_type = "nanbeige"
    base_model_tp_plan = {
        "layers.*.self_attn.q_proj": "colwise",
        "layers.*.self_attn.k_proj": "colwise",
        "layers.*.self_attn.v_proj": "colwise",
        "layers.*.self_attn.o_proj": "rowwise",
        "layers.*.mlp.gate_proj": "colwise",
        "layers.*.mlp.up_proj": "colwise",
        "layers.*.mlp.down_proj": "rowwise",
    }

    def __init__(self, qk_layernorm=False, emb_neighbor_num=None, num_loops=1,
                 loop_loss_weights=None, skip_loop_final_norm=False,
                 enable_double_loop_split=False, loop_share_kv=False,
                 enable_hyper_connection=False, enable_mhc=False,
                 enable_depth_attention=False, **kwargs):
        self.qk_layernorm = qk_layernorm
        self.emb_neighbor_num = emb_neighbor_num
        self.num_loops = num_loops
        self.loop_loss_weights = loop_loss_weights if loop_loss_weights is not None else []
        self.skip_loop_final_norm = skip_loop_final_norm
        self.enable_double_loop_split = enable_double_loop_split
        self.loop_share_kv = loop_share_kv
        self.enable_hyper_connection = enable_hyper_connection
        self.enable_mhc = enable_mhc
        self.enable_depth_attention = enable_depth_attention
        super().__init__(**kwargs)
'''

MODELING_PY = '''"""Stand-in for the release's modeling_nanbeige.py (wshard test
checkpoints): Llama's network under Nanbeige's names, its layers run once."""
from transformers import LlamaForCausalLM, LlamaModel

from .configuration_nanbeige import NanbeigeConfig


def _check(config):
    if config.num_loops != 1:
        raise ValueError("this stand-in runs num_loops 1 only")


class NanbeigeModel(LlamaModel):
    config_class = NanbeigeConfig

    def __init__(self, config):
        _check(config)
        super().__init__(config)


class NanbeigeForCausalLM(LlamaForCausalLM):
    config_class = NanbeigeConfig

    def __init__(self, config):
        _check(config)
        super().__init__(config)
'''

AUTO_MAP = {"AutoConfig": "configuration_nanbeige.NanbeigeConfig",
            "AutoModel": "modeling_nanbeige.NanbeigeModel",
            "AutoModelForCausalLM": "modeling_nanbeige.NanbeigeForCausalLM"}

# head_dim 64 over a residual of 128: 4 query heads are 256 wide
SIZES = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=64,
             vocab_size=1000, max_position_embeddings=512)


def make(out):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, write_release_config
    cfg = transformers.LlamaConfig(**dict(SIZES, tie_word_embeddings=False, bos_token_id=1,
                                          eos_token_id=2))
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1260)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    c = dict(SIZES)
    c.update({"architectures": ["NanbeigeForCausalLM"], "attention_bias": False,
              "attention_dropout": 0.0, "auto_map": AUTO_MAP, "bos_token_id": 1,
              "eos_token_id": 2, "hidden_act": "silu", "initializer_range": 0.02,
              "mlp_bias": False, "model_type": "nanbeige", "pad_token_id": 0,
              "pretraining_tp": 1, "qk_layernorm": False, "rms_norm_eps": 1e-05,
              "rope_scaling": None, "rope_theta": 10000.0, "num_loops": 1,
              "skip_loop_final_norm": False, "loop_loss_weights": [],
              "enable_hyper_connection": False, "enable_depth_attention": False,
              "enable_double_loop_split": False, "loop_share_kv": False,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16",
              "transformers_version": "4.56.2", "use_cache": True})
    write_release_config(out, c, {"configuration_nanbeige.py": CONFIG_PY,
                                  "modeling_nanbeige.py": MODELING_PY})


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
