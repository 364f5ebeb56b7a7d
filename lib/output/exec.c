/*
 * exec.c - wshard_convert, the driver: prepares and locks OUT (outdir.c),
 * opens the rank files under temporary names, runs the stream into them
 * beside the sealing threads (seal.c), then has the manifest gathered,
 * the non-weight files copied (extras.c), the ranks archived
 * (archive_out.c) and wshard.json written last (manifest.c).  Every
 * process agrees on the outcome before anyone leaves, and a failure
 * leaves no manifest behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wshard.h"
#include "base/util.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/comm.h"
#include "base/hooks.h"
#include "source/catalog.h"
#include "manifest.h"
#include "convert.h"
#include "base/crc64.h"
#include "outdir.h"
#include "base/validate.h"

/*
 * Gives a part its final size.  The blocks are allocated at once where
 * the file system can (fallocate), so that a part written piece by piece
 * by several threads, out of order, still lies in a few long extents: a
 * cold read of it, the engine's start, then streams as a file written
 * front to back does.  Where fallocate is not supported, the file is
 * sparse until written.
 */
static enum wshard_err size_part(struct wshard_file *f, uint64_t size,
				 struct wshard_error *err)
{
	if (size && fallocate(f->fd, 0, 0, (off_t)size) == 0)
		return WSHARD_OK;
	if (size && errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL)
		return wshard_error_set(err, WSHARD_EIO, "cannot allocate %llu bytes for '%s': %s",
					(unsigned long long)size, f->path, strerror(errno));
	if (ftruncate(f->fd, (off_t)size) < 0)
		return wshard_error_set(err, WSHARD_EIO, "cannot size '%s': %s", f->path,
					strerror(errno));
	return WSHARD_OK;
}

static enum wshard_err open_rank_files(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	int r;
	size_t f;
	enum wshard_err rc;

	for (r = cv->proc; r < plan->nranks; r += cv->nprocs) {
		const struct wshard_rank_plan *rp = &plan->ranks[r];
		struct rank_out *ro = &cv->ranks[r];

		ro->files = calloc(rp->nfiles, sizeof(*ro->files));
		ro->ck.file = calloc(rp->nfiles, sizeof(*ro->ck.file));
		ro->ck.tensor = calloc(rp->ntensors + 1, sizeof(*ro->ck.tensor));
		ro->left = calloc(rp->ntensors + 1, sizeof(*ro->left));
		ro->crc = calloc(rp->ntensors + 1, sizeof(*ro->crc));
		ro->awaited = calloc(rp->ntensors + 1, 1);
		ro->part_left = calloc(rp->nfiles + 1, sizeof(*ro->part_left));
		ro->part_awaited = calloc(rp->nfiles + 1, 1);
		pthread_mutex_init(&ro->write_lock, NULL);
		if (!ro->files || !ro->ck.file || !ro->ck.tensor || !ro->left || !ro->crc ||
		    !ro->awaited || !ro->part_left || !ro->part_awaited)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		rc = gather_open(cv, r, err);
		if (rc)
			return rc;
		for (f = 0; f < rp->ntensors; f++) {
			ro->left[f] = rp->tensors[f].nbytes;
			ro->part_left[rp->tensors[f].part] += rp->tensors[f].nbytes != 0;
		}
		for (f = 0; f < rp->nfiles; f++) {
			char *path = wshard_path_join(cv->run->out_dir, rp->files[f].name);

			if (!path)
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			rc = wshard_file_create(&ro->files[f], path, convert_file_flags(cv), err);
			free(path);
			if (rc)
				return rc;
			rc = size_part(ro->files[f], rp->files[f].size, err);
			if (rc)
				return rc;
			rc = wshard_file_pwrite(ro->files[f], rp->files[f].header,
						rp->files[f].header_len, 0, err);
			if (rc)
				return rc;
		}
	}
	return WSHARD_OK;
}

