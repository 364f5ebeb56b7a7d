/*
 * test_load.c - the loader's device destinations (wshard_load_dest_device,
 * lib/load/load_device.c) on a small output written here: one rank file
 * of a tensor over a staging slot (9 MiB and 3 bytes), forty small ones
 * (a few hundred KiB, packed into slots together), an empty one and one
 * of 2 MiB.
 *
 *  - Without a usable device (a build without CUDA, or no GPU) a load
 *    into device memory fails with one line that says why and names the
 *    device, and does not crash; destinations on two devices are refused.
 *  - With the test stand-in (host memory for device memory, memcpy for
 *    the copies) every byte arrives, through 1 and 3 threads, device
 *    destinations alone and mixed with host ones, with each checksum
 *    (crc64-nvme's pieces joined, xxh3-64 and sha256 hashed as staged);
 *    a flipped byte is caught, naming the tensor.
 *  - With a GPU (a CUDA build where a device is usable) the same bytes
 *    arrive in device memory, read back with cudaMemcpy; skipped here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/devload.h"
#include "base/hash.h"
#include "test_util.h"
#ifdef WSHARD_CUDA
#include <cuda_runtime_api.h>
#endif

#define NT 43
#define FILE_NAME "model-rank-0-part-0.safetensors"

struct out {
	char *dir;
	size_t size[NT], off[NT];	/* each tensor's bytes, in the data */
	unsigned char *data;
	size_t data_len, data_start;	/* data_start: in the file */
};

static size_t tensor_size(int i)
{
	if (i == 0)
		return ((size_t)9 << 20) + 3;
	if (i == NT - 2)
		return 0;
	if (i == NT - 1)
		return (size_t)2 << 20;
	return 300000 + (size_t)i * 4099;
}

static void write_file(const char *path, const void *a, size_t n, const void *b,
		       size_t m, const void *c, size_t k)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "cannot write %s", path);
	cr_assert_eq(fwrite(a, 1, n, f), n);
	cr_assert_eq(fwrite(b, 1, m, f), m);
	cr_assert_eq(fwrite(c, 1, k, f), k);
	cr_assert_eq(fclose(f), 0);
}

/* Appends to a malloc'd string. */
static void add(char **s, const char *more)
{
	char *t = fmt("%s%s", *s, more);

	free(*s);
	*s = t;
}

/* The output: its rank file and a wshard.json with algo's checksums. */
static struct out make_output(const char *algo)
{
	const char *tmp = getenv("TMPDIR");
	struct out o = {0};
	char *head = strdup("{"), *man, *tensors = strdup(""), *path, *item;
	enum wshard_checksum ck;
	unsigned char len8[8];
	size_t hlen;

	cr_assert_eq(wshard_checksum_parse(algo, &ck), 0);
	o.dir = fmt("%s/wshard-load.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(o.dir));
	for (int i = 0; i < NT; i++) {
		o.off[i] = o.data_len;
		o.size[i] = tensor_size(i);
		o.data_len += o.size[i];
	}
	o.data = random_bytes(o.data_len, 41);
	for (int i = 0; i < NT; i++) {
		struct wshard_hash h;
		char hex[WSHARD_DIGEST_HEX];

		cr_assert_eq(wshard_hash_init(&h, ck), WSHARD_OK);
		wshard_hash_update(&h, o.data + o.off[i], o.size[i]);
		wshard_hash_final(&h, hex);
		item = fmt("%s\"t%02d\": {\"dtype\": \"U8\", \"shape\": [%zu], "
			   "\"data_offsets\": [%zu, %zu]}", i ? ", " : "", i,
			   o.size[i], o.off[i], o.off[i] + o.size[i]);
		add(&head, item);
		free(item);
		item = fmt("%s{\"name\": \"t%02d\", \"dtype\": \"U8\", \"shape\": "
			   "[%zu], \"file\": \"" FILE_NAME "\", \"data_offsets\": "
			   "[%zu, %zu], \"checksum\": \"%s\"}", i ? ", " : "", i,
			   o.size[i], o.off[i], o.off[i] + o.size[i], hex);
		add(&tensors, item);
		free(item);
	}
	add(&head, "}");
	while (strlen(head) % 8)
		add(&head, " ");
	hlen = strlen(head);
	for (int b = 0; b < 8; b++)
		len8[b] = (unsigned char)(hlen >> (8 * b));
	o.data_start = 8 + hlen;
	path = fmt("%s/" FILE_NAME, o.dir);
	write_file(path, len8, 8, head, hlen, o.data, o.data_len);
	free(path);
	man = fmt("{\"format\": \"wshard\", \"format_version\": 2, \"tp\": 1, "
		  "\"options\": {\"checksum\": \"%s\"}, \"parallel\": {\"tp\": 1, "
		  "\"pp\": 1}, \"ranks\": [{\"rank\": 0, \"files\": [{\"name\": \""
		  FILE_NAME "\", \"size\": %zu, \"checksum\": \"0\"}], \"tensors\": [%s]}]}\n",
		  algo,
		  o.data_start + o.data_len, tensors);
	path = fmt("%s/wshard.json", o.dir);
	write_file(path, man, strlen(man), "", 0, "", 0);
	free(path);
	free(man);
	free(head);
	free(tensors);
	return o;
}

static void free_output(struct out *o)
{
	remove_tree(o->dir);
	free(o->dir);
	free(o->data);
}

static struct wshard_load *open_load(const struct out *o)
{
	struct wshard_load_want want = { .tp = 1, .pp = 1 };
	struct wshard_error err = {0};
	struct wshard_load *l;

