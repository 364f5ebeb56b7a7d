/*
 * rules_parse.c - a rules document parsed and checked: its fused
 * operators, its rules (match, split, output, shape), its extra constant
 * tensors, the tied embeddings, and the scale rules derived for FP8
 * checkpoints.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/fpconv.h"
#include "expr.h"
#include "rules.h"

/*
 * Fused operators known to every rules file; a file may declare more
 * (row-concatenated) in its "fused" object.  Each declares its parts once.
 */
static const struct {
	const char *name;
	enum op_kind kind;
	const char *parts[OP_MAX_PARTS];
} builtin_ops[] = {
	{ "qkv", OP_QKV, { "q", "k", "v" } },
	{ "gate_up", OP_ROWS, { "gate", "up" } },
	{ "w13", OP_ROWS, { "w1", "w3" } },
};

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int find_op(const struct wshard_rules *r, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < r->nops; i++)
		if (strlen(r->ops[i].name) == len && strncmp(r->ops[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

static enum wshard_err add_op(struct wshard_rules *r, const char *name,
			      enum op_kind kind, const char *const *parts,
			      int nparts, struct wshard_error *err)
{
	struct rules_op *ops = realloc(r->ops, (r->nops + 1) * sizeof(*ops));
	struct rules_op *op;
	int i;

	if (!ops)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	r->ops = ops;
	op = &ops[r->nops++];
	memset(op, 0, sizeof(*op));
	op->name = strdup(name);
	op->kind = kind;
	op->nparts = nparts;
	for (i = 0; i < nparts; i++)
		op->parts[i] = strdup(parts[i]);
	return WSHARD_OK;
}

static enum wshard_err parse_ops(struct wshard_rules *r, json_t *fused,
				 struct wshard_error *err)
{
	const char *key;
	json_t *val;
	size_t i;
	enum wshard_err rc;

	for (i = 0; i < sizeof(builtin_ops) / sizeof(builtin_ops[0]); i++) {
		int n = 0;

		while (n < OP_MAX_PARTS && builtin_ops[i].parts[n])
			n++;
		rc = add_op(r, builtin_ops[i].name, builtin_ops[i].kind,
			    builtin_ops[i].parts, n, err);
		if (rc)
			return rc;
	}
	if (!fused)
		return WSHARD_OK;
	if (!json_is_object(fused))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"fused\" is not an object", r->name);
	json_object_foreach(fused, key, val) {
		json_t *parts = json_object_get(val, "parts"), *kv;
		const char *split = json_string_value(json_object_get(val, "split"));
		bool qkv;
		const char *names[OP_MAX_PARTS];
		size_t j;

		if (find_op(r, key, strlen(key)) >= 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': fused operator '%s' is declared twice",
						r->name, key);
		if (!json_is_array(parts) || json_array_size(parts) < 1 ||
		    json_array_size(parts) > OP_MAX_PARTS)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': fused operator '%s' needs \"parts\": 1 to %d names",
						r->name, key, OP_MAX_PARTS);
		for (j = 0; j < json_array_size(parts); j++) {
			names[j] = json_string_value(json_array_get(parts, j));
			if (!names[j])
				return wshard_error_set(err, WSHARD_EINVAL,
							"'%s': fused operator '%s': part %zu is not a string",
							r->name, key, j);
		}
		if (json_object_get(val, "split") &&
		    (!split || (strcmp(split, "row") && strcmp(split, "replicate") &&
				strcmp(split, "qkv"))))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': fused operator '%s': \"split\" must be \"row\", \"replicate\" or \"qkv\"",
						r->name, key);
		qkv = split && !strcmp(split, "qkv");
		kv = json_object_get(val, "kv_heads");
		if ((qkv && (json_array_size(parts) < 3 || json_array_size(parts) > 5)) ||
		    (kv && (!qkv || (!json_is_string(kv) && !json_is_integer(kv)))))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': fused operator '%s': \"split\": \"qkv\" takes three parts (q, k, v; a last fourth or fifth is whole on every rank, a fourth of five cut as k) and an optional \"kv_heads\" expression, which only it takes",
						r->name, key);
		rc = add_op(r, key, qkv ? OP_QKV : split && !strcmp(split, "replicate") ?
			    OP_REPLICATE : OP_ROWS, names, (int)json_array_size(parts), err);
		if (!rc && kv) {
			char buf[32];

			snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(kv));
			r->ops[r->nops - 1].kv_heads = strdup(json_is_string(kv) ?
							      json_string_value(kv) : buf);
			if (!r->ops[r->nops - 1].kv_heads)
				rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		}
		if (!rc)
			rc = rules_parse_op_keys(r, &r->ops[r->nops - 1], val, err);
		if (rc)
			return rc;
	}
	return WSHARD_OK;
}

