"""DeepSeek-V4 checkpoints as DeepSeek ships them, from transformers' own
(make_ckpt.py's deepseek_v4 cases): DeepSeek's names and config.json, its
MTP layer, and the FP8 (V4-Flash-Base) and FP4-expert (V4-Flash) variants.
"""
import re

def add_v4_mtp(out, wm, cfg):
    """Appends DeepSeek-V4's multi-token-prediction layer mtp.0.* in a
    shard of its own (transformers neither builds nor writes it): a copy of
    the last layer without its compressor and indexer (its compress_ratios
    entry 0: vLLM's draft loads no other), perturbed, plus e_proj, h_proj, enorm, hnorm, norm and its
    hc_head tensors, in DeepSeek's names."""
    import os
    import torch
    from safetensors.torch import load_file, save_file
    last = f"layers.{cfg['num_hidden_layers'] - 1}."
    h, hc = cfg["hidden_size"], cfg["hc_mult"]
    g = torch.Generator().manual_seed(8765)
    new = {}
    for fname in sorted(set(wm.values())):
        for k, v in load_file(os.path.join(out, fname)).items():
            if k.startswith(last) and not k.startswith(
                    (last + "attn.compressor.", last + "attn.indexer.")):
                new["mtp.0." + k[len(last):]] = v.clone()
    for k, shape in (("e_proj.weight", [h, h]), ("h_proj.weight", [h, h]),
                     ("enorm.weight", [h]), ("hnorm.weight", [h]),
                     ("norm.weight", [h])):
        new["mtp.0." + k] = (torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16)
    for k, shape in (("hc_head_fn", [hc, hc * h]), ("hc_head_base", [hc]),
                     ("hc_head_scale", [1])):
        new["mtp.0." + k] = torch.randn(shape, generator=g) * 0.02
    for k, v in new.items():
        if v.is_floating_point():
            new[k] = v + (torch.randn(v.shape, generator=g) * 0.02).to(v.dtype)
        wm[k] = "model-mtp.safetensors"
    save_file(new, os.path.join(out, "model-mtp.safetensors"),
              metadata={"format": "pt"})


def deepseek_v4_native(out):
    """Rewrites transformers' DeepSeek-V4 checkpoint as DeepSeek ships it,
    which is what vLLM 0.32 reads.  transformers 5.19's save_pretrained
    keeps its own names for the top-level tensors (model.layers.N.*,
    model.embed_tokens.weight, model.hc_head.hc_fn, model.norm.weight) where
    DeepSeek's are layers.N.*, embed.weight, hc_head_fn, norm.weight; and it
    writes every tensor in BF16 where vLLM (after DeepSeek's inference
    code) holds the hyper-connection tensors, attention sinks, compressors'
    ape and the router bias in F32: written in F32 here.  Its config.json has layer_types and
    mlp_layer_types where DeepSeek's (and vLLM's model, which reads
    compress_ratios[n] and num_hash_layers) has compress_ratios and
    num_hash_layers, and topk_method; its MTP layer is added (add_v4_mtp,
    num_nextn_predict_layers 1).  transformers leaves the hash
    layers' tid2eid (token -> experts, a buffer) all 0: it gets distinct
    random experts per token here, so that a misplaced table shows."""
    import json
    import os
    import torch
    from safetensors.torch import load_file, save_file
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    ren = {"model.embed_tokens.weight": "embed.weight",
           "model.hc_head.hc_fn": "hc_head_fn",
           "model.hc_head.hc_base": "hc_head_base",
           "model.hc_head.hc_scale": "hc_head_scale"}
    f32 = ("hc_attn_fn", "hc_attn_base", "hc_attn_scale", "hc_ffn_fn",
           "hc_ffn_base", "hc_ffn_scale", "hc_head_fn", "hc_head_base",
           "hc_head_scale", "attn_sink", "ape", "gate.bias")

    def name(k):
        if k in ren:
            return ren[k]
        k = k[len("model."):] if k.startswith("model.") else k
        # transformers reads both DeepSeek's attn.kv_norm and
        # compressor.norm as its kv_norm, and writes both back as norm.
        return re.sub(r"^(layers\.\d+\.attn)\.norm\.", r"\1.kv_norm.", k)

    g = torch.Generator().manual_seed(4321)

    def table(t):
        rows = [torch.randperm(cfg["n_routed_experts"], generator=g)[:t.shape[1]]
                for _ in range(t.shape[0])]
        return torch.stack(rows).to(t.dtype)

    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    wm = {}
    for fname in sorted(set(idx["weight_map"].values())):
        path = os.path.join(out, fname)
        t = {}
        for k, v in load_file(path).items():
            k = name(k)
            t[k] = v.float() if k.endswith(f32) else v
            if k.endswith(".tid2eid"):
                t[k] = table(v)
            wm[k] = fname
        save_file(t, path, metadata={"format": "pt"})
    add_v4_mtp(out, wm, cfg)
    idx["weight_map"] = dict(sorted(wm.items()))
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)
    ratio = {"sliding_attention": 0}
    ratio.update(cfg.pop("compress_rates"))
    # one entry a layer and one the MTP layer (0, sliding window only):
    # vLLM's draft reads the MTP layer's (attention.py, compress_ratios[layer_id])
    cfg["compress_ratios"] = [ratio[t] for t in cfg.pop("layer_types")] + [0]
    cfg["num_hash_layers"] = cfg.pop("mlp_layer_types").count("hash_moe")
    cfg["num_nextn_predict_layers"] = 1
    # DeepSeek's routing of the non-hash layers, which keeps the router's
    # bias (vLLM builds gate.e_score_correction_bias only for it).
    cfg["topk_method"] = "noaux_tc"
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


