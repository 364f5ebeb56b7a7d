/*
 * rules.h - the rules stage, between the source (source/catalog.h) and
 * the plan.  It takes a rules file, the built-in one for config.json's
 * architecture (the JSON files of lib/rules/, embedded at build time) or
 * one given with --rules FILE, and gives back struct wshard_rules: for
 * each tensor name pattern, how the tensor is split, replicated, skipped,
 * fused or converted, plus the extra constant tensors, the tied
 * embeddings, the config defaults, and the FP8 scale rules derived beside
 * the weights.  Shapes, sizes and conditions stay expressions over
 * config.json; expr.h evaluates them against a catalog's struct
 * wshard_config when the plan applies the rules.
 *
 * rules.c owns these types (matching names, expanding patterns,
 * freeing); rules_load.c finds a rules file; rules_parse.c parses it,
 * with rules_extra.c, rules_op.c, rules_tie.c and rules_scale.c.  Not
 * part of the API.
 */
#ifndef WSHARD_RULES_H
#define WSHARD_RULES_H

#include <jansson.h>

#include "wshard.h"

struct wshard_config;

enum rule_kind {
	RULE_ROW,		/* dimension 0 split by tp */
	RULE_COL,		/* dimension 1 split by tp */
	RULE_VOCAB,		/* rows padded to 64, then split by tp */
	RULE_REPLICATE,		/* whole on every rank */
	RULE_SKIP,		/* not written */
	RULE_FUSE,		/* one part of a fused operator */
	RULE_UNPACK,		/* a source holding every part of an operator */
	RULE_FIRST,		/* whole on rank 0, zeros on the others */
	RULE_REFUSE,		/* a checkpoint with it is refused (reason) */
};

/* How a fused operator cuts its parts across ranks. */
enum op_kind {
	OP_ROWS,	/* every part row-split by tp, concatenated */
	OP_QKV,		/* q split by heads, k/v by kv heads (replicated if tp > kv) */
	OP_REPLICATE,	/* every part whole, concatenated, on every rank */
};

#define RULES_PERMUTE_MAX 8	/* row ranges of a "permute_rows" block */
#define OP_MAX_PARTS 8

struct rules_op {
	char *name;
	enum op_kind kind;
	int nparts;
	char *parts[OP_MAX_PARTS];
	/* "sizes": each part's rows as an expression over config.json, or
	 * NULL: how a source holding several parts is cut (vLLM's Gated
	 * DeltaNet conv1d holds q, k and v of unequal sizes). */
	char *sizes[OP_MAX_PARTS];
	/* "groups": for a part of an OP_ROWS operator, the number of groups it
	 * holds, or NULL: cut by rows where tp divides it, whole on every rank
	 * when it is 1 (vLLM's Mamba-2 replicates a single group of B and C,
	 * mamba_v2_sharded_weight_loader), refused otherwise. */
	char *groups[OP_MAX_PARTS];
	/* "kv_heads" of a q/k/v operator ("split": "qkv"): its k and v
	 * heads as an expression, or NULL: num_key_value_heads (MiMo-V2-
	 * Flash's sliding-window layers have twice the full ones'). */
	char *kv_heads;
	/* "zero": a part a checkpoint may lack (no source tensor), written as
	 * zeros of its "sizes" rows (vLLM's Whisper-like encoders make a zero
	 * bias for k_proj, which has none). */
	bool zero[OP_MAX_PARTS];
};

