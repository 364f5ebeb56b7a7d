/*
 * load_device.c - a rank read into device memory: the loader's threads
 * read pieces into pinned staging slots (base/devload.h), hash them there
 * while they are in the core's cache, and queue each slot's copies to the
 * device, then go on reading into their next slot while the copies run.
 * No thread waits for more than its own slot's earlier copies, and the
 * staging memory is a few slots a thread, not the rank.
 *
 * The pieces are cut into jobs of at most a slot: one tensor's pieces
 * that follow each other, or many small tensors (a MoE's experts), so a
 * copy is a few MiB (one cudaMemcpyAsync a tensor in the slot) and not
 * bound by the device's latency.  Where the checksum does not compose
 * (xxh3-64, sha256) a tensor is one job, hashed in order as it is staged,
 * since its bytes cannot be read back from the device.  Pieces bound for
 * host memory are read as load.c reads them, one job each.
 */
#include <stdlib.h>
#include <string.h>

#include "base/devload.h"
#include "load_piece.h"

#define SLOT_BYTES ((size_t)4 << 20)
/* one being read into, two whose copies may still run */
#define SLOTS_PER_THREAD 3
/* where each piece starts in a slot: copies from aligned host memory */
#define STAGE_ALIGN 256
#define ALIGN_UP(n) (((n) + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN)

/* One thread's slot and the copy it is gathering. */
struct worker {
	struct wshard_load *l;
	size_t first_slot, turn;	/* its slots: first_slot + turn % N */
	size_t slot;
	unsigned char *buf;		/* slot's buffer, NULL: none taken */
	size_t fill;			/* bytes staged in it */
	/* the copy not yet queued: pending bytes at off, to dst */
	size_t off, len, tensor;
	char *dst;
};

static bool whole_tensors(const struct wshard_load *l)
{
	return l->check && !wshard_load_composable(l);
}

static const char *path_of(const struct wshard_load *l, size_t i)
{
	return l->st[l->r->tensors[i].file]->path;
}

/* Jobs of the pieces, and the one device of the destinations. */
static enum wshard_err cut_jobs(struct wshard_load *l, int *out_device,
				struct wshard_error *err)
{
	struct job *j = NULL;
	size_t fill = 0;

	*out_device = -1;
	l->jobs = calloc(l->npieces ? l->npieces : 1, sizeof(*l->jobs));
	if (!l->jobs)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (size_t k = 0; k < l->npieces; k++) {
		const struct piece *p = &l->pieces[k];
		int dev = l->device[p->tensor];
		size_t at = ALIGN_UP(fill);

		if (dev >= 0 && *out_device >= 0 && dev != *out_device)
			return wshard_error_set(err, WSHARD_EUSAGE,
						"tensor '%s': on cuda:%d, others on "
						"cuda:%d: a load goes to one device",
						l->r->tensors[p->tensor].name, dev,
						*out_device);
		if (dev >= 0)
			*out_device = dev;
		if (dev < 0 || !j ||
		    (whole_tensors(l) ? p->off == 0 : at + p->len > SLOT_BYTES)) {
			j = &l->jobs[l->njobs++];
			j->first = k;
			at = 0;
		}
		j->n++;
		fill = at + p->len;
		j->bytes = fill;
		if (dev < 0)
			j = NULL;	/* a host piece is a job alone */
	}
	return WSHARD_OK;
}

/* Queues the copy gathered so far. */
static enum wshard_err issue(struct worker *w, struct wshard_error *err)
{
	struct wshard_load *l = w->l;
	enum wshard_err rc = WSHARD_OK;

	if (w->len)
		rc = wshard_devload_copy(l->dl, w->slot, w->off, w->dst, w->len,
					 path_of(l, w->tensor),
					 l->r->tensors[w->tensor].name, err);
	w->len = 0;
	return rc;
}

/* Queues the slot's copies and lets it go. */
static enum wshard_err flush(struct worker *w, struct wshard_error *err)
{
	struct wshard_load *l = w->l;
	enum wshard_err rc;
	size_t i = w->tensor;

	if (!w->buf)
		return WSHARD_OK;
	rc = issue(w, err);
	if (rc == WSHARD_OK)
		rc = wshard_devload_queued(l->dl, w->slot, path_of(l, i),
					   l->r->tensors[i].name, err);
	w->buf = NULL;
	return rc;
}

/* The thread's next slot, once its earlier copies are done. */
static enum wshard_err take_slot(struct worker *w, size_t tensor,
				 struct wshard_error *err)
{
	struct wshard_load *l = w->l;

	w->slot = w->first_slot + w->turn++ % SLOTS_PER_THREAD;
	w->fill = 0;
	return wshard_devload_slot(l->dl, w->slot, &w->buf, path_of(l, tensor),
				   l->r->tensors[tensor].name, err);
}

