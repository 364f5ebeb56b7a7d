/*
 * test_rules.c - rules files: name patterns ({n} and {e} match decimal
 * numbers without a leading zero, the whole name or nothing) and their
 * expansion, and the built-in rules of every supported architecture.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "rules/rules.h"
#include "rules_test_util.h"

/* ------------------------------------------------------------------ */
/* Patterns                                                            */
/* ------------------------------------------------------------------ */

static void match(const char *pattern, const char *name, long n, long e)
{
	struct rules_capture cap = { 123, 456, 789 };

	cr_assert(rules_match(pattern, name, &cap), "'%s' does not match '%s'",
		  pattern, name);
	cr_assert_eq(cap.n, n, "'%s' on '%s': n = %ld", pattern, name, cap.n);
	cr_assert_eq(cap.e, e, "'%s' on '%s': e = %ld", pattern, name, cap.e);
}

static void no_match(const char *pattern, const char *name)
{
	struct rules_capture cap;

	cr_assert_not(rules_match(pattern, name, &cap), "'%s' matches '%s'",
		      pattern, name);
}

Test(pattern, literal)
{
	match("model.norm.weight", "model.norm.weight", -1, -1);
	match("", "", -1, -1);
	no_match("model.norm.weight", "model.norm.weigh");
	no_match("model.norm.weight", "model.norm.weights");
	no_match("model.norm.weight", "xmodel.norm.weight");
	no_match("model.norm.weight", "");
	no_match("", "a");
	/* '.' is a plain character, not "any". */
	no_match("model.norm.weight", "model_norm_weight");
}

Test(pattern, layer_number)
{
	const char *p = "model.layers.{n}.mlp.down_proj.weight";

	match(p, "model.layers.0.mlp.down_proj.weight", 0, -1);
	match(p, "model.layers.7.mlp.down_proj.weight", 7, -1);
	match(p, "model.layers.10.mlp.down_proj.weight", 10, -1);
	match(p, "model.layers.123.mlp.down_proj.weight", 123, -1);
	match(p, "model.layers.99999.mlp.down_proj.weight", 99999, -1);
	no_match(p, "model.layers..mlp.down_proj.weight");
	no_match(p, "model.layers.x.mlp.down_proj.weight");
	no_match(p, "model.layers.-1.mlp.down_proj.weight");
	no_match(p, "model.layers.+1.mlp.down_proj.weight");
	no_match(p, "model.layers.1a.mlp.down_proj.weight");
	no_match(p, "model.layers. 1.mlp.down_proj.weight");
}

Test(pattern, leading_zero_rejected)
{
	const char *p = "model.layers.{n}.input_layernorm.weight";

	no_match(p, "model.layers.01.input_layernorm.weight");
	no_match(p, "model.layers.00.input_layernorm.weight");
	no_match(p, "model.layers.007.input_layernorm.weight");
	match(p, "model.layers.0.input_layernorm.weight", 0, -1);
	no_match("experts.{e}.w1", "experts.05.w1");
	match("experts.{e}.w1", "experts.50.w1", -1, 50);
}

Test(pattern, partial_rejected)
{
	const char *p = "model.layers.{n}.self_attn.q_proj.weight";

	/* The name goes on past the pattern, or stops before its end. */
	no_match(p, "model.layers.1.self_attn.q_proj.weight_scale");
	no_match(p, "model.layers.1.self_attn.q_proj.weight.extra");
	no_match(p, "model.layers.1.self_attn.q_proj");
	no_match(p, "model.layers.1");
	no_match(p, "model.layers.");
	/* A prefix or a suffix in front of a matching name. */
	no_match(p, "base.model.layers.1.self_attn.q_proj.weight");
	no_match("lm_head.weight", "model.lm_head.weight");
	/* A placeholder at the very end needs digits up to the end. */
	match("h.{n}", "h.12", 12, -1);
	no_match("h.{n}", "h.12x");
	no_match("h.{n}", "h.");
}

Test(pattern, experts)
{
	const char *p = "model.layers.{n}.block_sparse_moe.experts.{e}.w1.weight";

	match(p, "model.layers.3.block_sparse_moe.experts.0.w1.weight", 3, 0);
	match(p, "model.layers.31.block_sparse_moe.experts.7.w1.weight", 31, 7);
	no_match(p, "model.layers.3.block_sparse_moe.experts.0.w2.weight");
	no_match(p, "model.layers.3.block_sparse_moe.experts..w1.weight");
	/* Two placeholders side by side cannot both match digits. */
	no_match("x.{n}{e}", "x.12");
}

Test(pattern, braces_that_are_not_placeholders)
{
	match("a.{x}.b", "a.{x}.b", -1, -1);
	no_match("a.{x}.b", "a.1.b");
	match("a.{n", "a.{n", -1, -1);
	match("a.{N}", "a.{N}", -1, -1);
}

/* {i}, an index in a module list, is captured apart from {n} and {e}. */
Test(pattern, list_index)
{
	struct rules_capture cap;
	char *got;

	cr_assert(rules_match("l.{n}.a.{i}.w", "l.3.a.12.w", &cap));
	cr_assert_eq(cap.n, 3);
	cr_assert_eq(cap.e, -1);
	cr_assert_eq(cap.i, 12);
	no_match("l.{n}.a.{i}.w", "l.3.a.x.w");
	no_match("l.{n}.a.{i}.w", "l.3.a.01.w");
	cap.i = 7;
	got = rules_expand("l.{n}.a.{i}.A.w", &cap);
	cr_assert_str_eq(got, "l.3.a.7.A.w");
	free(got);
}

/* Numbers too long to be a layer are not matched (no overflow). */
Test(pattern, huge_number)
{
	no_match("model.layers.{n}.w", "model.layers.99999999999999999999999.w");
	no_match("model.layers.{n}.w", "model.layers.18446744073709551616.w");
}

static void expand(const char *pattern, long n, long e, const char *want)
{
	struct rules_capture cap = { n, e, -1 };
	char *got = rules_expand(pattern, &cap);

	cr_assert_not_null(got);
	cr_assert_str_eq(got, want);
	free(got);
}

Test(pattern, expand)
{
	expand("model.layers.{n}.self_attn.qkv_proj.weight", 5, -1,
	       "model.layers.5.self_attn.qkv_proj.weight");
	expand("model.layers.{n}.mlp.experts.w13_weight", 0, 3,
	       "model.layers.0.mlp.experts.w13_weight");
	expand("layers.{n}.experts.{e}.w", 12, 34, "layers.12.experts.34.w");
	expand("lm_head.weight", -1, -1, "lm_head.weight");
	expand("", 1, 1, "");
	expand("{n}", 99999999, -1, "99999999");
	expand("a.{x}.{n", 1, 1, "a.{x}.{n");
}

