/*
 * manifest_parts.c - the parts of wshard.json that process 0 assembles
 * during a convert: the document around the ranks' entries and, under
 * MPI, what the other processes send.  With rank archives that is every
 * process's printed entries (each archive holds the manifest too);
 * without, only the checksums of every rank, and process 0 prints every
 * rank's entries itself from its own copy of the plan (manifest.c).
 * Gathering the printed entries there moved the whole text (57 MB for a
 * 94k-tensor MoE at tp 4 before stacked experts' sources were written as
 * runs) and held it in process 0's memory twice.
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

/* The checksums of every rank into process 0's cv->ranks[r].ck.  Every
 * process returns the same result. */
static enum wshard_err manifest_gather_ck(struct convert *cv, struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	char *mine = NULL, *all = NULL;
	size_t len = 0, off = 0, *lens = NULL;
	int r, p;

	for (r = cv->proc; r < plan->nranks; r += cv->nprocs)
		len += ck_bytes(plan, r);
	mine = malloc(len + 1);
	if (!mine)
		wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
	for (r = cv->proc; mine && r < plan->nranks; r += cv->nprocs) {
		ck_pack(plan, r, &cv->ranks[r].ck, mine + off);
		off += ck_bytes(plan, r);
	}
	if (!wshard_comm_gather_bytes(cv->comm, mine ? mine : "", mine ? len : 0, &all, &lens,
				      err) && cv->proc == 0) {
		/* process p sent ranks p, p + nprocs, ... in that order */
		for (p = 0, off = 0; p < cv->nprocs && !err->code; p++) {
			size_t end = off + lens[p];

			for (r = p; r < plan->nranks && !err->code; r += cv->nprocs) {
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

void manifest_parts_free(struct manifest_parts *mp)
{
	json_decref(mp->doc);
	free(mp->all);
	free(mp->lens);
	free(mp->text);
	free(mp->len);
	memset(mp, 0, sizeof(*mp));
}

/*
 * This process's rank entries, one NUL-terminated string after another,
 * in *out_mine (*out_len bytes, NULs included).
 */
static enum wshard_err own_entries(struct convert *cv, char **out_mine, size_t *out_len,
				   struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	char *mine = NULL;
	size_t mine_len = 0;
	int r;

	*out_mine = NULL;
	*out_len = 0;
	for (r = cv->proc; r < plan->nranks; r += cv->nprocs) {
		size_t len;
		char *t = manifest_rank_text(plan, r, &cv->ranks[r].ck, &len);
		char *m = t ? realloc(mine, mine_len + len + 1) : NULL;

		if (!m) {
			free(t);
			wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
			break;
		}
		mine = m;
		memcpy(mine + mine_len, t, len + 1);	/* with its NUL */
		mine_len += len + 1;
		free(t);
	}
	*out_mine = mine;
	*out_len = mine_len;
	return err->code;
}

/* Process 0: points mp->text[r] at rank r's entry in what was gathered. */
static enum wshard_err index_entries(struct convert *cv, struct manifest_parts *mp,
				     struct wshard_error *err)
{
	const struct wshard_plan *plan = cv->plan;
	size_t off = 0;
	int r, p;

	mp->text = calloc((size_t)plan->nranks, sizeof(*mp->text));
	mp->len = calloc((size_t)plan->nranks, sizeof(*mp->len));
	if (!mp->text || !mp->len)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
	/* process p sent ranks p, p + nprocs, ... in that order */
	for (p = 0; p < cv->nprocs; p++) {
		size_t end = off + mp->lens[p];

		for (r = p; r < plan->nranks && off < end; r += cv->nprocs) {
			mp->text[r] = mp->all + off;
			mp->len[r] = strlen(mp->text[r]);
			off += mp->len[r] + 1;
		}
		off = end;
	}
	for (r = 0; r < plan->nranks; r++)
		if (!mp->text[r])
			return wshard_error_set(err, WSHARD_EIO,
						"internal: no manifest entry for rank %d", r);
	return WSHARD_OK;
}

enum wshard_err manifest_gather(struct convert *cv, struct manifest_parts *mp,
				struct wshard_error *err)
{
	char *mine = NULL;
	size_t mine_len = 0;
	enum wshard_err rc = WSHARD_OK;

	/*
	 * Without archives the entries are printed straight into
	 * wshard.json by manifest_write, never held: process 0 needs only
	 * the other processes' checksums.
	 */
	if (cv->run->archive == WSHARD_ARCHIVE_NONE)
		return cv->nprocs > 1 ? manifest_gather_ck(cv, err) : WSHARD_OK;
	own_entries(cv, &mine, &mine_len, err);
	if (cv->nprocs == 1 && mine) {	/* nothing to gather: no second copy */
		mp->all = mine;
		mp->lens = malloc(sizeof(*mp->lens));
		if (mp->lens)
			mp->lens[0] = mine_len;
		else
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	} else {
		rc = wshard_comm_gather_bytes(cv->comm, mine ? mine : "", mine_len, &mp->all,
					      &mp->lens, err);
		free(mine);
	}
	/* a process that could not print its entries fails them all here */
	wshard_comm_agree(cv->comm, err);
	if (rc || cv->proc != 0 || err->code)
		return err->code;
	return index_entries(cv, mp, err);
}

enum wshard_err manifest_build_doc(struct convert *cv, struct manifest_parts *mp,
				   struct wshard_error *err)
{
	mp->doc = manifest_doc(cv->plan, cv->run->validate, cv->nprocs,
			       cv->run->state->proc_bytes_read, !cv->run->no_sync);
	if (!mp->doc)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory building the manifest");
	return WSHARD_OK;
}
