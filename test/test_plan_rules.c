/*
 * test_plan_rules.c - the rules format's extensions in the planner: a
 * fused operator whose parts are replicated whole, a rule's own output
 * dtype, rules that apply under a condition, and left-out layers (listed
 * on the plan, never written).
 *
 * Checkpoints come from scripts/gen-checkpoint (a Llama with extra
 * tensors); the rules are parsed from text.
 */
#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "base/fpconv.h"
#include "plan_fixture.h"
#include "rules_test_util.h"
#include "plan_rules_fixture.h"

TestSuite(ext, .fini = close_open_fx);

/* "split": "replicate": both parts whole on every rank, a's rows then b's. */
Test(ext, fused_replicate)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, BASE " --extra-tensor x.a.weight:4,8 --extra-tensor x.b.weight:3,8");
	use_rules(&f, "{\"fused\": {\"ab\": {\"parts\": [\"a\", \"b\"], \"split\": \"replicate\"}},"
		  "\"tensors\": ["
		  "{\"match\": \"x.a.weight\", \"fuse\": \"ab.a\", \"output\": \"x.ab.weight\"},"
		  "{\"match\": \"x.b.weight\", \"fuse\": \"ab.b\", \"output\": \"x.ab.weight\"},"
		  CATCH_ALL "]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "x.ab.weight");

		assert_shape(t, 2, 7, 8);
		assert_copy(&f, t, 0, "x.a.weight", 0, 4, 0, 16, 0);
		assert_copy(&f, t, 1, "x.b.weight", 0, 3, 0, 16, 4 * 16);
	}
	fx_close(&f);
}

/* "dtype": "F32" converts a BF16 source, as --dtype does; others keep BF16. */
Test(ext, rule_dtype)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;
	int r;

	fx_open(&f, BASE " --extra-tensor x.g.weight:4,8");
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"x.g.weight\", \"split\": \"replicate\", \"dtype\": \"F32\"},"
		  CATCH_ALL "]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "x.g.weight");
		cr_assert_eq(t->dtype, WSHARD_F32);
		cr_assert_eq(t->nbytes, 4 * 8 * 4);
		cr_assert_eq(t->pieces[0].from, WSHARD_BF16);
		cr_assert_eq(t->pieces[0].to, WSHARD_F32);
		t = get_out(&f, r, "model.norm.weight");
		cr_assert_eq(t->dtype, WSHARD_BF16);
	}
	fx_close(&f);
}

/*
 * "dtype": "head" (a pooling head, vLLM's head_dtype): F32 where
 * config.json names none, the model's (BF16 here) for "model", the dtype
 * named otherwise; a name vLLM refuses is refused.
 */
static void head_dtype(const char *config, enum wshard_dtype want /* COUNT: refused */)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	char *args = fmt(BASE " --extra-tensor score.weight:4,8%s%s",
			 config ? " --set-config " : "", config ? config : "");

	fx_open(&f, args);
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"score.weight\", \"split\": \"replicate\", \"dtype\": \"head\"},"
		  CATCH_ALL "]}");
	if (want == WSHARD_DTYPE_COUNT) {
		fx_plan_fails(&f, 2, WSHARD_EINVAL, "~config.json's head_dtype is not one vLLM takes (model, float32, float16 or bfloat16)");
	} else {
		fx_plan(&f, 2);
		cr_assert_eq(get_out(&f, 1, "score.weight")->dtype, want, "%s", config);
	}
	fx_close(&f);
	free(args);
}

Test(ext, head_dtype)
{
	head_dtype(NULL, WSHARD_F32);
	head_dtype("head_dtype=\\\"model\\\"", WSHARD_BF16);
	head_dtype("head_dtype=\\\"float16\\\"", WSHARD_F16);
	head_dtype("head_dtype=\\\"int8\\\"", WSHARD_DTYPE_COUNT);
}

/*
 * "neg_exp" (vLLM's Mamba A from A_log): a BF16 [8] row-split in 2, F32
 * [4] a rank, its piece -exp'd from BF16 to F32, whatever --dtype says;
 * refused on a column split and beside "times_sqrt".
 */
Test(ext, neg_exp)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;
	const char *col = "{\"name\": \"t\", \"architectures\": [\"X\"], \"tensors\": ["
			  "{\"match\": \"a\", \"split\": \"col\", \"neg_exp\": true}]}";
	const char *times = "{\"name\": \"t\", \"architectures\": [\"X\"], \"tensors\": ["
			    "{\"match\": \"a\", \"split\": \"row\", \"neg_exp\": true, "
			    "\"times_sqrt\": [\"1\", \"2\"]}]}";
	int r;

	fx_open(&f, BASE " --extra-tensor x.A_log:8");
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"x.A_log\", \"output\": \"x.A\", \"split\": \"row\", "
		  "\"neg_exp\": true}," CATCH_ALL "]}");
	f.opt.has_dtype = true;
	f.opt.dtype = WSHARD_F16;
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "x.A");
		cr_assert_eq(t->dtype, WSHARD_F32);
		assert_shape(t, 1, 4, 0);
		cr_assert_eq(t->nbytes, 16);
		cr_assert_eq(t->npieces, 1);
		cr_assert_eq(t->pieces[0].from, WSHARD_BF16);
		cr_assert_eq(t->pieces[0].to, WSHARD_F32);
		cr_assert_eq(t->pieces[0].neg_exp, 1);
		cr_assert_eq(t->pieces[0].row0, 4 * (uint64_t)r);
		cr_assert_eq(t->pieces[0].len, 16);
		t = get_out(&f, r, "model.norm.weight");
		cr_assert_eq(t->pieces[0].neg_exp, 0);
	}
	fx_close(&f);
	parse_fails(col, "\"neg_exp\" is true or false, on a \"replicate\" or \"row\" split");
	parse_fails(times, "without \"times_sqrt\"");
}

/*
 * "zero_mean" (Param-2's and Sarvam-105B's router bias): a BF16 [8]
 * replicated and written F32 (the rule's "dtype"), its piece marked with
 * the mean of the source's values, rounded to BF16 (PyTorch's summation
 * order is test_fpconv's); refused on a matrix, on a "row" split and
 * beside "neg_exp".
 */
Test(ext, zero_mean)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;
	const struct wshard_src_tensor *s;
	struct wshard_error err;
	const char *row = "{\"name\": \"t\", \"architectures\": [\"X\"], \"tensors\": ["
			  "{\"match\": \"a\", \"split\": \"row\", \"zero_mean\": true}]}";
	const char *both = "{\"name\": \"t\", \"architectures\": [\"X\"], \"tensors\": ["
			   "{\"match\": \"a\", \"split\": \"replicate\", \"zero_mean\": true, "
			   "\"neg_exp\": true}]}";
	uint16_t h[8];
	double sum = 0;
	float want;
	uint32_t u;
	size_t i;
	int r;

	fx_open(&f, BASE " --extra-tensor x.bias:8");
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"x.bias\", \"split\": \"replicate\", \"dtype\": \"F32\", "
		  "\"zero_mean\": true}," CATCH_ALL "]}");
	fx_plan(&f, 2);
	s = wshard_catalog_find(f.cat, "x.bias");
	cr_assert_not_null(s);
	cr_assert_eq(wshard_catalog_read(f.cat, s->file, s->offset, h, sizeof(h), &err), WSHARD_OK);
	for (i = 0; i < 8; i++) {
		u = (uint32_t)h[i] << 16;
		memcpy(&want, &u, 4);
		sum += want;
	}
	want = (float)(sum / 8);
	memcpy(&u, &want, 4);
	u = (uint32_t)wshard_f32_to_bf16(u) << 16;
	memcpy(&want, &u, 4);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "x.bias");
		cr_assert_eq(t->dtype, WSHARD_F32);
		assert_shape(t, 1, 8, 0);
		cr_assert_eq(t->npieces, 1);
		cr_assert_eq(t->pieces[0].from, WSHARD_BF16);
		cr_assert_eq(t->pieces[0].to, WSHARD_F32);
		cr_assert_eq(t->pieces[0].add, WSHARD_ADD_SOURCE);
		cr_assert_float_eq(-t->pieces[0].addend, want, 0, "mean %g, want %g",
				   (double)-t->pieces[0].addend, (double)want);
		t = get_out(&f, r, "model.norm.weight");
		cr_assert_eq(t->pieces[0].add, WSHARD_ADD_NONE);
	}
	fx_close(&f);
	fx_open(&f, BASE " --extra-tensor x.mat:4x2");
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"x.mat\", \"split\": \"replicate\", \"zero_mean\": true},"
		  CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'x.mat': \"zero_mean\" needs a vector of at most 32768 F32, F16 or BF16 elements, not BF16 of 2 dimensions");
	fx_close(&f);
	parse_fails(row, "\"zero_mean\" is true or false, on a \"replicate\" split");
	parse_fails(both, "without \"times_sqrt\" or \"neg_exp\"");
}

/*
 * "plus" (PLaMo 3's norms): a BF16 [8] replicated, its piece adding the
 * F32 offset after the copy into the output's dtype (F16 with --dtype);
 * refused on a "col" split and beside "zero_mean".
 */
