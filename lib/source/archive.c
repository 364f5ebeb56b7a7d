/*
 * archive.c - reads a checkpoint packed in an archive with libarchive:
 * in place for an uncompressed tar, front to back for a compressed one.
 * Hostile entries are refused before anything is read from them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "wshard.h"
#include "base/util.h"
#include "safetensors.h"
#include "base/fileio.h"
#include "arc.h"

/* Decompressed bytes allowed per archive byte (safetensors barely compress). */
#define MAX_RATIO 100
/* Small members of a compressed archive are held in memory, up to this in all. */
#define MAX_HELD (256ULL << 20)

static bool has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

bool arc_is_archive(const char *path)
{
	static const char *const suffixes[] = {
		".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".txz", ".zip",
	};
	size_t i;

	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (has_suffix(path, suffixes[i]))
			return true;
	return false;
}

static struct archive *reader_new(const char *path)
{
	struct archive *a = archive_read_new();

	if (!a)
		return NULL;
	if (has_suffix(path, ".zip")) {
		archive_read_support_format_zip_seekable(a);
	} else {
		archive_read_support_format_tar(a);
		archive_read_support_format_gnutar(a);
		archive_read_support_filter_gzip(a);
		archive_read_support_filter_zstd(a);
		archive_read_support_filter_xz(a);
	}
	return a;
}

/* Normalises an entry name: strips "./", refuses absolute and ".." paths. */
static enum wshard_err clean_name(const char *arc, const char *raw, char **out,
				  struct wshard_error *err)
{
	char *name, *o;
	const char *p;
	size_t n;

	*out = NULL;
	if (!raw || !*raw)
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': an entry has no name", arc);
	if (raw[0] == '/')
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': entry '%s' has an absolute path", arc, raw);
	name = malloc(strlen(raw) + 1);
	if (!name)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	o = name;
	for (p = raw; *p; p += n + (p[n] == '/')) {
		n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.'))
			continue;
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			free(name);
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': entry '%s' has a '..' component", arc, raw);
		}
		if (o != name)
			*o++ = '/';
		memcpy(o, p, n);
		o += n;
	}
	*o = '\0';
	*out = name;
	return WSHARD_OK;
}

/* A link's target, resolved from the link's folder, must stay inside. */
static bool link_escapes(const char *name, const char *target)
{
	int depth = 0;
	const char *p;
	size_t n;

	if (target[0] == '/')
		return true;
	for (p = name; (p = strchr(p, '/')); p++)
		depth++;
	for (p = target; *p; p += n + (p[n] == '/')) {
		n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return true;
		} else if (n && !(n == 1 && p[0] == '.')) {
			depth++;
		}
	}
	return false;
}

static enum wshard_err check_entry(struct wshard_archive *arc, struct archive_entry *e,
				   const char *name, struct wshard_error *err)
{
	const char *hl = archive_entry_hardlink(e), *sl = archive_entry_symlink(e);
	mode_t type = archive_entry_filetype(e);
	size_t i;

	if (sl || hl) {
		const char *t = sl ? sl : hl;

		if (sl && link_escapes(name, t))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': entry '%s' is a link to '%s', outside the archive",
						arc->path, name, t);
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': entry '%s' is a link to '%s'; links are not supported",
					arc->path, name, t);
	}
	if (type != AE_IFREG && type != AE_IFDIR)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': entry '%s' is a device, fifo or socket",
					arc->path, name);
	if (archive_entry_sparse_count(e) > 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': entry '%s' is a sparse file", arc->path, name);
	if (type == AE_IFREG && !archive_entry_size_is_set(e))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': entry '%s' has no size", arc->path, name);
	for (i = 0; i < arc->nmembers; i++)
		if (!strcmp(arc->members[i].name, name))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': entry '%s' appears twice", arc->path, name);
	return WSHARD_OK;
}

static enum wshard_err ratio_check(struct wshard_archive *arc, struct archive *a,
				   const char *name, struct wshard_error *err)
{
	int64_t raw = archive_filter_bytes(a, -1), out = archive_filter_bytes(a, 0);

	if (raw < (1 << 20))
		raw = 1 << 20;
	if (out > raw * MAX_RATIO)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': entry '%s' decompresses to more than %d times its size",
					arc->path, name, MAX_RATIO);
	return WSHARD_OK;
}

static enum wshard_err read_data(struct wshard_archive *arc, struct archive *a,
				 const char *name, void *buf, size_t len,
				 struct wshard_error *err)
{
	char *p = buf;

	while (len) {
		la_ssize_t n = archive_read_data(a, p, len);

		if (n < 0)
			return wshard_error_set(err, WSHARD_EINVAL, "'%s': entry '%s': %s",
						arc->path, name, archive_error_string(a));
		if (n == 0)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': entry '%s' holds less data than its size says",
						arc->path, name);
		p += n;
		len -= (size_t)n;
	}
	return ratio_check(arc, a, name, err);
}

