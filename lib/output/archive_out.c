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
#include <jansson.h>

#include "wshard.h"
#include "base/util.h"
#include "base/hash.h"
#include "base/fileio.h"
#include "source/catalog.h"
#include "base/comm.h"
#include "manifest.h"
#include "archive_out.h"
#include "convert.h"

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

/* ------------------------------------------------------------------ */
/* The rank archives of a convert                                      */
/* ------------------------------------------------------------------ */

static char *archive_path(struct convert *cv, int r)
{
	char name[64];

	wshard_archive_name(name, sizeof(name), r, cv->run->archive);
	return wshard_path_join(cv->run->out_dir, name);
}

void archive_discard(struct convert *cv, int r)
{
	struct rank_out *ro = &cv->ranks[r];
	char *path;

	if (!ro->archived)
		return;
	path = archive_path(cv, r);
	if (path)
		unlink(path);
	free(path);
	ro->archived = false;
}

/*
 * Packs rank r: the copied files, its parts in order, and the manifest
 * last (as in OUT, where its presence means the rest is complete).  The
 * parts must still hash to the checksums taken when they were validated.
 */
static enum wshard_err pack_rank(struct convert *cv, int r, const char *manifest,
				 size_t manifest_len, struct wshard_error *err)
{
	const struct wshard_rank_plan *rp = &cv->plan->ranks[r];
	const struct wshard_catalog *cat = cv->plan->cat;
	struct rank_out *ro = &cv->ranks[r];
	size_t n = cat->nextra + rp->nfiles + 1, i, k = 0;
	struct arcout_entry *ents = calloc(n, sizeof(*ents));
	char **paths = calloc(n, sizeof(*paths));
	char *path = archive_path(cv, r);
	enum wshard_err rc = WSHARD_OK;

	if (!ents || !paths || !path) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < cat->nextra; i++, k++) {
		ents[k].name = cat->extra[i];
		ents[k].path = paths[k] = wshard_path_join(cv->run->out_dir, cat->extra[i]);
	}
	for (i = 0; i < rp->nfiles; i++, k++) {
		ents[k].name = rp->files[i].name;
		ents[k].path = paths[k] = wshard_path_join(cv->run->out_dir, rp->files[i].name);
		ents[k].checksum = ro->ck.file[i];
	}
	ents[k].name = WSHARD_MANIFEST;
	ents[k].buf = manifest;
	ents[k].len = manifest_len;
	for (i = 0; i + 1 < n; i++)
		if (!paths[i]) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			goto out;
		}
	rc = arcout_write(path, cv->run->archive, ents, n, cv->plan->opt.checksum,
			  convert_file_flags(cv), &ro->archive_size, ro->archive_ck, err);
	if (rc)
		goto out;
	ro->archived = true;
	/* --archive-only: the rank's files go as soon as its archive is complete */
	for (i = cat->nextra; cv->run->archive_only && i + 1 < n && !rc; i++)
		if (unlink(paths[i]) < 0 && errno != ENOENT)
			rc = wshard_error_set(err, WSHARD_EIO, "cannot remove '%s': %s", paths[i],
					      strerror(errno));
out:
	for (i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
	free(ents);
	free(path);
	return rc;
}

/* Process 0 lists the gathered archives, by rank, under "archives". */
static enum wshard_err list_archives(struct convert *cv, json_t *doc, const char *all,
				     const size_t *lens, struct wshard_error *err)
{
	json_t *list = json_array();
	size_t off = 0, i;
	json_t *v;
	int p;

	for (i = 0; list && i < (size_t)cv->plan->nranks; i++)
		json_array_append_new(list, json_null());
	for (p = 0; list && p < cv->nprocs; p++) {
		json_t *part = json_loadb(all + off, lens[p], 0, NULL);

		off += lens[p];
		json_array_foreach(part, i, v) {
			json_array_set(list, (size_t)json_integer_value(json_object_get(v, "rank")), v);
			cv->run->archive_bytes += (uint64_t)json_integer_value(json_object_get(v, "size"));
		}
		json_decref(part);
	}
	if (!list || json_object_set_new(doc, "archives", list) < 0)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
	return WSHARD_OK;
}

enum wshard_err archive_ranks(struct convert *cv, struct manifest_parts *mp,
			      struct wshard_error *err)
{
	char *text = NULL, *inner = NULL, *all = NULL;
	size_t text_len = 0, inner_len = 0, *lens = NULL;
	json_t *mine = NULL;
	int r;

	if (cv->proc == 0 && !err->code && !(text = manifest_text(mp->doc, mp->text, mp->len,
								     cv->plan->nranks, &text_len)))
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory writing the manifest");
	if (wshard_comm_agree(cv->comm, err) ||
	    wshard_comm_bcast_bytes(cv->comm, text, text_len, &inner, &inner_len, err))
		goto out;
	for (r = cv->proc; r < cv->plan->nranks && !err->code; r += cv->nprocs)
		pack_rank(cv, r, inner, inner_len, err);
	if (wshard_comm_agree(cv->comm, err))
		goto out;
	mine = json_array();
	for (r = cv->proc; mine && r < cv->plan->nranks; r += cv->nprocs) {
		char name[64];

		wshard_archive_name(name, sizeof(name), r, cv->run->archive);
		json_array_append_new(mine, json_pack("{s:i,s:s,s:I,s:s}", "rank", r, "name", name,
						      "size", (json_int_t)cv->ranks[r].archive_size,
						      "checksum", cv->ranks[r].archive_ck));
	}
	free(text);
	text = mine ? json_dumps(mine, JSON_COMPACT) : NULL;
	if (!text) {
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
		text = strdup("[]");
	}
	if (!wshard_comm_gather_bytes(cv->comm, text ? text : "[]", text ? strlen(text) : 2,
				      &all, &lens, err) && cv->proc == 0 && !err->code)
		list_archives(cv, mp->doc, all, lens, err);
	if (cv->proc == 0 && cv->run->archive_only && !err->code)
		extras_remove(cv, err);
	wshard_comm_agree(cv->comm, err);
out:
	json_decref(mine);
	free(text);
	free(inner);
	free(all);
	free(lens);
	return err->code;
}
