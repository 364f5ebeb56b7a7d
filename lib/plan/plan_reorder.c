/*
 * plan_reorder.c - cuts whose rows or columns vLLM reorders as it loads:
 * Inkling's experts (a rule's "deinterleave" on a "col" split, and
 * "beside"), the OpenAI Privacy Filter's ("interleave"), K2-Horizon's q
 * and k heads ("permute_rows"), BAGEL's patch embedding
 * ("transpose_cols").
 */
#include <stdint.h>
#include <stdlib.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/fpconv.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"

/*
 * A column split of [E, A, B] whose rank cut vLLM reorders (its Inkling
 * loader, models/inkling/nvidia/moe.py).  "deinterleave": true: the cut
 * of A is one block, its rows even ones first (the routed experts' w13
 * [E, 2I, H], gate and up rows interleaved g0, u0, g1, u1, ...: rank r's
 * slab of 2I/tp rows written [gate; up]), a transposed piece a rank
 * whose elements are rows.  "beside" ("rows": 2, B cut): [A, E, B/tp],
 * each row of A holding every expert's cut in turn (the sink experts'
 * w2 [E, H, I], written [H, E*I/tp] with "view": 2), a piece an expert
 * out_stride apart.  rb: the bytes of one index of the cut dimension.
 */
enum wshard_err plan_split_reordered(const struct wshard_plan *plan, struct group_out *g,
				     const struct member *m, uint64_t *shape, uint64_t rb,
				     struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t cut = shape[m->rule->beside ? 2 : 1], e, ne = t->shape[0];
	enum wshard_err rc = WSHARD_OK;
	int r;

	if (t->ndim != 3)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"%s\" needs 3 dimensions (experts first)",
					t->name, m->rule->beside ? "beside" : "deinterleave");
	if (m->rule->deinterleave_cut) {
		if (cut % 2 || cut * rb > UINT32_MAX)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': \"deinterleave\": a rank's cut of %llu rows is no even block under 4 GiB",
						t->name, (unsigned long long)cut);
	} else if (ne * cut * rb > UINT32_MAX) {
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"beside\" rows of %llu bytes are over 4 GiB",
					t->name, (unsigned long long)(ne * cut * rb));
	}
	for (r = 0; r < plan->tp && !rc; r++) {
		struct wshard_out_tensor *o = &g->ranks[r];
		uint64_t base = o->nbytes;
		struct wshard_piece p = {
			.kind = WSHARD_PIECE_COPY,
			.src = m->src,
			.nrows = ne,
			.col0 = (uint64_t)r * cut * rb,
			.ncols = cut * rb,
			.prov_col0 = (uint64_t)r * cut,
			.prov_ncols = cut,
		};

		if (m->rule->deinterleave_cut) {
			/* sub-row k is rows 2k and 2k+1: out row j*cut/2+k = row 2k+j */
			p.tr_rows = (uint32_t)(cut / 2);
			p.tr_stride = p.tr_width = (uint32_t)(2 * rb);
			p.tr_es = (uint32_t)rb;
			p.di_rows = (uint32_t)cut;
			p.len = ne * p.ncols;
			rc = plan_push_piece(o, &p, err);
			continue;
		}
		p.nrows = t->shape[1];
		p.out_stride = (uint32_t)(ne * cut * rb);
		for (e = 0; e < ne && !rc; e++) {
			p.row0 = e * t->shape[1];
			p.len = p.nrows * p.ncols;
			o->nbytes = base + e * p.ncols;
			rc = plan_push_piece(o, &p, err);
		}
		o->nbytes = base + t->shape[1] * p.out_stride;
	}
	if (m->rule->beside) {
		shape[0] = t->shape[1];
		shape[1] = ne;
	}
	return rc;
}

/*
 * "chunks" with "interleave" (vLLM's openai_privacy_filter.py, which
 * interleaves the [gate | up] halves of GPT-OSS-style experts into gate,
 * up pairs before gpt_oss.py cuts them by tp): rank r's cut of every
 * chunk, index j of each chunk in turn.  dim 2, [E, A, B] transposed
 * (gate_up_proj [E, H, 2I]): one piece an expert and chunk, its output
 * rows (A elements each) nch rows apart, [E, nch*cut, A].  dim 1 of a
 * matrix [E, B] (gate_up_proj_bias [E, 2I]): each row's nch sub-rows
 * (the chunks, clen elements apart) transposed, [E, cut*nch], one piece
 * a rank.
 */
