/*
 * load.c - one engine worker's rank read straight into its parameters:
 * the layout checked against wshard.json, each file's header against the
 * manifest, every tensor's bytes read by several threads at once into the
 * memory the engine hands over and checked against its checksum.
 *
 * A tensor is read in pieces of at most PIECE bytes so that one large
 * tensor (an embedding) is read by all the threads, not one.  Where the
 * checksum composes (CRC-64/NVME, convert's default) each piece is hashed
 * right after its read, while it is still in the core's cache (a piece of
 * 1 MiB: 4 and 8 MiB left the sums a second trip through memory), and the
 * pieces' sums are joined; the other algorithms hash each tensor again
 * once it is whole.  Destinations in device memory go through pinned
 * staging buffers (load_device.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/devload.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/hash.h"
#include "base/util.h"
#include "source/safetensors.h"
#include "load_piece.h"

/* "vllm==0.32.0" loads an output made for "vllm@0.32" (or "vllm@0.32.0"):
 * the same engine, and the target's release a prefix of the version that
 * ends at a dot or at the end. */
static bool target_matches(const char *target, const char *engine)
{
	const char *at = strchr(target, '@'), *eq = strstr(engine, "==");
	size_t rel;

	if (!at || !eq || (size_t)(at - target) != (size_t)(eq - engine) ||
	    strncmp(target, engine, (size_t)(at - target)) != 0)
		return false;
	rel = strlen(at + 1);
	return strncmp(at + 1, eq + 2, rel) == 0 &&
	       (eq[2 + rel] == '\0' || eq[2 + rel] == '.');
}

/* The manifest's index of the worker's rank: its stage's, with stages. */
static size_t rank_index(const struct wshard_manifest *m, const struct wshard_load_want *w)
{
	return (size_t)(m->pp > 1 ? w->stage : 0) * (size_t)m->tp + (size_t)w->rank;
}

static enum wshard_err check_layout(const struct wshard_manifest *m,
				    const struct wshard_load_want *w,
				    struct wshard_error *err)
{
	const char *ep_m = m->options.expert_parallel ? "with" : "without";
	const char *ep_w = w->expert_parallel ? "with" : "without";

	if (w->engine && m->target && !target_matches(m->target, w->engine))
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': made for %s, loading in %s", m->path,
					m->target, w->engine);
	if ((w->pp > 1 ? w->pp : 1) != m->pp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': made for %d pipeline stage%s, the engine runs "
					"pipeline-parallel size %d", m->path, m->pp,
					m->pp == 1 ? "" : "s", w->pp > 1 ? w->pp : 1);
	if (w->pp > 1 && (w->stage < 0 || w->stage >= m->pp))
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': no stage %d (%d stages)",
					m->path, w->stage, m->pp);
	if (w->tp != m->tp)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': made for tensor-parallel size %d, the engine "
					"runs %d", m->path, m->tp, w->tp);
	/* (a model without experts is laid out alike either way) */
	if (w->expert_parallel != m->options.expert_parallel && m->experts != 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': made %s expert parallelism, the engine runs "
					"%s", m->path, ep_m, ep_w);
	if (w->expert_parallel && w->expert_placement && m->expert_placement &&
	    strcmp(w->expert_placement, m->expert_placement) != 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': experts placed %s, the engine places them %s",
					m->path, m->expert_placement, w->expert_placement);
	if (w->rank < 0 || w->rank >= m->tp || rank_index(m, w) >= m->nranks)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': no rank %d (%zu ranks)", m->path, w->rank,
					m->nranks / (size_t)m->pp);
	return WSHARD_OK;
}

enum wshard_err wshard_load_open(struct wshard_load **out_l, const char *out_dir,
				 const struct wshard_load_want *want,
				 struct wshard_error *err)
{
	struct wshard_load *l;
	enum wshard_err rc;

