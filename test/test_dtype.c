/*
 * test_dtype.c - dtype names, sizes in bits, overflow-checked tensor byte
 * sizes, and checksum names.
 */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/hash.h"

static const struct {
	enum wshard_dtype dt;
	const char *name;
	unsigned bits;
} table[] = {
	{ WSHARD_BOOL, "BOOL", 8 },
	{ WSHARD_U8, "U8", 8 },
	{ WSHARD_I8, "I8", 8 },
	{ WSHARD_I16, "I16", 16 },
	{ WSHARD_U16, "U16", 16 },
	{ WSHARD_F16, "F16", 16 },
	{ WSHARD_BF16, "BF16", 16 },
	{ WSHARD_I32, "I32", 32 },
	{ WSHARD_U32, "U32", 32 },
	{ WSHARD_F32, "F32", 32 },
	{ WSHARD_I64, "I64", 64 },
	{ WSHARD_U64, "U64", 64 },
	{ WSHARD_F64, "F64", 64 },
	{ WSHARD_C64, "C64", 64 },
	{ WSHARD_F8_E5M2, "F8_E5M2", 8 },
	{ WSHARD_F8_E4M3, "F8_E4M3", 8 },
	{ WSHARD_F8_E8M0, "F8_E8M0", 8 },
	{ WSHARD_F8_E4M3FNUZ, "F8_E4M3FNUZ", 8 },
	{ WSHARD_F8_E5M2FNUZ, "F8_E5M2FNUZ", 8 },
	{ WSHARD_F4, "F4", 4 },
	{ WSHARD_F6_E2M3, "F6_E2M3", 6 },
	{ WSHARD_F6_E3M2, "F6_E3M2", 6 },
};

#define NTABLE (sizeof(table) / sizeof(table[0]))

Test(dtype, table_covers_every_dtype)
{
	cr_assert_eq(NTABLE, WSHARD_DTYPE_COUNT);
}

Test(dtype, names_and_bits)
{
	enum wshard_dtype dt;
	size_t i;

	for (i = 0; i < NTABLE; i++) {
		cr_assert_str_eq(wshard_dtype_name(table[i].dt), table[i].name);
		cr_assert_eq(wshard_dtype_bits(table[i].dt), table[i].bits,
			     "%s", table[i].name);
		dt = WSHARD_DTYPE_COUNT;
		cr_assert_eq(wshard_dtype_parse(table[i].name, &dt), 0);
		cr_assert_eq(dt, table[i].dt, "%s", table[i].name);
	}
}

Test(dtype, out_of_range)
{
	cr_assert_str_eq(wshard_dtype_name(WSHARD_DTYPE_COUNT), "?");
	cr_assert_str_eq(wshard_dtype_name((enum wshard_dtype)-1), "?");
	cr_assert_eq(wshard_dtype_bits(WSHARD_DTYPE_COUNT), 0);
	cr_assert_eq(wshard_dtype_bits((enum wshard_dtype)1000), 0);
}

Test(dtype, parse_rejects_unknown)
{
	static const char *const bad[] = {
		"", "f32", "F 32", "F32 ", "float32", "BF", "F8", "F6", "F128",
		"bool", "F8_E4M3FN", "?",
	};
	enum wshard_dtype dt;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(wshard_dtype_parse(bad[i], &dt), -1, "'%s'", bad[i]);
	cr_assert_eq(wshard_dtype_parse(NULL, &dt), -1);
}

Test(dtype, bytes_every_dtype)
{
	uint64_t shape[2] = { 4, 6 }, bytes;
	size_t i;

	for (i = 0; i < NTABLE; i++) {
		cr_assert_eq(wshard_tensor_bytes(shape, 2, table[i].dt, &bytes), 0);
		cr_assert_eq(bytes, 24 * table[i].bits / 8, "%s", table[i].name);
	}
}

Test(dtype, scalar_is_one_element)
{
	uint64_t bytes = 99;

	cr_assert_eq(wshard_tensor_bytes(NULL, 0, WSHARD_F32, &bytes), 0);
	cr_assert_eq(bytes, 4);
	cr_assert_eq(wshard_tensor_bytes(NULL, 0, WSHARD_C64, &bytes), 0);
	cr_assert_eq(bytes, 8);
	/* One F4 or F6 element is not a whole byte. */
	cr_assert_eq(wshard_tensor_bytes(NULL, 0, WSHARD_F4, &bytes), -2);
	cr_assert_eq(wshard_tensor_bytes(NULL, 0, WSHARD_F6_E3M2, &bytes), -2);
}

Test(dtype, zero_sized)
{
	uint64_t shape[3] = { 5, 0, 7 }, bytes = 99;

	cr_assert_eq(wshard_tensor_bytes(shape, 3, WSHARD_F64, &bytes), 0);
	cr_assert_eq(bytes, 0);
	cr_assert_eq(wshard_tensor_bytes(shape, 3, WSHARD_F4, &bytes), 0);
	cr_assert_eq(bytes, 0);
	cr_assert_eq(wshard_tensor_bytes(shape, 1, WSHARD_U8, &bytes), 0);
	cr_assert_eq(bytes, 5);
}

