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
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "util.h"
#include "dtype.h"
#include "safetensors.h"
#include "catalog.h"
#include "manifest.h"

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
	/* a deinterleaved piece counts blocks: named in rows */
	if (p->di_rows) {
		*r0 = p->row0 * p->di_rows;
		*r1 = (p->row0 + p->nrows) * p->di_rows;
	}
}

/* The tree form of an entry's sources, for the entries the text form
 * leaves to jansson: the same members in the same order as put_piece. */
static json_t *json_range(uint64_t a, uint64_t b)
{
	return json_pack("[II]", (json_int_t)a, (json_int_t)b);
}

json_t *manifest_sources_json(const struct wshard_plan *plan,
			      const struct wshard_out_tensor *t)
{
	json_t *a = json_array();
	size_t k;

	for (k = 0; a && k < t->npieces; k++) {
		const struct wshard_piece *p = &t->pieces[k];
		json_t *o = NULL;

		switch (p->kind) {
		case WSHARD_PIECE_COPY: {
			uint64_t r0, r1;

			piece_rows(plan, p, &r0, &r1);
			o = json_pack("{s:s,s:o}", "tensor", plan->cat->tensors[p->src].name,
				      "rows", json_range(r0, r1));
			if (o && p->di_rows) {
				json_object_set_new(o, "deinterleaved", json_integer((json_int_t)p->di_rows));
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
			break;
		}
		case WSHARD_PIECE_ZERO:
			o = json_pack("{s:I}", "zeros", (json_int_t)p->len);
			break;
		case WSHARD_PIECE_CONST:
			o = json_pack("{s:f}", "value", p->prov_value);
			break;
		}
		json_array_append_new(a, o);
	}
	return a;
}


struct ebuf {
	char *p;
	size_t len, cap;
	bool oom;
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
	char d[24];
	int i = (int)sizeof(d);
	long long s = (long long)v;
	unsigned long long u = s < 0 ? 0ULL - (unsigned long long)s : (unsigned long long)s;

	do {
		d[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (s < 0)
		d[--i] = '-';
	put(b, d + i, sizeof(d) - (size_t)i);
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

static void put_str(struct ebuf *b, const char *s)
{
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

static void put_piece(struct ebuf *b, const struct wshard_plan *plan,
		      const struct wshard_piece *p, int d)
{
	put(b, "{", 1);
	if (p->kind == WSHARD_PIECE_ZERO) {
		put_key(b, d + 1, "zeros", true);
		put_int(b, p->len);
	} else {
		uint64_t r0, r1;

		piece_rows(plan, p, &r0, &r1);
		put_key(b, d + 1, "tensor", true);
		put_str(b, plan->cat->tensors[p->src].name);
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
	}
	put_nl(b, d);
	put(b, "}", 1);
}

/* True when every string of t's entry is plain and it has no value piece. */
static bool entry_plain(const struct wshard_plan *plan, const struct wshard_out_tensor *t,
			const char *file, const char *checksum)
{
	size_t k;

	if (!plain(t->name) || !plain(file) || !plain(checksum) ||
	    !plain(wshard_dtype_name(t->dtype)))
		return false;
	for (k = 0; k < t->npieces; k++) {
		const struct wshard_piece *p = &t->pieces[k];

		if (p->kind == WSHARD_PIECE_COPY ? !plain(plan->cat->tensors[p->src].name)
						 : p->kind != WSHARD_PIECE_ZERO)
			return false;
	}
	return true;
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
	struct ebuf b = { *buf, 0, *cap, false };
	size_t k;
	int i;

	*len = 0;
	if (!entry_plain(plan, t, file, checksum))
		return 0;
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
	put_key(&b, d + 1, "sources", false);
	put_list_open(&b, t->npieces);
	for (k = 0; k < t->npieces; k++) {
		if (k)
			put(&b, ",", 1);
		put_nl(&b, d + 2);
		put_piece(&b, plan, &t->pieces[k], d + 2);
	}
	put_list_close(&b, d + 1, t->npieces);
	put_nl(&b, d);
	put(&b, "}", 1);
	*buf = b.p;
	*cap = b.cap;
	if (b.oom)
		return -1;
	*len = b.len;
	return 1;
}
