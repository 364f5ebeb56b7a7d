/*
 * fuzz_rules.c - libFuzzer harness for the rules reader:
 * wshard_rules_parse on the raw input.
 *
 * Rules that parse are then applied: the planner runs them against a
 * small Llama-shaped checkpoint (written once per process, headers only,
 * the data left as a hole) at tp 1, 2 and 8, and every plan it accepts
 * must keep the invariants of fuzz_plan.h.  Rules come from users
 * (--rules FILE), so neither reader nor planner may trust them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wshard.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "fuzz_util.h"
#include "fuzz_plan.h"

static const char config_json[] =
	"{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\",\n"
	" \"hidden_size\": 64, \"num_attention_heads\": 8, \"num_key_value_heads\": 2,\n"
	" \"intermediate_size\": 128, \"vocab_size\": 250, \"num_hidden_layers\": 2,\n"
	" \"tie_word_embeddings\": false,\n"
	" \"layer_types\": [\"full_attention\", \"sliding_attention\"], \"num_kv_shared_layers\": 1}\n";

static struct wshard_catalog *catalog;

static void add(struct wshard_st_tensor *t, size_t *n, const char *name,
		uint64_t d0, uint64_t d1)
{
	t[*n].name = strdup(name);
	t[*n].dtype = WSHARD_BF16;
	t[*n].ndim = d1 ? 2 : 1;
	t[*n].shape[0] = d0;
	t[*n].shape[1] = d1;
	if (!t[*n].name)
		fuzz_die("strdup");
	(*n)++;
}

/* A two-layer Llama checkpoint in the scratch directory, opened once. */
static void make_checkpoint(void)
{
	static const struct { const char *name; uint64_t d0, d1; } layer[] = {
		{ "input_layernorm.weight", 64, 0 },
		{ "post_attention_layernorm.weight", 64, 0 },
		{ "self_attn.q_proj.weight", 64, 64 },
		{ "self_attn.k_proj.weight", 16, 64 },
		{ "self_attn.v_proj.weight", 16, 64 },
		{ "self_attn.o_proj.weight", 64, 64 },
		{ "mlp.gate_proj.weight", 128, 64 },
		{ "mlp.up_proj.weight", 128, 64 },
		{ "mlp.down_proj.weight", 64, 128 },
	};
	struct wshard_st_tensor t[32];
	struct wshard_error err = { 0 };
	char dir[4200], path[4300], name[128], *header;
	size_t n = 0, header_len, i, l;
	uint64_t data_len;
	FILE *f;

	memset(t, 0, sizeof(t));
	add(t, &n, "model.embed_tokens.weight", 250, 64);
	add(t, &n, "lm_head.weight", 250, 64);
	add(t, &n, "model.norm.weight", 64, 0);
	for (l = 0; l < 2; l++)
		for (i = 0; i < sizeof(layer) / sizeof(layer[0]); i++) {
			snprintf(name, sizeof(name), "model.layers.%zu.%s", l, layer[i].name);
			add(t, &n, name, layer[i].d0, layer[i].d1);
		}
	if (wshard_st_layout(t, n, NULL, 0, &header, &header_len, &data_len, &err)) {
		fprintf(stderr, "fuzz_rules: layout: %s\n", err.msg);
		abort();
	}
	fuzz_path(dir, sizeof(dir), fuzz_scratch(), "ckpt");
	if (mkdir(dir, 0755) < 0)
		fuzz_die(dir);
	fuzz_write(fuzz_path(path, sizeof(path), dir, "config.json"), config_json,
		   strlen(config_json));
	fuzz_write(fuzz_path(path, sizeof(path), dir, "model.safetensors"), header,
		   header_len);
	f = fopen(path, "r+");
	if (!f || ftruncate(fileno(f), (off_t)(header_len + data_len)) < 0)
		fuzz_die(path);
	fclose(f);
	free(header);
	for (i = 0; i < n; i++)
		free(t[i].name);
	if (wshard_catalog_open(&catalog, dir, &err)) {
		fprintf(stderr, "fuzz_rules: catalog: %s\n", err.msg);
		abort();
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	make_checkpoint();
	return 0;
}

static void plan_with(const struct wshard_rules *rules, int tp)
{
	struct wshard_options opt;
	struct wshard_error err = { 0 };
	struct wshard_plan *plan = NULL;
	enum wshard_err rc;

	wshard_options_init(&opt);
	opt.tp = tp;
	opt.max_file_size = 20000;	/* several parts per rank */
	rc = wshard_plan_build(&plan, catalog, rules, &opt, &err);
	if (rc) {
		PCHECK(!plan);
		PCHECK(rc == WSHARD_EINVAL || rc == WSHARD_ENOMEM);
		PCHECK(err.msg[0]);
		return;
	}
	fuzz_check_plan(plan, catalog);
	wshard_plan_free(plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wshard_error err = { 0 };
	struct wshard_rules *rules = NULL;
	enum wshard_err rc;

	rc = wshard_rules_parse(&rules, (const char *)data, size, "fuzz.json", &err);
	if (rc) {
		PCHECK(!rules);
		PCHECK(rc == WSHARD_EINVAL || rc == WSHARD_ENOMEM);
		PCHECK(err.msg[0]);
		return 0;
	}
	PCHECK(rules && wshard_rules_name(rules));
	plan_with(rules, 1);
	plan_with(rules, 2);
	plan_with(rules, 8);
	wshard_rules_free(rules);
	return 0;
}
