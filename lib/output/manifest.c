/*
 * manifest.c - builds wshard.json.  Everything in it is a function of the
 * input and the options (no time, no host name), so two runs give the same
 * bytes; only "run" depends on the number of processes.
 */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/util.h"
#include "base/dtype.h"
#include "source/safetensors.h"
#include "base/fileio.h"
#include "source/catalog.h"
#include "manifest.h"
#include "manifest_entry.h"
#include "convert.h"

const char *manifest_validate_name(enum wshard_validate_mode mode)
{
	switch (mode) {
	case WSHARD_VALIDATE_AUTO: return "auto";
	case WSHARD_VALIDATE_GPU: return "gpu";
	case WSHARD_VALIDATE_HOST: return "host";
	case WSHARD_VALIDATE_OFF: return "off";
	}
	return "?";
}

static json_t *range(uint64_t a, uint64_t b)
{
	return json_pack("[II]", (json_int_t)a, (json_int_t)b);
}

static json_t *shape_json(const uint64_t *shape, int ndim)
{
	json_t *a = json_array();
	int i;

	for (i = 0; a && i < ndim; i++)
		json_array_append_new(a, json_integer((json_int_t)shape[i]));
	return a;
}

/*
 * The manifest is written as text piece by piece, never as one tree: a
 * jansson tree takes many times the bytes of its text, and an MoE model's
 * provenance makes the text large (a source per expert where experts are
 * not stacked into one tensor, so not written as runs).
 * Each tensor entry is built, printed and freed on its own; the small
 * objects around them are printed with a placeholder string where the
 * entries go, and the placeholder's printed form is then replaced.  The
 * result is what json_dumps(JSON_INDENT(1) | JSON_PRESERVE_ORDER) prints
 * for the whole tree.
 */
#define DUMP_FLAGS (JSON_INDENT(1) | JSON_PRESERVE_ORDER)
#define TENSORS_MARK "\001tensors"
/* as printed, with its key: no string the document holds can contain it */
#define TENSORS_MARK_TEXT "\"tensors\": \"\\u0001tensors\""
#define RANKS_MARK "\001ranks"
#define RANKS_MARK_TEXT "\"ranks\": \"\\u0001ranks\""

/* Printed text: in memory, or passed to out a piece at a time. */
struct text {
	char *p;
	size_t len, cap;
	bool oom, failed;
	manifest_out_fn out;
	void *ctx;
};

#define TEXT_PIECE ((size_t)1 << 20)

static void text_flush(struct text *t)
{
	if (t->out && t->len && !t->oom && !t->failed && !t->out(t->ctx, t->p, t->len))
		t->failed = true;
	t->len = 0;
}

