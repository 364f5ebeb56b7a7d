"""openPangu (vllm/model_executor/models/openpangu.py) as vLLM 0.32 reads it,
tiny, BF16, in the layout of Huawei's releases.  Three architectures share
vLLM's model file; each case is its own checkpoint:

  embedded  PanguEmbeddedForCausalLM (openPangu-Embedded-7B/1B): a Llama with
            biases on q, k, v AND o (config.json "bias": true), the
            rotary_emb.inv_freq buffers in the checkpoint (the 7B's index
            lists them).  Built by transformers' LlamaForCausalLM
            (attention_bias=True gives o_proj a bias too).
  ultra     PanguUltraMoEForCausalLM (openPangu-Ultra-MoE-718B): DeepSeek-V3's
            MLA + MoE (sigmoid router, one shared expert, first_k_dense_replace
            dense layers) plus sandwich norms (pre_mlp_layernorm,
            post_mlp_layernorm) and one MTP layer (layer L); no router bias
            (config.json has no router_enable_expert_bias; vLLM builds none).
            Built by transformers' DeepseekV3ForCausalLM.
  pro_v2    PanguProMoEV2ForCausalLM (openPangu-R-72B-2512): sink attention
            (one fused qkv_proj of q, k, v rows, head_dim qk_nope_dim +
            qk_rope_dim, v of v_channels, k_layernorm over a head,
            param_sink_key [S, kv, head_dim], param_sink_value [S, kv, v]),
            sandwich norms, MoE with two shared experts and the router bias
            as mlp.e_score_correction_bias (F32), one MTP layer.  transformers
            has no class with this attention: built by Glm4MoeForCausalLM
            (GQA + sigmoid MoE with shared experts and a router bias) and
            rewritten (attention tensors made anew, same seed).

None of the three model_types is known to transformers 5.19 or registered by
vLLM 0.32 (transformers_utils/configs has no Pangu config): config.json
carries auto_map to a minimal configuration_*.py written beside it, so vLLM
needs trust_remote_code=True.  No tokenizer (plain text decoders).

    make(out)                -> embedded
    make_embedded(out), make_ultra(out), make_pro_v2(out)
    python ckpt_openpangu.py OUT {embedded,ultra,pro_v2}
"""
import json
import os
import sys

CONFIG_PY = '''from transformers.configuration_utils import PretrainedConfig


class {cls}(PretrainedConfig):
    model_type = "{mt}"

    def __init__(self, pad_token_id=None, bos_token_id=1, eos_token_id=2,
                 tie_word_embeddings=False, **kwargs):
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id,
                         tie_word_embeddings=tie_word_embeddings, **kwargs)
'''


def _release(out, config, cfg_file, cfg_cls, model_type):
    from ckpt_io import write_release_config
    config = dict(config)
    config["model_type"] = model_type
    config["auto_map"] = {"AutoConfig": "%s.%s" % (cfg_file[:-3], cfg_cls)}
    write_release_config(out, config,
                         {cfg_file: CONFIG_PY.format(cls=cfg_cls, mt=model_type)})


def _rnd(g, shape, base=0.0):
    import torch
    return (base + torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16)


def make(out):
    make_embedded(out)


