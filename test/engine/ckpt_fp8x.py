"""FP8 checkpoints under the other methods vLLM reads: Meta's fbgemm_fp8
(its -FP8 Llama 3.1 releases) and AMD's Quark (its amd/*-FP8-KV
releases; also Quark's FP8 in blocks, MXFP4, MXFP6, MXFP8, W8A8 INT8 and
W4A16 INT4), made from make_ckpt.py's tiny BF16 checkpoint in OUT, in the
release's tensor names and quantization_config."""
import zlib

from ckpt_io import fp8_blocks, rewrite_shards, update_config

LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _module(name):
    """'model.layers.1.mlp.up_proj' for a linear weight's name, else None."""
    if name.endswith(".weight") and name.split(".")[-2] in LINEAR:
        return name[:-len(".weight")]
    return None


def fbgemm(out):
    """Meta's fbgemm_fp8: each linear weight F8_E4M3 with one F32 scale a
    row, weight_scale [rows, 1]; activations quantized per row at run
    time under activation_scale_ub.  modules_to_not_convert names the
    modules left BF16 (the release: lm_head, every attention projection
    and the first and last layers' MLPs); here layer 0's attention and the
    last layer's MLP, so that both kinds are quantized somewhere."""
    import torch
    fmax = torch.finfo(torch.float8_e4m3fn).max
    layers = set()
    keep = ["lm_head"]

    def names(tensors):
        for n in tensors:
            if n.startswith("model.layers."):
                layers.add(int(n.split(".")[2]))
    rewrite_shards(out, names)
    last = max(layers)
    keep += ["model.layers.0.self_attn.%s" % p for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
    keep += ["model.layers.%d.mlp.%s" % (last, p) for p in ("gate_proj", "up_proj", "down_proj")]

    def shard(tensors):
        for name in list(tensors):
            mod = _module(name)
            if mod is None or mod in keep:
                continue
            w = tensors[name].float()
            s = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / fmax
            tensors[name] = (w / s).to(torch.float8_e4m3fn)
            tensors[mod + ".weight_scale"] = s.float()
    rewrite_shards(out, shard)
    update_config(out, lambda cfg: cfg.update(quantization_config={
        "quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
        "modules_to_not_convert": keep}))


def _quark_tensor(**kw):
    q = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "ch_axis": None,
         "group_size": None, "symmetric": True, "round_method": "half_even",
         "scale_type": "float", "is_dynamic": False,
         "observer_cls": "PerTensorMinMaxObserver"}
    q.update(kw)
    return q


def _fp8(per_channel):
    """A quantizer of F32 weights to F8_E4M3: (weight, F32 scale), the scale
    a scalar or (per_channel) one a row, 1-D as Quark exports it."""
    import torch
    fmax = torch.finfo(torch.float8_e4m3fn).max

    def quantize(w):
        if per_channel:
            s = w.abs().amax(dim=1).clamp(min=1e-12) / fmax
            return (w / s[:, None]).to(torch.float8_e4m3fn), s
        s = (w.abs().max().clamp(min=1e-12) / fmax).reshape([])
        return (w / s).to(torch.float8_e4m3fn), s
    return quantize


def _mxfp4(w):
    """OCP MXFP4 of F32 weight w [rows, cols]: each group of 32 inputs
    shares a power-of-two scale, E8M0 (2^(floor(log2 amax) - 2): e2m1's
    largest exponent), each value the nearest E2M1 code, two codes a byte,
    the even input in the low nibble.  (U8 [rows, cols/2], U8 [rows, cols/32])."""
    import torch
    rows, cols = w.shape
    g = w.reshape(rows, cols // 32, 32)
    amax = g.abs().amax(dim=2).clamp(min=2.0 ** -126)
    e = (torch.floor(torch.log2(amax)) - 2).clamp(-127, 127)
    x = g / torch.pow(2.0, e)[:, :, None]
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    code = (x.abs().clamp(max=6.0)[..., None] - grid).abs().argmin(dim=-1)
    code = (code | ((x < 0).long() << 3)).reshape(rows, cols)
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).to(torch.uint8)
    return packed, (e + 127).to(torch.uint8)


def _quark_weights(out, quantize, more):
    """Each linear weight of OUT's shards replaced by quantize(weight) and
    its weight_scale; more(tensors, mod) adds a module's other scales.
    Returns the MoE routers' module names, which Quark's releases exclude."""
    gates = []

    def shard(tensors):
        for name in list(tensors):
            if name.endswith(".mlp.gate.weight"):
                gates.append(name[:-len(".weight")])
            mod = _module(name)
            if mod is None:
                continue
            tensors[name], tensors[mod + ".weight_scale"] = quantize(tensors[name].float())
            more(tensors, mod)
    rewrite_shards(out, shard)
    return sorted(gates)


