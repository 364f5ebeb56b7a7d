/*
 * test_validate.c - the round-trip validator: the host backend's round
 * trip and fault detection, the backend choice on a machine without a
 * usable GPU (the checksum both backends share: test_validate_sum.c).  No
 * test needs a GPU; where one is usable (a CUDA build on a GPU machine)
 * the GPU tests check the CUDA backend instead of its absence.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "base/validate.h"
#include "validate_sum.h"
#include "validate_sum_host.h"
#include "test_util.h"

#define CHUNK 4096
#define WHAT "rank 1 tensor 'x'"

/* The hooks' inject_validate, as the wshard program sets it from
 * WSHARD_INJECT_VALIDATE; NULL: off. */
static void inject(const char *offset)
{
	struct wshard_hooks h = { .fault_process = -1, .inject_validate = offset };

	wshard_hooks_set(&h);
}

static void clear_hooks(void)
{
	wshard_hooks_set(NULL);
}

TestSuite(validate, .init = clear_hooks);

static struct wshard_validator *open_mode(enum wshard_validate_mode mode,
					  size_t chunk)
{
	struct wshard_error err = { WSHARD_OK, "" };
	struct wshard_validator *v = NULL;
	enum wshard_err rc;

	rc = wshard_validator_open(&v, mode, 0, chunk, NULL, 0, &err);
	cr_assert_eq(rc, WSHARD_OK, "open: %d %s", rc, err.msg);
	cr_assert_not_null(v);
	return v;
}

/* Checks len bytes of buf and expects WSHARD_OK, also from the flush (the
 * GPU backend reports a batched check's difference late). */
static void expect_ok(struct wshard_validator *v, const void *buf, size_t len,
		      uint64_t base)
{
	struct wshard_error err = { WSHARD_OK, "" };
	enum wshard_err rc = wshard_validator_check(v, buf, len, WHAT, base, &err);

	if (rc == WSHARD_OK)
		rc = wshard_validator_flush(v, &err);

	cr_assert_eq(rc, WSHARD_OK, "check of %zu bytes: %d %s", len, rc,
		     err.msg);
	cr_assert_eq(err.code, WSHARD_OK);
}

/* Checks len bytes of buf and expects a changed byte at absolute at,
 * from the check or the flush that follows it. */
static void expect_changed(struct wshard_validator *v, const void *buf,
			   size_t len, uint64_t base, uint64_t at)
{
	struct wshard_error err = { WSHARD_OK, "" };
	enum wshard_err rc = wshard_validator_check(v, buf, len, WHAT, base, &err);
	char want[128];

	if (rc == WSHARD_OK)
		rc = wshard_validator_flush(v, &err);

	snprintf(want, sizeof(want), "round trip changed byte %" PRIu64 " of %s",
		 at, WHAT);
	cr_assert_eq(rc, WSHARD_EVALIDATE, "check returned %d (%s)", rc, err.msg);
	cr_assert_eq(err.code, WSHARD_EVALIDATE);
	cr_assert_str_eq(err.msg, want);
}

/* ---------------------------------------------------------------- */
/* Host round trip                                                   */
/* ---------------------------------------------------------------- */

Test(validate, host_round_trip_sizes)
{
	static const size_t sizes[] = {
		0, 1, 7, 8, 9, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5,
		(5u << 20) + 3,
	};
	struct wshard_validator *v = open_mode(WSHARD_VALIDATE_HOST, CHUNK);
	uint64_t total = 0, bytes;
	double seconds;
	size_t i;

	cr_assert_str_eq(wshard_validator_backend(v), "host");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned char *buf = random_bytes(sizes[i], i);

		expect_ok(v, buf, sizes[i], 1000);
		total += sizes[i];
		free(buf);
	}
	wshard_validator_stats(v, &bytes, &seconds);
	cr_assert_eq(bytes, total);
	cr_assert(seconds >= 0.0);
	wshard_validator_close(v);
}

Test(validate, host_empty_null_buffer)
{
	struct wshard_validator *v = open_mode(WSHARD_VALIDATE_HOST, CHUNK);

	expect_ok(v, NULL, 0, 0);
	wshard_validator_close(v);
}

Test(validate, default_chunk)
{
	struct wshard_validator *v = open_mode(WSHARD_VALIDATE_HOST, 0);
	unsigned char *buf = random_bytes(100000, 3);

	expect_ok(v, buf, 100000, 0);
	free(buf);
	wshard_validator_close(v);
}

