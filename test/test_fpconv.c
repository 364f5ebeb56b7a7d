/*
 * test_fpconv.c - F32 -> F16 and F32 -> BF16 rounding (to nearest, ties
 * to even; NaN stays NaN with its sign; overflow to infinity), F16 -> F32
 * widening and the array conversion built on them, checked against
 * references that share no code with lib/fpconv.c:
 *
 *   - F16: GCC's own _Float16 conversion, on every 256th of the 2^32
 *     inputs plus the special regions (every input around the subnormal
 *     boundary and around 65504 / 65520 where rounding reaches infinity,
 *     every tie pattern of every exponent, every 16th input of the whole
 *     range where F16 rounds).  All 2^32 inputs take some 20 CPU seconds
 *     here, so that sweep runs when WSHARD_TEST_FULL is set (it did pass).
 *   - BF16: a reference written here from the IEEE definition with 64-bit
 *     integer arithmetic (value = M * 2^E, rounded to the target's
 *     quantum), itself checked against _Float16 when given F16's
 *     parameters.
 *
 * NaN results are compared for NaN-ness and sign only.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/fpconv.h"

/* ------------------------------------------------------------------ */
/* References                                                          */
/* ------------------------------------------------------------------ */

static float as_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint16_t half_bits(_Float16 h)
{
	uint16_t u;

	memcpy(&u, &h, 2);
	return u;
}

/* GCC's conversion (libgcc's soft-float routine on plain x86-64). */
static uint16_t gcc_f16_soft(uint32_t u)
{
	return half_bits((_Float16)as_float(u));
}

/* The same conversion compiled for F16C: one vcvtps2ph, the default
 * MXCSR rounding (to nearest even). */
__attribute__((target("f16c"))) static uint16_t gcc_f16_hw(uint32_t u)
{
	return half_bits((_Float16)as_float(u));
}

static bool have_f16c(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("f16c");
}

static uint16_t gcc_f16(uint32_t u)
{
	static int hw = -1;

	if (hw < 0)
		hw = have_f16c();
	return hw ? gcc_f16_hw(u) : gcc_f16_soft(u);
}

/* A binary floating-point format of prec significant bits (the hidden
 * one included) and exponent bias; exponent field all ones = inf/NaN. */
struct format {
	int prec;
	int bias;
	int exp_bits;
};

static const struct format F16 = { 11, 15, 5 };
static const struct format BF16 = { 8, 127, 8 };

/*
 * Rounds the F32 whose bits are u to fmt, to nearest with ties to even,
 * from the definition: a finite non-zero F32 is M * 2^E (M < 2^24); the
 * target's representable numbers near it are multiples of 2^q with
 * q = max(msb(M) + E - (prec - 1), 1 - bias - (prec - 1)).  NaN gives the
 * canonical quiet NaN with u's sign.
 */
static uint16_t ref_round(uint32_t u, const struct format *fmt)
{
	uint64_t sign = u >> 31, e = (u >> 23) & 0xff, m = u & 0x7fffff;
	uint64_t M, R, rem, half, s;
	int64_t E, q, qmin, top, biased, emax = (1 << fmt->exp_bits) - 1;
	uint64_t out_sign = sign << (fmt->exp_bits + fmt->prec - 1);

	if (e == 255) {
		if (m)
			return (uint16_t)(out_sign | (uint64_t)emax << (fmt->prec - 1) |
					  1ULL << (fmt->prec - 2));
		return (uint16_t)(out_sign | (uint64_t)emax << (fmt->prec - 1));
	}
	M = e ? (m | 1ULL << 23) : m;
	E = e ? (int64_t)e - 150 : -149;
	if (M == 0)
		return (uint16_t)out_sign;
	top = 63 - __builtin_clzll(M);		/* M in [2^top, 2^(top+1)) */
	qmin = 1 - fmt->bias - (fmt->prec - 1);
	q = top + E - (fmt->prec - 1);
	if (q < qmin)
		q = qmin;
	if (q <= E) {				/* exact: more room than bits */
		R = M << (E - q);
	} else {
		s = (uint64_t)(q - E);
		if (s >= 64) {
			R = 0;
			rem = M;
			half = 0;		/* far below half a quantum */
		} else {
			R = M >> s;
			rem = M & ((1ULL << s) - 1);
			half = 1ULL << (s - 1);
		}
		if (s < 64 && (rem > half || (rem == half && (R & 1))))
			R++;
	}
	if (R == 1ULL << fmt->prec) {		/* carried into the next binade */
		R >>= 1;
		q++;
	}
	if (R >= 1ULL << (fmt->prec - 1)) {
		biased = q + (fmt->prec - 1) + fmt->bias;
		if (biased >= emax)
			return (uint16_t)(out_sign | (uint64_t)emax << (fmt->prec - 1));
		return (uint16_t)(out_sign | (uint64_t)biased << (fmt->prec - 1) |
				  (R - (1ULL << (fmt->prec - 1))));
	}
	return (uint16_t)(out_sign | R);	/* subnormal (q == qmin) or zero */
}

