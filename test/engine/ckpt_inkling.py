"""Inkling (Thinking Machines) checkpoints as released, from transformers'
own InklingForCausalLM (make_ckpt.py's inkling case).

transformers 5.19 converts the release's names to its own only for
inkling_mm_model (conversion_mapping.py), so InklingForCausalLM's
save_pretrained writes its module names, which vLLM 0.32's
models/inkling cannot load.  released_inkling rewrites them as that
mapping reads them (its inverse): model.llm.*, attn.wq_du/wk_dv/wv_dv/
wr_du/wo_ud, the experts' w13_weight and the shared experts'
shared_w13_weight with gate and up rows interleaved (g0, u0, g1, u1, ...),
mlp.w13_dn the same for a dense MLP, the short convolutions in F32 (the
dtype transformers keeps them in), a multi-token-prediction layer
(model.mtp.*, which transformers neither builds nor writes, with its
chain norm and config.json's mtp_config, which vLLM's InklingMTP draft
reads); and
config.json as vLLM's InklingModelConfig reads it.
"""
import os


def interleave(gate, up, dim):
    """Rows (along dim) g0, u0, g1, u1, ...: transformers' Interleave
    reverse op, the release's order."""
    import torch
    return torch.stack((gate, up), dim=dim + 1).flatten(dim, dim + 1).contiguous()


RENAMES = (
    (".self_attn.q_proj.", ".attn.wq_du."), (".self_attn.k_proj.", ".attn.wk_dv."),
    (".self_attn.v_proj.", ".attn.wv_dv."), (".self_attn.r_proj.", ".attn.wr_du."),
    (".self_attn.o_proj.", ".attn.wo_ud."), (".self_attn.q_norm.", ".attn.q_norm."),
    (".self_attn.k_norm.", ".attn.k_norm."),
    (".self_attn.k_sconv.conv1d.", ".attn.k_sconv."),
    (".self_attn.v_sconv.conv1d.", ".attn.v_sconv."),
    (".self_attn.rel_logits_proj.", ".attn.rel_logits_proj."),
    (".attn_sconv.conv1d.", ".attn_sconv."), (".mlp_sconv.conv1d.", ".mlp_sconv."),
    (".input_layernorm.", ".attn_norm."), (".post_attention_layernorm.", ".mlp_norm."),
    (".mlp.gate.e_score_correction_bias", ".mlp.gate.bias"),
    (".mlp.experts.down_proj", ".mlp.experts.w2_weight"),
    (".mlp.shared_experts.down_proj", ".mlp.shared_experts.shared_w2_weight"),
    (".mlp.down_proj.weight", ".mlp.w2_md.weight"),
)
TOP = {"model.embed_tokens.weight": "model.llm.embed.weight",
       "model.embed_tokens.embed_norm.weight": "model.llm.embed_norm.weight",
       "model.norm.weight": "model.llm.norm.weight",
       "lm_head.weight": "model.llm.unembed.weight"}


