/*
 * rules_source.c - the names rules match a source tensor by.  Checkpoints
 * of one architecture come with more than one naming: the Hub's BLOOM
 * lacks the "transformer." transformers saves, and a Qwen2.5-VL or LLaVA
 * saved by transformers 4.52 or later puts its text model under
 * "model.language_model." where Qwen's and llava-hf's releases have
 * "model." and "language_model.model.".  vLLM maps every such naming onto
 * its own (hf_to_vllm_mapper); "source_prefix" and "source_renames" let
 * one set of rules read them all, while the manifest keeps each tensor's
 * own name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "rules.h"

const char *rules_source_name(const struct wshard_rules *r, const char *name, char *buf)
{
	size_t np, nn = strlen(name), i;

	for (i = 0; i < r->nsrc_renames; i++) {
		size_t nf = strlen(r->src_from[i]), nt = strlen(r->src_to[i]);

		if (strncmp(name, r->src_from[i], nf) != 0)
			continue;
		if (nt + nn - nf >= RULES_NAME_MAX)
			return name;
		memcpy(buf, r->src_to[i], nt);
		memcpy(buf + nt, name + nf, nn - nf + 1);
		return buf;
	}
	if (!r->source_prefix)
		return name;
	np = strlen(r->source_prefix);
	if (strncmp(name, r->source_prefix, np) == 0 || np + nn >= RULES_NAME_MAX)
		return name;
	memcpy(buf, r->source_prefix, np);
	memcpy(buf + np, name, nn + 1);
	return buf;
}

static bool prefix_ok(json_t *v)
{
	return json_is_string(v) && json_string_length(v) > 0 &&
	       json_string_length(v) < RULES_PREFIX_MAX;
}

enum wshard_err rules_parse_source(struct wshard_rules *r, json_t *root,
				   struct wshard_error *err)
{
	json_t *val = json_object_get(root, "source_prefix"), *item;
	size_t i;

	if (val && !prefix_ok(val))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"source_prefix\" is not a string of 1 to %d characters",
					r->name, RULES_PREFIX_MAX - 1);
	if (val && !(r->source_prefix = strdup(json_string_value(val))))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	val = json_object_get(root, "source_renames");
	if (!val)
		return WSHARD_OK;
	if (!json_is_array(val) || json_array_size(val) == 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"source_renames\" is not a non-empty array", r->name);
	r->src_from = calloc(json_array_size(val), sizeof(char *));
	r->src_to = calloc(json_array_size(val), sizeof(char *));
	if (!r->src_from || !r->src_to)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	json_array_foreach(val, i, item) {
		json_t *from = json_object_get(item, "from"), *to = json_object_get(item, "to");

		if (!json_is_object(item) || json_object_size(item) != 2 ||
		    !prefix_ok(from) || !prefix_ok(to))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': \"source_renames\"[%zu] is not {\"from\": PREFIX, \"to\": PREFIX}, each of 1 to %d characters",
						r->name, i, RULES_PREFIX_MAX - 1);
		r->src_from[i] = strdup(json_string_value(from));
		r->src_to[i] = strdup(json_string_value(to));
		r->nsrc_renames = i + 1;
		if (!r->src_from[i] || !r->src_to[i])
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

enum wshard_err rules_parse_rename(struct wshard_rules *r, json_t *val,
				   struct wshard_error *err)
{
	const char *prefix = json_string_value(json_object_get(val, "prefix"));
	const char *to = json_string_value(json_object_get(val, "to"));
	const char *from = json_string_value(json_object_get(val, "from"));
	const char *add = json_string_value(json_object_get(val, "add"));

	if (!val)
		return WSHARD_OK;
	if (!json_is_object(val) || json_object_size(val) != 3 || !prefix || !to ||
	    !from == !add || !strstr(prefix, "{n}") || !strstr(to, "{n}") ||
	    strstr(prefix, "{e}") || strstr(to, "{e}"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"rename_layers\" is not {\"prefix\", \"to\", \"from\" or \"add\"} (prefix and to each with {n}, from or add an expression)",
					r->name);
	r->rename_add = add != NULL;
	if (add)
		from = add;
	r->rename_prefix = strdup(prefix);
	r->rename_to = strdup(to);
	r->rename_from = strdup(from);
	if (!r->rename_prefix || !r->rename_to || !r->rename_from)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}
