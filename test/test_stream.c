/*
 * test_stream.c - the stream engine (lib/stream.c) on one process, through
 * a sink that keeps what it is given: every byte of every output tensor is
 * put exactly once, and putting the pieces whose file is "busy" after the
 * others (the sink's busy hint, which convert's two stream threads use)
 * changes neither the bytes nor their coverage.  What the bytes must be is
 * checked against an independent reference by the CLI tests
 * (t-convert.sh); here the in-order run is the yardstick for the
 * reordered ones.
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "catalog.h"
#include "rules.h"
#include "stream.h"
#include "test_util.h"

/* Every output tensor's bytes and how often each byte was put. */
struct keep {
	const struct wshard_plan *plan;
	unsigned char **bytes[64];	/* [rank][tensor] */
	unsigned char **count[64];
	pthread_mutex_t lock;
	unsigned busy_every;		/* 0: no hint; else every Nth answer is "busy" */
	unsigned long asked, busy;
};

static enum wshard_err keep_put(void *ctx, unsigned slot, int rank, size_t tensor,
				uint64_t off, const void *buf, size_t len,
				struct wshard_error *err)
{
	struct keep *k = ctx;
	const struct wshard_out_tensor *t = &k->plan->ranks[rank].tensors[tensor];
	size_t i;

	(void)err;
	cr_assert_lt(slot, STREAM_SLOTS);
	cr_assert_leq(off + len, t->nbytes, "rank %d '%s': %llu + %zu past %llu", rank,
		      t->name, (unsigned long long)off, len, (unsigned long long)t->nbytes);
	pthread_mutex_lock(&k->lock);
	memcpy(k->bytes[rank][tensor] + off, buf, len);
	for (i = 0; i < len; i++)
		k->count[rank][tensor][off + i]++;
	pthread_mutex_unlock(&k->lock);
	return WSHARD_OK;
}

static bool keep_busy(void *ctx, int rank, size_t tensor)
{
	struct keep *k = ctx;
	bool busy;

	(void)rank;
	(void)tensor;
	pthread_mutex_lock(&k->lock);
	busy = ++k->asked % k->busy_every != 0;
	k->busy += busy;
	pthread_mutex_unlock(&k->lock);
	return busy;
}

static void keep_init(struct keep *k, const struct wshard_plan *plan, unsigned busy_every)
{
	int r;
	size_t i;

	memset(k, 0, sizeof(*k));
	cr_assert_leq(plan->tp, 64);
	k->plan = plan;
	k->busy_every = busy_every;
	pthread_mutex_init(&k->lock, NULL);
	for (r = 0; r < plan->tp; r++) {
		size_t n = plan->ranks[r].ntensors;

		k->bytes[r] = calloc(n + 1, sizeof(*k->bytes[r]));
		k->count[r] = calloc(n + 1, sizeof(*k->count[r]));
		cr_assert(k->bytes[r] && k->count[r]);
		for (i = 0; i < n; i++) {
			size_t nb = (size_t)plan->ranks[r].tensors[i].nbytes;

			k->bytes[r][i] = malloc(nb + 1);
			k->count[r][i] = calloc(nb + 1, 1);
			cr_assert(k->bytes[r][i] && k->count[r][i]);
		}
	}
}

static void keep_release(struct keep *k)
{
	int r;
	size_t i;

	for (r = 0; r < k->plan->tp; r++) {
		for (i = 0; i < k->plan->ranks[r].ntensors; i++) {
			free(k->bytes[r][i]);
			free(k->count[r][i]);
		}
		free(k->bytes[r]);
		free(k->count[r]);
	}
	pthread_mutex_destroy(&k->lock);
}

