"""AllenAI's Molmo2 (Molmo2ForConditionalGeneration, remote code), tiny, as
vLLM 0.32 reads it (model_executor/models/molmo2.py).

Neither transformers nor vLLM has Molmo2's modules under the release's
names, so the tensors are drawn here, of the shapes molmo2.py builds, under
the names its hf_to_vllm_mapper reads: the text model under
model.transformer. (wte.embedding and wte.new_embedding, blocks.N with
self_attn.att_proj (q, k, v stacked, with biases), attn_out, q_norm and
k_norm (olmo: over all heads), mlp.ff_proj (two halves) and ff_out,
attn_norm, ff_norm; ln_f) and lm_head; the vision backbone under
model.vision_backbone. (image_vit: patch_embedding, positional_embedding
and 2 resblocks of 64, 4 heads, attention.wq/wk/wv/wo and feed_forward.w1/w2
with biases, attention_norm, ffn_norm; image_pooling_2d wq/wk/wv/wo with
biases over both vit_layers' features; image_projector w1, w3, w2).

config.json: text_config, vit_config and adapter_config dicts, auto_map to
configuration_molmo2.py beside it, a minimal configuration for
trust_remote_code; a tokenizer that holds <|image|>, <|video|> and the
image and frame tokens (the embedding's new rows, as the releases'), and a
stand-in for the release's processor (AllenAI's remote code), torch and
numpy only: the crops, patches, pooling indices and grids of the keys and
shapes vLLM's Molmo2 processor reads (PROCESSOR_PY).  vLLM's start
processes a dummy image and video through it; the oracle's prompts include
a 56x84 image (a global crop and two overlapping crops)."""

CONFIG_PY = '''"""Molmo2's configuration, minimal, written for the wshard test
checkpoints: text, ViT and adapter sub-configs of the keys vLLM reads."""
from transformers import PretrainedConfig


class Molmo2SubConfig(PretrainedConfig):
    model_type = "molmo2_sub"

    def __init__(self, **kwargs):
        own = {k: kwargs.pop(k) for k in list(kwargs) if k not in PretrainedConfig().to_dict()}
        super().__init__(**kwargs)
        for k, v in own.items():
            setattr(self, k, v)


class Molmo2Config(PretrainedConfig):
    model_type = "molmo2"

    def __init__(self, text_config=None, vit_config=None, adapter_config=None, **kwargs):
        def sub(c):
            return c if isinstance(c, PretrainedConfig) else Molmo2SubConfig(**(c or {}))
        self.text_config = sub(text_config)
        self.vit_config = sub(vit_config)
        self.adapter_config = sub(adapter_config)
        super().__init__(**kwargs)
'''

