/*
 * bench_roundtrip.cu - the GPU round trip's throughput against the
 * device's own copy bandwidth, measured in the same run (scripts/bench
 * --gpu runs it; built only when CUDA=1).
 *
 *   bench-roundtrip [MiB [runs]]
 *
 * Baselines, each over MiB of pinned host memory in 8 MiB chunks on two
 * streams (what the hardware gives the round trip at best):
 *   h2d        host -> device copies
 *   d2h        device -> host copies
 *   h2d+d2h    each chunk sent and brought back (the round trip's
 *              copies with no checksum and no comparison)
 * Then the validator on ordinary (pageable) memory, as convert uses it:
 *   validator cuda  wshard_validator_check, mode GPU, with 8 MiB chunks
 *                   and with 2 MiB (convert's with the default
 *                   --max-memory)
 *   validator host  the host backend, for scale
 * and the same over tensors of 256 KiB and 16 KiB checked one by one (a
 * checkpoint of many small experts), and CUDA's start in the process.
 * The checksum kernel alone is timed against a device-to-device copy (the
 * device memory's bandwidth), so that it is seen not to be the limit.
 * Prints GB/s of payload (bytes checked, 1e9 bytes a second) for each and
 * the ratio of the validator to h2d+d2h.  Best of RUNS.
 */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "base/validate.h"
#include "validate_sum_host.h"
}
#include "validate_kernel.cuh"

#define CHUNK ((size_t)8 << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "bench-roundtrip: %s: %s\n", what,
			cudaGetErrorString(e));
		exit(1);
	}
}

enum copy_kind { H2D = 1, D2H = 2, BOTH = 3 };

/* Seconds for one pass of the copies over len bytes of host memory. */
static double copy_pass(unsigned char *host, unsigned char *back,
			unsigned char *dev[2], cudaStream_t st[2], size_t len,
			enum copy_kind kind)
{
	double t0 = now();
	size_t off, n;
	int k = 0;

	for (off = 0; off < len; off += n, k ^= 1) {
		n = len - off < CHUNK ? len - off : CHUNK;
		if (kind & H2D)
			check(cudaMemcpyAsync(dev[k], host + off, n,
					      cudaMemcpyHostToDevice, st[k]),
			      "cudaMemcpyAsync h2d");
		if (kind & D2H)
			check(cudaMemcpyAsync(back + off, dev[k], n,
					      cudaMemcpyDeviceToHost, st[k]),
			      "cudaMemcpyAsync d2h");
	}
	check(cudaStreamSynchronize(st[0]), "sync");
	check(cudaStreamSynchronize(st[1]), "sync");
	return now() - t0;
}

static double best_copy(unsigned char *host, unsigned char *back,
			unsigned char *dev[2], cudaStream_t st[2], size_t len,
			enum copy_kind kind, int runs)
{
	double best = 1e30, t;
	int r;

	copy_pass(host, back, dev, st, len, kind);	/* warm-up */
	for (r = 0; r < runs; r++) {
		t = copy_pass(host, back, dev, st, len, kind);
		if (t < best)
			best = t;
	}
	return best;
}

/*
 * Seconds for the validator (mode, chunk) to check len bytes of buf as
 * tensors of piece bytes each (piece == len: one check), then flush;
 * best of runs after a warm-up.  Small pieces are what a checkpoint of
 * many small experts costs the round trip (convert's stream threads have
 * a validator each).  backend (may be NULL) receives its name.
 */
static double best_validator(enum wshard_validate_mode mode, size_t chunk,
			     const unsigned char *buf, size_t len, size_t piece,
			     int runs, char *backend, size_t backend_len)
{
	struct wshard_validator *v = NULL;
	struct wshard_error err;
	double best = 1e30, t;
	size_t off;
	int r;

	memset(&err, 0, sizeof(err));
	if (wshard_validator_open(&v, mode, 0, chunk, NULL, 0, &err) != WSHARD_OK) {
		fprintf(stderr, "bench-roundtrip: %s\n", err.msg);
		exit(1);
	}
	if (backend)
		snprintf(backend, backend_len, "%s", wshard_validator_backend(v));
	for (r = -1; r < runs; r++) {	/* r = -1: warm-up */
		t = now();
		for (off = 0; off + piece <= len; off += piece)
			if (wshard_validator_check(v, buf + off, piece, "a tensor", 0,
						   &err) != WSHARD_OK)
				break;
		if (err.code == WSHARD_OK)
			wshard_validator_flush(v, &err);
		if (err.code != WSHARD_OK) {
			fprintf(stderr, "bench-roundtrip: %s\n", err.msg);
			exit(1);
		}
		t = now() - t;
		if (r >= 0 && t < best)
			best = t;
	}
	wshard_validator_close(v);
	return best;
}

