"""Moondream 3 (moondream/moondream3-preview: HfMoondream, remote code),
tiny, as vLLM 0.32 reads it (model_executor/models/moondream3.py,
transformers_utils/configs/moondream3.py, which vLLM registers for
model_type moondream3, and transformers_utils/processors/moondream3.py).

No transformers class holds the model: its tensors are drawn here under the
names vLLM's load_weights maps (model. dropped, moondream3.py:1380-1405):
the text model under model.text. (wte a bare parameter, blocks.N with one
LayerNorm ln, attn.qkv fused q|k|v with its bias, attn.proj, the tau
scalers attn.tau.wq, .wv [heads, 3*dim] and .alpha [heads]; a GELU MLP
fc1/fc2 with biases below moe.start_layer, from it on a router with its
bias and the experts stacked, fc1.weight [E, 2*inner, dim] (gate rows,
then up) and fc2.weight [E, dim, inner]; post_ln, lm_head with its bias),
the SigLIP-like tower under model.vision. (patch_emb, pos_emb [1, 729,
enc_dim], blocks.N.ln1/ln2, attn.qkv/proj, mlp.fc1/fc2, post_ln) with its
projection proj_mlp.fc1/fc2, and the region heads under model.region.,
which vLLM builds no module for.

config.json as the release writes it: the model's settings under
"config" (text, vision, region, tokenizer), model_type moondream3, auto_map
to the release's hf_moondream.py (not shipped: vLLM reads the config with
its own Moondream3Config).  The text model: 2 blocks of 256 (4 heads of
64, 32 of them rotated as the release's are), block 0 dense (ff 256),
block 1 of 4 experts of 64 (2 a token); 1000 tokens.  The tower: 27
blocks (vLLM pools the reconstructed crops to enc_n_layers x enc_n_layers
and joins them to the 27x27 global grid, so a tower that takes an image
has 27) of 32 wide, 2 heads, ff 64, 14-pixel patches of 378-pixel crops
(vLLM's processor's fixed size).  The tokenizer (vLLM's processor loads it
from the model's folder first): word-level, <|endoftext|> 0 (bos and eos),
<|md_reserved_0..2|> 1..3 and <image> 994."""

TEXT = {"dim": 256, "ff_dim": 256, "n_layers": 2, "vocab_size": 1000, "max_context": 4096,
        "n_heads": 4, "n_kv_heads": 4, "prefix_attn": 730, "rope_theta": 1500000.0,
        "moe": {"start_layer": 1, "n_experts": 4, "n_experts_per_tok": 2,
                "expert_inner_dim": 64}}
VISION = {"enc_dim": 32, "enc_patch_size": 14, "enc_n_layers": 27, "enc_ff_dim": 64,
          "enc_n_heads": 2, "proj_inner_dim": 128, "crop_size": 378, "max_crops": 12,
          "overlap_margin": 4}
REGION = {"dim": 64, "coord_feat_dim": 32, "coord_out_dim": 64, "size_feat_dim": 32,
          "size_out_dim": 64, "inner_dim": 128}
TOKENIZER = {"bos_id": 0, "eos_id": 0, "answer_id": 3, "thinking_id": 4,
             "coord_id": 5, "size_id": 6, "start_ground_points_id": 7,
             "end_ground_id": 9, "templates": {}}
IMAGE_TOKEN = 994


