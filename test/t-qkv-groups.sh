#!/bin/sh
# q/k/v stored by kv-head group ("qkv_groups"): Falcon's query_key_value,
# [kv, q/kv + 2, head_dim] (new_decoder_architecture with 2 kv heads, and
# multi_query's one group), Bloom's, [heads, 3, head_dim], in a
# checkpoint whose names lack "transformer." ("source_prefix", as the Hub's
# BLOOM checkpoints are saved), and TeleChat2's key_value, k and v alone by
# kv head, [kv, 2, head_dim] (a "fuse" of k+v), beside its query.  Each source row (each bias element) holds
# its own index, so a rank's rows read back say where they came from; the
# order they must come in is worked out here as vLLM does it (falcon.py
# views the rows as groups, narrows q, k and v out and concatenates them;
# QKVParallelLinear then gives rank r its q heads and its kv heads, a kv
# head whole on several ranks when there are fewer than ranks); and
# scripts/learn-rules explains the layout as the same rules.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

# ckpt DIR ARCH HEADS KV NEW: a one-layer checkpoint, hidden 32.
ckpt() {
	mkdir -p "$1"
	py_st "$@" <<'PY' || fail "writing $2 failed"
import json, os, random, struct, sys
import st
out, arch = sys.argv[1], sys.argv[2]
heads, kv, new = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
H, V = 32, 128
hd = H // heads


def rows(n, cols, seed=0, first=0):
    """BF16 [n, cols] whose row i starts with the number first + i, the rest
    of it pseudo-random (no two rows of the checkpoint alike, for the
    learner)."""
    rnd = random.Random(seed)
    return ("BF16", [n, cols], b"".join(struct.pack("<H", first + i) +
                                        rnd.randbytes(2 * cols - 2) for i in range(n)))


def vec(n, seed=None):
    """BF16 [n]: the numbers 0 to n - 1, or pseudo-random."""
    if seed is None:
        return ("BF16", [n], b"".join(struct.pack("<H", i) for i in range(n)))
    return ("BF16", [n], random.Random(seed).randbytes(2 * n))


if arch == "falcon":
    p = "transformer.h.0."
    groups = kv if new else 1
    cfg = {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": H,
           "num_attention_heads": heads, "num_kv_heads": kv, "num_hidden_layers": 1,
           "new_decoder_architecture": new, "multi_query": not new, "vocab_size": V,
           "bias": False, "parallel_attn": True}
    t = {"transformer.word_embeddings.weight": rows(V, H, 101),
         "transformer.ln_f.weight": vec(H, 102), "transformer.ln_f.bias": vec(H, 103),
         p + "self_attention.query_key_value.weight": rows((heads + 2 * groups) * hd, H),
         p + "self_attention.dense.weight": rows(H, H, 104),
         p + "mlp.dense_h_to_4h.weight": rows(4 * H, H, 105),
         p + "mlp.dense_4h_to_h.weight": rows(H, 4 * H, 106)}
    for ln in (["ln_attn", "ln_mlp"] if new else ["input_layernorm"]):
        t[p + ln + ".weight"] = vec(H, p + ln)
        t[p + ln + ".bias"] = vec(H, p + ln + "b")
elif arch == "telechat2":
    # key_value's rows numbered from 1000: q's rows 0 on, k's and v's apart
    p = "transformer.h.0."
    cfg = {"architectures": ["TeleChat2ForCausalLM"], "model_type": "telechat",
           "hidden_size": H, "n_head": heads, "num_key_value_heads": kv, "n_layer": 1,
           "ffn_hidden_size": 2 * H, "vocab_size": V, "tie_word_embeddings": False}
    t = {"transformer.word_embeddings.weight": rows(V, H, 120),
         "transformer.ln_f.weight": vec(H, 121), "lm_head.weight": rows(V, H, 122),
         p + "input_layernorm.weight": vec(H, 123),
         p + "post_attention_layernorm.weight": vec(H, 124),
         p + "self_attention.query.weight": rows(H, H),
         p + "self_attention.key_value.weight": rows(2 * kv * hd, H, 125, 1000),
         p + "self_attention.dense.weight": rows(H, H, 126),
         p + "self_attention.dense.bias": vec(H, 127),
         p + "mlp.gate_proj.weight": rows(2 * H, H, 128),
         p + "mlp.up_proj.weight": rows(2 * H, H, 129),
         p + "mlp.down_proj.weight": rows(H, 2 * H, 130),
         p + "mlp.down_proj.bias": vec(H, 131)}
    if not new:    # an MHA config.json that leaves the key out
        del cfg["num_key_value_heads"]
else:
    p = "h.0."
    cfg = {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": H,
           "n_head": heads, "n_layer": 1, "vocab_size": V}
    t = {"word_embeddings.weight": rows(V, H, 109), "ln_f.weight": vec(H, 110),
         "ln_f.bias": vec(H, 111), "word_embeddings_layernorm.weight": vec(H, 112),
         "word_embeddings_layernorm.bias": vec(H, 113),
         p + "self_attention.query_key_value.weight": rows(3 * H, H),
         p + "self_attention.query_key_value.bias": vec(3 * H),
         p + "self_attention.dense.weight": rows(H, H, 114),
         p + "self_attention.dense.bias": vec(H, 115),
         p + "mlp.dense_h_to_4h.weight": rows(4 * H, H, 116),
         p + "mlp.dense_h_to_4h.bias": vec(4 * H, 117),
         p + "mlp.dense_4h_to_h.weight": rows(H, 4 * H, 118),
         p + "mlp.dense_4h_to_h.bias": vec(H, 119)}
    for ln in ("input_layernorm", "post_attention_layernorm"):
        t[p + ln + ".weight"] = vec(H, p + ln)
        t[p + ln + ".bias"] = vec(H, p + ln + "b")
st.write(os.path.join(out, "model.safetensors"), t)
json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
PY
}

