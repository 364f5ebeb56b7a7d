/*
 * test_transpose.c - transposed pieces (a rule's "transpose"): the copy
 * of one source row (transpose.c) against element-by-element loops, with
 * and without dtype conversion, and the plan of GPT-OSS's BF16 experts
 * (scripts/gen-checkpoint --arch gpt_oss --bf16-experts: hidden 64,
 * intermediate 128, 4 experts) worked out by hand from
 * test/engine/GPTOSS-LAYOUT.md: w13[e] = gate_up_proj[e][:, 2lo:2hi]^T,
 * w2[e] = down_proj[e][lo:hi, :]^T, one piece a rank whose rows are the
 * experts; the same experts marked "experts" (as Llama 4's are) under
 * --expert-parallel: each rank's own experts whole, transposed
 * (vLLM's load_moe_expert_weights under an expert_map), linear in one
 * piece, round_robin in one an expert; a deinterleaved block of whole
 * rows (Llama 4's q/k heads); and the same copies put in tiles of output
 * rows (stream_put_tile); Quark's W4A16 int32 words repacked (int4),
 * and sub-rows repeated (their scales and zero points in halved groups).
 */
#include <criterion/criterion.h>
#include <jansson.h>

#include "wshard.h"
#include "base/fpconv.h"
#include "plan_fixture.h"
#include "stream/stream_impl.h"

TestSuite(transpose, .fini = close_open_fx);

/*
 * A source row of 5 sub-rows of 7 two-byte elements (stride 14), the
 * piece taking columns 2..5 (4 elements) of sub-rows 1..3: out[j * 3 + k]
 * = element (1 + k, 2 + j).
 */
Test(transpose, two_byte_elements)
{
	uint16_t row[5 * 7], out[12];
	struct wshard_piece p = {
		.kind = WSHARD_PIECE_COPY, .tr_rows = 3, .tr_stride = 14, .tr_width = 8, .tr_es = 2,
	};
	int j, k;

	for (k = 0; k < 35; k++)
		row[k] = (uint16_t)(1000 + k);
	memset(out, 0xff, sizeof(out));
	stream_transpose_row(&p, (const char *)(row + 7 + 2), (char *)out);
	for (j = 0; j < 4; j++)
		for (k = 0; k < 3; k++)
			cr_assert_eq(out[j * 3 + k], row[(1 + k) * 7 + 2 + j], "j %d k %d", j, k);
}

/*
 * Quark's W4A16 experts (enum wshard_int4): two sub-rows of one int32
 * word each, 0x76543210 and 0xfedcba98 (value c of a word in nibble c),
 * the second word column of a source row of two; vLLM's
 * convert_quark_tensor by hand.  WEIGHT: output c = value c of row 0 |
 * value c of row 1 << 4; with REORDER value c is nibble
 * [0, 4, 1, 5, 2, 6, 3, 7][c]; with XOR each value ^ 8.  ZEROS: output
 * row h = (values 2h | 2h+1 << 4) of row 0, then of row 1.
 */
