/*
 * catalog.c - struct wshard_catalog once built: a tensor found by name,
 * and the whole freed; the lists of names its builders keep.
 * catalog_open.c builds it.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "safetensors.h"
#include "catalog.h"
#include "arc.h"
#include "hfcache.h"
#include "base/fileio.h"

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
		free(cat->files[i].prefix);
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

enum wshard_err catalog_check_member(const struct wshard_catalog *cat, const char *name,
				     const char *index, const char *tensor,
				     struct wshard_error *err)
{
	const char *dir = cat->dir;
	char real_dir[PATH_MAX], real_file[PATH_MAX], what[PATH_MAX + 512];
	char *path;
	const char *p;
	size_t n;

	if (index)
		snprintf(what, sizeof(what), "'%s': weight_map entry for '%s' names '%s'",
			 index, tensor, name);
	else
		snprintf(what, sizeof(what), "'%s': '%s'", dir, name);
	if (!*name || name[0] == '/')
		return wshard_error_set(err, WSHARD_EINVAL, "%s, which is not a relative path",
					what);
	for (p = name; *p; p += n + (p[n] == '/')) {
		n = strcspn(p, "/");
		if ((n == 2 && p[0] == '.' && p[1] == '.') || n == 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"%s, which leaves the directory", what);
	}
	if (cat->archive) {
		if (arc_find(cat->archive, name) < 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"%s, which is not in the archive", what);
		return WSHARD_OK;
	}
	path = wshard_path_join(dir, name);
	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!realpath(path, real_file)) {
		int e = errno;

		free(path);
		return wshard_error_set(err, WSHARD_EINVAL, "%s: %s", what, strerror(e));
	}
	free(path);
	if (!realpath(dir, real_dir))
		return wshard_error_set(err, WSHARD_EIO, "cannot resolve '%s': %s",
					dir, strerror(errno));
	n = strlen(real_dir);
	if ((strncmp(real_file, real_dir, n) != 0 || real_file[n] != '/') &&
	    !wshard_hf_is_blob(real_dir, real_file))
		return wshard_error_set(err, WSHARD_EINVAL,
					"%s, a link that leaves the directory", what);
	return WSHARD_OK;
}
