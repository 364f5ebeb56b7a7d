/*
 * rules_values.c - a rule's keys that rewrite its source's elements, not
 * where its rank cut goes: "times_sqrt" (every element times
 * sqrt(A / B)), "neg_exp" (-exp(x)), "zero_mean" (x - mean(x)) and "plus"
 * (x + a number), which the planner computes (plan_values.c),
 * "dequant" (an FP8 weight as the BF16 vLLM makes of it, plan_dequant.c)
 * and "permute_rows" (the rows of each block in another order,
 * plan_reorder.c).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "rules.h"

/* "permute_rows": {"block": EXPR, "ranges": [[EXPR, EXPR], ...]} */
static enum wshard_err parse_permute(const struct wshard_rules *r, struct rules_rule *rule,
				     json_t *t, struct wshard_error *err)
{
	json_t *pr = json_object_get(t, "permute_rows");
	json_t *block = json_object_get(pr, "block"), *ranges = json_object_get(pr, "ranges");
	size_t i, k;

	if (!pr)
		return WSHARD_OK;
	if (!json_is_object(pr) || json_object_size(pr) != 2 || !json_is_string(block) ||
	    !json_is_array(ranges) || json_array_size(ranges) < 1 ||
	    json_array_size(ranges) > RULES_PERMUTE_MAX ||
	    (rule->kind != RULE_ROW && rule->kind != RULE_REPLICATE && rule->kind != RULE_FUSE) ||
	    json_object_get(t, "deinterleave") || rule->transpose || rule->zero_mean)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"permute_rows\" is {\"block\": EXPR, \"ranges\": [[A, B], ...]} (1 to %d ranges of expressions), on a \"row\", \"replicate\" or \"fuse\" rule without \"deinterleave\", \"transpose\" or \"zero_mean\"",
					r->name, rule->match, RULES_PERMUTE_MAX);
	for (i = 0; i < json_array_size(ranges); i++) {
		json_t *a = json_array_get(ranges, i);

		for (k = 0; k < 2; k++)
			if (!json_is_array(a) || json_array_size(a) != 2 ||
			    !json_is_string(json_array_get(a, k)))
				return wshard_error_set(err, WSHARD_EINVAL,
							"'%s': rule '%s': \"permute_rows\" range %zu is not [A, B], two expressions",
							r->name, rule->match, i);
	}
	rule->permute_block = strdup(json_string_value(block));
	if (!rule->permute_block)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < json_array_size(ranges); i++) {
		json_t *a = json_array_get(ranges, i);

		rule->permute_from[i] = strdup(json_string_value(json_array_get(a, 0)));
		rule->permute_to[i] = strdup(json_string_value(json_array_get(a, 1)));
		rule->npermute = i + 1;
		if (!rule->permute_from[i] || !rule->permute_to[i])
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

enum wshard_err rules_parse_values(const struct wshard_rules *r, struct rules_rule *rule,
				   json_t *t, struct wshard_error *err)
{
	json_t *ts, *pl;
	size_t i;

	ts = json_object_get(t, "times_sqrt");
	if (ts && (!json_is_array(ts) || json_array_size(ts) != 2 ||
		   !json_is_string(json_array_get(ts, 0)) || !json_is_string(json_array_get(ts, 1)) ||
		   (rule->kind != RULE_REPLICATE && rule->kind != RULE_ROW)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"times_sqrt\" is [A, B], two expressions, on a \"replicate\" or \"row\" split",
					r->name, rule->match);
	for (i = 0; ts && i < 2; i++) {
		rule->times_sqrt[i] = strdup(json_string_value(json_array_get(ts, i)));
		if (!rule->times_sqrt[i])
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	rule->neg_exp = json_is_true(json_object_get(t, "neg_exp"));
	if (json_object_get(t, "neg_exp") &&
	    (!json_is_boolean(json_object_get(t, "neg_exp")) || ts ||
	     (rule->kind != RULE_REPLICATE && rule->kind != RULE_ROW)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"neg_exp\" is true or false, on a \"replicate\" or \"row\" split without \"times_sqrt\"",
					r->name, rule->match);
	rule->zero_mean = json_is_true(json_object_get(t, "zero_mean"));
	if (json_object_get(t, "zero_mean") &&
	    (!json_is_boolean(json_object_get(t, "zero_mean")) || ts || rule->neg_exp ||
	     rule->kind != RULE_REPLICATE))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"zero_mean\" is true or false, on a \"replicate\" split without \"times_sqrt\" or \"neg_exp\"",
					r->name, rule->match);
	pl = json_object_get(t, "plus");
	rule->has_plus = pl != NULL;
	rule->plus = json_number_value(pl);
	if (pl && (!json_is_number(pl) || ts || rule->neg_exp || rule->zero_mean ||
		   (rule->kind != RULE_REPLICATE && rule->kind != RULE_ROW)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"plus\" is a number, on a \"replicate\" or \"row\" split without \"times_sqrt\", \"neg_exp\" or \"zero_mean\"",
					r->name, rule->match);
	rule->dequant = json_is_true(json_object_get(t, "dequant"));
	if (json_object_get(t, "dequant") &&
	    (!json_is_boolean(json_object_get(t, "dequant")) || strlen(rule->match) < 7 ||
	     strcmp(rule->match + strlen(rule->match) - 7, ".weight") || ts || rule->neg_exp ||
	     rule->zero_mean || pl))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"dequant\" is true or false, on a match ending in \".weight\" without \"times_sqrt\", \"neg_exp\", \"zero_mean\" or \"plus\"",
					r->name, rule->match);
	return parse_permute(r, rule, t, err);
}
