"""Imported by every Python process started with test/engine/hook on
PYTHONPATH, vLLM's engine and worker processes included (they are started
afresh, so a patch made in the driver would not reach them).  When
WSHARD_ORACLE_DUMP names a folder, each worker saves its model state as
vLLM's ShardedStateLoader would load it, just before
process_weights_after_loading repacks the weights for the CPU kernels:
DUMP/model-rank-R.safetensors for tensor-parallel rank R, or
DUMP/model-pp-S-tp-R.safetensors for stage S of a pipeline; a speculative
draft's as DUMP/draft-rank-R.safetensors (WSHARD_ORACLE_DRAFT_FOLLOWS: also
where the target is load-only or its own repacking fails; a draft's parameter its
load_weights left unfilled and vLLM's proposer replaces with the target's
holds the target's: _share_unfilled).  When
WSHARD_BENCH_TIMES names a folder, each worker records there when its
loader's load_model began and its load_weights began and ended
(_patch_times).  Always:
_patch_llvmlite."""
import importlib.abc
import importlib.util
import os
import sys

_TARGET = "vllm.model_executor.model_loader.base_loader"
# What a worker raises once its state is saved where a patch below has let
# vLLM build a layer its CPU build has no kernel for
# (WSHARD_ORACLE_MXFP4_MOE patches nothing: vLLM builds compressed-tensors'
# MXFP4 experts on a CPU, then repacks them for Marlin, a CUDA op its CPU
# build lacks: "_C has no attribute 'gptq_marlin_repack'", after the save)
LOAD_ONLY = ("WSHARD_ORACLE_INT4", "WSHARD_ORACLE_NOGATE", "WSHARD_ORACLE_NVFP4_MOE",
             "WSHARD_ORACLE_MXFP4_MOE", "WSHARD_ORACLE_OLMO_GDN", "WSHARD_ORACLE_FP8_BLOCK",
             "WSHARD_ORACLE_MXFP4_CPU", "WSHARD_ORACLE_MXFP6", "WSHARD_ORACLE_PANGU_VL",
             "WSHARD_ORACLE_INT8_MOE", "WSHARD_ORACLE_DSV41",
             # nothing patched: the worker stops once its state is saved
             # (test/engine/run: Mistral Large 3's MLA, which vLLM's CPU
             # build runs only with AMX tiles, loaded from wshard's output)
             "WSHARD_ORACLE_STOP")
LOAD_ONLY_STOP = "wshard oracle: state saved; the kernel taken as supported is not run"
_CPU = "vllm.platforms.cpu"
# What a worker raises once its draft's state is saved where
# WSHARD_ORACLE_DRAFT_FOLLOWS let it go past its target's failed repacking
PAST_TARGET_STOP = "wshard oracle: draft state saved; the target's repacking failed"
_TARGET_FAILED = []
# The target's LM head and embedding (this worker's cut), kept from its
# saved state for its MTP draft's (_share_unfilled)
_TARGET_SHARED = {}


def _record_loaded(module):
    """Each model built records the names its load_weights returns (the
    parameters it filled) as _wshard_loaded, for _share_unfilled."""
    cls = module.BaseModelLoader
    real = cls.create_model

    def create_model(self, *a, **kw):
        model = real(self, *a, **kw)
        inner = model.load_weights

        def load_weights(weights, *wa, **wkw):
            r = inner(weights, *wa, **wkw)
            object.__setattr__(model, "_wshard_loaded",
                               None if r is None else set(r))
            return r

        object.__setattr__(model, "load_weights", load_weights)
        return model

    cls.create_model = create_model


def _share_unfilled(model, state, pp_size):
    """An MTP draft whose release's MTP layer ships no shared_head.head
    and/or embed_tokens (GLM-4.6, GLM-4.7, GLM-4.7-Flash): vLLM's
    DeepSeek-style drafts load neither from the target's tensors, so those
    parameters stay as torch.empty left them; before serving, the proposer
    replaces every MTP layer's shared_head.head with the target's lm_head
    and (one pipeline stage) the draft's embedding with the target's
    (v1/spec_decode/llm_base_proposer.py, _maybe_share_lm_head and
    _maybe_share_embeddings).  The draft's state holds here, for each such
    parameter its load_weights did not fill, what vLLM serves with: the
    target's, as wshard writes it."""
    loaded = getattr(model, "_wshard_loaded", None)
    if loaded is None or not hasattr(model, "model"):
        return
    for name in list(state):
        if name in loaded:
            continue
        if name.endswith("shared_head.head.weight"):
            src = _TARGET_SHARED.get("lm_head")
        elif name == "model.embed_tokens.weight" and pp_size == 1:
            src = _TARGET_SHARED.get("embed")
        else:
            continue
        if src is not None and src.shape == state[name].shape:
            print(f"wshard oracle: draft {name} unfilled by its load_weights:"
                  " the target's, as vLLM's proposer shares it", file=sys.stderr)
            # a copy each: two MTP layers' heads may both be unfilled
            # (safetensors refuses tensors that share memory)
            state[name] = src.clone()


def _zero_kimi_audio_k_bias(model):
    """Kimi-Audio's Whisper encoder: KimiAudioWhisperEncoder.load_weights
    (kimi_audio.py:114-116) loads no k_proj bias (Whisper has none) where
    Whisper's own load_weights feeds zeros (whisper.py:1042-1049,
    _create_fake_bias_for_k_proj), so the k third of each layer's
    self_attn.qkv_proj.bias keeps what torch.empty handed back
    (ColumnParallelLinear, layers/linear.py:534-535): any bytes, NaN
    among them, which make the reference's answers to the audio prompt
    change from one start to the next (all token 0 in one run).  The
    reference sets them to zeros, as Whisper's load would and as wshard
    writes them; nothing else of the state is touched."""
    import torch
    with torch.no_grad():
        for layer in getattr(model.audio_tower, "layers", []):
            attn = getattr(layer, "self_attn", None)
            if attn is None or getattr(attn.qkv_proj, "bias", None) is None:
                continue  # (a pipeline stage's missing layer)
            attn.qkv_proj.bias[attn.q_size:attn.q_size + attn.kv_size].zero_()


