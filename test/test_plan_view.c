/*
 * test_plan_view.c - the splits of plan_view.c on a GPT-OSS checkpoint
 * with MXFP4 experts (scripts/gen-checkpoint --arch gpt_oss: hidden 64,
 * intermediate 128, 4 experts), checked piece by piece against values
 * worked out by hand from test/engine/GPTOSS-LAYOUT.md: w2's blocks cut
 * in dimension 2 as E*H rows ("rows": 2), the blocks' output "view",
 * the down bias on rank 0 alone ("first"), the refusal of a rank
 * boundary inside a 32-value block, and the rules keys' own errors
 * (with "qkv_groups" and "source_prefix", whose layouts t-qkv-groups.sh
 * checks).
 */
#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "plan_fixture.h"

TestSuite(view, .fini = close_open_fx);

/* t has 3 dimensions, [d0, d1, d2]. */
static void assert_shape3(const struct wshard_out_tensor *t, uint64_t d0, uint64_t d1,
			  uint64_t d2)
{
	assert_shape(t, 3, d0, d1);
	cr_assert_eq(t->shape[2], d2, "%s: shape[2] %llu, want %llu", t->name,
		     (unsigned long long)t->shape[2], (unsigned long long)d2);
}

#define X "model.layers.0.mlp.experts."
#define O X "routed_experts."

/*
 * down_proj_blocks [4, 64, 4, 16]: 256 rows of 64 bytes; tp 2 gives each
 * rank 2 of the 4 blocks, bytes [32r, 32r + 32) of every row, one piece;
 * written [4, 64, 32].  down_proj_scales [4, 64, 4]: bytes [2r, 2r + 2).
 */
Test(view, down_blocks_cut_in_dimension_2)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch gpt_oss");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, O "w2_weight");

		cr_assert_eq(t->dtype, WSHARD_U8);
		assert_shape3(t, 4, 64, 32);
		cr_assert_eq(t->npieces, 1);
		assert_copy(&f, t, 0, X "down_proj_blocks", 0, 256, 32 * r, 32, 0);
		t = get_out(&f, r, O "w2_weight_scale");
		assert_shape3(t, 4, 64, 2);
		cr_assert_eq(t->npieces, 1);
		assert_copy(&f, t, 0, X "down_proj_scales", 0, 256, 2 * r, 2, 0);
	}
	cr_assert_eq(wshard_plan_src_rows(f.plan, (uint32_t)src_index(&f, X "down_proj_blocks")),
		     256);
	cr_assert_eq(wshard_plan_src_row_dims(f.plan,
					      (uint32_t)src_index(&f, X "down_proj_blocks")), 2);
	cr_assert_eq(wshard_plan_src_row_dims(f.plan,
					      (uint32_t)src_index(&f, X "gate_up_proj_blocks")), 0);
	fx_close(&f);
}

/*
 * gate_up_proj_blocks [4, 256, 2, 16]: 4 rows of 8192 bytes, a column
 * split of dimension 1 (128 of the 256 gate/up rows a rank, 4096 bytes),
 * written [4, 128, 32]; its scales [4, 256, 2] and bias [4, 256] alike.
 */
Test(view, gate_up_blocks_viewed)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch gpt_oss");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, O "w13_weight");

		assert_shape3(t, 4, 128, 32);
		assert_copy(&f, t, 0, X "gate_up_proj_blocks", 0, 4, 4096 * r, 4096, 0);
		t = get_out(&f, r, O "w13_weight_scale");
		assert_shape3(t, 4, 128, 2);
		assert_copy(&f, t, 0, X "gate_up_proj_scales", 0, 4, 256 * r, 256, 0);
		t = get_out(&f, r, O "w13_bias");
		assert_shape(t, 2, 4, 128);
		assert_copy(&f, t, 0, X "gate_up_proj_bias", 0, 4, 256 * r, 256, 0);
	}
	fx_close(&f);
}

/* down_proj_bias [4, 64] BF16: rank 0 whole, ranks 1-3 512 zero bytes. */
Test(view, down_bias_on_rank_0)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch gpt_oss");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, O "w2_bias");

		assert_shape(t, 2, 4, 64);
		cr_assert_eq(t->npieces, 1);
		if (r == 0)
			assert_copy(&f, t, 0, X "down_proj_bias", 0, 4, 0, 128, 0);
		else
			assert_zero(t, 0, 0, 512);
	}
	fx_close(&f);
}

/* intermediate 96: 3 blocks of 32 cannot go whole to 2 ranks. */
Test(view, block_boundary_refused)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--arch gpt_oss --intermediate 96");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor '" X "down_proj_blocks': dimension 2 (3) is not divisible by --tp 2");
	fx_close(&f);
}

