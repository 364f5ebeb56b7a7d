/*
 * stream_threads.c - a one-process stream on several threads: each takes
 * the next run of source tensors (window.c's stream_run_of) and streams
 * it with buffers of its own; the plan, the sink and the reference lists
 * are shared.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "wshard.h"
#include "base/error.h"
#include "base/util.h"
#include "source/catalog.h"
#include "base/hooks.h"
#include "stream.h"
#include "stream_impl.h"

/* Source tensors handed out to the threads of a one-process run. */
struct stream_queue {
	struct stream *s;
	const uint32_t *order;
	size_t n, *next;
	pthread_mutex_t *lock;
	struct wshard_error err;
};

static void *stream_worker(void *arg)
{
	struct stream_queue *q = arg;
	size_t i, k, j;
	uint64_t end;

	for (;;) {
		pthread_mutex_lock(q->lock);
		i = *q->next < q->n && !q->s->local.code && !q->err.code ? *q->next : SIZE_MAX;
		k = i == SIZE_MAX ? 0 : stream_run_of(q->s->plan->cat, q->order + i, q->n - i, &end);
		*q->next += k;
		pthread_mutex_unlock(q->lock);
		if (i == SIZE_MAX)
			break;
		q->s->ra_end = end;
		for (j = i; j < i + k; j++)
			if (stream_tensor(q->s, q->order[j], &q->err))
				return NULL;
	}
	return NULL;
}


/* One stream thread per online CPU, from 2 (one computes while the other
 * waits for the disk) to STREAM_SLOTS; the hooks' count for tests. */
static int stream_nthreads(void)
{
	long n = wshard_hooks_get()->stream_threads;

	if (n <= 0)
		return wshard_cpu_threads(STREAM_SLOTS);
	return (int)WSHARD_MIN(n, (long)STREAM_SLOTS);
}

/*
 * One process on a seekable source: threads take runs of source tensors
 * in turn, so that some compute while others wait for the disk.  (MPI
 * runs keep one thread: their steps are collective.)
 */
bool stream_use_threads(const struct stream *s)
{
	return s->nprocs == 1 && s->seekable && s->sink->threadsafe &&
	       stream_nthreads() >= 2 && !wshard_hooks_get()->fault;
}

/* Adds a finished clone's counts and first error to s, and frees it. */
static void stream_merge(struct stream *s, struct stream *c)
{
	s->stats.bytes_read += c->stats.bytes_read;
	s->stats.bytes_put += c->stats.bytes_put;
	if (!s->local.code && c->local.code)
		s->local = c->local;
	stream_release(c);
}

enum wshard_err stream_threads(struct stream *s, const uint32_t *order,
				      size_t n, struct wshard_error *err)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int nt = stream_nthreads(), started = 1, t;
	struct stream *c = calloc((size_t)nt, sizeof(*c));
	struct stream_queue *q = calloc((size_t)nt, sizeof(*q));
	pthread_t *tid = calloc((size_t)nt, sizeof(*tid));
	size_t next = 0;

	if (!c || !q || !tid)
		nt = 1;
	s->budget = s->plan->opt.max_memory / (uint64_t)nt;
	q[0] = (struct stream_queue){ s, order, n, &next, &lock, { 0 } };
	for (t = 1; t < nt; t++, started++) {
		q[t] = (struct stream_queue){ &c[t], order, n, &next, &lock, { 0 } };
		if (!stream_clone(s, &c[t], (unsigned)t) ||
		    pthread_create(&tid[t], NULL, stream_worker, &q[t]) != 0) {
			stream_merge(s, &c[t]);
			break;
		}
	}
	stream_worker(&q[0]);
	for (t = 1; t < started; t++) {
		pthread_join(tid[t], NULL);
		stream_merge(s, &c[t]);
	}
	for (t = 0; t < started && !err->code; t++)
		if (q[t].err.code)
			wshard_error_set(err, q[t].err.code, "%s", q[t].err.msg);
	free(c);
	free(q);
	free(tid);
	return err->code;
}

