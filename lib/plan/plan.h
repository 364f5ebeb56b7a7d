/*
 * plan.h - the plan stage's interface to the stages above it (stream,
 * output, verify).  It takes in a checkpoint's catalog, the rules of its
 * architecture and the convert options, and gives out a struct
 * wshard_plan: for each rank its output tensors, each a list of pieces
 * (rectangles of source tensors, zeros, constants), laid out into part
 * files whose headers are ready to write, and the source tensors left
 * out on purpose.  wshard_plan_build (wshard.h) makes it, with no I/O.
 * Not part of the API.
 */
#ifndef WSHARD_PLAN_H
#define WSHARD_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "wshard.h"

/* The engine layout written when none is asked for: the newest checked. */
#define WSHARD_TARGET_DEFAULT "vllm@0.32"

/*
 * The canonical name of an engine layout: target as --target takes it,
 * "ENGINE@RELEASE" ("vllm@0.32"; a patch release "vllm@0.32.1" names its
 * line) or a bare "vllm" for the newest.  Sets *out_checked (may be NULL)
 * to the engine build the layout was checked against ("vllm==0.32.0").
 * Returns a static string, or NULL for a target wshard does not write.
 */
const char *wshard_target_canonical(const char *target, const char **out_checked);

/*
 * The experts rank of ep_size holds among num_experts, as vLLM 0.32's
 * determine_expert_map gives them: num_experts / ep_size each, the
 * remainder one more to each of the first ranks; linear: a contiguous
 * block from rank * base + min(rank, remainder); round_robin: rank,
 * rank + ep_size, ...  Sets *out_first and *out_stride (the global index
 * of local expert i is first + i * stride).  Returns the local count.
 */
long wshard_expert_range(long num_experts, int ep_size, int rank,
			 enum wshard_placement p, long *out_first, long *out_stride);

enum wshard_piece_kind {
	WSHARD_PIECE_COPY,	/* bytes of a source tensor */
	WSHARD_PIECE_ZERO,	/* zero bytes (vocab padding) */
	WSHARD_PIECE_CONST,	/* one element repeated (scales of 1.0) */
	WSHARD_PIECE_ARANGE,	/* I64 elements prov_value, prov_value + 1, ...
				 * (len / 8 of them: a position_ids buffer) */
	WSHARD_PIECE_SINUSOID,	/* F32 [len / 4 / C, C], C = prov_value
				 * channels: Whisper's sinusoid position table
				 * (stream.c, sinusoid_at) */
};

/*
 * How a piece adds its addend.  SOURCE: in F32, the sum rounded to the
 * source's dtype, then converted (PyTorch's t - t.mean() before vLLM
 * copies it in: a rule's "zero_mean", the addend minus the mean).  OUTPUT:
 * x converted first, then the sum in F32 rounded to the output's dtype
 * (vLLM's param + offset on a GPU: a rule's "plus").
 */
enum wshard_piece_add {
	WSHARD_ADD_NONE,
	WSHARD_ADD_SOURCE,
	WSHARD_ADD_OUTPUT,
};

/*
 * How a transposed piece repacks int32 words of eight 4-bit values (a
 * source [A, B/8], value 8j+c of a row in word j, its nibble c, or with
 * REORDER nibble [0, 4, 1, 5, 2, 6, 3, 7][c]), each value XORed with 8
 * with XOR: WEIGHT, as U8 [B, A/2] (rows of the values transposed, two a
 * byte, the even row's in the low nibble); ZEROS, as U8 [B/2, A] (values
 * 2h and 2h+1 of a word column one byte of row h).  Each word column j
 * gives output bytes [4jA, 4(j+1)A), as a plain transpose does.
 */
enum wshard_int4 {
	WSHARD_INT4_WEIGHT = 1,
	WSHARD_INT4_ZEROS = 2,
	WSHARD_INT4_REORDER = 4,
	WSHARD_INT4_XOR = 8,
};

/* int4 flags as the manifest names them ("weight", "zeros reorder xor", ...) */
const char *wshard_int4_text(uint8_t int4);

