/*
 * catalog_test_util.h - what the catalog suites share: temporary directories,
 * generated checkpoints, and opening that must succeed or fail.
 * Header-only (static functions, marked unused so that a suite may
 * leave some out), so each suite stays one file to build.
 */
#ifndef WSHARD_CATALOG_TEST_UTIL_H
#define WSHARD_CATALOG_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "test_util.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static __attribute__((unused)) char *bad_ckpt(const char *name)
{
	return fmt("%s/fixtures/bad-ckpt/%s", root(), name);
}

static __attribute__((unused)) char *tmp_dir(void)
{
	const char *t = getenv("TMPDIR");
	char *dir = fmt("%s/wshard-cat.XXXXXX", t && *t ? t : "/tmp");

	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	return dir;
}

static __attribute__((unused)) void rm_tree(char *dir)
{
	remove_tree(dir);
	free(dir);
}

/* Runs scripts/gen-checkpoint ARGS DIR; DIR must not exist or be empty. */
static __attribute__((unused)) void gen(const char *dir, const char *args)
{
	const char *py = getenv("PYTHON");
	char *cmd = fmt("'%s' '%s/scripts/gen-checkpoint' %s '%s' >/dev/null",
			py && *py ? py : "python3", root(), args, dir);
	int rc = system(cmd);

	cr_assert_eq(rc, 0, "%s: exit status %d", cmd, rc);
	free(cmd);
}

static __attribute__((unused)) void write_text(const char *dir, const char *name, const char *text)
{
	char *p = fmt("%s/%s", dir, name);
	FILE *f = fopen(p, "w");

	cr_assert_not_null(f, "%s: %s", p, strerror(errno));
	cr_assert_eq(fputs(text, f) >= 0, 1);
	cr_assert_eq(fclose(f), 0);
	free(p);
}

static __attribute__((unused)) void copy_file(const char *from, const char *to)
{
	char buf[4096];
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	size_t n;

	cr_assert_not_null(in, "%s: %s", from, strerror(errno));
	cr_assert_not_null(out, "%s: %s", to, strerror(errno));
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		cr_assert_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	cr_assert_eq(fclose(out), 0);
}

/* The 8-byte header length of a safetensors file, read independently. */
static __attribute__((unused)) uint64_t header_len(const char *path)
{
	unsigned char b[8];
	uint64_t n = 0;
	FILE *f = fopen(path, "rb");
	int i;

	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fread(b, 1, 8, f), 8);
	fclose(f);
	for (i = 7; i >= 0; i--)
		n = n << 8 | b[i];
	return n;
}

static __attribute__((unused)) struct wshard_catalog *open_ok(const char *path)
{
	struct wshard_catalog *cat = (void *)1;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_catalog_open(&cat, path, &err), WSHARD_OK,
		     "%s: %s", path, err.msg);
	cr_assert_not_null(cat);
	cr_assert_eq(err.code, WSHARD_OK);
	return cat;
}

/* Opening path fails with code; the message has each of want[] (up to a
 * NULL) and is one line.  Returns nothing: the message is checked here. */
static __attribute__((unused)) void open_fails(const char *path, enum wshard_err code,
		       const char *const *want)
{
	struct wshard_catalog *cat = (void *)1;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_catalog_open(&cat, path, &err), code,
		     "%s: got %d (%s)", path, err.code, err.msg);
	cr_assert_null(cat);
	cr_assert_eq(err.code, code);
	cr_assert_neq(err.msg[0], '\0');
	cr_assert_null(strchr(err.msg, '\n'), "%s", err.msg);
	for (; *want; want++)
		cr_assert_not_null(strstr(err.msg, *want),
				   "message '%s' lacks '%s'", err.msg, *want);
	/* A NULL error sink must not crash either. */
	cr_assert_eq(wshard_catalog_open(&cat, path, NULL), code);
	cr_assert_null(cat);
}

/* The names the generator writes for a Llama of layers layers, no tie. */
static __attribute__((unused)) size_t llama_tensor_count(int layers)
{
	return 3 + 9 * (size_t)layers;
}

#endif /* WSHARD_CATALOG_TEST_UTIL_H */