/*
 * The sink of convert: bytes of a tensor go to its place in its part.
 * A cache-sized block at a time, the bytes are written, then
 * round-tripped through the validator and checksummed (with a composable
 * checksum) from the cache the write left them in: each is read from
 * memory once.  (Writing first, the kernel's copy pays for the read; in
 * the other order the validator did, and the copy gained less than that.)
 * The GPU's validator only stages a block and returns; its trips to the
 * device go on beside the writes, and the last is waited for at sealing.
 * Both stream threads write into every rank file, one at a time.  The
 * stream puts pieces whose file is free first (write_busy), and a thread
 * that finds the file taken all the same checks the blocks it has yet
 * to write, in order, until the file is free, instead of sleeping: the
 * time it would have waited does work it has to do anyway.
 * A block that fails validation fails the run, and no file of a failed
 * run gets its final name.
 *
 * The checksum of a piece does not need the pieces before it: a CRC
 * without its pre- and post-inversion is linear, so the raw CRC of a
 * tensor is the XOR, over its pieces, of each piece's raw CRC followed
 * by as many zero bytes as the tensor has after the piece.  Pieces may
 * come in any order and from either thread.
 */
/* Adds what a piece's raw CRC contributes to its tensor's. */
static void add_crc(struct rank_out *ro, const struct wshard_out_tensor *t, size_t tensor,
		    uint64_t raw, uint64_t off, size_t len)
{
	__atomic_xor_fetch(&ro->crc[tensor], wshard_crc64_shift(raw, t->nbytes - off - len),
			   __ATOMIC_RELEASE);
}

/*
 * A piece of a gathered tensor: validated and checksummed now, copied
 * into the tensor's buffer, written with the piece that completes it
 * (gather_put), which sets *out_written.
 */
static inline enum wshard_err put_gathered(struct convert *cv, struct wshard_validator *v,
					   unsigned slot, int rank, size_t tensor,
					   uint64_t off, const char *p, size_t len,
					   uint64_t *out_written, struct wshard_error *err)
{
	const struct wshard_out_tensor *t = &cv->plan->ranks[rank].tensors[tensor];
	uint64_t raw = 0;
	size_t done, n;
	enum wshard_err rc = WSHARD_OK;

	for (done = 0; done < len && !rc; done += n) {
		n = WSHARD_MIN(len - done, cv->block);
		rc = seal_check_block(cv, v, slot, p + done, n, off + done, &raw, err);
	}
	/* the CRC first: the piece that completes the tensor may be
	 * another thread's, and sealing reads the CRC once it is */
	if (!rc && cv->hot)
		add_crc(&cv->ranks[rank], t, tensor, raw, off, len);
	if (!rc)
		rc = gather_put(cv, rank, tensor, off, p, len, out_written, err);
	return rc;
}

/*
 * A piece written block by block into its file, each block validated and
 * checksummed while another thread holds the file's write lock.
 */
static inline enum wshard_err put_direct(struct convert *cv, struct wshard_validator *v,
					 unsigned slot, int rank, size_t tensor,
					 uint64_t off, const char *p, size_t len,
					 struct wshard_error *err)
{
	const struct wshard_rank_plan *rp = &cv->plan->ranks[rank];
	const struct wshard_out_tensor *t = &rp->tensors[tensor];
	struct rank_out *ro = &cv->ranks[rank];
	struct wshard_file *f = ro->files[t->part];
	uint64_t at = rp->files[t->part].header_len + t->begin + off, raw = 0;
	size_t done, n, m, checked = 0;
	enum wshard_err rc = WSHARD_OK;

	/* checked: bytes of the piece checked so far, never fewer than written */
	for (done = 0; done < len && !rc; done += n) {
		n = WSHARD_MIN(len - done, cv->block);
		while (!rc && pthread_mutex_trylock(&ro->write_lock) != 0) {
			if (checked == len) {
				pthread_mutex_lock(&ro->write_lock);
				break;
			}
			m = WSHARD_MIN(len - checked, cv->block);
			rc = seal_check_block(cv, v, slot, p + checked, m, off + checked, &raw, err);
			checked += m;
		}
		if (rc)
			break;
		rc = wshard_file_pwrite(f, p + done, n, at + done, err);
		pthread_mutex_unlock(&ro->write_lock);
		if (!rc && checked == done) {
			rc = seal_check_block(cv, v, slot, p + done, n, off + done, &raw, err);
			checked += n;
		}
	}
	if (!rc && cv->hot && len)
		add_crc(ro, t, tensor, raw, off, len);
	return rc;
}

/*
 * written more bytes of tensor are in its file.  The last bytes of a
 * tensor: its sealing thread may go on, woken if it sleeps on the tensor
 * or on its part.  Sequentially consistent, as seal.c's mark and check:
 * one of the two sees the other's store.
 */
