/*
 * convert.c - wshard convert: plan and write per-rank pre-sharded
 * safetensors for tensor-parallel inference.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"

static const char convert_usage[] =
	"usage: wshard convert --tp N [options] SRC OUT\n"
	"\n"
	"Cuts and fuses every tensor of the checkpoint SRC (a model directory, or one\n"
	"packed in a .tar, .tar.gz, .tar.zst, .tar.xz or .zip) for each of N tensor-parallel\n"
	"ranks and writes OUT/model-rank-R-part-P.safetensors, the non-weight files and\n"
	"OUT/wshard.json (last).  Under mpirun, MPI process p writes ranks p, p+P, ...\n"
	"SRC may also be a repo id ORG/NAME fetched earlier into the local HuggingFace\n"
	"cache ($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub); wshard never\n"
	"downloads, and a local path of the same name wins.\n"
	"The weights are model.safetensors(.index.json), or Mistral's own format\n"
	"(params.json beside consolidated*.safetensors: serve the output with\n"
	"--config-format mistral), or for Cosmos 3 the [tv]*er/*.safetensors folders.\n"
	"\n"
	"options:\n"
	"  -t, --tp N               tensor-parallel size (required)\n"
	"      --pp P               pipeline stages (default 1): writes\n"
	"                           OUT/model-pp-S-tp-R-part-K.safetensors for each\n"
	"                           stage S, as vLLM's --pipeline-parallel-size P loads\n"
	"      --pp-layers A,B,...  decoder layers per stage (vLLM's\n"
	"                           VLLM_PP_LAYER_PARTITION; default: vLLM's split)\n"
	"      --target NAME        engine layout: vllm@0.32 (default; vllm = newest)\n"
	"      --expert-parallel    each rank holds whole experts, as vLLM's\n"
	"                           --enable-expert-parallel (attention stays TP-split)\n"
	"      --expert-placement P linear (default) or round_robin, vLLM's\n"
	"                           expert_placement_strategy\n"
	"      --no-attn-scales     leave out attn._k_scale/_v_scale/_q_scale/_prob_scale\n"
	"                           (for vLLM releases before December 2025)\n"
	"      --rules FILE         rules for an architecture wshard does not know\n"
	"      --architecture NAME  convert as NAME, not config.json's architectures[0]:\n"
	"                           a speculative draft in the checkpoint (MiMoMTPModel,\n"
	"                           DeepSeekMTPModel), as vLLM's speculative_config builds it\n"
	"      --revision REV       with a repo id: branch, tag or commit (default main)\n"
	"      --max-file-size SIZE start a new part past SIZE bytes (default 5GiB)\n"
	"      --max-memory SIZE    tensor-data buffer budget (default 64MiB)\n"
	"      --validate MODE      round trip: auto (default), gpu, host or off\n"
	"      --checksum ALGO      manifest checksums: crc64-nvme (default), xxh3-64\n"
	"                           or sha256 (these two read each file back)\n"
	"      --dtype TYPE         convert F32/F16/BF16 weights to bf16, f16 or f32\n"
	"                           (FP8 weights, their scales and integers are kept)\n"
	"      --archive FMT        also pack each rank into OUT/rank-R.FMT: tar,\n"
	"                           tar.zst or tar.gz (its files, copies, manifest)\n"
	"      --archive-only       keep only the archives and wshard.json in OUT\n"
	"      --no-sync            do not fsync the output (faster; a power loss or\n"
	"                           kernel crash may then leave a short file behind)\n"
	"  -f, --force              replace an earlier wshard output in OUT\n"
	"  -n, --dry-run            print the plan and write nothing\n"
	"      --json               print the summary as JSON\n"
	"  -q, --quiet              no progress and no summary\n"
	"  -h, --help               show this help\n"
	"\n"
	"SIZE takes K, M, G, T (powers of 1024; also KiB, MiB, GiB, TiB) or KB, MB, GB, TB.\n"
	"Exit status: 0 success, 2 usage error or OUT not replaceable, 3 bad input,\n"
	"4 I/O error, 5 round-trip validation failed or no GPU for --validate gpu,\n"
	"6 repo id or revision not in the HuggingFace cache.\n";

struct convert_opts {
	struct wshard_options opt;
	struct wshard_run run;
	const char *rules;
	const char *revision;
	const char *src;
	struct wshard_comm *comm;
	bool have_tp, have_placement, dry_run, json, quiet;
	const char *pp_layers;		/* --pp-layers as given */
	int pp_counts[1024];		/* --pp-layers parsed */
};

