/*
 * plan_view.c - splits that see a source or an output through a view:
 * a "col" split of the dimension after a rule's leading "rows"
 * dimensions (GPT-OSS's MXFP4 down_proj blocks, [E, H, I/32, 16] cut in
 * dimension 2, one piece a rank as E*H rows), the output's "view"
 * (trailing dimensions merged: the blocks' [.., H/32, 16] written as
 * [.., H/2], header only), "first" (whole on rank 0, zeros on the
 * others: vLLM loads GPT-OSS's down_proj bias on rank 0 alone), and a
 * "transpose"d "col" split (GPT-OSS's BF16 experts, each expert's matrix
 * swapped: transposed pieces, copied by transpose.c; with "chunks",
 * Llama 4's gate_up_proj, the cut dimension's parts cut each, two pieces
 * an expert; with "experts" under --expert-parallel, a rank's own experts
 * whole), "chunks" without a transpose (Granite MoE's input_linear
 * [E, 2I, H], each expert's gate and up rows cut each), and a fused
 * part's "deinterleave" (Llama 4's q/k heads, even rows first: a
 * transposed piece whose elements are rows), and a q/k/v source
 * stored by kv head ("qkv_groups": Falcon's and Bloom's query_key_value).
 */
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/util.h"
#include "base/dtype.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"

uint64_t wshard_plan_src_rows(const struct wshard_plan *plan, uint32_t src)
{
	if (plan->view_rows && plan->view_rows[src])
		return plan->view_rows[src];
	return wshard_matrix_rows(plan->cat->tensors[src].info);
}

int wshard_plan_src_row_dims(const struct wshard_plan *plan, uint32_t src)
{
	const struct wshard_st_tensor *t = plan->cat->tensors[src].info;
	uint64_t rows = 1;
	int k;

	if (!plan->view_rows || !plan->view_rows[src])
		return 0;
	/* the view_rows are the product of the first "rows" dimensions */
	for (k = 0; k < t->ndim && rows < plan->view_rows[src]; k++)
		rows *= t->shape[k];
	return k;
}

static enum wshard_err set_view_rows(struct wshard_plan *plan, uint32_t src, uint64_t rows,
				     struct wshard_error *err)
{
	if (!plan->view_rows) {
		plan->view_rows = calloc(plan->cat->ntensors + 1, sizeof(uint64_t));
		if (!plan->view_rows)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	plan->view_rows[src] = rows;
	return WSHARD_OK;
}

/*
 * A "deinterleave"d source seen as its blocks: one row a block, so that
 * every window the stream reads holds whole blocks.  A per-tensor scale
 * (one element) is kept whole, as vLLM does not permute it.
 */
static enum wshard_err set_deinterleave_view(struct wshard_plan *plan, const struct member *m,
					     struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	enum wshard_err rc;
	int64_t block;

	if (t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1))
		return WSHARD_OK;
	rc = expr_eval_dim(plan->config, m->rule->deinterleave, t->name, &block, err);
	if (rc)
		return rc;
	if (m->rule->block)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': a block-wise scale cannot be deinterleaved (vLLM reorders its weight's rows one by one)",
					t->name);
	if (t->ndim > 2 || block < 2 || block % 2 || t->shape[0] % (uint64_t)block ||
	    src_row_bytes(t) * 2 > UINT32_MAX)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"deinterleave\": its %llu rows are not blocks of an even %lld (1 or 2 dimensions)",
					t->name, (unsigned long long)t->shape[0], (long long)block);
	return set_view_rows(plan, m->src, t->shape[0] / (uint64_t)block, err);
}

enum wshard_err plan_set_views(struct wshard_plan *plan, const struct member *m, size_t n,
			       struct wshard_error *err)
{
	enum wshard_err rc;
	size_t i;
	int d;

