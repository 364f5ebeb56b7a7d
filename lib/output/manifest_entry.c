/*
 * manifest_entry.c - prints a tensor's entry of wshard.json without
 * building a JSON tree: the byte-for-byte text that json_dumps
 * (JSON_INDENT(1) | JSON_PRESERVE_ORDER) gives for the object manifest.c
 * would pack, shifted right by its depth.  A checkpoint with 100k small
 * tensors spent most of its manifest's time packing, printing and freeing
 * those trees.  An entry whose text jansson would escape or check (a
 * string with a quote, a backslash, a control or non-ASCII byte) or that
 * holds a floating-point value is left to the tree, so that the two
 * paths never differ; that tree's sources are built here too
 * (manifest_sources_json), beside the text they must equal.
 *
 * A stacked tensor's pieces come an expert at a time, each expert's
 * sources named alike but for its number: they are written once, as a
 * run {"e": [e0, e1], "sources": [...]} whose names hold "{e}" (see
 * wshard-convert(1), Manifest).  Written out, the 512 experts of each of
 * a 94k-tensor MoE's stacked tensors were 57 MB of its manifest.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/util.h"
#include "base/dtype.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "manifest_entry.h"

/*
 * The source rows a copied piece names: its own, except for a tensor
 * copied whole as one byte run, which names all the tensor's rows (a
 * rule's "rows" view keeps the rows its pieces count).
 */
static void piece_rows(const struct wshard_plan *plan, const struct wshard_piece *p,
		       uint64_t *r0, uint64_t *r1)
{
	const struct wshard_st_tensor *info = plan->cat->tensors[p->src].info;

	*r0 = p->row0;
	*r1 = p->row0 + p->nrows;
	if (info->ndim && wshard_plan_src_rows(plan, p->src) != info->shape[0] &&
	    !(plan->view_rows && plan->view_rows[p->src])) {
		*r0 = 0;
		*r1 = info->shape[0];
	}
	/* a deinterleaved piece counts blocks: named in rows (one whose
	 * block is a column cut counts rows) */
	if (p->di_rows && !p->prov_ncols) {
		*r0 = p->row0 * p->di_rows;
		*r1 = (p->row0 + p->nrows) * p->di_rows;
	}
}

/* The zero elements after each row of a padded column piece. */
static uint64_t pad_elems(const struct wshard_piece *p)
{
	return p->pad && p->prov_ncols ? p->pad / (p->out_ncols / p->prov_ncols) : 0;
}

/* A COPY piece's provenance but its source's name, as printed. */
struct prov {
	uint64_t r0, r1, c0, c1;
	uint64_t di_rows, row_dims, dim;
	uint64_t pad;
	bool cols, tr, beside, neg_exp;
	uint8_t add, int4, rep, skip, cut;
	float mul, addend;
};

static void piece_prov(const struct wshard_plan *plan, const struct wshard_piece *p,
		       struct prov *v)
{
	memset(v, 0, sizeof(*v));
	piece_rows(plan, p, &v->r0, &v->r1);
	v->di_rows = p->di_rows;
	if (!p->di_rows)
		v->row_dims = (uint64_t)wshard_plan_src_row_dims(plan, p->src);
	v->tr = p->tr_rows && !p->di_rows;
	if (v->tr)
		v->dim = (uint64_t)p->prov_dim;
	v->cols = p->prov_ncols != 0;
	v->c0 = p->prov_col0;
	v->c1 = (uint64_t)p->prov_col0 + p->prov_ncols;
	v->beside = p->out_stride != 0;
	v->pad = pad_elems(p);
	v->mul = p->mul;
	v->neg_exp = p->neg_exp != 0;
	v->int4 = p->int4;
	v->rep = p->tr_rep;
	v->skip = p->tr_skip;
	v->cut = p->tr_cut;
	v->add = p->add;
	v->addend = p->add ? p->addend : 0;
}

