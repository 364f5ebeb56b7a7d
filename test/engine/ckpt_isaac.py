"""Perceptron's Isaac (IsaacForConditionalGeneration, model_type isaac:
PerceptronAI/Isaac-0.1), tiny, as vLLM 0.32 reads it (model_executor/
models/isaac.py; its config class is vLLM's own, transformers_utils/
configs/isaac.py, and so is its processor, transformers_utils/processors/
isaac.py).  Transformers 5.x as installed has no Isaac class, so its parts
are transformers' own, under the release's names:

    model.embed_tokens / model.layers.N.* / model.norm, lm_head.weight
        transformers' Qwen3ForCausalLM (make_ckpt's COMMON, untied)
    model.vision_embedding.0.*   transformers' Siglip2VisionModel's
        vision_model.* (no head): a linear patch embedding with its bias, 256
        positions (16x16), 2 layers, 64 wide, 4 heads, 16-pixel patches
    model.vision_embedding.1.weight [4*256, 256], model.vision_embedding.3.
        weight [256, 4*256]: the release's nn.Sequential projector (Linear,
        SiLU, Linear, no biases) over the pixel-shuffled tower (64 wide x
        scale 2 squared = 256)

make_hf writes the text model under model.text_model., which vLLM's
mapper reads as the release's names, with tied embeddings (no lm_head, as
Qwen3-1.7B, Isaac-0.1's base, ships none).

A word-level tokenizer with <image> (997), which vLLM's processor
replaces by <|image_pad|> (996) tokens, one a 2x2 block of patches.
config.json: vision_max_num_patches 256 (a 256-pixel square at most, 64
tokens), so that vLLM's profiling image fits the cases' max_model_len.
"""
import json
import os

VISION = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_channels=3, patch_size=16, num_patches=256,
              layer_norm_eps=1e-6, hidden_act="gelu_pytorch_tanh")
SCALE = 2
IMAGE, IMAGE_PAD = 997, 996


def make(out, text_prefix="model.", tied=False):
    import torch
    import transformers
    from ckpt_io import module_tensors, save_shards, text_config_keys
    from make_ckpt import COMMON, word_tokenizer
    text = dict(COMMON, tie_word_embeddings=tied, bos_token_id=2, eos_token_id=1,
                pad_token_id=0, rms_norm_eps=1e-6, rope_theta=1000000.0)
    tcfg = transformers.Qwen3Config(**text)
    vcfg = transformers.Siglip2VisionConfig(vision_use_head=False, **VISION)
    torch.manual_seed(1234)
    H, hd = COMMON["hidden_size"], VISION["hidden_size"] * SCALE * SCALE
    # (the release's nn.Sequential: the tower 0, Linear 1, SiLU 2, Linear 3)
    proj = torch.nn.ModuleDict({"1": torch.nn.Linear(hd, 4 * hd, bias=False),
                                "3": torch.nn.Linear(4 * hd, H, bias=False)})
    sd = module_tensors({"lm": transformers.Qwen3ForCausalLM(tcfg),
                         "vm": transformers.Siglip2VisionModel(vcfg),
                         "model.vision_embedding": proj})
    new = {}
    for k, t in sd.items():
        if "rotary_emb" in k or "position_ids" in k:
            continue
        if k.startswith("lm.model."):
            k = text_prefix + k[len("lm.model."):]
        elif k.startswith("lm."):
            k = k[len("lm."):]
        elif k.startswith("vm."):
            # (transformers 5 names SiglipVisionModel's tower with or
            # without vision_model.)
            k = k[len("vm."):]
            k = k[len("vision_model."):] if k.startswith("vision_model.") else k
            k = "model.vision_embedding.0." + k
        new[k] = t
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in new if k.startswith("model.vision_embedding."))]
    for n in range(COMMON["num_hidden_layers"]):
        groups.append(sorted(k for k in new if k.startswith("%slayers.%d." % (text_prefix, n))))
    groups.append(sorted(set(new) - {k for g in groups for k in g}))
    assert sum(map(len, groups)) == len(new)
    save_shards(out, new, groups)
    c = text_config_keys(tcfg)
    tc = dict(c, model_type="qwen3")
    vc = dict(VISION, model_type="pixel_shuffle_siglip2", pixel_shuffle_scale_factor=SCALE)
    c.update({"architectures": ["IsaacForConditionalGeneration"], "model_type": "isaac",
              "text_config": tc, "vision_config": vc, "vision_patch_size": VISION["patch_size"],
              "vision_max_num_patches": VISION["num_patches"], "vision_min_num_patches": None,
              "pixel_shuffle_scale": SCALE, "max_sequence_length": 16384,
              "vision_token": "<image>", "torch_dtype": "bfloat16"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(sorted(c.items())), f, indent=2)
    word_tokenizer(tcfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<image>": IMAGE,
                          "<|image_pad|>": IMAGE_PAD},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def make_hf(out):
    make(out, "model.text_model.", tied=True)
