/*
 * test_catalog_read.c - config.json as catalog_read.c reads it: its
 * fields, their defaults and odd values.
 *
 * Run from the repository root, or with WSHARD_TEST_ROOT naming it; the
 * generator runs under $PYTHON (default python3).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "wshard.h"
#include "source/catalog.h"
#include "catalog_test_util.h"

/* ------------------------------------------------------------------ */
/* config.json                                                         */
/* ------------------------------------------------------------------ */

/* Opens a generated one-layer checkpoint with extra generator args. */
static struct wshard_catalog *open_gen(char **out_dir, const char *args)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir);
	struct wshard_catalog *cat;

	gen(ck, args);
	cat = open_ok(ck);
	free(ck);
	*out_dir = dir;
	return cat;
}

/* Undoes open_gen: the catalog and the checkpoint's folder. */
static void close_gen(struct wshard_catalog *cat, char *dir)
{
	wshard_catalog_free(cat);
	rm_tree(dir);
}

Test(config, fields)
{
	char *dir;
	struct wshard_catalog *cat = open_gen(&dir,
		"--layers 1 --hidden 96 --heads 6 --kv-heads 3 --intermediate 200 --vocab 300");
	const struct wshard_config *c = &cat->config;

	cr_assert(cat->has_config);
	cr_assert_str_eq(c->architecture, "LlamaForCausalLM");
	cr_assert_eq(c->hidden_size, 96);
	cr_assert_eq(c->num_attention_heads, 6);
	cr_assert_eq(c->num_key_value_heads, 3);
	cr_assert_eq(c->head_dim, 16);
	cr_assert_eq(c->intermediate_size, 200);
	cr_assert_eq(c->vocab_size, 300);
	cr_assert_eq(c->num_experts, -1);
	cr_assert_eq(c->moe_intermediate_size, -1);
	cr_assert_eq(c->shared_expert_intermediate_size, -1);
	cr_assert_eq(c->tie_word_embeddings, 0);
	cr_assert_not_null(c->json);
	close_gen(cat, dir);
}

/* ColPali's vlm_config: its keys lifted to the top as vLLM reads them,
 * where the top has none (model_type and _name_or_path never). */
Test(config, vlm_config_lifted)
{
	char *dir;
	struct wshard_catalog *cat = open_gen(&dir,
		"--layers 1 --hidden 96 --set-config 'vlm_config={\"model_type\": \"paligemma\", "
		"\"hidden_size\": 999, \"projection_dim\": 7, \"vision_config\": "
		"{\"num_hidden_layers\": 3}}'");
	json_t *j = cat->config.json;

	cr_assert_eq(json_integer_value(json_object_get(j, "projection_dim")), 7);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "vision_config"),
							"num_hidden_layers")), 3);
	cr_assert_eq(json_integer_value(json_object_get(j, "hidden_size")), 96);
	cr_assert_str_eq(json_string_value(json_object_get(j, "model_type")), "llama");
	cr_assert_eq(cat->config.hidden_size, 96);
	close_gen(cat, dir);
}

Test(config, kv_heads_default_to_heads)
{
	char *dir;
	struct wshard_catalog *cat = open_gen(&dir,
		"--layers 1 --heads 8 --kv-heads 8 --omit-config num_key_value_heads");

	cr_assert_eq(cat->config.num_attention_heads, 8);
	cr_assert_eq(cat->config.num_key_value_heads, 8);
	close_gen(cat, dir);

	cat = open_gen(&dir, "--layers 1 --heads 4 --kv-heads 4 --set-config num_key_value_heads=null");
	cr_assert_eq(cat->config.num_key_value_heads, 4);
	close_gen(cat, dir);
}

Test(config, head_dim)
{
	char *dir;
	struct wshard_catalog *cat;

	/* Absent: hidden / heads. */
	cat = open_gen(&dir, "--layers 1 --hidden 64 --heads 8");
	cr_assert_eq(cat->config.head_dim, 8);
	close_gen(cat, dir);
	/* Given, and unlike hidden / heads (Gemma, Qwen3). */
	cat = open_gen(&dir, "--arch qwen3 --layers 1 --hidden 64 --heads 8 --head-dim 16");
	cr_assert_eq(cat->config.head_dim, 16);
	close_gen(cat, dir);
	/* null, as some configs write it: the default. */
	cat = open_gen(&dir, "--layers 1 --hidden 64 --heads 4 --set-config head_dim=null");
	cr_assert_eq(cat->config.head_dim, 16);
	close_gen(cat, dir);
	/* No way to tell: -1. */
	cat = open_gen(&dir, "--layers 1 --omit-config hidden_size");
	cr_assert_eq(cat->config.hidden_size, -1);
	cr_assert_eq(cat->config.head_dim, -1);
	close_gen(cat, dir);
}

