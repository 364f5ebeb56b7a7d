/*
 * plan_shape.c - a matched source's shape against the one its rule's
 * "shape" gives in config.json's terms, so that a checkpoint whose
 * tensors and config.json disagree is refused before anything is
 * written.
 */
#include <stdio.h>
#include <string.h>

#include "wshard.h"
#include "base/util.h"
#include "source/safetensors.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"

enum wshard_err plan_check_shape(const struct wshard_plan *plan,
				 const struct member *m, struct shape_memo *memo,
				 struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	const struct rules_rule *r = m->rule;
	uint64_t *want = memo->want;
	char have_s[160], want_s[160], expr_s[300];
	size_t o = 0;
	int i;
	enum wshard_err rc;

	if (r->nshape < 0)
		return WSHARD_OK;
	if (!plan->cat->has_config)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s' has no config.json to check shapes against",
					plan->cat->path);
	if (memo->done && memo->per_layer && memo->layer != m->cap.n)
		memo->done = memo->per_layer = false;
	for (i = 0; i < r->nshape && !memo->done; i++) {
		int64_t v;
		bool used_layer = false;

		rc = expr_eval_layer_dim(plan->config, r->shape[i], m->cap.n, m->rule->match, &v,
					 &used_layer, err);
		if (rc)
			return rc;
		want[i] = (uint64_t)v;
		memo->per_layer |= used_layer;
	}
	memo->layer = m->cap.n;
	memo->done = true;
	if (r->nshape == t->ndim && memcmp(want, t->shape, sizeof(uint64_t) * (size_t)t->ndim) == 0)
		return WSHARD_OK;
	/* an FP4 weight: two values a byte along the inputs; Quark's MXFP6:
	 * four values in three bytes */
	if (r->nshape == t->ndim && t->ndim >= 2 && plan_fp4_weight(plan, t) &&
	    memcmp(want, t->shape, sizeof(uint64_t) * (size_t)(t->ndim - 1)) == 0 &&
	    (want[t->ndim - 1] == 2 * t->shape[t->ndim - 1] ||
	     (3 * want[t->ndim - 1] == 4 * t->shape[t->ndim - 1] && plan->quark_mxfp6)))
		return WSHARD_OK;
	expr_s[0] = '\0';	/* "shape": [] names no expression */
	for (i = 0; i < r->nshape; i++)
		o += (size_t)snprintf(expr_s + o, sizeof(expr_s) - WSHARD_MIN(o, sizeof(expr_s)),
				      "%s%s", i ? ", " : "", r->shape[i]);
	wshard_format_shape(have_s, sizeof(have_s), t->shape, t->ndim);
	wshard_format_shape(want_s, sizeof(want_s), want, r->nshape);
	return wshard_error_set(err, WSHARD_EINVAL,
				"tensor '%s' has shape %s but config.json gives [%s] = %s",
				t->name, have_s, expr_s, want_s);
}
