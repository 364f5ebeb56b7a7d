/*
 * load_cuda.cu - the loader's copies into device memory on the CUDA
 * runtime (base/devload.h, through the dispatch of load_host.c): a ring
 * of pinned staging slots, each with a non-blocking stream and an event,
 * kept for the process's later loads.
 *
 * The engine (PyTorch) allocates the parameters in the device's primary
 * context, which the runtime here uses too, so its device pointers are
 * valid here.  The streams are non-blocking: they do not wait for the
 * engine's default stream, so open waits once for whatever the device
 * has queued, and close waits for every copy before the engine queues
 * more.  Events block rather than spin when waited on (the threads that
 * wait are the ones that read the files).
 */
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdlib.h>

#include "load_cuda.h"

struct dslot {
	unsigned char *buf;		/* pinned, slot_bytes */
	cudaStream_t stream;
	cudaEvent_t done;		/* recorded after the slot's copies */
	bool queued;			/* done recorded, not yet waited for */
};

struct wshard_devload {
	int device;			/* -1: nothing allocated */
	size_t slot_bytes;
	size_t nslots, cap;
	struct dslot *slots;
};

/* The ring, and the lock a load holds from open to close. */
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wshard_devload ring = { -1, 0, 0, 0, NULL };

static enum wshard_err cuda_fail(struct wshard_error *err, const char *call,
				 int dev, const char *path, const char *tensor,
				 cudaError_t e)
{
	if (path && tensor)
		return wshard_error_set(err, WSHARD_EIO,
					"'%s': tensor '%s': %s failed on cuda:%d: %s",
					path, tensor, call, dev,
					cudaGetErrorString(e));
	return wshard_error_set(err, WSHARD_EIO, "%s failed on cuda:%d: %s",
				call, dev, cudaGetErrorString(e));
}

/*
 * Evaluates the CUDA call fn(...) into e; true (and rc, err set naming
 * fn, path and tensor) when it failed.  Needs e, rc, err, dev, path and
 * tensor in scope.
 */
