/*
 * manifest_ck.c - under MPI, the checksums of every rank gathered to
 * process 0, which prints every rank's entries of wshard.json itself
 * from its own copy of the plan (manifest.c).  Gathering the printed
 * entries instead moved the whole text (57 MB for a 94k-tensor MoE at
 * tp 4 before stacked experts' sources were written as runs) and held it
 * in process 0's memory twice.
 */
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/util.h"
#include "base/comm.h"
#include "manifest.h"
#include "convert.h"

/* Bytes of rank r's checksums as sent: backend, then files, then tensors. */
static size_t ck_bytes(const struct wshard_plan *plan, int r)
{
	const struct wshard_rank_plan *rp = &plan->ranks[r];

	return sizeof(((struct manifest_rank_ck *)0)->backend) +
	       (rp->nfiles + rp->ntensors) * WSHARD_DIGEST_HEX;
}

static void ck_pack(const struct wshard_plan *plan, int r,
		    const struct manifest_rank_ck *ck, char *at)
{
	const struct wshard_rank_plan *rp = &plan->ranks[r];

	memcpy(at, ck->backend, sizeof(ck->backend));
	at += sizeof(ck->backend);
	memcpy(at, ck->file, rp->nfiles * WSHARD_DIGEST_HEX);
	at += rp->nfiles * WSHARD_DIGEST_HEX;
	memcpy(at, ck->tensor, rp->ntensors * WSHARD_DIGEST_HEX);
}

/* Rank r's checksums on process 0, from what it sent at at. */
static enum wshard_err ck_unpack(const struct wshard_plan *plan, int r,
				 struct manifest_rank_ck *ck, const char *at,
				 struct wshard_error *err)
{
	const struct wshard_rank_plan *rp = &plan->ranks[r];

	ck->file = calloc(rp->nfiles + 1, WSHARD_DIGEST_HEX);
	ck->tensor = calloc(rp->ntensors + 1, WSHARD_DIGEST_HEX);
	if (!ck->file || !ck->tensor)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
	memcpy(ck->backend, at, sizeof(ck->backend));
	ck->backend[sizeof(ck->backend) - 1] = '\0';
	at += sizeof(ck->backend);
	memcpy(ck->file, at, rp->nfiles * WSHARD_DIGEST_HEX);
	at += rp->nfiles * WSHARD_DIGEST_HEX;
	memcpy(ck->tensor, at, rp->ntensors * WSHARD_DIGEST_HEX);
	return WSHARD_OK;
}

enum wshard_err manifest_gather_ck(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	char *mine = NULL, *all = NULL;
	size_t len = 0, off = 0, *lens = NULL;
	int r, p;

	for (r = cv->proc; r < plan->tp; r += cv->nprocs)
		len += ck_bytes(plan, r);
	mine = malloc(len + 1);
	if (!mine)
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
	for (r = cv->proc; mine && r < plan->tp; r += cv->nprocs) {
		ck_pack(plan, r, &cv->ranks[r].ck, mine + off);
		off += ck_bytes(plan, r);
	}
	if (!wshard_comm_gather_bytes(cv->comm, mine ? mine : "", mine ? len : 0, &all, &lens,
				      err) && cv->proc == 0) {
		/* process p sent ranks p, p + nprocs, ... in that order */
		for (p = 0, off = 0; p < cv->nprocs && !err->code; p++) {
			size_t end = off + lens[p];

			for (r = p; r < plan->tp && !err->code; r += cv->nprocs) {
				if (off + ck_bytes(plan, r) > end)
					wshard_error_set(err, WSHARD_EIO,
							 "internal: no checksums for rank %d", r);
				else if (p != 0)
					ck_unpack(plan, r, &cv->ranks[r].ck, all + off, err);
				off += ck_bytes(plan, r);
			}
			off = end;
		}
	}
	free(mine);
	free(all);
	free(lens);
	return wshard_comm_agree(cv->comm, err);
}