static void row(const char *name, size_t len, double secs, double base)
{
	double gbs = (double)len / secs / 1e9;

	if (base > 0)
		printf("%-34s %8.2f GB/s   %5.2fx of h2d+d2h\n", name, gbs,
		       gbs / base);
	else
		printf("%-34s %8.2f GB/s\n", name, gbs);
}

/*
 * The checksum kernel against the device's own memory: a device-to-device
 * copy (each byte read and written once: its rate counts both) and the
 * kernel alone over the same bytes (each read once), up to 1 GiB of them;
 * the kernel's checksum must be the host's.  Where the kernel moves a
 * good share of the memory's bandwidth, it is not what bounds a round
 * trip whose copies cross PCIe at a tenth of that.
 */
struct kernel_job {
	const unsigned char *a;
	unsigned char *b;
	size_t n;
	unsigned long long *dsum;
	unsigned blocks;		/* 0: the copy, else the kernel */
};

static void kernel_job_run(const struct kernel_job *j)
{
	if (!j->blocks) {
		check(cudaMemcpy(j->b, j->a, j->n, cudaMemcpyDeviceToDevice), "cudaMemcpy");
		return;
	}
	check(cudaMemset(j->dsum, 0, sizeof(*j->dsum)), "cudaMemset");
	vsum_kernel<<<j->blocks, THREADS>>>((const unsigned long long *)j->a, j->n,
					    j->dsum);
	check(cudaGetLastError(), "checksum kernel launch");
}

/* Seconds for the best of runs of job j on the device, after a warm-up. */
static double device_seconds(const struct kernel_job *j, int runs)
{
	cudaEvent_t t0, t1;
	float ms, best = -1;
	int r;

	check(cudaEventCreate(&t0), "cudaEventCreate");
	check(cudaEventCreate(&t1), "cudaEventCreate");
	for (r = -1; r < runs; r++) {	/* r = -1: warm-up */
		check(cudaEventRecord(t0, 0), "cudaEventRecord");
		kernel_job_run(j);
		check(cudaEventRecord(t1, 0), "cudaEventRecord");
		check(cudaEventSynchronize(t1), "cudaEventSynchronize");
		check(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
		if (r >= 0 && (best < 0 || ms < best))
			best = ms;
	}
	cudaEventDestroy(t0);
	cudaEventDestroy(t1);
	return best / 1e3;
}

/*
 * The checksum kernel against the device's own memory: a device-to-device
 * copy (each byte read and written once: its rate counts both) and the
 * kernel alone over the same bytes (each read once), launched as the round
 * trip launches it, up to 1 GiB of them; the kernel's checksum must be the
 * host's.  Where the kernel moves a good share of the memory's bandwidth,
 * it is not what bounds a round trip whose copies cross PCIe at a tenth
 * of that.
 */
static void kernel_rows(const unsigned char *plain, size_t len, int runs)
{
	struct kernel_job j;
	unsigned long long sum;
	unsigned char *a;
	double mem, kern;
	int sms = 0;

	memset(&j, 0, sizeof(j));
	j.n = len < ((size_t)1 << 30) ? len : (size_t)1 << 30;
	check(cudaMalloc((void **)&a, j.n), "cudaMalloc");
	check(cudaMalloc((void **)&j.b, j.n), "cudaMalloc");
	check(cudaMalloc((void **)&j.dsum, sizeof(*j.dsum)), "cudaMalloc");
	check(cudaMemcpy(a, plain, j.n, cudaMemcpyHostToDevice), "cudaMemcpy");
	check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0),
	      "cudaDeviceGetAttribute");
	j.a = a;
	mem = 2.0 * (double)j.n / device_seconds(&j, runs) / 1e9;
	j.blocks = vsum_blocks(j.n, (sms > 0 ? sms : 1) * BLOCKS_PER_SM);
	kern = (double)j.n / device_seconds(&j, runs) / 1e9;
	check(cudaMemcpy(&sum, j.dsum, sizeof(sum), cudaMemcpyDeviceToHost), "cudaMemcpy");
	if (wshard_vsum_final(sum, j.n) != wshard_validate_sum(plain, j.n)) {
		fprintf(stderr, "bench-roundtrip: the checksum kernel's sum of %zu "
			"bytes differs from the host's\n", j.n);
		exit(1);
	}
	printf("%-34s %8.2f GB/s\n", "device memory (d2d copy, r+w)", mem);
	printf("%-34s %8.2f GB/s   %5.2fx of device memory\n",
	       "checksum kernel (device memory)", kern, kern / mem);
	cudaFree(j.dsum);
	cudaFree(j.b);
	cudaFree(a);
}

/*
 * What a convert pays once, beside its stream: a stream thread's validator
 * opened and closed (convert's default 1 MiB slots), then, with this
 * program's buffers freed, the context's teardown that exit would do.
 */