static bool is_nan16(uint16_t h, const struct format *fmt)
{
	unsigned mbits = (unsigned)fmt->prec - 1;
	unsigned emax = (1u << fmt->exp_bits) - 1;

	return ((h >> mbits) & emax) == emax && (h & ((1u << mbits) - 1));
}

/* got matches want: bit for bit, or both NaN of the same sign. */
static bool same(uint16_t got, uint16_t want, const struct format *fmt)
{
	if (is_nan16(want, fmt))
		return is_nan16(got, fmt) && (got & 0x8000) == (want & 0x8000);
	return got == want;
}

/* ------------------------------------------------------------------ */
/* The reference itself                                                */
/* ------------------------------------------------------------------ */

/* Hand-checked values, so that the references are not only checked
 * against each other. */
Test(reference, known_values)
{
	static const struct { uint32_t f; uint16_t f16, bf16; } v[] = {
		{ 0x00000000, 0x0000, 0x0000 },		/* +0 */
		{ 0x80000000, 0x8000, 0x8000 },		/* -0 */
		{ 0x3f800000, 0x3c00, 0x3f80 },		/* 1 */
		{ 0xbf800000, 0xbc00, 0xbf80 },		/* -1 */
		{ 0x477fe000, 0x7bff, 0x4780 },		/* 65504: F16 max; BF16 65536 */
		{ 0x477fefff, 0x7bff, 0x4780 },		/* just under 65520 */
		{ 0x477ff000, 0x7c00, 0x4780 },		/* 65520: tie, to inf */
		{ 0x47800000, 0x7c00, 0x4780 },		/* 65536 */
		{ 0x7f7fffff, 0x7c00, 0x7f80 },		/* F32 max: inf in both */
		{ 0x7f7f0000, 0x7c00, 0x7f7f },		/* BF16 max, exact */
		{ 0x7f7f8000, 0x7c00, 0x7f80 },		/* BF16 max + half: tie to even = inf */
		{ 0x7f7f7fff, 0x7c00, 0x7f7f },
		{ 0x7f800000, 0x7c00, 0x7f80 },		/* inf */
		{ 0xff800000, 0xfc00, 0xff80 },		/* -inf */
		{ 0x33800000, 0x0001, 0x3380 },		/* 2^-24: smallest F16 subnormal */
		{ 0x33000000, 0x0000, 0x3300 },		/* 2^-25: tie, to even 0 */
		{ 0x33000001, 0x0001, 0x3300 },		/* just over: up */
		{ 0x33c00000, 0x0002, 0x33c0 },		/* 1.5 * 2^-24: tie, to even 2 */
		{ 0x38800000, 0x0400, 0x3880 },		/* 2^-14: smallest F16 normal */
		{ 0x387fc000, 0x03ff, 0x3880 },		/* largest F16 subnormal */
		{ 0x387fe000, 0x0400, 0x3880 },		/* its tie with 2^-14: up (even) */
		{ 0x3f808000, 0x3c04, 0x3f80 },		/* 1 + 2^-8: BF16 tie, to even */
		{ 0x3f818000, 0x3c0c, 0x3f82 },		/* 1 + 3 * 2^-8: BF16 tie, up */
		{ 0x3f801000, 0x3c00, 0x3f80 },		/* 1 + 2^-11: F16 tie, to even */
		{ 0x3f803000, 0x3c02, 0x3f80 },		/* 1 + 3 * 2^-11: F16 tie, up */
		{ 0x00000001, 0x0000, 0x0000 },		/* smallest F32 subnormal */
		{ 0x00010000, 0x0000, 0x0001 },		/* smallest BF16 subnormal */
		{ 0x00008000, 0x0000, 0x0000 },		/* half of it: tie, to 0 */
		{ 0x00018000, 0x0000, 0x0002 },		/* 1.5 of it: tie, to 2 */
		{ 0x007fffff, 0x0000, 0x0080 },		/* largest F32 subnormal */
	};
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		cr_assert_eq(ref_round(v[i].f, &F16), v[i].f16, "ref f16(%08x) = %04x, want %04x",
			     v[i].f, ref_round(v[i].f, &F16), v[i].f16);
		cr_assert_eq(gcc_f16(v[i].f), v[i].f16, "gcc f16(%08x) = %04x, want %04x",
			     v[i].f, gcc_f16(v[i].f), v[i].f16);
		cr_assert_eq(ref_round(v[i].f, &BF16), v[i].bf16, "ref bf16(%08x) = %04x, want %04x",
			     v[i].f, ref_round(v[i].f, &BF16), v[i].bf16);
		cr_assert_eq(wshard_f32_to_f16(v[i].f), v[i].f16, "f16(%08x) = %04x, want %04x",
			     v[i].f, wshard_f32_to_f16(v[i].f), v[i].f16);
		cr_assert_eq(wshard_f32_to_bf16(v[i].f), v[i].bf16, "bf16(%08x) = %04x, want %04x",
			     v[i].f, wshard_f32_to_bf16(v[i].f), v[i].bf16);
	}
}