/* Match then expand gives back the name (the round trip the plan relies on). */
Test(pattern, round_trip)
{
	static const char *const names[] = {
		"model.layers.0.mlp.up_proj.weight",
		"model.layers.17.mlp.up_proj.weight",
		"model.layers.400.mlp.up_proj.weight",
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct rules_capture cap;
		char *back;

		cr_assert(rules_match("model.layers.{n}.mlp.up_proj.weight", names[i], &cap));
		back = rules_expand("model.layers.{n}.mlp.up_proj.weight", &cap);
		cr_assert_str_eq(back, names[i]);
		free(back);
	}
}

/*
 * Many placeholders with long numbers: the expansion must hold them all.
 * Each {n} (3 characters) becomes up to 9 digits, so 12 of them need 72
 * more bytes than the pattern.  A user rules file can write this.
 */
Test(pattern, expand_many_placeholders)
{
	char pattern[64] = "", want[256] = "";
	struct rules_capture cap;
	char *got;
	int i;

	for (i = 0; i < 12; i++) {
		strcat(pattern, "{n}");
		strcat(want, "999999999");
	}
	cr_assert(rules_match("w.{n}", "w.999999999", &cap));
	cr_assert_eq(cap.n, 999999999);
	got = rules_expand(pattern, &cap);
	cr_assert_not_null(got);
	cr_assert_str_eq(got, want);
	free(got);
}

/* ------------------------------------------------------------------ */
/* Built-in rules                                                      */
/* ------------------------------------------------------------------ */

static const char *const archs[] = {
	"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
	"Qwen3ForCausalLM", "GemmaForCausalLM", "Gemma2ForCausalLM",
	"Gemma3ForCausalLM",
	"Phi3ForCausalLM", "MixtralForCausalLM", "Qwen2MoeForCausalLM",
	"Qwen3MoeForCausalLM", "MiniMaxM2ForCausalLM",
	/* releases vLLM builds as Llama (llama.json) */
	"InternLM3ForCausalLM", "IQuestCoderForCausalLM", "TeleChat3ForCausalLM",
	"LLaMAForCausalLM", "TeleFLMForCausalLM", "SolarForCausalLM",
	/* Qwen2 with a multi-token-prediction layer vLLM leaves out (qwen2.json) */
	"MiMoForCausalLM",
};
#define NARCHS (sizeof(archs) / sizeof(archs[0]))

/* Embedding models saved headless: names without "model.", no LM head. */
static const char *const embed_archs[] = {
	"LlamaModel", "MistralModel", "Qwen2Model", "Gemma2Model", "LlamaBidirectionalModel",
	"DeepseekV3BidirectionalModel", "JinaEmbeddingsV5Model",
};
#define NEMBED (sizeof(embed_archs) / sizeof(embed_archs[0]))

/* Classifiers and reward models: a score head in place of the LM head. */
static const char *const cls_archs[] = {
	"GPT2ForSequenceClassification", "LlamaBidirectionalForSequenceClassification",
	"JambaForSequenceClassification",
};
#define NCLS (sizeof(cls_archs) / sizeof(cls_archs[0]))

/* Classifiers no file names: their causal model's rules made a
 * classifier's (rules_load.c), named BASE_cls. */
static const struct {
	const char *arch, *rules;
} derived_cls[] = {
	{ "LlamaForSequenceClassification", "builtin:llama_cls" },
	{ "MistralForSequenceClassification", "builtin:llama_cls" },
	{ "Qwen2ForSequenceClassification", "builtin:qwen2_cls" },
	{ "Qwen3ForSequenceClassification", "builtin:qwen3_cls" },
	{ "Gemma2ForSequenceClassification", "builtin:gemma2_cls" },
	{ "Qwen3MoeForSequenceClassification", "builtin:qwen3_moe_cls" },
	{ "Phi3ForSequenceClassification", "builtin:phi3_cls" },
	{ "PhiForSequenceClassification", "builtin:phi_cls" },
	{ "Qwen3ForTokenClassification", "builtin:qwen3_cls" },
	{ "LlamaForTokenClassification", "builtin:llama_cls" },
};
#define NDERIVED_CLS (sizeof(derived_cls) / sizeof(derived_cls[0]))

/* Encoder-only models (BERT, RoBERTa, XLM-R): embedding models saved
 * headless or with an MLM head, and sequence and token classifiers under
 * bert. or roberta. */
static const char *const encoder_archs[] = {
	"BertModel", "RobertaModel", "XLMRobertaModel", "BertForSequenceClassification",
	"RobertaForSequenceClassification", "XLMRobertaForSequenceClassification",
	"RobertaForMaskedLM", "BertForTokenClassification", "RobertaForTokenClassification",
	"XLMRobertaForTokenClassification",
};
#define NENCODER (sizeof(encoder_archs) / sizeof(encoder_archs[0]))

/* ModernBERT: its own encoder layers (modernbert_layer), no position_ids. */
static const char *const modernbert_archs[] = {
	"ModernBertModel", "ModernBertForSequenceClassification",
	"ModernBertForTokenClassification",
};
#define NMODERNBERT (sizeof(modernbert_archs) / sizeof(modernbert_archs[0]))

/* Rules whose first rule leaves out the layers past num_hidden_layers
 * (multi-token prediction), so every layer tensor matches it first. */
static const char *const mtp_archs[] = {
	"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "Glm4MoeForCausalLM",
	"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM",
};
#define NMTP (sizeof(mtp_archs) / sizeof(mtp_archs[0]))

/* Hybrid Gated DeltaNet / full attention models, whose rules begin by
 * leaving out mtp.* (tested in builtin.hybrid_architectures). */
static const char *const hybrid_archs[] = {
	"Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
	"Qwen4ExpForCausalLM",
};
#define NHYBRID (sizeof(hybrid_archs) / sizeof(hybrid_archs[0]))

/* Multimodal rules: the text model under language_model.model. */
static const char *const mm_archs[] = {
	"Gemma3ForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
	"Qwen3_5MoeForConditionalGeneration", "Qwen3VLForConditionalGeneration",
	"Qwen3VLMoeForConditionalGeneration", "KimiK25ForConditionalGeneration",
	"Gemma4ForConditionalGeneration", "Qwen2VLForConditionalGeneration",
	"Qwen2_5_VLForConditionalGeneration", "Mistral3ForConditionalGeneration",
	"Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration",
	"LlavaForConditionalGeneration", "InternVLForConditionalGeneration",
	"LlavaNextForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
	"LlavaOnevisionForConditionalGeneration", "PaliGemmaForConditionalGeneration",
	"Idefics3ForConditionalGeneration", "SmolVLMForConditionalGeneration",
	"Qwen4ExpForConditionalGeneration", "Lfm2VlForConditionalGeneration",
	"LlavaNextVideoForConditionalGeneration", "GlmOcrForConditionalGeneration",
	"QianfanOCRForConditionalGeneration", "Exaone4_5_ForConditionalGeneration",
	"Blip2ForConditionalGeneration", "Qwen2AudioForConditionalGeneration",
	"PaddleOCRVLForConditionalGeneration", "AudioFlamingo3ForConditionalGeneration",
	"Qwen3ASRForConditionalGeneration", "Qwen3OmniMoeForConditionalGeneration",
	"Qwen2_5OmniModel", "Qwen2_5OmniForConditionalGeneration",
	"MiniCPMV4_6ForConditionalGeneration", "MiniCPMV4_7ForConditionalGeneration",
	"Gemma4UnifiedForConditionalGeneration", "GlmAsrForConditionalGeneration",
	"Granite4VisionForConditionalGeneration", "AriaForConditionalGeneration",
	"Gemma3nForConditionalGeneration", "CohereCompassForConditionalGeneration",
	"DotsOCRForCausalLM", "JinaVLForRanking", "GraniteSpeechForConditionalGeneration",
	"GraniteSpeechPlusForConditionalGeneration", "Cosmos3ForConditionalGeneration",
};
#define NMM (sizeof(mm_archs) / sizeof(mm_archs[0]))

