"""DeepSeek-V4.1 (DeepseekV41ForCausalLM) checkpoints, from the DeepSeek-V4
one with its vision tower that transformers' own classes make (make_ckpt.py's
deepseek_v4_vl, ckpt_dsv4.py) rewritten as V4.1 differs from it in vLLM 0.32
(models/deepseek_v41/nvidia/model.py, vl_model.py, attention.py,
common/engram.py; transformers_utils/configs/deepseek_v41.py): transformers
has no V4.1, so the tensors V4 lacks (each Engram layer's) are written here
in DeepSeek's names, as add_v4_mtp writes V4's MTP layer.
"""
import json
import os

# Four layers: sliding window only, then two ratio-2 compressed layers that
# share layer 1's compressed KV (kv_source_layer_ids; layer 2 an indexer of
# its own without wk: index_source_layer_ids), and a full-length compressed
# layer (ratio 1) with its own compressor and indexer.  One Engram layer
# (layer 1): 2-grams and 3-grams over 2 heads, 4 prime-sized hash tables
# (101, 103, 107, 109 rows: vocab 100, common/engram.py EngramLayout) in 440
# rows (the last 20 no rank keeps), 32 wide.
DSV41 = dict(compress_ratios=[0, 2, 2, 1], kv_source_layer_ids=[1, 3],
             index_source_layer_ids=[1, 2, 3], engram_layer_ids=[1],
             engram_num_embeddings=[440], engram_max_ngram_size=3,
             engram_n_heads=2, engram_head_dim=32,
             engram_compressed_vocab_size=1000, engram_pad_token_id=3,
             engram_vocab_size=100)

# vLLM's image token id for V4.1 (common/mm_preprocess.py,
# IMAGE_SENTINEL_BASE_ID; validate_image_sentinel_ids)
IMAGE_ID = 129264