/* Streams the plan into k with the hint (busy_every) and threads as asked. */
static void run(struct keep *k, const struct wshard_plan *plan, unsigned busy_every,
		bool threadsafe)
{
	struct stream_sink sink = {
		.put = keep_put,
		.busy = busy_every ? keep_busy : NULL,
		.ctx = k,
		.threadsafe = threadsafe,
	};
	struct wshard_comm *comm = NULL;
	struct stream_stats stats;
	struct wshard_error err;
	int argc = 0;
	char **argv = NULL;

	keep_init(k, plan, busy_every);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_comm_init(&comm, &argc, &argv, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(stream_run(plan, comm, &sink, NULL, NULL, &stats, &err), WSHARD_OK,
		     "%s", err.msg);
	wshard_comm_free(comm);
}

/* Every byte of every tensor put once, and the same bytes as in want. */
static void same_once(const struct keep *got, const struct keep *want)
{
	const struct wshard_plan *plan = got->plan;
	int r;
	size_t i, b;

	for (r = 0; r < plan->tp; r++)
		for (i = 0; i < plan->ranks[r].ntensors; i++) {
			const struct wshard_out_tensor *t = &plan->ranks[r].tensors[i];

			for (b = 0; b < t->nbytes; b++)
				cr_assert_eq(got->count[r][i][b], 1,
					     "rank %d '%s' byte %zu put %d times", r, t->name, b,
					     got->count[r][i][b]);
			cr_assert(memcmp(got->bytes[r][i], want->bytes[r][i], t->nbytes) == 0,
				  "rank %d '%s' differs from the in-order run", r, t->name);
		}
}

/* A small Llama with row and column splits, fused q/k/v and gate/up, vocab
 * padding, and windows of a few rows (--max-memory 64K). */
static void with_plan(void (*body)(const struct wshard_plan *))
{
	const char *t = getenv("TMPDIR"), *py = getenv("PYTHON");
	char *tmp = fmt("%s/wshard-stream.XXXXXX", t && *t ? t : "/tmp"), *dir, *cmd;
	struct wshard_catalog *cat = NULL;
	struct wshard_rules *rules = NULL;
	struct wshard_plan *plan = NULL;
	struct wshard_options opt;
	struct wshard_error err;
	int rc;

	cr_assert_not_null(mkdtemp(tmp), "mkdtemp: %s", strerror(errno));
	dir = fmt("%s/ckpt", tmp);
	cmd = fmt("'%s' '%s/scripts/gen-checkpoint' --layers 2 --hidden 64 --heads 8 "
		  "--kv-heads 2 --intermediate 160 --vocab 250 --shards 2 '%s' >/dev/null",
		  py && *py ? py : "python3", root(), dir);
	rc = system(cmd);
	cr_assert_eq(rc, 0, "%s: exit status %d", cmd, rc);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_catalog_open(&cat, dir, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(wshard_rules_builtin(&rules, cat->config.architecture, &err), WSHARD_OK,
		     "%s", err.msg);
	wshard_options_init(&opt);
	opt.tp = 4;
	opt.max_memory = 64 << 10;
	cr_assert_eq(wshard_plan_build(&plan, cat, rules, &opt, &err), WSHARD_OK, "%s",
		     err.msg);
	body(plan);
	wshard_plan_free(plan);
	wshard_rules_free(rules);
	wshard_catalog_free(cat);
	remove_tree(tmp);
	free(cmd);
	free(dir);
	free(tmp);
}

static void deferred_one_thread(const struct wshard_plan *plan)
{
	static const unsigned every[] = { 2, 3, 1000000 };
	struct keep want, got;
	size_t e;

	run(&want, plan, 0, false);
	for (e = 0; e < sizeof(every) / sizeof(every[0]); e++) {
		run(&got, plan, every[e], false);
		cr_assert_gt(got.busy, 0, "the hint was never taken");
		same_once(&got, &want);
		keep_release(&got);
	}
	same_once(&want, &want);
	keep_release(&want);
}

static void deferred_two_threads(const struct wshard_plan *plan)
{
	struct keep want, got;

	run(&want, plan, 0, false);
	run(&got, plan, 2, true);
	cr_assert_gt(got.busy, 0, "the hint was never taken");
	same_once(&got, &want);
	keep_release(&got);
	keep_release(&want);
}

Test(stream, busy_pieces_put_last_once_each)
{
	with_plan(deferred_one_thread);
}

Test(stream, busy_pieces_put_last_two_threads)
{
	with_plan(deferred_two_threads);
}
