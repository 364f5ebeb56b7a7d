/*
 * verify_state.h - the state of one wshard_verify, shared by the files of
 * the verify stage.  Not part of the API.
 *
 * The stage takes in OUT and its manifest (read by output/manifest_read.c)
 * and, unless --quick, the source; it gives out the differences: lines
 * "rank R: WHAT: DIFFERENCE" on process 0 with the counts verified, and
 * WSHARD_EMISMATCH when there are any.  verify.c drives it (the manifest,
 * the results), verify_files.c checks OUT's files (sizes, checksums,
 * structure, archives), verify_source.c the plan and every byte against
 * the source, and verify_diff.c is what they all report through.
 *
 * struct verify, vrank, vtensor and vfile are owned by verify.c, which
 * fills them from the manifest and frees them; verify_files.c adds each
 * vfile's st and map, verify_source.c each vrank's from_plan.  struct
 * hash_job is verify_files.c's, started by verify.c.
 */
#ifndef WSHARD_VERIFY_STATE_H
#define WSHARD_VERIFY_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wshard.h"
#include "stream/stream.h"
#include "base/hash.h"
#include "plan/plan.h"
#include "source/safetensors.h"

struct vfile {
	const char *name;
	uint64_t size;
	const char *checksum;
	struct wshard_st *st;		/* NULL: missing or not valid */
	char *map;			/* the file mapped for the byte comparison */
	size_t map_len;
};

/* Compared bytes after which every mapping of the output is dropped. */
#define UNMAP_EVERY ((uint64_t)16 << 20)
/* A piece this large has its pages dropped as soon as it is compared. */
#define UNMAP_PIECE ((uint64_t)1 << 20)

struct vtensor {
	const char *name;
	enum wshard_dtype dtype;
	int ndim;
	uint64_t shape[WSHARD_MAX_DIMS];
	size_t file;
	uint64_t begin, end;
	const char *checksum;		/* as the manifest says */
	enum wshard_quant_role quant;	/* as the manifest says */
	char digest[WSHARD_DIGEST_HEX];	/* as computed, "" if not */
	bool comparable;		/* structure matches: compare its bytes */
	bool differs;			/* a byte difference was reported */
};

struct vrank {
	size_t nfiles, ntensors;
	struct vfile *files;
	struct vtensor *tensors;
	long *from_plan;		/* plan tensor index -> vtensor, or -1 */
};

struct verify {
	const struct wshard_verify_opts *opt;
	struct wshard_comm *comm;
	int proc, nprocs;
	struct wshard_manifest *m;
	int tp;				/* as the manifest says */
	size_t nranks;			/* entries in "ranks" */
	struct vrank *ranks;
	enum wshard_checksum algo;
	char *lines;			/* this process's difference lines */
	size_t lines_len, lines_cap;
	uint64_t ndiff, ntensors, nbytes, nranks_done;
	char *cmp[STREAM_SLOTS];	/* each stream thread's output bytes */
	size_t cmp_cap[STREAM_SLOTS];
	pthread_mutex_t lock;		/* lines: the hashing thread adds too */
	uint64_t compared;		/* bytes compared since the last unmap_compared
					 * (atomic: the stream threads add to it) */
	bool archive_only;		/* archives and no rank file in OUT */
};

/* verify_diff.c: records a difference line (printf-style; control
 * characters shown as '?'), from any thread. */
void verify_diff(struct verify *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* verify_diff.c: true when this process verifies rank r. */
bool verify_wanted(const struct verify *v, int r);

/* verify_diff.c: records WSHARD_EINVAL: the manifest is not valid
 * because of what.  Returns WSHARD_EINVAL. */
enum wshard_err verify_bad(struct verify *v, struct wshard_error *err, const char *what);

/* verify_files.c: rank r's file fi exists, has its size, is valid
 * safetensors (mapped for the byte comparison).  Returns WSHARD_OK or an
 * I/O error; differences go to the lines. */
enum wshard_err verify_check_file(struct verify *v, int r, size_t fi,
				  struct wshard_error *err);

/* verify_files.c: each of rank r's files holds exactly the manifest's
 * tensors, as the manifest says. */
void verify_check_structure(struct verify *v, int r);

/* The hashing of every file this process checks, on a thread of its own. */
struct hash_job {
	struct verify *v;
	struct wshard_error err;
};

/* verify_files.c: hashes every file of the ranks this process checks
 * (a struct hash_job *); errors go to its err. */
void *verify_hash_worker(void *arg);

/* verify_files.c: notes an --archive-only output (archives and no rank
 * file), refused without quick.  Returns WSHARD_OK or WSHARD_EINVAL. */
enum wshard_err verify_load_archives(struct verify *v, struct wshard_error *err);

/* verify_files.c: rank r's archive has the size and checksum the
 * manifest records.  Returns WSHARD_OK or an I/O error. */
enum wshard_err verify_check_archive(struct verify *v, int r, struct wshard_error *err);

/* verify_source.c: the plan re-derived from the source against the
 * manifest, then every output byte against the source's.  Returns the
 * error every process shares. */
enum wshard_err verify_check_source(struct verify *v, struct wshard_error *err);

#endif /* WSHARD_VERIFY_STATE_H */