#define FAILED(fn, ...)                                                     \
	((e = fn(__VA_ARGS__)) != cudaSuccess &&                            \
	 (rc = cuda_fail(err, #fn, dev, path, tensor, e)) != WSHARD_OK)

extern "C" bool wshard_lcuda_usable(void)
{
	int count = 0;

	return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

/* Frees the ring's slots on its device (whose work has completed). */
static void free_ring(void)
{
	if (ring.device >= 0 && cudaSetDevice(ring.device) == cudaSuccess)
		for (size_t k = 0; k < ring.nslots; k++) {
			cudaEventDestroy(ring.slots[k].done);
			cudaStreamDestroy(ring.slots[k].stream);
			cudaFreeHost(ring.slots[k].buf);
		}
	free(ring.slots);
	ring.slots = NULL;
	ring.nslots = ring.cap = 0;
	ring.device = -1;
}

/* Grows the ring (on the current device, dev) to nslots. */
static enum wshard_err grow_ring(int dev, size_t nslots, struct wshard_error *err)
{
	const char *path = NULL, *tensor = NULL;
	enum wshard_err rc = WSHARD_OK;
	cudaError_t e;

	if (nslots > ring.cap) {
		struct dslot *s = (struct dslot *)realloc(ring.slots,
							  nslots * sizeof(*s));

		if (!s)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		ring.slots = s;
		ring.cap = nslots;
	}
	while (ring.nslots < nslots) {
		struct dslot *s = &ring.slots[ring.nslots];

		*s = dslot();
		if (FAILED(cudaMallocHost, (void **)&s->buf, ring.slot_bytes))
			return rc;
		if (FAILED(cudaStreamCreateWithFlags, &s->stream,
			   cudaStreamNonBlocking)) {
			cudaFreeHost(s->buf);
			return rc;
		}
		if (FAILED(cudaEventCreateWithFlags, &s->done,
			   cudaEventDisableTiming | cudaEventBlockingSync)) {
			cudaStreamDestroy(s->stream);
			cudaFreeHost(s->buf);
			return rc;
		}
		ring.nslots++;
	}
	return WSHARD_OK;
}

/* Why cudaGetDeviceCount found nothing to use, as ENODEV. */
static enum wshard_err no_device(struct wshard_error *err, int dev, cudaError_t e)
{
	if (e == cudaSuccess || e == cudaErrorNoDevice)
		return wshard_error_set(err, WSHARD_ENODEV,
					"cannot load into cuda:%d: no CUDA device "
					"visible", dev);
	return wshard_error_set(err, WSHARD_ENODEV,
				"cannot load into cuda:%d: no usable CUDA "
				"driver or device: %s", dev, cudaGetErrorString(e));
}

extern "C" enum wshard_err wshard_lcuda_open(struct wshard_devload **out_d,
					     int device, size_t nslots,
					     size_t slot_bytes,
					     struct wshard_error *err)
{
	const char *path = NULL, *tensor = NULL;
	enum wshard_err rc = WSHARD_OK;
	int count = 0, dev = device;
	cudaError_t e;

	*out_d = NULL;
	e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count <= 0)
		return no_device(err, dev, e);
	if (device < 0 || device >= count)
		return wshard_error_set(err, WSHARD_EUSAGE,
					"cannot load into cuda:%d: %d CUDA "
					"device%s visible", device, count,
					count == 1 ? "" : "s");
	pthread_mutex_lock(&ring_lock);
	if (ring.device >= 0 && (ring.device != device || ring.slot_bytes != slot_bytes))
		free_ring();
	if (FAILED(cudaSetDevice, device))
		goto out;
	ring.device = device;
	ring.slot_bytes = slot_bytes;
	rc = grow_ring(dev, nslots, err);
	if (rc == WSHARD_OK && (e = cudaDeviceSynchronize()) != cudaSuccess)
		rc = cuda_fail(err, "cudaDeviceSynchronize", dev, path, tensor, e);
out:
	if (rc != WSHARD_OK) {
		pthread_mutex_unlock(&ring_lock);
		return rc;
	}
	*out_d = &ring;
	return WSHARD_OK;
}

extern "C" enum wshard_err wshard_lcuda_attach(struct wshard_devload *d,
					       struct wshard_error *err)
{
	const char *path = NULL, *tensor = NULL;
	enum wshard_err rc = WSHARD_OK;
	int dev = d->device;
	cudaError_t e;

	FAILED(cudaSetDevice, dev);
	return rc;
}

/* Waits for slot s's copies if any are queued. */
static enum wshard_err wait_slot(struct dslot *s, int dev, const char *path,
				 const char *tensor, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	cudaError_t e;

	if (!s->queued)
		return WSHARD_OK;
	s->queued = false;
	/* mostly done by now: a query costs less than a blocking wait */
	e = cudaEventQuery(s->done);
	if (e == cudaErrorNotReady)
		e = cudaEventSynchronize(s->done);
	if (e != cudaSuccess)
		rc = cuda_fail(err, "cudaEventSynchronize", dev, path, tensor, e);
	return rc;
}

extern "C" enum wshard_err wshard_lcuda_slot(struct wshard_devload *d, size_t k,
					     unsigned char **out_buf,
					     const char *path, const char *tensor,
					     struct wshard_error *err)
{
	struct dslot *s = &d->slots[k];
	enum wshard_err rc;

	*out_buf = NULL;
	rc = wait_slot(s, d->device, path, tensor, err);
	if (rc == WSHARD_OK)
		*out_buf = s->buf;
	return rc;
}

extern "C" enum wshard_err wshard_lcuda_copy(struct wshard_devload *d, size_t k,
					     size_t off, void *dst, size_t len,
					     const char *path, const char *tensor,
					     struct wshard_error *err)
{
	struct dslot *s = &d->slots[k];
	enum wshard_err rc = WSHARD_OK;
	int dev = d->device;
	cudaError_t e;

	if (off > d->slot_bytes || len > d->slot_bytes - off)
		return wshard_error_set(err, WSHARD_EUSAGE,
					"'%s': tensor '%s': %zu bytes at %zu of a "
					"staging buffer of %zu", path, tensor, len,
					off, d->slot_bytes);
	FAILED(cudaMemcpyAsync, dst, s->buf + off, len, cudaMemcpyHostToDevice,
	       s->stream);
	return rc;
}

extern "C" enum wshard_err wshard_lcuda_queued(struct wshard_devload *d, size_t k,
					       const char *path, const char *tensor,
					       struct wshard_error *err)
{
	struct dslot *s = &d->slots[k];
	enum wshard_err rc = WSHARD_OK;
	int dev = d->device;
	cudaError_t e;

	if (!FAILED(cudaEventRecord, s->done, s->stream))
		s->queued = true;
	return rc;
}

extern "C" enum wshard_err wshard_lcuda_close(struct wshard_devload *d,
					      struct wshard_error *err)
{
	const char *path = NULL, *tensor = NULL;
	enum wshard_err rc = WSHARD_OK;
	int dev;
	cudaError_t e;

	if (!d)
		return WSHARD_OK;
	dev = d->device;
	/* every stream, whether its event was recorded or not: no copy may
	 * still read a slot or write the engine's memory once this returns */
	if (cudaSetDevice(dev) != cudaSuccess)
		rc = wshard_error_set(err, WSHARD_EIO,
				      "cudaSetDevice failed on cuda:%d", dev);
	for (size_t k = 0; k < d->nslots; k++) {
		d->slots[k].queued = false;
		FAILED(cudaStreamSynchronize, d->slots[k].stream);
	}
	pthread_mutex_unlock(&ring_lock);
	return rc;
}
