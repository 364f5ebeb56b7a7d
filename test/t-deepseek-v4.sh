#!/bin/sh
# DeepSeek-V4-like checkpoints in DeepSeek's own names, written here as
# plain safetensors (one layer with an indexer, an MTP layer mtp.0.*):
#  - mtp.* is left out, each tensor listed with its reason; verify passes;
#  - the hash table tid2eid (I64) is written I32, each value's low 32 bits;
#  - FP4 routed experts (I8, F8_E8M0 scales per 32) are written U8, the
#    same bytes; FP8 block scales X.scale become X.weight_scale_inv;
#  - a tp whose split cuts a 128 block (wo_a's 256 rows at tp 4) is refused
#    with exit 3 and one line, nothing written.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

"$PYTHON" - "$T/src" <<'EOF' || fail "cannot write the DeepSeek-V4 checkpoint"
import json, os, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
H, I, E, V = 256, 256, 4, 64
cfg = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
       "hidden_size": H, "num_attention_heads": 4, "num_hidden_layers": 1,
       "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 128, "o_groups": 2,
       "o_lora_rank": 128, "moe_intermediate_size": I, "n_routed_experts": E,
       "n_shared_experts": 1, "num_experts_per_tok": 2, "hc_mult": 4,
       "index_n_heads": 4, "index_head_dim": 128, "vocab_size": V,
       "compress_ratios": [4], "num_hash_layers": 1, "num_nextn_predict_layers": 1,
       "torch_dtype": "bfloat16",
       "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                               "activation_scheme": "dynamic", "scale_fmt": "ue8m0",
                               "weight_block_size": [128, 128]}}
