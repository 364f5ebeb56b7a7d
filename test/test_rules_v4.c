/*
 * test_rules_v4.c - DeepSeek-V4's built-in rules, in DeepSeek's own names:
 * what lib/rules/deepseek_v4.json says and what the parser derives from it.
 */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "rules/rules.h"
#include "rules_test_util.h"

/*
 * DeepSeek-V4 in DeepSeek's names: mtp.* left out first; q_a and kv fused
 * replicated, as are each compressor's wkv and wgate; the grouped output
 * projection split by rows then columns; the sinks split by heads; the
 * hyper-connection tensors F32 and the hash table narrowed to I32.
 */
Test(builtin, deepseek_v4)
{
	size_t j;
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	struct rules_capture cap;
	const struct rules_rule *rule;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_builtin(&r, "DeepseekV4ForCausalLM", &err), WSHARD_OK,
		     "%s", err.msg);
	cr_assert_str_eq(wshard_rules_name(r), "builtin:deepseek_v4");
	cr_assert_eq(r->rules[0].kind, RULE_SKIP);
	cr_assert(rules_match(r->rules[0].match, "mtp.0.ffn.gate.weight", &cap));
	cr_assert_eq(find_rule(r, "embed.weight", &cap)->kind, RULE_VOCAB);
	cr_assert_eq(find_rule(r, "head.weight", &cap)->kind, RULE_VOCAB);
	rule = find_rule(r, "layers.3.attn.wq_a.weight", &cap);
	cr_assert_eq(rule->kind, RULE_FUSE);
	cr_assert_str_eq(r->ops[rule->op].name, "wqa_wkv");
	rule = find_rule(r, "layers.3.attn.indexer.compressor.wgate.weight", &cap);
	cr_assert_eq(rule->kind, RULE_FUSE);
	cr_assert_str_eq(r->ops[rule->op].name, "wkv_wgate");
	cr_assert(rule->optional);
	cr_assert_eq(find_rule(r, "layers.0.attn.wo_a.weight", &cap)->kind, RULE_ROW);
	cr_assert_eq(find_rule(r, "layers.0.attn.wo_b.weight", &cap)->kind, RULE_COL);
	cr_assert_eq(find_rule(r, "layers.0.attn.attn_sink", &cap)->kind, RULE_ROW);
	rule = find_rule(r, "layers.0.hc_ffn_fn", &cap);
	cr_assert_eq(rule->kind, RULE_REPLICATE);
	cr_assert_eq(rule->dtype, WSHARD_F32);
	rule = find_rule(r, "layers.0.ffn.gate.tid2eid", &cap);
	cr_assert(rule->has_dtype);
	cr_assert_eq(rule->dtype, WSHARD_I32);
	cr_assert_null(find_rule(r, "model.layers.0.attn.wq_a.weight", &cap));
	/* DeepSeek's block scales X.scale, renamed as vLLM's mapper does */
	rule = find_rule(r, "layers.0.attn.wo_a.scale", &cap);
	cr_assert(rule->block);
	cr_assert_eq(rule->kind, RULE_ROW);
	cr_assert_str_eq(rule->output, "model.layers.{n}.attn.wo_a.weight_scale_inv");
	/* an expert's F32 block scale passes the FP4 scale rule ("from") */
	for (j = 0; j < r->nrules; j++)
		if (rules_match(r->rules[j].match, "layers.0.ffn.experts.5.w2.scale", &cap) &&
		    !r->rules[j].from)
			break;
	cr_assert_lt(j, r->nrules);
	rule = &r->rules[j];
	cr_assert(rule->block);
	cr_assert_eq(rule->kind, RULE_COL);
	cr_assert_str_eq(rule->output, "model.layers.{n}.ffn.experts.routed_experts.w2_weight_scale_inv");
	/* FP4 experts first, by the source's dtype, as raw U8 */
	rule = find_rule(r, "layers.0.ffn.experts.5.w2.weight", &cap);
	cr_assert_eq(rule->from, ((uint64_t)1 << WSHARD_I8) | ((uint64_t)1 << WSHARD_U8));
	cr_assert_eq(rule->dtype, WSHARD_U8);
	cr_assert_eq(rule->kind, RULE_COL);
	rule = find_rule(r, "layers.0.ffn.experts.5.w1.scale", &cap);
	cr_assert_str_eq(rule->output, "model.layers.{n}.ffn.experts.routed_experts.w13_weight_scale");
	cr_assert(rule->from >> WSHARD_F8_E8M0 & 1);
	cr_assert_not(rule->block);
	rule = find_rule(r, "layers.0.attn.wq_a.scale", &cap);
	cr_assert_eq(rule->kind, RULE_FUSE);
	cr_assert_str_eq(rule->output, "model.layers.{n}.attn.fused_wqa_wkv.weight_scale_inv");
	wshard_rules_free(r);
}

