/*
 * plan_quark_experts.c - what vLLM 0.32 holds of Quark's experts in
 * shapes of its own: the W4A16 experts QuarkW4A16Int4MoEMethod repacks as
 * it loads them, and the INT8 experts' input zero points it makes zeros.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "plan_impl.h"

const char *wshard_int4_text(uint8_t int4)
{
	static const char *const text[] = {
		"weight", "weight xor", "weight reorder", "weight reorder xor",
		"zeros", "zeros xor", "zeros reorder", "zeros reorder xor",
	};

	return text[(int4 & WSHARD_INT4_ZEROS ? 4 : 0) | (int4 & WSHARD_INT4_REORDER ? 2 : 0) |
		    (int4 & WSHARD_INT4_XOR ? 1 : 0)];
}

/* The experts' AWQ-named tensors of Quark's W4A16 and what vLLM's
 * QuarkW4A16Int4MoEMethod calls them. */
static const struct {
	const char *awq, *quark;
	uint8_t int4;		/* enum wshard_int4: WEIGHT, ZEROS, 0 for scales */
} w4_experts[] = {
	{ "_qweight", "_weight", WSHARD_INT4_WEIGHT },
	{ "_qzeros", "_weight_zero_point", WSHARD_INT4_ZEROS },
	{ "_scales", "_weight_scale", 0 },
};

/* The enum wshard_int4 flags of the checkpoint's export and weights. */
static uint8_t w4a16_flags(const struct wshard_plan *plan)
{
	json_t *q = json_object_get(plan->config->json, "quantization_config");
	json_t *w = json_object_get(json_object_get(q, "global_quant_config"), "weight");
	const char *pack = json_string_value(json_object_get(json_object_get(q, "export"),
							     "pack_method"));

	return (pack && !strcmp(pack, "reorder") ? WSHARD_INT4_REORDER : 0) |
	       (json_is_true(json_object_get(w, "symmetric")) ? WSHARD_INT4_XOR : 0);
}

/*
 * Piece p of an AWQ-layout expert tensor [E, a, row] (row bytes a row)
 * made the transposed piece of vLLM's layout: an expert's a sub-rows, of
 * which p takes all and its columns, written [row / es, a] (scales) or
 * repacked (int4); the part at byte x of an AWQ row goes to byte x * a of
 * the expert's matrix.  Its source seen as one row (plan->view_rows).
 */
static enum wshard_err w4a16_piece(struct wshard_plan *plan, struct wshard_out_tensor *t,
				   struct wshard_piece *p, uint8_t int4, struct wshard_error *err)
{
	const struct wshard_src_tensor *s = &plan->cat->tensors[p->src];
	uint64_t a = t->shape[1], row = t->nbytes / (t->shape[0] * a);
	/* its rows as AWQ's pieces count them (a matrix's; another rank's
	 * piece may have made them one already) */
	uint64_t srows = s->info->ndim == 2 ? s->info->shape[0] : 1, srb = s->nbytes / srows;
	uint64_t x = p->dst % row, es = wshard_dtype_bits(s->info->dtype) / 8;
	uint64_t orow = p->out_stride ? p->out_ncols : p->ncols;

	if (p->kind != WSHARD_PIECE_COPY || p->tr_rows || p->di_rows || p->pad || p->mul != 0 ||
	    p->neg_exp || p->add || p->nrows != a || (p->dst - x) % (a * row) || x + orow > row ||
	    p->len != a * p->out_ncols || s->info->ndim != 2 || !es ||
	    (int4 && (es != 4 || p->from != p->to || (int4 & WSHARD_INT4_WEIGHT && a % 2))) ||
	    srb > UINT32_MAX || a > UINT32_MAX)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': Quark's W4A16 experts: its piece from '%s' is not laid out as an AWQ expert's (internal)",
					t->name, s->name);
	if (p->row0 == 0 && p->nrows == srows) {	/* a column cut */
		p->prov_dim = 1;
		p->prov_col0 = (uint32_t)(p->col0 / es);
		p->prov_ncols = (uint32_t)(p->ncols / es);
	} else {
		p->prov_dim = 0;
		p->prov_col0 = (uint32_t)p->row0;
		p->prov_ncols = (uint32_t)p->nrows;
	}
	p->tr_rows = (uint32_t)a;
	p->tr_stride = (uint32_t)srb;
	p->tr_width = (uint32_t)p->ncols;
	p->tr_es = (uint32_t)es;
	p->col0 += p->row0 * srb;
	p->ncols = (a - 1) * srb + p->tr_width;
	p->row0 = 0;
	p->nrows = 1;
	p->out_ncols = p->len;
	p->out_stride = 0;
	p->dst = p->dst - x + x * a;
	p->int4 = int4;
	if (!plan->view_rows) {
		plan->view_rows = calloc(plan->cat->ntensors + 1, sizeof(uint64_t));
		if (!plan->view_rows)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	plan->view_rows[p->src] = 1;
	return WSHARD_OK;
}

