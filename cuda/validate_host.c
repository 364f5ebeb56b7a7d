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

#include "validate.h"
#include "../lib/internal.h"
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
 * Test hook: when this environment variable holds a number N, a host
 * backend flips the byte at offset N of everything it is given to check
 * after opening (as wshard_validator_inject_fault(v, N) right after open),
 * so that a test can make a real `wshard convert --validate host` fail
 * validation.  Each process of an MPI job counts its own bytes.  The CUDA
 * backend ignores it: a test that sets it must ask for the host backend.
 * Any other value than a decimal number makes open fail with
 * WSHARD_EUSAGE.
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
 * AVX-512 (a 64-bit multiply per lane): about three times the speed of
 * the portable loop in validate_sum.h, which does the rest (the last
 * words, and every word elsewhere).  With a destination it also stores
 * every word it loads there, so that a copy and the checksum of what was
 * copied take one pass.  Both paths give the same value: the test suite
 * compares them on every length up to a few hundred bytes.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_VSUM_AVX512 1

#define AVX512 __attribute__((target("avx512f,avx512dq"), always_inline)) static inline

/*
 * What the word index contributes to the terms of two consecutive
 * vectors (sixteen words): i * STEP and 2i + 1 per lane.  Two vectors per
 * iteration, each with its own sum and index chains: with one, the loop
 * ran at 33 GB/s from L1 on the development machine, with two at 58
 * (four gained nothing more).
 */
struct vsum_lanes {
	__m512i kstep0, odd0, kstep1, odd1;
};

AVX512 void vsum_lanes_init(struct vsum_lanes *l, uint64_t first)
{
	__m512i k = _mm512_add_epi64(_mm512_set1_epi64((long long)first),
				     _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));

	l->kstep0 = _mm512_mullo_epi64(k, _mm512_set1_epi64((long long)WSHARD_VSUM_STEP));
	l->odd0 = _mm512_add_epi64(_mm512_add_epi64(k, k), _mm512_set1_epi64(1));
	l->kstep1 = _mm512_add_epi64(l->kstep0,
				     _mm512_set1_epi64((long long)(8 * WSHARD_VSUM_STEP)));
	l->odd1 = _mm512_add_epi64(l->odd0, _mm512_set1_epi64(16));
}

/* On by sixteen words. */
AVX512 void vsum_lanes_next(struct vsum_lanes *l)
{
	const __m512i kstep16 = _mm512_set1_epi64((long long)(16 * WSHARD_VSUM_STEP));
	const __m512i odd16 = _mm512_set1_epi64(32);

	l->kstep0 = _mm512_add_epi64(l->kstep0, kstep16);
	l->kstep1 = _mm512_add_epi64(l->kstep1, kstep16);
	l->odd0 = _mm512_add_epi64(l->odd0, odd16);
	l->odd1 = _mm512_add_epi64(l->odd1, odd16);
}

/* wshard_vsum_word of eight words. */
AVX512 __m512i vsum_terms(__m512i w, __m512i kstep, __m512i odd)
{
	return _mm512_mullo_epi64(_mm512_xor_si512(w, kstep), odd);
}

/* The lanes added as unsigned words (the reduce intrinsic adds them as
 * signed ones, which may overflow). */
AVX512 uint64_t vsum_lanes_total(__m512i acc)
{
	uint64_t lane[8], sum = 0;
	int l;

	_mm512_storeu_si512((void *)lane, acc);
	for (l = 0; l < 8; l++)
		sum += lane[l];
	return sum;
}

AVX512 uint64_t vsum_avx512_body(unsigned char *dst, const unsigned char *p,
				 size_t len, uint64_t first, bool copy)
{
	size_t nwords = len / 8, i = 0;
	__m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
	struct vsum_lanes l;

	vsum_lanes_init(&l, first);
	for (; i + 16 <= nwords; i += 16, vsum_lanes_next(&l)) {
		__m512i w0 = _mm512_loadu_si512((const void *)(p + 8 * i));
		__m512i w1 = _mm512_loadu_si512((const void *)(p + 8 * i + 64));

		if (copy) {
			_mm512_storeu_si512((void *)(dst + 8 * i), w0);
			_mm512_storeu_si512((void *)(dst + 8 * i + 64), w1);
		}
		acc0 = _mm512_add_epi64(acc0, vsum_terms(w0, l.kstep0, l.odd0));
		acc1 = _mm512_add_epi64(acc1, vsum_terms(w1, l.kstep1, l.odd1));
	}
	if (i + 8 <= nwords) {
		__m512i w = _mm512_loadu_si512((const void *)(p + 8 * i));

		if (copy)
			_mm512_storeu_si512((void *)(dst + 8 * i), w);
		acc0 = _mm512_add_epi64(acc0, vsum_terms(w, l.kstep0, l.odd0));
		i += 8;
	}
	if (copy)
		memcpy(dst + 8 * i, p + 8 * i, len - 8 * i);
	return vsum_lanes_total(_mm512_add_epi64(acc0, acc1)) +
	       wshard_vsum_partial_at(p + 8 * i, len - 8 * i, first + i);
}

__attribute__((target("avx512f,avx512dq")))
static uint64_t vsum_avx512(const unsigned char *p, size_t len, uint64_t first)
{
	return vsum_avx512_body(NULL, p, len, first, false);
}

__attribute__((target("avx512f,avx512dq")))
static uint64_t copy_vsum_avx512(unsigned char *dst, const unsigned char *p,
				 size_t len, uint64_t first)
{
	return vsum_avx512_body(dst, p, len, first, true);
}

