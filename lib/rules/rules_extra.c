/*
 * rules_extra.c - the parts of a rules document beside its tensor rules:
 * the "extra" constant tensors ("attn_scales" entries expanded),
 * "experts_in_rows", "defaults", and the string arrays other keys hold.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "expr.h"
#include "rules.h"

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/*
 * "image_norm": "scale" or "shift" makes extra e the per-channel vector of
 * an image processor's normalisation (F32, or "model" for a tower vLLM
 * casts to the model's dtype, input norm included; without "value", "with"
 * or "when"): vLLM builds it from the processor's config, not from weights.
 */
static enum wshard_err parse_image_norm(const struct wshard_rules *r, json_t *x,
					const char *name, struct rules_extra *e,
					struct wshard_error *err)
{
	json_t *v = json_object_get(x, "image_norm");
	const char *s = json_string_value(v);
	const char *dtype = json_string_value(json_object_get(x, "dtype"));

	if (!v)
		return WSHARD_OK;
	if (s && !strcmp(s, "scale"))
		e->image_norm = RULES_IMAGE_NORM_SCALE;
	else if (s && !strcmp(s, "shift"))
		e->image_norm = RULES_IMAGE_NORM_SHIFT;
	else
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': extra '%s': unknown \"image_norm\" (scale, shift)",
					r->name, name);
	if (json_object_get(x, "value") || json_object_get(x, "with") ||
	    json_object_get(x, "when") || strstr(name, "{n}") ||
	    (dtype && strcmp(dtype, "F32") && strcmp(dtype, "model")))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': extra '%s': \"image_norm\" takes no \"value\", \"with\", \"when\" or {n}, and is F32 or model",
					r->name, name);
	return WSHARD_OK;
}

/*
 * "arange": EXPR (a config.json expression) makes extra e the I64 tensor
 * [1, EXPR] of 0 .. EXPR - 1, as torch.arange(EXPR).unsqueeze(0): the
 * position_ids buffer vLLM's BERT and RoBERTa embeddings keep in their
 * state (whole on every rank).
 */
static enum wshard_err parse_arange(const struct wshard_rules *r, json_t *x,
				    const char *name, struct rules_extra *e,
				    struct wshard_error *err)
{
	json_t *v = json_object_get(x, "arange");
	const char *dtype = json_string_value(json_object_get(x, "dtype"));
	bool bad;

	if (!v)
		return WSHARD_OK;
	if (!(json_is_string(v) || json_is_integer(v)) || json_object_get(x, "value") ||
	    json_object_get(x, "image_norm") || json_object_get(x, "with") ||
	    json_object_get(x, "when") || json_object_get(x, "each") ||
	    json_object_get(x, "option") || strstr(name, "{n}") || strstr(name, "{i}") ||
	    (dtype && strcmp(dtype, "I64")))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': extra '%s': \"arange\" is an expression, with no \"value\", \"image_norm\", \"with\", \"when\", \"each\", \"option\" or {n}, and is I64",
					r->name, name);
	e->arange = rules_expr_copy(v, &bad);
	if (!e->arange)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	e->dtype = WSHARD_I64;
	return WSHARD_OK;
}

/*
 * "sinusoid": [POSITIONS, CHANNELS] (config.json expressions) makes extra
 * e the F32 tensor [POSITIONS, CHANNELS] of transformers' sinusoids (the
 * Whisper encoder's position table, whisper.py's WhisperEncoder: vLLM
 * builds it so and Voxtral's checkpoint has none), whole on every rank.
 */
static enum wshard_err parse_sinusoid(const struct wshard_rules *r, json_t *x,
				      const char *name, struct rules_extra *e,
				      struct wshard_error *err)
{
	json_t *v = json_object_get(x, "sinusoid");
	const char *dtype = json_string_value(json_object_get(x, "dtype"));
	json_t *a = json_array_get(v, 0), *b = json_array_get(v, 1);
	bool bad;

