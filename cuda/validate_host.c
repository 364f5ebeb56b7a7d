/*
 * validate_host.c - the host backend of the round trip and the dispatch
 * between it and the CUDA backend (validate_cuda.cu, compiled in when
 * WSHARD_CUDA is 1).
 *
 * The host backend performs the steps of the GPU round trip with
 * ordinary memory standing in for the device: copy a chunk into a
 * "device" buffer, checksum that buffer, copy it back into a third
 * "return" buffer, then compare the returned bytes with the original and
 * the checksum with the original's.  It proves nothing about a GPU, but
 * it runs the same checking code paths everywhere, fault injection
 * included, so the tests need no GPU.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "base/hooks.h"
#include "base/validate.h"
#include "validate_sum_host.h"
#include "validate_sum.h"
#ifdef WSHARD_CUDA
#include "validate_cuda.h"
#endif

/*
 * Bytes per step of the host round trip: a multiple of 64 small enough
 * that the block, its "device" copy and the returned copy (24 KiB) stay
 * in a 32 KiB L1 cache, so only the first load of each block misses it.
 */
#define HOST_BLOCK (8u << 10)

/* The chunk size when the caller passes 0. */
#define DEFAULT_CHUNK ((size_t)8 << 20)

/*
 * Test hook: when the hooks' inject_validate holds a number N, the
 * validator flips the byte at offset N of everything it is given to check
 * after opening (as wshard_validator_inject_fault(v, N) right after open),
 * so that a test can make a real `wshard convert` fail validation: the
 * host backend in the returned copy, the CUDA backend in device memory.
 * Each process of an MPI job counts its own bytes.  Any other value than a decimal number makes open fail with
 * WSHARD_EUSAGE, naming the variable the wshard program reads it from.
 */
#define INJECT_ENV "WSHARD_INJECT_VALIDATE"

enum backend_kind {
	BACKEND_HOST,
	BACKEND_CUDA,
};

struct wshard_validator {
	enum backend_kind kind;
	char name[160];
	size_t chunk;
	/* host backend */
	unsigned char *dev;	/* stands in for device memory (one block) */
	unsigned char *ret;	/* the copy that came back (one block) */
	uint64_t streamed;	/* bytes given to check since open */
	bool fault_armed;
	uint64_t fault_at;	/* position in that stream of the byte to flip */
	/* cuda backend */
	struct wshard_vcuda *cuda;
	/* stats */
	uint64_t bytes;
	double seconds;
};

/* The hooks' inject_validate, a byte offset counted from the opening. */
static enum wshard_err inject_from_hooks(struct wshard_validator *v,
					 struct wshard_error *err)
{
	uint64_t n;

	if (wshard_hook_bytes(wshard_hooks_get()->inject_validate, INJECT_ENV, &n,
			      &v->fault_armed, err))
		return err->code;
	v->fault_at = v->streamed + n;
	return WSHARD_OK;
}

static enum wshard_err open_host(struct wshard_validator *v,
				 struct wshard_error *err)
{
	v->kind = BACKEND_HOST;
	snprintf(v->name, sizeof(v->name), "host");
	/* one cache-sized block of each is in use at a time (host_chunk) */
	/* aligned for the vector stores of round_trip_avx512 */
	v->dev = aligned_alloc(64, HOST_BLOCK);
	v->ret = aligned_alloc(64, HOST_BLOCK);
	if (!v->dev || !v->ret)
		return wshard_error_set(err, WSHARD_ENOMEM,
					"out of memory for two validation buffers of %u bytes",
					HOST_BLOCK);
	return inject_from_hooks(v, err);
}

static enum wshard_err open_cuda(struct wshard_validator *v, int local_rank,
				 struct wshard_error *err)
{
#ifdef WSHARD_CUDA
	enum wshard_err rc;

