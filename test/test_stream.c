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
#include "base/error.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "plan/plan.h"
#include "stream/stream.h"
#include "test_util.h"

/* Every output tensor's bytes and how often each byte was put. */
struct keep {
	const struct wshard_plan *plan;
	unsigned char **bytes[64];	/* [rank][tensor] */
	unsigned char **count[64];
	pthread_mutex_t lock;
	unsigned busy_every;		/* 0: no hint; else every Nth answer is "busy" */
	unsigned long asked, busy;
	size_t max_put;			/* the largest put of a transposed tensor */
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
	if (t->npieces && t->pieces[0].tr_rows && len > k->max_put)
		k->max_put = len;
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

/* A checkpoint from gen-checkpoint, its catalog and rules. */
struct ckpt {
	char *tmp;
	struct wshard_catalog *cat;
	struct wshard_rules *rules;
};

static void ckpt_open(struct ckpt *c, const char *args)
{
	const char *t = getenv("TMPDIR"), *py = getenv("PYTHON");
	char *dir, *cmd;
	struct wshard_error err;
	int rc;

	memset(c, 0, sizeof(*c));
	c->tmp = fmt("%s/wshard-stream.XXXXXX", t && *t ? t : "/tmp");
	cr_assert_not_null(mkdtemp(c->tmp), "mkdtemp: %s", strerror(errno));
	dir = fmt("%s/ckpt", c->tmp);
	cmd = fmt("'%s' '%s/scripts/gen-checkpoint' %s '%s' >/dev/null",
		  py && *py ? py : "python3", root(), args, dir);
	rc = system(cmd);
	cr_assert_eq(rc, 0, "%s: exit status %d", cmd, rc);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_catalog_open(&c->cat, dir, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(wshard_rules_builtin(&c->rules, c->cat->config.architecture, &err),
		     WSHARD_OK, "%s", err.msg);
	free(cmd);
	free(dir);
}

static void ckpt_close(struct ckpt *c)
{
	wshard_rules_free(c->rules);
	wshard_catalog_free(c->cat);
	remove_tree(c->tmp);
	free(c->tmp);
}

/* c's plan at tp with a budget of max_memory, in dtype (-1: as it is). */
static struct wshard_plan *ckpt_plan(const struct ckpt *c, int tp, uint64_t max_memory,
				     int dtype)
{
	struct wshard_plan *plan = NULL;
	struct wshard_options opt;
	struct wshard_error err;

	wshard_error_clear(&err);
	wshard_options_init(&opt);
	opt.tp = tp;
	opt.max_memory = max_memory;
	if (dtype >= 0) {
		opt.has_dtype = true;
		opt.dtype = (enum wshard_dtype)dtype;
	}
	cr_assert_eq(wshard_plan_build(&plan, c->cat, c->rules, &opt, &err), WSHARD_OK, "%s",
		     err.msg);
	return plan;
}

/* A small Llama with row and column splits, fused q/k/v and gate/up, vocab
 * padding, and windows of a few rows (--max-memory 64K). */
static void with_plan(void (*body)(const struct wshard_plan *))
{
	struct ckpt c;
	struct wshard_plan *plan;

	ckpt_open(&c, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 160 "
		  "--vocab 250 --shards 2");
	plan = ckpt_plan(&c, 4, 64 << 10, -1);
	body(plan);
	wshard_plan_free(plan);
	ckpt_close(&c);
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

/*
 * GPT-OSS's BF16 experts (gate_up_proj [4, 64, 256], 32 KiB an expert;
 * down_proj [4, 128, 64]) with a budget that one expert exceeds (16K, one
 * thread): the transposed pieces are read in tiles of output rows, and
 * give the bytes one whole expert at a time gives (a budget of 64 MiB),
 * each put once, no put over half the budget; at tp 1 and 2, as they
 * are and widened to F32.
 */
Test(stream, transposed_experts_tiled_within_the_budget)
{
	static const int dtypes[] = { -1, WSHARD_F32 };
	struct ckpt c;
	size_t d;
	int tp;

	ckpt_open(&c, "--arch gpt_oss --bf16-experts");
	for (d = 0; d < 2; d++)
		for (tp = 1; tp <= 2; tp++) {
			struct wshard_plan *big = ckpt_plan(&c, tp, 64 << 20, dtypes[d]);
			struct wshard_plan *small = ckpt_plan(&c, tp, 16 << 10, dtypes[d]);
			struct keep want, got;

			run(&want, big, 0, false);
			run(&got, small, 0, false);
			cr_assert_gt(want.max_put, 8 << 10, "tp %d: the large budget tiled", tp);
			cr_assert_leq(got.max_put, 8 << 10, "tp %d: a put of %zu bytes", tp,
				      got.max_put);
			same_once(&got, &want);
			keep_release(&got);
			keep_release(&want);
			wshard_plan_free(small);
			wshard_plan_free(big);
		}
	ckpt_close(&c);
}
