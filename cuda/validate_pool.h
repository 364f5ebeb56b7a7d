/*
 * validate_pool.h - the host threads of the CUDA round trip
 * (validate_pool.cu): the host's share of a chunk, staging it with its
 * checksum and comparing what came back, split over a few threads.
 * Internal to cuda/, C++ (nvcc) only.
 */
#ifndef WSHARD_VALIDATE_POOL_H
#define WSHARD_VALIDATE_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Host threads for a round trip, the caller included: memory bandwidth,
 * not cores, bounds the host's share beyond a few, and under mpirun
 * every process of a node has its own.
 */
#define MAX_PARTS 8

/* What the pool's threads do to one chunk: part p of nparts. */
typedef void (*part_fn)(void *arg, int p, int nparts);

/*
 * Threads that run one part_fn over the parts of a chunk and wait for
 * each other; part 0 runs on the caller's thread.
 */
struct pool {
	int nparts;
	int nthreads;			/* started (nparts - 1 at most) */
	pthread_t thread[MAX_PARTS];
	pthread_mutex_t lock;
	pthread_cond_t go, done;
	unsigned long gen;		/* bumped for each job */
	int pending;			/* threads still on the job */
	bool quit;
	part_fn fn;
	void *arg;
	bool ready;			/* lock and conditions initialised */
	bool started;			/* threads started (at the first large job) */
};

/*
 * Runs fn over the parts of a job of n bytes and returns when all are
 * done; returns the number of parts (1 for a small job).
 */
int pool_run(struct pool *pl, part_fn fn, void *arg, size_t n);

/*
 * Half the online CPUs, 1 to MAX_PARTS parts, their threads started by
 * the first job large enough to split (a validator that only sees small
 * ones keeps none); a thread that cannot be started leaves fewer parts,
 * which only costs speed.
 */
void pool_open(struct pool *pl);

/* Stops and joins the threads; a pool never opened is left alone. */
void pool_close(struct pool *pl);

/* Staging: copy a chunk into pinned memory, summing it on the way. */
struct stage_job {
	unsigned char *dst;
	const unsigned char *src;
	size_t n;
	uint64_t word0;			/* dst's word index in its slot */
	uint64_t sum[MAX_PARTS];
};

/* A part_fn: part p of a stage_job, its sum into sum[p]. */
void stage_part(void *arg, int p, int nparts);

/* Comparison: the first byte at which the returned copy differs. */
struct compare_job {
	const unsigned char *orig, *ret;
	size_t n;
	size_t diff[MAX_PARTS];		/* SIZE_MAX: none in that part */
};

/* A part_fn: part p of a compare_job, its first difference into diff[p]. */
void compare_part(void *arg, int p, int nparts);

#endif /* WSHARD_VALIDATE_POOL_H */
