#!/usr/bin/env python3
"""Interoperability helper: the official `safetensors` package's side.

Used by test/t-interop.sh together with test/st-tool.  Every command that
prints a dump uses st-tool's format, so the shell compares the two with
cmp:

    meta KEY VALUE                           (sorted by key)
    tensor NAME DTYPE [D0,D1] NBYTES SHA256  (sorted by name)

with bytes outside '!'..'~', and '%', written as %XX.

    interop.py expect [-m KEY=VALUE]... NAME:DTYPE:SHAPE...
        The dump st-tool write must produce for the same arguments,
        computed here from the same byte pattern.
    interop.py dump FILE
        Reads FILE with the safetensors package (raw bytes for every
        dtype; numpy arrays too where numpy has the dtype, which must
        agree) and prints its dump.
    interop.py write FILE
        Writes FILE with safetensors.numpy and prints the dump expected
        from the source arrays.
    interop.py write-raw FILE
        Writes dtypes numpy lacks (BF16, F8_*, F4) from raw bytes with
        safetensors.serialize; exits 3 if this package version cannot.
"""
import ctypes
import hashlib
import sys

import numpy as np
import safetensors
from safetensors import safe_open
import safetensors.numpy

BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "I16": 16, "U16": 16, "F16": 16,
    "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64,
    "F64": 64, "C64": 64, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F4": 4, "F6_E2M3": 6,
    "F6_E3M2": 6,
}

NUMPY = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16,
    "U16": np.uint16, "F16": np.float16, "I32": np.int32, "U32": np.uint32,
    "F32": np.float32, "I64": np.int64, "U64": np.uint64, "F64": np.float64,
    "C64": np.complex64,
}

# safetensors.serialize's names for dtypes given as raw bytes.
RAW_NAMES = {
    "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
}


def esc(s):
    out = []
    for b in s.encode("utf-8"):
        if b < 0x21 or b > 0x7E or b == 0x25:
            out.append("%%%02X" % b)
        else:
            out.append(chr(b))
    return "".join(out)


def dump_lines(meta, tensors):
    """meta: dict; tensors: list of (name, dtype, shape, bytes)."""
    lines = []
    for k in sorted(meta or {}, key=lambda s: s.encode()):
        lines.append("meta %s %s" % (esc(k), esc(meta[k])))
    for name, dtype, shape, data in sorted(tensors,
                                           key=lambda t: t[0].encode()):
        lines.append("tensor %s %s [%s] %d %s" % (
            esc(name), dtype, ",".join(str(d) for d in shape), len(data),
            hashlib.sha256(bytes(data)).hexdigest()))
    return "".join(line + "\n" for line in lines)


def pattern(n, i, dtype):
    b = bytes((j * 131 + i * 17 + 7) & 0xFF for j in range(n))
    if dtype == "BOOL":
        b = bytes(x & 1 for x in b)
    return b


def cmd_expect(args):
    meta = {"format": "pt"}
    tensors = []
    it = iter(args)
    for a in it:
        if a == "-m":
            k, v = next(it).split("=", 1)
            meta[k] = v
            continue
        name, dtype, shape = a.rsplit(":", 2)
        dims = [int(d) for d in shape.split("x")] if shape else []
        elems = 1
        for d in dims:
            elems *= d
        n = elems * BITS[dtype] // 8
        tensors.append((name, dtype, dims, pattern(n, len(tensors), dtype)))
    sys.stdout.write(dump_lines(meta, tensors))


def cmd_dump(path):
    with open(path, "rb") as f:
        blob = f.read()
    tensors = []
    for name, info in safetensors.deserialize(blob):
        tensors.append((name, info["dtype"], list(info["shape"]),
                        bytes(info["data"])))
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
        names = set(f.keys())
        assert names == {t[0] for t in tensors}, (names, tensors)
        for name, dtype, shape, data in tensors:
            if dtype not in NUMPY:
                continue
            arr = f.get_tensor(name)
            assert arr.dtype == np.dtype(NUMPY[dtype]), (name, arr.dtype)
            assert list(arr.shape) == shape, (name, arr.shape, shape)
            assert arr.tobytes() == data, name
    sys.stdout.write(dump_lines(meta, tensors))


