#!/usr/bin/env python3
"""reference.py - an independent reference implementation of wshard's output
contract (OUTPUT-CONTRACT.md, target vllm), written from the contract only.

    reference.py check SRC OUT --tp N [--no-attn-scales] [--max-file-size SIZE]
                       [--checksum ALGO] [--dtype bf16|f16|f32]
        Computes what every rank must hold from the source checkpoint and
        compares it with wshard's output in OUT: files, safetensors headers,
        tensor names, dtypes, shapes and bytes, copied files and wshard.json.
        Prints one line per difference and a summary; exits 0 when all match,
        1 on differences, 2 when the expectation cannot be computed.

    reference.py write SRC OUT --tp N [--no-attn-scales] [--max-file-size SIZE]
        Writes the expected output itself (rank files, copied files and a
        manifest), for testing `check` and for diffing by hand.

    reference.py expect SRC --tp N [--no-attn-scales]
        Lists the expected tensors of every rank with their provenance.

Tensor data is handled as raw bytes: a tensor is a matrix of shape[0] rows of
equal byte length, so slicing is byte-exact for every dtype.  Needs numpy,
safetensors, xxhash and awscrt (CRC-64/NVME).

Mixture-of-experts models (Mixtral, Qwen2-MoE, Qwen3-MoE) stack their experts,
named as vLLM 0.32 keeps them (...experts.routed_experts.): w13_weight
[E, 2*I/tp, H] (per expert: w1 rows of rank r, then w3 rows) and w2_weight
[E, H, I/tp]; routers are replicated (Qwen3-MoE's as mlp.experts.gate.weight);
Qwen2-MoE's shared expert is mlp.experts._shared_experts._layer.{gate_up_proj,
down_proj,expert_gate}.  FP8 scales follow their
weights: X.weight_scale / X.input_scale of one element become one element
per fused part ([s_q, s_k, s_v], [s_gate, s_up]); [rows, 1] scales are cut and
fused like the weight's rows; X.weight_scale_inv (block-wise, the block size
from config.json's quantization_config.weight_block_size) is cut in whole
blocks, rows beside a row split, columns beside a column split, and a split
that cuts a block cannot be computed.  Beside a column split, weight_scale and
input_scale are replicated whole.

--dtype converts every F32/F16/BF16 output (not scales, not the constant
attention scales) with round-to-nearest-even; converted values are compared
value by value (any NaN matches any NaN).  config.json's torch_dtype follows
and the manifest's options.dtype records the target.
"""
import argparse
import hashlib
import json
import os
import re
import struct
import sys

import numpy as np

try:
    import xxhash
except ImportError:  # checked when a checksum is needed
    xxhash = None
try:
    import safetensors
except ImportError:
    safetensors = None
try:
    from awscrt import checksums as awscrt_checksums  # CRC-64/NVME, as S3 computes it
except ImportError:
    awscrt_checksums = None

ALGOS = ("crc64-nvme", "xxh3-64", "sha256")

BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
HEADER_MAX = 100000000
OFFICIAL_MAX = 256 << 20  # files read whole by safetensors.deserialize
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
INDEX_NAME = "model.safetensors.index.json"
MANIFEST = "wshard.json"
RANK_FILE = re.compile(r"^model-rank-(\d+)-part-(\d+)\.safetensors$")

# architecture -> (family, tied by default)
ARCHS = {
    "LlamaForCausalLM": ("llama", False),
    "MistralForCausalLM": ("llama", False),
    "Qwen2ForCausalLM": ("qwen2", False),
    "Qwen3ForCausalLM": ("qwen3", False),
    "GemmaForCausalLM": ("gemma", True),
    "Gemma2ForCausalLM": ("gemma2", True),
    "Gemma3ForCausalLM": ("gemma3", True),
    "Phi3ForCausalLM": ("phi3", False),
    "MixtralForCausalLM": ("mixtral", False),
    "Qwen2MoeForCausalLM": ("qwen2_moe", False),
    "Qwen3MoeForCausalLM": ("qwen3_moe", False),
}
SCALE_SUFFIXES = (".weight_scale", ".input_scale", ".weight_scale_inv")
FLOATS = ("F32", "F16", "BF16")
DTYPE_OPT = {"bf16": "BF16", "f16": "F16", "f32": "F32"}
TORCH_DTYPE = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}


