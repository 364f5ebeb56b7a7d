/*
 * rules_scale.c - the rules a rules document never spells out: those for
 * the FP8 scales beside each weight.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "rules.h"

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/*
 * Quantized checkpoints carry tensors beside (or instead of) each weight,
 * and a rules document never spells them out: every rule for a ".weight"
 * gets these after the explicit ones.
 *
 * FP8 scales (X.weight_scale, X.input_scale, X.weight_scale_inv for block
 * scales) follow their weight: fused into the same operator part (a
 * per-tensor scale becomes one element of a vector, a per-channel or block
 * scale is split like the weight's rows); beside a column split an input
 * scale and a per-channel scale (one column) are replicated, block scales
 * have their block columns cut.  DeepSeek's own checkpoints (DeepSeek-V4)
 * name a block scale X.scale: vLLM's mapper renames it X.weight_scale_inv,
 * and so does its derived rule.  Mistral's own format names the per-tensor
 * X.weight_scale and X.input_scale X.qscale_weight and X.qscale_act, which
 * vLLM's MistralForCausalLM and MistralLarge3ForCausalLM rename.
 *
 * compressed-tensors' NVFP4 (nvfp4-pack-quantized, vLLM's
 * CompressedTensorsW4A4Fp4) packs two FP4 values a byte, X.weight_packed
 * U8 [rows, cols/2], with an F8_E4M3 X.weight_scale per 16 input columns
 * and the per-tensor X.weight_global_scale and X.input_global_scale,
 * which follow the weight as FP8's per-tensor scales do.  ModelOpt's NVFP4
 * (vLLM's ModelOptNvFp4 methods) keeps the packed bytes as X.weight, with
 * X.weight_scale per 16 columns and the per-tensor X.weight_scale_2 and
 * X.input_scale.
 *
 * Quark's INT8 (vLLM's QuarkW8A8Int8) adds I8 zero points beside the
 * scales, X.weight_zero_point cut as X.weight_scale is (one a fused part
 * or a row) and, with static activations, X.input_zero_point beside
 * X.input_scale, replicated beside a column split as it is.
 *
 * compressed-tensors' pack-quantized weights (vLLM's CompressedTensorsWNA16)
 * replace X.weight by X.weight_packed, int32 words of packed values along
 * the input dimension, cut like the weight; X.weight_scale and
 * X.weight_zero_point then hold one column per group of input columns,
 * cut with them (plan_split.c refuses a cut through a group or a word).
 * X.weight_shape, the two-element [out, in] of the whole weight, is
 * copied whole: vLLM's BasevLLMParameter takes each loaded value as it
 * is, so a fused operator keeps the part it loads last, its checkpoint
 * names being read in sorted order.
 *
 * GPTQ and AWQ store each weight transposed, [in, out]: X.qweight (int32
 * words of 4-bit values, packed along the inputs by GPTQ, along the
 * outputs by AWQ), X.scales and X.qzeros (one row per group of inputs;
 * the zero points packed along the outputs).  An output split cuts their
 * dimension 1 and a fused operator's parts lie side by side there; an
 * input split cuts their dimension 0, a single group (GPTQ per channel)
 * whole on every rank, as vLLM's marlin_repeat_scales_on_all_ranks does.
 * Experts stack the same per-expert [in, out] tensors (vLLM's AutoGPTQ and
 * AutoAWQ MoE methods: w13_qweight [E, in, 2 out/N] and so on).
 * vLLM drops GPTQ's X.g_idx (activation order is refused up front).
 * Quark's W4A16 stores AWQ's tensors as X.weight, X.weight_scale and
 * X.weight_zero_point: plan_match.c matches them by AWQ's names
 * (plan_quark.c) and writes them under their own.
 */
enum derive { D_SCALE, D_INPUT, D_INZERO, D_BLOCK, D_PACKED, D_ZERO, D_SHAPE,
	      D_QWEIGHT, D_QZEROS, D_QSCALES, D_GIDX, D_KV };

