"""Kimi-VL (KimiVLForConditionalGeneration, model_type kimi_vl, remote code:
moonshotai/Kimi-VL-A3B-Instruct, -Thinking, -Thinking-2506), tiny, as vLLM
0.32 reads it (model_executor/models/kimi_vl.py, moonvit.py, its own
transformers_utils/configs/kimi_vl.py and moonvit.py; the text model is
vLLM's DeepseekV2ForCausalLM under language_model.).

Transformers 5.19 has no Kimi-VL; its closest class is Kimi-K2.5's
(Kimi_K25ForConditionalGeneration): the same DeepSeek-V3 text model under
language_model. and the same MoonViT blocks (fused wqkv, wo, norm0/norm1,
mlp.fc0/fc1, final_layernorm, a learned (H, W, D) position grid), which
make_ckpt.py's released_kimi_k25 already renames to Moonshot's names.  Kimi-VL's
release differs from K2.5's only in the projector's names
(modeling_kimi_vl.py's KimiVLMultiModalProjector):

    mm_projector.pre_norm.*   -> multi_modal_projector.pre_norm.*
    mm_projector.proj.0.*     -> multi_modal_projector.linear_1.*
    mm_projector.proj.2.*     -> multi_modal_projector.linear_2.*

so the release's names are

    language_model.model.embed_tokens.weight, language_model.model.norm.weight,
    language_model.lm_head.weight
    language_model.model.layers.N.*              DeepSeek-V3 (MLA; q_lora_rank null: q_proj;
                                                 layer 0 dense, then MoE with shared experts
                                                 and e_score_correction_bias)
    vision_tower.patch_embed.proj.{weight,bias}  [Dv, 3, 14, 14]
    vision_tower.patch_embed.pos_emb.weight      [init_pos_emb_height, init_pos_emb_width, Dv]
    vision_tower.encoder.blocks.N.{norm0,norm1}.{weight,bias}
    vision_tower.encoder.blocks.N.wqkv.{weight,bias}   [3*Dv, Dv]: q rows, k rows, v rows
    vision_tower.encoder.blocks.N.wo.{weight,bias}
    vision_tower.encoder.blocks.N.mlp.fc0.{weight,bias}   [Iv, Dv]
    vision_tower.encoder.blocks.N.mlp.fc1.{weight,bias}   [Dv, Iv]
    vision_tower.encoder.final_layernorm.{weight,bias}
    multi_modal_projector.pre_norm.{weight,bias}  [Dv]
    multi_modal_projector.linear_1.{weight,bias}  [4*Dv, 4*Dv]
    multi_modal_projector.linear_2.{weight,bias}  [D, 4*Dv]

config.json is the release's (model_type kimi_vl, auto_map,
media_placeholder_token_id, text_config with model_type deepseek_v3,
vision_config with model_type moonvit and init_pos_emb_height/width,
merge_kernel_size), configuration_kimi_vl.py beside it (a minimal version
of the release's; vLLM reads kimi_vl with its own KimiVLConfig, which
builds text_config as transformers' DeepseekV2Config whatever its
model_type).

The processor is the release's remote code (vLLM 0.32 has none of its
own for Kimi-VL and loads AutoProcessor): processing_kimi_vl.py and
image_processing_kimi_vl.py, minimal versions of Moonshot's (the same
keys and outputs: pixel_values [patches, 3, 14, 14], image_grid_hws
[images, 2]; <|media_pad|> expanded to one token per 2x2 merged patches),
with preprocessor_config.json's auto_map, and make_ckpt.py's word-level
tokenizer with Kimi's media tokens.  Sizes: 2 tower blocks of 4 heads of
16, a 4x4 position grid; images of at most 64 patches (in_token_limit), so
vLLM's 1024x1024 profiling image is resized to 8x8 patches (16 tokens) and
the test's 56x56 image is 4x4 patches (4 tokens).
"""

