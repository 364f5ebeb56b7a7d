/*
 * plan_build.c - the whole conversion as data: for every rank, the output
 * tensors (name, dtype, shape, file, offsets) and for each the ordered
 * copy pieces that make it.  A function of the catalog, the rules and the
 * options (and of a few small tensors' bytes: a head shipped beside a tie,
 * a "zero_mean" vector); every error (uncovered tensor, indivisible split,
 * shape against config.json) is found here, before any byte is written.
 * This file checks the options, groups the matched sources by output
 * (plan_match.c matches them), has each item cut for every rank
 * (plan_split.c) and its values set (plan_values.c), adds the constant
 * tensors and has each rank's files laid out (plan_layout.c).  It is the planner's top: it calls the other
 * files, none of them calls it.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/fpconv.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "rules/expr.h"
#include "plan_impl.h"

/* True when the group's members are experts stacked into one output. */
static bool is_stacked(const struct member *m)
{
	return strstr(m->rule->match, "{e}") && !strstr(m->rule->output, "{e}") &&
	       !m->rule->concat;
}

/*
 * Expert parallelism: the expert of members [m, m + n), of ne, goes whole
 * to the one rank that holds it, cut as for a single rank.
 */
static enum wshard_err build_expert(const struct wshard_plan *plan,
				    const struct wshard_rules *rules, struct group_out *g,
				    const struct member *m, size_t n, long ne,
				    struct wshard_error *err)
{
	struct wshard_plan one = *plan;
	struct group_out g1 = *g;
	enum wshard_err rc;

	if (ne < plan->tp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"--expert-parallel: %lld experts for %d ranks (config.json's num_experts must be at least --tp)",
					(long long)ne, plan->tp);
	one.tp = 1;
	g1.ranks = &g->ranks[plan_expert_owner(plan, ne, m[0].cap.e)];
	rc = plan_build_item(&one, rules, &g1, m, n, err);
	g->ndim = g1.ndim;
	g->have_shape = g1.have_shape;
	memcpy(g->shape, g1.shape, sizeof(g->shape));
	return rc;
}

/*
 * The experts member m's stacked output holds: its rule's "num_experts",
 * which may differ by layer, else config.json's (0 or less: not known).
 */
static enum wshard_err stacked_experts(const struct wshard_plan *plan, const struct member *m,
				       long *out, struct wshard_error *err)
{
	int64_t v = 0;
	enum wshard_err rc;

	*out = plan->config->num_experts;
	if (!m->rule->num_experts)
		return WSHARD_OK;
	rc = expr_eval_layer_dim(plan->config, m->rule->num_experts, m->cap.n, m->rule->match,
				 &v, NULL, err);
	*out = (long)v;
	return rc;
}

/*
 * The items of the group of members [m, m + n): one per expert when
 * stacked (each expert's members together), else one of all of them.
 * Their count goes to *out_nitems.
 */
static enum wshard_err build_items(const struct wshard_plan *plan,
				   const struct wshard_rules *rules, struct group_out *g,
				   const struct member *m, size_t n, size_t *out_nitems,
				   struct wshard_error *err)
{
	bool stacked = is_stacked(&m[0]);
	size_t i, j, nitems = 0;
	long ne = 0;
	enum wshard_err rc = stacked ? stacked_experts(plan, &m[0], &ne, err) : WSHARD_OK;

	/* the pieces of one tensor by rows: one item of all of them */
	*out_nitems = 1;
	if (rc)
		return rc;
	if (m[0].rule->concat)
		return plan_split_concat(plan, g, m, n, err);
	for (i = 0; i < n && !rc; i = j) {
		for (j = i + 1; j < n && stacked && m[j].cap.e == m[i].cap.e; j++)
			;
		if (!stacked)
			j = n;
		if (stacked && m[i].cap.e != (long)nitems)
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "output '%s': expert %zu is missing (next is '%s')",
					      m[i].out, nitems, src_name(plan, m[i].src));
		if (!rc && stacked && plan->opt.expert_parallel)
			rc = build_expert(plan, rules, g, &m[i], j - i, ne, err);
		else if (!rc)
			rc = plan_build_item(plan, rules, g, &m[i], j - i, err);
		nitems++;
	}
	*out_nitems = nitems;
	if (!rc && stacked && ne > 0 && nitems != (size_t)ne)
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "output '%s' has %zu experts but config.json says %ld",
				      m[0].out, nitems, ne);
	return rc;
}

