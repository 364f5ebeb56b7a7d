/*
 * verify.c - proves that a wshard output is exactly what its source says
 * it should be: the manifest, each file's size and checksum, the strict
 * safetensors structure against the manifest, then the plan re-derived
 * from the source and every output byte against the source bytes it came
 * from (read once, through the same stream engine as convert).
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
#include "util.h"
#include "dtype.h"
#include "hash.h"
#include "safetensors.h"
#include "fileio.h"
#include "catalog.h"
#include "comm.h"
#include "rules.h"
#include "stream.h"

struct vfile {
	const char *name;
	uint64_t size;
	const char *checksum;
	struct wshard_st *st;		/* NULL: missing or not valid */
	char *map;			/* the file mapped for the byte comparison */
	size_t map_len;
};

/* Compared bytes after which every mapping of the output is dropped. */
#define UNMAP_EVERY ((uint64_t)16 << 20)
/* A piece this large has its pages dropped as soon as it is compared. */
#define UNMAP_PIECE ((uint64_t)1 << 20)

struct vtensor {
	const char *name;
	enum wshard_dtype dtype;
	int ndim;
	uint64_t shape[WSHARD_MAX_DIMS];
	size_t file;
	uint64_t begin, end;
	const char *checksum;		/* as the manifest says */
	char digest[WSHARD_DIGEST_HEX];	/* as computed, "" if not */
	bool comparable;		/* structure matches: compare its bytes */
	bool differs;			/* a byte difference was reported */
};

struct vrank {
	size_t nfiles, ntensors;
	struct vfile *files;
	struct vtensor *tensors;
	long *from_plan;		/* plan tensor index -> vtensor, or -1 */
};

struct verify {
	const struct wshard_verify_opts *opt;
	struct wshard_comm *comm;
	int proc, nprocs;
	struct wshard_manifest *m;
	int tp;				/* as the manifest says */
	size_t nranks;			/* entries in "ranks" */
	struct vrank *ranks;
	enum wshard_checksum algo;
	char *lines;			/* this process's difference lines */
	size_t lines_len, lines_cap;
	uint64_t ndiff, ntensors, nbytes, nranks_done;
	char *cmp;
	size_t cmp_cap;
	pthread_mutex_t lock;		/* lines: the hashing thread adds too */
	uint64_t compared;		/* bytes compared since the last unmap_compared */
	bool archive_only;		/* archives and no rank file in OUT */
};

static void diff(struct verify *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void diff(struct verify *v, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	/* names come from files: no control character may forge a line */
	for (n = 0; line[n]; n++)
		if ((unsigned char)line[n] < 0x20 || line[n] == 0x7f)
			line[n] = '?';
	line[n++] = '\n';
	/* the hash thread and the byte comparison both report */
	pthread_mutex_lock(&v->lock);
	v->ndiff++;
	if (v->lines_len + n + 1 > v->lines_cap) {
		size_t cap = (v->lines_cap + n + 1) * 2;
		char *p = realloc(v->lines, cap);

		if (!p) {
			pthread_mutex_unlock(&v->lock);
			return;
		}
		v->lines = p;
		v->lines_cap = cap;
	}
	memcpy(v->lines + v->lines_len, line, n);
	v->lines_len += n;
	v->lines[v->lines_len] = '\0';
	pthread_mutex_unlock(&v->lock);
}

static bool wanted(const struct verify *v, int r)
{
	return (v->opt->rank < 0 || v->opt->rank == r) && stream_owns(v->nprocs, v->proc, r);
}

/* ------------------------------------------------------------------ */
/* The manifest                                                         */
/* ------------------------------------------------------------------ */

static enum wshard_err bad(struct verify *v, struct wshard_error *err, const char *what)
{
	return wshard_error_set(err, WSHARD_EINVAL, "'%s': not a valid wshard manifest: %s",
				v->m->path, what);
}

/* Rank r of the manifest, with room for what verify finds. */
static enum wshard_err take_rank(struct verify *v, size_t r, struct wshard_error *err)
{
	const struct wshard_manifest_rank *mr = &v->m->ranks[r];
	struct vrank *vr = &v->ranks[r];
	size_t i;

	vr->nfiles = mr->nfiles;
	vr->ntensors = mr->ntensors;
	vr->files = calloc(vr->nfiles + 1, sizeof(*vr->files));
	vr->tensors = calloc(vr->ntensors + 1, sizeof(*vr->tensors));
	if (!vr->files || !vr->tensors)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < vr->nfiles; i++) {
		vr->files[i].name = mr->files[i].name;
		vr->files[i].size = mr->files[i].size;
		vr->files[i].checksum = mr->files[i].checksum;
	}
	for (i = 0; i < vr->ntensors; i++) {
		const struct wshard_manifest_tensor *mt = &mr->tensors[i];
		struct vtensor *t = &vr->tensors[i];

		t->name = mt->name;
		t->dtype = mt->dtype;
		t->ndim = mt->ndim;
		memcpy(t->shape, mt->shape, sizeof(t->shape));
		t->file = mt->file;
		t->begin = mt->begin;
		t->end = mt->end;
		t->checksum = mt->checksum;
	}
	return WSHARD_OK;
}

