/*
 * catalog_open.c - opens a HuggingFace checkpoint (a directory, a file,
 * an archive, or a repo id that hfcache.c finds in the hub cache) and
 * builds the tensor index: every tensor's file, dtype, shape and byte
 * range, with the weight_map cross-checked against the files.  No tensor
 * data is read.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "wshard.h"
#include "safetensors.h"
#include "base/fileio.h"
#include "catalog.h"
#include "arc.h"
#include "hfcache.h"
#include "base/util.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"

static bool has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int cmp_file(const void *a, const void *b)
{
	const struct wshard_src_file *x = a, *y = b;

	/* in an archive, archive order: a compressed one is read front to back */
	if (x->member != y->member)
		return x->member < y->member ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_tensor(const void *a, const void *b)
{
	const struct wshard_src_tensor *x = a, *y = b;

	return strcmp(x->name, y->name);
}

static long find_file(const struct wshard_catalog *cat, const char *name)
{
	size_t i;

	for (i = 0; i < cat->nfiles; i++)
		if (strcmp(cat->files[i].name, name) == 0)
			return (long)i;
	return -1;
}

enum wshard_err catalog_add_file(struct wshard_catalog *cat, const char *name,
				 struct wshard_error *err)
{
	struct wshard_src_file *f, *files;

	files = realloc(cat->files, (cat->nfiles + 1) * sizeof(*files));
	if (!files)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	cat->files = files;
	f = &files[cat->nfiles];
	memset(f, 0, sizeof(*f));
	cat->nfiles++;
	f->name = strdup(name);
	f->member = cat->archive ? arc_find(cat->archive, name) : -1;
	if (cat->archive) {
		f->path = malloc(strlen(cat->dir) + strlen(name) + 2);
		if (f->path)
			sprintf(f->path, "%s:%s", cat->dir, name);
	} else {
		f->path = wshard_path_join(cat->dir, name);
	}
	if (!f->name || !f->path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (cat->archive && f->member < 0)
		return wshard_error_set(err, WSHARD_EINVAL, "'%s' has no entry '%s'", cat->dir,
					name);
	return WSHARD_OK;
}

/* See catalog.h: a file opened before (a rules' weight folder added
 * later) is kept as it is, and the tensor index made again. */
enum wshard_err catalog_open_files(struct wshard_catalog *cat, struct wshard_error *err)
{
	size_t i, j, k, n = 0;
	enum wshard_err rc;

	qsort(cat->files, cat->nfiles, sizeof(*cat->files), cmp_file);
	rc = cat->archive ? WSHARD_OK : catalog_open_heads(cat, err);
	if (rc)
		return rc;
	for (i = 0; i < cat->nfiles; i++) {
		struct wshard_src_file *f = &cat->files[i];

		if (!cat->archive || f->st) {
			rc = WSHARD_OK;	/* read above */
		} else if (cat->archive->in_place) {
			const struct arc_member *m = &cat->archive->members[f->member];

			rc = wshard_st_open_fd(&f->st, cat->archive->fd, m->offset, m->size,
					       f->path, err);
		} else {
			const struct arc_member *m = &cat->archive->members[f->member];

			rc = wshard_st_parse_head(&f->st, m->head, m->head_len, m->size, f->path,
						  err);
		}
		if (!rc && f->prefix && !f->prefixed) {	/* "weight_files" */
			rc = wshard_st_prefix_names(f->st, f->prefix, err);
			f->prefixed = !rc;
		}
		if (rc)
			return rc;
		f->size = f->st->size;
		n += f->st->ntensors;
	}
	free(cat->tensors);
	cat->tensor_bytes = 0;
	cat->tensors = calloc(n ? n : 1, sizeof(*cat->tensors));
	if (!cat->tensors)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0, k = 0; i < cat->nfiles; i++) {
		const struct wshard_st *st = cat->files[i].st;

		for (j = 0; j < st->ntensors; j++, k++) {
			struct wshard_src_tensor *t = &cat->tensors[k];

			t->name = st->tensors[j].name;
			t->file = (uint32_t)i;
			t->info = &st->tensors[j];
			t->offset = st->base + st->data_start + st->tensors[j].begin;
			t->nbytes = st->tensors[j].end - st->tensors[j].begin;
			cat->tensor_bytes += t->nbytes;
		}
	}
	cat->ntensors = n;
	wshard_sort(cat->tensors, n, sizeof(*cat->tensors), cmp_tensor);
	for (i = 1; i < n; i++)
		if (strcmp(cat->tensors[i - 1].name, cat->tensors[i].name) == 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s' is in both '%s' and '%s'",
						cat->tensors[i].name,
						cat->files[cat->tensors[i - 1].file].path,
						cat->files[cat->tensors[i].file].path);
	return WSHARD_OK;
}

