/*
 * validate_cuda.cu - the CUDA backend of the round trip.
 *
 * A check's bytes are copied into a slot's pinned staging buffer, summed
 * on the way, and the slot goes to the device once full (or at a flush):
 * copied in, checksummed there by a kernel, and copied back into a second
 * pinned buffer, all queued on the slot's stream.  A thread of the
 * validator's own (the completer) waits for each slot in turn, compares
 * the bytes that came back with the staged ones and the device's checksum
 * with the host's, and frees the slot for the next bytes.  So a check
 * returns once its bytes are staged: while the caller writes them, the
 * copies, the kernel and the comparison of earlier ones go on beside it,
 * NSLOTS slots deep.  A difference is reported by a later check or by the
 * flush, naming the check it is in; nothing counts as validated before a
 * flush succeeds.
 *
 * Every check is staged at the next 64-byte boundary of the slot being
 * filled (zero padding adds nothing to the sum; the staging copy's
 * stores go around the cache) with its name and offset,
 * so that many small tensors share one trip to the device, and a large
 * one spans as many slots as it needs.  The comparison is against the
 * staged copy, since the callers' buffers are gone by then; the device's
 * checksum against the host's, taken from the callers' bytes, covers the
 * staging copy itself.  Staging and comparing are the host's share and
 * the round trip's bottleneck (a core moves a few GB/s where the copy
 * engines move tens): large pieces of either are split over a few
 * threads (validate_pool.cu).
 *
 * Called from validate_host.c through the plain C functions of
 * validate_cuda.h; nothing here prints or exits.
 */
#include <cuda_runtime.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern "C" {
#include "validate_sum_host.h"
}
#include "validate_cuda.h"
#include "validate_pool.h"
#include "validate_kernel.cuh"

/* Slots in flight: staged, on the device, or being compared. */
#define NSLOTS 4
/* One check (or the part of one) staged in a slot: where, and its name. */
struct entry {
	size_t off, len;		/* in the slot's stage */
	uint64_t base;			/* the check's base, plus the part's offset */
	size_t what;			/* offset of its name in the slot's names */
};

struct slot {
	unsigned char *stage;		/* pinned: bytes on their way in */
	unsigned char *ret;		/* pinned: bytes that came back */
	unsigned char *dbuf;		/* device copy */
	unsigned long long *dsum;	/* device: sum of word contributions */
	unsigned long long *hsum;	/* pinned: that sum, copied back */
	cudaStream_t stream;
	size_t n;			/* bytes staged */
	uint64_t sum;			/* word contributions staged so far */
	struct entry *ent;
	size_t nent, ent_cap;
	char *names;
	size_t names_len, names_cap;
	size_t fault;			/* stage offset to damage, or SIZE_MAX */
};

struct wshard_vcuda {
	int device;
	int max_blocks;
	size_t chunk;
	struct slot slot[NSLOTS];
	struct pool stage_pool;		/* the caller's helpers */
	struct pool compare_pool;	/* the completer's */
	/*
	 * Slot k % NSLOTS is the k-th sent; the caller fills slot
	 * sent % NSLOTS once sent - done < NSLOTS.  Under lock: sent, done,
	 * quit and the first failure.
	 */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned long sent, done;
	bool filling;			/* slot sent % NSLOTS holds bytes */
	bool quit;
	bool failed;
	struct wshard_error first;	/* the first failure, once failed */
	pthread_t completer;
	bool completer_running;
};

/* The injected fault: one byte of device memory changed after the copy
 * in, so that both the checksum and the bytes brought back differ. */
__global__ void flip_kernel(unsigned char *p)
{
	*p ^= 0xff;
}

static enum wshard_err cuda_fail(struct wshard_error *err, int device,
				 const char *call, cudaError_t e)
{
	return wshard_error_set(err, WSHARD_EIO, "%s failed on cuda:%d: %s",
				call, device, cudaGetErrorString(e));
}

/*
 * Evaluates the CUDA call fn(...) into e; true (and rc, err set naming
 * fn) when it failed.  Needs e, rc, err and dev in scope.
 */
