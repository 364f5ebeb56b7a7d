/*
 * catalog_st.c - the folders of a sentence-transformers model: modules.json
 * names each module's folder (1_Pooling, 2_Dense, 2_Normalize), whose
 * files vLLM reads from the model folder to choose its pooling and to add
 * the Dense projections.  Without them an output would load with the
 * architecture's default pooling (CLS for BERT, where e5 and MiniLM mean)
 * and silently embed differently from its checkpoint, so they are copied
 * with the other non-weight files.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "wshard.h"
#include "base/fileio.h"
#include "catalog.h"
#include "arc.h"

/* A module folder named as sentence-transformers names them: one path
 * component of letters, digits, '_', '-' and '.', not hidden. */
static bool module_folder(const char *p)
{
	size_t i;

	if (!p || !p[0] || p[0] == '.' || strlen(p) > 128)
		return false;
	for (i = 0; p[i]; i++)
		if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
		      (p[i] >= '0' && p[i] <= '9') || p[i] == '_' || p[i] == '-' || p[i] == '.'))
			return false;
	return true;
}

/* folder/name added to the files to copy. */
static enum wshard_err push_extra(struct wshard_catalog *cat, const char *folder,
				  const char *name, struct wshard_error *err)
{
	char *s = wshard_path_join(folder, name);
	enum wshard_err rc;

	if (!s)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	rc = catalog_push_name(&cat->extra, &cat->nextra, s, err);
	free(s);
	return rc;
}

/* The regular, visible files directly in folder of a directory source. */
static enum wshard_err folder_files(struct wshard_catalog *cat, const char *folder,
				    struct wshard_error *err)
{
	char *dir = wshard_path_join(cat->dir, folder);
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *e;
	enum wshard_err rc = WSHARD_OK;

	if (!dir)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	while (d && !rc && (e = readdir(d))) {
		char *path = e->d_name[0] == '.' ? NULL : wshard_path_join(dir, e->d_name);
		struct stat sb;

		/* (a symbolic link is followed: a Hub cache's files are links) */
		if (path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
			rc = push_extra(cat, folder, e->d_name, err);
		free(path);
	}
	if (d)
		closedir(d);
	free(dir);
	return rc;
}

/* The members directly in folder of an archive source. */
static enum wshard_err folder_members(struct wshard_catalog *cat, const char *folder,
				      struct wshard_error *err)
{
	size_t i, n = strlen(folder);
	enum wshard_err rc = WSHARD_OK;

	for (i = 0; i < cat->archive->nmembers && !rc; i++) {
		const char *m = cat->archive->members[i].name;

		if (!strncmp(m, folder, n) && m[n] == '/' && m[n + 1] && m[n + 1] != '.' &&
		    !strchr(m + n + 1, '/'))
			rc = push_extra(cat, folder, m + n + 1, err);
	}
	return rc;
}

enum wshard_err catalog_st_modules(struct wshard_catalog *cat, struct wshard_error *err)
{
	char *path, *text = NULL;
	size_t len, i, k;
	json_t *doc, *mods, *m;
	enum wshard_err rc = WSHARD_OK;

	for (i = 0; i < cat->nextra && strcmp(cat->extra[i], "modules.json"); i++)
		;
	if (i == cat->nextra)
		return WSHARD_OK;
	path = wshard_path_join(cat->dir, "modules.json");
	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	rc = catalog_read_small(cat, path, &text, &len, err);
	free(path);
	if (rc)
		return rc;
	doc = json_loadb(text, len, 0, NULL);
	free(text);
	/* (a modules.json that is no sentence-transformers list is copied as
	 * it is, with nothing beside it) */
	mods = json_is_object(doc) ? json_object_get(doc, "modules") : doc;
	json_array_foreach(json_is_array(mods) ? mods : NULL, k, m) {
		const char *folder = json_string_value(json_object_get(m, "path"));
		const char *type = json_string_value(json_object_get(m, "type"));
		size_t j;

		/* vLLM's _ST_POOLING_MODULE_TYPES */
		if (type && (!strcmp(type, "sentence_transformers.models.Pooling") ||
			     !strcmp(type, "sentence_transformers.sentence_transformer.modules.pooling.Pooling")))
			cat->st_pooling = true;

		if (!module_folder(folder))
			continue;
		for (j = 0; j < k; j++) {	/* each folder once */
			const char *o = json_string_value(json_object_get(json_array_get(mods, j),
									  "path"));

			if (o && !strcmp(o, folder))
				break;
		}
		if (j == k)
			rc = cat->archive ? folder_members(cat, folder, err)
					  : folder_files(cat, folder, err);
		if (rc)
			break;
	}
	json_decref(doc);
	catalog_sort_names(cat->extra, cat->nextra);
	return rc;
}
