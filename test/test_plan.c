/*
 * test_plan.c - the slicing math of wshard_plan_build, checked piece by
 * piece against values worked out by hand from OUTPUT-CONTRACT.md section
 * 3 (never by calling plan code): q/k/v rows with and without kv-head
 * replication, column splits, gate/up fusion, Phi3's packed sources,
 * vocabulary padding, tied embeddings, attention scales, the cut into
 * parts, and the errors a plan must raise before anything is written.
 *
 * Checkpoints are written at test time by scripts/gen-checkpoint (under
 * $PYTHON, default python3).  Run from the repository root, or with
 * WSHARD_TEST_ROOT naming it.
 */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "dtype.h"
#include "safetensors.h"
#include "catalog.h"
#include "rules.h"
#include "test_util.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* A generated checkpoint, its catalog and rules. */
struct fx {
	char *tmp;
	char *dir;
	struct wshard_catalog *cat;
	struct wshard_rules *rules;
	struct wshard_plan *plan;
	struct wshard_options opt;
};

/* The fixture in use, closed by the suites' fini if an assertion ends a
 * test early (so that a failure is not followed by leak reports). */
static struct fx *open_fx;

static void fx_close(struct fx *f);

static void close_open_fx(void)
{
	if (open_fx)
		fx_close(open_fx);
}

TestSuite(qkv, .fini = close_open_fx);
TestSuite(mlp, .fini = close_open_fx);
TestSuite(vocab, .fini = close_open_fx);
TestSuite(tie, .fini = close_open_fx);
TestSuite(scales, .fini = close_open_fx);
TestSuite(parts, .fini = close_open_fx);
TestSuite(errors, .fini = close_open_fx);

/* Generates a checkpoint with gen-checkpoint ARGS and opens it. */
static void fx_open(struct fx *f, const char *args)
{
	const char *t = getenv("TMPDIR"), *py = getenv("PYTHON");
	struct wshard_error err;
	char *cmd;
	int rc;

	memset(f, 0, sizeof(*f));
	open_fx = f;
	f->tmp = fmt("%s/wshard-plan.XXXXXX", t && *t ? t : "/tmp");
	cr_assert_not_null(mkdtemp(f->tmp), "mkdtemp: %s", strerror(errno));
	f->dir = fmt("%s/ckpt", f->tmp);
	cmd = fmt("'%s' '%s/scripts/gen-checkpoint' %s '%s' >/dev/null",
		  py && *py ? py : "python3", root(), args, f->dir);
	rc = system(cmd);
	cr_assert_eq(rc, 0, "%s: exit status %d", cmd, rc);
	free(cmd);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_catalog_open(&f->cat, f->dir, &err), WSHARD_OK, "%s", err.msg);
	if (f->cat->config.architecture)
		cr_assert_eq(wshard_rules_builtin(&f->rules, f->cat->config.architecture, &err),
			     WSHARD_OK, "%s", err.msg);
	wshard_options_init(&f->opt);
}

static void fx_close(struct fx *f)
{
	open_fx = NULL;
	wshard_plan_free(f->plan);
	wshard_rules_free(f->rules);
	wshard_catalog_free(f->cat);
	remove_tree(f->tmp);
	free(f->dir);
	free(f->tmp);
}

static void check_invariants(const struct fx *f);

/* Plans at tp and expects success. */
static void fx_plan(struct fx *f, int tp)
{
	struct wshard_error err;

	f->opt.tp = tp;
	wshard_plan_free(f->plan);
	f->plan = NULL;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&f->plan, f->cat, f->rules, &f->opt, &err),
		     WSHARD_OK, "tp %d: %s", tp, err.msg);
	cr_assert_not_null(f->plan);
	cr_assert_eq(f->plan->tp, tp);
	check_invariants(f);
}

/* Plans at tp and expects code, with want (if not NULL) as the whole
 * message or, starting with '~', inside it. */
static void fx_plan_fails(struct fx *f, int tp, enum wshard_err code, const char *want)
{
	struct wshard_plan *plan = (void *)1;
	struct wshard_error err;
	enum wshard_err rc;

	f->opt.tp = tp;
	wshard_error_clear(&err);
	rc = wshard_plan_build(&plan, f->cat, f->rules, &f->opt, &err);
	if (plan) {
		/* an unexpected plan: the fixture frees it */
		wshard_plan_free(f->plan);
		f->plan = plan;
	}
	cr_assert_eq(rc, code, "tp %d: got %d: %s", tp, err.code, err.msg);
	cr_assert_null(plan);
	cr_assert_eq(err.code, code);
	cr_assert_null(strchr(err.msg, '\n'), "%s", err.msg);
	if (want && want[0] == '~')
		cr_assert_not_null(strstr(err.msg, want + 1), "message '%s' lacks '%s'",
				   err.msg, want + 1);
	else if (want)
		cr_assert_str_eq(err.msg, want);
}

static long src_index(const struct fx *f, const char *name)
{
	long i = wshard_catalog_index(f->cat, name);

	cr_assert_geq(i, 0, "no source tensor '%s'", name);
	return i;
}

static const struct wshard_out_tensor *find_out(const struct fx *f, int r,
						const char *name)
{
	const struct wshard_rank_plan *rp = &f->plan->ranks[r];
	size_t i;

	for (i = 0; i < rp->ntensors; i++)
		if (!strcmp(rp->tensors[i].name, name))
			return &rp->tensors[i];
	return NULL;
}

static const struct wshard_out_tensor *get_out(const struct fx *f, int r,
					       const char *name)
{
	const struct wshard_out_tensor *t = find_out(f, r, name);

	cr_assert_not_null(t, "rank %d has no '%s'", r, name);
	return t;
}

static void assert_shape(const struct wshard_out_tensor *t, int ndim, uint64_t d0,
			 uint64_t d1)
{
	cr_assert_eq(t->ndim, ndim, "%s: ndim %d", t->name, t->ndim);
	if (ndim > 0)
		cr_assert_eq(t->shape[0], d0, "%s: shape[0] %llu, want %llu", t->name,
			     (unsigned long long)t->shape[0], (unsigned long long)d0);
	if (ndim > 1)
		cr_assert_eq(t->shape[1], d1, "%s: shape[1] %llu, want %llu", t->name,
			     (unsigned long long)t->shape[1], (unsigned long long)d1);
}

