/*
 * catalog_folder.c - a folder of weights beside the top level's, which
 * vLLM's loader reads too where a model class names it: its
 * secondary_weights, DefaultModelLoader.Source(subfolder=FOLDER)
 * (model_loader/default_loader.py _get_weights_iterator, 382-387), whose
 * _prepare_weights globs FOLDER/ *.safetensors and keeps the files
 * FOLDER/model.safetensors.index.json names where there is one (199-258).
 * Kimi-Audio's whisper-large-v3/ (models/kimi_audio.py) is such a folder.
 * A rules file names it ("weight_folders", wshard-rules(5)); the folder's
 * tensors join the catalog under their own names, its other files (its
 * config.json, preprocessor_config.json) are copied to the output's folder
 * of the same name, where vLLM reads them again, and its config.json can
 * be read by the rules' expressions under a key of config.json.
 * A top-level file vLLM reads so with a prefix (allow_patterns_overrides
 * [FILE], Clef-Omni's joint_head.safetensors under pooler.head.) joins
 * the catalog with its tensors so named ("weight_files").
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

#define FOLDER_INDEX "model.safetensors.index.json"

static bool has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The files of a folder vLLM reads as weights or never reads. */
static bool is_weight(const char *name)
{
	return has_suffix(name, ".safetensors") || has_suffix(name, ".bin") ||
	       has_suffix(name, ".pt") || has_suffix(name, ".pth") ||
	       has_suffix(name, ".index.json") || !strcmp(name, WSHARD_MANIFEST);
}

/* Pushes folder/name onto the weight files (*.safetensors, not hidden) or
 * cat's files to copy, where it is a regular file of cat; with weights
 * NULL, onto the files to copy whatever it is. */
static enum wshard_err push_entry(struct wshard_catalog *cat, const char *folder,
				  const char *name, char ***weights, size_t *nweights,
				  struct wshard_error *err)
{
	char *rel;
	enum wshard_err rc = WSHARD_OK;

	if (name[0] == '.' || strchr(name, '/'))
		return WSHARD_OK;
	rel = wshard_path_join(folder, name);
	if (!rel)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!wshard_catalog_has_file(cat, rel))
		;
	else if (!weights)
		rc = catalog_push_name(&cat->extra, &cat->nextra, rel, err);
	else if (fnmatch("*.safetensors", name, FNM_PERIOD) == 0)
		rc = catalog_push_name(weights, nweights, rel, err);
	else if (!is_weight(name))
		rc = catalog_push_name(&cat->extra, &cat->nextra, rel, err);
	free(rel);
	return rc;
}

/* The folder's *.safetensors onto *weights and its other files onto
 * cat->extra. */
static enum wshard_err scan_folder(struct wshard_catalog *cat, const char *folder,
				   char ***weights, size_t *nweights, struct wshard_error *err)
{
	size_t i, n = strlen(folder);
	enum wshard_err rc = WSHARD_OK;
	struct dirent *e;
	char *path;
	DIR *d;

	if (cat->archive) {
		for (i = 0; i < cat->archive->nmembers && !rc; i++) {
			const char *m = cat->archive->members[i].name;

			if (!strncmp(m, folder, n) && m[n] == '/')
				rc = push_entry(cat, folder, m + n + 1, weights, nweights, err);
		}
		return rc;
	}
	path = wshard_path_join(cat->dir, folder);
	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	d = opendir(path);
	free(path);
	if (!d)
		return WSHARD_OK;	/* none: refused by the caller */
	while (!rc && (e = readdir(d)))
		rc = push_entry(cat, folder, e->d_name, weights, nweights, err);
	closedir(d);
	return rc;
}

/* Whether folder/FOLDER_INDEX's weight_map names file (folder/NAME). */
static bool index_names(json_t *map, const char *folder, const char *file)
{
	const char *key, *base = file + strlen(folder) + 1;
	json_t *v;

	json_object_foreach(map, key, v) {
		const char *s = json_string_value(v);

		while (s && !strncmp(s, "./", 2))
			s += 2;
		if (s && !strcmp(s, base))
			return true;
	}
	return false;
}

/* The weights of the glob that folder/FOLDER_INDEX names, where there is
 * one (vLLM's filter_duplicate_safetensors_files). */
static enum wshard_err filter_index(const struct wshard_catalog *cat, const char *folder,
				    char **names, size_t *n, struct wshard_error *err)
{
	char *rel = wshard_path_join(folder, FOLDER_INDEX), *text = NULL;
	json_t *root = NULL, *map;
	size_t i, kept = 0, len;
	enum wshard_err rc;

	if (!rel)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!wshard_catalog_has_file(cat, rel)) {
		free(rel);
		return WSHARD_OK;
	}
	rc = wshard_catalog_slurp(cat, rel, &text, &len, err);
	if (!rc)
		root = json_loadb(text, len, 0, NULL);
	map = json_object_get(root, "weight_map");
	if (!rc && !json_is_object(map))
		rc = wshard_error_set(err, WSHARD_EINVAL, "'%s/%s': no weight_map object",
				      cat->path, rel);
	for (i = 0; i < *n && !rc; i++) {
		if (index_names(map, folder, names[i]))
			names[kept++] = names[i];
		else
			free(names[i]);
	}
	if (!rc)
		*n = kept;
	json_decref(root);
	free(text);
	free(rel);
	return rc;
}

