/*
 * dtype.h - dtypes and checksum algorithms beyond what the
 * API needs (dtype.c).  Not part of the API.
 */
#ifndef WSHARD_DTYPE_H
#define WSHARD_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "wshard.h"

/* Parses a safetensors dtype name.  Returns 0, or -1 if unknown. */
int wshard_dtype_parse(const char *name, enum wshard_dtype *out_dt);

/* Bits per element of dt (1 for BOOL is 8: safetensors stores a byte). */
unsigned wshard_dtype_bits(enum wshard_dtype dt);

/*
 * Byte size of a tensor of ndim dimensions shape[] and dtype dt, with
 * every product overflow-checked.  Returns 0 and sets *out_bytes; -1 if
 * the element count or the bit count overflows 64 bits; -2 if the bit
 * count is not a whole number of bytes.
 */
int wshard_tensor_bytes(const uint64_t *shape, int ndim, enum wshard_dtype dt,
			uint64_t *out_bytes);

/*
 * True for an algorithm whose digest of a whole can be computed from the
 * digests of its parts, in any order (CRC-64/NVME): convert then
 * checksums each byte as it writes it, and never reads its output back.
 */
bool wshard_checksum_composable(enum wshard_checksum ck);

/* "xxh3-64", "sha256" or "crc64-nvme". */
const char *wshard_checksum_name(enum wshard_checksum ck);

#endif /* WSHARD_DTYPE_H */
