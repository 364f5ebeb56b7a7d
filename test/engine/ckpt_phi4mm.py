"""Phi-4-multimodal (Phi4MMForCausalLM, model_type phi4mm:
microsoft/Phi-4-multimodal-instruct, remote code), tiny, in its release's
layout as vLLM 0.32 reads it (model_executor/models/phi4mm.py, whose
hf_to_vllm_mapper renames it; vLLM no longer reads transformers'
Phi4MultimodalForCausalLM port and its names).

- The Phi-3 text model (fused qkv_proj and gate_up_proj) under model. as
  the release saves it with its two LoRA adapters merged into the graph by
  peft: each of qkv_proj, o_proj, gate_up_proj and down_proj is
  base_layer.weight beside lora_A.{speech,vision}.weight [r, in] and
  lora_B.{speech,vision}.weight [out, r].  vLLM drops every name holding
  "lora" and strips "base_layer." (it applies the adapters, which the
  release also ships as the folders vision-lora/ and speech-lora/, as LoRA
  at run time).  Tied embeddings, as the release.
- The image embedding under model.embed_tokens_extend.image_embed.: a
  SigLIP tower (img_processor., transformers' SiglipVisionModel) whose sizes
  vLLM hardcodes (siglip-so400m-patch14-448: 1152 wide, 27 layers, 16
  heads, 4304 MLP; get_navit_vision_model), so it cannot be made small:
  its 27 layers, of which vLLM builds 26 (img_processor null, as the
  release: layer_idx -2; vLLM's processing reads img_processor as the
  tower's name, so a dict giving another layer_idx fails there), no pooling
  head (the release has one; vLLM drops it); glb_GN, sub_GN and
  img_projection.0 and .2.  About 0.8 GB: FULL_ONLY.
- The audio encoder under model.embed_tokens_extend.audio_embed.: a
  Conformer of two blocks 64 wide (audio_processor.config), made by vLLM's
  own AudioEmbedding (phi4mm_audio.py, a port of the release's code with
  the release's names) and saved under the release's names
  (audio_projection.speech. and .vision., which vLLM holds as
  audio_projection. and audio_projection_for_vision.).

config.json carries the release's keys, with auto_map to a
configuration_phi4mm.py written beside it (transformers has no phi4mm
model type); the processor is a stand-in for the release's remote one
(phi4mm_processing.py), which vLLM only needs to start (the prompts are
text alone).  vocab 1000: the placeholder ids vLLM hardcodes
(200010, 200011) appear only in prompts with images or audio.

    make(out)
"""
import os

CONFIG_PY = '''"""Phi4MMConfig: the release's configuration_phi4mm.py keys
(Phi-4-multimodal-instruct), written for the wshard test checkpoints over
transformers' Phi3Config."""
from transformers import Phi3Config


class Phi4MMConfig(Phi3Config):
    model_type = "phi4mm"

    def __init__(self, embd_layer="default", img_processor=None, audio_processor=None,
                 vision_lora=None, speech_lora=None, **kwargs):
        self.embd_layer = embd_layer
        self.img_processor = img_processor
        self.audio_processor = audio_processor
        self.vision_lora = vision_lora
        self.speech_lora = speech_lora
        super().__init__(**kwargs)
'''

HIDDEN = 128
# vLLM's hardcoded SigLIP (phi4mm.py get_navit_vision_model)
SIGLIP = dict(hidden_size=1152, image_size=448, intermediate_size=4304,
              num_attention_heads=16, patch_size=14, num_hidden_layers=27,
              vision_use_head=False)
CONFORMER = {"activation": "swish",
             "activation_checkpointing": {"interval": 1, "module": "transformer",
                                          "offload": False},
             "attention_dim": 64, "attention_heads": 4, "batch_norm": False,
             "bias_in_glu": True, "causal": True, "chunk_size": -1, "cnn_layer_norm": True,
             "conv_activation": "swish", "conv_glu_type": "swish", "depthwise_multiplier": 1,
             "depthwise_seperable_out_channel": 64, "dropout_rate": 0.0,
             "encoder_embedding_config": {"input_size": 80}, "ext_pw_kernel_size": 1,
             "ext_pw_out_channel": 64, "input_layer": "nemo_conv", "input_size": 80,
             "kernel_size": 3, "left_chunk": 18, "linear_units": 128,
             "nemo_conv_settings": {"conv_channels": 64}, "num_blocks": 2,
             "relative_attention_bias_args": {"t5_bias_max_distance": 500, "type": "t5"},
             "time_reduction": 8}
EMBD_LAYER = {"audio_embd_layer": {"compression_rate": 8, "downsample_rate": 1,
                                   "embedding_cls": "audio",
                                   "enable_gradient_checkpointing": True,
                                   "projection_cls": "mlp", "use_conv_downsample": False,
                                   "use_qformer": False},
              "embedding_cls": "image_audio",
              "image_embd_layer": {"crop_size": 448, "embedding_cls": "tune_image",
                                   "enable_gradient_checkpointing": True,
                                   "hd_transform_order": "sub_glb",
                                   "image_token_compression_cls": "avg_pool_2d",
                                   "projection_cls": "mlp", "use_hd_transform": True,
                                   "with_learnable_separator": True}}
# the release's adapters: rank 320 (speech) and 256 (vision); here 8 and 4
LORA = {"speech": 8, "vision": 4}
# A stand-in for the release's processing_phi4mm.py (remote code):
# phi4mm_processing.py beside this file, written into the checkpoint.
PROCESSOR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "phi4mm_processing.py")
LORA_TARGETS = ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj")


