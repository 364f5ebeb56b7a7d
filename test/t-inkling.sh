#!/bin/sh
# Inkling (InklingForCausalLM) as released, model.llm.*: each element of a
# tensor holds its own index (BF16 bits, or the integer in F32), so a
# rank's bytes say where they came from; the order they must come in is
# worked out here as vLLM 0.32's Inkling loader (models/inkling/nvidia)
# does it: the routed experts' interleaved w13 narrowed to the rank's slab
# of 2I/tp rows and split into its even rows (gate), then odd (up); the
# sink experts' w13 narrowed and kept interleaved, their w2 [S, H, I] laid
# out [H, S*I/tp]; q, k, v and r each cut by rows into qkvr; the router's
# rows zero-padded to a multiple of 8; the head padded to 64 rows; the
# short convolutions from F32 to BF16; k_scale and v_scale 1.0.  Then the
# refusals: more ranks than kv heads, expert parallelism; and verify.
# (test/engine/run inkling checks the same layout against vLLM itself.)
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

SRC=$T/src
mkdir -p "$SRC"
py_st "$SRC" <<'PY' || fail "writing the checkpoint failed"
import json, os, struct, sys
import st
out = sys.argv[1]
H, NH, KV, HD, SNH, SKV, SHD, DR, K = 16, 2, 2, 8, 4, 2, 4, 2, 4
ID, I, R, S, V = 16, 8, 3, 2, 100
seed = [0]


def ten(shape, dtype="BF16"):
    """Elements base, base + 1, ...: each tensor its own base."""
    n = 1
    for d in shape:
        n *= d
    seed[0] += 997
    b = seed[0]
    if dtype == "F32":
        return ("F32", shape, b"".join(struct.pack("<f", float((b + i) % 200)) for i in range(n)))
    return ("BF16", shape, b"".join(struct.pack("<H", (b + i) & 0x7fff) for i in range(n)))


t = {"model.llm.embed.weight": ten([V, H]), "model.llm.embed_norm.weight": ten([H]),
     "model.llm.norm.weight": ten([H]), "model.llm.unembed.weight": ten([V, H])}
for n, local in ((0, True), (1, False)):
    p = f"model.llm.layers.{n}."
    nh, kv, hd = (SNH, SKV, SHD) if local else (NH, KV, HD)
    for k, s in (("attn_norm.weight", [H]), ("mlp_norm.weight", [H]),
                 ("attn.wq_du.weight", [nh * hd, H]), ("attn.wk_dv.weight", [kv * hd, H]),
                 ("attn.wv_dv.weight", [kv * hd, H]), ("attn.wr_du.weight", [nh * DR, H]),
                 ("attn.wo_ud.weight", [H, nh * hd]), ("attn.q_norm.weight", [hd]),
                 ("attn.k_norm.weight", [hd]), ("attn.rel_logits_proj.proj", [DR, 8])):
        t[p + k] = ten(s)
    for k, s in (("attn_sconv.weight", [H, 1, K]), ("mlp_sconv.weight", [H, 1, K]),
                 ("attn.k_sconv.weight", [kv * hd, 1, K]), ("attn.v_sconv.weight", [kv * hd, 1, K])):
        t[p + k] = ten(s, "F32")
    if n == 0:
        t[p + "mlp.w13_dn.weight"] = ten([2 * ID, H])
        t[p + "mlp.w2_md.weight"] = ten([H, ID])
        t[p + "mlp.global_scale"] = ten([1])
    else:
        t[p + "mlp.gate.weight"] = ten([R + S, H])
        t[p + "mlp.gate.bias"] = ten([R], "F32")
        t[p + "mlp.gate.global_scale"] = ten([1])
        t[p + "mlp.experts.w13_weight"] = ten([R, 2 * I, H])
        t[p + "mlp.experts.w2_weight"] = ten([R, H, I])
        t[p + "mlp.shared_experts.shared_w13_weight"] = ten([S, 2 * I, H])
        t[p + "mlp.shared_experts.shared_w2_weight"] = ten([S, H, I])