	for (i = 0; i < n; i++) {
		const struct wshard_st_tensor *t = src_info(plan, m[i].src);
		uint64_t rows = 1;

		if (m[i].rule->deinterleave) {
			rc = set_deinterleave_view(plan, &m[i], err);
			if (rc)
				return rc;
			continue;
		}
		/* a transposed matrix is one row (an expert of one) */
		if (m[i].rule->transpose && t->ndim == 2 && !m[i].rule->transpose_cols) {
			rc = set_view_rows(plan, m[i].src, 1, err);
			if (rc)
				return rc;
			continue;
		}
		/* a transposed split keeps its rows: "rows" picks its cut */
		if (m[i].rule->rows < 2 || m[i].rule->kind != RULE_COL || m[i].rule->transpose)
			continue;
		/* the column dimension must follow the rows */
		if (t->ndim <= m[i].rule->rows)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': \"rows\": %d needs more than %d dimensions",
						t->name, m[i].rule->rows, m[i].rule->rows);
		for (d = 0; d < m[i].rule->rows; d++)
			rows *= t->shape[d];
		if (!rows)
			continue;
		rc = set_view_rows(plan, m[i].src, rows, err);
		if (rc)
			return rc;
	}
	return WSHARD_OK;
}

enum wshard_err plan_push_deinterleaved(const struct wshard_plan *plan,
					struct wshard_out_tensor *t, const struct member *m,
					uint64_t row0, uint64_t nrows,
					struct wshard_error *err)
{
	const struct wshard_st_tensor *info = src_info(plan, m->src);
	uint64_t blocks = wshard_plan_src_rows(plan, m->src), rb = src_row_bytes(info), di;
	struct wshard_piece p = { .kind = WSHARD_PIECE_COPY, .src = m->src };

	/* a per-tensor scale has no view: kept whole */
	if (!plan->view_rows || !plan->view_rows[m->src])
		return plan_push_rows(plan, t, m->src, row0, nrows, err);
	di = src_rows(info) / blocks;
	if (di * rb > UINT32_MAX)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"deinterleave\" blocks of %llu bytes are over 4 GiB",
					info->name, (unsigned long long)(di * rb));
	if (row0 % di || nrows % di)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': rows [%llu, %llu) cut its \"deinterleave\" blocks of %llu rows",
					info->name, (unsigned long long)row0,
					(unsigned long long)(row0 + nrows), (unsigned long long)di);
	p.row0 = row0 / di;
	p.nrows = nrows / di;
	p.ncols = di * rb;
	/* sub-row k is rows 2k and 2k+1 of a block: out row j*di/2+k = row 2k+j */
	p.tr_rows = di / 2;
	p.tr_stride = 2 * rb;
	p.tr_width = 2 * rb;
	p.tr_es = (unsigned)rb;
	p.di_rows = di;
	p.out_ncols = di * rb;
	p.len = nrows * rb;
	return plan_push_piece(t, &p, err);
}

/*
 * vLLM regroups such a source before it cuts q, k and v (falcon.py's
 * load_weights views it as [kv, q/kv + 2, head_dim]; bloom.py's
 * _repack_qkv as [heads, 3, head_dim], a group a head; TeleChat2's
 * _split_key_value a k+v source as [kv, 2, head_dim]).  In the
 * regrouped order q head i lies in group i / (q/kv), k or v head j in
 * group j.
 */
enum wshard_err plan_push_grouped(const struct wshard_plan *plan,
				  struct wshard_out_tensor *t, const struct member *m,
				  int64_t kv, uint64_t row0, uint64_t nrows,
				  struct wshard_error *err)
{
	uint64_t hd = (uint64_t)plan->config->head_dim;
	/* a fused k+v source holds no q heads: [kv, 2, head_dim] */
	uint64_t h = m->rule->kind == RULE_FUSE ? 0 :
		     (uint64_t)plan->config->num_attention_heads;
	uint64_t end = row0 + nrows, at = row0, q;
	enum wshard_err rc = WSHARD_OK;

