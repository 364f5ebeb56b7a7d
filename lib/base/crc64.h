/*
 * crc64.h - CRC-64/NVME (a.k.a. CRC-64/ROCKSOFT, AWS S3's "CRC64NVME"),
 * internal to libwshard: width 64, polynomial 0xAD93D23594C93659,
 * reflected in and out, init and xorout all ones; the CRC of "123456789"
 * is 0xAE8B14860A799888.
 *
 * Two views of the same arithmetic.  The raw one is the bare reflected
 * register with no inversions: it is linear (GF(2)) in the register and
 * in the data, so the CRC of a message can be assembled from the raw CRCs
 * of its pieces, computed by different threads in any order:
 *
 *	raw(0, M) == XOR_i shift(raw(0, P_i), L - o_i - l_i)
 *
 * for pieces P_i of M at offsets o_i of lengths l_i (L the length of M),
 * and raw(reg, M) == shift(reg, L) ^ raw(0, M).  The standard view is the
 * CRC that other tools print, incremental like zlib's crc32().
 */
#ifndef WSHARD_CRC64_H
#define WSHARD_CRC64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The kernel: the reflected CRC register reg advanced over len bytes of
 * buf, with no inversions.  buf needs no alignment.  Uses the fastest
 * level the CPU has (see wshard_crc64_impl()).
 */
uint64_t wshard_crc64_raw(uint64_t reg, const void *buf, size_t len);

/*
 * The standard CRC-64/NVME, incremental like zlib's crc32(): the CRC of
 * nothing is 0, and wshard_crc64(wshard_crc64(0, a, n), b, m) is the CRC
 * of a followed by b.  Equal to ~wshard_crc64_raw(~crc, buf, len).
 */
uint64_t wshard_crc64(uint64_t crc, const void *buf, size_t len);

/*
 * The raw register reg after nbytes zero bytes: the same value as
 * wshard_crc64_raw(reg, zeros, nbytes), computed with one carry-less
 * multiplication modulo the polynomial per set bit of nbytes (by the
 * precomputed powers x^(8*2^k) mod P), not by feeding zeros.
 */
uint64_t wshard_crc64_shift(uint64_t reg, uint64_t nbytes);

/*
 * The standard CRC of a message of len bytes whose raw CRC from register
 * 0 is raw: ~(raw ^ wshard_crc64_shift(~0, len)).
 */
uint64_t wshard_crc64_from_raw(uint64_t raw, uint64_t len);

/*
 * The standard CRC of a followed by b from the standard CRCs of a and of
 * b and the length of b, like zlib's crc32_combine().
 */
uint64_t wshard_crc64_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b);

/* Test hooks: the levels of the kernel, slowest first. */
enum wshard_crc64_impl {
	WSHARD_CRC64_BITWISE,	/* one bit at a time: the reference */
	WSHARD_CRC64_TABLE,	/* slice-by-8 tables: the portable level */
	WSHARD_CRC64_PCLMUL,	/* x86 PCLMULQDQ, 128-bit folding */
	WSHARD_CRC64_VPCLMUL,	/* x86 AVX-512 VPCLMULQDQ, 512-bit folding */
};

/* The level wshard_crc64_raw() uses: the best the CPU has. */
enum wshard_crc64_impl wshard_crc64_impl(void);

/*
 * wshard_crc64_raw() through the given level: stores the register in *out
 * and returns true, or returns false and leaves *out alone when the CPU
 * (or the build) lacks that level.
 */
bool wshard_crc64_raw_with(enum wshard_crc64_impl impl, uint64_t reg,
			   const void *buf, size_t len, uint64_t *out);

#endif /* WSHARD_CRC64_H */
