/*
 * manifest.h - wshard.json as convert prints it (manifest.c); a tensor's
 * entry is manifest_entry.h's, the reading back manifest_read.h's.  Not
 * part of the API.
 */
#ifndef WSHARD_MANIFEST_H
#define WSHARD_MANIFEST_H

#include <jansson.h>

#include "wshard.h"
#include "base/hash.h"
#include "plan/plan.h"

/* Version of the wshard.json layout; bumped on incompatible change.  2:
 * a tensor's sources may hold runs over experts.  Readers take any
 * version from WSHARD_MANIFEST_VERSION_MIN on (verify and inspect do not
 * read the sources). */
#define WSHARD_MANIFEST_VERSION 2
#define WSHARD_MANIFEST_VERSION_MIN 1

struct manifest_rank_ck;

/*
 * The "ranks" entry of rank r as it appears in wshard.json, without a
 * trailing newline (its lines after the first indented for its place in
 * the document).  Returns a malloc'd string of *out_len bytes, NULL when
 * out of memory.  The entry is printed a tensor at a time: no JSON tree of
 * all of it is ever held.
 */
char *manifest_rank_text(const struct wshard_plan *plan, int r,
			 const struct manifest_rank_ck *ck, size_t *out_len);

/*
 * The manifest without its ranks (their place held by a placeholder), for
 * a run validated with mode by nprocs processes that read proc_read[]
 * bytes each, whose files were fsynced before their rename or not
 * (synced).  More members ("archives") may be added to it.
 */
json_t *manifest_doc(const struct wshard_plan *plan, enum wshard_validate_mode mode,
		     int nprocs, const uint64_t *proc_read, bool synced);

/*
 * The bytes of wshard.json: doc printed with one space of indent per
 * level, its placeholder replaced by the nranks entries rank_text[i]
 * (from manifest_rank_text, rank_len[i] bytes each), and a newline.
 * Returns a malloc'd string of *out_len bytes, NULL when out of memory.
 */
char *manifest_text(json_t *doc, const char *const *rank_text, const size_t *rank_len,
		    int nranks, size_t *out_len);

/* Takes the next len bytes of the manifest; false when it cannot. */
typedef bool (*manifest_out_fn)(void *ctx, const char *buf, size_t len);

/*
 * The same bytes as manifest_text, passed to out in order, about a MiB
 * at a time, so that they are never all in memory.  Returns WSHARD_EIO
 * when out failed (it tells why), WSHARD_ENOMEM when memory ran out.
 */
enum wshard_err manifest_print(json_t *doc, const char *const *rank_text,
			       const size_t *rank_len, int nranks,
			       manifest_out_fn out, void *ctx);

/* Name of a validate mode: "auto", "gpu", "host", "off". */
const char *manifest_validate_name(enum wshard_validate_mode mode);

#endif /* WSHARD_MANIFEST_H */