Test(ext, plus)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const struct wshard_out_tensor *t;
	const char *col = "{\"name\": \"t\", \"architectures\": [\"X\"], \"tensors\": ["
			  "{\"match\": \"a\", \"split\": \"col\", \"plus\": 1}]}";
	const char *both = "{\"name\": \"t\", \"architectures\": [\"X\"], \"tensors\": ["
			   "{\"match\": \"a\", \"split\": \"replicate\", \"plus\": 1, "
			   "\"zero_mean\": true}]}";
	int r;

	fx_open(&f, BASE " --extra-tensor x.norm:8");
	use_rules(&f, "{\"tensors\": [{\"match\": \"x.norm\", \"split\": \"replicate\", "
		  "\"plus\": 0.2}," CATCH_ALL "]}");
	f.opt.has_dtype = true;
	f.opt.dtype = WSHARD_F16;
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "x.norm");
		cr_assert_eq(t->dtype, WSHARD_F16);
		cr_assert_eq(t->npieces, 1);
		cr_assert_eq(t->pieces[0].from, WSHARD_BF16);
		cr_assert_eq(t->pieces[0].to, WSHARD_F16);
		cr_assert_eq(t->pieces[0].add, WSHARD_ADD_OUTPUT);
		cr_assert_float_eq(t->pieces[0].addend, 0.2f, 0);
	}
	fx_close(&f);
	parse_fails(col, "\"plus\" is a number, on a \"replicate\" or \"row\" split");
	parse_fails(both, "without \"times_sqrt\", \"neg_exp\" or \"zero_mean\"");
}

/*
 * "permute_rows" (K2-Horizon's partial-RoPE fold): BF16 [8, 4] in blocks of
 * 4 rows taken 0, 2, 1, 3 (the ranges [0, 1), [2, 3), [1, 2), [3, 4)),
 * row-split in 2: rank r's block r as four one-row pieces in that order;
 * refused where a rank's cut is no whole block (tp 4), where the ranges
 * take a row twice, and on a "col" split.
 */
Test(ext, permute_rows)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	static const uint64_t order[4] = { 0, 2, 1, 3 };
	const struct wshard_out_tensor *t;
	const char *col = "{\"name\": \"t\", \"architectures\": [\"X\"], \"tensors\": ["
			  "{\"match\": \"a\", \"split\": \"col\", \"permute_rows\": "
			  "{\"block\": \"2\", \"ranges\": [[\"0\", \"2\"]]}}]}";
	int r, k;

#define PERMUTE(ranges) "{\"tensors\": [{\"match\": \"x.q\", \"split\": \"row\", " \
	"\"permute_rows\": {\"block\": \"num_key_value_heads*2\", \"ranges\": " ranges "}}," \
	CATCH_ALL "]}"
	fx_open(&f, BASE " --extra-tensor x.q:8x4");
	use_rules(&f, PERMUTE("[[\"0\", \"1\"], [\"2\", \"3\"], [\"1\", \"2\"], [\"3\", \"4\"]]"));
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "x.q");
		assert_shape(t, 2, 4, 4);
		cr_assert_eq(t->npieces, 4);
		for (k = 0; k < 4; k++) {
			cr_assert_eq(t->pieces[k].row0, 4 * (uint64_t)r + order[k]);
			cr_assert_eq(t->pieces[k].nrows, 1);
			cr_assert_eq(t->pieces[k].dst, 8 * (uint64_t)k);
		}
	}
	fx_plan_fails(&f, 4, WSHARD_EINVAL,
		      "tensor 'x.q': \"permute_rows\" needs each rank's cut in whole blocks of 4 rows");
	fx_close(&f);
	fx_open(&f, BASE " --extra-tensor x.q:8x4");
	use_rules(&f, PERMUTE("[[\"0\", \"2\"], [\"1\", \"3\"]]"));
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'x.q': \"permute_rows\" ranges do not take each of the block's 4 rows once");
	fx_close(&f);
#undef PERMUTE
	parse_fails(col, "on a \"row\", \"replicate\" or \"fuse\" rule");
}

/* "tp_divides": each expression divisible by --tp, else refused; a
 * missing key or a non-string entry is an error. */
Test(ext, tp_divides)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *num = "{\"name\": \"t\", \"tp_divides\": [2], \"tensors\": []}";

	fx_open(&f, BASE);
	use_rules(&f, "{\"tp_divides\": [\"num_key_value_heads\", \"3*hidden_size\"], "
		  "\"tensors\": [" CATCH_ALL "]}");
	fx_plan(&f, 2);
	fx_close(&f);
	fx_open(&f, BASE);
	use_rules(&f, "{\"tp_divides\": [\"num_key_value_heads\"], \"tensors\": [" CATCH_ALL "]}");
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "num_key_value_heads=2 is not divisible by --tp 4");
	fx_close(&f);
	/* a number alone: a size the model class fixes, said so */
	fx_open(&f, BASE);
	use_rules(&f, "{\"tp_divides\": [\"8\"], \"tensors\": [" CATCH_ALL "]}");
	fx_plan(&f, 2);
	fx_plan_fails(&f, 16, WSHARD_EINVAL,
		      "8 (a size vLLM's class fixes; rules 't.json') is not divisible by --tp 16");
	fx_close(&f);
	fx_open(&f, BASE);
	use_rules(&f, "{\"tp_divides\": [\"n_groups\"], \"tensors\": [" CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "config.json has no integer 'n_groups', needed to check 'tp_divides of t.json'");
	fx_close(&f);
	parse_fails(num, "\"tp_divides\" entry 0 is not a non-empty string");
}

/* "requires": a config key that must be there, defaults notwithstanding;
 * an entry that is no key is an error. */
Test(ext, requires)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *expr = "{\"name\": \"t\", \"requires\": [\"2*a\"], \"tensors\": []}";

	fx_open(&f, BASE);
	use_rules(&f, "{\"requires\": [\"hidden_size\"], \"tensors\": [" CATCH_ALL "]}");
	fx_plan(&f, 2);
	fx_close(&f);
	fx_open(&f, BASE);
	use_rules(&f, "{\"requires\": [\"n_groups\"], \"defaults\": {\"n_groups\": 1}, "
		  "\"tensors\": [" CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "config.json: no 'n_groups', which vLLM needs to build LlamaForCausalLM (rules t.json)");
	fx_close(&f);
	parse_fails(expr, "\"requires\" entry \"2*a\" is not a config key");
}

/* "refuse_beside": a file beside the weights refuses the checkpoint with
 * the reason; without it the plan is made; a malformed one is an error. */
Test(ext, refuse_beside)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *noreason = "{\"name\": \"t\", \"refuse_beside\": {\"files\": [\"a\"]}, "
			       "\"tensors\": []}";
	const char *rules = "{\"refuse_beside\": {\"files\": [\"adapters/x/w.safetensors\"], "
			    "\"reason\": \"merged as vLLM loads\"}, \"tensors\": [" CATCH_ALL "]}";
	char *sub, *path;
	FILE *fp;

	fx_open(&f, BASE);
	use_rules(&f, rules);
	fx_plan(&f, 2);
	fx_close(&f);
	fx_open(&f, BASE);
	use_rules(&f, rules);
	sub = fmt("%s/adapters", f.dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	free(sub);
	sub = fmt("%s/adapters/x", f.dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	free(sub);
	path = fmt("%s/adapters/x/w.safetensors", f.dir);
	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	fclose(fp);
	free(path);
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "'adapters/x/w.safetensors' beside the weights: merged as vLLM loads (rules t.json)");
	fx_close(&f);
	parse_fails(noreason, "\"refuse_beside\" is not an object");
}

/* "split": "refuse": a tensor it matches is refused with its reason;
 * the reason is required. */
Test(ext, refuse)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *bare = "{\"name\": \"t\", \"tensors\": [{\"match\": \"a\", \"split\": \"refuse\"}]}";

	fx_open(&f, BASE);
	use_rules(&f, "{\"tensors\": [{\"match\": \"lm_head.weight\", \"split\": \"refuse\", "
		  "\"reason\": \"no head here\"}, " CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "tensor 'lm_head.weight': no head here (rules t.json)");
	fx_close(&f);
	parse_fails(bare, "\"reason\" goes with \"split\": \"skip\" (may) or \"refuse\" (must)");
}

/*
 * A tensor of a layer past num_hidden_layers that no rule covers is an
 * error, unless a skip rule with a reason takes it: then it is listed as left out, by name, and written
 * nowhere.
 */
Test(ext, left_out_layers)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	size_t i;
	int r;

	fx_open(&f, BASE " --extra-tensor model.layers.2.eh_proj.weight:4,8 "
		"--extra-tensor model.layers.2.enorm.weight:8");
	use_rules(&f, "{\"tensors\": [" CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~not covered by rules 't.json': "
		      "'model.layers.2.eh_proj.weight', 'model.layers.2.enorm.weight'");
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"model.layers.{n}.*\", \"if\": \"n >= num_hidden_layers\","
		  " \"split\": \"skip\", \"reason\": \"mtp\"}," CATCH_ALL "]}");
	fx_plan(&f, 2);
	cr_assert_eq(f.plan->nleft_out, 2);
	for (i = 0; i < 2; i++)
		cr_assert_str_eq(f.plan->left_out[i].reason, "mtp");
	cr_assert(!strcmp(f.plan->left_out[0].name, "model.layers.2.eh_proj.weight") ||
		  !strcmp(f.plan->left_out[1].name, "model.layers.2.eh_proj.weight"));
	for (r = 0; r < 2; r++) {
		cr_assert_null(find_out(&f, r, "model.layers.2.eh_proj.weight"));
		cr_assert_null(find_out(&f, r, "model.layers.2.enorm.weight"));
		cr_assert_not_null(find_out(&f, r, "model.layers.1.input_layernorm.weight"));
	}
	fx_close(&f);
}

/*
 * "layer" gives a match without {n} the layer its output and "unless"
 * name; "unless" passes the tensor on to the next rule where the
 * checkpoint holds the one it names (an MTP draft's head: the target's
 * lm_head where the MTP layer has none of its own), and the rule is not
 * required there.
 */
