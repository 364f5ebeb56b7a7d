/*
 * rules_test_util.h - what the rules suites share: the first rule whose
 * pattern matches a name (the order a plan tries them in), and rules text
 * that replicates the rest of gen-checkpoint's small Llama.  Header-only.
 */
#ifndef WSHARD_RULES_TEST_UTIL_H
#define WSHARD_RULES_TEST_UTIL_H

#include <criterion/criterion.h>
#include <string.h>

#include "rules/rules.h"

static inline const struct rules_rule *find_rule(const struct wshard_rules *r,
						 const char *name,
						 struct rules_capture *cap)
{
	size_t i;

	for (i = 0; i < r->nrules; i++)
		if (rules_match(r->rules[i].match, name, cap))
			return &r->rules[i];
	return NULL;
}

/* text is rejected with EINVAL; the message starts with 't.json' and
 * holds want. */
static inline void parse_fails(const char *text, const char *want)
{
	struct wshard_rules *r = (void *)1;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, text, strlen(text), "t.json", &err),
		     WSHARD_EINVAL, "accepted: %s", text);
	cr_assert_null(r);
	cr_assert_eq(err.code, WSHARD_EINVAL);
	cr_assert_eq(strncmp(err.msg, "'t.json': ", 10), 0, "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, want), "message '%s' lacks '%s'",
			   err.msg, want);
	cr_assert_null(strchr(err.msg, '\n'));
	/* Without an error sink too. */
	cr_assert_eq(wshard_rules_parse(&r, text, strlen(text), "t.json", NULL),
		     WSHARD_EINVAL);
	cr_assert_null(r);
}

/* gen-checkpoint's small Llama, and rules replicating all its tensors */
#define BASE "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 256"
#define REP(m) "{\"match\": \"" m "\", \"split\": \"replicate\"},"
#define CATCH_ALL REP("model.embed_tokens.weight") REP("lm_head.weight") \
	REP("model.norm.weight") REP("model.layers.{n}.input_layernorm.weight") \
	REP("model.layers.{n}.post_attention_layernorm.weight") \
	REP("model.layers.{n}.self_attn.q_proj.weight") \
	REP("model.layers.{n}.self_attn.k_proj.weight") \
	REP("model.layers.{n}.self_attn.v_proj.weight") \
	REP("model.layers.{n}.self_attn.o_proj.weight") \
	REP("model.layers.{n}.mlp.gate_proj.weight") \
	REP("model.layers.{n}.mlp.up_proj.weight") \
	"{\"match\": \"model.layers.{n}.mlp.down_proj.weight\", \"split\": \"replicate\"}"

#endif
