#!/bin/sh
# DeepSeek-V3-like checkpoints (MLA, a multi-token-prediction layer past
# num_hidden_layers, block FP8), written here as plain safetensors:
#  - the MTP layer's tensors are left out, each listed by name with its
#    reason in wshard.json ("left_out"), counted by `wshard inspect`, and
#    none is written; `wshard verify` passes;
#  - q_a_proj ; kv_a_proj_with_mqa become one replicated fused_qkv_a_proj,
#    and their FP8 block scales concatenate by rows (1 + 3 block rows);
#  - a tp whose split cuts a 128 block (256 columns at tp 4) is
#    refused with exit 3 and one line naming the weight (the first checked
#    one: down_proj, o_proj or kv_b_proj here), nothing written.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

# mk DIR fp8|bf16 [INTERMEDIATE]: 1 main layer (dense MLP) + MTP layer 1.
mk() {
	"$PYTHON" - "$1" "$2" "${3:-256}" <<'EOF' || fail "cannot write the DeepSeek checkpoint $1"
import json, os, struct, sys
d, kind, inter = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(d, exist_ok=True)
cfg = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
       "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 1,
       "q_lora_rank": 128, "kv_lora_rank": 256, "qk_rope_head_dim": 64,
       "qk_nope_head_dim": 64, "v_head_dim": 64, "intermediate_size": inter,
       "vocab_size": 128, "first_k_dense_replace": 1, "num_nextn_predict_layers": 1,
       "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
if kind == "fp8":
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                  "activation_scheme": "dynamic",
                                  "weight_block_size": [128, 128]}
json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
lin = {"self_attn.q_a_proj.weight": (128, 256), "self_attn.kv_a_proj_with_mqa.weight": (320, 256),
       "self_attn.q_b_proj.weight": (512, 128), "self_attn.kv_b_proj.weight": (512, 256),
       "self_attn.o_proj.weight": (256, 256), "mlp.gate_proj.weight": (inter, 256),
       "mlp.up_proj.weight": (inter, 256), "mlp.down_proj.weight": (256, inter)}
norm = {"input_layernorm.weight": 256, "post_attention_layernorm.weight": 256,
        "self_attn.q_a_layernorm.weight": 128, "self_attn.kv_a_layernorm.weight": 256}
t = {"model.embed_tokens.weight": ("BF16", (128, 256)), "lm_head.weight": ("BF16", (128, 256)),
     "model.norm.weight": ("BF16", (256,))}
