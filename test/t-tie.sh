#!/bin/sh
# A head shipped beside a tie.  config.json says tie_word_embeddings, the
# checkpoint holds an lm_head.weight too: vLLM 0.32 then loads that head
# untied (ModelConfig.maybe_untie_word_embeddings) and ties the two again
# only where their bytes are the same.  So wshard writes a head that
# differs untied (each rank its vocabulary rows of the shipped head, the
# embedding its own) and its config.json false, and keeps a copy that is
# the same tied, config.json as it was.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
need_reference

gen "$T/differs" --arch llama --tie --lm-head
mkdir -p "$T/same"
cp "$T"/differs/*.json "$T/same/"
py_st "$T/differs/model.safetensors" "$T/same/model.safetensors" <<'PY' || fail "writing the copy failed"
import sys
import st
t = st.read([sys.argv[1]])
t["lm_head.weight"] = t["model.embed_tokens.weight"]
st.write(sys.argv[2], t)
PY

# rows_of SRC OUT RANK NAME SRCNAME: OUT's rank RANK holds SRCNAME's rows of
# its vocabulary share as NAME (the padding past the vocabulary aside)
rows_of() {
	py_st "$@" <<'PY'
import glob, sys
import st
src, out, r, name, sname = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
s = st.read([src + "/model.safetensors"])[sname]
o = st.read(glob.glob("%s/model-rank-%d-part-*.safetensors" % (out, r)))
if name not in o:
    sys.exit(1)
dt, shape, b = o[name]
rb = len(s[2]) // s[1][0]
want = s[2][r * shape[0] * rb:(r + 1) * shape[0] * rb]
sys.exit(0 if b[:len(want)] == want else 1)
PY
}

expect_exit 0 "$WSHARD" convert -q --no-sync --tp 2 "$T/differs" "$T/out-differs"
grep -q '"tie_word_embeddings": false' "$T/out-differs/config.json" ||
	fail "an untied head left config.json tied: $(grep -o '"tie_word_embeddings": [a-z]*' "$T/out-differs/config.json")"
for r in 0 1; do
	rows_of "$T/differs" "$T/out-differs" $r lm_head.weight lm_head.weight ||
		fail "rank $r: lm_head.weight is not the shipped head's rows"
	rows_of "$T/differs" "$T/out-differs" $r model.embed_tokens.weight model.embed_tokens.weight ||
		fail "rank $r: model.embed_tokens.weight is not the embedding's rows"
done
expect_exit 0 "$WSHARD" verify "$T/out-differs"

expect_exit 0 "$WSHARD" convert -q --no-sync --tp 2 "$T/same" "$T/out-same"
cmp -s "$T/same/config.json" "$T/out-same/config.json" || fail "a tied copy changed config.json"
for r in 0 1; do
	rows_of "$T/same" "$T/out-same" $r lm_head.weight model.embed_tokens.weight ||
		fail "rank $r: the tied head is not the embedding's rows"
	rows_of "$T/same" "$T/out-same" $r model.embed_tokens.weight model.embed_tokens.weight &&
		fail "rank $r: a tied copy wrote the embedding apart"
done

# Step-1: its config class sets no tie_word_embeddings, so where
# config.json names none vLLM ties whatever head the checkpoint ships
# (step1.json's default_holds): the head is the embedding's rows, and
# --pp is refused (vLLM reads the key on every later stage)
mkdir -p "$T/step1"
cp "$T/differs/model.safetensors" "$T/step1/"
py_st "$T/differs/config.json" "$T/step1/config.json" <<'PY' || fail "writing step1 failed"
import json, sys
c = json.load(open(sys.argv[1]))
c.pop("tie_word_embeddings", None)
c.update(architectures=["Step1ForCausalLM"], model_type="step1",
         num_attention_groups=c.pop("num_key_value_heads", c["num_attention_heads"]))
c.pop("head_dim", None)
json.dump(c, open(sys.argv[2], "w"))
PY
expect_exit 0 "$WSHARD" convert -q --no-sync --tp 2 "$T/step1" "$T/out-step1"
cmp -s "$T/step1/config.json" "$T/out-step1/config.json" || fail "step1: a kept tie changed config.json"
for r in 0 1; do
	rows_of "$T/step1" "$T/out-step1" $r lm_head.weight model.embed_tokens.weight ||
		fail "step1 rank $r: the tied head is not the embedding's rows"
done
expect_exit 3 "$WSHARD" convert -q --no-sync --tp 1 --pp 2 "$T/step1" "$T/out-step1-pp"
one_line "step1 --pp 2 without tie_word_embeddings"
err_has "step1 --pp refused" "tie_word_embeddings"
[ -e "$T/out-step1-pp/wshard.json" ] && fail "a refused convert left a manifest"

# PLaMo 3 (tied by default) with a head of its own: written where the
# vocabulary is a multiple of 16, refused with the rules' reason where it
# is not (vLLM pads that head past what a vocab split writes)
plamo3() {
	mkdir -p "$1"
	py_st "$@" <<'PY' || fail "writing $1 failed"
import json, sys
import st
out, V, tie = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "tie"
H, hd, I = 64, 16, 96
bf = lambda *s: ("BF16", list(s), bytes((i * 7) % 251 for i in range(2 * eval("*".join(map(str, s))))))
p = "model.layers.layers.0."
t = {"model.embed_tokens.weight": bf(V, H), "model.norm.weight": bf(H),
     "lm_head.weight": ("BF16", [V, H], bytes((i * 5) % 253 for i in range(2 * V * H))),
     p + "mixer.qkv_proj.weight": bf((4 + 2 * 2) * hd, H), p + "mixer.o_proj.weight": bf(H, 4 * hd),
     p + "mixer.q_norm.weight": bf(hd), p + "mixer.k_norm.weight": bf(hd),
     p + "mlp.gate_up_proj.weight": bf(2 * I, H), p + "mlp.down_proj.weight": bf(H, I)}
for n in ("pre_mixer", "post_mixer", "pre_mlp", "post_mlp"):
    t[p + n + "_norm.weight"] = bf(H)
st.write(out + "/model.safetensors", t)
json.dump({"architectures": ["Plamo3ForCausalLM"], "model_type": "plamo3", "hidden_size": H,
           "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": hd, "intermediate_size": I, "vocab_size": V,
           "tie_word_embeddings": tie, "torch_dtype": "bfloat16"}, open(out + "/config.json", "w"))
PY
}
plamo3 "$T/plamo3-1008" 1008 untied
expect_exit 0 "$WSHARD" convert -q --no-sync --tp 2 "$T/plamo3-1008" "$T/out-plamo3-1008"
for v in untied tie; do
	plamo3 "$T/plamo3-$v" 1000 $v
	expect_exit 3 "$WSHARD" convert -q --no-sync --tp 2 "$T/plamo3-$v" "$T/out-plamo3-$v"
	one_line "plamo3 $v, vocabulary 1000"
	err_has "plamo3 $v head refused" "tensor 'lm_head.weight': a head of its own over a vocabulary that is no multiple of 16"
	[ -e "$T/out-plamo3-$v/wshard.json" ] && fail "a refused convert left a manifest"
done
echo "tie: a differing head untied, a copy kept tied, Step-1's default tie kept"
finish
