"""GPTQ and AWQ checkpoints, written from their published layouts with
vLLM's own packing code (vllm.model_executor.layers.quantization.utils.
quant_utils: quantize_weights, gptq_pack, awq_pack; neither AutoGPTQ nor
AutoAWQ installs or runs on a CPU-only machine) and checked, tensor by
tensor, with vLLM's own unpacking code: unpack_cols, and for AWQ the
_convert_awq_to_standard_format that vLLM's CPU method runs after loading.

Each linear weight X.weight [out, in] of the attention and MLP becomes
X.qweight, X.scales and X.qzeros (and GPTQ's X.g_idx), as AutoGPTQ and
AutoAWQ save them:
  GPTQ  qweight [in/8, out] int32, 8 4-bit values packed along the inputs
        (uint4b8: value + 8); scales [groups, out]; qzeros [groups, out/8]
        (symmetric: the zero 8 stored as 7, AutoGPTQ's format); g_idx [in]
  AWQ   qweight [in, out/8] int32, packed along the outputs in AWQ's
        interleaved order; scales [groups, out]; qzeros [groups, out/8]
"""
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
          "down_proj", "w1", "w2", "w3")  # w1-w3: Mixtral's experts

# variant: (method, bits, group_size)
VARIANTS = {"gptq": ("gptq", 4, 128), "gptqc": ("gptq", 4, -1),
            "awq": ("awq", 4, 128)}


def _awq_check(qweight, qzeros, w_q, w_zp, k, n):
    """vLLM's CPU AWQ method repacks qweight to the standard layout after
    loading: its result must unpack to the values quantized."""
    from unittest import mock
    import torch
    from vllm.model_executor import parameter
    from vllm.model_executor.layers.quantization.auto_awq import (
        _convert_awq_to_standard_format)
    from vllm.model_executor.layers.quantization.utils.quant_utils import (
        unpack_cols)
    layer = torch.nn.Module()
    layer.qweight = torch.nn.Parameter(qweight.clone(), requires_grad=False)
    layer.qzeros = torch.nn.Parameter(qzeros.clone(), requires_grad=False)
    # its parameters ask for the tensor-parallel group: one rank of one
    with mock.patch.object(parameter, "get_tensor_model_parallel_rank", lambda: 0), \
            mock.patch.object(parameter, "get_tensor_model_parallel_world_size", lambda: 1):
        _convert_awq_to_standard_format(layer, "qweight", "qzeros", 4)
    got = unpack_cols(layer.qweight.data.t().contiguous(), 4, n, k).t()
    assert torch.equal(got, w_q), "AWQ qweight does not unpack to its values"
    # the zero points repacked [out/8, groups], packed along the outputs
    z = unpack_cols(layer.qzeros.data.t().contiguous(), 4, w_zp.shape[0], n)
    assert torch.equal(z, w_zp), "AWQ qzeros do not unpack to the zero points"


def quantize(w, method, bits, group):
    """The tensors of one weight w [out, in] (float)."""
    import torch
    from vllm.scalar_type import scalar_types
    from vllm.model_executor.layers.quantization.utils.quant_utils import (
        awq_pack, gptq_pack, pack_cols, quantize_weights, unpack_cols)
    wt = w.t().contiguous()                     # [in, out]
    k, n = wt.shape
    if method == "gptq":
        qt = scalar_types.uint4b8 if bits == 4 else scalar_types.uint8b128
        ref, w_q, w_s, _ = quantize_weights(wt, qt, group)
        qweight = gptq_pack(w_q, bits, k, n)
        got = unpack_cols(qweight.t().contiguous(), bits, n, k).t()
        assert torch.equal(got, w_q), "GPTQ qweight does not unpack to its values"
        groups = w_s.shape[0]
        zeros = torch.full((groups, n), qt.bias - 1, dtype=torch.int32)
        out = {"qweight": qweight, "scales": w_s.to(w.dtype),
               "qzeros": pack_cols(zeros, bits, groups, n)}
        size = k if group == -1 else group
        out["g_idx"] = (torch.arange(k, dtype=torch.int32) // size)
    else:
        ref, w_q, w_s, w_zp = quantize_weights(wt, scalar_types.uint4, group,
                                               zero_points=True)
        groups = w_s.shape[0]
        qweight = awq_pack(w_q, 4, k, n)
        qzeros = awq_pack(w_zp, 4, groups, n)
        _awq_check(qweight, qzeros, w_q, w_zp, k, n)
        out = {"qweight": qweight, "scales": w_s.to(w.dtype), "qzeros": qzeros}
    # the dequantized weight is the weight, to the quantization's step
    step = w_s.float().abs().max().item()
    assert (ref.float() - wt.float()).abs().max().item() <= step, "bad quantization"
    return out


def gptq_awq(out, variant):
    """Rewrites the checkpoint in OUT, shard by shard, as VARIANTS[variant]
    quantizes it, and adds quantization_config to config.json."""
    from ckpt_io import rewrite_shards, update_config
    method, bits, group = VARIANTS[variant]

    def shard(tensors):
        for name in list(tensors):
            if name.endswith(".weight") and name.split(".")[-2] in LINEAR:
                base = name[:-len("weight")]
                for suffix, t in quantize(tensors.pop(name), method, bits, group).items():
                    tensors[base + suffix] = t
    rewrite_shards(out, shard)
    if method == "gptq":
        q = {"quant_method": "gptq", "bits": bits, "group_size": group,
             "desc_act": False, "sym": True, "checkpoint_format": "gptq",
             "damp_percent": 0.01, "true_sequential": True}
    else:
        q = {"quant_method": "awq", "bits": bits, "group_size": group,
             "zero_point": True, "version": "gemm",
             "modules_to_not_convert": None}
    update_config(out, lambda cfg: cfg.update(quantization_config=q))