static const struct {
	const char *name;
	enum rule_kind kind;
} split_names[] = {
	{ "row", RULE_ROW },
	{ "col", RULE_COL },
	{ "vocab", RULE_VOCAB },
	{ "replicate", RULE_REPLICATE },
	{ "skip", RULE_SKIP },
	{ "first", RULE_FIRST },
	{ "refuse", RULE_REFUSE },
};

static enum wshard_err parse_shape(struct wshard_rules *r, struct rules_rule *rule,
				   json_t *shape, struct wshard_error *err)
{
	enum wshard_err rc;
	size_t bad_at;

	rule->nshape = -1;
	if (!shape)
		return WSHARD_OK;
	if (!json_is_array(shape) || json_array_size(shape) > WSHARD_MAX_DIMS)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"shape\" is not an array of at most %d expressions",
					r->name, rule->match, WSHARD_MAX_DIMS);
	rc = rules_parse_exprs(shape, rule->shape, &rule->nshape, &bad_at);
	if (rc == WSHARD_EINVAL)
		return wshard_error_set(err, rc,
					"'%s': rule '%s': shape entry %zu is neither a number nor a string",
					r->name, rule->match, bad_at);
	if (rc)
		return wshard_error_set(err, rc, "out of memory");
	rule->nshape = (int)json_array_size(shape);
	return WSHARD_OK;
}

/* Every key of rule t (whose match is match) is one rules files know. */
static enum wshard_err check_rule_keys(const struct wshard_rules *r, json_t *t,
				       const char *match, struct wshard_error *err)
{
	static const char *const known[] = {
		"match", "output", "split", "fuse", "unpack", "shape", "optional", "comment", "if",
		"reason", "dtype", "from", "rows", "view", "transpose", "missing", "chunks",
		"interleave", "experts", "deinterleave", "kv_heads", "times_sqrt", "neg_exp",
		"zero_mean", "plus", "permute_rows", "pad_to", "qkv_groups", "also", "concat",
		"beside", "reshape", "experts_from", "layer", "unless", "dequant", "pass_on",
		"num_experts", "transpose_cols", "pad_value", "prime_heads",
	};
	const char *key;
	json_t *val;
	size_t i;

	json_object_foreach(t, key, val) {
		bool ok = false;

		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok |= strcmp(key, known[i]) == 0;
		if (!ok)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': rule '%s': unknown key \"%s\"",
						r->name, match, key);
	}
	return WSHARD_OK;
}

/* "split": one of split_names. */
static enum wshard_err parse_split(const struct wshard_rules *r, struct rules_rule *rule,
				   const char *split, struct wshard_error *err)
{
	size_t i;

	for (i = 0; i < sizeof(split_names) / sizeof(split_names[0]); i++)
		if (strcmp(split, split_names[i].name) == 0) {
			rule->kind = split_names[i].kind;
			return WSHARD_OK;
		}
	return wshard_error_set(err, WSHARD_EINVAL,
				"'%s': rule '%s': unknown split \"%s\" (row, col, vocab, replicate, skip, first)",
				r->name, rule->match, split);
}

/* The index of part name[0..len) of op, or -1. */
static int find_part(const struct rules_op *op, const char *name, size_t len)
{
	int p;

	for (p = 0; p < op->nparts; p++)
		if (strlen(op->parts[p]) == len && strncmp(op->parts[p], name, len) == 0)
			return p;
	return -1;
}

/*
 * "fuse": OPERATOR.PART of a declared operator, or OPERATOR.A+B+...: a
 * source holding several parts stacked in that order, cut by its "sizes"
 * (Qwen3.5's in_proj_qkv is parts q, k, v of in_proj_qkvz; GTE's
 * up_gate_proj parts up and gate of gate then up).  The rule needs
 * "output".
 */
