// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

#define ERRMSG_LEN 1024

static __thread char errmsg[ERRMSG_LEN];
static _Atomic(flit_print_fn) print_fn;
/* Process-wide, like the print callback: the most verbose level any live
 * context asked for (context.log_level), warn by default. */
static _Atomic int log_level = FLIT_LOG_WARN;

void flit_log_level_raise(int level)
{
	int cur = atomic_load(&log_level);
	while (level > cur && !atomic_compare_exchange_weak(&log_level, &cur, level))
		;
}

flit_print_fn flit_set_print(flit_print_fn fn)
{
	return atomic_exchange(&print_fn, fn);
}

const char *flit_errmsg(void)
{
	return errmsg;
}

__attribute__((format(printf, 2, 0)))
static void set_trail(int err, const char *fmt, va_list ap)
{
	int n = vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
	if (n < 0)
		n = 0;
	if ((size_t)n < sizeof(errmsg) && err > 0)
		snprintf(errmsg + n, sizeof(errmsg) - n, " (%s)", strerror(err));
}

int flit_err(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_trail(err, fmt, ap);
	va_end(ap);
	flit_log(FLIT_LOG_DEBUG, "%s", errmsg);
	return -err;
}

int flit_err_wrap(int err, const char *fmt, ...)
{
	char inner[ERRMSG_LEN];
	va_list ap;
	int n;

	memcpy(inner, errmsg, sizeof(inner));
	va_start(ap, fmt);
	n = vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(errmsg))
		snprintf(errmsg + n, sizeof(errmsg) - n, ": %s", inner);
	return -err;
}

void *flit_err_null(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_trail(err, fmt, ap);
	va_end(ap);
	errno = err;
	return NULL;
}

void flit_log(enum flit_log_level lvl, const char *fmt, ...)
{
	flit_print_fn fn = atomic_load_explicit(&print_fn, memory_order_relaxed);
	va_list ap;

	if (!fn || (int)lvl > atomic_load_explicit(&log_level, memory_order_relaxed))
		return;
	va_start(ap, fmt);
	fn(lvl, fmt, ap);
	va_end(ap);
}

const char *flit_strstatus(int rc)
{
	static __thread char buf[64];

	switch (rc) {
	case FLIT_OK: return "ok";
	case FLIT_BACK_PRESSURED: return "back-pressured";
	case FLIT_NOT_CONNECTED: return "not connected";
	}
	if (rc < 0 && rc > -4096)
		return strerror(-rc);
	snprintf(buf, sizeof(buf), "status %d", rc);
	return buf;
}