	v->kind = BACKEND_CUDA;
	rc = wshard_vcuda_open(&v->cuda, local_rank, v->chunk, v->name,
			       sizeof(v->name), err);
	return rc == WSHARD_OK ? inject_from_hooks(v, err) : rc;
#else
	(void)v;
	(void)local_rank;
	return wshard_error_set(err, WSHARD_ENODEV,
				"built without CUDA (make CUDA=0)");
#endif
}

void wshard_validator_warm(enum wshard_validate_mode mode, int local_rank)
{
#ifdef WSHARD_CUDA
	if (mode == WSHARD_VALIDATE_GPU || mode == WSHARD_VALIDATE_AUTO)
		wshard_vcuda_warm(local_rank);
#else
	(void)mode;
	(void)local_rank;
#endif
}

void wshard_validator_warm_wait(void)
{
#ifdef WSHARD_CUDA
	wshard_vcuda_warm_wait();
#endif
}

bool wshard_validator_warm_done(void)
{
#ifdef WSHARD_CUDA
	return wshard_vcuda_warm_done();
#else
	return true;
#endif
}

enum wshard_err wshard_validator_open(struct wshard_validator **out_v,
				      enum wshard_validate_mode mode,
				      int local_rank, size_t chunk_bytes,
				      char *out_notice, size_t notice_len,
				      struct wshard_error *err)
{
	struct wshard_validator *v = NULL;
	struct wshard_error why = { WSHARD_OK, "" };
	enum wshard_err rc;

	*out_v = NULL;
	if (out_notice && notice_len)
		out_notice[0] = '\0';
	if (mode != WSHARD_VALIDATE_AUTO && mode != WSHARD_VALIDATE_GPU &&
	    mode != WSHARD_VALIDATE_HOST)
		return wshard_error_set(err, WSHARD_EUSAGE,
					"validation mode %d opens no validator",
					(int)mode);

	v = calloc(1, sizeof(*v));
	if (!v)
		return wshard_error_set(err, WSHARD_ENOMEM,
					"out of memory for a validator");
	v->chunk = chunk_bytes ? chunk_bytes : DEFAULT_CHUNK;

	if (mode != WSHARD_VALIDATE_HOST) {
		rc = open_cuda(v, local_rank, &why);
		if (rc == WSHARD_OK)
			goto out;
		/*
		 * In auto mode any trouble with the GPU side (no driver, no
		 * device, a failing CUDA call) means the host; running out of
		 * host memory does not.
		 */
		if (mode == WSHARD_VALIDATE_GPU || rc == WSHARD_ENOMEM) {
			wshard_error_set(err, rc, "%s", why.msg);
			goto out;
		}
		if (out_notice && notice_len)
			snprintf(out_notice, notice_len,
				 "%s; validating on the host", why.msg);
	}
	rc = open_host(v, err);

out:
	if (rc != WSHARD_OK) {
		wshard_validator_close(v);
		return rc;
	}
	*out_v = v;
	return WSHARD_OK;
}

const char *wshard_validator_backend(const struct wshard_validator *v)
{
	return v->name;
}

/* The offset of the first byte where a and b (n bytes) differ. */
static size_t first_difference(const unsigned char *a, const unsigned char *b,
			       size_t n)
{
	size_t i = 0;

	while (i < n && a[i] == b[i])
		i++;
	return i;
}