static void text_add(struct text *t, const char *s, size_t n)
{
	if (t->oom || t->failed)
		return;
	if (t->out && t->len + n > TEXT_PIECE) {
		text_flush(t);
		if (n > TEXT_PIECE) {	/* a big piece goes as it is */
			if (!t->out(t->ctx, s, n))
				t->failed = true;
			return;
		}
	}
	if (t->len + n + 1 > t->cap) {
		size_t cap = WSHARD_MAX(t->cap * 2, t->len + n + 1);
		char *p = realloc(t->p, WSHARD_MAX(cap, 4096));

		if (!p) {
			t->oom = true;
			return;
		}
		t->p = p;
		t->cap = WSHARD_MAX(cap, 4096);
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

/* Appends n spaces (n at most 16: the depths the manifest has). */
static void text_indent(struct text *t, int n)
{
	static const char spaces[] = "                ";

	text_add(t, spaces, (size_t)n);
}

/* Appends n bytes of s, each line after the first shifted right by extra spaces. */
static void text_add_shifted(struct text *t, const char *s, size_t n, int extra)
{
	const char *nl;

	while (n && (nl = memchr(s, '\n', n))) {
		size_t k = (size_t)(nl - s) + 1;

		text_add(t, s, k);
		text_indent(t, extra);
		s += k;
		n -= k;
	}
	text_add(t, s, n);
}

/* Appends elements [a, b) of an array of count at depth extra, each
 * indented, printed by one(ctx, t, i, extra) and followed by its comma
 * and newline. */
static void text_add_elements(struct text *t, size_t a, size_t b, size_t count, int extra,
			      void (*one)(void *, struct text *, size_t, int), void *ctx)
{
	size_t i;

	for (i = a; i < b; i++) {
		text_indent(t, extra);
		one(ctx, t, i, extra);
		text_add(t, i + 1 < count ? ",\n" : "\n", i + 1 < count ? 2 : 1);
	}
}

/*
 * Appends the printed form of obj, indented as at depth extra of the
 * document (one space a level), its placeholder (printed as mark_text,
 * key included) replaced by an array of count elements, which
 * fill(ctx, t, count, their depth) appends (text_add_elements).
 */
static void text_add_object(struct text *t, json_t *obj, int extra, const char *mark_text,
			    size_t count, void (*fill)(void *, struct text *, size_t, int),
			    void *ctx)
{
	char *s = obj ? json_dumps(obj, DUMP_FLAGS) : NULL;
	char *at;
	size_t pre;

	if (!s) {
		t->oom = true;
		return;
	}
	at = mark_text ? strstr(s, mark_text) : NULL;
	if (at)
		at = strchr(at, ':') + 2;	/* the key stays */
	pre = at ? (size_t)(at - s) : strlen(s);
	text_add_shifted(t, s, pre, extra);
	if (at) {
		/* the array is at depth extra + 1, its elements at extra + 2 */
		if (!count) {
			text_add(t, "[]", 2);
		} else {
			text_add(t, "[\n", 2);
			fill(ctx, t, count, extra + 2);
			text_indent(t, extra + 1);
			text_add(t, "]", 1);
		}
		at = strchr(at + 1, '"') + 1;	/* past the mark's closing quote */
		text_add_shifted(t, at, strlen(at), extra);
	}
	free(s);
}

struct rank_ctx {
	const struct wshard_plan *plan;
	const struct wshard_rank_plan *rp;
	const struct manifest_rank_ck *ck;
	char *buf;		/* manifest_entry_print's */
	size_t cap;
};

static void fill_tensor(void *arg, struct text *t, size_t i, int extra)
{
	struct rank_ctx *c = arg;
	const struct wshard_out_tensor *ot = &c->rp->tensors[i];
	json_t *o;
	size_t n;
	int fast = manifest_entry_print(c->plan, ot, c->rp->files[ot->part].name,
					c->ck->tensor[i], extra, &c->buf, &n, &c->cap);

	if (fast) {
		if (fast < 0)
			t->oom = true;
		text_add(t, c->buf, n);
		return;
	}
	o = json_pack("{s:s,s:s,s:o,s:s,s:o,s:s,s:o}",
		"name", ot->name,
		"dtype", wshard_dtype_name(ot->dtype),
		"shape", shape_json(ot->shape, ot->ndim),
		"file", c->rp->files[ot->part].name,
		"data_offsets", range(ot->begin, ot->end),
		"checksum", c->ck->tensor[i],
		"sources", manifest_sources_json(c->plan, ot));
	if (o && ot->quant)
		json_object_set_new(o, "quant", json_string(wshard_quant_role_name(ot->quant)));

	text_add_object(t, o, extra, NULL, 0, NULL, NULL);
	json_decref(o);
}

/*
 * A rank's tensor entries are most of the manifest and each is printed on its
 * own: threads print blocks of them into buffers of their own, which the
 * caller appends in order.  At most two blocks more than there are
 * threads are printed and not yet appended, so the text is never all in
 * memory.
 */
#define ENTRY_BLOCK 16
#define ENTRY_THREADS 8
#define ENTRY_SLOTS (ENTRY_THREADS + 2)

struct entry_job {
	struct rank_ctx *c;		/* the caller's: plan, rank, checksums */
	size_t count;			/* entries */
	int extra;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t next;			/* the next block a thread takes */
	size_t appended;		/* blocks the caller has appended */
	size_t window;			/* blocks in flight at most */
	struct text slot[ENTRY_SLOTS];
	bool done[ENTRY_SLOTS];
};

static void *entry_worker(void *arg)
{
	struct entry_job *j = arg;
	struct rank_ctx c = *j->c;
	size_t nblocks = (j->count + ENTRY_BLOCK - 1) / ENTRY_BLOCK, b;

	c.buf = NULL;
	c.cap = 0;
	pthread_mutex_lock(&j->lock);
	for (;;) {
		while (j->next < nblocks && j->next >= j->appended + j->window)
			pthread_cond_wait(&j->cond, &j->lock);
		if (j->next >= nblocks)
			break;
		b = j->next++;
		pthread_mutex_unlock(&j->lock);
		text_add_elements(&j->slot[b % j->window], b * ENTRY_BLOCK,
				  WSHARD_MIN((b + 1) * ENTRY_BLOCK, j->count), j->count, j->extra,
				  fill_tensor, &c);
		pthread_mutex_lock(&j->lock);
		j->done[b % j->window] = true;
		pthread_cond_broadcast(&j->cond);
	}
	pthread_mutex_unlock(&j->lock);
	free(c.buf);
	return NULL;
}

/* fill for a rank's tensors: in order, printed by threads when many. */
static void fill_tensors(void *arg, struct text *t, size_t count, int extra)
{
	struct entry_job j = { .c = arg, .count = count, .extra = extra };
	size_t nblocks = (count + ENTRY_BLOCK - 1) / ENTRY_BLOCK, b;
	int want = wshard_cpu_threads(ENTRY_THREADS), n = 0, k;
	pthread_t tid[ENTRY_THREADS];

	if (want < 2 || nblocks < 4 || t->oom || t->failed) {
		text_add_elements(t, 0, count, count, extra, fill_tensor, arg);
		return;
	}
	pthread_mutex_init(&j.lock, NULL);
	pthread_cond_init(&j.cond, NULL);
	j.window = (size_t)want + 2;
	for (k = 0; k < want; k++)
		if (pthread_create(&tid[n], NULL, entry_worker, &j) == 0)
			n++;
	if (!n) {
		text_add_elements(t, 0, count, count, extra, fill_tensor, arg);
	} else {
		pthread_mutex_lock(&j.lock);
		for (b = 0; b < nblocks; b++) {
			struct text *sl = &j.slot[b % j.window];

			while (!j.done[b % j.window])
				pthread_cond_wait(&j.cond, &j.lock);
			pthread_mutex_unlock(&j.lock);
			if (sl->oom)
				t->oom = true;
			text_add(t, sl->p ? sl->p : "", sl->len);
			sl->len = 0;
			pthread_mutex_lock(&j.lock);
			j.done[b % j.window] = false;
			j.appended++;
			pthread_cond_broadcast(&j.cond);
		}
		pthread_mutex_unlock(&j.lock);
		for (k = 0; k < n; k++)
			pthread_join(tid[k], NULL);
	}
	for (k = 0; k < ENTRY_SLOTS; k++)
		free(j.slot[k].p);
	pthread_mutex_destroy(&j.lock);
	pthread_cond_destroy(&j.cond);
}

/* Appends rank r's "ranks" entry, as manifest_rank_text returns it. */
static void text_add_rank(struct text *t, const struct wshard_plan *plan, int r,
			  const struct manifest_rank_ck *ck)
{
	const struct wshard_rank_plan *rp = &plan->ranks[r];
	struct rank_ctx c = { plan, rp, ck, NULL, 0 };
	json_t *files = json_array(), *head;
	size_t i;

	for (i = 0; files && i < rp->nfiles; i++)
		json_array_append_new(files, json_pack("{s:s,s:I,s:s}",
			"name", rp->files[i].name,
			"size", (json_int_t)rp->files[i].size,
			"checksum", ck->file[i]));
	head = json_pack("{s:i,s:I,s:s,s:o,s:s}", "rank", r,
			 "bytes", (json_int_t)rp->bytes,
			 "validated_by", ck->backend,
			 "files", files, "tensors", TENSORS_MARK);
	/* with stages, the rank is stage * tp + tp_rank; vLLM's worker of
	 * that stage and tensor-parallel rank reads it */
	if (head && plan->opt.pp > 1) {
		json_object_set_new(head, "stage", json_integer(rp->stage));
		json_object_set_new(head, "tp_rank", json_integer(rp->tp_rank));
	}
	/* a rank entry sits at depth 2: in "ranks", in the document */
	text_add_object(t, head, 2, TENSORS_MARK_TEXT, rp->ntensors, fill_tensors, &c);
	json_decref(head);
	free(c.buf);
}

char *manifest_rank_text(const struct wshard_plan *plan, int r,
			 const struct manifest_rank_ck *ck, size_t *out_len)
{
	struct text t = { 0 };

	text_add_rank(&t, plan, r, ck);
	if (t.oom || !t.p) {
		free(t.p);
		return NULL;
	}
	*out_len = t.len;
	return t.p;
}

/* The ranks' entries: printed already (text), or to print from cv. */
struct ranks_ctx {
	const char *const *text;
	const size_t *len;
	const struct convert *cv;
};

static void fill_rank_one(void *arg, struct text *t, size_t i, int extra)
{
	const struct ranks_ctx *c = arg;

	(void)extra;		/* manifest_rank_text shifted them already */
	if (c->cv)
		text_add_rank(t, c->cv->plan, (int)i, &c->cv->ranks[i].ck);
	else
		text_add(t, c->text[i], c->len[i]);
}

static void fill_rank(void *arg, struct text *t, size_t count, int extra)
{
	text_add_elements(t, 0, count, count, extra, fill_rank_one, arg);
}

/* Prints the document around the ranks' entries, and its final newline. */
static void text_add_doc(struct text *t, json_t *doc, const struct ranks_ctx *c, int nranks)
{
	text_add_object(t, doc, 0, RANKS_MARK_TEXT, (size_t)nranks, fill_rank, (void *)c);
	text_add(t, "\n", 1);
}

char *manifest_text(json_t *doc, const char *const *rank_text, const size_t *rank_len,
		    int nranks, size_t *out_len)
{
	struct text t = { 0 };
	struct ranks_ctx c = { rank_text, rank_len, NULL };

	text_add_doc(&t, doc, &c, nranks);
	if (t.oom || !t.p) {
		free(t.p);
		return NULL;
	}
	*out_len = t.len;
	return t.p;
}

static enum wshard_err print_doc(json_t *doc, const struct ranks_ctx *c, int nranks,
				 manifest_out_fn out, void *ctx)
{
	struct text t = { .out = out, .ctx = ctx };

	text_add_doc(&t, doc, c, nranks);
	text_flush(&t);
	free(t.p);
	return t.failed ? WSHARD_EIO : t.oom ? WSHARD_ENOMEM : WSHARD_OK;
}

enum wshard_err manifest_print(json_t *doc, const char *const *rank_text,
			       const size_t *rank_len, int nranks,
			       manifest_out_fn out, void *ctx)
{
	struct ranks_ctx c = { rank_text, rank_len, NULL };

	return print_doc(doc, &c, nranks, out, ctx);
}

/*
 * The source tensors the rules leave out on purpose (DeepSeek's
 * multi-token-prediction layer), by name with the rule's reason: what is
 * not in the output is said, never dropped silently.
 */
static json_t *left_out_json(const struct wshard_plan *plan)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && i < plan->nleft_out; i++)
		json_array_append_new(a, json_pack("{s:s,s:s}",
						   "name", plan->left_out[i].name,
						   "reason", plan->left_out[i].reason));
	return a;
}

