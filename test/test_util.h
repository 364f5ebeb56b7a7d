/*
 * test_util.h - small helpers the Criterion suites share: where the
 * repository is, formatted strings, and removing a temporary tree.
 * Header-only (static inline), so each suite stays one file to build.
 */
#ifndef WSHARD_TEST_UTIL_H
#define WSHARD_TEST_UTIL_H

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <criterion/criterion.h>

/* The repository root: WSHARD_TEST_ROOT (set by test/run-all), else ".". */
static inline const char *root(void)
{
	const char *r = getenv("WSHARD_TEST_ROOT");

	return r && *r ? r : ".";
}

/* A newly allocated formatted string; the test fails if it cannot be made. */
static inline char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

static inline char *fmt(const char *f, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, f);
	n = vasprintf(&s, f, ap);
	va_end(ap);
	cr_assert_geq(n, 0);
	return s;
}

static inline int rm_one(const char *path, const struct stat *sb, int flag,
			 struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Removes dir and everything below it, links not followed. */
static inline void remove_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif /* WSHARD_TEST_UTIL_H */
