"""LLaVA-OneVision-2 (LlavaOnevision2ForConditionalGeneration, lmms-lab's
releases, remote code), tiny, as vLLM 0.32 reads it
(model_executor/models/llava_onevision2.py).

Neither transformers 5.19 nor vLLM 0.32 holds the model type: config.json
is the release's (model_type llava_onevision2, a qwen3 text_config and the
OneVision encoder's vision_config, the image and vision token ids at the
top) with a minimal configuration_llava_onevision2.py beside it.  The
tensors under the release's names, which vLLM's mapper (:2028-2035) reads:
the Qwen3 text model (transformers' Qwen3ForCausalLM) under
model.language_model. and lm_head.; the tower under model.visual.,
drawn here: embeddings.patch_embedding (a Conv2d without bias),
layernorm_pre, encoder.layers.N (layer_norm1/2, the fused self_attn.qkv
and self_attn.proj with biases, mlp.fc1/fc2) and the merger (ln_q, mlp.0,
mlp.2): 2 layers of 64, 2 heads of 32 (the 3-D rotary table splits half a
head 4:6:6, so a head is a multiple of 32), an MLP of 128, 14-pixel
patches merged 2x2.

vLLM loads the release's processor by its module names
(processing_llava_onevision2.LlavaOnevision2Processor and
video_processing_llava_onevision2.LlavaOnevision2VideoProcessor, :145-154)
beside a slow Qwen2VLImageProcessor of preprocessor_config.json: the
stand-ins below process an image as the release's does for a still image
(Qwen2-VL's patches, one frame, in 2x2 merge blocks, with each patch's
(t, h, w) as patch_positions, and the image pad expanded a merged patch
each); they process no video.  56x56 images: 16 patches, 4 image tokens."""
import os

CONFIG_PY = '''"""LLaVA-OneVision-2's configuration, minimal, written for the wshard
test checkpoints: a Qwen3 text_config and the OneVision encoder's
vision_config."""
from transformers import Qwen3Config
from transformers.configuration_utils import PretrainedConfig


class LlavaOnevision2VisionConfig(PretrainedConfig):
    model_type = "llava_onevision2"
    base_config_key = "vision_config"


class LlavaOnevision2Config(PretrainedConfig):
    model_type = "llava_onevision2"
    sub_configs = {"vision_config": LlavaOnevision2VisionConfig, "text_config": Qwen3Config}

    def __init__(self, text_config=None, vision_config=None, **kwargs):
        if not isinstance(text_config, PretrainedConfig):
            text_config = Qwen3Config(**(text_config or {}))
        if not isinstance(vision_config, PretrainedConfig):
            vision_config = LlavaOnevision2VisionConfig(**(vision_config or {}))
        self.text_config = text_config
        self.vision_config = vision_config
        super().__init__(**kwargs)
'''

PROCESSOR_PY = '''"""A stand-in for LLaVA-OneVision-2's processor (lmms-lab's remote code,
which the wshard test checkpoints cannot ship): a bare class, as the
release's is, built by vLLM from its parts.  A still image as the
release's image branch processes it: the Qwen2-VL image processor's
patches (one frame, in merge blocks), each patch's (t, h, w) as
patch_positions, each image pad expanded to a merged patch a token.  It
processes no video."""
import torch
from transformers import BatchFeature


class LlavaOnevision2Processor:
    def __init__(self, image_processor=None, tokenizer=None, video_processor=None,
                 codec_config=None, **kwargs):
        self.image_processor = image_processor
        self.tokenizer = tokenizer
        self.video_processor = video_processor
        self.image_token = "<|image_pad|>"

    def __call__(self, text=None, images=None, videos=None, return_tensors=None, **kwargs):
        if videos:
            raise ValueError("the wshard test processor processes no video")
        data = {}
        text = [text] if isinstance(text, str) else list(text or [""])
        if images:
            images = images if isinstance(images, (list, tuple)) else [images]
            out = self.image_processor(images=list(images), return_tensors="pt")
            grid = out["image_grid_thw"]
            m = self.image_processor.merge_size
            data["pixel_values"] = out["pixel_values"]
            data["image_grid_thw"] = grid
            data["patch_positions"] = torch.cat([positions(t, h, w, m)
                                                 for t, h, w in grid.tolist()])
            counts = [t * h * w // (m * m) for t, h, w in grid.tolist()]
            i = 0
            for j, s in enumerate(text):
                parts = s.split(self.image_token)
                s = parts[0]
                for p in parts[1:]:
                    s += "<|placeholder|>" * counts[i] + p
                    i += 1
                text[j] = s.replace("<|placeholder|>", self.image_token)
        enc = self.tokenizer(text, return_tensors=return_tensors)
        data.update(enc)
        return BatchFeature(data, tensor_type=return_tensors)


def positions(t, h, w, m):
    """Each patch's (t, h, w), in the image processor's order: frames, then
    merge blocks by rows, then the m x m patches of a block by rows."""
    tt = torch.arange(t).view(t, 1, 1, 1, 1).expand(t, h // m, w // m, m, m)
    hh = (torch.arange(h // m).view(1, -1, 1, 1, 1) * m
          + torch.arange(m).view(1, 1, 1, m, 1)).expand(t, h // m, w // m, m, m)
    ww = (torch.arange(w // m).view(1, 1, -1, 1, 1) * m
          + torch.arange(m).view(1, 1, 1, 1, m)).expand(t, h // m, w // m, m, m)
    return torch.stack([tt, hh, ww], -1).reshape(-1, 3)
'''

