/*
 * stream_impl.h - the stream stage's private header.  Not part of the API.
 *
 * The stage takes in a plan (with its catalog, whose source files are
 * open), the processes of the run (a wshard_comm: one, or MPI's) and a
 * sink; it gives out the bytes of every tensor of the ranks this process
 * owns, handed to the sink's put in pieces (stream.h).
 *
 * Its files, each calling only those below it:
 *   stream_run.c      stream_run: set-up, the walk in file order, the end
 *   stream_threads.c  a one-process walk on several threads
 *   exchange.c        one step (collective under MPI); a tensor in steps
 *   window.c          reading the source: windows, read-ahead, own pieces
 *   rows.c            rows per process, per step, per tile (the budget)
 *   stream.c          puts to the sink; a thread's buffers
 *   transpose.c       a transposed row
 */
#ifndef WSHARD_STREAM_IMPL_H
#define WSHARD_STREAM_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wshard.h"
#include "base/util.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "plan/plan.h"
#include "stream.h"
#include "transpose.h"

/*
 * One COPY piece of the plan, found from its source tensor.  Owned by
 * stream_run.c, which indexes them (struct stream's refs).
 */
struct ref {
	int rank;
	uint32_t tensor;
	uint32_t piece;
};

/*
 * The state of one stream thread.  Owned by stream.c, which grows its
 * buffers, empties them for a clone (a thread of stream_threads.c) and
 * releases them; stream_run.c sets up the run's and frees what it set up.
 */
struct stream {
	const struct wshard_plan *plan;
	struct wshard_comm *comm;
	const struct stream_sink *sink;
	int proc, nprocs;
	unsigned slot;			/* the sink's slot of this thread */
	bool seekable;			/* false: process 0 reads everything */
	/* refs of each source tensor, in canonical order (rank, tensor, piece) */
	struct ref *refs;
	size_t *first, *count;
	bool *own;			/* per source tensor: read_own (MPI only) */
	char *window, *stage, *sendbuf, *recvbuf;
	char *held;			/* per ref of a step: put last (busy) */
	size_t held_cap;
	/*
	 * Small windows of consecutive source tensors come from one read
	 * (window.c): the bytes [ra_off, ra_off + ra_len) of source file
	 * ra_file, read ahead up to ra_end (the end of this thread's run of
	 * tensors; UINT64_MAX: the file's end).
	 */
	char *ra;
	size_t ra_cap, ra_len;
	uint32_t ra_file;
	uint64_t ra_off, ra_end;
	char *map;			/* the mapped window, or NULL */
	size_t map_len, map_skew;
	uint64_t pagesz;
	size_t window_cap, stage_cap, send_cap, recv_cap;
	uint64_t *sendcounts, *recvcounts, *senddispl;
	struct stream_stats stats;
	uint64_t total;
	uint64_t *put_total;		/* bytes put, all threads */
	uint64_t budget;		/* this thread's share of --max-memory */
	wshard_progress_fn progress;
	void *progress_ctx;
	struct wshard_error local;	/* this process's first error */
};

static inline const struct wshard_piece *ref_piece(const struct stream *s,
						   const struct ref *r)
{
	return &s->plan->ranks[r->rank].tensors[r->tensor].pieces[r->piece];
}

/* Rows [*x, *y) of piece p within rows [a, b); false when there are none. */
static inline bool overlap(const struct wshard_piece *p, uint64_t a, uint64_t b,
			   uint64_t *x, uint64_t *y)
{
	*x = WSHARD_MAX(a, p->row0);
	*y = WSHARD_MIN(b, p->row0 + p->nrows);
	return *x < *y;
}

/* True when source tensor src has bytes to stream (a piece, rows, row bytes). */
static inline bool streamed(const struct stream *s, uint32_t src)
{
	const struct wshard_src_tensor *t = &s->plan->cat->tensors[src];
	uint64_t rows = wshard_plan_src_rows(s->plan, src);

	return s->count[src] && rows && t->nbytes / rows;
}

/* True when source tensor src is read by the owners of its pieces. */
static inline bool read_own(const struct stream *s, uint32_t src)
{
	return s->own && s->own[src];
}

/* True when source tensor src has bytes that go through the exchange. */
static inline bool exchanged(const struct stream *s, uint32_t src)
{
	return streamed(s, src) && !read_own(s, src);
}

/* Bytes of rows gathered (or converted) into the stage per put. */
#define STAGE_BYTES ((size_t)256 << 10)

/* stream.c: grows *buf to need bytes.  Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err stream_grow(char **buf, size_t *cap, size_t need,
			    struct wshard_error *err);

/* stream.c: unmaps the window mapped last, if any. */
void stream_unmap_window(struct stream *s);

