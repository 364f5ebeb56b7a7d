/*
 * test_crc64.c - CRC-64/NVME: the check value and known answers from
 * another implementation, every kernel level the CPU has against the
 * bitwise reference at every length up to past the widest loop and at
 * every alignment, and the algebra the converter builds on: incremental
 * updates, shifting by zeros, pieces combined in any order, combine().
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "base/crc64.h"

#define CHECK_VALUE 0xAE8B14860A799888ULL	/* of "123456789" */

static const enum wshard_crc64_impl levels[] = {
	WSHARD_CRC64_BITWISE, WSHARD_CRC64_TABLE,
	WSHARD_CRC64_PCLMUL, WSHARD_CRC64_VPCLMUL,
};
#define NLEVELS (sizeof(levels) / sizeof(levels[0]))
static const char *const level_name[] = { "bitwise", "table", "pclmul", "vpclmul" };

static uint64_t xorshift64(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * n bytes of the xorshift64 stream from seed, each word little-endian.
 * The known answers below were computed from the same stream in Python.
 */
static unsigned char *stream(size_t n, uint64_t seed)
{
	unsigned char *p = malloc(n + 8);
	size_t i;
	int b;

	cr_assert_not_null(p);
	for (i = 0; i < n; i += 8) {
		uint64_t w = xorshift64(&seed);

		for (b = 0; b < 8; b++)
			p[i + b] = (unsigned char)(w >> (8 * b));
	}
	return p;
}

static uint64_t raw_at(enum wshard_crc64_impl l, uint64_t reg, const void *buf,
		       size_t len)
{
	uint64_t out = 0;

	cr_assert(wshard_crc64_raw_with(l, reg, buf, len, &out), "%s missing",
		  level_name[l]);
	return out;
}

static bool have(enum wshard_crc64_impl l)
{
	uint64_t out;

	return wshard_crc64_raw_with(l, 0, "", 0, &out);
}

static uint64_t bitwise(uint64_t reg, const void *buf, size_t len)
{
	return raw_at(WSHARD_CRC64_BITWISE, reg, buf, len);
}

Test(crc64, check_value)
{
	size_t i;

	for (i = 0; i < NLEVELS; i++) {
		if (!have(levels[i]))
			continue;
		cr_expect_eq(~raw_at(levels[i], ~0ULL, "123456789", 9), CHECK_VALUE,
			     "%s", level_name[i]);
		cr_expect_eq(raw_at(levels[i], 0, "", 0), 0);
		cr_expect_eq(raw_at(levels[i], 0x1234, NULL, 0), 0x1234);
	}
	cr_expect_eq(wshard_crc64(0, "123456789", 9), CHECK_VALUE);
	cr_expect_eq(wshard_crc64(0, "", 0), 0);
	cr_expect_eq(wshard_crc64(CHECK_VALUE, NULL, 0), CHECK_VALUE);
}

Test(crc64, levels_present)
{
	enum wshard_crc64_impl best = wshard_crc64_impl();
	uint64_t out = 42;

	/* the portable levels are everywhere; the best is one we have */
	cr_assert(have(WSHARD_CRC64_BITWISE));
	cr_assert(have(WSHARD_CRC64_TABLE));
	cr_assert(have(best));
	cr_assert(best >= WSHARD_CRC64_TABLE);
	cr_assert_eq(wshard_crc64_raw(7, "123456789", 9),
		     raw_at(best, 7, "123456789", 9));
	/* an unknown level is refused and *out left alone */
	cr_assert_not(wshard_crc64_raw_with((enum wshard_crc64_impl)99, 0, "x", 1, &out));
	cr_assert_eq(out, 42);
	/* a level beyond the best is one the CPU lacks */
	if (best < WSHARD_CRC64_VPCLMUL)
		cr_assert_not(have(WSHARD_CRC64_VPCLMUL));
}

/*
 * Every level against the reference, for every length 0..1100 (past two
 * iterations of the widest 512-byte loop, with every tail after it) at
 * alignments 0..7, from three starting registers.  The reference runs
 * once per alignment, a byte at a time, giving every prefix's register.
 */
#define SMALL_MAX 1100

Test(crc64, levels_match_bitwise)
{
	static const uint64_t regs[] = { 0, ~0ULL, 0x0123456789abcdefULL };
	unsigned char *buf = stream(SMALL_MAX + 8, 1);
	uint64_t *want = malloc((SMALL_MAX + 1) * sizeof(*want));
	size_t a, r, len, i;

	cr_assert_not_null(want);
	for (r = 0; r < 3; r++)
		for (a = 0; a < 8; a++) {
			want[0] = regs[r];
			for (len = 1; len <= SMALL_MAX; len++)
				want[len] = bitwise(want[len - 1], buf + a + len - 1, 1);
			for (i = 1; i < NLEVELS; i++) {
				if (!have(levels[i]))
					continue;
				for (len = 0; len <= SMALL_MAX; len++)
					cr_assert_eq(raw_at(levels[i], regs[r], buf + a, len),
						     want[len],
						     "%s: length %zu alignment %zu reg %016" PRIx64,
						     level_name[i], len, a, regs[r]);
			}
		}
	free(want);
	free(buf);
}

/* Large buffers: every level against the table level. */
Test(crc64, large_match_table)
{
	static const size_t lens[] = {
		(1 << 20) + 13, 1 << 20, (64 << 10) + 5, (12 << 10) + 1,
		512 * 7 + 63, 4096 + 511,
	};
	unsigned char *buf = stream((1 << 20) + 32, 2);
	size_t i, j, a;

	for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++)
		for (a = 0; a < 4; a++) {
			uint64_t reg = 0x9e3779b97f4a7c15ULL * (j + 1) + a;
			uint64_t want = raw_at(WSHARD_CRC64_TABLE, reg, buf + a, lens[j]);

			for (i = 2; i < NLEVELS; i++)
				if (have(levels[i]))
					cr_assert_eq(raw_at(levels[i], reg, buf + a, lens[j]), want,
						     "%s: length %zu alignment %zu",
						     level_name[i], lens[j], a);
			cr_assert_eq(wshard_crc64_raw(reg, buf + a, lens[j]), want);
		}
	free(buf);
}

