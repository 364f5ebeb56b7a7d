/*
 * validate_kernel.cuh - the round trip's checksum kernel and its launch,
 * shared by the CUDA backend (validate_cuda.cu) and bench-roundtrip, which
 * times it alone against the device's memory bandwidth.
 */
#ifndef WSHARD_VALIDATE_KERNEL_CUH
#define WSHARD_VALIDATE_KERNEL_CUH

#include <stddef.h>

#include "validate_sum.h"

#define THREADS 256
#define WARPS (THREADS / 32)
/* Enough resident blocks per multiprocessor to hide memory latency. */
#define BLOCKS_PER_SM 8

/*
 * Adds the word contributions of the len bytes at words (device memory,
 * 8-byte aligned) to *out.  Each thread sums a strided set of words, each
 * block reduces its threads' sums, and one atomicAdd per block adds it:
 * the order does not matter because the checksum is a wrapping sum.
 */
static __global__ void vsum_kernel(const unsigned long long *__restrict__ words,
			    size_t len, unsigned long long *out)
{
	__shared__ unsigned long long warp_sum[WARPS];
	size_t nwords = len / 8;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long acc = 0;
	int o;

	for (; i < nwords; i += stride)
		acc += wshard_vsum_word(words[i], i);
	if (blockIdx.x == 0 && threadIdx.x == 0 && len % 8)
		acc += wshard_vsum_word(
			wshard_vsum_tail((const unsigned char *)(words + nwords),
					 len % 8),
			nwords);

	for (o = 16; o > 0; o >>= 1)
		acc += __shfl_down_sync(0xffffffffu, acc, o);
	if ((threadIdx.x & 31) == 0)
		warp_sum[threadIdx.x / 32] = acc;
	__syncthreads();
	if (threadIdx.x < 32) {
		acc = threadIdx.x < WARPS ? warp_sum[threadIdx.x] : 0;
		for (o = 16; o > 0; o >>= 1)
			acc += __shfl_down_sync(0xffffffffu, acc, o);
		if (threadIdx.x == 0)
			atomicAdd(out, acc);
	}
}

/* Blocks for the checksum of len bytes: one a THREADS words, at most
 * max_blocks (BLOCKS_PER_SM a multiprocessor), each thread striding over
 * the rest. */
static inline unsigned vsum_blocks(size_t len, int max_blocks)
{
	size_t want = (len / 8 + THREADS - 1) / THREADS;

	return (unsigned)(want == 0 ? 1 : want < (size_t)max_blocks ? want :
			  (size_t)max_blocks);
}

#endif /* WSHARD_VALIDATE_KERNEL_CUH */