def _patch(module):
    real = module.process_weights_after_loading
    dump = os.environ["WSHARD_ORACLE_DUMP"]

    def dump_then_process(model, model_config, target_device):
        import torch
        from safetensors.torch import save_file
        from vllm.distributed import (get_pp_group,
                                      get_tensor_model_parallel_rank)
        from vllm.model_executor.model_loader.sharded_state_loader import (
            ShardedStateLoader)
        rank = get_tensor_model_parallel_rank()
        if type(model).__name__ == "KimiAudioForConditionalGeneration":
            _zero_kimi_audio_k_bias(model)
        state = ShardedStateLoader._filter_subtensors(model.state_dict())
        # a parameter on the meta device (made under vLLM's no_init_weights,
        # as DeepSeek-V4.1's image embeddings are with the image limit 0:
        # deepseek_v41/nvidia/vl_model.py:155-170) holds no data: dumped as
        # zeros and named in the file's metadata (wshard_meta), compared by
        # dtype and shape alone (oracle.py)
        meta = sorted(k for k, v in state.items() if v.is_meta)
        for k in meta:
            print(f"wshard oracle: {k} is on the meta device (no data): "
                  "compared by dtype and shape", file=sys.stderr)
        state = {k: torch.zeros(v.shape, dtype=v.dtype) if v.is_meta
                 else v.detach().to("cpu").contiguous().clone()
                 for k, v in state.items()}
        os.makedirs(dump, exist_ok=True)
        pp = get_pp_group()
        # a speculative draft (speculative_config) is loaded after its
        # target by the same worker
        draft = getattr(model_config, "runner", None) == "draft"
        kind = "draft" if draft else "model"
        name = (f"{kind}-pp-{pp.rank_in_group}-tp-{rank}" if pp.world_size > 1
                else f"{kind}-rank-{rank}")
        if not draft:
            for key, end in (("lm_head", "lm_head.weight"),
                             ("embed", "model.embed_tokens.weight")):
                names = sorted((k for k in state if k == end or k.endswith("." + end)),
                               key=len)
                if names:
                    _TARGET_SHARED[key] = state[names[0]]
        if draft:
            _share_unfilled(model, state, pp.world_size)
            if getattr(model, "use_parallel_drafting", False) and \
                    getattr(model, "mask_hidden", None) is not None:
                # P-EAGLE's mask_hidden: a buffer no state holds
                # (persistent=False), filled from the checkpoint's by
                # load_weights, read by the proposer
                state["mask_hidden"] = model.mask_hidden.detach().to("cpu").clone()
            if getattr(model, "has_own_embed_tokens", None) is False:
                # an EAGLE draft whose checkpoint has no embedding (its
                # load_weights saw none, process_eagle_weight): the
                # proposer replaces the one it built, never filled, with
                # the target's once loaded (v1/spec_decode/
                # llm_base_proposer.py, _maybe_share_embeddings)
                state.pop("model.embed_tokens.weight", None)
            if getattr(model, "has_own_lm_head", None) is False:
                # the same for its head (DFlash's releases ship neither):
                # _maybe_share_lm_head gives it the target's
                state.pop("lm_head.weight", None)
            if getattr(getattr(model, "model", None),
                       "has_separate_mask_embedding", None) is False:
                # DFlash's mask_embedding: zeros, filled only from a
                # mask_embedding.pt beside the draft, used only then
                state.pop("model.mask_embedding", None)
            if type(model).__name__ == "LongCatFlashMTP":
                # its load_weights fills nothing outside model.mtp.*: its
                # lm_head is never filled (whatever torch.empty handed
                # back), and the proposer replaces it with the target's
                # (llm_base_proposer.py, _maybe_share_lm_head: an MTP draft)
                state.pop("lm_head.weight", None)
        elif (getattr(model, "is_pooling_model", False) and "lm_head.weight" in state and
              "lm_head.weight" not in (getattr(model, "_wshard_loaded", None) or {"lm_head.weight"})):
            # a pooling model built on a causal one that keeps its LM head
            # (JambaForSequenceClassification): the checkpoint has none, so
            # its load_weights fills none (whatever torch.empty handed back),
            # and pooling never uses it
            print("wshard oracle: lm_head.weight unfilled by a pooling model's"
                  " load_weights: left out", file=sys.stderr)
            state.pop("lm_head.weight")
        if not draft and type(model).__name__ == "LlamaNemotronVLForSequenceClassification":
            # the reranker's text model builds its own score head, which the
            # checkpoint lacks and the outer score replaces: load_weights
            # fills it with random values (nemotron_vl.py), no answer reads it
            for k in [k for k in state if k.startswith("language_model.score.")]:
                print(f"wshard oracle: {k} filled at random by the reranker's"
                      " load_weights: left out", file=sys.stderr)
                state.pop(k)
        path = os.path.join(dump, name + ".safetensors")
        save_file(state, path + ".tmp", metadata=dict(
            {"format": "pt"}, **({"wshard_meta": ",".join(meta)} if meta else {})))
        os.replace(path + ".tmp", path)
        load_only = any(os.environ.get(v) for v in LOAD_ONLY)
        if not draft and os.environ.get("WSHARD_ORACLE_DRAFT_FOLLOWS"):
            # a speculative draft is loaded next (test/engine/run sets this
            # for ARCH:TP:bytes:mtp and Kimi K3's drafts): the worker goes
            # on to it, the target left unprocessed where it is load-only,
            # or its repacking's failure in vLLM's CPU build (Kimi K3's
            # MLA) logged; it stops once the draft's state is saved
            if load_only:
                return None
            try:
                return real(model, model_config, target_device)
            except Exception as e:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                _TARGET_FAILED.append(f"{type(e).__name__}: {e}")
                return None
        if load_only:
            raise RuntimeError(LOAD_ONLY_STOP)
        if draft and _TARGET_FAILED:
            raise RuntimeError(f"{PAST_TARGET_STOP}: {_TARGET_FAILED[0]}")
        return real(model, model_config, target_device)

    module.process_weights_after_loading = dump_then_process


def _patch_times(module):
    """WSHARD_BENCH_TIMES: each worker writes TIMES/worker-PID.json, its
    rank, the wall-clock start of its loader's load_model (the model built,
    then its weights loaded) and the start and end of load_weights within it.
    vLLM logs only worker 0's "Loading weights took"; the engine serves once
    every worker has loaded, and where workers read one checkpoint through
    one page cache, the first to start reads for the others, so worker 0's
    figure alone favours whichever side lets it trail.  The wshard load
    format starts reading while the model is built: only the time from
    load_model's start to load_weights' end compares it with the others."""
    import json
    import time
    cls = module.BaseModelLoader
    real = cls.load_model
    times = os.environ["WSHARD_BENCH_TIMES"]

    def load_model(self, *a, **kw):
        inner = self.load_weights
        rec = {}

        def timed(*wa, **wkw):
            rec["start"] = time.time()
            r = inner(*wa, **wkw)
            rec["end"] = time.time()
            return r

        self.load_weights = timed
        rec["model_start"] = time.time()
        try:
            r = real(self, *a, **kw)
        finally:
            del self.load_weights
        from vllm.distributed import get_world_group
        rec["rank"] = get_world_group().rank
        os.makedirs(times, exist_ok=True)
        with open(os.path.join(times, "worker-%d.json" % os.getpid()), "w") as f:
            json.dump(rec, f)
        return r

    cls.load_model = load_model


