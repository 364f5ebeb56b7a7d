/*
 * plan.c - the whole conversion as data: for every rank, the output
 * tensors (name, dtype, shape, file, offsets) and for each the ordered
 * copy pieces that make it.  A pure function of the catalog, the rules and
 * the options; every error (uncovered tensor, indivisible split, shape
 * against config.json) is found here, before any byte is written.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "internal.h"
#include "rules.h"

#define VOCAB_PAD 64
#define MAX_LISTED 20

/* A source tensor matched by a rule: one member of an output group. */
struct member {
	char *out;			/* output name */
	uint32_t src;			/* catalog index */
	const struct rules_rule *rule;
	struct rules_capture cap;
};

/* ------------------------------------------------------------------ */
/* Expressions over config.json: "(num_attention_heads+2*x)*head_dim"   */
/* ------------------------------------------------------------------ */

struct expr {
	const char *s;
	const struct wshard_config *cfg;
	const char *missing;		/* first unknown name */
	size_t missing_len;
	int depth;			/* parentheses open */
	bool bad;
};

static int64_t expr_sum(struct expr *x);

static int64_t config_value(struct expr *x, const char *name, size_t len)
{
	const struct wshard_config *c = x->cfg;
	static const struct { const char *name; size_t off; } normalized[] = {
		{ "num_key_value_heads", offsetof(struct wshard_config, num_key_value_heads) },
		{ "head_dim", offsetof(struct wshard_config, head_dim) },
		{ "num_experts", offsetof(struct wshard_config, num_experts) },
	};
	char key[128];
	json_t *v;
	size_t i;

	for (i = 0; i < sizeof(normalized) / sizeof(normalized[0]); i++) {
		if (strlen(normalized[i].name) == len &&
		    strncmp(normalized[i].name, name, len) == 0) {
			int64_t val = *(const int64_t *)((const char *)c + normalized[i].off);

			if (val > 0)
				return val;
		}
	}
	if (len >= sizeof(key))
		len = sizeof(key) - 1;
	memcpy(key, name, len);
	key[len] = '\0';
	v = c->json ? json_object_get(c->json, key) : NULL;
	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (!x->missing) {
		x->missing = name;
		x->missing_len = len;
	}
	return 0;
}

static int64_t expr_atom(struct expr *x)
{
	const char *start;
	int64_t v = 0;

	while (*x->s == ' ')
		x->s++;
	if (*x->s == '(') {
		if (++x->depth > 32) {
			x->bad = true;
			return 0;
		}
		x->s++;
		v = expr_sum(x);
		x->depth--;
		while (*x->s == ' ')
			x->s++;
		if (*x->s == ')')
			x->s++;
		else
			x->bad = true;
		return v;
	}
	start = x->s;
	if (isdigit((unsigned char)*x->s)) {
		while (isdigit((unsigned char)*x->s)) {
			if (v > INT64_MAX / 100)
				x->bad = true;
			else
				v = v * 10 + (*x->s - '0');
			x->s++;
		}
		return v;
	}
	while (isalnum((unsigned char)*x->s) || *x->s == '_')
		x->s++;
	if (x->s == start) {
		x->bad = true;
		return 0;
	}
	return config_value(x, start, (size_t)(x->s - start));
}

static int64_t expr_product(struct expr *x)
{
	int64_t v = expr_atom(x);

	for (;;) {
		while (*x->s == ' ')
			x->s++;
		if (*x->s == '*') {
			x->s++;
			if (__builtin_mul_overflow(v, expr_atom(x), &v))
				x->bad = true;
		} else if (*x->s == '/') {
			int64_t d;

			x->s++;
			d = expr_atom(x);
			v = d && !(v == INT64_MIN && d == -1) ? v / d : 0;
		} else {
			return v;
		}
	}
}

static int64_t expr_sum(struct expr *x)
{
	int64_t v = expr_product(x);

	for (;;) {
		while (*x->s == ' ')
			x->s++;
		if (*x->s == '+') {
			x->s++;
			if (__builtin_add_overflow(v, expr_product(x), &v))
				x->bad = true;
		} else if (*x->s == '-') {
			x->s++;
			if (__builtin_sub_overflow(v, expr_product(x), &v))
				x->bad = true;
		} else {
			return v;
		}
	}
}

/* Evaluates s; returns 0 and *out, or an error naming the rule. */
static enum wshard_err eval_dim(const struct wshard_config *cfg, const char *s,
				const char *tensor, int64_t *out,
				struct wshard_error *err)
{
	struct expr x = { .s = s, .cfg = cfg };

	*out = expr_sum(&x);
	if (x.bad || *x.s)
		return wshard_error_set(err, WSHARD_EINVAL,
					"rule for '%s': malformed shape expression \"%s\"",
					tensor, s);
	if (x.missing)
		return wshard_error_set(err, WSHARD_EINVAL,
					"config.json has no integer '%.*s', needed to check '%s'",
					(int)x.missing_len, x.missing, tensor);
	return WSHARD_OK;
}

