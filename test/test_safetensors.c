/*
 * test_safetensors.c - the strict safetensors reader and the header
 * writer: every fixture under fixtures/corrupt/ is rejected with a message
 * naming the file and the reason, every fixture under fixtures/good/ is
 * accepted, layout -> parse round trips, find/read/open_fd, and truncated
 * or bit-flipped files never crash the reader.
 *
 * Run from the repository root, or with WSHARD_TEST_ROOT naming it.
 */
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
#include "safetensors.h"
#include "test_util.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static char *fixture(const char *dir, const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/fixtures/%s/%s", root(), dir, name) > 0);
	return p;
}

static unsigned char *slurp(const char *path, size_t *out_len)
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

static char *tmp_path(const char *name)
{
	const char *t = getenv("TMPDIR");
	char *dir, *p;

	cr_assert(asprintf(&dir, "%s/wshard-st.XXXXXX", t && *t ? t : "/tmp") > 0);
	cr_assert_not_null(mkdtemp(dir));
	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	free(dir);
	return p;
}

static void tmp_remove(char *path)
{
	char *slash;

	unlink(path);
	slash = strrchr(path, '/');
	*slash = '\0';
	rmdir(path);
	free(path);
}

static void write_file(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(buf, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

/* A file in memory: 8-byte LE length of json, json, then dlen data bytes. */
static unsigned char *mkbuf(const char *json, size_t jlen, const void *data,
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

static enum wshard_err parse_json(const char *json, size_t dlen,
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
static void reject(const char *json, size_t dlen, const char *want)
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

static void accept(const char *json, size_t dlen)
{
	struct wshard_st *st = NULL;
	struct wshard_error err;

	cr_assert_eq(parse_json(json, dlen, &st, &err), WSHARD_OK,
		     "rejected %s: %s", json, err.msg);
	cr_assert_not_null(st);
	wshard_st_free(st);
}

/* ------------------------------------------------------------------ */
/* The corrupt corpus                                                  */
/* ------------------------------------------------------------------ */

/* Every corrupt fixture and what its message must say. */
static const struct {
	const char *name;
	const char *want;
} corrupt[] = {
	{ "begin-greater-than-end", "tensor 'a': data_offsets [8, 4] end before they begin" },
	{ "dtype-not-string", "tensor 'a': dtype is not a string" },
	{ "duplicate-key-in-entry", "tensor 'a': duplicate key 'dtype'" },
	{ "duplicate-metadata", "duplicate __metadata__" },
	{ "duplicate-metadata-key", "duplicate __metadata__ key 'format'" },
	{ "duplicate-name", "duplicate tensor name 'a'" },
	{ "empty-file", "file too short for a safetensors header (0 bytes)" },
	{ "entry-not-object", "tensor 'a': entry is not a JSON object" },
	{ "extra-key-in-entry", "tensor 'a': unknown key 'stride'" },
	{ "float-offsets", "tensor 'a': data_offsets is not an array of two integers" },
	{ "float-shape", "tensor 'a': shape dimension 0 is not an integer" },
	{ "header-is-string", "header is not a JSON object" },
	{ "header-len-past-end", "header length 1000 runs past the end of the file (15 bytes)" },
	{ "header-len-zero", "header is not valid JSON" },
	{ "header-not-object", "header is not a JSON object" },
	{ "header-over-100MB", "header length 100000001 exceeds the limit of 100000000 bytes" },
	{ "huge-integer", "too big integer" },
	{ "invalid-json", "header is not valid JSON" },
	{ "invalid-utf8", "header is not valid UTF-8" },
	{ "metadata-non-string", "__metadata__ value of 'epoch' is not a string" },
	{ "metadata-not-object", "__metadata__ is not a JSON object" },
	{ "metadata-nul-value", "__metadata__ value of 'format' contains a NUL byte" },
	{ "missing-data-offsets", "tensor 'a': missing key 'data_offsets'" },
	{ "missing-dtype", "tensor 'a': missing key 'dtype'" },
	{ "missing-shape", "tensor 'a': missing key 'shape'" },
	{ "negative-offsets", "tensor 'a': data_offsets [-1, -1] are negative" },
	{ "negative-shape", "tensor 'a': shape dimension 0 is negative (-1)" },
	{ "non-integer-shape", "tensor 'a': shape dimension 0 is not an integer" },
	{ "nul-byte-in-header", "header contains a NUL byte" },
	{ "nul-in-name", "tensor name 'a\\u0000b' contains a NUL byte" },
	{ "offsets-hole", "tensor 'b': data_offsets [8, 12] leave a 4-byte hole after tensor 'a' [0, 4]" },
	{ "offsets-hole-at-start", "tensor 'a': data_offsets [4, 8] leave a 4-byte hole at the start of the data" },
	{ "offsets-not-pair", "tensor 'a': data_offsets is not an array of two integers" },
	{ "offsets-out-of-order", "tensor 'a': data_offsets [8, 16] overlap tensor 'b' [0, 12]" },
	{ "offsets-overlap", "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]" },
	{ "offsets-past-end", "tensor 'a': data_offsets [0, 1099511627776] run past the end of the file (16 bytes of data)" },
	{ "shape-not-array", "tensor 'a': shape is not an array" },
	{ "shape-overflow", "tensor 'a': shape [4294967296, 4294967296, 2] of U8 overflows 64 bits" },
	{ "size-mismatch", "tensor 'a': data_offsets [0, 10] hold 10 bytes but shape [3] of F32 needs 12" },
	{ "string-shape", "tensor 'a': shape dimension 0 is not an integer" },
	{ "subbyte-f6-not-whole", "tensor 'a': shape [5] of F6_E3M2 is not a whole number of bytes" },
	{ "subbyte-not-whole", "tensor 'a': shape [3] of F4 is not a whole number of bytes" },
	{ "too-many-dims", "tensor 'a': shape has 9 dimensions, at most 8 are supported" },
	{ "too-short", "file too short for a safetensors header (5 bytes)" },
	{ "trailing-bytes", "4 trailing bytes after the tensor data (the data ends at 8 of 12)" },
	{ "truncated", "tensor 'b': data_offsets [8, 24] run past the end of the file (19 bytes of data)" },
	{ "unknown-dtype", "tensor 'a': unknown dtype 'F128'" },
	{ "zero-sized-inside", "tensor 'z': data_offsets [4, 4] overlap tensor 'a' [0, 8]" },
};

#define NCORRUPT (sizeof(corrupt) / sizeof(corrupt[0]))

/* The cases the brief names; each must have its own fixture. */
static const char *const required[] = {
	"truncated", "header-len-past-end", "header-over-100MB", "invalid-utf8",
	"invalid-json", "header-not-object", "metadata-non-string",
	"unknown-dtype", "negative-shape", "non-integer-shape",
	"offsets-out-of-order", "offsets-overlap", "offsets-hole",
	"offsets-past-end", "trailing-bytes", "size-mismatch", "shape-overflow",
	"duplicate-name", "nul-in-name", "extra-key-in-entry",
	"missing-data-offsets", "begin-greater-than-end", "subbyte-not-whole",
	"too-short",
};

static const char *expected_message(const char *file)
{
	size_t i, n = strlen(file) - strlen(".safetensors");

	for (i = 0; i < NCORRUPT; i++)
		if (strlen(corrupt[i].name) == n &&
		    !strncmp(corrupt[i].name, file, n))
			return corrupt[i].want;
	return NULL;
}

/* Checks one corrupt file by path and from memory. */
static void check_corrupt(const char *name)
{
	struct wshard_st *st = (void *)1, *st2 = (void *)1;
	struct wshard_error err, err2;
	char *path = fixture("corrupt", name);
	const char *want = expected_message(name);
	unsigned char *buf;
	size_t len;

	cr_assert_not_null(want, "fixture %s has no expected message in "
			   "test_safetensors.c", name);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open(&st, path, &err), WSHARD_EINVAL,
		     "%s: rc %d: %s", name, err.code, err.msg);
	cr_assert_null(st);
	cr_assert_not_null(strstr(err.msg, name), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, want), "%s: '%s' lacks '%s'", name,
			   err.msg, want);
	cr_assert_null(strchr(err.msg, '\n'));
	cr_assert_eq(err.msg[0], '\'');

	buf = slurp(path, &len);
	wshard_error_clear(&err2);
	cr_assert_eq(wshard_st_parse(&st2, buf, len, path, &err2), WSHARD_EINVAL);
	cr_assert_null(st2);
	cr_assert_str_eq(err2.msg, err.msg);
	/* A NULL error sink must not crash. */
	cr_assert_eq(wshard_st_parse(&st2, buf, len, path, NULL), WSHARD_EINVAL);
	free(buf);
	free(path);
}

Test(corrupt, every_fixture_is_rejected)
{
	char *dir = fixture("corrupt", "");
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	d = opendir(dir);
	cr_assert_not_null(d, "cannot open %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (l < 12 || strcmp(de->d_name + l - 12, ".safetensors"))
			continue;
		check_corrupt(de->d_name);
		n++;
	}
	closedir(d);
	free(dir);
	cr_assert_eq(n, NCORRUPT, "%zu fixtures, %zu expected", n, NCORRUPT);
}

Test(corrupt, required_cases_exist)
{
	size_t i;

	for (i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
		char *name, *path;
		struct stat sb;

		cr_assert(asprintf(&name, "%s.safetensors", required[i]) > 0);
		path = fixture("corrupt", name);
		cr_assert_eq(stat(path, &sb), 0, "missing %s", path);
		cr_assert_lt(sb.st_size, 4096);
		free(path);
		free(name);
	}
}

/* ------------------------------------------------------------------ */
/* The good corpus                                                     */
/* ------------------------------------------------------------------ */

/* Opens a good fixture both ways and checks every tensor's bytes. */
static struct wshard_st *open_good(const char *name)
{
	struct wshard_st *st = NULL, *mem = NULL;
	char *path = fixture("good", name);
	struct wshard_error err;
	unsigned char *buf, *got;
	size_t len, i;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open(&st, path, &err), WSHARD_OK, "%s", err.msg);
	buf = slurp(path, &len);
	cr_assert_eq(wshard_st_parse(&mem, buf, len, path, &err), WSHARD_OK,
		     "%s", err.msg);
	cr_assert_eq(mem->fd, -1);
	cr_assert_eq(st->ntensors, mem->ntensors);
	cr_assert_eq(st->data_start, mem->data_start);
	cr_assert_eq(st->size, len);
	for (i = 0; i < st->ntensors; i++) {
		const struct wshard_st_tensor *t = &st->tensors[i];
		size_t n = (size_t)(t->end - t->begin);

		if (i)
			cr_assert_lt(strcmp(st->tensors[i - 1].name, t->name), 0);
		cr_assert_str_eq(t->name, mem->tensors[i].name);
		cr_assert_eq(wshard_st_find(st, t->name), t);
		got = malloc(n + 1);
		cr_assert_eq(wshard_st_read(st, t, 0, got, n, &err), WSHARD_OK,
			     "%s", err.msg);
		cr_assert_arr_eq(got, buf + st->data_start + t->begin, n);
		free(got);
	}
	wshard_st_free(mem);
	free(buf);
	free(path);
	return st;
}

Test(good, every_fixture_is_accepted)
{
	char *dir = fixture("good", "");
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	d = opendir(dir);
	cr_assert_not_null(d, "cannot open %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (l < 12 || strcmp(de->d_name + l - 12, ".safetensors"))
			continue;
		wshard_st_free(open_good(de->d_name));
		n++;
	}
	closedir(d);
	free(dir);
	cr_assert_geq(n, 5);
}

Test(good, scalar)
{
	struct wshard_st *st = open_good("scalar.safetensors");
	struct wshard_error err;
	const struct wshard_st_tensor *t;
	float v = 0;

	cr_assert_eq(st->ntensors, 1);
	t = wshard_st_find(st, "s");
	cr_assert_not_null(t);
	cr_assert_eq(t->ndim, 0);
	cr_assert_eq(t->dtype, WSHARD_F32);
	cr_assert_eq(t->end - t->begin, 4);
	cr_assert_eq(wshard_st_read(st, t, 0, &v, 4, &err), WSHARD_OK);
	cr_assert_float_eq(v, 1.0f, 0);
	cr_assert_str_eq(wshard_st_meta_get(st, "format"), "pt");
	cr_assert_eq(st->data_start % 8, 0);
	wshard_st_free(st);
}

Test(good, zero_sized)
{
	struct wshard_st *st = open_good("zero-sized.safetensors");
	const struct wshard_st_tensor *z, *y;
	struct wshard_error err;
	char c;

	cr_assert_eq(st->ntensors, 3);
	cr_assert_str_eq(st->tensors[0].name, "a");
	z = wshard_st_find(st, "z");
	y = wshard_st_find(st, "y");
	cr_assert_not_null(z);
	cr_assert_not_null(y);
	cr_assert_eq(z->ndim, 2);
	cr_assert_eq(z->shape[0], 0);
	cr_assert_eq(z->shape[1], 4);
	cr_assert_eq(z->begin, z->end);
	cr_assert_eq(y->begin, 2);
	cr_assert_eq(wshard_st_read(st, z, 0, &c, 0, &err), WSHARD_OK);
	cr_assert_eq(wshard_st_read(st, z, 0, &c, 1, &err), WSHARD_EINVAL);
	wshard_st_free(st);
}

Test(good, subbyte)
{
	struct wshard_st *st = open_good("subbyte.safetensors");
	const struct wshard_st_tensor *t = wshard_st_find(st, "f4");

	cr_assert_not_null(t);
	cr_assert_eq(t->dtype, WSHARD_F4);
	cr_assert_eq(t->end - t->begin, 3);
	t = wshard_st_find(st, "f6b");
	cr_assert_eq(t->dtype, WSHARD_F6_E3M2);
	cr_assert_eq(t->end - t->begin, 6);
	wshard_st_free(st);
}

Test(good, metadata)
{
	struct wshard_st *st = open_good("metadata.safetensors");

	cr_assert_eq(st->nmeta, 4);
	/* In file order. */
	cr_assert_str_eq(st->meta[0].key, "format");
	cr_assert_str_eq(st->meta[1].key, "producer");
	cr_assert_str_eq(st->meta[2].key, "note");
	cr_assert_str_eq(st->meta[3].key, "empty");
	cr_assert_str_eq(wshard_st_meta_get(st, "note"), "caf\xc3\xa9 \xe2\x98\x83");
	cr_assert_str_eq(wshard_st_meta_get(st, "empty"), "");
	cr_assert_null(wshard_st_meta_get(st, "missing"));
	cr_assert_null(wshard_st_meta_get(st, NULL));
	cr_assert_eq(wshard_st_find(st, "w")->dtype, WSHARD_BF16);
	wshard_st_free(st);
}

Test(good, empty_and_no_metadata)
{
	struct wshard_st *st = open_good("empty.safetensors");

	cr_assert_eq(st->ntensors, 0);
	cr_assert_eq(st->nmeta, 0);
	cr_assert_null(wshard_st_find(st, "a"));
	cr_assert_null(wshard_st_meta_get(st, "format"));
	wshard_st_free(st);
	st = open_good("no-metadata.safetensors");
	cr_assert_eq(st->nmeta, 0);
	cr_assert_eq(st->ntensors, 1);
	wshard_st_free(st);
}

Test(good, out_of_order_is_sorted_by_name)
{
	struct wshard_st *st = open_good("out-of-order.safetensors");

	cr_assert_eq(st->ntensors, 3);
	cr_assert_str_eq(st->tensors[0].name, "a");
	cr_assert_str_eq(st->tensors[1].name, "b");
	cr_assert_str_eq(st->tensors[2].name, "c");
	cr_assert_eq(st->tensors[1].begin, 0);
	cr_assert_eq(st->tensors[0].begin, 4);
	cr_assert_eq(st->tensors[2].begin, 8);
	cr_assert_null(wshard_st_find(st, "d"));
	cr_assert_null(wshard_st_find(st, ""));
	cr_assert_null(wshard_st_find(st, NULL));
	wshard_st_free(st);
}

Test(good, unicode_names)
{
	struct wshard_st *st = open_good("unicode-name.safetensors");

	cr_assert_not_null(wshard_st_find(st, "\xc3\xa9t\xc3\xa9.weight"));
	cr_assert_not_null(wshard_st_find(st, "q\"uote\\back"));
	wshard_st_free(st);
}

Test(good, all_dtypes)
{
	struct wshard_st *st = open_good("all-dtypes.safetensors");
	int seen[WSHARD_DTYPE_COUNT] = { 0 };
	size_t i;

	cr_assert_eq(st->ntensors, WSHARD_DTYPE_COUNT);
	for (i = 0; i < st->ntensors; i++)
		seen[st->tensors[i].dtype]++;
	for (i = 0; i < WSHARD_DTYPE_COUNT; i++)
		cr_assert_eq(seen[i], 1, "%s", wshard_dtype_name((enum wshard_dtype)i));
	wshard_st_free(st);
}

Test(good, whitespace_around_the_object)
{
	accept("  {\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}\n\t\r ",
	       1);
	accept("{}", 0);
	accept("{\"__metadata__\":{}}", 0);
	accept("{\"\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1);
}

/* ------------------------------------------------------------------ */
/* More rejections, built in memory                                    */
/* ------------------------------------------------------------------ */

Test(reject, dtype_with_nul)
{
	reject("{\"a\":{\"dtype\":\"F3\\u00002\",\"shape\":[],\"data_offsets\":[0,4]}}",
	       4, "tensor 'a': unknown dtype 'F3\\x002'");
}

Test(reject, nul_in_metadata_key)
{
	reject("{\"__metadata__\":{\"a\\u0000\":\"x\"}}", 0,
	       "__metadata__ key 'a\\u0000' contains a NUL byte");
}

Test(reject, nul_in_entry_key)
{
	reject("{\"t\":{\"dtype\\u0000\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",
	       1, "tensor 't': key 'dtype\\u0000' contains a NUL byte");
}

Test(reject, nul_escape_in_later_name)
{
	reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
	       "\"b\\\"\\u0000\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
	       2, "tensor name 'b\\\"\\u0000' contains a NUL byte");
}

Test(reject, deeper_duplicate_key)
{
	reject("{\"a\":{\"dtype\":{\"x\":1,\"x\":2}}}", 0,
	       "duplicate key 'x' in the header");
}

Test(reject, duplicate_name_after_others)
{
	reject("{\"__metadata__\":{\"k\":\"[{,\\\"}\"},"
	       "\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
	       "\"y\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
	       "\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}",
	       3, "duplicate tensor name 'x'");
}

Test(reject, deep_nesting)
{
	char *json = malloc(20001);

	memset(json, '[', 20000);
	json[20000] = '\0';
	reject(json, 0, "header is not valid JSON");
	free(json);
}

Test(reject, control_character_in_name_stays_on_one_line)
{
	reject("{\"a\\nb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,2]}}",
	       2, "tensor 'a\\x0ab': data_offsets [0, 2] hold 2 bytes but "
	       "shape [1] of U8 needs 1");
}

Test(reject, long_name_is_cut)
{
	struct wshard_st *st;
	struct wshard_error err;
	char *json, name[3001];

	memset(name, 'n', 3000);
	name[3000] = '\0';
	cr_assert(asprintf(&json, "{\"%s\":{\"dtype\":\"U8\",\"shape\":[2],"
			   "\"data_offsets\":[0,1]}}", name) > 0);
	cr_assert_eq(parse_json(json, 1, &st, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "nnn...': data_offsets"), "%s", err.msg);
	cr_assert_lt(strlen(err.msg), 600);
	free(json);
}

Test(reject, long_utf8_name_is_cut_on_a_character)
{
	struct wshard_st *st;
	struct wshard_error err;
	char *json, name[1201];
	size_t i;

	/* 400 three-byte characters. */
	for (i = 0; i < 1200; i += 3)
		memcpy(name + i, "\xe2\x98\x83", 3);
	name[1200] = '\0';
	cr_assert(asprintf(&json, "{\"x%s\":{\"dtype\":\"U8\",\"shape\":[2],"
			   "\"data_offsets\":[0,1]}}", name) > 0);
	cr_assert_eq(parse_json(json, 1, &st, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "\xe2\x98\x83...'"), "%s", err.msg);
	free(json);
}

Test(reject, various_entries)
{
	reject("{\"a\":null}", 0, "tensor 'a': entry is not a JSON object");
	reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":{}}}", 1,
	       "data_offsets is not an array of two integers");
	reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1,
	       "data_offsets is not an array of two integers");
	reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,\"1\"]}}",
	       1, "data_offsets is not an array of two integers");
	reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,-1]}}", 1,
	       "are negative");
	reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[true],\"data_offsets\":[0,1]}}",
	       1, "shape dimension 0 is not an integer");
	reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1e0],\"data_offsets\":[0,1]}}",
	       1, "shape dimension 1 is not an integer");
	reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,-0.5],\"data_offsets\":[0,1]}}",
	       1, "shape dimension 1 is not an integer");
	reject("{\"a\":{\"dtype\":\"U8\",\"shape\":null,\"data_offsets\":[0,1]}}",
	       1, "shape is not an array");
	reject("{\"a\":{\"dtype\":null,\"shape\":[1],\"data_offsets\":[0,1]}}",
	       1, "dtype is not a string");
	reject("{\"a\":{\"dtype\":\"u8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
	       1, "unknown dtype 'u8'");
	reject("{\"a\":{}}", 0, "tensor 'a': missing key 'dtype'");
	reject("{\"__metadata__\":{\"a\":null}}", 0,
	       "__metadata__ value of 'a' is not a string");
	reject("{\"__metadata__\":\"pt\"}", 0, "__metadata__ is not a JSON object");
	reject("{\"__metadata__\":null}", 0, "__metadata__ is not a JSON object");
	reject("{} {}", 0, "header is not valid JSON");
	reject("\xef\xbb\xbf{}", 0, "header is not valid JSON");
	reject("{\"a\":\"\xed\xa0\x80\"}", 0, "header is not valid UTF-8");
	reject("{\"a\":1}", 0, "tensor 'a': entry is not a JSON object");
}

