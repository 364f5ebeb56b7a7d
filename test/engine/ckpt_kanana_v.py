"""Kakao's Kanana-V (KananaVForConditionalGeneration: kakaocorp's
kanana-1.5-v releases, remote code), tiny, as vLLM 0.32 reads it
(model_executor/models/kanana_v.py, qwen2_vl.py, llama.py).

The model, under the names vLLM's AutoWeightsLoader takes with no mapper:
a Qwen2-VL tower under vision_model. (transformers'
Qwen2VisionTransformerPretrainedModel without its merger, which vLLM
deletes), the Dynamic C-Abstractor under abstractor. (pos_emb, timm's
RegStage stages net.0 and net.2 with LayerNorm2d and SiLU, as kanana_v.py
builds them, and a two-layer nn.Linear readout), and a Llama text model
(transformers' LlamaForCausalLM) under language_model.  The tower: 2 blocks
of 64 (4 heads, MLP ratio 2), 14-pixel patches; the abstractor: one
RegStage block a stage, 2x2 merge, 16 positions.

config.json as the release writes it: text_config, vision_config and
projector_config dicts, auto_map to configuration_kanana_v.py beside it,
a minimal configuration for trust_remote_code (neither transformers nor
vLLM 0.32 knows the model type), and a stand-in processor that processes
no image (write_stub_processor below; the release's is Kakao's remote
code): the tests' prompts are text alone (oracle.py)."""

CONFIG_PY = '''"""Kanana-V's configuration, minimal, written for the wshard test
checkpoints: Llama text, Qwen2-VL vision and projector sub-configs."""
from transformers import LlamaConfig, PretrainedConfig
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig


class KananaVProjectorConfig(PretrainedConfig):
    model_type = "kanana-1.5-v-projector"

    def __init__(self, **kwargs):
        keys = ("encoder_hidden_size", "hidden_size", "output_hidden_size", "depth",
                "mlp_depth", "merge_size", "pos_emb", "pos_emb_size", "feature_layer_index")
        for k in keys:
            setattr(self, k, kwargs.pop(k, None))
        super().__init__(**kwargs)


class KananaVConfig(PretrainedConfig):
    model_type = "kanana-1.5-v"

    def __init__(self, text_config=None, vision_config=None, projector_config=None, **kwargs):
        def sub(cls, c):
            return c if isinstance(c, PretrainedConfig) else cls(**(c or {}))
        self.text_config = sub(LlamaConfig, text_config)
        self.vision_config = sub(Qwen2VLVisionConfig, vision_config)
        self.projector_config = sub(KananaVProjectorConfig, projector_config)
        super().__init__(**kwargs)
'''

VISION = {"depth": 2, "embed_dim": 64, "hidden_size": 64, "num_heads": 4, "mlp_ratio": 2,
          "hidden_act": "quick_gelu", "in_channels": 3, "patch_size": 14,
          "spatial_merge_size": 2, "temporal_patch_size": 2}
PROJECTOR = {"encoder_hidden_size": 64, "hidden_size": 64, "output_hidden_size": 256,
             "depth": 1, "mlp_depth": 2,
             "merge_size": 2, "pos_emb": True, "pos_emb_size": 16, "feature_layer_index": -1}


PROCESSOR_PY = '''"""A stand-in for the release's processor (remote code, which the wshard
test checkpoints cannot ship): vLLM 0.32 wants a ProcessorMixin to start
and reads the sizes of its image and video processors to budget the
encoder's tokens; the tests' prompts are text alone, and it processes no
image."""
from types import SimpleNamespace

from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize  # noqa: F401
from transformers.processing_utils import ProcessorMixin


class NAME(ProcessorMixin):
    attributes = ["tokenizer"]
    tokenizer_class = "AutoTokenizer"

    def __init__(self, tokenizer=None, **kwargs):
        super().__init__(tokenizer)
        # Kanana-V: Qwen2-VL's min and max pixels (56x56: 4 image tokens);
        # crops' sizes, margins and pooling (read by other stand-ins' callers)
        sizes = dict(size={"height": 56, "width": 56}, patch_size=14, pooling_size=[2, 2])
        self.image_processor = ImageSizes(min_pixels=56 * 56, max_pixels=56 * 56,
                                          overlap_margins=[1, 1], max_crops=2, **sizes)
        self.video_processor = SimpleNamespace(num_frames=2, frame_sample_mode="uniform_last_frame",
                                               max_fps=2, sampling_fps=2, **sizes)
        self.use_single_crop_col_tokens = None
        self.image_use_col_tokens = True
        self.video_use_col_tokens = False

    def __call__(self, text=None, images=None, videos=None, **kwargs):
        if images or videos:
            raise ValueError("the wshard test processor processes no image")
        return self.tokenizer(text, **kwargs)


class ImageSizes(SimpleNamespace):
    """(vLLM's Kanana-V finds smart_resize beside its image processor's
    class)"""
'''


