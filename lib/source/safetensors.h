/*
 * safetensors.h - the strict safetensors reader and the layout of
 * the files convert writes (safetensors.c, st_read.c, st_header.c,
 * st_layout.c).  Not part of the API.
 */
#ifndef WSHARD_SAFETENSORS_H
#define WSHARD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "wshard.h"

/* The largest header the reader accepts (the reference reader's cap). */
#define WSHARD_ST_HEADER_MAX 100000000ULL

struct wshard_st_tensor {
	char *name;
	enum wshard_dtype dtype;
	int ndim;			/* 0 for a scalar */
	uint64_t shape[WSHARD_MAX_DIMS];
	uint64_t begin, end;		/* data_offsets, from the data start */
};

struct wshard_st_meta {
	char *key;
	char *value;
};

/* One parsed safetensors file (or stream inside another file). */
struct wshard_st {
	char *path;			/* for messages */
	int fd;				/* read-only; -1 when parsed from memory */
	uint64_t base;			/* offset of the stream inside fd */
	uint64_t size;			/* size of the stream */
	uint64_t data_start;		/* 8 + header length */
	size_t ntensors;
	struct wshard_st_tensor *tensors;	/* sorted by name */
	size_t nmeta;
	struct wshard_st_meta *meta;		/* in file order */
};

/*
 * Parses and validates a whole safetensors file held in memory (buf, len)
 * under every rule of OUTPUT-CONTRACT.md section 6.  path is used in
 * messages only.  On success *out_st has fd -1 and owns copies of all
 * strings.  Returns WSHARD_OK, WSHARD_EINVAL (message names path and the
 * reason) or WSHARD_ENOMEM.
 */
enum wshard_err wshard_st_parse(struct wshard_st **out_st, const void *buf,
				size_t len, const char *path,
				struct wshard_error *err);

/*
 * Opens path read-only and validates its header (no tensor data is read).
 * Returns WSHARD_OK, WSHARD_EINVAL, WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err wshard_st_open(struct wshard_st **out_st, const char *path,
			       struct wshard_error *err);

/*
 * Like wshard_st_open for a stream of size bytes at offset base of an
 * already open fd (a member of an uncompressed tar).  The fd is borrowed:
 * wshard_st_free does not close it.
 */
enum wshard_err wshard_st_open_fd(struct wshard_st **out_st, int fd,
				  uint64_t base, uint64_t size,
				  const char *path, struct wshard_error *err);

/*
 * Validates the header of a stream of size bytes of which only the first
 * head_len bytes (the length prefix and the JSON header) are at hand, as
 * when a member of a compressed archive is read once, front to back.  The
 * result has fd -1.  Returns as wshard_st_parse.
 */
enum wshard_err wshard_st_parse_head(struct wshard_st **out_st, const void *head,
				     size_t head_len, uint64_t size,
				     const char *path, struct wshard_error *err);

/* The tensor called name, or NULL (binary search). */
const struct wshard_st_tensor *wshard_st_find(const struct wshard_st *st,
					      const char *name);

/* The value of metadata key, or NULL. */
const char *wshard_st_meta_get(const struct wshard_st *st, const char *key);

/*
 * Reads len bytes at offset off of tensor t's data into buf (pread; the
 * rest of the file is not touched).  Returns WSHARD_OK, WSHARD_EINVAL if
 * the range is outside the tensor, or WSHARD_EIO (short read included).
 */
enum wshard_err wshard_st_read(const struct wshard_st *st,
			       const struct wshard_st_tensor *t, uint64_t off,
			       void *buf, size_t len, struct wshard_error *err);

/* Puts prefix before each of st's tensor names (a file whose tensors a
 * loader reads under a prefix); the names stay sorted, so wshard_st_find
 * takes the prefixed ones.  Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err wshard_st_prefix_names(struct wshard_st *st, const char *prefix,
				       struct wshard_error *err);

/* Closes (if owned) and frees st; accepts NULL. */
void wshard_st_free(struct wshard_st *st);

/*
 * Lays out a safetensors file for n tensors written in the given order:
 * sets each tensors[i].begin/end, and returns in *out_header a malloc'd
 * buffer of *out_header_len bytes holding the 8-byte length and the JSON
 * header (starting with '{', "__metadata__" first with "format": "pt"
 * plus meta[], then the tensors in order, padded with spaces to a
 * multiple of 8).  *out_data_len is the data section's size.  Returns
 * WSHARD_OK, WSHARD_EINVAL (overflow, duplicate name) or WSHARD_ENOMEM.
 */
enum wshard_err wshard_st_layout(struct wshard_st_tensor *tensors, size_t n,
				 const struct wshard_st_meta *meta, size_t nmeta,
				 char **out_header, size_t *out_header_len,
				 uint64_t *out_data_len,
				 struct wshard_error *err);

/*
 * Rows of a tensor seen as a matrix of rows x row bytes: shape[0], or 1
 * for a scalar and for a sub-byte tensor whose rows are not whole bytes
 * (such a tensor can only be copied whole).
 */
static inline uint64_t wshard_matrix_rows(const struct wshard_st_tensor *t)
{
	uint64_t bytes = t->end - t->begin;

	if (t->ndim == 0 || t->shape[0] == 0 || bytes % t->shape[0] != 0)
		return 1;
	return t->shape[0];
}

#endif /* WSHARD_SAFETENSORS_H */
