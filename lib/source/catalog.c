/*
 * catalog.c - struct wshard_catalog once built: a tensor found by name,
 * and the whole freed; the lists of names its builders keep.
 * catalog_open.c builds it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "safetensors.h"
#include "catalog.h"
#include "arc.h"
#include "hfcache.h"

long wshard_catalog_index(const struct wshard_catalog *cat, const char *name)
{
	size_t lo = 0, hi = cat->ntensors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(cat->tensors[mid].name, name);

		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

const struct wshard_src_tensor *wshard_catalog_find(
	const struct wshard_catalog *cat, const char *name)
{
	long i = wshard_catalog_index(cat, name);

	return i < 0 ? NULL : &cat->tensors[i];
}

void wshard_catalog_free(struct wshard_catalog *cat)
{
	size_t i;

	if (!cat)
		return;
	wshard_catalog_unmake(cat);
	for (i = 0; i < cat->nfiles; i++) {
		wshard_st_free(cat->files[i].st);
		free(cat->files[i].name);
		free(cat->files[i].path);
	}
	free(cat->files);
	free(cat->tensors);
	for (i = 0; i < cat->nviews; i++)
		free(cat->views[i].name);
	free(cat->views);
	for (i = 0; i < cat->nignored; i++)
		free(cat->ignored[i]);
	free(cat->ignored);
	for (i = 0; i < cat->nextra; i++)
		free(cat->extra[i]);
	free(cat->extra);
	free(cat->config.architecture);
	json_decref(cat->config.json);
	arc_free(cat->archive);
	wshard_hf_ref_free(cat->hf);
	free(cat->dir);
	free(cat->path);
	free(cat);
}

enum wshard_err catalog_push_name(char ***list, size_t *n, const char *name,
				  struct wshard_error *err)
{
	char **l = realloc(*list, (*n + 1) * sizeof(char *));

	if (!l)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	*list = l;
	l[*n] = strdup(name);
	if (!l[*n])
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	(*n)++;
	return WSHARD_OK;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void catalog_sort_names(char **list, size_t n)
{
	if (n)
		qsort(list, n, sizeof(char *), cmp_str);
}

enum wshard_err catalog_push_file(const struct wshard_catalog *cat, const char *name,
				  char ***names, size_t *n, struct wshard_error *err)
{
	return wshard_catalog_has_file(cat, name) ? catalog_push_name(names, n, name, err)
						  : WSHARD_OK;
}

enum wshard_err catalog_list_names(const struct wshard_catalog *cat, bool (*member)(const char *),
				   catalog_entry_fn entry, char ***out_names, size_t *out_n,
				   struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	struct dirent *e;
	DIR *d;
	size_t i;

	*out_names = NULL;
	*out_n = 0;
	if (cat->archive) {
		for (i = 0; i < cat->archive->nmembers && !rc; i++)
			if (member(cat->archive->members[i].name))
				rc = catalog_push_name(out_names, out_n,
						       cat->archive->members[i].name, err);
		return rc;
	}
	d = opendir(cat->dir);
	if (!d)
		return wshard_error_set(err, WSHARD_EIO, "cannot open directory '%s': %s",
					cat->dir, strerror(errno));
	while (!rc && (e = readdir(d)))
		rc = entry(cat, e->d_name, out_names, out_n, err);
	closedir(d);
	catalog_sort_names(*out_names, *out_n);
	return rc;
}