def make(out, dsv41=None):
    """deepseek_v41: DeepSeek-V4's checkpoint with its vision tower,
    rewritten as V4.1's: config.json nests the text model's keys under
    text_config and the tower's under vision_config (HF names: hidden_size,
    num_attention_heads, ...), architectures DeepseekV41ForCausalLM; no
    hash-routed layers (V4.1's MoE: num_hash_layers=0, so no tid2eid), no
    hc_head_* (V4.1 has no learned hc head: nvidia/model.py), no MTP layer,
    no image_pad (V4.1's wrapper holds image_start, image_end and
    image_newline only); V4.1's compressors (no ape) only on
    kv_source_layer_ids and its indexers (no compressor of their own; wk
    and k_norm on kv sources) only on index_source_layer_ids
    (attention.py, compressor.py); and each Engram layer's tensors
    layers.N.engram.{embed.weight (F8_E4M3), embed.scale (F8_E8M0, one a
    32 values), wkv.weight, q_weight, k_weight}."""
    import torch
    DSV41 = dsv41 or globals()["DSV41"]
    from safetensors.torch import load_file, save_file
    from make_ckpt import make as make_ckpt
    make_ckpt("deepseek_v4_vl", out)
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    kv, ix = DSV41["kv_source_layer_ids"], DSV41["index_source_layer_ids"]

    def keep(k):
        if k.startswith(("mtp.", "hc_head_")) or k == "image_pad":
            return False
        # V4's compressors (ratios 4 and 128: ape, overlapping windows) and
        # indexers (their own compressors) are not V4.1's: written below
        return not (k.endswith(".tid2eid") or ".attn.compressor." in k or
                    ".attn.indexer." in k)

    wm = {}
    for fname in sorted(set(idx["weight_map"].values())):
        path = os.path.join(out, fname)
        t = {k: v for k, v in load_file(path).items() if keep(k)}
        if not t:
            os.remove(path)
            continue
        save_file(t, path, metadata={"format": "pt"})
        wm.update({k: fname for k in t})
    h, hc = cfg["hidden_size"], cfg["hc_mult"]
    g = torch.Generator().manual_seed(9753)

    def rnd(*shape, dtype=torch.bfloat16):
        return (torch.randn(shape, generator=g) * 0.02).to(dtype)

    new = {}
    # V4.1's compressors (compressor.py: wkv, and wgate where the ratio is
    # over 1, and norm; no ape) on kv sources, its indexers (attention.py,
    # DeepseekV4Indexer: wq_b, weights_proj, and on kv sources wk and
    # k_norm) on index sources
    hd, ihd, inh = cfg["head_dim"], cfg["index_head_dim"], cfg["index_n_heads"]
    for n, ratio in enumerate(DSV41["compress_ratios"]):
        p = f"layers.{n}.attn."
        if n in kv:
            new[p + "compressor.wkv.weight"] = rnd(hd, h)
            if ratio > 1:
                new[p + "compressor.wgate.weight"] = rnd(hd, h)
            new[p + "compressor.norm.weight"] = 1 + rnd(hd)
        if n in ix:
            new[p + "indexer.wq_b.weight"] = rnd(inh * ihd, cfg["q_lora_rank"])
            new[p + "indexer.weights_proj.weight"] = rnd(inh, h)
            if n in kv:
                new[p + "indexer.wk.weight"] = rnd(ihd, hd)
                new[p + "indexer.k_norm.weight"] = 1 + rnd(ihd)
    # the Engram layers
    cols = (DSV41["engram_max_ngram_size"] - 1) * DSV41["engram_n_heads"]
    d = DSV41["engram_head_dim"]
    for n, rows in zip(DSV41["engram_layer_ids"], DSV41["engram_num_embeddings"]):
        p = f"layers.{n}.engram."
        new[p + "embed.weight"] = (torch.randn(rows, d, generator=g)
                                   ).to(torch.float8_e4m3fn)
        new[p + "embed.scale"] = torch.randint(
            120, 130, (rows, d // 32), generator=g, dtype=torch.uint8
        ).view(torch.float8_e8m0fnu)
        new[p + "wkv.weight"] = rnd(h * (hc + 1), cols * d)
        for w in ("q_weight", "k_weight"):
            new[p + w] = rnd(hc, h)
    save_file(new, os.path.join(out, "model-v41.safetensors"),
              metadata={"format": "pt"})
    wm.update({k: "model-v41.safetensors" for k in new})
    idx["weight_map"] = dict(sorted(wm.items()))
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)
    # config.json as V4.1's: text_config and vision_config
    vis = {k: cfg.pop(k) for k in list(cfg) if k.startswith("vision_")}
    for k in ("num_nextn_predict_layers", "num_hash_layers"):
        cfg.pop(k, None)
    text = {k: v for k, v in cfg.items()
            if k not in ("architectures", "transformers_version", "dtype")}
    text.update(DSV41, model_type="deepseek_v41", num_hash_layers=0)
    vision = {"num_hidden_layers": vis["vision_n_layers"],
              "hidden_size": vis["vision_dim"],
              "num_attention_heads": vis["vision_n_heads"],
              "intermediate_size": vis["vision_inter_dim"],
              "patch_size": vis["vision_patch_size"],
              "downsample_ratio": vis["vision_downsample_ratio"],
              "max_image_tokens": vis["vision_max_n_token"],
              "rope_theta": vis["vision_rope_theta"], "min_pixels": 64}
    with open(cfg_path, "w") as f:
        json.dump({"architectures": ["DeepseekV41ForCausalLM"],
                   "model_type": "deepseek_v41", "text_config": text,
                   "vision_config": vision, "dtype": "bfloat16",
                   "bos_token_id": cfg["bos_token_id"],
                   "eos_token_id": cfg["eos_token_id"]}, f, indent=2)
    # the image placeholder at V4.1's id
    tok_path = os.path.join(out, "tokenizer.json")
    tok = json.load(open(tok_path))
    ph = "<｜deepseek_image｜>"
    for a in tok.get("added_tokens", []):
        if a["content"] == ph:
            a["id"] = IMAGE_ID
    if ph in tok["model"].get("vocab", {}):
        tok["model"]["vocab"][ph] = IMAGE_ID
    with open(tok_path, "w") as f:
        json.dump(tok, f)


def make_pp(out):
    """deepseek_v41-pp: deepseek_v41's checkpoint with kv_source_layer_ids
    [1, 2] (layer 2 a ratio-2 kv source of its own, layer 3 reading its
    compressed KV and index keys): the kv-sharing groups {1} and {2, 3}
    that --pp 2's stages (layers 0-1, 2-3) keep whole, which vLLM 0.32
    accepts (deepseek_v41/attention.py:455-459, 597-601); deepseek_v41's
    own groups {1, 2} and {3} it refuses at --pp 2."""
    make(out, dict(DSV41, kv_source_layer_ids=[1, 2]))