/* One chunk of n bytes at src, at offset off of the check's buffer. */
static enum wshard_err host_chunk(struct wshard_validator *v,
				  const unsigned char *src, size_t n,
				  uint64_t off, const char *what,
				  uint64_t base, struct wshard_error *err)
{
	uint64_t at = v->streamed + off;
	uint64_t dev_sum = 0, want = 0;
	size_t b, bn;

	/*
	 * The same steps as the device's, an L1-sized block at a time: copy
	 * in (summing the original on the way, the expected value), sum the
	 * "device" copy while copying it back, compare what came back with
	 * the original.  With AVX-512 the three steps go a vector at a time
	 * (wshard_validate_round_trip_at), except in a block where a fault is
	 * injected.
	 */
	for (b = 0; b < n; b += bn) {
		uint64_t w, g;

		bn = n - b < HOST_BLOCK ? n - b : HOST_BLOCK;
		if (v->fault_armed && v->fault_at >= at + b && v->fault_at - at - b < bn) {
			/* the three steps one by one, to damage the returned copy */
			w = wshard_validate_copy_sum_at(v->dev, src + b, bn, b / 8);
			g = wshard_validate_copy_sum_at(v->ret, v->dev, bn, b / 8);
			v->ret[v->fault_at - at - b] ^= 0xff;
			v->fault_armed = false;
			if (memcmp(src + b, v->ret, bn) != 0)
				goto changed;
		} else if (!wshard_validate_round_trip_at(v->dev, v->ret, src + b, bn, b / 8,
							  &w, &g)) {
			goto changed;
		}
		want += w;
		dev_sum += g;
	}
	dev_sum = wshard_vsum_final(dev_sum, n);
	want = wshard_vsum_final(want, n);
	if (dev_sum != want)
		return wshard_error_set(err, WSHARD_EVALIDATE,
					"round trip changed the checksum of bytes %" PRIu64
					"-%" PRIu64 " of %s: %016" PRIx64 ", expected %016" PRIx64,
					base + off, base + off + n, what, dev_sum, want);
	return WSHARD_OK;
changed:
	return wshard_error_set(err, WSHARD_EVALIDATE, "round trip changed byte %" PRIu64 " of %s",
				base + off + b + first_difference(src + b, v->ret, bn), what);
}

static enum wshard_err host_check(struct wshard_validator *v,
				  const unsigned char *buf, size_t len,
				  const char *what, uint64_t base,
				  struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	size_t off, n;

	for (off = 0; off < len && rc == WSHARD_OK; off += n) {
		n = len - off < v->chunk ? len - off : v->chunk;
		rc = host_chunk(v, buf + off, n, off, what, base, err);
	}
	return rc;
}

enum wshard_err wshard_validator_check(struct wshard_validator *v,
				       const void *buf, size_t len,
				       const char *what, uint64_t base,
				       struct wshard_error *err)
{
	double t0 = wshard_seconds();
	enum wshard_err rc;

	if (!what)
		what = "data";
#ifdef WSHARD_CUDA
	if (v->kind == BACKEND_CUDA) {
		uint64_t fault_off = UINT64_MAX;

		if (v->fault_armed && v->fault_at - v->streamed < len) {
			fault_off = v->fault_at - v->streamed;
			v->fault_armed = false;
		}
		rc = wshard_vcuda_check(v->cuda, buf, len, what, base,
					fault_off, err);
	} else
#endif
		rc = host_check(v, buf, len, what, base, err);
	v->streamed += len;
	if (rc == WSHARD_OK)
		v->bytes += len;
	v->seconds += wshard_seconds() - t0;
	return rc;
}

enum wshard_err wshard_validator_flush(struct wshard_validator *v,
				       struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
#ifdef WSHARD_CUDA
	double t0 = wshard_seconds();

	if (v->kind == BACKEND_CUDA) {
		rc = wshard_vcuda_flush(v->cuda, err);
		v->seconds += wshard_seconds() - t0;
	}
#else
	(void)v;
	(void)err;
#endif
	return rc;
}

void wshard_validator_stats(const struct wshard_validator *v,
			    uint64_t *out_bytes, double *out_seconds)
{
	*out_bytes = v->bytes;
	*out_seconds = v->seconds;
}

enum wshard_err wshard_validator_inject_fault(struct wshard_validator *v,
					      uint64_t after_bytes)
{
	v->fault_armed = true;
	v->fault_at = v->streamed + after_bytes;
	return WSHARD_OK;
}

void wshard_validator_close(struct wshard_validator *v)
{
	if (!v)
		return;
#ifdef WSHARD_CUDA
	wshard_vcuda_close(v->cuda);
#endif
	free(v->dev);
	free(v->ret);
	free(v);
}
