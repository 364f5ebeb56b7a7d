/*
 * plan_reorder.c - column splits whose rank cut vLLM reorders as it
 * loads: Inkling's experts (a rule's "deinterleave" on a "col" split,
 * and "beside").
 */
#include <stdint.h>

#include "wshard.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "plan_impl.h"

/*
 * A column split of [E, A, B] whose rank cut vLLM reorders (its Inkling
 * loader, models/inkling/nvidia/moe.py).  "deinterleave": true: the cut
 * of A is one block, its rows even ones first (the routed experts' w13
 * [E, 2I, H], gate and up rows interleaved g0, u0, g1, u1, ...: rank r's
 * slab of 2I/tp rows written [gate; up]), a transposed piece a rank
 * whose elements are rows.  "beside" ("rows": 2, B cut): [A, E, B/tp],
 * each row of A holding every expert's cut in turn (the sink experts'
 * w2 [E, H, I], written [H, E*I/tp] with "view": 2), a piece an expert
 * out_stride apart.  rb: the bytes of one index of the cut dimension.
 */
enum wshard_err plan_split_reordered(const struct wshard_plan *plan, struct group_out *g,
				     const struct member *m, uint64_t *shape, uint64_t rb,
				     struct wshard_error *err)
{
	const struct wshard_st_tensor *t = src_info(plan, m->src);
	uint64_t cut = shape[m->rule->beside ? 2 : 1], e, ne = t->shape[0];
	enum wshard_err rc = WSHARD_OK;
	int r;

	if (t->ndim != 3)
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"%s\" needs 3 dimensions (experts first)",
					t->name, m->rule->beside ? "beside" : "deinterleave");
	if (m->rule->deinterleave_cut) {
		if (cut % 2 || cut * rb > UINT32_MAX)
			return wshard_error_set(err, WSHARD_EINVAL,
						"tensor '%s': \"deinterleave\": a rank's cut of %llu rows is no even block under 4 GiB",
						t->name, (unsigned long long)cut);
	} else if (ne * cut * rb > UINT32_MAX) {
		return wshard_error_set(err, WSHARD_EINVAL,
					"tensor '%s': \"beside\" rows of %llu bytes are over 4 GiB",
					t->name, (unsigned long long)(ne * cut * rb));
	}
	for (r = 0; r < plan->tp && !rc; r++) {
		struct wshard_out_tensor *o = &g->ranks[r];
		uint64_t base = o->nbytes;
		struct wshard_piece p = {
			.kind = WSHARD_PIECE_COPY,
			.src = m->src,
			.nrows = ne,
			.col0 = (uint64_t)r * cut * rb,
			.ncols = cut * rb,
			.prov_col0 = (uint64_t)r * cut,
			.prov_ncols = cut,
		};

		if (m->rule->deinterleave_cut) {
			/* sub-row k is rows 2k and 2k+1: out row j*cut/2+k = row 2k+j */
			p.tr_rows = (uint32_t)(cut / 2);
			p.tr_stride = p.tr_width = (uint32_t)(2 * rb);
			p.tr_es = (uint32_t)rb;
			p.di_rows = (uint32_t)cut;
			p.len = ne * p.ncols;
			rc = plan_push_piece(o, &p, err);
			continue;
		}
		p.nrows = t->shape[1];
		p.out_stride = (uint32_t)(ne * cut * rb);
		for (e = 0; e < ne && !rc; e++) {
			p.row0 = e * t->shape[1];
			p.len = p.nrows * p.ncols;
			o->nbytes = base + e * p.ncols;
			rc = plan_push_piece(o, &p, err);
		}
		o->nbytes = base + t->shape[1] * p.out_stride;
	}
	if (m->rule->beside) {
		shape[0] = t->shape[1];
		shape[1] = ne;
	}
	return rc;
}
