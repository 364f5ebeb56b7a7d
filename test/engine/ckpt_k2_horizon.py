"""K2-Horizon (K2HorizonForCausalLM: IFM's K2-Horizon-375B-A23B, remote code,
model_type "k2_horizon") as vLLM 0.32 reads it, tiny.  transformers 5.19 has
no class for it and vLLM 0.32 registers no config class for it, so
config.json carries auto_map to a configuration_k2_horizon.py written beside
it (the release's keys): vLLM needs trust_remote_code.

The network is transformers' own Glm4MoeForCausalLM (GLM-4.5), whose
save_pretrained writes K2-Horizon's names for everything but the router's
bias: GQA without q/k norm or bias (q_proj, k_proj, v_proj, o_proj), dense
layers first (K2's mlp_only_layers [0, 1, 2]; here [0] = GLM's
first_k_dense_replace 1), then sigmoid-routed experts mlp.experts.E.*_proj
with a selection bias and num_shared_experts shared experts as one MLP
(mlp.shared_experts.*).  GLM's mlp.gate.e_score_correction_bias is
K2-Horizon's mlp.gate.bias (moe_gate_bias; kept BF16 here, vLLM holds it
F32).  The rope convention differs (K2 rotates rope_head_dim of each head's
channels, stored GPT-J-interleaved with the unrotated ones), which changes
no name or shape: what it changes is what vLLM does on loading (a fixed
per-head permutation of q_proj's and k_proj's rows).

    make(out)        the release's form: rope_head_dim = head_dim / 2,
                     no MoVA (mova_num_experts 0), no q/k norm, no attention
                     gate, one norm group, 1 shared expert, untied.
    make_full(out)   head_dim rope (rope_head_dim null: no permutation),
                     otherwise as make: the layout today's rules language
                     writes byte for byte.
    make_mova(out)   the MoVA form (value experts in the sparse layers'
                     attention, the release's other family member, 36B):
                     q/k norm per head over all channels, a softplus
                     attention gate (self_attn.gate_proj), 2 norm groups;
                     self_attn.v_router.weight/bias and
                     self_attn.v_experts.I.weight (seeded: no transformers
                     class) instead of v_proj in the MoE layers.
"""
import os

CONFIG_PY = '''"""K2HorizonConfig: the keys of IFM's configuration_k2_horizon.py
(K2-Horizon-375B-A23B), written for the wshard test checkpoints."""
from transformers.configuration_utils import PretrainedConfig


class K2HorizonConfig(PretrainedConfig):
    model_type = "k2_horizon"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(self, vocab_size=250624, hidden_size=6144, intermediate_size=16384,
                 num_hidden_layers=61, num_attention_heads=48, num_key_value_heads=8,
                 head_dim=128, rope_head_dim=None, hidden_act="silu",
                 max_position_embeddings=524288, initializer_range=0.01, rms_norm_eps=1e-6,
                 use_cache=True, tie_word_embeddings=False, rope_parameters=None,
                 attention_bias=False, attention_dropout=0.0, attention_gate_func=None,
                 query_key_norm=False, layernorm_num_groups=1, decoder_sparse_step=1,
                 moe_intermediate_size=1792, num_experts_per_tok=8, num_experts=192,
                 num_shared_experts=1, norm_topk_prob=True, moe_gate_bias=True,
                 router_score_func="sigmoid", router_scaling_factor=None,
                 mova_num_experts=0, mova_num_experts_per_tok=0, mlp_only_layers=None,
                 output_router_logits=False, router_aux_loss_coef=0.001,
                 use_sliding_window=False, sliding_window=None, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.rope_head_dim = rope_head_dim
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.use_cache = use_cache
        self.rope_parameters = rope_parameters or {"rope_theta": 10000000.0,
                                                   "rope_type": "default"}
        self.attention_bias = attention_bias
        self.attention_dropout = attention_dropout
        self.attention_gate_func = attention_gate_func
        self.query_key_norm = query_key_norm
        self.layernorm_num_groups = layernorm_num_groups
        self.decoder_sparse_step = decoder_sparse_step
        self.moe_intermediate_size = moe_intermediate_size
        self.num_experts_per_tok = num_experts_per_tok
        self.num_experts = num_experts
        self.num_shared_experts = num_shared_experts
        self.norm_topk_prob = norm_topk_prob
        self.moe_gate_bias = moe_gate_bias
        self.router_score_func = router_score_func
        self.router_scaling_factor = router_scaling_factor
        self.mova_num_experts = mova_num_experts
        self.mova_num_experts_per_tok = mova_num_experts_per_tok
        self.mlp_only_layers = [] if mlp_only_layers is None else mlp_only_layers
        self.output_router_logits = output_router_logits
        self.router_aux_loss_coef = router_aux_loss_coef
        self.use_sliding_window = use_sliding_window
        self.sliding_window = sliding_window
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
'''

