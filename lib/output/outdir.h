/*
 * outdir.h - convert's output directory: recognising what wshard wrote
 * there, removing an earlier output, and the lock that keeps two converts
 * out of one directory.  Not part of the API.
 */
#ifndef WSHARD_OUTDIR_H
#define WSHARD_OUTDIR_H

#include <stdbool.h>
#include <stddef.h>

#include "wshard.h"

/* Lock file held in OUT while a convert runs. */
#define WSHARD_LOCK ".wshard.lock"

/*
 * Creates or checks the directory out, takes its lock into *out_lock_fd
 * (-1 when not taken) and removes an earlier wshard output from it (with
 * force; without, a non-empty out is refused).  extra[] (n names) are the
 * non-weight files this convert copies.  Anything in out that wshard did
 * not write is refused, and nothing is deleted.  Returns WSHARD_OK,
 * WSHARD_EEXIST, WSHARD_EBUSY, WSHARD_EIO or WSHARD_ENOMEM; on error the
 * lock may be held all the same: outdir_unlock releases it.
 */
enum wshard_err outdir_prepare(const char *out, char *const *extra, size_t n,
			       bool force, int *out_lock_fd,
			       struct wshard_error *err);

/* Removes the lock file and closes *lock_fd (when >= 0); sets it to -1. */
void outdir_unlock(const char *out, int *lock_fd);

#endif /* WSHARD_OUTDIR_H */
