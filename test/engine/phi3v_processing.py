"""A stand-in for Phi-3-V's processing_phi3_v.py and image_processing_phi3_v.py
(Phi3VProcessor, Microsoft's remote code, which the test cannot ship): the
HD transform (the image resized to whole 336-pixel crops, at most num_crops of
them, padded to whole rows of crops in white, normalised with CLIP's mean and
std; a 336x336 global view first; pixel_values padded to num_crops + 1 crops),
image_sizes the padded size, and the release's token count.  Text is
tokenized as is: vLLM 0.32 replaces the image tags itself."""
import math

import numpy as np
import torch
from PIL import Image
from transformers.feature_extraction_utils import BatchFeature
from transformers.processing_utils import ProcessorMixin

MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)


def _hd(img, hd_num):
    width, height = img.size
    trans = width < height
    if trans:
        img = img.transpose(Image.TRANSPOSE)
        width, height = img.size
    ratio = width / height
    scale = 1
    while scale * math.ceil(scale / ratio) <= hd_num:
        scale += 1
    scale -= 1
    new_w = int(scale * 336)
    new_h = int(new_w / ratio)
    img = img.resize((new_w, new_h), Image.BILINEAR)
    tar = int(math.ceil(new_h / 336) * 336)
    canvas = Image.new("RGB", (new_w, tar), (255, 255, 255))
    canvas.paste(img, (0, (tar - new_h) // 2))
    if trans:
        canvas = canvas.transpose(Image.TRANSPOSE)
    return canvas


class Phi3VProcessor(ProcessorMixin):
    attributes = ["tokenizer"]
    tokenizer_class = "AutoTokenizer"

    def __init__(self, tokenizer=None, num_crops=16, **kwargs):
        super().__init__(tokenizer)
        self.num_crops = num_crops
        self.num_img_tokens = 144
        self.img_tokens = ["<|image_%d|>" % (i + 1) for i in range(4)]

    def calc_num_image_tokens_from_image_size(self, width, height):
        if width < height:
            width, height = height, width
        ratio = width / height
        scale = 1
        while scale * math.ceil(scale / ratio) <= self.num_crops:
            scale += 1
        scale -= 1
        new_w = int(scale * 336)
        new_h = int(new_w / ratio)
        h = int(math.ceil(new_h / 336) * 336) // 336
        w = new_w // 336
        return (h * w + 1) * 144 + 1 + (h + 1) * 12

    def __call__(self, text=None, images=None, return_tensors=None, **kwargs):
        out = {}
        if text is not None:
            out.update(self.tokenizer(text, return_tensors=return_tensors))
        if images is not None:
            if not isinstance(images, (list, tuple)):
                images = [images]
            pix, sizes, ntok = [], [], []
            for im in images:
                if not isinstance(im, Image.Image):
                    im = Image.fromarray(np.asarray(im))
                im = _hd(im.convert("RGB"), self.num_crops)
                w, h = im.size
                a = (np.asarray(im, dtype=np.float32) / 255.0 - MEAN) / STD
                t = torch.from_numpy(a).permute(2, 0, 1).contiguous()
                glb = torch.nn.functional.interpolate(t[None], size=(336, 336),
                                                      mode="bicubic", align_corners=False)
                crops = t.reshape(3, h // 336, 336, w // 336, 336).permute(1, 3, 0, 2, 4)
                allc = torch.cat([glb, crops.reshape(-1, 3, 336, 336)], 0)
                pad = torch.zeros(self.num_crops + 1 - allc.shape[0], 3, 336, 336)
                pix.append(torch.cat([allc, pad], 0))
                sizes.append([h, w])
                ntok.append(self.calc_num_image_tokens_from_image_size(w, h))
            out["pixel_values"] = torch.stack(pix)
            out["image_sizes"] = torch.tensor(sizes)
            out["num_img_tokens"] = ntok
        return BatchFeature(out, tensor_type=return_tensors)
