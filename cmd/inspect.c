/*
 * inspect.c - wshard inspect: the tensors of a checkpoint, or the ranks
 * and parts of a wshard output (read from its wshard.json).
 */
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd.h"

static const char inspect_usage[] =
	"usage: wshard inspect [--json] [--filter GLOB] [--stage S] [--rank R] [--revision REV] PATH\n"
	"\n"
	"Lists the tensors of a checkpoint (a model directory, one .safetensors file,\n"
	"or a directory packed in a .tar, .tar.gz, .tar.zst, .tar.xz or .zip): name,\n"
	"dtype, shape, bytes and file, then a summary.  PATH may also be a repo id\n"
	"ORG/NAME in the local HuggingFace cache (never downloaded; a local path of the\n"
	"same name wins): the summary then names the revision, commit and snapshot.\n"
	"On a wshard output directory, shows its ranks, parts, bytes and source (with\n"
	"its repo id and commit when it was one); --rank R lists the tensors of rank R.\n"
	"An output of pipeline stages (convert --pp) names each rank by stage and\n"
	"tensor-parallel rank: --stage S shows stage S's ranks, --stage S --rank R lists\n"
	"the tensors of its rank R.\n"
	"\n"
	"options:\n"
	"      --json          print one JSON document\n"
	"      --filter GLOB   only tensors whose name matches GLOB (fnmatch)\n"
	"      --rank R        on a wshard output, list rank R's tensors\n"
	"      --stage S       on a wshard output of pipeline stages, stage S only\n"
	"      --revision REV  with a repo id: branch, tag or commit (default main)\n"
	"  -h, --help          show this help\n"
	"\n"
	"Exit status: 0 success, 2 usage error, 3 bad input, 4 I/O error,\n"
	"6 repo id or revision not in the HuggingFace cache.\n";

struct inspect_opts {
	bool json;
	const char *filter;
	int rank, stage;
	const char *revision;
	const char *path;
};

/* Prints a document the library wrote as JSON (rc: how that went), and
 * a newline; frees it. */
static int print_json(enum wshard_err rc, char *text, const struct wshard_error *err)
{
	if (rc)
		return report_error(err);
	fputs(text, stdout);
	putchar('\n');
	free(text);
	return EXIT_OK;
}

/* The summary lines after the tensor list of a checkpoint. */
static void print_summary(const struct wshard_catalog_info *cat, size_t shown,
			  uint64_t total, const uint64_t *by_dtype)
{
	char b[32];
	size_t i;
	int d;

	printf("\narchitecture: %s\n", cat->architecture ? cat->architecture : "(unknown)");
	if (cat->hf)
		printf("repo: %s  revision: %s  commit: %s\nsnapshot: %s\n", cat->hf->repo_id,
		       cat->hf->revision, cat->hf->commit, cat->hf->snapshot);
	printf("tensors: %zu\n", shown);
	printf("total: %llu bytes (%s)\n", (unsigned long long)total, wshard_format_bytes(total, b, sizeof(b)));
	for (d = 0; d < WSHARD_DTYPE_COUNT; d++)
		if (by_dtype[d])
			printf("  %s: %llu bytes\n", wshard_dtype_name((enum wshard_dtype)d),
			       (unsigned long long)by_dtype[d]);
	printf("files: %zu\n", cat->nfiles);
	for (i = 0; i < cat->nignored; i++)
		printf("ignored: %s (not in the weight_map)\n", cat->ignored[i]);
}

static int inspect_checkpoint(const struct inspect_opts *o)
{
	struct wshard_error err = { 0 };
	struct wshard_catalog *cat;
	struct wshard_catalog_info info;
	uint64_t by_dtype[WSHARD_DTYPE_COUNT] = { 0 }, total = 0;
	size_t i, shown = 0;
	char shape[200], *text;
	enum wshard_err rc;
	int ret;

	if (wshard_catalog_open_source(&cat, o->path, o->revision, &err))
		return report_error(&err);
	if (o->json) {
		rc = wshard_catalog_json(cat, o->filter, &text, &err);
		ret = print_json(rc, text, &err);
		wshard_catalog_free(cat);
		return ret;
	}
	wshard_catalog_info(cat, &info);
	for (i = 0; i < info.ntensors; i++) {
		struct wshard_tensor_info t;

		wshard_catalog_tensor(cat, i, &t);
		if (o->filter && fnmatch(o->filter, t.name, 0) != 0)
			continue;
		shown++;
		total += t.nbytes;
		by_dtype[t.dtype] += t.nbytes;
		wshard_format_shape(shape, sizeof(shape), t.shape, t.ndim);
		printf("%-60s %-6s %-18s %12llu  %s\n", t.name, wshard_dtype_name(t.dtype),
		       shape, (unsigned long long)t.nbytes, t.file);
	}
	print_summary(&info, shown, total, by_dtype);
	wshard_catalog_free(cat);
	return EXIT_OK;
}

