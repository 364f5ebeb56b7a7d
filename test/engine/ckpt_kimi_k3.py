"""Kimi K3 (KimiK3ForConditionalGeneration) as vLLM 0.32 reads it, tiny.

transformers 5.19 has no Kimi K3 class (model_type kimi_k3 is vLLM's own
config, vllm/transformers_utils/configs/kimi_k3.py).  The closest class,
transformers' KimiLinearForCausalLM, builds the text model (embedding, KDA
q/k/v/b/f_a/f_b/conv/A_log/dt_bias/o_norm/o_proj, q-LoRA MLA, dense MLP,
router, correction bias, shared expert, head); the tensors K3 adds or
changes are then written in the release's layout, from a fixed seed:

  - KDA: the full-rank output gate g_proj [P, H] (use_full_rank_gate) in
    place of Kimi Linear's g_a_proj/g_b_proj; A_log 1-D [heads]
    zero-padded to head_dim entries as the release has it (128, 96
    meaningful): vLLM's a_log_weight_loader, which takes the "current" 1-D
    form (the old [1, 1, heads, 1] loads too), narrows a rank's heads from
    its start, never reading the padding;
  - MLA: its output gate g_proj [heads*v_head_dim, H] (mla_use_output_gate);
  - latent MoE: routed_expert_down_proj [R, H], routed_expert_norm [R],
    routed_expert_up_proj [H, R], and the routed experts w1/w3 [I, R], w2
    [R, I] in the latent width R = routed_expert_hidden_size;
  - attention residuals (attn_res_block_size): per layer
    self_attention_res_norm, mlp_res_norm [H], self_attention_res_proj,
    mlp_res_proj [1, H]; the model's output_attn_res_norm [H] and
    output_attn_res_proj [1, H];
  - an MTP layer at language_model.model.layers.{L} (num_nextn_predict_layers
    1), which the main model skips and the draft KimiK3MTPModel loads: an
    MLA + latent-MoE decoder layer (with attention-residual tensors, which
    the draft drops), enorm, hnorm, eh_proj, shared_head.norm/head and
    embed_tokens;
  - the MoonViT tower in K3's form (RMSNorm, no biases, qkv_hidden_size wider
    than the tower: 2 heads of 48 over 64 channels) and the patchmergerv2
    projector (proj.0, proj.2 without biases, post_norm), which
    transformers' Kimi_K25 tower (LayerNorms, biases) does not have.

Layers: 0 KDA + dense MLP, 1 KDA + experts, 2 MLA + experts (K3's
linear_attn_config lists them from 1).  KDA's fused projection needs zero
padding rows in vLLM at every tp here (4*256/tp + 64 + 4/tp rows a rank).
The text model sits under language_model.model.* and language_model.lm_head
(vLLM's KimiK3MTP loader strips "language_model." from such names).

make(out, variant="") writes it; variant "pad" has experts 128 wide (64 a
rank at tp 2, which vLLM widens to 256); variant "mxfp4" has the routed
experts as K3 ships them, compressed-tensors mxfp4-pack-quantized
(X.weight_packed U8, X.weight_scale U8; random bytes); variant "nohead"
(make_nohead) has an MTP layer without shared_head.head or embed_tokens,
as a release whose MTP layer shares the target's (KimiK3MTP leaves both
unfilled, and vLLM's proposer serves the draft with the target's); variant
"nohead2" (make_nohead2) has two such MTP layers (L and L+1, each its own
values; num_nextn_predict_layers 2).
"""
import json
import os

TEXT = dict(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=4, q_lora_rank=128, kv_lora_rank=256,
            qk_nope_head_dim=64, qk_rope_head_dim=64, v_head_dim=64,
            moe_intermediate_size=512, max_position_embeddings=512,
            bos_token_id=2, eos_token_id=1, pad_token_id=0)
KDA = dict(num_heads=4, head_dim=64, short_conv_kernel_size=4)
LATENT = 128            # routed_expert_hidden_size
EXPERTS = 4
VISION = dict(vt_hidden_size=64, vt_num_attention_heads=2, vt_num_hidden_layers=2,
              vt_intermediate_size=128, qkv_hidden_size=96, patch_size=14,
              init_pos_emb_height=4, init_pos_emb_width=4, init_pos_emb_time=4)
