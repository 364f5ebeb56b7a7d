/*
 * st_test_util.h - what the safetensors suites share: fixtures, files in
 * memory and on disk, and the parse-and-reject helpers.  Header-only
 * (static functions, marked unused so that a suite may leave some out),
 * so each suite stays one file to build.
 */
#ifndef WSHARD_ST_TEST_UTIL_H
#define WSHARD_ST_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "source/safetensors.h"
#include "test_util.h"

static __attribute__((unused)) char *fixture(const char *dir, const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/fixtures/%s/%s", root(), dir, name) > 0);
	return p;
}

static __attribute__((unused)) unsigned char *slurp(const char *path, size_t *out_len)
{
	unsigned char *buf;
	struct stat sb;
	FILE *f;

	f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s: %s", path, strerror(errno));
	cr_assert_eq(fstat(fileno(f), &sb), 0);
	buf = malloc((size_t)sb.st_size + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)sb.st_size, f), (size_t)sb.st_size);
	fclose(f);
	*out_len = (size_t)sb.st_size;
	return buf;
}

static __attribute__((unused)) char *tmp_path(const char *name)
{
	const char *t = getenv("TMPDIR");
	char *dir, *p;

	cr_assert(asprintf(&dir, "%s/wshard-st.XXXXXX", t && *t ? t : "/tmp") > 0);
	cr_assert_not_null(mkdtemp(dir));
	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	free(dir);
	return p;
}

/* Not inlined: GCC 12 then takes path for a dangling pointer. */
static __attribute__((unused, noinline)) void tmp_remove(char *path)
{
	char *slash;

	unlink(path);
	slash = strrchr(path, '/');
	*slash = '\0';
	rmdir(path);
	free(path);
}

static __attribute__((unused)) void write_file(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(buf, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

/* fn on the name of each .safetensors file of fixtures/SET, in readdir's
 * order; how many there were. */
static __attribute__((unused)) size_t each_fixture(const char *set, void (*fn)(const char *name))
{
	char *dir = fixture(set, "");
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	d = opendir(dir);
	cr_assert_not_null(d, "cannot open %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (l < 12 || strcmp(de->d_name + l - 12, ".safetensors"))
			continue;
		fn(de->d_name);
		n++;
	}
	closedir(d);
	free(dir);
	return n;
}

/* A file in memory: 8-byte LE length of json, json, then dlen data bytes. */
static __attribute__((unused)) unsigned char *mkbuf(const char *json, size_t jlen, const void *data,
			    size_t dlen, size_t *out_len)
{
	unsigned char *b = malloc(8 + jlen + dlen + 1);
	size_t i;

	cr_assert_not_null(b);
	for (i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)jlen >> (8 * i));
	memcpy(b + 8, json, jlen);
	if (dlen)
		memcpy(b + 8 + jlen, data, dlen);
	*out_len = 8 + jlen + dlen;
	return b;
}

static __attribute__((unused)) enum wshard_err parse_json(const char *json, size_t dlen,
				  struct wshard_st **out_st,
				  struct wshard_error *err)
{
	unsigned char *data = calloc(1, dlen + 1), *b;
	enum wshard_err rc;
	size_t len;

	cr_assert_not_null(data);
	b = mkbuf(json, strlen(json), data, dlen, &len);
	wshard_error_clear(err);
	rc = wshard_st_parse(out_st, b, len, "mem.safetensors", err);
	free(b);
	free(data);
	return rc;
}

/* Asserts that json with dlen data bytes is rejected with want in the
 * message. */
static __attribute__((unused)) void reject(const char *json, size_t dlen, const char *want)
{
	struct wshard_st *st = (void *)1;
	struct wshard_error err;

	cr_assert_eq(parse_json(json, dlen, &st, &err), WSHARD_EINVAL,
		     "accepted: %s", json);
	cr_assert_null(st);
	cr_assert_eq(err.code, WSHARD_EINVAL);
	cr_assert_eq(strncmp(err.msg, "'mem.safetensors': ", 19), 0, "%s",
		     err.msg);
	cr_assert_not_null(strstr(err.msg, want), "message '%s' lacks '%s'",
			   err.msg, want);
	cr_assert_null(strchr(err.msg, '\n'), "%s", err.msg);
}

static __attribute__((unused)) void accept(const char *json, size_t dlen)
{
	struct wshard_st *st = NULL;
	struct wshard_error err;

	cr_assert_eq(parse_json(json, dlen, &st, &err), WSHARD_OK,
		     "rejected %s: %s", json, err.msg);
	cr_assert_not_null(st);
	wshard_st_free(st);
}

#endif /* WSHARD_ST_TEST_UTIL_H */
