/*
 * rules_source.c - the names rules match a source tensor by.  Checkpoints
 * of one architecture come with more than one naming: the Hub's BLOOM
 * lacks the "transformer." transformers saves, and a Qwen2.5-VL or LLaVA
 * saved by transformers 4.52 or later puts its text model under
 * "model.language_model." where Qwen's and llava-hf's releases have
 * "model." and "language_model.model.".  vLLM maps every such naming onto
 * its own (hf_to_vllm_mapper); "source_prefix" and "source_renames" let
 * one set of rules read them all, while the manifest keeps each tensor's
 * own name.  A rename's "{n}" and "{e}" stand for a layer's and an
 * expert's number, which its "to" puts where it says.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "rules.h"
#include "expr.h"
#include "source/catalog.h"

/*
 * Whether name begins with pattern from, whose "{n}" and "{e}" each stand
 * for a run of digits (a layer, an expert: Mistral's layers.{n}.attention.
 * for model.layers.{n}.self_attn.): *out_len the length of name it covers,
 * at[] and len[] (index 0 {n}, 1 {e}) where their digits are.
 */
static bool from_match(const char *from, const char *name, size_t *out_len,
		       const char *at[2], size_t len[2])
{
	const char *p = from, *q = name;

	while (*p) {
		if ((!strncmp(p, "{n}", 3) || !strncmp(p, "{e}", 3))) {
			int k = p[1] == 'e';
			size_t d = strspn(q, "0123456789");

			if (d == 0)
				return false;
			at[k] = q;
			len[k] = d;
			p += 3;
			q += d;
		} else if (*p++ != *q++) {
			return false;
		}
	}
	*out_len = (size_t)(q - name);
	return true;
}

/* to, its "{n}" and "{e}" the digits from_match found, "{2n}" and
 * "{2n+1}" twice the layer's number and one more (Cosmos 3 Edge's blocks,
 * each two of vLLM's layers), then tail, into buf; false where it would
 * not fit. */
static bool to_name(const char *to, const char *at[2], const size_t len[2],
		    const char *tail, char *buf)
{
	size_t o = 0, nt = strlen(tail);

	while (*to) {
		bool odd = !strncmp(to, "{2n+1}", 6);

		if ((odd || !strncmp(to, "{2n}", 4)) && at[0] && len[0] < 10) {
			int w = snprintf(buf + o, RULES_NAME_MAX - o, "%lu",
					 2 * strtoul(at[0], NULL, 10) + odd);

			if (w < 0 || o + (size_t)w >= RULES_NAME_MAX)
				return false;
			o += (size_t)w;
			to += odd ? 6 : 4;
			continue;
		}
		if ((!strncmp(to, "{n}", 3) || !strncmp(to, "{e}", 3)) && at[to[1] == 'e']) {
			int k = to[1] == 'e';

			if (o + len[k] >= RULES_NAME_MAX)
				return false;
			memcpy(buf + o, at[k], len[k]);
			o += len[k];
			to += 3;
			continue;
		}
		if (o + 1 >= RULES_NAME_MAX)
			return false;
		buf[o++] = *to++;
	}
	if (o + nt >= RULES_NAME_MAX)
		return false;
	memcpy(buf + o, tail, nt + 1);
	return true;
}

const char *rules_source_name(const struct wshard_rules *r, const char *name, char *buf)
{
	size_t np, nn = strlen(name), i;

	for (i = 0; i < r->nsrc_renames; i++) {
		const char *at[2] = { NULL, NULL };
		size_t len[2] = { 0, 0 }, nf;

		if (!from_match(r->src_from[i], name, &nf, at, len))
			continue;
		return to_name(r->src_to[i], at, len, name + nf, buf) ? buf : name;
	}
	if (!r->source_prefix)
		return name;
	np = strlen(r->source_prefix);
	if (strncmp(name, r->source_prefix, np) == 0 || np + nn >= RULES_NAME_MAX)
		return name;
	memcpy(buf, r->source_prefix, np);
	memcpy(buf + np, name, nn + 1);
	return buf;
}