Test(ext, layer_unless)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"lm_head.weight\", \"layer\": \"num_hidden_layers\","
		" \"unless\": \"model.layers.{n}.head.weight\", \"split\": \"row\","
		" \"output\": \"model.layers.{n}.head.weight\"},"
		"{\"match\": \"lm_head.weight\", \"split\": \"skip\"},"
		"{\"match\": \"model.layers.{n}.head.weight\", \"if\": \"n == num_hidden_layers\","
		" \"split\": \"row\", \"optional\": true},"
		CATCH_ALL "]}";
	const char *in[2] = { "", " --extra-tensor model.layers.2.head.weight:256,64" };
	const char *src[2] = { "lm_head.weight", "model.layers.2.head.weight" };
	const struct wshard_out_tensor *t;
	int k, r;

	for (k = 0; k < 2; k++) {
		char args[256];

		snprintf(args, sizeof(args), "%s%s", BASE, in[k]);
		fx_open(&f, args);
		use_rules(&f, rules);
		fx_plan(&f, 2);
		for (r = 0; r < 2; r++) {
			cr_assert_null(find_out(&f, r, "lm_head.weight"));
			t = get_out(&f, r, "model.layers.2.head.weight");
			cr_assert_eq(t->shape[0], 128);
			cr_assert_str_eq(f.cat->tensors[t->pieces[0].src].name, src[k]);
		}
		fx_close(&f);
	}
}

/*
 * A per-layer "unless" (one with {n}, in a rule whose match has it) is
 * checked layer by layer: the rule passes the layer's source on where the
 * layer holds the tensor it names, and is required only in the layers
 * that do not (a second MTP layer without a head of its own).
 */
Test(ext, layer_unless_per_layer)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"model.layers.{n}.a.weight\", \"unless\": \"model.layers.{n}.b.weight\","
		" \"split\": \"row\", \"output\": \"model.layers.{n}.b.weight\"},"
		"{\"match\": \"model.layers.{n}.b.weight\", \"split\": \"row\", \"optional\": true},"
		CATCH_ALL ","
		"{\"match\": \"model.layers.{n}.*\", \"split\": \"skip\", \"reason\": \"passed on\"}]}";
	const struct wshard_out_tensor *t;
	int r;

	/* layer 0 has a alone (written as b), layer 1 both (its own b) */
	fx_open(&f, BASE " --extra-tensor model.layers.0.a.weight:8,64"
		" --extra-tensor model.layers.1.a.weight:8,64 --extra-tensor model.layers.1.b.weight:8,64");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	cr_assert_eq(f.plan->nleft_out, 1);
	cr_assert_str_eq(f.plan->left_out[0].name, "model.layers.1.a.weight");
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "model.layers.0.b.weight");
		cr_assert_str_eq(f.cat->tensors[t->pieces[0].src].name, "model.layers.0.a.weight");
		t = get_out(&f, r, "model.layers.1.b.weight");
		cr_assert_str_eq(f.cat->tensors[t->pieces[0].src].name, "model.layers.1.b.weight");
	}
	fx_close(&f);
	/* both layers have their own b: a is required in neither */
	fx_open(&f, BASE " --extra-tensor model.layers.0.b.weight:8,64"
		" --extra-tensor model.layers.1.b.weight:8,64");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	fx_close(&f);
	/* layer 0 has neither: a is required there */
	fx_open(&f, BASE " --extra-tensor model.layers.1.b.weight:8,64");
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'model.layers.0.a.weight' is missing from");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "~require it where there is no 'model.layers.0.b.weight')");
	fx_close(&f);
}

/* "missing": a required source's absence told in the rule's words */
Test(ext, missing_text)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"head.weight\", \"split\": \"replicate\","
		" \"missing\": \"it ships as head.pt: save it as safetensors\"},"
		"{\"match\": \"model.norm.weight\", \"split\": \"replicate\"},"
		"{\"match\": \"*\", \"split\": \"skip\"}]}";

	fx_open(&f, BASE);
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "~tensor 'head.weight' is missing from '");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~': it ships as head.pt: save it as safetensors");
	fx_close(&f);
}

/*
 * "pass_on": the rule takes the source and passes it on to the next rule
 * that matches it too: the target's head is written as each of two MTP
 * layers' heads where the layer has none of its own.
 */
Test(ext, pass_on)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"lm_head.weight\", \"layer\": \"num_hidden_layers\","
		" \"unless\": \"model.layers.{n}.head.weight\", \"split\": \"row\","
		" \"output\": \"model.layers.{n}.head.weight\", \"pass_on\": true},"
		"{\"match\": \"lm_head.weight\", \"layer\": \"num_hidden_layers + 1\","
		" \"unless\": \"model.layers.{n}.head.weight\", \"split\": \"row\","
		" \"output\": \"model.layers.{n}.head.weight\"},"
		"{\"match\": \"lm_head.weight\", \"split\": \"skip\"},"
		"{\"match\": \"model.layers.{n}.head.weight\","
		" \"if\": \"n >= num_hidden_layers && n < num_hidden_layers + 2\","
		" \"split\": \"row\", \"optional\": true},"
		CATCH_ALL "]}";
	const char *in[3] = { "", " --extra-tensor model.layers.2.head.weight:256,64",
			      " --extra-tensor model.layers.2.head.weight:256,64"
			      " --extra-tensor model.layers.3.head.weight:256,64" };
	const char *src[3][2] = { { "lm_head.weight", "lm_head.weight" },
				  { "model.layers.2.head.weight", "lm_head.weight" },
				  { "model.layers.2.head.weight", "model.layers.3.head.weight" } };
	const struct wshard_out_tensor *t;
	int k, r, l;

	for (k = 0; k < 3; k++) {
		char args[256];

		snprintf(args, sizeof(args), "%s%s", BASE, in[k]);
		fx_open(&f, args);
		use_rules(&f, rules);
		fx_plan(&f, 2);
		for (r = 0; r < 2; r++) {
			cr_assert_null(find_out(&f, r, "lm_head.weight"));
			for (l = 0; l < 2; l++) {
				char name[64];

				snprintf(name, sizeof(name), "model.layers.%d.head.weight", 2 + l);
				t = get_out(&f, r, name);
				cr_assert_eq(t->shape[0], 128);
				cr_assert_str_eq(f.cat->tensors[t->pieces[0].src].name, src[k][l],
						 "case %d, %s", k, name);
			}
		}
		fx_close(&f);
	}
}

/*
 * "if" picks a rule by config.json: "key" holds when the key is a
 * non-zero integer, "!key" when it is absent, null or 0.  A rule whose
 * condition fails is not required.
 */
Test(ext, conditions)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"x.k.weight\", \"if\": \"q_lora_rank\", \"split\": \"row\"},"
		"{\"match\": \"x.k.weight\", \"if\": \"!q_lora_rank\", \"split\": \"replicate\"},"
		"{\"match\": \"x.q.weight\", \"if\": \"q_lora_rank\", \"split\": \"row\"},"
		CATCH_ALL "]}";

	fx_open(&f, BASE " --extra-tensor x.k.weight:4,8 --set-config q_lora_rank=null");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "x.k.weight"), 2, 4, 8);
	fx_close(&f);

	fx_open(&f, BASE " --extra-tensor x.k.weight:4,8 --extra-tensor x.q.weight:4,8 "
		"--set-config q_lora_rank=16");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "x.k.weight"), 2, 2, 8);
	assert_shape(get_out(&f, 1, "x.q.weight"), 2, 2, 8);
	fx_close(&f);

	/* the required x.q.weight is missing when its condition holds */
	fx_open(&f, BASE " --extra-tensor x.k.weight:4,8 --set-config q_lora_rank=16");
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'x.q.weight' is missing");
	fx_close(&f);
}

/* "A in KEY": the condition holds in the layers whose A the config array
 * KEY lists (Kimi Linear's KDA layers, numbered from 1: "n+1 in ..."). */
Test(ext, condition_in)
{
	layer_conditions("n+1 in cfg.kda", "n+1 in cfg.full", "cfg={\"kda\":[1],\"full\":[2]}",
			 NULL);
	layer_conditions("n+1 in cfg.kda", "n+1 in cfg.full", "cfg={\"kda\":[1]}",
			 "config.json has no array 'cfg.full', needed by the condition of "
			 "'model.layers.{n}.x.weight'");
}

/* "KEY[i]": element i of a config array, n the layer (MiMo-V2-Flash's
 * hybrid_layer_pattern[n], a layer's kind); an array one element short
 * lacks layer 1's. */
Test(ext, condition_index)
{
	layer_conditions("kind[n] == 1", "kind[n] == 0", "kind=[1, 0]", NULL);
	layer_conditions("kind[n] == 1", "kind[n] == 0", "kind=[1]", "~kind");
}

/* "KEY[i].a.b": a member of an object element of a config array
 * (Nemotron-NAS's block_configs[n].attention.no_op; booleans read 1 and
 * 0); a member that is absent or null is missing. */
Test(ext, condition_member)
{
	layer_conditions("blk[n].attn.no_op == 0", "blk[n].attn.no_op == 1",
			 "blk=[{\"attn\": {\"no_op\": false}}, {\"attn\": {\"no_op\": true}}]",
			 NULL);
	layer_conditions("blk[n].attn.no_op == 0", "blk[n].attn.no_op == 1",
			 "blk=[{\"attn\": {\"no_op\": false}}, {\"attn\": {\"no_op\": null}}]",
			 "~blk");
}

/* "experts_from": a rule takes the experts numbered from an expression on
 * and stacks them from 0 (ERNIE-4.5-VL's vision experts, E..2E-1 in the
 * checkpoint); the ones below fall to the next rule. */
