/*
 * manifest_read.c - wshard.json read back, for verify, inspect and
 * convert (which recognises its earlier output in OUT by it): the file
 * without its "sources" members (a tensor's provenance, most of an MoE
 * model's manifest, which none of them reads), parsed and checked into
 * plain structures.  Beside the writer, so that convert needs nothing
 * of verify.
 */
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/hash.h"
#include "base/fileio.h"
#include "manifest.h"
#include "manifest_read.h"

/* ------------------------------------------------------------------ */
/* Reading: the manifest without its sources                           */
/* ------------------------------------------------------------------ */

static size_t skip_space(const char *s, size_t n, size_t i)
{
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

/* The end of the string that opens at s[i] (past its closing quote), or n. */
static size_t skip_string(const char *s, size_t n, size_t i)
{
	for (i++; i < n;) {
		const char *q = memchr(s + i, '"', n - i);
		const char *b;

		if (!q)
			return n;
		b = memchr(s + i, '\\', (size_t)(q - (s + i)));
		if (!b)
			return (size_t)(q - s) + 1;
		i = (size_t)(b - s) + 2;	/* the escaped character */
	}
	return n;
}

/* The end of the value that starts at s[i], or n when it does not end. */
static size_t skip_value(const char *s, size_t n, size_t i)
{
	size_t depth = 0;

	if (i >= n)
		return n;
	if (s[i] == '"')
		return skip_string(s, n, i);
	if (s[i] != '{' && s[i] != '[') {
		while (i < n && !memchr(",}] \t\r\n", s[i], 7))
			i++;
		return i;
	}
	while (i < n) {
		if (s[i] == '"') {
			i = skip_string(s, n, i);
			continue;
		}
		if (s[i] == '{' || s[i] == '[')
			depth++;
		else if ((s[i] == '}' || s[i] == ']') && --depth == 0)
			return i + 1;
		i++;
	}
	return n;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Writes at s + w as many newlines as src[a, b) holds; returns the new w. */
static size_t keep_newlines(char *s, size_t w, const char *src, size_t a, size_t b)
{
	const char *p = src + a, *end = src + b;

	while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		s[w++] = '\n';
		p++;
	}
	return w;
}

size_t wshard_manifest_strip_sources(char *s, size_t n)
{
	static const char key[] = "\"sources\"";
	size_t i = 0, w = 0;	/* read and write positions; w <= i */
	size_t last = SIZE_MAX;	/* where the last non-space character went */

	while (i < n) {
		size_t j, k, v0, v1, m, nl;

		if (s[i] != '"') {
			if (!is_space(s[i]))
				last = w;
			s[w++] = s[i++];
			continue;
		}
		j = skip_string(s, n, i);
		k = skip_space(s, n, j);
		if (j - i != sizeof(key) - 1 || memcmp(s + i, key, j - i) != 0 ||
		    k >= n || s[k] != ':') {
			memmove(s + w, s + i, j - i);
			w += j - i;
			last = w - 1;
			i = j;
			continue;
		}
		v0 = skip_space(s, n, k + 1);
		v1 = skip_value(s, n, v0);
		if (v1 >= n || v0 == v1)
			break;		/* not JSON: left for the parser to report */
		if (last != SIZE_MAX && s[last] == ',') {
			/* the comma before it goes too */
			nl = keep_newlines(s, last, s, last, w) - last;
			w = keep_newlines(s, last + nl, s, i, v1);
			last = SIZE_MAX;
			i = v1;
			continue;
		}
		m = skip_space(s, n, v1);
		if (m < n && s[m] == ',')	/* the first member: the comma after it */
			m++;
		else
			m = v1;
		w = keep_newlines(s, w, s, i, m);
		i = m;
	}
	memmove(s + w, s + i, n - i);
	w += n - i;
	if (w < n)
		s[w] = '\0';
	return w;
}

enum wshard_err wshard_manifest_read(const char *path, char **out_text, size_t *out_len,
				     struct wshard_error *err)
{
	enum wshard_err rc = wshard_read_file(path, UINT64_MAX, out_text, out_len, err);

	if (!rc)
		*out_len = wshard_manifest_strip_sources(*out_text, *out_len);
	return rc;
}


/* ------------------------------------------------------------------ */
/* The manifest, parsed and checked                                     */
/* ------------------------------------------------------------------ */

/* What a wshard_manifest points into: the parsed document. */
struct manifest_full {
	struct wshard_manifest pub;
	json_t *doc;
};

static enum wshard_err bad(const struct wshard_manifest *m, struct wshard_error *err,
			   const char *what)
{
	return wshard_error_set(err, WSHARD_EINVAL, "'%s': not a valid wshard manifest: %s",
				m->path, what);
}

static bool get_u64(json_t *o, const char *key, uint64_t *out)
{
	json_t *x = json_object_get(o, key);

	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return false;
	*out = (uint64_t)json_integer_value(x);
	return true;
}

/* The files of rank r's entry: each with a plain name, a size and a checksum. */
static enum wshard_err parse_files(struct wshard_manifest *m, size_t r, json_t *files,
				   struct wshard_error *err)
{
	struct wshard_manifest_rank *mr = &m->ranks[r];
	json_t *x;
	size_t i;
	char what[160];

	mr->nfiles = json_array_size(files);
	mr->files = calloc(mr->nfiles + 1, sizeof(*mr->files));
	if (!mr->files)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	json_array_foreach(files, i, x) {
		struct wshard_manifest_file *f = &mr->files[i];

		f->name = json_string_value(json_object_get(x, "name"));
		f->checksum = json_string_value(json_object_get(x, "checksum"));
		if (!f->name || !f->checksum || !get_u64(x, "size", &f->size) ||
		    strchr(f->name, '/') || f->name[0] == '.') {
			snprintf(what, sizeof(what), "rank %zu file %zu needs a plain name, size and checksum",
				 r, i);
			return bad(m, err, what);
		}
	}
	return WSHARD_OK;
}

/* Tensor x of rank r's entry into *t.  Returns false when it is malformed. */
static bool parse_tensor(const struct wshard_manifest_rank *mr, json_t *x,
			 struct wshard_manifest_tensor *t)
{
	json_t *shape = json_object_get(x, "shape"), *off = json_object_get(x, "data_offsets");
	const char *dtype = json_string_value(json_object_get(x, "dtype"));
	const char *file = json_string_value(json_object_get(x, "file"));
	json_t *d;
	size_t j;

	t->name = json_string_value(json_object_get(x, "name"));
	t->checksum = json_string_value(json_object_get(x, "checksum"));
	if (json_object_get(x, "quant") &&
	    wshard_quant_role_parse(json_string_value(json_object_get(x, "quant")), &t->quant) < 0)
		return false;
	if (!t->name || !t->checksum || !dtype || wshard_dtype_parse(dtype, &t->dtype) < 0 ||
	    !file || !json_is_array(shape) || json_array_size(shape) > WSHARD_MAX_DIMS ||
	    !json_is_array(off) || json_array_size(off) != 2 ||
	    !json_is_integer(json_array_get(off, 0)) || !json_is_integer(json_array_get(off, 1)))
		return false;
	t->ndim = (int)json_array_size(shape);
	json_array_foreach(shape, j, d) {
		if (!json_is_integer(d) || json_integer_value(d) < 0)
			return false;
		t->shape[j] = (uint64_t)json_integer_value(d);
	}
	t->begin = (uint64_t)json_integer_value(json_array_get(off, 0));
	t->end = (uint64_t)json_integer_value(json_array_get(off, 1));
	for (j = 0; j < mr->nfiles; j++)
		if (!strcmp(mr->files[j].name, file))
			break;
	t->file = j;
	return j < mr->nfiles;
}

static enum wshard_err parse_rank(struct wshard_manifest *m, size_t r, json_t *rk,
				  struct wshard_error *err)
{
	struct wshard_manifest_rank *mr = &m->ranks[r];
	json_t *files = json_object_get(rk, "files"), *tensors = json_object_get(rk, "tensors");
	json_t *x;
	size_t i;
	char what[160];
	enum wshard_err rc;

	if (!json_is_object(rk) || !json_is_integer(json_object_get(rk, "rank")) ||
	    json_integer_value(json_object_get(rk, "rank")) != (json_int_t)r ||
	    !json_is_array(files) || !json_is_array(tensors)) {
		snprintf(what, sizeof(what), "ranks[%zu] is not rank %zu with files and tensors", r, r);
		return bad(m, err, what);
	}
	mr->tp_rank = (int)(r % (size_t)m->tp);
	mr->stage = (int)(r / (size_t)m->tp);
	if (m->pp > 1 &&
	    (json_integer_value(json_object_get(rk, "stage")) != mr->stage ||
	     json_integer_value(json_object_get(rk, "tp_rank")) != mr->tp_rank)) {
		snprintf(what, sizeof(what), "ranks[%zu] is not stage %d's tp rank %d", r,
			 mr->stage, mr->tp_rank);
		return bad(m, err, what);
	}
	mr->bytes = (uint64_t)json_integer_value(json_object_get(rk, "bytes"));
	mr->validated_by = json_string_value(json_object_get(rk, "validated_by"));
	rc = parse_files(m, r, files, err);
	if (rc)
		return rc;
	mr->ntensors = json_array_size(tensors);
	mr->tensors = calloc(mr->ntensors + 1, sizeof(*mr->tensors));
	if (!mr->tensors)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	json_array_foreach(tensors, i, x) {
		if (!parse_tensor(mr, x, &mr->tensors[i])) {
			snprintf(what, sizeof(what), "rank %zu tensor %zu is malformed", r, i);
			return bad(m, err, what);
		}
	}
	return WSHARD_OK;
}

/* "parallel"'s "pp" and "pp_layers" (written since pipeline parallelism;
 * absent: one stage). */
static enum wshard_err parse_stages(struct wshard_manifest *m, json_t *par,
				    struct wshard_error *err)
{
	json_t *pp = json_object_get(par, "pp"), *layers = json_object_get(par, "pp_layers");
	size_t s;

	m->pp = 1;
	if (!pp || json_integer_value(pp) == 1)
		return WSHARD_OK;
	if (json_integer_value(pp) < 1 || json_integer_value(pp) > 1024 ||
	    json_array_size(layers) != (size_t)json_integer_value(pp))
		return bad(m, err, "\"parallel\": \"pp\" is not 1 to 1024 with as many \"pp_layers\"");
	m->pp = (int)json_integer_value(pp);
	m->pp_layers = calloc((size_t)m->pp, sizeof(int));
	if (!m->pp_layers)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	for (s = 0; s < (size_t)m->pp; s++) {
		json_int_t v = json_integer_value(json_array_get(layers, s));

		if (v < 1 || v > 1000000)
			return bad(m, err, "\"parallel\": a \"pp_layers\" entry is not a positive layer count");
		m->pp_layers[s] = (int)v;
	}
	return WSHARD_OK;
}

/* "format", "format_version", "tp", "pp", the checksum algorithm and the
 * expert placement. */
static enum wshard_err parse_head(struct wshard_manifest *m, json_t *doc,
				  struct wshard_error *err)
{
	const char *fmt = json_string_value(json_object_get(doc, "format")), *ck;
	json_t *x;
	enum wshard_err rc;

	if (!fmt || strcmp(fmt, "wshard"))
		return bad(m, err, "\"format\" is not \"wshard\"");
	x = json_object_get(doc, "format_version");
	if (!json_is_integer(x))
		return bad(m, err, "no \"format_version\"");
	if (json_integer_value(x) < WSHARD_MANIFEST_VERSION_MIN ||
	    json_integer_value(x) > WSHARD_MANIFEST_VERSION)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': format_version %lld is not one this wshard knows "
					"(%d to %d)", m->path, (long long)json_integer_value(x),
					WSHARD_MANIFEST_VERSION_MIN, WSHARD_MANIFEST_VERSION);
	x = json_object_get(doc, "tp");
	if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 4096)
		return bad(m, err, "\"tp\" is not a positive integer");
	m->tp = (int)json_integer_value(x);
	rc = parse_stages(m, json_object_get(doc, "parallel"), err);
	if (rc)
		return rc;
	ck = json_string_value(json_object_get(json_object_get(doc, "options"), "checksum"));
	if (!ck || wshard_checksum_parse(ck, &m->options.checksum) < 0)
		return bad(m, err, "\"options\".\"checksum\" names no known algorithm");
	/* written since expert parallelism; absent in earlier manifests */
	x = json_object_get(json_object_get(doc, "options"), "expert_placement");
	if (x && (!json_is_string(x) ||
		  wshard_placement_parse(json_string_value(x), &m->options.placement) < 0))
		return bad(m, err, "\"options\".\"expert_placement\" is not linear or round_robin");
	return WSHARD_OK;
}

