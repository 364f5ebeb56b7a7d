/*
 * test_validate_sum.c - the checksum both round-trip backends share
 * (validate_sum.h): known answers, what it detects (every bit flip, word
 * swaps, the length), any split among threads, unaligned buffers, and the
 * fast path against the portable one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "base/validate.h"
#include "validate_sum.h"
#include "validate_sum_host.h"
#include "test_util.h"

Test(validate_sum, sum_known_answers)
{
	/*
	 * Pinned so that a change to the definition is a deliberate one;
	 * the values were also computed by an independent Python model.
	 */
	const unsigned char abc[] = "abcdefghijklmnopqrstuvwxyz";

	cr_assert_eq(wshard_validate_sum(NULL, 0), 0x1418ad486594e4daULL,
		     "%016" PRIx64, wshard_validate_sum(NULL, 0));
	cr_assert_eq(wshard_validate_sum(abc, 26), 0xcb779b8527b56052ULL,
		     "%016" PRIx64, wshard_validate_sum(abc, 26));
}

Test(validate_sum, sum_different_data)
{
	unsigned char *a = random_bytes(1000, 1), *b = random_bytes(1000, 2);

	cr_assert_eq(wshard_validate_sum(a, 1000), wshard_validate_sum(a, 1000));
	cr_assert_neq(wshard_validate_sum(a, 1000), wshard_validate_sum(b, 1000));
	free(a);
	free(b);
}

Test(validate_sum, sum_every_bit_flip_detected)
{
	unsigned char *a = random_bytes(67, 12);
	uint64_t want = wshard_validate_sum(a, 67);
	size_t i;
	int bit;

	for (i = 0; i < 67; i++)
		for (bit = 0; bit < 8; bit++) {
			a[i] ^= (unsigned char)(1u << bit);
			cr_assert_neq(wshard_validate_sum(a, 67), want,
				      "byte %zu bit %d", i, bit);
			a[i] ^= (unsigned char)(1u << bit);
		}
	cr_assert_eq(wshard_validate_sum(a, 67), want);
	free(a);
}

Test(validate_sum, sum_swaps_detected)
{
	unsigned char *a = random_bytes(256, 13);
	uint64_t want = wshard_validate_sum(a, 256);
	unsigned char t, w[8];

	/* Two bytes inside one word. */
	t = a[3]; a[3] = a[4]; a[4] = t;
	cr_assert_neq(wshard_validate_sum(a, 256), want);
	t = a[3]; a[3] = a[4]; a[4] = t;
	/* Two bytes in different words. */
	t = a[5]; a[5] = a[200]; a[200] = t;
	cr_assert_neq(wshard_validate_sum(a, 256), want);
	t = a[5]; a[5] = a[200]; a[200] = t;
	/* Two whole words. */
	memcpy(w, a + 8, 8);
	memcpy(a + 8, a + 64, 8);
	memcpy(a + 64, w, 8);
	cr_assert_neq(wshard_validate_sum(a, 256), want);
	free(a);
}

Test(validate_sum, sum_swap_of_zero_and_nonzero_words)
{
	/* Mostly zero data, as padded tensors are. */
	unsigned char a[64] = { 0 }, b[64] = { 0 };

	a[0] = 1;
	b[8] = 1;
	cr_assert_neq(wshard_validate_sum(a, 64), wshard_validate_sum(b, 64));
}

Test(validate_sum, sum_length_matters)
{
	const unsigned char z[16] = { 'a', 'b', 'c' };
	size_t n;

	/* Trailing zero bytes pad to the same words; the length tells. */
	for (n = 1; n < 16; n++) {
		cr_assert_neq(wshard_validate_sum(z, n), wshard_validate_sum(z, n + 1),
			      "%zu", n);
		cr_assert_neq(wshard_validate_sum(z, n - 1), wshard_validate_sum(z, n),
			      "%zu", n);
	}
	cr_assert_neq(wshard_validate_sum(z, 0), wshard_validate_sum(z, 16));
}

/* The reduction shape of the CUDA kernel, run on the host: any number of
 * threads summing strided words gives the same checksum. */
