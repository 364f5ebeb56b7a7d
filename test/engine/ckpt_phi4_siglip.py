"""Phi-4-reasoning-vision (Phi4ForCausalLMV, model_type phi4-siglip:
microsoft/Phi-4-reasoning-vision-15B), tiny, in its release's layout as
vLLM 0.32 reads it (model_executor/models/phi4siglip.py): a Phi-3 text
model (fused qkv_proj and gate_up_proj) under model. and lm_head, config.json
Phi-3's keys at the top; a SigLIP2 NaFlex tower under
model.vision_tower.vision_tower.vision_model. (its pooling head included,
which vLLM drops), vision_config a dict; the projector mlp2x_gelu as
model.mm_projector.0 and .2 (mm_hidden_size to hidden_size, then
hidden_size).  Each part is transformers' own class (Phi3ForCausalLM,
Siglip2VisionModel), the projector two nn.Linear.

vLLM hardcodes the image's token, 100256 (<|dummy_0|> in Phi-4's
tokenizer): the vocabulary is Phi-4's 100352.  The release's processor is
remote code; the test checkpoint carries transformers' Siglip2Processor
(the NaFlex image processor, whose call resizes every image to 256
patches of 16 pixels: 256 image tokens) and a word-level tokenizer holding
<image>, which vLLM replaces.

    make(out)
"""

CONFIG_PY = '''from transformers import Phi3Config


class Phi4SiglipConfig(Phi3Config):
    model_type = "phi4-siglip"
'''

VISION = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
          "num_attention_heads": 4, "num_channels": 3, "patch_size": 16, "num_patches": 256}
IMAGE_WORD = 999


def make(out):
    import json
    import os
    import torch
    import transformers
    from ckpt_io import write_release_config
    from make_ckpt import word_tokenizer
    from safetensors.torch import save_file
    cfg = transformers.Phi3Config(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=100352,
        max_position_embeddings=512, rope_theta=500000.0, rms_norm_eps=1e-5,
        hidden_act="silu", tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
        pad_token_id=0)
    torch.manual_seed(1234)
    text = transformers.Phi3ForCausalLM(cfg).to(torch.bfloat16)
    tower = transformers.Siglip2VisionModel(transformers.Siglip2VisionConfig(**VISION)).to(torch.bfloat16)
    proj = {"0": torch.nn.Linear(VISION["hidden_size"], cfg.hidden_size),
            "2": torch.nn.Linear(cfg.hidden_size, cfg.hidden_size)}
    tensors = {}
    with torch.no_grad():
        # transformers 5.19's Siglip2VisionModel names its tensors without
        # the vision_model. the release (and vLLM) has
        for prefix, mod in [("", text), ("model.vision_tower.vision_tower.vision_model.", tower)] + \
                [("model.mm_projector.%s." % k, m.to(torch.bfloat16)) for k, m in proj.items()]:
            for name, p in mod.state_dict().items():
                tensors[prefix + name] = (p + torch.randn_like(p) * 0.02).contiguous()
    os.makedirs(out, exist_ok=True)
    names = sorted(tensors)
    half = len(names) // 2
    index = {"metadata": {}, "weight_map": {}}
    for i, part in enumerate((names[:half], names[half:])):
        fname = "model-%05d-of-00002.safetensors" % (i + 1)
        save_file({n: tensors[n] for n in part}, os.path.join(out, fname),
                  metadata={"format": "pt"})
        index["weight_map"].update({n: fname for n in part})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    c = cfg.to_dict()
    for k in ("transformers_version", "architectures", "model_type", "auto_map"):
        c.pop(k, None)
    c.update(architectures=["Phi4ForCausalLMV"], model_type="phi4-siglip",
             auto_map={"AutoConfig": "configuration_phi4_siglip.Phi4SiglipConfig"},
             dtype="bfloat16", mm_hidden_size=VISION["hidden_size"],
             mm_projector_type="mlp2x_gelu", max_num_patches=256, min_num_patches=256,
             image_aspect_ratio="square", vision_config=dict(VISION, model_type="siglip2_vision_model"))
    write_release_config(out, c, {"configuration_phi4_siglip.py": CONFIG_PY})
    tok = word_tokenizer(cfg, {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3,
                               "<image>": IMAGE_WORD}, "<pad>", "<eos>", "<bos>", "<unk>")
    ip = transformers.Siglip2ImageProcessor(patch_size=16, max_num_patches=256)
    transformers.Siglip2Processor(image_processor=ip, tokenizer=tok).save_pretrained(out)
