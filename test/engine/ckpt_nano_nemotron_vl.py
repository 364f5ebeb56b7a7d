"""NVIDIA's Nemotron-H vision and omni models (NemotronH_Nano_VL_V2:
nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-*; NemotronH_Nano_Omni_Reasoning_V3,
NemotronH_Omni_Reasoning_V3, NemotronH_Super_Omni_Reasoning_V3: the
Nemotron 3 omni releases), tiny, as vLLM 0.32 reads them: one class for
all four (registry.py:532-535, nano_nemotron_vl.py NemotronH_Nano_VL_V2).

The weights are transformers' own NemotronH_Omni_Reasoning_V3's
(models/nemotron_h_omni), whose save_pretrained writes the release's names
(conversion_mapping.py's "NemotronH_Omni_Reasoning_V3" and "radio" renames
reversed): language_model.backbone.* (a Nemotron-H of layers M * - M),
vision_model.radio_model.* (C-RADIO: 2 blocks of 32 wide, 4 heads, its
patch and video embedders, position table, 2 CLS and 2 register tokens,
summary_idxs), mlp1.{0,1,3} (the projector), and, for the omni model,
sound_encoder.encoder.* (a Parakeet encoder of 2 layers, 32 wide) and
sound_projection.*.

config.json as the releases write it, for their remote code (model_type
NemotronH_Nano_VL_V2, llm_config, vision_config with RADIO's args, which
vLLM's RadioConfig reads, sound_config, vit_hidden_size...), with a
minimal configuration_nemotron_h_nano_vl.py beside it.  vLLM's RadioConfig
sizes the tower by args.model's timm name (vit_huge_patch16_224 in every
release) and then takes the args as keyword arguments, which transformers'
PreTrainedConfig sets over them: the test's args give the tiny sizes.

    ckpt_nano_nemotron_vl.py OUT [omni]
"""
import json
import os
import sys

CONFIG_PY = '''"""The Nemotron-H VL and omni releases' configuration (the keys of
NVIDIA's remote code), written for the wshard test checkpoints."""
from transformers import PretrainedConfig
from transformers.models.nemotron_h.configuration_nemotron_h import NemotronHConfig


class NemotronH_Nano_VL_V2_Config(PretrainedConfig):
    model_type = "NemotronH_Nano_VL_V2"
    is_composition = True

    def __init__(self, vision_config=None, llm_config=None, sound_config=None, **kwargs):
        super().__init__(**kwargs)
        self.vision_config = PretrainedConfig(**(vision_config or {}))
        self.text_config = NemotronHConfig(**(llm_config or {}))
        self.llm_config = self.text_config
        # the release's Parakeet keys as they are (vLLM's ParakeetConfig
        # adds scale_input and attention_bias itself)
        self.sound_config = (PretrainedConfig(**sound_config)
                             if sound_config is not None else None)
'''

PATTERN = ["mamba", "attention", "mlp", "mamba"]


def make(out, omni=False):
    import tempfile

    import torch
    from safetensors.torch import load_file, save_file
    from transformers.models.nemotron_h_omni.configuration_nemotron_h_omni import (
        NemotronH_Omni_Reasoning_V3_Config)
    from transformers.models.nemotron_h_omni.modeling_nemotron_h_omni import (
        NemotronH_Omni_Reasoning_V3)
    from make_ckpt import word_tokenizer

    text = dict(vocab_size=1024, hidden_size=64, layers_block_type=PATTERN,
                num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                mamba_num_heads=8, mamba_head_dim=16, n_groups=2, ssm_state_size=16,
                intermediate_size=128, num_nextn_predict_layers=0,
                tie_word_embeddings=False)
    vision = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  patch_size=16, image_size=64, max_img_size=128, num_cls_tokens=2,
                  num_registers=2, video_temporal_patch_size=2)
    audio = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, num_mel_bins=16, subsampling_conv_channels=8,
                 projection_hidden_size=48, projection_bias=False, sampling_rate=16000)
    cfg = NemotronH_Omni_Reasoning_V3_Config(
        text_config=text, vision_config=vision, audio_config=audio if omni else None,
        projector_hidden_size=48, vision_hidden_size=32, force_image_size=64)
    torch.manual_seed(0)
    model = NemotronH_Omni_Reasoning_V3(cfg).to(torch.bfloat16)
    with torch.no_grad():
        # random norms and biases too, so that no cut hides behind ones
        for name, p in model.named_parameters():
            if p.dim() == 1 and "A_log" not in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        tensors = load_file(os.path.join(tmp, "model.safetensors"))
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    tc = cfg.text_config.to_dict()
    tc.pop("layers_block_type", None)
    tc.pop("mtp_layers_block_type", None)
    tc.pop("time_step_limit", None)  # (0, inf): the default, not JSON
    tc.update(architectures=["NemotronHForCausalLM"], model_type="nemotron_h",
              hybrid_override_pattern="M*-M", torch_dtype="bfloat16")
    args = {"model": "vit_huge_patch16_224", "hidden_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 4, "intermediate_size": 128, "cpe_max_size": 128,
            "register_multiple": 4, "cls_token_per_teacher": True,
            "teachers": [{"name": "siglip2-g", "use_summary": True},
                         {"name": "dfn_clip", "use_summary": True}]}
    arch = "NemotronH_Nano_Omni_Reasoning_V3" if omni else "NemotronH_Nano_VL_V2"
    c = {"architectures": [arch], "model_type": "NemotronH_Nano_VL_V2",
         "auto_map": {"AutoConfig": "configuration_nemotron_h_nano_vl.NemotronH_Nano_VL_V2_Config"},
         "llm_config": tc,
         "vision_config": {"args": args, "patch_size": 16, "preferred_resolution": [64, 64],
                           "video_temporal_patch_size": 2, "separate_video_embedder": True},
         "force_image_size": 64, "patch_size": 16, "downsample_ratio": 0.5,
         "template": "nemotron-h-5p5", "ps_version": "v2", "image_tag_type": "internvl",
         "use_thumbnail": True, "max_dynamic_patch": 1, "min_dynamic_patch": 1,
         "norm_mean": [0.48145466, 0.4578275, 0.40821073],
         "norm_std": [0.26862954, 0.26130258, 0.27577711],
         "vit_hidden_size": 32, "projector_hidden_size": 48, "video_pruning_rate": 0.0,
         "img_context_token_id": 994, "video_context_token_id": 993,
         "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    if omni:
        sc = cfg.audio_config.to_dict()
        sc["model_type"] = "parakeet"
        for k in ("scale_input", "attention_bias", "max_position_embeddings"):
            sc.pop(k)  # as the releases (vLLM sets them)
        c["sound_config"] = sc
        c["sound_context_token_id"] = 990
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    with open(os.path.join(out, "configuration_nemotron_h_nano_vl.py"), "w") as f:
        f.write(CONFIG_PY)
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<img>": 997, "</img>": 996, "<image>": 994, "<video>": 993,
               "<so_start>": 992, "<so_end>": 991, "<so_embedding>": 990}
    word_tokenizer(cfg.text_config, special, "<pad>", "<eos>", "<bos>", "<unk>"
                   ).save_pretrained(out)


def make_omni(out):
    make(out, omni=True)


if __name__ == "__main__":
    make(sys.argv[1], len(sys.argv) > 2 and sys.argv[2] == "omni")
