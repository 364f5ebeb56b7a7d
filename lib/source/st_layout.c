/*
 * st_layout.c - the header of a safetensors file convert writes: the
 * metadata first, then the tensors in the given order, back to back,
 * padded with spaces to a multiple of 8.
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

/* Writes v little-endian into the 8 bytes at p. */
static void store_le64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
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

		st_quote(k, sizeof(k), key, strlen(key));
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

	st_quote(name, sizeof(name), t->name ? t->name : "", t->name ?
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
			st_quote(name, sizeof(name), tensors[i].name,
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

