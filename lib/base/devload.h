/*
 * devload.h - the loader's copies into device memory, which
 * lib/load/load_device.c calls and cuda/ implements:
 *
 *   cuda (cuda/load_cuda.cu, CUDA=1): a ring of pinned staging buffers
 *       ("slots", cudaMallocHost), each with a stream and an event.  The
 *       loader's threads read file bytes into a slot, queue its copies to
 *       the device and go on to the next slot; a slot is read into again
 *       once the event recorded after its copies has completed.  The ring
 *       is allocated on first use and kept for the process's later loads
 *       (pinning memory costs more than the copies of a small rank).
 *   none (cuda/load_host.c, CUDA=0): opening fails, "built without CUDA".
 *   pretend (cuda/load_host.c, for tests): host memory stands in for
 *       device memory, memcpy for the copies, in every build.
 *
 * Calls name what they copy (file and tensor) for their messages.  Like
 * the library, nothing here prints or exits.  Not part of the API.
 */
#ifndef WSHARD_DEVLOAD_H
#define WSHARD_DEVLOAD_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "wshard.h"

struct wshard_devload;

/* True when this build has CUDA and a CUDA device is usable (or while
 * pretending). */
bool wshard_devload_usable(void);

/* For tests, between loads: on, the "device" pointers are host memory
 * and the copies memcpy, with or without CUDA; off (the start), CUDA. */
void wshard_devload_pretend(bool on);

/*
 * Takes the process's staging ring for device (an index among the
 * visible ones), grown to at least nslots slots of slot_bytes each, for
 * one load: a second open waits for the first's close.  Waits for the
 * work queued on the device so far (the engine's, on its streams), so
 * that none of it lands after the copies.  The calling thread's device is
 * set.  Returns WSHARD_OK; WSHARD_ENODEV when the build has no CUDA or
 * there is no driver or device (the message says which); WSHARD_EUSAGE
 * for a device that is not visible; WSHARD_EIO when a CUDA call fails
 * (the message names it).
 */
enum wshard_err wshard_devload_open(struct wshard_devload **out_d, int device,
				    size_t nslots, size_t slot_bytes,
				    struct wshard_error *err);

/* Sets d's device for the calling thread, once in each thread that calls
 * the functions below.  Returns WSHARD_OK or WSHARD_EIO. */
enum wshard_err wshard_devload_attach(struct wshard_devload *d,
				      struct wshard_error *err);

/*
 * Slot k's pinned buffer (slot_bytes), once the copies queued from it
 * before have completed.  A slot is used by one thread at a time.  path
 * and tensor name what was last copied from it, for a message.  Returns
 * WSHARD_OK or WSHARD_EIO.
 */
enum wshard_err wshard_devload_slot(struct wshard_devload *d, size_t k,
				    unsigned char **out_buf, const char *path,
				    const char *tensor, struct wshard_error *err);

/* Queues the copy of len bytes at off in slot k to dst, device memory.
 * Returns WSHARD_OK or WSHARD_EIO, naming path and tensor. */
enum wshard_err wshard_devload_copy(struct wshard_devload *d, size_t k,
				    size_t off, void *dst, size_t len,
				    const char *path, const char *tensor,
				    struct wshard_error *err);

/* Marks the end of slot k's copies: the slot is read into again once
 * they have completed.  Returns WSHARD_OK or WSHARD_EIO. */
enum wshard_err wshard_devload_queued(struct wshard_devload *d, size_t k,
				      const char *path, const char *tensor,
				      struct wshard_error *err);

/*
 * Waits for every copy queued, then gives the ring back for the next
 * load (its memory stays allocated); accepts NULL.  Call it from the
 * thread that opened d, after a failure too.  Returns WSHARD_OK, or
 * WSHARD_EIO when a copy failed (then the device memory written is
 * undefined).
 */
enum wshard_err wshard_devload_close(struct wshard_devload *d,
				     struct wshard_error *err);

#ifdef __cplusplus
}
#endif

#endif /* WSHARD_DEVLOAD_H */
