/*
 * extras.c - the non-weight files of a checkpoint (config.json, the
 * tokenizer's files, ...), copied into OUT by process 0.  With --dtype,
 * config.json's dtype follows the weights; a GPTQ checkpoint's
 * quantization_config gets the quantized modules it leaves to the loader.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "wshard.h"
#include "base/fileio.h"
#include "base/fpconv.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "convert.h"

/*
 * Replaces the string value of the first "KEY": "OLD" in text, keeping
 * the rest of the file as it was written.  Returns a new buffer or NULL.
 */
static char *replace_value(const char *text, const char *key, const char *old,
			   const char *val)
{
	char pat[128];
	const char *at = text, *q, *e;
	char *out;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	while ((at = strstr(at, pat))) {
		q = at + strlen(pat);
		while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
			q++;
		if (*q++ != ':') {
			at++;
			continue;
		}
		while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
			q++;
		if (*q != '"' || strncmp(q + 1, old, strlen(old)) || q[1 + strlen(old)] != '"') {
			at++;
			continue;
		}
		e = q + 1 + strlen(old);
		out = malloc(strlen(text) + strlen(val) + 1);
		if (out)
			sprintf(out, "%.*s%s%s", (int)(q + 1 - text), text, val, e);
		return out;
	}
	return NULL;
}

/*
 * A GPTQ quantization_config without modules_in_block_to_quantize leaves
 * vLLM 0.32 (AutoGPTQConfig.maybe_update_config) to take the quantized
 * modules from the model folder's safetensors headers: in wshard's output
 * the fused names (qkv_proj, gate_up_proj) match none of their parts'
 * names, and vLLM would build those layers unquantized.  Returns the list
 * it would find in the source, as JSON text (every module holding a
 * tensor that is not F16, BF16 or F32), or NULL when none is needed.
 */
static char *gptq_modules(const struct wshard_catalog *cat)
{
	json_t *q = json_object_get(cat->config.json, "quantization_config");
	const char *method = json_string_value(json_object_get(q, "quant_method"));
	json_t *seen, *list;
	char *text = NULL, mod[512];
	size_t i;

	if (!method || (strcmp(method, "gptq") && strcmp(method, "gptq_marlin")) ||
	    json_object_get(q, "modules_in_block_to_quantize"))
		return NULL;
	seen = json_object();
	list = json_array();
	for (i = 0; seen && list && i < cat->ntensors; i++) {
		const struct wshard_st_tensor *t = cat->tensors[i].info;
		const char *dot = strrchr(t->name, '.');

		if (wshard_dtype_is_convertible(t->dtype) || !dot ||
		    (size_t)(dot - t->name) >= sizeof(mod))
			continue;
		snprintf(mod, sizeof(mod), "%.*s", (int)(dot - t->name), t->name);
		if (!json_object_get(seen, mod)) {
			json_object_set_new(seen, mod, json_true());
			json_array_append_new(list, json_string(mod));
		}
	}
	if (list && json_array_size(list))
		text = json_dumps(list, JSON_COMPACT);
	json_decref(seen);
	json_decref(list);
	return text;
}

/* text with "modules_in_block_to_quantize": mods put first in the object
 * of its first "quantization_config" key; NULL when there is none. */
static char *add_gptq_modules(const char *text, const char *mods)
{
	const char *at = strstr(text, "\"quantization_config\"");
	const char *brace = at ? strchr(at, '{') : NULL;
	char *out;

	if (!brace || memchr(at, '}', (size_t)(brace - at)) || memchr(at, ',', (size_t)(brace - at)))
		return NULL;
	out = malloc(strlen(text) + strlen(mods) + 64);
	if (out)
		sprintf(out, "%.*s\"modules_in_block_to_quantize\": %s, %s",
			(int)(brace + 1 - text), text, mods, brace + 1);
	return out;
}

/*
 * text with every "tie_word_embeddings": true (the top level's and the
 * text config's) made false, or the key added false at the top where
 * none says true (the tie was the config class's default); malloc'd, or
 * NULL when out of memory.
 */
static char *untie(const char *text)
{
	static const char key[] = "\"tie_word_embeddings\"";
	const char *at, *v;
	char *out, *o;
	size_t n = 0;

	for (at = text; (at = strstr(at, key)); at++)
		n++;
	/* each "true" one byte longer as "false", or the key added */
	out = malloc(strlen(text) + n + sizeof(key) + 16);
	if (!out)
		return NULL;
	o = out;
	n = 0;
	for (at = text; (v = strstr(at, key)); at = v) {
		v += sizeof(key) - 1;
		while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r' || *v == ':')
			v++;
		memcpy(o, at, (size_t)(v - at));
		o += v - at;
		if (strncmp(v, "true", 4) == 0) {
			memcpy(o, "false", 5);
			o += 5;
			v += 4;
			n++;
		}
	}
	strcpy(o, at);
	if (n || !(v = strchr(text, '{')))
		return out;
	sprintf(out, "%.*s%s: false,%s", (int)(v + 1 - text), text, key, v + 1);
	return out;
}

/*
 * With --dtype, config.json's torch_dtype (and a top-level "dtype", as
 * newer releases write) follows the weights; a head written untied
 * (plan_tie.c) makes tie_word_embeddings false.  The file is edited in
 * place so every other byte stays as the model's authors wrote it.
 */
