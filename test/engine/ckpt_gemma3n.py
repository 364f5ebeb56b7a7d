"""Gemma 3n as Google releases it (Gemma3nForConditionalGeneration), tiny:
transformers' own class with timm's MobileNetV5 vision tower and the
Conformer audio tower, and the processor vLLM runs them through."""
import json
import os


def make(out):
    import torch
    import transformers
    from safetensors.torch import save_file
    # the text model as make_ckpt.py's "gemma3n" case (learn-rules' SMALL
    # and RELEASED), the multimodal token ids inside the tiny vocabulary as
    # the release has them at its end: text 0..743, vision 744..871, audio
    # 872..999
    text = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                vocab_size=1000, max_position_embeddings=512,
                pad_token_id=0, bos_token_id=2, eos_token_id=1,
                layer_types=["sliding_attention", "full_attention",
                             "sliding_attention", "full_attention"],
                num_kv_shared_layers=2, vocab_size_per_layer_input=744,
                hidden_size_per_layer_input=64,
                activation_sparsity_pattern=[0.95, 0.0, 0.0, 0.0],
                altup_num_inputs=4, laurel_rank=16)
    # timm's mobilenetv5_300m_enc (its block layout fixed: 4 stages of 3, 5,
    # 37 and 39 blocks) with its channels x 1/8; its output is 2048
    # channels whatever the multiplier, so hidden_size stays 2048
    vision = dict(architecture="mobilenetv5_300m_enc",
                  model_args={"channel_multiplier": 0.125},
                  hidden_size=2048, vocab_size=128, vocab_offset=744,
                  label_names=["x"], num_classes=0)
    # a 2-layer Conformer, 4 heads of 16, sub-sampling convolutions of 16
    # and 8 channels
    audio = dict(hidden_size=64, conf_num_attention_heads=4, conf_num_hidden_layers=2,
                 sscp_conv_channel_size=[16, 8], vocab_size=128, vocab_offset=872)
    cfg = transformers.Gemma3nConfig(
        text_config=text, vision_config=vision, audio_config=audio,
        boi_token_id=740, eoi_token_id=744, image_token_id=745,
        boa_token_id=741, eoa_token_id=872, audio_token_id=873)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Gemma3nForConditionalGeneration(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for t in model.state_dict().values():
            if t.is_floating_point():
                t.add_(torch.randn_like(t) * 0.02)
    model.save_pretrained(out, max_shard_size="20MB")

    # k_proj, v_proj and k_norm in the kv-shared layers too, as Google
    # ships them (transformers' class has none there; vLLM drops them)
    t = cfg.text_config
    h, hd, kv = t.hidden_size, t.head_dim, t.num_key_value_heads * t.head_dim
    g = torch.Generator().manual_seed(8)
    extra = {}
    for n in range(t.num_hidden_layers - t.num_kv_shared_layers, t.num_hidden_layers):
        p = f"model.language_model.layers.{n}.self_attn."
        extra[p + "k_proj.weight"] = (0.02 * torch.randn(kv, h, generator=g)).to(torch.bfloat16)
        extra[p + "v_proj.weight"] = (0.02 * torch.randn(kv, h, generator=g)).to(torch.bfloat16)
        extra[p + "k_norm.weight"] = (1 + 0.02 * torch.randn(hd, generator=g)).to(torch.bfloat16)
    save_file(extra, os.path.join(out, "model-kv-shared.safetensors"), metadata={"format": "pt"})
    ij = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(ij))
    idx["weight_map"].update({k: "model-kv-shared.safetensors" for k in extra})
    with open(ij, "w") as f:
        json.dump(idx, f, indent=2)
    processor(out, cfg)


def processor(out, cfg):
    """make_ckpt's word-level tokenizer, its special tokens config.json's
    token ids, and the Gemma3nProcessor: 768x768 images (SigLIP's
    processor, as released), audio by Gemma3nAudioFeatureExtractor's
    defaults."""
    import transformers
    from tokenizers import AddedToken
    from make_ckpt import word_level
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "\n": 4, "\n\n": 5, "\n\n\n": 6, "\n\n\n\n": 7,
               "<start_of_image>": cfg.boi_token_id, "<end_of_image>": cfg.eoi_token_id,
               "<image_soft_token>": cfg.image_token_id, "<start_of_audio>": cfg.boa_token_id,
               "<end_of_audio>": cfg.eoa_token_id, "<audio_soft_token>": cfg.audio_token_id}
    tk = word_level(cfg, special)
    tk.add_special_tokens([AddedToken(t, normalized=False) for t in special if t.startswith("<")])
    # vLLM's processor looks the newline runs up by text (gemma3n_mm.py)
    tk.add_tokens([AddedToken(t, normalized=False) for t in ("\n\n\n\n", "\n\n\n", "\n\n", "\n")])
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>",
        unk_token="<unk>",
        extra_special_tokens={"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                              "image_token": "<image_soft_token>",
                              "boa_token": "<start_of_audio>", "eoa_token": "<end_of_audio>",
                              "audio_token": "<audio_soft_token>"})
    ip = transformers.SiglipImageProcessor(size={"height": 768, "width": 768},
                                           image_mean=[0.0] * 3, image_std=[1.0] * 3)
    fe = transformers.Gemma3nAudioFeatureExtractor()
    transformers.Gemma3nProcessor(feature_extractor=fe, image_processor=ip, tokenizer=tok,
                                  image_seq_length=256,
                                  audio_seq_length=188).save_pretrained(out)