/* Compressed: keep what the catalog needs without a second pass. */
static enum wshard_err hold_member(struct wshard_archive *arc, struct archive *a,
				   struct arc_member *m, uint64_t *held,
				   struct wshard_error *err)
{
	unsigned char prefix[8];
	uint64_t n = 0;
	int i;
	enum wshard_err rc;

	if (has_suffix(m->name, ".safetensors")) {
		if (m->size < 8)
			return WSHARD_OK;	/* the reader will say it is too short */
		rc = read_data(arc, a, m->name, prefix, 8, err);
		if (rc)
			return rc;
		for (i = 7; i >= 0; i--)
			n = n << 8 | prefix[i];
		if (n > WSHARD_ST_HEADER_MAX || 8 + n > m->size)
			n = 0;			/* the reader reports it */
		m->head = malloc(8 + n + 1);
		if (!m->head)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		memcpy(m->head, prefix, 8);
		m->head_len = 8 + n;
		return read_data(arc, a, m->name, m->head + 8, n, err);
	}
	if (has_suffix(m->name, ".bin") || has_suffix(m->name, ".pt") ||
	    has_suffix(m->name, ".pth"))
		return WSHARD_OK;		/* never used */
	if (*held + m->size > MAX_HELD)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': entry '%s' is too large to hold in memory from a compressed archive; use an uncompressed tar",
					arc->path, m->name);
	*held += m->size;
	m->data = malloc(m->size + 1);
	if (!m->data)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	m->data[m->size] = '\0';
	return read_data(arc, a, m->name, m->data, m->size, err);
}

/* Members all below one top folder: names are taken relative to it. */
static void strip_top(struct wshard_archive *arc)
{
	size_t i, n;
	const char *first;

	if (!arc->nmembers || !(first = strchr(arc->members[0].name, '/')))
		return;
	n = (size_t)(first - arc->members[0].name) + 1;
	for (i = 0; i < arc->nmembers; i++)
		if (strncmp(arc->members[i].name, arc->members[0].name, n))
			return;
	for (i = 0; i < arc->nmembers; i++)
		memmove(arc->members[i].name, arc->members[i].name + n,
			strlen(arc->members[i].name + n) + 1);
}

static enum wshard_err scan(struct wshard_archive *arc, struct archive *a,
			    struct wshard_error *err)
{
	struct archive_entry *e;
	uint64_t held = 0;
	enum wshard_err rc = WSHARD_OK;
	int r;

	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		struct arc_member *m, *ms;
		char *name;

		rc = clean_name(arc->path, archive_entry_pathname(e), &name, err);
		if (!rc)
			rc = check_entry(arc, e, name, err);
		if (rc || archive_entry_filetype(e) == AE_IFDIR || !*name) {
			free(name);
			if (rc)
				return rc;
			continue;
		}
		ms = realloc(arc->members, (arc->nmembers + 1) * sizeof(*ms));
		if (!ms) {
			free(name);
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		}
		arc->members = ms;
		m = &ms[arc->nmembers++];
		memset(m, 0, sizeof(*m));
		m->name = name;
		m->size = (uint64_t)archive_entry_size(e);
		/* a declared size far beyond the archive's: a bomb, refused up front */
		if (!arc->in_place &&
		    m->size / MAX_RATIO > WSHARD_MAX(arc->file_size, 1ULL << 20))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': entry '%s' says %llu bytes, more than %d times the archive's size",
						arc->path, name, (unsigned long long)m->size, MAX_RATIO);
		if (arc->in_place) {
			m->offset = (uint64_t)archive_filter_bytes(a, 0);
			if (m->offset > arc->file_size || m->size > arc->file_size - m->offset)
				return wshard_error_set(err, WSHARD_EINVAL,
							"'%s': entry '%s' says %llu bytes, more than the archive holds",
							arc->path, name, (unsigned long long)m->size);
		} else {
			rc = hold_member(arc, a, m, &held, err);
			if (rc)
				return rc;
		}
		rc = ratio_check(arc, a, name, err);
		if (rc)
			return rc;
	}
	if (r != ARCHIVE_EOF)
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': %s%s%s", arc->path,
					archive_error_string(a) ? archive_error_string(a) : "unreadable",
					arc->nmembers ? " after entry " : "",
					arc->nmembers ? arc->members[arc->nmembers - 1].name : "");
	strip_top(arc);
	return WSHARD_OK;
}

enum wshard_err arc_open(struct wshard_archive **out_arc, const char *path,
			 struct wshard_error *err)
{
	struct wshard_archive *arc = calloc(1, sizeof(*arc));
	struct archive *a = NULL;
	struct stat sb;
	enum wshard_err rc;