/* the first rule for an MTP layer numbered below num_nextn_predict_layers:
 * past the "if" of the rule that leaves out the later ones */
static const struct rules_rule *find_mtp(const struct wshard_rules *r,
					 const char *name, struct rules_capture *cap)
{
	size_t i;

	for (i = 0; i < r->nrules; i++)
		if (rules_match(r->rules[i].match, name, cap) &&
		    !(r->rules[i].cond && strstr(r->rules[i].cond, "n >= num_nextn_predict_layers")))
			return &r->rules[i];
	return NULL;
}

/*
 * DeepSeek-V4's MTP draft: mtp.N. held as layer num_hidden_layers+N, its
 * decoder layer under mtp_block. as the target's; e_proj and h_proj whole;
 * a compressed or hash-routed MTP layer refused (vLLM loads neither); the
 * target's tensors left out, its embedding and head written where the MTP
 * layer ships none.
 */
Test(builtin, deepseek_v4_mtp)
{
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	struct rules_capture cap;
	const struct rules_rule *rule;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_builtin(&r, "DeepSeekV4MTPModel", &err), WSHARD_OK,
		     "%s", err.msg);
	cr_assert_str_eq(wshard_rules_name(r), "builtin:deepseek_v4_mtp");
	cr_assert(r->rename_add);
	cr_assert_str_eq(r->rename_from, "num_hidden_layers");
	rule = find_rule(r, "embed.weight", &cap);
	cr_assert_eq(rule->kind, RULE_VOCAB);
	cr_assert_str_eq(rule->unless, "mtp.{n}.emb.tok_emb.weight");
	rule = find_rule(r, "head.weight", &cap);
	cr_assert_eq(rule->kind, RULE_VOCAB);
	cr_assert_str_eq(rule->output, "model.layers.{n}.shared_head.head.weight");
	cr_assert_eq(find_rule(r, "layers.3.attn.wq_a.weight", &cap)->kind, RULE_SKIP);
	cr_assert_eq(find_rule(r, "hc_head_fn", &cap)->kind, RULE_SKIP);
	rule = find_mtp(r, "mtp.0.e_proj.weight", &cap);
	cr_assert_eq(rule->kind, RULE_REPLICATE);
	cr_assert_str_eq(rule->output, "model.layers.{n}.e_proj.weight");
	rule = find_mtp(r, "mtp.0.norm.weight", &cap);
	cr_assert_str_eq(rule->output, "model.layers.{n}.shared_head.norm.weight");
	rule = find_mtp(r, "mtp.0.hc_head_scale", &cap);
	cr_assert_eq(rule->dtype, WSHARD_F32);
	rule = find_mtp(r, "mtp.0.attn.wkv.weight", &cap);
	cr_assert_eq(rule->kind, RULE_FUSE);
	cr_assert_str_eq(rule->output, "model.layers.{n}.mtp_block.attn.fused_wqa_wkv.weight");
	cr_assert_eq(find_mtp(r, "mtp.0.attn.wo_a.weight", &cap)->kind, RULE_ROW);
	cr_assert_eq(find_mtp(r, "mtp.0.attn.compressor.norm.weight", &cap)->kind, RULE_REFUSE);
	cr_assert_eq(find_mtp(r, "mtp.0.attn.indexer.wq_b.weight", &cap)->kind, RULE_REFUSE);
	cr_assert_eq(find_mtp(r, "mtp.0.ffn.gate.tid2eid", &cap)->kind, RULE_REFUSE);
	rule = find_mtp(r, "mtp.0.ffn.gate.bias", &cap);
	cr_assert_str_eq(rule->output, "model.layers.{n}.mtp_block.ffn.experts.gate.e_score_correction_bias");
	/* block scales: e_proj's as the decoder layer's (vLLM quantizes both) */
	rule = find_mtp(r, "mtp.0.e_proj.scale", &cap);
	cr_assert(rule->block);
	cr_assert_str_eq(rule->output, "model.layers.{n}.e_proj.weight_scale_inv");
	rule = find_mtp(r, "mtp.0.ffn.experts.1.w2.weight", &cap);
	cr_assert_eq(rule->dtype, WSHARD_U8);
	wshard_rules_free(r);
}

