/*
 * wshard.c - the command-line entry point: dispatches to a subcommand.
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "convert", cmd_convert },
	{ "inspect", cmd_inspect },
	{ "verify", cmd_verify },
};

static const char usage[] =
	"usage: wshard <command> [options] ...\n"
	"\n"
	"Pre-shards HuggingFace safetensors checkpoints for tensor-parallel inference.\n"
	"\n"
	"commands:\n"
	"  convert   write per-rank pre-sharded safetensors and a manifest\n"
	"  verify    compare a converted output against its source\n"
	"  inspect   list the tensors of a checkpoint or of a converted output\n"
	"\n"
	"'wshard <command> --help' describes each command; 'wshard --version' prints the version.\n";

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage, stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("wshard %s\n", WSHARD_VERSION);
		return EXIT_OK;
	}
	hooks_from_env();
#ifdef M_MMAP_THRESHOLD
	/*
	 * Buffers of 256 KiB and more come from mmap and go back when freed.
	 * glibc would otherwise raise the threshold after the first such
	 * free and keep later ones in per-thread arenas: with one stream
	 * thread per CPU that held ~40 MiB more at 100k tensors.
	 */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
#endif
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "wshard: '%s' is not a wshard command\n", argv[1]);
	fputs(usage, stderr);
	return EXIT_USAGE;
}
