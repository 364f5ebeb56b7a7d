/*
 * fuzz_util.h - helpers shared by the libFuzzer harnesses in test/fuzz/:
 * a private scratch directory per fuzzing process and whole-file writes.
 * Harness code may abort (that is how a fuzzer learns of a broken
 * invariant); the library itself never does.
 */
#ifndef WSHARD_FUZZ_UTIL_H
#define WSHARD_FUZZ_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Stops the fuzzer: the harness itself cannot go on (not a finding). */
static inline void fuzz_die(const char *what)
{
	fprintf(stderr, "fuzz harness: %s: %s\n", what, strerror(errno));
	abort();
}

/* dir/name into buf. */
static inline const char *fuzz_path(char *buf, size_t len, const char *dir,
				    const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
	return buf;
}

static char fuzz_scratch_dir[4096];

static inline void fuzz_rm_rf(const char *path)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz harness: cannot remove '%s'\n", path);
}

static inline void fuzz_scratch_cleanup(void)
{
	if (fuzz_scratch_dir[0])
		fuzz_rm_rf(fuzz_scratch_dir);
}

/*
 * Scratch directories are named wshard-fuzz.PID.XXXXXX.  A harness that
 * crashes (the point of fuzzing) or times out never runs its atexit
 * handler, so each new one removes those whose process is gone.
 */
static inline void fuzz_scratch_reap(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *e;
	char path[4200];
	long pid;

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (sscanf(e->d_name, "wshard-fuzz.%ld.", &pid) != 1 || pid <= 0)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		fuzz_rm_rf(fuzz_path(path, sizeof(path), tmp, e->d_name));
	}
	closedir(d);
}

/*
 * A directory of this process's own under $TMPDIR (else /dev/shm when
 * writable: the harnesses write files on every input, and memory is ten
 * times faster than a disk; else /tmp), removed at exit.  Each harness
 * process (libFuzzer -jobs/-fork workers included) gets its own.
 */
static inline const char *fuzz_scratch(void)
{
	const char *tmp = getenv("TMPDIR");

	if (fuzz_scratch_dir[0])
		return fuzz_scratch_dir;
	if (!tmp || !*tmp)
		tmp = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
	fuzz_scratch_reap(tmp);
	snprintf(fuzz_scratch_dir, sizeof(fuzz_scratch_dir), "%s/wshard-fuzz.%ld.XXXXXX",
		 tmp, (long)getpid());
	if (!mkdtemp(fuzz_scratch_dir))
		fuzz_die("mkdtemp");
	atexit(fuzz_scratch_cleanup);
	return fuzz_scratch_dir;
}

/* Writes len bytes of data to path (created or truncated). */
static inline void fuzz_write(const char *path, const void *data, size_t len)
{
	const char *p = data;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		fuzz_die(path);
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fuzz_die(path);
		p += n;
		len -= (size_t)n;
	}
	if (close(fd) < 0)
		fuzz_die(path);
}

/* Removes path if it exists. */
static inline void fuzz_unlink(const char *path)
{
	if (unlink(path) < 0 && errno != ENOENT)
		fuzz_die(path);
}

#endif /* WSHARD_FUZZ_UTIL_H */