Test(dtype, zero_cancels_a_large_product)
{
	uint64_t shape[3] = { UINT64_C(1) << 40, UINT64_C(1) << 40, 0 }, bytes;

	cr_assert_eq(wshard_tensor_bytes(shape, 3, WSHARD_F32, &bytes), 0);
	cr_assert_eq(bytes, 0);
}

Test(dtype, subbyte)
{
	uint64_t bytes, s;

	s = 2;
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F4, &bytes), 0);
	cr_assert_eq(bytes, 1);
	s = 3;
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F4, &bytes), -2);
	s = 4;
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F6_E2M3, &bytes), 0);
	cr_assert_eq(bytes, 3);
	s = 5;
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F6_E2M3, &bytes), -2);
	s = 6;
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F6_E3M2, &bytes), -2);
	s = 8;
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F6_E3M2, &bytes), 0);
	cr_assert_eq(bytes, 6);
}

Test(dtype, element_count_overflow)
{
	uint64_t shape[3] = { UINT64_C(1) << 32, UINT64_C(1) << 32, 2 }, bytes;

	cr_assert_eq(wshard_tensor_bytes(shape, 3, WSHARD_U8, &bytes), -1);
	cr_assert_eq(bytes, 0);
	shape[0] = UINT64_MAX;
	cr_assert_eq(wshard_tensor_bytes(shape, 2, WSHARD_BOOL, &bytes), -1);
}

Test(dtype, byte_count_overflow)
{
	uint64_t s = UINT64_MAX / 2 + 1, bytes;

	/* The element count fits; times 2 bytes it does not. */
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_U8, &bytes), 0);
	cr_assert_eq(bytes, s);
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_BF16, &bytes), -1);
	s = UINT64_MAX / 8 + 1;
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F64, &bytes), -1);
	s = UINT64_MAX / 8;
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F64, &bytes), 0);
	cr_assert_eq(bytes, s * 8);
}

Test(dtype, subbyte_bit_count_overflow)
{
	uint64_t s = UINT64_MAX / 4 + 1, bytes;

	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F4, &bytes), -1);
	s = UINT64_MAX / 6 + 1;
	cr_assert_eq(wshard_tensor_bytes(&s, 1, WSHARD_F6_E2M3, &bytes), -1);
}

Test(dtype, bad_arguments)
{
	uint64_t shape[WSHARD_MAX_DIMS + 1] = { 0 }, bytes;

	cr_assert_eq(wshard_tensor_bytes(shape, -1, WSHARD_U8, &bytes), -1);
	cr_assert_eq(wshard_tensor_bytes(shape, WSHARD_MAX_DIMS + 1, WSHARD_U8,
					 &bytes), -1);
	cr_assert_eq(wshard_tensor_bytes(shape, 1, WSHARD_DTYPE_COUNT, &bytes),
		     -1);
}

Test(dtype, max_dims)
{
	uint64_t shape[WSHARD_MAX_DIMS], bytes;
	int i;

	for (i = 0; i < WSHARD_MAX_DIMS; i++)
		shape[i] = 2;
	cr_assert_eq(wshard_tensor_bytes(shape, WSHARD_MAX_DIMS, WSHARD_I16,
					 &bytes), 0);
	cr_assert_eq(bytes, 512);
}

Test(checksum, names)
{
	enum wshard_checksum ck = WSHARD_CK_SHA256;

	cr_assert_str_eq(wshard_checksum_name(WSHARD_CK_XXH3), "xxh3-64");
	cr_assert_str_eq(wshard_checksum_name(WSHARD_CK_SHA256), "sha256");
	cr_assert_str_eq(wshard_checksum_name(WSHARD_CK_CRC64), "crc64-nvme");
	cr_assert_eq(wshard_checksum_parse("crc64-nvme", &ck), 0);
	cr_assert_eq(ck, WSHARD_CK_CRC64);
	cr_assert_eq(wshard_checksum_parse("crc64", &ck), -1);
	cr_assert_str_eq(wshard_checksum_name((enum wshard_checksum)7), "?");
	cr_assert_eq(wshard_checksum_parse("xxh3-64", &ck), 0);
	cr_assert_eq(ck, WSHARD_CK_XXH3);
	cr_assert_eq(wshard_checksum_parse("sha256", &ck), 0);
	cr_assert_eq(ck, WSHARD_CK_SHA256);
	cr_assert_eq(wshard_checksum_parse("SHA256", &ck), -1);
	cr_assert_eq(wshard_checksum_parse("md5", &ck), -1);
	cr_assert_eq(wshard_checksum_parse("", &ck), -1);
	cr_assert_eq(wshard_checksum_parse(NULL, &ck), -1);
}
