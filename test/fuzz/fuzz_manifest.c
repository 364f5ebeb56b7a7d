/*
 * fuzz_manifest.c - libFuzzer harness for the manifest reader of verify:
 * the input becomes OUT/wshard.json in a directory that holds no rank
 * files, and wshard_verify --quick runs on it with a one-process
 * communicator.  It must return an error or differences, never crash;
 * and since no file the manifest could name exists (wshard.json itself
 * cannot hold its own checksum), it may return OK only for a manifest
 * that lists no file at all.  Also: wshard_manifest_strip_sources (which
 * verify reads through) keeps the text's length and newlines, and turns
 * JSON into the same JSON less its "sources" members.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/comm.h"
#include "output/manifest_read.h"
#include "fuzz_util.h"
#include "fuzz_check.h"

static struct wshard_comm *comm;
static char out_dir[4200], manifest[4300];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct wshard_error err = { 0 };

	/* One process, never MPI, even when started under a launcher. */
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMIX_RANK");
	unsetenv("PMI_RANK");
	if (wshard_comm_init(&comm, argc, argv, &err)) {
		fprintf(stderr, "fuzz_manifest: %s\n", err.msg);
		abort();
	}
	CHECK(wshard_comm_size(comm) == 1 && !wshard_comm_is_mpi(comm));
	fuzz_path(out_dir, sizeof(out_dir), fuzz_scratch(), "out");
	if (mkdir(out_dir, 0755) < 0)
		fuzz_die(out_dir);
	fuzz_path(manifest, sizeof(manifest), out_dir, WSHARD_MANIFEST);
	return 0;
}

/* Files the manifest lists, counted leniently (NULL when unreadable). */
static size_t listed_files(const uint8_t *data, size_t size)
{
	json_t *doc = json_loadb((const char *)data, size, 0, NULL);
	json_t *ranks = json_object_get(doc, "ranks"), *r;
	size_t i, n = 0;

	json_array_foreach(ranks, i, r)
		n += json_array_size(json_object_get(r, "files"));
	json_decref(doc);
	return n;
}

/* v without any member named "sources", at any depth (a new reference). */
static json_t *without_sources(json_t *v)
{
	json_t *c, *x;
	const char *k;
	size_t i;

	if (json_is_object(v)) {
		c = json_object();
		json_object_foreach(v, k, x)
			if (strcmp(k, "sources") != 0)
				json_object_set_new(c, k, without_sources(x));
		return c;
	}
	if (json_is_array(v)) {
		c = json_array();
		json_array_foreach(v, i, x)
			json_array_append_new(c, without_sources(x));
		return c;
	}
	return json_incref(v);
}

static size_t count_newlines(const char *s, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += s[i] == '\n';
	return k;
}

/*
 * What verify reads: the text with its "sources" removed is no longer and
 * keeps every newline, and when the text is JSON, it is the same JSON
 * less every "sources" member.
 */
static void check_strip(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	json_t *a, *b, *want;
	size_t m;

	if (!s)
		return;
	memcpy(s, data, size);
	m = wshard_manifest_strip_sources(s, size);
	CHECK(m <= size);
	CHECK(count_newlines(s, m) == count_newlines((const char *)data, size));
	a = json_loadb((const char *)data, size, 0, NULL);
	if (a) {
		b = json_loadb(s, m, 0, NULL);
		want = without_sources(a);
		CHECK(b && json_equal(b, want));
		json_decref(b);
		json_decref(want);
		json_decref(a);
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wshard_verify_opts opt = {
		.out_dir = out_dir,
		.source = NULL,
		.rank = -1,
		.quick = true,
	};
	struct wshard_verify_result res;
	struct wshard_error err = { 0 };
	enum wshard_err rc;
	size_t i;

	check_strip(data, size);
	fuzz_write(manifest, data, size);
	rc = wshard_verify(&opt, comm, &res, &err);
	switch (rc) {
	case WSHARD_OK:
		CHECK(res.differences == 0 && res.nlines == 0);
		/* Nothing exists to match a listed file. */
		CHECK(listed_files(data, size) == 0);
		break;
	case WSHARD_EMISMATCH:
		CHECK(res.differences > 0);
		/* A name holding a newline makes two lines of one difference. */
		CHECK(res.nlines >= 1);
		/* "rank R: ..." lines, and "manifest: ..." for the whole. */
		for (i = 0; i < res.nlines; i++)
			CHECK(res.lines[i] && res.lines[i][0]);
		break;
	case WSHARD_EINVAL:
	case WSHARD_EIO:
	case WSHARD_ENOMEM:
	case WSHARD_EUSAGE:
		CHECK(err.msg[0]);
		break;
	default:
		fprintf(stderr, "unexpected verify result %d: %s\n", (int)rc, err.msg);
		abort();
	}
	wshard_verify_result_release(&res);
	return 0;
}
