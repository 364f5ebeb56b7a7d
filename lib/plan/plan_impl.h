/*
 * plan_impl.h - what the files of the planner share.  Not part of the
 * API.  The plan stage takes in a checkpoint's catalog (its tensors and
 * config.json), the rules of its model class and the options (--tp,
 * --dtype, --expert-parallel, --max-file-size); it gives out the plan,
 * every rank's output tensors as copy pieces and their files' layout,
 * before a byte is read or written.
 *
 * The calls run one way: plan_build.c, the driver (wshard_plan_build),
 * calls every other file; plan_split.c cuts an item, through plan_view.c
 * for the views, and plan_concat.c the pieces of a "concat" rule;
 * plan_match.c matches sources to rules, through
 * plan_shape.c for their shapes; plan_layout.c, plan_expert.c and
 * plan_extra.c (the constant tensors, through plan_image_norm.c) answer
 * plan_build.c; plan_quant.c answers plan_build.c, plan_split.c and
 * plan_extra.c on quantization; and all of them build on plan_piece.c,
 * which calls none of them.  This header is the folder's,
 * no one file's.
 *
 * The shared structs are plan_piece.c's: struct member (one matched
 * source, made by plan_match.c) and struct group_out (one output being
 * built, made by plan_build.c and filled by plan_split.c and
 * plan_view.c), with the helpers below that read a member's source; but
 * struct shape_memo is plan_shape.c's.
 */
#ifndef WSHARD_PLAN_IMPL_H
#define WSHARD_PLAN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wshard.h"
#include "plan.h"
#include "source/safetensors.h"
#include "rules/rules.h"

/* A "vocab" split pads the rows to a multiple of this, as vLLM's
 * VocabParallelEmbedding does (plan_split.c, plan_concat.c). */
#define VOCAB_PAD 64

/* A source tensor matched by a rule: one member of an output group. */
struct member {
	char *out;			/* output name */
	uint32_t src;			/* catalog index */
	const struct rules_rule *rule;
	struct rules_capture cap;
};

/* Per-rank output being assembled for one group. */
struct group_out {
	struct wshard_out_tensor *ranks;	/* tp of them */
	int ndim;
	uint64_t shape[WSHARD_MAX_DIMS];	/* per item, before stacking */
	bool have_shape;
};

static inline const struct wshard_st_tensor *src_info(const struct wshard_plan *plan,
						      uint32_t src)
{
	return plan->cat->tensors[src].info;
}

static inline const char *src_name(const struct wshard_plan *plan, uint32_t src)
{
	return plan->cat->tensors[src].name;
}

static inline uint64_t src_rows(const struct wshard_st_tensor *t)
{
	return wshard_matrix_rows(t);
}

static inline uint64_t src_row_bytes(const struct wshard_st_tensor *t)
{
	uint64_t rows = src_rows(t);

	return rows ? (t->end - t->begin) / rows : 0;
}

/* plan_piece.c: appends piece p to t at its end.  Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err plan_push_piece(struct wshard_out_tensor *t,
				const struct wshard_piece *p,
				struct wshard_error *err);

/* plan_piece.c: appends rows [row0, row0 + nrows) of src, whole rows.
 * Returns as plan_push_piece. */
enum wshard_err plan_push_rows(const struct wshard_plan *plan,
			       struct wshard_out_tensor *t, uint32_t src,
			       uint64_t row0, uint64_t nrows,
			       struct wshard_error *err);

/*
 * plan_piece.c: rows of n sources laid side by side, each output row
 * holding columns [col0[i], col0[i] + ncols[i]) (elements) of row j of
 * every src[i] in turn: an operator fused along dimension 1 (GPTQ's and
 * AWQ's [in, out] weights).  The sources have the same rows, whole-byte
 * elements.  Returns WSHARD_OK, WSHARD_EINVAL (a row too long) or
 * WSHARD_ENOMEM.
 */
enum wshard_err plan_push_side_by_side(const struct wshard_plan *plan,
				       struct wshard_out_tensor *t, size_t n,
				       const uint32_t *src, const uint64_t *col0,
				       const uint64_t *ncols, struct wshard_error *err);

/* plan_piece.c: appends t to a rank's list, taking its pieces and name
 * (t is zeroed); *cap is the list's capacity.  Returns WSHARD_OK or
 * WSHARD_ENOMEM. */
enum wshard_err plan_rank_push(struct wshard_rank_plan *rp, size_t *cap,
			       struct wshard_out_tensor *t, struct wshard_error *err);

