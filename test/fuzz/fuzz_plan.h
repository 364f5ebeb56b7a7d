/*
 * fuzz_plan.h - the invariants of a plan that wshard_plan_build accepted,
 * checked by the harnesses that reach the planner (fuzz_rules with fuzzed
 * rules, fuzz_catalog with fuzzed checkpoints).  stream.c and exec.c trust
 * them: a piece outside its source tensor or its output tensor would be a
 * read or write out of bounds in convert.
 */
#ifndef WSHARD_FUZZ_PLAN_H
#define WSHARD_FUZZ_PLAN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/dtype.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "plan/plan.h"

#define PCHECK(cond)                                                         \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "plan invariant broken at %s:%d: %s\n", \
				__FILE__, __LINE__, #cond);                  \
			abort();                                             \
		}                                                            \
	} while (0)

/* A piece's rows are its source's as the plan sees them (a view's: GPT-OSS's
 * "rows", a transposed matrix's one row), as the stream reads them. */
static inline void fuzz_check_piece(const struct wshard_plan *plan,
				    const struct wshard_catalog *cat,
				    const struct wshard_out_tensor *t,
				    const struct wshard_piece *p)
{
	PCHECK(p->dst <= t->nbytes && p->len <= t->nbytes - p->dst);
	if (p->kind == WSHARD_PIECE_CONST) {
		PCHECK(p->value_len >= 1 && p->value_len <= 8);
		PCHECK(p->len == p->value_len);
	}
	if (p->kind == WSHARD_PIECE_COPY) {
		const struct wshard_src_tensor *s;
		uint64_t rows, row_bytes;

		PCHECK(p->src < cat->ntensors);
		s = &cat->tensors[p->src];
		rows = wshard_plan_src_rows(plan, p->src);
		PCHECK(rows >= 1 && s->nbytes % rows == 0);
		row_bytes = s->nbytes / rows;
		PCHECK(p->row0 <= rows && p->nrows <= rows - p->row0);
		PCHECK(p->col0 <= row_bytes && p->ncols <= row_bytes - p->col0);
		PCHECK(p->nrows == 0 || p->out_ncols <= p->len / p->nrows);
		PCHECK(p->len == p->nrows * (p->out_ncols + p->pad));
	}
}

static inline void fuzz_check_plan(const struct wshard_plan *plan,
				   const struct wshard_catalog *cat)
{
	int r;
	size_t i, k, f;

	PCHECK(plan->tp >= 1 && plan->ranks);
	for (r = 0; r < plan->tp; r++) {
		const struct wshard_rank_plan *rp = &plan->ranks[r];
		uint64_t bytes = 0;

		PCHECK(rp->rank == r);
		for (i = 0; i < rp->ntensors; i++) {
			const struct wshard_out_tensor *t = &rp->tensors[i];
			uint64_t at = 0, need;

			PCHECK(t->name);
			/* in file order (part, then data offset), names unique */
			if (i) {
				const struct wshard_out_tensor *u = &rp->tensors[i - 1];

				PCHECK(u->part < t->part ||
				       (u->part == t->part && u->end <= t->begin));
			}
			for (k = 0; k < i; k++)
				PCHECK(strcmp(rp->tensors[k].name, t->name) != 0);
			PCHECK(wshard_tensor_bytes(t->shape, t->ndim, t->dtype, &need) == 0);
			PCHECK(need == t->nbytes);
			PCHECK(t->part < rp->nfiles);
			PCHECK(t->end - t->begin == t->nbytes);
			PCHECK(rp->files[t->part].header_len + t->end <= rp->files[t->part].size);
			for (k = 0; k < t->npieces; k++) {
				fuzz_check_piece(plan, cat, t, &t->pieces[k]);
				PCHECK(t->pieces[k].dst == at);
				at += t->pieces[k].len;
			}
			PCHECK(at == t->nbytes);
			bytes += t->nbytes;
		}
		PCHECK(bytes == rp->bytes);
		for (f = 0; f < rp->nfiles; f++) {
			const struct wshard_out_file *of = &rp->files[f];
			struct wshard_error err = { 0 };
			struct wshard_st *st = NULL;
			char *file;

			PCHECK(of->first + of->count <= rp->ntensors);
			/* The planned header is one the strict reader accepts. */
			PCHECK(of->size >= of->header_len);
			if (of->size > (64u << 20))
				continue;
			file = calloc(1, (size_t)of->size + 1);
			PCHECK(file);
			memcpy(file, of->header, of->header_len);
			if (wshard_st_parse(&st, file, (size_t)of->size, of->name, &err)) {
				fprintf(stderr, "planned header refused: %s\n", err.msg);
				abort();
			}
			PCHECK(st->ntensors == of->count);
			wshard_st_free(st);
			free(file);
		}
	}
}

#endif /* WSHARD_FUZZ_PLAN_H */