def released_inkling(out, cfg):
    import glob
    import json
    from safetensors.torch import load_file, save_file
    from ckpt_io import update_config
    src = {}
    for f in sorted(glob.glob(os.path.join(out, "*.safetensors"))):
        src.update(load_file(f))
        os.remove(f)
    t = {}
    for k, v in src.items():
        if k in TOP:
            t[TOP[k]] = v
            continue
        k = "model.llm." + k[len("model."):]
        if k.endswith(".mlp.experts.gate_up_proj"):
            g, u = v.chunk(2, dim=1)
            t[k[:-len("gate_up_proj")] + "w13_weight"] = interleave(g, u, 1)
        elif k.endswith(".mlp.shared_experts.gate_proj"):
            up = src[k.replace("model.llm.", "model.", 1)[:-len("gate_proj")] + "up_proj"]
            t[k[:-len("gate_proj")] + "shared_w13_weight"] = interleave(v, up, 1)
        elif k.endswith(".mlp.gate_proj.weight"):
            up = src[k.replace("model.llm.", "model.", 1)[:-len("gate_proj.weight")]
                     + "up_proj.weight"]
            t[k[:-len("gate_proj.weight")] + "w13_dn.weight"] = interleave(v, up, 0)
        elif not k.endswith((".mlp.shared_experts.up_proj", ".mlp.up_proj.weight")):
            for a, b in RENAMES:
                k = k.replace(a, b)
            t[k] = v.float() if "sconv." in k else v
    # the release's multi-token-prediction layer (transformers builds
    # none): a dense sliding-window block, as layer 0, perturbed
    import torch
    g = torch.Generator().manual_seed(4321)
    h = cfg.hidden_size
    for k in [k for k in t if k.startswith("model.llm.layers.0.")]:
        v = t[k]
        t["model.mtp.layers.0.transformer_block." + k[len("model.llm.layers.0."):]] = \
            v + (torch.randn(v.shape, generator=g) * 0.02).to(v.dtype)
    for k, shape in (("hidden_norm.weight", [h]), ("embed_norm.weight", [h]),
                     ("input_proj.weight", [h, 2 * h])):
        t["model.mtp.layers.0." + k] = (torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16)
    # the norm after every depth (mtp_config.chain_hidden_post_norm)
    t["model.mtp.chain_norm.weight"] = (torch.randn([h], generator=g) * 0.02).to(torch.bfloat16)
    # three shards, the layers in the second and the MTP layer in the
    # third, as the release has its mtp.safetensors
    names = sorted(t)
    wm = {}
    for i, part in enumerate((
            [n for n in names if ".layers." not in n and not n.startswith("model.mtp.")],
            [n for n in names if n.startswith("model.llm.layers.")],
            [n for n in names if n.startswith("model.mtp.")])):
        fname = f"model-{i + 1:05d}-of-00003.safetensors"
        save_file({n: t[n] for n in part}, os.path.join(out, fname),
                  metadata={"format": "pt"})
        wm.update({n: fname for n in part})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f, indent=2)

    def config(c):
        og_text_config(c)
        # the MTP layer as config.json describes it for vLLM's draft
        # (config/speculative.py reads mtp_config): one depth, sliding-window
        # attention as layer 0's, the chain norm on
        c.update(architectures=["InklingForCausalLM"], num_nextn_predict_layers=1,
                 mtp_config={"num_nextn_predict_layers": 1, "chain_hidden_post_norm": True,
                             "local_layer_ids": [0]})
    update_config(out, config)


def og_text_config(c):
    """transformers' InklingTextConfig keys rewritten as the release's
    config.json has them and vLLM's InklingModelConfig reads them: the
    dense and MoE widths, dense_mlp_idx and local_layer_ids where
    transformers saves per-layer types, the switches transformers has no
    keys for (its model always has them on)."""
    dense = sum(1 for x in c.pop("mlp_layer_types") if x == "dense")
    c.update(model_type="inkling_model",
             dense_intermediate_size=c.pop("intermediate_size"),
             intermediate_size=c.pop("moe_intermediate_size"),
             sconv_kernel_size=c.pop("conv_kernel_size"),
             dense_mlp_idx=dense, use_embed_norm=True, use_sconv=True,
             use_global_scale=True, use_gate_bias=True,
             shared_expert_sink=True, gate_activation="sigmoid")
    c["local_layer_ids"] = [i for i, x in enumerate(c.pop("layer_types"))
                            if x == "hybrid_sliding"]


def released_inkling_mm(out, cfg):
    """InklingForConditionalGeneration: transformers 5.19 saves the
    release's tensor names itself (its inkling_mm_model conversion,
    reversed); config.json is rewritten as released, the text model's as
    og_text_config says and the towers' as vLLM's InklingVisionConfig and
    InklingAudioConfig read them (an HMLP patch encoder and a dMel
    embedding, each with its final norm, at the text model's width), with
    a tokenizer, which vLLM's Inkling processor needs to start (the
    prompts stay token ids)."""
    from ckpt_io import update_config
    from make_ckpt import word_tokenizer
    word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)

    def config(c):
        og_text_config(c["text_config"])
        h = c["text_config"]["hidden_size"]
        v, a = c["vision_config"], c["audio_config"]
        v.update(model_type="inkling_vision_model", vision_encoder_type="hmlp",
                 decoder_dmodel=h, n_channels=v.pop("num_channels"), use_vision_norm=True)
        a.update(model_type="inkling_audio_model", decoder_dmodel=h, dmel_min_value=-7.0,
                 dmel_max_value=2.0, use_audio_norm=True, audio_mode="dmel")
    update_config(out, config)