/* plan_extra.c: every rank's constant tensors of the rules' "extra" list,
 * one per layer of nlayers where per layer, and where an extra's "if" bounds
 * its layers (fails for every layer number past any model's),
 * in the layers past them up to written (the highest layer a tensor was
 * written for; an MTP draft's layers num_hidden_layers on).  Returns
 * WSHARD_OK, WSHARD_ENOMEM or an image_norm's WSHARD_EINVAL. */
enum wshard_err plan_build_extras(struct wshard_plan *plan, const struct wshard_rules *rules,
				  long nlayers, long written, size_t *caps,
				  struct wshard_error *err);

/* plan_piece.c: a constant piece of one element, value in dtype (F32, BF16
 * or F16). */
struct wshard_piece plan_const_piece(double value, enum wshard_dtype dtype);

/* plan_piece.c: appends len zero bytes.  Returns as plan_push_piece. */
enum wshard_err plan_push_zeros(struct wshard_out_tensor *t, uint64_t len,
				struct wshard_error *err);

/*
 * plan_piece.c: what a rank's share of m's split dimension (share rows
 * of a fused part or a "row" split, or columns) is padded to: the
 * rule's "pad_to" when --tp is above 1 (or its pad_always) and share is
 * narrower, else share.  Zeros (or "pad_value") follow the share's
 * bytes; only BF16, F16 and F32 sources are padded (a quantized expert's
 * blocks and scales would be too).  Returns WSHARD_OK and *out, or
 * WSHARD_EINVAL naming the tensor.
 */
enum wshard_err plan_pad_share(const struct wshard_plan *plan, const struct member *m,
			       uint64_t share, uint64_t *out, struct wshard_error *err);

/* plan_piece.c: padding rows after a rank's *nrows of m, up to its
 * "pad_to" (plan_pad_share); *nrows becomes the padded count.  Returns
 * as plan_pad_share, or plan_push_piece's WSHARD_ENOMEM. */
enum wshard_err plan_pad_rows(const struct wshard_plan *plan, struct wshard_out_tensor *t,
			      const struct member *m, uint64_t *nrows, struct wshard_error *err);

/* plan_piece.c: the error for dimension dim (size) of m's source not
 * divisible by --tp, naming the config key of the rule's shape there
 * when it is a bare one, else the tensor.  Returns WSHARD_EINVAL. */
enum wshard_err plan_indivisible(const struct wshard_plan *plan,
				 const struct member *m, int dim,
				 uint64_t size, struct wshard_error *err);

/* plan_quant.c: config.json's quantization_config object, or NULL. */
json_t *plan_quant_config(const struct wshard_plan *plan);

/* plan_quant.c: the KV-cache method of the checkpoint's quantization
 * method: none (unquantized, GPTQ, AWQ), vLLM's BaseKVCacheMethod (fp8,
 * modelopt, quark: "when": "quantized" extras as written) or
 * compressed-tensors' (F32 [1] scales and zero points). */
enum kv_method { KV_NONE, KV_BASE, KV_COMPRESSED };
enum kv_method plan_kv_cache_method(const struct wshard_plan *plan);

/* plan_extra.c: the dtype the engine runs the model in: --dtype when
 * given, else config.json's torch_dtype (or "dtype"); BF16 when it names
 * none of F32, F16 and BF16. */
enum wshard_dtype plan_model_dtype(const struct wshard_plan *plan);

/* plan_extra.c: the dtype vLLM 0.32 gives a pooling model's head
 * (ModelConfig.head_dtype): F32 where config.json names no head_dtype,
 * the model's where it says "model", else the dtype it names; WSHARD_EINVAL
 * for a name vLLM refuses. */
enum wshard_err plan_head_dtype(const struct wshard_plan *plan, enum wshard_dtype *dtype,
				struct wshard_error *err);

/* plan_quant.c: whether m's source, of dtype dt, is a weight scale vLLM
 * holds in F32 though the checkpoint does not (compressed-tensors' 8-bit
 * schemes). */
bool plan_f32_scale(const struct wshard_plan *plan, const struct member *m,
		    enum wshard_dtype dt);

/* plan_quant.c: WSHARD_OK, or WSHARD_EINVAL naming config.json's
 * quant_method, its setting or compressed-tensors format when wshard does
 * not write its layout (GPTQ with activation order, NVFP4, ...). */
enum wshard_err plan_check_method(const struct wshard_plan *plan, struct wshard_error *err);

