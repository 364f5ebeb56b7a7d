/*
 * st_read.c - a safetensors stream opened: a file, a stream inside an
 * open file (a member of an uncompressed tar), or bytes in memory.  Its
 * length prefix is checked here and its header handed to st_header.c;
 * tensor data is read on demand with pread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wshard.h"
#include "safetensors.h"
#include "st_impl.h"

static uint64_t load_le64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Checks the 8-byte length prefix n against the cap and st->size. */
static enum wshard_err check_prefix(struct wshard_st *st, uint64_t n,
				    struct wshard_error *err)
{
	if (n > WSHARD_ST_HEADER_MAX)
		return st_bad(err, st->path, "header length %llu exceeds the "
			   "limit of %llu bytes", (unsigned long long)n,
			   WSHARD_ST_HEADER_MAX);
	if (8 + n > st->size)
		return st_bad(err, st->path, "header length %llu runs past the "
			   "end of the file (%llu bytes)",
			   (unsigned long long)n,
			   (unsigned long long)st->size);
	st->data_start = 8 + n;
	return WSHARD_OK;
}

static enum wshard_err too_short(struct wshard_st *st, struct wshard_error *err)
{
	return st_bad(err, st->path, "file too short for a safetensors header "
		   "(%llu bytes)", (unsigned long long)st->size);
}

enum wshard_err wshard_st_parse(struct wshard_st **out_st, const void *buf,
				size_t len, const char *path,
				struct wshard_error *err)
{
	/* the whole file at hand is a head that holds all of the header */
	return wshard_st_parse_head(out_st, buf, len, len, path, err);
}

enum wshard_err wshard_st_parse_head(struct wshard_st **out_st, const void *head,
				     size_t head_len, uint64_t size,
				     const char *path, struct wshard_error *err)
{
	const unsigned char *p = head;
	struct wshard_st *st;
	enum wshard_err rc;

	*out_st = NULL;
	st = st_new(path, false);
	if (!st)
		return st_nomem(err, path);
	st->size = size;
	if (size < 8 || head_len < 8) {
		rc = too_short(st, err);
		goto out;
	}
	rc = check_prefix(st, load_le64(p), err);
	if (rc)
		goto out;
	if (head_len < st->data_start) {
		rc = st_bad(err, st->path, "header is cut short (%zu of %llu bytes)", head_len,
			 (unsigned long long)st->data_start);
		goto out;
	}
	rc = st_parse_header(st, (const char *)p + 8, (size_t)(st->data_start - 8), err);
out:
	if (rc)
		wshard_st_free(st);
	else
		*out_st = st;
	return rc;
}

/* Reads exactly len bytes at off; a short read is an error. */
static enum wshard_err read_full(int fd, void *buf, size_t len, uint64_t off,
				 const char *path, struct wshard_error *err)
{
	unsigned char *p = buf;
	ssize_t r;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return wshard_error_set(err, WSHARD_EIO, "cannot read '%s': "
					"offset %llu is out of range", path,
					(unsigned long long)off);
	while (len) {
		r = pread(fd, p, len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return wshard_error_set(err, WSHARD_EIO,
						"cannot read '%s': %s", path,
						strerror(errno));
		if (r == 0)
			return wshard_error_set(err, WSHARD_EIO,
						"cannot read '%s': unexpected "
						"end of file at byte %llu",
						path, (unsigned long long)off);
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return WSHARD_OK;
}

/* Reads and validates the header of st (fd, base and size set). */
static enum wshard_err st_load(struct wshard_st *st, struct wshard_error *err)
{
	unsigned char prefix[8];
	enum wshard_err rc;
	char *hdr = NULL;
	size_t n;

	if (st->size < 8)
		return too_short(st, err);
	rc = read_full(st->fd, prefix, 8, st->base, st->path, err);
	if (rc)
		return rc;
	rc = check_prefix(st, load_le64(prefix), err);
	if (rc)
		return rc;
	n = (size_t)(st->data_start - 8);
	hdr = malloc(n + 1);
	if (!hdr)
		return st_nomem(err, st->path);
	rc = read_full(st->fd, hdr, n, st->base + 8, st->path, err);
	if (!rc)
		rc = st_parse_header(st, hdr, n, err);
	free(hdr);
	return rc;
}

enum wshard_err wshard_st_open(struct wshard_st **out_st, const char *path,
			       struct wshard_error *err)
{
	struct wshard_st *st = NULL;
	enum wshard_err rc;
	struct stat sb;

	*out_st = NULL;
	st = st_new(path, true);
	if (!st)
		return st_nomem(err, path);
	/* O_NONBLOCK: a FIFO given by mistake must not hang the open. */
	st->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (st->fd < 0) {
		rc = wshard_error_set(err, WSHARD_EIO, "cannot open '%s': %s",
				      path, strerror(errno));
		goto out;
	}
	if (fstat(st->fd, &sb) < 0) {
		rc = wshard_error_set(err, WSHARD_EIO, "cannot stat '%s': %s",
				      path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		rc = st_bad(err, path, "not a regular file");
		goto out;
	}
	st->size = (uint64_t)sb.st_size;
	rc = st_load(st, err);
out:
	if (rc)
		wshard_st_free(st);
	else
		*out_st = st;
	return rc;
}

enum wshard_err wshard_st_open_fd(struct wshard_st **out_st, int fd,
				  uint64_t base, uint64_t size,
				  const char *path, struct wshard_error *err)
{
	struct wshard_st *st;
	enum wshard_err rc;

	*out_st = NULL;
	st = st_new(path, false);
	if (!st)
		return st_nomem(err, path);
	st->fd = fd;
	st->base = base;
	st->size = size;
	if (fd < 0 || base > (uint64_t)INT64_MAX ||
	    size > (uint64_t)INT64_MAX - base) {
		rc = st_bad(err, st->path, "stream of %llu bytes at offset %llu "
			 "is out of range", (unsigned long long)size,
			 (unsigned long long)base);
		goto out;
	}
	rc = st_load(st, err);
out:
	if (rc)
		wshard_st_free(st);
	else
		*out_st = st;
	return rc;
}

enum wshard_err wshard_st_read(const struct wshard_st *st,
			       const struct wshard_st_tensor *t, uint64_t off,
			       void *buf, size_t len, struct wshard_error *err)
{
	char name[3 * QUOTE_MAX];
	uint64_t nbytes = t->end - t->begin;

	if (off > nbytes || len > nbytes - off) {
		st_quote(name, sizeof(name), t->name, strlen(t->name));
		return st_bad(err, st->path, "tensor '%s': cannot read %zu bytes "
			   "at offset %llu of its %llu bytes", name, len,
			   (unsigned long long)off,
			   (unsigned long long)nbytes);
	}
	if (st->fd < 0)
		return st_bad(err, st->path, "tensor data is not available "
			   "(header parsed from memory)");
	if (!len)
		return WSHARD_OK;
	return read_full(st->fd, buf, len,
			 st->base + st->data_start + t->begin + off, st->path,
			 err);
}