mtp = {"model.mtp.layers.0.input_proj.weight": ten([H, 2 * H]),
       "model.mtp.layers.0.transformer_block.attn.wq_du.weight": ten([SNH * SHD, H])}
st.write(os.path.join(out, "model-00001-of-00002.safetensors"), t)
st.write(os.path.join(out, "model-00002-of-00002.safetensors"), mtp)
wm = {k: "model-00001-of-00002.safetensors" for k in t}
wm.update({k: "model-00002-of-00002.safetensors" for k in mtp})
json.dump({"metadata": {}, "weight_map": wm},
          open(os.path.join(out, "model.safetensors.index.json"), "w"))
json.dump({"architectures": ["InklingForCausalLM"], "model_type": "inkling_model",
           "hidden_size": H, "num_hidden_layers": 2, "num_attention_heads": NH,
           "num_key_value_heads": KV, "head_dim": HD, "swa_num_attention_heads": SNH,
           "swa_num_key_value_heads": SKV, "swa_head_dim": SHD, "d_rel": DR, "rel_extent": 8,
           "sliding_window_size": 8, "local_layer_ids": [0], "sconv_kernel_size": K,
           "dense_intermediate_size": ID, "intermediate_size": I, "dense_mlp_idx": 1,
           "n_routed_experts": R, "n_shared_experts": S, "num_experts_per_tok": 2,
           "vocab_size": V, "use_embed_norm": True, "use_sconv": True,
           "use_global_scale": True, "use_gate_bias": True, "shared_expert_sink": True,
           "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16"},
          open(os.path.join(out, "config.json"), "w"))
PY

for tp in 1 2; do
	expect_exit 0 "$WSHARD" convert --tp "$tp" --validate off "$SRC" "$T/out$tp" || continue
	expect_exit 0 "$WSHARD" verify "$T/out$tp" || fail "tp $tp: verify: $(head -c 300 "$T/err")"
	py_st "$SRC" "$T/out$tp" "$tp" <<'PY' || fail "tp $tp: the rank files are not vLLM's layout"
import glob, json, os, struct, sys
import st
src, out, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
H, I, R, S, V = 16, 8, 3, 2, 100
s = st.read(glob.glob(os.path.join(src, "*.safetensors")))
bad = []


def rows(t):
    """t's rows (dimension 0), each as bytes."""
    n = t[1][0]
    w = len(t[2]) // n
    return [t[2][i * w:(i + 1) * w] for i in range(n)]


def cut(b, r, n):
    k = len(b) // n
    return b[r * k:(r + 1) * k]


def mats(t):
    """A 3-D t's matrices, each a list of rows."""
    e, a = t[1][0], t[1][1]
    w = len(t[2]) // (e * a)
    return [[t[2][(x * a + y) * w:(x * a + y + 1) * w] for y in range(a)] for x in range(e)]


def f32_to_bf16(b):
    return b"".join(b[i + 2:i + 4] for i in range(0, len(b), 4))


def check(r, o, name, want, dtype="BF16"):
    if name not in o:
        bad.append(f"rank {r}: {name} missing")
    elif o[name][0] != dtype or o[name][2] != want:
        bad.append(f"rank {r}: {name}: {o[name][0]} {o[name][1]} not as vLLM holds it")


m = json.load(open(os.path.join(out, "wshard.json")))
left = {x["name"] for x in m.get("left_out", [])}
if left != {"model.mtp.layers.0.input_proj.weight",
            "model.mtp.layers.0.transformer_block.attn.wq_du.weight"}:
    bad.append(f"left_out: {sorted(left)}")