/* plan_extra.c: the source tensor the rules call name: under that name,
 * or under the one a "source_renames" entry or "source_prefix" reads as
 * it; NULL when the checkpoint has none. */
const struct wshard_src_tensor *plan_source_named(const struct wshard_plan *plan,
						   const struct wshard_rules *rules,
						   const char *name);

/*
 * plan_values.c: t's pieces produce to's dtype (plan_convert_dtype; ints:
 * I32 and I64 sources too), or m's rule's "times_sqrt", "neg_exp",
 * "zero_mean" or "plus" values.
 */
void plan_convert_dtype(enum wshard_dtype to, struct wshard_out_tensor *t, bool ints);
enum wshard_err plan_times(const struct wshard_plan *plan, const struct member *m,
			   struct wshard_out_tensor *t, struct wshard_error *err);
enum wshard_err plan_neg_exp(const struct wshard_plan *plan, const struct member *m,
			     struct wshard_out_tensor *t, struct wshard_error *err);
/* zero_mean: the source's mean, read and computed once a group
 * (plan_source_mean), then each rank's pieces marked (plan_zero_mean). */
enum wshard_err plan_source_mean(const struct wshard_plan *plan, const struct member *m,
				 float *mean, struct wshard_error *err);
void plan_zero_mean(const struct wshard_plan *plan, const struct member *m,
		    struct wshard_out_tensor *t, float mean);
enum wshard_err plan_plus(const struct wshard_plan *plan, const struct member *m,
			  struct wshard_out_tensor *t, struct wshard_error *err);

/* plan_tie.c: where config.json ties the head to the embedding but the
 * checkpoint ships a head of its own whose bytes differ (the rules' tie
 * "drop" name, which another rule matches), unties plan->config as vLLM
 * does and sets plan->untied_by_checkpoint.  Returns WSHARD_OK, WSHARD_EIO
 * or WSHARD_ENOMEM. */
enum wshard_err plan_untie(struct wshard_plan *plan, const struct wshard_rules *rules,
			   struct wshard_error *err);

/* plan_quant.c: WSHARD_OK, or WSHARD_EINVAL when a column split of m's
 * source (a group scale or zero point, a packed weight) by --tp would cut a
 * group of input columns or an int32 word. */
enum wshard_err plan_check_groups(const struct wshard_plan *plan, const struct member *m,
				  struct wshard_error *err);

/* plan_quant.c: WSHARD_OK, or WSHARD_EINVAL when cutting dimension dim of
 * m's source, a GPTQ or AWQ [in, out] tensor, into ways parts would cut a
 * group of inputs or an int32 word. */
enum wshard_err plan_check_inout(const struct wshard_plan *plan, const struct member *m,
				 int dim, uint64_t ways, struct wshard_error *err);

/* plan_quant.c: whether the checkpoint is ModelOpt's NVFP4 (quant_method
 * modelopt, quant_algo NVFP4). */
bool plan_modelopt_nvfp4(const struct wshard_plan *plan);

/* plan_quark.c: WSHARD_OK where every Quark config (global_quant_config,
 * each of layer_quant_config and layer_type_quant_config) is a scheme
 * wshard writes, else WSHARD_EINVAL naming the first that is not. */
enum wshard_err plan_check_quark(const struct wshard_plan *plan, struct wshard_error *err);

/* plan_quark.c: whether the checkpoint is Quark's (quant_method quark). */
bool plan_quark_method(const struct wshard_plan *plan);

/* plan_quark.c: the group size of a Quark W4A16 checkpoint (vLLM's
 * QuarkW4A16Int4), 0 for any other (read once into
 * plan->quark_w4a16_group by plan_set_quant_keys). */
long long plan_quark_w4a16_group(const struct wshard_plan *plan);

/* plan_quark.c: whether a Quark checkpoint has a config of FP8 weights in
 * blocks (vLLM's QuarkW8A8Fp8PerBlock); plan_quark_mxfp6: of MXFP6 weights
 * (QuarkOCP_MX's, four values in three bytes). */
bool plan_quark_fp8_block(const struct wshard_plan *plan);
bool plan_quark_mxfp6(const struct wshard_plan *plan);

/* plan_quark.c: the name the rules match source name by: in a Quark W4A16
 * checkpoint X.weight (I32), X.weight_scale and X.weight_zero_point are
 * AWQ's [in, out] X.qweight, X.scales and X.qzeros, and in one with FP8
 * blocks a 2-D X.weight_scale beside an FP8 X.weight is DeepSeek's
 * X.weight_scale_inv (written in buf, of size bytes); else name.
 * plan_quark_out: an output name of these given back Quark's suffix (out
 * reallocated; NULL when out of memory). */
