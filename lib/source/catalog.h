/*
 * catalog.h - the source stage, the first.  It takes a checkpoint: a
 * directory (or one .safetensors file), an archive of one (tar, tar.gz,
 * tar.zst, tar.xz, zip), or a repo id found in the local HuggingFace hub
 * cache.  It gives back struct wshard_catalog: the weight files, every
 * tensor with its dtype, shape and the place of its bytes in its file
 * (checked against the index's weight_map), the fields of config.json,
 * and the other files to copy; and it reads those bytes on demand.
 *
 * catalog.c owns struct wshard_catalog (lookups, freeing);
 * catalog_open.c builds it from a checkpoint (archive.c opens an archive,
 * hfcache.c finds a repo id); catalog_heads.c and catalog_index.c read
 * the headers and the index; catalog_read.c reads bytes, small files and
 * config.json; catalog_view.c is what the API shows of it, which sees
 * struct wshard_catalog as an opaque handle.  safetensors.h is the reader
 * of one weight file.
 */
#ifndef WSHARD_CATALOG_H
#define WSHARD_CATALOG_H

#include <stdbool.h>
#include <stdint.h>

#include "wshard.h"
#include "safetensors.h"

/* The config.json fields the rules use; -1 (or NULL) when absent. */
struct wshard_config {
	char *architecture;		/* architectures[0] */
	int64_t hidden_size;
	int64_t num_attention_heads;
	int64_t num_key_value_heads;	/* defaults to num_attention_heads */
	int64_t head_dim;		/* defaults to hidden / heads */
	int64_t intermediate_size;
	int64_t vocab_size;
	int64_t num_experts;		/* num_local_experts, num_experts or n_routed_experts */
	int64_t moe_intermediate_size;
	int64_t shared_expert_intermediate_size;
	int tie_word_embeddings;		/* 1 true, 0 false, -1 absent */
	void *json;			/* json_t * of the whole file, or NULL */
	void *text;			/* the object the fields above come from:
					 * json, or its text_config (multimodal
					 * checkpoints nest the text model's
					 * config there); borrowed from json */
	const void *defaults;		/* json_t * of the rules' "defaults"
					 * (borrowed), or NULL */
	int64_t tp;			/* --tp of the plan that reads it (the
					 * rules' "tp"), 0 outside a plan */
};

struct wshard_src_file {
	char *name;		/* relative to the checkpoint directory */
	char *path;		/* as opened (ARCHIVE:NAME inside an archive) */
	uint64_t size;
	struct wshard_st *st;
	long member;		/* index in the archive, -1 for a plain file */
	char *prefix;		/* put before its tensors' names, or NULL
				 * (a rules' "weight_files": catalog_add_prefixed) */
	bool prefixed;		/* its st's names carry prefix already */
};

struct wshard_archive;
struct wshard_made;

struct wshard_src_tensor {
	const char *name;		/* owned by the file's st */
	uint32_t file;			/* index into catalog files */
	const struct wshard_st_tensor *info;
	uint64_t offset;		/* absolute offset of the data in the file */
	uint64_t nbytes;
	bool unstacked;			/* read as views (one per expert): no
					 * rule matches it itself */
};

struct wshard_catalog {
	char *path;			/* as given */
	char *dir;			/* directory holding the files (or the archive) */
	struct wshard_archive *archive;	/* NULL unless SRC is an archive */
	struct wshard_hf_ref *hf;	/* NULL unless SRC is a repo id (then path
					 * is the repo id, dir its snapshot) */
	bool has_config;
	struct wshard_config config;
	size_t nfiles;
	struct wshard_src_file *files;	/* by name; archive order in an archive */
	size_t ntensors;
	struct wshard_src_tensor *tensors;	/* sorted by name */
	uint64_t tensor_bytes;		/* sum of all tensor data bytes */
	size_t nignored;
	char **ignored;		/* .safetensors files the index does not use */
	size_t nextra;
	char **extra;		/* non-weight files to copy, sorted */
	bool st_pooling;	/* sentence-transformers' modules.json names a
				 * Pooling module: vLLM serves the model with
				 * its pooling runner, no LM head (catalog_st.c) */
	size_t nviews;
	struct wshard_st_tensor *views;	/* the experts of the tensors a plan's
					 * rules read by rows ("experts_in_rows",
					 * plan_unstack.c), entries of tensors too */
	struct wshard_made *made;	/* tensors read as a plan computes them
					 * (catalog_made.c): files[nfiles] while
					 * set; NULL */
};

/*
 * catalog_made.c: fills buf with the values of source tensor i (an index
 * into tensors) as made (all its elements, in the made dtype).  Returns
 * WSHARD_OK or an error it has set.
 */
