/*
 * manifest.h - wshard.json: what convert writes (manifest.c) and the
 * text as verify and inspect read it back (manifest_read.c).  Not part of
 * the API.
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

/* Checksums of one rank's output, filled by convert. */
struct manifest_rank_ck {
	char (*file)[WSHARD_DIGEST_HEX];	/* per part */
	char (*tensor)[WSHARD_DIGEST_HEX];	/* per tensor, rank order */
	char backend[128];			/* validation backend */
};

/*
 * The "ranks" entry of rank r as it appears in wshard.json, without a
 * trailing newline (its lines after the first indented for its place in
 * the document).  Returns a malloc'd string of *out_len bytes, NULL when
 * out of memory.  The entry is printed a tensor at a time: no JSON tree of
 * all of it is ever held.
 */
/* manifest_entry.c: the "sources" array of tensor t's entry as a jansson
 * tree (NULL when out of memory). */
json_t *manifest_sources_json(const struct wshard_plan *plan,
			      const struct wshard_out_tensor *t);

/*
 * Tensor t's entry (its file's name and its checksum given), printed as
 * json_dumps(JSON_INDENT(1) | JSON_PRESERVE_ORDER) prints the object
 * manifest.c packs, its lines after the first shifted right by depth,
 * into *buf (malloc'd, *cap bytes, grown as needed), *out_len bytes, not
 * terminated.  Returns 1, 0 when the entry is one to print through
 * jansson (*out_len 0), -1 when out of memory.
 */
int manifest_entry_print(const struct wshard_plan *plan, const struct wshard_out_tensor *t,
			 const char *file, const char *checksum, int depth,
			 char **buf, size_t *out_len, size_t *cap);

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

/* The manifest as process 0 assembles it during a convert. */
struct manifest_parts {
	json_t *doc;		/* all but the ranks' entries */
	char *all;		/* each process's entries, one NUL-terminated string each */
	size_t *lens;		/* bytes gathered from each process */
	const char **text;	/* rank r's entry, in all */
	size_t *len;
};

/* Frees what mp holds and zeroes it. */
void manifest_parts_free(struct manifest_parts *mp);

/* Name of a validate mode: "auto", "gpu", "host", "off". */
const char *manifest_validate_name(enum wshard_validate_mode mode);

/*
 * manifest_read.c: reads the manifest at path into a malloc'd,
 * NUL-terminated buffer of *out_len bytes, with every "sources" member
 * removed, newlines kept.  A JSON parser then reads and builds a tree of a
 * fraction of the size: the sources are most of an MoE model's manifest,
 * and a tree takes several times the bytes of its text.  Line numbers in
 * the parser's errors stay those of the file (columns may not).  Text
 * that is not valid JSON is returned as it is from where it stops making
 * sense, for the parser to report.  Returns WSHARD_OK, WSHARD_EINVAL
 * (missing, or not a regular file), WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err wshard_manifest_read(const char *path, char **out_text, size_t *out_len,
				     struct wshard_error *err);

/*
 * Removes the "sources" members of the JSON text s (n bytes) in place,
 * keeping every newline (a parser's line numbers stay the file's), and
 * returns the new length (s is NUL-terminated there when it shrank).
 */
size_t wshard_manifest_strip_sources(char *s, size_t n);

#endif /* WSHARD_MANIFEST_H */
