"""FireRedASR2 (FireRedASR2ForConditionalGeneration) as vLLM 0.32 reads it,
tiny, under the release's names (fireredasr2.py:320-332 maps them):
Qwen2ForCausalLM (make_ckpt's COMMON, untied) under llm., a Conformer
encoder of 2 blocks of 4 heads of 16 over 80 mel bins under encoder.
(input_preprocessor's two convolutions and out, each block's ffn1 and ffn2
as the release's Sequential net.0, net.1 and net.4, mhsa's w_qs, w_ks,
w_vs, their LayerNorms, fc, linear_pos and pos_bias_u/v, conv's
pointwise, depthwise and LayerNorm batch_norm, layer_norm), the release's
persistent positional_encoding.pe (which vLLM drops), and the adapter
encoder_projector.linear1 and linear2 over 2 stacked frames.  Neither
transformers nor vLLM has a class that saves these names: the tensors are
made from vLLM's own module (conformer_encoder.py) names and shapes.
config.json is a Qwen2Config with audio_encoder_conf and
encoder_downsample_rate, as vLLM reads it (fireredasr2.py:129, 144, 178);
a word-level tokenizer with <|AUDIO|>, and vLLM's own FireRedASR2Processor
(processor_config.json) with its feature extractor's settings
(preprocessor_config.json: CMVN of 80 bins)."""
import json
import os

ENC = dict(idim=80, n_layers_enc=2, n_head=4, d_model=64, kernel_size=5, pe_maxlen=64)
DOWNSAMPLE = 2
AUDIO_TOKEN = 999


def encoder_tensors(g, hidden):
    import torch
    from ckpt_io import noise, norm_tensors
    d, k = ENC["d_model"], ENC["kernel_size"]
    sub = ((ENC["idim"] - 1) // 2 - 1) // 2
    w = noise(g)
    e = "encoder."
    t = {e + "input_preprocessor.conv.0.weight": w(32, 1, 3, 3, s=0.2),
         e + "input_preprocessor.conv.0.bias": w(32),
         e + "input_preprocessor.conv.2.weight": w(32, 32, 3, 3),
         e + "input_preprocessor.conv.2.bias": w(32),
         e + "input_preprocessor.out.weight": w(d, 32 * sub, s=0.02),
         e + "input_preprocessor.out.bias": w(d),
         e + "positional_encoding.pe": w(1, 2 * ENC["pe_maxlen"] - 1, d, s=1.0)}
    for i in range(ENC["n_layers_enc"]):
        p = e + "layer_stack.%d." % i
        for f in ("ffn1", "ffn2"):
            t.update(norm_tensors(w, p + f + ".net.0", d))
            t.update({p + f + ".net.1.weight": w(4 * d, d), p + f + ".net.1.bias": w(4 * d),
                      p + f + ".net.4.weight": w(d, 4 * d), p + f + ".net.4.bias": w(d)})
        for n in ("w_qs", "w_ks", "w_vs", "linear_pos", "fc"):
            t[p + "mhsa.%s.weight" % n] = w(d, d)
        for n in ("q", "k", "v"):
            t.update(norm_tensors(w, p + "mhsa.layer_norm_" + n, d))
        h = ENC["n_head"]
        t.update({p + "mhsa.pos_bias_u": w(h, d // h), p + "mhsa.pos_bias_v": w(h, d // h)})
        t.update(norm_tensors(w, p + "conv.pre_layer_norm", d))
        t.update(norm_tensors(w, p + "conv.batch_norm", 2 * d))
        t.update({p + "conv.pointwise_conv1.weight": w(4 * d, d, 1),
                  p + "conv.depthwise_conv.weight": w(2 * d, 1, k, s=0.2),
                  p + "conv.pointwise_conv2.weight": w(d, 2 * d, 1)})
        t.update(norm_tensors(w, p + "layer_norm", d))
    t.update({"encoder_projector.linear1.weight": w(hidden, DOWNSAMPLE * d),
              "encoder_projector.linear1.bias": w(hidden),
              "encoder_projector.linear2.weight": w(hidden, hidden),
              "encoder_projector.linear2.bias": w(hidden)})
    return {k: v.to(torch.bfloat16) for k, v in t.items()}


def make(out):
    import torch
    import transformers
    from ckpt_io import module_tensors, save_prefix_shards
    from make_ckpt import COMMON, word_tokenizer
    text_cfg = transformers.Qwen2Config(**dict(COMMON, tie_word_embeddings=False,
                                               bos_token_id=2, eos_token_id=1, pad_token_id=0))
    torch.manual_seed(1234)
    sd = module_tensors({"llm": transformers.Qwen2ForCausalLM(text_cfg)})
    sd.update(encoder_tensors(torch.Generator().manual_seed(5), text_cfg.hidden_size))
    save_prefix_shards(out, sd, ("encoder.", "encoder_projector.", "llm.model.layers.0.",
                                 "llm.model.layers.1."))
    cfg = {k: v for k, v in text_cfg.to_dict().items()
           if k in COMMON or k in ("tie_word_embeddings", "bos_token_id", "eos_token_id",
                                   "pad_token_id", "rms_norm_eps", "hidden_act", "rope_theta",
                                   "rope_parameters")}
    cfg.update({"architectures": ["FireRedASR2ForConditionalGeneration"],
                "model_type": "qwen2", "dtype": "bfloat16",
                "audio_encoder_conf": dict(ENC), "encoder_downsample_rate": DOWNSAMPLE})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    word_tokenizer(text_cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                              "<|AUDIO|>": AUDIO_TOKEN},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    # vLLM's own processor (transformers_utils/processors/fireredasr2.py)
    # and its feature extractor's settings: the release's CMVN (here 0 and
    # 1/1000 for each bin; it needs them), padded to 256 frames, not 3000
    g = torch.Generator().manual_seed(6)
    fe = {"feature_extractor_type": "FireRedASR2FeatureExtractor",
          "processor_class": "FireRedASR2Processor", "feature_size": 80,
          "sampling_rate": 16000, "chunk_length": 30, "padding_value": 0.0,
          "dim": 80, "num_mel_bins": 80, "frame_length": 25, "frame_shift": 10,
          "dither": 0.0, "max_length": 256, "downsample_rate": DOWNSAMPLE,
          "means": [round(float(x), 4) for x in torch.randn(80, generator=g)],
          "inverse_std_variences": [0.001] * 80}
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(fe, f, indent=2)
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump({"processor_class": "FireRedASR2Processor"}, f)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
