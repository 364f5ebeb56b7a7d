/*
 * plan_stage.c - pipeline parallelism (--pp): which stage holds what.
 *
 * vLLM builds, on each stage, only the decoder layers that stage runs
 * (make_layers over get_pp_indices) and, of the rest, what its model
 * class makes there (embeddings on the first stage, the final norm and
 * head on the last, or all of them on every stage: the rules' "pipeline"
 * says).  Its sharded_state loader then reads, on the worker of stage s
 * and tensor-parallel rank t, model-pp-s-tp-t-part-*.safetensors.  So the
 * tp ranks of the plan, cut as they would be without stages, are dealt
 * out to the stages by those two answers; a tensor on several stages is
 * planned once per stage and read once from the source.
 *
 * Tied word embeddings: the plan holds the one tensor under the rules'
 * tie output (lm_head.weight), as vLLM's state names it where embedding
 * and head share it (sharded_state keeps the smaller of two names).  A
 * stage that builds the embedding but not the head (Llama's first, where
 * the head is on the last only) holds it under the embedding's own output
 * name (the tie source's rule's).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "source/catalog.h"
#include "plan_impl.h"
#include "rules/rules.h"
#include "rules/expr.h"

/* n layers dealt to pp stages as vLLM 0.32's get_pp_indices deals them
 * (distributed/utils.py:153-158): n / pp each and the remainder one more
 * to each stage before the last, from the one before the last backwards. */
static void partition(long n, int pp, int *out)
{
	int s;

	for (s = 0; s < pp; s++)
		out[s] = (int)(n / pp);
	for (s = 0; s < (int)(n % pp); s++)
		out[pp - 2 - s]++;
}

/*
 * The decoder layers of each stage: --pp-layers as given
 * (VLLM_PP_LAYER_PARTITION), else as partition() deals them.
 */
static enum wshard_err stage_layers(struct wshard_plan *plan, long nlayers,
				    const int *pp_layers, struct wshard_error *err)
{
	int pp = plan->opt.pp, s;
	long sum = 0;

	plan->stage_layers = calloc((size_t)pp, sizeof(int));
	if (!plan->stage_layers)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (pp_layers) {
		for (s = 0; s < pp; s++) {
			if (pp_layers[s] < 1)
				return wshard_error_set(err, WSHARD_EUSAGE,
							"--pp-layers: stage %d would hold no layer", s);
			plan->stage_layers[s] = pp_layers[s];
			sum += pp_layers[s];
		}
		if (sum != nlayers)
			return wshard_error_set(err, WSHARD_EINVAL,
						"--pp-layers adds up to %ld layers; the model has %ld (num_hidden_layers)",
						sum, nlayers);
		return WSHARD_OK;
	}
	if (nlayers < pp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"--pp %d: the model has %ld decoder layers (num_hidden_layers), fewer than the stages",
					pp, nlayers);
	partition(nlayers, pp, plan->stage_layers);
	return WSHARD_OK;
}

/*
 * The layers of each stage for each of the rules' layer stacks (*out,
 * stack-major): the decoder's, or where the rules give a stack a count of
 * its own (a Whisper encoder's), that count dealt as vLLM's make_layers
 * deals it, by get_pp_indices on its own (a stage may hold none).  vLLM
 * splits every stack by one VLLM_PP_LAYER_PARTITION and raises where it
 * does not add up to the stack's layers (distributed/utils.py:150-151):
 * --pp-layers is refused so.
 */