# rows_ok LABEL OUT TP HEADS KV NAME [kv_pair]: fails unless every rank of
# OUT holds NAME's rows (elements of a 1-D NAME) in vLLM's order; kv_pair:
# q's from TeleChat2's query, k's and v's from its key_value.
rows_ok() {
	py_st "$@" >"$T/rows" 2>&1 <<'PY' || fail "$1: $(cat "$T/rows")"
import glob, struct, sys
import st
label, out, name = sys.argv[1], sys.argv[2], sys.argv[6]
tp, heads, kv = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
hd = 32 // heads
qg = heads // kv
# falcon.py: view(kv, qg + 2, hd), narrow q, k, v, cat
src = lambda g, s: [(g * (qg + 2) + s) * hd + d for d in range(hd)]
q = [i for g in range(kv) for s in range(qg) for i in src(g, s)]
k = [i for g in range(kv) for i in src(g, qg)]
v = [i for g in range(kv) for i in src(g, qg + 1)]
if len(sys.argv) > 7:
    # telechat2.py's _split_key_value: kv head j's k rows, then its v rows
    q = list(range(heads * hd))
    k = [1000 + (2 * j) * hd + d for j in range(kv) for d in range(hd)]
    v = [1000 + (2 * j + 1) * hd + d for j in range(kv) for d in range(hd)]
bad = []
for r in range(tp):
    t = st.read(glob.glob("%s/model-rank-%d-part-*.safetensors" % (out, r)))
    dt, shape, b = t[name]
    step = len(b) // shape[0]
    got = [struct.unpack("<H", b[i:i + 2])[0] for i in range(0, len(b), step)]
    nq = heads // tp
    want = q[r * nq * hd:(r + 1) * nq * hd]
    if tp >= kv:
        h = r // (tp // kv)
        want += k[h * hd:(h + 1) * hd] + v[h * hd:(h + 1) * hd]
    else:
        n = kv // tp
        want += k[r * n * hd:(r + 1) * n * hd] + v[r * n * hd:(r + 1) * n * hd]
    if got != want:
        bad.append("rank %d holds rows %s, vLLM %s" % (r, got[:24], want[:24]))
print("; ".join(bad[:2]))
sys.exit(1 if bad else 0)
PY
}

