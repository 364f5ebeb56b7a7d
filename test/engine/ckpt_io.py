"""Rewriting a saved checkpoint in place, shard by shard: what the fixture
writers (make_ckpt.py and its ckpt_*.py) do after save_pretrained."""
import json
import os


def rewrite_shards(out, fn):
    """Calls fn(tensors) for each shard of the checkpoint in OUT, in name
    order: fn changes the dict of tensors (name: torch tensor) in place,
    adding, renaming or dropping some.  Each shard is saved, and the index
    names what each holds now."""
    from safetensors.torch import load_file, save_file
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    for fname in sorted(set(idx["weight_map"].values())):
        path = os.path.join(out, fname)
        tensors = load_file(path)
        for name in tensors:
            del idx["weight_map"][name]
        fn(tensors)
        for name in tensors:
            idx["weight_map"][name] = fname
        save_file(tensors, path, metadata={"format": "pt"})
    idx["weight_map"] = dict(sorted(idx["weight_map"].items()))
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)


def rename_tensors(out, rename):
    """Renames the tensors of the checkpoint in OUT: rename(name) gives
    each one's new name (the same where it keeps it), as a Hub checkpoint
    names what transformers' save_pretrained writes otherwise."""
    def shard(tensors):
        for name in list(tensors):
            new = rename(name)
            if new != name:
                tensors[new] = tensors.pop(name)
    rewrite_shards(out, shard)


def rename_prefix(out, old, new):
    """Renames the tensors of OUT whose names start with old to start with
    new instead."""
    rename_tensors(out, lambda k: new + k[len(old):] if k.startswith(old) else k)


def rename_prefixes(out, pairs):
    """Renames the tensors of OUT by the first (old, new) of pairs whose
    old prefix each name starts with; names that start with none are
    kept."""
    def rename(name):
        for old, new in pairs:
            if name.startswith(old):
                return new + name[len(old):]
        return name
    rename_tensors(out, rename)


def written_tensors(save):
    """save(DIR) writes a checkpoint into a temporary folder: returns its
    tensors (name: torch tensor, every shard's) and config.json (a dict,
    or None where it wrote none); the folder is removed."""
    import shutil
    import tempfile
    from safetensors.torch import load_file
    tmp = tempfile.mkdtemp()
    try:
        save(tmp)
        sd = {}
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".safetensors"):
                sd.update(load_file(os.path.join(tmp, f)))
        path = os.path.join(tmp, "config.json")
        config = json.load(open(path)) if os.path.exists(path) else None
    finally:
        shutil.rmtree(tmp)
    return sd, config


def read_tensors(out):
    """Every tensor of the checkpoint in out, {name: tensor}, its shards
    read in the order glob lists them (the order the builders that copy a
    layer draw their noise in)."""
    import glob
    from safetensors.torch import load_file
    src = {}
    for path in glob.glob(os.path.join(out, "*.safetensors")):
        src.update(load_file(path))
    return src


def last_attention_layer(src, model="model."):
    """The prefix ("model.layers.N.") of the last decoder layer under model
    in src (a read_tensors dict) that has self_attn tensors: the layer the
    hybrid models' MTP builders copy (Qwen3-Next's full attention, not
    its linear attention)."""
    full = sorted({int(k[len(model):].split(".")[1]) for k in src
                   if k.startswith(model + "layers.") and ".self_attn." in k})
    return f"{model}layers.{full[-1]}."


def perturbed_copy(src, prefix, to, rnd, keep=None):
    """{to + rest: rnd(t)} for each tensor prefix + rest of src (a
    read_tensors dict), in src's order, where keep(rest) holds (any, keep
    None): an MTP builder's perturbed copy of a decoder layer."""
    return {to + name[len(prefix):]: rnd(t) for name, t in src.items()
            if name.startswith(prefix) and (keep is None or keep(name[len(prefix):]))}


def perturber(seed):
    """rnd(t): t plus noise of standard deviation 0.02 in t's dtype, drawn
    from a generator seeded with seed (rnd.g, for the builder's other
    draws): the perturbed copies of a layer the MTP builders add."""
    import torch
    g = torch.Generator().manual_seed(seed)

    def rnd(t):
        return t + (torch.randn(t.shape, generator=g) * 0.02).to(t.dtype)
    rnd.g = g
    return rnd