static enum wshard_err stack_layers(struct wshard_plan *plan, const struct wshard_rules *rules,
				    const int *pp_layers, int **out, struct wshard_error *err)
{
	int pp = plan->opt.pp;
	size_t n = 0, i;
	int64_t count;
	long sum = 0;
	int s;
	enum wshard_err rc;

	while (rules->pp_layers[n])
		n++;
	*out = calloc(n * (size_t)pp, sizeof(int));
	if (!*out)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (s = 0; s < pp; s++)
		sum += plan->stage_layers[s];
	for (i = 0; i < n; i++) {
		int *st = *out + i * (size_t)pp;

		if (!rules->pp_counts[i]) {
			memcpy(st, plan->stage_layers, (size_t)pp * sizeof(int));
			continue;
		}
		rc = expr_eval_dim(plan->config, rules->pp_counts[i], rules->pp_layers[i], &count,
				   err);
		if (rc)
			return rc;
		if (pp_layers && count != sum)
			return wshard_error_set(err, WSHARD_EINVAL,
						"--pp-layers adds up to %ld layers, but vLLM splits the %lld layers of '%s' (%s) by the same partition and refuses it (rules '%s')",
						sum, (long long)count, rules->pp_layers[i],
						rules->pp_counts[i], rules->name);
		partition(count, pp, st);
	}
	return WSHARD_OK;
}

/* Where the rules put an output: a decoder layer's stage, or a kind. */
struct place {
	int stage;			/* the layer's stage; -1: kind decides */
	enum rules_stage kind;
};

/* *out for output name, stacks the layers of each stage of each layer
 * stack (stack_layers).  Returns false when the rules give it no stage
 * (*out_past: it is of a layer past the stages' layers). */
static bool place_of(const struct wshard_plan *plan, const struct wshard_rules *rules,
		     const int *stacks, const char *name, struct place *out, bool *out_past)
{
	long layer, first = 0;
	size_t stack = 0;
	int s;

	out->stage = -1;
	out->kind = RULES_STAGE_ALL;
	*out_past = false;
	if (!rules_stage_of(rules, name, &layer, &stack, &out->kind))
		return false;
	for (s = 0; layer >= 0 && s < plan->opt.pp && out->stage < 0; s++) {
		first += stacks[stack * (size_t)plan->opt.pp + (size_t)s];
		if (layer < first)
			out->stage = s;
	}
	*out_past = layer >= 0 && out->stage < 0;
	return !*out_past;
}

/* Whether stage s holds what is placed at *pl. */
static bool holds(const struct wshard_plan *plan, const struct place *pl, int s)
{
	if (pl->stage >= 0)
		return s == pl->stage;
	switch (pl->kind) {
	case RULES_STAGE_FIRST:
		return s == 0;
	case RULES_STAGE_LAST:
		return s == plan->opt.pp - 1;
	default:
		return true;
	}
}

/* A copy of t named name, with its own pieces, appended to rp. */
static enum wshard_err push_copy(struct wshard_rank_plan *rp, size_t *cap,
				 const struct wshard_out_tensor *t, const char *name,
				 struct wshard_error *err)
{
	struct wshard_out_tensor c = *t;

	c.name = strdup(name);
	c.pieces = malloc((t->npieces ? t->npieces : 1) * sizeof(*t->pieces));
	if (!c.name || !c.pieces) {
		free(c.name);
		free(c.pieces);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	memcpy(c.pieces, t->pieces, t->npieces * sizeof(*t->pieces));
	return plan_rank_push(rp, cap, &c, err);
}

/* The tied embedding's two names when a pipeline splits it: embed is NULL
 * when the embeddings are not tied. */
struct tied {
	const char *head;	/* the tie's output, for this config */
	const char *embed;	/* the embedding's own output name */
	struct place pl;	/* where embed is built */
};

/*
 * Deals tensor t of tp rank r out to each stage that holds it: a copy to
 * each but the last that holds it under its own name, which takes t
 * itself (most outputs are on one stage: nothing copied).  The tied
 * embedding's one tensor goes under the head's name (tied->head) to the
 * head's stages and under the embedding's own (tied->embed, placed at
 * tied->pl) to its others.
 */
static enum wshard_err deal(struct wshard_plan *plan, const struct wshard_rules *rules,
			    const int *stacks, const struct tied *tied,
			    struct wshard_rank_plan *ranks, size_t *caps, int r,
			    struct wshard_out_tensor *t, struct wshard_error *err)
{
	bool tie = tied->embed && strcmp(t->name, tied->head) == 0, past;
	struct place pl;
	int s, own = -1, k;
	enum wshard_err rc = WSHARD_OK;

