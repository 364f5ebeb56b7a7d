/*
 * test_plan_kinds.c - rules for models whose layers are of several kinds
 * (Gemma 4's): conditions that compare a config array's text ("KEY[n] ==
 * 'text'") and join two conditions ("A && B"), a fused part whose source
 * also fills another part ("also": k loaded as v), layers vLLM holds
 * under another name ("rename_layers", "from" or "add"), one tensor stored in row pieces
 * ("concat") and a pipeline vLLM refuses for a config key ("none_with").
 *
 * Checkpoints come from scripts/gen-checkpoint (a Llama: 2 layers, 8
 * heads of 8, 2 kv heads, BF16 rows of 128 bytes); the rules are parsed
 * from text.
 */
#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "plan_fixture.h"
#include "rules_test_util.h"
#include "plan_rules_fixture.h"

TestSuite(kinds, .fini = close_open_fx);

#define KINDS "kinds=[\"sliding\", \"full\"]"

/* "KEY[i] == 'text'" and "!=": element i of an array of strings. */
Test(kinds, text_condition)
{
	static const struct { const char *row, *whole, *config, *err; } c[] = {
		{ "kinds[n] == 'sliding'", "kinds[n] != 'sliding'", KINDS, NULL },
		{ "kinds[n] == 'sliding'", "kinds[n] == 'full'", KINDS, NULL },
		/* a prefix of the text is not the text */
		{ "kinds[n] == 'slid'", "kinds[n] == 'full'", KINDS, "~not covered by rules" },
		{ "kinds[n] == 'sliding'", "kinds[n] == 'full'", "kinds=[\"sliding\"]",
		  "~config.json's 'kinds' has no text at 1" },
		{ "kinds[n] == 'sliding'", "kinds[n] == 'full'", "kinds=[0, 1]",
		  "~config.json's 'kinds' has no text at 0" },
		{ "kinds[n] == 'sliding'", "kinds[n] == 'full'", "other=1",
		  "~config.json has no array 'kinds'" },
		{ "kinds[n] == 'sliding", "kinds[n] == 'full'", KINDS, "~malformed condition" },
		{ "kinds[n] > 'sliding'", "kinds[n] == 'full'", KINDS, "~malformed condition" },
		{ "'sliding' == kinds[n]", "kinds[n] == 'full'", KINDS, "~malformed condition" },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		layer_conditions(c[i].row, c[i].whole, c[i].config, c[i].err);
}

/* "KEY == 'text'" and "!=": a config key's text; one absent, or not a
 * text, equals none. */
Test(kinds, scalar_text_condition)
{
	static const struct { const char *row, *whole, *config, *err; } c[] = {
		{ "n < 1 && kind == 'full'", "n >= 1 && kind != 'ful'", "kind=\"full\"", NULL },
		{ "n < 1 && v.kind == 'clip'", "n >= 1 && v.kind != 'clip_vision'",
		  "v={\"kind\": \"clip\"}", NULL },
		{ "n < 1 && kind != 'full'", "n >= 1 && kind != 'full'", "other=1", NULL },
		{ "n < 1 && kind != 'full'", "n >= 1 && kind != '1'", "kind=1", NULL },
		{ "n < 1 && kind == 'full'", "n >= 1", "other=1", "~not covered by rules" },
		{ "kind === 'full'", "n >= 1", "kind=\"full\"", "~malformed condition" },
		{ "kind == full'", "n >= 1", "kind=\"full\"", "~malformed condition" },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		layer_conditions(c[i].row, c[i].whole, c[i].config, c[i].err);
}

/* "tie"'s "output_if": the tied embedding is named by the head or by
 * itself as a config key's text says (PaliGemma's Gemma or Gemma 2). */
Test(kinds, tie_output_if)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	static const char *const kinds[] = { "a", "b" };
	int i;

	for (i = 0; i < 2; i++) {
		char *args = fmt(BASE " --set-config 'kind=\"%s\"'", kinds[i]);

		fx_open(&f, args);
		use_rules(&f, "{\"tie\": {\"source\": \"model.embed_tokens.weight\", "
			  "\"output\": \"lm_head.weight\", \"output_if\": {\"if\": \"kind == 'b'\", "
			  "\"output\": \"model.embed_tokens.weight\"}, \"drop\": [\"lm_head.weight\"], "
			  "\"always\": true}, \"tensors\": [" CATCH_ALL "]}");
		fx_plan(&f, 2);
		cr_assert_eq(find_out(&f, 0, "lm_head.weight") != NULL, i == 0, "kind %s", kinds[i]);
		cr_assert_eq(find_out(&f, 0, "model.embed_tokens.weight") != NULL, i == 1,
			     "kind %s", kinds[i]);
		fx_close(&f);
		free(args);
	}
}

/* "tie"'s "if": tied as the condition says, whatever the top level's
 * tie_word_embeddings (Idefics3 ties by text_config's); an absent key is
 * false. */
Test(kinds, tie_if)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	static const struct { const char *set; bool tied; } c[] = {
		{ "--set-config tie_word_embeddings=false --set-config 't={\"tie\": true}'", true },
		{ "--set-config tie_word_embeddings=true --set-config 't={\"tie\": false}'", false },
		{ "--set-config tie_word_embeddings=true", false },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char *args = fmt(BASE " %s", c[i].set);

		fx_open(&f, args);
		use_rules(&f, "{\"tie\": {\"source\": \"model.embed_tokens.weight\", "
			  "\"output\": \"lm_head.weight\", \"if\": \"t.tie\", "
			  "\"drop\": [\"lm_head.weight\"]}, \"tensors\": [" CATCH_ALL "]}");
		fx_plan(&f, 2);
		cr_assert_eq(find_out(&f, 0, "model.embed_tokens.weight") == NULL, c[i].tied,
			     "%s", c[i].set);
		fx_close(&f);
		free(args);
	}
}

