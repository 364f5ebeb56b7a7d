"""ByteDance-Seed's BAGEL (BagelForConditionalGeneration: BAGEL-7B-MoT),
tiny, as vLLM 0.32 reads it (model_executor/models/bagel.py): its image
understanding path only.

The release ships ema.safetensors (the model) and ae.safetensors (the
FLUX VAE, encoder.* and decoder.*), no index.  ema.safetensors holds the
Qwen2 mixture-of-transformers under language_model. (q/k/v with biases,
q_norm and k_norm: llm_config.qk_norm; beside each understanding module
its generation twin: self_attn.{q,k,v,o}_proj_moe_gen,
{q,k}_norm_moe_gen, mlp_moe_gen, {input,post_attention}_layernorm_moe_gen,
model.norm_moe_gen), the SigLIP tower under vit_model.vision_model. whose
patch embedding is a Linear over (p, p, c) patches, 2-D (BAGEL's
convert_conv2d_to_linear), the connector (fc1, fc2), vit_pos_embed and the
generation modules latent_pos_embed, llm2vae, vae2llm and time_embedder.
vLLM skips the *moe_gen*, latent_pos_embed, llm2vae, vae2llm,
time_embedder and encoder./decoder. tensors (bagel.py:535-552), drops
vit_pos_embed.pos_embed (its PositionEmbedding is a fixed sin-cos buffer,
bagel.py:328-330) and reshapes the patch embedding to its Conv2d's
[O, c, p, p] (bagel.py:554-563).

The text model and the tower are drawn by transformers' Qwen2ForCausalLM
and SiglipVisionModel (its pooling head dropped: the release has none);
the rest of the shapes the release has.  56x56 images of 14-pixel
patches: 4x4 patches, vit_max_num_patch_per_side 4 (vLLM gives an image
vit_max_num_patch_per_side**2 tokens, bagel.py:291, which only a tower of
that many patches fills); a SigLIP image processor of that size and a
word-level tokenizer with <|image_pad|> (999)."""

LLM = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
           num_hidden_layers=2, intermediate_size=512, vocab_size=1000,
           max_position_embeddings=1024, rope_theta=1000000.0, rms_norm_eps=1e-6,
           tie_word_embeddings=False, qk_norm=True, layer_module="Qwen2MoTDecoderLayer",
           architectures=["Qwen2ForCausalLM"], model_type="qwen2")
VIT = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
           num_hidden_layers=2, image_size=56, patch_size=14, num_channels=3,
           layer_norm_eps=1e-6, model_type="siglip_vision_model")
IMAGE_PAD = 999


def make(out):
    import json
    import os
    import torch
    import transformers
    from safetensors.torch import save_file
    from ckpt_io import perturb_and_save, read_tensors
    from make_ckpt import word_tokenizer
    import shutil
    torch.manual_seed(1234)
    os.makedirs(out, exist_ok=True)
    llm_keys = {k: v for k, v in LLM.items()
                if k not in ("qk_norm", "layer_module", "architectures", "model_type")}
    lcfg = transformers.Qwen2Config(**llm_keys)
    vcfg = transformers.SiglipVisionConfig(**{k: v for k, v in VIT.items() if k != "model_type"})
    sd = {}
    for prefix, model in (("language_model.", transformers.Qwen2ForCausalLM(lcfg)),
                          ("vit_model.vision_model.", transformers.SiglipVisionModel(vcfg))):
        tmp = out + ".part"
        perturb_and_save(model, tmp)
        sd.update({prefix + k: v.to(torch.bfloat16) for k, v in read_tensors(tmp).items()
                   if not k.startswith("head.")})
        shutil.rmtree(tmp)
    # BAGEL's patch embedding, a Linear over patches flattened (p, p, c)
    pe = "vit_model.vision_model.embeddings.patch_embedding.weight"
    sd[pe] = sd[pe].permute(0, 2, 3, 1).reshape(VIT["hidden_size"], -1).contiguous()
    H, hd = LLM["hidden_size"], LLM["hidden_size"] // LLM["num_attention_heads"]
    kv, inter = LLM["num_key_value_heads"] * hd, LLM["intermediate_size"]
    shapes = {"connector.fc1.weight": (H, VIT["hidden_size"]), "connector.fc1.bias": (H,),
              "connector.fc2.weight": (H, H), "connector.fc2.bias": (H,),
              "vit_pos_embed.pos_embed": (16, H), "latent_pos_embed.pos_embed": (16, H),
              "llm2vae.weight": (64, H), "llm2vae.bias": (64,),
              "vae2llm.weight": (H, 64), "vae2llm.bias": (H,),
              "time_embedder.mlp.0.weight": (H, 256), "time_embedder.mlp.0.bias": (H,),
              "time_embedder.mlp.2.weight": (H, H), "time_embedder.mlp.2.bias": (H,),
              "language_model.model.norm_moe_gen.weight": (H,)}
    for n in range(LLM["num_hidden_layers"]):
        b = "language_model.model.layers.%d." % n
        shapes.update({b + "self_attn.q_norm.weight": (hd,), b + "self_attn.k_norm.weight": (hd,),
                       b + "self_attn.q_norm_moe_gen.weight": (hd,),
                       b + "self_attn.k_norm_moe_gen.weight": (hd,),
                       b + "self_attn.q_proj_moe_gen.weight": (H, H),
                       b + "self_attn.q_proj_moe_gen.bias": (H,),
                       b + "self_attn.k_proj_moe_gen.weight": (kv, H),
                       b + "self_attn.k_proj_moe_gen.bias": (kv,),
                       b + "self_attn.v_proj_moe_gen.weight": (kv, H),
                       b + "self_attn.v_proj_moe_gen.bias": (kv,),
                       b + "self_attn.o_proj_moe_gen.weight": (H, H),
                       b + "mlp_moe_gen.gate_proj.weight": (inter, H),
                       b + "mlp_moe_gen.up_proj.weight": (inter, H),
                       b + "mlp_moe_gen.down_proj.weight": (H, inter),
                       b + "input_layernorm_moe_gen.weight": (H,),
                       b + "post_attention_layernorm_moe_gen.weight": (H,)})
    for k, shape in shapes.items():
        base = 1.0 if "norm" in k and k.endswith("weight") else 0.0
        std = 0.02 if base or k.endswith("bias") or "pos_embed" in k else shape[-1] ** -0.5
        sd[k] = (base + torch.randn(shape) * std).to(torch.bfloat16)
    save_file(sd, os.path.join(out, "ema.safetensors"), metadata={"format": "pt"})
    ae = {"encoder.conv_in.weight": (32, 3, 3, 3), "encoder.conv_in.bias": (32,),
          "decoder.conv_out.weight": (3, 32, 3, 3), "decoder.conv_out.bias": (3,)}
    save_file({k: torch.randn(s).to(torch.float32) for k, s in ae.items()},
              os.path.join(out, "ae.safetensors"), metadata={"format": "pt"})
    cfg = {"architectures": ["BagelForConditionalGeneration"], "model_type": "bagel",
           "visual_gen": True, "visual_und": True, "llm_config": LLM, "vit_config": VIT,
           "vae_config": {"z_channels": 16, "downsample": 8}, "latent_patch_size": 2,
           "max_latent_size": 4, "vit_max_num_patch_per_side": 4,
           "connector_act": "gelu_pytorch_tanh", "interpolate_pos": False,
           "timestep_shift": 1.0, "torch_dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<|image_pad|>": IMAGE_PAD}
    word_tokenizer(lcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    transformers.SiglipImageProcessor(
        size={"height": VIT["image_size"], "width": VIT["image_size"]}).save_pretrained(out)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
