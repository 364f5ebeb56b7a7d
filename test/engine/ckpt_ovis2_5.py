"""Ovis2.5 (Ovis2_5, model_type ovis2_5: AIDC-AI/Ovis2.5-2B and -9B, remote
code), tiny, in its release's layout as vLLM 0.32 reads it
(model_executor/models/ovis2_5.py, siglip2navit.py, qwen3.py): the Qwen3
text model under llm.model. and llm.lm_head; the SigLIP2 NaViT visual
tokenizer under visual_tokenizer.vit.vision_model. (embeddings.
patch_embedding a convolution over 16-pixel patches, position_embedding
1024 rows, encoder.layers.N, post_layernorm) and its head, visual_tokenizer.
head.0 (a linear from the tower's width times hidden_stride^2 to
visual_vocab_size - 4, no bias) and .1 (a LayerNorm); the visual embedding
table vte [visual_vocab_size, hidden_size].  Each part is transformers'
own class (Qwen3ForCausalLM, Siglip2VisionModel without its pooling head,
nn.Conv2d, nn.Linear, nn.LayerNorm, nn.Embedding).

config.json as the release writes it: llm_config a Qwen3 config (vLLM
reads it as text_config), vit_config a siglip2_navit one, visual_vocab_size,
hidden_size, auto_map to configuration_ovis2_5.py beside it (neither
transformers nor vLLM knows the model type).  vLLM hardcodes the
indicator tokens' ids (151672 to 151675: <ovis_image_start>,
<ovis_image_end>, <ovis_video_start>, <ovis_video_end>) and the image pad
151655: the vocabulary is Qwen3's 151936, and a word-level tokenizer holds
the processor's tokens at the release's ids.  vLLM's own Ovis2_5Processor
reads it and transformers' SiglipImageProcessor (the release's): an image
is at least 448x448 pixels, 28x28 patches merged 2x2, 196 pads between
two indicators.  The tower's patch embedding is the releases' convolution
(vit_config.num_patches -1; an nn.Conv2d in place of transformers'
linear).  make_moe: Ovis2.6-MoE's layout (Ovis2_6_MoeForCausalLM), the text
model transformers' Qwen3MoeForCausalLM, its experts one tensor each as its
save_pretrained writes them; its tower the NaFlex form vLLM also builds
(vit_config.num_patches 256: a linear patch embedding, transformers' own,
and 256 positions).

    make(out), make_tied(out), make_moe(out)
"""
import os

CONFIG_PY = '''"""Ovis2.5's configuration, minimal, written for the wshard test
checkpoints: a SigLIP2 NaViT vision config and a Qwen3 text config, as the
release's configuration_ovis2_5.py has them."""
from transformers import AutoConfig, Qwen3Config
from transformers.configuration_utils import PretrainedConfig


class Siglip2NavitConfig(PretrainedConfig):
    model_type = "siglip2_navit"

    def __init__(self, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                 num_attention_heads=12, num_channels=3, num_patches=-1, image_size=512,
                 patch_size=16, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6,
                 attention_dropout=0.0, hidden_stride=2, window_size=112,
                 fullatt_block_indexes=None, temporal_patch_size=1,
                 preserve_original_pe=True, use_rope=True, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size, self.intermediate_size = hidden_size, intermediate_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.num_channels, self.num_patches, self.image_size = num_channels, num_patches, image_size
        self.patch_size, self.hidden_act, self.layer_norm_eps = patch_size, hidden_act, layer_norm_eps
        self.attention_dropout, self.hidden_stride = attention_dropout, hidden_stride
        self.window_size, self.fullatt_block_indexes = window_size, fullatt_block_indexes
        self.temporal_patch_size, self.preserve_original_pe = temporal_patch_size, preserve_original_pe
        self.use_rope = use_rope


class Ovis2_5_Config(PretrainedConfig):
    model_type = "ovis2_5"
    sub_configs = dict(llm_config=Qwen3Config, vit_config=Siglip2NavitConfig)

    def __init__(self, llm_config=None, vit_config=None, visual_vocab_size=65536,
                 hidden_size=None, conversation_formatter_class=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(llm_config, dict):
            # (Qwen3's, or the model type it names: Ovis2.6-MoE's qwen3_moe)
            llm_config = dict(llm_config)
            llm_config = AutoConfig.for_model(llm_config.pop("model_type", "qwen3"), **llm_config)
        self.llm_config = llm_config
        if isinstance(vit_config, dict):
            vit_config = Siglip2NavitConfig(**vit_config)
        self.vit_config = vit_config
        self.visual_vocab_size = visual_vocab_size
        self.hidden_size = hidden_size
        self.conversation_formatter_class = conversation_formatter_class
'''

TEXT = dict(vocab_size=151936, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            max_position_embeddings=1024, rms_norm_eps=1e-6, bos_token_id=151643,
            eos_token_id=151645, pad_token_id=151643)
# (num_patches -1, the releases': the patch embedding a convolution, the
# position embedding (image_size/patch_size)^2 = 1024 rows)
VISION = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
              num_channels=3, num_patches=-1, image_size=512, patch_size=16,
              hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, hidden_stride=2,
              window_size=112, fullatt_block_indexes=None, temporal_patch_size=1,
              preserve_original_pe=True, use_rope=True)
