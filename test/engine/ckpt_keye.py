"""Kwai's Keye-VL (KeyeForConditionalGeneration: Kwai-Keye/Keye-VL-8B-Preview;
KeyeVL1_5ForConditionalGeneration: Keye-VL-1.5-8B; remote code), tiny, as
vLLM 0.32 reads them (model_executor/models/keye.py, keye_vl1_5.py,
qwen3.py).

The model: a SigLIP-like NaViT tower under visual.vision_model. (the names
of transformers' SiglipVisionModel, its pooling head included, which vLLM
drops, and packing_position_embedding, 32768 rows, which vLLM keeps), the
projector mlp_AR (pre_norm, linear_1, GELU, linear_2: transformers'
PaddleOCRProjector, the Keye-VL projector PaddleOCR-VL took over; Keye-VL
1.5's pre_norm spans the 2x2-merged width: torch's own modules), and a Qwen3
text model (transformers' Qwen3ForCausalLM) under model. and lm_head.
The tower: 2 layers of 64 (4 heads, MLP 128), 56-pixel images of 14-pixel
patches.

config.json as the releases write it: Qwen3's keys at the top (vLLM builds
Qwen3ForCausalLM from the whole config), rope_scaling with an mrope_section,
vision_config a dict, auto_map to configuration_keye.py beside it, a
minimal configuration for trust_remote_code (neither transformers nor vLLM
0.32 knows model_type Keye).  A word-level tokenizer with Keye's vision
tokens, and a stand-in for the releases' processor (Kwai's remote code:
keye_processing.py, written in as processing_keye.py, named by
processor_config.json's auto_map): vLLM's Keye processor reads its image
processor's size as min_pixels and max_pixels, which transformers'
PaddleOCR-VL and Qwen2-VL image processors hold as shortest_edge and
longest_edge.  56x56 images, 4 image tokens.

    make(out)        Keye-VL (8B-Preview)
    make_v1_5(out)   Keye-VL 1.5
"""
import os

# A stand-in for the releases' processor (remote code): keye_processing.py
# beside this file, written into the checkpoint as processing_keye.py.
KEYE_PROCESSOR = os.path.join(os.path.dirname(os.path.realpath(__file__)),
                              "keye_processing.py")

CONFIG_PY = '''"""Keye-VL's configuration, minimal, written for the wshard test
checkpoints: a SigLIP-like vision config and Qwen3's keys at the top."""
from transformers.configuration_utils import PretrainedConfig


class KeyeVisionConfig(PretrainedConfig):
    model_type = "Keye"
    base_config_key = "vision_config"

    def __init__(self, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                 num_attention_heads=12, num_channels=3, image_size=224, patch_size=14,
                 hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, attention_dropout=0.0,
                 spatial_merge_size=2, temporal_patch_size=2, tokens_per_second=2,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size, self.intermediate_size = hidden_size, intermediate_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.num_channels, self.image_size, self.patch_size = num_channels, image_size, patch_size
        self.hidden_act, self.layer_norm_eps = hidden_act, layer_norm_eps
        self.attention_dropout = attention_dropout
        self.spatial_merge_size, self.temporal_patch_size = spatial_merge_size, temporal_patch_size
        self.tokens_per_second = tokens_per_second


class KeyeConfig(PretrainedConfig):
    model_type = "Keye"
    sub_configs = {"vision_config": KeyeVisionConfig}

    def __init__(self, vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                 num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                 head_dim=128, hidden_act="silu", max_position_embeddings=40960,
                 rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None,
                 attention_bias=False, attention_dropout=0.0, tie_word_embeddings=False,
                 vision_config=None, image_token_id=151655, video_token_id=151656,
                 vision_start_token_id=151652, vision_end_token_id=151653, **kwargs):
        self.vision_config = KeyeVisionConfig(**(vision_config or {})) \\
            if not isinstance(vision_config, KeyeVisionConfig) else vision_config
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.intermediate_size, self.num_hidden_layers = intermediate_size, num_hidden_layers
        self.num_attention_heads, self.num_key_value_heads = num_attention_heads, num_key_value_heads
        self.head_dim, self.hidden_act = head_dim, hidden_act
        self.max_position_embeddings, self.rms_norm_eps = max_position_embeddings, rms_norm_eps
        self.rope_theta, self.rope_scaling = rope_theta, rope_scaling
        self.attention_bias, self.attention_dropout = attention_bias, attention_dropout
        self.image_token_id, self.video_token_id = image_token_id, video_token_id
        self.vision_start_token_id = vision_start_token_id
        self.vision_end_token_id = vision_end_token_id
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
'''