/* "A && B": both hold; either side may be any condition. */
Test(kinds, and_condition)
{
	layer_conditions("n < 1 && kinds[n] == 'sliding'", "n >= 1", KINDS, NULL);
	layer_conditions("n < 1 && !off", "n >= 1 && k", "k=1", NULL);
	/* layer 1 fails the first rule's "&&" on its right, layer 0 the
	 * second's on its left */
	layer_conditions("n < 2 && kinds[n] == 'sliding'", "n > 0 && kinds[n] == 'full'", KINDS,
			 NULL);
	layer_conditions("n < 1 && ", "n >= 1", "k=1", "~malformed condition");
}

/*
 * Rules that pick layers by parity (Nomic's MoE layers, n %
 * moe_every_n_layers == 1) are required in the layers they pick, not past
 * them: they hold for layer numbers past any model's, every other one.
 */
Test(kinds, parity_condition)
{
	layer_conditions("n % m != 1", "n % m == 1", "m=2", NULL);
	layer_conditions("n % m != 1", "n % m == 1", "m=3", NULL);
}

#define QKV_ALSO(v_rule) "{\"fused\": {\"g\": {\"parts\": [\"q\", \"k\", \"v\"], " \
	"\"split\": \"qkv\"}}, \"tensors\": [" \
	"{\"match\": \"model.layers.{n}.self_attn.q_proj.weight\", \"fuse\": \"g.q\", \"output\": \"model.layers.{n}.qkv\"}," \
	"{\"match\": \"model.layers.{n}.self_attn.k_proj.weight\", \"fuse\": \"g.k\", \"also\": \"v\", \"output\": \"model.layers.{n}.qkv\"}," \
	v_rule CATCH_NO_QKV "]}"
#define V_SKIP "{\"match\": \"model.layers.{n}.self_attn.v_proj.weight\", " \
	"\"split\": \"skip\", \"reason\": \"k is v\"},"
/*
 * "also": k_proj fills parts k and v, each rank's v rows the same k rows
 * (Gemma 4's attention_k_eq_v); at tp 4 each of the 2 kv heads is whole
 * on two ranks, in both parts.  A v_proj beside it is refused; "also"
 * naming its own part, an unknown one, or without "fuse" is malformed.
 */