	if (kv <= 0 || h % (uint64_t)kv || !hd)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"qkv_groups\": num_attention_heads=%llu is not a multiple of its %lld kv heads",
					src_name(plan, m->src), (unsigned long long)h, (long long)kv);
	q = h / (uint64_t)kv;
	while (at < end && !rc) {
		uint64_t head = at / hd, in = at % hd, src, run;

		if (head < h) {
			/* a group's q heads lie together */
			src = (head / q * (q + 2) + head % q) * hd + in;
			run = (q - head % q) * hd - in;
		} else {
			uint64_t j = head - h, slot = q;

			if (j >= (uint64_t)kv) {
				j -= (uint64_t)kv;
				slot = q + 1;
			}
			src = (j * (q + 2) + slot) * hd + in;
			run = hd - in;
		}
		if (run > end - at)
			run = end - at;
		rc = plan_push_rows(plan, t, m->src, src, run, err);
		at += run;
	}
	return rc;
}

/*
 * The part length and each rank's cut of dimension dim of m's source,
 * which holds the rule's "chunks" equal parts, each cut by tp; refused
 * under --expert-parallel (dimension 0 is not known to count the experts
 * a rank would keep whole: that takes "experts") and when either does not
 * divide.
 */
static enum wshard_err chunk_cut(const struct wshard_plan *plan, const struct member *m,
				 const uint64_t *shp, int dim, uint64_t *clen, uint64_t *cut,
				 struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t nch = (uint64_t)m->rule->chunks;
	/* the dimension as the source counts it (a matrix has no experts) */
	int sd = dim - (3 - (t->ndim < 3 ? t->ndim : 3));

	if (plan->opt.expert_parallel && t->ndim > 2)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': --expert-parallel needs \"experts\" (and \"transpose\") on a rule with \"chunks\"",
					t->name);
	if (shp[dim] % nch)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': dimension %d (%llu) is not %llu equal \"chunks\"",
					t->name, sd, (unsigned long long)shp[dim],
					(unsigned long long)nch);
	*clen = shp[dim] / nch;
	if (*clen % (uint64_t)plan->tp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': dimension %d holds %llu \"chunks\" of %llu, not divisible by --tp %d",
					t->name, sd, (unsigned long long)nch,
					(unsigned long long)*clen, plan->tp);
	*cut = *clen / (uint64_t)plan->tp;
	return WSHARD_OK;
}

/*
 * A source [E, A, B, ...] whose dimension dim holds "chunks" equal parts,
 * each cut by tp; rank r's expert e holds its cut of every part in order.
 * dim 2 (Llama 4's gate_up_proj [E, H, 2I]: gate, then up): each expert's
 * matrix transposed, [E, chunks*B/chunks/tp, A] (vLLM's
 * load_moe_expert_weights: transpose, then chunk(2, dim=-2), w1 and w3
 * each narrowed by tp).  dim 1 (Granite MoE's input_linear [E, 2I, H]):
 * as it is, [E, chunks*A/chunks/tp, ...] (vLLM's granitemoe.py: chunk(2,
 * dim=1)), inner the bytes of one index of dimension 1.  One piece per
 * expert and part.
 */
static enum wshard_err split_chunks(const struct wshard_plan *plan, struct group_out *g,
				    const struct member *m, const uint64_t *shp, int dim,
				    uint64_t inner, uint64_t *shape, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t es = wshard_dtype_bits(t->dtype) / 8;
	uint64_t nch = (uint64_t)m->rule->chunks, clen = 0, cut = 0, e, c;
	enum wshard_err rc;
	int r;

	rc = chunk_cut(plan, m, shp, dim, &clen, &cut, err);
	if (rc)
		return rc;
	shape[1] = nch * cut;
	if (dim == 2)
		shape[2] = shp[1];
	if (m->rule->interleave)
		return plan_interleave_chunks(plan, g, m, shp, dim, clen, cut, err);
	for (r = 0; r < plan->tp && !rc; r++)
		for (e = 0; e < shp[0] && !rc; e++)
			for (c = 0; c < nch && !rc; c++) {
				struct wshard_piece p = {
					.kind = WSHARD_PIECE_COPY,
					.src = m->src,
					.row0 = e,
					.nrows = 1,
					.prov_col0 = c * clen + (uint64_t)r * cut,
					.prov_ncols = cut,
				};

				if (dim == 2) {
					p.tr_rows = shp[1];
					p.tr_stride = shp[2] * es;
					p.tr_width = cut * es;
					p.tr_es = (unsigned)es;
					p.prov_dim = t->ndim - 1;
					p.col0 = p.prov_col0 * es;
					p.ncols = (p.tr_rows - 1) * p.tr_stride + p.tr_width;
					p.out_ncols = p.tr_rows * p.tr_width;
					p.len = p.out_ncols;
				} else {
					p.col0 = p.prov_col0 * inner;
					p.ncols = cut * inner;
					p.len = p.ncols;
				}
				rc = plan_push_piece(&g->ranks[r], &p, err);
			}
	return rc;
}

