/*
 * transpose.c - the copy of a transposed piece (a rule's "transpose"):
 * one source row's sub-matrix written transposed, as vLLM holds
 * GPT-OSS's BF16 experts (transformers keeps them input dimension first,
 * vLLM output dimension first), or Llama 4's q/k heads, whose rows vLLM
 * takes even ones first (elements of a row each), or Quark's W4A16
 * experts' int32 words, whose 4-bit values vLLM repacks as it loads them
 * (transpose_int4), and their scales and zero points, each repeated where
 * vLLM halves the group (tr_rep: rep_cols).  Only such pieces come here;
 * every other copy stays a memcpy or a row conversion in stream.c.
 */
#include <stdint.h>
#include <string.h>

#include "wshard.h"
#include "base/dtype.h"
#include "base/fpconv.h"
#include "base/util.h"
#include "transpose.h"

/* Sub-rows per tile: a tile's reads and writes stay in the cache. */
#define TILE 32

/* Two-byte elements (BF16, F16) without conversion, tile by tile. */
static void transpose16(const struct wshard_piece *p, const char *src, char *dst)
{
	uint64_t n = p->tr_width / 2, m = p->tr_rows, j0, k0, j, k;

	for (k0 = 0; k0 < m; k0 += TILE)
		for (j0 = 0; j0 < n; j0 += TILE)
			for (k = k0; k < k0 + TILE && k < m; k++) {
				const char *row = src + k * p->tr_stride;

				for (j = j0; j < j0 + TILE && j < n; j++)
					memcpy(dst + (j * m + k) * 2, row + j * 2, 2);
			}
}

/*
 * The output columns sub-row k fills, [*c0, *c1), of a row of cols (a
 * repeated piece's, tr_rep elements a sub-row less the first tr_skip;
 * else column k alone).
 */
static void rep_cols(const struct wshard_piece *p, uint64_t k, uint64_t cols, uint64_t *c0,
		     uint64_t *c1)
{
	uint64_t f = p->tr_rep ? p->tr_rep : 1, a = k * f, b = a + f;

	*c0 = a > p->tr_skip ? a - p->tr_skip : 0;
	*c1 = WSHARD_MIN(b > p->tr_skip ? b - p->tr_skip : 0, cols);
}

/* Elements of an output row: tr_rows, or as many as the repeats leave. */
static uint64_t row_cols(const struct wshard_piece *p)
{
	return p->tr_rep ? (uint64_t)p->tr_rows * p->tr_rep - p->tr_skip - p->tr_cut :
			   p->tr_rows;
}

/*
 * I32 words of eight 4-bit values, repacked (p->int4, enum wshard_int4):
 * word column j of sub-row k gives, for each value c (its nibble pos[c]),
 * WEIGHT: output row 8j+c's byte k/2, nibble k&1 (rows m/2 bytes);
 * ZEROS: output row 4j+c/2's bytes of sub-row k (rep_cols), nibble c&1
 * (rows of row_cols bytes).
 */
static void transpose_int4(const struct wshard_piece *p, const char *src, char *dst)
{
	static const unsigned order[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	static const unsigned reorder[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };
	const unsigned *pos = p->int4 & WSHARD_INT4_REORDER ? reorder : order;
	unsigned flip = p->int4 & WSHARD_INT4_XOR ? 8 : 0;
	uint64_t n = p->tr_width / 4, m = p->tr_rows, cols = row_cols(p), j, k, x, c0, c1;
	unsigned c;

	memset(dst, 0, (size_t)(p->int4 & WSHARD_INT4_WEIGHT ? n * m * 4 : n * cols * 4));
	for (k = 0; k < m; k++) {
		const unsigned char *row = (const unsigned char *)src + k * p->tr_stride;

		rep_cols(p, k, cols, &c0, &c1);
		for (j = 0; j < n; j++) {
			const unsigned char *b = row + j * 4;
			uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
				     (uint32_t)b[3] << 24;

			for (c = 0; c < 8; c++) {
				unsigned v = ((w >> (4 * pos[c])) & 0xF) ^ flip;

				if (p->int4 & WSHARD_INT4_WEIGHT)
					dst[(j * 8 + c) * (m / 2) + k / 2] |=
						(char)(v << (4 * (k & 1)));
				else
					for (x = c0; x < c1; x++)
						dst[(j * 4 + c / 2) * cols + x] |=
							(char)(v << (4 * (c & 1)));
			}
		}
	}
}

void stream_transpose_row(const struct wshard_piece *p, const char *src, char *dst)
{
	uint64_t n = p->tr_width / p->tr_es, m = p->tr_rows, cols = row_cols(p), j, k, x, c0, c1;
	bool convert = p->from != p->to;
	/* an element is one value, or a whole row (a deinterleaved piece) */
	uint64_t vals = convert ? p->tr_es / (wshard_dtype_bits(p->from) / 8) : 1;
	uint64_t oes = convert ? vals * (wshard_dtype_bits(p->to) / 8) : p->tr_es;

	if (p->int4) {
		transpose_int4(p, src, dst);
		return;
	}
	if (!convert && p->tr_es == 2 && !p->tr_rep) {
		transpose16(p, src, dst);
		return;
	}
	for (k = 0; k < m; k++) {
		const char *row = src + k * p->tr_stride;

		rep_cols(p, k, cols, &c0, &c1);
		for (j = 0; j < n; j++) {
			char *o = dst + (j * cols + c0) * oes;

			if (c0 >= c1)
				continue;
			if (convert)
				wshard_convert_floats(p->from, p->to, row + j * p->tr_es, o, vals);
			else
				memcpy(o, row + j * p->tr_es, p->tr_es);
			/* the repeats: copies of the first */
			for (x = c0 + 1; x < c1; x++)
				memcpy(o + (x - c0) * oes, o, oes);
		}
	}
}
