#!/bin/sh
# Llama 4 text (lib/rules/llama4.json) without torch: a checkpoint written
# here in transformers' names and layout (BF16, two shards), converted at
# tp 1, 2 and 4 (2 kv heads: at tp 4 each on two ranks),
# verified, and every tensor compared with a numpy model of what vLLM
# 0.32's llama4.py keeps per rank (q/k rows permuted within each head,
# permute_qk_weight_for_rotary; gate_up_proj transposed and chunked in
# gate and up, each cut by tp; dense and shared MLPs fused gate_up; o_proj
# and down_proj by columns); the manifest as printed JSON with its
# deinterleaved and chunked sources; per-channel q/k scales permuted as
# their weights, block scales refused; --dtype f32 the BF16 output widened;
# mpirun -np 2 with small windows byte-identical to one process; experts
# larger than --max-memory copied in tiles (one process, mpirun, verify); an
# expert intermediate size tp does not divide refused up front (exit 3,
# one line, no OUT).  --expert-parallel at tp 2 and 4, linear and
# round_robin (which vLLM places linearly: Llama4MoE routes ungrouped),
# with 4 experts and with 5 (E mod N != 0: the first ranks one more): each
# rank's routed experts whole, in vLLM's load_moe_expert_weights under an
# expert_map (transposed, indexed by the rank's experts, loaded whole),
# everything else as under tensor parallelism; verify passes; mpirun -np 2
# byte-identical to one process; fewer experts than ranks refused.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

need_reference

