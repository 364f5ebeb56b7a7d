/*
 * rules_load.c - where rules come from: a file the user passes with
 * --rules, or the built-in one for config.json's architecture.  The
 * built-in architectures are files in lib/rules/ embedded at build time,
 * in the same format; rules_parse.c parses either.  A classifier no file
 * names (XForSequenceClassification) takes its causal model's file, made
 * a classifier's as vLLM makes the model one.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

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

/* Whether text has architecture between double quotes, as a file whose
 * "architectures" names it has: only such files are parsed in a lookup
 * (parsing all of them, blocks expanded, was most of a small convert's
 * time). */
static bool quotes_name(const char *text, const char *architecture)
{
	size_t n = strlen(architecture);
	const char *p;

	for (p = strstr(text, architecture); p; p = strstr(p + 1, architecture))
		if (p > text && p[-1] == '"' && p[n] == '"')
			return true;
	return false;
}

/* The built-in file whose "architectures" names architecture: *out_rules
 * parsed from it and *out_file (both NULL where none does). */
static enum wshard_err find_builtin(const char *architecture, struct wshard_rules **out_rules,
				    const struct wshard_builtin_rule **out_file,
				    struct wshard_error *err)
{
	const struct wshard_builtin_rule *b;
	char name[128];
	size_t i;
	enum wshard_err rc;

	*out_rules = NULL;
	*out_file = NULL;
	for (b = wshard_builtin_rules; b->name; b++) {
		struct wshard_rules *r;

		if (!quotes_name(b->text, architecture))
			continue;
		snprintf(name, sizeof(name), "builtin:%s", b->name);
		rc = wshard_rules_parse(&r, b->text, strlen(b->text), name, err);
		if (rc)
			return rc;
		for (i = 0; i < r->narchs; i++) {
			if (strcmp(r->archs[i], architecture) == 0) {
				*out_rules = r;
				*out_file = b;
				return WSHARD_OK;
			}
		}
		wshard_rules_free(r);
	}
	return WSHARD_OK;
}

static bool is_head(const char *name)
{
	return name && strncmp(name, "lm_head.", 8) == 0;
}

/*
 * The causal model's rules document turned into its classifier's, as
 * vLLM's as_seq_cls_model turns the model (model_executor/models/
 * adapters.py): the LM head is never built (its ParallelLMHead a missing
 * layer), so its rules become skips and the tie goes; score, a
 * ReplicatedLinear in the head dtype (F32 unless config.json's head_dtype
 * says otherwise: "dtype": "head"), is whole on every rank and every
 * pipeline stage, and so is its bias where the checkpoint has one
 * (transformers' token classifiers do): auto_set_score_bias makes it a
 * parameter in score's dtype.
 * Returns false where the document does not fit that: no rule takes
 * lm_head.*, or one writes lm_head.* from another name.
 */
static bool make_classifier(json_t *root, const char *architecture)
{
	json_t *tensors = json_object_get(root, "tensors");
	json_t *stages = json_object_get(json_object_get(root, "pipeline"), "stages");
	json_t *t, *st;
	size_t i, nheads = 0;

	json_array_foreach(tensors, i, t) {
		const char *match = json_string_value(json_object_get(t, "match"));

		if (is_head(json_string_value(json_object_get(t, "output"))) && !is_head(match))
			return false;
		if (!is_head(match))
			continue;
		json_array_set_new(tensors, i, json_pack("{s:s, s:s, s:b, s:s}", "match", match,
							 "split", "skip", "optional", 1, "reason",
							 "the LM head: vLLM's classifier builds none"));
		nheads++;
	}
	if (!nheads)
		return false;
	json_array_append_new(tensors, json_pack("{s:s, s:s, s:s}", "match", "score.weight",
						 "split", "replicate", "dtype", "head"));
	json_array_append_new(tensors, json_pack("{s:s, s:s, s:s, s:b}", "match", "score.bias",
						 "split", "replicate", "dtype", "head",
						 "optional", 1));
	json_object_del(root, "tie");
	for (i = json_array_size(stages); i-- > 0;) {
		const char *key;
		json_t *v;
		bool head = false;

		st = json_array_get(stages, i);
		json_object_foreach(st, key, v)
			head |= is_head(key);
		if (head)
			json_array_remove(stages, i);
	}
	if (stages) {
		json_array_insert_new(stages, 0, json_pack("{s:s}", "score.bias", "all"));
		json_array_insert_new(stages, 0, json_pack("{s:s}", "score.weight", "all"));
	}
	json_object_set_new(root, "architectures", json_pack("[s]", architecture));
	return true;
}

