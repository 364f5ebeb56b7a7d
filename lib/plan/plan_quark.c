/*
 * plan_quark.c - AMD Quark's quantization_config: which of its schemes
 * vLLM 0.32 holds as wshard writes them (FP8 per tensor, per channel or
 * in blocks, INT8, MXFP4, MXFP6, MXFP8, W4A16 INT4), the INT8 scales and zero
 * points it holds in shapes of its own, the W4A16 tensors and FP8
 * block scales it holds as AWQ's and DeepSeek's (its experts in
 * plan_quark_experts.c).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "plan_impl.h"

/* config.json's quantization_config (an object, or NULL) */
static json_t *quark_config(const struct wshard_plan *plan)
{
	json_t *q = json_object_get(plan->config->json, "quantization_config");

	return json_is_object(q) ? q : NULL;
}

/* Whether Quark quantization spec t (of a config's weight or
 * input_tensors) has one of schemes, dynamic or static as dynamic says
 * (-1: either); quark_spec: and is FP8 E4M3. */
static bool quark_spec_scheme(json_t *t, const char *const *schemes, size_t n, int dynamic)
{
	const char *scheme = json_string_value(json_object_get(t, "qscheme"));
	size_t i;

	if (!scheme || (dynamic >= 0 && json_is_true(json_object_get(t, "is_dynamic")) != dynamic))
		return false;
	for (i = 0; i < n; i++)
		if (!strcmp(scheme, schemes[i]))
			return true;
	return false;
}

static bool quark_spec(json_t *t, const char *const *schemes, size_t n, int dynamic)
{
	const char *dtype = json_string_value(json_object_get(t, "dtype"));

	return dtype && !strcmp(dtype, "fp8_e4m3") && quark_spec_scheme(t, schemes, n, dynamic);
}

/*
 * A Quark config c is vLLM's QuarkOCP_MX with weights of dtype one of
 * dtypes in the canonical OCP MX spelling (quark.py _is_w_ocp_mx_a_x,
 * ocp_mx_utils.py ocp_mx_weight_dtype_and_rows: per_group of 32, e8m0
 * scales, one a row: the 2-D per_block spelling, a scale for several rows
 * that vLLM expands as it loads, is not), X.weight_scale U8 [rows,
 * cols/32]; activations dynamic (no scale to load) or none.  quark_mxfp4:
 * X.weight U8 [rows, cols/2], two values a byte; quark_mxfp6 (fp6_e3m2 or
 * fp6_e2m3): U8 [rows, cols*3/4], four values in three bytes;
 * quark_mxfp8: F8_E4M3 [rows, cols].
 */
static bool quark_mx(json_t *c, const char *const *dtypes, size_t n)
{
	static const char *const group[] = { "per_group" };
	json_t *w = json_object_get(c, "weight"), *in = json_object_get(c, "input_tensors");
	const char *dtype = json_string_value(json_object_get(w, "dtype"));
	const char *scale = json_string_value(json_object_get(w, "scale_format"));
	size_t i;

	for (i = 0; dtype && i < n && strcmp(dtype, dtypes[i]); i++)
		;
	return dtype && i < n && quark_spec_scheme(w, group, 1, 0) &&
	       json_integer_value(json_object_get(w, "group_size")) == 32 && scale &&
	       !strcmp(scale, "e8m0") &&
	       (json_is_null(in) || !in || json_is_true(json_object_get(in, "is_dynamic")));
}

static bool quark_mxfp4(json_t *c)
{
	static const char *const fp4[] = { "fp4" };

	return quark_mx(c, fp4, 1);
}

static bool quark_mxfp6(json_t *c)
{
	static const char *const fp6[] = { "fp6_e3m2", "fp6_e2m3" };

	return quark_mx(c, fp6, 2);
}

static bool quark_mxfp8(json_t *c)
{
	static const char *const fp8[] = { "fp8_e4m3" };

	return quark_mx(c, fp8, 1);
}