QKV=transformer.h.0.self_attention.query_key_value
ckpt "$T/falcon40" falcon 8 2 1
ckpt "$T/falcon7" falcon 4 1 0
ckpt "$T/bloom" bloom 4 4 0
nl=0
for tp in 1 2 4 8; do
	o=$T/f40-$tp
	expect_exit 0 "$WSHARD" convert -q --no-sync --tp "$tp" "$T/falcon40" "$o" &&
		rows_ok "falcon new architecture, 8 heads, 2 kv, tp $tp" "$o" "$tp" 8 2 "$QKV.weight"
	nl=$((nl + 1))
done
for tp in 1 2 4; do
	o=$T/f7-$tp
	expect_exit 0 "$WSHARD" convert -q --no-sync --tp "$tp" "$T/falcon7" "$o" &&
		rows_ok "falcon multi_query, tp $tp" "$o" "$tp" 4 1 "$QKV.weight"
	o=$T/bloom-$tp
	expect_exit 0 "$WSHARD" convert -q --no-sync --tp "$tp" "$T/bloom" "$o" &&
		rows_ok "bloom weight, tp $tp" "$o" "$tp" 4 4 "$QKV.weight" &&
		rows_ok "bloom bias, tp $tp" "$o" "$tp" 4 4 "$QKV.bias"
	nl=$((nl + 2))
done
ckpt "$T/telechat2" telechat2 8 2 1
for tp in 1 2 4 8; do
	o=$T/tc-$tp
	expect_exit 0 "$WSHARD" convert -q --no-sync --tp "$tp" "$T/telechat2" "$o" &&
		rows_ok "telechat2 key_value, 8 heads, 2 kv, tp $tp" "$o" "$tp" 8 2 \
			model.layers.0.self_attn.qkv_proj.weight kv_pair
	nl=$((nl + 1))
done
# the prefix-less Bloom's outputs carry vLLM's names (lm_head.weight tied
# to its word_embeddings), its manifest the checkpoint's own, and verify
# reads them back
expect_exit 0 "$WSHARD" verify "$T/bloom-2"
expect_exit 0 "$WSHARD" inspect "$T/bloom-2/model-rank-0-part-0.safetensors"
for name in transformer.h.0.mlp.dense_h_to_4h.weight lm_head.weight; do
	grep -qF "$name" "$T/out" || fail "bloom output lacks $name"
done
grep -q '"h.0.self_attention.query_key_value.weight"' "$T/bloom-2/wshard.json" ||
	fail "bloom manifest lacks the source's own name"

# the learner reads the layout back from the outputs at tp 1, 2 and 4
# (standing in for vLLM's states, as in t-learn.sh)
$PYTHON "$ROOT/scripts/learn-rules" explain -o "$T/learned.json" "$T/falcon40" \
	"$T/f40-1" "$T/f40-2" "$T/f40-4" >"$T/learn" 2>&1 ||
	fail "learn-rules explain: $(tail -n 3 "$T/learn")"
grep -qF '"unpack": "query_key_value", "qkv_groups": true' "$T/learned.json" &&
	grep -qF '"kv_heads": "num_kv_heads"' "$T/learned.json" ||
	fail "the learned rules lack the grouped q/k/v: $(grep query_key_value "$T/learned.json")"

# heads that are no whole number of groups: refused before anything is written
ckpt "$T/falcon-bad" falcon 6 4 1
expect_exit 3 "$WSHARD" convert -q --tp 2 "$T/falcon-bad" "$T/bad"
one_line "falcon 6 heads, 4 kv"
err_has "heads not a multiple of kv" "num_attention_heads=6 is not a multiple of its 4 kv heads"
[ -e "$T/bad/wshard.json" ] && fail "a refused convert left a manifest"
# TeleChat2 without num_key_value_heads: vLLM's Telechat2Config leaves it
# None and builds no model, so the rules require it
ckpt "$T/telechat2-mha" telechat2 4 4 0
expect_exit 3 "$WSHARD" convert -q --tp 2 "$T/telechat2-mha" "$T/bad2"
one_line "telechat2 without num_key_value_heads"
err_has "no num_key_value_heads" "config.json: no 'num_key_value_heads', which vLLM needs to build TeleChat2ForCausalLM"
[ -e "$T/bad2/wshard.json" ] && fail "a refused convert left a manifest"
echo "qkv groups: $nl layouts in vLLM's order"
finish