/* Every GPT-OSS tensor whole but the gate/up scales, which "chunks" cuts. */
#define R(m) "{\"match\": \"" m "\", \"split\": \"replicate\"},"
#define GPTOSS_REST R("lm_head.weight") R("model.embed_tokens.weight") R("model.norm.weight") \
	R(LN "input_layernorm.weight") R(LN "post_attention_layernorm.weight") \
	R(LN "mlp.experts.down_proj_bias") R(LN "mlp.experts.down_proj_blocks") \
	R(LN "mlp.experts.down_proj_scales") R(LN "mlp.experts.gate_up_proj_bias") \
	R(LN "mlp.experts.gate_up_proj_blocks") R(LN "mlp.router.bias") \
	R(LN "mlp.router.weight") R(LN "self_attn.sinks") \
	R(LN "self_attn.q_proj.weight") R(LN "self_attn.k_proj.weight") \
	R(LN "self_attn.v_proj.weight") R(LN "self_attn.o_proj.weight") \
	R(LN "self_attn.q_proj.bias") R(LN "self_attn.k_proj.bias") \
	R(LN "self_attn.v_proj.bias") R(LN "self_attn.o_proj.bias")
#define LN "model.layers.{n}."

/*
 * "chunks" without "transpose" (Granite MoE's input_linear [E, 2I, H]):
 * gate_up_proj_scales [4, 256, 2] U8 as two parts of 128 rows an expert,
 * each cut by tp 2: rank r's expert e holds rows [64r, 64r + 64) of each
 * part, bytes [2 * (128c + 64r), +128) of row e, one piece per expert and
 * part, written [4, 128, 2]; and refused under --expert-parallel.
 */
Test(view, chunks_without_transpose)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r, e, c;

	fx_open(&f, "--arch gpt_oss");
	use_rules(&f, "{\"name\": \"t\", \"architectures\": [\"GptOssForCausalLM\"], \"tensors\": ["
		  "{\"match\": \"" LN "mlp.experts.gate_up_proj_scales\", \"split\": \"col\", "
		  "\"chunks\": 2}," GPTOSS_REST "{\"match\": \"unused\", \"split\": \"skip\", "
		  "\"optional\": true}]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, X "gate_up_proj_scales");

		assert_shape3(t, 4, 128, 2);
		cr_assert_eq(t->npieces, 8);
		for (e = 0; e < 4; e++)
			for (c = 0; c < 2; c++)
				assert_copy(&f, t, (size_t)(2 * e + c), X "gate_up_proj_scales",
					    (uint64_t)e, 1, 2 * (128 * (uint64_t)c + 64 * (uint64_t)r),
					    128, 128 * (uint64_t)(2 * e + c));
	}
	fx_close(&f);
	fx_open(&f, "--arch gpt_oss");
	use_rules(&f, "{\"name\": \"t\", \"architectures\": [\"GptOssForCausalLM\"], \"tensors\": ["
		  "{\"match\": \"" LN "mlp.experts.gate_up_proj_scales\", \"split\": \"col\", "
		  "\"chunks\": 2}," GPTOSS_REST "{\"match\": \"unused\", \"split\": \"skip\", "
		  "\"optional\": true}]}");
	f.opt.expert_parallel = true;
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor '" X "gate_up_proj_scales': --expert-parallel needs \"experts\" "
		      "(and \"transpose\") on a rule with \"chunks\"");
	fx_close(&f);
}

/*
 * "chunks" with "interleave" on a matrix (the OpenAI Privacy Filter's
 * gate_up_proj_bias [E, 2I] as [gate | up]): gate_up_proj_bias [4, 256]
 * BF16 at tp 2, one transposed piece a rank over the 4 rows, its 2
 * sub-rows (the halves, 128 elements apart) of 64 elements each from
 * element 64r, written [4, 128] as gate, up pairs.
 */
Test(view, chunks_interleaved)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch gpt_oss");
	use_rules(&f, "{\"name\": \"t\", \"architectures\": [\"GptOssForCausalLM\"], \"tensors\": ["
		  "{\"match\": \"" LN "mlp.experts.gate_up_proj_bias\", \"split\": \"col\", "
		  "\"chunks\": 2, \"interleave\": true}," R(LN "mlp.experts.gate_up_proj_scales")
		  GPTOSS_REST "{\"match\": \"unused\", "
		  "\"split\": \"skip\", \"optional\": true}]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, X "gate_up_proj_bias");
		const struct wshard_piece *p = &t->pieces[0];

		assert_shape(t, 2, 4, 128);
		cr_assert_eq(t->npieces, 1);
		cr_assert_eq(p->row0, 0);
		cr_assert_eq(p->nrows, 4);
		cr_assert_eq(p->col0, 128 * (uint64_t)r);
		cr_assert_eq(p->tr_rows, 2);
		cr_assert_eq(p->tr_stride, 256);
		cr_assert_eq(p->tr_width, 128);
		cr_assert_eq(p->tr_es, 2);
		cr_assert_eq(p->out_ncols, 256);
		cr_assert_eq(p->len, 1024);
	}
	fx_close(&f);
}

