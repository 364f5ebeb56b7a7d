/*
 * fuzz_catalog.c - libFuzzer harness for checkpoint discovery:
 * wshard_catalog_open on a directory built from the input.
 *
 * Framing (so that one input is one checkpoint):
 *
 *   byte 0     flags
 *                bit 0  write part 0 as model.safetensors.index.json
 *                bit 1  write part 1 as config.json
 *                bit 2  write part 3 (a second shard)
 *                bit 3  open the first shard file instead of the directory
 *                bit 4  plan the catalog with the built-in rules
 *                bits 5-6  tp for that plan: 1, 2, 4 or 8
 *                bit 7  ... with --dtype bf16
 *   the rest   up to five parts separated by FRAME_SEP:
 *                index, config, first shard, second shard, rules
 *
 * The shards are model-00001-of-00002.safetensors and
 * model-00002-of-00002.safetensors when there is an index, else
 * model.safetensors and (an unreferenced) model-00002-of-00002.safetensors.
 * A part the flags ask for but the input lacks is written empty; the
 * first shard is written whenever the input has it.  With a fifth part
 * the plan uses it as a rules file (as --rules does) instead of the
 * built-in rules of config.json's architecture, so that user rules meet
 * fuzzed tensor names.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wshard.h"
#include "source/safetensors.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "fuzz_util.h"
#include "fuzz_plan.h"

#define FRAME_SEP "\n@@\n"
#define NPARTS 5

enum { F_INDEX = 1, F_CONFIG = 2, F_SHARD2 = 4, F_FILE = 8, F_PLAN = 16, F_BF16 = 128 };

static const char *const all_names[] = {
	"model.safetensors.index.json", "config.json", "model.safetensors",
	"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
};

static char dir[4200];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_path(dir, sizeof(dir), fuzz_scratch(), "ckpt");
	if (mkdir(dir, 0755) < 0)
		fuzz_die(dir);
	return 0;
}

/* Splits [p, end) at FRAME_SEP into at most NPARTS parts; returns how many. */
static int split(const uint8_t *p, const uint8_t *end, const uint8_t **part,
		 size_t *len)
{
	size_t sl = strlen(FRAME_SEP);
	int n = 0;

	while (n < NPARTS) {
		const uint8_t *s = n < NPARTS - 1 && (size_t)(end - p) >= sl ?
			memmem(p, (size_t)(end - p), FRAME_SEP, sl) : NULL;

		part[n] = p;
		len[n] = s ? (size_t)(s - p) : (size_t)(end - p);
		n++;
		if (!s)
			break;
		p = s + sl;
	}
	return n;
}

static void put(const char *name, const uint8_t *data, size_t len)
{
	char path[4300];

	fuzz_write(fuzz_path(path, sizeof(path), dir, name), data, len);
}

/* What wshard_catalog_open promises about a checkpoint it accepted. */
static void check_catalog(const struct wshard_catalog *cat)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < cat->nfiles; i++) {
		PCHECK(cat->files[i].name && cat->files[i].st);
		PCHECK(cat->files[i].st->size == cat->files[i].size);
		if (i)
			PCHECK(strcmp(cat->files[i - 1].name, cat->files[i].name) < 0);
	}
	for (i = 0; i < cat->ntensors; i++) {
		const struct wshard_src_tensor *t = &cat->tensors[i];
		const struct wshard_src_file *f;

		PCHECK(t->file < cat->nfiles);
		f = &cat->files[t->file];
		PCHECK(t->info && t->info == wshard_st_find(f->st, t->name));
		PCHECK(t->nbytes == t->info->end - t->info->begin);
		PCHECK(t->offset <= f->size && t->nbytes <= f->size - t->offset);
		if (i)
			PCHECK(strcmp(cat->tensors[i - 1].name, t->name) < 0);
		PCHECK(wshard_catalog_find(cat, t->name) == t);
		PCHECK(wshard_catalog_index(cat, t->name) == (long)i);
		sum += t->nbytes;
	}
	PCHECK(sum == cat->tensor_bytes);
	for (i = 0; i < cat->nextra; i++)
		PCHECK(cat->extra[i] && !strchr(cat->extra[i], '/'));
}

static void plan(const struct wshard_catalog *cat, unsigned flags,
		 const uint8_t *rules_text, size_t rules_len)
{
	struct wshard_options opt;
	struct wshard_error err = { 0 };
	struct wshard_rules *rules = NULL;
	struct wshard_plan *p = NULL;
	enum wshard_err rc;

	if (rules_text) {
		if (wshard_rules_parse(&rules, (const char *)rules_text, rules_len,
				       "fuzz-rules.json", &err))
			return;
	} else if (!cat->config.architecture ||
		   wshard_rules_builtin(&rules, cat->config.architecture, &err)) {
		return;
	}
	wshard_options_init(&opt);
	opt.tp = 1 << ((flags >> 5) & 3);
	opt.max_file_size = 4096;
	if (flags & F_BF16) {
		opt.has_dtype = true;
		opt.dtype = WSHARD_BF16;
	}
	rc = wshard_plan_build(&p, cat, rules, &opt, &err);
	if (!rc) {
		fuzz_check_plan(p, cat);
		wshard_plan_free(p);
	} else {
		PCHECK(!p && err.msg[0]);
	}
	wshard_rules_free(rules);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *part[NPARTS] = { 0 };
	size_t len[NPARTS] = { 0 }, i;
	struct wshard_catalog *cat = NULL;
	struct wshard_error err = { 0 };
	char path[4300];
	unsigned flags;
	int n;
	enum wshard_err rc;

	if (size < 1)
		return 0;
	flags = data[0];
	n = split(data + 1, data + size, part, len);
	for (i = 0; i < sizeof(all_names) / sizeof(all_names[0]); i++)
		fuzz_unlink(fuzz_path(path, sizeof(path), dir, all_names[i]));
	if (flags & F_INDEX)
		put(all_names[0], part[0], len[0]);
	if (flags & F_CONFIG)
		put(all_names[1], part[1], len[1]);
	if (n > 2)
		put(flags & F_INDEX ? all_names[3] : all_names[2], part[2], len[2]);
	if (flags & F_SHARD2)
		put(all_names[4], part[3], len[3]);

	if (flags & F_FILE)
		fuzz_path(path, sizeof(path), dir,
			  flags & F_INDEX ? all_names[3] : all_names[2]);
	else
		snprintf(path, sizeof(path), "%s", dir);
	rc = wshard_catalog_open(&cat, path, &err);
	if (rc) {
		PCHECK(!cat);
		PCHECK(rc == WSHARD_EINVAL || rc == WSHARD_EIO || rc == WSHARD_ENOMEM);
		PCHECK(err.msg[0]);
		return 0;
	}
	check_catalog(cat);
	if (flags & F_PLAN)
		plan(cat, flags, n > 4 ? part[4] : NULL, len[4]);
	wshard_catalog_free(cat);
	return 0;
}
