/*
 * test_plan_expert.c - expert parallelism (plan_expert.c): which rank holds
 * which experts, checked against values worked out by hand from vLLM
 * 0.32's determine_expert_map (base = E / N each, the remainder one more
 * to each of the first ranks; linear: a block from r * base + min(r, rem);
 * round_robin: r, r + N, ...), and the plan of a Qwen3-MoE and a Mixtral
 * under --expert-parallel: whole experts, local order, attention still
 * split.
 */
#include <criterion/criterion.h>

#include "wshard.h"
#include "plan_fixture.h"

TestSuite(expert_map);
TestSuite(expert_plan, .fini = close_open_fx);

/* Rank r of n among e experts: want count, first, stride. */
static void want_range(long e, int n, int r, enum wshard_placement p, long count,
		       long first, long stride)
{
	long f = -1, s = -1, c = wshard_expert_range(e, n, r, p, &f, &s);

	cr_assert_eq(c, count, "E %ld N %d rank %d: %ld experts, want %ld", e, n, r, c, count);
	cr_assert_eq(f, first, "E %ld N %d rank %d: first %ld, want %ld", e, n, r, f, first);
	cr_assert_eq(s, stride, "E %ld N %d rank %d: stride %ld, want %ld", e, n, r, s, stride);
}

/* 8 experts, 2 ranks: 0-3 and 4-7. */
Test(expert_map, linear_divisible)
{
	want_range(8, 2, 0, WSHARD_PLACE_LINEAR, 4, 0, 1);
	want_range(8, 2, 1, WSHARD_PLACE_LINEAR, 4, 4, 1);
}

/* 5 experts, 2 ranks: base 2, rem 1: rank 0 holds 0-2, rank 1 3-4. */
Test(expert_map, linear_remainder_to_first_ranks)
{
	want_range(5, 2, 0, WSHARD_PLACE_LINEAR, 3, 0, 1);
	want_range(5, 2, 1, WSHARD_PLACE_LINEAR, 2, 3, 1);
}

/* 10 experts, 4 ranks: base 2, rem 2: 0-2, 3-5, 6-7, 8-9. */
Test(expert_map, linear_10_over_4)
{
	want_range(10, 4, 0, WSHARD_PLACE_LINEAR, 3, 0, 1);
	want_range(10, 4, 1, WSHARD_PLACE_LINEAR, 3, 3, 1);
	want_range(10, 4, 2, WSHARD_PLACE_LINEAR, 2, 6, 1);
	want_range(10, 4, 3, WSHARD_PLACE_LINEAR, 2, 8, 1);
}

/* 10 experts, 4 ranks, round robin: {0,4,8}, {1,5,9}, {2,6}, {3,7}. */
Test(expert_map, round_robin_10_over_4)
{
	want_range(10, 4, 0, WSHARD_PLACE_ROUND_ROBIN, 3, 0, 4);
	want_range(10, 4, 1, WSHARD_PLACE_ROUND_ROBIN, 3, 1, 4);
	want_range(10, 4, 2, WSHARD_PLACE_ROUND_ROBIN, 2, 2, 4);
	want_range(10, 4, 3, WSHARD_PLACE_ROUND_ROBIN, 2, 3, 4);
}

/* 5 experts, 2 ranks, round robin: {0,2,4}, {1,3}. */
Test(expert_map, round_robin_remainder)
{
	want_range(5, 2, 0, WSHARD_PLACE_ROUND_ROBIN, 3, 0, 2);
	want_range(5, 2, 1, WSHARD_PLACE_ROUND_ROBIN, 2, 1, 2);
}

Test(expert_map, names_round_trip)
{
	enum wshard_placement p = WSHARD_PLACE_LINEAR;

	cr_assert_str_eq(wshard_placement_name(WSHARD_PLACE_LINEAR), "linear");
	cr_assert_str_eq(wshard_placement_name(WSHARD_PLACE_ROUND_ROBIN), "round_robin");
	cr_assert_eq(wshard_placement_parse("round_robin", &p), 0);
	cr_assert_eq(p, WSHARD_PLACE_ROUND_ROBIN);
	cr_assert_eq(wshard_placement_parse("round-robin", &p), -1);
	cr_assert_null(wshard_placement_name((enum wshard_placement)7));
}

