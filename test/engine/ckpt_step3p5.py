"""Step-3.5-Flash (Step3p5ForCausalLM, model_type step3p5) as stepfun-ai
releases it, tiny.  transformers 5.19 has no Step3p5ForCausalLM; its
Step3p7TextModel (model_type "step3p5", the text model of Step-3.7, which
transformers' conversion_mapping "step3p7" reads from the same release
names) is the closest class.  It is built with a random lm_head beside it and
rewritten into the release layout:

    layers.N.mlp.experts.gate_up_proj [E, 2I, H] -> layers.N.moe.gate_proj.weight [E, I, H]
                                                 +  layers.N.moe.up_proj.weight   [E, I, H]
    layers.N.mlp.experts.down_proj    [E, H, I]  -> layers.N.moe.down_proj.weight [E, H, I]
    layers.N.mlp.gate.weight          [E, H]     -> layers.N.moe.gate.weight
    layers.N.mlp.gate.e_score_correction_bias    -> layers.N.moe.router_bias (F32)
    layers.N.mlp.shared_experts.*                -> layers.N.share_expert.*
    (dense layers keep layers.N.mlp.{gate,up,down}_proj; attention keeps
     self_attn.{q,k,v,o,g}_proj and q_norm/k_norm)

Sizes: make_ckpt's COMMON (hidden 256, heads 4 of 64, 2 kv groups, vocab
1000) with 3 layers: 0 dense + full attention, 1 MoE + sliding window (8
heads: attention_other_setting), 2 MoE + full; 4 experts (top 2) of 128 and
a shared expert of 128; plus one MTP layer (model.layers.3.*: enorm, hnorm,
eh_proj, transformer.shared_head.norm/output and a decoder block with a dense
MLP and sliding-window attention), as the release ships
num_nextn_predict_layers of them past num_hidden_layers (layers 45-47 of
Step-3.5-Flash: dense, moe_layers_enum naming none of them, and
sliding_attention), the draft of vLLM's Step3p5MTP.  config.json holds
the release's keys (layer_types, moe_layers_enum as a string,
attention_other_setting, per-layer rope_theta/partial_rotary_factors, ...),
padded past num_hidden_layers for the MTP layer as the release pads them.
vLLM reads it with its own Step3p5Config (no remote code needed).
"""
import json
import os

N_LAYERS = 3
N_MTP = 1


def release_text_config(layer_types, moe_layers, router, experts, topk, n_mtp=0, tie=False,
                        pad_token_id=None):
    """config.json's text model as the Step-3.5 releases write it (Step-3.7's
    text_config alike), in make_ckpt.py's COMMON sizes: layer_types names
    each layer's kind, the n_mtp MTP layers' too; moe_layers the MoE layers
    ("1,2"), routed by router with experts of 128, topk a token."""
    from make_ckpt import COMMON
    H, nh, kv, hd = COMMON["hidden_size"], COMMON["num_attention_heads"], \
        COMMON["num_key_value_heads"], COMMON["head_dim"]
    L = len(layer_types)
    c = {"architectures": ["Step3p5ForCausalLM"], "model_type": "step3p5",
         "hidden_size": H, "intermediate_size": COMMON["intermediate_size"],
         "num_attention_heads": nh, "num_attention_groups": kv, "head_dim": hd,
         "num_hidden_layers": L - n_mtp, "max_seq_len": 512, "max_position_embeddings": 512,
         "vocab_size": COMMON["vocab_size"], "rms_norm_eps": 1e-5,
         "moe_intermediate_size": 128, "moe_num_experts": experts, "moe_top_k": topk,
         "moe_layers_enum": moe_layers, "share_expert_dim": 128,
         "norm_expert_weight": True, "moe_router_activation": router,
         "moe_router_scaling_factor": 3.0, "use_moe_router_bias": True,
         "need_fp32_gate": True, "att_impl_type": "GQA", "use_head_wise_attn_gate": True,
         "sliding_window": 32, "layer_types": layer_types,
         "use_rope_layers": [], "yarn_only_types": ["full_attention"],
         "rope_theta": [5000000.0 if t == "full_attention" else 10000.0 for t in layer_types],
         "partial_rotary_factors": [0.5 if t == "full_attention" else 1.0 for t in layer_types],
         "rope_scaling": None,
         "attention_other_setting": {"attention_type": "sliding_attention",
                                     "num_attention_heads": 2 * nh,
                                     "num_attention_groups": kv, "head_dim": hd,
                                     "true_head_dim": hd},
         "swiglu_limits": [0.0] * L, "swiglu_limits_shared": [0.0] * L,
         "num_nextn_predict_layers": n_mtp, "bos_token_id": 0, "eos_token_id": [1, 2]}
    if pad_token_id is not None:
        c["pad_token_id"] = pad_token_id
    c.update(tie_word_embeddings=tie, torch_dtype="bfloat16")
    return c


