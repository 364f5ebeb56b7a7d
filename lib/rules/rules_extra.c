/*
 * rules_extra.c - the parts of a rules document beside its tensor rules:
 * the "extra" constant tensors, the tied embeddings ("tie"), a rule's
 * "chunks" and "deinterleave", and a fused operator's "sizes", "groups"
 * and "zero".
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

/* An expression given as a string or an integer, copied as text (NULL:
 * out of memory). */
static char *expr_text(json_t *v)
{
	char buf[32];

	if (json_is_string(v))
		return strdup(json_string_value(v));
	snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
	return strdup(buf);
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
	e->arange = expr_text(v);
	if (!e->arange)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	e->dtype = WSHARD_I64;
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

	if (!each)
		return WSHARD_OK;
	if (!json_is_object(each) || !(json_is_string(count) || json_is_integer(count)) ||
	    (cond && !json_is_string(cond)) || !strstr(name, "{i}") ||
	    (e->with && strstr(e->with, "{i}")))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': extra '%s': \"each\" is {\"count\": EXPR, \"if\": COND}, for a name with {i} and a \"with\" without",
					r->name, name);
	e->each_count = expr_text(count);
	e->each_if = dup_or_null(json_string_value(cond));
	if (!e->each_count || (cond && !e->each_if))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

enum wshard_err rules_parse_extras(struct wshard_rules *r, json_t *extra,
				    struct wshard_error *err)
{
	size_t i;

	if (!extra)
		return WSHARD_OK;
	if (!json_is_array(extra))
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': \"extra\" is not an array",
					r->name);
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
		if (rc)
			return rc;
		if (!e->image_norm && !e->arange && !json_is_number(value))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': extra '%s' needs a numeric \"value\", \"image_norm\" or \"arange\"",
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

static char *expr_copy(json_t *d, bool *bad);

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
		u->count = expr_copy(n, &bad);
		if (bad)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': experts_in_rows '%s' needs \"experts\", an integer or an expression",
						r->name, match);
		if (!u->match || !u->count)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
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

/* A copy of JSON string or integer d (an expression over config.json), or
 * NULL with *bad set when it is neither. */
static char *expr_copy(json_t *d, bool *bad)
{
	char buf[32];

	*bad = false;
	if (json_is_integer(d)) {
		snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(d));
		return strdup(buf);
	}
	if (json_is_string(d))
		return strdup(json_string_value(d));
	*bad = true;
	return NULL;
}

enum wshard_err rules_parse_exprs(json_t *a, char **out, int *n, size_t *bad_at)
{
	bool bad;
	size_t i;

	for (i = 0; i < json_array_size(a); i++) {
		out[i] = expr_copy(json_array_get(a, i), &bad);
		if (bad) {
			*bad_at = i;
			return WSHARD_EINVAL;
		}
		if (!out[i])
			return WSHARD_ENOMEM;
		*n = (int)i + 1;
	}
	return WSHARD_OK;
}

/* "reshape": 1 to WSHARD_MAX_DIMS expressions, on a plain split without
 * "view" (the header's dimensions: GLM-5-Next's A_log [nh] held as
 * [1, 1, nh/tp, 1]). */
static enum wshard_err parse_reshape(const struct wshard_rules *r, struct rules_rule *rule,
				     json_t *rs, struct wshard_error *err)
{
	enum wshard_err rc;
	size_t bad_at;

	if (!rs)
		return WSHARD_OK;
	if (!json_is_array(rs) || !json_array_size(rs) || json_array_size(rs) > WSHARD_MAX_DIMS ||
	    rule->view || (rule->kind != RULE_ROW && rule->kind != RULE_COL &&
			   rule->kind != RULE_REPLICATE))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"reshape\" is an array of 1 to %d expressions on a \"row\", \"col\" or \"replicate\" split without \"view\"",
					r->name, rule->match, WSHARD_MAX_DIMS);
	rc = rules_parse_exprs(rs, rule->reshape, &rule->nreshape, &bad_at);
	if (rc == WSHARD_EINVAL)
		return wshard_error_set(err, rc,
					"'%s': rule '%s': \"reshape\" entry %zu is neither a number nor a string",
					r->name, rule->match, bad_at);
	if (rc)
		return wshard_error_set(err, rc, "out of memory");
	return WSHARD_OK;
}

