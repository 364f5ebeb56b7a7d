/*
 * archive_out.h - one rank's output packed in one archive (libarchive),
 * so that each node fetches only its own.  Not part of the API.
 */
#ifndef WSHARD_ARCHIVE_OUT_H
#define WSHARD_ARCHIVE_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "wshard.h"
#include "base/hash.h"

/* Writes rank r's archive name in fmt ("rank-R.tar", ...) into out (n bytes). */
void wshard_archive_name(char *out, size_t n, int r, enum wshard_archive_fmt fmt);

/* One entry, stored at the archive root under name. */
struct arcout_entry {
	const char *name;
	const char *path;	/* the file holding its bytes, or NULL: */
	const void *buf;	/* these len bytes */
	size_t len;
	const char *checksum;	/* path's expected digest (algorithm algo), or NULL */
};

/*
 * Writes the n entries, in the given order, into an archive of format fmt
 * at path: under a temporary name, synced (unless flags hold
 * WSHARD_FILE_NOSYNC) and renamed once complete.  The
 * bytes depend on the entries' names and contents only: pax-restricted
 * tar (plain ustar unless a name or size needs more), mtime 0, uid and gid
 * 0, no user or group name, mode 0644; zstd level 3 or gzip level 6 with
 * no timestamp and no file name in the header.  *out_size and out_checksum
 * (WSHARD_DIGEST_HEX bytes, algorithm algo) describe the archive written.
 * An entry with a checksum must hash to it as it is archived, so that the
 * archive holds the bytes that were validated.  Returns WSHARD_OK,
 * WSHARD_EIO (nothing is left at path or its temporary name; a file that
 * changed included) or WSHARD_ENOMEM.
 */
enum wshard_err arcout_write(const char *path, enum wshard_archive_fmt fmt,
			     const struct arcout_entry *entries, size_t n,
			     enum wshard_checksum algo, unsigned flags,
			     uint64_t *out_size, char *out_checksum,
			     struct wshard_error *err);

#endif /* WSHARD_ARCHIVE_OUT_H */
