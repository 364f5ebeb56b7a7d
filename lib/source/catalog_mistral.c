/*
 * catalog_mistral.c - Mistral's own checkpoint format: params.json for
 * config.json, consolidated.safetensors (or consolidated-0000N-of-0000M
 * .safetensors, with or without consolidated.safetensors.index.json) for
 * the weights, as Mistral ships Mistral Large 3, Devstral, Magistral,
 * Pixtral and Voxtral.  vLLM 0.32 reads such a folder so wherever it has
 * no model.safetensors(.index.json) beside (model_loader/default_loader.py
 * load_format "mistral"; transformers_utils/config.py, config_format
 * "mistral" where consolidated*.safetensors and params.json are found),
 * and builds its config from params.json with adapt_config_dict
 * (transformers_utils/configs/mistral.py): the same renaming is done
 * here, in memory, for the architectures wshard has rules for in this
 * format (Mistral Large 3, the dense MistralForCausalLM, named
 * mistral:MistralForCausalLM for its rules, PixtralForConditionalGeneration,
 * a vision encoder around that dense model: its vision_encoder object read
 * as vision_config, and VoxtralForConditionalGeneration, a Whisper encoder
 * around it, or VoxtralRealtimeGeneration, a causal one: its encoder_args
 * read as audio_config).  params.json and the
 * tokenizer (tekken.json) go to OUT as they are, the non-weight files
 * they are.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "wshard.h"
#include "catalog.h"
#include "arc.h"
#include "base/fileio.h"

#define PARAMS_NAME "params.json"

static bool is_consolidated(const char *name)
{
	size_t n = strlen(name), s = strlen(".safetensors");

	return !strncmp(name, "consolidated", strlen("consolidated")) && n > s &&
	       !strcmp(name + n - s, ".safetensors") && !strchr(name, '/');
}

static enum wshard_err consolidated_entry(const struct wshard_catalog *cat, const char *name,
					  char ***names, size_t *n, struct wshard_error *err)
{
	return is_consolidated(name) ? catalog_push_file(cat, name, names, n, err) : WSHARD_OK;
}

enum wshard_err catalog_mistral_files(const struct wshard_catalog *cat, char ***out_names,
				      size_t *out_n, struct wshard_error *err)
{
	*out_names = NULL;
	*out_n = 0;
	if (!wshard_catalog_has_file(cat, PARAMS_NAME))
		return WSHARD_OK;
	return catalog_list_names(cat, is_consolidated, consolidated_entry, out_names, out_n, err);
}

/* key renamed to to (vLLM's _remap_general_mistral_args). */
static int rename_key(json_t *c, const char *key, const char *to)
{
	json_t *v = json_object_get(c, key);

	if (!v)
		return 0;
	json_incref(v);
	json_object_del(c, key);
	return json_object_set_new(c, to, v);
}

/* Mistral Large 3's moe object lifted to DeepSeek-V3's keys (_remap_moe_args). */
static int lift_moe(json_t *c)
{
	static const char *const map[][2] = {
		{ "route_every_n", "moe_layer_freq" },
		{ "first_k_dense_replace", "first_k_dense_replace" },
		{ "num_experts_per_tok", "num_experts_per_tok" },
		{ "num_experts", "n_routed_experts" },
		{ "expert_hidden_dim", "moe_intermediate_size" },
		{ "routed_scale", "routed_scaling_factor" },
		{ "num_shared_experts", "n_shared_experts" },
		{ "num_expert_groups", "n_group" },
		{ "num_expert_groups_per_tok", "topk_group" },
	};
	json_t *moe = json_object_get(c, "moe");
	size_t i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		json_t *v = json_object_get(moe, map[i][0]);

		if (v && json_object_set(c, map[i][1], v))
			return -1;
	}
	return 0;
}

/*
 * The architecture adapt_config_dict picks for the text model of
 * params.json c (its keys renamed already), as vLLM 0.32 names it.
 */
