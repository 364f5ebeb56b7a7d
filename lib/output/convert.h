/*
 * convert.h - the state of one wshard_convert, shared by the files of the
 * output stage.  Not part of the API.
 *
 * The stage takes in the plan and the stream's bytes; it gives out the
 * rank files, written under temporary names, every block validated as it
 * is written (unless --validate off), every tensor and part checksummed,
 * then sealed (synced unless --no-sync, renamed into place); the
 * non-weight files; the rank archives (--archive); and wshard.json,
 * written last, so that a failed run leaves no manifest.  exec.c drives
 * it and writes the stream's pieces, gather.c assembles tensors of many
 * small pieces, seal.c validates, checksums and commits (late.c checks
 * what was written before the validator was ready), extras.c copies
 * the non-weight files, archive_out.c packs the archives, and
 * manifest_parts.c and manifest.c gather and print wshard.json
 * (manifest.h, beside the reader manifest_read.c, which verify, inspect
 * and outdir.c use).  outdir.c prepares and locks OUT.  plan_text.c is
 * apart: the plan as --dry-run shows it, and nothing of a convert.
 *
 * struct convert and rank_out are owned by exec.c, which allocates and
 * frees them; gather.c owns rank_out's gbuf, gleft and gstate and
 * convert's gather fields (struct gather_kept), seal.c fills rank_out's
 * ck (manifest_parts.c, on process 0, that of other processes' ranks),
 * archive_out.c its archive fields.  struct seal_jobs is seal.c's,
 * struct manifest_parts manifest_parts.c's; struct manifest_rank_ck
 * (rank_out's ck) is exec.c's with rank_out.
 */
#ifndef WSHARD_CONVERT_H
#define WSHARD_CONVERT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "wshard.h"
#include "base/hash.h"
#include "base/fileio.h"
#include "plan/plan.h"
#include "stream/stream.h"

struct wshard_validator;
struct late;

/* Checksums of one rank's output, filled by convert. */
struct manifest_rank_ck {
	char (*file)[WSHARD_DIGEST_HEX];	/* per part */
	char (*tensor)[WSHARD_DIGEST_HEX];	/* per tensor, rank order */
	char backend[128];			/* validation backend */
};

/* What a wshard_run carries that the API does not show (run->state). */
struct wshard_run_state {
	struct wshard_timings timings;	/* this process's */
	uint64_t proc_bytes_read[];	/* per process, for the manifest */
};

struct rank_out {
	struct wshard_file **files;	/* per part; NULL once committed */
	uint64_t *left;			/* per tensor: bytes not yet written */
	uint64_t *part_left;		/* per part: its tensors not yet written */
	/*
	 * Per tensor and per part: a sealing thread sleeps until it is
	 * written.  Only then does the last writer wake the sealers: a
	 * wake-up per tensor would be tens of thousands of futex calls at
	 * 100k tensors, each waking every sealing thread.
	 */
	unsigned char *awaited, *part_awaited;
	/*
	 * Per tensor, with a composable checksum: the XOR of what each
	 * written piece adds to the tensor's raw CRC (see write_put).
	 */
	uint64_t *crc;
	/*
	 * One writer at a time: two stream threads writing into one file
	 * contend for its inode lock, which the kernel waits for by
	 * spinning; waiting here sleeps.
	 */
	pthread_mutex_t write_lock;
	/*
	 * Per tensor, for gather.c: its buffer while gathered, the bytes
	 * not yet in it, and whether it is gathered (enum gather_state).
	 */
	char **gbuf;
	uint64_t *gleft;
	unsigned char *gstate;
	struct manifest_rank_ck ck;
	bool archived;			/* OUT/rank-R.tar* renamed into place */
	uint64_t archive_size;
	char archive_ck[WSHARD_DIGEST_HEX];
};

struct convert {
	const struct wshard_plan *plan;
	struct wshard_comm *comm;
	struct wshard_run *run;
	int proc, nprocs;
	struct rank_out *ranks;		/* tp entries, used for owned ranks */
	struct wshard_validator *v;	/* NULL with --validate off */
	/* the validator of each stream thread: vs[0] is v, the others opened
	 * by their thread on its first write */
	struct wshard_validator *vs[STREAM_SLOTS];
	/* what each stream thread's validator names in its messages, and
	 * for which (rank, tensor): formatted when it changes */
	struct {
		char text[WSHARD_ERRMAX / 2];
		int rank;
		size_t tensor;
	} what[STREAM_SLOTS];
	size_t block;			/* bytes validated and written at a time */
	/*
	 * The GPU validators' slot size (0: the host backend, or none).  Both
	 * take the bytes block by block as they are written; the GPU's stages
	 * them into slots of gpu_chunk bytes, each one trip to the device.
	 */
	size_t gpu_chunk;
	bool hot;			/* checksums computed as written */
	bool no_checksums;		/* the benchmark's baseline: none at all */
	size_t ncopied;			/* non-weight files copied (process 0) */
	uint64_t sealed, seal_total;	/* tensor bytes sealed, of all */
	/*
	 * Sealing runs beside the stream: a sealing thread waits for each
	 * tensor of its part to be complete (left 0), in file order.
	 */
	pthread_mutex_t seal_lock;
	pthread_cond_t seal_cond;	/* a tensor completed, or the stream ended */
	/*
	 * gather.c's buffers: bytes held by tensors being gathered, the
	 * most these and the kept buffers may take, and written tensors'
	 * buffers kept for reuse (kept_bytes in all)
	 */
	pthread_mutex_t gather_lock;
	uint64_t gather_bytes, gather_max;
	struct gather_kept {
		char *buf;
		uint64_t size;
	} *kept;
	size_t nkept;
	uint64_t kept_bytes;
	bool stream_over, stream_ok;	/* under seal_lock (stream_over also atomic) */
	int lock_fd;
	struct late *late;		/* late.c's; NULL: every write checked as made */
};

