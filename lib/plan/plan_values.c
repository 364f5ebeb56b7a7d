/*
 * plan_values.c - a rule's output values that are not the source's bytes
 * as they are: --dtype's and a rule's "dtype" conversions, "times_sqrt",
 * "neg_exp", "zero_mean" and "plus".  Each marks a rank's pieces with
 * what the stream computes as it copies (stream.c, fpconv.c); zero_mean
 * reads its small source here, for the mean must be known before its
 * first byte.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/fpconv.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"

/*
 * --dtype: a floating-point output (not an FP8 scale) becomes the target
 * dtype; its pieces keep their source rectangles and produce converted
 * bytes, so every offset after them moves.  t still has its source's
 * dtype; its pieces are marked with it first, whether or not they convert.
 * ints: an I32 or I64 source converts to a float dtype too (what vLLM
 * holds in a float parameter; never for --dtype).
 */
void plan_convert_dtype(enum wshard_dtype to, struct wshard_out_tensor *t, bool ints)
{
	unsigned in, out;
	size_t k;

	for (k = 0; k < t->npieces; k++)
		t->pieces[k].from = t->pieces[k].to = (uint8_t)t->dtype;

	/* U8: one-byte values vLLM holds as raw uint8, the same bytes */
	if (to == WSHARD_U8 && wshard_dtype_bits(t->dtype) == 8) {
		t->dtype = to;
		return;
	}
	if (!wshard_dtype_converts(t->dtype, to) &&
	    !(ints && wshard_dtype_int_to_float(t->dtype, to)))
		return;
	in = wshard_dtype_bits(t->dtype) / 8;
	out = wshard_dtype_bits(to) / 8;
	/* whole elements everywhere: every offset scales with them */
	t->nbytes = t->nbytes / in * out;
	for (k = 0; k < t->npieces; k++) {
		struct wshard_piece *p = &t->pieces[k];

		p->from = t->dtype;
		p->to = to;
		p->out_ncols = (p->tr_rows ? p->tr_rows * p->tr_width : p->ncols) / in * out;
		p->len = p->len / in * out;
		p->dst = p->dst / in * out;
		p->out_stride = p->out_stride / in * out;
		p->tr_ostride = p->tr_ostride / in * out;
		p->pad = p->pad / in * out;
		/* a "pad_value" constant: its element in the new dtype */
		if (p->kind == WSHARD_PIECE_CONST && (to == WSHARD_F32 || to == WSHARD_BF16 ||
						    to == WSHARD_F16)) {
			struct wshard_piece c = plan_const_piece(p->prov_value, to);

			memcpy(p->value, c.value, sizeof(p->value));
			p->value_len = c.value_len;
		}
	}
	t->dtype = to;
}

/* t's COPY pieces that --dtype left as they are (from == to) marked as
 * computed from dt, their source's dtype, into t's: each element is
 * computed in F32 and written in t's dtype. */
static void mark_computed(struct wshard_out_tensor *t, enum wshard_dtype dt)
{
	size_t k;

	for (k = 0; k < t->npieces; k++) {
		struct wshard_piece *p = &t->pieces[k];

		if (p->kind == WSHARD_PIECE_COPY && p->from == p->to) {
			p->from = (uint8_t)dt;
			p->to = (uint8_t)t->dtype;
		}
	}
}

/*
 * A rule's "times_sqrt" [A, B]: every element of t multiplied by
 * sqrt(A / B), in its output dtype (vLLM's composed weight loaders, LongCat's
 * MLA LoRA norms: (hidden_size / rank) ** 0.5 in Python, then the BF16
 * parameter times that float).
 */
enum wshard_err plan_times(const struct wshard_plan *plan, const struct member *m,
			   struct wshard_out_tensor *t, struct wshard_error *err)
{
	enum wshard_dtype dt = src_info(plan, m->src)->dtype;
	int64_t a, b;
	enum wshard_err rc;
	size_t k;
	float mul;

	rc = expr_eval_dim(plan->config, m->rule->times_sqrt[0], t->name, &a, err);
	if (!rc)
		rc = expr_eval_dim(plan->config, m->rule->times_sqrt[1], t->name, &b, err);
	if (rc)
		return rc;
	if (b <= 0 || a < 0 || !wshard_dtype_is_convertible(dt) ||
	    !wshard_dtype_is_convertible(t->dtype))
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"times_sqrt\" needs a F32, F16 or BF16 tensor and %s / %s positive",
					src_name(plan, m->src), m->rule->times_sqrt[0],
					m->rule->times_sqrt[1]);
	mul = (float)pow((double)a / (double)b, 0.5);
	mark_computed(t, dt);
	for (k = 0; k < t->npieces; k++)
		t->pieces[k].mul = t->pieces[k].kind == WSHARD_PIECE_COPY ? mul : 0;
	return WSHARD_OK;
}

