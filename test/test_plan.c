/*
 * test_plan.c - what plan_build.c adds to the cut items, checked against
 * values worked out by hand from OUTPUT-CONTRACT.md section 3: tied
 * embeddings, attention scales and the cut of each rank into parts.
 *
 * Checkpoints are written at test time by scripts/gen-checkpoint (under
 * $PYTHON, default python3).  Run from the repository root, or with
 * WSHARD_TEST_ROOT naming it.
 */
#include <criterion/criterion.h>

#include "wshard.h"
#include "plan_fixture.h"
#include "rules_test_util.h"

TestSuite(tie, .fini = close_open_fx);
TestSuite(scales, .fini = close_open_fx);
TestSuite(parts, .fini = close_open_fx);

/* ------------------------------------------------------------------ */
/* Tied embeddings                                                     */
/* ------------------------------------------------------------------ */

/* Tied Llama: only lm_head.weight, built from the embedding's rows. */
Test(tie, llama_tied)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2 --tie");
	cr_assert_eq(wshard_catalog_index(f.cat, "lm_head.weight"), -1);
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "lm_head.weight");

		cr_assert_null(find_out(&f, r, "model.embed_tokens.weight"),
			       "rank %d writes the tied embedding twice", r);
		assert_vocab250_tp4(&f, t, r, "model.embed_tokens.weight");
	}
	fx_close(&f);
}

/*
 * A tied checkpoint that still carries an lm_head.weight of other bytes
 * (the generator's are its own): vLLM loads that head untied, and so the
 * plan writes it, the embedding apart (t-tie.sh: a copy stays tied).
 */
Test(tie, llama_tied_with_own_head)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, LLAMA " --kv-heads 2 --tie --lm-head");
	cr_assert_geq(wshard_catalog_index(f.cat, "lm_head.weight"), 0);
	fx_plan(&f, 2);
	cr_assert(f.plan->untied_by_checkpoint);
	t = get_out(&f, 1, "lm_head.weight");
	assert_copy(&f, t, 0, "lm_head.weight", 128, 122, 0, RB, 0);
	assert_zero(t, 1, 122 * RB, 6 * RB);
	t = get_out(&f, 0, "model.embed_tokens.weight");
	assert_copy(&f, t, 0, "model.embed_tokens.weight", 0, 128, 0, RB, 0);
	fx_close(&f);
}

/*
 * "copy": the embedding keeps its name and its cut, and the head is
 * written as a copy of it, cut by the head's own rule (BERT's MLM decoder,
 * which vLLM fills from the embedding), here whole on both ranks; the
 * checkpoint's stray lm_head.weight is dropped.
 */
Test(tie, copy)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;
	int r;

	fx_open(&f, LLAMA " --kv-heads 2 --tie --lm-head");
	use_rules(&f, "{\"tie\": {\"source\": \"model.embed_tokens.weight\", \"output\": "
		  "\"lm_head.weight\", \"copy\": true, \"drop\": [\"lm_head.weight\"]},"
		  "\"tensors\": [{\"match\": \"model.embed_tokens.weight\", \"split\": \"vocab\"},"
		  CATCH_ALL "]}");
	fx_plan(&f, 2);
	assert_unused(&f, "lm_head.weight");
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "lm_head.weight");
		assert_shape(t, 2, 250, 64);
		assert_copy(&f, t, 0, "model.embed_tokens.weight", 0, 250, 0, RB, 0);
		t = get_out(&f, r, "model.embed_tokens.weight");
		assert_shape(t, 2, 128, 64);
		assert_copy(&f, t, 0, "model.embed_tokens.weight", 128 * r, r ? 122 : 128, 0, RB, 0);
	}
	fx_close(&f);
}