/* True when s is one bare config key (for messages that name it). */
static bool is_bare_key(const char *s)
{
	if (!s || !*s || isdigit((unsigned char)*s))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */
/* ------------------------------------------------------------------ */

static const struct wshard_st_tensor *src_info(const struct wshard_plan *plan,
					       uint32_t src)
{
	return plan->cat->tensors[src].info;
}

static const char *src_name(const struct wshard_plan *plan, uint32_t src)
{
	return plan->cat->tensors[src].name;
}

static uint64_t src_rows(const struct wshard_st_tensor *t)
{
	return wshard_matrix_rows(t);
}

static uint64_t src_row_bytes(const struct wshard_st_tensor *t)
{
	uint64_t rows = src_rows(t);

	return rows ? (t->end - t->begin) / rows : 0;
}

static enum wshard_err push_piece(struct wshard_out_tensor *t,
				  const struct wshard_piece *p,
				  struct wshard_error *err)
{
	struct wshard_piece *pieces;

	if (p->len == 0)
		return WSHARD_OK;
	pieces = realloc(t->pieces, (t->npieces + 1) * sizeof(*pieces));
	if (!pieces)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	t->pieces = pieces;
	pieces[t->npieces] = *p;
	pieces[t->npieces].dst = t->nbytes;
	if (!p->out_ncols)
		pieces[t->npieces].out_ncols = p->ncols;
	t->nbytes += p->len;
	t->npieces++;
	return WSHARD_OK;
}

/* Appends rows [row0, row0 + nrows) of src, whole rows. */
static enum wshard_err push_rows(const struct wshard_plan *plan,
				 struct wshard_out_tensor *t, uint32_t src,
				 uint64_t row0, uint64_t nrows,
				 struct wshard_error *err)
{
	const struct wshard_st_tensor *info = src_info(plan, src);
	struct wshard_piece p = {
		.kind = WSHARD_PIECE_COPY,
		.src = src,
		.row0 = row0,
		.nrows = nrows,
		.col0 = 0,
		.ncols = src_row_bytes(info),
	};

	p.len = p.nrows * p.ncols;
	return push_piece(t, &p, err);
}

static enum wshard_err push_zeros(struct wshard_out_tensor *t, uint64_t len,
				  struct wshard_error *err)
{
	struct wshard_piece p = { .kind = WSHARD_PIECE_ZERO, .len = len };

	return push_piece(t, &p, err);
}

/* ------------------------------------------------------------------ */
/* Matching sources to rules                                            */
/* ------------------------------------------------------------------ */

static bool is_tied(const struct wshard_rules *rules, const struct wshard_config *cfg)
{
	if (!rules->tie_source)
		return false;
	if (rules->tie_always)
		return true;
	if (cfg->tie_word_embeddings >= 0)
		return cfg->tie_word_embeddings == 1;
	return rules->tie_default;
}

static bool in_list(char *const *list, size_t n, const char *s)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

static int cmp_member(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int c = strcmp(x->out, y->out);

	if (c)
		return c;
	if (x->cap.e != y->cap.e)
		return x->cap.e < y->cap.e ? -1 : 1;
	if (x->rule->part != y->rule->part)
		return x->rule->part < y->rule->part ? -1 : 1;
	return x->src < y->src ? -1 : (x->src > y->src);
}

static enum wshard_err check_shape(const struct wshard_plan *plan,
				   const struct member *m, struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	const struct rules_rule *r = m->rule;
	uint64_t want[WSHARD_MAX_DIMS];
	char have_s[160], want_s[160], expr_s[300];
	size_t o = 0;
	int i;
	enum wshard_err rc;

	if (r->nshape < 0)
		return WSHARD_OK;
	if (!plan->cat->has_config)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s' has no config.json to check shapes against",
					plan->cat->path);
	for (i = 0; i < r->nshape; i++) {
		int64_t v;

		rc = eval_dim(&plan->cat->config, r->shape[i], m->rule->match, &v, err);
		if (rc)
			return rc;
		want[i] = (uint64_t)v;
		o += (size_t)snprintf(expr_s + o, sizeof(expr_s) - WSHARD_MIN(o, sizeof(expr_s)),
				      "%s%s", i ? ", " : "", r->shape[i]);
	}
	if (r->nshape == t->ndim && memcmp(want, t->shape, sizeof(uint64_t) * (size_t)t->ndim) == 0)
		return WSHARD_OK;
	wshard_format_shape(have_s, sizeof(have_s), t->shape, t->ndim);
	wshard_format_shape(want_s, sizeof(want_s), want, r->nshape);
	return wshard_error_set(err, WSHARD_EINVAL,
				"tensor '%s' has shape %s but config.json gives [%s] = %s",
				t->name, have_s, expr_s, want_s);
}

static enum wshard_err report_uncovered(const struct wshard_plan *plan,
					const uint32_t *list, size_t n,
					struct wshard_error *err)
{
	char buf[WSHARD_ERRMAX - 128];
	size_t o = 0, i;

	buf[0] = '\0';
	for (i = 0; i < n && i < MAX_LISTED; i++) {
		const char *name = src_name(plan, list[i]);

		if (o + strlen(name) + 8 >= sizeof(buf))
			break;
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s'%s'", i ? ", " : "", name);
	}
	if (i < n)
		snprintf(buf + o, sizeof(buf) - o, " and %zu more", n - i);
	return wshard_error_set(err, WSHARD_EINVAL,
				"%zu tensor%s of '%s' %s not covered by rules '%s': %s",
				n, n == 1 ? "" : "s", plan->cat->path, n == 1 ? "is" : "are",
				plan->rules_name, buf);
}

/*
 * Every rule that is not optional must match a source tensor, once per
 * layer when its pattern has {n} (layers 0 .. num_hidden_layers - 1, or up
 * to the highest layer seen): an engine refuses a checkpoint with a tensor
 * missing, so wshard refuses to write one.  When embeddings are tied the
 * dropped names (lm_head) are not required.
 */
static enum wshard_err check_required(struct wshard_plan *plan,
				      const struct wshard_rules *rules,
				      const bool *seen, long nlayers, bool tied,
				      struct wshard_error *err)
{
	size_t j;
	long n;

	for (j = 0; j < rules->nrules; j++) {
		const struct rules_rule *r = &rules->rules[j];
		bool per_layer = strstr(r->match, "{n}") != NULL;

		if (r->optional || r->kind == RULE_SKIP ||
		    (tied && in_list(rules->tie_drop, rules->ntie_drop, r->match)))
			continue;
		/* an {e} rule needs some expert in every layer (the stacking
		 * then checks that all of them are there) */
		for (n = 0; n < (per_layer ? nlayers : 1); n++) {
			struct rules_capture cap = { .n = n, .e = 0 };
			char *want;

			if (seen[j * (size_t)(nlayers + 1) + (size_t)n])
				continue;
			want = rules_expand(r->match, &cap);
			if (!want)
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			wshard_error_set(err, WSHARD_EINVAL,
					 "tensor '%s' is missing from '%s' (rules '%s' require it%s)",
					 want, plan->cat->path, plan->rules_name,
					 per_layer ? " in every layer" : "");
			free(want);
			return WSHARD_EINVAL;
		}
	}
	return WSHARD_OK;
}

/* Layers the checkpoint should have: config.json, else the highest seen + 1. */
static long count_layers(const struct wshard_plan *plan, const struct wshard_rules *rules)
{
	json_t *v = plan->cat->config.json ? json_object_get(plan->cat->config.json,
							      "num_hidden_layers") : NULL;
	struct rules_capture cap;
	long maxn = -1;
	size_t i, j;

	if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 100000)
		return (long)json_integer_value(v);
	for (i = 0; i < plan->cat->ntensors; i++)
		for (j = 0; j < rules->nrules; j++)
			if (rules_match(rules->rules[j].match, plan->cat->tensors[i].name, &cap)) {
				if (cap.n > maxn && cap.n < 100000)
					maxn = cap.n;
				break;
			}
	return maxn + 1;
}

