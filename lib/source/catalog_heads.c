/*
 * catalog_heads.c - reading the headers of a directory's weight files.
 * A giant checkpoint has dozens to hundreds of shards (DeepSeek-V3 163),
 * and on network storage each header is a round trip: they are read by
 * up to HEAD_THREADS threads at once, each taking the next file.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "wshard.h"
#include "safetensors.h"
#include "catalog.h"

#define HEAD_THREADS 8

struct heads {
	struct wshard_catalog *cat;
	pthread_mutex_t lock;
	size_t next;
	struct wshard_error *errs;	/* one per file */
};

static void *head_worker(void *arg)
{
	struct heads *h = arg;
	size_t i;

	for (;;) {
		pthread_mutex_lock(&h->lock);
		i = h->next++;
		pthread_mutex_unlock(&h->lock);
		if (i >= h->cat->nfiles)
			return NULL;
		if (!h->cat->files[i].st)	/* (opened before: see catalog_open_files) */
			wshard_st_open(&h->cat->files[i].st, h->cat->files[i].path, &h->errs[i]);
	}
}

enum wshard_err catalog_open_heads(struct wshard_catalog *cat, struct wshard_error *err)
{
	struct heads h = { .cat = cat, .lock = PTHREAD_MUTEX_INITIALIZER };
	pthread_t tid[HEAD_THREADS];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nt = cat->nfiles < HEAD_THREADS ? cat->nfiles : HEAD_THREADS, started = 0, i;
	enum wshard_err rc = WSHARD_OK;

	if (cpus > 0 && nt > (size_t)cpus * 2)
		nt = (size_t)cpus * 2;	/* waits overlap; parsing wants a CPU */
	h.errs = calloc(cat->nfiles + 1, sizeof(*h.errs));
	if (!h.errs)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	while (started + 1 < nt && pthread_create(&tid[started], NULL, head_worker, &h) == 0)
		started++;
	head_worker(&h);
	for (i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	/* the first file's error, whichever thread met it first */
	for (i = 0; i < cat->nfiles && !rc; i++)
		if (h.errs[i].code)
			rc = wshard_error_set(err, h.errs[i].code, "%s", h.errs[i].msg);
	free(h.errs);
	return rc;
}