def _patch_sparse(module):
    """WSHARD_ORACLE_SPARSE: vLLM's CPU platform refuses to build a model
    with sparse attention (DeepSeek-V3.2's and GLM-5's DSA: "Sparse
    Attention is not supported on CPU."), though loading its weights does
    not depend on the kernel.  Its MLA backend stands in, so that the model
    is built and its state saved; no forward pass is expected to run.
    The reference one (CPU_MLA) on every CPU: on one with AMX tiles vLLM
    would pick AMX_MLA, whose implementation takes no topk_indices_buffer
    ("MLACommonImpl.__init__() got an unexpected keyword argument")."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    cls = module.CpuPlatform
    real = cls.get_attn_backend_cls.__func__

    def get_attn_backend_cls(klass, selected_backend, attn_selector_config, *a, **kw):
        if attn_selector_config.use_sparse:
            attn_selector_config = attn_selector_config._replace(use_sparse=False) \
                if hasattr(attn_selector_config, "_replace") else \
                __import__("dataclasses").replace(attn_selector_config, use_sparse=False)
            selected_backend = AttentionBackendEnum.CPU_MLA
        return real(klass, selected_backend, attn_selector_config, *a, **kw)

    cls.get_attn_backend_cls = classmethod(get_attn_backend_cls)


def _patch_int4(module):
    """WSHARD_ORACLE_INT4: vLLM 0.32's CPU build has one INT4 MoE kernel
    (CPUExpertsInt4), for CPUs with AMX tiles, ungrouped-scale schemes
    (kInt4Static, not Kimi-K2.5's groups of 32) and softmax routing (not
    DeepSeek-V3's grouped sigmoid); so it builds no compressed-tensors
    W4A16 MoE layer of Kimi's, nor GPTQ's or AWQ's experts on a CPU
    without AMX ("No WNA16 MoE backend supports the deployment
    configuration"), though loading the experts' weights does
    not depend on the kernel.  The kernel is taken as supporting every
    configuration, so that the model is built, loaded and its state saved;
    then the worker stops (LOAD_ONLY_STOP)."""
    module.CPUExpertsInt4.is_supported_config = \
        staticmethod(lambda *a, **kw: (True, None))


def _patch_int8_moe(module):
    """WSHARD_ORACLE_INT8_MOE: vLLM 0.32's CPU build has one INT8 MoE
    kernel for dynamic activations (CPUExpertsInt8), for CPUs with AMX
    tiles only, so it builds no Quark W8A8 INT8 MoE layer with dynamic
    activations elsewhere ("No Int8 MoE backend supports the deployment
    configuration", QuarkW8A8Int8MoEMethod.__init__), though loading the
    experts' weights does not depend on the kernel.  The kernel is taken
    as supported, so that the model is built, loaded and its state saved;
    then the worker stops (LOAD_ONLY_STOP)."""
    module.CPUExpertsInt8.is_supported_config = \
        staticmethod(lambda *a, **kw: (True, None))


def _patch_fp8_block(module):
    """WSHARD_ORACLE_FP8_BLOCK: vLLM 0.32's CPU build has block-FP8 linear
    kernels for CPUs with AMX tiles only (kernels/linear/scaled_mm/cpu.py,
    CPUFp8BlockScaledMMKernel: "requires AMX tile support"), though loading
    the weights and their block scales does not depend on the kernel.  The
    kernel is taken as supported, so that the model is built, loaded and
    its state saved; then the worker stops (LOAD_ONLY_STOP)."""
    module.CPUFp8BlockScaledMMKernel.is_supported = \
        classmethod(lambda cls, *a, **kw: (True, None))


def _patch_fbgemm(module):
    """WSHARD_ORACLE_FBGEMM: vLLM 0.32's FBGEMMFp8Config takes Marlin's
    weight-only FP8 kernel where the platform has no device capability 89
    (a CPU has none), and repacks the weights for it after loading with a
    CUDA op its CPU build lacks ("_C has no attribute
    'gptq_marlin_repack'").  The parameters it loads do not depend on the
    kernel: use_marlin is turned off, so that the layer runs the FP8
    per-token kernel vLLM's CPU build has (compressed-tensors' FP8 layers
    run it), and both engines answer."""
    init = module.FBGEMMFp8Config.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.use_marlin = False
    module.FBGEMMFp8Config.__init__ = __init__


def _patch_dflash2(module):
    """WSHARD_ORACLE_DFLASH2: vLLM 0.32 drafts with a DFlash2 draft's
    candidate head only in its V2 model runner; the V1 runner, its CPU
    build's, refuses the draft (config/vllm.py: "Model Runner V1 does not
    support: DFlash candidate-head drafts"), though it builds and loads it
    as any DFlash draft and its DFlashProposer drafts with it as with
    DFlash's (the layers' convolutions run, the candidate selector is
    loaded but not used).  The refusal is dropped."""
    cls = module.VllmConfig
    real = cls._get_v1_model_runner_unsupported_features

    def unsupported(self):
        return [u for u in real(self) if u != "DFlash candidate-head drafts"]

    cls._get_v1_model_runner_unsupported_features = unsupported


def _patch_dspark(module):
    """WSHARD_ORACLE_DSPARK: vLLM 0.32 drafts with DSpark (speculative_config
    method dspark) only in its V2 GPU model runner (v1/worker/gpu/
    spec_decode/dspark); the V1 runner, its CPU build's, refuses it
    (config/vllm.py: "Model Runner V1 does not support: dspark speculative
    decoding").  Qwen3's DSpark draft (qwen3_dspark.py) is DFlash's Qwen3
    draft (Qwen3DSparkForCausalLM subclasses DFlashQwen3ForCausalLM) with a
    Markov and a confidence head: once SpeculativeConfig has resolved
    method dspark and built the draft's config (its architecture kept, no
    EAGLEConfig), the method is made dflash, so that V1's DFlashProposer
    builds the draft by that architecture, loads it with its own
    load_weights and drafts with its DFlash layers (the Markov bias and the
    confidence head loaded, not run)."""
    cls = module.SpeculativeConfig
    real = cls.__post_init__

    def __post_init__(self):
        real(self)
        if self.method == "dspark":
            self.method = "dflash"

    cls.__post_init__ = __post_init__


def _patch_step3p5_mtp(module):
    """WSHARD_ORACLE_STEP3P5_MTP: vLLM 0.32's Step3p5Config crops
    layer_types to num_hidden_layers (transformers' check of its length),
    though the release lists its MTP layers' too and the MTP draft
    (step3p5_mtp.py) builds its layers numbered from num_hidden_layers with
    step3p5.py's decoder layer, which reads layer_types[its number]: an
    IndexError on any platform (vLLM issue 40000, pull request 40070).  The
    list config.json gives is set back once the config is made, as that
    pull request's vllm_layer_types does."""
    cls = module.Step3p5Config
    init = cls.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        full = kwargs.get("layer_types")
        if full and len(full) > len(self.layer_types or []):
            self.__dict__["layer_types"] = list(full)

    cls.__init__ = __init__


def _patch_ml3_eagle(module):
    """WSHARD_ORACLE_ML3_EAGLE: vLLM 0.32's EagleMistralLarge3Model
    (mistral_large_3_eagle.py) builds itself with nn.Module.__init__, not
    DeepseekV2Model's, so it never sets is_fused_shared_expert_enabled,
    which DeepseekV2Model.load_weights (deepseek_v2.py:1635) reads: an
    AttributeError loading the draft on any platform.  It is set False, as
    DeepseekV2Model's is_model_fused_shared_expert_compatible gives it
    wherever shared experts are not fused (ROCm's AITER only)."""
    module.EagleMistralLarge3Model.is_fused_shared_expert_enabled = False


def _patch_dsv4_mtp(module):
    """WSHARD_ORACLE_DSV4_MTP: vLLM 0.32's CPU build has no DeepSeek-V4 MTP
    draft: cpu/mtp.py's DeepSeekV4MTP raises NotImplementedError ("DeepSeek-V4
    speculative decoding (MTP) is not implemented on CPU.").  Here it is
    vLLM's own GPU draft (nvidia/mtp.py: its MTP layer, its names, its
    load_weights) with the CPU build's DeepseekV4DecoderLayer, the one its
    DeepSeek-V4 target holds, as mtp_block: built without CUDA streams (the
    GPU layer's aux streams, which the CPU one takes none of) and without
    the native MegaMoE (a CUDA kernel; the CPU layer's MoE is never one).
    Load and save only: the draft's forward runs GPU kernels (tilelang)."""
    import torch
    from vllm.models.deepseek_v4.cpu import model as cpu_model
    from vllm.models.deepseek_v4.nvidia import mtp as gpu_mtp

    class Layer(cpu_model.DeepseekV4DecoderLayer):
        def __init__(self, vllm_config, prefix, topk_indices_buffer=None,
                     aux_stream_list=None):
            super().__init__(vllm_config, prefix,
                             topk_indices_buffer=topk_indices_buffer)
            self.use_sequence_parallel = False
            self.ffn.use_native_mega_moe = False
            self.ffn.finalize_mega_moe_weights = lambda: None

    gpu_mtp.DeepseekV4DecoderLayer = Layer
    real = gpu_mtp.DeepSeekV4MultiTokenPredictor.__init__

    def __init__(self, *a, **kw):
        stream = torch.cuda.Stream
        torch.cuda.Stream = lambda *sa, **skw: None
        try:
            real(self, *a, **kw)
        finally:
            torch.cuda.Stream = stream

    gpu_mtp.DeepSeekV4MultiTokenPredictor.__init__ = __init__
    module.DeepSeekV4MTP = gpu_mtp.DeepSeekV4MTP
    # the package vLLM's registry names takes it from cpu/mtp.py once this
    # runs on its import; where it was imported before, it is set there
    pkg = sys.modules.get("vllm.models.deepseek_v4")
    if pkg is not None and hasattr(pkg, "DeepSeekV4MTP"):
        pkg.DeepSeekV4MTP = gpu_mtp.DeepSeekV4MTP


def _patch_dsv4_dspark(module):
    """WSHARD_ORACLE_DSV4_DSPARK: vLLM 0.32's CPU build has no DeepSeek-V4
    DSpark draft (registry DSparkDraftModel): cpu/dspark.py's
    DSparkDeepseekV4ForCausalLM raises NotImplementedError ("DeepSeek-V4
    speculative decoding (DSpark) is not implemented on CPU.").  Here it is
    vLLM's own GPU draft (nvidia/dspark.py: its model, its names, its
    load_weights) with the CPU build's DeepseekV4DecoderLayer, the one its
    DeepSeek-V4 target holds, as each draft layer: without the native
    MegaMoE (a CUDA kernel; the CPU layer's MoE is never one) and with the
    n_redundant_experts nvidia/model.py's MoE sets (eplb_config's,
    model.py:808), which its load_weights reads and the CPU MoE lacks.
    collect_moe_layers finds no nvidia DeepseekV4MoE in the CPU layers and
    leaves the EPLB counts 0 (no state).  With WSHARD_ORACLE_DSPARK the V1
    runner builds it as a DFlash draft.  Load and save only: the draft's
    forward runs GPU kernels (tilelang's mhc, the fused KV inserts)."""
    from vllm.models.deepseek_v4.cpu import model as cpu_model
    from vllm.models.deepseek_v4.nvidia import dspark as gpu_dspark

    class Layer(cpu_model.DeepseekV4DecoderLayer):
        def __init__(self, vllm_config, prefix, topk_indices_buffer=None):
            super().__init__(vllm_config, prefix,
                             topk_indices_buffer=topk_indices_buffer)
            self.ffn.use_native_mega_moe = False
            self.ffn.finalize_mega_moe_weights = lambda: None
            self.ffn.n_redundant_experts = \
                vllm_config.parallel_config.eplb_config.num_redundant_experts

    gpu_dspark.DeepseekV4DecoderLayer = Layer
    module.DSparkDeepseekV4ForCausalLM = gpu_dspark.DSparkDeepseekV4ForCausalLM
    pkg = sys.modules.get("vllm.models.deepseek_v4")
    if pkg is not None and hasattr(pkg, "DSparkDeepseekV4ForCausalLM"):
        pkg.DSparkDeepseekV4ForCausalLM = gpu_dspark.DSparkDeepseekV4ForCausalLM


def _patch_dsv4_vl(module):
    """WSHARD_ORACLE_DSV4_VL: vLLM 0.32's CPU build has no DeepSeek-V4
    vision model: the registry's DeepseekV4ForConditionalGeneration is
    vl_stub.py's, which raises NotImplementedError ("DeepSeek-V4 vision
    (DeepseekV4ForConditionalGeneration) is not supported on the current
    platform; use CUDA or ROCm.").  Here it is vLLM's own (common/
    vl_model.py: its tower and aligner, common/vision.py; its mapper and
    load_weights), which builds the CPU build's DeepseekV4ForCausalLM as
    its language_model, given what vLLM's GPU text model builds for a
    vision checkpoint (nvidia/model.py, DeepseekV4MoE.__init__; amd/ the
    same) and the CPU one does not: each MoE router's F32 bias_vl
    [n_routed_experts], and its e_score_correction_bias on the hash layers
    too where topk_method is noaux_tc (_patch_dsv4_vl_moe).  Load and save
    only: the text model then fails as DeepSeek-V4's does on the CPU."""
    from vllm.models.deepseek_v4.common import vl_model
    module.DeepseekV4ForConditionalGeneration = vl_model.DeepseekV4ForConditionalGeneration
    pkg = sys.modules.get("vllm.models.deepseek_v4")
    if pkg is not None and hasattr(pkg, "DeepseekV4ForConditionalGeneration"):
        pkg.DeepseekV4ForConditionalGeneration = \
            vl_model.DeepseekV4ForConditionalGeneration


def _patch_dsv4_vl_moe(module):
    """WSHARD_ORACLE_DSV4_VL: the CPU build's DeepseekV4MoE given the
    router parameters vLLM's GPU one builds where config.json has a
    vision tower (nvidia/model.py, DeepseekV4MoE.__init__: bias_vl on every
    MoE layer, e_score_correction_bias on the hash layers too); they are
    loaded and saved, not used (the CPU forward never runs: see
    _patch_dsv4_vl)."""
    import torch
    from torch import nn
    real = module.DeepseekV4MoE.__init__

    def __init__(self, vllm_config, prefix=""):
        real(self, vllm_config, prefix)
        config = vllm_config.model_config.hf_config
        if getattr(config, "vision_n_layers", 0) <= 0:
            return
        if (getattr(config, "topk_method", None) == "noaux_tc" and
                self.gate.e_score_correction_bias is None):
            self.gate.e_score_correction_bias = nn.Parameter(
                torch.empty(config.n_routed_experts, dtype=torch.float32),
                requires_grad=False)
        self.gate.bias_vl = nn.Parameter(
            torch.empty(config.n_routed_experts, dtype=torch.float32),
            requires_grad=False)

    module.DeepseekV4MoE.__init__ = __init__


def _dsv41_no_gpu():
    """What needs a GPU to exist while DeepSeek-V4.1's NVIDIA classes are
    built (see _patch_dsv41), stood in for: a context manager."""
    import contextlib
    import types
    import torch
    from vllm.platforms import current_platform
    from vllm.platforms.interface import DeviceCapability

    @contextlib.contextmanager
    def no_gpu():
        saved = (torch.cuda.Stream, torch.cuda.Event,
                 torch.cuda.get_device_properties,
                 torch.accelerator.current_device_index)
        torch.cuda.Stream = lambda *a, **kw: None
        torch.cuda.Event = lambda *a, **kw: None
        torch.cuda.get_device_properties = \
            lambda *a, **kw: types.SimpleNamespace(multi_processor_count=1)
        torch.accelerator.current_device_index = lambda: 0
        platform = type(current_platform)
        cap = platform.__dict__.get("get_device_capability")
        # a Hopper GPU's (SM 9.0): FlashMLA's attention (nvidia/model.py,
        # _select_dsv4_attn_cls), which pads attn_sink to 64 or 128 heads
        platform.get_device_capability = classmethod(
            lambda c, device_id=0: DeviceCapability(9, 0))
        try:
            yield
        finally:
            (torch.cuda.Stream, torch.cuda.Event,
             torch.cuda.get_device_properties,
             torch.accelerator.current_device_index) = saved
            if cap is None:
                del platform.get_device_capability
            else:
                platform.get_device_capability = cap

    return no_gpu()


def _patch_dsv41(module):
    """WSHARD_ORACLE_DSV41: vLLM 0.32 builds DeepSeek-V4.1
    (DeepseekV41ForCausalLM, models/deepseek_v41) from its NVIDIA classes
    on every platform but ROCm (deepseek_v41/__init__.py), and the CPU
    build has no V4.1 of its own.  Those classes are built here as vLLM
    builds them, their load_weights and mappers vLLM's own, with what needs
    a GPU to exist stood in for while the model is built: CUDA streams and
    events (nvidia/model.py, DeepseekV4Model; attention.py, ln_events;
    common/engram.py, Engram), the device's SM count the Engram lookup
    reads (common/engram.py, ParallelEngramEmbedding), the device's
    capability (a Hopper GPU's, SM 9.0: nvidia/model.py,
    _select_dsv4_attn_cls then takes FlashMLA's attention, nvidia/
    flashmla.py, whose get_padded_num_q_heads sizes attn_sink to 64 or 128
    heads; deepseek_v4/nvidia/ops/o_proj.py asserts a CUDA device), and the
    Engram
    table kept in plain host memory, not pinned host memory a GPU reads
    through UVA (engram_config.cpu_offload: the same tensor, the same
    rows).  Load and save only: the forward pass runs CUDA kernels."""
    cls = module.DeepseekV41ForCausalLM
    real = cls.__init__

    def __init__(self, *, vllm_config, prefix=""):
        engram = vllm_config.engram_config
        if engram is not None:
            engram.cpu_offload = False
            engram.dp_shared_memory = False
        with _dsv41_no_gpu():
            real(self, vllm_config=vllm_config, prefix=prefix)

    cls.__init__ = __init__


def _patch_dsv41_dspark(module):
    """WSHARD_ORACLE_DSV41 with WSHARD_ORACLE_DSPARK: DeepSeek-V4.1's DSpark
    draft (registry DSparkV41DraftModel, deepseek_v41/nvidia/dspark.py's
    DSparkDeepseekV4ForCausalLM: its model, names and load_weights, its
    decoder layers the target's NVIDIA ones) built on the CPU as the
    target is (_patch_dsv41: CUDA streams and events, the device's SM count
    and capability, SM 9.0's FlashMLA attention, stood in for while it is
    built).  vLLM's CPU build picks no native MegaMoE backend, so the
    draft's MoE is the fused one and finalize_mega_moe_weights, which its
    load_weights calls, does nothing (deepseek_v4/nvidia/model.py:1008).
    Load and save only: its forward runs CUDA kernels."""
    cls = module.DSparkDeepseekV4ForCausalLM
    real = cls.__init__

    def __init__(self, *, vllm_config, prefix=""):
        with _dsv41_no_gpu():
            real(self, vllm_config=vllm_config, prefix=prefix)

    cls.__init__ = __init__


def _patch_mxfp4_cpu(module):
    """WSHARD_ORACLE_MXFP4_CPU: vLLM 0.32's CPU MXFP4 MoE kernel
    (CPUExpertsMxfp4, GPT-OSS's and DeepSeek-V4's FP4 experts) is built only
    on CPUs with AMX tiles ("No MXFP4 MoE backend supports the deployment
    configuration"), though loading the experts does not depend on it.  It
    is taken as supported, so that the model is built, loaded and its state
    saved; then the worker stops (LOAD_ONLY_STOP)."""
    module.CPUExpertsMxfp4._supports_current_device = staticmethod(lambda: True)


def _patch_nvfp4(module):
    """WSHARD_ORACLE_NVFP4: vLLM 0.32 registers no NVFP4 linear kernel for
    its CPU platform (kernels/linear/__init__.py, _POSSIBLE_NVFP4_KERNELS
    has CUDA's and ROCm's; weight-only NVFP4A16 forces Marlin: "Forced
    NVFP4 kernel MarlinNvFp4LinearKernel is not supported: Marlin FP4 not
    available"), though loading the weights does not depend on the kernel.
    compressed-tensors' NVFP4 scheme takes vLLM's own software emulation
    (EmulationNvFp4LinearKernel, dequantize then a BF16 matmul: what ROCm
    runs), so that the model is built, loaded and, for W4A4, run."""
    from vllm.model_executor.kernels.linear.nvfp4.base import NvFp4LinearLayerConfig
    from vllm.model_executor.kernels.linear.nvfp4.emulation import (
        EmulationNvFp4LinearKernel)
    module.init_nvfp4_linear_kernel = \
        lambda use_a16=False: EmulationNvFp4LinearKernel(NvFp4LinearLayerConfig())


def _patch_mxfp4(module):
    """WSHARD_ORACLE_MXFP4: vLLM 0.32 registers no MXFP4 linear kernel for
    its CPU platform (_POSSIBLE_MXFP4_KERNELS has CUDA's, ROCm's and XPU's),
    though loading the weights does not depend on the kernel.
    compressed-tensors' MXFP4 scheme and Quark's OCP MX one take vLLM's own
    software emulation (EmulationMxfp4LinearKernel) with unquantized
    activations, as Marlin runs it on GPUs without native FP4 (W4A16): the
    model is built, loaded and run."""
    from vllm.model_executor.kernels.linear.mxfp4.base import MxFp4LinearLayerConfig
    from vllm.model_executor.kernels.linear.mxfp4.emulation import (
        EmulationMxfp4LinearKernel)
    module.init_mxfp4_linear_kernel = lambda activation_quant_key=None: \
        EmulationMxfp4LinearKernel(MxFp4LinearLayerConfig(activation_quant_key=None))


def _patch_mxfp8(module):
    """WSHARD_ORACLE_MXFP8: vLLM 0.32 registers no MXFP8 linear kernel for
    its CPU platform (kernels/linear/__init__.py, _POSSIBLE_MXFP8_KERNELS
    has CUDA's and ROCm's: "Failed to find a kernel that can implement the
    MXFP8 linear layer"), though loading the weights does not depend on the
    kernel.  Quark's OCP MX scheme takes vLLM's own software emulation
    (EmulationMxfp8LinearKernel, dequantized to BF16 in torch as it loads:
    what ROCm falls back to), so that the model is built, loaded and run."""
    from vllm.model_executor.kernels.linear.mxfp8.emulation import (
        EmulationMxfp8LinearKernel)
    from vllm.model_executor.kernels.linear.mxfp8.Mxfp8LinearKernel import (
        Mxfp8LinearLayerConfig)
    module.init_mxfp8_linear_kernel = lambda *, weight_shape, bmm_batch_size=None: \
        EmulationMxfp8LinearKernel(Mxfp8LinearLayerConfig(weight_shape=weight_shape,
                                                          bmm_batch_size=bmm_batch_size))


def _patch_mxfp6(module):
    """WSHARD_ORACLE_MXFP6: vLLM 0.32 registers no MXFP6 linear kernel for
    its CPU platform (_POSSIBLE_MXFP6_KERNELS has CUDA's and ROCm's), and
    its software emulation (EmulationMxfp6LinearKernel) dequantizes with
    amd-quark, which the engine environment does not install; loading the
    weights depends on neither.  Quark's OCP MX scheme takes the emulation
    kernel, so that the model is built, loaded and its state saved; then
    the worker stops (LOAD_ONLY_STOP)."""
    from vllm.model_executor.kernels.linear.mxfp6.base import MxFp6LinearLayerConfig
    from vllm.model_executor.kernels.linear.mxfp6.emulation import (
        EmulationMxfp6LinearKernel)
    module.init_mxfp6_linear_kernel = lambda weight_quant_key, activation_quant_key=None: \
        EmulationMxfp6LinearKernel(MxFp6LinearLayerConfig(
            weight_quant_key=weight_quant_key, activation_quant_key=activation_quant_key))


def _patch_mxfp4_dequant(module):
    """WSHARD_ORACLE_MXFP4: the emulation kernel dequantizes with amd-quark,
    which the engine environment does not install: the same OCP MXFP4
    decoding in torch (two E2M1 values a byte, the low nibble first, times
    2^(e - 127) for each 32 values' E8M0 exponent e).  Both engines of a
    case (the checkpoint and wshard's output) compute with it."""
    import torch
    e2m1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                         -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])

    def dequant_mxfp4(x, scale, float_dtype):
        lo, hi = (x & 0x0F).long(), (x >> 4).long()
        v = torch.stack((e2m1[lo], e2m1[hi]), dim=-1).reshape(*x.shape[:-1], -1)
        s = torch.exp2(scale.float() - 127.0).repeat_interleave(32, dim=-1)
        return (v * s).to(float_dtype)

    module.dequant_mxfp4 = dequant_mxfp4
    module.has_quark = lambda: True     # its can_implement asks for amd-quark


def _patch_nvfp4_moe(module):
    """WSHARD_ORACLE_NVFP4_MOE: vLLM 0.32's one NVFP4 MoE kernel a CPU
    could take, its emulation (Nvfp4QuantizationEmulationTritonExperts),
    is Triton's, which the CPU build lacks ("No NvFp4 MoE backend supports
    the deployment configuration"), though loading the experts' weights
    does not depend on the kernel.  It is taken as supported, so that the
    model is built, loaded and its state saved; then the worker stops
    (LOAD_ONLY_STOP)."""
    module.Nvfp4QuantizationEmulationTritonExperts.is_supported_config = \
        staticmethod(lambda *a, **kw: (True, None))


def _patch_nogate(module):
    """WSHARD_ORACLE_NOGATE: vLLM 0.32 builds no MoE layer without a gated
    activation (Nemotron-H's relu^2 experts), nor one of MiniMax-M3's
    swigluoai_uninterleave experts, on a CPU: FusedMoEConfig's
    __post_init__ ends with "is_act_and_mul=False is supported only for
    CUDA, XPU and ROCm for now", though loading the experts' weights does
    not depend on the kernel.  That last check's refusal is passed over (and
    the unquantized CPU experts are taken as supporting relu^2:
    _patch_nogate_experts), so that the model is built, loaded and its state
    saved; then the worker stops (LOAD_ONLY_STOP)."""
    cls = module.FusedMoEConfig
    real = cls.__post_init__

    def post_init(self, *a, **kw):
        try:
            real(self, *a, **kw)
        except NotImplementedError as e:
            if "is_act_and_mul=False" not in str(e):
                raise

    cls.__post_init__ = post_init


def _patch_nogate_experts(module):
    """WSHARD_ORACLE_NOGATE: vLLM 0.32's unquantized CPU experts take gated
    activations only (CPUUnquantizedExperts._supports_no_act_and_mul,
    _supports_activation: "No Unquantized MoE backend supports the
    deployment configuration"); taken as supporting relu^2 and MiniMax-M3's
    swigluoai_uninterleave, for loading."""
    cls = module.CPUUnquantizedExperts
    cls._supports_no_act_and_mul = staticmethod(lambda: True)
    cls._supports_activation = staticmethod(lambda activation: True)


def _patch_pangu_vl(module):
    """WSHARD_ORACLE_PANGU_VL: vLLM 0.32's openPangu-VL tower refuses every
    ViT attention backend but FLASH_ATTN (openpangu_vl.py:418-424, "Pangu-VL
    does not support ... backend now"), which the CPU build lacks; building
    and loading the tower does not depend on it.  The tower is told it has
    FLASH_ATTN, so that the model is built, loaded and its state saved;
    then the worker stops (LOAD_ONLY_STOP)."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    module.get_vit_attn_backend = lambda *a, **kw: AttentionBackendEnum.FLASH_ATTN


def _patch_interns1_pro(module):
    """WSHARD_ORACLE_INTERNS1_PRO: vLLM 0.32's
    InternS1ProForConditionalGeneration.__init__ reads self.model_config
    (interns1_pro.py:579, build_mm_input_norm) without setting it (its
    Qwen3-VL parents' __init__, which would, is skipped: :566), so it fails
    on every platform ("object has no attribute 'model_config'").  The
    class is given model_config as a property: the model config it is
    built under (vLLM builds a model inside set_current_vllm_config), kept
    at the first read, as Qwen3VLMoeForConditionalGeneration keeps it;
    nothing else changes."""
    def get(self):
        mc = self.__dict__.get("_wshard_model_config")
        if mc is None:
            from vllm.config import get_current_vllm_config
            mc = get_current_vllm_config().model_config
            self.__dict__["_wshard_model_config"] = mc
        return mc

    def put(self, value):
        self.__dict__["_wshard_model_config"] = value

    module.InternS1ProForConditionalGeneration.model_config = property(get, put)


def _patch_llvmlite(module):
    """vLLM 0.32's CPU worker looks for Triton kernels in the globals of
    every imported module (register_triton_kernel_overrides calls vars() on
    each object that has a __dict__).  llvmlite's ffi.lib answers every
    attribute name with a function wrapper, __dict__ included, so once numba
    is imported (vLLM's Kimi-K2.5 image processor imports it) the worker
    stops: "AttributeError: '_lib_fn_wrapper' object has no attribute
    'get'".  Dunder names are left to Python again; nothing else changes."""
    cls = module._lib_wrapper
    real = cls.__getattr__

    def getattr_(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return real(self, name)

    cls.__getattr__ = getattr_


def _patch_dbrx(module):
    """vLLM 0.32 loads no DBRX checkpoint: DbrxModel.load_weights maps the
    experts (ffn.experts.mlp.w1, v1, w2) to ffn.experts.w13_weight and
    w2_weight, where its MoE refactor (vllm-project/vllm#41184) has put
    them under ffn.experts.routed_experts: "KeyError:
    'blocks.0.ffn.experts.w13_weight'" (vllm-project/vllm#49004, open; the
    fix of #49362 adds the prefix).  Here the names are given the prefix
    before its mapping, which then names the parameters that exist; the
    weights are loaded as its weight_loader loads them."""
    cls = module.DbrxModel
    real = cls.load_weights

    def load_weights(self, weights):
        return real(self, ((n.replace(".ffn.experts.mlp.", ".ffn.experts.routed_experts.mlp."), w)
                           for n, w in weights))

    cls.load_weights = load_weights


def _patch_opencua(module):
    """vLLM 0.32's OpenCUAProcessor builds no processor on transformers 5:
    its __init__ takes (vision_config, tokenizer), and ProcessorMixin reads
    the sub-processors from that signature (get_attributes), so the image
    and video processors it passes on are not kept ("'OpenCUAProcessor'
    object has no attribute 'image_processor'", vllm-project/vllm#47438,
    open).  Here it keeps those of its parent, Qwen2VLProcessor; the
    weights and their loading are untouched."""
    cls = module.OpenCUAProcessor
    parent = cls.__mro__[1]
    cls.get_attributes = classmethod(lambda c: parent.get_attributes())


def _patch_laguna(module):
    """vLLM 0.32 drops Laguna's routing bias: LagunaMoE hands its
    e_score_correction_bias parameter to the experts, where it is held as
    mlp.experts.routed_experts.e_score_correction_bias, but the experts'
    load_weights (MoERunner's, RoutedExperts') loads expert weights only,
    and LagunaModel.load_weights passes over names ending in _bias that
    nothing loads: every MoE layer routes with zeros there, unseen.  Here
    the checkpoint's mlp.experts.e_score_correction_bias is copied into
    that parameter (cast to its F32), the rest loaded as vLLM loads it."""
    cls = module.LagunaModel
    real = cls.load_weights
    old, new = ".mlp.experts.e_score_correction_bias", \
        ".mlp.experts.routed_experts.e_score_correction_bias"

    def load_weights(self, weights):
        params = dict(self.named_parameters())
        done = set()

        def rest():
            for n, w in weights:
                key = n[:-len(old)] + new if n.endswith(old) else None
                if key in params:
                    params[key].data.copy_(w)
                    done.add(key)
                else:
                    yield n, w

        loaded = set(real(self, rest()))
        return loaded | done

    cls.load_weights = load_weights


def _patch_qwen4exp_qsa(module):
    """WSHARD_ORACLE_QWEN4EXP: vLLM 0.32 builds Qwen4Exp's QSA attention only
    where FlashAttention is ("Qwen4Exp QSA requires FlashAttention"), though
    loading its weights does not depend on the kernel.  Said to be there, so
    that the model is built and its state saved; no forward pass runs."""
    module.is_flash_attn_varlen_func_available = lambda: True


def _patch_qwen4exp_ple(module):
    """WSHARD_ORACLE_QWEN4EXP: Qwen4Exp's n-gram (PLE) embedding is kept in
    pinned host memory and read by the GPU through a UVA view; without a GPU
    it is kept in plain host memory and read there (the same values)."""
    import torch
    module.get_accelerator_view_from_cpu_tensor = lambda t: t.data
    if not hasattr(module.triton, "next_power_of_2"):
        # vLLM's stand-in for Triton on the CPU lacks the helper
        module.triton.next_power_of_2 = lambda n: 1 << max(int(n) - 1, 0).bit_length()
    for cls in vars(module).values():
        if isinstance(cls, type) and "allocate_embedding_weight" in vars(cls):
            cls.allocate_embedding_weight = (
                lambda self, n, d, dtype: torch.empty(n, d, dtype=dtype, device="cpu"))


def _patch_qwen4exp_pad(module):
    """WSHARD_ORACLE_QWEN4EXP: Qwen4Exp's hyper-connection pads
    input_mix_weight_down_block_inject to a multiple of 16 rows with a
    third output part that nothing loads and its forward pass drops: those
    rows are torch.empty's, whatever the allocator hands back, and so the
    saved state differed from run to run (wshard writes zeros there).  They
    are zeroed when the layer is built."""
    cls = module.GatedResidual
    real = cls.__init__

    def init(self, *a, **kw):
        real(self, *a, **kw)
        w = getattr(getattr(self, "input_mix_weight_down_block_inject", None), "weight", None)
        if w is not None and getattr(self, "pad_size", 0):
            w.data[w.shape[0] - self.pad_size:].zero_()

    cls.__init__ = init


def _patch_olmo_gdn(module):
    """WSHARD_ORACLE_OLMO_GDN: vLLM 0.32's OLMo Hybrid Gated DeltaNet hands
    Triton an allocator when it is built, which the CPU build's stand-in for
    Triton lacks ("no attribute 'set_allocator'"), and its recurrence has
    no CPU kernel (Qwen's has): the allocator is skipped, so that the model
    is built and its state saved; no forward pass runs.  Its fused conv1d's
    loader reads the part (q, k or v) only from an argument vLLM's
    AutoWeightsLoader never passes (it hands the part over as the tensor's
    shard_id): "list indices must be integers or slices, not NoneType" on
    every checkpoint.  The loader takes it from the tensor where the
    argument is missing; what it does with it is vLLM's own."""
    module.set_triton_allocator = lambda device: None
    real = module._make_fused_conv1d_weight_loader

    def make_loader(dims, tp_size, tp_rank):
        inner = real(dims, tp_size, tp_rank)

        def weight_loader(param, loaded_weight, loaded_shard_id=None):
            if loaded_shard_id is None:
                loaded_shard_id = getattr(loaded_weight, "shard_id", None)
            return inner(param, loaded_weight, loaded_shard_id)
        return weight_loader

    module._make_fused_conv1d_weight_loader = make_loader


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


def _patch_longcat_ngram(module):
    """WSHARD_ORACLE_LONGCAT_NGRAM: vLLM 0.32's LongcatFlashNgramForCausalLM
    refuses to be built without the V2 model runner (longcat_flash_ngram.py
    :212), which needs Triton (config/vllm.py:3190), which the CPU build
    lacks.  Here the class is built as under the V2 runner (the config's
    use_v2_model_runner reads true while its __init__ runs) and loaded by
    the V1 runner; its n-gram embedding state (LongcatNgramModelState, a
    CUDA kernel) is never used, and the first forward pass fails as
    LongCat-Flash's does, after the state is saved (load and save only)."""
    cls = module.LongcatFlashNgramForCausalLM
    real = cls.__init__

    def __init__(self, *, vllm_config, prefix=""):
        vc = type(vllm_config)
        prop = vc.__dict__["use_v2_model_runner"]
        vc.use_v2_model_runner = property(lambda _: True)
        try:
            real(self, vllm_config=vllm_config, prefix=prefix)
        finally:
            vc.use_v2_model_runner = prop

    cls.__init__ = __init__


def _patch_unlimited_ocr(module):
    """WSHARD_ORACLE_UNLIMITED_OCR: vLLM 0.32 serves Unlimited-OCR's text
    model with R-SWA (its generated tokens attend only the last rswa_window
    ones besides the prompt), for which UnlimitedOCRForCausalLMConfig
    (model_executor/models/config.py:88) picks FlashAttention 4, Triton or
    FlexAttention and FlashAttention for the vision encoder, none of which
    the CPU build has ("FLASH_ATTN is not supported for vit attention").
    Here it only turns prefix caching off, as it does, and the model's
    rswa_window reads None (config/model.py:1640), so that the CPU
    attention backends build it with plain causal attention: the same
    weights, other answers than R-SWA's past the window, on both sides."""
    cls = module.UnlimitedOCRForCausalLMConfig

    def verify_and_update_config(vllm_config):
        vllm_config.cache_config.enable_prefix_caching = False

    cls.verify_and_update_config = staticmethod(verify_and_update_config)


def _patch_no_rswa(module):
    """(WSHARD_ORACLE_UNLIMITED_OCR) ModelConfig.rswa_window reads None."""
    module.ModelConfig.rswa_window = property(lambda self: None)


def _patch_rnj1(module):
    """vLLM 0.32's Rnj1Attention hands Attention chunk_lookback on every
    layer (-1 where the layer is not chunked), and Attention passes it on to
    its backend's impl, which only the Triton backend takes: the CPU build's
    CPUAttentionBackendImpl refuses the keyword ("unexpected keyword argument
    'chunk_lookback'") and no Rnj-1 is built.  Here the CPU impl takes -1
    (no chunking: what it does anyway) and drops it; a chunked layer
    (lookback 0 or more) is still refused, as Attention asserts TRITON_ATTN
    for it before."""
    cls = module.CPUAttentionBackendImpl
    real = cls.__init__

    def __init__(self, *args, chunk_lookback=-1, **kw):
        if chunk_lookback != -1:
            raise NotImplementedError("CPU_ATTN has no chunked attention")
        real(self, *args, **kw)

    cls.__init__ = __init__


def _patch_alibi_sqrt(module):
    """WSHARD_ORACLE_ALIBI_SQRT: vLLM 0.32's Step-1 (step1.py) builds its
    Attention with use_alibi_sqrt=True, which only the Triton backends
    support: on the CPU build Attention refuses it ("use_alibi_sqrt is not
    supported by backend CPU_ATTN") and no Step-1 is built.  Here the CPU
    backend claims it and its impl drops the keyword: the model is built
    and loaded as vLLM builds it, and its forward pass runs with plain
    (linear) ALiBi, the same slopes, standing in for the square-root
    distance.  Both sides of the answer oracle run that same stand-in."""
    module.CPUAttentionBackend.supports_alibi_sqrt = classmethod(lambda cls: True)
    cls = module.CPUAttentionBackendImpl
    real = cls.__init__

    def __init__(self, *args, use_alibi_sqrt=False, **kw):
        real(self, *args, **kw)

    cls.__init__ = __init__


def _install_dots3_note():
    """WSHARD_ORACLE_DOTS3: vLLM 0.32 ships dots3 NOTE (vllm/models/
    dots3_note) for NVIDIA GPUs only: its nvidia/attention.py imports
    FlashAttention (vllm.vllm_flash_attn, whose __init__ raises without the
    CUDA extensions) and FlashAttention's MLA prefill (fa_utils names the
    CUDA build has), its towers import vllm.vllm_flash_attn too and its
    vision tower vllm.third_party.deep_gemm, which the CPU build lacks.  Here
    vllm.vllm_flash_attn is its interface module without the check, and
    nvidia/attention.py a stand-in whose three backends are the CPU build's
    MLA backend (CPU_MLA, its sliding-window one told no window, which CPU
    MLA refuses; no FlashAttention prefill), deep_gemm an empty
    stand-in, so that the model
    and its MTP draft are built, loaded and their state saved (load and save
    only: the sparse layers are built as with WSHARD_ORACLE_SPARSE)."""
    import types
    if "vllm.models.dots3_note.nvidia.attention" in sys.modules:
        return
    spec = importlib.util.find_spec("vllm")
    fa_dir = os.path.join(os.path.dirname(spec.origin), "vllm_flash_attn")
    if "vllm.vllm_flash_attn" not in sys.modules:
        fa = types.ModuleType("vllm.vllm_flash_attn")
        fa.__path__ = [fa_dir]
        sys.modules["vllm.vllm_flash_attn"] = fa
        import vllm.vllm_flash_attn.flash_attn_interface as fai
        for n in ("flash_attn_varlen_func", "is_fa_version_supported",
                  "get_scheduler_metadata", "fa_version_unsupported_reason"):
            setattr(fa, n, getattr(fai, n, None))
    if importlib.util.find_spec("vllm.third_party.deep_gemm") is None:
        # nvidia/vision.py's FP8 cast for its experts (not called here)
        dg = types.ModuleType("vllm.third_party.deep_gemm")
        dg.per_block_cast_to_fp8 = None
        sys.modules[dg.__name__] = dg
    from vllm.v1.attention.backends.mla.cpu_mla import CPUMLABackend, CPUMLAImpl

    class SlidingImpl(CPUMLAImpl):
        # CPU MLA refuses a sliding window; the window is no part of the state
        def __init__(self, num_heads, head_size, scale, num_kv_heads, alibi_slopes,
                     sliding_window, *a, **kw):
            super().__init__(num_heads, head_size, scale, num_kv_heads, alibi_slopes,
                             None, *a, **kw)

    class SlidingBackend(CPUMLABackend):
        @staticmethod
        def get_impl_cls():
            return SlidingImpl

    att = types.ModuleType("vllm.models.dots3_note.nvidia.attention")
    att.Dots3NotePaddedSparseBackend = CPUMLABackend
    att.Dots3NoteTritonMLABackend = SlidingBackend
    att.Dots3NoteFlashAttnPrefillBackend = None
    sys.modules[att.__name__] = att


class _Dots3Finder(importlib.abc.MetaPathFinder):
    """Installs _install_dots3_note's stand-ins before vllm.models.dots3_note
    is imported."""
    target = "vllm.models.dots3_note"

    def find_spec(self, name, path, target=None):
        if name == self.target:
            sys.meta_path.remove(self)
            _install_dots3_note()
        return None


def _patch_inspect_in_process(module):
    """vLLM inspects a model class the first time in a new Python process
    (registry.py _run_in_subprocess, so that CUDA stays uninitialised in
    the engine's) and keeps what it learns under VLLM_CACHE_ROOT/modelinfos:
    on a machine whose cache is empty (a new one, CI's), ten seconds of
    imports for each architecture on two cores, most of the suite's time.
    The CPU build initialises no CUDA: the class is inspected in the
    engine's own process, which imports it to build the model anyway."""
    module._run_in_subprocess = lambda fn: fn()


def _hook(target, patch):
    """Patches the module target with patch once: when it is imported, or
    now where it already is (the engine server, oracle.py serve, imported
    vLLM before a request's environment named its patches, and runs this
    file again in each request's process)."""
    key = "_wshard_" + patch.__name__
    mod = sys.modules.get(target)
    if mod is not None:
        if not getattr(mod, key, False):
            patch(mod)
            setattr(mod, key, True)
        return
    if any(getattr(f, "target", None) == target and
           getattr(getattr(f, "patch", None), "__name__", None) == patch.__name__
           for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder(target, patch))


_hook("llvmlite.binding.ffi", _patch_llvmlite)
_hook("vllm.model_executor.models.registry", _patch_inspect_in_process)
_hook("vllm.model_executor.models.dbrx", _patch_dbrx)
_hook("vllm.model_executor.models.laguna", _patch_laguna)
_hook("vllm.model_executor.models.opencua", _patch_opencua)
_CPU_MOE = "vllm.model_executor.layers.fused_moe.experts.cpu_moe"
_CPU_ATTN = "vllm.v1.attention.backends.cpu_attn"
_QUARK_MX = "vllm.model_executor.layers.quantization.quark.schemes.quark_ocp_mx"
_CT_SCHEMES = "vllm.model_executor.layers.quantization.compressed_tensors.schemes."
# Each variable and the patches it turns on, (module, patch) each,
# hooked in this order where the variable is set.
_ON_ENV = (
    ("WSHARD_ORACLE_DUMP", (_TARGET, _patch), (_TARGET, _record_loaded)),
    ("WSHARD_BENCH_TIMES", (_TARGET, _patch_times)),
    ("WSHARD_ORACLE_INT4", (_CPU_MOE, _patch_int4)),
    ("WSHARD_ORACLE_INT8_MOE", (_CPU_MOE, _patch_int8_moe)),
    ("WSHARD_ORACLE_FP8_BLOCK",
     ("vllm.model_executor.kernels.linear.scaled_mm.cpu", _patch_fp8_block)),
    ("WSHARD_ORACLE_FBGEMM",
     ("vllm.model_executor.layers.quantization.fbgemm_fp8", _patch_fbgemm)),
    ("WSHARD_ORACLE_MXFP4_CPU", (_CPU_MOE, _patch_mxfp4_cpu)),
    ("WSHARD_ORACLE_NVFP4",
     (_CT_SCHEMES + "compressed_tensors_w4a4_nvfp4", _patch_nvfp4),
     ("vllm.model_executor.layers.quantization.modelopt", _patch_nvfp4)),
    ("WSHARD_ORACLE_MXFP4",
     (_CT_SCHEMES + "compressed_tensors_w4a4_mxfp4", _patch_mxfp4),
     (_QUARK_MX, _patch_mxfp4),
     ("vllm.model_executor.kernels.linear.mxfp4.emulation", _patch_mxfp4_dequant)),
    ("WSHARD_ORACLE_MXFP6", (_QUARK_MX, _patch_mxfp6)),
    ("WSHARD_ORACLE_MXFP8", (_QUARK_MX, _patch_mxfp8)),
    ("WSHARD_ORACLE_NVFP4_MOE",
     ("vllm.model_executor.layers.fused_moe.experts.nvfp4_emulation_moe", _patch_nvfp4_moe)),
    ("WSHARD_ORACLE_NOGATE",
     ("vllm.model_executor.layers.fused_moe.config", _patch_nogate),
     (_CPU_MOE, _patch_nogate_experts)),
    ("WSHARD_ORACLE_INTERNS1_PRO",
     ("vllm.model_executor.models.interns1_pro", _patch_interns1_pro)),
    ("WSHARD_ORACLE_PANGU_VL", ("vllm.model_executor.models.openpangu_vl", _patch_pangu_vl)),
    ("WSHARD_ORACLE_SPARSE", (_CPU, _patch_sparse)),
    ("WSHARD_ORACLE_OLMO_GDN",
     ("vllm.model_executor.layers.mamba.gdn.olmo_gdn_linear_attn", _patch_olmo_gdn)),
    ("WSHARD_ORACLE_QWEN4EXP",
     ("vllm.models.qwen4_exp.nvidia.qsa", _patch_qwen4exp_qsa),
     ("vllm.models.qwen4_exp.common.ngram_embedding", _patch_qwen4exp_ple),
     ("vllm.models.qwen4_exp.nvidia.hyperconnection", _patch_qwen4exp_pad)),
    ("WSHARD_ORACLE_STEP3P5_MTP", ("vllm.transformers_utils.configs.step3p5", _patch_step3p5_mtp)),
    ("WSHARD_ORACLE_ML3_EAGLE",
     ("vllm.model_executor.models.mistral_large_3_eagle", _patch_ml3_eagle)),
    ("WSHARD_ORACLE_DSV4_MTP", ("vllm.models.deepseek_v4.cpu.mtp", _patch_dsv4_mtp)),
    ("WSHARD_ORACLE_DSV4_DSPARK", ("vllm.models.deepseek_v4.cpu.dspark", _patch_dsv4_dspark)),
    ("WSHARD_ORACLE_DSV4_VL",
     ("vllm.models.deepseek_v4.vl_stub", _patch_dsv4_vl),
     ("vllm.models.deepseek_v4.cpu.model", _patch_dsv4_vl_moe)),
    ("WSHARD_ORACLE_DSV41",
     ("vllm.models.deepseek_v41.nvidia.vl_model", _patch_dsv41),
     ("vllm.models.deepseek_v41.nvidia.dspark", _patch_dsv41_dspark)),
    ("WSHARD_ORACLE_DFLASH2", ("vllm.config.vllm", _patch_dflash2)),
    ("WSHARD_ORACLE_DSPARK", ("vllm.config.speculative", _patch_dspark)),
    ("WSHARD_ORACLE_LONGCAT_NGRAM",
     ("vllm.model_executor.models.longcat_flash_ngram", _patch_longcat_ngram)),
    ("WSHARD_ORACLE_UNLIMITED_OCR",
     ("vllm.model_executor.models.config", _patch_unlimited_ocr),
     ("vllm.config.model", _patch_no_rswa)),
    ("WSHARD_ORACLE_RNJ1", (_CPU_ATTN, _patch_rnj1)),
    ("WSHARD_ORACLE_ALIBI_SQRT", (_CPU_ATTN, _patch_alibi_sqrt)),
    ("WSHARD_ORACLE_DOTS3", (_CPU, _patch_sparse)),
)
for _var, *_patches in _ON_ENV:
    if os.environ.get(_var):
        for _module, _fn in _patches:
            _hook(_module, _fn)
if os.environ.get("WSHARD_ORACLE_DOTS3") and "vllm.models.dots3_note" not in sys.modules:
    sys.meta_path.insert(0, _Dots3Finder())