/* The options convert was given, as far as the plan depends on them. */
static void parse_options(struct wshard_manifest *m, json_t *doc)
{
	json_t *opts = json_object_get(doc, "options");
	const char *target = json_string_value(json_object_get(doc, "target"));
	enum wshard_checksum ck = m->options.checksum;
	uint64_t mfs;

	wshard_options_init(&m->options);
	m->options.tp = m->tp;
	m->options.pp = m->pp;
	m->options.pp_layers = m->pp_layers;
	if (target)
		m->options.target = target;
	m->options.attn_scales = json_is_true(json_object_get(opts, "attn_scales"));
	if (get_u64(opts, "max_file_size", &mfs) && mfs > 0)
		m->options.max_file_size = mfs;
	m->options.checksum = ck;
	m->options.expert_parallel = json_is_true(json_object_get(opts, "expert_parallel"));
	if (json_is_string(json_object_get(opts, "expert_placement")))
		(void)wshard_placement_parse(json_string_value(json_object_get(opts,
								"expert_placement")),
					     &m->options.placement);
	if (json_is_string(json_object_get(opts, "dtype")) &&
	    !wshard_dtype_parse(json_string_value(json_object_get(opts, "dtype")),
				&m->options.dtype))
		m->options.has_dtype = true;
	m->options.architecture = json_string_value(json_object_get(opts, "architecture"));
}

