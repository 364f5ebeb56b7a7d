"""MiniMax-M3 (MiniMaxM3SparseForConditionalGeneration) as MiniMax
releases it, from transformers' own class (make_ckpt.py's minimax_m3
case).  transformers 5.19 saves the release's names itself (its
minimax_m3_vl conversion, reversed) except where that reversal renames
too much: its unscoped ".mlp." -> ".block_sparse_moe." turns the dense
layers' mlp.{gate,up,down}_proj and the tower's mlp.fc1/fc2 into
block_sparse_moe.* too, which vLLM 0.32 does not load (the dense ones
are skipped without a word).  Its config drops the keys the release has
and vLLM reads (sparse_attention_config, moe_layer_freq, hidden_act
"swigluoai", the tower's img_token_compression_config, num_mtp_modules): put back as
the release has them.  The release's multi-token-prediction layer
(language_model.model.mtp.layers.0.*: enorm, hnorm, eh_proj,
final_layernorm and a sparse-attention MoE decoder layer under
transformer_layer., the names vLLM's MiniMaxM3MTP reads), which
transformers neither builds nor writes, is added from layer 3's (sparse
attention, MoE) shapes with values of its own.  The tokenizer and image and video processors are
what vLLM's vendored MiniMax-M3 processor reads.
"""
import re


def released_minimax_m3(out, cfg):
    import transformers
    from ckpt_io import rename_tensors, update_config
    from make_ckpt import word_tokenizer
    from transformers.models.minimax_m3_vl.image_processing_minimax_m3_vl import (
        MiniMaxM3VLImageProcessor)
    tc = cfg.text_config
    dense = {i for i, t in enumerate(tc.mlp_layer_types) if t == "dense"}
    sparse = [1 if t == "minimax_m3_sparse" else 0 for t in tc.layer_types]

    def rename(k):
        m = re.match(r"language_model\.model\.layers\.(\d+)\.block_sparse_moe\."
                     r"((gate|up|down)_proj\.weight)$", k)
        if m and int(m.group(1)) in dense:
            return f"language_model.model.layers.{m.group(1)}.mlp.{m.group(2)}"
        if k.startswith("vision_tower."):
            return k.replace(".block_sparse_moe.fc", ".mlp.fc")
        return k
    rename_tensors(out, rename)
    mtp_layer(out, tc)

    def config(c):
        t = c["text_config"]
        t.update(hidden_act="swigluoai", n_shared_experts=1,
                 num_mtp_modules=1,
                 moe_layer_freq=[0 if i in dense else 1 for i in range(len(sparse))],
                 sparse_attention_config={
                     "use_sparse_attention": True, "sparse_attention_freq": sparse,
                     "sparse_num_index_heads": tc.index_n_heads,
                     "sparse_index_dim": tc.index_head_dim,
                     "sparse_topk_blocks": tc.index_topk_blocks,
                     "sparse_block_size": tc.index_block_size,
                     "sparse_local_block": tc.index_local_blocks, "sparse_init_block": 0,
                     "sparse_score_type": "max", "sparse_disable_index_value": sparse})
        v = c["vision_config"]
        v["img_token_compression_config"] = {
            "spatial_merge_size": v["spatial_merge_size"],
            "temporal_patch_size": v["temporal_patch_size"]}
    update_config(out, config)
    word_tokenizer(cfg, {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3,
                         "]<]start of image[>[": 996, "]<]end of image[>[": 997,
                         "]<]image[>[": cfg.image_token_index,
                         "]<]video[>[": cfg.video_token_index},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    kw = dict(patch_size=14, merge_size=2, temporal_patch_size=2)
    MiniMaxM3VLImageProcessor(**kw).save_pretrained(out)
    transformers.MiniMaxM3VLVideoProcessor(**kw).save_pretrained(out)


def mtp_layer(out, tc):
    """The MTP layer: layer 3's tensors (sparse attention, MoE) under
    language_model.model.mtp.layers.0.transformer_layer., fresh values in
    their dtypes, with the layer's own norms and eh_proj; in a shard of
    its own, as the release keeps it apart."""
    import glob
    import json
    import os
    import torch
    from safetensors.torch import load_file, save_file
    src = "language_model.model.layers.3."
    dst = "language_model.model.mtp.layers.0."
    g = torch.Generator().manual_seed(3303)
    t = {}
    for f in sorted(glob.glob(os.path.join(out, "*.safetensors"))):
        for k, v in load_file(f).items():
            if k.startswith(src):
                t[dst + "transformer_layer." + k[len(src):]] = (
                    v.float() + torch.randn(v.shape, generator=g) * 0.02).to(v.dtype)
    h = tc.hidden_size
    for k, shape in (("enorm.weight", [h]), ("hnorm.weight", [h]),
                     ("final_layernorm.weight", [h]), ("eh_proj.weight", [h, 2 * h])):
        t[dst + k] = (torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16)
    fname = "model-mtp.safetensors"
    save_file(t, os.path.join(out, fname), metadata={"format": "pt"})
    ip = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(ip))
    idx["weight_map"].update({k: fname for k in t})
    idx["weight_map"] = dict(sorted(idx["weight_map"].items()))
    with open(ip, "w") as f:
        json.dump(idx, f, indent=2)
