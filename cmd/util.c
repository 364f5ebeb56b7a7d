/*
 * util.c - exit codes, messages and the progress meter of the CLI.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"

int exit_code(enum wshard_err code)
{
	switch (code) {
	case WSHARD_OK: return EXIT_OK;
	case WSHARD_EMISMATCH: return EXIT_DIFFER;
	case WSHARD_EUSAGE:
	case WSHARD_EEXIST: return EXIT_USAGE;
	case WSHARD_EINVAL: return EXIT_INPUT;
	case WSHARD_EIO:
	case WSHARD_ENOMEM:
	case WSHARD_EBUSY: return EXIT_IO;
	case WSHARD_EVALIDATE:
	case WSHARD_ENODEV: return EXIT_VALIDATE;
	case WSHARD_ENOTCACHED: return EXIT_NOTCACHED;
	}
	return EXIT_IO;
}

int report_error(const struct wshard_error *err)
{
	fprintf(stderr, "wshard: %s\n", err->msg[0] ? err->msg : wshard_strerror(err->code));
	return exit_code(err->code);
}

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "wshard %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see 'wshard %s --help')\n", cmd);
	return EXIT_USAGE;
}

int parse_int(const char *s, int *out)
{
	char *end;
	long v;

	*out = 0;
	if (!s || !*s)
		return -1;
	v = strtol(s, &end, 10);
	if (*end || v <= 0 || v > 1 << 20)
		return -1;
	*out = (int)v;
	return 0;
}

double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void progress_init(struct progress_meter *p, bool quiet)
{
	p->enabled = !quiet && isatty(STDERR_FILENO);
	p->since = p->drawn = now_seconds();
	p->shown = NULL;
}

void progress_update(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
	struct progress_meter *p = ctx;
	double t = now_seconds(), rate, eta;
	char a[32], b[32];

	if (!p->enabled)
		return;
	if (p->shown && strcmp(p->shown, phase)) {	/* a new phase: its own rate */
		p->since = t;
		p->drawn = 0;
	}
	p->shown = phase;
	if (t - p->drawn < 0.2 && done < total)
		return;
	p->drawn = t;
	fprintf(stderr, "\r%s %s / %s", phase, wshard_format_bytes(done, a, sizeof(a)),
		wshard_format_bytes(total, b, sizeof(b)));
	if (t - p->since >= 0.1) {	/* else the rate means nothing yet */
		rate = (double)done / (t - p->since);
		eta = rate > 0 ? (double)(total - done) / rate : 0;
		fprintf(stderr, "  %.0f MB/s  ETA %.0fs", rate / 1e6, eta);
	}
	fprintf(stderr, "\033[K");
	fflush(stderr);
}

void progress_done(struct progress_meter *p)
{
	if (p->enabled)
		fprintf(stderr, "\r\033[K");
}

void hooks_from_env(void)
{
	struct wshard_hooks h = { .fault_process = -1 };
	const char *proc = getenv("WSHARD_FAULT_PROCESS");

	h.fault = getenv("WSHARD_FAULT");
	if (proc && *proc)
		h.fault_process = atoi(proc);
	h.hold = getenv("WSHARD_TEST_HOLD");
	h.no_checksums = getenv("WSHARD_BENCH_NO_CHECKSUMS") != NULL;
	h.inject_validate = getenv("WSHARD_INJECT_VALIDATE");
	h.validate_late = getenv("WSHARD_VALIDATE_LATE");
	if (getenv("WSHARD_STREAM_THREADS"))
		h.stream_threads = atoi(getenv("WSHARD_STREAM_THREADS"));
	wshard_hooks_set(&h);
}
