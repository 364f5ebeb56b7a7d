/*
 * stream.c - reads the source once and feeds every output byte to a sink.
 *
 * The source tensors are visited in file order.  Under MPI, a tensor
 * whose bytes each go to exactly one output piece is read piece by piece
 * by the owners of the pieces (read_own).  Any other tensor, seen as a
 * matrix of rows x row_bytes, is cut into one block of rows per process;
 * a process reads its block in windows of rows that fit the memory
 * budget, and for every plan piece that overlaps its window either hands
 * the bytes to its own sink (when it owns the piece's rank) or sends them
 * to the owner.  All processes derive who sends what at each step from
 * the same plan, so one MPI_Alltoallv per step moves the bytes, with no
 * extra metadata.  Small tensors that each fit in one window go through
 * one step together, up to a quarter of the budget.  Summed over
 * processes, each source byte is read once.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wshard.h"
#include "base/util.h"
#include "base/dtype.h"
#include "base/fpconv.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "base/comm.h"
#include "base/hooks.h"
#include "stream.h"
#include "stream_impl.h"

/* Source bytes between two checks that no MPI process has failed. */
#define AGREE_BYTES ((uint64_t)256 << 20)


enum wshard_err stream_grow(char **buf, size_t *cap, size_t need,
			    struct wshard_error *err)
{
	char *p;

	if (need <= *cap)
		return WSHARD_OK;
	p = realloc(*buf, need);
	if (!p)
		return wshard_error_set(err, WSHARD_ENOMEM,
					"out of memory (a buffer of %zu bytes)", need);
	*buf = p;
	*cap = need;
	return WSHARD_OK;
}

/* Indexes every COPY piece by its source tensor. */
static enum wshard_err index_refs(struct stream *s, struct wshard_error *err)
{
	const struct wshard_plan *plan = s->plan;
	size_t nsrc = plan->cat->ntensors, total = 0, i, k;
	size_t *fill;
	int r;

