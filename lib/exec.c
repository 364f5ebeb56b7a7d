/*
 * exec.c - wshard_convert: prepares OUT, streams the plan into rank files
 * under temporary names, round-tripping every block through the
 * validator and checksumming it as it is written (while it is in cache),
 * renames each file once its tensors are complete, copies the
 * non-weight files and writes wshard.json last.  A checksum that does
 * not compose from parts (xxh3-64, sha256) needs each file in order:
 * then sealing threads read each file back, tensor by tensor as the
 * stream completes them.  Every process agrees on the outcome before
 * anyone leaves, and a failure leaves no manifest behind.  With
 * --archive, each process packs its ranks into OUT/rank-R.tar* (from the
 * renamed files and the manifest process 0 broadcasts) before process 0
 * writes the manifest that lists them.
 */
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "wshard.h"
#include "internal.h"
#include "manifest.h"
#include "stream.h"
#include "archive_out.h"
#include "crc64.h"
#include "../cuda/validate.h"

struct rank_out {
	struct wshard_file **files;	/* per part; NULL once committed */
	uint64_t *left;			/* per tensor: bytes not yet written */
	/*
	 * Per tensor, with a composable checksum: the XOR of what each
	 * written piece adds to the tensor's raw CRC (see write_put).
	 */
	uint64_t *crc;
	/*
	 * One writer at a time: two stream threads writing into one file
	 * contend for its inode lock, which the kernel waits for by spinning
	 * (5% of convert's CPU); waiting here sleeps.
	 */
	pthread_mutex_t write_lock;
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
	bool stream_over, stream_ok;	/* under seal_lock (stream_over also atomic) */
	int lock_fd;
};

/* ------------------------------------------------------------------ */
/* OUT: refuse what is not ours, lock, clean                            */
/* ------------------------------------------------------------------ */

static bool is_rank_file(const char *name)
{
	unsigned r, p;
	int n = -1;

	return sscanf(name, "model-rank-%u-part-%u.safetensors%n", &r, &p, &n) == 2 &&
	       n == (int)strlen(name);
}

/* rank-R.tar, rank-R.tar.zst, rank-R.tar.gz (--archive) */
static bool is_rank_archive(const char *name)
{
	unsigned r;
	int n = -1;

	if (sscanf(name, "rank-%u%n", &r, &n) != 1 || n < 0)
		return false;
	name += n;
	return !strcmp(name, ".tar") || !strcmp(name, ".tar.zst") || !strcmp(name, ".tar.gz");
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Names an earlier manifest in dir says it copied. */
static json_t *old_copied(const char *dir)
{
	char *path = wshard_path_join(dir, WSHARD_MANIFEST);
	json_t *doc, *copied = NULL;

	if (!path)
		return NULL;
	doc = json_load_file(path, 0, NULL);
	free(path);
	if (doc)
		copied = json_incref(json_object_get(json_object_get(doc, "source"), "copied"));
	json_decref(doc);
	return copied;
}

static bool listed(json_t *arr, char *const *list, size_t n, const char *name)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
			return true;
	for (i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

/*
 * OUT may hold only what wshard writes: the manifest, rank files and rank
 * archives, our temporary files and lock, and the non-weight files it
 * copies.  Anything
 * else means OUT is not an earlier wshard output, and nothing is deleted.
 */
static enum wshard_err clean_out(struct convert *cv, struct wshard_error *err)
{
	const char *out = cv->run->out_dir;
	const struct wshard_catalog *cat = cv->plan->cat;
	json_t *copied = old_copied(out);
	DIR *d = opendir(out);
	struct dirent *e;
	size_t nours = 0, nsure = 0;
	char *path;
	enum wshard_err rc = WSHARD_OK;

	if (!d) {
		json_decref(copied);
		return wshard_error_set(err, WSHARD_EIO, "cannot open directory '%s': %s",
					out, strerror(errno));
	}
	while ((e = readdir(d))) {
		const char *n = e->d_name;

		if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, WSHARD_LOCK))
			continue;
		if (!strcmp(n, WSHARD_MANIFEST) || is_rank_file(n) || is_rank_archive(n) ||
		    (n[0] == '.' && ends_with(n, WSHARD_TMP_SUFFIX))) {
			nours++;
			nsure++;
			continue;
		}
		if (listed(copied, cat->extra, cat->nextra, n)) {
			nours++;
			continue;
		}
		rc = wshard_error_set(err, WSHARD_EEXIST,
				      "'%s' holds '%s', which wshard did not write; not replacing it",
				      out, n);
		break;
	}
	/* files named like the source's config.json alone are someone else's */
	if (!rc && nours && !nsure)
		rc = wshard_error_set(err, WSHARD_EEXIST,
				      "'%s' holds files but no wshard output; not replacing them",
				      out);
	if (!rc && nours && !cv->run->force)
		rc = wshard_error_set(err, WSHARD_EEXIST,
				      "'%s' is not empty; pass --force to replace an earlier wshard output",
				      out);
	if (rc || !nours)
		goto out;
	/* The manifest first: from here on OUT no longer looks complete. */
	path = wshard_path_join(out, WSHARD_MANIFEST);
	if (!path) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	if (unlink(path) < 0 && errno != ENOENT)
		rc = wshard_error_set(err, WSHARD_EIO, "cannot remove '%s': %s", path,
				      strerror(errno));
	if (!rc)
		rc = wshard_fsync_dir(path, err);
	free(path);
	rewinddir(d);
	while (!rc && (e = readdir(d))) {
		const char *n = e->d_name;

		if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, WSHARD_LOCK))
			continue;
		path = wshard_path_join(out, n);
		if (!path) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			break;
		}
		if (unlink(path) < 0 && errno != ENOENT)
			rc = wshard_error_set(err, WSHARD_EIO, "cannot remove '%s': %s",
					      path, strerror(errno));
		free(path);
	}
out:
	closedir(d);
	json_decref(copied);
	return rc;
}