/* Whether the checkpoint has a file called path (dir/NAME). */
static bool has_file(const struct wshard_catalog *cat, const char *path)
{
	struct stat sb;

	if (cat->archive)
		return arc_find(cat->archive, path + strlen(cat->dir) + 1) >= 0;
	return stat(path, &sb) == 0;
}

/* Adds the files the weight_map entries e (of the index at path) name. */
static enum wshard_err add_mapped_files(struct wshard_catalog *cat, const char *path,
					struct index_entry *e, size_t n,
					struct wshard_error *err)
{
	enum wshard_err rc;
	size_t i;

	for (i = 0; i < n; i++) {
		/* "./a.safetensors" names a.safetensors */
		while (e[i].file && !strncmp(e[i].file, "./", 2))
			e[i].file += 2;
		if (!e[i].file)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': weight_map entry for '%s' is not a string",
						path, e[i].name);
		if (find_file(cat, e[i].file) >= 0)
			continue;
		rc = catalog_check_member(cat, e[i].file, path, e[i].name, err);
		if (!rc)
			rc = catalog_add_file(cat, e[i].file, err);
		if (rc)
			return rc;
	}
	if (cat->nfiles == 0)
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': the weight_map is empty", path);
	return WSHARD_OK;
}

/* Reads the weight_map and checks it against the files it names. */
static enum wshard_err load_index(struct wshard_catalog *cat, const char *path,
				  struct wshard_error *err)
{
	void *root = NULL;	/* json_t *: the strings of jansson's entries */
	struct index_entry *e = NULL;
	char *text = NULL, *buf = NULL;
	size_t len, n = 0;
	enum wshard_err rc;

	rc = catalog_read_small(cat, path, &text, &len, err);
	if (rc)
		return rc;
	if (!catalog_index_fast(text, len, &buf, &e, &n))
		rc = catalog_index_jansson(path, text, len, &root, &e, &n, err);
	if (!rc)
		rc = add_mapped_files(cat, path, e, n, err);
	if (rc)
		goto out;
	rc = catalog_open_files(cat, err);
	if (!rc)
		rc = catalog_index_check(cat, path, e, n, err);
out:
	json_decref(root);
	free(e);
	free(buf);
	free(text);
	return rc;
}

static bool is_weight_file(const char *name)
{
	static const char *const skip[] = {
		".safetensors", ".bin", ".pt", ".pth", ".index.json",
	};
	size_t i;

	for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (has_suffix(name, skip[i]))
			return true;
	return strcmp(name, WSHARD_MANIFEST) == 0;
}

/* Non-weight files to copy, and .safetensors files nothing references. */
static enum wshard_err scan_dir(struct wshard_catalog *cat,
				struct wshard_error *err)
{
	DIR *d = opendir(cat->dir);
	struct dirent *e;
	enum wshard_err rc = WSHARD_OK;