static enum wshard_err load_manifest(struct verify *v, struct wshard_error *err)
{
	size_t i;
	enum wshard_err rc;

	/* without the sources, which verify does not read: a far smaller tree */
	rc = wshard_manifest_open(&v->m, v->opt->out_dir, err);
	if (rc)
		return rc;
	v->tp = v->m->tp;
	v->algo = v->m->options.checksum;
	v->nranks = v->m->nranks;
	v->ranks = calloc(v->nranks, sizeof(*v->ranks));
	if (!v->ranks)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < v->nranks; i++) {
		rc = take_rank(v, i, err);
		if (rc)
			return rc;
	}
	if ((size_t)v->tp != v->nranks && v->proc == 0)
		diff(v, "manifest: tp %d but %zu ranks listed", v->tp, v->nranks);
	if (v->opt->rank >= 0 && (size_t)v->opt->rank >= v->nranks)
		return wshard_error_set(err, WSHARD_EUSAGE, "'%s' has no rank %d (%zu ranks)",
					v->opt->out_dir, v->opt->rank, v->nranks);
	return WSHARD_OK;
}

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
 * One read of the file: its digest into out, and the digest of every
 * tensor in spans (absolute byte ranges) into its vtensor.
 */
static enum wshard_err hash_file(const char *path, enum wshard_checksum algo,
				 struct span *spans, size_t nspans, char *out,
				 struct wshard_error *err)
{
	struct wshard_hash h = { 0 };
	size_t bufsz = 4u << 20, i, first = 0;
	char *buf = malloc(bufsz), *map = NULL;
	uint64_t off = 0;
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	enum wshard_err rc = WSHARD_OK;

	if (nspans)
		qsort(spans, nspans, sizeof(*spans), cmp_span);
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
		wshard_hash_update(&h, p, (size_t)n);
		for (i = first; i < nspans && spans[i].start < off + (uint64_t)n; i++) {
			uint64_t a = WSHARD_MAX(spans[i].start, off);
			uint64_t b = WSHARD_MIN(spans[i].end, off + (uint64_t)n);

			if (a < b)
				wshard_hash_update(&spans[i].h, p + (a - off), (size_t)(b - a));
			if (spans[i].end <= off + (uint64_t)n && i == first)
				first++;
		}
		if (map)	/* resident memory stays bounded */
			madvise(map + off, (size_t)n / 4096 * 4096, MADV_DONTNEED);
		off += (uint64_t)n;
	}
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

static enum wshard_err check_file(struct verify *v, int r, size_t fi,
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
		diff(v, "rank %d: file '%s': missing", r, f->name);
		goto out;
	}
	if ((uint64_t)sb.st_size != f->size)
		diff(v, "rank %d: file '%s': size %llu, manifest says %llu", r, f->name,
		     (unsigned long long)sb.st_size, (unsigned long long)f->size);
	if (wshard_st_open(&f->st, path, &perr)) {
		if (perr.code != WSHARD_EINVAL) {
			rc = wshard_error_set(err, perr.code, "%s", perr.msg);
			goto out;
		}
		diff(v, "rank %d: file '%s': not valid safetensors: %s", r, f->name, perr.msg);
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
		diff(v, "rank %d: file '%s': checksum %s, manifest says %s", r, f->name, digest,
		     f->checksum);
	for (i = 0; i < nspans; i++) {
		struct vtensor *t = spans[i].t;

		if (t->comparable && strcmp(t->digest, t->checksum))
			diff(v, "rank %d: tensor '%s': checksum %s, manifest says %s", r, t->name,
			     t->digest, t->checksum);
	}
out:
	free(spans);
	free(path);
	return rc;
}

