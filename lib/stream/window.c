/*
 * window.c - reading the source for the stream: windows of rows of a
 * source tensor, mapped when they are large enough and the source is
 * seekable, read otherwise; and, under MPI, the pieces that a process
 * reads itself instead of receiving them.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wshard.h"
#include "base/util.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "base/hooks.h"
#include "stream_impl.h"

/* Windows smaller than this are read, not mapped. */
#define MAP_MIN (256u << 10)

/*
 * Source windows of a seekable source are mapped, not copied: the pages
 * are the page cache's own, and a write from them is the only copy.  The
 * file's size is checked first, since touching a mapping past the end of
 * a file that shrank would kill the process (SIGBUS).  MAP_POPULATE maps
 * every page of the window at once (the window is within the memory
 * budget): the copies that follow then take no page faults, which cost
 * a good share of a convert's CPU time from a warm page cache.
 */
static int map_window(struct stream *s, const struct wshard_st *st, uint64_t off,
		      size_t len)
{
	struct stat sb;
	uint64_t skew = off % s->pagesz;

	if (fstat(st->fd, &sb) < 0 || (uint64_t)sb.st_size < off + len)
		return -1;		/* the read path reports it */
	s->map = mmap(NULL, len + skew, PROT_READ, MAP_SHARED | MAP_POPULATE, st->fd,
		      (off_t)(off - skew));
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return -1;
	}
	s->map_len = len + skew;
	s->map_skew = skew;
	madvise(s->map, s->map_len, MADV_SEQUENTIAL);	/* MAP_POPULATE read it in */
	return 0;
}

/* The test hook WSHARD_FAULT=read: fails this read of st, once. */
static bool read_fault(struct stream *s, const struct wshard_st *st)
{
	if (!wshard_fault_hit("read"))
		return false;
	wshard_error_set(&s->local, WSHARD_EIO, "cannot read '%s': %s (injected)", st->path,
			 "Input/output error");
	return true;
}

/*
 * Bytes read ahead at most: a run of small source tensors (an expert's
 * projections, their scales, norms) costs one read instead of one per
 * tensor.
 */
#define RA_SPAN ((size_t)1 << 20)

/*
 * len bytes at off of source file `file` from the read-ahead buffer,
 * refilled from off when they are not in it; NULL when they cannot be
 * (the caller then reads them itself, and reports any error).
 */
static const char *read_ahead(struct stream *s, uint32_t file, const struct wshard_st *st,
			      uint64_t off, size_t len)
{
	struct wshard_error e = { WSHARD_OK, "" };
	uint64_t end = WSHARD_MIN(st->base + st->size, s->ra_end);
	size_t span;

	if (s->ra_len && s->ra_file == file && off >= s->ra_off &&
	    off + len <= s->ra_off + s->ra_len)
		return s->ra + (off - s->ra_off);
	s->ra_len = 0;
	if (end <= off || end - off < len)
		return NULL;
	span = (size_t)WSHARD_MIN(end - off, (uint64_t)RA_SPAN);
	if (span < len || stream_grow(&s->ra, &s->ra_cap, span, &e) ||
	    wshard_catalog_read(s->plan->cat, file, off, s->ra, span, &e))
		return NULL;
	s->ra_file = file;
	s->ra_off = off;
	s->ra_len = span;
	return s->ra;
}

/*
 * How many source tensors from order[i] one thread takes at once: a run
 * of small tensors of one file within RA_SPAN bytes (read together by
 * read-ahead), else one.  Sets *end to where the run's bytes end.
 */
size_t stream_run_of(const struct wshard_catalog *cat, const uint32_t *order, size_t n,
		     uint64_t *end)
{
	const struct wshard_src_tensor *t0 = &cat->tensors[order[0]];
	size_t k = 1;

	*end = UINT64_MAX;
	if (t0->nbytes >= (uint64_t)RA_SPAN / 4)
		return 1;
	while (k < n) {
		const struct wshard_src_tensor *t = &cat->tensors[order[k]];

		if (t->file != t0->file || t->nbytes >= (uint64_t)RA_SPAN / 4 ||
		    t->offset + t->nbytes - t0->offset > RA_SPAN)
			break;
		k++;
	}
	*end = cat->tensors[order[k - 1]].offset + cat->tensors[order[k - 1]].nbytes;
	return k;
}

