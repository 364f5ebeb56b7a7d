/*
 * test_manifest_entry.c - a tensor's manifest entry printed as text
 * (manifest_entry_print) is the text jansson prints for the tree form
 * (manifest_sources_json) that entries with other strings take, for every
 * tensor of every rank; and a run {"e": [e0, e1], "sources": [...]} stands
 * for exactly the pieces it replaces, in their order: a stacked expert
 * tensor's sources are one run with "{e}" where the expert's number was
 * (expert numbers of one and two digits in one run), and fewer than three
 * experts are listed one by one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "plan_fixture.h"
#include "output/manifest_entry.h"

static void fini(void)
{
	close_open_fx();
}

TestSuite(manifest_entry, .fini = fini);

#define QWEN3_MOE(E) "--arch qwen3_moe --layers 1 --hidden 64 --heads 8 --kv-heads 2 " \
	"--vocab 128 --head-dim 16 --intermediate 128 --moe-intermediate 32 --experts " #E
#define EXP "model.layers.0.mlp.experts."
#define CHECKSUM "0123456789abcdef"

static json_t *range(uint64_t a, uint64_t b)
{
	return json_pack("[II]", (json_int_t)a, (json_int_t)b);
}

/* The entry as manifest.c packs it when the text form declines. */
static char *tree_text(const struct fx *f, const struct wshard_rank_plan *rp,
		       const struct wshard_out_tensor *t)
{
	json_t *shape = json_array(), *o;
	char *s;
	int i;

	for (i = 0; i < t->ndim; i++)
		json_array_append_new(shape, json_integer((json_int_t)t->shape[i]));
	o = json_pack("{s:s,s:s,s:o,s:s,s:o,s:s,s:o}", "name", t->name,
		      "dtype", wshard_dtype_name(t->dtype), "shape", shape,
		      "file", rp->files[t->part].name, "data_offsets", range(t->begin, t->end),
		      "checksum", CHECKSUM, "sources", manifest_sources_json(f->plan, t));
	cr_assert_not_null(o);
	s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(o);
	cr_assert_not_null(s);
	return s;
}

/* name with "{e}" replaced by e (malloc'd). */
static char *subst(const char *name, json_int_t e)
{
	const char *at = strstr(name, "{e}");

	cr_assert_not_null(at, "'%s' has no {e}", name);
	return fmt("%.*s%lld%s", (int)(at - name), name, (long long)e, at + 3);
}

/* One source object against piece k: its tensor's name (COPY) or kind. */
static void want_piece(const struct fx *f, const struct wshard_out_tensor *t, size_t k,
		       const char *name)
{
	const struct wshard_piece *p = &t->pieces[k];

	cr_assert_lt(k, t->npieces, "%s: more sources than its %zu pieces", t->name, t->npieces);
	if (p->kind == WSHARD_PIECE_COPY)
		cr_assert_str_eq(name ? name : "(none)", f->cat->tensors[p->src].name,
				 "%s: source %zu", t->name, k);
	else
		cr_assert_null(name, "%s: source %zu is not a copy", t->name, k);
}

/*
 * Checks every entry of every rank; returns how many runs there were and
 * (in *listed) how many sources were listed one by one.
 */
