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
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "base/hooks.h"
#include "output/validate.h"
#include "validate_host.h"
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

/*
 * The host side of the checksum, eight words at a time where the CPU has
 * AVX-512: the sum is linear in the words (validate_sum.h), so a lane
 * adds its words into one accumulator and that accumulator into a
 * second one, and the weights are applied once at the end.  The portable
 * loop in validate_sum.h does the rest (the last words, and every word
 * elsewhere).  With a destination it also stores every word it loads
 * there, so that a copy and the checksum of what was copied take one
 * pass.  Both paths give the same value: the test suite compares them on
 * every length up to a few hundred bytes.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_VSUM_AVX512 1

#define AVX512 __attribute__((target("avx512f"), always_inline)) static inline

/*
 * The running sums of one pass, over sixteen words a step: lane l of
 * chain 0 sees word 16j + l of step j, lane l of chain 1 word 16j + 8 + l.
 * Two chains keep the additions of consecutive vectors independent.
 */
struct vsum_acc {
	__m512i a0, b0, a1, b1;	/* a: sum of the words; b: sum of the a's */
};

AVX512 void vsum_acc_init(struct vsum_acc *s)
{
	s->a0 = s->b0 = s->a1 = s->b1 = _mm512_setzero_si512();
}

/* Words 16j .. 16j + 15 of step j, in two vectors. */
AVX512 void vsum_acc_add(struct vsum_acc *s, __m512i w0, __m512i w1)
{
	s->a0 = _mm512_add_epi64(s->a0, w0);
	s->b0 = _mm512_add_epi64(s->b0, s->a0);
	s->a1 = _mm512_add_epi64(s->a1, w1);
	s->b1 = _mm512_add_epi64(s->b1, s->a1);
}

/*
 * The sum of word * (2 (first + i) + 1) over the 16 * steps words added.
 * After m steps, b = sum over j of (m - j) w_j, so sum of j w_j is
 * m a - b, and a lane's word i = 16j + l (+ 8 in chain 1) gives
 * sum of i w = 16 (m a - b) + l a.  All modulo 2^64, lane by lane as
 * unsigned words (the reduce intrinsics add them as signed ones, which
 * may overflow).
 */
AVX512 uint64_t vsum_acc_total(const struct vsum_acc *s, uint64_t steps, uint64_t first)
{
	uint64_t a0[8], b0[8], a1[8], b1[8], sum = 0, isum = 0, l;

	_mm512_storeu_si512((void *)a0, s->a0);
	_mm512_storeu_si512((void *)b0, s->b0);
	_mm512_storeu_si512((void *)a1, s->a1);
	_mm512_storeu_si512((void *)b1, s->b1);
	for (l = 0; l < 8; l++) {
		sum += a0[l] + a1[l];
		isum += 16 * (steps * a0[l] - b0[l]) + l * a0[l] +
			16 * (steps * a1[l] - b1[l]) + (8 + l) * a1[l];
	}
	return (2 * first + 1) * sum + 2 * isum;
}

AVX512 uint64_t vsum_avx512_body(unsigned char *dst, const unsigned char *p,
				 size_t len, uint64_t first, bool copy)
{
	size_t steps = len / 128, j;
	struct vsum_acc s;

	vsum_acc_init(&s);
	for (j = 0; j < steps; j++) {
		__m512i w0 = _mm512_loadu_si512((const void *)(p + 128 * j));
		__m512i w1 = _mm512_loadu_si512((const void *)(p + 128 * j + 64));

		if (copy) {
			_mm512_storeu_si512((void *)(dst + 128 * j), w0);
			_mm512_storeu_si512((void *)(dst + 128 * j + 64), w1);
		}
		vsum_acc_add(&s, w0, w1);
	}
	if (copy)
		memcpy(dst + 128 * steps, p + 128 * steps, len - 128 * steps);
	return vsum_acc_total(&s, steps, first) +
	       wshard_vsum_partial_at(p + 128 * steps, len - 128 * steps, first + 16 * steps);
}

__attribute__((target("avx512f")))
static uint64_t vsum_avx512(const unsigned char *p, size_t len, uint64_t first)
{
	return vsum_avx512_body(NULL, p, len, first, false);
}

__attribute__((target("avx512f")))
static uint64_t copy_vsum_avx512(unsigned char *dst, const unsigned char *p,
				 size_t len, uint64_t first)
{
	return vsum_avx512_body(dst, p, len, first, true);
}

/*
 * One vector of a fused round trip: see round_trip_avx512.  Returns what
 * came back from "device" memory; *ret_diff gains the bits in which the
 * returned copy differs from the original w.
 */