/*
 * The pieces of --expert-parallel with "experts": rank r's experts whole,
 * in ascending order of their index, one piece a rank for the linear
 * placement and one an expert for round_robin.  An expert is per source
 * rows; tmpl gives each piece's columns (a transposed piece's fields too).
 */
static enum wshard_err push_rank_experts(const struct wshard_plan *plan,
					 struct group_out *g, const struct member *m,
					 uint64_t per, const struct wshard_piece *tmpl,
					 struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	long ne = (long)t->shape[0], first, step, n, i;
	enum wshard_err rc = WSHARD_OK;
	int r;

	/* vLLM would give the ranks past the experts none */
	if (t->shape[0] < (uint64_t)plan->tp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"--expert-parallel: tensor '%s' holds %llu experts for %d ranks (each rank needs one)",
					t->name, (unsigned long long)t->shape[0], plan->tp);
	for (r = 0; r < plan->tp && !rc; r++) {
		n = wshard_expert_range(ne, plan->tp, r, plan->placement, &first, &step);
		for (i = 0; i < n && !rc; i += step == 1 ? n : 1) {
			struct wshard_piece p = *tmpl;

			p.kind = WSHARD_PIECE_COPY;
			p.src = m->src;
			p.row0 = (uint64_t)(first + i * step) * per;
			p.nrows = (step == 1 ? (uint64_t)n : 1) * per;
			p.len = p.nrows * (p.out_ncols ? p.out_ncols : p.ncols);
			rc = plan_push_piece(&g->ranks[r], &p, err);
		}
	}
	return rc;
}

/*
 * Expert parallelism on a 3-D source [E, A, B] whose dimension 0 counts
 * the experts ("experts"): rank r keeps its own experts whole, each
 * transposed, [E_r, B, A], in ascending expert order.  That is vLLM
 * 0.32's load_moe_expert_weights under an expert_map: the whole tensor
 * transposed (gate_up_proj chunked into gate and up, which is the
 * transposed matrix's first and second halves of rows), indexed by the
 * rank's global expert ids, and loaded whole (FusedMoE.weight_loader's
 * full_load; the MoE's tp size is 1, so _load_w13 and _load_w2 narrow
 * nothing).  shape[0] stays E: the plan gives each rank its count.
 */
static enum wshard_err split_transposed_ep(const struct wshard_plan *plan,
					   struct group_out *g, const struct member *m,
					   int dim, uint64_t *shape, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t es = wshard_dtype_bits(t->dtype) / 8, a = t->shape[1];
	uint64_t stride = t->shape[2] * es;
	struct wshard_piece p = {
		.tr_rows = a,
		.tr_stride = stride,
		.tr_width = stride,
		.tr_es = (unsigned)es,
		.prov_dim = dim,
		.ncols = a * stride,
		.out_ncols = a * stride,
	};

	shape[1] = t->shape[2];
	shape[2] = a;
	return push_rank_experts(plan, g, m, 1, &p, err);
}

/*
 * A 3-D source [E, A, B] cut in dimension dim (1 or 2) and each expert's
 * matrix transposed: rank r's [E, B, A/tp] or [E, B/tp, A], one piece
 * a rank whose rows are the experts (a whole expert is in every window).
 * A 2-D source [A, B] is one expert, [1, A, B], written [B, A/tp] or
 * [B/tp, A]: GPT-2's Conv1D weights, which transformers keeps input
 * dimension first (vLLM's gpt2.py transposes them on loading); its one
 * row is the whole matrix (plan_set_views).
 */