/* ---------------------------------------------------------------- */
/* Fault injection                                                   */
/* ---------------------------------------------------------------- */

/* A fault at offset pos of a fresh validator's first check of len bytes. */
static void fault_at(size_t len, size_t chunk, uint64_t pos)
{
	const uint64_t base = 1u << 20;
	struct wshard_validator *v = open_mode(WSHARD_VALIDATE_HOST, chunk);
	unsigned char *buf = random_bytes(len, pos);

	cr_assert_eq(wshard_validator_inject_fault(v, pos), WSHARD_OK);
	expect_changed(v, buf, len, base, base + pos);
	/* One byte, once: the same data passes afterwards. */
	expect_ok(v, buf, len, base);
	free(buf);
	wshard_validator_close(v);
}

Test(validate, fault_first_middle_last)
{
	const size_t len = 3 * CHUNK + 17;

	fault_at(len, CHUNK, 0);
	fault_at(len, CHUNK, len / 2);
	fault_at(len, CHUNK, len - 1);
	fault_at(1, CHUNK, 0);
}

Test(validate, fault_around_chunk_boundaries)
{
	const size_t len = 3 * CHUNK + 17;

	fault_at(len, CHUNK, CHUNK - 1);
	fault_at(len, CHUNK, CHUNK);
	fault_at(len, CHUNK, CHUNK + 1);
	fault_at(len, CHUNK, 2 * CHUNK - 1);
	fault_at(len, CHUNK, 2 * CHUNK);
	fault_at(len, CHUNK, 3 * CHUNK);
}

Test(validate, fault_in_several_mib)
{
	const size_t len = (6u << 20) + 5;

	fault_at(len, 1u << 20, (5u << 20) + 123);
}

Test(validate, fault_counts_over_later_checks)
{
	struct wshard_validator *v = open_mode(WSHARD_VALIDATE_HOST, CHUNK);
	unsigned char *buf = random_bytes(3000, 9);
	uint64_t bytes;
	double seconds;

	/* Bytes checked before the call do not count. */
	expect_ok(v, buf, 3000, 0);
	cr_assert_eq(wshard_validator_inject_fault(v, 5000), WSHARD_OK);
	expect_ok(v, buf, 3000, 0);
	/* 5000 - 3000: offset 2000 of the second check after the call. */
	expect_changed(v, buf, 3000, 7000, 9000);
	expect_ok(v, buf, 3000, 0);
	wshard_validator_stats(v, &bytes, &seconds);
	cr_assert_eq(bytes, 9000, "only checks that passed count");
	free(buf);
	wshard_validator_close(v);
}

Test(validate, fault_past_the_data_is_harmless)
{
	struct wshard_validator *v = open_mode(WSHARD_VALIDATE_HOST, CHUNK);
	unsigned char *buf = random_bytes(CHUNK, 4);

	cr_assert_eq(wshard_validator_inject_fault(v, CHUNK), WSHARD_OK);
	expect_ok(v, buf, CHUNK, 0);
	/* ...until the data reaches it. */
	expect_changed(v, buf, CHUNK, 0, 0);
	free(buf);
	wshard_validator_close(v);
}

Test(validate, first_error_wins)
{
	struct wshard_error err = { WSHARD_OK, "" };
	struct wshard_validator *v = open_mode(WSHARD_VALIDATE_HOST, CHUNK);
	unsigned char *buf = random_bytes(100, 5);

	wshard_error_set(&err, WSHARD_EIO, "earlier cause");
	wshard_validator_inject_fault(v, 10);
	cr_assert_eq(wshard_validator_check(v, buf, 100, WHAT, 0, &err),
		     WSHARD_EVALIDATE);
	cr_assert_eq(err.code, WSHARD_EIO);
	cr_assert_str_eq(err.msg, "earlier cause");
	free(buf);
	wshard_validator_close(v);
}

/* ---------------------------------------------------------------- */
/* The inject_validate hook (WSHARD_INJECT_VALIDATE)                  */
/* ---------------------------------------------------------------- */

Test(validate, env_injection)
{
	struct wshard_validator *v;
	unsigned char *buf = random_bytes(20000, 6);

	inject("12345");
	v = open_mode(WSHARD_VALIDATE_HOST, CHUNK);
	expect_ok(v, buf, 10000, 0);
	expect_changed(v, buf, 10000, 40000, 40000 + 2345);
	wshard_validator_close(v);
	free(buf);
}

