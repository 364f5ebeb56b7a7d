/*
 * plan_layout.c - where each output tensor goes: the order of a rank's
 * tensors, their cut into parts of at most --max-file-size, and each
 * part's safetensors header and data offsets.
 *
 * A rank's data lies in the order of its tensors' names, across its parts
 * too, because that is the order the engine reads it in: vLLM's
 * sharded_state loader (and runai_streamer_sharded) walks each file's
 * safe_open(...).keys(), which are sorted by name, through a memory map.
 * Laid out so, its reads only ever go forward, which a file system's
 * read-ahead (a network one's above all) rewards.  The order is a
 * function of the plan alone, never of the order the source is read in.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/expr.h"
#include "plan_impl.h"
#include "base/util.h"

static int cmp_out(const void *a, const void *b)
{
	const struct wshard_out_tensor *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/*
 * Lays out tensors [first, last) of rp as its next part: each one's
 * header entry and data offsets, and the file's name, header and size.
 * st holds a scratch entry per tensor.
 */
static enum wshard_err layout_part(const struct wshard_plan *plan, struct wshard_rank_plan *rp,
				   size_t first, size_t last,
				   struct wshard_st_tensor *st, struct wshard_error *err)
{
	struct wshard_out_file *f = &rp->files[rp->nfiles];
	uint64_t data_len;
	size_t k;
	char name[96];
	enum wshard_err rc;

	for (k = first; k < last; k++) {
		st[k].name = rp->tensors[k].name;
		st[k].dtype = rp->tensors[k].dtype;
		st[k].ndim = rp->tensors[k].ndim;
		memcpy(st[k].shape, rp->tensors[k].shape, sizeof(st[k].shape));
	}
	rc = wshard_st_layout(st + first, last - first, NULL, 0, &f->header,
			      &f->header_len, &data_len, err);
	if (rc)
		return rc;
	for (k = first; k < last; k++) {
		rp->tensors[k].part = (uint32_t)rp->nfiles;
		rp->tensors[k].begin = st[k].begin;
		rp->tensors[k].end = st[k].end;
		if (st[k].end - st[k].begin != rp->tensors[k].nbytes)
			return wshard_error_set(err, WSHARD_EINVAL,
						"internal: output '%s' plans %llu bytes, its shape holds %llu",
						rp->tensors[k].name,
						(unsigned long long)rp->tensors[k].nbytes,
						(unsigned long long)(st[k].end - st[k].begin));
	}
	if (plan->opt.pp > 1)
		snprintf(name, sizeof(name), "model-pp-%d-tp-%d-part-%zu.safetensors", rp->stage,
			 rp->tp_rank, rp->nfiles);
	else
		snprintf(name, sizeof(name), "model-rank-%d-part-%zu.safetensors", rp->rank,
			 rp->nfiles);
	f->name = strdup(name);
	if (!f->name)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	f->size = f->header_len + data_len;
	f->first = first;
	f->count = last - first;
	rp->nfiles++;
	return WSHARD_OK;
}

/* Sorts a rank's tensors, cuts them into parts and lays out each file. */
static enum wshard_err layout_rank(struct wshard_plan *plan, struct wshard_rank_plan *rp,
				   struct wshard_error *err)
{
	struct wshard_st_tensor *st = NULL;
	size_t i, first = 0;
	uint64_t part_bytes = 0;
	enum wshard_err rc = WSHARD_OK;

