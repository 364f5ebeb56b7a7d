/*
 * plan_piece.c - the pieces every planner file builds an output tensor
 * from: a source's whole rows, zero bytes, a constant, any piece appended
 * at the tensor's end, and the error for a split that does not divide.  It calls
 * no other file of the planner: they all build on it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/fpconv.h"
#include "source/safetensors.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"

enum wshard_err plan_push_piece(struct wshard_out_tensor *t,
				const struct wshard_piece *p,
				struct wshard_error *err)
{
	struct wshard_piece *pieces = t->pieces;
	size_t n = t->npieces;

	if (p->len == 0)
		return WSHARD_OK;
	/*
	 * Room doubles when the count reaches a power of two (a stacked
	 * output has a piece per expert: growing by one copied them all each
	 * time); plan_build.c's rank_push gives back what is left over.
	 */
	if ((n & (n - 1)) == 0) {
		pieces = realloc(t->pieces, (n ? 2 * n : 1) * sizeof(*pieces));
		if (!pieces)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		t->pieces = pieces;
	}
	pieces[t->npieces] = *p;
	pieces[t->npieces].dst = t->nbytes;
	if (!p->out_ncols)
		pieces[t->npieces].out_ncols = p->ncols;
	t->nbytes += p->len;
	t->npieces++;
	return WSHARD_OK;
}

enum wshard_err plan_push_rows(const struct wshard_plan *plan,
			       struct wshard_out_tensor *t, uint32_t src,
			       uint64_t row0, uint64_t nrows,
			       struct wshard_error *err)
{
	const struct wshard_st_tensor *info = src_info(plan, src);
	struct wshard_piece p = {
		.kind = WSHARD_PIECE_COPY,
		.src = src,
		.row0 = row0,
		.nrows = nrows,
		.col0 = 0,
		.ncols = src_row_bytes(info),
	};

	p.len = p.nrows * p.ncols;
	return plan_push_piece(t, &p, err);
}

enum wshard_err plan_push_side_by_side(const struct wshard_plan *plan,
				       struct wshard_out_tensor *t, size_t n,
				       const uint32_t *src, const uint64_t *col0,
				       const uint64_t *ncols, struct wshard_error *err)
{
	uint64_t rows = src_rows(src_info(plan, src[0])), row = 0, at = 0, base = t->nbytes;
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	for (i = 0; i < n; i++)
		row += ncols[i] * (wshard_dtype_bits(src_info(plan, src[i])->dtype) / 8);
	if (row > UINT32_MAX)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': a fused row of %llu bytes is too long",
					src_name(plan, src[0]), (unsigned long long)row);
	for (i = 0; i < n && !rc; i++) {
		uint64_t es = wshard_dtype_bits(src_info(plan, src[i])->dtype) / 8;
		struct wshard_piece p = {
			.kind = WSHARD_PIECE_COPY,
			.src = src[i],
			.row0 = 0,
			.nrows = rows,
			.col0 = col0[i] * es,
			.ncols = ncols[i] * es,
			.prov_col0 = (uint32_t)col0[i],
			.prov_ncols = (uint32_t)ncols[i],
			.out_stride = (uint32_t)row,
		};

		p.len = rows * p.ncols;
		/* each part starts where its columns do in the first row */
		t->nbytes = base + at;
		rc = plan_push_piece(t, &p, err);
		at += p.ncols;
	}
	t->nbytes = base + rows * row;
	return rc;
}

enum wshard_err plan_push_zeros(struct wshard_out_tensor *t, uint64_t len,
				struct wshard_error *err)
{
	struct wshard_piece p = { .kind = WSHARD_PIECE_ZERO, .len = len };

	return plan_push_piece(t, &p, err);
}