static enum wshard_err split_transposed(const struct wshard_plan *plan, struct group_out *g,
					const struct member *m, int dim, uint64_t *shape,
					struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t es = wshard_dtype_bits(t->dtype) / 8;
	uint64_t shp[3], out[3];
	enum wshard_err rc;
	int lead;

	if ((t->ndim != 3 && t->ndim != 2) || !es || wshard_dtype_bits(t->dtype) % 8)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"transpose\" needs 2 or 3 dimensions of whole-byte elements",
					t->name);
	lead = t->ndim - 2;
	shp[0] = lead ? t->shape[0] : 1;
	shp[1] = t->shape[lead];
	shp[2] = t->shape[lead + 1];
	if (m->rule->transpose_cols)
		return plan_transposed_rows(plan, g, m, shape, err);
	/* a transposed piece counts its sub-rows and their bytes in 32 bits */
	if (shp[1] > UINT32_MAX || shp[2] * es > UINT32_MAX)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"transpose\" of a matrix with over 2^32 rows or 4 GiB rows",
					t->name);
	if (plan->opt.expert_parallel && m->rule->experts && m->rule->kind != RULE_REPLICATE) {
		if (!lead)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': \"experts\" needs 3 dimensions (experts first)",
						t->name);
		return split_transposed_ep(plan, g, m, dim, shape, err);
	}
	memcpy(out, shp, sizeof(out));
	rc = m->rule->chunks > 1 ? split_chunks(plan, g, m, shp, 2, 0, out, err)
				 : plan_transposed_cut(plan, g, m, shp, dim, lead, out, err);
	memcpy(shape, out + 1 - lead, (size_t)t->ndim * sizeof(uint64_t));
	return rc;
}

/*
 * "experts" on a column split of experts stacked as vLLM holds them
 * ([E, ...], Gemma 4's): each expert as the source holds it, its rows (with
 * "rows", several view rows an expert) whole; nothing is cut, so "chunks"
 * stay in order.  The rank's first dimension is set by the plan's shape.
 */
static enum wshard_err split_experts_ep(const struct wshard_plan *plan,
					struct group_out *g, const struct member *m,
					struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t rows = wshard_plan_src_rows(plan, m->src);
	struct wshard_piece p = { 0 };

	if (t->ndim < 3 || !t->shape[0] || rows % t->shape[0])
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"experts\" needs 3 dimensions (experts first)",
					t->name);
	p.ncols = (t->end - t->begin) / rows;
	return push_rank_experts(plan, g, m, rows / t->shape[0], &p, err);
}