#define FAILED(fn, ...)                                                     \
	((e = fn(__VA_ARGS__)) != cudaSuccess &&                            \
	 (rc = cuda_fail(err, dev, #fn, e)) != WSHARD_OK)

/* Why cudaGetDeviceCount found nothing to use, as ENODEV. */
static enum wshard_err no_device(struct wshard_error *err, cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
	case cudaErrorNoDevice:
		return wshard_error_set(err, WSHARD_ENODEV,
					"no CUDA device visible");
	case cudaErrorInsufficientDriver:
	case cudaErrorStubLibrary:
	case cudaErrorSystemDriverMismatch:
	case cudaErrorCompatNotSupportedOnDevice:
		return wshard_error_set(err, WSHARD_ENODEV,
					"no CUDA driver: %s",
					cudaGetErrorString(e));
	default:
		return wshard_error_set(err, WSHARD_ENODEV,
					"no usable CUDA device: %s",
					cudaGetErrorString(e));
	}
}

static enum wshard_err open_slot(struct slot *s, int dev, size_t chunk,
				 struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	cudaError_t e;

	s->fault = SIZE_MAX;
	if (FAILED(cudaStreamCreateWithFlags, &s->stream,
		   cudaStreamNonBlocking) ||
	    FAILED(cudaMallocHost, (void **)&s->stage, chunk) ||
	    FAILED(cudaMallocHost, (void **)&s->ret, chunk) ||
	    FAILED(cudaMallocHost, (void **)&s->hsum, sizeof(*s->hsum)) ||
	    FAILED(cudaMalloc, (void **)&s->dbuf, chunk) ||
	    FAILED(cudaMalloc, (void **)&s->dsum, sizeof(*s->dsum)))
		return rc;
	return WSHARD_OK;
}

/*
 * CUDA's start (the driver, the device's primary context) costs a third
 * of a second or more and is the same for every validator of the
 * process: a thread does it while the caller plans.  Errors are not kept:
 * wshard_vcuda_open meets them again and reports them.
 */
static pthread_t warm_thread;
static bool warm_running, warm_over;	/* warm_over: atomic */

static void *warm_main(void *arg)
{
	int local_rank = (int)(intptr_t)arg, count = 0;

	if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0 &&
	    cudaSetDevice((local_rank < 0 ? 0 : local_rank) % count) == cudaSuccess)
		cudaFree(0);	/* creates the primary context */
	__atomic_store_n(&warm_over, true, __ATOMIC_RELEASE);
	return NULL;
}

extern "C" void wshard_vcuda_warm(int local_rank)
{
	if (!warm_running)
		warm_running = pthread_create(&warm_thread, NULL, warm_main,
					      (void *)(intptr_t)local_rank) == 0;
}

extern "C" void wshard_vcuda_warm_wait(void)
{
	if (warm_running)
		pthread_join(warm_thread, NULL);
	warm_running = false;
}

extern "C" bool wshard_vcuda_warm_done(void)
{
	return !warm_running || __atomic_load_n(&warm_over, __ATOMIC_ACQUIRE);
}

static void *complete_main(void *arg);

extern "C" enum wshard_err wshard_vcuda_open(struct wshard_vcuda **out_c,
					     int local_rank, size_t chunk_bytes,
					     char *backend, size_t backend_len,
					     struct wshard_error *err)
{
	struct wshard_vcuda *c = NULL;
	enum wshard_err rc = WSHARD_OK;
	cudaDeviceProp prop;
	int count = 0, sms = 0, dev, i;
	cudaError_t e;

	*out_c = NULL;
	if (backend && backend_len)
		backend[0] = '\0';
	wshard_vcuda_warm_wait();
	e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count <= 0)
		return no_device(err, e);
	dev = (local_rank < 0 ? 0 : local_rank) % count;

	/* A device that is visible but cannot be used is no device either. */
	e = cudaSetDevice(dev);
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(&prop, dev);
	if (e != cudaSuccess)
		return wshard_error_set(err, WSHARD_ENODEV,
					"cannot use CUDA device %d: %s", dev,
					cudaGetErrorString(e));

	c = (struct wshard_vcuda *)calloc(1, sizeof(*c));
	if (!c)
		return wshard_error_set(err, WSHARD_ENOMEM,
					"out of memory for the CUDA validator");
	c->device = dev;
	/* whole words, so that a slot's sum is the kernel's */
	c->chunk = chunk_bytes >= 16 ? chunk_bytes & ~(size_t)7 : 16;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pool_open(&c->stage_pool);
	pool_open(&c->compare_pool);
	if (FAILED(cudaDeviceGetAttribute, &sms,
		   cudaDevAttrMultiProcessorCount, dev))
		goto out;
	c->max_blocks = (sms > 0 ? sms : 1) * BLOCKS_PER_SM;
	for (i = 0; i < NSLOTS; i++) {
		rc = open_slot(&c->slot[i], dev, c->chunk, err);
		if (rc != WSHARD_OK)
			goto out;
	}
	if (pthread_create(&c->completer, NULL, complete_main, c) != 0) {
		rc = wshard_error_set(err, WSHARD_ENOMEM,
				      "cannot start the CUDA validator's thread");
		goto out;
	}
	c->completer_running = true;
	if (backend && backend_len)
		snprintf(backend, backend_len, "cuda:%d (%s)", dev, prop.name);

out:
	if (rc != WSHARD_OK) {
		wshard_vcuda_close(c);
		return rc;
	}
	*out_c = c;
	return WSHARD_OK;
}

