/*
 * plan_extra.c - the constant tensors a rules document's "extra" list adds
 * (vLLM's attention scales, an image processor's normalisation, a quantized
 * checkpoint's KV-cache placeholders), which no source tensor holds.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/error.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/expr.h"
#include "rules/rules.h"
#include "plan_impl.h"

enum wshard_dtype plan_model_dtype(const struct wshard_plan *plan)
{
	struct wshard_catalog_info info;

	if (plan->opt.has_dtype)
		return plan->opt.dtype;
	wshard_catalog_info(plan->cat, &info);
	if (info.torch_dtype && !strcmp(info.torch_dtype, "float16"))
		return WSHARD_F16;
	if (info.torch_dtype && !strcmp(info.torch_dtype, "float32"))
		return WSHARD_F32;
	return WSHARD_BF16;
}

enum wshard_err plan_head_dtype(const struct wshard_plan *plan, enum wshard_dtype *dtype,
			       struct wshard_error *err)
{
	static const struct {
		const char *name;
		enum wshard_dtype dtype;
	} names[] = {
		{ "float32", WSHARD_F32 }, { "float", WSHARD_F32 }, { "float16", WSHARD_F16 },
		{ "half", WSHARD_F16 }, { "bfloat16", WSHARD_BF16 },
	};
	json_t *h = json_object_get(plan->config->json, "head_dtype");
	const char *s = json_string_value(h);
	size_t i;

	*dtype = WSHARD_F32;
	if (!h || json_is_null(h))
		return WSHARD_OK;
	if (s && !strcmp(s, "model")) {
		*dtype = plan_model_dtype(plan);
		return WSHARD_OK;
	}
	for (i = 0; s && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(s, names[i].name)) {
			*dtype = names[i].dtype;
			return WSHARD_OK;
		}
	return wshard_error_set(err, WSHARD_EINVAL,
				"'%s': config.json's head_dtype is not one vLLM takes (model, float32, float16 or bfloat16)",
				plan->cat->path);
}

/* Appends the constant tensor name, in dtype, to every rank: a scalar
 * (vector false, n 1) or the vector of the n values. */
static enum wshard_err push_const(struct wshard_plan *plan, const double *vals, size_t n,
				  bool vector, enum wshard_dtype dtype, const char *name,
				  size_t *caps, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	size_t i;
	int r;

	for (r = 0; r < plan->tp && !rc; r++) {
		struct wshard_out_tensor t = { .dtype = dtype, .ndim = vector, .shape = { n } };

		t.name = strdup(name);
		if (!t.name)
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		for (i = 0; i < n && !rc; i++) {
			struct wshard_piece p = plan_const_piece(vals[i], dtype);

			rc = plan_push_piece(&t, &p, err);
		}
		if (!rc)
			rc = plan_rank_push(&plan->ranks[r], &caps[r], &t, err);
		free(t.name);
		free(t.pieces);
	}
	return rc;
}

/* Appends the tensor proto (its dtype and shape) named name, made of the
 * one piece p, to every rank. */
static enum wshard_err push_one_piece(struct wshard_plan *plan, const struct wshard_out_tensor *proto,
				      const char *name, const struct wshard_piece *p, size_t *caps,
				      struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int r;

	for (r = 0; r < plan->tp && !rc; r++) {
		struct wshard_out_tensor t = *proto;

		t.name = strdup(name);
		rc = t.name ? plan_push_piece(&t, p, err)
			    : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		if (!rc)
			rc = plan_rank_push(&plan->ranks[r], &caps[r], &t, err);
		free(t.name);
		free(t.pieces);
	}
	return rc;
}

/* Appends the vector name of n copies of value in dtype to every rank:
 * one CONST piece its whole length (an extra's "len"). */
static enum wshard_err push_fill(struct wshard_plan *plan, double value, int64_t n,
				 enum wshard_dtype dtype, const char *name, size_t *caps,
				 struct wshard_error *err)
{
	struct wshard_out_tensor t = { .dtype = dtype, .ndim = 1, .shape = { (uint64_t)n } };
	struct wshard_piece p = plan_const_piece(value, dtype);

	p.len = (uint64_t)n * p.value_len;
	return push_one_piece(plan, &t, name, &p, caps, err);
}