def add_to_first_shard(out, new):
    """Adds the tensors of new (name: torch tensor) to the first shard of
    the checkpoint in OUT: tensors a released checkpoint holds and
    transformers' class does not write."""
    state = {"first": True}

    def add(tensors):
        if state.pop("first", False):
            tensors.update(new)
    rewrite_shards(out, add)


def add_shard(out, name, tensors):
    """Writes tensors (name: torch tensor) into the checkpoint in OUT as a
    shard of their own, NAME, named in the index for each (its names
    sorted): the parts a release ships beside its text model's shards."""
    from safetensors.torch import save_file
    save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    for k in tensors:
        idx["weight_map"][k] = name
    idx["weight_map"] = dict(sorted(idx["weight_map"].items()))
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)


def remote_processor(out, module, cls, text=None):
    """Names the class CLS of OUT/MODULE.py (a stand-in for a release's
    remote-code processor; written from TEXT where given) as the
    checkpoint's AutoProcessor, as the release does: processor_config.json
    and tokenizer_config.json's auto_map and processor_class."""
    if text is not None:
        with open(os.path.join(out, module + ".py"), "w") as f:
            f.write(text)
    auto = {"auto_map": {"AutoProcessor": "%s.%s" % (module, cls)}, "processor_class": cls}
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump(auto, f, indent=2)
    update_config(out, lambda t: t.update(auto), "tokenizer_config.json")


def copy_processor(out, module, cls, **keys):
    """Copies test/engine/MODULE.py, a stand-in for a release's remote-code
    processor, into OUT, and writes processor_config.json naming its class
    CLS (with KEYS, the processor's settings) for AutoProcessor."""
    import shutil
    here = os.path.dirname(os.path.abspath(__file__))
    shutil.copy(os.path.join(here, module + ".py"), out)
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump(dict(processor_class=cls, **keys,
                       auto_map={"AutoProcessor": "%s.%s" % (module, cls)}), f)


def update_config(out, fn, name="config.json"):
    """fn(cfg) changes OUT's config.json (a dict; or the JSON file NAME,
    such as tokenizer_config.json) in place; it is saved."""
    path = os.path.join(out, name)
    cfg = json.load(open(path))
    fn(cfg)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


def perturb(*mods):
    """Adds noise of standard deviation 0.02 from torch's global generator
    to every parameter of each of mods (torch modules), in order: random
    init leaves norms at 1 and biases at 0, and a misplaced or missing
    tensor must change the answers."""
    import torch
    with torch.no_grad():
        for m in mods:
            for p in m.parameters():
                p.add_(torch.randn_like(p) * 0.02)


def perturb_and_save(model, out):
    """Saves model (a transformers model) into OUT in 1 MB shards, each
    parameter perturbed first: random init leaves norms at 1 and biases at
    0, and a misplaced or missing tensor must change the answers."""
    perturb(model)
    model.save_pretrained(out, max_shard_size="1MB")


def module_tensors(mods, after=None):
    """{PREFIX.NAME: tensor} of the parameters of mods ({PREFIX: module}),
    each module in BF16, each parameter first perturbed by noise of
    standard deviation 0.02 from torch's global generator, in order (random
    init leaves norms at 1): the parts of a draft the builders assemble.
    after(name, p), where given, changes a parameter in place before it is
    taken."""
    import torch
    tensors = {}
    with torch.no_grad():
        for prefix, mod in mods.items():
            mod.to(torch.bfloat16)
            for name, p in mod.named_parameters():
                p.add_(torch.randn_like(p) * 0.02)
                if after:
                    after(name, p)
                tensors[prefix + "." + name] = p.detach().clone().contiguous()
    return tensors


def saved_tensors(model, out):
    """model's tensors (perturbed as perturb_and_save does) as its
    save_pretrained writes them, read back from a folder beside OUT that is
    then removed: transformers' fused experts come back one tensor an
    expert (mlp.experts.E.gate_proj ...), the releases' names."""
    import glob
    import shutil
    from safetensors.torch import load_file
    tmp = out + ".saved"
    perturb_and_save(model, tmp)
    sd = {}
    for f in sorted(glob.glob(os.path.join(tmp, "*.safetensors"))):
        sd.update(load_file(f))
    shutil.rmtree(tmp)
    return sd


