/*
 * fpconv.c - IEEE-754 conversions between F32, F16 and BF16, rounding to
 * nearest with ties to even, keeping NaN a (quiet) NaN and infinities
 * infinite.  Bit-exact and independent of the host's FPU modes.
 */
#include <stdint.h>

#include "internal.h"

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