/*
 * One contiguous run of an output tensor.  A COPY takes a rectangle of
 * the source tensor seen as a matrix of rows x row_bytes (rows = shape[0],
 * 1 for a scalar): rows [row0, row0 + nrows), bytes [col0, col0 + ncols)
 * of each row, written back to back at dst; or, for the parts of an
 * operator fused along dimension 1 (GPTQ's and AWQ's [in, out] weights),
 * each row out_stride bytes after the one before, the other parts' rows
 * between them.
 */
struct wshard_piece {
	/* One byte each (a plan of a giant MoE holds half a million pieces:
	 * their size is most of its memory).  kind: enum wshard_piece_kind. */
	uint8_t kind;
	/* COPY with --dtype: source elements of dtype from become to (enum
	 * wshard_dtype); the output holds out_ncols bytes per row (ncols
	 * when from == to). */
	uint8_t from, to;
	uint8_t value_len;
	uint32_t src;			/* catalog tensor index (COPY) */
	uint64_t row0, nrows;
	uint64_t col0, ncols;		/* bytes within a row */
	uint64_t dst;			/* offset within the output tensor */
	uint64_t len;			/* bytes produced */
	uint64_t out_ncols;
	unsigned char value[8];		/* CONST: one element, little-endian */
	double prov_value;		/* CONST: the value; ARANGE: the first;
					 * SINUSOID: the channels */
	/* Provenance in elements, for the manifest (prov_ncols 0: whole rows). */
	uint32_t prov_col0, prov_ncols;
	/*
	 * A transposed COPY (tr_rows > 0, a rule's "transpose"): the bytes
	 * [col0, col0 + ncols) of each source row hold tr_rows sub-rows
	 * tr_stride bytes apart, of which the first tr_width bytes (elements
	 * of tr_es bytes) are taken; each source row gives out_ncols bytes,
	 * those elements transposed (out[j * tr_rows + k] = sub-row k's
	 * element j), converted if from != to.  prov_dim: the source
	 * dimension that prov_col0 and prov_ncols count.  The planner
	 * refuses a transposed tensor whose dimensions or sub-rows do not fit
	 * these 32 bits.
	 */
	uint32_t tr_rows, tr_es;
	uint32_t tr_stride, tr_width;
	/* A transposed COPY of one source row (nrows 1): 0, its output rows
	 * (each tr_rows elements) back to back; else the bytes from one to
	 * the next, the other chunks' rows between (a rule's "interleave") */
	uint32_t tr_ostride;
	/*
	 * A deinterleaved COPY (a rule's "deinterleave", vLLM's
	 * permute_qk_weight_for_rotary): di_rows > 0 source rows form a
	 * block (plan->view_rows counts blocks, row0 and nrows too), written
	 * even rows first, then odd ones, as a transposed piece whose
	 * elements are whole rows (tr_es a row's bytes).
	 */
	uint32_t di_rows;
	int8_t prov_dim;
	/* COPY of F32, F16 or BF16 to F32: 1, each element x written as
	 * -exp(x) (a rule's "neg_exp"); 0: as it is */
	uint8_t neg_exp;
	/* COPY of F32, F16 or BF16: each element x written as x + addend
	 * (enum wshard_piece_add); 0: as it is */
	uint8_t add;
	/* A transposed COPY of I32 words of eight 4-bit values (tr_es 4),
	 * repacked as vLLM's QuarkW4A16Int4MoEMethod loads Quark's experts
	 * (enum wshard_int4); 0: none */
	uint8_t int4;
	/* 0: output rows back to back; else the bytes from one output row
	 * of the piece to the next (a part of a fused output row) */
	uint32_t out_stride;
	/* COPY: zero bytes after each output row's out_ncols (a "col"
	 * split's "pad_to"); a row of the output is out_ncols + pad */
	uint32_t pad;
	/* COPY of F32, F16 or BF16: 0, or each element multiplied by it (a
	 * rule's "times_sqrt"; from and to set) */
	float mul;
	float addend;			/* add: what is added */
	/*
	 * A transposed COPY's sub-rows repeated (Quark's W4A16 experts' scales
	 * and zero points, vLLM's group_size_div_factor): 0, each written
	 * once; else each output row holds each sub-row's element tr_rep
	 * times in a row, less the first tr_skip and last tr_cut of them
	 * (tr_rows * tr_rep - tr_skip - tr_cut elements a row)
	 */
	uint8_t tr_rep, tr_skip, tr_cut;
};