def layer_shards(tensors, first, layers, prefix="model.layers."):
    """The shards the releases write: FIRST (the embedding) alone, the
    tensors of each of LAYERS layers under PREFIX, then the rest (the final
    norm and the head)."""
    groups = [[first]]
    for n in range(layers):
        groups.append(sorted(k for k in tensors if k.startswith("%s%d." % (prefix, n))))
    groups.append(sorted(k for k in tensors if not k.startswith(prefix) and k != first))
    return groups


def save_shards(out, tensors, groups):
    """Writes tensors (name: torch tensor) into OUT as the shards groups
    lists (each a list of names, a shard), model-0000K-of-0000N, with the
    index naming each tensor's shard, as a release ships them."""
    from safetensors.torch import save_file
    wmap, size = {}, 0
    for i, names in enumerate(groups):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, len(groups))
        save_file({k: tensors[k] for k in names}, os.path.join(out, fname),
                  metadata={"format": "pt"})
        for k in names:
            wmap[k] = fname
            size += tensors[k].numel() * tensors[k].element_size()
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": size}, "weight_map": dict(sorted(wmap.items()))},
                  f, indent=2)


def write_release_config(out, config, code):
    """Writes OUT/config.json as a remote-code release has it (config, a
    dict) with its code beside it (code: file name -> text), and drops the
    generation_config.json transformers saved (the releases' differ)."""
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for name, text in code.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
    gc = os.path.join(out, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)


def fp8_blocks(w, block=128, ue8m0=False):
    """F32 weight w [rows, cols] in float8_e4m3fn with one F32 scale per
    block x block tile (the last ones partial): (weight, scale
    [ceil(rows/block), ceil(cols/block)]), DeepSeek's weight_scale_inv and
    Quark's per-block weight_scale.  ue8m0: each scale a power of two."""
    import torch
    fmax = torch.finfo(torch.float8_e4m3fn).max
    rows, cols = w.shape
    br, bc = -(-rows // block), -(-cols // block)
    scale = torch.empty(br, bc, dtype=torch.float32)
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(br):
        for j in range(bc):
            blk = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            s = blk.abs().max().clamp(min=1e-12) / fmax
            if ue8m0:
                s = torch.exp2(torch.ceil(torch.log2(s)))
            scale[i, j] = s
            q[i * block:(i + 1) * block, j * block:(j + 1) * block] = \
                (blk / s).to(torch.float8_e4m3fn)
    return q, scale


def modelopt_nvfp4(out):
    """Rewrites compressed-tensors' NVFP4 checkpoint in OUT in ModelOpt's
    NVFP4 layout, as NVIDIA's -FP4 checkpoints carry it (nvidia-modelopt
    does not install here): the same FP4 bytes and F8_E4M3 group scales,
    X.weight_packed as X.weight, and the global scales as ModelOpt stores
    them, X.weight_scale_2 = 1 / X.weight_global_scale and X.input_scale =
    1 / X.input_global_scale (compressed-tensors keeps the divisors), F32
    scalars; config.json's quantization_config as ModelOpt writes it, with
    hf_quant_config.json beside it."""
    import torch
    ren = {".weight_packed": ".weight", ".weight_global_scale": ".weight_scale_2",
           ".input_global_scale": ".input_scale"}

    def shard(tensors):
        for name in list(tensors):
            for a, b in ren.items():
                if name.endswith(a):
                    t = tensors.pop(name)
                    if a != ".weight_packed":
                        t = (1.0 / t.float()).reshape(()).to(torch.float32)
                    tensors[name[:-len(a)] + b] = t
    rewrite_shards(out, shard)
    # a MoE's routers stay unquantized
    idx = json.load(open(os.path.join(out, "model.safetensors.index.json")))
    ignore = ["lm_head"] + (["*.mlp.gate"] if any(
        n.endswith(".mlp.gate.weight") for n in idx["weight_map"]) else [])
    q = {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
         "exclude_modules": ignore}
    update_config(out, lambda cfg: cfg.update(quantization_config={
        "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
        "ignore": ignore, "kv_cache_scheme": None,
        "producer": {"name": "modelopt"}}))
    with open(os.path.join(out, "hf_quant_config.json"), "w") as f:
        json.dump({"producer": {"name": "modelopt"}, "quantization": q}, f, indent=2)


def draft_config(cfg, **extra):
    """config.json of a draft checkpoint of its own from the transformers
    config CFG: its keys that differ from the defaults, less the version,
    dtype and cache keys, in BF16, updated with EXTRA."""
    c = cfg.to_diff_dict()
    for k in ("transformers_version", "dtype", "torch_dtype", "use_cache"):
        c.pop(k, None)
    c["torch_dtype"] = "bfloat16"
    c.update(extra)
    return c


def save_draft(out, tensors, config):
    """A draft checkpoint of its own: TENSORS as OUT/model.safetensors and
    the dict CONFIG as OUT/config.json."""
    import json
    import os
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)