# The linear layers vLLM quantizes in DeepSeek-V4 (attention.py and
# cpu/model.py give them quant_config), and in its MTP layer e_proj and
# h_proj (nvidia/mtp.py): not the compressors' wkv and wgate, the indexer's
# weights_proj, the router or the embeddings.
DSV4_FP8 = re.compile(r"\.(attn\.(wq_a|wkv|wq_b|wo_a|wo_b)|indexer\.wq_b|[eh]_proj|"
                      r"experts\.\d+\.w[123]|shared_experts\.w[123])\.weight$")


def deepseek_v4_fp8(out):
    """FP8 blocks on DeepSeek-V4 as DeepSeek ships them: each scale
    X.scale (F32) beside X.weight, and config.json's expert_dtype "fp8"
    (vLLM then reads F32 block scales for every layer, experts included)."""
    import json
    import os
    from safetensors.torch import load_file, save_file
    from make_ckpt import quantize_fp8
    quantize_fp8(out, pick=lambda n: DSV4_FP8.search(n) is not None)
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    suf = ".weight_scale_inv"
    for fname in sorted(set(idx["weight_map"].values())):
        path = os.path.join(out, fname)
        t = load_file(path)
        t = {(k[:-len(suf)] + ".scale" if k.endswith(suf) else k): v
             for k, v in t.items()}
        save_file(t, path, metadata={"format": "pt"})
    idx["weight_map"] = dict(sorted(
        (k[:-len(suf)] + ".scale" if k.endswith(suf) else k, v)
        for k, v in idx["weight_map"].items()))
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["expert_dtype"] = "fp8"
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


def deepseek_v4_fp4(out):
    """DeepSeek-V4-Flash's layout: the routed experts' w1/w2/w3 as FP4
    (two e2m1 values a byte, I8) [rows, cols/2] with X.scale F8_E8M0
    [rows, cols/32]; the other FP8 linears with E8M0 block scales; no
    expert_dtype in config.json (vLLM's default, "fp4")."""
    import json
    import os
    import torch
    from safetensors.torch import load_file, save_file
    from make_ckpt import pack_mxfp4, quantize_fp8
    exp = re.compile(r"\.experts\.\d+\.w[123]\.weight$")
    quantize_fp8(out, pick=lambda n: DSV4_FP8.search(n) is not None and
                 not exp.search(n), ue8m0=True)
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    suf = ".weight_scale_inv"
    wm = {}
    for fname in sorted(set(idx["weight_map"].values())):
        path = os.path.join(out, fname)
        t = {}
        for k, v in load_file(path).items():
            if k.endswith(suf):
                k = k[:-len(suf)] + ".scale"
            if exp.search(k):
                blocks, scales = pack_mxfp4(v)
                t[k] = blocks.reshape(v.shape[0], -1).view(torch.int8)
                wm[k] = fname
                k = k[:-len(".weight")] + ".scale"
                v = scales.view(torch.float8_e8m0fnu)
            t[k] = v
            wm[k] = fname
        save_file(t, path, metadata={"format": "pt"})
    idx["weight_map"] = dict(sorted(wm.items()))
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["quantization_config"]["scale_fmt"] = "ue8m0"
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


# DeepSeek-V4's vision tower in the test checkpoint (make_ckpt.py's
# deepseek_v4_vl): 2 blocks of 4 heads, 64 wide, 4x4 patches merged 2x2.
DSV4_VISION = dict(vision_n_layers=2, vision_dim=64, vision_n_heads=4,
                   vision_inter_dim=96, vision_patch_size=4,
                   vision_downsample_ratio=2, vision_max_n_token=64,
                   vision_rope_theta=10000.0)


