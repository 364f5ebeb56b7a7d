/*
 * test_fileio.c - sizes on the command line (wshard_parse_size), files
 * that appear under their final name only when committed
 * (wshard_file_create / _pwrite / _commit / _abort), and whole reads
 * (wshard_pread_full, wshard_read_file).
 */
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
#include "base/fileio.h"

/* ------------------------------------------------------------------ */
/* Sizes                                                               */
/* ------------------------------------------------------------------ */

static void size_ok(const char *s, uint64_t want)
{
	uint64_t got = 12345;

	cr_assert_eq(wshard_parse_size(s, &got), 0, "'%s' rejected", s);
	cr_assert_eq(got, want, "'%s' = %llu, want %llu", s, (unsigned long long)got,
		     (unsigned long long)want);
}

static void size_bad(const char *s)
{
	uint64_t got = 12345;

	cr_assert_eq(wshard_parse_size(s, &got), -1, "'%s' accepted as %llu", s ? s : "(null)",
		     (unsigned long long)got);
	cr_assert_eq(got, 0, "'%s': *out_bytes not cleared", s ? s : "(null)");
}

Test(size, plain_numbers)
{
	size_ok("0", 0);
	size_ok("1", 1);
	size_ok("4096", 4096);
	size_ok("007", 7);
	size_ok("18446744073709551615", UINT64_MAX);
	size_ok("12B", 12);
}

Test(size, binary_units)
{
	size_ok("5GiB", 5ULL << 30);
	size_ok("256M", 256ULL << 20);
	size_ok("256MiB", 256ULL << 20);
	size_ok("1K", 1024);
	size_ok("1KiB", 1024);
	size_ok("3G", 3ULL << 30);
	size_ok("2T", 2ULL << 40);
	size_ok("2TiB", 2ULL << 40);
	size_ok("0GiB", 0);
	size_ok("0T", 0);
}

Test(size, decimal_units)
{
	size_ok("1000KB", 1000000);
	size_ok("1KB", 1000);
	size_ok("5MB", 5000000);
	size_ok("5GB", 5000000000ULL);
	size_ok("7TB", 7000000000000ULL);
}

Test(size, overflow)
{
	size_bad("18446744073709551616");		/* 2^64 */
	size_bad("99999999999999999999999");
	size_bad("17179869184G");			/* 2^34 GiB = 2^64 */
	size_ok("17179869183G", 17179869183ULL << 30);
	size_bad("16777216T");				/* 2^24 TiB = 2^64 */
	size_ok("16777215T", 16777215ULL << 40);
	size_bad("18446744073709552KB");		/* just over 2^64 / 1000 */
	size_ok("18446744073709551KB", 18446744073709551000ULL);
}

Test(size, garbage)
{
	size_bad(NULL);
	size_bad("");
	size_bad("G");
	size_bad("GiB");
	size_bad("abc");
	size_bad("5 GiB");
	size_bad(" 5GiB");
	size_bad("5GiB ");
	size_bad("5GiBx");
	size_bad("5Gi");
	size_bad("5KBB");
	size_bad("5X");
	size_bad("1.5G");
	size_bad("0x10");
	size_bad("5\n");
}

Test(size, negative_and_signs)
{
	size_bad("-1");
	size_bad("-5GiB");
	size_bad("+5");
	size_bad("-0");
}

/* ------------------------------------------------------------------ */
/* Atomic files                                                        */
/* ------------------------------------------------------------------ */

static char *tmp_dir(void)
{
	const char *t = getenv("TMPDIR");
	char *dir;

	cr_assert(asprintf(&dir, "%s/wshard-fio.XXXXXX", t && *t ? t : "/tmp") > 0);
	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	return dir;
}

