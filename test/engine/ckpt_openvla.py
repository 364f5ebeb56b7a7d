"""OpenVLA (OpenVLAForActionPrediction: openvla/openvla-7b, Prismatic's
layout, model_type openvla), tiny text model, as vLLM 0.32 reads it
(model_executor/models/openvla.py, read by vLLM's own OpenVLAConfig).

vLLM builds the fused vision backbone from timm at the release's size
whatever config.json says: it accepts only timm_model_ids
vit_large_patch14_reg4_dinov2.lvd142m and vit_so400m_patch14_siglip_224
and image_sizes [224, 224] (openvla.py:104-120) and creates both with
timm.create_model (:135-152): DINOv2 ViT-L/14 with 4 registers (24 blocks
of 1024) and SigLIP So400m/14 (27 blocks of 1152, with its attention
pooling head), 731M parameters, a 1.5 GB checkpoint in BF16; the
projector's input is their 2176 features (:125).  So the towers here are
the release's size, their names and shapes timm's (taken from the models
built on the meta device), under the release's names:
vision_backbone.featurizer. (DINOv2; LayerScale's gamma saved as
scale_factor, as Prismatic's HF export renames it) and
vision_backbone.fused_featurizer. (SigLIP); the projector fc1, fc2, fc3
with biases; the Llama text model tiny from transformers'
LlamaForCausalLM under language_model.  vLLM's own OpenVLAProcessor
makes a 224x224 image 256 tokens after the bos; the word-level tokenizer
holds <PAD> at image_token_index (997)."""

TEXT = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
            num_hidden_layers=2, intermediate_size=512, vocab_size=1000,
            max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False,
            bos_token_id=2, eos_token_id=1, pad_token_id=0)
TIMM = ("vit_large_patch14_reg4_dinov2.lvd142m", "vit_so400m_patch14_siglip_224")
IMAGE_TOKEN = 997


def timm_shapes(model_id):
    """{name: shape} of timm's model as vLLM creates it (openvla.py:135)."""
    import timm
    import torch
    with torch.device("meta"):
        m = timm.create_model(model_id, pretrained=False, num_classes=0, img_size=224,
                              act_layer=None)
    return {k: tuple(v.shape) for k, v in m.state_dict().items()}


def make(out):
    import json
    import os
    import shutil
    import torch
    import transformers
    from ckpt_io import perturb_and_save, read_tensors, save_shards
    from make_ckpt import word_tokenizer
    torch.manual_seed(1234)
    os.makedirs(out, exist_ok=True)
    tcfg = transformers.LlamaConfig(**TEXT)
    tmp = out + ".part"
    perturb_and_save(transformers.LlamaForCausalLM(tcfg), tmp)
    sd = {"language_model." + k: v.to(torch.bfloat16) for k, v in read_tensors(tmp).items()}
    shutil.rmtree(tmp)
    groups = [sorted(sd)]
    for prefix, model_id in zip(("vision_backbone.featurizer.",
                                 "vision_backbone.fused_featurizer."), TIMM):
        names = []
        for k, shape in timm_shapes(model_id).items():
            norm = k.endswith("weight") and "norm" in k
            gamma = k.endswith(".gamma")
            std = 0.02 if norm or gamma or len(shape) < 2 or "token" in k or "pos_embed" in k \
                or "latent" in k else (shape[1] * (shape[2] * shape[3] if len(shape) == 4 else 1)) ** -0.5
            t = (1.0 if norm else 0.1 if gamma else 0.0) + torch.randn(shape) * std
            name = prefix + (k[:-len(".gamma")] + ".scale_factor" if gamma else k)
            sd[name] = t.to(torch.bfloat16)
            names.append(name)
        groups.append(sorted(names))
    T, F = TEXT["hidden_size"], 1024 + 1152
    proj = {"projector.fc1.weight": (4 * F, F), "projector.fc1.bias": (4 * F,),
            "projector.fc2.weight": (T, 4 * F), "projector.fc2.bias": (T,),
            "projector.fc3.weight": (T, T), "projector.fc3.bias": (T,)}
    for k, shape in proj.items():
        std = 0.02 if len(shape) == 1 else shape[1] ** -0.5
        sd[k] = (torch.randn(shape) * std).to(torch.bfloat16)
    groups[0] += sorted(proj)
    save_shards(out, sd, groups)
    text = dict(TEXT, architectures=["LlamaForCausalLM"], model_type="llama")
    cfg = {"architectures": ["OpenVLAForActionPrediction"], "model_type": "openvla",
           "timm_model_ids": list(TIMM), "timm_override_act_layers": [None, None],
           "image_sizes": [224, 224], "use_fused_vision_backbone": True,
           "image_token_index": IMAGE_TOKEN, "n_action_bins": 256, "text_config": text,
           "pad_token_id": 0, "torch_dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    special = {"<pad>": 0, "</s>": 1, "<s>": 2, "<unk>": 3, "<PAD>": IMAGE_TOKEN}
    word_tokenizer(tcfg, special, "<pad>", "</s>", "<s>", "<unk>").save_pretrained(out)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