/* "copy" needs a rule that writes the head, and no "output_if". */
Test(tie, copy_refused)
{
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	const char *norule = "{\"name\": \"t\", \"architectures\": [\"X\"], \"tie\": "
			     "{\"source\": \"e\", \"output\": \"h\", \"copy\": true},"
			     "\"tensors\": [{\"match\": \"e\", \"split\": \"vocab\"}]}";
	const char *alt = "{\"name\": \"t\", \"architectures\": [\"X\"], \"tie\": "
			  "{\"source\": \"e\", \"output\": \"h\", \"copy\": true, "
			  "\"output_if\": {\"if\": \"1\", \"output\": \"g\"}},"
			  "\"tensors\": [{\"match\": \"e\", \"split\": \"vocab\"},"
			  "{\"match\": \"h\", \"split\": \"replicate\"}]}";

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, norule, strlen(norule), "t", &err), WSHARD_EINVAL);
	cr_assert_str_eq(err.msg, "'t': \"tie\"'s \"copy\" needs a row, col, vocab or "
			 "replicate rule whose output is 'h'");
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, alt, strlen(alt), "t", &err), WSHARD_EINVAL);
	cr_assert_str_eq(err.msg, "'t': \"tie\" takes \"copy\" or \"output_if\", not both");
}

/* Untied: both, each from its own source. */
Test(tie, llama_untied)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, LLAMA " --kv-heads 2 --no-tie");
	fx_plan(&f, 2);
	t = get_out(&f, 0, "lm_head.weight");
	assert_copy(&f, t, 0, "lm_head.weight", 0, 128, 0, RB, 0);
	t = get_out(&f, 0, "model.embed_tokens.weight");
	assert_copy(&f, t, 0, "model.embed_tokens.weight", 0, 128, 0, RB, 0);
	fx_close(&f);
}

/* Gemma: the embedding keeps its name, no lm_head is written. */
Test(tie, gemma)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch gemma --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 250");
	fx_plan(&f, 2);
	/* vLLM 0.32's Gemma holds an lm_head tied to the embedding and keeps
	 * the tensor under the name that sorts first: lm_head.weight. */
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "lm_head.weight");

		cr_assert_null(find_out(&f, r, "model.embed_tokens.weight"));
		assert_shape(t, 2, 128, 64);
		assert_copy(&f, t, 0, "model.embed_tokens.weight", 128 * r, r ? 122 : 128,
			    0, RB, 0);
		if (r)
			assert_zero(t, 1, 122 * RB, 6 * RB);
	}
	fx_close(&f);
}

/* Gemma with a stray lm_head.weight, and with tie_word_embeddings false
 * in config.json: still tied. */
Test(tie, gemma_always_tied)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--arch gemma2 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 256 --lm-head "
		"--set-config tie_word_embeddings=false");
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, "lm_head.weight"));
	cr_assert_not_null(find_out(&f, 0, "model.embed_tokens.weight"));
	assert_unused(&f, "lm_head.weight");
	/* Gemma2's extra norms are replicated. */
	cr_assert_not_null(find_out(&f, 1, L0 "pre_feedforward_layernorm.weight"));
	cr_assert_not_null(find_out(&f, 1, L0 "post_feedforward_layernorm.weight"));
	fx_close(&f);
}

/* tie_word_embeddings absent: Llama's default is untied. */
Test(tie, llama_default_untied)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --omit-config tie_word_embeddings");
	fx_plan(&f, 2);
	cr_assert_not_null(find_out(&f, 0, "lm_head.weight"));
	cr_assert_not_null(find_out(&f, 0, "model.embed_tokens.weight"));
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Attention scales                                                    */
/* ------------------------------------------------------------------ */

static const char *const scale_names[] = { "_k_scale", "_v_scale", "_q_scale", "_prob_scale" };

