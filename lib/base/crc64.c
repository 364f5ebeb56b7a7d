/*
 * crc64.c - CRC-64/NVME at memory speed.
 *
 * Four levels of one kernel, each advancing the reflected register over a
 * buffer: one bit at a time (the reference the others are tested
 * against), slice-by-8 tables (the portable level), and on x86-64 two
 * folding kernels built on carry-less multiplication: PCLMULQDQ on eight
 * 128-bit lanes and AVX-512 VPCLMULQDQ on eight 512-bit registers.  The
 * best level the CPU has is picked once, at the first call.
 *
 * Every constant except the polynomial is derived from it at run time by
 * plain polynomial arithmetic over GF(2), so no table of magic numbers
 * can disagree with the polynomial.
 *
 * Notation.  In the reflected domain a 64-bit word w stands for the
 * polynomial sum of w_i x^(63-i) (bit 0 is the highest power), a 128-bit
 * lane for sum v_m x^(127-m); the first byte of a buffer loaded
 * little-endian holds the highest powers.  r(f) is the word standing for
 * a polynomial f of degree below 64.
 */
#include <pthread.h>
#include <string.h>

#include "crc64.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_CLMUL 1
#endif

/* The polynomial (without its x^64 term), reflected: 0xAD93D23594C93659 */
#define POLY_R 0x9A6C9329AC4BC9B5ULL

/* Eight 512-bit registers of 64 bytes each are in flight per iteration. */
#define VREGS 8
/* Folding distances go up to VREGS * 512 bits, in steps of 128. */
#define FOLD_MAX (4 * VREGS)

typedef uint64_t (*crc_fn)(uint64_t reg, const unsigned char *p, size_t len);

static struct {
	uint64_t table[8][256];		/* slice-by-8 */
	uint64_t xpow[67];		/* r(x^(2^k) mod P) */
	/*
	 * fold[m] folds a 128-bit lane forward by 128*m bits (see fold128):
	 * { r(x^(128m+63) mod P), r(x^(128m-1) mod P) }.
	 */
	uint64_t fold[FOLD_MAX + 1][2];
	uint64_t lanes[8];		/* fold[3], fold[2], fold[1], 0 */
	uint64_t barrett[2];		/* { r(mu - x^64), r(P - x^64) } */
	crc_fn best;
	enum wshard_crc64_impl best_impl;
	uint64_t (*shift)(uint64_t reg, uint64_t nbytes);
	bool have_pclmul, have_vpclmul;
} C;

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* ---- the portable levels ---------------------------------------------- */

static uint64_t crc_bitwise(uint64_t reg, const unsigned char *p, size_t len)
{
	int i;

	while (len--) {
		reg ^= *p++;
		/* reg * x: out goes the x^63 bit (bit 0), reduced by P */
		for (i = 0; i < 8; i++)
			reg = (reg >> 1) ^ (POLY_R & (0 - (reg & 1)));
	}
	return reg;
}

static uint64_t load_le64(const unsigned char *p)
{
	uint64_t w;

	memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	w = __builtin_bswap64(w);
#endif
	return w;
}

static uint64_t crc_table(uint64_t reg, const unsigned char *p, size_t len)
{
	uint64_t (*t)[256] = C.table;

	for (; len >= 8; p += 8, len -= 8) {
		uint64_t w = load_le64(p) ^ reg;

		/* the first byte is the farthest from the end: table 7 */
		reg = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^
		      t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
		      t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
		      t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
	}
	while (len--)
		reg = (reg >> 8) ^ t[0][(reg ^ *p++) & 0xff];
	return reg;
}

/*
 * r(a * b mod P), one bit of a at a time: a's bit 63 is x^0, so walk a
 * upwards from there while b is multiplied by x.
 */
static uint64_t mulmod_portable(uint64_t a, uint64_t b)
{
	uint64_t p = 0;
	int i;

	for (i = 63; i >= 0; i--) {
		p ^= b & (0 - ((a >> i) & 1));
		b = (b >> 1) ^ (POLY_R & (0 - (b & 1)));
	}
	return p;
}

