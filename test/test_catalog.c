/*
 * test_catalog.c - opening checkpoints: every directory under
 * fixtures/bad-ckpt/ (written by fixtures/make-bad-ckpt.py) is rejected
 * with WSHARD_EINVAL and a one-line message naming the file or tensor at
 * fault; sharded, single-file and lone-file checkpoints generated at test
 * time by scripts/gen-checkpoint open with every tensor, file, ignored and
 * extra file where it should be.
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
/* Rejected directories                                                */
/* ------------------------------------------------------------------ */

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
#define INDEX "model.safetensors.index.json"

/*
 * BAD(test, dir, ...): fixtures/bad-ckpt/dir fails with WSHARD_EINVAL and
 * a message holding each string; "@INDEX", "@1" and "@2" stand for the
 * full path of the index and of shards 1 and 2.
 */
#define BAD(id, dir, ...)						\
	Test(bad_ckpt, id)						\
	{								\
		const char *w[] = { __VA_ARGS__, NULL };		\
		check_bad(dir, w);					\
	}

static void check_bad(const char *dir, const char *const *w)
{
	char *path = bad_ckpt(dir);
	const char *want[16];
	char *owned[16];
	size_t i, n = 0;

	for (i = 0; w[i]; i++) {
		owned[i] = NULL;
		if (!strcmp(w[i], "@INDEX"))
			owned[i] = fmt("'%s/" INDEX "'", path);
		else if (!strcmp(w[i], "@1"))
			owned[i] = fmt("'%s/" SHARD1 "'", path);
		else if (!strcmp(w[i], "@2"))
			owned[i] = fmt("'%s/" SHARD2 "'", path);
		want[n++] = owned[i] ? owned[i] : w[i];
	}
	want[n] = NULL;
	open_fails(path, WSHARD_EINVAL, want);
	for (i = 0; i < n; i++)
		free(owned[i]);
	free(path);
}

BAD(absolute_path, "absolute-path", "@INDEX",
    "weight_map entry for 'model.norm.weight'",
    "'/tmp/" SHARD2 "'", "not a relative path")
BAD(dotdot_path, "dotdot-path", "@INDEX",
    "weight_map entry for 'model.norm.weight'",
    "'../outside.safetensors'", "leaves the directory")
BAD(symlink_outside, "symlink-outside", "@INDEX",
    "weight_map entry for 'model.norm.weight'", "'" SHARD2 "'",
    "a link that leaves the directory")
BAD(missing_file, "missing-file", "@INDEX",
    "weight_map entry for 'model.norm.weight'", "'" SHARD2 "'",
    "No such file or directory")
BAD(missing_tensor, "missing-tensor", "tensor 'lm_head.weight'", "@1",
    "is missing from")
BAD(wrong_file, "wrong-file", "tensor 'lm_head.weight'", "@1",
    "assigns it to '" SHARD2 "'")
BAD(tensor_in_two_files, "tensor-in-two-files", "tensor 'model.norm.weight'",
    "@1", "@2")
BAD(unmapped_tensor, "unmapped-tensor", "tensor 'model.stray.weight'", "@1",
    "not in the weight_map", "@INDEX")
BAD(invalid_index_json, "invalid-index-json", "@INDEX", "invalid JSON")
BAD(duplicate_index_key, "duplicate-index-key", "@INDEX", "duplicate")
BAD(weight_map_not_object, "weight-map-not-object", "@INDEX",
    "no \"weight_map\" object")
BAD(weight_map_value_not_string, "weight-map-value-not-string", "@INDEX",
    "'model.norm.weight' is not a string")
BAD(weight_map_empty, "weight-map-empty", "@INDEX", "weight_map is empty")
BAD(corrupt_shard, "corrupt-shard", "@2", "run past the end of the file")
BAD(no_weights, "no-weights", "holds neither", INDEX, "model.safetensors")

/* Every directory in fixtures/bad-ckpt/ has a test above, and back. */
Test(bad_ckpt, every_fixture_has_a_case)
{
	static const char *const cases[] = {
		"absolute-path", "corrupt-shard", "dotdot-path",
		"duplicate-index-key", "invalid-index-json", "missing-file",
		"missing-tensor", "no-weights", "symlink-outside",
		"tensor-in-two-files", "unmapped-tensor", "weight-map-empty",
		"weight-map-not-object", "weight-map-value-not-string",
		"wrong-file",
	};
	const size_t ncases = sizeof(cases) / sizeof(cases[0]);
	char *dir = bad_ckpt("");
	struct dirent *de;
	size_t n = 0, i;
	DIR *d = opendir(dir);

	cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		char *p;
		struct stat sb;

		if (de->d_name[0] == '.')
			continue;
		p = bad_ckpt(de->d_name);
		cr_assert_eq(stat(p, &sb), 0);
		free(p);
		if (!S_ISDIR(sb.st_mode))
			continue;
		for (i = 0; i < ncases; i++)
			if (!strcmp(cases[i], de->d_name))
				break;
		cr_assert_lt(i, ncases, "fixture %s has no test", de->d_name);
		n++;
	}
	closedir(d);
	free(dir);
	cr_assert_eq(n, ncases);
}