	*out_l = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	pthread_mutex_init(&l->lock, NULL);
	l->dir = strdup(out_dir);
	if (!l->dir) {
		wshard_load_free(l);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	rc = wshard_manifest_open(&l->m, out_dir, err);
	if (rc == WSHARD_OK)
		rc = check_layout(l->m, want, err);
	if (rc == WSHARD_OK) {
		l->r = &l->m->ranks[rank_index(l->m, want)];
		l->check = !want->no_checksums;
		l->dest = calloc(l->r->ntensors ? l->r->ntensors : 1, sizeof(*l->dest));
		l->device = malloc((l->r->ntensors ? l->r->ntensors : 1) * sizeof(*l->device));
		l->st = calloc(l->r->nfiles ? l->r->nfiles : 1, sizeof(*l->st));
		if (!l->dest || !l->device || !l->st)
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		for (size_t i = 0; l->device && i < l->r->ntensors; i++)
			l->device[i] = -1;
	}
	if (rc != WSHARD_OK) {
		wshard_load_free(l);
		return rc;
	}
	*out_l = l;
	return WSHARD_OK;
}

size_t wshard_load_count(const struct wshard_load *l)
{
	return l->r->ntensors;
}

uint64_t wshard_load_info(const struct wshard_load *l, size_t i, const char **out_name,
			  const char **out_dtype, int *out_ndim, uint64_t *out_shape)
{
	const struct wshard_manifest_tensor *t = &l->r->tensors[i];

	*out_name = t->name;
	*out_dtype = wshard_dtype_name(t->dtype);
	*out_ndim = t->ndim;
	memcpy(out_shape, t->shape, sizeof(t->shape));
	return t->end - t->begin;
}

void wshard_load_dest(struct wshard_load *l, size_t i, void *dst)
{
	l->dest[i] = dst;
	l->device[i] = -1;
}

void wshard_load_dest_device(struct wshard_load *l, size_t i, int device,
			     void *device_ptr)
{
	l->dest[i] = device_ptr;
	l->device[i] = device < 0 ? 0 : device;
}

int wshard_load_has_device(void)
{
	return wshard_devload_usable() ? 1 : 0;
}

/*
 * posix_fadvise WILLNEED reads at most the device's readahead size a call
 * (Linux: max(read_ahead_kb, max_sectors_kb)), the rest of a larger range
 * not at all; 128 KiB, the smallest default, is asked for at a time.  The
 * reads are queued a batch at a time, the next once the one before has
 * been read (a byte of its last page read waits for it): a whole rank
 * queued at once would hold the engine's other reads (its Python modules,
 * from a cold cache) behind it until all of it is in.
 */
#define PREFETCH_WINDOW (128u << 10)
#define PREFETCH_BATCH (8u << 20)

static void prefetch_file(int fd, uint64_t size)
{
	char byte;

	for (uint64_t b = 0; b < size; b += PREFETCH_BATCH) {
		uint64_t end = b + PREFETCH_BATCH < size ? b + PREFETCH_BATCH : size;

		for (uint64_t off = b; off < end; off += PREFETCH_WINDOW)
			(void)posix_fadvise(fd, (off_t)off, PREFETCH_WINDOW,
					    POSIX_FADV_WILLNEED);
		if (b)		/* the batch before: read by now */
			(void)!pread(fd, &byte, 1, (off_t)(b - 1));
	}
}

uint64_t wshard_load_bytes(const struct wshard_load *l)
{
	uint64_t n = 0;

	for (size_t f = 0; f < l->r->nfiles; f++)
		n += l->r->files[f].size;
	return n;
}

enum wshard_err wshard_load_prefetch(const struct wshard_load *l, struct wshard_error *err)
{
	const struct wshard_manifest_rank *r = l->r;

	for (size_t f = 0; f < r->nfiles; f++) {
		char *path = wshard_path_join(l->dir, r->files[f].name);
		int fd;

		if (!path)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			wshard_error_set(err, WSHARD_EIO, "cannot open '%s': %s", path,
					 strerror(errno));
			free(path);
			return WSHARD_EIO;
		}
		free(path);
		prefetch_file(fd, r->files[f].size);
		close(fd);
	}
	return WSHARD_OK;
}