struct rules_rule {
	char *match;		/* pattern with {n} and {e} */
	char *output;		/* output name pattern */
	enum rule_kind kind;
	int op;			/* FUSE, UNPACK: index into ops */
	int part;		/* FUSE: (first) part index */
	int nparts;		/* FUSE: parts the source holds ("OP.a+b+c";
				 * more than 1 needs "sizes") ... */
	int order[OP_MAX_PARTS];	/* ... these, stacked in this order
					 * (GTE's up_gate_proj: up, then gate) */
	int also;		/* FUSE: a further part the source fills with
				 * the same bytes ("also"), or -1 */
	bool scale;		/* derived FP8 scale: one element is kept whole */
	uint8_t qrole;		/* derived: enum wshard_quant_role of its
				 * outputs (plan.h) */
	bool optional;		/* a source need not exist (else: one per layer) */
	bool pass_on;		/* "pass_on": the source, once taken, goes on
				 * to the next rule that matches too (the
				 * target's head as two MTP layers' heads) */
	bool block;		/* derived weight_scale_inv: block-wise FP8 scale */
	bool collapse;		/* derived per-expert input scale: w1's alone */
	bool grouped;		/* derived weight_scale / weight_zero_point:
				 * dimension 1 counts groups of input columns
				 * (one: per channel, whole beside a "col" split) */
	bool packed;		/* derived weight_packed: dimension 1 holds
				 * int32 words of packed values */
	int alt[2];		/* a ".weight" rule: the derived rules that
				 * stand in for it, weight_packed and GPTQ's
				 * or AWQ's qweight (0: none) */
	bool inout;		/* derived qweight / qzeros / scales of GPTQ
				 * and AWQ: stored [in, out], dimension 1
				 * holds the outputs (a "row" split cuts it,
				 * a fused operator's parts lie side by side
				 * there), dimension 0 the inputs or groups */
	char *cond;		/* "if": expression over config.json and n, or NULL */
	char *num_experts;	/* "num_experts": EXPR (may read n): the
				 * experts the stacked output holds
				 * (Nemotron-H Puzzle's per-layer counts);
				 * NULL: config.json's */
	char *experts_from;	/* "experts_from": EXPR over config.json: the
				 * rule takes experts {e} >= EXPR only, numbered
				 * e - EXPR (ERNIE-4.5-VL's vision experts after
				 * its text ones), or NULL */
	char *reason;		/* skip with "reason": a left-out tensor */
	char *missing;		/* "missing": said where the source is absent */
	char *layer;		/* "layer": EXPR over config.json: the {n} of a
				 * match without one, for its output and
				 * "unless" (an MTP draft's head from the
				 * target's lm_head), or NULL */
	char *unless;		/* "unless": a source name ({n}, {e} as
				 * captured): the rule passes over a tensor
				 * where the checkpoint holds this one, and
				 * needs none there; or NULL */
	bool has_dtype;		/* "dtype": the output's dtype, converted */
	bool model_dtype;	/* "dtype": "model": the model's (--dtype or
				 * config.json's), as vLLM casts a checkpoint's
				 * F32 norms into its BF16 parameters */
	bool head_dtype;	/* "dtype": "head": a pooling model's head, as
				 * vLLM's head_dtype: F32, or what config.json's
				 * head_dtype says ("model": the model's) */
	enum wshard_dtype dtype;
	bool dequant;		/* "dequant": an F8_E4M3 source (with its
				 * block scales) is read as the BF16 vLLM
				 * dequantizes it to (plan_dequant.c) */
	uint64_t from;		/* "from": bit d set for each source dtype d
				 * the rule takes; 0: any */
	int rows;		/* "rows": the leading dimensions that form a
				 * row (0: dimension 0 alone); a "col" split
				 * cuts the dimension after them */
	int view;		/* "view": the output's dimensions, the last
				 * ones merged into one (0: as split) */
	char *times_sqrt[2];	/* "times_sqrt": [A, B], expressions: every
				 * element multiplied by sqrt(A / B), or NULL */
	bool neg_exp;		/* "neg_exp": every element x written as
				 * -exp(x), F32 (vLLM's Mamba A from A_log) */
	bool zero_mean;		/* "zero_mean": a vector x written as
				 * x - mean(x), PyTorch's CPU arithmetic */
	bool has_plus;		/* "plus": every element x written as */
	double plus;		/* x + plus, in the output's dtype */
	/* "permute_rows": each block of permute_block rows (an expression)
	 * written as its row ranges [permute_from[i], permute_to[i]) in turn
	 * (expressions), npermute of them; 0: as it is */
	char *permute_block;
	size_t npermute;
	char *permute_from[RULES_PERMUTE_MAX], *permute_to[RULES_PERMUTE_MAX];
	bool kv_heads;		/* "kv_heads": a "row" split's rows are the kv
				 * heads': with more ranks than heads, a
				 * rank's head whole (as q/k/v's k and v) */
	bool transpose;		/* "transpose": each item's last two
				 * dimensions swapped (a 3-D "col" split) */
	int chunks;		/* "chunks": a column split's cut
				 * dimension holds this many equal parts,
				 * each cut by tp (0: one) */
	bool interleave;	/* "interleave": a rank's cuts of the
				 * chunks written index by index (index j
				 * of each chunk in turn), not chunk after
				 * chunk */
	bool experts;		/* "experts": a transposed split's dimension 0
				 * counts the experts: under --expert-parallel
				 * a rank's own, whole */
	char *deinterleave;	/* "deinterleave": rows per block (an
				 * expression); within each block even rows
				 * first, then odd ones; NULL: none */
	bool deinterleave_cut;	/* "deinterleave": true on a "col" split: a
				 * rank's cut is one such block */
	char *transpose_cols;	/* "transpose_cols": on a "replicate" with
				 * "transpose" of a 2-D source [R, X], each
				 * row a matrix of this many columns (an
				 * expression), [X/C, C], written transposed
				 * [C, X/C]: BAGEL's patch embedding, a Linear
				 * over (p, p, c) patches, held as vLLM's
				 * Conv2d [O, c, p, p]; NULL: none */
	int nreshape;		/* "reshape": the output's dimensions (0:
				 * none), each an expression (tp allowed) */
	char *reshape[WSHARD_MAX_DIMS];
	bool beside;		/* "beside": a "col" split with "rows": 2 of
				 * [E, A, B] written [A, E, B/tp], each
				 * expert's cut beside the one before */
	bool qkv_groups;	/* "qkv_groups": an "unpack" q/k/v source's rows
				 * are kv-head groups, [kv, q/kv + 2,
				 * head_dim]: each group's q heads, its k
				 * head, its v head (Falcon, Bloom) */
	char *pad_to;		/* "pad_to": with --tp above 1, a rank's share
				 * of a fused part's rows or of a "col" split's
				 * columns narrower than this (an expression)
				 * is followed by zeros up to it (vLLM's
				 * padded expert width); NULL: none */
	bool pad_always;	/* "pad_to" on a part of a "replicate"
				 * operator, or on a "row" split: padded at
				 * tp 1 too */
	bool has_pad_value;	/* "pad_value": "pad_to"'s rows hold this */
	double pad_value;	/* (a number, or -inf, inf), not zeros */
	/* "prime_heads": [FROM, HEADS, LAYERS] on a "row" split: the rows
	 * are hash heads of prime sizes, the smallest unused primes >= FROM
	 * (an expression), HEADS (an expression) a layer, layer n's the
	 * i-th HEADS of them where n is element i of config array LAYERS;
	 * rank r holds its heads' rows (plan_prime.c); NULLs: none */
	char *prime_heads[3];
	bool concat;		/* "concat": the sources {e} matches are
				 * row pieces of one tensor, {e} from 0,
				 * split together (plan_concat.c) */
	int nshape;		/* -1: no shape check */
	char *shape[WSHARD_MAX_DIMS];	/* expressions over config keys */
};

