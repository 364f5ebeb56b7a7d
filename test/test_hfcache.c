/*
 * test_hfcache.c - repo ids in the HuggingFace hub cache: which strings
 * are repo ids, which directory is the cache for each set of variables
 * (as huggingface_hub's constants choose it), and resolution of a
 * branch, a commit and the bad cases in a cache laid out by hand (no
 * weight files needed: an index that names none).  t-hfcache.sh covers
 * caches written by huggingface_hub itself and whole conversions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "wshard.h"
#include "base/error.h"
#include "source/hfcache.h"
#include "test_util.h"

#define COMMIT "0123456789abcdef0123456789abcdef01234567"

static const char *const cache_vars[] = {
	"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
};

static void clear_vars(void)
{
	size_t i;

	for (i = 0; i < sizeof(cache_vars) / sizeof(cache_vars[0]); i++)
		unsetenv(cache_vars[i]);
}

static char *cache_dir(void)
{
	struct wshard_error err = { 0 };
	char *dir = NULL;

	cr_assert_eq(wshard_hf_cache_dir(&dir, &err), WSHARD_OK, "%s", err.msg);
	return dir;
}

Test(hfcache, repo_ids)
{
	static const char *const good[] = {
		"acme/tiny", "Qwen/Qwen2.5-0.5B", "meta-llama/Llama-3.1-8B", "a/b",
		"org_1/name.v2", "_x/y_",
	};
	static const char *const bad[] = {
		"tiny", "/abs/path", "./acme/tiny", "acme/tiny/extra", "acme//tiny",
		"acme/", "/tiny", "-acme/tiny", "acme/tiny-", "acme/.tiny", "acme/ti--ny",
		"acme/ti..ny", "acme/tiny.git", "acme/ti ny", "acme/ti:ny", "",
	};
	char longname[120];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_expect(wshard_hf_is_repo_id(good[i]), "'%s' should be a repo id", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect(!wshard_hf_is_repo_id(bad[i]), "'%s' should not be a repo id", bad[i]);
	memset(longname, 'a', sizeof(longname));
	memcpy(longname, "o/", 2);
	longname[2 + 96] = '\0';
	cr_expect(wshard_hf_is_repo_id(longname), "96 characters are allowed");
	longname[2 + 96] = 'a';
	longname[2 + 97] = '\0';
	cr_expect(!wshard_hf_is_repo_id(longname), "97 characters are too many");
}

/* cache_dir() is want (an expectation: the test goes on). */
static void expect_cache_dir(const char *want)
{
	char *d = cache_dir();

	cr_expect_str_eq(d, want);
	free(d);
}

Test(hfcache, cache_dir_order)
{
	clear_vars();
	setenv("HOME", "/h", 1);
	expect_cache_dir("/h/.cache/huggingface/hub");
	setenv("XDG_CACHE_HOME", "/x", 1);
	expect_cache_dir("/x/huggingface/hub");
	setenv("HF_HOME", "~/hf", 1);
	expect_cache_dir("/h/hf/hub");
	setenv("HUGGINGFACE_HUB_CACHE", "/legacy", 1);
	expect_cache_dir("/legacy");
	setenv("HF_HUB_CACHE", "$HOME/c/${HOME}/$NOT_SET_ANYWHERE", 1);
	unsetenv("NOT_SET_ANYWHERE");
	expect_cache_dir("/h/c//h/$NOT_SET_ANYWHERE");
	setenv("HF_HUB_CACHE", "", 1);	/* empty: unset */
	expect_cache_dir("/legacy");
	clear_vars();
}

/* A cache in a temporary folder, HF_HUB_CACHE set to it. */
static char *make_cache(void)
{
	const char *t = getenv("TMPDIR");
	char *dir = fmt("%s/wshard-hf.XXXXXX", t && *t ? t : "/tmp");
	char *snap, *p;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	clear_vars();
	setenv("HF_HUB_CACHE", dir, 1);
	snap = fmt("%s/models--acme--tiny/snapshots/%s", dir, COMMIT);
	p = fmt("mkdir -p '%s' '%s/models--acme--tiny/refs'", snap, dir);
	cr_assert_eq(system(p), 0);
	free(p);
	p = fmt("%s/models--acme--tiny/refs/main", dir);
	f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs(COMMIT "\n", f);
	fclose(f);
	free(p);
	p = fmt("%s/model.safetensors.index.json", snap);
	f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs("{\"weight_map\": {}}", f);
	fclose(f);
	free(p);
	free(snap);
	return dir;
}

Test(hfcache, resolve)
{
	struct wshard_error err = { 0 };
	struct wshard_hf_ref *ref = NULL;
	char *dir = make_cache(), *snap = fmt("%s/models--acme--tiny/snapshots/%s", dir, COMMIT);
	static const char *const revs[] = { NULL, "main", COMMIT };
	size_t i;

	for (i = 0; i < 3; i++) {
		wshard_error_clear(&err);
		cr_assert_eq(wshard_hf_resolve(&ref, "acme/tiny", revs[i], &err), WSHARD_OK,
			     "%s", err.msg);
		cr_expect_str_eq(ref->repo_id, "acme/tiny");
		cr_expect_str_eq(ref->revision, revs[i] ? revs[i] : "main");
		cr_expect_str_eq(ref->commit, COMMIT);
		cr_expect_str_eq(ref->cache, dir);
		cr_expect_str_eq(ref->snapshot, snap);
		wshard_hf_ref_free(ref);
	}
	remove_tree(dir);
	clear_vars();
	free(snap);
	free(dir);
}

Test(hfcache, refused)
{
	static const struct {
		const char *repo, *rev;
		enum wshard_err code;
		const char *says;
	} cases[] = {
		{ "acme/nope", NULL, WSHARD_ENOTCACHED, "hf download acme/nope'" },
		{ "acme/tiny", "v9", WSHARD_ENOTCACHED, "refs/v9" },
		{ "acme/tiny", "ffffffffffffffffffffffffffffffffffffffff", WSHARD_ENOTCACHED,
		  "snapshots/ffffffffffffffffffffffffffffffffffffffff" },
		{ "acme/tiny", "../../etc", WSHARD_EUSAGE, "--revision '../../etc'" },
		{ "acme/tiny", "/abs", WSHARD_EUSAGE, "--revision '/abs'" },
		{ "acme/tiny", "", WSHARD_EUSAGE, "--revision ''" },
		{ "tiny", NULL, WSHARD_EUSAGE, "'tiny' is not a repo id" },
	};
	struct wshard_error err;
	struct wshard_hf_ref *ref;
	char *dir = make_cache();
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		wshard_error_clear(&err);
		ref = (struct wshard_hf_ref *)1;
		cr_expect_eq(wshard_hf_resolve(&ref, cases[i].repo, cases[i].rev, &err),
			     cases[i].code, "%s@%s: %s", cases[i].repo,
			     cases[i].rev ? cases[i].rev : "-", err.msg);
		cr_expect_null(ref);
		cr_expect(strstr(err.msg, cases[i].says), "'%s' lacks '%s'", err.msg,
			  cases[i].says);
		cr_expect(!strchr(err.msg, '\n'));
	}
	remove_tree(dir);
	clear_vars();
	free(dir);
}