enum {
	OPT_TARGET = 256,
	OPT_NO_SCALES,
	OPT_RULES,
	OPT_ARCH,
	OPT_MAX_FILE,
	OPT_MAX_MEM,
	OPT_VALIDATE,
	OPT_CHECKSUM,
	OPT_JSON,
	OPT_DTYPE,
	OPT_ARCHIVE,
	OPT_ARCHIVE_ONLY,
	OPT_NO_SYNC,
	OPT_REVISION,
	OPT_EP,
	OPT_PLACEMENT,
	OPT_PP,
	OPT_PP_LAYERS,
};

static int parse_validate(const char *s, enum wshard_validate_mode *out)
{
	static const char *const names[] = { "auto", "gpu", "host", "off" };
	int i;

	for (i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum wshard_validate_mode)i;
			return 0;
		}
	return -1;
}

/* --dtype's value.  Returns 0, or -1 if it names no target dtype. */
static int parse_dtype(const char *s, enum wshard_dtype *out)
{
	/* wshard's names and vLLM's --dtype names (torch's), any case */
	static const struct {
		const char *name;
		enum wshard_dtype dt;
	} names[] = {
		{ "bf16", WSHARD_BF16 }, { "bfloat16", WSHARD_BF16 },
		{ "f16", WSHARD_F16 }, { "fp16", WSHARD_F16 }, { "float16", WSHARD_F16 },
		{ "half", WSHARD_F16 },
		{ "f32", WSHARD_F32 }, { "fp32", WSHARD_F32 }, { "float32", WSHARD_F32 },
		{ "float", WSHARD_F32 },
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(s, names[i].name)) {
			*out = names[i].dt;
			return 0;
		}
	return -1;
}

/* --archive's value.  Returns 0, or -1 if it names no format. */
static int parse_archive(const char *s, enum wshard_archive_fmt *out)
{
	if (!strcmp(s, "tar"))
		*out = WSHARD_ARCHIVE_TAR;
	else if (!strcmp(s, "tar.zst"))
		*out = WSHARD_ARCHIVE_TAR_ZST;
	else if (!strcmp(s, "tar.gz"))
		*out = WSHARD_ARCHIVE_TAR_GZ;
	else
		return -1;
	return 0;
}

/* What value_option returns for an option that takes no value. */
#define NOT_A_VALUE_OPTION (-2)

/*
 * An option c that takes a value, arg.  Returns 0, a usage error's exit
 * code, or NOT_A_VALUE_OPTION.
 */
