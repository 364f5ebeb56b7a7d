/*
 * test_rules_parse.c - the rules parser (rules_parse.c): what it accepts,
 * its errors and their messages, and loading a rules file.
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
/* Parsing                                                             */
/* ------------------------------------------------------------------ */

static void parse_ok(const char *text)
{
	struct wshard_rules *r = (void *)1;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, text, strlen(text), "t.json", &err),
		     WSHARD_OK, "%s: %s", text, err.msg);
	cr_assert_not_null(r);
	cr_assert_str_eq(wshard_rules_name(r), "t.json");
	wshard_rules_free(r);
}

/* base (a printf format with one %s) with part in it fails with want, or
 * (part_ok) parses. */
static void part_fails(const char *base, const char *part, const char *want)
{
	char text[400];

	snprintf(text, sizeof(text), base, part);
	parse_fails(text, want);
}

static void part_ok(const char *base, const char *part)
{
	char text[400];

	snprintf(text, sizeof(text), base, part);
	parse_ok(text);
}

#define RULES(tensors) "{\"architectures\": [\"X\"], \"tensors\": [" tensors "]}"

Test(parse, minimal)
{
	parse_ok(RULES("{\"match\": \"a\", \"split\": \"replicate\"}"));
	parse_ok("{\"tensors\": [{\"match\": \"a\", \"split\": \"skip\"}]}");
	parse_ok(RULES("{\"match\": \"a\", \"split\": \"row\", \"comment\": \"why\","
		       " \"shape\": [\"hidden_size\", 4]}"));
	parse_ok(RULES("{\"match\": \"l.{n}.q\", \"fuse\": \"qkv.q\", \"output\": \"l.{n}.qkv\"},"
		       "{\"match\": \"l.{n}.qkv\", \"unpack\": \"qkv\"},"
		       "{\"match\": \"l.{n}.e.{e}.w1\", \"fuse\": \"w13.w1\", \"output\": \"l.{n}.w13\"}"));
}

Test(parse, every_split)
{
	static const char *const kinds[] = { "row", "col", "vocab", "replicate", "skip" };
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char text[200];

		snprintf(text, sizeof(text), RULES("{\"match\": \"a\", \"split\": \"%s\"}"),
			 kinds[i]);
		parse_ok(text);
	}
}

Test(parse, unknown_split)
{
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"rows\"}"),
		    "rule 'a': unknown split \"rows\"");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"Row\"}"), "unknown split \"Row\"");
}

Test(parse, fuse_unknown_operator)
{
	parse_fails(RULES("{\"match\": \"a\", \"fuse\": \"kv.k\", \"output\": \"o\"}"),
		    "rule 'a': \"fuse\" must be OPERATOR.PART with a declared operator, not \"kv.k\"");
	/* No dot at all. */
	parse_fails(RULES("{\"match\": \"a\", \"fuse\": \"qkv\", \"output\": \"o\"}"),
		    "not \"qkv\"");
}

Test(parse, fuse_unknown_part)
{
	parse_fails(RULES("{\"match\": \"a\", \"fuse\": \"qkv.o\", \"output\": \"o\"}"),
		    "rule 'a': operator 'qkv' has no part 'o'");
	parse_fails(RULES("{\"match\": \"a\", \"fuse\": \"gate_up.w1\", \"output\": \"o\"}"),
		    "operator 'gate_up' has no part 'w1'");
}

Test(parse, fuse_without_output)
{
	parse_fails(RULES("{\"match\": \"a\", \"fuse\": \"qkv.q\"}"),
		    "rule 'a': a fused part needs \"output\"");
}

Test(parse, declared_operator)
{
	parse_ok("{\"fused\": {\"abc\": {\"parts\": [\"a\", \"b\", \"c\"]}},"
		 " \"tensors\": [{\"match\": \"x\", \"fuse\": \"abc.c\", \"output\": \"y\"}]}");
	parse_fails("{\"fused\": {\"qkv\": {\"parts\": [\"q\"]}}, \"tensors\": "
		    "[{\"match\": \"x\", \"split\": \"row\"}]}",
		    "fused operator 'qkv' is declared twice");
	parse_fails("{\"fused\": {\"z\": {\"parts\": []}}, \"tensors\": "
		    "[{\"match\": \"x\", \"split\": \"row\"}]}",
		    "fused operator 'z' needs \"parts\"");
	parse_fails("{\"fused\": {\"z\": {\"parts\": [1]}}, \"tensors\": "
		    "[{\"match\": \"x\", \"split\": \"row\"}]}",
		    "part 0 is not a string");
	parse_fails("{\"fused\": [1], \"tensors\": [{\"match\": \"x\", \"split\": \"row\"}]}",
		    "\"fused\" is not an object");
}

