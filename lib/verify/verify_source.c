/*
 * verify_source.c - verify against the source: the plan re-derived from
 * it with the manifest's options must describe the manifest's files and
 * tensors, and every output byte must equal the source bytes it came
 * from, read once through the same stream engine as convert.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdarg.h>
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
/* The source: plan against manifest, bytes against bytes               */
/* ------------------------------------------------------------------ */

static enum wshard_err load_rules(struct verify *v, const struct wshard_catalog *cat,
				  struct wshard_rules **out, struct wshard_error *err)
{
	const char *name = v->m->rules;
	enum wshard_err rc;

	*out = NULL;
	if (!name)
		return verify_bad(v, err, "no \"rules\"");
	if (strncmp(name, "builtin:", 8) != 0)
		return wshard_rules_load(out, name, err);
	rc = wshard_rules_builtin(out, v->m->options.architecture ? v->m->options.architecture :
				  cat->config.architecture, err);
	if (rc)
		return rc;
	if (strcmp(wshard_rules_name(*out), name))
		verify_diff(v, "manifest: rules '%s', but the source's architecture uses '%s'", name,
		     wshard_rules_name(*out));
	return WSHARD_OK;
}

/* The plan from the source must describe exactly the manifest's files and tensors. */
/* The manifest's tensor of this name: where the plan has it (a manifest
 * lists a rank's tensors in plan order), else searched for. */
static size_t find_vtensor(const struct vrank *vr, size_t hint, const char *name)
{
	size_t j;

	if (hint < vr->ntensors && !strcmp(vr->tensors[hint].name, name))
		return hint;
	for (j = 0; j < vr->ntensors; j++)
		if (!strcmp(vr->tensors[j].name, name))
			return j;
	return vr->ntensors;
}

static void check_plan(struct verify *v, const struct wshard_plan *plan, int r)
{
	const struct wshard_rank_plan *rp = &plan->ranks[r];
	struct vrank *vr = &v->ranks[r];
	char a[160], b[160];
	size_t i, j;

	for (i = 0; i < rp->nfiles; i++)
		if (i >= vr->nfiles || strcmp(rp->files[i].name, vr->files[i].name))
			verify_diff(v, "rank %d: file '%s': in the plan from the source but not in the manifest",
			     r, rp->files[i].name);
	for (i = rp->nfiles; i < vr->nfiles; i++)
		verify_diff(v, "rank %d: file '%s': in the manifest but not in the plan from the source", r,
		     vr->files[i].name);
	for (i = 0; i < rp->ntensors; i++) {
		const struct wshard_out_tensor *t = &rp->tensors[i];
		struct vtensor *m = NULL;

		vr->from_plan[i] = -1;
		j = find_vtensor(vr, i, t->name);
		if (j < vr->ntensors)
			m = &vr->tensors[j];
		if (!m) {
			verify_diff(v, "rank %d: tensor '%s': missing (the plan from the source has it)", r,
			     t->name);
			continue;
		}
		if (m->dtype != t->dtype || m->ndim != t->ndim ||
		    memcmp(m->shape, t->shape, sizeof(uint64_t) * (size_t)t->ndim)) {
			wshard_format_shape(a, sizeof(a), t->shape, t->ndim);
			wshard_format_shape(b, sizeof(b), m->shape, m->ndim);
			verify_diff(v, "rank %d: tensor '%s': the source gives %s %s, the output has %s %s", r,
			     t->name, wshard_dtype_name(t->dtype), a, wshard_dtype_name(m->dtype), b);
			continue;
		}
		if (m->quant != (enum wshard_quant_role)t->quant)
			verify_diff(v, "rank %d: tensor '%s': the source gives it quant \"%s\", the manifest \"%s\"",
				    r, t->name, t->quant ? wshard_quant_role_name(t->quant) : "none",
				    m->quant ? wshard_quant_role_name(m->quant) : "none");
		if (m->comparable && m->end - m->begin == t->nbytes)
			vr->from_plan[i] = (long)j;
	}
	for (j = 0; j < vr->ntensors; j++) {
		i = j;
		if (i >= rp->ntensors || strcmp(vr->tensors[j].name, rp->tensors[i].name))
			for (i = 0; i < rp->ntensors; i++)
				if (!strcmp(vr->tensors[j].name, rp->tensors[i].name))
					break;
		if (i == rp->ntensors)
			verify_diff(v, "rank %d: tensor '%s': extra (the plan from the source has no such tensor)",
			     r, vr->tensors[j].name);
	}
}

