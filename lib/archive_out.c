/*
 * archive_out.c - packs one rank's output into one archive.  libarchive
 * lays out the tar and compresses it; its write callback puts the bytes
 * into a struct wshard_file (temporary name, renamed once complete) and
 * hashes them on the way, so the archive is never read back.  Nothing in
 * an entry's header depends on the machine, the user or the clock, so the
 * same files give the same archive bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "wshard.h"
#include "internal.h"
#include "archive_out.h"

/* tar's customary record of 10240 bytes, and 100 of them per write. */
#define RECORD 10240
#define BLOCK (100 * RECORD)

struct sink {
	struct wshard_file *f;
	struct wshard_hash h;
	struct wshard_error *err;
};

/* ".tar", ".tar.zst" or ".tar.gz"; "" for WSHARD_ARCHIVE_NONE. */
static const char *arcout_suffix(enum wshard_archive_fmt fmt)
{
	switch (fmt) {
	case WSHARD_ARCHIVE_TAR:
		return ".tar";
	case WSHARD_ARCHIVE_TAR_ZST:
		return ".tar.zst";
	case WSHARD_ARCHIVE_TAR_GZ:
		return ".tar.gz";
	case WSHARD_ARCHIVE_NONE:
		break;
	}
	return "";
}

void wshard_archive_name(char *out, size_t n, int r, enum wshard_archive_fmt fmt)
{
	snprintf(out, n, "rank-%d%s", r, arcout_suffix(fmt));
}

static la_ssize_t sink_write(struct archive *a, void *ctx, const void *buf, size_t len)
{
	struct sink *s = ctx;

	if (wshard_file_pwrite(s->f, buf, len, s->f->written, s->err)) {
		archive_set_error(a, EIO, "%s", s->err->msg);
		return -1;
	}
	wshard_hash_update(&s->h, buf, len);
	return (la_ssize_t)len;
}

/* libarchive's reason, unless the sink already recorded the real cause. */
static enum wshard_err lib_error(struct archive *a, const char *path, const char *what,
				 struct wshard_error *err)
{
	const char *why = a ? archive_error_string(a) : NULL;

	return wshard_error_set(err, WSHARD_EIO, "cannot write '%s': %s: %s", path, what,
				why ? why : "out of memory");
}

/*
 * Fixed settings only: a new libarchive default must not change the bytes.
 * An uncompressed tar is padded to whole 10240-byte records as tar(1) does;
 * a compressed stream is not padded at all.
 */
static struct archive *writer_new(enum wshard_archive_fmt fmt)
{
	struct archive *a = archive_write_new();
	int r;

	if (!a)
		return NULL;
	r = archive_write_set_format_pax_restricted(a);
	if (r == ARCHIVE_OK)
		r = archive_write_set_bytes_per_block(a, BLOCK);
	if (r == ARCHIVE_OK)
		r = archive_write_set_bytes_in_last_block(a, fmt == WSHARD_ARCHIVE_TAR ? RECORD : 1);
	switch (fmt) {
	case WSHARD_ARCHIVE_TAR_ZST:
		if (r == ARCHIVE_OK)
			r = archive_write_add_filter_zstd(a);
		if (r == ARCHIVE_OK)
			r = archive_write_set_filter_option(a, "zstd", "compression-level", "3");
		break;
	case WSHARD_ARCHIVE_TAR_GZ:
		if (r == ARCHIVE_OK)
			r = archive_write_add_filter_gzip(a);
		if (r == ARCHIVE_OK)
			r = archive_write_set_filter_option(a, "gzip", "compression-level", "6");
		/* a NULL value turns the option off: no mtime in the gzip header */
		if (r == ARCHIVE_OK)
			r = archive_write_set_filter_option(a, "gzip", "timestamp", NULL);
		break;
	default:
		break;
	}
	if (r != ARCHIVE_OK) {
		archive_write_free(a);
		return NULL;
	}
	return a;
}

