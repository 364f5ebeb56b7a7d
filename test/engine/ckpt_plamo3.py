"""PLaMo 3 (Plamo3ForCausalLM, pfnet's remote code, model_type "plamo3") as
vLLM 0.32 reads it, tiny.  transformers 5.19 has no PLaMo 3 class; the
closest is Gemma 3's text model (q/k norms, a norm before and after both the
attention and the MLP, sliding-window layers, norm weights stored around 0
and offset in forward).  Its weights are made by Gemma3ForCausalLM and
rewritten into the release's layout (pfnet/plamo-3-nict-*):

    model.layers.N.                         -> model.layers.layers.N.
    self_attn.q_proj | k_proj | v_proj      -> mixer.qkv_proj   (q rows, k rows, v rows)
    self_attn.o_proj                        -> mixer.o_proj
    self_attn.q_norm / k_norm               -> mixer.q_norm / k_norm
    mlp.gate_proj | up_proj                 -> mlp.gate_up_proj (gate rows, then up rows)
    mlp.down_proj                           -> mlp.down_proj
    input_layernorm                         -> pre_mixer_norm
    post_attention_layernorm                -> post_mixer_norm
    pre_feedforward_layernorm               -> pre_mlp_norm
    post_feedforward_layernorm              -> post_mlp_norm
    model.embed_tokens, model.norm, lm_head    (kept)

The norms are stored as the release stores them: PLaMo 3's RMSNorm
multiplies by (offset + weight), offset 1 (pre_mixer, pre_mlp, q, k, final
norm), 1/5 (post_mixer) and 1/5**1.5 (post_mlp); vLLM adds the offset on
loading.  Every parameter is perturbed (ckpt_io.perturb_and_save), so the
norms are small values around 0 whose sum with the offset rounds in BF16.

config.json holds the release's keys (window_size, sliding_window_pattern,
rope_theta, rope_local_theta, ...) with auto_map to a configuration_plamo3.py
written beside it (the release's Plamo3Config: layer_types,
interleaved_sliding_window and rope_parameters are properties of it), so vLLM
needs trust_remote_code=True.  No tokenizer (the prompts are token ids).

    make(out)            the release's form: tie_word_embeddings true, no
                         lm_head.weight, vocabulary 1000 (not a multiple of
                         16 or 64: the embedding is padded to 1024).
    make_untied(out)     tie_word_embeddings false, lm_head.weight [V, H],
                         vocabulary 1008 (a multiple of 16, padded to 1024).
    make_untied_odd(out) tie_word_embeddings false, vocabulary 1000: vLLM's
                         ParallelLMHead(ceil16(V), org V) then holds
                         pad64(V) + 64 rows (see report.md); wshard cannot
                         write that head.
    make_tied_with_head(out)  tie_word_embeddings true but an lm_head.weight
                         in the checkpoint (vLLM 0.32 unties it on loading).
"""
import os

CONFIG_PY = '''"""PLaMo3 model configuration (as pfnet's configuration_plamo3.py)."""

import warnings
from typing import Any, Optional

from transformers.configuration_utils import PretrainedConfig


def is_full_attn(sliding_window_pattern: int, layer_idx: int) -> bool:
    return not bool((layer_idx + 1) % sliding_window_pattern)


class Plamo3Config(PretrainedConfig):  # type: ignore[misc]
    model_type: str = "plamo3"

    def __init__(
        self,
        hidden_size: int = 4096,
        num_hidden_layers: int = 32,
        rms_norm_eps: float = 1e-6,
        scale_embedding: bool = False,
        tie_word_embeddings: bool = True,
        num_attention_heads: int = 32,
        num_key_value_heads: int = 4,
        head_dim: int = 128,
        max_position_embeddings: int = 2048,
        window_size: int = 128,
        sliding_window_pattern: int = 8,
        rope_theta: int = 150_000,
        rope_local_theta: int = 10_000,
        rope_scaling_factor: float = 1,
        initial_context_length: Optional[int] = None,
        intermediate_size: int = 13312,
        vocab_size: int = 32000,
        tokenizer_class: str = "Plamo3Tokenizer",
        pad_token_id: Optional[int] = None,
        bos_token_id: int = 1,
        eos_token_id: int = 2,
        use_cache: bool = True,
        **kwargs: Any,
    ) -> None:
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.rms_norm_eps = rms_norm_eps
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.head_dim = head_dim
        self.num_key_value_heads = num_key_value_heads
        legacy_rope_theta = kwargs.pop("rope_global_theta", None)
        if legacy_rope_theta is not None and rope_theta == 150_000:
            rope_theta = legacy_rope_theta
        legacy_sliding_window = kwargs.pop("sliding_window", None)
        if isinstance(legacy_sliding_window, list):
            windows = [v for v in legacy_sliding_window if v is not None]
            if windows and all(v == windows[0] for v in windows):
                window_size = windows[0]
        elif isinstance(legacy_sliding_window, int):
            window_size = legacy_sliding_window
        self.window_size = window_size
        self.sliding_window_pattern = sliding_window_pattern
        self.rope_theta = rope_theta
        self.rope_local_theta = rope_local_theta
        self.rope_scaling_factor = rope_scaling_factor
        self.initial_context_length = initial_context_length
        self.intermediate_size = intermediate_size
        self.vocab_size = vocab_size
        self.use_cache = use_cache
        self.scale_embedding = scale_embedding
        super().__init__(
            tokenizer_class=tokenizer_class,
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )

    @property
    def sliding_window(self) -> int:
        return self.window_size

    @property
    def interleaved_sliding_window(self) -> list:
        return [None if is_full_attn(self.sliding_window_pattern, i) else self.window_size
                for i in range(self.num_hidden_layers)]

    @property
    def layer_types(self) -> list:
        return ["full_attention" if w is None else "sliding_attention"
                for w in self.interleaved_sliding_window]

    @property
    def layers_block_type(self) -> list:
        return ["attention" for _ in range(self.num_hidden_layers)]

    @property
    def rope_parameters(self) -> dict:
        allp = {"full_attention": {"rope_theta": self.rope_theta, "rope_type": "default"},
                "sliding_attention": {"rope_theta": self.rope_local_theta,
                                      "rope_type": "default"}}
        return {t: allp[t] for t in set(self.layer_types)}

    @rope_parameters.setter
    def rope_parameters(self, rope_parameters) -> None:
        pass

    @property
    def rope_local_base_freq(self) -> int:
        return self.rope_local_theta
'''

