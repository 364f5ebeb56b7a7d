/*
 * catalog_subdirs.c - NVIDIA Cosmos 3's unified (Diffusers-style)
 * checkpoints: config.json at the top, the weights in subfolders.  vLLM
 * 0.32's Cosmos3ForConditionalGeneration and
 * Cosmos3EdgeForConditionalGeneration set allow_patterns_overrides =
 * [DIR_PATTERN "/" FILE_PATTERN] (models/cosmos3.py, models/cosmos3_edge.py),
 * and its default loader then reads every file that glob matches in the
 * model folder, with no index filtering (model_loader/default_loader.py
 * _prepare_weights): transformer/ and vision_encoder/, not vae/ or
 * sound_tokenizer/, nor a model.safetensors at the top.  Where
 * config.json names one of those architectures, the same glob gives the
 * weight files here, by their relative names (catalog_open.c falls back
 * to the top level's weights where it finds none).  The same loader's
 * glob at the top level, where a checkpoint has no index and no
 * model.safetensors: catalog_top_files.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "wshard.h"
#include "catalog.h"
#include "arc.h"
#include "base/fileio.h"

/* vLLM's glob, as two fnmatch patterns (glob skips names starting '.'). */
#define DIR_PATTERN "[tv]*er"
#define FILE_PATTERN "*.safetensors"

/* The architectures whose vLLM class reads DIR_PATTERN/FILE_PATTERN. */
static const char *const subdir_archs[] = {
	"Cosmos3ForConditionalGeneration",
	"Cosmos3EdgeForConditionalGeneration",
};

/* config.json's architectures[0] when it is one of subdir_archs, or NULL. */
const char *catalog_subdir_arch(const struct wshard_catalog *cat)
{
	struct wshard_error ignored = { 0 };
	const char *found = NULL, *a;
	char *text = NULL;
	json_t *root;
	size_t i, len;

	if (!wshard_catalog_has_file(cat, "config.json") ||
	    wshard_catalog_slurp(cat, "config.json", &text, &len, &ignored))
		return NULL;
	root = json_loadb(text, len, 0, NULL);
	a = json_string_value(json_array_get(json_object_get(root, "architectures"), 0));
	for (i = 0; a && i < sizeof(subdir_archs) / sizeof(subdir_archs[0]); i++)
		if (!strcmp(a, subdir_archs[i]))
			found = subdir_archs[i];
	json_decref(root);
	free(text);
	return found;
}

static bool matches(const char *pattern, const char *name)
{
	return fnmatch(pattern, name, FNM_PERIOD) == 0;
}

/* An archive member DIR/FILE matching the glob. */
static bool member_matches(const char *name)
{
	const char *slash = strchr(name, '/');
	char *dir;
	bool ok;

	if (!slash || strchr(slash + 1, '/') || !matches(FILE_PATTERN, slash + 1))
		return false;
	dir = strndup(name, (size_t)(slash - name));
	ok = dir && matches(DIR_PATTERN, dir);
	free(dir);
	return ok;
}

/* The regular files of folder sub matching FILE_PATTERN, where sub
 * matches DIR_PATTERN (a catalog_entry_fn). */
static enum wshard_err scan_sub(const struct wshard_catalog *cat, const char *sub,
				char ***names, size_t *n, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	struct dirent *e;
	char *path;
	DIR *d;

	if (!matches(DIR_PATTERN, sub))
		return WSHARD_OK;
	path = wshard_path_join(cat->dir, sub);
	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	d = opendir(path);
	free(path);
	if (!d)
		return WSHARD_OK;	/* not a folder */
	while (!rc && (e = readdir(d))) {
		char *rel;

		if (!matches(FILE_PATTERN, e->d_name))
			continue;
		rel = wshard_path_join(sub, e->d_name);
		rc = rel ? catalog_push_file(cat, rel, names, n, err)
			 : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		free(rel);
	}
	closedir(d);
	return rc;
}

enum wshard_err catalog_subdir_files(const struct wshard_catalog *cat, char ***out_names,
				     size_t *out_n, struct wshard_error *err)
{
	return catalog_list_names(cat, member_matches, scan_sub, out_names, out_n, err);
}

/* A top-level name matching FILE_PATTERN. */
static bool top_member(const char *name)
{
	return !strchr(name, '/') && matches(FILE_PATTERN, name);
}

static enum wshard_err top_entry(const struct wshard_catalog *cat, const char *name,
				 char ***names, size_t *n, struct wshard_error *err)
{
	return top_member(name) ? catalog_push_file(cat, name, names, n, err) : WSHARD_OK;
}

/* See catalog.h. */
enum wshard_err catalog_top_files(const struct wshard_catalog *cat, char ***out_names,
				  size_t *out_n, struct wshard_error *err)
{
	return catalog_list_names(cat, top_member, top_entry, out_names, out_n, err);
}