Test(ext, experts_from)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"x.e.{e}\", \"experts_from\": \"ne\", \"split\": \"row\", \"output\": \"x.vis\"},"
		"{\"match\": \"x.e.{e}\", \"split\": \"row\", \"output\": \"x.txt\"},"
		CATCH_ALL "]}";
	const struct wshard_out_tensor *t;
	int r;

	fx_open(&f, BASE " --extra-tensor x.e.0:4,8 --extra-tensor x.e.1:4,8 "
		"--extra-tensor x.e.2:4,8 --extra-tensor x.e.3:4,8 --set-config 'ne=2'");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "x.txt");
		assert_shape(t, 3, 2, 2);
		assert_copy(&f, t, 1, "x.e.1", 2 * (uint64_t)r, 2, 0, 16, 32);
		t = get_out(&f, r, "x.vis");
		assert_shape(t, 3, 2, 2);
		assert_copy(&f, t, 0, "x.e.2", 2 * (uint64_t)r, 2, 0, 16, 0);
		assert_copy(&f, t, 1, "x.e.3", 2 * (uint64_t)r, 2, 0, 16, 32);
	}
	fx_close(&f);
}

/* "replicate" with "transpose": a matrix written transposed and whole on
 * every rank (ERNIE-4.5-VL's routers, [H, E] held [E, H]). */
Test(ext, replicate_transposed)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"x.r.weight\", \"split\": \"replicate\", \"transpose\": true},"
		CATCH_ALL "]}";
	const struct wshard_out_tensor *t;
	int r;

	fx_open(&f, BASE " --extra-tensor x.r.weight:4,8");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "x.r.weight");
		assert_shape(t, 2, 8, 4);
		cr_assert_eq(t->npieces, 1, "rank %d", r);
		cr_assert_eq(t->pieces[0].col0, 0, "rank %d", r);
		cr_assert_eq(t->pieces[0].tr_rows, 4, "rank %d", r);
		cr_assert_eq(t->pieces[0].len, 4 * 8 * 2, "rank %d", r);
	}
	fx_close(&f);
}

/*
 * A q/k/v operator whose kv_heads read n: evaluated for each layer's
 * tensors (Nemotron-NAS's, num_attention_heads / n_heads_in_group).  The
 * Llama fixture's k and v hold 16 rows: layer 0 as 2 heads (at tp 4 each
 * whole on two ranks), layer 1 as 4 (a head a rank); the shape reads n
 * too, and is checked against each layer's.
 */
Test(ext, qkv_kv_heads_per_layer)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"fused\": {\"qkv2\": {\"parts\": [\"q\", \"k\", \"v\"], "
		"\"split\": \"qkv\", \"kv_heads\": \"blk[n].kv\"}}, \"tensors\": ["
		"{\"match\": \"model.layers.{n}.self_attn.q_proj.weight\", \"fuse\": \"qkv2.q\", \"output\": \"model.layers.{n}.qkv\"},"
		"{\"match\": \"model.layers.{n}.self_attn.k_proj.weight\", \"fuse\": \"qkv2.k\", \"output\": \"model.layers.{n}.qkv\", \"shape\": [\"16 / blk[n].kv * blk[n].kv\", \"hidden_size\"]},"
		"{\"match\": \"model.layers.{n}.self_attn.v_proj.weight\", \"fuse\": \"qkv2.v\", \"output\": \"model.layers.{n}.qkv\"},"
		CATCH_NO_QKV "]}";
	const struct wshard_out_tensor *t;
	int r;

	fx_open(&f, BASE " --set-config 'blk=[{\"kv\": 2}, {\"kv\": 4}]'");
	use_rules(&f, rules);
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		t = get_out(&f, r, "model.layers.0.qkv");
		cr_assert_eq(t->shape[0], 16 + 8 + 8, "rank %d", r);
		cr_assert_eq(t->pieces[1].row0, (uint64_t)(r / 2) * 8, "rank %d", r);
		t = get_out(&f, r, "model.layers.1.qkv");
		cr_assert_eq(t->shape[0], 16 + 4 + 4, "rank %d", r);
		cr_assert_eq(t->pieces[1].row0, (uint64_t)r * 4, "rank %d", r);
	}
	fx_close(&f);

	/* layer 1's shape from its own 3 heads: 15 rows, not the 16 there */
	fx_open(&f, BASE " --set-config 'blk=[{\"kv\": 2}, {\"kv\": 3}]'");
	use_rules(&f, rules);
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "~'model.layers.1.self_attn.k_proj.weight' has shape "
		      "[16, 64] but config.json gives [16 / blk[n].kv * blk[n].kv, hidden_size] = "
		      "[15, 64]");
	fx_close(&f);
}

/*
 * A q/k/v operator of its own ("split": "qkv") with "kv_heads": the
 * Llama fixture's 2 kv heads at tp 4 are each whole on two ranks under
 * the built-in qkv (k rows [16r/2 ...]: 16 of 32), cut in four (8 rows a
 * rank) where the operator says 4; an expression naming no key is an
 * error.
 */
Test(ext, qkv_kv_heads)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *fmt_rules = "{\"fused\": {\"qkv2\": {\"parts\": [\"q\", \"k\", \"v\"], "
		"\"split\": \"qkv\", \"kv_heads\": \"%s\"}}, \"tensors\": ["
		"{\"match\": \"model.layers.{n}.self_attn.q_proj.weight\", \"fuse\": \"qkv2.q\", \"output\": \"model.layers.{n}.qkv\"},"
		"{\"match\": \"model.layers.{n}.self_attn.k_proj.weight\", \"fuse\": \"qkv2.k\", \"output\": \"model.layers.{n}.qkv\"},"
		"{\"match\": \"model.layers.{n}.self_attn.v_proj.weight\", \"fuse\": \"qkv2.v\", \"output\": \"model.layers.{n}.qkv\"},"
		CATCH_NO_QKV "]}";
	char *rules;
	const struct wshard_out_tensor *t;
	int r;

	/* head_dim 8: q 64 rows, k and v 16 (2 heads) */
	rules = fmt(fmt_rules, "num_key_value_heads");
	fx_open(&f, BASE);
	use_rules(&f, rules);
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		t = get_out(&f, r, "model.layers.0.qkv");
		cr_assert_eq(t->shape[0], 16 + 8 + 8, "rank %d", r);
		cr_assert_eq(t->pieces[1].row0, (uint64_t)(r / 2) * 8, "rank %d", r);
	}
	fx_close(&f);
	free(rules);

	rules = fmt(fmt_rules, "swa_kv");
	fx_open(&f, BASE " --set-config swa_kv=4");
	use_rules(&f, rules);
	fx_plan(&f, 4);
	for (r = 0; r < 4; r++) {
		t = get_out(&f, r, "model.layers.0.qkv");
		cr_assert_eq(t->shape[0], 16 + 4 + 4, "rank %d", r);
		cr_assert_eq(t->pieces[1].row0, (uint64_t)r * 4, "rank %d", r);
	}
	fx_close(&f);

	fx_open(&f, BASE " --set-config swa_kv=3");
	use_rules(&f, rules);
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "--tp 4 is not a multiple of swa_kv=3");
	fx_close(&f);
	free(rules);
}

/* A key longer than the 127 characters a config name may have is no key:
 * not the config's key it starts with. */
Test(ext, condition_long_key)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	static char rules[2048], cfg[512];
	char key[129];

	memset(key, 'a', 128);
	key[128] = '\0';
	snprintf(rules, sizeof(rules), "{\"tensors\": [{\"match\": \"model.layers.{n}.x.weight\","
		 " \"if\": \"%s == 1\", \"split\": \"row\"}," CATCH_ALL "]}", key);
	key[127] = '\0';
	snprintf(cfg, sizeof(cfg), BASE " --extra-tensor model.layers.0.x.weight:4,8"
		 " --set-config %s=1", key);
	fx_open(&f, cfg);
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~config.json has no integer 'aaaa");
	fx_close(&f);
}

/*
 * A declared operator's "sizes" cut one source holding several parts:
 * "unpack" (Qwen3-Next's conv1d: q, k, v) and "fuse": "OP.a+b+c" beside
 * a source of one part (Qwen3.5's in_proj_qkv and in_proj_z).  Parts q, k
 * of 2 rows (num_key_value_heads), v and z of 8 (hidden_size/8); tp 2:
 * each rank holds half of every part, in part order.  Rows are 16 bytes.
 */
#define QKVZ "\"fused\": {\"f\": {\"parts\": [\"q\", \"k\", \"v\", \"z\"]," \
	" \"sizes\": [\"num_key_value_heads\", \"num_key_value_heads\", \"hidden_size/8\", 8]}},"

Test(ext, unpack_sizes)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, BASE " --extra-tensor x.c.weight:12,8");
	use_rules(&f, "{\"fused\": {\"c\": {\"parts\": [\"q\", \"k\", \"v\"],"
		  " \"sizes\": [\"num_key_value_heads\", 2, \"hidden_size/8\"]}},"
		  "\"tensors\": [{\"match\": \"x.c.weight\", \"unpack\": \"c\"}," CATCH_ALL "]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "x.c.weight");

		assert_shape(t, 2, 6, 8);
		cr_assert_eq(t->npieces, 3);
		assert_copy(&f, t, 0, "x.c.weight", r, 1, 0, 16, 0);
		assert_copy(&f, t, 1, "x.c.weight", 2 + r, 1, 0, 16, 16);
		assert_copy(&f, t, 2, "x.c.weight", 4 + 4 * r, 4, 0, 16, 32);
	}
	fx_close(&f);

	/* sizes that do not add up to the source's rows */
	fx_open(&f, BASE " --extra-tensor x.c.weight:13,8");
	use_rules(&f, "{\"fused\": {\"c\": {\"parts\": [\"q\", \"k\", \"v\"],"
		  " \"sizes\": [2, 2, 8]}},"
		  "\"tensors\": [{\"match\": \"x.c.weight\", \"unpack\": \"c\"}," CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "tensor 'x.c.weight' has 13 rows but the "
		      "sizes of its parts of 'c' add up to 12");
	fx_close(&f);
}

