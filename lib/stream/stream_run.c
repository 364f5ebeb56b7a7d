/*
 * stream_run.c - reads the source once and feeds every output byte to a
 * sink.  The top of the stream: it calls the other files, none calls it.
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
#include "source/safetensors.h"
#include "source/catalog.h"
#include "base/comm.h"
#include "stream.h"
#include "stream_impl.h"

/* Source bytes between two checks that no MPI process has failed. */
#define AGREE_BYTES ((uint64_t)256 << 20)

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
	for (r = 0; r < plan->nranks; r++)
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
	for (r = 0; r < plan->nranks; r++)
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
		if (stream_steps(s, order[g], stream_window_rows(s, order[g])) > 1 ||
		    bytes + t->nbytes > limit)
			break;
		bytes += t->nbytes;
	}
	return g;
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
	for (r = s->proc; r < plan->nranks; r += s->nprocs)
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
	stream_put_generated(&s);
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