/*
 * reg * x^(8 * nbytes) mod P: nbytes = sum of 2^k, so multiply by
 * x^(8 * 2^k) = x^(2^(k+3)) for each k.  The whole loop comes in each
 * flavour of multiplication so that none goes through a pointer.
 */
#define SHIFT_LOOP(mulmod, reg, nbytes)					\
	for (; (nbytes) && (reg); (nbytes) &= (nbytes) - 1)		\
		(reg) = mulmod(reg, C.xpow[__builtin_ctzll(nbytes) + 3])

static uint64_t shift_portable(uint64_t reg, uint64_t nbytes)
{
	SHIFT_LOOP(mulmod_portable, reg, nbytes);
	return reg;
}

/* ---- the x86-64 folding levels ---------------------------------------- */

#ifdef HAVE_CLMUL
#define TARGET_PCLMUL __attribute__((target("sse4.1,pclmul")))
#define TARGET_VPCLMUL \
	__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1")))
#define INLINE_PCLMUL static inline __attribute__((always_inline)) TARGET_PCLMUL

/*
 * Carry-less multiplication in the reflected domain lands one place off:
 * for words a and b, bit k of clmul(a, b) is the coefficient of x^(126-k)
 * of a*b, i.e. the 128-bit lane stands for a*b/x.  The folding constants
 * absorb that: multiplying by r(x^(e-1) mod P) yields a lane standing for
 * a * x^e modulo P.
 */

/*
 * r(A*x^64 + B mod P) for words A, B by Barrett reduction: with
 * mu = floor(x^128 / P) = x^64 + mu', the quotient of A*x^64 by P is
 * q = A + floor(A*mu' / x^64), and the remainder is the low half of q*P'
 * (P' = P - x^64) added to B.  The shifts put back the place that
 * clmul loses.
 */
INLINE_PCLMUL uint64_t barrett(uint64_t a, uint64_t b)
{
	__m128i k = _mm_loadu_si128((const __m128i *)C.barrett);
	__m128i c;
	uint64_t q, lo, hi;

	c = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)a), k, 0x00);
	q = a ^ ((uint64_t)_mm_cvtsi128_si64(c) << 1);
	c = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)q), k, 0x10);
	lo = (uint64_t)_mm_cvtsi128_si64(c);
	hi = (uint64_t)_mm_extract_epi64(c, 1);
	return b ^ (hi << 1) ^ (lo >> 63);
}

/*
 * A lane X = H*x^64 + L (H in the low word) moved forward by d bits:
 * H * x^(d+64) + L * x^d, each product reduced to below x^128 by the
 * constant pair in k (see fold[]).
 */
INLINE_PCLMUL __m128i fold128(__m128i x, __m128i k)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
			     _mm_clmulepi64_si128(x, k, 0x11));
}

/*
 * The register for a message that folded down to the lane x (the last 16
 * bytes, with everything before them folded in): r(X * x^64 mod P).  The
 * high half H goes forward by 64 bits onto the low one, then Barrett.
 */
INLINE_PCLMUL uint64_t reduce128(__m128i x)
{
	__m128i k = _mm_loadu_si128((const __m128i *)C.fold[1]);
	__m128i y = _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x10),
				  _mm_srli_si128(x, 8));

	return barrett((uint64_t)_mm_cvtsi128_si64(y),
		       (uint64_t)_mm_extract_epi64(y, 1));
}

