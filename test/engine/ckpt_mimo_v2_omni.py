"""Xiaomi's MiMo-V2.5 omni model (MiMoV2OmniForCausalLM: vLLM 0.32
model_executor/models/mimo_v2_omni.py), tiny.  vLLM builds it for a MiMo-V2
config.json with a vision_config (model_arch_config_convertor.py,
MimoV2ModelArchConfigConvertor): the MiMo-V2 text model of
mimo_v2_flash.json (language_model), the MiMo-VL vision tower (visual) and
MiMo-Audio's audio encoder (audio_encoder, mimo_audio.py).

The text model and its multi-token-prediction layer: make_ckpt.py's
learned mimo_v2_flash (transformers' MiMoV2FlashForCausalLM, model_type
mimo_v2_flash, with the released MTP layer beside it).  config.json names
MiMoV2OmniForCausalLM: vLLM's MTP draft of it is MiMoV2OmniMTPModel only
where config.json says so (config/speculative.py, hf_config_override, reads
architectures before the convertor renames them).

The vision tower (no transformers class: its tensors written with the
shapes vLLM's MiMoVisionTransformer builds, under the release's visual.
names): 2 blocks of 32 wide, 4 q heads and 2 kv heads of 16 (qk_channels
and kv_channels, both as wide as the release's, whose forward splits k and v
alike: heads wider than the tower, 4*16 > 32, as the release's 32*64 >
1280), block 0 full attention (fullatt_block_indexes), block 1 windowed with its
per-head attn.sinks (use_sink); RMS norms, biased qkv, proj and MLP,
patch merger without biases (mlp.0, mlp.2) into the text width.

The audio encoder: vLLM's MimoAudioEncoder's own modules (transformers'
Qwen2Model as input_local_transformer, nn.Embedding speech embeddings, a
two-layer projection) at 2 channels, 16 wide, one layer; the speech
embeddings under the release's top-level speech_embeddings. (vLLM's
hf_to_vllm_mapper adds audio_encoder.), the rest under audio_encoder..
input_local_transformer.embed_tokens is among them: vLLM 0.32 builds it
(transformers' Qwen2Model, vocab_size 151936) and refuses a checkpoint
that leaves a parameter uninitialized.  No audio_tokenizer/ folder: vLLM
then only warns (audio encoding disabled); the prompts are text.  A
word-level tokenizer with the processor's tokens (processor_config).
"""
import json
import os

VISION = {"depth": 2, "hidden_size": 32, "hidden_act": "silu", "intermediate_size": 64,
          "num_heads": 4, "num_key_value_heads": 2, "qk_channels": 16, "kv_channels": 16,
          "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2,
          "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [0],
          "vit_window_attn_types": [-1, 0], "visual_token_window_size": 64,
          "use_sink": True, "tokens_per_second": 2}
AUDIO = {"speech_vocab_size": "17-17", "speech_zeroemb_idx": "16-16", "group_size": 2,
         "audio_channels": 2, "input_local_layers": 1, "input_local_dim": 16,
         "input_full_attention": True, "input_local_attn_heads": 2,
         "input_local_head_dim": 8, "input_local_intermediate_size": 32,
         "rope_theta": 640000.0, "partial_rotary_factor": 1.0, "projection_layers": 2,
         "add_post_norm": True, "audio_segment_size": 6000}


def vision_tensors(v, out_hidden, g):
    import torch
    h, i, nh, kv = v["hidden_size"], v["intermediate_size"], v["num_heads"], v["num_key_value_heads"]
    qk, kc = v["qk_channels"], v["kv_channels"]
    qkv = nh * qk + kv * (qk + kc)
    m = h * v["spatial_merge_size"] ** 2
    shapes = {"patch_embed.proj.weight": [h, v["in_channels"], v["temporal_patch_size"],
                                          v["patch_size"], v["patch_size"]],
              "merger.ln_q.weight": [h], "merger.mlp.0.weight": [m, m],
              "merger.mlp.2.weight": [out_hidden, m]}
    for n in range(v["depth"]):
        p = "blocks.%d." % n
        shapes.update({p + "norm1.weight": [h], p + "norm2.weight": [h],
                       p + "attn.qkv.weight": [qkv, h], p + "attn.qkv.bias": [qkv],
                       p + "attn.proj.weight": [h, nh * kc], p + "attn.proj.bias": [h],
                       p + "mlp.gate_proj.weight": [i, h], p + "mlp.gate_proj.bias": [i],
                       p + "mlp.up_proj.weight": [i, h], p + "mlp.up_proj.bias": [i],
                       p + "mlp.down_proj.weight": [h, i], p + "mlp.down_proj.bias": [h]})
        if v["use_sink"] and n not in v["fullatt_block_indexes"]:
            shapes[p + "attn.sinks"] = [nh]
    return {"visual." + k: (torch.randn(s, generator=g) * 0.02).to(torch.bfloat16)
            for k, s in shapes.items()}


