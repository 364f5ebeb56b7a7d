"""AllenAI's Molmo (MolmoForCausalLM: Molmo-7B-D, Molmo-7B-O, MolmoE-1B
releases, remote code), tiny text model, as vLLM 0.32 reads it
(model_executor/models/molmo.py).

vLLM builds the vision backbone from VisionBackboneConfig's defaults
(molmo.py:1331), never from config.json: a ViT of 23 layers of 1024 (16
heads, MLP 4096, 577 positions with the class token, 336-pixel crops of
14-pixel patches), the 2x2 image_pooling_2d over two ViT layers' features
(2048) and the image_projector; the test checkpoint's backbone is that
size (283M parameters), its text model tiny.  Neither transformers nor vLLM
has Molmo's modules under the release's names, so the tensors are drawn
here, of the shapes molmo.py builds, under the names its
hf_to_vllm_mapper reads: the text model under model.transformer.
(wte.embedding and wte.new_embedding, blocks.N with att_proj (q, k, v
stacked, with biases), attn_out, ff_proj (two halves) and ff_out,
attn_norm, ff_norm; ln_f; ff_out, the lm_head) and the backbone under
model.vision_backbone. (image_vit: class_embedding, positional_embedding,
patch_embedding, pre_ln, resblocks with attention.wq/wk/wv/wo and
feed_forward.w1/w2 with biases, attention_norm, ffn_norm;
image_pooling_2d wq/wk/wv/wo with biases; image_projector w1, w3, w2;
pad_embed).

config.json: the text keys at the top, auto_map to configuration_molmo.py
beside it (a minimal configuration for trust_remote_code), a tokenizer
that holds the image tokens past vocab_size (the embedding's new rows, as
the releases'), and a stand-in for the release's processor (AllenAI's
remote code), torch and numpy only, of one crop at most (max_crops 1: a
global crop and one tile, 144 tokens each): vLLM's start processes a
dummy image through it, and the oracle's prompts include a 336x336 image."""

CONFIG_PY = '''"""Molmo's configuration, minimal, written for the wshard test
checkpoints: the text keys vLLM reads."""
from transformers import PretrainedConfig


class MolmoConfig(PretrainedConfig):
    model_type = "molmo"
'''

PROCESSOR_PY = '''"""A stand-in for Molmo's processor (AllenAI's remote code, which the
wshard test checkpoints cannot ship), torch and numpy only: what vLLM 0.32's
Molmo multimodal processor (molmo.py) reads of it, for at most one tile
(max_crops 1): get_tokens_input, and process, which prepends
<|endoftext|> and makes an image a global crop and one tile of 336 pixels
(patches of 14), with image_masks and image_input_idx (the global crop's
12x12 pooled tokens, then the tile's, in the prompt's order)."""
import numpy as np
import torch
from types import SimpleNamespace

from transformers.feature_extraction_utils import BatchFeature
from transformers.processing_utils import ProcessorMixin


def crop(px, size, p):
    t = torch.as_tensor(np.array(px)).permute(2, 0, 1)[None].float() / 255.0
    t = torch.nn.functional.interpolate(t, size=(size, size), mode="bilinear",
                                        align_corners=False)
    t = (t[0].permute(1, 2, 0) - 0.5) / 0.5
    return t.reshape(size // p, p, size // p, p, 3).permute(0, 2, 1, 3, 4).reshape(-1, p * p * 3)


class MolmoProcessor(ProcessorMixin):
    attributes = ["tokenizer"]
    tokenizer_class = "AutoTokenizer"

    def __init__(self, tokenizer=None, **kwargs):
        super().__init__(tokenizer)
        self.image_processor = SimpleNamespace(
            max_crops=1, overlap_margins=[4, 4], base_image_input_size=[336, 336],
            image_patch_size=14, image_token_length_w=12, image_token_length_h=12)

    def get_tokens_input(self, prompt, message_format=None, always_start_with_space=False):
        if always_start_with_space:
            prompt = " " + prompt
        return self.tokenizer.encode(prompt, add_special_tokens=False)

    def process(self, text=None, images=None, tokens=None, return_tensors=None, **kwargs):
        if tokens is None:
            tokens = self.get_tokens_input(text or "", always_start_with_space=True)
        bos = self.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        out = {"input_ids": torch.tensor([bos] + list(tokens), dtype=torch.long)}
        if images is not None and not isinstance(images, (list, tuple)):
            images = [images]
        if images:
            ip = self.image_processor
            size, p = ip.base_image_input_size[0], ip.image_patch_size
            n = ip.image_token_length_w * ip.image_token_length_h
            crops, idx = [], []
            for im in images:
                px = np.asarray(im.convert("RGB") if hasattr(im, "convert") else im)
                for k in range(2):
                    crops.append(crop(px, size, p))
                    idx.append(torch.arange(n) + k * n)
            out["images"] = torch.stack(crops)
            out["image_masks"] = torch.ones(len(crops), crops[0].shape[0])
            out["image_input_idx"] = torch.stack(idx)
        return BatchFeature(out)
'''