/*
 * Whether name begins with pattern to (a rename's "to"), each "{n}",
 * "{2n}" or "{2n+1}" a layer's digits (those of "{2n}" even, of "{2n+1}"
 * odd), the layer's own number written into nbuf, each "{e}" an expert's
 * (at[1], len[1]); *out_len the length of name it covers.
 */
static bool to_match(const char *to, const char *name, size_t *out_len, char nbuf[24],
		     const char *at[2], size_t len[2])
{
	const char *q = name;

	while (*to) {
		int two = !strncmp(to, "{2n}", 4) ? 4 : !strncmp(to, "{2n+1}", 6) ? 6 : 0;
		size_t d = strspn(q, "0123456789");

		if (two || !strncmp(to, "{n}", 3) || !strncmp(to, "{e}", 3)) {
			unsigned long v = strtoul(q, NULL, 10);

			if (d == 0 || d > 9 || (two && (int)(v & 1) != (two == 6)))
				return false;
			if (to[1] == 'e') {
				at[1] = q;
				len[1] = d;
			} else {
				snprintf(nbuf, 24, "%lu", two ? v / 2 : v);
				at[0] = nbuf;
				len[0] = strlen(nbuf);
			}
			to += two ? two : 3;
			q += d;
		} else if (*to++ != *q++) {
			return false;
		}
	}
	*out_len = (size_t)(q - name);
	return true;
}

/* Whether some tensor of cat begins with pattern from. */
static bool names_so(const struct wshard_catalog *cat, const char *from)
{
	const char *at[2];
	size_t i, len[2], n;

	for (i = 0; i < cat->ntensors; i++)
		if (from_match(from, cat->tensors[i].name, &n, at, len))
			return true;
	return false;
}

/* See rules.h. */
const char *rules_checkpoint_name(const struct wshard_rules *r, const struct wshard_catalog *cat,
				  const char *name, char *buf)
{
	char back[RULES_NAME_MAX], nbuf[24];
	size_t i, nt, np;

	for (i = 0; i < r->nsrc_renames; i++) {
		const char *at[2] = { NULL, NULL };
		size_t len[2] = { 0, 0 };

		if (to_match(r->src_to[i], name, &nt, nbuf, at, len) && names_so(cat, r->src_from[i]) &&
		    to_name(r->src_from[i], at, len, name + nt, buf) &&
		    !strcmp(rules_source_name(r, buf, back), name))
			return buf;
	}
	np = r->source_prefix ? strlen(r->source_prefix) : 0;
	if (np && !strncmp(name, r->source_prefix, np) && name[np] &&
	    !names_so(cat, r->source_prefix) && !strcmp(rules_source_name(r, name + np, back), name))
		return name + np;
	return name;
}

static bool prefix_ok(json_t *v)
{
	return json_is_string(v) && json_string_length(v) > 0 &&
	       json_string_length(v) < RULES_PREFIX_MAX;
}

/* One folder of the checkpoint's top level: a name, no '/', not hidden. */
static bool is_folder_name(const char *f)
{
	return f && *f && f[0] != '.' && !strchr(f, '/');
}

/* The prologue of a key whose value, where given, is a non-empty array:
 * *names, and *more where not NULL, get room for one string an item. */
static enum wshard_err name_array(const struct wshard_rules *r, json_t *val,
				  const char *key, char ***names, char ***more,
				  struct wshard_error *err)
{
	if (!val)
		return WSHARD_OK;
	if (!json_is_array(val) || json_array_size(val) == 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"%s\" is not a non-empty array", r->name, key);
	*names = calloc(json_array_size(val), sizeof(char *));
	if (more)
		*more = calloc(json_array_size(val), sizeof(char *));
	if (!*names || (more && !*more))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

/* "weight_folders": [{"folder": NAME, "config": KEY}, ...], "config"
 * optional. */
static enum wshard_err parse_folders(struct wshard_rules *r, json_t *val,
				     struct wshard_error *err)
{
	enum wshard_err rc = name_array(r, val, "weight_folders", &r->folder,
					&r->folder_config, err);
	json_t *item;
	size_t i;

