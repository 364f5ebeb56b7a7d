/*
 * st_header.c - validation of a safetensors header: the JSON itself
 * (UTF-8, no duplicate key, messages that say where a problem is), then
 * every entry (dtype, shape, offsets against the data size) and the
 * tiling of the data by the tensors, with no gap and no overlap.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "safetensors.h"
#include "st_impl.h"
#include "base/util.h"

/* ------------------------------------------------------------------ */
/* JSON error locations                                                */
/* ------------------------------------------------------------------ */

/* Where in the header a key-level JSON error happened. */
struct jloc {
	const char *key;	/* raw (still escaped) text of the key */
	size_t key_len;
	int depth;		/* 1 for a tensor name, 2 inside an entry */
	const char *parent;	/* the depth-1 key holding it */
	size_t parent_len;
};

#define JLOC_STACK 64

/*
 * Finds the last object key that ends at or before byte pos of the JSON
 * text s.  jansson reports a duplicate key or a key holding a NUL byte
 * right after reading it, with pos just past its closing quote; the text
 * before pos is then well-formed JSON, which this scanner relies on.
 */
static void json_locate(const char *s, size_t pos, struct jloc *loc)
{
	char stack[JLOC_STACK];
	const char *top = NULL;
	size_t top_len = 0, i = 0, start;
	bool expect_key = false;
	int depth = 0;

	memset(loc, 0, sizeof(*loc));
	while (i < pos) {
		char c = s[i];

		if (c == '"') {
			start = ++i;
			while (i < pos && s[i] != '"')
				i += (s[i] == '\\' && i + 1 < pos) ? 2 : 1;
			if (expect_key && depth >= 1 && depth <= JLOC_STACK &&
			    stack[depth - 1] == '{') {
				loc->key = s + start;
				loc->key_len = i - start;
				loc->depth = depth;
				if (depth == 1) {
					top = loc->key;
					top_len = loc->key_len;
				}
				loc->parent = depth == 2 ? top : NULL;
				loc->parent_len = depth == 2 ? top_len : 0;
			}
			expect_key = false;
			i++;
			continue;
		}
		switch (c) {
		case '{':
		case '[':
			if (depth < JLOC_STACK)
				stack[depth] = c;
			depth++;
			expect_key = c == '{';
			break;
		case '}':
		case ']':
			if (depth > 0)
				depth--;
			expect_key = false;
			break;
		case ',':
			expect_key = depth >= 1 && depth <= JLOC_STACK &&
				     stack[depth - 1] == '{';
			break;
		}
		i++;
	}
}

/* Turns a jansson load error into a message naming the cause. */
static enum wshard_err json_fail(const char *path, const char *hdr, size_t n,
				 const json_error_t *jerr,
				 struct wshard_error *err)
{
	enum json_error_code code = json_error_code(jerr);
	char k[3 * QUOTE_MAX], p[3 * QUOTE_MAX];
	struct jloc loc;
	size_t pos;

	if (code == json_error_out_of_memory)
		return st_nomem(err, path);
	if (code == json_error_invalid_utf8)
		return st_bad(err, path, "header is not valid UTF-8 (byte %d)",
			   jerr->position);
	if (code != json_error_duplicate_key &&
	    code != json_error_null_byte_in_key)
		return st_bad(err, path, "header is not valid JSON: %s (byte %d)",
			   st_quote(k, sizeof(k), jerr->text, strlen(jerr->text)),
			   jerr->position);