	wshard_sort(rp->tensors, rp->ntensors, sizeof(*rp->tensors), cmp_out);
	for (i = 1; i < rp->ntensors; i++)
		if (strcmp(rp->tensors[i - 1].name, rp->tensors[i].name) == 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"two rules produce output '%s'", rp->tensors[i].name);
	rp->files = calloc(rp->ntensors + 1, sizeof(*rp->files));
	st = calloc(rp->ntensors + 1, sizeof(*st));
	if (!rp->files || !st) {
		free(st);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	for (i = 0; i <= rp->ntensors && !rc; i++) {
		struct wshard_out_tensor *t = i < rp->ntensors ? &rp->tensors[i] : NULL;
		bool cut = !t || (i > first && part_bytes + t->nbytes > plan->opt.max_file_size);

		if (cut && i > first) {
			rc = layout_part(plan, rp, first, i, st, err);
			first = i;
			part_bytes = 0;
		}
		if (t) {
			part_bytes += t->nbytes;
			rp->bytes += t->nbytes;
		}
	}
	free(st);
	return rc;
}

enum wshard_err plan_layout(struct wshard_plan *plan, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int r;

	for (r = 0; r < plan->nranks && !rc; r++)
		rc = layout_rank(plan, &plan->ranks[r], err);
	return rc;
}

char *plan_output_name(const struct wshard_plan *plan, const char *pattern,
		       const struct rules_capture *cap)
{
	struct rules_capture at = *cap;
	char *name = rules_expand(pattern, cap), *pre, *to, *out = NULL;

	if (!name || !plan->rename_prefix || cap->n < plan->rename_from)
		return name;
	pre = rules_expand(plan->rename_prefix, cap);
	if (pre && strncmp(name, pre, strlen(pre)) != 0) {
		free(pre);
		return name;
	}
	at.n = cap->n - plan->rename_from;
	to = pre ? rules_expand(plan->rename_to, &at) : NULL;
	out = to ? malloc(strlen(to) + strlen(name) - strlen(pre) + 1) : NULL;
	if (out)
		sprintf(out, "%s%s", to, name + strlen(pre));
	free(pre);
	free(to);
	free(name);
	return out;
}

/* Keep the rename the rules give: layers from @from on are held as
 * rename_to (for "add", from is minus the number added). */
static enum wshard_err rename_keep(struct wshard_plan *plan, const struct wshard_rules *rules,
				   int64_t from, struct wshard_error *err)
{
	plan->rename_from = (long)from;
	plan->rename_prefix = strdup(rules->rename_prefix);
	plan->rename_to = strdup(rules->rename_to);
	if (!plan->rename_prefix || !plan->rename_to)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

/*
 * "rename_layers" with "add": every layer numbered on by the expression
 * (n - (-add)).  No num_hidden_layers needed: LongCat-Flash's config.json
 * has num_layers, half of them.
 */
static enum wshard_err rename_add(struct wshard_plan *plan, const struct wshard_rules *rules,
				  int64_t add, struct wshard_error *err)
{
	if (add == 0)
		return WSHARD_OK;
	if (plan->opt.pp > 1)
		return wshard_error_set(err, WSHARD_EINVAL,
					"--pp is not written for %s when every layer is held under another number (%s, %s on): vLLM builds no pipeline stages of it",
					rules->name, rules->rename_to, rules->rename_from);
	return rename_keep(plan, rules, -add, err);
}

/*
 * The rules' "rename_layers" for this checkpoint: the first layer it
 * renames (or, for "add", minus the number added to every layer).  --pp
 * is refused where it renames any: vLLM 0.32 builds no pipeline stages of
 * such a model (Gemma 4 with kv-shared layers, an MTP draft).
 */
enum wshard_err plan_set_rename(struct wshard_plan *plan, const struct wshard_rules *rules,
				struct wshard_error *err)
{
	int64_t from, layers;
	enum wshard_err rc;

	if (!rules->rename_from)
		return WSHARD_OK;
	rc = expr_eval_dim(plan->config, rules->rename_from, "rename_layers", &from, err);
	if (rc)
		return rc;
	if (rules->rename_add)
		return rename_add(plan, rules, from, err);
	rc = expr_eval_dim(plan->config, "num_hidden_layers", "rename_layers", &layers, err);
	if (rc)
		return rc;
	if (from < 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"%s: \"rename_layers\" starts at layer %lld (%s), before the first",
					rules->name, (long long)from, rules->rename_from);
	if (from >= layers)
		return WSHARD_OK;
	if (plan->opt.pp > 1)
		return wshard_error_set(err, WSHARD_EINVAL,
					"--pp is not written for %s when layers %lld to %lld are held under another name (%s): vLLM builds no pipeline stages of it",
					rules->name, (long long)from, (long long)layers - 1,
					rules->rename_to);
	return rename_keep(plan, rules, from, err);
}

/* Whether output name is an LM head's ("lm_head.weight",
 * "language_model.lm_head.weight", a quantized head's scales). */
static bool lm_head(const char *name)
{
	return !strncmp(name, "lm_head.", 8) || strstr(name, ".lm_head.") != NULL;
}

const struct rules_rule *plan_pooled_head(const struct wshard_plan *plan, const char *out)
{
	static char reason[] = "an LM head: vLLM serves a sentence-transformers model "
			       "(modules.json with a Pooling module) with its pooling runner, "
			       "which holds none";
	static const struct rules_rule pooled = { .kind = RULE_SKIP, .reason = reason };

	return plan->cat->st_pooling && lm_head(out) ? &pooled : NULL;
}