/* The per-channel affine map of an image processor's rescale and
 * normalisation, as vLLM's FusedMMInputNorm holds it: scale
 * rescale_factor/std, shift -mean/std. */
enum rules_image_norm {
	RULES_IMAGE_NORM_NONE,
	RULES_IMAGE_NORM_SCALE,
	RULES_IMAGE_NORM_SHIFT,
};

struct rules_extra {
	char *name;		/* pattern with {n}: one per layer seen */
	enum wshard_dtype dtype;
	double value;
	char *option;		/* "attn_scales" or NULL (always) */
	bool model_dtype;	/* "dtype": "model": the engine's model dtype */
	bool when_quantized;	/* "when": "quantized": only with a
				 * quantization_config in config.json */
	char *with;		/* "with": a source name pattern with {n}: only
				 * in the layers whose source holds it (the
				 * attention layers of a hybrid model), or NULL;
				 * with {i} in name and with, one for each {i}
				 * of a source it matches in the layer */
	char *cond;		/* "if": a condition with n: only in the layers
				 * where it holds (a name with {n}), or NULL */
	char *each_count;	/* "each": {"count", "if"}: one per value of {i}
				 * from 0 to count - 1 (an expression over
				 * config.json) for which the condition "if"
				 * (with i, and n in a layer; NULL: always)
				 * holds: HRM-Text's attention per step */
	char *each_if;
	enum rules_image_norm image_norm;	/* "image_norm": a vector
				 * from the image processor's config instead
				 * of "value" (plan_image_norm.c) */
	char *arange;		/* "arange": EXPR over config.json: an I64
				 * [1, EXPR] of 0 .. EXPR - 1 instead of
				 * "value" (BERT's position_ids buffer) */
	char *sinusoid[2];	/* "sinusoid": [POSITIONS, CHANNELS], EXPRs
				 * over config.json: Whisper's F32 sinusoid
				 * table instead of "value", or NULLs */
	char *len;		/* "len": EXPR over config.json: a vector of
				 * EXPR copies of "value" (a parameter vLLM
				 * builds as ones and never loads), or NULL */
};

