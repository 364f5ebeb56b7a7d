/*
 * test_plan_split.c - how plan_split.c cuts each item, checked piece by
 * piece against values worked out by hand from OUTPUT-CONTRACT.md section
 * 3 (never by calling plan code): q/k/v rows with and without kv-head
 * replication, column splits, gate/up fusion, Phi3's packed sources and
 * vocabulary padding.
 *
 * Checkpoints are written at test time by scripts/gen-checkpoint (under
 * $PYTHON, default python3).  Run from the repository root, or with
 * WSHARD_TEST_ROOT naming it.
 */
#include <criterion/criterion.h>

#include "wshard.h"
#include "plan_fixture.h"

TestSuite(qkv, .fini = close_open_fx);
TestSuite(mlp, .fini = close_open_fx);
TestSuite(vocab, .fini = close_open_fx);

/* ------------------------------------------------------------------ */
/* q, k, v                                                             */
/* ------------------------------------------------------------------ */

/*
 * tp 2, kv 2: nh*hd/N = 64/2 = 32 q rows per rank, kv*hd/N = 16/2 = 8
 * k and v rows; rank r: q [32r, 32r+32), k and v [8r, 8r+8).  Output
 * [48, 64].
 */
Test(qkv, tp2_kv2_no_replication)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");

		cr_assert_eq(t->dtype, WSHARD_BF16);
		assert_shape(t, 2, 48, 64);
		cr_assert_eq(t->npieces, 3);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 8 * r, 8, 0, RB, 32 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 8 * r, 8, 0, RB, 40 * RB);
		cr_assert_eq(t->nbytes, 48 * RB);
	}
	fx_close(&f);
}

/*
 * tp 4, kv 2: N > kv, so each rank gets one kv head h = r / (N/kv) =
 * r / 2: ranks 0, 1 head 0 (rows [0, 8)), ranks 2, 3 head 1 ([8, 16)).
 * q: 64/4 = 16 rows, [16r, 16r+16).  Output [32, 64].
 */
Test(qkv, tp4_kv2_replication)
{
	static const uint64_t head[4] = { 0, 0, 1, 1 };
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");

		assert_shape(t, 2, 32, 64);
		cr_assert_eq(t->npieces, 3);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 16 * r, 16, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 8 * head[r], 8, 0, RB, 16 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 8 * head[r], 8, 0, RB, 24 * RB);
	}
	fx_close(&f);
}

/* tp 8, kv 2: h = r / 4; q 8 rows each.  Output [24, 64]. */
Test(qkv, tp8_kv2_replication)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 8);
	for (r = 0; r < 8; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");
		uint64_t h = r < 4 ? 0 : 1;

		assert_shape(t, 2, 24, 64);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 8 * r, 8, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 8 * h, 8, 0, RB, 8 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 8 * h, 8, 0, RB, 16 * RB);
	}
	fx_close(&f);
}

/* tp 2, kv 8 (plain multi-head): k, v rows 64/2 = 32, [32r, 32r+32). */
Test(qkv, tp2_kv8)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 8");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");

		assert_shape(t, 2, 96, 64);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 32 * r, 32, 0, RB, 32 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 32 * r, 32, 0, RB, 64 * RB);
	}
	fx_close(&f);
}

/* tp 1: everything whole, in the order q, k, v.  Output [96, 64]. */
Test(qkv, tp1)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 1);
	t = get_out(&f, 0, L0 "self_attn.qkv_proj.weight");
	assert_shape(t, 2, 96, 64);
	assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 0, 64, 0, RB, 0);
	assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 0, 16, 0, RB, 64 * RB);
	assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 0, 16, 0, RB, 80 * RB);
	fx_close(&f);
}

/*
 * head_dim given apart from hidden / heads (Qwen3: 8 heads of 16 on a
 * hidden of 64, kv 2): q is [128, 64], k, v [32, 64].  tp 4: q 32 rows,
 * h = r / 2, k rows [16h, 16h+16).  Output [64, 64].
 */