	if (rc)
		return rc;
	json_array_foreach(val, i, item) {
		json_t *folder = json_object_get(item, "folder");
		json_t *config = json_object_get(item, "config");
		const char *f = json_string_value(folder);

		if (!json_is_object(item) || !is_folder_name(f) ||
		    json_object_size(item) != 1u + (config != NULL) ||
		    (config && (!json_is_string(config) ||
				!expr_is_bare_key(json_string_value(config)) ||
				strchr(json_string_value(config), '.'))))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': \"weight_folders\"[%zu] is not {\"folder\": NAME, \"config\": KEY} (a folder's name; \"config\", optional, an undotted config key)",
						r->name, i);
		r->folder[i] = strdup(f);
		r->folder_config[i] = config ? strdup(json_string_value(config)) : NULL;
		r->nfolders = i + 1;
		if (!r->folder[i] || (config && !r->folder_config[i]))
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

/* "copy_folders": [NAME, ...], each one folder's name. */
static enum wshard_err parse_copy_folders(struct wshard_rules *r, json_t *val,
					  struct wshard_error *err)
{
	json_t *item;
	size_t i;
	enum wshard_err rc = name_array(r, val, "copy_folders", &r->copy_folder, NULL, err);

	if (rc)
		return rc;
	json_array_foreach(val, i, item) {
		const char *f = json_string_value(item);

		if (!is_folder_name(f))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': \"copy_folders\"[%zu] is not the name of a folder",
						r->name, i);
		r->copy_folder[i] = strdup(f);
		r->ncopy_folders = i + 1;
		if (!r->copy_folder[i])
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

/* "weight_files": [{"file": NAME, "prefix": P}, ...]: NAME a top-level
 * *.safetensors, P the prefix vLLM puts before its names. */
static enum wshard_err parse_files(struct wshard_rules *r, json_t *val,
				   struct wshard_error *err)
{
	enum wshard_err rc = name_array(r, val, "weight_files", &r->file, &r->file_prefix, err);
	json_t *item;
	size_t i;

	if (rc)
		return rc;
	json_array_foreach(val, i, item) {
		const char *f = json_string_value(json_object_get(item, "file"));
		json_t *prefix = json_object_get(item, "prefix");
		size_t n = f ? strlen(f) : 0;

		if (!json_is_object(item) || json_object_size(item) != 2 || !is_folder_name(f) ||
		    n <= strlen(".safetensors") || strcmp(f + n - strlen(".safetensors"), ".safetensors") ||
		    !prefix_ok(prefix))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': \"weight_files\"[%zu] is not {\"file\": NAME, \"prefix\": P} (a top-level *.safetensors; P of 1 to %d characters)",
						r->name, i, RULES_PREFIX_MAX - 1);
		r->file[i] = strdup(f);
		r->file_prefix[i] = strdup(json_string_value(prefix));
		r->nfiles = i + 1;
		if (!r->file[i] || !r->file_prefix[i])
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

bool rules_reads_folder_config(const struct wshard_rules *r, const char *e)
{
	const char *at;
	size_t i, n;

	for (i = 0; i < r->nfolders; i++) {
		n = r->folder_config[i] ? strlen(r->folder_config[i]) : 0;
		for (at = e; n && (at = strstr(at, r->folder_config[i])); at += n)
			if (at[n] == '.' && (at == e || !(isalnum((unsigned char)at[-1]) ||
							 at[-1] == '_' || at[-1] == '.')))
				return true;
	}
	return false;
}

enum wshard_err wshard_rules_add_folders(const struct wshard_rules *rules,
					 struct wshard_catalog *cat, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	for (i = 0; i < rules->nfolders && !rc; i++)
		rc = catalog_add_folder(cat, rules->folder[i], rules->folder_config[i], err);
	for (i = 0; i < rules->ncopy_folders && !rc; i++)
		rc = catalog_copy_folder(cat, rules->copy_folder[i], err);
	for (i = 0; i < rules->nfiles && !rc; i++)
		rc = catalog_add_prefixed(cat, rules->file[i], rules->file_prefix[i], err);
	return rc;
}

enum wshard_err rules_parse_source(struct wshard_rules *r, json_t *root,
				   struct wshard_error *err)
{
	json_t *val = json_object_get(root, "source_prefix"), *item;
	size_t i;
	enum wshard_err rc = parse_folders(r, json_object_get(root, "weight_folders"), err);