Test(reject, control_bytes_in_json_errors_are_escaped)
{
	reject("{\"a\":\x1b[31m}", 0, "header is not valid JSON: invalid token "
	       "near '\\x1b'");
}

Test(reject, max_dims_is_accepted)
{
	accept("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,2],"
	       "\"data_offsets\":[0,2]}}", 2);
}

Test(reject, trailing_data_without_tensors)
{
	reject("{}", 3, "3 trailing bytes after the tensor data");
}

Test(reject, header_length_exactly_the_file)
{
	struct wshard_st *st;
	struct wshard_error err;
	unsigned char b[16] = { 8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ',
				' ', ' ', ' ', ' ' };

	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_parse(&st, b, 16, "x", &err), WSHARD_OK, "%s",
		     err.msg);
	cr_assert_eq(st->data_start, 16);
	wshard_st_free(st);
	b[0] = 9;
	cr_assert_eq(wshard_st_parse(&st, b, 16, "x", &err), WSHARD_EINVAL);
	b[0] = 0;
	b[7] = 0x80;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_parse(&st, b, 16, "x", &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "exceeds the limit"), "%s", err.msg);
}

/* ------------------------------------------------------------------ */
/* Robustness                                                          */
/* ------------------------------------------------------------------ */

static void parse_quietly(const unsigned char *b, size_t len)
{
	struct wshard_st *st = NULL;
	struct wshard_error err;
	enum wshard_err rc;

	wshard_error_clear(&err);
	rc = wshard_st_parse(&st, b, len, "fuzz", &err);
	cr_assert(rc == WSHARD_OK || rc == WSHARD_EINVAL, "rc %d", rc);
	cr_assert_eq(rc == WSHARD_OK, st != NULL);
	if (rc)
		cr_assert_eq(strncmp(err.msg, "'fuzz': ", 8), 0, "%s", err.msg);
	wshard_st_free(st);
}

