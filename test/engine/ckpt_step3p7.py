"""Step-3.7-Flash (Step3p7ForConditionalGeneration, model_type step3p7) as
stepfun-ai releases it, tiny: transformers' own Step3p7ForConditionalGeneration
(its Step3p7TextModel, the Step-3.5 text model, and the Perception Encoder
tower), saved by save_pretrained, which writes the release's names through
transformers' conversion_mapping "step3p7" / "step3p5_vision" in reverse:

    vision_model.conv1, ln_pre, positional_embedding, vit_downsampler1/2,
    vision_model.transformer.resblocks.N.{attn.in_proj_weight/bias (q, k, v
    rows), attn.out_proj, ln_1, ln_2, ls_1.gamma, ls_2.gamma, mlp.c_fc,
    mlp.c_proj}, vit_large_projector.weight;
    model.embed_tokens, model.norm, lm_head, model.layers.N.* as Step-3.5's
    (moe.gate_proj / moe.up_proj [E, I, H], moe.down_proj [E, H, I],
    moe.gate, moe.router_bias, share_expert.*).

moe.router_bias is rewritten in F32 with noise, as ckpt_step3p5 writes it
(the release's dtype).  Sizes: make_ckpt's COMMON text model (hidden
256, heads 4 of 64, 2 kv groups, vocab 1000) with 3 layers as ckpt_step3p5's
(0 dense + full attention, 1 MoE + sliding window with 8 heads, 2 MoE + full),
4 experts (top 2) of 128, a shared expert of 128; the tower 2 blocks of 64
(4 heads, MLP 128), 56-pixel images in 14-pixel patches.

config.json holds the release's keys (the tower's width/heads/layers/
ls_init_value and use_* flags, the text model's layer_types, moe_layers_enum,
attention_other_setting, per-layer rope_theta/partial_rotary_factors ...),
which transformers' Step3p7Config partly renames or drops as it reads them;
vLLM reads the dropped ones from --hf-overrides (oracle.py's
step3p7_overrides).  Beside it, a word-level tokenizer with the image tokens
of vLLM's Step-3 VL processor, which vLLM needs to start.  Routed by sigmoid
scores as the release: vLLM 0.32's CPU build loads it (bytes) but routes
sigmoid scores on a GPU only.
"""
import json
import os

from ckpt_step3p5 import release_text_config

N_LAYERS = 3


def make(out, router="sigmoid", experts=4, topk=2):
    import torch
    import transformers
    from ckpt_io import written_tensors, save_shards
    from make_ckpt import COMMON
    H, nh, kv, hd = COMMON["hidden_size"], COMMON["num_attention_heads"], \
        COMMON["num_key_value_heads"], COMMON["head_dim"]
    V, I, Im, E = COMMON["vocab_size"], COMMON["intermediate_size"], 128, experts
    W, VH, VL, IMG, P = 64, 4, 2, 56, 14
    swa_heads = 2 * nh
    layer_types = ["full_attention", "sliding_attention", "full_attention"]
    moe_layers = "1,2"
    moe_set = {int(x) for x in moe_layers.split(",")}
    image_token = V - 1
    vc = dict(width=W, layers=VL, heads=VH, image_size=IMG, patch_size=P, mlp_ratio=2.0,
              hidden_act="quick_gelu", ls_init_value=0.1)
    tc = dict(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=N_LAYERS,
              num_attention_heads=nh, num_key_value_heads=kv, head_dim=hd,
              max_position_embeddings=512, n_routed_experts=E, num_experts_per_tok=topk,
              moe_intermediate_size=Im, share_expert_dim=Im, sliding_window=32,
              num_sliding_attention_heads=swa_heads, layer_types=layer_types,
              mlp_layer_types=["sparse" if i in moe_set else "dense" for i in range(N_LAYERS)],
              tie_word_embeddings=False, pad_token_id=0)
    cfg = transformers.Step3p7Config(vision_config=vc, text_config=tc, image_token_id=image_token,
                                     projector_bias=False)
    torch.manual_seed(1234)
    model = transformers.Step3p7ForConditionalGeneration(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02) if p.dim() > 1 else p.add_(torch.randn_like(p) * 0.02)
    sd = written_tensors(model.save_pretrained)[0]
    gen = torch.Generator().manual_seed(7)
    for k in [k for k in sd if k.endswith(".moe.router_bias")]:
        sd[k] = (torch.randn(sd[k].shape, generator=gen) * 0.1).float()
    want = {"vision_model.conv1.weight", "vit_large_projector.weight",
            "vision_model.transformer.resblocks.0.attn.in_proj_weight",
            "model.layers.1.moe.gate_proj.weight", "model.layers.1.moe.router_bias",
            "lm_head.weight"}
    assert want <= set(sd), sorted(want - set(sd))
    assert sd["model.layers.1.moe.gate_proj.weight"].shape == (E, Im, H)
    # the tower and projector, a layer a shard, then the norm and head
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if k.startswith(("vision_model.", "vit_large_projector"))),
              sorted(k for k in sd if k.startswith("model.embed_tokens"))]
    for n in range(N_LAYERS):
        groups.append(sorted(k for k in sd if k.startswith("model.layers.%d." % n)))
    groups.append(sorted(k for k in sd if k in ("model.norm.weight", "lm_head.weight")))
    assert sum(len(g) for g in groups) == len(sd)
    save_shards(out, sd, groups)
    text = release_text_config(layer_types, moe_layers, router, experts, topk, pad_token_id=0)
    vision = {"model_type": "step3p5_vision", "width": W, "layers": VL, "heads": VH,
              "image_size": IMG, "patch_size": P, "mlp_ratio": 2.0, "hidden_act": "quick_gelu",
              "ls_init_value": 0.1, "output_dim": None, "use_abs_posemb": True,
              "use_cls_token": False, "use_ln_pre": True, "use_ln_post": False,
              "use_rope2d": True}
    c = {"architectures": ["Step3p7ForConditionalGeneration"], "model_type": "step3p7",
         "projector_bias": False, "image_token_id": image_token, "text_config": text,
         "vision_config": vision, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    # vLLM's Step-3 VL processor needs a tokenizer with its image tokens to
    # start (the prompts stay token ids)
    step3_tokenizer(out, V, image_token, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3})


def step3_tokenizer(out, V, image_token, special):
    """Writes into OUT a word-level tokenizer of V ids holding special (pad,
    eos, bos and unk at their ids) and Step-3's image tokens: <im_start>,
    <im_end>, <patch_start>, <patch_end> and <patch_newline> from V - 7 on,
    <im_patch> at image_token."""
    import transformers
    from make_ckpt import word_tokenizer
    special = dict(special)
    for i, t in enumerate(("<im_start>", "<im_end>", "<patch_start>", "<patch_end>",
                           "<patch_newline>")):
        special[t] = V - 7 + i
    special["<im_patch>"] = image_token
    word_tokenizer(transformers.PretrainedConfig(vocab_size=V), special,
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def make_sqrtsoftplus(out):
    """Routed by sqrtsoftplus scores, which vLLM 0.32's CPU build runs (as
    ckpt_step3p5's make_sqrtsoftplus): the same layout, answers comparable
    (text prompts: the tower is loaded, not run); 64 experts, top 6, the
    fewest its top-k kernel takes."""
    make(out, router="sqrtsoftplus", experts=64, topk=6)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
