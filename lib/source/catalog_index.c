/*
 * catalog_index.c - reads model.safetensors.index.json without building a
 * JSON tree when it is of the plain kind: strings of printable ASCII
 * without escapes, integers of at most 18 digits, true, false, null, no
 * key twice in an object.  A 100k-tensor index made jansson build and
 * free a tree of a few hundred thousand nodes.  Anything else (and an
 * index without a weight_map object) makes it give up, and catalog_open.c
 * reads the index through jansson as it always did, so what is refused
 * and every message stay the same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "catalog.h"
#include "base/util.h"
#include "base/scan.h"

/* Deepest nesting taken, and most keys of an object checked for twins. */
#define DEPTH_MAX 32
#define KEYS_MAX 64

/* A plain string, NUL-terminated in place (its closing quote: the
 * index text is this reader's own copy). */
static bool str(struct scan *s, const char **out)
{
	size_t len;

	if (!scan_str(s, out, &len))
		return false;
	((char *)*out)[len] = '\0';
	return true;
}

static bool word(struct scan *s, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
		return false;
	s->p += n;
	return true;
}

/* -?(0|[1-9][0-9]*), at most 18 digits, no fraction or exponent */
static bool integer(struct scan *s)
{
	uint64_t v;

	if (s->p < s->end && *s->p == '-')
		s->p++;
	return scan_uint(s, &v);
}

static bool value(struct scan *s, int depth);

/* { "k": value, ... }, no key twice */
static bool object(struct scan *s, int depth)
{
	const char *keys[KEYS_MAX];
	int n = 0, i;

	if (scan_eat(s, '}'))
		return true;
	do {
		if (n == KEYS_MAX || !str(s, &keys[n]) || !scan_eat(s, ':'))
			return false;
		for (i = 0; i < n; i++)
			if (!strcmp(keys[i], keys[n]))
				return false;
		n++;
		if (!value(s, depth + 1))
			return false;
	} while (scan_eat(s, ','));
	return scan_eat(s, '}');
}

static bool value(struct scan *s, int depth)
{
	const char *v;

	if (depth > DEPTH_MAX)
		return false;
	scan_ws(s);
	if (s->p == s->end)
		return false;
	switch (*s->p) {
	case '"':
		return str(s, &v);
	case '{':
		s->p++;
		return object(s, depth);
	case '[':
		s->p++;
		if (scan_eat(s, ']'))
			return true;
		do {
			if (!value(s, depth + 1))
				return false;
		} while (scan_eat(s, ','));
		return scan_eat(s, ']');
	case 't':
		return word(s, "true");
	case 'f':
		return word(s, "false");
	case 'n':
		return word(s, "null");
	default:
		return integer(s);
	}
}

/* The weight_map object's members into *out (*n of them, room *cap). */
static bool weight_map(struct scan *s, struct index_entry **out, size_t *n, size_t *cap)
{
	if (*out || !scan_eat(s, '{'))
		return false;
	*cap = 1024;
	*out = malloc(*cap * sizeof(**out));
	if (!*out)
		return false;
	if (scan_eat(s, '}'))
		return true;
	do {
		struct index_entry *e;

		if (*n == *cap) {
			e = realloc(*out, *cap * 2 * sizeof(**out));
			if (!e)
				return false;
			*out = e;
			*cap *= 2;
		}
		e = &(*out)[*n];
		if (!str(s, &e->name) || !scan_eat(s, ':') || !str(s, &e->file))
			return false;
		++*n;
	} while (scan_eat(s, ','));
	return scan_eat(s, '}');
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct index_entry *)a)->name,
		      ((const struct index_entry *)b)->name);
}

/* The top-level object: weight_map kept, every other member checked and skipped. */
static bool top(struct scan *s, struct index_entry **out, size_t *n)
{
	const char *keys[KEYS_MAX], *key;
	size_t cap = 0;
	int nk = 0, i;

	if (!scan_eat(s, '{') || scan_eat(s, '}'))
		return false;
	do {
		if (nk == KEYS_MAX || !str(s, &key) || !scan_eat(s, ':'))
			return false;
		for (i = 0; i < nk; i++)
			if (!strcmp(keys[i], key))
				return false;
		keys[nk++] = key;
		if (!strcmp(key, "weight_map") ? !weight_map(s, out, n, &cap) : !value(s, 1))
			return false;
	} while (scan_eat(s, ','));
	return scan_eat(s, '}');
}

