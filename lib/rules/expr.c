/*
 * expr.c - the evaluator of rule files' shape expressions: a recursive
 * descent over sums of products of atoms (integers, config.json keys,
 * parenthesised sums; + - * / %), with every overflow flagged.  Keys that
 * catalog_read.c normalises (hidden_size, num_attention_heads,
 * num_key_value_heads, head_dim, num_experts) are
 * taken from there, so a config that leaves them implicit still works.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "source/catalog.h"
#include "expr.h"

struct expr {
	const char *s;
	const struct wshard_config *cfg;
	const char *missing;		/* first unknown name */
	size_t missing_len;
	int depth;			/* parentheses open */
	long layer;			/* the value of n; -1: n is a key */
	long index;			/* the value of i; -1: i is a key */
	bool bad;
	bool used_layer;		/* n was read */
};

static int64_t expr_sum(struct expr *x);

/* The sum after the opening bracket at x->s, up to its close (')' of a
 * parenthesis, ']' of an array index); nested 32 deep at most. */
static int64_t expr_enclosed(struct expr *x, char close)
{
	int64_t v;

	if (++x->depth > 32) {
		x->bad = true;
		return 0;
	}
	x->s++;
	v = expr_sum(x);
	x->depth--;
	while (*x->s == ' ')
		x->s++;
	if (*x->s == close)
		x->s++;
	else
		x->bad = true;
	return v;
}

/*
 * Gemma 4's full-attention kv heads: Google's config.json names them
 * num_global_key_value_heads, which transformers 5 saves again as each
 * full layer's num_key_value_heads in per_layer_config (the same value in
 * every entry that has one).
 */
static json_t *per_layer_alias(const struct wshard_config *c, const char *key)
{
	json_t *plc, *layer;
	const char *k;

	if (strcmp(key, "num_global_key_value_heads") != 0)
		return NULL;
	plc = catalog_config_key(c, "per_layer_config");
	json_object_foreach(plc, k, layer)
		if (json_is_integer(json_object_get(layer, "num_key_value_heads")))
			return json_object_get(layer, "num_key_value_heads");
	return NULL;
}

/*
 * ".a.b" after "KEY[i]": a member of an object element, through nested
 * objects (Nemotron-NAS's block_configs[n].attention.n_heads_in_group);
 * x->s is at the '.', and is left past the path.  NULL where a member is
 * absent or null (the key counts as missing).
 */
static json_t *member_path(struct expr *x, json_t *v)
{
	while (*x->s == '.' && (isalpha((unsigned char)x->s[1]) || x->s[1] == '_')) {
		const char *start = ++x->s;
		char key[64];

		while (isalnum((unsigned char)*x->s) || *x->s == '_')
			x->s++;
		if ((size_t)(x->s - start) >= sizeof(key)) {
			v = NULL;
			continue;
		}
		memcpy(key, start, (size_t)(x->s - start));
		key[x->s - start] = '\0';
		v = json_is_object(v) ? json_object_get(v, key) : NULL;
	}
	return json_is_null(v) ? NULL : v;
}