def make(out, tied=False):
    import os
    from functools import partial
    import torch
    import transformers
    from timm.layers import LayerNorm2d
    from timm.models.regnet import RegStage
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel
    from ckpt_io import module_tensors, save_shards, write_release_config
    from make_ckpt import COMMON, word_tokenizer
    H, P = COMMON["hidden_size"], PROJECTOR
    tcfg = transformers.LlamaConfig(**dict(COMMON, tie_word_embeddings=tied, bos_token_id=2,
                                           eos_token_id=1, pad_token_id=0))
    vcfg = Qwen2VLVisionConfig(**VISION)
    torch.manual_seed(1234)
    text = transformers.LlamaForCausalLM(tcfg)
    tower = Qwen2VisionTransformerPretrainedModel(vcfg)
    stage = partial(RegStage, stride=1, dilation=1, act_layer=torch.nn.SiLU,
                    norm_layer=LayerNorm2d)
    M, D = P["merge_size"], P["hidden_size"]
    mods = {"language_model": text, "vision_model": tower,
            "abstractor.net.0": stage(P["depth"], P["encoder_hidden_size"], D),
            "abstractor.net.2": stage(P["depth"], M * M * D, D),
            "abstractor.readout.0": torch.nn.Linear(D, P["output_hidden_size"]),
            "abstractor.readout.2": torch.nn.Linear(P["output_hidden_size"], H)}
    sd = module_tensors(mods)
    sd = {k: t for k, t in sd.items() if not k.startswith("vision_model.merger.")}
    sd["abstractor.pos_emb"] = (torch.randn(1, P["pos_emb_size"], P["encoder_hidden_size"])
                                * 0.02).to(torch.bfloat16)
    if tied:
        # (transformers' tied LlamaForCausalLM has no lm_head parameter)
        sd.pop("language_model.lm_head.weight", None)
    assert "abstractor.net.2.b1.downsample.conv.weight" in sd, sorted(sd)
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if k.startswith(("vision_model.", "abstractor."))),
              sorted(k for k in sd if k.startswith("language_model."))]
    save_shards(out, sd, groups)
    c = {"architectures": ["KananaVForConditionalGeneration"], "model_type": "kanana-1.5-v",
         "auto_map": {"AutoConfig": "configuration_kanana_v.KananaVConfig"},
         "torch_dtype": "bfloat16", "tie_word_embeddings": tied,
         "text_config": dict(tcfg.to_dict(), architectures=["LlamaForCausalLM"],
                             torch_dtype="bfloat16"),
         "vision_config": dict(VISION, model_type="qwen2_vl", rms_norm_eps=1e-6),
         "projector_config": dict(PROJECTOR)}
    write_release_config(out, c, {"configuration_kanana_v.py": CONFIG_PY})
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<image>": 4}
    word_tokenizer(tcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    write_stub_processor(out, "kanana_v", "KananaVProcessor")


def make_tied(out):
    """The same with text_config.tie_word_embeddings: no lm_head."""
    make(out, tied=True)


def write_stub_processor(out, module, name):
    """Writes processing_MODULE.py with the stand-in processor NAME into OUT,
    named by processor_config.json's and tokenizer_config.json's auto_map."""
    from ckpt_io import remote_processor
    remote_processor(out, "processing_" + module, name, PROCESSOR_PY.replace("NAME", name))


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