	if (!d)
		return wshard_error_set(err, WSHARD_EIO, "cannot open directory '%s': %s",
					cat->dir, strerror(errno));
	while ((e = readdir(d))) {
		struct stat sb;
		char *path;

		if (e->d_name[0] == '.')
			continue;
		path = wshard_path_join(cat->dir, e->d_name);
		if (!path) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			break;
		}
		if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
			free(path);
			continue;
		}
		free(path);
		if (has_suffix(e->d_name, ".safetensors")) {
			if (find_file(cat, e->d_name) < 0)
				rc = catalog_push_name(&cat->ignored, &cat->nignored,
						       e->d_name, err);
		} else if (!is_weight_file(e->d_name)) {
			rc = catalog_push_name(&cat->extra, &cat->nextra, e->d_name, err);
		}
		if (rc)
			break;
	}
	closedir(d);
	catalog_sort_names(cat->extra, cat->nextra);
	catalog_sort_names(cat->ignored, cat->nignored);
	return rc;
}

/* The archive's top-level members, sorted like a directory's. */
static enum wshard_err scan_archive(struct wshard_catalog *cat, struct wshard_error *err)
{
	size_t i;
	enum wshard_err rc = WSHARD_OK;

	for (i = 0; i < cat->archive->nmembers && !rc; i++) {
		const char *n = cat->archive->members[i].name;

		if (strchr(n, '/') || n[0] == '.')
			continue;
		if (has_suffix(n, ".safetensors")) {
			if (find_file(cat, n) < 0)
				rc = catalog_push_name(&cat->ignored, &cat->nignored, n, err);
		} else if (!is_weight_file(n)) {
			rc = catalog_push_name(&cat->extra, &cat->nextra, n, err);
		}
	}
	catalog_sort_names(cat->extra, cat->nextra);
	catalog_sort_names(cat->ignored, cat->nignored);
	return rc;
}

/* Forgets a config.json read only to look at it. */
static void forget_config(struct wshard_catalog *cat)
{
	free(cat->config.architecture);
	json_decref(cat->config.json);
	memset(&cat->config, 0, sizeof(cat->config));
	cat->has_config = false;
}

/*
 * Runs check on config.json alone, then forgets it: the open reads it
 * again in its turn, so that any other error comes in the order it
 * always did.
 */
static enum wshard_err precheck(struct wshard_catalog *cat, const char *config,
				const struct wshard_precheck *check, struct wshard_error *err)
{
	struct wshard_error ignored = { 0 };
	enum wshard_err rc = WSHARD_OK;

	if (!catalog_load_config(cat, config, &ignored))
		rc = check->fn(cat, check->ctx, err);
	forget_config(cat);
	return rc;
}

/*
 * Neither an index nor model.safetensors nor Mistral's params.json: every
 * top-level *.safetensors (catalog_top_files), as vLLM's default loader
 * globs them; an error where there is none.
 */
/* See catalog.h. */
enum wshard_err catalog_open_found(struct wshard_catalog *cat, enum wshard_err rc, char **names,
				   size_t n, struct wshard_error *err)
{
	size_t i;

	for (i = 0; i < n && !rc; i++) {
		rc = catalog_check_member(cat, names[i], NULL, NULL, err);
		if (!rc)
			rc = catalog_add_file(cat, names[i], err);
	}
	if (!rc)
		rc = catalog_open_files(cat, err);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

static enum wshard_err open_glob(struct wshard_catalog *cat, struct wshard_error *err)
{
	char **names = NULL;
	size_t n = 0;
	enum wshard_err rc;

	rc = catalog_top_files(cat, &names, &n, err);
	if (!rc && n == 0)
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "'%s' holds neither %s nor %s nor any other *.safetensors",
				      cat->path, INDEX_NAME, SINGLE_NAME);
	return catalog_open_found(cat, rc, names, n, err);
}

/*
 * Mistral's own format (catalog_mistral.c): consolidated*.safetensors
 * beside params.json, through consolidated.safetensors.index.json where
 * there is one, as vLLM's mistral loader filters them.  *out_mistral
 * false where it has none: then every top-level *.safetensors
 * (open_glob), an error where there is none.
 */
static enum wshard_err open_mistral(struct wshard_catalog *cat, bool *out_mistral,
				    struct wshard_error *err)
{
	char *index = wshard_path_join(cat->dir, "consolidated.safetensors.index.json");
	char **names = NULL;
	size_t i, n = 0;
	enum wshard_err rc;

