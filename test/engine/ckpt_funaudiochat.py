"""FunAudioChat (FunAudioChatForConditionalGeneration) as vLLM 0.32 reads
it, tiny: vLLM's own config (model_type funaudiochat,
transformers_utils/configs/funaudiochat.py), a Qwen3ForCausalLM
(transformers' own) under language_model., the continuous audio tower
under continuous_audio_tower. (conv1, conv2, Whisper-like layers whose
q, k and v projections are fused into qkv_proj, k's bias zeros, out_proj,
fc1, fc2, their norms, ln_post, proj, audio_bos_eos_token), the discrete tower under
audio_tower. (embed_tokens, output_matching, continual_output_matching)
and an audio_invert_tower. tensor, which vLLM's mapper drops
(funaudiochat.py:766).  transformers has no FunAudioChat class: the audio
tensors are a stand-in built from vLLM's module names and shapes
(funaudiochat.py:180-254, 449-466).  The release's separate q_proj, k_proj
and v_proj vLLM 0.32 cannot load (the attention's own load_weights is
handed q_proj.weight, which its stacked mapper's ".q_proj" keys do not
match: "There is no module or parameter named 'k_proj'"); fused, as here,
QKVParallelLinear's loader splits them itself.  A word-level tokenizer and
WhisperFeatureExtractor's settings beside them."""
import json
import os

AUDIO = dict(num_mel_bins=128, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
             d_model=64, max_source_positions=64, n_window=50, output_dim=256,
             codebook_size=64, group_size=5, pad_token_id=0, continuous_features_mode="replace")
AUDIO_TOKEN, AUDIO_BOS, AUDIO_EOS = 999, 997, 996


def audio_tensors(g):
    import torch
    from ckpt_io import noise, norm_tensors
    w = noise(g)
    d, m, f, o = AUDIO["d_model"], AUDIO["num_mel_bins"], AUDIO["encoder_ffn_dim"], AUDIO["output_dim"]
    c = "continuous_audio_tower."
    t = {c + "conv1.weight": w(d, m, 3), c + "conv1.bias": w(d),
         c + "conv2.weight": w(d, d, 3), c + "conv2.bias": w(d),
         **norm_tensors(w, c + "ln_post", d),
         c + "proj.weight": w(o, d), c + "proj.bias": w(o),
         c + "audio_bos_eos_token.weight": w(2, o)}
    for i in range(AUDIO["encoder_layers"]):
        p = c + "layers.%d." % i
        # q, k and v fused as vLLM's qkv_proj (k's bias zeros): vLLM 0.32
        # refuses them apart (funaudiochat.py:86-92, 144-146)
        t.update({p + "self_attn.qkv_proj.weight": w(3 * d, d),
                  p + "self_attn.qkv_proj.bias": torch.cat([w(d), torch.zeros(d), w(d)]),
                  p + "self_attn.out_proj.weight": w(d, d), p + "self_attn.out_proj.bias": w(d),
                  **norm_tensors(w, p + "self_attn_layer_norm", d),
                  p + "fc1.weight": w(f, d), p + "fc1.bias": w(f),
                  p + "fc2.weight": w(d, f), p + "fc2.bias": w(d),
                  **norm_tensors(w, p + "final_layer_norm", d)})
    t.update({"audio_tower.embed_tokens.weight": w(AUDIO["codebook_size"], o),
              "audio_tower.output_matching.weight": w(o, o),
              "audio_tower.continual_output_matching.weight": w(o, o),
              # the speech decoder's, which vLLM drops (funaudiochat.py:766)
              "audio_invert_tower.proj.weight": w(o, o)})
    return {k: v.to(torch.bfloat16) for k, v in t.items()}


def make(out):
    import torch
    import transformers
    from ckpt_io import module_tensors, save_prefix_shards
    from make_ckpt import COMMON, word_tokenizer
    text = dict(COMMON, tie_word_embeddings=False, bos_token_id=2, eos_token_id=1, pad_token_id=0)
    text_cfg = transformers.Qwen3Config(**text)
    torch.manual_seed(1234)
    sd = module_tensors({"language_model": transformers.Qwen3ForCausalLM(text_cfg)})
    sd.update(audio_tensors(torch.Generator().manual_seed(5)))
    save_prefix_shards(out, sd, ("continuous_audio_tower.", "audio_",
                                 "language_model.model.layers.0."))
    cfg = {"architectures": ["FunAudioChatForConditionalGeneration"], "model_type": "funaudiochat",
           "dtype": "bfloat16", "audio_token_index": AUDIO_TOKEN,
           "audio_config": dict(AUDIO, model_type="funaudiochat_audio_encoder"),
           "text_config": dict(text, model_type="qwen3", rms_norm_eps=1e-6, hidden_act="silu")}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    word_tokenizer(text_cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                              "<|audio_bos|>": AUDIO_BOS, "<|audio_eos|>": AUDIO_EOS,
                              "<|AUDIO|>": AUDIO_TOKEN},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    transformers.WhisperFeatureExtractor(feature_size=AUDIO["num_mel_bins"]).save_pretrained(out)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
