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