AVX512 __m512i round_trip_vector(unsigned char *dev, unsigned char *ret, __m512i w,
				 __m512i *ret_diff)
{
	__m512i d, r;

	/*
	 * The compiler barriers make the loads real: without them the
	 * compiler knows what was just stored, and reads nothing back.
	 */
	_mm512_store_si512((void *)dev, w);
	__asm__ __volatile__("" ::: "memory");
	d = _mm512_load_si512((const void *)dev);
	_mm512_store_si512((void *)ret, d);
	__asm__ __volatile__("" ::: "memory");
	r = _mm512_load_si512((const void *)ret);
	/* diff | (r ^ w) in one instruction */
	*ret_diff = _mm512_ternarylogic_epi64(*ret_diff, r, w, 0xf6);
	return d;
}

/*
 * The three steps of a host round trip fused, a vector at a time: copy
 * the original into "device" memory (summing the original: the expected
 * value), load it back from there (summing the device copy) and store it
 * into the returned copy, then load that and compare it with the
 * original.  The same loads, stores and sums as three passes over a
 * block, without going over the block three times.
 * Returns false if a word came back different; *want and *got receive
 * the two sums (before wshard_vsum_final).
 */
__attribute__((target("avx512f")))
static bool round_trip_avx512(unsigned char *dev, unsigned char *ret,
			      const unsigned char *src, size_t len, uint64_t first,
			      uint64_t *want, uint64_t *got)
{
	size_t steps = len / 128, j, done = 128 * steps, tail = len - done;
	__m512i diff = _mm512_setzero_si512();
	struct vsum_acc sw, sg;

	vsum_acc_init(&sw);
	vsum_acc_init(&sg);
	for (j = 0; j < steps; j++) {
		size_t at = 128 * j;
		__m512i w0 = _mm512_loadu_si512((const void *)(src + at));
		__m512i w1 = _mm512_loadu_si512((const void *)(src + at + 64));
		__m512i d0 = round_trip_vector(dev + at, ret + at, w0, &diff);
		__m512i d1 = round_trip_vector(dev + at + 64, ret + at + 64, w1, &diff);

		vsum_acc_add(&sw, w0, w1);
		vsum_acc_add(&sg, d0, d1);
	}
	memcpy(dev + done, src + done, tail);
	memcpy(ret + done, dev + done, tail);
	*want = vsum_acc_total(&sw, steps, first) +
		wshard_vsum_partial_at(src + done, tail, first + 16 * steps);
	*got = vsum_acc_total(&sg, steps, first) +
	       wshard_vsum_partial_at(dev + done, tail, first + 16 * steps);
	return _mm512_test_epi64_mask(diff, diff) == 0 &&
	       memcmp(ret + done, src + done, tail) == 0;
}

static bool have_avx512(void)
{
	static int avx512 = -1;
	int have = __atomic_load_n(&avx512, __ATOMIC_RELAXED);

	if (have < 0) {		/* racing threads store the same value */
		have = __builtin_cpu_supports("avx512f");
		__atomic_store_n(&avx512, have, __ATOMIC_RELAXED);
	}
	return have;
}
#endif

uint64_t wshard_validate_sum_at(const void *buf, size_t len, uint64_t first)
{
#ifdef HAVE_VSUM_AVX512
	if (have_avx512())
		return vsum_avx512(buf, len, first);
#endif
	return wshard_vsum_partial_at(buf, len, first);
}

uint64_t wshard_validate_copy_sum_at(void *dst, const void *src, size_t len,
				     uint64_t first)
{
#ifdef HAVE_VSUM_AVX512
	if (have_avx512())
		return copy_vsum_avx512(dst, src, len, first);
#endif
	{
		uint64_t sum = wshard_vsum_partial_at(src, len, first);

		memcpy(dst, src, len);
		return sum;
	}
}

bool wshard_validate_round_trip_at(void *dev, void *ret, const void *src, size_t len,
				   uint64_t first, uint64_t *out_want, uint64_t *out_got)
{
#ifdef HAVE_VSUM_AVX512
	if (have_avx512())
		return round_trip_avx512(dev, ret, src, len, first, out_want, out_got);
#endif
	*out_want = wshard_validate_copy_sum_at(dev, src, len, first);
	*out_got = wshard_validate_copy_sum_at(ret, dev, len, first);
	return memcmp(ret, src, len) == 0;
}

uint64_t wshard_validate_sum(const void *buf, size_t len)
{
	return wshard_vsum_final(wshard_validate_sum_at(buf, len, 0), len);
}

/* The hooks' inject_validate, a byte offset counted from the opening. */
static enum wshard_err inject_from_hooks(struct wshard_validator *v,
					 struct wshard_error *err)
{
	const char *s = wshard_hooks_get()->inject_validate;
	char *end;
	unsigned long long n;

	if (!s || !*s)
		return WSHARD_OK;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno)
		return wshard_error_set(err, WSHARD_EUSAGE,
					"invalid %s '%s': not a byte offset",
					INJECT_ENV, s);
	v->fault_armed = true;
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
