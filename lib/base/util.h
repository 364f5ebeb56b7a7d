/*
 * util.h - MIN and MAX, the clocks that time phases, sorting that skips
 * input already in order, the threads a CPU count allows, and decimal
 * digits without printf.  Not part of the API.
 */
#ifndef WSHARD_UTIL_H
#define WSHARD_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define WSHARD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define WSHARD_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Room for any uint64_t in decimal. */
#define WSHARD_UTOA_MAX 20

/*
 * v in decimal, its last digit just before end; returns its first digit
 * (there are end minus that many).  For hot paths, where snprintf showed
 * in profiles (a label or a name formatted per tensor).
 */
static inline char *wshard_utoa(uint64_t v, char *end)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

/* Seconds on clock id (0 where it cannot be read). */
static inline double wshard_clock_seconds(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Threads for work that one per CPU speeds up: the online CPUs, 1 to max. */
static inline int wshard_cpu_threads(int max)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > max ? max : (int)n;
}

/* Seconds on the monotonic clock, for timing phases. */
static inline double wshard_seconds(void)
{
	return wshard_clock_seconds(CLOCK_MONOTONIC);
}

/*
 * qsort and qsort_r, after a pass that leaves base as it is when it is in
 * order already: the names of an index and of a header usually are, and
 * at 100k tensors sorting them again (names sharing long prefixes) was a
 * visible share of a run.
 */
static inline void wshard_sort(void *base, size_t n, size_t size,
			       int (*cmp)(const void *, const void *))
{
	const char *p = base;
	size_t i;

	for (i = 1; i < n; i++)
		if (cmp(p + (i - 1) * size, p + i * size) > 0) {
			qsort(base, n, size, cmp);
			return;
		}
}

static inline void wshard_sort_r(void *base, size_t n, size_t size,
				 int (*cmp)(const void *, const void *, void *), void *ctx)
{
	const char *p = base;
	size_t i;

	for (i = 1; i < n; i++)
		if (cmp(p + (i - 1) * size, p + i * size, ctx) > 0) {
			qsort_r(base, n, size, cmp, ctx);
			return;
		}
}

#endif /* WSHARD_UTIL_H */
