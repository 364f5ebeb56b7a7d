"""FP8 checkpoints under the other methods vLLM reads: Meta's fbgemm_fp8
(its -FP8 Llama 3.1 releases) and AMD's Quark (its amd/*-FP8-KV
releases), made from make_ckpt.py's tiny BF16 checkpoint in OUT, in the
release's tensor names and quantization_config."""
import zlib

from ckpt_io import rewrite_shards, update_config

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


def _quark_weights(out, per_channel, more):
    """Each linear weight of OUT's shards F8_E4M3 with its F32
    weight_scale, a scalar or (per_channel) one a row, 1-D as Quark
    exports it; more(tensors, mod) adds a module's other scales.  Returns
    the MoE routers' module names, which Quark's releases exclude."""
    import torch
    fmax = torch.finfo(torch.float8_e4m3fn).max
    gates = []

    def shard(tensors):
        for name in list(tensors):
            if name.endswith(".mlp.gate.weight"):
                gates.append(name[:-len(".weight")])
            mod = _module(name)
            if mod is None:
                continue
            w = tensors[name].float()
            if per_channel:
                s = w.abs().amax(dim=1).clamp(min=1e-12) / fmax
                tensors[name] = (w / s[:, None]).to(torch.float8_e4m3fn)
            else:
                s = (w.abs().max().clamp(min=1e-12) / fmax).reshape([])
                tensors[name] = (w / s).to(torch.float8_e4m3fn)
            tensors[mod + ".weight_scale"] = s.float()
            more(tensors, mod)
    rewrite_shards(out, shard)
    return sorted(gates)


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
    gates = _quark_weights(out, False, scales)
    glob = {"weight": _quark_tensor(), "input_tensors": _quark_tensor(),
            "output_tensors": None, "bias": None, "target_device": None}
    kv = dict(glob, output_tensors=_quark_tensor())
    update_config(out, lambda cfg: cfg.update(quantization_config={
        "quant_method": "quark", "quant_mode": "eager_mode",
        "algo_config": None, "exclude": ["lm_head"] + gates,
        "export": {"kv_cache_group": ["*k_proj", "*v_proj"], "min_kv_scale": 0.0,
                   "pack_method": "reorder", "weight_format": "real_quantized",
                   "weight_merge_groups": None},
        "global_quant_config": glob,
        "layer_quant_config": {"*k_proj": kv, "*v_proj": kv},
        "layer_type_quant_config": {}}))


def quark_ptpc(out):
    """AMD Quark's FP8 per channel with per-token activations (its
    quantization_ptpc_fp8 example: FP8E4M3PerChannelSpec, weight ch_axis 0
    static, input ch_axis 1 dynamic): each linear weight F8_E4M3 with one
    F32 scale a row, weight_scale 1-D [rows] as Quark exports it; no input
    or KV-cache scales (activations are quantized at run time); lm_head
    and the MoE routers excluded.  vLLM 0.32: QuarkW8A8Fp8 with
    kFp8StaticChannelSym weights, QuarkW8A8Fp8MoEMethod per channel."""
    gates = _quark_weights(out, True, lambda tensors, mod: None)
    glob = {"weight": _quark_tensor(qscheme="per_channel", ch_axis=0,
                                    observer_cls="PerChannelMinMaxObserver"),
            "input_tensors": _quark_tensor(qscheme="per_channel", ch_axis=1, is_dynamic=True,
                                           observer_cls="PerChannelMinMaxObserver"),
            "output_tensors": None, "bias": None, "target_device": None}
    update_config(out, lambda cfg: cfg.update(quantization_config={
        "quant_method": "quark", "quant_mode": "eager_mode",
        "algo_config": None, "exclude": ["lm_head"] + gates,
        "export": {"kv_cache_group": [], "min_kv_scale": 0.0,
                   "pack_method": "reorder", "weight_format": "real_quantized",
                   "weight_merge_groups": None},
        "global_quant_config": glob,
        "layer_quant_config": {}, "layer_type_quant_config": {}}))