/*
 * A Quark config c is one of vLLM's QuarkW8A8Fp8 schemes (quark.py,
 * _is_fp8_w8a8): static FP8 weights per tensor (a scalar weight_scale)
 * or per channel (weight_scale 1-D, a row's scale each: Quark's PTPC
 * export); activations per tensor, static (input_scale) or dynamic, or
 * per token (qscheme per_channel, dynamic).
 */
static bool quark_fp8(json_t *c)
{
	static const char *const weight[] = { "per_tensor", "per_channel" };
	json_t *in = json_object_get(c, "input_tensors");

	return quark_spec(json_object_get(c, "weight"), weight, 2, 0) &&
	       (quark_spec(in, weight, 1, -1) || quark_spec(in, weight + 1, 1, 1));
}

/*
 * A Quark config c is vLLM's QuarkW8A8Fp8PerBlock (quark.py _is_fp8_w8a8,
 * its per_block branch): static symmetric FP8 weights in 128 x 128 blocks,
 * X.weight_scale F32 [ceil(rows/128), ceil(cols/128)] as DeepSeek's
 * X.weight_scale_inv (the same multiplier: quark_w8a8_fp8.py); activations
 * dynamic in symmetric groups of 128.  Its E8M0 scales (scale_type
 * float8_e8m0fnu, a key vLLM's kernels do not take yet) are not.
 */
static bool quark_fp8_block(json_t *c)
{
	static const char *const block[] = { "per_block" }, *const group[] = { "per_group" };
	json_t *w = json_object_get(c, "weight"), *in = json_object_get(c, "input_tensors");
	json_t *bs = json_object_get(w, "block_size");
	const char *scale = json_string_value(json_object_get(w, "scale_type"));

	return quark_spec(w, block, 1, 0) && json_is_true(json_object_get(w, "symmetric")) &&
	       json_array_size(bs) == 2 && json_integer_value(json_array_get(bs, 0)) == 128 &&
	       json_integer_value(json_array_get(bs, 1)) == 128 &&
	       !(scale && !strcmp(scale, "float8_e8m0fnu")) && quark_spec(in, group, 1, 1) &&
	       json_integer_value(json_object_get(in, "group_size")) == 128 &&
	       json_is_true(json_object_get(in, "symmetric"));
}

/*
 * A Quark config c is vLLM's QuarkW8A8Int8 (quark.py _is_w8a8_int8):
 * static symmetric INT8 weights per tensor or per channel, X.weight I8
 * with X.weight_scale and X.weight_zero_point (I8) a fused part or a row,
 * as the FP8 scales are; INT8 activations static per tensor (X.input_scale
 * and X.input_zero_point, one each) or dynamic per token (qscheme
 * per_channel), symmetric or not.
 */
static bool quark_int8(json_t *c)
{
	static const char *const scheme[] = { "per_tensor", "per_channel" };
	json_t *w = json_object_get(c, "weight"), *in = json_object_get(c, "input_tensors");
	const char *wt = json_string_value(json_object_get(w, "dtype"));
	const char *it = json_string_value(json_object_get(in, "dtype"));

	return wt && !strcmp(wt, "int8") && it && !strcmp(it, "int8") &&
	       json_is_true(json_object_get(w, "symmetric")) &&
	       quark_spec_scheme(w, scheme, 2, 0) &&
	       (quark_spec_scheme(in, scheme, 1, 0) || quark_spec_scheme(in, scheme + 1, 1, 1));
}

/*
 * A Quark config c of quantization_config q is vLLM's QuarkW4A16Int4
 * (quark.py _is_w4a16_int4, utils.py parse_w4a16_int4_weight_config):
 * int4 or uint4 weights in groups (a positive group_size, a boolean
 * symmetric), no activation quantization, q's export.pack_method "order"
 * or "reorder".  X.weight I32 [in, out/8], X.weight_scale [in/group, out],
 * X.weight_zero_point I32 [in/group, out/8]: AWQ's qweight, scales and
 * qzeros under Quark's names (the nibbles vLLM reorders after loading).
 */