def deepseek_v4_vision(out, **over):
    """Adds to the DeepSeek-V4 checkpoint deepseek_v4_native made the
    tensors DeepSeek-V4-Flash-Vision-Exp ships beside its text model, in
    their names as vLLM 0.32's DeepseekV4ForConditionalGeneration reads
    them (models/deepseek_v4/common/vision.py, common/vl_model.py), in a
    shard of their own (transformers has no such model): the ViT
    (vision.patch_embed.proj, vision.blocks.N.{norm1,attn.wqkv,attn.wo,
    norm2,mlp.w1,mlp.w2}, vision.norm; wqkv and mlp.w1 fused as the
    release ships them), the aligner (w1, w2 with biases), image_start,
    image_end, image_newline and image_pad, and each MoE layer's router
    bias for image tokens ffn.gate.bias_vl plus a router bias ffn.gate.bias
    on the hash layers too (vLLM's vision model builds both on every MoE
    layer: nvidia/model.py, DeepseekV4MoE).  The vision_* keys go into
    config.json, whose architectures stay DeepseekV4ForCausalLM as the
    release's do (vLLM routes it to the vision class).  The norms are F32
    (vLLM casts the tower to the model's dtype), the image embeddings BF16
    (vLLM holds them F32), so that both casts show.  over: vision_* keys
    other than DSV4_VISION's (deepseek_v4_vl-h3: 3 heads, which tp 2 does
    not divide)."""
    import json
    import os
    import torch
    from safetensors.torch import save_file
    from ckpt_io import noise
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    vis = dict(DSV4_VISION, **over)
    cfg.update(vis)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    h, d = cfg["hidden_size"], vis["vision_dim"]
    i, p = vis["vision_inter_dim"], vis["vision_patch_size"]
    r = vis["vision_downsample_ratio"]
    g = torch.Generator().manual_seed(2468)
    rnd = noise(g, dtype=torch.bfloat16)
    t = {"vision.patch_embed.proj.weight": rnd(d, 3 * p * p),
         "vision.patch_embed.proj.bias": rnd(d),
         "vision.norm.weight": 1 + rnd(d, dtype=torch.float32),
         "aligner.w1.weight": rnd(h, d * r * r), "aligner.w1.bias": rnd(h),
         "aligner.w2.weight": rnd(h, h), "aligner.w2.bias": rnd(h)}
    for n in range(vis["vision_n_layers"]):
        b = f"vision.blocks.{n}."
        t.update({b + "norm1.weight": 1 + rnd(d, dtype=torch.float32),
                  b + "norm2.weight": 1 + rnd(d, dtype=torch.float32),
                  b + "attn.wqkv.weight": rnd(3 * d, d),
                  b + "attn.wqkv.bias": rnd(3 * d),
                  b + "attn.wo.weight": rnd(d, d), b + "attn.wo.bias": rnd(d),
                  b + "mlp.w1.weight": rnd(2 * i, d),
                  b + "mlp.w2.weight": rnd(d, i)})
    for s in ("start", "end", "newline", "pad"):
        t["image_" + s] = rnd(h)
    e = cfg["n_routed_experts"]
    for n in range(cfg["num_hidden_layers"]):
        t[f"layers.{n}.ffn.gate.bias_vl"] = rnd(e, dtype=torch.float32)
        if n < cfg["num_hash_layers"]:
            t[f"layers.{n}.ffn.gate.bias"] = rnd(e, dtype=torch.float32)
    save_file(t, os.path.join(out, "model-vision.safetensors"),
              metadata={"format": "pt"})
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    idx["weight_map"].update({k: "model-vision.safetensors" for k in t})
    idx["weight_map"] = dict(sorted(idx["weight_map"].items()))
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)
    # vLLM's processor for it needs a tokenizer (with skip_tokenizer_init it
    # refuses: "DeepseekV4VLMultiModalProcessor requires a tokenizer") that
    # holds the image placeholder and the five sentinel tokens at the ids it
    # borrows (common/mm_preprocess.py, validate_image_sentinel_ids)
    import transformers
    from make_ckpt import word_tokenizer
    special = {"<｜begin▁of▁sentence｜>": cfg["bos_token_id"],
               "<｜end▁of▁sentence｜>": cfg["eos_token_id"], "<unk>": 2,
               "<｜▁pad▁｜>": 3, "<｜deepseek_image｜>": cfg["vocab_size"] - 1}
    special.update({"<|place_holder_mm_span_%04d|>" % (431 + k): 129257 + k
                    for k in range(5)})
    word_tokenizer(transformers.PretrainedConfig(vocab_size=cfg["vocab_size"]),
                   special, "<｜▁pad▁｜>", "<｜end▁of▁sentence｜>",
                   "<｜begin▁of▁sentence｜>", "<unk>").save_pretrained(out)