/* The generic reference with F16's parameters agrees with GCC: so its
 * BF16 answers come from a checked method. */
Test(reference, generic_matches_gcc)
{
	uint64_t i;

	for (i = 0; i < (1ULL << 32); i += 4099) {
		uint32_t u = (uint32_t)i;

		cr_assert(same(ref_round(u, &F16), gcc_f16(u), &F16),
			  "%08x: ref %04x, gcc %04x", u, ref_round(u, &F16), gcc_f16(u));
	}
}

/* Both builds of GCC's conversion agree (when F16C is there). */
Test(reference, soft_and_hw_agree)
{
	uint64_t i;

	if (!have_f16c())
		cr_skip_test("no F16C on this CPU");
	for (i = 0; i < (1ULL << 32); i += 65537) {
		uint32_t u = (uint32_t)i;

		cr_assert(same(gcc_f16_soft(u), gcc_f16_hw(u), &F16), "%08x: %04x vs %04x", u,
			  gcc_f16_soft(u), gcc_f16_hw(u));
	}
}

/* ------------------------------------------------------------------ */
/* F32 -> F16                                                          */
/* ------------------------------------------------------------------ */

/* Compares inputs [lo, hi) by step with GCC's conversion on F16C. */
__attribute__((target("f16c"))) static uint64_t sweep_hw(uint64_t lo, uint64_t hi,
							 uint64_t step, uint32_t *out_bad)
{
	uint64_t i, bad = 0;

	for (i = lo; i < hi; i += step) {
		uint32_t u = (uint32_t)i;
		uint16_t want = half_bits((_Float16)as_float(u));
		uint16_t got = wshard_f32_to_f16(u);

		if (got != want && !same(got, want, &F16) && bad++ == 0)
			*out_bad = u;
	}
	return bad;
}

