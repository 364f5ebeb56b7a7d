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

const char *human_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, len, "%.2f %s", v, unit[u]);
	return buf;
}

double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void progress_init(struct progress *p, bool quiet)
{
	p->enabled = !quiet && isatty(STDERR_FILENO);
	p->start = p->last = now_seconds();
	p->phase = NULL;
}

void progress_update(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
	struct progress *p = ctx;
	double t = now_seconds(), rate, eta;
	char a[32], b[32];

	if (!p->enabled)
		return;
	if (p->phase && strcmp(p->phase, phase)) {	/* a new phase: its own rate */
		p->start = t;
		p->last = 0;
	}
	p->phase = phase;
	if (t - p->last < 0.2 && done < total)
		return;
	p->last = t;
	fprintf(stderr, "\r%s %s / %s", phase, human_bytes(done, a, sizeof(a)),
		human_bytes(total, b, sizeof(b)));
	if (t - p->start >= 0.1) {	/* else the rate means nothing yet */
		rate = (double)done / (t - p->start);
		eta = rate > 0 ? (double)(total - done) / rate : 0;
		fprintf(stderr, "  %.0f MB/s  ETA %.0fs", rate / 1e6, eta);
	}
	fprintf(stderr, "\033[K");
	fflush(stderr);
}

void progress_done(struct progress *p)
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
	if (getenv("WSHARD_STREAM_THREADS"))
		h.stream_threads = atoi(getenv("WSHARD_STREAM_THREADS"));
	wshard_hooks_set(&h);
}