Test(robust, every_truncation_is_rejected)
{
	static const char *const files[] = {
		"all-dtypes.safetensors", "metadata.safetensors",
		"zero-sized.safetensors", "whitespace.safetensors",
	};
	size_t f, len, cut;

	for (f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		char *path = fixture("good", files[f]);
		unsigned char *buf = slurp(path, &len);

		for (cut = 0; cut < len; cut++) {
			/* An exact copy of just cut bytes, so ASan sees over-reads. */
			unsigned char *b = malloc(cut ? cut : 1);
			struct wshard_st *st = (void *)1;

			memcpy(b, buf, cut);
			cr_assert_eq(wshard_st_parse(&st, b, cut, "t", NULL),
				     WSHARD_EINVAL, "%s cut at %zu", files[f], cut);
			cr_assert_null(st);
			free(b);
		}
		free(buf);
		free(path);
	}
}

Test(robust, bit_flips_never_crash)
{
	static const char *const files[] = {
		"all-dtypes.safetensors", "metadata.safetensors",
		"subbyte.safetensors", "out-of-order.safetensors",
	};
	size_t f, len, i;
	int bit;

	for (f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		char *path = fixture("good", files[f]);
		unsigned char *buf = slurp(path, &len);
		unsigned char *b = malloc(len);
		size_t hdr_end = 8 + (size_t)buf[0] + 256 * (size_t)buf[1];

		for (i = 0; i < len && i < hdr_end; i++) {
			for (bit = 0; bit < 8; bit++) {
				memcpy(b, buf, len);
				b[i] ^= (unsigned char)(1u << bit);
				parse_quietly(b, len);
			}
		}
		free(b);
		free(buf);
		free(path);
	}
}

