"""A Medusa speculative draft for make_ckpt.py's llama target, laid out
as vLLM's Medusa checkpoints are (abhigoyal/vllm-medusa-*: config.json
of model_type medusa, architectures ["MedusaModel"], num_heads,
num_hidden_layers; the tensors

    blocks.{h}.layers.{l}.weight   [hidden, hidden]: head h's residual
                                   linears (x + SiLU(W x)), no bias
    lm_heads.{h}.weight            [vocab, hidden]: head h's LM head

for NUM_HEADS heads of one layer).  The weights are nn.Linear's (no
transformers class for Medusa); each head's LM head is the llama target's
own (made again here) and its linear small, so that a head proposes the
token the target has just sampled: the llama target repeats tokens in its
greedy answers, and the target accepts some of the proposals; the oracle
compares the counts, which a head cut otherwise than vLLM's changes.  The
target's vocabulary, 1000 tokens, is no multiple of 64: vLLM pads each
head.  make(out) writes the draft into OUT."""
import json
import os

NUM_HEADS = 2


def make(out):
    import shutil
    import tempfile
    import torch
    import torch.nn as nn
    from safetensors.torch import load_file, save_file
    import make_ckpt
    h, vocab = make_ckpt.COMMON["hidden_size"], make_ckpt.COMMON["vocab_size"]
    tmp = tempfile.mkdtemp()
    try:
        make_ckpt.make("llama", os.path.join(tmp, "llama"))
        head = None
        for f in os.listdir(os.path.join(tmp, "llama")):
            if f.endswith(".safetensors"):
                got = load_file(os.path.join(tmp, "llama", f))
                head = got.get("lm_head.weight", head)
    finally:
        shutil.rmtree(tmp)
    torch.manual_seed(2468)
    tensors = {}
    with torch.no_grad():
        for i in range(NUM_HEADS):
            lin = nn.Linear(h, h, bias=False).to(torch.bfloat16)
            lin.weight.mul_(0.05)
            tensors[f"blocks.{i}.layers.0.weight"] = lin.weight.detach().clone().contiguous()
            # the target's head, each row perturbed
            tensors[f"lm_heads.{i}.weight"] = (
                head + torch.randn_like(head) * 0.002).to(torch.bfloat16).contiguous()
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    c = {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": h,
         "vocab_size": vocab, "num_heads": NUM_HEADS, "num_hidden_layers": 1,
         "torch_dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