Test(validate, env_injection_with_auto_fallback)
{
	struct wshard_error err = { WSHARD_OK, "" };
	struct wshard_validator *v = NULL;
	char notice[256];
	unsigned char *buf = random_bytes(100, 7);

	inject("0");
	cr_assert_eq(wshard_validator_open(&v, WSHARD_VALIDATE_AUTO, 0, CHUNK,
					   notice, sizeof(notice), &err),
		     WSHARD_OK, "%s", err.msg);
	expect_changed(v, buf, 100, 0, 0);	/* host and cuda alike */
	wshard_validator_close(v);
	free(buf);
}

Test(validate, env_injection_bad_value)
{
	static const char *const bad[] = { "12x", "-1", "x", " 5",
					   "99999999999999999999999" };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct wshard_error err = { WSHARD_OK, "" };
		struct wshard_validator *v = (void *)1;

		inject(bad[i]);
		cr_assert_eq(wshard_validator_open(&v, WSHARD_VALIDATE_HOST, 0,
						   CHUNK, NULL, 0, &err),
			     WSHARD_EUSAGE, "value '%s'", bad[i]);
		cr_assert_null(v);
		cr_assert(strstr(err.msg, "WSHARD_INJECT_VALIDATE"), "%s",
			  err.msg);
	}
}

Test(validate, env_injection_empty_is_off)
{
	struct wshard_validator *v;
	unsigned char *buf = random_bytes(100, 8);

	inject("");
	v = open_mode(WSHARD_VALIDATE_HOST, CHUNK);
	expect_ok(v, buf, 100, 0);
	wshard_validator_close(v);
	free(buf);
}

/* ---------------------------------------------------------------- */
/* Backend choice                                                    */
/* ---------------------------------------------------------------- */

Test(validate, auto_falls_back_with_notice)
{
	struct wshard_error err = { WSHARD_OK, "" };
	struct wshard_validator *v = NULL;
	char notice[256] = "stale";
	unsigned char *buf = random_bytes(CHUNK * 2 + 3, 10);

	cr_assert_eq(wshard_validator_open(&v, WSHARD_VALIDATE_AUTO, 3, CHUNK,
					   notice, sizeof(notice), &err),
		     WSHARD_OK, "%s", err.msg);
	cr_assert_eq(err.code, WSHARD_OK, "auto mode records no error");
	if (strcmp(wshard_validator_backend(v), "host") == 0) {
		cr_assert(strstr(notice, "CUDA"), "notice: '%s'", notice);
		cr_assert(strstr(notice, "validating on the host"),
			  "notice: '%s'", notice);
		cr_assert_null(strchr(notice, '\n'));
	} else {
		cr_assert(strncmp(wshard_validator_backend(v), "cuda:", 5) == 0);
		cr_assert_str_eq(notice, "");
	}
	expect_ok(v, buf, CHUNK * 2 + 3, 0);
	wshard_validator_close(v);
	free(buf);
}

Test(validate, gpu_mode_without_gpu)
{
	struct wshard_error err = { WSHARD_OK, "" };
	struct wshard_validator *v = (void *)1;
	const size_t len = (5u << 20) + 7;
	unsigned char *buf;
	enum wshard_err rc;

	rc = wshard_validator_open(&v, WSHARD_VALIDATE_GPU, 0, 1u << 20, NULL,
				   0, &err);
	if (rc == WSHARD_OK) {
		/* A usable GPU: the CUDA backend must round-trip correctly. */
		cr_assert(strncmp(wshard_validator_backend(v), "cuda:", 5) == 0);
		buf = random_bytes(len, 11);
		expect_ok(v, buf, len, 0);
		expect_ok(v, buf + 1, len - 1, 1);
		expect_ok(v, buf, 3, 0);
		/* a byte damaged on the device, in the third chunk and in the
		 * last, odd-sized one, is found and named */
		cr_assert_eq(wshard_validator_inject_fault(v, (2u << 20) + 5),
			     WSHARD_OK);
		expect_changed(v, buf, len, 100, 100 + (2u << 20) + 5);
		cr_assert_eq(wshard_validator_inject_fault(v, len - 1), WSHARD_OK);
		expect_changed(v, buf, len, 0, len - 1);
		expect_ok(v, buf, len, 0);
		free(buf);
		wshard_validator_close(v);
		return;
	}
	cr_assert_eq(rc, WSHARD_ENODEV, "%d %s", rc, err.msg);
	cr_assert_eq(err.code, WSHARD_ENODEV);
	cr_assert_null(v);
#ifdef WSHARD_CUDA
	cr_assert(strstr(err.msg, "CUDA"), "message: '%s'", err.msg);
#else
	cr_assert_str_eq(err.msg, "built without CUDA (make CUDA=0)");
#endif
}