enum wshard_err plan_pad_share(const struct wshard_plan *plan, const struct member *m,
			       uint64_t share, uint64_t *out, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	enum wshard_err rc;
	int64_t to;

	*out = share;
	if (!m->rule->pad_to || (plan->tp == 1 && !m->rule->pad_always))
		return WSHARD_OK;
	rc = expr_eval_dim(plan->config, m->rule->pad_to, t->name, &to, err);
	if (rc || to <= 0 || (uint64_t)to <= share)
		return rc;
	if (t->dtype != WSHARD_BF16 && t->dtype != WSHARD_F16 && t->dtype != WSHARD_F32)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': %s padded from %llu to %lld a rank at --tp %d is not written (only BF16, F16 and F32 are)",
					t->name, wshard_dtype_name(t->dtype), (unsigned long long)share,
					(long long)to, plan->tp);
	*out = (uint64_t)to;
	return WSHARD_OK;
}

/* len bytes of padding after m's rows: zeros, or the rule's "pad_value"
 * (a CONST piece in m's source dtype, which plan_pad_share has checked). */
static enum wshard_err push_pad(const struct wshard_plan *plan, struct wshard_out_tensor *t,
				const struct member *m, uint64_t len, struct wshard_error *err)
{
	struct wshard_piece p;

	if (!m->rule->has_pad_value)
		return plan_push_zeros(t, len, err);
	p = plan_const_piece(m->rule->pad_value, src_info(plan, m->src)->dtype);
	p.len = len;
	return plan_push_piece(t, &p, err);
}

enum wshard_err plan_pad_rows(const struct wshard_plan *plan, struct wshard_out_tensor *t,
			      const struct member *m, uint64_t *nrows, struct wshard_error *err)
{
	uint64_t to;
	enum wshard_err rc = plan_pad_share(plan, m, *nrows, &to, err);

	if (rc || to == *nrows)
		return rc;
	rc = push_pad(plan, t, m, (to - *nrows) * src_row_bytes(src_info(plan, m->src)), err);
	*nrows = to;
	return rc;
}

enum wshard_err plan_indivisible(const struct wshard_plan *plan,
				 const struct member *m, int dim,
				 uint64_t size, struct wshard_error *err)
{
	const char *expr = m->rule->nshape > dim ? m->rule->shape[dim] : NULL;

	if (expr_is_bare_key(expr))
		return wshard_error_set(err, WSHARD_EINVAL,
					"%s=%llu is not divisible by --tp %d", expr,
					(unsigned long long)size, plan->tp);
	return wshard_error_set(err, WSHARD_EINVAL,
				"tensor '%s': dimension %d (%llu) is not divisible by --tp %d",
				src_name(plan, m->src), dim, (unsigned long long)size,
				plan->tp);
}

/* Appends t to a rank's list (taking its pieces and name). */
enum wshard_err plan_rank_push(struct wshard_rank_plan *rp, size_t *cap,
			       struct wshard_out_tensor *t, struct wshard_error *err)
{
	if (rp->ntensors == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct wshard_out_tensor *nt = realloc(rp->tensors, ncap * sizeof(*nt));

		if (!nt)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		rp->tensors = nt;
		*cap = ncap;
	}
	if (t->npieces > 2 && (t->npieces & (t->npieces - 1))) {
		struct wshard_piece *fit = realloc(t->pieces, t->npieces * sizeof(*fit));

		if (fit)
			t->pieces = fit;
	}
	rp->tensors[rp->ntensors++] = *t;
	memset(t, 0, sizeof(*t));
	return WSHARD_OK;
}

/* The CONST piece of one element, value in dtype (F32, BF16 or F16). */
struct wshard_piece plan_const_piece(double value, enum wshard_dtype dtype)
{
	struct wshard_piece p = { .kind = WSHARD_PIECE_CONST };
	float f = (float)value;

	if (dtype == WSHARD_F32) {
		memcpy(p.value, &f, 4);
		p.value_len = 4;
	} else {
		uint32_t u;
		uint16_t h;

		memcpy(&u, &f, 4);
		h = dtype == WSHARD_BF16 ? wshard_f32_to_bf16(u) : wshard_f32_to_f16(u);
		memcpy(p.value, &h, 2);
		p.value_len = 2;
	}
	p.len = p.value_len;
	p.prov_value = value;
	return p;
}