Test(kinds, fuse_also)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r, tp;

	for (tp = 2; tp <= 4; tp += 2) {
		uint64_t q = 64 / (uint64_t)tp;	/* q rows a rank */

		fx_open(&f, BASE);
		use_rules(&f, QKV_ALSO(V_SKIP));
		fx_plan(&f, tp);
		for (r = 0; r < tp; r++) {
			const struct wshard_out_tensor *t = get_out(&f, r, "model.layers.1.qkv");
			uint64_t k0 = 8 * (uint64_t)(r * 2 / tp);	/* its kv head's rows */

			assert_shape(t, 2, q + 8 + 8, 64);
			assert_copy(&f, t, 0, "model.layers.1.self_attn.q_proj.weight", q * r, q,
				    0, 128, 0);
			assert_copy(&f, t, 1, "model.layers.1.self_attn.k_proj.weight", k0, 8, 0,
				    128, q * 128);
			assert_copy(&f, t, 2, "model.layers.1.self_attn.k_proj.weight", k0, 8, 0,
				    128, (q + 8) * 128);
		}
		fx_close(&f);
	}

	fx_open(&f, BASE);
	use_rules(&f, QKV_ALSO("{\"match\": \"model.layers.{n}.self_attn.v_proj.weight\", "
			       "\"fuse\": \"g.v\", \"output\": \"model.layers.{n}.qkv\"},"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~are both part 'v' of");
	fx_close(&f);

	fx_open(&f, BASE);
#define ALSO(part) "{\"fused\": {\"g\": {\"parts\": [\"q\", \"k\", \"v\"], \"split\": \"qkv\"}}, " \
	"\"tensors\": [{\"match\": \"a\", \"fuse\": \"g.k\", \"also\": \"" part "\", \"output\": \"o\"}]}"
	parse_fails(ALSO("k"), "\"also\" must name another part");
	parse_fails(ALSO("w"), "\"also\" must name another part");
	parse_fails("{\"tensors\": [{\"match\": \"a\", \"split\": \"row\", \"also\": \"v\"}]}",
		    "\"also\" (a part name) goes only with \"fuse\"");
	fx_close(&f);
}

#define RENAME(from) "{\"rename_layers\": {\"prefix\": \"model.layers.{n}.\", " \
	"\"to\": \"model.shared.{n}.\", \"from\": \"" from "\"}, " \
	"\"pipeline\": {\"layers\": \"model.layers.{n}.\", \"stages\": [{\"model.*\": \"all\"}, " \
	"{\"lm_head.weight\": \"all\"}]}, " \
	"\"extra\": [{\"name\": \"model.layers.{n}.c\", \"dtype\": \"F32\", \"value\": 1.0}], " \
	"\"tensors\": [" CATCH_ALL "]}"

/*
 * "rename_layers": the layers from "from" on are written under "to",
 * numbered from 0 there (their extras too); from past the last layer
 * renames none; --pp is refused where a layer is renamed.
 */
Test(kinds, rename_layers)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE);
	use_rules(&f, RENAME("num_hidden_layers - 1"));
	fx_plan(&f, 2);
	get_out(&f, 0, "model.layers.0.input_layernorm.weight");
	get_out(&f, 1, "model.shared.0.input_layernorm.weight");
	get_out(&f, 1, "model.shared.0.self_attn.q_proj.weight");
	get_out(&f, 0, "model.layers.0.c");
	get_out(&f, 0, "model.shared.0.c");
	cr_assert_null(find_out(&f, 0, "model.layers.1.input_layernorm.weight"));
	cr_assert_null(find_out(&f, 0, "model.layers.1.c"));
	get_out(&f, 0, "model.embed_tokens.weight");
	f.opt.pp = 2;
	fx_plan_fails(&f, 1, WSHARD_EINVAL, "~--pp is not written");
	f.opt.pp = 1;
	fx_close(&f);

	fx_open(&f, BASE);
	use_rules(&f, RENAME("num_hidden_layers"));
	fx_plan(&f, 2);
	get_out(&f, 0, "model.layers.1.input_layernorm.weight");
	use_rules(&f, RENAME("num_hidden_layers - 3"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~\"rename_layers\" starts at layer -1");
	fx_close(&f);

	fx_open(&f, BASE);
	parse_fails("{\"rename_layers\": {\"prefix\": \"model.layers.\", \"to\": \"m.{n}.\", "
		    "\"from\": \"1\"}, \"tensors\": [" CATCH_ALL "]}",
		    "\"rename_layers\" is not");
	parse_fails("{\"rename_layers\": {\"prefix\": \"model.layers.{n}.\", "
		    "\"to\": \"m.{n}.\"}, \"tensors\": [" CATCH_ALL "]}", "\"rename_layers\" is not");
	fx_close(&f);
}

#define RENAME_ADD(add) "{\"rename_layers\": {\"prefix\": \"model.layers.{n}.\", " \
	"\"to\": \"model.mtp.{n}.\", \"add\": \"" add "\"}, " \
	"\"extra\": [{\"name\": \"model.layers.{n}.c\", \"dtype\": \"F32\", \"value\": 1.0}], " \
	"\"tensors\": [" CATCH_ALL "]}"

/*
 * "rename_layers" with "add": every layer is written under "to", its
 * number and its extras' raised by the expression (MiMo's MTP draft);
 * adding 0 renames nothing; "from" and "add" together are refused.
 */