/*
 * "chunks" (a column split's cut dimension holds that many parts, each
 * cut by tp: Llama 4's transposed gate_up_proj, gate then up; Granite
 * MoE's input_linear [E, 2I, H] as it is), "experts" (a
 * transposed split's dimension 0 counts the experts, which
 * --expert-parallel gives whole to the ranks that hold them) and
 * "deinterleave" (rows per block, an expression: Llama 4's q/k heads,
 * which vLLM reorders even rows first) on a fused part, or true on a
 * plain "col" split, whose rank's cut is the block (Inkling's experts,
 * gate and up rows interleaved); "reshape" (parse_reshape); "beside"
 * (Inkling's sink experts' w2 [E, H, I] as vLLM holds it, [H, E*I/tp])
 * on a "col" split with "rows": 2; "pad_to" (an
 * expression: Kimi Linear's experts, which vLLM widens to 256 a rank) on
 * a fused part (of a replicated operator: at every tp) or a plain "col"
 * split; "qkv_groups" (q/k/v heads stored by
 * kv group: Falcon's query_key_value) on an "unpack" of q/k/v, or (k and
 * v heads by kv head: TeleChat2's key_value) on a "fuse" of its k+v,
 * which then needs no "sizes"; "concat"
 * (the sources {e} matches are row pieces of one tensor: Qwen4-Exp's
 * ngram_embedding.shard_{e}) on a "row", "vocab" or "replicate" split.
 */
enum wshard_err rules_parse_chunks(const struct wshard_rules *r, struct rules_rule *rule,
				   json_t *t, struct wshard_error *err)
{
	json_t *chunks = json_object_get(t, "chunks"), *di = json_object_get(t, "deinterleave");
	json_t *experts = json_object_get(t, "experts"), *pad = json_object_get(t, "pad_to");
	json_t *concat = json_object_get(t, "concat");
	/* a fuse of q/k/v's k and v from one source */
	bool kv_pair = rule->kind == RULE_FUSE && rule->nparts == 2 &&
		       rule->order[0] == 1 && rule->order[1] == 2;
	enum wshard_err rc;
	bool bad = false;

	if (chunks && (!json_is_integer(chunks) || json_integer_value(chunks) < 1 ||
		       json_integer_value(chunks) > 64 || rule->kind != RULE_COL ||
		       (rule->transpose ? rule->rows != 2 : rule->rows > 1)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"chunks\" is an integer from 1 to 64 and needs \"split\": \"col\" (\"rows\": 2 with \"transpose\", else 1)",
					r->name, rule->match);
	rule->chunks = chunks ? (int)json_integer_value(chunks) : 0;
	if (experts && (!json_is_boolean(experts) || (!rule->transpose && rule->kind != RULE_COL)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"experts\" is true or false and needs \"transpose\" or \"split\": \"col\"",
					r->name, rule->match);
	rule->experts = json_is_true(experts);
	if (pad && (rule->pad_to = expr_copy(pad, &bad)) == NULL && !bad)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (pad && (bad || (rule->kind != RULE_FUSE && rule->kind != RULE_COL) ||
		    rule->transpose || rule->chunks > 1 || rule->rows > 1 || rule->nparts > 1))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"pad_to\" is an expression (rows or columns a rank) on a \"fuse\" part or a \"col\" split without \"transpose\", \"chunks\" or \"rows\"",
					r->name, rule->match);
	/* every rank holds a replicated operator's parts whole at any tp, so
	 * their padding is the same at tp 1 (Qwen4Exp's hyper-connection
	 * projections, padded to 16 rows together) */
	rule->pad_always = pad && rule->kind == RULE_FUSE && r->ops[rule->op].kind == OP_REPLICATE;
	rule->qkv_groups = json_is_true(json_object_get(t, "qkv_groups"));
	if (json_object_get(t, "qkv_groups") &&
	    (!json_is_boolean(json_object_get(t, "qkv_groups")) ||
	     (rule->kind != RULE_UNPACK && !kv_pair) ||
	     r->ops[rule->op].kind != OP_QKV || r->ops[rule->op].sizes[0]))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"qkv_groups\" is true or false on an \"unpack\" or a \"fuse\" of parts k+v of a \"split\": \"qkv\" operator without \"sizes\"",
					r->name, rule->match);
	if (rule->kind == RULE_FUSE && rule->nparts > 1 && !r->ops[rule->op].sizes[0] &&
	    !(kv_pair && rule->qkv_groups))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': operator '%s' needs \"sizes\" for a source holding several parts (or \"qkv_groups\" on its k+v)",
					r->name, rule->match, r->ops[rule->op].name);
	rule->concat = json_is_true(concat);
	if (concat &&
	    (!json_is_boolean(concat) || !strstr(rule->match, "{e}") ||
	     strstr(rule->output, "{e}") || rule->view || rule->rows ||
	     (rule->kind != RULE_ROW && rule->kind != RULE_VOCAB && rule->kind != RULE_REPLICATE)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"concat\" is true or false on a \"row\", \"vocab\" or \"replicate\" split whose match has {e} and output none, without \"rows\" or \"view\"",
					r->name, rule->match);
	rule->deinterleave_cut = json_is_true(di);
	if (rule->deinterleave_cut &&
	    (rule->kind != RULE_COL || rule->transpose || rule->chunks > 1 || rule->rows > 1 ||
	     rule->pad_to || rule->experts))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"deinterleave\": true needs a \"col\" split without \"transpose\", \"chunks\", \"rows\", \"pad_to\" or \"experts\"",
					r->name, rule->match);
	if (di && !rule->deinterleave_cut &&
	    (rule->deinterleave = expr_copy(di, &bad)) == NULL && !bad)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (di && !rule->deinterleave_cut && (bad || rule->kind != RULE_FUSE))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"deinterleave\" is an expression (rows per block) on a \"fuse\" part, or true on a \"col\" split",
					r->name, rule->match);
	rc = parse_reshape(r, rule, json_object_get(t, "reshape"), err);
	if (rc)
		return rc;
	rule->beside = json_is_true(json_object_get(t, "beside"));
	if (json_object_get(t, "beside") &&
	    (!json_is_boolean(json_object_get(t, "beside")) || rule->kind != RULE_COL ||
	     rule->rows != 2 || rule->transpose || rule->chunks > 1 || rule->pad_to ||
	     rule->experts || di))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"beside\" is true or false on a \"col\" split with \"rows\": 2, without \"transpose\", \"chunks\", \"pad_to\", \"experts\" or \"deinterleave\"",
					r->name, rule->match);
	return WSHARD_OK;
}