const char *plan_quark_as(const struct wshard_plan *plan, const char *name, char *buf,
			  size_t size);
char *plan_quark_out(const struct wshard_plan *plan, char *out);

/* plan_quark.c: WSHARD_EINVAL, naming the tensor, where m is Quark's
 * W4A16 experts' weight cut through a word of 8 or a group vLLM's
 * QuarkW4A16Int4MoEMethod cannot halve (plan_quark_w4a16_div) or under
 * --expert-parallel, its MXFP6 experts', not checked against vLLM, or its
 * MXFP8 experts', which vLLM does not load; else WSHARD_OK. */
enum wshard_err plan_check_quark_experts(const struct wshard_plan *plan, const struct member *m,
					 struct wshard_error *err);

/* plan_quark_experts.c: Quark's W4A16 experts, planned as AWQ's (each rank's
 * X.w13_qweight [E, H, 2I/8] and X.w2_qweight [E, I, H/8] I32, qzeros and
 * scales [E, groups, ...]), made what vLLM's QuarkW4A16Int4MoEMethod
 * holds once its weight loader has repacked them (quark_moe.py
 * get_weight_loader): X.w13_weight U8 [E, 2I, H/2], X.w2_weight U8
 * [E, H, I/2], X.w13_weight_zero_point U8 [E, I, H/group],
 * X.w2_weight_zero_point U8 [E, H/2, I/group], X.w13_weight_scale
 * [E, 2I, H/group] and X.w2_weight_scale [E, H, I/group] (I a rank's
 * intermediate rows): each piece transposed, the words' 4-bit values
 * repacked (enum wshard_int4), scales and zero points repeated where vLLM
 * halves the group (plan_quark_w4a16_div: its group_size_div_factor, 0
 * where it cannot; plan_quark_repeats: whether m is a down projection's
 * scales or zero points so repeated, planned whole).  Returns an err. */
enum wshard_err plan_quark_w4a16_experts(struct wshard_plan *plan, struct wshard_error *err);
uint64_t plan_quark_w4a16_div(uint64_t group, uint64_t share, uint64_t hidden);
bool plan_quark_repeats(const struct wshard_plan *plan, const struct member *m);

/* plan_quark_experts.c: beside each of a Quark checkpoint's I8 experts (each
 * rank's X.w13_weight and X.w2_weight, [E, ...]) whose input zero points
 * it lacks (dynamic activations), X.w13_input_zero_point I8 [E, 2] and
 * X.w2_input_zero_point I8 [E] of zeros on that rank, as vLLM's
 * QuarkW8A8Int8MoEMethod.create_weights registers them (torch.zeros)
 * whatever the activations.  Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err plan_quark_input_zeros(struct wshard_plan *plan, size_t *caps,
				       struct wshard_error *err);

/* plan_quark.c: whether m is a linear layer's static input scale or input
 * zero point of which vLLM keeps one, whatever the fused parts: Quark's
 * INT8 (QuarkW8A8Int8's BasevLLMParameter [1], each part loaded over the
 * one before, so the last part's stays: v_proj's, up_proj's, their names
 * read in sorted order; Quark calibrates them on one input alike). */
bool plan_one_input_scale(const struct wshard_plan *plan, const struct member *m);

/* plan_quark.c: whether m is a 1-D per-channel weight scale or weight
 * zero point of Quark's INT8, which vLLM's QuarkW8A8Int8 holds as [rows, 1]
 * (ChannelQuantScaleParameter, the checkpoint's [rows] unsqueezed). */
bool plan_int8_channel(const struct wshard_plan *plan, const struct member *m);

/* plan_quant.c: whether t holds an FP4 or FP6 weight packed under its own
 * name, X.weight of U8 bytes of two FP4 values (ModelOpt's NVFP4, Quark's
 * MXFP4), its last dimension half the weight's, or of four FP6 values in
 * three bytes (Quark's MXFP6), three quarters of it. */
bool plan_fp4_weight(const struct wshard_plan *plan, const struct wshard_st_tensor *t);

/* plan_quant.c: WSHARD_OK, or WSHARD_EINVAL naming m's source when m is
 * GPTQ's or AWQ's experts (their w13 qweight) that vLLM
 * would load into its MoE WNA16 layout, not the AutoGPTQ or AutoAWQ MoE
 * layout wshard writes. */