Test(parse, replicated_operator)
{
	parse_ok("{\"fused\": {\"ab\": {\"parts\": [\"a\", \"b\"], \"split\": \"replicate\"}},"
		 " \"tensors\": [{\"match\": \"x\", \"fuse\": \"ab.a\", \"output\": \"y\"}]}");
	parse_ok("{\"fused\": {\"ab\": {\"parts\": [\"a\"], \"split\": \"row\"}},"
		 " \"tensors\": [{\"match\": \"x\", \"fuse\": \"ab.a\", \"output\": \"y\"}]}");
	parse_fails("{\"fused\": {\"ab\": {\"parts\": [\"a\"], \"split\": \"col\"}},"
		    " \"tensors\": [{\"match\": \"x\", \"split\": \"row\"}]}",
		    "fused operator 'ab': \"split\" must be \"row\", \"replicate\" or \"qkv\"");
}

/* "if", "reason" (with a skip only), "dtype" (a float target, or the
 * model's), "missing" (on a required rule) and "dequant". */
Test(parse, condition_reason_dtype)
{
	parse_ok(RULES("{\"match\": \"a.{n}.*\", \"if\": \"n >= num_hidden_layers\","
		       " \"split\": \"skip\", \"reason\": \"mtp\"}"));
	parse_ok(RULES("{\"match\": \"a\", \"split\": \"replicate\", \"dtype\": \"F32\","
		       " \"if\": \"!q_lora_rank\"}"));
	parse_fails(RULES("{\"match\": \"a.*\", \"split\": \"row\"}"),
		    "rule 'a.*': a \"*\" match needs \"split\": \"skip\" or \"refuse\"");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"reason\": \"x\"}"),
		    "rule 'a': \"reason\" goes with \"split\": \"skip\" (may) or \"refuse\" (must)");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"dtype\": \"F8_E4M3\"}"),
		    "rule 'a': \"dtype\" must be F32, F16, BF16, model, head, I32 or U8");
	parse_ok(RULES("{\"match\": \"a\", \"split\": \"replicate\", \"dtype\": \"model\"}"));
	/* "missing": what a required source's absence is told with */
	parse_ok(RULES("{\"match\": \"a\", \"split\": \"replicate\", \"missing\": \"see x\"}"));
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"replicate\", \"optional\": true,"
			  " \"missing\": \"see x\"}"),
		    "rule 'a': \"missing\" goes with a rule whose source is required");
	/* "dequant": on a weight, none of the other value rewrites */
	parse_ok(RULES("{\"match\": \"x.{n}.wk.weight\", \"split\": \"row\", \"dequant\": true}"));
	parse_fails(RULES("{\"match\": \"x.wk.bias\", \"split\": \"row\", \"dequant\": true}"),
		    "rule 'x.wk.bias': \"dequant\" is true or false, on a match ending in \".weight\"");
	parse_fails(RULES("{\"match\": \"x.weight\", \"split\": \"row\", \"dequant\": 1}"),
		    "rule 'x.weight': \"dequant\" is true or false");
	parse_fails(RULES("{\"match\": \"x.weight\", \"split\": \"row\", \"dequant\": true,"
			  " \"plus\": 1}"),
		    "rule 'x.weight': \"dequant\" is true or false");
	parse_ok(RULES("{\"match\": \"a\", \"split\": \"row\", \"dtype\": \"U8\","
		       " \"from\": [\"I8\", \"F8_E8M0\"]}"));
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"from\": []}"),
		    "rule 'a': \"from\" is a non-empty array of dtype names");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"from\": [\"X9\"]}"),
		    "rule 'a': \"from\" is a non-empty array of dtype names");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"from\": \"I8\"}"),
		    "rule 'a': \"from\" is a non-empty array of dtype names");
	parse_ok(RULES("{\"match\": \"a\", \"split\": \"replicate\", \"dtype\": \"I32\"}"));
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"missing\": 1}"),
		    "\"if\", \"reason\", \"dtype\", \"experts_from\", \"layer\", \"unless\" and \"missing\" are strings");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"experts_from\": \"4\"}"),
		    "rule 'a': \"experts_from\" needs {e} in match");
	parse_fails(RULES("{\"match\": \"a.{e}\", \"output\": \"b.{e}\", \"split\": \"row\", "
			  "\"num_experts\": \"4\"}"),
		    "rule 'a.{e}': \"num_experts\" is an expression on a match with {e} whose output "
		    "stacks the experts (has no {e})");
	parse_fails(RULES("{\"match\": \"a.{e}\", \"output\": \"b\", \"split\": \"row\", "
			  "\"num_experts\": [4]}"),
		    "rule 'a.{e}': \"num_experts\" is an expression");
}

Test(parse, two_of_split_fuse_unpack)
{
	const char *want = "rule 'a' needs exactly one of \"split\", \"fuse\" or \"unpack\"";

	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"fuse\": \"qkv.q\", \"output\": \"o\"}"),
		    want);
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"unpack\": \"qkv\"}"), want);
	parse_fails(RULES("{\"match\": \"a\", \"fuse\": \"qkv.q\", \"unpack\": \"qkv\", \"output\": \"o\"}"),
		    want);
	parse_fails(RULES("{\"match\": \"a\"}"), want);
}

