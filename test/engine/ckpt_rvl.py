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
CONFIG_PY = '''"""R-4B's configuration, minimal, written for the wshard test
checkpoints: LLaVA-OneVision's under its own model type."""
from transformers import LlavaOnevisionConfig


class RVLConfig(LlavaOnevisionConfig):
    model_type = "rvl"
'''


def released(out, cfg):
    """Rewrites the LLaVA-OneVision checkpoint make_ckpt.py saved in out
    as R-4B's release: the names, R's projector (linear_1 to the text
    width) and config.json."""
    from make_ckpt import onevision_release
    onevision_release(out, cfg, 13, 1, "RForConditionalGeneration", "rvl",
                      "configuration_rvl.RVLConfig", CONFIG_PY)