/* Piece i of t is a COPY of source src: rows [row0, row0 + nrows), bytes
 * [col0, col0 + ncols) of each row, at dst. */
static void assert_copy(const struct fx *f, const struct wshard_out_tensor *t,
			size_t i, const char *src, uint64_t row0, uint64_t nrows,
			uint64_t col0, uint64_t ncols, uint64_t dst)
{
	const struct wshard_piece *p;

	cr_assert_lt(i, t->npieces, "%s has %zu pieces, no piece %zu", t->name,
		     t->npieces, i);
	p = &t->pieces[i];
	cr_assert_eq(p->kind, WSHARD_PIECE_COPY, "%s piece %zu: kind %d", t->name, i, p->kind);
	cr_assert_str_eq(f->cat->tensors[p->src].name, src, "%s piece %zu", t->name, i);
	cr_assert_eq(p->row0, row0, "%s piece %zu: row0 %llu, want %llu", t->name, i,
		     (unsigned long long)p->row0, (unsigned long long)row0);
	cr_assert_eq(p->nrows, nrows, "%s piece %zu: nrows %llu, want %llu", t->name, i,
		     (unsigned long long)p->nrows, (unsigned long long)nrows);
	cr_assert_eq(p->col0, col0, "%s piece %zu: col0 %llu, want %llu", t->name, i,
		     (unsigned long long)p->col0, (unsigned long long)col0);
	cr_assert_eq(p->ncols, ncols, "%s piece %zu: ncols %llu, want %llu", t->name, i,
		     (unsigned long long)p->ncols, (unsigned long long)ncols);
	cr_assert_eq(p->dst, dst, "%s piece %zu: dst %llu, want %llu", t->name, i,
		     (unsigned long long)p->dst, (unsigned long long)dst);
	cr_assert_eq(p->len, nrows * ncols);
}

static void assert_zero(const struct wshard_out_tensor *t, size_t i, uint64_t dst,
			uint64_t len)
{
	cr_assert_lt(i, t->npieces, "%s has no piece %zu", t->name, i);
	cr_assert_eq(t->pieces[i].kind, WSHARD_PIECE_ZERO, "%s piece %zu", t->name, i);
	cr_assert_eq(t->pieces[i].dst, dst);
	cr_assert_eq(t->pieces[i].len, len, "%s piece %zu: len %llu, want %llu", t->name,
		     i, (unsigned long long)t->pieces[i].len, (unsigned long long)len);
}

static uint64_t out_bytes(const struct wshard_out_tensor *t)
{
	uint64_t n = 0;

	cr_assert_eq(wshard_tensor_bytes(t->shape, t->ndim, t->dtype, &n), 0);
	return n;
}

/*
 * What holds for every plan: pieces back to back covering the tensor,
 * inside their sources, the tensor's bytes its shape's, names sorted and
 * unique, parts non-empty and in order, and each part's header a valid
 * safetensors header for exactly its tensors.
 */
static void check_invariants(const struct fx *f)
{
	int r;

	for (r = 0; r < f->plan->tp; r++) {
		const struct wshard_rank_plan *rp = &f->plan->ranks[r];
		uint64_t bytes = 0;
		size_t i, k, next = 0;

		cr_assert_eq(rp->rank, r);
		for (i = 0; i < rp->ntensors; i++) {
			const struct wshard_out_tensor *t = &rp->tensors[i];
			uint64_t at = 0;

			/* in file order (part, then data offset), names unique */
			if (i) {
				const struct wshard_out_tensor *u = &rp->tensors[i - 1];

				cr_assert(u->part < t->part ||
					  (u->part == t->part && u->end <= t->begin),
					  "%s before %s", u->name, t->name);
			}
			for (k = 0; k < i; k++)
				cr_assert_neq(strcmp(rp->tensors[k].name, t->name), 0, "%s", t->name);
			cr_assert_eq(t->nbytes, out_bytes(t), "%s", t->name);
			cr_assert_eq(t->end - t->begin, t->nbytes, "%s", t->name);
			cr_assert_lt(t->part, rp->nfiles);
			for (k = 0; k < t->npieces; k++) {
				const struct wshard_piece *p = &t->pieces[k];

				cr_assert_eq(p->dst, at, "%s piece %zu", t->name, k);
				cr_assert_gt(p->len, 0, "%s piece %zu is empty", t->name, k);
				if (p->kind == WSHARD_PIECE_COPY) {
					const struct wshard_src_tensor *s;
					uint64_t rows, rb;

					cr_assert_lt(p->src, f->cat->ntensors);
					s = &f->cat->tensors[p->src];
					rows = s->info->ndim ? s->info->shape[0] : 1;
					rb = rows ? s->nbytes / rows : 0;
					cr_assert_leq(p->row0 + p->nrows, rows, "%s", t->name);
					cr_assert_leq(p->col0 + p->ncols, rb, "%s", t->name);
					cr_assert_eq(p->len, p->nrows * p->ncols);
				}
				at += p->len;
			}
			cr_assert_eq(at, t->nbytes, "%s: pieces cover %llu of %llu bytes",
				     t->name, (unsigned long long)at,
				     (unsigned long long)t->nbytes);
			bytes += t->nbytes;
		}
		cr_assert_eq(rp->bytes, bytes);
		for (k = 0; k < rp->nfiles; k++) {
			const struct wshard_out_file *of = &rp->files[k];
			char *name = fmt("model-rank-%d-part-%zu.safetensors", r, k);
			struct wshard_st *st;
			struct wshard_error err;
			unsigned char *buf;
			uint64_t data = 0;

			cr_assert_str_eq(of->name, name);
			free(name);
			cr_assert_eq(of->first, next, "rank %d part %zu", r, k);
			cr_assert_gt(of->count, 0, "rank %d part %zu is empty", r, k);
			next = of->first + of->count;
			for (i = of->first; i < next; i++) {
				cr_assert_eq(rp->tensors[i].part, k);
				data += rp->tensors[i].nbytes;
			}
			cr_assert_eq(of->size, of->header_len + data);
			cr_assert_eq(of->header_len % 8, 0);
			/* The header plus zero data parses as the part's file. */
			buf = calloc(1, of->size + 1);
			cr_assert_not_null(buf);
			memcpy(buf, of->header, of->header_len);
			wshard_error_clear(&err);
			cr_assert_eq(wshard_st_parse(&st, buf, of->size, of->name, &err),
				     WSHARD_OK, "%s", err.msg);
			cr_assert_eq(st->ntensors, of->count);
			cr_assert_str_eq(wshard_st_meta_get(st, "format"), "pt");
			for (i = of->first; i < next; i++) {
				const struct wshard_out_tensor *t = &rp->tensors[i];
				const struct wshard_st_tensor *h = wshard_st_find(st, t->name);

				cr_assert_not_null(h, "%s not in %s", t->name, of->name);
				cr_assert_eq(h->dtype, t->dtype);
				cr_assert_eq(h->ndim, t->ndim);
				cr_assert_arr_eq(h->shape, t->shape,
						 sizeof(uint64_t) * (size_t)t->ndim);
				cr_assert_eq(h->begin, t->begin);
				cr_assert_eq(h->end, t->end);
			}
			wshard_st_free(st);
			free(buf);
		}
		cr_assert_eq(next, rp->ntensors, "rank %d: parts hold %zu of %zu tensors",
			     r, next, rp->ntensors);
	}
}

