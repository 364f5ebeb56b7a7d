/*
 * rules_op.c - the keys a rule or a fused operator takes beside its
 * match: a rule's "chunks", "deinterleave", "reshape", "transpose_cols",
 * "pad_to", "pad_value", "prime_heads" and "num_experts", and a
 * fused operator's "sizes", "groups" and "zero".
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "expr.h"
#include "rules.h"

/* A copy of JSON string or integer d (an expression over config.json), or
 * NULL with *bad set when it is neither. */
char *rules_expr_copy(json_t *d, bool *bad)
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
		out[i] = rules_expr_copy(json_array_get(a, i), &bad);
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

/* "transpose_cols": an expression, on a "replicate" split with
 * "transpose" (each row of a 2-D source a matrix of that many columns,
 * written transposed: BAGEL's patch embedding, plan_reorder.c). */
static enum wshard_err parse_transpose_cols(const struct wshard_rules *r,
					    struct rules_rule *rule, json_t *tc,
					    struct wshard_error *err)
{
	bool bad = false;

	if (!tc)
		return WSHARD_OK;
	if ((rule->transpose_cols = rules_expr_copy(tc, &bad)) == NULL && !bad)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (bad || rule->kind != RULE_REPLICATE || !rule->transpose || rule->view)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"transpose_cols\" is an expression on a \"replicate\" split with \"transpose\", without \"view\"",
					r->name, rule->match);
	return WSHARD_OK;
}

/*
 * "pad_value" (a number, "-inf" or "inf") beside "pad_to" on a "row"
 * split or a "fuse" part: the padding rows hold it, not zeros (vLLM's
 * attention sinks padded with -inf, DeepSeek-V4.1's attention.py).
 */
static enum wshard_err parse_pad_value(const struct wshard_rules *r, struct rules_rule *rule,
				       json_t *v, struct wshard_error *err)
{
	const char *s = json_is_string(v) ? json_string_value(v) : "";

	if (!v)
		return WSHARD_OK;
	rule->has_pad_value = true;
	if (json_is_number(v))
		rule->pad_value = json_number_value(v);
	else if (!strcmp(s, "-inf") || !strcmp(s, "inf"))
		rule->pad_value = *s == '-' ? -HUGE_VAL : HUGE_VAL;
	else
		rule->has_pad_value = false;
	if (!rule->has_pad_value || !rule->pad_to || rule->kind == RULE_COL)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"pad_value\" is a number, \"-inf\" or \"inf\" beside \"pad_to\" on a \"row\" split or a \"fuse\" part",
					r->name, rule->match);
	return WSHARD_OK;
}

/*
 * "prime_heads": [FROM, HEADS, LAYERS] on a "row" split (FROM and HEADS
 * expressions, LAYERS the name of a config array): DeepSeek-V4.1's
 * Engram tables, cut by hash heads of prime sizes (plan_prime.c).
 */
static enum wshard_err parse_prime_heads(const struct wshard_rules *r, struct rules_rule *rule,
					 json_t *t, struct wshard_error *err)
{
	json_t *a = json_object_get(t, "prime_heads");
	bool bad = !json_is_array(a) || json_array_size(a) != 3 ||
		   !json_is_string(json_array_get(a, 2));
	int i;

	if (!a)
		return WSHARD_OK;
	for (i = 0; i < 3 && !bad; i++)
		if ((rule->prime_heads[i] = rules_expr_copy(json_array_get(a, (size_t)i), &bad)) ==
		    NULL && !bad)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (bad || rule->kind != RULE_ROW || !strstr(rule->match, "{n}") || rule->pad_to ||
	    rule->kv_heads || rule->rows || rule->view || json_object_get(t, "concat"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"prime_heads\" is [FROM, HEADS, LAYERS] (two expressions and a config array's name) on a \"row\" split whose match has {n}, without \"pad_to\", \"kv_heads\", \"concat\", \"rows\" or \"view\"",
					r->name, rule->match);
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
 * a fused part (of a replicated operator: at every tp), a plain "col"
 * split or (at every tp: DeepSeek-V4.1's sinks) a "row" split;
 * "pad_value" and "prime_heads" (parse_pad_value, parse_prime_heads);
 * "qkv_groups" (q/k/v heads stored by kv group: Falcon's query_key_value) on an "unpack" of q/k/v, or (k and
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
	json_t *concat = json_object_get(t, "concat"), *ne = json_object_get(t, "num_experts");
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
	rule->interleave = json_is_true(json_object_get(t, "interleave"));
	if (json_object_get(t, "interleave") &&
	    (!json_is_boolean(json_object_get(t, "interleave")) || rule->chunks < 2 ||
	     json_is_true(experts)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"interleave\" is true or false and needs \"chunks\" of 2 or more, without \"experts\"",
					r->name, rule->match);
	if (experts && (!json_is_boolean(experts) || (!rule->transpose && rule->kind != RULE_COL)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"experts\" is true or false and needs \"transpose\" or \"split\": \"col\"",
					r->name, rule->match);
	rule->experts = json_is_true(experts);
	if (pad && (rule->pad_to = rules_expr_copy(pad, &bad)) == NULL && !bad)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (pad && (bad || (rule->kind != RULE_FUSE && rule->kind != RULE_COL &&
			    rule->kind != RULE_ROW) ||
		    rule->transpose || rule->chunks > 1 || rule->rows > 1 || rule->nparts > 1 ||
		    (rule->kind == RULE_ROW && (rule->kv_heads || concat))))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"pad_to\" is an expression (rows or columns a rank) on a \"fuse\" part, a \"row\" split (without \"kv_heads\" or \"concat\") or a \"col\" split, without \"transpose\", \"chunks\" or \"rows\"",
					r->name, rule->match);
	/* every rank holds a replicated operator's parts whole at any tp, so
	 * their padding is the same at tp 1 (Qwen4Exp's hyper-connection
	 * projections, padded to 16 rows together); a row split's pad_to
	 * says what a rank holds at every tp (DeepSeek-V4.1's sinks) */
	rule->pad_always = pad && (rule->kind == RULE_ROW ||
				   (rule->kind == RULE_FUSE && r->ops[rule->op].kind == OP_REPLICATE));
	rc = parse_pad_value(r, rule, json_object_get(t, "pad_value"), err);
	if (!rc)
		rc = parse_prime_heads(r, rule, t, err);
	if (rc)
		return rc;
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
	    (rule->deinterleave = rules_expr_copy(di, &bad)) == NULL && !bad)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (di && !rule->deinterleave_cut && (bad || rule->kind != RULE_FUSE))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"deinterleave\" is an expression (rows per block) on a \"fuse\" part, or true on a \"col\" split",
					r->name, rule->match);
	if (ne && (rule->num_experts = rules_expr_copy(ne, &bad)) == NULL && !bad)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (ne && (bad || !strstr(rule->match, "{e}") || strstr(rule->output, "{e}")))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"num_experts\" is an expression on a match with {e} whose output stacks the experts (has no {e})",
					r->name, rule->match);
	rc = parse_reshape(r, rule, json_object_get(t, "reshape"), err);
	if (rc)
		return rc;
	rc = parse_transpose_cols(r, rule, json_object_get(t, "transpose_cols"), err);
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
			op->groups[i] = rules_expr_copy(d, &bad);
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
