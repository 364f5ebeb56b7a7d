/*
 * rules_tie.c - "tie": an LM head that vLLM ties to the embedding, and
 * whether a checkpoint's config.json ties it.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "expr.h"
#include "rules.h"

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

enum wshard_err rules_parse_tie(struct wshard_rules *r, json_t *tie,
				 struct wshard_error *err)
{
	json_t *drop;
	size_t i;

	if (!tie)
		return WSHARD_OK;
	r->tie_source = dup_or_null(json_string_value(json_object_get(tie, "source")));
	r->tie_output = dup_or_null(json_string_value(json_object_get(tie, "output")));
	if (!r->tie_source || !r->tie_output)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"tie\" needs \"source\" and \"output\" names", r->name);
	if (json_object_get(tie, "output_if")) {
		json_t *alt = json_object_get(tie, "output_if");

		r->tie_output_if = dup_or_null(json_string_value(json_object_get(alt, "if")));
		r->tie_output_alt = dup_or_null(json_string_value(json_object_get(alt, "output")));
		if (!r->tie_output_if || !r->tie_output_alt)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': \"tie\"'s \"output_if\" needs \"if\" and \"output\"",
						r->name);
	}
	if (json_object_get(tie, "if") &&
	    !(r->tie_if = dup_or_null(json_string_value(json_object_get(tie, "if")))))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"tie\"'s \"if\" is not a condition", r->name);
	r->tie_default = json_is_true(json_object_get(tie, "default"));
	r->tie_default_holds = json_is_true(json_object_get(tie, "default_holds"));
	if (r->tie_default_holds && !r->tie_default)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"tie\"'s \"default_holds\" needs \"default\": true",
					r->name);
	r->tie_always = json_is_true(json_object_get(tie, "always"));
	r->tie_copy = json_is_true(json_object_get(tie, "copy"));
	if (r->tie_copy && r->tie_output_if)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"tie\" takes \"copy\" or \"output_if\", not both",
					r->name);
	if (r->tie_copy && r->pp_layers)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"tie\"'s \"copy\" is for models without \"pipeline\"",
					r->name);
	/* the copy is cut as the head the checkpoint would otherwise hold */
	for (i = 0; r->tie_copy && i < r->nrules && !r->tie_copy_rule; i++)
		if (strcmp(r->rules[i].output, r->tie_output) == 0 &&
		    (r->rules[i].kind == RULE_ROW || r->rules[i].kind == RULE_COL ||
		     r->rules[i].kind == RULE_VOCAB || r->rules[i].kind == RULE_REPLICATE))
			r->tie_copy_rule = &r->rules[i];
	if (r->tie_copy && !r->tie_copy_rule)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"tie\"'s \"copy\" needs a row, col, vocab or replicate rule whose output is '%s'",
					r->name, r->tie_output);
	drop = json_object_get(tie, "drop");
	return rules_parse_strings(r, drop, "tie \"drop\"", false, &r->tie_drop, &r->ntie_drop,
				   err);
}

const char *rules_tie_output(const struct wshard_rules *r, const struct wshard_config *cfg)
{
	struct wshard_error ignored = { 0 };
	bool alt = false;

	if (r->tie_output_if &&
	    expr_eval_cond(cfg, r->tie_output_if, -1, -1, r->tie_source, &alt, &ignored))
		alt = false;
	return alt ? r->tie_output_alt : r->tie_output;
}

bool rules_is_tied(const struct wshard_rules *r, const struct wshard_config *cfg)
{
	struct wshard_error err = { 0 };
	bool holds = false;

	if (!r->tie_source)
		return false;
	if (r->tie_always)
		return true;
	if (r->tie_if)
		return expr_eval_cond(cfg, r->tie_if, -1, -1, r->tie_source, &holds, &err) ==
		       WSHARD_OK && holds;
	if (cfg->tie_word_embeddings >= 0)
		return cfg->tie_word_embeddings == 1;
	return r->tie_default;
}