AUTO_MAP = {"AutoConfig": "configuration_k2_horizon.K2HorizonConfig",
            "AutoModelForCausalLM": "modeling_k2_horizon.K2HorizonForCausalLM"}


def _make(out, rope_head_dim, mova=0, seed=1260, score="sigmoid"):
    import torch
    import transformers
    from ckpt_io import noise, save_shards, saved_tensors, write_release_config
    H, nh, kv, hd, V, I, E, I_moe, L = 256, 4, 2, 64, 1000, 512, 8, 128, 3
    cfg = transformers.Glm4MoeConfig(
        hidden_size=H, intermediate_size=I, num_hidden_layers=L, num_attention_heads=nh,
        num_key_value_heads=kv, head_dim=hd, vocab_size=V, max_position_embeddings=512,
        attention_bias=False, use_qk_norm=False, partial_rotary_factor=1.0,
        n_routed_experts=E, n_shared_experts=1, num_experts_per_tok=2,
        moe_intermediate_size=I_moe, first_k_dense_replace=1, n_group=1, topk_group=1,
        routed_scaling_factor=2.5, norm_topk_prob=True, tie_word_embeddings=False,
        rms_norm_eps=1e-6)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(seed)
    model = transformers.Glm4MoeForCausalLM(cfg).to(torch.bfloat16)
    sd = saved_tensors(model, out)
    g = torch.Generator().manual_seed(seed + 7)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    for n in range(L):
        p = "model.layers.%d." % n
        b = sd.pop(p + "mlp.gate.e_score_correction_bias", None)
        if b is not None:
            sd[p + "mlp.gate.bias"] = rnd(E, s=0.1)
        if mova:
            a = p + "self_attn."
            sd[a + "q_norm.weight"] = rnd(nh * hd, s=0.1, base=1.0)
            sd[a + "k_norm.weight"] = rnd(kv * hd, s=0.1, base=1.0)
            sd[a + "gate_proj.weight"] = rnd(nh * hd, H)
            if n >= 1:      # the sparse layers' attention is MoVA
                del sd[a + "v_proj.weight"]
                sd[a + "v_router.weight"] = rnd(mova, H)
                sd[a + "v_router.bias"] = rnd(mova, s=0.1)
                for i in range(mova):
                    sd[a + "v_experts.%d.weight" % i] = rnd(kv * hd, H)
    names = sorted(sd)
    half = len(names) // 2
    os.makedirs(out, exist_ok=True)
    save_shards(out, sd, [names[:half], names[half:]])
    c = {"architectures": ["K2HorizonForCausalLM"], "attention_bias": False,
         "attention_dropout": 0.0, "attention_gate_func": "softplus" if mova else None,
         "auto_map": AUTO_MAP, "bos_token_id": 0, "decoder_sparse_step": 1,
         "dtype": "bfloat16", "eos_token_id": 1, "head_dim": hd, "hidden_act": "silu",
         "hidden_size": H, "initializer_range": 0.01, "intermediate_size": I,
         "layernorm_num_groups": 2 if mova else 1, "max_position_embeddings": 512,
         "mlp_only_layers": [0], "model_type": "k2_horizon", "moe_gate_bias": True,
         "moe_intermediate_size": I_moe, "mova_num_experts": mova,
         "mova_num_experts_per_tok": 2 if mova else 0, "norm_topk_prob": True,
         "num_attention_heads": nh, "num_experts": E, "num_experts_per_tok": 2,
         "num_hidden_layers": L, "num_key_value_heads": kv, "num_shared_experts": 1,
         "output_router_logits": False, "pad_token_id": None,
         "query_key_norm": bool(mova), "rms_norm_eps": 1e-06, "rope_head_dim": rope_head_dim,
         "rope_parameters": {"rope_theta": 10000000.0, "rope_type": "default"},
         "router_aux_loss_coef": 0.0001, "router_scaling_factor": 2.5,
         "router_score_func": score, "sliding_window": None, "tie_word_embeddings": False,
         "transformers_version": "5.13.0", "use_cache": True, "use_sliding_window": False,
         "vocab_size": V}
    write_release_config(out, c, {"configuration_k2_horizon.py": CONFIG_PY})


def make(out):
    _make(out, rope_head_dim=32)


def make_softmax(out):
    _make(out, rope_head_dim=32, score="softmax")


def make_full(out):
    _make(out, rope_head_dim=None, seed=1261)


def make_mova(out):
    _make(out, rope_head_dim=32, mova=4, seed=1262)