enum wshard_err plan_check_experts(const struct wshard_plan *plan, const struct member *m,
				   struct wshard_error *err);

/* plan_quant.c: for t, a rank's stacked GPTQ experts' qweight made from
 * m, the zero w13_bias or w2_bias vLLM keeps beside it, in dt (the
 * model's dtype), appended to rp (*cap its capacity); nothing for other
 * tensors.  Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err plan_push_expert_bias(const struct wshard_plan *plan, const struct member *m,
				      const struct wshard_out_tensor *t, enum wshard_dtype dt,
				      struct wshard_rank_plan *rp, size_t *cap,
				      struct wshard_error *err);

/* plan_quant.c: once plan_check_method passed, the quantization keys the
 * per-tensor steps read: for an fbgemm_fp8 checkpoint plan->input_scale_ub
 * (quantization_config's activation_scale_ub) and plan->has_input_scale_ub
 * (cleared for other methods); plan->quark_w4a16_group,
 * plan->quark_fp8_block and plan->quark_mxfp6. */
void plan_set_quant_keys(struct wshard_plan *plan);

/* plan_quant.c: for t, a rank's X.weight_scale, where plan_set_quant_keys
 * found an activation_scale_ub, the X.input_scale_ub vLLM's
 * FBGEMMFp8LinearMethod keeps beside it (F32 []), appended to rp (*cap its
 * capacity); nothing for other tensors or plans.
 * Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err plan_push_input_ub(const struct wshard_plan *plan,
				   const struct wshard_out_tensor *t,
				   struct wshard_rank_plan *rp, size_t *cap,
				   struct wshard_error *err);

/*
 * A rule's shape as config.json gives it: evaluated once for the rule (a
 * MoE checkpoint has hundreds of thousands of members and a few dozen
 * rules), or once a layer where an expression reads n (Nemotron-NAS's
 * block_configs[n]).  An expression that fails is not kept: its error is
 * met again.
 */
struct shape_memo {
	bool done;
	bool per_layer;		/* the shape read n: kept for layer alone */
	long layer;
	uint64_t want[WSHARD_MAX_DIMS];
};

/* plan_shape.c: m's source against the shape its rule gives, evaluated
 * into *memo (the rule's) the first time.  Returns WSHARD_OK,
 * WSHARD_EINVAL (the shapes differ, or no config.json to check against:
 * the message names the tensor) or an error of evaluating the shape. */
enum wshard_err plan_check_shape(const struct wshard_plan *plan,
				 const struct member *m, struct shape_memo *memo,
				 struct wshard_error *err);

/*
 * plan_stage.c: with --pp P > 1, the tp ranks built so far become P * tp,
 * stage s's rank t holding rank t's outputs of the decoder layers that
 * stage runs and the others the rules' "pipeline" gives it; pp_layers:
 * --pp-layers, or NULL.  Returns
 * WSHARD_OK, WSHARD_EINVAL (a split that does not fit the layers, an
 * output the rules give no stage) or WSHARD_ENOMEM.
 */
enum wshard_err plan_split_stages(struct wshard_plan *plan, const struct wshard_rules *rules,
				  long nlayers, const int *pp_layers, struct wshard_error *err);

/* plan_match.c: layers the checkpoint should have: config.json's
 * num_hidden_layers, else the highest seen + 1. */
long plan_count_layers(const struct wshard_plan *plan, const struct wshard_rules *rules);

/* Layer numbers at or past this are not layers (a name's number, not a
 * model's depth). */
#define PLAN_MAX_LAYERS 100000

/* plan_required.c: whether list (n names) holds s. */
bool plan_in_list(char *const *list, size_t n, const char *s);
/* Whether rule r applies in layer n (-1: no layer): its "if" holds, when
 * it has one.  Returns WSHARD_OK or WSHARD_EINVAL. */
enum wshard_err plan_rule_applies(const struct wshard_plan *plan, const struct rules_rule *r,
				  long n, bool *out, struct wshard_error *err);
/* Rule r's captures *cap as its output and "unless" read them: {n} set
 * by its "layer" where it has one.  Returns WSHARD_OK or WSHARD_EINVAL. */
enum wshard_err plan_rule_capture(const struct wshard_plan *plan, const struct rules_rule *r,
				  struct rules_capture *cap, struct wshard_error *err);
/* Whether r passes over a source it matched with *cap: the checkpoint
 * holds the tensor its "unless" names.  Returns WSHARD_OK, WSHARD_EINVAL
 * or WSHARD_ENOMEM. */