	pos = jerr->position < 0 ? 0 : (size_t)jerr->position;
	json_locate(hdr, pos < n ? pos : n, &loc);
	st_quote(k, sizeof(k), loc.key ? loc.key : "", loc.key_len);
	st_quote(p, sizeof(p), loc.parent ? loc.parent : "", loc.parent_len);
	if (code == json_error_duplicate_key) {
		if (loc.depth == 1 && !strcmp(k, METADATA_KEY))
			return st_bad(err, path, "duplicate " METADATA_KEY);
		if (loc.depth == 1)
			return st_bad(err, path, "duplicate tensor name '%s'", k);
		if (loc.depth == 2 && !strcmp(p, METADATA_KEY))
			return st_bad(err, path, "duplicate " METADATA_KEY
				   " key '%s'", k);
		if (loc.depth == 2)
			return st_bad(err, path, "tensor '%s': duplicate key '%s'",
				   p, k);
		return st_bad(err, path, "duplicate key '%s' in the header (byte %d)",
			   k, jerr->position);
	}
	if (loc.depth == 1)
		return st_bad(err, path, "tensor name '%s' contains a NUL byte", k);
	if (loc.depth == 2 && !strcmp(p, METADATA_KEY))
		return st_bad(err, path, METADATA_KEY " key '%s' contains a NUL byte",
			   k);
	if (loc.depth == 2)
		return st_bad(err, path, "tensor '%s': key '%s' contains a NUL byte",
			   p, k);
	return st_bad(err, path, "key '%s' in the header contains a NUL byte (byte %d)",
		   k, jerr->position);
}

/* ------------------------------------------------------------------ */
/* Header validation                                                   */
/* ------------------------------------------------------------------ */

/* A JSON string without embedded NUL, or NULL. */
static const char *json_cstr(const json_t *v)
{
	const char *s;

	if (!json_is_string(v))
		return NULL;
	s = json_string_value(v);
	if (strlen(s) != json_string_length(v))
		return NULL;
	return s;
}

static enum wshard_err parse_meta(struct wshard_st *st, json_t *obj,
				  struct wshard_error *err)
{
	char k[3 * QUOTE_MAX];
	const char *key, *value;
	json_t *v;
	size_t i = 0;

	if (!json_is_object(obj))
		return st_bad(err, st->path, METADATA_KEY " is not a JSON object");
	st->meta = calloc(json_object_size(obj) + 1, sizeof(*st->meta));
	if (!st->meta)
		return st_nomem(err, st->path);
	json_object_foreach(obj, key, v) {
		st_quote(k, sizeof(k), key, strlen(key));
		if (!json_is_string(v))
			return st_bad(err, st->path, METADATA_KEY
				   " value of '%s' is not a string", k);
		value = json_cstr(v);
		if (!value)
			return st_bad(err, st->path, METADATA_KEY
				   " value of '%s' contains a NUL byte", k);
		st->meta[i].key = strdup(key);
		st->meta[i].value = strdup(value);
		/* Count it first so that st_free releases a half pair. */
		st->nmeta = ++i;
		if (!st->meta[i - 1].key || !st->meta[i - 1].value)
			return st_nomem(err, st->path);
	}
	return WSHARD_OK;
}

static enum wshard_err parse_shape(struct wshard_st *st, const char *name,
				   json_t *arr, struct wshard_st_tensor *t,
				   struct wshard_error *err)
{
	size_t i;

	if (!json_is_array(arr))
		return st_bad(err, st->path, "tensor '%s': shape is not an array",
			   name);
	if (json_array_size(arr) > WSHARD_MAX_DIMS)
		return st_bad(err, st->path, "tensor '%s': shape has %zu dimensions, "
			   "at most %d are supported", name,
			   json_array_size(arr), WSHARD_MAX_DIMS);
	for (i = 0; i < json_array_size(arr); i++) {
		json_t *d = json_array_get(arr, i);

		if (!json_is_integer(d))
			return st_bad(err, st->path, "tensor '%s': shape dimension "
				   "%zu is not an integer", name, i);
		if (json_integer_value(d) < 0)
			return st_bad(err, st->path, "tensor '%s': shape dimension "
				   "%zu is negative (%lld)", name, i,
				   (long long)json_integer_value(d));
		t->shape[i] = (uint64_t)json_integer_value(d);
	}
	t->ndim = (int)json_array_size(arr);
	return WSHARD_OK;
}