/* The link target itself is a valid checkpoint file. */
Test(bad_ckpt, outside_target_is_valid)
{
	char *p = bad_ckpt("outside.safetensors");
	struct wshard_catalog *cat = open_ok(p);

	cr_assert_eq(cat->ntensors, 1);
	cr_assert_not_null(wshard_catalog_find(cat, "model.norm.weight"));
	wshard_catalog_free(cat);
	free(p);
}

Test(bad_ckpt, missing_path)
{
	char *dir = tmp_dir();
	char *p = fmt("%s/nothing-here", dir);
	const char *want[] = { "cannot open", "nothing-here", NULL };

	open_fails(p, WSHARD_EINVAL, want);
	free(p);
	rm_tree(dir);
}

Test(bad_ckpt, corrupt_lone_file)
{
	char *p = fmt("%s/fixtures/corrupt/truncated.safetensors", root());
	const char *want[] = { "truncated.safetensors", NULL };

	open_fails(p, WSHARD_EINVAL, want);
	free(p);
}

Test(bad_ckpt, config_not_an_object)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir);
	const char *want[] = { "config.json", "not a JSON object", NULL };

	gen(ck, "--layers 1");
	write_text(ck, "config.json", "[1, 2]\n");
	open_fails(ck, WSHARD_EINVAL, want);
	free(ck);
	rm_tree(dir);
}

Test(bad_ckpt, config_invalid_json)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir);
	const char *want[] = { "config.json", NULL };

	gen(ck, "--layers 1");
	write_text(ck, "config.json", "{\"hidden_size\": \n");
	open_fails(ck, WSHARD_EINVAL, want);
	free(ck);
	rm_tree(dir);
}

/* ------------------------------------------------------------------ */
/* Accepted checkpoints                                                */
/* ------------------------------------------------------------------ */

static const char *const generated_extra[] = {
	"config.json", "generation_config.json", "special_tokens_map.json",
	"tokenizer.json", "tokenizer_config.json", NULL,
};

static void assert_list(char *const *got, size_t n, const char *const *want)
{
	size_t i;

	for (i = 0; want[i]; i++) {
		cr_assert_lt(i, n, "list ends before '%s'", want[i]);
		cr_assert_str_eq(got[i], want[i]);
	}
	cr_assert_eq(n, i, "%zu entries, expected %zu (first extra: %s)", n, i,
		     n > i ? got[i] : "");
}

/* Checks every tensor against its own file: sorted, found, in the file
 * it says, offsets from the file's own header length. */
/* The integer at key (dotted) of cat's config; 0 where there is none. */
static json_int_t config_int(const struct wshard_catalog *cat, const char *key)
{
	return json_integer_value(catalog_config_key(&cat->config, key));
}

static void check_tensors(const struct wshard_catalog *cat)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < cat->ntensors; i++) {
		const struct wshard_src_tensor *t = &cat->tensors[i];
		const struct wshard_src_file *f;
		const struct wshard_st_tensor *info;

		if (i)
			cr_assert_lt(strcmp(cat->tensors[i - 1].name, t->name), 0);
		cr_assert_lt(t->file, cat->nfiles);
		f = &cat->files[t->file];
		info = wshard_st_find(f->st, t->name);
		cr_assert_eq(info, t->info, "%s", t->name);
		cr_assert_eq(t->offset, 8 + header_len(f->path) + info->begin);
		cr_assert_eq(t->nbytes, info->end - info->begin);
		cr_assert_eq(wshard_catalog_find(cat, t->name), t);
		cr_assert_eq(wshard_catalog_index(cat, t->name), (long)i);
		sum += t->nbytes;
	}
	cr_assert_eq(cat->tensor_bytes, sum);
	for (i = 1; i < cat->nfiles; i++)
		cr_assert_lt(strcmp(cat->files[i - 1].name, cat->files[i].name), 0);
	for (i = 0; i < cat->nfiles; i++) {
		struct stat sb;

		cr_assert_eq(stat(cat->files[i].path, &sb), 0);
		cr_assert_eq(cat->files[i].size, (uint64_t)sb.st_size);
	}
	cr_assert_null(wshard_catalog_find(cat, "no.such.tensor"));
	cr_assert_eq(wshard_catalog_index(cat, "no.such.tensor"), -1);
	cr_assert_null(wshard_catalog_find(cat, ""));
}