/*
 * Names a rank's tensor of the group, and gives it its dtype and shape:
 * the items' shape, under a dimension of nitems experts when stacked
 * (rank r's own experts under expert parallelism, as for a rule's
 * "experts").
 */
static enum wshard_err name_and_shape(const struct wshard_plan *plan,
				      const struct group_out *g, const struct member *m,
				      size_t nitems, int r, struct wshard_out_tensor *t,
				      struct wshard_error *err)
{
	bool stacked = is_stacked(m);
	long first, stride;

	t->name = strdup(m->out);
	if (!t->name)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	t->dtype = src_info(plan, m->src)->dtype;
	t->ndim = g->ndim + (stacked ? 1 : 0);
	if (t->ndim > WSHARD_MAX_DIMS)
		return wshard_error_set(err, WSHARD_EINVAL,
					"output '%s' would have more than %d dimensions",
					m->out, WSHARD_MAX_DIMS);
	if (stacked && plan->opt.expert_parallel) {
		t->shape[0] = (uint64_t)wshard_expert_range((long)nitems, plan->tp, r,
							    plan->placement, &first, &stride);
		memcpy(t->shape + 1, g->shape, sizeof(uint64_t) * (size_t)g->ndim);
	} else if (stacked) {
		t->shape[0] = nitems;
		memcpy(t->shape + 1, g->shape, sizeof(uint64_t) * (size_t)g->ndim);
	} else {
		memcpy(t->shape, g->shape, sizeof(uint64_t) * (size_t)g->ndim);
	}
	/* experts fused in one tensor (Llama 4's): dimension 0 counts them */
	if (!stacked && plan->opt.expert_parallel && m->rule->experts && t->ndim > 0)
		t->shape[0] = (uint64_t)wshard_expert_range((long)g->shape[0], plan->tp, r,
							    plan->placement, &first, &stride);
	/* hash heads of prime sizes: each rank's own rows (plan_prime.c) */
	if (m->rule->prime_heads[0] && t->ndim > 0)
		t->shape[0] = t->nbytes / src_row_bytes(src_info(plan, m->src));
	return WSHARD_OK;
}

/*
 * What output name, from source m, is to its layer's quantization: a
 * derived rule's role; else, in a quantized checkpoint, a tensor of a
 * quantized dtype is a weight, or a scale when its name says so (MXFP4's
 * U8 "_scales" beside its "_blocks").
 */
static uint8_t quant_role(const struct wshard_plan *plan, const struct member *m)
{
	static const char *const scales[] = { "_scale", "_scales", "_scale_inv", ".scale" };
	enum wshard_dtype dt = src_info(plan, m->src)->dtype;
	size_t len = strlen(m->out), i, k;

	if (m->rule->qrole || !plan_quant_config(plan))
		return m->rule->qrole;
	for (i = 0; i < sizeof(scales) / sizeof(scales[0]); i++) {
		k = strlen(scales[i]);
		if (len >= k && !strcmp(m->out + len - k, scales[i]))
			return WSHARD_QUANT_SCALE;
	}
	switch (dt) {
	case WSHARD_F8_E4M3: case WSHARD_F8_E5M2: case WSHARD_F8_E4M3FNUZ:
	case WSHARD_F8_E5M2FNUZ: case WSHARD_I8: case WSHARD_U8: case WSHARD_F4:
	case WSHARD_I32:
		return WSHARD_QUANT_WEIGHT;
	case WSHARD_F8_E8M0:
		return WSHARD_QUANT_SCALE;
	default:
		return WSHARD_QUANT_NONE;
	}
}