/* The hashing of every file this process checks, on a thread of its own. */
struct hash_job {
	struct verify *v;
	struct wshard_error err;
};

static void *hash_worker(void *arg)
{
	struct hash_job *j = arg;
	struct verify *v = j->v;
	size_t r, f;

	for (r = 0; r < v->nranks && !j->err.code; r++) {
		if (!wanted(v, (int)r) || v->archive_only)
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
static enum wshard_err load_archives(struct verify *v, struct wshard_error *err)
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
static enum wshard_err check_archive(struct verify *v, int r, struct wshard_error *err)
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
		diff(v, "rank %d: archive: not listed in the manifest", r);
		return WSHARD_OK;
	}
	name = a->name;
	ck = a->checksum;
	size = a->size;
	path = wshard_path_join(v->opt->out_dir, name);
	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (stat(path, &sb) < 0) {
		diff(v, "rank %d: archive '%s': missing", r, name);
		goto out;
	}
	if ((uint64_t)sb.st_size != size)
		diff(v, "rank %d: archive '%s': size %llu, manifest says %llu", r, name,
		     (unsigned long long)sb.st_size, (unsigned long long)size);
	rc = hash_file(path, v->algo, NULL, 0, digest, err);
	if (!rc && strcmp(digest, ck))
		diff(v, "rank %d: archive '%s': checksum %s, manifest says %s", r, name, digest, ck);
	if (v->archive_only)
		v->nbytes += (uint64_t)sb.st_size;
out:
	free(path);
	return rc;
}

/* Each file holds exactly the manifest's tensors, as the manifest says. */
static void check_structure(struct verify *v, int r)
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
			diff(v, "rank %d: tensor '%s': missing from '%s'", r, t->name, vf->name);
			continue;
		}
		t->comparable = true;
		if (st->dtype != t->dtype) {
			diff(v, "rank %d: tensor '%s': dtype %s, manifest says %s", r, t->name,
			     wshard_dtype_name(st->dtype), wshard_dtype_name(t->dtype));
			t->comparable = false;
		}
		if (st->ndim != t->ndim ||
		    memcmp(st->shape, t->shape, sizeof(uint64_t) * (size_t)t->ndim)) {
			wshard_format_shape(a, sizeof(a), st->shape, st->ndim);
			wshard_format_shape(b, sizeof(b), t->shape, t->ndim);
			diff(v, "rank %d: tensor '%s': shape %s, manifest says %s", r, t->name, a, b);
			t->comparable = false;
		}
		if (st->begin != t->begin || st->end != t->end) {
			diff(v, "rank %d: tensor '%s': data_offsets [%llu, %llu], manifest says [%llu, %llu]",
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
				diff(v, "rank %d: tensor '%s': extra in '%s', not in the manifest", r,
				     st->tensors[k].name, vr->files[f].name);
		}
	}
}

/* ------------------------------------------------------------------ */
/* The source: plan against manifest, bytes against bytes               */
/* ------------------------------------------------------------------ */

static enum wshard_err load_rules(struct verify *v, const struct wshard_catalog *cat,
				  struct wshard_rules **out, struct wshard_error *err)
{
	const char *name = v->m->rules;
	enum wshard_err rc;

	*out = NULL;
	if (!name)
		return bad(v, err, "no \"rules\"");
	if (strncmp(name, "builtin:", 8) != 0)
		return wshard_rules_load(out, name, err);
	rc = wshard_rules_builtin(out, cat->config.architecture, err);
	if (rc)
		return rc;
	if (strcmp(wshard_rules_name(*out), name))
		diff(v, "manifest: rules '%s', but the source's architecture uses '%s'", name,
		     wshard_rules_name(*out));
	return WSHARD_OK;
}