/* "source": its paths, and the names of the non-weight files copied. */
static enum wshard_err parse_source(struct wshard_manifest *m, json_t *doc,
				    struct wshard_error *err)
{
	json_t *so = json_object_get(doc, "source"), *copied = json_object_get(so, "copied"), *x;
	size_t i;

	m->source_path = json_string_value(json_object_get(so, "path"));
	m->source_realpath = json_string_value(json_object_get(so, "realpath"));
	m->source_repo_id = json_string_value(json_object_get(so, "repo_id"));
	m->source_revision = json_string_value(json_object_get(so, "revision"));
	m->source_commit = json_string_value(json_object_get(so, "commit"));
	m->copied = calloc(json_array_size(copied) + 1, sizeof(*m->copied));
	if (!m->copied)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	json_array_foreach(copied, i, x)
		if (json_is_string(x))
			m->copied[m->ncopied++] = json_string_value(x);
	copied = json_object_get(doc, "left_out");
	m->left_out = calloc(json_array_size(copied) + 1, sizeof(*m->left_out));
	if (!m->left_out)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	json_array_foreach(copied, i, x) {
		struct wshard_manifest_left_out *l = &m->left_out[m->nleft_out];

		l->name = json_string_value(json_object_get(x, "name"));
		l->reason = json_string_value(json_object_get(x, "reason"));
		if (l->name && l->reason)
			m->nleft_out++;
	}
	return WSHARD_OK;
}