Test(catalog, sharded_directory)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir);
	struct wshard_catalog *cat;
	const struct wshard_src_tensor *t;
	size_t i;

	gen(ck, "--layers 2 --hidden 64 --heads 4 --shards 3");
	cat = open_ok(ck);
	cr_assert_str_eq(cat->path, ck);
	cr_assert_str_eq(cat->dir, ck);
	cr_assert_eq(cat->nfiles, 3);
	for (i = 0; i < 3; i++) {
		char *name = fmt("model-%05zu-of-00003.safetensors", i + 1);
		char *path = fmt("%s/%s", ck, name);

		cr_assert_str_eq(cat->files[i].name, name);
		cr_assert_str_eq(cat->files[i].path, path);
		cr_assert_not_null(cat->files[i].st);
		free(name);
		free(path);
	}
	cr_assert_eq(cat->ntensors, llama_tensor_count(2));
	check_tensors(cat);
	/* The generator puts the first tensors in shard 1, the last in 3. */
	t = wshard_catalog_find(cat, "model.embed_tokens.weight");
	cr_assert_not_null(t);
	cr_assert_eq(t->file, 0);
	cr_assert_eq(t->info->dtype, WSHARD_BF16);
	cr_assert_eq(t->info->ndim, 2);
	cr_assert_eq(t->info->shape[0], 250);
	cr_assert_eq(t->info->shape[1], 64);
	cr_assert_eq(t->nbytes, 250 * 64 * 2);
	t = wshard_catalog_find(cat, "lm_head.weight");
	cr_assert_not_null(t);
	cr_assert_eq(t->file, 2);
	cr_assert(cat->has_config);
	cr_assert_str_eq(cat->config.architecture, "LlamaForCausalLM");
	assert_list(cat->extra, cat->nextra, generated_extra);
	cr_assert_eq(cat->nignored, 0);
	wshard_catalog_free(cat);
	free(ck);
	rm_tree(dir);
}

Test(catalog, trailing_slash)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir), *slash = fmt("%s/m/", dir);
	struct wshard_catalog *cat;

	gen(ck, "--layers 1 --shards 2");
	cat = open_ok(slash);
	cr_assert_eq(cat->nfiles, 2);
	cr_assert_eq(cat->ntensors, llama_tensor_count(1));
	check_tensors(cat);
	wshard_catalog_free(cat);
	free(ck);
	free(slash);
	rm_tree(dir);
}

Test(catalog, single_file_directory)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir);
	struct wshard_catalog *cat;

	gen(ck, "--layers 3");
	cat = open_ok(ck);
	cr_assert_eq(cat->nfiles, 1);
	cr_assert_str_eq(cat->files[0].name, "model.safetensors");
	cr_assert_eq(cat->ntensors, llama_tensor_count(3));
	check_tensors(cat);
	cr_assert(cat->has_config);
	assert_list(cat->extra, cat->nextra, generated_extra);
	cr_assert_eq(cat->nignored, 0);
	wshard_catalog_free(cat);
	free(ck);
	rm_tree(dir);
}

/* Clef-Omni: config.json's Qwen3OmniMoeForConditionalGeneration alone with
 * joint_head_config.json beside is ClefOmniForJointSchema, the file read
 * under joint_head_config; without the file, or beside another
 * architecture, the name stays. */
Test(catalog, clef_omni)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir);
	struct wshard_catalog *cat;

	gen(ck, "--layers 1");
	write_text(ck, "config.json", "{\"architectures\": [\"Qwen3OmniMoeForConditionalGeneration\"]}\n");
	cat = open_ok(ck);
	cr_assert_str_eq(cat->config.architecture, "Qwen3OmniMoeForConditionalGeneration");
	wshard_catalog_free(cat);
	write_text(ck, "joint_head_config.json", "{\"width\": 32, \"layers\": 1}\n");
	cat = open_ok(ck);
	cr_assert_str_eq(cat->config.architecture, "ClefOmniForJointSchema");
	cr_assert_eq(config_int(cat, "joint_head_config.width"), 32);
	wshard_catalog_free(cat);
	write_text(ck, "config.json", "{\"architectures\": [\"LlamaForCausalLM\"]}\n");
	cat = open_ok(ck);
	cr_assert_str_eq(cat->config.architecture, "LlamaForCausalLM");
	wshard_catalog_free(cat);
	free(ck);
	rm_tree(dir);
}

/* Mistral Large 3's params.json (the keys adapt_config_dict reads), tiny. */
#define LARGE3_PARAMS "{\"dim\": 64, \"n_layers\": 3, \"n_heads\": 4, \"n_kv_heads\": 4," \
	" \"hidden_dim\": 128, \"vocab_size\": 250, \"norm_eps\": 1e-6, \"q_lora_rank\": 32," \
	" \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 16," \
	" \"v_head_dim\": 16, \"llama_4_scaling\": {\"original_max_position_embeddings\": 64," \
	" \"beta\": 0.1}, \"moe\": {\"num_experts\": 8, \"num_shared_experts\": 1," \
	" \"expert_hidden_dim\": 32, \"first_k_dense_replace\": 1}}\n"

/*
 * A generated checkpoint in dir/m (gen's args) turned into Mistral's own
 * format: its model.safetensors as consolidated.safetensors, no
 * config.json, params as its params.json.  Returns dir/m (malloc'd).
 */
static char *mistral_ckpt(const char *dir, const char *args, const char *params)
{
	char *ck = fmt("%s/m", dir), *to = fmt("%s/consolidated.safetensors", ck);
	char *from = fmt("%s/model.safetensors", ck), *cfg = fmt("%s/config.json", ck);

	gen(ck, args);
	cr_assert_eq(rename(from, to), 0);
	cr_assert_eq(unlink(cfg), 0);
	write_text(ck, "params.json", params);
	free(from);
	free(to);
	free(cfg);
	return ck;
}

/*
 * Mistral's own format: params.json beside consolidated*.safetensors (no
 * model.safetensors, no config.json) is read as vLLM reads it: every
 * consolidated file, params.json as the HF config vLLM makes of it, and
 * params.json among the files to copy.
 */