static bool quark_w4a16(json_t *c, json_t *q)
{
	json_t *w = json_object_get(c, "weight"), *in = json_object_get(c, "input_tensors");
	json_t *g = json_object_get(w, "group_size");
	const char *dtype = json_string_value(json_object_get(w, "dtype"));
	const char *pack = json_string_value(json_object_get(json_object_get(q, "export"),
							     "pack_method"));

	return dtype && (!strcmp(dtype, "int4") || !strcmp(dtype, "uint4")) &&
	       (!in || json_is_null(in)) && json_is_integer(g) && json_integer_value(g) > 0 &&
	       json_is_boolean(json_object_get(w, "symmetric")) && pack &&
	       (!strcmp(pack, "order") || !strcmp(pack, "reorder"));
}

uint64_t plan_quark_w4a16_div(uint64_t group, uint64_t share, uint64_t hidden)
{
	uint64_t g = group, f = 1;

	/* quark_moe.py QuarkW4A16Int4MoEMethod.create_weights */
	while (share % g || hidden % g) {
		g /= 2;
		f *= 2;
		if (g < 32)	/* its assert group_size >= 32 */
			return 0;
	}
	return g * f == group && f <= UINT8_MAX ? f : 0;
}

/* Whether the checkpoint is Quark's (quant_method quark). */
bool plan_quark_method(const struct wshard_plan *plan)
{
	const char *method = json_string_value(json_object_get(quark_config(plan),
							       "quant_method"));

	return method && !strcmp(method, "quark");
}

long long plan_quark_w4a16_group(const struct wshard_plan *plan)
{
	json_t *q = quark_config(plan), *g = json_object_get(q, "global_quant_config");

	if (!plan_quark_method(plan) || !quark_w4a16(g, q))
		return 0;
	return json_integer_value(json_object_get(json_object_get(g, "weight"), "group_size"));
}

/* Whether any config of the checkpoint's Quark quantization_config is one
 * that is(config) takes. */
static bool quark_any(const struct wshard_plan *plan, bool (*is)(json_t *))
{
	static const char *const keys[] = { "layer_quant_config", "layer_type_quant_config" };
	json_t *q = quark_config(plan), *v;
	const char *key;
	size_t k;

	if (!plan_quark_method(plan))
		return false;
	if (is(json_object_get(q, "global_quant_config")))
		return true;
	for (k = 0; k < 2; k++)
		json_object_foreach(json_object_get(q, keys[k]), key, v)
			if (is(v))
				return true;
	return false;
}

bool plan_quark_fp8_block(const struct wshard_plan *plan)
{
	return quark_any(plan, quark_fp8_block);
}

bool plan_quark_mxfp6(const struct wshard_plan *plan)
{
	return quark_any(plan, quark_mxfp6);
}

/* Quark's W4A16 names and AWQ's, which the rules' derived [in, out] rules
 * match (rules_scale.c) */
static const char *const w4_names[][2] = {
	{ ".weight", ".qweight" },
	{ ".weight_scale", ".scales" },
	{ ".weight_zero_point", ".qzeros" },
};

/*
 * Whether name is X<suffix> beside a weight X.weight of dtype in the
 * checkpoint; *stem gets X's length.
 */
static bool weight_beside(const struct wshard_plan *plan, const char *name, const char *suffix,
			  enum wshard_dtype dtype, size_t *stem)
{
	const struct wshard_src_tensor *w;
	size_t len = strlen(name), sl = strlen(suffix);
	char wname[1024];

	if (len <= sl || strcmp(name + len - sl, suffix) || len - sl + 8 > sizeof(wname))
		return false;
	snprintf(wname, sizeof(wname), "%.*s.weight", (int)(len - sl), name);
	w = wshard_catalog_find(plan->cat, wname);
	*stem = len - sl;
	return w && w->info->dtype == dtype;
}