/*
 * Checks len bytes as tensors of varying small sizes, each with its own
 * name, the fault (if armed) in tensor bad; returns the first error, from
 * a check or from the flush at the end (a batched check may report it
 * late, but must name the tensor and byte it was in).
 */
static enum wshard_err small_checks(struct wshard_validator *v, const unsigned char *buf,
				    size_t n, struct wshard_error *err)
{
	size_t i, off = 0;
	char what[64];

	for (i = 0; i < n; i++) {
		size_t len = 1 + (i * 7919) % (200u << 10);

		snprintf(what, sizeof(what), "rank 0 tensor 't%zu'", i);
		if (wshard_validator_check(v, buf + off, len, what, 1000 * i, err))
			return err->code;
		off += len;
	}
	return wshard_validator_flush(v, err);
}

/* Offset in small_checks' buffer of tensor i. */
static size_t small_off(size_t i)
{
	size_t k, off = 0;

	for (k = 0; k < i; k++)
		off += 1 + (k * 7919) % (200u << 10);
	return off;
}

Test(validate, gpu_batches_small_checks)
{
	struct wshard_error err = { WSHARD_OK, "" };
	struct wshard_validator *v = NULL;
	const size_t n = 300;
	unsigned char *buf;
	enum wshard_err rc;

	rc = wshard_validator_open(&v, WSHARD_VALIDATE_GPU, 0, 1u << 20, NULL, 0, &err);
	if (rc != WSHARD_OK) {
		/* no usable GPU: gpu_mode_without_gpu checks the refusal */
		cr_assert_eq(rc, WSHARD_ENODEV, "%d %s", rc, err.msg);
		return;
	}
	buf = random_bytes(small_off(n), 5);
	cr_assert_eq(small_checks(v, buf, n, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(wshard_validator_flush(v, &err), WSHARD_OK, "%s", err.msg);
	/* a byte damaged on the device in tensor 123 (byte 17 of it) is
	 * named, though its batch went through after the check returned */
	cr_assert_eq(wshard_validator_inject_fault(v, small_off(123) + 17), WSHARD_OK);
	rc = small_checks(v, buf, n, &err);
	cr_assert_eq(rc, WSHARD_EVALIDATE, "%d %s", rc, err.msg);
	cr_assert_str_eq(err.msg, "round trip changed byte 123017 of rank 0 tensor 't123'");
	/* the validator goes on after a failure, and a fault in the last
	 * small check is found by the large check that follows it */
	err = (struct wshard_error){ WSHARD_OK, "" };
	cr_assert_eq(small_checks(v, buf, n, &err), WSHARD_OK, "%s", err.msg);
	cr_assert_eq(wshard_validator_inject_fault(v, 63), WSHARD_OK);
	cr_assert_eq(wshard_validator_check(v, buf, 64, WHAT, 0, &err), WSHARD_OK, "%s", err.msg);
	rc = wshard_validator_check(v, buf, 3u << 20, "big", 0, &err);
	cr_assert_eq(rc, WSHARD_EVALIDATE, "%d %s", rc, err.msg);
	cr_assert_str_eq(err.msg, "round trip changed byte 63 of " WHAT);
	err = (struct wshard_error){ WSHARD_OK, "" };
	expect_ok(v, buf, 3u << 20, 0);
	cr_assert_eq(wshard_validator_flush(v, &err), WSHARD_OK, "%s", err.msg);
	free(buf);
	wshard_validator_close(v);
}

Test(validate, off_mode_opens_nothing)
{
	struct wshard_error err = { WSHARD_OK, "" };
	struct wshard_validator *v = (void *)1;

	cr_assert_eq(wshard_validator_open(&v, WSHARD_VALIDATE_OFF, 0, CHUNK,
					   NULL, 0, &err),
		     WSHARD_EUSAGE);
	cr_assert_null(v);
	wshard_validator_close(NULL);
}
