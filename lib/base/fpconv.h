/*
 * fpconv.h - the --dtype conversions among F32, F16 and BF16, and a
 * rule's I64 to I32 narrowing (fpconv.c).  Not part of the API.
 */
#ifndef WSHARD_FPCONV_H
#define WSHARD_FPCONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wshard.h"

/* IEEE conversions, round to nearest even, NaN kept NaN (fpconv.c). */
uint16_t wshard_f32_to_bf16(uint32_t f);
uint16_t wshard_f32_to_f16(uint32_t f);
uint32_t wshard_f16_to_f32(uint16_t h);
/* True for the dtypes --dtype converts among: F32, F16, BF16. */
bool wshard_dtype_is_convertible(enum wshard_dtype dt);
/* True when a tensor of dtype from is converted to to: both among F32, F16
 * and BF16 (and different), or I64 to I32 (a rule's "dtype": "I32"). */
bool wshard_dtype_converts(enum wshard_dtype from, enum wshard_dtype to);
/* True when from is I32 or I64 and to among F32, F16 and BF16: integers
 * vLLM holds in a float parameter (compressed-tensors' expert weight_shape). */
bool wshard_dtype_int_to_float(enum wshard_dtype from, enum wshard_dtype to);
/* Converts n little-endian elements of from at src into to at dst, for a
 * pair wshard_dtype_converts or wshard_dtype_int_to_float accepts. */
void wshard_convert_floats(enum wshard_dtype from, enum wshard_dtype to,
			   const void *src, void *dst, size_t n);
/* The same for F32, F16 and BF16 (from may equal to), each value first
 * converted to to, then multiplied by mul in F32 and rounded to nearest
 * even: what PyTorch computes copying into a tensor of dtype to, then
 * multiplying it by a Python float. */
void wshard_scale_floats(enum wshard_dtype from, enum wshard_dtype to,
			 const void *src, void *dst, size_t n, float mul);
/* n elements x of from (F32, F16 or BF16) at src as F32 -exp(x) at dst:
 * exp in double, rounded to F32 once (vLLM's Mamba A from A_log). */
void wshard_neg_exp_floats(enum wshard_dtype from, const void *src, void *dst, size_t n);
/* The mean of n elements of from (F32, F16 or BF16) at src as PyTorch
 * computes it on an x86-64 CPU (t.mean(): F32 sums in its order, an F16 or
 * BF16 mean rounded to that dtype) into *mean; 0, or -1 out of memory. */
int wshard_torch_mean(enum wshard_dtype from, const void *src, size_t n, float *mean);
/* n elements x of from (F32, F16 or BF16) at src as x + c at dst in to:
 * in_source, the sum in F32 rounded to from, then converted to to
 * (PyTorch's t - t.mean() in t's dtype); else x converted to to first, the
 * sum in F32 rounded to to (a GPU's param + offset in the param's dtype). */
void wshard_add_floats(enum wshard_dtype from, enum wshard_dtype to, const void *src,
		       void *dst, size_t n, float c, bool in_source);

#endif /* WSHARD_FPCONV_H */