/* How every output file is written: synced before its rename, or not. */
static inline unsigned convert_file_flags(const struct convert *cv)
{
	return cv->run->no_sync ? WSHARD_FILE_NOSYNC : 0;
}

/* ------------------------------------------------------------------ */
/* gather.c: tensors of many small pieces written at once              */
/* ------------------------------------------------------------------ */

/* Allocates rank's (owned by this process) per-tensor gather state. */
enum wshard_err gather_open(struct convert *cv, int rank, struct wshard_error *err);

/* Frees it, and any buffer a failed run left. */
void gather_close(struct convert *cv, int rank);

/* Frees the kept buffers (after every rank's gather_close). */
void gather_free(struct convert *cv);

/*
 * Whether tensor of rank is gathered: decided at its first piece (many
 * pieces of at most 64 KiB on average, and room in half of
 * --max-memory), the same for all its pieces.
 */
bool gather_wants(struct convert *cv, int rank, size_t tensor);

/*
 * Copies len bytes at buf to offset off of a gathered tensor (validated
 * and checksummed already, as they came); the piece that completes it
 * writes it, and *out_written is then its size (else 0).  Returns
 * WSHARD_OK or the write's error.
 */
enum wshard_err gather_put(struct convert *cv, int rank, size_t tensor, uint64_t off, const void *buf, size_t len,
			   uint64_t *out_written, struct wshard_error *err);

/* ------------------------------------------------------------------ */
/* seal.c: validators, checksums of the parts, commits                 */
/* ------------------------------------------------------------------ */

/* Sealing threads per process, at most. */
#define SEAL_THREADS_MAX 8

/*
 * The parts of this process's ranks, sealed by a few threads that run
 * beside the stream.  Jobs are ordered part by part across the ranks
 * (part 0 of every rank, then part 1, ...), so that the threads follow
 * the stream through all ranks at once.
 */
struct seal_jobs {
	struct convert *cv;
	pthread_mutex_t lock;
	size_t next, njobs;
	int *rank;
	size_t *part;
	struct wshard_error err;
	double cpu_seconds;		/* CPU time of the threads, summed */
	pthread_t tid[SEAL_THREADS_MAX];
	size_t nthreads;
	bool reporter_taken;
};

/*
 * The validators' chunk (their staging buffers) and the writes' block,
 * smaller with a small --max-memory.
 */
size_t seal_chunk(const struct wshard_plan *plan);

/*
 * "rank R tensor 'NAME'" in d (cap bytes, cut short as snprintf would):
 * what a validator's messages call a tensor.
 */
void seal_label(char *d, size_t cap, int rank, const char *name);

/* Opens the validator of run->validate (before any byte is written, so
 * that --validate gpu fails fast).  Returns WSHARD_OK or its error. */
enum wshard_err seal_open_validator(struct convert *cv, struct wshard_error *err);

/* The validator of stream thread slot (NULL with --validate off), opened
 * on its first use.  Returns WSHARD_OK or the validator's error. */
enum wshard_err seal_slot_validator(struct convert *cv, unsigned slot,
				    struct wshard_validator **out_v,
				    struct wshard_error *err);

/*
 * Round-trips n bytes of a tensor at offset off through the validator v
 * (none with --validate off) and adds their CRC to *raw.  Returns
 * WSHARD_OK or the validator's error.
 */
enum wshard_err seal_check_block(struct convert *cv, struct wshard_validator *v,
				 unsigned slot, const char *p, size_t n, uint64_t off,
				 uint64_t *raw, struct wshard_error *err);

/* Wakes the sealing threads: a tensor is complete. */
void seal_tensor_done(struct convert *cv);

/*
 * Waits until every byte of tensor i of rank r is in its file.  Returns
 * WSHARD_OK, or an error once the stream has ended without it.
 */
enum wshard_err seal_wait_tensor(struct convert *cv, int r, size_t i,
				 struct wshard_error *err);

/*
 * Starts the sealing threads; they wait for the stream's tensors.  j must
 * be zeroed, and seal_finish called afterwards whatever this returns.
 * Returns WSHARD_OK or WSHARD_ENOMEM.
 */
enum wshard_err seal_start(struct convert *cv, struct seal_jobs *j,
			   struct wshard_error *err);

/*
 * Tells the sealing threads that the stream is over (stream_ok: it
 * succeeded), waits for them, closes the validators and frees the jobs.
 * Their error, if any, goes to err unless err already holds one.
 * Returns err's code.
 */