/* Drops every page of the output this process has mapped (the page cache keeps them). */
static void unmap_compared(struct verify *v)
{
	size_t r, f;

	for (r = 0; r < v->nranks; r++)
		for (f = 0; f < v->ranks[r].nfiles; f++)
			if (v->ranks[r].files[f].map)
				madvise(v->ranks[r].files[f].map, v->ranks[r].files[f].map_len,
					MADV_DONTNEED);
	__atomic_store_n(&v->compared, 0, __ATOMIC_RELAXED);
}

/*
 * Drops the compared pages (len bytes at offset at of map) from this
 * process's resident set: those of a large piece at once, the rest (small
 * pieces such as an expert's rows, and the pages a fault maps around a
 * piece) every UNMAP_EVERY compared bytes, all at once; the page cache
 * keeps them.  An madvise per small piece cost more than the comparison:
 * each one interrupts the other core to flush its TLB.
 */
static inline void drop_compared(struct verify *v, char *map, uint64_t at, size_t len)
{
	uint64_t lo = (at + 4095) / 4096 * 4096, hi = (at + len) / 4096 * 4096;
	uint64_t c = __atomic_add_fetch(&v->compared, len, __ATOMIC_RELAXED);

	/* one thread unmaps; pages another is reading fault back in */
	if (c >= UNMAP_EVERY &&
	    __atomic_compare_exchange_n(&v->compared, &c, 0, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		unmap_compared(v);
	else if (hi >= lo + UNMAP_PIECE)
		madvise(map + lo, hi - lo, MADV_DONTNEED);
}

/* The sink of verify: compares output bytes with what the source gives. */
static enum wshard_err compare_put(void *ctx, unsigned slot, int rank, size_t tensor,
				   uint64_t off, const void *buf, size_t len,
				   struct wshard_error *err)
{
	struct verify *v = ctx;
	struct vrank *vr;
	long j;
	struct vtensor *t;
	const struct wshard_st *st;
	const unsigned char *a = buf, *b;
	size_t i;
	enum wshard_err rc;

	if ((size_t)rank >= v->nranks || (v->opt->rank >= 0 && v->opt->rank != rank))
		return WSHARD_OK;
	vr = &v->ranks[rank];
	j = vr->from_plan ? vr->from_plan[tensor] : -1;
	if (j < 0)
		return WSHARD_OK;
	t = &vr->tensors[j];
	if (__atomic_load_n(&t->differs, __ATOMIC_RELAXED))
		return WSHARD_OK;
	st = vr->files[t->file].st;
	if (vr->files[t->file].map) {
		uint64_t at = st->data_start + t->begin + off;
		const unsigned char *m;

		if (at + len > vr->files[t->file].map_len)
			return WSHARD_OK;	/* the structure check reported it */
		m = (const unsigned char *)vr->files[t->file].map + at;
		if (memcmp(a, m, len) != 0 &&
		    !__atomic_exchange_n(&t->differs, true, __ATOMIC_RELAXED)) {
			for (i = 0; a[i] == m[i]; i++)
				;
			verify_diff(v, "rank %d: tensor '%s': bytes differ from the source at byte offset %llu (element %llu)",
			     rank, t->name, (unsigned long long)(off + i),
			     (unsigned long long)((off + i) * 8 / wshard_dtype_bits(t->dtype)));
		}
		drop_compared(v, vr->files[t->file].map, at, len);
		return WSHARD_OK;
	}
	if (len > v->cmp_cap[slot]) {
		char *p = realloc(v->cmp[slot], len);

		if (!p)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		v->cmp[slot] = p;
		v->cmp_cap[slot] = len;
	}
	rc = wshard_pread_full(st->fd, v->cmp[slot], len, st->data_start + t->begin + off,
			       st->path, err);
	if (rc)
		return rc;
	b = (const unsigned char *)v->cmp[slot];
	if (memcmp(a, b, len) == 0 || __atomic_exchange_n(&t->differs, true, __ATOMIC_RELAXED))
		return WSHARD_OK;
	for (i = 0; a[i] == b[i]; i++)
		;
	verify_diff(v, "rank %d: tensor '%s': bytes differ from the source at byte offset %llu (element %llu)",
	     rank, t->name, (unsigned long long)(off + i),
	     (unsigned long long)((off + i) * 8 / wshard_dtype_bits(t->dtype)));
	return WSHARD_OK;
}

/* The manifest's "parallel" against the plan its options give. */
static void check_parallel(struct verify *v, const struct wshard_plan *plan)
{
	const char *want = plan->opt.expert_parallel ? wshard_placement_name(plan->placement)
						     : NULL;
	const char *got = v->m->expert_placement;

	if (v->proc != 0 || (!want && !got) || (want && got && strcmp(want, got) == 0))
		return;
	verify_diff(v, "manifest: expert placement %s, but its options give %s",
		    got ? got : "none (tensor parallel)", want ? want : "none (tensor parallel)");
}

/*
 * Opens the source: --source (a path, or a repo id: at the manifest's
 * commit when it names the same repo, else at main), else the manifest's.
 * A repo id there is found again in this process's HuggingFace cache at
 * the commit convert resolved, not at its branch, which may have moved
 * since; failing that, at the snapshot path convert saw.  Otherwise the
 * path as given, unless it does not lead here: then the real one.
 */
static enum wshard_err open_source(struct verify *v, struct wshard_catalog **out_cat,
				   struct wshard_error *err)
{
	const char *real = v->m->source_realpath;
	const char *repo = v->m->source_repo_id;
	const char *commit = v->m->source_commit;
	const char *src = v->opt->source;
	struct wshard_error herr = { 0 };

	*out_cat = NULL;
	if (src) {
		bool same = repo && commit && !strcmp(src, repo) && access(src, F_OK) < 0;

		return wshard_catalog_open_source(out_cat, src, same ? commit : NULL, err);
	}
	if (repo && commit) {
		if (!wshard_catalog_open_source(out_cat, repo, commit, &herr))
			return WSHARD_OK;
		if (herr.code != WSHARD_ENOTCACHED || !real || access(real, F_OK) < 0)
			return wshard_error_set(err, herr.code, "%s", herr.msg);
		return wshard_catalog_open(out_cat, real, err);
	}
	src = v->m->source_path;
	if (src && access(src, F_OK) < 0 && real && access(real, F_OK) == 0)
		src = real;
	if (!src)
		return verify_bad(v, err, "no source path; pass --source");
	return wshard_catalog_open(out_cat, src, err);
}

enum wshard_err verify_check_source(struct verify *v, struct wshard_error *err)
{
	struct wshard_catalog *cat = NULL;
	struct wshard_rules *rules = NULL;
	struct wshard_plan *plan = NULL;
	struct wshard_error perr = { 0 };
	/* stream threads compare at once: differences are locked, the
	 * rest is per slot or atomic */
	struct stream_sink sink = { .put = compare_put, .ctx = v, .threadsafe = true };
	struct stream_stats stats;
	size_t r;
	enum wshard_err rc;

	rc = open_source(v, &cat, err);
	if (!rc)
		rc = load_rules(v, cat, &rules, err);
	if (!rc)
		rc = wshard_rules_add_folders(rules, cat, err);
	if (wshard_comm_agree(v->comm, err))
		goto out;
	if (wshard_plan_build(&plan, cat, rules, &v->m->options, &perr)) {
		if (v->proc == 0)
			verify_diff(v, "manifest: the source cannot be converted with the manifest's options: %s",
			     perr.msg);
		goto out;
	}
	check_parallel(v, plan);
	for (r = 0; r < v->nranks && r < (size_t)plan->nranks; r++) {
		if (!verify_wanted(v, (int)r))
			continue;
		v->ranks[r].from_plan = calloc(plan->ranks[r].ntensors + 1, sizeof(long));
		if (!v->ranks[r].from_plan) {
			wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			break;
		}
		check_plan(v, plan, (int)r);
	}
	if (wshard_comm_agree(v->comm, err))
		goto out;
	stream_run(plan, v->comm, &sink, NULL, NULL, &stats, err);
out:
	wshard_plan_free(plan);
	wshard_rules_free(rules);
	wshard_catalog_free(cat);
	return err->code;
}

