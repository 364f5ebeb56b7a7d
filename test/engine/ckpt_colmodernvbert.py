"""ColModernVBERT (ColModernVBertForRetrieval) as vLLM 0.32 reads it, tiny:
transformers' own class (a ModernBERT text model, a SigLIP tower of 3
layers over 56x56 images of 14-pixel patches, pixel-shuffled by 2 into 4
image tokens, a 128-wide ColBERT projection), rewritten in the release's
layout (ModernVBERT/colmodernvbert-merged's), with its tokenizer and image
processor."""
import glob
import json
import os


def make(out):
    import torch
    import transformers
    from ckpt_io import perturb_and_save
    from make_ckpt import COMMON, word_tokenizer
    text = {k: v for k, v in dict(COMMON, pad_token_id=0, eos_token_id=1, bos_token_id=2,
                                  cls_token_id=2, sep_token_id=1).items()
            if k not in ("num_key_value_heads", "head_dim")}  # ModernBERT has neither
    vision = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
              "num_attention_heads": 4, "image_size": 56, "patch_size": 14,
              "vision_use_head": False}
    cfg = transformers.ColModernVBertConfig(
        embedding_dim=128, vlm_config={"model_type": "modernvbert", "image_token_id": 999,
                                       "pixel_shuffle_factor": 2, "text_config": text,
                                       "vision_config": vision})
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.ColModernVBertForRetrieval(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    released(out, cfg)
    vlm = cfg.vlm_config
    word_tokenizer(vlm.text_config, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                                     "<image>": vlm.image_token_id},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    transformers.Idefics3ImageProcessor(
        size={"longest_edge": 56}, max_image_size={"longest_edge": 56},
        do_image_splitting=False).save_pretrained(out)


def released(out, cfg):
    """The layout vLLM 0.32 reads (its own ColModernVBertConfig, model_type
    modernvbert): config.json flat (text_config, vision_config,
    embedding_dim, pixel_shuffle_factor, image_token_id at the top), the
    tensors under model. with the SigLIP tower nested twice
    (model.vision_model.vision_model.*), the ColBERT projection as
    custom_text_proj.  transformers 5.19 writes vlm.*, embedding_proj_layer.*
    and a nested vlm_config, which vLLM cannot build."""
    from safetensors.torch import load_file, save_file
    ren = [("vlm.vision_model.", "model.vision_model.vision_model."),
           ("vlm.", "model."), ("embedding_proj_layer.", "custom_text_proj.")]
    index = {}
    for f in sorted(glob.glob(os.path.join(out, "*.safetensors"))):
        new = {}
        for k, v in load_file(f).items():
            for a, b in ren:
                if k.startswith(a):
                    k = b + k[len(a):]
                    break
            new[k] = v
            index[k] = os.path.basename(f)
        save_file(new, f, metadata={"format": "pt"})
    p = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(p):
        j = json.load(open(p))
        j["weight_map"] = dict(sorted(index.items()))
        with open(p, "w") as f:
            json.dump(j, f, indent=2)
    vlm = cfg.vlm_config
    c = {"architectures": ["ColModernVBertForRetrieval"], "model_type": "modernvbert",
         "dtype": "bfloat16", "embedding_dim": cfg.embedding_dim,
         "image_token_id": vlm.image_token_id, "pixel_shuffle_factor": vlm.pixel_shuffle_factor,
         "text_config": vlm.text_config.to_dict(), "vision_config": vlm.vision_config.to_dict()}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