MEDIA_PAD = 999


def text_config(moe_i):
    """config.json's text_config as vLLM's KimiLinearConfig reads it."""
    c = dict(TEXT, model_type="kimi_linear", architectures=["KimiLinearForCausalLM"],
             # the release's experts are SiTU (hidden_act "situ"), which vLLM
             # 0.32's CPU build refuses when it builds them: SiLU's weights
             # are laid out alike
             head_dim=64, hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False,
             mla_use_nope=True, mla_use_output_gate=True, moe_intermediate_size=moe_i,
             num_experts=EXPERTS, num_experts_per_token=2, num_shared_experts=1,
             moe_renormalize=True, moe_router_activation_func="sigmoid",
             routed_scaling_factor=2.5, first_k_dense_replace=1, moe_layer_freq=1,
             use_grouped_topk=True, num_expert_group=1, topk_group=1,
             routed_expert_hidden_size=LATENT, latent_moe_use_norm=True,
             attn_res_block_size=2, num_nextn_predict_layers=1, topk_method="noaux_tc",
             linear_attn_config=dict(KDA, kda_layers=[1, 2], full_attn_layers=[3],
                                     use_full_rank_gate=True, gate_lower_bound=-5.0),
             dtype="bfloat16")
    return c


def make(out, variant=""):
    import tempfile
    import torch
    import transformers
    from safetensors.torch import load_file, save_file
    from ckpt_io import noise, perturb
    moe_i = 128 if variant == "pad" else TEXT["moe_intermediate_size"]
    L = TEXT["num_hidden_layers"]
    H = TEXT["hidden_size"]

    # 1. transformers' Kimi Linear: the text model's common tensors
    tc = transformers.KimiLinearConfig(
        **dict(TEXT, moe_intermediate_size=moe_i), num_local_experts=EXPERTS,
        num_experts_per_tok=2, n_shared_experts=1, linear_num_heads=KDA["num_heads"],
        linear_head_dim=KDA["head_dim"], linear_conv_kernel_dim=KDA["short_conv_kernel_size"],
        layer_types=["linear_attention", "linear_attention", "full_attention"],
        mlp_layer_types=["dense", "sparse", "sparse"], tie_word_embeddings=False)
    tc.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.KimiLinearForCausalLM(tc).to(torch.bfloat16)
    perturb(model)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        src = {}
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".safetensors"):
                src.update(load_file(os.path.join(tmp, f)))

    g = torch.Generator().manual_seed(4321)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    P = KDA["num_heads"] * KDA["head_dim"]
    t = {}
    for k, v in src.items():
        n = k
        if n.startswith("model."):
            n = "language_model.model." + n[len("model."):]
        elif n.startswith("lm_head."):
            n = "language_model." + n
        parts = n.split(".")
        layer = int(parts[3]) if parts[2] == "layers" else None
        if layer is not None and layer < TEXT_DENSE and ".block_sparse_moe." in n:
            # transformers saves the dense MLP under block_sparse_moe.
            n = n.replace(".block_sparse_moe.", ".mlp.")
        if ".self_attn.g_a_proj." in n or ".self_attn.g_b_proj." in n:
            continue                     # K3: a full-rank gate instead
        if ".block_sparse_moe.experts." in n:
            continue                     # K3's experts are latent: below
        if n.endswith(".self_attn.A_log"):
            # [heads] zero-padded to head_dim entries, as released
            v = v.reshape(-1)
            v = torch.cat([v, v.new_zeros(KDA["head_dim"] - v.numel())])
        t[n] = v.contiguous()
    for n in range(L):
        p = f"language_model.model.layers.{n}."
        if n + 1 in (1, 2):              # KDA
            t[p + "self_attn.g_proj.weight"] = rnd(P, H)
        else:                            # MLA
            t[p + "self_attn.g_proj.weight"] = rnd(TEXT["num_attention_heads"] * TEXT["v_head_dim"], H)
        if n >= TEXT_DENSE:
            m = p + "block_sparse_moe."
            t[m + "routed_expert_down_proj.weight"] = rnd(LATENT, H)
            t[m + "routed_expert_norm.weight"] = rnd(LATENT, base=1)
            t[m + "routed_expert_up_proj.weight"] = rnd(H, LATENT)
            for e in range(EXPERTS):
                for w, (rows, cols) in (("w1", (moe_i, LATENT)), ("w3", (moe_i, LATENT)),
                                        ("w2", (LATENT, moe_i))):
                    x = m + f"experts.{e}.{w}."
                    if variant == "mxfp4":
                        # compressed-tensors' MXFP4: two E2M1 values a byte
                        # along the inputs, one E8M0 exponent (U8) per 32
                        # (random bytes: the layout is what is checked)
                        t[x + "weight_packed"] = torch.randint(
                            0, 256, (rows, cols // 2), generator=g, dtype=torch.uint8)
                        t[x + "weight_scale"] = torch.randint(
                            118, 128, (rows, cols // 32), generator=g, dtype=torch.uint8)
                    else:
                        t[x + "weight"] = rnd(rows, cols)
        t[p + "self_attention_res_norm.weight"] = rnd(H, base=1)
        t[p + "mlp_res_norm.weight"] = rnd(H, base=1)
        t[p + "self_attention_res_proj.weight"] = rnd(1, H)
        t[p + "mlp_res_proj.weight"] = rnd(1, H)
    t["language_model.model.output_attn_res_norm.weight"] = rnd(H, base=1)
    t["language_model.model.output_attn_res_proj.weight"] = rnd(1, H)
    # the MTP layer, as KimiK3MTP loads it (the main model skips layers.{L}.):
    # its block is the decoder layer KimiDecoderLayer builds for layer L (MLA
    # with the output gate, kda_layers not listing it, and the latent MoE:
    # layer L-1's tensors, fresh values), with the attention-residual
    # tensors KimiK3MTP drops, and enorm, hnorm, eh_proj, shared_head.norm,
    # shared_head.head and embed_tokens as DeepSeek-V3's MTP layer has them
    nextn = 2 if variant == "nohead2" else 1
    q = f"language_model.model.layers.{L - 1}."
    for m in range(nextn):
        p = f"language_model.model.layers.{L + m}."
        for k in [k for k in t if k.startswith(q)]:
            v = t[k]
            if v.dtype == torch.uint8:
                t[p + k[len(q):]] = torch.randint(0, 256, tuple(v.shape), generator=g, dtype=torch.uint8)
            else:
                t[p + k[len(q):]] = rnd(*v.shape, base=int(k.endswith("norm.weight"))).to(v.dtype)
        V = TEXT["vocab_size"]
        for name, shape in {"enorm.weight": [H], "hnorm.weight": [H], "eh_proj.weight": [H, 2 * H],
                            "shared_head.norm.weight": [H], "shared_head.head.weight": [V, H],
                            "embed_tokens.weight": [V, H]}.items():
            if variant.startswith("nohead") and name in ("shared_head.head.weight", "embed_tokens.weight"):
                continue
            t[p + name] = rnd(*shape, base=int(name.endswith("norm.weight")))

    # 2. MoonViT in K3's form and the patchmergerv2 projector
    vh, vq, vi = VISION["vt_hidden_size"], VISION["qkv_hidden_size"], VISION["vt_intermediate_size"]
    ps = VISION["patch_size"]
    v = "vision_tower."
    t[v + "patch_embed.proj.weight"] = rnd(vh, 3, ps, ps)
    t[v + "patch_embed.pos_emb.weight"] = rnd(VISION["init_pos_emb_height"],
                                              VISION["init_pos_emb_width"], vh)
    for n in range(VISION["vt_num_hidden_layers"]):
        b = v + f"encoder.blocks.{n}."
        t[b + "norm0.weight"] = rnd(vh, base=1)
        t[b + "norm1.weight"] = rnd(vh, base=1)
        t[b + "wqkv.weight"] = rnd(3 * vq, vh)
        t[b + "wo.weight"] = rnd(vh, vq)
        t[b + "mlp.fc0.weight"] = rnd(vi, vh)
        t[b + "mlp.fc1.weight"] = rnd(vh, vi)
    t[v + "encoder.final_layernorm.weight"] = rnd(vh, base=1)
    t["mm_projector.proj.0.weight"] = rnd(4 * vh, 4 * vh)
    t["mm_projector.proj.2.weight"] = rnd(H, 4 * vh)
    t["mm_projector.post_norm.weight"] = rnd(H, base=1)

    # 3. write: two shards and an index, config.json, tokenizer, processor
    os.makedirs(out, exist_ok=True)
    names = sorted(t)
    half = len(names) // 2
    idx = {"metadata": {}, "weight_map": {}}
    for i, chunk in enumerate((names[:half], names[half:])):
        fn = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file({k: t[k] for k in chunk}, os.path.join(out, fn), metadata={"format": "pt"})
        idx["weight_map"].update({k: fn for k in chunk})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(idx, f, indent=2)
    cfg = {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
           "text_config": dict(text_config(moe_i), num_nextn_predict_layers=nextn),
           "vision_config": dict(VISION, model_type="kimi_k3_vision", merge_kernel_size=[2, 2],
                                 mm_projector_type="patchmergerv2", norm_type="rmsnorm",
                                 attn_bias=False, patch_embed_proj_bias=False,
                                 linear_bias=False, mlp_type="mlp2",
                                 activation_func="gelu_pytorch_tanh",
                                 projector_hidden_act="gelu", projector_ln_eps=1e-5,
                                 pos_emb_type="divided_fixed", merge_type="sd2_tpool",
                                 video_attn_type="spatial_temporal", text_hidden_size=H),
           "media_placeholder_token_id": MEDIA_PAD, "pad_token_id": 0,
           "tie_word_embeddings": False, "dtype": "bfloat16"}
    if variant == "mxfp4":
        # as K3 ships its routed experts (vLLM's KimiK3ForConditionalGeneration
        # Config rewrites this quant_method to mxfp4: Mxfp4MoEMethod)
        q = {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
             "quantization_status": "compressed", "kv_cache_scheme": None,
             "config_groups": {"group_0": {
                 "targets": ["re:.*block_sparse_moe\\.experts\\.\\d+\\.w[123]$"],
                 "input_activations": None, "output_activations": None,
                 "format": "mxfp4-pack-quantized",
                 "weights": {"num_bits": 4, "type": "float", "symmetric": True,
                             "strategy": "group", "group_size": 32, "dynamic": False,
                             "actorder": None, "observer": "minmax",
                             "scale_dtype": "torch.uint8", "zp_dtype": None,
                             "block_structure": None, "observer_kwargs": {}}}},
             "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                        "re:.*mlp\\..*", "re:.*routed_expert_.*", "re:vision_tower.*",
                        "re:mm_projector.*"]}
        cfg["quantization_config"] = q
        cfg["text_config"]["quantization_config"] = q
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    processor(out)


def make_nohead(out):
    """make's checkpoint, its MTP layer without shared_head.head or
    embed_tokens."""
    make(out, "nohead")


def make_nohead2(out):
    """make's checkpoint with two MTP layers, neither with shared_head.head
    or embed_tokens."""
    make(out, "nohead2")


TEXT_DENSE = 1    # first_k_dense_replace


def processor(out):
    """A word-level tokenizer with Kimi's media tokens and the
    preprocessor_config.json (media_proc_cfg) that vLLM's K3 processor
    (KimiK3ProcessingInfo: the tokenizer's <|media_pad|>, and
    KimiK25FusedVisionProcessor) reads; vLLM forces tokenizer_mode kimi_k3
    for this architecture (config/model.py).  An image is at most 8x8
    patches of 14 (4x4 merged: 16 tokens)."""
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    from make_ckpt import kimi_media_config, word_tokenizer

    class C:
        vocab_size = TEXT["vocab_size"]

        def get_text_config(self):
            return self
    word_tokenizer(C(), {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                         "<|media_begin|>": 997, "<|media_end|>": 996,
                         "<|media_content|>": 995, "<|media_pad|>": MEDIA_PAD,
                         "<|kimi_image_placeholder|>": 998},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    kimi_media_config(out)


K3_DSPARK_TARGET_LAYER_IDS = [0, 2]


def make_dspark(out, layers=2, rank=16):
    """A Kimi K3 DSpark draft (vLLM 0.32's K3DSparkModel, kimi_k3/nvidia/
    dspark_mla.py K3DSparkForCausalLM) for make's kimi_k3 target, a
    checkpoint of its own as that class loads one: config.json a
    K3DSparkConfig (transformers_utils/configs/k3_dspark.py, model_type
    k3_dspark, a DeepseekV3Config: q-LoRA MLA with RoPE, a dense MLP) with
    architectures ["K3DSparkModel"], target_hidden_size, target_layer_ids
    and num_target_layers, markov_rank, enable_confidence_head,
    confidence_head_with_markov, dspark_noise_token_id, block_size; the
    tensors layers.N.* transformers' own DeepseekV3DecoderLayer (every
    layer dense: first_k_dense_replace), context_proj [hidden,
    target_hidden * num_target_layers], context_norm, final_norm,
    markov_head.markov_w1/markov_w2 [vocab, rank], confidence_head.proj
    [1, hidden + rank] with its bias, and an embed_tokens and lm_head
    (vLLM's mapper drops both: the target's serve).  Sizes are the
    target's text model's (256 wide, 4 heads, its MLA ranks)."""
    import torch
    import torch.nn as nn
    import transformers
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3DecoderLayer, DeepseekV3RMSNorm)
    from ckpt_dflash import dspark_heads
    from ckpt_io import draft_config, module_tensors, save_draft
    t = TEXT
    cfg = transformers.DeepseekV3Config(
        vocab_size=t["vocab_size"], hidden_size=t["hidden_size"],
        intermediate_size=t["intermediate_size"], num_hidden_layers=layers,
        num_attention_heads=t["num_attention_heads"],
        num_key_value_heads=t["num_attention_heads"], q_lora_rank=t["q_lora_rank"],
        kv_lora_rank=t["kv_lora_rank"], qk_nope_head_dim=t["qk_nope_head_dim"],
        qk_rope_head_dim=t["qk_rope_head_dim"], v_head_dim=t["v_head_dim"],
        first_k_dense_replace=layers, n_routed_experts=0, n_shared_experts=0,
        num_experts_per_tok=0, max_position_embeddings=t["max_position_embeddings"],
        rms_norm_eps=1e-5, hidden_act="silu", tie_word_embeddings=False,
        bos_token_id=t["bos_token_id"], eos_token_id=t["eos_token_id"],
        pad_token_id=t["pad_token_id"])
    h, v = cfg.hidden_size, cfg.vocab_size
    torch.manual_seed(2472)
    mods = {f"layers.{i}": DeepseekV3DecoderLayer(cfg, i) for i in range(layers)}
    ids = K3_DSPARK_TARGET_LAYER_IDS
    mods.update({"embed_tokens": nn.Embedding(v, h), "lm_head": nn.Linear(h, v, bias=False),
                 "context_proj": nn.Linear(len(ids) * h, h, bias=False),
                 "context_norm": DeepseekV3RMSNorm(h, cfg.rms_norm_eps),
                 "final_norm": DeepseekV3RMSNorm(h, cfg.rms_norm_eps)})
    dspark_heads(mods, h, v, rank)
    tensors = module_tensors(mods)
    c = draft_config(
        cfg, model_type="k3_dspark", architectures=["K3DSparkModel"],
        target_hidden_size=h, target_layer_ids=ids, num_target_layers=len(ids),
        markov_rank=rank, enable_confidence_head=True,
        confidence_head_with_markov=True, dspark_noise_token_id=v - 1,
        block_size=4, rope_parameters={"rope_type": "default", "rope_theta": 50000.0})
    for k in ("n_routed_experts", "n_shared_experts", "num_experts_per_tok",
              "first_k_dense_replace"):
        c.pop(k, None)
    save_draft(out, tensors, c)
