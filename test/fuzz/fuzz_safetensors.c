/*
 * fuzz_safetensors.c - libFuzzer harness for the strict safetensors
 * reader: wshard_st_parse on the raw input.
 *
 * Beyond "no crash, no leak, no undefined behaviour", it checks what the
 * reader promises of a file it accepts (every range inside the data and
 * matching its shape and dtype, the ranges tiling the data, names sorted
 * and findable), and that the header writer round-trips it: laying the
 * accepted tensors out again with wshard_st_layout gives a header the
 * reader accepts with the same tensors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "base/dtype.h"
#include "source/safetensors.h"
#include "fuzz_check.h"

static int cmp_begin(const void *a, const void *b)
{
	const struct wshard_st_tensor *x = *(const struct wshard_st_tensor *const *)a;
	const struct wshard_st_tensor *y = *(const struct wshard_st_tensor *const *)b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* What wshard_st_parse promises about a file it accepted. */
static void check_accepted(const struct wshard_st *st, size_t len)
{
	const struct wshard_st_tensor **order;
	uint64_t data_len, at = 0, bytes;
	size_t i;

	CHECK(st->fd == -1);
	CHECK(st->size == len);
	CHECK(st->data_start >= 8 && st->data_start <= len);
	data_len = st->size - st->data_start;
	order = calloc(st->ntensors + 1, sizeof(*order));
	CHECK(order);
	for (i = 0; i < st->ntensors; i++) {
		const struct wshard_st_tensor *t = &st->tensors[i];

		CHECK(t->name);
		CHECK((unsigned)t->dtype < WSHARD_DTYPE_COUNT);
		CHECK(t->ndim >= 0 && t->ndim <= WSHARD_MAX_DIMS);
		CHECK(t->begin <= t->end && t->end <= data_len);
		CHECK(wshard_tensor_bytes(t->shape, t->ndim, t->dtype, &bytes) == 0);
		CHECK(bytes == t->end - t->begin);
		if (i)
			CHECK(strcmp(st->tensors[i - 1].name, t->name) < 0);
		CHECK(wshard_st_find(st, t->name) == t);
		order[i] = t;
	}
	qsort(order, st->ntensors, sizeof(*order), cmp_begin);
	for (i = 0; i < st->ntensors; i++) {
		CHECK(order[i]->begin == at);
		at = order[i]->end;
	}
	CHECK(at == data_len);
	free(order);
	for (i = 0; i < st->nmeta; i++) {
		CHECK(st->meta[i].key && st->meta[i].value);
		CHECK(wshard_st_meta_get(st, st->meta[i].key));
	}
	CHECK(!wshard_st_find(st, "__metadata__"));
}

/* The writer lays the same tensors out; the reader takes its output. */
static void check_round_trip(const struct wshard_st *st)
{
	struct wshard_st_tensor *copy = calloc(st->ntensors + 1, sizeof(*copy));
	struct wshard_error err = { 0 };
	struct wshard_st *again = NULL;
	const char *format = wshard_st_meta_get(st, "format");
	char *header = NULL, *file;
	size_t header_len, i;
	uint64_t data_len;
	enum wshard_err rc;

	CHECK(copy);
	for (i = 0; i < st->ntensors; i++)
		copy[i] = st->tensors[i];	/* names borrowed */
	rc = wshard_st_layout(copy, st->ntensors, st->meta, st->nmeta, &header,
			      &header_len, &data_len, &err);
	if (format && strcmp(format, "pt")) {
		/* The writer insists on format "pt"; the reader does not. */
		CHECK(rc == WSHARD_EINVAL);
		free(copy);
		return;
	}
	if (rc) {
		fprintf(stderr, "layout refused an accepted file: %s\n", err.msg);
		abort();
	}
	CHECK(data_len == st->size - st->data_start);
	CHECK(header_len % 8 == 0);
	file = calloc(1, header_len + data_len + 1);
	CHECK(file);
	memcpy(file, header, header_len);
	rc = wshard_st_parse(&again, file, header_len + data_len, "round-trip", &err);
	if (rc) {
		fprintf(stderr, "the reader refused the writer's header: %s\n", err.msg);
		abort();
	}
	CHECK(again->ntensors == st->ntensors);
	for (i = 0; i < st->ntensors; i++) {
		const struct wshard_st_tensor *a = &st->tensors[i], *b = &again->tensors[i];

		CHECK(!strcmp(a->name, b->name));
		CHECK(a->dtype == b->dtype && a->ndim == b->ndim);
		CHECK(!memcmp(a->shape, b->shape, sizeof(a->shape[0]) * (size_t)a->ndim));
		CHECK(b->end - b->begin == a->end - a->begin);
	}
	for (i = 0; i < st->nmeta; i++) {
		const char *v = wshard_st_meta_get(again, st->meta[i].key);

		CHECK(v && !strcmp(v, st->meta[i].value));
	}
	wshard_st_free(again);
	free(file);
	free(header);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wshard_error err = { 0 };
	struct wshard_st *st = NULL;
	enum wshard_err rc;

	rc = wshard_st_parse(&st, data, size, "fuzz.safetensors", &err);
	if (rc) {
		CHECK(!st);
		CHECK(rc == WSHARD_EINVAL || rc == WSHARD_ENOMEM);
		CHECK(err.code == rc && err.msg[0] && !strchr(err.msg, '\n'));
		return 0;
	}
	CHECK(st);
	check_accepted(st, size);
	check_round_trip(st);
	wshard_st_free(st);
	return 0;
}