/* Which stages of a pipeline hold a tensor outside the decoder layers
 * (a "pipeline" rules key's "stages" value). */
enum rules_stage {
	RULES_STAGE_FIRST,	/* "first" */
	RULES_STAGE_LAST,	/* "last" */
	RULES_STAGE_ALL,	/* "all" */
};

struct rules_stage_rule {
	char *pattern;		/* an fnmatch pattern of output names */
	enum rules_stage stage;
};

/* One entry of "experts_in_rows": a source tensor that match names (as a
 * rule's match: {n}, a trailing *) holds count (an expression) experts
 * one after another by rows, DBRX's ffn.experts.mlp.w1 [E*I, H]; the plan
 * reads it as count tensors NAME.E, E from 0, a share of its rows each
 * (plan_unstack.c), which rules then match with {e}.  rows (an
 * expression, or NULL) gives each view's rows instead, from the tensor's
 * start: rows past count*rows (a release's zero padding) are not read. */
struct rules_unstack {
	char *match;
	char *count;
	char *rows;
};

struct wshard_rules {
	char *name;
	size_t narchs;
	char **archs;
	size_t nrules;
	struct rules_rule *rules;
	size_t nops;
	struct rules_op *ops;
	size_t nextras;
	struct rules_extra *extras;
	/* Tied embeddings. */
	char *tie_source;	/* the tensor that feeds the tied output */
	char *tie_output;	/* the name written */
	char *tie_output_if;	/* where this holds (or NULL), ... */
	char *tie_output_alt;	/* ... this name instead */
	char *tie_if;		/* tied where this holds (or NULL: config.json's
				 * tie_word_embeddings, else tie_default) */
	size_t ntie_drop;
	char **tie_drop;	/* source names skipped when tied */
	bool tie_default;	/* when config.json does not say */
	bool tie_default_holds;	/* "default_holds": a tie by tie_default
				 * stands whatever head the checkpoint ships */
	bool tie_always;	/* whatever config.json says (Gemma) */
	bool tie_copy;		/* "copy": the source keeps its own name, and
				 * tie_output is a copy of it, cut by the rule
				 * that writes tie_output (tie_copy_rule) */
	const struct rules_rule *tie_copy_rule;
	/* "defaults": integers for config keys config.json may omit (the
	 * model class's own defaults), or NULL */
	json_t *defaults;
	/* "no_expert_parallel": why these rules do not write
	 * --expert-parallel (convert refuses it), or NULL */
	char *no_ep;
	/* "source_prefix": a source name that does not begin with it is
	 * matched as if it did, as vLLM prefixes it (Bloom's and GPT-2's
	 * "transformer."), or NULL */
	char *source_prefix;
	/* "source_renames": a source name beginning with src_from[i] (the
	 * first such i) is matched with src_to[i] in its place, as vLLM's
	 * hf_to_vllm_mapper renames it; before source_prefix */
	char **src_from, **src_to;
	size_t nsrc_renames;
	/* "num_layers": an expression for vLLM's decoder layer count where
	 * num_hidden_layers is not it (Cosmos 3 Edge's: two a block), or
	 * NULL */
	char *num_layers;
	/* "weight_folders": folders of the checkpoint whose weights vLLM
	 * reads too (a model class's secondary_weights), folder_config[i]
	 * the config key folder[i]'s config.json is read under, or NULL */
	char **folder, **folder_config;
	size_t nfolders;
	/* "copy_folders": folders of the checkpoint vLLM reads at run time
	 * but not as the model's weights (FunAudioChat's speech tokenizer,
	 * Phi-4-multimodal's LoRA adapters), copied whole where present */
	char **copy_folder;
	size_t ncopy_folders;
	/* "weight_files": top-level safetensors files vLLM reads beside the
	 * weights as a model class's secondary_weights with a prefix
	 * (Clef-Omni's joint_head.safetensors under pooler.head.): file[i]'s
	 * tensors are named file_prefix[i] followed by their own names */
	char **file, **file_prefix;
	size_t nfiles;
	/* "rename_layers": decoder layers that vLLM holds under another name
	 * from layer rename_from (an expression) on: an output beginning with
	 * rename_prefix for layer n >= that begins with rename_to for layer
	 * n - rename_from instead (Gemma 4's kv-shared layers); see
	 * rename_add.  NULL when absent. */
	char *rename_prefix, *rename_to, *rename_from;
	/* rename_from is "add": every layer n under rename_prefix is held as
	 * layer n + rename_from under rename_to (MiMo's MTP draft numbers its
	 * layers on from the target's) */
	bool rename_add;
	size_t nunstack;
	struct rules_unstack *unstack;	/* "experts_in_rows" */
	/* "tp_divides": expressions of config.json keys that --tp must
	 * divide (Mamba-2's n_groups, which vLLM would replicate instead) */
	size_t ntp_divides;
	char **tp_divides;
	/* "requires": config.json keys that must be there and not null,
	 * defaults notwithstanding (TeleChat2's num_key_value_heads, which
	 * vLLM's config class leaves None when absent) */
	size_t nrequires;
	char **requires;
	/* "refuse_beside": files beside the weights (paths below the
	 * checkpoint's folder) with which the checkpoint is refused, and
	 * why: what vLLM reads from them changes the weights it keeps
	 * (jina-embeddings-v5's LoRA adapters, merged as it loads) */
	size_t nrefuse_beside;
	char **refuse_beside;
	char *refuse_beside_reason;
	/* "pipeline": what each stage of vLLM's pipeline holds (--pp).
	 * pp_layers: the prefixes of a decoder layer's outputs, with {n} for
	 * its index ("model.layers.{n}."), NULL-terminated (more than one
	 * where a block is used under another output_prefix too), or NULL:
	 * --pp is not written for these rules.  pp_counts, as many: NULL
	 * where the prefix's layers are the decoder's (num_hidden_layers),
	 * else the count (an expression over config.json) of a stack vLLM
	 * splits between the stages on its own (a Whisper encoder's).
	 * pp_stages: for the other outputs, in order, the first matching
	 * one decides. */
	char **pp_layers;
	char **pp_counts;
	/* "no_pipeline": why these rules write no --pp where vLLM cannot
	 * build or load the model in stages (convert refuses it), or NULL */
	char *no_pp;
	/* "first_stage_min": a config.json key whose entries (an array) or
	 * value is the fewest decoder layers vLLM lets the first stage hold
	 * (Qwen3-VL's deepstack layers), or NULL */
	char *pp_first_min;
	/* "none_with": a config.json key that, where it has entries (an
	 * array) or a value above 0, makes vLLM refuse a pipeline (Qwen4-Exp's
	 * ple_layer_ids), or NULL */
	char *pp_none_with;
	/* "none_if": a condition over config.json under which no pipeline is
	 * written (InternVL with an InternLM2 text model, whose final norm
	 * vLLM keeps on every stage), or NULL */
	char *pp_none_if;
	/* "same_stage": a config array of source layers (pp_same_src): a
	 * decoder layer where pp_same_if (a condition over n, or NULL: every
	 * layer) holds must be on the stage of the greatest of them at or
	 * below it, else --pp is refused with pp_same_why (DeepSeek-V4.1's
	 * kv_source_layer_ids); NULLs without */
	char *pp_same_src;
	char *pp_same_if;
	char *pp_same_why;
	size_t npp_stages;
	struct rules_stage_rule *pp_stages;
};

