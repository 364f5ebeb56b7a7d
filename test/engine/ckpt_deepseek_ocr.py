"""DeepSeek-OCR (DeepseekOCRForCausalLM, deepseek-ai/DeepSeek-OCR's form) as
vLLM 0.32 reads it, tiny where vLLM lets it be:

  model.layers.*, model.embed_tokens, model.norm, lm_head
               the DeepSeek-V2 text model with plain multi-head attention
               (qk_nope_head_dim = qk_rope_head_dim = 0, as the release
               has): transformers' own Glm4MoeForCausalLM set up as
               DeepSeek-MoE (ckpt_deepseek_moe.py), 2 layers, layer 0 dense,
               4 routed experts and 2 shared in layer 1;
  model.sam_model.*
               SAM ViT-B at full size (vLLM's build_sam_vit_b whatever
               vision_config says: 12 blocks of 768, windows of 14, global
               attention in blocks 2, 5, 8, 11): transformers' own
               SamVisionEncoder, renamed as the release names it, and the
               two strided convolutions net_2, net_3 (torch's Conv2d);
  model.vision_model.*
               CLIP-L/14 at 224 (vLLM's fixed sizes: 24 layers of 1024):
               transformers' own CLIPVisionModel, renamed (encoder. ->
               transformer., q/k/v fused into qkv_proj as the release stores
               them, no post_layernorm);
  model.projector.layers   the linear projector (2048 -> text hidden size);
  model.image_newline, model.view_seperator (sic).

Every tensor randomly initialised and perturbed, bf16. config.json as the
release has it (language_config, and its keys again at the top; vision_config
with the two towers' widths; projector_config linear), a word tokenizer
holding the release's special tokens inside the vocabulary (<image> = 994).
vLLM's own DeepseekOCRProcessor needs no processor file.

    make(out)       DeepSeek-OCR
    make_ocr2(out)  DeepSeek-OCR-2 (DeepseekOCR2ForCausalLM, the release's
                    names, which vLLM reads, not transformers' deepseek_ocr2
                    ones): the same text model and SAM ViT-B (net_3 to 896
                    channels), no CLIP tower and no image_newline, instead
                    model.qwen2_model.model.model.{layers,norm}.* (transformers'
                    own Qwen2Model at vLLM's fixed sizes, 24 layers of 896,
                    without its embedding) and model.qwen2_model.query_768 and
                    query_1024; the projector 896 -> text hidden size. Its
                    vision_config holds only what vLLM reads (image_size)
                    beside the first one's keys.
    make_unlimited(out)
                    Unlimited-OCR (UnlimitedOCRForCausalLM, baidu/Unlimited-OCR:
                    vLLM 0.32's unlimited_ocr.py, a DeepseekOCRForCausalLM
                    subclass): DeepSeek-OCR's checkpoint (its text model is
                    already the DeepSeek-V2 MoE with plain multi-head
                    attention Unlimited-OCR has) under model_type
                    "unlimited-ocr" (vLLM's UnlimitedOCRConfig, a
                    DeepseekVLV2Config) with rswa_window."""
import os

from ckpt_deepseek_vl2 import H, language_config, text_model, write_config


def make(out):
    _make(out, ocr2=False)


def make_ocr2(out):
    _make(out, ocr2=True)


def make_unlimited(out):
    _make(out, ocr2=False, unlimited=True)