/* a's provenance, when a is a COPY with b's, but for its name */
static bool prov_is(const struct wshard_plan *plan, const struct prov *a,
		    const struct wshard_piece *b)
{
	struct prov y;

	if (b->kind != WSHARD_PIECE_COPY)
		return false;
	piece_prov(plan, b, &y);
	return !memcmp(a, &y, sizeof(y));
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The decimal number at s (no leading zero, at most 18 digits) in *v;
 * returns its length, 0 when s holds none. */
static size_t number_at(const char *s, uint64_t *v)
{
	size_t n = 0;

	*v = 0;
	if (s[0] == '0' && is_digit(s[1]))
		return 0;
	while (is_digit(s[n]) && n < 18)
		*v = *v * 10 + (uint64_t)(s[n++] - '0');
	return is_digit(s[n]) ? 0 : n;
}

/*
 * True when a and b differ only in one decimal number, b's one more than
 * a's: that number's start in *pre, its end in a in *suf, its value in *v.
 */
static bool next_number(const char *a, const char *b, size_t *pre, size_t *suf,
			uint64_t *v)
{
	size_t i = 0, na, nb;
	uint64_t w;

	while (a[i] && a[i] == b[i])
		i++;
	while (i && is_digit(a[i - 1]))
		i--;
	na = number_at(a + i, v);
	nb = number_at(b + i, &w);
	if (!na || !nb || w != *v + 1 || strcmp(a + i + na, b + i + nb))
		return false;
	*pre = i;
	*suf = i + na;
	return true;
}

/* True when name is tmpl with its number (at [pre, suf)) replaced by v. */
static bool name_is(const char *name, const char *tmpl, size_t pre, size_t suf,
		    uint64_t v)
{
	char d[WSHARD_UTOA_MAX], *end = d + sizeof(d), *at = wshard_utoa(v, end);

	if (strncmp(name, tmpl, pre) || strncmp(name + pre, at, (size_t)(end - at)))
		return false;
	return !strcmp(name + pre + (end - at), tmpl + suf);
}

#define RUN_MAX_PERIOD 4	/* pieces an expert: gate and up, each maybe cut */
#define RUN_MIN 3		/* experts, for a run to be worth its lines */

/* The run that starts at piece k: experts [e0, e0 + count), period pieces
 * each; member j's name is that of piece k + j, its number at [pre, suf). */
struct run {
	size_t period, count;
	uint64_t e0;
	size_t pre[RUN_MAX_PERIOD], suf[RUN_MAX_PERIOD];
	struct prov prov[RUN_MAX_PERIOD];
};

static const char *src_name(const struct wshard_plan *plan, const struct wshard_piece *p)
{
	return plan->cat->tensors[p->src].name;
}

/* True when t's pieces from k on start a run (of at least RUN_MIN). */
static bool run_at(const struct wshard_plan *plan, const struct wshard_out_tensor *t,
		   size_t k, struct run *r)
{
	const struct wshard_piece *pc = t->pieces;
	size_t p, j;

	for (p = 1; p <= RUN_MAX_PERIOD && k + RUN_MIN * p <= t->npieces; p++) {
		bool ok = true;

		for (j = 0; j < p && ok; j++) {
			const struct wshard_piece *a = &pc[k + j], *b = &pc[k + p + j];
			uint64_t v;

			if (a->kind != WSHARD_PIECE_COPY)
				return false;	/* no period starts here */
			piece_prov(plan, a, &r->prov[j]);
			ok = prov_is(plan, &r->prov[j], b) && !strpbrk(src_name(plan, a), "{}") &&
			     next_number(src_name(plan, a), src_name(plan, b),
					 &r->pre[j], &r->suf[j], &v) &&
			     (j == 0 ? (r->e0 = v, true) : v == r->e0);
		}
		if (!ok)
			continue;
		r->period = p;
		for (r->count = 2; k + (r->count + 1) * p <= t->npieces; r->count++) {
			const struct wshard_piece *b = &pc[k + r->count * p];

			for (j = 0; j < p; j++)
				if (!prov_is(plan, &r->prov[j], &b[j]) ||
				    !name_is(src_name(plan, &b[j]), src_name(plan, &pc[k + j]),
					     r->pre[j], r->suf[j], r->e0 + r->count))
					break;
			if (j < p)
				break;
		}
		if (r->count >= RUN_MIN)
			return true;
	}
	return false;
}

/* Member j's name with "{e}" for its number (malloc'd; NULL when out of
 * memory), as both forms print it. */
static char *run_name(const struct wshard_plan *plan, const struct wshard_out_tensor *t,
		      size_t k, const struct run *r, size_t j)
{
	const char *name = src_name(plan, &t->pieces[k + j]);
	size_t tail = strlen(name + r->suf[j]);
	char *s = malloc(r->pre[j] + 3 + tail + 1);

	if (s) {
		memcpy(s, name, r->pre[j]);
		memcpy(s + r->pre[j], "{e}", 3);
		memcpy(s + r->pre[j] + 3, name + r->suf[j], tail + 1);
	}
	return s;
}

/* The tree form of an entry's sources, for the entries the text form
 * leaves to jansson: the same members in the same order as put_piece. */
static json_t *json_range(uint64_t a, uint64_t b)
{
	return json_pack("[II]", (json_int_t)a, (json_int_t)b);
}

/*
 * A piece of a rule's "interleave": how many rows apart its output rows
 * are (the number of parts; tr_ostride and out_ncols count output bytes,
 * tr_width and tr_es source ones).
 */
static uint64_t interleaved(const struct wshard_piece *p)
{
	return (uint64_t)p->tr_ostride * p->tr_width / (p->out_ncols * p->tr_es);
}

static json_t *piece_json(const struct wshard_plan *plan, const struct wshard_piece *p,
			  const char *name)
{
	json_t *o = NULL;

	switch (p->kind) {
	case WSHARD_PIECE_COPY: {
		uint64_t r0, r1;

		piece_rows(plan, p, &r0, &r1);
		o = json_pack("{s:s,s:o}", "tensor", name, "rows", json_range(r0, r1));
		if (o && p->di_rows) {
			json_object_set_new(o, "deinterleaved", json_integer((json_int_t)p->di_rows));
			if (p->prov_ncols)
				json_object_set_new(o, "cols", json_range(p->prov_col0,
									  p->prov_col0 + p->prov_ncols));
			break;
		}
		if (o && wshard_plan_src_row_dims(plan, p->src))
			json_object_set_new(o, "row_dims",
					    json_integer(wshard_plan_src_row_dims(plan, p->src)));
		if (o && p->tr_rows)
			json_object_set_new(o, "cols_dim", json_integer(p->prov_dim));
		if (o && p->prov_ncols)
			json_object_set_new(o, "cols",
					    json_range(p->prov_col0, p->prov_col0 + p->prov_ncols));
		if (o && p->tr_rows)
			json_object_set_new(o, "transposed", json_true());
		if (o && p->tr_ostride)
			json_object_set_new(o, "interleaved",
					    json_integer((json_int_t)interleaved(p)));
		if (o && p->out_stride)
			json_object_set_new(o, "beside", json_true());
		if (o && p->pad)
			json_object_set_new(o, "pad", json_integer((json_int_t)pad_elems(p)));
		if (o && p->mul != 0)
			json_object_set_new(o, "times", json_real(p->mul));
		if (o && p->neg_exp)
			json_object_set_new(o, "neg_exp", json_true());
		if (o && p->int4)
			json_object_set_new(o, "int4", json_string(wshard_int4_text(p->int4)));
		if (o && p->tr_rep)
			json_object_set_new(o, "repeat", json_integer(p->tr_rep));
		if (o && (p->tr_skip || p->tr_cut))
			json_object_set_new(o, "kept",
					    json_range(p->tr_skip, (uint64_t)p->tr_rows * p->tr_rep -
								   p->tr_cut));
		if (o && p->add == WSHARD_ADD_SOURCE)
			json_object_set_new(o, "minus_mean", json_real(-p->addend));
		if (o && p->add == WSHARD_ADD_OUTPUT)
			json_object_set_new(o, "plus", json_real(p->addend));
		break;
	}
	case WSHARD_PIECE_ZERO:
		o = json_pack("{s:I}", "zeros", (json_int_t)p->len);
		break;
	case WSHARD_PIECE_CONST:
		/* JSON has no infinities: a "pad_value" of -inf is "-inf" */
		o = json_pack("{s:o}", "value",
			      isinf(p->prov_value) ? json_string(p->prov_value < 0 ? "-inf" : "inf")
						   : json_real(p->prov_value));
		if (o && p->len > p->value_len)
			json_object_set_new(o, "count", json_integer((json_int_t)(p->len / p->value_len)));
		break;
	case WSHARD_PIECE_ARANGE:
		o = json_pack("{s:[I,I]}", "arange", (json_int_t)p->prov_value,
			      (json_int_t)p->prov_value + (json_int_t)(p->len / 8));
		break;
	case WSHARD_PIECE_SINUSOID:
		o = json_pack("{s:[I,I]}", "sinusoid",
			      (json_int_t)(p->len / 4 / (uint64_t)p->prov_value),
			      (json_int_t)p->prov_value);
		break;
	}
	return o;
}

static json_t *run_json(const struct wshard_plan *plan, const struct wshard_out_tensor *t,
			size_t k, const struct run *r)
{
	json_t *a = json_array();
	size_t j;

	for (j = 0; a && j < r->period; j++) {
		char *name = run_name(plan, t, k, r, j);

		json_array_append_new(a, name ? piece_json(plan, &t->pieces[k + j], name) : NULL);
		free(name);
	}
	return json_pack("{s:o,s:o}", "e", json_range(r->e0, r->e0 + r->count), "sources", a);
}

json_t *manifest_sources_json(const struct wshard_plan *plan,
			      const struct wshard_out_tensor *t)
{
	json_t *a = json_array();
	size_t k = 0;

	while (a && k < t->npieces) {
		const struct wshard_piece *p = &t->pieces[k];
		struct run r;

		if (run_at(plan, t, k, &r)) {
			json_array_append_new(a, run_json(plan, t, k, &r));
			k += r.period * r.count;
			continue;
		}
		json_array_append_new(a, piece_json(plan, p, p->kind == WSHARD_PIECE_COPY ?
							    src_name(plan, p) : NULL));
		k++;
	}
	return a;
}


struct ebuf {
	char *p;
	size_t len, cap;
	bool oom;
	bool odd;	/* a string jansson would escape, or a float: the tree's */
};

static void put(struct ebuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = WSHARD_MAX(b->cap * 2, b->len + n + 256);
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void put_s(struct ebuf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* A newline and n spaces of indent. */
static void put_nl(struct ebuf *b, int n)
{
	static const char nl[] = "\n                                ";

	put(b, nl, (size_t)n + 1);
}

/* json_int_t as jansson prints it (uint64 values cast as manifest.c does). */
static void put_int(struct ebuf *b, uint64_t v)
{
	char d[WSHARD_UTOA_MAX + 1], *end = d + sizeof(d), *at;
	long long s = (long long)v;

	at = wshard_utoa(s < 0 ? 0ULL - (unsigned long long)s : (unsigned long long)s, end);
	if (s < 0)
		*--at = '-';
	put(b, at, (size_t)(end - at));
}

/* "key": at the start of a member line */
static void put_key(struct ebuf *b, int depth, const char *key, bool first)
{
	if (!first)
		put(b, ",", 1);
	put_nl(b, depth);
	put(b, "\"", 1);
	put_s(b, key);
	put(b, "\": ", 3);
}

/* True when jansson would print s between quotes unchanged. */
static bool plain(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (!s)
		return false;
	for (; *p; p++)
		if (*p < 0x20 || *p >= 0x7f || *p == '"' || *p == '\\')
			return false;
	return true;
}

/* s between quotes; a string jansson would escape makes the entry odd */
static void put_str(struct ebuf *b, const char *s)
{
	if (!plain(s)) {
		b->odd = true;
		if (!s)
			return;
	}
	put(b, "\"", 1);
	put_s(b, s);
	put(b, "\"", 1);
}

/* [a, b] as an array member at depth (its elements one deeper) */
static void put_range(struct ebuf *b, int depth, uint64_t a, uint64_t c)
{
	put(b, "[", 1);
	put_nl(b, depth + 1);
	put_int(b, a);
	put(b, ",", 1);
	put_nl(b, depth + 1);
	put_int(b, c);
	put_nl(b, depth);
	put(b, "]", 1);
}

/* A piece at depth d, a COPY named name (its source's, or its run's). */
static void put_piece(struct ebuf *b, const struct wshard_plan *plan,
		      const struct wshard_piece *p, int d, const char *name)
{
	put(b, "{", 1);
	if (p->kind == WSHARD_PIECE_CONST || p->kind == WSHARD_PIECE_ARANGE ||
	    p->kind == WSHARD_PIECE_SINUSOID || p->mul != 0 ||
	    p->neg_exp || p->add || p->int4 || p->tr_rep) {
		b->odd = true;	/* a float or a rare kind: jansson writes it */
	} else if (p->kind == WSHARD_PIECE_ZERO) {
		put_key(b, d + 1, "zeros", true);
		put_int(b, p->len);
	} else {
		uint64_t r0, r1;

		piece_rows(plan, p, &r0, &r1);
		put_key(b, d + 1, "tensor", true);
		put_str(b, name);
		put_key(b, d + 1, "rows", false);
		put_range(b, d + 1, r0, r1);
		if (p->di_rows) {
			put_key(b, d + 1, "deinterleaved", false);
			put_int(b, p->di_rows);
		} else if (wshard_plan_src_row_dims(plan, p->src)) {
			put_key(b, d + 1, "row_dims", false);
			put_int(b, (uint64_t)wshard_plan_src_row_dims(plan, p->src));
		}
		if (p->tr_rows && !p->di_rows) {
			put_key(b, d + 1, "cols_dim", false);
			put_int(b, (uint64_t)p->prov_dim);
		}
		if (p->prov_ncols) {
			put_key(b, d + 1, "cols", false);
			put_range(b, d + 1, p->prov_col0, p->prov_col0 + p->prov_ncols);
		}
		if (p->tr_rows && !p->di_rows) {
			put_key(b, d + 1, "transposed", false);
			put_s(b, "true");
		}
		if (p->tr_ostride) {
			put_key(b, d + 1, "interleaved", false);
			put_int(b, interleaved(p));
		}
		if (p->out_stride) {
			put_key(b, d + 1, "beside", false);
			put_s(b, "true");
		}
		if (p->pad) {
			put_key(b, d + 1, "pad", false);
			put_int(b, pad_elems(p));
		}
	}
	put_nl(b, d);
	put(b, "}", 1);
}

static void put_list_open(struct ebuf *b, size_t n)
{
	put(b, n ? "[" : "[]", n ? 1 : 2);
}

static void put_list_close(struct ebuf *b, int depth, size_t n)
{
	if (n) {
		put_nl(b, depth);
		put(b, "]", 1);
	}
}

int manifest_entry_print(const struct wshard_plan *plan, const struct wshard_out_tensor *t,
			 const char *file, const char *checksum, int d,
			 char **buf, size_t *len, size_t *cap)
{
	struct ebuf b = { *buf, 0, *cap, false, false };
	size_t k;
	int i;

	*len = 0;
	put(&b, "{", 1);
	put_key(&b, d + 1, "name", true);
	put_str(&b, t->name);
	put_key(&b, d + 1, "dtype", false);
	put_str(&b, wshard_dtype_name(t->dtype));
	put_key(&b, d + 1, "shape", false);
	put_list_open(&b, (size_t)t->ndim);
	for (i = 0; i < t->ndim; i++) {
		if (i)
			put(&b, ",", 1);
		put_nl(&b, d + 2);
		put_int(&b, t->shape[i]);
	}
	put_list_close(&b, d + 1, (size_t)t->ndim);
	put_key(&b, d + 1, "file", false);
	put_str(&b, file);
	put_key(&b, d + 1, "data_offsets", false);
	put_range(&b, d + 1, t->begin, t->end);
	put_key(&b, d + 1, "checksum", false);
	put_str(&b, checksum);
	if (t->quant) {
		put_key(&b, d + 1, "quant", false);
		put_str(&b, wshard_quant_role_name(t->quant));
	}
	put_key(&b, d + 1, "sources", false);
	put_list_open(&b, t->npieces);
	for (k = 0; k < t->npieces;) {
		struct run r;
		size_t j;

		if (k)
			put(&b, ",", 1);
		put_nl(&b, d + 2);
		if (!run_at(plan, t, k, &r)) {
			put_piece(&b, plan, &t->pieces[k], d + 2,
				  t->pieces[k].kind == WSHARD_PIECE_COPY ?
				  src_name(plan, &t->pieces[k]) : NULL);
			k++;
			continue;
		}
		put(&b, "{", 1);
		put_key(&b, d + 3, "e", true);
		put_range(&b, d + 3, r.e0, r.e0 + r.count);
		put_key(&b, d + 3, "sources", false);
		put(&b, "[", 1);
		for (j = 0; j < r.period; j++) {
			char *name = run_name(plan, t, k, &r, j);

			if (j)
				put(&b, ",", 1);
			put_nl(&b, d + 4);
			if (!name)
				b.oom = true;
			else
				put_piece(&b, plan, &t->pieces[k + j], d + 4, name);
			free(name);
		}
		put_nl(&b, d + 3);
		put(&b, "]", 1);
		put_nl(&b, d + 2);
		put(&b, "}", 1);
		k += r.period * r.count;
	}
	put_list_close(&b, d + 1, t->npieces);
	put_nl(&b, d);
	put(&b, "}", 1);
	*buf = b.p;
	*cap = b.cap;
	if (b.oom)
		return -1;
	if (b.odd)
		return 0;	/* printed for nothing: rare (see the top) */
	*len = b.len;
	return 1;
}