static enum wshard_err parse_sizes(const struct wshard_rules *r, struct rules_op *op,
				   json_t *sizes, struct wshard_error *err)
{
	enum wshard_err rc;
	size_t bad_at;
	int n;

	if (!sizes)
		return WSHARD_OK;
	if (!json_is_array(sizes) || json_array_size(sizes) != (size_t)op->nparts)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': fused operator '%s': \"sizes\" needs one expression per part (%d)",
					r->name, op->name, op->nparts);
	rc = rules_parse_exprs(sizes, op->sizes, &n, &bad_at);
	if (rc == WSHARD_EINVAL)
		return wshard_error_set(err, rc,
					"'%s': fused operator '%s': size %zu is neither a number nor a string",
					r->name, op->name, bad_at);
	if (rc)
		return wshard_error_set(err, rc, "out of memory");
	return WSHARD_OK;
}

static enum wshard_err parse_groups(const struct wshard_rules *r, struct rules_op *op,
				    json_t *groups, struct wshard_error *err)
{
	const char *key;
	json_t *d;
	bool bad;
	int i;

	if (!groups)
		return WSHARD_OK;
	if (!json_is_object(groups) || op->kind != OP_ROWS)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': fused operator '%s': \"groups\" is an object of parts, for \"split\": \"row\"",
					r->name, op->name);
	json_object_foreach(groups, key, d) {
		for (i = 0; i < op->nparts && strcmp(op->parts[i], key); i++)
			;
		bad = true;
		if (i < op->nparts && !op->groups[i])
			op->groups[i] = expr_copy(d, &bad);
		if (bad)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': fused operator '%s': \"groups\" entry '%s' is not a part with a number or expression",
						r->name, op->name, key);
		if (!op->groups[i])
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

/* "zero": the parts a checkpoint may lack, zeros of their "sizes" then. */
static enum wshard_err parse_zero(const struct wshard_rules *r, struct rules_op *op,
				  json_t *zero, struct wshard_error *err)
{
	size_t j;
	int i;

	if (!zero)
		return WSHARD_OK;
	if (!json_is_array(zero) || !op->sizes[0] || op->kind == OP_QKV)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': fused operator '%s': \"zero\" is an array of parts, with \"sizes\", not for \"split\": \"qkv\"",
					r->name, op->name);
	for (j = 0; j < json_array_size(zero); j++) {
		const char *name = json_string_value(json_array_get(zero, j));

		for (i = 0; name && i < op->nparts && strcmp(op->parts[i], name); i++)
			;
		if (!name || i == op->nparts)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': fused operator '%s': \"zero\" entry %zu is not one of its parts",
						r->name, op->name, j);
		op->zero[i] = true;
	}
	return WSHARD_OK;
}

enum wshard_err rules_parse_op_keys(const struct wshard_rules *r, struct rules_op *op,
				    json_t *val, struct wshard_error *err)
{
	enum wshard_err rc = parse_sizes(r, op, json_object_get(val, "sizes"), err);

	if (!rc)
		rc = parse_groups(r, op, json_object_get(val, "groups"), err);
	return rc ? rc : parse_zero(r, op, json_object_get(val, "zero"), err);
}
