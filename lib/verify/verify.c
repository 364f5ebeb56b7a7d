/*
 * verify.c - proves that a wshard output is exactly what its source says
 * it should be: the manifest, each file's size and checksum, the strict
 * safetensors structure against the manifest, then the plan re-derived
 * from the source and every output byte against the source bytes it came
 * from (read once, through the same stream engine as convert).
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wshard.h"
#include "base/util.h"
#include "base/dtype.h"
#include "base/hash.h"
#include "source/safetensors.h"
#include "base/fileio.h"
#include "source/catalog.h"
#include "base/comm.h"
#include "rules/rules.h"
#include "stream/stream.h"
#include "verify_state.h"

/* ------------------------------------------------------------------ */
/* The manifest                                                         */
/* ------------------------------------------------------------------ */

/* Rank r of the manifest, with room for what verify finds. */
static enum wshard_err take_rank(struct verify *v, size_t r, struct wshard_error *err)
{
	const struct wshard_manifest_rank *mr = &v->m->ranks[r];
	struct vrank *vr = &v->ranks[r];
	size_t i;

	vr->nfiles = mr->nfiles;
	vr->ntensors = mr->ntensors;
	vr->files = calloc(vr->nfiles + 1, sizeof(*vr->files));
	vr->tensors = calloc(vr->ntensors + 1, sizeof(*vr->tensors));
	if (!vr->files || !vr->tensors)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < vr->nfiles; i++) {
		vr->files[i].name = mr->files[i].name;
		vr->files[i].size = mr->files[i].size;
		vr->files[i].checksum = mr->files[i].checksum;
	}
	for (i = 0; i < vr->ntensors; i++) {
		const struct wshard_manifest_tensor *mt = &mr->tensors[i];
		struct vtensor *t = &vr->tensors[i];

		t->name = mt->name;
		t->dtype = mt->dtype;
		t->ndim = mt->ndim;
		memcpy(t->shape, mt->shape, sizeof(t->shape));
		t->file = mt->file;
		t->begin = mt->begin;
		t->end = mt->end;
		t->checksum = mt->checksum;
		t->quant = mt->quant;
	}
	return WSHARD_OK;
}

static enum wshard_err load_manifest(struct verify *v, struct wshard_error *err)
{
	size_t i;
	enum wshard_err rc;

	/* without the sources, which verify does not read: a far smaller tree */
	rc = wshard_manifest_open(&v->m, v->opt->out_dir, err);
	if (rc)
		return rc;
	v->tp = v->m->tp;
	v->algo = v->m->options.checksum;
	v->nranks = v->m->nranks;
	v->ranks = calloc(v->nranks, sizeof(*v->ranks));
	if (!v->ranks)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (i = 0; i < v->nranks; i++) {
		rc = take_rank(v, i, err);
		if (rc)
			return rc;
	}
	if ((size_t)v->tp * (size_t)v->m->pp != v->nranks && v->proc == 0) {
		if (v->m->pp > 1)
			verify_diff(v, "manifest: tp %d x pp %d but %zu ranks listed", v->tp,
				    v->m->pp, v->nranks);
		else
			verify_diff(v, "manifest: tp %d but %zu ranks listed", v->tp, v->nranks);
	}
	if (v->opt->rank >= 0 && (size_t)v->opt->rank >= v->nranks)
		return wshard_error_set(err, WSHARD_EUSAGE, "'%s' has no rank %d (%zu ranks)",
					v->opt->out_dir, v->opt->rank, v->nranks);
	return WSHARD_OK;
}


/* Process 0 gets every process's lines, ordered by rank. */
static int cmp_line(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	long rx = -1, ry = -1;

	sscanf(x, "rank %ld:", &rx);
	sscanf(y, "rank %ld:", &ry);
	if (rx != ry)
		return rx < ry ? -1 : 1;
	/* within a rank, by text: two threads find differences in any order */
	return strcmp(x, y);
}

static enum wshard_err collect(struct verify *v, struct wshard_verify_result *out,
			       struct wshard_error *err)
{
	uint64_t sums[4] = { v->ndiff, v->ntensors, v->nbytes, v->nranks_done };
	char *all = NULL, *p, *nl;
	size_t *lens = NULL, n = 0, cap = 0;
	enum wshard_err rc;