const char *plan_quark_as(const struct wshard_plan *plan, const char *name, char *buf,
			  size_t size)
{
	size_t k, stem;

	if (plan->quark_fp8_block && weight_beside(plan, name, ".weight_scale", WSHARD_F8_E4M3,
						   &stem)) {
		const struct wshard_src_tensor *s = wshard_catalog_find(plan->cat, name);

		/* a 2-D scale is the blocks' (a per-channel one is 1-D) */
		if (!s || s->info->ndim != 2 || stem + 18 > size)
			return name;
		snprintf(buf, size, "%.*s.weight_scale_inv", (int)stem, name);
		return buf;
	}
	if (!plan->quark_w4a16_group)
		return name;
	for (k = 0; k < 3; k++)
		if (weight_beside(plan, name, w4_names[k][0], WSHARD_I32, &stem)) {
			if (stem + strlen(w4_names[k][1]) + 1 > size)
				return name;
			snprintf(buf, size, "%.*s%s", (int)stem, name, w4_names[k][1]);
			return buf;
		}
	return name;
}

char *plan_quark_out(const struct wshard_plan *plan, char *out)
{
	size_t len = strlen(out), k, sl;
	char *o;

	/* X.weight_scale_inv, w13_weight_scale_inv: Quark's X.weight_scale */
	if (plan->quark_fp8_block && len > 16 && !strcmp(out + len - 16, "weight_scale_inv")) {
		out[len - 4] = '\0';
		return out;
	}
	if (!plan->quark_w4a16_group)
		return out;
	for (k = 0; k < 3; k++) {
		sl = strlen(w4_names[k][1]);
		if (len <= sl || strcmp(out + len - sl, w4_names[k][1]))
			continue;
		o = realloc(out, len - sl + strlen(w4_names[k][0]) + 1);
		if (o)
			strcpy(o + len - sl, w4_names[k][0]);
		else
			free(out);
		return o;
	}
	return out;
}

/* Whether name is X<suffix> beside Quark's INT8 weight X.weight (I8). */
static bool quark_int8_beside(const struct wshard_plan *plan, const char *name,
			      const char *suffix)
{
	size_t stem;

	return plan_quark_method(plan) && weight_beside(plan, name, suffix, WSHARD_I8, &stem);
}

bool plan_one_input_scale(const struct wshard_plan *plan, const struct member *m)
{
	const char *name = src_name(plan, m->src);

	return !strstr(m->rule->match, "{e}") &&
	       (quark_int8_beside(plan, name, ".input_scale") ||
		quark_int8_beside(plan, name, ".input_zero_point"));
}

bool plan_int8_channel(const struct wshard_plan *plan, const struct member *m)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);

	return t->ndim == 1 && t->shape[0] > 1 && !strstr(m->rule->match, "{e}") &&
	       (quark_int8_beside(plan, t->name, ".weight_scale") ||
		quark_int8_beside(plan, t->name, ".weight_zero_point"));
}

