/*
 * test_narrow.c - a rule's "dtype": "I32" on an I64 table (fpconv.c): which
 * pairs convert, and the narrowing torch's copy_ does.
 */
#include <stdint.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/fpconv.h"

/* A rule's "dtype": "I32" on an I64 table keeps each element's low 32 bits,
 * as torch's copy_ into vLLM's I32 parameter does. */
Test(narrow, i64_to_i32)
{
	int64_t src[4] = { 0, 7, -1, ((int64_t)1 << 32) + 5 };
	int32_t dst[4];

	cr_assert(wshard_dtype_converts(WSHARD_I64, WSHARD_I32));
	cr_assert(!wshard_dtype_converts(WSHARD_I32, WSHARD_I64));
	cr_assert(!wshard_dtype_converts(WSHARD_I64, WSHARD_BF16));
	cr_assert(!wshard_dtype_converts(WSHARD_BF16, WSHARD_BF16));
	cr_assert(wshard_dtype_converts(WSHARD_BF16, WSHARD_F32));
	wshard_convert_floats(WSHARD_I64, WSHARD_I32, src, dst, 4);
	cr_assert_eq(dst[0], 0);
	cr_assert_eq(dst[1], 7);
	cr_assert_eq(dst[2], -1);
	cr_assert_eq(dst[3], 5);
}

/* compressed-tensors' expert weight_shape: integers into a float parameter,
 * each to F32 first (rounded to nearest even), then to BF16 or F16, as
 * torch's copy_ does; only when asked (--dtype never turns ints to floats). */
Test(narrow, int_to_float)
{
	int32_t src32[4] = { 2048, 7168, 4304, -3 };
	int64_t src64[2] = { 16777217, 257 };
	uint16_t bf[4], h[2];
	float f[2];

	cr_assert(wshard_dtype_int_to_float(WSHARD_I32, WSHARD_BF16));
	cr_assert(wshard_dtype_int_to_float(WSHARD_I64, WSHARD_F32));
	cr_assert(!wshard_dtype_int_to_float(WSHARD_I32, WSHARD_I64));
	cr_assert(!wshard_dtype_int_to_float(WSHARD_BF16, WSHARD_F32));
	cr_assert(!wshard_dtype_converts(WSHARD_I32, WSHARD_BF16));
	wshard_convert_floats(WSHARD_I32, WSHARD_BF16, src32, bf, 4);
	cr_assert_eq(bf[0], 0x4500);	/* 2048 */
	cr_assert_eq(bf[1], 0x45e0);	/* 7168 */
	cr_assert_eq(bf[2], 0x4586);	/* 4304, halfway between 4288 and 4320: 4288, the even one */
	cr_assert_eq(bf[3], 0xc040);	/* -3 */
	wshard_convert_floats(WSHARD_I64, WSHARD_F32, src64, f, 2);
	cr_assert_eq(f[0], 16777216.0f);	/* 2^24 + 1 rounds to even */
	cr_assert_eq(f[1], 257.0f);
	wshard_convert_floats(WSHARD_I64, WSHARD_F16, src64 + 1, h, 1);
	cr_assert_eq(h[0], 0x5c04);	/* 257 */
}
