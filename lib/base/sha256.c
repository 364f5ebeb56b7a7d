/*
 * sha256.c - SHA-256 as specified by FIPS 180-4, so that checksums need no
 * OpenSSL.  Written for clarity first; one block is a plain 64-round loop.
 */
#include <string.h>

#include "sha256.h"

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5,
	0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
	0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
	0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5,
	0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
#define BSIG0(x) (ROR(x, 2) ^ ROR(x, 13) ^ ROR(x, 22))
#define BSIG1(x) (ROR(x, 6) ^ ROR(x, 11) ^ ROR(x, 25))
#define SSIG0(x) (ROR(x, 7) ^ ROR(x, 18) ^ ((x) >> 3))
#define SSIG1(x) (ROR(x, 17) ^ ROR(x, 19) ^ ((x) >> 10))
#define CH(x, y, z) (((x) & (y)) ^ (~(x) & (z)))
#define MAJ(x, y, z) (((x) & (y)) ^ ((x) & (z)) ^ ((y) & (z)))

/* One round; the callers rotate the variable names instead of moving them. */
#define ROUND(a, b, c, d, e, f, g, h, i) do {				\
	uint32_t t1 = h + BSIG1(e) + CH(e, f, g) + K[i] + w[i];		\
	uint32_t t2 = BSIG0(a) + MAJ(a, b, c);				\
	d += t1;							\
	h = t1 + t2;							\
} while (0)

static uint32_t load_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void store_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static void blocks_portable(uint32_t h[8], const unsigned char *p, size_t n)
{
	uint32_t w[64], a, b, c, d, e, f, g, hh;
	int i;

	for (; n; n--, p += 64) {
		for (i = 0; i < 16; i++)
			w[i] = load_be32(p + 4 * i);
		for (i = 16; i < 64; i++)
			w[i] = SSIG1(w[i - 2]) + w[i - 7] + SSIG0(w[i - 15]) +
			       w[i - 16];
		a = h[0]; b = h[1]; c = h[2]; d = h[3];
		e = h[4]; f = h[5]; g = h[6]; hh = h[7];
		for (i = 0; i < 64; i += 8) {
			ROUND(a, b, c, d, e, f, g, hh, i);
			ROUND(hh, a, b, c, d, e, f, g, i + 1);
			ROUND(g, hh, a, b, c, d, e, f, i + 2);
			ROUND(f, g, hh, a, b, c, d, e, i + 3);
			ROUND(e, f, g, hh, a, b, c, d, i + 4);
			ROUND(d, e, f, g, hh, a, b, c, i + 5);
			ROUND(c, d, e, f, g, hh, a, b, i + 6);
			ROUND(b, c, d, e, f, g, hh, a, i + 7);
		}
		h[0] += a; h[1] += b; h[2] += c; h[3] += d;
		h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
	}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SHANI 1
#include <cpuid.h>
#include <immintrin.h>

/*
 * The x86 SHA extensions run far faster than the portable code.  State is kept as ABEF/CDGH halves, as SHA256RNDS2 wants it; each
 * step does four rounds and extends the message schedule four words.
 */
__attribute__((target("sha,sse4.1,ssse3")))
static void blocks_shani(uint32_t h[8], const unsigned char *p, size_t n)
{
	const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL,
					     0x0405060700010203ULL);
	__m128i s0, s1, t, k, abef, cdgh, m[4];
	int i;

	t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xb1);
	s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1b);
	s0 = _mm_alignr_epi8(t, s1, 8);		/* ABEF */
	s1 = _mm_blend_epi16(s1, t, 0xf0);	/* CDGH */
	for (; n; n--, p += 64) {
		abef = s0;
		cdgh = s1;
		for (i = 0; i < 16; i++) {
			if (i < 4) {
				m[i] = _mm_shuffle_epi8(_mm_loadu_si128(
					(const __m128i *)(p + 16 * i)), bswap);
			} else {
				/* W[4i..4i+3] from the four previous groups. */
				__m128i w4 = m[i & 3], w3 = m[(i + 1) & 3];
				__m128i w2 = m[(i + 2) & 3], w1 = m[(i + 3) & 3];

				t = _mm_sha256msg1_epu32(w4, w3);
				t = _mm_add_epi32(t, _mm_alignr_epi8(w1, w2, 4));
				m[i & 3] = _mm_sha256msg2_epu32(t, w1);
			}
			k = _mm_loadu_si128((const __m128i *)&K[4 * i]);
			t = _mm_add_epi32(m[i & 3], k);
			s1 = _mm_sha256rnds2_epu32(s1, s0, t);
			s0 = _mm_sha256rnds2_epu32(s0, s1,
						   _mm_shuffle_epi32(t, 0x0e));
		}
		s0 = _mm_add_epi32(s0, abef);
		s1 = _mm_add_epi32(s1, cdgh);
	}
	t = _mm_shuffle_epi32(s0, 0x1b);	/* FEBA */
	s1 = _mm_shuffle_epi32(s1, 0xb1);	/* DCHG */
	_mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, s1, 0xf0));
	_mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(s1, t, 8));
}

static int cpu_has_shani(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) ||
	    !(c & bit_SSSE3))
		return 0;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	return (b >> 29) & 1;
}
#endif

static void sha256_blocks(struct wshard_sha256 *c, const unsigned char *p,
			  size_t n)
{
#ifdef HAVE_SHANI
	if (c->accel) {
		blocks_shani(c->h, p, n);
		return;
	}
#endif
	blocks_portable(c->h, p, n);
}

void wshard_sha256_init(struct wshard_sha256 *c)
{
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(c->h, iv, sizeof(iv));
	c->nbytes = 0;
	c->nbuf = 0;
#ifdef HAVE_SHANI
	c->accel = cpu_has_shani();
#else
	c->accel = 0;
#endif
}

void wshard_sha256_update(struct wshard_sha256 *c, const void *data,
			  size_t len)
{
	const unsigned char *p = data;

	if (!len)
		return;
	c->nbytes += len;
	if (c->nbuf) {
		size_t take = 64 - c->nbuf;

		if (take > len)
			take = len;
		memcpy(c->buf + c->nbuf, p, take);
		c->nbuf += take;
		p += take;
		len -= take;
		if (c->nbuf < 64)
			return;
		sha256_blocks(c, c->buf, 1);
		c->nbuf = 0;
	}
	if (len >= 64) {
		sha256_blocks(c, p, len / 64);
		p += len / 64 * 64;
		len %= 64;
	}
	if (len) {
		memcpy(c->buf, p, len);
		c->nbuf = len;
	}
}

void wshard_sha256_final(struct wshard_sha256 *c,
			 unsigned char out[WSHARD_SHA256_LEN])
{
	uint64_t bits = c->nbytes * 8;
	int i;

	c->buf[c->nbuf++] = 0x80;
	if (c->nbuf > 56) {
		memset(c->buf + c->nbuf, 0, 64 - c->nbuf);
		sha256_blocks(c, c->buf, 1);
		c->nbuf = 0;
	}
	memset(c->buf + c->nbuf, 0, 56 - c->nbuf);
	for (i = 0; i < 8; i++)
		c->buf[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
	sha256_blocks(c, c->buf, 1);
	for (i = 0; i < 8; i++)
		store_be32(out + 4 * i, c->h[i]);
	c->nbuf = 0;
}