for r in range(tp):
    o = st.read(glob.glob(os.path.join(out, f"model-rank-{r}-part-*.safetensors")))
    p, q = "model.llm.layers.", "model.layers."
    check(r, o, "model.embed_tokens.weight", s["model.llm.embed.weight"][2])
    head = b"".join(rows(s["model.llm.unembed.weight"])) + bytes(2 * H * (128 - V))
    check(r, o, "lm_head.weight", cut(head, r, tp))
    for n in (0, 1):
        qkvr = b"".join(cut(s[f"{p}{n}.attn.{w}.weight"][2], r, tp)
                        for w in ("wq_du", "wk_dv", "wv_dv", "wr_du"))
        check(r, o, f"{q}{n}.attn.qkvr.weight", qkvr)
        for c in ("attn_sconv", "mlp_sconv", "attn.k_sconv", "attn.v_sconv"):
            check(r, o, f"{q}{n}.{c}.weight", cut(f32_to_bf16(s[f"{p}{n}.{c}.weight"][2]), r, tp))
        for sc in ("k_scale", "v_scale"):
            check(r, o, f"{q}{n}.attn.{sc}", struct.pack("<f", 1.0), "F32")
        wo = s[f"{p}{n}.attn.wo_ud.weight"]
        check(r, o, f"{q}{n}.attn.wo_ud.weight", st.rank_cols(wo, r, tp))
    check(r, o, f"{q}0.mlp.gate_up_proj.weight", cut(s[f"{p}0.mlp.w13_dn.weight"][2], r, tp))
    router = s[f"{p}1.mlp.gate.weight"][2] + bytes(2 * H * (8 - R - S))
    check(r, o, f"{q}1.mlp.gate.weight", router)
    # BF16 to F32: the same bits in the high half
    check(r, o, f"{q}1.mlp.gate.global_scale", b"\0\0" + s[f"{p}1.mlp.gate.global_scale"][2],
          "F32")
    w13 = b""
    for e in mats(s[f"{p}1.mlp.experts.w13_weight"]):
        slab = e[r * 2 * I // tp:(r + 1) * 2 * I // tp]
        w13 += b"".join(slab[0::2]) + b"".join(slab[1::2])
    check(r, o, f"{q}1.mlp.experts.routed_experts.w13_weight", w13)
    w2 = b"".join(cut(row, r, tp) for e in mats(s[f"{p}1.mlp.experts.w2_weight"]) for row in e)
    check(r, o, f"{q}1.mlp.experts.routed_experts.w2_weight", w2)
    sw13 = b"".join(b"".join(e[r * 2 * I // tp:(r + 1) * 2 * I // tp])
                    for e in mats(s[f"{p}1.mlp.shared_experts.shared_w13_weight"]))
    check(r, o, f"{q}1.mlp.sink_experts.w13_weight", sw13)
    sw2 = mats(s[f"{p}1.mlp.shared_experts.shared_w2_weight"])
    check(r, o, f"{q}1.mlp.sink_experts.w2_weight",
          b"".join(cut(sw2[e][h], r, tp) for h in range(H) for e in range(S)))
    if o.get(f"{q}1.mlp.sink_experts.w2_weight", (0, None))[1] != [H, S * I // tp]:
        bad.append(f"rank {r}: sink w2 shape {o.get(f'{q}1.mlp.sink_experts.w2_weight')[1]}")
    if any(k.startswith("model.mtp.") for k in o):
        bad.append(f"rank {r}: an MTP tensor written")
    if len(o) != 40:
        bad.append(f"rank {r}: {len(o)} tensors, vLLM holds 40")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
done

# vLLM asserts tp <= kv heads (InklingConvState): 2 kv heads, tp 4
expect_exit 3 "$WSHARD" convert --tp 4 "$SRC" "$T/out4" &&
	err_has "tp 4" "num_key_value_heads=2 is not divisible by --tp 4" && one_line "tp 4"
[ -e "$T/out4" ] && fail "tp 4: an output was left"
expect_exit 3 "$WSHARD" convert --tp 2 --expert-parallel "$SRC" "$T/outep" &&
	err_has "--expert-parallel" "sink experts" && one_line "--expert-parallel"
[ -e "$T/outep" ] && fail "--expert-parallel: an output was left"
finish