/*
 * A rule's "neg_exp": every element x of t written as -exp(x), F32: vLLM's
 * Mamba mixers load A_log into their F32 parameter A as -exp(A_log)
 * (composed_weight_loader).  exp is computed in double and rounded once;
 * vLLM's torch.exp (MKL or Sleef on a CPU, CUDA's expf on a GPU) can
 * differ from it in the last bit.
 */
enum wshard_err plan_neg_exp(const struct wshard_plan *plan, const struct member *m,
				     struct wshard_out_tensor *t, struct wshard_error *err)
{
	enum wshard_dtype dt = src_info(plan, m->src)->dtype;
	size_t k;

	if (!wshard_dtype_is_convertible(dt))
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"neg_exp\" needs a F32, F16 or BF16 tensor, not %s",
					src_name(plan, m->src), wshard_dtype_name(dt));
	plan_convert_dtype(WSHARD_F32, t, false);	/* nothing to do from F32 */
	for (k = 0; k < t->npieces; k++)
		if (t->pieces[k].kind == WSHARD_PIECE_COPY) {
			t->pieces[k].to = WSHARD_F32;
			t->pieces[k].neg_exp = 1;
		}
	return WSHARD_OK;
}

/*
 * A rule's "zero_mean": a vector x written as x - mean(x), vLLM 0.32's
 * Param-2 and Sarvam-105B routers' score bias (_zero_mean_tensor, applied
 * to the CPU tensor the checkpoint iterator yields, in its dtype).  The
 * mean is PyTorch's (wshard_torch_mean), which is not the sum rounded
 * once; above ZERO_MEAN_MAX elements PyTorch sums in threads and its
 * mean depends on their number, so such a vector is refused.
 */
enum { ZERO_MEAN_MAX = 32768 };	/* at::internal::GRAIN_SIZE */

enum wshard_err plan_source_mean(const struct wshard_plan *plan, const struct member *m,
				 float *mean, struct wshard_error *err)
{
	const struct wshard_src_tensor *s = &plan->cat->tensors[m->src];
	enum wshard_dtype dt = s->info->dtype;
	uint64_t n = s->info->ndim == 1 ? s->info->shape[0] : 0;
	enum wshard_err rc;
	void *buf;

	if (s->info->ndim != 1 || !wshard_dtype_is_convertible(dt) || n > ZERO_MEAN_MAX)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"zero_mean\" needs a vector of at most %d F32, F16 or BF16 elements, not %s of %d dimensions",
					s->name, ZERO_MEAN_MAX, wshard_dtype_name(dt), s->info->ndim);
	if (!wshard_catalog_seekable(plan->cat))
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"zero_mean\" reads the tensor before the stream does, which a compressed archive cannot: unpack %s first",
					s->name, plan->cat->path);
	buf = malloc(s->nbytes ? (size_t)s->nbytes : 1);
	if (!buf)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	rc = wshard_catalog_read(plan->cat, s->file, s->offset, buf, (size_t)s->nbytes, err);
	if (!rc && wshard_torch_mean(dt, buf, (size_t)n, mean))
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	free(buf);
	return rc;
}

void plan_zero_mean(const struct wshard_plan *plan, const struct member *m,
		    struct wshard_out_tensor *t, float mean)
{
	size_t k;

	mark_computed(t, src_info(plan, m->src)->dtype);
	for (k = 0; k < t->npieces; k++)
		if (t->pieces[k].kind == WSHARD_PIECE_COPY) {
			t->pieces[k].add = WSHARD_ADD_SOURCE;
			t->pieces[k].addend = -mean;
		}
}

/*
 * A rule's "plus": every element x written as x + plus, as vLLM's
 * composed weight loaders offset a parameter on a GPU (PLaMo 3's norms:
 * param + 1/5): x copied into the parameter's dtype first, the Python
 * float taken as F32 (CUDA's kernels read a CPU scalar as it is), the sum
 * rounded once.  vLLM's CPU build rounds the offset to the parameter's
 * dtype first (TensorIterator casts CPU scalars for CPU kernels only), so
 * its bytes can differ from these in the last place.
 */
enum wshard_err plan_plus(const struct wshard_plan *plan, const struct member *m,
			  struct wshard_out_tensor *t, struct wshard_error *err)
{
	enum wshard_dtype dt = src_info(plan, m->src)->dtype;
	size_t k;

	if (!wshard_dtype_is_convertible(dt) || !wshard_dtype_is_convertible(t->dtype))
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"plus\" needs a F32, F16 or BF16 tensor, not %s",
					src_name(plan, m->src), wshard_dtype_name(dt));
	mark_computed(t, dt);
	for (k = 0; k < t->npieces; k++)
		if (t->pieces[k].kind == WSHARD_PIECE_COPY) {
			t->pieces[k].add = WSHARD_ADD_OUTPUT;
			t->pieces[k].addend = (float)m->rule->plus;
		}
	return WSHARD_OK;
}
