/*
 * load_host.c - the loader's device copies (base/devload.h): the dispatch
 * to the CUDA backend (load_cuda.cu, compiled in when WSHARD_CUDA is 1),
 * its refusal in a build without CUDA, and a stand-in for tests.
 *
 * The stand-in (wshard_devload_pretend) takes host memory for device
 * memory and copies with memcpy from its slots, so that the loader's
 * device path (jobs, slots, gathered copies, hashing as staged) is
 * tested on a machine without a GPU, in every build.
 */
#include <stdlib.h>
#include <string.h>

#include "base/devload.h"
#ifdef WSHARD_CUDA
#include "load_cuda.h"
#endif

static bool pretend;

/* The stand-in's ring: malloc'd slots, one load's. */
struct host_ring {
	size_t nslots, slot_bytes;
	unsigned char *bufs[];
};

void wshard_devload_pretend(bool on)
{
	pretend = on;
}

bool wshard_devload_usable(void)
{
#ifdef WSHARD_CUDA
	return pretend || wshard_lcuda_usable();
#else
	return pretend;
#endif
}

static enum wshard_err host_open(struct wshard_devload **out_d, size_t nslots,
				 size_t slot_bytes, struct wshard_error *err)
{
	struct host_ring *h = calloc(1, sizeof(*h) + nslots * sizeof(h->bufs[0]));

	if (!h)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	h->slot_bytes = slot_bytes;
	for (; h->nslots < nslots; h->nslots++)
		if (!(h->bufs[h->nslots] = malloc(slot_bytes))) {
			wshard_devload_close((struct wshard_devload *)h, err);
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		}
	*out_d = (struct wshard_devload *)h;
	return WSHARD_OK;
}

enum wshard_err wshard_devload_open(struct wshard_devload **out_d, int device,
				    size_t nslots, size_t slot_bytes,
				    struct wshard_error *err)
{
	*out_d = NULL;
	if (pretend)
		return host_open(out_d, nslots, slot_bytes, err);
#ifdef WSHARD_CUDA
	return wshard_lcuda_open(out_d, device, nslots, slot_bytes, err);
#else
	return wshard_error_set(err, WSHARD_ENODEV,
				"cannot load into cuda:%d: libwshard built without "
				"CUDA (make CUDA=0)", device);
#endif
}

enum wshard_err wshard_devload_attach(struct wshard_devload *d,
				      struct wshard_error *err)
{
#ifdef WSHARD_CUDA
	if (!pretend)
		return wshard_lcuda_attach(d, err);
#endif
	return WSHARD_OK;
}

enum wshard_err wshard_devload_slot(struct wshard_devload *d, size_t k,
				    unsigned char **out_buf, const char *path,
				    const char *tensor, struct wshard_error *err)
{
	struct host_ring *h = (struct host_ring *)d;

#ifdef WSHARD_CUDA
	if (!pretend)
		return wshard_lcuda_slot(d, k, out_buf, path, tensor, err);
#endif
	*out_buf = NULL;
	if (k >= h->nslots)
		return wshard_error_set(err, WSHARD_EUSAGE, "'%s': tensor '%s': "
					"no staging buffer %zu (%zu)", path, tensor,
					k, h->nslots);
	*out_buf = h->bufs[k];
	/* what a slot held before is not to be relied on */
	memset(h->bufs[k], 0xa5, h->slot_bytes);
	return WSHARD_OK;
}

enum wshard_err wshard_devload_copy(struct wshard_devload *d, size_t k,
				    size_t off, void *dst, size_t len,
				    const char *path, const char *tensor,
				    struct wshard_error *err)
{
	struct host_ring *h = (struct host_ring *)d;

#ifdef WSHARD_CUDA
	if (!pretend)
		return wshard_lcuda_copy(d, k, off, dst, len, path, tensor, err);
#endif
	if (k >= h->nslots || off > h->slot_bytes || len > h->slot_bytes - off)
		return wshard_error_set(err, WSHARD_EUSAGE, "'%s': tensor '%s': "
					"%zu bytes at %zu of staging buffer %zu",
					path, tensor, len, off, k);
	memcpy(dst, h->bufs[k] + off, len);
	return WSHARD_OK;
}

enum wshard_err wshard_devload_queued(struct wshard_devload *d, size_t k,
				      const char *path, const char *tensor,
				      struct wshard_error *err)
{
#ifdef WSHARD_CUDA
	if (!pretend)
		return wshard_lcuda_queued(d, k, path, tensor, err);
#endif
	return WSHARD_OK;
}

enum wshard_err wshard_devload_close(struct wshard_devload *d,
				     struct wshard_error *err)
{
	struct host_ring *h = (struct host_ring *)d;

	if (!d)
		return WSHARD_OK;
#ifdef WSHARD_CUDA
	if (!pretend)
		return wshard_lcuda_close(d, err);
#endif
	for (size_t k = 0; k < h->nslots; k++)
		free(h->bufs[k]);
	free(h);
	return WSHARD_OK;
}