/* A shape as compact JSON: "[3,4]". */
static const char *compact_shape(char *buf, size_t size, const uint64_t *shape, int ndim)
{
	size_t o = 0;
	int i;

	o += (size_t)snprintf(buf, size, "[");
	for (i = 0; i < ndim && o < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%llu", i ? "," : "",
				      (unsigned long long)shape[i]);
	if (o < size)
		snprintf(buf + o, size - o, "]");
	return buf;
}

/* Rank r of a wshard output: its parts, and with --rank its tensors. */
static void print_rank(const struct inspect_opts *o, const struct wshard_manifest *m,
		       size_t r)
{
	const struct wshard_manifest_rank *rk = &m->ranks[r];
	char b[32], shape[200];
	size_t j;

	if (m->pp > 1)
		printf("stage %d ", rk->stage);
	printf("rank %zu: %zu tensors, %s, %zu part%s, validated by %s\n",
	       m->pp > 1 ? (size_t)rk->tp_rank : r, rk->ntensors,
	       wshard_format_bytes(rk->bytes, b, sizeof(b)), rk->nfiles, rk->nfiles == 1 ? "" : "s",
	       rk->validated_by);
	for (j = 0; j < rk->nfiles; j++)
		printf("  %s %llu bytes %s\n", rk->files[j].name,
		       (unsigned long long)rk->files[j].size, rk->files[j].checksum);
	if (o->rank < 0)
		return;
	for (j = 0; j < rk->ntensors; j++) {
		const struct wshard_manifest_tensor *t = &rk->tensors[j];

		if (o->filter && fnmatch(o->filter, t->name, 0) != 0)
			continue;
		printf("%-60s %-6s %-18s %12lld  %s%s%s\n", t->name, wshard_dtype_name(t->dtype),
		       compact_shape(shape, sizeof(shape), t->shape, t->ndim),
		       (long long)(t->end - t->begin), rk->files[t->file].name,
		       t->quant ? "  quant: " : "", wshard_quant_role_name(t->quant));
	}
}

/* The source tensors left out, counted by reason (in first-seen order). */
static void print_left_out(const struct wshard_manifest *m)
{
	size_t i, j, n;

	for (i = 0; i < m->nleft_out; i++) {
		for (j = 0; j < i && strcmp(m->left_out[j].reason, m->left_out[i].reason); j++)
			;
		if (j < i)
			continue;
		for (n = 0, j = i; j < m->nleft_out; j++)
			n += strcmp(m->left_out[j].reason, m->left_out[i].reason) == 0;
		printf("left out: %zu source tensor%s (%s)\n", n, n == 1 ? "" : "s",
		       m->left_out[i].reason);
	}
}

/*
 * The index in m of the rank --stage and --rank name (-1: all), or -2
 * after a usage error: on an output of stages --rank is a
 * tensor-parallel rank and needs --stage.
 */
static int pick_rank(const struct inspect_opts *o, const struct wshard_manifest *m)
{
	if (o->stage >= m->pp) {
		fprintf(stderr, "wshard: '%s' has no stage %d (pp %d)\n", o->path, o->stage, m->pp);
		return -2;
	}
	if (o->rank < 0)
		return -1;
	if (m->pp > 1 && o->stage < 0) {
		fprintf(stderr, "wshard: '%s' has %d pipeline stages: --rank needs --stage S\n",
			o->path, m->pp);
		return -2;
	}
	if (o->rank >= m->tp) {
		fprintf(stderr, "wshard: '%s' has no rank %d (tp %d)\n", o->path, o->rank, m->tp);
		return -2;
	}
	return (o->stage > 0 ? o->stage : 0) * m->tp + o->rank;
}

