/*
 * st_fast.c - reads the common safetensors header without building a
 * JSON tree.  A checkpoint of 100k tensors spent most of its catalog time
 * in jansson: a tree of half a million nodes built and freed per shard.
 * This reader takes the plain case only: strings of printable ASCII
 * without escapes, non-negative integers of at most 18 digits, each entry
 * exactly dtype, shape and data_offsets once, metadata of strings.
 * Anything else, and any header that would fail a check, makes it give up
 * with nothing kept, and st_header.c reads the header through jansson as
 * it always did: what is refused, and every message, stays jansson's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/dtype.h"
#include "safetensors.h"
#include "st_impl.h"
#include "base/scan.h"

static bool num(struct scan *s, uint64_t *out)
{
	scan_ws(s);
	return scan_uint(s, out);
}

/* [n, ...] of at most max integers into v; *out_n of them. */
static bool nums(struct scan *s, uint64_t *v, int max, int *out_n)
{
	int n = 0;

	if (!scan_eat(s, '['))
		return false;
	if (!scan_eat(s, ']')) {
		do {
			if (n == max || !num(s, &v[n]))
				return false;
			n++;
		} while (scan_eat(s, ','));
		if (!scan_eat(s, ']'))
			return false;
	}
	*out_n = n;
	return true;
}

static bool key_is(const char *k, size_t n, const char *want)
{
	return strlen(want) == n && memcmp(k, want, n) == 0;
}

/* {"dtype": .., "shape": [..], "data_offsets": [a, b]} in any order */
static bool entry(struct scan *s, struct wshard_st_tensor *t)
{
	unsigned seen = 0;
	const char *k, *v;
	size_t kn, vn;
	char dt[32];
	uint64_t off[2];
	int n;

	if (!scan_eat(s, '{'))
		return false;
	do {
		if (!scan_str(s, &k, &kn) || !scan_eat(s, ':'))
			return false;
		if (key_is(k, kn, "dtype") && !(seen & 1)) {
			if (!scan_str(s, &v, &vn) || vn >= sizeof(dt))
				return false;
			memcpy(dt, v, vn);
			dt[vn] = '\0';
			if (wshard_dtype_parse(dt, &t->dtype) < 0)
				return false;
			seen |= 1;
		} else if (key_is(k, kn, "shape") && !(seen & 2)) {
			if (!nums(s, t->shape, WSHARD_MAX_DIMS, &t->ndim))
				return false;
			seen |= 2;
		} else if (key_is(k, kn, "data_offsets") && !(seen & 4)) {
			if (!nums(s, off, 2, &n) || n != 2 || off[0] > off[1])
				return false;
			t->begin = off[0];
			t->end = off[1];
			seen |= 4;
		} else {
			return false;
		}
	} while (scan_eat(s, ','));
	return seen == 7 && scan_eat(s, '}');
}

/* Appends one more element of size sz to *arr (count *n, room *cap). */
static bool grow(void **arr, size_t *cap, size_t n, size_t sz)
{
	void *p;

	if (n < *cap)
		return true;
	*cap = *cap ? *cap * 2 : 256;
	p = realloc(*arr, *cap * sz);
	if (!p)
		return false;
	*arr = p;
	return true;
}

/* "__metadata__": {"k": "v", ...}; one metadata object at most */
static bool meta(struct scan *s, struct wshard_st *st)
{
	size_t cap = 0, kn, vn, i;
	const char *k, *v;

	if (st->meta || !scan_eat(s, '{'))
		return false;
	st->meta = calloc(1, sizeof(*st->meta));
	if (!st->meta || scan_eat(s, '}'))
		return st->meta != NULL;
	cap = 1;
	do {
		if (!scan_str(s, &k, &kn) || !scan_eat(s, ':') || !scan_str(s, &v, &vn) ||
		    !grow((void **)&st->meta, &cap, st->nmeta + 1, sizeof(*st->meta)))
			return false;
		for (i = 0; i < st->nmeta; i++)	/* a duplicate is jansson's to refuse */
			if (strlen(st->meta[i].key) == kn && !memcmp(st->meta[i].key, k, kn))
				return false;
		st->meta[st->nmeta].key = strndup(k, kn);
		st->meta[st->nmeta].value = strndup(v, vn);
		st->nmeta++;
		if (!st->meta[st->nmeta - 1].key || !st->meta[st->nmeta - 1].value)
			return false;
	} while (scan_eat(s, ','));
	return scan_eat(s, '}');
}

static bool members(struct scan *s, struct wshard_st *st)
{
	size_t cap = 0, kn;
	const char *k;

	if (scan_eat(s, '}'))
		return true;
	do {
		struct wshard_st_tensor *t;

		if (!scan_str(s, &k, &kn) || !scan_eat(s, ':'))
			return false;
		if (key_is(k, kn, METADATA_KEY)) {
			if (!meta(s, st))
				return false;
			continue;
		}
		if (!grow((void **)&st->tensors, &cap, st->ntensors + 1, sizeof(*st->tensors)))
			return false;
		t = &st->tensors[st->ntensors];
		memset(t, 0, sizeof(*t));
		t->name = strndup(k, kn);
		if (!t->name)
			return false;
		st->ntensors++;
		if (!entry(s, t))
			return false;
	} while (scan_eat(s, ','));
	return scan_eat(s, '}');
}

bool st_parse_fast(struct wshard_st *st, const char *hdr, size_t n)
{
	struct scan s = { hdr, hdr + n };
	bool ok = scan_eat(&s, '{') && members(&s, st);

	scan_ws(&s);
	if (ok && s.p == s.end) {
		/* calloc'd count + 1 on jansson's path: never NULL */
		if (!st->tensors && !(st->tensors = calloc(1, sizeof(*st->tensors))))
			ok = false;
		if (ok)
			return true;
	}
	st_clear(st);
	return false;
}
