/*
 * plan_quant.c - what the plan needs to know of a quantized checkpoint's
 * quantization_config beyond its rules: which KV-cache placeholders vLLM's
 * method adds, which scales it holds in F32, where a split would cut a
 * quantization group or a packed word, and which methods are refused.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "plan_impl.h"

json_t *plan_quant_config(const struct wshard_plan *plan)
{
	json_t *q = json_object_get(plan->config->json, "quantization_config");

	return json_is_object(q) ? q : NULL;
}

/* quantization_config's quant_method, or NULL. */
static const char *quant_method(const struct wshard_plan *plan)
{
	return json_string_value(json_object_get(plan_quant_config(plan), "quant_method"));
}

bool plan_modelopt_nvfp4(const struct wshard_plan *plan)
{
	json_t *q = plan_quant_config(plan);
	const char *method = quant_method(plan);
	const char *algo = json_string_value(json_object_get(q, "quant_algo"));

	return method && !strncmp(method, "modelopt", 8) && algo && !strcasecmp(algo, "NVFP4");
}

bool plan_fp4_weight(const struct wshard_plan *plan, const struct wshard_st_tensor *t)
{
	const char *method = quant_method(plan);

	/* Quark's U8 weights are MXFP4's or MXFP6's */
	return t->dtype == WSHARD_U8 &&
	       (plan_modelopt_nvfp4(plan) || (method && !strcmp(method, "quark")));
}

/*
 * The attention's KV-cache scales a quantized checkpoint gives vLLM: its
 * quantization method's KV-cache method creates them whether or not the
 * checkpoint holds them.  vLLM's BaseKVCacheMethod (fp8, modelopt, quark)
 * holds k/v/q/prob_scale, scalars of the model's dtype (the rules' "when":
 * "quantized" extras); compressed-tensors' CompressedTensorsKVCacheMethod
 * holds k/v/q_scale as F32 [1] of 1.0 and k/v/q_zero_point as [1] of 0 in
 * the model's dtype; the other methods (GPTQ, AWQ) none.
 */
enum kv_method plan_kv_cache_method(const struct wshard_plan *plan)
{
	static const char *const base[] = { "fp8", "modelopt", "modelopt_fp4", "quark" };
	const char *method = quant_method(plan);
	size_t i;

	if (!plan_quant_config(plan))
		return KV_NONE;
	if (!method)		/* as before methods were told apart */
		return KV_BASE;
	if (!strcmp(method, "compressed-tensors"))
		return KV_COMPRESSED;
	for (i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		if (!strcmp(method, base[i]))
			return KV_BASE;
	return KV_NONE;
}

/*
 * compressed-tensors' 8-bit schemes (W8A8 INT8 and FP8, vLLM's
 * CompressedTensorsW8A8Int8 and -Fp8) hold a weight's scales in F32 whatever
 * the checkpoint's dtype (llm-compressor writes the model's): true for a
 * scale X.weight_scale beside an 8-bit X.weight of such a checkpoint.
 * fbgemm_fp8's FBGEMMFp8LinearMethod holds its weight_scale [rows, 1] in
 * F32 as well.  The 4-bit pack-quantized scales stay in the model's dtype.
 */
bool plan_f32_scale(const struct wshard_plan *plan, const struct member *m,
			 enum wshard_dtype dt)
{
	const char *method = quant_method(plan);
	const char *name = src_name(plan, m->src);
	const struct wshard_src_tensor *w;
	size_t len = strlen(name);
	char wname[1024];