enum wshard_err plan_rule_yields(const struct wshard_plan *plan, const struct rules_rule *r,
				 const struct rules_capture *cap, bool *out,
				 struct wshard_error *err);
/* Whether r's "if" fails for every layer number in a run past any
 * model's: its condition bounds its own layers (a tower's), which may
 * outnumber the text model's. */
bool plan_bounds_layers(const struct wshard_plan *plan, const struct rules_rule *r);
/* Every rule that is not optional matched a source tensor in each layer it
 * is required in (seen: what matched, per rule and layer up to width);
 * else WSHARD_EINVAL naming the missing tensor. */
enum wshard_err plan_check_required(struct wshard_plan *plan, const struct wshard_rules *rules,
				    const bool *seen, long nlayers, long width, bool tied,
				    struct wshard_error *err);

/*
 * plan_unstack.c: the catalog's tensors that the rules' "experts_in_rows"
 * name, each read as its experts NAME.E (views of its rows, added to the
 * catalog and marked unstacked; an earlier plan's views dropped first).
 * Returns WSHARD_OK, WSHARD_EINVAL (rows that are no whole number of
 * experts, a view's name taken) or WSHARD_ENOMEM.
 */
enum wshard_err plan_unstack(struct wshard_plan *plan, const struct wshard_rules *rules,
			     struct wshard_error *err);

/*
 * plan_dequant.c: the F8_E4M3 weights that a rule's "dequant" reads made
 * BF16 in the catalog, as vLLM dequantizes them (their scales found and
 * checked); an earlier plan's undone first.  Returns WSHARD_OK,
 * WSHARD_EINVAL (naming the tensor), WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err plan_dequant(struct wshard_plan *plan, const struct wshard_rules *rules,
			     struct wshard_error *err);

/*
 * plan_match.c: every source tensor matched to its rule, checked
 * (uncovered tensors, required ones missing, shapes against config.json)
 * and sorted by output name into *out_members (*out_n of them, each
 * out malloc'd).  Returns WSHARD_OK, WSHARD_EINVAL or WSHARD_ENOMEM.
 */
enum wshard_err plan_match_sources(struct wshard_plan *plan,
				   const struct wshard_rules *rules,
				   struct member **out_members, size_t *out_n,
				   struct wshard_error *err);

/* plan_split.c: --tp against config.json's head counts, checked once so
 * that the messages name its fields; the kv heads of q/k/v operator op
 * (NULL: num_key_value_heads) in layer (-1: none).  Returns WSHARD_OK or
 * WSHARD_EINVAL. */
enum wshard_err plan_check_heads(const struct wshard_plan *plan, const struct rules_op *op,
				 long layer, struct wshard_error *err);

/* plan_fuse.c: the kv heads of q/k/v operator op in layer (-1: none) in
 * *out: its "kv_heads" (which may read n), or num_key_value_heads (op NULL
 * or without one).  Returns WSHARD_OK or the expression's WSHARD_EINVAL. */
enum wshard_err plan_op_kv_heads(const struct wshard_plan *plan, const struct rules_op *op,
				 long layer, int64_t *out, struct wshard_error *err);

/*
 * plan_fuse.c: parts[p], off[p] and len[p] of each part of the fused
 * operator of the n members m of one item (FUSE), or of its one source
 * (UNPACK): the member that fills it, its first row there and its rows;
 * parts[p] NULL for a "zero" part the checkpoint lacks (len[p] its rows).
 * Returns WSHARD_OK or WSHARD_EINVAL (a part missing or filled twice).
 */
enum wshard_err plan_fused_parts(const struct wshard_plan *plan,
				 const struct wshard_rules *rules,
				 const struct member *m, size_t n,
				 const struct member **parts, uint64_t *off,
				 uint64_t *len, struct wshard_error *err);

/* plan_fuse.c: the first part of parts (op's) with a source. */
const struct member *plan_first_part(const struct rules_op *op,
				     const struct member *const *parts);

/*
 * plan_split.c: one item of group g from the n members m[] that produce
 * it (the parts of a fused operator, or one source), appended to every
 * rank's tensor.  Returns WSHARD_OK, WSHARD_EINVAL or WSHARD_ENOMEM.
 */
enum wshard_err plan_build_item(const struct wshard_plan *plan,
				const struct wshard_rules *rules,
				struct group_out *g, const struct member *m,
				size_t n, struct wshard_error *err);