	if (!rc)
		rc = parse_copy_folders(r, json_object_get(root, "copy_folders"), err);
	if (!rc)
		rc = parse_files(r, json_object_get(root, "weight_files"), err);
	if (rc)
		return rc;
	/* "num_layers": vLLM's decoder layers, an expression, where
	 * config.json's num_hidden_layers counts something else */
	val = json_object_get(root, "num_layers");
	if (val && (!json_is_string(val) || !json_string_length(val)))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"num_layers\" is not an expression of config.json keys",
					r->name);
	if (val && !(r->num_layers = strdup(json_string_value(val))))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	val = json_object_get(root, "source_prefix");
	if (val && !prefix_ok(val))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"source_prefix\" is not a string of 1 to %d characters",
					r->name, RULES_PREFIX_MAX - 1);
	if (val && !(r->source_prefix = strdup(json_string_value(val))))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	val = json_object_get(root, "source_renames");
	rc = name_array(r, val, "source_renames", &r->src_from, &r->src_to, err);
	if (rc)
		return rc;
	json_array_foreach(val, i, item) {
		json_t *from = json_object_get(item, "from"), *to = json_object_get(item, "to");

		if (!json_is_object(item) || json_object_size(item) != 2 ||
		    !prefix_ok(from) || !prefix_ok(to))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': \"source_renames\"[%zu] is not {\"from\": PREFIX, \"to\": PREFIX}, each of 1 to %d characters",
						r->name, i, RULES_PREFIX_MAX - 1);
		if (((strstr(json_string_value(to), "{n}") || strstr(json_string_value(to), "{2n")) &&
		     !strstr(json_string_value(from), "{n}")) ||
		    (strstr(json_string_value(to), "{e}") &&
		     !strstr(json_string_value(from), "{e}")))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': \"source_renames\"[%zu]: \"to\" has a {n} or {e} that \"from\" lacks",
						r->name, i);
		r->src_from[i] = strdup(json_string_value(from));
		r->src_to[i] = strdup(json_string_value(to));
		r->nsrc_renames = i + 1;
		if (!r->src_from[i] || !r->src_to[i])
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

enum wshard_err rules_parse_rename(struct wshard_rules *r, json_t *val,
				   struct wshard_error *err)
{
	const char *prefix = json_string_value(json_object_get(val, "prefix"));
	const char *to = json_string_value(json_object_get(val, "to"));
	const char *from = json_string_value(json_object_get(val, "from"));
	const char *add = json_string_value(json_object_get(val, "add"));

	if (!val)
		return WSHARD_OK;
	if (!json_is_object(val) || json_object_size(val) != 3 || !prefix || !to ||
	    !from == !add || !strstr(prefix, "{n}") || !strstr(to, "{n}") ||
	    strstr(prefix, "{e}") || strstr(to, "{e}"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"rename_layers\" is not {\"prefix\", \"to\", \"from\" or \"add\"} (prefix and to each with {n}, from or add an expression)",
					r->name);
	r->rename_add = add != NULL;
	if (add)
		from = add;
	r->rename_prefix = strdup(prefix);
	r->rename_to = strdup(to);
	r->rename_from = strdup(from);
	if (!r->rename_prefix || !r->rename_to || !r->rename_from)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}