/* Queues slot s's round trip of its n staged bytes: copy in, damage at
 * s->fault if set, checksum, both copied back. */
static enum wshard_err queue(struct wshard_vcuda *c, struct slot *s,
			     struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device;
	size_t n = s->n;
	unsigned blocks = vsum_blocks(n, c->max_blocks);
	cudaError_t e;

	if (FAILED(cudaMemsetAsync, s->dsum, 0, sizeof(*s->dsum), s->stream) ||
	    FAILED(cudaMemcpyAsync, s->dbuf, s->stage, n,
		   cudaMemcpyHostToDevice, s->stream))
		return rc;
	if (s->fault < n)
		flip_kernel<<<1, 1, 0, s->stream>>>(s->dbuf + s->fault);
	vsum_kernel<<<blocks, THREADS, 0, s->stream>>>(
		(const unsigned long long *)s->dbuf, n, s->dsum);
	e = cudaGetLastError();
	if (e != cudaSuccess)
		return cuda_fail(err, dev, "checksum kernel launch", e);
	if (FAILED(cudaMemcpyAsync, s->hsum, s->dsum, sizeof(*s->hsum),
		   cudaMemcpyDeviceToHost, s->stream) ||
	    FAILED(cudaMemcpyAsync, s->ret, s->dbuf, n,
		   cudaMemcpyDeviceToHost, s->stream))
		return rc;
	return WSHARD_OK;
}

/* The entry of a slot (nent of them) that holds stage byte at: the last
 * that starts at or before it. */
static const struct entry *entry_at(const struct entry *ent, size_t nent, size_t at)
{
	size_t lo = 0, hi = nent;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (ent[mid].off <= at)
			lo = mid;
		else
			hi = mid;
	}
	return &ent[lo];
}

/* On the completer: waits for slot s's round trip and compares what came
 * back with what was staged, and the device's checksum with the host's. */
static enum wshard_err finish(struct wshard_vcuda *c, struct slot *s,
			      struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device;
	struct compare_job job;
	const struct entry *en;
	uint64_t got, want;
	int p, nparts;
	cudaError_t e;

	if (FAILED(cudaStreamSynchronize, s->stream))
		return rc;
	job.orig = s->stage;
	job.ret = s->ret;
	job.n = s->n;
	nparts = pool_run(&c->compare_pool, compare_part, &job, s->n);
	for (p = 0; p < nparts; p++) {
		if (job.diff[p] == SIZE_MAX)
			continue;
		en = entry_at(s->ent, s->nent, job.diff[p]);
		if (job.diff[p] - en->off >= en->len)
			return wshard_error_set(err, WSHARD_EVALIDATE,
						"round trip changed padding byte %zu after %s",
						job.diff[p] - en->off, s->names + en->what);
		return wshard_error_set(err, WSHARD_EVALIDATE,
					"round trip changed byte %" PRIu64 " of %s",
					en->base + (job.diff[p] - en->off),
					s->names + en->what);
	}
	got = wshard_vsum_final(*s->hsum, s->n);
	want = wshard_vsum_final(s->sum, s->n);
	if (got == want)
		return WSHARD_OK;
	en = s->ent;
	if (s->nent == 1)
		return wshard_error_set(err, WSHARD_EVALIDATE,
					"round trip changed the checksum of bytes %" PRIu64
					"-%" PRIu64 " of %s: %016" PRIx64 ", expected %016" PRIx64,
					en->base, en->base + en->len, s->names, got, want);
	return wshard_error_set(err, WSHARD_EVALIDATE,
				"round trip changed the checksum of %zu checks from %s on: "
				"%016" PRIx64 ", expected %016" PRIx64,
				s->nent, s->names, got, want);
}