/*
 * "groups": a part holding one group is whole on every rank (vLLM's
 * Mamba-2 B and C with n_groups 1), one whose groups tp divides is cut by
 * rows, and any other count is refused.
 */
Test(ext, part_groups)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *notpart = "{\"fused\": {\"c\": {\"parts\": [\"q\"], \"groups\": {\"k\": 1}}},"
			      " \"tensors\": []}";
	int r;

	fx_open(&f, BASE " --extra-tensor x.c.weight:12,8");
	use_rules(&f, "{\"fused\": {\"c\": {\"parts\": [\"q\", \"k\", \"v\"],"
		  " \"sizes\": [4, 4, 4], \"groups\": {\"k\": 1, \"v\": \"num_key_value_heads\"}}},"
		  "\"tensors\": [{\"match\": \"x.c.weight\", \"unpack\": \"c\"}," CATCH_ALL "]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "x.c.weight");

		assert_shape(t, 2, 8, 8);
		cr_assert_eq(t->npieces, 3);
		assert_copy(&f, t, 0, "x.c.weight", 2 * r, 2, 0, 16, 0);
		assert_copy(&f, t, 1, "x.c.weight", 4, 4, 0, 16, 32);
		assert_copy(&f, t, 2, "x.c.weight", 8 + 2 * r, 2, 0, 16, 96);
	}
	fx_close(&f);

	/* two groups (num_key_value_heads) on four ranks */
	fx_open(&f, BASE " --extra-tensor x.c.weight:12,8");
	use_rules(&f, "{\"fused\": {\"c\": {\"parts\": [\"q\", \"k\", \"v\"],"
		  " \"sizes\": [4, 4, 4], \"groups\": {\"v\": \"num_key_value_heads\"}}},"
		  "\"tensors\": [{\"match\": \"x.c.weight\", \"unpack\": \"c\"}," CATCH_ALL "]}");
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "tensor 'x.c.weight': part 'v' of 'c' holds "
		      "num_key_value_heads=2 groups, neither 1 nor divisible by --tp 4");
	fx_close(&f);
	parse_fails(notpart, "\"groups\" entry 'k' is not a part");
}

Test(ext, fuse_several_parts)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, BASE " --extra-tensor x.qkv.weight:12,8 --extra-tensor x.z.weight:8,8");
	use_rules(&f, "{" QKVZ "\"tensors\": ["
		  "{\"match\": \"x.qkv.weight\", \"fuse\": \"f.q+k+v\", \"output\": \"x.w\"},"
		  "{\"match\": \"x.z.weight\", \"fuse\": \"f.z\", \"output\": \"x.w\"},"
		  CATCH_ALL "]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "x.w");

		assert_shape(t, 2, 10, 8);
		cr_assert_eq(t->npieces, 4);
		assert_copy(&f, t, 0, "x.qkv.weight", r, 1, 0, 16, 0);
		assert_copy(&f, t, 1, "x.qkv.weight", 2 + r, 1, 0, 16, 16);
		assert_copy(&f, t, 2, "x.qkv.weight", 4 + 4 * r, 4, 0, 16, 32);
		assert_copy(&f, t, 3, "x.z.weight", 4 * r, 4, 0, 16, 6 * 16);
	}
	fx_close(&f);

	/* the part the fused source lacks is named */
	fx_open(&f, BASE " --extra-tensor x.qkv.weight:12,8");
	use_rules(&f, "{" QKVZ "\"tensors\": ["
		  "{\"match\": \"x.qkv.weight\", \"fuse\": \"f.q+k+v\", \"output\": \"x.w\"},"
		  "{\"match\": \"x.z.weight\", \"fuse\": \"f.z\", \"output\": \"x.w\", \"optional\": true},"
		  CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'x.z.weight' is missing");
	fx_close(&f);
}

/* "fuse": "OP.b+a": a source stacking its parts in another order than
 * the operator's (GTE's up_gate_proj, up then gate, into gate then up). */
Test(ext, fuse_parts_reordered)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, BASE " --extra-tensor x.ug.weight:8,8");
	use_rules(&f, "{\"fused\": {\"gu\": {\"parts\": [\"gate\", \"up\"], \"split\": \"row\","
		  " \"sizes\": [4, 4]}}, \"tensors\": ["
		  "{\"match\": \"x.ug.weight\", \"fuse\": \"gu.up+gate\", \"output\": \"x.w\"},"
		  CATCH_ALL "]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		const struct wshard_out_tensor *t = get_out(&f, r, "x.w");

		assert_shape(t, 2, 4, 8);
		cr_assert_eq(t->npieces, 2);
		assert_copy(&f, t, 0, "x.ug.weight", 4 + 2 * r, 2, 0, 16, 0);
		assert_copy(&f, t, 1, "x.ug.weight", 2 * r, 2, 0, 16, 2 * 16);
	}
	fx_close(&f);
}

/* An extra with "with" is added only in the layers whose source holds it. */
Test(ext, extra_with)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, BASE " --extra-tensor model.layers.1.x.weight:4,8");
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"model.layers.{n}.x.weight\", \"split\": \"row\", \"optional\": true},"
		  CATCH_ALL "], \"extra\": [{\"name\": \"model.layers.{n}.s\", \"value\": 1.0,"
		  " \"with\": \"model.layers.{n}.x.weight\"}]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		cr_assert_null(find_out(&f, r, "model.layers.0.s"));
		cr_assert_not_null(find_out(&f, r, "model.layers.1.s"));
	}
	fx_close(&f);
}

/* "with" names its tensor as the rules read it: through "source_renames"
 * (a checkpoint's y.* read as model.*). */
Test(ext, extra_with_renamed)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE " --extra-tensor y.layers.1.x.weight:4,8");
	use_rules(&f, "{\"source_renames\": [{\"from\": \"y.\", \"to\": \"model.\"}],"
		  " \"tensors\": ["
		  "{\"match\": \"model.layers.{n}.x.weight\", \"split\": \"row\", \"optional\": true},"
		  CATCH_ALL "], \"extra\": [{\"name\": \"model.layers.{n}.s\", \"value\": 1.0,"
		  " \"with\": \"model.layers.{n}.x.weight\"}]}");
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, "model.layers.0.s"));
	cr_assert_not_null(find_out(&f, 0, "model.layers.1.s"));
	fx_close(&f);
}

/* A "source_renames" entry's {n} and {e} carry a layer's and an expert's
 * number into its "to" (Mistral's layers.{n}.experts.{e}.w1. read as
 * model.layers.{n}.mlp.experts.{e}.gate_proj.); a name they do not fit
 * (no digits where {n} is) is read as it is. */
Test(ext, source_renames_numbers)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, BASE " --extra-tensor layers.1.experts.12.w1.weight:4,8"
		" --extra-tensor layers.x.experts.1.w1.weight:4,8");
	use_rules(&f, "{\"source_renames\": [{\"from\": \"layers.{n}.experts.{e}.w1.\","
		  " \"to\": \"model.layers.{n}.mlp.experts.{e}.gate_proj.\"}],"
		  " \"tensors\": ["
		  "{\"match\": \"model.layers.{n}.mlp.experts.{e}.gate_proj.weight\","
		  " \"output\": \"model.layers.{n}.e.{e}.g\", \"split\": \"row\", \"optional\": true},"
		  "{\"match\": \"layers.x.experts.1.w1.weight\", \"output\": \"kept\","
		  " \"split\": \"replicate\", \"optional\": true},"
		  CATCH_ALL "]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		assert_shape(get_out(&f, r, "model.layers.1.e.12.g"), 2, 2, 8);
		cr_assert_not_null(find_out(&f, r, "kept"));
	}
	fx_close(&f);
}

/* A "to"'s {2n} and {2n+1} put twice the layer's number there, or one
 * more (Cosmos 3 Edge's block N: vLLM's layers 2N and 2N+1). */
Test(ext, source_renames_doubled)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, BASE " --extra-tensor blocks.3.a.weight:4,8"
		" --extra-tensor blocks.3.b.weight:4,8");
	use_rules(&f, "{\"source_renames\": ["
		  "{\"from\": \"blocks.{n}.a.\", \"to\": \"model.layers.{2n}.a.\"},"
		  "{\"from\": \"blocks.{n}.b.\", \"to\": \"model.layers.{2n+1}.b.\"}],"
		  " \"tensors\": ["
		  "{\"match\": \"model.layers.{n}.a.weight\", \"split\": \"row\", \"if\": \"n < 16\","
		  " \"optional\": true},"
		  "{\"match\": \"model.layers.{n}.b.weight\", \"split\": \"col\", \"if\": \"n < 16\","
		  " \"optional\": true},"
		  CATCH_ALL "]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		assert_shape(get_out(&f, r, "model.layers.6.a.weight"), 2, 2, 8);
		assert_shape(get_out(&f, r, "model.layers.7.b.weight"), 2, 4, 4);
	}
	fx_close(&f);
}

/* A tensor the rules require that the checkpoint lacks is named as the
 * checkpoint's own naming names it: block 1's b (vLLM's layer 3), the
 * rename whose "to" takes layer 3 ({2n+1}), not the rules' x.layers.3.;
 * without "source_prefix" where no tensor has it. */
