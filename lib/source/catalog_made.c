/*
 * catalog_made.c - source tensors read as values a plan computes, not as
 * the checkpoint's bytes: a rule's "dequant" (plan_dequant.c) makes an
 * FP8 weight the BF16 tensor vLLM makes of it as it loads.  The values
 * are written once into a safetensors file held in memory (memfd), which
 * the catalog holds as files[nfiles], past the checkpoint's own files
 * (those the manifest lists); each such tensor's entry then points into
 * it, so every split, fuse, read and verify that follows takes it as a
 * tensor of the source, of the made dtype.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "safetensors.h"
#include "catalog.h"

#define MADE_PATH "(computed in memory)"

struct wshard_made {
	int fd;
	size_t n;
	struct wshard_src_tensor *was;	/* the entries as the source has them */
};

void wshard_catalog_unmake(struct wshard_catalog *cat)
{
	struct wshard_made *m = cat->made;
	size_t i;

	if (!m)
		return;
	/* the entries that point into the made file, by their names (the
	 * source's own strings, kept): a later plan may have sorted views in */
	for (i = 0; i < cat->ntensors; i++) {
		struct wshard_src_tensor *t = &cat->tensors[i];
		size_t k;

		for (k = 0; t->file == cat->nfiles && k < m->n; k++)
			if (t->name == m->was[k].name)
				*t = m->was[k];
	}
	wshard_st_free(cat->files[cat->nfiles].st);
	free(cat->files[cat->nfiles].name);
	free(cat->files[cat->nfiles].path);
	memset(&cat->files[cat->nfiles], 0, sizeof(cat->files[0]));
	close(m->fd);
	free(m->was);
	free(m);
	cat->made = NULL;
}

/* The header of the file of tensors idx[0..n) made in dtype dt (their
 * shapes the source's), padded with spaces to a multiple of 8. */
static char *made_header(const struct wshard_catalog *cat, size_t n, const size_t *idx,
			 enum wshard_dtype dt, uint64_t *out_data)
{
	json_t *h = json_object();
	uint64_t at = 0;
	size_t i, len;
	char *text, *padded;

	for (i = 0; h && i < n; i++) {
		const struct wshard_st_tensor *t = cat->tensors[idx[i]].info;
		json_t *shape = json_array();
		uint64_t bytes = wshard_dtype_bits(dt) / 8;
		int d;

		for (d = 0; shape && d < t->ndim; d++) {
			json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
			bytes *= t->shape[d];
		}
		json_object_set_new(h, t->name,
				    json_pack("{s:s,s:o,s:[I,I]}", "dtype", wshard_dtype_name(dt),
					      "shape", shape, "data_offsets", (json_int_t)at,
					      (json_int_t)(at + bytes)));
		at += bytes;
	}
	text = h ? json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(h);
	if (!text)
		return NULL;
	len = (strlen(text) + 7) / 8 * 8;
	padded = malloc(len + 1);
	if (padded) {
		memset(padded, ' ', len);
		memcpy(padded, text, strlen(text));
		padded[len] = '\0';
	}
	free(text);
	*out_data = at;
	return padded;
}

/* Writes the header and each tensor's values (fill) into fd. */
static enum wshard_err made_write(struct wshard_catalog *cat, int fd, const char *head,
				  size_t n, const size_t *idx, enum wshard_dtype dt,
				  wshard_made_fill fill, void *ctx, struct wshard_error *err)
{
	unsigned char len8[8];
	uint64_t hl = strlen(head), at = 8 + hl;
	enum wshard_err rc;
	size_t i;
	int b;

	for (b = 0; b < 8; b++)
		len8[b] = (unsigned char)(hl >> (8 * b));
	rc = wshard_pwrite_full(fd, len8, 8, 0, MADE_PATH, err);
	if (!rc)
		rc = wshard_pwrite_full(fd, head, (size_t)hl, 8, MADE_PATH, err);
	for (i = 0; !rc && i < n; i++) {
		const struct wshard_st_tensor *t = cat->tensors[idx[i]].info;
		uint64_t elems = 1;
		void *buf;
		int d;

		for (d = 0; d < t->ndim; d++)
			elems *= t->shape[d];
		buf = malloc(elems * (wshard_dtype_bits(dt) / 8) + 1);
		if (!buf)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		rc = fill(ctx, idx[i], buf, err);
		if (!rc)
			rc = wshard_pwrite_full(fd, buf, elems * (wshard_dtype_bits(dt) / 8), at,
						MADE_PATH, err);
		at += elems * (wshard_dtype_bits(dt) / 8);
		free(buf);
	}
	return rc;
}

enum wshard_err wshard_catalog_make(struct wshard_catalog *cat, size_t n, const size_t *idx,
				    enum wshard_dtype dt, wshard_made_fill fill, void *ctx,
				    struct wshard_error *err)
{
	struct wshard_src_file *files;
	struct wshard_made *m;
	struct wshard_st *st = NULL;
	uint64_t data = 0;
	char *head;
	size_t i;
	enum wshard_err rc;

	wshard_catalog_unmake(cat);
	if (!n)
		return WSHARD_OK;
	files = realloc(cat->files, (cat->nfiles + 1) * sizeof(*files));
	if (files)
		cat->files = files;
	m = calloc(1, sizeof(*m));
	head = made_header(cat, n, idx, dt, &data);
	if (!files || !m || !head || !(m->was = calloc(n, sizeof(*m->was)))) {
		free(m);
		free(head);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	m->fd = memfd_create("wshard-made", MFD_CLOEXEC);
	if (m->fd < 0) {
		free(m->was);
		free(m);
		free(head);
		return wshard_error_set(err, WSHARD_EIO, "cannot hold computed tensors in memory: %s",
					strerror(errno));
	}
	rc = made_write(cat, m->fd, head, n, idx, dt, fill, ctx, err);
	if (!rc)
		rc = wshard_st_open_fd(&st, m->fd, 0, 8 + strlen(head) + data, MADE_PATH, err);
	free(head);
	if (rc) {
		close(m->fd);
		free(m->was);
		free(m);
		return rc;
	}
	memset(&cat->files[cat->nfiles], 0, sizeof(cat->files[0]));
	cat->files[cat->nfiles].st = st;
	cat->files[cat->nfiles].size = st->data_start + data;
	cat->files[cat->nfiles].member = -1;
	cat->files[cat->nfiles].name = strdup(MADE_PATH);
	cat->files[cat->nfiles].path = strdup(MADE_PATH);
	cat->made = m;
	for (i = 0; i < n; i++) {
		struct wshard_src_tensor *t = &cat->tensors[idx[i]];
		const struct wshard_st_tensor *info = wshard_st_find(st, t->name);

		m->was[m->n++] = *t;
		t->file = (uint32_t)cat->nfiles;
		t->info = info;
		t->offset = st->base + st->data_start + info->begin;
		t->nbytes = info->end - info->begin;
	}
	if (!cat->files[cat->nfiles].name || !cat->files[cat->nfiles].path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}
