/*
 * outdir.c - convert's output directory.  OUT may hold only what wshard
 * writes; anything else means it is not an earlier wshard output, and
 * nothing in it is deleted.  A lock file keeps two converts apart.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wshard.h"
#include "base/fileio.h"
#include "outdir.h"

/* model-rank-R-part-P.safetensors, or model-pp-S-tp-R-part-P.safetensors
 * (--pp) */
static bool is_rank_file(const char *name)
{
	unsigned s, r, p;
	int n = -1;

	if (sscanf(name, "model-rank-%u-part-%u.safetensors%n", &r, &p, &n) == 2 &&
	    n == (int)strlen(name))
		return true;
	n = -1;
	return sscanf(name, "model-pp-%u-tp-%u-part-%u.safetensors%n", &s, &r, &p, &n) == 3 &&
	       n == (int)strlen(name);
}

/* rank-R.tar, rank-R.tar.zst, rank-R.tar.gz (--archive) */
static bool is_rank_archive(const char *name)
{
	unsigned r;
	int n = -1;

	if (sscanf(name, "rank-%u%n", &r, &n) != 1 || n < 0)
		return false;
	name += n;
	return !strcmp(name, ".tar") || !strcmp(name, ".tar.zst") || !strcmp(name, ".tar.gz");
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/*
 * The earlier manifest in dir, which names the files it copied; NULL
 * when there is none that reads as one (its copies then look like
 * someone else's files).
 */
static struct wshard_manifest *old_manifest(const char *dir)
{
	struct wshard_manifest *m = NULL;
	struct wshard_error err = { 0 };

	wshard_manifest_open(&m, dir, &err);
	return m;
}

/* Whether copy is name, or a file in folder name ("1_Pooling/config.json"). */
static bool names(const char *copy, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(copy, name, n) && (copy[n] == '\0' || copy[n] == '/');
}

/* True when name is one of the copies old lists, or of the list[] of n,
 * or the folder of one. */
static bool listed(const struct wshard_manifest *old, char *const *list, size_t n,
		   const char *name)
{
	size_t i;

	for (i = 0; old && i < old->ncopied; i++)
		if (names(old->copied[i], name))
			return true;
	for (i = 0; i < n; i++)
		if (names(list[i], name))
			return true;
	return false;
}

/* Entries of OUT that are no file: ".", ".." and the lock. */
static bool skipped(const char *n)
{
	return !strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, WSHARD_LOCK);
}

/*
 * OUT may hold only what wshard writes: the manifest, rank files and rank
 * archives, our temporary files and lock, and the non-weight files it
 * copies.  Counts in *out_nours the entries that are ours, in *out_nsure
 * those only wshard writes.  Returns WSHARD_OK or WSHARD_EEXIST.
 */
static enum wshard_err scan_out(DIR *d, const char *out, char *const *extra,
				size_t nextra, size_t *out_nours, size_t *out_nsure,
				struct wshard_error *err)
{
	struct wshard_manifest *old = old_manifest(out);
	struct dirent *e;
	enum wshard_err rc = WSHARD_OK;

	*out_nours = *out_nsure = 0;
	while ((e = readdir(d))) {
		const char *n = e->d_name;

		if (skipped(n))
			continue;
		if (!strcmp(n, WSHARD_MANIFEST) || is_rank_file(n) || is_rank_archive(n) ||
		    (n[0] == '.' && ends_with(n, WSHARD_TMP_SUFFIX))) {
			(*out_nours)++;
			(*out_nsure)++;
			continue;
		}
		if (listed(old, extra, nextra, n)) {
			(*out_nours)++;
			continue;
		}
		rc = wshard_error_set(err, WSHARD_EEXIST,
				      "'%s' holds '%s', which wshard did not write; not replacing it",
				      out, n);
		break;
	}
	wshard_manifest_free(old);
	return rc;
}

/* Removes the files in folder path (a copied module folder), then it. */
static enum wshard_err remove_folder(const char *path, struct wshard_error *err)
{
	DIR *d = opendir(path);
	struct dirent *e;
	enum wshard_err rc = WSHARD_OK;

	while (d && !rc && (e = readdir(d))) {
		char *f = skipped(e->d_name) ? NULL : wshard_path_join(path, e->d_name);

		if (f && unlink(f) < 0 && errno != ENOENT)
			rc = wshard_error_set(err, WSHARD_EIO, "cannot remove '%s': %s", f,
					      strerror(errno));
		free(f);
	}
	if (d)
		closedir(d);
	if (!rc && rmdir(path) < 0 && errno != ENOENT)
		rc = wshard_error_set(err, WSHARD_EIO, "cannot remove '%s': %s", path,
				      strerror(errno));
	return rc;
}