enum wshard_err plan_check_quark_experts(const struct wshard_plan *plan, const struct member *m,
					 struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	const struct wshard_src_tensor *s;
	size_t len = strlen(t->name);
	char scale[1024];

	if (!plan_quark_method(plan) || !strstr(m->rule->match, "{e}") || len <= 7 ||
	    strcmp(t->name + len - 7, ".weight") || len + 7 > sizeof(scale))
		return WSHARD_OK;
	/* MXFP8 (an FP8 weight with E8M0 scales a group of 32): vLLM's OCP MX
	 * MoE method takes none ("MXFP8 experts are not supported through the
	 * MoE path", quark_moe.py) */
	snprintf(scale, sizeof(scale), "%s_scale", t->name);
	s = wshard_catalog_find(plan->cat, scale);
	if (t->dtype == WSHARD_F8_E4M3 && s && s->info->dtype == WSHARD_U8)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': Quark's MXFP8 experts are not supported (vLLM 0.32 loads MXFP8 in linear layers only)",
					t->name);
	/* MXFP6 experts (QuarkOCP_MX_MoEMethod's): not checked against vLLM */
	if (t->dtype == WSHARD_U8 && plan->quark_mxfp6)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': Quark's MXFP6 experts are not supported yet",
					t->name);
	/*
	 * INT8 (QuarkW8A8Int8MoEMethod): the weights, scales and zero points
	 * as FP8's per-tensor or per-channel experts (rules_scale.c), with
	 * w13_input_zero_point [E, 2] and w2_input_zero_point [E] beside
	 * them whatever the activations: the checkpoint's where static,
	 * zeros where dynamic (plan_quark_input_zeros)
	 */
	if (t->dtype == WSHARD_I8)
		return WSHARD_OK;
	/*
	 * W4A16 (QuarkW4A16Int4MoEMethod): planned as AWQ's experts, then
	 * repacked as its weight loader repacks them (plan_quark_w4a16_experts).
	 * Its create_weights halves the group size while the intermediate
	 * rows a rank or the hidden size is no multiple of it, repeating each
	 * scale and zero point (group_size_div_factor, written so): refused
	 * where it cannot (plan_quark_w4a16_div 0, an AssertionError in vLLM),
	 * where the checkpoint's groups are not whole, and at a cut through a
	 * word of eight outputs.  m: a gate or up projection's [hidden,
	 * inter/8] words (fused into w13), or a down projection's [inter,
	 * hidden/8].
	 */
	if (t->dtype != WSHARD_I32 || t->ndim != 2 || !plan->quark_w4a16_group)
		return WSHARD_OK;
	/*
	 * Under expert parallelism vLLM 0.32 loads none: its weight loader
	 * stores each zero point at the global expert index
	 * (param.data[expert_id] before RoutedExperts.weight_loader maps it
	 * to the rank's own), an IndexError past a rank's experts.
	 */
	if (plan->opt.expert_parallel)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': Quark's W4A16 experts under --expert-parallel: vLLM 0.32 cannot load them (QuarkW4A16Int4MoEMethod's weight loader stores each zero point at the global expert index, past a rank's own experts)",
					t->name);
	{
		bool w13 = m->rule->kind == RULE_FUSE;
		uint64_t hidden = w13 ? t->shape[0] : t->shape[1] * 8;
		uint64_t inter = w13 ? t->shape[1] * 8 : t->shape[0];
		uint64_t tp = (uint64_t)plan->tp;
		uint64_t share = inter / tp, group = (uint64_t)plan->quark_w4a16_group;

		if (inter % tp == 0 && share % 8 == 0 && inter % group == 0 && hidden % group == 0 &&
		    plan_quark_w4a16_div(group, share, hidden))
			return WSHARD_OK;
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': Quark's W4A16 experts of hidden size %llu and %llu intermediate rows a rank (tp %llu) cut a word of 8 or a group of %llu that vLLM's QuarkW4A16Int4MoEMethod cannot halve (its create_weights asserts groups of 32 or more)",
					t->name, (unsigned long long)hidden, (unsigned long long)share,
					(unsigned long long)tp, (unsigned long long)group);
	}
}

/*
 * Quark (AMD's -FP8-KV, PTPC and -MXFP4 releases): vLLM's QuarkW8A8Fp8
 * (quark_fp8 above: X.weight_scale, one F32 a fused part or a row, and
 * where static X.input_scale, one F32 a part), QuarkW8A8Fp8PerBlock
 * (quark_fp8_block: X.weight_scale cut as DeepSeek's block scales),
 * QuarkOCP_MX's MXFP8 (quark_mxfp8: X.weight_scale cut as a group
 * scale), QuarkW8A8Int8 (quark_int8: the same with I8 zero points,
 * per-channel ones [rows, 1], one input scale a layer; its experts as
 * FP8's with zero points beside, zeros where dynamic activations leave
 * the checkpoint none (plan_quark_input_zeros); MXFP8's experts refused
 * by plan_check_quark_experts),
 * QuarkOCP_MX's MXFP4 (quark_mxfp4: cut as ModelOpt's NVFP4 weights and
 * their group scales) and MXFP6 (quark_mxfp6: the same, three bytes for
 * four values; its experts refused), QuarkW4A16Int4 (quark_w4a16: cut as AWQ's, every
 * config of it, with one group size; its experts, QuarkW4A16Int4MoEMethod,
 * repacked as its weight loader repacks them: plan_quark_w4a16_experts)
 * and QuarkKVCacheMethod's k_scale and
 * v_scale from k_proj's and v_proj's output scales.  Every config
 * (global_quant_config, each of layer_quant_config and
 * layer_type_quant_config) must be one of these: Quark's MXFP8 in 2-D
 * blocks and NVFP4 schemes, FP8 blocks with E8M0 scales, and INT8
 * with asymmetric weights, hold other parameters, not checked against
 * vLLM, and are refused.
 */