def make(out, moe_layers="1,2", tie=False, per_expert=False, router="sigmoid", experts=4,
         topk=2):
    """per_expert: the routed experts one tensor an expert and projection
    (model.layers.N.moe.experts.E.{gate,up,down}_proj.weight, [I, H], [I, H],
    [H, I]), the per-expert format vLLM 0.32's step3p5.py also reads (LLM
    Compressor's exports); the same values as the release's stacked form."""
    import torch
    import transformers
    from ckpt_io import save_shards
    from make_ckpt import COMMON
    H, nh, kv, hd = COMMON["hidden_size"], COMMON["num_attention_heads"], \
        COMMON["num_key_value_heads"], COMMON["head_dim"]
    V, I, Im, E = COMMON["vocab_size"], COMMON["intermediate_size"], 128, experts
    swa_heads = 2 * nh
    layer_types = ["full_attention", "sliding_attention", "full_attention", "sliding_attention"]
    moe_set = {int(x) for x in moe_layers.split(",")}
    cfg = transformers.Step3p7TextConfig(
        vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=N_LAYERS + N_MTP,
        num_attention_heads=nh, num_key_value_heads=kv, head_dim=hd,
        max_position_embeddings=512, n_routed_experts=E, num_experts_per_tok=topk,
        moe_intermediate_size=Im, share_expert_dim=Im, sliding_window=32,
        num_sliding_attention_heads=swa_heads, layer_types=layer_types[:N_LAYERS + N_MTP],
        mlp_layer_types=["sparse" if i in moe_set else "dense" for i in range(N_LAYERS + N_MTP)],
        tie_word_embeddings=tie, pad_token_id=0)
    torch.manual_seed(1234)
    model = transformers.Step3p7TextModel(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02) if p.dim() > 1 else p.add_(torch.randn_like(p) * 0.02)
    sd = {"model." + k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(7)
    new = {}
    for k, v in sd.items():
        k2 = k
        if ".mlp.experts.gate_up_proj" in k:
            p = k[:k.index(".mlp.experts.")]
            g, u = v.chunk(2, dim=1)
            new[p + ".moe.gate_proj.weight"] = g.contiguous()
            new[p + ".moe.up_proj.weight"] = u.contiguous()
            continue
        k2 = k2.replace(".mlp.experts.down_proj", ".moe.down_proj.weight")
        k2 = k2.replace(".mlp.gate.weight", ".moe.gate.weight")
        if k2.endswith(".mlp.gate.e_score_correction_bias"):
            k2 = k2.replace(".mlp.gate.e_score_correction_bias", ".moe.router_bias")
            v = (torch.randn(v.shape, generator=gen) * 0.1).float()
        k2 = k2.replace(".mlp.shared_experts.", ".share_expert.")
        new[k2] = v
    if not tie:
        new["lm_head.weight"] = (torch.randn(V, H, generator=gen) * 0.02).to(torch.bfloat16)
    # the MTP layer's own modules (step3p5_mtp.py): enorm, hnorm, eh_proj, shared_head
    for n in range(N_LAYERS, N_LAYERS + N_MTP):
        p = "model.layers.%d." % n
        bf = lambda *s: (torch.randn(*s, generator=gen) * 0.02).to(torch.bfloat16)
        new[p + "enorm.weight"] = bf(H)
        new[p + "hnorm.weight"] = bf(H)
        new[p + "eh_proj.weight"] = bf(H, 2 * H)
        new[p + "transformer.shared_head.norm.weight"] = bf(H)
        new[p + "transformer.shared_head.output.weight"] = bf(V, H)
    if per_expert:
        for k in [k for k in new if k.endswith((".moe.gate_proj.weight", ".moe.up_proj.weight",
                                                 ".moe.down_proj.weight"))]:
            v = new.pop(k)
            p, proj = k.rsplit(".moe.", 1)[0], k.rsplit(".", 2)[1]
            for e in range(v.shape[0]):
                new["%s.moe.experts.%d.%s.weight" % (p, e, proj)] = v[e].clone().contiguous()
    assert not [k for k in new if ".mlp.experts" in k or "shared_experts" in k], new.keys()
    # a layer a shard, embeddings and head apart, as the release's shards
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in new if k.startswith("model.embed_tokens"))]
    for n in range(N_LAYERS + N_MTP):
        groups.append(sorted(k for k in new if k.startswith("model.layers.%d." % n)))
    groups.append(sorted(k for k in new if k in ("model.norm.weight", "lm_head.weight")))
    save_shards(out, new, groups)
    c = release_text_config(layer_types[:N_LAYERS + N_MTP], moe_layers, router, experts, topk,
                            N_MTP, tie)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)



def make_per_expert(out):
    """The same values, the routed experts one tensor an expert."""
    make(out, per_expert=True)



def make_sqrtsoftplus(out):
    """Routed by sqrtsoftplus scores, which vLLM 0.32's CPU build runs (its
    router takes sigmoid scores only on a GPU): the same tensors, answers
    comparable; 64 experts, top 6, the fewest its top-k kernel takes."""
    make(out, router="sqrtsoftplus", experts=64, topk=6)


if __name__ == "__main__":
    import sys
    kw = dict(a.split("=", 1) for a in sys.argv[2:])
    for b in ("tie", "per_expert"):
        if b in kw:
            kw[b] = kw[b] == "1"
    make(sys.argv[1], **kw)