/* The decoder layers of each stage, or null without stages. */
static json_t *stage_layers_json(const struct wshard_plan *plan)
{
	json_t *a;
	int s;

	if (plan->opt.pp == 1)
		return json_null();
	a = json_array();
	for (s = 0; a && s < plan->opt.pp; s++)
		json_array_append_new(a, json_integer(plan->stage_layers[s]));
	return a;
}

json_t *manifest_doc(const struct wshard_plan *plan, enum wshard_validate_mode mode, int nprocs,
		     const uint64_t *proc_read, bool synced)
{
	const struct wshard_catalog *cat = plan->cat;
	const struct wshard_options *o = &plan->opt;
	json_t *files = json_array(), *copied = json_array(), *reads = json_array();
	json_t *doc;
	const char *checked = NULL;
	char real[PATH_MAX];
	size_t i;
	int p;

	for (i = 0; files && i < cat->nfiles; i++)
		json_array_append_new(files, json_pack("{s:s,s:I}", "name", cat->files[i].name,
						       "size", (json_int_t)cat->files[i].size));
	for (i = 0; copied && i < cat->nextra; i++)
		json_array_append_new(copied, json_string(cat->extra[i]));
	for (p = 0; reads && p < nprocs; p++)
		json_array_append_new(reads, json_integer((json_int_t)proc_read[p]));
	wshard_target_canonical(o->target, &checked);
	doc = json_pack("{s:s,s:i,s:s,s:s,s:s,s:i,s:s?,s:s}",
			"format", "wshard",
			"format_version", WSHARD_MANIFEST_VERSION,
			"wshard_version", WSHARD_VERSION,
			"target", o->target,
			"target_checked", checked,
			"tp", plan->tp,
			"architecture", o->architecture ? o->architecture : cat->config.architecture,
			"rules", plan->rules_name);
	if (!doc)
		goto fail;
	json_object_set_new(doc, "options", json_pack("{s:b,s:I,s:o,s:s,s:b,s:s}",
		"attn_scales", o->attn_scales,
		"max_file_size", (json_int_t)o->max_file_size,
		"dtype", o->has_dtype ? json_string(wshard_dtype_name(o->dtype)) : json_null(),
		"checksum", wshard_checksum_name(o->checksum),
		"expert_parallel", o->expert_parallel,
		"expert_placement", wshard_placement_name(o->placement)));
	/* (only where given: outputs without it keep their bytes) */
	if (o->architecture)
		json_object_set_new(json_object_get(doc, "options"), "architecture",
				    json_string(o->architecture));
	/* the layout the ranks hold: placement is the one vLLM uses (its
	 * round_robin falls back to linear without grouped routing) */
	json_object_set_new(doc, "parallel", json_pack("{s:i,s:i,s:o,s:b,s:b,s:o}",
		"tp", plan->tp,
		"pp", o->pp,
		"pp_layers", stage_layers_json(plan),
		"experts", plan->has_experts,
		"expert_parallel", o->expert_parallel,
		"expert_placement", o->expert_parallel
			? json_string(wshard_placement_name(plan->placement)) : json_null()));
	/*
	 * A repo id: path is the id as given, realpath its snapshot, and the
	 * commit it resolved to says which revision the output was made from
	 * (verify finds the snapshot again by repo id and commit).
	 */
	json_object_set_new(doc, "source", json_pack("{s:s,s:s?,s:s*,s:s*,s:s*,s:I,s:o,s:o}",
		"path", cat->path,
		"realpath", realpath(cat->hf ? cat->dir : cat->path, real) ? real : NULL,
		"repo_id", cat->hf ? cat->hf->repo_id : NULL,
		"revision", cat->hf ? cat->hf->revision : NULL,
		"commit", cat->hf ? cat->hf->commit : NULL,
		"tensor_bytes", (json_int_t)cat->tensor_bytes,
		"files", files, "copied", copied));
	if (plan->nleft_out)
		json_object_set_new(doc, "left_out", left_out_json(plan));
	/* the scheme the tensors' "quant" roles belong to, as the source says it */
	if (json_is_object(json_object_get(cat->config.json, "quantization_config")))
		json_object_set(doc, "quantization",
				json_object_get(cat->config.json, "quantization_config"));
	json_object_set_new(doc, "validation", json_pack("{s:s}", "mode",
							 manifest_validate_name(mode)));
	json_object_set_new(doc, "ranks", json_string(RANKS_MARK));
	json_object_set_new(doc, "run", json_pack("{s:i,s:o,s:b}", "processes", nprocs,
						  "bytes_read", reads, "synced", synced));
	return doc;
fail:
	json_decref(files);
	json_decref(copied);
	json_decref(reads);
	return NULL;
}

