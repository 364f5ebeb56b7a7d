"""vLLM's --load-format wshard.

Each worker opens wshard.json through libwshard, which refuses an output
made for another engine release or layout, then hands libwshard the memory
of every parameter: libwshard reads the rank's files into it with several
threads and checks each tensor against its checksum, so a damaged file
stops the load with one line naming the file and tensor.  GPU parameters
libwshard copies itself, through a few pinned buffers a thread, while its
threads read on (a libwshard built with CUDA, a device present).
Parameters the file cannot be read into directly (another dtype, a
strided view, GPU memory without libwshard's CUDA) are read into host
buffers first and copied as vLLM's sharded_state loader copies them.

libwshard.so is found through WSHARD_LIB, else the dynamic loader's path
(make install puts it in PREFIX/lib).
"""
import ctypes
import json
import math
import os

MAX_DIMS = 8
ERRMAX = 2048  # WSHARD_ERRMAX in lib/wshard.h


class Error(ctypes.Structure):
    """struct wshard_error."""
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * ERRMAX)]


class Want(ctypes.Structure):
    """struct wshard_load_want."""
    _fields_ = [("engine", ctypes.c_char_p), ("tp", ctypes.c_int),
                ("pp", ctypes.c_int), ("expert_parallel", ctypes.c_bool),
                ("expert_placement", ctypes.c_char_p), ("rank", ctypes.c_int),
                ("no_checksums", ctypes.c_bool), ("stage", ctypes.c_int)]


def bind(path):
    """libwshard at path (a name for the dynamic loader, or a file), its
    loader functions typed."""
    lib = ctypes.CDLL(path)
    lib.wshard_load_open.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.c_char_p, ctypes.POINTER(Want),
                                     ctypes.POINTER(Error)]
    lib.wshard_load_count.restype = ctypes.c_size_t
    lib.wshard_load_count.argtypes = [ctypes.c_void_p]
    lib.wshard_load_info.restype = ctypes.c_uint64
    lib.wshard_load_info.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_uint64 * MAX_DIMS)]
    lib.wshard_load_dest.restype = None
    lib.wshard_load_dest.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                     ctypes.c_void_p]
    lib.wshard_load_bytes.restype = ctypes.c_uint64
    lib.wshard_load_bytes.argtypes = [ctypes.c_void_p]
    lib.wshard_load_prefetch.argtypes = [ctypes.c_void_p, ctypes.POINTER(Error)]
    lib.wshard_load_run.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                    ctypes.POINTER(Error)]
    lib.wshard_load_free.restype = None
    lib.wshard_load_free.argtypes = [ctypes.c_void_p]
    try:  # (a libwshard older than the device destinations has neither)
        lib.wshard_load_dest_device.restype = None
        lib.wshard_load_dest_device.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                                ctypes.c_int, ctypes.c_void_p]
        lib.wshard_load_has_device.restype = ctypes.c_int
        lib.wshard_load_has_device.argtypes = []
    except AttributeError:
        pass
    return lib


def _has_device(lib):
    """Whether lib copies into GPU memory itself: built with CUDA, and its
    CUDA runtime sees a device (asked once)."""
    if not hasattr(lib, "_wshard_device"):
        try:
            lib._wshard_device = bool(lib.wshard_load_has_device())
        except AttributeError:
            lib._wshard_device = False
    return lib._wshard_device


_lib = None


def _libwshard():
    global _lib
    if _lib is None:
        _lib = bind(os.environ.get("WSHARD_LIB") or "libwshard.so")
    return _lib


class WshardLoadError(ValueError):
    """A rank that libwshard refused: the message names the file and why."""


def _torch_dtypes():
    import torch
    names = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16",
             "U16": "uint16", "F16": "float16", "BF16": "bfloat16",
             "I32": "int32", "U32": "uint32", "F32": "float32", "I64": "int64",
             "U64": "uint64", "F64": "float64", "F8_E5M2": "float8_e5m2",
             "F8_E4M3": "float8_e4m3fn", "F8_E8M0": "float8_e8m0fnu",
             "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz"}
    return {k: getattr(torch, v) for k, v in names.items() if hasattr(torch, v)}