/* Appends extra e's "arange" tensor, I64 [1, n] of 0 .. n - 1, to every rank. */
static enum wshard_err push_arange(struct wshard_plan *plan, const struct rules_extra *e,
				   size_t *caps, struct wshard_error *err)
{
	const struct rules_capture top = { .n = -1, .e = -1, .i = -1 };
	struct wshard_out_tensor t = { .dtype = WSHARD_I64, .ndim = 2 };
	struct wshard_piece p = { .kind = WSHARD_PIECE_ARANGE, .value_len = 8 };
	enum wshard_err rc;
	char *name;
	int64_t n;

	rc = expr_eval_dim(plan->config, e->arange, e->name, &n, err);
	if (!rc && (n < 1 || n > 1 << 24))
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "extra '%s': \"arange\" %s is %lld, not 1 to 2^24",
				      e->name, e->arange, (long long)n);
	if (rc)
		return rc;
	t.shape[0] = 1;
	t.shape[1] = (uint64_t)n;
	p.len = (uint64_t)n * 8;
	name = plan_output_name(plan, e->name, &top);
	rc = name ? push_one_piece(plan, &t, name, &p, caps, err)
		  : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	free(name);
	return rc;
}

/*
 * Appends extra e's "sinusoid" tensor, F32 [positions, channels] (Whisper's
 * position table; stream.c computes it), to every rank.  transformers'
 * sinusoids refuses odd channels and divides by channels / 2 - 1.
 */
static enum wshard_err push_sinusoid(struct wshard_plan *plan, const struct rules_extra *e,
				     size_t *caps, struct wshard_error *err)
{
	const struct rules_capture top = { .n = -1, .e = -1, .i = -1 };
	struct wshard_out_tensor t = { .dtype = WSHARD_F32, .ndim = 2 };
	struct wshard_piece p = { .kind = WSHARD_PIECE_SINUSOID, .value_len = 4 };
	enum wshard_err rc;
	char *name;
	int64_t n, c;

	rc = expr_eval_dim(plan->config, e->sinusoid[0], e->name, &n, err);
	if (!rc)
		rc = expr_eval_dim(plan->config, e->sinusoid[1], e->name, &c, err);
	if (!rc && (n < 1 || n > 1 << 24 || c < 4 || c > 1 << 20 || c % 2))
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "extra '%s': \"sinusoid\" is [%lld, %lld], not 1 to 2^24 positions of an even 4 to 2^20 channels",
				      e->name, (long long)n, (long long)c);
	if (rc)
		return rc;
	t.shape[0] = (uint64_t)n;
	t.shape[1] = (uint64_t)c;
	p.len = (uint64_t)n * (uint64_t)c * 4;
	p.prov_value = (double)c;
	name = plan_output_name(plan, e->name, &top);
	rc = name ? push_one_piece(plan, &t, name, &p, caps, err)
		  : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	free(name);
	return rc;
}

const struct wshard_src_tensor *plan_source_named(const struct wshard_plan *plan,
						   const struct wshard_rules *rules,
						   const char *name)
{
	const struct wshard_src_tensor *t = wshard_catalog_find(plan->cat, name);
	char buf[RULES_NAME_MAX];
	size_t i, n;

	for (i = 0; !t && i < rules->nsrc_renames; i++) {
		size_t nf = strlen(rules->src_from[i]), nr;

		n = strlen(rules->src_to[i]);
		/* the prefix first: a shorter name has no byte past its end */
		if (strncmp(name, rules->src_to[i], n) != 0)
			continue;
		nr = strlen(name + n);
		if (nf + nr >= sizeof(buf))
			continue;
		memcpy(buf, rules->src_from[i], nf);
		memcpy(buf + nf, name + n, nr + 1);
		t = wshard_catalog_find(plan->cat, buf);
	}
	n = rules->source_prefix ? strlen(rules->source_prefix) : 0;
	if (!t && n && strncmp(name, rules->source_prefix, n) == 0)
		t = wshard_catalog_find(plan->cat, name + n);
	return t;
}

/* Whether extra e belongs in layer cap->n: its "with" tensor is there. */
static bool layer_has(const struct wshard_plan *plan, const struct wshard_rules *rules,
		      const struct rules_extra *e, const struct rules_capture *cap)
{
	char *with;
	bool has;

	if (!e->with)
		return true;
	with = rules_expand(e->with, cap);
	/* out of memory: kept, as without "with" */
	has = !with || plan_source_named(plan, rules, with) != NULL;
	free(with);
	return has;
}

