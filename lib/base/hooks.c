/*
 * hooks.c - the test and benchmark switches (struct wshard_hooks), set
 * once by the program that embeds the library, and the fault injection
 * points they name.  The library itself reads no environment variable
 * for them.
 */
#include <stdio.h>
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
