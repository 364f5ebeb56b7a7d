/*
 * plan_concat.c - a rule's "concat": the sources its {e} matches are
 * consecutive row ranges of one tensor stored in pieces, {e} from 0
 * (Qwen4-Exp's n-gram embedding, ngram_embedding.shard_0 .. shard_{P-1}
 * of split_ngram_parts, which transformers concatenates when it loads
 * them and vLLM loads by their row offsets).  The whole is split as the
 * rule says, each rank's rows taken from the pieces they lie in, so a
 * rank's share may start in one source and end in another.
 */
#include <string.h>

#include "wshard.h"
#include "base/util.h"
#include "source/catalog.h"
#include "plan_impl.h"

/* The rows of the pieces m[0..n) together to *out_total, each piece
 * checked: the rule's own, {e} counting from 0, the dtype and dimensions
 * past the first of m[0]'s. */
static enum wshard_err check_pieces(const struct wshard_plan *plan, const struct member *m,
				    size_t n, uint64_t *out_total, struct wshard_error *err)
{
	const struct wshard_st_tensor *first = src_info(plan, m[0].src);
	size_t i;

	*out_total = 0;
	for (i = 0; i < n; i++) {
		const struct wshard_st_tensor *t = src_info(plan, m[i].src);

		if (m[i].rule != m[0].rule)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' both produce '%s'",
						src_name(plan, m[0].src), src_name(plan, m[i].src),
						m[0].out);
		if (m[i].cap.e != (long)i)
			return wshard_error_set(err, WSHARD_EINVAL,
						"output '%s': piece %zu of its rows is missing (next is '%s')",
						m[0].out, i, src_name(plan, m[i].src));
		if (t->ndim < 1 || t->dtype != first->dtype || t->ndim != first->ndim ||
		    memcmp(t->shape + 1, first->shape + 1,
			   sizeof(uint64_t) * (size_t)(first->ndim > 0 ? first->ndim - 1 : 0)))
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' concatenated into '%s' differ in dtype or beyond dimension 0",
						first->name, t->name, m[0].out);
		*out_total += t->shape[0];
	}
	return WSHARD_OK;
}

/* The data bytes of the pieces m[0..n). */
static uint64_t concat_bytes(const struct wshard_plan *plan, const struct member *m,
				  size_t n)
{
	uint64_t bytes = 0;

	while (n--)
		bytes += src_info(plan, m[n].src)->end - src_info(plan, m[n].src)->begin;
	return bytes;
}

/* Rows [lo, hi) of the concatenation of m[0..n) to t, zeros past its end. */
static enum wshard_err push_range(const struct wshard_plan *plan, struct wshard_out_tensor *t,
				  const struct member *m, size_t n, uint64_t lo, uint64_t hi,
				  uint64_t total, uint64_t row_bytes, struct wshard_error *err)
{
	uint64_t start = 0;
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	for (i = 0; i < n && !rc; i++) {
		uint64_t rows = src_info(plan, m[i].src)->shape[0];
		uint64_t a = WSHARD_MAX(lo, start), b = WSHARD_MIN(hi, start + rows);

		if (a < b)
			rc = plan_push_rows(plan, t, m[i].src, a - start, b - a, err);
		start += rows;
	}
	if (!rc && hi > total)
		rc = plan_push_zeros(t, (hi - WSHARD_MAX(lo, total)) * row_bytes, err);
	return rc;
}

enum wshard_err plan_split_concat(const struct wshard_plan *plan, struct group_out *g,
				  const struct member *m, size_t n, struct wshard_error *err)
{
	const struct wshard_st_tensor *first = src_info(plan, m[0].src);
	uint64_t total, padded, per, row_bytes;
	uint64_t tp = (uint64_t)plan->tp;
	enum wshard_err rc;
	int r;

	rc = check_pieces(plan, m, n, &total, err);
	if (rc)
		return rc;
	row_bytes = total ? concat_bytes(plan, m, n) / total : 0;
	if (m[0].rule->kind == RULE_REPLICATE) {
		padded = per = total;
	} else {
		padded = m[0].rule->kind == RULE_VOCAB ?
				 (total + VOCAB_PAD - 1) / VOCAB_PAD * VOCAB_PAD :
				 total;
		if (padded % tp)
			return wshard_error_set(err, WSHARD_EINVAL,
						"output '%s': its %llu rows (from '%s' on) are not divisible by --tp %d",
						m[0].out, (unsigned long long)padded, first->name,
						plan->tp);
		per = padded / tp;
	}
	for (r = 0; r < plan->tp && !rc; r++) {
		uint64_t lo = m[0].rule->kind == RULE_REPLICATE ? 0 : (uint64_t)r * per;

		rc = push_range(plan, &g->ranks[r], m, n, lo, lo + per, total, row_bytes, err);
	}
	memcpy(g->shape, first->shape, sizeof(g->shape));
	g->shape[0] = per;
	g->ndim = first->ndim;
	g->have_shape = true;
	return rc;
}