/* vLLM's repeat (group_size_div_factor) of Quark's expert scales or zero
 * points t ([groups, outputs], packed 8 an I32 word for the zero points)
 * of a gate or up projection or, w2, a down projection; 0 where none. */
static uint64_t src_div(const struct wshard_plan *plan, const struct wshard_st_tensor *t,
			bool w2)
{
	uint64_t group = (uint64_t)plan->quark_w4a16_group, tp = (uint64_t)plan->tp;
	uint64_t cols, inter, hidden;

	if (t->ndim != 2)
		return 0;
	cols = t->shape[1] * (t->dtype == WSHARD_I32 ? 8 : 1);
	inter = w2 ? t->shape[0] * group : cols;
	hidden = w2 ? cols : t->shape[0] * group;
	return inter % tp ? 0 : plan_quark_w4a16_div(group, inter / tp, hidden);
}

bool plan_quark_repeats(const struct wshard_plan *plan, const struct member *m)
{
	return plan->quark_w4a16_group && m->rule->inout && m->rule->grouped &&
	       m->rule->kind == RULE_ROW && strstr(m->rule->match, "{e}") &&
	       src_div(plan, src_info(plan, m->src), true) > 1;
}

/*
 * A rank's down projection scales or zero points whose groups vLLM
 * repeats f times: planned whole ([E, G, row], plan_quark_repeats), made
 * the source groups its cut of the G * f repeated ones, [tp_rank * C,
 * (tp_rank + 1) * C), touches (first to last, m of them), of which the
 * first *skip and last *cut repeats are left out (the zero points' view
 * [H/2, tp, C] and the scales' narrow of weight_loader).
 */
static enum wshard_err narrow_w2(struct wshard_out_tensor *t, uint64_t f, uint64_t tp,
				 uint64_t tp_rank, uint64_t *skip, uint64_t *cut,
				 struct wshard_error *err)
{
	uint64_t g = t->shape[1], row = t->nbytes / (t->shape[0] * g), c = g * f / tp;
	uint64_t lo = tp_rank * c, first = lo / f, m = (lo + c - 1) / f - first + 1;
	size_t j;

	for (j = 0; j < t->npieces; j++) {
		struct wshard_piece *p = &t->pieces[j];

		if (p->kind != WSHARD_PIECE_COPY || p->row0 || p->nrows != g ||
		    p->dst % (g * row) || p->len != g * row)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': Quark's W4A16 experts: a piece is not an expert's groups (internal)",
						t->name);
		p->row0 = first;
		p->nrows = m;
		p->len = m * row;
		p->dst = p->dst / (g * row) * m * row;
	}
	t->shape[1] = m;
	t->nbytes = t->shape[0] * m * row;
	*skip = lo - first * f;
	*cut = m * f - *skip - c;
	return WSHARD_OK;
}

/* Piece order: by dst (vLLM's layout puts an expert's up after its gate,
 * where AWQ's had their rows side by side). */
static int piece_cmp(const void *a, const void *b)
{
	const struct wshard_piece *x = a, *y = b;

	return x->dst < y->dst ? -1 : x->dst > y->dst;
}

/*
 * Rank tensor t of Quark's W4A16 experts planned as AWQ's, [E, a, row
 * bytes] (int4 its enum wshard_int4, w2 a down projection's), made
 * vLLM's: each piece transposed (w4a16_piece), a scale's or zero point's
 * groups repeated where vLLM halves them (src_div, narrow_w2): [E, a,
 * row/4 words] -> WEIGHT [E, row*2, a/2] U8, ZEROS [E, row, n] U8;
 * scales [E, row/es, n] (n: a, or the repeated groups a rank keeps).
 */
static enum wshard_err w4a16_tensor(struct wshard_plan *plan, struct wshard_out_tensor *t,
				    uint64_t tp_rank, uint8_t int4, bool w2,
				    struct wshard_error *err)
{
	uint64_t f = 1, skip = 0, cut = 0, a, row, n;
	enum wshard_err rc;
	size_t j;

	if (!(int4 & WSHARD_INT4_WEIGHT) && t->npieces)
		f = src_div(plan, plan->cat->tensors[t->pieces[0].src].info, w2);
	if (!f)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': Quark's W4A16 experts: groups vLLM cannot halve (internal)",
					t->name);
	if (f > 1 && w2) {
		rc = narrow_w2(t, f, (uint64_t)plan->tp, tp_rank, &skip, &cut, err);
		if (rc)
			return rc;
	}
	a = t->shape[1];
	row = t->nbytes / (t->shape[0] * a);
	n = a * f - skip - cut;
	for (j = 0; j < t->npieces; j++) {
		struct wshard_piece *p = &t->pieces[j];

		rc = w4a16_piece(plan, t, p, int4, err);
		if (rc)
			return rc;
		if (f == 1)
			continue;
		p->tr_rep = (uint8_t)f;
		p->tr_skip = (uint8_t)skip;
		p->tr_cut = (uint8_t)cut;
		p->dst = p->dst / a * n;
		p->len = p->len / a * n;
		p->out_ncols = p->len;
	}
	qsort(t->pieces, t->npieces, sizeof(*t->pieces), piece_cmp);
	if (int4 & WSHARD_INT4_WEIGHT) {
		t->shape[1] = row * 2;
		t->shape[2] = a / 2;
	} else {
		t->shape[1] = int4 ? row : t->shape[2];
		t->shape[2] = n;
		t->nbytes = t->nbytes / a * n;
	}
	return WSHARD_OK;
}

