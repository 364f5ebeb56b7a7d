/*
 * test_plan_prime.c - two "row" split keys of DeepSeek-V4.1's rules:
 * "pad_to" with "pad_value" (each rank's rows followed by padding rows of
 * a value, vLLM's attention sinks padded with -inf to the attention
 * backend's head count, at every tp) and "prime_heads" (an Engram table
 * cut by hash heads of prime sizes, vLLM's EngramLayout and
 * ParallelEngramEmbedding: rank r holds its heads' rows, the rows past
 * the heads' sum no rank).
 *
 * Checkpoints come from scripts/gen-checkpoint (a Llama: 2 layers, BF16)
 * with extra tensors; the rules are parsed from text.
 */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "plan_fixture.h"
#include "rules_test_util.h"

TestSuite(prime, .fini = close_open_fx);

#define SINKS BASE " --extra-tensor model.layers.0.sink:8 --extra-tensor model.layers.1.sink:8"
#define SINK_RULES(extra) "{\"tensors\": [{\"match\": \"model.layers.{n}.sink\", " \
	"\"split\": \"row\"" extra "}, " CATCH_ALL "]}"

/* Piece i of t: a constant of value_len bytes (bits) over len bytes at dst. */
static void assert_const(const struct wshard_out_tensor *t, size_t i, uint32_t bits,
			 unsigned value_len, uint64_t dst, uint64_t len)
{
	const struct wshard_piece *p;
	uint32_t got = 0;

	cr_assert_lt(i, t->npieces, "%s has no piece %zu", t->name, i);
	p = &t->pieces[i];
	cr_assert_eq(p->kind, WSHARD_PIECE_CONST, "%s piece %zu: kind %d", t->name, i, p->kind);
	cr_assert_eq(p->value_len, value_len);
	memcpy(&got, p->value, value_len);
	cr_assert_eq(got, bits, "%s piece %zu: value %#x, want %#x", t->name, i, got, bits);
	cr_assert_eq(p->dst, dst, "%s piece %zu: dst %llu", t->name, i, (unsigned long long)p->dst);
	cr_assert_eq(p->len, len, "%s piece %zu: len %llu", t->name, i, (unsigned long long)p->len);
}

/*
 * A sink vector [8] (BF16) by rows, padded to 16 a rank: at tp 2 each
 * rank's 4 sinks, then 12 of -inf, in BF16 as the source is, or (with
 * "dtype": "F32", as vLLM holds its sinks) in F32; at tp 1 too (vLLM
 * pads whatever its heads); zeros without "pad_value"; a share as wide
 * as "pad_to" is not padded.
 */
Test(prime, row_pad_value)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;
	int r;

	fx_open(&f, SINKS);
	use_rules(&f, SINK_RULES(", \"pad_to\": 16, \"pad_value\": \"-inf\""));
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "model.layers.1.sink");
		assert_shape(t, 1, 16, 0);
		assert_copy(&f, t, 0, "model.layers.1.sink", 4 * (uint64_t)r, 4, 0, 2, 0);
		assert_const(t, 1, 0xff80, 2, 8, 24);
		cr_assert_eq(t->nbytes, 32);
	}
	use_rules(&f, SINK_RULES(", \"dtype\": \"F32\", \"pad_to\": \"64 * ((tp + 63) / 64) / 4\", "
				 "\"pad_value\": \"-inf\""));
	fx_plan(&f, 2);
	t = get_out(&f, 1, "model.layers.0.sink");
	assert_shape(t, 1, 16, 0);
	cr_assert_eq(t->dtype, WSHARD_F32);
	cr_assert_eq(t->pieces[0].len, 16);
	assert_const(t, 1, 0xff800000u, 4, 16, 48);
	cr_assert_eq(t->nbytes, 64);
	fx_plan(&f, 1);
	t = get_out(&f, 0, "model.layers.0.sink");
	assert_shape(t, 1, 16, 0);
	assert_const(t, 1, 0xff800000u, 4, 32, 32);
	use_rules(&f, SINK_RULES(", \"pad_to\": 8, \"pad_value\": 1.5"));
	fx_plan(&f, 1);
	t = get_out(&f, 0, "model.layers.0.sink");
	assert_shape(t, 1, 8, 0);
	cr_assert_eq(t->npieces, 1);
	fx_plan(&f, 4);
	assert_const(get_out(&f, 3, "model.layers.0.sink"), 1, 0x3fc0, 2, 4, 12);
	use_rules(&f, SINK_RULES(", \"pad_to\": 6"));
	fx_plan(&f, 2);
	t = get_out(&f, 0, "model.layers.0.sink");
	assert_shape(t, 1, 6, 0);
	assert_zero(t, 1, 8, 4);
	fx_close(&f);
}