	if (!v)
		return WSHARD_OK;
	if (json_array_size(v) != 2 || !(json_is_string(a) || json_is_integer(a)) ||
	    !(json_is_string(b) || json_is_integer(b)) || json_object_get(x, "value") ||
	    json_object_get(x, "image_norm") || json_object_get(x, "arange") ||
	    json_object_get(x, "with") || json_object_get(x, "when") ||
	    json_object_get(x, "each") || json_object_get(x, "option") ||
	    json_object_get(x, "len") || json_object_get(x, "if") || strstr(name, "{n}") ||
	    strstr(name, "{i}") || (dtype && strcmp(dtype, "F32")))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': extra '%s': \"sinusoid\" is [POSITIONS, CHANNELS], two expressions, with no \"value\", \"image_norm\", \"arange\", \"with\", \"when\", \"each\", \"option\", \"len\", \"if\" or {n}, and is F32",
					r->name, name);
	e->sinusoid[0] = rules_expr_copy(a, &bad);
	e->sinusoid[1] = rules_expr_copy(b, &bad);
	if (!e->sinusoid[0] || !e->sinusoid[1])
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

/*
 * "len": EXPR (a config.json expression, with "value") makes extra e a
 * vector of EXPR copies of its value: a parameter vLLM builds filled and no
 * load_weights fills (RADIO's ls1 and ls2, torch.ones, radio.py skipping
 * the checkpoint's).
 */
static enum wshard_err parse_len(const struct wshard_rules *r, json_t *x, const char *name,
				 struct rules_extra *e, struct wshard_error *err)
{
	json_t *v = json_object_get(x, "len");
	bool bad;

	if (!v)
		return WSHARD_OK;
	if (!(json_is_string(v) || json_is_integer(v)) || !json_object_get(x, "value") ||
	    json_object_get(x, "when") || json_object_get(x, "option") || strstr(name, "{i}"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': extra '%s': \"len\" is an expression, with a \"value\" and no \"when\", \"option\" or {i}",
					r->name, name);
	e->len = rules_expr_copy(v, &bad);
	if (!e->len)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

/* "each": {"count": EXPR, "if": COND}: extra e is written once for each
 * {i} from 0 to count - 1 for which COND holds (HRM-Text's recurrence
 * steps, a vLLM attention layer each). */
static enum wshard_err parse_each(const struct wshard_rules *r, json_t *x, const char *name,
				  struct rules_extra *e, struct wshard_error *err)
{
	json_t *each = json_object_get(x, "each");
	json_t *count = json_object_get(each, "count"), *cond = json_object_get(each, "if");
	bool bad;

	if (!each)
		return WSHARD_OK;
	if (!json_is_object(each) || !(json_is_string(count) || json_is_integer(count)) ||
	    (cond && !json_is_string(cond)) || !strstr(name, "{i}") ||
	    (e->with && strstr(e->with, "{i}")))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': extra '%s': \"each\" is {\"count\": EXPR, \"if\": COND}, for a name with {i} and a \"with\" without",
					r->name, name);
	e->each_count = rules_expr_copy(count, &bad);
	e->each_if = dup_or_null(json_string_value(cond));
	if (!e->each_count || (cond && !e->each_if))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

/* The "extra" entries, "attn_scales" expanded. */
static enum wshard_err parse_extras(struct wshard_rules *r, json_t *extra,
				    struct wshard_error *err)
{
	size_t i;

	r->extras = calloc(json_array_size(extra) + 1, sizeof(*r->extras));
	if (!r->extras)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < json_array_size(extra); i++) {
		json_t *x = json_array_get(extra, i);
		struct rules_extra *e = &r->extras[r->nextras++];
		const char *name = json_string_value(json_object_get(x, "name"));
		const char *dtype = json_string_value(json_object_get(x, "dtype"));
		const char *when = json_string_value(json_object_get(x, "when"));
		json_t *value = json_object_get(x, "value");
		enum wshard_err rc;

		if (!name)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': extra[%zu] needs \"name\"", r->name, i);
		rc = parse_image_norm(r, x, name, e, err);
		if (!rc)
			rc = parse_arange(r, x, name, e, err);
		if (!rc)
			rc = parse_sinusoid(r, x, name, e, err);
		if (rc)
			return rc;
		if (!e->image_norm && !e->arange && !e->sinusoid[0] && !json_is_number(value))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': extra '%s' needs a numeric \"value\", \"image_norm\", \"arange\" or \"sinusoid\"",
						r->name, name);
		e->model_dtype = dtype && strcmp(dtype, "model") == 0;
		if (e->model_dtype)
			e->dtype = WSHARD_BF16;	/* resolved by the plan */
		else if (e->arange)
			;	/* I64, parse_arange */
		else if (wshard_dtype_parse(dtype ? dtype : "F32", &e->dtype) < 0 ||
		    (e->dtype != WSHARD_F32 && e->dtype != WSHARD_F16 &&
		     e->dtype != WSHARD_BF16))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': extra '%s': dtype must be F32, F16, BF16 or model",
						r->name, name);
		e->name = strdup(name);
		e->value = json_number_value(value);
		e->option = dup_or_null(json_string_value(json_object_get(x, "option")));
		e->with = dup_or_null(json_string_value(json_object_get(x, "with")));
		e->cond = dup_or_null(json_string_value(json_object_get(x, "if")));
		if (!e->name || (json_is_string(json_object_get(x, "with")) && !e->with) ||
		    (json_is_string(json_object_get(x, "if")) && !e->cond))
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		if (json_object_get(x, "if") && (!e->cond || strstr(name, "{i}")))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': extra '%s': \"if\" must be a condition, for a name without {i}",
						r->name, name);
		if (json_object_get(x, "when") && (!when || strcmp(when, "quantized") != 0))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': extra '%s': unknown \"when\" (quantized)",
						r->name, name);
		e->when_quantized = when != NULL;
		if (json_object_get(x, "with") && (!e->with || !strstr(e->with, "{n}") ||
						   !strstr(name, "{n}")))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': extra '%s': \"with\" must be a tensor name with {n}, for a name with {n}",
						r->name, name);
		rc = parse_each(r, x, name, e, err);
		if (!rc)
			rc = parse_len(r, x, name, e, err);
		if (rc)
			return rc;
		if (strstr(name, "{i}") && !e->each_count && (!e->with || !strstr(e->with, "{i}")))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': extra '%s': a name with {i} needs \"each\", or a \"with\" with {n} and {i}",
						r->name, name);
		if (e->option && strcmp(e->option, "attn_scales") != 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': extra '%s': unknown option \"%s\" (attn_scales)",
						r->name, name, e->option);
	}
	return WSHARD_OK;
}

