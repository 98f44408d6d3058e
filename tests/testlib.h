/* SPDX-License-Identifier: BSD-2-Clause */
/* Helpers shared by flit's tests: an isolated shm directory per test
 * process, contexts bound to it, and bounded polling loops. */
#ifndef FLIT_TESTLIB_H
#define FLIT_TESTLIB_H

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <flit/flit.h>

static char tl_dir[256];
static pid_t tl_owner;

static int tl_rm(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st; (void)flag; (void)f;
	return remove(p);
}

/* A fresh shm directory for this test process, removed at exit. */
static void tl_cleanup(void)
{
	if (tl_dir[0] && getpid() == tl_owner)
		nftw(tl_dir, tl_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Set up before main(), so forked children share the parent's directory. */
__attribute__((constructor)) static void tl_init(void)
{
	tl_owner = getpid();
	snprintf(tl_dir, sizeof(tl_dir), "/dev/shm/flit-test-%d", (int)tl_owner);
	atexit(tl_cleanup);
}

static inline const char *tl_shm_dir(void)
{
	return tl_dir;
}

/* fork() whose child is killed when the test process dies (a failed
 * assertion must not leave a child holding the test's output open). */
static inline pid_t tl_fork(void)
{
	pid_t parent = getpid(), pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
	}
	return pid;
}

static inline uint64_t tl_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A context in the test's shm directory, with extra config lines. */
static inline flit_ctx *tl_ctx(const char *extra)
{
	char cfg[4096];
	snprintf(cfg, sizeof(cfg), "context.shm_dir = %s\n%s", tl_shm_dir(), extra ? extra : "");
	FLIT_OPTS(flit_ctx_opts, o, .config = cfg);
	flit_ctx *ctx = flit_ctx_new(&o);
	if (!ctx)
		fprintf(stderr, "flit_ctx_new: %s\n", flit_errmsg());
	return ctx;
}

/* A subscriber with callback fn(arg); reports why on stderr if it fails. */
static inline flit_sub *tl_sub(flit_ctx *ctx, const char *topic, flit_msg_fn fn,
			       void *arg)
{
	FLIT_OPTS(flit_sub_opts, so, .on_msg = fn, .arg = arg);
	flit_sub *s = flit_sub_new(ctx, topic, &so);
	if (!s)
		fprintf(stderr, "flit_sub_new(%s): %s\n", topic, flit_errmsg());
	return s;
}

/* Poll ctx until *flag becomes true or ms pass; returns the flag. */
static inline int tl_poll_until(flit_ctx *ctx, volatile int *flag, unsigned ms)
{
	uint64_t end = tl_now_ms() + ms;
	while (!*flag && tl_now_ms() < end)
		flit_ctx_poll(ctx, 0);
	return *flag;
}

/* Checkable payload: seq in the first 8 bytes, then a pattern of seq. */
static inline void tl_fill(unsigned char *p, size_t len, uint64_t seq)
{
	for (size_t i = 0; i < len; i++)
		p[i] = i < 8 ? (unsigned char)(seq >> (8 * i)) : (unsigned char)(seq * 31 + i);
}

static inline int tl_check(const unsigned char *p, size_t len, uint64_t *seq_out)
{
	uint64_t seq = 0;
	if (len < 8)
		return -1;
	for (int i = 0; i < 8; i++)
		seq |= (uint64_t)p[i] << (8 * i);
	for (size_t i = 8; i < len; i++)
		if (p[i] != (unsigned char)(seq * 31 + i))
			return -1;
	*seq_out = seq;
	return 0;
}

#endif
