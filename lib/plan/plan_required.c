/*
 * plan_required.c - which rules a checkpoint must satisfy, and in which
 * layers: a rule's condition in a layer, the rules whose condition bounds
 * their own layers (a tower's), and the check that no required tensor is
 * missing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/error.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"

bool plan_in_list(char *const *list, size_t n, const char *s)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

/*
 * Whether rule r applies in layer n (-1: no layer): its "if" condition,
 * when it has one, holds.  Returns WSHARD_OK or WSHARD_EINVAL.
 */
enum wshard_err plan_rule_applies(const struct wshard_plan *plan,
				  const struct rules_rule *r, long n, bool *out,
				  struct wshard_error *err)
{
	*out = true;
	if (!r->cond)
		return WSHARD_OK;
	return expr_eval_cond(plan->config, r->cond, n, -1, r->match, out, err);
}

enum wshard_err plan_rule_capture(const struct wshard_plan *plan, const struct rules_rule *r,
				  struct rules_capture *cap, struct wshard_error *err)
{
	int64_t n;
	enum wshard_err rc;

	if (!r->layer)
		return WSHARD_OK;
	rc = expr_eval_dim(plan->config, r->layer, r->match, &n, err);
	if (!rc && n >= PLAN_MAX_LAYERS)
		rc = wshard_error_set(err, WSHARD_EINVAL, "rule '%s': \"layer\" %s is %lld, not a layer",
				      r->match, r->layer, (long long)n);
	if (!rc)
		cap->n = (long)n;
	return rc;
}

/* The tensor an engine loads over the one r takes is in the checkpoint
 * (vLLM's MTP draft loads the target's lm_head into the MTP layer's head,
 * then that layer's own head over it where the release ships one). */
enum wshard_err plan_rule_yields(const struct wshard_plan *plan, const struct rules_rule *r,
				 const struct rules_capture *cap, bool *out,
				 struct wshard_error *err)
{
	struct rules_capture at = *cap;
	enum wshard_err rc;
	char *name;

	*out = false;
	if (!r->unless)
		return WSHARD_OK;
	rc = plan_rule_capture(plan, r, &at, err);
	if (rc)
		return rc;
	name = rules_expand(r->unless, &at);
	if (!name)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	*out = wshard_catalog_find(plan->cat, name) != NULL;
	free(name);
	return WSHARD_OK;
}

/*
 * Whether rule j, or another rule with the same match (the alternatives
 * that "from" picks among by the source's dtype), matched in layer n.
 */
static bool seen_alike(const struct wshard_rules *rules, const bool *seen,
		       long width, size_t j, long n)
{
	size_t k;

	for (k = 0; k < rules->nrules; k++)
		if ((k == j || !strcmp(rules->rules[k].match, rules->rules[j].match)) &&
		    seen[k * (size_t)(width + 1) + (size_t)n])
			return true;
	return false;
}

/* Layer numbers past any model's a bounding condition fails for: more
 * than the period of a condition that picks layers by n % K. */
#define BOUND_RUN 64

/* A rule whose "if" fails for every layer number in a run past any
 * model's: its condition bounds its layers (Qwen3.5's vision blocks,
 * "n < vision_config.depth"), which may outnumber the text model's; one
 * that picks every other layer (Nomic's MoE layers) does not. */
bool plan_bounds_layers(const struct wshard_plan *plan, const struct rules_rule *r)
{
	struct wshard_error err;
	bool applies = true;
	long n;

	if (!r->cond || !strstr(r->match, "{n}"))
		return false;
	wshard_error_clear(&err);
	for (n = PLAN_MAX_LAYERS - 1; n >= PLAN_MAX_LAYERS - BOUND_RUN; n--)
		if (plan_rule_applies(plan, r, n, &applies, &err) || applies)
			return false;
	return true;
}

/* Layers rule r is required in: 1 without {n}; num_hidden_layers; for a
 * rule bounding its own layers, those its condition holds for, at least
 * the width of the match. */
static long required_layers(const struct wshard_plan *plan, const struct rules_rule *r,
			    long nlayers, long width)
{
	struct wshard_error err;
	bool applies = true;
	long n;

	if (!strstr(r->match, "{n}"))
		return 1;
	if (!plan_bounds_layers(plan, r))
		return nlayers;
	wshard_error_clear(&err);
	for (n = width; n < PLAN_MAX_LAYERS - 1; n++)
		if (plan_rule_applies(plan, r, n, &applies, &err) || !applies)
			break;
	return n;
}