TEXT = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000, "embedding_size": 1024, "qkv_bias": True,
        "num_hidden_layers": 2, "intermediate_size": 1024, "max_position_embeddings": 1024,
        "attention_layer_norm": False, "layer_norm_type": "rms", "layer_norm_eps": 1e-6,
        "norm_after": False, "weight_tying": False, "rope_theta": 1000000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}
# vLLM's VisionBackboneConfig (molmo.py:115): not read from config.json
VIT = {"emb": 1024, "heads": 16, "layers": 23, "mlp": 4096, "pos": 577, "patch": 14}
IMAGE_TOKENS = {"<im_patch>": 1000, "<im_col>": 1001, "<im_start>": 1002, "<im_end>": 1003}


def shapes():
    """{name: shape} of the release's tensors."""
    T, V = TEXT, VIT
    H = T["hidden_size"]
    hd = H // T["num_attention_heads"]
    q, kv = H, T["num_key_value_heads"] * hd
    s = {"model.transformer.wte.embedding": (T["embedding_size"], H),
         "model.transformer.wte.new_embedding": (128, H),
         "model.transformer.ln_f.weight": (H,),
         "model.transformer.ff_out.weight": (T["embedding_size"], H)}
    for n in range(T["num_hidden_layers"]):
        b = "model.transformer.blocks.%d." % n
        s.update({b + "attn_norm.weight": (H,), b + "ff_norm.weight": (H,),
                  b + "att_proj.weight": (q + 2 * kv, H), b + "att_proj.bias": (q + 2 * kv,),
                  b + "attn_out.weight": (H, q),
                  b + "ff_proj.weight": (T["intermediate_size"], H),
                  b + "ff_out.weight": (H, T["intermediate_size"] // 2)})
    W, P, M = V["emb"], V["patch"], V["mlp"]
    vb = "model.vision_backbone."
    s.update({vb + "image_vit.class_embedding": (W,),
              vb + "image_vit.positional_embedding": (V["pos"], W),
              vb + "image_vit.patch_embedding.weight": (W, P * P * 3),
              vb + "image_vit.pre_ln.weight": (W,), vb + "image_vit.pre_ln.bias": (W,),
              vb + "pad_embed": (2, 2 * W)})
    for n in range(V["layers"]):
        b = vb + "image_vit.transformer.resblocks.%d." % n
        for norm in ("attention_norm", "ffn_norm"):
            s.update({b + norm + ".weight": (W,), b + norm + ".bias": (W,)})
        for w in ("wq", "wk", "wv", "wo"):
            s.update({b + "attention.%s.weight" % w: (W, W), b + "attention.%s.bias" % w: (W,)})
        s.update({b + "feed_forward.w1.weight": (M, W), b + "feed_forward.w1.bias": (M,),
                  b + "feed_forward.w2.weight": (W, M), b + "feed_forward.w2.bias": (W,)})
    p = vb + "image_pooling_2d."
    for w in ("wq", "wk", "wv"):
        s.update({p + w + ".weight": (W, 2 * W), p + w + ".bias": (W,)})
    s.update({p + "wo.weight": (W, W), p + "wo.bias": (W,)})
    j = vb + "image_projector."
    half = T["intermediate_size"] // 2
    s.update({j + "w1.weight": (half, W), j + "w3.weight": (half, W),
              j + "w2.weight": (H, half)})
    return s


def make(out):
    import os
    import torch
    import transformers
    from ckpt_io import remote_processor, save_shards, write_release_config
    from make_ckpt import word_tokenizer
    torch.manual_seed(1234)
    sd = {}
    for k, shape in shapes().items():
        base = 1.0 if k.endswith(("norm.weight", "ln.weight", "ln_f.weight")) else 0.0
        std = 0.02 if base or k.endswith("bias") or "embed" in k else shape[-1] ** -0.5
        sd[k] = (base + torch.randn(shape) * std).to(torch.bfloat16)
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if k.startswith("model.vision_backbone.")),
              sorted(k for k in sd if not k.startswith("model.vision_backbone."))]
    save_shards(out, sd, groups)
    c = dict(TEXT, architectures=["MolmoForCausalLM"], model_type="molmo",
             auto_map={"AutoConfig": "configuration_molmo.MolmoConfig"},
             torch_dtype="bfloat16", tie_word_embeddings=False,
             bos_token_id=None, eos_token_id=1, pad_token_id=0)
    write_release_config(out, c, {"configuration_molmo.py": CONFIG_PY})
    tcfg = transformers.LlamaConfig(vocab_size=TEXT["vocab_size"])
    special = dict({"<pad>": 0, "<|endoftext|>": 1, "<unk>": 3}, **IMAGE_TOKENS)
    word_tokenizer(tcfg, special, "<pad>", "<|endoftext|>", None, "<unk>").save_pretrained(out)
    remote_processor(out, "processing_molmo", "MolmoProcessor", PROCESSOR_PY)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
