/*
 * catalog_read.c - reading an opened checkpoint: small files whole
 * (config.json, the index), config.json's fields, tensor bytes, and the
 * non-weight files copied out, from a directory or from an archive.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "wshard.h"
#include "safetensors.h"
#include "base/fileio.h"
#include "catalog.h"
#include "arc.h"

/* The largest JSON file of a checkpoint read whole. */
#define JSON_MAX (64ULL << 20)

enum wshard_err catalog_read_small(const struct wshard_catalog *cat, const char *path,
				   char **out, size_t *len, struct wshard_error *err)
{
	if (cat->archive) {
		const char *name = path + strlen(cat->dir) + 1;
		long m = arc_find(cat->archive, name);

		if (m < 0)
			return wshard_error_set(err, WSHARD_EINVAL, "'%s' has no entry '%s'",
						cat->dir, name);
		return arc_slurp(cat->archive, (size_t)m, JSON_MAX, out, len, err);
	}
	return wshard_read_file(path, JSON_MAX, out, len, err);
}

static int64_t cfg_int_value(json_t *v)
{
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

static int64_t cfg_int(json_t *cfg, const char *key)
{
	return cfg_int_value(json_object_get(cfg, key));
}

/* key through the nested objects from obj ("vision_config.hidden_size"). */
static json_t *nested_key(json_t *v, const char *key)
{
	const char *dot;
	char part[128];

	while (v && (dot = strchr(key, '.')) != NULL) {
		if ((size_t)(dot - key) >= sizeof(part))
			return NULL;
		memcpy(part, key, (size_t)(dot - key));
		part[dot - key] = '\0';
		v = json_object_get(v, part);
		key = dot + 1;
	}
	return v ? json_object_get(v, key) : NULL;
}

void *catalog_config_key(const struct wshard_config *c, const char *key)
{
	const char *open = strchr(key, '[');
	json_t *v;

	/* "KEY[i]": element i of an array (a default naming ERNIE-4.5-VL's
	 * moe_num_experts[0]) */
	if (open && isdigit((unsigned char)open[1])) {
		char name[128];

		if ((size_t)(open - key) >= sizeof(name))
			return NULL;
		memcpy(name, key, (size_t)(open - key));
		name[open - key] = '\0';
		return json_array_get(catalog_config_key(c, name), strtoul(open + 1, NULL, 10));
	}
	/* the text model's config first, a dotted key through its objects
	 * as well (MiniMax-M3's sparse_attention_config.sparse_attention_freq,
	 * under text_config in its release, at the top of a config.json of
	 * the text model alone), then the file's */
	v = c->text ? nested_key(c->text, key) : NULL;
	if (!v && c->json)
		v = nested_key(c->json, key);
	/* Qwen's omni and ASR releases hold the model under thinker_config
	 * (its talker is not served): read there what the top lacks */
	if (!v && c->json)
		v = nested_key(json_object_get(c->json, "thinker_config"), key);
	return v;
}

/* config key from c->text, else from the rules' defaults (an integer, or
 * the name of the key that stands in); -1 when neither. */
static int64_t field(const struct wshard_config *c, const char *key)
{
	int64_t v = cfg_int(c->text, key);
	json_t *d = c->defaults ? json_object_get((json_t *)c->defaults, key) : NULL;

	if (v < 0 && json_is_string(d)) {	/* the name of the key that stands in */
		v = cfg_int_value(catalog_config_key(c, json_string_value(d)));
		/* and that key's own default where config.json lacks it too */
		d = json_object_get((json_t *)c->defaults, json_string_value(d));
		if (v < 0 && json_is_integer(d))
			v = (int64_t)json_integer_value(d);
	} else if (v < 0 && json_is_integer(d))
		v = (int64_t)json_integer_value(d);
	return v;
}

void catalog_config_fields(struct wshard_config *c)
{
	json_t *tie;

	/* GPT-2's, GPT-J's and Bloom's names, as transformers' attribute_map
	 * reads them */
	c->hidden_size = field(c, "hidden_size");
	if (c->hidden_size < 0)
		c->hidden_size = field(c, "n_embd");
	c->num_attention_heads = field(c, "num_attention_heads");
	if (c->num_attention_heads < 0)
		c->num_attention_heads = field(c, "n_head");
	c->num_key_value_heads = field(c, "num_key_value_heads");
	if (c->num_key_value_heads < 0)
		c->num_key_value_heads = c->num_attention_heads;
	c->head_dim = field(c, "head_dim");
	if (c->head_dim <= 0 && c->hidden_size > 0 && c->num_attention_heads > 0)
		c->head_dim = c->hidden_size / c->num_attention_heads;
	c->intermediate_size = field(c, "intermediate_size");
	c->vocab_size = field(c, "vocab_size");
	c->num_experts = field(c, "num_local_experts");
	if (c->num_experts < 0)
		c->num_experts = field(c, "num_experts");
	/* DeepSeek (V2, V3, V4) counts its routed experts here */
	if (c->num_experts < 0)
		c->num_experts = field(c, "n_routed_experts");
	c->moe_intermediate_size = field(c, "moe_intermediate_size");
	c->shared_expert_intermediate_size = field(c, "shared_expert_intermediate_size");
	/* a multimodal model's own (top-level) setting wins over its text
	 * config's: vLLM copies it there (VllmConfig, "In Transformers v5,
	 * tie_word_embeddings belongs to the config of the class that can see
	 * both layers") */
	tie = json_object_get(c->json, "tie_word_embeddings");
	if (!json_is_boolean(tie))
		tie = json_object_get(c->text, "tie_word_embeddings");
	c->tie_word_embeddings = json_is_boolean(tie) ? json_is_true(tie) : -1;
}

/*
 * The object holding the text model's config: a multimodal config.json
 * (Gemma 3's Gemma3ForConditionalGeneration) nests it under text_config
 * (Qwen's omni and ASR models under thinker_config's) and has no layers
 * of its own, as transformers' get_text_config() finds it (PaliGemma's
 * has a hidden_size beside it, the projector's width); otherwise the file
 * itself.
 */
static json_t *model_config(json_t *root)
{
	json_t *t = json_object_get(root, "text_config");

	if (!json_is_object(t))
		t = json_object_get(json_object_get(root, "thinker_config"), "text_config");
	if (!json_is_object(t))	/* DeepSeek-VL2's (and Janus's) language_config */
		t = json_object_get(root, "language_config");
	if (json_object_get(root, "num_hidden_layers") || !json_is_object(t))
		return root;
	return t;
}

/*
 * ModelOpt's older checkpoints (NVIDIA's 2024 -FP8 and -FP4 ones) have no
 * quantization_config in config.json, their quantization in
 * hf_quant_config.json beside it ({"quantization": {"quant_algo": ...}}),
 * which vLLM reads as the same: it is taken as config.json's
 * quantization_config, with quant_method "modelopt".  Only the copy in
 * memory changes; the files go to OUT as they are.
 */
static enum wshard_err modelopt_config(struct wshard_catalog *cat, const char *config,
				       json_t *root, struct wshard_error *err)
{
	struct wshard_error ignored = { 0 };
	size_t n = strlen(config), dirlen, len;
	char *path, *text = NULL;
	json_t *hq, *q;

	if (json_object_get(root, "quantization_config") || n < strlen("config.json"))
		return WSHARD_OK;
	dirlen = n - strlen("config.json");
	if (strcmp(config + dirlen, "config.json") != 0)
		return WSHARD_OK;
	path = malloc(dirlen + sizeof("hf_quant_config.json"));
	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	sprintf(path, "%.*shf_quant_config.json", (int)dirlen, config);
	if (catalog_read_small(cat, path, &text, &len, &ignored)) {
		free(path);	/* none: an unquantized checkpoint */
		return WSHARD_OK;
	}
	hq = json_loadb(text, len, 0, NULL);
	free(text);
	q = json_object_get(hq, "quantization");
	if (!json_is_object(q)) {
		json_decref(hq);
		wshard_error_set(err, WSHARD_EINVAL,
				 "'%s': not a JSON object with a \"quantization\" object", path);
		free(path);
		return WSHARD_EINVAL;
	}
	free(path);
	q = json_deep_copy(q);
	json_decref(hq);
	if (q && !json_object_get(q, "quant_method") &&
	    json_object_set_new(q, "quant_method", json_string("modelopt"))) {
		json_decref(q);
		q = NULL;
	}
	/* json_object_set_new takes q, also when it fails */
	if (!q || json_object_set_new(root, "quantization_config", q))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

/*
 * ColPali's config.json wraps the PaliGemma config it was trained from in
 * vlm_config; vLLM reads it as that config with its keys lifted to the top
 * (transformers_utils/configs/colpali.py: a key the file has at the top
 * wins), and so does wshard, in memory only.
 */
static int lift_vlm_config(json_t *root)
{
	json_t *vlm = json_object_get(root, "vlm_config"), *v;
	const char *key;

	if (!json_is_object(vlm))
		return 0;
	json_object_foreach(vlm, key, v)
		if (strcmp(key, "model_type") != 0 && strcmp(key, "_name_or_path") != 0 &&
		    !json_object_get(root, key) && json_object_set(root, key, v))
			return -1;
	return 0;
}

/*
 * The architecture vLLM 0.32 builds for config.json root: its first
 * "architectures" entry, except that a MiMo-V2 config (model_type mimo_v2
 * or mimo_v2_flash) with a vision_config is MiMoV2OmniForCausalLM whatever
 * the entry says, as MiMo-V2.5's release names MiMoV2ForCausalLM
 * (transformers_utils/model_arch_config_convertor.py:637,
 * MimoV2ModelArchConfigConvertor).  NULL where there is none.
 */
static const char *vllm_architecture(json_t *root)
{
	json_t *archs = json_object_get(root, "architectures");
	const char *type = json_string_value(json_object_get(root, "model_type"));
	json_t *vision = json_object_get(root, "vision_config");

	if (type && (!strcmp(type, "mimo_v2") || !strcmp(type, "mimo_v2_flash")) &&
	    json_is_object(vision) && json_object_size(vision))
		return "MiMoV2OmniForCausalLM";
	if (json_is_array(archs) && json_is_string(json_array_get(archs, 0)))
		return json_string_value(json_array_get(archs, 0));
	return NULL;
}

/*
 * Clef-Omni: a config.json whose architectures are
 * ["Qwen3OmniMoeForConditionalGeneration"] alone, with
 * joint_head_config.json beside, is ClefOmniForJointSchema, its joint
 * schema head's sizes that file (vLLM's Qwen3OmniMoeModelArchConfigConvertor,
 * transformers_utils/model_arch_config_convertor.py:650-670), read under
 * joint_head_config; *arch is left alone otherwise.
 */
static enum wshard_err clef_omni(struct wshard_catalog *cat, json_t *root, const char **arch,
				 struct wshard_error *err)
{
	static const char head_name[] = "joint_head_config.json";
	json_t *archs = json_object_get(root, "architectures"), *head;
	char *text = NULL;
	size_t len;
	enum wshard_err rc;

	if (!*arch || strcmp(*arch, "Qwen3OmniMoeForConditionalGeneration") ||
	    json_array_size(archs) != 1 || !wshard_catalog_has_file(cat, head_name))
		return WSHARD_OK;
	rc = wshard_catalog_slurp(cat, head_name, &text, &len, err);
	if (rc)
		return rc;
	head = json_loadb(text, len, 0, NULL);
	free(text);
	if (!json_is_object(head)) {
		json_decref(head);
		return wshard_error_set(err, WSHARD_EINVAL, "'%s/%s': not a JSON object", cat->path,
					head_name);
	}
	if (json_object_set_new(root, "joint_head_config", head))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	*arch = "ClefOmniForJointSchema";
	return WSHARD_OK;
}

enum wshard_err catalog_load_config(struct wshard_catalog *cat, const char *path,
				    struct wshard_error *err)
{
	struct wshard_config *c = &cat->config;
	json_error_t jerr;
	json_t *root;
	const char *arch;
	char *text = NULL;
	size_t len;
	enum wshard_err rc;

	rc = catalog_read_small(cat, path, &text, &len, err);
	if (rc)
		return rc;
	root = json_loadb(text, len, 0, &jerr);
	free(text);
	if (!json_is_object(root)) {
		json_decref(root);
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': %s", path,
					root ? "not a JSON object" : jerr.text);
	}
	c->json = root;
	if (lift_vlm_config(root))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	c->text = model_config(root);
	rc = modelopt_config(cat, path, root, err);
	if (rc)
		return rc;
	arch = vllm_architecture(root);
	rc = clef_omni(cat, root, &arch, err);
	if (rc)
		return rc;
	if (arch && !(c->architecture = strdup(arch)))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	catalog_config_fields(c);
	cat->has_config = true;
	return WSHARD_OK;
}

enum wshard_err wshard_catalog_read(const struct wshard_catalog *cat, uint32_t file,
				    uint64_t off, void *buf, size_t len,
				    struct wshard_error *err)
{
	const struct wshard_src_file *f = &cat->files[file];

	if (cat->archive && !cat->archive->in_place)
		return arc_read(cat->archive, (size_t)f->member, off, buf, len, err);
	return wshard_pread_full(f->st->fd, buf, len, off, f->path, err);
}

bool wshard_catalog_seekable(const struct wshard_catalog *cat)
{
	return !cat->archive || cat->archive->in_place;
}

enum wshard_err wshard_catalog_slurp(const struct wshard_catalog *cat, const char *name,
				     char **out_buf, size_t *out_len,
				     struct wshard_error *err)
{
	char *path = wshard_path_join(cat->dir, name);
	enum wshard_err rc;

	*out_buf = NULL;
	*out_len = 0;
	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	rc = catalog_read_small(cat, path, out_buf, out_len, err);
	free(path);
	return rc;
}

bool wshard_catalog_has_file(const struct wshard_catalog *cat, const char *rel)
{
	char *path;
	struct stat sb;
	bool found;

	if (cat->archive)
		return arc_find(cat->archive, rel) >= 0;
	path = wshard_path_join(cat->dir, rel);
	/* (a symbolic link is followed: a Hub cache's files are links) */
	found = path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
	free(path);
	return found;
}

enum wshard_err wshard_catalog_copy_extra(const struct wshard_catalog *cat, size_t i,
					  const char *dst, unsigned flags,
					  struct wshard_error *err)
{
	char *src, *buf;
	size_t len;
	long m;
	enum wshard_err rc;

	if (!cat->archive) {
		src = wshard_path_join(cat->dir, cat->extra[i]);
		if (!src)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		rc = wshard_copy_file(src, dst, flags, err);
		free(src);
		return rc;
	}
	m = arc_find(cat->archive, cat->extra[i]);
	if (m < 0)
		return wshard_error_set(err, WSHARD_EINVAL, "'%s' has no entry '%s'", cat->dir,
					cat->extra[i]);
	rc = arc_slurp(cat->archive, (size_t)m, 1ULL << 40, &buf, &len, err);
	if (rc)
		return rc;
	rc = wshard_write_file(dst, buf, len, flags, err);
	free(buf);
	return rc;
}