static enum wshard_err match_sources(struct wshard_plan *plan,
				     const struct wshard_rules *rules,
				     struct member **out_members, size_t *out_n,
				     struct wshard_error *err)
{
	const struct wshard_catalog *cat = plan->cat;
	bool tied = is_tied(rules, &cat->config);
	struct member *members = calloc(cat->ntensors + 1, sizeof(*members));
	uint32_t *uncovered = calloc(cat->ntensors + 1, sizeof(*uncovered));
	size_t n = 0, nun = 0, i, j;
	enum wshard_err rc = WSHARD_OK;

	long nlayers = count_layers(plan, rules);
	bool *seen = calloc(rules->nrules * (size_t)(nlayers + 1) + 1, sizeof(bool));

	*out_members = NULL;
	*out_n = 0;
	if (!members || !uncovered || !seen) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < cat->ntensors; i++) {
		const char *name = cat->tensors[i].name;
		struct member *m = &members[n];

		if (tied && strcmp(name, rules->tie_source) != 0 &&
		    in_list(rules->tie_drop, rules->ntie_drop, name))
			continue;
		for (j = 0; j < rules->nrules; j++)
			if (rules_match(rules->rules[j].match, name, &m->cap))
				break;
		if (j == rules->nrules) {
			uncovered[nun++] = (uint32_t)i;
			continue;
		}
		m->rule = &rules->rules[j];
		m->src = (uint32_t)i;
		if (m->cap.n >= nlayers) {
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "tensor '%s' is for layer %ld, but '%s' has %ld layer%s (num_hidden_layers)",
					      name, m->cap.n, cat->path, nlayers, nlayers == 1 ? "" : "s");
			goto out;
		}
		seen[j * (size_t)(nlayers + 1) + (size_t)(m->cap.n < 0 ? 0 : m->cap.n)] = true;
		if (m->rule->kind == RULE_SKIP)
			continue;
		if (tied && strcmp(name, rules->tie_source) == 0)
			m->out = strdup(rules->tie_output);
		else
			m->out = rules_expand(m->rule->output, &m->cap);
		if (!m->out) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			goto out;
		}
		n++;
	}
	if (nun) {
		rc = report_uncovered(plan, uncovered, nun, err);
		goto out;
	}
	if (n == 0) {
		rc = wshard_error_set(err, WSHARD_EINVAL, "'%s' has no tensors to convert",
				      cat->path);
		goto out;
	}
	rc = check_required(plan, rules, seen, nlayers, tied, err);
	if (rc)
		goto out;
	for (i = 0; i < n; i++) {
		rc = check_shape(plan, &members[i], err);
		if (rc)
			goto out;
	}
	qsort(members, n, sizeof(*members), cmp_member);
	*out_members = members;
	*out_n = n;
	members = NULL;
out:
	if (members)
		for (i = 0; i < n; i++)
			free(members[i].out);
	free(members);
	free(uncovered);
	free(seen);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Splits                                                               */
/* ------------------------------------------------------------------ */

static enum wshard_err indivisible(const struct wshard_plan *plan,
				   const struct member *m, int dim,
				   uint64_t size, struct wshard_error *err)
{
	const char *expr = m->rule->nshape > dim ? m->rule->shape[dim] : NULL;

	if (is_bare_key(expr))
		return wshard_error_set(err, WSHARD_EINVAL,
					"%s=%llu is not divisible by --tp %d", expr,
					(unsigned long long)size, plan->tp);
	return wshard_error_set(err, WSHARD_EINVAL,
				"tensor '%s': dimension %d (%llu) is not divisible by --tp %d",
				src_name(plan, m->src), dim, (unsigned long long)size,
				plan->tp);
}

/* Checks the head counts once, so the messages name config.json's fields. */
static enum wshard_err check_heads(const struct wshard_plan *plan,
				   struct wshard_error *err)
{
	const struct wshard_config *c = &plan->cat->config;
	int tp = plan->tp;

	if (c->num_attention_heads <= 0 || c->head_dim <= 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': config.json needs num_attention_heads and head_dim (or hidden_size) to fuse q/k/v",
					plan->cat->path);
	if (c->num_attention_heads % tp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"num_attention_heads=%lld is not divisible by --tp %d",
					(long long)c->num_attention_heads, tp);
	if (c->num_key_value_heads <= 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"num_key_value_heads=%lld must be positive",
					(long long)c->num_key_value_heads);
	if (tp <= c->num_key_value_heads && c->num_key_value_heads % tp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"num_key_value_heads=%lld is not divisible by --tp %d",
					(long long)c->num_key_value_heads, tp);
	if (tp > c->num_key_value_heads && tp % c->num_key_value_heads)
		return wshard_error_set(err, WSHARD_EINVAL,
					"--tp %d is not a multiple of num_key_value_heads=%lld",
					tp, (long long)c->num_key_value_heads);
	return WSHARD_OK;
}

/*
 * Rows of one fused part that rank r holds.  part_rows is the part's row
 * count; for q/k/v the head geometry of config.json decides.
 */
static enum wshard_err part_rows(const struct wshard_plan *plan,
				 const struct rules_op *op, int part,
				 const struct member *m, uint64_t rows, int r,
				 uint64_t *out_row0, uint64_t *out_nrows,
				 struct wshard_error *err)
{
	const struct wshard_config *c = &plan->cat->config;
	uint64_t tp = (uint64_t)plan->tp;

	*out_row0 = *out_nrows = 0;
	if (op->kind == OP_QKV && part > 0) {
		uint64_t kv = (uint64_t)c->num_key_value_heads;

		if (tp > kv) {
			uint64_t hd = rows / kv, h = (uint64_t)r / (tp / kv);

			if (rows % kv)
				return wshard_error_set(err, WSHARD_EINVAL,
							"tensor '%s': %llu rows do not hold num_key_value_heads=%llu heads",
							src_name(plan, m->src), (unsigned long long)rows,
							(unsigned long long)kv);

			*out_row0 = h * hd;
			*out_nrows = hd;
			return WSHARD_OK;
		}
	}
	if (rows % tp)
		return indivisible(plan, m, 0, rows, err);
	*out_nrows = rows / tp;
	*out_row0 = (uint64_t)r * *out_nrows;
	return WSHARD_OK;
}

