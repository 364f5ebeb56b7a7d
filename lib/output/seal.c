/*
 * seal.c - what makes a rank file final: every block round-tripped
 * through a validator as it is written, each part's checksums (composed
 * from what the writes left with CRC-64/NVME, else read back in order
 * while the bytes are still in cache), then the commit that syncs and
 * renames it.  Sealing threads run beside the stream, each waiting for
 * its part: for the tensors in file order when it reads them back, for
 * the whole part when the checksums compose.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wshard.h"
#include "base/util.h"
#include "base/hash.h"
#include "base/fileio.h"
#include "base/comm.h"
#include "base/hooks.h"
#include "convert.h"
#include "base/crc64.h"
#include "base/validate.h"

/*
 * Bytes validated, checksummed and written in one go, and read back at a
 * time when sealing: about half an L2.
 */
#define SEAL_BLOCK ((size_t)256 << 10)

/* s (n bytes) at d[*at], as far as cap - 1 bytes hold */
static void label_add(char *d, size_t cap, size_t *at, const char *s, size_t n)
{
	n = WSHARD_MIN(n, cap - 1 - *at);
	memcpy(d + *at, s, n);
	*at += n;
}

/*
 * Formatted whenever a thread's pieces move to another tensor, which for
 * 100k small tensors made snprintf 3% of a convert.
 */
void seal_label(char *d, size_t cap, int rank, const char *name)
{
	char num[WSHARD_UTOA_MAX], *end = num + sizeof(num);
	const char *r = wshard_utoa((unsigned)rank, end);
	size_t at = 0;

	label_add(d, cap, &at, "rank ", 5);
	label_add(d, cap, &at, r, (size_t)(end - r));
	label_add(d, cap, &at, " tensor '", 9);
	label_add(d, cap, &at, name, strlen(name));
	label_add(d, cap, &at, "'", 1);
	d[at] = '\0';
}

enum wshard_err seal_slot_validator(struct convert *cv, unsigned slot,
				    struct wshard_validator **out_v,
				    struct wshard_error *err)
{
	bool gpu;

	*out_v = cv->vs[slot];
	if (*out_v || !cv->v)
		return WSHARD_OK;
	gpu = cv->gpu_chunk != 0;
	if (wshard_validator_open(&cv->vs[slot], gpu ? WSHARD_VALIDATE_GPU : WSHARD_VALIDATE_HOST,
				  wshard_comm_local_rank(cv->comm),
				  gpu ? cv->gpu_chunk : cv->block, NULL, 0, err))
		return err->code;
	*out_v = cv->vs[slot];
	return WSHARD_OK;
}

enum wshard_err seal_check_block(struct convert *cv, struct wshard_validator *v,
				 unsigned slot, const char *p, size_t n, uint64_t off,
				 uint64_t *raw, struct wshard_error *err)
{
	if (v && wshard_validator_check(v, p, n, cv->what[slot].text, off, err))
		return err->code;
	if (cv->hot)
		*raw = wshard_crc64_raw(*raw, p, n);
	return WSHARD_OK;
}

void seal_tensor_done(struct convert *cv)
{
	pthread_mutex_lock(&cv->seal_lock);
	pthread_cond_broadcast(&cv->seal_cond);
	pthread_mutex_unlock(&cv->seal_lock);
}

/*
 * Waits until *left (what is unwritten: `unit` of `name`, of rank r) is
 * 0, marking *awaited first (see write_put).  Returns WSHARD_OK, or an
 * error once the stream has ended without it: an internal one if the
 * stream succeeded (the plan and the stream disagree), else one that
 * the stream's own error will take precedence over.
 */
static enum wshard_err wait_for(struct convert *cv, int r, uint64_t *left,
				unsigned char *awaited, const char *unit, const char *name,
				struct wshard_error *err)
{
	bool ok;

	if (__atomic_load_n(left, __ATOMIC_ACQUIRE) == 0)
		return WSHARD_OK;
	pthread_mutex_lock(&cv->seal_lock);
	__atomic_store_n(awaited, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(left, __ATOMIC_SEQ_CST) != 0 && !cv->stream_over)
		pthread_cond_wait(&cv->seal_cond, &cv->seal_lock);
	ok = __atomic_load_n(left, __ATOMIC_ACQUIRE) == 0;
	pthread_mutex_unlock(&cv->seal_lock);
	if (ok)
		return WSHARD_OK;
	if (cv->stream_ok)
		return wshard_error_set(err, WSHARD_EIO,
					"internal: %llu %s '%s' of rank %d were never written",
					(unsigned long long)*left, unit, name, r);
	return wshard_error_set(err, WSHARD_EIO, "sealing stopped: the stream failed");
}

enum wshard_err seal_wait_tensor(struct convert *cv, int r, size_t i,
				 struct wshard_error *err)
{
	return wait_for(cv, r, &cv->ranks[r].left[i], &cv->ranks[r].awaited[i],
			"bytes of tensor", cv->plan->ranks[r].tensors[i].name, err);
}

