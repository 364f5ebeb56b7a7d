"""Ultravox (UltravoxModel) as vLLM 0.32 reads it, tiny, with its towers
in the checkpoint (audio_model_id and text_model_id null, vLLM's own
UltravoxConfig, transformers_utils/configs/ultravox.py): transformers'
WhisperEncoder (2 layers of 4 heads of 16, 128 mel bins) under
audio_tower., LlamaForCausalLM (make_ckpt's COMMON, untied) under
language_model., and the v0.5 feed-forward projector under
multi_modal_projector. (ultravox.py:401-459: ln_pre over 8 stacked frames,
linear_1 to config.json's own hidden_size 128, SwiGLU halving it, ln_mid,
linear_2 to the text model's 256), which transformers does not have.  A
word-level tokenizer and a stand-in for Ultravox's processor (remote code:
ultravox_processing.py), which vLLM's processor needs: the engine cases'
prompts are text."""
import json
import os

AUDIO = dict(model_type="whisper", d_model=64, encoder_layers=2, encoder_attention_heads=4,
             encoder_ffn_dim=128, num_mel_bins=128, max_source_positions=1500,
             decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=128)
PROJ_HIDDEN = 128
STACK = 8
AUDIO_TOKEN = 999


def make(out):
    import torch
    import transformers
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    from ckpt_io import copy_processor, module_tensors, noise, save_prefix_shards
    from make_ckpt import COMMON, word_tokenizer
    text_cfg = transformers.LlamaConfig(**dict(COMMON, tie_word_embeddings=False,
                                               bos_token_id=2, eos_token_id=1, pad_token_id=0))
    audio_cfg = transformers.WhisperConfig(**AUDIO)
    torch.manual_seed(1234)
    sd = module_tensors({"language_model": transformers.LlamaForCausalLM(text_cfg),
                         "audio_tower": WhisperEncoder(audio_cfg)})
    w = noise(torch.Generator().manual_seed(5))
    d_in = AUDIO["d_model"] * STACK
    proj = {"ln_pre.weight": 1 + w(d_in, s=0.1), "linear_1.weight": w(PROJ_HIDDEN, d_in),
            "ln_mid.weight": 1 + w(PROJ_HIDDEN // 2, s=0.1),
            "linear_2.weight": w(text_cfg.hidden_size, PROJ_HIDDEN // 2)}
    sd.update({"multi_modal_projector." + k: v.to(torch.bfloat16) for k, v in proj.items()})
    save_prefix_shards(out, sd, ("audio_tower.", "multi_modal_projector.",
                                 "language_model.model.layers.0.",
                                 "language_model.model.layers.1."))
    cfg = {"architectures": ["UltravoxModel"], "model_type": "ultravox", "dtype": "bfloat16",
           "audio_config": audio_cfg.to_dict(), "text_config": text_cfg.to_dict(),
           "audio_model_id": None, "text_model_id": None, "hidden_size": PROJ_HIDDEN,
           "stack_factor": STACK, "projector_act": "swiglu", "projector_ln_mid": True,
           "norm_init": 0.4, "audio_token_index": AUDIO_TOKEN,
           "vocab_size": text_cfg.vocab_size, "ignore_index": -100}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    # vLLM's Ultravox processor refuses skip_tokenizer_init
    word_tokenizer(text_cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                              "<|audio|>": AUDIO_TOKEN},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    # and a processor (Ultravox's is remote code: a stand-in)
    # (2-second chunks: vLLM's dummy sound, 16 chunks, is then 208 tokens,
    # inside the engine cases' max_model_len)
    transformers.WhisperFeatureExtractor(feature_size=AUDIO["num_mel_bins"],
                                         chunk_length=2).save_pretrained(out)
    copy_processor(out, "ultravox_processing", "UltravoxProcessor", stack_factor=STACK)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
