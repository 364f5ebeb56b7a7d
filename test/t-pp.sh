#!/bin/sh
# Pipeline parallelism (convert --pp P): what each stage of vLLM's
# pipeline loads (its byte-for-byte check against vLLM's own workers is in
# the engine suite, test/engine/run's :ppP cases).
#
# (a) Llama, 5 layers, tp 2, pp 2: stage s rank t's files are
#     model-pp-s-tp-t-part-*.safetensors and hold exactly the tp 2 output's
#     tensors of the layers vLLM's get_pp_indices gives the stage (3 + 2),
#     with the embedding on the first stage and the norm and head on the
#     last, each byte equal; verify passes; the manifest records pp, the
#     split and each rank's stage; inspect --stage S [--rank R] shows them.
# (b) --pp 3 (2 + 2 + 1, the remainder before the last stage) and
#     --pp-layers 1,4 (vLLM's VLLM_PP_LAYER_PARTITION); tied embeddings:
#     the head on the last stage, the embedding (its own name) on the first.
# (c) Qwen3-MoE: every stage holds the embedding, norm and head (vLLM's
#     Qwen3MoeModel builds them on every stage).
# (d) mpirun -np 3 with tp 2 x pp 2: byte-identical to one process; one
#     process reads each source byte once (the tensors on every stage too).
# (e) refusals, nothing written: a --pp-layers of the wrong count (exit 2)
#     or sum (exit 3), more stages than layers (exit 3), rules with no
#     "pipeline" key or a first stage short of its "first_stage_min"
#     (exit 3), --archive with --pp (exit 2); --pp 1 writes
#     today's model-rank-R names; --force replaces an output of stages
#     with one without, and back.
# shellcheck disable=SC2086,SC1091
. "$(dirname "$0")/lib.sh"

need_reference
PLAIN="env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK"

S="--layers 5 --hidden 64 --heads 8 --kv-heads 2 --vocab 250 --intermediate 128 --seed 9"
gen "$T/ll" --arch llama $S --shards 3
gen "$T/tied" --arch llama $S --tie
gen "$T/q3" --arch qwen3_moe --layers 3 --hidden 64 --heads 8 --kv-heads 2 --vocab 250 \
	--experts 4 --head-dim 16 --intermediate 128 --moe-intermediate 32

conv() { o=$1; shift; $PLAIN "$WSHARD" convert -q "$@" "$T/$o" >"$T/cerr" 2>&1 ||
	fail "convert $* $o: $(head -c 400 "$T/cerr")"; }

# stages LABEL PLAIN STAGED TP LAYERS NONLAYER: STAGED's stage s rank t
# holds the tensors of PLAIN's rank t (its tp-only output) that belong to
# stage s, byte for byte.  LAYERS: layers per stage ("3,2"); NONLAYER:
# for each tensor outside the layers, where it is ("first", "last", "all";
# "name=stage,..."), the tied embedding renamed on the first stage.
stages() {
	"$PYTHON" - "$ROOT/test" "$2" "$3" "$4" "$5" "$6" <<'EOF' || fail "$1: stages differ from the tp output"
import glob, json, re, sys
sys.path.insert(0, sys.argv[1])
import st
plain, staged, tp = sys.argv[2], sys.argv[3], int(sys.argv[4])
per = [int(x) for x in sys.argv[5].split(",")]
where = dict(kv.split("=") for kv in sys.argv[6].split(","))
def read(pattern):
    return st.read(sorted(glob.glob(pattern)))
m = json.load(open(f"{staged}/wshard.json"))
assert m["parallel"]["pp"] == len(per) and m["parallel"]["pp_layers"] == per, m["parallel"]
bad = 0
for s in range(len(per)):
    first = sum(per[:s])
    for r in range(tp):
        e = m["ranks"][s * tp + r]
        assert (e["rank"], e["stage"], e["tp_rank"]) == (s * tp + r, s, r), e
        assert all(f["name"].startswith(f"model-pp-{s}-tp-{r}-part-") for f in e["files"])
        want = {}
        for k, v in read(f"{plain}/model-rank-{r}-part-*.safetensors").items():
            g = re.match(r"model\.layers\.(\d+)\.", k)
            if g:
                keep = first <= int(g.group(1)) < first + per[s]
            else:
                w = where[k]
                keep = w == "all" or (w == "first" and s == 0) or \
                    (w == "last" and s == len(per) - 1)
                if w.startswith("tied:") and s == 0 and len(per) > 1:
                    want[w[5:]] = v
                keep |= w.startswith("tied:") and s == len(per) - 1
            if keep:
                want[k] = v
        got = read(f"{staged}/model-pp-{s}-tp-{r}-part-*.safetensors")
        if got != want:
            bad += 1
            print(f"stage {s} rank {r}: missing {sorted(set(want) - set(got))[:4]}, "
                  f"extra {sorted(set(got) - set(want))[:4]}, differing "
                  f"{[k for k in want if k in got and got[k] != want[k]][:4]}")
sys.exit(bad)
EOF
}