class Rank:
    """One worker's rank of a wshard output, opened (the layout checked)
    before it is read, so that its files can be read into the page cache
    while the engine builds the model (prefetch)."""

    def __init__(self, out_dir, want):
        self.lib, self.out_dir, self.want = _libwshard(), out_dir, want
        err = Error()
        # kept: libwshard holds the strings' pointers
        self._w = Want(want.get("engine", "").encode() or None, want["tp"],
                       want.get("pp", 1), bool(want.get("expert_parallel")),
                       (want.get("expert_placement") or "").encode() or None,
                       want["rank"], not want.get("checksums", True),
                       want.get("stage", 0))
        self.handle = ctypes.c_void_p()
        self._thread = None
        self._listing = None
        if self.lib.wshard_load_open(ctypes.byref(self.handle), os.fsencode(out_dir),
                                     ctypes.byref(self._w), ctypes.byref(err)) != 0:
            raise WshardLoadError(err.msg.decode(errors="replace"))

    def size(self):
        """The bytes of the rank's files (wshard.json's sizes)."""
        return self.lib.wshard_load_bytes(self.handle)

    def prefetch(self):
        """Starts reading the rank's files into the page cache on a thread
        (libwshard queues the reads: ctypes lets go of the GIL), where they
        fit in 90% of the memory available, as vLLM's own prefetch."""
        avail = 0
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        avail = int(line.split()[1]) * 1024
        except OSError:
            return False
        if self.size() > 0.9 * avail:
            return False
        import threading

        def run():
            self.lib.wshard_load_prefetch(self.handle, ctypes.byref(Error()))
        self._thread = threading.Thread(target=run, name="wshard-prefetch", daemon=True)
        self._thread.start()
        return True

    def tensors(self):
        """(index, name, dtype, dims, bytes) of each of the rank's tensors,
        in file order, listed once."""
        if self._listing is None:
            self._listing = list(_tensors(self.lib, self.handle))
        return self._listing

    def names(self):
        """The names of the rank's tensors, in file order."""
        return [name for _, name, _, _, _ in self.tensors()]

    def shapes(self):
        """{name: dims} of the rank's tensors."""
        return {name: dims for _, name, _, dims, _ in self.tensors()}

    def read(self, state, threads=0):
        """Reads the rank into state ({name: tensor}, vLLM's filtered
        state_dict); raises WshardLoadError naming what is wrong.  Returns
        the number of bytes read."""
        return _read(self.lib, self.handle, self.out_dir, state, self.want, threads,
                     self.tensors())

    def close(self):
        if self._thread:
            self._thread.join()
            self._thread = None
        if self.handle:
            self.lib.wshard_load_free(self.handle)
            self.handle = ctypes.c_void_p()


def load_rank(out_dir, state, want, threads=0):
    """Reads wshard rank want["rank"] of out_dir into state ({name: tensor},
    vLLM's filtered state_dict); raises WshardLoadError naming what is wrong.
    Returns the number of bytes read."""
    rank = Rank(out_dir, want)
    try:
        return rank.read(state, threads)
    finally:
        rank.close()


def _tensors(lib, handle):
    """(index, name, dtype, dims, bytes) of each of the rank's tensors, in
    file order (wshard_load_info)."""
    name_p, dtype_p = ctypes.c_char_p(), ctypes.c_char_p()
    ndim, shape = ctypes.c_int(), (ctypes.c_uint64 * MAX_DIMS)()
    for i in range(lib.wshard_load_count(handle)):
        size = lib.wshard_load_info(handle, i, ctypes.byref(name_p),
                                    ctypes.byref(dtype_p), ctypes.byref(ndim),
                                    ctypes.byref(shape))
        yield (i, name_p.value.decode(), dtype_p.value.decode(),
               list(shape[:ndim.value]), size)


