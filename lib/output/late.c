/*
 * late.c - the round trip of what was written before the validator was
 * ready.  CUDA's start (the driver, the device's primary context) takes a
 * quarter of a second or more; rather than hold the stream for it, the
 * stream writes unchecked and records where (rank, part, range), and a
 * thread of its own waits for CUDA, opens the run's validator, stops the
 * recording and reads the recorded ranges back from the rank files
 * (recent, so from the page cache) through the validator while the
 * stream goes on, now checking as it writes.  The bytes a late check
 * sees are those in the file, so the guarantee is the same: every byte
 * written has been to the device and back and compared before
 * wshard.json is written.
 *
 * The thread owns the run's validator (cv->v); the stream threads open
 * their own once recording stops.  A validator that cannot be opened
 * (--validate gpu without a usable device) fails the run at the next
 * write.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wshard.h"
#include "base/util.h"
#include "base/fileio.h"
#include "base/hooks.h"
#include "base/validate.h"
#include "convert.h"

/* Bytes read back and handed to the validator at a time. */
#define LATE_CHUNK ((size_t)8 << 20)

/* The test hook's variable (named in its error). */
#define LATE_ENV "WSHARD_VALIDATE_LATE"

/* Written bytes of one part: data offsets [pos, pos + len) from tensor on. */
struct late_range {
	int rank;
	bool gathered;		/* of one gathered tensor: in the file once it is complete */
	size_t part, tensor;
	uint64_t pos, len;
};

struct late {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* bytes recorded, or the end */
	bool on;			/* recording (atomic: read unlocked) */
	bool failed;			/* err holds why (atomic) */
	bool over, abort;		/* the stream ended; drop the checks */
	struct late_range *r;
	size_t n, cap;
	uint64_t bytes, want;		/* recorded; recorded before catching up (hook) */
	int *fd;			/* per part of each rank, read-only, or -1 */
	size_t *first_fd;		/* per rank: its parts' first index in fd */
	size_t nfd;
	pthread_t tid;
	bool started, joined;
	uint64_t checked;		/* bytes the catching-up validator took */
	struct wshard_error err;
};

bool late_wanted(const struct convert *cv)
{
	enum wshard_validate_mode mode = cv->run->validate;
	const char *hook = wshard_hooks_get()->validate_late;

	if (mode == WSHARD_VALIDATE_OFF)
		return false;
	if (hook && *hook)
		return true;
	return (mode == WSHARD_VALIDATE_GPU || mode == WSHARD_VALIDATE_AUTO) &&
	       !wshard_validator_warm_done();
}

static void late_fail(struct late *l, const struct wshard_error *e)
{
	pthread_mutex_lock(&l->lock);
	if (!l->err.code)
		l->err = *e;
	__atomic_store_n(&l->failed, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&l->lock);
}

/* One recorded range read back and checked, tensor by tensor. */
static enum wshard_err check_range(struct convert *cv, const struct late_range *g,
				   char *buf, struct wshard_error *err)
{
	struct late *l = cv->late;
	const struct wshard_rank_plan *rp = &cv->plan->ranks[g->rank];
	const struct wshard_out_file *of = &rp->files[g->part];
	int fd = l->fd[l->first_fd[g->rank] + g->part];
	char what[WSHARD_ERRMAX / 2];
	size_t ti = g->tensor, shown = SIZE_MAX;
	uint64_t done = 0;

	if (g->gathered && seal_wait_tensor(cv, g->rank, g->tensor, err))
		return err->code;
	while (done < g->len) {
		size_t m = (size_t)WSHARD_MIN(g->len - done, LATE_CHUNK), at = 0;

		if (wshard_pread_full(fd, buf, m, of->header_len + g->pos + done, of->name, err))
			return err->code;
		/* the chunk's tensors, each checked under its own name */
		while (at < m) {
			const struct wshard_out_tensor *t = &rp->tensors[ti];
			uint64_t cur = g->pos + done + at;
			size_t k;

			if (cur >= t->begin + t->nbytes) {
				ti++;
				continue;
			}
			k = (size_t)WSHARD_MIN(m - at, t->begin + t->nbytes - cur);
			if (shown != ti) {
				seal_label(what, sizeof(what), g->rank, t->name);
				shown = ti;
			}
			if (wshard_validator_check(cv->v, buf + at, k, what, cur - t->begin, err))
				return err->code;
			at += k;
		}
		done += m;
	}
	return WSHARD_OK;
}

