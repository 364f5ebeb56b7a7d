/*
 * plan_rules_fixture.h - what the suites of the rules format's planner
 * extensions share (test_plan_rules.c, test_plan_kinds.c): rules text for
 * gen-checkpoint's small Llama without its q/k/v, and a check of two
 * rules for one per-layer tensor under two conditions.  Header-only; to
 * be included after plan_fixture.h and rules_test_util.h.
 */
#ifndef WSHARD_PLAN_RULES_FIXTURE_H
#define WSHARD_PLAN_RULES_FIXTURE_H

/* CATCH_ALL without q/k/v, for rules that fuse them. */
#define CATCH_NO_QKV REP("model.embed_tokens.weight") REP("lm_head.weight") \
	REP("model.norm.weight") REP("model.layers.{n}.input_layernorm.weight") \
	REP("model.layers.{n}.post_attention_layernorm.weight") \
	REP("model.layers.{n}.self_attn.o_proj.weight") \
	REP("model.layers.{n}.mlp.gate_proj.weight") \
	REP("model.layers.{n}.mlp.up_proj.weight") \
	"{\"match\": \"model.layers.{n}.mlp.down_proj.weight\", \"split\": \"replicate\"}"

/*
 * Rules for model.layers.{n}.x.weight (layers 0 and 1, [4, 8]): by rows
 * where condition row holds, whole where whole does, with config.json's
 * config set so; layer 0 must be cut and layer 1 whole at tp 2, or, with
 * want_err, planning fails with it.
 */
static __attribute__((unused)) void layer_conditions(const char *row, const char *whole, const char *config,
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

#endif