def _read(lib, handle, out_dir, state, want, threads, listing):
    import torch
    dtypes = _torch_dtypes()
    staged = []  # (index, param view, dtype, dims, offset in the pool)
    pool_size = 0
    missing = dict(state)
    total = 0
    device = None  # the GPU libwshard copies into (one a load)
    for i, name, dt, dims, size in listing:
        total += size
        if name not in missing:
            raise WshardLoadError(
                f"{out_dir}: tensor '{name}' of rank {want['rank']} is no "
                "parameter of the model vLLM built" if name not in state
                else f"{out_dir}: tensor '{name}' twice")
        data = missing.pop(name).data
        # as sharded_state: a parameter larger than the file's tensor (a
        # padded one) takes it in its first rows and columns
        for d, n in enumerate(dims):
            if d < data.dim() and n < data.shape[d]:
                data = data.narrow(d, 0, n)
        if list(data.shape) != dims:
            raise WshardLoadError(
                f"{out_dir}: tensor '{name}' is {dt} {dims}, the model's "
                f"parameter {data.dtype} {list(data.shape)}")
        direct = data.is_contiguous() and dtypes.get(dt) == data.dtype
        if direct and data.device.type == "cpu":
            lib.wshard_load_dest(handle, i, data.data_ptr() or None)
            continue
        if direct and data.device.type == "cuda" and _has_device(lib):
            index = data.device.index
            if index is None:
                index = torch.cuda.current_device()
            if device is None:
                device = index
            if index == device:
                lib.wshard_load_dest_device(handle, i, index, data.data_ptr() or None)
                continue
        if dt not in dtypes:
            raise WshardLoadError(f"{out_dir}: tensor '{name}': {dt} has no "
                                  f"torch dtype to copy into {data.dtype}")
        staged.append((i, data, dtypes[dt], dims, pool_size))
        pool_size += (size + 63) // 64 * 64
    if missing:
        raise WshardLoadError(f"{out_dir}: rank {want['rank']} lacks "
                              f"{len(missing)} of the model's tensors, "
                              f"'{sorted(missing)[0]}' first")
    # The tensors not read in place (another dtype, a strided view, GPU
    # memory libwshard does not copy into) go through one host buffer,
    # pinned for a GPU.  libwshard's own copies are complete when
    # wshard_load_run returns.
    gpu = any(d.device.type == "cuda" for _, d, _, _, _ in staged)
    pool = torch.empty(pool_size, dtype=torch.uint8, pin_memory=gpu)
    views = []
    for i, data, dtype, dims, off in staged:
        n = dtype.itemsize
        for d in dims:
            n *= d
        buf = pool[off:off + n].view(dtype).view(dims)
        lib.wshard_load_dest(handle, i, buf.data_ptr() if n else None)
        views.append((data, buf))
    err = Error()
    if lib.wshard_load_run(handle, threads, ctypes.byref(err)) != 0:
        raise WshardLoadError(err.msg.decode(errors="replace"))
    for data, buf in views:
        data.copy_(buf, non_blocking=True)
    if gpu:
        torch.cuda.synchronize()
    return total


def build_late(model, shapes):
    """What vLLM 0.32's load_weights builds only as it meets the
    checkpoint's tensors, so that the model built for loading lacks it and
    no state file can be read into it (sharded_state fails on it): built
    first, as load_weights would build it, where the rank holds it (shapes:
    {name: dims} of the rank's tensors).  Returns the names of what it
    built.

    - lm_head.bias of vLLM's Transformers backend
      (TransformersForCausalLM.load_weights registers it only as it meets
      the checkpoint's), on the device of the head's weight;
    - the projection of vLLM's ColBERT models (colbert.py, ColBERTMixin)
      where config.json gives no colbert_dim (dim, projection_dim), as
      HF_ColBERT's releases: colbert_linear, its width from the tensor's
      rows, in the head dtype on the backbone's device, the pooler's
      projector made the same module;
    - ColQwen3Model's custom_text_proj (colqwen3.py) where config.json gives
      no width (embed_dim, dims, dim, projection_dim, colbert_dim): an
      nn.Linear in the text model's dtype on its device, with a bias where
      the rank holds one;
    - score.bias of a decoder vLLM makes a classifier (adapters.py
      as_seq_cls_model: its load_weights, auto_set_score_bias, makes the
      checkpoint's a parameter in score's dtype and adds it from then on),
      as transformers' token classifiers ship it."""
    import torch
    built = []
    score = getattr(model, "score", None)
    if (score is not None and getattr(score, "bias", False) is None and
            getattr(score, "weight", None) is not None and "score.bias" in shapes):
        score.bias = torch.nn.Parameter(torch.empty(
            shapes["score.bias"], dtype=score.weight.dtype, device=score.weight.device))
        score.skip_bias_add = False
        built.append("score.bias")
    head = getattr(model, "lm_head", None)
    if (head is not None and getattr(head, "bias", False) is None and
            hasattr(head, "_register_bias") and "lm_head.bias" in shapes):
        with torch.device(head.weight.device):
            head._register_bias()
        built.append("lm_head.bias")
    dims = shapes.get("colbert_linear.weight")
    if (getattr(model, "colbert_linear", False) is None and
            hasattr(model, "_build_colbert_linear") and dims and len(dims) == 2):
        model.colbert_dim = dims[0]
        model.colbert_linear = model._build_colbert_linear()
        if hasattr(model, "pooler") and hasattr(model.pooler, "head"):
            model.pooler.head.projector = model.colbert_linear
        if hasattr(model, "model"):
            model.colbert_linear.to(next(model.model.parameters()).device)
        built.append("colbert_linear")
    dims = shapes.get("custom_text_proj.weight")
    if (type(model).__name__ == "ColQwen3Model" and
            getattr(model, "custom_text_proj", None) is None and dims and len(dims) == 2):
        import torch.nn as nn
        first = next(model.language_model.parameters())
        model.embed_dim = dims[0]
        model.custom_text_proj = nn.Linear(
            dims[1], dims[0], bias="custom_text_proj.bias" in shapes,
            dtype=first.dtype).to(first.device)
        built.append("custom_text_proj")
    return built