static size_t check_entries(const struct fx *f, size_t *listed)
{
	char *buf = NULL;
	size_t cap = 0, runs = 0;
	int r;

	*listed = 0;
	for (r = 0; r < f->plan->tp; r++) {
		const struct wshard_rank_plan *rp = &f->plan->ranks[r];
		size_t i;

		for (i = 0; i < rp->ntensors; i++) {
			const struct wshard_out_tensor *t = &rp->tensors[i];
			char *tree = tree_text(f, rp, t);
			size_t n, k = 0, j;
			json_t *doc, *srcs, *s;
			json_error_t jerr;
			int fast = manifest_entry_print(f->plan, t, rp->files[t->part].name,
							CHECKSUM, 0, &buf, &n, &cap);

			/* a constant's value (a float) is left to the tree */
			cr_assert_neq(fast, -1);
			if (fast) {
				cr_assert_eq(n, strlen(tree), "%s: text\n%.*s\ntree\n%s", t->name,
					     (int)n, buf, tree);
				cr_assert(!memcmp(buf, tree, n), "%s: text\n%.*s\ntree\n%s",
					  t->name, (int)n, buf, tree);
			}
			doc = fast ? json_loadb(buf, n, 0, &jerr) : json_loads(tree, 0, &jerr);
			free(tree);
			cr_assert_not_null(doc, "%s: %s", t->name, jerr.text);
			srcs = json_object_get(doc, "sources");
			json_array_foreach(srcs, j, s) {
				json_t *e = json_object_get(s, "e"), *m;
				json_int_t v;
				size_t q;

				if (!e) {
					cr_assert(json_object_get(s, "tensor") ||
						  t->pieces[k].kind != WSHARD_PIECE_COPY);
					want_piece(f, t, k++,
						   json_string_value(json_object_get(s, "tensor")));
					++*listed;
					continue;
				}
				runs++;
				cr_assert_geq(json_integer_value(json_array_get(e, 1)) -
					      json_integer_value(json_array_get(e, 0)), 3);
				for (v = json_integer_value(json_array_get(e, 0));
				     v < json_integer_value(json_array_get(e, 1)); v++)
					json_array_foreach(json_object_get(s, "sources"), q, m) {
						char *name = subst(json_string_value(
							json_object_get(m, "tensor")), v);

						want_piece(f, t, k++, name);
						free(name);
					}
			}
			cr_assert_eq(k, t->npieces, "%s: %zu sources for %zu pieces", t->name, k,
				     t->npieces);
			json_decref(doc);
		}
	}
	free(buf);
	return runs;
}

static const char *run_tensor(const json_t *run, size_t j)
{
	return json_string_value(json_object_get(
		json_array_get(json_object_get(run, "sources"), j), "tensor"));
}

/* The sources of rank r's tensor name, parsed from its text. */
static json_t *sources_of(const struct fx *f, int r, const char *name)
{
	const struct wshard_rank_plan *rp = &f->plan->ranks[r];
	const struct wshard_out_tensor *t = get_out(f, r, name);
	char *buf = NULL;
	size_t cap = 0, n;
	json_t *doc, *s;

	cr_assert_eq(manifest_entry_print(f->plan, t, rp->files[t->part].name, CHECKSUM, 0,
					  &buf, &n, &cap), 1);
	doc = json_loadb(buf, n, 0, NULL);
	free(buf);
	cr_assert_not_null(doc);
	s = json_incref(json_object_get(doc, "sources"));
	json_decref(doc);
	return s;
}

/* 12 experts, tp 2: each rank's w13 is one run over experts 0-11 (gate
 * then up, rows of the rank), its w2 one run of one member. */
Test(manifest_entry, stacked_experts_are_one_run)
{
	static struct fx f;
	size_t listed;
	int r;

	fx_open(&f, QWEN3_MOE(12));
	fx_plan(&f, 2);
	cr_assert_eq(check_entries(&f, &listed), 4);
	cr_assert_gt(listed, 0);
	for (r = 0; r < 2; r++) {
		json_t *w13 = sources_of(&f, r, EXP "routed_experts.w13_weight");
		json_t *w2 = sources_of(&f, r, EXP "routed_experts.w2_weight");
		json_t *run = json_array_get(w13, 0), *rows;

		cr_assert_eq(json_array_size(w13), 1);
		cr_assert_eq(json_integer_value(json_array_get(json_object_get(run, "e"), 0)), 0);
		cr_assert_eq(json_integer_value(json_array_get(json_object_get(run, "e"), 1)), 12);
		cr_assert_str_eq(run_tensor(run, 0), EXP "{e}.gate_proj.weight");
		cr_assert_str_eq(run_tensor(run, 1), EXP "{e}.up_proj.weight");
		cr_assert_null(run_tensor(run, 2));
		rows = json_object_get(json_array_get(json_object_get(run, "sources"), 1), "rows");
		cr_assert_eq(json_integer_value(json_array_get(rows, 0)), 16 * r);
		cr_assert_eq(json_integer_value(json_array_get(rows, 1)), 16 * (r + 1));
		cr_assert_eq(json_array_size(w2), 1);
		cr_assert_str_eq(run_tensor(json_array_get(w2, 0), 0), EXP "{e}.down_proj.weight");
		json_decref(w13);
		json_decref(w2);
	}
	fx_close(&f);
}

