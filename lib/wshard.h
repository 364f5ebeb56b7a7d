/*
 * wshard.h - the whole public interface of libwshard.
 *
 * libwshard reads HuggingFace safetensors checkpoints, plans how every
 * tensor is cut and fused for each tensor-parallel rank, writes per-rank
 * safetensors files and a manifest, and verifies them.  The library never
 * prints, exits or aborts: every fallible function returns an enum
 * wshard_err and fills a struct wshard_error with a one-line message
 * (lowercase, problem first, subject quoted, cause last).  Only cmd/
 * decides what to print and which exit code to use.
 *
 * Conventions: output parameters are named out_* and set on entry; every
 * _free() function accepts NULL.  Handles whose fields callers do not
 * need (catalog, rules, comm, manifest's document) are opaque; what the
 * library shares inside itself is in private headers next to its .c
 * files (lib/NAME.h), which only the library and its tests include.
 */
#ifndef WSHARD_H
#define WSHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WSHARD_VERSION "0.1.0"
/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* Numbered once, never renumbered. */
enum wshard_err {
	WSHARD_OK = 0,
	WSHARD_EINVAL = 1,	/* bad or unsupported input: file, config, rules */
	WSHARD_EUSAGE = 2,	/* an option value the caller passed is wrong */
	WSHARD_EIO = 3,		/* I/O or system error */
	WSHARD_ENOMEM = 4,	/* out of memory */
	WSHARD_EVALIDATE = 5,	/* round-trip validation found different bytes */
	WSHARD_EMISMATCH = 6,	/* verify found differences */
	WSHARD_ENODEV = 7,	/* a GPU was required and none is usable */
	WSHARD_EEXIST = 8,	/* output exists and may not be replaced */
	WSHARD_EBUSY = 9,	/* output is locked by another convert */
	WSHARD_ENOTCACHED = 10,	/* a repo id not (wholly) in the HuggingFace cache */
};

#define WSHARD_ERRMAX 1024

struct wshard_error {
	enum wshard_err code;
	char msg[WSHARD_ERRMAX];
};

/* A short static description of code, e.g. "bad input". */
const char *wshard_strerror(enum wshard_err code);

/*
 * Records code and a printf-style message in err (which may be NULL).
 * If err already holds an error, it is kept: the first cause wins.
 * Returns code.
 */