static int by_layer_index(const void *a, const void *b)
{
	const struct rules_capture *x = a, *y = b;

	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* Sites *out (*n of them, one per layer or one without) made one per
 * {i} of extra e's "each" for which its condition holds. */
static enum wshard_err each_sites(const struct wshard_plan *plan, const struct rules_extra *e,
				  struct rules_capture **out, size_t *n, struct wshard_error *err)
{
	struct rules_capture *sites = NULL;
	size_t m = 0, s;
	int64_t count, i;
	enum wshard_err rc;

	rc = expr_eval_dim(plan->config, e->each_count, e->name, &count, err);
	if (!rc && (count < 0 || count > 1 << 20))
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "extra '%s': \"each\" count %s is %lld, not 0 to 2^20",
				      e->name, e->each_count, (long long)count);
	if (!rc && count && *n)
		sites = calloc(*n * (size_t)count, sizeof(*sites));
	if (!rc && count && *n && !sites)
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (s = 0; s < *n && !rc; s++) {
		for (i = 0; i < count && !rc; i++) {
			bool ok = true;

			if (e->each_if)
				rc = expr_eval_cond(plan->config, e->each_if, (*out)[s].n, (long)i,
						    e->name, &ok, err);
			if (ok && !rc) {
				sites[m] = (*out)[s];
				sites[m++].i = (long)i;
			}
		}
	}
	free(*out);
	*out = sites;
	*n = rc ? 0 : m;
	return rc;
}

/*
 * Where extra e is written, into *out (malloc'd, *out_n entries): once
 * without {n}; in each layer 0 .. maxn that holds its "with" tensor; with
 * {i}, once for each {i} of a source tensor "with" matches in the layer
 * (Zamba2's shared blocks: an attention layer in vLLM where the block has
 * an adapter, under the same index).
 */
static enum wshard_err extra_sites(const struct wshard_plan *plan,
				   const struct wshard_rules *rules, const struct rules_extra *e,
				   long maxn, struct rules_capture **out, size_t *out_n,
				   struct wshard_error *err)
{
	bool per_layer = strstr(e->name, "{n}") != NULL;
	bool indexed = strstr(e->name, "{i}") != NULL && !e->each_count;
	size_t n = 0, cap = indexed ? plan->cat->ntensors : (size_t)maxn + 1, t;
	struct rules_capture *sites = calloc(cap ? cap : 1, sizeof(*sites));
	long layer;

	if (!sites)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	*out = sites;
	*out_n = 0;
	if (!per_layer) {
		bool holds = true;

		/* a name without {n}: once, where its condition (of config keys
		 * alone) holds */
		if (e->cond) {
			enum wshard_err rc = expr_eval_cond(plan->config, e->cond, -1, -1,
							    e->name, &holds, err);

			if (rc)
				return rc;
		}
		if (holds)
			sites[n++] = (struct rules_capture){ .n = -1, .e = -1, .i = -1 };
	}
	for (layer = 0; per_layer && !indexed && layer <= maxn; layer++) {
		struct rules_capture c = { .n = layer, .e = -1, .i = -1 };
		bool holds = true;

		if (e->cond) {
			enum wshard_err rc = expr_eval_cond(plan->config, e->cond, layer, -1,
							    e->name, &holds, err);

			if (rc)
				return rc;
		}
		if (holds && layer_has(plan, rules, e, &c))
			sites[n++] = c;
	}
	for (t = 0; per_layer && indexed && t < plan->cat->ntensors; t++) {
		struct rules_capture c;
		char buf[RULES_NAME_MAX];

		if (rules_match(e->with, rules_source_name(rules, plan->cat->tensors[t].name, buf),
				&c) &&
		    c.n >= 0 && c.n <= maxn)
			sites[n++] = c;
	}
	if (indexed)
		qsort(sites, n, sizeof(*sites), by_layer_index);
	*out_n = n;
	return e->each_count ? each_sites(plan, e, out, out_n, err) : WSHARD_OK;
}