Test(catalog, mistral_format)
{
	char *dir = tmp_dir();
	char *ck = mistral_ckpt(dir, "--layers 3", LARGE3_PARAMS);
	static const char *const extra[] = { "generation_config.json", "params.json",
		"special_tokens_map.json", "tekken.json", "tokenizer.json", "tokenizer_config.json", NULL };
	struct wshard_catalog *cat;

	write_text(ck, "tekken.json", "{}\n");
	cat = open_ok(ck);
	cr_assert_eq(cat->nfiles, 1);
	cr_assert_str_eq(cat->files[0].name, "consolidated.safetensors");
	cr_assert_eq(cat->ntensors, llama_tensor_count(3));
	cr_assert(cat->has_config);
	cr_assert_str_eq(cat->config.architecture, "MistralLarge3ForCausalLM");
	cr_assert_eq(cat->config.hidden_size, 64);
	cr_assert_eq(cat->config.intermediate_size, 128);
	cr_assert_eq(cat->config.num_experts, 8);
	cr_assert_eq(cat->config.moe_intermediate_size, 32);
	cr_assert_eq(cat->config.tie_word_embeddings, 0);
	assert_list(cat->extra, cat->nextra, extra);
	wshard_catalog_free(cat);
	free(ck);
	rm_tree(dir);
}

/* A dense params.json (no moe, no MLA) is vLLM's MistralForCausalLM, which
 * the rules know as mistral:MistralForCausalLM in this format. */
Test(catalog, mistral_format_dense)
{
	char *dir = tmp_dir();
	char *ck = mistral_ckpt(dir, "--layers 1", "{\"dim\": 64, \"n_layers\": 1, \"n_heads\": 4,"
				" \"n_kv_heads\": 2, \"head_dim\": 16, \"hidden_dim\": 128,"
				" \"vocab_size\": 250, \"tied_embeddings\": true}\n");
	struct wshard_catalog *cat;

	cat = open_ok(ck);
	cr_assert_str_eq(cat->config.architecture, "mistral:MistralForCausalLM");
	cr_assert_eq(cat->config.num_key_value_heads, 2);
	cr_assert_eq(cat->config.head_dim, 16);
	cr_assert_eq(cat->config.tie_word_embeddings, 1);
	wshard_catalog_free(cat);
	free(ck);
	rm_tree(dir);
}

/* A params.json with a vision_encoder object is vLLM's
 * PixtralForConditionalGeneration, the object read as vision_config beside
 * the text model's keys; one whose text model has a moe object is refused
 * by name. */
Test(catalog, mistral_format_pixtral)
{
	char *dir = tmp_dir(), *dir2 = tmp_dir();
	char *ck = mistral_ckpt(dir, "--layers 1",
				"{\"dim\": 64, \"n_layers\": 1, \"n_heads\": 4, \"n_kv_heads\": 2,"
				" \"head_dim\": 16, \"hidden_dim\": 128, \"vocab_size\": 250,"
				" \"vision_encoder\": {\"hidden_size\": 32, \"num_hidden_layers\": 2}}\n");
	struct wshard_catalog *cat = open_ok(ck);
	char *moe = mistral_ckpt(dir2, "--layers 1",
				 "{\"dim\": 64, \"n_layers\": 1, \"moe\": {\"num_experts\": 8},"
				 " \"vision_encoder\": {\"hidden_size\": 32}}\n");
	const char *want[] = { "params.json", "PixtralForConditionalGeneration",
			       "MixtralForCausalLM", NULL };

	cr_assert_str_eq(cat->config.architecture, "PixtralForConditionalGeneration");
	cr_assert_eq(cat->config.hidden_size, 64);
	cr_assert_eq(cat->config.num_key_value_heads, 2);
	cr_assert_eq(config_int(cat, "vision_config.hidden_size"), 32);
	wshard_catalog_free(cat);
	open_fails(moe, WSHARD_EINVAL, want);
	free(moe);
	free(ck);
	rm_tree(dir);
	rm_tree(dir2);
}

/* Voxtral: multimodal.whisper_model_args's encoder_args read as
 * audio_config under WhisperConfig's names (max_source_positions 1500
 * when none is given), also where transformers' format is beside it (a
 * release's config.json naming Voxtral: vLLM loads only Mistral's); a
 * causal encoder (Voxtral Realtime) is VoxtralRealtimeGeneration, its
 * head_dim encoder_head_dim (dim / n_heads where none is given), and
 * refused without pos_embed "rope", which vLLM's causal encoder asserts. */
