"""An EAGLE-1 speculative draft for make_ckpt.py's llama target, laid out
as EAGLE's own releases ship one (yuhuili/EAGLE-LLaMA3-Instruct-8B):
config.json a LlamaConfig naming LlamaForCausalLM (model_type llama),
one decoder layer; the tensors

    embed_tokens.weight  the target's embedding (EAGLE trains the draft
                         with it frozen and saves it)
    fc.weight            [hidden, 2*hidden], no bias: the token's
                         embedding beside the target's hidden state,
                         projected to one
    layers.0.*           one Llama decoder layer without input_layernorm
                         (EAGLE's first layer has none)

and no final norm or LM head (the draft uses the target's).  The layer is
transformers' own LlamaDecoderLayer, fc an nn.Linear.  vLLM builds it for
speculative_config method "eagle" as EagleLlamaForCausalLM
(model_executor/models/llama_eagle.py).  fc maps the hidden state half to
itself (an identity, beside small random weights): the draft's output is
near the target's last hidden state, which the target's head then turns
into the token the target just chose, so that the draft proposes a
repeat and the target, whose greedy answers repeat tokens, accepts some;
the oracle compares the counts of accepted tokens.  make(out) writes the
draft into OUT."""
import json
import os
import tempfile

from ckpt_io import draft_config, module_tensors, save_draft


def target_tensors(arch, *names):
    """{NAME: tensor} of the names of make_ckpt.py's checkpoint of arch
    (built into a folder then removed): the target's embedding and head
    the drafts share.  Each must be there."""
    from safetensors.torch import load_file
    import make_ckpt
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        make_ckpt.make(arch, tmp)
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".safetensors"):
                t = load_file(os.path.join(tmp, f))
                got.update({n: t[n].clone() for n in names if n in t})
    assert set(got) == set(names), (arch, sorted(set(names) - set(got)))
    return got


def make(out, embed=True, fc_bias=False):
    import torch
    import torch.nn as nn
    import transformers
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer
    import make_ckpt
    cfg = transformers.LlamaConfig(**dict(make_ckpt.COMMON, num_hidden_layers=1))
    h = cfg.hidden_size
    torch.manual_seed(4322)
    layer = LlamaDecoderLayer(cfg, layer_idx=0)
    del layer.input_layernorm
    fc = nn.Linear(2 * h, h, bias=fc_bias)
    tensors = module_tensors({"layers.0": layer, "fc": fc})
    tensors["fc.weight"][:, h:] += torch.eye(h, dtype=torch.bfloat16)
    if embed:
        tensors["embed_tokens.weight"] = \
            target_tensors("llama", "model.embed_tokens.weight")["model.embed_tokens.weight"]
    save_draft(out, tensors, draft_config(
        cfg, architectures=["LlamaForCausalLM"], model_type="llama",
        tie_word_embeddings=False))


def make_noembed(out):
    """The draft of make() without the embedding (a release that leaves
    the target's out): vLLM's draft takes the target's."""
    make(out, embed=False)


def make_fcbias(out):
    """The draft of make() with a bias on fc, as EAGLE's cnets1.py makes
    one by default (yuhuili/EAGLE-llama2-chat-7B): vLLM 0.32's fc has no
    bias and its loader drops the checkpoint's."""
    make(out, fc_bias=True)


def make_minicpm(out):
    """An EAGLE-1 draft for make_ckpt.py's minicpm target (MiniCPM's own
    EAGLE head, vLLM 0.32's EagleMiniCPMForCausalLM, minicpm_eagle.py):
    config.json MiniCPM's (its remote-code configuration, naming
    MiniCPMForCausalLM, with the target's muP scales), and the names vLLM's
    load_weights takes as they are: model.fc.weight [hidden, 2*hidden],
    model.input_norm1 (the scaled embedding's) and model.input_norm2 (the
    hidden state's), one decoder layer model.eagle_layers.0.* in Llama's
    names (transformers' LlamaDecoderLayer, its input_layernorm kept),
    model.norm (built, unused by vLLM's forward), the target's embedding as
    model.embed_tokens.weight and the target's (tied) head as
    lm_head.weight.  fc maps the hidden half to itself, as make()'s."""
    import torch
    import torch.nn as nn
    import transformers
    from safetensors.torch import save_file
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm
    import ckpt_minicpm
    import make_ckpt
    cfg = transformers.LlamaConfig(**dict(make_ckpt.COMMON, num_hidden_layers=1))
    h = cfg.hidden_size
    torch.manual_seed(4323)
    mods = {"model.eagle_layers.0": LlamaDecoderLayer(cfg, layer_idx=0),
            "model.fc": nn.Linear(2 * h, h, bias=False),
            "model.input_norm1": LlamaRMSNorm(h, cfg.rms_norm_eps),
            "model.input_norm2": LlamaRMSNorm(h, cfg.rms_norm_eps),
            "model.norm": LlamaRMSNorm(h, cfg.rms_norm_eps)}
    tensors = module_tensors(mods)
    tensors["model.fc.weight"][:, h:] += torch.eye(h, dtype=torch.bfloat16)
    e = target_tensors("minicpm", "model.embed_tokens.weight")["model.embed_tokens.weight"]
    tensors["model.embed_tokens.weight"] = e
    tensors["lm_head.weight"] = e.clone()
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    ckpt_minicpm._release_config(out, cfg, {"model_type": "minicpm",
                                            "tie_word_embeddings": False})


