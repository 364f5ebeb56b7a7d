"""Kimi-Audio (MoonshotKimiaForCausalLM) as vLLM 0.32 reads it, tiny, laid
out as Moonshot's Kimi-Audio-7B-Instruct is: at the top, the Qwen2 text
model (2 heads of 32, vLLM's CPU attention has no heads of 16, one kv
head) under the release's names (model.layers., model.embed_tokens.,
model.norm., lm_head.; transformers' Qwen2ForCausalLM), the VQ-adaptor
model.vq_adaptor.layers.0/3/4 (two Linears and a LayerNorm over 4 stacked
Whisper frames) and the speech-output branch vLLM drops (mimo_layers.0.,
a Qwen2 decoder layer, mimo_norm., mimo_output.); in whisper-large-v3/, a
Whisper model saved by transformers' WhisperForConditionalGeneration (2
encoder layers of 2 heads of 32 over 80 mel bins, 100 positions; its
decoder, which vLLM drops) with its preprocessor_config.json (a 2-second
chunk), which vLLM reads from that folder (kimi_audio.py:99-106, 127-142,
406-412).  config.json is the release's keys under model_type qwen2 (the
release's "kimia" is remote code vLLM 0.32 does not need: it reads
hidden_size, kimia_adaptor_input_dim and the Qwen2 keys alone); the
tokenizer is vLLM's KimiAudioTokenizer's (tokenizers/kimi_audio.py): a
tiktoken.model of the 256 bytes and the release's special tokens at their
ids in tokenizer_config.json, so the vocabulary is the release's size."""
import base64
import json
import os

TEXT = dict(vocab_size=151680, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=32,
            max_position_embeddings=1024, rms_norm_eps=1e-6, bos_token_id=151643,
            eos_token_id=151644, pad_token_id=151643, tie_word_embeddings=False)
WHISPER = dict(d_model=64, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=128,
               decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=128,
               num_mel_bins=80, max_source_positions=100, max_target_positions=32,
               vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
               decoder_start_token_id=1)
# the release's special tokens at the ids vLLM's tokenizer and processor
# expect (KimiAudioTokenizer, KimiAudioProcessor)
SPECIAL = {"<|im_kimia_text_bos|>": 151643, "<|im_kimia_text_eos|>": 151644,
           "<|im_msg_end|>": 151645, "<|im_media_begin|>": 151661,
           "<|im_media_end|>": 151663, "<|im_kimia_text_blank|>": 151666,
           "<|im_kimia_user_msg_start|>": 151670, "<|im_kimia_assistant_msg_start|>": 151671}


def tokenizer(out):
    with open(os.path.join(out, "tiktoken.model"), "w") as f:
        for i in range(256):
            f.write("%s %d\n" % (base64.b64encode(bytes([i])).decode(), i))
    added = {str(i): {"content": s, "special": True, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False} for s, i in SPECIAL.items()}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"added_tokens_decoder": added, "bos_token": "<|im_kimia_text_bos|>",
                   "eos_token": "<|im_kimia_text_eos|>"}, f, indent=1)


def make(out, encoder_layers=None):
    import torch
    import transformers
    from ckpt_io import module_tensors, perturb, save_prefix_shards
    cfg = transformers.Qwen2Config(**TEXT)
    wcfg = transformers.WhisperConfig(**dict(WHISPER, encoder_layers=encoder_layers or
                                             WHISPER["encoder_layers"]))
    d, h = WHISPER["d_model"], TEXT["hidden_size"]
    torch.manual_seed(1234)
    llm = transformers.Qwen2ForCausalLM(cfg)
    sd = module_tensors({"model": llm.model, "lm_head": llm.lm_head,
                         "model.vq_adaptor.layers.0": torch.nn.Linear(4 * d, h),
                         "model.vq_adaptor.layers.3": torch.nn.Linear(h, h),
                         "model.vq_adaptor.layers.4": torch.nn.LayerNorm(h),
                         "mimo_layers.0": transformers.models.qwen2.modeling_qwen2
                         .Qwen2DecoderLayer(cfg, 0),
                         "mimo_norm": torch.nn.LayerNorm(h),
                         "mimo_output": torch.nn.Linear(h, 512, bias=False)})
    sd = {k: v for k, v in sd.items() if "rotary_emb" not in k}
    save_prefix_shards(out, sd, ("model.embed_tokens.weight", ("model.layers.", "model.norm."),
                                 ("model.vq_adaptor.", "lm_head.")))
    conf = dict(TEXT, architectures=["MoonshotKimiaForCausalLM"], model_type="qwen2",
                dtype="bfloat16", rope_theta=1000000.0, hidden_act="silu",
                kimia_adaptor_input_dim=4 * d, kimia_mimo_layers=1,
                kimia_mimo_transformer_from_layer_index=1, kimia_media_begin=151661,
                kimia_media_end=151663, kimia_text_output_vocab=TEXT["vocab_size"],
                kimia_audio_output_vocab=512, use_whisper_feature=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
    tokenizer(out)
    # the Whisper model of whisper-large-v3/, as transformers saves it
    wdir = os.path.join(out, "whisper-large-v3")
    torch.manual_seed(99)
    whisper = transformers.WhisperForConditionalGeneration(wcfg)
    perturb(whisper)
    whisper.to(torch.bfloat16).save_pretrained(wdir)
    transformers.WhisperFeatureExtractor(feature_size=WHISPER["num_mel_bins"],
                                         chunk_length=2).save_pretrained(wdir)


def make_e3(out):
    """Three encoder layers beside the text model's two: vLLM deals each
    stack between pipeline stages on its own (get_pp_indices: 2 + 1
    encoder layers, 1 + 1 decoder layers at pp 2)."""
    make(out, encoder_layers=3)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
