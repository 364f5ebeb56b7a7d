"""LongCat-Flash-Lite (LongcatFlashNgramForCausalLM, config.json's
model_type "longcat_flash"), as vLLM 0.32 reads it
(model_executor/models/longcat_flash_ngram.py), tiny: LongCat-Flash's
layers (make_ckpt.py's longcat_flash case, 2 layers) made by transformers'
LongcatFlashForCausalLM, plus the n-gram embedding transformers has no
class for, under the names vLLM's load_weights takes:
model.ngram_embeddings.embedders.E.weight, E = 0 .. k*(n-1)-1, of
ngram_vocab_size_ratio*vocab_size + 2E + 1 rows (4 tables of 2001 to 2007
rows of 64: one VocabParallelEmbedding of 8016 rows, padded to 8064, so
that at tp 2 rank 0's rows end inside table 2), and
model.ngram_embeddings.post_projs.E.weight [hidden, 64] (nn.Linear from
the table's width to hidden).  config.json names the architecture and
gives the keys vLLM reads (ngram_vocab_size_ratio, emb_split_num,
emb_neighbor_num).  The MTP layer (released_longcat_mtp) is left out:
vLLM drops model.mtp.* for this class, as for LongCat-Flash."""

NGRAM = dict(ngram_vocab_size_ratio=2, emb_split_num=2, emb_neighbor_num=3)


def make(out):
    import torch
    import transformers
    from ckpt_io import (add_to_first_shard, perturb_and_save, perturber, read_tensors,
                         update_config)
    from make_ckpt import CASES, COMMON, released_zero_experts
    kw = dict(COMMON)
    kw.update(CASES["longcat_flash"][2])
    kw["num_hidden_layers"] = 2
    cfg = transformers.LongcatFlashConfig(**kw)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.LongcatFlashForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    released_zero_experts(out, cfg.n_routed_experts)
    h, v = cfg.hidden_size, cfg.vocab_size
    tables = NGRAM["emb_split_num"] * (NGRAM["emb_neighbor_num"] - 1)
    dim = h // tables
    rnd = perturber(2468)
    dt = read_tensors(out)["model.embed_tokens.weight"].dtype
    new = {}
    for e in range(tables):
        rows = NGRAM["ngram_vocab_size_ratio"] * v + 2 * e + 1
        new[f"model.ngram_embeddings.embedders.{e}.weight"] = rnd(torch.zeros(rows, dim, dtype=dt))
        new[f"model.ngram_embeddings.post_projs.{e}.weight"] = rnd(torch.zeros(h, dim, dtype=dt))
    add_to_first_shard(out, new)
    update_config(out, lambda c: c.update(architectures=["LongcatFlashNgramForCausalLM"],
                                          **NGRAM))
