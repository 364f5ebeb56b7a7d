/*
 * verify_files.c - what verify checks of the output itself: each file's
 * existence, size and checksum (one read of each file, on a thread of its
 * own, hashing every tensor on the way), the strict safetensors
 * structure against the manifest, and the rank archives.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wshard.h"
#include "base/util.h"
#include "base/dtype.h"
#include "base/hash.h"
#include "source/safetensors.h"
#include "base/fileio.h"
#include "source/catalog.h"
#include "base/comm.h"
#include "rules/rules.h"
#include "stream/stream.h"
#include "verify_state.h"

/* ------------------------------------------------------------------ */
/* Files: existence, size, checksum, structure                          */
/* ------------------------------------------------------------------ */

struct span {
	uint64_t start, end;		/* absolute in the file */
	struct vtensor *t;
	struct wshard_hash h;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->start < y->start ? -1 : (x->start > y->start);
}

/*
 * The n bytes at p, offset off of the file, into the file's hash h and
 * into the spans they overlap, from spans[first] on (those before it are
 * complete).  Composed (compose), each byte is hashed once, and a span
 * the bytes complete is appended to h.  Returns the new first.
 */
static inline size_t hash_chunk(struct wshard_hash *h, struct span *spans, size_t nspans,
				size_t first, const char *p, uint64_t off, uint64_t n,
				bool compose)
{
	uint64_t c;			/* bytes the file's hash has, or a tensor's */
	size_t i;

	if (!compose)
		wshard_hash_update(h, p, (size_t)n);
	c = off;
	for (i = first; i < nspans && spans[i].start < off + n; i++) {
		uint64_t a = WSHARD_MAX(spans[i].start, off);
		uint64_t b = WSHARD_MIN(spans[i].end, off + n);

		if (compose && a > c)
			wshard_hash_update(h, p + (c - off), (size_t)(a - c));
		if (a < b)
			wshard_hash_update(&spans[i].h, p + (a - off), (size_t)(b - a));
		if (compose) {
			c = WSHARD_MAX(b, a);
			if (spans[i].end <= off + n)
				wshard_hash_append(h, &spans[i].h,
						   spans[i].end - spans[i].start);
		}
		if (spans[i].end <= off + n && i == first)
			first++;
	}
	if (compose && c < off + n)
		wshard_hash_update(h, p + (c - off), (size_t)(off + n - c));
	return first;
}

/*
 * One read of the file: its digest into out, and the digest of every
 * tensor in spans (absolute byte ranges) into its vtensor.  Where digests
 * compose (CRC-64/NVME) and the spans do not overlap, each byte is hashed
 * once: the file's hash takes the bytes between tensors itself and each
 * tensor's hash as the tensor ends (wshard_hash_append); hashing both
 * was the largest CPU cost of verifying a dense checkpoint.
 */
static enum wshard_err hash_file(const char *path, enum wshard_checksum algo,
				 struct span *spans, size_t nspans, char *out,
				 struct wshard_error *err)
{
	struct wshard_hash h = { 0 };
	size_t bufsz = 4u << 20, i, first = 0;
	char *buf = malloc(bufsz), *map = NULL;
	uint64_t off = 0;
	bool compose = algo == WSHARD_CK_CRC64;
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	enum wshard_err rc = WSHARD_OK;