/* {i} goes to the output only from the match, in optional rules only, and
 * an extra's name with {i} needs a "with" with it. */
Test(parse, list_index)
{
	parse_ok("{\"tensors\": [{\"match\": \"l.{n}.a.{i}.0.w\", \"output\": \"l.{n}.a.{i}.A.w\","
		 " \"split\": \"row\", \"optional\": true}],"
		 " \"extra\": [{\"name\": \"l.{n}.d.{i}.s\", \"value\": 1, \"with\": \"l.{n}.a.{i}.0.w\"}]}");
	parse_fails(RULES("{\"match\": \"l.{n}.w\", \"output\": \"l.{n}.{i}.w\", \"split\": \"row\"}"),
		    "rule 'l.{n}.w': output uses {i} but match does not");
	parse_fails(RULES("{\"match\": \"l.{n}.a.{i}.w\", \"split\": \"row\"}"),
		    "rule 'l.{n}.a.{i}.w': a match with {i} must be \"optional\"");
	parse_fails("{\"tensors\": [{\"match\": \"x\", \"split\": \"row\"}],"
		    " \"extra\": [{\"name\": \"l.{n}.d.{i}.s\", \"value\": 1, \"with\": \"l.{n}.w\"}]}",
		    "extra 'l.{n}.d.{i}.s': a name with {i} needs \"each\", or a \"with\" with {n} and {i}");
	parse_ok("{\"tensors\": [{\"match\": \"x\", \"split\": \"row\"}],"
		 " \"extra\": [{\"name\": \"l.{n}.d.{i}.s\", \"value\": 1, \"with\": \"l.{n}.w\","
		 " \"each\": {\"count\": \"a*b\", \"if\": \"i % 2\"}}]}");
	parse_fails("{\"tensors\": [{\"match\": \"x\", \"split\": \"row\"}],"
		    " \"extra\": [{\"name\": \"l.{n}.s\", \"value\": 1, \"each\": {\"count\": 2}}]}",
		    "extra 'l.{n}.s': \"each\" is {\"count\": EXPR, \"if\": COND}, for a name with {i}");
	parse_fails("{\"tensors\": [{\"match\": \"x\", \"split\": \"row\"}],"
		    " \"extra\": [{\"name\": \"l.{n}.{i}.s\", \"value\": 1, \"each\": {\"if\": \"i\"}}]}",
		    "\"each\" is {\"count\": EXPR");
}

/* "experts_in_rows": a source name ({n} at most) and its experts. */
Test(parse, experts_in_rows)
{
	parse_ok("{\"experts_in_rows\": [{\"match\": \"l.{n}.w1\", \"experts\": \"a.b\"},"
		 " {\"match\": \"w2\", \"experts\": 8}],"
		 " \"tensors\": [{\"match\": \"l.{n}.w1.{e}\", \"split\": \"row\"}]}");
	parse_fails("{\"experts_in_rows\": [{\"match\": \"l.{n}.w.{e}\", \"experts\": 2}],"
		    " \"tensors\": [{\"match\": \"x\", \"split\": \"row\"}]}",
		    "experts_in_rows[0] needs a \"match\" (a tensor name, {n} at most)");
	parse_fails("{\"experts_in_rows\": [{\"match\": \"w\"}],"
		    " \"tensors\": [{\"match\": \"x\", \"split\": \"row\"}]}",
		    "experts_in_rows 'w' needs \"experts\", an integer or an expression");
	parse_fails("{\"experts_in_rows\": {}, \"tensors\": [{\"match\": \"x\", \"split\": \"row\"}]}",
		    "\"experts_in_rows\" is not an array");
	parse_ok("{\"experts_in_rows\": [{\"match\": \"w\", \"experts\": 1, \"rows\": \"a.b\"}],"
		 " \"tensors\": [{\"match\": \"w.0\", \"split\": \"row\"}]}");
	parse_fails("{\"experts_in_rows\": [{\"match\": \"w\", \"experts\": 1, \"rows\": []}],"
		    " \"tensors\": [{\"match\": \"x\", \"split\": \"row\"}]}",
		    "experts_in_rows 'w': \"rows\" is an integer or an expression");
}