static int inspect_output(const struct inspect_opts *o)
{
	struct wshard_error err = { 0 };
	struct wshard_manifest *m;
	char *text;
	size_t i;
	enum wshard_err rc;
	int ret, want;

	/* without the sources, which inspect does not show: a far smaller tree */
	if (wshard_manifest_open(&m, o->path, &err))
		return report_error(&err);
	want = pick_rank(o, m);
	if (want < -1) {
		wshard_manifest_free(m);
		return EXIT_USAGE;
	}
	if (o->json) {
		rc = wshard_manifest_json(m, want, o->filter, &text, &err);
		ret = print_json(rc, text, &err);
		wshard_manifest_free(m);
		return ret;
	}
	printf("wshard output: %s\n", o->path);
	printf("architecture: %s  target: %s%s%s%s  tp: %d  rules: %s\n", m->architecture,
	       m->target, m->target_checked ? " (checked against " : "",
	       m->target_checked ? m->target_checked : "", m->target_checked ? ")" : "",
	       m->tp, m->rules);
	if (m->expert_placement && m->experts == 0)
		printf("expert parallel: asked, but the model has no experts (the layout of tp alone)\n");
	else if (m->expert_placement) {
		const char *asked = wshard_placement_name(m->options.placement);
		bool same = asked && strcmp(asked, m->expert_placement) == 0;

		printf("expert parallel: %s placement, whole experts per rank%s%s%s\n",
		       m->expert_placement, same ? "" : " (asked: ", same ? "" : asked,
		       same ? "" : ")");
	}
	if (m->pp > 1) {
		printf("pipeline: %d stages, decoder layers per stage:", m->pp);
		for (i = 0; i < (size_t)m->pp; i++)
			printf("%s%d", i ? "," : " ", m->pp_layers[i]);
		printf("\n");
	}
	printf("source: %s\n", m->source_path);
	if (m->quant_method)
		printf("quantization: %s%s%s\n", m->quant_method, m->quant_format ? " " : "",
		       m->quant_format ? m->quant_format : "");
	if (m->source_repo_id)
		printf("source repo: %s  revision: %s  commit: %s\n", m->source_repo_id,
		       m->source_revision, m->source_commit);
	print_left_out(m);
	for (i = 0; i < m->narchives; i++)
		printf("archive of rank %d: %s %llu bytes %s\n", m->archives[i].rank,
		       m->archives[i].name, (unsigned long long)m->archives[i].size,
		       m->archives[i].checksum);
	for (i = 0; i < m->nranks; i++)
		if ((want < 0 || (size_t)want == i) && (o->stage < 0 || m->ranks[i].stage == o->stage))
			print_rank(o, m, i);
	wshard_manifest_free(m);
	return EXIT_OK;
}

/* A rank or stage number, 0 to 2^20, into *out.  Returns 0 or -1. */
static int parse_index(const char *s, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || !*s || v < 0 || v > 1 << 20)
		return -1;
	*out = (int)v;
	return 0;
}

int cmd_inspect(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "filter", required_argument, NULL, 'F' },
		{ "rank", required_argument, NULL, 'r' },
		{ "stage", required_argument, NULL, 's' },
		{ "revision", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct inspect_opts o = { .rank = -1, .stage = -1 };
	char manifest[4096];
	struct stat sb;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o.json = true;
			break;
		case 'F':
			o.filter = optarg;
			break;
		case 'r':
			if (parse_index(optarg, &o.rank) < 0)
				return usage_error("inspect", "--rank needs a rank number, not '%s'", optarg);
			break;
		case 's':
			if (parse_index(optarg, &o.stage) < 0)
				return usage_error("inspect", "--stage needs a stage number, not '%s'", optarg);
			break;
		case 'R':
			o.revision = optarg;
			break;
		case 'h':
			fputs(inspect_usage, stdout);
			return EXIT_OK;
		case ':':
			return usage_error("inspect", "option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("inspect", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		return usage_error("inspect", "expected one PATH");
	o.path = argv[optind];
	snprintf(manifest, sizeof(manifest), "%s/%s", o.path, WSHARD_MANIFEST);
	if (stat(manifest, &sb) == 0) {
		if (o.revision)
			return usage_error("inspect", "--revision needs a repo id, and '%s' is a wshard output",
					   o.path);
		return inspect_output(&o);
	}
	if (o.rank >= 0 || o.stage >= 0)
		return usage_error("inspect", "--%s needs a wshard output directory ('%s' has no %s)",
				   o.rank >= 0 ? "rank" : "stage", o.path, WSHARD_MANIFEST);
	return inspect_checkpoint(&o);
}
