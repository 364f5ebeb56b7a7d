/*
 * hooks.h - the test and benchmark hooks inside the library
 * (hooks.c).  Not part of the API.
 */
#ifndef WSHARD_HOOKS_H
#define WSHARD_HOOKS_H

#include <stdbool.h>

#include "wshard.h"

/* The hooks wshard_hooks_set last set (all off before). */
const struct wshard_hooks *wshard_hooks_get(void);
/*
 * Fault injection for tests: true when the hooks' fault names point and,
 * if they name a process, this is that process.  Each point fires once
 * per process.
 */
bool wshard_fault_hit(const char *point);
/* Records this process's index for the hooks' fault_process. */
void wshard_fault_set_process(int proc);

#endif /* WSHARD_HOOKS_H */
