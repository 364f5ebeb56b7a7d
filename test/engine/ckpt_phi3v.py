"""Phi-3-vision and Phi-3.5-vision (Phi3VForCausalLM, microsoft's remote
code, model_type phi3_v) as vLLM 0.32 reads them, tiny: transformers' Phi3
text model and CLIP vision model rewritten into the release's names
(model.*, model.vision_embed_tokens.img_processor.vision_model.*,
model.vision_embed_tokens.{glb_GN, sub_GN, img_projection.0/.2}, lm_head),
config.json and configuration_phi3_v.py as the release has them, the
release's vocabulary of 32064 (vLLM hard-codes the image placeholder
32044), a word-level tokenizer and a stand-in for the release's
processor (phi3v_processing.py, written into the checkpoint as
processing_phi3_v.py: vLLM needs one even for text prompts).

    make_phi3v(out)      the releases' form: the embedding stored once, as
                         model.embed_tokens.weight
    make_phi3v_wte(out)  the embedding also as
                         model.vision_embed_tokens.wte.weight (the remote
                         code's shared module saved twice)
"""
import json
import os

# Phi-3-vision (microsoft/Phi-3-vision-128k-instruct, Phi-3.5-vision-instruct):
# configuration_phi3_v.py as the release ships it, cut to the keys it sets
# (the release's is the same PretrainedConfig subclass with Phi-3's keys and
# embd_layer, img_processor).
PHI3V_CONFIG_PY = '''"""Phi-3-V model configuration (as microsoft's configuration_phi3_v.py)."""

from transformers.configuration_utils import PretrainedConfig


class Phi3VConfig(PretrainedConfig):
    model_type = "phi3_v"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(
        self,
        vocab_size=32064,
        hidden_size=3072,
        intermediate_size=8192,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=None,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attention_dropout=0.0,
        hidden_act="silu",
        max_position_embeddings=4096,
        original_max_position_embeddings=4096,
        initializer_range=0.02,
        rms_norm_eps=1e-5,
        use_cache=True,
        tie_word_embeddings=False,
        rope_theta=10000.0,
        rope_scaling=None,
        bos_token_id=1,
        eos_token_id=32000,
        pad_token_id=32000,
        sliding_window=None,
        embd_layer: str = "default",
        img_processor=None,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        if num_key_value_heads is None:
            num_key_value_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.resid_pdrop = resid_pdrop
        self.embd_pdrop = embd_pdrop
        self.attention_dropout = attention_dropout
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.original_max_position_embeddings = original_max_position_embeddings
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.use_cache = use_cache
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.sliding_window = sliding_window
        self.embd_layer = embd_layer
        self.img_processor = img_processor
        super().__init__(
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )
'''


# A stand-in for the release's processing_phi3_v.py (Phi3VProcessor, remote
# code): phi3v_processing.py beside this file, written into the
# checkpoint as processing_phi3_v.py.
PHI3V_PROCESSOR = os.path.join(os.path.dirname(os.path.realpath(__file__)),
                               "phi3v_processing.py")