/* "experts_in_rows" (rules_extra.c): an array of {"match", "experts"}. */
enum wshard_err rules_parse_unstack(struct wshard_rules *r, json_t *val,
				    struct wshard_error *err);

/* "rename_layers" (rules_source.c): an object of "prefix", "to" and
 * "from" into r. */
enum wshard_err rules_parse_rename(struct wshard_rules *r, json_t *val,
				   struct wshard_error *err);

/* Placeholder values captured by a match; -1 when absent. */
struct rules_capture {
	long n, e, i;
};

/*
 * Matches name against pattern ({n}, {e} and {i} match decimal numbers
 * without a leading zero).  Returns true and fills *cap on a match.
 */
bool rules_match(const char *pattern, const char *name, struct rules_capture *cap);

/* "source_prefix" holds fewer bytes than this; a name it is put in front
 * of, fewer than RULES_NAME_MAX. */
#define RULES_PREFIX_MAX 64
#define RULES_NAME_MAX 1024

/*
 * The name rules r match source name by (rules_source.c): with the prefix
 * of r's first "source_renames" entry it begins with replaced, else with
 * r's "source_prefix" in front where name does not begin with it (written
 * into buf, RULES_NAME_MAX bytes), else name itself (also where the result
 * would not fit: such a name matches no rule written for it).
 */