static void parse_fails(const char *rule, const char *want)
{
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	char *doc = fmt("{\"name\": \"t\", \"architectures\": [\"X\"], \"tensors\": [%s]}", rule);

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, doc, strlen(doc), "t", &err), WSHARD_EINVAL, "%s",
		     rule);
	cr_assert_not_null(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
	free(doc);
}

Test(view, rules_keys_checked)
{
	parse_fails("{\"match\": \"a\", \"split\": \"row\", \"rows\": 2}",
		    "\"rows\" needs \"split\": \"col\"");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"rows\": 0}",
		    "\"rows\" and \"view\" are integers");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"view\": \"3\"}",
		    "\"rows\" and \"view\" are integers");
	parse_fails("{\"match\": \"a\", \"split\": \"firsts\"}", "skip, first)");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"transpose\": true, \"chunks\": 2}",
		    "\"chunks\" is an integer from 1 to 64 and needs \"split\": \"col\" "
		    "(\"rows\": 2 with \"transpose\", else 1)");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"rows\": 2, \"chunks\": 2}",
		    "\"chunks\" is an integer from 1 to 64");
	parse_fails("{\"match\": \"a\", \"split\": \"row\", \"chunks\": 2}",
		    "\"chunks\" is an integer from 1 to 64");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"rows\": 2, \"transpose\": true, "
		    "\"chunks\": 0}", "\"chunks\" is an integer");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"interleave\": true}",
		    "\"interleave\" is true or false and needs \"chunks\" of 2 or more");
	parse_fails("{\"match\": \"a\", \"split\": \"row\", \"experts\": true}",
		    "\"experts\" is true or false and needs \"transpose\" or \"split\": \"col\"");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"transpose\": true, "
		    "\"experts\": 1}", "\"experts\" is true or false");
	parse_fails("{\"match\": \"a\", \"split\": \"row\", \"deinterleave\": \"head_dim\"}",
		    "\"deinterleave\" is an expression (rows per block) on a \"fuse\" part");
	parse_fails("{\"match\": \"a\", \"fuse\": \"qkv.q\", \"output\": \"b\", "
		    "\"deinterleave\": [1]}", "\"deinterleave\" is an expression");
	parse_fails("{\"match\": \"a\", \"split\": \"row\", \"deinterleave\": true}",
		    "\"deinterleave\": true needs a \"col\" split without \"transpose\"");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"rows\": 2, "
		    "\"deinterleave\": true}", "\"deinterleave\": true needs a \"col\" split");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"deinterleave\": 2}",
		    "\"deinterleave\" is an expression (rows per block) on a \"fuse\" part, or "
		    "true on a \"col\" split");
	parse_fails("{\"match\": \"a\", \"split\": \"row\", \"reshape\": []}",
		    "\"reshape\" is an array of 1 to 8 expressions on a \"row\", \"col\" or "
		    "\"replicate\" split without \"view\"");
	parse_fails("{\"match\": \"a\", \"split\": \"row\", \"view\": 1, \"reshape\": [1]}",
		    "\"reshape\" is an array of 1 to 8 expressions");
	parse_fails("{\"match\": \"a\", \"split\": \"vocab\", \"reshape\": [1]}",
		    "\"reshape\" is an array of 1 to 8 expressions");
	parse_fails("{\"match\": \"a\", \"split\": \"row\", \"reshape\": [1, [2]]}",
		    "\"reshape\" entry 1 is neither a number nor a string");
	parse_fails("{\"match\": \"a\", \"split\": \"replicate\", \"transpose_cols\": 3}",
		    "\"transpose_cols\" is an expression on a \"replicate\" split with "
		    "\"transpose\", without \"view\"");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"transpose\": true, "
		    "\"transpose_cols\": 3}", "\"transpose_cols\" is an expression");
	parse_fails("{\"match\": \"a\", \"split\": \"replicate\", \"transpose\": true, "
		    "\"transpose_cols\": [3]}", "\"transpose_cols\" is an expression");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"beside\": true}",
		    "\"beside\" is true or false on a \"col\" split with \"rows\": 2");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"rows\": 2, \"beside\": 1}",
		    "\"beside\" is true or false");
	parse_fails("{\"match\": \"a\", \"split\": \"col\", \"rows\": 2, \"beside\": true, "
		    "\"transpose\": true}", "\"beside\" is true or false on a \"col\" split");
	parse_fails("{\"match\": \"a\", \"split\": \"row\", \"qkv_groups\": true}",
		    "\"qkv_groups\" is true or false on an \"unpack\" or a \"fuse\" of parts k+v "
		    "of a \"split\": \"qkv\" operator without \"sizes\"");
	/* a fuse of k+v needs it (there are no sizes to cut by), q+k never */
	parse_fails("{\"match\": \"a\", \"fuse\": \"qkv.k+v\", \"output\": \"o\"}",
		    "operator 'qkv' needs \"sizes\" for a source holding several parts "
		    "(or \"qkv_groups\" on its k+v)");
	parse_fails("{\"match\": \"a\", \"fuse\": \"qkv.q+k\", \"output\": \"o\", "
		    "\"qkv_groups\": true}", "\"qkv_groups\" is true or false on an \"unpack\" or");
	parse_fails("{\"match\": \"a\", \"fuse\": \"qkv.v+k\", \"output\": \"o\", "
		    "\"qkv_groups\": true}", "\"qkv_groups\" is true or false on an \"unpack\" or");
	parse_fails("{\"match\": \"a\", \"unpack\": \"gate_up\", \"qkv_groups\": true}",
		    "\"qkv_groups\" is true or false on an \"unpack\"");
	parse_fails("{\"match\": \"a\", \"unpack\": \"qkv\", \"qkv_groups\": 1}",
		    "\"qkv_groups\" is true or false");
}