/*
 * A block-wise FP8 scale (X.weight_scale_inv) can be split only where the
 * weight X.weight's split falls on block boundaries: every rank's rows
 * (a kv head's rows when heads are replicated) a multiple of the block
 * height, its columns of the block width (quantization_config's
 * weight_block_size, 128 x 128 when absent).
 */
static enum wshard_err check_blocks(const struct wshard_plan *plan,
				    const struct member *m, bool cols, bool head_rows,
				    struct wshard_error *err)
{
	const char *name = src_name(plan, m->src);
	json_t *q = plan->cat->config.json ? json_object_get(plan->cat->config.json,
							      "quantization_config") : NULL;
	json_t *bs = json_object_get(q, "weight_block_size");
	uint64_t block[2] = { 128, 128 }, have, tp = (uint64_t)plan->tp;
	const struct wshard_src_tensor *w;
	char wname[1024];
	size_t n = strlen(name);
	int i;

	if (!m->rule->block)
		return WSHARD_OK;
	for (i = 0; i < 2 && json_is_array(bs); i++)
		if (json_is_integer(json_array_get(bs, (size_t)i)) &&
		    json_integer_value(json_array_get(bs, (size_t)i)) > 0)
			block[i] = (uint64_t)json_integer_value(json_array_get(bs, (size_t)i));
	if (n < 10 || n - 10 + 1 > sizeof(wname))
		return WSHARD_OK;
	snprintf(wname, sizeof(wname), "%.*s", (int)(n - 10), name);	/* drop "_scale_inv" */
	w = wshard_catalog_find(plan->cat, wname);
	if (!w || w->info->ndim != 2)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s' has no 2-D weight '%s' beside it", name, wname);
	if (cols) {
		have = w->info->shape[1] / tp;
		if (have % block[1])
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': each rank's %llu columns do not fall on the %llu-column blocks of '%s' (quantization_config.weight_block_size)",
						wname, (unsigned long long)have,
						(unsigned long long)block[1], name);
		return WSHARD_OK;
	}
	have = head_rows ? w->info->shape[0] / (uint64_t)plan->cat->config.num_key_value_heads
			 : w->info->shape[0] / tp;
	if (have % block[0])
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': each rank's %llu rows do not fall on the %llu-row blocks of '%s' (quantization_config.weight_block_size)",
					wname, (unsigned long long)have, (unsigned long long)block[0],
					name);
	return WSHARD_OK;
}

/* Per-rank output being assembled for one group. */
struct group_out {
	struct wshard_out_tensor *ranks;	/* tp of them */
	int ndim;
	uint64_t shape[WSHARD_MAX_DIMS];	/* per item, before stacking */
	bool have_shape;
};

static enum wshard_err set_item_shape(const struct wshard_plan *plan,
				      struct group_out *g, const char *out,
				      const uint64_t *shape, int ndim,
				      struct wshard_error *err)
{
	if (!g->have_shape) {
		memcpy(g->shape, shape, sizeof(uint64_t) * (size_t)ndim);
		g->ndim = ndim;
		g->have_shape = true;
		return WSHARD_OK;
	}
	if (g->ndim != ndim || memcmp(g->shape, shape, sizeof(uint64_t) * (size_t)ndim))
		return wshard_error_set(err, WSHARD_EINVAL,
					"output '%s': experts have different shapes", out);
	return WSHARD_OK;
}

/* A plain split (row, col, vocab, replicate) of one source, one item. */
static enum wshard_err build_plain(const struct wshard_plan *plan,
				   struct group_out *g, const struct member *m,
				   struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t tp = (uint64_t)plan->tp, rows = src_rows(t), rb = src_row_bytes(t);
	uint64_t shape[WSHARD_MAX_DIMS];
	int r, ndim = t->ndim;
	enum wshard_err rc = WSHARD_OK;

	memcpy(shape, t->shape, sizeof(shape));
	if (m->rule->scale && t->end - t->begin == wshard_dtype_bits(t->dtype) / 8) {
		/* a per-tensor scale beside a split weight: whole on every rank */
		for (r = 0; r < plan->tp && !rc; r++)
			rc = push_rows(plan, &g->ranks[r], m->src, 0, rows, err);
		return rc ? rc : set_item_shape(plan, g, m->out, shape, ndim, err);
	}
	if (m->rule->kind == RULE_ROW || m->rule->kind == RULE_COL) {
		enum wshard_err brc = check_blocks(plan, m, m->rule->kind == RULE_COL, false, err);

		if (brc)
			return brc;
	}
	switch (m->rule->kind) {
	case RULE_ROW:
		if (ndim < 1 || rows != t->shape[0])
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': cannot be split by rows (%s)", t->name,
						ndim < 1 ? "a scalar" : "rows are not whole bytes");
		if (rows % tp)
			return indivisible(plan, m, 0, rows, err);
		shape[0] = rows / tp;
		for (r = 0; r < plan->tp && !rc; r++)
			rc = push_rows(plan, &g->ranks[r], m->src, (uint64_t)r * shape[0],
				       shape[0], err);
		break;
	case RULE_COL: {
		uint64_t cols, inner = 1, bits = wshard_dtype_bits(t->dtype);
		int d;

		if (ndim < 2)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': a column split needs 2 or more dimensions",
						t->name);
		cols = t->shape[1];
		for (d = 2; d < ndim; d++)
			inner *= t->shape[d];
		if (cols % tp)
			return indivisible(plan, m, 1, cols, err);
		shape[1] = cols / tp;
		if ((shape[1] * inner * bits) % 8)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': a column split of %s would cut a byte",
						t->name, wshard_dtype_name(t->dtype));
		for (r = 0; r < plan->tp && !rc; r++) {
			struct wshard_piece p = {
				.kind = WSHARD_PIECE_COPY,
				.src = m->src,
				.row0 = 0,
				.nrows = rows,
				.ncols = shape[1] * inner * bits / 8,
				.prov_col0 = (uint64_t)r * shape[1],
				.prov_ncols = shape[1],
			};

			p.col0 = (uint64_t)r * p.ncols;
			p.len = p.nrows * p.ncols;
			rc = push_piece(&g->ranks[r], &p, err);
		}
		break;
	}
	case RULE_VOCAB: {
		uint64_t padded = (rows + VOCAB_PAD - 1) / VOCAB_PAD * VOCAB_PAD, per;

		if (ndim < 1 || rows != t->shape[0])
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': a scalar cannot be split by vocabulary",
						t->name);
		if (padded % tp)
			return wshard_error_set(err, WSHARD_EINVAL,
						"vocab_size=%llu padded to %llu is not divisible by --tp %d",
						(unsigned long long)rows, (unsigned long long)padded,
						plan->tp);
		per = padded / tp;
		shape[0] = per;
		for (r = 0; r < plan->tp && !rc; r++) {
			uint64_t lo = WSHARD_MIN((uint64_t)r * per, rows);
			uint64_t hi = WSHARD_MIN((uint64_t)r * per + per, rows);

			rc = push_rows(plan, &g->ranks[r], m->src, lo, hi - lo, err);
			if (!rc)
				rc = push_zeros(&g->ranks[r], (per - (hi - lo)) * rb, err);
		}
		break;
	}
	case RULE_REPLICATE:
		for (r = 0; r < plan->tp && !rc; r++)
			rc = push_rows(plan, &g->ranks[r], m->src, 0, rows, err);
		break;
	default:
		return wshard_error_set(err, WSHARD_EINVAL, "internal: unexpected rule kind");
	}
	if (rc)
		return rc;
	return set_item_shape(plan, g, m->out, shape, ndim, err);
}