static int value_option(int c, const char *arg, struct convert_opts *o)
{
	switch (c) {
	case 't':
		if (parse_int(arg, &o->opt.tp) < 0)
			return usage_error("convert", "--tp needs a positive integer, not '%s'", arg);
		o->have_tp = true;
		return 0;
	case OPT_PP:
		if (parse_int(arg, &o->opt.pp) < 0)
			return usage_error("convert", "--pp needs a positive integer, not '%s'", arg);
		return 0;
	case OPT_PP_LAYERS:
		o->pp_layers = arg;
		return 0;
	case OPT_TARGET:
		o->opt.target = arg;
		return 0;
	case OPT_RULES:
		o->rules = arg;
		return 0;
	case OPT_ARCH:
		o->opt.architecture = arg;
		return 0;
	case OPT_REVISION:
		o->revision = arg;
		return 0;
	case OPT_MAX_FILE:
		if (wshard_parse_size(arg, &o->opt.max_file_size) < 0 || o->opt.max_file_size == 0)
			return usage_error("convert", "--max-file-size: bad size '%s'", arg);
		return 0;
	case OPT_MAX_MEM:
		if (wshard_parse_size(arg, &o->opt.max_memory) < 0 || o->opt.max_memory < (1 << 20))
			return usage_error("convert", "--max-memory: bad size '%s' (at least 1MiB)",
					   arg);
		return 0;
	case OPT_VALIDATE:
		if (parse_validate(arg, &o->run.validate) < 0)
			return usage_error("convert", "--validate: '%s' is not auto, gpu, host or off",
					   arg);
		return 0;
	case OPT_CHECKSUM:
		if (wshard_checksum_parse(arg, &o->opt.checksum) < 0)
			return usage_error("convert", "--checksum: '%s' is not crc64-nvme, xxh3-64 or sha256",
					   arg);
		return 0;
	case OPT_DTYPE:
		if (parse_dtype(arg, &o->opt.dtype) < 0)
			return usage_error("convert", "--dtype: '%s' is not bf16, f16 or f32", arg);
		o->opt.has_dtype = true;
		return 0;
	case OPT_PLACEMENT:
		if (wshard_placement_parse(arg, &o->opt.placement) < 0)
			return usage_error("convert", "--expert-placement: '%s' is not linear or round_robin",
					   arg);
		o->have_placement = true;
		return 0;
	case OPT_ARCHIVE:
		if (parse_archive(arg, &o->run.archive) < 0)
			return usage_error("convert", "--archive: '%s' is not tar, tar.zst or tar.gz",
					   arg);
		return 0;
	}
	return NOT_A_VALUE_OPTION;
}

/*
 * An option c without a value, or getopt's complaint about argv's last
 * option.  Returns 0, -1 after --help, or a usage error's exit code.
 */
static int flag_option(int c, char **argv, struct convert_opts *o)
{
	switch (c) {
	case OPT_NO_SCALES:
		o->opt.attn_scales = false;
		return 0;
	case OPT_EP:
		o->opt.expert_parallel = true;
		return 0;
	case OPT_ARCHIVE_ONLY:
		o->run.archive_only = true;
		return 0;
	case OPT_NO_SYNC:
		o->run.no_sync = true;
		return 0;
	case 'f':
		o->run.force = true;
		return 0;
	case 'n':
		o->dry_run = true;
		return 0;
	case OPT_JSON:
		o->json = true;
		return 0;
	case 'q':
		o->quiet = true;
		return 0;
	case 'h':
		fputs(convert_usage, stdout);
		return -1;
	case ':':
		return usage_error("convert", "option '%s' needs a value", argv[optind - 1]);
	}
	return usage_error("convert", "unknown option '%s'", argv[optind - 1]);
}

/* --pp-layers into o->opt.pp_layers: --pp counts.  Returns 0 or -1. */
static int parse_pp_layers(struct convert_opts *o)
{
	const char *p = o->pp_layers;
	char *end;
	long v;
	int n = 0;

	while (n < o->opt.pp && n < 1024) {
		v = strtol(p, &end, 10);
		if (end == p || v < 1 || v > 1000000 || (*end && *end != ','))
			return -1;
		o->pp_counts[n++] = (int)v;
		if (!*end)
			break;
		p = end + 1;
	}
	if (n != o->opt.pp || *end)
		return -1;
	o->opt.pp_layers = o->pp_counts;
	return 0;
}