def make_text(out):
    """deepseek_v41-text: deepseek_v41's checkpoint without its vision
    tower: no vision_config in config.json (vLLM's DeepseekV41Config then
    reads vision_n_layers 0, transformers_utils/configs/deepseek_v41.py:52),
    no vision.* or aligner.*, and no router bias_vl (built only where
    vision_n_layers > 0: deepseek_v4/nvidia/model.py:767-774); the image
    embeddings image_start/end/newline kept.  vLLM builds the wrapper's
    tower regardless and loads the model only with limit_mm_per_prompt
    image 0 (the tower and aligner then StageMissingLayers, skipped:
    nvidia/vl_model.py:155-170; oracle.py passes it), and only with the
    image embeddings, plain parameters that limit does not skip (without
    them: "Following weights were not initialized from checkpoint:
    {'image_start', 'image_end', 'image_newline'}", default_loader.py:
    562-566, seen here; wshard refuses such a checkpoint).  With that
    limit the three are meta-device parameters and vLLM's sharded_state
    keeps image_end alone (sharded_state_loader.py:138-172)."""
    from safetensors.torch import load_file, save_file
    make(out)
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))

    def tower(k):
        return k.startswith(("vision.", "aligner.")) or \
            k.endswith(".ffn.gate.bias_vl")
    for fname in sorted(set(idx["weight_map"].values())):
        path = os.path.join(out, fname)
        t = load_file(path)
        keep = {k: v for k, v in t.items() if not tower(k)}
        if not keep:
            os.remove(path)
        elif len(keep) != len(t):
            save_file(keep, path, metadata={"format": "pt"})
    idx["weight_map"] = {k: v for k, v in idx["weight_map"].items()
                         if not tower(k)}
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    del cfg["vision_config"]
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


# What vLLM 0.32 keeps per rank for this checkpoint at tp 2 (the oracle's
# dump, WSHARD_ORACLE_DSV41; 136 tensors a rank), where it differs from
# deepseek_v4.json's blocks -- what lib/rules/deepseek_v41.json writes
# (its "pad_to"/"pad_value" sinks and "prime_heads" Engram tables):
# - language_model.model.layers.N.attn.attn_sink: F32 [64], the rank's
#   num_attention_heads/tp sinks first, then -inf (attention.py:356-362:
#   padded to get_padded_num_q_heads, FlashMLA's 64 or 128 on SM 90/100,
#   nvidia/flashmla.py:67-74; FlashInfer's 8/16/32/64/128,
#   nvidia/flashinfer_sparse.py:78-85): a pad with -inf, not zeros, and
#   a size that depends on the GPU's backend (wshard writes SM 9.0's)
#   (ShardedStateLoader narrows a parameter to a smaller tensor,
#   sharded_state_loader.py:233-244, so the unpadded sinks load everywhere).
# - layers.N.engram.embed.{weight,scale} -> ...engram.embed_tokens.weight
#   (F8_E4M3) and .weight_scale_inv (U8, raw E8M0 bytes): rows cut by hash
#   head, not evenly: rank r keeps ceil(n_hash_cols/tp) heads' rows
#   [sum(sizes[:r*p]), sum(sizes[:(r+1)*p])) where sizes are the prime
#   bucket sizes common/engram.py:217-244 (EngramLayout) draws from
#   engram_vocab_size-1 up, never reused across layers (here 101, 103 |
#   107, 109: rows 0-204 and 204-420; rows past their sum on no rank)
#   (engram.py:986-1000, _engram_head_shard_weight_loader:604-617).
# - ...engram.wkv.weight: cut by rows (ColumnParallelLinear, gather_output;
#   whole under sequence parallel); q_weight, k_weight whole.
# - compressor (kv sources only): fused_wkv_wgate [head_dim*(2 if ratio 2
#   else 1), hidden] whole, norm whole, no ape; indexer (index sources):
#   wq_b, weights_proj whole, wk and k_norm on kv sources, no compressor.
# - no hc_head_*, no tid2eid; every MoE layer's router has
#   e_score_correction_bias and bias_vl (vision_n_layers > 0);
#   image_start/end/newline F32, no image_pad; the vision tower and aligner
#   as deepseek_v4_vision.json's block.