/* The plan from the source must describe exactly the manifest's files and tensors. */
static void check_plan(struct verify *v, const struct wshard_plan *plan, int r)
{
	const struct wshard_rank_plan *rp = &plan->ranks[r];
	struct vrank *vr = &v->ranks[r];
	char a[160], b[160];
	size_t i, j;

	for (i = 0; i < rp->nfiles; i++)
		if (i >= vr->nfiles || strcmp(rp->files[i].name, vr->files[i].name))
			diff(v, "rank %d: file '%s': in the plan from the source but not in the manifest",
			     r, rp->files[i].name);
	for (i = rp->nfiles; i < vr->nfiles; i++)
		diff(v, "rank %d: file '%s': in the manifest but not in the plan from the source", r,
		     vr->files[i].name);
	for (i = 0; i < rp->ntensors; i++) {
		const struct wshard_out_tensor *t = &rp->tensors[i];
		struct vtensor *m = NULL;

		vr->from_plan[i] = -1;
		for (j = 0; j < vr->ntensors; j++)
			if (!strcmp(vr->tensors[j].name, t->name)) {
				m = &vr->tensors[j];
				break;
			}
		if (!m) {
			diff(v, "rank %d: tensor '%s': missing (the plan from the source has it)", r,
			     t->name);
			continue;
		}
		if (m->dtype != t->dtype || m->ndim != t->ndim ||
		    memcmp(m->shape, t->shape, sizeof(uint64_t) * (size_t)t->ndim)) {
			wshard_format_shape(a, sizeof(a), t->shape, t->ndim);
			wshard_format_shape(b, sizeof(b), m->shape, m->ndim);
			diff(v, "rank %d: tensor '%s': the source gives %s %s, the output has %s %s", r,
			     t->name, wshard_dtype_name(t->dtype), a, wshard_dtype_name(m->dtype), b);
			continue;
		}
		if (m->comparable && m->end - m->begin == t->nbytes)
			vr->from_plan[i] = (long)j;
	}
	for (j = 0; j < vr->ntensors; j++) {
		for (i = 0; i < rp->ntensors; i++)
			if (!strcmp(vr->tensors[j].name, rp->tensors[i].name))
				break;
		if (i == rp->ntensors)
			diff(v, "rank %d: tensor '%s': extra (the plan from the source has no such tensor)",
			     r, vr->tensors[j].name);
	}
}

/* Drops every page of the output this process has mapped (the page cache keeps them). */
static void unmap_compared(struct verify *v)
{
	size_t r, f;

	for (r = 0; r < v->nranks; r++)
		for (f = 0; f < v->ranks[r].nfiles; f++)
			if (v->ranks[r].files[f].map)
				madvise(v->ranks[r].files[f].map, v->ranks[r].files[f].map_len,
					MADV_DONTNEED);
	v->compared = 0;
}

/* The sink of verify: compares output bytes with what the source gives. */
static enum wshard_err compare_put(void *ctx, unsigned slot, int rank, size_t tensor,
				   uint64_t off, const void *buf, size_t len,
				   struct wshard_error *err)
{
	(void)slot;	/* one thread: verify's sink is not threadsafe */
	struct verify *v = ctx;
	struct vrank *vr;
	long j;
	struct vtensor *t;
	const struct wshard_st *st;
	const unsigned char *a = buf, *b;
	size_t i;
	enum wshard_err rc;