/* ------------------------------------------------------------------ */
/* Layout (the writer side)                                            */
/* ------------------------------------------------------------------ */

static uint64_t le64(const char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | (unsigned char)p[i];
	return v;
}

Test(layout, exact_header)
{
	static const char want[] =
		"{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},"
		"\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
		"\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]}}";
	struct wshard_st_tensor t[2] = {
		{ .name = "w", .dtype = WSHARD_BF16, .ndim = 2, .shape = { 2, 3 } },
		{ .name = "b", .dtype = WSHARD_F32, .ndim = 0 },
	};
	struct wshard_st_meta meta[] = { { "k", "v" } };
	struct wshard_error err;
	size_t hlen, wlen = strlen(want), i;
	uint64_t dlen;
	char *h;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_layout(t, 2, meta, 1, &h, &hlen, &dlen, &err),
		     WSHARD_OK, "%s", err.msg);
	cr_assert_eq(hlen % 8, 0);
	cr_assert_eq(le64(h), hlen - 8);
	cr_assert_geq(hlen, 8 + wlen);
	cr_assert_lt(hlen, 8 + wlen + 8);
	cr_assert_eq(memcmp(h + 8, want, wlen), 0, "%.*s", (int)(hlen - 8), h + 8);
	for (i = 8 + wlen; i < hlen; i++)
		cr_assert_eq(h[i], ' ');
	cr_assert_eq(dlen, 16);
	cr_assert_eq(t[0].begin, 0);
	cr_assert_eq(t[0].end, 12);
	cr_assert_eq(t[1].begin, 12);
	cr_assert_eq(t[1].end, 16);
	free(h);
}