/* The scalars vLLM's Attention layer holds: its buffers (1.0, F32), then,
 * when the model is quantized, its own parameters (-1.0 until a checkpoint
 * gives them, in the model's dtype). */
static const char *const attn_scale_names[] = { "_k_scale", "_v_scale", "_q_scale", "_prob_scale" };

/*
 * One "extra" entry {"attn_scales": MODULE, "quantized": false?} as the
 * eight (or, with "quantized": false, four) entries it stands for,
 * appended to out, each with the entry's "if", "with" and "each".
 */
static enum wshard_err expand_attn_scales(const struct wshard_rules *r, json_t *x,
					  json_t *out, struct wshard_error *err)
{
	static const char *const own[] = { "name", "dtype", "value", "option", "when",
					   "image_norm", "arange", "sinusoid", "len" };
	const char *module = json_string_value(json_object_get(x, "attn_scales"));
	json_t *quantized = json_object_get(x, "quantized");
	size_t i, k;

	for (k = 0; k < sizeof(own) / sizeof(own[0]); k++)
		if (json_object_get(x, own[k]))
			module = NULL;
	if (!module || !*module || (quantized && !json_is_boolean(quantized)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': extra \"attn_scales\" is an attention module's name, with \"if\", \"with\", \"each\" or \"quantized\": false at most",
					r->name);
	for (k = 0; k < (json_is_false(quantized) ? 1 : 2); k++) {
		for (i = 0; i < 4; i++) {
			json_t *e = json_deep_copy(x);
			char name[512];

			snprintf(name, sizeof(name), "%s.%s", module, attn_scale_names[i] + k);
			if (!e || json_object_del(e, "attn_scales") < 0 ||
			    (quantized && json_object_del(e, "quantized") < 0) ||
			    json_object_set_new(e, "name", json_string(name)) ||
			    json_object_set_new(e, "dtype", json_string(k ? "model" : "F32")) ||
			    json_object_set_new(e, "value", json_real(k ? -1.0 : 1.0)) ||
			    json_object_set_new(e, k ? "when" : "option",
						json_string(k ? "quantized" : "attn_scales")) ||
			    json_array_append_new(out, e)) {
				json_decref(e);
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			}
		}
	}
	return WSHARD_OK;
}

/* "extra" with each "attn_scales" entry expanded (a new reference in
 * *out). */
static enum wshard_err expand_extras(const struct wshard_rules *r, json_t *extra, json_t **out,
				     struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	*out = json_array();
	for (i = 0; *out && !rc && i < json_array_size(extra); i++) {
		json_t *x = json_array_get(extra, i);

		if (json_object_get(x, "attn_scales"))
			rc = expand_attn_scales(r, x, *out, err);
		else if (json_array_append(*out, x))
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	if (!*out)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return rc;
}

enum wshard_err rules_parse_extras(struct wshard_rules *r, json_t *extra,
				    struct wshard_error *err)
{
	enum wshard_err rc;
	json_t *all;

	if (!extra)
		return WSHARD_OK;
	if (!json_is_array(extra))
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': \"extra\" is not an array",
					r->name);
	rc = expand_extras(r, extra, &all, err);
	if (!rc)
		rc = parse_extras(r, all, err);
	json_decref(all);
	return rc;
}

enum wshard_err rules_parse_unstack(struct wshard_rules *r, json_t *val,
				    struct wshard_error *err)
{
	size_t i;

	if (!val)
		return WSHARD_OK;
	if (!json_is_array(val))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"experts_in_rows\" is not an array", r->name);
	r->unstack = calloc(json_array_size(val) + 1, sizeof(*r->unstack));
	if (!r->unstack)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < json_array_size(val); i++) {
		json_t *x = json_array_get(val, i), *n = json_object_get(x, "experts");
		const char *match = json_string_value(json_object_get(x, "match"));
		struct rules_unstack *u = &r->unstack[r->nunstack++];
		bool bad;

		if (!match || !*match || strchr(match, '{') != strrchr(match, '{') ||
		    (strchr(match, '{') && !strstr(match, "{n}")))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': experts_in_rows[%zu] needs a \"match\" (a tensor name, {n} at most)",
						r->name, i);
		u->match = strdup(match);
		u->count = rules_expr_copy(n, &bad);
		if (bad)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': experts_in_rows '%s' needs \"experts\", an integer or an expression",
						r->name, match);
		if (!u->match || !u->count)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		if (json_object_get(x, "rows")) {
			u->rows = rules_expr_copy(json_object_get(x, "rows"), &bad);
			if (bad)
				return wshard_error_set(err, WSHARD_EINVAL,
							"'%s': experts_in_rows '%s': \"rows\" is an integer or an expression",
							r->name, match);
			if (!u->rows)
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		}
	}
	return WSHARD_OK;
}

