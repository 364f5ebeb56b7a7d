/*
 * stream.c - the bottom of the stream, under its two headers (stream.h,
 * stream_impl.h): every output byte a stream thread hands to the sink
 * (rows of a piece, converted or transposed through the stage; tiles of
 * a transposed piece; zero padding, constants and computed tables), the progress those
 * puts report, and the buffers a thread owns: grown on demand, emptied
 * for a clone, released.  Calls no other file of the stream but
 * transpose.c.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "wshard.h"
#include "base/error.h"
#include "base/util.h"
#include "base/dtype.h"
#include "base/fpconv.h"
#include "stream_impl.h"

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

void stream_unmap_window(struct stream *s)
{
	if (s->map)
		munmap(s->map, s->map_len);
	s->map = NULL;
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

/* A stream for another thread: the same plan and sink, its own buffers. */
bool stream_clone(const struct stream *s, struct stream *c, unsigned slot)
{
	*c = *s;
	c->window = c->stage = c->held = c->sendbuf = c->recvbuf = c->map = c->ra = NULL;
	c->window_cap = c->stage_cap = c->held_cap = c->send_cap = c->recv_cap = 0;
	c->ra_cap = c->ra_len = 0;
	c->progress = NULL;
	c->slot = slot;
	memset(&c->stats, 0, sizeof(c->stats));
	wshard_error_clear(&c->local);
	c->sendcounts = calloc(1, sizeof(uint64_t));
	c->recvcounts = calloc(1, sizeof(uint64_t));
	c->senddispl = calloc(1, sizeof(uint64_t));
	return c->sendcounts && c->recvcounts && c->senddispl;
}

static void report(struct stream *s, size_t len)
{
	uint64_t all = __atomic_add_fetch(s->put_total, len, __ATOMIC_RELAXED);

	s->stats.bytes_put += len;
	if (s->progress)	/* set on one thread only */
		s->progress(s->progress_ctx, "writing", all, s->total);
}

/* One row of piece p, its dtype converted or its values multiplied. */
static void convert_row(const struct wshard_piece *p, const char *row, char *out)
{
	size_t n = (size_t)(p->ncols / (wshard_dtype_bits(p->from) / 8));

	if (p->neg_exp)
		wshard_neg_exp_floats(p->from, row, out, n);
	else if (p->add)
		wshard_add_floats(p->from, p->to, row, out, n, p->addend,
				  p->add == WSHARD_ADD_SOURCE);
	else if (p->mul != 0)
		wshard_scale_floats(p->from, p->to, row, out, n, p->mul);
	else
		wshard_convert_floats(p->from, p->to, row, out, n);
}

/*
 * Rows [x, y) of a part of an output fused along dimension 1: each its
 * own put, out_stride bytes apart (the other parts' rows lie between).
 */
static void put_strided(struct stream *s, const struct ref *ref, const struct wshard_piece *p,
			uint64_t x, uint64_t y, const char *src, uint64_t stride)
{
	bool convert = p->from != p->to || p->mul != 0 || p->neg_exp || p->add;
	uint64_t r;

	if (convert && stream_grow(&s->stage, &s->stage_cap, (size_t)p->out_ncols, &s->local))
		return;
	for (r = x; r < y && !s->local.code; r++) {
		const char *row = src ? src + (r - x) * stride : NULL;

		if (convert && row) {
			convert_row(p, row, s->stage);
			row = s->stage;
		}
		if (s->sink->put(s->sink->ctx, s->slot, ref->rank, ref->tensor,
				 p->dst + (r - p->row0) * p->out_stride, row,
				 (size_t)p->out_ncols, &s->local))
			return;
		report(s, (size_t)p->out_ncols);
	}
}

/*
 * Source rows [x, y) of a transposed piece whose output rows lie
 * tr_ostride apart (a rule's "interleave"; nrows 1, so x is row0): each
 * row transposed into the stage, then put an output row at a time.
 */