Test(ext, source_renames_missing)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE " --extra-tensor blocks.0.a.weight:4,8 --extra-tensor blocks.0.b.weight:4,8"
		" --extra-tensor blocks.1.a.weight:4,8");
	use_rules(&f, "{\"source_renames\": ["
		  "{\"from\": \"blocks.{n}.a.\", \"to\": \"x.layers.{2n}.\"},"
		  "{\"from\": \"blocks.{n}.b.\", \"to\": \"x.layers.{2n+1}.\"}],"
		  " \"tensors\": ["
		  "{\"match\": \"x.layers.{n}.weight\", \"split\": \"row\", \"if\": \"n < 4\"},"
		  CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'blocks.1.b.weight' is missing from");
	fx_close(&f);
	fx_open(&f, BASE);
	use_rules(&f, "{\"source_prefix\": \"p.\", \"tensors\": ["
		  "{\"match\": \"p.q.weight\", \"split\": \"replicate\"},"
		  "{\"match\": \"p.model.norm.weight\", \"split\": \"replicate\"},"
		  "{\"match\": \"p.*\", \"split\": \"skip\"}]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'q.weight' is missing from");
	fx_close(&f);
}

/* "num_layers" is the layer count rules require layers in: twice the
 * base's two layers asks for layers 2 and 3, which it lacks. */
Test(ext, num_layers)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE);
	use_rules(&f, "{\"num_layers\": \"2*num_hidden_layers\", \"tensors\": [" CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~model.layers.2.input_layernorm.weight");
	fx_close(&f);
}

/* A "to" with a {n} its "from" lacks is refused. */
Test(ext, source_renames_unbound)
{
	static const char text[] = "{\"source_renames\": [{\"from\": \"y.\","
				   " \"to\": \"model.layers.{n}.\"}], \"tensors\": [" CATCH_ALL "]}";

	parse_fails(text, "lacks");
}

/* An extra with {i} is added once for each {i} its "with" matches in the
 * layer, under that index (Zamba2's attention layers of a shared block). */
Test(ext, extra_with_index)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	int r;

	fx_open(&f, BASE " --extra-tensor model.layers.0.a.0.w:4,8"
		" --extra-tensor model.layers.0.a.2.w:4,8 --extra-tensor model.layers.1.a.1.w:4,8");
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"model.layers.{n}.a.{i}.w\", \"output\": \"model.layers.{n}.a.{i}.A\","
		  " \"split\": \"row\", \"optional\": true},"
		  CATCH_ALL "], \"extra\": [{\"name\": \"model.layers.{n}.d.{i}.s\", \"value\": 1.0,"
		  " \"with\": \"model.layers.{n}.a.{i}.w\"}]}");
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		assert_shape(get_out(&f, r, "model.layers.0.a.2.A"), 2, 2, 8);
		cr_assert_not_null(find_out(&f, r, "model.layers.0.d.0.s"));
		cr_assert_not_null(find_out(&f, r, "model.layers.0.d.2.s"));
		cr_assert_not_null(find_out(&f, r, "model.layers.1.d.1.s"));
		cr_assert_null(find_out(&f, r, "model.layers.0.d.1.s"));
		cr_assert_null(find_out(&f, r, "model.layers.1.d.0.s"));
	}
	fx_close(&f);
}

/*
 * An extra with "each" is added once for each {i} below its count for
 * which its condition (of i, n and config keys, % included) holds, in the
 * layers "with" allows (HRM-Text's attention layer per recurrence step);
 * a default may name the key that stands in (a count config.json lacks).
 */
Test(ext, extra_each)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"defaults\": {\"steps\": \"num_hidden_layers\"}, \"tensors\": ["
		"{\"match\": \"model.layers.{n}.x.weight\", \"split\": \"row\", \"optional\": true},"
		CATCH_ALL "], \"extra\": [{\"name\": \"model.layers.{n}.a.{i}.s\", \"value\": 1.0,"
		" \"with\": \"model.layers.{n}.x.weight\","
		" \"each\": {\"count\": \"steps*3\", \"if\": \"i % 3 != n + 1\"}},"
		" {\"name\": \"h.{i}\", \"value\": 2.0, \"each\": {\"count\": 2}}]}";
	char name[64];
	int r, n, i;

	fx_open(&f, BASE " --extra-tensor model.layers.0.x.weight:4,8"
		" --extra-tensor model.layers.1.x.weight:4,8");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		for (n = 0; n < 2; n++)
			for (i = 0; i < 7; i++) {
				snprintf(name, sizeof(name), "model.layers.%d.a.%d.s", n, i);
				if (i < 6 && i % 3 != n + 1)
					cr_assert_not_null(find_out(&f, r, name), "%s", name);
				else
					cr_assert_null(find_out(&f, r, name), "%s", name);
			}
		cr_assert_not_null(find_out(&f, r, "h.1"));
		cr_assert_null(find_out(&f, r, "h.2"));
	}
	fx_close(&f);

	/* only layer 1 has the source "with" names */
	fx_open(&f, BASE " --extra-tensor model.layers.1.x.weight:4,8 --set-config 'steps=1'");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, "model.layers.0.a.0.s"));
	cr_assert_not_null(find_out(&f, 0, "model.layers.1.a.0.s"));
	cr_assert_null(find_out(&f, 0, "model.layers.1.a.2.s"));
	cr_assert_null(find_out(&f, 0, "model.layers.1.a.3.s"));
	fx_close(&f);
}

/* Each rank's x.w13 of 4 experts fused from views of x.w and x.v, 6 rows
 * of 8 BF16 each: expert 2, its w1 rows, then its v1 rows, of rank r's
 * half. */
static void assert_w13(struct fx *f)
{
	const struct wshard_out_tensor *t;
	int r;

	for (r = 0; r < 2; r++) {
		t = get_out(f, r, "x.w13");
		assert_shape(t, 3, 4, 6);
		cr_assert_eq(t->shape[2], 8);
		cr_assert_eq(t->npieces, 8);
		assert_copy(f, t, 4, "x.w.2", 3 * (uint64_t)r, 3, 0, 16, 4 * 48);
		assert_copy(f, t, 5, "x.v.2", 3 * (uint64_t)r, 3, 0, 16, 5 * 48);
	}
}

/*
 * "experts_in_rows": a source holding its experts one after another by
 * rows (DBRX's [E*I, H]) is read as E views NAME.E, which the rules match
 * with {e} (here fused, each expert's rows cut); the source itself needs
 * no rule, and one stacked [E, A, B] gives views [A, B].  Rows that are
 * no whole number of experts are refused; a plan of other rules on the
 * same catalog sees the source again, not the views.
 */
Test(ext, experts_in_rows)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"experts_in_rows\": [{\"match\": \"x.w\", \"experts\": \"n_e\"},"
		" {\"match\": \"x.v\", \"experts\": 4}], \"tensors\": ["
		"{\"match\": \"x.w.{e}\", \"fuse\": \"w13.w1\", \"output\": \"x.w13\"},"
		"{\"match\": \"x.v.{e}\", \"fuse\": \"w13.w3\", \"output\": \"x.w13\"},"
		CATCH_ALL "]}";

	fx_open(&f, BASE " --extra-tensor x.w:24,8 --extra-tensor x.v:24,8 --set-config 'n_e=4'");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_w13(&f);
	cr_assert_null(find_out(&f, 0, "x.w"));
	use_rules(&f, "{\"tensors\": [" CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~not covered by rules");
	fx_close(&f);

	fx_open(&f, BASE " --extra-tensor x.w:25,8 --extra-tensor x.v:24,8 --set-config 'n_e=4'");
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'x.w': 25 rows cannot hold 4 experts (experts_in_rows: n_e)");
	fx_close(&f);

	/* stacked [E, I, H] (Step-3.5's moe.gate_proj): views [I, H], the
	 * same fuse, the same pieces */
	fx_open(&f, BASE " --extra-tensor x.w:4,6,8 --extra-tensor x.v:4,6,8 --set-config 'n_e=4'");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_w13(&f);
	fx_close(&f);
}

/*
 * "experts_in_rows" with "rows": each view holds that many rows from the
 * tensor's start, the rows after them (a release's zero padding, Kimi K3's
 * A_log) not read; more rows than the tensor has are refused.
 */
Test(ext, experts_in_rows_rows)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"experts_in_rows\": [{\"match\": \"x.a\", \"experts\": 1,"
		" \"rows\": \"n_r\"}], \"tensors\": ["
		"{\"match\": \"x.a.0\", \"split\": \"row\", \"output\": \"x.a\", \"shape\": [\"n_r\", 4]},"
		CATCH_ALL "]}";
	const struct wshard_out_tensor *t;
	int r;

	fx_open(&f, BASE " --extra-tensor x.a:8,4 --set-config 'n_r=6'");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	for (r = 0; r < 2; r++) {
		t = get_out(&f, r, "x.a");
		cr_assert_eq(t->ndim, 2);
		cr_assert_eq(t->shape[0], 3);
		cr_assert_eq(t->shape[1], 4);
		cr_assert_eq(t->npieces, 1);
		assert_copy(&f, t, 0, "x.a.0", 3 * (uint64_t)r, 3, 0, 8, 0);
	}
	fx_close(&f);

	fx_open(&f, BASE " --extra-tensor x.a:8,4 --set-config 'n_r=9'");
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'x.a': 8 rows cannot hold 1 experts of 9 rows (experts_in_rows: 1, rows n_r)");
	fx_close(&f);
}

/*
 * "A && B" reads B only where A holds: a tower's rules guarded by its
 * config ("audio_config.num_hidden_layers && n < ...") are not required,
 * and not an error, in a model without it (audio_config null, as Gemma 4
 * 31B ships it); with it they are.
 */