typedef enum wshard_err (*wshard_made_fill)(void *ctx, size_t i, void *buf,
					    struct wshard_error *err);

/*
 * Makes the catalog read tensors idx[0..n) (indices into tensors, their
 * shapes kept) as the values fill gives, of dtype dt: written once into a
 * file in memory, files[nfiles], into which their entries then point.
 * An earlier making is undone first.  Returns WSHARD_OK, WSHARD_EIO,
 * WSHARD_ENOMEM or fill's error.
 */
enum wshard_err wshard_catalog_make(struct wshard_catalog *cat, size_t n, const size_t *idx,
				    enum wshard_dtype dt, wshard_made_fill fill, void *ctx,
				    struct wshard_error *err);
/* Undoes wshard_catalog_make: every entry as the source has it. */
void wshard_catalog_unmake(struct wshard_catalog *cat);

/*
 * Reads len bytes at offset off (as in struct wshard_src_tensor) of source
 * file file.  Plain files and uncompressed tars: any order.  A compressed
 * archive is read front to back: offsets must not go back.  Returns
 * WSHARD_OK, WSHARD_EIO or WSHARD_EINVAL.
 */
enum wshard_err wshard_catalog_read(const struct wshard_catalog *cat, uint32_t file,
				    uint64_t off, void *buf, size_t len,
				    struct wshard_error *err);

/* False when the source can only be read front to back (compressed archive). */
bool wshard_catalog_seekable(const struct wshard_catalog *cat);

/* Reads the checkpoint's small file name (config.json) whole, NUL-terminated. */
enum wshard_err wshard_catalog_slurp(const struct wshard_catalog *cat, const char *name,
				     char **out_buf, size_t *out_len,
				     struct wshard_error *err);

/* True when the source holds the file rel (a path below its folder, or an
 * archive's member): a file beside the weights that vLLM would read. */
bool wshard_catalog_has_file(const struct wshard_catalog *cat, const char *rel);

/* Copies non-weight file extra[i] to dst, atomically (flags: WSHARD_FILE_*).
 * Returns WSHARD_OK, WSHARD_EIO... */
enum wshard_err wshard_catalog_copy_extra(const struct wshard_catalog *cat, size_t i,
					  const char *dst, unsigned flags,
					  struct wshard_error *err);

/* The tensor called name, or NULL. */
const struct wshard_src_tensor *wshard_catalog_find(
	const struct wshard_catalog *cat, const char *name);

/* Index of the tensor called name, or -1. */
long wshard_catalog_index(const struct wshard_catalog *cat, const char *name);

/*
 * catalog_read.c: a small file of the checkpoint (dir/NAME), from the
 * directory or from the archive, whole and NUL-terminated.  Returns
 * WSHARD_OK, WSHARD_EINVAL (no such entry, too large), WSHARD_EIO or
 * WSHARD_ENOMEM.
 */
enum wshard_err catalog_read_small(const struct wshard_catalog *cat, const char *path,
				   char **out, size_t *len, struct wshard_error *err);

/* catalog.c: name copied onto the end of *list (*n names).  Returns
 * WSHARD_OK or WSHARD_ENOMEM. */
enum wshard_err catalog_push_name(char ***list, size_t *n, const char *name,
				  struct wshard_error *err);

/* catalog.c: the n names of list in strcmp order. */
void catalog_sort_names(char **list, size_t n);

/*
 * catalog.c: the names of cat's weight files some glob of vLLM's loader
 * picks: in an archive, each member name member() accepts, in archive
 * order; in a folder, what entry() pushes for each top-level entry (name)
 * onto *names (*n), a subfolder's files included, in strcmp order.
 * Returns WSHARD_OK or entry()'s error, WSHARD_EIO or WSHARD_ENOMEM.
 */
typedef enum wshard_err (*catalog_entry_fn)(const struct wshard_catalog *cat, const char *name,
					     char ***names, size_t *n, struct wshard_error *err);
enum wshard_err catalog_list_names(const struct wshard_catalog *cat, bool (*member)(const char *),
				   catalog_entry_fn entry, char ***out_names, size_t *out_n,
				   struct wshard_error *err);

/* catalog.c: WSHARD_EINVAL, naming it, where a file the checkpoint names
 * leaves its directory (an absolute path, "..", a link out of it) or is
 * missing: a weight_map entry of index (the index file's path; tensor the
 * entry's tensor), or a file found by name (index and tensor NULL). */
enum wshard_err catalog_check_member(const struct wshard_catalog *cat, const char *name,
				     const char *index, const char *tensor,
				     struct wshard_error *err);

