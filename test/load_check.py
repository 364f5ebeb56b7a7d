#!/usr/bin/env python3
"""load_check.py - libwshard's loader (wshard_load_*) through the vLLM
plugin's own ctypes bindings (lib/vllm), with numpy buffers for parameters
(t-load.sh).

    load_check.py LIB ok OUT TP             every rank loads; each tensor's
                                            bytes equal those the rank file's
                                            own header points at
    load_check.py LIB prefetch OUT TP       for every rank: its files evicted
                                            from the page cache (posix_fadvise
                                            DONTNEED), then wshard_load_prefetch
                                            brings all of them back (mincore)
                                            while the rank loads beside it
    load_check.py LIB refuse OUT CODE TEXT WANT_JSON
                                            rank 0 (or WANT's) is refused
                                            with CODE and TEXT in the message
"""
import ctypes
import json
import os
import struct
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "lib", "vllm"))
from wshard_vllm import MAX_DIMS, Error, Want, bind  # noqa: E402  (the plugin's own)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "engine"))
from bench import page_vector  # noqa: E402  (the engine benchmark's mincore)


def load(lib, out, want, skip=None, threads=0, prefetch=None):
    """(rc, message, {name: bytes}) of loading want's rank of out; with
    prefetch a list, wshard_load_prefetch runs on a thread beside it and
    its code is appended there."""
    err = Error()
    w = Want(want.get("engine", "vllm==0.32.0").encode(), want["tp"], want.get("pp", 1),
             want.get("ep", False), None, want.get("rank", 0), want.get("nosum", False),
             want.get("stage", 0))
    h = ctypes.c_void_p()
    rc = lib.wshard_load_open(ctypes.byref(h), out.encode(), ctypes.byref(w),
                              ctypes.byref(err))
    if rc:
        return rc, err.msg.decode(), {}
    if prefetch is not None:
        t = threading.Thread(target=lambda: prefetch.append(
            lib.wshard_load_prefetch(h, ctypes.byref(Error()))))
        t.start()
    bufs = {}
    name, dt = ctypes.c_char_p(), ctypes.c_char_p()
    nd, shape = ctypes.c_int(), (ctypes.c_uint64 * MAX_DIMS)()
    for i in range(lib.wshard_load_count(h)):
        size = lib.wshard_load_info(h, i, ctypes.byref(name), ctypes.byref(dt),
                                    ctypes.byref(nd), ctypes.byref(shape))
        b = np.full(size, 0xA5, dtype=np.uint8)
        bufs[name.value.decode()] = b
        if name.value.decode() != skip:
            lib.wshard_load_dest(h, i, b.ctypes.data if size else None)
    rc = lib.wshard_load_run(h, threads, ctypes.byref(err))
    if prefetch is not None:
        t.join()
    lib.wshard_load_free(h)
    return rc, err.msg.decode(), {k: v.tobytes() for k, v in bufs.items()}


def file_tensors(out, rank):
    """{name: bytes} of rank's files, read through their own headers."""
    m = json.load(open(out + "/wshard.json"))
    got = {}
    for f in m["ranks"][rank]["files"]:
        data = open(out + "/" + f["name"], "rb").read()
        n = struct.unpack_from("<Q", data)[0]
        for k, v in json.loads(data[8:8 + n]).items():
            if k != "__metadata__":
                a, b = v["data_offsets"]
                got[k] = data[8 + n + a:8 + n + b]
    return got


def resident(path):
    """(pages of path in the page cache, pages of path)."""
    vec, _ = page_vector(path)
    return sum(b & 1 for b in vec), len(vec)


def prefetch_check(lib, out, tp):
    m = json.load(open(out + "/wshard.json"))
    for r in range(tp):
        files = [out + "/" + f["name"] for f in m["ranks"][r]["files"]]
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        evicted = all(have < total for have, total in map(resident, files))
        codes = []
        rc, msg, got = load(lib, out, {"tp": tp, "rank": r}, prefetch=codes)
        if rc or codes != [0] or got != file_tensors(out, r):
            sys.exit(f"rank {r} with prefetch: load {rc} {msg}, prefetch {codes}")
        # the load itself read every page too: evict again, prefetch alone
        if not evicted:
            print(f"rank {r}: this file system keeps the files in memory "
                  "(no eviction): prefetch loads, its reading is not checked")
            continue
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        err, h = Error(), ctypes.c_void_p()
        w = Want(b"vllm==0.32.0", tp, 1, False, None, r, False, 0)
        if lib.wshard_load_open(ctypes.byref(h), out.encode(), ctypes.byref(w),
                                ctypes.byref(err)) or \
                lib.wshard_load_prefetch(h, ctypes.byref(err)):
            sys.exit(f"rank {r}: prefetch failed: {err.msg.decode()}")
        held = sum(os.path.getsize(f) for f in files)
        if lib.wshard_load_bytes(h) != held:
            sys.exit(f"rank {r}: wshard_load_bytes {lib.wshard_load_bytes(h)}, "
                     f"the files hold {held}")
        lib.wshard_load_free(h)
        t_end = time.monotonic() + 20
        while True:
            got = [resident(f) for f in files]
            if all(a == b for a, b in got) or time.monotonic() > t_end:
                break
            time.sleep(0.05)
        have, total = sum(a for a, _ in got), sum(b for _, b in got)
        # WILLNEED is advice: the kernel may drop a window of it (seen once:
        # 16 pages of 8452 under make test); a window a file is let pass
        if total - have > len(files) * 32:
            sys.exit(f"rank {r}: prefetch left {total - have} of {total} pages unread")
    return 0


def main(argv):
    lib = bind(argv[1])
    if argv[2] == "ok":
        out, tp = argv[3], int(argv[4])
        for r in range(tp):
            for threads in (1, 3):
                rc, msg, got = load(lib, out, {"tp": tp, "rank": r}, threads=threads)
                if rc:
                    sys.exit(f"rank {r}: refused ({rc}): {msg}")
                want = file_tensors(out, r)
                if got != want:
                    bad = [k for k in want if got.get(k) != want[k]] or ["(names)"]
                    sys.exit(f"rank {r}, {threads} threads: {len(bad)} tensors differ, "
                             f"'{bad[0]}' first")
        return 0
    if argv[2] == "prefetch":
        return prefetch_check(lib, argv[3], int(argv[4]))
    if argv[2] == "stage":
        # every stage's ranks of an output of stages (argv[3]), each equal
        # to its own files and to the same tensors of the tp-only output
        # argv[4]'s rank
        out, plain = argv[3], argv[4]
        m = json.load(open(out + "/wshard.json"))
        tp, pp = m["tp"], m["parallel"]["pp"]
        for s in range(pp):
            for r in range(tp):
                rc, msg, got = load(lib, out, {"tp": tp, "pp": pp, "stage": s, "rank": r})
                whole = file_tensors(plain, r)
                if rc or got != file_tensors(out, s * tp + r) or not got or \
                        any(whole.get(k) != v for k, v in got.items()):
                    sys.exit(f"stage {s} rank {r}: ({rc}) {msg or 'tensors differ'}")
        return 0
    out, code, text, want = argv[3], int(argv[4]), argv[5], json.loads(argv[6])
    rc, msg, _ = load(lib, out, want, skip=want.get("skip"))
    if rc != code or text not in msg or "\n" in msg:
        sys.exit(f"{want}: code {rc}, '{msg}'; expected code {code} and '{text}'")
    print(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
