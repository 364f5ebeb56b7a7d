"""Imported by every Python process started with test/engine/hook on
PYTHONPATH, vLLM's engine and worker processes included (they are started
afresh, so a patch made in the driver would not reach them).  When
WSHARD_ORACLE_DUMP names a folder, each worker saves its model state as
vLLM's ShardedStateLoader would load it, just before
process_weights_after_loading repacks the weights for the CPU kernels:
DUMP/model-rank-R.safetensors for tensor-parallel rank R, or
DUMP/model-pp-S-tp-R.safetensors for stage S of a pipeline."""
import importlib.abc
import importlib.util
import os
import sys

_TARGET = "vllm.model_executor.model_loader.base_loader"
_CPU = "vllm.platforms.cpu"


def _patch(module):
    real = module.process_weights_after_loading
    dump = os.environ["WSHARD_ORACLE_DUMP"]

    def dump_then_process(model, model_config, target_device):
        from safetensors.torch import save_file
        from vllm.distributed import (get_pp_group,
                                      get_tensor_model_parallel_rank)
        from vllm.model_executor.model_loader.sharded_state_loader import (
            ShardedStateLoader)
        rank = get_tensor_model_parallel_rank()
        state = ShardedStateLoader._filter_subtensors(model.state_dict())
        state = {k: v.detach().to("cpu").contiguous().clone()
                 for k, v in state.items()}
        os.makedirs(dump, exist_ok=True)
        pp = get_pp_group()
        name = (f"model-pp-{pp.rank_in_group}-tp-{rank}" if pp.world_size > 1
                else f"model-rank-{rank}")
        path = os.path.join(dump, name + ".safetensors")
        save_file(state, path + ".tmp", metadata={"format": "pt"})
        os.replace(path + ".tmp", path)
        return real(model, model_config, target_device)

    module.process_weights_after_loading = dump_then_process


def _patch_sparse(module):
    """WSHARD_ORACLE_SPARSE: vLLM's CPU platform refuses to build a model
    with sparse attention (DeepSeek-V3.2's and GLM-5's DSA: "Sparse
    Attention is not supported on CPU."), though loading its weights does
    not depend on the kernel.  Its MLA backend stands in, so that the model
    is built and its state saved; no forward pass is expected to run."""
    cls = module.CpuPlatform
    real = cls.get_attn_backend_cls.__func__

    def get_attn_backend_cls(klass, selected_backend, attn_selector_config, *a, **kw):
        if attn_selector_config.use_sparse:
            attn_selector_config = attn_selector_config._replace(use_sparse=False) \
                if hasattr(attn_selector_config, "_replace") else \
                __import__("dataclasses").replace(attn_selector_config, use_sparse=False)
        return real(klass, selected_backend, attn_selector_config, *a, **kw)

    cls.get_attn_backend_cls = classmethod(get_attn_backend_cls)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, target, patch):
        self.target, self.patch = target, patch

    def find_spec(self, name, path, target=None):
        if name != self.target:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            self.patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


if os.environ.get("WSHARD_ORACLE_DUMP"):
    sys.meta_path.insert(0, _Finder(_TARGET, _patch))
if os.environ.get("WSHARD_ORACLE_SPARSE"):
    sys.meta_path.insert(0, _Finder(_CPU, _patch_sparse))