/* Reads piece k into the slot (another if it is full), hashes it there,
 * and adds its bytes to the copy gathered, or queues that and starts
 * another where they do not follow it in both the slot and the device. */
static enum wshard_err stage_piece(struct worker *w, size_t k,
				   struct wshard_hash *whole, struct wshard_error *err)
{
	struct wshard_load *l = w->l;
	const struct piece *p = &l->pieces[k];
	size_t at = ALIGN_UP(w->fill);
	enum wshard_err rc;
	char *dst;

	if (!w->buf || at + p->len > SLOT_BYTES) {
		rc = flush(w, err);
		if (rc == WSHARD_OK)
			rc = take_slot(w, p->tensor, err);
		if (rc != WSHARD_OK)
			return rc;
		at = 0;
	}
	rc = wshard_load_read_piece(l, k, w->buf + at, err);
	if (rc != WSHARD_OK)
		return rc;
	if (whole)
		wshard_hash_update(whole, w->buf + at, p->len);
	w->fill = at + p->len;
	if (!p->len)
		return WSHARD_OK;
	dst = (char *)l->dest[p->tensor] + p->off;
	if (w->len && w->off + w->len == at && w->dst + w->len == dst) {
		w->len += p->len;
		return WSHARD_OK;
	}
	rc = issue(w, err);
	w->off = at;
	w->dst = dst;
	w->len = p->len;
	w->tensor = p->tensor;
	return rc;
}

/* Stages job j's pieces; a tensor hashed whole gets its digest. */
static enum wshard_err stage_job(struct worker *w, const struct job *j,
				 struct wshard_error *err)
{
	struct wshard_load *l = w->l;
	const struct piece *p = &l->pieces[j->first];
	struct wshard_hash h, *whole = NULL;
	enum wshard_err rc = WSHARD_OK;

	/* a job that does not fit after what the slot holds starts the next
	 * slot, so that a tensor's run of pieces stays one copy */
	if (w->buf && ALIGN_UP(w->fill) + j->bytes > SLOT_BYTES)
		rc = flush(w, err);
	if (rc == WSHARD_OK && whole_tensors(l)) {
		if (wshard_hash_init(&h, l->m->options.checksum) != WSHARD_OK)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		whole = &h;
	}
	for (size_t k = j->first; rc == WSHARD_OK && k < j->first + j->n; k++)
		rc = stage_piece(w, k, whole, err);
	if (whole && rc == WSHARD_OK)
		wshard_hash_final(whole, l->hex[p->tensor]);
	else if (whole)
		wshard_hash_release(whole);
	return rc;
}

static void *device_pieces(void *arg)
{
	struct wshard_load *l = arg;
	struct worker w = { .l = l };
	struct wshard_error e = {0};
	enum wshard_err rc;
	size_t n;

	w.first_slot = (size_t)atomic_fetch_add(&l->thread_ids, 1) * SLOTS_PER_THREAD;
	rc = wshard_devload_attach(l->dl, &e);
	while (rc == WSHARD_OK && !atomic_load(&l->stop) &&
	       (n = atomic_fetch_add(&l->next, 1)) < l->njobs) {
		const struct job *j = &l->jobs[n];
		const struct piece *p = &l->pieces[j->first];

		if (l->device[p->tensor] < 0)
			rc = wshard_load_read_piece(l, j->first,
						    (char *)l->dest[p->tensor] + p->off, &e);
		else
			rc = stage_job(&w, j, &e);
	}
	if (rc == WSHARD_OK)
		rc = flush(&w, &e);
	if (rc != WSHARD_OK)
		wshard_load_fail(l, &e);
	return NULL;
}

enum wshard_err wshard_load_device_run(struct wshard_load *l, int nthreads,
				       struct wshard_error *err)
{
	struct wshard_error e = {0};
	enum wshard_err rc;
	int device;

	rc = cut_jobs(l, &device, err);
	if (rc != WSHARD_OK)
		return rc;
	if (whole_tensors(l)) {
		l->hex = calloc(l->r->ntensors ? l->r->ntensors : 1, sizeof(*l->hex));
		if (!l->hex)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	rc = wshard_devload_open(&l->dl, device, (size_t)nthreads * SLOTS_PER_THREAD,
				 SLOT_BYTES, err);
	if (rc != WSHARD_OK)
		return rc;
	wshard_load_threads(l, nthreads, device_pieces);
	/* after a failure too: no copy may run on once the caller has it */
	if (wshard_devload_close(l->dl, &e) != WSHARD_OK)
		wshard_load_fail(l, &e);
	l->dl = NULL;
	return WSHARD_OK;
}