static enum wshard_err parse_offsets(struct wshard_st *st, const char *name,
				     json_t *arr, struct wshard_st_tensor *t,
				     struct wshard_error *err)
{
	json_t *b, *e;

	if (!json_is_array(arr) || json_array_size(arr) != 2)
		return st_bad(err, st->path, "tensor '%s': data_offsets is not an "
			   "array of two integers", name);
	b = json_array_get(arr, 0);
	e = json_array_get(arr, 1);
	if (!json_is_integer(b) || !json_is_integer(e))
		return st_bad(err, st->path, "tensor '%s': data_offsets is not an "
			   "array of two integers", name);
	if (json_integer_value(b) < 0 || json_integer_value(e) < 0)
		return st_bad(err, st->path, "tensor '%s': data_offsets [%lld, %lld] "
			   "are negative", name,
			   (long long)json_integer_value(b),
			   (long long)json_integer_value(e));
	t->begin = (uint64_t)json_integer_value(b);
	t->end = (uint64_t)json_integer_value(e);
	if (t->begin > t->end)
		return st_bad(err, st->path, "tensor '%s': data_offsets [%llu, %llu] "
			   "end before they begin", name,
			   (unsigned long long)t->begin,
			   (unsigned long long)t->end);
	return WSHARD_OK;
}

/* Checks that the entry's byte range matches its shape and dtype. */
static enum wshard_err check_size(struct wshard_st *st, const char *name,
				  const struct wshard_st_tensor *t,
				  struct wshard_error *err)
{
	uint64_t data_len = st->size - st->data_start, need;
	char shape[256];
	int rc;

	rc = wshard_tensor_bytes(t->shape, t->ndim, t->dtype, &need);
	if (rc < 0 || (t->end <= data_len && t->end - t->begin != need))
		wshard_format_shape(shape, sizeof(shape), t->shape, t->ndim);
	if (rc == -1)
		return st_bad(err, st->path, "tensor '%s': shape %s of %s "
			   "overflows 64 bits", name, shape,
			   wshard_dtype_name(t->dtype));
	if (rc == -2)
		return st_bad(err, st->path, "tensor '%s': shape %s of %s is not "
			   "a whole number of bytes", name, shape,
			   wshard_dtype_name(t->dtype));
	if (t->end > data_len)
		return st_bad(err, st->path, "tensor '%s': data_offsets [%llu, %llu] "
			   "run past the end of the file (%llu bytes of data)",
			   name, (unsigned long long)t->begin,
			   (unsigned long long)t->end,
			   (unsigned long long)data_len);
	if (t->end - t->begin != need)
		return st_bad(err, st->path, "tensor '%s': data_offsets [%llu, %llu] "
			   "hold %llu bytes but shape %s of %s needs %llu", name,
			   (unsigned long long)t->begin,
			   (unsigned long long)t->end,
			   (unsigned long long)(t->end - t->begin), shape,
			   wshard_dtype_name(t->dtype),
			   (unsigned long long)need);
	return WSHARD_OK;
}

static enum wshard_err parse_entry(struct wshard_st *st, const char *key,
				   json_t *obj, struct wshard_st_tensor *t,
				   struct wshard_error *err)
{
	char name[3 * QUOTE_MAX], k[3 * QUOTE_MAX];
	json_t *dtype = NULL, *shape = NULL, *offsets = NULL, *v;
	const char *s, *field;
	enum wshard_err rc;