/* Builds the group of members [m, m + n) that share an output name. */
static enum wshard_err build_group(struct wshard_plan *plan,
				   const struct wshard_rules *rules,
				   const struct member *m, size_t n,
				   size_t *caps, struct wshard_error *err)
{
	struct group_out g = { 0 };
	enum wshard_dtype dt = src_info(plan, m[0].src)->dtype;
	size_t nitems = 0;
	float mean = 0;
	int r;
	enum wshard_err rc;

	g.ranks = calloc((size_t)plan->tp, sizeof(*g.ranks));
	if (!g.ranks)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	rc = plan_check_experts(plan, &m[0], err);
	if (is_stacked(&m[0]) || m[0].rule->experts)
		plan->has_experts = true;
	if (!rc)
		rc = build_items(plan, rules, &g, m, n, &nitems, err);
	/* read once, added on every rank */
	if (!rc && m[0].rule->zero_mean)
		rc = plan_source_mean(plan, &m[0], &mean, err);
	/* per-expert per-tensor scales stack to [E], as vLLM's FusedMoE has them */
	if (is_stacked(&m[0]) && m[0].rule->scale && g.ndim == 1 && g.shape[0] == 1)
		g.ndim = 0;
	/* a linear layer's per-tensor scale is a vector of one element per
	 * fused part in vLLM (PerTensorScaleParameter): a scalar becomes [1],
	 * and so does Quark's INT8 per-tensor weight zero point */
	else if (!is_stacked(&m[0]) && !m[0].rule->block && g.ndim == 0 &&
		 (m[0].rule->scale || m[0].rule->qrole == WSHARD_QUANT_ZERO_POINT)) {
		g.ndim = 1;
		g.shape[0] = 1;
	} else if (!is_stacked(&m[0]) && g.ndim == 1 && plan_int8_channel(plan, &m[0])) {
		g.ndim = 2;
		g.shape[1] = 1;
	}
	for (r = 0; r < plan->tp; r++) {
		struct wshard_out_tensor *t = &g.ranks[r];

		if (!rc)
			rc = name_and_shape(plan, &g, &m[0], nitems, r, t, err);
		if (!rc)
			rc = plan_permute_rows(plan, m, n, t, err);
		/* -exp(x) is F32 whatever --dtype says (vLLM's A parameter);
		 * a rule's "dtype" wins over --dtype (vLLM's F32 routers) */
		if (!rc && m[0].rule->neg_exp) {
			rc = plan_neg_exp(plan, &m[0], t, err);
		} else if (!rc && m[0].rule->qrole == WSHARD_QUANT_SHAPE && is_stacked(&m[0])) {
			/* compressed-tensors' experts: vLLM's [E, 2] weight_shape
			 * is made in the model's dtype (torch.empty), the
			 * integers copied in */
			plan_convert_dtype(plan_model_dtype(plan), t, true);
		} else if (!rc && m[0].rule->head_dtype) {
			enum wshard_dtype hd;

			rc = plan_head_dtype(plan, &hd, err);
			if (!rc)
				plan_convert_dtype(hd, t, false);
		} else if (!rc && (m[0].rule->has_dtype || plan->opt.has_dtype) && !m[0].rule->scale) {
			plan_convert_dtype(m[0].rule->model_dtype ? plan_model_dtype(plan) :
					   m[0].rule->has_dtype ? m[0].rule->dtype : plan->opt.dtype,
					   t, false);
		} else if (!rc && plan_f32_scale(plan, &m[0], dt)) {
			plan_convert_dtype(WSHARD_F32, t, false);
		}
		t->quant = quant_role(plan, &m[0]);
		if (!rc && m[0].rule->times_sqrt[0])
			rc = plan_times(plan, &m[0], t, err);
		if (!rc && m[0].rule->zero_mean)
			plan_zero_mean(plan, &m[0], t, mean);
		if (!rc && m[0].rule->has_plus)
			rc = plan_plus(plan, &m[0], t, err);
		if (!rc)
			rc = plan_push_expert_bias(plan, &m[0], t, plan_model_dtype(plan),
						   &plan->ranks[r], &caps[r], err);
		if (!rc)
			rc = plan_push_input_ub(plan, t, &plan->ranks[r], &caps[r], err);
		if (!rc)
			rc = plan_rank_push(&plan->ranks[r], &caps[r], t, err);
		free(t->name);
		free(t->pieces);
	}
	free(g.ranks);
	return rc;
}

void wshard_options_init(struct wshard_options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->tp = 1;
	opt->pp = 1;
	opt->target = WSHARD_TARGET_DEFAULT;
	opt->attn_scales = true;
	opt->max_file_size = 5ULL << 30;
	opt->max_memory = 64ULL << 20;
	opt->checksum = WSHARD_CK_CRC64;
}

/*
 * The layouts wshard writes, each the per-rank state of one engine
 * release line as its oracle (test/engine) found it, newest first; a bare
 * engine name means its newest.  A layout moves between releases (MoE
 * parameter names, attention scale buffers), so each is named by the
 * release it was checked against.
 */
static const struct {
	const char *name;		/* canonical: ENGINE@RELEASE */
	const char *checked;		/* the engine build the oracle ran */
} targets[] = {
	{ "vllm@0.32", "vllm==0.32.0" },
};