/* "pad_value" only as a number or an infinity beside "pad_to" on a row
 * split or a fused part; "pad_to" on a row split not with "kv_heads". */
Test(prime, pad_value_refused)
{
	parse_fails(SINK_RULES(", \"pad_to\": 16, \"pad_value\": \"nan\""),
		    "\"pad_value\" is a number, \"-inf\" or \"inf\" beside \"pad_to\"");
	parse_fails(SINK_RULES(", \"pad_value\": 0"), "\"pad_value\" is a number");
	parse_fails(SINK_RULES(", \"pad_to\": 16, \"pad_value\": true"), "\"pad_value\" is a number");
	parse_fails("{\"tensors\": [{\"match\": \"a\", \"split\": \"col\", \"pad_to\": 8, "
		    "\"pad_value\": 1}]}", "\"pad_value\" is a number");
	parse_fails(SINK_RULES(", \"pad_to\": 16, \"kv_heads\": true"),
		    "\"pad_to\" is an expression (rows or columns a rank) on a \"fuse\" part, a \"row\" split");
	parse_fails("{\"tensors\": [{\"match\": \"a\", \"split\": \"replicate\", \"pad_to\": 8}]}",
		    "\"pad_to\" is an expression");
}

/*
 * A BF16 source below F16/F32 is padded; a quantized one is not: the
 * planner refuses it, naming the tensor.
 */
Test(prime, pad_value_dtype)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, SINKS " --dtype F8_E4M3");
	use_rules(&f, SINK_RULES(", \"pad_to\": 16, \"pad_value\": \"-inf\""));
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "~tensor 'model.layers.0.sink': F8_E4M3 padded from 4 to 16 a rank");
	fx_close(&f);
}

#define ENGRAM BASE " --extra-tensor model.layers.1.emb:440,32 --extra-tensor model.layers.0.emb:520,32"
#define PRIME_RULES(layers) "{\"tensors\": [{\"match\": \"model.layers.{n}.emb\", " \
	"\"split\": \"row\", \"optional\": true, \"prime_heads\": [\"engram_vocab_size\", " \
	"\"(max_ngram - 1) * n_heads\", \"" layers "\"]}, " CATCH_ALL "]}"
#define PRIME_CONFIG(ids) " --set-config engram_vocab_size=100 --set-config max_ngram=3 " \
	"--set-config n_heads=2 --set-config 'ids=" ids "'"

/*
 * An Engram table of 4 hash heads (2-grams and 3-grams, 2 heads each)
 * over a vocabulary of 100: its heads hold 101, 103, 107 and 109 rows
 * (the primes from 100 up), 420 of its 440; rank r of tp 2 holds 2 heads'
 * rows, of tp 4 one head's, of tp 1 all four; the 20 rows past them no
 * rank (their sizes differ from rank to rank).  A second Engram layer's heads are the next four primes (113,
 * 127, 131 and 137: never one reused), whichever tensor comes first.
 */
