/*
 * verify_diff.c - what every check of a verify reports through: the
 * difference lines, from any thread, and a manifest found not valid; and
 * which ranks this process checks.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "stream/stream.h"
#include "verify_state.h"

void verify_diff(struct verify *v, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	/* names come from files: no control character may forge a line */
	for (n = 0; line[n]; n++)
		if ((unsigned char)line[n] < 0x20 || line[n] == 0x7f)
			line[n] = '?';
	line[n++] = '\n';
	/* the hash thread and the byte comparison both report */
	pthread_mutex_lock(&v->lock);
	v->ndiff++;
	if (v->lines_len + n + 1 > v->lines_cap) {
		size_t cap = (v->lines_cap + n + 1) * 2;
		char *p = realloc(v->lines, cap);

		if (!p) {
			pthread_mutex_unlock(&v->lock);
			return;
		}
		v->lines = p;
		v->lines_cap = cap;
	}
	memcpy(v->lines + v->lines_len, line, n);
	v->lines_len += n;
	v->lines[v->lines_len] = '\0';
	pthread_mutex_unlock(&v->lock);
}

bool verify_wanted(const struct verify *v, int r)
{
	return (v->opt->rank < 0 || v->opt->rank == r) && stream_owns(v->nprocs, v->proc, r);
}

enum wshard_err verify_bad(struct verify *v, struct wshard_error *err, const char *what)
{
	return wshard_error_set(err, WSHARD_EINVAL, "'%s': not a valid wshard manifest: %s",
				v->m->path, what);
}
