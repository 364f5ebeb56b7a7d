"""R-4B (RForConditionalGeneration, YannQi's R-4B, remote code), tiny, as
vLLM 0.32 reads it (model_executor/models/rvl.py).

vLLM's class is LLaVA-OneVision's (rvl.py:87) with its own projector
(RVLMultiModalProjector, rvl.py:57-79): pre_norm, a LayerNorm over the
tower's width, linear_1 from the tower's width to the text width, GELU,
linear_2 from the text width to the text width.  The checkpoint is
transformers' LlavaOnevisionForConditionalGeneration (make_ckpt.py's
"rvl" case: a Qwen3 text model and a SigLIP tower) under the names
transformers 4.52 and later write, which rvl.py:88-98 maps
(model.language_model., model.vision_tower.vision_model.,
model.multi_modal_projector., model.image_newline, lm_head.), its
projector replaced by R's (random, seeded); config.json LLaVA-OneVision's
under model type rvl with a minimal configuration_rvl.py beside it (vLLM
0.32 holds no config class for it), LLaVA-OneVision's processor and a
tokenizer beside it, which vLLM's RVLProcessingInfo loads
(rvl.py:28-29)."""
import json
import os

CONFIG_PY = '''"""R-4B's configuration, minimal, written for the wshard test
checkpoints: LLaVA-OneVision's under its own model type."""
from transformers import LlavaOnevisionConfig


class RVLConfig(LlavaOnevisionConfig):
    model_type = "rvl"
'''


def released(out, cfg):
    """Rewrites the LLaVA-OneVision checkpoint make_ckpt.py saved in out
    as R-4B's release: the names, R's projector and config.json."""
    import torch
    from ckpt_io import rename_prefixes, rewrite_shards, update_config, write_release_config
    from make_ckpt import llava_processor
    rename_prefixes(out, (("language_model.model.", "model.language_model."),
                          ("language_model.lm_head.", "lm_head."),
                          ("vision_tower.", "model.vision_tower.vision_model."),
                          ("multi_modal_projector.", "model.multi_modal_projector."),
                          ("image_newline", "model.image_newline")))
    h, v = cfg.text_config.hidden_size, cfg.vision_config.hidden_size
    g = torch.Generator().manual_seed(13)

    def rand(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)
    proj = {"pre_norm.weight": (1 + rand(v)).to(torch.bfloat16), "pre_norm.bias": rand(v),
            "linear_1.weight": rand(h, v), "linear_1.bias": rand(h),
            "linear_2.weight": rand(h, h), "linear_2.bias": rand(h)}

    def shard(tensors):
        pre = "model.multi_modal_projector."
        if any(n.startswith(pre) for n in tensors):
            for n in [n for n in tensors if n.startswith(pre)]:
                del tensors[n]
            tensors.update({pre + k: t for k, t in proj.items()})
    rewrite_shards(out, shard)
    llava_processor(out, cfg)
    update_config(out, lambda c: c.update(
        architectures=["RForConditionalGeneration"], model_type="rvl",
        auto_map={"AutoConfig": "configuration_rvl.RVLConfig"}))
    write_release_config(out, json.load(open(os.path.join(out, "config.json"))),
                         {"configuration_rvl.py": CONFIG_PY})