/* No output tensor of any rank takes bytes from source name. */
static void assert_unused(const struct fx *f, const char *name)
{
	long src = src_index(f, name);
	int r;
	size_t i, k;

	for (r = 0; r < f->plan->tp; r++)
		for (i = 0; i < f->plan->ranks[r].ntensors; i++) {
			const struct wshard_out_tensor *t = &f->plan->ranks[r].tensors[i];

			for (k = 0; k < t->npieces; k++)
				cr_assert(t->pieces[k].kind != WSHARD_PIECE_COPY ||
					  t->pieces[k].src != (uint32_t)src,
					  "'%s' is used by '%s' on rank %d", name, t->name, r);
		}
}

/* Llama, 8 heads of 8, hidden 64, I 128, BF16: rows of 128 bytes. */
#define LLAMA "--layers 1 --hidden 64 --heads 8 --intermediate 128 --vocab 250 --dtype BF16"
#define L0 "model.layers.0."
#define RB 128		/* bytes per row of a [*, 64] BF16 matrix */

/* ------------------------------------------------------------------ */
/* q, k, v                                                             */
/* ------------------------------------------------------------------ */

/*
 * tp 2, kv 2: nh*hd/N = 64/2 = 32 q rows per rank, kv*hd/N = 16/2 = 8
 * k and v rows; rank r: q [32r, 32r+32), k and v [8r, 8r+8).  Output
 * [48, 64].
 */
Test(qkv, tp2_kv2_no_replication)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");

		cr_assert_eq(t->dtype, WSHARD_BF16);
		assert_shape(t, 2, 48, 64);
		cr_assert_eq(t->npieces, 3);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 8 * r, 8, 0, RB, 32 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 8 * r, 8, 0, RB, 40 * RB);
		cr_assert_eq(t->nbytes, 48 * RB);
	}
	fx_close(&f);
}

/*
 * tp 4, kv 2: N > kv, so each rank gets one kv head h = r / (N/kv) =
 * r / 2: ranks 0, 1 head 0 (rows [0, 8)), ranks 2, 3 head 1 ([8, 16)).
 * q: 64/4 = 16 rows, [16r, 16r+16).  Output [32, 64].
 */
Test(qkv, tp4_kv2_replication)
{
	static const uint64_t head[4] = { 0, 0, 1, 1 };
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");

		assert_shape(t, 2, 32, 64);
		cr_assert_eq(t->npieces, 3);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 16 * r, 16, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 8 * head[r], 8, 0, RB, 16 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 8 * head[r], 8, 0, RB, 24 * RB);
	}
	fx_close(&f);
}

/* tp 8, kv 2: h = r / 4; q 8 rows each.  Output [24, 64]. */
Test(qkv, tp8_kv2_replication)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 8);
	for (r = 0; r < 8; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");
		uint64_t h = r < 4 ? 0 : 1;

		assert_shape(t, 2, 24, 64);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 8 * r, 8, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 8 * h, 8, 0, RB, 8 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 8 * h, 8, 0, RB, 16 * RB);
	}
	fx_close(&f);
}

/* tp 2, kv 8 (plain multi-head): k, v rows 64/2 = 32, [32r, 32r+32). */
Test(qkv, tp2_kv8)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 8");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");

		assert_shape(t, 2, 96, 64);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 32 * r, 32, 0, RB, 32 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 32 * r, 32, 0, RB, 64 * RB);
	}
	fx_close(&f);
}

/* tp 1: everything whole, in the order q, k, v.  Output [96, 64]. */
Test(qkv, tp1)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 1);
	t = get_out(&f, 0, L0 "self_attn.qkv_proj.weight");
	assert_shape(t, 2, 96, 64);
	assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 0, 64, 0, RB, 0);
	assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 0, 16, 0, RB, 64 * RB);
	assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 0, 16, 0, RB, 80 * RB);
	fx_close(&f);
}

/*
 * head_dim given apart from hidden / heads (Qwen3: 8 heads of 16 on a
 * hidden of 64, kv 2): q is [128, 64], k, v [32, 64].  tp 4: q 32 rows,
 * h = r / 2, k rows [16h, 16h+16).  Output [64, 64].
 */
Test(qkv, explicit_head_dim)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch qwen3 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 256");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");
		uint64_t h = (uint64_t)r / 2;

		assert_shape(t, 2, 64, 64);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.weight", 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 16 * h, 16, 0, RB, 32 * RB);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.weight", 16 * h, 16, 0, RB, 48 * RB);
		/* q_norm / k_norm [head_dim] replicated. */
		t = get_out(&f, r, L0 "self_attn.q_norm.weight");
		assert_shape(t, 1, 16, 0);
		assert_copy(&f, t, 0, L0 "self_attn.q_norm.weight", 0, 16, 0, 2, 0);
		t = get_out(&f, r, L0 "self_attn.k_norm.weight");
		assert_copy(&f, t, 0, L0 "self_attn.k_norm.weight", 0, 16, 0, 2, 0);
	}
	fx_close(&f);
}