/* stream.c: frees a stream's own buffers. */
void stream_release(struct stream *s);

/*
 * stream.c: makes c a stream for another thread, slot slot: s's plan and
 * sink, buffers of its own (none yet).  Returns false when out of memory
 * (c is then still for stream_release).
 */
bool stream_clone(const struct stream *s, struct stream *c, unsigned slot);

/*
 * stream.c: hands rows [x, y) of piece ref to the sink; rows start at src
 * (stride apart).  Errors go to s->local.
 */
void stream_put_rows(struct stream *s, const struct ref *ref, uint64_t x,
		     uint64_t y, const char *src, uint64_t stride);

/*
 * stream.c: puts output rows [j0, j0 + m) of source row r of
 * transposed piece ref (the elements [j0, j0 + m) of every sub-row,
 * transposed): src holds, for each of the piece's tr_rows sub-rows, those
 * m elements, back to back.  STAGE_BYTES of output a put.  Errors go to
 * s->local.
 */
void stream_put_tile(struct stream *s, const struct ref *ref, uint64_t r, uint64_t j0,
		     uint64_t m, const char *src);

/*
 * stream.c: puts the zero padding and constants of this process's ranks.
 * Errors go to s->local; returns WSHARD_OK.
 */
enum wshard_err stream_put_generated(struct stream *s);

/*
 * rows.c: the rows [*a, *b) process q reads of source tensor src at step
 * k: windows of w rows, or with w == 0 its whole block in one step.
 */
void stream_rows_of(const struct stream *s, uint32_t src, int q, uint64_t w,
		    uint64_t k, uint64_t *a, uint64_t *b);

/* rows.c: steps of source tensor src in windows of w rows: the most any
 * process needs. */
uint64_t stream_steps(const struct stream *s, uint32_t src, uint64_t w);

/* rows.c: rows per window of source tensor src: what the memory budget
 * allows (at least one). */
uint64_t stream_window_rows(const struct stream *s, uint32_t src);

/*
 * rows.c: whether source tensor src is copied in tiles (stream_put_tiled):
 * a seekable source, transposed pieces only, and one source row (a whole
 * expert) more than the budget allows.  From the plan and the budget
 * alone, so every MPI process decides the same.
 */
bool stream_tiled(const struct stream *s, uint32_t src);

/* window.c: reads (or maps) rows [a, b) of source tensor t (rb bytes a row) into s;
 * NULL if there is no buffer at all. */
const char *stream_read_window(struct stream *s, const struct wshard_src_tensor *t,
			       uint64_t rb, uint64_t a, uint64_t b);

/*
 * window.c: puts all of transposed piece ref, read by this process in
 * tiles of output rows that fit the budget, whatever the size of a
 * source row.  Errors go to s->local.
 */
void stream_put_tiled(struct stream *s, const struct ref *ref);

/*
 * window.c: how many source tensors from order[0] (of n) one thread takes
 * at once: a run of small tensors of one file read through one read-ahead
 * span, else 1; *end is where the run's bytes end (UINT64_MAX for one).
 */
size_t stream_run_of(const struct wshard_catalog *cat, const uint32_t *order, size_t n,
		     uint64_t *end);

/* window.c: whether source tensor src is read by its owners (an MPI run,
 * seekable source), decided from the plan alone. */
bool stream_own_pieces(const struct stream *s, uint32_t src);

/* window.c: streams this process's pieces of source tensor src, read by
 * itself. */
void stream_own(struct stream *s, uint32_t src);

/*
 * exchange.c: one step of the source tensors srcs[0..n): step k of
 * windows of w rows of a single tensor, or (w == 0) the whole blocks of
 * several small tensors at once.  Collective under MPI.  Returns
 * WSHARD_OK, or an error every process shares (the exchange's own, or
 * running out of memory for its buffers).
 */
enum wshard_err stream_step(struct stream *s, const uint32_t *srcs, size_t nsrc,
			    uint64_t w, uint64_t k, struct wshard_error *err);

/* exchange.c: streams every piece of source tensor src (in windows or
 * steps). */
enum wshard_err stream_tensor(struct stream *s, uint32_t src, struct wshard_error *err);

/* stream_threads.c: whether a one-process run streams on several threads
 * (a seekable source, a threadsafe sink, no fault injection), and that
 * run over order[0..n). */
bool stream_use_threads(const struct stream *s);
enum wshard_err stream_threads(struct stream *s, const uint32_t *order, size_t n,
			       struct wshard_error *err);

#endif /* WSHARD_STREAM_IMPL_H */
