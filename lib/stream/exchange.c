/*
 * exchange.c - one step of the stream under MPI: every process reads its
 * rows of the step's source tensors, puts its own pieces and packs the
 * others', one MPI_Alltoallv moves them, and each process unpacks in the
 * order the senders packed (sender, tensor, piece, row).  Who sends what
 * to whom comes from the plan alone, so the step needs no metadata.
 * Several small tensors share one step: the tensors of an MoE layer are
 * small and many, and one exchange each would make the processes meet
 * far more often than the bytes they move are worth.  A larger tensor
 * goes through steps of its own, one window each, or on one process in
 * tiles when a row does not fit the budget (stream_tensor).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "base/comm.h"
#include "stream_impl.h"

/*
 * Puts this process's own pieces of one source tensor's window, and packs
 * those of other processes at s->senddispl.  With two threads on one
 * process, pieces whose rank file the other thread is writing are put
 * after the rest, rather than waited for.
 */
static void put_and_pack(struct stream *s, uint32_t src, uint64_t a, uint64_t b,
			 const char *win)
{
	const struct wshard_src_tensor *t = &s->plan->cat->tensors[src];
	uint64_t rb = t->nbytes / wshard_plan_src_rows(s->plan, src), x, y, r;
	const struct ref *refs = &s->refs[s->first[src]];
	size_t n = s->count[src], i, nheld = 0;
	struct wshard_error unused = { 0 };
	bool defer;

	/* (without memory for the flags, every piece is put in turn) */
	defer = s->sink->busy && s->nprocs == 1 &&
		!stream_grow(&s->held, &s->held_cap, n, &unused);
	for (i = 0; i < n; i++) {
		const struct wshard_piece *p = ref_piece(s, &refs[i]);
		int owner = refs[i].rank % s->nprocs;

		if (defer)
			s->held[i] = 0;
		if (!overlap(p, a, b, &x, &y))
			continue;
		if (owner != s->proc) {
			for (r = x; r < y; r++) {
				if (win)
					memcpy(s->sendbuf + s->senddispl[owner],
					       win + (r - a) * rb + p->col0, p->ncols);
				s->senddispl[owner] += p->ncols;
			}
		} else if (defer && s->sink->busy(s->sink->ctx, refs[i].rank, refs[i].tensor)) {
			s->held[i] = 1;
			nheld++;
		} else {
			stream_put_rows(s, &refs[i], x, y, win ? win + (x - a) * rb + p->col0 : NULL, rb);
		}
	}
	for (i = 0; nheld && i < n; i++) {
		const struct wshard_piece *p = ref_piece(s, &refs[i]);

		if (s->held[i] && overlap(p, a, b, &x, &y))
			stream_put_rows(s, &refs[i], x, y, win ? win + (x - a) * rb + p->col0 : NULL, rb);
	}
}

/*
 * Who sends what to whom at step k, from the plan alone (every process
 * knows every process's windows): fills s->sendcounts, s->recvcounts and
 * s->senddispl.  Returns the number of pieces that travel.
 */
static uint64_t count_exchange(struct stream *s, const uint32_t *srcs, size_t nsrc,
			       uint64_t w, uint64_t k, uint64_t *out_send,
			       uint64_t *out_recv)
{
	uint64_t pieces = 0, a, b, x, y;
	size_t j, i;
	int q;

	*out_send = *out_recv = 0;
	for (q = 0; q < s->nprocs; q++)
		s->sendcounts[q] = s->recvcounts[q] = 0;
	for (j = 0; j < nsrc && s->nprocs > 1; j++) {
		const struct ref *refs = &s->refs[s->first[srcs[j]]];

		if (!exchanged(s, srcs[j]))
			continue;
		for (q = 0; q < s->nprocs; q++) {
			stream_rows_of(s, srcs[j], q, w, k, &a, &b);
			for (i = 0; i < s->count[srcs[j]]; i++) {
				const struct wshard_piece *p = ref_piece(s, &refs[i]);
				int owner = refs[i].rank % s->nprocs;

				if (owner == q || !overlap(p, a, b, &x, &y))
					continue;
				pieces++;
				if (q == s->proc)
					s->sendcounts[owner] += (y - x) * p->ncols;
				if (owner == s->proc)
					s->recvcounts[q] += (y - x) * p->ncols;
			}
		}
	}
	for (q = 0; q < s->nprocs; q++) {
		s->senddispl[q] = *out_send;
		*out_send += s->sendcounts[q];
		*out_recv += s->recvcounts[q];
	}
	return pieces;
}