/* Streams one entry: from its file, or from its buffer. */
static enum wshard_err add_entry(struct archive *a, struct archive_entry *e,
				 const struct arcout_entry *en, enum wshard_checksum algo,
				 const char *arc, char *buf, struct wshard_error *err)
{
	uint64_t size = en->len, done = 0;
	struct wshard_hash h = { 0 };
	char digest[WSHARD_DIGEST_HEX];
	struct stat sb;
	int fd = -1;
	enum wshard_err rc = WSHARD_OK;

	if (en->checksum && wshard_hash_init(&h, algo))
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (en->path) {
		fd = open(en->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &sb) < 0) {
			rc = wshard_error_set(err, WSHARD_EIO, "cannot open '%s': %s", en->path,
					      strerror(errno));
			goto out;
		}
		size = (uint64_t)sb.st_size;
	}
	archive_entry_clear(e);
	archive_entry_set_pathname(e, en->name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_set_mtime(e, 0, 0);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	/*
	 * ARCHIVE_WARN: a name that is not ASCII cannot be converted to UTF-8
	 * in the "C" locale, and is stored as its bytes (pax hdrcharset=BINARY).
	 */
	if (archive_write_header(a, e) < ARCHIVE_WARN) {
		rc = lib_error(a, arc, en->name, err);
		goto out;
	}
	while (done < size) {
		size_t len = (size_t)WSHARD_MIN(size - done, BLOCK), o = 0;
		const char *p = (const char *)en->buf + done;

		if (fd >= 0) {
			rc = wshard_pread_full(fd, buf, len, done, en->path, err);
			if (rc)
				goto out;
			p = buf;
		}
		if (en->checksum)
			wshard_hash_update(&h, p, len);
		while (o < len) {
			la_ssize_t w = archive_write_data(a, p + o, len - o);

			if (w <= 0) {
				rc = lib_error(a, arc, en->name, err);
				goto out;
			}
			o += (size_t)w;
		}
		done += len;
	}
	if (en->checksum)
		wshard_hash_final(&h, digest);
	if (fd >= 0 && (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != size))
		rc = wshard_error_set(err, WSHARD_EIO, "'%s' changed size while it was archived",
				      en->path);
	else if (en->checksum && strcmp(digest, en->checksum))
		rc = wshard_error_set(err, WSHARD_EIO,
				      "'%s' changed after it was validated: checksum %s, expected %s",
				      en->path ? en->path : en->name, digest, en->checksum);
	else if (archive_write_finish_entry(a) != ARCHIVE_OK)
		rc = lib_error(a, arc, en->name, err);
out:
	wshard_hash_release(&h);
	if (fd >= 0)
		close(fd);
	return rc;
}

enum wshard_err arcout_write(const char *path, enum wshard_archive_fmt fmt,
			     const struct arcout_entry *entries, size_t n,
			     enum wshard_checksum algo, unsigned flags,
			     uint64_t *out_size, char *out_checksum,
			     struct wshard_error *err)
{
	struct sink s = { .err = err };
	struct archive *a = NULL;
	struct archive_entry *e = NULL;
	char *buf = NULL;
	size_t i;
	enum wshard_err rc;

	*out_size = 0;
	out_checksum[0] = '\0';
	if (fmt == WSHARD_ARCHIVE_NONE)
		return wshard_error_set(err, WSHARD_EUSAGE, "no archive format for '%s'", path);
	rc = wshard_file_create(&s.f, path, flags, err);
	if (rc)
		return rc;
	buf = malloc(BLOCK);
	e = archive_entry_new();
	a = writer_new(fmt);
	if (!buf || !e || !a || wshard_hash_init(&s.h, algo)) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory writing '%s'", path);
		goto out;
	}
	if (archive_write_open(a, &s, NULL, sink_write, NULL) != ARCHIVE_OK) {
		rc = lib_error(a, path, "cannot start", err);
		goto out;
	}
	for (i = 0; i < n && !rc; i++)
		rc = add_entry(a, e, &entries[i], algo, path, buf, err);
	if (rc)
		goto out;
	if (archive_write_close(a) != ARCHIVE_OK) {
		rc = lib_error(a, path, "cannot finish", err);
		goto out;
	}
	*out_size = s.f->written;
	wshard_hash_final(&s.h, out_checksum);
	rc = wshard_file_commit(s.f, err);
	s.f = NULL;
out:
	/* freed first: freeing an open archive may still flush into s.f */
	if (a)
		archive_write_free(a);
	archive_entry_free(e);
	wshard_file_abort(s.f);
	wshard_hash_release(&s.h);
	free(buf);
	if (rc) {
		*out_size = 0;
		out_checksum[0] = '\0';
	}
	return rc;
}
