/*
 * validate_cuda.h - the CUDA backend of the round trip, as plain C
 * functions for the dispatch in validate_host.c.  Internal to cuda/:
 * only built (and only declared to C) when WSHARD_CUDA is 1.
 */
#ifndef WSHARD_VALIDATE_CUDA_H
#define WSHARD_VALIDATE_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "wshard.h"

struct wshard_vcuda;

/*
 * Opens device local_rank modulo the visible devices, with four slots of
 * pinned staging and return buffers and device buffers of chunk_bytes
 * each, a stream each, and the thread that compares what comes back.
 * backend (size backend_len) receives
 * "cuda:N (device name)".  Returns WSHARD_OK; WSHARD_ENODEV when there is
 * no driver or no device ("no CUDA driver: ...", "no CUDA device
 * visible"); WSHARD_EIO when a CUDA call fails on a present device (the
 * message names the call); or WSHARD_ENOMEM.
 */
enum wshard_err wshard_vcuda_open(struct wshard_vcuda **out_c, int local_rank,
				  size_t chunk_bytes, char *backend,
				  size_t backend_len, struct wshard_error *err);

/* Starts the CUDA runtime and device local_rank's primary context in a
 * background thread (once per process); wshard_vcuda_warm_wait, which
 * wshard_vcuda_open calls, joins it; wshard_vcuda_warm_done says whether
 * that would return at once. */
void wshard_vcuda_warm(int local_rank);
void wshard_vcuda_warm_wait(void);
bool wshard_vcuda_warm_done(void);

/*
 * Stages len bytes of buf for their round trip through the device, as
 * wshard_validator_check, and returns: the result comes from a later
 * check or from wshard_vcuda_flush (a difference names the check it is
 * in).  fault_off, when below len, is the offset in buf of a byte to
 * damage in device memory after the copy in (fault injection for tests;
 * UINT64_MAX for none).  Returns WSHARD_OK, WSHARD_EVALIDATE,
 * WSHARD_ENOMEM or WSHARD_EIO.
 */
enum wshard_err wshard_vcuda_check(struct wshard_vcuda *c, const void *buf,
				   size_t len, const char *what, uint64_t base,
				   uint64_t fault_off, struct wshard_error *err);

/*
 * Sends what is staged, waits for every round trip in flight and returns
 * the first difference or failure among them.  Returns WSHARD_OK,
 * WSHARD_EVALIDATE or WSHARD_EIO.
 */
enum wshard_err wshard_vcuda_flush(struct wshard_vcuda *c, struct wshard_error *err);

/* Frees device and pinned memory and the streams; accepts NULL. */
void wshard_vcuda_close(struct wshard_vcuda *c);

#ifdef __cplusplus
}
#endif

#endif /* WSHARD_VALIDATE_CUDA_H */