static const char *text_architecture(json_t *c)
{
	json_t *moe = json_object_get(c, "moe");
	const char *type = json_string_value(json_object_get(c, "model_type"));
	json_t *shared = json_object_get(moe, "num_shared_experts");
	bool mla = json_is_true(json_object_get(c, "qk_nope_head_dim")) ||
		   json_integer_value(json_object_get(c, "qk_nope_head_dim")) > 0;

	if (type && !strcmp(type, "mamba"))
		return "Mamba2ForCausalLM";
	/* an MLA model without moe is given one shared expert (_remap_mistral_mla_args) */
	if ((json_is_object(moe) && json_integer_value(shared) > 0) || (mla && !moe))
		return "MistralLarge3ForCausalLM";
	if (json_is_object(moe))
		return "MixtralForCausalLM";
	return "MistralForCausalLM";
}

/*
 * The architecture adapt_config_dict picks for params.json c (its keys
 * renamed already), as vLLM 0.32 names it: a vision encoder or an audio
 * encoder makes it the multimodal model around text_architecture's (its
 * text_config's).
 */
static const char *mistral_architecture(json_t *c)
{
	json_t *mm = json_object_get(c, "multimodal");
	json_t *enc = json_object_get(json_object_get(mm, "whisper_model_args"), "encoder_args");

	if (json_object_get(mm, "vision_encoder_args") || json_object_get(c, "vision_encoder"))
		return "PixtralForConditionalGeneration";
	if (json_is_object(enc))
		return json_is_true(json_object_get(enc, "causal")) ? "VoxtralRealtimeGeneration"
								    : "VoxtralForConditionalGeneration";
	return text_architecture(c);
}

/* The architectures whose mistral-format names wshard has rules for. */
static bool supported(const char *arch)
{
	return !strcmp(arch, "MistralLarge3ForCausalLM") || !strcmp(arch, "MistralForCausalLM") ||
	       !strcmp(arch, "PixtralForConditionalGeneration") ||
	       !strcmp(arch, "VoxtralForConditionalGeneration") ||
	       !strcmp(arch, "VoxtralRealtimeGeneration");
}

/*
 * The name wshard's rules know arch by in this format: MistralForCausalLM
 * is "mistral:MistralForCausalLM" (mistral_consolidated.json), its names
 * and rows being another checkpoint's than the config.json release's that
 * llama.json reads; MistralLarge3ForCausalLM, found in no other format,
 * is itself.
 */
static const char *rules_name(const char *arch)
{
	return strcmp(arch, "MistralForCausalLM") ? arch : "mistral:MistralForCausalLM";
}

/*
 * params.json's "quantization" made the quantization_config vLLM makes of
 * it (_remap_mistral_quantization_args): FP8 weights ("qformat_weight"
 * "fp8_e4m3") are quant_method fp8, per tensor, their activations static
 * ("qscheme_act" "TENSOR" or none) or dynamic ("NO_SCALES"); the
 * tensors' qscale_weight and qscale_act are its weight_scale and
 * input_scale (rules_scale.c).  vLLM passes compressed-tensors through,
 * which is refused here, untried under Mistral's names.
 */
static enum wshard_err adapt_quantization(json_t *root, const char *path,
					  struct wshard_error *err)
{
	json_t *q = json_object_get(root, "quantization"), *qc;
	const char *fmt, *act;