/* Returns 0, -1 after --help, or a usage error's exit code. */
static int parse_args(int argc, char **argv, struct convert_opts *o)
{
	static const struct option longopts[] = {
		{ "tp", required_argument, NULL, 't' },
		{ "pp", required_argument, NULL, OPT_PP },
		{ "pp-layers", required_argument, NULL, OPT_PP_LAYERS },
		{ "target", required_argument, NULL, OPT_TARGET },
		{ "expert-parallel", no_argument, NULL, OPT_EP },
		{ "expert-placement", required_argument, NULL, OPT_PLACEMENT },
		{ "no-attn-scales", no_argument, NULL, OPT_NO_SCALES },
		{ "rules", required_argument, NULL, OPT_RULES },
		{ "architecture", required_argument, NULL, OPT_ARCH },
		{ "revision", required_argument, NULL, OPT_REVISION },
		{ "max-file-size", required_argument, NULL, OPT_MAX_FILE },
		{ "max-memory", required_argument, NULL, OPT_MAX_MEM },
		{ "validate", required_argument, NULL, OPT_VALIDATE },
		{ "checksum", required_argument, NULL, OPT_CHECKSUM },
		{ "dtype", required_argument, NULL, OPT_DTYPE },
		{ "archive", required_argument, NULL, OPT_ARCHIVE },
		{ "archive-only", no_argument, NULL, OPT_ARCHIVE_ONLY },
		{ "no-sync", no_argument, NULL, OPT_NO_SYNC },
		{ "force", no_argument, NULL, 'f' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, ret;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":t:fnqh", longopts, NULL)) != -1) {
		ret = value_option(c, optarg, o);
		if (ret == NOT_A_VALUE_OPTION)
			ret = flag_option(c, argv, o);
		if (ret)
			return ret;
	}
	if (!o->have_tp)
		return usage_error("convert", "--tp N is required");
	if (o->pp_layers && parse_pp_layers(o))
		return usage_error("convert", "--pp-layers needs %d positive integers split by commas (one per --pp stage), not '%s'",
				   o->opt.pp, o->pp_layers);
	if (o->opt.pp > 1 && o->run.archive != WSHARD_ARCHIVE_NONE)
		return usage_error("convert", "--archive is not written with --pp yet");
	if (o->have_placement && !o->opt.expert_parallel)
		return usage_error("convert", "--expert-placement needs --expert-parallel");
	if (o->run.archive_only && o->run.archive == WSHARD_ARCHIVE_NONE)
		return usage_error("convert", "--archive-only needs --archive FMT");
	if (argc - optind != 2)
		return usage_error("convert", "expected SRC and OUT, got %d argument%s",
				   argc - optind, argc - optind == 1 ? "" : "s");
	o->src = argv[optind];
	o->run.out_dir = argv[optind + 1];
	return 0;
}

/* Prints what convert would write (--dry-run). */
static void print_dry_run(const struct convert_opts *o, const struct wshard_plan *plan,
			  struct wshard_error *err)
{
	char *text;

	if (wshard_plan_text(plan, o->run.archive, o->run.archive_only, &text, err))
		return;
	fputs(text, stdout);
	free(text);
}