Test(layout, no_tensors)
{
	struct wshard_st *st;
	struct wshard_error err;
	size_t hlen;
	uint64_t dlen = 7;
	char *h;

	cr_assert_eq(wshard_st_layout(NULL, 0, NULL, 0, &h, &hlen, &dlen, &err),
		     WSHARD_OK);
	cr_assert_eq(dlen, 0);
	cr_assert_eq(hlen, 40);
	cr_assert_eq(memcmp(h + 8, "{\"__metadata__\":{\"format\":\"pt\"}}", 32), 0);
	cr_assert_eq(wshard_st_parse(&st, h, hlen, "x", &err), WSHARD_OK);
	cr_assert_eq(st->ntensors, 0);
	cr_assert_str_eq(wshard_st_meta_get(st, "format"), "pt");
	wshard_st_free(st);
	free(h);
}

static unsigned char pattern(size_t i, size_t seed)
{
	return (unsigned char)(i * 131 + seed * 17 + 7);
}

/* Every dtype, odd names, scalar and zero-sized: written, then read back. */
Test(layout, round_trip_through_a_file)
{
	struct wshard_st_tensor t[WSHARD_DTYPE_COUNT + 4];
	struct wshard_st_meta meta[] = {
		{ "format", "pt" }, { "b", "2" }, { "a", "\xc3\xa9\"\\\n" },
	};
	const char *names[] = { "q\"uote", "back\\slash", "new\nline",
				"\xe2\x98\x83", "" };
	char *h, *h2, *path = tmp_path("rt.safetensors");
	struct wshard_st *st, *mem;
	struct wshard_error err;
	unsigned char *file, *got;
	size_t n = 0, hlen, hlen2, i, j, len;
	uint64_t dlen, dlen2;

	memset(t, 0, sizeof(t));
	for (i = 0; i < WSHARD_DTYPE_COUNT; i++, n++) {
		t[n].dtype = (enum wshard_dtype)i;
		t[n].ndim = 2;
		t[n].shape[0] = 3;
		t[n].shape[1] = 4;
		cr_assert(asprintf(&t[n].name, "model.layers.%zu.%s", i,
				   wshard_dtype_name(t[n].dtype)) > 0);
	}
	t[n].dtype = WSHARD_F32;
	t[n].ndim = 0;
	t[n++].name = strdup(names[0]);
	t[n].dtype = WSHARD_BF16;
	t[n].ndim = 3;
	t[n].shape[1] = 0;
	t[n++].name = strdup(names[1]);
	t[n].dtype = WSHARD_U8;
	t[n].ndim = 1;
	t[n].shape[0] = 5;
	t[n++].name = strdup(names[2]);
	t[n].dtype = WSHARD_I64;
	t[n].ndim = 1;
	t[n].shape[0] = 1;
	t[n++].name = strdup(names[3]);

	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_layout(t, n, meta, 3, &h, &hlen, &dlen, &err),
		     WSHARD_OK, "%s", err.msg);
	/* Deterministic. */
	cr_assert_eq(wshard_st_layout(t, n, meta, 3, &h2, &hlen2, &dlen2, &err),
		     WSHARD_OK);
	cr_assert_eq(hlen, hlen2);
	cr_assert_eq(dlen, dlen2);
	cr_assert_eq(memcmp(h, h2, hlen), 0);
	free(h2);

	len = hlen + (size_t)dlen;
	file = malloc(len);
	memcpy(file, h, hlen);
	for (i = 0; i < n; i++)
		for (j = t[i].begin; j < t[i].end; j++)
			file[hlen + j] = pattern(j - t[i].begin, i);
	write_file(path, file, len);

	cr_assert_eq(wshard_st_open(&st, path, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(wshard_st_parse(&mem, file, len, path, &err), WSHARD_OK);
	cr_assert_eq(st->ntensors, n);
	cr_assert_eq(st->data_start, hlen);
	cr_assert_eq(st->nmeta, 3);
	cr_assert_str_eq(st->meta[0].key, "format");
	cr_assert_str_eq(st->meta[1].key, "b");
	cr_assert_str_eq(st->meta[2].key, "a");
	cr_assert_str_eq(wshard_st_meta_get(st, "a"), "\xc3\xa9\"\\\n");
	for (i = 0; i < n; i++) {
		const struct wshard_st_tensor *r = wshard_st_find(st, t[i].name);
		size_t nb = (size_t)(t[i].end - t[i].begin);

		cr_assert_not_null(r, "%s", t[i].name);
		cr_assert_eq(r->dtype, t[i].dtype);
		cr_assert_eq(r->ndim, t[i].ndim);
		cr_assert_arr_eq(r->shape, t[i].shape, sizeof(r->shape[0]) * r->ndim);
		cr_assert_eq(r->begin, t[i].begin);
		cr_assert_eq(r->end, t[i].end);
		got = malloc(nb + 1);
		cr_assert_eq(wshard_st_read(st, r, 0, got, nb, &err), WSHARD_OK,
			     "%s", err.msg);
		for (j = 0; j < nb; j++)
			cr_assert_eq(got[j], pattern(j, i));
		if (nb > 2) {
			/* A read from the middle. */
			cr_assert_eq(wshard_st_read(st, r, 1, got, nb - 2, &err),
				     WSHARD_OK);
			cr_assert_eq(got[0], pattern(1, i));
		}
		free(got);
		cr_assert_not_null(wshard_st_find(mem, t[i].name));
	}
	wshard_st_free(mem);
	wshard_st_free(st);
	for (i = 0; i < n; i++)
		free(t[i].name);
	free(file);
	free(h);
	tmp_remove(path);
}

static void layout_fails(struct wshard_st_tensor *t, size_t n,
			 const struct wshard_st_meta *meta, size_t nmeta,
			 const char *want)
{
	struct wshard_error err;
	size_t hlen = 1;
	uint64_t dlen = 1;
	char *h = (void *)1;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_layout(t, n, meta, nmeta, &h, &hlen, &dlen, &err),
		     WSHARD_EINVAL);
	cr_assert_null(h);
	cr_assert_eq(hlen, 0);
	cr_assert_eq(dlen, 0);
	cr_assert_not_null(strstr(err.msg, want), "'%s' lacks '%s'", err.msg,
			   want);
}