static void *late_main(void *arg)
{
	struct convert *cv = arg;
	struct late *l = cv->late;
	struct wshard_error e = { 0 };
	char *buf = NULL;
	double secs;
	size_t i, n;

	wshard_validator_warm_wait();
	pthread_mutex_lock(&l->lock);
	while (l->bytes < l->want && !l->over)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
	if (!seal_open_validator(cv, &e))
		cv->vs[0] = NULL;	/* this thread's: stream slot 0 opens its own */
	if (!e.code && !(buf = malloc(LATE_CHUNK)))
		wshard_error_set(&e, WSHARD_ENOMEM, "out of memory");
	/*
	 * After this, writes are checked as they are made and the list is
	 * final.  A failure is stored first: a write that sees recording
	 * stopped sees it.
	 */
	pthread_mutex_lock(&l->lock);
	if (e.code) {
		l->err = e;
		__atomic_store_n(&l->failed, true, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&l->on, false, __ATOMIC_RELEASE);
	n = l->n;
	pthread_mutex_unlock(&l->lock);
	for (i = 0; i < n && !e.code && !__atomic_load_n(&l->abort, __ATOMIC_ACQUIRE); i++)
		check_range(cv, &l->r[i], buf, &e);
	if (!e.code && cv->v)
		wshard_validator_flush(cv->v, &e);
	if (cv->v)
		wshard_validator_stats(cv->v, &l->checked, &secs);
	if (e.code)
		late_fail(l, &e);
	free(buf);
	return NULL;
}

enum wshard_err late_start(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	struct late *l;
	bool set;
	size_t i;
	int r;

	l = cv->late = calloc(1, sizeof(*l));
	if (!l)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->on = true;
	if (wshard_hook_bytes(wshard_hooks_get()->validate_late, LATE_ENV, &l->want, &set, err))
		return err->code;
	l->first_fd = calloc((size_t)plan->nranks, sizeof(*l->first_fd));
	for (r = 0; l->first_fd && r < plan->nranks; r++) {
		l->first_fd[r] = l->nfd;
		l->nfd += plan->ranks[r].nfiles;
	}
	l->fd = malloc((l->nfd + 1) * sizeof(*l->fd));
	if (!l->first_fd || !l->fd)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < l->nfd; i++)
		l->fd[i] = -1;
	if (pthread_create(&l->tid, NULL, late_main, cv))
		return wshard_error_set(err, WSHARD_ENOMEM, "cannot start a validation thread");
	l->started = true;
	return WSHARD_OK;
}

bool late_deferring(struct convert *cv)
{
	return cv->late && __atomic_load_n(&cv->late->on, __ATOMIC_ACQUIRE);
}

enum wshard_err late_failed(struct convert *cv, struct wshard_error *err)
{
	struct late *l = cv->late;

	if (!l || !__atomic_load_n(&l->failed, __ATOMIC_ACQUIRE))
		return WSHARD_OK;
	pthread_mutex_lock(&l->lock);
	if (!err->code)
		*err = l->err;
	pthread_mutex_unlock(&l->lock);
	return err->code;
}

/* Appends (or extends the last range with) what was just written.  Under l->lock. */
static enum wshard_err add_range(struct convert *cv, struct late *l, int rank, size_t tensor,
				 uint64_t off, uint64_t len, bool gathered,
				 struct wshard_error *err)
{
	const struct wshard_out_tensor *t = &cv->plan->ranks[rank].tensors[tensor];
	struct late_range *g = l->n ? &l->r[l->n - 1] : NULL;
	int *fd = &l->fd[l->first_fd[rank] + t->part];

	if (*fd < 0) {
		/* while the part is open: it is committed (renamed) only once
		 * this tensor is complete, and the descriptor outlives that */
		*fd = open(cv->ranks[rank].files[t->part]->tmp_path, O_RDONLY | O_CLOEXEC);
		if (*fd < 0)
			return wshard_error_set(err, WSHARD_EIO, "cannot reopen '%s': %s",
						cv->ranks[rank].files[t->part]->tmp_path,
						strerror(errno));
	}
	l->bytes += len;
	/* a gathered tensor's range stays its own: it waits for the tensor */
	if (g && g->rank == rank && g->part == t->part && g->pos + g->len == t->begin + off &&
	    g->gathered == gathered && (!gathered || g->tensor == tensor)) {
		g->len += len;
		return WSHARD_OK;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 1024;
		struct late_range *r = realloc(l->r, cap * sizeof(*r));

		if (!r)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		l->r = r;
		l->cap = cap;
	}
	l->r[l->n++] = (struct late_range){ .rank = rank, .gathered = gathered,
					    .part = t->part, .tensor = tensor,
					    .pos = t->begin + off, .len = len };
	return WSHARD_OK;
}

enum wshard_err late_record(struct convert *cv, int rank, size_t tensor, uint64_t off,
			    uint64_t len, bool gathered, bool *out_recorded,
			    struct wshard_error *err)
{
	struct late *l = cv->late;
	enum wshard_err rc = WSHARD_OK;

	pthread_mutex_lock(&l->lock);
	*out_recorded = l->on;
	if (l->on && len)
		rc = add_range(cv, l, rank, tensor, off, len, gathered, err);
	if (l->want && l->bytes >= l->want)
		pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->lock);
	return rc;
}

enum wshard_err late_end(struct convert *cv, bool drop, struct wshard_error *err)
{
	struct late *l = cv->late;

	if (!l)
		return WSHARD_OK;
	if (l->started && !l->joined) {
		pthread_mutex_lock(&l->lock);
		l->over = true;
		if (drop)
			__atomic_store_n(&l->abort, true, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&l->cond);
		pthread_mutex_unlock(&l->lock);
		pthread_join(l->tid, NULL);
		l->joined = true;
		/* after seal_finish's count; both then summed over processes */
		cv->run->bytes_validated += l->checked;
		cv->run->bytes_validated_late = l->bytes;
	}
	if (!drop && l->err.code && !err->code)
		*err = l->err;
	return err->code;
}

void late_free(struct convert *cv)
{
	struct late *l = cv->late;
	size_t i;

	if (!l)
		return;
	late_end(cv, true, &(struct wshard_error){ 0 });
	for (i = 0; l->fd && i < l->nfd; i++)
		if (l->fd[i] >= 0)
			close(l->fd[i]);
	free(l->fd);
	free(l->first_fd);
	free(l->r);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	free(l);
	cv->late = NULL;
}