static enum wshard_err parse_fuse(const struct wshard_rules *r, struct rules_rule *rule,
				  const char *fuse, const char *also, bool has_output,
				  struct wshard_error *err)
{
	const char *dot = strchr(fuse, '.'), *s, *plus;
	int op = dot ? find_op(r, fuse, (size_t)(dot - fuse)) : -1;
	int p, k, n = 0;

	if (op < 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"fuse\" must be OPERATOR.PART with a declared operator, not \"%s\"",
					r->name, rule->match, fuse);
	for (s = dot + 1;; s = plus + 1, n++) {
		plus = strchr(s, '+');
		p = find_part(&r->ops[op], s, plus ? (size_t)(plus - s) : strlen(s));
		if (p < 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': rule '%s': operator '%s' has no part '%.*s'",
						r->name, rule->match, r->ops[op].name,
						(int)(plus ? (size_t)(plus - s) : strlen(s)), s);
		for (k = 0; k < n; k++)
			if (rule->order[k] == p)
				return wshard_error_set(err, WSHARD_EINVAL,
							"'%s': rule '%s': \"%s\" names part '%s' twice",
							r->name, rule->match, fuse, r->ops[op].parts[p]);
		rule->order[n] = p;
		rule->part = rule->order[0];
		if (!plus)
			break;
	}
	rule->kind = RULE_FUSE;
	rule->op = op;
	rule->nparts = n + 1;
	/* q/k/v's k+v without sizes: "qkv_groups" (checked with it) */
	if (rule->nparts > 1 && !r->ops[op].sizes[0] && r->ops[op].kind != OP_QKV)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': operator '%s' needs \"sizes\" for a source holding several parts",
					r->name, rule->match, r->ops[op].name);
	if (!has_output)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': a fused part needs \"output\"",
					r->name, rule->match);
	if (!also)
		return WSHARD_OK;
	rule->also = find_part(&r->ops[op], also, strlen(also));
	if (rule->also < 0 || rule->nparts > 1 || rule->also == rule->part)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"also\" must name another part of '%s' than \"fuse\"'s one, not \"%s\"",
					r->name, rule->match, r->ops[op].name, also);
	return WSHARD_OK;
}

/* "unpack": a declared operator whose parts one source holds. */
static enum wshard_err parse_unpack(const struct wshard_rules *r, struct rules_rule *rule,
				    const char *unpack, struct wshard_error *err)
{
	rule->kind = RULE_UNPACK;
	rule->op = find_op(r, unpack, strlen(unpack));
	if (rule->op < 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': unknown operator \"%s\"",
					r->name, rule->match, unpack);
	return WSHARD_OK;
}

/* A string-valued key of rule t, or NULL; *out_bad when present but no string. */
static const char *str_key(json_t *t, const char *key, bool *out_bad)
{
	json_t *v = json_object_get(t, key);

	*out_bad |= v && !json_is_string(v);
	return json_string_value(v);
}

/* "from": the source dtypes the rule takes (a non-empty array of names). */
static enum wshard_err parse_from(const struct wshard_rules *r, struct rules_rule *rule,
				  json_t *from, struct wshard_error *err)
{
	enum wshard_dtype dt;
	size_t i;

	if (!from)
		return WSHARD_OK;
	if (!json_is_array(from) || !json_array_size(from))
		goto bad;
	for (i = 0; i < json_array_size(from); i++) {
		const char *s = json_string_value(json_array_get(from, i));

		if (!s || wshard_dtype_parse(s, &dt) < 0)
			goto bad;
		rule->from |= (uint64_t)1 << dt;
	}
	return WSHARD_OK;
bad:
	return wshard_error_set(err, WSHARD_EINVAL,
				"'%s': rule '%s': \"from\" is a non-empty array of dtype names",
				r->name, rule->match);
}

/* "if" (a condition), "reason" (a left-out skip), "dtype" (a cast),
 * "experts_from" (an expression, on a match with {e}), "layer" (an
 * expression), "unless" (a source name), "missing" (a required one's). */
