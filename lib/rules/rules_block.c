/*
 * rules_block.c - "use" entries in a rules file's "tensors": a block of
 * rules written once (lib/rules/blocks/NAME.json, built in) and placed
 * under a prefix.  A CLIP or SigLIP encoder layer, or a Llama decoder
 * layer, is cut the same way in every family that has one; its rules are
 * kept in one place so that a fix to one is a fix to all.
 *
 * The expansion is done on the JSON, before any rule is parsed: what the
 * parser, the planner and every message see is the rules as if the file
 * had them written out.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "rules.h"

static const char *block_text(const char *name)
{
	const struct wshard_builtin_rule *b;

	for (b = wshard_builtin_blocks; b->name; b++)
		if (strcmp(b->name, name) == 0)
			return b->text;
	return NULL;
}

static enum wshard_err unknown_block(const char *rules, size_t idx, const char *name,
				     struct wshard_error *err)
{
	const struct wshard_builtin_rule *b;
	char known[512] = "";

	for (b = wshard_builtin_blocks; b->name; b++)
		if (strlen(known) + strlen(b->name) + 3 < sizeof(known))
			sprintf(known + strlen(known), "%s%s", *known ? ", " : "", b->name);
	return wshard_error_set(err, WSHARD_EINVAL,
				"'%s': tensors[%zu]: no block \"%s\" (built in: %s)",
				rules, idx, name, known);
}

/* The string key of t prefixed: prefix + t[key], or prefix + t[from]
 * where t has no key. */
static int set_prefixed(json_t *t, const char *key, const char *from, const char *prefix)
{
	const char *v = json_string_value(json_object_get(t, key));
	char *s;
	int rc;

	if (!v)
		v = json_string_value(json_object_get(t, from));
	if (!v || !(s = malloc(strlen(prefix) + strlen(v) + 1)))
		return -1;
	strcpy(s, prefix);
	strcat(s, v);
	rc = json_object_set_new(t, key, json_string(s));
	free(s);
	return rc;
}

/* Every occurrence of from in s replaced by to: a new string, or NULL. */
static char *replace_all(const char *s, const char *from, const char *to)
{
	size_t n = 0, fl = strlen(from), tl = strlen(to);
	const char *p;
	char *out, *o;

	for (p = s; (p = strstr(p, from)) != NULL; p += fl)
		n++;
	if (!(out = malloc(strlen(s) + n * tl + 1)))
		return NULL;
	for (o = out; (p = strstr(s, from)) != NULL; s = p + fl) {
		memcpy(o, s, (size_t)(p - s));
		o += p - s;
		memcpy(o, to, tl);
		o += tl;
	}
	strcpy(o, s);
	return out;
}

/* A use's "config": the block's sizes read from another section of the
 * model's config (a CLIP text tower's layers: text_config where the block
 * says vision_config).  Each string of t's "shape" rewritten. */
static int set_config(json_t *t, const char *block_config, const char *config)
{
	json_t *shape = json_object_get(t, "shape"), *v;
	char *from, *to;
	size_t i;
	int rc = 0;

	if (!config || !json_is_array(shape))
		return 0;
	from = malloc(strlen(block_config) + 2);
	to = malloc(strlen(config) + 2);
	if (!from || !to)
		rc = -1;
	else {
		sprintf(from, "%s.", block_config);
		sprintf(to, "%s.", config);
	}
	json_array_foreach(shape, i, v) {
		char *s;

		if (rc || !json_is_string(v))
			continue;
		s = replace_all(json_string_value(v), from, to);
		if (!s || json_array_set_new(shape, i, json_string(s)))
			rc = -1;
		free(s);
	}
	free(from);
	free(to);
	return rc;
}

/* The use's condition and the rule's, both. */
static int set_cond(json_t *t, const char *cond)
{
	const char *own = json_string_value(json_object_get(t, "if"));
	char *s;
	int rc;

	if (!cond)
		return 0;
	if (!own)
		return json_object_set_new(t, "if", json_string(cond));
	if (!(s = malloc(strlen(cond) + strlen(own) + 11)))
		return -1;
	sprintf(s, "%s && %s", cond, own);
	rc = json_object_set_new(t, "if", json_string(s));
	free(s);
	return rc;
}

/* The block's "fused" operators declared in the including file too: the
 * same parts where the file declares one of that name. */
