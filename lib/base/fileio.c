/*
 * fileio.c - whole reads and writes, and files that appear under their
 * final name only once complete (temporary name, fsync, rename, fsync of
 * the directory).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wshard.h"
#include "fileio.h"
#include "hooks.h"

enum wshard_err wshard_pread_full(int fd, void *buf, size_t len, uint64_t off,
				  const char *path, struct wshard_error *err)
{
	char *p = buf;

	while (len) {
		size_t n = len > (1u << 30) ? (1u << 30) : len;
		ssize_t r = pread(fd, p, n, (off_t)off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return wshard_error_set(err, WSHARD_EIO,
						"cannot read '%s': %s", path,
						strerror(errno));
		}
		if (r == 0)
			return wshard_error_set(err, WSHARD_EIO,
						"cannot read '%s': unexpected end of file at byte %llu",
						path, (unsigned long long)off);
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return WSHARD_OK;
}

enum wshard_err wshard_pwrite_full(int fd, const void *buf, size_t len,
				   uint64_t off, const char *path,
				   struct wshard_error *err)
{
	const char *p = buf;

	if (wshard_fault_hit("write"))
		return wshard_error_set(err, WSHARD_EIO,
					"cannot write '%s': %s (injected)",
					path, strerror(EIO));
	while (len) {
		size_t n = len > (1u << 30) ? (1u << 30) : len;
		ssize_t r = pwrite(fd, p, n, (off_t)off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return wshard_error_set(err, WSHARD_EIO,
						"cannot write '%s': %s", path,
						strerror(errno));
		}
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return WSHARD_OK;
}

char *wshard_path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *s = malloc(a + b + 2);

	if (!s)
		return NULL;
	memcpy(s, dir, a);
	if (a && dir[a - 1] != '/')
		s[a++] = '/';
	memcpy(s + a, name, b + 1);
	return s;
}

char *wshard_tmp_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
	const char *base = path + dirlen;
	size_t n = strlen(path) + sizeof(".") + sizeof(WSHARD_TMP_SUFFIX);
	char *s = malloc(n);

	if (!s)
		return NULL;
	snprintf(s, n, "%.*s.%s%s", (int)dirlen, path, base, WSHARD_TMP_SUFFIX);
	return s;
}

enum wshard_err wshard_fsync_dir(const char *path, struct wshard_error *err)
{
	char *dir = strdup(path);
	char *slash;
	int fd;
	enum wshard_err rc = WSHARD_OK;

	if (!dir)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		strcpy(dir, ".");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		rc = wshard_error_set(err, WSHARD_EIO, "cannot sync directory '%s': %s",
				      dir, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

enum wshard_err wshard_file_create(struct wshard_file **out_f, const char *path,
				   unsigned flags, struct wshard_error *err)
{
	struct wshard_file *f;

	*out_f = NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	f->fd = -1;
	f->flags = flags;
	f->path = strdup(path);
	f->tmp_path = wshard_tmp_name(path);
	if (!f->path || !f->tmp_path) {
		wshard_file_abort(f);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f->fd < 0) {
		wshard_error_set(err, WSHARD_EIO, "cannot create '%s': %s",
				 f->tmp_path, strerror(errno));
		wshard_file_abort(f);
		return WSHARD_EIO;
	}
	*out_f = f;
	return WSHARD_OK;
}

enum wshard_err wshard_file_pwrite(struct wshard_file *f, const void *buf,
				   size_t len, uint64_t off,
				   struct wshard_error *err)
{
	enum wshard_err rc = wshard_pwrite_full(f->fd, buf, len, off, f->path, err);

	if (rc != WSHARD_OK)
		return rc;
	/*
	 * Start writeback every few MiB so the disk works while we compute;
	 * the fsync at commit then has little left to wait for.  (Two threads
	 * may write one file: the counters are atomic.)
	 */
	{
		uint64_t now = __atomic_add_fetch(&f->written, len, __ATOMIC_RELAXED);
		uint64_t was = __atomic_load_n(&f->kicked, __ATOMIC_RELAXED);

		if (!(f->flags & WSHARD_FILE_NOSYNC) && now - was >= (8u << 20) &&
		    __atomic_compare_exchange_n(&f->kicked, &was, now, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			sync_file_range(f->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	}
	return WSHARD_OK;
}

enum wshard_err wshard_file_commit(struct wshard_file *f,
				   struct wshard_error *err)
{
	enum wshard_err rc = WSHARD_OK;

	if (!(f->flags & WSHARD_FILE_NOSYNC) && fsync(f->fd) < 0) {
		rc = wshard_error_set(err, WSHARD_EIO, "cannot sync '%s': %s",
				      f->path, strerror(errno));
		goto out;
	}
	if (close(f->fd) < 0) {
		f->fd = -1;
		rc = wshard_error_set(err, WSHARD_EIO, "cannot close '%s': %s",
				      f->path, strerror(errno));
		goto out;
	}
	f->fd = -1;
	if (rename(f->tmp_path, f->path) < 0) {
		rc = wshard_error_set(err, WSHARD_EIO, "cannot rename '%s' to '%s': %s",
				      f->tmp_path, f->path, strerror(errno));
		goto out;
	}
	free(f->tmp_path);
	f->tmp_path = NULL;
	if (!(f->flags & WSHARD_FILE_NOSYNC))
		rc = wshard_fsync_dir(f->path, err);
out:
	wshard_file_abort(f);
	return rc;
}

void wshard_file_abort(struct wshard_file *f)
{
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp_path)
		unlink(f->tmp_path);
	free(f->tmp_path);
	free(f->path);
	free(f);
}

enum wshard_err wshard_read_file(const char *path, uint64_t max, char **out_buf,
				 size_t *out_len, struct wshard_error *err)
{
	struct stat sb;
	char *buf = NULL;
	int fd;
	enum wshard_err rc;

	*out_buf = NULL;
	*out_len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return wshard_error_set(err, errno == ENOENT ? WSHARD_EINVAL : WSHARD_EIO,
					"cannot open '%s': %s", path, strerror(errno));
	if (fstat(fd, &sb) < 0) {
		rc = wshard_error_set(err, WSHARD_EIO, "cannot stat '%s': %s", path,
				      strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		rc = wshard_error_set(err, WSHARD_EINVAL, "cannot read '%s': not a regular file", path);
		goto out;
	}
	if ((uint64_t)sb.st_size > max) {
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "cannot read '%s': %llu bytes is over the limit of %llu",
				      path, (unsigned long long)sb.st_size,
				      (unsigned long long)max);
		goto out;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	rc = wshard_pread_full(fd, buf, (size_t)sb.st_size, 0, path, err);
	if (rc)
		goto out;
	buf[sb.st_size] = '\0';
	*out_buf = buf;
	*out_len = (size_t)sb.st_size;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

enum wshard_err wshard_write_file(const char *path, const void *buf, size_t len,
				  unsigned flags, struct wshard_error *err)
{
	struct wshard_file *f;
	enum wshard_err rc = wshard_file_create(&f, path, flags, err);

	if (rc)
		return rc;
	rc = wshard_file_pwrite(f, buf, len, 0, err);
	if (rc) {
		wshard_file_abort(f);
		return rc;
	}
	return wshard_file_commit(f, err);
}

enum wshard_err wshard_copy_file(const char *src, const char *dst,
				 unsigned flags, struct wshard_error *err)
{
	struct wshard_file *f = NULL;
	char *buf = NULL;
	uint64_t off = 0;
	int fd;
	enum wshard_err rc = WSHARD_OK;
	const size_t bufsz = 1 << 20;

	fd = open(src, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return wshard_error_set(err, WSHARD_EIO, "cannot open '%s': %s", src,
					strerror(errno));
	buf = malloc(bufsz);
	if (!buf) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	rc = wshard_file_create(&f, dst, flags, err);
	if (rc)
		goto out;
	for (;;) {
		ssize_t r = pread(fd, buf, bufsz, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = wshard_error_set(err, WSHARD_EIO, "cannot read '%s': %s",
					      src, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		rc = wshard_file_pwrite(f, buf, (size_t)r, off, err);
		if (rc)
			goto out;
		off += (uint64_t)r;
	}
	rc = wshard_file_commit(f, err);
	f = NULL;
out:
	wshard_file_abort(f);
	free(buf);
	close(fd);
	return rc;
}

int wshard_parse_size(const char *s, uint64_t *out_bytes)
{
	static const struct { const char *suffix; uint64_t mult; } units[] = {
		{ "", 1 },
		{ "B", 1 },
		{ "K", 1ULL << 10 }, { "KiB", 1ULL << 10 }, { "KB", 1000ULL },
		{ "M", 1ULL << 20 }, { "MiB", 1ULL << 20 }, { "MB", 1000000ULL },
		{ "G", 1ULL << 30 }, { "GiB", 1ULL << 30 }, { "GB", 1000000000ULL },
		{ "T", 1ULL << 40 }, { "TiB", 1ULL << 40 }, { "TB", 1000000000000ULL },
	};
	uint64_t v = 0;
	const char *p = s;
	size_t i;

	*out_bytes = 0;
	if (!s || *p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].suffix) == 0) {
			if (v && units[i].mult > UINT64_MAX / v)
				return -1;
			*out_bytes = v * units[i].mult;
			return 0;
		}
	}
	return -1;
}

const char *wshard_format_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, len, "%.2f %s", v, unit[u]);
	return buf;
}
