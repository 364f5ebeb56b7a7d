/*
 * validate_cuda.cu - the CUDA backend of the round trip.
 *
 * Each chunk is copied into pinned staging memory, sent to the device,
 * checksummed there by a kernel, and copied back into a second pinned
 * buffer; the host then compares the returned bytes with the original and
 * the device's checksum with its own.  Two slots, each with its own
 * stream and buffers, alternate: while the device copies and checksums
 * chunk k, the host compares chunk k-1's result and stages chunk k+1.
 *
 * Called from validate_host.c through the plain C functions of
 * validate_cuda.h; nothing here prints or exits.
 */
#include <cuda_runtime.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "validate_host.h"
}
#include "validate_cuda.h"
#include "validate_sum.h"

#define NSLOTS 2
#define THREADS 256
#define WARPS (THREADS / 32)
/* Enough resident blocks per multiprocessor to hide memory latency. */
#define BLOCKS_PER_SM 8

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
};

struct wshard_vcuda {
	int device;
	int max_blocks;
	size_t chunk;
	struct slot slot[NSLOTS];
};

/*
 * Adds the word contributions of the len bytes at words (device memory,
 * 8-byte aligned) to *out.  Each thread sums a strided set of words, each
 * block reduces its threads' sums, and one atomicAdd per block adds it:
 * the order does not matter because the checksum is a wrapping sum.
 */
__global__ void vsum_kernel(const unsigned long long *__restrict__ words,
			    size_t len, unsigned long long *out)
{
	__shared__ unsigned long long warp_sum[WARPS];
	size_t nwords = len / 8;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long acc = 0;
	int o;

	for (; i < nwords; i += stride)
		acc += wshard_vsum_word(words[i], i);
	if (blockIdx.x == 0 && threadIdx.x == 0 && len % 8)
		acc += wshard_vsum_word(
			wshard_vsum_tail((const unsigned char *)(words + nwords),
					 len % 8),
			nwords);

	for (o = 16; o > 0; o >>= 1)
		acc += __shfl_down_sync(0xffffffffu, acc, o);
	if ((threadIdx.x & 31) == 0)
		warp_sum[threadIdx.x / 32] = acc;
	__syncthreads();
	if (threadIdx.x < 32) {
		acc = threadIdx.x < WARPS ? warp_sum[threadIdx.x] : 0;
		for (o = 16; o > 0; o >>= 1)
			acc += __shfl_down_sync(0xffffffffu, acc, o);
		if (threadIdx.x == 0)
			atomicAdd(out, acc);
	}
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

/* Queues the round trip of n bytes at src in slot s, then sums src on
 * the host while the device works. */
static enum wshard_err launch(struct wshard_vcuda *c, struct slot *s,
			      const unsigned char *src, size_t n,
			      struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device;
	size_t nwords = n / 8;
	size_t want_blocks = (nwords + THREADS - 1) / THREADS;
	unsigned blocks;
	cudaError_t e;

	blocks = (unsigned)(want_blocks == 0 ? 1 :
			    want_blocks < (size_t)c->max_blocks ? want_blocks :
			    (size_t)c->max_blocks);
	memcpy(s->stage, src, n);
	/* Busy from the first queued call, so that a failure still waits. */
	s->busy = true;
	s->n = n;
	if (FAILED(cudaMemsetAsync, s->dsum, 0, sizeof(*s->dsum), s->stream) ||
	    FAILED(cudaMemcpyAsync, s->dbuf, s->stage, n,
		   cudaMemcpyHostToDevice, s->stream))
		return rc;
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
	s->want = wshard_validate_sum(src, n);
	return WSHARD_OK;
}

/* Waits for slot s and compares its chunk of buf. */
static enum wshard_err finish(struct wshard_vcuda *c, struct slot *s,
			      const unsigned char *buf, const char *what,
			      uint64_t base, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device;
	const unsigned char *orig = buf + s->off;
	uint64_t got;
	size_t i;
	cudaError_t e;

	if (!s->busy)
		return WSHARD_OK;
	s->busy = false;
	if (FAILED(cudaStreamSynchronize, s->stream))
		return rc;
	if (memcmp(orig, s->ret, s->n) != 0) {
		for (i = 0; orig[i] == s->ret[i]; i++)
			;
		return wshard_error_set(err, WSHARD_EVALIDATE,
					"round trip changed byte %" PRIu64 " of %s",
					base + s->off + i, what);
	}
	got = wshard_vsum_final(*s->hsum, s->n);
	if (got != s->want)
		return wshard_error_set(err, WSHARD_EVALIDATE,
					"round trip changed the checksum of bytes %" PRIu64
					"-%" PRIu64 " of %s: %016" PRIx64 ", expected %016" PRIx64,
					base + s->off, base + s->off + s->n, what,
					got, s->want);
	return WSHARD_OK;
}

extern "C" enum wshard_err wshard_vcuda_check(struct wshard_vcuda *c,
					      const void *buf, size_t len,
					      const char *what, uint64_t base,
					      struct wshard_error *err)
{
	const unsigned char *p = (const unsigned char *)buf;
	enum wshard_err rc = WSHARD_OK;
	int dev = c->device;
	size_t off, n, k = 0, j;
	cudaError_t e;

	if (FAILED(cudaSetDevice, dev))
		return rc;
	/* Slot k % 2 takes chunk k once chunk k - 2 in it is compared. */
	for (off = 0; off < len; off += n, k++) {
		struct slot *s = &c->slot[k % NSLOTS];

		n = len - off < c->chunk ? len - off : c->chunk;
		rc = finish(c, s, p, what, base, err);
		if (rc != WSHARD_OK)
			goto out;
		s->off = off;
		rc = launch(c, s, p + off, n, err);
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
	for (j = 0; j < NSLOTS; j++) {
		if (c->slot[j].busy)
			cudaStreamSynchronize(c->slot[j].stream);
		c->slot[j].busy = false;
	}
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
		if (s->stream)
			cudaStreamDestroy(s->stream);
	}
	free(c);
}