/* Rules learned from vLLM by scripts/learn-rules (Granite, CWM and
 * Ministral 3 share Llama's file, OLMo 2 and 3 EXAONE 4's, SmolLM3
 * ERNIE 4.5's). */
static const char *const learned_archs[] = {
	"GraniteForCausalLM", "CwmForCausalLM", "Ministral3ForCausalLM", "CohereForCausalLM",
	"Ernie4_5ForCausalLM", "SmolLM3ForCausalLM", "Exaone4ForCausalLM", "Olmo2ForCausalLM",
	"Olmo3ForCausalLM", "Glm4ForCausalLM", "HunYuanDenseV1ForCausalLM",
	"HunYuanMoEV1ForCausalLM", "GPTNeoXForCausalLM", "GraniteMoeForCausalLM",
	"NemotronForCausalLM", "OlmoeForCausalLM", "SeedOssForCausalLM", "Starcoder2ForCausalLM",
	"PhiForCausalLM", "FalconH1ForCausalLM", "Cohere2ForCausalLM", "GlmForCausalLM",
	"ApertusForCausalLM", "ExaoneMoeForCausalLM", "ExaoneMoEForCausalLM", "Jais2ForCausalLM",
	"OPTForCausalLM", "GPTJForCausalLM", "HyperCLOVAXForCausalLM", "OlmoForCausalLM",
	"MellumForCausalLM", "VaultGemmaForCausalLM", "ArceeForCausalLM", "FlexOlmoForCausalLM",
	"MiniCPM3ForCausalLM", "StableLmForCausalLM", "MambaForCausalLM",
	"FalconMambaForCausalLM", "JambaForCausalLM", "GraniteSWAForCausalLM",
	"GraniteMoeSWAForCausalLM", "GraniteMoeSharedForCausalLM", "Cohere2MoeForCausalLM",
	"Gemma4ForCausalLM", "AXK1ForCausalLM", "HYV4ForCausalLM", "LagunaForCausalLM",
};
#define NLEARNED (sizeof(learned_archs) / sizeof(learned_archs[0]))

/* Learned without a pipeline key (Nemotron-H, Granite 4.0's hybrids,
 * GPTBigCode: vLLM's CPU build saved no stages of them; Mamba-2, Zamba2,
 * Gemma 3n: vLLM has none). */
static const char *const learned_no_pp[] = {
	"NemotronHForCausalLM", "GraniteMoeHybridForCausalLM", "Ernie4_5_MoeForCausalLM",
	"Glm4MoeLiteForCausalLM", "AfmoeForCausalLM", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM",
	"HYV3ForCausalLM", "Mamba2ForCausalLM", "GPTBigCodeForCausalLM", "Zamba2ForCausalLM",
	"Gemma3nForCausalLM", "HrmTextForCausalLM",
};
#define NLEARNED_NO_PP (sizeof(learned_no_pp) / sizeof(learned_no_pp[0]))

Test(builtin, every_architecture_loads)
{
	size_t i, j;

	for (i = 0; i < NARCHS; i++) {
		struct wshard_rules *r = NULL;
		struct wshard_error err;
		struct rules_capture cap;
		bool found = false;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, archs[i], &err), WSHARD_OK,
			     "%s: %s", archs[i], err.msg);
		cr_assert_not_null(r);
		cr_assert_eq(strncmp(wshard_rules_name(r), "builtin:", 8), 0);
		for (j = 0; j < r->narchs; j++)
			found |= !strcmp(r->archs[j], archs[i]);
		cr_assert(found, "%s not in its own rules", archs[i]);
		/* Every architecture covers the common tensors. */
		cr_assert_not_null(find_rule(r, "model.embed_tokens.weight", &cap), "%s", archs[i]);
		cr_assert_eq(find_rule(r, "model.embed_tokens.weight", &cap)->kind, RULE_VOCAB);
		cr_assert_not_null(find_rule(r, "lm_head.weight", &cap), "%s", archs[i]);
		cr_assert_eq(find_rule(r, "model.norm.weight", &cap)->kind, RULE_REPLICATE);
		cr_assert_eq(find_rule(r, "model.layers.3.self_attn.o_proj.weight", &cap)->kind,
			     RULE_COL);
		cr_assert_eq(cap.n, 3);
		/* Mixtral and MiniMax-M2 have experts only */
		if (strcmp(archs[i], "MixtralForCausalLM") != 0 &&
		    strcmp(archs[i], "MiniMaxM2ForCausalLM") != 0)
			cr_assert_eq(find_rule(r, "model.layers.0.mlp.down_proj.weight",
					       &cap)->kind, RULE_COL, "%s", archs[i]);
		cr_assert_eq(find_rule(r, "model.layers.0.input_layernorm.weight", &cap)->kind,
			     RULE_REPLICATE);
		cr_assert_eq(find_rule(r, "model.layers.0.self_attn.rotary_emb.inv_freq", &cap)->kind,
			     RULE_SKIP);
		cr_assert_null(find_rule(r, "model.layers.0.self_attn.unknown.weight", &cap));
		/* The attention scale buffers, then the quantized attention's
		 * own scales (vLLM 0.32). */
		cr_assert_eq(r->nextras, 8, "%s", archs[i]);
		for (j = 0; j < 4; j++) {
			cr_assert_eq(r->extras[j].dtype, WSHARD_F32);
			cr_assert_eq(r->extras[j].value, 1.0);
			cr_assert_str_eq(r->extras[j].option, "attn_scales");
			cr_assert_not(r->extras[j].when_quantized);
		}
		for (; j < 8; j++) {
			cr_assert(r->extras[j].model_dtype);
			cr_assert(r->extras[j].when_quantized);
			cr_assert_eq(r->extras[j].value, -1.0);
			cr_assert_null(r->extras[j].option);
		}
		cr_assert_str_eq(r->tie_source, "model.embed_tokens.weight");
		wshard_rules_free(r);
	}
}

/*
 * DeepSeek and GLM-4.5: the MTP layers are left out with a reason, by a
 * conditional skip; DeepSeek's q_a/kv_a fuse replicated, and its MLA
 * layers have the four scale buffers only; GLM's routers are F32.
 */