Test(scales, present)
{
	static const unsigned char one[4] = { 0x00, 0x00, 0x80, 0x3f };
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r, layer;
	size_t i;

	fx_open(&f, "--layers 3 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++)
		for (layer = 0; layer < 3; layer++)
			for (i = 0; i < 4; i++) {
				char *name = fmt("model.layers.%d.self_attn.attn.%s", layer,
						 scale_names[i]);
				const struct wshard_out_tensor *t = get_out(&f, r, name);

				cr_assert_eq(t->dtype, WSHARD_F32);
				cr_assert_eq(t->ndim, 0, "%s is not a scalar", name);
				cr_assert_eq(t->nbytes, 4);
				cr_assert_eq(t->npieces, 1);
				cr_assert_eq(t->pieces[0].kind, WSHARD_PIECE_CONST);
				cr_assert_eq(t->pieces[0].value_len, 4);
				cr_assert_arr_eq(t->pieces[0].value, one, 4);
				cr_assert_eq(t->pieces[0].len, 4);
				cr_assert_eq(t->pieces[0].prov_value, 1.0);
				free(name);
			}
	/* None for a layer that is not there. */
	cr_assert_null(find_out(&f, 0, "model.layers.3.self_attn.attn._k_scale"));
	cr_assert_eq(f.plan->ranks[0].ntensors, 3 + 3 * 10);
	fx_close(&f);
}

/* A quantization_config in config.json: vLLM's quantized attention holds
 * k/v/q/prob scales of its own, -1.0 in the model's dtype (torch_dtype, or
 * --dtype); without one they are absent. */
Test(scales, quantized_attention)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	static const char *const names[] = { "k_scale", "v_scale", "q_scale", "prob_scale" };
	static const unsigned char bf16[2] = { 0x80, 0xbf };	/* -1.0 */
	static const unsigned char f16[2] = { 0x00, 0xbc };
	size_t i;
	int r;

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 "
		"--set-config quantization_config={\\\"quant_method\\\":\\\"fp8\\\"} "
		"--set-config torch_dtype=\\\"bfloat16\\\"");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++)
		for (i = 0; i < 4; i++) {
			char *name = fmt("model.layers.1.self_attn.attn.%s", names[i]);
			const struct wshard_out_tensor *t = get_out(&f, r, name);

			cr_assert_eq(t->dtype, WSHARD_BF16, "%s", name);
			cr_assert_eq(t->ndim, 0);
			cr_assert_eq(t->pieces[0].kind, WSHARD_PIECE_CONST);
			cr_assert_arr_eq(t->pieces[0].value, bf16, 2);
			cr_assert_eq(t->pieces[0].prov_value, -1.0);
			free(name);
		}
	fx_close(&f);

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 "
		"--set-config quantization_config={\\\"quant_method\\\":\\\"fp8\\\"} "
		"--set-config torch_dtype=\\\"float16\\\"");
	fx_plan(&f, 1);
	cr_assert_arr_eq(get_out(&f, 0, "model.layers.0.self_attn.attn.v_scale")->pieces[0].value,
			 f16, 2);
	fx_close(&f);

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	fx_plan(&f, 1);
	cr_assert_null(find_out(&f, 0, "model.layers.0.self_attn.attn.k_scale"));
	fx_close(&f);
}

Test(scales, absent_without_attn_scales)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t i;
	int r;

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	f.opt.attn_scales = false;
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		for (i = 0; i < f.plan->ranks[r].ntensors; i++)
			cr_assert_null(strstr(f.plan->ranks[r].tensors[i].name, ".attn._"),
				       "%s", f.plan->ranks[r].tensors[i].name);
		cr_assert_eq(f.plan->ranks[r].ntensors, 3 + 2 * 6);
	}
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Parts                                                               */
/* ------------------------------------------------------------------ */

/*
 * tp 1, one layer, V 256, BF16: data bytes in layout order (by name, as
 * vLLM's sharded_state loader reads them) are lm_head 32768, embed
 * 32768, input_layernorm 128, down 16384, gate_up 32768,
 * post_attention_layernorm 128, four scales of 4, o_proj 8192, qkv
 * 12288, norm 128.  With a limit of 20000: [lm_head] (alone, over the
 * limit), [embed], [input_ln, down] (16512; gate_up would make 49280),
 * [gate_up], [post_ln, 4 scales, o_proj] (8336; qkv would make 20624),
 * [qkv, norm] (12416).
 */