Test(transpose, int4_words)
{
	static const uint32_t row[4] = { 0xffffffffu, 0x76543210u, 0, 0xfedcba98u };
	static const unsigned char weight[8] = { 0x80, 0x91, 0xa2, 0xb3, 0xc4, 0xd5, 0xe6, 0xf7 };
	static const unsigned char reorder[8] = { 0x80, 0xc4, 0x91, 0xd5, 0xa2, 0xe6, 0xb3, 0xf7 };
	static const unsigned char zeros[8] = { 0x10, 0x98, 0x32, 0xba, 0x54, 0xdc, 0x76, 0xfe };
	struct wshard_piece p = {
		.kind = WSHARD_PIECE_COPY, .tr_rows = 2, .tr_stride = 8, .tr_width = 4, .tr_es = 4,
		.int4 = WSHARD_INT4_WEIGHT,
	};
	unsigned char out[8];
	int c;

	stream_transpose_row(&p, (const char *)row + 4, (char *)out);
	cr_assert_arr_eq(out, weight, 8);
	p.int4 = WSHARD_INT4_WEIGHT | WSHARD_INT4_REORDER;
	stream_transpose_row(&p, (const char *)row + 4, (char *)out);
	cr_assert_arr_eq(out, reorder, 8);
	p.int4 = WSHARD_INT4_WEIGHT | WSHARD_INT4_XOR;
	stream_transpose_row(&p, (const char *)row + 4, (char *)out);
	for (c = 0; c < 8; c++)
		cr_assert_eq(out[c], weight[c] ^ 0x88, "c %d", c);
	p.int4 = WSHARD_INT4_ZEROS;
	stream_transpose_row(&p, (const char *)row + 4, (char *)out);
	cr_assert_arr_eq(out, zeros, 8);
	p.int4 = WSHARD_INT4_ZEROS | WSHARD_INT4_REORDER | WSHARD_INT4_XOR;
	stream_transpose_row(&p, (const char *)row + 4, (char *)out);
	/* values in order 0, 4, 1, 5, ...: row 0 bytes 0x40, 0x51, 0x62, 0x73 */
	cr_assert_eq(out[0], 0x40 ^ 0x88);
	cr_assert_eq(out[1], 0xc8 ^ 0x88);
	cr_assert_eq(out[6], 0x73 ^ 0x88);
	cr_assert_eq(out[7], 0xfb ^ 0x88);
}

/* Larger than a tile both ways, four-byte elements: 40 x 70 whole. */
Test(transpose, four_byte_elements_past_a_tile)
{
	static uint32_t row[40 * 70], out[40 * 70];
	struct wshard_piece p = {
		.kind = WSHARD_PIECE_COPY, .tr_rows = 40, .tr_stride = 280, .tr_width = 280, .tr_es = 4,
	};
	int j, k;

	for (k = 0; k < 40 * 70; k++)
		row[k] = (uint32_t)k * 2654435761u;
	stream_transpose_row(&p, (const char *)row, (char *)out);
	for (j = 0; j < 70; j++)
		for (k = 0; k < 40; k++)
			cr_assert_eq(out[j * 40 + k], row[k * 70 + j]);
}

/* BF16 to F32 while transposing: each element converted as --dtype does. */
Test(transpose, converted)
{
	uint16_t row[2 * 3] = { 0x3f80, 0x4000, 0xc040, 0x3f00, 0x7f80, 0x8000 };
	float out[6], want;
	struct wshard_piece p = {
		.kind = WSHARD_PIECE_COPY, .tr_rows = 2, .tr_stride = 6, .tr_width = 6, .tr_es = 2,
		.from = WSHARD_BF16, .to = WSHARD_F32,
	};
	int j, k;

	stream_transpose_row(&p, (const char *)row, (char *)out);
	for (j = 0; j < 3; j++)
		for (k = 0; k < 2; k++) {
			wshard_convert_floats(WSHARD_BF16, WSHARD_F32, &row[k * 3 + j], &want, 1);
			cr_assert_eq(memcmp(&out[j * 2 + k], &want, 4), 0, "j %d k %d", j, k);
		}
}

/*
 * A deinterleaved block (a rule's "deinterleave": Llama 4's q/k heads):
 * 6 rows of 3 BF16 values, elements of a whole row (6 bytes), written
 * even rows first: out row j * 3 + k = row 2k + j; converted to F32, each
 * row's 3 values as --dtype does.
 */
