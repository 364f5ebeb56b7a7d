/*
 * manifest_read.h - wshard.json read back as text (manifest_read.c),
 * before wshard_manifest_open parses it; declared for the tests and the
 * fuzzer.  Not part of the API.
 */
#ifndef WSHARD_MANIFEST_READ_H
#define WSHARD_MANIFEST_READ_H

#include <stddef.h>

#include "wshard.h"

/*
 * Reads the manifest at path into a malloc'd, NUL-terminated buffer of *out_len
 * bytes, with every "sources" member removed, newlines kept.  A JSON parser
 * then reads and builds a tree of a fraction of the size: the sources are most
 * of an MoE model's manifest, and a tree takes several times the bytes of its
 * text.  Line numbers in the parser's errors stay those of the file (columns
 * may not).  Text that is not valid JSON is returned as it is from where it
 * stops making sense, for the parser to report.  Returns WSHARD_OK,
 * WSHARD_EINVAL (missing, or not a regular file), WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err wshard_manifest_read(const char *path, char **out_text, size_t *out_len,
				     struct wshard_error *err);

/*
 * Removes the "sources" members of the JSON text s (n bytes) in place,
 * keeping every newline (a parser's line numbers stay the file's), and
 * returns the new length (s is NUL-terminated there when it shrank).
 */
size_t wshard_manifest_strip_sources(char *s, size_t n);

#endif /* WSHARD_MANIFEST_READ_H */