PROCESSOR_PY = '''"""A stand-in for Molmo2's processor (AllenAI's remote code, which the
wshard test checkpoints cannot ship), torch and numpy only: what vLLM
0.32's Molmo2 multimodal processor (molmo2.py) reads of it.  An image is
one global crop (resized to the crop size) and a tiling of overlapping
crops (select_tiling as Molmo2's), each cut into patches, with the indices
of the patches each pooled token pools (image_token_pooling: the global
crop's rows, then the tiling's, its overlaps' margins cut as Molmo2's) and
image_grids (the global and the tiled pooled grids); a video's frames are
one crop each (video_token_pooling, video_grids: frames, rows, columns).
Its input_ids are the text's own: vLLM drops them and expands the
placeholders itself."""
import numpy as np
import torch
from types import SimpleNamespace

from transformers.feature_extraction_utils import BatchFeature
from transformers.processing_utils import ProcessorMixin


def select_tiling(height, width, patch_size, max_num):
    tilings = sorted([(i, j) for i in range(1, max_num + 1) for j in range(1, max_num + 1)
                      if i * j <= max_num], key=lambda x: (x[0] * x[1], x[0]))
    res = np.array(tilings, dtype=np.int32) * patch_size
    scale = (res.astype(np.float32) / np.array([height, width], dtype=np.float32)).min(-1)
    ix = scale.argmax() if (scale < 1).all() else np.where(scale < 1.0, 10e9, scale).argmin()
    return tilings[ix]


def resize(px, h, w):
    """(H, W, 3) uint8 to (h, w, 3) in [-1, 1]."""
    t = torch.as_tensor(np.array(px)).permute(2, 0, 1)[None].float() / 255.0
    t = torch.nn.functional.interpolate(t, size=(h, w), mode="bilinear", align_corners=False)
    return (t[0].permute(1, 2, 0) - 0.5) / 0.5


def patches(crop, p):
    """(h, w, 3) to (h/p * w/p, p*p*3), rows of patches in turn."""
    h, w = crop.shape[:2]
    return crop.reshape(h // p, p, w // p, p, 3).permute(0, 2, 1, 3, 4).reshape(-1, p * p * 3)


def pool(idx, ph, pw):
    """(H, W) patch indices to (rows*cols, ph*pw), padded with -1."""
    H, W = idx.shape
    out = -np.ones(((H + ph - 1) // ph * ph, (W + pw - 1) // pw * pw), dtype=np.int64)
    out[:H, :W] = idx
    r, c = out.shape[0] // ph, out.shape[1] // pw
    return out.reshape(r, ph, c, pw).transpose(0, 2, 1, 3).reshape(r * c, ph * pw)


class NAME(ProcessorMixin):
    attributes = ["tokenizer"]
    tokenizer_class = "AutoTokenizer"

    def __init__(self, tokenizer=None, **kwargs):
        super().__init__(tokenizer)
        sizes = dict(size={"height": 56, "width": 56}, patch_size=14, pooling_size=[2, 2])
        self.image_processor = SimpleNamespace(overlap_margins=[1, 1], max_crops=2, **sizes)
        self.video_processor = SimpleNamespace(num_frames=2, frame_sample_mode="uniform_last_frame",
                                               max_fps=2, sampling_fps=2, **sizes)
        self.use_single_crop_col_tokens = None
        self.use_single_crop_start_token = True
        self.image_use_col_tokens = True
        self.video_use_col_tokens = False
        self.use_frame_special_tokens = True

    def image(self, image):
        ip = self.image_processor
        px = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image)
        crop, p = ip.size["height"], ip.patch_size
        m0, m1 = ip.overlap_margins
        cp = crop // p
        win = (cp - m0 - m1) * p
        th, tw = select_tiling(px.shape[0] - p * (m0 + m1), px.shape[1] - p * (m0 + m1),
                               win, ip.max_crops)
        crops = [patches(resize(px, crop, crop), p)]
        big = resize(px, th * win + p * (m0 + m1), tw * win + p * (m0 + m1))
        wp = win // p
        idx = -np.ones((th * wp + m0 + m1, tw * wp + m0 + m1), dtype=np.int64)
        for i in range(th):
            for j in range(tw):
                n = len(crops)
                crops.append(patches(big[i * win:i * win + crop, j * win:j * win + crop], p))
                r0, r1 = (m0 if i else 0), (cp - m1 if i < th - 1 else cp)
                c0, c1 = (m0 if j else 0), (cp - m1 if j < tw - 1 else cp)
                a = np.arange(cp * cp).reshape(cp, cp) + n * cp * cp
                idx[i * wp + r0:i * wp + r1, j * wp + c0:j * wp + c1] = a[r0:r1, c0:c1]
        ph, pw = ip.pooling_size
        low = pool(np.arange(cp * cp).reshape(cp, cp), ph, pw)
        high = pool(idx, ph, pw)
        grid = [(cp + ph - 1) // ph, (cp + pw - 1) // pw,
                (idx.shape[0] + ph - 1) // ph, (idx.shape[1] + pw - 1) // pw]
        return torch.stack(crops), np.concatenate([low, high]), grid

    def video(self, frames):
        vp = self.video_processor
        crop, p = vp.size["height"], vp.patch_size
        cp = crop // p
        ph, pw = vp.pooling_size
        px = [patches(resize(f, crop, crop), p) for f in np.asarray(frames)]
        pooling = [pool(np.arange(cp * cp).reshape(cp, cp) + n * cp * cp, ph, pw)
                   for n in range(len(px))]
        return torch.stack(px), np.concatenate(pooling), \\
            [len(px), (cp + ph - 1) // ph, (cp + pw - 1) // pw]

    def __call__(self, text=None, images=None, videos=None, video_metadata=None,
                 do_sample_frames=False, return_tensors=None, **kwargs):
        if do_sample_frames:
            raise ValueError("the wshard test processor samples no frames")
        if isinstance(text, (list, tuple)):
            text = text[0]
        out = dict(self.tokenizer([text or ""], return_tensors="pt"))
        if images is not None and not isinstance(images, (list, tuple)):
            images = [images]
        if images:
            got = [self.image(im) for im in images]
            out["pixel_values"] = torch.cat([g[0] for g in got])
            out["image_token_pooling"] = torch.as_tensor(np.concatenate([g[1] for g in got]))
            out["image_grids"] = torch.tensor([g[2] for g in got])
            out["image_num_crops"] = torch.tensor([len(g[0]) for g in got])
        if videos:
            got = [self.video(v) for vs in videos for v in (vs if isinstance(vs, list) else [vs])]
            out["pixel_values_videos"] = torch.cat([g[0] for g in got])
            out["video_token_pooling"] = torch.as_tensor(np.concatenate([g[1] for g in got]))
            out["video_grids"] = torch.tensor([g[2] for g in got])
        return BatchFeature(out)
'''

