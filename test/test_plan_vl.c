/*
 * test_plan_vl.c - what the planner does for a multimodal model beside
 * its text model: a vision tower deeper than the text model (its rules
 * bound their own layers by condition), and the "image_norm" extras,
 * vLLM's on-device image normalisation computed from the checkpoint's
 * processor config; the "arange" extra, BERT's position_ids buffer; and
 * the built-in rules of Qwen3.5's multimodal models that use both.
 *
 * Checkpoints come from scripts/gen-checkpoint (a Llama with extra
 * tensors); the rules are parsed from text.
 */
#include <stdio.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "base/fileio.h"
#include "plan_fixture.h"
#include "rules_test_util.h"

TestSuite(vl, .fini = close_open_fx);

/* Writes file name (text) into the checkpoint and opens it again. */
static void add_file(struct fx *f, const char *name, const char *text)
{
	struct wshard_error err;
	char *path = fmt("%s/%s", f->dir, name);
	FILE *fp = fopen(path, "w");

	cr_assert_not_null(fp);
	fputs(text, fp);
	fclose(fp);
	free(path);
	wshard_catalog_free(f->cat);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_catalog_open(&f->cat, f->dir, &err), WSHARD_OK, "%s", err.msg);
}

/*
 * A rule whose condition bounds its layers ("n < vision_config.depth")
 * takes blocks past num_hidden_layers (2) and requires every one its
 * condition holds for; a rule without such a bound still refuses them.
 */
Test(vl, deeper_tower)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *tower = "{\"tensors\": ["
		"{\"match\": \"v.blocks.{n}.w\", \"if\": \"n < vision_config.depth\","
		" \"split\": \"row\"}," CATCH_ALL "]}";

	fx_open(&f, BASE " --extra-tensor v.blocks.0.w:4,8 --extra-tensor v.blocks.1.w:4,8 "
		"--extra-tensor v.blocks.2.w:4,8 --extra-tensor v.blocks.3.w:4,8 "
		"--set-config 'vision_config={\"depth\":4}'");
	use_rules(&f, tower);
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "v.blocks.3.w"), 2, 2, 8);
	use_rules(&f, "{\"tensors\": [{\"match\": \"v.blocks.{n}.w\", \"split\": \"row\"},"
		  CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'v.blocks.2.w' is for layer 2, but");
	fx_close(&f);

	/* depth 5: block 4, past every block the checkpoint has, is missing */
	fx_open(&f, BASE " --extra-tensor v.blocks.0.w:4,8 --extra-tensor v.blocks.1.w:4,8 "
		"--extra-tensor v.blocks.2.w:4,8 --extra-tensor v.blocks.3.w:4,8 "
		"--set-config 'vision_config={\"depth\":5}'");
	use_rules(&f, tower);
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'v.blocks.4.w' is missing");
	fx_close(&f);
}

/*
 * A condition reads --tp as "tp", and a dotted key config.json holds under
 * thinker_config (Qwen3-ASR's): the encoder's heads divisible by tp cut
 * the tensor, otherwise it is whole (vLLM's disable_tp); a block's own
 * condition joins its use's.
 */
Test(vl, tp_in_conditions)
{
	static struct fx f;
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"a.layers.{n}.w\", \"split\": \"row\","
		" \"if\": \"n < audio_config.layers && audio_config.heads % tp == 0\"},"
		"{\"match\": \"a.layers.{n}.w\", \"split\": \"replicate\","
		" \"if\": \"n < audio_config.layers && audio_config.heads % tp != 0\"},"
		CATCH_ALL "]}";

	fx_open(&f, BASE " --extra-tensor a.layers.0.w:12,8 "
		"--set-config 'thinker_config={\"audio_config\":{\"heads\":6,\"layers\":1}}'");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "a.layers.0.w"), 2, 6, 8);
	fx_plan(&f, 4);
	assert_shape(get_out(&f, 3, "a.layers.0.w"), 2, 12, 8);
	fx_close(&f);
}

#define NORM_RULES "{\"tensors\": [" CATCH_ALL "], \"extra\": [" \
	"{\"name\": \"v.input_norm.weight\", \"image_norm\": \"scale\"}," \
	"{\"name\": \"v.input_norm.bias\", \"image_norm\": \"shift\"}]}"