def eagle_draft(model, model_config, shapes, state):
    """A draft whose load_weights sets has_own_lm_head where the checkpoint
    has a head: set so where the rank holds one.  An EAGLE draft
    (speculative_config method eagle or eagle3: a draft
    model with has_own_lm_head and has_own_embed_tokens, which its
    load_weights sets from the checkpoint's names, process_eagle_weight):
    the flags set from the names the rank holds (shapes), so that the
    proposer (v1/spec_decode/llm_base_proposer.py) gives the draft the
    target's lm_head and embedding only where it has none of its own; and
    where the rank holds no embedding (EAGLE-3's releases ship none), the
    one vLLM built is left out of state, never filled: the proposer
    replaces it with the target's once loaded.  Returns the names left
    out."""
    if getattr(model_config, "runner", None) != "draft":
        return []
    if "lm_head.weight" in shapes and hasattr(model, "has_own_lm_head"):
        # as a draft's load_weights sets it where the checkpoint has a
        # head (NemotronHMTP's, process_eagle_weight): otherwise the
        # proposer replaces the head with the target's
        model.has_own_lm_head = True
    if not hasattr(model, "has_own_embed_tokens"):
        return []
    from vllm.model_executor.models.utils import process_eagle_weight
    for name in shapes:
        process_eagle_weight(model, name)
    left = []
    if not model.has_own_embed_tokens and "model.embed_tokens.weight" in state:
        del state["model.embed_tokens.weight"]
        left.append("model.embed_tokens.weight")
    # a head likewise (DFlash's releases ship none; the proposer gives the
    # draft the target's), and DFlash's mask_embedding where the rank holds
    # none: zeros as built, filled only from a mask_embedding.pt
    if not getattr(model, "has_own_lm_head", True) and "lm_head.weight" in state and \
            "lm_head.weight" not in shapes:
        del state["lm_head.weight"]
        left.append("lm_head.weight")
    if "model.mask_embedding" in state and "model.mask_embedding" not in shapes:
        del state["model.mask_embedding"]
        left.append("model.mask_embedding")
    return left


def parallel_draft_mask(model, shapes, state):
    """A P-EAGLE draft's mask_hidden (llama_eagle3.py, qwen3_eagle3.py):
    load_weights copies the checkpoint's into a buffer that no state holds
    (persistent=False), which the proposer reads for its masked slots; read
    into that buffer where vLLM drafts in parallel, and into a scratch
    tensor, unused, where it does not (load_weights skips it then, with a
    warning)."""
    import torch
    dims = shapes.get("mask_hidden")
    if dims is None or "mask_hidden" in state:
        return
    buf = getattr(model, "mask_hidden", None)
    if getattr(model, "use_parallel_drafting", False) and buf is not None:
        if buf.numel() != math.prod(dims):
            raise WshardLoadError(f"mask_hidden is {dims}, the draft's buffer "
                                  f"{list(buf.shape)}")
        state["mask_hidden"] = buf.view(dims)
    else:
        state["mask_hidden"] = torch.empty(dims, dtype=buf.dtype if buf is not None
                                           else torch.bfloat16)