/* "source_prefix": a name without it is matched with it in front. */
Test(view, source_prefix)
{
	static const char *const bad[] = { "1", "\"\"", "[\"transformer.\"]" };
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	char buf[RULES_NAME_MAX], *doc;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		doc = fmt("{\"name\": \"t\", \"architectures\": [\"X\"], \"source_prefix\": %s, "
			  "\"tensors\": [{\"match\": \"a\", \"split\": \"row\"}]}", bad[i]);
		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_parse(&r, doc, strlen(doc), "t", &err), WSHARD_EINVAL,
			     "%s", bad[i]);
		cr_assert_not_null(strstr(err.msg, "\"source_prefix\" is not a string of 1 to 63"),
				   "%s", err.msg);
		free(doc);
	}
	doc = fmt("{\"name\": \"t\", \"architectures\": [\"X\"], "
		  "\"source_prefix\": \"transformer.\", "
		  "\"tensors\": [{\"match\": \"a\", \"split\": \"row\"}]}");
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, doc, strlen(doc), "t", &err), WSHARD_OK, "%s", err.msg);
	cr_assert_str_eq(rules_source_name(r, "h.0.x", buf), "transformer.h.0.x");
	cr_assert_str_eq(rules_source_name(r, "transformer.h.0.x", buf), "transformer.h.0.x");
	wshard_rules_free(r);
	free(doc);
}

/* "source_renames": the first prefix a name begins with is replaced. */
Test(view, source_renames)
{
	static const char *const bad[] = {
		"1", "[]", "[\"model.\"]", "[{\"from\": \"model.\"}]",
		"[{\"from\": \"\", \"to\": \"x.\"}]",
		"[{\"from\": \"a.\", \"to\": \"b.\", \"also\": \"c.\"}]",
	};
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	char buf[RULES_NAME_MAX], *doc;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		doc = fmt("{\"name\": \"t\", \"architectures\": [\"X\"], \"source_renames\": %s, "
			  "\"tensors\": [{\"match\": \"a\", \"split\": \"row\"}]}", bad[i]);
		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_parse(&r, doc, strlen(doc), "t", &err), WSHARD_EINVAL,
			     "%s", bad[i]);
		cr_assert_not_null(strstr(err.msg, "\"source_renames\""), "%s", err.msg);
		cr_assert_null(strchr(err.msg, '\n'));
		free(doc);
	}
	/* Qwen2.5-VL saved by transformers 4.52+, read as Qwen ships it; the
	 * longer prefix first, and source_prefix only where none applies */
	doc = fmt("{\"name\": \"t\", \"architectures\": [\"X\"], \"source_prefix\": \"p.\", "
		  "\"source_renames\": [{\"from\": \"model.language_model.\", \"to\": \"model.\"}, "
		  "{\"from\": \"model.visual.\", \"to\": \"visual.\"}], "
		  "\"tensors\": [{\"match\": \"a\", \"split\": \"row\"}]}");
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, doc, strlen(doc), "t", &err), WSHARD_OK, "%s", err.msg);
	cr_assert_str_eq(rules_source_name(r, "model.language_model.layers.0.x", buf),
			 "model.layers.0.x");
	cr_assert_str_eq(rules_source_name(r, "model.visual.blocks.0.x", buf), "visual.blocks.0.x");
	cr_assert_str_eq(rules_source_name(r, "model.layers.0.x", buf), "p.model.layers.0.x");
	cr_assert_str_eq(rules_source_name(r, "p.lm_head.weight", buf), "p.lm_head.weight");
	wshard_rules_free(r);
	free(doc);
}