def make_llama4(out):
    """An EAGLE-1 draft for make_ckpt.py's llama4 target (vLLM 0.32's
    EagleLlama4ForCausalLM, llama4_eagle.py): config.json a Llama4TextConfig
    naming Llama4ForCausalLM with one dense layer (no MoE layer: vLLM
    asserts moe_layers empty), yoco_global_kv_layer and yoco_local_kv_layer
    null (vLLM reads both) and draft_vocab_size (its LM head's rows); the
    tensors embed_tokens.weight (the target's), fc.weight [hidden,
    2*hidden], layers.0.* (transformers' Llama4TextDecoderLayer, q and k in
    transformers' interleaved rotary layout, which vLLM's load_weights
    permutes), norm.weight and lm_head.weight (the target's head).  fc maps
    the hidden half to itself, as make()'s."""
    import torch
    import torch.nn as nn
    import transformers
    from transformers.models.llama4.modeling_llama4 import (Llama4TextDecoderLayer,
                                                            Llama4TextRMSNorm)
    import make_ckpt
    kw = dict(make_ckpt.COMMON)
    kw.update(make_ckpt.LLAMA4)
    kw.update(num_hidden_layers=1, no_rope_layers=[1])
    cfg = transformers.Llama4TextConfig(**kw)
    assert not cfg.moe_layers
    h = cfg.hidden_size
    torch.manual_seed(4324)
    mods = {"layers.0": Llama4TextDecoderLayer(cfg, layer_idx=0),
            "fc": nn.Linear(2 * h, h, bias=False),
            "norm": Llama4TextRMSNorm(h, cfg.rms_norm_eps)}
    tensors = module_tensors(mods)
    tensors["fc.weight"][:, h:] += torch.eye(h, dtype=torch.bfloat16)
    t = target_tensors("llama4", "model.embed_tokens.weight", "lm_head.weight")
    tensors["embed_tokens.weight"] = t["model.embed_tokens.weight"]
    tensors["lm_head.weight"] = t["lm_head.weight"]
    save_draft(out, tensors, draft_config(
        cfg, architectures=["Llama4ForCausalLM"], draft_vocab_size=cfg.vocab_size,
        yoco_global_kv_layer=None, yoco_local_kv_layer=None))



def make_cohere2(out):
    """An EAGLE-1 draft for make_ckpt.py's cohere2 target (vLLM 0.32's
    EagleCohereForCausalLM, cohere_eagle.py, which reads the layer's
    attention from config.layer_types as Cohere2's: the draft's config is
    vLLM's EAGLEConfig, never a CohereConfig, so its layers are Cohere2's,
    their layer_types put after the target's): config.json the target's
    Cohere2Config with one sliding-window layer, naming CohereForCausalLM
    (vLLM's Eagle name for it: EagleCohereForCausalLM); the tensors under
    model. as vLLM's load_weights takes them: model.fc.weight [hidden,
    2*hidden] and model.fc.bias (Cohere's drafts have one),
    model.layers.0.* (transformers' Cohere2DecoderLayer) and
    model.norm.weight (a LayerNorm without bias); no embedding or head (the
    draft uses the target's).  fc maps the hidden half to itself, as
    make()'s."""
    import torch
    import torch.nn as nn
    import transformers
    from transformers.models.cohere2.modeling_cohere2 import (Cohere2DecoderLayer,
                                                              Cohere2LayerNorm)
    import make_ckpt
    with tempfile.TemporaryDirectory() as tmp:
        make_ckpt.make("cohere2", tmp)
        with open(os.path.join(tmp, "config.json")) as f:
            c = json.load(f)
    c.update(num_hidden_layers=1, layer_types=["sliding_attention"])
    c.pop("sliding_window_pattern", None)
    cfg = transformers.Cohere2Config(**{k: v for k, v in c.items()
                                        if k not in ("architectures", "model_type")})
    h = cfg.hidden_size
    torch.manual_seed(4325)
    mods = {"model.layers.0": Cohere2DecoderLayer(cfg, layer_idx=0),
            "model.fc": nn.Linear(2 * h, h, bias=True),
            "model.norm": Cohere2LayerNorm(hidden_size=h, eps=cfg.layer_norm_eps)}
    tensors = module_tensors(mods)
    tensors["model.fc.weight"][:, h:] += torch.eye(h, dtype=torch.bfloat16)
    save_draft(out, tensors, dict(c, architectures=["CohereForCausalLM"]))