/* the first rule for name whose "if" holds where config.json has a vision
 * tower whose heads tp divides: past the text model's rules for
 * vision_n_layers == 0, the tower's whole layout for a tp that does not
 * divide its heads, and the refusal of DeepseekV4ForConditionalGeneration
 * without a tower */
static const struct rules_rule *find_vl(const struct wshard_rules *r,
					const char *name, struct rules_capture *cap)
{
	size_t i;

	for (i = 0; i < r->nrules; i++)
		if (rules_match(r->rules[i].match, name, cap) &&
		    !(r->rules[i].cond && (strstr(r->rules[i].cond, "vision_n_layers == 0") ||
					   strstr(r->rules[i].cond, "vision_n_layers < 1") ||
					   strstr(r->rules[i].cond, "vision_n_heads % tp != 0"))))
			return &r->rules[i];
	return NULL;
}

/*
 * DeepSeek-V4 with its vision tower (DeepSeek-V4-Flash-Vision-Exp, which
 * names DeepseekV4ForCausalLM): the text model under language_model.; the
 * tower's fused wqkv and mlp.w1 unpacked and cut, wo and w2 by columns; the
 * aligner's w1 by rows and w2 by columns; the image embeddings and each
 * router's bias_vl F32 and whole; tower and aligner whole where tp does not
 * divide the tower's heads.  DeepseekV4ForConditionalGeneration named
 * itself: the same, its own file.
 */
Test(builtin, deepseek_v4_vl)
{
	static const char *const archs[] = { "DeepseekV4ForCausalLM",
					     "DeepseekV4ForConditionalGeneration" };
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	struct rules_capture cap;
	const struct rules_rule *rule;
	size_t i;

	for (i = 0; i < 2; i++) {
		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, archs[i], &err), WSHARD_OK, "%s", err.msg);
		cr_assert_str_eq(wshard_rules_name(r), i ? "builtin:deepseek_v4_vl"
							 : "builtin:deepseek_v4");
		rule = find_vl(r, "head.weight", &cap);
		cr_assert_eq(rule->kind, RULE_VOCAB);
		cr_assert_str_eq(rule->output, "language_model.lm_head.weight");
		rule = find_vl(r, "layers.2.attn.wq_a.weight", &cap);
		cr_assert_eq(rule->kind, RULE_FUSE);
		cr_assert_str_eq(rule->output, "language_model.model.layers.{n}.attn.fused_wqa_wkv.weight");
		rule = find_vl(r, "vision.blocks.1.attn.wqkv.weight", &cap);
		cr_assert_eq(rule->kind, RULE_UNPACK);
		cr_assert_str_eq(r->ops[rule->op].name, "vision_qkv");
		rule = find_vl(r, "vision.blocks.1.mlp.w1.weight", &cap);
		cr_assert_eq(rule->kind, RULE_UNPACK);
		cr_assert_str_eq(r->ops[rule->op].name, "gate_up");
		cr_assert_eq(find_vl(r, "vision.blocks.1.attn.wo.weight", &cap)->kind, RULE_COL);
		cr_assert_eq(find_vl(r, "vision.blocks.1.attn.wo.bias", &cap)->kind, RULE_REPLICATE);
		cr_assert_eq(find_vl(r, "aligner.w1.bias", &cap)->kind, RULE_ROW);
		cr_assert_eq(find_vl(r, "aligner.w2.weight", &cap)->kind, RULE_COL);
		rule = find_vl(r, "image_newline", &cap);
		cr_assert_eq(rule->kind, RULE_REPLICATE);
		cr_assert_eq(rule->dtype, WSHARD_F32);
		rule = find_vl(r, "layers.0.ffn.gate.bias_vl", &cap);
		cr_assert_eq(rule->dtype, WSHARD_F32);
		cr_assert_str_eq(rule->output,
				 "language_model.model.layers.{n}.ffn.experts.gate.bias_vl");
		/* a tp that does not divide the tower's heads: whole, as the
		 * checkpoint has it (vLLM's data-parallel fallback) */
		rule = find_rule(r, "vision.blocks.0.attn.wqkv.weight", &cap);
		cr_assert_eq(rule->kind, i ? RULE_REFUSE : RULE_REPLICATE);
		cr_assert_not_null(rule->cond);
		wshard_rules_free(r);
		r = NULL;
	}
}
