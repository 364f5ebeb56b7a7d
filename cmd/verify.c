/*
 * verify.c - wshard verify: compares a converted output with its source.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

static const char verify_usage[] =
	"usage: wshard verify [--source SRC] [--rank R] [--quick] [--json] OUT\n"
	"\n"
	"Checks the wshard output OUT: its manifest; every file's size and checksum;\n"
	"that each rank file is valid safetensors holding exactly the manifest's\n"
	"tensors; then, re-deriving the plan from the source with the options in the\n"
	"manifest, that the plan agrees and that every byte of every output tensor\n"
	"equals the source bytes it came from.  Prints one line per difference.\n"
	"\n"
	"options:\n"
	"      --source SRC    the source checkpoint, a directory, an archive or a\n"
	"                      repo id in the HuggingFace cache (default: the\n"
	"                      manifest's; a repo id there is found at its commit)\n"
	"      --rank R        verify rank R only (with pipeline stages: the\n"
	"                      manifest's rank, stage * tp + tensor-parallel rank)\n"
	"      --quick         stop after the checksum and structure checks (no source)\n"
	"      --json          print the report as JSON\n"
	"  -h, --help          show this help\n"
	"\n"
	"Exit status: 0 all match, 1 differences found, 2 usage error,\n"
	"3 OUT or SRC is not what it should be, 4 I/O error,\n"
	"6 the source's repo id or commit is not in the HuggingFace cache.\n";

static void print_json(const struct wshard_verify_opts *o,
		       const struct wshard_verify_result *res, double secs)
{
	size_t i;
	const char *c;

	printf("{\"out\": \"%s\", \"ok\": %s, \"quick\": %s, \"ranks\": %llu, \"tensors\": %llu, "
	       "\"bytes\": %llu, \"seconds\": %.3f, \"differences\": [", o->out_dir,
	       res->differences ? "false" : "true", o->quick ? "true" : "false",
	       (unsigned long long)res->ranks, (unsigned long long)res->tensors,
	       (unsigned long long)res->bytes, secs);
	for (i = 0; i < res->nlines; i++) {
		printf("%s\"", i ? ", " : "");
		for (c = res->lines[i]; *c; c++) {
			if (*c == '"' || *c == '\\')
				printf("\\%c", *c);
			else if ((unsigned char)*c < 0x20)
				printf("\\u%04x", *c);
			else
				putchar(*c);
		}
		putchar('"');
	}
	printf("]}\n");
}

/* verify's options.  Returns 0, -1 after --help, or a usage error's exit code. */
static int parse_args(int argc, char **argv, struct wshard_verify_opts *o, bool *out_json)
{
	static const struct option longopts[] = {
		{ "source", required_argument, NULL, 's' },
		{ "rank", required_argument, NULL, 'r' },
		{ "quick", no_argument, NULL, 'Q' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long v;
	int c;

	*out_json = false;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			o->source = optarg;
			break;
		case 'r':
			v = strtol(optarg, &end, 10);
			if (*end || !*optarg || v < 0 || v > 1 << 20)
				return usage_error("verify", "--rank needs a rank number, not '%s'", optarg);
			o->rank = (int)v;
			break;
		case 'Q':
			o->quick = true;
			break;
		case 'j':
			*out_json = true;
			break;
		case 'h':
			fputs(verify_usage, stdout);
			return -1;
		case ':':
			return usage_error("verify", "option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("verify", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		return usage_error("verify", "expected one OUT directory");
	o->out_dir = argv[optind];
	return 0;
}

/* The difference lines, the summary on stdout, and the count on stderr. */
static void print_text(const struct wshard_verify_opts *o,
		       const struct wshard_verify_result *res, double secs)
{
	char b[32];
	size_t i;

	for (i = 0; i < res->nlines; i++)
		printf("%s\n", res->lines[i]);
	printf("verified %llu rank%s, %llu tensors, %s in %.2fs (%.0f MB/s)%s: %s\n",
	       (unsigned long long)res->ranks, res->ranks == 1 ? "" : "s",
	       (unsigned long long)res->tensors, wshard_format_bytes(res->bytes, b, sizeof(b)), secs,
	       secs > 0 ? (double)res->bytes / secs / 1e6 : 0.0,
	       o->quick ? " (quick: no source comparison)" : "",
	       res->differences ? "DIFFERENCES FOUND" : "OK");
	if (res->differences)
		fprintf(stderr, "wshard: %llu difference%s found in '%s'\n",
			(unsigned long long)res->differences, res->differences == 1 ? "" : "s",
			o->out_dir);
}

int cmd_verify(int argc, char **argv)
{
	struct wshard_verify_opts o = { .rank = -1 };
	struct wshard_verify_result res = { 0 };
	struct wshard_error err = { 0 };
	struct wshard_comm *comm = NULL;
	double start = now_seconds(), secs;
	bool json;
	int ret;

	ret = parse_args(argc, argv, &o, &json);
	if (ret)
		return ret < 0 ? EXIT_OK : ret;
	if (wshard_comm_init(&comm, &argc, &argv, &err))
		return report_error(&err);
	wshard_verify(&o, comm, &res, &err);
	secs = now_seconds() - start;
	ret = exit_code(err.code);
	if (wshard_comm_rank(comm) != 0)
		goto out;
	if (err.code && err.code != WSHARD_EMISMATCH)
		report_error(&err);
	else if (json)
		print_json(&o, &res, secs);
	else
		print_text(&o, &res, secs);
out:
	wshard_verify_result_release(&res);
	wshard_comm_free(comm);
	return ret;
}
