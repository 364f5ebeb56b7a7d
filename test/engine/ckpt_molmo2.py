"""AllenAI's Molmo2 (Molmo2ForConditionalGeneration, remote code), tiny, as
vLLM 0.32 reads it (model_executor/models/molmo2.py).

Neither transformers nor vLLM has Molmo2's modules under the release's
names, so the tensors are drawn here, of the shapes molmo2.py builds, under
the names its hf_to_vllm_mapper reads: the text model under
model.transformer. (wte.embedding and wte.new_embedding, blocks.N with
self_attn.att_proj (q, k, v stacked, with biases), attn_out, q_norm and
k_norm (olmo: over all heads), mlp.ff_proj (two halves) and ff_out,
attn_norm, ff_norm; ln_f) and lm_head; the vision backbone under
model.vision_backbone. (image_vit: patch_embedding, positional_embedding
and 2 resblocks of 64, 4 heads, attention.wq/wk/wv/wo and feed_forward.w1/w2
with biases, attention_norm, ffn_norm; image_pooling_2d wq/wk/wv/wo with
biases over both vit_layers' features; image_projector w1, w3, w2).

config.json: text_config, vit_config and adapter_config dicts, auto_map to
configuration_molmo2.py beside it, a minimal configuration for
trust_remote_code, and a stand-in processor that processes no image (the
releases' is AllenAI's remote code): the tests' prompts are text alone
(oracle.py)."""

CONFIG_PY = '''"""Molmo2's configuration, minimal, written for the wshard test
checkpoints: text, ViT and adapter sub-configs of the keys vLLM reads."""
from transformers import PretrainedConfig


class Molmo2SubConfig(PretrainedConfig):
    model_type = "molmo2_sub"

    def __init__(self, **kwargs):
        own = {k: kwargs.pop(k) for k in list(kwargs) if k not in PretrainedConfig().to_dict()}
        super().__init__(**kwargs)
        for k, v in own.items():
            setattr(self, k, v)


class Molmo2Config(PretrainedConfig):
    model_type = "molmo2"

    def __init__(self, text_config=None, vit_config=None, adapter_config=None, **kwargs):
        def sub(c):
            return c if isinstance(c, PretrainedConfig) else Molmo2SubConfig(**(c or {}))
        self.text_config = sub(text_config)
        self.vit_config = sub(vit_config)
        self.adapter_config = sub(adapter_config)
        super().__init__(**kwargs)
'''

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
        # Molmo2: its crops' sizes, margins and pooling
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

TEXT = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "vocab_size": 1000, "additional_vocab_size": 128, "qkv_bias": True,
        "num_hidden_layers": 2, "intermediate_size": 512, "hidden_act": "silu",
        "max_position_embeddings": 512, "rope_theta": 1000000.0, "use_qk_norm": True,
        "qk_norm_type": "olmo", "layer_norm_eps": 1e-6, "norm_after": False,
        "rope_scaling_layers": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}
VIT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
       "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
       "image_default_input_size": [56, 56], "image_patch_size": 14, "image_num_pos": 16}
ADAPTER = {"vit_layers": [-1, -2], "pooling_attention_mask": False, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
           "hidden_act": "silu", "intermediate_size": 128, "text_hidden_size": 256}


