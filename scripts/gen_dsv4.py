"""gen_dsv4 - gen-checkpoint's DeepSeek-V4 (--arch deepseek_v4): the tensors
and config.json of a checkpoint in DeepSeek's own names, as
deepseek-ai/DeepSeek-V4-Flash and -Pro ship them, with any dimensions.

Layer n's attention follows compress_ratios[n]: 0 sliding window only, 4 a
compressor of twice the head dimension plus an indexer (compressed sparse
attention), any other ratio a compressor alone (heavily compressed); layers
below num_hash_layers route by the token's hash table (ffn.gate.tid2eid,
[vocab, experts per token], I32 as DeepSeek's inference/model.py declares
it, Gate.tid2eid; I64 with --tid2eid-i64), the others by the router's bias
(ffn.gate.bias, F32).  Routed experts are FP4 (two e2m1 values a byte, I8
[rows, cols/2]) with F8_E8M0 scales per 32 values (--expert-dtype fp4, as
V4-Flash and -Pro ship them), FP8 128x128 blocks like the other linears
(fp8, as V4-Flash-Base) or --dtype (bf16).  The other linears of attention
and the shared expert are F8_E4M3 with F8_E8M0 block scales X.scale (F32
with --expert-dtype fp8); the compressors, the indexer's weights_proj, the
router and the embeddings keep --dtype; hyper-connections, attention sinks
and the compressors' ape are F32.  The --mtp-layers layers mtp.K.* follow
the main ones (compress_ratios[num_hidden_layers + K]): a layer plus e_proj,
h_proj, enorm, hnorm, norm and hc_head_*.

--v4 pro|flash gives the real models' layer, expert, hash-layer and MTP
counts, compress_ratios and experts per token (sources in presets below);
every other dimension stays as the flags give it.
"""
import array
import random
import sys

# deepseek-ai/DeepSeek-V4-Pro and -Flash config.json, as quoted in public
# repositories (V4-Pro: 61 layers, 384 routed + 1 shared experts, 6 per
# token, num_hash_layers 3, one MTP layer, compress_ratios 128, 128 then 4
# and 128 alternating, 0 for the MTP layer; V4-Flash: 43 layers, 256
# experts, 6 per token, 3 hash layers, one MTP layer, compress_ratios 0, 0
# then 4 and 128 alternating, ending 4, and 0 for the MTP layer).
PRESETS = {
    "pro": dict(layers=61, experts=384, per_tok=6, hash_layers=3, mtp=1,
                ratios=[128, 128] + [4 if i % 2 == 0 else 128 for i in range(59)] + [0]),
    "flash": dict(layers=43, experts=256, per_tok=6, hash_layers=3, mtp=1,
                  ratios=[0, 0] + [4 if i % 2 == 0 else 128 for i in range(41)] + [0]),
}


def add_args(p):
    g = p.add_argument_group("DeepSeek-V4 (deepseek_v4; --experts, --moe-intermediate, "
                             "--heads and --head-dim apply)")
    g.add_argument("--v4", choices=sorted(PRESETS),
                   help="the real model's layer, expert, hash-layer and MTP counts "
                        "and compress_ratios")
    g.add_argument("--compress-ratios", metavar="R,R,...",
                   help="one per layer then one per MTP layer (default: 0, 4 and 128 "
                        "in turn, 0 for MTP)")
    g.add_argument("--hash-layers", type=int, default=1, help="num_hash_layers (default 1)")
    g.add_argument("--mtp-layers", type=int, default=1,
                   help="num_nextn_predict_layers (default 1)")
    g.add_argument("--experts-per-tok", type=int, default=2)
    g.add_argument("--q-lora", type=int, default=128, help="q_lora_rank (default 128)")
    g.add_argument("--o-groups", type=int, default=2)
    g.add_argument("--o-lora", type=int, default=128, help="o_lora_rank (default 128)")
    g.add_argument("--index-heads", type=int, default=4)
    g.add_argument("--index-head-dim", type=int, default=128)
    g.add_argument("--hc-mult", type=int, default=4)
    g.add_argument("--expert-dtype", choices=["fp4", "fp8", "bf16"], default="fp4")
    g.add_argument("--tid2eid-i64", action="store_true",
                   help="hash tables in I64 (as transformers writes them) instead of I32")


