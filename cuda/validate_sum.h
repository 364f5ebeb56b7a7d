/*
 * validate_sum.h - the round-trip checksum, defined once for the host
 * (validate_sum_host.c) and the device (validate_cuda.cu) so that both compute
 * the same 64-bit value.
 *
 * The buffer is read as little-endian 64-bit words, the last one padded
 * with zero bytes.  Word i contributes word * (2i + 1); the contributions
 * are summed modulo 2^64 and the sum is finished with the length through
 * the splitmix64 finalizer.  A sum is commutative, so any split of the
 * words over threads, blocks or chunks gives the same partial sums to add;
 * the weight of every word depends on its position, so moving words
 * changes the value.  The weight is odd, hence invertible modulo 2^64: a
 * change of any one word (one flipped bit included) always changes the
 * sum.  Other changes go unnoticed only if their weighted differences add
 * up to a multiple of 2^64: about 2^-64 for random damage, but certain
 * for one structured case, the top bit (bit 63) of two words flipped
 * (2^63 (2i + 1) + 2^63 (2j + 1) = 2^64 (i + j + 1)); the byte comparison
 * that follows every round trip catches what the sum misses.  The length
 * term separates buffers that differ only by trailing zero bytes.
 *
 * The sum is linear in the words, so the host needs no multiplication per
 * word: the sum of the words and the sum of the running sums give
 * sum(i * word) at the end (validate_sum_host.c), two additions a vector.
 *
 * This is not a cryptographic hash and not the manifest's checksum: it
 * only has to catch bytes that a copy to the device and back changed.
 */
#ifndef WSHARD_VALIDATE_SUM_H
#define WSHARD_VALIDATE_SUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define WSHARD_VSUM_FN static inline __host__ __device__
#else
#define WSHARD_VSUM_FN static inline
#endif

#define WSHARD_VSUM_LEN_SALT 0xd6e8feb86659fd93ULL

/* The splitmix64 finalizer: a bijection on 64-bit values (for the end). */
WSHARD_VSUM_FN uint64_t wshard_vsum_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* What word w at word index i adds to the sum. */
WSHARD_VSUM_FN uint64_t wshard_vsum_word(uint64_t w, uint64_t i)
{
	return w * (2 * i + 1);
}

/* The last n (< 8) bytes as a little-endian word padded with zeros. */
WSHARD_VSUM_FN uint64_t wshard_vsum_tail(const unsigned char *p, size_t n)
{
	uint64_t w = 0;
	size_t k;

	for (k = 0; k < n; k++)
		w |= (uint64_t)p[k] << (8 * k);
	return w;
}

/* The checksum of len bytes whose word contributions add up to sum. */
WSHARD_VSUM_FN uint64_t wshard_vsum_final(uint64_t sum, uint64_t len)
{
	return wshard_vsum_mix(sum ^ wshard_vsum_mix(len ^ WSHARD_VSUM_LEN_SALT));
}

/* A little-endian word from 8 bytes at any alignment (host side). */
static inline uint64_t wshard_vsum_load(const unsigned char *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	w = __builtin_bswap64(w);
#endif
	return w;
}

/*
 * The wrapping sum of the word contributions of len bytes at buf, before
 * wshard_vsum_final (host side).  The first word is word number first of
 * the whole buffer, so a buffer can be summed in pieces whose lengths, all
 * but the last, are multiples of 8.  Four accumulators keep the
 * multiplications of consecutive words independent.
 */
static inline uint64_t wshard_vsum_partial_at(const void *buf, size_t len,
					      uint64_t first)
{
	const unsigned char *p = (const unsigned char *)buf;
	size_t nwords = len / 8, i;
	uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;

	for (i = 0; i + 4 <= nwords; i += 4) {
		a0 += wshard_vsum_word(wshard_vsum_load(p + 8 * i), first + i);
		a1 += wshard_vsum_word(wshard_vsum_load(p + 8 * i + 8), first + i + 1);
		a2 += wshard_vsum_word(wshard_vsum_load(p + 8 * i + 16), first + i + 2);
		a3 += wshard_vsum_word(wshard_vsum_load(p + 8 * i + 24), first + i + 3);
	}
	for (; i < nwords; i++)
		a0 += wshard_vsum_word(wshard_vsum_load(p + 8 * i), first + i);
	if (len % 8)
		a0 += wshard_vsum_word(wshard_vsum_tail(p + 8 * nwords, len % 8),
				       first + nwords);
	return a0 + a1 + a2 + a3;
}

static inline uint64_t wshard_vsum_partial(const void *buf, size_t len)
{
	return wshard_vsum_partial_at(buf, len, 0);
}

#endif /* WSHARD_VALIDATE_SUM_H */
