"""ColQwen3 retrievers (vLLM 0.32's colqwen3.py ColQwen3Model under the
architectures ColQwen3, OpsColQwen3Model and Qwen3VLNemotronEmbedModel) and
ColQwen3.5 (colqwen3_5.py ColQwen3_5Model), tiny.  transformers 5.19 has no
ColQwen3 class: each is the qwen3_vl (qwen3_5_vl) case's
Qwen3VLForConditionalGeneration (Qwen3_5ForConditionalGeneration), its
tokenizer and processor, rewritten in a release's naming, with a ColBERT
projection (a perturbed nn.Linear from the text model's width to 48) and
config.json as vLLM reads it: its own ColQwen3Config (model_type colqwen3,
ops_colqwen3, qwen3_vl_nemotron_embed; Qwen3VLConfig's keys at the top and
the projection's width as embed_dim or dims), Qwen3_5Config for ColQwen3.5
with retrieval_attention_contract."""
import os

DIM = 48


def _proj(hidden, bias, prefix="custom_text_proj."):
    import torch
    g = torch.Generator().manual_seed(4321)
    t = {prefix + "weight": (torch.randn(DIM, hidden, generator=g) * 0.05).to(torch.bfloat16)}
    if bias:
        t[prefix + "bias"] = (torch.randn(DIM, generator=g) * 0.05).to(torch.bfloat16)
    return t


def _base(case, out):
    import make_ckpt
    make_ckpt.make(case, out)


def _rename(out, ren):
    from ckpt_io import rename_tensors

    def rename(k):
        old = next((o for o in ren if k.startswith(o)), None)
        return ren[old] + k[len(old):] if old else k
    rename_tensors(out, rename)


def _config(out, arch, model_type, **extra):
    from ckpt_io import update_config

    def fn(c):
        c["architectures"] = [arch]
        if model_type:
            c["model_type"] = model_type
        c.update(extra)
    update_config(out, fn)


def _hidden(out):
    import json
    c = json.load(open(os.path.join(out, "config.json")))
    return c["text_config"]["hidden_size"]


def make_tomoro(out):
    """TomoroAI/tomoro-colqwen3-embed: the Qwen3-VL under vlm. (vlm.model.visual.,
    vlm.model.language_model., vlm.lm_head.), the projection
    embedding_proj_layer (an nn.Linear with a bias, which vLLM drops: the
    dimension is in config.json), model_type colqwen3, embed_dim."""
    from ckpt_io import add_to_first_shard
    _base("qwen3_vl", out)
    _rename(out, {"model.": "vlm.model.", "lm_head.": "vlm.lm_head."})
    add_to_first_shard(out, _proj(_hidden(out), True, "embedding_proj_layer."))
    _config(out, "ColQwen3", "colqwen3", embed_dim=DIM)


def make_ops(out):
    """OpenSearch-AI/Ops-Colqwen3: Qwen3VLModel's names without an outer
    prefix (visual., language_model.), no lm_head (the embedding tied),
    custom_text_proj without a bias, model_type ops_colqwen3, dims."""
    from ckpt_io import add_to_first_shard, rewrite_shards
    _base("qwen3_vl", out)
    _rename(out, {"model.visual.": "visual.", "model.language_model.": "language_model."})
    rewrite_shards(out, lambda t: t.pop("lm_head.weight", None))
    add_to_first_shard(out, _proj(_hidden(out), False))

    def tie(c):
        c["tie_word_embeddings"] = True
        c["text_config"]["tie_word_embeddings"] = True
    from ckpt_io import update_config
    update_config(out, tie)
    _config(out, "OpsColQwen3Model", "ops_colqwen3", dims=DIM)


def make_nemotron(out):
    """nvidia's Qwen3-VL-Nemotron-Embed (nemotron-colembed-vl): transformers'
    Qwen3-VL names (model.visual., model.language_model., lm_head.), no
    projection (vLLM L2-normalises the hidden states),
    model_type qwen3_vl_nemotron_embed."""
    _base("qwen3_vl", out)
    _config(out, "Qwen3VLNemotronEmbedModel", "qwen3_vl_nemotron_embed")


def make_nodim(out):
    """ColQwen3 with a projection but no dimension in config.json: vLLM
    builds custom_text_proj in load_weights, in the model's dtype.  (Without
    a bias: with one, vLLM 0.32 reads custom_text_proj.bias before the
    weight that makes the layer, leaves the bias unloaded and fails.)"""
    from ckpt_io import add_to_first_shard
    _base("qwen3_vl", out)
    add_to_first_shard(out, _proj(_hidden(out), False))
    _config(out, "ColQwen3", "colqwen3")


def make_colqwen3_5(out):
    """ColQwen3.5 (athrael-soju/colqwen3.5-*, colpali-engine's ColQwen3_5):
    Qwen3_5Model's names (language_model., visual.), the embedding tied (no
    lm_head), custom_text_proj with its bias, Qwen3_5Config with dim and
    retrieval_attention_contract."""
    from ckpt_io import add_to_first_shard, rewrite_shards
    _base("qwen3_5_vl", out)
    _rename(out, {"model.visual.": "visual.", "model.language_model.": "language_model."})
    rewrite_shards(out, lambda t: t.pop("lm_head.weight", None))
    add_to_first_shard(out, _proj(_hidden(out), True))
    _config(out, "ColQwen3_5", None, dim=DIM, retrieval_attention_contract="causal")