#define QWEN3_MOE(E) "--arch qwen3_moe --layers 1 --hidden 64 --heads 8 --kv-heads 2 " \
	"--vocab 128 --head-dim 16 --intermediate 128 --moe-intermediate 32 --experts " #E
#define EXP "model.layers.0.mlp.experts."

/*
 * 5 experts of moe_intermediate 32, hidden 64 (BF16: 128 bytes a row), tp 2:
 * rank 0 w13 [3, 64, 64] from experts 0, 1, 2 (each gate_proj's 32 rows
 * then up_proj's), w2 [3, 64, 32] whole; rank 1 experts 3 and 4.
 */
Test(expert_plan, qwen3_moe_linear_5_over_2)
{
	static struct fx f;
	static const int first[2] = { 0, 3 }, count[2] = { 3, 2 };
	char src[128];
	int r, i;

	fx_open(&f, QWEN3_MOE(5));
	f.opt.expert_parallel = true;
	fx_plan(&f, 2);
	cr_assert_eq(f.plan->placement, WSHARD_PLACE_LINEAR);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *w13 = get_out(&f, r, EXP "routed_experts.w13_weight");
		const struct wshard_out_tensor *w2 = get_out(&f, r, EXP "routed_experts.w2_weight");

		cr_assert_eq(w13->ndim, 3);
		cr_assert_eq(w13->shape[0], (uint64_t)count[r]);
		cr_assert_eq(w13->shape[1], 64);
		cr_assert_eq(w13->shape[2], 64);
		cr_assert_eq(w2->shape[0], (uint64_t)count[r]);
		cr_assert_eq(w2->shape[1], 64);
		cr_assert_eq(w2->shape[2], 32);
		cr_assert_eq(w13->npieces, 2 * (size_t)count[r]);
		cr_assert_eq(w2->npieces, (size_t)count[r]);
		for (i = 0; i < count[r]; i++) {
			int e = first[r] + i;

			snprintf(src, sizeof(src), EXP "%d.gate_proj.weight", e);
			assert_copy(&f, w13, 2 * (size_t)i, src, 0, 32, 0, 128,
				    (uint64_t)i * 64 * 128);
			snprintf(src, sizeof(src), EXP "%d.up_proj.weight", e);
			assert_copy(&f, w13, 2 * (size_t)i + 1, src, 0, 32, 0, 128,
				    (uint64_t)i * 64 * 128 + 32 * 128);
			snprintf(src, sizeof(src), EXP "%d.down_proj.weight", e);
			assert_copy(&f, w2, (size_t)i, src, 0, 64, 0, 64, (uint64_t)i * 64 * 64);
		}
		/* attention stays split: 8 heads of 16 (128 columns) over 2 ranks */
		assert_shape(get_out(&f, r, "model.layers.0.self_attn.o_proj.weight"), 2, 64, 64);
		/* the router is whole on every rank */
		assert_shape(get_out(&f, r, EXP "gate.weight"), 2, 5, 64);
	}
	fx_close(&f);
}

/*
 * round_robin: vLLM 0.32 honours it only for grouped top-k routing; a
 * Qwen3-MoE falls back to linear, so the plan is the linear one.
 */
Test(expert_plan, qwen3_moe_round_robin_falls_back_to_linear)
{
	static struct fx f;

	fx_open(&f, QWEN3_MOE(5));
	f.opt.expert_parallel = true;
	f.opt.placement = WSHARD_PLACE_ROUND_ROBIN;
	fx_plan(&f, 2);
	cr_assert_eq(f.plan->placement, WSHARD_PLACE_LINEAR);
	assert_copy(&f, get_out(&f, 1, EXP "routed_experts.w2_weight"), 0,
		    EXP "3.down_proj.weight", 0, 64, 0, 64, 0);
	fx_close(&f);
}

/* Fewer experts than ranks: refused, as vLLM refuses it. */
Test(expert_plan, fewer_experts_than_ranks)
{
	static struct fx f;

	fx_open(&f, QWEN3_MOE(2));
	f.opt.expert_parallel = true;
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "~2 experts for 4 ranks");
	fx_close(&f);
}

/*
 * Mixtral, 4 experts of intermediate 64 (hidden 64), tp 4: one whole
 * expert a rank, w13 [1, 128, 64] = w1 then w3 of expert r.
 */