Test(transpose, deinterleaved_rows_converted)
{
	uint16_t block[6 * 3];
	float out[6 * 3], want[3];
	struct wshard_piece p = {
		.kind = WSHARD_PIECE_COPY, .tr_rows = 3, .tr_stride = 12, .tr_width = 12, .tr_es = 6,
		.di_rows = 6, .from = WSHARD_BF16, .to = WSHARD_F32,
	};
	int j, k;

	for (k = 0; k < 18; k++)
		block[k] = (uint16_t)(0x3f80 + 3 * k);
	stream_transpose_row(&p, (const char *)block, (char *)out);
	for (j = 0; j < 2; j++)
		for (k = 0; k < 3; k++) {
			wshard_convert_floats(WSHARD_BF16, WSHARD_F32, &block[(2 * k + j) * 3], want, 3);
			cr_assert_eq(memcmp(&out[(j * 3 + k) * 3], want, sizeof(want)), 0,
				     "j %d k %d", j, k);
		}
	p.from = p.to = WSHARD_BF16;
	stream_transpose_row(&p, (const char *)block, (char *)out);
	for (j = 0; j < 2; j++)
		for (k = 0; k < 3; k++)
			cr_assert_eq(memcmp((const uint16_t *)out + (j * 3 + k) * 3,
					    &block[(2 * k + j) * 3], 6), 0, "j %d k %d", j, k);
}

/* A sink that writes what it is put into out (a piece's output). */
static enum wshard_err into_out(void *ctx, unsigned slot, int rank, size_t tensor,
				uint64_t off, const void *buf, size_t len,
				struct wshard_error *err)
{
	(void)slot;
	(void)rank;
	(void)tensor;
	(void)err;
	memcpy((char *)ctx + off, buf, len);
	return WSHARD_OK;
}

/*
 * Piece p (one source row at src) put in tiles of w output rows through
 * stream_put_tile, with a stage of stage bytes (half the budget): the
 * bytes stream_transpose_row gives for the whole row.
 */
static void tiles_match(const struct wshard_piece *p, const char *src, uint64_t w,
			uint64_t stage)
{
	static char want[4096], got[4096], tile[4096];
	struct wshard_piece piece = *p;
	struct wshard_out_tensor t = { .nbytes = p->out_ncols, .npieces = 1, .pieces = &piece };
	struct wshard_rank_plan rp = { .ntensors = 1, .tensors = &t };
	struct wshard_plan plan = { .tp = 1, .ranks = &rp };
	struct stream_sink sink = { .put = into_out, .ctx = got };
	uint64_t total = 0, n = p->tr_width / p->tr_es, j0, m, k;
	struct stream s = {
		.plan = &plan, .sink = &sink, .budget = 2 * stage, .put_total = &total,
	};
	struct ref ref = { 0, 0, 0 };

	cr_assert_leq(p->out_ncols, sizeof(want));
	piece.row0 = 0;
	piece.nrows = 1;
	stream_transpose_row(p, src, want);
	memset(got, 0xee, sizeof(got));
	for (j0 = 0; j0 < n; j0 += w) {
		m = WSHARD_MIN(w, n - j0);
		/* what stream_put_tiled reads: each sub-row's elements [j0, j0 + m) */
		for (k = 0; k < p->tr_rows; k++)
			memcpy(tile + k * m * p->tr_es, src + k * p->tr_stride + j0 * p->tr_es,
			       m * p->tr_es);
		stream_put_tile(&s, &ref, 0, j0, m, tile);
	}
	cr_assert_eq(s.local.code, WSHARD_OK, "%s", s.local.msg);
	cr_assert_eq(total, p->out_ncols);
	cr_assert_eq(memcmp(got, want, p->out_ncols), 0, "tiles of %llu", (unsigned long long)w);
	free(s.stage);
}

/*
 * Tiles of output rows (stream_put_tiled's, for experts larger than the
 * budget) give the whole row's bytes: a cut of sub-rows (a "chunks" part:
 * elements 3..9 of 11, 5 sub-rows) in tiles of 1, 2, 3 and 7 elements and
 * stages down to one output row, as BF16 and widened to F32; and a
 * deinterleaved block (elements of a whole row) one element a tile.
 */
