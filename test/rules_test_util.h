/*
 * rules_test_util.h - what the rules suites share: the first rule whose
 * pattern matches a name (the order a plan tries them in).  Header-only.
 */
#ifndef WSHARD_RULES_TEST_UTIL_H
#define WSHARD_RULES_TEST_UTIL_H

#include "rules.h"

static inline const struct rules_rule *find_rule(const struct wshard_rules *r,
						 const char *name,
						 struct rules_capture *cap)
{
	size_t i;

	for (i = 0; i < r->nrules; i++)
		if (rules_match(r->rules[i].match, name, cap))
			return &r->rules[i];
	return NULL;
}

#endif