	cr_assert_eq(wshard_load_open(&l, o->dir, &want, &err), WSHARD_OK,
		     "open: %s", err.msg);
	cr_assert_eq(wshard_load_count(l), NT);
	return l;
}

/* Flips byte off of the file's data. */
static void flip(const struct out *o, size_t off)
{
	char *path = fmt("%s/" FILE_NAME, o->dir);
	FILE *f = fopen(path, "r+b");
	unsigned char b = (unsigned char)~o->data[off];

	cr_assert_not_null(f);
	cr_assert_eq(fseek(f, (long)(o->data_start + off), SEEK_SET), 0);
	cr_assert_eq(fwrite(&b, 1, 1, f), 1);
	cr_assert_eq(fclose(f), 0);
	free(path);
}

Test(load_device, refused_without_a_device)
{
	struct out o;
	struct wshard_load *l;
	struct wshard_error err = {0};

	if (wshard_load_has_device())
		cr_skip_test("a CUDA device is usable here");
	o = make_output("crc64-nvme");
	l = open_load(&o);
	for (size_t i = 0; i < NT; i++)	/* never written: no copy is made */
		wshard_load_dest_device(l, i, 0, o.size[i] ? (void *)(uintptr_t)0x1000 : NULL);
	cr_assert_eq(wshard_load_run(l, 2, &err), WSHARD_ENODEV, "%s", err.msg);
	cr_assert(strstr(err.msg, "cannot load into cuda:0: ") == err.msg, "%s", err.msg);
#ifdef WSHARD_CUDA
	cr_assert(strstr(err.msg, "CUDA"), "%s", err.msg);
#else
	cr_assert(strstr(err.msg, "built without CUDA"), "%s", err.msg);
#endif
	cr_assert_null(strchr(err.msg, '\n'), "%s", err.msg);
	wshard_load_free(l);
	free_output(&o);
}

Test(load_device, one_device_a_load)
{
	struct out o = make_output("crc64-nvme");
	struct wshard_load *l = open_load(&o);
	struct wshard_error err = {0};
	unsigned char *buf = malloc(o.data_len);

	wshard_devload_pretend(true);
	for (size_t i = 0; i < NT; i++)
		wshard_load_dest_device(l, i, i == 5 ? 1 : 0,
					o.size[i] ? buf + o.off[i] : NULL);
	cr_assert_eq(wshard_load_run(l, 2, &err), WSHARD_EUSAGE, "%s", err.msg);
	cr_assert(strstr(err.msg, "tensor 't05': on cuda:1, others on cuda:0"), "%s",
		  err.msg);
	wshard_load_free(l);
	free(buf);
	free_output(&o);
}

/* Loads o with the stand-in, tensors with (i % every == 0) on the
 * "device" (every 1: all), the rest in host memory; checks the bytes. */
static void staged(const struct out *o, int threads, size_t every)
{
	struct wshard_load *l = open_load(o);
	struct wshard_error err = {0};
	unsigned char *buf = malloc(o->data_len + 1);

	cr_assert_not_null(buf);
	memset(buf, 0, o->data_len + 1);
	wshard_devload_pretend(true);
	for (size_t i = 0; i < NT; i++) {
		void *p = o->size[i] ? buf + o->off[i] : NULL;

		if (i % every == 0)
			wshard_load_dest_device(l, i, 0, p);
		else
			wshard_load_dest(l, i, p);
	}
	cr_assert_eq(wshard_load_run(l, threads, &err), WSHARD_OK, "%s", err.msg);
	for (size_t i = 0; i < NT; i++)
		cr_assert(memcmp(buf + o->off[i], o->data + o->off[i], o->size[i]) == 0,
			  "%d threads, every %zu: tensor %zu differs", threads, every, i);
	cr_assert_eq(buf[o->data_len], 0, "a byte past the last tensor written");
	wshard_devload_pretend(false);
	wshard_load_free(l);
	free(buf);
}

Test(load_device, staged_bytes_arrive)
{
	const char *algos[] = { "crc64-nvme", "xxh3-64", "sha256" };

	for (size_t a = 0; a < 3; a++) {
		struct out o = make_output(algos[a]);

		staged(&o, 1, 1);
		staged(&o, 3, 1);
		staged(&o, 3, 2);
		free_output(&o);
	}
}

/* A byte flipped in tensor t's data fails the staged load, naming it. */
static void flipped(const char *algo, size_t t, size_t at)
{
	struct out o = make_output(algo);
	struct wshard_load *l = open_load(&o);
	struct wshard_error err = {0};
	unsigned char *buf = malloc(o.data_len);
	char *want = fmt("tensor 't%02zu' does not match its checksum", t);

	flip(&o, o.off[t] + at);
	wshard_devload_pretend(true);
	for (size_t i = 0; i < NT; i++)
		wshard_load_dest_device(l, i, 0, o.size[i] ? buf + o.off[i] : NULL);
	cr_assert_eq(wshard_load_run(l, 3, &err), WSHARD_EMISMATCH, "%s: %s", algo,
		     err.msg);
	cr_assert(strstr(err.msg, want), "%s: %s", algo, err.msg);
	wshard_devload_pretend(false);
	wshard_load_free(l);
	free(want);
	free(buf);
	free_output(&o);
}

Test(load_device, flipped_byte_named)
{
	flipped("crc64-nvme", 0, (size_t)5 << 20);
	flipped("sha256", 0, ((size_t)9 << 20) + 2);
	flipped("xxh3-64", 17, 100);
}

#ifdef WSHARD_CUDA
/* Loads o into device memory and reads it back. */
static void on_gpu(const struct out *o, int threads)
{
	struct wshard_load *l = open_load(o);
	struct wshard_error err = {0};
	unsigned char *dev = NULL, *back = malloc(o->data_len);

	cr_assert_eq(cudaMalloc((void **)&dev, o->data_len), cudaSuccess);
	cr_assert_eq(cudaMemset(dev, 0, o->data_len), cudaSuccess);
	for (size_t i = 0; i < NT; i++)
		wshard_load_dest_device(l, i, 0, o->size[i] ? dev + o->off[i] : NULL);
	cr_assert_eq(wshard_load_run(l, threads, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(cudaMemcpy(back, dev, o->data_len, cudaMemcpyDeviceToHost),
		     cudaSuccess);
	for (size_t i = 0; i < NT; i++)
		cr_assert(memcmp(back + o->off[i], o->data + o->off[i], o->size[i]) == 0,
			  "tensor %zu differs on the device", i);
	cudaFree(dev);
	free(back);
	wshard_load_free(l);
}

Test(load_device, gpu_round_trip)
{
	const char *algos[] = { "crc64-nvme", "sha256" };

	if (!wshard_load_has_device())
		cr_skip_test("no CUDA device usable here");
	for (size_t a = 0; a < 2; a++) {
		struct out o = make_output(algos[a]);

		on_gpu(&o, 1);
		on_gpu(&o, 4);	/* the ring kept from the run before */
		free_output(&o);
	}
}
#endif