/*
 * Known answers from an independent implementation: AWS's
 * awscrt.checksums.crc64nvme() (awscrt 0.38.1 from PyPI) of the stream()
 * bytes from seed 0x9E3779B97F4A7C15, computed in Python with
 *
 *	x, out = seed, bytearray()
 *	while len(out) < n:
 *	    x ^= (x << 13) & M; x ^= x >> 7; x ^= (x << 17) & M
 *	    out += struct.pack('<Q', x)
 *	crc64nvme(bytes(out[:n]))		# M = 2**64 - 1
 */
Test(crc64, known_answers)
{
	static const struct {
		size_t len;
		uint64_t crc;
	} kat[] = {
		{ 1 << 20, 0x861E7D95C3A223E7ULL },
		{ 1000003, 0xA63A896664C74593ULL },
	};
	unsigned char *buf = stream(1 << 20, 0x9E3779B97F4A7C15ULL);
	size_t i, k;

	for (k = 0; k < sizeof(kat) / sizeof(kat[0]); k++) {
		cr_expect_eq(wshard_crc64(0, buf, kat[k].len), kat[k].crc,
			     "length %zu", kat[k].len);
		for (i = 0; i < NLEVELS; i++)
			if (have(levels[i]))
				cr_expect_eq(~raw_at(levels[i], ~0ULL, buf, kat[k].len),
					     kat[k].crc, "%s: length %zu",
					     level_name[i], kat[k].len);
	}
	free(buf);
}

/* Split anywhere, the incremental form gives the one-shot CRC. */
Test(crc64, incremental)
{
	enum { N = 600 };
	unsigned char *buf = stream(N, 3);
	uint64_t whole = wshard_crc64(0, buf, N);
	size_t s, t;

	cr_assert_eq(whole, ~raw_at(WSHARD_CRC64_BITWISE, ~0ULL, buf, N));
	for (s = 0; s <= N; s++)
		cr_assert_eq(wshard_crc64(wshard_crc64(0, buf, s), buf + s, N - s),
			     whole, "split at %zu", s);
	for (s = 0; s <= N; s += 37)
		for (t = s; t <= N; t += 29) {
			uint64_t c = wshard_crc64(0, buf, s);

			c = wshard_crc64(c, buf + s, t - s);
			cr_assert_eq(wshard_crc64(c, buf + t, N - t), whole,
				     "split at %zu and %zu", s, t);
		}
	free(buf);
}

