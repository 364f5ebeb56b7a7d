/*
 * rules_test_util.h - what the rules suites share: the first rule whose
 * pattern matches a name (the order a plan tries them in), and rules text
 * that replicates the rest of gen-checkpoint's small Llama.  Header-only.
 */
#ifndef WSHARD_RULES_TEST_UTIL_H
#define WSHARD_RULES_TEST_UTIL_H

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