/* A declared operator's "sizes", a fuse of several parts, an extra's "with". */
Test(parse, sizes_and_parts)
{
	parse_ok("{\"fused\": {\"f\": {\"parts\": [\"q\", \"k\", \"z\"], \"sizes\": [2, \"a*b\", 4]}},"
		 " \"tensors\": [{\"match\": \"x\", \"fuse\": \"f.q+k\", \"output\": \"o\"},"
		 " {\"match\": \"y\", \"unpack\": \"f\"}],"
		 " \"extra\": [{\"name\": \"l.{n}.s\", \"value\": 1, \"with\": \"l.{n}.w\"}]}");
	parse_fails("{\"fused\": {\"f\": {\"parts\": [\"q\", \"k\"], \"sizes\": [2]}},"
		    " \"tensors\": [{\"match\": \"x\", \"split\": \"row\"}]}",
		    "fused operator 'f': \"sizes\" needs one expression per part (2)");
	parse_fails("{\"fused\": {\"f\": {\"parts\": [\"q\", \"k\"], \"sizes\": [2, null]}},"
		    " \"tensors\": [{\"match\": \"x\", \"split\": \"row\"}]}",
		    "fused operator 'f': size 1 is neither a number nor a string");
	parse_fails("{\"fused\": {\"f\": {\"parts\": [\"q\", \"k\", \"v\"], \"sizes\": [1, 1, 1]}},"
		    " \"tensors\": [{\"match\": \"x\", \"fuse\": \"f.v+q+v\", \"output\": \"o\"}]}",
		    "rule 'x': \"f.v+q+v\" names part 'v' twice");
	parse_fails("{\"fused\": {\"f\": {\"parts\": [\"q\", \"k\"]}},"
		    " \"tensors\": [{\"match\": \"x\", \"fuse\": \"f.q+k\", \"output\": \"o\"}]}",
		    "rule 'x': operator 'f' needs \"sizes\" for a source holding several parts");
	parse_fails(RULES("{\"match\": \"x\", \"fuse\": \"gate_up.gate+upp\", \"output\": \"o\"}"),
		    "rule 'x': operator 'gate_up' has no part 'upp'");
	parse_fails("{\"tensors\": [{\"match\": \"x\", \"split\": \"row\"}],"
		    " \"extra\": [{\"name\": \"l.{n}.s\", \"value\": 1, \"with\": \"l.w\"}]}",
		    "extra 'l.{n}.s': \"with\" must be a tensor name with {n}, for a name with {n}");
	parse_fails("{\"tensors\": [{\"match\": \"x\", \"split\": \"row\"}],"
		    " \"extra\": [{\"name\": \"l.{n}.{i}.s\", \"value\": 1, \"if\": \"n < 2\"}]}",
		    "extra 'l.{n}.{i}.s': \"if\" must be a condition, for a name without {i}");
	parse_fails("{\"tensors\": [{\"match\": \"x\", \"split\": \"row\"}],"
		    " \"extra\": [{\"name\": \"l.{n}.s\", \"value\": 1, \"if\": 2}]}",
		    "extra 'l.{n}.s': \"if\" must be a condition");
}

Test(parse, unpack_unknown_operator)
{
	parse_fails(RULES("{\"match\": \"a\", \"unpack\": \"qkvo\"}"),
		    "rule 'a': unknown operator \"qkvo\"");
}

Test(parse, output_placeholder_without_match)
{
	parse_fails(RULES("{\"match\": \"l.{n}.w\", \"split\": \"row\", \"output\": \"l.{n}.e.{e}\"}"),
		    "rule 'l.{n}.w': output uses {e} but match does not");
	parse_fails(RULES("{\"match\": \"w\", \"split\": \"row\", \"output\": \"l.{n}.w\"}"),
		    "output uses {n} but match does not");
	parse_ok(RULES("{\"match\": \"w\", \"layer\": \"2\", \"split\": \"row\", \"output\": \"l.{n}.w\"}"));
	parse_fails(RULES("{\"match\": \"l.{n}.w\", \"layer\": \"2\", \"split\": \"row\"}"),
		    "rule 'l.{n}.w': \"layer\" goes with a match without {n}");
	parse_fails(RULES("{\"match\": \"w\", \"unless\": \"l.{n}.w\", \"split\": \"row\"}"),
		    "rule 'w': \"unless\" is a tensor name, with {n} or {e} only where the rule captures them");
	parse_fails(RULES("{\"match\": \"l.{n}.w\", \"unless\": \"l.{n}.e.{e}\", \"split\": \"row\"}"),
		    "\"unless\" is a tensor name");
	/* Dropping a placeholder is allowed ({e} stacks experts). */
	parse_ok(RULES("{\"match\": \"l.{n}.e.{e}.w1\", \"fuse\": \"w13.w1\", \"output\": \"l.{n}.w13\"}"));
}

Test(parse, unknown_key)
{
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"spilt\": \"col\"}"),
		    "rule 'a': unknown key \"spilt\"");
}

Test(parse, pad_to)
{
	parse_ok(RULES("{\"match\": \"a\", \"split\": \"col\", \"pad_to\": 256}"));
	parse_ok(RULES("{\"match\": \"a\", \"fuse\": \"gate_up.gate\", \"output\": \"b\", "
		       "\"pad_to\": \"min_moe_intermediate_per_partition\"}"));
	parse_ok(RULES("{\"match\": \"a\", \"split\": \"row\", \"pad_to\": 256}"));
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"vocab\", \"pad_to\": 256}"),
		    "rule 'a': \"pad_to\" is an expression (rows or columns a rank) on a \"fuse\" part");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"col\", \"pad_to\": true}"),
		    "\"pad_to\" is an expression");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"col\", \"transpose\": true, "
			  "\"pad_to\": 8}"), "\"pad_to\" is an expression");
}