# the image and frame tokens (past vocab_size: the embedding's new rows) and
# the config keys that name them
IMAGE_TOKENS = {"<im_patch>": 1000, "<im_start>": 1001, "<im_end>": 1002, "<im_col>": 1003,
                "<low_res_im_start>": 1004, "<frame_start>": 1005, "<frame_end>": 1006,
                "<im_low>": 1007}
CONFIG_TOKENS = {"image_patch_id": "<im_patch>", "image_start_token_id": "<im_start>",
                 "image_end_token_id": "<im_end>", "image_col_id": "<im_col>",
                 "low_res_image_start_token_id": "<low_res_im_start>",
                 "frame_start_token_id": "<frame_start>", "frame_end_token_id": "<frame_end>",
                 "image_low_res_id": "<im_low>"}
TEXT = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "vocab_size": 1000, "additional_vocab_size": 128, "qkv_bias": True,
        "num_hidden_layers": 2, "intermediate_size": 512, "hidden_act": "silu",
        "max_position_embeddings": 512, "rope_theta": 1000000.0, "use_qk_norm": True,
        "qk_norm_type": "olmo", "layer_norm_eps": 1e-6, "norm_after": False,
        "rope_scaling_layers": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}
VIT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
       "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
       "image_default_input_size": [56, 56], "image_patch_size": 14, "image_num_pos": 16}
ADAPTER = {"vit_layers": [-1, -2], "pooling_attention_mask": False, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
           "hidden_act": "silu", "intermediate_size": 128, "text_hidden_size": 256}