/*
 * One item of a fused output: parts[p] is the source of part p and
 * part_off[p] its first row inside that source (non-zero when one source
 * packs every part).
 */
static enum wshard_err build_fused(const struct wshard_plan *plan,
				   struct group_out *g, const struct rules_op *op,
				   const struct member *const *parts,
				   const uint64_t *part_off, const uint64_t *part_len,
				   struct wshard_error *err)
{
	const struct wshard_st_tensor *first = src_info(plan, parts[0]->src);
	uint64_t shape[WSHARD_MAX_DIMS], total = 0;
	int p, r, ndim = first->ndim, nparts = op->nparts;
	bool whole = false;
	enum wshard_err rc = WSHARD_OK;

	for (p = 0; p < op->nparts; p++) {
		const struct wshard_st_tensor *t = src_info(plan, parts[p]->src);

		if (t->dtype != first->dtype)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' fused into '%s' have different dtypes",
						first->name, t->name, parts[0]->out);
		if (t->ndim != ndim || (ndim > 1 && memcmp(t->shape + 1, first->shape + 1,
							   sizeof(uint64_t) * (size_t)(ndim - 1))))
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' fused into '%s' differ beyond dimension 0",
						first->name, t->name, parts[0]->out);
		/* Per-tensor scales (a scalar or one element) are kept whole. */
		if (ndim == 0 || (ndim == 1 && t->shape[0] == 1 && part_len[p] == 1))
			whole = true;
	}
	for (p = 0; p < op->nparts && !whole; p++) {
		rc = check_blocks(plan, parts[p], false,
				  op->kind == OP_QKV && p > 0 &&
				  plan->tp > plan->cat->config.num_key_value_heads, err);
		if (rc)
			return rc;
	}
	if (whole && parts[0]->rule->collapse)
		nparts = 1;
	for (r = 0; r < plan->tp; r++) {
		uint64_t rank_rows = 0;

		for (p = 0; p < nparts && !rc; p++) {
			uint64_t row0 = 0, nrows = 1;

			if (!whole) {
				rc = part_rows(plan, op, p, parts[p], part_len[p], r,
					       &row0, &nrows, err);
				if (rc)
					return rc;
			}
			rc = push_rows(plan, &g->ranks[r], parts[p]->src,
				       part_off[p] + row0, nrows, err);
			rank_rows += nrows;
		}
		if (rc)
			return rc;
		if (r == 0)
			total = rank_rows;
	}
	memcpy(shape, first->shape, sizeof(shape));
	if (ndim == 0)
		ndim = 1;
	shape[0] = total;
	return set_item_shape(plan, g, parts[0]->out, shape, ndim, err);
}

/* Names the source tensor a fused output lacks, from the rule for that part. */
static enum wshard_err missing_part(const struct wshard_plan *plan,
				    const struct wshard_rules *rules,
				    const struct member *m, int part,
				    struct wshard_error *err)
{
	const struct rules_op *op = &rules->ops[m->rule->op];
	size_t i;

	for (i = 0; i < rules->nrules; i++) {
		const struct rules_rule *r = &rules->rules[i];
		char *want;

		if (r->kind != RULE_FUSE || r->op != m->rule->op || r->part != part ||
		    strcmp(r->output, m->rule->output) != 0)
			continue;
		want = rules_expand(r->match, &m->cap);
		if (!want)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		wshard_error_set(err, WSHARD_EINVAL,
				 "tensor '%s' is missing: '%s' needs it as part '%s' of '%s'",
				 want, m->out, op->parts[part], op->name);
		free(want);
		return WSHARD_EINVAL;
	}
	return wshard_error_set(err, WSHARD_EINVAL,
				"output '%s' is missing part '%s' of '%s' (from '%s' and its siblings)",
				m->out, op->parts[part], op->name, src_name(plan, m->src));
}

