/*
 * rules_load.c - where rules come from: a file the user passes with
 * --rules, or the built-in one for config.json's architecture.  The
 * built-in architectures are files in lib/rules/ embedded at build time,
 * in the same format; rules_parse.c parses either.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wshard.h"
#include "base/fileio.h"
#include "rules.h"

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
	char like[1024] = "";
	char name[128];
	size_t i, nknown = 0;
	enum wshard_err rc;

	*out_rules = NULL;
	if (!architecture)
		return wshard_error_set(err, WSHARD_EINVAL,
					"config.json names no architecture (\"architectures\": [\"LlamaForCausalLM\"], for one): add it, or pass --rules FILE");
	for (b = wshard_builtin_rules; b->name; b++) {
		struct wshard_rules *r;

		snprintf(name, sizeof(name), "builtin:%s", b->name);
		rc = wshard_rules_parse(&r, b->text, strlen(b->text), name, err);
		if (rc)
			return rc;
		for (i = 0; i < r->narchs; i++) {
			if (strcmp(r->archs[i], architecture) == 0) {
				*out_rules = r;
				return WSHARD_OK;
			}
			nknown++;
			/* the whole list would not fit one line: the names that
			 * begin as this one does (its family, mostly) */
			if (strncasecmp(r->archs[i], architecture, 4) == 0 &&
			    strlen(like) + strlen(r->archs[i]) + 3 < sizeof(like))
				sprintf(like + strlen(like), "%s%s", *like ? ", " : "",
					r->archs[i]);
		}
		wshard_rules_free(r);
	}
	return wshard_error_set(err, WSHARD_EINVAL,
				"no built-in rules for architecture '%s': pass --rules FILE (scripts/learn-rules writes one; wshard-families(7) lists the %zu built in%s%s)",
				architecture, nknown, *like ? ", among them " : "", like);
}

const char *const *wshard_rules_architectures(void)
{
	static const char *list[512];
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
