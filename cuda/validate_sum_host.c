/*
 * validate_sum_host.c - the round-trip checksum (validate_sum.h) and the
 * host round trip on the fastest path the CPU has: the host backend's
 * steps (validate_host.c) and the CUDA backend's staging
 * (validate_cuda.cu) both go through it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "validate_sum_host.h"
#include "validate_sum.h"

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
	/*
	 * An aligned copy bypasses the cache: its reader is the copy engine,
	 * and ordinary stores would first read every line they fill.
	 */
	bool stream = copy && ((uintptr_t)dst & 63) == 0;

	vsum_acc_init(&s);
	for (j = 0; j < steps; j++) {
		__m512i w0 = _mm512_loadu_si512((const void *)(p + 128 * j));
		__m512i w1 = _mm512_loadu_si512((const void *)(p + 128 * j + 64));

		if (stream) {
			_mm512_stream_si512((__m512i *)(dst + 128 * j), w0);
			_mm512_stream_si512((__m512i *)(dst + 128 * j + 64), w1);
		} else if (copy) {
			_mm512_storeu_si512((void *)(dst + 128 * j), w0);
			_mm512_storeu_si512((void *)(dst + 128 * j + 64), w1);
		}
		vsum_acc_add(&s, w0, w1);
	}
	if (stream)
		_mm_sfence();
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