Test(builtin, mtp_architectures)
{
	size_t i, j;

	for (i = 0; i < NMTP; i++) {
		struct wshard_rules *r = NULL;
		struct wshard_error err;
		struct rules_capture cap;
		bool f32 = false, mla;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, mtp_archs[i], &err), WSHARD_OK,
			     "%s: %s", mtp_archs[i], err.msg);
		cr_assert_eq(r->rules[0].kind, RULE_SKIP);
		cr_assert_str_eq(r->rules[0].cond, "n >= num_hidden_layers");
		cr_assert_not_null(r->rules[0].reason);
		cr_assert(rules_match(r->rules[0].match, "model.layers.61.eh_proj.weight", &cap));
		cr_assert_eq(cap.n, 61);
		cr_assert_eq(find_rule(r, "model.norm.weight", &cap)->kind, RULE_REPLICATE);
		for (j = 0; j < r->nrules; j++)
			f32 |= r->rules[j].has_dtype && r->rules[j].dtype == WSHARD_F32 &&
			       strstr(r->rules[j].match, "e_score_correction_bias");
		cr_assert(f32, "%s", mtp_archs[i]);
		mla = strcmp(mtp_archs[i], "Glm4MoeForCausalLM") != 0;
		for (j = 0; j < r->nextras; j++)
			cr_assert_not(r->extras[j].when_quantized && mla,
				      "%s: MLA has no quantized attention scales", mtp_archs[i]);
		if (mla) {
			cr_assert_eq(r->nextras, 4);
			/* q_a/kv_a and the DSA indexer's wk/weights_proj: whole */
			size_t whole = 0;

			for (j = 0; j < r->nops; j++)
				whole += (!strcmp(r->ops[j].name, "qkv_a") ||
					  !strcmp(r->ops[j].name, "wk_weights")) &&
					 r->ops[j].kind == OP_REPLICATE;
			cr_assert_eq(whole, 2, "%s", mtp_archs[i]);
		}
		wshard_rules_free(r);
	}
}