static enum wshard_err parse_rule_more(const struct wshard_rules *r,
				       struct rules_rule *rule, json_t *t,
				       struct wshard_error *err)
{
	bool bad = false;
	const char *cond = str_key(t, "if", &bad);
	const char *reason = str_key(t, "reason", &bad);
	const char *dtype = str_key(t, "dtype", &bad);
	const char *from = str_key(t, "experts_from", &bad);
	const char *layer = str_key(t, "layer", &bad);
	const char *unless = str_key(t, "unless", &bad);
	const char *missing = str_key(t, "missing", &bad);

	if (bad)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"if\", \"reason\", \"dtype\", \"experts_from\", \"layer\", \"unless\" and \"missing\" are strings",
					r->name, rule->match);
	if (missing && (rule->optional || rule->kind == RULE_SKIP || rule->kind == RULE_REFUSE))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"missing\" goes with a rule whose source is required",
					r->name, rule->match);
	if (from && !strstr(rule->match, "{e}"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"experts_from\" needs {e} in match",
					r->name, rule->match);
	if (strchr(rule->match, '*') && rule->kind != RULE_SKIP && rule->kind != RULE_REFUSE)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': a \"*\" match needs \"split\": \"skip\" or \"refuse\"",
					r->name, rule->match);
	/* a skip may say why; a refusal must */
	if (rule->kind == RULE_REFUSE ? !reason : reason && rule->kind != RULE_SKIP)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"reason\" goes with \"split\": \"skip\" (may) or \"refuse\" (must)",
					r->name, rule->match);
	/* I32: integer tables vLLM narrows from the checkpoint's I64; U8:
	 * bytes vLLM holds as uint8 (FP4 blocks, E8M0 scales) */
	rule->model_dtype = dtype && !strcmp(dtype, "model");
	rule->head_dtype = dtype && !strcmp(dtype, "head");
	if (dtype && !rule->model_dtype && !rule->head_dtype &&
	    (wshard_dtype_parse(dtype, &rule->dtype) < 0 ||
		      (!wshard_dtype_is_convertible(rule->dtype) && rule->dtype != WSHARD_I32 &&
		       rule->dtype != WSHARD_U8)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"dtype\" must be F32, F16, BF16, model, head, I32 or U8",
					r->name, rule->match);
	rule->has_dtype = dtype != NULL;
	rule->cond = dup_or_null(cond);
	rule->reason = dup_or_null(reason);
	rule->experts_from = dup_or_null(from);
	rule->layer = dup_or_null(layer);
	rule->unless = dup_or_null(unless);
	rule->missing = dup_or_null(missing);
	if ((cond && !rule->cond) || (reason && !rule->reason) || (from && !rule->experts_from) ||
	    (layer && !rule->layer) || (unless && !rule->unless) || (missing && !rule->missing))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return parse_from(r, rule, json_object_get(t, "from"), err);
}

/* "rows" (a "col" split's leading dimensions, 1 or more) and "view" (the
 * output's dimensions, 1 or more): positive integers below the maximum. */
static enum wshard_err parse_view(const struct wshard_rules *r, struct rules_rule *rule,
				  json_t *t, struct wshard_error *err)
{
	json_t *rows = json_object_get(t, "rows"), *view = json_object_get(t, "view");
	enum wshard_err rc;

	if ((rows && (!json_is_integer(rows) || json_integer_value(rows) < 1 ||
		      json_integer_value(rows) >= WSHARD_MAX_DIMS)) ||
	    (view && (!json_is_integer(view) || json_integer_value(view) < 1 ||
		      json_integer_value(view) > WSHARD_MAX_DIMS)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"rows\" and \"view\" are integers from 1 to %d",
					r->name, rule->match, WSHARD_MAX_DIMS - 1);
	if (rows && rule->kind != RULE_COL)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"rows\" needs \"split\": \"col\"",
					r->name, rule->match);
	rule->transpose = json_is_true(json_object_get(t, "transpose"));
	if (rule->transpose && rule->kind != RULE_REPLICATE &&
	    (rule->kind != RULE_COL || (rows && json_integer_value(rows) > 2)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"transpose\" needs \"split\": \"col\" (with \"rows\" 1 or 2) or \"replicate\"",
					r->name, rule->match);
	rc = rules_parse_values(r, rule, t, err);
	if (rc)
		return rc;
	rule->kv_heads = json_is_true(json_object_get(t, "kv_heads"));
	if (rule->kv_heads && rule->kind != RULE_ROW)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"kv_heads\" needs \"split\": \"row\"",
					r->name, rule->match);
	rule->rows = rows ? (int)json_integer_value(rows) : 0;
	rule->view = view ? (int)json_integer_value(view) : 0;
	return rules_parse_chunks(r, rule, t, err);
}