Test(qkv, explicit_head_dim)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch qwen3 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 256");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");
		uint64_t h = (uint64_t)r / 2;

		assert_shape(t, 2, 64, 64);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 16 * h, 16, 0, RB, 32 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 16 * h, 16, 0, RB, 48 * RB);
		/* q_norm / k_norm [head_dim] replicated. */
		t = get_out(&f, r, L0 "self_attn.q_norm.weight");
		assert_shape(t, 1, 16, 0);
		assert_copy(&f, t, 0, L0 "self_attn.q_norm.weight", 0, 16, 0, 2, 0);
		t = get_out(&f, r, L0 "self_attn.k_norm.weight");
		assert_copy(&f, t, 0, L0 "self_attn.k_norm.weight", 0, 16, 0, 2, 0);
	}
	fx_close(&f);
}

/*
 * Qwen2 biases follow the weight rows, one element (2 bytes) per row.
 * tp 4, kv 2: q bias [16r, 16r+16), k, v [8h, 8h+8) with h = r / 2.
 * Output [32].
 */
Test(qkv, qwen2_bias)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch qwen2 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--intermediate 128 --vocab 256 --dtype BF16");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.bias");
		uint64_t h = (uint64_t)r / 2;

		assert_shape(t, 1, 32, 0);
		cr_assert_eq(t->nbytes, 64);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.bias", 16 * r, 16, 0, 2, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.bias", 8 * h, 8, 0, 2, 32);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.bias", 8 * h, 8, 0, 2, 48);
		t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 8 * h, 8, 0, RB, 16 * RB);
	}
	fx_close(&f);
}

/*
 * Phi3's fused source [(8 + 2*2) * 8, 64] = [96, 64]: q rows [0, 64),
 * k [64, 80), v [80, 96).  tp 2: q [32r, +32), k [64 + 8r, +8),
 * v [80 + 8r, +8).  tp 4 (replicated kv, h = r / 2): q [16r, +16),
 * k [64 + 8h, +8), v [80 + 8h, +8).
 */
Test(qkv, phi3_unpack)
{
	const char *qkv = L0 "self_attn.qkv_proj.weight";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch phi3 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--intermediate 128 --vocab 256");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, qkv);

		assert_shape(t, 2, 48, 64);
		cr_assert_eq(t->npieces, 3);
		assert_copy(&f, t, 0, qkv, 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, qkv, 64 + 8 * r, 8, 0, RB, 32 * RB);
		assert_copy(&f, t, 2, qkv, 80 + 8 * r, 8, 0, RB, 40 * RB);
	}
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, qkv);
		uint64_t h = (uint64_t)r / 2;

		assert_shape(t, 2, 32, 64);
		assert_copy(&f, t, 0, qkv, 16 * r, 16, 0, RB, 0);
		assert_copy(&f, t, 1, qkv, 64 + 8 * h, 8, 0, RB, 16 * RB);
		assert_copy(&f, t, 2, qkv, 80 + 8 * h, 8, 0, RB, 24 * RB);
	}
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* MLP and column splits                                               */
/* ------------------------------------------------------------------ */

/*
 * o_proj [64, 64] BF16 split by columns: tp 2 gives each rank 32 columns
 * = 64 bytes of every one of the 64 rows, from byte 64r; output [64, 32].
 * tp 4: 16 columns = 32 bytes from byte 32r; output [64, 16].
 */
Test(mlp, o_proj_columns)
{
	const char *o = L0 "self_attn.o_proj.weight";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, o);

		assert_shape(t, 2, 64, 32);
		cr_assert_eq(t->npieces, 1);
		assert_copy(&f, t, 0, o, 0, 64, 64 * r, 64, 0);
		cr_assert_eq(t->pieces[0].prov_col0, 32 * r);
		cr_assert_eq(t->pieces[0].prov_ncols, 32);
	}
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, o);

		assert_shape(t, 2, 64, 16);
		assert_copy(&f, t, 0, o, 0, 64, 32 * r, 32, 0);
		cr_assert_eq(t->pieces[0].prov_col0, 16 * r);
		cr_assert_eq(t->pieces[0].prov_ncols, 16);
	}
	fx_close(&f);
}