Test(parts, cut_by_max_file_size)
{
	static const size_t want_first[] = { 0, 1, 2, 4, 5, 11 };
	static const size_t want_count[] = { 1, 1, 2, 1, 6, 2 };
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_rank_plan *rp;
	size_t k;

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 256");
	f.opt.max_file_size = 20000;
	fx_plan(&f, 1);
	rp = &f.plan->ranks[0];
	cr_assert_eq(rp->ntensors, 13);
	cr_assert_eq(rp->nfiles, 6, "%zu parts", rp->nfiles);
	for (k = 0; k < 6; k++) {
		cr_assert_eq(rp->files[k].first, want_first[k], "part %zu", k);
		cr_assert_eq(rp->files[k].count, want_count[k], "part %zu", k);
	}
	for (k = 1; k < rp->ntensors; k++)
		cr_assert_lt(strcmp(rp->tensors[k - 1].name, rp->tensors[k].name), 0,
			     "'%s' before '%s'", rp->tensors[k - 1].name, rp->tensors[k].name);
	cr_assert_str_eq(rp->tensors[1].name, "model.embed_tokens.weight");
	cr_assert_eq(rp->tensors[1].nbytes, 32768);
	cr_assert_eq(rp->tensors[3].nbytes, 16384);
	cr_assert_eq(rp->files[5].size, rp->files[5].header_len + 12416);

	/* A part exactly at the limit is not past it. */
	f.opt.max_file_size = 16512;
	fx_plan(&f, 1);
	rp = &f.plan->ranks[0];
	cr_assert_eq(rp->nfiles, 6);
	cr_assert_eq(rp->files[2].count, 2);
	f.opt.max_file_size = 16511;
	fx_plan(&f, 1);
	rp = &f.plan->ranks[0];
	cr_assert_eq(rp->files[2].count, 1);
	cr_assert_eq(rp->files[3].first, 3);
	fx_close(&f);
}

/* Every tensor over a tiny limit: one part each, none empty. */
Test(parts, one_tensor_per_part)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	f.opt.max_file_size = 1;
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_rank_plan *rp = &f.plan->ranks[r];
		size_t k;

		cr_assert_eq(rp->nfiles, rp->ntensors);
		for (k = 0; k < rp->nfiles; k++) {
			cr_assert_eq(rp->files[k].first, k);
			cr_assert_eq(rp->files[k].count, 1);
		}
	}
	fx_close(&f);
}

/* The default limit (5 GiB) keeps a small model in one part per rank,
 * named model-rank-R-part-0.safetensors. */
Test(parts, default_one_part)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	cr_assert_eq(f.opt.max_file_size, 5ULL << 30);
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		char *name = fmt("model-rank-%d-part-0.safetensors", r);

		cr_assert_eq(f.plan->ranks[r].nfiles, 1);
		cr_assert_str_eq(f.plan->ranks[r].files[0].name, name);
		cr_assert_eq(f.plan->ranks[r].files[0].count, f.plan->ranks[r].ntensors);
		free(name);
	}
	fx_close(&f);
}

/* Greedy cut, written from the contract: a new part when the next tensor
 * would take a non-empty part past the limit. */
Test(parts, greedy_rule_at_many_limits)
{
	static const uint64_t limits[] = { 3000, 5000, 8192, 8200, 12288, 40000, 70000 };
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t l;

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	for (l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
		const struct wshard_rank_plan *rp;
		uint64_t acc = 0;
		size_t i, part = 0, count = 0;

		f.opt.max_file_size = limits[l];
		fx_plan(&f, 2);
		rp = &f.plan->ranks[1];
		for (i = 0; i < rp->ntensors; i++) {
			if (count > 0 && acc + rp->tensors[i].nbytes > limits[l]) {
				part++;
				acc = 0;
				count = 0;
			}
			acc += rp->tensors[i].nbytes;
			count++;
			cr_assert_eq(rp->tensors[i].part, part, "limit %llu, %s",
				     (unsigned long long)limits[l], rp->tensors[i].name);
		}
		cr_assert_eq(rp->nfiles, part + 1);
	}
	fx_close(&f);
}