Test(catalog, mistral_format_voxtral)
{
	char *dir = tmp_dir(), *dir2 = tmp_dir(), *dir3 = tmp_dir();
	char *ck = mistral_ckpt(dir, "--layers 1",
				"{\"dim\": 64, \"n_layers\": 1, \"n_heads\": 4, \"n_kv_heads\": 2,"
				" \"head_dim\": 16, \"hidden_dim\": 128, \"vocab_size\": 250,"
				" \"multimodal\": {\"whisper_model_args\": {\"encoder_args\":"
				" {\"dim\": 32, \"n_layers\": 2, \"hidden_dim\": 128, \"n_heads\": 4,"
				" \"audio_encoding_args\": {\"num_mel_bins\": 16}},"
				" \"downsample_args\": {\"downsample_factor\": 4}}}}\n");
	struct wshard_catalog *cat = open_ok(ck);
	char *rt = mistral_ckpt(dir2, "--layers 1",
				"{\"dim\": 64, \"n_layers\": 1,"
				" \"multimodal\": {\"whisper_model_args\": {\"encoder_args\":"
				" {\"dim\": 32, \"causal\": true}}}}\n");
	char *ok = mistral_ckpt(dir3, "--layers 1",
				"{\"dim\": 64, \"n_layers\": 1, \"n_heads\": 4, \"n_kv_heads\": 2,"
				" \"head_dim\": 16, \"hidden_dim\": 128, \"vocab_size\": 250,"
				" \"multimodal\": {\"whisper_model_args\": {\"encoder_args\":"
				" {\"dim\": 32, \"n_layers\": 2, \"hidden_dim\": 128, \"n_heads\": 4,"
				" \"head_dim\": 16, \"causal\": true, \"pos_embed\": \"rope\","
				" \"audio_encoding_args\": {\"num_mel_bins\": 16}},"
				" \"downsample_args\": {\"downsample_factor\": 4}}}}\n");
	const char *want[] = { "params.json", "causal", "\"rope\"", NULL };

	cr_assert_str_eq(cat->config.architecture, "VoxtralForConditionalGeneration");
	cr_assert_eq(cat->config.hidden_size, 64);
	cr_assert_eq(config_int(cat, "audio_config.d_model"), 32);
	cr_assert_eq(config_int(cat, "audio_config.encoder_ffn_dim"), 128);
	cr_assert_eq(config_int(cat, "audio_config.max_source_positions"), 1500);
	cr_assert_eq(config_int(cat, "audio_config.downsample_factor"), 4);
	cr_assert_eq(config_int(cat, "audio_config.encoder_head_dim"), 8);
	wshard_catalog_free(cat);
	write_text(ck, "config.json", "{\"architectures\": [\"VoxtralForConditionalGeneration\"],"
		   " \"hidden_size\": 999}\n");
	write_text(ck, "model.safetensors.index.json",
		   "{\"weight_map\": {\"x\": \"model-00001-of-00001.safetensors\"}}\n");
	cat = open_ok(ck);
	cr_assert_str_eq(cat->config.architecture, "VoxtralForConditionalGeneration");
	cr_assert_eq(cat->config.hidden_size, 64);
	wshard_catalog_free(cat);
	cat = open_ok(ok);
	cr_assert_str_eq(cat->config.architecture, "VoxtralRealtimeGeneration");
	cr_assert_eq(config_int(cat, "audio_config.encoder_head_dim"), 16);
	wshard_catalog_free(cat);
	open_fails(rt, WSHARD_EINVAL, want);
	free(rt);
	free(ok);
	free(ck);
	rm_tree(dir);
	rm_tree(dir2);
	rm_tree(dir3);
}

/* params.json of an architecture without rules in Mistral's format
 * (Mixtral: a moe object without shared experts) is refused by name. */
/* A bad entry of consolidated.safetensors.index.json is reported under
 * that file's name, not the HF index's. */
Test(catalog, mistral_format_bad_index)
{
	char *dir = tmp_dir();
	char *ck = mistral_ckpt(dir, "--layers 1", LARGE3_PARAMS);
	const char *want[] = { "consolidated.safetensors.index.json'",
		"weight_map entry for 'model.norm.weight'", "leaves the directory", NULL };

	write_text(ck, "consolidated.safetensors.index.json",
		   "{\"weight_map\": {\"model.norm.weight\": \"../consolidated.safetensors\"}}\n");
	open_fails(ck, WSHARD_EINVAL, want);
	free(ck);
	rm_tree(dir);
}

Test(catalog, mistral_format_unsupported)
{
	char *dir = tmp_dir();
	char *ck = mistral_ckpt(dir, "--layers 1",
				"{\"dim\": 64, \"n_layers\": 1, \"moe\": {\"num_experts\": 8}}\n");
	const char *want[] = { "params.json", "MixtralForCausalLM", "no rules", NULL };

	open_fails(ck, WSHARD_EINVAL, want);
	free(ck);
	rm_tree(dir);
}

/*
 * Mistral's FP8 releases: params.json's "quantization" becomes the
 * quantization_config vLLM makes of it (quant_method fp8, static
 * activations for "TENSOR", dynamic for "NO_SCALES"); any other format
 * is refused naming params.json.
 */
#define DENSE_PARAMS(q) "{\"dim\": 64, \"n_layers\": 1, \"n_heads\": 4, \"n_kv_heads\": 2," \
	" \"head_dim\": 16, \"hidden_dim\": 128, \"vocab_size\": 250, \"quantization\": " q "}\n"

