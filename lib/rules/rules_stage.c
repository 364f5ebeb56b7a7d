/*
 * rules_stage.c - a rules document's "pipeline" key: which stage of
 * vLLM's pipeline holds each output.  A decoder layer's outputs belong to
 * the stage that runs the layer (vLLM's get_pp_indices); the others, the
 * embeddings, the final norm, the head, are kept by the first stage, the
 * last or all of them, as the model class builds them (LlamaModel makes
 * embed_tokens on the first stage only, MixtralModel on every one): the
 * rules say which, as the engine's own state showed it.
 */
#include <fnmatch.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "rules.h"

static const char *const stage_names[] = {
	[RULES_STAGE_FIRST] = "first", [RULES_STAGE_LAST] = "last",
	[RULES_STAGE_ALL] = "all",
};

static int parse_stage(const char *s)
{
	size_t i;

	for (i = 0; s && i < sizeof(stage_names) / sizeof(stage_names[0]); i++)
		if (strcmp(s, stage_names[i]) == 0)
			return (int)i;
	return -1;
}

/* A "layers" entry: a name prefix with {n}, or (in an array) an object
 * {"prefix": PREFIX, "count": EXPR}, a stack of layers of its own count
 * (a Whisper encoder's, which vLLM's make_layers splits between the
 * stages as it splits the decoder's: whisper.py:526-531). */
static bool layer_entry_ok(json_t *v, bool in_array)
{
	json_t *p = json_object_get(v, "prefix"), *c = json_object_get(v, "count");

	if (json_is_string(v))
		return strstr(json_string_value(v), "{n}") != NULL;
	return in_array && json_is_object(v) && json_object_size(v) == 2 && json_is_string(p) &&
	       strstr(json_string_value(p), "{n}") && json_is_string(c);
}

/* "layers": one entry, or a non-empty array of them (one block used
 * under two output prefixes: DeepSeek-V4's text model, alone or under
 * language_model. beside its vision tower; or stacks of their own). */
static bool layer_prefixes_ok(json_t *layers)
{
	json_t *v;
	size_t i;

	if (!json_is_array(layers))
		return layer_entry_ok(layers, false);
	if (json_array_size(layers) == 0)
		return false;
	json_array_foreach(layers, i, v)
		if (!layer_entry_ok(v, true))
			return false;
	return true;
}

/* Entry i of "layers" (v) into r->pp_layers[i] and r->pp_counts[i]. */
static enum wshard_err set_layer_entry(struct wshard_rules *r, size_t i, json_t *v,
				       struct wshard_error *err)
{
	json_t *count = json_object_get(v, "count");

	r->pp_layers[i] = strdup(json_string_value(json_is_string(v) ? v
								     : json_object_get(v, "prefix")));
	if (!r->pp_layers[i] || (count && !(r->pp_counts[i] = strdup(json_string_value(count)))))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

/* "no_pipeline": why vLLM builds or loads no pipeline of the model (its
 * load_weights looks up every encoder layer on every stage, say), so that
 * --pp is refused with that reason; not beside "pipeline". */
static enum wshard_err parse_no_pipeline(struct wshard_rules *r, json_t *root,
					 struct wshard_error *err)
{
	json_t *val = json_object_get(root, "no_pipeline");

