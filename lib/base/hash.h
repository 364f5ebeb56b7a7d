/*
 * hash.h - streaming checksums of any of the algorithms of
 * enum wshard_checksum (hash.c).  Not part of the API.
 */
#ifndef WSHARD_HASH_H
#define WSHARD_HASH_H

#include <stddef.h>

#include "wshard.h"

/* Longest hex digest plus NUL. */
#define WSHARD_DIGEST_HEX 65

/* Streaming hash state for any of the algorithms. */
struct wshard_hash {
	enum wshard_checksum algo;
	void *state;
};

/* Starts a hash.  Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err wshard_hash_init(struct wshard_hash *h, enum wshard_checksum algo);
/* Feeds len bytes. */
void wshard_hash_update(struct wshard_hash *h, const void *buf, size_t len);
/* Writes the lowercase hex digest into out (WSHARD_DIGEST_HEX bytes) and
 * releases the state. */
void wshard_hash_final(struct wshard_hash *h, char *out);
/* Releases the state without a digest; accepts an unstarted hash. */
void wshard_hash_release(struct wshard_hash *h);
/*
 * Where digests compose (CRC-64/NVME): makes h the hash of its bytes
 * followed by the len bytes that part (left as it is) has hashed, and
 * returns true.  Returns false, changing nothing, for the others.
 */
bool wshard_hash_append(struct wshard_hash *h, const struct wshard_hash *part,
			uint64_t len);

#endif /* WSHARD_HASH_H */