	rc = wshard_comm_sum_u64(v->comm, sums, 4, err);
	if (rc)
		return rc;
	rc = wshard_comm_gather_bytes(v->comm, v->lines ? v->lines : "", v->lines_len, &all,
				      &lens, err);
	if (rc || v->proc != 0)
		goto out;
	out->differences = sums[0];
	out->tensors = sums[1];
	out->bytes = sums[2];
	out->ranks = sums[3];
	{
		size_t total = 0, i;

		for (i = 0; i < (size_t)v->nprocs; i++)
			total += lens[i];
		all[total] = '\0';
	}
	for (p = all; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		if (!nl)
			break;
		*nl = '\0';
		if (n == cap) {
			char **l = realloc(out->lines, (cap = cap ? cap * 2 : 64) * sizeof(char *));

			if (!l) {
				rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
				goto out;
			}
			out->lines = l;
		}
		out->lines[n] = strdup(p);
		if (!out->lines[n]) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			goto out;
		}
		out->nlines = ++n;
	}
	/* stable enough: lines of one rank come from one process, in order */
	if (n > 1) {
		size_t i, j;

		for (i = 1; i < n; i++)	/* insertion sort keeps equal ranks in order */
			for (j = i; j > 0 && cmp_line(&out->lines[j - 1], &out->lines[j]) > 0; j--) {
				char *t = out->lines[j];

				out->lines[j] = out->lines[j - 1];
				out->lines[j - 1] = t;
			}
	}
out:
	free(all);
	free(lens);
	return rc;
}

enum wshard_err wshard_verify(const struct wshard_verify_opts *opt,
			      struct wshard_comm *comm,
			      struct wshard_verify_result *out,
			      struct wshard_error *err)
{
	struct verify v = {
		.opt = opt,
		.comm = comm,
		.proc = wshard_comm_rank(comm),
		.nprocs = wshard_comm_size(comm),
	};
	struct hash_job hjob = { 0 };
	pthread_t tid;
	bool threaded;
	size_t r, f;
	uint64_t diffs[1];

	memset(out, 0, sizeof(*out));
	pthread_mutex_init(&v.lock, NULL);
	if (!load_manifest(&v, err))
		verify_load_archives(&v, err);
	if (wshard_comm_agree(comm, err))
		goto out;
	for (r = 0; r < v.nranks && !err->code; r++) {
		if (!verify_wanted(&v, (int)r))
			continue;
		v.nranks_done++;
		if (v.m->has_archives)
			verify_check_archive(&v, (int)r, err);
		if (v.archive_only)
			continue;
		for (f = 0; f < v.ranks[r].nfiles && !err->code; f++)
			verify_check_file(&v, (int)r, f, err);
		verify_check_structure(&v, (int)r);
	}
	if (wshard_comm_agree(comm, err))
		goto out;
	/* checksums on one thread while the source comparison runs on this one */
	hjob.v = &v;
	threaded = pthread_create(&tid, NULL, verify_hash_worker, &hjob) == 0;
	if (!threaded)
		verify_hash_worker(&hjob);
	if (!opt->quick)
		verify_check_source(&v, err);
	if (threaded)
		pthread_join(tid, NULL);
	if (hjob.err.code)
		wshard_error_set(err, hjob.err.code, "%s", hjob.err.msg);
	if (wshard_comm_agree(comm, err))
		goto out;
	collect(&v, out, err);
	if (wshard_comm_agree(comm, err))
		goto out;
	diffs[0] = v.ndiff;
	if (!wshard_comm_sum_u64(comm, diffs, 1, err) && diffs[0])
		wshard_error_set(err, WSHARD_EMISMATCH, "%llu difference%s found",
				 (unsigned long long)diffs[0], diffs[0] == 1 ? "" : "s");
out:
	for (r = 0; v.ranks && r < v.nranks; r++) {
		for (f = 0; f < v.ranks[r].nfiles; f++) {
			if (v.ranks[r].files[f].map)
				munmap(v.ranks[r].files[f].map, v.ranks[r].files[f].map_len);
			wshard_st_free(v.ranks[r].files[f].st);
		}
		free(v.ranks[r].files);
		free(v.ranks[r].tensors);
		free(v.ranks[r].from_plan);
	}
	free(v.ranks);
	free(v.lines);
	for (size_t i = 0; i < STREAM_SLOTS; i++)
		free(v.cmp[i]);
	wshard_manifest_free(v.m);
	pthread_mutex_destroy(&v.lock);
	return err->code;
}

void wshard_verify_result_release(struct wshard_verify_result *res)
{
	size_t i;

	if (!res)
		return;
	for (i = 0; i < res->nlines; i++)
		free(res->lines[i]);
	free(res->lines);
	res->lines = NULL;
	res->nlines = 0;
}

