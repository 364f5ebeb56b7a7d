/*
 * manifest.h - wshard.json: what convert wrote, for the engine's operator
 * and for verify.  Not part of the API.
 */
#ifndef WSHARD_MANIFEST_H
#define WSHARD_MANIFEST_H

#include <jansson.h>

#include "wshard.h"

/* Checksums of one rank's output, filled by convert. */
struct manifest_rank_ck {
	char (*file)[WSHARD_DIGEST_HEX];	/* per part */
	char (*tensor)[WSHARD_DIGEST_HEX];	/* per tensor, rank order */
	char backend[128];			/* validation backend */
};

/* The "ranks" entry of rank r.  Returns a new reference, NULL when out of memory. */
json_t *manifest_rank(const struct wshard_plan *plan, int r,
		      const struct manifest_rank_ck *ck);

/*
 * The whole manifest around ranks (an array, stolen), for a run validated
 * with mode by nprocs processes that read proc_read[] bytes each, whose
 * files were fsynced before their rename or not (synced).
 */
json_t *manifest_doc(const struct wshard_plan *plan, json_t *ranks,
		     enum wshard_validate_mode mode, int nprocs,
		     const uint64_t *proc_read, bool synced);

/* Name of a validate mode: "auto", "gpu", "host", "off". */
const char *manifest_validate_name(enum wshard_validate_mode mode);

#endif /* WSHARD_MANIFEST_H */