static int64_t config_value(struct expr *x, const char *name, size_t len)
{
	const struct wshard_config *c = x->cfg;
	static const struct { const char *name; size_t off; } normalized[] = {
		{ "hidden_size", offsetof(struct wshard_config, hidden_size) },
		{ "num_attention_heads", offsetof(struct wshard_config, num_attention_heads) },
		{ "num_key_value_heads", offsetof(struct wshard_config, num_key_value_heads) },
		{ "head_dim", offsetof(struct wshard_config, head_dim) },
		{ "num_experts", offsetof(struct wshard_config, num_experts) },
	};
	char key[128];
	json_t *v;
	size_t i;

	if (x->layer >= 0 && len == 1 && *name == 'n') {
		x->used_layer = true;
		return x->layer;
	}
	if (x->index >= 0 && len == 1 && *name == 'i')
		return x->index;
	if (c->tp > 0 && len == 2 && strncmp(name, "tp", 2) == 0)
		return c->tp;

	for (i = 0; i < sizeof(normalized) / sizeof(normalized[0]); i++) {
		if (strlen(normalized[i].name) == len &&
		    strncmp(normalized[i].name, name, len) == 0) {
			int64_t val = *(const int64_t *)((const char *)c + normalized[i].off);

			if (val > 0)
				return val;
		}
	}
	v = NULL;
	if (len < sizeof(key)) {	/* a longer name is no key: missing */
		memcpy(key, name, len);
		key[len] = '\0';
		v = catalog_config_key(c, key);
		if (json_is_null(v))	/* null stands for the default */
			v = NULL;
		if (!v)
			v = per_layer_alias(c, key);
		if (!v && c->defaults)
			v = json_object_get((json_t *)c->defaults, key);
		if (json_is_string(v)) {	/* a default that names another key */
			const char *other = json_string_value(v);

			v = catalog_config_key(c, other);
			if (json_is_null(v))
				v = NULL;
			/* that key's own default where config.json lacks it too
			 * (Moondream 3's num_attention_heads: config.text.n_heads,
			 * vLLM's 32 where the release's config says none) */
			if (!v && c->defaults && json_is_integer(json_object_get(
					(json_t *)c->defaults, other)))
				v = json_object_get((json_t *)c->defaults, other);
		}
	}
	/* "KEY[i]": element i of an array (MiMo-V2-Flash's
	 * hybrid_layer_pattern[n], a layer's kind); x->s is at the '[' */
	if (*x->s == '[') {
		int64_t i = expr_enclosed(x, ']');

		v = json_is_array(v) && i >= 0 && (size_t)i < json_array_size(v) ?
			    json_array_get(v, (size_t)i) : NULL;
		v = member_path(x, v);
	}
	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_boolean(v))		/* LongCat's mla_scale_q_lora: true */
		return json_is_true(v);
	if (!x->missing) {
		x->missing = name;
		x->missing_len = len;
	}
	return 0;
}

static int64_t expr_atom(struct expr *x)
{
	const char *start;
	int64_t v = 0;

	while (*x->s == ' ')
		x->s++;
	if (*x->s == '(')
		return expr_enclosed(x, ')');
	start = x->s;
	if (isdigit((unsigned char)*x->s)) {
		while (isdigit((unsigned char)*x->s)) {
			if (v > INT64_MAX / 100)
				x->bad = true;
			else
				v = v * 10 + (*x->s - '0');
			x->s++;
		}
		return v;
	}
	/* a key may have dots: a nested key */
	while (isalnum((unsigned char)*x->s) || *x->s == '_' ||
	       (*x->s == '.' && x->s != start))
		x->s++;
	if (x->s == start) {
		x->bad = true;
		return 0;
	}
	return config_value(x, start, (size_t)(x->s - start));
}

static int64_t expr_product(struct expr *x)
{
	int64_t v = expr_atom(x);

	for (;;) {
		while (*x->s == ' ')
			x->s++;
		if (*x->s == '*') {
			x->s++;
			if (__builtin_mul_overflow(v, expr_atom(x), &v))
				x->bad = true;
		} else if (*x->s == '/') {
			int64_t d;

			x->s++;
			d = expr_atom(x);
			v = d && !(v == INT64_MIN && d == -1) ? v / d : 0;
		} else if (*x->s == '%') {
			int64_t d;

			x->s++;
			d = expr_atom(x);
			v = d && d != -1 ? v % d : 0;
		} else {
			return v;
		}
	}
}

static int64_t expr_sum(struct expr *x)
{
	int64_t v = expr_product(x);

	for (;;) {
		while (*x->s == ' ')
			x->s++;
		if (*x->s == '+') {
			x->s++;
			if (__builtin_add_overflow(v, expr_product(x), &v))
				x->bad = true;
		} else if (*x->s == '-') {
			x->s++;
			if (__builtin_sub_overflow(v, expr_product(x), &v))
				x->bad = true;
		} else {
			return v;
		}
	}
}

enum wshard_err expr_eval_dim(const struct wshard_config *cfg, const char *s,
			      const char *tensor, int64_t *out,
			      struct wshard_error *err)
{
	return expr_eval_layer_dim(cfg, s, -1, tensor, out, NULL, err);
}

enum wshard_err expr_eval_layer_dim(const struct wshard_config *cfg, const char *s,
				    long layer, const char *tensor, int64_t *out,
				    bool *used_layer, struct wshard_error *err)
{
	struct expr x = { .s = s, .cfg = cfg, .layer = layer, .index = -1 };

	*out = expr_sum(&x);
	if (used_layer)
		*used_layer = x.used_layer;
	if (x.bad || *x.s)
		return wshard_error_set(err, WSHARD_EINVAL,
					"rule for '%s': malformed shape expression \"%s\"",
					tensor, s);
	if (x.missing)
		return wshard_error_set(err, WSHARD_EINVAL,
					"config.json has no integer '%.*s', needed to check '%s'",
					(int)x.missing_len, x.missing, tensor);
	return WSHARD_OK;
}

