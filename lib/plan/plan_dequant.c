/*
 * plan_dequant.c - a rule's "dequant": an F8_E4M3 weight that vLLM makes
 * BF16 as it loads it, since it fuses it with a BF16 tensor that is not
 * quantized (DeepSeek-V3.2's and GLM-5's sparse-attention indexer.wk,
 * beside the BF16 indexer.weights_proj: vLLM 0.32's deepseek_v2.py,
 * _try_load_fp8_indexer_wk).  It is computed as vLLM's scaled_dequantize
 * computes it: each element in F32 times its block's scale in F32, the
 * product rounded once to BF16.  The scale is X.weight_scale_inv (or
 * X.weight_scale): F32, BF16, F16 or E8M0 (powers of two; also as U8); a
 * matrix of one scale per block of rows/R by cols/C, R x C its shape, or
 * a vector of one per row.  The catalog then reads the weight as that BF16
 * tensor (catalog_made.c), and its scales are left out (rules_scale.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/fpconv.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "plan_impl.h"

/* float8_e4m3fn: no infinities, S.1111.111 the only NaNs. */
static float f8_e4m3(unsigned char b)
{
	int e = (b >> 3) & 0xf, m = b & 7;
	float v;

	if (e == 0xf && m == 7)
		return NAN;
	v = e ? ldexpf(1.0f + (float)m / 8.0f, e - 7) : ldexpf((float)m, -9);
	return (b & 0x80) ? -v : v;
}

/* Element k of a scale tensor of dtype dt at p, as F32. */
static float scale_at(enum wshard_dtype dt, const unsigned char *p, size_t k)
{
	uint32_t bits;
	float f;

	switch (dt) {
	case WSHARD_F32:
		memcpy(&f, p + 4 * k, 4);
		return f;
	case WSHARD_BF16:
		bits = (uint32_t)(p[2 * k] | p[2 * k + 1] << 8) << 16;
		break;
	case WSHARD_F16:
		bits = wshard_f16_to_f32((uint16_t)(p[2 * k] | p[2 * k + 1] << 8));
		break;
	default:	/* E8M0 (or its bytes as U8): 2^(v - 127), 255 NaN */
		return p[k] == 255 ? NAN : ldexpf(1.0f, p[k] - 127);
	}
	memcpy(&f, &bits, 4);
	return f;
}

struct dequant {
	const struct wshard_plan *plan;
	size_t n;
	size_t *weight, *scale;		/* catalog indices, n of each */
};

/* wshard_made_fill: weight i's BF16 values. */
static enum wshard_err fill(void *ctx, size_t i, void *buf, struct wshard_error *err)
{
	const struct dequant *dq = ctx;
	const struct wshard_catalog *cat = dq->plan->cat;
	const struct wshard_src_tensor *w = &cat->tensors[i], *s = NULL;
	uint64_t rows = w->info->shape[0], cols = w->info->shape[1], r, c, gr, gc, sc;
	unsigned char *q, *sv;
	uint16_t *out = buf;
	enum wshard_err rc;
	size_t k;

	for (k = 0; k < dq->n && !s; k++)
		if (dq->weight[k] == i)
			s = &cat->tensors[dq->scale[k]];
	q = malloc(w->nbytes + 1);
	sv = malloc(s->nbytes + 1);
	if (!q || !sv) {
		free(q);
		free(sv);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	rc = wshard_catalog_read(cat, w->file, w->offset, q, (size_t)w->nbytes, err);
	if (!rc)
		rc = wshard_catalog_read(cat, s->file, s->offset, sv, (size_t)s->nbytes, err);
	/* vLLM's GroupShape: a vector, one scale a row; else rows / R by cols / C */
	sc = s->info->ndim == 1 ? 1 : s->info->shape[1];
	gr = s->info->ndim == 1 ? 1 : rows / s->info->shape[0];
	gc = cols / sc;
	for (r = 0; !rc && r < rows; r++) {
		for (c = 0; c < cols; c++) {
			float x = f8_e4m3(q[r * cols + c]);
			float v = x * scale_at(s->info->dtype, sv, (size_t)(r / gr * sc + c / gc));
			uint32_t bits;

			memcpy(&bits, &v, 4);
			out[r * cols + c] = wshard_f32_to_bf16(bits);
		}
	}
	free(q);
	free(sv);
	return rc;
}

/* The block scale beside F8_E4M3 weight w (catalog index i), checked. */
static enum wshard_err find_scale(const struct wshard_plan *plan, size_t i, size_t *out,
				  struct wshard_error *err)
{
	static const char *const names[] = { "weight_scale_inv", "weight_scale" };
	const struct wshard_src_tensor *w = &plan->cat->tensors[i], *s;
	size_t len = strlen(w->name) - 6, k;
	char name[1024];
	long at = -1;