CONFIG_PY = '''"""Kimi-VL's configuration (the keys of moonshotai/Kimi-VL-A3B-Instruct's
configuration_kimi_vl.py), written for the wshard test checkpoints."""
from transformers.configuration_utils import PretrainedConfig
from transformers import DeepseekV3Config


class MoonViTConfig(PretrainedConfig):
    model_type = "moonvit"

    def __init__(self, patch_size=14, init_pos_emb_height=64, init_pos_emb_width=64,
                 num_attention_heads=16, num_hidden_layers=27, hidden_size=1152,
                 intermediate_size=4304, merge_kernel_size=(2, 2), **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.init_pos_emb_height = init_pos_emb_height
        self.init_pos_emb_width = init_pos_emb_width
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.merge_kernel_size = merge_kernel_size


class KimiVLConfig(PretrainedConfig):
    model_type = "kimi_vl"

    def __init__(self, vision_config=None, text_config=None, ignore_index=-100,
                 media_placeholder_token_id=163605, pad_token_id=0, **kwargs):
        if vision_config is None:
            vision_config = MoonViTConfig()
        elif isinstance(vision_config, dict):
            vision_config = MoonViTConfig(**vision_config)
        self.vision_config = vision_config
        if text_config is None:
            text_config = DeepseekV3Config()
        elif isinstance(text_config, dict):
            text_config = DeepseekV3Config(**text_config)
        self.text_config = text_config
        self.ignore_index = ignore_index
        self.media_placeholder_token_id = media_placeholder_token_id
        super().__init__(pad_token_id=pad_token_id, **kwargs)
'''

IMAGE_PY = '''"""Kimi-VL's image processor (the keys and outputs of
moonshotai/Kimi-VL-A3B-Instruct's image_processing_kimi_vl.py), written for
the wshard test checkpoints: resize to in_token_limit patches at most, pad
(pad_input) or crop to whole merge_kernel_size x patch_size blocks,
normalize, and cut into patch_size x patch_size patches in raster order."""
import math

import numpy as np
import torch
from PIL import Image
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature


class KimiVLImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values", "image_grid_hws"]

    def __init__(self, patch_size=14, pad_input=False, image_mean=(0.5, 0.5, 0.5),
                 image_std=(0.5, 0.5, 0.5), in_token_limit=4096, merge_kernel_size=(2, 2),
                 **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.pad_input = pad_input
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)
        self.in_token_limit = in_token_limit
        self.merge_kernel_size = list(merge_kernel_size)

    def rescale_image(self, image):
        w, h = image.size
        p = self.patch_size
        if (w // p) * (h // p) > self.in_token_limit:
            scale = math.sqrt(self.in_token_limit / ((w // p) * (h // p)))
            image = image.resize((int(w * scale), int(h * scale)), Image.Resampling.BICUBIC)
        bh, bw = self.merge_kernel_size[0] * p, self.merge_kernel_size[1] * p
        w, h = image.size
        if self.pad_input:
            nw, nh = w + (bw - w % bw) % bw, h + (bh - h % bh) % bh
            padded = Image.new(image.mode, (nw, nh), (0, 0, 0))
            padded.paste(image, (0, 0))
            return padded
        nw, nh = w - w % bw, h - h % bh
        left, top = (w - nw) // 2, (h - nh) // 2
        return image.crop((left, top, left + nw, top + nh))

    def preprocess(self, images, return_tensors=None, **kwargs):
        if not isinstance(images, (list, tuple)):
            images = [images]
        pixel_values, grid_hws = [], []
        p = self.patch_size
        for image in images:
            if not isinstance(image, Image.Image):
                image = Image.fromarray(np.asarray(image))
            image = self.rescale_image(image.convert("RGB"))
            x = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
            mean = torch.tensor(self.image_mean).view(3, 1, 1)
            std = torch.tensor(self.image_std).view(3, 1, 1)
            x = (x - mean) / std
            c, h, w = x.shape
            x = x.reshape(c, h // p, p, w // p, p).permute(1, 3, 0, 2, 4).reshape(-1, c, p, p)
            pixel_values.append(x)
            grid_hws.append([h // p, w // p])
        return BatchFeature(data={"pixel_values": torch.cat(pixel_values),
                                  "image_grid_hws": torch.tensor(grid_hws)},
                            tensor_type=return_tensors)
'''