/* The parts of one item from its members (FUSE) or its one source (UNPACK). */
static enum wshard_err build_item(const struct wshard_plan *plan,
				  const struct wshard_rules *rules,
				  struct group_out *g, const struct member *m,
				  size_t n, struct wshard_error *err)
{
	const struct rules_rule *rule = m[0].rule;
	const struct member *parts[OP_MAX_PARTS] = { 0 };
	uint64_t off[OP_MAX_PARTS] = { 0 }, len[OP_MAX_PARTS] = { 0 };
	const struct rules_op *op;
	size_t i;
	int p;

	for (i = 1; i < n; i++)
		if (m[i].rule->kind != RULE_FUSE || rule->kind != RULE_FUSE ||
		    m[i].rule->op != rule->op)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' both produce '%s' and are not parts of one fused operator",
						src_name(plan, m[0].src), src_name(plan, m[i].src),
						m[0].out);
	if (rule->kind != RULE_FUSE && rule->kind != RULE_UNPACK)
		return build_plain(plan, g, &m[0], err);
	op = &rules->ops[rule->op];
	if (op->kind == OP_QKV) {
		enum wshard_err rc = check_heads(plan, err);

		if (rc)
			return rc;
	}
	if (rule->kind == RULE_UNPACK) {
		const struct wshard_st_tensor *t = src_info(plan, m[0].src);
		const struct wshard_config *c = &plan->cat->config;
		uint64_t rows = src_rows(t), at = 0;

		for (p = 0; p < op->nparts; p++) {
			parts[p] = &m[0];
			if (op->kind == OP_QKV)
				len[p] = (uint64_t)(p == 0 ? c->num_attention_heads
							   : c->num_key_value_heads) *
					 (uint64_t)c->head_dim;
			else if (rows % (uint64_t)op->nparts == 0)
				len[p] = rows / (uint64_t)op->nparts;
			else
				return wshard_error_set(err, WSHARD_EINVAL,
							"tensor '%s': %llu rows cannot be cut into the %d parts of '%s'",
							t->name, (unsigned long long)rows, op->nparts,
							op->name);
			off[p] = at;
			at += len[p];
		}
		if (at != rows)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s' has %llu rows but config.json's heads give q+k+v = %llu",
						t->name, (unsigned long long)rows,
						(unsigned long long)at);
		return build_fused(plan, g, op, parts, off, len, err);
	}
	for (i = 0; i < n; i++) {
		p = m[i].rule->part;
		if (parts[p])
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensors '%s' and '%s' are both part '%s' of '%s'",
						src_name(plan, parts[p]->src), src_name(plan, m[i].src),
						op->parts[p], m[i].out);
		parts[p] = &m[i];
		len[p] = src_rows(src_info(plan, m[i].src));
	}
	for (p = 0; p < op->nparts; p++)
		if (!parts[p])
			return missing_part(plan, rules, &m[0], p, err);
	return build_fused(plan, g, op, parts, off, len, err);
}

/* Appends t to a rank's list (taking its pieces and name). */
static enum wshard_err rank_push(struct wshard_rank_plan *rp, size_t *cap,
				 struct wshard_out_tensor *t,
				 struct wshard_error *err)
{
	if (rp->ntensors == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct wshard_out_tensor *nt = realloc(rp->tensors, ncap * sizeof(*nt));

		if (!nt)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		rp->tensors = nt;
		*cap = ncap;
	}
	rp->tensors[rp->ntensors++] = *t;
	memset(t, 0, sizeof(*t));
	return WSHARD_OK;
}

/*
 * --dtype: a floating-point output (not an FP8 scale) becomes the target
 * dtype; its pieces keep their source rectangles and produce converted
 * bytes, so every offset after them moves.
 */
static void convert_dtype(const struct wshard_plan *plan, struct wshard_out_tensor *t)
{
	unsigned in, out;
	size_t k;

	if (!wshard_dtype_is_convertible(t->dtype) || t->dtype == plan->opt.dtype)
		return;
	in = wshard_dtype_bits(t->dtype) / 8;
	out = wshard_dtype_bits(plan->opt.dtype) / 8;
	t->nbytes = 0;
	for (k = 0; k < t->npieces; k++) {
		struct wshard_piece *p = &t->pieces[k];

		p->from = t->dtype;
		p->to = plan->opt.dtype;
		p->out_ncols = p->ncols / in * out;
		p->len = p->len / in * out;
		p->dst = t->nbytes;
		t->nbytes += p->len;
	}
	t->dtype = plan->opt.dtype;
}

/* Builds the group of members [m, m + n) that share an output name. */
static enum wshard_err build_group(struct wshard_plan *plan,
				   const struct wshard_rules *rules,
				   const struct member *m, size_t n,
				   size_t *caps, struct wshard_error *err)
{
	struct group_out g = { 0 };
	bool stacked = strstr(m[0].rule->match, "{e}") && !strstr(m[0].rule->output, "{e}");
	const struct wshard_st_tensor *t0 = src_info(plan, m[0].src);
	size_t i, j, nitems = 0;
	int r;
	enum wshard_err rc = WSHARD_OK;

	g.ranks = calloc((size_t)plan->tp, sizeof(*g.ranks));
	if (!g.ranks)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < n && !rc; i = j) {
		for (j = i + 1; j < n && stacked && m[j].cap.e == m[i].cap.e; j++)
			;
		if (!stacked)
			j = n;
		if (stacked && m[i].cap.e != (long)nitems)
			rc = wshard_error_set(err, WSHARD_EINVAL,
					      "output '%s': expert %zu is missing (next is '%s')",
					      m[i].out, nitems, src_name(plan, m[i].src));
		if (!rc)
			rc = build_item(plan, rules, &g, &m[i], j - i, err);
		nitems++;
	}
	if (!rc && stacked && plan->cat->config.num_experts > 0 &&
	    nitems != (size_t)plan->cat->config.num_experts)
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "output '%s' has %zu experts but config.json says %lld",
				      m[0].out, nitems,
				      (long long)plan->cat->config.num_experts);
	/* per-expert per-tensor scales stack to [E], as vLLM's FusedMoE has them */
	if (stacked && m[0].rule->scale && g.ndim == 1 && g.shape[0] == 1)
		g.ndim = 0;
	for (r = 0; r < plan->tp; r++) {
		struct wshard_out_tensor *t = &g.ranks[r];

		if (!rc) {
			t->name = strdup(m[0].out);
			if (!t->name)
				rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			t->dtype = t0->dtype;
			t->ndim = g.ndim + (stacked ? 1 : 0);
			if (stacked) {
				t->shape[0] = nitems;
				memcpy(t->shape + 1, g.shape, sizeof(uint64_t) * (size_t)g.ndim);
			} else {
				memcpy(t->shape, g.shape, sizeof(uint64_t) * (size_t)g.ndim);
			}
			if (t->ndim > WSHARD_MAX_DIMS)
				rc = wshard_error_set(err, WSHARD_EINVAL,
						      "output '%s' would have more than %d dimensions",
						      m[0].out, WSHARD_MAX_DIMS);
		}
		if (!rc && plan->opt.has_dtype && !m[0].rule->scale) {
			int i;

			for (i = 0; i < (int)t->npieces; i++)
				t->pieces[i].from = t->pieces[i].to = t0->dtype;
			convert_dtype(plan, t);
		}
		if (!rc)
			rc = rank_push(&plan->ranks[r], &caps[r], t, err);
		free(t->name);
		free(t->pieces);
	}
	free(g.ranks);
	return rc;
}