Test(catalog, mistral_format_fp8)
{
	static const char *const q[][2] = {
		{ DENSE_PARAMS("{\"qformat_weight\": \"fp8_e4m3\", \"qscheme_act\": \"TENSOR\"}"), "static" },
		{ DENSE_PARAMS("{\"qformat_weight\": \"fp8_e4m3\", \"qscheme_act\": \"NO_SCALES\"}"), "dynamic" },
		{ DENSE_PARAMS("{\"qformat_weight\": \"fp8_e4m3\"}"), "static" },
	};
	size_t i;

	for (i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		char *dir = tmp_dir();
		char *ck = mistral_ckpt(dir, "--layers 1", q[i][0]);
		struct wshard_catalog *cat = open_ok(ck);
		json_t *qc = json_object_get(cat->config.json, "quantization_config");

		cr_assert_str_eq(json_string_value(json_object_get(qc, "quant_method")), "fp8");
		cr_assert_str_eq(json_string_value(json_object_get(qc, "activation_scheme")), q[i][1]);
		cr_assert_null(json_object_get(cat->config.json, "quantization"));
		wshard_catalog_free(cat);
		free(ck);
		rm_tree(dir);
	}
}

Test(catalog, mistral_format_quant_unsupported)
{
	static const char *const q[] = {
		DENSE_PARAMS("{\"quant_method\": \"compressed-tensors\"}"),
		DENSE_PARAMS("{\"qformat_weight\": \"fp8_e4m3\", \"qscheme_act\": \"CHANNEL\"}"),
	};
	const char *want[] = { "params.json", "\"quantization\"", NULL };
	size_t i;

	for (i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		char *dir = tmp_dir();
		char *ck = mistral_ckpt(dir, "--layers 1", q[i]);

		open_fails(ck, WSHARD_EINVAL, want);
		free(ck);
		rm_tree(dir);
	}
}

/*
 * A generated two-shard checkpoint in dir/m (gen's args) laid out as
 * Cosmos 3's unified checkpoints are: shard 1 as
 * transformer/diffusion_pytorch_model.safetensors, shard 2 as
 * vision_encoder/model.safetensors, a copy of shard 1 in vae/ (which
 * vLLM's glob "[tv]*er" does not match), no index.  Returns dir/m.
 */
static char *subdir_ckpt(const char *dir, const char *args)
{
	char *ck = fmt("%s/m", dir), *cmd;
	int rc;

	gen(ck, args);
	cmd = fmt("cd '%s' && mkdir transformer vision_encoder vae && rm " INDEX " &&"
		  " mv " SHARD1 " transformer/diffusion_pytorch_model.safetensors &&"
		  " mv " SHARD2 " vision_encoder/model.safetensors &&"
		  " cp transformer/diffusion_pytorch_model.safetensors vae/ &&"
		  " cp vae/diffusion_pytorch_model.safetensors vision_encoder/.hidden.safetensors", ck);
	rc = system(cmd);
	cr_assert_eq(rc, 0, "%s: exit status %d", cmd, rc);
	free(cmd);
	return ck;
}

#define COSMOS3 "--layers 2 --shards 2 --set-config" \
	" 'architectures=[\"Cosmos3ForConditionalGeneration\"]'"

/*
 * Cosmos 3's unified checkpoints: with no weights at the top and an
 * architecture whose vLLM class reads "[tv]*er" folders' *.safetensors,
 * those files are the weights (by their relative names), vae/'s and a
 * hidden file's not, even beside a model.safetensors.
 */
Test(catalog, subdir_format)
{
	char *dir = tmp_dir();
	char *ck = subdir_ckpt(dir, COSMOS3), *top, *from;
	struct wshard_catalog *cat = open_ok(ck);

	cr_assert_eq(cat->nfiles, 2);
	cr_assert_str_eq(cat->files[0].name, "transformer/diffusion_pytorch_model.safetensors");
	cr_assert_str_eq(cat->files[1].name, "vision_encoder/model.safetensors");
	cr_assert_eq(cat->ntensors, llama_tensor_count(2));
	cr_assert_str_eq(cat->config.architecture, "Cosmos3ForConditionalGeneration");
	cr_assert_eq(cat->nignored, 0);
	wshard_catalog_free(cat);
	/* a model.safetensors at the top as well: vLLM's class still globs the
	 * folders, and so does wshard; the top file is ignored */
	top = fmt("%s/model.safetensors", ck);
	from = fmt("%s/transformer/diffusion_pytorch_model.safetensors", ck);
	copy_file(from, top);
	cat = open_ok(ck);
	cr_assert_eq(cat->nfiles, 2);
	cr_assert_str_eq(cat->files[0].name, "transformer/diffusion_pytorch_model.safetensors");
	cr_assert_eq(cat->nignored, 1);
	cr_assert_str_eq(cat->ignored[0], "model.safetensors");
	wshard_catalog_free(cat);
	free(from);
	free(top);
	free(ck);
	rm_tree(dir);
}

/* The same layout under another architecture has no weights; Cosmos 3's
 * with no "[tv]*er" folder is refused naming the glob. */