/*
 * The checkpoint's own value of a "when": "quantized" extra P.attn.k_scale
 * (v, q, prob): the source vLLM's cache-scale mapper (Quark's and FP8's
 * get_cache_scale_mapper) renames to it, P.k_proj.output_scale (v_proj's,
 * q_proj's; P.prob_output_scale), a single element.  Its catalog index,
 * or -1 where the checkpoint has none (vLLM keeps its -1.0).
 */
static long kv_source(const struct wshard_plan *plan, const struct wshard_rules *rules,
		      const char *name)
{
	static const char *const kinds[][2] = {
		{ ".attn.k_scale", ".k_proj.output_scale" },
		{ ".attn.v_scale", ".v_proj.output_scale" },
		{ ".attn.q_scale", ".q_proj.output_scale" },
		{ ".attn.prob_scale", ".prob_output_scale" },
	};
	const struct wshard_src_tensor *t = NULL;
	size_t len = strlen(name), i, k;
	char src[RULES_NAME_MAX];

	for (i = 0; i < 4 && !t; i++) {
		k = strlen(kinds[i][0]);
		if (len > k && !strcmp(name + len - k, kinds[i][0]) &&
		    len - k + strlen(kinds[i][1]) < sizeof(src)) {
			snprintf(src, sizeof(src), "%.*s%s", (int)(len - k), name, kinds[i][1]);
			t = plan_source_named(plan, rules, src);
		}
	}
	if (!t || (t->info->end - t->info->begin) * 8 != (uint64_t)wshard_dtype_bits(t->info->dtype))
		return -1;
	return wshard_catalog_index(plan->cat, t->name);
}

/* Every rank's scalar name in dtype, copied from source tensor src (one
 * element), as vLLM's KVCacheScaleParameter loads it. */
static enum wshard_err push_source(struct wshard_plan *plan, long src, enum wshard_dtype dtype,
				   const char *name, size_t *caps, struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;
	int r;

	for (r = 0; r < plan->tp && !rc; r++) {
		struct wshard_out_tensor t = { .dtype = src_info(plan, (uint32_t)src)->dtype };

		t.name = strdup(name);
		rc = t.name ? plan_push_rows(plan, &t, (uint32_t)src, 0, 1, err)
			    : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		if (!rc && t.dtype != dtype)
			plan_convert_dtype(dtype, &t, false);
		if (!rc)
			rc = plan_rank_push(&plan->ranks[r], &caps[r], &t, err);
		free(t.name);
		free(t.pieces);
	}
	return rc;
}

/* compressed-tensors' pair for a "when": "quantized" extra X.k_scale (and
 * v, q; its prob_scale has none), in every layer. */
static enum wshard_err push_ct_kv(struct wshard_plan *plan, const struct wshard_rules *rules,
				  const struct rules_extra *e, long maxn, size_t *caps,
				  struct wshard_error *err)
{
	static const char *const kinds[] = { ".k_scale", ".v_scale", ".q_scale" };
	size_t len = strlen(e->name), i;
	double one = 1.0, zero = 0.0;
	enum wshard_err rc = WSHARD_OK;
	struct rules_capture *sites = NULL;
	size_t nsites = 0, s;

	for (i = 0; i < 3; i++)
		if (len > 8 && !strcmp(e->name + len - 8, kinds[i]))
			break;
	if (i == 3)
		return WSHARD_OK;
	rc = extra_sites(plan, rules, e, maxn, &sites, &nsites, err);
	for (s = 0; s < nsites && !rc; s++) {
		char *name = plan_output_name(plan, e->name, &sites[s]), *zp;

		zp = name ? malloc(strlen(name) + 6) : NULL;
		if (!zp) {
			free(name);
			free(sites);
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		}
		/* the checkpoint's own scale: vLLM's compressed-tensors KV-cache
		 * method loads it in a layout no engine case has checked */
		if (kv_source(plan, rules, name) >= 0) {
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "'%s': compressed-tensors' KV-cache scales from the checkpoint ('%s') are not supported yet",
					      plan->cat->path, name);
			free(name);
			free(zp);
			break;
		}
		/* "X.k_scale" -> "X.k_zero_point" */
		sprintf(zp, "%.*s_zero_point", (int)(strlen(name) - 6), name);
		rc = push_const(plan, &one, 1, true, WSHARD_F32, name, caps, err);
		if (!rc)
			rc = push_const(plan, &zero, 1, true, plan_model_dtype(plan), zp, caps, err);
		free(name);
		free(zp);
	}
	free(sites);
	return rc;
}