Test(kinds, rename_layers_add)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE);
	use_rules(&f, RENAME_ADD("num_hidden_layers"));
	fx_plan(&f, 2);
	get_out(&f, 0, "model.mtp.2.input_layernorm.weight");
	get_out(&f, 1, "model.mtp.3.self_attn.q_proj.weight");
	get_out(&f, 0, "model.mtp.3.c");
	cr_assert_null(find_out(&f, 0, "model.layers.0.input_layernorm.weight"));
	cr_assert_null(find_out(&f, 0, "model.mtp.0.input_layernorm.weight"));
	get_out(&f, 0, "model.embed_tokens.weight");
	use_rules(&f, RENAME_ADD("0"));
	fx_plan(&f, 2);
	get_out(&f, 0, "model.layers.1.input_layernorm.weight");
	fx_close(&f);

	fx_open(&f, BASE);
	parse_fails("{\"rename_layers\": {\"prefix\": \"model.layers.{n}.\", "
		    "\"to\": \"m.{n}.\", \"from\": \"1\", \"add\": \"1\"}, \"tensors\": ["
		    CATCH_ALL "]}", "\"rename_layers\" is not");
	fx_close(&f);
}

#define QKV4_PAD(pad) "{\"fused\": {\"g\": {\"parts\": [\"q\", \"k\", \"v\", \"x\"], \"split\": \"qkv\"}, " \
	"\"h\": {\"parts\": [\"a\", \"b\"], \"split\": \"replicate\"}}, \"tensors\": [" \
	"{\"match\": \"model.layers.{n}.self_attn.q_proj.weight\", \"fuse\": \"g.q\", \"output\": \"model.layers.{n}.qkv\"}," \
	"{\"match\": \"model.layers.{n}.self_attn.k_proj.weight\", \"fuse\": \"g.k\", \"output\": \"model.layers.{n}.qkv\"}," \
	"{\"match\": \"model.layers.{n}.self_attn.v_proj.weight\", \"fuse\": \"g.v\", \"output\": \"model.layers.{n}.qkv\"}," \
	"{\"match\": \"model.layers.{n}.self_attn.o_proj.weight\", \"fuse\": \"g.x\", \"output\": \"model.layers.{n}.qkv\"}," \
	"{\"match\": \"model.layers.{n}.mlp.gate_proj.weight\", \"fuse\": \"h.a\", \"output\": \"model.layers.{n}.ab\"}," \
	"{\"match\": \"model.layers.{n}.mlp.up_proj.weight\", \"fuse\": \"h.b\", \"output\": \"model.layers.{n}.ab\", \"pad_to\": " pad "}," \
	REP("model.embed_tokens.weight") REP("lm_head.weight") REP("model.norm.weight") \
	REP("model.layers.{n}.input_layernorm.weight") REP("model.layers.{n}.post_attention_layernorm.weight") \
	"{\"match\": \"model.layers.{n}.mlp.down_proj.weight\", \"split\": \"replicate\"}]}"

/*
 * Qwen4-Exp's two fused projections: a q/k/v operator's fourth part is
 * whole on every rank after q, k and v (o_proj [64, 64] standing for the
 * QSA indexer's); the part of a replicated operator with "pad_to" is
 * followed by zero rows up to it at every tp, 1 included (up_proj's 128
 * rows padded to 136, as vLLM pads its hyper-connection projection).
 */
Test(kinds, qkv_fourth_part_and_replicated_pad)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r, tp;

	for (tp = 1; tp <= 4; tp *= 2) {
		uint64_t q = 64 / (uint64_t)tp;

		fx_open(&f, BASE);
		use_rules(&f, QKV4_PAD("\"128 + 8\""));
		fx_plan(&f, tp);
		for (r = 0; r < tp; r++) {
			const struct wshard_out_tensor *t = get_out(&f, r, "model.layers.1.qkv");
			uint64_t kv = tp > 2 ? 8 : 16 / (uint64_t)tp;
			uint64_t k0 = tp > 2 ? 8 * (uint64_t)(r * 2 / tp) : kv * (uint64_t)r;

			assert_shape(t, 2, q + 2 * kv + 64, 64);
			assert_copy(&f, t, 0, "model.layers.1.self_attn.q_proj.weight", q * r, q, 0, 128, 0);
			assert_copy(&f, t, 1, "model.layers.1.self_attn.k_proj.weight", k0, kv, 0, 128,
				    q * 128);
			assert_copy(&f, t, 2, "model.layers.1.self_attn.v_proj.weight", k0, kv, 0, 128,
				    (q + kv) * 128);
			assert_copy(&f, t, 3, "model.layers.1.self_attn.o_proj.weight", 0, 64, 0, 128,
				    (q + 2 * kv) * 128);
			t = get_out(&f, r, "model.layers.1.ab");
			assert_shape(t, 2, 128 + 136, 64);
			assert_copy(&f, t, 0, "model.layers.1.mlp.gate_proj.weight", 0, 128, 0, 128, 0);
			assert_copy(&f, t, 1, "model.layers.1.mlp.up_proj.weight", 0, 128, 0, 128,
				    128 * 128);
			assert_zero(t, 2, 256 * 128, 8 * 128);
		}
		fx_close(&f);
	}
}