Test(parse, qkv_operator)
{
	parse_ok("{\"fused\": {\"a\": {\"parts\": [\"q\", \"k\", \"v\"], \"split\": \"qkv\", "
		 "\"kv_heads\": \"swa_num_key_value_heads\"}}, \"tensors\": [{\"match\": \"a\", \"split\": \"skip\"}]}");
	parse_fails("{\"fused\": {\"a\": {\"parts\": [\"q\", \"k\"], \"split\": \"qkv\"}}, "
		    "\"tensors\": [{\"match\": \"a\", \"split\": \"skip\"}]}", "\"split\": \"qkv\" takes three parts");
	/* a fourth part, whole on every rank (Qwen4Exp's QSA indexer) */
	parse_ok("{\"fused\": {\"a\": {\"parts\": [\"q\", \"k\", \"v\", \"i\"], \"split\": \"qkv\"}}, "
		 "\"tensors\": [{\"match\": \"a\", \"split\": \"skip\"}]}");
	/* five: the fourth cut as k, the fifth whole (MiniMax-M3's indexer q
	 * and k) */
	parse_ok("{\"fused\": {\"a\": {\"parts\": [\"q\", \"k\", \"v\", \"i\", \"j\"], \"split\": \"qkv\"}}, "
		 "\"tensors\": [{\"match\": \"a\", \"split\": \"skip\"}]}");
	parse_fails("{\"fused\": {\"a\": {\"parts\": [\"q\", \"k\", \"v\", \"i\", \"j\", \"l\"], "
		    "\"split\": \"qkv\"}}, \"tensors\": [{\"match\": \"a\", \"split\": \"skip\"}]}",
		    "a last fourth or fifth is whole on every rank, a fourth of five cut as k");
	parse_fails("{\"fused\": {\"a\": {\"parts\": [\"q\", \"k\", \"v\"], \"kv_heads\": 2}}, "
		    "\"tensors\": [{\"match\": \"a\", \"split\": \"skip\"}]}", "which only it takes");
	parse_fails("{\"fused\": {\"a\": {\"parts\": [\"q\", \"k\", \"v\"], \"split\": \"rows\"}}, "
		    "\"tensors\": [{\"match\": \"a\", \"split\": \"skip\"}]}", "\"row\", \"replicate\" or \"qkv\"");
}

Test(parse, rule_without_match)
{
	parse_fails(RULES("{\"split\": \"row\"}"), "tensors[0] has no \"match\" string");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\"}, 3"),
		    "tensors[1] has no \"match\" string");
	parse_fails(RULES("{\"match\": 5, \"split\": \"row\"}"), "tensors[0] has no \"match\"");
}

Test(parse, bad_shape)
{
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"shape\": \"hidden_size\"}"),
		    "rule 'a': \"shape\" is not an array");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"shape\": [1,2,3,4,5,6,7,8,9]}"),
		    "\"shape\" is not an array of at most 8");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\", \"shape\": [4, true]}"),
		    "shape entry 1 is neither a number nor a string");
}

Test(parse, bad_extra)
{
	const char *base = "{\"tensors\": [{\"match\": \"a\", \"split\": \"row\"}], \"extra\": %s}";

	part_fails(base, "[{\"name\": \"s\", \"value\": 1, \"option\": \"scales\"}]",
		   "extra 's': unknown option \"scales\" (attn_scales)");
	part_fails(base, "[{\"name\": \"s\", \"value\": 1, \"dtype\": \"I32\"}]",
		   "extra 's': dtype must be F32, F16, BF16 or model");
	part_fails(base, "[{\"name\": \"s\", \"value\": 1, \"dtype\": \"F99\"}]",
		   "extra 's': dtype must be F32, F16, BF16 or model");
	part_fails(base, "[{\"name\": \"s\", \"value\": \"1\"}]",
		   "extra 's' needs a numeric \"value\", \"image_norm\", \"arange\" or \"sinusoid\"");
	/* "arange": an expression, alone, I64, once (no {n}) */
	part_fails(base, "[{\"name\": \"p\", \"arange\": [512]}]",
		   "extra 'p': \"arange\" is an expression, with no");
	part_fails(base, "[{\"name\": \"p\", \"arange\": 512, \"value\": 1}]",
		   "extra 'p': \"arange\" is an expression, with no");
	part_fails(base, "[{\"name\": \"l.{n}.p\", \"arange\": \"max_position_embeddings\"}]",
		   "extra 'l.{n}.p': \"arange\" is an expression, with no");
	part_fails(base, "[{\"name\": \"p\", \"arange\": 512, \"dtype\": \"I32\"}]", "and is I64");
	/* "sinusoid": two expressions, alone, F32, once (no {n}) */
	part_fails(base, "[{\"name\": \"p\", \"sinusoid\": [1500]}]",
		   "extra 'p': \"sinusoid\" is [POSITIONS, CHANNELS]");
	part_fails(base, "[{\"name\": \"p\", \"sinusoid\": [1500, \"d_model\"], \"value\": 1}]",
		   "extra 'p': \"sinusoid\" is [POSITIONS, CHANNELS]");
	part_fails(base, "[{\"name\": \"l.{n}.p\", \"sinusoid\": [1500, 64]}]",
		   "extra 'l.{n}.p': \"sinusoid\" is [POSITIONS, CHANNELS]");
	part_fails(base, "[{\"name\": \"p\", \"sinusoid\": [1500, 64], \"dtype\": \"BF16\"}]",
		   "and is F32");
	/* "len": an expression, with a value, no "when" or "option" */
	part_fails(base, "[{\"name\": \"l.{n}.ls1\", \"value\": 1, \"len\": [32]}]",
		   "extra 'l.{n}.ls1': \"len\" is an expression, with a \"value\"");
	part_fails(base, "[{\"name\": \"l.{n}.ls1\", \"value\": 1, \"len\": 32,"
		   " \"option\": \"attn_scales\"}]",
		   "extra 'l.{n}.ls1': \"len\" is an expression, with a \"value\"");
	part_ok(base, "[{\"name\": \"l.{n}.ls1\", \"value\": 1, \"dtype\": \"model\","
		" \"len\": \"hidden_size\"}]");
	part_fails(base, "[{\"value\": 1}]", "extra[0] needs \"name\"");
	part_fails(base, "{\"name\": \"s\"}", "\"extra\" is not an array");
	part_ok(base, "[{\"name\": \"l.{n}.s\", \"value\": 0.5, \"dtype\": \"BF16\","
		" \"option\": \"attn_scales\"}, {\"name\": \"t\", \"value\": 2}]");
}