def text_config_keys(cfg):
    """cfg.to_dict() (a transformers text config) less transformers'
    bookkeeping, its architecture and model type, layer_types and
    rope_parameters: the text keys the MiniCPM-V and Isaac builders write
    into a release's config.json, under their own architecture."""
    c = cfg.to_dict()
    for k in ("dtype", "transformers_version", "architectures", "model_type", "output_attentions",
              "output_hidden_states", "return_dict", "torch_dtype", "layer_types", "_name_or_path",
              "id2label", "label2id", "chunk_size_feed_forward", "is_encoder_decoder",
              "problem_type", "rope_parameters"):
        c.pop(k, None)
    return c


# The keys a remote-code configuration passes on to PretrainedConfig
CONFIG_SUPER_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id", "tie_word_embeddings")


def remote_config_py(cls, model_type, doc, defaults, derived=()):
    """The text of a release's remote-code configuration module for a test
    checkpoint: class CLS, a PretrainedConfig of MODEL_TYPE (DOC its
    docstring), whose keys are DEFAULTS' (the release's defaults): each
    kept as an attribute, CONFIG_SUPER_KEYS passed on to PretrainedConfig;
    then DERIVED, lines of its __init__ computing keys from the others
    (self.KEY for each)."""
    import pprint
    lines = [f'"""{doc}"""', "from transformers.configuration_utils import PretrainedConfig", "",
             "DEFAULTS = " + pprint.pformat(defaults, width=88, sort_dicts=False),
             f"SUPER = {CONFIG_SUPER_KEYS!r}", "", "",
             f"class {cls}(PretrainedConfig):", f'    model_type = "{model_type}"', "",
             "    def __init__(self, **kwargs):",
             "        for key, value in DEFAULTS.items():",
             "            if key in SUPER:",
             "                kwargs.setdefault(key, value)",
             "            else:",
             "                setattr(self, key, kwargs.pop(key, value))"]
    lines += ["        " + d for d in derived]
    lines += ["        super().__init__(**kwargs)", ""]
    return "\n".join(lines)


def noise(g, s=0.05, dtype=None):
    """w(*shape, s=S, base=0, dtype=DTYPE): base plus a tensor of SHAPE
    drawn from the torch generator g (standard normal) times s, in dtype
    (float32 where None), each call the next draw: the tensors that no
    transformers class saves (stand-in towers, projectors, norms), made
    under vLLM's or a release's names and shapes."""
    import torch

    def w(*shape, s=s, base=0, dtype=dtype):
        t = torch.randn(*shape, generator=g) * s
        if base:
            t = base + t
        return t if dtype is None else t.to(dtype)
    return w


def norm_tensors(w, prefix, n):
    """A LayerNorm's PREFIX.weight (1 plus noise of 0.1) and PREFIX.bias
    [n], drawn by w (noise's), in that order."""
    return {prefix + ".weight": 1 + w(n, s=0.1), prefix + ".bias": w(n)}


def save_prefix_shards(out, tensors, prefixes):
    """Writes tensors (name: torch tensor) into OUT (made if missing) as
    save_shards does: a shard for each of PREFIXES (the tensors whose
    names start with it, or with one of a tuple), then one of the rest."""
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in tensors if k.startswith(p)) for p in prefixes]
    groups.append(sorted(set(tensors) - {k for g in groups for k in g}))
    save_shards(out, tensors, groups)
