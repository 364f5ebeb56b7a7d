/*
 * fpconv.c - IEEE-754 conversions between F32, F16 and BF16, rounding to
 * nearest with ties to even, keeping NaN a (quiet) NaN and infinities
 * infinite.  Bit-exact and independent of the host's FPU modes.  Also I64
 * to I32 as torch's copy_ narrows it (the low 32 bits), for the integer
 * tables vLLM holds in I32 (DeepSeek-V4's tid2eid).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "wshard.h"
#include "dtype.h"
#include "fpconv.h"

uint16_t wshard_f32_to_bf16(uint32_t f)
{
	if ((f & 0x7fffffffu) > 0x7f800000u)	/* NaN: keep sign, force quiet */
		return (uint16_t)((f >> 16) | 0x0040u);
	return (uint16_t)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

uint16_t wshard_f32_to_f16(uint32_t f)
{
	uint32_t sign = (f >> 16) & 0x8000u;
	uint32_t abs = f & 0x7fffffffu;
	uint32_t exp = abs >> 23, mant = abs & 0x7fffffu;

	if (abs > 0x7f800000u)			/* NaN */
		return (uint16_t)(sign | 0x7e00u | (mant >> 13));
	if (exp >= 143)				/* >= 2^16: overflow to inf */
		return (uint16_t)(sign | 0x7c00u);
	if (exp >= 113) {			/* normal F16 */
		uint32_t h = ((exp - 112) << 10) | (mant >> 13);
		uint32_t rest = mant & 0x1fffu;

		if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
			h++;			/* may carry into inf: correct */
		return (uint16_t)(sign | h);
	}
	if (exp >= 102) {			/* subnormal F16 */
		uint32_t m = mant | 0x800000u;
		unsigned shift = 126 - exp;	/* 14..24 */
		uint32_t h = m >> shift;
		uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);

		if (rest > half || (rest == half && (h & 1u)))
			h++;
		return (uint16_t)(sign | h);
	}
	return (uint16_t)sign;			/* underflow to zero */
}

uint32_t wshard_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;

	if (exp == 0x1f)			/* inf, NaN (payload kept) */
		return sign | 0x7f800000u | (mant << 13);
	if (exp)
		return sign | ((exp + 112) << 23) | (mant << 13);
	if (!mant)
		return sign;
	exp = 113;				/* subnormal: normalise */
	while (!(mant & 0x400u)) {
		mant <<= 1;
		exp--;
	}
	return sign | (exp << 23) | ((mant & 0x3ffu) << 13);
}

bool wshard_dtype_is_convertible(enum wshard_dtype dt)
{
	return dt == WSHARD_F32 || dt == WSHARD_F16 || dt == WSHARD_BF16;
}

bool wshard_dtype_converts(enum wshard_dtype from, enum wshard_dtype to)
{
	if (from == WSHARD_I64 && to == WSHARD_I32)
		return true;
	return from != to && wshard_dtype_is_convertible(from) &&
	       wshard_dtype_is_convertible(to);
}

bool wshard_dtype_int_to_float(enum wshard_dtype from, enum wshard_dtype to)
{
	return (from == WSHARD_I32 || from == WSHARD_I64) && wshard_dtype_is_convertible(to);
}

/* Little-endian I64 to I32: the low four bytes of each element. */
static void narrow_i64(const unsigned char *s, unsigned char *d, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		memcpy(d + i * 4, s + i * 8, 4);
}

static uint32_t load_f32(enum wshard_dtype dt, const unsigned char *p)
{
	uint16_t h;
	uint32_t u;

	if (dt == WSHARD_F32) {
		memcpy(&u, p, 4);
		return u;
	}
	memcpy(&h, p, 2);
	return dt == WSHARD_BF16 ? (uint32_t)h << 16 : wshard_f16_to_f32(h);
}

/* F32 bits u as to (F32, or F16 / BF16 rounded to nearest even) at p. */
static void store_f32(enum wshard_dtype to, uint32_t u, unsigned char *p)
{
	uint16_t h;

	if (to == WSHARD_F32) {
		memcpy(p, &u, 4);
		return;
	}
	h = to == WSHARD_BF16 ? wshard_f32_to_bf16(u) : wshard_f32_to_f16(u);
	memcpy(p, &h, 2);
}

void wshard_scale_floats(enum wshard_dtype from, enum wshard_dtype to,
			 const void *src, void *dst, size_t n, float mul)
{
	const unsigned char *s = src;
	unsigned char *d = dst;
	size_t in = wshard_dtype_bits(from) / 8, out = wshard_dtype_bits(to) / 8, i;

	for (i = 0; i < n; i++) {
		uint32_t u = load_f32(from, s + i * in);
		float f;

		/* rounded to to first, as the copy into vLLM's parameter is */
		if (to == WSHARD_BF16 && from != WSHARD_BF16)
			u = (uint32_t)wshard_f32_to_bf16(u) << 16;
		else if (to == WSHARD_F16 && from != WSHARD_F16)
			u = wshard_f16_to_f32(wshard_f32_to_f16(u));
		memcpy(&f, &u, 4);
		f *= mul;
		memcpy(&u, &f, 4);
		store_f32(to, u, d + i * out);
	}
}

void wshard_convert_floats(enum wshard_dtype from, enum wshard_dtype to,
			   const void *src, void *dst, size_t n)
{
	const unsigned char *s = src;
	unsigned char *d = dst;
	size_t in = wshard_dtype_bits(from) / 8, out = wshard_dtype_bits(to) / 8, i;

	if (from == WSHARD_I64 && to == WSHARD_I32) {
		narrow_i64(s, d, n);
		return;
	}
	if (from == WSHARD_I32 || from == WSHARD_I64) {
		for (i = 0; i < n; i++) {
			int32_t v32;
			int64_t v64;
			float f;
			uint32_t u;

			if (from == WSHARD_I32) {
				memcpy(&v32, s + i * in, 4);
				v64 = v32;
			} else {
				memcpy(&v64, s + i * in, 8);
			}
			/* to F32 first, then F16 / BF16: torch's integer copy_ */
			f = (float)v64;
			memcpy(&u, &f, 4);
			store_f32(to, u, d + i * out);
		}
		return;
	}
	for (i = 0; i < n; i++) {
		/* F16 and BF16 widen to F32 exactly, so each value is rounded once */
		store_f32(to, load_f32(from, s + i * in), d + i * out);
	}
}

void wshard_neg_exp_floats(enum wshard_dtype from, const void *src, void *dst, size_t n)
{
	const unsigned char *s = src;
	unsigned char *d = dst;
	size_t in = wshard_dtype_bits(from) / 8, i;

	for (i = 0; i < n; i++) {
		uint32_t u = load_f32(from, s + i * in);
		float f;

		memcpy(&f, &u, 4);
		f = (float)-exp((double)f);
		memcpy(&u, &f, 4);
		store_f32(WSHARD_F32, u, d + i * 4);
	}
}
