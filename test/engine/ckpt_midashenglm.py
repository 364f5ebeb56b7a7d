"""MiDashengLM (MiDashengLMModel) as vLLM 0.32 reads it, tiny, under the
release's names (vLLM loads them as they are, midashenglm.py:810-812):
Qwen2ForCausalLM (make_ckpt's COMMON, untied) under decoder., a Dasheng
audio encoder of 2 blocks of 4 heads of 16 over 64 mel bins (patches of
64 bins by 4 frames) under
audio_encoder. (init_bn with its statistics, patch_embed.proj, the time
and frequency position embeddings, each block's fused attn.qkv with its
bias, attn.proj, mlp.fc1 and mlp.fc2, norm), and the projector
audio_projector.net.0 and net.2 over 5 stacked frames, none of which
transformers has.  config.json as vLLM's MiDashengLMConfig reads it
(transformers_utils/configs/midashenglm.py); a word-level tokenizer with
the audio tokens and a stand-in for mispeech's processor (remote code:
midashenglm_processing.py), which vLLM's processor needs."""
import json
import os

# (patches of all 64 mel bins by 4 frames, as the release's: vLLM's
# encoder masks and splits its input in 4-frame patches, midashenglm.py:428-446)
AUDIO = dict(embed_dim=64, depth=2, num_heads=4, n_mels=64, target_length=1012,
             patch_size=[64, 4], patch_stride=[64, 4], mlp_ratio=4.0, qkv_bias=True)
SUBSAMPLE = 5
AUDIO_TOKEN, AUDIO_BOS, AUDIO_EOS = 999, 997, 996


def audio_tensors(g, hidden):
    import torch
    from ckpt_io import noise, norm_tensors
    d, m = AUDIO["embed_dim"], AUDIO["n_mels"]
    (pf, pt), (sf, st) = AUDIO["patch_size"], AUDIO["patch_stride"]
    grid_f, grid_t = m // sf, AUDIO["target_length"] // st
    w = noise(g)
    t = {**norm_tensors(w, "audio_encoder.init_bn", m),
         "audio_encoder.init_bn.running_mean": w(m, s=1.0),
         "audio_encoder.init_bn.running_var": 1 + torch.rand(m, generator=g),
         "audio_encoder.patch_embed.proj.weight": w(d, 1, pf, pt),
         "audio_encoder.patch_embed.proj.bias": w(d),
         "audio_encoder.time_pos_embed": w(1, d, 1, grid_t, s=0.02),
         "audio_encoder.freq_pos_embed": w(1, d, grid_f, 1, s=0.02),
         **norm_tensors(w, "audio_encoder.norm", d)}
    ff = int(d * AUDIO["mlp_ratio"])
    for i in range(AUDIO["depth"]):
        p = "audio_encoder.blocks.%d." % i
        t.update({**norm_tensors(w, p + "norm1", d),
                  p + "attn.qkv.weight": w(3 * d, d), p + "attn.qkv.bias": w(3 * d),
                  p + "attn.proj.weight": w(d, d), p + "attn.proj.bias": w(d),
                  **norm_tensors(w, p + "norm2", d),
                  p + "mlp.fc1.weight": w(ff, d), p + "mlp.fc1.bias": w(ff),
                  p + "mlp.fc2.weight": w(d, ff), p + "mlp.fc2.bias": w(d)})
    t.update({"audio_projector.net.0.weight": w(hidden, SUBSAMPLE * d),
              "audio_projector.net.0.bias": w(hidden),
              "audio_projector.net.2.weight": w(hidden, hidden),
              "audio_projector.net.2.bias": w(hidden)})
    t = {k: v.to(torch.bfloat16) for k, v in t.items()}
    t["audio_encoder.init_bn.num_batches_tracked"] = torch.tensor(0, dtype=torch.int64)
    return t


def make(out):
    import torch
    import transformers
    from ckpt_io import copy_processor, module_tensors, save_prefix_shards
    from make_ckpt import COMMON, word_tokenizer
    text_cfg = transformers.Qwen2Config(**dict(COMMON, tie_word_embeddings=False,
                                               bos_token_id=2, eos_token_id=1, pad_token_id=0))
    torch.manual_seed(1234)
    sd = module_tensors({"decoder": transformers.Qwen2ForCausalLM(text_cfg)})
    sd.update(audio_tensors(torch.Generator().manual_seed(5), text_cfg.hidden_size))
    save_prefix_shards(out, sd, ("audio_encoder.", "audio_projector.",
                                 "decoder.model.layers.0.", "decoder.model.layers.1."))
    text = {k: v for k, v in text_cfg.to_dict().items()
            if k in COMMON or k in ("tie_word_embeddings", "bos_token_id", "eos_token_id",
                                    "pad_token_id", "rms_norm_eps", "hidden_act")}
    cfg = {"architectures": ["MiDashengLMModel"], "model_type": "midashenglm",
           "dtype": "bfloat16", "audio_encoder_config": dict(AUDIO),
           "text_config": dict(text, model_type="qwen2_5_omni_text"),
           "subsample_factor": SUBSAMPLE, "audio_token_id": AUDIO_TOKEN}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    word_tokenizer(text_cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                              "<|audio_bos|>": AUDIO_BOS, "<|audio_eos|>": AUDIO_EOS,
                              "<|AUDIO|>": AUDIO_TOKEN},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    # the processor (mispeech's is remote code: a stand-in) and the
    # feature extractor beside it, whose sampling rate vLLM reads
    transformers.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000,
                                          do_normalize=False).save_pretrained(out)
    copy_processor(out, "midashenglm_processing", "MiDashengLMProcessor")


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