def setup(a, die):
    """Applies --v4 and checks the flags; a.ratios is the whole list."""
    if a.v4:
        pr = PRESETS[a.v4]
        a.layers, a.experts, a.experts_per_tok = pr["layers"], pr["experts"], pr["per_tok"]
        a.hash_layers, a.mtp_layers = pr["hash_layers"], pr["mtp"]
        a.ratios = list(pr["ratios"])
    elif a.compress_ratios:
        try:
            a.ratios = [int(x) for x in a.compress_ratios.split(",")]
        except ValueError:
            die("bad --compress-ratios %r" % a.compress_ratios)
    else:
        a.ratios = [(0, 4, 128)[i % 3] for i in range(a.layers)] + [0] * a.mtp_layers
    if len(a.ratios) != a.layers + a.mtp_layers:
        die("--compress-ratios has %d values for %d layers and %d MTP layers"
            % (len(a.ratios), a.layers, a.mtp_layers))
    if a.expert_dtype == "fp4" and (a.hidden % 32 or a.moe_intermediate % 32):
        die("FP4 experts need --hidden and --moe-intermediate multiples of 32")
    if (a.heads * a.head_dim) % a.o_groups:
        die("--o-groups must divide heads * head_dim")
    if a.experts_per_tok > a.experts:
        die("--experts-per-tok is more than --experts")


