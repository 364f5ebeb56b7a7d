/*
 * rules_values.c - a rule's keys that change the values it writes, not
 * where they go: "times_sqrt" (every element times sqrt(A / B)),
 * "neg_exp" (-exp(x)) and "zero_mean" (x - mean(x)).  The planner computes
 * them (plan_values.c).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "rules.h"

enum wshard_err rules_parse_values(const struct wshard_rules *r, struct rules_rule *rule,
				   json_t *t, struct wshard_error *err)
{
	json_t *ts;
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
	return WSHARD_OK;
}