const char *rules_source_name(const struct wshard_rules *r, const char *name, char *buf);

/*
 * The inverse, for an error about a tensor the rules name name that the
 * checkpoint lacks: the name the checkpoint's own naming would give it
 * (rules_source.c): the "from" of the first "source_renames" entry whose
 * "to" name begins with (its "{2n}" an even layer, "{2n+1}" an odd one),
 * where some tensor of cat is named by that "from" and the name so made
 * is read back as name; else name without "source_prefix" where no tensor
 * of cat begins with it; else name.  Written into buf (RULES_NAME_MAX
 * bytes) or pointing into name.
 */
const char *rules_checkpoint_name(const struct wshard_rules *r, const struct wshard_catalog *cat,
				  const char *name, char *buf);

/* Whether expression e reads a key of a "weight_folders" config (KEY.x),
 * which config.json has only once the folder is added. */
bool rules_reads_folder_config(const struct wshard_rules *r, const char *e);

/* Parses root's "weight_folders", "source_prefix" and "source_renames"
 * into r. */
enum wshard_err rules_parse_source(struct wshard_rules *r, json_t *root,
				   struct wshard_error *err);

/* Whether rule's output and "unless" use {n}, {e} and {i} only where
 * its match (or "layer") captures them, and a match with {i} is optional.
 * Returns WSHARD_OK or WSHARD_EINVAL naming r's file. */
enum wshard_err rules_check_captures(const struct wshard_rules *r, const struct rules_rule *rule,
				     struct wshard_error *err);
/* Expands pattern with cap into a malloc'd string (NULL: out of memory). */
char *rules_expand(const char *pattern, const struct rules_capture *cap);

/* Parses a rules document (JSON text of len bytes); name is for messages.
 * Returns WSHARD_OK, WSHARD_EINVAL or WSHARD_ENOMEM. */
enum wshard_err wshard_rules_parse(struct wshard_rules **out_rules,
				   const char *text, size_t len,
				   const char *name, struct wshard_error *err);

/* The rules' name ("builtin:llama" or the file path). */
const char *wshard_rules_name(const struct wshard_rules *rules);

/* NULL-terminated list of the architectures with built-in rules. */
const char *const *wshard_rules_architectures(void);

/* Built-in rule files and blocks (lib/rules/blocks/), generated by
 * scripts/embed-rules. */
struct wshard_builtin_rule {
	const char *name;
	const char *text;
};
extern const struct wshard_builtin_rule wshard_builtin_rules[];
extern const struct wshard_builtin_rule wshard_builtin_blocks[];

/* rules_block.c: each {"use": BLOCK, "prefix", "output_prefix", "if"} of
 * root's "tensors" replaced by the built-in block's rules, prefixed and
 * conditioned so, and the block's "fused" operators added to root's (rules
 * names the file in messages).  Returns WSHARD_OK, WSHARD_EINVAL or
 * WSHARD_ENOMEM. */
enum wshard_err rules_expand_uses(const char *rules, json_t *root, struct wshard_error *err);

/* Appends to r, after its explicit rules, the rules for the quantized
 * tensors beside each ".weight" rule's tensor: FP8 scales and
 * compressed-tensors' packed weights, group scales, zero points and
 * shapes (rules_scale.c).  Returns WSHARD_OK
 * or WSHARD_ENOMEM. */
enum wshard_err rules_derive_scales(struct wshard_rules *r, struct wshard_error *err);

/* The weight beside block scale name scale (X.weight_scale_inv, DeepSeek's
 * X.scale or Quark's X.weight_scale: X.weight) into buf of size bytes; false when scale is
 * none of these or buf is too small (rules_scale.c). */
bool rules_scale_weight(const char *scale, char *buf, size_t size);

/* rules_op.c: a rule's "chunks", "experts", "deinterleave", "pad_to",
 * "qkv_groups", "concat", "reshape" and "beside" (t is its object; its
 * split, "rows", "view" and "transpose" already parsed). */