/*
 * The send and receive buffers of a step, on every process or on none: a
 * process without its buffers must not leave the others waiting in the
 * exchange.  Returns WSHARD_OK or the error every process shares.
 */
static enum wshard_err reserve_buffers(struct stream *s, uint64_t send_bytes,
				       uint64_t recv_bytes, struct wshard_error *err)
{
	struct wshard_error mem = { 0 };

	if (!stream_grow(&s->sendbuf, &s->send_cap, (size_t)send_bytes + 1, &mem))
		stream_grow(&s->recvbuf, &s->recv_cap, (size_t)recv_bytes + 1, &mem);
	if (wshard_comm_agree(s->comm, &mem))
		return wshard_error_set(err, mem.code, "%s", mem.msg);
	return WSHARD_OK;
}

/* Reads this process's rows of the step: puts its own pieces, packs the rest. */
static void read_step(struct stream *s, const uint32_t *srcs, size_t nsrc, uint64_t w,
		      uint64_t k)
{
	uint64_t a, b;
	size_t j;

	for (j = 0; j < nsrc; j++) {
		const struct wshard_src_tensor *t = &s->plan->cat->tensors[srcs[j]];
		uint64_t rb;

		if (read_own(s, srcs[j]))
			stream_own(s, srcs[j]);
		if (!exchanged(s, srcs[j]))
			continue;
		rb = t->nbytes / wshard_plan_src_rows(s->plan, srcs[j]);
		stream_rows_of(s, srcs[j], s->proc, w, k, &a, &b);
		put_and_pack(s, srcs[j], a, b, stream_read_window(s, t, rb, a, b));
	}
}

/* Puts the pieces received, in the order their senders packed them. */
static void put_received(struct stream *s, const uint32_t *srcs, size_t nsrc,
			 uint64_t w, uint64_t k)
{
	const char *at = s->recvbuf;
	uint64_t a, b, x, y;
	size_t j, i;
	int q;

	for (q = 0; q < s->nprocs; q++) {
		if (q == s->proc)
			continue;
		for (j = 0; j < nsrc; j++) {
			const struct ref *refs = &s->refs[s->first[srcs[j]]];

			if (!exchanged(s, srcs[j]))
				continue;
			stream_rows_of(s, srcs[j], q, w, k, &a, &b);
			for (i = 0; i < s->count[srcs[j]]; i++) {
				const struct wshard_piece *p = ref_piece(s, &refs[i]);

				if (refs[i].rank % s->nprocs != s->proc ||
				    !overlap(p, a, b, &x, &y))
					continue;
				stream_put_rows(s, &refs[i], x, y, at, p->ncols);
				at += (y - x) * p->ncols;
			}
		}
	}
}

enum wshard_err stream_step(struct stream *s, const uint32_t *srcs, size_t nsrc,
			    uint64_t w, uint64_t k, struct wshard_error *err)
{
	uint64_t send_bytes, recv_bytes;
	uint64_t pieces = count_exchange(s, srcs, nsrc, w, k, &send_bytes, &recv_bytes);

	if (pieces && reserve_buffers(s, send_bytes, recv_bytes, err))
		return err->code;
	read_step(s, srcs, nsrc, w, k);
	if (!pieces)
		return WSHARD_OK;
	if (wshard_comm_alltoallv(s->comm, s->sendbuf, s->sendcounts, s->recvbuf,
				  s->recvcounts, err))
		return err->code;
	put_received(s, srcs, nsrc, w, k);
	return WSHARD_OK;
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
	steps = stream_steps(s, src, w);
	for (k = 0; k < steps; k++) {
		rc = stream_step(s, &src, 1, w, k, err);
		if (rc)
			return rc;
	}
	return WSHARD_OK;
}