/* Opens the rank's files and checks each header against the manifest:
 * the bytes the checksums cover are only the data. */
static enum wshard_err open_files(struct wshard_load *l, struct wshard_error *err)
{
	const struct wshard_manifest_rank *r = l->r;
	enum wshard_err rc;

	for (size_t f = 0; f < r->nfiles; f++) {
		char *path = wshard_path_join(l->dir, r->files[f].name);

		if (!path)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		rc = wshard_st_open(&l->st[f], path, err);
		free(path);
		if (rc != WSHARD_OK)
			return rc;
		/* read once, front to back: a larger readahead, from a cold cache */
		(void)posix_fadvise(l->st[f]->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		if (l->st[f]->size != r->files[f].size)
			return wshard_error_set(err, WSHARD_EMISMATCH,
						"'%s': %llu bytes, wshard.json says %llu",
						l->st[f]->path,
						(unsigned long long)l->st[f]->size,
						(unsigned long long)r->files[f].size);
	}
	for (size_t i = 0; i < r->ntensors; i++) {
		const struct wshard_manifest_tensor *t = &r->tensors[i];
		const struct wshard_st *st = l->st[t->file];
		const struct wshard_st_tensor *h = wshard_st_find(st, t->name);

		if (!h || h->dtype != t->dtype || h->ndim != t->ndim ||
		    h->begin != t->begin || h->end != t->end ||
		    memcmp(h->shape, t->shape, sizeof(h->shape[0]) * (size_t)t->ndim))
			return wshard_error_set(err, WSHARD_EMISMATCH,
						"'%s': tensor '%s' %s its entry in wshard.json",
						st->path, t->name,
						h ? "differs from" : "is missing, listed in");
		if (!l->dest[i] && t->end > t->begin)
			return wshard_error_set(err, WSHARD_EUSAGE,
						"tensor '%s': no memory given to load it into",
						t->name);
		if (!t->checksum && l->check)
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': tensor '%s' has no checksum", l->m->path,
						t->name);
	}
	return WSHARD_OK;
}

static enum wshard_err cut_pieces(struct wshard_load *l, struct wshard_error *err)
{
	const struct wshard_manifest_rank *r = l->r;
	size_t n = 0;

	for (size_t i = 0; i < r->ntensors; i++)
		n += (size_t)((r->tensors[i].end - r->tensors[i].begin + PIECE - 1) / PIECE) + 1;
	l->pieces = calloc(n ? n : 1, sizeof(*l->pieces));
	if (!l->pieces)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (size_t i = 0; i < r->ntensors; i++) {
		uint64_t len = r->tensors[i].end - r->tensors[i].begin, off = 0;

		do {
			struct piece *p = &l->pieces[l->npieces++];

			p->tensor = i;
			p->off = off;
			p->len = len - off < PIECE ? len - off : PIECE;
			off += p->len;
		} while (off < len);
	}
	return WSHARD_OK;
}

static void *read_pieces(void *arg)
{
	struct wshard_load *l = arg;
	struct wshard_error e = {0};
	size_t k;

	while (!atomic_load(&l->stop) && (k = atomic_fetch_add(&l->next, 1)) < l->npieces) {
		const struct piece *p = &l->pieces[k];

		if (wshard_load_read_piece(l, k, (char *)l->dest[p->tensor] + p->off,
					   &e) != WSHARD_OK) {
			wshard_load_fail(l, &e);
			break;
		}
	}
	return NULL;
}