Test(transpose, tiles_of_output_rows)
{
	uint16_t row[5 * 11], block[6 * 3];
	struct wshard_piece p = {
		.kind = WSHARD_PIECE_COPY, .tr_rows = 5, .tr_stride = 22, .tr_width = 14, .tr_es = 2,
		.from = WSHARD_BF16, .to = WSHARD_BF16,
	};
	struct wshard_piece d = {
		.kind = WSHARD_PIECE_COPY, .tr_rows = 3, .tr_stride = 12, .tr_width = 12, .tr_es = 6,
		.di_rows = 6, .from = WSHARD_BF16, .to = WSHARD_F32,
	};
	static const uint64_t widths[] = { 1, 2, 3, 7 };
	size_t i, c;
	int k;

	for (k = 0; k < 5 * 11; k++)
		row[k] = (uint16_t)(0x3f80 + 7 * k);
	for (k = 0; k < 18; k++)
		block[k] = (uint16_t)(0x4000 + 5 * k);
	for (c = 0; c < 2; c++) {
		p.to = c ? WSHARD_F32 : WSHARD_BF16;
		p.out_ncols = p.tr_rows * p.tr_width * (c ? 2 : 1);
		for (i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
			tiles_match(&p, (const char *)(row + 3), widths[i], 1 << 10);
			tiles_match(&p, (const char *)(row + 3), widths[i], 1);
		}
	}
	d.out_ncols = 6 * 3 * 4;
	tiles_match(&d, (const char *)block, 1, 1);
	tiles_match(&d, (const char *)block, 2, 1 << 10);
}

/*
 * Sub-rows repeated (Quark's W4A16 experts' scales and zero points where
 * vLLM halves the group, repeat_interleave then a rank's cut): 3 sub-rows
 * of 4 BF16 elements, each repeated 4 times less the first 3 and last 2
 * copies (a row of 7: out[j * 7 + c] = sub-row (c + 3) / 4's element j),
 * as they are, widened to F32, and in tiles; then int4_words' ZEROS with
 * each sub-row twice less the first copy (rows of 3 bytes).
 */
Test(transpose, repeated_groups)
{
	static const uint32_t word[2] = { 0x76543210u, 0xfedcba98u };
	static const unsigned char zeros[8] = { 0x10, 0x98, 0x32, 0xba, 0x54, 0xdc, 0x76, 0xfe };
	uint16_t row[3 * 4], out[4 * 7];
	uint32_t wide[4 * 7];
	unsigned char z[4 * 3];
	struct wshard_piece p = {
		.kind = WSHARD_PIECE_COPY, .tr_rows = 3, .tr_stride = 8, .tr_width = 8, .tr_es = 2,
		.tr_rep = 4, .tr_skip = 3, .tr_cut = 2, .from = WSHARD_BF16, .to = WSHARD_BF16,
		.out_ncols = 4 * 7 * 2,
	};
	struct wshard_piece q = {
		.kind = WSHARD_PIECE_COPY, .tr_rows = 2, .tr_stride = 4, .tr_width = 4, .tr_es = 4,
		.tr_rep = 2, .tr_skip = 1, .int4 = WSHARD_INT4_ZEROS,
	};
	int j, c, h;

	for (j = 0; j < 12; j++)
		row[j] = (uint16_t)(0x3f80 + 3 * j);
	stream_transpose_row(&p, (const char *)row, (char *)out);
	for (j = 0; j < 4; j++)
		for (c = 0; c < 7; c++)
			cr_assert_eq(out[j * 7 + c], row[(c + 3) / 4 * 4 + j], "j %d c %d", j, c);
	p.to = WSHARD_F32;
	stream_transpose_row(&p, (const char *)row, (char *)wide);
	for (j = 0; j < 4; j++)
		for (c = 0; c < 7; c++)
			cr_assert_eq(wide[j * 7 + c], (uint32_t)row[(c + 3) / 4 * 4 + j] << 16,
				     "j %d c %d", j, c);
	p.to = WSHARD_BF16;
	tiles_match(&p, (const char *)row, 1, 1);
	tiles_match(&p, (const char *)row, 3, 1 << 10);
	stream_transpose_row(&q, (const char *)word, (char *)z);
	for (h = 0; h < 4; h++) {
		cr_assert_eq(z[h * 3], zeros[2 * h], "h %d", h);
		cr_assert_eq(z[h * 3 + 1], zeros[2 * h + 1], "h %d", h);
		cr_assert_eq(z[h * 3 + 2], zeros[2 * h + 1], "h %d", h);
	}
}

