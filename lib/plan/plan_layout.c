/*
 * plan_layout.c - where each output tensor goes: the order of a rank's
 * tensors (a function of the plan alone), their cut into parts of at most
 * --max-file-size, and each part's safetensors header and data offsets.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "plan_impl.h"
#include "base/util.h"

static int cmp_out(const void *a, const void *b)
{
	const struct wshard_out_tensor *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/*
 * The order of the output data is a function of the plan alone, never of
 * the order in which the source is read: catalog files are indexed in
 * archive order for an archive (a compressed one is read front to back),
 * and `tar -cf` stores members in readdir order.  Source positions are
 * therefore compared by file name, then offset within that file.
 */
struct done_order {
	const struct wshard_catalog *cat;
	uint32_t *file_rank;		/* per catalog file: its place by name */
};

static int cmp_file_name(const void *a, const void *b, void *ctx)
{
	const struct wshard_catalog *cat = ctx;

	return strcmp(cat->files[*(const uint32_t *)a].name,
		      cat->files[*(const uint32_t *)b].name);
}

/* Fills o->file_rank.  Returns WSHARD_OK or WSHARD_ENOMEM. */
static enum wshard_err done_order_init(struct done_order *o,
				       const struct wshard_catalog *cat,
				       struct wshard_error *err)
{
	uint32_t *by_name;
	size_t i;

	o->cat = cat;
	o->file_rank = calloc(cat->nfiles + 1, sizeof(*o->file_rank));
	by_name = calloc(cat->nfiles + 1, sizeof(*by_name));
	if (!o->file_rank || !by_name) {
		free(by_name);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	for (i = 0; i < cat->nfiles; i++)
		by_name[i] = (uint32_t)i;
	qsort_r(by_name, cat->nfiles, sizeof(*by_name), cmp_file_name, (void *)cat);
	for (i = 0; i < cat->nfiles; i++)
		o->file_rank[by_name[i]] = (uint32_t)i;
	free(by_name);
	return WSHARD_OK;
}

/*
 * Where a name-ordered read of the source completes an output tensor:
 * the (file by name, offset in file) of the last source tensor it copies
 * from.  A tensor with no source bytes (constants) comes first.
 */
static void done_at(const struct done_order *o, const struct wshard_out_tensor *t,
		    uint64_t *file, uint64_t *off)
{
	size_t k;

	*file = *off = 0;
	for (k = 0; k < t->npieces; k++) {
		const struct wshard_piece *p = &t->pieces[k];
		const struct wshard_src_tensor *s;
		uint64_t f, b;

		if (p->kind != WSHARD_PIECE_COPY)
			continue;
		s = &o->cat->tensors[p->src];
		f = o->file_rank[s->file];
		b = s->info->begin + 1;
		if (f > *file || (f == *file && b > *off)) {
			*file = f;
			*off = b;
		}
	}
}

/* A tensor's place in the output order, its done_at worked out once. */
struct done_key {
	uint64_t file, off;
	const struct wshard_out_tensor *t;
};

/* Output order in a part: as a name-ordered read completes them, then by name. */
static int cmp_done(const void *a, const void *b)
{
	const struct done_key *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return strcmp(x->t->name, y->t->name);
}

/*
 * Sorts rp's tensors by cmp_done.  Each tensor's done_at is worked out
 * once, not in every comparison: a stacked expert output has a piece
 * per expert.  Returns WSHARD_OK or WSHARD_ENOMEM.
 */
static enum wshard_err sort_done(const struct done_order *order, struct wshard_rank_plan *rp,
				 struct wshard_error *err)
{
	struct done_key *key = calloc(rp->ntensors + 1, sizeof(*key));
	struct wshard_out_tensor *sorted = calloc(rp->ntensors + 1, sizeof(*sorted));
	size_t i;

	if (!key || !sorted) {
		free(key);
		free(sorted);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	for (i = 0; i < rp->ntensors; i++) {
		key[i].t = &rp->tensors[i];
		done_at(order, key[i].t, &key[i].file, &key[i].off);
	}
	wshard_sort(key, rp->ntensors, sizeof(*key), cmp_done);
	for (i = 0; i < rp->ntensors; i++)
		sorted[i] = *key[i].t;
	memcpy(rp->tensors, sorted, rp->ntensors * sizeof(*sorted));
	free(key);
	free(sorted);
	return WSHARD_OK;
}

/*
 * Lays out tensors [first, last) of rp as its next part: each one's
 * header entry and data offsets, and the file's name, header and size.
 * st holds a scratch entry per tensor.
 */
static enum wshard_err layout_part(struct wshard_rank_plan *rp, size_t first, size_t last,
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
	snprintf(name, sizeof(name), "model-rank-%d-part-%zu.safetensors", rp->rank, rp->nfiles);
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
static enum wshard_err layout_rank(struct wshard_plan *plan,
				   const struct done_order *order,
				   struct wshard_rank_plan *rp,
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
	/*
	 * The data follows the order in which a read of the source files by
	 * name completes the tensors (the stream's order, but for an archive
	 * whose members are not sorted), so that each part can be hashed and
	 * validated a little behind the writing, while its bytes are still
	 * in cache (seal.c); the header lists them in the same order.
	 */
	rc = sort_done(order, rp, err);
	if (rc)
		return rc;
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
			rc = layout_part(rp, first, i, st, err);
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
	struct done_order order = { 0 };
	enum wshard_err rc;
	int r;

	rc = done_order_init(&order, plan->cat, err);
	for (r = 0; r < plan->tp && !rc; r++)
		rc = layout_rank(plan, &order, &plan->ranks[r], err);
	free(order.file_rank);
	return rc;
}