/* The comparison at *s, advanced past it: 0 none, else its index + 1. */
static int cmp_op(const char **s)
{
	static const char *const ops[] = { ">=", "<=", "==", "!=", ">", "<" };
	int i;

	while (**s == ' ')
		(*s)++;
	for (i = 0; i < 6; i++)
		if (strncmp(*s, ops[i], strlen(ops[i])) == 0) {
			*s += strlen(ops[i]);
			return i + 1;
		}
	return 0;
}

/* Config array key for the condition of tensor, or NULL with err set
 * (WSHARD_EINVAL, naming both) where config.json has no such array. */
static json_t *cond_array(const struct wshard_config *cfg, char *key, const char *tensor,
			  struct wshard_error *err)
{
	json_t *v = catalog_config_key(cfg, key);

	if (json_is_array(v))
		return v;
	wshard_error_set(err, WSHARD_EINVAL,
			 "config.json has no array '%s', needed by the condition of '%s'", key,
			 tensor);
	return NULL;
}

/*
 * "A in KEY": whether config key KEY (dotted as in shapes) is an array that
 * holds the integer a; *s is past "in".  Kimi Linear's KDA layers are
 * linear_attn_config.kda_layers, numbered from 1: "n+1 in ...".
 */
static enum wshard_err in_array(const struct wshard_config *cfg, const char *s, int64_t a,
				const char *tensor, const char *cond, bool *out,
				struct wshard_error *err)
{
	char key[128];
	size_t n = 0, i;
	json_t *v;

	while (*s == ' ')
		s++;
	while (s[n] && s[n] != ' ' && n < sizeof(key) - 1)
		n++;
	memcpy(key, s, n);
	key[n] = '\0';
	for (i = n; s[i] == ' '; i++)
		;
	if (!n || s[i] || !expr_is_bare_key(key))
		return wshard_error_set(err, WSHARD_EINVAL,
					"rule for '%s': malformed condition \"%s\" (\"in\" takes one key)",
					tensor, cond);
	v = cond_array(cfg, key, tensor, err);
	if (!v)
		return WSHARD_EINVAL;
	for (i = 0; i < json_array_size(v); i++)
		*out |= json_is_integer(json_array_get(v, i)) &&
			json_integer_value(json_array_get(v, i)) == a;
	return WSHARD_OK;
}

/*
 * "KEY == 'text'" (or "!="): whether config key KEY is that text (LLaVA's
 * vision_config.model_type == 'pixtral'; absent or not a text: not equal),
 * and "KEY[i] == 'text'": element i of config array KEY, for arrays of
 * strings (Gemma 4's layer_types[n] == 'full_attention').  *handled is
 * false, and nothing done, where s quotes no text.
 */
static enum wshard_err text_cond(const struct wshard_config *cfg, const char *s, long layer,
				 long index, const char *tensor, bool *handled, bool *out,
				 struct wshard_error *err)
{
	struct expr x = { .cfg = cfg, .layer = layer, .index = index };
	const char *q = strchr(s, '\''), *open = strchr(s, '['), *end;
	size_t klen;
	char key[128];
	int64_t i = -1;
	int op = 0;
	json_t *v;

	*handled = q != NULL;
	if (!q)
		return WSHARD_OK;
	end = strchr(q + 1, '\'');
	if (!open || open > q)
		open = NULL;
	x.s = s;
	while (*x.s && *x.s != ' ' && *x.s != '=' && *x.s != '!' && *x.s != '[')
		x.s++;
	klen = (size_t)(x.s - s);
	if (klen && klen < sizeof(key)) {
		memcpy(key, s, klen);
		key[klen] = '\0';
		if (open && x.s == open)
			i = expr_enclosed(&x, ']');
		op = cmp_op(&x.s);
		while (*x.s == ' ')
			x.s++;
	}
	if (!op || (op != 3 && op != 4) || x.bad || x.missing || !expr_is_bare_key(key) ||
	    x.s != q || !end || end[1])
		return wshard_error_set(err, WSHARD_EINVAL,
					"rule for '%s': malformed condition \"%s\" (a quoted text compares as KEY == 'text' or KEY[i] == 'text')",
					tensor, s);
	if (open) {
		v = cond_array(cfg, key, tensor, err);
		if (!v)
			return WSHARD_EINVAL;
		v = i >= 0 && (size_t)i < json_array_size(v) ? json_array_get(v, (size_t)i) : NULL;
		if (!json_is_string(v))
			return wshard_error_set(err, WSHARD_EINVAL,
						"config.json's '%s' has no text at %lld, needed by the condition of '%s'",
						key, (long long)i, tensor);
	} else {
		v = catalog_config_key(cfg, key);
	}
	*out = (json_is_string(v) && strlen(json_string_value(v)) == (size_t)(end - q - 1) &&
		!strncmp(json_string_value(v), q + 1, (size_t)(end - q - 1))) == (op == 3);
	return WSHARD_OK;
}