	/* vLLM reads an empty one as none */
	if (!q || (json_is_object(q) && !json_object_size(q)))
		return WSHARD_OK;
	fmt = json_string_value(json_object_get(q, "qformat_weight"));
	act = json_string_value(json_object_get(q, "qscheme_act"));
	if (!fmt || strcmp(fmt, "fp8_e4m3"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"quantization\" other than FP8 (\"qformat_weight\": \"fp8_e4m3\"), which wshard cannot read in this format yet",
					path);
	if (json_object_get(q, "qscheme_act") && !json_is_null(json_object_get(q, "qscheme_act")) &&
	    (!act || (strcmp(act, "TENSOR") && strcmp(act, "NO_SCALES"))))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"quantization\".qscheme_act is neither \"TENSOR\" nor \"NO_SCALES\", as vLLM requires",
					path);
	qc = json_pack("{s:s, s:s}", "quant_method", "fp8", "activation_scheme",
		       act && !strcmp(act, "NO_SCALES") ? "dynamic" : "static");
	if (!qc || json_object_set_new(root, "quantization_config", qc))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	json_object_del(root, "quantization");
	return WSHARD_OK;
}

/* The integer at key of o, or def where o has none (or null). */
static json_int_t int_or(json_t *o, const char *key, json_int_t def)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? json_integer_value(v) : def;
}

/*
 * _remap_mistral_audio_args: multimodal.whisper_model_args's encoder_args
 * become audio_config with WhisperConfig's names (the sizes the rules
 * read; max_source_positions WhisperConfig's 1500 where it has none;
 * encoder_head_dim, which only the causal encoder reads, dim / n_heads
 * where it has none), the rest text_config.  The non-causal encoder vLLM
 * builds is WhisperEncoder, whose position table is a sinusoid (pos_embed
 * "sinusoidal") or "learned" (never in a release: refused); the causal
 * one (arch VoxtralRealtimeGeneration) WhisperCausalEncoder, which
 * asserts pos_embed "rope" (whisper_causal.py:598).
 */
static enum wshard_err adapt_audio(json_t *root, const char *arch, const char *path,
				   struct wshard_error *err)
{
	json_t *w = json_object_get(json_object_get(root, "multimodal"), "whisper_model_args");
	json_t *enc = json_object_get(w, "encoder_args");
	json_t *mel = json_object_get(enc, "audio_encoding_args");
	json_t *ds = json_object_get(w, "downsample_args"), *ac;
	const char *pos = json_string_value(json_object_get(enc, "pos_embed"));
	bool causal = !strcmp(arch, "VoxtralRealtimeGeneration");
	const char *want = causal ? "rope" : "sinusoidal";
	json_int_t heads = int_or(enc, "n_heads", 0);

	if (strcmp(text_architecture(root), "MistralForCausalLM"))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': a mistral-format %s whose text model is %s, which wshard has no rules for in this format",
					path, arch, text_architecture(root));
	if (strcmp(pos ? pos : "sinusoidal", want))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': %s audio encoder whose pos_embed is \"%s\", not \"%s\", which vLLM cannot build",
					path, causal ? "a causal" : "an", pos ? pos : "sinusoidal", want);
	if (!json_is_integer(json_object_get(ds, "downsample_factor")) ||
	    !json_is_integer(json_object_get(mel, "num_mel_bins")))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': multimodal.whisper_model_args lacks downsample_args.downsample_factor or encoder_args.audio_encoding_args.num_mel_bins",
					path);
	ac = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "d_model", int_or(enc, "dim", 0),
		       "encoder_layers", int_or(enc, "n_layers", 0), "encoder_ffn_dim",
		       int_or(enc, "hidden_dim", 0), "encoder_attention_heads",
		       int_or(enc, "n_heads", 0), "num_mel_bins", int_or(mel, "num_mel_bins", 0),
		       "downsample_factor", int_or(ds, "downsample_factor", 0),
		       "max_source_positions", int_or(enc, "max_source_positions", 1500));
	if (ac && json_object_set_new(ac, "encoder_head_dim",
				      json_integer(int_or(enc, "head_dim",
							  heads > 0 ? int_or(enc, "dim", 0) / heads : 0)))) {
		json_decref(ac);
		ac = NULL;
	}
	if (!ac || json_object_set_new(root, "audio_config", ac))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

