"""IQuest-Coder-V1 Loop (IQuestLoopCoderForCausalLM: IQuestLab's
IQuest-Coder-V1-40B-Loop-Instruct / -Loop-Thinking, remote code, model_type
"iquestloopcoder") as vLLM 0.32 reads it, tiny.  transformers 5.19 has no
class for it: the network is its LlamaForCausalLM (the loop variant is
Llama's decoder run loop_num times over the same layers), saved under
Llama's names, which are the release's, plus what the loop adds:

    model.gate_projections.N.weight   [num_attention_heads, head_dim]
    model.gate_projections.N.bias     [num_attention_heads]

one per decoder layer (the release's LoopGateProjection: a per-head
Linear(head_dim -> 1) stored as one matrix; sigmoid(q_h . w_h + b_h) mixes
loop 1's global attention with the later loops' sliding-window one).  They
are made here with a seeded generator (transformers has no such module).
config.json as the release writes it, with a configuration_iquestloopcoder.py
of our own (the release ships one; vLLM registers no config class for the
model type, so it needs trust_remote_code); no tokenizer.

    make(out)          the release's form: loop_num 2, loop_window_size 64,
                       untied (lm_head.weight), GQA.
    make_loop3(out)    loop_num 3 and a window of 8 (vLLM then holds three
                       attention modules a layer, so three sets of scale
                       buffers), tied embeddings (no lm_head.weight).
"""

CONFIG_PY = '''"""IQuestLoopCoderConfig: the keys and defaults of the release's
configuration_iquestloopcoder.py (IQuest-Coder-V1-40B-Loop-Instruct),
written for the wshard test checkpoints."""
from transformers.configuration_utils import PretrainedConfig


class IQuestLoopCoderConfig(PretrainedConfig):
    model_type = "iquestloopcoder"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(self, vocab_size=76800, hidden_size=5120, intermediate_size=27648,
                 num_hidden_layers=80, num_attention_heads=40, num_key_value_heads=8,
                 head_dim=128, hidden_act="silu", max_position_embeddings=8192,
                 initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True, pad_token_id=None,
                 bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                 rope_theta=500000.0, rope_scaling=None, attention_bias=False,
                 attention_dropout=0.0, mlp_bias=False, loop_num=2, loop_window_size=64,
                 **kwargs):
        self.vocab_size = vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.head_dim = head_dim
        if num_key_value_heads is None:
            num_key_value_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.use_cache = use_cache
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.attention_bias = attention_bias
        self.attention_dropout = attention_dropout
        self.mlp_bias = mlp_bias
        self.loop_num = loop_num
        self.loop_window_size = loop_window_size
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id, tie_word_embeddings=tie_word_embeddings,
                         **kwargs)
'''

AUTO_MAP = {"AutoConfig": "configuration_iquestloopcoder.IQuestLoopCoderConfig",
            "AutoModel": "modeling_iquestloopcoder.IQuestLoopCoderModel",
            "AutoModelForCausalLM": "modeling_iquestloopcoder.IQuestLoopCoderForCausalLM"}


def _make(out, tied, loop_num, window, seed):
    import torch
    import transformers
    from ckpt_io import add_to_first_shard, perturb_and_save, write_release_config
    from make_ckpt import COMMON
    cfg = transformers.LlamaConfig(**dict(COMMON, tie_word_embeddings=tied, bos_token_id=1,
                                          eos_token_id=2))
    cfg.dtype = torch.bfloat16
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    nh, hd = cfg.num_attention_heads, cfg.head_dim
    g = torch.Generator().manual_seed(seed + 7)
    gates = {}
    for n in range(cfg.num_hidden_layers):
        gates["model.gate_projections.%d.weight" % n] = (
            torch.randn(nh, hd, generator=g) * 0.1).to(torch.bfloat16)
        gates["model.gate_projections.%d.bias" % n] = (
            torch.randn(nh, generator=g) * 0.1).to(torch.bfloat16)
    add_to_first_shard(out, gates)
    c = {"architectures": ["IQuestLoopCoderForCausalLM"], "attention_bias": False,
         "attention_dropout": 0.0, "auto_map": AUTO_MAP, "bos_token_id": 1,
         "eos_token_id": 2, "head_dim": hd, "hidden_act": "silu",
         "hidden_size": cfg.hidden_size, "initializer_range": 0.02,
         "intermediate_size": cfg.intermediate_size, "loop_num": loop_num,
         "loop_window_size": window, "max_position_embeddings": cfg.max_position_embeddings,
         "mlp_bias": False, "model_type": "iquestloopcoder",
         "num_attention_heads": nh, "num_hidden_layers": cfg.num_hidden_layers,
         "num_key_value_heads": cfg.num_key_value_heads, "rms_norm_eps": 1e-05,
         "rope_scaling": None, "rope_theta": 500000.0, "tie_word_embeddings": tied,
         "torch_dtype": "bfloat16", "transformers_version": "4.52.4", "use_cache": True,
         "vocab_size": cfg.vocab_size}
    write_release_config(out, c, {"configuration_iquestloopcoder.py": CONFIG_PY})


def make(out):
    _make(out, tied=False, loop_num=2, window=64, seed=1240)


def make_loop3(out):
    _make(out, tied=True, loop_num=3, window=8, seed=1241)


if __name__ == "__main__":
    import sys
    (make_loop3 if len(sys.argv) > 2 and sys.argv[2] == "loop3" else make)(sys.argv[1])
