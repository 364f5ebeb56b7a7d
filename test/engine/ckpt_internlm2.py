"""InternLM2 (InternLM2ForCausalLM; InternLM2ForRewardModel with reward=True)
as InternLM's remote code saves it (internlm/internlm2_5-7b-chat,
internlm2-chat-20b, internlm2-1_8b-reward), tiny.  Transformers has no
InternLM2 class, so the model is transformers' LlamaForCausalLM (make_ckpt's
COMMON sizes: hidden 256, 2 layers, 4 heads, 2 kv heads of 64, vocab 1000),
rewritten into the release's layout:

    model.embed_tokens            -> model.tok_embeddings
    layers.N.self_attn.q/k/v_proj -> layers.N.attention.wqkv, packed by kv
                                     group: [kv, q/kv + 2, head_dim] rows, each
                                     group's q heads, then its k head, then
                                     its v head (modeling_internlm2.py reads it
                                     'b q (h gs d) -> b q h gs d', gs = 2 + q/kv)
    layers.N.self_attn.o_proj     -> layers.N.attention.wo
    layers.N.mlp.gate/up/down     -> layers.N.feed_forward.w1 / w3 / w2
    layers.N.input_layernorm      -> layers.N.attention_norm
    layers.N.post_attention_layernorm -> layers.N.ffn_norm
    lm_head                       -> output (the reward model: none; v_head
                                     [1, H] instead, BF16 as released)

Llama's q/k (rotate_half rope) are InternLM2's as they are, so the model
computes what the Llama one does.  config.json holds the release's keys
(auto_map, bias, attn_implementation, rope_scaling, rope_theta, ...), and
configuration_internlm2.py beside it (a minimal config class with the
release's keys, for trust_remote_code: transformers knows no "internlm2").
Tensors are written in shards with an index, as released.
"""
import os

CONFIG_PY = '''"""InternLM2's configuration (the keys of InternLM's
configuration_internlm2.py, written for the wshard test checkpoints)."""
from transformers.configuration_utils import PretrainedConfig


class InternLM2Config(PretrainedConfig):
    model_type = "internlm2"
    _auto_class = "AutoConfig"

    def __init__(self, vocab_size=103168, hidden_size=4096, intermediate_size=11008,
                 num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=None,
                 hidden_act="silu", max_position_embeddings=2048, initializer_range=0.02,
                 rms_norm_eps=1e-6, use_cache=True, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2, pretraining_tp=1, tie_word_embeddings=False, bias=True,
                 rope_theta=10000, rope_scaling=None, attn_implementation=None, **kwargs):
        self.vocab_size = vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.bias = bias
        if num_key_value_heads is None:
            num_key_value_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.pretraining_tp = pretraining_tp
        self.use_cache = use_cache
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.attn_implementation = attn_implementation or "eager"
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id, tie_word_embeddings=tie_word_embeddings,
                         **kwargs)
'''


def release_names(sd, cfg):
    """Llama's tensors (sd, emptied) in InternLM2's names and wqkv packing;
    lm_head, where sd has it, as output."""
    import torch
    nh, kv, hd, H = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                     cfg.hidden_size)
    new = {"model.tok_embeddings.weight": sd.pop("model.embed_tokens.weight"),
           "model.norm.weight": sd.pop("model.norm.weight")}
    if "lm_head.weight" in sd:
        new["output.weight"] = sd.pop("lm_head.weight")
    for n in range(cfg.num_hidden_layers):
        p = "model.layers.%d." % n
        q = sd.pop(p + "self_attn.q_proj.weight").view(kv, nh // kv, hd, H)
        k = sd.pop(p + "self_attn.k_proj.weight").view(kv, 1, hd, H)
        v = sd.pop(p + "self_attn.v_proj.weight").view(kv, 1, hd, H)
        new[p + "attention.wqkv.weight"] = torch.cat([q, k, v], 1).reshape(
            (nh + 2 * kv) * hd, H).contiguous()
        for a, b in (("self_attn.o_proj", "attention.wo"), ("mlp.gate_proj", "feed_forward.w1"),
                     ("mlp.up_proj", "feed_forward.w3"), ("mlp.down_proj", "feed_forward.w2"),
                     ("input_layernorm", "attention_norm"),
                     ("post_attention_layernorm", "ffn_norm")):
            new[p + b + ".weight"] = sd.pop(p + a + ".weight")
    assert not [k for k in sd if not k.endswith("inv_freq")], sorted(sd)
    return new


def make(out, reward=False, rope_scaling=None):
    """Writes the checkpoint to OUT.  reward: InternLM2ForRewardModel
    (internlm2-1_8b-reward's form: no output, a v_head).  rope_scaling: the
    config's (internlm2_5-7b-chat ships {"type": "dynamic", "factor": 2.0};
    null keeps vLLM's default rope; the weights do not depend on it)."""
    import torch
    import transformers
    from ckpt_io import perturb, save_shards, write_release_config
    from make_ckpt import COMMON, word_tokenizer
    cfg = transformers.LlamaConfig(**dict(COMMON, bos_token_id=1, eos_token_id=2,
                                          pad_token_id=2, tie_word_embeddings=False))
    torch.manual_seed(1234)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    perturb(model)
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    nh, kv, H = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size
    new = release_names(sd, cfg)
    if reward:
        del new["output.weight"]
        gen = torch.Generator().manual_seed(6)
        new["v_head.weight"] = (torch.randn(1, H, generator=gen) * 0.05).to(torch.bfloat16)
    # shards as the release writes them: embeddings first, a layer a shard,
    # the head (and final norm) last
    os.makedirs(out, exist_ok=True)
    groups = [["model.tok_embeddings.weight"]]
    for n in range(cfg.num_hidden_layers):
        groups.append(sorted(k for k in new if k.startswith("model.layers.%d." % n)))
    groups.append(sorted(k for k in new if k in ("model.norm.weight", "output.weight",
                                                    "v_head.weight")))
    save_shards(out, new, groups)
    arch = "InternLM2ForRewardModel" if reward else "InternLM2ForCausalLM"
    auto = {"AutoConfig": "configuration_internlm2.InternLM2Config",
            "AutoModel": "modeling_internlm2." + arch}
    if not reward:
        auto["AutoModelForCausalLM"] = "modeling_internlm2.InternLM2ForCausalLM"
    c = {"architectures": [arch], "attn_implementation": "eager", "auto_map": auto,
         "bias": False, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
         "hidden_size": H, "initializer_range": 0.02,
         "intermediate_size": cfg.intermediate_size,
         "max_position_embeddings": cfg.max_position_embeddings, "model_type": "internlm2",
         "num_attention_heads": nh, "num_hidden_layers": cfg.num_hidden_layers,
         "num_key_value_heads": kv, "pad_token_id": 2, "pretraining_tp": 1,
         "rms_norm_eps": 1e-05, "rope_scaling": rope_scaling, "rope_theta": 1000000,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "transformers_version": "4.41.0", "use_cache": True,
         "vocab_size": cfg.vocab_size}
    if reward:
        c["reward_token_id"] = 3   # the release's 92527 ("[UNUSED_TOKEN_130]"), in range
    write_release_config(out, c, {"configuration_internlm2.py": CONFIG_PY})
    if reward:
        # vLLM's pooling runner tokenizes; InternLM2's own tokenizer is
        # sentencepiece remote code: a word-level one with its unk/bos/eos ids
        word_tokenizer(cfg, {"<unk>": 0, "<s>": 1, "</s>": 2, "<reward>": 3},
                       "</s>", "</s>", "<s>", "<unk>").save_pretrained(out)


def make_reward(out):
    make(out, reward=True)