static const struct {
	const char *suffix, *out;
	enum derive how;
} derived[] = {
	{ ".weight_scale", ".weight_scale", D_SCALE },
	{ ".input_scale", ".input_scale", D_INPUT },
	/* Quark's INT8 static activations: an I8 zero point beside the scale */
	{ ".input_zero_point", ".input_zero_point", D_INZERO },
	/* NVFP4's per-tensor scales, beside its F8_E4M3 group scales:
	 * compressed-tensors' and ModelOpt's (whose input one is input_scale) */
	{ ".weight_global_scale", ".weight_global_scale", D_SCALE },
	{ ".input_global_scale", ".input_global_scale", D_INPUT },
	{ ".weight_scale_2", ".weight_scale_2", D_SCALE },
	{ ".weight_scale_inv", ".weight_scale_inv", D_BLOCK },
	{ ".scale", ".weight_scale_inv", D_BLOCK },
	/* Mistral's own format (params.json "quantization" fp8_e4m3): its
	 * per-tensor scales under the names vLLM's mappers rename */
	{ ".qscale_weight", ".weight_scale", D_SCALE },
	{ ".qscale_act", ".input_scale", D_INPUT },
	{ ".weight_packed", ".weight_packed", D_PACKED },
	{ ".weight_zero_point", ".weight_zero_point", D_ZERO },
	{ ".weight_shape", ".weight_shape", D_SHAPE },
	{ ".qweight", ".qweight", D_QWEIGHT },
	{ ".qzeros", ".qzeros", D_QZEROS },
	{ ".scales", ".scales", D_QSCALES },
	{ ".g_idx", ".g_idx", D_GIDX },
	/* Quark's (and llm-compressor's) KV-cache scales, k_proj's and
	 * v_proj's output scales: vLLM's cache-scale mapper loads them into
	 * the attention's k_scale and v_scale, which the rules' "when":
	 * "quantized" extras write from them (plan_extra.c) */
	{ ".output_scale", ".output_scale", D_KV },
};

/* What a derived tensor is to its layer's quantization (plan.h). */
static uint8_t derived_role(enum derive how)
{
	switch (how) {
	case D_PACKED:
	case D_QWEIGHT:
		return WSHARD_QUANT_WEIGHT;
	case D_INPUT:
		return WSHARD_QUANT_INPUT_SCALE;
	case D_ZERO:
	case D_INZERO:
	case D_QZEROS:
		return WSHARD_QUANT_ZERO_POINT;
	case D_SHAPE:
		return WSHARD_QUANT_SHAPE;
	case D_GIDX:
	case D_KV:
		return WSHARD_QUANT_NONE;
	default:
		return WSHARD_QUANT_SCALE;
	}
}

static bool is_inout(enum derive how)
{
	return how == D_QWEIGHT || how == D_QZEROS || how == D_QSCALES;
}
#define NDERIVED (sizeof(derived) / sizeof(derived[0]))

#define GIDX_REASON "GPTQ activation order: vLLM drops g_idx"
#define DEQUANT_REASON "the scales of an FP8 weight written as the BF16 vLLM dequantizes it to (\"dequant\")"

/* Whether fused part w is the one vLLM loads last: no other single part of
 * its operator sorts after it. */
static bool loaded_last(const struct rules_rule *rules, size_t n, const struct rules_rule *w)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (rules[i].kind == RULE_FUSE && rules[i].op == w->op && rules[i].nparts == 1 &&
		    strcmp(rules[i].match, w->match) > 0)
			return false;
	return true;
}

static enum rule_kind derived_kind(const struct rules_rule *rules, size_t n,
				   const struct rules_rule *w, enum derive how)
{
	/* a weight left out leaves out what it is read with */
	if (w->kind == RULE_SKIP)
		return RULE_SKIP;
	if (how == D_SHAPE) {
		if (w->kind == RULE_FUSE)
			return loaded_last(rules, n, w) ? RULE_REPLICATE : RULE_SKIP;
		return RULE_REPLICATE;
	}
	if ((how == D_INPUT || how == D_INZERO) && w->kind == RULE_COL)
		return RULE_REPLICATE;
	if (how == D_GIDX || how == D_KV)
		return RULE_SKIP;
	/* [in, out]: the weight's dimensions swapped */
	if (is_inout(how) && (w->kind == RULE_ROW || w->kind == RULE_COL))
		return w->kind == RULE_ROW ? RULE_COL : RULE_ROW;
	return w->kind;
}

enum wshard_err rules_derive_scales(struct wshard_rules *r, struct wshard_error *err)
{
	size_t n = r->nrules, i, k, add = 0;
	struct rules_rule *rules;

