/*
 * test_safetensors.c - opening and reading safetensors files: every
 * fixture under fixtures/good/ is accepted with the bytes it holds,
 * find/read/open_fd, and the errors of opening.
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

static void open_and_free_good(const char *name)
{
	wshard_st_free(open_good(name));
}

Test(good, every_fixture_is_accepted)
{
	cr_assert_geq(each_fixture("good", open_and_free_good), 5);
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