Test(catalog, subdir_format_refused)
{
	char *dir = tmp_dir();
	char *ck = subdir_ckpt(dir, "--layers 1 --shards 2");
	char *other = fmt("%s/o", dir), *cmd;
	const char *want[] = { "holds neither", NULL };
	const char *want2[] = { "[tv]*er/*.safetensors", "Cosmos3ForConditionalGeneration", NULL };

	open_fails(ck, WSHARD_EINVAL, want);
	gen(other, "--layers 1 --set-config 'architectures=[\"Cosmos3ForConditionalGeneration\"]'");
	cmd = fmt("mkdir '%s/vae' && mv '%s/model.safetensors' '%s/vae/'", other, other, other);
	cr_assert_eq(system(cmd), 0);
	open_fails(other, WSHARD_EINVAL, want2);
	free(cmd);
	free(other);
	free(ck);
	rm_tree(dir);
}

/*
 * Neither an index nor model.safetensors nor params.json: every top-level
 * *.safetensors, sorted, as vLLM's default loader globs them (BAGEL's
 * ema.safetensors and ae.safetensors); a hidden one is not.
 */
Test(catalog, glob_top_level)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir), *cmd;
	struct wshard_catalog *cat;

	gen(ck, "--layers 2 --shards 2");
	cmd = fmt("cd '%s' && rm " INDEX " && mv " SHARD1 " ema.safetensors &&"
		  " mv " SHARD2 " ae.safetensors && cp ae.safetensors .hidden.safetensors", ck);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	cat = open_ok(ck);
	cr_assert_eq(cat->nfiles, 2);
	cr_assert_str_eq(cat->files[0].name, "ae.safetensors");
	cr_assert_str_eq(cat->files[1].name, "ema.safetensors");
	cr_assert_eq(cat->ntensors, llama_tensor_count(2));
	wshard_catalog_free(cat);
	free(cmd);
	free(ck);
	rm_tree(dir);
}

/* An index wins over a model.safetensors beside it, which is then ignored. */
Test(catalog, index_wins_over_single_file)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir), *single = fmt("%s/one", dir);
	char *from = fmt("%s/model.safetensors", single);
	char *to = fmt("%s/model.safetensors", ck);
	const char *ignored[] = { "model.safetensors", NULL };
	struct wshard_catalog *cat;

	gen(ck, "--layers 1 --shards 2");
	gen(single, "--layers 1 --seed 3");
	copy_file(from, to);
	cat = open_ok(ck);
	cr_assert_eq(cat->nfiles, 2);
	assert_list(cat->ignored, cat->nignored, ignored);
	wshard_catalog_free(cat);
	free(ck);
	free(single);
	free(from);
	free(to);
	rm_tree(dir);
}

Test(catalog, lone_file)
{
	char *p = fmt("%s/fixtures/good/all-dtypes.safetensors", root());
	char *d = fmt("%s/fixtures/good", root());
	struct wshard_catalog *cat = open_ok(p);

	cr_assert_str_eq(cat->path, p);
	cr_assert_str_eq(cat->dir, d);
	cr_assert_eq(cat->nfiles, 1);
	cr_assert_str_eq(cat->files[0].name, "all-dtypes.safetensors");
	cr_assert_str_eq(cat->files[0].path, p);
	cr_assert_eq(cat->ntensors, 22);
	check_tensors(cat);
	/* Nothing else of the directory is taken: no config, no copies. */
	cr_assert_not(cat->has_config);
	cr_assert_null(cat->config.architecture);
	cr_assert_eq(cat->nextra, 0);
	cr_assert_eq(cat->nignored, 0);
	wshard_catalog_free(cat);
	free(p);
	free(d);
}

/* A lone file named without a directory part is opened in ".". */
Test(catalog, lone_file_in_cwd)
{
	char *d = fmt("%s/fixtures/good", root());
	struct wshard_catalog *cat;

	cr_assert_eq(chdir(d), 0, "%s: %s", d, strerror(errno));
	cat = open_ok("scalar.safetensors");
	cr_assert_str_eq(cat->dir, ".");
	cr_assert_eq(cat->nfiles, 1);
	cr_assert_str_eq(cat->files[0].name, "scalar.safetensors");
	cr_assert_eq(cat->ntensors, 1);
	check_tensors(cat);
	wshard_catalog_free(cat);
	free(d);
}

Test(catalog, zero_tensor_file)
{
	char *p = fmt("%s/fixtures/good/empty.safetensors", root());
	struct wshard_catalog *cat = open_ok(p);

	cr_assert_eq(cat->ntensors, 0);
	cr_assert_eq(cat->tensor_bytes, 0);
	cr_assert_null(wshard_catalog_find(cat, "a"));
	wshard_catalog_free(cat);
	free(p);
}

/* consolidated.safetensors (Mistral's second copy) is not in the map:
 * listed as ignored, its tensors not taken. */