Test(prime, engram_heads)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	static const uint64_t at4[] = { 0, 101, 204, 311, 420 };
	const struct wshard_out_tensor *t;
	int r;

	fx_open(&f, BASE " --extra-tensor model.layers.1.emb:440,32" PRIME_CONFIG("[1]"));
	use_rules(&f, PRIME_RULES("ids"));
	fx_plan(&f, 2);
	t = get_out(&f, 0, "model.layers.1.emb");
	assert_shape(t, 2, 204, 32);
	assert_copy(&f, t, 0, "model.layers.1.emb", 0, 204, 0, 64, 0);
	cr_assert_eq(t->npieces, 1);
	t = get_out(&f, 1, "model.layers.1.emb");
	assert_shape(t, 2, 216, 32);
	assert_copy(&f, t, 0, "model.layers.1.emb", 204, 216, 0, 64, 0);
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		t = get_out(&f, r, "model.layers.1.emb");
		assert_shape(t, 2, at4[r + 1] - at4[r], 32);
		assert_copy(&f, t, 0, "model.layers.1.emb", at4[r], at4[r + 1] - at4[r], 0, 64, 0);
	}
	fx_plan(&f, 1);
	assert_copy(&f, get_out(&f, 0, "model.layers.1.emb"), 0, "model.layers.1.emb", 0, 420, 0,
		    64, 0);
	fx_close(&f);

	fx_open(&f, ENGRAM PRIME_CONFIG("[1, 0]"));
	use_rules(&f, PRIME_RULES("ids"));
	fx_plan(&f, 2);
	assert_copy(&f, get_out(&f, 0, "model.layers.1.emb"), 0, "model.layers.1.emb", 0, 204, 0,
		    64, 0);
	t = get_out(&f, 0, "model.layers.0.emb");
	assert_shape(t, 2, 113 + 127, 32);
	assert_copy(&f, t, 0, "model.layers.0.emb", 0, 240, 0, 64, 0);
	t = get_out(&f, 1, "model.layers.0.emb");
	assert_shape(t, 2, 131 + 137, 32);
	assert_copy(&f, t, 0, "model.layers.0.emb", 240, 268, 0, 64, 0);
	fx_close(&f);
}

/*
 * Refused, naming the tensor: a tp that leaves a rank without a head
 * (vLLM asserts), a layer not in the array, an array config.json lacks,
 * a table shorter than its heads' sum (vLLM asserts), and the key where
 * it cannot mean anything.
 */
Test(prime, engram_refused)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, ENGRAM PRIME_CONFIG("[1]"));
	use_rules(&f, PRIME_RULES("ids"));
	fx_plan_fails(&f, 4, WSHARD_EINVAL,
		      "tensor 'model.layers.0.emb': no hash heads of prime sizes for layer 0 "
		      "((max_ngram - 1) * n_heads: 4 heads from 100; layer not in ids)");
	use_rules(&f, PRIME_RULES("other"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'model.layers.0.emb': config.json has no array 'other' (\"prime_heads\")");
	fx_close(&f);

	fx_open(&f, ENGRAM PRIME_CONFIG("[0, 1]"));
	use_rules(&f, PRIME_RULES("ids"));
	fx_plan_fails(&f, 3, WSHARD_EINVAL,
		      "~4 hash heads leave a rank of --tp 3 without one");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'model.layers.1.emb': its 4 hash heads need 508 rows, it has 440");
	fx_close(&f);

	fx_open(&f, BASE " --extra-tensor model.layers.0.emb:100,32" PRIME_CONFIG("[0]"));
	use_rules(&f, PRIME_RULES("ids"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'model.layers.0.emb': 100 rows hold no 4 hash heads of prime sizes from 100 (table 0 of ids)");
	fx_close(&f);

	fx_open(&f, BASE " --extra-tensor model.layers.0.emb:415,32" PRIME_CONFIG("[0]"));
	use_rules(&f, PRIME_RULES("ids"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'model.layers.0.emb': its 4 hash heads need 420 rows, it has 415");
	fx_close(&f);

	parse_fails("{\"tensors\": [{\"match\": \"a\", \"split\": \"col\", "
		    "\"prime_heads\": [\"v\", \"h\", \"ids\"]}]}",
		    "\"prime_heads\" is [FROM, HEADS, LAYERS]");
	parse_fails("{\"tensors\": [{\"match\": \"a\", \"split\": \"row\", "
		    "\"prime_heads\": [\"v\", \"h\", \"ids\"]}]}", "on a \"row\" split whose match has {n}");
	parse_fails("{\"tensors\": [{\"match\": \"a.{n}\", \"split\": \"row\", "
		    "\"prime_heads\": [\"v\", \"h\"]}]}", "\"prime_heads\" is [FROM, HEADS, LAYERS]");
	parse_fails("{\"tensors\": [{\"match\": \"a.{n}\", \"split\": \"row\", "
		    "\"prime_heads\": [\"v\", \"h\", 3]}]}", "\"prime_heads\" is [FROM, HEADS, LAYERS]");
	parse_fails("{\"tensors\": [{\"match\": \"a.{n}\", \"split\": \"row\", \"pad_to\": 8, "
		    "\"prime_heads\": [\"v\", \"h\", \"ids\"]}]}",
		    "\"prime_heads\" is [FROM, HEADS, LAYERS]");
}