static uint64_t sweep_soft(uint64_t lo, uint64_t hi, uint64_t step, uint32_t *out_bad)
{
	uint64_t i, bad = 0;

	for (i = lo; i < hi; i += step) {
		uint32_t u = (uint32_t)i;

		if (!same(wshard_f32_to_f16(u), gcc_f16_soft(u), &F16) && bad++ == 0)
			*out_bad = u;
	}
	return bad;
}

#define CHUNKS 16

/* Chunk k of the 2^32 inputs: every 256th (starting at a different low
 * byte in every chunk), or all of them with WSHARD_TEST_FULL and F16C. */
static void sweep_chunk(unsigned k)
{
	uint64_t lo = (uint64_t)k << 28, hi = lo + (1ULL << 28), bad;
	uint32_t first = 0;
	const char *env = getenv("WSHARD_TEST_FULL");
	bool full = have_f16c() && env && *env && strcmp(env, "0") != 0;

	if (full)
		bad = sweep_hw(lo, hi, 1, &first);
	else if (have_f16c())
		bad = sweep_hw(lo + k * 37 % 256, hi, 256, &first);
	else
		bad = sweep_soft(lo + k * 37 % 256, hi, 256, &first);
	cr_assert_eq(bad, 0, "%llu inputs in [%08llx, %08llx) differ; first %08x: got %04x, "
		     "GCC %04x", (unsigned long long)bad, (unsigned long long)lo,
		     (unsigned long long)hi, first, wshard_f32_to_f16(first), gcc_f16(first));
}

#define SWEEP(k) Test(f16, sweep_##k) { sweep_chunk(k); }
SWEEP(0) SWEEP(1) SWEEP(2) SWEEP(3) SWEEP(4) SWEEP(5) SWEEP(6) SWEEP(7)
SWEEP(8) SWEEP(9) SWEEP(10) SWEEP(11) SWEEP(12) SWEEP(13) SWEEP(14) SWEEP(15)

/*
 * Every exponent with mantissas at every rounding boundary: for each bit
 * position b, 2^b and its neighbours, the patterns that make a tie at
 * each possible shift with an odd or even result, and all-ones.
 */
static void for_each_special(void (*fn)(uint32_t u, void *ctx), void *ctx)
{
	uint32_t s, e, b, k;

	for (s = 0; s < 2; s++)
		for (e = 0; e < 256; e++) {
			uint32_t base = s << 31 | e << 23;

			for (b = 0; b < 23; b++) {
				uint32_t bit = 1u << b;
				uint32_t cand[] = {
					bit, bit - 1, bit + 1, bit | (bit << 1),
					(bit << 1) - 1, 0x7fffff & ~(bit - 1),
					0x7fffff & ~bit, (0x7fffff & ~((bit << 1) - 1)) | bit,
				};

				for (k = 0; k < sizeof(cand) / sizeof(cand[0]); k++)
					fn(base | (cand[k] & 0x7fffff), ctx);
			}
			fn(base, ctx);
			fn(base | 0x7fffff, ctx);
		}
}

static void check_f16(uint32_t u, void *ctx)
{
	(void)ctx;
	cr_assert(same(wshard_f32_to_f16(u), gcc_f16(u), &F16), "f16(%08x) = %04x, GCC %04x",
		  u, wshard_f32_to_f16(u), gcc_f16(u));
}

Test(f16, special_patterns)
{
	for_each_special(check_f16, NULL);
}

/* Everything from half the smallest subnormal to past the largest
 * normal, densely: exponents 101 .. 143, every 16th mantissa (every
 * 1024th with the slow soft-float reference). */
Test(f16, dense_range)
{
	uint32_t s, u, step = have_f16c() ? 16 : 1024;

	for (s = 0; s < 2; s++)
		for (u = 101u << 23; u < 144u << 23; u += step)
			check_f16(s << 31 | u, NULL);
}

/* Around 65504 and 65520, every input. */
Test(f16, overflow_boundary)
{
	uint32_t u;

	for (u = 0x477fc000; u <= 0x47800100; u++) {
		check_f16(u, NULL);
		check_f16(u | 0x80000000u, NULL);
	}
	cr_assert_eq(wshard_f32_to_f16(0x477fefffu), 0x7bff);
	cr_assert_eq(wshard_f32_to_f16(0x477ff000u), 0x7c00);
	cr_assert_eq(wshard_f32_to_f16(0xc77ff000u), 0xfc00);
}