/* Tensor i's digest: its pieces' sums joined, or its bytes hashed again. */
static enum wshard_err digest(struct wshard_load *l, size_t i, size_t first,
			      char *hex)
{
	const struct wshard_manifest_tensor *t = &l->r->tensors[i];
	struct wshard_hash h;

	if (wshard_hash_init(&h, l->m->options.checksum) != WSHARD_OK)
		return WSHARD_ENOMEM;
	if (l->hex && l->device[i] >= 0) {	/* hashed as it was staged */
		wshard_hash_release(&h);
		memcpy(hex, l->hex[i], WSHARD_DIGEST_HEX);
		return WSHARD_OK;
	}
	if (!wshard_load_composable(l))
		wshard_hash_update(&h, l->dest[i], t->end - t->begin);
	else
		for (size_t k = first; k < l->npieces && l->pieces[k].tensor == i; k++)
			wshard_hash_append(&h, &l->pieces[k].h, l->pieces[k].len);
	wshard_hash_final(&h, hex);
	return WSHARD_OK;
}

static void *check_tensors(void *arg)
{
	struct wshard_load *l = arg;
	struct wshard_error e = {0};
	char hex[WSHARD_DIGEST_HEX];
	size_t k;

	/* l->next counts pieces; a tensor is checked by whoever takes its first */
	while (!atomic_load(&l->stop) && (k = atomic_fetch_add(&l->next, 1)) < l->npieces) {
		const struct piece *p = &l->pieces[k];
		const struct wshard_manifest_tensor *t = &l->r->tensors[p->tensor];

		if (p->off != 0)
			continue;
		if (digest(l, p->tensor, k, hex) != WSHARD_OK) {
			wshard_error_set(&e, WSHARD_ENOMEM, "out of memory");
			wshard_load_fail(l, &e);
		} else if (strcmp(hex, t->checksum) != 0) {
			wshard_error_set(&e, WSHARD_EMISMATCH,
					 "'%s': tensor '%s' does not match its checksum "
					 "(%s %s, wshard.json says %s)",
					 l->st[t->file]->path, t->name,
					 wshard_checksum_name(l->m->options.checksum), hex,
					 t->checksum);
			wshard_load_fail(l, &e);
		}
	}
	return NULL;
}

enum wshard_err wshard_load_run(struct wshard_load *l, int threads,
				struct wshard_error *err)
{
	bool on_device = false;
	enum wshard_err rc;

	for (size_t i = 0; i < l->r->ntensors && !on_device; i++)
		on_device = l->device[i] >= 0;
	/*
	 * For a device the copy engine waits on the threads' reads: a thread
	 * a core (16 at most).  Never fewer than 8, even on fewer cores:
	 * from a cold page cache the threads wait on the storage, which
	 * needs reads in flight; from a warm one the extra threads cost
	 * nothing measurable.
	 */
	if (threads <= 0)
		threads = WSHARD_MAX(8, wshard_cpu_threads(on_device ? MAX_THREADS : 8));
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	if (l->pieces)
		return wshard_error_set(err, WSHARD_EUSAGE, "'%s': a rank is loaded once",
					l->m->path);
	rc = open_files(l, err);
	if (rc == WSHARD_OK)
		rc = cut_pieces(l, err);
	if (rc != WSHARD_OK)
		return rc;
	if (on_device)
		rc = wshard_load_device_run(l, threads, err);
	else
		wshard_load_threads(l, threads, read_pieces);
	if (rc == WSHARD_OK && l->first.code == WSHARD_OK && l->check)
		wshard_load_threads(l, threads, check_tensors);
	for (size_t k = 0; k < l->npieces; k++)
		wshard_hash_release(&l->pieces[k].h);
	if (rc != WSHARD_OK)
		return rc;
	if (l->first.code != WSHARD_OK) {
		*err = l->first;
		return l->first.code;
	}
	return WSHARD_OK;
}

void wshard_load_free(struct wshard_load *l)
{
	if (!l)
		return;
	if (l->st)
		for (size_t f = 0; f < l->r->nfiles; f++)
			wshard_st_free(l->st[f]);
	free(l->st);
	free(l->pieces);
	free(l->jobs);
	free(l->hex);
	free(l->dest);
	free(l->device);
	wshard_manifest_free(l->m);
	pthread_mutex_destroy(&l->lock);
	free(l->dir);
	free(l);
}