/* The dtype the engine runs the model in: --dtype when given, else
 * config.json's torch_dtype (or "dtype"); BF16 when it names none of the
 * three. */
static enum wshard_dtype model_dtype(const struct wshard_plan *plan)
{
	static const char *const keys[] = { "torch_dtype", "dtype" };
	json_t *cfg = plan->cat->config.json;
	size_t i;

	if (plan->opt.has_dtype)
		return plan->opt.dtype;
	for (i = 0; cfg && i < 2; i++) {
		const char *s = json_string_value(json_object_get(cfg, keys[i]));

		if (!s)
			continue;
		if (!strcmp(s, "float16"))
			return WSHARD_F16;
		if (!strcmp(s, "float32"))
			return WSHARD_F32;
		break;
	}
	return WSHARD_BF16;
}

/* The constant tensors of the rules' "extra" list, one per layer seen. */
static enum wshard_err build_extras(struct wshard_plan *plan,
				    const struct wshard_rules *rules,
				    long nlayers, size_t *caps, struct wshard_error *err)
{
	long maxn = nlayers - 1;	/* every layer 0 .. nlayers - 1 was checked */
	size_t x;
	long layer;
	int r;

	for (x = 0; x < rules->nextras; x++) {
		const struct rules_extra *e = &rules->extras[x];
		bool per_layer = strstr(e->name, "{n}") != NULL;

		enum wshard_dtype dtype = e->model_dtype ? model_dtype(plan) : e->dtype;

		if (e->option && strcmp(e->option, "attn_scales") == 0 && !plan->opt.attn_scales)
			continue;
		if (e->when_quantized &&
		    !json_is_object(json_object_get(plan->cat->config.json, "quantization_config")))
			continue;
		for (layer = per_layer ? 0 : -1; layer <= (per_layer ? maxn : -1); layer++) {
			struct rules_capture cap = { .n = layer, .e = -1 };
			char *name = rules_expand(e->name, &cap);

			if (!name)
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			for (r = 0; r < plan->tp; r++) {
				struct wshard_out_tensor t = { .dtype = dtype, .ndim = 0 };
				struct wshard_piece p = { .kind = WSHARD_PIECE_CONST };
				enum wshard_err rc;

				if (dtype == WSHARD_F32) {
					float f = (float)e->value;

					memcpy(p.value, &f, 4);
					p.value_len = 4;
				} else {
					float f = (float)e->value;
					uint32_t u;
					uint16_t h;

					memcpy(&u, &f, 4);
					h = dtype == WSHARD_BF16 ? wshard_f32_to_bf16(u)
								    : wshard_f32_to_f16(u);
					memcpy(p.value, &h, 2);
					p.value_len = 2;
				}
				p.len = p.value_len;
				p.prov_value = e->value;
				t.name = strdup(name);
				rc = t.name ? push_piece(&t, &p, err)
					    : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
				if (!rc)
					rc = rank_push(&plan->ranks[r], &caps[r], &t, err);
				free(t.name);
				free(t.pieces);
				if (rc) {
					free(name);
					return rc;
				}
			}
			free(name);
		}
	}
	return WSHARD_OK;
}

