#!/bin/sh
# The convert command's error behaviour: every failure is one line on stderr
# naming the tensor, file or config field, with a distinct exit code
# (2 usage / refused output, 3 bad input, 4 I/O), and nothing is written
# when the conversion is refused.
# $S holds several generator options: split on purpose.
# shellcheck disable=SC2086,SC1091,SC2012
. "$(dirname "$0")/lib.sh"

S="--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 250"

# nothing_written WHAT DIR: DIR does not exist or is empty.
nothing_written() {
	if [ -d "$2" ] && [ -n "$(ls -A "$2")" ]; then
		fail "$1: output written although the conversion failed: $(find "$2" | head -5 | tr '\n' ' ')"
	fi
}
# snapshot DIR FILE: a listing of DIR with sizes and checksums.
snapshot() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs cksum) >"$2"; }

gen "$T/good" $S

# --help: usage on stdout, exit 0.
for cmd in "--help" "convert --help"; do
	if expect_exit 0 "$WSHARD" $cmd; then
		grep -qi usage "$T/out" || fail "wshard $cmd: no usage on stdout"
	fi
done

# Bad --tp values and unknown options: usage errors, exit 2, nothing written.
for v in 0 x -1 2x ""; do
	o=$T/out-tp-$v
	if expect_exit 2 "$WSHARD" convert --tp "$v" "$T/good" "$o"; then
		one_line "--tp '$v'"
		err_has "--tp '$v'" "tp"
	fi
	nothing_written "--tp '$v'" "$o"
done
expect_exit 2 "$WSHARD" convert --tp 2 --no-such-option "$T/good" "$T/out-opt" &&
	one_line "--no-such-option"
nothing_written "--no-such-option" "$T/out-opt"
expect_exit 2 "$WSHARD" convert --tp 2 "$T/good" && one_line "missing OUT"

# A tensor no rule covers: exit 3, every uncovered name listed, nothing written.
gen "$T/extra" $S --extra-tensor model.layers.0.mlp.mystery.weight:4,8 \
	--extra-tensor model.extra_bias:16
if expect_exit 3 "$WSHARD" convert --tp 2 "$T/extra" "$T/out-extra"; then
	one_line "uncovered tensor"
	err_has "uncovered tensor" model.layers.0.mlp.mystery.weight
	err_has "uncovered tensor" model.extra_bias
fi
nothing_written "uncovered tensor" "$T/out-extra"
[ -e "$T/out-extra/wshard.json" ] && fail "uncovered tensor: wshard.json written"

# A split that does not divide: exit 3, the config field and tp named.
gen "$T/heads6" --layers 2 --hidden 48 --heads 6 --kv-heads 2 --intermediate 128 --vocab 250
if expect_exit 3 "$WSHARD" convert --tp 4 "$T/heads6" "$T/out-heads6"; then
	one_line "indivisible heads"
	err_has "indivisible heads" "num_attention_heads=6 is not divisible by --tp 4"
