/*
 * hash.c - streaming checksums behind one interface: CRC-64/NVME
 * (crc64.c), whose digests compose from parts; XXH3-64 (libxxhash) for
 * speed; SHA-256 (sha256.c) where a cryptographic digest is wanted.
 * Digests are lowercase hex.  XXH3-64 prints as the 16-digit big-endian
 * rendering of the 64-bit value, which is what xxhash.xxh3_64_hexdigest()
 * prints in Python; CRC-64/NVME likewise (the value of Python's
 * awscrt.checksums.crc64nvme(), as 16 hex digits).
 */
#include <stdio.h>
#include <stdlib.h>

#include <xxhash.h>
/*
 * On x86-64, libxxhash's run-time dispatch picks the widest vector unit
 * the CPU has (AVX2 or AVX-512) for the streaming update: much faster
 * than the SSE2 baseline the library is built for, the same digests.
 */
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#endif
#endif

#include "crc64.h"
#include "sha256.h"
#include "wshard.h"
#include "hash.h"

enum wshard_err wshard_hash_init(struct wshard_hash *h,
				 enum wshard_checksum algo)
{
	h->algo = algo;
	h->state = NULL;
	switch (algo) {
	case WSHARD_CK_XXH3: {
		XXH3_state_t *s = XXH3_createState();

		if (!s)
			return WSHARD_ENOMEM;
		if (XXH3_64bits_reset(s) != XXH_OK) {
			XXH3_freeState(s);
			return WSHARD_ENOMEM;
		}
		h->state = s;
		return WSHARD_OK;
	}
	case WSHARD_CK_SHA256: {
		struct wshard_sha256 *s = malloc(sizeof(*s));

		if (!s)
			return WSHARD_ENOMEM;
		wshard_sha256_init(s);
		h->state = s;
		return WSHARD_OK;
	}
	case WSHARD_CK_CRC64: {
		uint64_t *crc = calloc(1, sizeof(*crc));

		if (!crc)
			return WSHARD_ENOMEM;
		h->state = crc;
		return WSHARD_OK;
	}
	}
	/* An algorithm this build does not know is a caller bug. */
	return WSHARD_EINVAL;
}

void wshard_hash_update(struct wshard_hash *h, const void *buf, size_t len)
{
	if (!h->state || !len)
		return;
	switch (h->algo) {
	case WSHARD_CK_XXH3:
		XXH3_64bits_update(h->state, buf, len);
		break;
	case WSHARD_CK_SHA256:
		wshard_sha256_update(h->state, buf, len);
		break;
	case WSHARD_CK_CRC64:
		*(uint64_t *)h->state = wshard_crc64(*(uint64_t *)h->state, buf, len);
		break;
	}
}

void wshard_hash_final(struct wshard_hash *h, char *out)
{
	unsigned char d[WSHARD_SHA256_LEN];
	int i;

	out[0] = '\0';
	if (!h->state)
		return;
	switch (h->algo) {
	case WSHARD_CK_XXH3:
		snprintf(out, WSHARD_DIGEST_HEX, "%016llx",
			 (unsigned long long)XXH3_64bits_digest(h->state));
		break;
	case WSHARD_CK_SHA256:
		wshard_sha256_final(h->state, d);
		for (i = 0; i < WSHARD_SHA256_LEN; i++)
			snprintf(out + 2 * i, 3, "%02x", d[i]);
		break;
	case WSHARD_CK_CRC64:
		snprintf(out, WSHARD_DIGEST_HEX, "%016llx",
			 (unsigned long long)*(uint64_t *)h->state);
		break;
	}
	wshard_hash_release(h);
}

bool wshard_hash_append(struct wshard_hash *h, const struct wshard_hash *part,
			uint64_t len)
{
	if (h->algo != WSHARD_CK_CRC64 || part->algo != WSHARD_CK_CRC64)
		return false;
	*(uint64_t *)h->state = wshard_crc64_combine(*(uint64_t *)h->state,
						     *(const uint64_t *)part->state, len);
	return true;
}

void wshard_hash_release(struct wshard_hash *h)
{
	if (!h || !h->state)
		return;
	switch (h->algo) {
	case WSHARD_CK_XXH3:
		XXH3_freeState(h->state);
		break;
	case WSHARD_CK_SHA256:
	case WSHARD_CK_CRC64:
		free(h->state);
		break;
	}
	h->state = NULL;
}
