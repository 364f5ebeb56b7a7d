/*
 * plan_prime.c - a "row" split by hash heads of prime sizes (a rule's
 * "prime_heads"): DeepSeek-V4.1's Engram tables as vLLM 0.32 cuts them.
 * Its EngramLayout (models/deepseek_v41/common/engram.py:217-244) gives
 * each Engram layer, each n-gram order and each head in turn the
 * smallest prime above engram_vocab_size - 1 not yet given (primes are
 * never reused, so layer i's heads are primes i*H .. i*H + H - 1 of
 * those from engram_vocab_size up); ParallelEngramEmbedding (986-1000)
 * gives rank r heads [r*P, (r+1)*P), P = ceil(H / tp), and their rows
 * [sum(sizes[:r*P]), sum(sizes[:(r+1)*P])), which its weight loader
 * (_engram_head_shard_weight_loader, 604-617) narrows the checkpoint's
 * table to.  Rows past the heads' sum are no rank's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wshard.h"
#include "base/error.h"
#include "base/util.h"
#include "source/safetensors.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"
#include "plan_prime.h"

enum { PRIME_HEADS_MAX = 1 << 16 };	/* heads a table, and tables before it */

static int is_prime(uint64_t x)
{
	uint64_t d;

	if (x < 2)
		return 0;
	for (d = 2; d * d <= x; d++)
		if (x % d == 0)
			return 0;
	return 1;
}

/* The index of layer n in config array key, or -1 (*rc set where the
 * array is missing). */
static long layer_index(const struct wshard_plan *plan, const char *key, long n,
			const char *name, enum wshard_err *rc, struct wshard_error *err)
{
	int64_t count = expr_config_count(plan->config, key), v;
	char expr[RULES_NAME_MAX];
	long i;

	*rc = WSHARD_OK;
	if (count < 0 || snprintf(expr, sizeof(expr), "%s[0]", key) >= (int)sizeof(expr)) {
		*rc = wshard_error_set(err, WSHARD_EINVAL,
				       "tensor '%s': config.json has no array '%s' (\"prime_heads\")",
				       name, key);
		return -1;
	}
	for (i = 0; i < count; i++) {
		snprintf(expr, sizeof(expr), "%s[%ld]", key, i);
		*rc = expr_eval_dim(plan->config, expr, name, &v, err);
		if (*rc)
			return -1;
		if (v == n)
			return i;
	}
	return -1;
}

enum wshard_err plan_split_prime(const struct wshard_plan *plan, struct group_out *g,
				 const struct member *m, uint64_t *shape,
				 struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t rows = src_rows(t), *sum, cand, per;
	int64_t from, heads;
	long idx, k, skip;
	enum wshard_err rc;
	int r;

	rc = expr_eval_layer_dim(plan->config, m->rule->prime_heads[0], m->cap.n, t->name, &from,
				 NULL, err);
	if (!rc)
		rc = expr_eval_layer_dim(plan->config, m->rule->prime_heads[1], m->cap.n, t->name,
					 &heads, NULL, err);
	if (rc)
		return rc;
	idx = layer_index(plan, m->rule->prime_heads[2], m->cap.n, t->name, &rc, err);
	if (rc)
		return rc;
	if (idx < 0 || from < 1 || heads < 1 || heads > PRIME_HEADS_MAX ||
	    idx > PRIME_HEADS_MAX / heads)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': no hash heads of prime sizes for layer %ld (%s: %lld heads from %lld; layer %s in %s)",
					t->name, m->cap.n, m->rule->prime_heads[1], (long long)heads,
					(long long)from, idx < 0 ? "not" : "found",
					m->rule->prime_heads[2]);
	per = ((uint64_t)heads + (uint64_t)plan->tp - 1) / (uint64_t)plan->tp;
	if ((uint64_t)(plan->tp - 1) * per >= (uint64_t)heads)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': %lld hash heads leave a rank of --tp %d without one (vLLM cuts the Engram table by heads, %llu a rank)",
					t->name, (long long)heads, plan->tp, (unsigned long long)per);
	sum = calloc((size_t)heads + 1, sizeof(*sum));
	if (!sum)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	/* the primes from `from` up: idx * heads for the tables before, then
	 * this table's, each head's running sum (none above rows fits) */
	skip = idx * heads;
	for (cand = (uint64_t)from, k = -skip; k < heads; cand++) {
		if (cand > rows) {
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "tensor '%s': %llu rows hold no %lld hash heads of prime sizes from %lld (table %ld of %s)",
					      t->name, (unsigned long long)rows, (long long)heads,
					      (long long)from, idx, m->rule->prime_heads[2]);
			break;
		}
		if (!is_prime(cand))
			continue;
		if (k >= 0)
			sum[k + 1] = sum[k] + cand;
		k++;
	}
	if (!rc && sum[heads] > rows)
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "tensor '%s': its %lld hash heads need %llu rows, it has %llu",
				      t->name, (long long)heads, (unsigned long long)sum[heads],
				      (unsigned long long)rows);
	for (r = 0; r < plan->tp && !rc; r++) {
		uint64_t h0 = (uint64_t)r * per, h1 = WSHARD_MIN(h0 + per, (uint64_t)heads);

		rc = plan_push_rows(plan, &g->ranks[r], m->src, sum[h0], sum[h1] - sum[h0], err);
		if (r == 0)
			shape[0] = sum[h1] - sum[h0];
	}
	free(sum);
	return rc;
}