def shapes():
    """{name: shape} of the release's tensors."""
    T, V, A = TEXT, VIT, ADAPTER
    H, hd = T["hidden_size"], T["head_dim"]
    q, kv = T["num_attention_heads"] * hd, T["num_key_value_heads"] * hd
    s = {"model.transformer.wte.embedding": (T["vocab_size"], H),
         "model.transformer.wte.new_embedding": (T["additional_vocab_size"], H),
         "model.transformer.ln_f.weight": (H,), "lm_head.weight": (T["vocab_size"], H)}
    for n in range(T["num_hidden_layers"]):
        b = "model.transformer.blocks.%d." % n
        s.update({b + "attn_norm.weight": (H,), b + "ff_norm.weight": (H,),
                  b + "self_attn.att_proj.weight": (q + 2 * kv, H),
                  b + "self_attn.att_proj.bias": (q + 2 * kv,),
                  b + "self_attn.attn_out.weight": (H, q),
                  b + "self_attn.q_norm.weight": (q,), b + "self_attn.k_norm.weight": (kv,),
                  b + "mlp.ff_proj.weight": (2 * T["intermediate_size"], H),
                  b + "mlp.ff_out.weight": (H, T["intermediate_size"])})
    W, P = V["hidden_size"], V["image_patch_size"]
    vb = "model.vision_backbone."
    s.update({vb + "image_vit.positional_embedding": (V["image_num_pos"], W),
              vb + "image_vit.patch_embedding.weight": (W, P * P * 3),
              vb + "image_vit.patch_embedding.bias": (W,)})
    vq, vkv = V["num_attention_heads"] * V["head_dim"], V["num_key_value_heads"] * V["head_dim"]
    for n in range(V["num_hidden_layers"]):
        b = vb + "image_vit.transformer.resblocks.%d." % n
        for norm in ("attention_norm", "ffn_norm"):
            s.update({b + norm + ".weight": (W,), b + norm + ".bias": (W,)})
        for w, rows in (("wq", vq), ("wk", vkv), ("wv", vkv)):
            s.update({b + "attention.%s.weight" % w: (rows, W), b + "attention.%s.bias" % w: (rows,)})
        s.update({b + "attention.wo.weight": (W, vq), b + "attention.wo.bias": (W,),
                  b + "feed_forward.w1.weight": (V["intermediate_size"], W),
                  b + "feed_forward.w1.bias": (V["intermediate_size"],),
                  b + "feed_forward.w2.weight": (W, V["intermediate_size"]),
                  b + "feed_forward.w2.bias": (W,)})
    pool = W * len(A["vit_layers"])
    aq, akv = A["num_attention_heads"] * A["head_dim"], A["num_key_value_heads"] * A["head_dim"]
    p = vb + "image_pooling_2d."
    s.update({p + "wq.weight": (aq, pool), p + "wq.bias": (aq,), p + "wk.weight": (akv, pool),
              p + "wk.bias": (akv,), p + "wv.weight": (akv, pool), p + "wv.bias": (akv,),
              p + "wo.weight": (A["hidden_size"], aq), p + "wo.bias": (A["hidden_size"],)})
    j = vb + "image_projector."
    s.update({j + "w1.weight": (A["intermediate_size"], A["hidden_size"]),
              j + "w3.weight": (A["intermediate_size"], A["hidden_size"]),
              j + "w2.weight": (A["text_hidden_size"], A["intermediate_size"])})
    return s


def make(out):
    import os
    import torch
    import transformers
    from ckpt_io import save_shards, write_release_config
    from make_ckpt import word_tokenizer
    torch.manual_seed(1234)
    sd = {}
    for k, shape in shapes().items():
        base = 1.0 if k.endswith("norm.weight") else 0.0
        std = 0.02 if k.endswith(("norm.weight", "bias")) or "embedding" in k else \
            shape[-1] ** -0.5
        sd[k] = (base + torch.randn(shape) * std).to(torch.bfloat16)
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if k.startswith("model.vision_backbone.")),
              sorted(k for k in sd if not k.startswith("model.vision_backbone."))]
    save_shards(out, sd, groups)
    c = {"architectures": ["Molmo2ForConditionalGeneration"], "model_type": "molmo2",
         "auto_map": {"AutoConfig": "configuration_molmo2.Molmo2Config"},
         "torch_dtype": "bfloat16", "tie_word_embeddings": False,
         "image_patch_id": 1001, "image_start_token_id": 1002, "image_end_token_id": 1003,
         "text_config": dict(TEXT, bos_token_id=2, eos_token_id=1, pad_token_id=0),
         "vit_config": dict(VIT), "adapter_config": dict(ADAPTER)}
    write_release_config(out, c, {"configuration_molmo2.py": CONFIG_PY})
    tcfg = transformers.LlamaConfig(vocab_size=TEXT["vocab_size"])
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    word_tokenizer(tcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    write_stub_processor(out, "molmo2", "Molmo2Processor")


def write_stub_processor(out, module, name):
    """Writes processing_MODULE.py with the stand-in processor NAME into OUT,
    named by processor_config.json's and tokenizer_config.json's auto_map
    (Kanana-V's builder too)."""
    import json
    import os
    from ckpt_io import update_config
    with open(os.path.join(out, "processing_%s.py" % module), "w") as f:
        f.write(PROCESSOR_PY.replace("NAME", name))
    auto = {"auto_map": {"AutoProcessor": "processing_%s.%s" % (module, name)},
            "processor_class": name}
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump(auto, f, indent=2)
    update_config(out, lambda t: t.update(auto), "tokenizer_config.json")


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