/* What differs between the families. */
Test(builtin, family_details)
{
	struct wshard_rules *r;
	struct wshard_error err;
	struct rules_capture cap;
	const struct rules_rule *rule;

	cr_assert_eq(wshard_rules_builtin(&r, "Phi3ForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, "model.layers.2.self_attn.qkv_proj.weight", &cap);
	cr_assert_not_null(rule);
	cr_assert_eq(rule->kind, RULE_UNPACK);
	cr_assert_str_eq(r->ops[rule->op].name, "qkv");
	rule = find_rule(r, "model.layers.2.mlp.gate_up_proj.weight", &cap);
	cr_assert_eq(rule->kind, RULE_UNPACK);
	cr_assert_str_eq(r->ops[rule->op].name, "gate_up");
	cr_assert_null(find_rule(r, "model.layers.2.self_attn.q_proj.weight", &cap));
	cr_assert_str_eq(r->tie_output, "lm_head.weight");
	wshard_rules_free(r);

	cr_assert_eq(wshard_rules_builtin(&r, "Qwen2ForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, "model.layers.1.self_attn.k_proj.bias", &cap);
	cr_assert_not_null(rule);
	cr_assert_eq(rule->kind, RULE_FUSE);
	cr_assert_str_eq(r->ops[rule->op].parts[rule->part], "k");
	cr_assert_str_eq(rule->output, "model.layers.{n}.self_attn.qkv_proj.bias");
	wshard_rules_free(r);

	cr_assert_eq(wshard_rules_builtin(&r, "Qwen3ForCausalLM", &err), WSHARD_OK);
	cr_assert_eq(find_rule(r, "model.layers.1.self_attn.q_norm.weight", &cap)->kind,
		     RULE_REPLICATE);
	cr_assert_eq(find_rule(r, "model.layers.1.self_attn.k_norm.weight", &cap)->kind,
		     RULE_REPLICATE);
	wshard_rules_free(r);

	cr_assert_eq(wshard_rules_builtin(&r, "Gemma2ForCausalLM", &err), WSHARD_OK);
	cr_assert_eq(find_rule(r, "model.layers.1.pre_feedforward_layernorm.weight", &cap)->kind,
		     RULE_REPLICATE);
	cr_assert_eq(find_rule(r, "model.layers.1.post_feedforward_layernorm.weight", &cap)->kind,
		     RULE_REPLICATE);
	cr_assert_str_eq(r->tie_output, "model.embed_tokens.weight");
	cr_assert(r->tie_always);
	wshard_rules_free(r);

	cr_assert_eq(wshard_rules_builtin(&r, "LlamaForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, "model.layers.9.self_attn.v_proj.weight", &cap);
	cr_assert_eq(rule->kind, RULE_FUSE);
	cr_assert_str_eq(r->ops[rule->op].name, "qkv");
	cr_assert_str_eq(r->ops[rule->op].parts[rule->part], "v");
	rule = find_rule(r, "model.layers.9.mlp.up_proj.weight", &cap);
	cr_assert_str_eq(r->ops[rule->op].name, "gate_up");
	cr_assert_str_eq(r->ops[rule->op].parts[rule->part], "up");
	cr_assert_str_eq(r->tie_output, "lm_head.weight");
	cr_assert_not(r->tie_default);
	cr_assert_not(r->tie_always);
	cr_assert_null(find_rule(r, "model.layers.1.self_attn.q_norm.weight", &cap));
	wshard_rules_free(r);

	/* Step-1: tied where config.json says nothing, whatever head ships */
	cr_assert_eq(wshard_rules_builtin(&r, "Step1ForCausalLM", &err), WSHARD_OK);
	cr_assert(r->tie_default);
	cr_assert(r->tie_default_holds);
	wshard_rules_free(r);
}

/*
 * Falcon and BLOOM: query_key_value unpacked by kv-head group, Falcon's kv
 * heads an expression of its three config keys; BLOOM's (and GPT-2's)
 * sources matched with "transformer." in front where they lack it.
 */
Test(builtin, qkv_groups)
{
	struct wshard_rules *r;
	struct wshard_error err;
	struct rules_capture cap;
	const struct rules_rule *rule;
	char buf[RULES_NAME_MAX];

	cr_assert_eq(wshard_rules_builtin(&r, "FalconForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, "transformer.h.3.self_attention.query_key_value.weight", &cap);
	cr_assert_not_null(rule);
	cr_assert_eq(rule->kind, RULE_UNPACK);
	cr_assert(rule->qkv_groups);
	cr_assert_eq(r->ops[rule->op].kind, OP_QKV);
	cr_assert_not_null(strstr(r->ops[rule->op].kv_heads, "num_kv_heads"));
	cr_assert_null(r->source_prefix);
	wshard_rules_free(r);

	cr_assert_eq(wshard_rules_builtin(&r, "BloomForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, rules_source_name(r, "h.0.self_attention.query_key_value.bias", buf),
			 &cap);
	cr_assert_not_null(rule);
	cr_assert(rule->qkv_groups);
	cr_assert_str_eq(r->tie_source, "transformer.word_embeddings.weight");
	wshard_rules_free(r);

	/* MiMo-V2-Flash: its multi-token prediction layer left out, named */
	cr_assert_eq(wshard_rules_builtin(&r, "MiMoV2FlashForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, "model.mtp.layers.0.eh_proj.weight", &cap);
	cr_assert_not_null(rule);
	cr_assert_eq(rule->kind, RULE_SKIP);
	cr_assert_not_null(rule->reason);
	wshard_rules_free(r);

	/* GPT-2: Conv1D weights transposed after the cut, q/k/v as chunks */
	cr_assert_eq(wshard_rules_builtin(&r, "GPT2LMHeadModel", &err), WSHARD_OK);
	rule = find_rule(r, rules_source_name(r, "h.0.attn.c_attn.weight", buf), &cap);
	cr_assert_not_null(rule);
	cr_assert(rule->transpose);
	cr_assert_eq(rule->chunks, 3);
	cr_assert_eq(rule->rows, 2);
	cr_assert_eq(find_rule(r, "transformer.h.0.attn.bias", &cap)->kind, RULE_SKIP);
	wshard_rules_free(r);
}

Test(builtin, moe_details)
{
	struct wshard_rules *r;
	struct wshard_error err;
	struct rules_capture cap;
	const struct rules_rule *rule;

	cr_assert_eq(wshard_rules_builtin(&r, "MixtralForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, "model.layers.1.block_sparse_moe.experts.7.w3.weight", &cap);
	cr_assert_not_null(rule);
	cr_assert_eq(cap.n, 1);
	cr_assert_eq(cap.e, 7);
	cr_assert_eq(rule->kind, RULE_FUSE);
	cr_assert_str_eq(r->ops[rule->op].name, "w13");
	cr_assert_str_eq(r->ops[rule->op].parts[rule->part], "w3");
	cr_assert_str_eq(rule->output, "model.layers.{n}.block_sparse_moe.experts.routed_experts.w13_weight");
	rule = find_rule(r, "model.layers.1.block_sparse_moe.experts.0.w2.weight", &cap);
	cr_assert_eq(rule->kind, RULE_COL);
	cr_assert_str_eq(rule->output, "model.layers.{n}.block_sparse_moe.experts.routed_experts.w2_weight");
	cr_assert_eq(find_rule(r, "model.layers.1.block_sparse_moe.gate.weight", &cap)->kind,
		     RULE_REPLICATE);
	wshard_rules_free(r);

	cr_assert_eq(wshard_rules_builtin(&r, "Qwen2MoeForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, "model.layers.0.mlp.experts.3.gate_proj.weight", &cap);
	cr_assert_not_null(rule);
	cr_assert_str_eq(r->ops[rule->op].parts[rule->part], "w1");
	rule = find_rule(r, "model.layers.0.mlp.shared_expert.up_proj.weight", &cap);
	cr_assert_not_null(rule);
	cr_assert_str_eq(r->ops[rule->op].name, "gate_up");
	cr_assert_eq(find_rule(r, "model.layers.0.mlp.shared_expert_gate.weight", &cap)->kind,
		     RULE_REPLICATE);
	wshard_rules_free(r);
}

/* FP8 scales get rules derived from their weight's rule. */
Test(builtin, derived_scale_rules)
{
	struct wshard_rules *r;
	struct wshard_error err;
	struct rules_capture cap;
	const struct rules_rule *rule;

	cr_assert_eq(wshard_rules_builtin(&r, "LlamaForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, "model.layers.4.self_attn.k_proj.weight_scale", &cap);
	cr_assert_not_null(rule);
	cr_assert(rule->scale);
	cr_assert(rule->optional);
	cr_assert_eq(rule->kind, RULE_FUSE);
	cr_assert_str_eq(r->ops[rule->op].parts[rule->part], "k");
	cr_assert_str_eq(rule->output, "model.layers.{n}.self_attn.qkv_proj.weight_scale");
	rule = find_rule(r, "model.layers.4.mlp.down_proj.input_scale", &cap);
	cr_assert_not_null(rule);
	cr_assert_eq(rule->kind, RULE_REPLICATE);
	rule = find_rule(r, "model.layers.4.mlp.down_proj.weight_scale_inv", &cap);
	cr_assert_not_null(rule);
	cr_assert_eq(rule->kind, RULE_COL);
	/* Not for the vocabulary (no scale there) nor for the norms' names. */
	cr_assert_null(find_rule(r, "model.embed_tokens.weight_scale", &cap));
	wshard_rules_free(r);
}

/*
 * Mistral's own format names its per-tensor FP8 scales X.qscale_weight and
 * X.qscale_act: derived like X.weight_scale and X.input_scale, written
 * under those names (vLLM's mistral_mapping, MistralLarge3's suffixes),
 * an expert's input scale one for w1 and w3.
 */
Test(builtin, derived_mistral_qscales)
{
	size_t i;
	struct wshard_rules *r;
	struct wshard_error err;
	struct rules_capture cap;
	const struct rules_rule *rule;

	cr_assert_eq(wshard_rules_builtin(&r, "mistral:MistralForCausalLM", &err), WSHARD_OK);
	rule = find_rule(r, "layers.1.attention.wk.qscale_weight", &cap);
	cr_assert_not_null(rule);
	cr_assert(rule->scale);
	cr_assert_eq(rule->kind, RULE_FUSE);
	cr_assert_str_eq(r->ops[rule->op].parts[rule->part], "k");
	cr_assert_str_eq(rule->output, "model.layers.{n}.self_attn.qkv_proj.weight_scale");
	rule = find_rule(r, "layers.1.feed_forward.w2.qscale_act", &cap);
	cr_assert_not_null(rule);
	cr_assert_eq(rule->kind, RULE_REPLICATE);
	cr_assert_str_eq(rule->output, "model.layers.{n}.mlp.down_proj.input_scale");
	wshard_rules_free(r);

	/* by its match: the first rule, for MTP layers, matches every name */
	cr_assert_eq(wshard_rules_builtin(&r, "MistralLarge3ForCausalLM", &err), WSHARD_OK);
	for (i = 0, rule = NULL; i < r->nrules && !rule; i++)
		if (!strcmp(r->rules[i].match, "model.layers.{n}.mlp.experts.{e}.up_proj.qscale_act"))
			rule = &r->rules[i];
	cr_assert_not_null(rule);
	cr_assert(rule->collapse);
	cr_assert_str_eq(rule->output, "model.layers.{n}.mlp.experts.routed_experts.w13_input_scale");
	wshard_rules_free(r);
}

/*
 * Qwen3-Next and Qwen3.5: the linear attention's conv1d unpacked into q, k
 * and v by the operator's sizes; Qwen3-Next's in_proj_qkvz split by rows
 * as shipped, Qwen3.5's built from in_proj_qkv (parts q, k, v) and
 * in_proj_z; A_log in F32; both layer kinds optional; the attention scale
 * buffers only in the layers with full attention.
 */
Test(builtin, hybrid_architectures)
{
	size_t i, j;

	for (i = 0; i < NHYBRID; i++) {
		const char *L = "model.layers.0.linear_attn.";
		struct wshard_rules *r = NULL;
		struct wshard_error err;
		struct rules_capture cap;
		const struct rules_rule *rule;
		char name[128];
		bool next = i == 0;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, hybrid_archs[i], &err), WSHARD_OK,
			     "%s: %s", hybrid_archs[i], err.msg);
		cr_assert_eq(r->rules[0].kind, RULE_SKIP);
		cr_assert(rules_match(r->rules[0].match, "mtp.layers.0.mlp.gate.weight", &cap));
		snprintf(name, sizeof(name), "%sconv1d.weight", L);
		rule = find_rule(r, name, &cap);
		cr_assert_eq(rule->kind, RULE_UNPACK);
		cr_assert_str_eq(r->ops[rule->op].name, "conv_qkv");
		cr_assert_not_null(r->ops[rule->op].sizes[2]);
		cr_assert(rule->optional);
		snprintf(name, sizeof(name), "%sin_proj_%s.weight", L, next ? "qkvz" : "qkv");
		rule = find_rule(r, name, &cap);
		cr_assert_not_null(rule, "%s: %s", hybrid_archs[i], name);
		cr_assert_eq(rule->kind, next ? RULE_ROW : RULE_FUSE);
		if (!next) {
			cr_assert_eq(rule->part, 0);
			cr_assert_eq(rule->nparts, 3);
			cr_assert_str_eq(rule->output, "model.layers.{n}.linear_attn.in_proj_qkvz.weight");
		}
		snprintf(name, sizeof(name), "%sA_log", L);
		rule = find_rule(r, name, &cap);
		cr_assert(rule->has_dtype);
		cr_assert_eq(rule->dtype, WSHARD_F32);
		rule = find_rule(r, "model.layers.3.self_attn.q_proj.weight", &cap);
		cr_assert_eq(rule->kind, RULE_FUSE);
		cr_assert(rule->optional);
		cr_assert_eq(r->nextras, 8);
		for (j = 0; j < 8; j++)
			cr_assert_str_eq(r->extras[j].with, "model.layers.{n}.self_attn.o_proj.weight");
		wshard_rules_free(r);
	}
}

Test(builtin, unknown_architecture)
{
	static const char *const olmo[] = { "OlmoForCausalLM", "Olmo2ForCausalLM",
					    "Olmo3ForCausalLM", "OlmoeForCausalLM",
					    "OlmoHybridForCausalLM" };
	const char *const *list = wshard_rules_architectures();
	struct wshard_rules *r = (void *)1;
	struct wshard_error err;
	char count[64];
	size_t i, n = 0;

	while (list[n])
		n++;
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_builtin(&r, "Olmo4ForCausalLM", &err), WSHARD_EINVAL);
	cr_assert_null(r);
	cr_assert_not_null(strstr(err.msg, "'Olmo4ForCausalLM'"), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "--rules"), "%s", err.msg);
	/* not all hundred-odd names: the count, and those of its family */
	snprintf(count, sizeof(count), "the %zu built in", n);
	cr_assert_not_null(strstr(err.msg, count), "%s", err.msg);
	for (i = 0; i < sizeof(olmo) / sizeof(olmo[0]); i++)
		cr_assert_not_null(strstr(err.msg, olmo[i]), "'%s' lacks %s", err.msg,
				   olmo[i]);
	cr_assert_null(strstr(err.msg, "LlamaForCausalLM"), "%s", err.msg);
	cr_assert_null(strchr(err.msg, '\n'));

	/* Case matters: config.json spells the class exactly. */
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_builtin(&r, "llamaforcausallm", &err), WSHARD_EINVAL);
	cr_assert_null(r);
}

Test(builtin, no_architecture)
{
	struct wshard_rules *r = (void *)1;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_builtin(&r, NULL, &err), WSHARD_EINVAL);
	cr_assert_null(r);
	cr_assert_not_null(strstr(err.msg, "LlamaForCausalLM"), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "config.json"), "%s", err.msg);
}

Test(builtin, learned_architectures)
{
	struct wshard_error err;
	size_t i, j;

	for (i = 0; i < NLEARNED; i++) {
		struct wshard_rules *r = NULL;
		bool found = false;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, learned_archs[i], &err), WSHARD_OK,
			     "%s: %s", learned_archs[i], err.msg);
		for (j = 0; j < r->narchs; j++)
			found |= !strcmp(r->archs[j], learned_archs[i]);
		cr_assert(found, "%s not in its own rules", learned_archs[i]);
		cr_assert_not_null(r->pp_layers, "%s: no pipeline key", learned_archs[i]);
		wshard_rules_free(r);
	}
	for (i = 0; i < NLEARNED_NO_PP; i++) {
		struct wshard_rules *r = NULL;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, learned_no_pp[i], &err), WSHARD_OK,
			     "%s: %s", learned_no_pp[i], err.msg);
		wshard_rules_free(r);
	}
}

Test(builtin, architectures_list)
{
	const char *const *list = wshard_rules_architectures();
	size_t n = 0, i, j;

	cr_assert_not_null(list);
	for (; list[n]; n++)
		for (j = 0; j < n; j++)
			cr_assert_str_neq(list[j], list[n], "listed twice: %s", list[n]);
	cr_assert_eq(n, NARCHS + NEMBED + NCLS + NENCODER + NMODERNBERT + NMTP + NHYBRID + NMM + NLEARNED + NLEARNED_NO_PP +
			223 /* DeepSeek-V4 (2: and DeepseekV4ForConditionalGeneration, its
			      vision tower), DeepSeek-V4.1, GPT-OSS, OpenAI Privacy Filter,
			      Llama 4 (2), LongCat-Flash,
			      LongCat-Flash-Lite (n-gram), Kimi Linear,
			      MiMo-V2-Flash, Falcon, BLOOM, GPT-2, DBRX, Whisper,
			      OLMo Hybrid, Phi-3.5-MoE, Gemma3TextModel, CLIPModel,
			      SiglipModel, ColPaliForRetrieval, Inkling (2), GLM-5-Next
			      (2: with its tower and without), MiniMax-M3 (2), Muse Glimmer (2: with its tower and
			      without), HyperCLOVA X SEED Think, OpenCUA, Bee, R-4B, Cosmos 3 Edge, Phi-4-reasoning-vision, Phi-4-multimodal, Eagle 2.5, Llama Nemotron VL
			      (3: the embedding model, the reranker, Nano VL), StepVL, Step-3 VL,
			      Keye-VL, Keye-VL 1.5, Kanana-V, LLaVA-OneVision-2, Moondream 3 (2: HfMoondream,
			      Moondream3ForCausalLM), Nemotron-Parse, Molmo2, Molmo, BAGEL, OpenVLA,
			      Ovis2.5 (3: Ovis2_5, Ovis2_6ForCausalLM,
			      Ovis2_6_MoeForCausalLM), Ovis2 (Ovis),
			      HunYuanVL, Emu3, Mistral Large 3,
			      mistral:MistralForCausalLM and
			      PixtralForConditionalGeneration and
			      VoxtralForConditionalGeneration and
			      VoxtralRealtimeGeneration (Mistral's format),
			      ClefOmniForJointSchema,
			      EagleMistralLarge3ForCausalLM (its EAGLE draft),
			      BertForMaskedLM,
			      NomicBertModel, GteModel, EmbeddingGemma2Model,
			      Qwen2 reward models (2), ColModernVBERT, Orion,
			      Nemotron-NAS, Nemotron-H Puzzle, Nemotron-H VL and
			      omni (4: NemotronH_Nano_VL_V2,
			      NemotronH_Nano_Omni_Reasoning_V3,
			      NemotronH_Omni_Reasoning_V3,
			      NemotronH_Super_Omni_Reasoning_V3), InternLM2 (2), ChatGLM (2), MiniCPM,
			      EXAONE 3, ERNIE-4.5-VL, Kimi K3, Ling (2), Ling 3, Ling 3 VL, Ling 2.5,
			      InternVLChatModel, TeleChat2, Step-3.5, Step-3.7,
			      DeepSeek-MoE, IQuest-Coder Loop, Nanbeige 4.2, Step-3 text, Step-1,
			      Sarvam-30B, mGTE (2), openPangu (3), openPangu-VL, Param-2,
			      Sarvam-105B, mGTE reranker (2), K2-Horizon,
			      PLaMo 3, H2OVL, NVLM-D, Skywork-R1V,
			      Intern-S1, Intern-S1-Pro, Intern-S2-Preview, Intern-S2-Mobius,
			      Kimi-VL, Rnj-1, MiMo-V2, MiMo-V2.5 omni
			      (MiMoV2OmniForCausalLM), Ultravox, MiDashengLM, Kimi-Audio,
			      FireRedASR2, Cohere Transcribe, FunASR, FunAudioChat,
			      MOSS-Transcribe-Diarize, MOSS-Audio, VibeVoice-ASR,
			      Qwen3-ASR's streaming class and forced aligner (2:
			      Qwen3ASRRealtimeGeneration,
			      Qwen3ASRForcedAlignerForTokenClassification),
			      MiniCPMV, MiniCPMO, Isaac, DeepSeek-VL2, LightOnOCR, GLM-4V,
			      Phi-3-V, ColQwen3 (3), ColQwen3.5, Voyage Qwen3,
			      JinaForRanking, ColBERT (4: HF_ColBERT,
			      ModernBERT, LFM2, Jina), SPLADE
			      (BertSpladeSparseEmbeddingModel), BGE-M3
			      (BgeM3EmbeddingModel), DeepSeek-OCR (2: and Unlimited-OCR), DeepSeek-OCR-2,
			      MiMo's MTP draft, MiMo-V2's, MiMo-V2.5 omni's
			      (MiMoV2OmniMTPModel), ERNIE's, DeepSeek-V3's,
			      DeepSeek-V3.2's (and GLM-5's), GLM-4.5's,
			      GLM-4.7-Flash's, K-EXAONE's, EXAONE 4.5's,
			      openPangu Ultra-MoE's, LongCat-Flash's,
			      Hunyuan 3's, Kimi K3's, Intern-S2-Mobius',
			      Qwen3-Next's, Qwen3.5's (2), GLM-OCR's,
			      GLM-5-Next's, Nemotron-H's, Qwen4-Exp's,
			      Hunyuan 4's, MiniMax-M3's, Inkling's, Ling 3's, Ling 2.5's,
			      dots3 NOTE (2: Dots3NoteForCausalLM and its
			      Dots3NoteMTPModel),
			      Step-3.5's (and Step-3.7's), DeepSeek-V4's,
			      Llama's EAGLE-3
			      draft (5: LlamaForCausalLMEagle3,
			      Eagle3LlamaForCausalLM, Eagle3Qwen2_5vlForCausalLM,
			      Eagle3Qwen3vlForCausalLM, Eagle3MiniMaxM2ForCausalLM),
			      its P-EAGLE names (2: PEagleDraftModel,
			      PeagleLlamaForCausalLM), Qwen3's (2:
			      Eagle3Qwen3ForCausalLM, PeagleQwen3ForCausalLM), DeepSeek's (2:
			      Eagle3DeepseekV2ForCausalLM,
			      Eagle3DeepseekV3ForCausalLM), DeepSeek's EAGLE
			      draft (EagleDeepSeekMTPModel), Gemma 4's MTP
			      assistant, Qwen3's DFlash draft (DFlashDraftModel),
			      Muse Glimmer's (2: MuseGlimmerAssistantModel,
			      DFlashMuseGlimmerAssistantModel), Qwen3's DFlash2
			      draft (DFlash2DraftModel), Laguna's DFlash draft
			      (DFlashLagunaForCausalLM), Qwen3's DSpark draft
			      (2: Qwen3DSparkModel, Qwen3OmniDSparkModel),
			      Gemma 4's (Gemma4DSparkModel), DeepSeek-V4's
			      (DSparkDraftModel), DeepSeek-V4.1's
			      (DSparkV41DraftModel), Kimi K3's (K3DSparkModel),
			      the Medusa draft (MedusaModel), Llama's EAGLE-1
			      draft (EagleLlamaForCausalLM), MiniCPM's
			      (EagleMiniCPMForCausalLM), Llama 4's
			      (EagleLlama4ForCausalLM), Command A's
			      (EagleCohereForCausalLM), a dense Mistral's
			      (EagleMistralForCausalLM), Qwen3's LiLiCorr
			      draft (LiLiCorrDraftModel) */,
		     "%zu listed", n);
	for (i = 0; i < NARCHS; i++) {
		bool found = false;

		for (j = 0; j < n; j++)
			found |= !strcmp(list[j], archs[i]);
		cr_assert(found, "%s not listed", archs[i]);
	}
	/* Stable: the same list again. */
	cr_assert_eq(wshard_rules_architectures(), list);
}


/*
 * The embedding models' rules read headless names as vLLM's pooling
 * adapter does (model. put in front), and write no LM head; the
 * classifiers' write their score head and no LM head.
 */
Test(builtin, embedding_architectures)
{
	struct wshard_error err;
	size_t i, k;

	for (i = 0; i < NEMBED; i++) {
		struct wshard_rules *r = NULL;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, embed_archs[i], &err), WSHARD_OK,
			     "%s: %s", embed_archs[i], err.msg);
		cr_assert_str_eq(r->source_prefix, "model.", "%s", embed_archs[i]);
		for (k = 0; k < r->nrules; k++)
			cr_assert(!r->rules[k].match || !strstr(r->rules[k].match, "lm_head"),
				  "%s: a rule for %s", embed_archs[i], r->rules[k].match);
		wshard_rules_free(r);
	}
	for (i = 0; i < NCLS; i++) {
		struct wshard_rules *r = NULL;
		bool score = false;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, cls_archs[i], &err), WSHARD_OK,
			     "%s: %s", cls_archs[i], err.msg);
		for (k = 0; k < r->nrules; k++) {
			const char *m = r->rules[k].match;

			cr_assert(!m || !strstr(m, "lm_head"), "%s: a rule for %s", cls_archs[i], m);
			score |= m && !strcmp(m, "score.weight");
		}
		cr_assert(score, "%s: no rule for score.weight", cls_archs[i]);
		wshard_rules_free(r);
	}
	/* the derived ones: every lm_head.* rule a skip, no tie, score (and
	 * its bias where shipped) whole in F32 and on every pipeline stage,
	 * before any other stage rule */
	for (i = 0; i < NDERIVED_CLS; i++) {
		const char *arch = derived_cls[i].arch;
		struct wshard_rules *r = NULL;
		size_t nscore = 0, nheads = 0, nbias = 0;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, arch, &err), WSHARD_OK, "%s: %s", arch, err.msg);
		cr_assert_str_eq(wshard_rules_name(r), derived_cls[i].rules, "%s", arch);
		cr_assert(r->narchs == 1 && !strcmp(r->archs[0], arch), "%s", arch);
		cr_assert_null(r->tie_output, "%s: tied", arch);
		for (k = 0; k < r->nrules; k++) {
			const struct rules_rule *rule = &r->rules[k];

			if (rule->match && !strncmp(rule->match, "lm_head.", 8)) {
				cr_assert_eq(rule->kind, RULE_SKIP, "%s: %s", arch, rule->match);
				nheads++;
			}
			if (rule->match && !strcmp(rule->match, "score.weight")) {
				cr_assert(rule->kind == RULE_REPLICATE && rule->has_dtype &&
					  rule->head_dtype, "%s: score", arch);
				nscore++;
			}
			if (rule->match && !strcmp(rule->match, "score.bias")) {
				cr_assert(rule->kind == RULE_REPLICATE && rule->head_dtype &&
					  rule->optional, "%s: score.bias", arch);
				nbias++;
			}
		}
		cr_assert(nheads > 0 && nscore == 1 && nbias == 1, "%s: %zu heads, %zu scores, %zu biases",
			  arch, nheads, nscore, nbias);
		cr_assert(r->npp_stages > 1 &&
			  !strcmp(r->pp_stages[0].pattern, "score.weight") &&
			  r->pp_stages[0].stage == RULES_STAGE_ALL &&
			  !strcmp(r->pp_stages[1].pattern, "score.bias") &&
			  r->pp_stages[1].stage == RULES_STAGE_ALL, "%s: score's stage", arch);
		for (k = 0; k < r->npp_stages; k++)
			cr_assert(strncmp(r->pp_stages[k].pattern, "lm_head", 7), "%s: %s", arch,
				  r->pp_stages[k].pattern);
		wshard_rules_free(r);
	}
	/* no causal model's rules, or a head from another name (GPT-NeoX's
	 * embed_out): no classifier either */
	for (i = 0; i < 3; i++) {
		static const char *const none[] = {
			"FooForSequenceClassification", "GPTNeoXForTokenClassification",
			"ForTokenClassification",
		};
		struct wshard_rules *r = NULL;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, none[i], &err), WSHARD_EINVAL, "%s", none[i]);
		cr_assert_null(r);
		cr_assert_not_null(strstr(err.msg, "no built-in rules"), "%s", err.msg);
	}
	/* the encoders write vLLM's position_ids buffer, and no pipeline */
	for (i = 0; i < NENCODER; i++) {
		struct wshard_rules *r = NULL;
		bool arange = false;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, encoder_archs[i], &err), WSHARD_OK,
			     "%s: %s", encoder_archs[i], err.msg);
		for (k = 0; k < r->nextras; k++)
			arange |= r->extras[k].arange && strstr(r->extras[k].name,
								".embeddings.position_ids");
		cr_assert(arange, "%s: no position_ids", encoder_archs[i]);
		cr_assert_null(r->pp_layers, "%s: a pipeline", encoder_archs[i]);
		wshard_rules_free(r);
	}
	/* ModernBERT's layers in encoder_layer.layers., q/k/v unpacked */
	for (i = 0; i < NMODERNBERT; i++) {
		struct wshard_rules *r = NULL;
		bool unpack = false;

		wshard_error_clear(&err);
		cr_assert_eq(wshard_rules_builtin(&r, modernbert_archs[i], &err), WSHARD_OK,
			     "%s: %s", modernbert_archs[i], err.msg);
		for (k = 0; k < r->nrules; k++)
			unpack |= r->rules[k].kind == RULE_UNPACK && r->rules[k].output &&
				  strstr(r->rules[k].output, "encoder_layer.layers.{n}.attn.Wqkv.");
		cr_assert(unpack, "%s: no Wqkv rule", modernbert_archs[i]);
		cr_assert_null(r->pp_layers, "%s: a pipeline", modernbert_archs[i]);
		wshard_rules_free(r);
	}
}