static int cmp_out(const void *a, const void *b)
{
	const struct wshard_out_tensor *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/*
 * The order of the output data is a function of the plan alone, never of
 * the order in which the source is read: catalog files are indexed in
 * archive order for an archive (a compressed one is read front to back),
 * and `tar -cf` stores members in readdir order.  Source positions are
 * therefore compared by file name, then offset within that file.
 */
struct done_order {
	const struct wshard_catalog *cat;
	uint32_t *file_rank;		/* per catalog file: its place by name */
};

static int cmp_file_name(const void *a, const void *b, void *ctx)
{
	const struct wshard_catalog *cat = ctx;

	return strcmp(cat->files[*(const uint32_t *)a].name,
		      cat->files[*(const uint32_t *)b].name);
}

/* Fills o->file_rank.  Returns WSHARD_OK or WSHARD_ENOMEM. */
static enum wshard_err done_order_init(struct done_order *o,
				       const struct wshard_catalog *cat,
				       struct wshard_error *err)
{
	uint32_t *by_name;
	size_t i;

	o->cat = cat;
	o->file_rank = calloc(cat->nfiles + 1, sizeof(*o->file_rank));
	by_name = calloc(cat->nfiles + 1, sizeof(*by_name));
	if (!o->file_rank || !by_name) {
		free(by_name);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	for (i = 0; i < cat->nfiles; i++)
		by_name[i] = (uint32_t)i;
	qsort_r(by_name, cat->nfiles, sizeof(*by_name), cmp_file_name, (void *)cat);
	for (i = 0; i < cat->nfiles; i++)
		o->file_rank[by_name[i]] = (uint32_t)i;
	free(by_name);
	return WSHARD_OK;
}

/*
 * Where a name-ordered read of the source completes an output tensor:
 * the (file by name, offset in file) of the last source tensor it copies
 * from.  A tensor with no source bytes (constants) comes first.
 */
static void done_at(const struct done_order *o, const struct wshard_out_tensor *t,
		    uint64_t *file, uint64_t *off)
{
	size_t k;

	*file = *off = 0;
	for (k = 0; k < t->npieces; k++) {
		const struct wshard_piece *p = &t->pieces[k];
		const struct wshard_src_tensor *s;
		uint64_t f, b;

		if (p->kind != WSHARD_PIECE_COPY)
			continue;
		s = &o->cat->tensors[p->src];
		f = o->file_rank[s->file];
		b = s->info->begin + 1;
		if (f > *file || (f == *file && b > *off)) {
			*file = f;
			*off = b;
		}
	}
}

/* Output order in a part: as a name-ordered read completes them, then by name. */
static int cmp_done(const void *a, const void *b, void *ctx)
{
	const struct wshard_out_tensor *x = a, *y = b;
	uint64_t xf, xo, yf, yo;

	done_at(ctx, x, &xf, &xo);
	done_at(ctx, y, &yf, &yo);
	if (xf != yf)
		return xf < yf ? -1 : 1;
	if (xo != yo)
		return xo < yo ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Sorts a rank's tensors, cuts them into parts and lays out each file. */
static enum wshard_err layout_rank(struct wshard_plan *plan,
				   const struct done_order *order,
				   struct wshard_rank_plan *rp,
				   struct wshard_error *err)
{
	struct wshard_st_tensor *st = NULL;
	size_t i, first = 0;
	uint64_t part_bytes = 0;
	enum wshard_err rc = WSHARD_OK;

	qsort(rp->tensors, rp->ntensors, sizeof(*rp->tensors), cmp_out);
	for (i = 1; i < rp->ntensors; i++)
		if (strcmp(rp->tensors[i - 1].name, rp->tensors[i].name) == 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"two rules produce output '%s'", rp->tensors[i].name);
	/*
	 * The data follows the order in which a read of the source files by
	 * name completes the tensors (the stream's order, but for an archive
	 * whose members are not sorted), so that each part can be hashed and
	 * validated a little behind the writing, while its bytes are still
	 * in cache (exec.c); the header lists them in the same order.
	 */
	qsort_r(rp->tensors, rp->ntensors, sizeof(*rp->tensors), cmp_done,
		(void *)order);
	rp->files = calloc(rp->ntensors + 1, sizeof(*rp->files));
	st = calloc(rp->ntensors + 1, sizeof(*st));
	if (!rp->files || !st) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i <= rp->ntensors; i++) {
		struct wshard_out_tensor *t = i < rp->ntensors ? &rp->tensors[i] : NULL;
		bool cut = !t || (i > first && part_bytes + t->nbytes > plan->opt.max_file_size);

		if (cut && i > first) {
			struct wshard_out_file *f = &rp->files[rp->nfiles];
			uint64_t data_len;
			size_t k;
			char name[96];

			for (k = first; k < i; k++) {
				st[k].name = rp->tensors[k].name;
				st[k].dtype = rp->tensors[k].dtype;
				st[k].ndim = rp->tensors[k].ndim;
				memcpy(st[k].shape, rp->tensors[k].shape, sizeof(st[k].shape));
			}
			rc = wshard_st_layout(st + first, i - first, NULL, 0, &f->header,
					      &f->header_len, &data_len, err);
			if (rc)
				goto out;
			for (k = first; k < i; k++) {
				rp->tensors[k].part = (uint32_t)rp->nfiles;
				rp->tensors[k].begin = st[k].begin;
				rp->tensors[k].end = st[k].end;
				if (st[k].end - st[k].begin != rp->tensors[k].nbytes) {
					rc = wshard_error_set(err, WSHARD_EINVAL,
							      "internal: output '%s' plans %llu bytes, its shape holds %llu",
							      rp->tensors[k].name,
							      (unsigned long long)rp->tensors[k].nbytes,
							      (unsigned long long)(st[k].end - st[k].begin));
					goto out;
				}
			}
			snprintf(name, sizeof(name), "model-rank-%d-part-%zu.safetensors",
				 rp->rank, rp->nfiles);
			f->name = strdup(name);
			if (!f->name) {
				rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
				goto out;
			}
			f->size = f->header_len + data_len;
			f->first = first;
			f->count = i - first;
			rp->nfiles++;
			first = i;
			part_bytes = 0;
		}
		if (t) {
			part_bytes += t->nbytes;
			rp->bytes += t->nbytes;
		}
	}
out:
	free(st);
	return rc;
}

void wshard_options_init(struct wshard_options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->tp = 1;
	opt->target = "vllm";
	opt->attn_scales = true;
	opt->max_file_size = 5ULL << 30;
	opt->max_memory = 64ULL << 20;
	opt->checksum = WSHARD_CK_CRC64;
}

enum wshard_err wshard_plan_build(struct wshard_plan **out_plan,
				  const struct wshard_catalog *cat,
				  const struct wshard_rules *rules,
				  const struct wshard_options *opt,
				  struct wshard_error *err)
{
	struct wshard_plan *plan;
	struct member *m = NULL;
	struct done_order order = { 0 };
	size_t n = 0, i, j, *caps = NULL;
	int r;
	enum wshard_err rc;

	*out_plan = NULL;
	if (opt->tp < 1 || opt->tp > 4096)
		return wshard_error_set(err, WSHARD_EUSAGE, "--tp %d is out of range (1 to 4096)",
					opt->tp);
	if (strcmp(opt->target, "vllm") != 0)
		return wshard_error_set(err, WSHARD_EUSAGE,
					"unknown target '%s' (known: vllm)", opt->target);
	if (opt->max_file_size == 0)
		return wshard_error_set(err, WSHARD_EUSAGE, "--max-file-size must be positive");
	if (opt->has_dtype && !wshard_dtype_is_convertible(opt->dtype))
		return wshard_error_set(err, WSHARD_EUSAGE,
					"--dtype %s: only bf16, f16 and f32 are targets",
					wshard_dtype_name(opt->dtype));
	plan = calloc(1, sizeof(*plan));
	if (!plan)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	plan->tp = opt->tp;
	plan->opt = *opt;
	plan->cat = cat;
	plan->rules_name = strdup(rules->name);
	plan->ranks = calloc((size_t)opt->tp, sizeof(*plan->ranks));
	caps = calloc((size_t)opt->tp, sizeof(*caps));
	if (!plan->rules_name || !plan->ranks || !caps) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	for (r = 0; r < opt->tp; r++)
		plan->ranks[r].rank = r;
	rc = match_sources(plan, rules, &m, &n, err);
	if (rc)
		goto out;
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && strcmp(m[j].out, m[i].out) == 0; j++)
			;
		rc = build_group(plan, rules, &m[i], j - i, caps, err);
		if (rc)
			goto out;
	}
	rc = build_extras(plan, rules, count_layers(plan, rules), caps, err);
	if (rc)
		goto out;
	rc = done_order_init(&order, cat, err);
	for (r = 0; r < opt->tp && !rc; r++)
		rc = layout_rank(plan, &order, &plan->ranks[r], err);
out:
	free(order.file_rank);
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
	for (r = 0; plan->ranks && r < plan->tp; r++) {
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
	free(plan->ranks);
	free(plan->rules_name);
	free(plan);
}