/*
 * Qwen2 biases follow the weight rows, one element (2 bytes) per row.
 * tp 4, kv 2: q bias [16r, 16r+16), k, v [8h, 8h+8) with h = r / 2.
 * Output [32].
 */
Test(qkv, qwen2_bias)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch qwen2 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--intermediate 128 --vocab 256 --dtype BF16");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "self_attn.qkv_proj.bias");
		uint64_t h = (uint64_t)r / 2;

		assert_shape(t, 1, 32, 0);
		cr_assert_eq(t->nbytes, 64);
		assert_copy(&f, t, 0, L0 "self_attn.q_proj.bias", 16 * r, 16, 0, 2, 0);
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.bias", 8 * h, 8, 0, 2, 32);
		assert_copy(&f, t, 2, L0 "self_attn.v_proj.bias", 8 * h, 8, 0, 2, 48);
		t = get_out(&f, r, L0 "self_attn.qkv_proj.weight");
		assert_copy(&f, t, 1, L0 "self_attn.k_proj.weight", 8 * h, 8, 0, RB, 16 * RB);
	}
	fx_close(&f);
}

/*
 * Phi3's fused source [(8 + 2*2) * 8, 64] = [96, 64]: q rows [0, 64),
 * k [64, 80), v [80, 96).  tp 2: q [32r, +32), k [64 + 8r, +8),
 * v [80 + 8r, +8).  tp 4 (replicated kv, h = r / 2): q [16r, +16),
 * k [64 + 8h, +8), v [80 + 8h, +8).
 */
Test(qkv, phi3_unpack)
{
	const char *qkv = L0 "self_attn.qkv_proj.weight";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch phi3 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--intermediate 128 --vocab 256");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, qkv);

		assert_shape(t, 2, 48, 64);
		cr_assert_eq(t->npieces, 3);
		assert_copy(&f, t, 0, qkv, 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, qkv, 64 + 8 * r, 8, 0, RB, 32 * RB);
		assert_copy(&f, t, 2, qkv, 80 + 8 * r, 8, 0, RB, 40 * RB);
	}
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, qkv);
		uint64_t h = (uint64_t)r / 2;

		assert_shape(t, 2, 32, 64);
		assert_copy(&f, t, 0, qkv, 16 * r, 16, 0, RB, 0);
		assert_copy(&f, t, 1, qkv, 64 + 8 * h, 8, 0, RB, 16 * RB);
		assert_copy(&f, t, 2, qkv, 80 + 8 * h, 8, 0, RB, 24 * RB);
	}
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* MLP and column splits                                               */
/* ------------------------------------------------------------------ */

/*
 * o_proj [64, 64] BF16 split by columns: tp 2 gives each rank 32 columns
 * = 64 bytes of every one of the 64 rows, from byte 64r; output [64, 32].
 * tp 4: 16 columns = 32 bytes from byte 32r; output [64, 16].
 */
Test(mlp, o_proj_columns)
{
	const char *o = L0 "self_attn.o_proj.weight";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, o);

		assert_shape(t, 2, 64, 32);
		cr_assert_eq(t->npieces, 1);
		assert_copy(&f, t, 0, o, 0, 64, 64 * r, 64, 0);
		cr_assert_eq(t->pieces[0].prov_col0, 32 * r);
		cr_assert_eq(t->pieces[0].prov_ncols, 32);
	}
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, o);

		assert_shape(t, 2, 64, 16);
		assert_copy(&f, t, 0, o, 0, 64, 32 * r, 32, 0);
		cr_assert_eq(t->pieces[0].prov_col0, 16 * r);
		cr_assert_eq(t->pieces[0].prov_ncols, 16);
	}
	fx_close(&f);
}

/*
 * F32 (4-byte elements): down_proj [64, 128] at tp 4 gives 32 columns =
 * 128 bytes from byte 128r of each 512-byte row; output [64, 32].
 */
Test(mlp, down_proj_columns_f32)
{
	const char *d = L0 "mlp.down_proj.weight";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 "
		"--vocab 256 --dtype F32");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, d);

		cr_assert_eq(t->dtype, WSHARD_F32);
		assert_shape(t, 2, 64, 32);
		assert_copy(&f, t, 0, d, 0, 64, 128 * r, 128, 0);
		cr_assert_eq(t->pieces[0].prov_col0, 32 * r);
	}
	fx_close(&f);
}

/*
 * gate_up: gate rows [I r / N, I (r+1) / N) then the same rows of up.
 * I = 128, tp 2: 64 rows of each, [64r, 64r+64); output [128, 64].
 */
Test(mlp, gate_up_rows)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, L0 "mlp.gate_up_proj.weight");

		assert_shape(t, 2, 128, 64);
		cr_assert_eq(t->npieces, 2);
		assert_copy(&f, t, 0, L0 "mlp.gate_proj.weight", 64 * r, 64, 0, RB, 0);
		assert_copy(&f, t, 1, L0 "mlp.up_proj.weight", 64 * r, 64, 0, RB, 64 * RB);
		t = get_out(&f, r, L0 "mlp.down_proj.weight");
		assert_shape(t, 2, 64, 64);
		assert_copy(&f, t, 0, L0 "mlp.down_proj.weight", 0, 64, 128 * r, 128, 0);
	}
	fx_close(&f);
}

/* Phi3 gate_up source [256, 64]: gate rows [0, 128), up [128, 256);
 * tp 4: gate [32r, +32), up [128 + 32r, +32); output [64, 64]. */
Test(mlp, phi3_gate_up_unpack)
{
	const char *gu = L0 "mlp.gate_up_proj.weight";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch phi3 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--intermediate 128 --vocab 256");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, gu);

		assert_shape(t, 2, 64, 64);
		cr_assert_eq(t->npieces, 2);
		assert_copy(&f, t, 0, gu, 32 * r, 32, 0, RB, 0);
		assert_copy(&f, t, 1, gu, 128 + 32 * r, 32, 0, RB, 32 * RB);
	}
	fx_close(&f);
}