/* "archives" (convert --archive): a rank, a plain name, size and checksum each. */
static enum wshard_err parse_archives(struct wshard_manifest *m, json_t *doc,
				      struct wshard_error *err)
{
	json_t *a = json_object_get(doc, "archives"), *x;
	size_t i;

	if (!a)
		return WSHARD_OK;
	if (!json_is_array(a))
		return bad(m, err, "\"archives\" is not an array");
	m->has_archives = true;
	m->archives = calloc(json_array_size(a) + 1, sizeof(*m->archives));
	if (!m->archives)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	json_array_foreach(a, i, x) {
		struct wshard_manifest_archive *ar = &m->archives[i];
		json_t *r = json_object_get(x, "rank");

		ar->name = json_string_value(json_object_get(x, "name"));
		ar->checksum = json_string_value(json_object_get(x, "checksum"));
		if (!json_is_integer(r) || json_integer_value(r) < 0 ||
		    (size_t)json_integer_value(r) >= m->nranks || !ar->name ||
		    strchr(ar->name, '/') || ar->name[0] == '.' ||
		    !get_u64(x, "size", &ar->size) || !ar->checksum)
			return bad(m, err, "an \"archives\" entry needs a rank, a plain name, size and checksum");
		ar->rank = (int)json_integer_value(r);
		m->narchives++;
	}
	return WSHARD_OK;
}

