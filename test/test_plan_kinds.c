/*
 * test_plan_kinds.c - rules for models whose layers are of several kinds
 * (Gemma 4's): conditions that compare a config array's text ("KEY[n] ==
 * 'text'") and join two conditions ("A && B"), a fused part whose source
 * also fills another part ("also": k loaded as v), and layers vLLM holds
 * under another name ("rename_layers").
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

TestSuite(kinds, .fini = close_open_fx);

/* Rules text fails to parse with want inside its one-line message. */
static void rules_fails(struct fx *f, const char *text, const char *want)
{
	struct wshard_rules *r = NULL;
	struct wshard_error err;

	(void)f;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, text, strlen(text), "t.json", &err), WSHARD_EINVAL,
		     "parsed: %s", text);
	cr_assert_null(strchr(err.msg, '\n'), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
	wshard_rules_free(r);
}

/* Layer 0 of model.layers.{n}.x.weight [4, 8] cut by rows where row
 * holds, whole where whole holds, config.json set so (or the error). */
static void two_kinds(const char *row, const char *whole, const char *config,
		      const char *want_err)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	char *rules = fmt("{\"tensors\": ["
		"{\"match\": \"model.layers.{n}.x.weight\", \"if\": \"%s\", \"split\": \"row\"},"
		"{\"match\": \"model.layers.{n}.x.weight\", \"if\": \"%s\", \"split\": \"replicate\"},"
		CATCH_ALL "]}", row, whole);
	char *args = fmt(BASE " --extra-tensor model.layers.0.x.weight:4,8 --extra-tensor "
			 "model.layers.1.x.weight:4,8 --set-config '%s'", config);

	fx_open(&f, args);
	use_rules(&f, rules);
	if (want_err) {
		fx_plan_fails(&f, 2, WSHARD_EINVAL, want_err);
	} else {
		fx_plan(&f, 2);
		assert_shape(get_out(&f, 1, "model.layers.0.x.weight"), 2, 2, 8);
		assert_shape(get_out(&f, 1, "model.layers.1.x.weight"), 2, 4, 8);
	}
	fx_close(&f);
	free(rules);
	free(args);
}

/* "KEY[i] == 'text'" and "!=": element i of an array of strings. */
Test(kinds, text_condition)
{
	two_kinds("kinds[n] == 'sliding'", "kinds[n] != 'sliding'",
		  "kinds=[\"sliding\", \"full\"]", NULL);
	two_kinds("kinds[n] == 'sliding'", "kinds[n] == 'full'",
		  "kinds=[\"sliding\", \"full\"]", NULL);
	/* a prefix of the text is not the text */
	two_kinds("kinds[n] == 'slid'", "kinds[n] == 'full'",
		  "kinds=[\"sliding\", \"full\"]", "~not covered by rules");
	two_kinds("kinds[n] == 'sliding'", "kinds[n] == 'full'", "kinds=[\"sliding\"]",
		  "~config.json's 'kinds' has no text at 1");
	two_kinds("kinds[n] == 'sliding'", "kinds[n] == 'full'", "kinds=[0, 1]",
		  "~config.json's 'kinds' has no text at 0");
	two_kinds("kinds[n] == 'sliding'", "kinds[n] == 'full'", "other=1",
		  "~config.json has no array 'kinds'");
	two_kinds("kinds[n] == 'sliding", "kinds[n] == 'full'", "kinds=[\"sliding\", \"full\"]",
		  "~malformed condition");
	two_kinds("kinds[n] > 'sliding'", "kinds[n] == 'full'", "kinds=[\"sliding\", \"full\"]",
		  "~malformed condition");
	two_kinds("'sliding' == kinds[n]", "kinds[n] == 'full'", "kinds=[\"sliding\", \"full\"]",
		  "~malformed condition");
}

/* "A && B": both hold; either side may be any condition. */
Test(kinds, and_condition)
{
	two_kinds("n < 1 && kinds[n] == 'sliding'", "n >= 1", "kinds=[\"sliding\", \"sliding\"]",
		  NULL);
	two_kinds("n < 1 && !off", "n >= 1 && k", "k=1", NULL);
	/* layer 1 fails the first rule's "&&" on its right, layer 0 the
	 * second's on its left */
	two_kinds("n < 2 && kinds[n] == 'sliding'", "n > 0 && kinds[n] == 'full'",
		  "kinds=[\"sliding\", \"full\"]", NULL);
	two_kinds("n < 1 && ", "n >= 1", "k=1", "~malformed condition");
}