static inline void put_done(struct convert *cv, int rank, size_t tensor, uint64_t written)
{
	struct rank_out *ro = &cv->ranks[rank];
	size_t part = cv->plan->ranks[rank].tensors[tensor].part;

	if (__atomic_sub_fetch(&ro->left[tensor], written, __ATOMIC_SEQ_CST) == 0) {
		bool wake = __atomic_load_n(&ro->awaited[tensor], __ATOMIC_SEQ_CST);

		if (__atomic_sub_fetch(&ro->part_left[part], 1, __ATOMIC_SEQ_CST) == 0)
			wake = wake || __atomic_load_n(&ro->part_awaited[part],
						       __ATOMIC_SEQ_CST);
		if (wake)
			seal_tensor_done(cv);
	}
}

/*
 * The validator of stream thread slot, its messages naming tensor of
 * rank.  Returns WSHARD_OK or the validator's error.
 */
static enum wshard_err slot_validator(struct convert *cv, unsigned slot, int rank,
				      size_t tensor, struct wshard_validator **out_v,
				      struct wshard_error *err)
{
	const struct wshard_out_tensor *t = &cv->plan->ranks[rank].tensors[tensor];
	struct wshard_validator *v;

	if (seal_slot_validator(cv, slot, &v, err))
		return err->code;
	if (v && (cv->what[slot].rank != rank || cv->what[slot].tensor != tensor ||
		  !cv->what[slot].text[0])) {
		seal_label(cv->what[slot].text, sizeof(cv->what[slot].text), rank, t->name);
		cv->what[slot].rank = rank;
		cv->what[slot].tensor = tensor;
	}
	*out_v = v;
	return WSHARD_OK;
}

/*
 * A piece written unchecked while the validator was not ready (late.c):
 * recorded for the late checks, or, if the validator became ready
 * meanwhile, checked now from buf.
 */
static enum wshard_err put_late(struct convert *cv, unsigned slot, int rank, size_t tensor,
				uint64_t off, const char *p, size_t len, bool gathered,
				struct wshard_error *err)
{
	struct wshard_validator *v;
	bool recorded;
	size_t done, n;

	if (late_record(cv, rank, tensor, off, len, gathered, &recorded, err) || recorded)
		return err->code;
	if (late_failed(cv, err) || slot_validator(cv, slot, rank, tensor, &v, err))
		return err->code;
	for (done = 0; v && done < len; done += n) {
		n = WSHARD_MIN(len - done, cv->block);
		if (wshard_validator_check(v, p + done, n, cv->what[slot].text, off + done, err))
			return err->code;
	}
	return WSHARD_OK;
}

static enum wshard_err write_put(void *ctx, unsigned slot, int rank, size_t tensor,
				 uint64_t off, const void *buf, size_t len,
				 struct wshard_error *err)
{
	struct convert *cv = ctx;
	struct wshard_validator *v = NULL;
	uint64_t written = len;		/* bytes of the tensor now in its file */
	bool late = late_deferring(cv), gathered;
	enum wshard_err rc = WSHARD_OK;

	if (wshard_fault_hit("kill-write"))
		raise(SIGKILL);
	/* once recording stops, a validator that could not open is seen */
	if (!late && (late_failed(cv, err) || slot_validator(cv, slot, rank, tensor, &v, err)))
		return err->code;
	gathered = len && gather_wants(cv, rank, tensor);
	if (gathered)
		rc = put_gathered(cv, v, slot, rank, tensor, off, buf, len, &written, err);
	else
		rc = put_direct(cv, v, slot, rank, tensor, off, buf, len, err);
	if (!rc && late)
		rc = put_late(cv, slot, rank, tensor, off, buf, len, gathered, err);
	if (!rc && written)
		put_done(cv, rank, tensor, written);
	return rc;
}

/* The sink's busy hint: the other stream thread is writing rank's file. */
static bool write_busy(void *ctx, int rank, size_t tensor)
{
	struct convert *cv = ctx;
	pthread_mutex_t *lock = &cv->ranks[rank].write_lock;

	(void)tensor;
	if (pthread_mutex_trylock(lock) != 0)
		return true;
	pthread_mutex_unlock(lock);
	return false;
}

/*
 * On failure: temporary files go, and so do the rank files and archives
 * this run renamed.
 */
