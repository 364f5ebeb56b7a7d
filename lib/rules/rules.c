/*
 * rules.c - rules files: per-architecture tables that say how each
 * source tensor is split, replicated, skipped or fused.  This file holds
 * what every user of parsed rules needs: names matched against their
 * patterns and expanded, the captures a rule may use, and the rules
 * freed.  rules_load.c finds a rules
 * file and rules_parse.c parses one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "rules.h"

/* {n} (a layer), {e} (an expert) or {i} (an index in a module list) */
static bool is_placeholder(const char *p)
{
	return p[0] == '{' && (p[1] == 'n' || p[1] == 'e' || p[1] == 'i') && p[2] == '}';
}

bool rules_match(const char *pattern, const char *name, struct rules_capture *cap)
{
	const char *p = pattern, *s = name;

	cap->n = cap->e = cap->i = -1;
	while (*p) {
		if (p[0] == '*' && p[1] == '\0')
			return *s != '\0';	/* a trailing "*": any rest */
		if (is_placeholder(p)) {
			long v = 0;
			const char *start = s;

			while (*s >= '0' && *s <= '9' && v < 100000000)
				v = v * 10 + (*s++ - '0');
			if (s == start || (s - start > 1 && *start == '0'))
				return false;
			if (p[1] == 'n')
				cap->n = v;
			else if (p[1] == 'e')
				cap->e = v;
			else
				cap->i = v;
			p += 3;
			continue;
		}
		if (*p++ != *s++)
			return false;
	}
	return *s == '\0';
}

/* The output may use {e}, {n} and {i} only where the match captures them;
 * a rule with {i} is optional: how many entries a module list has, only
 * the checkpoint says. */
