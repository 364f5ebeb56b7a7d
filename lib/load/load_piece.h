/*
 * load_piece.h - what the loader's files share: the load itself (opened
 * and run by load.c) and the pieces it is read in (read by load_piece.c,
 * for host destinations by load.c's threads, for device memory by
 * load_device.c's).  Not part of the API.
 */
#ifndef WSHARD_LOAD_PIECE_H
#define WSHARD_LOAD_PIECE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "wshard.h"
#include "base/hash.h"
#include "source/safetensors.h"

/* Bytes a read: each piece is hashed right after it, while in cache. */
#define PIECE (1u << 20)
#define MAX_THREADS 16

struct piece {
	size_t tensor;
	uint64_t off, len;		/* within the tensor */
	struct wshard_hash h;		/* composable checksums only */
};

/* Pieces [first, first + n) read by one thread: one piece for host
 * memory; for device memory, those staged and copied together. */
struct job {
	size_t first, n;
	size_t bytes;			/* staged from a slot's start */
};

struct wshard_load {
	struct wshard_manifest *m;
	const struct wshard_manifest_rank *r;
	char *dir;
	void **dest;			/* one a tensor; NULL until set */
	int *device;			/* one a tensor: CUDA device, -1 host */
	bool check;			/* the checksums (want->no_checksums off) */
	struct wshard_st **st;		/* one a file of the rank */
	struct piece *pieces;
	size_t npieces;
	/* with device destinations (load_device.c) */
	struct job *jobs;
	size_t njobs;
	char (*hex)[WSHARD_DIGEST_HEX];	/* device tensors' digests, whole-
					 * tensor algorithms; else NULL */
	struct wshard_devload *dl;
	/* while running */
	atomic_size_t next;
	atomic_uint thread_ids;		/* hands each thread its index */
	atomic_bool stop;
	pthread_mutex_t lock;
	struct wshard_error first;	/* the first failure, under lock */
};

/* Where digests compose (CRC-64/NVME): each piece hashed on its own. */
static inline bool wshard_load_composable(const struct wshard_load *l)
{
	return l->m->options.checksum == WSHARD_CK_CRC64;
}

/* Records e as l's failure unless one is recorded, and stops the threads. */
void wshard_load_fail(struct wshard_load *l, const struct wshard_error *e);

/* Runs fn on nthreads threads (the caller's among them), l->next and
 * l->thread_ids from 0. */
void wshard_load_threads(struct wshard_load *l, int nthreads, void *(*fn)(void *));

/* Reads piece k into buf (its destination, or a staging buffer) and
 * hashes it where sums compose.  Returns WSHARD_OK, WSHARD_EIO or
 * WSHARD_ENOMEM. */
enum wshard_err wshard_load_read_piece(struct wshard_load *l, size_t k, void *buf,
				       struct wshard_error *err);

/*
 * Reads every piece with nthreads threads, those of host destinations as
 * load.c does and those of device destinations through the pinned
 * staging ring (base/devload.h), then waits for the copies.  Returns
 * WSHARD_OK, WSHARD_ENODEV (built without CUDA, no device), WSHARD_EUSAGE
 * (destinations on two devices), WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err wshard_load_device_run(struct wshard_load *l, int nthreads,
				       struct wshard_error *err);

#endif /* WSHARD_LOAD_PIECE_H */