Test(validate_sum, sum_any_thread_split)
{
	static const size_t threads[] = { 1, 2, 3, 32, 256, 1000, 5000 };
	const size_t len = 4099 * 8 + 5;
	unsigned char *a = random_bytes(len, 14);
	size_t nwords = len / 8, k, t, i;

	for (k = 0; k < sizeof(threads) / sizeof(threads[0]); k++) {
		uint64_t total = 0;

		for (t = 0; t < threads[k]; t++) {
			uint64_t acc = 0;

			for (i = t; i < nwords; i += threads[k])
				acc += wshard_vsum_word(wshard_vsum_load(a + 8 * i), i);
			if (t == 0)
				acc += wshard_vsum_word(
					wshard_vsum_tail(a + 8 * nwords, len % 8),
					nwords);
			total += acc;
		}
		cr_assert_eq(wshard_vsum_final(total, len),
			     wshard_validate_sum(a, len), "%zu threads",
			     threads[k]);
	}
	free(a);
}

Test(validate_sum, sum_unaligned_buffer)
{
	unsigned char *a = random_bytes(1001, 15);
	unsigned char *b = malloc(1001 + 3);

	cr_assert_not_null(b);
	memcpy(b + 3, a, 1001);
	cr_assert_eq(wshard_validate_sum(a, 1001), wshard_validate_sum(b + 3, 1001));
	free(a);
	free(b);
}

/* The host's fast paths (AVX-512 where the CPU has it), summing alone or
 * while copying, and the portable definition in validate_sum.h give the
 * same sums, for every length, word numbering and alignment. */
Test(validate_sum, sum_fast_path_matches_portable)
{
	static const uint64_t firsts[] = { 0, 1, 7, 8, 9, 12345, (1ULL << 40) + 3,
					   UINT64_MAX / 16 };
	unsigned char *a = random_bytes(1100, 15);
	unsigned char c[720];
	size_t len, f, off;

	for (off = 0; off < 4; off++)
		for (len = 0; len <= 700; len++)
			for (f = 0; f < sizeof(firsts) / sizeof(firsts[0]); f++) {
				uint64_t want = wshard_vsum_partial_at(a + off, len, firsts[f]);

				cr_assert_eq(wshard_validate_sum_at(a + off, len, firsts[f]), want,
					     "offset %zu, length %zu, first word %" PRIu64,
					     off, len, firsts[f]);
				/* the copying variant: the same sum, and a faithful copy
				 * that writes nothing past its end */
				memset(c, 0x5a, 720);
				cr_assert_eq(wshard_validate_copy_sum_at(c + 3 - off, a + off, len,
									 firsts[f]), want,
					     "copy: offset %zu, length %zu, first word %" PRIu64,
					     off, len, firsts[f]);
				cr_assert(memcmp(c + 3 - off, a + off, len) == 0,
					  "copy: offset %zu, length %zu", off, len);
				cr_assert_eq(c[3 - off + len], 0x5a, "copy wrote past %zu", len);
			}
	for (len = 0; len <= 1100; len += 37)
		cr_assert_eq(wshard_validate_sum(a, len),
			     wshard_vsum_final(wshard_vsum_partial(a, len), len), "%zu", len);
	free(a);
}

/* The fused round trip (AVX-512 where the CPU has it): both sums are the
 * portable definition's, both copies are faithful and nothing is written
 * past them, for every length to 700 bytes, word numbering and alignment
 * of the source. */
Test(validate_sum, round_trip_matches_portable)
{
	static const uint64_t firsts[] = { 0, 1, 9, 12345, (1ULL << 40) + 3, UINT64_MAX / 16 };
	unsigned char *a = random_bytes(1100, 16);
	unsigned char *dev = aligned_alloc(64, 768), *ret = aligned_alloc(64, 768);
	size_t len, f, off;

	cr_assert(dev && ret);
	for (off = 0; off < 4; off++)
		for (len = 0; len <= 700; len++)
			for (f = 0; f < sizeof(firsts) / sizeof(firsts[0]); f++) {
				uint64_t want = wshard_vsum_partial_at(a + off, len, firsts[f]);
				uint64_t w = 1, g = 2;

				memset(dev, 0x5a, 768);
				memset(ret, 0xa5, 768);
				cr_assert(wshard_validate_round_trip_at(dev, ret, a + off, len,
									firsts[f], &w, &g),
					  "offset %zu, length %zu", off, len);
				cr_assert_eq(w, want, "want: offset %zu, length %zu, first %" PRIu64,
					     off, len, firsts[f]);
				cr_assert_eq(g, want, "got: offset %zu, length %zu, first %" PRIu64,
					     off, len, firsts[f]);
				cr_assert(memcmp(dev, a + off, len) == 0 &&
					  memcmp(ret, a + off, len) == 0, "copies: length %zu", len);
				cr_assert(dev[len] == 0x5a && ret[len] == 0xa5,
					  "wrote past %zu", len);
			}
	free(dev);
	free(ret);
	free(a);
}