def _make(out, ocr2, unlimited=False):
    import torch
    import transformers
    from ckpt_io import noise, save_shards
    sd = text_model(out, "", 1270)

    def perturbed(v):
        return (v.float() + torch.randn(v.shape) * 0.02).to(torch.bfloat16).contiguous()

    # SAM ViT-B (transformers' SamVisionEncoder under the release's names)
    sam_cfg = transformers.SamVisionConfig(
        hidden_size=768, output_channels=256, num_hidden_layers=12, num_attention_heads=12,
        num_channels=3, image_size=1024, patch_size=16, layer_norm_eps=1e-6, qkv_bias=True,
        mlp_ratio=4.0, use_abs_pos=True, use_rel_pos=True, window_size=14,
        global_attn_indexes=[2, 5, 8, 11], mlp_dim=3072)
    sam = transformers.SamVisionEncoder(sam_cfg) if hasattr(transformers, "SamVisionEncoder") \
        else transformers.SamVisionModel(sam_cfg).vision_encoder
    neck = {"neck.conv1.": "neck.0.", "neck.layer_norm1.": "neck.1.",
            "neck.conv2.": "neck.2.", "neck.layer_norm2.": "neck.3."}
    with torch.no_grad():
        for k, v in sam.state_dict().items():
            n = k
            if n.startswith("patch_embed.projection."):
                n = "patch_embed.proj." + n[len("patch_embed.projection."):]
            elif n.startswith("layers."):
                n = "blocks." + n[len("layers."):]
                n = n.replace(".layer_norm1.", ".norm1.").replace(".layer_norm2.", ".norm2.")
            for a, b in neck.items():
                if n.startswith(a):
                    n = b + n[len(a):]
            sd["model.sam_model." + n] = perturbed(v)
    del sam
    net_2 = torch.nn.Conv2d(256, 512, kernel_size=3, stride=2, padding=1, bias=False)
    net_3 = torch.nn.Conv2d(512, 896 if ocr2 else 1024, kernel_size=3, stride=2, padding=1, bias=False)
    sd["model.sam_model.net_2.weight"] = net_2.weight.detach().to(torch.bfloat16).contiguous()
    sd["model.sam_model.net_3.weight"] = net_3.weight.detach().to(torch.bfloat16).contiguous()

    if ocr2:
        # the Qwen2 decoder as encoder (vLLM's build_qwen2_decoder_as_encoder:
        # 24 layers of 896, 14 heads, 2 kv heads, MLP 4864, its embedding
        # deleted): transformers' own Qwen2Model, and the learned queries
        qcfg = transformers.Qwen2Config(
            hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
            num_key_value_heads=2, intermediate_size=4864, vocab_size=16,
            rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=131072)
        q2 = transformers.Qwen2Model(qcfg)
        with torch.no_grad():
            for k, v in q2.state_dict().items():
                if k.startswith("embed_tokens.") or "rotary_emb" in k:
                    continue
                sd["model.qwen2_model.model.model." + k] = perturbed(v)
        del q2
        sd["model.qwen2_model.query_768.weight"] = perturbed(torch.randn(144, 896))
        sd["model.qwen2_model.query_1024.weight"] = perturbed(torch.randn(256, 896))
    # CLIP-L/14 (transformers' CLIPVisionModel under the release's names)
    clip_cfg = transformers.CLIPVisionConfig(
        hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
        num_hidden_layers=24, image_size=224, patch_size=14, projection_dim=512,
        layer_norm_eps=1e-5)
    clip = transformers.CLIPVisionModel(clip_cfg)
    csd = {k.removeprefix("vision_model."): v for k, v in clip.state_dict().items()}
    if ocr2:
        csd = {}  # DeepSeek-OCR-2 has no CLIP tower
    csd = {k: v for k, v in csd.items()
           if not k.startswith("post_layernorm.") and not k.endswith("position_ids")}
    del clip
    with torch.no_grad():
        for k in list(csd):
            if ".self_attn.q_proj." in k:
                for what in ("weight", "bias"):
                    if not k.endswith(what):
                        continue
                    p = k[:-len("q_proj." + what)]
                    q, kk, v = (csd.pop(p + x + "_proj." + what) for x in "qkv")
                    csd[p + "qkv_proj." + what] = torch.cat([q, kk, v], 0)
        for k, v in csd.items():
            n = k.replace("encoder.layers.", "transformer.layers.")
            sd["model.vision_model." + n] = perturbed(v)

    g = torch.Generator().manual_seed(1271)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    sd["model.projector.layers.weight"] = rnd(H, 896 if ocr2 else 2048)
    sd["model.projector.layers.bias"] = rnd(H)
    if not ocr2:
        sd["model.image_newline"] = rnd(H, s=1 / H ** 0.5)
    sd["model.view_seperator"] = rnd(H, s=1 / H ** 0.5)
    names = sorted(sd)
    os.makedirs(out, exist_ok=True)
    clip_early = [k for k in names if k.startswith("model.vision_model.transformer.layers.")
                  and int(k.split(".")[4]) < 12 or k.startswith("model.qwen2_model.model.model.layers.")
                  and int(k.split(".")[5]) < 12]
    rest = sorted(set(names) - set(clip_early))
    save_shards(out, sd, [clip_early, rest])
    language = language_config()
    c = {"architectures": ["DeepseekOCR2ForCausalLM" if ocr2 else "DeepseekOCRForCausalLM"], "model_type": "deepseek_vl_v2",
         "candidate_resolutions": [[1024, 1024]], "global_view_pos": "head",
         "language_config": language,
         "projector_config": {"input_dim": 896 if ocr2 else 2048, "model_type": "mlp_projector",
                              "n_embed": H, "projector_type": "linear"},
         "tile_tag": "2D", "torch_dtype": "bfloat16", "transformers_version": "4.46.3",
         "vision_config": {"image_size": 1024, "mlp_ratio": 3.7362, "model_name": "deeplip_b_l",
                           "model_type": "vision",
                           "width": {"clip-l-14-224": {"heads": 16, "image_size": 224,
                                                       "layers": 24, "patch_size": 14,
                                                       "width": 1024},
                                     "sam_vit_b": {"downsample_channels": [512, 896 if ocr2 else 1024],
                                                   "global_attn_indexes": [2, 5, 8, 11],
                                                   "heads": 12, "layers": 12, "width": 768}}}}
    if unlimited:
        c.update(architectures=["UnlimitedOCRForCausalLM"], model_type="unlimited-ocr",
                 rswa_window=128)
    # the release repeats the text model's keys at the top
    for k, v in language.items():
        if k not in ("architectures", "model_type", "torch_dtype"):
            c[k] = v
    write_config(out, c)
