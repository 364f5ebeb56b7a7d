/*
 * safetensors.c - the parsed safetensors file in memory: making and
 * freeing one, finding a tensor or a metadata key, and the messages the
 * reader's files share.
 *
 * The reader enforces every rule of OUTPUT-CONTRACT.md section 6, and a
 * little more than the reference reader: duplicate tensor names and names
 * holding a NUL byte are rejected instead of being silently collapsed or
 * truncated.  Sizes taken from the file are bounded before use and every
 * shape x dtype product is overflow-checked, so no input can make the
 * reader allocate, read or index out of bounds.  Only the header is read
 * at open; tensor data is read on demand with pread.
 *
 * st_read.c opens a file and reads it, st_header.c validates a header
 * (st_fast.c reads the plain kind quickly), and st_layout.c writes one
 * (wshard_st_layout) for a file whose tensors follow back to back in the
 * given order.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wshard.h"
#include "safetensors.h"
#include "st_impl.h"

/* struct wshard_st plus what the public struct does not need to show. */
struct st_priv {
	struct wshard_st pub;
	bool owns_fd;
};

/* ------------------------------------------------------------------ */
/* Messages                                                            */
/* ------------------------------------------------------------------ */

enum wshard_err st_bad(struct wshard_error *err, const char *path, const char *fmt, ...)
{
	char reason[WSHARD_ERRMAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return wshard_error_set(err, WSHARD_EINVAL, "'%s': %s", path, reason);
}

enum wshard_err st_nomem(struct wshard_error *err, const char *path)
{
	return wshard_error_set(err, WSHARD_ENOMEM,
				"out of memory reading '%s'", path);
}

const char *st_quote(char *buf, size_t size, const char *s, size_t len)
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
/* Making and freeing                                                 */
/* ------------------------------------------------------------------ */

struct wshard_st *st_new(const char *path, bool owns_fd)
{
	struct st_priv *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pub.fd = -1;
	p->owns_fd = owns_fd;
	p->pub.path = strdup(path ? path : "");
	if (!p->pub.path) {
		free(p);
		return NULL;
	}
	return &p->pub;
}

void st_clear(struct wshard_st *st)
{
	size_t i;

	for (i = 0; i < st->ntensors; i++)
		free(st->tensors[i].name);
	free(st->tensors);
	for (i = 0; i < st->nmeta; i++) {
		free(st->meta[i].key);
		free(st->meta[i].value);
	}
	free(st->meta);
	st->tensors = NULL;
	st->meta = NULL;
	st->ntensors = st->nmeta = 0;
}

void wshard_st_free(struct wshard_st *st)
{
	if (!st)
		return;
	if (((struct st_priv *)st)->owns_fd && st->fd >= 0)
		close(st->fd);
	st_clear(st);
	free(st->path);
	free((struct st_priv *)st);
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

enum wshard_err wshard_st_prefix_names(struct wshard_st *st, const char *prefix,
				       struct wshard_error *err)
{
	size_t i, np = strlen(prefix);

	for (i = 0; i < st->ntensors; i++) {
		char *old = st->tensors[i].name;
		size_t n = strlen(old);
		char *name = malloc(np + n + 1);

		if (!name)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		memcpy(name, prefix, np);
		memcpy(name + np, old, n + 1);
		st->tensors[i].name = name;
		free(old);
	}
	return WSHARD_OK;
}
