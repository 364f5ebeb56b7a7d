"""NVIDIA's Nemotron-Parse (NemotronParseForConditionalGeneration:
nvidia/NVIDIA-Nemotron-Parse-v1.1, remote code), tiny, as vLLM 0.32 reads
it (model_executor/models/nemotron_parse.py, radio.py, whisper.py).

An encoder-decoder: the encoder is RADIO with a neck (RadioWithNeck), the
decoder an mBART decoder without positions (MBartDecoderNoPos), and the
head lm_head.  vLLM's neck has fixed widths (nemotron_parse.py:456-476:
conv1 from 1280 to 1024, sum_proj from 3840, three 1280-wide summaries),
so the tower is 1280 wide (vit_huge_patch16_224's width, the release's)
and the decoder's d_model 1024; each is one layer here, the tower's MLP 64
wide, the decoder's FFN 64, 1024 tokens (a multiple of 64: vLLM loads the
head with default_weight_loader, nemotron_parse.py:691, into a parameter
padded to 64).  The tower's tensors are transformers' NemotronH omni
model's RADIO as save_pretrained names it (radio_model.*), under
encoder.model_encoder.; the neck and decoder are drawn here under the
release's names (encoder.conv1 ..., decoder.layers.N.self_attn.q_proj
...).

config.json as the release writes it (encoder with RADIO's args, decoder
an mBART config, image_size), with a minimal configuration beside it, and
a stand-in processor (the release's is remote code) that resizes an image
to image_size and scales it to [0, 1]; a word-level tokenizer."""

CONFIG_PY = '''"""Nemotron-Parse's configuration, minimal, written for the wshard test
checkpoints: encoder (RADIO's args), decoder (mBART) and image_size."""
from transformers import MBartConfig, PretrainedConfig


class NemotronParseEncoderConfig(PretrainedConfig):
    model_type = "nemotron_parse_encoder"

    def __init__(self, args=None, patch_size=16, **kwargs):
        self.args = args or {}
        self.patch_size = patch_size
        super().__init__(**kwargs)


class NemotronParseConfig(PretrainedConfig):
    model_type = "nemotron_parse"
    is_composition = True

    def __init__(self, encoder=None, decoder=None, image_size=(64, 64), **kwargs):
        if not isinstance(encoder, PretrainedConfig):
            encoder = NemotronParseEncoderConfig(**(encoder or {}))
        if not isinstance(decoder, PretrainedConfig):
            decoder = MBartConfig(**(decoder or {}))
        self.encoder = encoder
        self.decoder = decoder
        self.image_size = list(image_size)
        super().__init__(**kwargs)
'''

PROCESSOR_PY = '''"""A stand-in for Nemotron-Parse's processor (remote code, which the wshard
test checkpoints cannot ship): images resized to image_size, scaled to
[0, 1] (vLLM's RADIO normalises them itself)."""
import numpy as np
import torch
from transformers.feature_extraction_utils import BatchFeature
from transformers.processing_utils import ProcessorMixin

SIZE = (64, 64)


class NemotronParseProcessor(ProcessorMixin):
    attributes = ["tokenizer"]
    tokenizer_class = "AutoTokenizer"

    def __init__(self, tokenizer=None, **kwargs):
        super().__init__(tokenizer)

    def __call__(self, text=None, images=None, **kwargs):
        kwargs.pop("return_tensors", None)
        out = {}
        if text is not None:
            out.update(self.tokenizer(text, **kwargs))
        if images is not None:
            if not isinstance(images, (list, tuple)):
                images = [images]
            px = [torch.from_numpy(np.asarray(im.convert("RGB").resize((SIZE[1], SIZE[0])),
                                              dtype=np.float32) / 255.0).permute(2, 0, 1)
                  for im in images]
            out["pixel_values"] = torch.stack(px)
        return BatchFeature(out, tensor_type="pt" if "pixel_values" in out else None)
'''

IMAGE = [64, 64]
ARGS = {"model": "vit_huge_patch16_224", "hidden_size": 1280, "num_hidden_layers": 1,
        "num_attention_heads": 16, "intermediate_size": 64, "cpe_max_size": 128,
        "register_multiple": 4, "cls_token_per_teacher": True,
        "teachers": [{"name": "t%d" % i, "use_summary": True} for i in range(3)]}
DECODER = {"d_model": 1024, "decoder_layers": 1, "decoder_attention_heads": 16,
           "decoder_ffn_dim": 64, "encoder_ffn_dim": 64, "encoder_layers": 1,
           "encoder_attention_heads": 16, "vocab_size": 1024, "activation_function": "gelu",
           "scale_embedding": True, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
           "decoder_start_token_id": 2, "max_position_embeddings": 512,
           "tie_word_embeddings": False}


