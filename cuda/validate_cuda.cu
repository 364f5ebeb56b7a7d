/*
 * validate_cuda.cu - the CUDA backend of the round trip.
 *
 * Each chunk is copied into pinned staging memory, sent to the device,
 * checksummed there by a kernel, and copied back into a second pinned
 * buffer; the host then compares the returned bytes with the original and
 * the device's checksum with its own.  Two slots, each with its own
 * stream and buffers, alternate: while the device copies and checksums
 * chunk k, the host compares chunk k-1's result and stages chunk k+1.
 * The host's share (staging with its checksum, and the comparison) is the
 * round trip's bottleneck: one core moves a few GB/s where the copy
 * engines move tens, so it is split over a few threads (validate_pool.cu).
 *
 * A checkpoint of many small tensors (hundreds of experts) would pay the
 * device's latency once per tensor (a synchronisation, five queued calls)
 * for a few hundred KiB each.  Small checks are batched instead: each is
 * staged at the next 8-byte boundary of a slot's buffer (zero padding adds
 * nothing to the sum) with its name and offset, and the slot goes through
 * the device once full, or at wshard_vcuda_flush.  The comparison of a
 * batch is against the staged copy, since the callers' buffers are gone
 * by then; the device's checksum against the host's, taken from the
 * callers' bytes, covers the staging copy itself.
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

#define NSLOTS 2
/* One check staged in a batch: where, and what to call it in an error. */
struct entry {
	size_t off, len;		/* in the slot's stage */
	uint64_t base;			/* the check's base */
	size_t what;			/* offset of its name in the slot's names */
};

struct slot {
	unsigned char *stage;		/* pinned: bytes on their way in */
	unsigned char *ret;		/* pinned: bytes that came back */
	unsigned char *dbuf;		/* device copy */
	unsigned long long *dsum;	/* device: sum of word contributions */
	unsigned long long *hsum;	/* pinned: that sum, copied back */
	cudaStream_t stream;
	bool busy;			/* holds a chunk not yet compared */
	size_t off, n;			/* the chunk, in the check's buffer */
	uint64_t want;			/* the host's checksum of it */
	/* a batch of small checks (nent > 0): compared against stage */
	struct entry *ent;
	size_t nent, ent_cap;
	char *names;
	size_t names_len, names_cap;
	uint64_t batch_sum;		/* word contributions staged so far */
	size_t fault;			/* stage offset to damage, or SIZE_MAX */
};

struct wshard_vcuda {
	int device;
	int max_blocks;
	size_t chunk;
	struct slot slot[NSLOTS];
	struct pool pool;
	struct slot *filling;		/* the batch being staged, or NULL */
	int next;			/* the slot the next batch takes */
};

/* Checks of at most this many bytes (of a chunk) are batched. */
#define BATCH_MAX(chunk) ((chunk) / 4)

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
static bool warm_running;

