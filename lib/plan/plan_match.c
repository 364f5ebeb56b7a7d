/*
 * plan_match.c - every source tensor matched to the rule that consumes
 * it, and the checks that need the whole match: no tensor left
 * uncovered, no required tensor missing (plan_required.c), every shape
 * as config.json says (each checked by plan_shape.c).  Large checkpoints
 * match on several threads, a share of the tensors each.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/error.h"
#include "base/util.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"

#define MAX_LISTED 20

static int cmp_member(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int c = strcmp(x->out, y->out);

	if (c)
		return c;
	if (x->cap.e != y->cap.e)
		return x->cap.e < y->cap.e ? -1 : 1;
	if (x->rule->part != y->rule->part)
		return x->rule->part < y->rule->part ? -1 : 1;
	return x->src < y->src ? -1 : (x->src > y->src);
}

static enum wshard_err report_uncovered(const struct wshard_plan *plan,
					const uint32_t *list, size_t n,
					struct wshard_error *err)
{
	char buf[WSHARD_ERRMAX - 128];
	size_t o = 0, i;

	buf[0] = '\0';
	for (i = 0; i < n && i < MAX_LISTED; i++) {
		const char *name = src_name(plan, list[i]);

		if (o + strlen(name) + 8 >= sizeof(buf))
			break;
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s'%s'", i ? ", " : "", name);
	}
	if (i < n)
		snprintf(buf + o, sizeof(buf) - o, " and %zu more", n - i);
	return wshard_error_set(err, WSHARD_EINVAL,
				"%zu tensor%s of '%s' %s not covered by rules '%s': %s",
				n, n == 1 ? "" : "s", plan->cat->path, n == 1 ? "is" : "are",
				plan->rules_name, buf);
}

/* Layers the checkpoint should have: config.json, else the highest seen + 1. */
long plan_count_layers(const struct wshard_plan *plan, const struct wshard_rules *rules)
{
	struct wshard_error ignored = { 0 };
	struct rules_capture cap;
	char buf[RULES_NAME_MAX];
	long maxn = -1;
	size_t i, j;
	int64_t v;

	/* the rules' own count (Cosmos 3 Edge's blocks are two layers each),
	 * else config.json's, or the rules' default (DBRX's names n_layers) */
	if (rules->num_layers &&
	    !expr_eval_dim(plan->config, rules->num_layers, "num_layers", &v, &ignored) &&
	    v > 0 && v < PLAN_MAX_LAYERS)
		return (long)v;
	if (!expr_eval_dim(plan->config, "num_hidden_layers", "num_hidden_layers", &v, &ignored) &&
	    v > 0 && v < PLAN_MAX_LAYERS)
		return (long)v;
	for (i = 0; i < plan->cat->ntensors; i++) {
		const char *as = rules_source_name(rules, plan->cat->tensors[i].name, buf);

		for (j = 0; j < rules->nrules; j++)
			if (rules_match(rules->rules[j].match, as, &cap)) {
				if (cap.n > maxn && cap.n < PLAN_MAX_LAYERS)
					maxn = cap.n;
				break;
			}
	}
	return maxn + 1;
}

