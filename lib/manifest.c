/*
 * manifest.c - builds wshard.json.  Everything in it is a function of the
 * input and the options (no time, no host name), so two runs give the same
 * bytes; only "run" depends on the number of processes.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "internal.h"
#include "manifest.h"

const char *manifest_validate_name(enum wshard_validate_mode mode)
{
	switch (mode) {
	case WSHARD_VALIDATE_AUTO: return "auto";
	case WSHARD_VALIDATE_GPU: return "gpu";
	case WSHARD_VALIDATE_HOST: return "host";
	case WSHARD_VALIDATE_OFF: return "off";
	}
	return "?";
}

static json_t *range(uint64_t a, uint64_t b)
{
	return json_pack("[II]", (json_int_t)a, (json_int_t)b);
}

static json_t *shape_json(const uint64_t *shape, int ndim)
{
	json_t *a = json_array();
	int i;

	for (i = 0; a && i < ndim; i++)
		json_array_append_new(a, json_integer((json_int_t)shape[i]));
	return a;
}

static json_t *sources_json(const struct wshard_plan *plan,
			    const struct wshard_out_tensor *t)
{
	json_t *a = json_array();
	size_t k;

	for (k = 0; a && k < t->npieces; k++) {
		const struct wshard_piece *p = &t->pieces[k];
		json_t *o = NULL;

		switch (p->kind) {
		case WSHARD_PIECE_COPY: {
			const struct wshard_st_tensor *info = plan->cat->tensors[p->src].info;
			uint64_t r0 = p->row0, r1 = p->row0 + p->nrows;

			/* a tensor copied whole as one byte run: its own rows */
			if (info->ndim && wshard_matrix_rows(info) != info->shape[0]) {
				r0 = 0;
				r1 = info->shape[0];
			}
			o = json_pack("{s:s,s:o}", "tensor", plan->cat->tensors[p->src].name,
				      "rows", range(r0, r1));
			if (o && p->prov_ncols)
				json_object_set_new(o, "cols",
						    range(p->prov_col0, p->prov_col0 + p->prov_ncols));
			break;
		}
		case WSHARD_PIECE_ZERO:
			o = json_pack("{s:I}", "zeros", (json_int_t)p->len);
			break;
		case WSHARD_PIECE_CONST:
			o = json_pack("{s:f}", "value", p->prov_value);
			break;
		}
		json_array_append_new(a, o);
	}
	return a;
}

json_t *manifest_rank(const struct wshard_plan *plan, int r,
		      const struct manifest_rank_ck *ck)
{
	const struct wshard_rank_plan *rp = &plan->ranks[r];
	json_t *files = json_array(), *tensors = json_array();
	size_t i;

	for (i = 0; files && i < rp->nfiles; i++)
		json_array_append_new(files, json_pack("{s:s,s:I,s:s}",
			"name", rp->files[i].name,
			"size", (json_int_t)rp->files[i].size,
			"checksum", ck->file[i]));
	for (i = 0; tensors && i < rp->ntensors; i++) {
		const struct wshard_out_tensor *t = &rp->tensors[i];

		json_array_append_new(tensors, json_pack("{s:s,s:s,s:o,s:s,s:o,s:s,s:o}",
			"name", t->name,
			"dtype", wshard_dtype_name(t->dtype),
			"shape", shape_json(t->shape, t->ndim),
			"file", rp->files[t->part].name,
			"data_offsets", range(t->begin, t->end),
			"checksum", ck->tensor[i],
			"sources", sources_json(plan, t)));
	}
	return json_pack("{s:i,s:I,s:s,s:o,s:o}", "rank", r,
			 "bytes", (json_int_t)rp->bytes,
			 "validated_by", ck->backend,
			 "files", files, "tensors", tensors);
}

json_t *manifest_doc(const struct wshard_plan *plan, json_t *ranks,
		     enum wshard_validate_mode mode, int nprocs,
		     const uint64_t *proc_read, bool synced)
{
	const struct wshard_catalog *cat = plan->cat;
	const struct wshard_options *o = &plan->opt;
	json_t *files = json_array(), *copied = json_array(), *reads = json_array();
	json_t *doc;
	char real[PATH_MAX];
	size_t i;
	int p;

	for (i = 0; files && i < cat->nfiles; i++)
		json_array_append_new(files, json_pack("{s:s,s:I}", "name", cat->files[i].name,
						       "size", (json_int_t)cat->files[i].size));
	for (i = 0; copied && i < cat->nextra; i++)
		json_array_append_new(copied, json_string(cat->extra[i]));
	for (p = 0; reads && p < nprocs; p++)
		json_array_append_new(reads, json_integer((json_int_t)proc_read[p]));
	doc = json_pack("{s:s,s:i,s:s,s:s,s:i,s:s?,s:s}",
			"format", "wshard",
			"format_version", WSHARD_MANIFEST_VERSION,
			"wshard_version", WSHARD_VERSION,
			"target", o->target,
			"tp", plan->tp,
			"architecture", cat->config.architecture,
			"rules", plan->rules_name);
	if (!doc)
		goto fail;
	json_object_set_new(doc, "options", json_pack("{s:b,s:I,s:o,s:s}",
		"attn_scales", o->attn_scales,
		"max_file_size", (json_int_t)o->max_file_size,
		"dtype", o->has_dtype ? json_string(wshard_dtype_name(o->dtype)) : json_null(),
		"checksum", wshard_checksum_name(o->checksum)));
	json_object_set_new(doc, "source", json_pack("{s:s,s:s?,s:I,s:o,s:o}",
		"path", cat->path,
		"realpath", realpath(cat->path, real) ? real : NULL,
		"tensor_bytes", (json_int_t)cat->tensor_bytes,
		"files", files, "copied", copied));
	json_object_set_new(doc, "validation", json_pack("{s:s}", "mode",
							 manifest_validate_name(mode)));
	json_object_set_new(doc, "ranks", ranks);
	json_object_set_new(doc, "run", json_pack("{s:i,s:o,s:b}", "processes", nprocs,
						  "bytes_read", reads, "synced", synced));
	return doc;
fail:
	json_decref(files);
	json_decref(copied);
	json_decref(reads);
	json_decref(ranks);
	return NULL;
}
