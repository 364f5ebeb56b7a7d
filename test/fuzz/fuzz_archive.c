/*
 * fuzz_archive.c - libFuzzer harness for checkpoints inside archives:
 * wshard_catalog_open on one archive file built from the input, then
 * every tensor read through wshard_catalog_read and every non-weight file
 * copied out, as convert does.
 *
 * Framing: byte 0 picks the suffix (and so the reader): 0 .tar (read in
 * place), 1 .tar.gz, 2 .tar.zst, 3 .tar.xz, 4 .zip (byte 0 modulo 5); the
 * rest is the archive file.  Archives come from downloads, so the scan
 * (paths, links, sizes, the 100:1 decompression limit) and the readers
 * behind it must hold against any bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/fileio.h"
#include "source/catalog.h"
#include "fuzz_util.h"
#include "fuzz_check.h"

static const char *const suffixes[] = { ".tar", ".tar.gz", ".tar.zst", ".tar.xz", ".zip" };

static char dir[4200];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "%s", fuzz_scratch());
	return 0;
}

struct item {
	uint32_t file;
	long member;
	uint64_t offset, nbytes;
};

/* Archive order: members in the order they come, offsets increasing. */
static int cmp_item(const void *a, const void *b)
{
	const struct item *x = a, *y = b;

	if (x->member != y->member)
		return x->member < y->member ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void read_all(const struct wshard_catalog *cat)
{
	struct item *items = calloc(cat->ntensors + 1, sizeof(*items));
	char *buf = malloc(1 << 16);
	size_t i;

	CHECK(items && buf);
	for (i = 0; i < cat->ntensors; i++) {
		const struct wshard_src_tensor *t = &cat->tensors[i];

		CHECK(t->file < cat->nfiles);
		CHECK(t->nbytes == t->info->end - t->info->begin);
		items[i].file = t->file;
		items[i].member = cat->files[t->file].member;
		items[i].offset = t->offset;
		items[i].nbytes = t->nbytes;
	}
	qsort(items, cat->ntensors, sizeof(*items), cmp_item);
	for (i = 0; i < cat->ntensors; i++) {
		uint64_t done = 0;

		while (done < items[i].nbytes) {
			struct wshard_error err = { 0 };
			size_t len = items[i].nbytes - done < (1 << 16) ?
				(size_t)(items[i].nbytes - done) : (size_t)1 << 16;

			if (wshard_catalog_read(cat, items[i].file, items[i].offset + done, buf,
						len, &err)) {
				CHECK(err.msg[0]);
				goto out;	/* a compressed archive cannot go back */
			}
			done += len;
		}
	}
out:
	free(buf);
	free(items);
}

static void copy_extras(const struct wshard_catalog *cat)
{
	char dst[4300];
	size_t i;

	fuzz_path(dst, sizeof(dst), dir, "extra.out");
	for (i = 0; i < cat->nextra; i++) {
		struct wshard_error err = { 0 };

		CHECK(cat->extra[i] && !strchr(cat->extra[i], '/'));
		if (wshard_catalog_copy_extra(cat, i, dst, WSHARD_FILE_NOSYNC, &err))
			CHECK(err.msg[0]);
		fuzz_unlink(dst);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wshard_catalog *cat = NULL;
	struct wshard_error err = { 0 };
	char name[64], path[4300];
	enum wshard_err rc;

	if (size < 1)
		return 0;
	snprintf(name, sizeof(name), "model%s", suffixes[data[0] % 5]);
	fuzz_path(path, sizeof(path), dir, name);
	fuzz_write(path, data + 1, size - 1);
	rc = wshard_catalog_open(&cat, path, &err);
	if (rc) {
		CHECK(!cat);
		CHECK(rc == WSHARD_EINVAL || rc == WSHARD_EIO || rc == WSHARD_ENOMEM);
		CHECK(err.msg[0]);
	} else {
		read_all(cat);
		copy_extras(cat);
		wshard_catalog_free(cat);
	}
	fuzz_unlink(path);
	return 0;
}