/* {"attn_scales": MODULE}: the four buffers, then the four quantized
 * scales, each with the entry's "if"; "quantized": false the buffers
 * alone; no key of a plain extra beside it. */
Test(parse, attn_scales)
{
	static const char *const names[] = { "_k_scale", "_v_scale", "_q_scale", "_prob_scale",
					     "k_scale", "v_scale", "q_scale", "prob_scale" };
	const char *text = "{\"tensors\": [{\"match\": \"a\", \"split\": \"row\"}], \"extra\": ["
			   "{\"name\": \"t\", \"value\": 2},"
			   "{\"attn_scales\": \"l.{n}.attn\", \"if\": \"n < 2\"},"
			   "{\"attn_scales\": \"m.{n}.attn\", \"quantized\": false,"
			   " \"with\": \"m.{n}.o.weight\"}]}";
	const char *base = "{\"tensors\": [{\"match\": \"a\", \"split\": \"row\"}], \"extra\": [%s]}";
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	char buf[400];
	size_t i;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, text, strlen(text), "t.json", &err), WSHARD_OK,
		     "%s", err.msg);
	cr_assert_eq(r->nextras, 1 + 8 + 4);
	cr_assert_str_eq(r->extras[0].name, "t");
	for (i = 0; i < 12; i++) {
		const struct rules_extra *e = &r->extras[1 + i];
		bool quantized = i >= 4 && i < 8;

		snprintf(buf, sizeof(buf), "%s.%s", i < 8 ? "l.{n}.attn" : "m.{n}.attn",
			 names[i % 8]);
		cr_assert_str_eq(e->name, buf);
		cr_assert_eq(e->value, quantized ? -1.0 : 1.0, "%s", e->name);
		cr_assert_eq(e->model_dtype, quantized, "%s", e->name);
		cr_assert_eq(e->when_quantized, quantized, "%s", e->name);
		if (quantized)
			cr_assert_null(e->option);
		else
			cr_assert_str_eq(e->option, "attn_scales");
		if (!quantized)
			cr_assert_eq(e->dtype, WSHARD_F32);
		if (i < 8) {
			cr_assert_str_eq(e->cond, "n < 2");
			cr_assert_null(e->with);
		} else {
			cr_assert_null(e->cond);
			cr_assert_str_eq(e->with, "m.{n}.o.weight");
		}
	}
	wshard_rules_free(r);
	part_fails(base, "{\"attn_scales\": \"l.{n}.attn\", \"value\": 2}",
		   "extra \"attn_scales\" is an attention module's name");
	part_fails(base, "{\"attn_scales\": \"l.{n}.attn\", \"name\": \"x\"}",
		   "extra \"attn_scales\" is an attention module's name");
	part_fails(base, "{\"attn_scales\": 3}",
		   "extra \"attn_scales\" is an attention module's name");
	part_fails(base, "{\"attn_scales\": \"a\", \"quantized\": \"no\"}",
		   "extra \"attn_scales\" is an attention module's name");
	/* the expanded entries are checked as any: "with" needs {n} in both */
	part_fails(base, "{\"attn_scales\": \"a\", \"with\": \"b.{n}\"}",
		   "extra 'a._k_scale': \"with\" must be a tensor name with {n}");
}

