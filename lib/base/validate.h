/*
 * validate.h - the GPU round trip that proves written bytes survive a copy
 * to device memory and back: the interface the library calls, which
 * cuda/ implements with two backends:
 *
 *   cuda (cuda/validate_cuda.cu): bytes staged in pinned slots, each
 *       slot sent host -> device, checksummed by a kernel there, sent
 *       back into a second buffer and compared (bytes and checksums) by
 *       a thread of the validator's own, four slots in flight, so that a
 *       check returns once its bytes are staged.
 *   host (cuda/validate_host.c): the same steps with ordinary host memory
 *       standing in for the device, so the path is tested without a GPU.
 *
 * Built with CUDA=0 (no nvcc), only the host backend exists and asking
 * for the GPU fails as if no device were present.
 *
 * Like the library, nothing here prints or exits: functions return an
 * enum wshard_err and fill a struct wshard_error.  Not part of the API.
 */
#ifndef WSHARD_VALIDATE_H
#define WSHARD_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wshard.h"

struct wshard_validator;

/*
 * Opens a validator.
 *   mode GPU:  a CUDA device is required; none (or no driver, or a build
 *              without CUDA) gives WSHARD_ENODEV with a message that says
 *              which ("no CUDA driver: ...", "no CUDA device visible",
 *              "built without CUDA").
 *   mode AUTO: the GPU when usable, else the host backend; then
 *              *out_notice (if not NULL, size notice_len) receives one
 *              line saying why the host backend is used.
 *   mode HOST: the host backend.
 *   (mode OFF is the caller's business: it must not open a validator.)
 * local_rank picks the device: local_rank modulo the visible devices
 * (CUDA_VISIBLE_DEVICES is honoured by the driver).  chunk_bytes is the
 * most bytes one round trip moves (the staging buffers are sized from it).
 * Returns WSHARD_OK, WSHARD_ENODEV, WSHARD_ENOMEM or WSHARD_EIO.
 */
enum wshard_err wshard_validator_open(struct wshard_validator **out_v,
				      enum wshard_validate_mode mode,
				      int local_rank, size_t chunk_bytes,
				      char *out_notice, size_t notice_len,
				      struct wshard_error *err);

/*
 * Starts CUDA in this process in a background thread (device local_rank
 * modulo the visible ones) for a later wshard_validator_open in mode GPU
 * or AUTO; nothing for other modes, in a build without CUDA, or when
 * already started.  wshard_validator_open waits for it.
 */
void wshard_validator_warm(enum wshard_validate_mode mode, int local_rank);

/* Waits for what wshard_validator_warm started, if anything. */
void wshard_validator_warm_wait(void);

/*
 * Whether wshard_validator_warm_wait would return at once: nothing was
 * started, or CUDA's start is over (well or not).  For the thread that
 * called wshard_validator_warm.
 */
bool wshard_validator_warm_done(void);

/* "host" or "cuda:N (device name)". */
const char *wshard_validator_backend(const struct wshard_validator *v);

/*
 * Round-trips len bytes of buf (any length; split internally into chunks
 * of at most chunk_bytes).  what names the data in messages (e.g.
 * "rank 1 tensor 'model.norm.weight'"), base is the offset of buf within
 * it.  On a difference returns WSHARD_EVALIDATE with a message naming
 * what and the absolute byte offset of the first differing byte (or the
 * checksum difference).  Returns WSHARD_OK, WSHARD_EVALIDATE or WSHARD_EIO
 * (a CUDA call failed: the message names it).
 *
 * The GPU backend returns once the bytes are staged (copied, so buf may
 * be reused) and checks them in the background, many small checks in one
 * trip to the device: a difference may be reported by a later check,
 * naming the earlier what, or by wshard_validator_flush, which must
 * succeed before the bytes count as validated.
 */
enum wshard_err wshard_validator_check(struct wshard_validator *v,
				       const void *buf, size_t len,
				       const char *what, uint64_t base,
				       struct wshard_error *err);

/*
 * Round-trips whatever earlier checks left staged, waits for every trip
 * in flight and reports the first difference among them (as
 * wshard_validator_check).  The host backend keeps nothing for later.  Returns WSHARD_OK, WSHARD_EVALIDATE or WSHARD_EIO.
 */
enum wshard_err wshard_validator_flush(struct wshard_validator *v,
				       struct wshard_error *err);

/* Bytes validated and seconds spent in check so far. */
void wshard_validator_stats(const struct wshard_validator *v,
			    uint64_t *out_bytes, double *out_seconds);

/*
 * Fault injection for tests: after this call, the round trip flips one
 * byte at byte offset after_bytes counted over all later checks (the host
 * backend in the returned copy, the cuda backend in device memory after
 * the copy in).  Returns WSHARD_OK.
 */
enum wshard_err wshard_validator_inject_fault(struct wshard_validator *v,
					      uint64_t after_bytes);

/* Releases device and pinned memory; accepts NULL. */
void wshard_validator_close(struct wshard_validator *v);

#endif /* WSHARD_VALIDATE_H */
