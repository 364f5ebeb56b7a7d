/*
 * manifest_entry.h - a tensor's entry of wshard.json (manifest_entry.c),
 * printed without building a JSON tree.  Not part of the API.
 */
#ifndef WSHARD_MANIFEST_ENTRY_H
#define WSHARD_MANIFEST_ENTRY_H

#include <stddef.h>

#include <jansson.h>

#include "wshard.h"
#include "plan/plan.h"

/* The "sources" array of tensor t's entry as a jansson tree (NULL when
 * out of memory). */
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

#endif /* WSHARD_MANIFEST_ENTRY_H */