enum wshard_err seal_finish(struct convert *cv, struct seal_jobs *j, bool stream_ok,
			    struct wshard_error *err);

/* ------------------------------------------------------------------ */
/* extras.c: the non-weight files (process 0)                          */
/* ------------------------------------------------------------------ */

/* Copies the source's non-weight files into OUT, config.json edited for
 * --dtype.  Returns WSHARD_OK, WSHARD_EIO, WSHARD_EINVAL or WSHARD_ENOMEM. */
enum wshard_err extras_copy(struct convert *cv, struct wshard_error *err);

/* On failure: removes the non-weight files this run copied. */
void extras_discard(struct convert *cv);

/* --archive-only: removes the copied files, now in every archive, and
 * syncs OUT.  Returns WSHARD_OK, WSHARD_EIO or WSHARD_ENOMEM. */
enum wshard_err extras_remove(struct convert *cv, struct wshard_error *err);

/* ------------------------------------------------------------------ */
/* manifest_parts.c: what process 0 gathers to write wshard.json       */
/* ------------------------------------------------------------------ */

/* The manifest as process 0 assembles it during a convert. */
struct manifest_parts {
	json_t *doc;		/* all but the ranks' entries */
	char *all;		/* each process's entries, one NUL-terminated string each */
	size_t *lens;		/* bytes gathered from each process */
	const char **text;	/* rank r's entry, in all */
	size_t *len;
};

/* Frees what mp holds and zeroes it. */
void manifest_parts_free(struct manifest_parts *mp);

/*
 * Gathers what process 0 needs to print every rank's entries: with
 * archives, every process's entries printed (a rank at a time), into
 * mp->text[r]; without, the other processes' checksums into their
 * ranks' ck, mp->text left NULL and the entries printed by
 * manifest_write.  Every process returns the same result.
 */
enum wshard_err manifest_gather(struct convert *cv, struct manifest_parts *mp,
				struct wshard_error *err);

/* Process 0: the rest of the manifest, without "archives", into mp->doc. */
enum wshard_err manifest_build_doc(struct convert *cv, struct manifest_parts *mp,
				   struct wshard_error *err);

/* ------------------------------------------------------------------ */
/* archive_out.c: rank archives (--archive)                            */
/* ------------------------------------------------------------------ */

/*
 * Process 0 broadcasts the manifest (without "archives"), every process
 * packs its ranks, and process 0 gathers their names, sizes and checksums
 * into mp->doc.  Every process returns the same result.
 */
enum wshard_err archive_ranks(struct convert *cv, struct manifest_parts *mp,
			      struct wshard_error *err);

/* On failure: removes rank r's archive if this run renamed it in place. */
void archive_discard(struct convert *cv, int r);

/* ------------------------------------------------------------------ */
/* manifest.c: wshard.json                                             */
/* ------------------------------------------------------------------ */

/* Process 0: prints mp into OUT/wshard.json, straight into the file.
 * Returns WSHARD_OK, WSHARD_EIO or WSHARD_ENOMEM. */
enum wshard_err manifest_write(struct convert *cv, const struct manifest_parts *mp,
			       struct wshard_error *err);

/* ------------------------------------------------------------------ */
/* late.c: the first writes checked once the validator is ready        */
/* ------------------------------------------------------------------ */

/*
 * Whether the run's validator is not ready to open (CUDA still starting,
 * or the test hook validate_late): then late_start in place of
 * seal_open_validator.
 */
bool late_wanted(const struct convert *cv);

/*
 * Starts the thread that opens the run's validator once it can and then
 * checks what was written meanwhile.  Returns WSHARD_OK, WSHARD_ENOMEM
 * or WSHARD_EUSAGE (a bad hook); late_free in any case.
 */
enum wshard_err late_start(struct convert *cv, struct wshard_error *err);

/* Whether writes are to go unchecked and be recorded (late_record). */
bool late_deferring(struct convert *cv);

/* The validator could not be opened, or a late check failed: its error. */
enum wshard_err late_failed(struct convert *cv, struct wshard_error *err);

/*
 * Records len bytes at offset off of tensor (of rank, written unchecked
 * into its file, or gathered: in the file once the tensor is complete),
 * and sets *out_recorded; false when the validator became ready since
 * late_deferring: the caller checks them itself.  Returns WSHARD_OK, or
 * WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err late_record(struct convert *cv, int rank, size_t tensor, uint64_t off,
			    uint64_t len, bool gathered, bool *out_recorded,
			    struct wshard_error *err);

/*
 * Once the stream is over and seal_finish has counted the stream
 * threads' checks: waits for the late checks (drop: for the thread only,
 * the run has failed), adds their bytes to run->bytes_validated, sets
 * run->bytes_validated_late and gives their first error.  Returns
 * WSHARD_OK or that error.
 */
enum wshard_err late_end(struct convert *cv, bool drop, struct wshard_error *err);

/* Ends (as late_end with drop) and frees what late_start made; accepts none. */
void late_free(struct convert *cv);

#endif /* WSHARD_CONVERT_H */