enum wshard_err rules_parse_strings(const struct wshard_rules *r, json_t *val, const char *what,
				    bool nonempty, char ***out, size_t *n, struct wshard_error *err)
{
	size_t i;

	if (val && !json_is_array(val))
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': %s is not an array", r->name,
					what);
	*out = calloc(json_array_size(val) + 1, sizeof(char *));
	if (!*out)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < json_array_size(val); i++) {
		const char *s = json_string_value(json_array_get(val, i));

		if (!s || (nonempty && !*s))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': %s entry %zu is not a%s string", r->name, what,
						i, nonempty ? " non-empty" : "");
		(*out)[*n] = strdup(s);
		if (!(*out)[(*n)++])
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

/* A config key, or "KEY[i]": element i of an array key. */
static bool key_or_element(const char *s)
{
	const char *open = strchr(s, '[');
	char key[128];
	size_t n;

	if (!open)
		return expr_is_bare_key(s);
	n = (size_t)(open - s);
	if (n >= sizeof(key) || !isdigit((unsigned char)open[1]))
		return false;
	memcpy(key, s, n);
	key[n] = '\0';
	for (open++; isdigit((unsigned char)*open); open++)
		;
	return expr_is_bare_key(key) && open[0] == ']' && !open[1];
}

enum wshard_err rules_parse_defaults(struct wshard_rules *r, json_t *defaults,
				     struct wshard_error *err)
{
	const char *key;
	json_t *val;

	if (!defaults)
		return WSHARD_OK;
	if (!json_is_object(defaults))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"defaults\" is not an object", r->name);
	json_object_foreach(defaults, key, val) {
		if (!json_is_integer(val) &&
		    !(json_is_string(val) && key_or_element(json_string_value(val))))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': defaults \"%s\" is neither an integer nor a config key",
						r->name, key);
	}
	r->defaults = json_incref(defaults);
	return WSHARD_OK;
}