/* Shifting by n bytes is feeding n zero bytes. */
Test(crc64, shift_is_zeros)
{
	static const uint64_t regs[] = { 1, ~0ULL, 0x8000000000000000ULL,
					 0xfedcba9876543210ULL };
	static const uint64_t big[] = { (1 << 20) + 7, 1 << 20, (3 << 20) + 12345,
					(1 << 20) - 1 };
	size_t zlen = (3 << 20) + 12345;
	unsigned char *zeros = calloc(zlen, 1);
	uint64_t want;
	size_t r, n;

	cr_assert_not_null(zeros);
	for (r = 0; r < sizeof(regs) / sizeof(regs[0]); r++) {
		want = regs[r];
		for (n = 0; n <= 300; n++) {
			cr_assert_eq(wshard_crc64_shift(regs[r], n), want,
				     "reg %016" PRIx64 " by %zu", regs[r], n);
			want = bitwise(want, zeros, 1);
		}
		for (n = 0; n < sizeof(big) / sizeof(big[0]); n++)
			cr_assert_eq(wshard_crc64_shift(regs[r], big[n]),
				     raw_at(WSHARD_CRC64_TABLE, regs[r], zeros, big[n]),
				     "reg %016" PRIx64 " by %" PRIu64, regs[r], big[n]);
	}
	cr_assert_eq(wshard_crc64_shift(0, 12345), 0);
	/* beyond what can be fed: shifts compose */
	for (r = 0; r < sizeof(regs) / sizeof(regs[0]); r++) {
		uint64_t a = (1ULL << 40) + 12345, b = (1ULL << 63) + 999;

		cr_assert_eq(wshard_crc64_shift(wshard_crc64_shift(regs[r], a), b),
			     wshard_crc64_shift(regs[r], a + b));
		cr_assert_eq(wshard_crc64_shift(wshard_crc64_shift(regs[r], a), a),
			     wshard_crc64_shift(regs[r], 2 * a));
	}
	free(zeros);
}

/*
 * The property the converter relies on: a message cut into pieces whose
 * raw CRCs are shifted by the bytes after them and XORed, in any order.
 */
Test(crc64, pieces_in_any_order)
{
	enum { L = 20000, MAXP = 64 };
	unsigned char *msg = stream(L, 4);
	uint64_t rng = 5, whole = wshard_crc64_raw(0, msg, L);
	size_t off[MAXP], len[MAXP], order[MAXP];
	int trial;

	cr_assert_eq(wshard_crc64_from_raw(whole, L), wshard_crc64(0, msg, L));
	cr_assert_eq(wshard_crc64_from_raw(0, 0), 0);
	for (trial = 0; trial < 200; trial++) {
		size_t np = 0, pos = 0, i;
		uint64_t acc = 0, reg = xorshift64(&rng);

		/* random cuts, empty pieces included */
		while (pos < L && np < MAXP - 1) {
			size_t n = xorshift64(&rng) % (trial % 4 == 0 ? 40 : 3000);

			n = n > L - pos ? L - pos : n;
			off[np] = pos;
			len[np++] = n;
			pos += n;
		}
		off[np] = pos;
		len[np++] = L - pos;
		for (i = 0; i < np; i++)
			order[i] = i;
		for (i = np - 1; i > 0; i--) {
			size_t j = xorshift64(&rng) % (i + 1), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
		for (i = 0; i < np; i++) {
			size_t p = order[i];

			acc ^= wshard_crc64_shift(wshard_crc64_raw(0, msg + off[p], len[p]),
						  L - off[p] - len[p]);
		}
		cr_assert_eq(acc, whole, "trial %d, %zu pieces", trial, np);
		cr_assert_eq(wshard_crc64_from_raw(acc, L), wshard_crc64(0, msg, L));
		cr_assert_eq(wshard_crc64_raw(reg, msg, L),
			     wshard_crc64_shift(reg, L) ^ whole);
	}
	free(msg);
}

Test(crc64, combine)
{
	enum { N = 3000 };
	unsigned char *buf = stream(N, 6);
	uint64_t whole = wshard_crc64(0, buf, N);
	size_t s;

	for (s = 0; s <= N; s += (s < 40 || s > N - 40) ? 1 : 97)
		cr_assert_eq(wshard_crc64_combine(wshard_crc64(0, buf, s),
						  wshard_crc64(0, buf + s, N - s), N - s),
			     whole, "split at %zu", s);
	cr_assert_eq(wshard_crc64_combine(0, 0, 0), 0);
	cr_assert_eq(wshard_crc64_combine(CHECK_VALUE, 0, 0), CHECK_VALUE);
	cr_assert_eq(wshard_crc64_combine(0, CHECK_VALUE, 9), CHECK_VALUE);
	free(buf);
}