/*
 * "A && B" (and true) or "A || B" (and false), op pointing at the
 * operator in s: B is evaluated only where A does not decide it
 * ("audio_config.num_hidden_layers && n < ...": a model without the
 * tower).
 */
static enum wshard_err eval_pair(const struct wshard_config *cfg, const char *s,
				 const char *op, bool and, long layer, long index,
				 const char *tensor, bool *out, struct wshard_error *err)
{
	char *left = strndup(s, (size_t)(op - s));
	bool l = false;
	enum wshard_err rc;

	while (left && *left && left[strlen(left) - 1] == ' ')
		left[strlen(left) - 1] = '\0';
	for (op += 2; *op == ' '; op++)
		;
	rc = left ? expr_eval_cond(cfg, left, layer, index, tensor, &l, err) :
		    wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	free(left);
	if (rc || l != and) {
		*out = !rc && l;
		return rc;
	}
	return expr_eval_cond(cfg, op, layer, index, tensor, out, err);
}

enum wshard_err expr_eval_cond(const struct wshard_config *cfg, const char *s,
			       long layer, long index, const char *tensor, bool *out,
			       struct wshard_error *err)
{
	struct expr x = { .s = s, .cfg = cfg, .layer = layer, .index = index };
	const char *and = strstr(s, "&&"), *or = strstr(s, "||");
	int64_t a, b = 0;
	int op;
	bool text;
	enum wshard_err rc;

	*out = false;
	/* && first: || binds tighter ("X && A || B" is X and (A or B), as a
	 * use's "if" joined to its block's by " && " as text must read) */
	if (and)
		return eval_pair(cfg, s, and, true, layer, index, tensor, out, err);
	if (or)
		return eval_pair(cfg, s, or, false, layer, index, tensor, out, err);
	rc = text_cond(cfg, s, layer, index, tensor, &text, out, err);
	if (text)
		return rc;
	if (*s == '!') {	/* "!key": the key absent, null or 0 */
		if (!expr_is_bare_key(s + 1))
			return wshard_error_set(err, WSHARD_EINVAL,
						"rule for '%s': malformed condition \"%s\" (\"!\" takes one key)",
						tensor, s);
		rc = expr_eval_cond(cfg, s + 1, layer, index, tensor, out, err);
		*out = !*out;
		return rc;
	}
	a = expr_sum(&x);
	while (*x.s == ' ')
		x.s++;
	if (!x.bad && !x.missing && !strncmp(x.s, "in ", 3))
		return in_array(cfg, x.s + 2, a, tensor, s, out, err);
	op = cmp_op(&x.s);
	if (op)
		b = expr_sum(&x);
	if (x.bad || *x.s)
		return wshard_error_set(err, WSHARD_EINVAL,
					"rule for '%s': malformed condition \"%s\"", tensor, s);
	if (x.missing && !op && expr_is_bare_key(s))
		return WSHARD_OK;	/* absent or null: false */
	if (x.missing)
		return wshard_error_set(err, WSHARD_EINVAL,
					"config.json has no integer '%.*s', needed by the condition of '%s'",
					(int)x.missing_len, x.missing, tensor);
	switch (op) {
	case 0: *out = a != 0; break;
	case 1: *out = a >= b; break;
	case 2: *out = a <= b; break;
	case 3: *out = a == b; break;
	case 4: *out = a != b; break;
	case 5: *out = a > b; break;
	default: *out = a < b; break;
	}
	return WSHARD_OK;
}

int64_t expr_config_count(const struct wshard_config *cfg, const char *key)
{
	char buf[128];
	json_t *v;

	if (strlen(key) >= sizeof(buf))
		return -1;
	strcpy(buf, key);
	v = catalog_config_key(cfg, buf);
	if (json_is_array(v))
		return (int64_t)json_array_size(v);
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

bool expr_is_bare_key(const char *s)
{
	if (!s || !*s || isdigit((unsigned char)*s))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.')
			return false;
	return true;
}