/* params.json root renamed, in place, to the HF config vLLM makes of it. */
static enum wshard_err adapt(json_t *root, const char *path, const char **out_arch,
			     struct wshard_error *err)
{
	static const char *const map[][2] = {
		{ "dim", "hidden_size" },
		{ "norm_eps", "rms_norm_eps" },
		{ "n_kv_heads", "num_key_value_heads" },
		{ "n_layers", "num_hidden_layers" },
		{ "n_heads", "num_attention_heads" },
		{ "hidden_dim", "intermediate_size" },
		{ "activation", "hidden_act" },
		{ "tied_embeddings", "tie_word_embeddings" },
	};
	enum wshard_err rc;
	const char *arch;
	size_t i;

	*out_arch = NULL;
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (rename_key(root, map[i][0], map[i][1]))
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!json_object_get(root, "tie_word_embeddings") &&
	    json_object_set_new(root, "tie_word_embeddings", json_false()))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	arch = mistral_architecture(root);
	if (!supported(arch))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': a mistral-format %s, which wshard has no rules for in this format (its config.json and model.safetensors release converts, where there is one)",
					path, arch);
	rc = adapt_quantization(root, path, err);
	if (rc)
		return rc;
	if (!strcmp(arch, "PixtralForConditionalGeneration")) {
		/* _remap_mistral_vision_args: the multimodal object (else
		 * vision_encoder) becomes vision_config, the rest text_config,
		 * whose architecture the rules' text model is */
		const char *key = json_object_get(root, "multimodal") ? "multimodal" : "vision_encoder";

		if (strcmp(text_architecture(root), "MistralForCausalLM"))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': a mistral-format PixtralForConditionalGeneration whose text model is %s, which wshard has no rules for in this format",
						path, text_architecture(root));
		if (rename_key(root, key, "vision_config"))
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	if (!strcmp(arch, "VoxtralForConditionalGeneration") ||
	    !strcmp(arch, "VoxtralRealtimeGeneration")) {
		rc = adapt_audio(root, arch, path, err);
		if (rc)
			return rc;
	}
	if (!strcmp(arch, "MistralLarge3ForCausalLM")) {
		if (!json_object_get(root, "moe")) {
			/* _remap_mistral_mla_args: one shared expert, every layer dense */
			json_t *moe = json_pack("{s:i, s:O, s:i, s:O}", "num_experts", 1,
						"first_k_dense_replace",
						json_object_get(root, "num_hidden_layers"),
						"num_shared_experts", 1, "expert_hidden_dim",
						json_object_get(root, "intermediate_size"));

			if (!moe || json_object_set_new(root, "moe", moe))
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		}
		if (lift_moe(root) ||
		    json_object_set_new(root, "model_type", json_string("deepseek_v3")))
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	*out_arch = arch;
	return WSHARD_OK;
}

enum wshard_err catalog_mistral_config(struct wshard_catalog *cat, struct wshard_error *err)
{
	struct wshard_config *c = &cat->config;
	char *path = wshard_path_join(cat->dir, PARAMS_NAME), *text = NULL;
	const char *arch;
	json_error_t jerr;
	json_t *root = NULL;
	size_t len;
	enum wshard_err rc;

	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	rc = catalog_read_small(cat, path, &text, &len, err);
	if (rc)
		goto out;
	root = json_loadb(text, len, 0, &jerr);
	if (!json_is_object(root)) {
		rc = wshard_error_set(err, WSHARD_EINVAL, "'%s': %s", path,
				      root ? "not a JSON object" : jerr.text);
		goto out;
	}
	rc = adapt(root, path, &arch, err);
	if (rc)
		goto out;
	c->architecture = strdup(rules_name(arch));
	if (!c->architecture) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	c->json = root;
	c->text = root;
	root = NULL;
	catalog_config_fields(c);
	cat->has_config = true;
out:
	json_decref(root);
	free(text);
	free(path);
	return rc;
}
