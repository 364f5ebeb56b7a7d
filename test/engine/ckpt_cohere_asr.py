"""Cohere Transcribe (CohereAsrForConditionalGeneration) as vLLM 0.32 reads
it, tiny: transformers' own CohereAsrForConditionalGeneration (a Parakeet
Conformer encoder of 2 layers of 4 heads of 16 over 64 mel bins, 8x
dw_striding subsampling of 32 channels, per-layer pos_bias_u/v, BatchNorm
convolution modules; the projection encoder_decoder_proj from 64 to 128;
a decoder of 2 layers of 4 heads of 32 with self- and cross-attention and
a ReLU MLP, learned token and fixed sine position tables; the head
log_softmax.mlp.layer0 with its bias; NeMo's featurizer fb and window,
which vLLM drops), saved by transformers in the
release's NeMo names, without transformers' "model." prefix, as the
release ships them and as vLLM's load_weights reads them
(cohere_asr.py:2310-2334).  Every floating tensor is perturbed (random
init leaves norms at 1 and biases at 0), the BatchNorm statistics too.
config.json holds transformers' keys and the release's NeMo sections that
vLLM reads (encoder, transf_decoder.config_dict, head, preprocessor,
sample_rate, max_audio_clip_s, overlap_chunk_second: cohere_asr.py:438-442,
1375-1398, 1874-1905, 2177-2202), with dither 0 so that the features are
the same each run; a word-level tokenizer."""
import json
import os
import tempfile

ENC = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
           subsampling_conv_channels=32, num_mel_bins=64, conv_kernel_size=9,
           subsampling_factor=8, max_position_embeddings=5000)
DEC = dict(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
           intermediate_size=256, max_position_embeddings=512, hidden_act="relu")


def nemo_sections():
    """The sections of the release's config.json that vLLM reads."""
    return {
        "encoder": {"feat_in": ENC["num_mel_bins"], "n_layers": ENC["num_hidden_layers"],
                    "d_model": ENC["hidden_size"], "feat_out": -1,
                    "causal_downsampling": False, "subsampling": "dw_striding",
                    "subsampling_factor": ENC["subsampling_factor"],
                    "subsampling_conv_chunking_factor": 1,
                    "subsampling_conv_channels": ENC["subsampling_conv_channels"],
                    "ff_expansion_factor": ENC["intermediate_size"] // ENC["hidden_size"],
                    "self_attention_model": "rel_pos", "n_heads": ENC["num_attention_heads"],
                    "att_context_size": [-1, -1], "xscaling": False, "untie_biases": True,
                    "pos_emb_max_len": ENC["max_position_embeddings"],
                    "conv_kernel_size": ENC["conv_kernel_size"],
                    "conv_norm_type": "batch_norm", "conv_context_size": None,
                    "use_bias": True},
        "transf_decoder": {"config_dict": {
            "hidden_size": DEC["hidden_size"], "inner_size": DEC["intermediate_size"],
            "hidden_act": DEC["hidden_act"], "num_attention_heads": DEC["num_attention_heads"],
            "num_layers": DEC["num_hidden_layers"],
            "max_sequence_length": DEC["max_position_embeddings"]}},
        "head": {"num_classes": DEC["vocab_size"], "hidden_size": DEC["hidden_size"],
                 "log_softmax": True},
        "preprocessor": {"sample_rate": 16000, "features": ENC["num_mel_bins"],
                         "window_size": 0.025, "window_stride": 0.01, "window": "hann",
                         "normalize": "per_feature", "n_fft": 512, "dither": 0.0,
                         "pad_to": 0, "log": True},
        "sample_rate": 16000, "max_audio_clip_s": 30, "overlap_chunk_second": 5}


def make(out):
    import torch
    import transformers
    from safetensors.torch import load_file
    from ckpt_io import save_prefix_shards
    from make_ckpt import word_tokenizer
    cfg = transformers.CohereAsrConfig(encoder_config=dict(ENC), bos_token_id=4, eos_token_id=3,
                                       pad_token_id=2, **DEC)
    torch.manual_seed(1234)
    model = transformers.CohereAsrForConditionalGeneration(cfg).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as tmp:
        # transformers saves the release's names (its conversion mapping
        # reversed: conversion_mapping.py "cohere_asr")
        model.save_pretrained(tmp)
        saved = load_file(os.path.join(tmp, "model.safetensors"))
    g = torch.Generator().manual_seed(5)
    sd = {}
    for k, v in saved.items():
        if v.is_floating_point():
            noise = torch.randn(v.shape, generator=g) * 0.02
            v = (v.float().abs() + 0.5 if k.endswith("running_var") else v.float() + noise)
            v = v.to(torch.bfloat16)
        sd[k[len("model."):] if k.startswith("model.") else k] = v
    # NeMo's featurizer state, which the release carries and vLLM drops
    # (cohere_asr.py:2062-2064): a mel filterbank and an STFT window
    sd["preprocessor.featurizer.fb"] = torch.rand(1, ENC["num_mel_bins"], 257,
                                                   generator=g).to(torch.bfloat16)
    sd["preprocessor.featurizer.window"] = torch.hann_window(400).to(torch.bfloat16)
    save_prefix_shards(out, sd, ("encoder.", "transf_decoder._decoder.layers.0.",
                                 "transf_decoder._decoder.layers.1."))
    c = cfg.to_dict()
    c.update(nemo_sections())
    c.update({"architectures": ["CohereAsrForConditionalGeneration"], "dtype": "bfloat16"})
    c.pop("transformers_version", None)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    word_tokenizer(cfg, {"<unk>": 0, "<pad>": 2, "<eos>": 3, "<bos>": 4,
                         "<|startoftranscript|>": 7},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