	if (!m->rule->scale || !m->rule->grouped || dt == WSHARD_F32 || !method ||
	    (strcmp(method, "compressed-tensors") != 0 && strcmp(method, "fbgemm_fp8") != 0) ||
	    len < 13 ||
	    strcmp(name + len - 13, ".weight_scale") != 0 || len - 6 >= sizeof(wname))
		return false;
	snprintf(wname, sizeof(wname), "%.*s", (int)(len - 6), name);
	w = wshard_catalog_find(plan->cat, wname);
	return w && (w->info->dtype == WSHARD_I8 || w->info->dtype == WSHARD_F8_E4M3);
}

/* A key of quantization_config's weights: at its top (GPTQ, AWQ) or in its
 * first config group's "weights" (compressed-tensors); 0 when absent. */
static long long quant_key(const struct wshard_plan *plan, const char *top, const char *group)
{
	json_t *q = plan_quant_config(plan);
	json_t *groups = json_object_get(q, "config_groups"), *v = json_object_get(q, top);
	const char *key;
	json_t *g;

	if (!json_is_integer(v) && json_is_object(groups)) {
		json_object_foreach(groups, key, g) {
			v = json_object_get(json_object_get(g, "weights"), group);
			break;
		}
	}
	return json_is_integer(v) ? json_integer_value(v) : 0;
}

/*
 * A column split of a group-quantized tensor must give every rank whole
 * groups of input columns (a scale or zero point's dimension 1 counts the
 * groups) and whole int32 words of packed values (a packed weight's
 * dimension 1 counts the words): refused before anything is written,
 * naming the tensor, the dimension and the group or pack.
 */
enum wshard_err plan_check_groups(const struct wshard_plan *plan, const struct member *m,
				    struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	unsigned long long have = t->ndim >= 2 ? t->shape[1] : 0;
	long long group = quant_key(plan, "group_size", "group_size");
	long long bits = quant_key(plan, "bits", "num_bits");

	if ((!m->rule->grouped && !m->rule->packed) || t->ndim < 2 || have % (uint64_t)plan->tp == 0)
		return WSHARD_OK;
	if (m->rule->packed && t->dtype == WSHARD_U8)	/* NVFP4: two a byte */
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': dimension 1 holds %llu bytes of 2 packed FP4 values; --tp %d would cut a byte",
					t->name, have, plan->tp);
	if (m->rule->packed)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': dimension 1 holds %llu int32 words of %lld packed values; --tp %d would cut a word",
					t->name, have, bits > 0 && bits <= 32 ? 32 / bits : 8,
					plan->tp);
	if (group > 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': dimension 1 holds %llu groups of %lld input columns (quantization_config group_size); --tp %d would cut a group",
					t->name, have, group, plan->tp);
	return wshard_error_set(err, WSHARD_EINVAL,
				"tensor '%s': dimension 1 holds %llu groups of input columns; --tp %d would cut a group",
				t->name, have, plan->tp);
}

/* quant_method is GPTQ's (1), AWQ's (2) or neither (0); vLLM reads the
 * marlin names as the same configs. */
static int gptq_or_awq(const char *method)
{
	if (method && (!strcmp(method, "gptq") || !strcmp(method, "gptq_marlin")))
		return 1;
	if (method && (!strcmp(method, "awq") || !strcmp(method, "awq_marlin")))
		return 2;
	return 0;
}

/*
 * A cut of GPTQ's or AWQ's [in, out] tensors into ways parts along dim:
 * dimension 1 (the outputs) must give whole int32 words where it is packed
 * (the zero points, AWQ's weight); dimension 0 whole groups of inputs (the
 * scales and zero points count groups) and, for GPTQ's weight, whole words
 * of packed inputs.  Refused before anything is written, naming the
 * tensor, the dimension and the group or pack.
 */
