/*
 * catalog_view.c - what the API shows of a catalog: its summary, each
 * tensor, and the JSON document wshard inspect --json prints (each
 * tensor's name, dtype, shape, bytes and file, then the sums).
 */
#include <fnmatch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "catalog.h"

void wshard_catalog_info(const struct wshard_catalog *cat,
			 struct wshard_catalog_info *out_info)
{
	out_info->path = cat->path;
	out_info->has_config = cat->has_config;
	out_info->architecture = cat->config.architecture;
	/* transformers 4.56 renamed torch_dtype to dtype */
	out_info->torch_dtype = json_string_value(json_object_get(cat->config.json, "torch_dtype"));
	if (!out_info->torch_dtype)
		out_info->torch_dtype = json_string_value(json_object_get(cat->config.json, "dtype"));
	out_info->ntensors = cat->ntensors;
	out_info->nfiles = cat->nfiles;
	out_info->tensor_bytes = cat->tensor_bytes;
	out_info->nignored = cat->nignored;
	out_info->ignored = cat->ignored;
	out_info->hf = cat->hf;
}

void wshard_catalog_tensor(const struct wshard_catalog *cat, size_t i,
			   struct wshard_tensor_info *out_t)
{
	const struct wshard_src_tensor *t = &cat->tensors[i];

	out_t->name = t->name;
	out_t->dtype = t->info->dtype;
	out_t->ndim = t->info->ndim;
	memcpy(out_t->shape, t->info->shape, sizeof(out_t->shape));
	out_t->nbytes = t->nbytes;
	out_t->file = cat->files[t->file].name;
}

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
	if (cat->hf) {
		json_object_set_new(doc, "repo_id", json_string(cat->hf->repo_id));
		json_object_set_new(doc, "revision", json_string(cat->hf->revision));
		json_object_set_new(doc, "commit", json_string(cat->hf->commit));
		json_object_set_new(doc, "snapshot", json_string(cat->hf->snapshot));
	}
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
