#!/usr/bin/env python3
"""Writes a tiny checkpoint of one architecture with transformers' own model
class (random weights, fixed seed, BF16), saved by save_pretrained with a
small max_shard_size so that an index and several shards are written: the
names, config fields and shard layout users download.

    make_ckpt.py ARCH DIR      ARCH: one of CASES below
    make_ckpt.py --list
"""
import sys

COMMON = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=64,
              vocab_size=1000, max_position_embeddings=512)

# arch -> (config class, model class, config overrides)
CASES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-tied": ("LlamaConfig", "LlamaForCausalLM",
                   {"tie_word_embeddings": True}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              {"tie_word_embeddings": False}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              {"tie_word_embeddings": True}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM",
              {"num_key_value_heads": 1}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM",
             {"pad_token_id": 0}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  {"num_experts": 4, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 128,
                   "shared_expert_intermediate_size": 256,
                   "mlp_only_layers": [1], "tie_word_embeddings": False}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  {"num_experts": 8, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 128}),
}


def make(arch, out):
    import torch
    import transformers
    cfg_name, model_name, over = CASES[arch]
    kw = dict(COMMON)
    kw.update(over)
    cfg = getattr(transformers, cfg_name)(**kw)
    cfg.torch_dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = getattr(transformers, model_name)(cfg).to(torch.bfloat16)
    # Random init leaves norms at 1 and biases at 0: perturb every parameter
    # so that a misplaced or missing tensor changes the answers.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    model.save_pretrained(out, max_shard_size="1MB")


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        print("\n".join(CASES))
    elif len(sys.argv) == 3 and sys.argv[1] in CASES:
        make(sys.argv[1], sys.argv[2])
    else:
        sys.exit(__doc__)