/* Reads (or maps) rows [a, b) of source tensor t into s; NULL if none. */
const char *stream_read_window(struct stream *s, const struct wshard_src_tensor *t,
			       uint64_t rb, uint64_t a, uint64_t b)
{
	const struct wshard_st *st = s->plan->cat->files[t->file].st;
	const char *win = NULL;

	stream_unmap_window(s);
	if (a < b && !s->local.code) {
		size_t len = (size_t)((b - a) * rb);

		if (read_fault(s, st)) {
			/* nothing read */
		} else if (s->seekable && len >= MAP_MIN &&
			   !map_window(s, st, t->offset + a * rb, len)) {
			win = s->map + s->map_skew;
			s->stats.bytes_read += len;
		} else if (s->seekable && len < RA_SPAN / 4 &&
			   (win = read_ahead(s, t->file, st, t->offset + a * rb, len))) {
			s->stats.bytes_read += len;
		} else if (!s->local.code &&
			   !stream_grow(&s->window, &s->window_cap, len, &s->local) &&
			   !wshard_catalog_read(s->plan->cat, t->file, t->offset + a * rb,
						s->window, len, &s->local)) {
			s->stats.bytes_read += len;
		}
	}
	if (!win && !stream_grow(&s->window, &s->window_cap, (size_t)((b - a) * rb) + 1, &s->local))
		win = s->window;	/* nothing read (an error): still take part */
	/* with no window at all (out of memory) nothing is put and the bytes
	 * sent are the send buffer's: the error is agreed after the step */
	return win;
}


/*
 * Under MPI, a source tensor whose bytes each go to exactly one output
 * piece is read by its owners, each its own pieces, with no exchange: a
 * process maps the rows of a piece of its own (the bytes between its
 * first and last column, for a piece of columns) and puts them, and the
 * bytes it counts as read are the piece's.  Moving a row-parallel
 * weight's columns between processes instead costs a copy into the send
 * buffer, MPI's copy and a meeting of all processes per window.  Tensors
 * that several ranks hold whole (norms, replicated k/v heads) are still
 * read once and sent, and so are small ones cut into columns (mapped one
 * by one they would cost more than their exchange, which they share).
 * In a run of small tensors that share an exchange, these take part
 * without sending anything.  Every process takes the same decision,
 * from the plan alone.
 */
#define OWN_MIN ((uint64_t)1 << 20)


/* Whether source tensor src is read by its owners (an MPI run, seekable). */
bool stream_own_pieces(const struct stream *s, uint32_t src)
{
	const struct wshard_src_tensor *t = &s->plan->cat->tensors[src];
	uint64_t rb, bytes = 0;
	bool whole_rows = true;
	size_t i;

	if (!streamed(s, src))
		return false;
	if (stream_tiled(s, src))
		return true;	/* each owner reads its pieces' elements alone */
	rb = t->nbytes / wshard_plan_src_rows(s->plan, src);
	for (i = 0; i < s->count[src]; i++) {
		const struct wshard_piece *p = ref_piece(s, &s->refs[s->first[src] + i]);

		bytes += p->nrows * p->ncols;
		whole_rows = whole_rows && p->ncols == rb;
	}
	return bytes == t->nbytes && (whole_rows || t->nbytes >= OWN_MIN);
}


/*
 * Rows [a, b) of piece p of source tensor t, from the piece's first
 * column: mapped, or read (whole rows of a piece of whole rows).
 */
static const char *read_own_window(struct stream *s, const struct wshard_src_tensor *t,
				   const struct wshard_piece *p, uint64_t rb,
				   uint64_t a, uint64_t b)
{
	const struct wshard_st *st = s->plan->cat->files[t->file].st;
	uint64_t off = t->offset + a * rb + p->col0;
	size_t len = (size_t)((b - a - 1) * rb + p->ncols);

	const char *win;

	stream_unmap_window(s);
	if (s->local.code || read_fault(s, st))
		return NULL;
	/*
	 * Small pieces of whole rows (an expert's share of a rank) through
	 * read-ahead when this process owns about half of what it brings in
	 * (two processes): the bytes between them are the other's, but a
	 * read of a few KiB each costs more than reading those too.  With
	 * four processes, reading four times the bytes cost as much as the
	 * reads it saved (moe100k on two cores).
	 */
	if (s->nprocs <= 2 && p->ncols == rb && len < RA_SPAN / 4 &&
	    (win = read_ahead(s, t->file, st, off, len)) != NULL) {
		s->stats.bytes_read += len;
		return win;
	}
	if ((p->ncols < rb || len >= MAP_MIN) && !map_window(s, st, off, len)) {
		s->stats.bytes_read += (b - a) * p->ncols;
		return s->map + s->map_skew;
	}
	/* a small piece of whole rows, or no mapping: read the span */
	if (stream_grow(&s->window, &s->window_cap, len, &s->local) ||
	    wshard_catalog_read(s->plan->cat, t->file, off, s->window, len, &s->local))
		return NULL;
	s->stats.bytes_read += len;
	return s->window;
}