VIDEO_PROCESSOR_PY = '''"""A stand-in for LLaVA-OneVision-2's video processor (lmms-lab's remote
code): vLLM builds one beside the processor; the wshard tests process no
video."""


class LlavaOnevision2VideoProcessor:
    def __init__(self, image_processor=None, **kwargs):
        self.image_processor = image_processor
        for k, v in kwargs.items():
            setattr(self, k, v)
'''

VISION = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 2, "num_channels": 3, "image_size": 56, "patch_size": 14,
          "hidden_act": "gelu", "layer_norm_eps": 1e-6, "layer_norm_type": "layer_norm",
          "rope_theta": 10000.0, "use_head": False, "out_hidden_size": 256,
          "spatial_merge_size": 2, "temporal_patch_size": 1, "frame_windows_size": 4,
          "use_patch_position_encoding": False, "model_type": "llava_onevision2"}
TOKENS = {"image_token_id": 999, "video_token_id": 998,
          "vision_start_token_id": 997, "vision_end_token_id": 996}


def _tower(g, dtype, hidden_text):
    from ckpt_io import noise
    v = VISION
    h, i = v["hidden_size"], v["intermediate_size"]
    m = h * v["spatial_merge_size"] ** 2
    rnd = noise(g, s=0.02, dtype=dtype)
    sd = {"model.visual.embeddings.patch_embedding.weight":
          rnd(h, v["num_channels"], v["patch_size"], v["patch_size"]),
          "model.visual.layernorm_pre.weight": rnd(h, base=1.0),
          "model.visual.layernorm_pre.bias": rnd(h)}
    for n in range(v["num_hidden_layers"]):
        b = "model.visual.encoder.layers.%d." % n
        for ln in ("layer_norm1", "layer_norm2"):
            sd[b + ln + ".weight"] = rnd(h, base=1.0)
            sd[b + ln + ".bias"] = rnd(h)
        sd[b + "self_attn.qkv.weight"] = rnd(3 * h, h)
        sd[b + "self_attn.qkv.bias"] = rnd(3 * h)
        sd[b + "self_attn.proj.weight"] = rnd(h, h)
        sd[b + "self_attn.proj.bias"] = rnd(h)
        sd[b + "mlp.fc1.weight"] = rnd(i, h)
        sd[b + "mlp.fc1.bias"] = rnd(i)
        sd[b + "mlp.fc2.weight"] = rnd(h, i)
        sd[b + "mlp.fc2.bias"] = rnd(h)
    b = "model.visual.merger."
    sd[b + "ln_q.weight"] = rnd(h, base=1.0)
    sd[b + "ln_q.bias"] = rnd(h)
    sd[b + "mlp.0.weight"] = rnd(m, m)
    sd[b + "mlp.0.bias"] = rnd(m)
    sd[b + "mlp.2.weight"] = rnd(hidden_text, m)
    sd[b + "mlp.2.bias"] = rnd(hidden_text)
    return sd


def make(out, tied=False):
    import json
    import torch
    import transformers
    from ckpt_io import module_tensors, save_shards, write_release_config
    from make_ckpt import COMMON, word_tokenizer
    tcfg = transformers.Qwen3Config(**dict(COMMON, tie_word_embeddings=tied, bos_token_id=2,
                                           eos_token_id=1, pad_token_id=0))
    torch.manual_seed(1234)
    sd = module_tensors({"lm": transformers.Qwen3ForCausalLM(tcfg)})
    sd = {("model.language_model." + k[len("lm.model."):] if k.startswith("lm.model.")
           else k[len("lm."):]): t for k, t in sd.items()}
    if tied:
        # (transformers' tied Qwen3ForCausalLM has no lm_head parameter)
        sd.pop("lm_head.weight", None)
    g = torch.Generator().manual_seed(31)
    sd.update(_tower(g, torch.bfloat16, tcfg.hidden_size))
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if k.startswith("model.visual.")),
              sorted(k for k in sd if not k.startswith("model.visual."))]
    save_shards(out, sd, groups)
    text = dict(tcfg.to_dict(), model_type="qwen3", torch_dtype="bfloat16")
    c = {"architectures": ["LlavaOnevision2ForConditionalGeneration"],
         "model_type": "llava_onevision2",
         "auto_map": {"AutoConfig": "configuration_llava_onevision2.LlavaOnevision2Config"},
         "torch_dtype": "bfloat16", "text_config": text, "vision_config": dict(VISION),
         **TOKENS}
    write_release_config(out, c, {"configuration_llava_onevision2.py": CONFIG_PY,
                                  "processing_llava_onevision2.py": PROCESSOR_PY,
                                  "video_processing_llava_onevision2.py": VIDEO_PROCESSOR_PY})
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|vision_start|>": TOKENS["vision_start_token_id"],
               "<|vision_end|>": TOKENS["vision_end_token_id"],
               "<|image_pad|>": TOKENS["image_token_id"],
               "<|video_pad|>": TOKENS["video_token_id"]}
    word_tokenizer(tcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    px = 56 * 56
    transformers.Qwen2VLImageProcessor(
        size={"shortest_edge": px, "longest_edge": px}, min_pixels=px, max_pixels=px,
        patch_size=14, merge_size=2, temporal_patch_size=1).save_pretrained(out)
    with open(os.path.join(out, "preprocessor_config.json")) as f:
        assert json.load(f)["temporal_patch_size"] == 1


def make_tied(out):
    """The same with text_config.tie_word_embeddings: no lm_head."""
    make(out, tied=True)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