#define CONCAT(split, extra) "{\"tensors\": [{\"match\": \"x.p.{e}\", \"output\": \"x.w\", " \
	"\"split\": \"" split "\", \"concat\": true" extra "}, " CATCH_ALL "]}"
#define PIECES BASE " --extra-tensor x.p.0:40,8 --extra-tensor x.p.1:40,8 --extra-tensor x.p.2:30,8"

/*
 * "concat": x.p.0, x.p.1, x.p.2 (40, 40 and 30 rows of 16 bytes) are one
 * tensor of 110 rows stored in pieces (Qwen4-Exp's n-gram embedding);
 * split by vocabulary (padded to 128 rows) or rows, a rank's share starts
 * in one piece and ends in another.  A missing piece, rows tp does not
 * divide and "concat" on what it cannot mean are refused.
 */
Test(kinds, concat_pieces)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, PIECES);
	use_rules(&f, CONCAT("vocab", ""));
	fx_plan(&f, 2);
	t = get_out(&f, 0, "x.w");
	assert_shape(t, 2, 64, 8);
	cr_assert_eq(t->npieces, 2);
	assert_copy(&f, t, 0, "x.p.0", 0, 40, 0, 16, 0);
	assert_copy(&f, t, 1, "x.p.1", 0, 24, 0, 16, 40 * 16);
	t = get_out(&f, 1, "x.w");
	cr_assert_eq(t->npieces, 3);
	assert_copy(&f, t, 0, "x.p.1", 24, 16, 0, 16, 0);
	assert_copy(&f, t, 1, "x.p.2", 0, 30, 0, 16, 16 * 16);
	assert_zero(t, 2, 46 * 16, 18 * 16);
	cr_assert_null(find_out(&f, 0, "x.p.0"));
	fx_plan(&f, 4);
	t = get_out(&f, 3, "x.w");
	assert_shape(t, 2, 32, 8);
	assert_copy(&f, t, 0, "x.p.2", 16, 14, 0, 16, 0);
	assert_zero(t, 1, 14 * 16, 18 * 16);

	use_rules(&f, CONCAT("row", ""));
	fx_plan(&f, 2);
	t = get_out(&f, 1, "x.w");
	assert_shape(t, 2, 55, 8);
	assert_copy(&f, t, 0, "x.p.1", 15, 25, 0, 16, 0);
	assert_copy(&f, t, 1, "x.p.2", 0, 30, 0, 16, 25 * 16);
	fx_plan_fails(&f, 4, WSHARD_EINVAL,
		      "output 'x.w': its 110 rows (from 'x.p.0' on) are not divisible by --tp 4");
	use_rules(&f, CONCAT("replicate", ""));
	fx_plan(&f, 2);
	t = get_out(&f, 1, "x.w");
	assert_shape(t, 2, 110, 8);
	assert_copy(&f, t, 2, "x.p.2", 0, 30, 0, 16, 80 * 16);

	parse_fails(CONCAT("col", ""), "\"concat\" is true or false on a \"row\"");
	parse_fails("{\"tensors\": [{\"match\": \"x.p.{e}\", \"output\": \"x.{e}\", "
		    "\"split\": \"row\", \"concat\": true}]}", "\"concat\" is true or false");
	parse_fails("{\"tensors\": [{\"match\": \"x.p.{e}\", \"output\": \"x.w\", "
		    "\"split\": \"row\", \"concat\": 1}]}", "\"concat\" is true or false");
	fx_close(&f);

	fx_open(&f, BASE " --extra-tensor x.p.0:40,8 --extra-tensor x.p.2:30,8");
	use_rules(&f, CONCAT("vocab", ""));
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "output 'x.w': piece 1 of its rows is missing (next is 'x.p.2')");
	fx_close(&f);

	fx_open(&f, BASE " --extra-tensor x.p.0:40,8 --extra-tensor x.p.1:40,4");
	use_rules(&f, CONCAT("vocab", ""));
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~concatenated into 'x.w' differ in dtype or beyond");
	fx_close(&f);
}

#define ZERO_K(extra) "{\"fused\": {\"qkvb\": {\"parts\": [\"q\", \"k\", \"v\"]" extra "}}, " \
	"\"tensors\": [{\"match\": \"a.q.b\", \"fuse\": \"qkvb.q\", \"output\": \"a.qkv.b\"}, " \
	"{\"match\": \"a.v.b\", \"fuse\": \"qkvb.v\", \"output\": \"a.qkv.b\"}, " CATCH_ALL "]}"

