"""Sparse-embedding encoders as vLLM 0.32 reads them, tiny, from
transformers' own classes:

make_splade: BertSpladeSparseEmbeddingModel (model_executor/models/bert.py;
naver/splade-v3's layout: BERT saved with its masked-LM head as
BertForMaskedLM, the decoder untied so that its weight and bias are in the
checkpoint, which vLLM's SPLADE loads them from).  config.json names the
architecture, as --hf-overrides gives it: the oracle passes none.

make_bge_m3: BgeM3EmbeddingModel (model_executor/models/roberta.py;
BAAI/bge-m3's layout: the XLM-RoBERTa encoder as transformers'
XLMRobertaModel saves it, names without a prefix, its pooler kept; the
sparse head sparse_linear [1, hidden] and the multi-vector head
colbert_linear [hidden, hidden], each with a bias, as the release's
pickled sparse_linear.pt and colbert_linear.pt, which vLLM reads as
secondary weights, and the same tensors in the checkpoint's safetensors
under sparse_linear.* and colbert_linear.*, the one place wshard reads
them from).  The heads are F32, as FlagEmbedding saves them; config.json
names the architecture."""
import os


def _tokenizer(cfg, out):
    from make_ckpt import word_tokenizer
    word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def _config_kw():
    from make_ckpt import COMMON
    return {k: v for k, v in COMMON.items() if k not in ("num_key_value_heads", "head_dim")}


def make_splade(out, **over):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, update_config
    cfg = transformers.BertConfig(**dict(_config_kw(), **dict({"tie_word_embeddings": False}, **over)))
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.BertForMaskedLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    update_config(out, lambda c: c.update(architectures=["BertSpladeSparseEmbeddingModel"]))
    _tokenizer(cfg, out)


def make_splade_tied(out):
    """Saved tied (transformers' default): no cls.predictions.decoder.*,
    which vLLM's SPLADE then leaves as initialised (wshard refuses)."""
    make_splade(out, tie_word_embeddings=True)


def make_bge_m3(out, in_safetensors=True, **over):
    import torch
    import transformers
    from ckpt_io import add_to_first_shard, perturb_and_save, update_config
    cfg = transformers.XLMRobertaConfig(**_config_kw(), position_embedding_type="absolute",
                                        **over)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.XLMRobertaModel(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    h = cfg.hidden_size
    g = torch.Generator().manual_seed(7)
    heads = {"sparse_linear": {"weight": torch.randn(1, h, generator=g) * 0.05,
                               "bias": torch.randn(1, generator=g) * 0.05},
             "colbert_linear": {"weight": torch.randn(h, h, generator=g) * 0.05,
                                "bias": torch.randn(h, generator=g) * 0.05}}
    for name, sd in heads.items():
        torch.save(sd, os.path.join(out, name + ".pt"))
    if in_safetensors:
        add_to_first_shard(out, {f"{name}.{k}": t.clone() for name, sd in heads.items()
                                 for k, t in sd.items()})
    update_config(out, lambda c: c.update(architectures=["BgeM3EmbeddingModel"],
                                          position_embedding_type="absolute"))
    _tokenizer(cfg, out)


def make_bge_m3_pt(out):
    """The release's form: the heads only in sparse_linear.pt and
    colbert_linear.pt (wshard refuses: it reads no pickled file)."""
    make_bge_m3(out, in_safetensors=False)


def make_bge_m3_hdm(out):
    """config.json's head_dtype "model": vLLM holds the heads in BF16."""
    make_bge_m3(out, head_dtype="model")