const char *wshard_target_canonical(const char *target, const char **out_checked)
{
	size_t i, n;

	for (i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		n = strlen(targets[i].name);
		/* "vllm", "vllm@0.32" and "vllm@0.32.N" */
		if (strcmp(target, "vllm") == 0 || strcmp(target, targets[i].name) == 0 ||
		    (strncmp(target, targets[i].name, n) == 0 && target[n] == '.' &&
		     target[n + 1] && strspn(target + n + 1, "0123456789") == strlen(target + n + 1))) {
			if (out_checked)
				*out_checked = targets[i].checked;
			return targets[i].name;
		}
	}
	return NULL;
}

/*
 * *out: the catalog's config, with the fields config.json omits taken
 * from the rules' "defaults" (the model class's own) and the rules' tp,
 * as the plan for --tp tp and its checks read it.
 */
static void config_init(struct wshard_config *out, const struct wshard_catalog *cat,
			const struct wshard_rules *rules, int tp)
{
	*out = cat->config;
	out->tp = tp;
	if (cat->has_config && rules->defaults) {
		out->defaults = rules->defaults;
		catalog_config_fields(out);
	}
}

/* The options wshard_plan_build refuses before it reads a tensor.
 * Returns WSHARD_OK, WSHARD_EUSAGE or WSHARD_EINVAL (no --expert-parallel
 * for these rules). */
static enum wshard_err check_options(const struct wshard_rules *rules,
				     const struct wshard_options *opt,
				     struct wshard_error *err)
{
	if (opt->tp < 1 || opt->tp > 4096)
		return wshard_error_set(err, WSHARD_EUSAGE, "--tp %d is out of range (1 to 4096)",
					opt->tp);
	if (opt->pp < 1 || opt->pp > 1024 || opt->tp * opt->pp > 65536)
		return wshard_error_set(err, WSHARD_EUSAGE,
					"--pp %d is out of range (1 to 1024, at most 65536 ranks in all)",
					opt->pp);
	if (opt->pp > 1 && !rules->pp_layers && !rules->no_pp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"--pp is not written for %s: what each pipeline stage of vLLM holds is not checked for it (no \"pipeline\" in its rules)",
					rules->name);
	if (!wshard_target_canonical(opt->target, NULL))
		return wshard_error_set(err, WSHARD_EUSAGE,
					"unknown target '%s' (known: vllm, vllm@0.32)", opt->target);
	if (!wshard_placement_name(opt->placement))
		return wshard_error_set(err, WSHARD_EUSAGE, "unknown expert placement %d",
					(int)opt->placement);
	if (opt->max_file_size == 0)
		return wshard_error_set(err, WSHARD_EUSAGE, "--max-file-size must be positive");
	if (opt->expert_parallel && rules->no_ep)
		return wshard_error_set(err, WSHARD_EINVAL, "--expert-parallel is not written for %s: %s",
					rules->name, rules->no_ep);
	if (opt->has_dtype && !wshard_dtype_is_convertible(opt->dtype))
		return wshard_error_set(err, WSHARD_EUSAGE,
					"--dtype %s: only bf16, f16 and f32 are targets",
					wshard_dtype_name(opt->dtype));
	return WSHARD_OK;
}

/*
 * A required row or column split whose size is one config.json key
 * (DeepSeek-V4's attn_sink by num_attention_heads): refused here as the
 * plan would refuse it, before the index and headers are read.  Rules
 * with a condition, optional ones, dtype alternatives and experts (whose
 * split --expert-parallel changes) are left to the plan.
 */
static enum wshard_err check_bare_split(const struct wshard_plan *plan,
					const struct rules_rule *rule,
					struct wshard_error *err)
{
	int dim = rule->kind == RULE_ROW ? 0 : 1;
	const char *expr = rule->nshape > dim ? rule->shape[dim] : NULL;
	struct wshard_error ignored = { 0 };
	int64_t v = 0;

	if ((rule->kind != RULE_ROW && rule->kind != RULE_COL) || rule->optional ||
	    rule->cond || rule->from || rule->rows || strstr(rule->match, "{e}") ||
	    !expr_is_bare_key(expr) ||
	    expr_eval_dim(plan->config, expr, rule->match, &v, &ignored) || v <= 0 ||
	    v % plan->tp == 0)
		return WSHARD_OK;
	return wshard_error_set(err, WSHARD_EINVAL, "%s=%lld is not divisible by --tp %d",
				expr, (long long)v, plan->tp);
}

/* The rules' "tp_divides": each expression's value divisible by --tp
 * (early: those a weight folder's config.json decides are left to the
 * plan). */
