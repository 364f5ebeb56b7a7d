"""MOSS-Audio (MossAudioModel) as vLLM 0.32 reads it, tiny, under the
names its hf_to_vllm_mapper reads (moss_audio.py:1486-1498): transformers'
Qwen3Model (make_ckpt's COMMON) under language_model. and an untied
lm_head (the config's default), and, which transformers does not have,
tensors under vLLM's own names and shapes: the audio encoder
audio_encoder. (three stride-2 3x3 Conv2d of 16 channels over 128 mel
bins, stem_proj, 2 layers of 4 heads of 16 with separate q/k/v (k without
bias), out_proj, fc1, fc2 and LayerNorms, layer_norm, and out_proj to an
output_dim of 96, present because it differs from d_model, :475-540),
the adapter audio_adapter. and one DeepStack merger
deepstack_audio_merger_list.0. (gate_proj, up_proj, down_proj over 128
hidden, :755-786), the DeepStack capture at encoder layer 0.
config.json as the release's remote config class reads it, with a
stand-in for that class (moss_audio_config.py); a word-level tokenizer
with the audio tokens, whose ids processor_config.json gives vLLM's own
processor (the release's are 151654, 151669, 151670, past the tiny
vocabulary)."""
import json
import os
import shutil

AUDIO = dict(d_model=64, output_dim=96, num_mel_bins=128, encoder_layers=2,
             encoder_attention_heads=4, encoder_ffn_dim=128, downsample_rate=8,
             downsample_hidden_size=16, max_source_positions=1500, n_window=200,
             conv_chunksize=64, deepstack_encoder_layer_indexes=[0])
ADAPTER = 128
AUDIO_TOKEN, AUDIO_BOS, AUDIO_EOS = 999, 997, 996


def gated_mlp(w, prefix, d_in, hidden, d_out):
    return {prefix + "gate_proj.weight": w(hidden, d_in), prefix + "up_proj.weight": w(hidden, d_in),
            prefix + "down_proj.weight": w(d_out, hidden)}


def audio_tensors(g, text_hidden):
    import torch
    from ckpt_io import noise, norm_tensors
    a = AUDIO
    d, c, ff = a["d_model"], a["downsample_hidden_size"], a["encoder_ffn_dim"]
    freq = a["num_mel_bins"]
    for _ in range(3):
        freq = (freq - 1) // 2 + 1
    w = noise(g)
    t = {"audio_encoder.conv1.weight": w(c, 1, 3, 3), "audio_encoder.conv1.bias": w(c),
         "audio_encoder.conv2.weight": w(c, c, 3, 3), "audio_encoder.conv2.bias": w(c),
         "audio_encoder.conv3.weight": w(c, c, 3, 3), "audio_encoder.conv3.bias": w(c),
         "audio_encoder.stem_proj.weight": w(d, c * freq), "audio_encoder.stem_proj.bias": w(d),
         **norm_tensors(w, "audio_encoder.layer_norm", d),
         "audio_encoder.out_proj.weight": w(a["output_dim"], d)}
    for i in range(a["encoder_layers"]):
        p = "audio_encoder.layers.%d." % i
        t.update({p + "self_attn.q_proj.weight": w(d, d), p + "self_attn.q_proj.bias": w(d),
                  p + "self_attn.k_proj.weight": w(d, d),
                  p + "self_attn.v_proj.weight": w(d, d), p + "self_attn.v_proj.bias": w(d),
                  p + "self_attn.out_proj.weight": w(d, d), p + "self_attn.out_proj.bias": w(d),
                  **norm_tensors(w, p + "self_attn_layer_norm", d),
                  p + "fc1.weight": w(ff, d), p + "fc1.bias": w(ff),
                  p + "fc2.weight": w(d, ff), p + "fc2.bias": w(d),
                  **norm_tensors(w, p + "final_layer_norm", d)})
    t.update(gated_mlp(w, "audio_adapter.", a["output_dim"], ADAPTER, text_hidden))
    for i in range(len(a["deepstack_encoder_layer_indexes"])):
        t.update(gated_mlp(w, "deepstack_audio_merger_list.%d." % i, a["output_dim"], ADAPTER,
                           text_hidden))
    return {k: v.to(torch.bfloat16) for k, v in t.items()}


def make(out):
    import torch
    import transformers
    from ckpt_io import module_tensors, noise, save_prefix_shards
    from make_ckpt import COMMON, word_tokenizer
    text_cfg = transformers.Qwen3Config(**dict(COMMON, tie_word_embeddings=False,
                                               bos_token_id=2, eos_token_id=1, pad_token_id=0))
    torch.manual_seed(1234)
    sd = module_tensors({"language_model": transformers.Qwen3Model(text_cfg)})
    g = torch.Generator().manual_seed(5)
    sd["lm_head.weight"] = noise(g)(text_cfg.vocab_size, text_cfg.hidden_size).to(torch.bfloat16)
    sd.update(audio_tensors(g, text_cfg.hidden_size))
    save_prefix_shards(out, sd, ("audio_encoder.", "audio_adapter.", "deepstack_audio_merger_list.",
                                 "language_model.layers.0.", "language_model.layers.1."))
    lang = {k: v for k, v in text_cfg.to_dict().items()
            if k in COMMON or k in ("bos_token_id", "eos_token_id", "pad_token_id",
                                    "rms_norm_eps", "hidden_act", "attention_bias",
                                    "tie_word_embeddings")}
    # as the release's config class saves itself: the text model's sizes
    # copied to the top (moss_audio.py:291-306), intermediate_size not
    cfg = {"architectures": ["MossAudioModel"], "model_type": "moss_audio",
           "auto_map": {"AutoConfig": "moss_audio_config.MossAudioConfig"},
           "dtype": "bfloat16", "audio_config": dict(AUDIO),
           "language_config": dict(lang, model_type="qwen3"),
           "adapter_hidden_size": ADAPTER, "deepstack_num_inject_layers": None,
           "tie_word_embeddings": False, "bos_token_id": 2, "eos_token_id": 1}
    cfg.update({k: lang[k] for k in ("num_hidden_layers", "vocab_size", "hidden_size",
                                     "num_attention_heads", "num_key_value_heads", "head_dim",
                                     "max_position_embeddings", "rms_norm_eps")})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    here = os.path.dirname(os.path.abspath(__file__))
    shutil.copy(os.path.join(here, "moss_audio_config.py"), out)
    word_tokenizer(text_cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                              "<|audio_bos|>": AUDIO_BOS, "<|audio_eos|>": AUDIO_EOS,
                              "<|AUDIO|>": AUDIO_TOKEN},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    # vLLM's own processor reads its token ids from here (moss_audio.py:1226-1244)
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump({"audio_token_id": AUDIO_TOKEN, "audio_start_id": AUDIO_BOS,
                   "audio_end_id": AUDIO_EOS}, f)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