static bool quark_ok(json_t *c, json_t *q, bool w4, long long group)
{
	if (w4)
		return quark_w4a16(c, q) &&
		       json_integer_value(json_object_get(json_object_get(c, "weight"),
							  "group_size")) == group;
	return quark_fp8(c) || quark_fp8_block(c) || quark_mxfp4(c) || quark_mxfp6(c) ||
	       quark_mxfp8(c) || quark_int8(c);
}

/*
 * vLLM's QuarkW4A16Int4 holds X.weight_scale and X.weight_zero_point
 * beside every W4A16 weight (the zero points of a symmetric one unused,
 * zeros where the checkpoint has none, which its sharded_state loader
 * would find missing): a weight without either is refused, naming it.
 */
static enum wshard_err check_w4a16_tensors(const struct wshard_plan *plan,
					   struct wshard_error *err)
{
	static const char *const beside[] = { ".weight_scale", ".weight_zero_point" };
	char name[1024];
	size_t i, len, k;

	for (i = 0; i < plan->cat->ntensors; i++) {
		const char *w = plan->cat->tensors[i].name;

		len = strlen(w);
		if (plan->cat->tensors[i].info->dtype != WSHARD_I32 || len < 7 ||
		    strcmp(w + len - 7, ".weight") || len + 12 > sizeof(name))
			continue;
		for (k = 0; k < 2; k++) {
			snprintf(name, sizeof(name), "%.*s%s", (int)(len - 7), w, beside[k]);
			if (!wshard_catalog_find(plan->cat, name))
				return wshard_error_set(err, WSHARD_EINVAL,
							"tensor '%s': Quark's W4A16 weight without its '%s', which vLLM holds beside it",
							w, name);
		}
	}
	return WSHARD_OK;
}

enum wshard_err plan_check_quark(const struct wshard_plan *plan, struct wshard_error *err)
{
	static const char *const keys[] = { "layer_quant_config", "layer_type_quant_config" };
	json_t *q = quark_config(plan), *v;
	json_t *g = json_object_get(q, "global_quant_config");
	long long group = plan_quark_w4a16_group(plan);
	const char *where = quark_ok(g, q, group > 0, group) ? NULL : "global_quant_config";
	const char *key = "";
	size_t k;

	for (k = 0; k < 2 && !where; k++)
		json_object_foreach(json_object_get(q, keys[k]), key, v)
			if (!quark_ok(v, q, group > 0, group)) {
				where = keys[k];
				break;
			}
	if (!where)
		return group > 0 ? check_w4a16_tensors(plan, err) : WSHARD_OK;
	return wshard_error_set(err, WSHARD_EINVAL,
				"'%s': quantization_config.%s%s%s: only Quark's static FP8 weights per tensor or per channel, with FP8 activations per tensor or per token (dtype fp8_e4m3; qscheme per_tensor or per_channel), its FP8 weights in 128 x 128 blocks with float scales and dynamic FP8 activations in groups of 128 (qscheme per_block, per_group), its static symmetric INT8 weights per tensor or per channel, with INT8 activations static per tensor or dynamic per token (dtype int8), its MXFP4, MXFP6 and MXFP8 weights (dtype fp4, fp6_e3m2, fp6_e2m3 or fp8_e4m3, per_group of 32, scale_format e8m0; activations dynamic or none) and its W4A16 weights (dtype int4 or uint4 in groups, export pack_method order or reorder, no activation quantization, every config alike) are supported yet",
				plan->cat->path, where, *key ? "." : "", key);
}