def shapes():
    """{name: shape} of the release's tensors."""
    T, V, A = TEXT, VIT, ADAPTER
    H, hd = T["hidden_size"], T["head_dim"]
    q, kv = T["num_attention_heads"] * hd, T["num_key_value_heads"] * hd
    s = {"model.transformer.wte.embedding": (T["vocab_size"], H),
         "model.transformer.wte.new_embedding": (T["additional_vocab_size"], H),
         "model.transformer.ln_f.weight": (H,), "lm_head.weight": (T["vocab_size"], H)}
    for n in range(T["num_hidden_layers"]):
        b = "model.transformer.blocks.%d." % n
        s.update({b + "attn_norm.weight": (H,), b + "ff_norm.weight": (H,),
                  b + "self_attn.att_proj.weight": (q + 2 * kv, H),
                  b + "self_attn.att_proj.bias": (q + 2 * kv,),
                  b + "self_attn.attn_out.weight": (H, q),
                  b + "self_attn.q_norm.weight": (q,), b + "self_attn.k_norm.weight": (kv,),
                  b + "mlp.ff_proj.weight": (2 * T["intermediate_size"], H),
                  b + "mlp.ff_out.weight": (H, T["intermediate_size"])})
    W, P = V["hidden_size"], V["image_patch_size"]
    vb = "model.vision_backbone."
    s.update({vb + "image_vit.positional_embedding": (V["image_num_pos"], W),
              vb + "image_vit.patch_embedding.weight": (W, P * P * 3),
              vb + "image_vit.patch_embedding.bias": (W,)})
    vq, vkv = V["num_attention_heads"] * V["head_dim"], V["num_key_value_heads"] * V["head_dim"]
    for n in range(V["num_hidden_layers"]):
        b = vb + "image_vit.transformer.resblocks.%d." % n
        for norm in ("attention_norm", "ffn_norm"):
            s.update({b + norm + ".weight": (W,), b + norm + ".bias": (W,)})
        for w, rows in (("wq", vq), ("wk", vkv), ("wv", vkv)):
            s.update({b + "attention.%s.weight" % w: (rows, W), b + "attention.%s.bias" % w: (rows,)})
        s.update({b + "attention.wo.weight": (W, vq), b + "attention.wo.bias": (W,),
                  b + "feed_forward.w1.weight": (V["intermediate_size"], W),
                  b + "feed_forward.w1.bias": (V["intermediate_size"],),
                  b + "feed_forward.w2.weight": (W, V["intermediate_size"]),
                  b + "feed_forward.w2.bias": (W,)})
    pool = W * len(A["vit_layers"])
    aq, akv = A["num_attention_heads"] * A["head_dim"], A["num_key_value_heads"] * A["head_dim"]
    p = vb + "image_pooling_2d."
    s.update({p + "wq.weight": (aq, pool), p + "wq.bias": (aq,), p + "wk.weight": (akv, pool),
              p + "wk.bias": (akv,), p + "wv.weight": (akv, pool), p + "wv.bias": (akv,),
              p + "wo.weight": (A["hidden_size"], aq), p + "wo.bias": (A["hidden_size"],)})
    j = vb + "image_projector."
    s.update({j + "w1.weight": (A["intermediate_size"], A["hidden_size"]),
              j + "w3.weight": (A["intermediate_size"], A["hidden_size"]),
              j + "w2.weight": (A["text_hidden_size"], A["intermediate_size"])})
    return s


def make(out):
    import os
    import torch
    import transformers
    from ckpt_io import save_shards, write_release_config
    from make_ckpt import word_tokenizer
    torch.manual_seed(1234)
    sd = {}
    for k, shape in shapes().items():
        base = 1.0 if k.endswith("norm.weight") else 0.0
        std = 0.02 if k.endswith(("norm.weight", "bias")) or "embedding" in k else \
            shape[-1] ** -0.5
        sd[k] = (base + torch.randn(shape) * std).to(torch.bfloat16)
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if k.startswith("model.vision_backbone.")),
              sorted(k for k in sd if not k.startswith("model.vision_backbone."))]
    save_shards(out, sd, groups)
    c = {"architectures": ["Molmo2ForConditionalGeneration"], "model_type": "molmo2",
         "auto_map": {"AutoConfig": "configuration_molmo2.Molmo2Config"},
         "torch_dtype": "bfloat16", "tie_word_embeddings": False,
         # the image and frame tokens: the embedding's new rows, the
         # tokenizer's added tokens (as the releases')
         **{k: IMAGE_TOKENS[t] for k, t in CONFIG_TOKENS.items()},
         "text_config": dict(TEXT, bos_token_id=2, eos_token_id=1, pad_token_id=0),
         "vit_config": dict(VIT), "adapter_config": dict(ADAPTER)}
    write_release_config(out, c, {"configuration_molmo2.py": CONFIG_PY})
    tcfg = transformers.LlamaConfig(vocab_size=TEXT["vocab_size"])
    special = dict({"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<|image|>": 994,
                    "<|video|>": 995}, **IMAGE_TOKENS)
    word_tokenizer(tcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    write_processor(out)


def write_processor(out):
    """Writes processing_molmo2.py with the stand-in processor into OUT,
    named by processor_config.json's and tokenizer_config.json's auto_map."""
    from ckpt_io import remote_processor
    remote_processor(out, "processing_molmo2", "Molmo2Processor",
                     PROCESSOR_PY.replace("NAME", "Molmo2Processor"))


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