/* Norms are whole on every rank: [64] BF16 = 64 rows of 2 bytes. */
Test(mlp, norms_replicated)
{
	static const char *const norms[] = {
		"model.norm.weight", L0 "input_layernorm.weight",
		L0 "post_attention_layernorm.weight",
	};
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t i;
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++)
		for (i = 0; i < 3; i++) {
			const struct wshard_out_tensor *t = get_out(&f, r, norms[i]);

			assert_shape(t, 1, 64, 0);
			cr_assert_eq(t->npieces, 1);
			assert_copy(&f, t, 0, norms[i], 0, 64, 0, 2, 0);
		}
	fx_close(&f);
}

/* inv_freq is not written anywhere. */
Test(mlp, inv_freq_skipped)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --inv-freq");
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, L0 "self_attn.rotary_emb.inv_freq"));
	assert_unused(&f, L0 "self_attn.rotary_emb.inv_freq");
	fx_close(&f);
}

/* The whole list of one rank for a one-layer Llama. */
Test(mlp, rank_tensor_names)
{
	/*
	 * In the order the stream completes them: the constants first, then
	 * as their last source tensor comes in the generator's file (embed,
	 * input_layernorm, q k v, o, post_attention_layernorm, gate up, down,
	 * norm, lm_head).
	 */
	static const char *const want[] = {
		L0 "self_attn.attn._k_scale",
		L0 "self_attn.attn._prob_scale",
		L0 "self_attn.attn._q_scale",
		L0 "self_attn.attn._v_scale",
		"model.embed_tokens.weight",
		L0 "input_layernorm.weight",
		L0 "self_attn.qkv_proj.weight",
		L0 "self_attn.o_proj.weight",
		L0 "post_attention_layernorm.weight",
		L0 "mlp.gate_up_proj.weight",
		L0 "mlp.down_proj.weight",
		"model.norm.weight",
		"lm_head.weight",
	};
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t i;
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		cr_assert_eq(f.plan->ranks[r].ntensors, sizeof(want) / sizeof(want[0]));
		for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			cr_assert_str_eq(f.plan->ranks[r].tensors[i].name, want[i]);
	}
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Vocabulary                                                          */
/* ------------------------------------------------------------------ */

/*
 * V = 250 rounds up to 256; tp 4 gives P = 64 rows per rank.  Ranks 0-2
 * take source rows [64r, 64r + 64); rank 3 takes [192, 250) = 58 rows
 * (58 * 128 = 7424 bytes) then 6 zero rows (768 bytes).  [64, 64] on
 * every rank, for the embedding and the LM head alike.
 */
Test(vocab, v250_tp4)
{
	static const char *const names[] = { "model.embed_tokens.weight", "lm_head.weight" };
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t i;
	int r;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 4);
	for (i = 0; i < 2; i++)
		for (r = 0; r < 4; r++) {
			const struct wshard_out_tensor *t = get_out(&f, r, names[i]);

			assert_shape(t, 2, 64, 64);
			cr_assert_eq(t->nbytes, 64 * RB);
			if (r < 3) {
				cr_assert_eq(t->npieces, 1);
				assert_copy(&f, t, 0, names[i], 64 * r, 64, 0, RB, 0);
			} else {
				cr_assert_eq(t->npieces, 2);
				assert_copy(&f, t, 0, names[i], 192, 58, 0, RB, 0);
				assert_zero(t, 1, 58 * RB, 6 * RB);
			}
		}
	fx_close(&f);
}

/* tp 8: P = 32; rank 7 takes [224, 250) = 26 rows and 6 zero rows. */
Test(vocab, v250_tp8)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 8);
	t = get_out(&f, 6, "lm_head.weight");
	assert_shape(t, 2, 32, 64);
	assert_copy(&f, t, 0, "lm_head.weight", 192, 32, 0, RB, 0);
	cr_assert_eq(t->npieces, 1);
	t = get_out(&f, 7, "lm_head.weight");
	assert_shape(t, 2, 32, 64);
	cr_assert_eq(t->npieces, 2);
	assert_copy(&f, t, 0, "lm_head.weight", 224, 26, 0, RB, 0);
	assert_zero(t, 1, 26 * RB, 6 * RB);
	fx_close(&f);
}

/*
 * V = 65 rounds up to 128; tp 4: P = 32.  Rank 2 takes [64, 65) = 1 row
 * then 31 zero rows; rank 3 has no source row at all: 32 zero rows.
 */
Test(vocab, padding_only_rank)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 65");
	fx_plan(&f, 4);
	t = get_out(&f, 1, "model.embed_tokens.weight");
	assert_copy(&f, t, 0, "model.embed_tokens.weight", 32, 32, 0, RB, 0);
	t = get_out(&f, 2, "model.embed_tokens.weight");
	assert_shape(t, 2, 32, 64);
	cr_assert_eq(t->npieces, 2);
	assert_copy(&f, t, 0, "model.embed_tokens.weight", 64, 1, 0, RB, 0);
	assert_zero(t, 1, RB, 31 * RB);
	t = get_out(&f, 3, "model.embed_tokens.weight");
	assert_shape(t, 2, 32, 64);
	cr_assert_eq(t->npieces, 1);
	assert_zero(t, 0, 0, 32 * RB);
	fx_close(&f);
}

/* V = 256 needs no padding: no zero piece anywhere. */
Test(vocab, no_padding_needed)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 256");
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "lm_head.weight");

		cr_assert_eq(t->npieces, 1);
		assert_copy(&f, t, 0, "lm_head.weight", 64 * r, 64, 0, RB, 0);
	}
	/* tp 1 pads too: 250 -> [256, 64] with 6 zero rows. */
	fx_close(&f);
	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan(&f, 1);
	{
		const struct wshard_out_tensor *t = get_out(&f, 0, "lm_head.weight");

		assert_shape(t, 2, 256, 64);
		assert_copy(&f, t, 0, "lm_head.weight", 0, 250, 0, RB, 0);
		assert_zero(t, 1, 250 * RB, 6 * RB);
	}
	fx_close(&f);
}