def _quark_config(out, glob, gates, kv_layers=None, pack="reorder"):
    """OUT's quantization_config as Quark exports it: global_quant_config
    glob, lm_head and the routers gates excluded, and kv_layers (pattern ->
    config) the KV-cache group with its own configs."""
    kv_layers = kv_layers or {}
    update_config(out, lambda cfg: cfg.update(quantization_config={
        "quant_method": "quark", "quant_mode": "eager_mode",
        "algo_config": None, "exclude": ["lm_head"] + gates,
        "export": {"kv_cache_group": sorted(kv_layers), "min_kv_scale": 0.0,
                   "pack_method": pack, "weight_format": "real_quantized",
                   "weight_merge_groups": None},
        "global_quant_config": glob,
        "layer_quant_config": kv_layers,
        "layer_type_quant_config": {}}))


def quark(out):
    """AMD Quark's FP8 per tensor with an FP8 KV cache (amd/*-FP8-KV):
    each linear weight F8_E4M3 with a scalar F32 weight_scale and a static
    scalar F32 input_scale, k_proj and v_proj with an output_scale (the KV
    cache's scales, kv_cache_group), lm_head excluded.  MoE experts (the
    MoE models among amd/*-FP8-KV, vLLM's QuarkW8A8Fp8MoEMethod) are
    quantized alike, one scale per expert and projection; an expert's
    gate_proj and up_proj read the same input and share its input scale
    (vLLM keeps one an expert for both); the routers (mlp.gate) are
    excluded, as the releases exclude them."""
    import torch

    def scales(tensors, mod):
        # fixed activation and KV scales, distinct per layer and part
        # (an expert's gate_proj and up_proj: one input, one scale)
        key = mod.replace(".up_proj", ".gate_proj") if ".experts." in mod else mod
        h = zlib.crc32(key.encode()) % 7
        tensors[mod + ".input_scale"] = torch.tensor(0.01 + 0.001 * h, dtype=torch.float32)
        if mod.endswith(("k_proj", "v_proj")):
            tensors[mod + ".output_scale"] = torch.tensor(0.02 + 0.001 * h,
                                                          dtype=torch.float32)
    gates = _quark_weights(out, _fp8(False), scales)
    glob = {"weight": _quark_tensor(), "input_tensors": _quark_tensor(),
            "output_tensors": None, "bias": None, "target_device": None}
    kv = dict(glob, output_tensors=_quark_tensor())
    _quark_config(out, glob, gates, {"*k_proj": kv, "*v_proj": kv})


def quark_ptpc(out):
    """AMD Quark's FP8 per channel with per-token activations (its
    quantization_ptpc_fp8 example: FP8E4M3PerChannelSpec, weight ch_axis 0
    static, input ch_axis 1 dynamic): each linear weight F8_E4M3 with one
    F32 scale a row, weight_scale 1-D [rows] as Quark exports it; no input
    or KV-cache scales (activations are quantized at run time); lm_head
    and the MoE routers excluded.  vLLM 0.32: QuarkW8A8Fp8 with
    kFp8StaticChannelSym weights, QuarkW8A8Fp8MoEMethod per channel."""
    gates = _quark_weights(out, _fp8(True), lambda tensors, mod: None)
    glob = {"weight": _quark_tensor(qscheme="per_channel", ch_axis=0,
                                    observer_cls="PerChannelMinMaxObserver"),
            "input_tensors": _quark_tensor(qscheme="per_channel", ch_axis=1, is_dynamic=True,
                                           observer_cls="PerChannelMinMaxObserver"),
            "output_tensors": None, "bias": None, "target_device": None}
    _quark_config(out, glob, gates)


def quark_block(out):
    """AMD Quark's FP8 in 128x128 blocks: each linear weight F8_E4M3 with
    an F32 weight_scale per block, [ceil(rows/128), ceil(cols/128)] (the
    multiplier, as DeepSeek's weight_scale_inv), activations quantized
    dynamically in groups of 128; lm_head and the MoE routers excluded.
    vLLM 0.32: QuarkW8A8Fp8PerBlock (quark.py _is_fp8_w8a8's per_block
    branch, kFp8Static128BlockSym), QuarkW8A8Fp8MoEMethod's per_block."""
    gates = _quark_weights(out, fp8_blocks, lambda tensors, mod: None)
    glob = {"weight": _quark_tensor(qscheme="per_block", block_size=[128, 128],
                                    observer_cls="PerBlockMinMaxObserver"),
            "input_tensors": _quark_tensor(qscheme="per_group", group_size=128, is_dynamic=True,
                                           observer_cls="PerGroupMinMaxObserver")}
    _quark_config(out, glob, gates)


