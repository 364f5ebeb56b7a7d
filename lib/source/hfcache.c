/*
 * hfcache.c - a repo id as the source: finds ORG/NAME in the local
 * HuggingFace hub cache, where `hf download`, vLLM, SGLang and
 * transformers keep what they fetched, and resolves a branch, tag or
 * commit to its snapshot folder.  Offline: nothing is ever downloaded.
 *
 * The layout is huggingface_hub's:
 *
 *   CACHE/models--ORG--NAME/refs/main           commit hash of branch main
 *   CACHE/models--ORG--NAME/snapshots/COMMIT/F  link to ../../blobs/HASH
 *   CACHE/models--ORG--NAME/blobs/HASH          the bytes
 */
#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "wshard.h"
#include "hfcache.h"
#include "base/fileio.h"
#include "base/util.h"

#define REPO_PART_MAX 96
#define COMMIT_LEN 40
#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define INDEX_MAX (64ULL << 20)
#define REF_MAX 4096

static bool word_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* One half of ORG/NAME, n bytes: [\w.-]{1,96} from a \w to a \w. */
static bool repo_part(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > REPO_PART_MAX || !word_char(s[0]) || !word_char(s[n - 1]))
		return false;
	for (i = 0; i < n; i++)
		if (!word_char(s[i]) && s[i] != '-' && s[i] != '.')
			return false;
	return true;
}

bool wshard_hf_is_repo_id(const char *s)
{
	const char *slash = strchr(s, '/');
	size_t n = strlen(s);

	if (!slash || strchr(slash + 1, '/'))
		return false;
	if (strstr(s, "--") || strstr(s, "..") ||
	    (n >= 4 && strcmp(s + n - 4, ".git") == 0))
		return false;
	return repo_part(s, (size_t)(slash - s)) && repo_part(slash + 1, strlen(slash + 1));
}