/* catalog.c: name pushed onto *names (*n) where cat has it as a regular
 * file (a catalog_entry_fn's last step). */
enum wshard_err catalog_push_file(const struct wshard_catalog *cat, const char *name,
				  char ***names, size_t *n, struct wshard_error *err);

/*
 * catalog_st.c: where cat->extra has a sentence-transformers modules.json,
 * adds the files of each module folder it names ("1_Pooling/config.json"),
 * which vLLM reads for the pooling and Dense layers.  Returns WSHARD_OK,
 * WSHARD_EINVAL or WSHARD_EIO (modules.json unreadable), WSHARD_ENOMEM.
 */
enum wshard_err catalog_st_modules(struct wshard_catalog *cat, struct wshard_error *err);

/* catalog_read.c: reads config.json at path into cat->config.  Returns
 * WSHARD_OK, WSHARD_EINVAL, WSHARD_EIO or WSHARD_ENOMEM. */
/*
 * catalog_read.c: sets c's numeric fields from c->text, with the rules'
 * defaults (c->defaults, a JSON object of integers, or NULL) for the keys
 * config.json omits, as the model class fills them in.  The plan derives
 * its own copy so; the catalog's has no defaults.
 */
void catalog_config_fields(struct wshard_config *c);

/*
 * config.json's value of key (NULL when absent): from the text model's
 * config (c->text: text_config in a multimodal config.json), else from the
 * top, else from thinker_config; a dotted key ("vision_config.hidden_size")
 * through the nested objects from each; "KEY[i]" element i of such an
 * array (a json_t *).  For the rules' expressions and defaults.
 */
void *catalog_config_key(const struct wshard_config *c, const char *key);

/* One member of an index's weight_map: a tensor's name and its file
 * (NULL when the value is no string). */
struct index_entry {
	const char *name;
	const char *file;
};

/*
 * catalog_index.c: the weight_map of the len bytes of index JSON text,
 * in file order, when the index is of the plain kind it takes: true,
 * with *out_entries (malloc'd, *out_n of them) pointing into *out_buf
 * (malloc'd, to free after them); false when jansson is to read it.
 */
bool catalog_index_fast(const char *text, size_t len, char **out_buf,
			struct index_entry **out_entries, size_t *out_n);

/*
 * The same through jansson: *out_root (to json_decref after the entries)
 * holds the strings.  Returns WSHARD_OK, WSHARD_EINVAL (not JSON, no
 * weight_map object) or WSHARD_ENOMEM.
 */
enum wshard_err catalog_index_jansson(const char *path, const char *text, size_t len,
				      void **out_root, struct index_entry **out_e,
				      size_t *out_n, struct wshard_error *err);

/* Reads the header of every weight file of a directory (not an archive)
 * into cat->files[i].st, several at a time; on failure, the first file's
 * error (the headers read stay for wshard_catalog_free). */
enum wshard_err catalog_open_heads(struct wshard_catalog *cat, struct wshard_error *err);

/*
 * Every tensor the n entries e of the index at path map is in the file
 * they name, and every tensor of cat is mapped.  Returns WSHARD_OK,
 * WSHARD_EINVAL or WSHARD_ENOMEM.
 */
enum wshard_err catalog_index_check(const struct wshard_catalog *cat, const char *path,
				    const struct index_entry *e, size_t n,
				    struct wshard_error *err);

/*
 * Opens a checkpoint: a directory with model.safetensors.index.json or a
 * single model.safetensors, one .safetensors file, or such a directory
 * packed in a .tar, .tar.gz, .tar.zst, .tar.xz or .zip (at its root or
 * under one top folder).  Validates every file strictly, the weight_map
 * against the files (no path outside the directory, no missing file or
 * tensor, no tensor in two files) and reads config.json when present.  No
 * tensor data is read.  Returns WSHARD_OK, WSHARD_EINVAL, WSHARD_EIO or
 * WSHARD_ENOMEM.
 */
enum wshard_err wshard_catalog_open(struct wshard_catalog **out_cat,
				    const char *path, struct wshard_error *err);

enum wshard_err catalog_load_config(struct wshard_catalog *cat, const char *path,
				    struct wshard_error *err);