def _blocks(r, c):
    return [-(-r // 128), -(-c // 128)]


def _layer(a, p, n, ratio, out):
    H, nh, hd, hc = a.hidden, a.heads, a.head_dim, a.hc_mult
    dt, I, E = a.dtype, a.moe_intermediate, a.experts
    sdt = "F32" if a.expert_dtype == "fp8" else "F8_E8M0"

    def fp8(name, r, c):
        out.append((p + name + ".weight", "F8_E4M3", [r, c]))
        out.append((p + name + ".scale", sdt, _blocks(r, c)))

    def t(name, d, shape):
        out.append((p + name, d, shape))

    t("attn_norm.weight", dt, [H])
    t("ffn_norm.weight", dt, [H])
    for k in ("attn", "ffn"):
        t("hc_%s_fn" % k, "F32", [(2 + hc) * hc, hc * H])
        t("hc_%s_base" % k, "F32", [(2 + hc) * hc])
        t("hc_%s_scale" % k, "F32", [3])
    t("attn.attn_sink", "F32", [nh])
    fp8("attn.wq_a", a.q_lora, H)
    fp8("attn.wkv", hd, H)
    t("attn.q_norm.weight", dt, [a.q_lora])
    t("attn.kv_norm.weight", dt, [hd])
    fp8("attn.wq_b", nh * hd, a.q_lora)
    fp8("attn.wo_a", a.o_groups * a.o_lora, nh * hd // a.o_groups)
    fp8("attn.wo_b", H, a.o_groups * a.o_lora)
    # compressors: ratio 4 overlaps its windows, twice the width
    # (vLLM's compressor.py: coff = 1 + (compress_ratio == 4))
    comps = [("attn.compressor.", hd)] if ratio else []
    if ratio == 4:
        comps.append(("attn.indexer.compressor.", a.index_head_dim))
    for q, d in comps:
        c = (2 if ratio == 4 else 1) * d
        t(q + "wkv.weight", dt, [c, H])
        t(q + "wgate.weight", dt, [c, H])
        t(q + "ape", "F32", [ratio, c])
        t(q + "norm.weight", dt, [d])
    if ratio == 4:
        fp8("attn.indexer.wq_b", a.index_heads * a.index_head_dim, a.q_lora)
        t("attn.indexer.weights_proj.weight", dt, [a.index_heads, H])
    t("ffn.gate.weight", dt, [E, H])
    if n < a.hash_layers:
        t("ffn.gate.tid2eid", "I64" if a.tid2eid_i64 else "I32",
          [a.vocab, a.experts_per_tok])
    else:
        t("ffn.gate.bias", "F32", [E])
    for e in range(E):
        for w, (r, c) in (("w1", (I, H)), ("w2", (H, I)), ("w3", (I, H))):
            q = "ffn.experts.%d.%s" % (e, w)
            if a.expert_dtype == "fp4":
                t(q + ".weight", "I8", [r, c // 2])
                t(q + ".scale", "F8_E8M0", [r, c // 32])
            elif a.expert_dtype == "fp8":
                fp8(q, r, c)
            else:
                t(q + ".weight", dt, [r, c])
    for w, (r, c) in (("w1", (I, H)), ("w2", (H, I)), ("w3", (I, H))):
        fp8("ffn.shared_experts." + w, r, c)


def _head(a, p, out):
    H, hc = a.hidden, a.hc_mult
    out.append((p + "hc_head_fn", "F32", [hc, hc * H]))
    out.append((p + "hc_head_base", "F32", [hc]))
    out.append((p + "hc_head_scale", "F32", [1]))


def tensor_list(a, layers):
    """[(name, dtype, shape)]: the main layers, then the MTP layers."""
    H, V, dt = a.hidden, a.vocab, a.dtype
    out = [("embed.weight", dt, [V, H])]
    for n in range(layers):
        _layer(a, "layers.%d." % n, n, a.ratios[n], out)
    out.append(("norm.weight", dt, [H]))
    out.append(("head.weight", dt, [V, H]))
    _head(a, "", out)
    for k in range(a.mtp_layers):
        p = "mtp.%d." % k
        _layer(a, p, layers + k, a.ratios[layers + k], out)
        for w in ("e_proj", "h_proj"):
            out.append((p + w + ".weight", "F8_E4M3", [H, H]))
            out.append((p + w + ".scale", "F32" if a.expert_dtype == "fp8" else "F8_E8M0",
                        _blocks(H, H)))
        for w in ("enorm", "hnorm", "norm"):
            out.append((p + w + ".weight", dt, [H]))
        _head(a, p, out)
    return out


def tid2eid(seed, name, dtype, shape, experts):
    """A hash table's bytes: distinct experts per token, little-endian."""
    rng = random.Random((seed << 32) ^ sum(map(ord, name)))
    rows, k = shape
    vals = array.array("q" if dtype == "I64" else "i")
    assert vals.itemsize == (8 if dtype == "I64" else 4)
    for _ in range(rows):
        vals.extend(rng.sample(range(experts), k))
    if sys.byteorder != "little":
        vals.byteswap()
    return vals.tobytes()


def config(a, cfg):
    """DeepSeek-V4's config.json keys, added to gen-checkpoint's cfg."""
    for k in ("intermediate_size", "rope_theta", "use_sliding_window"):
        cfg.pop(k, None)
    cfg.update({
        "model_type": "deepseek_v4", "num_key_value_heads": 1, "head_dim": a.head_dim,
        "qk_rope_head_dim": min(64, a.head_dim), "q_lora_rank": a.q_lora,
        "o_groups": a.o_groups, "o_lora_rank": a.o_lora,
        "moe_intermediate_size": a.moe_intermediate, "n_routed_experts": a.experts,
        "n_shared_experts": 1, "num_experts_per_tok": a.experts_per_tok,
        "num_hash_layers": a.hash_layers, "num_nextn_predict_layers": a.mtp_layers,
        "compress_ratios": a.ratios, "hc_mult": a.hc_mult, "hc_sinkhorn_iters": 20,
        "hc_eps": 1e-06, "index_n_heads": a.index_heads,
        "index_head_dim": a.index_head_dim, "index_topk": 512, "sliding_window": 128,
        "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "norm_topk_prob": True,
        "routed_scaling_factor": 2.5, "swiglu_limit": 10.0, "rope_theta": 10000,
        "compress_rope_theta": 160000, "tie_word_embeddings": False,
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                                "quant_method": "fp8", "weight_block_size": [128, 128]},
    })
    if a.expert_dtype == "fp8":
        cfg["expert_dtype"] = "fp8"
    else:
        cfg["quantization_config"]["scale_fmt"] = "ue8m0"
    if a.expert_dtype == "bf16":
        cfg["expert_dtype"] = "bf16"