static enum wshard_err check_tp_divides(const struct wshard_plan *plan,
					const struct wshard_rules *rules, bool early,
					struct wshard_error *err)
{
	char what[256];
	enum wshard_err rc;
	int64_t v;
	size_t i;

	snprintf(what, sizeof(what), "tp_divides of %s", rules->name);
	for (i = 0; i < rules->ntp_divides; i++) {
		if (early && rules_reads_folder_config(rules, rules->tp_divides[i]))
			continue;
		rc = expr_eval_dim(plan->config, rules->tp_divides[i], what, &v, err);
		if (rc)
			return rc;
		/* (a number alone: a size the model class fixes) */
		if ((v <= 0 || v % plan->tp) &&
		    strspn(rules->tp_divides[i], "0123456789") == strlen(rules->tp_divides[i]))
			return wshard_error_set(err, WSHARD_EINVAL,
						"%lld (a size vLLM's class fixes; rules '%s') is not divisible by --tp %d",
						(long long)v, rules->name, plan->tp);
		if (v <= 0 || v % plan->tp)
			return wshard_error_set(err, WSHARD_EINVAL,
						"%s=%lld is not divisible by --tp %d", rules->tp_divides[i],
						(long long)v, plan->tp);
	}
	return WSHARD_OK;
}

/* The rules' "requires": keys config.json must give, not null. */
static enum wshard_err check_requires(const struct wshard_plan *plan,
				      const struct wshard_rules *rules, struct wshard_error *err)
{
	size_t i;
	json_t *v;

	for (i = 0; i < rules->nrequires; i++) {
		v = catalog_config_key(plan->config, rules->requires[i]);
		if (!v || json_is_null(v))
			return wshard_error_set(err, WSHARD_EINVAL,
						"config.json: no '%s', which vLLM needs to build %s (rules %s)",
						rules->requires[i], plan->opt.architecture ?
						plan->opt.architecture : plan->config->architecture ?
						plan->config->architecture : "the model", rules->name);
	}
	return WSHARD_OK;
}

/* The rules' "refuse_beside": files beside the weights that make vLLM keep
 * other weights than the rules write. */
static enum wshard_err check_beside(const struct wshard_plan *plan,
				    const struct wshard_rules *rules, struct wshard_error *err)
{
	size_t i;

	for (i = 0; i < rules->nrefuse_beside; i++)
		if (wshard_catalog_has_file(plan->cat, rules->refuse_beside[i]))
			return wshard_error_set(err, WSHARD_EINVAL, "'%s' beside the weights: %s (rules %s)",
						rules->refuse_beside[i], rules->refuse_beside_reason,
						rules->name);
	return WSHARD_OK;
}

enum wshard_err wshard_plan_check_config(const struct wshard_catalog *cat,
					 const struct wshard_rules *rules,
					 const struct wshard_options *opt,
					 struct wshard_error *err)
{
	struct wshard_config cfg;
	struct wshard_plan plan = { .tp = opt->tp, .cat = cat, .config = &cfg };
	const struct wshard_config *c = &cfg;
	size_t i;

	config_init(&cfg, cat, rules, opt->tp);
	/* what wshard_plan_build refuses first stays its to refuse */
	if (opt->tp < 1 || opt->tp > 4096 || !wshard_target_canonical(opt->target, NULL) ||
	    opt->max_file_size == 0 || (opt->has_dtype && !wshard_dtype_is_convertible(opt->dtype)))
		return WSHARD_OK;
	if (plan_check_method(&plan, err))
		return err ? err->code : WSHARD_EINVAL;
	plan_set_quant_keys(&plan);
	if (check_requires(&plan, rules, err) || check_beside(&plan, rules, err) ||
	    check_tp_divides(&plan, rules, true, err))
		return err ? err->code : WSHARD_EINVAL;
	if (c->num_attention_heads <= 0 || c->head_dim <= 0)
		return WSHARD_OK;
	for (i = 0; i < rules->nrules; i++) {
		const struct rules_rule *rule = &rules->rules[i];

		/* the first q/k/v operator's rule; one with its own kv heads
		 * may hold in some layers only ("if"): checked as it is built */
		if ((rule->kind == RULE_FUSE || rule->kind == RULE_UNPACK) &&
		    rules->ops[rule->op].kind == OP_QKV && !rules->ops[rule->op].kv_heads)
			return plan_check_heads(&plan, NULL, -1, err);
	}
	for (i = 0; i < rules->nrules; i++)
		if (check_bare_split(&plan, &rules->rules[i], err))
			return err ? err->code : WSHARD_EINVAL;
	return WSHARD_OK;
}