/* The error for rule r's source *cap missing (*at: its "unless"'s
 * captures, before its "layer"), each tensor named as the checkpoint's
 * own naming would name it (Cosmos 3 Edge's layers.N.mlp., not vLLM's
 * layers.2N+1.mixer.). */
static enum wshard_err missing(const struct wshard_plan *plan, const struct wshard_rules *rules,
			       const struct rules_rule *r, const struct rules_capture *cap,
			       const struct rules_capture *at, bool per_layer,
			       struct wshard_error *err)
{
	struct rules_capture u = *at;
	char *want, *other = NULL, wbuf[RULES_NAME_MAX], obuf[RULES_NAME_MAX];
	const char *w, *o;
	enum wshard_err rc = plan_rule_capture(plan, r, &u, err);

	if (rc)
		return rc;
	want = rules_expand(r->match, cap);
	if (want && r->unless)
		other = rules_expand(r->unless, &u);
	if (!want || (r->unless && !other)) {
		free(want);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	w = rules_checkpoint_name(rules, plan->cat, want, wbuf);
	o = other ? rules_checkpoint_name(rules, plan->cat, other, obuf) : NULL;
	if (r->missing)
		wshard_error_set(err, WSHARD_EINVAL, "tensor '%s' is missing from '%s': %s",
				 w, plan->cat->path, r->missing);
	else if (o)
		wshard_error_set(err, WSHARD_EINVAL,
				 "tensor '%s' is missing from '%s' (rules '%s' require it where there is no '%s')",
				 w, plan->cat->path, plan->rules_name, o);
	else
		wshard_error_set(err, WSHARD_EINVAL,
				 "tensor '%s' is missing from '%s' (rules '%s' require it%s)",
				 w, plan->cat->path, plan->rules_name,
				 per_layer ? " in every layer" : "");
	free(want);
	free(other);
	return WSHARD_EINVAL;
}

/*
 * Every rule that is not optional must match a source tensor, once per
 * layer when its pattern has {n} (layers 0 .. num_hidden_layers - 1, or up
 * to the highest layer seen): an engine refuses a checkpoint with a tensor
 * missing, so wshard refuses to write one.  When embeddings are tied the
 * dropped names (lm_head) are not required; a quantized X.weight_packed
 * or X.qweight stands in for its X.weight.  A rule with "unless" is
 * required only where the tensor it names is not (in each layer, for one
 * whose "unless" has {n}).
 */
enum wshard_err plan_check_required(struct wshard_plan *plan,
				    const struct wshard_rules *rules,
				    const bool *seen, long nlayers, long width, bool tied,
				    struct wshard_error *err)
{
	size_t j;
	long n, limit;

	for (j = 0; j < rules->nrules; j++) {
		const struct rules_rule *r = &rules->rules[j];
		bool per_layer = strstr(r->match, "{n}") != NULL;

		if (r->optional || r->kind == RULE_SKIP || r->kind == RULE_REFUSE ||
		    (tied && plan_in_list(rules->tie_drop, rules->ntie_drop, r->match)))
			continue;
		/* an {e} rule needs some expert in every layer (the stacking
		 * then checks that all of them are there) */
		limit = required_layers(plan, r, nlayers, width);
		for (n = 0; n < limit; n++) {
			struct rules_capture cap = { .n = n, .e = 0 };
			struct rules_capture at = { .n = per_layer ? n : -1, .e = 0 };

			bool applies, yields;
			enum wshard_err rc;

			if (n <= width && (seen_alike(rules, seen, width, j, n) ||
					   (r->alt[0] && seen_alike(rules, seen, width,
								    (size_t)r->alt[0], n)) ||
					   (r->alt[1] && seen_alike(rules, seen, width,
								    (size_t)r->alt[1], n))))
				continue;
			rc = plan_rule_applies(plan, r, per_layer ? n : -1, &applies, err);
			if (rc)
				return rc;
			if (!applies)
				continue;
			/* a rule with "unless" is needed only where that tensor
			 * is not: in each layer its {n} names (an {e} rule's:
			 * expert 0's), or the one its "layer" gives */
			rc = plan_rule_yields(plan, r, &at, &yields, err);
			if (rc)
				return rc;
			if (yields)
				continue;
			return missing(plan, rules, r, &cap, &at, per_layer, err);
		}
	}
	return WSHARD_OK;
}