	if (!place_of(plan, rules, stacks, t->name, &pl, &past))
		return wshard_error_set(err, WSHARD_EINVAL,
					past ? "rules '%s': output '%s' is of a layer past its stack's (num_hidden_layers, or the pipeline's count)"
					     : "rules '%s' give no pipeline stage for output '%s'",
					rules->name, t->name);
	for (s = 0; s < plan->opt.pp; s++)
		if (holds(plan, &pl, s))
			own = s;
	for (s = 0; s < plan->opt.pp && !rc; s++) {
		k = s * plan->tp + r;
		if (s != own && holds(plan, &pl, s))
			rc = push_copy(&ranks[k], &caps[k], t, t->name, err);
		else if (s != own && tie && holds(plan, &tied->pl, s))
			rc = push_copy(&ranks[k], &caps[k], t, tied->embed, err);
	}
	k = own * plan->tp + r;
	return rc ? rc : plan_rank_push(&ranks[k], &caps[k], t, err);
}

/* The stage of decoder layer l, from plan->stage_layers. */
static int stage_of_layer(const struct wshard_plan *plan, long l)
{
	int s;

	for (s = 0; s < plan->opt.pp - 1 && l >= plan->stage_layers[s]; s++)
		l -= plan->stage_layers[s];
	return s;
}

/*
 * The rules' "same_stage": each decoder layer where its condition holds
 * must share a stage with its source layer, the greatest entry of the
 * config array at or below it (vLLM 0.32's DeepSeek-V4.1 attention looks
 * the source's caches up on its own stage and raises where they are not:
 * deepseek_v41/attention.py:455-459, 597-601).
 */
static enum wshard_err check_same_stage(const struct wshard_plan *plan,
					const struct wshard_rules *rules, long nlayers,
					struct wshard_error *err)
{
	int64_t nsrc = rules->pp_same_src ? expr_config_count(plan->config, rules->pp_same_src)
					  : 0, i, v, src;
	char key[256];
	bool hold = true;
	long l;
	enum wshard_err rc;