/*
 * plan_concat.c: the output of the n members m[] of a "concat" rule, the
 * row pieces {e} = 0 .. n-1 of one tensor, split as the rule says ("row",
 * "vocab" or "replicate") over their rows together; g's shape is a
 * rank's.  Returns WSHARD_OK, WSHARD_EINVAL (a piece missing or unlike
 * the first, rows indivisible by --tp) or WSHARD_ENOMEM.
 */
enum wshard_err plan_split_concat(const struct wshard_plan *plan, struct group_out *g,
				  const struct member *m, size_t n, struct wshard_error *err);

/* plan_view.c: plan->view_rows for the n members m[] whose rule has
 * "rows" (leading dimensions merged into the rows of a "col" split).
 * Returns WSHARD_OK, WSHARD_EINVAL (too few dimensions) or WSHARD_ENOMEM. */
enum wshard_err plan_set_views(struct wshard_plan *plan, const struct member *m, size_t n,
			       struct wshard_error *err);

/*
 * plan_view.c: rank r holds columns [r * cols / tp, (r + 1) * cols / tp)
 * of every row, cols being the dimension after the rule's "rows" leading
 * dimensions (dimension 1 without), with the dimensions after it;
 * shape[] shrinks there.  Returns WSHARD_OK, WSHARD_EINVAL (indivisible,
 * or a byte cut; the message names the tensor) or WSHARD_ENOMEM.
 */
enum wshard_err plan_split_cols(const struct wshard_plan *plan, struct group_out *g,
				const struct member *m, uint64_t *shape,
				struct wshard_error *err);

/*
 * plan_reorder.c: the pieces of a transposed split without "chunks": shp the
 * source as [E, A, B], lead 1 (or 0 for a matrix, E = 1), cut in
 * dimension dim (1 or 2), out its rank shape; a "replicate" rule's whole
 * on every rank, as at tp 1.  Returns WSHARD_OK, WSHARD_EINVAL
 * (indivisible) or WSHARD_ENOMEM.
 */
enum wshard_err plan_transposed_cut(const struct wshard_plan *plan, struct group_out *g,
				    const struct member *m, const uint64_t *shp, int dim,
				    int lead, uint64_t *out, struct wshard_error *err);

/*
 * plan_reorder.c: "transpose_cols" C on a whole 2-D source [R, X]: each
 * row a matrix [X/C, C], written transposed; shape[] stays [R, X].
 * Returns WSHARD_OK, WSHARD_EINVAL (not 2-D, or C does not divide X) or
 * WSHARD_ENOMEM.
 */
enum wshard_err plan_transposed_rows(const struct wshard_plan *plan, struct group_out *g,
				     const struct member *m, uint64_t *shape,
				     struct wshard_error *err);

/* plan_reorder.c: t's pieces from a source whose rule has "permute_rows"
 * (m[0..n) the group's members), each whole blocks, as a piece a range a
 * block.  Returns WSHARD_OK, WSHARD_EINVAL or WSHARD_ENOMEM. */
enum wshard_err plan_permute_rows(const struct wshard_plan *plan, const struct member *m,
				  size_t n, struct wshard_out_tensor *t, struct wshard_error *err);

/* plan_reorder.c: a "col" split of [E, A, B] with "deinterleave" (a
 * rank's cut of A, even rows first) or "beside" ([A, E, B/tp]); shape the
 * source's, cut by plan_split_cols; rb the bytes of one index of the
 * cut dimension. */
enum wshard_err plan_split_reordered(const struct wshard_plan *plan, struct group_out *g,
				     const struct member *m, uint64_t *shape, uint64_t rb,
				     struct wshard_error *err);

/* plan_reorder.c: "chunks" with "interleave": rank r's cut (cut of each
 * chunk of clen) of every chunk, index by index; dim 2 a transposed [E,
 * A, B] (shp), dim 1 a matrix [E, B].  Returns WSHARD_OK, WSHARD_EINVAL
 * or WSHARD_ENOMEM. */
enum wshard_err plan_interleave_chunks(const struct wshard_plan *plan, struct group_out *g,
				       const struct member *m, const uint64_t *shp, int dim,
				       uint64_t clen, uint64_t cut, struct wshard_error *err);

/* plan_view.c: rows [row0, row0 + nrows) of q/k/v in vLLM's order (every q
 * head, every k head, every v head) from a "qkv_groups" source, stored by kv
 * group [kv, q/kv + 2, head_dim] (a "fuse" of k+v: [kv, 2, head_dim], rows
 * counted from the first k row); one piece a run of adjacent rows.
 * Returns WSHARD_OK, WSHARD_EINVAL (heads not a multiple of kv) or
 * WSHARD_ENOMEM. */