# mk DIR INTERMEDIATE [SCALES [EXPERTS]]: 4 layers (MoE in 1 and 3), 4
# heads of 16, 2 kv heads, hidden 64, EXPERTS experts (4), vocab 128;
# SCALES "channel": q/k/v
# with an F32 weight_scale a row ([rows, 1], as FP8 per-channel
# checkpoints), "block": a weight_scale_inv of 128x128 blocks.
mk() {
	"$PYTHON" - "$1" "$2" "${3:-}" "${4:-4}" <<'PY' || fail "could not write the Llama 4 checkpoint"
import json, os, struct, sys
import numpy as np
out, I, scales, E = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
os.makedirs(out)
H, nh, kv, hd, L, V, Im = 64, 4, 2, 16, 4, 128, 96
cfg = {"architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text",
       "hidden_size": H, "num_attention_heads": nh, "num_key_value_heads": kv,
       "head_dim": hd, "intermediate_size": I, "intermediate_size_mlp": Im,
       "num_local_experts": E, "num_experts_per_tok": 1, "vocab_size": V,
       "num_hidden_layers": L, "interleave_moe_layer_step": 2,
       "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
rng = np.random.default_rng(7)
t = {}
def w(name, *shape):
    t[name] = rng.integers(0, 65536, size=shape, dtype=np.uint16)
w("model.embed_tokens.weight", V, H); w("lm_head.weight", V, H); w("model.norm.weight", H)
for n in range(L):
    p = "model.layers.%d." % n
    w(p + "input_layernorm.weight", H); w(p + "post_attention_layernorm.weight", H)
    w(p + "self_attn.q_proj.weight", nh * hd, H); w(p + "self_attn.k_proj.weight", kv * hd, H)
    w(p + "self_attn.v_proj.weight", kv * hd, H); w(p + "self_attn.o_proj.weight", H, nh * hd)
    for x, rows in (("q", nh * hd), ("k", kv * hd), ("v", kv * hd)):
        if scales == "channel":
            t[p + "self_attn.%s_proj.weight_scale" % x] = rng.integers(0, 2**32, size=(rows, 1), dtype=np.uint32)
        elif scales == "block":
            t[p + "self_attn.%s_proj.weight_scale_inv" % x] = rng.integers(0, 2**32, size=(1, 1), dtype=np.uint32)
    f = p + "feed_forward."
    if n % 2:
        w(f + "router.weight", E, H)
        w(f + "experts.gate_up_proj", E, H, 2 * I); w(f + "experts.down_proj", E, I, H)
        for k in ("gate_proj", "up_proj"):
            w(f + "shared_expert.%s.weight" % k, I, H)
        w(f + "shared_expert.down_proj.weight", H, I)
    else:
        w(f + "gate_proj.weight", Im, H); w(f + "up_proj.weight", Im, H); w(f + "down_proj.weight", H, Im)
names = sorted(t)
half = len(names) // 2
wm = {}
for i, part in enumerate((names[:half], names[half:])):
    fn = "model-%05d-of-00002.safetensors" % (i + 1)
    h, off, blobs = {}, 0, []
    for k in part:
        b = t[k].tobytes()
        dt = "F32" if t[k].dtype == np.uint32 else "BF16"
        h[k] = {"dtype": dt, "shape": list(t[k].shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b); wm[k] = fn
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(os.path.join(out, fn), "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
PY
}

# check SRC OUT TP [PLACEMENT]: OUT as vLLM's llama4.py would hold each
# rank, under --enable-expert-parallel with PLACEMENT when given.
check() {
	py_st "$1" "$2" "$3" "${4:-}" <<'PY' || fail "$2: not what vLLM's llama4.py keeps"
import glob, json, os, struct, sys
import numpy as np
from st import arrays as load

src, out, tp, ep = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = load(src)
c = json.load(open(os.path.join(src, "config.json")))
nh, kv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]

def permute(x, heads):  # llama4.py permute_qk_weight_for_rotary
    f_out, f_in = x.shape
    return x.reshape(heads, f_out // heads // 2, 2, f_in).transpose(0, 2, 1, 3).reshape(f_out, f_in)

def rows(x, r, parts=tp):
    n = x.shape[0] // parts
    return x[r * n:(r + 1) * n]

def cols(x, r):
    n = x.shape[-1] // tp
    return x[..., r * n:(r + 1) * n]

def local_experts(E, r):
    # fused_moe/expert_map_manager.py: determine_expert_placement_strategy
    # falls back to linear without expert groups (Llama4MoE passes none),
    # then determine_expert_map: E // tp each, one more on the first ranks
    base, rem = divmod(E, tp)
    first = r * base + min(r, rem)
    return list(range(first, first + base + (r < rem)))

bad = 0
for r in range(tp):
    got = load(out, "model-rank-%d-part-*.safetensors" % r)
    want = {}
    for n in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % n
        a = p + "self_attn."
        q = permute(s[a + "q_proj.weight"], nh)
        k = permute(s[a + "k_proj.weight"], kv)
        v = s[a + "v_proj.weight"]
        kr = r // (tp // kv) if tp > kv else r
        kp = kv if tp > kv else tp
        want[a + "qkv_proj.weight"] = np.concatenate([rows(q, r), rows(k, kr, kp), rows(v, kr, kp)])
        if a + "q_proj.weight_scale" in s:  # permuted as their weights
            q = permute(s[a + "q_proj.weight_scale"], nh)
            k = permute(s[a + "k_proj.weight_scale"], kv)
            v = s[a + "v_proj.weight_scale"]
            want[a + "qkv_proj.weight_scale"] = np.concatenate([rows(q, r), rows(k, kr, kp), rows(v, kr, kp)])
        want[a + "o_proj.weight"] = cols(s[a + "o_proj.weight"], r)
        f = p + "feed_forward."
        if f + "router.weight" in s:
            want[f + "router.weight"] = s[f + "router.weight"]
            gu = s[f + "experts.gate_up_proj"].transpose(0, 2, 1)
            g, u = np.split(gu, 2, axis=1)
            w2 = s[f + "experts.down_proj"].transpose(0, 2, 1)
            if ep:  # load_moe_expert_weights: [local_expert_indices], whole
                le = local_experts(gu.shape[0], r)
                want[f + "experts.routed_experts.w13_weight"] = np.concatenate([g[le], u[le]], axis=1)
                want[f + "experts.routed_experts.w2_weight"] = w2[le]
            else:
                want[f + "experts.routed_experts.w13_weight"] = np.concatenate(
                    [rows(g.transpose(1, 0, 2), r).transpose(1, 0, 2),
                     rows(u.transpose(1, 0, 2), r).transpose(1, 0, 2)], axis=1)
                want[f + "experts.routed_experts.w2_weight"] = cols(w2, r)
            sh, se = f + "shared_expert.", f + "experts._shared_experts._layer."
            want[se + "gate_up_proj.weight"] = np.concatenate(
                [rows(s[sh + "gate_proj.weight"], r), rows(s[sh + "up_proj.weight"], r)])
            want[se + "down_proj.weight"] = cols(s[sh + "down_proj.weight"], r)
        else:
            want[f + "gate_up_proj.weight"] = np.concatenate(
                [rows(s[f + "gate_proj.weight"], r), rows(s[f + "up_proj.weight"], r)])
            want[f + "down_proj.weight"] = cols(s[f + "down_proj.weight"], r)
    for k, v in want.items():
        g = got.get(k)
        if g is None or g.shape != v.shape or not np.array_equal(g, v):
            print("rank %d: %s differs (%s, want %s)" % (r, k, None if g is None else g.shape, v.shape))
            bad += 1
sys.exit(1 if bad else 0)
PY
}

mk "$T/src" 32
for tp in 1 2 4; do
	out=$T/tp$tp
	expect_exit 0 "$WSHARD" convert -q --tp "$tp" "$T/src" "$out" || continue
	expect_exit 0 "$WSHARD" verify "$out"
	check "$T/src" "$out" "$tp"
	manifest_printed "tp $tp" "$out"
done

# the manifest: q/k deinterleaved in blocks of head_dim, experts chunked
grep -q '"deinterleaved": 16' "$T/tp2/wshard.json" || fail "no deinterleaved source in wshard.json"
grep -q '"cols": \[' "$T/tp2/wshard.json" || fail "no chunked expert source in wshard.json"

# one process against two, many small windows
expect_exit 0 run_mpi 2 "$WSHARD" convert -q --tp 2 --max-memory 1M "$T/src" "$T/mpi" &&
for r in 0 1; do
	cmp -s "$T/mpi/model-rank-$r-part-0.safetensors" "$T/tp2/model-rank-$r-part-0.safetensors" ||
		fail "mpirun -np 2 rank $r differs from one process"
done

# --dtype f32: the permuted and transposed output widened, value by value
expect_exit 0 "$WSHARD" convert -q --tp 2 --dtype f32 "$T/src" "$T/f32" &&
py_st "$T/tp2" "$T/f32" <<'PY' || fail "--dtype f32: not the BF16 output widened"
import sys
import numpy as np
from st import read
for r in (0, 1):
    a = read(["%s/model-rank-%d-part-0.safetensors" % (sys.argv[1], r)])
    w = read(["%s/model-rank-%d-part-0.safetensors" % (sys.argv[2], r)])
    for k in a:
        if a[k][0] != "BF16":
            continue
        x = np.frombuffer(a[k][2], np.uint16).astype(np.uint32) << 16
        y = np.frombuffer(w[k][2], np.uint32)
        # NaN payloads may be quieted: compare the non-NaN values
        keep = (x & 0x7f800000) != 0x7f800000
        if w[k][0] != "F32" or not np.array_equal(x[keep], y[keep]):
            sys.exit("%s differs" % k)
PY

# experts larger than --max-memory: intermediate 2048, gate_up_proj
# [4, 64, 4096] BF16 (512 KiB an expert, 2 MiB its copy) read in tiles of
# output rows at --max-memory 1M, in one process with 8 stream threads
# (128 KiB each: down_proj's 256 KiB experts too) and under mpirun -np 2
# (gate_up_proj's), at tp 2 and 4, as BF16 and --dtype f32: the bytes of
# whole experts, which are vLLM's; verify tiles too
mk "$T/big" 2048
for tp in 2 4; do
	for dt in bf16 f32; do
		out=$T/big-$dt-tp$tp
		expect_exit 0 "$WSHARD" convert -q --tp $tp --dtype $dt "$T/big" "$out" || continue
		[ $dt = bf16 ] && check "$T/big" "$out" $tp
		expect_exit 0 env WSHARD_STREAM_THREADS=8 "$WSHARD" convert -q --tp $tp --dtype $dt \
			--max-memory 1M "$T/big" "$out-1m"
		expect_exit 0 run_mpi 2 "$WSHARD" convert -q --tp $tp --dtype $dt --max-memory 1M \
			"$T/big" "$out-mpi"
		r=0
		while [ $r -lt $tp ]; do
			for o in 1m mpi; do
				cmp -s "$out-$o/model-rank-$r-part-0.safetensors" \
					"$out/model-rank-$r-part-0.safetensors" ||
					fail "big $dt tp $tp $o: rank $r differs from whole experts"
			done
			r=$((r + 1))
		done
	done
done
expect_exit 0 env WSHARD_STREAM_THREADS=8 "$WSHARD" verify "$T/big-bf16-tp2-1m"

# an expert intermediate size of 6: gate and up 6 each, not cut by tp 4
# (the shared expert's rule, whose shape names the key, is met first)
mk "$T/i6" 6
expect_exit 3 "$WSHARD" convert -q --tp 4 "$T/i6" "$T/i6-out" && {
	one_line "intermediate 6 tp 4"
	err_has "intermediate 6 tp 4" "intermediate_size=6 is not divisible by --tp 4"
	[ -e "$T/i6-out" ] && fail "intermediate 6 tp 4: OUT was created"
}

# per-channel scales follow their weights' rows; block scales are refused
mk "$T/ch" 32 channel
for tp in 2 4; do
	expect_exit 0 "$WSHARD" convert -q --tp "$tp" "$T/ch" "$T/ch-tp$tp" &&
		check "$T/ch" "$T/ch-tp$tp" "$tp"
done
mk "$T/blk" 32 block
expect_exit 3 "$WSHARD" convert -q --tp 2 "$T/blk" "$T/blk-out" && {
	one_line "block scales"
	err_has "block scales" "_proj.weight_scale_inv': a block-wise scale cannot be deinterleaved"
}

# expert parallelism: 4 experts, and 5 (the first ranks hold one more)
mk "$T/e5" 32 "" 5
for src in src e5; do
	for tp in 2 4; do
		for pl in linear round_robin; do
			out=$T/ep-$src-$tp-$pl
			expect_exit 0 "$WSHARD" convert -q --tp "$tp" --expert-parallel \
				--expert-placement "$pl" "$T/$src" "$out" || continue
			expect_exit 0 "$WSHARD" verify "$out"
			check "$T/$src" "$out" "$tp" "$pl"
		done
	done
done
grep -q '"expert_placement": "linear"' "$T/ep-e5-2-round_robin/wshard.json" ||
	fail "--expert-placement round_robin: the manifest does not record the linear placement held"
expect_exit 0 run_mpi 2 "$WSHARD" convert -q --tp 4 --expert-parallel --max-memory 1M \
	"$T/e5" "$T/ep-mpi" &&
for r in 0 1 2 3; do
	cmp -s "$T/ep-mpi/model-rank-$r-part-0.safetensors" \
		"$T/ep-e5-4-linear/model-rank-$r-part-0.safetensors" ||
		fail "--expert-parallel: mpirun -np 2 rank $r differs from one process"
done
mk "$T/e3" 32 "" 3
expect_exit 3 "$WSHARD" convert -q --tp 4 --expert-parallel "$T/e3" "$T/ep-e3" && {
	one_line "3 experts, 4 ranks"
	err_has "3 experts, 4 ranks" "--expert-parallel: tensor 'model.layers.1.feed_forward.experts.gate_up_proj' holds 3 experts for 4 ranks"
	[ -e "$T/ep-e3" ] && fail "3 experts, 4 ranks: OUT was created"
}
finish