/* User and system CPU time of this process so far, in seconds. */
static double process_cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static void print_summary(const struct convert_opts *o, const struct wshard_catalog *cat,
			  const struct wshard_plan *plan, double secs)
{
	struct wshard_catalog_info src;
	struct wshard_plan_info info;
	struct wshard_timings t;
	uint64_t files;
	char a[32], b[32], c[32];

	wshard_catalog_info(cat, &src);
	wshard_plan_info(plan, &info);
	wshard_run_timings(&o->run, &t);
	files = info.nfiles;
	if (o->json) {
		printf("{\"out\": \"%s\", \"tp\": %d, \"pp\": %d, \"processes\": %d, \"files\": %llu, "
		       "\"bytes_written\": %llu, \"bytes_read\": %llu, \"source_tensor_bytes\": %llu, "
		       "\"bytes_validated\": %llu, \"bytes_validated_late\": %llu, "
		       "\"validated_by\": \"%s\", \"archive_bytes\": %llu, "
		       "\"synced\": %s, \"seconds\": %.3f, \"stream_seconds\": %.3f, "
		       "\"seal_seconds\": %.3f, \"cpu_seconds\": %.3f, \"seal_cpu_seconds\": %.3f, "
		       "\"write_mb_per_s\": %.1f}\n",
		       o->run.out_dir, info.tp, info.pp, o->run.nprocs, (unsigned long long)files,
		       (unsigned long long)o->run.bytes_written,
		       (unsigned long long)o->run.bytes_read,
		       (unsigned long long)src.tensor_bytes,
		       (unsigned long long)o->run.bytes_validated,
		       (unsigned long long)o->run.bytes_validated_late, o->run.validate_backend,
		       (unsigned long long)o->run.archive_bytes,
		       o->run.no_sync ? "false" : "true", secs, t.stream_seconds,
		       t.seal_seconds, process_cpu_seconds(), t.seal_cpu_seconds,
		       secs > 0 ? (double)o->run.bytes_written / secs / 1e6 : 0.0);
		return;
	}
	printf("wrote %d rank%s, %llu file%s, %s to '%s' in %.2fs (%.0f MB/s)\n",
	       info.tp * info.pp, info.tp * info.pp == 1 ? "" : "s", (unsigned long long)files,
	       files == 1 ? "" : "s", wshard_format_bytes(o->run.bytes_written, a, sizeof(a)),
	       o->run.out_dir, secs,
	       secs > 0 ? (double)o->run.bytes_written / secs / 1e6 : 0.0);
	printf("read %s of %s source tensor data with %d process%s; ",
	       wshard_format_bytes(o->run.bytes_read, b, sizeof(b)),
	       wshard_format_bytes(src.tensor_bytes, c, sizeof(c)), o->run.nprocs,
	       o->run.nprocs == 1 ? "" : "es");
	if (o->run.validate == WSHARD_VALIDATE_OFF)
		printf("not validated (--validate off)\n");
	else
		printf("validated %s on %s\n",
		       wshard_format_bytes(o->run.bytes_validated, a, sizeof(a)), o->run.validate_backend);
	if (o->run.archive != WSHARD_ARCHIVE_NONE)
		printf("packed %d rank archive%s, %s%s\n", info.tp, info.tp == 1 ? "" : "s",
		       wshard_format_bytes(o->run.archive_bytes, a, sizeof(a)),
		       o->run.archive_only ? "; rank and copied files removed (--archive-only)" : "");
	if (o->run.no_sync)
		printf("not synced to disk (--no-sync)\n");
}

/*
 * mpirun keeps its session directory under $TMPDIR or /tmp.  On the file
 * system OUT is written to, the end of an unsynced run (MPI_Finalize,
 * mpirun's own exit) waits there for the kernel to write the output
 * back, which undoes much of what --no-sync saves.  Says so, once, after
 * the summary, with the way round it.
 */
static void note_session_dir(const char *out)
{
	const char *dir = getenv("PMIX_SERVER_TMPDIR");
	struct stat a, b;

	if (!dir)
		dir = getenv("OMPI_MCA_orte_top_session_dir");
	if (dir && stat(dir, &a) == 0 && stat(out, &b) == 0 && a.st_dev == b.st_dev)
		fprintf(stderr,
			"wshard: note: Open MPI's session directory '%s' is on the file system of "
			"'%s'; with --no-sync the job's end waits there for the output's write-back "
			"(TMPDIR=/dev/shm mpirun ... avoids it)\n", dir, out);
}

/*
 * A float32 checkpoint converted as it is: vLLM serves it downcast
 * (config/model.py, _resolve_auto_dtype: bfloat16 where the device has
 * it, float16 for an embedding or classifier model), casting every
 * tensor it loads; --dtype writes that layout, in half the bytes.
 */
static void note_float32(const struct convert_opts *o, const struct wshard_catalog *cat)
{
	struct wshard_catalog_info info;

	wshard_catalog_info(cat, &info);
	if (!o->opt.has_dtype && info.torch_dtype && !strcmp(info.torch_dtype, "float32"))
		fprintf(stderr,
			"wshard: note: config.json's dtype is float32, which vLLM serves as bfloat16 "
			"(float16 for an embedding or classifier model), casting as it loads: "
			"--dtype bf16 or f16 writes that in half the bytes\n");
}

/* The rules for cat: --rules FILE (for its architecture), else the
 * built-in ones of its architecture; --architecture stands for
 * config.json's. */
static void open_rules(const struct convert_opts *o, const struct wshard_catalog *cat,
		       struct wshard_rules **out_rules, struct wshard_error *err)
{
	struct wshard_catalog_info info;