/* folder's config.json under key of cat's config.json. */
static enum wshard_err read_config(struct wshard_catalog *cat, const char *folder,
				   const char *key, struct wshard_error *err)
{
	char *rel = wshard_path_join(folder, "config.json"), *text = NULL;
	json_t *obj = NULL;
	size_t len;
	enum wshard_err rc;

	if (!rel)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!wshard_catalog_has_file(cat, rel))
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "'%s' has no '%s', which vLLM reads", cat->path, rel);
	else if (!cat->config.json)
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "'%s' has no config.json to read '%s' beside", cat->path, rel);
	else
		rc = wshard_catalog_slurp(cat, rel, &text, &len, err);
	if (!rc)
		obj = json_loadb(text, len, 0, NULL);	/* (json_is_object is a macro) */
	if (!rc && !json_is_object(obj))
		rc = wshard_error_set(err, WSHARD_EINVAL, "'%s/%s': not a JSON object",
				      cat->path, rel);
	if (!rc && json_object_get(cat->config.json, key))
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "'%s/config.json' has a key '%s' already: '%s' cannot be read under it",
				      cat->path, key, rel);
	if (!rc && json_object_set(cat->config.json, key, obj))
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	json_decref(obj);
	free(text);
	free(rel);
	return rc;
}

/* See catalog.h. */
enum wshard_err catalog_add_folder(struct wshard_catalog *cat, const char *folder,
				   const char *config_key, struct wshard_error *err)
{
	char **names = NULL;
	size_t n = 0, nextra = cat->nextra;
	enum wshard_err rc;

	if (!*folder || folder[0] == '.' || strchr(folder, '/'))
		return wshard_error_set(err, WSHARD_EINVAL,
					"weight folder '%s' is not the name of a folder", folder);
	rc = scan_folder(cat, folder, &names, &n, err);
	if (!rc)
		rc = filter_index(cat, folder, names, &n, err);
	if (!rc && n == 0)
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "'%s' has no '%s/*.safetensors', where vLLM reads %s's weights too",
				      cat->path, folder, cat->config.architecture ?
				      cat->config.architecture : "the model");
	catalog_sort_names(names, n);
	rc = catalog_open_found(cat, rc, names, n, err);
	if (!rc && config_key)
		rc = read_config(cat, folder, config_key, err);
	if (!rc && cat->nextra > nextra)
		catalog_sort_names(cat->extra, cat->nextra);
	return rc;
}

/* See catalog.h. */
enum wshard_err catalog_copy_folder(struct wshard_catalog *cat, const char *folder,
				    struct wshard_error *err)
{
	size_t nextra = cat->nextra;
	enum wshard_err rc;

	if (!*folder || folder[0] == '.' || strchr(folder, '/'))
		return wshard_error_set(err, WSHARD_EINVAL,
					"folder '%s' is not the name of a folder", folder);
	rc = scan_folder(cat, folder, NULL, NULL, err);
	if (!rc && cat->nextra > nextra)
		catalog_sort_names(cat->extra, cat->nextra);
	return rc;
}

/* See catalog.h. */
enum wshard_err catalog_add_prefixed(struct wshard_catalog *cat, const char *file,
				     const char *prefix, struct wshard_error *err)
{
	struct wshard_src_file *f;
	size_t i;
	enum wshard_err rc;

	if (!wshard_catalog_has_file(cat, file))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s' has no '%s', where vLLM reads %s's %s* weights",
					cat->path, file, cat->config.architecture ?
					cat->config.architecture : "the model", prefix);
	/* vLLM's primary glob (*.safetensors) keeps only the files the index
	 * names, and all of them without one (weight_utils.py:591-592), so
	 * FILE's unprefixed names too, which no module holds (utils.py:441-448) */
	if (!wshard_catalog_has_file(cat, FOLDER_INDEX))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s' has no %s, without which vLLM reads '%s' as the model's weights too (not only under the prefix '%s') and fails; list the model's shards in one",
					cat->path, FOLDER_INDEX, file, prefix);
	for (i = 0; i < cat->nfiles; i++)
		if (!strcmp(cat->files[i].name, file))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': '%s' is read as the model's weights, where vLLM reads it only under the prefix '%s' (list the others in model.safetensors.index.json)",
						cat->path, file, prefix);
	rc = catalog_check_member(cat, file, NULL, NULL, err);
	if (!rc)
		rc = catalog_add_file(cat, file, err);
	if (rc)
		return rc;
	f = &cat->files[cat->nfiles - 1];
	f->prefix = strdup(prefix);
	if (!f->prefix)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	/* no longer a file the weights ignore (scan_dir listed it) */
	for (i = 0; i < cat->nignored; i++) {
		if (strcmp(cat->ignored[i], file))
			continue;
		free(cat->ignored[i]);
		memmove(&cat->ignored[i], &cat->ignored[i + 1],
			(cat->nignored - i - 1) * sizeof(*cat->ignored));
		cat->nignored--;
		break;
	}
	return catalog_open_files(cat, err);
}