/* The fields of transposed piece i of t. */
static void assert_tr(const struct fx *f, const struct wshard_out_tensor *t, const char *src,
		      uint64_t col0, uint64_t ncols, uint64_t tr_rows, uint64_t tr_stride,
		      uint64_t tr_width)
{
	const struct wshard_piece *p = &t->pieces[0];

	cr_assert_eq(t->npieces, 1, "%s", t->name);
	cr_assert_str_eq(f->cat->tensors[p->src].name, src);
	cr_assert_eq(p->row0, 0);
	cr_assert_eq(p->nrows, 4);
	cr_assert_eq(p->col0, col0, "%s: col0 %llu", t->name, (unsigned long long)p->col0);
	cr_assert_eq(p->ncols, ncols, "%s: ncols %llu", t->name, (unsigned long long)p->ncols);
	cr_assert_eq(p->tr_rows, tr_rows);
	cr_assert_eq(p->tr_stride, tr_stride);
	cr_assert_eq(p->tr_width, tr_width);
	cr_assert_eq(p->tr_es, 2);
	cr_assert_eq(p->out_ncols, tr_rows * tr_width);
	cr_assert_eq(p->len, 4 * tr_rows * tr_width);
}

#define X "model.layers.1.mlp.experts."
#define O X "routed_experts."

/*
 * gate_up_proj [4, 64, 256] BF16, a row (expert) of 64 sub-rows of 512
 * bytes: rank r takes elements [128r, 128r + 128) of each sub-row (bytes
 * 256r, 256 wide; the span 63 * 512 + 256), written [4, 128, 64].
 * down_proj [4, 128, 64]: sub-rows [64r, 64r + 64) whole (128 bytes),
 * the span 8192 bytes at 8192r, written [4, 64, 64].
 */
Test(transpose, gpt_oss_bf16_experts)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch gpt_oss --bf16-experts");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, O "w13_weight");

		assert_shape(t, 3, 4, 128);
		cr_assert_eq(t->shape[2], 64);
		assert_tr(&f, t, X "gate_up_proj", 256 * r, 63 * 512 + 256, 64, 512, 256);
		t = get_out(&f, r, O "w2_weight");
		assert_shape(t, 3, 4, 64);
		cr_assert_eq(t->shape[2], 64);
		assert_tr(&f, t, X "down_proj", 8192 * r, 8192, 64, 128, 128);
	}
	fx_close(&f);
}

/* intermediate 33: w13's 66 rows split, w2's 33 do not; refused, naming
 * the config key the rule's shape gives for down_proj's dimension 1. */
Test(transpose, indivisible_refused)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--arch gpt_oss --bf16-experts --intermediate 33");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "intermediate_size=33 is not divisible by --tp 2");
	fx_close(&f);
}

/* Marks the rules of GPT-OSS's BF16 experts "experts", as Llama 4's. */
static void mark_experts(struct fx *f)
{
	size_t i;
	int n = 0;

	for (i = 0; i < f->rules->nrules; i++) {
		struct rules_rule *rule = &f->rules->rules[i];

		if (rule->transpose) {
			rule->experts = true;
			n++;
		}
	}
	cr_assert_eq(n, 2);
	/* the BF16 experts alone are marked: GPT-OSS's own rules refuse
	 * --expert-parallel (no_expert_parallel) */
	free(f->rules->no_ep);
	f->rules->no_ep = NULL;
}

/* Piece k of t: whole experts [row0, row0 + nrows) of src, each a matrix
 * of tr_rows sub-rows of width bytes written transposed. */