enum wshard_err plan_check_inout(const struct wshard_plan *plan, const struct member *m,
				 int dim, uint64_t ways, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	const char *name = t->name;
	size_t len = strlen(name);
	long long quark = plan->quark_w4a16_group;
	bool qweight = (len >= 8 && !strcmp(name + len - 8, ".qweight")) ||
		       (quark && m->rule->qrole == WSHARD_QUANT_WEIGHT);
	bool awq = gptq_or_awq(quant_method(plan)) == 2 || quark;	/* Quark's W4A16 too */
	long long group = quark ? quark : quant_key(plan, "group_size", "group_size");
	long long bits = quark ? 4 : quant_key(plan, "bits", "num_bits");
	unsigned long long have;

	if (!bits)
		bits = quant_key(plan, "w_bit", "num_bits");
	if (t->ndim != 2)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': GPTQ and AWQ tensors have 2 dimensions, not %d",
					name, t->ndim);
	have = t->shape[dim];
	if (have % ways == 0)
		return WSHARD_OK;
	if ((dim == 1 && (!qweight || awq)) || (dim == 0 && qweight && !awq))
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': dimension %d holds %llu int32 words of %lld packed values; --tp %d would cut a word",
					name, dim, have, bits > 0 && bits <= 32 ? 32 / bits : 8,
					plan->tp);
	if (dim == 0 && !qweight)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': dimension 0 holds %llu group%s of %lld input rows (quantization_config group_size); --tp %d would cut a group",
					name, have, have == 1 ? "" : "s", group, plan->tp);
	return plan_indivisible(plan, m, dim, have, err);
}

/*
 * Quantization formats whose per-rank layout in vLLM wshard does not write
 * (or vLLM does not load): refused from config.json before any tensor is
 * read, rather than left to the rules' coverage check (which names
 * tensors, not the format).  GPTQ and AWQ as vLLM 0.32 takes them (GPTQ
 * 4- or 8-bit symmetric without activation order, AWQ 4-bit GEMM in
 * groups), on dense layers and experts (plan_check_experts refuses the
 * experts vLLM would take another layout of); of compressed-tensors'
 * formats, pack-, int- and float-quantized, NVFP4 and MXFP4 (not MXFP4
 * with FP8 activations); of ModelOpt's, FP8 and NVFP4; fp8 and mxfp4
 * (GPT-OSS); no other method.
 */
static enum wshard_err check_gptq_awq(const struct wshard_plan *plan, int which,
				      struct wshard_error *err)
{
	json_t *q = plan_quant_config(plan);
	const char *version = json_string_value(json_object_get(q, "version"));
	const char *what = which == 1 ? "GPTQ" : "AWQ";
	long long bits = quant_key(plan, "bits", "num_bits");
	long long group = quant_key(plan, "group_size", "group_size");

	if (which == 2 && !bits)
		bits = quant_key(plan, "w_bit", "num_bits");
	if (which == 2 && !group)
		group = quant_key(plan, "q_group_size", "group_size");
	if (json_is_true(json_object_get(q, "lm_head")))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': quantization_config.lm_head is true: a quantized %s lm_head is not supported yet",
					plan->cat->path, what);
	if (which == 1) {
		if (bits != 4 && bits != 8)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': quantization_config.bits %lld: vLLM takes GPTQ of 4 or 8 bits",
						plan->cat->path, bits);
		if (!json_is_true(json_object_get(q, "sym")))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': quantization_config.sym is not true: vLLM takes symmetric GPTQ only",
						plan->cat->path);
		if (json_is_true(json_object_get(q, "desc_act")) && group != -1)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': quantization_config.desc_act is true: vLLM no longer takes GPTQ with activation order",
						plan->cat->path);
		return WSHARD_OK;
	}
	if (bits != 4)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': quantization_config.bits %lld: vLLM takes AWQ of 4 bits",
					plan->cat->path, bits);
	if (version && strcasecmp(version, "gemm") != 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': quantization_config.version \"%s\": AWQ's GEMM layout is supported, not this one",
					plan->cat->path, version);
	if (group <= 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': quantization_config.group_size %lld: AWQ per channel is not supported (vLLM holds no scales for its row-parallel layers)",
					plan->cat->path, group);
	return WSHARD_OK;
}

/* v is absent, null or one of the n names taken (case aside). */
static bool algo_taken(json_t *v, const char *const taken[], size_t n)
{
	size_t i;

	if (!v || json_is_null(v))
		return true;
	for (i = 0; json_is_string(v) && i < n; i++)
		if (!strcasecmp(json_string_value(v), taken[i]))
			return true;
	return false;
}