/* Records source tensor name as left out for reason. */
static enum wshard_err plan_left_out(struct wshard_plan *plan, const char *name,
				     const char *reason, struct wshard_error *err)
{
	struct wshard_left_out *l = realloc(plan->left_out,
					    (plan->nleft_out + 1) * sizeof(*l));

	if (!l)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	plan->left_out = l;
	l[plan->nleft_out].reason = strdup(reason);
	l[plan->nleft_out].name = strdup(name);
	if (!l[plan->nleft_out].name || !l[plan->nleft_out].reason) {
		free(l[plan->nleft_out].name);
		free(l[plan->nleft_out].reason);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	plan->nleft_out++;
	return WSHARD_OK;
}

/* Matching state: what each rule has matched, per layer. */
struct matching {
	const struct wshard_rules *rules;
	bool tied;
	long nlayers;
	long width;		/* layers seen covers: nlayers, or more for
				 * rules that bound their own layers */
	bool *seen;		/* rule j, layer n: seen[j * (width + 1) + n] */
	/* rule j's "if" in layer n (-1 to width): cond[j * (width + 2) + n + 1],
	 * 0 not evaluated yet, 1 holds, 2 does not: the experts of a layer
	 * ask the same question hundreds of times */
	unsigned char *cond;
};

/* rule_applies for rule j in layer n, through mt->cond. */
static enum wshard_err rule_applies_memo(const struct wshard_plan *plan, struct matching *mt,
					 size_t j, long n, bool *out, struct wshard_error *err)
{
	const struct rules_rule *r = &mt->rules->rules[j];
	unsigned char *c;
	enum wshard_err rc;

	if (!r->cond || n < -1 || n > mt->width)
		return plan_rule_applies(plan, r, n, out, err);
	c = &mt->cond[j * (size_t)(mt->width + 2) + (size_t)(n + 1)];
	if (*c) {
		*out = *c == 1;
		return WSHARD_OK;
	}
	rc = plan_rule_applies(plan, r, n, out, err);
	if (!rc)
		*c = *out ? 1 : 2;
	return rc;
}

/* mt->width: nlayers, or past it the highest layer + 1 of a source that a
 * rule bounding its own layers takes. */
static void count_width(const struct wshard_plan *plan, struct matching *mt)
{
	const struct wshard_rules *rules = mt->rules;
	struct rules_capture cap;
	char buf[RULES_NAME_MAX];
	size_t i, j;

	mt->width = mt->nlayers;
	for (j = 0; j < rules->nrules; j++) {
		if (!plan_bounds_layers(plan, &rules->rules[j]))
			continue;
		for (i = 0; i < plan->cat->ntensors; i++)
			if (rules_match(rules->rules[j].match,
					rules_source_name(rules, plan->cat->tensors[i].name, buf),
					&cap) &&
			    cap.n >= mt->width && cap.n < PLAN_MAX_LAYERS)
				mt->width = cap.n + 1;
	}
}

/*
 * Matches source tensor i, called as (its name with the rules'
 * source_prefix where it lacks it), to its rule into *m (*out_matched
 * false when no rule covers it; m->out NULL when the rule skips it or leaves it out,
 * the second with m->rule->reason), trying the rules from rule from on
 * (past the one that took it with "pass_on").  Returns WSHARD_OK,
 * WSHARD_EINVAL (a layer past num_hidden_layers) or WSHARD_ENOMEM.
 * Touches only *mt's arrays and *m: threads match with a matching each.
 */
static enum wshard_err match_one(const struct wshard_plan *plan, struct matching *mt,
				 size_t i, const char *as, size_t from, struct member *m,
				 bool *out_matched, struct wshard_error *err)
{
	const struct wshard_rules *rules = mt->rules;
	const struct rules_rule *pooled;
	const char *name = plan->cat->tensors[i].name;
	long nlayers = mt->nlayers;
	size_t j;
	bool ok = false;
	enum wshard_err rc;

	*out_matched = false;
	m->out = NULL;
	for (j = from; j < rules->nrules && !ok; j++) {
		if (!rules_match(rules->rules[j].match, as, &m->cap))
			continue;
		if (rules->rules[j].experts_from) {
			int64_t from;

			rc = expr_eval_dim(plan->config, rules->rules[j].experts_from,
					   rules->rules[j].match, &from, err);
			if (rc)
				return rc;
			if (m->cap.e < from)
				continue;
			m->cap.e -= (long)from;
		}
		rc = rule_applies_memo(plan, mt, j, m->cap.n, &ok, err);
		if (rc)
			return rc;
		/* "from": the rule takes only sources of these dtypes */
		if (rules->rules[j].from &&
		    !(rules->rules[j].from >> plan->cat->tensors[i].info->dtype & 1))
			ok = false;
		if (ok && rules->rules[j].unless) {
			bool yields;

			rc = plan_rule_yields(plan, &rules->rules[j], &m->cap, &yields, err);
			if (rc)
				return rc;
			ok = !yields;
		}
	}
	if (!ok)
		return WSHARD_OK;
	j--;
	*out_matched = true;
	m->rule = &rules->rules[j];
	m->src = (uint32_t)i;
	if (m->rule->kind == RULE_REFUSE)
		return wshard_error_set(err, WSHARD_EINVAL, "tensor '%s': %s (rules %s)", name,
					m->rule->reason, rules->name);
	if (m->rule->reason)
		return WSHARD_OK;
	if (m->cap.n >= nlayers && !(m->cap.n < mt->width && plan_bounds_layers(plan, m->rule)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s' is for layer %ld, but '%s' has %ld layer%s (num_hidden_layers)",
					name, m->cap.n, plan->cat->path, nlayers,
					nlayers == 1 ? "" : "s");
	mt->seen[j * (size_t)(mt->width + 1) + (size_t)(m->cap.n < 0 ? 0 : m->cap.n)] = true;
	if (m->rule->kind == RULE_SKIP)
		return WSHARD_OK;
	rc = plan_rule_capture(plan, m->rule, &m->cap, err);
	if (rc)
		return rc;
	/* the pooling runner's model keeps a tied embedding under its name */
	if (mt->tied && !rules->tie_copy && !plan->cat->st_pooling &&
	    strcmp(as, rules->tie_source) == 0)
		m->out = strdup(rules_tie_output(rules, plan->config));
	else
		m->out = plan_output_name(plan, m->rule->output, &m->cap);
	if (m->out && (m->rule->inout || m->rule->block))
		m->out = plan_quark_out(plan, m->out);
	if (!m->out)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if ((pooled = plan_pooled_head(plan, m->out)) != NULL) {
		m->rule = pooled;
		free(m->out);
		m->out = NULL;
	}
	return WSHARD_OK;
}

/*
 * Source tensors [a, b) matched by one thread: its members, uncovered
 * tensors and left-out ones in tensor order, its first shape error (the
 * checks that come before shapes need every part), then its members
 * sorted.  A part stops at its first matching error.
 */
struct match_part {
	const struct wshard_plan *plan;
	struct matching mt;		/* seen and cond its own */
	size_t a, b;
	struct member *m;
	size_t n;
	uint32_t *un, *left;
	const struct rules_rule **lrule;	/* the rule that left left[k] out */
	size_t nun, nleft;
	struct wshard_error err;	/* matching */
	struct wshard_error shape_err;	/* its first member of a wrong shape */
};

/*
 * The tied head that vLLM fills with a copy of the embedding (BERT's MLM
 * decoder): a second member of the source m matched, cut by the head's
 * rule.  Returns whether it was made (false: out of memory, in err).
 */
static bool tie_copy(const struct wshard_rules *rules, const struct member *m,
		     struct member *copy, struct wshard_error *err)
{
	*copy = *m;
	copy->rule = rules->tie_copy_rule;
	copy->out = strdup(rules->tie_output);
	if (!copy->out)
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return copy->out != NULL;
}

/*
 * A source that rule m->rule took with "pass_on": the next rule that
 * matches it takes it too, as a member of its own after m (*n counts
 * them), and so on while the rule that took it has "pass_on"; one that
 * skips it or none ends that (the source is written already).
 */
static enum wshard_err pass_on(const struct wshard_plan *plan, struct matching *mt, size_t i,
			       const char *as, struct member *m, size_t *n,
			       struct wshard_error *err)
{
	const struct wshard_rules *rules = mt->rules;
	bool matched;
	enum wshard_err rc;

	while (m->rule->pass_on) {
		rc = match_one(plan, mt, i, as, (size_t)(m->rule - rules->rules) + 1, m + 1,
			       &matched, err);
		if (rc)
			return rc;
		if (!matched || !m[1].out)
			break;
		m++;
		(*n)++;
	}
	return WSHARD_OK;
}

static void *match_part(void *arg)
{
	struct match_part *pt = arg;
	const struct wshard_plan *plan = pt->plan;
	const struct wshard_rules *rules = pt->mt.rules;
	struct shape_memo *memo = calloc(rules->nrules + 1, sizeof(*memo));
	size_t i;

	if (!memo) {
		wshard_error_set(&pt->err, WSHARD_ENOMEM, "out of memory");
		return NULL;
	}
	for (i = pt->a; i < pt->b && !pt->err.code; i++) {
		char buf[RULES_NAME_MAX], qbuf[RULES_NAME_MAX];
		const char *name = rules_source_name(rules, plan->cat->tensors[i].name, buf);
		struct member *m = &pt->m[pt->n];
		bool matched;

		/* Quark's W4A16 tensors matched as AWQ's */
		name = plan_quark_as(plan, name, name == buf ? qbuf : buf, RULES_NAME_MAX);

		if (pt->mt.tied && strcmp(name, rules->tie_source) != 0 &&
		    plan_in_list(rules->tie_drop, rules->ntie_drop, name))
			continue;
		if (plan->cat->tensors[i].unstacked)	/* its experts' views are */
			continue;
		if (match_one(plan, &pt->mt, i, name, 0, m, &matched, &pt->err))
			break;
		if (!matched)
			pt->un[pt->nun++] = (uint32_t)i;
		else if (m->out) {
			pt->n++;
			if (pt->mt.tied && rules->tie_copy &&
			    strcmp(name, rules->tie_source) == 0) {
				if (!tie_copy(rules, m, &pt->m[pt->n], &pt->err))
					break;
				pt->n++;
			}
			if (pass_on(plan, &pt->mt, i, name, &pt->m[pt->n - 1], &pt->n, &pt->err))
				break;
		} else if (m->rule->reason) {
			pt->left[pt->nleft] = (uint32_t)i;
			pt->lrule[pt->nleft++] = m->rule;
		}
	}
	for (i = 0; i < pt->n && !pt->err.code && !pt->shape_err.code; i++)
		plan_check_shape(plan, &pt->m[i], &memo[pt->m[i].rule - rules->rules],
				 &pt->shape_err);
	free(memo);
	if (!pt->err.code)
		qsort(pt->m, pt->n, sizeof(*pt->m), cmp_member);
	return NULL;
}

/* Threads for matching: one per online CPU, MATCH_THREADS at most, and
 * none for a small checkpoint. */
#define MATCH_THREADS 8

static int match_threads(size_t ntensors)
{
	return ntensors < 4096 ? 1 : wshard_cpu_threads(MATCH_THREADS);
}

/* Merges the parts' sorted members into out (k-way, k at most MATCH_THREADS). */
static void merge_parts(struct match_part *pt, int np, struct member *out)
{
	size_t at[MATCH_THREADS] = { 0 }, o = 0;
	int k, best;

	for (;;) {
		best = -1;
		for (k = 0; k < np; k++)
			if (at[k] < pt[k].n &&
			    (best < 0 || cmp_member(&pt[k].m[at[k]], &pt[best].m[at[best]]) < 0))
				best = k;
		if (best < 0)
			break;
		out[o++] = pt[best].m[at[best]++];
	}
}

/*
 * One matching of a whole checkpoint: np parts, each with its own slice
 * (at its first tensor) of the four lists and its own seen and cond.
 */
struct match_run {
	struct matching mt;		/* seen: every part's, merged */
	size_t nseen, ncond;		/* the sizes of a seen and a cond */
	int np;
	struct match_part pt[MATCH_THREADS];
	struct member *members;
	uint32_t *uncovered, *left;
	const struct rules_rule **lrule;
};

/* Sizes *run for plan's tensors and gives every part its share.
 * Returns WSHARD_OK or WSHARD_ENOMEM. */
static enum wshard_err start_run(const struct wshard_plan *plan,
				 const struct wshard_rules *rules, struct match_run *run,
				 struct wshard_error *err)
{
	size_t nt = plan->cat->ntensors, fan = 1, j;
	struct match_part *pt = run->pt;
	int p;

	memset(run, 0, sizeof(*run));
	run->mt.rules = rules;
	run->mt.tied = rules_is_tied(rules, plan->config);
	run->np = match_threads(nt);
	/* a part may add one member (the copy of a tied embedding), and
	 * each source as many as rules pass it on */
	for (j = 0; j < rules->nrules; j++)
		fan += rules->rules[j].pass_on;
	run->members = calloc(nt * fan + (size_t)run->np + 1, sizeof(*run->members));
	run->uncovered = calloc(nt + 1, sizeof(*run->uncovered));
	run->left = calloc(nt + 1, sizeof(*run->left));
	run->lrule = calloc(nt + 1, sizeof(*run->lrule));
	run->mt.nlayers = plan_count_layers(plan, rules);
	count_width(plan, &run->mt);
	run->nseen = rules->nrules * (size_t)(run->mt.width + 1) + 1;
	run->ncond = rules->nrules * (size_t)(run->mt.width + 2) + 1;
	run->mt.seen = calloc(run->nseen, sizeof(bool));
	if (!run->members || !run->uncovered || !run->left || !run->lrule || !run->mt.seen)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	/* each part writes its own share of the three lists, in tensor order */
	for (p = 0; p < run->np; p++) {
		pt[p].plan = plan;
		pt[p].mt = run->mt;
		pt[p].a = nt * (size_t)p / (size_t)run->np;
		pt[p].b = nt * (size_t)(p + 1) / (size_t)run->np;
		pt[p].m = run->members + pt[p].a * fan + (size_t)p;
		pt[p].un = run->uncovered + pt[p].a;
		pt[p].left = run->left + pt[p].a;
		pt[p].lrule = run->lrule + pt[p].a;
		pt[p].mt.seen = calloc(run->nseen, sizeof(bool));
		pt[p].mt.cond = calloc(run->ncond, 1);
		if (!pt[p].mt.seen || !pt[p].mt.cond)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

/* Matches every part: the first on this thread, with those whose thread
 * did not start, the others each on a thread of its own. */
static void run_parts(struct match_run *run)
{
	pthread_t tid[MATCH_THREADS];
	int started = 0, p;

	for (p = 1; p < run->np; p++, started++)
		if (pthread_create(&tid[p - 1], NULL, match_part, &run->pt[p]))
			break;
	match_part(&run->pt[0]);
	for (p = started + 1; p < run->np; p++)	/* the threads that did not start */
		match_part(&run->pt[p]);
	for (p = 0; p < started; p++)
		pthread_join(tid[p], NULL);
}

/*
 * The parts' results in tensor order: the first matching error, every
 * rule's layers seen, the uncovered tensors (*out_nun of them, moved to
 * the front of run->uncovered), the left-out ones recorded in the plan,
 * and the count of members in *out_n.  Returns WSHARD_OK, the error of a
 * part, or WSHARD_ENOMEM.
 */
static enum wshard_err gather_parts(struct wshard_plan *plan, struct match_run *run,
				    size_t *out_nun, size_t *out_n,
				    struct wshard_error *err)
{
	const struct match_part *pt = run->pt;
	enum wshard_err rc = WSHARD_OK;
	size_t i, k;
	int p;

	/* the first part with an error holds the first tensor with one */
	for (p = 0; p < run->np && !rc; p++)
		if (pt[p].err.code)
			rc = wshard_error_set(err, pt[p].err.code, "%s", pt[p].err.msg);
	for (p = 0; p < run->np && !rc; p++) {
		for (k = 0; k < run->nseen; k++)
			run->mt.seen[k] |= pt[p].mt.seen[k];
		memmove(run->uncovered + *out_nun, pt[p].un, pt[p].nun * sizeof(*run->uncovered));
		*out_nun += pt[p].nun;
		for (i = 0; i < pt[p].nleft && !rc; i++)
			rc = plan_left_out(plan, plan->cat->tensors[pt[p].left[i]].name,
					   pt[p].lrule[i]->reason, err);
		*out_n += pt[p].n;
	}
	return rc;
}

/*
 * The checks that need the whole match, in the order their errors are
 * given: uncovered tensors, none to convert, required ones missing, then
 * the first member of a wrong shape.  Returns WSHARD_OK or WSHARD_EINVAL.
 */
static enum wshard_err check_match(struct wshard_plan *plan, const struct match_run *run,
				   size_t nun, size_t n, struct wshard_error *err)
{
	const struct matching *mt = &run->mt;
	enum wshard_err rc;
	int p;

	if (nun)
		rc = report_uncovered(plan, run->uncovered, nun, err);
	else if (n == 0)
		rc = wshard_error_set(err, WSHARD_EINVAL, "'%s' has no tensors to convert",
				      plan->cat->path);
	else
		rc = plan_check_required(plan, mt->rules, mt->seen, mt->nlayers, mt->width, mt->tied,
				    err);
	for (p = 0; p < run->np && !rc; p++)
		if (run->pt[p].shape_err.code)
			rc = wshard_error_set(err, run->pt[p].shape_err.code, "%s",
					      run->pt[p].shape_err.msg);
	return rc;
}

/* Frees what run holds; with its members, their names too. */
static void release_run(struct match_run *run)
{
	size_t i;
	int p;

	for (p = 0; run->members && p < run->np; p++)
		for (i = 0; i < run->pt[p].n; i++)
			free(run->pt[p].m[i].out);
	for (p = 0; p < run->np; p++) {
		free(run->pt[p].mt.seen);
		free(run->pt[p].mt.cond);
	}
	free(run->members);
	free(run->uncovered);
	free(run->left);
	free(run->lrule);
	free(run->mt.seen);
}

enum wshard_err plan_match_sources(struct wshard_plan *plan,
				   const struct wshard_rules *rules,
				   struct member **out_members, size_t *out_n,
				   struct wshard_error *err)
{
	struct match_run run;
	size_t n = 0, nun = 0;
	enum wshard_err rc;

	*out_members = NULL;
	*out_n = 0;
	rc = start_run(plan, rules, &run, err);
	if (!rc) {
		run_parts(&run);
		rc = gather_parts(plan, &run, &nun, &n, err);
	}
	if (!rc)
		rc = check_match(plan, &run, nun, n, err);
	if (!rc) {
		*out_members = malloc((n + 1) * sizeof(**out_members));
		if (!*out_members)
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	if (!rc) {
		/* the names move to *out_members: run gives back the rest */
		merge_parts(run.pt, run.np, *out_members);
		*out_n = n;
		free(run.members);
		run.members = NULL;
	}
	release_run(&run);
	return rc;
}