/* Around 2^-25 .. 2^-14, every input. */
Test(f16, subnormal_boundary)
{
	uint32_t u;

	for (u = 0x32ff0000; u <= 0x33c10000; u++)
		check_f16(u, NULL);
	for (u = 0x387f0000; u <= 0x38810000; u++)
		check_f16(u, NULL);
}

/* Each of the 8 F32 NaNs at nans converts (conv, to fmt, called name) to a
 * quiet NaN (the bit quiet set) of its sign. */
static void check_nans(const uint32_t nans[8], uint16_t (*conv)(uint32_t),
		       const struct format *fmt, uint16_t quiet, const char *name)
{
	size_t i;

	for (i = 0; i < 8; i++) {
		uint16_t h = conv(nans[i]);

		cr_assert(is_nan16(h, fmt), "%s(%08x) = %04x is not NaN", name, nans[i], h);
		cr_assert_eq(h >> 15, nans[i] >> 31);
		cr_assert(h & quiet, "%s(%08x) = %04x is not quiet", name, nans[i], h);
	}
}

Test(f16, nan)
{
	static const uint32_t nans[8] = {
		0x7f800001, 0x7fc00000, 0x7fffffff, 0x7f802000, 0x7fa00000,
		0xff800001, 0xffc00000, 0xffffffff,
	};

	check_nans(nans, wshard_f32_to_f16, &F16, 0x0200, "f16");
}

/* ------------------------------------------------------------------ */
/* F32 -> BF16                                                         */
/* ------------------------------------------------------------------ */

static void check_bf16(uint32_t u, void *ctx)
{
	uint16_t got = wshard_f32_to_bf16(u), want = ref_round(u, &BF16);

	(void)ctx;
	cr_assert(same(got, want, &BF16), "bf16(%08x) = %04x, want %04x", u, got, want);
}

/* Every upper half with every kind of lower half: exact, just above and
 * below a tie, the tie, all ones, and a few others. */
Test(bf16, every_upper_half)
{
	static const uint32_t low[] = {
		0x0000, 0x0001, 0x3fff, 0x4000, 0x7ffe, 0x7fff, 0x8000, 0x8001,
		0xc000, 0xfffe, 0xffff, 0x1234, 0x9abc, 0x5555, 0xaaaa, 0xdead,
	};
	uint32_t hi;
	size_t k;

	for (hi = 0; hi < 0x10000; hi++)
		for (k = 0; k < sizeof(low) / sizeof(low[0]); k++)
			check_bf16(hi << 16 | low[k], NULL);
}

Test(bf16, stride_sample)
{
	uint64_t i;

	for (i = 0; i < (1ULL << 32); i += 251)
		check_bf16((uint32_t)i, NULL);
}

Test(bf16, special_patterns)
{
	for_each_special(check_bf16, NULL);
}

Test(bf16, nan)
{
	static const uint32_t nans[8] = {
		0x7f800001, 0x7fc00000, 0x7fffffff, 0x7f80ffff, 0x7f810000,
		0xff800001, 0xffc00000, 0xffffffff,
	};

	check_nans(nans, wshard_f32_to_bf16, &BF16, 0x0040, "bf16");
}

/* ------------------------------------------------------------------ */
/* F16 -> F32 and arrays                                               */
/* ------------------------------------------------------------------ */

static uint32_t gcc_widen(uint16_t h)
{
	_Float16 x;
	float f;
	uint32_t u;

	memcpy(&x, &h, 2);
	f = (float)x;
	memcpy(&u, &f, 4);
	return u;
}

static bool is_nan32(uint32_t u)
{
	return (u & 0x7fffffffu) > 0x7f800000u;
}

