/*
 * test_st_header.c - header validation (st_header.c): every fixture under
 * fixtures/corrupt/ is rejected with a message naming the file and the
 * reason, more rejections built in memory, and truncated or bit-flipped
 * files never crash the reader.
 *
 * Run from the repository root, or with WSHARD_TEST_ROOT naming it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "source/safetensors.h"
#include "st_test_util.h"

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
	size_t n = each_fixture("corrupt", check_corrupt);

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
/* The plain reader (st_fast.c) and jansson agree                      */
/* ------------------------------------------------------------------ */

/*
 * The same header twice: plain, which st_fast.c reads, and with every
 * name escaped (\u0061 is 'a'), which only jansson reads.
 */
Test(plain, same_as_jansson)
{
	static const char *const pair[2] = {
		"{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
		" \"__metadata__\": {\"format\": \"pt\", \"k\": \"v\"},\n"
		"\"a\":{\"shape\":[1, 2],\"data_offsets\":[0,8],\"dtype\":\"F32\"}, "
		"\"c\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[16,18]}}   ",
		"{\"\\u0062\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
		" \"__metadata__\": {\"format\": \"pt\", \"\\u006b\": \"v\"},\n"
		"\"\\u0061\":{\"shape\":[1, 2],\"data_offsets\":[0,8],\"dtype\":\"F32\"}, "
		"\"\\u0063\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[16,18]}}   ",
	};
	struct wshard_st *st[2] = { NULL, NULL };
	struct wshard_error err;
	size_t i;
	int k;

	for (k = 0; k < 2; k++)
		cr_assert_eq(parse_json(pair[k], 18, &st[k], &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(st[0]->ntensors, 3);
	cr_assert_eq(st[1]->ntensors, 3);
	for (i = 0; i < 3; i++) {
		const struct wshard_st_tensor *a = &st[0]->tensors[i], *b = &st[1]->tensors[i];

		cr_assert_str_eq(a->name, b->name);
		cr_assert_eq(a->dtype, b->dtype);
		cr_assert_eq(a->ndim, b->ndim);
		cr_assert_eq(memcmp(a->shape, b->shape, sizeof(a->shape)), 0);
		cr_assert_eq(a->begin, b->begin);
		cr_assert_eq(a->end, b->end);
	}
	cr_assert_str_eq(st[0]->tensors[0].name, "a");
	cr_assert_eq(st[0]->nmeta, 2);
	cr_assert_eq(st[1]->nmeta, 2);
	for (i = 0; i < 2; i++) {
		cr_assert_str_eq(st[0]->meta[i].key, st[1]->meta[i].key);
		cr_assert_str_eq(st[0]->meta[i].value, st[1]->meta[i].value);
	}
	wshard_st_free(st[0]);
	wshard_st_free(st[1]);
}

/* What the plain reader takes and a check refuses is refused as jansson
 * says it. */
Test(plain, refusals_are_janssons)
{
	reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16,
	       "duplicate");
	reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
	       "tensor 'a': data_offsets [0, 8] hold 8 bytes but shape [3] of F32 needs 12");
	reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8,
	       "header is not valid JSON");
	reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4,
	       "header is not valid JSON");
}
