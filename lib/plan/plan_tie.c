/*
 * plan_tie.c - a head the checkpoint ships beside a tie.  vLLM 0.32 stops
 * trusting tie_word_embeddings where the checkpoint has an lm_head of its
 * own (ModelConfig.maybe_untie_word_embeddings): it loads the head untied
 * and ties the two again only where their bytes are the same
 * (maybe_retie_word_embeddings).  So a tied model whose shipped head
 * differs from its embedding is served with that head; wshard then writes
 * it untied too, and config.json says so (extras.c), for sharded_state
 * builds the model from it.
 */
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/error.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "plan_impl.h"

/* Whether tensors a and b hold the same bytes (read in chunks). */
static enum wshard_err same_bytes(const struct wshard_plan *plan,
				  const struct wshard_src_tensor *a,
				  const struct wshard_src_tensor *b, bool *same,
				  struct wshard_error *err)
{
	enum { CHUNK = 8 << 20 };
	char *x = malloc(CHUNK), *y = malloc(CHUNK);
	uint64_t at;
	enum wshard_err rc = WSHARD_OK;

	*same = a->nbytes == b->nbytes && a->info->dtype == b->info->dtype &&
		a->info->ndim == b->info->ndim &&
		!memcmp(a->info->shape, b->info->shape, sizeof(a->info->shape));
	if (!x || !y)
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (at = 0; *same && !rc && at < a->nbytes; at += CHUNK) {
		size_t len = a->nbytes - at < CHUNK ? (size_t)(a->nbytes - at) : CHUNK;

		rc = wshard_catalog_read(plan->cat, a->file, a->offset + at, x, len, err);
		if (!rc)
			rc = wshard_catalog_read(plan->cat, b->file, b->offset + at, y, len, err);
		*same = !rc && memcmp(x, y, len) == 0;
	}
	free(x);
	free(y);
	return rc;
}

enum wshard_err plan_untie(struct wshard_plan *plan, const struct wshard_rules *rules,
			   struct wshard_error *err)
{
	const struct wshard_src_tensor *embed, *head = NULL;
	size_t i, k;
	bool same = false;
	enum wshard_err rc;

	/* a tie the model's code makes whatever the config says stays (and
	 * a head it fills as a copy of the embedding) */
	if (rules->tie_always || rules->tie_if || rules->tie_copy ||
	    !rules_is_tied(rules, plan->config))
		return WSHARD_OK;
	/* vLLM looks only where the config object holds tie_word_embeddings
	 * true; a config class that sets no such attribute (transformers 5
	 * gives none) leaves it to the model's default, whatever the head */
	if (rules->tie_default_holds && plan->config->tie_word_embeddings < 0)
		return WSHARD_OK;
	embed = plan_source_named(plan, rules, rules->tie_source);
	/* a head the tie drops and another rule would write untied */
	for (i = 0; embed && !head && i < rules->ntie_drop; i++) {
		const char *name = rules->tie_drop[i];
		size_t n = strlen(name);

		if (n < 14 || strcmp(name + n - 14, "lm_head.weight") != 0)
			continue;
		for (k = 0; k < rules->nrules && !head; k++)
			if (rules->rules[k].match && strcmp(rules->rules[k].match, name) == 0)
				head = plan_source_named(plan, rules, name);
	}
	if (!head)
		return WSHARD_OK;
	/* a compressed archive reads front to back: its head kept as shipped */
	if (wshard_catalog_seekable(plan->cat)) {
		rc = same_bytes(plan, head, embed, &same, err);
		if (rc)
			return rc;
	}
	if (same)
		return WSHARD_OK;
	plan->config->tie_word_embeddings = 0;
	plan->untied_by_checkpoint = true;
	return WSHARD_OK;
}
