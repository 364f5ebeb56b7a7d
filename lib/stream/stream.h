/*
 * stream.h - the engine that walks a plan source tensor by source tensor,
 * reading each needed source byte once (divided among the processes) and
 * handing every output byte range to a sink: convert's sink writes rank
 * files, verify's compares them.  Not part of the API.
 */
#ifndef WSHARD_STREAM_H
#define WSHARD_STREAM_H

#include "wshard.h"

/* Threads that may call a sink's put at once; each has its own slot. */
#define STREAM_SLOTS 8

struct stream_sink {
	/*
	 * Called with len bytes of rank's tensor (index into the rank's
	 * tensors) at byte offset off within that tensor, from the thread
	 * numbered slot (below STREAM_SLOTS; one thread per slot, so the
	 * sink may keep per-slot state without locks).  Returns WSHARD_OK
	 * or an error (which stops this process's writes; the collective
	 * steps still run so that no process hangs).
	 */
	enum wshard_err (*put)(void *ctx, unsigned slot, int rank, size_t tensor,
			       uint64_t off, const void *buf, size_t len,
			       struct wshard_error *err);
	/*
	 * Optional: true when a put to rank's tensor would now wait for
	 * another thread (its file is being written); the stream then puts
	 * the other pieces of the step first.  A hint: the answer may be
	 * stale by the time of the put.
	 */
	bool (*busy)(void *ctx, int rank, size_t tensor);
	void *ctx;
	bool threadsafe;	/* put may run on two threads at once */
};

struct stream_stats {
	uint64_t bytes_read;		/* tensor data read by this process */
	uint64_t bytes_put;		/* bytes handed to the sink */
};

/* True when process proc of nprocs produces TP rank rank. */
static inline bool stream_owns(int nprocs, int proc, int rank)
{
	return rank % nprocs == proc;
}

/*
 * Whether plan's transposed source tensors can be streamed within
 * plan->opt.max_memory.  A seekable source can: its whole experts are
 * read in tiles.  A compressed archive, read front to back, needs one
 * whole expert in memory.  Returns WSHARD_OK, WSHARD_EINVAL naming the
 * first tensor whose expert does not fit, or WSHARD_ENOMEM.
 */
enum wshard_err stream_check_budget(const struct wshard_plan *plan,
				    struct wshard_error *err);

/*
 * Produces every byte of every tensor of the ranks this process owns:
 * copies from the source (exchanged over MPI where another process read
 * them), zero padding and constants.  Memory stays near plan->opt.max_memory.
 * progress (may be NULL) is called with bytes put so far of total.  All
 * processes return the same result.  Returns WSHARD_OK, WSHARD_EIO,
 * WSHARD_ENOMEM or the sink's error.
 */
enum wshard_err stream_run(const struct wshard_plan *plan,
			   struct wshard_comm *comm,
			   const struct stream_sink *sink,
			   wshard_progress_fn progress, void *progress_ctx,
			   struct stream_stats *out_stats,
			   struct wshard_error *err);

#endif /* WSHARD_STREAM_H */