PROCESSOR_PY = '''"""Kimi-VL's processor (moonshotai/Kimi-VL-A3B-Instruct's
processing_kimi_vl.py), written for the wshard test checkpoints: each
<|media_pad|> becomes one per merged 2x2 block of its image's patches."""
from transformers.feature_extraction_utils import BatchFeature
from transformers.processing_utils import ProcessorMixin


class KimiVLProcessor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        self.image_token = "<|media_pad|>"
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, images=None, text=None, **kwargs):
        return_tensors = kwargs.pop("return_tensors", None)
        image_inputs = {}
        if images is not None:
            image_inputs = self.image_processor(images, return_tensors=return_tensors)
        if text is None:
            return BatchFeature(data=dict(image_inputs), tensor_type=return_tensors)
        if isinstance(text, str):
            text = [text]
        text = list(text)
        if images is not None:
            merge = (self.image_processor.merge_kernel_size[0] *
                     self.image_processor.merge_kernel_size[1])
            hws = image_inputs["image_grid_hws"]
            index = 0
            for i in range(len(text)):
                while self.image_token in text[i]:
                    n = int(hws[index].prod()) // merge
                    text[i] = text[i].replace(self.image_token, "<|placeholder|>" * n, 1)
                    index += 1
                text[i] = text[i].replace("<|placeholder|>", self.image_token)
        text_inputs = self.tokenizer(text, return_tensors=return_tensors)
        return BatchFeature(data={**text_inputs, **image_inputs}, tensor_type=return_tensors)
'''