Test(widen, every_f16)
{
	uint32_t h;

	for (h = 0; h < 0x10000; h++) {
		uint32_t got = wshard_f16_to_f32((uint16_t)h), want = gcc_widen((uint16_t)h);

		if (is_nan32(want)) {
			cr_assert(is_nan32(got), "f32(%04x) = %08x is not NaN", h, got);
			cr_assert_eq(got >> 31, h >> 15);
			continue;
		}
		cr_assert_eq(got, want, "f32(%04x) = %08x, want %08x", h, got, want);
		/* and back, exactly */
		cr_assert_eq(wshard_f32_to_f16(got), h, "round trip of %04x", h);
	}
}

/* F16 <-> BF16 through F32: one rounding of the exact value.  Buffers
 * start at odd addresses (the data of a tensor need not be aligned). */
Test(widen, convert_arrays)
{
	unsigned char *src = malloc(2 * 0x10000 + 1), *dst = malloc(4 * 0x10000 + 1);
	uint32_t h;

	cr_assert_not_null(src);
	cr_assert_not_null(dst);
	for (h = 0; h < 0x10000; h++) {
		src[1 + 2 * h] = (unsigned char)h;
		src[2 + 2 * h] = (unsigned char)(h >> 8);
	}
	/* F16 -> BF16 */
	wshard_convert_floats(WSHARD_F16, WSHARD_BF16, src + 1, dst + 1, 0x10000);
	for (h = 0; h < 0x10000; h++) {
		uint16_t got = (uint16_t)(dst[1 + 2 * h] | dst[2 + 2 * h] << 8);
		uint16_t want = ref_round(gcc_widen((uint16_t)h), &BF16);

		cr_assert(same(got, want, &BF16), "F16 %04x -> BF16 %04x, want %04x", h, got, want);
	}
	/* BF16 -> F16 */
	wshard_convert_floats(WSHARD_BF16, WSHARD_F16, src + 1, dst + 1, 0x10000);
	for (h = 0; h < 0x10000; h++) {
		uint16_t got = (uint16_t)(dst[1 + 2 * h] | dst[2 + 2 * h] << 8);
		uint16_t want = gcc_f16(h << 16);

		cr_assert(same(got, want, &F16), "BF16 %04x -> F16 %04x, want %04x", h, got, want);
	}
	/* F16 -> F32 and BF16 -> F32: exact */
	wshard_convert_floats(WSHARD_F16, WSHARD_F32, src + 1, dst + 1, 0x10000);
	for (h = 0; h < 0x10000; h++) {
		uint32_t got;

		memcpy(&got, dst + 1 + 4 * h, 4);
		if (!is_nan32(got) || !is_nan32(gcc_widen((uint16_t)h)))
			cr_assert_eq(got, gcc_widen((uint16_t)h), "F16 %04x -> F32 %08x", h, got);
	}
	wshard_convert_floats(WSHARD_BF16, WSHARD_F32, src + 1, dst + 1, 0x10000);
	for (h = 0; h < 0x10000; h++) {
		uint32_t got;

		memcpy(&got, dst + 1 + 4 * h, 4);
		cr_assert_eq(got, h << 16, "BF16 %04x -> F32 %08x", h, got);
	}
	free(src);
	free(dst);
}

Test(widen, convert_f32_arrays)
{
	enum { N = 4096 };
	unsigned char *src = malloc(4 * N + 3), *dst = malloc(2 * N + 3);
	uint32_t x = 12345, v[N];
	size_t i;

	cr_assert_not_null(src);
	cr_assert_not_null(dst);
	for (i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		v[i] = x;
		memcpy(src + 3 + 4 * i, &x, 4);
	}
	wshard_convert_floats(WSHARD_F32, WSHARD_F16, src + 3, dst + 3, N);
	for (i = 0; i < N; i++) {
		uint16_t got;

		memcpy(&got, dst + 3 + 2 * i, 2);
		cr_assert(same(got, gcc_f16(v[i]), &F16), "%08x", v[i]);
	}
	wshard_convert_floats(WSHARD_F32, WSHARD_BF16, src + 3, dst + 3, N);
	for (i = 0; i < N; i++) {
		uint16_t got;

		memcpy(&got, dst + 3 + 2 * i, 2);
		cr_assert(same(got, ref_round(v[i], &BF16), &BF16), "%08x", v[i]);
	}
	wshard_convert_floats(WSHARD_F32, WSHARD_F16, src, dst, 0);
	free(src);
	free(dst);
}