/*
 * Gemma 3 with its vision tower: the text model's rules under
 * language_model.model., the SigLIP tower's q/k/v (weights and biases)
 * fused by rows into qkv_proj, its layers conditioned on
 * vision_config.num_hidden_layers, its pooling head left out with a reason.
 */
Test(builtin, gemma3_multimodal)
{
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	struct rules_capture cap;
	const struct rules_rule *q;
	const char *vt = "vision_tower.vision_model.";
	char name[256];

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_builtin(&r, mm_archs[0], &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(find_rule(r, "language_model.model.embed_tokens.weight", &cap)->kind,
		     RULE_VOCAB);
	cr_assert_str_eq(r->tie_output, "language_model.lm_head.weight");
	snprintf(name, sizeof(name), "%sencoder.layers.1.self_attn.k_proj.bias", vt);
	q = find_rule(r, name, &cap);
	cr_assert_not_null(q);
	cr_assert_eq(q->kind, RULE_FUSE);
	cr_assert_eq(r->ops[q->op].kind, OP_ROWS);
	cr_assert_str_eq(q->cond, "n < vision_config.num_hidden_layers");
	snprintf(name, sizeof(name), "%sencoder.layers.0.mlp.fc2.bias", vt);
	cr_assert_eq(find_rule(r, name, &cap)->kind, RULE_REPLICATE);
	snprintf(name, sizeof(name), "%shead.probe", vt);
	q = find_rule(r, name, &cap);
	cr_assert_eq(q->kind, RULE_SKIP);
	cr_assert_not_null(q->reason);
	cr_assert_eq(find_rule(r, "multi_modal_projector.mm_input_projection_weight",
			       &cap)->kind, RULE_REPLICATE);
	wshard_rules_free(r);
}
