/*
 * st-tool.c - test helper around libwshard's safetensors reader and
 * writer, for the interoperability test (t-interop.sh, interop.py).
 *
 *   st-tool write OUT [-m KEY=VALUE]... NAME:DTYPE:SHAPE...
 *	Writes OUT with wshard_st_layout.  SHAPE is "2x3", "0x4", or empty
 *	for a scalar ("s:F32:").  Byte j of the i-th tensor (0-based, in
 *	command-line order) is (j * 131 + i * 17 + 7) mod 256, and 1 bit of
 *	that for BOOL; interop.py computes the same bytes.
 *
 *   st-tool dump FILE
 *	Validates FILE with the strict reader and prints one line per
 *	metadata entry (sorted by key) and per tensor (sorted by name):
 *	    meta KEY VALUE
 *	    tensor NAME DTYPE [D0,D1] NBYTES SHA256
 *	Bytes of names, keys and values outside '!'..'~', and '%', are
 *	written %XX.  On a rejected file it prints the error to stderr and
 *	exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/hash.h"
#include "source/safetensors.h"

static void usage(void)
{
	fputs("usage: st-tool write OUT [-m KEY=VALUE]... NAME:DTYPE:SHAPE...\n"
	      "       st-tool dump FILE\n", stderr);
	exit(2);
}

static unsigned char pattern(size_t j, size_t i, enum wshard_dtype dt)
{
	unsigned char b = (unsigned char)((j * 131 + i * 17 + 7) & 0xff);

	return dt == WSHARD_BOOL ? b & 1 : b;
}

/* Splits NAME:DTYPE:SHAPE (NAME may hold ':'). */
static int parse_spec(char *spec, struct wshard_st_tensor *t)
{
	char *shape = strrchr(spec, ':'), *dtype, *p, *end;

	if (!shape)
		return -1;
	*shape++ = '\0';
	dtype = strrchr(spec, ':');
	if (!dtype)
		return -1;
	*dtype++ = '\0';
	memset(t, 0, sizeof(*t));
	t->name = spec;
	if (wshard_dtype_parse(dtype, &t->dtype) < 0)
		return -1;
	for (p = shape; *p; ) {
		if (t->ndim == WSHARD_MAX_DIMS)
			return -1;
		t->shape[t->ndim++] = strtoull(p, &end, 10);
		if (end == p || (*end && *end != 'x'))
			return -1;
		p = *end ? end + 1 : end;
	}
	return 0;
}

static int cmd_write(int argc, char **argv)
{
	struct wshard_st_tensor *t = calloc((size_t)argc + 1, sizeof(*t));
	struct wshard_st_meta *m = calloc((size_t)argc + 1, sizeof(*m));
	struct wshard_error err = { 0 };
	size_t nt = 0, nm = 0, hlen, i;
	const char *out = argv[0];
	unsigned char *data;
	uint64_t dlen, j;
	char *h;
	FILE *f;
	int a;

	if (!t || !m)
		return 1;
	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "-m") && a + 1 < argc) {
			char *eq = strchr(argv[++a], '=');

			if (!eq)
				usage();
			*eq = '\0';
			m[nm].key = argv[a];
			m[nm++].value = eq + 1;
		} else if (parse_spec(argv[a], &t[nt++]) < 0) {
			fprintf(stderr, "st-tool: bad tensor spec '%s'\n", argv[a]);
			return 2;
		}
	}
	if (wshard_st_layout(t, nt, m, nm, &h, &hlen, &dlen, &err)) {
		fprintf(stderr, "st-tool: %s\n", err.msg);
		return 1;
	}
	data = malloc(dlen + 1);
	if (!data)
		return 1;
	for (i = 0; i < nt; i++)
		for (j = t[i].begin; j < t[i].end; j++)
			data[j] = pattern(j - t[i].begin, i, t[i].dtype);
	f = fopen(out, "wb");
	if (!f || fwrite(h, 1, hlen, f) != hlen ||
	    fwrite(data, 1, dlen, f) != dlen || fclose(f)) {
		perror(out);
		return 1;
	}
	free(data);
	free(h);
	free(m);
	free(t);
	return 0;
}

static void put_escaped(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < '!' || c > '~' || c == '%')
			printf("%%%02X", c);
		else
			putchar(c);
	}
}

static int cmp_meta(const void *a, const void *b)
{
	const struct wshard_st_meta *x = a, *y = b;

	return strcmp(x->key, y->key);
}

static int cmd_dump(const char *path)
{
	struct wshard_error err = { 0 };
	struct wshard_st_meta *meta;
	char hex[WSHARD_DIGEST_HEX];
	struct wshard_hash hash;
	struct wshard_st *st;
	unsigned char *buf;
	size_t i;
	int d;

	if (wshard_st_open(&st, path, &err)) {
		fprintf(stderr, "st-tool: %s\n", err.msg);
		return 1;
	}
	meta = malloc((st->nmeta + 1) * sizeof(*meta));
	if (!meta)
		return 1;
	if (st->nmeta)
		memcpy(meta, st->meta, st->nmeta * sizeof(*meta));
	qsort(meta, st->nmeta, sizeof(*meta), cmp_meta);
	for (i = 0; i < st->nmeta; i++) {
		fputs("meta ", stdout);
		put_escaped(meta[i].key);
		putchar(' ');
		put_escaped(meta[i].value);
		putchar('\n');
	}
	free(meta);
	for (i = 0; i < st->ntensors; i++) {
		const struct wshard_st_tensor *t = &st->tensors[i];
		size_t n = (size_t)(t->end - t->begin);

		buf = malloc(n + 1);
		if (!buf || wshard_st_read(st, t, 0, buf, n, &err) ||
		    wshard_hash_init(&hash, WSHARD_CK_SHA256)) {
			fprintf(stderr, "st-tool: %s\n", err.msg);
			return 1;
		}
		wshard_hash_update(&hash, buf, n);
		wshard_hash_final(&hash, hex);
		free(buf);
		fputs("tensor ", stdout);
		put_escaped(t->name);
		printf(" %s [", wshard_dtype_name(t->dtype));
		for (d = 0; d < t->ndim; d++)
			printf("%s%llu", d ? "," : "",
			       (unsigned long long)t->shape[d]);
		printf("] %zu %s\n", n, hex);
	}
	wshard_st_free(st);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "write"))
		return cmd_write(argc - 2, argv + 2);
	if (argc == 3 && !strcmp(argv[1], "dump"))
		return cmd_dump(argv[2]);
	usage();
	return 2;
}