bool catalog_index_fast(const char *text, size_t len, char **out_buf,
			struct index_entry **out_entries, size_t *out_n)
{
	char *buf = malloc(len + 1);
	struct scan s = { buf, buf + len };
	struct index_entry *e = NULL, *sorted = NULL;
	size_t n = 0, i;
	bool ok;

	if (!buf)
		return false;
	memcpy(buf, text, len);	/* strings end in place: text stays for jansson */
	buf[len] = '\0';
	ok = top(&s, &e, &n);
	scan_ws(&s);
	ok = ok && s.p == s.end && e;
	/* a name twice is jansson's to refuse */
	if (ok && n > 1) {
		sorted = malloc(n * sizeof(*sorted));
		ok = sorted != NULL;
		if (ok) {
			memcpy(sorted, e, n * sizeof(*sorted));
			wshard_sort(sorted, n, sizeof(*sorted), cmp_entry);
			for (i = 1; ok && i < n; i++)
				ok = strcmp(sorted[i - 1].name, sorted[i].name) != 0;
		}
		free(sorted);
	}
	if (!ok) {
		free(e);
		free(buf);
		return false;
	}
	*out_buf = buf;
	*out_entries = e;
	*out_n = n;
	return true;
}

static int cmp_entry_ptr(const void *a, const void *b)
{
	return strcmp((*(const struct index_entry *const *)a)->name,
		      (*(const struct index_entry *const *)b)->name);
}

/*
 * Every mapped tensor is in its file, and every file's tensors are mapped
 * there: one walk of the mapped names, in order, beside the catalog's
 * (sorted by name; neither holds a name twice).
 */
enum wshard_err catalog_index_check(const struct wshard_catalog *cat, const char *path,
				    const struct index_entry *e, size_t n,
				    struct wshard_error *err)
{
	const struct index_entry **s = malloc((n + 1) * sizeof(*s));
	const struct wshard_src_tensor *t;
	size_t i, j = 0;
	int c = 0;

	if (!s)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < n; i++)
		s[i] = &e[i];
	wshard_sort(s, n, sizeof(*s), cmp_entry_ptr);
	for (i = 0; i < n; i++, j++) {
		c = j < cat->ntensors ? strcmp(cat->tensors[j].name, s[i]->name) : 1;
		if (c != 0 || strcmp(cat->files[cat->tensors[j].file].name, s[i]->file) != 0)
			break;
	}
	if (i == n && j == cat->ntensors) {
		free(s);
		return WSHARD_OK;
	}
	if (c < 0 || i == n) {
		t = &cat->tensors[j];
		wshard_error_set(err, WSHARD_EINVAL,
				 "tensor '%s' in '%s' is not in the weight_map of '%s'",
				 t->name, cat->files[t->file].path, path);
	} else if (c > 0) {
		wshard_error_set(err, WSHARD_EINVAL,
				 "tensor '%s' is missing from '%s/%s' named by the weight_map",
				 s[i]->name, cat->dir, s[i]->file);
	} else {
		t = &cat->tensors[j];
		wshard_error_set(err, WSHARD_EINVAL,
				 "tensor '%s' is in '%s' but the weight_map assigns it to '%s'",
				 s[i]->name, cat->files[t->file].path, s[i]->file);
	}
	free(s);
	return WSHARD_EINVAL;
}

/* The weight_map of the index at path (text, len bytes) through jansson. */
enum wshard_err catalog_index_jansson(const char *path, const char *text, size_t len,
				      void **out_root, struct index_entry **out_e,
				      size_t *out_n, struct wshard_error *err)
{
	json_error_t jerr;
	json_t *root, *map, *val;
	const char *key;
	size_t n = 0;

	*out_root = root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': invalid JSON at line %d: %s",
					path, jerr.line, jerr.text);
	map = json_object_get(root, "weight_map");
	if (!json_is_object(map))
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': no \"weight_map\" object", path);
	*out_e = malloc((json_object_size(map) + 1) * sizeof(**out_e));
	if (!*out_e)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	json_object_foreach(map, key, val) {
		(*out_e)[n].name = key;
		(*out_e)[n++].file = json_is_string(val) ? json_string_value(val) : NULL;
	}
	*out_n = n;
	return WSHARD_OK;
}