def tower(g):
    """RADIO under the release's names: transformers' NemotronH omni model's
    tower, saved."""
    import tempfile
    import os
    import torch
    from safetensors.torch import load_file
    from transformers.models.nemotron_h_omni.configuration_nemotron_h_omni import (
        NemotronH_Omni_Reasoning_V3_Config)
    from transformers.models.nemotron_h_omni.modeling_nemotron_h_omni import (
        NemotronH_Omni_Reasoning_V3)
    text = dict(vocab_size=64, hidden_size=32, layers_block_type=["attention"],
                num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                intermediate_size=32, num_nextn_predict_layers=0, tie_word_embeddings=False)
    vision = dict(hidden_size=1280, num_hidden_layers=1, num_attention_heads=16,
                  mlp_ratio=0.05, patch_size=16, image_size=64, max_img_size=128,
                  num_cls_tokens=3, num_registers=1, video_temporal_patch_size=2,
                  summary_idxs=[0, 1, 2])
    cfg = NemotronH_Omni_Reasoning_V3_Config(
        text_config=text, vision_config=vision, audio_config=None,
        projector_hidden_size=48, vision_hidden_size=1280, force_image_size=64)
    torch.manual_seed(0)
    model = NemotronH_Omni_Reasoning_V3(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(torch.randn(p.shape, generator=g).to(p.dtype) * 0.02)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        t = load_file(os.path.join(tmp, "model.safetensors"))
    return {"encoder.model_encoder." + k[len("vision_model."):]: v for k, v in t.items()
            if k.startswith("vision_model.radio_model.") and "video_embedder" not in k}


def tensors(g):
    import torch
    from ckpt_io import noise
    D, F, V = DECODER["d_model"], DECODER["encoder_ffn_dim"], DECODER["vocab_size"]
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)

    def linear(sd, name, rows, cols, bias=True):
        sd[name + ".weight"] = rnd(rows, cols)
        if bias:
            sd[name + ".bias"] = rnd(rows)

    def norm(sd, name, width):
        sd[name + ".weight"] = rnd(width, base=1.0)
        sd[name + ".bias"] = rnd(width)

    sd = {"encoder.conv1.weight": rnd(1024, 1280, 1), "encoder.conv1.bias": rnd(1024),
          "encoder.conv2.weight": rnd(1024, 1024, 1, 4)}
    norm(sd, "encoder.layer_norm1", 1024)
    norm(sd, "encoder.layer_norm2", 1024)
    norm(sd, "encoder.layer_norm3", 1024)
    linear(sd, "encoder.sum_proj", 1024, 3840)
    sd["decoder.embed_tokens.weight"] = rnd(V, D)
    norm(sd, "decoder.layernorm_embedding", D)
    norm(sd, "decoder.layer_norm", D)
    for n in range(DECODER["decoder_layers"]):
        b = "decoder.layers.%d." % n
        for a in ("self_attn", "encoder_attn"):
            for p in ("q_proj", "k_proj", "v_proj", "out_proj"):
                linear(sd, b + a + "." + p, D, D)
            norm(sd, b + a + "_layer_norm", D)
        linear(sd, b + "fc1", F, D)
        linear(sd, b + "fc2", D, F)
        norm(sd, b + "final_layer_norm", D)
    sd["lm_head.weight"] = rnd(V, D)
    return sd


def make(out):
    import os
    import torch
    import transformers
    from ckpt_io import remote_processor, save_shards, write_release_config
    from make_ckpt import word_tokenizer
    g = torch.Generator().manual_seed(61)
    sd = tower(g)
    sd.update(tensors(g))
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if k.startswith("encoder.")),
              sorted(k for k in sd if not k.startswith("encoder."))]
    save_shards(out, sd, groups)
    c = {"architectures": ["NemotronParseForConditionalGeneration"],
         "model_type": "nemotron_parse",
         "auto_map": {"AutoConfig": "hf_nemotron_parse_config.NemotronParseConfig"},
         "encoder": {"args": dict(ARGS), "patch_size": 16},
         "decoder": dict(DECODER, model_type="mbart"),
         "image_size": IMAGE, "is_encoder_decoder": True,
         "decoder_start_token_id": 2, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    write_release_config(out, c, {"hf_nemotron_parse_config.py": CONFIG_PY,
                                  "hf_nemotron_parse_processor.py": PROCESSOR_PY})
    special = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    tcfg = transformers.PretrainedConfig(vocab_size=DECODER["vocab_size"])
    word_tokenizer(tcfg, special, "<pad>", "</s>", "<s>", "<unk>").save_pretrained(out)
    # the processor's module, written above beside the model's
    remote_processor(out, "hf_nemotron_parse_processor", "NemotronParseProcessor")


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