struct manifest_out {
	struct wshard_file *f;
	uint64_t off;
	struct wshard_error *err;
};

static bool manifest_out(void *ctx, const char *buf, size_t len)
{
	struct manifest_out *mo = ctx;

	if (wshard_file_pwrite(mo->f, buf, len, mo->off, mo->err))
		return false;
	mo->off += len;
	return true;
}

enum wshard_err manifest_write(struct convert *cv, const struct manifest_parts *mp,
			       struct wshard_error *err)
{
	struct manifest_out mo = { .err = err };
	struct ranks_ctx ranks = { mp->text, mp->len, NULL };
	char *path = wshard_path_join(cv->run->out_dir, WSHARD_MANIFEST);
	enum wshard_err rc;

	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory writing the manifest");
	/* printed straight into the file: the text is never all in memory */
	rc = wshard_file_create(&mo.f, path, convert_file_flags(cv), err);
	free(path);
	if (rc)
		return rc;
	ranks.cv = mp->text ? NULL : cv;	/* see manifest_gather */
	rc = print_doc(mp->doc, &ranks, cv->plan->nranks, manifest_out, &mo);
	if (rc == WSHARD_ENOMEM)
		wshard_error_set(err, rc, "out of memory writing the manifest");
	if (rc)
		wshard_file_abort(mo.f);
	else
		wshard_file_commit(mo.f, err);
	return err->code;
}
