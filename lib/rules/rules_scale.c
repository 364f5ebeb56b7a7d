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
 * FP8 checkpoints carry scales beside their weights (X.weight_scale,
 * X.input_scale, X.weight_scale_inv for block-wise scales).  A scale
 * follows its weight: fused into the same operator part (a per-tensor
 * scale becomes one element of a vector, a per-channel or block scale is
 * split like the weight's rows), replicated beside a column split (its
 * rows are not cut), except block scales, whose block columns are.  So
 * every rule for a ".weight" gets these rules after the explicit ones,
 * and a rules file never repeats them.  DeepSeek's own checkpoints
 * (DeepSeek-V4) name a block scale X.scale: vLLM's mapper renames it
 * X.weight_scale_inv, and so does its derived rule.
 */
enum wshard_err rules_derive_scales(struct wshard_rules *r, struct wshard_error *err)
{
	static const char *const suffixes[] = {
		".weight_scale", ".input_scale", ".weight_scale_inv", ".scale",
	};
	static const char *const outs[] = {
		".weight_scale", ".input_scale", ".weight_scale_inv", ".weight_scale_inv",
	};
	const size_t ns = sizeof(suffixes) / sizeof(suffixes[0]);
	size_t n = r->nrules, i, k, add = 0;
	struct rules_rule *rules;

	rules = realloc(r->rules, (n * (ns + 1) + 1) * sizeof(*rules));
	if (!rules)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	r->rules = rules;
	for (i = 0; i < n; i++) {
		const struct rules_rule *w = &rules[i];
		size_t ml = strlen(w->match), ol = strlen(w->output);

		/* a source cut into parts by sizes: its scales would not be */
		if (ml < 7 || strcmp(w->match + ml - 7, ".weight") || w->kind == RULE_VOCAB ||
		    w->kind == RULE_UNPACK || w->nparts > 1)
			continue;
		for (k = 0; k < ns; k++) {
			struct rules_rule *d = &rules[n + add];
			bool inv = k >= 2;
			size_t sl = strlen(outs[k]);

			memset(d, 0, sizeof(*d));
			d->nshape = -1;
			d->scale = true;
			d->optional = true;
			d->kind = w->kind;
			d->op = w->op;
			d->part = w->part;
			d->nparts = w->nparts;
			if (w->kind == RULE_COL && !inv)
				d->kind = RULE_REPLICATE;
			d->match = malloc(ml - 7 + strlen(suffixes[k]) + 1);
			d->output = malloc(ol + sl + 1);
			if (!d->match || !d->output) {
				free(d->match);
				free(d->output);
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			}
			sprintf(d->match, "%.*s%s", (int)(ml - 7), w->match, suffixes[k]);
			/* "X.weight" -> "X.weight_scale"; vLLM's experts "w13_weight" -> "w13_weight_scale" */
			if (ol >= 7 && (!strcmp(w->output + ol - 7, ".weight") ||
					!strcmp(w->output + ol - 7, "_weight")))
				sprintf(d->output, "%.*s%c%s", (int)(ol - 7), w->output,
					w->output[ol - 7], outs[k] + 1);
			else
				sprintf(d->output, "%s%s", w->output, outs[k]);
			d->block = inv;
			d->cond = dup_or_null(w->cond);
			d->reason = dup_or_null(w->reason);
			/* per-channel scales follow their weight's rows (vLLM's
			 * permute_qk_weight_for_rotary permutes both) */
			d->deinterleave = dup_or_null(w->deinterleave);
			if ((w->cond && !d->cond) || (w->reason && !d->reason) ||
			    (w->deinterleave && !d->deinterleave))
				return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			/*
			 * vLLM keeps one input scale per expert for w1 and w3 together
			 * (they must be equal): the fused per-tensor scale is w1's.
			 */
			d->collapse = k == 1 && strstr(w->match, "{e}") && w->kind == RULE_FUSE;
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
	else
		return false;
	return true;
}