def unfilled_draft_head(model, model_config, shapes, state):
    """LongCat-Flash's MTP draft (LongCatFlashMTP): its load_weights fills
    nothing outside the checkpoint's model.mtp.*, so the lm_head it builds
    is never filled and wshard's output of it holds none; the proposer
    replaces it with the target's once loaded (v1/spec_decode/
    llm_base_proposer.py, _maybe_share_lm_head, for any MTP draft).  It is
    left out of state where the rank holds none.  Returns the names left
    out."""
    if (getattr(model_config, "runner", None) != "draft" or
            type(model).__name__ != "LongCatFlashMTP" or "lm_head.weight" in shapes or
            "lm_head.weight" not in state):
        return []
    del state["lm_head.weight"]
    return ["lm_head.weight"]


def unfilled_pooling_head(model, shapes, state):
    """A pooling model built on a causal one that keeps its LM head
    (JambaForSequenceClassification: JambaForCausalLM plus score): its
    checkpoint has no lm_head, so vLLM's own load leaves the one it builds
    unfilled (pooling never uses it), and wshard's output holds none.  The
    same for the Llama Nemotron VL reranker's inner score head
    (LlamaNemotronVLForSequenceClassification, nemotron_vl.py: its text
    model, a LlamaBidirectionalForSequenceClassification, builds
    language_model.score, which the checkpoint lacks and the outer score
    replaces; its load_weights fills it with random values).  Each is left
    out of state where the rank holds none.  Returns the names left out."""
    if not getattr(model, "is_pooling_model", False):
        return []
    names = ["lm_head.weight"]
    if type(model).__name__ == "LlamaNemotronVLForSequenceClassification":
        names += ["language_model.score.weight", "language_model.score.bias"]
    out = [k for k in names if k in state and k not in shapes]
    for k in out:
        del state[k]
    return out


def refuse_draft(vllm_config, model_config, out):
    """A speculative decoding draft (MTP, EAGLE, a draft model) is loaded
    with the target's load format unless speculative_config's
    draft_load_config says otherwise.  Its ranks are a wshard output of
    their own, converted with --architecture as the draft (an MTP draft
    rides in the target's checkpoint: the target's output leaves its
    layers out), named by speculative_config's "model".  A draft's load
    from any other output is refused in one line that says how to make
    the draft's, rather than fail on the first tensor the draft lacks."""
    spec = getattr(vllm_config, "speculative_config", None)
    draft = getattr(spec, "draft_model_config", None)
    if draft is None or model_config is not draft:
        return
    arch = (getattr(draft, "architectures", None) or ["the draft"])[0]
    try:
        with open(os.path.join(out, "wshard.json")) as f:
            made = json.load(f).get("architecture")
    except (OSError, ValueError):
        return  # not a wshard output: the load says what is wrong
    if made == arch:
        return
    raise WshardLoadError(
        f"{out}: a wshard output of {made}, not of the speculative draft "
        f"{arch}: convert the draft too (wshard convert --architecture {arch} "
        "--tp N SRC DRAFT) and name it in speculative_config (\"model\": DRAFT), "
        "or load the draft from the source checkpoint (\"model\": SRC, "
        "\"draft_load_config\": {\"load_format\": \"auto\"})")


def refuse_sequence_parallel(model, out):
    """vLLM 0.32 runs DeepSeek-V4 and V4.1 sequence parallel under
    --enable-expert-parallel at tp > 1 with a data-parallel group or a
    MegaMoE backend (deepseek_v41/nvidia/model.py:246-256,
    deepseek_v4/nvidia/model.py:1047-1058), and then keeps whole what its
    tensor-parallel layout cuts: the shared experts (DeepseekV4MLP,
    disable_tp) and V4.1's Engram wkv (common/engram.py:1554-1564).  wshard
    writes the tensor-parallel cut, which the narrowing below would load
    into the whole parameters' first rows or columns without a word: the
    load is refused in one line instead."""
    for name, module in model.named_modules():
        if getattr(module, "use_sequence_parallel", False) is True and \
                type(module).__module__.startswith("vllm.models.deepseek_v4"):
            raise WshardLoadError(
                f"{out}: vLLM built {name or type(module).__name__} sequence "
                "parallel (--enable-expert-parallel at tp > 1 with a "
                "data-parallel group or a MegaMoE backend), which keeps the "
                "shared experts and the Engram wkv whole; wshard writes their "
                "tensor-parallel cut: load this model without sequence "
                "parallelism (no data-parallel group, another MoE backend) "
                "or from its checkpoint")


