/*
 * rules.c - rules files: per-architecture tables that say how each
 * source tensor is split, replicated, skipped or fused.  The built-in
 * architectures are files in lib/rules/ embedded at build time, in the
 * same format a user passes with --rules.  This file loads them and
 * matches names against their patterns; rules_parse.c parses one.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "rules.h"

bool rules_match(const char *pattern, const char *name, struct rules_capture *cap)
{
	const char *p = pattern, *s = name;

	cap->n = cap->e = -1;
	while (*p) {
		if (p[0] == '*' && p[1] == '\0')
			return *s != '\0';	/* a trailing "*": any rest */
		if (p[0] == '{' && (p[1] == 'n' || p[1] == 'e') && p[2] == '}') {
			long v = 0;
			const char *start = s;

			while (*s >= '0' && *s <= '9' && v < 100000000)
				v = v * 10 + (*s++ - '0');
			if (s == start || (s - start > 1 && *start == '0'))
				return false;
			if (p[1] == 'n')
				cap->n = v;
			else
				cap->e = v;
			p += 3;
			continue;
		}
		if (*p++ != *s++)
			return false;
	}
	return *s == '\0';
}

char *rules_expand(const char *pattern, const struct rules_capture *cap)
{
	size_t len = strlen(pattern) + 1;
	char *out, *o;
	const char *p;

	/* each 3-byte placeholder becomes at most 20 digits */
	for (p = pattern; (p = strchr(p, '{')); p++)
		len += 20;
	out = o = malloc(len);
	p = pattern;

	if (!out)
		return NULL;
	while (*p) {
		if (p[0] == '{' && (p[1] == 'n' || p[1] == 'e') && p[2] == '}') {
			long v = p[1] == 'n' ? cap->n : cap->e;

			o += sprintf(o, "%ld", v < 0 ? 0 : v);
			p += 3;
			continue;
		}
		*o++ = *p++;
	}
	*o = '\0';
	return out;
}

enum wshard_err wshard_rules_load(struct wshard_rules **out_rules,
				  const char *path, struct wshard_error *err)
{
	char real[PATH_MAX];
	char *text;
	size_t len;
	enum wshard_err rc;

	*out_rules = NULL;
	rc = wshard_read_file(path, 16ULL << 20, &text, &len, err);
	if (rc)
		return rc;
	/* named by its real path: the manifest records it, and verify reloads
	 * it from wherever it runs */
	rc = wshard_rules_parse(out_rules, text, len, realpath(path, real) ? real : path, err);
	free(text);
	return rc;
}

enum wshard_err wshard_rules_builtin(struct wshard_rules **out_rules,
				     const char *architecture,
				     struct wshard_error *err)
{
	const struct wshard_builtin_rule *b;
	char known[512] = "";
	char name[128];
	size_t i;
	enum wshard_err rc;

	*out_rules = NULL;
	for (b = wshard_builtin_rules; b->name; b++) {
		struct wshard_rules *r;

		snprintf(name, sizeof(name), "builtin:%s", b->name);
		rc = wshard_rules_parse(&r, b->text, strlen(b->text), name, err);
		if (rc)
			return rc;
		for (i = 0; i < r->narchs; i++) {
			if (architecture && strcmp(r->archs[i], architecture) == 0) {
				*out_rules = r;
				return WSHARD_OK;
			}
			if (strlen(known) + strlen(r->archs[i]) + 3 < sizeof(known))
				sprintf(known + strlen(known), "%s%s", *known ? ", " : "",
					r->archs[i]);
		}
		wshard_rules_free(r);
	}
	return wshard_error_set(err, WSHARD_EINVAL,
				"no built-in rules for architecture '%s' (known: %s); pass --rules FILE",
				architecture ? architecture : "(none in config.json)", known);
}

const char *const *wshard_rules_architectures(void)
{
	static const char *list[64];
	static bool done;
	const struct wshard_builtin_rule *b;
	size_t n = 0, i;

	if (done)
		return list;
	for (b = wshard_builtin_rules; b->name; b++) {
		struct wshard_rules *r;

		if (wshard_rules_parse(&r, b->text, strlen(b->text), b->name, NULL))
			continue;
		for (i = 0; i < r->narchs && n + 1 < sizeof(list) / sizeof(list[0]); i++)
			list[n++] = strdup(r->archs[i]);
		wshard_rules_free(r);
	}
	list[n] = NULL;
	done = true;
	return list;
}

enum wshard_err wshard_rules_check_arch(const struct wshard_rules *rules,
					const char *architecture,
					struct wshard_error *err)
{
	size_t i;

	if (rules->narchs == 0)
		return WSHARD_OK;
	for (i = 0; i < rules->narchs; i++)
		if (architecture && !strcmp(rules->archs[i], architecture))
			return WSHARD_OK;
	return wshard_error_set(err, WSHARD_EINVAL,
				"rules '%s' are for %s%s, not for architecture '%s' of config.json",
				rules->name, rules->archs[0], rules->narchs > 1 ? " and others" : "",
				architecture ? architecture : "(none)");
}

const char *wshard_rules_name(const struct wshard_rules *rules)
{
	return rules->name;
}

void wshard_rules_free(struct wshard_rules *r)
{
	size_t i;
	int j;

	if (!r)
		return;
	free(r->no_ep);
	for (i = 0; i < r->narchs; i++)
		free(r->archs[i]);
	free(r->archs);
	for (i = 0; i < r->nrules; i++) {
		free(r->rules[i].match);
		free(r->rules[i].output);
		free(r->rules[i].cond);
		free(r->rules[i].reason);
		free(r->rules[i].deinterleave);
		for (j = 0; j < r->rules[i].nshape; j++)
			free(r->rules[i].shape[j]);
	}
	free(r->rules);
	for (i = 0; i < r->nops; i++) {
		free(r->ops[i].name);
		for (j = 0; j < r->ops[i].nparts; j++) {
			free(r->ops[i].parts[j]);
			free(r->ops[i].sizes[j]);
		}
	}
	free(r->ops);
	for (i = 0; i < r->nextras; i++) {
		free(r->extras[i].name);
		free(r->extras[i].option);
		free(r->extras[i].with);
	}
	free(r->extras);
	for (i = 0; i < r->ntie_drop; i++)
		free(r->tie_drop[i]);
	free(r->tie_drop);
	free(r->tie_source);
	free(r->tie_output);
	json_decref(r->defaults);
	free(r->name);
	free(r);
}
