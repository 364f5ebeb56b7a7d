"""TeleChat2 (TeleChat2ForCausalLM, model_type "telechat") as Tele-AI's
remote code saves it (Tele-AI/TeleChat2-3B, -7B, -35B, -115B), tiny.
transformers 5.19 has no TeleChat2 class (and no "telechat" model type),
so the model is transformers' LlamaForCausalLM (make_ckpt's COMMON sizes:
hidden 256, 2 layers, 4 heads, 2 kv heads of 64 (GQA, as the 115B; kv=4 is
the 3B/7B/35B's MHA), vocab 1000), built with attention_bias and mlp_bias,
the biases TeleChat2 lacks zeroed and dropped, rewritten into the release's
layout:

    model.embed_tokens                -> transformer.word_embeddings
    layers.N.                         -> transformer.h.N.
    self_attn.q_proj                  -> self_attention.query
    self_attn.k_proj + v_proj         -> self_attention.key_value, k and v
                                         interleaved by kv head: [kv, 2,
                                         head_dim] rows (modeling_telechat2.py
                                         views key_value's output as
                                         (kv, 2*head_dim) and splits the last
                                         dimension in two)
    self_attn.o_proj (+ bias)         -> self_attention.dense (+ bias)
    mlp.gate/up/down_proj (down bias) -> mlp.gate/up/down_proj (+ down bias)
    model.norm                        -> transformer.ln_f
    lm_head                           -> lm_head (untied, as released)

With q/k/v and gate/up biases zero and left out, Llama computes what
TeleChat2 does (rotate_half rope, RMSNorm, SwiGLU, o_proj and down_proj
biases).  config.json holds the release's keys (n_head, n_layer,
ffn_hidden_size, layer_norm_epsilon, num_key_value_heads, auto_map, ...) and
configuration_telechat2.py beside it (a minimal Telechat2Config with the
release's attribute_map, for trust_remote_code: transformers knows no
"telechat").  vLLM 0.32 needs trust_remote_code for it.
"""
import os

CONFIG_PY = '''"""TeleChat2's configuration (the keys of Tele-AI's
configuration_telechat2.py, written for the wshard test checkpoints)."""
from transformers.configuration_utils import PretrainedConfig


class Telechat2Config(PretrainedConfig):
    model_type = "telechat"
    keys_to_ignore_at_inference = ["past_key_values"]
    attribute_map = {
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "intermediate_size": "ffn_hidden_size",
        "rms_norm_eps": "layer_norm_epsilon",
    }

    def __init__(self, vocab_size=160256, hidden_size=4096, n_layer=30, n_head=32,
                 layer_norm_epsilon=1e-5, initializer_range=0.02, use_cache=True,
                 bos_token_id=1, eos_token_id=2, apply_residual_connection_post_layernorm=False,
                 hidden_dropout=0.0, attention_dropout=0.0, ffn_hidden_size=12288,
                 training_seqlen=8192, logn=True, embed_layernorm=False, hidden_act="silu",
                 **kwargs):
        self.vocab_size = vocab_size
        n_embed = kwargs.pop("n_embed", None)
        self.hidden_size = hidden_size if n_embed is None else n_embed
        self.n_layer = n_layer
        self.n_head = n_head
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.use_cache = use_cache
        self.apply_residual_connection_post_layernorm = apply_residual_connection_post_layernorm
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.logn = logn
        self.training_seqlen = training_seqlen
        self.embed_layernorm = embed_layernorm
        self.num_key_value_heads = kwargs.pop("num_key_value_heads", None)
        self.ffn_hidden_size = ffn_hidden_size
        self.hidden_act = hidden_act
        super().__init__(bos_token_id=bos_token_id, eos_token_id=eos_token_id, **kwargs)
'''


