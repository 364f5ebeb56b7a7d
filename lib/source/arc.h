/*
 * arc.h - a checkpoint inside an archive (libarchive).  Not part of
 * the API.
 *
 * An uncompressed tar is read in place: every member's data has an offset
 * in the file, so tensors are read with pread like plain files.  A
 * compressed archive (tar.gz, tar.zst, tar.xz, zip) can only be read
 * front to back: the scan keeps each .safetensors member's header and the
 * small files in memory, and the tensor data is read later in one more
 * sequential pass, members in archive order, offsets only increasing.
 */
#ifndef WSHARD_ARCHIVE_H
#define WSHARD_ARCHIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "wshard.h"

struct arc_member {
	char *name;		/* below the archive's single top folder, if any */
	uint64_t size;
	uint64_t offset;	/* data offset in the file (in-place archives) */
	char *head;		/* compressed: .safetensors length prefix + header */
	size_t head_len;
	char *data;		/* compressed: a small member's whole content */
};

struct wshard_archive {
	char *path;
	int fd;			/* the archive file, read-only */
	bool in_place;		/* uncompressed tar: members read with pread */
	size_t nmembers;
	struct arc_member *members;	/* in archive order */
	/* the sequential reader of a compressed archive */
	void *reader;		/* struct archive * */
	long cur;		/* member it is in, -1 before the first */
	uint64_t pos;		/* bytes of it consumed */
	uint64_t expanded;	/* decompressed bytes so far */
	uint64_t file_size;
};

/* True when path names a file wshard reads as an archive (by its suffix). */
bool arc_is_archive(const char *path);

/*
 * Scans the archive at path: every entry checked (no absolute path, no
 * "..", no link leaving it, no device or fifo, no duplicate, sizes that
 * agree with the data, no decompression beyond 100:1).  Returns
 * WSHARD_OK, WSHARD_EINVAL (the message names the entry), WSHARD_EIO or
 * WSHARD_ENOMEM.
 */
enum wshard_err arc_open(struct wshard_archive **out_arc, const char *path,
			 struct wshard_error *err);

/* Index of the member called name, or -1. */
long arc_find(const struct wshard_archive *arc, const char *name);

/*
 * Reads len bytes at offset off of member m.  In place: any order.
 * Compressed: offsets must not go back (members in archive order).
 * Returns WSHARD_OK, WSHARD_EIO or WSHARD_EINVAL.
 */
enum wshard_err arc_read(struct wshard_archive *arc, size_t m, uint64_t off,
			 void *buf, size_t len, struct wshard_error *err);

/* A whole small member in a malloc'd NUL-terminated buffer (at most max bytes). */
enum wshard_err arc_slurp(struct wshard_archive *arc, size_t m, uint64_t max,
			  char **out_buf, size_t *out_len, struct wshard_error *err);

/* Frees arc; accepts NULL. */
void arc_free(struct wshard_archive *arc);

#endif /* WSHARD_ARCHIVE_H */