Test(widen, convertible)
{
	int d;

	for (d = 0; d < WSHARD_DTYPE_COUNT; d++)
		cr_assert_eq(wshard_dtype_is_convertible((enum wshard_dtype)d),
			     d == WSHARD_F32 || d == WSHARD_F16 || d == WSHARD_BF16,
			     "%s", wshard_dtype_name((enum wshard_dtype)d));
}

/*
 * -exp(x) from BF16 and F32 (a rule's "neg_exp"): known values exactly
 * (exp(0) = 1, exp(-inf) = 0, ln 2 rounded) and, for every BF16 input of
 * A_log's range, the F32 nearest -exp(x) (long double as the reference).
 */
Test(neg_exp, bf16_and_f32)
{
	static const float xs[] = { 0.0f, -INFINITY, 0.693147182f, -1.0f };
	static const uint32_t want[] = { 0xbf800000, 0x80000000, 0xc0000000, 0xbebc5ab2 };
	uint16_t h[2];
	float out[4], y;
	uint32_t u, i;

	wshard_neg_exp_floats(WSHARD_F32, xs, out, 4);
	for (i = 0; i < 4; i++) {
		memcpy(&u, &out[i], 4);
		cr_assert_eq(u, want[i], "-exp(%g): %08x, want %08x", (double)xs[i], u, want[i]);
	}
	for (i = 0; i < 0x10000; i++) {
		float x;
		uint32_t b = i << 16;

		memcpy(&x, &b, 4);
		if (!(x > -20.0f && x < 20.0f))
			continue;
		h[0] = (uint16_t)i;
		wshard_neg_exp_floats(WSHARD_BF16, h, out, 1);
		y = (float)-expl((long double)x);
		cr_assert(!memcmp(&y, &out[0], 4), "-exp(bf16 %04x = %g): %a, want %a", i,
			  (double)x, (double)out[0], (double)y);
	}
}

/*
 * A tensor's mean as PyTorch computes it on the CPU (a rule's
 * "zero_mean"): the expected bits are torch 2.x's t.mean() of the same
 * vectors, F32 and rounded to BF16 first (x_i = ((7919 i mod 1009) - 504)
 * * scale + 0.7 in F32), on an x86-64 build; the mean of the same values
 * rounded once from a double sum differs from them in 13 of the 20 F32
 * rows (so this checks the order of PyTorch's additions, not just a mean).
 * Then x - mean for a BF16 vector, rounded to BF16, written as F32.
 */