enum wshard_err plan_push_grouped(const struct wshard_plan *plan,
				  struct wshard_out_tensor *t, const struct member *m,
				  int64_t kv, uint64_t row0, uint64_t nrows,
				  struct wshard_error *err);

/* plan_view.c: rows [row0, row0 + nrows) of m's source, whole rows, each
 * block of the rule's "deinterleave" rows even rows first (vLLM's
 * permute_qk_weight_for_rotary).  Returns WSHARD_OK, WSHARD_EINVAL (a cut
 * inside a block) or WSHARD_ENOMEM. */
enum wshard_err plan_push_deinterleaved(const struct wshard_plan *plan,
					struct wshard_out_tensor *t, const struct member *m,
					uint64_t row0, uint64_t nrows,
					struct wshard_error *err);

/* plan_view.c: m's source whole on rank 0, as many zero bytes on every
 * other rank ("first").  Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err plan_split_first(const struct wshard_plan *plan, struct group_out *g,
				 const struct member *m, struct wshard_error *err);

/* plan_view.c: shape[0..*ndim) as the rule's "view" writes it, its
 * dimensions from view - 1 on merged into one, or its "reshape" (the
 * same elements).  Returns WSHARD_OK or WSHARD_EINVAL (fewer dimensions
 * than the view, or a reshape to another count). */
enum wshard_err plan_view_shape(const struct wshard_plan *plan, const struct member *m,
				uint64_t *shape, int *ndim, struct wshard_error *err);

/* plan_expert.c: the rank that holds expert e of num_experts under
 * expert parallelism (plan->placement, over plan->tp ranks). */
int plan_expert_owner(const struct wshard_plan *plan, long num_experts, long e);

/* plan_expert.c: the placement vLLM uses for opt->placement on this
 * checkpoint.  Returns it. */
enum wshard_placement plan_effective_placement(const struct wshard_catalog *cat,
					       const struct wshard_options *opt);

/*
 * plan_layout.c: sorts every rank's tensors into their file order, cuts
 * them into parts and lays out each part's header.  Returns WSHARD_OK,
 * WSHARD_EINVAL (two rules produce one output) or WSHARD_ENOMEM.
 */
enum wshard_err plan_layout(struct wshard_plan *plan, struct wshard_error *err);

/*
 * plan_layout.c: the output name of pattern for capture cap, as
 * rules_expand gives it, renamed as the rules' "rename_layers" says where
 * it applies (a malloc'd string, NULL when out of memory).
 */
char *plan_output_name(const struct wshard_plan *plan, const char *pattern,
		       const struct rules_capture *cap);

/*
 * plan_layout.c: where the source is a sentence-transformers model (its
 * modules.json names a Pooling module), vLLM picks its pooling runner and
 * holds no LM head: for output out of an LM head, a skip rule saying so
 * (its reason the manifest's); else NULL.
 */
const struct rules_rule *plan_pooled_head(const struct wshard_plan *plan, const char *out);

/*
 * plan_layout.c: the rules' "rename_layers" for this checkpoint into
 * plan (the first layer renamed, the prefix and the name).  Returns
 * WSHARD_OK, WSHARD_EINVAL (a bad expression; --pp where layers are
 * renamed) or WSHARD_ENOMEM.
 */
enum wshard_err plan_set_rename(struct wshard_plan *plan, const struct wshard_rules *rules,
				struct wshard_error *err);

/* The most channels an "image_norm" extra takes. */
#define WSHARD_IMAGE_NORM_MAX 8

/*
 * plan_image_norm.c: the values of an "image_norm" extra (which: its
 * scale or its shift), one per image channel, from the processor config
 * of checkpoint cat as vLLM reads it.  Sets *n to their count (at most
 * WSHARD_IMAGE_NORM_MAX), 0 when vLLM holds no such tensor: the map is
 * the identity, or no config asks for one.  Returns WSHARD_OK,
 * WSHARD_EINVAL (a malformed config, naming the file), WSHARD_EIO or
 * WSHARD_ENOMEM.
 */
enum wshard_err plan_image_norm(const struct wshard_catalog *cat,
				enum rules_image_norm which, double *vals, size_t *n,
				struct wshard_error *err);

#endif /* WSHARD_PLAN_IMPL_H */
