"""A stand-in for Keye-VL's processing_keye.py and image_processing_keye.py
(KeyeProcessor and its SigLIP image processor, Kwai's remote code, which
the test cannot ship), as vLLM 0.32's keye.py reads them: the image
processor's size holds min_pixels and max_pixels, merge_size 2; an image is
resized to whole 2x2 blocks of 14-pixel patches within those bounds
(Qwen2-VL's smart_resize), normalised with SigLIP's mean and std (0.5) and
cut into its patches in raster order, pixel_values (patches, 3, 14, 14) and
image_grid_thw [1, h, w] as the release gives them; each <|image_pad|> of
the text is expanded to the image's h * w / 4 tokens.  No videos."""
import math

import numpy as np
import torch
from PIL import Image
from transformers.feature_extraction_utils import BatchFeature
from transformers.processing_utils import ProcessorMixin


class KeyeImageProcessor:
    def __init__(self, min_pixels=56 * 56, max_pixels=56 * 56, patch_size=14, merge_size=2):
        self.size = {"min_pixels": min_pixels, "max_pixels": max_pixels}
        self.patch_size, self.merge_size, self.temporal_patch_size = patch_size, merge_size, 1

    def resized(self, height, width):
        f = self.patch_size * self.merge_size
        h, w = max(f, round(height / f) * f), max(f, round(width / f) * f)
        if h * w > self.size["max_pixels"]:
            beta = math.sqrt(height * width / self.size["max_pixels"])
            h, w = math.floor(height / beta / f) * f, math.floor(width / beta / f) * f
        elif h * w < self.size["min_pixels"]:
            beta = math.sqrt(self.size["min_pixels"] / (height * width))
            h, w = math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
        return h, w

    def __call__(self, images):
        p = self.patch_size
        pix, grids = [], []
        for im in images:
            if not isinstance(im, Image.Image):
                im = Image.fromarray(np.asarray(im))
            im = im.convert("RGB")
            h, w = self.resized(im.height, im.width)
            a = (np.asarray(im.resize((w, h), Image.BICUBIC), dtype=np.float32) / 255.0 - 0.5) / 0.5
            t = torch.from_numpy(a).permute(2, 0, 1)
            t = t.reshape(3, h // p, p, w // p, p).permute(1, 3, 0, 2, 4)
            pix.append(t.reshape(-1, 3, p, p))
            grids.append([1, h // p, w // p])
        return {"pixel_values": torch.cat(pix), "image_grid_thw": torch.tensor(grids)}


class KeyeProcessor(ProcessorMixin):
    attributes = ["tokenizer"]
    tokenizer_class = "AutoTokenizer"

    def __init__(self, tokenizer=None, **kwargs):
        super().__init__(tokenizer)
        self.image_processor = KeyeImageProcessor()
        self.image_token, self.video_token = "<|image_pad|>", "<|video_pad|>"

    def __call__(self, text=None, images=None, videos=None, return_tensors=None, **kwargs):
        if videos:
            raise ValueError("the test's Keye processor takes no videos")
        out = {}
        if images is not None:
            if not isinstance(images, (list, tuple)):
                images = [images]
            out.update(self.image_processor(images))
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            if images is not None:
                m = self.image_processor.merge_size ** 2
                counts = iter(int(g.prod()) // m for g in out["image_grid_thw"])
                pad = self.image_token
                texts = [pad.join(s.split(pad)[:1] + [pad * (next(counts) - 1) + r
                                                      for r in s.split(pad)[1:]])
                         for s in texts]
            out.update(self.tokenizer(texts if not isinstance(text, str) else texts[0]))
        return BatchFeature(out, tensor_type=return_tensors)