enum wshard_err plan_interleave_chunks(const struct wshard_plan *plan, struct group_out *g,
				       const struct member *m, const uint64_t *shp, int dim,
				       uint64_t clen, uint64_t cut, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t es = wshard_dtype_bits(t->dtype) / 8;
	uint64_t nch = (uint64_t)m->rule->chunks, e, c;
	enum wshard_err rc = WSHARD_OK;
	int r;

	if (dim == 1 && t->ndim != 2)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"interleave\" needs \"transpose\" or a matrix",
					t->name);
	for (r = 0; r < plan->tp && !rc; r++) {
		struct wshard_out_tensor *o = &g->ranks[r];
		struct wshard_piece p = {
			.kind = WSHARD_PIECE_COPY,
			.src = m->src,
			.tr_es = (unsigned)es,
			.prov_dim = (int8_t)(t->ndim - 1),
			.prov_ncols = (uint32_t)cut,
		};

		if (dim == 1) {
			p.row0 = 0;
			p.nrows = shp[0];
			p.tr_rows = (uint32_t)nch;
			p.tr_stride = (uint32_t)(clen * es);
			p.tr_width = (uint32_t)(cut * es);
			p.prov_col0 = (uint32_t)((uint64_t)r * cut);
			p.col0 = p.prov_col0 * es;
			p.ncols = (nch - 1) * clen * es + cut * es;
			p.out_ncols = nch * cut * es;
			p.len = p.nrows * p.out_ncols;
			rc = plan_push_piece(o, &p, err);
			continue;
		}
		p.nrows = 1;
		p.tr_rows = (uint32_t)shp[1];
		p.tr_stride = (uint32_t)(shp[2] * es);
		p.tr_width = (uint32_t)(cut * es);
		p.tr_ostride = (uint32_t)(nch * shp[1] * es);
		p.ncols = (p.tr_rows - 1) * (uint64_t)p.tr_stride + p.tr_width;
		p.out_ncols = (uint64_t)p.tr_rows * p.tr_width;
		p.len = p.out_ncols;
		for (e = 0; e < shp[0] && !rc; e++) {
			uint64_t base = o->nbytes;

			for (c = 0; c < nch && !rc; c++) {
				p.row0 = e;
				p.prov_col0 = (uint32_t)(c * clen + (uint64_t)r * cut);
				p.col0 = p.prov_col0 * es;
				o->nbytes = base + c * shp[1] * es;
				rc = plan_push_piece(o, &p, err);
			}
			o->nbytes = base + nch * cut * shp[1] * es;
		}
	}
	return rc;
}

/* Rule r's "permute_rows" for tensor name: the block's rows, and each
 * range [from[i], to[i]), checked to take every row of a block once. */
static enum wshard_err permute_ranges(const struct wshard_plan *plan, const struct rules_rule *r,
				      const char *name, uint64_t *block, uint64_t *from,
				      uint64_t *to, struct wshard_error *err)
{
	uint64_t seen = 0;
	size_t i, j;
	int64_t v;
	enum wshard_err rc;

	rc = expr_eval_dim(plan->config, r->permute_block, name, &v, err);
	if (rc)
		return rc;
	*block = v > 0 ? (uint64_t)v : 0;
	for (i = 0; i < r->npermute && !rc; i++) {
		rc = expr_eval_dim(plan->config, r->permute_from[i], name, &v, err);
		from[i] = v >= 0 ? (uint64_t)v : UINT64_MAX;
		if (!rc)
			rc = expr_eval_dim(plan->config, r->permute_to[i], name, &v, err);
		to[i] = v >= 0 ? (uint64_t)v : UINT64_MAX;
		if (!rc && (from[i] > to[i] || to[i] > *block))
			seen = UINT64_MAX;
		/* no two ranges overlap: with lengths summing to the block,
		 * each row is taken once */
		for (j = 0; !rc && j < i && seen != UINT64_MAX; j++)
			if (from[i] < to[i] && from[j] < to[j] && from[i] < to[j] && from[j] < to[i])
				seen = UINT64_MAX;
		if (!rc && seen != UINT64_MAX)
			seen += to[i] - from[i];
	}
	if (!rc && (*block == 0 || seen != *block))
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "tensor '%s': \"permute_rows\" ranges do not take each of the block's %llu rows once",
				      name, (unsigned long long)*block);
	return rc;
}

/*
 * A rule's "permute_rows" (vLLM's K2-Horizon loader gathers each head's q
 * and k rows so that its partial rotary channels come first,
 * _rope_weight_perm): every piece of t from such a source holds whole
 * blocks (heads, cut whole), and becomes a piece a range a block.
 */