/*
 * vLLM takes ModelOpt's NVFP4 with no input_activations in any of its
 * config_groups as W4A16_NVFP4 (ModelOptNvFp4Config._from_config), which
 * holds an input_scale per fused part and its experts' input scales
 * unset: not the NVFP4 layout written.
 */
static enum wshard_err weight_only_nvfp4(const struct wshard_plan *plan, struct wshard_error *err)
{
	json_t *groups = json_object_get(plan_quant_config(plan), "config_groups"), *g;
	const char *key;

	if (!plan_modelopt_nvfp4(plan) || !json_is_object(groups) || !json_object_size(groups))
		return WSHARD_OK;
	json_object_foreach(groups, key, g) {
		json_t *a = json_object_get(g, "input_activations");

		if (!json_is_object(g) || (a && !json_is_null(a)))
			return WSHARD_OK;
	}
	return wshard_error_set(err, WSHARD_EINVAL,
				"'%s': quantization_config: NVFP4 without input_activations in its config_groups is weight-only NVFP4 (vLLM's W4A16_NVFP4), not supported yet",
				plan->cat->path);
}

/*
 * ModelOpt's quant_algo (and kv_cache_quant_algo): FP8 per tensor and
 * NVFP4 are the layouts written; vLLM's other ModelOpt configs (MXFP8,
 * mixed precision, FP8 per channel or in blocks, ...) hold other
 * parameters, not checked against it, and are refused.
 */
static enum wshard_err check_modelopt(const struct wshard_plan *plan, struct wshard_error *err)
{
	static const char *const weights[] = { "FP8", "NVFP4" }, *const kv[] = { "FP8" };
	json_t *q = plan_quant_config(plan), *v;
	const char *key = "quant_algo", *algo;

	if (algo_taken(json_object_get(q, key), weights, 2)) {
		key = "kv_cache_quant_algo";
		if (algo_taken(json_object_get(q, key), kv, 1))
			return weight_only_nvfp4(plan, err);
	}
	v = json_object_get(q, key);
	algo = json_string_value(v);
	return wshard_error_set(err, WSHARD_EINVAL,
				"'%s': quantization_config.%s %s%s%s is not supported yet (ModelOpt's FP8 and NVFP4 are%s)",
				plan->cat->path, key, algo ? "\"" : "", algo ? algo : "not a string",
				algo ? "\"" : "", key[0] == 'k' ? ", with an FP8 KV cache or none" : "");
}

enum wshard_err plan_check_method(const struct wshard_plan *plan, struct wshard_error *err)
{
	/* besides GPTQ and AWQ: the methods whose layouts wshard writes */
	static const char *const methods[] = {
		"fp8", "mxfp4", "compressed-tensors", "modelopt", "modelopt_fp4", "fbgemm_fp8", "quark",
	};
	static const char *const formats[] = {
		"pack-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized",
		"mxfp4-pack-quantized",
	};
	json_t *q = plan_quant_config(plan);
	const char *method = quant_method(plan);
	json_t *groups = json_object_get(q, "config_groups"), *g;
	const char *key, *format;
	size_t i;