struct wshard_out_tensor {
	char *name;
	enum wshard_dtype dtype;
	uint8_t quant;			/* enum wshard_quant_role */
	int ndim;
	uint64_t shape[WSHARD_MAX_DIMS];
	uint64_t nbytes;
	uint32_t part;			/* index into the rank's files */
	uint64_t begin, end;		/* data offsets within that part */
	size_t npieces;
	struct wshard_piece *pieces;	/* ordered by dst, covering [0, nbytes) */
};

struct wshard_out_file {
	char *name;			/* model-rank-R-part-P.safetensors, or
					 * model-pp-S-tp-R-part-P.safetensors */
	char *header;			/* 8-byte length + JSON, padded */
	size_t header_len;
	uint64_t size;			/* header_len + data */
	size_t first, count;		/* its tensors in the rank's list */
};

struct wshard_rank_plan {
	int rank;			/* stage * tp + tp_rank */
	int stage, tp_rank;
	size_t ntensors;
	struct wshard_out_tensor *tensors;	/* in file order: part, then offset */
	size_t nfiles;
	struct wshard_out_file *files;
	uint64_t bytes;			/* tensor data bytes of the rank */
};

/* A source tensor a rule leaves out on purpose ("split": "skip" with a
 * "reason"), listed in the manifest. */
struct wshard_left_out {
	char *name;
	char *reason;
};

struct wshard_config;

struct wshard_plan {
	int tp;
	/* ranks: pp stages of tp each (opt.pp); rank r is ranks[r] */
	int nranks;
	int *stage_layers;		/* decoder layers of each stage (pp > 1) */
	struct wshard_options opt;
	const struct wshard_catalog *cat;	/* borrowed */
	/* the catalog's config.json fields, with the rules' defaults for
	 * the keys it omits (owned) */
	struct wshard_config *config;
	char *rules_name;
	struct wshard_rank_plan *ranks;	/* nranks of them */
	/* expert parallelism: the placement vLLM uses (round_robin falls
	 * back to linear without grouped routing) */
	enum wshard_placement placement;
	/* some output is laid out by expert (stacked, or a rule's
	 * "experts"): expert parallelism changes what a rank holds */
	bool has_experts;
	size_t nleft_out;
	struct wshard_left_out *left_out;	/* in source order */
	/* per source tensor, the rows its pieces count when a rule's "rows"
	 * merges leading dimensions into one (0: its own); NULL when no
	 * rule does */
	uint64_t *view_rows;
	/* the rules' "rename_layers": its prefix and name (owned), and the
	 * first layer renamed (LONG_MAX: none) */
	char *rename_prefix, *rename_to;
	long rename_from;
	/* config.json says tied, but the checkpoint ships a head that
	 * differs from the embedding: written untied, as vLLM loads it
	 * (plan_tie.c), and config.json's tie_word_embeddings made false */
	bool untied_by_checkpoint;
	/* fbgemm_fp8: quantization_config's activation_scale_ub, which vLLM
	 * keeps beside each FP8 layer (plan_push_input_ub) */
	bool has_input_scale_ub;
	double input_scale_ub;
	/* Quark's W4A16 INT4: its group size, read once for the per-tensor
	 * checks (0: not such a checkpoint) */
	long long quark_w4a16_group;
	/* Quark's FP8 in blocks: its X.weight_scale matched as DeepSeek's
	 * X.weight_scale_inv (plan_quark_as) */
	bool quark_fp8_block;
	/* Quark's MXFP6: U8 weights of four values in three bytes, read once
	 * for the per-tensor shape and experts checks */
	bool quark_mxfp6;
};

/*
 * The rows of source tensor src as the plan's pieces see it, a matrix of
 * rows x row_bytes: plan->view_rows[src] where a rule's "rows" set it,
 * else wshard_matrix_rows of the tensor.  Returns them (1 or more).
 */
uint64_t wshard_plan_src_rows(const struct wshard_plan *plan, uint32_t src);

/*
 * How many leading dimensions of source tensor src form the rows its
 * pieces count, where a rule's "rows" merged more than one (the
 * manifest's "row_dims").  Returns them, or 0 where no rule did.
 */
int wshard_plan_src_row_dims(const struct wshard_plan *plan, uint32_t src);

#endif /* WSHARD_PLAN_H */
