/* SPDX-License-Identifier: BSD-2-Clause */
/* Error trail and logging, internal.  The library never prints: messages go
 * to the callback installed with flit_set_print(). */
#ifndef FLIT_ERROR_H
#define FLIT_ERROR_H

#include <errno.h>

#include <flit/flit.h>

/* Record "fmt..." as the calling thread's error trail and return -err
 * (err > 0 is an errno value).  Usage: return flit_err(EINVAL, "bad %s", x); */
int flit_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the current trail with "fmt...: " and return -err. */
int flit_err_wrap(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Set errno = err and the trail, for constructors; returns NULL. */
void *flit_err_null(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For constructors whose trail is already set: errno = err, return NULL. */
static inline void *flit_null(int err)
{
	errno = err;
	return NULL;
}

/* Let messages up to `level` through to the print callback. */
void flit_log_level_raise(int level);

void flit_log(enum flit_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define flit_warn(...)  flit_log(FLIT_LOG_WARN, __VA_ARGS__)
#define flit_info(...)  flit_log(FLIT_LOG_INFO, __VA_ARGS__)
#define flit_debug(...) flit_log(FLIT_LOG_DEBUG, __VA_ARGS__)

#define FLIT_LIKELY(x)   __builtin_expect(!!(x), 1)
#define FLIT_UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif
