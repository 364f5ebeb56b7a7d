/*
 * plan_split.c - how one item of an output is cut for every rank: a
 * plain split of one source (rows, columns, vocabulary, replicated), or
 * the parts of a fused operator (q/k/v by heads, gate/up by rows), with
 * the checks that the cut divides and falls on FP8 scale blocks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/util.h"
#include "base/dtype.h"
#include "base/fpconv.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"
#include "plan_prime.h"

/* Checks the head counts once (a layer's, where op's "kv_heads" reads n),
 * so the messages name config.json's fields (op's "kv_heads" where it has
 * one). */
enum wshard_err plan_check_heads(const struct wshard_plan *plan, const struct rules_op *op,
				 long layer, struct wshard_error *err)
{
	const struct wshard_config *c = plan->config;
	const char *kv_name = op && op->kv_heads ? op->kv_heads : "num_key_value_heads";
	int64_t kv;
	int tp = plan->tp;
	enum wshard_err rc = plan_op_kv_heads(plan, op, layer, &kv, err);

	if (rc)
		return rc;

	if (c->num_attention_heads <= 0 || c->head_dim <= 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': config.json needs num_attention_heads and head_dim (or hidden_size) to fuse q/k/v",
					plan->cat->path);
	if (c->num_attention_heads % tp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"num_attention_heads=%lld is not divisible by --tp %d",
					(long long)c->num_attention_heads, tp);
	if (kv <= 0)
		return wshard_error_set(err, WSHARD_EINVAL, "%s=%lld must be positive",
					kv_name, (long long)kv);
	if (tp <= kv && kv % tp)
		return wshard_error_set(err, WSHARD_EINVAL, "%s=%lld is not divisible by --tp %d",
					kv_name, (long long)kv, tp);
	if (tp > kv && tp % kv)
		return wshard_error_set(err, WSHARD_EINVAL,
					"--tp %d is not a multiple of %s=%lld", tp, kv_name,
					(long long)kv);
	return WSHARD_OK;
}

/*
 * Rows of one fused part that rank r holds (rows: the part's); for q/k/v
 * the heads of config.json decide, and the last of four or five parts is
 * whole on each (a fourth of five is cut as k and v are).
 */
static enum wshard_err part_rows(const struct wshard_plan *plan,
				 const struct rules_op *op, int part,
				 const struct member *m, uint64_t rows, int r,
				 uint64_t *out_row0, uint64_t *out_nrows,
				 struct wshard_error *err)
{
	const struct wshard_config *c = plan->config;
	uint64_t tp = (uint64_t)plan->tp;

	*out_row0 = *out_nrows = 0;
	if (op->kind == OP_REPLICATE ||
	    (op->kind == OP_QKV && op->nparts > 3 && part == op->nparts - 1)) {
		*out_nrows = rows;
		return WSHARD_OK;
	}
	if (op->kind == OP_QKV && part > 0) {
		int64_t kvs;
		enum wshard_err rc = plan_op_kv_heads(plan, op, m->cap.n, &kvs, err);
		uint64_t kv = (uint64_t)kvs;

		if (rc)
			return rc;
		if (tp > kv) {
			uint64_t hd = rows / kv, h = (uint64_t)r / (tp / kv);

			if (rows % kv)
				return wshard_error_set(err, WSHARD_EINVAL,
							"tensor '%s': %llu rows do not hold %s=%llu heads",
							src_name(plan, m->src), (unsigned long long)rows,
							op->kv_heads ? op->kv_heads : "num_key_value_heads",
							(unsigned long long)kv);

			*out_row0 = h * hd;
			*out_nrows = hd;
			return WSHARD_OK;
		}
	}
	if (op->groups[part]) {
		int64_t g;
		enum wshard_err rc = expr_eval_dim(c, op->groups[part], src_name(plan, m->src),
						   &g, err);

		if (rc)
			return rc;
		if (g == 1 && tp > 1) {
			*out_nrows = rows;
			return WSHARD_OK;
		}
		if (g < 1 || (uint64_t)g % tp)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': part '%s' of '%s' holds %s=%lld groups, neither 1 nor divisible by --tp %d",
						src_name(plan, m->src), op->parts[part], op->name,
						op->groups[part], (long long)g, plan->tp);
	}
	if (rows % tp)
		return plan_indivisible(plan, m, 0, rows, err);
	*out_nrows = rows / tp;
	*out_row0 = (uint64_t)r * *out_nrows;
	return WSHARD_OK;
}

/*
 * A block-wise FP8 scale (X.weight_scale_inv, DeepSeek's X.scale, Quark's
 * X.weight_scale) can be split only where the weight X.weight's split falls
 * on block boundaries: every rank's rows (a kv head's rows when heads are
 * replicated) a multiple of the block height, its columns of the block
 * width (quantization_config's weight_block_size, 128 x 128 when absent).
 */
static enum wshard_err check_blocks(const struct wshard_plan *plan,
				    const struct member *m, bool cols, uint64_t head_kv,
				    struct wshard_error *err)
{
	const char *name = src_name(plan, m->src);
	json_t *bs = json_object_get(plan_quant_config(plan), "weight_block_size");
	/* Quark's blocks are 128 x 128 (plan_quark.c) */
	const char *key = plan->quark_fp8_block ? "the quantization config's block size" :
				  "quantization_config.weight_block_size";
	uint64_t block[2] = { 128, 128 }, have, tp = (uint64_t)plan->tp;
	const struct wshard_src_tensor *w;
	char wname[1024];
	int i;

	if (!m->rule->block)
		return WSHARD_OK;
	for (i = 0; i < 2 && json_is_array(bs); i++)
		if (json_is_integer(json_array_get(bs, (size_t)i)) &&
		    json_integer_value(json_array_get(bs, (size_t)i)) > 0)
			block[i] = (uint64_t)json_integer_value(json_array_get(bs, (size_t)i));
	if (!rules_scale_weight(name, wname, sizeof(wname)))
		return WSHARD_OK;
	w = wshard_catalog_find(plan->cat, wname);
	if (!w || w->info->ndim != 2)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s' has no 2-D weight '%s' beside it", name, wname);
	if (cols) {
		have = w->info->shape[1] / tp;
		if (have % block[1])
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': each rank's %llu columns do not fall on the %llu-column blocks of '%s' (%s)",
						wname, (unsigned long long)have,
						(unsigned long long)block[1], name, key);
		return WSHARD_OK;
	}
	have = head_kv ? w->info->shape[0] / head_kv : w->info->shape[0] / tp;
	if (have % block[0])
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': each rank's %llu rows do not fall on the %llu-row blocks of '%s' (%s)",
					wname, (unsigned long long)have, (unsigned long long)block[0],
					name, key);
	return WSHARD_OK;
}


static enum wshard_err set_item_shape(const struct wshard_plan *plan,
				      struct group_out *g, const char *out,
				      const uint64_t *shape, int ndim,
				      struct wshard_error *err)
{
	if (!g->have_shape) {
		memcpy(g->shape, shape, sizeof(uint64_t) * (size_t)ndim);
		g->ndim = ndim;
		g->have_shape = true;
		return WSHARD_OK;
	}
	if (g->ndim != ndim || memcmp(g->shape, shape, sizeof(uint64_t) * (size_t)ndim))
		return wshard_error_set(err, WSHARD_EINVAL,
					"output '%s': experts have different shapes", out);
	return WSHARD_OK;
}

/* Every rank holds all rows of the source (replicated, per-tensor scale). */
static enum wshard_err replicate(const struct wshard_plan *plan, struct group_out *g,
				 const struct member *m, struct wshard_error *err)
{
	uint64_t rows = src_rows(src_info(plan, m->src));
	enum wshard_err rc = WSHARD_OK;
	int r;

	for (r = 0; r < plan->tp && !rc; r++)
		rc = plan_push_rows(plan, &g->ranks[r], m->src, 0, rows, err);
	return rc;
}

/* Rank r holds rows [r * rows / tp, (r + 1) * rows / tp), then the rule's
 * "pad_to" rows; shape[0] shrinks (or grows). */
static enum wshard_err split_rows(const struct wshard_plan *plan, struct group_out *g,
				  const struct member *m, uint64_t *shape,
				  struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t rows = src_rows(t), tp = (uint64_t)plan->tp;
	enum wshard_err rc = WSHARD_OK;
	int r;

	if (t->ndim < 1 || rows != t->shape[0])
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': cannot be split by rows (%s)", t->name,
					t->ndim < 1 ? "a scalar" : "rows are not whole bytes");
	if (m->rule->prime_heads[0])
		return plan_split_prime(plan, g, m, shape, err);
	if (m->rule->kv_heads && tp > (uint64_t)plan->config->num_key_value_heads) {
		uint64_t kv = (uint64_t)plan->config->num_key_value_heads;

		rc = plan_check_heads(plan, NULL, -1, err);
		if (rc)
			return rc;
		if (rows % kv)
			return plan_indivisible(plan, m, 0, rows, err);
		/* rank r holds kv head r / (tp / kv), as vLLM's k and v */
		shape[0] = rows / kv;
		for (r = 0; r < plan->tp && !rc; r++)
			rc = plan_push_rows(plan, &g->ranks[r], m->src,
					    (uint64_t)r / (tp / kv) * shape[0], shape[0], err);
		return rc;
	}
	if (rows % tp)
		return plan_indivisible(plan, m, 0, rows, err);
	for (r = 0; r < plan->tp && !rc; r++) {
		uint64_t n = rows / tp;

		rc = plan_push_rows(plan, &g->ranks[r], m->src, (uint64_t)r * n, n, err);
		/* "pad_to": vLLM's padded heads (DeepSeek-V4.1's sinks) */
		if (!rc)
			rc = plan_pad_rows(plan, &g->ranks[r], m, &n, err);
		shape[0] = n;
	}
	return rc;
}

/*
 * The vocabulary padded to a multiple of VOCAB_PAD rows, then split by
 * rows: the ranks past the real rows get zeros.  shape[0] is a rank's.
 */
static enum wshard_err split_vocab(const struct wshard_plan *plan, struct group_out *g,
				   const struct member *m, uint64_t *shape,
				   struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t rows = src_rows(t), rb = src_row_bytes(t);
	uint64_t padded = (rows + VOCAB_PAD - 1) / VOCAB_PAD * VOCAB_PAD, per;
	enum wshard_err rc = WSHARD_OK;
	int r;

	if (t->ndim < 1 || rows != t->shape[0])
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': a scalar cannot be split by vocabulary",
					t->name);
	if (padded % (uint64_t)plan->tp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"vocab_size=%llu padded to %llu is not divisible by --tp %d",
					(unsigned long long)rows, (unsigned long long)padded,
					plan->tp);
	per = padded / (uint64_t)plan->tp;
	shape[0] = per;
	for (r = 0; r < plan->tp && !rc; r++) {
		uint64_t lo = WSHARD_MIN((uint64_t)r * per, rows);
		uint64_t hi = WSHARD_MIN((uint64_t)r * per + per, rows);

		rc = plan_push_rows(plan, &g->ranks[r], m->src, lo, hi - lo, err);
		if (!rc)
			rc = plan_push_zeros(&g->ranks[r], (per - (hi - lo)) * rb, err);
	}
	return rc;
}

/* A plain split (row, col, vocab, replicate) of one source, one item. */
static enum wshard_err build_plain(const struct wshard_plan *plan,
				   struct group_out *g, const struct member *m,
				   struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	enum rule_kind kind = m->rule->kind;
	uint64_t shape[WSHARD_MAX_DIMS];
	int ndim = t->ndim;
	enum wshard_err rc;

	memcpy(shape, t->shape, sizeof(shape));
	/* a per-tensor scale beside a split weight: whole on every rank; so
	 * is a per-channel scale (one group) beside a column split */
	if (m->rule->scale && t->end - t->begin == wshard_dtype_bits(t->dtype) / 8)
		kind = RULE_REPLICATE;
	else if (kind == (m->rule->inout ? RULE_ROW : RULE_COL) && m->rule->grouped &&
		 (t->ndim != 2 || t->shape[m->rule->inout ? 0 : 1] == 1) &&
		 !(m->rule->inout && plan->quark_w4a16_group))	/* vLLM cuts Quark's */
		kind = RULE_REPLICATE;
	else if (plan_quark_repeats(plan, m))	/* cut once repeated */
		kind = RULE_REPLICATE;
	else if (m->rule->inout && (kind == RULE_ROW || kind == RULE_COL)) {
		rc = plan_check_inout(plan, m, kind == RULE_COL ? 1 : 0, (uint64_t)plan->tp, err);
		if (rc)
			return rc;
	} else if (kind == RULE_ROW || kind == RULE_COL) {
		rc = check_blocks(plan, m, kind == RULE_COL, 0, err);
		if (!rc && kind == RULE_COL)
			rc = plan_check_groups(plan, m, err);
		if (rc)
			return rc;
	}
	switch (kind) {
	case RULE_ROW:
		rc = split_rows(plan, g, m, shape, err);
		break;
	case RULE_COL:
		rc = plan_split_cols(plan, g, m, shape, err);
		break;
	case RULE_FIRST:
		rc = plan_split_first(plan, g, m, err);
		break;
	case RULE_VOCAB:
		rc = split_vocab(plan, g, m, shape, err);
		break;
	case RULE_REPLICATE:
		/* whole and transposed (ERNIE-4.5-VL's routers): a column
		 * split that keeps every column on every rank */
		rc = m->rule->kind == RULE_REPLICATE && m->rule->transpose ?
			     plan_split_cols(plan, g, m, shape, err) : replicate(plan, g, m, err);
		break;
	default:
		return wshard_error_set(err, WSHARD_EINVAL, "internal: unexpected rule kind");
	}
	if (!rc)
		rc = plan_view_shape(plan, m, shape, &ndim, err);
	if (rc)
		return rc;
	return set_item_shape(plan, g, m->out, shape, ndim, err);
}

/*
 * One item of a fused output: parts[p] is the source of part p and
 * part_off[p] its first row inside that source (non-zero when one source
 * packs every part); NULL for a "zero" part, part_len[p] rows of zeros
 * cut as a source of them would be.
 */
static enum wshard_err build_fused(const struct wshard_plan *plan,
				   struct group_out *g, const struct rules_op *op,
				   const struct member *const *parts,
				   const uint64_t *part_off, const uint64_t *part_len,
				   struct wshard_error *err)
{
	const struct member *m0 = plan_first_part(op, parts);
	const struct wshard_st_tensor *first = src_info(plan, m0->src);
	uint64_t shape[WSHARD_MAX_DIMS], total = 0;
	int p, p0 = 0, r, ndim = first->ndim, nparts = op->nparts;
	int64_t kv;
	bool whole = false;
	enum wshard_err rc = WSHARD_OK;

	for (p = 0; p < op->nparts; p++) {
		const struct wshard_st_tensor *t;

		if (!parts[p])		/* a "zero" part: the first's kind */
			continue;
		t = src_info(plan, parts[p]->src);

		if (t->dtype != first->dtype)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' fused into '%s' have different dtypes",
						first->name, t->name, m0->out);
		if (t->ndim != ndim || (ndim > 1 && memcmp(t->shape + 1, first->shape + 1,
							   sizeof(uint64_t) * (size_t)(ndim - 1))))
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' fused into '%s' differ beyond dimension 0",
						first->name, t->name, m0->out);
		/* Per-tensor scales (a scalar or one element) are kept whole. */
		if (ndim == 0 || (ndim == 1 && t->shape[0] == 1 && part_len[p] == 1))
			whole = true;
	}
	rc = plan_op_kv_heads(plan, op, m0->cap.n, &kv, err);
	for (p = 0; p < op->nparts && !whole && op->kind != OP_REPLICATE && !rc; p++)
		rc = !parts[p] ? WSHARD_OK : check_blocks(plan, parts[p], false,
				  op->kind == OP_QKV && p > 0 && plan->tp > kv ? (uint64_t)kv : 0,
				  err);
	if (rc)
		return rc;
	/* NVFP4 experts keep w1's and w3's input scales apart (ModelOpt's;
	 * compressed-tensors' input_global_scale is never collapsed) */
	if (whole && m0->rule->collapse && !plan_modelopt_nvfp4(plan))
		nparts = 1;
	/* Quark's INT8 keeps one input scale a linear layer: the last part's */
	if (whole && plan_one_input_scale(plan, m0))
		p0 = nparts - 1;
	for (r = 0; r < plan->tp; r++) {
		uint64_t rank_rows = 0;

		for (p = p0; p < nparts && !rc; p++) {
			uint64_t row0 = 0, nrows = 1;

			if (!whole) {
				rc = part_rows(plan, op, p, parts[p] ? parts[p] : m0,
					       part_len[p], r, &row0, &nrows, err);
				if (rc)
					return rc;
			}
			if (!parts[p])
				rc = plan_push_zeros(&g->ranks[r], nrows * src_row_bytes(first),
						     err);
			else if (parts[p]->rule->deinterleave && !whole)
				rc = plan_push_deinterleaved(plan, &g->ranks[r], parts[p],
							     part_off[p] + row0, nrows, err);
			else if (parts[p]->rule->qkv_groups && !whole)
				rc = plan_push_grouped(plan, &g->ranks[r], parts[p], kv,
						       part_off[p] + row0, nrows, err);
			else
				rc = plan_push_rows(plan, &g->ranks[r], parts[p]->src,
						    part_off[p] + row0, nrows, err);
			if (!rc && !whole && parts[p])
				rc = plan_pad_rows(plan, &g->ranks[r], parts[p], &nrows, err);
			rank_rows += nrows;
		}
		if (rc)
			return rc;
		if (r == 0)
			total = rank_rows;
	}
	memcpy(shape, first->shape, sizeof(shape));
	if (ndim == 0)
		ndim = 1;
	shape[0] = total;
	return set_item_shape(plan, g, m0->out, shape, ndim, err);
}