fi
nothing_written "indivisible heads" "$T/out-heads6"
# config.json decides it before the index and headers are read: the same
# refusal with every shard's header broken.
cp -r "$T/heads6" "$T/heads6-broken"
for f in "$T/heads6-broken"/*.safetensors; do printf 'garbage' >"$f"; done
if expect_exit 3 "$WSHARD" convert --tp 4 "$T/heads6-broken" "$T/out-heads6b"; then
	one_line "indivisible heads, broken headers"
	err_has "indivisible heads, broken headers" "num_attention_heads=6 is not divisible by --tp 4"
fi
nothing_written "indivisible heads, broken headers" "$T/out-heads6b"
# kv heads: 3 kv heads at tp 2 (2 <= 3 and 3 % 2 != 0).
gen "$T/kv3" --layers 1 --hidden 48 --heads 6 --kv-heads 3 --intermediate 128 --vocab 250
if expect_exit 3 "$WSHARD" convert --tp 2 "$T/kv3" "$T/out-kv3"; then
	one_line "indivisible kv heads"
	err_has "indivisible kv heads" "num_key_value_heads=3"
fi
nothing_written "indivisible kv heads" "$T/out-kv3"
# intermediate_size 100 at tp 8.
gen "$T/i100" $S --intermediate 100
if expect_exit 3 "$WSHARD" convert --tp 8 "$T/i100" "$T/out-i100"; then
	one_line "indivisible intermediate"
	err_has "indivisible intermediate" "intermediate_size=100"
fi
nothing_written "indivisible intermediate" "$T/out-i100"

# Shapes contradicting config.json: exit 3 naming the tensor.
gen "$T/hidden" $S --set-config hidden_size=128
if expect_exit 3 "$WSHARD" convert --tp 2 "$T/hidden" "$T/out-hidden"; then
	one_line "hidden_size edited"
	grep -q 'model\.[a-z0-9_.]*weight\|lm_head\.weight' "$T/err" ||
		fail "hidden_size edited: the message names no tensor: $(head -c 400 "$T/err")"
fi
nothing_written "hidden_size edited" "$T/out-hidden"
gen "$T/down" $S --drop-tensor model.layers.1.mlp.down_proj.weight \
	--extra-tensor model.layers.1.mlp.down_proj.weight:64,96
if expect_exit 3 "$WSHARD" convert --tp 2 "$T/down" "$T/out-down"; then
	one_line "one wrong shape"
	err_has "one wrong shape" model.layers.1.mlp.down_proj.weight
fi
nothing_written "one wrong shape" "$T/out-down"

# A missing tensor is an error too (q_proj without k_proj cannot be fused).
gen "$T/nok" $S --drop-tensor model.layers.0.self_attn.k_proj.weight
if expect_exit 3 "$WSHARD" convert --tp 2 "$T/nok" "$T/out-nok"; then
	one_line "missing k_proj"
	err_has "missing k_proj" model.layers.0.self_attn.k_proj.weight
fi
nothing_written "missing k_proj" "$T/out-nok"

# An untied checkpoint without lm_head.weight: the output would lack a
# tensor vLLM's sharded-state loader requires.
gen "$T/nolm" $S --drop-tensor lm_head.weight
if expect_exit 3 "$WSHARD" convert --tp 2 "$T/nolm" "$T/out-nolm"; then
	one_line "untied without lm_head"
	err_has "untied without lm_head" lm_head.weight
fi
nothing_written "untied without lm_head" "$T/out-nolm"

# An architecture without rules: exit 3 naming it.
gen "$T/arch" $S --set-config 'architectures=["FooBarForCausalLM"]'
if expect_exit 3 "$WSHARD" convert --tp 2 "$T/arch" "$T/out-arch"; then
	one_line "unknown architecture"
	err_has "unknown architecture" FooBarForCausalLM
fi
nothing_written "unknown architecture" "$T/out-arch"
# --architecture names one without rules: the same; one whose rules the
# checkpoint lacks tensors for (a Llama converted as MiMo's MTP draft):
# exit 3 naming the tensor
if expect_exit 3 "$WSHARD" convert --tp 2 --architecture FooBarMTPModel "$T/good" "$T/out-arch2"; then
	one_line "--architecture unknown"
	err_has "--architecture unknown" FooBarMTPModel
fi
nothing_written "--architecture unknown" "$T/out-arch2"
if expect_exit 3 "$WSHARD" convert --tp 2 --architecture MiMoMTPModel "$T/good" "$T/out-arch3"; then
	one_line "--architecture without the draft's layers"
	err_has "--architecture without the draft's layers" num_nextn_predict_layers
fi
nothing_written "--architecture without the draft's layers" "$T/out-arch3"

# A missing source: exit 3 or 4 with the path.
"$WSHARD" convert --tp 2 "$T/no-such-src" "$T/out-nosrc" >"$T/out" 2>"$T/err"
rc=$?
case $rc in
3 | 4) one_line "missing SRC"; err_has "missing SRC" "$T/no-such-src" ;;
*) fail "missing SRC: exit $rc, expected 3 or 4: $(head -c 400 "$T/err")" ;;
esac
nothing_written "missing SRC" "$T/out-nosrc"

# A non-empty OUT that wshard did not write: refused, even with --force.
mkdir "$T/foreign"
echo "precious" >"$T/foreign/notes.txt"
mkdir "$T/foreign/sub"
echo "more" >"$T/foreign/sub/data"
snapshot "$T/foreign" "$T/snap-before"
for force in "" "--force"; do
	if expect_exit 2 "$WSHARD" convert --tp 2 $force "$T/good" "$T/foreign"; then
		one_line "foreign OUT $force"
		err_has "foreign OUT $force" "$T/foreign"
	fi
	snapshot "$T/foreign" "$T/snap-after"
	cmp -s "$T/snap-before" "$T/snap-after" ||
		fail "foreign OUT $force: its contents changed: $(diff "$T/snap-before" "$T/snap-after" | head -5)"
	[ "$(cd "$T/foreign" && ls -A | tr '\n' ' ')" = "notes.txt sub " ] ||
		fail "foreign OUT $force: files added: $(ls -A "$T/foreign" | tr '\n' ' ')"
done

# An earlier wshard output: refused without --force, replaced with --force.
o=$T/prev
if expect_exit 0 "$WSHARD" convert --tp 4 "$T/good" "$o"; then
	snapshot "$o" "$T/snap-before"
	if expect_exit 2 "$WSHARD" convert --tp 2 "$T/good" "$o"; then
		one_line "earlier output without --force"
		err_has "earlier output without --force" "$o"
	fi
	snapshot "$o" "$T/snap-after"
	cmp -s "$T/snap-before" "$T/snap-after" ||
		fail "earlier output without --force: it was changed"
	if expect_exit 0 "$WSHARD" convert --tp 2 --force "$T/good" "$o"; then
		# the tp 4 files of ranks 2 and 3 must be gone
		if [ -n "$PYTHON" ] && "$PYTHON" -c 'import numpy, safetensors, xxhash, awscrt' 2>/dev/null; then
			"$PYTHON" "$ROOT/test/reference.py" check "$T/good" "$o" --tp 2 >"$T/rout" 2>&1 ||
				fail "--force replacement differs from the reference: $(head -n 5 "$T/rout")"
		else
			[ -e "$o/model-rank-2-part-0.safetensors" ] &&
				fail "--force replacement left the old rank 2 file"
		fi
	fi
fi

finish
