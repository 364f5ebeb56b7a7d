/*
 * plan_text.c - a plan as the CLI shows it: what convert would write
 * (--dry-run: every rank's archive, tensors and the pieces each is made
 * of) and the figures of convert's summary.  The library never prints:
 * the text is returned.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wshard.h"
#include "plan/plan.h"
#include "archive_out.h"

static void piece_text(FILE *f, const struct wshard_plan *plan,
		       const struct wshard_piece *p)
{
	struct wshard_tensor_info t = { 0 };

	/* the source of a COPY piece: its name, and a matrix's rank */
	if (p->kind == WSHARD_PIECE_COPY)
		wshard_catalog_tensor(plan->cat, p->src, &t);
	if (p->kind == WSHARD_PIECE_ZERO)
		fprintf(f, "    zeros %llu bytes\n", (unsigned long long)p->len);
	else if (p->kind == WSHARD_PIECE_CONST)
		fprintf(f, "    value %g\n", p->prov_value);
	else if (p->kind == WSHARD_PIECE_ARANGE)
		fprintf(f, "    arange [%.0f, %.0f)\n", p->prov_value,
			p->prov_value + (double)(p->len / 8));
	else if (p->kind == WSHARD_PIECE_SINUSOID)
		fprintf(f, "    sinusoid [%.0f, %.0f]\n",
			(double)(p->len / 4) / p->prov_value, p->prov_value);
	else if (p->tr_rows && !p->di_rows && t.ndim == 2)
		/* a transposed matrix is one row: the cut is all there is */
		fprintf(f, "    %s [%llu, %llu) of dimension %d, transposed%s%s%s%.0d%s\n",
			t.name, (unsigned long long)p->prov_col0,
			(unsigned long long)(p->prov_col0 + p->prov_ncols), p->prov_dim,
			p->int4 ? ", 4-bit values repacked: " : "",
			p->int4 ? wshard_int4_text(p->int4) : "",
			p->tr_rep ? ", each group " : "", p->tr_rep, p->tr_rep ? " times" : "");
	else if (p->prov_ncols)
		/* a "rows" view counts merged rows; a transposed piece, cols
		 * of its prov_dim */
		fprintf(f, "    %s rows [%llu, %llu)%s cols [%llu, %llu)%s%s\n",
			t.name, (unsigned long long)p->row0,
			(unsigned long long)(p->row0 + p->nrows),
			wshard_plan_src_row_dims(plan, p->src) ? " (merged)" : "",
			(unsigned long long)p->prov_col0,
			(unsigned long long)(p->prov_col0 + p->prov_ncols),
			p->di_rows ? " deinterleaved" : p->tr_rows ?
			(p->prov_dim == 2 ? " of dimension 2, transposed" : " transposed") : "",
			p->pad ? ", each row zero-padded" : "");
	else
		fprintf(f, "    %s rows [%llu, %llu)\n", t.name,
			(unsigned long long)p->row0,
			(unsigned long long)(p->row0 + p->nrows));
}

static void rank_text(FILE *f, const struct wshard_plan *plan, int r,
		      enum wshard_archive_fmt archive, bool archive_only)
{
	const struct wshard_rank_plan *rp = &plan->ranks[r];
	char shape[160], b[32], name[64];
	size_t i, k;

	if (plan->opt.pp > 1)
		fprintf(f, "stage %d, ", rp->stage);
	fprintf(f, "rank %d: %zu tensors, %s in %zu file%s\n", rp->tp_rank, rp->ntensors,
		wshard_format_bytes(rp->bytes, b, sizeof(b)), rp->nfiles, rp->nfiles == 1 ? "" : "s");
	if (archive != WSHARD_ARCHIVE_NONE) {
		wshard_archive_name(name, sizeof(name), r, archive);
		fprintf(f, "  packed into %s%s\n", name,
			archive_only ? ", its files then removed (--archive-only)" : "");
	}
	for (i = 0; i < rp->ntensors; i++) {
		const struct wshard_out_tensor *t = &rp->tensors[i];

		wshard_format_shape(shape, sizeof(shape), t->shape, t->ndim);
		fprintf(f, "  %s %s %s %llu bytes -> %s\n", t->name, wshard_dtype_name(t->dtype),
			shape, (unsigned long long)t->nbytes, rp->files[t->part].name);
		for (k = 0; k < t->npieces; k++)
			piece_text(f, plan, &t->pieces[k]);
	}
}

enum wshard_err wshard_plan_text(const struct wshard_plan *plan,
				 enum wshard_archive_fmt archive, bool archive_only,
				 char **out_text, struct wshard_error *err)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int r, bad;

	*out_text = NULL;
	f = open_memstream(&text, &len);
	if (!f)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (r = 0; r < plan->nranks; r++)
		rank_text(f, plan, r, archive, archive_only);
	bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		free(text);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	*out_text = text;
	return WSHARD_OK;
}

void wshard_plan_info(const struct wshard_plan *plan, struct wshard_plan_info *out_info)
{
	int r;

	out_info->tp = plan->tp;
	out_info->pp = plan->opt.pp;
	out_info->nfiles = 0;
	for (r = 0; r < plan->nranks; r++)
		out_info->nfiles += plan->ranks[r].nfiles;
}
