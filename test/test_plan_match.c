/*
 * test_plan_match.c - the errors matching sources to rules must raise
 * before anything is written (plan_match.c): uncovered tensors, missing
 * ones, shapes against config.json, indivisible splits, bad options.
 *
 * Checkpoints are written at test time by scripts/gen-checkpoint (under
 * $PYTHON, default python3).  Run from the repository root, or with
 * WSHARD_TEST_ROOT naming it.
 */
#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "plan_fixture.h"

TestSuite(errors, .fini = close_open_fx);

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

Test(errors, uncovered_listed)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --extra-tensor zzz.bar:2,2 "
		"--extra-tensor model.foo.weight:4 --extra-tensor model.layers.0.mystery:3");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~3 tensors");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "~'model.foo.weight', 'model.layers.0.mystery', 'zzz.bar'");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~builtin:llama");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~not covered");
	fx_close(&f);

	fx_open(&f, LLAMA " --kv-heads 2 --extra-tensor model.layers.0.mlp.gate.weight:4");
	fx_plan_fails(&f, 1, WSHARD_EINVAL, "~1 tensor ");
	fx_plan_fails(&f, 1, WSHARD_EINVAL, "~'model.layers.0.mlp.gate.weight'");
	fx_close(&f);
}

/* 25 uncovered: the first 20 by name, then the count of the rest. */
Test(errors, uncovered_first_20)
{
	struct wshard_plan *plan = NULL;
	struct wshard_error err;
	char args[2048] = LLAMA " --kv-heads 2";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int i;

	for (i = 0; i < 25; i++)
		snprintf(args + strlen(args), sizeof(args) - strlen(args),
			 " --extra-tensor x.%02d:2", i);
	fx_open(&f, args);
	f.opt.tp = 2;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&plan, f.cat, f.rules, &f.opt, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "25 tensors"), "%s", err.msg);
	for (i = 0; i < 20; i++) {
		char name[16];

		snprintf(name, sizeof(name), "'x.%02d'", i);
		cr_assert_not_null(strstr(err.msg, name), "'%s' lacks %s", err.msg, name);
	}
	for (; i < 25; i++) {
		char name[16];

		snprintf(name, sizeof(name), "'x.%02d'", i);
		cr_assert_null(strstr(err.msg, name), "'%s' has %s", err.msg, name);
	}
	cr_assert_not_null(strstr(err.msg, "and 5 more"), "%s", err.msg);
	fx_close(&f);
}

/* Long names fill the message before 20: the count still covers the rest. */
Test(errors, uncovered_long_names)
{
	char args[8192] = LLAMA " --kv-heads 2";
	struct wshard_plan *plan = NULL;
	struct wshard_error err;
	static struct fx f;	/* static: outlives an aborted test for fini */
	unsigned long listed = 0, more = 0;
	const char *p;
	int i;

	for (i = 0; i < 30; i++)
		snprintf(args + strlen(args), sizeof(args) - strlen(args),
			 " --extra-tensor y.%02d.%s:2", i,
			 "a_rather_long_tensor_name_that_fills_the_error_message_quickly_"
			 "as_some_real_checkpoints_do");
	fx_open(&f, args);
	f.opt.tp = 2;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&plan, f.cat, f.rules, &f.opt, &err), WSHARD_EINVAL);
	cr_assert_lt(strlen(err.msg), WSHARD_ERRMAX);
	cr_assert_not_null(strstr(err.msg, "30 tensors"), "%s", err.msg);
	for (p = err.msg; (p = strstr(p, "'y.")); p++)
		listed++;
	p = strstr(err.msg, " and ");
	cr_assert_not_null(p, "%s", err.msg);
	cr_assert_eq(sscanf(p, " and %lu more", &more), 1, "%s", err.msg);
	cr_assert_eq(listed + more, 30, "%lu listed + %lu more: %s", listed, more, err.msg);
	fx_close(&f);
}

