"""Xiaomi's MiMo-V2 (MiMoV2ForCausalLM: vLLM 0.32 model_executor/models/
mimo_v2.py, a subclass of MiMoV2FlashForCausalLM with the same model and
loader, whose packed_modules_mapping says the checkpoint holds qkv_proj
fused), tiny.  The released MiMo-V2.5 family's config.json says
"attention_projection_layout": "fused_qkv": each layer's self_attn.qkv_proj
holds q, k and v fused and interleaved by num_key_value_heads shards
([q_0|k_0|v_0|q_1|k_1|v_1|...], shard i the heads of kv head group i, the
sliding layers' swa_* heads cut into as many shards), block-FP8 quantized
shard by shard (each padded to whole 128-row blocks, its scales
weight_scale_inv tiled per shard).  vLLM 0.32 regroups such an FP8 qkv_proj
per rank (_shard_fp8_qkv_proj: at tp == num_key_value_heads a plain chunk of
weight and scales, else dequantized, gathered and re-quantized); a BF16
qkv_proj it loads through QKVParallelLinear as if it were [Q|K|V], which
the release's layout is where num_key_value_heads is 1.

The network is transformers' MiMoV2FlashForCausalLM (scripts/learn-rules'
tiny MiMo-V2-Flash with the release's config keys, one kv head in the
full-attention layer, two in the sliding one, v heads narrower than q/k),
model_type mimo_v2_flash (transformers 5.19 has no mimo_v2; vLLM registers
none), with a multi-token-prediction layer (model.mtp.*) as the releases
carry it.

    make(out)        q/k/v split (q_proj, k_proj, v_proj), as a BF16
                     conversion of the release writes it
                     (convert_mimo_v2_to_bf16.py) and as MiMo-V2-Flash ships
                     it: mimo_v2_flash.json's layout exactly.
    make_fused(out)  the release's fused self_attn.qkv_proj.weight in BF16,
                     "attention_projection_layout": "fused_qkv";
                     num_key_value_heads 1, so one shard: [Q|K|V] (the full
                     layer 1 kv head, the sliding layer 2).
"""
import os


def make(out):
    import make_ckpt
    from ckpt_io import update_config
    make_ckpt.learned("mimo_v2_flash", out)
    update_config(out, lambda c: c.update(architectures=["MiMoV2ForCausalLM"]))


def make_fused(out):
    import json
    import torch
    from ckpt_io import rewrite_shards, update_config
    make(out)
    cfg = json.load(open(os.path.join(out, "config.json")))
    assert cfg["num_key_value_heads"] == 1, "one shard: [Q|K|V]"
    parts = {}

    def shard(tensors):
        # q, k and v of a layer may lie in two shards: collect, then write
        # the fused tensor where its q was
        for name in sorted(tensors):
            for p in ("q_proj", "k_proj", "v_proj"):
                suffix = ".self_attn.%s.weight" % p
                if name.endswith(suffix) and name.startswith("model.layers."):
                    parts.setdefault(name[:-len(suffix)], {})[p] = tensors.pop(name)
    rewrite_shards(out, shard)
    fused = {pre + ".self_attn.qkv_proj.weight":
             torch.cat([d["q_proj"], d["k_proj"], d["v_proj"]]).contiguous()
             for pre, d in parts.items()}
    from ckpt_io import add_to_first_shard
    add_to_first_shard(out, fused)
    update_config(out, lambda c: c.update(attention_projection_layout="fused_qkv"))