	for (l = 0; l < nlayers && nsrc > 0; l++) {
		if (rules->pp_same_if &&
		    (rc = expr_eval_cond(plan->config, rules->pp_same_if, l, -1, "pipeline", &hold,
					 err)))
			return rc;
		for (i = 0, src = -1; hold && i < nsrc; i++) {
			snprintf(key, sizeof(key), "%s[%lld]", rules->pp_same_src, (long long)i);
			if ((rc = expr_eval_dim(plan->config, key, "pipeline", &v, err)))
				return rc;
			if (v <= l && v > src)
				src = v;
		}
		if (hold && src >= 0 && stage_of_layer(plan, src) != stage_of_layer(plan, l))
			return wshard_error_set(err, WSHARD_EINVAL,
						"--pp %d puts decoder layer %ld on stage %d and its source layer %lld (config.json's %s) on stage %d: %s (rules '%s')",
						plan->opt.pp, l, stage_of_layer(plan, l), (long long)src,
						rules->pp_same_src, stage_of_layer(plan, src),
						rules->pp_same_why, rules->name);
	}
	return WSHARD_OK;
}

enum wshard_err plan_split_stages(struct wshard_plan *plan, const struct wshard_rules *rules,
				  long nlayers, const int *pp_layers, struct wshard_error *err)
{
	int pp = plan->opt.pp, tp = plan->tp, n = pp * tp, r, s;
	struct wshard_rank_plan *ranks;
	struct tied tied = { NULL, NULL, { -1, RULES_STAGE_ALL } };
	bool past;
	size_t i, *caps;
	int64_t first_min;
	int *stacks = NULL;
	enum wshard_err rc;

	if (pp == 1)
		return WSHARD_OK;
	if (rules->no_pp)
		return wshard_error_set(err, WSHARD_EINVAL, "--pp %d is not written for %s: %s",
					pp, rules->name, rules->no_pp);
	if (rules->pp_none_with && expr_config_count(plan->config, rules->pp_none_with) > 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"--pp %d: no pipeline is written for this checkpoint (config.json's %s is set; rules '%s')",
					pp, rules->pp_none_with, rules->name);
	if (rules->pp_none_if) {
		bool none;

		rc = expr_eval_cond(plan->config, rules->pp_none_if, -1, -1, "pipeline", &none, err);
		if (rc)
			return rc;
		if (none)
			return wshard_error_set(err, WSHARD_EINVAL,
						"--pp %d: no pipeline is written for this checkpoint (%s; rules '%s')",
						pp, rules->pp_none_if, rules->name);
	}
	rc = stage_layers(plan, nlayers, pp_layers, err);
	if (rc)
		return rc;
	/* vLLM's Qwen3-VL asserts that every later stage starts past the
	 * deepstack layers, whose features the first stage carries */
	first_min = rules->pp_first_min ? expr_config_count(plan->config, rules->pp_first_min) : 0;
	if (first_min > plan->stage_layers[0])
		return wshard_error_set(err, WSHARD_EINVAL,
					"--pp %d: the first stage would hold %d decoder layers; vLLM wants at least %lld there (%s)",
					pp, plan->stage_layers[0], (long long)first_min,
					rules->pp_first_min);
	rc = check_same_stage(plan, rules, nlayers, err);
	if (rc)
		return rc;
	rc = stack_layers(plan, rules, pp_layers, &stacks, err);
	/* tied: the embedding's own output name (the tie source's rule's) */
	for (i = 0; !rc && rules_is_tied(rules, plan->config) && i < rules->nrules && !tied.embed;
	     i++)
		if (strcmp(rules->rules[i].match, rules->tie_source) == 0)
			tied.embed = rules->rules[i].output ? rules->rules[i].output
							    : rules->rules[i].match;
	/* vLLM's pooling runner (a sentence-transformers model) has no head,
	 * and keeps the tied embedding under its own name on the head's
	 * stages too (its models build embed_tokens on the last stage where
	 * tie_word_embeddings) */
	tied.head = !tied.embed ? NULL : plan->cat->st_pooling ? tied.embed
							       : rules_tie_output(rules, plan->config);
	if (!rc && tied.embed && !place_of(plan, rules, stacks, plan->cat->st_pooling ?
					   rules_tie_output(rules, plan->config) : tied.embed,
					   &tied.pl, &past))
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "rules '%s' give no pipeline stage for output '%s'",
				      rules->name, tied.embed);
	ranks = rc ? NULL : calloc((size_t)n, sizeof(*ranks));
	caps = rc ? NULL : calloc((size_t)n, sizeof(*caps));
	if (rc || !ranks || !caps) {
		free(ranks);
		free(caps);
		free(stacks);
		return rc ? rc : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	for (s = 0; s < pp; s++) {
		for (r = 0; r < tp; r++) {
			ranks[s * tp + r].rank = s * tp + r;
			ranks[s * tp + r].stage = s;
			ranks[s * tp + r].tp_rank = r;
		}
	}
	for (r = 0; r < tp && !rc; r++) {
		struct wshard_rank_plan *rp = &plan->ranks[r];

		for (i = 0; i < rp->ntensors && !rc; i++)
			rc = deal(plan, rules, stacks, &tied, ranks, caps, r, &rp->tensors[i], err);
	}
	/* what was not dealt (a failure) is freed with the old ranks (dealt
	 * ones were zeroed); the new ones go with the plan either way */
	for (r = 0; r < tp; r++) {
		for (i = 0; i < plan->ranks[r].ntensors; i++) {
			free(plan->ranks[r].tensors[i].name);
			free(plan->ranks[r].tensors[i].pieces);
		}
		free(plan->ranks[r].tensors);
	}
	free(plan->ranks);
	free(caps);
	free(stacks);
	plan->ranks = ranks;
	plan->nranks = n;
	return rc;
}