def draft_layers(out, wm, last, stages, skip):
    """A DSpark draft's decoder layers: mtp.0 to mtp.{stages-1}, each a copy
    of the checkpoint's layer `last` ("layers.N.") without its tensors under
    the prefixes skip, in the files' order."""
    import os
    from safetensors.torch import load_file
    base = {}
    for fname in sorted(set(wm.values())):
        for k, v in load_file(os.path.join(out, fname)).items():
            if k.startswith(last) and not k.startswith(tuple(last + p for p in skip)):
                base[k[len(last):]] = v
    return {f"mtp.{s}.{k}": v.clone() for s in range(stages) for k, v in base.items()}


def save_draft(out, new, wm, idx, idx_path, noisy, rnd):
    """The draft's tensors new, each noisy one perturbed by rnd, saved as
    model-dspark.safetensors and listed in the index."""
    import json
    import os
    from safetensors.torch import save_file
    for k, v in new.items():
        if noisy(v):
            new[k] = v + rnd(v.shape, v.dtype)
        wm[k] = "model-dspark.safetensors"
    save_file(new, os.path.join(out, "model-dspark.safetensors"),
              metadata={"format": "pt"})
    idx["weight_map"] = dict(sorted(wm.items()))
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)


def deepseek_v4_dspark(out, stages=2, markov_rank=16):
    """DeepSeek-V4 with DSpark draft stages in place of its MTP layer, as
    DeepSeek ships its DSpark drafts (vLLM 0.32's DSparkDeepseekV4ForCausalLM,
    nvidia/dspark.py: "Draft weights ship in the target checkpoint (mtp.*)"):
    mtp.0 to mtp.{stages-1}, each a decoder layer (a perturbed copy of the
    last layer without its compressor and indexer: compress_ratios 0, as the
    MTP layer's), mtp.0 also main_proj [hidden, hidden * len(target layers)]
    and main_norm, the last stage the head stack: norm, hc_head_fn/base/scale
    (F32), markov_head.markov_w1 and markov_w2 [vocab, markov_rank] and
    confidence_head.proj.weight [1, hidden + markov_rank] (F32, no bias:
    DSparkConfidenceHead as nvidia/dspark.py builds it).  config.json gets
    n_mtp_layers, dspark_target_layer_ids, dspark_markov_rank,
    dspark_noise_token_id and dspark_block_size, and compress_ratios an entry
    a stage (vLLM's CPU decoder layer reads compress_ratios[layer_id], each
    draft layer numbered past num_hidden_layers)."""
    import json
    import os
    import torch
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    wm = {k: v for k, v in idx["weight_map"].items() if not k.startswith("mtp.")}
    os.remove(os.path.join(out, "model-mtp.safetensors"))
    n = cfg["num_hidden_layers"]
    last = f"layers.{n - 1}."
    h, hc, vocab = cfg["hidden_size"], cfg["hc_mult"], cfg["vocab_size"]
    targets = [1, n - 2]
    g = torch.Generator().manual_seed(9876)
    new = draft_layers(out, wm, last, stages, ("attn.compressor.", "attn.indexer."))

    def rnd(shape, dtype=torch.bfloat16):
        return (torch.randn(shape, generator=g) * 0.02).to(dtype)

    new["mtp.0.main_proj.weight"] = rnd([h, h * len(targets)])
    new["mtp.0.main_norm.weight"] = rnd([h])
    z = f"mtp.{stages - 1}."
    new[z + "norm.weight"] = rnd([h])
    for k, shape in (("hc_head_fn", [hc, hc * h]), ("hc_head_base", [hc]),
                     ("hc_head_scale", [1])):
        new[z + k] = rnd(shape, torch.float32)
    new[z + "markov_head.markov_w1.weight"] = rnd([vocab, markov_rank])
    new[z + "markov_head.markov_w2.weight"] = rnd([vocab, markov_rank])
    new[z + "confidence_head.proj.weight"] = rnd([1, h + markov_rank], torch.float32)
    save_draft(out, new, wm, idx, idx_path,
               lambda v: v.dtype in (torch.bfloat16, torch.float32), rnd)
    cfg["compress_ratios"] = cfg["compress_ratios"][:n] + [0] * stages
    cfg.pop("num_nextn_predict_layers", None)
    cfg.update(n_mtp_layers=stages, dspark_target_layer_ids=targets,
               dspark_markov_rank=markov_rank, dspark_noise_token_id=vocab - 1,
               dspark_block_size=2)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