	*out_arc = NULL;
	if (!arc || !(arc->path = strdup(path))) {
		free(arc);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	arc->cur = -1;
	arc->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (arc->fd < 0 || fstat(arc->fd, &sb) < 0) {
		rc = wshard_error_set(err, WSHARD_EIO, "cannot open '%s': %s", path,
				      strerror(errno));
		goto out;
	}
	arc->file_size = (uint64_t)sb.st_size;
	a = reader_new(path);
	if (!a || archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		rc = wshard_error_set(err, WSHARD_EINVAL, "'%s': not a readable archive: %s",
				      path, a ? archive_error_string(a) : "out of memory");
		goto out;
	}
	/* the first header tells the filter and the format */
	{
		struct archive_entry *e;
		int r = archive_read_next_header(a, &e);

		if (r != ARCHIVE_OK && r != ARCHIVE_EOF) {
			rc = wshard_error_set(err, WSHARD_EINVAL, "'%s': %s", path,
					      archive_error_string(a));
			goto out;
		}
		arc->in_place = archive_filter_code(a, 0) == ARCHIVE_FILTER_NONE &&
				(archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_TAR;
		archive_read_free(a);
	}
	a = reader_new(path);
	if (!a || archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		rc = wshard_error_set(err, WSHARD_EIO, "cannot reopen '%s'", path);
		goto out;
	}
	rc = scan(arc, a, err);
out:
	if (a)
		archive_read_free(a);
	if (rc) {
		arc_free(arc);
		return rc;
	}
	*out_arc = arc;
	return WSHARD_OK;
}

long arc_find(const struct wshard_archive *arc, const char *name)
{
	size_t i;

	for (i = 0; i < arc->nmembers; i++)
		if (!strcmp(arc->members[i].name, name))
			return (long)i;
	return -1;
}

/* Compressed: moves the sequential reader to member m, offset off. */
static enum wshard_err seek_forward(struct wshard_archive *arc, size_t m, uint64_t off,
				    struct wshard_error *err)
{
	struct archive *a = arc->reader;
	char scratch[1 << 16];

	if (!a) {
		a = arc->reader = reader_new(arc->path);
		if (!a || archive_read_open_filename(a, arc->path, 1 << 20) != ARCHIVE_OK)
			return wshard_error_set(err, WSHARD_EIO, "cannot reopen '%s'", arc->path);
	}
	if ((long)m < arc->cur || ((long)m == arc->cur && off < arc->pos))
		return wshard_error_set(err, WSHARD_EIO,
					"'%s': internal: a compressed archive read went backwards",
					arc->path);
	while (arc->cur < (long)m) {
		struct archive_entry *e;

		if (archive_read_next_header(a, &e) != ARCHIVE_OK)
			return wshard_error_set(err, WSHARD_EINVAL, "'%s': %s", arc->path,
						archive_error_string(a) ? archive_error_string(a)
									: "ends early");
		if (archive_entry_filetype(e) == AE_IFDIR)
			continue;
		arc->cur++;
		arc->pos = 0;
	}
	while (arc->pos < off) {
		size_t n = (size_t)WSHARD_MIN(off - arc->pos, sizeof(scratch));
		enum wshard_err rc = read_data(arc, a, arc->members[m].name, scratch, n, err);

		if (rc)
			return rc;
		arc->pos += n;
	}
	return WSHARD_OK;
}

enum wshard_err arc_read(struct wshard_archive *arc, size_t m, uint64_t off,
			 void *buf, size_t len, struct wshard_error *err)
{
	enum wshard_err rc;

	if (m >= arc->nmembers || off > arc->members[m].size ||
	    len > arc->members[m].size - off)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': read past the end of an entry", arc->path);
	if (arc->in_place)
		return wshard_pread_full(arc->fd, buf, len, arc->members[m].offset + off,
					 arc->path, err);
	rc = seek_forward(arc, m, off, err);
	if (rc)
		return rc;
	rc = read_data(arc, arc->reader, arc->members[m].name, buf, len, err);
	if (!rc)
		arc->pos += len;
	return rc;
}

enum wshard_err arc_slurp(struct wshard_archive *arc, size_t m, uint64_t max,
			  char **out_buf, size_t *out_len, struct wshard_error *err)
{
	struct arc_member *mb = &arc->members[m];
	char *buf;
	enum wshard_err rc;

	*out_buf = NULL;
	*out_len = 0;
	if (mb->size > max)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': entry '%s' is %llu bytes, over the limit of %llu",
					arc->path, mb->name, (unsigned long long)mb->size,
					(unsigned long long)max);
	buf = malloc(mb->size + 1);
	if (!buf)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (mb->data) {
		memcpy(buf, mb->data, mb->size);
		rc = WSHARD_OK;
	} else if (arc->in_place) {
		rc = arc_read(arc, m, 0, buf, mb->size, err);
	} else {
		rc = wshard_error_set(err, WSHARD_EINVAL, "'%s': entry '%s' was not kept",
				      arc->path, mb->name);
	}
	if (rc) {
		free(buf);
		return rc;
	}
	buf[mb->size] = '\0';
	*out_buf = buf;
	*out_len = mb->size;
	return WSHARD_OK;
}

void arc_free(struct wshard_archive *arc)
{
	size_t i;

	if (!arc)
		return;
	if (arc->reader)
		archive_read_free(arc->reader);
	for (i = 0; i < arc->nmembers; i++) {
		free(arc->members[i].name);
		free(arc->members[i].head);
		free(arc->members[i].data);
	}
	free(arc->members);
	if (arc->fd >= 0)
		close(arc->fd);
	free(arc->path);
	free(arc);
}
