"""safetensors files read and written by hand for the t-*.sh scripts (no
dependency beyond Python's own library): test/st.py."""
import json
import struct


def read(paths):
    """{name: (dtype, shape, bytes)} of every tensor in the files paths."""
    t = {}
    for p in paths:
        d = open(p, "rb").read()
        n = struct.unpack("<Q", d[:8])[0]
        for k, v in json.loads(d[8:8 + n]).items():
            if k != "__metadata__":
                a, b = v["data_offsets"]
                t[k] = (v["dtype"], v["shape"], d[8 + n + a:8 + n + b])
    return t


def arrays(path, pattern="*.safetensors"):
    """{name: numpy array in the tensor's shape} of every tensor in the files
    matching pattern in folder path, in name order of the files; U8, BF16
    and F32 elements as unsigned integers of their width (needs numpy)."""
    import glob
    import os
    import numpy as np
    out = {}
    for f in sorted(glob.glob(os.path.join(path, pattern))):
        b = open(f, "rb").read()
        n = struct.unpack("<Q", b[:8])[0]
        for k, v in json.loads(b[8:8 + n]).items():
            if k == "__metadata__":
                continue
            dt = {"U8": np.uint8, "BF16": np.uint16, "F32": np.uint32}[v["dtype"]]
            a, e = v["data_offsets"]
            out[k] = np.frombuffer(b[8 + n + a:8 + n + e], dtype=dt).reshape(v["shape"])
    return out


def read_header(path):
    """{name: {"dtype", "shape", "data_offsets"}} of the file at path."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h


def flip_byte(path, name, at):
    """Inverts, in place, the byte at offset at of tensor name's data in the
    file at path (a corrupted output for verify and load to find)."""
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        off = 8 + n + json.loads(f.read(n))[name]["data_offsets"][0] + at
        f.seek(off)
        b = f.read(1)[0]
        f.seek(off)
        f.write(bytes([b ^ 0xFF]))


def attention_shapes(p, hidden, heads, kv_heads, head_dim):
    """{name: shape} of a decoder layer's norms and q/k/v/o projections,
    names under prefix p ("model.layers.3.")."""
    return {p + "input_layernorm.weight": [hidden],
            p + "post_attention_layernorm.weight": [hidden],
            p + "self_attn.q_proj.weight": [heads * head_dim, hidden],
            p + "self_attn.k_proj.weight": [kv_heads * head_dim, hidden],
            p + "self_attn.v_proj.weight": [kv_heads * head_dim, hidden],
            p + "self_attn.o_proj.weight": [hidden, heads * head_dim]}


def write_sparse(path, shapes, dtype="BF16", width=2):
    """A file at path holding a tensor of dtype (width bytes an element) for
    each name: shape of shapes, its data all holes (a full-size checkpoint
    that takes no disk)."""
    hdr, off = {}, 0
    for k, s in shapes.items():
        n = width
        for d in s:
            n *= d
        hdr[k] = {"dtype": dtype, "shape": s, "data_offsets": [off, off + n]}
        off += n
    b = json.dumps(hdr).encode()
    b += b" " * (-len(b) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(b)))
        f.write(b)
        f.truncate(8 + len(b) + off)


def write(path, tensors):
    """A file at path holding tensors: {name: (dtype, shape, bytes)}."""
    hdr, off, data = {}, 0, []
    for k, (dt, s, b) in tensors.items():
        hdr[k] = {"dtype": dt, "shape": s, "data_offsets": [off, off + len(b)]}
        off += len(b)
        data.append(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.write(b"".join(data))


def rank_rows(t, r, n):
    """The bytes of rank r's 1/n of the rows of t (dtype, shape, bytes), as
    a row split cuts them; a tensor of one row is whole on every rank."""
    b = t[2]
    if t[1] and t[1][0] == 1:
        return b
    k = len(b) // n
    return b[r * k:(r + 1) * k]


def rank_cols(t, r, n, split=False):
    """Rank r's 1/n of the columns of the 2-D t (dtype, shape, bytes), row by
    row: the rows' bytes joined, or with split a list of each row's."""
    rows, c = t[1]
    b = t[2]
    w = len(b) // rows // c
    k = c // n
    out = [b[(i * c + r * k) * w:(i * c + r * k + k) * w] for i in range(rows)]
    return out if split else b"".join(out)