def make(out):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, rewrite_shards, write_release_config
    from make_ckpt import COMMON, V3, released_kimi_k25
    # Kimi-VL-A3B's text model: DeepSeek-V3 with q_lora_rank null (q_proj),
    # one expert group, two shared experts, layer 0 dense
    text = dict(COMMON, **V3)
    text.update(model_type="deepseek_v3", q_lora_rank=None, n_group=1, topk_group=1,
                n_shared_experts=2, tie_word_embeddings=False,
                bos_token_id=2, eos_token_id=1, pad_token_id=0)
    vision = {"num_attention_heads": 4, "num_hidden_layers": 2, "hidden_size": 64,
              "intermediate_size": 128, "patch_size": 14, "pos_emb_height": 4,
              "pos_emb_width": 4, "merge_kernel_size": [2, 2]}
    cfg = transformers.Kimi_K25Config(text_config=text, vision_config=vision,
                                      projection_hidden_size=64, tie_word_embeddings=False,
                                      image_token_id=999)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Kimi_K25ForConditionalGeneration(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    sd = model.state_dict()
    released_kimi_k25(out)
    pairs = (("mm_projector.pre_norm.", "multi_modal_projector.pre_norm."),
             ("mm_projector.proj.0.", "multi_modal_projector.linear_1."),
             ("mm_projector.proj.2.", "multi_modal_projector.linear_2."))

    def shard(t):
        for k in list(t):
            for a, b in pairs:
                if k.startswith(a):
                    t[b + k[len(a):]] = t.pop(k)
            if k.endswith(".self_wqkv.weight"):
                # K2.5's conversion map takes the text model's attn.q_proj
                # (Kimi-VL's q_lora_rank null) for the tower's and saves it
                # as self_wqkv, rows permuted for the tower's rope: the
                # release has the text model's q_proj as the model holds it
                n = k[:-len(".self_wqkv.weight")]
                t.pop(k)
                t[n + ".self_attn.q_proj.weight"] = sd[
                    "model." + n.replace("language_model.model.", "language_model.", 1)
                    + ".self_attn.q_proj.weight"].contiguous()
    rewrite_shards(out, shard)
    write_release_config(out, release_config(cfg, text, vision),
                         {"configuration_kimi_vl.py": CONFIG_PY})
    processor(out, 999)


def release_config(cfg, text, vision):
    """config.json as moonshotai/Kimi-VL-A3B-Instruct ships it (its keys;
    the tiny sizes)."""
    t = cfg.text_config.to_dict()
    for k in ("dtype", "architectures", "transformers_version", "_name_or_path",
              "id2label", "label2id", "problem_type", "output_hidden_states",
              "output_attentions", "return_dict", "chunk_size_feed_forward",
              "is_encoder_decoder"):
        t.pop(k, None)
    # the release's DeepSeek-V3 keys transformers' class does not keep
    t.update(model_type="deepseek_v3", topk_method="noaux_tc", scoring_func="sigmoid",
             moe_layer_freq=1, q_lora_rank=None, num_nextn_predict_layers=0,
             torch_dtype="bfloat16", use_cache=True)
    v = {"model_type": "moonvit", "patch_size": vision["patch_size"],
         "init_pos_emb_height": vision["pos_emb_height"],
         "init_pos_emb_width": vision["pos_emb_width"],
         "num_attention_heads": vision["num_attention_heads"],
         "num_hidden_layers": vision["num_hidden_layers"],
         "hidden_size": vision["hidden_size"],
         "intermediate_size": vision["intermediate_size"],
         "merge_kernel_size": vision["merge_kernel_size"], "torch_dtype": "bfloat16"}
    return {"architectures": ["KimiVLForConditionalGeneration"],
            "auto_map": {"AutoConfig": "configuration_kimi_vl.KimiVLConfig",
                         "AutoModel": "modeling_kimi_vl.KimiVLForConditionalGeneration",
                         "AutoModelForCausalLM": "modeling_kimi_vl.KimiVLForConditionalGeneration"},
            "ignore_index": -100, "media_placeholder_token_id": 999, "model_type": "kimi_vl",
            "pad_token_id": 0, "text_config": t, "vision_config": v,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "transformers_version": "4.50.3", "vocab_size": t["vocab_size"]}


def processor(out, media_pad):
    """The release's remote-code processor and image processor, their
    preprocessor_config.json, and a word-level tokenizer with Kimi's media
    tokens (<|media_pad|> the config's media_placeholder_token_id)."""
    import json
    import os
    from make_ckpt import word_tokenizer

    class Cfg:
        @staticmethod
        def get_text_config():
            return Cfg
        vocab_size = 1000
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|media_start|>": 997, "<|media_end|>": 996, "<|media_content|>": 995,
               "<|media_pad|>": media_pad}
    tok = word_tokenizer(Cfg, special, "<pad>", "<eos>", "<bos>", "<unk>")
    tok.save_pretrained(out)
    for name, text in (("image_processing_kimi_vl.py", IMAGE_PY),
                       ("processing_kimi_vl.py", PROCESSOR_PY)):
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
    pre = {"auto_map": {"AutoImageProcessor": "image_processing_kimi_vl.KimiVLImageProcessor",
                        "AutoProcessor": "processing_kimi_vl.KimiVLProcessor"},
           "image_processor_type": "KimiVLImageProcessor", "processor_class": "KimiVLProcessor",
           "in_token_limit": 64, "patch_size": 14, "num_pooled_tokens": 16,
           "merge_kernel_size": [2, 2], "image_mean": [0.5, 0.5, 0.5],
           "image_std": [0.5, 0.5, 0.5], "pad_input": True}
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f, indent=2)
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump({"auto_map": {"AutoProcessor": "processing_kimi_vl.KimiVLProcessor"},
                   "processor_class": "KimiVLProcessor"}, f, indent=2)