def ceil_div(a, b):
    return -(-a // b)


def scale_output_name(out, suffix):
    """The output name of a weight's scale, vLLM's parameter names:
    X.weight -> X.weight_scale, experts.w13_weight -> experts.w13_weight_scale,
    experts.w13_input_scale, experts.w13_weight_scale_inv."""
    if out.endswith(".weight"):
        return out[:-len(".weight")] + suffix
    if out.endswith("_weight"):
        return out[:-len("_weight")] + "_" + suffix[1:]
    return out + suffix


# ---------------------------------------------------------------- dtype conversion


def f32_bits(raw, dtype):
    """Raw little-endian bytes of dtype -> uint32 F32 bit patterns (exact)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if dtype == "F32":
        return raw.view("<u4").astype(np.uint32)
    if dtype == "BF16":
        return raw.view("<u2").astype(np.uint32) << np.uint32(16)
    if dtype == "F16":
        with np.errstate(all="ignore"):
            return raw.view("<f2").astype(np.float32).view(np.uint32)
    raise RefError("cannot convert from %s" % dtype)


def bits_to_bf16(u):
    """F32 bits -> BF16 bits, round to nearest, ties to even, NaN stays NaN."""
    u = u.astype(np.uint64)
    hi = u >> np.uint64(16)
    lo = u & np.uint64(0xFFFF)
    up = (lo > 0x8000) | ((lo == 0x8000) & ((hi & np.uint64(1)) == 1))
    out = hi + up.astype(np.uint64)
    nan = (u & np.uint64(0x7FFFFFFF)) > 0x7F800000
    out = np.where(nan, (hi & np.uint64(0x8000)) | np.uint64(0x7FC0), out)
    return out.astype("<u2")


def convert_bytes(raw, frm, to):
    """Converts raw bytes of dtype frm to dtype to (uint8 array)."""
    if frm == to:
        return np.asarray(raw, dtype=np.uint8)
    u = f32_bits(raw, frm)
    if to == "F32":
        out = u.astype("<u4")
    elif to == "BF16":
        out = bits_to_bf16(u)
    elif to == "F16":
        with np.errstate(all="ignore"):
            out = u.view(np.float32).astype(np.float16).view("<u2")
    else:
        raise RefError("cannot convert to %s" % to)
    return np.ascontiguousarray(out).view(np.uint8)


def nan_mask(raw, dtype):
    if dtype == "F32":
        return (raw.view("<u4") & 0x7FFFFFFF) > 0x7F800000
    if dtype == "BF16":
        return (raw.view("<u2") & 0x7FFF) > 0x7F80
    if dtype == "F16":
        return (raw.view("<u2") & 0x7FFF) > 0x7C00
    raise ValueError(dtype)


def first_value_diff(got, want, dtype):
    """First element where got and want differ, NaN matching any NaN; -1 when
    equal.  Compares bytes for dtypes other than F32/F16/BF16."""
    if dtype not in FLOATS or len(got) != len(want) or len(got) % (BITS[dtype] // 8):
        i = first_diff(got, want)
        return i if i < 0 else i * 8 // BITS[dtype]
    size = BITS[dtype] // 8
    g = np.ascontiguousarray(got).view("<u%d" % size)
    w = np.ascontiguousarray(want).view("<u%d" % size)
    ne = g != w
    if ne.any():
        both = nan_mask(np.ascontiguousarray(got), dtype) & nan_mask(np.ascontiguousarray(want), dtype)
        ne &= ~both
    idx = np.flatnonzero(ne)
    return int(idx[0]) if len(idx) else -1


def element_hex(raw, dtype, i):
    size = BITS[dtype] // 8
    b = bytes(np.asarray(raw[i * size:(i + 1) * size]))
    return "0x" + b[::-1].hex()


class RefError(Exception):
    """The expectation cannot be computed (bad source, indivisible split...)."""


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def tensor_nbytes(dtype, shape):
    bits = numel(shape) * BITS[dtype]
    if bits % 8:
        raise ValueError("%s%s is not a whole number of bytes" % (dtype, list(shape)))
    return bits // 8


def round_up(x, m):
    return (x + m - 1) // m * m


# ---------------------------------------------------------------- safetensors


def parse_safetensors(path, strict_writer=False):
    """Parses and validates a safetensors file's header under section 6 of the
    contract.  Returns (header_len, meta, tensors, problems) where tensors maps
    name -> dict(dtype, shape, begin, end) and problems lists rule violations.
    With strict_writer also checks wshard's writer conventions."""
    problems = []
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            return 0, {}, {}, ["file shorter than 8 bytes"]
        (n,) = struct.unpack("<Q", raw)
        if n > HEADER_MAX:
            return 0, {}, {}, ["header length %d over the %d cap" % (n, HEADER_MAX)]
        if 8 + n > size:
            return 0, {}, {}, ["header length %d past the end of the file (%d bytes)" % (n, size)]
        hbytes = f.read(n)
    try:
        htext = hbytes.decode("utf-8")
    except UnicodeDecodeError:
        return n, {}, {}, ["header is not UTF-8"]
    pairs_seen = []

    def hook(pairs):
        pairs_seen.append([k for k, _ in pairs])
        return dict(pairs)

    try:
        header = json.loads(htext, object_pairs_hook=hook)
    except ValueError as e:
        return n, {}, {}, ["header is not JSON: %s" % e]
    if not isinstance(header, dict):
        return n, {}, {}, ["header is not a JSON object"]
    top_keys = pairs_seen[-1] if pairs_seen else []
    if len(set(top_keys)) != len(top_keys):
        problems.append("duplicate names in the header")
    if strict_writer:
        if not htext.startswith("{"):
            problems.append("header does not start with '{'")
        if htext.rstrip(" ") != htext.rstrip(" \t\r\n") or not htext.rstrip(" ").endswith("}"):
            problems.append("header padding is not spaces after '}'")
        if (8 + n) % 8:
            problems.append("header length %d: data does not start at a multiple of 8" % n)
    meta = header.pop("__metadata__", None)
    if meta is None:
        meta = {}
        problems.append("no __metadata__")
    elif not isinstance(meta, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        problems.append("__metadata__ is not a map of strings to strings")
        meta = {}
    tensors = {}
    for name, e in header.items():
        if "\0" in name:
            problems.append("tensor name with NUL: %r" % name)
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            problems.append("%s: entry must have exactly dtype, shape, data_offsets" % name)
            continue
        dt, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if dt not in BITS:
            problems.append("%s: unknown dtype %r" % (name, dt))
            continue
        if (not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            problems.append("%s: bad shape %r" % (name, shape))
            continue
        if (not isinstance(offs, list) or len(offs) != 2 or not all(
                isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offs)
                or offs[0] > offs[1]):
            problems.append("%s: bad data_offsets %r" % (name, offs))
            continue
        try:
            nb = tensor_nbytes(dt, shape)
        except ValueError as err:
            problems.append("%s: %s" % (name, err))
            continue
        if offs[1] - offs[0] != nb:
            problems.append("%s: data_offsets %r hold %d bytes, %s%r needs %d" %
                            (name, offs, offs[1] - offs[0], dt, shape, nb))
        tensors[name] = {"dtype": dt, "shape": shape, "begin": offs[0], "end": offs[1]}
    pos = 0
    for name, t in sorted(tensors.items(), key=lambda kv: (kv[1]["begin"], kv[1]["end"])):
        if t["begin"] != pos:
            problems.append("%s: data starts at %d, expected %d (%s)" %
                            (name, t["begin"], pos, "hole" if t["begin"] > pos else "overlap"))
        pos = max(pos, t["end"])
    if 8 + n + pos != size:
        problems.append("data ends at %d but the file has %d bytes after the header" %
                        (pos, size - 8 - n))
    return n, meta, tensors, problems


class Tensor:
    """A source tensor: its raw bytes, seen as shape[0] rows (1 for a scalar)
    of `width` elements each."""

    def __init__(self, name, dtype, shape, path, offset):
        self.name, self.dtype, self.shape = name, dtype, list(shape)
        self.nbytes = tensor_nbytes(dtype, shape)
        self.rows = shape[0] if shape else 1
        self.path, self.offset = path, offset
        self._flat = None

    @property
    def flat(self):
        if self._flat is None:
            if self.nbytes == 0:
                self._flat = np.zeros(0, dtype=np.uint8)
            else:
                self._flat = np.memmap(self.path, dtype=np.uint8, mode="r",
                                       offset=self.offset, shape=(self.nbytes,))
        return self._flat

    @property
    def width(self):
        """Elements per row (the product of shape[1:])."""
        return numel(self.shape[1:])


class Source:
    def __init__(self, path):
        self.path = path
        self.dir = path if os.path.isdir(path) else os.path.dirname(path)
        self.tensors = {}
        self.weight_files = []  # names relative to dir
        if os.path.isdir(path):
            idx = os.path.join(path, INDEX_NAME)
            if os.path.exists(idx):
                with open(idx) as f:
                    wm = json.load(f)["weight_map"]
                files = []
                for fn in wm.values():
                    if fn not in files:
                        files.append(fn)
            elif os.path.exists(os.path.join(path, "model.safetensors")):
                files = ["model.safetensors"]
            else:
                raise RefError("%s: no model.safetensors or %s" % (path, INDEX_NAME))
        else:
            files = [os.path.basename(path)]
        for fn in files:
            fp = os.path.join(self.dir, fn)
            n, _meta, tens, problems = parse_safetensors(fp)
            if problems:
                raise RefError("source %s: %s" % (fn, problems[0]))
            for name, t in tens.items():
                if name in self.tensors:
                    raise RefError("source: %s in two files" % name)
                self.tensors[name] = Tensor(name, t["dtype"], t["shape"], fp, 8 + n + t["begin"])
            self.weight_files.append(fn)
        self.config = {}
        cp = os.path.join(self.dir, "config.json")
        if os.path.exists(cp):
            with open(cp) as f:
                self.config = json.load(f)

    def copied_files(self):
        """The non-weight files a conversion copies, sorted."""
        if not os.path.isdir(self.path):
            return []
        out = []
        for fn in sorted(os.listdir(self.path)):
            # hidden files (.gitattributes, ...) are repository metadata: optional
            if fn.startswith(".") or not os.path.isfile(os.path.join(self.path, fn)):
                continue
            if fn.endswith(WEIGHT_SUFFIXES) or fn == INDEX_NAME:
                continue
            out.append(fn)
        return out


# ---------------------------------------------------------------- expectation
#
# An expected output tensor is (dtype, shape, pieces); a piece is
#   ("copy", src, r0, r1, c0, c1): rows [r0, r1) and row elements [c0, c1) of
#       source tensor src (a row's elements are the product of shape[1:]),
#   ("zeros", nbytes), or
#   ("value", v): one element of value v.


def value_bytes(dtype, v):
    v = float(v)  # a manifest writes an infinity as "-inf" or "inf"
    if dtype == "F32":
        return struct.pack("<f", v)
    if dtype == "F64":
        return struct.pack("<d", v)
    if dtype == "F16":
        return struct.pack("<e", v)
    if dtype == "BF16":
        return struct.pack("<f", v)[2:]
    raise RefError("no constant of dtype %s" % dtype)


def scale_shape(t):
    """vLLM keeps a linear layer's per-tensor scale as a vector of one
    element per fused part (PerTensorScaleParameter): a scalar is [1]."""
    return [1] if list(t.shape) == [] else list(t.shape)


def piece_bytes(src, dtype, p):
    if p[0] == "zeros":
        return np.zeros(p[1], dtype=np.uint8)
    if p[0] == "value":
        return np.frombuffer(value_bytes(dtype, p[1]), dtype=np.uint8)
    _, name, r0, r1, c0, c1 = p
    t = src.tensors[name]
    bits, w = BITS[t.dtype], t.width
    if c0 == 0 and c1 == w:  # whole rows: one contiguous run
        b0, b1 = r0 * w * bits, r1 * w * bits
        if b0 % 8 or b1 % 8:
            raise RefError("%s: rows [%d, %d) of %s are not whole bytes" % (name, r0, r1, t.dtype))
        return np.asarray(t.flat[b0 // 8:b1 // 8])
    if (w * bits) % 8 or (c0 * bits) % 8 or (c1 * bits) % 8:
        raise RefError("%s: columns [%d, %d) of %s are not whole bytes" % (name, c0, c1, t.dtype))
    mat = t.flat.reshape(t.rows, w * bits // 8)
    return np.ascontiguousarray(mat[r0:r1, c0 * bits // 8:c1 * bits // 8]).reshape(-1)


def materialize(src, dtype, pieces):
    parts = [piece_bytes(src, dtype, p) for p in pieces]
    if not parts:
        return np.zeros(0, dtype=np.uint8)
    return np.concatenate(parts)


def expected_bytes(src, entry):
    """The bytes an expected tensor (dtype, shape, pieces, from) must hold:
    its pieces in the source dtype `from`, converted to dtype."""
    dtype, _shape, pieces, frm = entry
    raw = materialize(src, frm, pieces)
    return convert_bytes(raw, frm, dtype) if frm != dtype else raw


class Expect:
    def __init__(self, src, tp, attn_scales=True, dtype=None):
        self.src, self.tp, self.attn_scales = src, tp, attn_scales
        self.dtype = dtype  # --dtype target (BF16, F16, F32) or None
        self.ranks = [dict() for _ in range(tp)]
        self.consumed = set()
        self.untied = False
        self._build()

    # -- helpers
    def cfg_int(self, key, default=None):
        v = self.src.config.get(key, default)
        if v is None:
            raise RefError("config.json has no %s" % key)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise RefError("config.json %s=%r is not a positive integer" % (key, v))
        return v

    def divisible(self, what, value, by, by_what=None):
        if value % by:
            raise RefError("%s=%d is not divisible by %s" %
                           (what, value, by_what or "--tp %d" % self.tp))

    def get(self, name, shape, optional=False):
        t = self.src.tensors.get(name)
        if t is None:
            if optional:
                return None
            raise RefError("source: %s is missing" % name)
        if t.shape != list(shape):
            raise RefError("source: %s has shape %s, config.json says %s" % (name, t.shape, list(shape)))
        self.consumed.add(name)
        return t

    def take(self, name):
        """A source tensor of any shape (scales), consumed; None if absent."""
        t = self.src.tensors.get(name)
        if t is not None:
            self.consumed.add(name)
        return t

    def put(self, rank, name, dtype, shape, pieces, convert=True):
        assert name not in self.ranks[rank], name
        got = sum(tensor_nbytes(dtype, [1]) if p[0] == "value" else
                  p[1] if p[0] == "zeros" else
                  (p[3] - p[2]) * (p[5] - p[4]) * BITS[self.src.tensors[p[1]].dtype] // 8
                  for p in pieces)
        assert got == tensor_nbytes(dtype, shape), (name, got, shape)
        out = dtype
        # --dtype: F32/F16/BF16 outputs are converted; FP8 scales and the
        # constant attention scales are not
        if (convert and self.dtype and dtype in FLOATS
                and not name.endswith(SCALE_SUFFIXES)):
            out = self.dtype
        self.ranks[rank][name] = (out, list(shape), pieces, dtype)

    def same_dtype(self, *ts):
        dts = {t.dtype for t in ts}
        if len(dts) != 1:
            raise RefError("fused tensors with different dtypes: %s" %
                           ", ".join("%s %s" % (t.name, t.dtype) for t in ts))
        return ts[0].dtype

    def whole(self, t):
        return ("copy", t.name, 0, t.rows, 0, t.width)

    def rows_piece(self, t, r0, r1):
        return ("copy", t.name, r0, r1, 0, t.width)

    def emit(self, items):
        """items[r] = {name: (dtype, shape, pieces)}: put on every rank."""
        for r, item in enumerate(items):
            for name in sorted(item):
                dt, shape, pieces = item[name]
                self.put(r, name, dt, shape, pieces)

    def replicate(self, name, t):
        for r in range(self.tp):
            self.put(r, name, t.dtype, t.shape, [self.whole(t)])

    def vocab_parallel(self, out_name, t):
        V, H = t.shape
        padded = round_up(V, 64)
        self.divisible("vocab_size (padded to %d)" % padded, padded, self.tp)
        P = padded // self.tp
        row_bytes = t.nbytes // V if V else 0
        for r in range(self.tp):
            a, b = r * P, min((r + 1) * P, V)
            pieces = []
            if b > a:
                pieces.append(self.rows_piece(t, a, b))
            else:
                a = b = 0
            if P - (b - a) > 0:
                pieces.append(("zeros", (P - (b - a)) * row_bytes))
            self.put(r, out_name, t.dtype, [P, H], pieces)

    # -- linear layers and their FP8 scales
    def block_size(self):
        qc = self.src.config.get("quantization_config") or {}
        bs = qc.get("weight_block_size") if isinstance(qc, dict) else None
        if (not isinstance(bs, list) or len(bs) != 2 or
                not all(isinstance(x, int) and x > 0 for x in bs)):
            raise RefError("weight_scale_inv needs config.json quantization_config."
                           "weight_block_size [rows, cols], not %s" % json.dumps(bs))
        return bs

    def block_range(self, what, a, b, n, B):
        """Blocks [a // B, ceil(b / B)) of a split [a, b) of n rows/cols; the
        split must not cut a block."""
        if a % B or (b % B and b != n):
            raise RefError("%s: the split [%d, %d) of %d cuts a block of %d" % (what, a, b, n, B))
        return a // B, ceil_div(b, B)

    def scales(self, bases):
        """{suffix: [scale tensor per base]} for the scales present beside
        the weights base + '.weight'; all bases must carry the same ones."""
        out = {}
        for suffix in SCALE_SUFFIXES:
            ts = [self.take(b + suffix) if b is not None else None for b in bases]
            if all(t is None for t in ts):
                continue
            if any(t is None for t in ts):
                have = [b + suffix for b, t in zip(bases, ts) if t is not None]
                miss = [b + suffix for b, t in zip(bases, ts) if t is None and b is not None]
                raise RefError("%s present but %s missing" % (", ".join(have), ", ".join(miss) or
                                                              "a fused source has no scales"))
            self.same_dtype(*ts)
            out[suffix] = ts
        return out

    def fused(self, out, parts, sel):
        """A row-fused output: parts = [(base or None, tensor, row offset, rows)],
        sel(p, r) = rows [a, b) of part p on rank r.  Returns items[r]."""
        tp = self.tp
        items = [dict() for _ in range(tp)]
        ws = [pt[1] for pt in parts]
        dt = self.same_dtype(*ws)
        rest = ws[0].shape[1:]
        for w in ws:
            if w.shape[1:] != rest:
                raise RefError("fused tensors differ beyond dimension 0: %s" %
                               ", ".join("%s %s" % (w.name, w.shape) for w in ws))
        for r in range(tp):
            pieces, rows = [], 0
            for p, (_b, w, off, _n) in enumerate(parts):
                a, b = sel(p, r)
                pieces.append(self.rows_piece(w, off + a, off + b))
                rows += b - a
            items[r][out] = (dt, [rows] + rest, pieces)
        cols = numel(rest)
        for suffix, ts in self.scales([pt[0] for pt in parts]).items():
            name = scale_output_name(out, suffix)
            sdt = ts[0].dtype
            if suffix == ".weight_scale_inv":
                Bn, Bk = self.block_size()
                for (_b, w, _o, n), t in zip(parts, ts):
                    if t.shape != [ceil_div(n, Bn), ceil_div(cols, Bk)]:
                        raise RefError("%s has shape %s, %s%s with blocks %dx%d needs %s" % (
                            t.name, t.shape, w.name, [n] + rest, Bn, Bk,
                            [ceil_div(n, Bn), ceil_div(cols, Bk)]))
                for r in range(tp):
                    pieces, rows = [], 0
                    for p, ((_b, w, _o, n), t) in enumerate(zip(parts, ts)):
                        a, b = sel(p, r)
                        ba, bb = self.block_range("%s rank %d" % (w.name, r), a, b, n, Bn)
                        pieces.append(self.rows_piece(t, ba, bb))
                        rows += bb - ba
                    items[r][name] = (sdt, [rows, ceil_div(cols, Bk)], pieces)
            elif all(numel(t.shape) == 1 for t in ts):
                # per-tensor: one element per fused part
                for r in range(tp):
                    items[r][name] = (sdt, [len(ts)], [self.whole(t) for t in ts])
            elif all(t.shape == [n, 1] for (_b, _w, _o, n), t in zip(parts, ts)):
                # per-channel: cut and fused like the weight rows
                for r in range(tp):
                    pieces, rows = [], 0
                    for p, t in enumerate(ts):
                        a, b = sel(p, r)
                        pieces.append(self.rows_piece(t, a, b))
                        rows += b - a
                    items[r][name] = (sdt, [rows, 1], pieces)
            else:
                raise RefError("scales %s: shapes %s are neither per-tensor nor [rows, 1]" % (
                    ", ".join(t.name for t in ts), [t.shape for t in ts]))
        return items

    def col_split(self, out, base, w):
        """A column-split output (o_proj, down_proj, w2)."""
        tp = self.tp
        rows, C = w.shape
        self.divisible("%s columns" % w.name, C, tp)
        cr = C // tp
        items = [dict() for _ in range(tp)]
        for r in range(tp):
            items[r][out] = (w.dtype, [rows, cr], [("copy", w.name, 0, rows, r * cr, (r + 1) * cr)])
        for suffix, (t,) in self.scales([base]).items():
            name = scale_output_name(out, suffix)
            if suffix == ".weight_scale_inv":
                Bn, Bk = self.block_size()
                if t.shape != [ceil_div(rows, Bn), ceil_div(C, Bk)]:
                    raise RefError("%s has shape %s, %s%s with blocks %dx%d needs %s" % (
                        t.name, t.shape, w.name, w.shape, Bn, Bk,
                        [ceil_div(rows, Bn), ceil_div(C, Bk)]))
                for r in range(tp):
                    ca, cb = self.block_range("%s rank %d columns" % (w.name, r),
                                              r * cr, (r + 1) * cr, C, Bk)
                    items[r][name] = (t.dtype, [t.rows, cb - ca],
                                      [("copy", t.name, 0, t.rows, ca, cb)])
            else:
                # per-tensor and per-channel (output rows) scales: whole
                for r in range(tp):
                    items[r][name] = (t.dtype, scale_shape(t), [self.whole(t)])
        return items

    def replicated(self, out, base, w):
        items = [dict() for _ in range(self.tp)]
        for r in range(self.tp):
            items[r][out] = (w.dtype, list(w.shape), [self.whole(w)])
        for suffix, (t,) in self.scales([base]).items():
            for r in range(self.tp):
                items[r][scale_output_name(out, suffix)] = (t.dtype, scale_shape(t), [self.whole(t)])
        return items

    def stack(self, experts, flat_scalars=()):
        """Stacks per-expert items along a new dimension 0.  Outputs named in
        flat_scalars hold one value per expert: [E] (vLLM's per-tensor w2
        scales and w13/w2 input scales)."""
        tp, E = self.tp, len(experts)
        items = [dict() for _ in range(tp)]
        for r in range(tp):
            names = sorted(experts[0][r])
            for e in range(1, E):
                if sorted(experts[e][r]) != names:
                    raise RefError("expert %d has outputs %s, expert 0 %s" % (
                        e, sorted(experts[e][r]), names))
            for name in names:
                dt, shape, _ = experts[0][r][name]
                pieces = []
                for e in range(E):
                    d2, s2, p2 = experts[e][r][name]
                    if (d2, s2) != (dt, shape):
                        raise RefError("%s: expert %d is %s%s, expert 0 %s%s" % (name, e, d2, s2, dt, shape))
                    pieces.extend(p2)
                if name in flat_scalars:
                    if numel(shape) != 1:
                        raise RefError("%s: %s%s is not one value per expert" % (name, dt, shape))
                    items[r][name] = (dt, [E], pieces)
                else:
                    items[r][name] = (dt, [E] + shape, pieces)
        return items

    # -- rules
    def _build(self):
        cfg, src, tp = self.src.config, self.src, self.tp
        archs = cfg.get("architectures") or [None]
        arch = archs[0]
        if arch not in ARCHS:
            raise RefError("architecture %r has no reference rules" % arch)
        family, tie_default = ARCHS[arch]
        self.arch = arch
        H = self.cfg_int("hidden_size")
        nh = self.cfg_int("num_attention_heads")
        kv = self.cfg_int("num_key_value_heads", nh)
        if "head_dim" in cfg and cfg["head_dim"] is not None:
            hd = self.cfg_int("head_dim")
        else:
            self.divisible("hidden_size", H, nh, "num_attention_heads %d" % nh)
            hd = H // nh
        V = self.cfg_int("vocab_size")
        tie = cfg.get("tie_word_embeddings")
        if tie is None:
            tie = tie_default
        self.divisible("num_attention_heads", nh, tp)
        if tp <= kv:
            self.divisible("num_key_value_heads", kv, tp)
        elif tp % kv:
            raise RefError("--tp %d is not divisible by num_key_value_heads=%d" % (tp, kv))
        self.divisible("vocab_size (padded to %d)" % round_up(V, 64), round_up(V, 64), tp)
        moe = family in ("mixtral", "qwen2_moe", "qwen3_moe")
        if family == "mixtral":
            E = self.cfg_int("num_local_experts")
            EI = self.cfg_int("intermediate_size")
        elif moe:
            E = self.cfg_int("num_experts")
            EI = self.cfg_int("moe_intermediate_size")
        if moe:
            self.divisible("moe_intermediate_size" if family != "mixtral" else "intermediate_size",
                           EI, tp)

        # embeddings, final norm, lm head
        embed = self.get("model.embed_tokens.weight", [V, H])
        lm = self.get("lm_head.weight", [V, H], optional=True)
        # vLLM 0.32 loads a shipped head untied where config.json ties it
        # (Gemma's code ties whatever the config says), and ties them again
        # only where the bytes are the same
        if (tie and lm is not None and family not in ("gemma", "gemma2") and
                (lm.dtype != embed.dtype or not np.array_equal(lm.flat, embed.flat))):
            tie = False
            self.untied = True
        if tie:
            if family == "gemma2":
                # vLLM 0.32's Gemma2 has no lm_head module; its Gemma has
                # one tied to the embedding, kept as lm_head.weight
                self.vocab_parallel("model.embed_tokens.weight", embed)
            else:
                self.vocab_parallel("lm_head.weight", embed)
            # a tied checkpoint that still carries lm_head.weight: skipped
        else:
            self.vocab_parallel("model.embed_tokens.weight", embed)
            if lm is None:
                raise RefError("source: lm_head.weight is missing (tie_word_embeddings is false)")
            self.vocab_parallel("lm_head.weight", lm)
        self.replicate("model.norm.weight", self.get("model.norm.weight", [H]))

        layers = sorted({int(m.group(1)) for m in
                         (re.match(r"^model\.layers\.(\d+)\.", n) for n in src.tensors) if m})
        L = cfg.get("num_hidden_layers")
        if isinstance(L, int) and layers != list(range(L)):
            missing = sorted(set(range(L)) - set(layers))
            extra = sorted(set(layers) - set(range(L)))
            raise RefError("source: num_hidden_layers=%d but %s" % (L, "; ".join(
                (["no tensors for layer(s) %s" % missing] if missing else []) +
                (["tensors for layer(s) %s" % extra] if extra else []))))
        qr = nh * hd // tp

        def qkv_sel(p, r):
            if p == 0:
                return r * qr, (r + 1) * qr
            if tp <= kv:
                kr = kv * hd // tp
                return r * kr, (r + 1) * kr
            h = r // (tp // kv)
            return h * hd, (h + 1) * hd

        def mlp(out, gate_base, up_base, down_base, I):
            """A dense gate/up/down MLP (also the shared expert)."""
            self.divisible(out + " rows", I, tp)
            ir = I // tp
            tg = self.get(gate_base + ".weight", [I, H])
            tu = self.get(up_base + ".weight", [I, H])
            self.emit(self.fused(out + ".gate_up_proj.weight",
                                 [(gate_base, tg, 0, I), (up_base, tu, 0, I)],
                                 lambda _p, r: (r * ir, (r + 1) * ir)))
            d = self.get(down_base + ".weight", [H, I])
            self.emit(self.col_split(out + ".down_proj.weight", down_base, d))

        def experts(prefix, out, n1, n3, n2, I):
            """Stacked experts: w13_weight [E, 2I/tp, H], w2_weight [E, H, I/tp]."""
            ir = I // tp
            w13, w2 = [], []
            for e in range(E):
                q = "%s.%d." % (prefix, e)
                t1 = self.get(q + n1 + ".weight", [I, H])
                t3 = self.get(q + n3 + ".weight", [I, H])
                w13.append(self.fused(out + ".w13_weight",
                                      [(q + n1, t1, 0, I), (q + n3, t3, 0, I)],
                                      lambda _p, r: (r * ir, (r + 1) * ir)))
                t2 = self.get(q + n2 + ".weight", [H, I])
                w2.append(self.col_split(out + ".w2_weight", q + n2, t2))
            # vLLM: one input scale per expert (w1's and w3's must be equal),
            # per-tensor w2 weight scales one value per expert
            in13 = out + ".w13_input_scale"
            for r in range(tp):
                for it in w13:
                    if in13 in it[r]:
                        dt, _s, pieces = it[r][in13]
                        a, b = (materialize(src, dt, [pc]) for pc in pieces)
                        if a.tobytes() != b.tobytes():
                            raise RefError("%s: the input scales of %s and %s differ; vLLM "
                                           "needs them equal" % (in13, pieces[0][1], pieces[1][1]))
                        it[r][in13] = (dt, [], pieces[:1])
            self.emit(self.stack(w13, flat_scalars=(in13,)))
            flat2 = [out + ".w2_input_scale"]
            if w2 and numel(w2[0][0].get(out + ".w2_weight_scale", (0, [2], 0))[1]) == 1:
                flat2.append(out + ".w2_weight_scale")
            self.emit(self.stack(w2, flat_scalars=flat2))

        for i in layers:
            p = "model.layers.%d." % i
            norms = ["input_layernorm.weight", "post_attention_layernorm.weight"]
            if family in ("gemma2", "gemma3"):
                norms += ["pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight"]
            for nm in norms:
                self.replicate(p + nm, self.get(p + nm, [H]))
            if family in ("qwen3", "qwen3_moe", "gemma3"):
                for nm in ("self_attn.q_norm.weight", "self_attn.k_norm.weight"):
                    self.replicate(p + nm, self.get(p + nm, [hd]))

            # q/k/v
            if family == "phi3":
                qkv = self.get(p + "self_attn.qkv_proj.weight", [(nh + 2 * kv) * hd, H])
                parts = [(None, qkv, 0, nh * hd), (None, qkv, nh * hd, kv * hd),
                         (None, qkv, (nh + kv) * hd, kv * hd)]
            else:
                a = p + "self_attn."
                parts = [(a + "q_proj", self.get(a + "q_proj.weight", [nh * hd, H]), 0, nh * hd),
                         (a + "k_proj", self.get(a + "k_proj.weight", [kv * hd, H]), 0, kv * hd),
                         (a + "v_proj", self.get(a + "v_proj.weight", [kv * hd, H]), 0, kv * hd)]
            self.emit(self.fused(p + "self_attn.qkv_proj.weight", parts, qkv_sel))
            if family in ("qwen2", "qwen2_moe"):
                a = p + "self_attn."
                bparts = [(None, self.get(a + "q_proj.bias", [nh * hd]), 0, nh * hd),
                          (None, self.get(a + "k_proj.bias", [kv * hd]), 0, kv * hd),
                          (None, self.get(a + "v_proj.bias", [kv * hd]), 0, kv * hd)]
                self.emit(self.fused(p + "self_attn.qkv_proj.bias", bparts, qkv_sel))
            o = self.get(p + "self_attn.o_proj.weight", [H, nh * hd])
            self.emit(self.col_split(p + "self_attn.o_proj.weight", p + "self_attn.o_proj", o))
            if p + "self_attn.rotary_emb.inv_freq" in src.tensors:
                self.get(p + "self_attn.rotary_emb.inv_freq", [hd // 2])

            # MLP
            if family == "phi3":
                I = self.cfg_int("intermediate_size")
                self.divisible("intermediate_size", I, tp)
                ir = I // tp
                gu = self.get(p + "mlp.gate_up_proj.weight", [2 * I, H])
                self.emit(self.fused(p + "mlp.gate_up_proj.weight",
                                     [(None, gu, 0, I), (None, gu, I, I)],
                                     lambda _p, r: (r * ir, (r + 1) * ir)))
                d = self.get(p + "mlp.down_proj.weight", [H, I])
                self.emit(self.col_split(p + "mlp.down_proj.weight", None, d))
            elif family == "mixtral":
                g = p + "block_sparse_moe.gate"
                self.emit(self.replicated(g + ".weight", g, self.get(g + ".weight", [E, H])))
                experts(p + "block_sparse_moe.experts",
                        p + "block_sparse_moe.experts.routed_experts", "w1", "w3", "w2", EI)
            elif moe and self.sparse_layer(i):
                # vLLM 0.32 keeps Qwen3-MoE's router inside the experts
                # module, Qwen2-MoE's beside it
                g = p + "mlp.gate"
                gout = p + ("mlp.experts.gate" if family == "qwen3_moe" else "mlp.gate")
                self.emit(self.replicated(gout + ".weight", g, self.get(g + ".weight", [E, H])))
                experts(p + "mlp.experts", p + "mlp.experts.routed_experts",
                        "gate_proj", "up_proj", "down_proj", EI)
                if family == "qwen2_moe":
                    SI = self.cfg_int("shared_expert_intermediate_size")
                    se = p + "mlp.shared_expert"
                    so = p + "mlp.experts._shared_experts._layer"
                    mlp(so, se + ".gate_proj", se + ".up_proj", se + ".down_proj", SI)
                    sg = p + "mlp.shared_expert_gate"
                    self.emit(self.replicated(so + ".expert_gate.weight", sg,
                                              self.get(sg + ".weight", [1, H])))
            else:
                I = self.cfg_int("intermediate_size")
                self.divisible("intermediate_size", I, tp)
                m = p + "mlp"
                mlp(m, m + ".gate_proj", m + ".up_proj", m + ".down_proj", I)

            if self.attn_scales:
                for s in ("_k_scale", "_v_scale", "_q_scale", "_prob_scale"):
                    for r in range(tp):
                        self.put(r, p + "self_attn.attn." + s, "F32", [], [("value", 1.0)],
                                 convert=False)
            # vLLM's quantized attention (FP8 config) holds its own k/v/q/prob
            # scales, -1.0 ("not loaded") in the model's dtype
            if isinstance(cfg.get("quantization_config"), dict):
                mdt = self.dtype or {"float16": "F16", "float32": "F32"}.get(
                    cfg.get("torch_dtype", cfg.get("dtype")), "BF16")
                for s in ("k_scale", "v_scale", "q_scale", "prob_scale"):
                    for r in range(tp):
                        self.put(r, p + "self_attn.attn." + s, mdt, [], [("value", -1.0)],
                                 convert=False)

        # a tied checkpoint that still carries lm_head.weight: skipped
        if tie and lm is not None:
            self.consumed.add("lm_head.weight")
        left = sorted(set(src.tensors) - self.consumed)
        if left:
            raise RefError("source tensors no rule covers: %s" % ", ".join(left))

    def sparse_layer(self, i):
        """Qwen MoE: is layer i a mixture of experts (HF's rule)?"""
        cfg = self.src.config
        only = cfg.get("mlp_only_layers") or []
        step = cfg.get("decoder_sparse_step", 1) or 1
        return i not in only and cfg.get("num_experts", 0) > 0 and (i + 1) % step == 0


# ---------------------------------------------------------------- checking


class Crc64:
    """CRC-64/NVME with hashlib's interface (awscrt's implementation)."""

    def __init__(self):
        self.crc = 0

    def update(self, data):
        self.crc = awscrt_checksums.crc64nvme(data, self.crc)

    def hexdigest(self):
        return "%016x" % self.crc


def new_hash(algo):
    if algo == "crc64-nvme":
        return Crc64()
    if algo == "xxh3-64":
        return xxhash.xxh3_64()
    if algo == "sha256":
        return hashlib.sha256()
    raise ValueError(algo)


def hexdigest(algo, data):
    h = new_hash(algo)
    h.update(data)
    return h.hexdigest()


def file_digest(algo, path):
    h = new_hash(algo)
    with open(path, "rb") as f:
        while True:
            b = f.read(16 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def first_diff(a, b):
    n = min(len(a), len(b))
    ne = np.flatnonzero(a[:n] != b[:n])
    if len(ne):
        return int(ne[0])
    return n if len(a) != len(b) else -1


def expected_config(src, dtype, untied=False):
    cfg = dict(src.config)
    if dtype:
        cfg["torch_dtype"] = TORCH_DTYPE[dtype]
    if untied:
        cfg["tie_word_embeddings"] = False
    return cfg


class Checker:
    def __init__(self, src, out, exp, max_file_size=None, checksum=None):
        self.src, self.out, self.exp = src, out, exp
        self.max_file_size = max_file_size
        self.checksum = checksum
        self.diffs = []
        self.ntensors = 0
        self.actual = [dict() for _ in range(exp.tp)]  # name -> (file, hdr entry, bytes)
        self.files = [[] for _ in range(exp.tp)]  # [(name, size, [tensor names])]

    def diff(self, msg):
        self.diffs.append(msg)
        print(msg)

    def run(self):
        tp = self.exp.tp
        if not os.path.isdir(self.out):
            self.diff("%s: not a directory" % self.out)
            return
        present = set(os.listdir(self.out))
        parts = {}
        for fn in present:
            m = RANK_FILE.match(fn)
            if m:
                parts.setdefault(int(m.group(1)), []).append(int(m.group(2)))
        for r in sorted(parts):
            if r >= tp:
                self.diff("rank %d: files for a rank outside --tp %d: %s" % (
                    r, tp, ", ".join("model-rank-%d-part-%d.safetensors" % (r, p)
                                     for p in sorted(parts[r]))))
        expected_names = set()
        for r in range(tp):
            ps = sorted(parts.get(r, []))
            if not ps:
                self.diff("rank %d: no model-rank-%d-part-0.safetensors" % (r, r))
                continue
            if ps != list(range(len(ps))):
                self.diff("rank %d: parts are %s, expected 0..%d" % (r, ps, len(ps) - 1))
            for p in ps:
                fn = "model-rank-%d-part-%d.safetensors" % (r, p)
                expected_names.add(fn)
                self.read_part(r, fn)
        for r in range(tp):
            self.compare_rank(r)
            self.check_packing(r)
        copied = self.src.copied_files()
        for fn in copied:
            sp, op = os.path.join(self.src.dir, fn), os.path.join(self.out, fn)
            if not os.path.exists(op):
                self.diff("%s: not copied" % fn)
            elif fn == "config.json" and (self.exp.dtype or self.exp.untied):
                self.check_config(op)
            else:
                with open(sp, "rb") as a, open(op, "rb") as b:
                    if a.read() != b.read():
                        self.diff("%s: copy differs from the source" % fn)
        for fn in sorted(present - expected_names - set(copied) - {MANIFEST}):
            sp = os.path.join(self.src.dir, fn)
            if fn.startswith(".") and os.path.isfile(sp) and not fn.endswith(WEIGHT_SUFFIXES):
                # a hidden source file may be copied, but then unchanged
                with open(sp, "rb") as a, open(os.path.join(self.out, fn), "rb") as b:
                    if a.read() != b.read():
                        self.diff("%s: copy differs from the source" % fn)
                continue
            if fn in self.src.weight_files or fn == INDEX_NAME:
                self.diff("%s: copied from the source, must not be" % fn)
            elif not RANK_FILE.match(fn) or int(RANK_FILE.match(fn).group(1)) < tp:
                self.diff("%s: unexpected file in the output" % fn)
        if MANIFEST not in present:
            self.diff("%s: missing" % MANIFEST)
        else:
            self.check_manifest(copied)

    def check_config(self, path):
        """With --dtype, or a shipped head untied: the source's config.json
        with torch_dtype, or tie_word_embeddings, updated."""
        try:
            with open(path) as f:
                got = json.load(f)
        except ValueError as e:
            self.diff("config.json: not JSON: %s" % e)
            return
        want = expected_config(self.src, self.exp.dtype, self.exp.untied)
        if not isinstance(got, dict):
            self.diff("config.json: not an object")
            return
        for k in sorted(set(want) | set(got)):
            if k not in got:
                self.diff("config.json: %s missing" % k)
            elif k not in want:
                self.diff("config.json: %s added" % k)
            elif got[k] != want[k]:
                self.diff("config.json: %s is %s, expected %s" % (
                    k, json.dumps(got[k])[:200], json.dumps(want[k])[:200]))

    def read_part(self, r, fn):
        path = os.path.join(self.out, fn)
        n, meta, tensors, problems = parse_safetensors(path, strict_writer=True)
        for pr in problems:
            self.diff("rank %d: %s: %s" % (r, fn, pr))
        if meta.get("format") != "pt":
            self.diff("rank %d: %s: __metadata__ has format %r, expected \"pt\"" %
                      (r, fn, meta.get("format")))
        if not tensors and not problems:
            self.diff("rank %d: %s: empty part" % (r, fn))
        size = os.path.getsize(path)
        data_len = size - 8 - n
        if (self.max_file_size is not None and len(tensors) > 1 and data_len > self.max_file_size):
            self.diff("rank %d: %s: %d data bytes in %d tensors, over --max-file-size %d" %
                      (r, fn, data_len, len(tensors), self.max_file_size))
        blob = (np.memmap(path, dtype=np.uint8, mode="r") if size
                else np.zeros(0, dtype=np.uint8))
        # the official reader must accept the file and agree with ours: all of
        # it for files up to OFFICIAL_MAX bytes, else the names and metadata
        official = None
        if safetensors is not None and hasattr(safetensors, "deserialize") and size <= OFFICIAL_MAX:
            try:
                official = {k: v for k, v in safetensors.deserialize(blob.tobytes())}
            except Exception as e:  # noqa: BLE001 - any rejection is a difference
                self.diff("rank %d: %s: the safetensors package rejects it: %s" % (r, fn, e))
        elif safetensors is not None:
            try:
                from safetensors import safe_open
                with safe_open(path, framework="numpy") as f:
                    if sorted(f.keys()) != sorted(tensors) or (f.metadata() or {}) != meta:
                        self.diff("rank %d: %s: the safetensors package reads other names "
                                  "or metadata" % (r, fn))
            except Exception as e:  # noqa: BLE001 - any rejection is a difference
                self.diff("rank %d: %s: the safetensors package rejects it: %s" % (r, fn, e))
        names = []
        for name, t in sorted(tensors.items(), key=lambda kv: kv[1]["begin"]):
            data = blob[8 + n + t["begin"]:8 + n + t["end"]] if 8 + n + t["end"] <= size else None
            if data is None:
                continue
            if official is not None:
                o = official.get(name)
                if o is None:
                    self.diff("rank %d: %s: %s missing in the safetensors package's view" % (r, fn, name))
                elif (o["dtype"].upper() != t["dtype"].upper() or list(o["shape"]) != t["shape"]
                      or bytes(o["data"]) != data.tobytes()):
                    self.diff("rank %d: %s: %s: the safetensors package reads it differently" % (r, fn, name))
            if name in self.actual[r]:
                self.diff("rank %d: %s in both %s and %s" % (r, name, self.actual[r][name][0], fn))
                continue
            self.actual[r][name] = (fn, t, data)
            names.append(name)
        self.files[r].append((fn, size, names))

    def check_packing(self, r):
        """A new part starts only when the next tensor would take the part's
        data past --max-file-size (data bytes, headers not counted)."""
        if self.max_file_size is None:
            return
        files = self.files[r]
        for (fn, _s, names), (fn2, _s2, names2) in zip(files, files[1:]):
            if not names or not names2:
                continue
            data = sum(len(self.actual[r][n][2]) for n in names)
            first = len(self.actual[r][names2[0]][2])
            if data + first <= self.max_file_size:
                self.diff("rank %d: %s starts with %s (%d bytes) although it fits in %s "
                          "(%d data bytes, --max-file-size %d)" %
                          (r, fn2, names2[0], first, fn, data, self.max_file_size))

    def compare_rank(self, r):
        exp, act = self.exp.ranks[r], self.actual[r]
        for name in sorted(set(exp) - set(act)):
            self.diff("rank %d: %s: missing" % (r, name))
        for name in sorted(set(act) - set(exp)):
            self.diff("rank %d: %s: not expected (in %s)" % (r, name, act[name][0]))
        for name in sorted(set(exp) & set(act)):
            self.ntensors += 1
            dt, shape, pieces, frm = exp[name]
            fn, t, data = act[name]
            if t["dtype"] != dt:
                self.diff("rank %d: %s: dtype %s, expected %s%s" % (
                    r, name, t["dtype"], dt, " (converted from %s)" % frm if frm != dt else ""))
                continue
            if t["shape"] != shape:
                self.diff("rank %d: %s: shape %s, expected %s" % (r, name, t["shape"], shape))
                continue
            want = expected_bytes(self.src, exp[name])
            if frm != dt:
                # converted: value by value, any NaN matching any NaN
                i = first_value_diff(data, want, dt)
                if i >= 0:
                    raw = materialize(self.src, frm, pieces)
                    nbad = int(np.count_nonzero(
                        (np.ascontiguousarray(data).view("<u%d" % (BITS[dt] // 8)) !=
                         want.view("<u%d" % (BITS[dt] // 8))) &
                        ~(nan_mask(np.ascontiguousarray(data), dt) & nan_mask(want, dt))))
                    self.diff("rank %d: %s: %d value(s) differ; first at element %d: %s %s "
                              "converts to %s, got %s" % (
                                  r, name, nbad, i, frm, element_hex(raw, frm, i),
                                  element_hex(want, dt, i), element_hex(data, dt, i)))
                continue
            i = first_diff(data, want)
            if i >= 0:
                self.diff("rank %d: %s: bytes differ at element %d (byte %d)" %
                          (r, name, i * 8 // BITS[dt], i))

    # -- manifest
    def check_manifest(self, copied):
        path = os.path.join(self.out, MANIFEST)
        try:
            with open(path) as f:
                m = json.load(f)
        except ValueError as e:
            self.diff("%s: not JSON: %s" % (MANIFEST, e))
            return
        W = MANIFEST

        def want(obj, key, pred, what, where=W):
            if not isinstance(obj, dict) or key not in obj:
                self.diff("%s: no %s" % (where, key))
                return None
            v = obj[key]
            if not pred(v):
                self.diff("%s: %s is %s, expected %s" % (where, key, json.dumps(v), what))
            return v

        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)

        if not isinstance(m, dict):
            self.diff("%s: not an object" % W)
            return
        tp = self.exp.tp
        want(m, "format", lambda v: v == "wshard", '"wshard"')
        want(m, "format_version", lambda v: v == 2, "2")
        want(m, "wshard_version", lambda v: isinstance(v, str) and v, "a version string")
        want(m, "target", lambda v: v == "vllm@0.32", '"vllm@0.32"')
        want(m, "tp", lambda v: v == tp, str(tp))
        want(m, "architecture", lambda v: v == self.exp.arch, json.dumps(self.exp.arch))
        want(m, "rules", lambda v: isinstance(v, str) and v, "a string")
        opts = want(m, "options", lambda v: isinstance(v, dict), "an object") or {}
        want(opts, "attn_scales", lambda v: v is self.exp.attn_scales,
             json.dumps(self.exp.attn_scales), W + ": options")
        if self.exp.dtype:
            want(opts, "dtype", lambda v: isinstance(v, str) and v.upper() == self.exp.dtype,
                 json.dumps(self.exp.dtype), W + ": options")
        elif "dtype" in opts and opts["dtype"] is not None:
            self.diff("%s: options: dtype is %s without --dtype, expected null" %
                      (W, json.dumps(opts["dtype"])))
        if self.max_file_size is not None:
            want(opts, "max_file_size", lambda v: v == self.max_file_size,
                 str(self.max_file_size), W + ": options")
        else:
            want(opts, "max_file_size", lambda v: is_int(v) and v > 0, "a size", W + ": options")
        if self.checksum:
            algo = want(opts, "checksum", lambda v: v == self.checksum,
                        json.dumps(self.checksum), W + ": options")
        else:
            algo = want(opts, "checksum", lambda v: v in ALGOS,
                        " or ".join(json.dumps(a) for a in ALGOS), W + ": options")
        if algo not in ALGOS:
            algo = ALGOS[0]
        source = want(m, "source", lambda v: isinstance(v, dict), "an object") or {}
        want(source, "path", lambda v: isinstance(v, str) and (
            v == self.src.path or os.path.realpath(v) == os.path.realpath(self.src.path)),
            json.dumps(self.src.path), W + ": source")
        total = sum(t.nbytes for t in self.src.tensors.values())
        want(source, "tensor_bytes", lambda v: v == total, str(total), W + ": source")
        sfiles = want(source, "files", lambda v: isinstance(v, list), "a list", W + ": source") or []
        listed = {}
        for e in sfiles:
            if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not is_int(e.get("size")):
                self.diff("%s: source.files: bad entry %s" % (W, json.dumps(e)))
                continue
            listed[e["name"]] = e["size"]
            fp = os.path.join(self.src.dir, e["name"])
            if not os.path.isfile(fp):
                self.diff("%s: source.files: %s is not in the source" % (W, e["name"]))
            elif os.path.getsize(fp) != e["size"]:
                self.diff("%s: source.files: %s size %d, actual %d" %
                          (W, e["name"], e["size"], os.path.getsize(fp)))
        for fn in self.src.weight_files:
            if fn not in listed:
                self.diff("%s: source.files: %s not listed" % (W, fn))
        cp = want(source, "copied", lambda v: isinstance(v, list), "a list", W + ": source")
        if isinstance(cp, list) and sorted(c for c in cp if not str(c).startswith(".")) != copied:
            self.diff("%s: source.copied is %s, expected %s" % (W, json.dumps(cp), json.dumps(copied)))
        want(m, "validation", lambda v: isinstance(v, dict), "an object")
        run = want(m, "run", lambda v: isinstance(v, dict), "an object") or {}
        procs = want(run, "processes", lambda v: is_int(v) and v >= 1, "a count", W + ": run")
        want(run, "bytes_read", lambda v: isinstance(v, list) and all(is_int(x) for x in v)
             and (not is_int(procs) or len(v) == procs), "a list of one count per process",
             W + ": run")

        ranks = want(m, "ranks", lambda v: isinstance(v, list) and len(v) == tp,
                     "a list of %d ranks" % tp)
        if not isinstance(ranks, list):
            return
        for r, rk in enumerate(ranks[:tp]):
            where = "%s: rank %d" % (W, r)
            if not isinstance(rk, dict):
                self.diff("%s: not an object" % where)
                continue
            want(rk, "rank", lambda v: v == r, str(r), where)
            nbytes = sum(len(d) for _f, _t, d in self.actual[r].values())
            want(rk, "bytes", lambda v: v == nbytes, str(nbytes), where)
            mfiles = want(rk, "files", lambda v: isinstance(v, list), "a list", where) or []
            actual_files = [(fn, size) for fn, size, _ in self.files[r]]
            got_files = [(e.get("name"), e.get("size")) if isinstance(e, dict) else (None, None)
                         for e in mfiles]
            if got_files != actual_files:
                self.diff("%s: files are %s, the directory has %s" %
                          (where, json.dumps(got_files), json.dumps(actual_files)))
            for e in mfiles:
                if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                    continue
                fp = os.path.join(self.out, e["name"])
                if os.path.isfile(fp) and e.get("checksum") != file_digest(algo, fp):
                    self.diff("%s: %s: file checksum %s, actual %s" %
                              (where, e["name"], e.get("checksum"), file_digest(algo, fp)))
            mt = want(rk, "tensors", lambda v: isinstance(v, list), "a list", where) or []
            seen = set()
            for e in mt:
                if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                    self.diff("%s: bad tensor entry %s" % (where, json.dumps(e)[:200]))
                    continue
                name = e["name"]
                tw = "%s: %s" % (where, name)
                if name in seen:
                    self.diff("%s: listed twice" % tw)
                seen.add(name)
                a = self.actual[r].get(name)
                if a is None:
                    self.diff("%s: listed but in no rank file" % tw)
                    continue
                fn, t, data = a
                want(e, "dtype", lambda v: v == t["dtype"], json.dumps(t["dtype"]), tw)
                want(e, "shape", lambda v: v == t["shape"], json.dumps(t["shape"]), tw)
                want(e, "file", lambda v: v == fn, json.dumps(fn), tw)
                want(e, "data_offsets", lambda v: v == [t["begin"], t["end"]],
                     json.dumps([t["begin"], t["end"]]), tw)
                want(e, "checksum", lambda v: v == hexdigest(algo, data.tobytes()),
                     json.dumps(hexdigest(algo, data.tobytes())), tw)
                srcs = want(e, "sources", lambda v: isinstance(v, list) and v, "a list", tw)
                if isinstance(srcs, list) and name in self.exp.ranks[r]:
                    self.check_sources(tw, srcs, self.exp.ranks[r][name])
            for name in sorted(set(self.actual[r]) - seen):
                self.diff("%s: %s: in %s but not in the manifest" % (where, name, self.actual[r][name][0]))

    def expand_runs(self, where, srcs):
        """The sources with each run {"e": [e0, e1], "sources": [...]} written
        out: its sources for e = e0 .. e1 - 1, "{e}" in a name replaced by e.
        None (after a diff) when a run is malformed."""
        out = []
        for i, s in enumerate(srcs):
            if not (isinstance(s, dict) and "e" in s):
                out.append(s)
                continue
            e, inner = s.get("e"), s.get("sources")
            if not (isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) for x in e)
                    and e[0] < e[1] and isinstance(inner, list) and inner
                    and all(isinstance(t, dict) and isinstance(t.get("tensor"), str)
                        and "{e}" in t["tensor"] for t in inner)
                    and set(s) == {"e", "sources"}):
                self.diff("%s: sources[%d] is not a run: %s" % (where, i, json.dumps(s)[:200]))
                return None
            for k in range(e[0], e[1]):
                for t in inner:
                    c = dict(t)
                    c["tensor"] = t["tensor"].replace("{e}", str(k))
                    out.append(c)
        return out

    def check_sources(self, where, srcs, expected):
        """The provenance must rebuild the expected bytes from the source."""
        dt, shape, pieces, frm = expected
        srcs = self.expand_runs(where, srcs)
        if srcs is None:
            return
        want = expected_bytes(self.src, expected)
        total = len(want)
        parts, done = [], 0
        for i, s in enumerate(srcs):
            if not isinstance(s, dict):
                self.diff("%s: sources[%d] is not an object" % (where, i))
                return
            if "tensor" in s:
                t = self.src.tensors.get(s["tensor"])
                if t is None:
                    self.diff("%s: sources[%d]: %s is not a source tensor" % (where, i, s["tensor"]))
                    return
                rows = s.get("rows", [0, t.rows])
                cols = s.get("cols", [0, t.width])
                ok = (isinstance(rows, list) and isinstance(cols, list) and len(rows) == 2
                      and len(cols) == 2 and 0 <= rows[0] <= rows[1] <= t.rows
                      and 0 <= cols[0] <= cols[1] <= t.width)
                if not ok:
                    self.diff("%s: sources[%d]: bad rows %s / cols %s of %s%s" %
                              (where, i, rows, cols, t.name, t.shape))
                    return
                b = piece_bytes(self.src, dt, ("copy", t.name, rows[0], rows[1], cols[0], cols[1]))
                if frm != dt:
                    if t.dtype != frm:
                        self.diff("%s: sources[%d]: %s is %s, the tensor was converted from %s" %
                                  (where, i, t.name, t.dtype, frm))
                        return
                    b = convert_bytes(b, frm, dt)
            elif "zeros" in s:  # output bytes
                b = np.zeros(s["zeros"], dtype=np.uint8)
            elif "value" in s:
                one = np.frombuffer(value_bytes(dt, s["value"]), dtype=np.uint8)
                # a constant fills the rest of the tensor when it is the last source
                reps = max(1, (total - done) // len(one)) if i == len(srcs) - 1 else 1
                b = np.tile(one, reps)
            else:
                self.diff("%s: sources[%d]: unknown kind %s" % (where, i, json.dumps(s)))
                return
            parts.append(b)
            done += len(b)
        got = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
        i = first_value_diff(got, want, dt) if frm != dt else first_diff(got, want)
        if i >= 0 and frm != dt:
            i = i * BITS[dt] // 8
        if i >= 0:
            self.diff("%s: sources do not rebuild the tensor (first difference at byte %d; "
                      "rebuilt %d bytes of %d)" % (where, i, len(got), total))


# ---------------------------------------------------------------- writing


def parse_size(s):
    m = re.match(r"^\s*(\d+)\s*([KMGT]?)(I?B?)\s*$", s.upper())
    if not m:
        raise argparse.ArgumentTypeError("bad size %r" % s)
    n, unit, suffix = int(m.group(1)), m.group(2), m.group(3)
    if unit and suffix == "B":
        mult = 1000 ** " KMGT".index(unit)
    else:
        mult = 1024 ** " KMGT".index(unit) if unit else 1
    return n * mult


def write_output(src, out, exp, max_file_size):
    """Writes the expected output: used to test `check` itself."""
    os.makedirs(out, exist_ok=True)
    ranks = []
    for r in range(exp.tp):
        names = sorted(exp.ranks[r])
        groups, cur, acc = [], [], 0
        for name in names:
            dt, shape, _, _ = exp.ranks[r][name]
            nb = tensor_nbytes(dt, shape)
            if cur and acc + nb > max_file_size:
                groups.append(cur)
                cur, acc = [], 0
            cur.append(name)
            acc += nb
        if cur:
            groups.append(cur)
        rfiles, rtensors, rbytes = [], [], 0
        for p, group in enumerate(groups):
            fn = "model-rank-%d-part-%d.safetensors" % (r, p)
            header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
            for name in group:
                dt, shape, pieces, _ = exp.ranks[r][name]
                data = expected_bytes(src, exp.ranks[r][name]).tobytes()
                header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
                blobs.append((name, data, off))
                off += len(data)
            h = json.dumps(header, separators=(",", ":")).encode()
            h += b" " * (-len(h) % 8)
            blob = struct.pack("<Q", len(h)) + h + b"".join(d for _, d, _ in blobs)
            with open(os.path.join(out, fn), "wb") as f:
                f.write(blob)
            rfiles.append({"name": fn, "size": len(blob), "checksum": hexdigest(ALGOS[0], blob)})
            for name, data, o in blobs:
                dt, shape, pieces, frm = exp.ranks[r][name]
                srcs = []
                for pc in pieces:
                    if pc[0] == "copy":
                        srcs.append({"tensor": pc[1], "rows": [pc[2], pc[3]], "cols": [pc[4], pc[5]]})
                    elif pc[0] == "zeros":  # output bytes
                        srcs.append({"zeros": pc[1] * BITS[dt] // BITS[frm]})
                    else:
                        srcs.append({"value": pc[1]})
                rtensors.append({"name": name, "dtype": dt, "shape": shape, "file": fn,
                                 "data_offsets": [o, o + len(data)],
                                 "checksum": hexdigest(ALGOS[0], data), "sources": srcs})
                rbytes += len(data)
        ranks.append({"rank": r, "bytes": rbytes, "files": rfiles, "tensors": rtensors})
    copied = src.copied_files()
    for fn in copied:
        with open(os.path.join(src.dir, fn), "rb") as a, open(os.path.join(out, fn), "wb") as b:
            if fn == "config.json" and (exp.dtype or exp.untied):
                b.write((json.dumps(expected_config(src, exp.dtype, exp.untied), indent=2) + "\n").encode())
            else:
                b.write(a.read())
    total = sum(t.nbytes for t in src.tensors.values())
    manifest = {
        "format": "wshard", "format_version": 2, "wshard_version": "reference",
        "target": "vllm@0.32", "target_checked": "vllm==0.32.0", "tp": exp.tp, "architecture": exp.arch, "rules": "reference",
        "options": {"attn_scales": exp.attn_scales, "max_file_size": max_file_size,
                    "dtype": exp.dtype, "checksum": ALGOS[0]},
        "source": {"path": src.path, "tensor_bytes": total,
                   "files": [{"name": fn, "size": os.path.getsize(os.path.join(src.dir, fn))}
                             for fn in src.weight_files],
                   "copied": copied},
        "validation": {"mode": "off", "backend": "off"},
        "ranks": ranks,
        "run": {"processes": 1, "bytes_read": [total]},
    }
    with open(os.path.join(out, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description="independent reference for wshard's output contract")
    ap.add_argument("cmd", choices=["check", "write", "expect"])
    ap.add_argument("src")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--tp", type=int, required=True)
    ap.add_argument("--no-attn-scales", action="store_true")
    ap.add_argument("--max-file-size", type=parse_size)
    ap.add_argument("--checksum", choices=list(ALGOS),
                    help="the algorithm the manifest must use (default: any)")
    ap.add_argument("--dtype", choices=sorted(DTYPE_OPT),
                    help="F32/F16/BF16 outputs converted to this dtype")
    # wshard convert options that do not change the output, accepted so
    # that a test can pass the same options to both
    ap.add_argument("--max-memory", help=argparse.SUPPRESS)
    ap.add_argument("--validate", help=argparse.SUPPRESS)
    ap.add_argument("-q", "--quiet", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.tp < 1:
        ap.error("--tp must be >= 1")
    if a.cmd != "expect" and not a.out:
        ap.error("%s needs OUT" % a.cmd)
    try:
        src = Source(a.src)
        exp = Expect(src, a.tp, attn_scales=not a.no_attn_scales,
                     dtype=DTYPE_OPT[a.dtype] if a.dtype else None)
    except RefError as e:
        print("reference: %s" % e)
        return 2
    if a.cmd == "expect":
        for r in range(a.tp):
            for name in sorted(exp.ranks[r]):
                dt, shape, pieces, frm = exp.ranks[r][name]
                print("rank %d: %s %s %s <- %s%s" % (r, name, dt, shape, pieces,
                                                   " from %s" % frm if frm != dt else ""))
        return 0
    if xxhash is None or awscrt_checksums is None:
        print("reference: the xxhash or awscrt package is missing")
        return 2
    if a.cmd == "write":
        write_output(src, a.out, exp, a.max_file_size or 5 << 30)
        return 0
    c = Checker(src, a.out, exp, a.max_file_size, a.checksum)
    c.run()
    nexp = sum(len(x) for x in exp.ranks)
    if c.diffs:
        print("reference: tp %d: %d difference(s) (%d of %d expected tensors compared)" %
              (a.tp, len(c.diffs), c.ntensors, nexp))
        return 1
    print("reference: tp %d: all %d tensors of %d ranks match, manifest ok" % (a.tp, nexp, a.tp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