def make_dspark(out, stages=2, markov_rank=16):
    """deepseek_v41-dspark: the deepseek_v41 checkpoint (make) with DSpark
    draft stages as its mtp.*, as DeepSeek ships V4.1's DSpark draft
    (vLLM 0.32's DSparkDeepseekV4ForCausalLM, deepseek_v41/nvidia/dspark.py:
    "Its weights ship in the target checkpoint under the mtp.{0,1,2}.*
    prefix"; registry DSparkV41DraftModel): mtp.0 to mtp.{stages-1}, each a
    decoder layer (a perturbed copy of the last layer without its
    compressor, indexer or Engram: a draft layer is numbered past
    num_hidden_layers, past compress_ratios, so pure sliding window and
    never a kv or index source, attention.py:310-334), mtp.0 also main_proj
    [hidden, hidden * len(target layers)] and main_norm, the last stage the
    head stack as V4.1 names it: norm, markov_head.embed and markov_head.head
    [vocab, markov_rank] (dspark.py, _remap_dspark_name) and
    confidence_head.proj.weight [1, hidden + markov_rank] (F32, no bias);
    no hc_head (V4.1 has none: dspark.py, "v4.1 has no learned hc_head").
    text_config gets n_mtp_layers, dspark_target_layer_ids,
    dspark_markov_rank, dspark_noise_token_id and dspark_block_size."""
    import torch
    from ckpt_dsv4 import draft_layers, save_draft
    make(out)
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    text = cfg["text_config"]
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    wm = idx["weight_map"]
    n = text["num_hidden_layers"]
    last = f"layers.{n - 1}."
    h, vocab = text["hidden_size"], text["vocab_size"]
    targets = [1, n - 2]
    g = torch.Generator().manual_seed(8642)
    new = draft_layers(out, wm, last, stages,
                       ("attn.compressor.", "attn.indexer.", "engram."))

    def rnd(shape, dtype=torch.bfloat16):
        return (torch.randn(shape, generator=g) * 0.02).to(dtype)

    new["mtp.0.main_proj.weight"] = rnd([h, h * len(targets)])
    new["mtp.0.main_norm.weight"] = rnd([h])
    z = f"mtp.{stages - 1}."
    new[z + "norm.weight"] = rnd([h])
    new[z + "markov_head.embed.weight"] = rnd([vocab, markov_rank])
    new[z + "markov_head.head.weight"] = rnd([vocab, markov_rank])
    new[z + "confidence_head.proj.weight"] = rnd([1, h + markov_rank], torch.float32)
    save_draft(out, new, wm, idx, idx_path, lambda v: v.is_floating_point(), rnd)
    text.update(n_mtp_layers=stages, dspark_target_layer_ids=targets,
                dspark_markov_rank=markov_rank, dspark_noise_token_id=vocab - 1,
                dspark_block_size=2)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


# What vLLM 0.32 keeps per rank for make_dspark's draft at tp 2 (the
# oracle's dump, WSHARD_ORACLE_DSV41 with WSHARD_ORACLE_DSPARK: 50 tensors
# a rank; lib/rules/deepseek_v41_dspark.json writes them):
# - model.layers.{0,1}.* as the target's layers (fused_wqa_wkv whole, wq_b
#   and wo_a by heads, wo_b by columns, w13/w2 and the shared expert cut,
#   the router's weight, e_score_correction_bias and bias_vl whole), each
#   attn_sink F32 [64]: the rank's 2 heads then -inf; no compressor, indexer
#   or Engram (a draft layer is never a kv or index source).
# - model.main_proj [256, 512], main_norm, norm, markov_head.markov_w1
#   [1000, 16] (from markov_head.embed), markov_w2 [1024, 16] (from
#   markov_head.head, rows padded with zeros to a multiple of 64),
#   confidence_head.proj.weight F32 [1, 272]: whole on every rank; no
#   context_wkv_proj, no hc_head_* (DeepSeek-V4's draft has both).