/*
 * A fused operator's "zero" parts: k's bias, which the checkpoint lacks
 * (Whisper-like encoders), is zeros of its "sizes" rows, cut as q's and
 * v's are; a missing part that is not "zero" is still an error.
 */
Test(kinds, zero_parts)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, BASE " --extra-tensor a.q.b:8 --extra-tensor a.v.b:8");
	use_rules(&f, ZERO_K(", \"sizes\": [8, 8, 8], \"zero\": [\"k\"]"));
	fx_plan(&f, 2);
	t = get_out(&f, 1, "a.qkv.b");
	assert_shape(t, 1, 12, 0);
	cr_assert_eq(t->npieces, 3);
	assert_copy(&f, t, 0, "a.q.b", 4, 4, 0, 2, 0);
	assert_zero(t, 1, 8, 8);
	assert_copy(&f, t, 2, "a.v.b", 4, 4, 0, 2, 16);
	fx_plan(&f, 1);
	assert_zero(get_out(&f, 0, "a.qkv.b"), 1, 16, 16);

	use_rules(&f, ZERO_K(", \"sizes\": [8, 8, 8]"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "output 'a.qkv.b' is missing part 'k' of 'qkvb' (from 'a.q.b' and its siblings)");
	parse_fails(ZERO_K(", \"zero\": [\"k\"]"), "\"zero\" is an array of parts, with \"sizes\"");
	parse_fails(ZERO_K(", \"sizes\": [8, 8, 8], \"zero\": [\"x\"]"),
		    "\"zero\" entry 0 is not one of its parts");
	parse_fails(ZERO_K(", \"sizes\": [8, 8, 8], \"zero\": \"k\""),
		    "\"zero\" is an array of parts");
	fx_close(&f);
}

/* Plans f at tp 1 and --pp 2 (f->opt.pp left 2), which must succeed with
 * two ranks. */
static void plan_pp2(struct fx *f)
{
	struct wshard_error err;

	f->opt.pp = 2;
	f->opt.tp = 1;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&f->plan, f->cat, f->rules, &f->opt, &err), WSHARD_OK, "%s",
		     err.msg);
	cr_assert_eq(f->plan->nranks, 2);
}

#define NONE_WITH "{\"pipeline\": {\"none_with\": \"ple\", \"layers\": \"model.layers.{n}.\", " \
	"\"stages\": [{\"*\": \"all\"}]}, \"tensors\": [" CATCH_ALL "]}"

/* A pipeline's "none_with": --pp is refused where config.json's key has
 * entries, planned where it is absent or empty. */
Test(kinds, pipeline_none_with)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE " --set-config 'ple=[1]'");
	use_rules(&f, NONE_WITH);
	f.opt.pp = 2;
	fx_plan_fails(&f, 1, WSHARD_EINVAL,
		      "--pp 2: no pipeline is written for this checkpoint (config.json's ple is set; rules 't.json')");
	f.opt.pp = 1;
	fx_plan(&f, 1);
	fx_close(&f);

	fx_open(&f, BASE " --set-config 'ple=[]'");
	use_rules(&f, NONE_WITH);
	plan_pp2(&f);
	f.opt.pp = 1;
	fx_close(&f);
	parse_fails("{\"pipeline\": {\"none_with\": 1, \"layers\": \"m.{n}.\", \"stages\": []}, "
		    "\"tensors\": [" CATCH_ALL "]}",
		    "optionally \"first_stage_min\", \"none_with\" (config keys), \"none_if\" (a condition) and \"same_stage\"");
}

#define LAYER_PREFIXES(layers) "{\"pipeline\": {\"layers\": " layers ", " \
	"\"stages\": [{\"model.embed_tokens.weight\": \"first\"}, {\"*\": \"last\"}]}, " \
	"\"tensors\": [" CATCH_ALL "]}"

/* A pipeline's "layers" as an array of prefixes: a layer's outputs go
 * to its stage under any of them (DeepSeek-V4's text model, alone or
 * under language_model.); an empty array or a prefix without {n} is
 * refused. */
Test(kinds, pipeline_layer_prefixes)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE);
	use_rules(&f, LAYER_PREFIXES("[\"lm.layers.{n}.\", \"model.layers.{n}.\"]"));
	plan_pp2(&f);
	get_out(&f, 0, "model.layers.0.input_layernorm.weight");
	get_out(&f, 1, "model.layers.1.input_layernorm.weight");
	cr_assert_null(find_out(&f, 1, "model.layers.0.input_layernorm.weight"));
	cr_assert_null(find_out(&f, 0, "model.layers.1.input_layernorm.weight"));
	get_out(&f, 0, "model.embed_tokens.weight");
	cr_assert_null(find_out(&f, 1, "model.embed_tokens.weight"));
	f.opt.pp = 1;
	fx_close(&f);
	parse_fails(LAYER_PREFIXES("[]"),
		    "(a name prefix with {n}, or an array of them or of {\"prefix\", \"count\"})");
	parse_fails(LAYER_PREFIXES("[\"model.layers.{n}.\", \"lm.layers.\"]"),
		    "(a name prefix with {n}, or an array of them or of {\"prefix\", \"count\"})");
}