static void discard_ranks(struct convert *cv)
{
	const struct wshard_plan *plan = cv->plan;
	size_t f;
	int r;

	for (r = cv->proc; r < plan->nranks; r += cv->nprocs) {
		struct rank_out *ro = &cv->ranks[r];

		archive_discard(cv, r);
		for (f = 0; ro->files && f < plan->ranks[r].nfiles; f++) {
			if (ro->files[f]) {
				wshard_file_abort(ro->files[f]);
				ro->files[f] = NULL;
			} else if (ro->ck.file && ro->ck.file[f][0]) {
				char *path = wshard_path_join(cv->run->out_dir,
							      plan->ranks[r].files[f].name);

				if (path)
					unlink(path);
				free(path);
			}
		}
	}
}

/*
 * For tests of concurrency and of a source changing under us: with the
 * hooks' hold path, wait (up to a minute) until it no longer exists,
 * holding OUT's lock, before writing anything.
 */
static void test_hold(void)
{
	const char *hold = wshard_hooks_get()->hold;
	int i;

	for (i = 0; hold && *hold && i < 6000 && access(hold, F_OK) == 0; i++)
		usleep(10000);
}

void wshard_run_prepare(struct wshard_run *run, const struct wshard_comm *comm)
{
	wshard_validator_warm(run->validate, wshard_comm_local_rank(comm));
}

void wshard_run_release(struct wshard_run *run)
{
	wshard_validator_warm_wait();
	if (!run)
		return;
	free(run->state);
	run->state = NULL;
}

void wshard_run_timings(const struct wshard_run *run, struct wshard_timings *out_t)
{
	static const struct wshard_timings none;

	*out_t = run->state ? run->state->timings : none;
}

/* Allocates the per-rank state and opens the validator; process 0
 * prepares OUT.  Every process returns the same result. */
static enum wshard_err convert_setup(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	struct wshard_run *run = cv->run;

	pthread_mutex_init(&cv->seal_lock, NULL);
	pthread_cond_init(&cv->seal_cond, NULL);
	pthread_mutex_init(&cv->gather_lock, NULL);
	cv->block = seal_chunk(plan);
	/* the benchmark's baseline: what convert costs without checksums */
	cv->no_checksums = wshard_hooks_get()->no_checksums;
	cv->hot = wshard_checksum_composable(plan->opt.checksum) && !cv->no_checksums;
	cv->ranks = calloc((size_t)plan->nranks, sizeof(*cv->ranks));
	run->state = calloc(1, sizeof(*run->state) + (size_t)cv->nprocs * sizeof(uint64_t));
	if (!cv->ranks || !run->state)
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!err->code && late_wanted(cv))
		late_start(cv, err);
	else if (!err->code)
		seal_open_validator(cv, err);
	if (cv->proc == 0 && !err->code)
		outdir_prepare(run->out_dir, plan->cat->extra, plan->cat->nextra, run->force,
			       &cv->lock_fd, err);
	return wshard_comm_agree(cv->comm, err);
}

/*
 * Streams the plan into the rank files while the sealing threads seal
 * them, and sums what was read, written and validated over the
 * processes.  Every process returns the same result.
 */
static enum wshard_err convert_stream(struct convert *cv, struct wshard_error *err)
{
	struct wshard_run *run = cv->run;
	struct stream_sink sink = {
		.put = write_put, .busy = write_busy, .ctx = cv, .threadsafe = true,
	};
	struct seal_jobs jobs = { 0 };
	struct stream_stats stats;
	uint64_t totals[4];
	double t0, t1;
	enum wshard_err rc;

	t0 = wshard_seconds();
	rc = seal_start(cv, &jobs, err);
	if (!rc)
		rc = stream_run(cv->plan, cv->comm, &sink, run->progress, run->progress_ctx,
				&stats, err);
	t1 = wshard_seconds();
	seal_finish(cv, &jobs, rc == WSHARD_OK, err);
	/* after the sealing threads: a late check may wait for a tensor */
	late_end(cv, err->code != WSHARD_OK, err);
	/* the validator (opened late, maybe) is known now */
	for (int r = cv->proc; r < cv->plan->nranks; r += cv->nprocs)
		snprintf(cv->ranks[r].ck.backend, sizeof(cv->ranks[r].ck.backend), "%s",
			 run->validate_backend);
	run->state->timings.stream_seconds = t1 - t0;
	run->state->timings.seal_seconds = wshard_seconds() - t1;
	if (rc || wshard_comm_agree(cv->comm, err))
		return err->code;
	run->state->proc_bytes_read[cv->proc] = stats.bytes_read;
	if (wshard_comm_sum_u64(cv->comm, run->state->proc_bytes_read, (size_t)cv->nprocs, err))
		return err->code;
	totals[0] = stats.bytes_read;
	totals[1] = stats.bytes_put;
	totals[2] = run->bytes_validated;
	totals[3] = run->bytes_validated_late;
	if (wshard_comm_sum_u64(cv->comm, totals, 4, err))
		return err->code;
	run->bytes_read = totals[0];
	run->bytes_written = totals[1];
	run->bytes_validated = totals[2];
	run->bytes_validated_late = totals[3];
	return WSHARD_OK;
}