	st_quote(name, sizeof(name), key, strlen(key));
	if (!json_is_object(obj))
		return st_bad(err, st->path, "tensor '%s': entry is not a JSON object",
			   name);
	json_object_foreach(obj, field, v) {
		if (!strcmp(field, "dtype")) {
			dtype = v;
		} else if (!strcmp(field, "shape")) {
			shape = v;
		} else if (!strcmp(field, "data_offsets")) {
			offsets = v;
		} else {
			st_quote(k, sizeof(k), field, strlen(field));
			return st_bad(err, st->path, "tensor '%s': unknown key '%s'",
				   name, k);
		}
	}
	if (!dtype || !shape || !offsets)
		return st_bad(err, st->path, "tensor '%s': missing key '%s'", name,
			   !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

	s = json_cstr(dtype);
	if (!json_is_string(dtype))
		return st_bad(err, st->path, "tensor '%s': dtype is not a string",
			   name);
	if (!s || wshard_dtype_parse(s, &t->dtype) < 0) {
		st_quote(k, sizeof(k), json_string_value(dtype),
		      json_string_length(dtype));
		return st_bad(err, st->path, "tensor '%s': unknown dtype '%s'",
			   name, k);
	}
	rc = parse_shape(st, name, shape, t, err);
	if (rc)
		return rc;
	rc = parse_offsets(st, name, offsets, t, err);
	if (rc)
		return rc;
	return check_size(st, name, t, err);
}

static int cmp_by_offset(const void *a, const void *b)
{
	const struct wshard_st_tensor *const *pa = a, *const *pb = b;
	const struct wshard_st_tensor *x = *pa, *y = *pb;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_by_name(const void *a, const void *b)
{
	const struct wshard_st_tensor *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/*
 * Sorted by begin, the byte ranges must tile the data section exactly:
 * start at 0, no hole, no overlap, no trailing bytes.
 */
static enum wshard_err check_tiling(struct wshard_st *st,
				    struct wshard_error *err)
{
	const struct wshard_st_tensor **order = NULL, *prev = NULL;
	uint64_t data_len = st->size - st->data_start, at = 0;
	char n1[3 * QUOTE_MAX], n2[3 * QUOTE_MAX];
	enum wshard_err rc = WSHARD_OK;
	size_t i;

	order = calloc(st->ntensors + 1, sizeof(*order));
	if (!order)
		return st_nomem(err, st->path);
	for (i = 0; i < st->ntensors; i++)
		order[i] = &st->tensors[i];
	wshard_sort(order, st->ntensors, sizeof(*order), cmp_by_offset);
	for (i = 0; i < st->ntensors; i++) {
		const struct wshard_st_tensor *t = order[i];

		if (t->begin != at)	/* a message names it */
			st_quote(n1, sizeof(n1), t->name, strlen(t->name));
		if (t->begin > at && !prev) {
			rc = st_bad(err, st->path, "tensor '%s': data_offsets "
				 "[%llu, %llu] leave a %llu-byte hole at the "
				 "start of the data", n1,
				 (unsigned long long)t->begin,
				 (unsigned long long)t->end,
				 (unsigned long long)(t->begin - at));
			goto out;
		}
		if (t->begin > at) {
			st_quote(n2, sizeof(n2), prev->name, strlen(prev->name));
			rc = st_bad(err, st->path, "tensor '%s': data_offsets "
				 "[%llu, %llu] leave a %llu-byte hole after "
				 "tensor '%s' [%llu, %llu]", n1,
				 (unsigned long long)t->begin,
				 (unsigned long long)t->end,
				 (unsigned long long)(t->begin - at), n2,
				 (unsigned long long)prev->begin,
				 (unsigned long long)prev->end);
			goto out;
		}
		if (t->begin < at) {
			st_quote(n2, sizeof(n2), prev->name, strlen(prev->name));
			rc = st_bad(err, st->path, "tensor '%s': data_offsets "
				 "[%llu, %llu] overlap tensor '%s' [%llu, %llu]",
				 n1, (unsigned long long)t->begin,
				 (unsigned long long)t->end, n2,
				 (unsigned long long)prev->begin,
				 (unsigned long long)prev->end);
			goto out;
		}
		at = t->end;
		prev = t;
	}
	if (at != data_len)
		rc = st_bad(err, st->path, "%llu trailing bytes after the tensor "
			 "data (the data ends at %llu of %llu)",
			 (unsigned long long)(data_len - at),
			 (unsigned long long)at, (unsigned long long)data_len);
out:
	free(order);
	return rc;
}

/* The metadata and every tensor entry of the header object root. */
static enum wshard_err parse_entries(struct wshard_st *st, json_t *root,
				     struct wshard_error *err)
{
	char qname[3 * QUOTE_MAX];
	const char *key;
	json_t *v;
	size_t i = 0, count = json_object_size(root);
	enum wshard_err rc;

	if (json_object_get(root, METADATA_KEY))
		count--;
	st->tensors = calloc(count + 1, sizeof(*st->tensors));
	if (!st->tensors)
		return st_nomem(err, st->path);
	json_object_foreach(root, key, v) {
		if (!strcmp(key, METADATA_KEY)) {
			rc = parse_meta(st, v, err);
			if (rc)
				return rc;
			continue;
		}
		/*
		 * jansson refuses keys holding NUL at parse time; checked
		 * again so that a future jansson cannot truncate a name.
		 */
#if JANSSON_VERSION_HEX >= 0x020e00
		if (json_object_iter_key_len(json_object_key_to_iter(key)) != strlen(key))
			return st_bad(err, st->path, "tensor name '%s' contains a NUL byte",
				      st_quote(qname, sizeof(qname), key, strlen(key)));
#endif
		st->tensors[i].name = strdup(key);
		if (!st->tensors[i].name)
			return st_nomem(err, st->path);
		st->ntensors = ++i;
		rc = parse_entry(st, key, v, &st->tensors[i - 1], err);
		if (rc)
			return rc;
	}
	return WSHARD_OK;
}

/* Sorts the tensors by name; two of one name are refused. */
static enum wshard_err sort_by_name(struct wshard_st *st, struct wshard_error *err)
{
	char qname[3 * QUOTE_MAX];
	size_t i;

	wshard_sort(st->tensors, st->ntensors, sizeof(*st->tensors), cmp_by_name);
	for (i = 1; i < st->ntensors; i++)
		/* Unreachable with JSON_REJECT_DUPLICATES; kept as a guard. */
		if (!strcmp(st->tensors[i - 1].name, st->tensors[i].name))
			return st_bad(err, st->path, "duplicate tensor name '%s'",
				      st_quote(qname, sizeof(qname), st->tensors[i].name,
					       strlen(st->tensors[i].name)));
	return WSHARD_OK;
}

/*
 * The header read by st_fast.c and held to every check of the jansson
 * path; any refusal, and any header it does not take, goes back to that
 * path, so that what is refused and how stays the same.
 */
static bool parse_fast(struct wshard_st *st, const char *hdr, size_t n)
{
	struct wshard_error ignored = { 0 };
	size_t i;

	if (!st_parse_fast(st, hdr, n))
		return false;
	for (i = 0; i < st->ntensors; i++)
		if (check_size(st, "", &st->tensors[i], &ignored))
			break;
	if (i == st->ntensors && !check_tiling(st, &ignored) && !sort_by_name(st, &ignored))
		return true;
	st_clear(st);
	return false;
}

enum wshard_err st_parse_header(struct wshard_st *st, const char *hdr, size_t n,
				struct wshard_error *err)
{
	const char *nul = memchr(hdr, '\0', n);
	json_error_t jerr;
	json_t *root;
	enum wshard_err rc;

	if (nul)
		return st_bad(err, st->path, "header contains a NUL byte (byte %zu)",
			      (size_t)(nul - hdr));
	if (parse_fast(st, hdr, n))
		return WSHARD_OK;
	root = json_loadb(hdr, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY,
			  &jerr);
	if (!root)
		return json_fail(st->path, hdr, n, &jerr, err);
	if (!json_is_object(root))
		rc = st_bad(err, st->path, "header is not a JSON object");
	else
		rc = parse_entries(st, root, err);
	if (!rc)
		rc = check_tiling(st, err);
	if (!rc)
		rc = sort_by_name(st, err);
	json_decref(root);
	return rc;
}