/* Streams this process's pieces of source tensor src (see read_own). */
void stream_own(struct stream *s, uint32_t src)
{
	const struct wshard_src_tensor *t = &s->plan->cat->tensors[src];
	uint64_t rb = t->nbytes / wshard_plan_src_rows(s->plan, src);
	uint64_t w = stream_window_rows(s, src), a, b;
	const struct ref *refs = &s->refs[s->first[src]];
	bool tiled = stream_tiled(s, src);
	size_t i;

	for (i = 0; i < s->count[src] && !s->local.code; i++) {
		const struct wshard_piece *p = ref_piece(s, &refs[i]);

		if (refs[i].rank % s->nprocs != s->proc)
			continue;
		if (tiled) {
			stream_put_tiled(s, &refs[i]);
			continue;
		}
		for (a = p->row0; a < p->row0 + p->nrows && !s->local.code; a = b) {
			const char *win;

			b = WSHARD_MIN(a + w, p->row0 + p->nrows);
			win = read_own_window(s, t, p, rb, a, b);
			if (win)
				stream_put_rows(s, &refs[i], a, b, win, rb);
		}
	}
	stream_unmap_window(s);
}

/*
 * A transposed piece whose source rows (whole experts: Llama 4 Scout's
 * gate_up_proj is 160 MiB an expert) exceed the budget is read in tiles
 * of output rows.  Output row j of an expert holds element j of each of
 * its tr_rows sub-rows, so output rows [j0, j0 + m) are one contiguous
 * range of the output and need of each sub-row its elements [j0, j0 + m)
 * alone: tr_rows reads, tr_stride apart in the file (one read when the
 * tile spans whole sub-rows, which then touch).  Read, not mapped: a
 * mapping touched a few bytes a page would fault whole pages (and their
 * neighbours) into the resident set.  A tile is as wide as half the
 * budget allows, since every sub-row costs a system call a tile.  Each
 * source byte of the piece is read once.
 */
void stream_put_tiled(struct stream *s, const struct ref *ref)
{
	const struct wshard_piece *p = ref_piece(s, ref);
	const struct wshard_catalog *cat = s->plan->cat;
	const struct wshard_src_tensor *t = &cat->tensors[p->src];
	uint64_t rb = t->nbytes / wshard_plan_src_rows(s->plan, p->src);
	uint64_t n = p->tr_width / p->tr_es, es = p->tr_es;
	uint64_t w = WSHARD_MIN(WSHARD_MAX(s->budget / 2 / (p->tr_rows * es), 1), n);
	uint64_t r, j0, k, m, at;

	stream_unmap_window(s);
	if (s->local.code ||
	    stream_grow(&s->window, &s->window_cap, (size_t)(p->tr_rows * w * es), &s->local))
		return;
	for (r = p->row0; r < p->row0 + p->nrows && !s->local.code; r++) {
		for (j0 = 0; j0 < n && !s->local.code; j0 += w) {
			m = WSHARD_MIN(w, n - j0);
			at = t->offset + r * rb + p->col0 + j0 * es;
			if (read_fault(s, cat->files[t->file].st))
				return;
			if (m * es == p->tr_stride)	/* whole sub-rows: they touch */
				wshard_catalog_read(cat, t->file, at, s->window,
						    (size_t)(p->tr_rows * m * es), &s->local);
			else
				for (k = 0; k < p->tr_rows && !s->local.code; k++)
					wshard_catalog_read(cat, t->file, at + k * p->tr_stride,
							    s->window + k * m * es,
							    (size_t)(m * es), &s->local);
			if (s->local.code)
				return;
			s->stats.bytes_read += p->tr_rows * m * es;
			stream_put_tile(s, ref, r, j0, m, s->window);
		}
	}
}