	if (nspans)
		qsort(spans, nspans, sizeof(*spans), cmp_span);
	for (i = 1; compose && i < nspans; i++)
		compose = spans[i].start >= spans[i - 1].end;
	for (i = 0; i < nspans; i++)
		if (wshard_hash_init(&spans[i].h, algo))
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (rc || !buf || fd < 0 || wshard_hash_init(&h, algo)) {
		rc = fd < 0 ? wshard_error_set(err, WSHARD_EIO, "cannot open '%s': %s", path,
					       strerror(errno))
			    : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	/* mapped: the page cache's pages are hashed where they are */
	if (fstat(fd, &sb) == 0 && sb.st_size > 0) {
		map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED)
			map = NULL;
		else
			madvise(map, (size_t)sb.st_size, MADV_SEQUENTIAL);
	}
	for (;;) {
		ssize_t n;
		const char *p = buf;

		if (map) {
			n = (ssize_t)WSHARD_MIN((uint64_t)bufsz, (uint64_t)sb.st_size - off);
			p = map + off;
		} else {
			n = pread(fd, buf, bufsz, (off_t)off);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = wshard_error_set(err, WSHARD_EIO, "cannot read '%s': %s", path,
					      strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		first = hash_chunk(&h, spans, nspans, first, p, off, (uint64_t)n, compose);
		if (map)	/* resident memory stays bounded */
			madvise(map + off, (size_t)n / 4096 * 4096, MADV_DONTNEED);
		off += (uint64_t)n;
	}
	/* a tensor cut short by the file's end: its bytes so far */
	if (compose && first < nspans && spans[first].start < off)
		wshard_hash_append(&h, &spans[first].h, off - spans[first].start);
	wshard_hash_final(&h, out);
	for (i = 0; i < nspans; i++)
		if (spans[i].end <= off)
			wshard_hash_final(&spans[i].h, spans[i].t->digest);
out:
	wshard_hash_release(&h);
	for (i = 0; i < nspans; i++)
		wshard_hash_release(&spans[i].h);
	if (map)
		munmap(map, (size_t)sb.st_size);
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

enum wshard_err verify_check_file(struct verify *v, int r, size_t fi,
				  struct wshard_error *err)
{
	struct vrank *vr = &v->ranks[r];
	struct vfile *f = &vr->files[fi];
	char *path = wshard_path_join(v->opt->out_dir, f->name);
	struct wshard_error perr = { 0 };
	struct stat sb;
	enum wshard_err rc = WSHARD_OK;

	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (stat(path, &sb) < 0) {
		verify_diff(v, "rank %d: file '%s': missing", r, f->name);
		goto out;
	}
	if ((uint64_t)sb.st_size != f->size)
		verify_diff(v, "rank %d: file '%s': size %llu, manifest says %llu", r, f->name,
		     (unsigned long long)sb.st_size, (unsigned long long)f->size);
	if (wshard_st_open(&f->st, path, &perr)) {
		if (perr.code != WSHARD_EINVAL) {
			rc = wshard_error_set(err, perr.code, "%s", perr.msg);
			goto out;
		}
		verify_diff(v, "rank %d: file '%s': not valid safetensors: %s", r, f->name, perr.msg);
	}
	if (f->st && f->st->size > 0) {
		f->map = mmap(NULL, (size_t)f->st->size, PROT_READ, MAP_SHARED, f->st->fd, 0);
		if (f->map == MAP_FAILED)
			f->map = NULL;
		else
			f->map_len = (size_t)f->st->size;
	}
out:
	free(path);
	return rc;
}

/*
 * One read of a file that exists: its checksum and those of the manifest's
 * tensors where the file really has them.
 */
static enum wshard_err hash_rank_file(struct verify *v, int r, size_t fi,
				      struct wshard_error *err)
{
	struct vrank *vr = &v->ranks[r];
	struct vfile *f = &vr->files[fi];
	char *path = wshard_path_join(v->opt->out_dir, f->name);
	char digest[WSHARD_DIGEST_HEX];
	struct span *spans = calloc(vr->ntensors + 1, sizeof(*spans));
	size_t nspans = 0, i;
	struct stat sb;
	enum wshard_err rc = WSHARD_OK;

	if (!path || !spans) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	if (stat(path, &sb) < 0)
		goto out;		/* reported missing */
	for (i = 0; f->st && i < vr->ntensors; i++) {
		const struct wshard_st_tensor *st;

		if (vr->tensors[i].file != fi ||
		    !(st = wshard_st_find(f->st, vr->tensors[i].name)))
			continue;
		spans[nspans].start = f->st->data_start + st->begin;
		spans[nspans].end = f->st->data_start + st->end;
		spans[nspans++].t = &vr->tensors[i];
	}
	rc = hash_file(path, v->algo, spans, nspans, digest, err);
	if (rc)
		goto out;
	if (strcmp(digest, f->checksum))
		verify_diff(v, "rank %d: file '%s': checksum %s, manifest says %s", r, f->name, digest,
		     f->checksum);
	for (i = 0; i < nspans; i++) {
		struct vtensor *t = spans[i].t;

		if (t->comparable && strcmp(t->digest, t->checksum))
			verify_diff(v, "rank %d: tensor '%s': checksum %s, manifest says %s", r, t->name,
			     t->digest, t->checksum);
	}
out:
	free(spans);
	free(path);
	return rc;
}

void *verify_hash_worker(void *arg)
{
	struct hash_job *j = arg;
	struct verify *v = j->v;
	size_t r, f;

	for (r = 0; r < v->nranks && !j->err.code; r++) {
		if (!verify_wanted(v, (int)r) || v->archive_only)
			continue;
		for (f = 0; f < v->ranks[r].nfiles && !j->err.code; f++)
			hash_rank_file(v, (int)r, f, &j->err);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Rank archives (convert --archive)                                    */
/* ------------------------------------------------------------------ */

/*
 * An output with "archives" and none of its rank files is an --archive-only
 * one: only the archives' sizes and checksums can be checked (--quick);
 * comparing with the source needs the directory form.
 */
enum wshard_err verify_load_archives(struct verify *v, struct wshard_error *err)
{
	size_t r, f;
	struct stat sb;

	if (!v->m->has_archives)
		return WSHARD_OK;
	v->archive_only = true;
	for (r = 0; r < v->nranks && v->archive_only; r++)
		for (f = 0; f < v->ranks[r].nfiles && v->archive_only; f++) {
			char *path = wshard_path_join(v->opt->out_dir, v->ranks[r].files[f].name);

			if (!path)
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			if (stat(path, &sb) == 0)
				v->archive_only = false;
			free(path);
		}
	if (v->archive_only && !v->opt->quick)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s' holds only rank archives (--archive-only): --quick checks their sizes and checksums; to compare with the source, extract rank R's archive and run verify --rank R on that directory",
					v->opt->out_dir);
	return WSHARD_OK;
}

/* Rank r's archive has the size and checksum the manifest records. */
enum wshard_err verify_check_archive(struct verify *v, int r, struct wshard_error *err)
{
	const struct wshard_manifest_archive *a = NULL;
	const char *name, *ck;
	char digest[WSHARD_DIGEST_HEX], *path;
	uint64_t size;
	struct stat sb;
	size_t i;
	enum wshard_err rc = WSHARD_OK;

	for (i = 0; i < v->m->narchives; i++)
		if (v->m->archives[i].rank == r)
			a = &v->m->archives[i];
	if (!a) {
		verify_diff(v, "rank %d: archive: not listed in the manifest", r);
		return WSHARD_OK;
	}
	name = a->name;
	ck = a->checksum;
	size = a->size;
	path = wshard_path_join(v->opt->out_dir, name);
	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (stat(path, &sb) < 0) {
		verify_diff(v, "rank %d: archive '%s': missing", r, name);
		goto out;
	}
	if ((uint64_t)sb.st_size != size)
		verify_diff(v, "rank %d: archive '%s': size %llu, manifest says %llu", r, name,
		     (unsigned long long)sb.st_size, (unsigned long long)size);
	rc = hash_file(path, v->algo, NULL, 0, digest, err);
	if (!rc && strcmp(digest, ck))
		verify_diff(v, "rank %d: archive '%s': checksum %s, manifest says %s", r, name, digest, ck);
	if (v->archive_only)
		v->nbytes += (uint64_t)sb.st_size;
out:
	free(path);
	return rc;
}

/* Each file holds exactly the manifest's tensors, as the manifest says. */
void verify_check_structure(struct verify *v, int r)
{
	struct vrank *vr = &v->ranks[r];
	char a[160], b[160];
	size_t i, f, k;

	for (i = 0; i < vr->ntensors; i++) {
		struct vtensor *t = &vr->tensors[i];
		const struct vfile *vf = &vr->files[t->file];
		const struct wshard_st_tensor *st;

		if (!vf->st)
			continue;
		st = wshard_st_find(vf->st, t->name);
		if (!st) {
			verify_diff(v, "rank %d: tensor '%s': missing from '%s'", r, t->name, vf->name);
			continue;
		}
		t->comparable = true;
		if (st->dtype != t->dtype) {
			verify_diff(v, "rank %d: tensor '%s': dtype %s, manifest says %s", r, t->name,
			     wshard_dtype_name(st->dtype), wshard_dtype_name(t->dtype));
			t->comparable = false;
		}
		if (st->ndim != t->ndim ||
		    memcmp(st->shape, t->shape, sizeof(uint64_t) * (size_t)t->ndim)) {
			wshard_format_shape(a, sizeof(a), st->shape, st->ndim);
			wshard_format_shape(b, sizeof(b), t->shape, t->ndim);
			verify_diff(v, "rank %d: tensor '%s': shape %s, manifest says %s", r, t->name, a, b);
			t->comparable = false;
		}
		if (st->begin != t->begin || st->end != t->end) {
			verify_diff(v, "rank %d: tensor '%s': data_offsets [%llu, %llu], manifest says [%llu, %llu]",
			     r, t->name, (unsigned long long)st->begin, (unsigned long long)st->end,
			     (unsigned long long)t->begin, (unsigned long long)t->end);
			t->comparable = false;
		}
		if (t->comparable) {
			v->ntensors++;
			v->nbytes += t->end - t->begin;
		}
	}
	for (f = 0; f < vr->nfiles; f++) {
		const struct wshard_st *st = vr->files[f].st;

		for (k = 0; st && k < st->ntensors; k++) {
			for (i = 0; i < vr->ntensors; i++)
				if (vr->tensors[i].file == f &&
				    !strcmp(vr->tensors[i].name, st->tensors[k].name))
					break;
			if (i == vr->ntensors)
				verify_diff(v, "rank %d: tensor '%s': extra in '%s', not in the manifest", r,
				     st->tensors[k].name, vr->files[f].name);
		}
	}
}