enum wshard_err rules_parse_chunks(const struct wshard_rules *r, struct rules_rule *rule,
				   json_t *t, struct wshard_error *err);

/* rules_values.c: a rule's "times_sqrt", "neg_exp", "zero_mean", "plus"
 * and "permute_rows" (t is its object; its split already parsed). */
enum wshard_err rules_parse_values(const struct wshard_rules *r, struct rules_rule *rule,
				   json_t *t, struct wshard_error *err);

/* The "defaults" object, the "extra" array ("attn_scales" entries
 * expanded) and the "tie" object of rules document r (rules_extra.c;
 * "tie": rules_tie.c).  Return WSHARD_OK, WSHARD_EINVAL (the
 * message names r and the entry) or WSHARD_ENOMEM. */
enum wshard_err rules_parse_defaults(struct wshard_rules *r, json_t *defaults,
				     struct wshard_error *err);
enum wshard_err rules_parse_extras(struct wshard_rules *r, json_t *extra,
				   struct wshard_error *err);
enum wshard_err rules_parse_tie(struct wshard_rules *r, json_t *tie,
				struct wshard_error *err);

/* rules_tie.c: the name the tied embedding is written under for config cfg: "tie"'s
 * "output_if" name where its condition holds (PaliGemma 2's Gemma 2 text
 * model names it as the embedding, PaliGemma's Gemma as the head), else
 * "output".  A condition that cannot be evaluated does not hold. */
const char *rules_tie_output(const struct wshard_rules *r, const struct wshard_config *cfg);
/* Whether r ties its head to its embedding for config cfg: always where
 * "tie" says "always"; else where "tie"'s "if" holds, when it has one
 * (Idefics3's vLLM model ties by text_config's setting, where
 * tie_word_embeddings is read from the top level first); else as
 * config.json's tie_word_embeddings says; else by "default".  An "if"
 * that cannot be evaluated does not hold. */
bool rules_is_tied(const struct wshard_rules *r, const struct wshard_config *cfg);
/* The strings of JSON array val (NULL: none) copied into *out, NULL
 * terminated, their count in *n: what names the key in r's errors (an
 * entry that is not a string, or an empty one when nonempty).  Returns
 * WSHARD_OK, WSHARD_EINVAL or WSHARD_ENOMEM (rules_extra.c). */
enum wshard_err rules_parse_strings(const struct wshard_rules *r, json_t *val, const char *what,
				    bool nonempty, char ***out, size_t *n, struct wshard_error *err);

/* The entries of JSON array a (integers or strings: expressions over
 * config.json) copied into out[0..], which has room for them all, their
 * count so far in *n.  Returns WSHARD_OK, WSHARD_EINVAL (*bad_at: the
 * index of an entry that is neither) or WSHARD_ENOMEM; the caller names
 * the key in its error (rules_op.c). */
enum wshard_err rules_parse_exprs(json_t *a, char **out, int *n, size_t *bad_at);

/* A copy of JSON string or integer d (an expression over config.json), or
 * NULL with *bad set when it is neither (rules_op.c). */
char *rules_expr_copy(json_t *d, bool *bad);

/* A declared operator's "sizes" (one expression or integer per part),
 * "groups" (an object of parts: expression or integer) and "zero" (an
 * array of parts), from its object val (rules_op.c).  Returns
 * WSHARD_OK, WSHARD_EINVAL (the message names r and op) or WSHARD_ENOMEM. */
enum wshard_err rules_parse_op_keys(const struct wshard_rules *r, struct rules_op *op,
				    json_t *val, struct wshard_error *err);

/* The "pipeline" object and "no_pipeline" reason of rules document r,
 * whose top-level object is root (rules_stage.c).  Returns WSHARD_OK,
 * WSHARD_EINVAL (the message names r) or WSHARD_ENOMEM. */
enum wshard_err rules_parse_pipeline(struct wshard_rules *r, json_t *root,
				     struct wshard_error *err);

/*
 * Which stages hold output name (rules_stage.c): *out_layer, the layer it
 * belongs to (name starts with r's pp_layers[*out_stack]), or -1 and
 * *out_stage, the first matching "stages" entry's.  Returns false when
 * neither matches.
 */
bool rules_stage_of(const struct wshard_rules *r, const char *name, long *out_layer,
		    size_t *out_stack, enum rules_stage *out_stage);

#endif /* WSHARD_RULES_H */