VISION = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_channels": 3, "image_size": 56, "patch_size": 14,
          "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6}
MERGE = 2
# Keye's vision tokens, at the top of the tiny vocabulary
TOKENS = {"image_token_id": 999, "video_token_id": 998, "vision_start_token_id": 997,
          "vision_end_token_id": 996}


def make(out, v1_5=False):
    import torch
    import transformers
    from transformers.models.paddleocr_vl.modeling_paddleocr_vl import PaddleOCRProjector
    from ckpt_io import module_tensors, remote_processor, save_shards, write_release_config
    from make_ckpt import COMMON, word_tokenizer
    H, V = COMMON["hidden_size"], VISION["hidden_size"]
    tcfg = transformers.Qwen3Config(**dict(COMMON, tie_word_embeddings=False, bos_token_id=2,
                                           eos_token_id=1, pad_token_id=0))
    vcfg = transformers.SiglipVisionConfig(**VISION, vision_use_head=True)
    torch.manual_seed(1234)
    text = transformers.Qwen3ForCausalLM(tcfg)
    tower = transformers.SiglipVisionModel(vcfg)
    packing = torch.nn.Embedding(32768, V)
    if v1_5:
        # Keye-VL 1.5's projector: pre_norm after the 2x2 merge
        W = V * MERGE * MERGE
        proj = {"pre_norm": torch.nn.LayerNorm(W, eps=1e-5), "linear_1": torch.nn.Linear(W, W),
                "linear_2": torch.nn.Linear(W, H)}
    else:
        pcfg = transformers.PaddleOCRVLConfig(
            vision_config=dict(VISION, spatial_merge_size=MERGE), text_config={"hidden_size": H})
        proj = {"": PaddleOCRProjector(pcfg)}
    # (transformers 5.19's SiglipVisionModel names its tensors without the
    # vision_model. the releases have)
    mods = {"": text, "visual.vision_model": tower,
            "visual.vision_model.embeddings.packing_position_embedding": packing}
    mods.update({("mlp_AR." + k).rstrip("."): m for k, m in proj.items()})
    sd = {k.lstrip("."): t for k, t in module_tensors(mods).items()}
    assert "visual.vision_model.head.probe" in sd and "mlp_AR.linear_1.weight" in sd, sorted(sd)
    assert sd["mlp_AR.linear_1.weight"].shape == (V * MERGE * MERGE, V * MERGE * MERGE)
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if k.startswith(("visual.", "mlp_AR."))),
              sorted(k for k in sd if k.startswith("model.")), ["lm_head.weight"]]
    assert sum(len(g) for g in groups) == len(sd)
    save_shards(out, sd, groups)
    tc = tcfg.to_dict()
    c = {k: tc[k] for k in ("vocab_size", "hidden_size", "intermediate_size",
                            "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                            "head_dim", "max_position_embeddings", "rms_norm_eps",
                            "hidden_act", "attention_bias", "bos_token_id", "eos_token_id",
                            "pad_token_id")}
    arch = "KeyeVL1_5ForConditionalGeneration" if v1_5 else "KeyeForConditionalGeneration"
    c.update({"architectures": [arch], "model_type": "Keye",
              "auto_map": {"AutoConfig": "configuration_keye.KeyeConfig"},
              "rope_theta": 1000000.0,
              "rope_scaling": {"type": "default", "rope_type": "default",
                               "mrope_section": [8, 12, 12]},
              "tie_word_embeddings": False, "torch_dtype": "bfloat16",
              "vision_config": dict(VISION, spatial_merge_size=MERGE, temporal_patch_size=2,
                                    tokens_per_second=2, model_type="Keye"),
              **TOKENS})
    write_release_config(out, c, {"configuration_keye.py": CONFIG_PY})
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|image_pad|>": TOKENS["image_token_id"],
               "<|video_pad|>": TOKENS["video_token_id"],
               "<|vision_start|>": TOKENS["vision_start_token_id"],
               "<|vision_end|>": TOKENS["vision_end_token_id"]}
    word_tokenizer(tcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    remote_processor(out, "processing_keye", "KeyeProcessor", open(KEYE_PROCESSOR).read())


def make_v1_5(out):
    """Keye-VL 1.5: the same names, mlp_AR.pre_norm over the merged width."""
    make(out, v1_5=True)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
