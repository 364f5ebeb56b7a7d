/*
 * dtype.c - safetensors dtype names and sizes, and checksum names.
 *
 * Sizes are in bits because the sub-byte float formats (F4, F6_*) pack
 * several elements per byte; a tensor is only storable when its bit count
 * is a whole number of bytes.
 */
#include <string.h>

#include "wshard.h"
#include "dtype.h"
#include "hash.h"

static const struct {
	const char *name;
	unsigned bits;
} dtypes[WSHARD_DTYPE_COUNT] = {
	[WSHARD_BOOL] = { "BOOL", 8 },
	[WSHARD_U8] = { "U8", 8 },
	[WSHARD_I8] = { "I8", 8 },
	[WSHARD_I16] = { "I16", 16 },
	[WSHARD_U16] = { "U16", 16 },
	[WSHARD_F16] = { "F16", 16 },
	[WSHARD_BF16] = { "BF16", 16 },
	[WSHARD_I32] = { "I32", 32 },
	[WSHARD_U32] = { "U32", 32 },
	[WSHARD_F32] = { "F32", 32 },
	[WSHARD_I64] = { "I64", 64 },
	[WSHARD_U64] = { "U64", 64 },
	[WSHARD_F64] = { "F64", 64 },
	[WSHARD_C64] = { "C64", 64 },
	[WSHARD_F8_E5M2] = { "F8_E5M2", 8 },
	[WSHARD_F8_E4M3] = { "F8_E4M3", 8 },
	[WSHARD_F8_E8M0] = { "F8_E8M0", 8 },
	[WSHARD_F8_E4M3FNUZ] = { "F8_E4M3FNUZ", 8 },
	[WSHARD_F8_E5M2FNUZ] = { "F8_E5M2FNUZ", 8 },
	[WSHARD_F4] = { "F4", 4 },
	[WSHARD_F6_E2M3] = { "F6_E2M3", 6 },
	[WSHARD_F6_E3M2] = { "F6_E3M2", 6 },
};

static int dtype_valid(enum wshard_dtype dt)
{
	/* The enum may be unsigned or signed; compare through unsigned. */
	return (unsigned)dt < (unsigned)WSHARD_DTYPE_COUNT;
}

const char *wshard_dtype_name(enum wshard_dtype dt)
{
	if (!dtype_valid(dt))
		return "?";
	return dtypes[dt].name;
}

static const char *const quant_roles[] = {
	[WSHARD_QUANT_NONE] = "",
	[WSHARD_QUANT_WEIGHT] = "weight",
	[WSHARD_QUANT_SCALE] = "scale",
	[WSHARD_QUANT_INPUT_SCALE] = "input_scale",
	[WSHARD_QUANT_ZERO_POINT] = "zero_point",
	[WSHARD_QUANT_SHAPE] = "shape",
};

const char *wshard_quant_role_name(enum wshard_quant_role role)
{
	if ((unsigned)role >= sizeof(quant_roles) / sizeof(quant_roles[0]))
		return "";
	return quant_roles[role];
}

int wshard_quant_role_parse(const char *name, enum wshard_quant_role *out_role)
{
	size_t i;

	*out_role = WSHARD_QUANT_NONE;
	for (i = 0; name && i < sizeof(quant_roles) / sizeof(quant_roles[0]); i++) {
		if (!strcmp(name, quant_roles[i])) {
			*out_role = (enum wshard_quant_role)i;
			return 0;
		}
	}
	return -1;
}

int wshard_dtype_parse(const char *name, enum wshard_dtype *out_dt)
{
	int i;

	if (out_dt)
		*out_dt = WSHARD_BOOL;
	if (!name)
		return -1;
	for (i = 0; i < WSHARD_DTYPE_COUNT; i++) {
		if (!strcmp(name, dtypes[i].name)) {
			if (out_dt)
				*out_dt = (enum wshard_dtype)i;
			return 0;
		}
	}
	return -1;
}

unsigned wshard_dtype_bits(enum wshard_dtype dt)
{
	if (!dtype_valid(dt))
		return 0;
	return dtypes[dt].bits;
}

int wshard_tensor_bytes(const uint64_t *shape, int ndim, enum wshard_dtype dt,
			uint64_t *out_bytes)
{
	uint64_t elems = 1, bits;
	unsigned width;
	int i;

	*out_bytes = 0;
	width = wshard_dtype_bits(dt);
	if (!width || ndim < 0 || ndim > WSHARD_MAX_DIMS)
		return -1;
	/*
	 * A zero dimension makes the tensor empty whatever the others say,
	 * so the product is exact rather than failing on an intermediate
	 * overflow that a zero later cancels.
	 */
	for (i = 0; i < ndim; i++)
		if (shape[i] == 0)
			return 0;
	for (i = 0; i < ndim; i++) {
		if (__builtin_mul_overflow(elems, shape[i], &elems))
			return -1;
	}
	if (width % 8 == 0) {
		if (__builtin_mul_overflow(elems, (uint64_t)(width / 8),
					   out_bytes)) {
			*out_bytes = 0;
			return -1;
		}
		return 0;
	}
	if (__builtin_mul_overflow(elems, (uint64_t)width, &bits))
		return -1;
	if (bits % 8)
		return -2;
	*out_bytes = bits / 8;
	return 0;
}

const char *wshard_checksum_name(enum wshard_checksum ck)
{
	switch (ck) {
	case WSHARD_CK_XXH3: return "xxh3-64";
	case WSHARD_CK_SHA256: return "sha256";
	case WSHARD_CK_CRC64: return "crc64-nvme";
	}
	return "?";
}

bool wshard_checksum_composable(enum wshard_checksum ck)
{
	return ck == WSHARD_CK_CRC64;
}

int wshard_checksum_parse(const char *name, enum wshard_checksum *out_ck)
{
	if (out_ck)
		*out_ck = WSHARD_CK_XXH3;
	if (!name)
		return -1;
	if (!strcmp(name, "xxh3-64")) {
		if (out_ck)
			*out_ck = WSHARD_CK_XXH3;
		return 0;
	}
	if (!strcmp(name, "sha256")) {
		if (out_ck)
			*out_ck = WSHARD_CK_SHA256;
		return 0;
	}
	if (!strcmp(name, "crc64-nvme")) {
		if (out_ck)
			*out_ck = WSHARD_CK_CRC64;
		return 0;
	}
	return -1;
}