Test(parse, bad_tie)
{
	const char *base = "{\"tensors\": [{\"match\": \"a\", \"split\": \"row\"}], \"tie\": %s}";

	part_fails(base, "{\"source\": \"e\"}", "\"tie\" needs \"source\" and \"output\"");
	part_fails(base, "{\"source\": \"e\", \"output\": \"h\", \"output_if\": {\"if\": \"k\"}}",
		   "\"output_if\" needs \"if\" and \"output\"");
	part_fails(base, "{\"source\": \"e\", \"output\": \"h\", \"if\": 1}",
		   "\"tie\"'s \"if\" is not a condition");
	part_fails(base, "{\"source\": \"e\", \"output\": \"h\", \"default_holds\": true}",
		   "\"tie\"'s \"default_holds\" needs \"default\": true");
	part_fails(base, "{\"source\": \"e\", \"output\": \"h\", \"drop\": \"h\"}",
		   "tie \"drop\" is not an array");
	part_fails(base, "{\"source\": \"e\", \"output\": \"h\", \"drop\": [\"h\", 1]}",
		   "tie \"drop\" entry 1 is not a string");
	part_ok(base, "{\"source\": \"e\", \"output\": \"h\", \"drop\": [\"h\"], \"default\": true}");
}

Test(parse, document_shape)
{
	parse_fails("[1, 2]", "not a JSON object");
	/* jansson takes only an object or an array at the top. */
	parse_fails("\"rules\"", "invalid JSON");
	parse_fails("{\"tensors\": []}", "\"tensors\" must be a non-empty array");
	parse_fails("{\"tensors\": {}}", "\"tensors\" must be a non-empty array");
	parse_fails("{}", "\"tensors\" must be a non-empty array");
	parse_fails("{\"architectures\": \"X\", \"tensors\": [{\"match\": \"a\", \"split\": \"row\"}]}",
		    "\"architectures\" is not an array");
	parse_fails("{\"architectures\": [1], \"tensors\": [{\"match\": \"a\", \"split\": \"row\"}]}",
		    "architectures[0] is not a string");
}

/* {"use": BLOCK}: the built-in block's rules, prefixed and conditioned
 * as the use says, where the use stands; its operators declared. */
Test(parse, use_block)
{
	const char *text = RULES("{\"match\": \"a\", \"split\": \"row\"},"
				 "{\"use\": \"clip_layer\", \"prefix\": \"v.layers.{n}.\","
				 " \"output_prefix\": \"w.layers.{n}.\", \"if\": \"n < 3\"},"
				 "{\"use\": \"llama_layer\", \"prefix\": \"m.layers.{n}.\"},"
				 "{\"match\": \"z\", \"split\": \"col\"}");
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	size_t i;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, text, strlen(text), "t.json", &err), WSHARD_OK,
		     "%s", err.msg);
	cr_assert_str_eq(r->rules[0].match, "a");
	cr_assert_str_eq(r->rules[1].match, "v.layers.{n}.layer_norm1.weight");
	cr_assert_str_eq(r->rules[1].output, "w.layers.{n}.layer_norm1.weight");
	cr_assert_str_eq(r->rules[1].cond, "n < 3");
	for (i = 1; i < 17; i++)
		cr_assert_eq(strncmp(r->rules[i].match, "v.layers.{n}.", 13), 0, "%s",
			     r->rules[i].match);
	cr_assert_str_eq(r->rules[5].match, "v.layers.{n}.self_attn.q_proj.weight");
	cr_assert_str_eq(r->rules[5].output, "w.layers.{n}.self_attn.qkv_proj.weight");
	cr_assert_eq(r->rules[5].kind, RULE_FUSE);
	cr_assert_str_eq(r->ops[r->rules[5].op].name, "vision_qkv");
	cr_assert_str_eq(r->rules[17].match, "m.layers.{n}.input_layernorm.weight");
	cr_assert_null(r->rules[17].cond);
	cr_assert_str_eq(r->rules[19].output, "m.layers.{n}.self_attn.qkv_proj.weight");
	cr_assert_str_eq(r->rules[27].match, "z");
	wshard_rules_free(r);
	/* an operator of the block's name declared alike is the same one */
	parse_ok("{\"fused\": {\"vision_qkv\": {\"parts\": [\"q\", \"k\", \"v\"]}}, \"tensors\": "
		 "[{\"use\": \"clip_layer\"}]}");
	parse_fails("{\"fused\": {\"vision_qkv\": {\"parts\": [\"q\", \"kv\"]}}, \"tensors\": "
		    "[{\"use\": \"clip_layer\"}]}", "\"fused\" \"vision_qkv\" differs from block \"clip_layer\"'s");
	parse_fails(RULES("{\"use\": \"siglip\"}"), "tensors[0]: no block \"siglip\" (built in: bailing_moe_layers, bailing_moe_v25_mla, bailing_moe_v25_mlp, bailing_moe_v3_layer, bert_encoder, ");
	parse_fails(RULES("{\"use\": 1}"), "tensors[0]: \"use\" is the name of a block");
	parse_fails(RULES("{\"match\": \"a\", \"split\": \"row\"}, {\"use\": \"llama_layer\", \"split\": \"row\"}"),
		    "tensors[1]: a \"use\" takes \"prefix\", \"output_prefix\", \"if\" and \"config\" (strings) and \"comment\", not \"split\"");
	parse_fails(RULES("{\"use\": \"llama_layer\", \"prefix\": 2}"), "not \"prefix\"");
	parse_fails(RULES("{\"use\": \"llama_layer\", \"config\": \"text_config\"}"),
		    "tensors[0]: block \"llama_layer\" names no \"config\" its sizes are read from, for \"config\": \"text_config\"");
	parse_fails("{\"fused\": 3, \"tensors\": [{\"use\": \"clip_layer\"}]}", "\"fused\" is not an object");
	/* what the block's rules say is checked as if written out */
	parse_fails(RULES("{\"use\": \"llama_layer\", \"prefix\": \"l.\", \"output_prefix\": \"l.{n}.\"}"),
		    "rule 'l.input_layernorm.weight': output uses {n} but match does not");
}