enum wshard_err rules_check_captures(const struct wshard_rules *r, const struct rules_rule *rule,
				     struct wshard_error *err)
{
	if (strstr(rule->output, "{i}") && !strstr(rule->match, "{i}"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': output uses {i} but match does not",
					r->name, rule->match);
	if (strstr(rule->match, "{i}") && !rule->optional && rule->kind != RULE_SKIP)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': a match with {i} must be \"optional\"",
					r->name, rule->match);
	if (strstr(rule->output, "{e}") && !strstr(rule->match, "{e}"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': output uses {e} but match does not",
					r->name, rule->match);
	if (strstr(rule->output, "{n}") && !strstr(rule->match, "{n}") && !rule->layer)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': output uses {n} but match does not (nor \"layer\" gives it)",
					r->name, rule->match);
	if (rule->layer && strstr(rule->match, "{n}"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"layer\" goes with a match without {n}",
					r->name, rule->match);
	if (rule->unless &&
	    ((strstr(rule->unless, "{n}") && !strstr(rule->match, "{n}") && !rule->layer) ||
	     (strstr(rule->unless, "{e}") && !strstr(rule->match, "{e}")) ||
	     strstr(rule->unless, "{i}") || strchr(rule->unless, '*')))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': rule '%s': \"unless\" is a tensor name, with {n} or {e} only where the rule captures them",
					r->name, rule->match);
	return WSHARD_OK;
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
		if (is_placeholder(p)) {
			long v = p[1] == 'n' ? cap->n : p[1] == 'e' ? cap->e : cap->i;

			o += sprintf(o, "%ld", v < 0 ? 0 : v);
			p += 3;
			continue;
		}
		*o++ = *p++;
	}
	*o = '\0';
	return out;
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
	free(r->no_pp);
	free(r->source_prefix);
	free(r->num_layers);
	for (i = 0; i < r->nsrc_renames; i++) {
		free(r->src_from[i]);
		free(r->src_to[i]);
	}
	free(r->src_from);
	free(r->src_to);
	free(r->rename_prefix);
	free(r->rename_to);
	free(r->rename_from);
	for (i = 0; i < r->nunstack; i++) {
		free(r->unstack[i].match);
		free(r->unstack[i].count);
		free(r->unstack[i].rows);
	}
	free(r->unstack);
	for (i = 0; i < r->nfolders; i++) {
		free(r->folder[i]);
		free(r->folder_config[i]);
	}
	free(r->folder);
	free(r->folder_config);
	for (i = 0; i < r->ncopy_folders; i++)
		free(r->copy_folder[i]);
	free(r->copy_folder);
	for (i = 0; i < r->nfiles; i++) {
		free(r->file[i]);
		free(r->file_prefix[i]);
	}
	free(r->file);
	free(r->file_prefix);
	for (i = 0; i < r->ntp_divides; i++)
		free(r->tp_divides[i]);
	free(r->tp_divides);
	for (i = 0; i < r->nrequires; i++)
		free(r->requires[i]);
	free(r->requires);
	for (i = 0; i < r->nrefuse_beside; i++)
		free(r->refuse_beside[i]);
	free(r->refuse_beside);
	free(r->refuse_beside_reason);
	for (i = 0; i < r->narchs; i++)
		free(r->archs[i]);
	free(r->archs);
	for (i = 0; i < r->nrules; i++) {
		free(r->rules[i].match);
		free(r->rules[i].output);
		free(r->rules[i].cond);
		free(r->rules[i].experts_from);
		free(r->rules[i].num_experts);
		free(r->rules[i].reason);
		free(r->rules[i].missing);
		free(r->rules[i].layer);
		free(r->rules[i].unless);
		free(r->rules[i].deinterleave);
		for (j = 0; j < r->rules[i].nreshape; j++)
			free(r->rules[i].reshape[j]);
		free(r->rules[i].pad_to);
		for (j = 0; j < 3; j++)
			free(r->rules[i].prime_heads[j]);
		free(r->rules[i].transpose_cols);
		free(r->rules[i].times_sqrt[0]);
		free(r->rules[i].times_sqrt[1]);
		free(r->rules[i].permute_block);
		for (j = 0; j < (int)r->rules[i].npermute; j++) {
			free(r->rules[i].permute_from[j]);
			free(r->rules[i].permute_to[j]);
		}
		for (j = 0; j < r->rules[i].nshape; j++)
			free(r->rules[i].shape[j]);
	}
	free(r->rules);
	for (i = 0; i < r->nops; i++) {
		free(r->ops[i].name);
		free(r->ops[i].kv_heads);
		for (j = 0; j < r->ops[i].nparts; j++) {
			free(r->ops[i].parts[j]);
			free(r->ops[i].sizes[j]);
			free(r->ops[i].groups[j]);
		}
	}
	free(r->ops);
	for (i = 0; i < r->nextras; i++) {
		free(r->extras[i].name);
		free(r->extras[i].option);
		free(r->extras[i].with);
		free(r->extras[i].cond);
		free(r->extras[i].each_count);
		free(r->extras[i].each_if);
		free(r->extras[i].arange);
		free(r->extras[i].sinusoid[0]);
		free(r->extras[i].sinusoid[1]);
		free(r->extras[i].len);
	}
	free(r->extras);
	for (i = 0; i < r->ntie_drop; i++)
		free(r->tie_drop[i]);
	free(r->tie_drop);
	free(r->tie_source);
	free(r->tie_output);
	free(r->tie_output_if);
	free(r->tie_if);
	free(r->tie_output_alt);
	json_decref(r->defaults);
	for (i = 0; i < r->npp_stages; i++)
		free(r->pp_stages[i].pattern);
	free(r->pp_stages);
	for (i = 0; r->pp_layers && r->pp_layers[i]; i++) {
		free(r->pp_layers[i]);
		free(r->pp_counts ? r->pp_counts[i] : NULL);
	}
	free(r->pp_layers);
	free(r->pp_counts);
	free(r->pp_first_min);
	free(r->pp_none_with);
	free(r->pp_none_if);
	free(r->pp_same_src);
	free(r->pp_same_if);
	free(r->pp_same_why);
	free(r->name);
	free(r);
}