/* Slot s holds nothing: ready to be staged into. */
static void empty_slot(struct slot *s)
{
	s->n = 0;
	s->sum = 0;
	s->nent = 0;
	s->names_len = 0;
	s->fault = SIZE_MAX;
}

/*
 * The completer: each slot sent, in turn, waited for and compared (once
 * something failed, only waited for), then handed back empty.
 */
static void *complete_main(void *arg)
{
	struct wshard_vcuda *c = (struct wshard_vcuda *)arg;
	struct wshard_error e;
	enum wshard_err rc;
	struct slot *s;
	bool failed;

	cudaSetDevice(c->device);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (c->done == c->sent && !c->quit)
			pthread_cond_wait(&c->cond, &c->lock);
		if (c->done == c->sent)
			break;
		s = &c->slot[c->done % NSLOTS];
		failed = c->failed;
		pthread_mutex_unlock(&c->lock);
		memset(&e, 0, sizeof(e));
		if (failed) {
			cudaStreamSynchronize(s->stream);
			rc = WSHARD_OK;
		} else
			rc = finish(c, s, &e);
		empty_slot(s);
		pthread_mutex_lock(&c->lock);
		if (rc != WSHARD_OK && !c->failed) {
			c->failed = true;
			c->first = e;
		}
		c->done++;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* The first failure, if any, into *err (under c->lock). */
static enum wshard_err failure(struct wshard_vcuda *c, struct wshard_error *err)
{
	if (!c->failed)
		return WSHARD_OK;
	*err = c->first;
	return c->first.code;
}

/*
 * After a failure is reported: waits for what is in flight, drops what
 * was being staged, and leaves the validator as opened (a caller may go
 * on with other bytes).  Returns rc.
 */
static enum wshard_err recover(struct wshard_vcuda *c, enum wshard_err rc)
{
	struct slot *s = &c->slot[c->sent % NSLOTS];

	pthread_mutex_lock(&c->lock);
	while (c->done != c->sent)
		pthread_cond_wait(&c->cond, &c->lock);
	c->failed = false;
	pthread_mutex_unlock(&c->lock);
	if (c->filling) {
		empty_slot(s);
		c->filling = false;
	}
	return rc;
}

/*
 * The slot to stage into: the one being filled, else the next once the
 * completer has handed it back.  NULL (and *err set) once a round trip
 * failed.
 */
static struct slot *fill_slot(struct wshard_vcuda *c, struct wshard_error *err)
{
	struct slot *s = NULL;

	pthread_mutex_lock(&c->lock);
	while (!c->failed && c->sent - c->done >= NSLOTS)
		pthread_cond_wait(&c->cond, &c->lock);
	if (failure(c, err) == WSHARD_OK) {
		s = &c->slot[c->sent % NSLOTS];
		c->filling = true;
	}
	pthread_mutex_unlock(&c->lock);
	return s;
}

/* Sends the slot being filled to the device and on to the completer. */
static enum wshard_err send_slot(struct wshard_vcuda *c, struct wshard_error *err)
{
	struct slot *s = &c->slot[c->sent % NSLOTS];
	enum wshard_err rc;

	if (!c->filling)
		return WSHARD_OK;
	if (s->n == 0) {
		c->filling = false;
		return WSHARD_OK;
	}
	rc = queue(c, s, err);
	/* the completer waits for what was queued even after a failure */
	pthread_mutex_lock(&c->lock);
	c->filling = false;
	c->sent++;
	if (rc != WSHARD_OK && !c->failed) {
		c->failed = true;
		c->first = *err;
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Grows an array of *cap elements of size es to hold need. */
static bool grow(void **p, size_t *cap, size_t need, size_t es)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * es);
	if (!q)
		return false;
	*p = q;
	*cap = n;
	return true;
}

/*
 * Stages n bytes at src (bytes [off, off + n) of the check) at stage
 * offset at of slot s, summing them on the way, large pieces over the
 * stage pool's threads.
 */
static enum wshard_err stage(struct wshard_vcuda *c, struct slot *s, size_t at,
			     const unsigned char *src, size_t n, const char *what,
			     uint64_t base, struct wshard_error *err)
{
	size_t wlen = strlen(what) + 1;
	struct stage_job job;
	struct entry *en;
	int p, nparts;

	if (!grow((void **)&s->ent, &s->ent_cap, s->nent + 1, sizeof(*s->ent)) ||
	    !grow((void **)&s->names, &s->names_cap, s->names_len + wlen, 1))
		return wshard_error_set(err, WSHARD_ENOMEM,
					"out of memory for the CUDA validator's slot");
	memset(s->stage + s->n, 0, at - s->n);
	job.dst = s->stage + at;
	job.src = src;
	job.n = n;
	job.word0 = at / 8;
	nparts = pool_run(&c->stage_pool, stage_part, &job, n);
	for (p = 0; p < nparts; p++)
		s->sum += job.sum[p];
	en = &s->ent[s->nent++];
	en->off = at;
	en->len = n;
	en->base = base;
	en->what = s->names_len;
	memcpy(s->names + s->names_len, what, wlen);
	s->names_len += wlen;
	s->n = at + n;
	return WSHARD_OK;
}

extern "C" enum wshard_err wshard_vcuda_flush(struct wshard_vcuda *c,
					      struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device;
	cudaError_t e;

	if (FAILED(cudaSetDevice, dev))
		return rc;
	rc = send_slot(c, err);
	pthread_mutex_lock(&c->lock);
	while (c->done != c->sent)
		pthread_cond_wait(&c->cond, &c->lock);
	if (rc == WSHARD_OK)
		rc = failure(c, err);
	pthread_mutex_unlock(&c->lock);
	return rc == WSHARD_OK ? rc : recover(c, rc);
}

extern "C" enum wshard_err wshard_vcuda_check(struct wshard_vcuda *c,
					      const void *buf, size_t len,
					      const char *what, uint64_t base,
					      uint64_t fault_off,
					      struct wshard_error *err)
{
	const unsigned char *p = (const unsigned char *)buf;
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device;
	size_t off = 0, at, n;
	struct slot *s;
	cudaError_t e;

	if (len == 0)
		return WSHARD_OK;
	if (FAILED(cudaSetDevice, dev))
		return rc;
	do {
		s = fill_slot(c, err);
		if (!s)
			return recover(c, err->code);
		at = (s->n + 63) & ~(size_t)63;
		if (at >= c->chunk) {
			rc = send_slot(c, err);
			if (rc != WSHARD_OK)
				return recover(c, rc);
			continue;
		}
		n = len - off < c->chunk - at ? len - off : c->chunk - at;
		/* a piece of a check that would fit a slot of its own starts one */
		if (at && n < len - off && len - off <= c->chunk) {
			rc = send_slot(c, err);
			if (rc != WSHARD_OK)
				return recover(c, rc);
			continue;
		}
		if (fault_off >= off && fault_off - off < n)
			s->fault = at + (size_t)(fault_off - off);
		rc = stage(c, s, at, p + off, n, what, base + off, err);
		if (rc != WSHARD_OK)
			return recover(c, rc);
		off += n;
		if (s->n == c->chunk) {
			rc = send_slot(c, err);
			if (rc != WSHARD_OK)
				return recover(c, rc);
		}
	} while (off < len);
	return WSHARD_OK;
}

extern "C" void wshard_vcuda_close(struct wshard_vcuda *c)
{
	int i;

	if (!c)
		return;
	cudaSetDevice(c->device);
	if (c->completer_running) {
		pthread_mutex_lock(&c->lock);
		c->quit = true;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->completer, NULL);
	}
	for (i = 0; i < NSLOTS; i++) {
		struct slot *s = &c->slot[i];

		if (s->stream)
			cudaStreamSynchronize(s->stream);
		cudaFreeHost(s->stage);
		cudaFreeHost(s->ret);
		cudaFreeHost(s->hsum);
		cudaFree(s->dbuf);
		cudaFree(s->dsum);
		free(s->ent);
		free(s->names);
		if (s->stream)
			cudaStreamDestroy(s->stream);
	}
	pool_close(&c->stage_pool);
	pool_close(&c->compare_pool);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}