INLINE_PCLMUL __m128i load128(const unsigned char *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* The 16-byte steps and the last bytes after the wide loops, x in hand. */
INLINE_PCLMUL uint64_t finish128(__m128i x, const unsigned char *p, size_t len)
{
	__m128i k = _mm_loadu_si128((const __m128i *)C.fold[1]);

	for (; len >= 16; p += 16, len -= 16)
		x = _mm_xor_si128(fold128(x, k), load128(p));
	/* fewer than 16 bytes left: not worth the shuffles, tables do them */
	return crc_table(reduce128(x), p, len);
}

#define FOLD128(x, k, p) _mm_xor_si128(fold128(x, k), load128(p))

/*
 * Eight lanes of 16 bytes, folded forward by 1024 bits per 128-byte
 * iteration: eight independent chains hide the multiplier's latency.
 * The register goes into the first 8 bytes: reg * x^(8*len) is reg
 * standing where those bytes stand.
 */
INLINE_PCLMUL uint64_t pclmul_body(uint64_t reg, const unsigned char *p, size_t len)
{
	__m128i x0, x1, x2, x3, x4, x5, x6, x7, k;

	if (len < 16)
		return crc_table(reg, p, len);
	x0 = _mm_xor_si128(load128(p), _mm_cvtsi64_si128((long long)reg));
	if (len < 128)
		return finish128(x0, p + 16, len - 16);
	x1 = load128(p + 16);
	x2 = load128(p + 32);
	x3 = load128(p + 48);
	x4 = load128(p + 64);
	x5 = load128(p + 80);
	x6 = load128(p + 96);
	x7 = load128(p + 112);
	k = _mm_loadu_si128((const __m128i *)C.fold[8]);
	for (p += 128, len -= 128; len >= 128; p += 128, len -= 128) {
		x0 = FOLD128(x0, k, p);
		x1 = FOLD128(x1, k, p + 16);
		x2 = FOLD128(x2, k, p + 32);
		x3 = FOLD128(x3, k, p + 48);
		x4 = FOLD128(x4, k, p + 64);
		x5 = FOLD128(x5, k, p + 80);
		x6 = FOLD128(x6, k, p + 96);
		x7 = FOLD128(x7, k, p + 112);
	}
	/* lane i lies 7 - i lanes before the last one */
#define MERGE128(acc, x, m) \
	_mm_xor_si128(acc, fold128(x, _mm_loadu_si128((const __m128i *)C.fold[m])))
	x7 = MERGE128(x7, x0, 7);
	x7 = MERGE128(x7, x1, 6);
	x7 = MERGE128(x7, x2, 5);
	x7 = MERGE128(x7, x3, 4);
	x7 = MERGE128(x7, x4, 3);
	x7 = MERGE128(x7, x5, 2);
	x7 = MERGE128(x7, x6, 1);
#undef MERGE128
	return finish128(x7, p, len);
}

TARGET_PCLMUL static uint64_t crc_pclmul(uint64_t reg, const unsigned char *p, size_t len)
{
	return pclmul_body(reg, p, len);
}

INLINE_PCLMUL uint64_t mulmod_pclmul(uint64_t a, uint64_t b)
{
	__m128i c = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)a),
					 _mm_cvtsi64_si128((long long)b), 0x00);
	uint64_t lo = (uint64_t)_mm_cvtsi128_si64(c);
	uint64_t hi = (uint64_t)_mm_extract_epi64(c, 1);

	/* c stands for a*b/x (see above): one place up, then reduce */
	return barrett(lo << 1, (hi << 1) | (lo >> 63));
}

TARGET_PCLMUL static uint64_t shift_pclmul(uint64_t reg, uint64_t nbytes)
{
	SHIFT_LOOP(mulmod_pclmul, reg, nbytes);
	return reg;
}

#define INLINE_VPCLMUL static inline __attribute__((always_inline)) TARGET_VPCLMUL

/* Three-way XOR in one instruction. */
#define XOR3(a, b, c) _mm512_ternarylogic_epi64(a, b, c, 0x96)

/* Four lanes of z folded forward by the pair in each lane of k, plus acc. */
INLINE_VPCLMUL __m512i fold512(__m512i z, __m512i k, __m512i acc)
{
	return XOR3(_mm512_clmulepi64_epi128(z, k, 0x00),
		    _mm512_clmulepi64_epi128(z, k, 0x11), acc);
}

INLINE_VPCLMUL __m512i load512(const unsigned char *p)
{
	return _mm512_loadu_si512((const void *)p);
}

INLINE_VPCLMUL __m512i fold_const(int m)
{
	return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)C.fold[m]));
}

/*
 * Eight registers of 64 bytes (32 lanes), folded forward by 4096 bits per
 * 512-byte iteration; then merged into one register, which takes the
 * remaining 64-byte blocks, and whose four lanes merge into one lane for
 * the 128-bit steps.  Under 512 bytes the 128-bit kernel is as good.
 * Only AVX-512F instructions besides VPCLMULQDQ: no VL or BW needed.
 */