	s->first = calloc(nsrc + 1, sizeof(size_t));
	s->count = calloc(nsrc + 1, sizeof(size_t));
	fill = calloc(nsrc + 1, sizeof(size_t));
	if (!s->first || !s->count || !fill) {
		free(fill);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	for (r = 0; r < plan->tp; r++)
		for (i = 0; i < plan->ranks[r].ntensors; i++)
			for (k = 0; k < plan->ranks[r].tensors[i].npieces; k++) {
				const struct wshard_piece *p = &plan->ranks[r].tensors[i].pieces[k];

				if (p->kind == WSHARD_PIECE_COPY) {
					s->count[p->src]++;
					total++;
				}
			}
	for (i = 1; i < nsrc; i++)
		s->first[i] = s->first[i - 1] + s->count[i - 1];
	s->refs = calloc(total + 1, sizeof(*s->refs));
	if (!s->refs) {
		free(fill);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	for (r = 0; r < plan->tp; r++)
		for (i = 0; i < plan->ranks[r].ntensors; i++)
			for (k = 0; k < plan->ranks[r].tensors[i].npieces; k++) {
				const struct wshard_piece *p = &plan->ranks[r].tensors[i].pieces[k];
				struct ref *ref;

				if (p->kind != WSHARD_PIECE_COPY)
					continue;
				ref = &s->refs[s->first[p->src] + fill[p->src]++];
				ref->rank = r;
				ref->tensor = (uint32_t)i;
				ref->piece = (uint32_t)k;
			}
	free(fill);
	return WSHARD_OK;
}

static int cmp_file_order(const void *a, const void *b, void *ctx)
{
	const struct wshard_catalog *cat = ctx;
	const struct wshard_src_tensor *x = &cat->tensors[*(const uint32_t *)a];
	const struct wshard_src_tensor *y = &cat->tensors[*(const uint32_t *)b];

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->offset < y->offset ? -1 : (x->offset > y->offset);
}

static void report(struct stream *s, size_t len)
{
	uint64_t all = __atomic_add_fetch(s->put_total, len, __ATOMIC_RELAXED);

	s->stats.bytes_put += len;
	if (s->progress)	/* set on one thread only */
		s->progress(s->progress_ctx, "writing", all, s->total);
}

/*
 * Hands rows [x, y) of piece ref to the sink; rows start at src (stride
 * apart).  Rows that are not contiguous (a column piece) or change dtype
 * are gathered into the stage and put about STAGE_BYTES at a time, so
 * the stage is still in the cache when the sink writes and checks it.
 */
void stream_put_rows(struct stream *s, const struct ref *ref, uint64_t x,
		     uint64_t y, const char *src, uint64_t stride)
{
	const struct wshard_piece *p = ref_piece(s, ref);
	uint64_t off = p->dst + (x - p->row0) * p->out_ncols;
	size_t len = (size_t)((y - x) * p->out_ncols);
	bool convert = p->out_ncols != p->ncols || p->from != p->to || p->tr_rows;
	uint64_t g, i, r;

	if (s->local.code || len == 0)
		return;
	if (stride == p->ncols && !convert) {
		if (!s->sink->put(s->sink->ctx, s->slot, ref->rank, ref->tensor, off, src,
				  len, &s->local))
			report(s, len);
		return;
	}
	g = WSHARD_MAX(STAGE_BYTES / p->out_ncols, 1);
	g = WSHARD_MIN(g, y - x);
	if (stream_grow(&s->stage, &s->stage_cap, (size_t)(g * p->out_ncols), &s->local))
		return;
	for (r = x; r < y && !s->local.code; r += g) {
		uint64_t n = WSHARD_MIN(g, y - r);

		for (i = 0; i < n; i++) {
			const char *row = src + (r - x + i) * stride;

			if (p->tr_rows)
				stream_transpose_row(p, row, s->stage + i * p->out_ncols);
			else if (convert)
				wshard_convert_floats(p->from, p->to, row,
						      s->stage + i * p->out_ncols,
						      p->ncols / (wshard_dtype_bits(p->from) / 8));
			else
				memcpy(s->stage + i * p->ncols, row, p->ncols);
		}
		if (s->sink->put(s->sink->ctx, s->slot, ref->rank, ref->tensor,
				 off + (r - x) * p->out_ncols, s->stage,
				 (size_t)(n * p->out_ncols), &s->local))
			return;
		report(s, (size_t)(n * p->out_ncols));
	}
}

void stream_put_tile(struct stream *s, const struct ref *ref, uint64_t r, uint64_t j0,
		     uint64_t m, const char *src)
{
	const struct wshard_piece *p = ref_piece(s, ref);
	/* an output row: one element of each sub-row, converted */
	uint64_t orow = p->out_ncols / (p->tr_width / p->tr_es);
	uint64_t off = p->dst + (r - p->row0) * p->out_ncols + j0 * orow;
	/* the stage: half the budget at most, the read tile holds the rest */
	uint64_t stage = WSHARD_MIN((uint64_t)STAGE_BYTES, s->budget / 2);
	uint64_t g = WSHARD_MIN(WSHARD_MAX(stage / orow, 1), m), j, n;
	struct wshard_piece sub = *p;

	if (s->local.code ||
	    stream_grow(&s->stage, &s->stage_cap, (size_t)(g * orow), &s->local))
		return;
	/* the tile seen as a piece whose sub-rows are m elements long */
	sub.tr_stride = m * p->tr_es;
	for (j = 0; j < m && !s->local.code; j += g) {
		n = WSHARD_MIN(g, m - j);
		sub.tr_width = n * p->tr_es;
		stream_transpose_row(&sub, src + j * p->tr_es, s->stage);
		if (s->sink->put(s->sink->ctx, s->slot, ref->rank, ref->tensor, off + j * orow,
				 s->stage, (size_t)(n * orow), &s->local))
			return;
		report(s, (size_t)(n * orow));
	}
}

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
	for (r = 0; r < plan->tp; r++)
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

/* Steps of source tensor src in windows of w rows: the most any process needs. */
static uint64_t steps_of(const struct stream *s, uint32_t src, uint64_t w)
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

/* Streams one source tensor through all its steps. */
enum wshard_err stream_tensor(struct stream *s, uint32_t src,
				     struct wshard_error *err)
{
	uint64_t w, steps, k;
	enum wshard_err rc;

	if (!streamed(s, src))
		return WSHARD_OK;
	if (s->nprocs == 1 && stream_tiled(s, src)) {
		/* errors go to s->local, as stream_put_rows's do */
		for (k = 0; k < s->count[src] && !s->local.code; k++)
			stream_put_tiled(s, &s->refs[s->first[src] + k]);
		return WSHARD_OK;
	}
	w = stream_window_rows(s, src);
	steps = steps_of(s, src, w);
	for (k = 0; k < steps; k++) {
		rc = stream_step(s, &src, 1, w, k, err);
		if (rc)
			return rc;
	}
	return WSHARD_OK;
}

/*
 * Source tensors taken together in one step, from order[0..n): a run of
 * tensors that each fit in one window, of at most GROUP_BYTES in all
 * (the exchange buffers hold at most that each) and GROUP_MAX tensors.
 * The same on every process: it depends on the plan alone.
 */
#define GROUP_MAX 4096

static size_t group_of(const struct stream *s, const uint32_t *order, size_t n)
{
	uint64_t bytes = 0, limit = s->budget / 4;
	size_t g;

	for (g = 0; g < n && g < GROUP_MAX; g++) {
		const struct wshard_src_tensor *t = &s->plan->cat->tensors[order[g]];

		if (!exchanged(s, order[g]))
			continue;	/* nothing to send: joins any group */
		if (steps_of(s, order[g], stream_window_rows(s, order[g])) > 1 ||
		    bytes + t->nbytes > limit)
			break;
		bytes += t->nbytes;
	}
	return g;
}

/* Zero padding and constants: no source bytes behind them. */
static enum wshard_err put_generated(struct stream *s)
{
	static const char zeros[1 << 16];
	const struct wshard_plan *plan = s->plan;
	size_t i, k;
	int r;

	for (r = s->proc; r < plan->tp; r += s->nprocs) {
		for (i = 0; i < plan->ranks[r].ntensors; i++) {
			const struct wshard_out_tensor *t = &plan->ranks[r].tensors[i];

			for (k = 0; k < t->npieces && !s->local.code; k++) {
				const struct wshard_piece *p = &t->pieces[k];
				uint64_t done = 0;

				while (p->kind == WSHARD_PIECE_ZERO && done < p->len &&
				       !s->local.code) {
					size_t len = (size_t)WSHARD_MIN(p->len - done, sizeof(zeros));

					if (!s->sink->put(s->sink->ctx, s->slot, r, i, p->dst + done, zeros,
							  len, &s->local))
						report(s, len);
					done += len;
				}
				if (p->kind == WSHARD_PIECE_CONST &&
				    !s->sink->put(s->sink->ctx, s->slot, r, i, p->dst,
						  p->value, p->value_len, &s->local))
					report(s, p->value_len);
			}
		}
	}
	return WSHARD_OK;
}

/*
 * A source file that changed size while we read it (a download still in
 * progress, a concurrent rewrite) may have handed us bytes of two
 * versions: refuse the result.
 */
static void check_sizes(struct stream *s)
{
	const struct wshard_catalog *cat = s->plan->cat;
	struct stat sb;
	size_t i;

	for (i = 0; i < cat->nfiles && !s->local.code; i++) {
		const struct wshard_st *st = cat->files[i].st;

		if (st->fd < 0 || cat->archive)
			continue;	/* archive members: their sizes were checked by the scan */
		if (fstat(st->fd, &sb) < 0)
			wshard_error_set(&s->local, WSHARD_EIO, "cannot stat '%s': %s", st->path,
					 strerror(errno));
		else if (st->base == 0 && (uint64_t)sb.st_size != st->size)
			wshard_error_set(&s->local, WSHARD_EIO,
					 "'%s' changed size during the run (%llu bytes, was %llu)",
					 st->path, (unsigned long long)sb.st_size,
					 (unsigned long long)st->size);
	}
}

void stream_release(struct stream *s)
{
	stream_unmap_window(s);
	free(s->ra);
	free(s->window);
	free(s->stage);
	free(s->held);
	free(s->sendbuf);
	free(s->recvbuf);
	free(s->sendcounts);
	free(s->recvcounts);
	free(s->senddispl);
}

/*
 * Set-up of a stream: the bytes this process puts, every COPY piece
 * indexed by its source tensor, which tensors their owners read (MPI),
 * the exchange's counts and *out_order, the source tensors in file order.
 */
static enum wshard_err stream_setup(struct stream *s, uint32_t **out_order,
				    struct wshard_error *err)
{
	const struct wshard_plan *plan = s->plan;
	size_t nsrc = plan->cat->ntensors, i;
	uint32_t *order;
	int r;

	*out_order = NULL;
	for (r = s->proc; r < plan->tp; r += s->nprocs)
		s->total += plan->ranks[r].bytes;
	if (index_refs(s, err))
		return err->code;
	if (s->nprocs > 1 && s->seekable) {
		s->own = calloc(nsrc + 1, sizeof(bool));
		if (!s->own)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		for (i = 0; i < nsrc; i++)
			s->own[i] = stream_own_pieces(s, (uint32_t)i);
	}
	*out_order = order = calloc(nsrc + 1, sizeof(*order));
	s->sendcounts = calloc((size_t)s->nprocs, sizeof(uint64_t));
	s->recvcounts = calloc((size_t)s->nprocs, sizeof(uint64_t));
	s->senddispl = calloc((size_t)s->nprocs, sizeof(uint64_t));
	if (!order || !s->sendcounts || !s->recvcounts || !s->senddispl)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < nsrc; i++)
		order[i] = (uint32_t)i;
	wshard_sort_r(order, nsrc, sizeof(*order), cmp_file_order, (void *)plan->cat);
	return WSHARD_OK;
}

/*
 * A failure anywhere stops everyone at the same tensor, checked every
 * AGREE_BYTES of source (counted in *since): each agreement is a
 * barrier, and with more processes than cores one per tensor costs more
 * than the work between them.  A process that failed keeps taking part in
 * the exchanges until then, sending what it has.  g tensors of order were
 * just streamed.  Returns WSHARD_OK or the shared error.
 */
static enum wshard_err agree_now_and_then(struct stream *s, const uint32_t *order,
					  size_t g, uint64_t *since,
					  struct wshard_error *err)
{
	struct wshard_error e;
	bool any = false;
	size_t j;