/* Reads and parses OUT's manifest into mf->doc. */
static enum wshard_err load_doc(struct manifest_full *mf, const char *out_dir,
				struct wshard_error *err)
{
	json_error_t jerr;
	char *text;
	size_t len;
	enum wshard_err rc;

	if (access(mf->pub.path, F_OK) < 0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s' is not a wshard output: no %s (an interrupted convert leaves none)",
					out_dir, WSHARD_MANIFEST);
	rc = wshard_manifest_read(mf->pub.path, &text, &len, err);
	if (rc)
		return rc;
	mf->doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!mf->doc)
		return wshard_error_set(err, WSHARD_EINVAL, "'%s': invalid JSON at line %d: %s",
					mf->pub.path, jerr.line, jerr.text);
	return WSHARD_OK;
}

enum wshard_err wshard_manifest_open(struct wshard_manifest **out_m, const char *out_dir,
				     struct wshard_error *err)
{
	struct manifest_full *mf = calloc(1, sizeof(*mf));
	struct wshard_manifest *m = &mf->pub;
	json_t *ranks, *x, *q;
	size_t i;
	enum wshard_err rc;

	*out_m = NULL;
	if (!mf || !(m->path = wshard_path_join(out_dir, WSHARD_MANIFEST))) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	rc = load_doc(mf, out_dir, err);
	if (!rc)
		rc = parse_head(m, mf->doc, err);
	if (rc)
		goto out;
	parse_options(m, mf->doc);
	m->architecture = json_string_value(json_object_get(mf->doc, "architecture"));
	m->target = json_string_value(json_object_get(mf->doc, "target"));
	m->target_checked = json_string_value(json_object_get(mf->doc, "target_checked"));
	m->rules = json_string_value(json_object_get(mf->doc, "rules"));
	m->expert_placement = json_string_value(json_object_get(
		json_object_get(mf->doc, "parallel"), "expert_placement"));
	x = json_object_get(json_object_get(mf->doc, "parallel"), "experts");
	m->experts = json_is_boolean(x) ? json_is_true(x) : -1;
	q = json_object_get(mf->doc, "quantization");
	m->quant_method = json_string_value(json_object_get(q, "quant_method"));
	m->quant_format = json_string_value(json_object_get(q, "format"));
	ranks = json_object_get(mf->doc, "ranks");
	if (!json_is_array(ranks) || json_array_size(ranks) == 0) {
		rc = bad(m, err, "no \"ranks\"");
		goto out;
	}
	m->nranks = json_array_size(ranks);
	m->ranks = calloc(m->nranks, sizeof(*m->ranks));
	if (!m->ranks) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	json_array_foreach(ranks, i, x)
		if ((rc = parse_rank(m, i, x, err)))
			goto out;
	rc = parse_source(m, mf->doc, err);
	if (!rc)
		rc = parse_archives(m, mf->doc, err);
out:
	if (rc) {
		wshard_manifest_free(m);
		return rc;
	}
	*out_m = m;
	return WSHARD_OK;
}

enum wshard_err wshard_manifest_json(const struct wshard_manifest *m, int rank,
				     const char *filter, char **out_text,
				     struct wshard_error *err)
{
	const struct manifest_full *mf = (const struct manifest_full *)m;
	json_t *ranks = json_object_get(mf->doc, "ranks"), *out, *t;
	size_t j;

	*out_text = NULL;
	out = rank >= 0 ? json_deep_copy(json_array_get(ranks, (size_t)rank))
			: json_incref(mf->doc);
	if (out && rank >= 0 && filter) {
		json_t *kept = json_array();

		json_array_foreach(json_object_get(out, "tensors"), j, t)
			if (fnmatch(filter, json_string_value(json_object_get(t, "name")), 0) == 0)
				json_array_append(kept, t);
		json_object_set_new(out, "tensors", kept);
	}
	*out_text = out ? json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(out);
	if (!*out_text)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	return WSHARD_OK;
}

void wshard_manifest_free(struct wshard_manifest *m)
{
	struct manifest_full *mf = (struct manifest_full *)m;
	size_t i;

	if (!m)
		return;
	for (i = 0; m->ranks && i < m->nranks; i++) {
		free(m->ranks[i].files);
		free(m->ranks[i].tensors);
	}
	free(m->ranks);
	free(m->pp_layers);
	free(m->archives);
	free(m->copied);
	free(m->left_out);
	free(m->path);
	json_decref(mf->doc);
	free(mf);
}