/* Expert parallel, 5 experts over 2 ranks: rank 0's experts 0-2 are a
 * run, rank 1's two experts are listed one by one. */
Test(manifest_entry, two_experts_are_listed)
{
	static struct fx f;
	size_t listed;
	json_t *s;

	fx_open(&f, QWEN3_MOE(5));
	f.opt.expert_parallel = true;
	fx_plan(&f, 2);
	cr_assert_eq(check_entries(&f, &listed), 2);
	s = sources_of(&f, 1, EXP "routed_experts.w13_weight");
	cr_assert_eq(json_array_size(s), 4);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(s, 2), "tensor")),
			 EXP "4.gate_proj.weight");
	json_decref(s);
	fx_close(&f);
}

/* A dense model has no runs: every source is listed. */
Test(manifest_entry, dense_has_no_runs)
{
	static struct fx f;
	size_t listed;

	fx_open(&f, "--arch llama --layers 2 --hidden 64 --heads 8 --kv-heads 2 --vocab 128 "
		    "--intermediate 128");
	fx_plan(&f, 2);
	cr_assert_eq(check_entries(&f, &listed), 0);
	cr_assert_gt(listed, 0);
	fx_close(&f);
}

#define R(m) "{\"match\": \"" m "\", \"split\": \"replicate\"},"
#define LN "model.layers.{n}."

/*
 * "interleave" on a transposed weight (the OpenAI Privacy Filter's
 * gate_up_proj [E, H, 2I] as [gate | up]): each of a rank's pieces writes
 * its output rows 2 rows apart, and its source says so ("interleaved": 2)
 * in the text form as in the tree form.
 */
Test(manifest_entry, interleaved_rows_are_named)
{
	static struct fx f;
	size_t listed, j;
	json_t *s, *src;
	int r;

	fx_open(&f, "--arch gpt_oss --bf16-experts");
	use_rules(&f, "{\"name\": \"t\", \"architectures\": [\"GptOssForCausalLM\"], \"tensors\": ["
		  "{\"match\": \"" LN "mlp.experts.gate_up_proj\", \"split\": \"col\", \"rows\": 2, "
		  "\"transpose\": true, \"chunks\": 2, \"interleave\": true},"
		  R("lm_head.weight") R("model.embed_tokens.weight") R("model.norm.weight")
		  R(LN "input_layernorm.weight") R(LN "post_attention_layernorm.weight")
		  R(LN "mlp.experts.down_proj") R(LN "mlp.experts.down_proj_bias")
		  R(LN "mlp.experts.gate_up_proj_bias") R(LN "mlp.router.bias")
		  R(LN "mlp.router.weight") R(LN "self_attn.sinks")
		  R(LN "self_attn.q_proj.weight") R(LN "self_attn.k_proj.weight")
		  R(LN "self_attn.v_proj.weight") R(LN "self_attn.o_proj.weight")
		  R(LN "self_attn.q_proj.bias") R(LN "self_attn.k_proj.bias")
		  R(LN "self_attn.v_proj.bias") R(LN "self_attn.o_proj.bias")
		  "{\"match\": \"unused\", \"split\": \"skip\", \"optional\": true}]}");
	fx_plan(&f, 2);
	check_entries(&f, &listed);
	for (r = 0; r < 2; r++) {
		s = sources_of(&f, r, "model.layers.0.mlp.experts.gate_up_proj");
		cr_assert_gt(json_array_size(s), 0);
		json_array_foreach(s, j, src) {
			json_t *one = json_object_get(src, "e") ?
				json_array_get(json_object_get(src, "sources"), 0) : src;

			cr_assert(json_is_true(json_object_get(one, "transposed")));
			cr_assert_eq(json_integer_value(json_object_get(one, "interleaved")), 2);
		}
		json_decref(s);
	}
	fx_close(&f);
}