TARGET_VPCLMUL static uint64_t crc_vpclmul(uint64_t reg, const unsigned char *p, size_t len)
{
	__m512i z0, z1, z2, z3, z4, z5, z6, z7, k;
	__m256i y;
	__m128i x;

	if (len < 64 * VREGS)
		return pclmul_body(reg, p, len);
	z0 = _mm512_xor_si512(load512(p), _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, (long long)reg));
	z1 = load512(p + 64);
	z2 = load512(p + 128);
	z3 = load512(p + 192);
	z4 = load512(p + 256);
	z5 = load512(p + 320);
	z6 = load512(p + 384);
	z7 = load512(p + 448);
	k = fold_const(4 * VREGS);
	for (p += 512, len -= 512; len >= 512; p += 512, len -= 512) {
		z0 = fold512(z0, k, load512(p));
		z1 = fold512(z1, k, load512(p + 64));
		z2 = fold512(z2, k, load512(p + 128));
		z3 = fold512(z3, k, load512(p + 192));
		z4 = fold512(z4, k, load512(p + 256));
		z5 = fold512(z5, k, load512(p + 320));
		z6 = fold512(z6, k, load512(p + 384));
		z7 = fold512(z7, k, load512(p + 448));
	}
	/* register i lies 7 - i registers (of 4 lanes) before the last */
	z7 = fold512(z0, fold_const(28), z7);
	z7 = fold512(z1, fold_const(24), z7);
	z7 = fold512(z2, fold_const(20), z7);
	z7 = fold512(z3, fold_const(16), z7);
	z7 = fold512(z4, fold_const(12), z7);
	z7 = fold512(z5, fold_const(8), z7);
	z7 = fold512(z6, fold_const(4), z7);
	for (k = fold_const(4); len >= 64; p += 64, len -= 64)
		z7 = fold512(z7, k, load512(p));
	/*
	 * Lanes 0..2 forward by 3, 2 and 1 lanes onto lane 3 (whose pair is
	 * zero: the product vanishes and lane 3 comes in unchanged).
	 */
	z7 = fold512(z7, _mm512_loadu_si512((const void *)C.lanes),
		     _mm512_maskz_mov_epi64(0xc0, z7));
	y = _mm256_xor_si256(_mm512_castsi512_si256(z7),
			     _mm512_extracti64x4_epi64(z7, 1));
	x = _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
	return finish128(x, p, len);
}
#endif /* HAVE_CLMUL */

/* ---- constants and dispatch ------------------------------------------- */

static uint64_t reflect64(uint64_t v)
{
	uint64_t r = 0;
	int i;

	for (i = 0; i < 64; i++)
		r |= ((v >> i) & 1) << (63 - i);
	return r;
}

/* r(x^e mod P) from the repeated squares in C.xpow */
static uint64_t xpow_mod(uint64_t e)
{
	uint64_t v = 1ULL << 63;	/* x^0 */
	int k;

	for (k = 0; e; k++, e >>= 1)
		if (e & 1)
			v = mulmod_portable(v, C.xpow[k]);
	return v;
}

/*
 * mu' = floor(x^128 / P) - x^64 in the ordinary (unreflected) order, by
 * long division: bring down one dividend bit at a time; each time x^64
 * appears, subtract P and that bit of the quotient is 1.
 */
static uint64_t barrett_mu(uint64_t poly)
{
	uint64_t r = 0, q = 0;
	int i;

	for (i = 128; i >= 0; i--) {
		uint64_t top = r >> 63;

		r = (r << 1) | (i == 128);
		if (top) {
			r ^= poly;
			if (i < 64)
				q |= 1ULL << i;
		}
	}
	return q;
}

static void init_tables(void)
{
	int n, k;

	for (n = 0; n < 256; n++) {
		unsigned char b = (unsigned char)n;

		C.table[0][n] = crc_bitwise(0, &b, 1);
	}
	for (k = 1; k < 8; k++)
		for (n = 0; n < 256; n++) {
			uint64_t v = C.table[k - 1][n];

			C.table[k][n] = (v >> 8) ^ C.table[0][v & 0xff];
		}
}

