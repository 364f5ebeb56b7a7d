"""DeepSeek-MoE (DeepseekForCausalLM: deepseek-ai/deepseek-moe-16b-base and
-chat, remote code, model_type "deepseek") as vLLM 0.32 reads it, tiny.
transformers 5.19 has no class for model type "deepseek" and vLLM 0.32
registers no config class for it, so config.json carries auto_map to a
configuration_deepseek.py written beside it (the release's keys and
defaults): vLLM needs trust_remote_code.

The network is transformers' own Glm4MoeForCausalLM (GLM-4.5), which is
DeepSeek-MoE's decoder once its options are set so: plain multi-head
attention (as many kv heads as heads, no q/k norm, no bias, rope over the
whole head: partial_rotary_factor 1), the first first_k_dense_replace layers
dense, then routed experts with n_shared_experts shared experts held as one
MLP n_shared_experts times moe_intermediate_size wide.  Its save_pretrained
writes the release's names already (model.layers.N.self_attn.q/k/v/o_proj,
mlp.gate.weight, mlp.experts.E.gate/up/down_proj, mlp.shared_experts.*,
mlp.gate/up/down_proj in dense layers); the one tensor DeepSeek-MoE does not
have, mlp.gate.e_score_correction_bias (GLM's sigmoid router), is dropped.

    make(out)        deepseek-moe-16b-base's form: layer 0 dense, then MoE in
                     every layer (moe_layer_freq 1), 8 routed experts of 128,
                     2 shared, softmax scoring, untied.
    make_freq2(out)  moe_layer_freq 2 (DeepSeek's class allows it; no release
                     uses it): 5 layers, MoE in layers 2 and 4 only (n >=
                     first_k_dense_replace and n % moe_layer_freq == 0), dense
                     MLPs (seeded, intermediate_size wide) in 0, 1 and 3.
"""
import os

CONFIG_PY = '''"""DeepseekConfig: the keys and defaults of DeepSeek-MoE's
configuration_deepseek.py (deepseek-ai/deepseek-moe-16b-base), written for
the wshard test checkpoints."""
from transformers.configuration_utils import PretrainedConfig


class DeepseekConfig(PretrainedConfig):
    model_type = "deepseek"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(self, vocab_size=102400, hidden_size=4096, intermediate_size=11008,
                 moe_intermediate_size=1407, num_hidden_layers=30, num_attention_heads=32,
                 num_key_value_heads=32, n_shared_experts=None, n_routed_experts=None,
                 num_experts_per_tok=None, moe_layer_freq=1, first_k_dense_replace=0,
                 norm_topk_prob=False, scoring_func="softmax", aux_loss_alpha=0.001,
                 seq_aux=True, hidden_act="silu", max_position_embeddings=2048,
                 initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True, pad_token_id=None,
                 bos_token_id=100000, eos_token_id=100001, pretraining_tp=1,
                 tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
                 attention_bias=False, attention_dropout=0.0, **kwargs):
        self.vocab_size = vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.moe_intermediate_size = moe_intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.n_shared_experts = n_shared_experts
        self.n_routed_experts = n_routed_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.moe_layer_freq = moe_layer_freq
        self.first_k_dense_replace = first_k_dense_replace
        self.norm_topk_prob = norm_topk_prob
        self.scoring_func = scoring_func
        self.aux_loss_alpha = aux_loss_alpha
        self.seq_aux = seq_aux
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
        self.attention_bias = attention_bias
        self.attention_dropout = attention_dropout
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id, tie_word_embeddings=tie_word_embeddings,
                         **kwargs)
'''

AUTO_MAP = {"AutoConfig": "configuration_deepseek.DeepseekConfig",
            "AutoModel": "modeling_deepseek.DeepseekModel",
            "AutoModelForCausalLM": "modeling_deepseek.DeepseekForCausalLM"}


def glm_config(H, nh, V, I, E, I_moe, shared, first_dense, layers, max_pos):
    """transformers' Glm4MoeConfig set up as DeepSeek-MoE: multi-head
    attention without q/k norms or biases, full rotary, one expert group
    (GLM's router correction bias, which DeepSeek-MoE lacks, is dropped by
    the callers)."""
    import transformers
    return transformers.Glm4MoeConfig(
        hidden_size=H, intermediate_size=I, num_hidden_layers=layers, num_attention_heads=nh,
        num_key_value_heads=nh, head_dim=H // nh, vocab_size=V, max_position_embeddings=max_pos,
        attention_bias=False, use_qk_norm=False, partial_rotary_factor=1.0,
        n_routed_experts=E, n_shared_experts=shared, num_experts_per_tok=2,
        moe_intermediate_size=I_moe, first_k_dense_replace=first_dense, n_group=1,
        topk_group=1, routed_scaling_factor=1.0, norm_topk_prob=False,
        tie_word_embeddings=False, rms_norm_eps=1e-6)


def _make(out, layers, moe_layer_freq, seed):
    import torch
    import transformers
    from ckpt_io import save_shards, saved_tensors, write_release_config
    H, nh, V, I, E, I_moe, shared, first_dense = 256, 4, 1000, 512, 8, 128, 2, 1
    cfg = glm_config(H, nh, V, I, E, I_moe, shared, first_dense, layers, 512)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(seed)
    model = transformers.Glm4MoeForCausalLM(cfg).to(torch.bfloat16)
    sd = saved_tensors(model, out)
    g = torch.Generator().manual_seed(seed + 7)
    for n in range(layers):
        p = "model.layers.%d.mlp." % n
        sd.pop(p + "gate.e_score_correction_bias", None)
        is_moe = n >= first_dense and n % moe_layer_freq == 0
        if n >= first_dense and not is_moe:
            # a dense layer between MoE layers (moe_layer_freq > 1)
            for k in [k for k in sd if k.startswith(p)]:
                del sd[k]
            for name, shape in (("gate_proj", (I, H)), ("up_proj", (I, H)),
                                ("down_proj", (H, I))):
                sd[p + name + ".weight"] = (torch.randn(*shape, generator=g) * 0.02).to(
                    torch.bfloat16)
    names = sorted(sd)
    half = len(names) // 2
    os.makedirs(out, exist_ok=True)
    save_shards(out, sd, [names[:half], names[half:]])
    c = {"architectures": ["DeepseekForCausalLM"], "attention_bias": False,
         "attention_dropout": 0.0, "auto_map": AUTO_MAP, "aux_loss_alpha": 0.001,
         "bos_token_id": 1, "eos_token_id": 2, "first_k_dense_replace": first_dense,
         "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02,
         "intermediate_size": I, "max_position_embeddings": 512, "model_type": "deepseek",
         "moe_intermediate_size": I_moe, "moe_layer_freq": moe_layer_freq,
         "n_routed_experts": E, "n_shared_experts": shared, "norm_topk_prob": False,
         "num_attention_heads": nh, "num_experts_per_tok": 2, "num_hidden_layers": layers,
         "num_key_value_heads": nh, "pretraining_tp": 1, "rms_norm_eps": 1e-06,
         "rope_scaling": None, "rope_theta": 10000, "scoring_func": "softmax",
         "seq_aux": True, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "transformers_version": "4.36.0", "use_cache": True, "vocab_size": V}
    write_release_config(out, c, {"configuration_deepseek.py": CONFIG_PY})


def make(out):
    _make(out, layers=3, moe_layer_freq=1, seed=1250)


def make_freq2(out):
    _make(out, layers=5, moe_layer_freq=2, seed=1251)


if __name__ == "__main__":
    import sys
    (make_freq2 if len(sys.argv) > 2 and sys.argv[2] == "freq2" else make)(sys.argv[1])
