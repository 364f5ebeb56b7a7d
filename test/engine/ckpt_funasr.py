"""FunASR (FunASRForConditionalGeneration, Fun-ASR-Nano's layout) as vLLM
0.32 reads it, tiny, under the names its hf_to_vllm_mapper reads
(funasr.py:837-848): a Qwen3ForCausalLM (transformers' own, tied as
Qwen3-0.6B is) under llm., the SenseVoice encoder under audio_encoder.
(encoders0.0 over the 560 stacked features, encoders.0, tp_encoders.0,
after_norm and tp_norm; each layer's fused self_attn.linear_q_k_v,
linear_out, fsmn_block, feed_forward.w_1 and w_2, norm1 and norm2) and the
adaptor under audio_adaptor. (linear1, linear2 and two blocks of separate
linear_q, linear_k, linear_v and linear_out) at the sizes vLLM fixes
(funasr.py:625-635: 512 in, 2048, 1024 out, 8 heads).  transformers'
FunAsrNano is the -hf release's layout under other names and another
architecture, which vLLM does not register: the audio tensors here are a
stand-in built from vLLM's own module names and shapes.  config.json is
the Qwen3Config with audio_encoder_conf that vLLM reads
(funasr.py:623-624, 704-705); the processor is vLLM's FunASRProcessor
(processor_config.json) with its feature extractor's frontend settings,
and a word-level tokenizer with <|AUDIO|>."""
import json
import os

from ckpt_io import module_tensors, noise, norm_tensors, save_prefix_shards

# SenseVoiceEncoderSmall's settings (funasr.py:298-312); output_size is
# the adaptor's encoder_dim, which vLLM fixes at 512
AUDIO = dict(output_size=512, attention_heads=4, linear_units=128, num_blocks=2,
             tp_blocks=1, kernel_size=11, sanm_shift=0)
IN_SIZE = 560           # 80 mel bins x 7 stacked frames (funasr.py:623)
ADAPTOR = dict(ffn=2048, dim=1024, blocks=2)
AUDIO_TOKEN = 999


def sanm_layer(w, p, din, d, units, kernel):
    return {p + "self_attn.linear_q_k_v.weight": w(3 * d, din),
            p + "self_attn.linear_q_k_v.bias": w(3 * d),
            p + "self_attn.linear_out.weight": w(d, d), p + "self_attn.linear_out.bias": w(d),
            p + "self_attn.fsmn_block.weight": w(d, 1, kernel),
            p + "feed_forward.w_1.weight": w(units, d), p + "feed_forward.w_1.bias": w(units),
            p + "feed_forward.w_2.weight": w(d, units), p + "feed_forward.w_2.bias": w(d),
            **norm_tensors(w, p + "norm1", din), **norm_tensors(w, p + "norm2", d)}


def audio_tensors(g):
    import torch
    w = noise(g)
    d, units, k = AUDIO["output_size"], AUDIO["linear_units"], AUDIO["kernel_size"]
    t = sanm_layer(w, "audio_encoder.encoders0.0.", IN_SIZE, d, units, k)
    for i in range(AUDIO["num_blocks"] - 1):
        t.update(sanm_layer(w, "audio_encoder.encoders.%d." % i, d, d, units, k))
    for i in range(AUDIO["tp_blocks"]):
        t.update(sanm_layer(w, "audio_encoder.tp_encoders.%d." % i, d, d, units, k))
    for n in ("after_norm", "tp_norm"):
        t.update(norm_tensors(w, "audio_encoder." + n, d))
    f, h = ADAPTOR["ffn"], ADAPTOR["dim"]
    t.update({"audio_adaptor.linear1.weight": w(f, d), "audio_adaptor.linear1.bias": w(f),
              "audio_adaptor.linear2.weight": w(h, f, s=0.02), "audio_adaptor.linear2.bias": w(h)})
    for i in range(ADAPTOR["blocks"]):
        p = "audio_adaptor.blocks.%d." % i
        for x in ("q", "k", "v", "out"):
            t[p + "self_attn.linear_%s.weight" % x] = w(h, h, s=0.02)
            t[p + "self_attn.linear_%s.bias" % x] = w(h)
        t.update({p + "feed_forward.w_1.weight": w(h // 4, h), p + "feed_forward.w_1.bias": w(h // 4),
                  p + "feed_forward.w_2.weight": w(h, h // 4), p + "feed_forward.w_2.bias": w(h),
                  **norm_tensors(w, p + "norm1", h), **norm_tensors(w, p + "norm2", h)})
    return {k: v.to(torch.bfloat16) for k, v in t.items()}


def make(out):
    import torch
    import transformers
    from make_ckpt import word_tokenizer
    # the text model's width is the adaptor's output, 1024 (funasr.py:629)
    text = dict(hidden_size=ADAPTOR["dim"], intermediate_size=256, num_hidden_layers=2,
                num_attention_heads=8, num_key_value_heads=4, head_dim=128, vocab_size=1000,
                max_position_embeddings=512, tie_word_embeddings=True, bos_token_id=2,
                eos_token_id=1, pad_token_id=0)
    text_cfg = transformers.Qwen3Config(**text)
    torch.manual_seed(1234)
    sd = module_tensors({"llm": transformers.Qwen3ForCausalLM(text_cfg)})
    sd.update(audio_tensors(torch.Generator().manual_seed(5)))
    save_prefix_shards(out, sd, ("audio_encoder.", "audio_adaptor.", "llm.model.layers.0."))
    cfg = dict(text, architectures=["FunASRForConditionalGeneration"], model_type="qwen3",
               dtype="bfloat16", rms_norm_eps=1e-6, hidden_act="silu",
               audio_encoder_conf=dict(AUDIO))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    word_tokenizer(text_cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                              "<|AUDIO|>": AUDIO_TOKEN},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    # vLLM's FunASRProcessor (transformers_utils/processors/funasr.py:318)
    # and its feature extractor: 80 mel bins, 7 frames stacked every 6, no
    # CMVN file, no dither
    fe = {"feature_extractor_type": "FunASRFeatureExtractor", "processor_class": "FunASRProcessor",
          "feature_size": IN_SIZE, "sampling_rate": 16000, "hop_length": 160,
          "chunk_length": 30, "n_fft": 400, "padding_value": 0.0, "dither": 0.0,
          "max_length": 1000, "return_attention_mask": False,
          "frontend_conf": {"cmvn_file": None, "fs": 16000, "window": "hamming", "n_mels": 80,
                            "frame_length": 25, "frame_shift": 10, "lfr_m": 7, "lfr_n": 6}}
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(fe, f, indent=2)
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump({"processor_class": "FunASRProcessor"}, f)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