Test(layout, rejects)
{
	struct wshard_st_tensor t[2] = {
		{ .name = "a", .dtype = WSHARD_U8, .ndim = 1, .shape = { 1 } },
		{ .name = "a", .dtype = WSHARD_U8, .ndim = 1, .shape = { 1 } },
	};
	struct wshard_st_meta m[2] = { { "k", "1" }, { "k", "2" } };

	layout_fails(t, 2, NULL, 0, "duplicate tensor name 'a'");
	layout_fails(t, 1, m, 2, "duplicate metadata key 'k'");
	m[0].key = "format";
	m[0].value = "np";
	layout_fails(t, 1, m, 1, "metadata 'format' must be 'pt'");
	m[0].key = "\xff";
	layout_fails(t, 1, m, 1, "not valid UTF-8");
	m[0].key = "k";
	m[0].value = "\xc0\xaf";
	layout_fails(t, 1, m, 1, "not valid UTF-8");

	t[1].name = "__metadata__";
	layout_fails(t, 2, NULL, 0, "tensor name '__metadata__' is reserved");
	t[1].name = "b\xed\xa0\x80";
	layout_fails(t, 2, NULL, 0, "is not valid UTF-8");
	t[1].name = "b";
	t[1].dtype = WSHARD_DTYPE_COUNT;
	layout_fails(t, 2, NULL, 0, "tensor 'b': unknown dtype");
	t[1].dtype = WSHARD_F4;
	t[1].shape[0] = 3;
	layout_fails(t, 2, NULL, 0, "tensor 'b': shape [3] of F4 is not a whole "
		     "number of bytes");
	t[1].ndim = WSHARD_MAX_DIMS + 1;
	layout_fails(t, 2, NULL, 0, "9 dimensions, at most 8");
	t[1].ndim = -1;
	layout_fails(t, 2, NULL, 0, "dimensions");
	t[1].dtype = WSHARD_F64;
	t[1].ndim = 3;
	t[1].shape[0] = UINT64_C(1) << 30;
	t[1].shape[1] = UINT64_C(1) << 30;
	t[1].shape[2] = UINT64_C(1) << 4;
	layout_fails(t, 2, NULL, 0, "overflows 64 bits");
	t[1].shape[2] = 2;
	t[1].dtype = WSHARD_U8;
	t[1].shape[0] = UINT64_C(1) << 62;
	t[1].ndim = 1;
	t[0].shape[0] = UINT64_C(1) << 62;
	layout_fails(t, 2, NULL, 0, "data offsets overflow");
	t[0].shape[0] = 1;
	t[1].shape[0] = UINT64_MAX;
	t[1].shape[1] = 0;
	t[1].ndim = 2;
	layout_fails(t, 2, NULL, 0, "is too large");
}