	if (!method)
		return WSHARD_OK;
	if (gptq_or_awq(method))
		return check_gptq_awq(plan, gptq_or_awq(method), err);
	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (!strcmp(method, methods[i]))
			break;
	if (i == sizeof(methods) / sizeof(methods[0]))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': quantization_config.quant_method \"%s\" is not supported yet (fp8, fbgemm_fp8, mxfp4, gptq, awq, compressed-tensors, modelopt and quark are)",
					plan->cat->path, method);
	if (!strncmp(method, "modelopt", 8))
		return check_modelopt(plan, err);
	if (!strcmp(method, "quark"))
		return plan_check_quark(plan, err);
	/* vLLM's FBGEMMFp8Config reads both keys and fails without them */
	if (!strcmp(method, "fbgemm_fp8") &&
	    (!json_is_number(json_object_get(q, "activation_scale_ub")) ||
	     !json_object_get(q, "modules_to_not_convert")))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': quantization_config of fbgemm_fp8 needs a number activation_scale_ub and a modules_to_not_convert, as vLLM reads them",
					plan->cat->path);
	if (strcmp(method, "compressed-tensors") != 0)
		return WSHARD_OK;
	json_object_foreach(groups, key, g) {
		format = json_string_value(json_object_get(g, "format"));
		if (!format)
			format = json_string_value(json_object_get(q, "format"));
		for (i = 0; format && i < sizeof(formats) / sizeof(formats[0]); i++)
			if (!strcmp(format, formats[i]))
				break;
		if (format && i == sizeof(formats) / sizeof(formats[0]))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': quantization_config.config_groups.%s has format \"%s\", not supported yet (pack-quantized, int-quantized, float-quantized, nvfp4-pack-quantized and mxfp4-pack-quantized are)",
						plan->cat->path, key, format);
		/* vLLM holds MXFP4 experts with FP8 activations as GPT-OSS's
		 * Mxfp4MoEMethod, not compressed-tensors' MXFP4 experts */
		if (format && !strcmp(format, "mxfp4-pack-quantized") &&
		    json_integer_value(json_object_get(json_object_get(g, "input_activations"),
						       "num_bits")) == 8)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': quantization_config.config_groups.%s: MXFP4 weights with 8-bit activations are not supported yet (with 4-bit activations or none they are)",
						plan->cat->path, key);
	}
	return WSHARD_OK;
}

/* Whether m is the stacked experts' GPTQ or AWQ qweight of w13 (the fused
 * gate and up) or w2, as vLLM's AutoGPTQMoEMethod and AutoAWQMoEMethod
 * hold them: a derived [in, out] rule of an expert's weight. */
static bool expert_qweight(const struct wshard_plan *plan, const struct member *m)
{
	return gptq_or_awq(quant_method(plan)) && m->rule->inout &&
	       m->rule->qrole == WSHARD_QUANT_WEIGHT && strstr(m->rule->match, "{e}") &&
	       !strstr(m->rule->output, "{e}");
}

/*
 * vLLM takes GPTQ's and AWQ's experts into AutoGPTQMoEMethod's and
 * AutoAWQMoEMethod's layout only where its Marlin MoE check passes
 * (check_moe_marlin_supports_config: hidden size a multiple of 128, group
 * size -1, 32, 64 or 128 dividing each rank's intermediate size); else it
 * falls back to MoeWNA16Method, which repacks the weights as it loads
 * them, a layout wshard does not write: refused, naming the tensor.
 * m is the experts' w13 qweight (a gate or up projection's [in, out]).
 */
enum wshard_err plan_check_experts(const struct wshard_plan *plan, const struct member *m,
				   struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	const char *method = quant_method(plan);
	int which = gptq_or_awq(method);
	long long group = quant_key(plan, "group_size", "group_size");
	long long bits = quant_key(plan, "bits", "num_bits");
	uint64_t hidden, inter, share, pack;

	if (plan_check_quark_experts(plan, m, err))
		return err ? err->code : WSHARD_EINVAL;
	if (!expert_qweight(plan, m) || m->rule->kind != RULE_FUSE || t->ndim != 2)
		return WSHARD_OK;
	if (which == 2 && !group)
		group = quant_key(plan, "q_group_size", "group_size");
	/* 4 or 8 bits (check_gptq_awq); GPTQ packs the inputs (dimension 0),
	 * AWQ the outputs */
	pack = bits == 8 ? 4 : 8;
	hidden = which == 1 ? t->shape[0] * pack : t->shape[0];
	inter = which == 1 ? t->shape[1] : t->shape[1] * pack;
	share = plan->opt.expert_parallel ? inter : inter / (uint64_t)plan->tp;
	if (hidden % 128 == 0 && (group == -1 || group == 32 || group == 64 || group == 128) &&
	    (group <= 0 || share % (uint64_t)group == 0))
		return WSHARD_OK;
	return wshard_error_set(err, WSHARD_EINVAL,
				"tensor '%s': vLLM takes %s experts of hidden size %llu, %llu intermediate rows a rank and group_size %lld into its MoE WNA16 layout, which wshard does not write (it needs a hidden size that is a multiple of 128 and groups of 32, 64, 128 or -1 that divide each rank's share)",
				t->name, which == 1 ? "GPTQ" : "AWQ", (unsigned long long)hidden,
				(unsigned long long)share, group);
}

