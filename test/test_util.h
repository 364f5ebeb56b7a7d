/*
 * test_util.h - small helpers the Criterion suites share: where the
 * repository is, formatted strings, removing a temporary tree, and
 * pseudo-random bytes.
 * Header-only (static inline), so each suite stays one file to build.
 */
#ifndef WSHARD_TEST_UTIL_H
#define WSHARD_TEST_UTIL_H

#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
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

/* n pseudo-random bytes from seed (xorshift), never all zero. */
static inline unsigned char *random_bytes(size_t n, uint64_t seed)
{
	unsigned char *p = malloc(n ? n : 1);
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i;

	cr_assert_not_null(p);
	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)(x >> 24);
	}
	return p;
}

#endif /* WSHARD_TEST_UTIL_H */