static enum wshard_err parse_rule(struct wshard_rules *r, json_t *t, size_t idx,
				  struct wshard_error *err)
{
	struct rules_rule *rule = &r->rules[idx];
	const char *match = json_string_value(json_object_get(t, "match"));
	const char *output = json_string_value(json_object_get(t, "output"));
	const char *split = json_string_value(json_object_get(t, "split"));
	const char *fuse = json_string_value(json_object_get(t, "fuse"));
	const char *unpack = json_string_value(json_object_get(t, "unpack"));
	json_t *also = json_object_get(t, "also");
	enum wshard_err rc;

	rule->nshape = -1;
	rule->also = -1;
	if (!json_is_object(t) || !match)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': tensors[%zu] has no \"match\" string", r->name, idx);
	rc = check_rule_keys(r, t, match, err);
	if (rc)
		return rc;
	rule->optional = json_is_true(json_object_get(t, "optional"));
	rule->pass_on = json_is_true(json_object_get(t, "pass_on"));
	rule->match = strdup(match);
	rule->output = strdup(output ? output : match);
	if (!rule->match || !rule->output)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!!split + !!fuse + !!unpack != 1)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s' needs exactly one of \"split\", \"fuse\" or \"unpack\"",
					r->name, match);
	if (also && (!fuse || !json_is_string(also)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"also\" (a part name) goes only with \"fuse\"",
					r->name, match);
	if (split)
		rc = parse_split(r, rule, split, err);
	else if (fuse)
		rc = parse_fuse(r, rule, fuse, json_string_value(also), output != NULL, err);
	else
		rc = parse_unpack(r, rule, unpack, err);
	if (!rc)
		rc = parse_rule_more(r, rule, t, err);
	if (!rc)
		rc = rules_check_captures(r, rule, err);
	if (!rc)
		rc = parse_view(r, rule, t, err);
	if (rc)
		return rc;
	return parse_shape(r, rule, json_object_get(t, "shape"), err);
}

static enum wshard_err parse_doc(struct wshard_rules *r, json_t *root,
				 struct wshard_error *err)
{
	json_t *archs = json_object_get(root, "architectures"), *tensors;
	size_t i;
	enum wshard_err rc;
	const char *key;
	json_t *val;