def quark_mxfp4(out):
    """AMD Quark's MXFP4 (amd/*-MXFP4 releases): each linear weight OCP
    MXFP4, X.weight U8 [rows, cols/2] and X.weight_scale U8 E8M0 [rows,
    cols/32]; activations MXFP4 at run time (no input scale); lm_head and
    the MoE routers excluded.  vLLM 0.32: QuarkOCP_MX (quark.py
    _is_w_ocp_mx_a_x) and, for experts, its OCP MX MoE method."""
    _quark_mx(out, _mxfp4, "fp4")


def _quark_mx(out, quantize, dtype):
    """OUT's linear weights in an OCP MX format by quantize, Quark's config
    of dtype in groups of 32 with E8M0 scales, activations alike at run time."""
    gates = _quark_weights(out, quantize, lambda tensors, mod: None)
    mx = {"dtype": dtype, "qscheme": "per_group", "ch_axis": -1, "group_size": 32,
          "symmetric": None, "round_method": "half_even", "scale_type": "float",
          "scale_format": "e8m0", "scale_calculation_mode": "even",
          "observer_cls": "PerBlockMXObserver", "is_dynamic": False}
    glob = {"weight": mx, "input_tensors": dict(mx, is_dynamic=True),
            "output_tensors": None, "bias": None, "target_device": None}
    _quark_config(out, glob, gates)


