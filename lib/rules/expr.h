/*
 * expr.h - integer expressions over config.json, as rule files write
 * shapes: "(num_attention_heads+2*num_key_value_heads)*head_dim".  Not
 * part of the API.
 */
#ifndef WSHARD_EXPR_H
#define WSHARD_EXPR_H

#include <stdbool.h>
#include <stdint.h>

#include "wshard.h"
#include "source/catalog.h"

/*
 * Evaluates the expression s (integers, config.json keys, + - * / %,
 * parentheses) against cfg: a bare key from the text model's config
 * (cfg->text) or the top, a dotted key ("vision_config.hidden_size")
 * through the nested objects from the top, KEY[EXPR] an element of an
 * array, and KEY[EXPR].a.b a member of an object element
 * ("block_configs[n].attention.n_heads_in_group"; booleans read 1 and 0,
 * null as absent); for a rule of tensor (named in messages).
 * Returns WSHARD_OK and *out, or WSHARD_EINVAL (malformed, or a key that
 * config.json lacks).
 */
enum wshard_err expr_eval_dim(const struct wshard_config *cfg, const char *s,
			      const char *tensor, int64_t *out,
			      struct wshard_error *err);

/*
 * As expr_eval_dim, with n standing for layer (when layer >= 0: a member
 * of "{n}" names, as Nemotron-NAS's kv heads differ by layer); *used_layer
 * (where not NULL) says whether the value read n.
 */
enum wshard_err expr_eval_layer_dim(const struct wshard_config *cfg, const char *s,
				    long layer, const char *tensor, int64_t *out,
				    bool *used_layer, struct wshard_error *err);

/*
 * Evaluates the condition s of a rule: an expression as above, or two
 * joined by one of >= > <= < == !=; n stands for layer (when layer >= 0),
 * i for index (when index >= 0: an extra's "each") and tp for cfg->tp
 * (when a plan's).  A config key
 * (or KEY[i] of an array) compares with a quoted text by == and !=
 * ("vision_config.model_type == 'pixtral'"); one that is absent or no
 * text equals none.  A bare
 * expression is true when non-zero; a bare config key that is absent or
 * null is false.  "A && B" holds where both do (B unread where A fails),
 * "A || B" where either does (B unread where A holds); || binds tighter,
 * there being no parentheses: "A && B || C" is A and (B or C), as a
 * use's "if" joined to its block's rule by " && " must read.  Returns
 * WSHARD_OK and *out, or WSHARD_EINVAL.
 */
enum wshard_err expr_eval_cond(const struct wshard_config *cfg, const char *s,
			       long layer, long index, const char *tensor, bool *out,
			       struct wshard_error *err);

/* The entries of config key (looked up as in expr_eval_dim) when it is an
 * array, its value when an integer; -1 when config.json lacks it. */
int64_t expr_config_count(const struct wshard_config *cfg, const char *key);

/* True when s is one bare config key (for messages that name it). */
bool expr_is_bare_key(const char *s);

#endif /* WSHARD_EXPR_H */
