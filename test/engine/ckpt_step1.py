"""StepFun's Step-1 text model (Step1ForCausalLM, model_type "step1": the
LLM of Step-Audio-TTS-3B and Step-Audio-EditX) as vLLM 0.32 reads it
(model_executor/models/step1.py), tiny.  Step-1 is a Llama-layout decoder
without rotary embeddings: q/k/v/o_proj, gate/up/down_proj, RMSNorm, no
biases, under Llama's names (model.embed_tokens, model.layers.N.*,
model.norm, lm_head); positions come from ALiBi with a square-root
distance, slopes computed from the heads (no tensor).  Its kv heads are
num_attention_groups (head_dim is hidden_size / num_attention_heads).

vLLM 0.32 registers no config class for "step1" and transformers 5.19 knows
none: the release ships configuration_step1.py and vLLM reads config.json
through it (trust_remote_code).  Ours, beside config.json, holds the keys
vLLM reads with the defaults of Step-Audio-TTS-3B's sizes.  The weights are
made by transformers' LlamaForCausalLM, whose names are the release's; no
tokenizer (the prompts are token ids).

    make(out)         config.json without tie_word_embeddings, as the
                      release: vLLM ties the head to the embedding
                      (step1.py: getattr(config, "tie_word_embeddings",
                      True)) and skips the lm_head.weight the file still
                      ships (an untied one, different from the embedding).
                      2 kv groups of 4 heads: at tp 4 each kv head is on
                      two ranks.
    make_untied(out)  tie_word_embeddings false: lm_head.weight is read.
    make_said(out)    tie_word_embeddings true, said, beside the same
                      different head: vLLM 0.32 stops trusting the tie
                      (ModelConfig.maybe_untie_word_embeddings) and reads
                      lm_head.weight untied.
"""

CONFIG_PY = '''"""Step-1's configuration (model_type "step1"), written for the wshard
test checkpoints: the keys vLLM 0.32's step1.py reads, with
Step-Audio-TTS-3B's sizes as defaults.  tie_word_embeddings is left to
config.json: where it gives none the attribute is absent and vLLM ties."""
from transformers import PretrainedConfig


class Step1Config(PretrainedConfig):
    model_type = "step1"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(self, hidden_size=3072, intermediate_size=8192, num_attention_heads=48,
                 num_attention_groups=4, num_hidden_layers=32, max_seq_len=32768,
                 vocab_size=74752, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=3,
                 pad_token_id=0, **kwargs):
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_attention_heads = num_attention_heads
        self.num_attention_groups = num_attention_groups
        self.num_hidden_layers = num_hidden_layers
        self.max_seq_len = max_seq_len
        self.max_position_embeddings = kwargs.pop("max_position_embeddings", max_seq_len)
        self.vocab_size = vocab_size
        self.rms_norm_eps = rms_norm_eps
        super().__init__(bos_token_id=bos_token_id, eos_token_id=eos_token_id,
                         pad_token_id=pad_token_id, **kwargs)
'''

AUTO_MAP = {"AutoConfig": "configuration_step1.Step1Config",
            "AutoModelForCausalLM": "modeling_step1.Step1ForCausalLM"}


def _make(out, extra, seed):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, write_release_config
    from make_ckpt import COMMON
    kw = dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False,
              attention_bias=False, mlp_bias=False, bos_token_id=1, eos_token_id=3,
              pad_token_id=0)
    cfg = transformers.LlamaConfig(**kw)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    c = {"architectures": ["Step1ForCausalLM"], "auto_map": AUTO_MAP,
         "model_type": "step1", "bos_token_id": 1, "eos_token_id": 3, "pad_token_id": 0,
         "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
         "num_attention_heads": cfg.num_attention_heads, "num_attention_groups": 2,
         "num_hidden_layers": cfg.num_hidden_layers,
         "max_seq_len": cfg.max_position_embeddings, "vocab_size": cfg.vocab_size,
         "rms_norm_eps": 1e-05, "torch_dtype": "bfloat16", "transformers_version": "4.48.3"}
    c.update(extra)
    write_release_config(out, c, {"configuration_step1.py": CONFIG_PY})


def make(out):
    _make(out, {}, 1234)


def make_untied(out):
    _make(out, {"tie_word_embeddings": False}, 1235)


def make_said(out):
    _make(out, {"tie_word_embeddings": True}, 1236)