static bool is_commit(const char *s)
{
	size_t i;

	for (i = 0; i < COMMIT_LEN; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return s[COMMIT_LEN] == '\0';
}

/* A branch or tag joined under refs/: relative, no "." or ".." part. */
static bool safe_revision(const char *s)
{
	const char *p;
	size_t n;

	if (!*s || s[0] == '/')
		return false;
	for (p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	for (p = s; *p; p += n + (p[n] == '/')) {
		n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
	}
	return true;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/*
 * os.path.expandvars(os.path.expanduser(path)), as huggingface_hub
 * applies to its cache paths: a leading "~" or "~/" is the home
 * directory; $NAME and ${NAME} are replaced when NAME is set, else kept.
 */
static char *expand(const char *path)
{
	const char *home = NULL, *p = path, *v;
	size_t cap, len = 0;
	char *out, *o;

	if (p[0] == '~' && (p[1] == '/' || p[1] == '\0')) {
		struct passwd *pw;

		home = getenv("HOME");
		if (!home && (pw = getpwuid(getuid())))
			home = pw->pw_dir;
		if (home)
			p++;
	}
	/* room for the home and every $NAME's value */
	cap = (home ? strlen(home) : 0) + strlen(p) + 1;
	for (v = p; (v = strchr(v, '$')); v++) {
		const char *s = v + 1 + (v[1] == '{');
		size_t n = 0;
		char name[256];

		while (word_char(s[n]))
			n++;
		if (n && n < sizeof(name)) {
			memcpy(name, s, n);
			name[n] = '\0';
			if (getenv(name))
				cap += strlen(getenv(name));
		}
	}
	out = o = malloc(cap);
	if (!out)
		return NULL;
	if (home) {
		len = strlen(home);
		memcpy(o, home, len);
		o += len;
	}
	while (*p) {
		const char *s = p + 1 + (p[1] == '{');
		size_t n = 0;
		char name[256];
		const char *val = NULL;

		if (*p == '$') {
			while (word_char(s[n]))
				n++;
			if (n && n < sizeof(name) && (p[1] != '{' || s[n] == '}')) {
				memcpy(name, s, n);
				name[n] = '\0';
				val = getenv(name);
			}
		}
		if (!val) {
			*o++ = *p++;
			continue;
		}
		len = strlen(val);
		memcpy(o, val, len);
		o += len;
		p = s + n + (p[1] == '{');
	}
	*o = '\0';
	return out;
}

enum wshard_err wshard_hf_cache_dir(char **out_dir, struct wshard_error *err)
{
	const char *v;
	char *raw = NULL, *dir;

	*out_dir = NULL;
	if ((v = env("HF_HUB_CACHE")) || (v = env("HUGGINGFACE_HUB_CACHE"))) {
		raw = strdup(v);
	} else if ((v = env("HF_HOME"))) {
		raw = wshard_path_join(v, "hub");
	} else {
		v = env("XDG_CACHE_HOME");
		raw = wshard_path_join(v ? v : "~/.cache", "huggingface/hub");
	}
	dir = raw ? expand(raw) : NULL;
	free(raw);
	if (!dir)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	*out_dir = dir;
	return WSHARD_OK;
}

void wshard_hf_ref_free(struct wshard_hf_ref *ref)
{
	if (!ref)
		return;
	free(ref->repo_id);
	free(ref->revision);
	free(ref->commit);
	free(ref->cache);
	free(ref->snapshot);
	free(ref);
}

/*
 * The HuggingFace cache keeps a snapshot's files as links into the same
 * repository's blob store: REPO/snapshots/REV/x -> REPO/blobs/HASH.  Such a
 * link leaves the snapshot but not the repository, and is accepted.
 */
bool wshard_hf_is_blob(const char *real_dir, const char *real_file)
{
	const char *snap = strstr(real_dir, "/snapshots/");
	size_t repo;

	if (!snap || strchr(snap + strlen("/snapshots/"), '/'))
		return false;		/* not REPO/snapshots/REV */
	repo = (size_t)(snap - real_dir);
	return strncmp(real_file, real_dir, repo) == 0 &&
	       strncmp(real_file + repo, "/blobs/", 7) == 0 &&
	       !strchr(real_file + repo + 7, '/');
}

/* CACHE/models--ORG--NAME */
static char *repo_folder(const char *cache, const char *repo_id)
{
	size_t n = strlen(cache) + strlen(repo_id) + sizeof("/models--") + 1;
	char *s = malloc(n), *p;

	if (!s)
		return NULL;
	p = s + snprintf(s, n, "%s/models--", cache);
	for (; *repo_id; repo_id++) {
		if (*repo_id == '/')
			*p++ = '-', *p++ = '-';
		else
			*p++ = *repo_id;
	}
	*p = '\0';
	return s;
}

static bool is_dir(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The commit refs/REVISION names in *out_commit, NULL when there is no such ref. */
static enum wshard_err read_ref(const struct wshard_hf_ref *ref, const char *repo,
				char **out_commit, struct wshard_error *err)
{
	char *path, *text = NULL, *refs = wshard_path_join(repo, "refs");
	size_t len = 0;
	struct stat sb;
	enum wshard_err rc;

	*out_commit = NULL;
	path = refs ? wshard_path_join(refs, ref->revision) : NULL;
	free(refs);
	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		free(path);
		return WSHARD_OK;
	}
	rc = wshard_read_file(path, REF_MAX, &text, &len, err);
	if (rc)
		goto out;
	while (len && isspace((unsigned char)text[len - 1]))
		text[--len] = '\0';
	if (!is_commit(text)) {
		rc = wshard_error_set(err, WSHARD_ENOTCACHED,
				      "'%s' does not hold a commit hash; 'hf download %s --revision %s' rewrites it",
				      path, ref->repo_id, ref->revision);
		goto out;
	}
	*out_commit = text;
	text = NULL;
out:
	free(text);
	free(path);
	return rc;
}

/* The hint at the end of every "not in the cache" message. */
static const char *download_hint(const struct wshard_hf_ref *ref, char *buf, size_t n)
{
	if (strcmp(ref->revision, WSHARD_HF_DEFAULT_REVISION) == 0)
		snprintf(buf, n, "'hf download %s' fetches it", ref->repo_id);
	else
		snprintf(buf, n, "'hf download %s --revision %s' fetches it", ref->repo_id,
			 ref->revision);
	return buf;
}

/*
 * The snapshot of an interrupted download may lack weight files: every
 * file the weight_map names must be there, or model.safetensors without
 * an index.  An index that cannot be read is left to the catalog, which
 * says why.
 */
static enum wshard_err check_weights(const struct wshard_hf_ref *ref,
				     struct wshard_error *err)
{
	char *index = wshard_path_join(ref->snapshot, INDEX_NAME), *text = NULL;
	char hint[512];
	struct wshard_error ignored = { 0 };
	json_t *root = NULL, *val;
	const char *key;
	size_t len;
	enum wshard_err rc = WSHARD_OK;

	if (!index)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (access(index, F_OK) < 0) {
		char *single = wshard_path_join(ref->snapshot, SINGLE_NAME);

		/* only config.json fetched, as AutoConfig does: no weights yet */
		if (single && access(single, F_OK) < 0)
			rc = wshard_error_set(err, WSHARD_ENOTCACHED,
					      "incomplete snapshot of '%s' at revision '%s' (commit %s) in the HuggingFace cache '%s': neither %s nor %s is there; %s",
					      ref->repo_id, ref->revision, ref->commit, ref->cache,
					      INDEX_NAME, SINGLE_NAME,
					      download_hint(ref, hint, sizeof(hint)));
		else if (!single)
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		free(single);
		goto out;
	}
	if (wshard_read_file(index, INDEX_MAX, &text, &len, &ignored))
		goto out;
	root = json_loadb(text, len, 0, NULL);
	json_object_foreach(json_object_get(root, "weight_map"), key, val) {
		const char *name = json_string_value(val);
		char *path;
		struct stat sb;

		if (!name || name[0] == '/' || strstr(name, ".."))
			continue;	/* the catalog refuses it */
		path = wshard_path_join(ref->snapshot, name);
		if (!path) {
			rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
			break;
		}
		if (stat(path, &sb) < 0) {
			rc = wshard_error_set(err, WSHARD_ENOTCACHED,
					      "incomplete snapshot of '%s' at revision '%s' (commit %s) in the HuggingFace cache '%s': '%s' is missing; %s",
					      ref->repo_id, ref->revision, ref->commit, ref->cache,
					      name, download_hint(ref, hint, sizeof(hint)));
			free(path);
			break;
		}
		free(path);
	}
out:
	json_decref(root);
	free(text);
	free(index);
	return rc;
}

/* Fills ref->commit and ref->snapshot from the repository folder repo. */
static enum wshard_err find_snapshot(struct wshard_hf_ref *ref, const char *repo,
				     struct wshard_error *err)
{
	char hint[512], *snaps;
	enum wshard_err rc;

	if (is_commit(ref->revision)) {
		ref->commit = strdup(ref->revision);
		if (!ref->commit)
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	} else {
		rc = read_ref(ref, repo, &ref->commit, err);
		if (rc)
			return rc;
		if (!ref->commit)
			return wshard_error_set(err, WSHARD_ENOTCACHED,
						"unknown revision '%s' of '%s': no '%s/refs/%s' in the HuggingFace cache, and it is not a commit hash; %s",
						ref->revision, ref->repo_id, repo, ref->revision,
						download_hint(ref, hint, sizeof(hint)));
	}
	snaps = wshard_path_join(repo, "snapshots");
	ref->snapshot = snaps ? wshard_path_join(snaps, ref->commit) : NULL;
	free(snaps);
	if (!ref->snapshot)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!is_dir(ref->snapshot)) {
		if (strcmp(ref->commit, ref->revision) == 0)
			return wshard_error_set(err, WSHARD_ENOTCACHED,
						"unknown revision '%s' of '%s': no '%s' in the HuggingFace cache; %s",
						ref->revision, ref->repo_id, ref->snapshot,
						download_hint(ref, hint, sizeof(hint)));
		return wshard_error_set(err, WSHARD_ENOTCACHED,
					"revision '%s' of '%s' is commit %s, which has no '%s' in the HuggingFace cache; %s",
					ref->revision, ref->repo_id, ref->commit, ref->snapshot,
					download_hint(ref, hint, sizeof(hint)));
	}
	return check_weights(ref, err);
}

enum wshard_err wshard_hf_resolve(struct wshard_hf_ref **out_ref, const char *repo_id,
				  const char *revision, struct wshard_error *err)
{
	struct wshard_hf_ref *ref;
	char hint[512], *repo = NULL;
	enum wshard_err rc;

	*out_ref = NULL;
	if (!revision)
		revision = WSHARD_HF_DEFAULT_REVISION;
	if (!wshard_hf_is_repo_id(repo_id))
		return wshard_error_set(err, WSHARD_EUSAGE,
					"'%s' is not a repo id of the form ORG/NAME", repo_id);
	if (!safe_revision(revision))
		return wshard_error_set(err, WSHARD_EUSAGE,
					"--revision '%s' is not a branch, tag or commit hash", revision);
	ref = calloc(1, sizeof(*ref));
	if (!ref)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	ref->repo_id = strdup(repo_id);
	ref->revision = strdup(revision);
	if (!ref->repo_id || !ref->revision) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	rc = wshard_hf_cache_dir(&ref->cache, err);
	if (rc)
		goto out;
	repo = repo_folder(ref->cache, repo_id);
	if (!repo) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	if (!is_dir(repo)) {
		rc = wshard_error_set(err, WSHARD_ENOTCACHED,
				      "cannot find '%s': no such local path, and no '%s' in the HuggingFace cache; wshard does not download: %s",
				      repo_id, repo, download_hint(ref, hint, sizeof(hint)));
		goto out;
	}
	rc = find_snapshot(ref, repo, err);
out:
	free(repo);
	if (rc) {
		wshard_hf_ref_free(ref);
		return rc;
	}
	*out_ref = ref;
	return WSHARD_OK;
}
