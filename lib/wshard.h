/*
 * wshard.h - the public interface of libwshard, all that cmd/ calls: read
 * a safetensors checkpoint, plan each tensor-parallel rank's tensors,
 * write per-rank files and a manifest, verify them.  The library never
 * prints, exits or aborts: it returns an enum wshard_err and a message in
 * a struct wshard_error.  out_* parameters are set on entry; every _free
 * and _release accepts NULL.  The stages' own headers are lib/STAGE/.
 */
#ifndef WSHARD_H
#define WSHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WSHARD_VERSION "0.1.0"
/* Name of the manifest in an output directory. */
#define WSHARD_MANIFEST "wshard.json"

/* ---- Errors ------------------------------------------------------- */
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

#define WSHARD_ERRMAX 2048
struct wshard_error {
	enum wshard_err code;
	char msg[WSHARD_ERRMAX];	/* lowercase, problem first, subject quoted */
};

/* Returns a short static description of code, e.g. "bad input". */
const char *wshard_strerror(enum wshard_err code);

/* Records code and a printf-style message in err (may be NULL) unless it
 * holds an error already: the first cause wins.  Returns code. */
enum wshard_err wshard_error_set(struct wshard_error *err, enum wshard_err code,
				 const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- Dtypes, checksums, sizes ------------------------------------- */
enum wshard_dtype {
	WSHARD_BOOL, WSHARD_U8, WSHARD_I8, WSHARD_I16, WSHARD_U16, WSHARD_F16,
	WSHARD_BF16, WSHARD_I32, WSHARD_U32, WSHARD_F32, WSHARD_I64, WSHARD_U64,
	WSHARD_F64, WSHARD_C64, WSHARD_F8_E5M2, WSHARD_F8_E4M3, WSHARD_F8_E8M0,
	WSHARD_F8_E4M3FNUZ, WSHARD_F8_E5M2FNUZ, WSHARD_F4, WSHARD_F6_E2M3,
	WSHARD_F6_E3M2,
	WSHARD_DTYPE_COUNT
};
#define WSHARD_MAX_DIMS 8

/* What an output tensor is to its layer's quantization (the manifest's
 * "quant"): nothing, the quantized weight, or what dequantizes it. */
enum wshard_quant_role {
	WSHARD_QUANT_NONE,
	WSHARD_QUANT_WEIGHT,		/* FP8, INT8, packed 4-bit, FP4 blocks */
	WSHARD_QUANT_SCALE,		/* weight scales, block scales */
	WSHARD_QUANT_INPUT_SCALE,	/* static activation scales */
	WSHARD_QUANT_ZERO_POINT,	/* weight zero points */
	WSHARD_QUANT_SHAPE,		/* compressed-tensors' weight_shape */
};

/* The manifest's name of role ("weight", "scale", ...; "" for none). */
const char *wshard_quant_role_name(enum wshard_quant_role role);

/* The role named name (as wshard_quant_role_name gives it).  Returns 0,
 * or -1 when no role has that name. */
int wshard_quant_role_parse(const char *name, enum wshard_quant_role *out_role);

/* Returns the safetensors name of dt ("BF16"), or "?" when out of range. */
const char *wshard_dtype_name(enum wshard_dtype dt);
/* Writes "[3, 4]" for shape into buf (cut short to fit); returns buf. */
const char *wshard_format_shape(char *buf, size_t size, const uint64_t *shape, int ndim);

enum wshard_checksum {
	WSHARD_CK_XXH3 = 0,	/* XXH3-64, "xxh3-64" */
	WSHARD_CK_SHA256 = 1,	/* SHA-256, "sha256" */
	WSHARD_CK_CRC64 = 2,	/* CRC-64/NVME, "crc64-nvme" (convert's default) */
};

/* Parses a checksum algorithm name.  Returns 0, or -1 if unknown. */
int wshard_checksum_parse(const char *name, enum wshard_checksum *out_ck);
/* Parses a size: "5GiB", "256M" (K, KiB: 1024), "4KB" (1000), "4096".
 * Returns 0, or -1 on a malformed or overflowing size. */
int wshard_parse_size(const char *s, uint64_t *out_bytes);
/* Writes a size for people into buf ("512 B", "1.50 GiB"); returns buf. */
const char *wshard_format_bytes(uint64_t n, char *buf, size_t len);

/* ---- Checkpoint catalog ------------------------------------------- */
/* An opened checkpoint: its files, tensors and config.json. */
struct wshard_catalog;

/* A repo id resolved in the local HuggingFace hub cache (never downloaded). */
struct wshard_hf_ref {
	char *repo_id;		/* "ORG/NAME" */
	char *revision;		/* as asked: a branch or tag in refs/, or a commit */
	char *commit;		/* the commit hash it resolved to */
	char *cache;		/* the hub cache looked in */
	char *snapshot;		/* CACHE/models--ORG--NAME/snapshots/COMMIT */
};

/* What a catalog holds, as a whole.  Strings live as long as the catalog. */
struct wshard_catalog_info {
	const char *path;		/* as given to open */
	bool has_config;		/* config.json was found */
	const char *architecture;	/* its architectures[0], or NULL */
	const char *torch_dtype;	/* its torch_dtype (or dtype), or NULL */
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

/* Opens src, a local checkpoint (directory, .safetensors file, or .tar*
 * or .zip of a directory) if it exists, else a repo id in the HuggingFace
 * hub cache at revision (NULL: "main"); checks every file, reads no
 * tensor data.  Returns WSHARD_OK, WSHARD_EUSAGE (revision with a path,
 * bad repo id), WSHARD_EINVAL, WSHARD_ENOTCACHED, WSHARD_EIO or
 * WSHARD_ENOMEM. */
enum wshard_err wshard_catalog_open_source(struct wshard_catalog **out_cat,
					   const char *src, const char *revision,
					   struct wshard_error *err);

/* A check of config.json alone, run before the index and headers are
 * read: fn sees a catalog with no files or tensors yet, and its error
 * ends the open.  Skipped without a readable config.json. */
struct wshard_precheck {
	enum wshard_err (*fn)(const struct wshard_catalog *cat, void *ctx,
			      struct wshard_error *err);
	void *ctx;
};

/* wshard_catalog_open_source with check (NULL: none).  Returns as it
 * does, or check's error. */
enum wshard_err wshard_catalog_open_source_checked(struct wshard_catalog **out_cat,
						   const char *src, const char *revision,
						   const struct wshard_precheck *check,
						   struct wshard_error *err);

/* cat as a JSON document (inspect --json), indented by 2, into a malloc'd
 * *out_text, listing the tensors whose name matches the fnmatch pattern
 * filter (NULL: all).  Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err wshard_catalog_json(const struct wshard_catalog *cat, const char *filter,
				    char **out_text, struct wshard_error *err);

/* Fills *out_info with what cat holds. */
void wshard_catalog_info(const struct wshard_catalog *cat,
			 struct wshard_catalog_info *out_info);
/* Fills *out_t with tensor i of cat (i < ntensors; sorted by name). */
void wshard_catalog_tensor(const struct wshard_catalog *cat, size_t i,
			   struct wshard_tensor_info *out_t);
/* Frees cat. */
void wshard_catalog_free(struct wshard_catalog *cat);

/* ---- Rules -------------------------------------------------------- */
/* How the tensors of an architecture are cut, fused and renamed. */
struct wshard_rules;

/* Loads the built-in rules of a config.json architecture.  Returns
 * WSHARD_OK, WSHARD_EINVAL (unknown: the message counts the known and
 * names those that begin as architecture does) or WSHARD_ENOMEM. */
enum wshard_err wshard_rules_builtin(struct wshard_rules **out_rules,
				     const char *architecture, struct wshard_error *err);

/* Reads and parses the rules file at path.  Returns WSHARD_OK,
 * WSHARD_EINVAL, WSHARD_EIO or WSHARD_ENOMEM. */
enum wshard_err wshard_rules_load(struct wshard_rules **out_rules, const char *path,
				  struct wshard_error *err);

/* Checks that rules with an "architectures" list name architecture.
 * Returns WSHARD_OK or WSHARD_EINVAL. */
enum wshard_err wshard_rules_check_arch(const struct wshard_rules *rules,
					const char *architecture,
					struct wshard_error *err);
/* Frees rules. */
void wshard_rules_free(struct wshard_rules *rules);

/* Adds to cat (opened, not yet planned) the weight folders rules name
 * ("weight_folders": weights vLLM's loader reads from a folder beside the
 * top level's), their tensors, their other files to copy and their
 * config.json where the rules read it; the folders to copy
 * ("copy_folders"); and the top-level files whose tensors vLLM reads under
 * a prefix ("weight_files"), so named.  Returns WSHARD_OK, WSHARD_EINVAL
 * (a folder or file missing or unreadable as vLLM would read it),
 * WSHARD_EIO or WSHARD_ENOMEM. */
enum wshard_err wshard_rules_add_folders(const struct wshard_rules *rules,
					 struct wshard_catalog *cat, struct wshard_error *err);

/* ---- Plan --------------------------------------------------------- */
/* vLLM's expert_placement_strategy.  Values are never renumbered. */
enum wshard_placement {
	WSHARD_PLACE_LINEAR = 0,	/* a contiguous block per rank */
	WSHARD_PLACE_ROUND_ROBIN = 1,	/* every N-th expert */
};

/* Returns "linear" or "round_robin"; NULL for another value. */
const char *wshard_placement_name(enum wshard_placement p);
/* Parses name into *out_p.  Returns 0, or -1 for an unknown name. */
int wshard_placement_parse(const char *name, enum wshard_placement *out_p);

struct wshard_options {
	int tp;				/* tensor-parallel size, >= 1 */
	int pp;				/* pipeline stages, >= 1 */
	/* decoder layers per stage, pp of them (--pp-layers, vLLM's
	 * VLLM_PP_LAYER_PARTITION), or NULL: vLLM's default split */
	const int *pp_layers;
	const char *target;		/* "vllm@0.32"; "vllm" is the newest */
	bool attn_scales;		/* write attn._k_scale & co. */
	uint64_t max_file_size;		/* bytes of data per part */
	uint64_t max_memory;		/* tensor-data buffer budget */
	enum wshard_checksum checksum;
	bool has_dtype;			/* convert floating weights */
	enum wshard_dtype dtype;
	bool expert_parallel;		/* whole experts per rank (EP = tp) */
	enum wshard_placement placement;	/* as requested (--expert-placement) */
	/* the architecture to convert as (--architecture: a speculative
	 * draft that rides in the checkpoint, as vLLM's speculative_config
	 * builds it), or NULL: config.json's architectures[0] */
	const char *architecture;
};

/* Fills opt with the defaults: tp 1, pp 1, "vllm@0.32", attn scales, 5 GiB
 * parts, 64 MiB of memory, crc64-nvme. */
void wshard_options_init(struct wshard_options *opt);

/* How every tensor is cut and fused for each rank, laid out into files. */
struct wshard_plan;
/* What a plan holds, as a whole. */
struct wshard_plan_info {
	int tp;				/* ranks of a stage */
	int pp;				/* stages */
	size_t nfiles;			/* rank files, over all ranks */
};

/* The checks of wshard_plan_build that config.json alone decides (tp
 * against the heads), for a wshard_precheck.  Returns WSHARD_OK or
 * WSHARD_EINVAL, with the plan's message. */
enum wshard_err wshard_plan_check_config(const struct wshard_catalog *cat,
					 const struct wshard_rules *rules,
					 const struct wshard_options *opt,
					 struct wshard_error *err);

/* Plans the conversion of cat (which must outlive the plan), no I/O:
 * every source tensor consumed by one rule or skipped, every split
 * dividing, shapes as config.json says.  Returns WSHARD_OK, WSHARD_EINVAL
 * (what does not fit named), WSHARD_EUSAGE (bad option) or WSHARD_ENOMEM. */
enum wshard_err wshard_plan_build(struct wshard_plan **out_plan,
				  const struct wshard_catalog *cat,
				  const struct wshard_rules *rules,
				  const struct wshard_options *opt,
				  struct wshard_error *err);

/* Fills *out_info with what plan holds. */
void wshard_plan_info(const struct wshard_plan *plan, struct wshard_plan_info *out_info);
/* Frees plan. */
void wshard_plan_free(struct wshard_plan *plan);

/* ---- Processes (MPI or one process) ------------------------------- */
struct wshard_comm;

/* Joins the MPI job when started by mpirun, else makes a one-process
 * communicator that never touches MPI.  Returns WSHARD_OK or WSHARD_EIO. */
enum wshard_err wshard_comm_init(struct wshard_comm **out_comm, int *argc, char ***argv,
				 struct wshard_error *err);

/* Returns this process's index, 0-based. */
int wshard_comm_rank(const struct wshard_comm *comm);
/* Returns true when MPI is in use. */
bool wshard_comm_is_mpi(const struct wshard_comm *comm);

/* Every process passes its error; all get the lowest process's non-OK one
 * in err.  Returns its code (WSHARD_OK when all succeeded). */
enum wshard_err wshard_comm_agree(struct wshard_comm *comm, struct wshard_error *err);
/* Finalizes MPI if used and frees comm. */
void wshard_comm_free(struct wshard_comm *comm);

/* ---- Convert ------------------------------------------------------ */
/* How the written bytes are read back and compared (--validate). */
enum wshard_validate_mode {
	WSHARD_VALIDATE_AUTO, WSHARD_VALIDATE_GPU, WSHARD_VALIDATE_HOST, WSHARD_VALIDATE_OFF,
};

/* Archives convert writes beside (or instead of) the rank files. */
enum wshard_archive_fmt {
	WSHARD_ARCHIVE_NONE = 0,
	WSHARD_ARCHIVE_TAR = 1,		/* OUT/rank-R.tar */
	WSHARD_ARCHIVE_TAR_ZST = 2,	/* OUT/rank-R.tar.zst */
	WSHARD_ARCHIVE_TAR_GZ = 3,	/* OUT/rank-R.tar.gz */
};

/* What wshard_convert would write for plan (--dry-run) into a malloc'd
 * *out_text: each rank, its archive (archive, archive_only), its tensors
 * and their pieces.  Returns WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err wshard_plan_text(const struct wshard_plan *plan,
				 enum wshard_archive_fmt archive, bool archive_only,
				 char **out_text, struct wshard_error *err);

/* Bytes done of total in phase on this process: "writing" (read, validate,
 * write), then "sealing" (checksum, sync, rename), each over one total. */
typedef void (*wshard_progress_fn)(void *ctx, const char *phase, uint64_t done, uint64_t total);

struct wshard_run_state;
struct wshard_run {
	/* in */
	const char *out_dir;
	bool force;			/* replace an existing output */
	enum wshard_validate_mode validate;
	wshard_progress_fn progress;	/* NULL: none */
	void *progress_ctx;
	enum wshard_archive_fmt archive;	/* one archive per rank, or NONE */
	bool archive_only;		/* then only the archives and the manifest stay */
	bool no_sync;			/* files renamed into place without fsync */
	/* out (valid on process 0 after a successful run) */
	uint64_t bytes_read;		/* summed over processes */
	uint64_t bytes_written;		/* summed over processes */
	uint64_t bytes_validated;
	/* of them, written before the validator was ready and read back */
	uint64_t bytes_validated_late;
	char validate_backend[128];	/* "host", "cuda:0 (...)", "off" */
	char notice[256];		/* e.g. the auto fall-back reason */
	int nprocs;
	uint64_t archive_bytes;		/* size of all the archives */
	struct wshard_run_state *state;	/* the library's */
};

/* Where this process's time in wshard_convert went. */
struct wshard_timings {
	double stream_seconds;		/* reading, validating, writing */
	double seal_seconds;		/* what was left of sealing after */
	double seal_cpu_seconds;	/* CPU time of the sealing threads */
};

/* Optional: starts what run->validate needs (CUDA) in a background
 * thread, beside planning; wshard_convert reports its failures. */
void wshard_run_prepare(struct wshard_run *run, const struct wshard_comm *comm);

/* Writes plan into run->out_dir with every process of comm: rank files
 * validated and renamed into place, non-weight files copied, archives,
 * wshard.json last (none on failure).  Every process returns the same:
 * WSHARD_OK, WSHARD_EEXIST, WSHARD_EBUSY, WSHARD_EIO, WSHARD_EINVAL,
 * WSHARD_EVALIDATE, WSHARD_ENODEV or WSHARD_ENOMEM. */
enum wshard_err wshard_convert(const struct wshard_plan *plan, struct wshard_comm *comm,
			       struct wshard_run *run, struct wshard_error *err);

/* Fills *out_t with this process's timings of run (zeros before a convert). */
void wshard_run_timings(const struct wshard_run *run, struct wshard_timings *out_t);
/* Releases what run owns, waiting for what wshard_run_prepare started. */
void wshard_run_release(struct wshard_run *run);

/* ---- Verify ------------------------------------------------------- */
struct wshard_verify_opts {
	const char *out_dir;
	const char *source;		/* NULL: the manifest's; a path or repo id */
	int rank;			/* -1: every rank */
	bool quick;			/* stop after checksums and structure */
};

struct wshard_verify_result {	/* valid on process 0 */
	uint64_t ranks, tensors, bytes;	/* verified */
	uint64_t differences;
	size_t nlines;
	char **lines;			/* "rank R: WHAT: DIFFERENCE", rank order */
};

/* Verifies opt->out_dir: the manifest, every file's (and archive's) size
 * and checksum, the structure, then unless quick every byte against the
 * source, with the plan re-derived (--archive-only output: quick only).
 * Under MPI each process checks its ranks; process 0 gets all lines in
 * *out.  Returns WSHARD_OK, WSHARD_EMISMATCH (differences listed),
 * WSHARD_EINVAL, WSHARD_ENOTCACHED, WSHARD_EIO or WSHARD_ENOMEM. */
enum wshard_err wshard_verify(const struct wshard_verify_opts *opt,
			      struct wshard_comm *comm, struct wshard_verify_result *out,
			      struct wshard_error *err);
/* Frees what res holds. */
void wshard_verify_result_release(struct wshard_verify_result *res);

/* ---- Reading a manifest ------------------------------------------- */
/* A wshard.json as read back, without "sources".  Strings live as long
 * as the manifest; NULL strings are members the file lacks. */
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
	enum wshard_quant_role quant;	/* "quant", WSHARD_QUANT_NONE if absent */
};
struct wshard_manifest_rank {
	size_t nfiles;
	struct wshard_manifest_file *files;
	size_t ntensors;
	struct wshard_manifest_tensor *tensors;
	uint64_t bytes;			/* tensor data bytes (0 if not given) */
	const char *validated_by;	/* validation backend, or NULL */
	int stage, tp_rank;		/* rank = stage * tp + tp_rank */
};
struct wshard_manifest_archive {
	int rank;
	const char *name;		/* a plain name inside OUT */
	uint64_t size;
	const char *checksum;
};
struct wshard_manifest_left_out {
	const char *name, *reason;	/* left out by the rules, and why */
};

struct wshard_manifest {
	char *path;			/* OUT/wshard.json, for messages */
	int tp;
	int pp;				/* pipeline stages (1: none) */
	int *pp_layers;			/* decoder layers per stage, or NULL */
	const char *architecture, *target, *rules;
	const char *target_checked;	/* the engine build checked ("vllm==0.32.0") */
	const char *source_path, *source_realpath;
	/* a source given as a repo id: the id, revision asked, commit */
	const char *source_repo_id, *source_revision, *source_commit;
	size_t ncopied;
	const char **copied;		/* non-weight files copied into OUT */
	size_t nleft_out;
	struct wshard_manifest_left_out *left_out;
	struct wshard_options options;	/* those the plan was built with */
	const char *expert_placement;	/* the ranks' (EP only), else NULL */
	/* "parallel"'s "experts": 1, some tensor laid out by expert; 0,
	 * none (expert parallelism leaves the layout as it is); -1, not
	 * recorded (an output written before the field) */
	int experts;
	/* the source's quantization_config ("quantization"): its
	 * quant_method and compressed-tensors' format, or NULL */
	const char *quant_method, *quant_format;
	size_t nranks;			/* rank r is ranks[r] */
	struct wshard_manifest_rank *ranks;
	bool has_archives;		/* an "archives" member, even empty */
	size_t narchives;
	struct wshard_manifest_archive *archives;
};

/* Reads out_dir's wshard.json and checks its layout.  Returns WSHARD_OK,
 * WSHARD_EINVAL (missing, not JSON, not valid), WSHARD_EIO or WSHARD_ENOMEM. */
enum wshard_err wshard_manifest_open(struct wshard_manifest **out_m, const char *out_dir,
				     struct wshard_error *err);

/* m as a JSON document without "sources", indented by 2, into a malloc'd
 * *out_text: all of it (rank < 0) or rank's entry, with the tensors whose
 * name matches the fnmatch pattern filter (NULL: all).  Returns WSHARD_OK
 * or WSHARD_ENOMEM. */
enum wshard_err wshard_manifest_json(const struct wshard_manifest *m, int rank,
				     const char *filter, char **out_text,
				     struct wshard_error *err);
/* Frees m. */
void wshard_manifest_free(struct wshard_manifest *m);

/* ---- Loading a rank into an engine -------------------------------- */
/* What the engine worker that loads is running (the vLLM plugin fills it). */
struct wshard_load_want {
	const char *engine;		/* "vllm==0.32.0"; NULL: not checked */
	int tp, pp;			/* tensor- and pipeline-parallel sizes */
	bool expert_parallel;
	const char *expert_placement;	/* "linear", "round_robin"; NULL: not checked */
	int rank;			/* the worker's tensor-parallel rank */
	bool no_checksums;		/* read without checking the tensors' sums */
	int stage;			/* the worker's pipeline stage (pp > 1) */
};
struct wshard_load;

/* Opens out_dir's manifest for rank want->rank (of stage want->stage)
 * and refuses an output made
 * for another engine release or layout, naming both.  Returns WSHARD_OK,
 * WSHARD_EINVAL, WSHARD_EIO or WSHARD_ENOMEM. */
enum wshard_err wshard_load_open(struct wshard_load **out_l, const char *out_dir,
				 const struct wshard_load_want *want,
				 struct wshard_error *err);
/* The number of tensors of the rank, in file order. */
size_t wshard_load_count(const struct wshard_load *l);
/* Tensor i's name, dtype ("BF16"), ndim and shape (WSHARD_MAX_DIMS
 * values); returns its size in bytes.  Strings live as long as l. */
uint64_t wshard_load_info(const struct wshard_load *l, size_t i, const char **out_name,
			  const char **out_dtype, int *out_ndim, uint64_t *out_shape);
/* The bytes of the rank's files, as wshard.json gives them: what a
 * prefetch puts in the page cache. */
uint64_t wshard_load_bytes(const struct wshard_load *l);
/* Where tensor i's bytes go: host memory of at least its size (NULL for
 * an empty tensor). */
void wshard_load_dest(struct wshard_load *l, size_t i, void *dst);
/* Where tensor i's bytes go in device memory instead: device_ptr, at
 * least its size (NULL for an empty tensor), on CUDA device device (an
 * index among the visible ones, as torch's device.index; every device
 * destination of l on the same one).  A pointer of the device's primary
 * context (PyTorch's, cudaMalloc's) is valid.  wshard_load_run stages
 * the bytes in pinned host memory and copies them; a build without CUDA
 * fails there (see wshard_load_has_device). */
void wshard_load_dest_device(struct wshard_load *l, size_t i, int device,
			     void *device_ptr);
/* Returns 1 when wshard_load_dest_device can be used: libwshard was built
 * with CUDA and the CUDA runtime sees a device; else 0. */
int wshard_load_has_device(void);
/* Has the kernel read the rank's files into the page cache, a few MiB
 * queued at a time, and returns once the last are queued.  An engine
 * calls it on a thread of its own while it builds the model, so that a
 * cold load's reads overlap the model's construction; it reads only l's
 * file list, so it may run beside wshard_load_info, _dest and _run.
 * Returns WSHARD_OK, WSHARD_EIO (a file cannot be opened) or
 * WSHARD_ENOMEM. */
enum wshard_err wshard_load_prefetch(const struct wshard_load *l, struct wshard_error *err);
/* Once per l: checks each file's size and header against the manifest,
 * then reads every tensor into its destination with threads (0: 8, or
 * with device destinations one per CPU, 8 to 16) and checks it against its
 * checksum (unless want->no_checksums).  Device destinations are read by
 * the same threads into a few pinned buffers each (kept for the
 * process's later runs) and copied from there while the threads read
 * on; no copy is running when it returns, whatever it returns.  A
 * failure names the file and tensor (and the CUDA call); the
 * destinations' contents are then undefined.  Returns WSHARD_OK,
 * WSHARD_EMISMATCH (a size, header or checksum differs), WSHARD_EINVAL,
 * WSHARD_EUSAGE (a destination missing, device destinations on two
 * devices, or a second run), WSHARD_ENODEV (a device destination, and a
 * build without CUDA or no usable device), WSHARD_EIO (a CUDA call too)
 * or WSHARD_ENOMEM. */
enum wshard_err wshard_load_run(struct wshard_load *l, int threads,
				struct wshard_error *err);
/* Closes the files and frees l; accepts NULL. */
void wshard_load_free(struct wshard_load *l);

/* ---- Test and benchmark hooks ------------------------------------- */
/* Switches for tests and benchmarks, off when zeroed (fault_process -1);
 * the wshard program fills them from WSHARD_* environment variables. */
struct wshard_hooks {
	/* a fault once per process: "read", "write", "manifest" fail that
	 * step; "kill-write", "kill-seal", "kill-manifest" SIGKILL there */
	const char *fault;
	int fault_process;		/* only in this process; -1: every one */
	const char *hold;		/* convert waits while this path exists */
	bool no_checksums;		/* none computed (benchmark baseline) */
	const char *inject_validate;	/* validator flips the byte at this offset */
	/* checks wait until this many bytes are written, then read them back */
	const char *validate_late;
	int stream_threads;		/* 1 to 8; 0: one per online CPU */
};

/* Sets the process's hooks (copied, strings borrowed); NULL: all off. */
void wshard_hooks_set(const struct wshard_hooks *hooks);

#endif /* WSHARD_H */
