/*
 * gather.c - an output tensor made of many small pieces (the stacked
 * experts of a MoE layer: one piece per expert and projection) is
 * assembled in memory and written with one pwrite once complete.
 *
 * Written piece by piece, such a tensor costs one system call per few
 * KiB, and each write that starts or ends inside a file block makes the
 * kernel zero the rest of that block first (at 100k tensors that zeroing
 * was the largest single cost of a convert).  Pieces are checksummed
 * and validated as they come (write_put; the GPU's validator stages many
 * into one trip to the device).  Tensors are gathered while their buffers fit half of
 * --max-memory; the others are written as before.  Written tensors'
 * buffers are kept for the next tensors of the same size (one MoE
 * layer's are the next one's): fresh ones would cost a page fault per
 * page, and freed ones would scatter over the allocator's arenas.
 */
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/util.h"
#include "convert.h"

/* Pieces at most this large on average make a tensor worth gathering. */
#define GATHER_PIECE_MAX ((uint64_t)64 << 10)

/* Written tensors' buffers kept for reuse, at most. */
#define KEEP_MAX 32

enum gather_state {
	GATHER_UNDECIDED = 0,
	GATHER_YES,
	GATHER_NO,
};

enum wshard_err gather_open(struct convert *cv, int rank, struct wshard_error *err)
{
	struct rank_out *ro = &cv->ranks[rank];
	size_t n = cv->plan->ranks[rank].ntensors + 1;

	cv->gather_max = cv->plan->opt.max_memory / 2;
	if (!cv->kept)
		cv->kept = calloc(KEEP_MAX, sizeof(*cv->kept));
	ro->gbuf = calloc(n, sizeof(*ro->gbuf));
	ro->gleft = calloc(n, sizeof(*ro->gleft));
	ro->gstate = calloc(n, sizeof(*ro->gstate));
	if (!cv->kept || !ro->gbuf || !ro->gleft || !ro->gstate)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

void gather_close(struct convert *cv, int rank)
{
	struct rank_out *ro = &cv->ranks[rank];
	size_t i;

	for (i = 0; ro->gbuf && i < cv->plan->ranks[rank].ntensors; i++)
		free(ro->gbuf[i]);
	free(ro->gbuf);
	free(ro->gleft);
	free(ro->gstate);
	ro->gbuf = NULL;
	ro->gleft = NULL;
	ro->gstate = NULL;
}

void gather_free(struct convert *cv)
{
	size_t i;

	for (i = 0; i < cv->nkept; i++)
		free(cv->kept[i].buf);
	free(cv->kept);
	cv->kept = NULL;
	cv->nkept = 0;
}

/*
 * A buffer of n bytes within the budget: a kept one of that size, else a
 * new one, once kept ones have been freed to make room.  Under
 * gather_lock; NULL when n does not fit.
 */
static char *take(struct convert *cv, uint64_t n)
{
	size_t i;
	char *buf;

	for (i = 0; i < cv->nkept; i++)
		if (cv->kept[i].size == n) {
			buf = cv->kept[i].buf;
			cv->kept[i] = cv->kept[--cv->nkept];
			cv->kept_bytes -= n;
			cv->gather_bytes += n;
			return buf;
		}
	while (cv->nkept && cv->gather_bytes + cv->kept_bytes + n > cv->gather_max) {
		cv->nkept--;
		cv->kept_bytes -= cv->kept[cv->nkept].size;
		free(cv->kept[cv->nkept].buf);
	}
	if (cv->gather_bytes + n > cv->gather_max || !(buf = malloc(n)))
		return NULL;
	cv->gather_bytes += n;
	return buf;
}

/* Gives back a written tensor's buffer of n bytes.  Under gather_lock. */
static void give(struct convert *cv, char *buf, uint64_t n)
{
	cv->gather_bytes -= n;
	if (cv->nkept < KEEP_MAX && cv->gather_bytes + cv->kept_bytes + n <= cv->gather_max) {
		cv->kept[cv->nkept].buf = buf;
		cv->kept[cv->nkept].size = n;
		cv->nkept++;
		cv->kept_bytes += n;
	} else {
		free(buf);
	}
}

/* Decides, once per tensor, and takes its buffer from the budget. */
static unsigned char decide(struct convert *cv, int rank, size_t tensor)
{
	const struct wshard_out_tensor *t = &cv->plan->ranks[rank].tensors[tensor];
	struct rank_out *ro = &cv->ranks[rank];
	unsigned char st;

	pthread_mutex_lock(&cv->gather_lock);
	st = ro->gstate[tensor];
	if (st == GATHER_UNDECIDED) {
		st = GATHER_NO;
		if (t->npieces >= 2 && t->nbytes / t->npieces <= GATHER_PIECE_MAX &&
		    (ro->gbuf[tensor] = take(cv, t->nbytes)) != NULL) {
			ro->gleft[tensor] = t->nbytes;
			st = GATHER_YES;
		}
		__atomic_store_n(&ro->gstate[tensor], st, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&cv->gather_lock);
	return st;
}

bool gather_wants(struct convert *cv, int rank, size_t tensor)
{
	unsigned char st = __atomic_load_n(&cv->ranks[rank].gstate[tensor], __ATOMIC_ACQUIRE);

	if (st == GATHER_UNDECIDED)
		st = decide(cv, rank, tensor);
	return st == GATHER_YES;
}

enum wshard_err gather_put(struct convert *cv, int rank, size_t tensor, uint64_t off, const void *buf, size_t len,
			   uint64_t *out_written, struct wshard_error *err)
{
	const struct wshard_rank_plan *rp = &cv->plan->ranks[rank];
	const struct wshard_out_tensor *t = &rp->tensors[tensor];
	struct rank_out *ro = &cv->ranks[rank];
	enum wshard_err rc;
	char *data = ro->gbuf[tensor];

	*out_written = 0;
	memcpy(data + off, buf, len);
	/* the thread whose piece completes the tensor writes it */
	if (__atomic_sub_fetch(&ro->gleft[tensor], len, __ATOMIC_ACQ_REL) != 0)
		return WSHARD_OK;
	pthread_mutex_lock(&ro->write_lock);
	rc = wshard_file_pwrite(ro->files[t->part], data, t->nbytes,
				rp->files[t->part].header_len + t->begin, err);
	pthread_mutex_unlock(&ro->write_lock);
	pthread_mutex_lock(&cv->gather_lock);
	ro->gbuf[tensor] = NULL;
	give(cv, data, t->nbytes);
	pthread_mutex_unlock(&cv->gather_lock);
	if (rc == WSHARD_OK)
		*out_written = t->nbytes;
	return rc;
}
