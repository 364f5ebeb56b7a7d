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

#include <jansson.h>

#include "cmd.h"

static const char inspect_usage[] =
	"usage: wshard inspect [--json] [--filter GLOB] [--rank R] [--revision REV] PATH\n"
	"\n"
	"Lists the tensors of a checkpoint (a model directory, one .safetensors file,\n"
	"or a directory packed in a .tar, .tar.gz, .tar.zst, .tar.xz or .zip): name,\n"
	"dtype, shape, bytes and file, then a summary.  PATH may also be a repo id\n"
	"ORG/NAME in the local HuggingFace cache (never downloaded; a local path of the\n"
	"same name wins): the summary then names the revision, commit and snapshot.\n"
	"On a wshard output directory, shows its ranks, parts, bytes and source (with\n"
	"its repo id and commit when it was one); --rank R lists the tensors of rank R.\n"
	"\n"
	"options:\n"
	"      --json          print one JSON document\n"
	"      --filter GLOB   only tensors whose name matches GLOB (fnmatch)\n"
	"      --rank R        on a wshard output, list rank R's tensors\n"
	"      --revision REV  with a repo id: branch, tag or commit (default main)\n"
	"  -h, --help          show this help\n"
	"\n"
	"Exit status: 0 success, 2 usage error, 3 bad input, 4 I/O error,\n"
	"6 repo id or revision not in the HuggingFace cache.\n";

struct inspect_opts {
	bool json;
	const char *filter;
	int rank;
	const char *revision;
	const char *path;
};

static json_t *shape_json(const uint64_t *shape, int ndim)
{
	json_t *a = json_array();
	int i;

	for (i = 0; i < ndim; i++)
		json_array_append_new(a, json_integer((json_int_t)shape[i]));
	return a;
}

static int inspect_checkpoint(const struct inspect_opts *o)
{
	struct wshard_error err = { 0 };
	struct wshard_catalog *cat;
	uint64_t by_dtype[WSHARD_DTYPE_COUNT] = { 0 }, total = 0;
	size_t i, shown = 0;
	json_t *doc = NULL, *rows = NULL;
	char shape[200], b[32];
	int d;

	if (wshard_catalog_open_source(&cat, o->path, o->revision, &err))
		return report_error(&err);
	if (o->json) {
		doc = json_object();
		rows = json_array();
	}
	for (i = 0; i < cat->ntensors; i++) {
		const struct wshard_src_tensor *t = &cat->tensors[i];

		if (o->filter && fnmatch(o->filter, t->name, 0) != 0)
			continue;
		shown++;
		total += t->nbytes;
		by_dtype[t->info->dtype] += t->nbytes;
		if (o->json) {
			json_array_append_new(rows, json_pack("{s:s,s:s,s:o,s:I,s:s}",
				"name", t->name, "dtype", wshard_dtype_name(t->info->dtype),
				"shape", shape_json(t->info->shape, t->info->ndim),
				"bytes", (json_int_t)t->nbytes, "file", cat->files[t->file].name));
			continue;
		}
		wshard_format_shape(shape, sizeof(shape), t->info->shape, t->info->ndim);
		printf("%-60s %-6s %-18s %12llu  %s\n", t->name, wshard_dtype_name(t->info->dtype),
		       shape, (unsigned long long)t->nbytes, cat->files[t->file].name);
	}
	if (o->json) {
		json_t *dt = json_object(), *ign = json_array();

		for (d = 0; d < WSHARD_DTYPE_COUNT; d++)
			if (by_dtype[d])
				json_object_set_new(dt, wshard_dtype_name((enum wshard_dtype)d),
						    json_integer((json_int_t)by_dtype[d]));
		for (i = 0; i < cat->nignored; i++)
			json_array_append_new(ign, json_string(cat->ignored[i]));
		json_object_set_new(doc, "path", json_string(cat->path));
		if (cat->hf) {
			json_object_set_new(doc, "repo_id", json_string(cat->hf->repo_id));
			json_object_set_new(doc, "revision", json_string(cat->hf->revision));
			json_object_set_new(doc, "commit", json_string(cat->hf->commit));
			json_object_set_new(doc, "snapshot", json_string(cat->hf->snapshot));
		}
		json_object_set_new(doc, "architecture",
				    cat->config.architecture ? json_string(cat->config.architecture)
							     : json_null());
		json_object_set_new(doc, "tensors", rows);
		json_object_set_new(doc, "tensor_count", json_integer((json_int_t)shown));
		json_object_set_new(doc, "total_bytes", json_integer((json_int_t)total));
		json_object_set_new(doc, "bytes_per_dtype", dt);
		json_object_set_new(doc, "file_count", json_integer((json_int_t)cat->nfiles));
		json_object_set_new(doc, "ignored_files", ign);
		json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(doc);
		wshard_catalog_free(cat);
		return EXIT_OK;
	}
	printf("\narchitecture: %s\n", cat->config.architecture ? cat->config.architecture : "(unknown)");
	if (cat->hf)
		printf("repo: %s  revision: %s  commit: %s\nsnapshot: %s\n", cat->hf->repo_id,
		       cat->hf->revision, cat->hf->commit, cat->hf->snapshot);
	printf("tensors: %zu\n", shown);
	printf("total: %llu bytes (%s)\n", (unsigned long long)total, human_bytes(total, b, sizeof(b)));
	for (d = 0; d < WSHARD_DTYPE_COUNT; d++)
		if (by_dtype[d])
			printf("  %s: %llu bytes\n", wshard_dtype_name((enum wshard_dtype)d),
			       (unsigned long long)by_dtype[d]);
	printf("files: %zu\n", cat->nfiles);
	for (i = 0; i < cat->nignored; i++)
		printf("ignored: %s (not in the weight_map)\n", cat->ignored[i]);
	wshard_catalog_free(cat);
	return EXIT_OK;
}