/*
 * vLLM's AutoGPTQMoEMethod registers zero expert biases beside the
 * stacked qweights, w13_bias [E, 2I/N] and w2_bias [E, H] in the model's
 * dtype, whether or not the checkpoint has any (it drops them after
 * loading when none was loaded), so they are in the state sharded_state
 * loads; AWQ's has none.
 */
enum wshard_err plan_push_expert_bias(const struct wshard_plan *plan, const struct member *m,
				      const struct wshard_out_tensor *t, enum wshard_dtype dt,
				      struct wshard_rank_plan *rp, size_t *cap,
				      struct wshard_error *err)
{
	size_t len = strlen(t->name);
	struct wshard_out_tensor b = { .dtype = dt, .ndim = 2 };
	enum wshard_err rc;

	if (!expert_qweight(plan, m) || gptq_or_awq(quant_method(plan)) != 1 ||
	    t->ndim != 3 || len < 8 || strcmp(t->name + len - 8, "_qweight") != 0)
		return WSHARD_OK;
	b.name = malloc(len - 8 + 6);
	if (!b.name)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	sprintf(b.name, "%.*s_bias", (int)(len - 8), t->name);
	b.shape[0] = t->shape[0];
	b.shape[1] = t->shape[2];
	rc = plan_push_zeros(&b, b.shape[0] * b.shape[1] * (wshard_dtype_bits(dt) / 8), err);
	if (!rc)
		rc = plan_rank_push(rp, cap, &b, err);
	free(b.name);
	free(b.pieces);
	return rc;
}

/*
 * vLLM's FBGEMMFp8LinearMethod (quant_method fbgemm_fp8, Meta's -FP8
 * releases) keeps beside each FP8 layer's weight and weight_scale [rows,
 * 1] a parameter the checkpoint does not hold: input_scale_ub, an F32
 * scalar of quantization_config's activation_scale_ub.  The layers it
 * leaves BF16 (modules_to_not_convert) have no weight_scale, and none.
 */
void plan_set_quant_keys(struct wshard_plan *plan)
{
	const char *method = quant_method(plan);

	plan->has_input_scale_ub = method && !strcmp(method, "fbgemm_fp8");
	if (plan->has_input_scale_ub)
		plan->input_scale_ub = json_number_value(
			json_object_get(plan_quant_config(plan), "activation_scale_ub"));
	plan->quark_w4a16_group = plan_quark_w4a16_group(plan);
	plan->quark_fp8_block = plan_quark_fp8_block(plan);
	plan->quark_mxfp6 = plan_quark_mxfp6(plan);
}

enum wshard_err plan_push_input_ub(const struct wshard_plan *plan,
				   const struct wshard_out_tensor *t,
				   struct wshard_rank_plan *rp, size_t *cap,
				   struct wshard_error *err)
{
	struct wshard_out_tensor s = { .dtype = WSHARD_F32, .ndim = 0 };
	struct wshard_piece p;
	size_t len = strlen(t->name);
	enum wshard_err rc;

	if (!plan->has_input_scale_ub || len < 13 ||
	    strcmp(t->name + len - 13, ".weight_scale") != 0)
		return WSHARD_OK;
	s.name = malloc(len + 4);
	if (!s.name)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	sprintf(s.name, "%.*s.input_scale_ub", (int)(len - 13), t->name);
	p = plan_const_piece(plan->input_scale_ub, WSHARD_F32);
	rc = plan_push_piece(&s, &p, err);
	if (!rc)
		rc = plan_rank_push(rp, cap, &s, err);
	free(s.name);
	free(s.pieces);
	return rc;
}
