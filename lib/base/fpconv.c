/*
 * fpconv.c - IEEE-754 conversions between F32, F16 and BF16, rounding to
 * nearest with ties to even, keeping NaN a (quiet) NaN and infinities
 * infinite.  Bit-exact and independent of the host's FPU modes.  Also I64
 * to I32 as torch's copy_ narrows it (the low 32 bits), for the integer
 * tables vLLM holds in I32 (DeepSeek-V4's tid2eid).
 */
#include <math.h>
#include <stdlib.h>
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

/* F32 bits u rounded to dt (F32: as it is) and widened back. */
static float round_to(enum wshard_dtype dt, uint32_t u)
{
	float f;

	if (dt == WSHARD_BF16)
		u = (uint32_t)wshard_f32_to_bf16(u) << 16;
	else if (dt == WSHARD_F16)
		u = wshard_f16_to_f32(wshard_f32_to_f16(u));
	memcpy(&f, &u, 4);
	return f;
}

void wshard_scale_floats(enum wshard_dtype from, enum wshard_dtype to,
			 const void *src, void *dst, size_t n, float mul)
{
	const unsigned char *s = src;
	unsigned char *d = dst;
	size_t in = wshard_dtype_bits(from) / 8, out = wshard_dtype_bits(to) / 8, i;

	for (i = 0; i < n; i++) {
		uint32_t u = load_f32(from, s + i * in);
		/* rounded to to first, as the copy into vLLM's parameter is */
		float f = round_to(to, u);

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

/*
 * torch.sum of n contiguous F32 values on the CPU, bit for bit: ATen's
 * SumKernel.cpp (vectorized_inner_sum, row_sum, multi_row_sum) adds in
 * F32, in 8-lane vectors (the reduction kernels' Vectorized<float> is 32
 * bytes on x86-64's DEFAULT, AVX2 and AVX512 builds alike), 4 vectors at
 * a time, through a 4-level cascade; then the vectors past the last four,
 * the four together, the scalar tail, and the 8 lanes in order.  Fewer
 * than 8 values are added as scalars, 4 at a time (row_sum).  A sum
 * rounded once differs from it in the last bits of about every other
 * vector of a few hundred values.
 */
static float torch_sum_f32(const float *x, size_t n)
{
	enum { LANES = 8, ILP = 4, LEVELS = 4 };
	float acc[LEVELS][ILP][LANES] = { { { 0 } } };
	size_t nvec = n / LANES, size = nvec / ILP, i = 0, j, k, v, l;
	unsigned lg = 0, power;
	uint64_t step, mask0;
	float total = 0, part[ILP] = { 0 };

	if (n < LANES) {
		for (k = 0; n >= ILP && k < ILP; k++)
			part[k] += x[k];
		for (i = n / ILP * ILP; i < n; i++)
			part[0] += x[i];
		for (k = 1; k < ILP; k++)
			part[0] += part[k];
		return part[0];
	}
	while (size > 1 && ((size_t)1 << lg) < size)
		lg++;		/* ceil(log2(size)) */
	power = lg / LEVELS > 4 ? lg / LEVELS : 4;
	step = (uint64_t)1 << power;
	mask0 = step - 1;
	while (i + step <= size) {
		for (v = 0; v < step; v++, i++)
			for (k = 0; k < ILP; k++)
				for (l = 0; l < LANES; l++)
					acc[0][k][l] += x[(i * ILP + k) * LANES + l];
		for (j = 1; j < LEVELS; j++) {
			for (k = 0; k < ILP; k++)
				for (l = 0; l < LANES; l++) {
					acc[j][k][l] += acc[j - 1][k][l];
					acc[j - 1][k][l] = 0;
				}
			if (i & (mask0 << (j * power)))
				break;
		}
	}
	for (; i < size; i++)
		for (k = 0; k < ILP; k++)
			for (l = 0; l < LANES; l++)
				acc[0][k][l] += x[(i * ILP + k) * LANES + l];
	for (j = 1; j < LEVELS; j++)
		for (k = 0; k < ILP; k++)
			for (l = 0; l < LANES; l++)
				acc[0][k][l] += acc[j][k][l];
	for (v = size * ILP; v < nvec; v++)
		for (l = 0; l < LANES; l++)
			acc[0][0][l] += x[v * LANES + l];
	for (k = 1; k < ILP; k++)
		for (l = 0; l < LANES; l++)
			acc[0][0][l] += acc[0][k][l];
	for (i = nvec * LANES; i < n; i++)
		total += x[i];
	for (l = 0; l < LANES; l++)
		total += acc[0][0][l];
	return total;
}

int wshard_torch_mean(enum wshard_dtype from, const void *src, size_t n, float *mean)
{
	const unsigned char *s = src;
	float *x = malloc((n ? n : 1) * sizeof(*x)), m;
	size_t in = wshard_dtype_bits(from) / 8, i;
	uint32_t u;

	if (!x)
		return -1;
	for (i = 0; i < n; i++) {
		u = load_f32(from, s + i * in);
		memcpy(&x[i], &u, 4);
	}
	/* an F16 or BF16 tensor's mean: summed in F32, divided in F32, the
	 * quotient rounded to the tensor's dtype once */
	m = n ? torch_sum_f32(x, n) / (float)n : 0;
	free(x);
	memcpy(&u, &m, 4);
	*mean = round_to(from, u);
	return 0;
}

void wshard_add_floats(enum wshard_dtype from, enum wshard_dtype to, const void *src,
		       void *dst, size_t n, float c, bool in_source)
{
	const unsigned char *s = src;
	unsigned char *d = dst;
	size_t in = wshard_dtype_bits(from) / 8, out = wshard_dtype_bits(to) / 8, i;

	for (i = 0; i < n; i++) {
		uint32_t u = load_f32(from, s + i * in);
		/* in_source: the sum is a tensor of from's dtype, then copied;
		 * else x is copied into to's dtype first */
		float f = in_source ? round_to(WSHARD_F32, u) : round_to(to, u);

		f += c;
		memcpy(&u, &f, 4);
		if (in_source) {
			f = round_to(from, u);
			memcpy(&u, &f, 4);
		}
		store_f32(to, u, d + i * out);
	}
}