Test(expert_plan, mixtral_one_expert_a_rank)
{
	static struct fx f;
	char src[128];
	int r;

	fx_open(&f, "--arch mixtral --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		    "--vocab 128 --intermediate 64 --experts 4");
	f.opt.expert_parallel = true;
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *w13 = get_out(&f,
			r, "model.layers.0.block_sparse_moe.experts.routed_experts.w13_weight");

		cr_assert_eq(w13->shape[0], 1);
		cr_assert_eq(w13->shape[1], 128);
		snprintf(src, sizeof(src), "model.layers.0.block_sparse_moe.experts.%d.w1.weight", r);
		assert_copy(&f, w13, 0, src, 0, 64, 0, 128, 0);
		snprintf(src, sizeof(src), "model.layers.0.block_sparse_moe.experts.%d.w3.weight", r);
		assert_copy(&f, w13, 1, src, 0, 64, 0, 128, 64 * 128);
	}
	fx_close(&f);
}

/* Mixtral's rules with KEY (a rule key and its value, as JSON) on the
 * experts' w1, w3 and w2. */
#define MX "model.layers.{n}."
#define MXR(m) "{\"match\": \"" m "\", \"split\": \"replicate\"},"
#define MIXTRAL_WITH(key)                                                            \
	"{\"name\": \"t\", \"architectures\": [\"MixtralForCausalLM\"], \"tensors\": ["   \
	MXR("model.embed_tokens.weight") MXR("lm_head.weight") MXR("model.norm.weight") \
	MXR(MX "input_layernorm.weight") MXR(MX "post_attention_layernorm.weight")     \
	MXR(MX "self_attn.q_proj.weight") MXR(MX "self_attn.k_proj.weight")            \
	MXR(MX "self_attn.v_proj.weight") MXR(MX "self_attn.o_proj.weight")            \
	MXR(MX "block_sparse_moe.gate.weight")                                         \
	"{\"match\": \"" MX "block_sparse_moe.experts.{e}.w1.weight\", \"fuse\": \"w13.w1\", " \
	"\"output\": \"" MX "w13\", " key "},"                                            \
	"{\"match\": \"" MX "block_sparse_moe.experts.{e}.w3.weight\", \"fuse\": \"w13.w3\", " \
	"\"output\": \"" MX "w13\", " key "},"                                            \
	"{\"match\": \"" MX "block_sparse_moe.experts.{e}.w2.weight\", \"split\": \"col\", " \
	"\"output\": \"" MX "w2\", " key "}]}"
#define MIXTRAL_PADDED(pad) MIXTRAL_WITH("\"pad_to\": " pad)

/*
 * "pad_to" (Kimi Linear's experts, which vLLM widens to 256 a rank):
 * Mixtral's experts of intermediate 64 (hidden 64, BF16) at tp 2 with
 * pad_to 48: rank r's w13 of expert e is w1's rows [32r, 32r + 32), 16
 * zero rows, w3's rows, 16 zero rows ([4, 96, 64]); its w2 is w2's
 * columns [32r, 32r + 32) of each row followed by 16 zero columns
 * ([4, 64, 48]).  Not padded at tp 1, under --expert-parallel, or where
 * the share is already as wide ("pad_to": 32).
 */
