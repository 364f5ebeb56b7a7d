/*
 * st_impl.h - what the files of the safetensors module share:
 * safetensors.c (the parsed file in memory, messages), st_read.c
 * (opening, reading), st_header.c and st_fast.c (validating a header)
 * and st_layout.c (writing one).  Not part of the API.
 */
#ifndef WSHARD_ST_IMPL_H
#define WSHARD_ST_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "wshard.h"

struct wshard_st;

#define METADATA_KEY "__metadata__"

/* Longest piece of a name or key quoted in a message. */
#define QUOTE_MAX 200

/*
 * A new empty struct wshard_st for path (fd -1); wshard_st_free closes
 * its fd when owns_fd.  NULL when out of memory.
 */
struct wshard_st *st_new(const char *path, bool owns_fd);

/* Records WSHARD_EINVAL with "'path': " in front of the formatted reason;
 * returns WSHARD_EINVAL. */
enum wshard_err st_bad(struct wshard_error *err, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Records WSHARD_ENOMEM for reading path; returns WSHARD_ENOMEM. */
enum wshard_err st_nomem(struct wshard_error *err, const char *path);

/*
 * Copies len bytes of s into buf for quoting in a one-line message:
 * control bytes become \xNN and a long string is cut (at a UTF-8
 * character boundary) and marked with "...".  Returns buf.
 */
const char *st_quote(char *buf, size_t size, const char *s, size_t len);

/*
 * st_header.c: validates the n header bytes hdr of st (st->size and
 * st->data_start already set) and fills its tensors and metadata.
 * Returns WSHARD_OK, WSHARD_EINVAL or WSHARD_ENOMEM.
 */
enum wshard_err st_parse_header(struct wshard_st *st, const char *hdr, size_t n,
				struct wshard_error *err);

/*
 * st_fast.c: reads the n header bytes hdr into st's tensors (in file
 * order) and metadata when the header is of the plain kind it takes
 * (see there); the checks of st_header.c are still to run.  Returns
 * true, or false with nothing kept: st_header.c reads it with jansson.
 */
bool st_parse_fast(struct wshard_st *st, const char *hdr, size_t n);

/* Frees st's tensors and metadata and empties them. */
void st_clear(struct wshard_st *st);

#endif /* WSHARD_ST_IMPL_H */