# Ovis2.6-MoE's text model: Qwen3-MoE's, 4 experts of 64 rows, 2 a token
MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64)
VISUAL_VOCAB = 512
# the release's tokens at the ids vLLM's Ovis2_5Processor and ovis2_5.py
# expect (INDICATOR_IDS, IMAGE_PAD_TOKEN_ID)
SPECIAL = {"<unk>": 0, "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
           "<|image_pad|>": 151655, "<image>": 151669, "<video>": 151670,
           "<ovis_visual_atom>": 151671, "<ovis_image_start>": 151672,
           "<ovis_image_end>": 151673, "<ovis_video_start>": 151674, "<ovis_video_end>": 151675}


def make(out, tied=False, moe=False, naflex=False):
    import torch
    import transformers
    from ckpt_io import module_tensors, saved_tensors, save_shards, write_release_config
    from make_ckpt import word_tokenizer
    if moe:
        tcfg = transformers.Qwen3MoeConfig(**dict(TEXT, tie_word_embeddings=tied, **MOE))
    else:
        tcfg = transformers.Qwen3Config(**dict(TEXT, tie_word_embeddings=tied))
    vc = dict(VISION, num_patches=256) if naflex else VISION
    # (transformers' Siglip2 sizes its position embedding by num_patches:
    # the convolution's grid, (image_size/patch_size)^2, where it is -1)
    grid = vc["image_size"] // vc["patch_size"]
    vcfg = transformers.Siglip2VisionConfig(
        vision_use_head=False, num_patches=vc["num_patches"] if naflex else grid * grid,
        **{k: vc[k] for k in (
            "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_channels", "patch_size", "hidden_act", "layer_norm_eps")})
    torch.manual_seed(1234)
    stride2 = VISION["hidden_stride"] ** 2
    llm = (transformers.Qwen3MoeForCausalLM if moe else transformers.Qwen3ForCausalLM)(tcfg)
    # (transformers 5.19's Siglip2VisionModel names its tensors without the
    # vision_model. the release, and vLLM, has)
    mods = {"visual_tokenizer.vit.vision_model": transformers.Siglip2VisionModel(vcfg),
            "visual_tokenizer.head.0": torch.nn.Linear(VISION["hidden_size"] * stride2,
                                                       VISUAL_VOCAB - 4, bias=False),
            "visual_tokenizer.head.1": torch.nn.LayerNorm(VISUAL_VOCAB - 4),
            "vte": torch.nn.Embedding(VISUAL_VOCAB, TEXT["hidden_size"])}
    if not naflex:
        # the release's patch embedding: a convolution over 16-pixel
        # patches (transformers' Siglip2 has a linear)
        mods["visual_tokenizer.vit.vision_model.embeddings.patch_embedding"] = torch.nn.Conv2d(
            vc["num_channels"], vc["hidden_size"], vc["patch_size"], vc["patch_size"])
    sd = module_tensors(mods)
    # the text model as its save_pretrained writes it (without a tied
    # head; a MoE's experts one tensor each, the release's names)
    os.makedirs(out, exist_ok=True)
    sd.update({"llm." + k: t for k, t in saved_tensors(llm.to(torch.bfloat16), out).items()})
    assert "visual_tokenizer.vit.vision_model.encoder.layers.0.self_attn.q_proj.weight" in sd, sorted(sd)
    assert not any(".head.probe" in k for k in sd)
    groups = [sorted(k for k in sd if k.startswith(("visual_tokenizer.", "vte."))),
              sorted(k for k in sd if k.startswith("llm.model.layers.")),
              sorted(k for k in sd if k.startswith("llm.") and not k.startswith("llm.model.layers."))]
    save_shards(out, sd, groups)
    lc = tcfg.to_diff_dict()
    for k in ("transformers_version", "dtype", "torch_dtype"):
        lc.pop(k, None)
    if "num_local_experts" in lc:
        # (transformers 5.19's name for it; the releases' is num_experts)
        lc["num_experts"] = lc.pop("num_local_experts")
    lc.update(model_type=tcfg.model_type, tie_word_embeddings=tied,
               architectures=["Qwen3MoeForCausalLM" if moe else "Qwen3ForCausalLM"])
    write_release_config(out, {
        "architectures": ["Ovis2_6_MoeForCausalLM" if moe else "Ovis2_5"], "model_type": "ovis2_5",
        "auto_map": {"AutoConfig": "configuration_ovis2_5.Ovis2_5_Config"},
        "dtype": "bfloat16", "hidden_size": TEXT["hidden_size"],
        "visual_vocab_size": VISUAL_VOCAB, "conversation_formatter_class": "Qwen3ConversationFormatter",
        "llm_config": lc, "vit_config": dict(vc, model_type="siglip2_navit")},
        {"configuration_ovis2_5.py": CONFIG_PY})
    tok = word_tokenizer(tcfg, SPECIAL, "<|endoftext|>", "<|im_end|>", "<|im_start|>", "<unk>")
    tok.save_pretrained(out)
    transformers.SiglipImageProcessor(
        size={"height": 512, "width": 512}, resample=3, image_mean=[0.5] * 3,
        image_std=[0.5] * 3).save_pretrained(out)


def make_tied(out):
    """llm_config.tie_word_embeddings (Ovis2.5-2B's Qwen3-1.7B): no
    llm.lm_head.weight in the release."""
    make(out, tied=True)


def make_moe(out):
    """Ovis2.6-MoE (Ovis2_6_MoeForCausalLM): the same visual tokenizer
    beside a Qwen3-MoE text model, llm_config of model type qwen3_moe."""
    make(out, moe=True, naflex=True)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