def after_load(model):
    """What a model's own load_weights does after the copies and before
    process_weights_after_loading, which no state file can hold: vLLM
    0.32's openPangu (PanguProMoEV2ForCausalLM) derives its sink attention's
    keys from the loaded param_sink_key (OpenPanguModel.post_weight_load,
    k_layernorm of it, into a plain tensor).  sharded_state skips it and
    serves stale keys.  Each outermost module that has post_weight_load
    runs it, once (openPangu's model calls its layers' own).  Returns the
    names of the modules it ran on."""
    ran = []
    for name, module in model.named_modules():
        if any(p == "" or name.startswith(p + ".") for p in ran):
            continue  # inside a module whose hook ran
        # (DFlash's drafts: load_weights ends with _build_fused_kv_buffers,
        # the stacked K/V projections and k_norms its context pass reads)
        hook = getattr(module, "post_weight_load", None) or \
            getattr(module, "_build_fused_kv_buffers", None)
        if callable(hook):
            hook()
            ran.append(name)
    return ran


def _untied_embedding(model, model_config, state):
    """vLLM unties word embeddings that config.json ties when the model's
    files hold an lm_head (ModelConfig.maybe_untie_word_embeddings; not for
    sharded_state, which this format reads like), and re-ties them after
    loading if the two are equal.  The rank files hold the tied weight
    once, as the lm_head: the embedding is left out of state, to be copied
    from the lm_head once it is read.  Returns vLLM's pair, or None."""
    if not getattr(model_config, "word_embeddings_untied_by_checkpoint", False):
        return None
    from vllm.model_executor.model_loader.weight_tying import _get_untied_lm_head
    untied = _get_untied_lm_head(model)
    if untied is None:
        return None
    ptr = untied.embed_tokens.weight.data_ptr()
    for k in [k for k, v in state.items() if v.data_ptr() == ptr]:
        del state[k]
    return untied


def _shared_embedding(model, shapes, state):
    """vLLM 0.32's Phi3VForCausalLM builds an embed_tokens of its own beside
    its text model's and, where the checkpoint does not fill it (Phi-3-V's
    releases hold the embedding once, as model.embed_tokens),
    load_weights makes it the text model's module (phi3v.py load_weights):
    the state then holds the one tensor as embed_tokens.weight, and the rank
    files so.  The text model's parameter is left out of state, filled from
    embed_tokens.weight once it is read, and made the same module.
    Returns True where it did so."""
    if type(model).__name__ != "Phi3VForCausalLM":
        return False
    inner = "language_model.model.embed_tokens.weight"
    if inner not in state or inner in shapes or "embed_tokens.weight" not in shapes:
        return False
    del state[inner]
    return True


def _source_metadata(out_dir):
    """{source tensor name: {"dtype": ...}} of a wshard output, from its
    manifest: the checkpoint's own names for what vLLM reads from a model
    folder's safetensors headers.  vLLM's GPTQ and AWQ configs take the
    quantized modules from there when quantization_config does not list
    them (maybe_update_config), matching a fused layer (gate_up_proj) by
    the names of its parts (gate_proj, up_proj): the rank files' fused
    names would make it build those layers unquantized."""
    with open(os.path.join(out_dir, "wshard.json")) as f:
        manifest = json.load(f)
    meta = {}
    for rank in manifest.get("ranks", []):
        for t in rank.get("tensors", []):
            for s in t.get("sources", []):
                if "tensor" in s:
                    meta.setdefault(s["tensor"], {"dtype": t["dtype"]})
    return meta


def _patch_params_metadata():
    """get_safetensors_params_metadata answers from the manifest for a
    wshard output, whichever loader reads it; the modules that imported
    the function by name are patched too."""
    import sys
    import vllm.transformers_utils.config as config
    orig = config.get_safetensors_params_metadata
    if getattr(orig, "_wshard", False):
        return

    def get_safetensors_params_metadata(model, *args, **kwargs):
        if os.path.isfile(os.path.join(str(model), "wshard.json")):
            return _source_metadata(str(model))
        return orig(model, *args, **kwargs)
    get_safetensors_params_metadata._wshard = True
    config.get_safetensors_params_metadata = get_safetensors_params_metadata
    # (a module's own names only: getattr on transformers' lazy module
    # would import every model of it, seconds of each vLLM start)
    for mod in list(sys.modules.values()):
        if getattr(mod, "__dict__", {}).get("get_safetensors_params_metadata") is orig:
            mod.get_safetensors_params_metadata = get_safetensors_params_metadata