	wshard_catalog_info(cat, &info);
	if (o->opt.architecture)
		info.architecture = o->opt.architecture;
	if (o->rules && !wshard_rules_load(out_rules, o->rules, err) && info.has_config)
		wshard_rules_check_arch(*out_rules, info.architecture, err);
	else if (!info.has_config)
		wshard_error_set(err, WSHARD_EINVAL,
				 "'%s' has no config.json: convert needs a model directory",
				 o->src);
	else
		wshard_rules_builtin(out_rules, info.architecture, err);
}

/*
 * The refusals config.json alone decides (--tp against the heads), before
 * the index and every header are read.  Rules that cannot be had yet are
 * no refusal here: the open goes on, and says why in its turn.
 */
static enum wshard_err precheck(const struct wshard_catalog *cat, void *ctx,
				struct wshard_error *err)
{
	struct convert_opts *o = ctx;
	struct wshard_rules *rules = NULL;
	struct wshard_error ignored = { 0 };
	enum wshard_err rc = WSHARD_OK;

	open_rules(o, cat, &rules, &ignored);
	if (!ignored.code)
		rc = wshard_plan_check_config(cat, rules, &o->opt, err);
	wshard_rules_free(rules);
	/* CUDA starts beside the rest of the planning, not before a refusal */
	if (!rc && !o->dry_run)
		wshard_run_prepare(&o->run, o->comm);
	return rc;
}

int cmd_convert(int argc, char **argv)
{
	struct convert_opts o = { 0 };
	struct wshard_error err = { 0 };
	struct wshard_comm *comm = NULL;
	struct wshard_catalog *cat = NULL;
	struct wshard_rules *rules = NULL;
	struct wshard_plan *plan = NULL;
	struct wshard_precheck check = { precheck, &o };
	struct progress_meter prog;
	double start = now_seconds();
	int ret, leader = 1;

	wshard_options_init(&o.opt);
	o.run.validate = WSHARD_VALIDATE_AUTO;
	ret = parse_args(argc, argv, &o);
	if (ret)
		return ret < 0 ? EXIT_OK : ret;
	if (wshard_comm_init(&comm, &argc, &argv, &err))
		return report_error(&err);
	leader = wshard_comm_rank(comm) == 0;
	o.comm = comm;
	if (!wshard_catalog_open_source_checked(&cat, o.src, o.revision, &check, &err))
		open_rules(&o, cat, &rules, &err);
	if (!err.code)
		wshard_rules_add_folders(rules, cat, &err);
	if (!err.code)
		wshard_plan_build(&plan, cat, rules, &o.opt, &err);
	if (wshard_comm_agree(comm, &err))
		goto out;
	if (o.dry_run) {
		if (leader)
			print_dry_run(&o, plan, &err);
		goto out;
	}
	progress_init(&prog, o.quiet || !leader);
	o.run.progress = progress_update;
	o.run.progress_ctx = &prog;
	wshard_convert(plan, comm, &o.run, &err);
	progress_done(&prog);
	if (err.code)
		goto out;
	if (leader && o.run.notice[0] && !o.quiet)
		fprintf(stderr, "wshard: %s\n", o.run.notice);
	if (leader && !o.quiet)
		print_summary(&o, cat, plan, now_seconds() - start);
	if (leader && !o.quiet)
		note_float32(&o, cat);
	if (leader && !o.quiet && o.run.no_sync && wshard_comm_is_mpi(comm))
		note_session_dir(o.run.out_dir);	/* OUT exists now */
out:
	ret = err.code ? exit_code(err.code) : EXIT_OK;
	if (err.code && leader)
		report_error(&err);
	wshard_run_release(&o.run);
	wshard_plan_free(plan);
	wshard_rules_free(rules);
	wshard_catalog_free(cat);
	wshard_comm_free(comm);
	/*
	 * The static CUDA runtime tears the device's context down at exit, a
	 * tenth of a second on an H100, with nothing left to do: every
	 * validator is flushed and closed, the output committed or removed.
	 * The driver frees what a process held when it ends either way.
	 */
	if (!strncmp(o.run.validate_backend, "cuda", 4)) {
		fflush(NULL);
		_exit(ret);
	}
	return ret;
}