Test(ext, and_guards_absent_key)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"a.layers.{n}.w\", \"split\": \"replicate\","
		" \"if\": \"audio_config.num_hidden_layers && n < audio_config.num_hidden_layers\"},"
		"{\"match\": \"a.proj\", \"split\": \"replicate\", \"if\": \"audio_config.num_hidden_layers\"},"
		CATCH_ALL "]}";

	fx_open(&f, BASE " --set-config 'audio_config=null'");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	cr_assert_null(find_out(&f, 0, "a.proj"));
	fx_close(&f);

	fx_open(&f, BASE " --set-config 'audio_config={\"num_hidden_layers\":1}'");
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~tensor 'a.layers.0.w' is missing");
	fx_close(&f);
}

/*
 * "A || B" holds where either does, B unread where A holds (an absent
 * key is no error there); || binds tighter than &&: "x && y || z" is x
 * and (y or z).
 */
Test(ext, or_conditions)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"a.proj\", \"split\": \"row\", \"if\": \"dim || projection_dim\"},"
		"{\"match\": \"b.proj\", \"split\": \"row\", \"if\": \"x && y || z\"},"
		"{\"match\": \"c.proj\", \"split\": \"row\", \"if\": \"z || 1 < n_bad\"},"
		CATCH_ALL "]}";

	fx_open(&f, BASE " --extra-tensor a.proj:4,4 --extra-tensor b.proj:4,4 "
		"--extra-tensor c.proj:4,4 --set-config 'projection_dim=4' --set-config 'x=1' "
		"--set-config 'z=1'");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "a.proj"), 2, 2, 4);
	assert_shape(get_out(&f, 1, "b.proj"), 2, 2, 4);
	assert_shape(get_out(&f, 1, "c.proj"), 2, 2, 4);
	fx_close(&f);

	/* neither holds: the rules after them take a.proj and b.proj whole
	 * (x 0: "x && y || z" fails though z holds); z 0: n_bad is read */
	fx_open(&f, BASE " --extra-tensor a.proj:4,4 --extra-tensor b.proj:4,4 "
		"--set-config 'x=0' --set-config 'z=1'");
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"a.proj\", \"split\": \"row\", \"if\": \"dim || projection_dim\"},"
		  "{\"match\": \"b.proj\", \"split\": \"row\", \"if\": \"x && y || z\"},"
		  REP("a.proj") REP("b.proj") CATCH_ALL "]}");
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "a.proj"), 2, 4, 4);
	assert_shape(get_out(&f, 1, "b.proj"), 2, 4, 4);
	fx_close(&f);
	fx_open(&f, BASE " --extra-tensor c.proj:4,4 --set-config 'z=0'");
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~config.json has no integer 'n_bad'");
	fx_close(&f);
}

/*
 * A dotted key names a nested integer of config.json (a multimodal
 * model's vision_config), in shapes and conditions alike; a missing one
 * is named whole.
 */
Test(ext, nested_keys)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	const char *rules = "{\"tensors\": ["
		"{\"match\": \"v.w\", \"if\": \"vision_config.hidden_size > 4\", \"split\": \"row\","
		" \"shape\": [\"vision_config.hidden_size\", \"vision_config.layers.n\"]},"
		CATCH_ALL "]}";

	fx_open(&f, BASE " --extra-tensor v.w:8,4 "
		"--set-config 'vision_config={\"hidden_size\":8,\"layers\":{\"n\":4}}'");
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "v.w"), 2, 4, 4);
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"v.w\", \"split\": \"row\", \"shape\": [\"vision_config.depth\", 4]},"
		  CATCH_ALL "]}");
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "~config.json has no integer 'vision_config.depth', needed to check 'v.w'");
	fx_close(&f);
}

/*
 * A multimodal config.json (Gemma 3's) nests the text model's config
 * under text_config and has no hidden_size of its own: the heads, sizes,
 * layers and tie_word_embeddings come from there, and bare keys in the
 * rules' shapes find them.
 */
Test(ext, text_config)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE " --head-dim 8 --tie --omit-config hidden_size "
		"--omit-config num_attention_heads --omit-config num_key_value_heads "
		"--omit-config head_dim --omit-config intermediate_size --omit-config vocab_size "
		"--omit-config num_hidden_layers --omit-config tie_word_embeddings "
		"--set-config 'text_config={\"hidden_size\":64,\"num_attention_heads\":8,"
		"\"num_key_value_heads\":2,\"head_dim\":8,\"intermediate_size\":128,"
		"\"vocab_size\":256,\"num_hidden_layers\":2,\"tie_word_embeddings\":true}'");
	fx_plan(&f, 2);
	/* q 8 heads of 8 rows, k and v 2: 32 + 8 + 8 rows a rank */
	assert_shape(get_out(&f, 1, "model.layers.1.self_attn.qkv_proj.weight"), 2, 48, 64);
	assert_shape(get_out(&f, 1, "lm_head.weight"), 2, 128, 64);
	cr_assert_null(find_out(&f, 1, "model.embed_tokens.weight"));
	fx_close(&f);
}

/*
 * A dotted key is looked for in text_config first, then from the top, as
 * a bare one: MiniMax-M3's sparse_attention_config is text_config's in
 * its release, the top's in a config.json of the text model alone.
 */
Test(ext, text_config_dotted)
{
	static struct fx f;	/* static: outlives an aborted test for fini */

	fx_open(&f, BASE " --extra-tensor v.w:8,4 --extra-tensor t.w:4,4"
		" --omit-config hidden_size --omit-config num_attention_heads"
		" --omit-config num_key_value_heads --omit-config num_hidden_layers"
		" --set-config 'text_config={\"hidden_size\":64,\"num_attention_heads\":8,"
		"\"num_key_value_heads\":2,\"num_hidden_layers\":2,\"sparse\":{\"freq\":[0,8]}}'"
		" --set-config 'vision_config={\"depth\":4}'");
	use_rules(&f, "{\"tensors\": ["
		  "{\"match\": \"v.w\", \"if\": \"sparse.freq[1] == 8\", \"split\": \"row\","
		  " \"shape\": [\"sparse.freq[1]\", \"vision_config.depth\"]},"
		  "{\"match\": \"t.w\", \"split\": \"row\", \"shape\": [\"text_config.sparse.freq[1] / 2\", 4]},"
		  CATCH_ALL "]}");
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "v.w"), 2, 4, 4);
	assert_shape(get_out(&f, 1, "t.w"), 2, 2, 4);
	fx_close(&f);
}

/*
 * "defaults" stand in for the config keys config.json omits (a model
 * class's own defaults, as transformers fills them in): the heads that
 * fuse q/k/v, and keys of shapes, dotted ones included.  A key that
 * config.json gives wins; a default that is no integer is refused.
 */
Test(ext, defaults)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	struct wshard_error err;
	struct wshard_rules *bad = NULL;
	const char *qkv =
		"{\"match\": \"model.layers.{n}.self_attn.q_proj.weight\", \"fuse\": \"qkv.q\","
		" \"output\": \"model.layers.{n}.self_attn.qkv_proj.weight\"},"
		"{\"match\": \"model.layers.{n}.self_attn.k_proj.weight\", \"fuse\": \"qkv.k\","
		" \"output\": \"model.layers.{n}.self_attn.qkv_proj.weight\"},"
		"{\"match\": \"model.layers.{n}.self_attn.v_proj.weight\", \"fuse\": \"qkv.v\","
		" \"output\": \"model.layers.{n}.self_attn.qkv_proj.weight\"},"
		"{\"match\": \"v.w\", \"split\": \"row\", \"shape\": [\"x_rows\", \"vision_config.depth\"]},";
	char rules[4096];

	fx_open(&f, BASE " --extra-tensor v.w:8,4 --omit-config num_attention_heads "
		"--omit-config num_key_value_heads");
	snprintf(rules, sizeof(rules), "{\"defaults\": {\"num_attention_heads\": 8,"
		 " \"num_key_value_heads\": 2, \"x_rows\": 8, \"vision_config.depth\": 4,"
		 " \"hidden_size\": 4096}, \"tensors\": [%s" CATCH_NO_QKV "]}", qkv);
	use_rules(&f, rules);
	fx_plan(&f, 2);
	/* 8 heads of 64/8 rows (hidden_size is config.json's), 2 kv heads */
	assert_shape(get_out(&f, 1, "model.layers.0.self_attn.qkv_proj.weight"), 2, 48, 64);
	assert_shape(get_out(&f, 1, "v.w"), 2, 4, 4);
	/* a default may name the key that stands in, dotted or not (DBRX's
	 * n_heads and attn_config.kv_n_heads) */
	fx_close(&f);
	fx_open(&f, BASE " --extra-tensor v.w:8,4 --omit-config num_attention_heads "
		"--omit-config num_key_value_heads --set-config 'n_h=8' "
		"--set-config 'attn={\"kv\":2}' --set-config 'layers_n=2'");
	snprintf(rules, sizeof(rules), "{\"defaults\": {\"num_attention_heads\": \"n_h\","
		 " \"num_key_value_heads\": \"attn.kv\", \"x_rows\": \"n_h\", \"vision_config.depth\": 4,"
		 " \"num_hidden_layers\": \"layers_n\"}, \"tensors\": [%s" CATCH_NO_QKV "]}", qkv);
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "model.layers.0.self_attn.qkv_proj.weight"), 2, 48, 64);
	fx_close(&f);
	/* and where config.json lacks the key named too, that key's own
	 * default (Moondream 3's num_attention_heads: config.text.n_heads) */
	fx_open(&f, BASE " --extra-tensor v.w:8,4 --omit-config num_attention_heads "
		"--omit-config num_key_value_heads --set-config 'attn={\"kv\":2}'");
	snprintf(rules, sizeof(rules), "{\"defaults\": {\"num_attention_heads\": \"attn.n_h\","
		 " \"attn.n_h\": 8, \"num_key_value_heads\": \"attn.kv\", \"attn.kv\": 4,"
		 " \"x_rows\": \"attn.n_h\", \"vision_config.depth\": 4},"
		 " \"tensors\": [%s" CATCH_NO_QKV "]}", qkv);
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "model.layers.0.self_attn.qkv_proj.weight"), 2, 48, 64);
	assert_shape(get_out(&f, 1, "v.w"), 2, 4, 4);
	fx_close(&f);
	/* or an element of an array key (ERNIE-4.5-VL's moe_num_experts[0]) */
	fx_open(&f, BASE " --extra-tensor v.w:8,4 --omit-config num_attention_heads "
		"--omit-config num_key_value_heads --set-config 'n_h=[8, 2]'");
	snprintf(rules, sizeof(rules), "{\"defaults\": {\"num_attention_heads\": \"n_h[0]\","
		 " \"num_key_value_heads\": \"n_h[1]\", \"x_rows\": \"n_h[0]\", \"vision_config.depth\": 4},"
		 " \"tensors\": [%s" CATCH_NO_QKV "]}", qkv);
	use_rules(&f, rules);
	fx_plan(&f, 2);
	assert_shape(get_out(&f, 1, "model.layers.0.self_attn.qkv_proj.weight"), 2, 48, 64);
	snprintf(rules, sizeof(rules), "{\"tensors\": [%s" CATCH_NO_QKV "]}", qkv);
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL, "~config.json has no integer 'x_rows'");
	/* "shape": [] is a scalar's: a matrix is refused, the message whole */
	snprintf(rules, sizeof(rules), "{\"tensors\": [%.*s{\"match\": \"v.w\","
		 " \"split\": \"row\", \"shape\": []}," CATCH_NO_QKV "]}",
		 (int)(strstr(qkv, "{\"match\": \"v.w\"") - qkv), qkv);
	use_rules(&f, rules);
	fx_plan_fails(&f, 2, WSHARD_EINVAL,
		      "tensor 'v.w' has shape [8, 4] but config.json gives [] = []");
	fx_close(&f);

	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_parse(&bad, "{\"defaults\": {\"a\": 1.5}, \"tensors\": "
					"[{\"match\": \"x\", \"split\": \"skip\"}]}", 70, "d.json", &err),
		     WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "defaults \"a\" is neither an integer nor a config key"),
			   "%s", err.msg);
	wshard_rules_free(bad);
}

