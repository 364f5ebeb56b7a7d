#!/bin/sh
# GPT-OSS (lib/rules/gpt_oss.json) without torch: checkpoints from
# gen-checkpoint --arch gpt_oss (MXFP4 experts) and --bf16-experts,
# converted at tp 1, 2 and 4, verified, and every expert tensor compared
# with a numpy model of test/engine/GPTOSS-LAYOUT.md's table (MXFP4: w2's
# blocks and scales cut in dimension 2, the blocks viewed [E, R, C/2];
# BF16: each expert transposed; the down bias on rank 0, zeros elsewhere;
# the sinks by heads); the manifest as printed JSON, its transposed and
# row_dims sources; --dtype f32 of the BF16 experts; mpirun -np 2
# byte-identical to one process; experts larger than --max-memory copied
# in tiles within it (one process, mpirun -np 2, verify) and refused from
# a compressed archive; a rank boundary inside an MXFP4 block
# refused (exit 3, one line naming the tensor, no OUT), also at
# --expert-parallel: vLLM keeps whole experts a rank (gpt_oss.py), which
# the rules do not write: refused from the plan (exit 3, one line, no OUT)
# gpt-oss-20b/120b's own dimensions, where only tp 1 and 2 split.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

need_reference

gen "$T/mx" --arch gpt_oss
gen "$T/bf" --arch gpt_oss --bf16-experts

# --expert-parallel: refused from the plan (exit 3, one line, no OUT)
expect_exit 3 "$WSHARD" convert -q --tp 2 --expert-parallel "$T/mx" "$T/mx-ep" && {
	err_has "--expert-parallel" "--expert-parallel is not written for builtin:gpt_oss: vLLM keeps a contiguous block of whole experts a rank"
	[ ! -e "$T/mx-ep" ] || fail "--expert-parallel left $T/mx-ep behind"
}

