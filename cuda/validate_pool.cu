/*
 * validate_pool.cu - the host threads of the CUDA round trip.  The host's
 * share (staging with its checksum, and the comparison) is the round
 * trip's bottleneck: one core moves a few GB/s where the copy engines
 * move tens, so validate_cuda.cu splits it over these threads.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern "C" {
#include "validate_sum_host.h"
}
#include "validate_pool.h"

struct pool_start {
	struct pool *pool;
	int part;
};

static void *pool_thread(void *arg)
{
	struct pool *pl = ((struct pool_start *)arg)->pool;
	int part = ((struct pool_start *)arg)->part;
	unsigned long seen = 0;

	free(arg);
	pthread_mutex_lock(&pl->lock);
	for (;;) {
		while (!pl->quit && pl->gen == seen)
			pthread_cond_wait(&pl->go, &pl->lock);
		if (pl->quit)
			break;
		seen = pl->gen;
		pthread_mutex_unlock(&pl->lock);
		pl->fn(pl->arg, part, pl->nparts);
		pthread_mutex_lock(&pl->lock);
		if (--pl->pending == 0)
			pthread_cond_signal(&pl->done);
	}
	pthread_mutex_unlock(&pl->lock);
	return NULL;
}

/* Below this many bytes a job is not split: waking threads costs more. */
#define POOL_MIN ((size_t)2 << 20)

/* Starts the pool's threads: half the online CPUs, MAX_PARTS at most. */
static void pool_start(struct pool *pl)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int want = cpus >= 2 * MAX_PARTS ? MAX_PARTS : cpus >= 2 ? (int)(cpus / 2) : 1;
	int i;

	pl->started = true;
	for (i = 1; i < want; i++) {
		struct pool_start *st = (struct pool_start *)malloc(sizeof(*st));

		if (!st)
			break;
		st->pool = pl;
		st->part = i;
		if (pthread_create(&pl->thread[pl->nthreads], NULL, pool_thread,
				   st) != 0) {
			free(st);
			break;
		}
		pl->nthreads++;
	}
	pl->nparts = pl->nthreads + 1;
}

int pool_run(struct pool *pl, part_fn fn, void *arg, size_t n)
{
	if (n >= POOL_MIN && !pl->started)
		pool_start(pl);
	if (pl->nthreads == 0 || n < POOL_MIN) {
		fn(arg, 0, 1);
		return 1;
	}
	pthread_mutex_lock(&pl->lock);
	pl->fn = fn;
	pl->arg = arg;
	pl->pending = pl->nthreads;
	pl->gen++;
	pthread_cond_broadcast(&pl->go);
	pthread_mutex_unlock(&pl->lock);
	fn(arg, 0, pl->nparts);
	pthread_mutex_lock(&pl->lock);
	while (pl->pending > 0)
		pthread_cond_wait(&pl->done, &pl->lock);
	pthread_mutex_unlock(&pl->lock);
	return pl->nparts;
}

void pool_open(struct pool *pl)
{
	pthread_mutex_init(&pl->lock, NULL);
	pthread_cond_init(&pl->go, NULL);
	pthread_cond_init(&pl->done, NULL);
	pl->ready = true;
	pl->nparts = 1;
}

void pool_close(struct pool *pl)
{
	int i;

	if (!pl->ready)
		return;
	pthread_mutex_lock(&pl->lock);
	pl->quit = true;
	pthread_cond_broadcast(&pl->go);
	pthread_mutex_unlock(&pl->lock);
	for (i = 0; i < pl->nthreads; i++)
		pthread_join(pl->thread[i], NULL);
	pthread_mutex_destroy(&pl->lock);
	pthread_cond_destroy(&pl->go);
	pthread_cond_destroy(&pl->done);
}

/* Part p of n bytes, in whole 64-byte lines but for the last part's tail
 * (an aligned destination stays aligned). */
static void part_range(size_t n, int p, int nparts, size_t *lo, size_t *hi)
{
	size_t words = n / 8, per = words / (size_t)nparts / 8 * 8;

	*lo = 8 * per * (size_t)p;
	*hi = p == nparts - 1 ? n : 8 * per * (size_t)(p + 1);
}

void stage_part(void *arg, int p, int nparts)
{
	struct stage_job *j = (struct stage_job *)arg;
	size_t lo, hi;

	part_range(j->n, p, nparts, &lo, &hi);
	j->sum[p] = wshard_validate_copy_sum_at(j->dst + lo, j->src + lo,
						hi - lo, j->word0 + lo / 8);
}

void compare_part(void *arg, int p, int nparts)
{
	struct compare_job *j = (struct compare_job *)arg;
	size_t lo, hi, i;

	part_range(j->n, p, nparts, &lo, &hi);
	j->diff[p] = SIZE_MAX;
	if (memcmp(j->orig + lo, j->ret + lo, hi - lo) == 0)
		return;
	for (i = lo; j->orig[i] == j->ret[i]; i++)
		;
	j->diff[p] = i;
}