def numpy_tensors():
    rng = np.random.default_rng(20240611)
    t = {}
    t["model.embed_tokens.weight"] = rng.standard_normal(
        (64, 32)).astype(np.float16)
    t["model.layers.0.mlp.down_proj.weight"] = rng.standard_normal(
        (512, 1024)).astype(np.float32)
    t["f64"] = rng.standard_normal(5)
    t["c64"] = (rng.standard_normal(3)
                + 1j * rng.standard_normal(3)).astype(np.complex64)
    for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
               np.uint32, np.uint64):
        info = np.iinfo(dt)
        t["int." + np.dtype(dt).name] = rng.integers(
            info.min, info.max, size=(3, 2), dtype=dt, endpoint=True)
    t["mask"] = rng.integers(0, 2, size=7).astype(np.bool_)
    t["scalar"] = np.array(1.5, dtype=np.float32)
    t["empty"] = np.zeros((0, 4), dtype=np.float16)
    t["empty.2"] = np.zeros((3, 0, 2), dtype=np.int64)
    t["caf\u00e9 \u2603:\"q\"\\"] = np.arange(4, dtype=np.int32)
    return t


def numpy_code(arr):
    for code, dt in NUMPY.items():
        if arr.dtype == np.dtype(dt):
            return code
    raise ValueError(arr.dtype)


def cmd_write(path):
    t = numpy_tensors()
    meta = {"format": "pt", "note": "h\u00e9llo w\u00f6rld", "empty": ""}
    safetensors.numpy.save_file(t, path, metadata=meta)
    expect = [(k, numpy_code(v), list(v.shape), v.tobytes())
              for k, v in t.items()]
    sys.stdout.write(dump_lines(meta, expect))


def serialize_raw(specs, meta):
    """specs: list of (name, dtype, shape, bytes) -> file bytes, or None."""
    if hasattr(safetensors, "TensorSpec"):
        keep = []
        d = {}
        for name, dtype, shape, data in specs:
            buf = ctypes.create_string_buffer(data, len(data) or 1)
            keep.append(buf)
            d[name] = safetensors.TensorSpec(
                dtype=RAW_NAMES[dtype], shape=shape,
                data_ptr=ctypes.addressof(buf), data_len=len(data))
        return bytes(safetensors.serialize(d, metadata=meta))
    # Older releases take the bytes directly.
    d = {name: {"dtype": RAW_NAMES[dtype], "shape": shape, "data": data}
         for name, dtype, shape, data in specs}
    return bytes(safetensors.serialize(d, metadata=meta))


def cmd_write_raw(path):
    specs = []
    for i, (dtype, shape) in enumerate([
            ("BF16", [16, 8]), ("BF16", []), ("F8_E4M3", [4, 4]),
            ("F8_E5M2", [3]), ("F8_E4M3FNUZ", [2]), ("F8_E5M2FNUZ", [2]),
            ("F8_E8M0", [5]), ("BF16", [0, 3])]):
        elems = 1
        for d in shape:
            elems *= d
        n = elems * BITS[dtype] // 8
        specs.append(("raw.%d.%s" % (i, dtype.lower()), dtype, shape,
                      pattern(n, i, dtype)))
    meta = {"format": "pt"}
    try:
        blob = serialize_raw(specs, meta)
    except Exception as e:  # pylint: disable=broad-except
        sys.stderr.write("safetensors %s cannot serialize raw bytes: %s\n"
                         % (getattr(safetensors, "__version__", "?"), e))
        sys.exit(3)
    with open(path, "wb") as f:
        f.write(blob)
    sys.stdout.write(dump_lines(meta, specs))


def main(argv):
    if len(argv) >= 2 and argv[1] == "expect":
        cmd_expect(argv[2:])
    elif len(argv) == 3 and argv[1] == "dump":
        cmd_dump(argv[2])
    elif len(argv) == 3 and argv[1] == "write":
        cmd_write(argv[2])
    elif len(argv) == 3 and argv[1] == "write-raw":
        cmd_write_raw(argv[2])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