# check SRC OUT TP: OUT's expert tensors as the table says.
check() {
	py_st "$1" "$2" "$3" <<'PY' || fail "$2: not the layout of GPTOSS-LAYOUT.md"
import glob, json, os, struct, sys
import numpy as np
from st import arrays as load

src, out, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = load(src)
cfg = json.load(open(os.path.join(src, "config.json")))
I, nh = cfg["intermediate_size"], cfg["num_attention_heads"]
bad = 0
for r in range(tp):
    got = load(out, "model-rank-%d-part-*.safetensors" % r)
    lo, hi = r * I // tp, (r + 1) * I // tp
    for n in range(cfg["num_hidden_layers"]):
        p, q = "model.layers.%d.mlp.experts." % n, "model.layers.%d.mlp.experts.routed_experts." % n
        want = {}
        if p + "gate_up_proj" in s:
            want["w13_weight"] = s[p + "gate_up_proj"][:, :, 2 * lo:2 * hi].transpose(0, 2, 1)
            want["w2_weight"] = s[p + "down_proj"][:, lo:hi, :].transpose(0, 2, 1)
        else:
            e = s[p + "gate_up_proj_blocks"].shape[0]
            want["w13_weight"] = s[p + "gate_up_proj_blocks"].reshape(e, 2 * I, -1)[:, 2 * lo:2 * hi]
            want["w13_weight_scale"] = s[p + "gate_up_proj_scales"][:, 2 * lo:2 * hi]
            h = s[p + "down_proj_blocks"].shape[1]
            want["w2_weight"] = s[p + "down_proj_blocks"].reshape(e, h, -1)[..., lo // 2:hi // 2]
            want["w2_weight_scale"] = s[p + "down_proj_scales"][..., lo // 32:hi // 32]
        want["w13_bias"] = s[p + "gate_up_proj_bias"][:, 2 * lo:2 * hi]
        b = s[p + "down_proj_bias"]
        want["w2_bias"] = b if r == 0 else np.zeros_like(b)
        for k, v in want.items():
            g = got.get(q + k)
            if g is None or g.shape != v.shape or not np.array_equal(g, v):
                print("rank %d: %s%s differs (%s, want %s)" % (r, q, k, None if g is None else g.shape, v.shape))
                bad += 1
        a = "model.layers.%d." % n
        sk = s[a + "self_attn.sinks"][r * nh // tp:(r + 1) * nh // tp]
        if not np.array_equal(got.get(a + "attn.sinks"), sk):
            print("rank %d: sinks differ" % r)
            bad += 1
sys.exit(1 if bad else 0)
PY
}

for kind in mx bf; do
	for tp in 1 2 4; do
		out=$T/$kind-tp$tp
		expect_exit 0 "$WSHARD" convert -q --tp "$tp" "$T/$kind" "$out" || continue
		expect_exit 0 "$WSHARD" verify "$out"
		check "$T/$kind" "$out" "$tp"
		manifest_printed "$kind tp $tp" "$out"
	done
	# one process against two, many windows
	expect_exit 0 run_mpi 2 "$WSHARD" convert -q --tp 2 --max-memory 1M "$T/$kind" "$T/$kind-mpi" &&
	for r in 0 1; do
		cmp -s "$T/$kind-mpi/model-rank-$r-part-0.safetensors" \
			"$T/$kind-tp2/model-rank-$r-part-0.safetensors" ||
			fail "$kind: mpirun -np 2 rank $r differs from one process"
	done
	expect_exit 0 run_mpi 2 "$WSHARD" verify "$T/$kind-mpi"
done

# the manifest: transposed BF16 experts, MXFP4's E*H rows
grep -q '"transposed": true' "$T/bf-tp2/wshard.json" || fail "bf: no transposed source in wshard.json"
grep -q '"row_dims": 2' "$T/mx-tp2/wshard.json" || fail "mx: no row_dims in wshard.json"

# --dtype f32: the transposed BF16 experts converted element by element
expect_exit 0 "$WSHARD" convert -q --tp 2 --dtype f32 "$T/bf" "$T/bf-f32" &&
py_st "$T/bf-tp2" "$T/bf-f32" <<'PY' || fail "bf --dtype f32: not the BF16 output widened"
import sys
import numpy as np
from st import read
for r in (0, 1):
    a = read(["%s/model-rank-%d-part-0.safetensors" % (sys.argv[1], r)])
    w = read(["%s/model-rank-%d-part-0.safetensors" % (sys.argv[2], r)])
    for k in a:
        if "experts.routed_experts.w" in k and k.endswith("_weight"):
            x = np.frombuffer(a[k][2], np.uint16).astype(np.uint32) << 16
            if w[k][0] != "F32" or not np.array_equal(x, np.frombuffer(w[k][2], np.uint32)):
                sys.exit("%s differs" % k)
PY

# a rank boundary inside a 32-value block: 3 blocks over 2 ranks
gen "$T/mx96" --arch gpt_oss --intermediate 96
expect_exit 3 "$WSHARD" convert -q --tp 2 "$T/mx96" "$T/mx96-out" && {
	one_line "intermediate 96 tp 2"
	err_has "intermediate 96 tp 2" "'model.layers.0.mlp.experts.down_proj_blocks': dimension 2 (3) is not divisible by --tp 2"
	[ -e "$T/mx96-out" ] && fail "intermediate 96 tp 2: OUT was created"
}

# Whole experts larger than --max-memory: gate_up_proj [4, 1024, 8192]
# BF16 is 16 MiB an expert (down_proj 8 MiB).  With --max-memory 1M each
# transposed piece is read in tiles of output rows: the bytes are those of
# a run with room for whole experts, in one process and under mpirun -np
# 2, and each process's peak resident set stays within half an expert of
# the same run on the small checkpoint (copying whole experts held one
# mapped and one transposed).  verify (WSHARD_STREAM_THREADS=2: 32 MiB a
# thread, less than an expert's copy needs) tiles too, passes, and finds a
# byte flipped inside w13_weight at its offset.
gen "$T/big" --arch gpt_oss --bf16-experts --hidden 1024 --intermediate 4096 --experts 4 \
	--layers 1 --heads 8 --kv-heads 2 --head-dim 64 --vocab 256
# rss.sh FILE CMD...: runs CMD, writes its peak RSS in KiB to FILE.RANK
cat >"$T/rss.sh" <<'EOF'
#!/bin/sh
f=$1.${OMPI_COMM_WORLD_RANK:-0}; shift
exec "$PYTHON" -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[2:]).returncode
open(sys.argv[1], "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$f" "$@"
EOF
chmod +x "$T/rss.sh"
export PYTHON
# peak NAME: the largest peak RSS (KiB) of the processes of run NAME
peak() { sort -n "$T/rss-$1".* | tail -n 1; }
# bounded WHAT SMALL BIG: run BIG's peak within 8 MiB (half an expert) of SMALL's
bounded() {
	case "${B:-}" in *san*) return ;; esac	# ASan's shadow and quarantine
	s=$(peak "$2") b=$(peak "$3")
	[ "$b" -lt $((s + 8192)) ] ||
		fail "$1: peak RSS $b KiB, over the small checkpoint's $s KiB + 8 MiB (an expert: 16 MiB)"
}
expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/big" "$T/big-whole"
expect_exit 0 "$T/rss.sh" "$T/rss-small1" "$WSHARD" convert -q --tp 2 --max-memory 1M \
	"$T/bf" "$T/bf-1m"
expect_exit 0 "$T/rss.sh" "$T/rss-big1" "$WSHARD" convert -q --tp 2 --max-memory 1M \
	"$T/big" "$T/big-1m" && bounded "one process" small1 big1
expect_exit 0 run_mpi 2 "$T/rss.sh" "$T/rss-small2" "$WSHARD" convert -q --tp 2 \
	--max-memory 1M "$T/bf" "$T/bf-1m-mpi"
expect_exit 0 run_mpi 2 "$T/rss.sh" "$T/rss-big2" "$WSHARD" convert -q --tp 2 \
	--max-memory 1M "$T/big" "$T/big-1m-mpi" && bounded "mpirun -np 2" small2 big2
for o in big-1m big-1m-mpi; do
	for r in 0 1; do
		cmp -s "$T/$o/model-rank-$r-part-0.safetensors" \
			"$T/big-whole/model-rank-$r-part-0.safetensors" ||
			fail "$o: rank $r differs from whole experts"
	done
done
check "$T/big" "$T/big-1m" 2
expect_exit 0 env WSHARD_STREAM_THREADS=2 "$WSHARD" verify "$T/big-1m"
cp -r "$T/big-1m" "$T/big-flip"
w13=model.layers.0.mlp.experts.routed_experts.w13_weight
py_st "$T/big-flip/model-rank-1-part-0.safetensors" "$w13" <<'PY' || fail "could not flip a byte"
import sys
from st import flip_byte
flip_byte(sys.argv[1], sys.argv[2], 3 * 2**20 + 7)
PY
expect_exit 1 env WSHARD_STREAM_THREADS=2 "$WSHARD" verify "$T/big-flip" &&
	{ grep -qF "rank 1: tensor '$w13': bytes differ from the source at byte offset 3145735" \
		"$T/out" || fail "verify: no difference at w13_weight's flipped byte: $(head -c 400 "$T/out")"; }

# A compressed archive is read front to back: no tiles.  An expert whose
# copy needs more than --max-memory (gate_up_proj [4, 256, 1024] BF16:
# 512 KiB an expert, 2 MiB its copy) is refused up front (exit 3, one line
# naming the tensor, the bytes and --max-memory; no OUT); with room for it
# the bytes are the tiled ones from the directory.  An uncompressed tar
# is read in place, in tiles.
gen "$T/mid/bfm" --arch gpt_oss --bf16-experts --hidden 256 --intermediate 512 --experts 4 \
	--layers 1 --heads 8 --kv-heads 2 --head-dim 32 --vocab 256
{ tar -C "$T/mid" -czf "$T/bfm.tar.gz" bfm && tar -C "$T/mid" -cf "$T/bfm.tar" bfm; } ||
	fail "could not pack bfm"
expect_exit 0 "$WSHARD" convert -q --tp 2 --max-memory 1M "$T/mid/bfm" "$T/bfm-dir"
expect_exit 3 "$WSHARD" convert -q --tp 2 --max-memory 1M "$T/bfm.tar.gz" "$T/bfm-gz1" && {
	one_line "tar.gz 1M"
	err_has "tar.gz 1M" "tensor 'model.layers.0.mlp.experts.gate_up_proj': its transposed copy from an archive read front to back needs 2097152 bytes for one expert, more than the memory budget of 1048576 bytes"
	[ -e "$T/bfm-gz1" ] && fail "tar.gz 1M: OUT was created"
}
expect_exit 0 "$WSHARD" convert -q --tp 2 --max-memory 2M "$T/bfm.tar.gz" "$T/bfm-gz2"
expect_exit 0 "$WSHARD" convert -q --tp 2 --max-memory 1M "$T/bfm.tar" "$T/bfm-tar1"
for o in bfm-gz2 bfm-tar1; do
	for r in 0 1; do
		cmp -s "$T/$o/model-rank-$r-part-0.safetensors" \
			"$T/bfm-dir/model-rank-$r-part-0.safetensors" ||
			fail "$o: rank $r differs from the directory's"
	done
done

# gpt-oss-20b/120b's own dimensions (hidden and intermediate 2880: 90
# blocks; 64 heads, 8 kv heads), 4 experts, 1 layer: only tp 2 splits the
# blocks whole; tp 4 and 8 are refused up front
gen "$T/real" --arch gpt_oss --hidden 2880 --intermediate 2880 --heads 64 --kv-heads 8 \
	--head-dim 64 --experts 4 --layers 1
expect_exit 0 "$WSHARD" convert -q --tp 2 "$T/real" "$T/real-tp2" &&
	expect_exit 0 "$WSHARD" verify "$T/real-tp2"
for tp in 4 8; do
	expect_exit 3 "$WSHARD" convert -q --tp $tp "$T/real" "$T/real-tp$tp" && {
		one_line "2880 tp $tp"
		err_has "2880 tp $tp" "'model.layers.0.mlp.experts.down_proj_blocks': dimension 2 (90) is not divisible by --tp $tp"
	}
done
finish