def tensors(g, dtype):
    from ckpt_io import noise
    t, v, r = TEXT, VISION, REGION
    D, H, E, I = t["dim"], t["n_heads"], t["moe"]["n_experts"], t["moe"]["expert_inner_dim"]
    C, P = v["enc_dim"], v["enc_patch_size"]
    grid = v["crop_size"] // P
    rnd = noise(g, s=0.02, dtype=dtype)

    def linear(sd, name, rows, cols):
        sd[name + ".weight"] = rnd(rows, cols)
        sd[name + ".bias"] = rnd(rows)

    def norm(sd, name, width):
        sd[name + ".weight"] = rnd(width, base=1.0)
        sd[name + ".bias"] = rnd(width)

    sd = {"model.text.wte": rnd(t["vocab_size"], D)}
    for n in range(t["n_layers"]):
        b = "model.text.blocks.%d." % n
        norm(sd, b + "ln", D)
        linear(sd, b + "attn.qkv", 3 * D, D)
        linear(sd, b + "attn.proj", D, D)
        sd[b + "attn.tau.wq"] = rnd(H, 3 * D)
        sd[b + "attn.tau.wv"] = rnd(H, 3 * D)
        sd[b + "attn.tau.alpha"] = rnd(H, base=0.5)
        if n < t["moe"]["start_layer"]:
            linear(sd, b + "mlp.fc1", t["ff_dim"], D)
            linear(sd, b + "mlp.fc2", D, t["ff_dim"])
        else:
            linear(sd, b + "mlp.router", E, D)
            sd[b + "mlp.fc1.weight"] = rnd(E, 2 * I, D)
            sd[b + "mlp.fc2.weight"] = rnd(E, D, I)
    norm(sd, "model.text.post_ln", D)
    linear(sd, "model.text.lm_head", t["vocab_size"], D)

    linear(sd, "model.vision.patch_emb", C, P * P * 3)
    sd["model.vision.pos_emb"] = rnd(1, grid * grid, C)
    for n in range(v["enc_n_layers"]):
        b = "model.vision.blocks.%d." % n
        norm(sd, b + "ln1", C)
        norm(sd, b + "ln2", C)
        linear(sd, b + "attn.qkv", 3 * C, C)
        linear(sd, b + "attn.proj", C, C)
        linear(sd, b + "mlp.fc1", v["enc_ff_dim"], C)
        linear(sd, b + "mlp.fc2", C, v["enc_ff_dim"])
    norm(sd, "model.vision.post_ln", C)
    linear(sd, "model.vision.proj_mlp.fc1", v["proj_inner_dim"], 2 * C)
    linear(sd, "model.vision.proj_mlp.fc2", D, v["proj_inner_dim"])

    # the region heads (point and detect skills), which vLLM does not build
    sd["model.region.coord_features"] = rnd(r["coord_feat_dim"] // 2, 1)
    linear(sd, "model.region.coord_encoder", D, r["coord_feat_dim"])
    linear(sd, "model.region.coord_decoder", r["coord_out_dim"], D)
    sd["model.region.size_features"] = rnd(r["size_feat_dim"] // 2, 2)
    linear(sd, "model.region.size_encoder", D, r["size_feat_dim"])
    linear(sd, "model.region.size_decoder", r["size_out_dim"], D)
    return sd


def make(out):
    import json
    import os
    import torch
    import transformers
    from ckpt_io import save_shards, write_release_config
    from make_ckpt import word_tokenizer
    g = torch.Generator().manual_seed(53)
    sd = tensors(g, torch.bfloat16)
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if not k.startswith("model.text.")),
              sorted(k for k in sd if k.startswith("model.text."))]
    save_shards(out, sd, groups)
    c = {"architectures": ["HfMoondream"],
         "auto_map": {"AutoConfig": "hf_moondream.HfConfig",
                      "AutoModelForCausalLM": "hf_moondream.HfMoondream"},
         "config": {"skills": ["query", "caption", "detect", "point"],
                    "text": dict(TEXT), "vision": dict(VISION), "region": dict(REGION),
                    "tokenizer": dict(TOKENIZER)},
         "model_type": "moondream3", "torch_dtype": "bfloat16",
         "transformers_version": transformers.__version__}
    write_release_config(out, c, {})
    special = {"<|endoftext|>": 0, "<|md_reserved_0|>": 1, "<|md_reserved_1|>": 2,
               "<|md_reserved_2|>": 3, "<unk>": 4, "<image>": IMAGE_TOKEN}
    tcfg = transformers.PretrainedConfig(vocab_size=TEXT["vocab_size"])
    word_tokenizer(tcfg, special, "<|endoftext|>", "<|endoftext|>", "<|endoftext|>",
                   "<unk>").save_pretrained(out)
    with open(os.path.join(out, "config.json")) as f:
        assert json.load(f)["model_type"] == "moondream3"


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
