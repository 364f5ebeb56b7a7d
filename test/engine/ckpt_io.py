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


def update_config(out, fn):
    """fn(cfg) changes OUT's config.json (a dict) in place; it is saved."""
    path = os.path.join(out, "config.json")
    cfg = json.load(open(path))
    fn(cfg)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