static enum wshard_err write_config(struct convert *cv, const char *dst, const char *mods,
				    struct wshard_error *err)
{
	static const struct { enum wshard_dtype dt; const char *name; } names[] = {
		{ WSHARD_BF16, "bfloat16" }, { WSHARD_F16, "float16" }, { WSHARD_F32, "float32" },
	};
	static const char *const keys[] = { "torch_dtype", "dtype" };
	json_t *cfg = cv->plan->config->json;
	const char *want = NULL;
	char *text = NULL, *next;
	size_t i, len;
	enum wshard_err rc;

	for (i = 0; cv->plan->opt.has_dtype && i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].dt == cv->plan->opt.dtype)
			want = names[i].name;
	rc = wshard_catalog_slurp(cv->plan->cat, "config.json", &text, &len, err);
	if (rc)
		return rc;
	if (mods) {
		next = add_gptq_modules(text, mods);
		free(text);
		if (!next)
			return wshard_error_set(err, WSHARD_EINVAL,
						"cannot add modules_in_block_to_quantize to '%s/config.json'",
						cv->plan->cat->dir);
		text = next;
	}
	for (i = 0; want && i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *old = json_string_value(json_object_get(cfg, keys[i]));

		if (!old)
			continue;
		next = replace_value(text, keys[i], old, want);
		if (!next) {
			free(text);
			return wshard_error_set(err, WSHARD_EINVAL,
						"cannot update \"%s\" in '%s/config.json'", keys[i],
						cv->plan->cat->dir);
		}
		free(text);
		text = next;
	}
	if (cv->plan->untied_by_checkpoint) {
		next = untie(text);
		free(text);
		text = next;
		if (!text)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	if (want && !json_object_get(cfg, "torch_dtype") && !json_object_get(cfg, "dtype")) {
		/* none to edit: add torch_dtype after the opening brace */
		const char *brace = strchr(text, '{');

		next = brace ? malloc(strlen(text) + 64) : NULL;
		if (next)
			sprintf(next, "%.*s\"torch_dtype\": \"%s\",%s", (int)(brace + 1 - text), text,
				want, brace + 1);
		free(text);
		text = next;
		if (!text)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	rc = wshard_write_file(dst, text, strlen(text), convert_file_flags(cv), err);
	free(text);
	return rc;
}

/* The folder of OUT that extra name goes in (a sentence-transformers
 * module's, "1_Pooling/config.json"), malloc'd; NULL for a top-level name
 * (or out of memory). */
static char *folder_of(const char *out, const char *name)
{
	const char *slash = strchr(name, '/');
	char *dir = slash ? malloc(strlen(out) + (size_t)(slash - name) + 2) : NULL;

	if (dir)
		sprintf(dir, "%s/%.*s", out, (int)(slash - name), name);
	return dir;
}

/* The folder of OUT that extra name goes in, made; none for a top-level
 * name. */
static enum wshard_err make_folder(const char *out, const char *name,
				   struct wshard_error *err)
{
	char *dir;
	enum wshard_err rc = WSHARD_OK;

	if (!strchr(name, '/'))
		return WSHARD_OK;
	if (!(dir = folder_of(out, name)))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		rc = wshard_error_set(err, WSHARD_EIO, "cannot create '%s': %s", dir,
				      strerror(errno));
	free(dir);
	return rc;
}

/* Removes the folder of OUT that extra name went in, once empty. */
static void remove_folder(const char *out, const char *name)
{
	char *dir = folder_of(out, name);

	if (dir)
		rmdir(dir);	/* fails while another file is still in it */
	free(dir);
}

enum wshard_err extras_copy(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_catalog *cat = cv->plan->cat;
	char *mods = gptq_modules(cat);
	size_t i;
	enum wshard_err rc = WSHARD_OK;

	for (i = 0; i < cat->nextra && !rc; i++) {
		char *dst = wshard_path_join(cv->run->out_dir, cat->extra[i]);

		if (!dst)
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		else if ((rc = make_folder(cv->run->out_dir, cat->extra[i], err)))
			;
		else if ((cv->plan->opt.has_dtype || mods || cv->plan->untied_by_checkpoint) &&
			 !strcmp(cat->extra[i], "config.json"))
			rc = write_config(cv, dst, mods, err);
		else
			rc = wshard_catalog_copy_extra(cat, i, dst, convert_file_flags(cv), err);
		free(dst);
		if (!rc)
			cv->ncopied = i + 1;
	}
	free(mods);
	return rc;
}

void extras_discard(struct convert *cv)
{
	size_t i;

	for (i = 0; i < cv->ncopied; i++) {
		char *dst = wshard_path_join(cv->run->out_dir, cv->plan->cat->extra[i]);

		if (dst)
			unlink(dst);
		free(dst);
		remove_folder(cv->run->out_dir, cv->plan->cat->extra[i]);
	}
	cv->ncopied = 0;
}

enum wshard_err extras_remove(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_catalog *cat = cv->plan->cat;
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	for (i = 0; i < cat->nextra && !rc; i++) {
		char *path = wshard_path_join(cv->run->out_dir, cat->extra[i]);

		if (!path)
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		else if (unlink(path) < 0 && errno != ENOENT)
			rc = wshard_error_set(err, WSHARD_EIO, "cannot remove '%s': %s", path,
					      strerror(errno));
		free(path);
		remove_folder(cv->run->out_dir, cat->extra[i]);
	}
	return rc ? rc : wshard_fsync_dir(cv->run->out_dir, err);
}
