/*
 * safetensors.c - strict reader and header writer for the safetensors
 * format.
 *
 * The reader enforces every rule of OUTPUT-CONTRACT.md section 6, and a
 * little more than the reference reader: duplicate tensor names and names
 * holding a NUL byte are rejected instead of being silently collapsed or
 * truncated.  Sizes taken from the file are bounded before use and every
 * shape x dtype product is overflow-checked, so no input can make the
 * reader allocate, read or index out of bounds.  Only the header is read
 * at open; tensor data is read on demand with pread.
 *
 * The writer side (wshard_st_layout) produces the header bytes for a file
 * whose tensors follow back to back in the given order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "wshard.h"
#include "dtype.h"
#include "safetensors.h"

#define METADATA_KEY "__metadata__"

/* Longest piece of a name or key quoted in a message. */
#define QUOTE_MAX 200

/* struct wshard_st plus what the public struct does not need to show. */
struct st_priv {
	struct wshard_st pub;
	bool owns_fd;
};

/* ------------------------------------------------------------------ */
/* Messages                                                            */
/* ------------------------------------------------------------------ */

/* Records WSHARD_EINVAL with "'path': " in front of the formatted reason. */
static enum wshard_err bad(struct wshard_error *err, const char *path,
			   const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum wshard_err bad(struct wshard_error *err, const char *path,
			   const char *fmt, ...)
{
	char reason[WSHARD_ERRMAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return wshard_error_set(err, WSHARD_EINVAL, "'%s': %s", path, reason);
}

static enum wshard_err nomem(struct wshard_error *err, const char *path)
{
	return wshard_error_set(err, WSHARD_ENOMEM,
				"out of memory reading '%s'", path);
}

/*
 * Copies len bytes of s into buf for quoting in a one-line message:
 * control bytes become \xNN and a long string is cut (at a UTF-8
 * character boundary) and marked with "...".
 */
static const char *quote(char *buf, size_t size, const char *s, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (o + 8 >= size || i >= QUOTE_MAX) {
			/* Do not leave half a multi-byte character behind. */
			while (o > 0 && (buf[o - 1] & 0xc0) == 0x80)
				o--;
			if (o > 0 && (buf[o - 1] & 0xc0) == 0xc0)
				o--;
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	buf[o] = '\0';
	return buf;
}

const char *wshard_format_shape(char *buf, size_t size, const uint64_t *shape,
				int ndim)
{
	size_t o = 0;
	int i;

	o += (size_t)snprintf(buf, size, "[");
	for (i = 0; i < ndim && o < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%llu",
				      i ? ", " : "",
				      (unsigned long long)shape[i]);
	if (o < size)
		snprintf(buf + o, size - o, "]");
	return buf;
}

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
		return nomem(err, path);
	if (code == json_error_invalid_utf8)
		return bad(err, path, "header is not valid UTF-8 (byte %d)",
			   jerr->position);
	if (code != json_error_duplicate_key &&
	    code != json_error_null_byte_in_key)
		return bad(err, path, "header is not valid JSON: %s (byte %d)",
			   quote(k, sizeof(k), jerr->text, strlen(jerr->text)),
			   jerr->position);

	pos = jerr->position < 0 ? 0 : (size_t)jerr->position;
	json_locate(hdr, pos < n ? pos : n, &loc);
	quote(k, sizeof(k), loc.key ? loc.key : "", loc.key_len);
	quote(p, sizeof(p), loc.parent ? loc.parent : "", loc.parent_len);
	if (code == json_error_duplicate_key) {
		if (loc.depth == 1 && !strcmp(k, METADATA_KEY))
			return bad(err, path, "duplicate " METADATA_KEY);
		if (loc.depth == 1)
			return bad(err, path, "duplicate tensor name '%s'", k);
		if (loc.depth == 2 && !strcmp(p, METADATA_KEY))
			return bad(err, path, "duplicate " METADATA_KEY
				   " key '%s'", k);
		if (loc.depth == 2)
			return bad(err, path, "tensor '%s': duplicate key '%s'",
				   p, k);
		return bad(err, path, "duplicate key '%s' in the header (byte %d)",
			   k, jerr->position);
	}
	if (loc.depth == 1)
		return bad(err, path, "tensor name '%s' contains a NUL byte", k);
	if (loc.depth == 2 && !strcmp(p, METADATA_KEY))
		return bad(err, path, METADATA_KEY " key '%s' contains a NUL byte",
			   k);
	if (loc.depth == 2)
		return bad(err, path, "tensor '%s': key '%s' contains a NUL byte",
			   p, k);
	return bad(err, path, "key '%s' in the header contains a NUL byte (byte %d)",
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
		return bad(err, st->path, METADATA_KEY " is not a JSON object");
	st->meta = calloc(json_object_size(obj) + 1, sizeof(*st->meta));
	if (!st->meta)
		return nomem(err, st->path);
	json_object_foreach(obj, key, v) {
		quote(k, sizeof(k), key, strlen(key));
		if (!json_is_string(v))
			return bad(err, st->path, METADATA_KEY
				   " value of '%s' is not a string", k);
		value = json_cstr(v);
		if (!value)
			return bad(err, st->path, METADATA_KEY
				   " value of '%s' contains a NUL byte", k);
		st->meta[i].key = strdup(key);
		st->meta[i].value = strdup(value);
		/* Count it first so that st_free releases a half pair. */
		st->nmeta = ++i;
		if (!st->meta[i - 1].key || !st->meta[i - 1].value)
			return nomem(err, st->path);
	}
	return WSHARD_OK;
}

static enum wshard_err parse_shape(struct wshard_st *st, const char *name,
				   json_t *arr, struct wshard_st_tensor *t,
				   struct wshard_error *err)
{
	size_t i;

	if (!json_is_array(arr))
		return bad(err, st->path, "tensor '%s': shape is not an array",
			   name);
	if (json_array_size(arr) > WSHARD_MAX_DIMS)
		return bad(err, st->path, "tensor '%s': shape has %zu dimensions, "
			   "at most %d are supported", name,
			   json_array_size(arr), WSHARD_MAX_DIMS);
	for (i = 0; i < json_array_size(arr); i++) {
		json_t *d = json_array_get(arr, i);

		if (!json_is_integer(d))
			return bad(err, st->path, "tensor '%s': shape dimension "
				   "%zu is not an integer", name, i);
		if (json_integer_value(d) < 0)
			return bad(err, st->path, "tensor '%s': shape dimension "
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
		return bad(err, st->path, "tensor '%s': data_offsets is not an "
			   "array of two integers", name);
	b = json_array_get(arr, 0);
	e = json_array_get(arr, 1);
	if (!json_is_integer(b) || !json_is_integer(e))
		return bad(err, st->path, "tensor '%s': data_offsets is not an "
			   "array of two integers", name);
	if (json_integer_value(b) < 0 || json_integer_value(e) < 0)
		return bad(err, st->path, "tensor '%s': data_offsets [%lld, %lld] "
			   "are negative", name,
			   (long long)json_integer_value(b),
			   (long long)json_integer_value(e));
	t->begin = (uint64_t)json_integer_value(b);
	t->end = (uint64_t)json_integer_value(e);
	if (t->begin > t->end)
		return bad(err, st->path, "tensor '%s': data_offsets [%llu, %llu] "
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

	wshard_format_shape(shape, sizeof(shape), t->shape, t->ndim);
	rc = wshard_tensor_bytes(t->shape, t->ndim, t->dtype, &need);
	if (rc == -1)
		return bad(err, st->path, "tensor '%s': shape %s of %s "
			   "overflows 64 bits", name, shape,
			   wshard_dtype_name(t->dtype));
	if (rc == -2)
		return bad(err, st->path, "tensor '%s': shape %s of %s is not "
			   "a whole number of bytes", name, shape,
			   wshard_dtype_name(t->dtype));
	if (t->end > data_len)
		return bad(err, st->path, "tensor '%s': data_offsets [%llu, %llu] "
			   "run past the end of the file (%llu bytes of data)",
			   name, (unsigned long long)t->begin,
			   (unsigned long long)t->end,
			   (unsigned long long)data_len);
	if (t->end - t->begin != need)
		return bad(err, st->path, "tensor '%s': data_offsets [%llu, %llu] "
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

	quote(name, sizeof(name), key, strlen(key));
	if (!json_is_object(obj))
		return bad(err, st->path, "tensor '%s': entry is not a JSON object",
			   name);
	json_object_foreach(obj, field, v) {
		if (!strcmp(field, "dtype")) {
			dtype = v;
		} else if (!strcmp(field, "shape")) {
			shape = v;
		} else if (!strcmp(field, "data_offsets")) {
			offsets = v;
		} else {
			quote(k, sizeof(k), field, strlen(field));
			return bad(err, st->path, "tensor '%s': unknown key '%s'",
				   name, k);
		}
	}
	if (!dtype || !shape || !offsets)
		return bad(err, st->path, "tensor '%s': missing key '%s'", name,
			   !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

	s = json_cstr(dtype);
	if (!json_is_string(dtype))
		return bad(err, st->path, "tensor '%s': dtype is not a string",
			   name);
	if (!s || wshard_dtype_parse(s, &t->dtype) < 0) {
		quote(k, sizeof(k), json_string_value(dtype),
		      json_string_length(dtype));
		return bad(err, st->path, "tensor '%s': unknown dtype '%s'",
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
		return nomem(err, st->path);
	for (i = 0; i < st->ntensors; i++)
		order[i] = &st->tensors[i];
	qsort(order, st->ntensors, sizeof(*order), cmp_by_offset);
	for (i = 0; i < st->ntensors; i++) {
		const struct wshard_st_tensor *t = order[i];

		quote(n1, sizeof(n1), t->name, strlen(t->name));
		if (t->begin > at && !prev) {
			rc = bad(err, st->path, "tensor '%s': data_offsets "
				 "[%llu, %llu] leave a %llu-byte hole at the "
				 "start of the data", n1,
				 (unsigned long long)t->begin,
				 (unsigned long long)t->end,
				 (unsigned long long)(t->begin - at));
			goto out;
		}
		if (t->begin > at) {
			quote(n2, sizeof(n2), prev->name, strlen(prev->name));
			rc = bad(err, st->path, "tensor '%s': data_offsets "
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
			quote(n2, sizeof(n2), prev->name, strlen(prev->name));
			rc = bad(err, st->path, "tensor '%s': data_offsets "
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
		rc = bad(err, st->path, "%llu trailing bytes after the tensor "
			 "data (the data ends at %llu of %llu)",
			 (unsigned long long)(data_len - at),
			 (unsigned long long)at, (unsigned long long)data_len);
out:
	free(order);
	return rc;
}

/*
 * Validates the n header bytes hdr of st (st->size and st->data_start
 * already set) and fills its tensors and metadata.
 */
static enum wshard_err parse_header(struct wshard_st *st, const char *hdr,
				    size_t n, struct wshard_error *err)
{
	const char *nul, *key;
	enum wshard_err rc = WSHARD_OK;
	char qname[3 * QUOTE_MAX];
	json_error_t jerr;
	json_t *root = NULL, *v;
	size_t i = 0, count;

	nul = memchr(hdr, '\0', n);
	if (nul) {
		rc = bad(err, st->path, "header contains a NUL byte (byte %zu)",
			 (size_t)(nul - hdr));
		goto out;
	}
	root = json_loadb(hdr, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL |
			  JSON_DECODE_ANY, &jerr);
	if (!root) {
		rc = json_fail(st->path, hdr, n, &jerr, err);
		goto out;
	}
	if (!json_is_object(root)) {
		rc = bad(err, st->path, "header is not a JSON object");
		goto out;
	}
	count = json_object_size(root);
	if (json_object_get(root, METADATA_KEY))
		count--;
	st->tensors = calloc(count + 1, sizeof(*st->tensors));
	if (!st->tensors) {
		rc = nomem(err, st->path);
		goto out;
	}
	json_object_foreach(root, key, v) {
		if (!strcmp(key, METADATA_KEY)) {
			rc = parse_meta(st, v, err);
			if (rc)
				goto out;
			continue;
		}
		/*
		 * jansson refuses keys holding NUL at parse time; checked
		 * again so that a future jansson cannot truncate a name.
		 */
#if JANSSON_VERSION_HEX >= 0x020e00
		if (json_object_iter_key_len(json_object_key_to_iter(key)) !=
		    strlen(key)) {
			rc = bad(err, st->path, "tensor name '%s' contains a "
				 "NUL byte", quote(qname, sizeof(qname), key,
						   strlen(key)));
			goto out;
		}
#endif
		st->tensors[i].name = strdup(key);
		if (!st->tensors[i].name) {
			rc = nomem(err, st->path);
			goto out;
		}
		st->ntensors = ++i;
		rc = parse_entry(st, key, v, &st->tensors[i - 1], err);
		if (rc)
			goto out;
	}
	rc = check_tiling(st, err);
	if (rc)
		goto out;
	qsort(st->tensors, st->ntensors, sizeof(*st->tensors), cmp_by_name);
	for (i = 1; i < st->ntensors; i++) {
		/* Unreachable with JSON_REJECT_DUPLICATES; kept as a guard. */
		if (!strcmp(st->tensors[i - 1].name, st->tensors[i].name)) {
			rc = bad(err, st->path, "duplicate tensor name '%s'",
				 quote(qname, sizeof(qname), st->tensors[i].name,
				       strlen(st->tensors[i].name)));
			goto out;
		}
	}
out:
	json_decref(root);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Opening                                                             */
/* ------------------------------------------------------------------ */

static struct wshard_st *st_new(const char *path)
{
	struct st_priv *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pub.fd = -1;
	p->pub.path = strdup(path ? path : "");
	if (!p->pub.path) {
		free(p);
		return NULL;
	}
	return &p->pub;
}

static uint64_t load_le64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void store_le64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Checks the 8-byte length prefix n against the cap and st->size. */
static enum wshard_err check_prefix(struct wshard_st *st, uint64_t n,
				    struct wshard_error *err)
{
	if (n > WSHARD_ST_HEADER_MAX)
		return bad(err, st->path, "header length %llu exceeds the "
			   "limit of %llu bytes", (unsigned long long)n,
			   WSHARD_ST_HEADER_MAX);
	if (8 + n > st->size)
		return bad(err, st->path, "header length %llu runs past the "
			   "end of the file (%llu bytes)",
			   (unsigned long long)n,
			   (unsigned long long)st->size);
	st->data_start = 8 + n;
	return WSHARD_OK;
}

static enum wshard_err too_short(struct wshard_st *st, struct wshard_error *err)
{
	return bad(err, st->path, "file too short for a safetensors header "
		   "(%llu bytes)", (unsigned long long)st->size);
}

enum wshard_err wshard_st_parse(struct wshard_st **out_st, const void *buf,
				size_t len, const char *path,
				struct wshard_error *err)
{
	/* the whole file at hand is a head that holds all of the header */
	return wshard_st_parse_head(out_st, buf, len, len, path, err);
}

enum wshard_err wshard_st_parse_head(struct wshard_st **out_st, const void *head,
				     size_t head_len, uint64_t size,
				     const char *path, struct wshard_error *err)
{
	const unsigned char *p = head;
	struct wshard_st *st;
	enum wshard_err rc;

	*out_st = NULL;
	st = st_new(path);
	if (!st)
		return nomem(err, path);
	st->size = size;
	if (size < 8 || head_len < 8) {
		rc = too_short(st, err);
		goto out;
	}
	rc = check_prefix(st, load_le64(p), err);
	if (rc)
		goto out;
	if (head_len < st->data_start) {
		rc = bad(err, st->path, "header is cut short (%zu of %llu bytes)", head_len,
			 (unsigned long long)st->data_start);
		goto out;
	}
	rc = parse_header(st, (const char *)p + 8, (size_t)(st->data_start - 8), err);
out:
	if (rc)
		wshard_st_free(st);
	else
		*out_st = st;
	return rc;
}

/* Reads exactly len bytes at off; a short read is an error. */
static enum wshard_err read_full(int fd, void *buf, size_t len, uint64_t off,
				 const char *path, struct wshard_error *err)
{
	unsigned char *p = buf;
	ssize_t r;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return wshard_error_set(err, WSHARD_EIO, "cannot read '%s': "
					"offset %llu is out of range", path,
					(unsigned long long)off);
	while (len) {
		r = pread(fd, p, len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return wshard_error_set(err, WSHARD_EIO,
						"cannot read '%s': %s", path,
						strerror(errno));
		if (r == 0)
			return wshard_error_set(err, WSHARD_EIO,
						"cannot read '%s': unexpected "
						"end of file at byte %llu",
						path, (unsigned long long)off);
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return WSHARD_OK;
}

/* Reads and validates the header of st (fd, base and size set). */
static enum wshard_err st_load(struct wshard_st *st, struct wshard_error *err)
{
	unsigned char prefix[8];
	enum wshard_err rc;
	char *hdr = NULL;
	size_t n;

	if (st->size < 8)
		return too_short(st, err);
	rc = read_full(st->fd, prefix, 8, st->base, st->path, err);
	if (rc)
		return rc;
	rc = check_prefix(st, load_le64(prefix), err);
	if (rc)
		return rc;
	n = (size_t)(st->data_start - 8);
	hdr = malloc(n + 1);
	if (!hdr)
		return nomem(err, st->path);
	rc = read_full(st->fd, hdr, n, st->base + 8, st->path, err);
	if (!rc)
		rc = parse_header(st, hdr, n, err);
	free(hdr);
	return rc;
}

enum wshard_err wshard_st_open(struct wshard_st **out_st, const char *path,
			       struct wshard_error *err)
{
	struct wshard_st *st = NULL;
	enum wshard_err rc;
	struct stat sb;

	*out_st = NULL;
	st = st_new(path);
	if (!st)
		return nomem(err, path);
	/* O_NONBLOCK: a FIFO given by mistake must not hang the open. */
	st->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (st->fd < 0) {
		rc = wshard_error_set(err, WSHARD_EIO, "cannot open '%s': %s",
				      path, strerror(errno));
		goto out;
	}
	((struct st_priv *)st)->owns_fd = true;
	if (fstat(st->fd, &sb) < 0) {
		rc = wshard_error_set(err, WSHARD_EIO, "cannot stat '%s': %s",
				      path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		rc = bad(err, path, "not a regular file");
		goto out;
	}
	st->size = (uint64_t)sb.st_size;
	rc = st_load(st, err);
out:
	if (rc)
		wshard_st_free(st);
	else
		*out_st = st;
	return rc;
}

enum wshard_err wshard_st_open_fd(struct wshard_st **out_st, int fd,
				  uint64_t base, uint64_t size,
				  const char *path, struct wshard_error *err)
{
	struct wshard_st *st;
	enum wshard_err rc;

	*out_st = NULL;
	st = st_new(path);
	if (!st)
		return nomem(err, path);
	st->fd = fd;
	st->base = base;
	st->size = size;
	if (fd < 0 || base > (uint64_t)INT64_MAX ||
	    size > (uint64_t)INT64_MAX - base) {
		rc = bad(err, st->path, "stream of %llu bytes at offset %llu "
			 "is out of range", (unsigned long long)size,
			 (unsigned long long)base);
		goto out;
	}
	rc = st_load(st, err);
out:
	if (rc)
		wshard_st_free(st);
	else
		*out_st = st;
	return rc;
}

/* ------------------------------------------------------------------ */
/* Queries                                                             */
/* ------------------------------------------------------------------ */

static int cmp_key_name(const void *key, const void *elem)
{
	const struct wshard_st_tensor *t = elem;

	return strcmp(key, t->name);
}

const struct wshard_st_tensor *wshard_st_find(const struct wshard_st *st,
					      const char *name)
{
	if (!st || !name || !st->ntensors)
		return NULL;
	return bsearch(name, st->tensors, st->ntensors, sizeof(*st->tensors),
		       cmp_key_name);
}

const char *wshard_st_meta_get(const struct wshard_st *st, const char *key)
{
	size_t i;

	if (!st || !key)
		return NULL;
	for (i = 0; i < st->nmeta; i++)
		if (!strcmp(st->meta[i].key, key))
			return st->meta[i].value;
	return NULL;
}

enum wshard_err wshard_st_read(const struct wshard_st *st,
			       const struct wshard_st_tensor *t, uint64_t off,
			       void *buf, size_t len, struct wshard_error *err)
{
	char name[3 * QUOTE_MAX];
	uint64_t nbytes = t->end - t->begin;

	if (off > nbytes || len > nbytes - off) {
		quote(name, sizeof(name), t->name, strlen(t->name));
		return bad(err, st->path, "tensor '%s': cannot read %zu bytes "
			   "at offset %llu of its %llu bytes", name, len,
			   (unsigned long long)off,
			   (unsigned long long)nbytes);
	}
	if (st->fd < 0)
		return bad(err, st->path, "tensor data is not available "
			   "(header parsed from memory)");
	if (!len)
		return WSHARD_OK;
	return read_full(st->fd, buf, len,
			 st->base + st->data_start + t->begin + off, st->path,
			 err);
}

void wshard_st_free(struct wshard_st *st)
{
	size_t i;

	if (!st)
		return;
	if (((struct st_priv *)st)->owns_fd && st->fd >= 0)
		close(st->fd);
	for (i = 0; i < st->ntensors; i++)
		free(st->tensors[i].name);
	free(st->tensors);
	for (i = 0; i < st->nmeta; i++) {
		free(st->meta[i].key);
		free(st->meta[i].value);
	}
	free(st->meta);
	free(st->path);
	free((struct st_priv *)st);
}

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

/* True when s is well-formed UTF-8 (no overlong forms, no surrogates). */
static bool utf8_valid(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	uint32_t cp;
	int more, i;

	while (*s) {
		unsigned char c = *s++;

		if (c < 0x80)
			continue;
		if (c >= 0xc2 && c <= 0xdf) {
			more = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			more = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			more = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		for (i = 0; i < more; i++, s++) {
			if ((*s & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (*s & 0x3f);
		}
		if ((more == 2 && cp < 0x800) || (more == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
	}
	return true;
}

/* Adds meta[] after "format": "pt" to the __metadata__ object md. */
static enum wshard_err layout_meta(json_t *md, const struct wshard_st_meta *meta,
				   size_t nmeta, struct wshard_error *err)
{
	char k[3 * QUOTE_MAX];
	size_t i;

	if (json_object_set_new(md, "format", json_string("pt")))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < nmeta; i++) {
		const char *key = meta[i].key, *value = meta[i].value;

		quote(k, sizeof(k), key, strlen(key));
		if (!utf8_valid(key) || !utf8_valid(value))
			return wshard_error_set(err, WSHARD_EINVAL, "metadata "
						"key '%s' or its value is not "
						"valid UTF-8", k);
		if (!strcmp(key, "format")) {
			if (strcmp(value, "pt"))
				return wshard_error_set(err, WSHARD_EINVAL,
							"metadata 'format' must "
							"be 'pt'");
			continue;
		}
		if (json_object_get(md, key))
			return wshard_error_set(err, WSHARD_EINVAL, "duplicate "
						"metadata key '%s'", k);
		if (json_object_set_new(md, key, json_string(value)))
			return wshard_error_set(err, WSHARD_ENOMEM,
						"out of memory");
	}
	return WSHARD_OK;
}

/* Appends v (at most INT64_MAX, checked by the caller) to arr. */
static int append_u64(json_t *arr, uint64_t v)
{
	return json_array_append_new(arr, json_integer((json_int_t)v));
}

/* The header entry of t, or NULL when out of memory. */
static json_t *layout_entry(const struct wshard_st_tensor *t)
{
	json_t *e = json_object(), *shape = json_array(), *offs = json_array();
	const char *dtype = wshard_dtype_name(t->dtype);
	int i, fail = !e || !shape || !offs;

	/* One call per statement: the order of the keys is the format. */
	for (i = 0; !fail && i < t->ndim; i++)
		fail = append_u64(shape, t->shape[i]);
	if (!fail)
		fail = append_u64(offs, t->begin);
	if (!fail)
		fail = append_u64(offs, t->end);
	if (!fail)
		fail = json_object_set_new(e, "dtype", json_string(dtype));
	if (!fail)
		fail = json_object_set(e, "shape", shape);
	if (!fail)
		fail = json_object_set(e, "data_offsets", offs);
	json_decref(shape);
	json_decref(offs);
	if (fail) {
		json_decref(e);
		return NULL;
	}
	return e;
}

/* Checks t, sets its begin/end at *at and advances *at. */
static enum wshard_err layout_place(struct wshard_st_tensor *t, uint64_t *at,
				    struct wshard_error *err)
{
	char name[3 * QUOTE_MAX], shape[256];
	uint64_t bytes;
	int i, rc;

	quote(name, sizeof(name), t->name ? t->name : "", t->name ?
	      strlen(t->name) : 0);
	if (!t->name || !utf8_valid(t->name))
		return wshard_error_set(err, WSHARD_EINVAL, "tensor name '%s' "
					"is not valid UTF-8", name);
	if (!strcmp(t->name, METADATA_KEY))
		return wshard_error_set(err, WSHARD_EINVAL, "tensor name '%s' "
					"is reserved", name);
	if ((unsigned)t->dtype >= (unsigned)WSHARD_DTYPE_COUNT)
		return wshard_error_set(err, WSHARD_EINVAL, "tensor '%s': "
					"unknown dtype %d", name, (int)t->dtype);
	if (t->ndim < 0 || t->ndim > WSHARD_MAX_DIMS)
		return wshard_error_set(err, WSHARD_EINVAL, "tensor '%s': %d "
					"dimensions, at most %d are supported",
					name, t->ndim, WSHARD_MAX_DIMS);
	wshard_format_shape(shape, sizeof(shape), t->shape, t->ndim);
	for (i = 0; i < t->ndim; i++)
		if (t->shape[i] > (uint64_t)INT64_MAX)
			return wshard_error_set(err, WSHARD_EINVAL, "tensor '%s': "
						"shape %s is too large", name,
						shape);
	rc = wshard_tensor_bytes(t->shape, t->ndim, t->dtype, &bytes);
	if (rc)
		return wshard_error_set(err, WSHARD_EINVAL, "tensor '%s': shape "
					"%s of %s %s", name, shape,
					wshard_dtype_name(t->dtype),
					rc == -2 ? "is not a whole number of bytes"
						 : "overflows 64 bits");
	if (bytes > (uint64_t)INT64_MAX - *at)
		return wshard_error_set(err, WSHARD_EINVAL, "tensor '%s': data "
					"offsets overflow", name);
	t->begin = *at;
	t->end = *at + bytes;
	*at = t->end;
	return WSHARD_OK;
}

enum wshard_err wshard_st_layout(struct wshard_st_tensor *tensors, size_t n,
				 const struct wshard_st_meta *meta, size_t nmeta,
				 char **out_header, size_t *out_header_len,
				 uint64_t *out_data_len,
				 struct wshard_error *err)
{
	json_t *root = NULL, *md = NULL, *e;
	enum wshard_err rc = WSHARD_OK;
	char name[3 * QUOTE_MAX];
	char *text = NULL, *buf;
	size_t len, hlen, i;
	uint64_t at = 0;

	*out_header = NULL;
	*out_header_len = 0;
	*out_data_len = 0;
	root = json_object();
	md = json_object();
	if (!root || !md || json_object_set(root, METADATA_KEY, md)) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	rc = layout_meta(md, meta, nmeta, err);
	if (rc)
		goto out;
	for (i = 0; i < n; i++) {
		rc = layout_place(&tensors[i], &at, err);
		if (rc)
			goto out;
		if (json_object_get(root, tensors[i].name)) {
			quote(name, sizeof(name), tensors[i].name,
			      strlen(tensors[i].name));
			rc = wshard_error_set(err, WSHARD_EINVAL, "duplicate "
					      "tensor name '%s'", name);
			goto out;
		}
		e = layout_entry(&tensors[i]);
		if (!e || json_object_set_new(root, tensors[i].name, e)) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			goto out;
		}
	}
	text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	len = strlen(text);
	/* Pad so that the data section starts 8-byte aligned. */
	hlen = len + (8 - len % 8) % 8;
	if (hlen > WSHARD_ST_HEADER_MAX) {
		rc = wshard_error_set(err, WSHARD_EINVAL, "safetensors header "
				      "of %zu bytes exceeds the limit of %llu",
				      hlen, WSHARD_ST_HEADER_MAX);
		goto out;
	}
	buf = malloc(8 + hlen);
	if (!buf) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	store_le64((unsigned char *)buf, hlen);
	memcpy(buf + 8, text, len);
	memset(buf + 8 + len, ' ', hlen - len);
	*out_header = buf;
	*out_header_len = 8 + hlen;
	*out_data_len = at;
out:
	free(text);
	json_decref(md);
	json_decref(root);
	return rc;
}