	rules = realloc(r->rules, (n * (NDERIVED + 1) + 1) * sizeof(*rules));
	if (!rules)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	r->rules = rules;
	for (i = 0; i < n; i++) {
		struct rules_rule *w = &rules[i];
		size_t ml = strlen(w->match), ol = strlen(w->output);

		/* a source cut into parts by sizes: its scales would not be */
		if (ml < 7 || strcmp(w->match + ml - 7, ".weight") || w->kind == RULE_VOCAB ||
		    w->kind == RULE_UNPACK || w->nparts > 1)
			continue;
		/* a column cut reordered (Inkling's bf16 experts): a quantized
		 * one matches no rule and is refused */
		if (w->beside || w->deinterleave_cut)
			continue;
		for (k = 0; k < NDERIVED; k++) {
			struct rules_rule *d = &rules[n + add];
			enum derive how = derived[k].how;

			/* GPTQ's and AWQ's experts one a tensor, not viewed */
			if ((is_inout(how) || how == D_GIDX || how == D_KV) &&
			    (w->rows || w->transpose || w->deinterleave))
				continue;
			const char *suffix = derived[k].suffix, *out = derived[k].out;
			size_t sl = strlen(out);

			memset(d, 0, sizeof(*d));
			d->nshape = -1;
			d->scale = how == D_SCALE || how == D_INPUT || how == D_INZERO || how == D_BLOCK;
			d->optional = true;
			d->kind = derived_kind(rules, n, w, how);
			/* a dequantized weight's scales are in its values */
			if (w->dequant && (how == D_BLOCK || !strcmp(out, ".weight_scale")))
				d->kind = RULE_SKIP;
			d->op = w->op;
			d->part = w->part;
			d->nparts = w->nparts;
			memcpy(d->order, w->order, sizeof(d->order));
			d->also = d->kind == RULE_FUSE ? w->also : -1;
			if (how == D_SHAPE && d->kind == RULE_REPLICATE)
				d->op = d->part = d->nparts = 0;
			d->block = how == D_BLOCK;
			d->grouped = how == D_SCALE || how == D_ZERO || how == D_QZEROS ||
				     how == D_QSCALES;
			d->packed = how == D_PACKED;
			d->inout = is_inout(how);
			d->qrole = derived_role(how);
			if (how == D_PACKED || how == D_QWEIGHT)
				w->alt[how == D_QWEIGHT] = (int)(n + add);
			d->match = malloc(ml - 7 + strlen(suffix) + 1);
			d->output = malloc(ol + sl + 1);
			if (!d->match || !d->output) {
				free(d->match);
				free(d->output);
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			}
			sprintf(d->match, "%.*s%s", (int)(ml - 7), w->match, suffix);
			/* "X.weight" -> "X.weight_scale"; vLLM's experts "w13_weight" -> "w13_weight_scale" */
			if (ol >= 7 && (!strcmp(w->output + ol - 7, ".weight") ||
					!strcmp(w->output + ol - 7, "_weight")))
				sprintf(d->output, "%.*s%c%s", (int)(ol - 7), w->output,
					w->output[ol - 7], out + 1);
			else
				sprintf(d->output, "%s%s", w->output, out);
			d->cond = dup_or_null(w->cond);
			d->reason = how == D_GIDX ? strdup(GIDX_REASON) :
				    d->kind == RULE_SKIP && w->dequant ? strdup(DEQUANT_REASON) :
				    dup_or_null(w->reason);
			/* per-channel scales follow their weight's rows (vLLM's
			 * permute_qk_weight_for_rotary permutes both) */
			d->deinterleave = dup_or_null(w->deinterleave);
			if ((w->cond && !d->cond) ||
			    ((w->reason || how == D_GIDX || (d->kind == RULE_SKIP && w->dequant)) && !d->reason) ||
			    (w->deinterleave && !d->deinterleave))
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			/*
			 * vLLM keeps one input scale per expert for w1 and w3 together
			 * (they must be equal): the fused per-tensor scale is w1's.
			 * Not NVFP4's, which it keeps one a part (plan_split.c).
			 */
			d->collapse = how == D_INPUT && strstr(w->match, "{e}") && w->kind == RULE_FUSE &&
				      !strcmp(out, ".input_scale");
			add++;
			r->nrules = n + add;
		}
	}
	return WSHARD_OK;
}

bool rules_scale_weight(const char *scale, char *buf, size_t size)
{
	size_t n = strlen(scale);

	if (n >= 10 && !strcmp(scale + n - 10, "_scale_inv") && n - 10 < size)
		snprintf(buf, size, "%.*s", (int)(n - 10), scale);
	else if (n >= 6 && !strcmp(scale + n - 6, ".scale") && n + 1 < size)
		snprintf(buf, size, "%.*s.weight", (int)(n - 6), scale);	/* DeepSeek's */
	else if (n >= 13 && !strcmp(scale + n - 13, ".weight_scale") && n - 6 < size)
		snprintf(buf, size, "%.*s", (int)(n - 6), scale);	/* Quark's */
	else
		return false;
	return true;
}