	if ((size_t)rank >= v->nranks || (v->opt->rank >= 0 && v->opt->rank != rank))
		return WSHARD_OK;
	vr = &v->ranks[rank];
	j = vr->from_plan ? vr->from_plan[tensor] : -1;
	if (j < 0)
		return WSHARD_OK;
	t = &vr->tensors[j];
	if (t->differs)
		return WSHARD_OK;
	st = vr->files[t->file].st;
	if (vr->files[t->file].map) {
		uint64_t at = st->data_start + t->begin + off;
		const unsigned char *m;

		if (at + len > vr->files[t->file].map_len)
			return WSHARD_OK;	/* the structure check reported it */
		m = (const unsigned char *)vr->files[t->file].map + at;
		if (memcmp(a, m, len) != 0) {
			for (i = 0; a[i] == m[i]; i++)
				;
			t->differs = true;
			diff(v, "rank %d: tensor '%s': bytes differ from the source at byte offset %llu (element %llu)",
			     rank, t->name, (unsigned long long)(off + i),
			     (unsigned long long)((off + i) * 8 / wshard_dtype_bits(t->dtype)));
		}
		/*
		 * Drop the compared pages from this process's resident set: those
		 * of a large piece at once, the rest (small pieces such as an
		 * expert's rows, and the pages a fault maps around a piece) every
		 * UNMAP_EVERY compared bytes, all at once; the page cache keeps
		 * them.  An madvise per small piece cost more than the comparison:
		 * each one interrupts the other core to flush its TLB.
		 */
		{
			uint64_t lo = (at + 4095) / 4096 * 4096, hi = (at + len) / 4096 * 4096;

			v->compared += len;
			if (v->compared >= UNMAP_EVERY)
				unmap_compared(v);
			else if (hi >= lo + UNMAP_PIECE)
				madvise(vr->files[t->file].map + lo, hi - lo, MADV_DONTNEED);
		}
		return WSHARD_OK;
	}
	if (len > v->cmp_cap) {
		char *p = realloc(v->cmp, len);

		if (!p)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		v->cmp = p;
		v->cmp_cap = len;
	}
	rc = wshard_pread_full(st->fd, v->cmp, len, st->data_start + t->begin + off, st->path, err);
	if (rc)
		return rc;
	b = (const unsigned char *)v->cmp;
	if (memcmp(a, b, len) == 0)
		return WSHARD_OK;
	for (i = 0; a[i] == b[i]; i++)
		;
	t->differs = true;
	diff(v, "rank %d: tensor '%s': bytes differ from the source at byte offset %llu (element %llu)",
	     rank, t->name, (unsigned long long)(off + i),
	     (unsigned long long)((off + i) * 8 / wshard_dtype_bits(t->dtype)));
	return WSHARD_OK;
}

static enum wshard_err check_source(struct verify *v, struct wshard_error *err)
{
	const char *src = v->opt->source;
	struct wshard_catalog *cat = NULL;
	struct wshard_rules *rules = NULL;
	struct wshard_plan *plan = NULL;
	struct wshard_error perr = { 0 };
	struct stream_sink sink = { .put = compare_put, .ctx = v };
	struct stream_stats stats;
	size_t r;
	enum wshard_err rc;

	if (!src) {
		/* the path as given, unless it does not lead here: then the real one */
		const char *real = v->m->source_realpath;

		src = v->m->source_path;
		if (src && access(src, F_OK) < 0 && real && access(real, F_OK) == 0)
			src = real;
	}
	if (!src)
		return bad(v, err, "no source path; pass --source");
	rc = wshard_catalog_open(&cat, src, err);
	if (!rc)
		rc = load_rules(v, cat, &rules, err);
	if (wshard_comm_agree(v->comm, err))
		goto out;
	if (wshard_plan_build(&plan, cat, rules, &v->m->options, &perr)) {
		if (v->proc == 0)
			diff(v, "manifest: the source cannot be converted with the manifest's options: %s",
			     perr.msg);
		goto out;
	}
	for (r = 0; r < v->nranks && r < (size_t)v->tp; r++) {
		if (!wanted(v, (int)r))
			continue;
		v->ranks[r].from_plan = calloc(plan->ranks[r].ntensors + 1, sizeof(long));
		if (!v->ranks[r].from_plan) {
			wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			break;
		}
		check_plan(v, plan, (int)r);
	}
	if (wshard_comm_agree(v->comm, err))
		goto out;
	stream_run(plan, v->comm, &sink, NULL, NULL, &stats, err);
out:
	wshard_plan_free(plan);
	wshard_rules_free(rules);
	wshard_catalog_free(cat);
	return err->code;
}

/* Process 0 gets every process's lines, ordered by rank. */
static int cmp_line(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	long rx = -1, ry = -1;

	sscanf(x, "rank %ld:", &rx);
	sscanf(y, "rank %ld:", &ry);
	if (rx != ry)
		return rx < ry ? -1 : 1;
	/* within a rank, by text: two threads find differences in any order */
	return strcmp(x, y);
}

static enum wshard_err collect(struct verify *v, struct wshard_verify_result *out,
			       struct wshard_error *err)
{
	uint64_t sums[4] = { v->ndiff, v->ntensors, v->nbytes, v->nranks_done };
	char *all = NULL, *p, *nl;
	size_t *lens = NULL, n = 0, cap = 0;
	enum wshard_err rc;

