"""MOSS-Transcribe-Diarize (MossTranscribeDiarizeForConditionalGeneration)
as vLLM 0.32 reads it, tiny, under the names its hf_to_vllm_mapper reads
(moss_transcribe_diarize.py:584-596): transformers' Qwen3Model (make_ckpt's
COMMON, embeddings tied to the head as vLLM's config defaults) under
model.language_model., transformers' WhisperEncoder (2 layers of 4 heads
of 16, 80 mel bins, 100 positions: 2-second chunks) under
model.whisper_encoder., and the adaptor model.vq_adaptor.layers.{0,2,3}
(Linear over 4 merged frames, SiLU, Linear, LayerNorm, :325-337), which
transformers does not have: a torch nn.Sequential of vLLM's own names and
shapes.  config.json as vLLM's MossTranscribeDiarizeConfig reads it
(transformers_utils/configs/moss_transcribe_diarize.py); a word-level
tokenizer with the audio tokens and a stand-in for the release's processor
(remote code: moss_td_processing.py)."""
import json
import os

AUDIO = dict(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
             num_mel_bins=80, max_source_positions=100, decoder_layers=1,
             decoder_attention_heads=4, decoder_ffn_dim=128)
MERGE = 4
AUDIO_PAD, AUDIO_START, AUDIO_END = 999, 997, 996


def make(out):
    import torch
    import transformers
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    from ckpt_io import copy_processor, module_tensors, save_prefix_shards
    from make_ckpt import COMMON, word_tokenizer
    text_cfg = transformers.Qwen3Config(**dict(COMMON, tie_word_embeddings=True,
                                               bos_token_id=2, eos_token_id=1, pad_token_id=0))
    audio_cfg = transformers.WhisperConfig(**AUDIO)
    d_in = AUDIO["d_model"] * MERGE
    hidden = text_cfg.hidden_size
    adaptor = torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.SiLU(),
                                  torch.nn.Linear(hidden, hidden), torch.nn.LayerNorm(hidden))
    torch.manual_seed(1234)
    sd = module_tensors({"model.language_model": transformers.Qwen3Model(text_cfg),
                         "model.whisper_encoder": WhisperEncoder(audio_cfg),
                         "model.vq_adaptor.layers": adaptor})
    save_prefix_shards(out, sd, ("model.whisper_encoder.", "model.vq_adaptor.",
                                 "model.language_model.layers.0.",
                                 "model.language_model.layers.1."))
    text = {k: v for k, v in text_cfg.to_dict().items()
            if k in COMMON or k in ("bos_token_id", "eos_token_id", "pad_token_id",
                                    "rms_norm_eps", "hidden_act", "attention_bias")}
    cfg = {"architectures": ["MossTranscribeDiarizeForConditionalGeneration"],
           "model_type": "moss_transcribe_diarize", "dtype": "bfloat16",
           "text_config": dict(text, model_type="qwen3"),
           "audio_config": dict(AUDIO, model_type="whisper"),
           "audio_token_id": AUDIO_PAD, "audio_merge_size": MERGE,
           "adaptor_input_dim": d_in, "tie_word_embeddings": True}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    word_tokenizer(text_cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                              "<|audio_start|>": AUDIO_START, "<|audio_end|>": AUDIO_END,
                              "<|audio_pad|>": AUDIO_PAD},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    # the processor (the release's is remote code: a stand-in) and its
    # feature extractor, 2-second chunks (100 encoder positions)
    transformers.WhisperFeatureExtractor(feature_size=AUDIO["num_mel_bins"],
                                         chunk_length=2).save_pretrained(out)
    copy_processor(out, "moss_td_processing", "MossTranscribeDiarizeProcessor",
                   audio_merge_size=MERGE)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