def make_phi3v(out, wte=False):
    """Phi-3-vision as released: transformers' Phi3ForCausalLM (the text
    model, qkv_proj and gate_up_proj fused as Phi-3 ships them) and
    CLIPVisionModel (CLIP ViT-L/14-336's sizes: vLLM builds that tower
    whatever config.json says, phi3v.py CLIP_VIT_LARGE_PATCH14_336_CONFIG;
    2 of its 24 layers here, img_processor.layer_idx 0 so that vLLM builds
    one and drops the other and post_layernorm, as it drops the release's
    last layer at layer_idx -2), its tensors under
    model.vision_embed_tokens.img_processor., plus glb_GN, sub_GN and the
    two-linear img_projection (Sequential indices 0 and 2) made here.
    wte=True also writes model.vision_embed_tokens.wte.weight (the
    embedding again, as remote code that saves the shared module twice
    would): vLLM then loads it as a separate embed_tokens.weight."""
    import torch
    import transformers
    from ckpt_io import add_shard, noise, perturb_and_save, saved_tensors, write_release_config
    from make_ckpt import COMMON
    from safetensors.torch import load_file
    # the release's vocabulary: vLLM's image placeholder id is fixed at 32044
    kw = {k: v for k, v in COMMON.items() if k not in ("head_dim", "vocab_size")}
    cfg = transformers.Phi3Config(**kw, vocab_size=32064, tie_word_embeddings=False, rms_norm_eps=1e-5,
                                  pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    text = transformers.Phi3ForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(text, out)
    vcfg = transformers.CLIPVisionConfig(hidden_size=1024, intermediate_size=4096,
                                         num_attention_heads=16, num_hidden_layers=2,
                                         image_size=336, patch_size=14,
                                         hidden_act="quick_gelu", projection_dim=768)
    vis = transformers.CLIPVisionModel(vcfg).to(torch.bfloat16)
    t = {}
    for k, v in saved_tensors(vis, out).items():
        # transformers 5 saves CLIPVisionModel without its vision_model.
        # prefix; the release (transformers 4.38) has it
        if not k.startswith("vision_model."):
            k = "vision_model." + k
        t["model.vision_embed_tokens.img_processor." + k] = v
    H, D = cfg.hidden_size, 1024 * 4
    g = torch.Generator().manual_seed(7)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    p = "model.vision_embed_tokens."
    t[p + "glb_GN"] = rnd(1, 1, D)
    t[p + "sub_GN"] = rnd(1, 1, 1, D)
    t[p + "img_projection.0.weight"] = rnd(H, D)
    t[p + "img_projection.0.bias"] = rnd(H)
    t[p + "img_projection.2.weight"] = rnd(H, H)
    t[p + "img_projection.2.bias"] = rnd(H)
    if wte:
        emb = {}
        for f in sorted(os.listdir(out)):
            if f.endswith(".safetensors"):
                emb.update(load_file(os.path.join(out, f)))
        t[p + "wte.weight"] = emb["model.embed_tokens.weight"].clone()
    add_shard(out, "model-vision.safetensors", t)
    rel = {"_name_or_path": "Phi-3-vision-128k-instruct",
           "architectures": ["Phi3VForCausalLM"], "attention_dropout": 0.0,
           "auto_map": {"AutoConfig": "configuration_phi3_v.Phi3VConfig",
                        "AutoModelForCausalLM": "modeling_phi3_v.Phi3VForCausalLM"},
           "bos_token_id": 1, "embd_layer": {"embedding_cls": "image",
                                            "hd_transform_order": "sub_glb",
                                            "projection_cls": "mlp",
                                            "use_hd_transform": True,
                                            "with_learnable_separator": True},
           "embd_pdrop": 0.0, "eos_token_id": 2, "hidden_act": "silu",
           "hidden_size": H, "img_processor": {"image_dim_out": 1024,
                                                "model_name": "openai/clip-vit-large-patch14-336",
                                                "name": "clip_vision_model",
                                                "num_img_tokens": 144, "layer_idx": 0},
           "initializer_range": 0.02, "intermediate_size": cfg.intermediate_size,
           # (the release: 131072 with longrope; 4096 here, an image is ~2500 tokens)
           "max_position_embeddings": 4096,
           "model_type": "phi3_v", "num_attention_heads": cfg.num_attention_heads,
           "num_hidden_layers": cfg.num_hidden_layers,
           "num_key_value_heads": cfg.num_key_value_heads,
           "original_max_position_embeddings": 4096,
           "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
           "sliding_window": 4096,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16",
           "transformers_version": "4.38.1", "use_cache": True,
           "vocab_size": cfg.vocab_size}
    write_release_config(out, rel, {"configuration_phi3_v.py": PHI3V_CONFIG_PY})
    # vLLM's Phi3VMultiModalProcessor refuses skip_tokenizer_init: a
    # word-level tokenizer (the release's processor, Phi3VProcessor, is
    # remote code the test does not ship: oracle.py prompts text alone and
    # profiles no image)
    from make_ckpt import word_tokenizer
    special = {"<unk>": 0, "<s>": 1, "</s>": 2, "<|image|>": 32044}
    special.update({"<|image_%d|>" % (i + 1): 32045 + i for i in range(4)})
    tok = word_tokenizer(cfg, special, "<unk>", "</s>", "<s>", "<unk>")
    tok.save_pretrained(out)
    with open(os.path.join(out, "processing_phi3_v.py"), "w") as f:
        f.write(open(PHI3V_PROCESSOR).read())
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump({"auto_map": {"AutoProcessor": "processing_phi3_v.Phi3VProcessor"},
                   "processor_class": "Phi3VProcessor"}, f, indent=2)
    tc = os.path.join(out, "tokenizer_config.json")
    t = json.load(open(tc))
    t["auto_map"] = {"AutoProcessor": "processing_phi3_v.Phi3VProcessor"}
    t["processor_class"] = "Phi3VProcessor"
    with open(tc, "w") as f:
        json.dump(t, f, indent=2)


def make_phi3v_wte(out):
    make_phi3v(out, wte=True)
