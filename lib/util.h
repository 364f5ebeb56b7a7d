/*
 * util.h - MIN and MAX, and the clocks that time
 * phases.  Not part of the API.
 */
#ifndef WSHARD_UTIL_H
#define WSHARD_UTIL_H

#include <time.h>

#define WSHARD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define WSHARD_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Seconds on clock id (0 where it cannot be read). */
static inline double wshard_clock_seconds(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds on the monotonic clock, for timing phases. */
static inline double wshard_seconds(void)
{
	return wshard_clock_seconds(CLOCK_MONOTONIC);
}

#endif /* WSHARD_UTIL_H */