enum wshard_err plan_permute_rows(const struct wshard_plan *plan, const struct member *m,
				  size_t n, struct wshard_out_tensor *t, struct wshard_error *err)
{
	struct wshard_out_tensor o = *t;
	uint64_t block = 0, from[RULES_PERMUTE_MAX], to[RULES_PERMUTE_MAX];
	enum wshard_err rc = WSHARD_OK;
	size_t i, j, k;

	for (j = 0; j < n && !m[j].rule->npermute; j++)
		;
	if (j == n)
		return WSHARD_OK;
	o.pieces = NULL;
	o.npieces = 0;
	o.nbytes = 0;
	for (k = 0; k < t->npieces && !rc; k++) {
		const struct wshard_piece *p = &t->pieces[k];
		const struct rules_rule *r = NULL;
		uint64_t b, rowlen;

		for (j = 0; j < n && p->kind == WSHARD_PIECE_COPY; j++)
			if (m[j].src == p->src && m[j].rule->npermute)
				r = m[j].rule;
		if (!r || !p->nrows) {
			rc = plan_push_piece(&o, p, err);
			continue;
		}
		/* vLLM folds only dense q/k (is_rope_weights_folding_supported):
		 * a quantized one it keeps as it is, which these rules do not say */
		if (!wshard_dtype_is_convertible(src_info(plan, p->src)->dtype)) {
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "tensor '%s': \"permute_rows\" on a %s tensor: vLLM reorders only F32, F16 and BF16 rows",
					      src_name(plan, p->src),
					      wshard_dtype_name(src_info(plan, p->src)->dtype));
			break;
		}
		rc = permute_ranges(plan, r, src_name(plan, p->src), &block, from, to, err);
		if (rc)
			break;
		if (p->tr_rows || p->di_rows || p->out_stride || p->pad || p->col0 ||
		    p->ncols != src_row_bytes(src_info(plan, p->src)) || p->row0 % block ||
		    p->nrows % block) {
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "tensor '%s': \"permute_rows\" needs each rank's cut in whole blocks of %llu rows",
					      src_name(plan, p->src), (unsigned long long)block);
			break;
		}
		rowlen = p->len / p->nrows;
		for (b = p->row0; b < p->row0 + p->nrows && !rc; b += block)
			for (i = 0; i < r->npermute && !rc; i++) {
				struct wshard_piece q = *p;

				q.row0 = b + from[i];
				q.nrows = to[i] - from[i];
				q.len = q.nrows * rowlen;
				rc = plan_push_piece(&o, &q, err);
			}
	}
	if (rc) {
		free(o.pieces);
		return rc;
	}
	free(t->pieces);
	t->pieces = o.pieces;
	t->npieces = o.npieces;
	t->nbytes = o.nbytes;
	return WSHARD_OK;
}

/*
 * The pieces of plan_view.c's split_transposed without "chunks", and of
 * "transpose_cols" below (plan_impl.h).
 */
enum wshard_err plan_transposed_cut(const struct wshard_plan *plan, struct group_out *g,
				    const struct member *m, const uint64_t *shp, int dim,
				    int lead, uint64_t *out, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	bool whole = m->rule->kind == RULE_REPLICATE;
	uint64_t tp = whole ? 1 : (uint64_t)plan->tp, es = wshard_dtype_bits(t->dtype) / 8;
	uint64_t a = shp[1], stride = shp[2] * es, cut;
	enum wshard_err rc = WSHARD_OK;
	int r;

	if (shp[dim] % tp)
		return plan_indivisible(plan, m, dim - 1 + lead, shp[dim], err);
	cut = shp[dim] / tp;
	out[1] = dim == 1 ? shp[2] : cut;
	out[2] = dim == 1 ? cut : a;
	for (r = 0; r < plan->tp && !rc; r++) {
		uint64_t part = whole ? 0 : (uint64_t)r;
		struct wshard_piece p = {
			.kind = WSHARD_PIECE_COPY,
			.src = m->src,
			.nrows = shp[0],
			.tr_rows = dim == 1 ? cut : a,
			.tr_stride = stride,
			.tr_width = dim == 1 ? stride : cut * es,
			.tr_es = (unsigned)es,
			.prov_col0 = part * cut,
			.prov_ncols = m->rule->transpose_cols ? shp[1] * shp[2] : cut,
			.prov_dim = dim - 1 + lead,
		};

		p.col0 = dim == 1 ? part * cut * stride : part * cut * es;
		p.ncols = (p.tr_rows - 1) * stride + p.tr_width;
		p.out_ncols = p.tr_rows * p.tr_width;
		p.len = p.nrows * p.out_ncols;
		rc = plan_push_piece(&g->ranks[r], &p, err);
	}
	return rc;
}

/*
 * "transpose_cols": BAGEL's patch embedding, a Linear over patches
 * flattened (p, p, c), which vLLM's bagel.py load_weights reshapes to
 * [O, p, p, c] and permutes to its Conv2d's [O, c, p, p]: each row
 * [p*p, c] written [c, p*p], one piece a rank ("reshape" gives the
 * dimensions).
 */
enum wshard_err plan_transposed_rows(const struct wshard_plan *plan, struct group_out *g,
				     const struct member *m, uint64_t *shape,
				     struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t shp[3], out[3];
	int64_t c;
	enum wshard_err rc;

	rc = expr_eval_dim(plan->config, m->rule->transpose_cols, t->name, &c, err);
	if (rc)
		return rc;
	if (t->ndim != 2 || c <= 0 || t->shape[1] % (uint64_t)c)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"transpose_cols\" %lld needs 2 dimensions, the second a multiple of it",
					t->name, (long long)c);
	shp[0] = t->shape[0];
	shp[1] = t->shape[1] / (uint64_t)c;
	shp[2] = (uint64_t)c;
	shape[0] = t->shape[0];
	shape[1] = t->shape[1];
	return plan_transposed_cut(plan, g, m, shp, 1, 1, out, err);
}