/*
 * F32 (4-byte elements): down_proj [64, 128] at tp 4 gives 32 columns =
 * 128 bytes from byte 128r of each 512-byte row; output [64, 32].
 */
Test(mlp, down_proj_columns_f32)
{
	const char *d = L0 "mlp.down_proj.weight";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 "
		"--vocab 256 --dtype F32");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, d);

		cr_assert_eq(t->dtype, WSHARD_F32);
		assert_shape(t, 2, 64, 32);
		assert_copy(&f, t, 0, d, 0, 64, 128 * r, 128, 0);
		cr_assert_eq(t->pieces[0].prov_col0, 32 * r);
	}
	fx_close(&f);
}

/*
 * gate_up: gate rows [I r / N, I (r+1) / N) then the same rows of up.
 * I = 128, tp 2: 64 rows of each, [64r, 64r+64); output [128, 64].
 */
Test(mlp, gate_up_rows)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "mlp.gate_up_proj.weight");

		assert_shape(t, 2, 128, 64);
		cr_assert_eq(t->npieces, 2);
		assert_copy(&f, t, 0, L0 "mlp.gate_proj.weight", 64 * r, 64, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "mlp.up_proj.weight", 64 * r, 64, 0, RB, 64 * RB);
		t = get_out(&f, r, L0 "mlp.down_proj.weight");
		assert_shape(t, 2, 64, 64);
		assert_copy(&f, t, 0, L0 "mlp.down_proj.weight", 0, 64, 128 * r, 128, 0);
	}
	fx_close(&f);
}

/* Phi3 gate_up source [256, 64]: gate rows [0, 128), up [128, 256);
 * tp 4: gate [32r, +32), up [128 + 32r, +32); output [64, 64]. */
Test(mlp, phi3_gate_up_unpack)
{
	const char *gu = L0 "mlp.gate_up_proj.weight";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch phi3 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--intermediate 128 --vocab 256");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, gu);

		assert_shape(t, 2, 64, 64);
		cr_assert_eq(t->npieces, 2);
		assert_copy(&f, t, 0, gu, 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, gu, 128 + 32 * r, 32, 0, RB, 32 * RB);
	}
	fx_close(&f);
}

/* Norms are whole on every rank: [64] BF16 = 64 rows of 2 bytes. */
Test(mlp, norms_replicated)
{
	static const char *const norms[] = {
		"model.norm.weight", L0 "input_layernorm.weight",
		L0 "post_attention_layernorm.weight",
	};
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t i;
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++)
		for (i = 0; i < 3; i++) {
			const struct wshard_out_tensor *t = get_out(&f, r, norms[i]);

			assert_shape(t, 1, 64, 0);
			cr_assert_eq(t->npieces, 1);
			assert_copy(&f, t, 0, norms[i], 0, 64, 0, 2, 0);
		}
	fx_close(&f);
}

/* inv_freq is not written anywhere. */
Test(mlp, inv_freq_skipped)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --inv-freq");
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, L0 "self_attn.rotary_emb.inv_freq"));
	assert_unused(&f, L0 "self_attn.rotary_emb.inv_freq");
	fx_close(&f);
}

/* The whole list of one rank for a one-layer Llama. */
Test(mlp, rank_tensor_names)
{
	/* By name, the order vLLM's sharded_state loader reads them in. */
	static const char *const want[] = {
		"lm_head.weight",
		"model.embed_tokens.weight",
		L0 "input_layernorm.weight",
		L0 "mlp.down_proj.weight",
		L0 "mlp.gate_up_proj.weight",
		L0 "post_attention_layernorm.weight",
		L0 "self_attn.attn._k_scale",
		L0 "self_attn.attn._prob_scale",
		L0 "self_attn.attn._q_scale",
		L0 "self_attn.attn._v_scale",
		L0 "self_attn.o_proj.weight",
		L0 "self_attn.qkv_proj.weight",
		"model.norm.weight",
	};
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t i;
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		cr_assert_eq(f.plan->ranks[r].ntensors, sizeof(want) / sizeof(want[0]));
		for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			cr_assert_str_eq(f.plan->ranks[r].tensors[i].name, want[i]);
	}
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Vocabulary                                                          */
/* ------------------------------------------------------------------ */