def _mxfp6(w):
    """MXFP6 (fp6_e3m2) bytes of F32 weight w [rows, cols]: E8M0 scales a
    group of 32 inputs as _mxfp4's (2^(floor(log2 amax) - 4): e3m2's
    largest exponent), each value's 6-bit code (sign, then the magnitude's
    rank among e3m2's, truncated) packed four in three bytes, little
    first.  (U8 [rows, cols*3/4], U8 [rows, cols/32]).  The engine suite
    compares this layout's bytes only (vLLM dequantizes MXFP6 with
    amd-quark, whose bit order this does not claim to follow)."""
    import torch
    rows, cols = w.shape
    g = w.reshape(rows, cols // 32, 32)
    amax = g.abs().amax(dim=2).clamp(min=2.0 ** -126)
    e = (torch.floor(torch.log2(amax)) - 4).clamp(-127, 127)
    x = (g / torch.pow(2.0, e)[:, :, None]).reshape(rows, cols)
    mag = (x.abs() * 4).clamp(max=31).long()
    code = (mag | ((x < 0).long() << 5)).reshape(rows, cols // 4, 4)
    word = code[..., 0] | (code[..., 1] << 6) | (code[..., 2] << 12) | (code[..., 3] << 18)
    packed = torch.stack([(word >> s) & 0xFF for s in (0, 8, 16)], dim=-1)
    return packed.reshape(rows, cols * 3 // 4).to(torch.uint8), (e + 127).to(torch.uint8)


def quark_mxfp6(out):
    """AMD Quark's MXFP6 (fp6_e3m2): each linear weight X.weight U8 [rows,
    cols*3/4] (four values in three bytes) and X.weight_scale U8 E8M0
    [rows, cols/32]; activations MXFP6 at run time; lm_head excluded.
    vLLM 0.32: QuarkOCP_MX (quark.py _is_w_ocp_mx_a_x: mxfp6_e3m2,
    PackedvLLMParameter of packed_factor 8/6)."""
    _quark_mx(out, _mxfp6, "fp6_e3m2")


def _mxfp8(w):
    """OCP MXFP8 of F32 weight w [rows, cols]: each group of 32 inputs
    shares a power-of-two scale, E8M0 (2^(floor(log2 amax) - 8): e4m3's
    largest exponent), each value F8_E4M3.  (F8_E4M3 [rows, cols], U8
    [rows, cols/32])."""
    import torch
    rows, cols = w.shape
    g = w.reshape(rows, cols // 32, 32)
    amax = g.abs().amax(dim=2).clamp(min=2.0 ** -126)
    e = (torch.floor(torch.log2(amax)) - 8).clamp(-127, 127)
    x = (g / torch.pow(2.0, e)[:, :, None]).clamp(-448.0, 448.0)
    return x.reshape(rows, cols).to(torch.float8_e4m3fn), (e + 127).to(torch.uint8)


def quark_mxfp8(out):
    """AMD Quark's MXFP8: each linear weight OCP MXFP8, X.weight F8_E4M3
    [rows, cols] and X.weight_scale U8 E8M0 [rows, cols/32], in Quark's
    canonical per_group spelling; activations MXFP8 at run time; lm_head
    and the MoE routers excluded.  vLLM 0.32: QuarkOCP_MX (quark.py
    _is_w_ocp_mx_a_x, ocp_mx_utils.py ocp_mx_weight_dtype_and_rows:
    mxfp8_e4m3, one scale a row)."""
    _quark_mx(out, _mxfp8, "fp8_e4m3")


def _int8(per_channel):
    """A quantizer of F32 weights to Quark's symmetric INT8: scale amax /
    127.5 ((qmax - qmin) / 2 of int8), of the tensor or (per_channel) of
    each row, each value round(w / scale), half to even, clipped to
    [-128, 127]; (I8 weight, F32 scale: a scalar or 1-D [rows], as Quark
    exports them)."""
    import torch

    def quantize(w):
        if per_channel:
            s = w.abs().amax(dim=1).clamp(min=1e-12) / 127.5
            return torch.round(w / s[:, None]).clamp(-128, 127).to(torch.int8), s
        s = (w.abs().max().clamp(min=1e-12) / 127.5).reshape([])
        return torch.round(w / s).clamp(-128, 127).to(torch.int8), s
    return quantize


def quark_int8(out):
    """AMD Quark's W8A8 INT8 per tensor, symmetric and static
    (w_int8_a_int8_per_tensor_sym, the scheme of vLLM's
    amd/Llama-3.1-8B-Instruct-w-int8-a-int8-sym-test): each linear weight
    I8 with a scalar F32 weight_scale and I8 weight_zero_point (0), a
    static scalar F32 input_scale and I8 input_zero_point (0), as Quark
    exports a quantizer's scale and zero point; lm_head excluded.  MoE
    experts are quantized alike, an expert's gate_proj and up_proj sharing
    one input scale (vLLM keeps one an expert for both), the routers
    excluded.  vLLM 0.32: QuarkW8A8Int8 (quark.py _is_w8a8_int8,
    kInt8StaticTensorSym weights and activations), QuarkW8A8Int8MoEMethod."""
    import torch

    def scales(tensors, mod):
        # a static scale a module, distinct per layer and part: Quark
        # calibrates q/k/v (gate/up) on one input alike, but distinct
        # values show which part's scale vLLM keeps (the last it loads)
        key = mod.replace(".up_proj", ".gate_proj") if ".experts." in mod else mod
        h = zlib.crc32(key.encode()) % 7
        tensors[mod + ".weight_zero_point"] = torch.tensor(0, dtype=torch.int8)
        tensors[mod + ".input_scale"] = torch.tensor(0.02 + 0.002 * h, dtype=torch.float32)
        tensors[mod + ".input_zero_point"] = torch.tensor(0, dtype=torch.int8)
    gates = _quark_weights(out, _int8(False), scales)
    spec = _quark_tensor(dtype="int8")
    glob = {"weight": spec, "input_tensors": spec,
            "output_tensors": None, "bias": None, "target_device": None}
    _quark_config(out, glob, gates)


def quark_int8c(out):
    """AMD Quark's W8A8 INT8 with weights per channel and activations per
    token (dynamic, qscheme per_channel ch_axis 1): each linear weight I8
    with weight_scale (F32) and weight_zero_point (I8, 0) 1-D [rows], as
    Quark exports a per-channel quantizer; no input scales; lm_head
    excluded.  vLLM 0.32: QuarkW8A8Int8 with kInt8StaticChannelSym weights
    and kInt8DynamicTokenSym activations, its scales [rows, 1]."""
    import torch

    def zeros(tensors, mod):
        rows = tensors[mod + ".weight"].shape[0]
        tensors[mod + ".weight_zero_point"] = torch.zeros(rows, dtype=torch.int8)
    gates = _quark_weights(out, _int8(True), zeros)
    glob = {"weight": _quark_tensor(dtype="int8", qscheme="per_channel", ch_axis=0,
                                    observer_cls="PerChannelMinMaxObserver"),
            "input_tensors": _quark_tensor(dtype="int8", qscheme="per_channel", ch_axis=1,
                                           is_dynamic=True,
                                           observer_cls="PerChannelMinMaxObserver"),
            "output_tensors": None, "bias": None, "target_device": None}
    _quark_config(out, glob, gates)


def _w4a16(group, symmetric, reorder):
    """A quantizer of F32 weight w [out, in] to Quark's 4-bit weights in
    groups of group inputs (vLLM's own quantize_weights): asymmetric uint4
    with zero points, or symmetric int4 (each value q - 8 in two's
    complement, the zero points 0), stored transposed as Quark exports
    them ([in, out], as AWQ's): (weight I32 [in, out/8], weight_scale
    BF16 [in/group, out], weight_zero_point I32 [in/group, out/8]), eight
    4-bit values a word along the outputs, output 8j+i in nibble i
    (pack_method "order") or in nibble [0, 4, 1, 5, 2, 6, 3, 7][i]
    ("reorder").  Checked against vLLM: canonicalize_quark_packed_int4
    gives AWQ's awq_pack of the same (unsigned) values."""
    import torch
    from vllm.scalar_type import scalar_types
    from vllm.model_executor.layers.quantization.quark.utils import (
        canonicalize_quark_packed_int4)
    from vllm.model_executor.layers.quantization.utils.quant_utils import (
        awq_pack, quantize_weights)
    nibble = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7] if reorder else list(range(8)),
                          dtype=torch.int64)

    def pack(v):
        k, n = v.shape
        v = (v.to(torch.int64) & 0xF).reshape(k, n // 8, 8)
        word = (v << (nibble * 4)).sum(dim=-1)
        return ((word + 2 ** 31) % 2 ** 32 - 2 ** 31).to(torch.int32)   # int32 words

    def quantize(w):
        wt = w.t().contiguous()
        k, n = wt.shape
        if symmetric:
            ref, w_q, w_s, _ = quantize_weights(wt, scalar_types.uint4b8, group)
            qw = pack(w_q - 8)
            qz = torch.zeros(w_s.shape[0], n // 8, dtype=torch.int32)
        else:
            ref, w_q, w_s, w_zp = quantize_weights(wt, scalar_types.uint4, group,
                                                   zero_points=True)
            qw, qz = pack(w_q), pack(w_zp)
            got = canonicalize_quark_packed_int4(qz, pack_reorder=reorder, is_symmetric=False)
            assert torch.equal(got, awq_pack(w_zp, 4, w_zp.shape[0], n)), "bad Quark zeros"
        got = canonicalize_quark_packed_int4(qw, pack_reorder=reorder, is_symmetric=symmetric)
        assert torch.equal(got, awq_pack(w_q, 4, k, n)), "bad Quark packing"
        step = w_s.float().abs().max().item()
        assert (ref.float() - wt).abs().max().item() <= step, "bad quantization"
        return qw, w_s.to(torch.bfloat16), qz
    return quantize


def _quark_w4a16(out, symmetric, pack):
    quantize = _w4a16(128, symmetric, pack == "reorder")
    zeros = {}

    def weight_and_scale(w):
        qw, s, zeros["last"] = quantize(w)
        return qw, s

    def zero_point(tensors, mod):
        tensors[mod + ".weight_zero_point"] = zeros["last"]
    gates = _quark_weights(out, weight_and_scale, zero_point)
    glob = {"weight": _quark_tensor(dtype="int4" if symmetric else "uint4",
                                    qscheme="per_group", ch_axis=1, group_size=128,
                                    symmetric=symmetric,
                                    observer_cls="PerGroupMinMaxObserver"),
            "input_tensors": None, "output_tensors": None, "bias": None,
            "target_device": None}
    _quark_config(out, glob, gates, pack=pack)


def quark_w4a16(out):
    """AMD Quark's W4A16 INT4 (uint4 weights, asymmetric, in groups of 128,
    no activation quantization, export pack_method "order"): each linear
    weight as _w4a16 writes it, with weight_scale and weight_zero_point
    beside it, under Quark's names; lm_head excluded.  vLLM 0.32:
    QuarkW4A16Int4 (quark.py _is_w4a16_int4, kInt4StaticAsym), which holds
    them as loaded, [in, out/8] and so on, and converts the nibble order
    to AWQ's after loading (utils.py canonicalize_quark_packed_int4)."""
    _quark_w4a16(out, False, "order")


def quark_w4a16s(out):
    """Quark's W4A16 with symmetric int4 weights (kInt4Static) and
    pack_method "reorder": the zero points written (0) as Quark exports
    a quantizer's, which vLLM holds as loaded but does not use."""
    _quark_w4a16(out, True, "reorder")


def quark_w4a16h(out):
    """Quark's W4A16 as quark_w4a16 writes it, of a model whose experts'
    intermediate rows a rank are no multiple of the group (the case's
    config): the checkpoint is the same kind, vLLM's load of it differs
    (QuarkW4A16Int4MoEMethod's group_size_div_factor)."""
    _quark_w4a16(out, False, "order")


quark_w4a16q = quark_w4a16h     # the same at tp 4 (the case's config)