Test(layout, format_pt_in_meta_is_not_repeated)
{
	static const char want[] =
		"{\"__metadata__\":{\"format\":\"pt\",\"x\":\"1\"}}";
	struct wshard_st_meta m[] = { { "x", "1" }, { "format", "pt" } };
	struct wshard_error err;
	size_t hlen;
	uint64_t dlen;
	char *h;

	cr_assert_eq(wshard_st_layout(NULL, 0, m, 2, &h, &hlen, &dlen, &err),
		     WSHARD_OK);
	cr_assert_geq(hlen, 8 + strlen(want));
	cr_assert_eq(memcmp(h + 8, want, strlen(want)), 0, "%.*s",
		     (int)(hlen - 8), h + 8);
	free(h);
}

/* ------------------------------------------------------------------ */
/* Opening and reading                                                 */
/* ------------------------------------------------------------------ */

Test(open, missing_file)
{
	struct wshard_st *st = (void *)1;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open(&st, "no/such.safetensors", &err), WSHARD_EIO);
	cr_assert_null(st);
	cr_assert_str_eq(err.msg, "cannot open 'no/such.safetensors': No such "
			 "file or directory");
}

Test(open, directory)
{
	struct wshard_st *st;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open(&st, root(), &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "not a regular file"), "%s", err.msg);
}