/* The F32 value of element i of constant tensor t. */
static float elem(const struct wshard_out_tensor *t, size_t i)
{
	float v;

	cr_assert_lt(i, t->npieces);
	cr_assert_eq(t->pieces[i].kind, WSHARD_PIECE_CONST);
	cr_assert_eq(t->pieces[i].dst, 4 * i);
	memcpy(&v, t->pieces[i].value, 4);
	return v;
}

/*
 * "image_norm": scale rescale_factor/std, shift -mean/std per channel,
 * F32 on every rank, from processor_config.json's "image_processor"; an
 * identity map, or no processor config, gives no tensor.
 */
Test(vl, image_norm)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *w, *b;
	int r;

	fx_open(&f, BASE);
	use_rules(&f, NORM_RULES);
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, "v.input_norm.weight"));
	add_file(&f, "processor_config.json", "{\"processor_class\": \"P\", \"image_processor\": "
		 "{\"image_mean\": [0.5, 0.25, 0], \"image_std\": [0.5, 0.25, 2],"
		 " \"rescale_factor\": 0.5}}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		w = get_out(&f, r, "v.input_norm.weight");
		b = get_out(&f, r, "v.input_norm.bias");
		cr_assert_eq(w->dtype, WSHARD_F32);
		assert_shape(w, 1, 3, 0);
		cr_assert_eq(elem(w, 0), 1.0f);
		cr_assert_eq(elem(w, 1), 2.0f);
		cr_assert_eq(elem(w, 2), 0.25f);
		cr_assert_eq(elem(b, 0), -1.0f);
		cr_assert_eq(elem(b, 1), -1.0f);
		cr_assert_eq(elem(b, 2), 0.0f);
	}
	/* do_rescale false, mean 0, std 1: the identity */
	add_file(&f, "processor_config.json", "{\"processor_class\": \"P\", \"image_processor\": "
		 "{\"image_mean\": [0, 0, 0], \"image_std\": [1, 1, 1], \"do_rescale\": false}}");
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 1, "v.input_norm.bias"));
	add_file(&f, "processor_config.json", "{\"processor_class\": \"P\", \"image_processor\": "
		 "{\"image_mean\": [0.5, 0.5], \"image_std\": [0.5, 0.5, 0.5]}}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "~processor_config.json': \"image_mean\" has 2 entries, \"image_std\" 3");
	fx_close(&f);
}

/* Without a processor_class, preprocessor_config.json (transformers' image
 * processor config) is read; rescale_factor defaults to 1/255. */
Test(vl, image_norm_preprocessor)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *w;

	fx_open(&f, BASE);
	use_rules(&f, NORM_RULES);
	add_file(&f, "preprocessor_config.json",
		 "{\"image_mean\": [0.5, 0.5, 0.5], \"image_std\": [0.5, 0.5, 0.5]}");
	fx_plan(&f, 1);
	w = get_out(&f, 0, "v.input_norm.weight");
	cr_assert_eq(elem(w, 0), (1.0f / 0.5f) * (float)(1.0 / 255));
	cr_assert_eq(elem(get_out(&f, 0, "v.input_norm.bias"), 2), -1.0f);
	fx_close(&f);
}

/* "image_norm" takes no "value", "with", "when" or {n}, and is F32 or "model". */
Test(vl, image_norm_parse)
{
	static const char *const bad[] = {
		"{\"name\": \"x\", \"image_norm\": \"mean\"}",
		"{\"name\": \"x\", \"image_norm\": \"scale\", \"value\": 1.0}",
		"{\"name\": \"x\", \"image_norm\": \"scale\", \"dtype\": \"BF16\"}",
		"{\"name\": \"x.{n}\", \"image_norm\": \"shift\"}",
		"{\"name\": \"x\"}",
	};
	static const char *const want[] = {
		"unknown \"image_norm\"", "takes no \"value\"", "takes no \"value\"",
		"takes no \"value\"", "needs a numeric \"value\", \"image_norm\",",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct wshard_rules *r = NULL;
		struct wshard_error err;
		char *text = fmt("{\"tensors\": [{\"match\": \"a\", \"split\": \"row\"}],"
				 " \"extra\": [%s]}", bad[i]);

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_parse(&r, text, strlen(text), "b.json", &err),
			     WSHARD_EINVAL, "%s", bad[i]);
		cr_assert_not_null(strstr(err.msg, want[i]), "%s: %s", bad[i], err.msg);
		wshard_rules_free(r);
		free(text);
	}
}