json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
blk = lambda r, c: (-(-r // 128), -(-c // 128))
t = {"embed.weight": ("BF16", (V, H)), "head.weight": ("BF16", (V, H)),
     "norm.weight": ("BF16", (H,)), "hc_head_fn": ("F32", (4, 4 * H)),
     "hc_head_base": ("F32", (4,)), "hc_head_scale": ("F32", (1,))}
fp8 = {"attn.wq_a": (128, H), "attn.wkv": (512, H), "attn.wq_b": (2048, 128),
       "attn.wo_a": (256, 1024), "attn.wo_b": (H, 256), "attn.indexer.wq_b": (512, 128),
       "ffn.shared_experts.w1": (I, H), "ffn.shared_experts.w3": (I, H),
       "ffn.shared_experts.w2": (H, I)}
for p in ("layers.0.", "mtp.0."):
    for k, s in fp8.items():
        t[p + k + ".weight"] = ("F8_E4M3", s)
        t[p + k + ".scale"] = ("F8_E8M0", blk(*s))
    for e in range(E):
        for w, (r, c) in (("w1", (I, H)), ("w3", (I, H)), ("w2", (H, I))):
            t[p + "ffn.experts.%d.%s.weight" % (e, w)] = ("I8", (r, c // 2))
            t[p + "ffn.experts.%d.%s.scale" % (e, w)] = ("F8_E8M0", (r, c // 32))
    for k, s in {"attn_norm.weight": ("BF16", (H,)), "ffn_norm.weight": ("BF16", (H,)),
                 "attn.attn_sink": ("F32", (4,)), "attn.q_norm.weight": ("BF16", (128,)),
                 "attn.kv_norm.weight": ("BF16", (512,)),
                 "attn.compressor.wkv.weight": ("BF16", (1024, H)),
                 "attn.compressor.wgate.weight": ("BF16", (1024, H)),
                 "attn.compressor.ape": ("F32", (4, 1024)),
                 "attn.compressor.norm.weight": ("BF16", (512,)),
                 "attn.indexer.weights_proj.weight": ("BF16", (4, H)),
                 "attn.indexer.compressor.wkv.weight": ("BF16", (256, H)),
                 "attn.indexer.compressor.wgate.weight": ("BF16", (256, H)),
                 "attn.indexer.compressor.ape": ("F32", (4, 256)),
                 "attn.indexer.compressor.norm.weight": ("BF16", (128,)),
                 "ffn.gate.weight": ("BF16", (E, H)), "ffn.gate.tid2eid": ("I64", (V, 2)),
                 "hc_attn_fn": ("F32", (24, 4 * H)), "hc_ffn_fn": ("F32", (24, 4 * H)),
                 "hc_attn_base": ("F32", (24,)), "hc_ffn_base": ("F32", (24,)),
                 "hc_attn_scale": ("F32", (3,)), "hc_ffn_scale": ("F32", (3,))}.items():
        t[p + k] = s
size = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "F8_E8M0": 1, "I8": 1, "I64": 8}
hdr, off, data = {}, 0, []
for k in sorted(t):
    dt, s = t[k]
    n = size[dt]
    for x in s:
        n *= x
    hdr[k] = {"dtype": dt, "shape": list(s), "data_offsets": [off, off + n]}
    if k.endswith("tid2eid"):   # experts, and one value past 32 bits
        vals = [(i % E) + (1 << 33 if i == 5 else 0) for i in range(n // 8)]
        data.append(struct.pack("<%dq" % len(vals), *vals))
    else:
        data.append(bytes((off + i) * 7 % 251 for i in range(n)))
    off += n
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(data))
EOF

echo "== tp 2: mtp.* left out, tid2eid I32, FP4 experts U8, .scale renamed"
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/src" "$T/o2"; then
	"$PYTHON" - "$T/src" "$T/o2" <<'EOF' || fail "DeepSeek-V4 output"
import json, struct, sys
src, out = sys.argv[1], sys.argv[2]

def read(path):
    f = open(path, "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(n))
    return hdr, f.read()

sh, sd = read(src + "/model.safetensors")
man = json.load(open(out + "/wshard.json"))
left = sorted(x["name"] for x in man["left_out"])
assert left == sorted(k for k in sh if k.startswith("mtp.")), left
assert all("multi-token prediction" in x["reason"] for x in man["left_out"])
oh, od = read(out + "/model-rank-1-part-0.safetensors")
get = lambda h, d, k: d[h[k]["data_offsets"][0]:h[k]["data_offsets"][1]]
L = "model.layers.0."
t = oh[L + "ffn.experts.gate.tid2eid"]
assert t["dtype"] == "I32" and t["shape"] == [64, 2], t
vals = struct.unpack("<128q", get(sh, sd, "layers.0.ffn.gate.tid2eid"))
assert get(oh, od, L + "ffn.experts.gate.tid2eid") == \
    struct.pack("<128i", *[v & 0xffffffff if v < 1 << 31 else v - (1 << 33) for v in vals])
R = L + "ffn.experts.routed_experts."
want = {"w13_weight": [4, 256, 128], "w13_weight_scale": [4, 256, 8],
        "w2_weight": [4, 256, 64], "w2_weight_scale": [4, 256, 4]}
for k, s in want.items():
    assert oh[R + k]["dtype"] == "U8" and oh[R + k]["shape"] == s, (k, oh[R + k])
w2 = get(sh, sd, "layers.0.ffn.experts.3.w2.weight")     # [256, 128] bytes
mine = get(oh, od, R + "w2_weight")[3 * 256 * 64:4 * 256 * 64]
assert mine == b"".join(w2[r * 128 + 64:r * 128 + 128] for r in range(256))
assert oh[L + "attn.wo_a.weight_scale_inv"]["dtype"] == "F8_E8M0"
assert oh[L + "attn.wo_a.weight_scale_inv"]["shape"] == [1, 8]
assert oh[L + "attn.fused_wqa_wkv.weight_scale_inv"]["shape"] == [5, 2]
assert oh[L + "attn.attn_sink"]["shape"] == [2]
print("   %d mtp.* tensors left out" % len(left))
EOF
	expect_exit 0 "$WSHARD" verify "$T/o2"
fi

echo "== a tp that cuts a 128 block is refused before anything is written"
if expect_exit 3 "$WSHARD" convert --tp 4 "$T/src" "$T/out-tp4"; then
	one_line "tp 4"
	err_has "tp 4" "wo_a.weight': each rank's 64 rows do not fall on the 128-row blocks of 'layers.0.attn.wo_a.scale'"
	echo "   $(cat "$T/err")"
fi
[ -e "$T/out-tp4" ] && fail "tp 4: '$T/out-tp4' was created"

echo "== heads that --tp does not divide: refused from config.json alone"
# the weights are unreadable here: the refusal must come before they are read
mkdir -p "$T/src-heads"
cp "$T/src/config.json" "$T/src-heads/"
printf 'not safetensors' >"$T/src-heads/model.safetensors"
if expect_exit 3 "$WSHARD" convert --tp 8 "$T/src-heads" "$T/out-tp8"; then
	one_line "tp 8"
	err_has "tp 8" "num_attention_heads=4 is not divisible by --tp 8"
fi
[ -e "$T/out-tp8" ] && fail "tp 8: '$T/out-tp8' was created"

finish