Test(config, tie_word_embeddings)
{
	char *dir;
	struct wshard_catalog *cat;

	cat = open_gen(&dir, "--layers 1 --tie");
	cr_assert_eq(cat->config.tie_word_embeddings, 1);
	cr_assert_null(wshard_catalog_find(cat, "lm_head.weight"));
	close_gen(cat, dir);
	cat = open_gen(&dir, "--layers 1 --no-tie");
	cr_assert_eq(cat->config.tie_word_embeddings, 0);
	close_gen(cat, dir);
	cat = open_gen(&dir, "--layers 1 --omit-config tie_word_embeddings");
	cr_assert_eq(cat->config.tie_word_embeddings, -1);
	close_gen(cat, dir);
	/* Gemma: true in its config. */
	cat = open_gen(&dir, "--arch gemma --layers 1 --head-dim 16");
	cr_assert_str_eq(cat->config.architecture, "GemmaForCausalLM");
	cr_assert_eq(cat->config.tie_word_embeddings, 1);
	close_gen(cat, dir);
}

Test(config, experts)
{
	char *dir;
	struct wshard_catalog *cat;

	cat = open_gen(&dir, "--layers 1 --set-config num_local_experts=8");
	cr_assert_eq(cat->config.num_experts, 8);
	close_gen(cat, dir);
	cat = open_gen(&dir, "--layers 1 --set-config num_experts=60 "
		       "--set-config moe_intermediate_size=1408 "
		       "--set-config shared_expert_intermediate_size=5632");
	cr_assert_eq(cat->config.num_experts, 60);
	cr_assert_eq(cat->config.moe_intermediate_size, 1408);
	cr_assert_eq(cat->config.shared_expert_intermediate_size, 5632);
	close_gen(cat, dir);
	/* DeepSeek's count; num_experts wins when both are given */
	cat = open_gen(&dir, "--layers 1 --set-config n_routed_experts=384");
	cr_assert_eq(cat->config.num_experts, 384);
	close_gen(cat, dir);
	cat = open_gen(&dir, "--layers 1 --set-config n_routed_experts=384 "
		       "--set-config num_experts=60");
	cr_assert_eq(cat->config.num_experts, 60);
	close_gen(cat, dir);
}

/* A MiMo-V2 config.json with a vision_config is MiMoV2OmniForCausalLM,
 * whatever its architectures say, as vLLM 0.32 names it
 * (MimoV2ModelArchConfigConvertor); without one, or empty, or of another
 * model type, its architectures entry stands. */
Test(config, mimo_v2_omni_architecture)
{
	static const char *const cases[][2] = {
		{ "--set-config model_type='\"mimo_v2\"' --set-config vision_config='{\"depth\": 2}'",
		  "MiMoV2OmniForCausalLM" },
		{ "--set-config model_type='\"mimo_v2_flash\"' --set-config vision_config='{\"depth\": 2}'",
		  "MiMoV2OmniForCausalLM" },
		{ "--set-config model_type='\"mimo_v2\"' --set-config vision_config='{}'",
		  "MiMoV2ForCausalLM" },
		{ "--set-config model_type='\"mimo_v2\"'", "MiMoV2ForCausalLM" },
		{ "--set-config model_type='\"llama\"' --set-config vision_config='{\"depth\": 2}'",
		  "MiMoV2ForCausalLM" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *dir, *args = fmt("--layers 1 --set-config architectures='[\"MiMoV2ForCausalLM\"]' %s",
				       cases[i][0]);
		struct wshard_catalog *cat = open_gen(&dir, args);

		cr_assert_str_eq(cat->config.architecture, cases[i][1], "%s", args);
		close_gen(cat, dir);
		free(args);
	}
}

/* No architectures, or not strings: NULL; non-integers read as absent. */
Test(config, odd_values)
{
	char *dir;
	struct wshard_catalog *cat;

	cat = open_gen(&dir, "--layers 1 --omit-config architectures "
		       "--set-config vocab_size='\"250\"' --set-config intermediate_size=128.0");
	cr_assert_null(cat->config.architecture);
	cr_assert_eq(cat->config.vocab_size, -1);
	cr_assert_eq(cat->config.intermediate_size, -1);
	close_gen(cat, dir);
	cat = open_gen(&dir, "--layers 1 --set-config architectures='[3]'");
	cr_assert_null(cat->config.architecture);
	close_gen(cat, dir);
}

/* A directory without config.json opens; the plan complains later. */
Test(config, absent)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir), *cfg = fmt("%s/m/config.json", dir);
	struct wshard_catalog *cat;

	gen(ck, "--layers 1");
	cr_assert_eq(unlink(cfg), 0);
	cat = open_ok(ck);
	cr_assert_not(cat->has_config);
	cr_assert_null(cat->config.architecture);
	cr_assert_null(cat->config.json);
	wshard_catalog_free(cat);
	free(ck);
	free(cfg);
	rm_tree(dir);
}