static void fixed_costs(unsigned char *pinned, unsigned char *back, unsigned char **dev,
			cudaStream_t *st, unsigned char *plain)
{
	struct wshard_validator *v;
	struct wshard_error err;
	double t0, t1;
	int i, n = 8;

	t0 = now();
	for (i = 0; i < n; i++) {
		if (wshard_validator_open(&v, WSHARD_VALIDATE_GPU, 0, (size_t)1 << 20, NULL, 0,
					  &err) != WSHARD_OK) {
			fprintf(stderr, "bench-roundtrip: %s\n", err.msg);
			exit(1);
		}
		wshard_validator_close(v);
	}
	printf("validator open and close, 1 MiB slots: %.1f ms each\n", (now() - t0) / n * 1e3);
	t0 = now();
	check(cudaFreeHost(pinned), "cudaFreeHost");
	check(cudaFreeHost(back), "cudaFreeHost");
	check(cudaFree(dev[0]), "cudaFree");
	check(cudaFree(dev[1]), "cudaFree");
	check(cudaStreamDestroy(st[0]), "cudaStreamDestroy");
	check(cudaStreamDestroy(st[1]), "cudaStreamDestroy");
	free(plain);
	t1 = now();
	check(cudaDeviceReset(), "cudaDeviceReset");
	printf("buffers freed %.3f s; context teardown (cudaDeviceReset) %.3f s\n", t1 - t0,
	       now() - t1);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 4096;
	int runs = argc > 2 ? atoi(argv[2]) : 5;
	size_t len = mib << 20, i;
	unsigned char *pinned, *back, *plain, *dev[2];
	cudaStream_t st[2];
	cudaDeviceProp prop;
	char name[160];
	double rt, t0, start;
	size_t small;

	if (mib == 0 || runs <= 0) {
		fprintf(stderr, "usage: bench-roundtrip [MiB [runs]]\n");
		return 2;
	}
	t0 = now();
	check(cudaSetDevice(0), "cudaSetDevice");
	check(cudaFree(0), "cudaFree");
	start = now() - t0;
	check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
	check(cudaMallocHost((void **)&pinned, len), "cudaMallocHost");
	check(cudaMallocHost((void **)&back, len), "cudaMallocHost");
	check(cudaMalloc((void **)&dev[0], CHUNK), "cudaMalloc");
	check(cudaMalloc((void **)&dev[1], CHUNK), "cudaMalloc");
	check(cudaStreamCreateWithFlags(&st[0], cudaStreamNonBlocking), "stream");
	check(cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking), "stream");
	plain = (unsigned char *)malloc(len);
	if (!plain) {
		fprintf(stderr, "bench-roundtrip: out of memory for %zu MiB\n", mib);
		return 1;
	}
	for (i = 0; i < len; i++)
		pinned[i] = plain[i] = (unsigned char)(i * 2654435761u >> 13);

	printf("device: %s; %zu MiB, %zu MiB chunks, best of %d\n", prop.name,
	       mib, CHUNK >> 20, runs);
	printf("CUDA start (driver and primary context) %.3f s\n", start);
	row("h2d (pinned)", len, best_copy(pinned, back, dev, st, len, H2D, runs), 0);
	row("d2h (pinned)", len, best_copy(pinned, back, dev, st, len, D2H, runs), 0);
	rt = (double)len / best_copy(pinned, back, dev, st, len, BOTH, runs) / 1e9;
	row("h2d+d2h (pinned, no checks)", len, (double)len / rt / 1e9, 0);
	kernel_rows(plain, len, runs);
	row("validator cuda, 8 MiB chunks", len,
	    best_validator(WSHARD_VALIDATE_GPU, CHUNK, plain, len, len, runs, name,
			   sizeof(name)), rt);
	printf("  backend: %s\n", name);
	/* convert's chunk with the default --max-memory (64 MiB / 32) */
	row("validator cuda, 2 MiB chunks", len,
	    best_validator(WSHARD_VALIDATE_GPU, CHUNK / 4, plain, len, len, runs,
			   NULL, 0), rt);
	row("validator host", len,
	    best_validator(WSHARD_VALIDATE_HOST, 0, plain, len, len, runs, NULL, 0), rt);
	/* moe100k's expert tensors at tp 4: 256 KiB */
	small = len < ((size_t)256 << 20) ? len : (size_t)256 << 20;
	row("validator cuda, 256 KiB tensors", small,
	    best_validator(WSHARD_VALIDATE_GPU, CHUNK / 4, plain, small,
			   (size_t)256 << 10, runs, NULL, 0), rt);
	row("validator cuda, 16 KiB tensors", small / 16,
	    best_validator(WSHARD_VALIDATE_GPU, CHUNK / 4, plain, small / 16,
			   (size_t)16 << 10, runs, NULL, 0), rt);
	row("validator host, 256 KiB tensors", small,
	    best_validator(WSHARD_VALIDATE_HOST, 0, plain, small, (size_t)256 << 10,
			   runs, NULL, 0), rt);
	fixed_costs(pinned, back, dev, st, plain);
	return 0;
}