/*
 * One item of an operator fused along dimension 1 (GPTQ's and AWQ's
 * [in, out] tensors): each part's columns cut as build_fused cuts rows,
 * the parts side by side in every row.
 */
static enum wshard_err build_beside(const struct wshard_plan *plan,
				    struct group_out *g, const struct rules_op *op,
				    const struct member *const *parts,
				    struct wshard_error *err)
{
	const struct wshard_st_tensor *first = src_info(plan, parts[0]->src);
	uint64_t shape[WSHARD_MAX_DIMS] = { 0 }, c0[OP_MAX_PARTS], nc[OP_MAX_PARTS];
	uint32_t src[OP_MAX_PARTS];
	int64_t kv;
	enum wshard_err rc = WSHARD_OK;
	int p, r;

	for (p = 0; p < op->nparts; p++) {
		const struct wshard_st_tensor *t = src_info(plan, parts[p]->src);

		if (t->dtype != first->dtype || t->ndim != 2 || t->shape[0] != first->shape[0] ||
		    wshard_dtype_bits(t->dtype) % 8)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' fused into '%s' differ in dtype or in dimension 0",
						first->name, t->name, parts[0]->out);
		src[p] = parts[p]->src;
		if (op->kind == OP_REPLICATE)
			continue;
		/* k and v with fewer kv heads than ranks: a head a rank */
		rc = plan_op_kv_heads(plan, op, parts[p]->cap.n, &kv, err);
		if (!rc)
			rc = plan_check_inout(plan, parts[p], 1,
					      op->kind == OP_QKV && p > 0 && plan->tp > kv ?
					      (uint64_t)kv : (uint64_t)plan->tp, err);
		if (rc)
			return rc;
	}
	for (r = 0; r < plan->tp && !rc; r++) {
		uint64_t cols = 0;

		for (p = 0; p < op->nparts && !rc; p++) {
			rc = part_rows(plan, op, p, parts[p], src_info(plan, src[p])->shape[1], r,
				       &c0[p], &nc[p], err);
			cols += nc[p];
		}
		if (!rc)
			rc = plan_push_side_by_side(plan, &g->ranks[r], (size_t)op->nparts, src,
						    c0, nc, err);
		if (r == 0)
			shape[1] = cols;
	}
	if (rc)
		return rc;
	shape[0] = first->shape[0];
	return set_item_shape(plan, g, parts[0]->out, shape, 2, err);
}

/* The parts of one item from its members (FUSE) or its one source (UNPACK). */
enum wshard_err plan_build_item(const struct wshard_plan *plan,
				const struct wshard_rules *rules,
				struct group_out *g, const struct member *m,
				size_t n, struct wshard_error *err)
{
	const struct rules_rule *rule = m[0].rule;
	const struct member *parts[OP_MAX_PARTS] = { 0 };
	uint64_t off[OP_MAX_PARTS] = { 0 }, len[OP_MAX_PARTS] = { 0 };
	const struct rules_op *op;
	enum wshard_err rc;
	size_t i;

	for (i = 1; i < n; i++)
		if (m[i].rule->kind != RULE_FUSE || rule->kind != RULE_FUSE ||
		    m[i].rule->op != rule->op)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' both produce '%s' and are not parts of one fused operator",
						src_name(plan, m[0].src), src_name(plan, m[i].src),
						m[0].out);
	if (rule->kind != RULE_FUSE && rule->kind != RULE_UNPACK)
		return build_plain(plan, g, &m[0], err);
	op = &rules->ops[rule->op];
	if (op->kind == OP_QKV) {
		rc = plan_check_heads(plan, op, m[0].cap.n, err);
		if (rc)
			return rc;
	}
	rc = plan_fused_parts(plan, rules, m, n, parts, off, len, err);
	if (rc)
		return rc;
	if (rule->inout)
		return build_beside(plan, g, op, parts, err);
	return build_fused(plan, g, op, parts, off, len, err);
}