enum wshard_err plan_split_cols(const struct wshard_plan *plan, struct group_out *g,
				const struct member *m, uint64_t *shape,
				struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t tp = (uint64_t)plan->tp, cols, inner = 1, padded;
	uint64_t bits = wshard_dtype_bits(t->dtype);
	int lead = m->rule->rows > 1 ? m->rule->rows : 1, d, r;
	enum wshard_err rc = WSHARD_OK;

	if (m->rule->transpose)
		return split_transposed(plan, g, m, lead, shape, err);
	if (plan->opt.expert_parallel && m->rule->experts)
		return split_experts_ep(plan, g, m, err);
	if (t->ndim < lead + 1)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': a column split needs %d or more dimensions",
					t->name, lead + 1);
	cols = t->shape[lead];
	for (d = lead + 1; d < t->ndim; d++)
		inner *= t->shape[d];
	if (m->rule->interleave && t->ndim == 2 && bits % 8 == 0) {
		uint64_t clen, cut;

		rc = chunk_cut(plan, m, t->shape, 1, &clen, &cut, err);
		if (rc)
			return rc;
		shape[1] = (uint64_t)m->rule->chunks * cut;
		return plan_interleave_chunks(plan, g, m, t->shape, 1, clen, cut, err);
	}
	if (m->rule->chunks > 1 && (t->ndim < 3 || (inner * bits) % 8))
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"chunks\" without \"transpose\" needs 3 or more dimensions of whole-byte rows",
					t->name);
	if (m->rule->chunks > 1)
		return split_chunks(plan, g, m, t->shape, 1, inner * bits / 8, shape, err);
	if (cols % tp)
		return plan_indivisible(plan, m, lead, cols, err);
	shape[lead] = cols / tp;
	if ((shape[lead] * inner * bits) % 8)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': a column split of %s would cut a byte",
					t->name, wshard_dtype_name(t->dtype));
	if (m->rule->deinterleave_cut || m->rule->beside)
		return plan_split_reordered(plan, g, m, shape, inner * bits / 8, err);
	rc = plan_pad_share(plan, m, shape[lead], &padded, err);
	if (!rc && (padded - shape[lead]) * inner * bits / 8 > UINT32_MAX)
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "tensor '%s': \"pad_to\" pads each row by too many bytes",
				      t->name);
	for (r = 0; r < plan->tp && !rc; r++) {
		struct wshard_piece p = {
			.kind = WSHARD_PIECE_COPY,
			.src = m->src,
			.row0 = 0,
			.nrows = wshard_plan_src_rows(plan, m->src),
			.ncols = shape[lead] * inner * bits / 8,
			.prov_col0 = (uint64_t)r * shape[lead],
			.prov_ncols = shape[lead],
			.pad = (uint32_t)((padded - shape[lead]) * inner * bits / 8),
		};

		p.col0 = (uint64_t)r * p.ncols;
		p.len = p.nrows * (p.ncols + p.pad);
		rc = plan_push_piece(&g->ranks[r], &p, err);
	}
	shape[lead] = padded;
	return rc;
}

enum wshard_err plan_split_first(const struct wshard_plan *plan, struct group_out *g,
				 const struct member *m, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	enum wshard_err rc;
	int r;

	rc = plan_push_rows(plan, &g->ranks[0], m->src, 0, src_rows(t), err);
	for (r = 1; r < plan->tp && !rc; r++)
		rc = plan_push_zeros(&g->ranks[r], t->end - t->begin, err);
	return rc;
}

enum wshard_err plan_view_shape(const struct wshard_plan *plan, const struct member *m,
				uint64_t *shape, int *ndim, struct wshard_error *err)
{
	int v = m->rule->view, d;
	uint64_t n = 1, k = 1;

	if (m->rule->nreshape) {
		uint64_t to[WSHARD_MAX_DIMS];

		for (d = 0; d < *ndim; d++)
			n *= shape[d];
		for (d = 0; d < m->rule->nreshape; d++) {
			int64_t x;
			enum wshard_err rc = expr_eval_dim(plan->config, m->rule->reshape[d], m->out,
							   &x, err);

			if (rc)
				return rc;
			if (x <= 0)
				return wshard_error_set(err, WSHARD_EINVAL,
							"output '%s': \"reshape\" dimension %d is %lld",
							m->out, d, (long long)x);
			to[d] = (uint64_t)x;
			k *= to[d];
		}
		if (k != n)
			return wshard_error_set(err, WSHARD_EINVAL,
						"output '%s': \"reshape\" to %llu elements, a rank holds %llu",
						m->out, (unsigned long long)k, (unsigned long long)n);
		memcpy(shape, to, sizeof(to[0]) * (size_t)m->rule->nreshape);
		*ndim = m->rule->nreshape;
		return WSHARD_OK;
	}
	if (!v || v == *ndim)
		return WSHARD_OK;
	if (v > *ndim)
		return wshard_error_set(err, WSHARD_EINVAL,
					"output '%s': \"view\": %d needs %d or more dimensions, it has %d",
					m->out, v, v, *ndim);
	for (d = v; d < *ndim; d++)
		shape[v - 1] *= shape[d];
	*ndim = v;
	return WSHARD_OK;
}