/* 256 rows do not split 3 ways. */
Test(vocab, padded_not_divisible)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--layers 1 --hidden 48 --heads 6 --kv-heads 3 --intermediate 96 --vocab 250");
	fx_plan_fails(&f, 3, WSHARD_EINVAL,
		      "vocab_size=250 padded to 256 is not divisible by --tp 3");
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Tied embeddings                                                     */
/* ------------------------------------------------------------------ */

/* Tied Llama: only lm_head.weight, built from the embedding's rows. */
Test(tie, llama_tied)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, LLAMA " --kv-heads 2 --tie");
	cr_assert_eq(wshard_catalog_index(f.cat, "lm_head.weight"), -1);
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "lm_head.weight");

		cr_assert_null(find_out(&f, r, "model.embed_tokens.weight"),
			       "rank %d writes the tied embedding twice", r);
		assert_shape(t, 2, 64, 64);
		if (r < 3) {
			assert_copy(&f, t, 0, "model.embed_tokens.weight", 64 * r, 64, 0, RB, 0);
		} else {
			assert_copy(&f, t, 0, "model.embed_tokens.weight", 192, 58, 0, RB, 0);
			assert_zero(t, 1, 58 * RB, 6 * RB);
		}
	}
	fx_close(&f);
}

/* A tied checkpoint that still carries lm_head.weight: it is skipped. */
Test(tie, llama_tied_with_lm_head)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, LLAMA " --kv-heads 2 --tie --lm-head");
	cr_assert_geq(wshard_catalog_index(f.cat, "lm_head.weight"), 0);
	fx_plan(&f, 2);
	assert_unused(&f, "lm_head.weight");
	t = get_out(&f, 1, "lm_head.weight");
	assert_copy(&f, t, 0, "model.embed_tokens.weight", 128, 122, 0, RB, 0);
	assert_zero(t, 1, 122 * RB, 6 * RB);
	cr_assert_null(find_out(&f, 0, "model.embed_tokens.weight"));
	fx_close(&f);
}

/* Untied: both, each from its own source. */
Test(tie, llama_untied)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;

	fx_open(&f, LLAMA " --kv-heads 2 --no-tie");
	fx_plan(&f, 2);
	t = get_out(&f, 0, "lm_head.weight");
	assert_copy(&f, t, 0, "lm_head.weight", 0, 128, 0, RB, 0);
	t = get_out(&f, 0, "model.embed_tokens.weight");
	assert_copy(&f, t, 0, "model.embed_tokens.weight", 0, 128, 0, RB, 0);
	fx_close(&f);
}

/* Gemma: the embedding keeps its name, no lm_head is written. */
Test(tie, gemma)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--arch gemma --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 250");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "model.embed_tokens.weight");

		cr_assert_null(find_out(&f, r, "lm_head.weight"));
		assert_shape(t, 2, 128, 64);
		assert_copy(&f, t, 0, "model.embed_tokens.weight", 128 * r, r ? 122 : 128,
			    0, RB, 0);
		if (r)
			assert_zero(t, 1, 122 * RB, 6 * RB);
	}
	fx_close(&f);
}

/* Gemma with a stray lm_head.weight, and with tie_word_embeddings false
 * in config.json: still tied. */
Test(tie, gemma_always_tied)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--arch gemma2 --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 256 --lm-head "
		"--set-config tie_word_embeddings=false");
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, "lm_head.weight"));
	cr_assert_not_null(find_out(&f, 0, "model.embed_tokens.weight"));
	assert_unused(&f, "lm_head.weight");
	/* Gemma2's extra norms are replicated. */
	cr_assert_not_null(find_out(&f, 1, L0 "pre_feedforward_layernorm.weight"));
	cr_assert_not_null(find_out(&f, 1, L0 "post_feedforward_layernorm.weight"));
	fx_close(&f);
}

/* tie_word_embeddings absent: Llama's default is untied. */
Test(tie, llama_default_untied)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --omit-config tie_word_embeddings");
	fx_plan(&f, 2);
	cr_assert_not_null(find_out(&f, 0, "lm_head.weight"));
	cr_assert_not_null(find_out(&f, 0, "model.embed_tokens.weight"));
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Attention scales                                                    */
/* ------------------------------------------------------------------ */

static const char *const scale_names[] = { "_k_scale", "_v_scale", "_q_scale", "_prob_scale" };

Test(scales, present)
{
	static const unsigned char one[4] = { 0x00, 0x00, 0x80, 0x3f };
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r, layer;
	size_t i;

	fx_open(&f, "--layers 3 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++)
		for (layer = 0; layer < 3; layer++)
			for (i = 0; i < 4; i++) {
				char *name = fmt("model.layers.%d.self_attn.attn.%s", layer,
						 scale_names[i]);
				const struct wshard_out_tensor *t = get_out(&f, r, name);

				cr_assert_eq(t->dtype, WSHARD_F32);
				cr_assert_eq(t->ndim, 0, "%s is not a scalar", name);
				cr_assert_eq(t->nbytes, 4);
				cr_assert_eq(t->npieces, 1);
				cr_assert_eq(t->pieces[0].kind, WSHARD_PIECE_CONST);
				cr_assert_eq(t->pieces[0].value_len, 4);
				cr_assert_arr_eq(t->pieces[0].value, one, 4);
				cr_assert_eq(t->pieces[0].len, 4);
				cr_assert_eq(t->pieces[0].prov_value, 1.0);
				free(name);
			}
	/* None for a layer that is not there. */
	cr_assert_null(find_out(&f, 0, "model.layers.3.self_attn.attn._k_scale"));
	cr_assert_eq(f.plan->ranks[0].ntensors, 3 + 3 * 10);
	fx_close(&f);
}

Test(scales, absent_without_attn_scales)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t i;
	int r;

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	f.opt.attn_scales = false;
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		for (i = 0; i < f.plan->ranks[r].ntensors; i++)
			cr_assert_null(strstr(f.plan->ranks[r].tensors[i].name, ".attn._"),
				       "%s", f.plan->ranks[r].tensors[i].name);
		cr_assert_eq(f.plan->ranks[r].ntensors, 3 + 2 * 6);
	}
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Parts                                                               */
/* ------------------------------------------------------------------ */