static enum wshard_err merge_fused(const char *rules, json_t *root, json_t *block,
				   const char *name, struct wshard_error *err)
{
	json_t *mine = json_object_get(root, "fused"), *theirs = json_object_get(block, "fused");
	const char *key;
	json_t *val;

	/* a "fused" that is not an object: parse_ops says so */
	if (!theirs || (mine && !json_is_object(mine)))
		return WSHARD_OK;
	if (!mine) {
		mine = json_object();
		if (!mine || json_object_set_new(root, "fused", mine))
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	json_object_foreach(theirs, key, val) {
		json_t *have = json_object_get(mine, key);

		if (have && !json_equal(have, val))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': \"fused\" \"%s\" differs from block \"%s\"'s",
						rules, key, name);
		if (!have && json_object_set(mine, key, val))
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	return WSHARD_OK;
}

/* The rules of block name, prefixed and conditioned as use says, appended
 * to out. */
static enum wshard_err expand_use(const char *rules, json_t *root, json_t *use, size_t idx,
				  json_t *out, struct wshard_error *err)
{
	const char *name = json_string_value(json_object_get(use, "use"));
	const char *prefix = json_string_value(json_object_get(use, "prefix"));
	const char *oprefix = json_string_value(json_object_get(use, "output_prefix"));
	const char *cond = json_string_value(json_object_get(use, "if"));
	const char *config = json_string_value(json_object_get(use, "config"));
	const char *text, *key, *block_config;
	json_t *block, *val;
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	json_object_foreach(use, key, val) {
		bool str = !strcmp(key, "prefix") || !strcmp(key, "output_prefix") ||
			   !strcmp(key, "if") || !strcmp(key, "config");

		if (strcmp(key, "use") && strcmp(key, "comment") && !(str && json_is_string(val)))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': tensors[%zu]: a \"use\" takes \"prefix\", \"output_prefix\", \"if\" and \"config\" (strings) and \"comment\", not \"%s\"",
						rules, idx, key);
	}
	if (!name)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': tensors[%zu]: \"use\" is the name of a block", rules, idx);
	if (!(text = block_text(name)))
		return unknown_block(rules, idx, name, err);
	block = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	if (!block)
		return wshard_error_set(err, WSHARD_EINVAL, "block \"%s\" is not valid JSON", name);
	block_config = json_string_value(json_object_get(block, "config"));
	if (config && !block_config) {
		json_decref(block);
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': tensors[%zu]: block \"%s\" names no \"config\" its sizes are read from, for \"config\": \"%s\"",
					rules, idx, name, config);
	}
	rc = merge_fused(rules, root, block, name, err);
	for (i = 0; !rc && i < json_array_size(json_object_get(block, "tensors")); i++) {
		json_t *t = json_deep_copy(json_array_get(json_object_get(block, "tensors"), i));

		if (!t || !json_string_value(json_object_get(t, "match")) ||
		    json_object_get(t, "use")) {
			json_decref(t);
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "block \"%s\": tensors[%zu] has no \"match\", or a \"use\"",
					      name, i);
			break;
		}
		if ((oprefix && set_prefixed(t, "output", "match", oprefix)) ||
		    (prefix && json_object_get(t, "output") && !oprefix &&
		     set_prefixed(t, "output", "output", prefix)) ||
		    (prefix && set_prefixed(t, "match", "match", prefix)) ||
		    (prefix && json_object_get(t, "unless") &&
		     set_prefixed(t, "unless", "unless", prefix)) ||
		    set_cond(t, cond) || set_config(t, block_config, config) ||
		    json_array_append_new(out, t))
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	json_decref(block);
	return rc;
}

enum wshard_err rules_expand_uses(const char *rules, json_t *root, struct wshard_error *err)
{
	json_t *tensors = json_object_get(root, "tensors"), *out;
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	if (!json_is_array(tensors))
		return WSHARD_OK;
	for (i = 0; i < json_array_size(tensors); i++)
		if (json_object_get(json_array_get(tensors, i), "use"))
			break;
	if (i == json_array_size(tensors))
		return WSHARD_OK;
	if (!(out = json_array()))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; !rc && i < json_array_size(tensors); i++) {
		json_t *t = json_array_get(tensors, i);

		if (json_object_get(t, "use"))
			rc = expand_use(rules, root, t, i, out, err);
		else if (json_array_append(out, t))
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	if (!rc && json_object_set_new(root, "tensors", out))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (rc)
		json_decref(out);
	return rc;
}