static void put_interleaved(struct stream *s, const struct ref *ref, const struct wshard_piece *p,
			    uint64_t x, uint64_t y, const char *src, uint64_t stride)
{
	uint64_t n = p->tr_width / p->tr_es, orow = p->out_ncols / n, r, j;

	if (stream_grow(&s->stage, &s->stage_cap, (size_t)p->out_ncols, &s->local))
		return;
	for (r = x; r < y && !s->local.code; r++) {
		stream_transpose_row(p, src + (r - x) * stride, s->stage);
		for (j = 0; j < n; j++) {
			if (s->sink->put(s->sink->ctx, s->slot, ref->rank, ref->tensor,
					 p->dst + (r - p->row0) * p->out_ncols + j * p->tr_ostride,
					 s->stage + j * orow, (size_t)orow, &s->local))
				return;
			report(s, (size_t)orow);
		}
	}
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
	/* an output row: the piece's bytes, then its padding's zeros */
	uint64_t orow = p->out_ncols + p->pad;
	uint64_t off = p->dst + (x - p->row0) * orow;
	size_t len = (size_t)((y - x) * orow);
	bool convert = p->out_ncols != p->ncols || p->from != p->to || p->tr_rows || p->mul != 0 ||
		       p->neg_exp || p->add;
	uint64_t g, i, r;

	if (s->local.code || len == 0)
		return;
	if (p->out_stride) {
		put_strided(s, ref, p, x, y, src, stride);
		return;
	}
	if (p->tr_rows && p->tr_ostride) {
		put_interleaved(s, ref, p, x, y, src, stride);
		return;
	}
	if (stride == p->ncols && !convert && !p->pad) {
		if (!s->sink->put(s->sink->ctx, s->slot, ref->rank, ref->tensor, off, src,
				  len, &s->local))
			report(s, len);
		return;
	}
	g = WSHARD_MAX(STAGE_BYTES / orow, 1);
	g = WSHARD_MIN(g, y - x);
	if (stream_grow(&s->stage, &s->stage_cap, (size_t)(g * orow), &s->local))
		return;
	for (r = x; r < y && !s->local.code; r += g) {
		uint64_t n = WSHARD_MIN(g, y - r);

		for (i = 0; i < n; i++) {
			const char *row = src + (r - x + i) * stride;
			char *out = s->stage + i * orow;

			if (p->tr_rows)
				stream_transpose_row(p, row, out);
			else if (convert)
				convert_row(p, row, out);
			else
				memcpy(out, row, p->ncols);
			memset(out + p->out_ncols, 0, p->pad);
		}
		if (s->sink->put(s->sink->ctx, s->slot, ref->rank, ref->tensor,
				 off + (r - x) * orow, s->stage, (size_t)(n * orow), &s->local))
			return;
		report(s, (size_t)(n * orow));
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
		if (p->tr_ostride) {
			/* "interleave": each output row tr_ostride apart */
			uint64_t i;

			for (i = 0; i < n && !s->local.code; i++)
				if (!s->sink->put(s->sink->ctx, s->slot, ref->rank, ref->tensor,
						  p->dst + (r - p->row0) * p->out_ncols +
						  (j0 + j + i) * p->tr_ostride,
						  s->stage + i * orow, (size_t)orow, &s->local))
					report(s, (size_t)orow);
			continue;
		}
		if (s->sink->put(s->sink->ctx, s->slot, ref->rank, ref->tensor, off + j * orow,
				 s->stage, (size_t)(n * orow), &s->local))
			return;
		report(s, (size_t)(n * orow));
	}
}

/* Up to 8 KiB of arange piece p from byte done on (a multiple of 8):
 * the bytes done. */
static uint64_t put_arange(struct stream *s, int r, size_t i, const struct wshard_piece *p,
			   uint64_t done)
{
	int64_t buf[1024];
	size_t n = (size_t)WSHARD_MIN((p->len - done) / 8, 1024), j;
	int64_t first = (int64_t)p->prov_value + (int64_t)(done / 8);

	if (!n)
		return p->len - done;
	for (j = 0; j < n; j++)
		buf[j] = first + (int64_t)j;	/* host order: little-endian, as const_piece assumes */
	if (!s->sink->put(s->sink->ctx, s->slot, r, i, p->dst + done, buf, n * 8, &s->local))
		report(s, n * 8);
	return n * 8;
}

/*
 * Element e of a sinusoid table of ch channels (an even ch >= 4): row t =
 * e / ch holds transformers' sinusoids (whisper's, which vLLM's
 * WhisperEncoder fills its position table with, in F32): for k < ch / 2,
 * sin(t * w_k), then cos(t * w_k), w_k = exp(-k * ln(10000) / (ch / 2 -
 * 1)).  Each F32 step torch takes is taken here, correctly rounded: the
 * step and its product with k, w_k, its product with t, the sine.
 * torch's own exp, sin and cos (MKL or SLEEF on a CPU, CUDA's on a GPU)
 * are within an ulp or two of these, and differ from each other so.
 */
static float sinusoid_at(uint64_t e, uint64_t ch)
{
	uint64_t t = e / ch, j = e % ch, half = ch / 2, k = j < half ? j : j - half;
	float step = (float)(log(10000.0) / (double)(half - 1));
	float w = (float)exp((double)(-step * (float)k));
	float x = (float)t * w;

	return j < half ? (float)sin((double)x) : (float)cos((double)x);
}

/* Up to 8 KiB of sinusoid piece p from byte done on (a multiple of 4):
 * the bytes done. */
static uint64_t put_sinusoid(struct stream *s, int r, size_t i,
			     const struct wshard_piece *p, uint64_t done)
{
	float buf[2048];
	size_t n = (size_t)WSHARD_MIN((p->len - done) / 4, 2048), j;
	uint64_t first = done / 4, ch = (uint64_t)p->prov_value;

	if (!n)
		return p->len - done;
	for (j = 0; j < n; j++)
		buf[j] = sinusoid_at(first + j, ch);	/* host order: little-endian */
	if (!s->sink->put(s->sink->ctx, s->slot, r, i, p->dst + done, buf, n * 4, &s->local))
		report(s, n * 4);
	return n * 4;
}

/* Zero padding and constants: no source bytes behind them. */
enum wshard_err stream_put_generated(struct stream *s)
{
	static const char zeros[1 << 16];
	const struct wshard_plan *plan = s->plan;
	size_t i, k;
	int r;

	for (r = s->proc; r < plan->nranks; r += s->nprocs) {
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
				/* a CONST piece: its element, repeated over its length */
				while (p->kind == WSHARD_PIECE_CONST && done < p->len &&
				       !s->local.code) {
					if (!s->sink->put(s->sink->ctx, s->slot, r, i, p->dst + done,
							  p->value, p->value_len, &s->local))
						report(s, p->value_len);
					done += p->value_len;
				}
				while (p->kind == WSHARD_PIECE_ARANGE && done < p->len &&
				       !s->local.code)
					done += put_arange(s, r, i, p, done);
				while (p->kind == WSHARD_PIECE_SINUSOID && done < p->len &&
				       !s->local.code)
					done += put_sinusoid(s, r, i, p, done);
			}
		}
	}
	return WSHARD_OK;
}