	for (k = 0; k < 2 && at < 0; k++)
		if (len + strlen(names[k]) < sizeof(name)) {
			/* (checked to fit: no snprintf, which GCC under ASan
			 * warns may truncate) */
			memcpy(name, w->name, len);
			strcpy(name + len, names[k]);
			at = wshard_catalog_index(plan->cat, name);
		}
	if (at < 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': F8_E4M3 without its weight_scale_inv: vLLM dequantizes it (\"dequant\") by its scales",
					w->name);
	s = &plan->cat->tensors[at];
	if (w->info->ndim != 2 || !w->info->shape[0] || !w->info->shape[1] ||
	    (s->info->ndim == 1 ? s->info->shape[0] != w->info->shape[0] :
	     s->info->ndim != 2 || !s->info->shape[0] || !s->info->shape[1] ||
	     w->info->shape[0] % s->info->shape[0] || w->info->shape[1] % s->info->shape[1]) ||
	    (s->info->dtype != WSHARD_F32 && s->info->dtype != WSHARD_BF16 &&
	     s->info->dtype != WSHARD_F16 && s->info->dtype != WSHARD_F8_E8M0 &&
	     s->info->dtype != WSHARD_U8))
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': its scale '%s' (%s, %d dimensions) does not divide it into blocks (a matrix of F32, BF16, F16 or E8M0 scales dividing its rows and columns, or one a row): not dequantized as vLLM does",
					w->name, s->name, wshard_dtype_name(s->info->dtype), s->info->ndim);
	*out = (size_t)at;
	return WSHARD_OK;
}

/* Whether source tensor i is a weight that a "dequant" rule reads. */
static bool dequantized(const struct wshard_plan *plan, const struct wshard_rules *rules,
			size_t i)
{
	const struct wshard_src_tensor *t = &plan->cat->tensors[i];
	struct rules_capture cap;
	size_t k;

	if (t->info->dtype != WSHARD_F8_E4M3 || t->unstacked)
		return false;
	for (k = 0; k < rules->nrules; k++)
		if (rules->rules[k].dequant && rules_match(rules->rules[k].match, t->name, &cap))
			return true;
	return false;
}

enum wshard_err plan_dequant(struct wshard_plan *plan, const struct wshard_rules *rules,
			     struct wshard_error *err)
{
	/* the catalog is the source as the rules read it (plan_unstack.c) */
	struct wshard_catalog *cat = (struct wshard_catalog *)plan->cat;
	struct dequant dq = { .plan = plan };
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	wshard_catalog_unmake(cat);
	for (i = 0; i < cat->ntensors && !rc; i++) {
		if (!dequantized(plan, rules, i))
			continue;
		if (!wshard_catalog_seekable(cat)) {
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "tensor '%s': \"dequant\" reads the tensor before the stream does, which a compressed archive cannot: unpack %s first",
					      cat->tensors[i].name, cat->path);
			break;
		}
		if (!(dq.n % 64)) {
			size_t *w = realloc(dq.weight, (dq.n + 64) * sizeof(*w));
			size_t *s = w ? realloc(dq.scale, (dq.n + 64) * sizeof(*s)) : NULL;

			if (w)
				dq.weight = w;
			if (s)
				dq.scale = s;
			if (!w || !s) {
				rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
				break;
			}
		}
		dq.weight[dq.n] = i;
		rc = find_scale(plan, i, &dq.scale[dq.n], err);
		dq.n++;
	}
	if (!rc)
		rc = wshard_catalog_make(cat, dq.n, dq.weight, WSHARD_BF16, fill, &dq, err);
	free(dq.weight);
	free(dq.scale);
	return rc;
}