	*out_mistral = false;
	rc = index ? catalog_mistral_files(cat, &names, &n, err)
		   : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!rc && n == 0) {
		free(index);
		return open_glob(cat, err);
	}
	if (!rc && has_file(cat, index)) {
		rc = load_index(cat, index, err);
	} else {
		for (i = 0; i < n && !rc; i++)
			rc = catalog_add_file(cat, names[i], err);
		if (!rc)
			rc = catalog_open_files(cat, err);
	}
	*out_mistral = !rc;
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(index);
	return rc;
}

/*
 * Cosmos 3's unified checkpoints (catalog_subdirs.c): every file of
 * *.safetensors in the "[tv]*er" folders, as vLLM's class for config.json's
 * architecture globs them whether or not the top level has weights too
 * (then ignored), each checked to stay inside the directory.  *opened
 * false where the glob finds none and top (the top level has weights).
 */
static enum wshard_err open_subdirs(struct wshard_catalog *cat, bool top, bool *opened,
				    struct wshard_error *err)
{
	char **names = NULL;
	size_t n = 0;
	enum wshard_err rc;

	*opened = false;
	rc = catalog_subdir_files(cat, &names, &n, err);
	if (!rc && n == 0 && !top)
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "'%s' holds neither %s nor %s nor [tv]*er/*.safetensors, where vLLM reads %s's weights",
				      cat->path, INDEX_NAME, SINGLE_NAME, catalog_subdir_arch(cat));
	if (!rc && n == 0)
		return WSHARD_OK;
	rc = catalog_open_found(cat, rc, names, n, err);
	*opened = !rc;
	return rc;
}

/*
 * Whether config.json (at config) names an architecture vLLM 0.32 loads
 * only from Mistral's format, beside params.json: Voxtral, whose class
 * reads params.json's names and audio_config.downsample_factor
 * (voxtral.py), while its releases ship transformers' format too.  Such a
 * folder is read as Mistral's, as vLLM must be told to read it
 * (--config-format mistral).
 */
static bool mistral_only(struct wshard_catalog *cat, const char *config)
{
	struct wshard_error ignored = { 0 };
	char *params = wshard_path_join(cat->dir, "params.json");
	bool only = false;

	if (params && has_file(cat, params) && has_file(cat, config) &&
	    !catalog_load_config(cat, config, &ignored))
		only = cat->config.architecture &&
		       !strcmp(cat->config.architecture, "VoxtralForConditionalGeneration");
	free(params);
	forget_config(cat);
	return only;
}

static enum wshard_err open_dir(struct wshard_catalog *cat,
				const struct wshard_precheck *check,
				struct wshard_error *err)
{
	char *index = wshard_path_join(cat->dir, INDEX_NAME);
	char *single = wshard_path_join(cat->dir, SINGLE_NAME);
	char *config = wshard_path_join(cat->dir, "config.json");
	bool mistral = false, sub = false;
	enum wshard_err rc;

	if (!index || !single || !config) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	if (check && has_file(cat, config)) {
		rc = precheck(cat, config, check, err);
		if (rc)
			goto out;
	}
	rc = catalog_subdir_arch(cat)
		? open_subdirs(cat, has_file(cat, index) || has_file(cat, single), &sub, err)
		: WSHARD_OK;
	if (rc || sub) {
		/* opened (or refused) above */
	} else if (mistral_only(cat, config)) {
		rc = open_mistral(cat, &mistral, err);
	} else if (has_file(cat, index)) {
		rc = load_index(cat, index, err);
	} else if (has_file(cat, single)) {
		rc = catalog_check_member(cat, SINGLE_NAME, NULL, NULL, err);
		if (!rc)
			rc = catalog_add_file(cat, SINGLE_NAME, err);
		if (!rc)
			rc = catalog_open_files(cat, err);
	} else {
		rc = open_mistral(cat, &mistral, err);
	}
	if (rc)
		goto out;
	if (mistral) {
		rc = catalog_mistral_config(cat, err);
		if (rc)
			goto out;
	} else if (has_file(cat, config)) {
		rc = catalog_load_config(cat, config, err);
		if (rc)
			goto out;
	}
	rc = cat->archive ? scan_archive(cat, err) : scan_dir(cat, err);
	if (!rc)
		rc = catalog_st_modules(cat, err);
out:
	free(index);
	free(single);
	free(config);
	return rc;
}