/*
 * tp 1, one layer, V 256, BF16: data bytes in layout order (as the stream
 * completes them) are four scales of 4, embed 32768, input_layernorm 128,
 * qkv 12288, o_proj 8192, post_attention_layernorm 128, gate_up 32768,
 * down 16384, norm 128, lm_head 32768.  With a limit of 20000: [4
 * scales], [embed] (alone, over the limit), [input_ln, qkv] (12416; o
 * would make 20608), [o_proj, post_ln] (8320), [gate_up], [down, norm]
 * (16512), [lm_head].
 */
Test(parts, cut_by_max_file_size)
{
	static const size_t want_first[] = { 0, 4, 5, 7, 9, 10, 12 };
	static const size_t want_count[] = { 4, 1, 2, 2, 1, 2, 1 };
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_rank_plan *rp;
	size_t k;

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128 --vocab 256");
	f.opt.max_file_size = 20000;
	fx_plan(&f, 1);
	rp = &f.plan->ranks[0];
	cr_assert_eq(rp->ntensors, 13);
	cr_assert_eq(rp->nfiles, 7, "%zu parts", rp->nfiles);
	for (k = 0; k < 7; k++) {
		cr_assert_eq(rp->files[k].first, want_first[k], "part %zu", k);
		cr_assert_eq(rp->files[k].count, want_count[k], "part %zu", k);
	}
	cr_assert_str_eq(rp->tensors[4].name, "model.embed_tokens.weight");
	cr_assert_eq(rp->tensors[4].nbytes, 32768);
	cr_assert_eq(rp->tensors[10].nbytes, 16384);
	cr_assert_eq(rp->files[5].size, rp->files[5].header_len + 16512);

	/* A part exactly at the limit is not past it. */
	f.opt.max_file_size = 16512;
	fx_plan(&f, 1);
	rp = &f.plan->ranks[0];
	cr_assert_eq(rp->nfiles, 7);
	cr_assert_eq(rp->files[5].count, 2);
	f.opt.max_file_size = 16511;
	fx_plan(&f, 1);
	rp = &f.plan->ranks[0];
	cr_assert_eq(rp->files[5].count, 1);
	cr_assert_eq(rp->files[6].first, 11);
	fx_close(&f);
}

/* Every tensor over a tiny limit: one part each, none empty. */
Test(parts, one_tensor_per_part)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	f.opt.max_file_size = 1;
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_rank_plan *rp = &f.plan->ranks[r];
		size_t k;

		cr_assert_eq(rp->nfiles, rp->ntensors);
		for (k = 0; k < rp->nfiles; k++) {
			cr_assert_eq(rp->files[k].first, k);
			cr_assert_eq(rp->files[k].count, 1);
		}
	}
	fx_close(&f);
}

/* The default limit (5 GiB) keeps a small model in one part per rank,
 * named model-rank-R-part-0.safetensors. */
Test(parts, default_one_part)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	cr_assert_eq(f.opt.max_file_size, 5ULL << 30);
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		char *name = fmt("model-rank-%d-part-0.safetensors", r);

		cr_assert_eq(f.plan->ranks[r].nfiles, 1);
		cr_assert_str_eq(f.plan->ranks[r].files[0].name, name);
		cr_assert_eq(f.plan->ranks[r].files[0].count, f.plan->ranks[r].ntensors);
		free(name);
	}
	fx_close(&f);
}

/* Greedy cut, written from the contract: a new part when the next tensor
 * would take a non-empty part past the limit. */
Test(parts, greedy_rule_at_many_limits)
{
	static const uint64_t limits[] = { 3000, 5000, 8192, 8200, 12288, 40000, 70000 };
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t l;

	fx_open(&f, "--layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 128");
	for (l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
		const struct wshard_rank_plan *rp;
		uint64_t acc = 0;
		size_t i, part = 0, count = 0;

		f.opt.max_file_size = limits[l];
		fx_plan(&f, 2);
		rp = &f.plan->ranks[1];
		for (i = 0; i < rp->ntensors; i++) {
			if (count > 0 && acc + rp->tensors[i].nbytes > limits[l]) {
				part++;
				acc = 0;
				count = 0;
			}
			acc += rp->tensors[i].nbytes;
			count++;
			cr_assert_eq(rp->tensors[i].part, part, "limit %llu, %s",
				     (unsigned long long)limits[l], rp->tensors[i].name);
		}
		cr_assert_eq(rp->nfiles, part + 1);
	}
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

Test(errors, uncovered_listed)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --extra-tensor zzz.bar:2,2 "
		"--extra-tensor model.foo.weight:4 --extra-tensor model.layers.0.mystery:3");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~3 tensors");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "~'model.foo.weight', 'model.layers.0.mystery', 'zzz.bar'");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~builtin:llama");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~not covered");
	fx_close(&f);

	fx_open(&f, LLAMA " --kv-heads 2 --extra-tensor model.layers.0.mlp.gate.weight:4");
	fx_plan_fails(&f, 1, WSHARD_EINVAL, "~1 tensor ");
	fx_plan_fails(&f, 1, WSHARD_EINVAL, "~'model.layers.0.mlp.gate.weight'");
	fx_close(&f);
}

/* 25 uncovered: the first 20 by name, then the count of the rest. */
Test(errors, uncovered_first_20)
{
	struct wshard_plan *plan = NULL;
	struct wshard_error err;
	char args[2048] = LLAMA " --kv-heads 2";
	static struct fx f;	/* static: outlives an aborted test for fini */
	int i;

	for (i = 0; i < 25; i++)
		snprintf(args + strlen(args), sizeof(args) - strlen(args),
			 " --extra-tensor x.%02d:2", i);
	fx_open(&f, args);
	f.opt.tp = 2;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&plan, f.cat, f.rules, &f.opt, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "25 tensors"), "%s", err.msg);
	for (i = 0; i < 20; i++) {
		char name[16];

		snprintf(name, sizeof(name), "'x.%02d'", i);
		cr_assert_not_null(strstr(err.msg, name), "'%s' lacks %s", err.msg, name);
	}
	for (; i < 25; i++) {
		char name[16];

		snprintf(name, sizeof(name), "'x.%02d'", i);
		cr_assert_null(strstr(err.msg, name), "'%s' has %s", err.msg, name);
	}
	cr_assert_not_null(strstr(err.msg, "and 5 more"), "%s", err.msg);
	fx_close(&f);
}

