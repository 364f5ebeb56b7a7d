/*
 * catalog_json.c - a checkpoint's tensors as one JSON document, the one
 * wshard inspect --json prints: each tensor's name, dtype, shape, bytes
 * and file, then the sums.
 */
#include <fnmatch.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "wshard.h"

static json_t *shape_json(const uint64_t *shape, int ndim)
{
	json_t *a = json_array();
	int i;

	for (i = 0; i < ndim; i++)
		json_array_append_new(a, json_integer((json_int_t)shape[i]));
	return a;
}

/* The tensors matching filter, and their bytes in all and per dtype. */
static json_t *tensor_rows(const struct wshard_catalog *cat, const char *filter,
			   size_t *out_shown, uint64_t *out_total, uint64_t *by_dtype)
{
	json_t *rows = json_array();
	size_t i;

	*out_shown = 0;
	*out_total = 0;
	for (i = 0; i < cat->ntensors; i++) {
		const struct wshard_src_tensor *t = &cat->tensors[i];

		if (filter && fnmatch(filter, t->name, 0) != 0)
			continue;
		(*out_shown)++;
		*out_total += t->nbytes;
		by_dtype[t->info->dtype] += t->nbytes;
		json_array_append_new(rows, json_pack("{s:s,s:s,s:o,s:I,s:s}",
			"name", t->name, "dtype", wshard_dtype_name(t->info->dtype),
			"shape", shape_json(t->info->shape, t->info->ndim),
			"bytes", (json_int_t)t->nbytes, "file", cat->files[t->file].name));
	}
	return rows;
}

enum wshard_err wshard_catalog_json(const struct wshard_catalog *cat, const char *filter,
				    char **out_text, struct wshard_error *err)
{
	uint64_t by_dtype[WSHARD_DTYPE_COUNT] = { 0 }, total;
	json_t *doc = json_object(), *dt = json_object(), *ign = json_array(), *rows;
	size_t i, shown;
	int d;

	*out_text = NULL;
	rows = tensor_rows(cat, filter, &shown, &total, by_dtype);
	for (d = 0; d < WSHARD_DTYPE_COUNT; d++)
		if (by_dtype[d])
			json_object_set_new(dt, wshard_dtype_name((enum wshard_dtype)d),
					    json_integer((json_int_t)by_dtype[d]));
	for (i = 0; i < cat->nignored; i++)
		json_array_append_new(ign, json_string(cat->ignored[i]));
	json_object_set_new(doc, "path", json_string(cat->path));
	json_object_set_new(doc, "architecture",
			    cat->config.architecture ? json_string(cat->config.architecture)
						     : json_null());
	json_object_set_new(doc, "tensors", rows);
	json_object_set_new(doc, "tensor_count", json_integer((json_int_t)shown));
	json_object_set_new(doc, "total_bytes", json_integer((json_int_t)total));
	json_object_set_new(doc, "bytes_per_dtype", dt);
	json_object_set_new(doc, "file_count", json_integer((json_int_t)cat->nfiles));
	json_object_set_new(doc, "ignored_files", ign);
	*out_text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(doc);
	if (!*out_text)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}