/* Removes path; a file already gone is fine, a folder goes with its files. */
static enum wshard_err remove_path(const char *path, struct wshard_error *err)
{
	struct stat sb;

	if (!path)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
		return remove_folder(path, err);
	if (unlink(path) < 0 && errno != ENOENT)
		return wshard_error_set(err, WSHARD_EIO, "cannot remove '%s': %s", path,
					strerror(errno));
	return WSHARD_OK;
}

/*
 * Removes an earlier output: the manifest first, so that from then on OUT
 * no longer looks complete, then every other entry.
 */
static enum wshard_err remove_old(DIR *d, const char *out, struct wshard_error *err)
{
	struct dirent *e;
	char *path = wshard_path_join(out, WSHARD_MANIFEST);
	enum wshard_err rc = remove_path(path, err);

	if (!rc)
		rc = wshard_fsync_dir(path, err);
	free(path);
	rewinddir(d);
	while (!rc && (e = readdir(d))) {
		if (skipped(e->d_name))
			continue;
		path = wshard_path_join(out, e->d_name);
		rc = remove_path(path, err);
		free(path);
	}
	return rc;
}

/*
 * Refuses an OUT that holds anything wshard did not write, or an earlier
 * output without force; removes that output with it.
 */
static enum wshard_err clean_out(const char *out, char *const *extra, size_t nextra,
				 bool force, struct wshard_error *err)
{
	DIR *d = opendir(out);
	size_t nours, nsure;
	enum wshard_err rc;

	if (!d)
		return wshard_error_set(err, WSHARD_EIO, "cannot open directory '%s': %s",
					out, strerror(errno));
	rc = scan_out(d, out, extra, nextra, &nours, &nsure, err);
	/* files named like the source's config.json alone are someone else's */
	if (!rc && nours && !nsure)
		rc = wshard_error_set(err, WSHARD_EEXIST,
				      "'%s' holds files but no wshard output; not replacing them",
				      out);
	if (!rc && nours && !force)
		rc = wshard_error_set(err, WSHARD_EEXIST,
				      "'%s' is not empty; pass --force to replace an earlier wshard output",
				      out);
	if (!rc && nours)
		rc = remove_old(d, out, err);
	closedir(d);
	return rc;
}

/* Process 0: creates or checks OUT, takes the lock, removes an old output. */
enum wshard_err outdir_prepare(const char *out, char *const *extra, size_t n,
			       bool force, int *out_lock_fd,
			       struct wshard_error *err)
{
	struct stat sb;
	char *lock;
	int tries;

	*out_lock_fd = -1;
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		return wshard_error_set(err, WSHARD_EIO, "cannot create '%s': %s", out,
					strerror(errno));
	if (stat(out, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return wshard_error_set(err, WSHARD_EEXIST, "'%s' exists and is not a directory",
					out);
	lock = wshard_path_join(out, WSHARD_LOCK);
	if (!lock)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	/*
	 * The lock file is removed when its holder is done, so a lock taken on
	 * a file that is no longer the one at that name (its holder removed it
	 * between our open and our flock) locks nothing: take it again.  Of two
	 * converts racing for a released OUT, exactly one gets it.
	 */
	for (tries = 0; tries < 100; tries++) {
		struct stat fsb, psb;

		*out_lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (*out_lock_fd < 0) {
			wshard_error_set(err, WSHARD_EIO, "cannot create '%s': %s", lock,
					 strerror(errno));
			free(lock);
			return WSHARD_EIO;
		}
		if (flock(*out_lock_fd, LOCK_EX | LOCK_NB) < 0) {
			close(*out_lock_fd);
			*out_lock_fd = -1;
			free(lock);
			return wshard_error_set(err, WSHARD_EBUSY,
						"'%s' is locked by another wshard convert", out);
		}
		if (fstat(*out_lock_fd, &fsb) == 0 && stat(lock, &psb) == 0 &&
		    fsb.st_ino == psb.st_ino && fsb.st_dev == psb.st_dev)
			break;
		close(*out_lock_fd);
		*out_lock_fd = -1;
	}
	free(lock);
	if (*out_lock_fd < 0)
		return wshard_error_set(err, WSHARD_EBUSY, "cannot lock '%s'", out);
	return clean_out(out, extra, n, force, err);
}

/*
 * The lock file goes when its holder is done, so OUT holds nothing of a
 * run that failed (outdir_prepare retakes a lock whose file went
 * meanwhile).
 */
void outdir_unlock(const char *out, int *lock_fd)
{
	char *lock;

	if (*lock_fd < 0)
		return;
	lock = wshard_path_join(out, WSHARD_LOCK);
	if (lock)
		unlink(lock);
	free(lock);
	close(*lock_fd);
	*lock_fd = -1;
}
