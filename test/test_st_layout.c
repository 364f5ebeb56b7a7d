/*
 * test_st_layout.c - the header writer (st_layout.c): exact bytes, and
 * layout -> parse round trips for every dtype.
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

