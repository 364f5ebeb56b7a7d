/*
 * fileio.h - files written under a temporary name and renamed
 * into place, and whole reads and writes (fileio.c).  Not part of the
 * API.
 */
#ifndef WSHARD_FILEIO_H
#define WSHARD_FILEIO_H

#include <stdint.h>
#include <stddef.h>

#include "wshard.h"

/* Suffix of temporary files: ".NAME" WSHARD_TMP_SUFFIX beside NAME. */
#define WSHARD_TMP_SUFFIX ".wshard-tmp"

/*
 * A file written under a temporary name (".NAME.wshard-tmp" in the same
 * directory) and renamed into place by commit, so that a reader never
 * sees a partial file under the final name.
 */
struct wshard_file {
	char *path;		/* final name */
	char *tmp_path;
	int fd;
	unsigned flags;		/* WSHARD_FILE_* */
	uint64_t written;	/* bytes written so far (sum of writes) */
	uint64_t kicked;	/* written when writeback was last started */
};

/*
 * Flags of a file.  WSHARD_FILE_NOSYNC: commit renames without fsync (of
 * the file or its directory) and no writeback is started while writing;
 * the file is complete for every reader at once, but a power loss or a
 * kernel crash may leave it short or empty under its final name.
 */
#define WSHARD_FILE_NOSYNC 1u

/* Creates the temporary file.  Returns WSHARD_OK, WSHARD_EIO or WSHARD_ENOMEM. */
enum wshard_err wshard_file_create(struct wshard_file **out_f, const char *path,
				   unsigned flags, struct wshard_error *err);
/* Writes all of buf at offset off.  Returns WSHARD_OK or WSHARD_EIO
 * (ENOSPC included; the message names the final path). */
enum wshard_err wshard_file_pwrite(struct wshard_file *f, const void *buf,
				   size_t len, uint64_t off,
				   struct wshard_error *err);
/* fsyncs, renames to the final name, fsyncs the directory, frees f
 * (with WSHARD_FILE_NOSYNC only renames and frees).
 * Returns WSHARD_OK or WSHARD_EIO (then the temporary file is removed). */
enum wshard_err wshard_file_commit(struct wshard_file *f,
				   struct wshard_error *err);
/* Removes the temporary file and frees f; accepts NULL. */
void wshard_file_abort(struct wshard_file *f);

/* Reads exactly len bytes at off.  Returns WSHARD_OK or WSHARD_EIO. */
enum wshard_err wshard_pread_full(int fd, void *buf, size_t len, uint64_t off,
				  const char *path, struct wshard_error *err);

/* Writes all of buf at off.  Returns WSHARD_OK or WSHARD_EIO. */
enum wshard_err wshard_pwrite_full(int fd, const void *buf, size_t len,
				   uint64_t off, const char *path,
				   struct wshard_error *err);
/* dir + "/" + name, malloc'd; NULL when out of memory. */
char *wshard_path_join(const char *dir, const char *name);
/* The temporary name used for path, malloc'd. */
char *wshard_tmp_name(const char *path);
/* fsyncs the directory holding path. */
enum wshard_err wshard_fsync_dir(const char *path, struct wshard_error *err);
/* Reads a whole regular file of at most max bytes, NUL-terminated. */
enum wshard_err wshard_read_file(const char *path, uint64_t max, char **out_buf,
				 size_t *out_len, struct wshard_error *err);
/* Writes a whole file atomically (temporary name, fsync, rename); flags
 * are WSHARD_FILE_*. */
enum wshard_err wshard_write_file(const char *path, const void *buf, size_t len,
				  unsigned flags, struct wshard_error *err);
/* Copies a file atomically; flags are WSHARD_FILE_*. */
enum wshard_err wshard_copy_file(const char *src, const char *dst,
				 unsigned flags, struct wshard_error *err);

#endif /* WSHARD_FILEIO_H */