for n in (0, 1):
    p = "model.layers.%d." % n
    for k, s in lin.items():
        t[p + k] = ("F8_E4M3" if kind == "fp8" else "BF16", s)
        if kind == "fp8":
            t[p + k + "_scale_inv"] = ("F32", (-(-s[0] // 128), -(-s[1] // 128)))
    for k, s in norm.items():
        t[p + k] = ("BF16", (s,))
for k, s in {"eh_proj.weight": (256, 512), "enorm.weight": (256,), "hnorm.weight": (256,),
             "shared_head.norm.weight": (256,), "shared_head.head.weight": (128, 256),
             "embed_tokens.weight": (128, 256)}.items():
    t["model.layers.1." + k] = ("BF16", s)
size = {"BF16": 2, "F32": 4, "F8_E4M3": 1}
hdr, off = {}, 0
for k in sorted(t):
    dt, s = t[k]
    n = size[dt]
    for x in s:
        n *= x
    hdr[k] = {"dtype": dt, "shape": list(s), "data_offsets": [off, off + n]}
    off += n
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.write(bytes((i * 7 + 3) % 251 for i in range(off)))
EOF
}

mk "$T/bf16" bf16
mk "$T/fp8" fp8
mk "$T/fp8-wide" fp8 1024

echo "== MTP layer left out, listed by name"
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/bf16" "$T/out-bf16"; then
	"$PYTHON" - "$T/bf16" "$T/out-bf16/wshard.json" <<'EOF' || fail "left_out in wshard.json"
import json, struct, sys
src, man = sys.argv[1], json.load(open(sys.argv[2]))
f = open(src + "/model.safetensors", "rb")
names = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
mtp = sorted(k for k in names if k.startswith("model.layers.1."))
left = man.get("left_out", [])
assert sorted(x["name"] for x in left) == mtp, left
assert all("multi-token prediction" in x["reason"] for x in left), left
for r in man["ranks"]:
    out = [t["name"] for t in r["tensors"]]
    assert not any(n.startswith("model.layers.1.") for n in out), out
    assert "model.layers.0.self_attn.fused_qkv_a_proj.weight" in out, out
print("   %d MTP tensors left out" % len(left))
EOF
	expect_exit 0 "$WSHARD" inspect "$T/out-bf16" &&
		{ grep -q "^left out: 18 source tensors (multi-token prediction" "$T/out" ||
			fail "inspect does not count the left-out tensors: $(cat "$T/out")"; }
	expect_exit 0 "$WSHARD" verify "$T/out-bf16"
fi

echo "== --architecture DeepSeekMTPModel: the MTP layer as vLLM's draft holds it"
for k in bf16 fp8; do
	expect_exit 0 "$WSHARD" convert -q --tp 2 --architecture DeepSeekMTPModel "$T/$k" \
		"$T/draft-$k" || continue
	"$PYTHON" - "$T/draft-$k/wshard.json" "$k" <<'EOF' || fail "$k: the draft's tensors"
import json, sys
man, kind = json.load(open(sys.argv[1])), sys.argv[2]
left = sorted(x["name"] for x in man["left_out"])
assert "lm_head.weight" in left and "model.norm.weight" in left, left
assert "model.embed_tokens.weight" in left, left
assert not any(n.startswith("model.layers.1.") for n in left), left
for r in man["ranks"]:
    out = {t["name"]: t for t in r["tensors"]}
    assert not any(n.startswith("model.layers.0.") for n in out), sorted(out)
    p = "model.layers.1."
    assert out["model.embed_tokens.weight"]["shape"] == [64, 256], out["model.embed_tokens.weight"]
    assert out[p + "shared_head.head.weight"]["shape"] == [64, 256]
    assert out[p + "eh_proj.weight"]["shape"] == [256, 512]
    for k in ("enorm", "hnorm", "shared_head.norm"):
        assert out[p + k + ".weight"]["shape"] == [256], k
    assert out[p + "mtp_block.self_attn.fused_qkv_a_proj.weight"]["shape"] == [448, 256]
    assert out[p + "mtp_block.self_attn.mla_attn.q_b_proj.weight"]["shape"] == [256, 128]
    assert out[p + "mtp_block.mlp.gate_up_proj.weight"]["shape"] == [256, 256]
    for s in ("_k_scale", "_v_scale", "_q_scale", "_prob_scale"):
        assert out[p + "mtp_block.self_attn.mla_attn.mla_attn." + s]["dtype"] == "F32", s
    if kind == "fp8":
        assert p + "mtp_block.self_attn.fused_qkv_a_proj.weight_scale_inv" in out, sorted(out)
    assert not any(n.startswith("lm_head") or n == "model.norm.weight" for n in out)
print("   %s: %d tensors a rank" % (kind, len(out)))
EOF
	expect_exit 0 "$WSHARD" verify "$T/draft-$k"
done

echo "== FP8: fused_qkv_a_proj scales concatenate by rows, replicated"
if expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/fp8" "$T/out-fp8"; then
	"$WSHARD" inspect --rank 1 "$T/out-fp8" >"$T/out" 2>&1
	grep -q "fused_qkv_a_proj.weight_scale_inv  *F32  *\[4,2\]" "$T/out" ||
		fail "fused_qkv_a_proj.weight_scale_inv is not [4,2]: $(grep fused "$T/out")"
	grep -q "fused_qkv_a_proj.weight  *F8_E4M3  *\[448,256\]" "$T/out" ||
		fail "fused_qkv_a_proj.weight is not [448,256]: $(grep fused "$T/out")"
	expect_exit 0 "$WSHARD" verify "$T/out-fp8"
fi

echo "== FP8: a tp that cuts a 128 block is refused before anything is written"
if expect_exit 3 "$WSHARD" convert --tp 4 "$T/fp8" "$T/out-tp4"; then
	one_line "tp 4"
	err_has "tp 4" "_proj.weight': each rank's 64 columns"
	err_has "tp 4" "128-column blocks"
	echo "   $(cat "$T/err")"
fi
[ -e "$T/out-tp4" ] && fail "tp 4: '$T/out-tp4' was created"

# With a 1024-wide MLP the heads are cut first: o_proj's 4 heads x 64
# columns at tp 4, kv_b_proj's 4 heads x 128 rows at tp 8.
for c in "4 o_proj.weight': each rank's 64 columns" \
	 "8 kv_b_proj.weight': each rank's 64 rows"; do
	tp=${c%% *} msg=${c#* }
	if expect_exit 3 "$WSHARD" convert --tp "$tp" "$T/fp8-wide" "$T/out-w$tp"; then
		one_line "wide tp $tp"
		err_has "wide tp $tp" "$msg"
		echo "   $(cat "$T/err")"
	fi
	[ -e "$T/out-w$tp" ] && fail "wide tp $tp: an output was created"
done

finish
