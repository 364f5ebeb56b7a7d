/*
 * hfcache.h - repo ids resolved in the local HuggingFace hub cache
 * (hfcache.c) to a snapshot folder, which catalog_open.c opens
 * (wshard_catalog_open_source).  Not part of the API.
 */
#ifndef WSHARD_HFCACHE_H
#define WSHARD_HFCACHE_H

#include <stdbool.h>

#include "wshard.h"

/* The revision a repo id resolves at when none is given. */
#define WSHARD_HF_DEFAULT_REVISION "main"

/*
 * True when s has the form of a model repo id, "ORG/NAME": two names of
 * letters, digits, '_', '-' and '.', each starting and ending with a
 * letter, digit or '_', at most 96 characters each, no "--" or "..", no
 * ".git" at the end (huggingface_hub's rules, the namespace required).
 */
bool wshard_hf_is_repo_id(const char *s);

/*
 * The hub cache directory huggingface_hub uses: $HF_HUB_CACHE, else
 * $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, with
 * '~' and $VAR expanded; an empty variable counts as unset.  Returns
 * WSHARD_OK with a malloc'd *out_dir, or WSHARD_ENOMEM.
 */
enum wshard_err wshard_hf_cache_dir(char **out_dir, struct wshard_error *err);

/*
 * Resolves repo_id at revision (NULL: "main") in the hub cache, offline,
 * as huggingface_hub's snapshot_download(local_files_only=True) does: a
 * 40-hex revision is a commit, anything else names refs/REVISION.  When
 * the snapshot has a model.safetensors.index.json, every file its
 * weight_map names must be there.  Returns WSHARD_OK, WSHARD_EUSAGE
 * (repo_id or revision malformed), WSHARD_ENOTCACHED (no such repo,
 * revision or snapshot, or a weight file missing: the one-line message
 * says where it looked and that `hf download` fetches it), WSHARD_EIO or
 * WSHARD_ENOMEM.
 */
enum wshard_err wshard_hf_resolve(struct wshard_hf_ref **out_ref, const char *repo_id,
				  const char *revision, struct wshard_error *err);

/* Frees ref; accepts NULL. */
void wshard_hf_ref_free(struct wshard_hf_ref *ref);

/*
 * True when real_file (a resolved path) is a blob of the cache repository
 * whose snapshot folder real_dir is: REPO/snapshots/REV/x links to
 * REPO/blobs/HASH, leaving the snapshot but not the repository.
 */
bool wshard_hf_is_blob(const char *real_dir, const char *real_file);

#endif