#define STACK(enc) "{\"pipeline\": {\"layers\": [\"model.layers.{n}.\", " enc "], " \
	"\"stages\": [{\"model.embed_tokens.weight\": \"first\"}, {\"*\": \"last\"}]}, " \
	"\"tensors\": [{\"match\": \"enc.layers.{n}.w\", \"split\": \"replicate\", " \
	"\"if\": \"n < enc_layers\"}," CATCH_ALL "]}"
#define STACK_OK STACK("{\"prefix\": \"enc.layers.{n}.\", \"count\": \"enc_layers\"}")

/* A "layers" entry {"prefix", "count"}: a stack of layers of its own
 * count, dealt between the stages on its own as vLLM's make_layers deals
 * a Whisper encoder's beside the decoder's (get_pp_indices: 3 layers at
 * pp 2 are 2 + 1, the decoder's 2 are 1 + 1); --pp-layers, which vLLM
 * applies to every stack, is refused where it does not add up to the
 * stack's count (vLLM raises); the entry wants {n} and a count, and
 * stands only in an array. */
Test(kinds, pipeline_layer_stack)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	static const int pp_layers[] = { 1, 1 };
	struct wshard_error err;

	fx_open(&f, BASE " --extra-tensor enc.layers.0.w:8 --extra-tensor enc.layers.1.w:8"
		" --extra-tensor enc.layers.2.w:8 --set-config enc_layers=3");
	use_rules(&f, STACK_OK);
	plan_pp2(&f);
	get_out(&f, 0, "enc.layers.0.w");
	get_out(&f, 0, "enc.layers.1.w");
	get_out(&f, 1, "enc.layers.2.w");
	cr_assert_null(find_out(&f, 1, "enc.layers.1.w"));
	cr_assert_null(find_out(&f, 0, "enc.layers.2.w"));
	get_out(&f, 0, "model.layers.0.input_layernorm.weight");
	get_out(&f, 1, "model.layers.1.input_layernorm.weight");
	cr_assert_null(find_out(&f, 0, "model.layers.1.input_layernorm.weight"));
	wshard_plan_free(f.plan);
	f.plan = NULL;
	f.opt.pp_layers = pp_layers;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&f.plan, f.cat, f.rules, &f.opt, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "--pp-layers adds up to 2 layers, but vLLM splits "
				  "the 3 layers of 'enc.layers.{n}.' (enc_layers)"), "%s", err.msg);
	f.opt.pp_layers = NULL;
	f.opt.pp = 1;
	fx_close(&f);
	parse_fails(STACK("{\"prefix\": \"enc.layers.\", \"count\": \"enc_layers\"}"),
		    "or of {\"prefix\", \"count\"}");
	parse_fails(STACK("{\"prefix\": \"enc.layers.{n}.\"}"), "or of {\"prefix\", \"count\"}");
	parse_fails(STACK("{\"prefix\": \"enc.layers.{n}.\", \"count\": 3}"),
		    "or of {\"prefix\", \"count\"}");
	parse_fails("{\"pipeline\": {\"layers\": {\"prefix\": \"enc.layers.{n}.\", "
		    "\"count\": \"enc_layers\"}, \"stages\": [{\"*\": \"all\"}]}, \"tensors\": [" CATCH_ALL "]}",
		    "or of {\"prefix\", \"count\"}");
}

#define NO_PIPELINE(extra) "{\"no_pipeline\": \"its load_weights wants every layer\", " \
	extra "\"tensors\": [" CATCH_ALL "]}"

/* "no_pipeline": --pp refused with the rules' reason (Voxtral, whose
 * vLLM load raises on every stage); a reason that is not a non-empty
 * string, or beside "pipeline", is refused. */
Test(kinds, no_pipeline)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	struct wshard_error err;

	fx_open(&f, BASE);
	use_rules(&f, NO_PIPELINE(""));
	fx_plan(&f, 2);
	wshard_plan_free(f.plan);
	f.plan = NULL;
	f.opt.pp = 2;
	f.opt.tp = 1;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&f.plan, f.cat, f.rules, &f.opt, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "--pp 2 is not written for t.json: its load_weights wants every layer"),
			   "%s", err.msg);
	f.opt.pp = 1;
	fx_close(&f);
	parse_fails(NO_PIPELINE("\"pipeline\": {\"layers\": \"model.layers.{n}.\", "
				    "\"stages\": [{\"*\": \"all\"}]}, "),
		    "\"no_pipeline\" is not a non-empty string (the reason) or stands beside \"pipeline\"");
	parse_fails("{\"no_pipeline\": \"\", \"tensors\": [" CATCH_ALL "]}",
		    "\"no_pipeline\" is not a non-empty string");
}