enum wshard_err wshard_plan_build(struct wshard_plan **out_plan,
				  const struct wshard_catalog *cat,
				  const struct wshard_rules *rules,
				  const struct wshard_options *opt,
				  struct wshard_error *err)
{
	struct wshard_plan *plan;
	struct member *m = NULL;
	size_t n = 0, i, j, *caps = NULL;
	long nlayers, written = -1;
	int r;
	enum wshard_err rc;

	*out_plan = NULL;
	rc = check_options(rules, opt, err);
	if (rc)
		return rc;
	plan = calloc(1, sizeof(*plan));
	if (!plan)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	plan->tp = opt->tp;
	plan->nranks = opt->tp;
	plan->opt = *opt;
	plan->opt.pp_layers = NULL;	/* the caller's; stage_layers holds them */
	plan->opt.target = wshard_target_canonical(opt->target, NULL);
	plan->cat = cat;
	plan->config = malloc(sizeof(*plan->config));
	if (!plan->config) {
		free(plan);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	config_init(plan->config, cat, rules, opt->tp);
	plan->rename_from = LONG_MAX;
	plan->placement = plan_effective_placement(cat, opt);
	plan->rules_name = strdup(rules->name);
	plan->ranks = calloc((size_t)opt->tp, sizeof(*plan->ranks));
	caps = calloc((size_t)opt->tp, sizeof(*caps));
	if (!plan->rules_name || !plan->ranks || !caps) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	for (r = 0; r < opt->tp; r++)
		plan->ranks[r].rank = plan->ranks[r].tp_rank = r;
	rc = plan_unstack(plan, rules, err);
	if (!rc)
		rc = plan_dequant(plan, rules, err);
	if (!rc)
		rc = plan_untie(plan, rules, err);
	if (!rc)
		rc = plan_check_method(plan, err);
	if (!rc)
		plan_set_quant_keys(plan);
	if (!rc)
		rc = plan_set_rename(plan, rules, err);
	if (!rc)
		rc = check_requires(plan, rules, err);
	if (!rc)
		rc = check_beside(plan, rules, err);
	if (!rc)
		rc = check_tp_divides(plan, rules, false, err);
	if (!rc)
		rc = plan_match_sources(plan, rules, &m, &n, err);
	if (!rc)
		rc = plan_set_views(plan, m, n, err);
	if (rc)
		goto out;
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && strcmp(m[j].out, m[i].out) == 0; j++)
			;
		rc = build_group(plan, rules, &m[i], j - i, caps, err);
		if (rc)
			goto out;
	}
	nlayers = plan_count_layers(plan, rules);
	for (i = 0; i < n; i++)
		if (m[i].cap.n > written)
			written = m[i].cap.n;
	rc = plan_build_extras(plan, rules, nlayers, written, caps, err);
	if (!rc)
		rc = plan_quark_input_zeros(plan, caps, err);
	if (!rc)
		rc = plan_quark_w4a16_experts(plan, err);
	if (!rc)
		rc = plan_split_stages(plan, rules, nlayers, opt->pp_layers, err);
	if (!rc)
		rc = plan_layout(plan, err);
out:
	for (i = 0; i < n; i++)
		free(m[i].out);
	free(m);
	free(caps);
	if (rc) {
		wshard_plan_free(plan);
		return rc;
	}
	*out_plan = plan;
	return WSHARD_OK;
}

void wshard_plan_free(struct wshard_plan *plan)
{
	size_t i;
	int r;

	if (!plan)
		return;
	for (r = 0; plan->ranks && r < plan->nranks; r++) {
		struct wshard_rank_plan *rp = &plan->ranks[r];

		for (i = 0; i < rp->ntensors; i++) {
			free(rp->tensors[i].name);
			free(rp->tensors[i].pieces);
		}
		free(rp->tensors);
		for (i = 0; i < rp->nfiles; i++) {
			free(rp->files[i].name);
			free(rp->files[i].header);
		}
		free(rp->files);
	}
	for (i = 0; i < plan->nleft_out; i++) {
		free(plan->left_out[i].name);
		free(plan->left_out[i].reason);
	}
	free(plan->left_out);
	free(plan->view_rows);
	free(plan->stage_layers);
	free(plan->ranks);
	free(plan->rules_name);
	free(plan->rename_prefix);
	free(plan->rename_to);
	free(plan->config);
	free(plan);
}