	rc = wshard_comm_sum_u64(v->comm, sums, 4, err);
	if (rc)
		return rc;
	rc = wshard_comm_gather_bytes(v->comm, v->lines ? v->lines : "", v->lines_len, &all,
				      &lens, err);
	if (rc || v->proc != 0)
		goto out;
	out->differences = sums[0];
	out->tensors = sums[1];
	out->bytes = sums[2];
	out->ranks = sums[3];
	{
		size_t total = 0, i;

		for (i = 0; i < (size_t)v->nprocs; i++)
			total += lens[i];
		all[total] = '\0';
	}
	for (p = all; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		if (!nl)
			break;
		*nl = '\0';
		if (n == cap) {
			char **l = realloc(out->lines, (cap = cap ? cap * 2 : 64) * sizeof(char *));

			if (!l) {
				rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
				goto out;
			}
			out->lines = l;
		}
		out->lines[n] = strdup(p);
		if (!out->lines[n]) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			goto out;
		}
		out->nlines = ++n;
	}
	/* stable enough: lines of one rank come from one process, in order */
	if (n > 1) {
		size_t i, j;

		for (i = 1; i < n; i++)	/* insertion sort keeps equal ranks in order */
			for (j = i; j > 0 && cmp_line(&out->lines[j - 1], &out->lines[j]) > 0; j--) {
				char *t = out->lines[j];

				out->lines[j] = out->lines[j - 1];
				out->lines[j - 1] = t;
			}
	}
out:
	free(all);
	free(lens);
	return rc;
}

enum wshard_err wshard_verify(const struct wshard_verify_opts *opt,
			      struct wshard_comm *comm,
			      struct wshard_verify_result *out,
			      struct wshard_error *err)
{
	struct verify v = {
		.opt = opt,
		.comm = comm,
		.proc = wshard_comm_rank(comm),
		.nprocs = wshard_comm_size(comm),
	};
	struct hash_job hjob = { 0 };
	pthread_t tid;
	bool threaded;
	size_t r, f;
	uint64_t diffs[1];

	memset(out, 0, sizeof(*out));
	pthread_mutex_init(&v.lock, NULL);
	if (!load_manifest(&v, err))
		load_archives(&v, err);
	if (wshard_comm_agree(comm, err))
		goto out;
	for (r = 0; r < v.nranks && !err->code; r++) {
		if (!wanted(&v, (int)r))
			continue;
		v.nranks_done++;
		if (v.m->has_archives)
			check_archive(&v, (int)r, err);
		if (v.archive_only)
			continue;
		for (f = 0; f < v.ranks[r].nfiles && !err->code; f++)
			check_file(&v, (int)r, f, err);
		check_structure(&v, (int)r);
	}
	if (wshard_comm_agree(comm, err))
		goto out;
	/* checksums on one thread while the source comparison runs on this one */
	hjob.v = &v;
	threaded = pthread_create(&tid, NULL, hash_worker, &hjob) == 0;
	if (!threaded)
		hash_worker(&hjob);
	if (!opt->quick)
		check_source(&v, err);
	if (threaded)
		pthread_join(tid, NULL);
	if (hjob.err.code)
		wshard_error_set(err, hjob.err.code, "%s", hjob.err.msg);
	if (wshard_comm_agree(comm, err))
		goto out;
	collect(&v, out, err);
	if (wshard_comm_agree(comm, err))
		goto out;
	diffs[0] = v.ndiff;
	if (!wshard_comm_sum_u64(comm, diffs, 1, err) && diffs[0])
		wshard_error_set(err, WSHARD_EMISMATCH, "%llu difference%s found",
				 (unsigned long long)diffs[0], diffs[0] == 1 ? "" : "s");
out:
	for (r = 0; v.ranks && r < v.nranks; r++) {
		for (f = 0; f < v.ranks[r].nfiles; f++) {
			if (v.ranks[r].files[f].map)
				munmap(v.ranks[r].files[f].map, v.ranks[r].files[f].map_len);
			wshard_st_free(v.ranks[r].files[f].st);
		}
		free(v.ranks[r].files);
		free(v.ranks[r].tensors);
		free(v.ranks[r].from_plan);
	}
	free(v.ranks);
	free(v.lines);
	free(v.cmp);
	wshard_manifest_free(v.m);
	pthread_mutex_destroy(&v.lock);
	return err->code;
}

void wshard_verify_result_release(struct wshard_verify_result *res)
{
	size_t i;

	if (!res)
		return;
	for (i = 0; i < res->nlines; i++)
		free(res->lines[i]);
	free(res->lines);
	res->lines = NULL;
	res->nlines = 0;
}