def _audio_tensors():
    import types
    from vllm.model_executor.models.phi4mm_audio import AudioEmbedding
    cfg = types.SimpleNamespace(hidden_size=HIDDEN, vocab_size=1000,
                                audio_processor={"name": "cascades", "config": CONFORMER})
    a = AudioEmbedding(cfg, **EMBD_LAYER["audio_embd_layer"])
    out = {}
    for name, t in a.state_dict().items():
        if not hasattr(t, "shape") or name == "encoder.dev_type":
            continue
        name = name.replace("audio_projection_for_vision.", "audio_projection.vision.", 1) \
            if name.startswith("audio_projection_for_vision.") else \
            name.replace("audio_projection.", "audio_projection.speech.", 1)
        out["model.embed_tokens_extend.audio_embed." + name] = t
    return out


def make(out):
    import json
    import torch
    import transformers
    from ckpt_io import layer_shards, save_shards, write_release_config
    from make_ckpt import word_tokenizer
    cfg = transformers.Phi3Config(
        hidden_size=HIDDEN, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
        max_position_embeddings=4096, rope_theta=10000.0, rms_norm_eps=1e-5,
        hidden_act="silu", tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
        pad_token_id=0)
    torch.manual_seed(1270)
    text = transformers.Phi3ForCausalLM(cfg)
    tower = transformers.SiglipVisionModel(transformers.SiglipVisionConfig(**SIGLIP))
    g = torch.Generator().manual_seed(1271)
    tensors = {}
    with torch.no_grad():
        for name, p in text.state_dict().items():
            if name == "lm_head.weight":
                continue
            for t in LORA_TARGETS:
                if name.endswith("." + t + ".weight"):
                    base = name[:-len("weight")]
                    name = base + "base_layer.weight"
                    for k, r in LORA.items():
                        tensors[base + "lora_A.%s.weight" % k] = torch.randn(
                            r, p.shape[1], generator=g) * 0.02
                        tensors[base + "lora_B.%s.weight" % k] = torch.randn(
                            p.shape[0], r, generator=g) * 0.02
            tensors[name] = p
        img = "model.embed_tokens_extend.image_embed."
        for name, p in tower.state_dict().items():
            tensors[img + "img_processor." + name.removeprefix("vision_model.")] = p
        d = SIGLIP["hidden_size"]
        tensors[img + "glb_GN"] = torch.randn(1, 1, d, generator=g) * 0.02
        tensors[img + "sub_GN"] = torch.randn(1, 1, 1, d, generator=g) * 0.02
        for k, shape in (("0", (HIDDEN, d)), ("2", (HIDDEN, HIDDEN))):
            tensors[img + "img_projection.%s.weight" % k] = torch.randn(*shape, generator=g) * 0.02
            tensors[img + "img_projection.%s.bias" % k] = torch.randn(HIDDEN, generator=g) * 0.02
        tensors.update(_audio_tensors())
        for name, t in tensors.items():
            t = t.float()
            tensors[name] = (t + torch.randn(t.shape, generator=g) * 0.02).to(
                torch.bfloat16).contiguous()
    os.makedirs(out, exist_ok=True)
    save_shards(out, tensors, layer_shards(tensors, "model.embed_tokens.weight",
                                           cfg.num_hidden_layers))
    c = cfg.to_dict()
    for k in ("transformers_version", "architectures", "model_type", "auto_map", "dtype",
              "torch_dtype"):
        c.pop(k, None)
    c.update(architectures=["Phi4MMForCausalLM"], model_type="phi4mm",
             auto_map={"AutoConfig": "configuration_phi4mm.Phi4MMConfig"},
             torch_dtype="bfloat16", embd_layer=EMBD_LAYER,
             img_processor=None,
             audio_processor={"config": CONFORMER, "name": "cascades"},
             full_attn_mod=1, interpolate_factor=1, lm_head_bias=False, mlp_bias=False,
             partial_rotary_factor=0.75,
             speech_lora={"dp": 0.01, "layer": "((layers.*self_attn\\.(qkv|o)_proj)|"
                          "(layers.*mlp\\.(gate_up|down)_proj))",
                          "lora_alpha": 640, "r": LORA["speech"]},
             vision_lora={"dp": 0.0, "layer": "layers.*((self_attn\\.(qkv_proj|o_proj))|"
                          "(mlp\\.(gate_up|down)_proj))",
                          "lora_alpha": 512, "r": LORA["vision"]})
    write_release_config(out, c, {"configuration_phi4mm.py": CONFIG_PY})
    special = {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3}
    special.update({"<|image_%d|>" % (i + 1): 900 + i for i in range(4)})
    special.update({"<|audio_%d|>" % (i + 1): 910 + i for i in range(4)})
    tok = word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>")
    tok.save_pretrained(out)
    with open(os.path.join(out, "processing_phi4mm.py"), "w") as f:
        f.write(open(PROCESSOR).read())
    amap = {"AutoProcessor": "processing_phi4mm.Phi4MMProcessor"}
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump({"auto_map": amap, "processor_class": "Phi4MMProcessor"}, f, indent=2)
    tc = os.path.join(out, "tokenizer_config.json")
    t = json.load(open(tc))
    t.update(auto_map=amap, processor_class="Phi4MMProcessor")
    with open(tc, "w") as f:
        json.dump(t, f, indent=2)

if __name__ == "__main__":
    import sys
    make(sys.argv[1])
