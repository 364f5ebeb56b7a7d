/*
 * plan_fuse.c - the parts of one item of a fused output: which source
 * (and which of its rows) fills each part of the operator, from the
 * members that produce it or the one source that holds them all, and the
 * parts a checkpoint lacks ("zero": zeros of their size; otherwise an
 * error naming the missing tensor).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"

enum wshard_err plan_op_kv_heads(const struct wshard_plan *plan, const struct rules_op *op,
				 long layer, int64_t *out, struct wshard_error *err)
{
	*out = plan->config->num_key_value_heads;
	if (!op || !op->kv_heads)
		return WSHARD_OK;
	return expr_eval_layer_dim(plan->config, op->kv_heads, layer, op->name, out, NULL, err);
}

/* Names the source tensor a fused output lacks, from the rule for that
 * part, as the checkpoint's own naming would name it. */
static enum wshard_err missing_part(const struct wshard_plan *plan,
				    const struct wshard_rules *rules,
				    const struct member *m, int part,
				    struct wshard_error *err)
{
	const struct rules_op *op = &rules->ops[m->rule->op];
	size_t i;

	for (i = 0; i < rules->nrules; i++) {
		const struct rules_rule *r = &rules->rules[i];
		char *want, buf[RULES_NAME_MAX];
		int k;

		for (k = 0; k < r->nparts && r->order[k] != part; k++)
			;
		if (r->kind != RULE_FUSE || r->op != m->rule->op || k == r->nparts ||
		    strcmp(r->output, m->rule->output) != 0)
			continue;
		want = rules_expand(r->match, &m->cap);
		if (!want)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		wshard_error_set(err, WSHARD_EINVAL,
				 "tensor '%s' is missing: '%s' needs it as part '%s' of '%s'",
				 rules_checkpoint_name(rules, plan->cat, want, buf), m->out,
				 op->parts[part], op->name);
		free(want);
		return WSHARD_EINVAL;
	}
	return wshard_error_set(err, WSHARD_EINVAL,
				"output '%s' is missing part '%s' of '%s' (from '%s' and its siblings)",
				m->out, op->parts[part], op->name, src_name(plan, m->src));
}

/*
 * Cuts source m, which holds the count parts of op in order (NULL: all,
 * in the operator's order) stacked by rows, by the operator's "sizes":
 * parts[p], off[p] and len[p] for each.
 */
static enum wshard_err cut_by_sizes(const struct wshard_plan *plan,
				    const struct rules_op *op, const struct member *m,
				    const int *order, int count, const struct member **parts,
				    uint64_t *off, uint64_t *len, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t at = 0;
	int k;

	for (k = 0; k < count; k++) {
		int p = order ? order[k] : k;
		int64_t v;
		enum wshard_err rc = expr_eval_dim(plan->config, op->sizes[p],
						   t->name, &v, err);

		if (rc)
			return rc;
		if (parts[p])
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' are both part '%s' of '%s'",
						src_name(plan, parts[p]->src), t->name,
						op->parts[p], m->out);
		parts[p] = m;
		off[p] = at;
		len[p] = v > 0 ? (uint64_t)v : 0;
		at += len[p];
	}
	if (at != src_rows(t))
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s' has %llu rows but the sizes of its parts of '%s' add up to %llu",
					t->name, (unsigned long long)src_rows(t), op->name,
					(unsigned long long)at);
	return WSHARD_OK;
}

/* The parts of an UNPACK source: q/k/v by heads, by "sizes", or equal. */
static enum wshard_err unpack_parts(const struct wshard_plan *plan,
				    const struct rules_op *op, const struct member *m,
				    const struct member **parts, uint64_t *off,
				    uint64_t *len, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	const struct wshard_config *c = plan->config;
	uint64_t rows = src_rows(t), at = 0;
	int64_t kv;
	int p;
	enum wshard_err rc;

	if (op->sizes[0])
		return cut_by_sizes(plan, op, m, NULL, op->nparts, parts, off, len, err);
	rc = plan_op_kv_heads(plan, op, m->cap.n, &kv, err);
	if (rc)
		return rc;
	for (p = 0; p < op->nparts; p++) {
		parts[p] = m;
		if (op->kind == OP_QKV)
			len[p] = (uint64_t)(p == 0 ? c->num_attention_heads : kv) *
				 (uint64_t)c->head_dim;
		else if (rows % (uint64_t)op->nparts == 0)
			len[p] = rows / (uint64_t)op->nparts;
		else
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': %llu rows cannot be cut into the %d parts of '%s'",
						t->name, (unsigned long long)rows, op->nparts,
						op->name);
		off[p] = at;
		at += len[p];
	}
	if (at != rows)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s' has %llu rows but config.json's heads give q+k+v = %llu",
					t->name, (unsigned long long)rows,
					(unsigned long long)at);
	return WSHARD_OK;
}