# (a)
DENSE="model.embed_tokens.weight=first,model.norm.weight=last,lm_head.weight=last"
conv ll2 --tp 2 "$T/ll"
conv ll22 --tp 2 --pp 2 "$T/ll"
stages "llama tp 2 pp 2" "$T/ll2" "$T/ll22" 2 3,2 "$DENSE"
"$WSHARD" verify "$T/ll22" >"$T/vout" 2>&1 || fail "verify tp 2 pp 2: $(head -c 300 "$T/vout")"
manifest_printed "tp 2 pp 2" "$T/ll22"
expect_exit 0 "$WSHARD" inspect "$T/ll22" &&
	{ grep -q "^pipeline: 2 stages, decoder layers per stage: 3,2$" "$T/out" &&
	  grep -q "^stage 1 rank 1: " "$T/out"; } || fail "inspect: no stages: $(head -c 300 "$T/out")"
expect_exit 0 "$WSHARD" inspect --stage 1 --rank 0 "$T/ll22" &&
	{ grep -q "^model.norm.weight .*model-pp-1-tp-0-part-0.safetensors" "$T/out" &&
	  ! grep -q "^model.layers.2\." "$T/out"; } ||
	fail "inspect --stage 1 --rank 0: $(head -c 300 "$T/out")"
expect_exit 2 "$WSHARD" inspect --rank 0 "$T/ll22" && err_has "inspect --rank" "--rank needs --stage"
expect_exit 2 "$WSHARD" inspect --stage 2 "$T/ll22" && err_has "inspect --stage 2" "no stage 2"

# (b)
conv ll1 --tp 1 "$T/ll"
conv ll13 --tp 1 --pp 3 "$T/ll"
stages "llama pp 3" "$T/ll1" "$T/ll13" 1 2,2,1 "$DENSE"
conv ll1p --tp 1 --pp 2 --pp-layers 1,4 "$T/ll"
stages "llama --pp-layers 1,4" "$T/ll1" "$T/ll1p" 1 1,4 "$DENSE"
"$WSHARD" verify "$T/ll1p" >"$T/vout" 2>&1 || fail "verify --pp-layers: $(head -c 300 "$T/vout")"
conv ti2 --tp 2 "$T/tied"
conv ti22 --tp 2 --pp 2 "$T/tied"
stages "tied llama" "$T/ti2" "$T/ti22" 2 3,2 \
	"model.norm.weight=last,lm_head.weight=tied:model.embed_tokens.weight"

# (c)
conv q2 --tp 2 "$T/q3"
conv q22 --tp 2 --pp 2 "$T/q3"
stages "qwen3_moe" "$T/q2" "$T/q22" 2 2,1 \
	"model.embed_tokens.weight=all,model.norm.weight=all,lm_head.weight=all"