Test(errors, heads_not_divisible)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--layers 1 --hidden 48 --heads 6 --kv-heads 2 --intermediate 128 --vocab 256");
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "num_attention_heads=6 is not divisible by --tp 4");
	fx_close(&f);
}

Test(errors, kv_heads_not_divisible)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	/* V 192 = 3 * 64 divides at tp 2 (96), 3 (64) and 4 (48). */
	fx_open(&f, "--layers 1 --hidden 96 --heads 12 --kv-heads 3 --intermediate 192 "
		"--vocab 192");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "num_key_value_heads=3 is not divisible by --tp 2");
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "~num_key_value_heads=3");
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "~--tp 4");
	fx_plan(&f, 3);
	fx_close(&f);
}

Test(errors, intermediate_not_divisible)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 100 "
		"--vocab 256");
	fx_plan_fails(&f, 8, WSHARD_EINVAL, "intermediate_size=100 is not divisible by --tp 8");
	fx_plan(&f, 2);
	fx_close(&f);
}

Test(errors, shape_contradicts_config)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --set-config intermediate_size=256");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'model.layers.0.mlp.down_proj.weight' has shape [64, 128] "
		      "but config.json gives [hidden_size, intermediate_size] = [64, 256]");
	fx_close(&f);

	fx_open(&f, LLAMA " --kv-heads 2 --set-config num_key_value_heads=4");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'model.layers.0.self_attn.k_proj.weight'");
	fx_close(&f);

	fx_open(&f, LLAMA " --kv-heads 2 --set-config vocab_size=256");
	fx_plan_fails(&f, 1, WSHARD_EINVAL, "~tensor 'lm_head.weight' has shape [250, 64]");
	fx_close(&f);
}

Test(errors, missing_tensor)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --drop-tensor " L0 "self_attn.k_proj.weight");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~'" L0 "self_attn.k_proj.weight'");
	fx_close(&f);
}

/* Gemma2's extra norms are required of Gemma2 (vLLM refuses a state
 * without them), while Gemma (1), which shares the rules, has none. */
Test(errors, gemma2_norms_required)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--arch gemma2 --layers 2 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 256 "
		"--drop-tensor model.layers.1.pre_feedforward_layernorm.weight");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~'model.layers.1.pre_feedforward_layernorm.weight'");
	fx_close(&f);
	fx_open(&f, "--arch gemma --layers 2 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 256");
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, L0 "pre_feedforward_layernorm.weight"));
	fx_close(&f);
}

/* num_hidden_layers says 3, the checkpoint has 2: layer 2 is missing. */
Test(errors, missing_layer)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --set-config num_hidden_layers=2");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~'model.layers.1.");
	fx_close(&f);
}

Test(errors, no_config)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	char *cfg;

	fx_open(&f, LLAMA " --kv-heads 2");
	wshard_catalog_free(f.cat);
	cfg = fmt("%s/config.json", f.dir);
	cr_assert_eq(unlink(cfg), 0);
	free(cfg);
	cr_assert_eq(wshard_catalog_open(&f.cat, f.dir, NULL), WSHARD_OK);
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~config.json");
	fx_close(&f);
}

Test(errors, bad_options)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan_fails(&f, 0, WSHARD_EUSAGE, "~--tp 0");
	fx_plan_fails(&f, -1, WSHARD_EUSAGE, NULL);
	fx_plan_fails(&f, 4097, WSHARD_EUSAGE, NULL);
	f.opt.target = "sglang-legacy";
	fx_plan_fails(&f, 2, WSHARD_EUSAGE, "~'sglang-legacy'");
	f.opt.target = "vllm";
	f.opt.max_file_size = 0;
	fx_plan_fails(&f, 2, WSHARD_EUSAGE, "~--max-file-size");
	fx_close(&f);
}

Test(errors, free_null)
{
	wshard_plan_free(NULL);
}

