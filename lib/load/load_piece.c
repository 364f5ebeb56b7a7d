/*
 * load_piece.c - what both ways of a load do to a piece: read it and hash
 * it while it is in cache, record the first failure, and run the reading
 * threads.  load.c reads into host destinations, load_device.c through
 * the pinned staging ring.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "base/fileio.h"
#include "base/hash.h"
#include "load_piece.h"

void wshard_load_fail(struct wshard_load *l, const struct wshard_error *e)
{
	pthread_mutex_lock(&l->lock);
	if (l->first.code == WSHARD_OK)
		l->first = *e;
	pthread_mutex_unlock(&l->lock);
	atomic_store(&l->stop, true);
}

enum wshard_err wshard_load_read_piece(struct wshard_load *l, size_t k, void *buf,
				       struct wshard_error *err)
{
	struct piece *p = &l->pieces[k];
	const struct wshard_manifest_tensor *t = &l->r->tensors[p->tensor];
	const struct wshard_st *st = l->st[t->file];
	enum wshard_err rc;

	rc = wshard_pread_full(st->fd, buf, p->len,
			       st->base + st->data_start + t->begin + p->off,
			       st->path, err);
	if (rc != WSHARD_OK || !l->check || !wshard_load_composable(l))
		return rc;
	if (wshard_hash_init(&p->h, l->m->options.checksum) != WSHARD_OK)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	wshard_hash_update(&p->h, buf, p->len);
	return WSHARD_OK;
}

void wshard_load_threads(struct wshard_load *l, int nthreads, void *(*fn)(void *))
{
	pthread_t tid[MAX_THREADS];
	int started = 0;

	atomic_store(&l->next, 0);
	atomic_store(&l->thread_ids, 0);
	for (int i = 1; i < nthreads; i++)
		if (pthread_create(&tid[started], NULL, fn, l) == 0)
			started++;
	fn(l);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
}