# (d)
$PLAIN "$WSHARD" convert --json --tp 2 --pp 3 "$T/q3" "$T/q23" >"$T/json" 2>"$T/cerr" ||
	fail "qwen3_moe pp 3: $(head -c 300 "$T/cerr")"
"$PYTHON" -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j["bytes_read"] != j["source_tensor_bytes"] or j["pp"] != 3)' \
	"$T/json" || fail "pp 3: bytes read differ from the source's tensor bytes: $(cat "$T/json")"
if command -v mpirun >/dev/null 2>&1; then
	run_mpi 3 "$WSHARD" convert -q --tp 2 --pp 2 "$T/ll" "$T/mpi" >"$T/merr" 2>&1 ||
		fail "mpirun -np 3 tp 2 pp 2: $(head -c 300 "$T/merr")"
	for f in "$T"/ll22/model-pp-*.safetensors; do
		cmp -s "$f" "$T/mpi/$(basename "$f")" || fail "mpirun -np 3: $(basename "$f") differs"
	done
fi

# (e)
expect_exit 2 $PLAIN "$WSHARD" convert --tp 1 --pp 2 --pp-layers 5 "$T/ll" "$T/no1" &&
	one_line "--pp-layers count" && err_has "--pp-layers count" "--pp-layers needs 2"
expect_exit 3 $PLAIN "$WSHARD" convert --tp 1 --pp 2 --pp-layers 1,3 "$T/ll" "$T/no2" &&
	one_line "--pp-layers sum" && err_has "--pp-layers sum" "adds up to 4 layers; the model has 5"
expect_exit 3 $PLAIN "$WSHARD" convert --tp 1 --pp 6 "$T/ll" "$T/no3" &&
	err_has "--pp 6" "5 decoder layers"
grep -v '"pipeline"' "$ROOT/lib/rules/llama.json" >"$T/nopp.json"
expect_exit 3 $PLAIN "$WSHARD" convert --tp 1 --pp 2 --rules "$T/nopp.json" "$T/ll" "$T/no4" &&
	one_line "rules without pipeline" &&
	err_has "rules without pipeline" "--pp is not written for $T/nopp.json"
# a "first_stage_min" (Qwen3-VL's deepstack layers) the split does not meet
sed 's/"pipeline": {/"pipeline": {"first_stage_min": "intermediate_size", /' \
	"$ROOT/lib/rules/llama.json" >"$T/min.json"
expect_exit 3 $PLAIN "$WSHARD" convert --tp 1 --pp 2 --rules "$T/min.json" "$T/ll" "$T/no7" &&
	one_line "first_stage_min" &&
	err_has "first_stage_min" "the first stage would hold 3 decoder layers; vLLM wants at least 128 there (intermediate_size)"
expect_exit 2 $PLAIN "$WSHARD" convert --tp 1 --pp 2 --archive tar "$T/ll" "$T/no5" &&
	err_has "--archive --pp" "--archive is not written with --pp"
expect_exit 2 $PLAIN "$WSHARD" convert --tp 1 --pp 0 "$T/ll" "$T/no6"
for o in no1 no2 no3 no4 no5 no6 no7; do
	[ -e "$T/$o" ] && fail "$o: a refused convert left '$T/$o' behind"
done
ls "$T/ll1" | grep -q "^model-rank-0-part-0.safetensors$" || fail "--pp 1: not model-rank-R names"
# an output of stages is wshard's own to replace (--force), either way
conv ll1 --force --tp 1 --pp 2 "$T/ll"
conv ll1 --force --tp 1 "$T/ll"
ls "$T/ll1" | grep -q "^model-pp-" && fail "--force: stage files left beside a tp output"
"$PYTHON" -c 'import json,sys; p=json.load(open(sys.argv[1]))["parallel"]; sys.exit(p["pp"] != 1 or p["pp_layers"] is not None)' \
	"$T/ll1/wshard.json" || fail "--pp 1: parallel.pp is not 1"
finish