/* Reads OUT/wshard.json; NULL after printing why. */
static json_t *load_manifest(const char *path, int *out_ret)
{
	char file[4096], *text = NULL;
	size_t len = 0;
	json_error_t jerr;
	json_t *doc = NULL;
	struct wshard_error err = { 0 };

	snprintf(file, sizeof(file), "%s/%s", path, WSHARD_MANIFEST);
	/* without the sources, which inspect does not show: a far smaller tree */
	if (wshard_manifest_read(file, &text, &len, &err)) {
		fprintf(stderr, "wshard: %s\n", err.msg);
		*out_ret = err.code == WSHARD_ENOMEM ? EXIT_IO : EXIT_INPUT;
		return NULL;
	}
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!doc || !json_is_array(json_object_get(doc, "ranks")) ||
	    !json_is_integer(json_object_get(doc, "tp"))) {
		fprintf(stderr, "wshard: '%s': %s\n", file,
			doc ? "not a wshard manifest" : jerr.text);
		json_decref(doc);
		*out_ret = EXIT_INPUT;
		return NULL;
	}
	return doc;
}

static int inspect_output(const struct inspect_opts *o)
{
	json_t *doc, *ranks, *rk, *t, *f, *src;
	size_t i, j;
	int ret = EXIT_OK;
	char b[32];

	doc = load_manifest(o->path, &ret);
	if (!doc)
		return ret;
	ranks = json_object_get(doc, "ranks");
	if (o->rank >= 0 && (size_t)o->rank >= json_array_size(ranks)) {
		fprintf(stderr, "wshard: '%s' has no rank %d (tp %lld)\n", o->path, o->rank,
			(long long)json_integer_value(json_object_get(doc, "tp")));
		json_decref(doc);
		return EXIT_USAGE;
	}
	if (o->json) {
		json_t *out = o->rank >= 0 ? json_deep_copy(json_array_get(ranks, (size_t)o->rank))
					   : json_incref(doc);

		if (o->rank >= 0 && o->filter) {
			json_t *kept = json_array();

			json_array_foreach(json_object_get(out, "tensors"), j, t)
				if (fnmatch(o->filter, json_string_value(json_object_get(t, "name")), 0) == 0)
					json_array_append(kept, t);
			json_object_set_new(out, "tensors", kept);
		}
		json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(out);
		json_decref(doc);
		return EXIT_OK;
	}
	printf("wshard output: %s\n", o->path);
	printf("architecture: %s  target: %s  tp: %lld  rules: %s\n",
	       json_string_value(json_object_get(doc, "architecture")),
	       json_string_value(json_object_get(doc, "target")),
	       (long long)json_integer_value(json_object_get(doc, "tp")),
	       json_string_value(json_object_get(doc, "rules")));
	src = json_object_get(doc, "source");
	printf("source: %s\n", json_string_value(json_object_get(src, "path")));
	if (json_is_string(json_object_get(src, "repo_id")))
		printf("source repo: %s  revision: %s  commit: %s\n",
		       json_string_value(json_object_get(src, "repo_id")),
		       json_string_value(json_object_get(src, "revision")),
		       json_string_value(json_object_get(src, "commit")));
	json_array_foreach(json_object_get(doc, "archives"), i, f)
		printf("archive of rank %lld: %s %lld bytes %s\n",
		       (long long)json_integer_value(json_object_get(f, "rank")),
		       json_string_value(json_object_get(f, "name")),
		       (long long)json_integer_value(json_object_get(f, "size")),
		       json_string_value(json_object_get(f, "checksum")));
	json_array_foreach(ranks, i, rk) {
		if (o->rank >= 0 && (size_t)o->rank != i)
			continue;
		printf("rank %zu: %zu tensors, %s, %zu part%s, validated by %s\n", i,
		       json_array_size(json_object_get(rk, "tensors")),
		       human_bytes((uint64_t)json_integer_value(json_object_get(rk, "bytes")), b, sizeof(b)),
		       json_array_size(json_object_get(rk, "files")),
		       json_array_size(json_object_get(rk, "files")) == 1 ? "" : "s",
		       json_string_value(json_object_get(rk, "validated_by")));
		json_array_foreach(json_object_get(rk, "files"), j, f)
			printf("  %s %lld bytes %s\n", json_string_value(json_object_get(f, "name")),
			       (long long)json_integer_value(json_object_get(f, "size")),
			       json_string_value(json_object_get(f, "checksum")));
		if (o->rank < 0)
			continue;
		json_array_foreach(json_object_get(rk, "tensors"), j, t) {
			const char *name = json_string_value(json_object_get(t, "name"));
			char *shape;
			json_t *off = json_object_get(t, "data_offsets");

			if (!name || (o->filter && fnmatch(o->filter, name, 0) != 0))
				continue;
			shape = json_dumps(json_object_get(t, "shape"), JSON_COMPACT);
			printf("%-60s %-6s %-18s %12lld  %s\n", name,
			       json_string_value(json_object_get(t, "dtype")), shape ? shape : "?",
			       (long long)(json_integer_value(json_array_get(off, 1)) -
					   json_integer_value(json_array_get(off, 0))),
			       json_string_value(json_object_get(t, "file")));
			free(shape);
		}
	}
	json_decref(doc);
	return ret;
}

int cmd_inspect(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "filter", required_argument, NULL, 'F' },
		{ "rank", required_argument, NULL, 'r' },
		{ "revision", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct inspect_opts o = { .rank = -1 };
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
		case 'r': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || !*optarg || v < 0 || v > 1 << 20)
				return usage_error("inspect", "--rank needs a rank number, not '%s'", optarg);
			o.rank = (int)v;
			break;
		}
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
	if (o.rank >= 0)
		return usage_error("inspect", "--rank needs a wshard output directory ('%s' has no %s)",
				   o.path, WSHARD_MANIFEST);
	return inspect_checkpoint(&o);
}