AUTO_MAP = {"AutoConfig": "configuration_plamo3.Plamo3Config",
            "AutoModelForCausalLM": "modeling_plamo3.Plamo3ForCausalLM"}

LAYER_RENAMES = {
    "self_attn.o_proj.weight": "mixer.o_proj.weight",
    "self_attn.q_norm.weight": "mixer.q_norm.weight",
    "self_attn.k_norm.weight": "mixer.k_norm.weight",
    "mlp.down_proj.weight": "mlp.down_proj.weight",
    "input_layernorm.weight": "pre_mixer_norm.weight",
    "post_attention_layernorm.weight": "post_mixer_norm.weight",
    "pre_feedforward_layernorm.weight": "pre_mlp_norm.weight",
    "post_feedforward_layernorm.weight": "post_mlp_norm.weight",
}


def _make(out, vocab=1000, tie=True, keep_head=False, layers=2):
    import torch
    import transformers
    from ckpt_io import perturb, save_shards, write_release_config
    from make_ckpt import COMMON
    H, I, nh, kv, hd = (COMMON["hidden_size"], COMMON["intermediate_size"],
                        COMMON["num_attention_heads"], COMMON["num_key_value_heads"],
                        COMMON["head_dim"])
    cfg = transformers.Gemma3TextConfig(
        hidden_size=H, intermediate_size=I, num_hidden_layers=layers,
        num_attention_heads=nh, num_key_value_heads=kv, head_dim=hd, vocab_size=vocab,
        max_position_embeddings=COMMON["max_position_embeddings"], sliding_window=32,
        layer_types=["sliding_attention" if (i + 1) % 2 else "full_attention"
                     for i in range(layers)],
        tie_word_embeddings=tie and not keep_head)
    torch.manual_seed(1234)
    model = transformers.Gemma3ForCausalLM(cfg).to(torch.bfloat16)
    perturb(model)
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    t = {"model.embed_tokens.weight": sd["model.embed_tokens.weight"],
         "model.norm.weight": sd["model.norm.weight"]}
    if not tie or keep_head:
        # an lm_head of its own (untied, or a redundant copy beside a tied embedding)
        t["lm_head.weight"] = (sd["lm_head.weight"] if "lm_head.weight" in sd and not tie
                               else (sd["model.embed_tokens.weight"]
                                     + torch.randn_like(sd["model.embed_tokens.weight"]) * 0.02))
    groups = [list(t)]
    for n in range(layers):
        a, b = "model.layers.%d." % n, "model.layers.layers.%d." % n
        lt = {b + "mixer.qkv_proj.weight": torch.cat(
                  [sd[a + "self_attn.q_proj.weight"], sd[a + "self_attn.k_proj.weight"],
                   sd[a + "self_attn.v_proj.weight"]], 0),
              b + "mlp.gate_up_proj.weight": torch.cat(
                  [sd[a + "mlp.gate_proj.weight"], sd[a + "mlp.up_proj.weight"]], 0)}
        for old, new in LAYER_RENAMES.items():
            lt[b + new] = sd[a + old]
        t.update(lt)
        groups.append(sorted(lt))
    os.makedirs(out, exist_ok=True)
    save_shards(out, t, groups)
    c = {"architectures": ["Plamo3ForCausalLM"], "auto_map": AUTO_MAP, "model_type": "plamo3",
         "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3,
         "hidden_size": H, "intermediate_size": I, "num_hidden_layers": layers,
         "num_attention_heads": nh, "num_key_value_heads": kv, "head_dim": hd,
         "max_position_embeddings": COMMON["max_position_embeddings"],
         "window_size": 32, "sliding_window_pattern": 2,
         "rope_theta": 1000000, "rope_local_theta": 10000,
         "rms_norm_eps": 1e-06, "scale_embedding": False,
         "tie_word_embeddings": tie, "tokenizer_class": "Plamo3Tokenizer",
         "torch_dtype": "bfloat16", "vocab_size": vocab, "use_cache": True}
    write_release_config(out, c, {"configuration_plamo3.py": CONFIG_PY})


def make(out):
    _make(out)


def make_untied(out):
    _make(out, vocab=1008, tie=False)


def make_untied_odd(out):
    _make(out, vocab=1000, tie=False)


def make_tied_with_head(out):
    _make(out, vocab=1000, tie=True, keep_head=True)

