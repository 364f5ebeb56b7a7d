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
    # 5 experts at tp 2 under expert parallelism: rank 0 holds 3, rank 1 2.
    "qwen3_moe-e5": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                     {"num_experts": 5, "num_experts_per_tok": 2,
                      "moe_intermediate_size": 128}),
    # FP8 with 128x128 block scales, as DeepSeek ships it: every split at
    # tp 2 falls on whole blocks (4 kv heads of 64: 128 rows a rank).
    "llama-fp8": ("LlamaConfig", "LlamaForCausalLM",
                  {"num_key_value_heads": 4}),
    # FP8 with one scale per tensor and static activation scales.
    "llama-fp8t": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen3_moe-fp8": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                      {"num_key_value_heads": 4, "num_experts": 4,
                       "num_experts_per_tok": 2, "moe_intermediate_size": 256}),
}

# Linear weights the FP8 variants quantize (the rest stays BF16).
FP8_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
              "down_proj")
BLOCK = 128


def quantize_fp8(out, per_tensor=False):
    """Rewrites the BF16 checkpoint in OUT with its linear weights in
    float8_e4m3fn and a float32 weight_scale_inv per 128x128 block (or,
    per_tensor, one weight_scale and one input_scale each, as static
    FP8 checkpoints carry them), shard by shard, and adds
    quantization_config to config.json."""
    import json
    import os
    import zlib
    import torch
    from safetensors.torch import load_file, save_file
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    fmax = torch.finfo(torch.float8_e4m3fn).max
    for fname in sorted(set(idx["weight_map"].values())):
        path = os.path.join(out, fname)
        tensors = load_file(path)
        for name in list(tensors):
            if not (name.endswith(".weight") and
                    name.split(".")[-2] in FP8_LINEAR):
                continue
            w = tensors[name].float()
            if per_tensor:
                s = w.abs().max().clamp(min=1e-12) / fmax
                tensors[name] = (w / s).to(torch.float8_e4m3fn)
                base = name[:-len("weight")]
                tensors[base + "weight_scale"] = s.reshape([]).float()
                # a fixed activation scale, distinct per layer and part
                tensors[base + "input_scale"] = torch.tensor(
                    0.01 + 0.001 * (zlib.crc32(base.encode()) % 7), dtype=torch.float32)
                idx["weight_map"][base + "weight_scale"] = fname
                idx["weight_map"][base + "input_scale"] = fname
                continue
            rows, cols = w.shape
            br, bc = -(-rows // BLOCK), -(-cols // BLOCK)
            scale = torch.empty(br, bc, dtype=torch.float32)
            q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
            for i in range(br):
                for j in range(bc):
                    blk = w[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK]
                    s = blk.abs().max().clamp(min=1e-12) / fmax
                    scale[i, j] = s
                    q[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK] = \
                        (blk / s).to(torch.float8_e4m3fn)
            tensors[name] = q
            sname = name[:-len("weight")] + "weight_scale_inv"
            tensors[sname] = scale
            idx["weight_map"][sname] = fname
        save_file(tensors, path, metadata={"format": "pt"})
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    if per_tensor:
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                      "activation_scheme": "static"}
    else:
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                      "activation_scheme": "dynamic",
                                      "weight_block_size": [BLOCK, BLOCK]}
    # Routers stay BF16; as in Qwen's FP8 checkpoints, the config says so.
    gates = sorted(n[:-len(".weight")] for n in idx["weight_map"]
                   if n.endswith(".mlp.gate.weight"))
    if gates:
        cfg["quantization_config"]["modules_to_not_convert"] = ["lm_head"] + gates
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


def make(arch, out):
    import torch
    import transformers
    cfg_name, model_name, over = CASES[arch]
    kw = dict(COMMON)
    kw.update(over)
    cfg = getattr(transformers, cfg_name)(**kw)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = getattr(transformers, model_name)(cfg).to(torch.bfloat16)
    # Random init leaves norms at 1 and biases at 0: perturb every parameter
    # so that a misplaced or missing tensor changes the answers.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    model.save_pretrained(out, max_shard_size="1MB")
    if arch.endswith("-fp8"):
        quantize_fp8(out)
    elif arch.endswith("-fp8t"):
        quantize_fp8(out, per_tensor=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        print("\n".join(CASES))
    elif len(sys.argv) == 3 and sys.argv[1] in CASES:
        make(sys.argv[1], sys.argv[2])
    else:
        sys.exit(__doc__)
