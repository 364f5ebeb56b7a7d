/*
 * validate_sum_host.h - the host's checksum and round trip, which
 * validate_sum_host.c computes on the fastest path the CPU has.  Internal
 * to cuda/ and its tests.
 */
#ifndef WSHARD_VALIDATE_SUM_HOST_H
#define WSHARD_VALIDATE_SUM_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The checksum both backends compute, on the device and on the host: a
 * 64-bit value that any block-parallel reduction can produce.  Defined in
 * validate_sum.h so that host and device share one definition.
 */
uint64_t wshard_validate_sum(const void *buf, size_t len);
/*
 * The sum of the word contributions of len bytes whose first word is word
 * number first of a larger buffer, before the length is folded in (what
 * wshard_vsum_partial_at in validate_sum.h returns): on the host's
 * fastest path (AVX-512 where the CPU has it).  Pieces whose lengths, all
 * but the last, are multiples of 8 add up to the whole buffer's.
 */
uint64_t wshard_validate_sum_at(const void *buf, size_t len, uint64_t first);
/*
 * Copies len bytes from src to dst (which must not overlap) and returns
 * wshard_validate_sum_at(src, len, first): one pass over the bytes where
 * the CPU has AVX-512, a copy and a sum elsewhere.
 */
uint64_t wshard_validate_copy_sum_at(void *dst, const void *src, size_t len,
				     uint64_t first);

/*
 * One host round trip of len bytes (dev and ret: len bytes each, 64-byte
 * aligned, not overlapping src or each other): copies src to dev, dev to
 * ret, and sets *out_want to wshard_validate_sum_at(src, len, first) and
 * *out_got to the same sum of dev.  Where the CPU has AVX-512 the three
 * steps go a vector at a time, with every value really stored and loaded
 * back.  Returns true if ret holds the bytes of src.
 */
bool wshard_validate_round_trip_at(void *dev, void *ret, const void *src, size_t len,
				   uint64_t first, uint64_t *out_want, uint64_t *out_got);

#endif /* WSHARD_VALIDATE_SUM_HOST_H */
