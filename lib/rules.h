/*
 * rules.h - the parsed form of a rules file, shared by rules.c (which
 * reads it) and plan.c (which applies it).  Not part of the API.
 */
#ifndef WSHARD_RULES_H
#define WSHARD_RULES_H

#include "wshard.h"

enum rule_kind {
	RULE_ROW,		/* dimension 0 split by tp */
	RULE_COL,		/* dimension 1 split by tp */
	RULE_VOCAB,		/* rows padded to 64, then split by tp */
	RULE_REPLICATE,		/* whole on every rank */
	RULE_SKIP,		/* not written */
	RULE_FUSE,		/* one part of a fused operator */
	RULE_UNPACK,		/* a source holding every part of an operator */
};

/* How a fused operator cuts its parts across ranks. */
enum op_kind {
	OP_ROWS,	/* every part row-split by tp, concatenated */
	OP_QKV,		/* q split by heads, k/v by kv heads (replicated if tp > kv) */
};

#define OP_MAX_PARTS 8

struct rules_op {
	char *name;
	enum op_kind kind;
	int nparts;
	char *parts[OP_MAX_PARTS];
};

struct rules_rule {
	char *match;		/* pattern with {n} and {e} */
	char *output;		/* output name pattern */
	enum rule_kind kind;
	int op;			/* FUSE, UNPACK: index into ops */
	int part;		/* FUSE: part index */
	bool scale;		/* derived FP8 scale: one element is kept whole */
	bool optional;		/* a source need not exist (else: one per layer) */
	bool block;		/* derived weight_scale_inv: block-wise FP8 scale */
	bool collapse;		/* derived per-expert input scale: w1's alone */
	int nshape;		/* -1: no shape check */
	char *shape[WSHARD_MAX_DIMS];	/* expressions over config keys */
};

struct rules_extra {
	char *name;		/* pattern with {n}: one per layer seen */
	enum wshard_dtype dtype;
	double value;
	char *option;		/* "attn_scales" or NULL (always) */
	bool model_dtype;	/* "dtype": "model": the engine's model dtype */
	bool when_quantized;	/* "when": "quantized": only with a
				 * quantization_config in config.json */
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
	size_t ntie_drop;
	char **tie_drop;	/* source names skipped when tied */
	bool tie_default;	/* when config.json does not say */
	bool tie_always;	/* whatever config.json says (Gemma) */
};

/* Placeholder values captured by a match; -1 when absent. */
struct rules_capture {
	long n, e;
};

/*
 * Matches name against pattern ({n} and {e} match decimal numbers without
 * a leading zero).  Returns true and fills *cap on a match.
 */
bool rules_match(const char *pattern, const char *name, struct rules_capture *cap);

/* Expands pattern with cap into a malloc'd string (NULL: out of memory). */
char *rules_expand(const char *pattern, const struct rules_capture *cap);

#endif /* WSHARD_RULES_H */