	for (j = 0; j < g; j++) {
		*since += s->plan->cat->tensors[order[j]].nbytes;
		any = any || s->count[order[j]];
	}
	if (!wshard_comm_is_mpi(s->comm) || !any || *since < AGREE_BYTES)
		return WSHARD_OK;
	*since = 0;
	e = s->local;
	if (wshard_comm_agree(s->comm, &e))
		return wshard_error_set(err, e.code, "%s", e.msg);
	return WSHARD_OK;
}

/*
 * The loop of a one-thread stream: several small tensors in one exchange
 * (with any that each process reads its own pieces of), or one tensor in
 * steps.  Returns WSHARD_OK or an error every process shares.
 */
static enum wshard_err stream_loop(struct stream *s, const uint32_t *order, size_t nsrc,
				   struct wshard_error *err)
{
	uint64_t since = 0;
	size_t i, g;
	enum wshard_err rc;

	for (i = 0; i < nsrc; i += g) {
		g = s->nprocs > 1 ? group_of(s, order + i, nsrc - i) : 0;
		if (g)
			rc = stream_step(s, order + i, g, 0, 0, err);
		else
			rc = stream_tensor(s, order[i], err);
		if (rc)
			return rc;
		g = g ? g : 1;
		rc = agree_now_and_then(s, order + i, g, &since, err);
		if (rc)
			return rc;
	}
	return WSHARD_OK;
}

enum wshard_err stream_run(const struct wshard_plan *plan,
			   struct wshard_comm *comm,
			   const struct stream_sink *sink,
			   wshard_progress_fn progress, void *progress_ctx,
			   struct stream_stats *out_stats,
			   struct wshard_error *err)
{
	uint64_t put_total = 0;
	struct stream s = {
		.plan = plan,
		.comm = comm,
		.sink = sink,
		.proc = wshard_comm_rank(comm),
		.nprocs = wshard_comm_size(comm),
		.seekable = wshard_catalog_seekable(plan->cat),
		.pagesz = (uint64_t)sysconf(_SC_PAGESIZE),
		.put_total = &put_total,
		.ra_end = UINT64_MAX,
		.budget = plan->opt.max_memory,
		.progress = progress,
		.progress_ctx = progress_ctx,
	};
	uint32_t *order = NULL;
	size_t nsrc = plan->cat->ntensors;
	enum wshard_err rc;

	memset(out_stats, 0, sizeof(*out_stats));
	rc = stream_check_budget(plan, err);
	if (!rc)
		rc = stream_setup(&s, &order, err);
	if (rc)
		goto out;
	/* zero padding and constants first: a sink may wait for whole tensors */
	put_generated(&s);
	if (stream_use_threads(&s))
		rc = stream_threads(&s, order, nsrc, err);
	else
		rc = stream_loop(&s, order, nsrc, err);
	if (rc)
		goto out;
	check_sizes(&s);
	rc = wshard_comm_agree(comm, &s.local);
	if (rc)
		rc = wshard_error_set(err, rc, "%s", s.local.msg);
out:
	*out_stats = s.stats;
	free(order);
	free(s.own);
	free(s.refs);
	free(s.first);
	free(s.count);
	stream_release(&s);
	return rc;
}