/*
 * V = 250 rounds up to 256; tp 4 gives P = 64 rows per rank.  Ranks 0-2
 * take source rows [64r, 64r + 64); rank 3 takes [192, 250) = 58 rows
 * (58 * 128 = 7424 bytes) then 6 zero rows (768 bytes).  [64, 64] on
 * every rank, for the embedding and the LM head alike.
 */
Test(vocab, v250_tp4)
{
	static const char *const names[] = { "model.embed_tokens.weight", "lm_head.weight" };
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t i;
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 4);
	for (i = 0; i < 2; i++)
		for (r = 0; r < 4; r++) {
			const struct wshard_out_tensor *t = get_out(&f, r, names[i]);

			cr_assert_eq(t->nbytes, 64 * RB);
			cr_assert_eq(t->npieces, r < 3 ? 1 : 2);
			assert_vocab250_tp4(&f, t, r, names[i]);
		}
	fx_close(&f);
}

/* tp 8: P = 32; rank 7 takes [224, 250) = 26 rows and 6 zero rows. */
Test(vocab, v250_tp8)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 8);
	t = get_out(&f, 6, "lm_head.weight");
	assert_shape(t, 2, 32, 64);
	assert_copy(&f, t, 0, "lm_head.weight", 192, 32, 0, RB, 0);
	cr_assert_eq(t->npieces, 1);
	t = get_out(&f, 7, "lm_head.weight");
	assert_shape(t, 2, 32, 64);
	cr_assert_eq(t->npieces, 2);
	assert_copy(&f, t, 0, "lm_head.weight", 224, 26, 0, RB, 0);
	assert_zero(t, 1, 26 * RB, 6 * RB);
	fx_close(&f);
}

/*
 * V = 65 rounds up to 128; tp 4: P = 32.  Rank 2 takes [64, 65) = 1 row
 * then 31 zero rows; rank 3 has no source row at all: 32 zero rows.
 */
Test(vocab, padding_only_rank)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 65");
	fx_plan(&f, 4);
	t = get_out(&f, 1, "model.embed_tokens.weight");
	assert_copy(&f, t, 0, "model.embed_tokens.weight", 32, 32, 0, RB, 0);
	t = get_out(&f, 2, "model.embed_tokens.weight");
	assert_shape(t, 2, 32, 64);
	cr_assert_eq(t->npieces, 2);
	assert_copy(&f, t, 0, "model.embed_tokens.weight", 64, 1, 0, RB, 0);
	assert_zero(t, 1, RB, 31 * RB);
	t = get_out(&f, 3, "model.embed_tokens.weight");
	assert_shape(t, 2, 32, 64);
	cr_assert_eq(t->npieces, 1);
	assert_zero(t, 0, 0, 32 * RB);
	fx_close(&f);
}

/* V = 256 needs no padding: no zero piece anywhere. */
Test(vocab, no_padding_needed)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 256");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "lm_head.weight");

		cr_assert_eq(t->npieces, 1);
		assert_copy(&f, t, 0, "lm_head.weight", 64 * r, 64, 0, RB, 0);
	}
	/* tp 1 pads too: 250 -> [256, 64] with 6 zero rows. */
	fx_close(&f);
	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 1);
	{
		const struct wshard_out_tensor *t = get_out(&f, 0, "lm_head.weight");

		assert_shape(t, 2, 256, 64);
		assert_copy(&f, t, 0, "lm_head.weight", 0, 250, 0, RB, 0);
		assert_zero(t, 1, 250 * RB, 6 * RB);
	}
	fx_close(&f);
}

/* 256 rows do not split 3 ways. */
Test(vocab, padded_not_divisible)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--layers 1 --hidden 48 --heads 6 --kv-heads 3 --intermediate 96 --vocab 250");
	fx_plan_fails(&f, 3, WSHARD_EINVAL,
		      "vocab_size=250 padded to 256 is not divisible by --tp 3");
	fx_close(&f);
}