enum wshard_err plan_quark_w4a16_experts(struct wshard_plan *plan, struct wshard_error *err)
{
	uint8_t flags;
	int r;

	if (!plan->quark_w4a16_group)
		return WSHARD_OK;
	flags = w4a16_flags(plan);
	for (r = 0; r < plan->nranks; r++) {
		struct wshard_rank_plan *rp = &plan->ranks[r];
		size_t i, k;

		for (i = 0; i < rp->ntensors; i++) {
			struct wshard_out_tensor *t = &rp->tensors[i];
			size_t len = strlen(t->name), al;
			enum wshard_err rc;
			uint8_t int4;
			char *name;

			for (k = 0; k < sizeof(w4_experts) / sizeof(w4_experts[0]); k++) {
				al = strlen(w4_experts[k].awq);
				if (t->ndim == 3 && len > al + 3 &&
				    !strcmp(t->name + len - al, w4_experts[k].awq) &&
				    (!strncmp(t->name + len - al - 3, "w13", 3) ||
				     !strncmp(t->name + len - al - 2, "w2", 2)))
					break;
			}
			if (k == sizeof(w4_experts) / sizeof(w4_experts[0]))
				continue;
			int4 = w4_experts[k].int4 ? w4_experts[k].int4 | flags : 0;
			if ((int4 && t->dtype != WSHARD_I32) || !t->shape[0] || !t->shape[1])
				return wshard_error_set(err, WSHARD_EINVAL,
							"tensor '%s': Quark's W4A16 experts: not I32 words (internal)",
							t->name);
			rc = w4a16_tensor(plan, t, (uint64_t)rp->tp_rank, int4,
					  !strncmp(t->name + len - al - 2, "w2", 2), err);
			if (rc)
				return rc;
			if (int4)
				t->dtype = WSHARD_U8;
			name = malloc(len - al + strlen(w4_experts[k].quark) + 1);
			if (!name)
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			sprintf(name, "%.*s%s", (int)(len - al), t->name, w4_experts[k].quark);
			free(t->name);
			t->name = name;
		}
	}
	return WSHARD_OK;
}

/* Index of the tensor name in rank rp, or -1. */
static long rank_find(const struct wshard_rank_plan *rp, const char *name)
{
	size_t i;

	for (i = 0; i < rp->ntensors; i++)
		if (strcmp(rp->tensors[i].name, name) == 0)
			return (long)i;
	return -1;
}

enum wshard_err plan_quark_input_zeros(struct wshard_plan *plan, size_t *caps,
				       struct wshard_error *err)
{
	static const struct {
		const char *weight, *zero;
		uint64_t parts;		/* 0: [E]; else [E, parts] */
	} pairs[] = {
		{ "w13_weight", "w13_input_zero_point", 2 },
		{ "w2_weight", "w2_input_zero_point", 0 },
	};
	int r;

	if (!plan_quark_method(plan))
		return WSHARD_OK;
	for (r = 0; r < plan->tp; r++) {
		struct wshard_rank_plan *rp = &plan->ranks[r];
		size_t i, n = rp->ntensors, k;

		for (i = 0; i < n; i++) {
			const char *name = rp->tensors[i].name;
			size_t len = strlen(name), wl;

			if (rp->tensors[i].dtype != WSHARD_I8 || rp->tensors[i].ndim != 3)
				continue;
			for (k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
				struct wshard_out_tensor t = { .dtype = WSHARD_I8,
							       .quant = WSHARD_QUANT_ZERO_POINT };
				enum wshard_err rc;

				wl = strlen(pairs[k].weight);
				if (len <= wl || name[len - wl - 1] != '.' ||
				    strcmp(name + len - wl, pairs[k].weight))
					continue;
				t.name = malloc(len - wl + strlen(pairs[k].zero) + 1);
				if (!t.name)
					return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
				sprintf(t.name, "%.*s%s", (int)(len - wl), name, pairs[k].zero);
				if (rank_find(rp, t.name) >= 0) {
					free(t.name);
					continue;
				}
				t.shape[0] = rp->tensors[i].shape[0];
				t.shape[1] = pairs[k].parts;
				t.ndim = pairs[k].parts ? 2 : 1;
				rc = plan_push_zeros(&t, t.shape[0] * (pairs[k].parts ? pairs[k].parts : 1),
						     err);
				if (!rc)
					rc = plan_rank_push(rp, &caps[r], &t, err);
				free(t.name);
				free(t.pieces);
				if (rc)
					return rc;
			}
		}
	}
	return WSHARD_OK;
}