Test(open, fifo_does_not_hang, .timeout = 10)
{
	char *path = tmp_path("fifo");
	struct wshard_st *st;
	struct wshard_error err;

	cr_assert_eq(mkfifo(path, 0600), 0);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open(&st, path, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "not a regular file"), "%s", err.msg);
	tmp_remove(path);
}

Test(open, fd_stream_inside_a_bigger_file)
{
	char *src = fixture("good", "out-of-order.safetensors");
	char *path = tmp_path("tar");
	unsigned char *buf, *big, got[4];
	struct wshard_st *st;
	struct wshard_error err;
	size_t len;
	int fd;

	buf = slurp(src, &len);
	big = malloc(len + 48);
	memset(big, 'x', len + 48);
	memcpy(big + 37, buf, len);
	write_file(path, big, len + 48);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);

	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open_fd(&st, fd, 37, len, "tar:member", &err),
		     WSHARD_OK, "%s", err.msg);
	cr_assert_eq(st->base, 37);
	cr_assert_eq(wshard_st_read(st, wshard_st_find(st, "c"), 0, got, 4, &err),
		     WSHARD_OK);
	cr_assert_arr_eq(got, buf + st->data_start + 8, 4);
	wshard_st_free(st);
	/* The fd is borrowed: still open. */
	cr_assert_neq(fcntl(fd, F_GETFD), -1);

	/* The stream may not include the bytes after it. */
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open_fd(&st, fd, 37, len + 11, "tar:member", &err),
		     WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "'tar:member': 11 trailing bytes"),
			   "%s", err.msg);
	/* Nor start elsewhere. */
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open_fd(&st, fd, 36, len, "tar:member", &err),
		     WSHARD_EINVAL);
	/* A stream claiming to run past the file: short read. */
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open_fd(&st, fd, len + 44, 100, "m", &err),
		     WSHARD_EIO);
	cr_assert_not_null(strstr(err.msg, "unexpected end of file"), "%s", err.msg);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_open_fd(&st, fd, UINT64_MAX - 4, 100, "m", &err),
		     WSHARD_EINVAL);
	cr_assert_eq(wshard_st_open_fd(&st, -1, 0, 100, "m", &err),
		     WSHARD_EINVAL);
	cr_assert_neq(fcntl(fd, F_GETFD), -1);
	close(fd);
	free(big);
	free(buf);
	free(src);
	tmp_remove(path);
}

Test(read, bounds)
{
	struct wshard_st *st = open_good("out-of-order.safetensors");
	const struct wshard_st_tensor *t = wshard_st_find(st, "c");
	struct wshard_error err;
	unsigned char b[8];

	cr_assert_eq(wshard_st_read(st, t, 0, b, 4, &err), WSHARD_OK);
	cr_assert_eq(wshard_st_read(st, t, 4, b, 0, &err), WSHARD_OK);
	cr_assert_eq(wshard_st_read(st, t, 3, b, 1, &err), WSHARD_OK);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_read(st, t, 0, b, 5, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "tensor 'c': cannot read 5 bytes at "
				  "offset 0 of its 4 bytes"), "%s", err.msg);
	cr_assert_eq(wshard_st_read(st, t, 5, b, 0, &err), WSHARD_EINVAL);
	cr_assert_eq(wshard_st_read(st, t, 2, b, 3, &err), WSHARD_EINVAL);
	cr_assert_eq(wshard_st_read(st, t, UINT64_MAX, b, 2, &err), WSHARD_EINVAL);
	cr_assert_eq(wshard_st_read(st, t, 1, b, SIZE_MAX, &err), WSHARD_EINVAL);
	wshard_st_free(st);
}

Test(read, parsed_from_memory_has_no_data)
{
	char *path = fixture("good", "scalar.safetensors");
	struct wshard_st *st;
	struct wshard_error err;
	unsigned char *buf;
	size_t len;
	float v;

	buf = slurp(path, &len);
	cr_assert_eq(wshard_st_parse(&st, buf, len, path, &err), WSHARD_OK);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_read(st, &st->tensors[0], 0, &v, 4, &err),
		     WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "scalar.safetensors"));
	wshard_st_free(st);
	free(buf);
	free(path);
}

Test(read, short_read_is_eio)
{
	char *src = fixture("good", "all-dtypes.safetensors");
	char *path = tmp_path("shrunk.safetensors");
	struct wshard_st *st;
	struct wshard_error err;
	unsigned char *buf, got[64];
	const struct wshard_st_tensor *t;
	size_t len;

	buf = slurp(src, &len);
	write_file(path, buf, len);
	cr_assert_eq(wshard_st_open(&st, path, &err), WSHARD_OK);
	/* The file shrinks after it was validated. */
	cr_assert_eq(truncate(path, (off_t)st->data_start + 2), 0);
	t = wshard_st_find(st, "t_f64");
	cr_assert_not_null(t);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_st_read(st, t, 0, got, 24, &err), WSHARD_EIO);
	cr_assert_not_null(strstr(err.msg, "cannot read '"), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "unexpected end of file"), "%s", err.msg);
	wshard_st_free(st);
	free(buf);
	free(src);
	tmp_remove(path);
}

Test(misc, free_null)
{
	wshard_st_free(NULL);
	cr_assert_null(wshard_st_find(NULL, "a"));
	cr_assert_null(wshard_st_meta_get(NULL, "a"));
}
