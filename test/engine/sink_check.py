#!/usr/bin/env python3
"""sink_check.py - openPangu Pro-V2's sink keys after --load-format wshard.

vLLM 0.32's OpenPanguSinkAttention keeps attn.sink_key =
k_layernorm(param_sink_key), a plain tensor no state file holds: its own
load_weights computes it at the end (post_weight_load); sharded_state never
calls that and leaves the value computed in __init__ from uninitialised
memory.  The wshard loader runs the hook (wshard_vllm.after_load).  This
loads OUT (wshard's tp 1 output of ckpt_openpangu.make_pro_v2) with the
plugin in-process, stops before process_weights_after_loading, and checks
each layer's sink_key against k_layernorm(param_sink_key), bit for bit.

    sink_check.py OUT
"""
import os
import socket
import sys


def main(out):
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "lib", "vllm"))
    import wshard_vllm
    wshard_vllm.register()
    import vllm.model_executor.model_loader.base_loader as bl
    from vllm.config import (LoadConfig, ModelConfig, ParallelConfig, VllmConfig,
                             set_current_vllm_config)
    from vllm.distributed import (ensure_model_parallel_initialized,
                                  init_distributed_environment)
    from vllm.model_executor.model_loader import get_model_loader
    mc = ModelConfig(model=out, dtype="bfloat16", skip_tokenizer_init=True,
                     max_model_len=256, seed=0, enforce_eager=True, trust_remote_code=True)
    vc = VllmConfig(model_config=mc, parallel_config=ParallelConfig(),
                    load_config=LoadConfig(load_format="wshard"))
    bad = []

    def inspect(model, model_config, target_device):
        for i, layer in enumerate(model.model.layers):
            a = layer.self_attn
            want = a.k_layernorm(a.param_sink_key.data)
            if not torch.equal(a.attn.sink_key, want):
                bad.append(f"layer {i}: sink_key is not k_layernorm(param_sink_key)")
        print(f"sink keys: {len(model.model.layers)} layers, "
              f"{'FAILED' if bad else 'ok'}", flush=True)
        raise SystemExit(1 if bad else 0)

    bl.process_weights_after_loading = inspect
    with set_current_vllm_config(vc):
        init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                     distributed_init_method="tcp://127.0.0.1:%d" % port,
                                     backend="gloo")
        ensure_model_parallel_initialized(1, 1)
        get_model_loader(vc.load_config).load_model(vllm_config=vc, model_config=mc)
    for b in bad:
        print(b)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