/*
 * Once every rank file is final: the rank entries gathered to process 0,
 * which copies the non-weight files and builds the manifest; the rank
 * archives; wshard.json last.  Every process returns the same result.
 */
static enum wshard_err convert_finish(struct convert *cv, struct wshard_error *err)
{
	struct manifest_parts mp = { 0 };

	manifest_gather(cv, &mp, err);
	if (cv->proc == 0 && !err->code)
		extras_copy(cv, err);
	if (cv->proc == 0 && !err->code)
		manifest_build_doc(cv, &mp, err);
	if (cv->run->archive != WSHARD_ARCHIVE_NONE)
		archive_ranks(cv, &mp, err);
	if (cv->proc != 0 || err->code)
		goto out;
	if (wshard_fault_hit("kill-manifest"))
		raise(SIGKILL);
	if (wshard_fault_hit("manifest")) {
		wshard_error_set(err, WSHARD_EIO, "cannot write '%s/%s': injected fault",
				 cv->run->out_dir, WSHARD_MANIFEST);
		goto out;
	}
	manifest_write(cv, &mp, err);
out:
	manifest_parts_free(&mp);
	return wshard_comm_agree(cv->comm, err);
}

/* Frees what convert_setup and open_rank_files allocated. */
static void convert_free(struct convert *cv)
{
	int r;

	for (r = 0; cv->ranks && r < cv->plan->nranks; r++) {
		free(cv->ranks[r].files);
		if (cv->ranks[r].left)	/* its lock was initialised with it */
			pthread_mutex_destroy(&cv->ranks[r].write_lock);
		gather_close(cv, r);
		free(cv->ranks[r].left);
		free(cv->ranks[r].awaited);
		free(cv->ranks[r].part_left);
		free(cv->ranks[r].part_awaited);
		free(cv->ranks[r].crc);
		free(cv->ranks[r].ck.file);
		free(cv->ranks[r].ck.tensor);
	}
	gather_free(cv);
	free(cv->ranks);
	pthread_cond_destroy(&cv->seal_cond);
	pthread_mutex_destroy(&cv->seal_lock);
	pthread_mutex_destroy(&cv->gather_lock);
}

enum wshard_err wshard_convert(const struct wshard_plan *plan,
			       struct wshard_comm *comm, struct wshard_run *run,
			       struct wshard_error *err)
{
	struct convert cv = {
		.plan = plan,
		.comm = comm,
		.run = run,
		.proc = wshard_comm_rank(comm),
		.nprocs = wshard_comm_size(comm),
		.lock_fd = -1,
	};

	run->nprocs = cv.nprocs;
	if (cv.nprocs > plan->nranks)
		return wshard_error_set(err, WSHARD_EUSAGE,
					"%d MPI processes for %d ranks: use at most one process per rank",
					cv.nprocs, plan->nranks);
	/* before OUT is touched: a source that cannot be streamed within
	 * --max-memory is refused up front */
	if (stream_check_budget(plan, err))
		return err->code;
	if (convert_setup(&cv, err))
		goto out;
	test_hold();
	open_rank_files(&cv, err);
	if (wshard_comm_agree(comm, err) || convert_stream(&cv, err))
		goto out;
	convert_finish(&cv, err);
out:
	if (err->code) {
		discard_ranks(&cv);
		extras_discard(&cv);
	}
	outdir_unlock(run->out_dir, &cv.lock_fd);
	late_free(&cv);		/* its thread uses cv.v */
	wshard_validator_close(cv.v);
	convert_free(&cv);
	return err->code;
}
