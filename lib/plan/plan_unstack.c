/*
 * plan_unstack.c - the rules' "experts_in_rows": a source tensor that
 * holds a model's experts one after another by rows (DBRX's
 * ffn.experts.mlp.w1, v1 and w2, [E*I, H] each) is read as E tensors
 * NAME.0 .. NAME.E-1, each a view of its own rows ([I, H]), which the
 * rules then match with {e} as they match checkpoints that store one
 * tensor an expert.  A tensor of 3 or more dimensions whose first counts
 * the experts (Step-3.5's moe.gate_proj.weight, [E, I, H]) gives views
 * without it ([I, H]), which a fuse can then join expert by expert.  A
 * view is a catalog entry like any other (the same file, an offset into
 * the tensor), so every split, fuse, transpose and expert placement reads
 * it unchanged, and the manifest names it.  An entry's "rows" gives each
 * view that many rows from the tensor's start instead, the rows after
 * them not read: Kimi K3's A_log, released zero-padded to 128 entries, is
 * read as A_log.0 of num_heads (vLLM's a_log_weight_loader narrows it so).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/util.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/expr.h"
#include "rules/rules.h"
#include "plan_impl.h"

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct wshard_src_tensor *)a)->name,
		      ((const struct wshard_src_tensor *)b)->name);
}

/* The views of an earlier plan of the same catalog, gone. */
static void drop_views(struct wshard_catalog *cat)
{
	size_t i, n = 0;

	if (!cat->nviews)	/* no tensor is marked unstacked either */
		return;
	for (i = 0; i < cat->ntensors; i++) {
		const struct wshard_st_tensor *t = cat->tensors[i].info;

		if (cat->nviews && t >= cat->views && t < cat->views + cat->nviews)
			continue;
		cat->tensors[n] = cat->tensors[i];
		cat->tensors[n++].unstacked = false;
	}
	cat->ntensors = n;
	for (i = 0; i < cat->nviews; i++)
		free(cat->views[i].name);
	free(cat->views);
	cat->views = NULL;
	cat->nviews = 0;
}

/* The experts source i holds by the rules' "experts_in_rows" (0: it is
 * none of theirs), checked against its rows; *rows each view's rows where
 * the entry gives them (else 0). */
static enum wshard_err count_experts(const struct wshard_plan *plan,
				     const struct wshard_rules *rules, size_t i,
				     int64_t *out, int64_t *rows, struct wshard_error *err)
{
	const struct wshard_src_tensor *t = &plan->cat->tensors[i];
	struct rules_capture cap;
	size_t u;
	enum wshard_err rc;

	*out = *rows = 0;
	for (u = 0; u < rules->nunstack; u++) {
		if (!rules_match(rules->unstack[u].match, t->name, &cap))
			continue;
		rc = expr_eval_dim(plan->config, rules->unstack[u].count, t->name, out, err);
		if (rc)
			return rc;
		if (rules->unstack[u].rows) {
			rc = expr_eval_dim(plan->config, rules->unstack[u].rows, t->name, rows,
					   err);
			if (rc)
				return rc;
			if (*out < 1 || *rows < 1 || t->info->ndim < 1 ||
			    (uint64_t)*out * (uint64_t)*rows > t->info->shape[0])
				return wshard_error_set(err, WSHARD_EINVAL,
							"tensor '%s': %llu rows cannot hold %lld experts of %lld rows (experts_in_rows: %s, rows %s)",
							t->name,
							(unsigned long long)(t->info->ndim ? t->info->shape[0] : 0),
							(long long)*out, (long long)*rows,
							rules->unstack[u].count, rules->unstack[u].rows);
			return WSHARD_OK;
		}
		if (*out < 1 || t->info->ndim < 1 || t->info->shape[0] % (uint64_t)*out)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': %llu rows cannot hold %lld experts (experts_in_rows: %s)",
						t->name,
						(unsigned long long)(t->info->ndim ? t->info->shape[0] : 0),
						(long long)*out, rules->unstack[u].count);
		return WSHARD_OK;
	}
	return WSHARD_OK;
}

enum wshard_err plan_unstack(struct wshard_plan *plan, const struct wshard_rules *rules,
			     struct wshard_error *err)
{
	/* the catalog is the source as the rules read it: its views are its
	 * own, made anew for each plan */
	struct wshard_catalog *cat = (struct wshard_catalog *)plan->cat;
	struct wshard_src_tensor *grown;
	size_t i, total = 0, n0, k = 0;
	int64_t *ne, *nr;
	enum wshard_err rc = WSHARD_OK;

	drop_views(cat);
	if (!rules->nunstack)
		return WSHARD_OK;
	n0 = cat->ntensors;
	ne = calloc(2 * (n0 + 1), sizeof(*ne));
	if (!ne)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	nr = ne + n0 + 1;
	for (i = 0; i < n0 && !rc; i++) {
		rc = count_experts(plan, rules, i, &ne[i], &nr[i], err);
		total += (size_t)ne[i];
	}
	if (rc || !total) {
		free(ne);
		return rc;
	}
	cat->views = calloc(total, sizeof(*cat->views));
	grown = realloc(cat->tensors, (n0 + total) * sizeof(*grown));
	if (grown)
		cat->tensors = grown;
	if (!cat->views || !grown) {
		free(cat->views);
		cat->views = NULL;
		free(ne);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	for (i = 0; i < n0; i++) {
		struct wshard_src_tensor *t = &cat->tensors[i];
		uint64_t each;
		int64_t e;

		if (!ne[i])
			continue;
		t->unstacked = true;
		each = nr[i] ? t->nbytes / t->info->shape[0] * (uint64_t)nr[i]
			     : t->nbytes / (uint64_t)ne[i];
		for (e = 0; e < ne[i]; e++, k++) {
			struct wshard_st_tensor *v = &cat->views[k];
			size_t len = strlen(t->name) + 24;

			*v = *t->info;
			v->name = malloc(len);
			if (!v->name) {
				cat->nviews = k;
				free(ne);
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			}
			snprintf(v->name, len, "%s.%lld", t->name, (long long)e);
			if (nr[i]) {
				v->shape[0] = (uint64_t)nr[i];
			} else if (v->ndim >= 3 && v->shape[0] == (uint64_t)ne[i]) {
				/* stacked [E, A, B]: an expert's view is [A, B] */
				memmove(v->shape, v->shape + 1,
					sizeof(v->shape[0]) * (size_t)(v->ndim - 1));
				v->shape[--v->ndim] = 0;
			} else {
				v->shape[0] /= (uint64_t)ne[i];
			}
			v->begin = t->info->begin + (uint64_t)e * each;
			v->end = v->begin + each;
			cat->tensors[cat->ntensors++] = (struct wshard_src_tensor){
				.name = v->name,
				.file = t->file,
				.info = v,
				.offset = t->offset + (uint64_t)e * each,
				.nbytes = each,
			};
			cat->nviews = k + 1;
		}
	}
	free(ne);
	wshard_sort(cat->tensors, cat->ntensors, sizeof(*cat->tensors), by_name);
	for (i = 1; i < cat->ntensors; i++)
		if (!strcmp(cat->tensors[i - 1].name, cat->tensors[i].name))
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': an expert of another tensor (experts_in_rows) has its name",
						cat->tensors[i].name);
	return WSHARD_OK;
}