static void init_consts(void)
{
	int k, m;

	C.xpow[0] = 1ULL << 62;		/* x */
	for (k = 1; k < 67; k++)
		C.xpow[k] = mulmod_portable(C.xpow[k - 1], C.xpow[k - 1]);
	for (m = 1; m <= FOLD_MAX; m++) {
		C.fold[m][0] = xpow_mod(128 * (uint64_t)m + 63);
		C.fold[m][1] = xpow_mod(128 * (uint64_t)m - 1);
	}
	for (m = 0; m < 3; m++) {
		C.lanes[2 * m] = C.fold[3 - m][0];
		C.lanes[2 * m + 1] = C.fold[3 - m][1];
	}
	C.barrett[0] = reflect64(barrett_mu(reflect64(POLY_R)));
	C.barrett[1] = POLY_R;
}

static void init(void)
{
	init_tables();
	init_consts();
	C.best = crc_table;
	C.best_impl = WSHARD_CRC64_TABLE;
	C.shift = shift_portable;
#ifdef HAVE_CLMUL
	__builtin_cpu_init();
	C.have_pclmul = __builtin_cpu_supports("pclmul") &&
			__builtin_cpu_supports("sse4.1");
	C.have_vpclmul = C.have_pclmul &&
			 __builtin_cpu_supports("avx512f") &&
			 __builtin_cpu_supports("vpclmulqdq");
	if (C.have_pclmul) {
		C.best = crc_pclmul;
		C.best_impl = WSHARD_CRC64_PCLMUL;
		C.shift = shift_pclmul;
	}
	if (C.have_vpclmul) {
		C.best = crc_vpclmul;
		C.best_impl = WSHARD_CRC64_VPCLMUL;
	}
#endif
}

static inline void crc64_init(void)
{
	pthread_once(&once, init);
}

/* ---- the interface ---------------------------------------------------- */

uint64_t wshard_crc64_raw(uint64_t reg, const void *buf, size_t len)
{
	crc64_init();
	return C.best(reg, buf, len);
}

uint64_t wshard_crc64(uint64_t crc, const void *buf, size_t len)
{
	return ~wshard_crc64_raw(~crc, buf, len);
}

uint64_t wshard_crc64_shift(uint64_t reg, uint64_t nbytes)
{
	crc64_init();
	return C.shift(reg, nbytes);
}

uint64_t wshard_crc64_from_raw(uint64_t raw, uint64_t len)
{
	/* the all-ones initial register, moved past the message, and xorout */
	return ~(raw ^ wshard_crc64_shift(~0ULL, len));
}

uint64_t wshard_crc64_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
	/*
	 * crc(a||b) = ~raw(~crc_a, b) = ~(shift(~crc_a, n) ^ raw(0, b)) and
	 * raw(0, b) = ~crc_b ^ shift(~0, n): the ones cancel by linearity.
	 */
	return wshard_crc64_shift(crc_a, len_b) ^ crc_b;
}

enum wshard_crc64_impl wshard_crc64_impl(void)
{
	crc64_init();
	return C.best_impl;
}

bool wshard_crc64_raw_with(enum wshard_crc64_impl impl, uint64_t reg,
			   const void *buf, size_t len, uint64_t *out)
{
	crc_fn fn = NULL;

	crc64_init();
	switch (impl) {
	case WSHARD_CRC64_BITWISE:
		fn = crc_bitwise;
		break;
	case WSHARD_CRC64_TABLE:
		fn = crc_table;
		break;
#ifdef HAVE_CLMUL
	case WSHARD_CRC64_PCLMUL:
		if (C.have_pclmul)
			fn = crc_pclmul;
		break;
	case WSHARD_CRC64_VPCLMUL:
		if (C.have_vpclmul)
			fn = crc_vpclmul;
		break;
#endif
	default:
		break;
	}
	if (!fn)
		return false;
	*out = fn(reg, buf, len);
	return true;
}