/* Writes dir/name, a safetensors file of one BF16 tensor [rows, 8]. */
static void write_st(const char *dir, const char *name, const char *tensor, int rows)
{
	char *path = fmt("%s/%s", dir, name);
	char head[256];
	unsigned long long n;
	FILE *fp = fopen(path, "wb");
	int i;

	cr_assert_not_null(fp, "%s", path);
	n = (unsigned long long)snprintf(head, sizeof(head),
					 "{\"%s\":{\"dtype\":\"BF16\",\"shape\":[%d,8],\"data_offsets\":[0,%d]}}",
					 tensor, rows, rows * 16);
	while (n % 8)
		head[n++] = ' ';
	fwrite(&n, 8, 1, fp);	/* little-endian hosts only, as the suite */
	fwrite(head, 1, n, fp);
	for (i = 0; i < rows * 16; i++)
		fputc(i & 0x7f, fp);
	fclose(fp);
	free(path);
}

/* "weight_folders": a folder's weights join the catalog, its other files
 * are copied, its config.json is read under the key the rules give (here
 * by "tp_divides" and a shape); a missing folder and a tensor also at
 * the top level are refused, a malformed entry is an error. */
Test(ext, weight_folders)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	struct wshard_error err;
	const char *rules = "{\"weight_folders\": [{\"folder\": \"enc\", \"config\": \"ec\"}],"
			    "\"tp_divides\": [\"ec.heads\"], \"tensors\": ["
			    "{\"match\": \"e.w\", \"split\": \"row\", \"shape\": [\"ec.rows\", 8]},"
			    CATCH_ALL "]}";
	const char *bad_rules = "{\"name\": \"t\", \"weight_folders\": [{\"folder\": \"a/b\"}], "
				"\"tensors\": []}";
	char *sub;
	FILE *fp;
	size_t i;
	bool copied = false;

	fx_open(&f, BASE);
	use_rules(&f, rules);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_add_folders(f.rules, f.cat, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "has no 'enc/*.safetensors'"), "%s", err.msg);
	fx_close(&f);
	fx_open(&f, BASE);
	use_rules(&f, rules);
	sub = fmt("%s/enc", f.dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	write_st(sub, "model.safetensors", "e.w", 4);
	free(sub);
	sub = fmt("%s/enc/config.json", f.dir);
	fp = fopen(sub, "w");
	free(sub);
	cr_assert_not_null(fp);
	fputs("{\"heads\": 2, \"rows\": 4}", fp);
	fclose(fp);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_add_folders(f.rules, f.cat, &err), WSHARD_OK, "%s", err.msg);
	for (i = 0; i < f.cat->nextra; i++)
		copied |= !strcmp(f.cat->extra[i], "enc/config.json");
	cr_assert(copied);
	fx_plan(&f, 2);
	cr_assert_eq(get_out(&f, 1, "e.w")->nbytes, 2 * 16);
	fx_plan_fails(&f, 4, WSHARD_EINVAL, "ec.heads=2 is not divisible by --tp 4");
	fx_close(&f);
	fx_open(&f, BASE);
	use_rules(&f, rules);
	sub = fmt("%s/enc", f.dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	write_st(sub, "model.safetensors", "model.norm.weight", 4);
	free(sub);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_add_folders(f.rules, f.cat, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "tensor 'model.norm.weight' is in both"), "%s", err.msg);
	fx_close(&f);
	parse_fails(bad_rules, "\"weight_folders\"[0] is not");
}

/* "copy_folders": every file of a folder copied, weights included, none
 * read as the model's; an absent folder copies nothing; a name with a
 * '/' is refused. */
Test(ext, copy_folders)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	struct wshard_error err;
	const char *rules = "{\"copy_folders\": [\"lora\", \"absent\"], \"tensors\": ["
			    CATCH_ALL "]}";
	const char *bad_rules = "{\"name\": \"t\", \"copy_folders\": [\"a/b\"], \"tensors\": []}";
	size_t i, ntensors;
	int copied = 0;
	char *sub;

	fx_open(&f, BASE);
	use_rules(&f, rules);
	ntensors = f.cat->ntensors;
	sub = fmt("%s/lora", f.dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	write_st(sub, "adapter_model.safetensors", "e.w", 4);
	free(sub);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_add_folders(f.rules, f.cat, &err), WSHARD_OK, "%s", err.msg);
	for (i = 0; i < f.cat->nextra; i++)
		copied += !strcmp(f.cat->extra[i], "lora/adapter_model.safetensors");
	cr_assert_eq(copied, 1);
	cr_assert_eq(f.cat->ntensors, ntensors);
	fx_close(&f);
	parse_fails(bad_rules, "\"copy_folders\"[0] is not the name of a folder");
}

/* "weight_files": a top-level file's tensors join the catalog under the
 * prefix and are cut by the rules under that name, no longer an ignored
 * file; a missing file, one the weights hold already, one beside weights
 * no model.safetensors.index.json lists (vLLM reads it as the model's
 * too) and a malformed entry are refused. */
Test(ext, weight_files)
{
	static struct fx f;	/* static: outlives an aborted test for fini */
	struct wshard_error err;
	const char *rules = "{\"weight_files\": [{\"file\": \"head.safetensors\","
			    " \"prefix\": \"pooler.head.\"}], \"tensors\": ["
			    "{\"match\": \"pooler.head.e.w\", \"split\": \"row\", \"shape\": [4, 8]},"
			    CATCH_ALL "]}";
	const char *bad_rules = "{\"name\": \"t\", \"weight_files\": [{\"file\": \"a/b.safetensors\","
				" \"prefix\": \"p.\"}], \"tensors\": []}";
	char *own;
	size_t i;

	fx_open(&f, BASE " --shards 2");
	use_rules(&f, rules);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_add_folders(f.rules, f.cat, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "has no 'head.safetensors'"), "%s", err.msg);
	fx_close(&f);
	fx_open(&f, BASE);
	use_rules(&f, rules);
	write_st(f.dir, "head.safetensors", "e.w", 4);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_add_folders(f.rules, f.cat, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "has no model.safetensors.index.json, without which vLLM reads 'head.safetensors'"),
			   "%s", err.msg);
	fx_close(&f);
	fx_open(&f, BASE " --shards 2");
	use_rules(&f, rules);
	own = fmt("{\"weight_files\": [{\"file\": \"%s\", \"prefix\": \"p.\"}], \"tensors\": ["
		  CATCH_ALL "]}", f.cat->files[0].name);
	write_st(f.dir, "head.safetensors", "e.w", 4);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_add_folders(f.rules, f.cat, &err), WSHARD_OK, "%s", err.msg);
	for (i = 0; i < f.cat->nignored; i++)
		cr_assert_str_neq(f.cat->ignored[i], "head.safetensors");
	fx_plan(&f, 2);
	cr_assert_eq(get_out(&f, 1, "pooler.head.e.w")->nbytes, 2 * 16);
	fx_close(&f);
	fx_open(&f, BASE " --shards 2");
	use_rules(&f, own);
	free(own);
	wshard_error_clear(&err);
	cr_assert_eq(wshard_rules_add_folders(f.rules, f.cat, &err), WSHARD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "is read as the model's weights"), "%s", err.msg);
	fx_close(&f);
	parse_fails(bad_rules, "\"weight_files\"[0] is not");
}
