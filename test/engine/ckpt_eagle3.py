"""An EAGLE-3 speculative draft for make_ckpt.py's llama target, laid out
as EAGLE-3's own releases ship one (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B):
config.json a LlamaConfig with architectures ["LlamaForCausalLMEagle3"],
one decoder layer and draft_vocab_size; the tensors

    midlayer.*         one Llama decoder layer whose q, k and v take
                       2*hidden_size (the token's embedding and the
                       hidden state side by side), with hidden_norm
    fc.weight          [hidden, 3*hidden]: the target's three auxiliary
                       hidden states projected to one
    norm.weight        the final norm
    lm_head.weight     [draft_vocab_size, hidden]
    d2t                I64 [draft_vocab_size]: draft token i is target
                       token i + d2t[i]
    t2d                BOOL [vocab_size]: which target tokens the draft has

and no embedding (the draft takes the target's).  The weights are
transformers' own LlamaDecoderLayer, LlamaRMSNorm and nn.Linear, the
q/k/v projections made 2*hidden wide as EAGLE-3's are.  Its sizes are the
target's (make_ckpt.COMMON); the draft's vocabulary is 200 of the
target's 1000 tokens (the releases: 32000 of 128256), not a multiple of
64, so that vLLM pads its head.  The target has 2 layers, fewer than the
default auxiliary layers (2, L/2, L-3) assume: config.json names them
(eagle_aux_hidden_state_layer_ids), as the releases for other targets
do.  The head's rows for LIKELY are scaled up (below).  make(out)
writes the draft into OUT."""
import json
import os

DRAFT_VOCAB = 200
# Tokens the llama target repeats in its greedy answers to oracle.py's
# prompts: their rows of the draft's head are made 20 times the others',
# so that the draft proposes them often and the target accepts some; the
# oracle compares the counts of accepted tokens, which a head cut or
# mapped (d2t) otherwise than vLLM's changes.
LIKELY = [167, 838, 931]


def make(out):
    import torch
    import torch.nn as nn
    import transformers
    from safetensors.torch import save_file
    from transformers.models.llama.modeling_llama import (LlamaDecoderLayer,
                                                          LlamaRMSNorm)
    from make_ckpt import COMMON
    cfg = transformers.LlamaConfig(**dict(COMMON, num_hidden_layers=1))
    h = cfg.hidden_size
    hd = cfg.head_dim
    torch.manual_seed(4321)
    layer = LlamaDecoderLayer(cfg, layer_idx=0)
    # EAGLE-3's first (only) layer reads [embedding, hidden state]
    att = layer.self_attn
    att.q_proj = nn.Linear(2 * h, cfg.num_attention_heads * hd, bias=False)
    att.k_proj = nn.Linear(2 * h, cfg.num_key_value_heads * hd, bias=False)
    att.v_proj = nn.Linear(2 * h, cfg.num_key_value_heads * hd, bias=False)
    mods = {"midlayer": layer, "midlayer.hidden_norm": LlamaRMSNorm(h, cfg.rms_norm_eps),
            "fc": nn.Linear(3 * h, h, bias=False),
            "norm": LlamaRMSNorm(h, cfg.rms_norm_eps),
            "lm_head": nn.Linear(h, DRAFT_VOCAB, bias=False)}
    tensors = {}
    with torch.no_grad():
        for prefix, mod in mods.items():
            mod.to(torch.bfloat16)
            for name, p in mod.named_parameters():
                # random init leaves norms at 1: perturb every parameter
                p.add_(torch.randn_like(p) * 0.02)
                tensors[prefix + "." + name] = p.detach().clone().contiguous()
    # the draft's tokens: target ids in increasing order (the releases
    # take the most frequent ones, then sort them), LIKELY among them
    rest = [i for i in torch.randperm(cfg.vocab_size).tolist() if i not in LIKELY]
    ids = torch.sort(torch.tensor(LIKELY + rest[:DRAFT_VOCAB - len(LIKELY)])).values
    with torch.no_grad():
        for t in LIKELY:
            tensors["lm_head.weight"][(ids == t).nonzero().item()] *= 20
    tensors["d2t"] = (ids - torch.arange(DRAFT_VOCAB)).to(torch.int64)
    t2d = torch.zeros(cfg.vocab_size, dtype=torch.bool)
    t2d[ids] = True
    tensors["t2d"] = t2d
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    c = cfg.to_diff_dict()
    for k in ("transformers_version", "dtype", "torch_dtype", "use_cache"):
        c.pop(k, None)
    c.update(architectures=["LlamaForCausalLMEagle3"], draft_vocab_size=DRAFT_VOCAB,
             torch_dtype="bfloat16", eagle_aux_hidden_state_layer_ids=[0, 1, 2],
             tie_word_embeddings=False)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