static void *warm_main(void *arg)
{
	int local_rank = (int)(intptr_t)arg, count = 0;

	if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0 &&
	    cudaSetDevice((local_rank < 0 ? 0 : local_rank) % count) == cudaSuccess)
		cudaFree(0);	/* creates the primary context */
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
	c->chunk = chunk_bytes;
	if (FAILED(cudaDeviceGetAttribute, &sms,
		   cudaDevAttrMultiProcessorCount, dev))
		goto out;
	c->max_blocks = (sms > 0 ? sms : 1) * BLOCKS_PER_SM;
	pool_open(&c->pool);
	for (i = 0; i < NSLOTS; i++) {
		rc = open_slot(&c->slot[i], dev, chunk_bytes, err);
		if (rc != WSHARD_OK)
			goto out;
	}
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
static enum wshard_err queue(struct wshard_vcuda *c, struct slot *s, size_t n,
			     struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device;
	unsigned blocks = vsum_blocks(n, c->max_blocks);
	cudaError_t e;

	/* Busy from the first queued call, so that a failure still waits. */
	s->busy = true;
	s->n = n;
	if (FAILED(cudaMemsetAsync, s->dsum, 0, sizeof(*s->dsum), s->stream) ||
	    FAILED(cudaMemcpyAsync, s->dbuf, s->stage, n,
		   cudaMemcpyHostToDevice, s->stream))
		return rc;
	if (s->fault < n)
		flip_kernel<<<1, 1, 0, s->stream>>>(s->dbuf + s->fault);
	s->fault = SIZE_MAX;
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

/* Stages n bytes at src in slot s, summing them on the way, and queues
 * their round trip; damages the device copy at fault_off of the check's
 * buffer if that falls in this chunk. */
static enum wshard_err launch(struct wshard_vcuda *c, struct slot *s,
			      const unsigned char *src, size_t n,
			      uint64_t fault_off, struct wshard_error *err)
{
	struct stage_job job;
	uint64_t sum = 0;
	int p, nparts;

	job.dst = s->stage;
	job.src = src;
	job.n = n;
	nparts = pool_run(&c->pool, stage_part, &job, n);
	for (p = 0; p < nparts; p++)
		sum += job.sum[p];
	s->want = wshard_vsum_final(sum, n);
	s->fault = fault_off >= s->off && fault_off - s->off < n ?
		   (size_t)(fault_off - s->off) : SIZE_MAX;
	return queue(c, s, n, err);
}

/* The entry of a batch (nent of them) that holds stage byte at: the last
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

/* Waits for slot s and compares its chunk of buf, or its batch with
 * what it staged. */
static enum wshard_err finish(struct wshard_vcuda *c, struct slot *s,
			      const unsigned char *buf, const char *what,
			      uint64_t base, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device;
	struct compare_job job;
	size_t nent = s->nent;
	uint64_t got;
	int p, nparts;
	cudaError_t e;

	if (!s->busy)
		return WSHARD_OK;
	s->busy = false;
	s->nent = 0;
	s->names_len = 0;
	if (FAILED(cudaStreamSynchronize, s->stream))
		return rc;
	job.orig = nent ? s->stage : buf + s->off;
	job.ret = s->ret;
	job.n = s->n;
	nparts = pool_run(&c->pool, compare_part, &job, s->n);
	for (p = 0; p < nparts; p++) {
		const struct entry *en;

		if (job.diff[p] == SIZE_MAX)
			continue;
		if (!nent)
			return wshard_error_set(err, WSHARD_EVALIDATE,
						"round trip changed byte %" PRIu64 " of %s",
						base + s->off + job.diff[p], what);
		en = entry_at(s->ent, nent, job.diff[p]);
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
	if (got != s->want && nent)
		return wshard_error_set(err, WSHARD_EVALIDATE,
					"round trip changed the checksum of %zu checks from %s on: "
					"%016" PRIx64 ", expected %016" PRIx64,
					nent, s->names, got, s->want);
	if (got != s->want)
		return wshard_error_set(err, WSHARD_EVALIDATE,
					"round trip changed the checksum of bytes %" PRIu64
					"-%" PRIu64 " of %s: %016" PRIx64 ", expected %016" PRIx64,
					base + s->off, base + s->off + s->n, what,
					got, s->want);
	return WSHARD_OK;
}

/* Sends the batch being staged on its way; the next takes the other slot. */
static enum wshard_err send_batch(struct wshard_vcuda *c, struct wshard_error *err)
{
	struct slot *s = c->filling;

	if (!s)
		return WSHARD_OK;
	c->filling = NULL;
	c->next = (c->next + 1) % NSLOTS;
	s->want = wshard_vsum_final(s->batch_sum, s->n);
	return queue(c, s, s->n, err);
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
 * Stages a small check in the batch being filled (starting one when
 * none is, once the slot's previous batch is compared, and sending the
 * batch when the check does not fit).
 */
static enum wshard_err batch_check(struct wshard_vcuda *c, const unsigned char *buf,
				   size_t len, const char *what, uint64_t base,
				   uint64_t fault_off, struct wshard_error *err)
{
	enum wshard_err rc;
	struct slot *s = c->filling;
	size_t at = s ? (s->n + 7) & ~(size_t)7 : 0;
	size_t wlen = strlen(what) + 1;
	struct entry *en;

	if (s && at + len > c->chunk) {
		rc = send_batch(c, err);
		if (rc != WSHARD_OK)
			return rc;
		s = NULL;
	}
	if (!s) {
		s = &c->slot[c->next];
		rc = finish(c, s, NULL, NULL, 0, err);
		if (rc != WSHARD_OK)
			return rc;
		s->n = 0;
		s->off = 0;
		s->batch_sum = 0;
		s->fault = SIZE_MAX;
		c->filling = s;
		at = 0;
	}
	if (!grow((void **)&s->ent, &s->ent_cap, s->nent + 1, sizeof(*s->ent)) ||
	    !grow((void **)&s->names, &s->names_cap, s->names_len + wlen, 1))
		return wshard_error_set(err, WSHARD_ENOMEM,
					"out of memory for the CUDA validator's batch");
	memset(s->stage + s->n, 0, at - s->n);
	s->batch_sum += wshard_validate_copy_sum_at(s->stage + at, buf, len, at / 8);
	if (fault_off < len)
		s->fault = at + (size_t)fault_off;
	en = &s->ent[s->nent++];
	en->off = at;
	en->len = len;
	en->base = base;
	en->what = s->names_len;
	memcpy(s->names + s->names_len, what, wlen);
	s->names_len += wlen;
	s->n = at + len;
	return WSHARD_OK;
}

/* Queued calls of every slot done, and the slots idle. */
static void drain(struct wshard_vcuda *c)
{
	int j;

	c->filling = NULL;
	for (j = 0; j < NSLOTS; j++) {
		if (c->slot[j].busy)
			cudaStreamSynchronize(c->slot[j].stream);
		c->slot[j].busy = false;
		c->slot[j].nent = 0;
		c->slot[j].names_len = 0;
	}
}

extern "C" enum wshard_err wshard_vcuda_flush(struct wshard_vcuda *c,
					      struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device, j;
	cudaError_t e;

	if (FAILED(cudaSetDevice, dev))
		return rc;
	rc = send_batch(c, err);
	/* the older batch first: it is the other slot, or the next one */
	for (j = 0; j < NSLOTS && rc == WSHARD_OK; j++)
		rc = finish(c, &c->slot[(c->next + j) % NSLOTS], NULL, NULL, 0, err);
	if (rc != WSHARD_OK)
		drain(c);
	return rc;
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
	size_t off, n, k = 0, j;
	cudaError_t e;

	if (FAILED(cudaSetDevice, dev))
		return rc;
	if (len <= BATCH_MAX(c->chunk)) {
		rc = batch_check(c, p, len, what, base, fault_off, err);
		if (rc != WSHARD_OK)
			drain(c);
		return rc;
	}
	/* A large check has both slots to itself. */
	rc = wshard_vcuda_flush(c, err);
	if (rc != WSHARD_OK)
		return rc;
	/* Slot k % 2 takes chunk k once chunk k - 2 in it is compared. */
	for (off = 0; off < len; off += n, k++) {
		struct slot *s = &c->slot[k % NSLOTS];

		n = len - off < c->chunk ? len - off : c->chunk;
		rc = finish(c, s, p, what, base, err);
		if (rc != WSHARD_OK)
			goto out;
		s->off = off;
		rc = launch(c, s, p + off, n, fault_off, err);
		if (rc != WSHARD_OK)
			goto out;
	}
	/* The last two chunks, oldest first. */
	for (j = 0; j < NSLOTS; j++) {
		rc = finish(c, &c->slot[(k + j) % NSLOTS], p, what, base, err);
		if (rc != WSHARD_OK)
			goto out;
	}

out:
	/* Leave no copy in flight into buffers the next check reuses. */
	drain(c);
	return rc;
}

extern "C" void wshard_vcuda_close(struct wshard_vcuda *c)
{
	int i;

	if (!c)
		return;
	cudaSetDevice(c->device);
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
	pool_close(&c->pool);
	free(c);
}
