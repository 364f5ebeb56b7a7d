/*
 * test_hash.c - SHA-256 known-answer vectors (FIPS 180-4 examples and
 * padding edge lengths) and XXH3-64 digests as printed by Python's
 * xxhash.xxh3_64_hexdigest, one-shot and streamed in odd chunks; CRC-64/NVME
 * digests as Python's awscrt computes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "base/sha256.h"
#include "wshard.h"
#include "base/dtype.h"
#include "base/hash.h"

/* Hashes len bytes of buf in chunks of chunk bytes (0: all at once). */
static void digest(enum wshard_checksum algo, const void *buf, size_t len,
		   size_t chunk, char *out)
{
	const unsigned char *p = buf;
	struct wshard_hash h;
	size_t off = 0;

	cr_assert_eq(wshard_hash_init(&h, algo), WSHARD_OK);
	if (!chunk)
		chunk = len ? len : 1;
	while (off < len) {
		size_t n = len - off < chunk ? len - off : chunk;

		wshard_hash_update(&h, p + off, n);
		off += n;
	}
	wshard_hash_final(&h, out);
	cr_assert_null(h.state);
}

static void check(enum wshard_checksum algo, const void *buf, size_t len,
		  const char *want)
{
	static const size_t chunks[] = { 0, 1, 3, 55, 63, 64, 65, 127, 1000 };
	char out[WSHARD_DIGEST_HEX];
	size_t i;

	for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		if (chunks[i] == 1 && len > 100000)
			continue;
		digest(algo, buf, len, chunks[i], out);
		cr_assert_str_eq(out, want, "length %zu in chunks of %zu", len,
				 chunks[i]);
	}
}