/* Process 0: creates or checks OUT, takes the lock, removes an old output. */
static enum wshard_err prepare_out(struct convert *cv, struct wshard_error *err)
{
	const char *out = cv->run->out_dir;
	struct stat sb;
	char *lock;
	int tries;

	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		return wshard_error_set(err, WSHARD_EIO, "cannot create '%s': %s", out,
					strerror(errno));
	if (stat(out, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return wshard_error_set(err, WSHARD_EEXIST, "'%s' exists and is not a directory",
					out);
	lock = wshard_path_join(out, WSHARD_LOCK);
	if (!lock)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	/*
	 * The lock file is removed when its holder is done, so a lock taken on
	 * a file that is no longer the one at that name (its holder removed it
	 * between our open and our flock) locks nothing: take it again.  Of two
	 * converts racing for a released OUT, exactly one gets it.
	 */
	for (tries = 0; tries < 100; tries++) {
		struct stat fsb, psb;

		cv->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (cv->lock_fd < 0) {
			wshard_error_set(err, WSHARD_EIO, "cannot create '%s': %s", lock,
					 strerror(errno));
			free(lock);
			return WSHARD_EIO;
		}
		if (flock(cv->lock_fd, LOCK_EX | LOCK_NB) < 0) {
			close(cv->lock_fd);
			cv->lock_fd = -1;
			free(lock);
			return wshard_error_set(err, WSHARD_EBUSY,
						"'%s' is locked by another wshard convert", out);
		}
		if (fstat(cv->lock_fd, &fsb) == 0 && stat(lock, &psb) == 0 &&
		    fsb.st_ino == psb.st_ino && fsb.st_dev == psb.st_dev)
			break;
		close(cv->lock_fd);
		cv->lock_fd = -1;
	}
	free(lock);
	if (cv->lock_fd < 0)
		return wshard_error_set(err, WSHARD_EBUSY, "cannot lock '%s'", out);
	return clean_out(cv, err);
}

/*
 * The lock file goes when its holder is done, so OUT holds nothing of a
 * run that failed (prepare_out retakes a lock whose file went meanwhile).
 */
static void release_lock(struct convert *cv)
{
	char *lock;

	if (cv->lock_fd < 0)
		return;
	lock = wshard_path_join(cv->run->out_dir, WSHARD_LOCK);
	if (lock)
		unlink(lock);
	free(lock);
	close(cv->lock_fd);
	cv->lock_fd = -1;
}

/* ------------------------------------------------------------------ */
/* Rank files                                                           */
/* ------------------------------------------------------------------ */

/* How every output file is written: synced before its rename, or not. */
static unsigned file_flags(const struct convert *cv)
{
	return cv->run->no_sync ? WSHARD_FILE_NOSYNC : 0;
}

static enum wshard_err open_rank_files(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	int r;
	size_t f;
	enum wshard_err rc;

	for (r = cv->proc; r < plan->tp; r += cv->nprocs) {
		const struct wshard_rank_plan *rp = &plan->ranks[r];
		struct rank_out *ro = &cv->ranks[r];

		ro->files = calloc(rp->nfiles, sizeof(*ro->files));
		ro->ck.file = calloc(rp->nfiles, sizeof(*ro->ck.file));
		ro->ck.tensor = calloc(rp->ntensors + 1, sizeof(*ro->ck.tensor));
		ro->left = calloc(rp->ntensors + 1, sizeof(*ro->left));
		ro->crc = calloc(rp->ntensors + 1, sizeof(*ro->crc));
		pthread_mutex_init(&ro->write_lock, NULL);
		if (!ro->files || !ro->ck.file || !ro->ck.tensor || !ro->left || !ro->crc)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		for (f = 0; f < rp->ntensors; f++)
			ro->left[f] = rp->tensors[f].nbytes;
		for (f = 0; f < rp->nfiles; f++) {
			char *path = wshard_path_join(cv->run->out_dir, rp->files[f].name);

			if (!path)
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			rc = wshard_file_create(&ro->files[f], path, file_flags(cv), err);
			free(path);
			if (rc)
				return rc;
			if (ftruncate(ro->files[f]->fd, (off_t)rp->files[f].size) < 0)
				return wshard_error_set(err, WSHARD_EIO, "cannot size '%s': %s",
							ro->files[f]->path, strerror(errno));
			rc = wshard_file_pwrite(ro->files[f], rp->files[f].header,
						rp->files[f].header_len, 0, err);
			if (rc)
				return rc;
		}
	}
	return WSHARD_OK;
}

/* The validator of a stream thread, opened on its first use. */
static enum wshard_err slot_validator(struct convert *cv, unsigned slot,
				      struct wshard_validator **out_v,
				      struct wshard_error *err)
{
	bool gpu;

	*out_v = cv->vs[slot];
	if (*out_v || !cv->v)
		return WSHARD_OK;
	gpu = strncmp(wshard_validator_backend(cv->v), "host", 4) != 0;
	if (wshard_validator_open(&cv->vs[slot], gpu ? WSHARD_VALIDATE_GPU : WSHARD_VALIDATE_HOST,
				  wshard_comm_local_rank(cv->comm), cv->block, NULL, 0, err))
		return err->code;
	*out_v = cv->vs[slot];
	return WSHARD_OK;
}

/*
 * Round-trips n bytes of a tensor at offset off through the validator v
 * (none with --validate off) and adds their CRC to *raw.
 */
static enum wshard_err check_block(struct convert *cv, struct wshard_validator *v,
				   unsigned slot, const char *p, size_t n, uint64_t off,
				   uint64_t *raw, struct wshard_error *err)
{
	if (v && wshard_validator_check(v, p, n, cv->what[slot].text, off, err))
		return err->code;
	if (cv->hot)
		*raw = wshard_crc64_raw(*raw, p, n);
	return WSHARD_OK;
}

/*
 * The sink of convert: bytes of a tensor go to its place in its part.
 * A cache-sized block at a time, the bytes are written, then
 * round-tripped through the validator and checksummed (with a composable
 * checksum) from the cache the write left them in: each is read from
 * memory once.  (Writing first, the kernel's copy pays for the read; in
 * the other order the validator did, and the copy gained less than that.)
 * Both stream threads write into every rank file, one at a time.  The
 * stream puts pieces whose file is free first (write_busy), and a thread
 * that finds the file taken all the same checks the blocks it has yet
 * to write, in order, until the file is free, instead of sleeping: the
 * waits had grown to a fifth of each thread's time once blocks were
 * checked, and a 2 GB --no-sync convert takes about a tenth less time
 * without most of them.
 * A block that fails validation fails the run, and no file of a failed
 * run gets its final name.
 *
 * The checksum of a piece does not need the pieces before it: a CRC
 * without its pre- and post-inversion is linear, so the raw CRC of a
 * tensor is the XOR, over its pieces, of each piece's raw CRC followed
 * by as many zero bytes as the tensor has after the piece.  Pieces may
 * come in any order and from either thread.
 */
static enum wshard_err write_put(void *ctx, unsigned slot, int rank, size_t tensor,
				 uint64_t off, const void *buf, size_t len,
				 struct wshard_error *err)
{
	struct convert *cv = ctx;
	const struct wshard_rank_plan *rp = &cv->plan->ranks[rank];
	const struct wshard_out_tensor *t = &rp->tensors[tensor];
	struct rank_out *ro = &cv->ranks[rank];
	struct wshard_file *f = ro->files[t->part];
	uint64_t at = rp->files[t->part].header_len + t->begin + off, raw = 0;
	struct wshard_validator *v;
	const char *p = buf;
	size_t done, n, m, checked = 0;
	enum wshard_err rc;

	if (wshard_fault_hit("kill-write"))
		raise(SIGKILL);
	rc = slot_validator(cv, slot, &v, err);
	if (v && (cv->what[slot].rank != rank || cv->what[slot].tensor != tensor ||
		  !cv->what[slot].text[0])) {
		snprintf(cv->what[slot].text, sizeof(cv->what[slot].text), "rank %d tensor '%s'",
			 rank, t->name);
		cv->what[slot].rank = rank;
		cv->what[slot].tensor = tensor;
	}
	/* checked: bytes of the piece checked so far, never fewer than written */
	for (done = 0; done < len && !rc; done += n) {
		n = WSHARD_MIN(len - done, cv->block);
		while (!rc && pthread_mutex_trylock(&ro->write_lock) != 0) {
			if (checked == len) {
				pthread_mutex_lock(&ro->write_lock);
				break;
			}
			m = WSHARD_MIN(len - checked, cv->block);
			rc = check_block(cv, v, slot, p + checked, m, off + checked, &raw, err);
			checked += m;
		}
		if (rc)
			break;
		rc = wshard_file_pwrite(f, p + done, n, at + done, err);
		pthread_mutex_unlock(&ro->write_lock);
		if (!rc && checked == done) {
			rc = check_block(cv, v, slot, p + done, n, off + done, &raw, err);
			checked += n;
		}
	}
	if (!rc && cv->hot && len)
		__atomic_xor_fetch(&ro->crc[tensor],
				   wshard_crc64_shift(raw, t->nbytes - off - len),
				   __ATOMIC_RELAXED);
	/* the last bytes of a tensor: its sealing thread may go on */
	if (!rc && len &&
	    __atomic_sub_fetch(&ro->left[tensor], len, __ATOMIC_ACQ_REL) == 0) {
		pthread_mutex_lock(&cv->seal_lock);
		pthread_cond_broadcast(&cv->seal_cond);
		pthread_mutex_unlock(&cv->seal_lock);
	}
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
 * Waits until every byte of tensor i of rank r is written.  Returns
 * WSHARD_OK, or an error once the stream has ended without it: an
 * internal one if the stream succeeded (the plan and the stream
 * disagree), else one that the stream's own error will take precedence
 * over.
 */
static enum wshard_err wait_tensor(struct convert *cv, int r, size_t i,
				   struct wshard_error *err)
{
	uint64_t *left = &cv->ranks[r].left[i];
	bool ok;

	if (__atomic_load_n(left, __ATOMIC_ACQUIRE) == 0)
		return WSHARD_OK;
	pthread_mutex_lock(&cv->seal_lock);
	while (__atomic_load_n(left, __ATOMIC_ACQUIRE) != 0 && !cv->stream_over)
		pthread_cond_wait(&cv->seal_cond, &cv->seal_lock);
	ok = __atomic_load_n(left, __ATOMIC_ACQUIRE) == 0;
	pthread_mutex_unlock(&cv->seal_lock);
	if (ok)
		return WSHARD_OK;
	if (cv->stream_ok)
		return wshard_error_set(err, WSHARD_EIO,
					"internal: %llu bytes of rank %d tensor '%s' were never written",
					(unsigned long long)*left, r,
					cv->plan->ranks[r].tensors[i].name);
	return wshard_error_set(err, WSHARD_EIO, "sealing stopped: the stream failed");
}

/* Sealing threads per process, at most. */
#define SEAL_THREADS_MAX 8

/*
 * Bytes validated, checksummed and written in one go, and read back at a
 * time when sealing: about half an L2.
 */
#define SEAL_BLOCK ((size_t)256 << 10)

/* Counts sealed bytes; the reporting thread shows them once the stream is over. */
static void report_sealed(struct convert *cv, uint64_t len, bool report)
{
	uint64_t all = __atomic_add_fetch(&cv->sealed, len, __ATOMIC_RELAXED);

	if (report && cv->run->progress && __atomic_load_n(&cv->stream_over, __ATOMIC_ACQUIRE))
		cv->run->progress(cv->run->progress_ctx, "sealing", all, cv->seal_total);
}

static void hex64(char *out, uint64_t x)
{
	snprintf(out, WSHARD_DIGEST_HEX, "%016llx", (unsigned long long)x);
}

/*
 * The checksums of one part from what the writes left (composable
 * checksum): each tensor's from its raw CRC, the file's by appending
 * the header, each tensor and the zeros after the last one.
 */
static enum wshard_err sum_part(struct convert *cv, int r, size_t part, bool report,
				struct wshard_error *err)
{
	const struct wshard_rank_plan *rp = &cv->plan->ranks[r];
	const struct wshard_out_file *of = &rp->files[part];
	struct rank_out *ro = &cv->ranks[r];
	uint64_t raw = wshard_crc64_raw(0, of->header, of->header_len);
	uint64_t pos = 0;		/* data bytes covered by raw */
	size_t i;
	enum wshard_err rc;

	for (i = of->first; i < of->first + of->count; i++) {
		const struct wshard_out_tensor *t = &rp->tensors[i];
		uint64_t crc;

		rc = wait_tensor(cv, r, i, err);
		if (rc)
			return rc;
		crc = __atomic_load_n(&ro->crc[i], __ATOMIC_RELAXED);
		hex64(ro->ck.tensor[i], wshard_crc64_from_raw(crc, t->nbytes));
		/* tensors are contiguous; a gap would be zeros (the file was sized) */
		raw = wshard_crc64_shift(raw, t->begin + t->nbytes - pos) ^ crc;
		pos = t->begin + t->nbytes;
		report_sealed(cv, t->nbytes, report);
	}
	raw = wshard_crc64_shift(raw, of->size - of->header_len - pos);
	hex64(ro->ck.file[part], wshard_crc64_from_raw(raw, of->size));
	return WSHARD_OK;
}

/*
 * The checksums of one part read back in chunks as its tensors are
 * completed (in file order, a little behind the writing, so mostly from
 * cache): for an algorithm that needs each file in order.
 */
static enum wshard_err read_back_part(struct convert *cv, int r, size_t part, char *buf,
				      bool report, struct wshard_error *err)
{
	const struct wshard_rank_plan *rp = &cv->plan->ranks[r];
	const struct wshard_out_file *of = &rp->files[part];
	struct rank_out *ro = &cv->ranks[r];
	struct wshard_file *f = ro->files[part];
	struct wshard_hash fh = { 0 }, th = { 0 };
	enum wshard_checksum algo = cv->plan->opt.checksum;
	int rfd;
	size_t i;
	enum wshard_err rc;

	/*
	 * Read, not mapped: the bytes are recent in the page cache either
	 * way, and a mapping of a part kept whole large folios resident
	 * (18 MiB more at 8 GB than at 2 GB), where one buffer stays flat.
	 */
	rfd = open(f->tmp_path, O_RDONLY | O_CLOEXEC);
	if (rfd < 0)
		return wshard_error_set(err, WSHARD_EIO, "cannot reopen '%s': %s",
					f->tmp_path, strerror(errno));
	rc = wshard_hash_init(&fh, algo);
	if (rc) {
		rc = wshard_error_set(err, rc, "out of memory");
		goto out;
	}
	wshard_hash_update(&fh, of->header, of->header_len);
	for (i = of->first; i < of->first + of->count; i++) {
		const struct wshard_out_tensor *t = &rp->tensors[i];
		uint64_t done = 0;

		rc = wait_tensor(cv, r, i, err);
		if (rc)
			goto out;
		rc = wshard_hash_init(&th, algo);
		if (rc) {
			rc = wshard_error_set(err, rc, "out of memory");
			goto out;
		}
		while (done < t->nbytes) {
			size_t len = (size_t)WSHARD_MIN(t->nbytes - done, SEAL_BLOCK);

			rc = wshard_pread_full(rfd, buf, len, of->header_len + t->begin + done,
					       f->path, err);
			if (rc)
				goto out;
			wshard_hash_update(&fh, buf, len);
			wshard_hash_update(&th, buf, len);
			done += len;
			report_sealed(cv, len, report);
		}
		wshard_hash_final(&th, ro->ck.tensor[i]);
	}
	wshard_hash_final(&fh, ro->ck.file[part]);
out:
	wshard_hash_release(&fh);
	wshard_hash_release(&th);
	close(rfd);
	return rc;
}

/* Checksums one part once its tensors are written, then commits it. */
static enum wshard_err seal_part(struct convert *cv, int r, size_t part, char *buf,
				 bool report, struct wshard_error *err)
{
	struct rank_out *ro = &cv->ranks[r];
	const struct wshard_out_file *of = &cv->plan->ranks[r].files[part];
	size_t i;
	enum wshard_err rc = WSHARD_OK;

	if (cv->no_checksums)
		for (i = of->first; i < of->first + of->count && !rc; i++)
			rc = wait_tensor(cv, r, i, err);
	else if (cv->hot)
		rc = sum_part(cv, r, part, report, err);
	else
		rc = read_back_part(cv, r, part, buf, report, err);
	if (rc)
		return rc;
	rc = wshard_file_commit(ro->files[part], err);
	ro->files[part] = NULL;
	return rc;
}

/*
 * The validators' chunk (their staging buffers) and the writes' block:
 * SEAL_BLOCK bytes, less with a small --max-memory.
 */
static size_t seal_chunk(const struct wshard_plan *plan)
{
	return (size_t)WSHARD_MIN(WSHARD_MAX(plan->opt.max_memory / 8, 1 << 16), SEAL_BLOCK);
}

/* Opened before any byte is written, so --validate gpu fails fast. */
static enum wshard_err open_validator(struct convert *cv, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;

	if (cv->run->validate != WSHARD_VALIDATE_OFF)
		rc = wshard_validator_open(&cv->v, cv->run->validate,
					   wshard_comm_local_rank(cv->comm), cv->block,
					   cv->run->notice, sizeof(cv->run->notice), err);
	cv->vs[0] = cv->v;
	snprintf(cv->run->validate_backend, sizeof(cv->run->validate_backend), "%s",
		 cv->v ? wshard_validator_backend(cv->v) : "off");
	return rc;
}

/* Bytes the validators checked, and closes those the stream threads opened. */
static uint64_t close_validators(struct convert *cv)
{
	uint64_t total = 0, bytes;
	double secs;
	size_t i;

	for (i = 0; i < STREAM_SLOTS; i++) {
		if (!cv->vs[i])
			continue;
		wshard_validator_stats(cv->vs[i], &bytes, &secs);
		total += bytes;
		if (cv->vs[i] != cv->v)
			wshard_validator_close(cv->vs[i]);
		cv->vs[i] = NULL;
	}
	return total;
}

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

static void *seal_worker(void *arg)
{
	struct seal_jobs *j = arg;
	struct convert *cv = j->cv;
	struct wshard_error e = { 0 };
	size_t k;
	char *buf = NULL;
	bool report;

	if (!cv->hot && !cv->no_checksums && !(buf = malloc(SEAL_BLOCK)))
		wshard_error_set(&e, WSHARD_ENOMEM, "out of memory");
	pthread_mutex_lock(&j->lock);
	report = !j->reporter_taken;
	j->reporter_taken = true;
	pthread_mutex_unlock(&j->lock);
	for (;;) {
		pthread_mutex_lock(&j->lock);
		if (e.code && !j->err.code)
			j->err = e;
		k = j->err.code || j->next >= j->njobs ? SIZE_MAX : j->next++;
		pthread_mutex_unlock(&j->lock);
		if (k == SIZE_MAX)
			break;
		seal_part(cv, j->rank[k], j->part[k], buf, report, &e);
		if (wshard_fault_hit("kill-seal"))	/* a part sealed, others not */
			raise(SIGKILL);
	}
	free(buf);
	pthread_mutex_lock(&j->lock);
	j->cpu_seconds += wshard_clock_seconds(CLOCK_THREAD_CPUTIME_ID);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

/*
 * Threads for sealing: one per rank this process writes (they mostly
 * wait for the stream), at most SEAL_THREADS_MAX.
 */
static size_t seal_threads(struct convert *cv, size_t njobs)
{
	size_t n = ((size_t)cv->plan->tp - (size_t)cv->proc + (size_t)cv->nprocs - 1) /
		   (size_t)cv->nprocs;

	/* injected faults stop at a fixed point: one thread, parts in order */
	if (getenv("WSHARD_FAULT"))
		n = 1;
	return WSHARD_MAX(1, WSHARD_MIN(WSHARD_MIN(n, njobs), SEAL_THREADS_MAX));
}

/*
 * Starts the sealing threads; they wait for the stream's tensors.  j must
 * be zeroed, and seal_finish called afterwards whatever this returns.
 */
static enum wshard_err seal_start(struct convert *cv, struct seal_jobs *j,
				  struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	size_t f, n = 0, maxparts = 0, nt;
	int r;

	j->cv = cv;
	pthread_mutex_init(&j->lock, NULL);
	for (r = cv->proc; r < plan->tp; r += cv->nprocs) {
		snprintf(cv->ranks[r].ck.backend, sizeof(cv->ranks[r].ck.backend), "%s",
			 cv->run->validate_backend);
		n += plan->ranks[r].nfiles;
		maxparts = WSHARD_MAX(maxparts, plan->ranks[r].nfiles);
		cv->seal_total += plan->ranks[r].bytes;
	}
	j->rank = calloc(n + 1, sizeof(*j->rank));
	j->part = calloc(n + 1, sizeof(*j->part));
	if (!j->rank || !j->part)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (f = 0; f < maxparts; f++)
		for (r = cv->proc; r < plan->tp; r += cv->nprocs)
			if (f < plan->ranks[r].nfiles) {
				j->rank[j->njobs] = r;
				j->part[j->njobs] = f;
				j->njobs++;
			}
	nt = seal_threads(cv, n);
	for (j->nthreads = 0; j->nthreads < nt; j->nthreads++)
		if (pthread_create(&j->tid[j->nthreads], NULL, seal_worker, j))
			break;
	if (!j->nthreads)
		return wshard_error_set(err, WSHARD_ENOMEM, "cannot start a sealing thread");
	return WSHARD_OK;
}

/*
 * Tells the sealing threads that the stream is over (stream_ok: it
 * succeeded), waits for them and frees the jobs.  Their error, if any,
 * goes to err unless err already holds one.
 */
static enum wshard_err seal_finish(struct convert *cv, struct seal_jobs *j, bool stream_ok,
				   struct wshard_error *err)
{
	size_t i;

	pthread_mutex_lock(&cv->seal_lock);
	cv->stream_ok = stream_ok;
	__atomic_store_n(&cv->stream_over, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&cv->seal_cond);
	pthread_mutex_unlock(&cv->seal_lock);
	for (i = 0; i < j->nthreads; i++)
		pthread_join(j->tid[i], NULL);
	pthread_mutex_destroy(&j->lock);
	cv->run->bytes_validated = close_validators(cv);
	cv->run->seal_cpu_seconds = j->cpu_seconds;
	free(j->rank);
	free(j->part);
	j->rank = NULL;
	j->part = NULL;
	if (j->err.code && !err->code)
		return wshard_error_set(err, j->err.code, "%s", j->err.msg);
	return err->code;
}

static char *archive_path(struct convert *cv, int r)
{
	char name[64];

	wshard_archive_name(name, sizeof(name), r, cv->run->archive);
	return wshard_path_join(cv->run->out_dir, name);
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

	for (r = cv->proc; r < plan->tp; r += cv->nprocs) {
		struct rank_out *ro = &cv->ranks[r];

		if (ro->archived) {
			char *path = archive_path(cv, r);

			if (path)
				unlink(path);
			free(path);
			ro->archived = false;
		}

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

/* ------------------------------------------------------------------ */
/* Manifest                                                             */
/* ------------------------------------------------------------------ */

/*
 * Replaces the string value of the first "KEY": "OLD" in text, keeping
 * the rest of the file as it was written.  Returns a new buffer or NULL.
 */
static char *replace_value(const char *text, const char *key, const char *old,
			   const char *val)
{
	char pat[128];
	const char *at = text, *q, *e;
	char *out;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	while ((at = strstr(at, pat))) {
		q = at + strlen(pat);
		while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
			q++;
		if (*q++ != ':') {
			at++;
			continue;
		}
		while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
			q++;
		if (*q != '"' || strncmp(q + 1, old, strlen(old)) || q[1 + strlen(old)] != '"') {
			at++;
			continue;
		}
		e = q + 1 + strlen(old);
		out = malloc(strlen(text) + strlen(val) + 1);
		if (out)
			sprintf(out, "%.*s%s%s", (int)(q + 1 - text), text, val, e);
		return out;
	}
	return NULL;
}

/*
 * With --dtype, config.json's torch_dtype (and a top-level "dtype", as
 * newer releases write) follows the weights.  The file is edited in place
 * so every other byte stays as the model's authors wrote it.
 */
static enum wshard_err write_config(struct convert *cv, const char *dst,
				    struct wshard_error *err)
{
	static const struct { enum wshard_dtype dt; const char *name; } names[] = {
		{ WSHARD_BF16, "bfloat16" }, { WSHARD_F16, "float16" }, { WSHARD_F32, "float32" },
	};
	static const char *const keys[] = { "torch_dtype", "dtype" };
	json_t *cfg = cv->plan->cat->config.json;
	const char *want = NULL;
	char *text = NULL, *next;
	size_t i, len;
	enum wshard_err rc;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].dt == cv->plan->opt.dtype)
			want = names[i].name;
	rc = wshard_catalog_slurp(cv->plan->cat, "config.json", &text, &len, err);
	if (rc)
		return rc;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *old = json_string_value(json_object_get(cfg, keys[i]));

		if (!old)
			continue;
		next = replace_value(text, keys[i], old, want);
		if (!next) {
			free(text);
			return wshard_error_set(err, WSHARD_EINVAL,
						"cannot update \"%s\" in '%s/config.json'", keys[i],
						cv->plan->cat->dir);
		}
		free(text);
		text = next;
	}
	if (!json_object_get(cfg, "torch_dtype") && !json_object_get(cfg, "dtype")) {
		/* none to edit: add torch_dtype after the opening brace */
		const char *brace = strchr(text, '{');

		next = brace ? malloc(strlen(text) + 64) : NULL;
		if (next)
			sprintf(next, "%.*s\"torch_dtype\": \"%s\",%s", (int)(brace + 1 - text), text,
				want, brace + 1);
		free(text);
		text = next;
		if (!text)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	rc = wshard_write_file(dst, text, strlen(text), file_flags(cv), err);
	free(text);
	return rc;
}

static enum wshard_err copy_extras(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_catalog *cat = cv->plan->cat;
	size_t i;
	enum wshard_err rc = WSHARD_OK;

	for (i = 0; i < cat->nextra && !rc; i++) {
		char *dst = wshard_path_join(cv->run->out_dir, cat->extra[i]);

		if (!dst)
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		else if (cv->plan->opt.has_dtype && !strcmp(cat->extra[i], "config.json"))
			rc = write_config(cv, dst, err);
		else
			rc = wshard_catalog_copy_extra(cat, i, dst, file_flags(cv), err);
		free(dst);
		if (!rc)
			cv->ncopied = i + 1;
	}
	return rc;
}

/* On failure, the non-weight files this run copied go too. */
static void discard_extras(struct convert *cv)
{
	size_t i;

	for (i = 0; i < cv->ncopied; i++) {
		char *dst = wshard_path_join(cv->run->out_dir, cv->plan->cat->extra[i]);

		if (dst)
			unlink(dst);
		free(dst);
	}
	cv->ncopied = 0;
}

/* The manifest as process 0 assembles it. */
struct manifest_parts {
	json_t *doc;		/* all but the ranks' entries */
	char *all;		/* each process's entries, one NUL-terminated string each */
	size_t *lens;		/* bytes gathered from each process */
	const char **text;	/* rank r's entry, in all */
	size_t *len;
};

static void manifest_parts_free(struct manifest_parts *mp)
{
	json_decref(mp->doc);
	free(mp->all);
	free(mp->lens);
	free(mp->text);
	free(mp->len);
	memset(mp, 0, sizeof(*mp));
}

/*
 * Gathers every process's rank entries (printed, a rank at a time) to
 * process 0, which copies the non-weight files and builds the rest of the
 * manifest (without "archives").
 */
static enum wshard_err build_manifest(struct convert *cv, struct manifest_parts *mp,
				      struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	char *mine = NULL;
	size_t mine_len = 0, off = 0;
	enum wshard_err rc = WSHARD_OK;
	int r, p;

	for (r = cv->proc; r < plan->tp; r += cv->nprocs) {
		size_t len;
		char *t = manifest_rank_text(plan, r, &cv->ranks[r].ck, &len);
		char *m = t ? realloc(mine, mine_len + len + 1) : NULL;

		if (!m) {
			free(t);
			wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
			break;
		}
		mine = m;
		memcpy(mine + mine_len, t, len + 1);	/* with its NUL */
		mine_len += len + 1;
		free(t);
	}
	if (cv->nprocs == 1 && mine) {	/* nothing to gather: no second copy */
		mp->all = mine;
		mp->lens = malloc(sizeof(*mp->lens));
		if (mp->lens)
			mp->lens[0] = mine_len;
		else
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	} else {
		rc = wshard_comm_gather_bytes(cv->comm, mine ? mine : "", mine_len, &mp->all,
					      &mp->lens, err);
		free(mine);
	}
	/* a process that could not print its entries fails them all here */
	wshard_comm_agree(cv->comm, err);
	if (rc || cv->proc != 0 || err->code)
		return err->code;
	mp->text = calloc((size_t)plan->tp, sizeof(*mp->text));
	mp->len = calloc((size_t)plan->tp, sizeof(*mp->len));
	if (!mp->text || !mp->len)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
	/* process p sent ranks p, p + nprocs, ... in that order */
	for (p = 0; p < cv->nprocs; p++) {
		size_t end = off + mp->lens[p];

		for (r = p; r < plan->tp && off < end; r += cv->nprocs) {
			mp->text[r] = mp->all + off;
			mp->len[r] = strlen(mp->text[r]);
			off += mp->len[r] + 1;
		}
		off = end;
	}
	for (r = 0; r < plan->tp; r++)
		if (!mp->text[r])
			return wshard_error_set(err, WSHARD_EIO,
						"internal: no manifest entry for rank %d", r);
	rc = copy_extras(cv, err);
	if (rc)
		return rc;
	mp->doc = manifest_doc(plan, cv->run->validate, cv->nprocs,
			       cv->run->proc_bytes_read, !cv->run->no_sync);
	if (!mp->doc)
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
	return err->code;
}

/*
 * Packs rank r: the copied files, its parts in order, and the manifest
 * last (as in OUT, where its presence means the rest is complete).  The
 * parts must still hash to the checksums taken when they were validated.
 */
static enum wshard_err pack_rank(struct convert *cv, int r, const char *manifest,
				 size_t manifest_len, struct wshard_error *err)
{
	const struct wshard_rank_plan *rp = &cv->plan->ranks[r];
	const struct wshard_catalog *cat = cv->plan->cat;
	struct rank_out *ro = &cv->ranks[r];
	size_t n = cat->nextra + rp->nfiles + 1, i, k = 0;
	struct arcout_entry *ents = calloc(n, sizeof(*ents));
	char **paths = calloc(n, sizeof(*paths));
	char *path = archive_path(cv, r);
	enum wshard_err rc = WSHARD_OK;

	if (!ents || !paths || !path) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < cat->nextra; i++, k++) {
		ents[k].name = cat->extra[i];
		ents[k].path = paths[k] = wshard_path_join(cv->run->out_dir, cat->extra[i]);
	}
	for (i = 0; i < rp->nfiles; i++, k++) {
		ents[k].name = rp->files[i].name;
		ents[k].path = paths[k] = wshard_path_join(cv->run->out_dir, rp->files[i].name);
		ents[k].checksum = ro->ck.file[i];
	}
	ents[k].name = WSHARD_MANIFEST;
	ents[k].buf = manifest;
	ents[k].len = manifest_len;
	for (i = 0; i + 1 < n; i++)
		if (!paths[i]) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			goto out;
		}
	rc = arcout_write(path, cv->run->archive, ents, n, cv->plan->opt.checksum,
			  file_flags(cv), &ro->archive_size, ro->archive_ck, err);
	if (rc)
		goto out;
	ro->archived = true;
	/* --archive-only: the rank's files go as soon as its archive is complete */
	for (i = cat->nextra; cv->run->archive_only && i + 1 < n && !rc; i++)
		if (unlink(paths[i]) < 0 && errno != ENOENT)
			rc = wshard_error_set(err, WSHARD_EIO, "cannot remove '%s': %s", paths[i],
					      strerror(errno));
out:
	for (i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
	free(ents);
	free(path);
	return rc;
}

/* --archive-only, process 0: the copied files, now in every archive, go. */
static enum wshard_err remove_extras(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_catalog *cat = cv->plan->cat;
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	for (i = 0; i < cat->nextra && !rc; i++) {
		char *path = wshard_path_join(cv->run->out_dir, cat->extra[i]);

		if (!path)
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		else if (unlink(path) < 0 && errno != ENOENT)
			rc = wshard_error_set(err, WSHARD_EIO, "cannot remove '%s': %s", path,
					      strerror(errno));
		free(path);
	}
	return rc ? rc : wshard_fsync_dir(cv->run->out_dir, err);
}

/* Process 0 lists the gathered archives, by rank, under "archives". */
static enum wshard_err list_archives(struct convert *cv, json_t *doc, const char *all,
				     const size_t *lens, struct wshard_error *err)
{
	json_t *list = json_array();
	size_t off = 0, i;
	json_t *v;
	int p;

	for (i = 0; list && i < (size_t)cv->plan->tp; i++)
		json_array_append_new(list, json_null());
	for (p = 0; list && p < cv->nprocs; p++) {
		json_t *part = json_loadb(all + off, lens[p], 0, NULL);

		off += lens[p];
		json_array_foreach(part, i, v) {
			json_array_set(list, (size_t)json_integer_value(json_object_get(v, "rank")), v);
			cv->run->archive_bytes += (uint64_t)json_integer_value(json_object_get(v, "size"));
		}
		json_decref(part);
	}
	if (!list || json_object_set_new(doc, "archives", list) < 0)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
	return WSHARD_OK;
}

/*
 * --archive: process 0 broadcasts the manifest (without "archives"), every
 * process packs its ranks, and process 0 gathers their names, sizes and
 * checksums into doc.  Every process returns the same result.
 */
static enum wshard_err archive_ranks(struct convert *cv, struct manifest_parts *mp,
				     struct wshard_error *err)
{
	char *text = NULL, *inner = NULL, *all = NULL;
	size_t text_len = 0, inner_len = 0, *lens = NULL;
	json_t *mine = NULL;
	int r;

	if (cv->proc == 0 && !err->code && !(text = manifest_text(mp->doc, mp->text, mp->len,
								     cv->plan->tp, &text_len)))
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory writing the manifest");
	if (wshard_comm_agree(cv->comm, err) ||
	    wshard_comm_bcast_bytes(cv->comm, text, text_len, &inner, &inner_len, err))
		goto out;
	for (r = cv->proc; r < cv->plan->tp && !err->code; r += cv->nprocs)
		pack_rank(cv, r, inner, inner_len, err);
	if (wshard_comm_agree(cv->comm, err))
		goto out;
	mine = json_array();
	for (r = cv->proc; mine && r < cv->plan->tp; r += cv->nprocs) {
		char name[64];

		wshard_archive_name(name, sizeof(name), r, cv->run->archive);
		json_array_append_new(mine, json_pack("{s:i,s:s,s:I,s:s}", "rank", r, "name", name,
						      "size", (json_int_t)cv->ranks[r].archive_size,
						      "checksum", cv->ranks[r].archive_ck));
	}
	free(text);
	text = mine ? json_dumps(mine, JSON_COMPACT) : NULL;
	if (!text) {
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
		text = strdup("[]");
	}
	if (!wshard_comm_gather_bytes(cv->comm, text ? text : "[]", text ? strlen(text) : 2,
				      &all, &lens, err) && cv->proc == 0 && !err->code)
		list_archives(cv, mp->doc, all, lens, err);
	if (cv->proc == 0 && cv->run->archive_only && !err->code)
		remove_extras(cv, err);
	wshard_comm_agree(cv->comm, err);
out:
	json_decref(mine);
	free(text);
	free(inner);
	free(all);
	free(lens);
	return err->code;
}

struct manifest_out {
	struct wshard_file *f;
	uint64_t off;
	struct wshard_error *err;
};

static bool manifest_out(void *ctx, const char *buf, size_t len)
{
	struct manifest_out *mo = ctx;

	if (wshard_file_pwrite(mo->f, buf, len, mo->off, mo->err))
		return false;
	mo->off += len;
	return true;
}

/* Process 0 writes wshard.json, after the archives when there are any. */
static enum wshard_err write_manifest(struct convert *cv, struct wshard_error *err)
{
	struct manifest_parts mp = { 0 };
	struct manifest_out mo = { 0 };
	char *path = NULL;
	enum wshard_err rc;

	build_manifest(cv, &mp, err);
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
	path = wshard_path_join(cv->run->out_dir, WSHARD_MANIFEST);
	if (!path) {
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory writing the manifest");
		goto out;
	}
	/* printed straight into the file: the text is never all in memory */
	if (wshard_file_create(&mo.f, path, file_flags(cv), err))
		goto out;
	mo.err = err;
	rc = manifest_print(mp.doc, mp.text, mp.len, cv->plan->tp, manifest_out, &mo);
	if (rc == WSHARD_ENOMEM)
		wshard_error_set(err, rc, "out of memory writing the manifest");
	if (rc)
		wshard_file_abort(mo.f);
	else
		wshard_file_commit(mo.f, err);
out:
	manifest_parts_free(&mp);
	free(path);
	return err->code;
}

/* ------------------------------------------------------------------ */

/*
 * For tests of concurrency and of a source changing under us: with
 * WSHARD_TEST_HOLD=PATH, wait (up to a minute) until PATH no longer exists,
 * holding OUT's lock, before writing anything.
 */
static void test_hold(void)
{
	const char *hold = getenv("WSHARD_TEST_HOLD");
	int i;

	for (i = 0; hold && *hold && i < 6000 && access(hold, F_OK) == 0; i++)
		usleep(10000);
}

void wshard_run_release(struct wshard_run *run)
{
	if (!run)
		return;
	free(run->proc_bytes_read);
	run->proc_bytes_read = NULL;
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
	struct stream_sink sink = {
		.put = write_put, .busy = write_busy, .ctx = &cv, .threadsafe = true,
	};
	struct seal_jobs jobs = { 0 };
	struct stream_stats stats;
	uint64_t totals[3];
	double t0, t1;
	int r;
	enum wshard_err rc;

	run->nprocs = cv.nprocs;
	if (cv.nprocs > plan->tp)
		return wshard_error_set(err, WSHARD_EUSAGE,
					"%d MPI processes for --tp %d: use at most one process per rank",
					cv.nprocs, plan->tp);
	pthread_mutex_init(&cv.seal_lock, NULL);
	pthread_cond_init(&cv.seal_cond, NULL);
	cv.block = seal_chunk(plan);
	/*
	 * WSHARD_BENCH_NO_CHECKSUMS: scripts/bench's baseline, what convert
	 * costs without any checksum (the manifest's are then empty, and
	 * verify refuses the output).  Not for anything else.
	 */
	cv.no_checksums = getenv("WSHARD_BENCH_NO_CHECKSUMS") != NULL;
	cv.hot = wshard_checksum_composable(plan->opt.checksum) && !cv.no_checksums;
	cv.ranks = calloc((size_t)plan->tp, sizeof(*cv.ranks));
	run->proc_bytes_read = calloc((size_t)cv.nprocs, sizeof(uint64_t));
	if (!cv.ranks || !run->proc_bytes_read)
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!err->code)
		open_validator(&cv, err);
	if (cv.proc == 0 && !err->code)
		prepare_out(&cv, err);
	if (wshard_comm_agree(comm, err))
		goto out;
	test_hold();
	open_rank_files(&cv, err);
	if (wshard_comm_agree(comm, err))
		goto out;
	t0 = wshard_seconds();
	rc = seal_start(&cv, &jobs, err);
	if (!rc)
		rc = stream_run(plan, comm, &sink, run->progress, run->progress_ctx, &stats, err);
	t1 = wshard_seconds();
	seal_finish(&cv, &jobs, rc == WSHARD_OK, err);
	run->stream_seconds = t1 - t0;
	run->seal_seconds = wshard_seconds() - t1;
	if (rc || wshard_comm_agree(comm, err))
		goto out;
	run->proc_bytes_read[cv.proc] = stats.bytes_read;
	if (wshard_comm_sum_u64(comm, run->proc_bytes_read, (size_t)cv.nprocs, err))
		goto out;
	totals[0] = stats.bytes_read;
	totals[1] = stats.bytes_put;
	totals[2] = run->bytes_validated;
	if (wshard_comm_sum_u64(comm, totals, 3, err))
		goto out;
	run->bytes_read = totals[0];
	run->bytes_written = totals[1];
	run->bytes_validated = totals[2];
	write_manifest(&cv, err);
	wshard_comm_agree(comm, err);
out:
	if (err->code) {
		discard_ranks(&cv);
		discard_extras(&cv);
	}
	release_lock(&cv);
	wshard_validator_close(cv.v);
	for (r = 0; cv.ranks && r < plan->tp; r++) {
		free(cv.ranks[r].files);
		if (cv.ranks[r].left)	/* its lock was initialised with it */
			pthread_mutex_destroy(&cv.ranks[r].write_lock);
		free(cv.ranks[r].left);
		free(cv.ranks[r].crc);
		free(cv.ranks[r].ck.file);
		free(cv.ranks[r].ck.tensor);
	}
	free(cv.ranks);
	pthread_cond_destroy(&cv.seal_cond);
	pthread_mutex_destroy(&cv.seal_lock);
	return err->code;
}