/* One vector of a fused round trip: see round_trip_avx512. */
AVX512 void round_trip_vector(unsigned char *dev, unsigned char *ret, __m512i w,
			      __m512i kstep, __m512i odd, __m512i *want, __m512i *got,
			      __m512i *diff)
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
	*want = _mm512_add_epi64(*want, vsum_terms(w, kstep, odd));
	*got = _mm512_add_epi64(*got, vsum_terms(d, kstep, odd));
	*diff = _mm512_or_si512(*diff, _mm512_xor_si512(r, w));
}

/*
 * The three steps of a host round trip fused, a vector at a time: copy
 * the original into "device" memory (summing the original: the expected
 * value), load it back from there (summing the device copy) and store it
 * into the returned copy, then load that and compare it with the
 * original.  The same loads, stores and sums as three passes over a
 * block, without going over the block three times: 1.4 times the speed
 * (24.5 against 17.5 GB/s for a 256 KiB block in cache here).
 * Returns false if a word came back different; *want and *got receive
 * the two sums (before wshard_vsum_final).
 */
__attribute__((target("avx512f,avx512dq")))
static bool round_trip_avx512(unsigned char *dev, unsigned char *ret,
			      const unsigned char *src, size_t len, uint64_t first,
			      uint64_t *want, uint64_t *got)
{
	size_t nwords = len / 8, i = 0, tail;
	__m512i want0 = _mm512_setzero_si512(), got0 = want0, want1 = want0, got1 = want0;
	__m512i diff = _mm512_setzero_si512();
	struct vsum_lanes l;

	vsum_lanes_init(&l, first);
	for (; i + 16 <= nwords; i += 16, vsum_lanes_next(&l)) {
		__m512i w0 = _mm512_loadu_si512((const void *)(src + 8 * i));
		__m512i w1 = _mm512_loadu_si512((const void *)(src + 8 * i + 64));

		round_trip_vector(dev + 8 * i, ret + 8 * i, w0, l.kstep0, l.odd0,
				  &want0, &got0, &diff);
		round_trip_vector(dev + 8 * i + 64, ret + 8 * i + 64, w1, l.kstep1, l.odd1,
				  &want1, &got1, &diff);
	}
	if (i + 8 <= nwords) {
		round_trip_vector(dev + 8 * i, ret + 8 * i,
				  _mm512_loadu_si512((const void *)(src + 8 * i)),
				  l.kstep0, l.odd0, &want0, &got0, &diff);
		i += 8;
	}
	tail = len - 8 * i;
	memcpy(dev + 8 * i, src + 8 * i, tail);
	memcpy(ret + 8 * i, dev + 8 * i, tail);
	*want = vsum_lanes_total(_mm512_add_epi64(want0, want1)) +
		wshard_vsum_partial_at(src + 8 * i, tail, first + i);
	*got = vsum_lanes_total(_mm512_add_epi64(got0, got1)) +
	       wshard_vsum_partial_at(dev + 8 * i, tail, first + i);
	return _mm512_test_epi64_mask(diff, diff) == 0 &&
	       memcmp(ret + 8 * i, src + 8 * i, tail) == 0;
}

static bool have_avx512(void)
{
	static int avx512 = -1;
	int have = __atomic_load_n(&avx512, __ATOMIC_RELAXED);

	if (have < 0) {		/* racing threads store the same value */
		have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
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

uint64_t wshard_validate_sum(const void *buf, size_t len)
{
	return wshard_vsum_final(wshard_validate_sum_at(buf, len, 0), len);
}

static enum wshard_err inject_from_env(struct wshard_validator *v,
				       struct wshard_error *err)
{
	const char *s = getenv(INJECT_ENV);
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
	return inject_from_env(v, err);
}

static enum wshard_err open_cuda(struct wshard_validator *v, int local_rank,
				 struct wshard_error *err)
{
#ifdef WSHARD_CUDA
	v->kind = BACKEND_CUDA;
	return wshard_vcuda_open(&v->cuda, local_rank, v->chunk, v->name,
				 sizeof(v->name), err);
#else
	(void)v;
	(void)local_rank;
	return wshard_error_set(err, WSHARD_ENODEV,
				"built without CUDA (make CUDA=0)");
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
	 * (round_trip_avx512), except in a block where a fault is injected.
	 */
	for (b = 0; b < n; b += bn) {
		bool armed;

		bn = n - b < HOST_BLOCK ? n - b : HOST_BLOCK;
		armed = v->fault_armed && v->fault_at >= at + b && v->fault_at - at - b < bn;
#ifdef HAVE_VSUM_AVX512
		/* a block with an injected fault takes the three separate steps */
		if (!armed && have_avx512()) {
			uint64_t w, g;

			if (!round_trip_avx512(v->dev, v->ret, src + b, bn, b / 8, &w, &g))
				goto changed;
			want += w;
			dev_sum += g;
			continue;
		}
#endif
		want += wshard_validate_copy_sum_at(v->dev, src + b, bn, b / 8);
		dev_sum += wshard_validate_copy_sum_at(v->ret, v->dev, bn, b / 8);
		if (armed) {
			v->ret[v->fault_at - at - b] ^= 0xff;
			v->fault_armed = false;
		}
		if (memcmp(src + b, v->ret, bn) != 0)
			goto changed;
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
	if (v->kind == BACKEND_CUDA)
		rc = wshard_vcuda_check(v->cuda, buf, len, what, base, err);
	else
#endif
		rc = host_check(v, buf, len, what, base, err);
	v->streamed += len;
	if (rc == WSHARD_OK)
		v->bytes += len;
	v->seconds += wshard_seconds() - t0;
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
	if (v->kind != BACKEND_HOST)
		return WSHARD_EUSAGE;
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