/*
 * catalog_mistral.c: where the checkpoint has a params.json, the names of
 * its consolidated*.safetensors (Mistral's own format), sorted, in
 * *out_names (*out_n of them, 0 where none; each freed with the list).
 * Returns WSHARD_OK, WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err catalog_mistral_files(const struct wshard_catalog *cat, char ***out_names,
				      size_t *out_n, struct wshard_error *err);

/*
 * Reads params.json into cat->config as vLLM's adapt_config_dict renames
 * it (an HF config of the architecture it picks).  Returns WSHARD_OK,
 * WSHARD_EINVAL (not JSON; an architecture or quantization wshard has no
 * rules for in this format), WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err catalog_mistral_config(struct wshard_catalog *cat, struct wshard_error *err);

/*
 * catalog_subdirs.c: config.json's architectures[0] where vLLM's class for
 * it reads its weights as the *.safetensors of "[tv]*er" folders (Cosmos 3's unified
 * checkpoints), or NULL.
 */
const char *catalog_subdir_arch(const struct wshard_catalog *cat);

/*
 * The files vLLM's glob (*.safetensors in "[tv]*er" folders) finds in the checkpoint
 * (transformer/..., vision_encoder/...), sorted, in *out_names (*out_n of
 * them, 0 where none).  Returns WSHARD_OK, WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err catalog_subdir_files(const struct wshard_catalog *cat, char ***out_names,
				     size_t *out_n, struct wshard_error *err);

/*
 * catalog_subdirs.c: every top-level *.safetensors (none hidden), sorted,
 * in *out_names (*out_n of them, 0 where none): the files vLLM's default
 * loader globs where a checkpoint has no index, no model.safetensors and
 * no Mistral params.json (BAGEL-7B-MoT's ema.safetensors and
 * ae.safetensors).  Returns WSHARD_OK, WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err catalog_top_files(const struct wshard_catalog *cat, char ***out_names,
				  size_t *out_n, struct wshard_error *err);

/*
 * catalog_open.c: file name (relative to the checkpoint) added to files,
 * not opened yet.  Returns WSHARD_OK, WSHARD_EINVAL (not in the archive)
 * or WSHARD_ENOMEM.
 */
enum wshard_err catalog_add_file(struct wshard_catalog *cat, const char *name,
				 struct wshard_error *err);

/*
 * catalog_open.c: files sorted (archive order in an archive), each not
 * opened yet opened (its header read), and the tensor index made again
 * from all of them.  Returns WSHARD_OK, WSHARD_EINVAL (a bad header, a
 * tensor in two files), WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err catalog_open_files(struct wshard_catalog *cat, struct wshard_error *err);

/*
 * catalog_folder.c: the weights of the checkpoint's folder folder (one
 * name, no '/') added to cat as vLLM's loader reads a model's
 * secondary_weights of that subfolder: every folder/ *.safetensors, only
 * those folder/model.safetensors.index.json names where there is one;
 * the folder's other files (config.json...) onto extra, as
 * "folder/NAME"; with config_key, folder/config.json set under that key
 * of config.json (cat->config.json) for the rules' expressions.  Returns
 * WSHARD_OK, WSHARD_EINVAL (no such weights, no config.json, a tensor
 * also at the top level, a bad header), WSHARD_EIO or WSHARD_ENOMEM.
 */
enum wshard_err catalog_add_folder(struct wshard_catalog *cat, const char *folder,
				   const char *config_key, struct wshard_error *err);

/*
 * The n weight files a glob found (names), unless rc is an error: each
 * checked to stay inside the directory, then opened in archive order;
 * names freed either way (catalog_open.c).  Returns rc, or the first
 * error of the checks and the open.
 */
enum wshard_err catalog_open_found(struct wshard_catalog *cat, enum wshard_err rc, char **names,
				   size_t n, struct wshard_error *err);

/*
 * catalog_folder.c: every file of the checkpoint's folder folder (one
 * name, no '/'; none where it is absent) onto extra, as "folder/NAME", to
 * be copied whole: a folder vLLM reads at run time, not as the model's
 * weights.  Returns WSHARD_OK, WSHARD_EINVAL (a bad name) or WSHARD_ENOMEM.
 */
enum wshard_err catalog_copy_folder(struct wshard_catalog *cat, const char *folder,
				    struct wshard_error *err);

/*
 * catalog_folder.c: the checkpoint's top-level safetensors file file
 * added to cat with its tensors named prefix followed by their own names,
 * as vLLM's loader reads a model's secondary_weights of that file
 * (DefaultModelLoader.Source with allow_patterns_overrides [file] and a
 * prefix: Clef-Omni's joint_head.safetensors under pooler.head.).
 * Returns WSHARD_OK, WSHARD_EINVAL (no such file, the file read as the
 * weights already, a tensor's name taken, a bad header), WSHARD_EIO or
 * WSHARD_ENOMEM.
 */
enum wshard_err catalog_add_prefixed(struct wshard_catalog *cat, const char *file,
				     const char *prefix, struct wshard_error *err);

#endif /* WSHARD_CATALOG_H */