def register():
    """vLLM's general plugin entry point: registers --load-format wshard,
    and reads a wshard output's checkpoint names from its manifest."""
    _patch_params_metadata()
    from vllm.model_executor.model_loader import register_model_loader
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader

    @register_model_loader("wshard")
    class WshardModelLoader(BaseModelLoader):
        """Loads each worker's rank of a wshard output (wshard convert)."""

        _rank = None

        def download_model(self, model_config):
            pass  # a local wshard output only

        def load_model(self, vllm_config, model_config, prefix=""):
            # The rank opened, and its files read into the page cache while
            # vLLM builds the model (unless WSHARD_LOAD_PREFETCH=0).
            out = model_config.model_weights or model_config.model
            refuse_draft(vllm_config, model_config, out)
            if os.environ.get("WSHARD_LOAD_PREFETCH", "1") != "0" and os.path.isdir(out):
                self._rank = Rank(out, self._want())
                self._rank.prefetch()
            try:
                return super().load_model(vllm_config, model_config, prefix)
            finally:
                if self._rank:
                    self._rank.close()
                    self._rank = None

        @staticmethod
        def _want():
            import vllm
            from vllm.config import get_current_vllm_config
            from vllm.distributed import (get_pp_group,
                                          get_tensor_model_parallel_rank,
                                          get_tp_group)
            par = get_current_vllm_config().parallel_config
            ep = bool(par.enable_expert_parallel)
            # vLLM falls back from round_robin to linear where routing is
            # not grouped, and wshard records the placement it made: only
            # a linear request is checked against it.
            placement = par.expert_placement_strategy if ep else None
            want = {"engine": f"vllm=={vllm.__version__}",
                    "tp": get_tp_group().world_size,
                    "pp": get_pp_group().world_size, "expert_parallel": ep,
                    "expert_placement": placement if placement == "linear" else None,
                    "rank": get_tensor_model_parallel_rank(),
                    "stage": get_pp_group().rank_in_group,
                    "checksums": os.environ.get("WSHARD_LOAD_CHECKSUMS", "1") != "0"}
            return want

        def load_weights(self, model, model_config):
            import time

            from vllm.logger import init_logger
            from vllm.model_executor.model_loader.sharded_state_loader import (
                ShardedStateLoader)

            out = model_config.model_weights or model_config.model
            if not os.path.isdir(out):
                raise WshardLoadError(f"{out}: --load-format wshard loads a "
                                      "wshard output directory")
            rank = self._rank or Rank(out, self._want())
            want = rank.want
            shapes = rank.shapes()
            refuse_sequence_parallel(model, out)
            build_late(model, shapes)
            state = ShardedStateLoader._filter_subtensors(model.state_dict())
            eagle_draft(model, model_config, shapes, state)
            parallel_draft_mask(model, shapes, state)
            unfilled_draft_head(model, model_config, shapes, state)
            unfilled_pooling_head(model, shapes, state)
            untied = _untied_embedding(model, model_config, state)
            shared = _shared_embedding(model, shapes, state)
            t0 = time.perf_counter()
            try:
                n = rank.read(state, int(os.environ.get("WSHARD_LOAD_THREADS", "0")))
            finally:
                if rank is not self._rank:
                    rank.close()
            if untied:
                untied.embed_tokens.weight.data.copy_(untied.lm_head.weight.data)
            if shared:
                text = model.language_model.model.embed_tokens
                text.weight.data.copy_(model.embed_tokens.weight.data)
                model.embed_tokens = text
            after_load(model)
            # the line vLLM's own loaders log, for whoever compares them
            init_logger("vllm.model_executor.model_loader.wshard").info_once(
                "Loading weights took %.2f seconds (wshard: rank %d, %.2f GB "
                "read and checked)", time.perf_counter() - t0, want["rank"],
                n / 1e9)

    return WshardModelLoader