/* Waits until every tensor of part p of rank r is written (wait_for). */
static enum wshard_err wait_part(struct convert *cv, int r, size_t p,
				 struct wshard_error *err)
{
	return wait_for(cv, r, &cv->ranks[r].part_left[p], &cv->ranks[r].part_awaited[p],
			"tensors of", cv->plan->ranks[r].files[p].name, err);
}

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

	/* one wake-up for the part: composing needs no order */
	rc = wait_part(cv, r, part, err);
	if (rc)
		return rc;
	for (i = of->first; i < of->first + of->count; i++) {
		const struct wshard_out_tensor *t = &rp->tensors[i];
		uint64_t crc;

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
	 * way, and a mapping of a part keeps whole large folios resident,
	 * growing with the model, where one buffer stays flat.
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

		rc = seal_wait_tensor(cv, r, i, err);
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
	enum wshard_err rc;

	if (cv->no_checksums)
		rc = wait_part(cv, r, part, err);
	else if (cv->hot)
		rc = sum_part(cv, r, part, report, err);	/* waits for the part */
	else
		rc = read_back_part(cv, r, part, buf, report, err);
	if (rc)
		return rc;
	rc = wshard_file_commit(ro->files[part], err);
	ro->files[part] = NULL;
	return rc;
}

/* SEAL_BLOCK bytes, less with a small --max-memory. */
size_t seal_chunk(const struct wshard_plan *plan)
{
	return (size_t)WSHARD_MIN(WSHARD_MAX(plan->opt.max_memory / 8, 1 << 16), SEAL_BLOCK);
}

/*
 * The GPU validators' slot: 1/64 of --max-memory (each holds eight
 * pinned buffers of it, four slots in flight, and each stream thread has
 * one), within [SEAL_BLOCK, 8 MiB].
 */
static size_t gpu_chunk(const struct wshard_plan *plan)
{
	return (size_t)WSHARD_MIN(WSHARD_MAX(plan->opt.max_memory / 64, SEAL_BLOCK),
				  (size_t)8 << 20);
}

enum wshard_err seal_open_validator(struct convert *cv, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	enum wshard_validate_mode mode = cv->run->validate;
	size_t chunk = gpu_chunk(cv->plan);

	if (mode == WSHARD_VALIDATE_HOST)
		chunk = cv->block;
	if (mode != WSHARD_VALIDATE_OFF)
		rc = wshard_validator_open(&cv->v, mode, wshard_comm_local_rank(cv->comm), chunk,
					   cv->run->notice, sizeof(cv->run->notice), err);
	if (cv->v && strncmp(wshard_validator_backend(cv->v), "host", 4) != 0)
		cv->gpu_chunk = chunk;
	else if (cv->v && chunk != cv->block) {
		/* auto mode fell back to the host: its blocks, not the GPU's */
		wshard_validator_close(cv->v);
		cv->v = NULL;
		rc = wshard_validator_open(&cv->v, WSHARD_VALIDATE_HOST,
					   wshard_comm_local_rank(cv->comm), cv->block,
					   NULL, 0, err);
	}
	cv->vs[0] = cv->v;
	snprintf(cv->run->validate_backend, sizeof(cv->run->validate_backend), "%s",
		 cv->v ? wshard_validator_backend(cv->v) : "off");
	return rc;
}

/*
 * Bytes the validators checked, and closes those the stream threads
 * opened; first the checks they still hold batched go through (the first
 * difference or failure goes to *e, unless it has one already).
 */
static uint64_t close_validators(struct convert *cv, struct wshard_error *e)
{
	uint64_t total = 0, bytes;
	double secs;
	size_t i;

	for (i = 0; i < STREAM_SLOTS; i++) {
		struct wshard_error fe = { 0 };

		if (!cv->vs[i])
			continue;
		if (wshard_validator_flush(cv->vs[i], &fe) && !e->code)
			*e = fe;
		wshard_validator_stats(cv->vs[i], &bytes, &secs);
		total += bytes;
		if (cv->vs[i] != cv->v)
			wshard_validator_close(cv->vs[i]);
		cv->vs[i] = NULL;
	}
	return total;
}


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
	size_t n = ((size_t)cv->plan->nranks - (size_t)cv->proc + (size_t)cv->nprocs - 1) /
		   (size_t)cv->nprocs;

	/* injected faults stop at a fixed point: one thread, parts in order */
	if (wshard_hooks_get()->fault)
		n = 1;
	return WSHARD_MAX(1, WSHARD_MIN(WSHARD_MIN(n, njobs), SEAL_THREADS_MAX));
}

enum wshard_err seal_start(struct convert *cv, struct seal_jobs *j,
			   struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	size_t f, n = 0, maxparts = 0, nt;
	int r;

	j->cv = cv;
	pthread_mutex_init(&j->lock, NULL);
	for (r = cv->proc; r < plan->nranks; r += cv->nprocs) {
		n += plan->ranks[r].nfiles;
		maxparts = WSHARD_MAX(maxparts, plan->ranks[r].nfiles);
		cv->seal_total += plan->ranks[r].bytes;
	}
	j->rank = calloc(n + 1, sizeof(*j->rank));
	j->part = calloc(n + 1, sizeof(*j->part));
	if (!j->rank || !j->part)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (f = 0; f < maxparts; f++)
		for (r = cv->proc; r < plan->nranks; r += cv->nprocs)
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

enum wshard_err seal_finish(struct convert *cv, struct seal_jobs *j, bool stream_ok,
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
	cv->run->bytes_validated = close_validators(cv, &j->err);
	cv->run->state->timings.seal_cpu_seconds = j->cpu_seconds;
	free(j->rank);
	free(j->part);
	j->rank = NULL;
	j->part = NULL;
	if (j->err.code && !err->code)
		return wshard_error_set(err, j->err.code, "%s", j->err.msg);
	return err->code;
}