	if (!val)
		return WSHARD_OK;
	if (!json_is_string(val) || !json_string_length(val) || json_object_get(root, "pipeline"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"no_pipeline\" is not a non-empty string (the reason) or stands beside \"pipeline\"",
					r->name);
	if (!(r->no_pp = strdup(json_string_value(val))))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

/* "same_stage": {"source": KEY, "if": COND, "reason": TEXT}: a layer n
 * where COND holds must be on the stage of the greatest layer of config
 * array KEY at or below n (DeepSeek-V4.1's kv-sharing groups, whose
 * consumers look their source layer up on their own stage). */
static enum wshard_err parse_same_stage(struct wshard_rules *r, json_t *v,
					struct wshard_error *err)
{
	json_t *src = json_object_get(v, "source"), *cond = json_object_get(v, "if");
	json_t *why = json_object_get(v, "reason");

	if (!json_is_object(v) || !json_is_string(src) || !json_is_string(why) ||
	    !json_string_length(why) || (cond && !json_is_string(cond)) ||
	    json_object_size(v) != (size_t)(2 + (cond != NULL)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': pipeline \"same_stage\" is {\"source\": a config key, \"reason\": a string, optionally \"if\": a condition}",
					r->name);
	if (!(r->pp_same_src = strdup(json_string_value(src))) ||
	    !(r->pp_same_why = strdup(json_string_value(why))) ||
	    (cond && !(r->pp_same_if = strdup(json_string_value(cond)))))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

enum wshard_err rules_parse_pipeline(struct wshard_rules *r, json_t *root,
				     struct wshard_error *err)
{
	json_t *pipeline = json_object_get(root, "pipeline");
	json_t *layers = json_object_get(pipeline, "layers");
	json_t *stages = json_object_get(pipeline, "stages");
	json_t *first_min = json_object_get(pipeline, "first_stage_min");
	json_t *none_with = json_object_get(pipeline, "none_with");
	json_t *none_if = json_object_get(pipeline, "none_if");
	json_t *same = json_object_get(pipeline, "same_stage");
	const char *key;
	json_t *val, *v;
	size_t i, n;
	enum wshard_err rc;

	rc = parse_no_pipeline(r, root, err);
	if (rc || !pipeline)
		return rc;
	if (!json_is_object(pipeline) || !layer_prefixes_ok(layers) || !json_is_array(stages) ||
	    (first_min && !json_is_string(first_min)) || (none_with && !json_is_string(none_with)) ||
	    (none_if && !json_is_string(none_if)) ||
	    json_object_size(pipeline) != (size_t)(2 + (first_min != NULL) + (none_with != NULL) +
						   (none_if != NULL) + (same != NULL)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"pipeline\" is an object of \"layers\" (a name prefix with {n}, or an array of them or of {\"prefix\", \"count\"}), \"stages\" (an array of one-key objects) and optionally \"first_stage_min\", \"none_with\" (config keys), \"none_if\" (a condition) and \"same_stage\"",
					r->name);
	if (same && (rc = parse_same_stage(r, same, err)))
		return rc;
	if (first_min && !(r->pp_first_min = strdup(json_string_value(first_min))))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if ((none_with && !(r->pp_none_with = strdup(json_string_value(none_with)))) ||
	    (none_if && !(r->pp_none_if = strdup(json_string_value(none_if)))))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	n = json_is_array(layers) ? json_array_size(layers) : 1;
	r->pp_layers = calloc(n + 1, sizeof(*r->pp_layers));
	r->pp_counts = calloc(n + 1, sizeof(*r->pp_counts));
	r->pp_stages = calloc(json_array_size(stages) + 1, sizeof(*r->pp_stages));
	if (!r->pp_layers || !r->pp_counts || !r->pp_stages)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0, rc = WSHARD_OK; i < n && !rc; i++)
		rc = set_layer_entry(r, i, json_is_array(layers) ? json_array_get(layers, i) : layers,
				     err);
	if (rc)
		return rc;
	json_array_foreach(stages, i, val) {
		int st = -1;

		json_object_foreach(val, key, v)
			st = parse_stage(json_string_value(v));
		if (!json_is_object(val) || json_object_size(val) != 1 || st < 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': pipeline stages[%zu] is not {\"PATTERN\": \"first\", \"last\" or \"all\"}",
						r->name, i);
		json_object_foreach(val, key, v) {
			r->pp_stages[i].pattern = strdup(key);
			if (!r->pp_stages[i].pattern)
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		}
		r->pp_stages[i].stage = (enum rules_stage)st;
		r->npp_stages = i + 1;
	}
	return WSHARD_OK;
}

/* The layer index of name under prefix pattern p ("model.layers.{n}."),
 * or -1. */
static long layer_of(const char *p, const char *name)
{
	const char *n = strstr(p, "{n}");
	size_t pre = (size_t)(n - p);
	char *end;
	long v;

	if (strncmp(name, p, pre) != 0 || name[pre] < '0' || name[pre] > '9' ||
	    (name[pre] == '0' && name[pre + 1] >= '0' && name[pre + 1] <= '9'))
		return -1;
	v = strtol(name + pre, &end, 10);
	return strncmp(end, n + 3, strlen(n + 3)) == 0 ? v : -1;
}

bool rules_stage_of(const struct wshard_rules *r, const char *name, long *out_layer,
		    size_t *out_stack, enum rules_stage *out_stage)
{
	size_t i;

	*out_layer = -1;
	for (i = 0; r->pp_layers[i] && *out_layer < 0; i++) {
		*out_layer = layer_of(r->pp_layers[i], name);
		*out_stack = i;
	}
	if (*out_layer >= 0)
		return true;
	for (i = 0; i < r->npp_stages; i++) {
		if (fnmatch(r->pp_stages[i].pattern, name, 0) == 0) {
			*out_stage = r->pp_stages[i].stage;
			return true;
		}
	}
	return false;
}