Test(catalog, consolidated_is_ignored)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir), *other = fmt("%s/o", dir);
	char *from = fmt("%s/model.safetensors", other);
	char *to = fmt("%s/consolidated.safetensors", ck);
	const char *ignored[] = { "consolidated.safetensors", NULL };
	struct wshard_catalog *cat;
	size_t i;

	gen(ck, "--arch mistral --layers 1 --shards 2");
	gen(other, "--arch mistral --layers 2 --seed 9 --extra-tensor only.here:4");
	copy_file(from, to);
	cat = open_ok(ck);
	cr_assert_eq(cat->nfiles, 2);
	for (i = 0; i < cat->nfiles; i++)
		cr_assert_str_neq(cat->files[i].name, "consolidated.safetensors");
	cr_assert_eq(cat->ntensors, llama_tensor_count(1));
	cr_assert_null(wshard_catalog_find(cat, "only.here"));
	assert_list(cat->ignored, cat->nignored, ignored);
	assert_list(cat->extra, cat->nextra, generated_extra);
	check_tensors(cat);
	wshard_catalog_free(cat);

	/* Beside a single model.safetensors too. */
	free(ck);
	ck = fmt("%s/s", dir);
	free(to);
	to = fmt("%s/consolidated.safetensors", ck);
	gen(ck, "--arch mistral --layers 1");
	copy_file(from, to);
	cat = open_ok(ck);
	cr_assert_eq(cat->nfiles, 1);
	cr_assert_null(wshard_catalog_find(cat, "only.here"));
	assert_list(cat->ignored, cat->nignored, ignored);
	wshard_catalog_free(cat);
	free(ck);
	free(other);
	free(from);
	free(to);
	rm_tree(dir);
}

/* Non-weight files are listed sorted; weights, indexes, the manifest,
 * hidden files and directories are not. */
Test(catalog, extra_files)
{
	static const char *const want[] = {
		"README.md", "a-notes.txt", "config.json",
		"generation_config.json", "merges.txt", "special_tokens_map.json",
		"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
		"vocab.json", NULL,
	};
	static const char *const skipped[] = {
		"pytorch_model.bin", "pytorch_model-00001-of-00002.bin",
		"pytorch_model.bin.index.json", "model.pt", "optimizer.pth",
		"wshard.json", ".gitattributes", ".cache-file",
		"other.safetensors.index.json",
	};
	static const char *const added[] = {
		"README.md", "a-notes.txt", "merges.txt", "tokenizer.model",
		"vocab.json",
	};
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir), *sub = fmt("%s/m/original", dir);
	struct wshard_catalog *cat;
	size_t i;

	gen(ck, "--layers 1 --shards 2");
	for (i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++)
		write_text(ck, skipped[i], "x\n");
	for (i = 0; i < sizeof(added) / sizeof(added[0]); i++)
		write_text(ck, added[i], "y\n");
	cr_assert_eq(mkdir(sub, 0755), 0);
	write_text(sub, "params.json", "{}\n");
	cat = open_ok(ck);
	assert_list(cat->extra, cat->nextra, want);
	cr_assert_eq(cat->nignored, 0);
	cr_assert_eq(cat->nfiles, 2);
	wshard_catalog_free(cat);
	free(ck);
	free(sub);
	rm_tree(dir);
}

/* A shard that is a link to a file inside the directory is fine, and so
 * is a checkpoint directory reached through a link. */
Test(catalog, links_inside_the_directory)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir), *blobs = fmt("%s/m/blobs", dir);
	char *shard = fmt("%s/m/model-00002-of-00002.safetensors", dir);
	char *blob = fmt("%s/m/blobs/b2", dir), *link = fmt("%s/via-link", dir);
	struct wshard_catalog *cat;

	gen(ck, "--layers 1 --shards 2");
	cr_assert_eq(mkdir(blobs, 0755), 0);
	cr_assert_eq(rename(shard, blob), 0);
	cr_assert_eq(symlink("blobs/b2", shard), 0);
	cr_assert_eq(symlink("m", link), 0);
	cat = open_ok(ck);
	cr_assert_eq(cat->nfiles, 2);
	cr_assert_eq(cat->ntensors, llama_tensor_count(1));
	check_tensors(cat);
	wshard_catalog_free(cat);
	cat = open_ok(link);
	cr_assert_eq(cat->ntensors, llama_tensor_count(1));
	wshard_catalog_free(cat);
	free(ck);
	free(blobs);
	free(shard);
	free(blob);
	free(link);
	rm_tree(dir);
}

/* A weight_map may name a file in a subdirectory. */
Test(catalog, shard_in_subdirectory)
{
	char *dir = tmp_dir();
	char *ck = fmt("%s/m", dir), *sub = fmt("%s/m/w", dir);
	char *from = fmt("%s/m/model.safetensors", dir);
	char *to = fmt("%s/m/w/model.safetensors", dir);
	char *index;
	struct wshard_catalog *cat;

	gen(ck, "--layers 0");
	cr_assert_eq(mkdir(sub, 0755), 0);
	cr_assert_eq(rename(from, to), 0);
	index = fmt("{\"weight_map\": {\"lm_head.weight\": \"w/model.safetensors\","
		    " \"model.embed_tokens.weight\": \"w/model.safetensors\","
		    " \"model.norm.weight\": \"w/model.safetensors\"}}\n");
	write_text(ck, INDEX, index);
	cat = open_ok(ck);
	cr_assert_eq(cat->nfiles, 1);
	cr_assert_str_eq(cat->files[0].name, "w/model.safetensors");
	cr_assert_eq(cat->ntensors, 3);
	check_tensors(cat);
	wshard_catalog_free(cat);
	free(index);
	free(ck);
	free(sub);
	free(from);
	free(to);
	rm_tree(dir);
}

Test(catalog, free_null)
{
	wshard_catalog_free(NULL);
}