enum wshard_err wshard_error_set(struct wshard_error *err, enum wshard_err code,
				 const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------ */
/* Dtypes                                                              */
/* ------------------------------------------------------------------ */

enum wshard_dtype {
	WSHARD_BOOL,
	WSHARD_U8,
	WSHARD_I8,
	WSHARD_I16,
	WSHARD_U16,
	WSHARD_F16,
	WSHARD_BF16,
	WSHARD_I32,
	WSHARD_U32,
	WSHARD_F32,
	WSHARD_I64,
	WSHARD_U64,
	WSHARD_F64,
	WSHARD_C64,
	WSHARD_F8_E5M2,
	WSHARD_F8_E4M3,
	WSHARD_F8_E8M0,
	WSHARD_F8_E4M3FNUZ,
	WSHARD_F8_E5M2FNUZ,
	WSHARD_F4,
	WSHARD_F6_E2M3,
	WSHARD_F6_E3M2,
	WSHARD_DTYPE_COUNT
};

/* The safetensors spelling of dt ("BF16"), or "?" when out of range. */
const char *wshard_dtype_name(enum wshard_dtype dt);

#define WSHARD_MAX_DIMS 8

/* Writes "[3, 4]" for shape into buf (cut short if it does not fit); returns buf. */
const char *wshard_format_shape(char *buf, size_t size, const uint64_t *shape,
				int ndim);

/* ------------------------------------------------------------------ */
/* Checksums                                                           */
/* ------------------------------------------------------------------ */

enum wshard_checksum {
	WSHARD_CK_XXH3 = 0,	/* XXH3-64, "xxh3-64" */
	WSHARD_CK_SHA256 = 1,	/* SHA-256, "sha256" */
	WSHARD_CK_CRC64 = 2,	/* CRC-64/NVME, "crc64-nvme" (convert's default) */
};

/* Parses a checksum algorithm name.  Returns 0, or -1 if unknown. */
int wshard_checksum_parse(const char *name, enum wshard_checksum *out_ck);

/*
 * Parses a size such as "5GiB", "256M", "4096" (K/M/G/T are powers of
 * 1024 as are KiB/MiB/GiB/TiB; KB/MB/GB/TB are powers of 1000).
 * Returns 0, or -1 on a malformed or overflowing size.
 */
int wshard_parse_size(const char *s, uint64_t *out_bytes);

/* ------------------------------------------------------------------ */
/* Checkpoint catalog                                                  */
/* ------------------------------------------------------------------ */

/* An opened checkpoint: its files, tensors and config.json. */
struct wshard_catalog;

/*
 * A repo id resolved in the local HuggingFace hub cache, the layout
 * huggingface_hub writes: CACHE/models--ORG--NAME/ with refs/BRANCH (a
 * commit hash), snapshots/COMMIT/ (links into ../../blobs/) and blobs/.
 * Never downloads anything.
 */
struct wshard_hf_ref {
	char *repo_id;		/* "ORG/NAME" */
	char *revision;		/* as asked: a branch or tag in refs/, or a commit */
	char *commit;		/* the commit hash it resolved to */
	char *cache;		/* the hub cache looked in */
	char *snapshot;		/* CACHE/models--ORG--NAME/snapshots/COMMIT */
};

/* What a catalog holds, as a whole.  Strings live as long as the catalog. */
struct wshard_catalog_info {
	const char *path;		/* as given to wshard_catalog_open */
	bool has_config;		/* config.json was found */
	const char *architecture;	/* its architectures[0], or NULL */
	size_t ntensors;
	size_t nfiles;			/* .safetensors files */
	uint64_t tensor_bytes;		/* sum of all tensor data bytes */
	size_t nignored;
	char *const *ignored;		/* .safetensors files the index does not use */
	const struct wshard_hf_ref *hf;	/* NULL unless opened from a repo id */
};

/* One source tensor.  Strings live as long as the catalog. */
struct wshard_tensor_info {
	const char *name;
	enum wshard_dtype dtype;
	int ndim;			/* 0 for a scalar */
	uint64_t shape[WSHARD_MAX_DIMS];
	uint64_t nbytes;
	const char *file;		/* the file holding it, relative to the checkpoint */
};

/*
 * The tensors of cat whose name matches the fnmatch pattern filter (NULL:
 * all) as one JSON document, indented by 2, into a malloc'd *out_text:
 * "path", "architecture", "tensors" (name, dtype, shape, bytes, file),
 * "tensor_count", "total_bytes", "bytes_per_dtype", "file_count" and
 * "ignored_files".  Returns WSHARD_OK or WSHARD_ENOMEM.
 */
enum wshard_err wshard_catalog_json(const struct wshard_catalog *cat, const char *filter,
				    char **out_text, struct wshard_error *err);

/* Fills *out_info with what cat holds. */
void wshard_catalog_info(const struct wshard_catalog *cat,
			 struct wshard_catalog_info *out_info);

/* Fills *out_t with tensor i of cat (i < ntensors; sorted by name). */
void wshard_catalog_tensor(const struct wshard_catalog *cat, size_t i,
			   struct wshard_tensor_info *out_t);

/* Frees cat; accepts NULL. */
void wshard_catalog_free(struct wshard_catalog *cat);

/*
 * Opens a checkpoint named as the CLI takes it: src is a local path
 * (directory, file or archive) when one exists, which wins over a repo id
 * of the same name as in transformers; else a repo id resolved with
 * wshard_hf_resolve at revision (NULL: "main"), whose catalog info then
 * has hf set, path src.  A revision with a src that is a local path, or
 * not a repo id, is WSHARD_EUSAGE.  Returns as wshard_catalog_open and
 * wshard_hf_resolve.
 */
enum wshard_err wshard_catalog_open_source(struct wshard_catalog **out_cat,
					   const char *src, const char *revision,
					   struct wshard_error *err);

/*
 * A check that needs only config.json, run when a checkpoint directory
 * or archive has one, before its index and headers are read: a refusal
 * that config.json decides then comes at once, however many tensors the
 * checkpoint has.  fn sees a catalog with config.json read and no files
 * or tensors; the error it returns ends the open.  A config.json that
 * cannot be read skips the check (the open then reports it in its turn).
 */
struct wshard_precheck {
	enum wshard_err (*fn)(const struct wshard_catalog *cat, void *ctx,
			      struct wshard_error *err);
	void *ctx;
};

/*
 * wshard_catalog_open_source with check (NULL: none) run as above.
 * Returns as wshard_catalog_open_source, or check's error.
 */
enum wshard_err wshard_catalog_open_source_checked(struct wshard_catalog **out_cat,
						   const char *src, const char *revision,
						   const struct wshard_precheck *check,
						   struct wshard_error *err);

/* ------------------------------------------------------------------ */
/* Rules                                                               */
/* ------------------------------------------------------------------ */

struct wshard_rules;

/*
 * Loads the built-in rules for a config.json architecture name.
 * Returns WSHARD_OK, WSHARD_EINVAL (unknown architecture: the message
 * lists the known ones and mentions --rules) or WSHARD_ENOMEM.
 */
enum wshard_err wshard_rules_builtin(struct wshard_rules **out_rules,
				     const char *architecture,
				     struct wshard_error *err);

/* Reads and parses a rules file.  Returns as wshard_rules_parse, or WSHARD_EIO. */
enum wshard_err wshard_rules_load(struct wshard_rules **out_rules,
				  const char *path, struct wshard_error *err);

/*
 * Checks that rules whose "architectures" list is not empty name
 * architecture.  Returns WSHARD_OK or WSHARD_EINVAL.
 */
enum wshard_err wshard_rules_check_arch(const struct wshard_rules *rules,
					const char *architecture,
					struct wshard_error *err);

/* Frees rules; accepts NULL. */
void wshard_rules_free(struct wshard_rules *rules);

/* ------------------------------------------------------------------ */
/* Plan                                                                */
/* ------------------------------------------------------------------ */

/*
 * Expert placement under expert parallelism, vLLM's
 * expert_placement_strategy.  Values are never renumbered.
 */
enum wshard_placement {
	WSHARD_PLACE_LINEAR = 0,	/* a contiguous block per rank */
	WSHARD_PLACE_ROUND_ROBIN = 1,	/* every N-th expert */
};

/* "linear" or "round_robin"; NULL for another value. */
const char *wshard_placement_name(enum wshard_placement p);

/* Parses name into *out_p.  Returns 0, or -1 for an unknown name. */
int wshard_placement_parse(const char *name, enum wshard_placement *out_p);

struct wshard_options {
	int tp;				/* tensor-parallel size, >= 1 */
	const char *target;		/* "vllm@0.32"; "vllm" is the newest */
	bool attn_scales;		/* write attn._k_scale & co. */
	uint64_t max_file_size;		/* bytes of data per part */
	uint64_t max_memory;		/* tensor-data buffer budget */
	enum wshard_checksum checksum;
	bool has_dtype;			/* convert floating weights */
	enum wshard_dtype dtype;
	bool expert_parallel;		/* whole experts per rank (EP = tp) */
	enum wshard_placement placement;	/* as requested (--expert-placement) */
};

/* Fills opt with the defaults (tp 1, target "vllm@0.32", scales on,
 * 5 GiB, 64 MiB, crc64-nvme). */
void wshard_options_init(struct wshard_options *opt);

/* How every tensor is cut and fused for each rank, laid out into files. */
struct wshard_plan;

/* What a plan holds, as a whole. */
struct wshard_plan_info {
	int tp;				/* ranks */
	size_t nfiles;			/* rank files, over all ranks */
};

/* Fills *out_info with what plan holds. */
void wshard_plan_info(const struct wshard_plan *plan, struct wshard_plan_info *out_info);

/*
 * Plans the whole conversion: a pure function of the catalog, rules and
 * options, no I/O.  Every source tensor must be consumed by one rule or
 * skipped; every split must divide; shapes must match config.json.
 * Returns WSHARD_OK, WSHARD_EINVAL (uncovered tensors listed, the
 * indivisible config field named, the contradicting tensor named),
 * WSHARD_EUSAGE (bad option) or WSHARD_ENOMEM.
 */
/*
 * The checks of wshard_plan_build that config.json alone decides, for a
 * wshard_precheck: with rules that fuse q/k/v, --tp against
 * num_attention_heads and num_key_value_heads, with the messages the plan
 * gives.  Options the plan would refuse, or heads config.json lacks, are
 * left to the plan.  Returns WSHARD_OK or WSHARD_EINVAL.
 */
enum wshard_err wshard_plan_check_config(const struct wshard_catalog *cat,
					 const struct wshard_rules *rules,
					 const struct wshard_options *opt,
					 struct wshard_error *err);

enum wshard_err wshard_plan_build(struct wshard_plan **out_plan,
				  const struct wshard_catalog *cat,
				  const struct wshard_rules *rules,
				  const struct wshard_options *opt,
				  struct wshard_error *err);

/* Frees plan; accepts NULL. */
void wshard_plan_free(struct wshard_plan *plan);

/* ------------------------------------------------------------------ */
/* Processes (MPI or one process)                                      */
/* ------------------------------------------------------------------ */

struct wshard_comm;

/*
 * Joins the MPI job when the process was started by mpirun (detected from
 * the launcher's environment), else makes a one-process communicator and
 * never touches MPI.  Returns WSHARD_OK or WSHARD_EIO.
 */
enum wshard_err wshard_comm_init(struct wshard_comm **out_comm, int *argc,
				 char ***argv, struct wshard_error *err);
/* This process's index, 0-based. */
int wshard_comm_rank(const struct wshard_comm *comm);
/* True when MPI is in use. */
bool wshard_comm_is_mpi(const struct wshard_comm *comm);
/*
 * Agreement: every process passes its own error; all return the first
 * (lowest process) non-OK error, its message copied into err.  Returns
 * that code (WSHARD_OK when all succeeded).
 */
enum wshard_err wshard_comm_agree(struct wshard_comm *comm,
				  struct wshard_error *err);
/* Finalizes MPI if used and frees comm; accepts NULL. */
void wshard_comm_free(struct wshard_comm *comm);

/* ------------------------------------------------------------------ */
/* Convert and verify                                                  */
/* ------------------------------------------------------------------ */

enum wshard_validate_mode {
	WSHARD_VALIDATE_AUTO,
	WSHARD_VALIDATE_GPU,
	WSHARD_VALIDATE_HOST,
	WSHARD_VALIDATE_OFF,
};

/* Archives convert writes beside (or instead of) the directory form. */
enum wshard_archive_fmt {
	WSHARD_ARCHIVE_NONE = 0,
	WSHARD_ARCHIVE_TAR = 1,		/* OUT/rank-R.tar */
	WSHARD_ARCHIVE_TAR_ZST = 2,	/* OUT/rank-R.tar.zst */
	WSHARD_ARCHIVE_TAR_GZ = 3,	/* OUT/rank-R.tar.gz */
};

/* Writes rank r's archive name in fmt ("rank-R.tar", ...) into out (n bytes). */
void wshard_archive_name(char *out, size_t n, int r, enum wshard_archive_fmt fmt);

/*
 * What wshard_convert would write for plan, as convert --dry-run shows
 * it, into a malloc'd *out_text: per rank a line with its tensors, bytes
 * and files, the archive it is packed into (archive; archive_only: its
 * files then removed), then each tensor (name, dtype, shape, bytes, file)
 * and the pieces it is made of.  Returns WSHARD_OK or WSHARD_ENOMEM.
 */
enum wshard_err wshard_plan_text(const struct wshard_plan *plan,
				 enum wshard_archive_fmt archive, bool archive_only,
				 char **out_text, struct wshard_error *err);

/*
 * Progress callback: bytes done of total so far in phase, on this
 * process.  Convert's phases: "writing" (reading the source, writing,
 * validating and checksumming the parts), then "sealing" (finishing
 * each part's checksums, reading it back for them with a checksum that
 * does not compose, syncing and renaming it); each counts tensor bytes
 * from 0 to the same total.
 */
typedef void (*wshard_progress_fn)(void *ctx, const char *phase, uint64_t done,
				   uint64_t total);

struct wshard_run_state;

struct wshard_run {
	/* in */
	const char *out_dir;
	bool force;
	enum wshard_validate_mode validate;
	wshard_progress_fn progress;
	void *progress_ctx;
	enum wshard_archive_fmt archive;	/* one archive per rank, or NONE */
	bool archive_only;		/* then only the archives and the manifest stay */
	bool no_sync;			/* files renamed into place without fsync */
	/* out (valid on process 0 after a successful run) */
	uint64_t bytes_read;		/* summed over processes */
	uint64_t bytes_written;		/* summed over processes */
	uint64_t bytes_validated;
	char validate_backend[128];	/* "host", "cuda:0 (...)", "off" */
	char notice[256];		/* e.g. the auto fall-back reason */
	int nprocs;
	uint64_t archive_bytes;		/* size of all the archives */
	/* the library's (timings, what each process read); NULL before
	 * wshard_convert, freed by wshard_run_release */
	struct wshard_run_state *state;
};

/* Where this process's time in wshard_convert went (convert --json). */
struct wshard_timings {
	/* reading, validating and writing the parts */
	double stream_seconds;
	/* what was left of sealing after (checksums, the read-back for
	 * xxh3-64 and sha256, fsync, rename) */
	double seal_seconds;
	/* CPU time (user and system) of the sealing threads */
	double seal_cpu_seconds;
};

/*
 * Starts, in a background thread, what run->validate needs that the plan
 * does not decide: with --validate gpu or auto in a CUDA build, CUDA's
 * start in this process (driver, primary context of the device this
 * process will use; a third of a second or more), so that it overlaps
 * catalog and planning.  Failures are left for wshard_convert's open of
 * the validator to report.  Optional; wshard_convert and
 * wshard_run_release wait for the thread.
 */
void wshard_run_prepare(struct wshard_run *run, const struct wshard_comm *comm);

/* Releases what a wshard_run owns (waiting for what wshard_run_prepare
 * started); accepts NULL. */
void wshard_run_release(struct wshard_run *run);

/* Fills *out_t with the timings of run's wshard_convert on this process
 * (zeros before one). */
void wshard_run_timings(const struct wshard_run *run, struct wshard_timings *out_t);

/*
 * Executes plan into run->out_dir with every process of comm: writes the
 * rank files under temporary names, validates them, renames them, copies
 * the non-weight files and writes wshard.json last (process 0).  With
 * run->archive, each process first packs each of its ranks into
 * OUT/rank-R.tar[.zst|.gz] (that rank's files, the copied files and the
 * manifest without its "archives" key), and the manifest lists the
 * archives; run->archive_only removes the rank and copied files once they
 * are archived.  Every process returns the same result.  A failure leaves
 * no manifest and no archive.  Returns WSHARD_OK, WSHARD_EEXIST,
 * WSHARD_EBUSY, WSHARD_EIO, WSHARD_EINVAL, WSHARD_EVALIDATE, WSHARD_ENODEV
 * or WSHARD_ENOMEM.
 */
enum wshard_err wshard_convert(const struct wshard_plan *plan,
			       struct wshard_comm *comm, struct wshard_run *run,
			       struct wshard_error *err);

struct wshard_verify_opts {
	const char *out_dir;
	const char *source;		/* NULL: the manifest's; a path or repo id */
	int rank;			/* -1: every rank */
	bool quick;			/* stop after checksums and structure */
};

struct wshard_verify_result {
	/* valid on process 0 */
	uint64_t ranks, tensors, bytes;	/* verified */
	uint64_t differences;
	size_t nlines;
	char **lines;			/* "rank R: WHAT: DIFFERENCE" in rank order, after
					 * any "manifest: ..." lines; control
					 * characters shown as '?' */
};

/*
 * Verifies the output in opt->out_dir: the manifest, every file's size
 * and checksum, the strict safetensors structure against the manifest,
 * then (unless quick) the plan re-derived from the source against the
 * manifest and every output byte against the source bytes it came from.
 * When the manifest lists rank archives (convert --archive), their sizes
 * and checksums are checked too; an OUT holding the archives but none of
 * the rank files (--archive-only) is checked that far only, with quick
 * (without it: WSHARD_EINVAL, saying so).
 * Under MPI each process verifies its own ranks; process 0 receives all
 * difference lines in *out.  Returns WSHARD_OK (all match),
 * WSHARD_EMISMATCH (differences listed), WSHARD_EINVAL (OUT or SRC is not
 * what it should be), WSHARD_ENOTCACHED, WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err wshard_verify(const struct wshard_verify_opts *opt,
			      struct wshard_comm *comm,
			      struct wshard_verify_result *out,
			      struct wshard_error *err);

/* Frees what a verify result holds; accepts NULL. */
void wshard_verify_result_release(struct wshard_verify_result *res);

/* Name of the manifest in an output directory. */
#define WSHARD_MANIFEST "wshard.json"

/* ------------------------------------------------------------------ */
/* Test and benchmark hooks                                            */
/* ------------------------------------------------------------------ */

/*
 * Switches for tests and benchmarks, all off when zeroed (fault_process
 * -1).  The library reads no environment variable for them: the wshard
 * program fills them from WSHARD_FAULT, WSHARD_FAULT_PROCESS,
 * WSHARD_TEST_HOLD, WSHARD_BENCH_NO_CHECKSUMS, WSHARD_INJECT_VALIDATE and
 * WSHARD_STREAM_THREADS.
 */
struct wshard_hooks {
	/*
	 * A fault to inject, once per process: "read" (a source read
	 * fails), "write" (a write fails), "manifest" (writing the manifest
	 * fails), "kill-write", "kill-seal", "kill-manifest" (the process
	 * kills itself with SIGKILL while writing a rank file, between
	 * parts, just before the manifest).  Any fault also makes convert
	 * run one stream and one sealing thread, so that it stops at a fixed
	 * point.  NULL: none.
	 */
	const char *fault;
	int fault_process;		/* only in this process, or -1: in every one */
	/* convert waits, holding OUT's lock, up to a minute until this path
	 * no longer exists (tests of concurrency); NULL or "": no wait */
	const char *hold;
	/* convert computes no checksum at all: the benchmark's baseline
	 * (the manifest's checksums are empty, and verify refuses it) */
	bool no_checksums;
	/* the validator (host or CUDA) flips the byte at this decimal offset
	 * of all it checks from its opening (tests of the round trip); NULL
	 * or "": none */
	const char *inject_validate;
	/* threads of a one-process stream (convert, verify --source), 1
	 * to 8, in place of one per online CPU; 0: that default */
	int stream_threads;
};

/* Sets the hooks of the whole process (copied, strings borrowed); NULL
 * turns them all off. */
void wshard_hooks_set(const struct wshard_hooks *hooks);

/* ------------------------------------------------------------------ */
/* Reading a manifest                                                  */
/* ------------------------------------------------------------------ */

struct wshard_manifest_file {
	const char *name;		/* a plain name inside OUT */
	uint64_t size;
	const char *checksum;		/* hex digest */
};

struct wshard_manifest_tensor {
	const char *name;
	enum wshard_dtype dtype;
	int ndim;
	uint64_t shape[WSHARD_MAX_DIMS];
	size_t file;			/* index into the rank's files */
	uint64_t begin, end;		/* data_offsets within that file */
	const char *checksum;
};

struct wshard_manifest_rank {
	size_t nfiles;
	struct wshard_manifest_file *files;
	size_t ntensors;
	struct wshard_manifest_tensor *tensors;
	uint64_t bytes;			/* tensor data bytes (0 if not given) */
	const char *validated_by;	/* validation backend, or NULL */
};

/* One rank archive (convert --archive). */
struct wshard_manifest_archive {
	int rank;
	const char *name;		/* a plain name inside OUT */
	uint64_t size;
	const char *checksum;
};

/*
 * A wshard.json as verify and inspect read it: checked, without the
 * tensors' provenance ("sources").  Strings point into the manifest and
 * live as long as it.  NULL strings are members the file lacks.
 */
/* A source tensor the rules left out, and why ("left_out"). */
struct wshard_manifest_left_out {
	const char *name, *reason;
};

struct wshard_manifest {
	char *path;			/* OUT/wshard.json, for messages */
	int tp;
	const char *architecture, *target, *rules;
	const char *target_checked;	/* the engine build the layout was
					 * checked against ("vllm==0.32.0") */
	const char *source_path, *source_realpath;
	/* a source given as a repo id: the id, the revision asked for and
	 * the commit it resolved to (NULL otherwise) */
	const char *source_repo_id, *source_revision, *source_commit;
	size_t ncopied;
	const char **copied;		/* non-weight files copied into OUT */
	size_t nleft_out;		/* source tensors left out on purpose */
	struct wshard_manifest_left_out *left_out;
	/* the options the plan was built with: tp, target, attn_scales,
	 * max_file_size, dtype, checksum, expert_parallel, placement */
	struct wshard_options options;
	/* "parallel": under expert parallelism the placement the ranks hold
	 * ("linear", "round_robin"); NULL for a tensor-parallel layout */
	const char *expert_placement;
	size_t nranks;			/* entries of "ranks"; rank r is ranks[r] */
	struct wshard_manifest_rank *ranks;
	bool has_archives;		/* an "archives" member, even empty */
	size_t narchives;
	struct wshard_manifest_archive *archives;
};

/*
 * Reads out_dir's wshard.json and checks its layout: format and version,
 * tp, checksum algorithm, each rank's files and tensors, the archives.
 * Returns WSHARD_OK, WSHARD_EINVAL (no manifest, invalid JSON or not a
 * wshard manifest: the message says which and where), WSHARD_EIO or
 * WSHARD_ENOMEM.
 */
enum wshard_err wshard_manifest_open(struct wshard_manifest **out_m, const char *out_dir,
				     struct wshard_error *err);

/*
 * The manifest as a JSON document (without "sources"), indented by 2,
 * into a malloc'd *out_text: all of it (rank < 0), or rank's entry,
 * keeping only the tensors whose name matches the fnmatch pattern filter
 * (NULL: all).  Returns WSHARD_OK or WSHARD_ENOMEM.
 */
enum wshard_err wshard_manifest_json(const struct wshard_manifest *m, int rank,
				     const char *filter, char **out_text,
				     struct wshard_error *err);

/* Frees m; accepts NULL. */
void wshard_manifest_free(struct wshard_manifest *m);

#endif /* WSHARD_H */