/* Whether extra e's "if" fails for every layer number in a run past any
 * model's (as plan_bounds_layers for a rule): its condition bounds its
 * layers, as an MTP draft's "n >= num_hidden_layers && n <
 * num_hidden_layers + num_nextn_predict_layers" does.  A condition that
 * cannot be read there (an array indexed by n) bounds nothing. */
static bool extra_bounds_layers(const struct wshard_plan *plan, const struct rules_extra *e)
{
	struct wshard_error err;
	bool holds = true;
	long n;

	if (!e->cond)
		return false;
	wshard_error_clear(&err);
	for (n = PLAN_MAX_LAYERS - 1; n >= PLAN_MAX_LAYERS - 64; n--)
		if (expr_eval_cond(plan->config, e->cond, n, -1, e->name, &holds, &err) || holds)
			return false;
	return true;
}

/* The constant tensors of the rules' "extra" list, one per layer seen. */
enum wshard_err plan_build_extras(struct wshard_plan *plan, const struct wshard_rules *rules,
				  long nlayers, long written, size_t *caps,
				  struct wshard_error *err)
{
	size_t x;

	for (x = 0; x < rules->nextras; x++) {
		const struct rules_extra *e = &rules->extras[x];
		/* every layer 0 .. nlayers - 1 was checked; an extra whose "if"
		 * bounds its layers also in the layers written past them (by a
		 * rule bounding its own: an MTP draft's, num_hidden_layers on),
		 * where its condition holds */
		long maxn = written >= nlayers && extra_bounds_layers(plan, e) ? written
									: nlayers - 1;
		struct rules_capture *sites = NULL;
		size_t nsites = 0, s;
		enum wshard_dtype dtype = e->model_dtype ? plan_model_dtype(plan) : e->dtype;
		double vals[WSHARD_IMAGE_NORM_MAX] = { e->value };
		size_t nvals = 1;
		enum wshard_err rc = WSHARD_OK;
		int64_t len = 0;

		if (e->option && strcmp(e->option, "attn_scales") == 0 && !plan->opt.attn_scales)
			continue;
		if (e->arange || e->sinusoid[0]) {
			rc = e->arange ? push_arange(plan, e, caps, err)
				       : push_sinusoid(plan, e, caps, err);
			if (rc)
				return rc;
			continue;
		}
		if (e->when_quantized) {
			switch (plan_kv_cache_method(plan)) {
			case KV_NONE:
				continue;
			case KV_COMPRESSED:
				rc = push_ct_kv(plan, rules, e, maxn, caps, err);
				if (rc)
					return rc;
				continue;
			case KV_BASE:
				break;
			}
		}
		if (e->len) {
			rc = expr_eval_dim(plan->config, e->len, e->name, &len, err);
			if (!rc && (len < 1 || len > 1 << 24))
				rc = wshard_error_set(err, WSHARD_EINVAL,
						      "extra '%s': \"len\" %s is %lld, not 1 to 2^24",
						      e->name, e->len, (long long)len);
		}
		if (e->image_norm)
			rc = plan_image_norm(plan->cat, e->image_norm, vals, &nvals, err);
		if (rc)
			return rc;
		/* nvals 0: an identity image_norm, of which vLLM holds nothing */
		if (nvals)
			rc = extra_sites(plan, rules, e, maxn, &sites, &nsites, err);
		for (s = 0; s < nsites && !rc; s++) {
			char *name = plan_output_name(plan, e->name, &sites[s]);
			long src = name && e->when_quantized ? kv_source(plan, rules, name) : -1;

			rc = !name ? wshard_error_set(err, WSHARD_ENOMEM, "out of memory")
			     : src >= 0 ? push_source(plan, src, dtype, name, caps, err)
			     : len ? push_fill(plan, e->value, len, dtype, name, caps, err)
			     : push_const(plan, vals, nvals, e->image_norm, dtype, name, caps, err);
			free(name);
		}
		free(sites);
		if (rc)
			return rc;
	}
	return WSHARD_OK;
}
