// SPDX-License-Identifier: BSD-2-Clause
/*
 * libFuzzer target for the verifier-log reader (transports/xdp/
 * verifier_log.h): flit_vlog_reason() on arbitrary text, and the same text
 * fed to struct flit_vlog in pieces as libbpf's print calls would bring it.
 * Checks, abort()ing on any violation:
 *  - out is NUL-terminated within len and at most FLIT_VLOG_REASON_MAX
 *    characters, for every len from 1 up (a small buffer truncates, never
 *    overruns: ASan guards a malloc'd buffer of exactly len bytes);
 *  - the return value is 1 exactly when out is a reason, 0 with out "" or
 *    the "log cut off before the reason" note;
 *  - the answer does not depend on the buffer: with len large, two calls
 *    agree; with a smaller len, out is a prefix or ends shortened;
 *  - the collector's reason, after a flush, is bounded the same way.
 *
 *   make BUILD=build fuzz-build
 *   build/fuzz/fuzz_verifier_log -max_total_time=60 tests/fuzz/corpus/verifier_log
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xdp/verifier_log.h"
#include "fuzz.h"

static int reason_into(const char *log, size_t len, char *copy)
{
	char *out = malloc(len);
	CHECK(out);
	memset(out, 'x', len);
	int r = flit_vlog_reason(log, out, len);
	size_t n = strnlen(out, len);
	CHECK(n < len);
	CHECK(n <= FLIT_VLOG_REASON_MAX);
	CHECK(r == 0 || r == 1);
	if (copy)
		memcpy(copy, out, n + 1);
	free(out);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *log = malloc(size + 1);
	char a[FLIT_VLOG_REASON_MAX + 64], b[FLIT_VLOG_REASON_MAX + 64];

	CHECK(log);
	memcpy(log, data, size);
	log[size] = '\0';

	int r = reason_into(log, sizeof(a), a);
	CHECK(reason_into(log, sizeof(b), b) == r);
	CHECK(!strcmp(a, b));
	if (r == 0)
		CHECK(a[0] == '\0' || strstr(a, "log cut off before the reason"));
	else
		CHECK(a[0] != '\0');
	for (size_t len = 1; len < 48; len += 7)
		reason_into(log, len, NULL);

	/* as print calls: split at each '\x01' of the input (none: one call) */
	struct flit_vlog v = { 0 };
	char *p = log;
	for (char *q; (q = strchr(p, '\x01')); p = q + 1) {
		*q = '\0';
		flit_vlog_feed(&v, p);
	}
	flit_vlog_feed(&v, p);
	flit_vlog_flush(&v);
	CHECK(strnlen(v.reason, sizeof(v.reason)) <= FLIT_VLOG_REASON_MAX);
	flit_vlog_reset(&v);
	CHECK(v.buf == NULL && v.reason[0] == '\0');
	free(log);
	return 0;
}