/* A use's "config": the block's sizes read from another section of the
 * config (CLIP's text tower: text_config where clip_layer says
 * vision_config), every occurrence in every dimension. */
Test(parse, use_block_config)
{
	const char *text = RULES("{\"use\": \"clip_layer\", \"prefix\": \"t.layers.{n}.\","
				 " \"config\": \"text_config\"},"
				 "{\"use\": \"clip_layer\", \"prefix\": \"v.layers.{n}.\"}");
	struct wshard_rules *r = NULL;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, text, strlen(text), "t.json", &err), WSHARD_OK,
		     "%s", err.msg);
	cr_assert_str_eq(r->rules[0].shape[0], "text_config.hidden_size");
	cr_assert_str_eq(r->rules[12].match, "t.layers.{n}.mlp.fc1.weight");
	cr_assert_str_eq(r->rules[12].shape[0], "text_config.intermediate_size");
	cr_assert_str_eq(r->rules[12].shape[1], "text_config.hidden_size");
	cr_assert_str_eq(r->rules[16].shape[0], "vision_config.hidden_size");
	wshard_rules_free(r);
}

/* "no_expert_parallel": a reason, kept for the plan to refuse with. */
Test(parse, no_expert_parallel)
{
	const char *text = "{\"no_expert_parallel\": \"not written\", \"tensors\": "
			   "[{\"match\": \"a\", \"split\": \"row\"}]}";
	struct wshard_rules *r = NULL;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, text, strlen(text), "t.json", &err), WSHARD_OK,
		     "%s", err.msg);
	cr_assert_str_eq(r->no_ep, "not written");
	wshard_rules_free(r);
	parse_fails("{\"no_expert_parallel\": true, \"tensors\": [{\"match\": \"a\", \"split\": \"row\"}]}",
		    "\"no_expert_parallel\" is not a non-empty string");
	parse_fails("{\"no_expert_parallel\": \"\", \"tensors\": [{\"match\": \"a\", \"split\": \"row\"}]}",
		    "\"no_expert_parallel\" is not a non-empty string");
}

Test(parse, invalid_json)
{
	parse_fails("{\"tensors\": [", "invalid JSON at line 1");
	parse_fails("", "invalid JSON");
	parse_fails("{\"tensors\": [{\"match\": \"a\", \"split\": \"row\", \"split\": \"col\"}]}",
		    "invalid JSON");
}

/* len bounds the text: what follows is not read. */
Test(parse, length_is_respected)
{
	const char *text = RULES("{\"match\": \"a\", \"split\": \"row\"}") "garbage";
	struct wshard_rules *r;
	struct wshard_error err;

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&r, text, strlen(text) - 7, "t.json", &err),
		     WSHARD_OK, "%s", err.msg);
	wshard_rules_free(r);
}

Test(parse, load_missing_file)
{
	struct wshard_rules *r = (void *)1;
	struct wshard_error err;
	enum wshard_err rc;

	wshard_error_clear(&err);
	rc = wshard_rules_load(&r, "/nonexistent/rules.json", &err);
	cr_assert_neq(rc, WSHARD_OK);
	cr_assert_null(r);
	cr_assert_not_null(strstr(err.msg, "/nonexistent/rules.json"), "%s", err.msg);
}

Test(parse, load_file)
{
	char path[] = "/tmp/wshard-rules.XXXXXX";
	const char *text = RULES("{\"match\": \"a\", \"split\": \"col\"}");
	struct wshard_rules *r = NULL;
	struct wshard_error err;
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_load(&r, path, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_str_eq(wshard_rules_name(r), path);
	wshard_rules_free(r);
	unlink(path);
}

Test(parse, free_null)
{
	wshard_rules_free(NULL);
}