Test(sha256, empty)
{
	check(WSHARD_CK_SHA256, "", 0,
	      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

Test(sha256, abc)
{
	check(WSHARD_CK_SHA256, "abc", 3,
	      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

Test(sha256, nist_448_bits)
{
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

	check(WSHARD_CK_SHA256, m, strlen(m),
	      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

Test(sha256, nist_896_bits)
{
	const char *m = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
			"hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";

	check(WSHARD_CK_SHA256, m, strlen(m),
	      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

Test(sha256, million_a)
{
	char *m = malloc(1000000);

	cr_assert_not_null(m);
	memset(m, 'a', 1000000);
	check(WSHARD_CK_SHA256, m, 1000000,
	      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(m);
}

/* Lengths around the 55/56 and 64-byte padding boundaries. */
Test(sha256, padding_boundaries)
{
	static const struct {
		size_t len;
		const char *hex;
	} v[] = {
		{ 55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b" },
		{ 56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27" },
		{ 63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055" },
		{ 64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241" },
		{ 65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e" },
		{ 119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e" },
		{ 120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5" },
		{ 127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07" },
		{ 128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6" },
	};
	unsigned char buf[128];
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		check(WSHARD_CK_SHA256, buf, v[i].len, v[i].hex);
}

Test(sha256, internal_interface)
{
	static const unsigned char want[WSHARD_SHA256_LEN] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea,
		0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
		0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c,
		0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
	};
	unsigned char out[WSHARD_SHA256_LEN];
	struct wshard_sha256 c;

	wshard_sha256_init(&c);
	wshard_sha256_update(&c, "a", 1);
	wshard_sha256_update(&c, "", 0);
	wshard_sha256_update(&c, "bc", 2);
	wshard_sha256_final(&c, out);
	cr_assert_arr_eq(out, want, sizeof(want));
}

/* Digest of buf with the internal interface; accel 0 forces portable C. */
static void sha_raw(const void *buf, size_t len, size_t chunk, int accel,
		    unsigned char out[WSHARD_SHA256_LEN])
{
	const unsigned char *p = buf;
	struct wshard_sha256 c;
	size_t off = 0, n;

	wshard_sha256_init(&c);
	if (!accel)
		c.accel = 0;
	while (off < len) {
		n = len - off < chunk ? len - off : chunk;
		wshard_sha256_update(&c, p + off, n);
		off += n;
	}
	wshard_sha256_final(&c, out);
}

static void to_hex(const unsigned char *d, char *out)
{
	int i;

	for (i = 0; i < WSHARD_SHA256_LEN; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

Test(sha256, portable_code_known_answers)
{
	unsigned char d[WSHARD_SHA256_LEN];
	char hex[WSHARD_DIGEST_HEX];
	char *m = malloc(1000000);

	sha_raw("abc", 3, 64, 0, d);
	to_hex(d, hex);
	cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha_raw("", 0, 64, 0, d);
	to_hex(d, hex);
	cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	memset(m, 'a', 1000000);
	sha_raw(m, 1000000, 4096, 0, d);
	to_hex(d, hex);
	cr_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(m);
}

/* Whichever block function the CPU gets agrees with the portable one. */
Test(sha256, accelerated_matches_portable)
{
	unsigned char buf[700], a[WSHARD_SHA256_LEN], b[WSHARD_SHA256_LEN];
	uint32_t x = 12345;
	size_t len, i;

	for (i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (unsigned char)(x >> 16);
	}
	for (len = 0; len <= sizeof(buf); len += 7) {
		sha_raw(buf, len, 1000, 1, a);
		sha_raw(buf, len, 1000, 0, b);
		cr_assert_arr_eq(a, b, sizeof(a), "length %zu", len);
		sha_raw(buf, len, 13, 1, a);
		cr_assert_arr_eq(a, b, sizeof(a), "length %zu in 13s", len);
	}
}

Test(xxh3, empty)
{
	check(WSHARD_CK_XXH3, "", 0, "2d06800538d394c2");
}

Test(xxh3, short_inputs)
{
	check(WSHARD_CK_XXH3, "a", 1, "e6c632b61e964e1f");
	check(WSHARD_CK_XXH3, "abc", 3, "78af5f94892f3950");
	check(WSHARD_CK_XXH3, "xxhash", 6, "aa4c2b42ae6b13de");
}

Test(xxh3, kilobyte)
{
	unsigned char buf[1024];
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)i;
	check(WSHARD_CK_XXH3, buf, sizeof(buf), "a870f92984398d22");
}

Test(xxh3, million_a)
{
	char *m = malloc(1000000);

	cr_assert_not_null(m);
	memset(m, 'a', 1000000);
	check(WSHARD_CK_XXH3, m, 1000000, "b1fd6fae5285c4eb");
	free(m);
}

Test(xxh3, digest_is_16_hex_digits_with_leading_zeros)
{
	char out[WSHARD_DIGEST_HEX];
	unsigned char b = 0;
	int i, found = 0;

	/* Some one-byte input hashes to a value below 2^60. */
	for (i = 0; i < 256 && !found; i++) {
		b = (unsigned char)i;
		digest(WSHARD_CK_XXH3, &b, 1, 0, out);
		cr_assert_eq(strlen(out), 16);
		found = out[0] == '0';
	}
	cr_assert(found, "no digest with a leading zero among 256 inputs");
}

Test(hash, release_without_final)
{
	struct wshard_hash h;
	struct wshard_hash unstarted = { 0 };

	cr_assert_eq(wshard_hash_init(&h, WSHARD_CK_XXH3), WSHARD_OK);
	wshard_hash_update(&h, "abc", 3);
	wshard_hash_release(&h);
	cr_assert_null(h.state);
	wshard_hash_release(&h);
	cr_assert_eq(wshard_hash_init(&h, WSHARD_CK_SHA256), WSHARD_OK);
	wshard_hash_release(&h);
	wshard_hash_release(&unstarted);
	wshard_hash_release(NULL);
}

Test(hash, sha256_digest_is_64_hex_digits)
{
	char out[WSHARD_DIGEST_HEX];

	digest(WSHARD_CK_SHA256, "x", 1, 0, out);
	cr_assert_eq(strlen(out), 64);
	cr_assert_eq(strspn(out, "0123456789abcdef"), 64);
}

/*
 * CRC-64/NVME through the streaming interface: the catalogue's check
 * value, and a digest computed by Python's awscrt
 * ('%016x' % awscrt.checksums.crc64nvme(bytes((i * 7 + 3) & 255 for i in
 * range(1000))))), in odd chunks.  (crc64.c itself: test_crc64.c.)
 */
Test(crc64, streamed)
{
	unsigned char buf[1000];
	size_t i;

	check(WSHARD_CK_CRC64, "", 0, "0000000000000000");
	check(WSHARD_CK_CRC64, "123456789", 9, "ae8b14860a799888");
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	check(WSHARD_CK_CRC64, buf, sizeof(buf), "387e868bd14debed");
	cr_assert(wshard_checksum_composable(WSHARD_CK_CRC64));
	cr_assert(!wshard_checksum_composable(WSHARD_CK_XXH3));
	cr_assert(!wshard_checksum_composable(WSHARD_CK_SHA256));
}

/* CRC-64/NVME digests compose: "1234" then the 5 bytes "56789" hashed on
 * their own give the check value of "123456789"; the others refuse. */
Test(hash, append_composes_crc64_only)
{
	struct wshard_hash a, b;
	char out[WSHARD_DIGEST_HEX];
	enum wshard_checksum other[] = { WSHARD_CK_XXH3, WSHARD_CK_SHA256 };
	size_t i;

	cr_assert_eq(wshard_hash_init(&a, WSHARD_CK_CRC64), WSHARD_OK);
	cr_assert_eq(wshard_hash_init(&b, WSHARD_CK_CRC64), WSHARD_OK);
	wshard_hash_update(&a, "1234", 4);
	wshard_hash_update(&b, "56789", 5);
	cr_assert(wshard_hash_append(&a, &b, 5));
	wshard_hash_final(&a, out);
	cr_assert_str_eq(out, "ae8b14860a799888");
	/* part is left as it was: still the CRC of "56789" alone */
	wshard_hash_final(&b, out);
	cr_assert_str_eq(out, "f87dc887176ce667");
	for (i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		cr_assert_eq(wshard_hash_init(&a, other[i]), WSHARD_OK);
		cr_assert_eq(wshard_hash_init(&b, other[i]), WSHARD_OK);
		cr_assert_not(wshard_hash_append(&a, &b, 0));
		wshard_hash_release(&a);
		wshard_hash_release(&b);
	}
}
