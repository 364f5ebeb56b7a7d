/*
 * rows.c - how a source tensor's rows are divided, from the plan and
 * the memory budget alone (so every MPI process divides them the same):
 * a block of rows per process, read in windows of rows that fit the
 * budget, one window a step; or, when a single row does not fit, in
 * tiles.  Calls no other file of the stream.
 */
#include <stdint.h>
#include <stdlib.h>

#include "wshard.h"
#include "base/util.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "stream.h"
#include "stream_impl.h"

/*
 * Rows [a, b) that process q reads of a tensor at step k: a block of rows
 * per process, or everything on process 0 when the source can only be
 * read front to back (a compressed archive): it streams and sends.
 */
static void window_of(const struct stream *s, uint64_t rows, int q, uint64_t w,
		      uint64_t k, uint64_t *a, uint64_t *b)
{
	int nprocs = s->seekable ? s->nprocs : 1;
	uint64_t lo = q < nprocs ? rows * (uint64_t)q / (uint64_t)nprocs : rows;
	uint64_t hi = q < nprocs ? rows * (uint64_t)(q + 1) / (uint64_t)nprocs : rows;

	*a = WSHARD_MIN(lo + k * w, hi);
	*b = WSHARD_MIN(lo + (k + 1) * w, hi);
}

/*
 * The rows process q reads of source tensor src at step k: windows of w
 * rows, or with w == 0 its whole block in one step.
 */
void stream_rows_of(const struct stream *s, uint32_t src, int q, uint64_t w, uint64_t k,
		    uint64_t *a, uint64_t *b)
{
	uint64_t rows = wshard_plan_src_rows(s->plan, src);

	window_of(s, rows, q, w ? w : rows, w ? k : 0, a, b);
}

/* Steps of source tensor src in windows of w rows: the most any process needs. */
uint64_t stream_steps(const struct stream *s, uint32_t src, uint64_t w)
{
	uint64_t rows = wshard_plan_src_rows(s->plan, src), steps = 0;
	int q;

	for (q = 0; q < s->nprocs; q++) {
		uint64_t a, b;

		window_of(s, rows, q, rows, 0, &a, &b);
		steps = WSHARD_MAX(steps, (b - a + w - 1) / w);
	}
	return steps;
}

/*
 * Bytes a window of one source row costs: the row, and per output copy
 * each source byte feeds (fan, the bytes of its pieces over its own,
 * rounded up) the stage or the exchange's send and receive buffers.
 */
static uint64_t row_cost(uint64_t rb, uint64_t piece_bytes, uint64_t nbytes)
{
	return rb * (2 + 2 * ((piece_bytes + nbytes - 1) / nbytes));
}

/* Rows of source tensor src that fit the budget: 0 when one does not. */
static uint64_t budget_rows(const struct stream *s, uint32_t src)
{
	const struct wshard_src_tensor *t = &s->plan->cat->tensors[src];
	uint64_t rows = wshard_plan_src_rows(s->plan, src), bytes = 0;
	size_t i;

	for (i = 0; i < s->count[src]; i++)
		bytes += ref_piece(s, &s->refs[s->first[src] + i])->len;
	return s->budget / row_cost(t->nbytes / rows, bytes, t->nbytes);
}

uint64_t stream_window_rows(const struct stream *s, uint32_t src)
{
	uint64_t w = budget_rows(s, src);

	return w ? w : 1;
}

bool stream_tiled(const struct stream *s, uint32_t src)
{
	size_t i;

	if (!s->seekable || !streamed(s, src))
		return false;
	for (i = 0; i < s->count[src]; i++)
		if (!ref_piece(s, &s->refs[s->first[src] + i])->tr_rows)
			return false;
	return budget_rows(s, src) == 0;
}

enum wshard_err stream_check_budget(const struct wshard_plan *plan,
				    struct wshard_error *err)
{
	const struct wshard_catalog *cat = plan->cat;
	uint64_t *bytes = NULL;
	bool *tr = NULL;
	size_t i, k;
	uint32_t src;
	int r;

	if (wshard_catalog_seekable(cat))
		return WSHARD_OK;
	bytes = calloc(cat->ntensors + 1, sizeof(*bytes));
	tr = calloc(cat->ntensors + 1, sizeof(*tr));
	if (!bytes || !tr) {
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	for (r = 0; r < plan->nranks; r++)
		for (i = 0; i < plan->ranks[r].ntensors; i++)
			for (k = 0; k < plan->ranks[r].tensors[i].npieces; k++) {
				const struct wshard_piece *p = &plan->ranks[r].tensors[i].pieces[k];

				if (p->kind != WSHARD_PIECE_COPY)
					continue;
				bytes[p->src] += p->len;
				tr[p->src] = tr[p->src] || p->tr_rows;
			}
	for (src = 0; src < cat->ntensors; src++) {
		const struct wshard_src_tensor *t = &cat->tensors[src];
		uint64_t rows = wshard_plan_src_rows(plan, src), need;

		if (!tr[src] || !rows || !t->nbytes)
			continue;
		need = row_cost(t->nbytes / rows, bytes[src], t->nbytes);
		if (need > plan->opt.max_memory) {
			wshard_error_set(err, WSHARD_EINVAL,
					 "tensor '%s': its transposed copy from an archive read front to back needs %llu bytes for one expert, more than the memory budget of %llu bytes (convert's --max-memory, verify's 64 MiB): raise it or unpack the archive",
					 t->name, (unsigned long long)need,
					 (unsigned long long)plan->opt.max_memory);
			goto out;
		}
	}
out:
	free(bytes);
	free(tr);
	return err->code;
}