/* Long names fill the message before 20: the count still covers the rest. */
Test(errors, uncovered_long_names)
{
	char args[8192] = LLAMA " --kv-heads 2";
	struct wshard_plan *plan = NULL;
	struct wshard_error err;
	static struct fx f;	/* static: outlives an aborted test for fini */
	unsigned long listed = 0, more = 0;
	const char *p;
	int i;

	for (i = 0; i < 12; i++)
		snprintf(args + strlen(args), sizeof(args) - strlen(args),
			 " --extra-tensor y.%02d.%s:2", i,
			 "a_rather_long_tensor_name_that_fills_the_error_message_quickly_"
			 "as_some_real_checkpoints_do");
	fx_open(&f, args);
	f.opt.tp = 2;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_plan_build(&plan, f.cat, f.rules, &f.opt, &err), WSHARD_EINVAL);
	cr_assert_lt(strlen(err.msg), WSHARD_ERRMAX);
	cr_assert_not_null(strstr(err.msg, "12 tensors"), "%s", err.msg);
	for (p = err.msg; (p = strstr(p, "'y.")); p++)
		listed++;
	p = strstr(err.msg, " and ");
	cr_assert_not_null(p, "%s", err.msg);
	cr_assert_eq(sscanf(p, " and %lu more", &more), 1, "%s", err.msg);
	cr_assert_eq(listed + more, 12, "%lu listed + %lu more: %s", listed, more, err.msg);
	fx_close(&f);
}

Test(errors, heads_not_divisible)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--layers 1 --hidden 48 --heads 6 --kv-heads 2 --intermediate 128 --vocab 256");
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "num_attention_heads=6 is not divisible by --tp 4");
	fx_close(&f);
}

Test(errors, kv_heads_not_divisible)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	/* V 192 = 3 * 64 divides at tp 2 (96), 3 (64) and 4 (48). */
	fx_open(&f, "--layers 1 --hidden 96 --heads 12 --kv-heads 3 --intermediate 192 "
		"--vocab 192");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "num_key_value_heads=3 is not divisible by --tp 2");
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "~num_key_value_heads=3");
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "~--tp 4");
	fx_plan(&f, 3);
	fx_close(&f);
}

Test(errors, intermediate_not_divisible)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--layers 1 --hidden 64 --heads 8 --kv-heads 2 --intermediate 100 "
		"--vocab 256");
	fx_plan_fails(&f, 8, WSHARD_EINVAL, "intermediate_size=100 is not divisible by --tp 8");
	fx_plan(&f, 2);
	fx_close(&f);
}

Test(errors, shape_contradicts_config)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --set-config intermediate_size=256");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'model.layers.0.mlp.down_proj.weight' has shape [64, 128] "
		      "but config.json gives [hidden_size, intermediate_size] = [64, 256]");
	fx_close(&f);

	fx_open(&f, LLAMA " --kv-heads 2 --set-config num_key_value_heads=4");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'model.layers.0.self_attn.k_proj.weight'");
	fx_close(&f);

	fx_open(&f, LLAMA " --kv-heads 2 --set-config vocab_size=256");
	fx_plan_fails(&f, 1, WSHARD_EINVAL, "~tensor 'lm_head.weight' has shape [250, 64]");
	fx_close(&f);
}

Test(errors, missing_tensor)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --drop-tensor " L0 "self_attn.k_proj.weight");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~'" L0 "self_attn.k_proj.weight'");
	fx_close(&f);
}

/* Gemma2's extra norms are required of Gemma2 (vLLM refuses a state
 * without them), while Gemma (1), which shares the rules, has none. */
Test(errors, gemma2_norms_required)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, "--arch gemma2 --layers 2 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 256 "
		"--drop-tensor model.layers.1.pre_feedforward_layernorm.weight");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~'model.layers.1.pre_feedforward_layernorm.weight'");
	fx_close(&f);
	fx_open(&f, "--arch gemma --layers 2 --hidden 64 --heads 8 --kv-heads 2 "
		"--head-dim 16 --intermediate 128 --vocab 256");
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, L0 "pre_feedforward_layernorm.weight"));
	fx_close(&f);
}

/* num_hidden_layers says 3, the checkpoint has 2: layer 2 is missing. */
Test(errors, missing_layer)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2 --set-config num_hidden_layers=2");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~'model.layers.1.");
	fx_close(&f);
}

Test(errors, no_config)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	char *cfg;

	fx_open(&f, LLAMA " --kv-heads 2");
	wshard_catalog_free(f.cat);
	cfg = fmt("%s/config.json", f.dir);
	cr_assert_eq(unlink(cfg), 0);
	free(cfg);
	cr_assert_eq(wshard_catalog_open(&f.cat, f.dir, NULL), WSHARD_OK);
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~config.json");
	fx_close(&f);
}

Test(errors, bad_options)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, LLAMA " --kv-heads 2");
	fx_plan_fails(&f, 0, WSHARD_EUSAGE, "~--tp 0");
	fx_plan_fails(&f, -1, WSHARD_EUSAGE, NULL);
	fx_plan_fails(&f, 4097, WSHARD_EUSAGE, NULL);
	f.opt.target = "sglang-legacy";
	fx_plan_fails(&f, 2, WSHARD_EUSAGE, "~'sglang-legacy'");
	f.opt.target = "vllm";
	f.opt.max_file_size = 0;
	fx_plan_fails(&f, 2, WSHARD_EUSAGE, "~--max-file-size");
	fx_close(&f);
}

Test(errors, free_null)
{
	wshard_plan_free(NULL);
}
