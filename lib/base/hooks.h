/*
 * hooks.h - the test and benchmark hooks inside the library
 * (hooks.c).  Not part of the API.
 */
#ifndef WSHARD_HOOKS_H
#define WSHARD_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

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

/*
 * A hook's byte count or offset s (a decimal number; NULL or empty: 0,
 * and *out_set false).  Anything else gives WSHARD_EUSAGE naming env, the
 * variable the program reads it from.
 */
enum wshard_err wshard_hook_bytes(const char *s, const char *env, uint64_t *out,
				  bool *out_set, struct wshard_error *err);

#endif /* WSHARD_HOOKS_H */