def make(out, kv=None, split_kv=False, no_kv_key=False):
    """Writes the checkpoint to OUT.  kv: kv heads (COMMON's 2, GQA; 4 for
    the MHA releases).  split_kv: key_value written as two tensors,
    self_attention.key.weight and self_attention.value.weight (no release
    has them: the twin a rules file without a key_value de-interleave can
    convert, to check everything else).  no_kv_key: config.json without
    num_key_value_heads."""
    import torch
    import transformers
    from ckpt_io import save_shards, write_release_config
    from make_ckpt import COMMON
    kw = dict(COMMON, bos_token_id=1, eos_token_id=2, pad_token_id=3,
              tie_word_embeddings=False, attention_bias=True, mlp_bias=True)
    if kv is not None:
        kw["num_key_value_heads"] = int(kv)
    cfg = transformers.LlamaConfig(**kw)
    torch.manual_seed(1234)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
        for layer in model.model.layers:
            for m in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                      layer.mlp.gate_proj, layer.mlp.up_proj):
                m.bias.zero_()
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    H = cfg.hidden_size
    hd = H // nh
    assert hd == cfg.head_dim
    new = {"transformer.word_embeddings.weight": sd.pop("model.embed_tokens.weight"),
           "transformer.ln_f.weight": sd.pop("model.norm.weight"),
           "lm_head.weight": sd.pop("lm_head.weight")}
    for n in range(cfg.num_hidden_layers):
        p, q = "model.layers.%d." % n, "transformer.h.%d." % n
        for b in ("q_proj", "k_proj", "v_proj"):
            sd.pop(p + "self_attn.%s.bias" % b)
        for b in ("gate_proj", "up_proj"):
            sd.pop(p + "mlp.%s.bias" % b)
        new[q + "self_attention.query.weight"] = sd.pop(p + "self_attn.q_proj.weight")
        k = sd.pop(p + "self_attn.k_proj.weight")
        v = sd.pop(p + "self_attn.v_proj.weight")
        if split_kv:
            new[q + "self_attention.key.weight"] = k
            new[q + "self_attention.value.weight"] = v
        else:
            new[q + "self_attention.key_value.weight"] = torch.cat(
                [k.view(nkv, 1, hd, H), v.view(nkv, 1, hd, H)], 1).reshape(2 * nkv * hd, H).contiguous()
        new[q + "self_attention.dense.weight"] = sd.pop(p + "self_attn.o_proj.weight")
        new[q + "self_attention.dense.bias"] = sd.pop(p + "self_attn.o_proj.bias")
        for m in ("gate_proj", "up_proj", "down_proj"):
            new[q + "mlp.%s.weight" % m] = sd.pop(p + "mlp.%s.weight" % m)
        new[q + "mlp.down_proj.bias"] = sd.pop(p + "mlp.down_proj.bias")
        new[q + "input_layernorm.weight"] = sd.pop(p + "input_layernorm.weight")
        new[q + "post_attention_layernorm.weight"] = sd.pop(p + "post_attention_layernorm.weight")
    assert not [k for k in sd if not k.endswith("inv_freq")], sd.keys()
    # a shard a layer, as the release's pytorch_model-0000N-of-... are
    os.makedirs(out, exist_ok=True)
    groups = [["transformer.word_embeddings.weight"]]
    for n in range(cfg.num_hidden_layers):
        groups.append(sorted(k for k in new if k.startswith("transformer.h.%d." % n)))
    groups.append(["transformer.ln_f.weight", "lm_head.weight"])
    save_shards(out, new, groups)
    c = {"apply_residual_connection_post_layernorm": False,
         "architectures": ["TeleChat2ForCausalLM"],
         "auto_map": {"AutoConfig": "configuration_telechat2.Telechat2Config",
                      "AutoModelForCausalLM": "modeling_telechat2.TeleChat2ForCausalLM"},
         "attention_dropout": 0.0, "bos_token_id": 1, "embed_layernorm": False,
         "eos_token_id": 2, "ffn_hidden_size": cfg.intermediate_size, "hidden_dropout": 0.0,
         "hidden_size": H, "initializer_range": 0.02, "layer_norm_epsilon": 1e-5,
         "logn": True, "model_type": "telechat", "n_head": nh, "n_layer": cfg.num_hidden_layers,
         "num_key_value_heads": nkv, "pad_token_id": 3, "training_seqlen": 8192,
         "base_seqlen": 8192, "max_position_embeddings": cfg.max_position_embeddings,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "transformers_version": "4.30.2", "use_cache": True, "vocab_size": cfg.vocab_size}
    if no_kv_key:
        del c["num_key_value_heads"]
    write_release_config(out, c, {"configuration_telechat2.py": CONFIG_PY})



def make_mha(out):
    """TeleChat2-3B/7B/35B's form: as many kv heads as heads."""
    make(out, kv=4)


if __name__ == "__main__":
    import sys
    kw = dict(a.split("=", 1) for a in sys.argv[2:])
    for b in ("split_kv", "no_kv_key"):
        if b in kw:
            kw[b] = kw[b] == "1"
    make(sys.argv[1], **kw)