#define QKV_ALSO(v_rule) "{\"fused\": {\"g\": {\"parts\": [\"q\", \"k\", \"v\"], " \
	"\"split\": \"qkv\"}}, \"tensors\": [" \
	"{\"match\": \"model.layers.{n}.self_attn.q_proj.weight\", \"fuse\": \"g.q\", \"output\": \"model.layers.{n}.qkv\"}," \
	"{\"match\": \"model.layers.{n}.self_attn.k_proj.weight\", \"fuse\": \"g.k\", \"also\": \"v\", \"output\": \"model.layers.{n}.qkv\"}," \
	v_rule CATCH_NO_QKV "]}"
#define V_SKIP "{\"match\": \"model.layers.{n}.self_attn.v_proj.weight\", " \
	"\"split\": \"skip\", \"reason\": \"k is v\"},"
/* CATCH_ALL without q/k/v */
#define CATCH_NO_QKV REP("model.embed_tokens.weight") REP("lm_head.weight") \
	REP("model.norm.weight") REP("model.layers.{n}.input_layernorm.weight") \
	REP("model.layers.{n}.post_attention_layernorm.weight") \
	REP("model.layers.{n}.self_attn.o_proj.weight") \
	REP("model.layers.{n}.mlp.gate_proj.weight") \
	REP("model.layers.{n}.mlp.up_proj.weight") \
	"{\"match\": \"model.layers.{n}.mlp.down_proj.weight\", \"split\": \"replicate\"}"

/*
 * "also": k_proj fills parts k and v, each rank's v rows the same k rows
 * (Gemma 4's attention_k_eq_v); at tp 4 each of the 2 kv heads is whole
 * on two ranks, in both parts.  A v_proj beside it is refused; "also"
 * naming its own part, an unknown one, or without "fuse" is malformed.
 */
Test(kinds, fuse_also)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, BASE);
	use_rules(&f, QKV_ALSO(V_SKIP));
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "model.layers.1.qkv");

		assert_shape(t, 2, 32 + 8 + 8, 64);
		assert_copy(&f, t, 0, "model.layers.1.self_attn.q_proj.weight", 32 * r, 32, 0,
			    128, 0);
		assert_copy(&f, t, 1, "model.layers.1.self_attn.k_proj.weight", 8 * r, 8, 0,
			    128, 32 * 128);
		assert_copy(&f, t, 2, "model.layers.1.self_attn.k_proj.weight", 8 * r, 8, 0,
			    128, 40 * 128);
	}
	fx_close(&f);

	fx_open(&f, BASE);
	use_rules(&f, QKV_ALSO(V_SKIP));
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "model.layers.0.qkv");

		assert_shape(t, 2, 16 + 8 + 8, 64);
		assert_copy(&f, t, 2, "model.layers.0.self_attn.k_proj.weight", 8 * (r / 2), 8,
			    0, 128, 24 * 128);
	}
	fx_close(&f);

	fx_open(&f, BASE);
	use_rules(&f, QKV_ALSO("{\"match\": \"model.layers.{n}.self_attn.v_proj.weight\", "
			       "\"fuse\": \"g.v\", \"output\": \"model.layers.{n}.qkv\"},"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~are both part 'v' of");
	fx_close(&f);

	fx_open(&f, BASE);
	rules_fails(&f, "{\"fused\": {\"g\": {\"parts\": [\"q\", \"k\", \"v\"], \"split\": \"qkv\"}}, "
		    "\"tensors\": [{\"match\": \"a\", \"fuse\": \"g.k\", \"also\": \"k\", \"output\": \"o\"}]}",
		    "\"also\" must name another part");
	rules_fails(&f, "{\"fused\": {\"g\": {\"parts\": [\"q\", \"k\", \"v\"], \"split\": \"qkv\"}}, "
		    "\"tensors\": [{\"match\": \"a\", \"fuse\": \"g.k\", \"also\": \"w\", \"output\": \"o\"}]}",
		    "\"also\" must name another part");
	rules_fails(&f, "{\"tensors\": [{\"match\": \"a\", \"split\": \"row\", \"also\": \"v\"}]}",
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
	fx_close(&f);

	fx_open(&f, BASE);
	rules_fails(&f, "{\"rename_layers\": {\"prefix\": \"model.layers.\", \"to\": \"m.{n}.\", "
		    "\"from\": \"1\"}, \"tensors\": [" CATCH_ALL "]}",
		    "\"rename_layers\" is not");
	rules_fails(&f, "{\"rename_layers\": {\"prefix\": \"model.layers.{n}.\", "
		    "\"to\": \"m.{n}.\"}, \"tensors\": [" CATCH_ALL "]}", "\"rename_layers\" is not");
	fx_close(&f);
}
