/*
 * cmd.h - what the subcommands share: exit codes, messages, sizes.
 */
#ifndef WSHARD_CMD_H
#define WSHARD_CMD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "wshard.h"

/* Exit codes, documented in wshard(1). */
enum {
	EXIT_OK = 0,
	EXIT_DIFFER = 1,	/* verify found differences */
	EXIT_USAGE = 2,
	EXIT_INPUT = 3,		/* bad or unsupported input */
	EXIT_IO = 4,		/* I/O or system error */
	EXIT_VALIDATE = 5,	/* round-trip validation failed, or no GPU for --validate gpu */
	EXIT_NOTCACHED = 6,	/* a repo id not (wholly) in the HuggingFace cache */
};

int cmd_convert(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);

/* The exit code for a library error. */
int exit_code(enum wshard_err code);

/* Prints "wshard: MESSAGE" to stderr and returns exit_code(err->code). */
int report_error(const struct wshard_error *err);

/* Prints "wshard CMD: MESSAGE (see 'wshard CMD --help')" to stderr; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Parses a positive decimal integer; returns 0 or -1. */
int parse_int(const char *s, int *out);

/*
 * Sets the library's test and benchmark hooks (struct wshard_hooks) from
 * WSHARD_FAULT, WSHARD_FAULT_PROCESS, WSHARD_TEST_HOLD,
 * WSHARD_BENCH_NO_CHECKSUMS, WSHARD_INJECT_VALIDATE, WSHARD_VALIDATE_LATE
 * and WSHARD_STREAM_THREADS (test/ and scripts/bench set them).
 */
void hooks_from_env(void);

/* Seconds since an arbitrary start (monotonic). */
double now_seconds(void);

/* A one-line progress meter on stderr, redrawn only on a terminal. */
struct progress_meter {
	bool enabled;
	double since;		/* when the shown phase began */
	double drawn;		/* when the line was last drawn */
	const char *shown;	/* the phase last shown */
};
void progress_init(struct progress_meter *p, bool quiet);
void progress_update(void *ctx, const char *phase, uint64_t done, uint64_t total);
void progress_done(struct progress_meter *p);

#endif