def make_embedded(out):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, add_to_first_shard
    from make_ckpt import COMMON
    kw = dict(COMMON)
    kw.pop("head_dim")               # the release has none: hidden/heads
    cfg = transformers.LlamaConfig(**kw, attention_bias=True, mlp_bias=False,
                                   rope_theta=16000000.0, rms_norm_eps=1e-5,
                                   tie_word_embeddings=False)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    hd = cfg.hidden_size // cfg.num_attention_heads
    inv = 1.0 / (16000000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    add_to_first_shard(out, {"model.layers.%d.self_attn.rotary_emb.inv_freq" % n: inv.clone()
                             for n in range(cfg.num_hidden_layers)})
    # openPangu-Embedded-7B's config.json (the keys vLLM reads)
    _release(out, {
        "architectures": ["PanguEmbeddedForCausalLM"], "bias": True,
        "attention_dropout": 0.0, "bos_token_id": 1, "pad_token_id": 0, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": cfg.hidden_size, "initializer_range": 0.02,
        "intermediate_size": cfg.intermediate_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "num_attention_heads": cfg.num_attention_heads,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads, "rms_norm_eps": 1e-05,
        "rope_theta": 16000000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "use_cache": True, "vocab_size": cfg.vocab_size},
        "configuration_openpangu_dense.py", "PanguEmbeddedConfig", "PanguEmbedded")


# Ultra-MoE: MLA as make_ckpt.MLA (kv_lora_rank + qk_rope_head_dim = 320, a
# head size vLLM's CPU MLA backend runs), 3 layers, layer 0 dense.
ULTRA = dict(num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
             q_lora_rank=128, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=64,
             v_head_dim=64, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
             moe_intermediate_size=128, first_k_dense_replace=1, n_group=1, topk_group=1,
             routed_scaling_factor=2.5, norm_topk_prob=True)


def _sandwich(out, layers):
    """pre_mlp_layernorm and post_mlp_layernorm beside each layer's norms."""
    import torch
    from ckpt_io import add_to_first_shard
    from safetensors import safe_open
    idx = json.load(open(os.path.join(out, "model.safetensors.index.json")))
    f = idx["weight_map"]["model.layers.0.input_layernorm.weight"]
    with safe_open(os.path.join(out, f), "pt") as s:
        h = s.get_tensor("model.layers.0.input_layernorm.weight").shape[0]
    g = torch.Generator().manual_seed(77)
    new = {}
    for n in range(layers):
        for k in ("pre_mlp_layernorm", "post_mlp_layernorm"):
            new["model.layers.%d.%s.weight" % (n, k)] = _rnd(g, [h], 1.0)
    add_to_first_shard(out, new)


def make_ultra(out, own_head=True, nextn=1):
    """openPangu-Ultra-MoE with an MTP layer (layer 3); without own_head
    (make_ultra_nohead) the MTP layer has no shared_head.head or
    embed_tokens (OpenPanguMTP then leaves both unfilled, and vLLM's
    proposer serves the draft with the target's); with nextn 2
    (make_ultra_nohead2) two such MTP layers (3 and 4)."""
    import torch
    import transformers
    from ckpt_io import perturb_and_save, rewrite_shards
    from make_ckpt import COMMON, add_mtp_layer
    kw = dict(COMMON)
    kw.pop("head_dim")
    kw.update(ULTRA)
    cfg = transformers.DeepseekV3Config(**kw, rope_theta=25600000.0, tie_word_embeddings=False)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.DeepseekV3ForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    # no router bias in openPangu-Ultra-MoE (vLLM: router_enable_expert_bias absent)
    rewrite_shards(out, lambda t: [t.pop(k) for k in list(t)
                                   if k.endswith(".e_score_correction_bias")])
    _sandwich(out, cfg.num_hidden_layers)
    with open(os.path.join(out, "config.json")) as f:
        written = json.load(f)
    # openPangu-Ultra-MoE-718B's config.json, the sizes tiny
    _release(out, {
        "architectures": ["PanguUltraMoEForCausalLM"], "attention_bias": False,
        "first_k_dense_replace": cfg.first_k_dense_replace, "hidden_act": "silu",
        "hidden_size": cfg.hidden_size, "initializer_range": 0.02,
        "intermediate_size": cfg.intermediate_size, "kv_lora_rank": cfg.kv_lora_rank,
        "max_position_embeddings": cfg.max_position_embeddings,
        "moe_intermediate_size": cfg.moe_intermediate_size,
        "n_routed_experts": cfg.n_routed_experts, "n_shared_experts": cfg.n_shared_experts,
        "norm_topk_prob": True, "num_attention_heads": cfg.num_attention_heads,
        "num_experts_per_tok": cfg.num_experts_per_tok,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads, "num_nextn_predict_layers": 0,
        "q_lora_rank": cfg.q_lora_rank, "qk_nope_head_dim": cfg.qk_nope_head_dim,
        "qk_rope_head_dim": cfg.qk_rope_head_dim, "rms_norm_eps": 1e-05,
        "rope_theta": 25600000, "routed_scaling_factor": 2.5, "sandwich_norm": True,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "v_head_dim": cfg.v_head_dim, "vocab_size": cfg.vocab_size,
        "bos_token_id": 1, "eos_token_id": 2},
        "configuration_openpangu_moe.py", "PanguUltraMoEConfig", "pangu_ultra_moe")
    del written
    add_mtp_layer(out, own_head=own_head, nextn=nextn)    # layer 3 (and 4), num_nextn_predict_layers: nextn


def make_ultra_nohead(out):
    make_ultra(out, own_head=False)


def make_ultra_nohead2(out):
    make_ultra(out, own_head=False, nextn=2)


# Pro-MoE V2 (openPangu-R-72B-2512: 64 heads, 4 kv heads, qk_nope_dim 128,
# qk_rope_dim 64, v_channels 128, 128 sink tokens with values, 80 routed and
# 2 shared experts, layers 0-3 dense), tiny: v_channels differs from
# head_dim so that the q, k and v parts differ; 16 sink tokens (a whole
# 16-token KV block, as vLLM's sink block table counts them).
PRO_V2 = dict(num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
              qk_nope_dim=48, qk_rope_dim=16, v_channels=32, param_sink_number=16,
              param_sink_with_value=True, n_routed_experts=8, n_shared_experts=2,
              num_experts_per_tok=2, moe_intermediate_size=64, first_k_dense_replace=1,
              routed_scaling_factor=2.5, norm_topk_prob=True)


def make_pro_v2(out):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, rewrite_shards
    from make_ckpt import COMMON, add_mtp_layer
    p = PRO_V2
    hd = p["qk_nope_dim"] + p["qk_rope_dim"]
    kw = dict(COMMON)
    kw.update(num_hidden_layers=p["num_hidden_layers"],
              num_attention_heads=p["num_attention_heads"],
              num_key_value_heads=p["num_key_value_heads"], head_dim=hd,
              n_routed_experts=p["n_routed_experts"], n_shared_experts=p["n_shared_experts"],
              num_experts_per_tok=p["num_experts_per_tok"],
              moe_intermediate_size=p["moe_intermediate_size"],
              first_k_dense_replace=p["first_k_dense_replace"], n_group=1, topk_group=1,
              routed_scaling_factor=2.5, norm_topk_prob=True, attention_bias=False,
              use_qk_norm=False, tie_word_embeddings=False)
    cfg = transformers.Glm4MoeConfig(**kw)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Glm4MoeForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    h, nh, kv, S, vc = (cfg.hidden_size, p["num_attention_heads"], p["num_key_value_heads"],
                        p["param_sink_number"], p["v_channels"])
    g = torch.Generator().manual_seed(99)

    def attn(t):
        for k in list(t):
            if ".self_attn." not in k:
                if k.endswith(".mlp.gate.e_score_correction_bias"):
                    # the release: mlp.e_score_correction_bias (vLLM maps it to
                    # mlp.gate.e_score_correction_bias), F32
                    t[k.replace(".mlp.gate.e_score_correction_bias",
                                ".mlp.e_score_correction_bias")] = t.pop(k).float()
                continue
            pre = k[:k.index(".self_attn.") + len(".self_attn.")]
            t.pop(k)
            if k.endswith("q_proj.weight"):
                # one fused projection: q rows, k rows, v rows
                t[pre + "qkv_proj.weight"] = _rnd(g, [nh * hd + kv * hd + kv * vc, h])
                t[pre + "o_proj.weight"] = _rnd(g, [h, nh * vc])
                t[pre + "k_layernorm.weight"] = _rnd(g, [hd], 1.0)
                t[pre + "param_sink_key"] = _rnd(g, [S, kv, hd])
                t[pre + "param_sink_value"] = _rnd(g, [S, kv, vc])
    rewrite_shards(out, attn)
    _sandwich(out, cfg.num_hidden_layers)
    _release(out, {
        "architectures": ["PanguProMoEV2ForCausalLM"], "hidden_act": "silu",
        "hidden_size": h, "intermediate_size": cfg.intermediate_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "num_attention_heads": nh, "num_key_value_heads": kv,
        "num_hidden_layers": cfg.num_hidden_layers, "num_nextn_predict_layers": 0,
        "qk_nope_dim": p["qk_nope_dim"], "qk_rope_dim": p["qk_rope_dim"], "v_channels": vc,
        "param_sink_number": S, "param_sink_with_value": True,
        "n_routed_experts": p["n_routed_experts"], "n_shared_experts": p["n_shared_experts"],
        "moe_intermediate_size": p["moe_intermediate_size"],
        "num_experts_per_tok": p["num_experts_per_tok"],
        "first_k_dense_replace": p["first_k_dense_replace"], "routed_scaling_factor": 2.5,
        "norm_topk_prob": True, "router_enable_expert_bias": True, "sandwich_norm": True,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": cfg.vocab_size,
        "bos_token_id": 1, "eos_token_id": 2},
        "configuration_openpangu_moe.py", "PanguProMoEV2Config", "pangu_pro_moe_v2")
    add_mtp_layer(out)               # layer 3, num_nextn_predict_layers: 1


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    {"embedded": make_embedded, "ultra": make_ultra, "pro_v2": make_pro_v2}[sys.argv[2]](sys.argv[1])
