/*
 * sha256.h - a small self-contained SHA-256 (FIPS 180-4), internal to
 * libwshard.  hash.c wraps it behind struct wshard_hash.
 */
#ifndef WSHARD_SHA256_H
#define WSHARD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define WSHARD_SHA256_LEN 32

struct wshard_sha256 {
	uint32_t h[8];
	uint64_t nbytes;		/* message length so far */
	unsigned char buf[64];		/* partial block */
	size_t nbuf;
	int accel;			/* 1: x86 SHA extensions; tests may
					 * clear it after init */
};

void wshard_sha256_init(struct wshard_sha256 *c);
void wshard_sha256_update(struct wshard_sha256 *c, const void *data,
			  size_t len);
/* Writes the 32-byte digest; c must be initialised again before reuse. */
void wshard_sha256_final(struct wshard_sha256 *c,
			 unsigned char out[WSHARD_SHA256_LEN]);

#endif /* WSHARD_SHA256_H */
