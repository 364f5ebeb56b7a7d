/*
 * hooks.c - the test and benchmark switches (struct wshard_hooks), set
 * once by the program that embeds the library, and the fault injection
 * points they name.  The library itself reads no environment variable
 * for them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "hooks.h"

static struct wshard_hooks hooks = { .fault_process = -1 };
static int this_process = -1;

void wshard_hooks_set(const struct wshard_hooks *h)
{
	static const struct wshard_hooks off = { .fault_process = -1 };

	hooks = h ? *h : off;
}

const struct wshard_hooks *wshard_hooks_get(void)
{
	return &hooks;
}

void wshard_fault_set_process(int proc)
{
	this_process = proc;
}

bool wshard_fault_hit(const char *point)
{
	static char fired[16][32];
	static int nfired;
	int i;

	if (!hooks.fault || strcmp(hooks.fault, point) != 0)
		return false;
	if (hooks.fault_process >= 0 &&
	    hooks.fault_process != (this_process < 0 ? 0 : this_process))
		return false;
	for (i = 0; i < nfired; i++)
		if (strcmp(fired[i], point) == 0)
			return false;
	if (nfired < 16)
		snprintf(fired[nfired++], sizeof(fired[0]), "%s", point);
	return true;
}

enum wshard_err wshard_hook_bytes(const char *s, const char *env, uint64_t *out,
				  bool *out_set, struct wshard_error *err)
{
	char *end;
	unsigned long long n;

	*out = 0;
	*out_set = s && *s;
	if (!*out_set)
		return WSHARD_OK;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno)
		return wshard_error_set(err, WSHARD_EUSAGE, "invalid %s '%s': not a number of bytes",
					env, s);
	*out = n;
	return WSHARD_OK;
}