/*
 * q/k/v's k and v from one "qkv_groups" source stored by kv head,
 * [kv, 2, head_dim] (TeleChat2's key_value): each kv*head_dim rows in
 * vLLM's order, k's then v's, which plan_push_grouped finds in it.
 */
static enum wshard_err kv_pair_parts(const struct wshard_plan *plan,
				     const struct rules_op *op, const struct member *m,
				     const struct member **parts, uint64_t *off,
				     uint64_t *len, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t rows;
	int64_t kv;
	int p;
	enum wshard_err rc = plan_op_kv_heads(plan, op, m->cap.n, &kv, err);

	if (rc)
		return rc;
	rows = (uint64_t)kv * (uint64_t)plan->config->head_dim;
	if (src_rows(t) != 2 * rows)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s' has %llu rows but config.json's heads give k+v = %llu",
					t->name, (unsigned long long)src_rows(t),
					(unsigned long long)(2 * rows));
	for (p = 1; p <= 2; p++) {
		if (parts[p])
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' are both part '%s' of '%s'",
						src_name(plan, parts[p]->src), t->name,
						op->parts[p], m->out);
		parts[p] = m;
		off[p] = (uint64_t)(p - 1) * rows;
		len[p] = rows;
	}
	return WSHARD_OK;
}

enum wshard_err plan_fused_parts(const struct wshard_plan *plan,
				 const struct wshard_rules *rules,
				 const struct member *m, size_t n,
				 const struct member **parts, uint64_t *off,
				 uint64_t *len, struct wshard_error *err)
{
	const struct rules_rule *rule = m[0].rule;
	const struct rules_op *op = &rules->ops[rule->op];
	enum wshard_err rc;
	size_t i;
	int p, k;

	if (rule->kind == RULE_UNPACK)
		return unpack_parts(plan, op, &m[0], parts, off, len, err);
	for (i = 0; i < n; i++) {
		p = m[i].rule->part;
		if (m[i].rule->nparts > 1 && m[i].rule->qkv_groups) {
			rc = kv_pair_parts(plan, op, &m[i], parts, off, len, err);
			if (rc)
				return rc;
			continue;
		}
		if (m[i].rule->nparts > 1) {
			rc = cut_by_sizes(plan, op, &m[i], m[i].rule->order, m[i].rule->nparts,
					  parts, off, len, err);
			if (rc)
				return rc;
			continue;
		}
		/* its part, then the one it fills "also" with the same bytes */
		for (k = 0; k < 2 && p >= 0; k++, p = m[i].rule->also) {
			if (parts[p])
				return wshard_error_set(err, WSHARD_EINVAL,
							"tensors '%s' and '%s' are both part '%s' of '%s'",
							src_name(plan, parts[p]->src),
							src_name(plan, m[i].src), op->parts[p], m[i].out);
			parts[p] = &m[i];
			len[p] = src_rows(src_info(plan, m[i].src));
		}
	}
	for (p = 0; p < op->nparts; p++) {
		int64_t rows;

		if (parts[p])
			continue;
		if (!op->zero[p] || rule->inout)
			return missing_part(plan, rules, &m[0], p, err);
		rc = expr_eval_dim(plan->config, op->sizes[p], m[0].out, &rows, err);
		if (rc)
			return rc;
		len[p] = rows > 0 ? (uint64_t)rows : 0;
	}
	return WSHARD_OK;
}

const struct member *plan_first_part(const struct rules_op *op,
				     const struct member *const *parts)
{
	int p;

	for (p = 0; p < op->nparts && !parts[p]; p++)
		;
	return p < op->nparts ? parts[p] : NULL;
}