/* wshard_catalog_open with a precheck (NULL: none), see wshard.h. */
static enum wshard_err catalog_open_checked(struct wshard_catalog **out_cat,
					    const char *path,
					    const struct wshard_precheck *check,
					    struct wshard_error *err)
{
	struct wshard_catalog *cat;
	struct stat sb;
	enum wshard_err rc;

	*out_cat = NULL;
	if (stat(path, &sb) < 0)
		return wshard_error_set(err, errno == ENOENT ? WSHARD_EINVAL : WSHARD_EIO,
					"cannot open '%s': %s", path, strerror(errno));
	cat = calloc(1, sizeof(*cat));
	if (!cat)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	cat->path = strdup(path);
	if (!cat->path) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	if (S_ISREG(sb.st_mode) && arc_is_archive(path)) {
		cat->dir = strdup(path);
		rc = cat->dir ? arc_open(&cat->archive, path, err)
			      : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		if (!rc)
			rc = open_dir(cat, check, err);
	} else if (S_ISDIR(sb.st_mode)) {
		cat->dir = strdup(path);
		rc = cat->dir ? open_dir(cat, check, err)
			      : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	} else if (S_ISREG(sb.st_mode)) {
		char *slash = strrchr(path, '/');

		cat->dir = slash ? strndup(path, (size_t)(slash - path + (slash == path)))
				 : strdup(".");
		if (!cat->dir) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			goto out;
		}
		rc = catalog_add_file(cat, slash ? slash + 1 : path, err);
		if (!rc)
			rc = catalog_open_files(cat, err);
	} else {
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "cannot open '%s': not a directory or a file", path);
	}
out:
	if (rc) {
		wshard_catalog_free(cat);
		return rc;
	}
	*out_cat = cat;
	return WSHARD_OK;
}

enum wshard_err wshard_catalog_open(struct wshard_catalog **out_cat,
				    const char *path, struct wshard_error *err)
{
	return catalog_open_checked(out_cat, path, NULL, err);
}

enum wshard_err wshard_catalog_open_source(struct wshard_catalog **out_cat,
					   const char *src, const char *revision,
					   struct wshard_error *err)
{
	return wshard_catalog_open_source_checked(out_cat, src, revision, NULL, err);
}

enum wshard_err wshard_catalog_open_source_checked(struct wshard_catalog **out_cat,
						   const char *src, const char *revision,
						   const struct wshard_precheck *check,
						   struct wshard_error *err)
{
	struct wshard_hf_ref *ref = NULL;
	struct wshard_catalog *cat = NULL;
	struct stat sb;
	char *given;
	enum wshard_err rc;

	*out_cat = NULL;
	if (stat(src, &sb) == 0) {
		if (revision)
			return wshard_error_set(err, WSHARD_EUSAGE,
						"--revision '%s' needs a repo id, and '%s' is a local path",
						revision, src);
		return catalog_open_checked(out_cat, src, check, err);
	}
	if (!wshard_hf_is_repo_id(src)) {
		if (revision)
			return wshard_error_set(err, WSHARD_EUSAGE,
						"--revision '%s' needs a repo id of the form ORG/NAME, not '%s'",
						revision, src);
		return catalog_open_checked(out_cat, src, check, err);	/* says why it cannot */
	}
	rc = wshard_hf_resolve(&ref, src, revision, err);
	if (!rc)
		rc = catalog_open_checked(&cat, ref->snapshot, check, err);
	if (rc)
		goto out;
	given = strdup(src);
	if (!given) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	free(cat->path);
	cat->path = given;
	cat->hf = ref;
	ref = NULL;
	*out_cat = cat;
	cat = NULL;
out:
	wshard_catalog_free(cat);
	wshard_hf_ref_free(ref);
	return rc;
}
