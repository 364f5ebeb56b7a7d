"""Gemma 4's MTP draft for make_ckpt.py's gemma4 target, a checkpoint of its
own as Google releases one (google/gemma-4-e2b-it-assistant): config.json a
Gemma4AssistantConfig (model_type gemma4_assistant, architectures
["Gemma4AssistantForCausalLM"]), which vLLM's speculative_config turns into
Gemma4MTPModel for method "mtp".  Its tensors, transformers' own
Gemma4AssistantForCausalLM:

    model.embed_tokens.weight    [vocab, hidden] (lm_head tied to it)
    model.layers.N.*             Q-only decoder layers (K and V come from
                                 the target's cache: every layer kv-shared)
    model.norm.weight
    pre_projection.weight        [hidden, 2*backbone_hidden]
    post_projection.weight       [backbone_hidden, hidden]
    masked_embedding.centroids.weight   [num_centroids, hidden]
    masked_embedding.token_ordering     I64 [vocab]

Its hidden size (128) is half the target's (256, backbone_hidden_size),
as the releases' are smaller than their targets'; its two layers are a
sliding and a full one, with the target's head sizes (64, and the full
layers' global_head_dim 512 with one kv head, k as v) since they read
the target's caches.  use_ordered_embeddings with 10 centroids of 100
tokens, 2 of them taken (E2B's and E4B's: 2048, 32) in make_ordered's
(gemma4-assistant_ordered); make's has none.  Every parameter is
perturbed (random init leaves norms at 1, layer_scalar at 1)."""
import json
import os

# The tokens the gemma4 target repeats in its greedy answers to oracle.py's
# prompts: their rows of the draft's head (its embedding, tied) are made
# 20 times the others', so that the draft proposes them and the target
# accepts some; the oracle compares the counts of accepted tokens, which a
# head cut otherwise than vLLM's changes (56 on rank 0 at tp 2, 925 and
# 999 on rank 1).
LIKELY = [56, 925, 999]


def make(out, ordered=False):
    import torch
    from transformers import (Gemma4AssistantConfig, Gemma4AssistantForCausalLM,
                              Gemma4TextConfig)
    from make_ckpt import COMMON
    torch.manual_seed(4242)
    text = Gemma4TextConfig(**dict(
        COMMON, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        attention_k_eq_v=True, num_global_key_value_heads=1,
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=0,
        enable_moe_block=False, num_kv_shared_layers=2))
    cfg = Gemma4AssistantConfig(text_config=text.to_dict(), backbone_hidden_size=COMMON["hidden_size"],
                                use_ordered_embeddings=ordered, num_centroids=10,
                                centroid_intermediate_top_k=2)
    model = Gemma4AssistantForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(torch.randn_like(p) * 0.02)
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.add_(torch.randn_like(b) * 0.02)
        # the head (tied to the embedding) favours LIKELY
        model.model.embed_tokens.weight[LIKELY] *= 20
        if ordered:
            model.masked_embedding.token_ordering.copy_(torch.randperm(COMMON["vocab_size"]))
    model.save_pretrained(out)
    with open(os.path.join(out, "config.json")) as f:
        c = json.load(f)
    c["torch_dtype"] = "bfloat16"
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)


def make_ordered(out):
    make(out, ordered=True)