static char *join(const char *dir, const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static bool exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

/* Number of entries in dir besides . and .. */
static int count_entries(const char *dir)
{
	char *cmd;
	FILE *p;
	int n = -1;

	cr_assert(asprintf(&cmd, "ls -A '%s' | wc -l", dir) > 0);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	cr_assert_eq(fscanf(p, "%d", &n), 1);
	pclose(p);
	free(cmd);
	return n;
}

static void remove_dir(char *dir)
{
	char *cmd;

	cr_assert(asprintf(&cmd, "rm -rf '%s'", dir) > 0);
	cr_assert_eq(system(cmd), 0);
	free(cmd);
	free(dir);
}

static unsigned char *slurp(const char *path, size_t *out_len)
{
	struct stat sb;
	unsigned char *buf;
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(fstat(fd, &sb), 0);
	buf = malloc((size_t)sb.st_size + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(read(fd, buf, (size_t)sb.st_size), sb.st_size);
	close(fd);
	*out_len = (size_t)sb.st_size;
	return buf;
}

/* path holds exactly the len bytes at want. */
static void assert_holds(const char *path, const void *want, size_t len)
{
	size_t got_len;
	unsigned char *got = slurp(path, &got_len);

	cr_assert_eq(got_len, len);
	cr_assert_arr_eq(got, want, len);
	free(got);
}

Test(file, tmp_name)
{
	char *t = wshard_tmp_name("/a/b/model.safetensors");

	cr_assert_str_eq(t, "/a/b/.model.safetensors.wshard-tmp");
	free(t);
	t = wshard_tmp_name("wshard.json");
	cr_assert_str_eq(t, ".wshard.json.wshard-tmp");
	free(t);
	t = wshard_tmp_name("/x");
	cr_assert_str_eq(t, "/.x.wshard-tmp");
	free(t);
}

Test(file, commit_renames_into_place)
{
	char *dir = tmp_dir();
	char *path = join(dir, "out.bin"), *tmp = join(dir, ".out.bin.wshard-tmp");
	static const unsigned char want[] = "0123456789\0\0\0\0\0ABCDE";
	struct wshard_file *f = (void *)1;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_file_create(&f, path, 0, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_not_null(f);
	cr_assert_str_eq(f->path, path);
	cr_assert_str_eq(f->tmp_path, tmp);
	cr_assert(exists(tmp));
	cr_assert_not(exists(path), "final name exists before commit");
	/* Out of order, with a hole that reads as zeros. */
	cr_assert_eq(wshard_file_pwrite(f, "ABCDE", 5, 15, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(wshard_file_pwrite(f, "0123456789", 10, 0, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(f->written, 15);
	cr_assert_not(exists(path));
	cr_assert_eq(wshard_file_commit(f, &err), WSHARD_OK, "%s", err.msg);
	cr_assert(exists(path));
	cr_assert_not(exists(tmp), "temporary file left behind");
	cr_assert_eq(count_entries(dir), 1);
	assert_holds(path, want, 20);
	free(path);
	free(tmp);
	remove_dir(dir);
}

/* Commit replaces an earlier file of the same name whole. */
Test(file, commit_replaces)
{
	char *dir = tmp_dir();
	char *path = join(dir, "wshard.json");
	struct wshard_file *f;
	struct wshard_error err;
	unsigned char *got;
	size_t len;
	FILE *old = fopen(path, "w");

	cr_assert_not_null(old);
	fputs("an older and longer content", old);
	fclose(old);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_file_create(&f, path, 0, &err), WSHARD_OK);
	cr_assert_eq(wshard_file_pwrite(f, "new", 3, 0, &err), WSHARD_OK);
	/* Until the commit, readers see the old file. */
	got = slurp(path, &len);
	cr_assert_eq(len, 27);
	free(got);
	cr_assert_eq(wshard_file_commit(f, &err), WSHARD_OK, "%s", err.msg);
	assert_holds(path, "new", 3);
	cr_assert_eq(count_entries(dir), 1);
	free(path);
	remove_dir(dir);
}

Test(file, empty_file)
{
	char *dir = tmp_dir();
	char *path = join(dir, "empty");
	struct wshard_file *f;
	struct wshard_error err;
	struct stat sb;

	cr_assert_eq(wshard_file_create(&f, path, 0, &err), WSHARD_OK);
	cr_assert_eq(wshard_file_commit(f, &err), WSHARD_OK);
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(sb.st_size, 0);
	free(path);
	remove_dir(dir);
}

Test(file, abort_removes_temporary)
{
	char *dir = tmp_dir();
	char *path = join(dir, "model-rank-0-part-0.safetensors");
	char *tmp = join(dir, ".model-rank-0-part-0.safetensors.wshard-tmp");
	struct wshard_file *f;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_file_create(&f, path, 0, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(wshard_file_pwrite(f, "xyz", 3, 0, &err), WSHARD_OK);
	cr_assert(exists(tmp));
	wshard_file_abort(f);
	cr_assert_not(exists(tmp));
	cr_assert_not(exists(path));
	cr_assert_eq(count_entries(dir), 0);
	wshard_file_abort(NULL);
	free(path);
	free(tmp);
	remove_dir(dir);
}

/* An abort leaves an existing file of the final name alone. */
Test(file, abort_keeps_existing)
{
	char *dir = tmp_dir();
	char *path = join(dir, "keep");
	struct wshard_file *f;
	struct wshard_error err;
	FILE *old = fopen(path, "w");

	cr_assert_not_null(old);
	fputs("old", old);
	fclose(old);
	cr_assert_eq(wshard_file_create(&f, path, 0, &err), WSHARD_OK);
	cr_assert_eq(wshard_file_pwrite(f, "new!", 4, 0, &err), WSHARD_OK);
	wshard_file_abort(f);
	assert_holds(path, "old", 3);
	cr_assert_eq(count_entries(dir), 1);
	free(path);
	remove_dir(dir);
}

Test(file, create_in_missing_directory)
{
	char *dir = tmp_dir();
	char *path = join(dir, "no/such/dir/out.bin");
	struct wshard_file *f = (void *)1;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_file_create(&f, path, 0, &err), WSHARD_EIO);
	cr_assert_null(f);
	cr_assert_eq(err.code, WSHARD_EIO);
	cr_assert_not_null(strstr(err.msg, "out.bin"), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
	cr_assert_eq(wshard_file_create(&f, path, 0, NULL), WSHARD_EIO);
	free(path);
	remove_dir(dir);
}

/* A rename that fails (the final name is a directory): EIO, and the
 * temporary file is removed. */
Test(file, commit_failure_removes_temporary)
{
	char *dir = tmp_dir();
	char *path = join(dir, "taken"), *inner = join(dir, "taken/x");
	char *tmp = join(dir, ".taken.wshard-tmp");
	struct wshard_file *f;
	struct wshard_error err;
	FILE *x;

	cr_assert_eq(mkdir(path, 0755), 0);
	x = fopen(inner, "w");
	cr_assert_not_null(x);
	fclose(x);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_file_create(&f, path, 0, &err), WSHARD_OK);
	cr_assert_eq(wshard_file_pwrite(f, "abc", 3, 0, &err), WSHARD_OK);
	cr_assert_eq(wshard_file_commit(f, &err), WSHARD_EIO);
	cr_assert_not_null(strstr(err.msg, "taken"), "%s", err.msg);
	cr_assert_not(exists(tmp), "temporary file left after a failed commit");
	free(path);
	free(inner);
	free(tmp);
	remove_dir(dir);
}

Test(file, write_file_and_copy)
{
	char *dir = tmp_dir();
	char *a = join(dir, "a.json"), *b = join(dir, "b.json");
	struct wshard_error err;
	char *buf;
	size_t len;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_write_file(a, "{\"k\": 1}\n", 9, 0, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(wshard_copy_file(a, b, 0, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(wshard_read_file(b, 100, &buf, &len, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(len, 9);
	cr_assert_str_eq(buf, "{\"k\": 1}\n");
	free(buf);
	cr_assert_eq(count_entries(dir), 2);
	free(a);
	free(b);
	remove_dir(dir);
}

/* ------------------------------------------------------------------ */
/* Reads                                                               */
/* ------------------------------------------------------------------ */

static char *ten_byte_file(char **out_dir)
{
	char *dir = tmp_dir();
	char *path = join(dir, "ten");
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite("0123456789", 1, 10, f), 10);
	fclose(f);
	*out_dir = dir;
	return path;
}

Test(read, pread_full)
{
	char *dir, *path = ten_byte_file(&dir);
	struct wshard_error err;
	char buf[16] = "";
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_pread_full(fd, buf, 4, 3, path, &err), WSHARD_OK);
	cr_assert_arr_eq(buf, "3456", 4);
	cr_assert_eq(wshard_pread_full(fd, buf, 10, 0, path, &err), WSHARD_OK);
	cr_assert_arr_eq(buf, "0123456789", 10);
	cr_assert_eq(wshard_pread_full(fd, buf, 0, 10, path, &err), WSHARD_OK);
	cr_assert_eq(wshard_pread_full(fd, buf, 0, 1000, path, &err), WSHARD_OK);
	close(fd);
	free(path);
	remove_dir(dir);
}

Test(read, short_read_is_eio)
{
	char *dir, *path = ten_byte_file(&dir);
	struct wshard_error err;
	char buf[32];
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_pread_full(fd, buf, 11, 0, path, &err), WSHARD_EIO);
	cr_assert_eq(err.code, WSHARD_EIO);
	cr_assert_not_null(strstr(err.msg, path), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "end of file"), "%s", err.msg);
	/* The data that was there was read. */
	cr_assert_arr_eq(buf, "0123456789", 10);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_pread_full(fd, buf, 4, 8, path, &err), WSHARD_EIO);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_pread_full(fd, buf, 1, 10, path, &err), WSHARD_EIO);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_pread_full(fd, buf, 1, 1ULL << 40, path, &err), WSHARD_EIO);
	cr_assert_eq(wshard_pread_full(fd, buf, 11, 0, path, NULL), WSHARD_EIO);
	close(fd);
	free(path);
	remove_dir(dir);
}

Test(read, bad_fd_is_eio)
{
	struct wshard_error err;
	char buf[4];

	wshard_error_clear(&err);
	cr_assert_eq(wshard_pread_full(-1, buf, 4, 0, "nowhere", &err), WSHARD_EIO);
	cr_assert_not_null(strstr(err.msg, "'nowhere'"), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, strerror(EBADF)), "%s", err.msg);
}

Test(read, read_file_limits)
{
	char *dir, *path = ten_byte_file(&dir);
	char *missing = join(dir, "missing");
	struct wshard_error err;
	char *buf = (void *)1;
	size_t len = 99;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_read_file(path, 10, &buf, &len, &err), WSHARD_OK);
	cr_assert_eq(len, 10);
	cr_assert_eq(buf[10], '\0');
	free(buf);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_read_file(path, 9, &buf, &len, &err), WSHARD_EINVAL);
	cr_assert_null(buf);
	cr_assert_eq(len, 0);
	cr_assert_not_null(strstr(err.msg, "over the limit"), "%s", err.msg);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_read_file(missing, 100, &buf, &len, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "missing"), "%s", err.msg);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_read_file(dir, 100, &buf, &len, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "not a regular file"), "%s", err.msg);
	free(path);
	free(missing);
	remove_dir(dir);
}

Test(read, path_join)
{
	char *p = wshard_path_join("a", "b");

	cr_assert_str_eq(p, "a/b");
	free(p);
	p = wshard_path_join("a/", "b");
	cr_assert_str_eq(p, "a/b");
	free(p);
	p = wshard_path_join("/", "b");
	cr_assert_str_eq(p, "/b");
	free(p);
}
