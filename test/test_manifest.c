/*
 * test_manifest.c - wshard_manifest_strip_sources and wshard_manifest_read:
 * every "sources" member is removed wherever it stands in its object
 * (first, middle, last, only; several in a row), its value whatever its
 * kind, and nothing else: strings that merely contain "sources", a key
 * "source", escaped quotes.  Every newline stays, so a parser's line
 * numbers are those of the file, and text that is not JSON is left for
 * the parser to report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "wshard.h"
#include "output/manifest_read.h"

static size_t newlines(const char *s)
{
	size_t k = 0;

	for (; *s; s++)
		k += *s == '\n';
	return k;
}

/* Strips a copy of in; checks length and newlines; returns the copy. */
static char *strip(const char *in)
{
	size_t n = strlen(in), m;
	char *s = strdup(in);

	cr_assert_not_null(s);
	m = wshard_manifest_strip_sources(s, n);
	cr_assert_eq(strlen(s), m, "length %zu returned, %zu left: '%s'", m, strlen(s), s);
	cr_assert(m <= n);
	cr_assert_eq(newlines(s), newlines(in), "newlines lost: '%s' -> '%s'", in, s);
	return s;
}

/* in, stripped, parses to the same JSON as want. */
static void check(const char *in, const char *want)
{
	char *s = strip(in);
	json_error_t e;
	json_t *got = json_loads(s, JSON_REJECT_DUPLICATES, &e);
	json_t *w = json_loads(want, 0, NULL);

	cr_assert_not_null(w, "bad expectation '%s'", want);
	cr_assert_not_null(got, "'%s' -> '%s' does not parse: %s", in, s, e.text);
	cr_assert(json_equal(got, w), "'%s' -> '%s', expected '%s'", in, s, want);
	json_decref(got);
	json_decref(w);
	free(s);
}

Test(manifest, strips_sources_wherever_they_stand)
{
	check("{\"sources\": [1, 2]}", "{}");
	check("{\"a\": 1, \"sources\": [{\"x\": [1, {\"y\": \"]}\"}]}]}", "{\"a\": 1}");
	check("{\"sources\": {\"k\": \"v\"}, \"b\": 2}", "{\"b\": 2}");
	check("{\"a\": 1, \"sources\": \"s\", \"b\": 2}", "{\"a\": 1, \"b\": 2}");
	check("{\"a\": 1,\n \"sources\": [\n  1\n ]\n}", "{\"a\": 1}");
	check("{\"a\": 1, \"sources\": 3, \"sources\": null, \"b\": true}",
	      "{\"a\": 1, \"b\": true}");
	check("{\"sources\": 1.5e3, \"sources\": false}", "{}");
	check("[{\"name\": \"t\", \"sources\": []}, {\"sources\": [], \"name\": \"u\"}]",
	      "[{\"name\": \"t\"}, {\"name\": \"u\"}]");
	check("{\"ranks\": [{\"tensors\": [{\"n\": 1, \"sources\": [{\"tensor\": \"a\", "
	      "\"rows\": [0, 8]}]}]}]}",
	      "{\"ranks\": [{\"tensors\": [{\"n\": 1}]}]}");
}

Test(manifest, leaves_everything_else)
{
	check("{\"source\": {\"path\": \"sources\"}}", "{\"source\": {\"path\": \"sources\"}}");
	check("{\"a\": \"sources\", \"b\": [\"sources\"]}",
	      "{\"a\": \"sources\", \"b\": [\"sources\"]}");
	check("{\"a\": \"x\\\"sources\\\": 1\", \"sources\": 2}",
	      "{\"a\": \"x\\\"sources\\\": 1\"}");
	check("{\"a\\\\\": \"sources\", \"c\": 1}", "{\"a\\\\\": \"sources\", \"c\": 1}");
	check("{\"sourcesx\": 1, \"xsources\": 2}", "{\"sourcesx\": 1, \"xsources\": 2}");
}

Test(manifest, leaves_broken_text_for_the_parser)
{
	static const char *const bad[] = {
		"{\"sources\": [1, 2",
		"{\"sources\":",
		"{\"sources\": ",
		"{\"a\": \"sources",
		"{\"sources\": [\"]}",
		"\"",
		"",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *s = strip(bad[i]);

		cr_assert_null(json_loads(s, 0, NULL), "'%s' parsed", bad[i]);
		free(s);
	}
	/* an error further on keeps its line number */
	{
		char *s = strip("{\"sources\": [\n1,\n2],\n\"a\": 1\n\"b\": 2}");
		json_error_t e;

		cr_assert_null(json_loads(s, 0, &e));
		cr_assert_eq(e.line, 5, "error on line %d, expected 5", e.line);
		free(s);
	}
}

Test(manifest, read_strips_and_reports)
{
	char path[] = "/tmp/wshard-test-manifest-XXXXXX";
	const char *text = "{\n \"a\": 1,\n \"sources\": [\n  2\n ]\n}\n";
	int fd = mkstemp(path);
	char *got = NULL;
	size_t len = 0;
	struct wshard_error err = { 0 };

	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	cr_assert_eq(wshard_manifest_read(path, &got, &len, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(len, strlen(got));
	cr_assert(len < strlen(text));
	cr_assert_eq(newlines(got), newlines(text));
	cr_assert_null(strstr(got, "sources"), "'%s'", got);
	cr_assert_not_null(strstr(got, "\"a\": 1"), "'%s'", got);
	free(got);
	unlink(path);
	/* a missing file, or one that is not a regular file, is bad input */
	cr_assert_eq(wshard_manifest_read(path, &got, &len, &err), WSHARD_EINVAL);
	cr_assert_null(got);
	cr_assert_not_null(strstr(err.msg, path), "'%s'", err.msg);
	cr_assert_eq(wshard_manifest_read("/tmp", &got, &len, &err), WSHARD_EINVAL);
	cr_assert_null(got);
}