	if (!json_is_object(root))
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': not a JSON object", r->name);
	json_object_foreach(root, key, val) {
		static const char *const known[] = {
			"name", "comment", "architectures", "tensors", "fused", "extra", "tie", "defaults", "no_expert_parallel",
			"pipeline", "no_pipeline", "tp_divides", "requires", "refuse_beside", "source_prefix", "source_renames",
			"rename_layers", "experts_in_rows", "weight_folders", "copy_folders", "weight_files",
			"num_layers" };
		bool ok = false;

		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok |= strcmp(key, known[i]) == 0;
		if (!ok)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': unknown key \"%s\" (known: name, comment, architectures, tensors, fused, extra, tie, defaults, no_expert_parallel, pipeline, no_pipeline, tp_divides, requires, refuse_beside, source_prefix, source_renames, rename_layers, experts_in_rows, weight_folders, copy_folders, weight_files, num_layers)",
						r->name, key);
	}
	if (archs && !json_is_array(archs))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"architectures\" is not an array", r->name);
	r->archs = calloc(json_array_size(archs) + 1, sizeof(char *));
	if (!r->archs)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < json_array_size(archs); i++) {
		const char *s = json_string_value(json_array_get(archs, i));

		if (!s)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': architectures[%zu] is not a string", r->name, i);
		r->archs[r->narchs] = strdup(s);
		if (!r->archs[r->narchs++])
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	val = json_object_get(root, "no_expert_parallel");
	if (val && (!json_is_string(val) || !json_string_length(val)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"no_expert_parallel\" is not a non-empty string (the reason)",
					r->name);
	if (val && !(r->no_ep = strdup(json_string_value(val))))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	rc = rules_parse_source(r, root, err);
	if (!rc)
		rc = rules_parse_rename(r, json_object_get(root, "rename_layers"), err);
	if (!rc)
		rc = rules_parse_unstack(r, json_object_get(root, "experts_in_rows"), err);
	if (rc)
		return rc;
	/* "tp_divides": expressions --tp must divide */
	val = json_object_get(root, "tp_divides");
	rc = val ? rules_parse_strings(r, val, "\"tp_divides\"", true, &r->tp_divides,
				       &r->ntp_divides, err) : WSHARD_OK;
	/* "requires": config.json keys without which vLLM builds no model */
	val = json_object_get(root, "requires");
	if (!rc && val)
		rc = rules_parse_strings(r, val, "\"requires\"", true, &r->requires,
					 &r->nrequires, err);
	for (i = 0; !rc && i < r->nrequires; i++)
		if (!expr_is_bare_key(r->requires[i]))
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "'%s': \"requires\" entry \"%s\" is not a config key",
					      r->name, r->requires[i]);
	/* "refuse_beside": {"files": [PATH, ...], "reason": TEXT} */
	val = json_object_get(root, "refuse_beside");
	if (!rc && val) {
		json_t *reason = json_object_get(val, "reason");

		if (!json_is_object(val) || json_object_size(val) != 2 ||
		    !json_is_string(reason) || !*json_string_value(reason) ||
		    !json_is_array(json_object_get(val, "files")))
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "'%s': \"refuse_beside\" is not an object of \"files\" (an array of paths) and \"reason\" (a non-empty string)",
					      r->name);
		if (!rc)
			rc = rules_parse_strings(r, json_object_get(val, "files"),
						 "\"refuse_beside\" files", true, &r->refuse_beside,
						 &r->nrefuse_beside, err);
		if (!rc && !(r->refuse_beside_reason = strdup(json_string_value(reason))))
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	if (rc)
		return rc;
	rc = rules_expand_uses(r->name, root, err);
	if (!rc)
		rc = parse_ops(r, json_object_get(root, "fused"), err);
	if (rc)
		return rc;
	/* (after rules_expand_uses, which puts a new array there) */
	tensors = json_object_get(root, "tensors");
	if (!json_is_array(tensors) || json_array_size(tensors) == 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"tensors\" must be a non-empty array of rules", r->name);
	r->rules = calloc(json_array_size(tensors), sizeof(*r->rules));
	if (!r->rules)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < json_array_size(tensors); i++) {
		r->nrules = i + 1;
		rc = parse_rule(r, json_array_get(tensors, i), i, err);
		if (rc)
			return rc;
	}
	rc = rules_derive_scales(r, err);
	if (rc)
		return rc;
	rc = rules_parse_extras(r, json_object_get(root, "extra"), err);
	if (rc)
		return rc;
	rc = rules_parse_defaults(r, json_object_get(root, "defaults"), err);
	if (!rc)
		rc = rules_parse_pipeline(r, root, err);
	if (rc)
		return rc;
	return rules_parse_tie(r, json_object_get(root, "tie"), err);
}

enum wshard_err wshard_rules_parse(struct wshard_rules **out_rules,
				   const char *text, size_t len,
				   const char *name, struct wshard_error *err)
{
	struct wshard_rules *r;
	json_error_t jerr;
	json_t *root;
	enum wshard_err rc;

	*out_rules = NULL;
	r = calloc(1, sizeof(*r));
	if (!r || !(r->name = strdup(name))) {
		free(r);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		rc = wshard_error_set(err, WSHARD_EINVAL, "'%s': invalid JSON at line %d: %s",
				      name, jerr.line, jerr.text);
	} else {
		rc = parse_doc(r, root, err);
		json_decref(root);
	}
	if (rc) {
		wshard_rules_free(r);
		return rc;
	}
	*out_rules = r;
	return WSHARD_OK;
}