/* The length of architecture without its classifier suffix, or 0 where it
 * ends in neither. */
static size_t classifier_base_len(const char *architecture)
{
	static const char *const suffixes[] = {
		"ForSequenceClassification", "ForTokenClassification",
	};
	size_t len = strlen(architecture), i;

	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t n = strlen(suffixes[i]);

		if (len > n && !strcmp(architecture + len - n, suffixes[i]))
			return len - n;
	}
	return 0;
}

/*
 * XForSequenceClassification or XForTokenClassification that no rules
 * file names: vLLM 0.32 builds either from XForCausalLM where it has no
 * class of that name (ModelRegistry._normalize_arch; both suffixes convert
 * to "classify", and a token classifier's pooler takes the same score
 * per token), so its rules are XForCausalLM's made a classifier's, named
 * BASE_cls.  *out_rules stays NULL where that does not apply.
 */
static enum wshard_err derive_classifier(const char *architecture,
					 struct wshard_rules **out_rules,
					 struct wshard_error *err)
{
	const struct wshard_builtin_rule *b;
	struct wshard_rules *base;
	size_t len = classifier_base_len(architecture);
	char causal[256], name[160];
	json_t *root;
	char *text;
	enum wshard_err rc;

	*out_rules = NULL;
	if (!len || len + sizeof("ForCausalLM") > sizeof(causal))
		return WSHARD_OK;
	snprintf(causal, sizeof(causal), "%.*sForCausalLM", (int)len, architecture);
	rc = find_builtin(causal, &base, &b, err);
	if (rc || !base)
		return rc;
	wshard_rules_free(base);
	root = json_loads(b->text, JSON_REJECT_DUPLICATES, NULL);
	if (!root)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!make_classifier(root, architecture)) {
		json_decref(root);
		return WSHARD_OK;
	}
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!text)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	snprintf(name, sizeof(name), "builtin:%s_cls", b->name);
	rc = wshard_rules_parse(out_rules, text, strlen(text), name, err);
	free(text);
	return rc;
}

enum wshard_err wshard_rules_builtin(struct wshard_rules **out_rules,
				     const char *architecture,
				     struct wshard_error *err)
{
	const struct wshard_builtin_rule *b;
	const char *const *known;
	char like[1024] = "";
	size_t nknown;
	enum wshard_err rc;

	*out_rules = NULL;
	if (!architecture)
		return wshard_error_set(err, WSHARD_EINVAL,
					"config.json names no architecture (\"architectures\": [\"LlamaForCausalLM\"], for one): add it, or pass --rules FILE");
	rc = find_builtin(architecture, out_rules, &b, err);
	if (!rc && !*out_rules)
		rc = derive_classifier(architecture, out_rules, err);
	if (rc || *out_rules)
		return rc;
	/* the whole list would not fit one line: the names that begin as
	 * this one does (its family, mostly) */
	known = wshard_rules_architectures();
	for (nknown = 0; known[nknown]; nknown++)
		if (strncasecmp(known[nknown], architecture, 4) == 0 &&
		    strlen(like) + strlen(known[nknown]) + 3 < sizeof(like))
			sprintf(like + strlen(like), "%s%s", *like ? ", " : "", known[nknown]);
	return wshard_error_set(err, WSHARD_EINVAL,
				"no built-in rules for architecture '%s': pass --rules FILE (scripts/learn-rules writes one; wshard-families(7) lists the %zu built in%s%s)",
				architecture, nknown, *like ? ", among them " : "", like);
}

const char *const *wshard_rules_architectures(void)
{
	static const char *list[1024];
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