/*
 * "arange": an I64 [1, N] of 0 .. N - 1 on every rank, one generated
 * piece (BERT's position_ids buffer), N from config.json; an N below 1
 * is refused naming the extra.
 */
Test(vl, arange)
{
	static struct fx f;
	const struct wshard_out_tensor *t;
	int r;

	fx_open(&f, BASE " --set-config max_position_embeddings=40");
	use_rules(&f, "{\"tensors\": [" CATCH_ALL "], \"extra\": ["
		  "{\"name\": \"e.position_ids\", \"arange\": \"max_position_embeddings\"}]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "e.position_ids");
		cr_assert_eq(t->dtype, WSHARD_I64);
		assert_shape(t, 2, 1, 40);
		cr_assert_eq(t->npieces, 1);
		cr_assert_eq(t->pieces[0].kind, WSHARD_PIECE_ARANGE);
		cr_assert_eq(t->pieces[0].len, 40 * 8);
		cr_assert_eq(t->pieces[0].prov_value, 0.0);
	}
	use_rules(&f, "{\"tensors\": [" CATCH_ALL "], \"extra\": ["
		  "{\"name\": \"e.position_ids\", \"arange\": \"max_position_embeddings - 40\"}]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "~extra 'e.position_ids': \"arange\" max_position_embeddings - 40 is 0, not 1 to 2^24");
	fx_close(&f);
}

/*
 * Qwen3.5 with its vision tower, both variants: transformers' names in,
 * vLLM's out (model.language_model. -> language_model.model., lm_head. ->
 * language_model.lm_head., model.visual. -> visual.); the tower's fused
 * qkv unpacked per head, its blocks bounded by vision_config.depth; the
 * image normalisation as two extras.
 */
Test(vl, builtin_rules)
{
	size_t i;

	static const char *const archs[] = {
		"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
	};

	for (i = 0; i < 2; i++) {
		struct wshard_rules *r = NULL;
		struct wshard_error err;
		struct rules_capture cap;
		const struct rules_rule *q;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, archs[i], &err), WSHARD_OK, "%s", err.msg);
		cr_assert_str_eq(r->name, "builtin:qwen3_5_vl");
		cr_assert_eq(r->rules[0].kind, RULE_SKIP);
		q = find_rule(r, "model.language_model.layers.3.linear_attn.in_proj_z.weight", &cap);
		cr_assert_eq(q->kind, RULE_FUSE);
		cr_assert_str_eq(q->output, "language_model.model.layers.{n}.linear_attn.in_proj_qkvz.weight");
		cr_assert_str_eq(find_rule(r, "lm_head.weight", &cap)->output,
				 "language_model.lm_head.weight");
		cr_assert_str_eq(r->tie_output, "language_model.lm_head.weight");
		q = find_rule(r, "model.visual.blocks.26.attn.qkv.bias", &cap);
		cr_assert_eq(q->kind, RULE_UNPACK);
		cr_assert_str_eq(q->cond, "n < vision_config.depth");
		cr_assert_str_eq(q->output, "visual.blocks.{n}.attn.qkv.bias");
		cr_assert_eq(find_rule(r, "model.visual.blocks.0.attn.proj.weight", &cap)->kind,
			     RULE_COL);
		cr_assert_eq(find_rule(r, "model.visual.merger.linear_fc1.bias", &cap)->kind,
			     RULE_ROW);
		cr_assert_eq(r->nextras, 10);
		cr_assert_eq(r->extras[0].image_norm, RULES_IMAGE_NORM_SCALE);
		cr_assert_str_eq(r->extras[1].name, "visual.input_norm.bias");
		wshard_rules_free(r);
	}
}