static void assert_whole(const struct fx *f, const struct wshard_out_tensor *t, size_t k,
			 const char *src, uint64_t row0, uint64_t nrows, uint64_t tr_rows,
			 uint64_t width)
{
	const struct wshard_piece *p = &t->pieces[k];

	cr_assert_str_eq(f->cat->tensors[p->src].name, src);
	cr_assert_eq(p->row0, row0, "%s piece %zu: row0 %llu", t->name, k,
		     (unsigned long long)p->row0);
	cr_assert_eq(p->nrows, nrows, "%s piece %zu: nrows %llu", t->name, k,
		     (unsigned long long)p->nrows);
	cr_assert_eq(p->col0, 0);
	cr_assert_eq(p->ncols, tr_rows * width);
	cr_assert_eq(p->tr_rows, tr_rows);
	cr_assert_eq(p->tr_stride, width);
	cr_assert_eq(p->tr_width, width);
	cr_assert_eq(p->tr_es, 2);
	cr_assert_eq(p->out_ncols, tr_rows * width);
	cr_assert_eq(p->len, nrows * tr_rows * width);
	cr_assert_eq(p->prov_ncols, 0);
}

/*
 * 5 experts over 2 ranks, linear: rank 0 holds 0-2, rank 1 3-4, whole:
 * w13 [n, 256, 64] from gate_up_proj's [64, 256] matrices (sub-rows of
 * 512 bytes), w2 [n, 64, 128] from down_proj's [128, 64] (128 bytes).
 */
Test(transpose, whole_experts_linear)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	static const uint64_t first[] = { 0, 3 }, count[] = { 3, 2 };
	int r;

	fx_open(&f, "--arch gpt_oss --bf16-experts --experts 5");
	mark_experts(&f);
	f.opt.expert_parallel = true;
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, O "w13_weight");

		assert_shape(t, 3, count[r], 256);
		cr_assert_eq(t->shape[2], 64);
		cr_assert_eq(t->npieces, 1);
		assert_whole(&f, t, 0, X "gate_up_proj", first[r], count[r], 64, 512);
		t = get_out(&f, r, O "w2_weight");
		assert_shape(t, 3, count[r], 64);
		cr_assert_eq(t->shape[2], 128);
		cr_assert_eq(t->npieces, 1);
		assert_whole(&f, t, 0, X "down_proj", first[r], count[r], 128, 128);
	}
	fx_close(&f);
}

/* The same with grouped routing (n_group 2), round_robin: rank 0 holds
 * 0, 2, 4 and rank 1 holds 1, 3, one piece an expert. */
Test(transpose, whole_experts_round_robin)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;
	size_t k;
	int r;

	fx_open(&f, "--arch gpt_oss --bf16-experts --experts 5");
	mark_experts(&f);
	json_object_set_new(f.cat->config.json, "n_group", json_integer(2));
	f.opt.expert_parallel = true;
	f.opt.placement = WSHARD_PLACE_ROUND_ROBIN;
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, O "w13_weight");
		assert_shape(t, 3, (uint64_t)(3 - r), 256);
		cr_assert_eq(t->npieces, (size_t)(3 - r));
		for (k = 0; k < t->npieces; k++)
			assert_whole(&f, t, k, X "gate_up_proj", (uint64_t)r + 2 * k, 1, 64, 512);
		t = get_out(&f, r, O "w2_weight");
		cr_assert_eq(t->npieces, (size_t)(3 - r));
		for (k = 0; k < t->npieces; k++)
			assert_whole(&f, t, k, X "down_proj", (uint64_t)r + 2 * k, 1, 128, 128);
	}
	fx_close(&f);
}

/* Fewer experts than ranks: refused, as vLLM would leave a rank none. */
Test(transpose, whole_experts_fewer_than_ranks)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--arch gpt_oss --bf16-experts --experts 2");
	mark_experts(&f);
	f.opt.expert_parallel = true;
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "~holds 2 experts for 4 ranks");
	fx_close(&f);
}