#define NONE_IF "{\"pipeline\": {\"none_if\": \"llm.archs[0] == 'X'\", " \
	"\"layers\": \"model.layers.{n}.\", \"stages\": [{\"*\": \"all\"}]}, " \
	"\"tensors\": [" CATCH_ALL "]}"

/* A pipeline's "none_if": --pp is refused where the condition holds
 * (InternVL with an InternLM2 text model), planned where it does not. */
Test(kinds, pipeline_none_if)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE " --set-config 'llm={\"archs\": [\"X\"]}'");
	use_rules(&f, NONE_IF);
	f.opt.pp = 2;
	fx_plan_fails(&f, 1, WSHARD_EINVAL,
		      "--pp 2: no pipeline is written for this checkpoint (llm.archs[0] == 'X'; rules 't.json')");
	f.opt.pp = 1;
	fx_close(&f);

	fx_open(&f, BASE " --set-config 'llm={\"archs\": [\"Y\"]}'");
	use_rules(&f, NONE_IF);
	plan_pp2(&f);
	f.opt.pp = 1;
	fx_close(&f);
}

#define SAME_STAGE(same) "{\"pipeline\": {\"layers\": \"model.layers.{n}.\", " \
	"\"stages\": [{\"*\": \"all\"}], \"same_stage\": " same "}, " \
	"\"tensors\": [" CATCH_ALL "]}"
#define SAME_OK SAME_STAGE("{\"source\": \"src\", \"if\": \"ratios[n] > 0\", \"reason\": \"R\"}")
#define FOUR "--layers 4 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 256" \
	" --set-config 'src=[1, 3]'"

/* A pipeline's "same_stage" (DeepSeek-V4.1's kv-sharing groups, which
 * vLLM 0.32 refuses to split between stages, deepseek_v41/attention.py:
 * 455-459, 597-601): a layer where "if" holds must be on the stage of the
 * greatest "source" layer at or below it, at --pp and --pp-layers alike;
 * layers where "if" fails are free; the key wants a source and a reason. */
Test(kinds, pipeline_same_stage)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	static const int one_three[] = { 1, 3 }, three_one[] = { 3, 1 };
	struct wshard_error err;

	fx_open(&f, FOUR " --set-config 'ratios=[0, 2, 2, 1]'");
	use_rules(&f, SAME_OK);
	f.opt.pp = 2;
	f.opt.tp = 1;
	fx_plan_fails(&f, 1, WSHARD_EINVAL,
		      "--pp 2 puts decoder layer 2 on stage 1 and its source layer 1 (config.json's src) on stage 0: R (rules 't.json')");
	f.opt.pp_layers = one_three;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&f.plan, f.cat, f.rules, &f.opt, &err), WSHARD_OK, "%s",
		     err.msg);
	cr_assert_eq(f.plan->nranks, 2);
	get_out(&f, 1, "model.layers.2.input_layernorm.weight");
	wshard_plan_free(f.plan);
	f.plan = NULL;
	f.opt.pp_layers = three_one;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&f.plan, f.cat, f.rules, &f.opt, &err), WSHARD_OK, "%s",
		     err.msg);
	f.opt.pp_layers = NULL;
	f.opt.pp = 1;
	fx_close(&f);

	/* layer 2 not compressed: the boundary before it splits no group */
	fx_open(&f, FOUR " --set-config 'ratios=[0, 2, 0, 1]'");
	use_rules(&f, SAME_OK);
	f.opt.pp = 2;
	f.opt.tp = 1;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&f.plan, f.cat, f.rules, &f.opt, &err), WSHARD_OK, "%s",
		     err.msg);
	wshard_plan_free(f.plan);
	f.plan = NULL;
	f.opt.pp = 4;	/* a stage a layer: each compressed one its own source */
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&f.plan, f.cat, f.rules, &f.opt, &err), WSHARD_OK, "%s",
		     err.msg);
	cr_assert_eq(f.plan->nranks, 4);
	f.opt.pp = 1;
	fx_close(&f);
	parse_fails(SAME_STAGE("{\"source\": \"src\"}"),
		    "pipeline \"same_stage\" is {\"source\": a config key, \"reason\": a string");
}
