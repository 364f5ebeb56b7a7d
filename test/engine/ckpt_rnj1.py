"""Essential AI's Rnj-1 (Rnj1ForCausalLM, vLLM 0.32 model_executor/models/
rnj1.py), tiny.  Rnj-1 is Gemma 3's text decoder (transformers'
Gemma3ForCausalLM, model_type "gemma3_text"): the same tensors under the same
names, four norms a layer and q/k norms, GeGLU (gelu_pytorch_tanh), the head
tied to the embedding (tie_word_embeddings, Gemma3TextConfig's default true;
"Tied Embeddings? Yes" on the model card).  vLLM registers no config class of
its own for it: config.json is a Gemma3TextConfig that names the
architecture Rnj1ForCausalLM, its layer_types "full_attention" or
"chunked_attention" (block-local attention with one block of lookback, the
window sliding_window), its rope_parameters keyed by layer type (rnj1.py
reads config.rope_parameters[layer_type]).

The network is transformers' own Gemma3ForCausalLM; save_pretrained writes
the release's names and no lm_head.weight (tied).

    make(out)          every layer full attention (Rnj-1 as released: "only
                       global attention, and YaRN for long-context
                       extension"); YaRN on the full layers.  vLLM's CPU
                       build runs it.
    make_chunked(out)  a chunked layer, then a full one (the Rnj-1.x layout
                       vLLM's chunk_lookback serves).  The tensors are the
                       same; vLLM 0.32 builds a chunked layer only on its
                       Triton attention backend (layers/attention/
                       attention.py asserts TRITON_ATTN), so its CPU build
                       cannot build this one.
    make_untied(out)   tie_word_embeddings false, lm_head.weight shipped.
"""
import os


def _make(out, layer_types, tied=True):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, update_config
    kw = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=64,
              vocab_size=1000, max_position_embeddings=512,
              # transformers' class knows sliding and full layers; the saved
              # tensors do not depend on the kind
              layer_types=["full_attention"] * 2, sliding_window=8,
              tie_word_embeddings=tied)
    cfg = transformers.Gemma3TextConfig(**kw)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Gemma3ForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)

    def release(c):
        c["architectures"] = ["Rnj1ForCausalLM"]
        c["layer_types"] = layer_types
        yarn = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                "original_max_position_embeddings": 128}
        c["rope_parameters"] = {t: dict(yarn) for t in set(layer_types)}
        c.pop("_sliding_window_pattern", None)
    update_config(out, release)
    gc = os.path.join(out, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)


def make(out):
    _make(out, ["full_attention", "full_attention"])


def make_chunked(out):
    _make(out, ["chunked_attention", "full_attention"])


def make_untied(out):
    _make(out, ["full_attention", "full_attention"], tied=False)