Test(expert_plan, pad_to)
{
	static struct fx f;
	const char *args = "--arch mixtral --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
			   "--vocab 128 --intermediate 64 --experts 4 --dtype BF16";
	char src[128];
	const struct wshard_out_tensor *t;
	int r, e;

	fx_open(&f, args);
	use_rules(&f, MIXTRAL_PADDED("\"24*2\""));
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "model.layers.0.w13");
		cr_assert_eq(t->ndim, 3);
		cr_assert_eq(t->shape[0], 4);
		cr_assert_eq(t->shape[1], 96);
		cr_assert_eq(t->shape[2], 64);
		cr_assert_eq(t->npieces, 16);
		for (e = 0; e < 4; e++) {
			uint64_t at = (uint64_t)e * 96 * 128;

			snprintf(src, sizeof(src), "model.layers.0.block_sparse_moe.experts.%d.w1.weight", e);
			assert_copy(&f, t, 4 * (size_t)e, src, 32 * (uint64_t)r, 32, 0, 128, at);
			assert_zero(t, 4 * (size_t)e + 1, at + 32 * 128, 16 * 128);
			snprintf(src, sizeof(src), "model.layers.0.block_sparse_moe.experts.%d.w3.weight", e);
			assert_copy(&f, t, 4 * (size_t)e + 2, src, 32 * (uint64_t)r, 32, 0, 128,
				    at + 48 * 128);
			assert_zero(t, 4 * (size_t)e + 3, at + 80 * 128, 16 * 128);
		}
		t = get_out(&f, r, "model.layers.0.w2");
		cr_assert_eq(t->shape[1], 64);
		cr_assert_eq(t->shape[2], 48);
		cr_assert_eq(t->nbytes, 4 * 64 * 48 * 2);
		cr_assert_eq(t->npieces, 4);
		for (e = 0; e < 4; e++) {
			const struct wshard_piece *p = &t->pieces[e];

			cr_assert_eq(p->kind, WSHARD_PIECE_COPY);
			cr_assert_eq(p->nrows, 64);
			cr_assert_eq(p->col0, 64 * (uint64_t)r);
			cr_assert_eq(p->ncols, 64);
			cr_assert_eq(p->pad, 32);
			cr_assert_eq(p->len, 64 * 96);
			cr_assert_eq(p->dst, (uint64_t)e * 64 * 96);
		}
	}
	fx_close(&f);

	/* tp 1, --expert-parallel, a share as wide as pad_to: no padding */
	for (r = 0; r < 3; r++) {
		fx_open(&f, args);
		use_rules(&f, MIXTRAL_PADDED("48"));
		if (r == 2)
			use_rules(&f, MIXTRAL_PADDED("32"));
		f.opt.expert_parallel = r == 1;
		fx_plan(&f, r == 0 ? 1 : 2);
		t = get_out(&f, 0, "model.layers.0.w2");
		cr_assert_eq(t->shape[2], r == 2 ? 32 : 64, "case %d", r);
		cr_assert_eq(t->pieces[0].pad, 0, "case %d", r);
		t = get_out(&f, 0, "model.layers.0.w13");
		cr_assert_eq(t->shape[1], r == 2 ? 64 : 128, "case %d", r);
		fx_close(&f);
	}

	/* FP8 experts: their blocks and scales would be padded too */
	fx_open(&f, "--arch mixtral --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		    "--vocab 128 --intermediate 64 --experts 4 --fp8 per-tensor");
	use_rules(&f, MIXTRAL_PADDED("48"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'model.layers.0.block_sparse_moe.experts.0.w1.weight': F8_E4M3 padded "
		      "from 32 to 48 a rank at --tp 2 is not written (only BF16, F16 and F32 are)");
	fx_close(&f);
}

/*
 * "num_experts" (Nemotron-H Puzzle's experts, their count by layer): two
 * Mixtral layers of 4 experts whose rules read the count from blk[n].ne
 * while config.json's num_local_experts says 8.  Under --expert-parallel
 * at tp 2 each rank holds 2 of a layer's 4 (of 8 it would be 4 and 0); a
 * layer whose count says 3 is refused, naming it.
 */
Test(expert_plan, num_experts_by_layer)
{
	static struct fx f;
	const char *args = "--arch mixtral --layers 2 --hidden 64 --heads 8 --kv-heads 2 "
			   "--vocab 128 --intermediate 64 --experts 4 --dtype BF16 "
			   "--set-config num_local_experts=8 --set-config ";
	char a[512];
	int r;

	snprintf(a, sizeof(a), "%s'blk=[{\"ne\": 4}, {\"ne\": 4}]'", args);
	fx_open(&f, a);
	use_rules(&f, MIXTRAL_PADDED("32"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "output 'model.layers.0.w13' has 4 experts but config.json says 8");
	fx_close(&f);

	fx_open(&f, a);
	use_rules(&f, MIXTRAL_WITH("\"num_experts\": \"blk[n].ne\""));
	f.opt.expert_parallel = true;
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		cr_assert_eq(get_out(&f, r, "model.layers.0.w13")->shape[0], 2);
		cr_assert_eq(get_out(&f, r, "model.layers.1.w2")->shape[0], 2);
	}
	fx_close(&f);

	snprintf(a, sizeof(a), "%s'blk=[{\"ne\": 4}, {\"ne\": 3}]'", args);
	fx_open(&f, a);
	use_rules(&f, MIXTRAL_WITH("\"num_experts\": \"blk[n].ne\""));
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "output 'model.layers.1.w13' has 4 experts but config.json says 3");
	fx_close(&f);
}