def audio_tensors(a, out_hidden):
    import torch
    from vllm.model_executor.models.mimo_audio import MimoAudioEncoder
    torch.manual_seed(7)
    enc = MimoAudioEncoder(dict(a, out_hidden_size=out_hidden))
    new = {}
    for k, t in enc.state_dict().items():
        t = (t + torch.randn(t.shape) * 0.02).to(torch.bfloat16).contiguous()
        new[k if k.startswith("speech_embeddings.") else "audio_encoder." + k] = t
    return new


def make(out):
    import torch
    import make_ckpt
    from ckpt_io import add_to_first_shard, update_config
    make_ckpt.learned("mimo_v2_flash", out)
    cfg = json.load(open(os.path.join(out, "config.json")))
    g = torch.Generator().manual_seed(11)
    new = vision_tensors(VISION, cfg["hidden_size"], g)
    new.update(audio_tensors(AUDIO, cfg["hidden_size"]))
    add_to_first_shard(out, new)
    update_config(out, lambda c: c.update(
        architectures=["MiMoV2OmniForCausalLM"],
        vision_config=dict(VISION, out_hidden_size=c["hidden_size"]),
        audio_config=dict(AUDIO, out_hidden_size=c["hidden_size"]),
        image_token_id=SPECIAL["<|image_pad|>"], video_token_id=SPECIAL["<|video_pad|>"],
        vision_start_token_id=SPECIAL["<|vision_start|>"],
        vision_end_token_id=SPECIAL["<|vision_end|>"],
        processor_config={k + "_token_id": SPECIAL["<|%s|>" % v] for k, v in (
            ("image", "image_pad"), ("video", "video_pad"), ("audio", "audio_pad"),
            ("vision_start", "vision_start"), ("vision_end", "vision_end"),
            ("audio_start", "mimo_audio_start"), ("audio_end", "mimo_audio_end"),
            ("video_start", "video_start"), ("video_end", "video_end"))}))
    tokenizer(out, cfg)


# The processor's tokens (mimo_v2_omni.py get_placeholder_str) at the top of
# the tiny vocabulary; config.json's processor_config gives their ids, as
# the release's does
SPECIAL = {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3, "<|vision_start|>": 989,
           "<|vision_end|>": 990, "<|image_pad|>": 991, "<|video_pad|>": 992,
           "<|mimo_audio_start|>": 993, "<|audio_pad|>": 994, "<|mimo_audio_end|>": 995,
           "<|video_start|>": 996, "<|video_end|>": 997}


def tokenizer(out, cfg):
    """A word-level tokenizer: vLLM's MiMoV2OmniMultiModalProcessor refuses
    to start without one (skip_tokenizer_init)."""
    import transformers
    from make_ckpt import word_tokenizer
    word_tokenizer(transformers.PretrainedConfig(vocab_size=cfg["vocab_size"]), SPECIAL,
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def make_v25(out):
    """make(out) with config.json as MiMo-V2.5's release writes it:
    architectures MiMoV2ForCausalLM (vLLM builds MiMoV2OmniForCausalLM for
    it all the same, for its vision_config: MimoV2ModelArchConfigConvertor,
    and so does wshard) and the tower's in_channels as in_chans (which
    vLLM's Mimo_VLVisionConfig ignores, taking its default 3); and under
    the names transformers 4.52 writes, model.language_model. and
    model.visual. (vLLM's hf_to_vllm_mapper reads both namings)."""
    from ckpt_io import rename_prefixes, update_config
    make(out)
    rename_prefixes(out, [("model.", "model.language_model."), ("visual.", "model.visual.")])

    def release(c):
        c["architectures"] = ["MiMoV2ForCausalLM"]
        c["vision_config"]["in_chans"] = c["vision_config"].pop("in_channels")
    update_config(out, release)