Test(zero_mean, torch_cpu_mean)
{
	static const struct {
		size_t n;
		float scale;
		uint32_t f32, bf16;
	} rows[] = {
		{ 1, 0.0009765625f, 0x3e54ccccu, 0x3e550000u },
		{ 7, 0.0009765625f, 0x3f1aaa0fu, 0x3f1b0000u },
		{ 8, 0.0009765625f, 0x3f2b9334u, 0x3f2c0000u },
		{ 33, 0.0009765625f, 0x3f2f04a7u, 0x3f2f0000u },
		{ 96, 0.0009765625f, 0x3f34c089u, 0x3f350000u },
		{ 256, 0.0009765625f, 0x3f32f472u, 0x3f330000u },
		{ 257, 0.0009765625f, 0x3f32a4c1u, 0x3f330000u },
		{ 1000, 0.0009765625f, 0x3f335e97u, 0x3f330000u },
		{ 4099, 0.0009765625f, 0x3f33394bu, 0x3f330000u },
		{ 32768, 0.0009765625f, 0x3f3333adu, 0x3f330000u },
		{ 1, 0.015625f, 0xc0e5999au, 0xc0e60000u },
		{ 7, 0.015625f, 0xbf555f19u, 0xbf560000u },
		{ 8, 0.015625f, 0x3e64ccc8u, 0x3e640000u },
		{ 33, 0.015625f, 0x3ee094eeu, 0x3ee00000u },
		{ 96, 0.015625f, 0x3f4c0887u, 0x3f4c0000u },
		{ 256, 0.015625f, 0x3f2f4731u, 0x3f2f0000u },
		{ 257, 0.015625f, 0x3f2a4c18u, 0x3f2a0000u },
		{ 1000, 0.015625f, 0x3f35e978u, 0x3f360000u },
		{ 4099, 0.015625f, 0x3f3394deu, 0x3f330000u },
		{ 32768, 0.015625f, 0x3f333af0u, 0x3f330000u },
	};
	float *x = malloc(32768 * sizeof(*x)), m, out[4];
	uint16_t *h = malloc(32768 * sizeof(*h));
	size_t k, i, naive_differs = 0;

	cr_assert(x && h);
	for (k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		double sum = 0;
		uint32_t u;

		for (i = 0; i < rows[k].n; i++) {
			x[i] = (float)((long)(i * 7919 % 1009) - 504) * rows[k].scale + 0.7f;
			memcpy(&u, &x[i], 4);
			h[i] = wshard_f32_to_bf16(u);
			sum += x[i];
		}
		cr_assert_eq(wshard_torch_mean(WSHARD_F32, x, rows[k].n, &m), 0);
		memcpy(&u, &m, 4);
		cr_assert_eq(u, rows[k].f32, "F32 mean of %zu: %08x, want %08x", rows[k].n, u,
			     rows[k].f32);
		naive_differs += (float)(sum / (double)rows[k].n) != m;
		cr_assert_eq(wshard_torch_mean(WSHARD_BF16, h, rows[k].n, &m), 0);
		memcpy(&u, &m, 4);
		cr_assert_eq(u, rows[k].bf16, "BF16 mean of %zu: %08x, want %08x", rows[k].n, u,
			     rows[k].bf16);
	}
	cr_assert_eq(naive_differs, 13);
	/* 1.0 - 0.70703125 in BF16 is 0.29296875 exactly; 0.5 - 0.70703125
	 * is -0.20703125, rounded to BF16 -0.20703125 */
	h[0] = 0x3f80;		/* 1.0 */
	h[1] = 0x3f00;		/* 0.5 */
	wshard_add_floats(WSHARD_BF16, WSHARD_F32, h, out, 2, -0.70703125f, true);
	cr_assert_float_eq(out[0], 0.29296875f, 0);
	cr_assert_float_eq(out[1], -0.20703125f, 0);
	free(x);
	free(h);
}

/*
 * x + c added after the copy into the output's dtype (a rule's "plus",
 * as CUDA offsets a parameter by a Python float): the F32 offset, one
 * rounding.  BF16 0.00830078125 + 0.2: the sum 0.20830078 (F32) rounds to
 * BF16 0x3e55 (0.2080078125), where the offset rounded to BF16 first
 * (0.2001953125, what vLLM's CPU build adds) gives 0x3e56; 1.0 + 0.2
 * rounds to 0x3f9a (1.203125).  From BF16 into F32 the sum is exact F32.
 */
Test(plus, after_the_copy)
{
	uint16_t h[2] = { 0x3c08, 0x3f80 }, o[2];	/* 0.00830078125, 1.0 */
	float out[2], want;

	wshard_add_floats(WSHARD_BF16, WSHARD_BF16, h, o, 2, 0.2f, false);
	cr_assert_eq(o[0], 0x3e55, "%04x", o[0]);
	cr_assert_eq(o[1], 0x3f9a, "%04x", o[1]);
	wshard_add_floats(WSHARD_BF16, WSHARD_F32, h, out, 2, 0.2f, false);
	want = 0.00830078125f + 0.2f;
	cr_assert_float_eq(out[0], want, 0);
	want = 1.0f + 0.2f;
	cr_assert_float_eq(out[1], want, 0);
}
