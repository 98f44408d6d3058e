/* SPDX-License-Identifier: BSD-2-Clause */
/* Multi-host network testbeds for cmocka tests: thin wrappers around
 * tools/testbed (see docs/TESTBED.md).  A testbed NAME is a switch namespace
 * NAME-sw and host namespaces NAME-h1..NAME-hN; host I has eth0 = 10.77.0.I/24
 * with a multicast route.  Typical use:
 *
 *	int rc = tb_up("udp1", 3, "--loss 5");
 *	if (rc == 77) skip();                  // not root / no namespaces
 *	assert_int_equal(rc, 0);
 *	pid_t p = fork();
 *	if (p == 0) { if (tb_enter("udp1", 2)) _exit(1); ...receive...; _exit(0); }
 *	...tb_enter in another child, send to tb_addr(2)...
 *
 * Testbeds brought up by tb_up are taken down at exit of the process that
 * called tb_up (not in forked children), so a failed assertion still cleans
 * up; a killed test leaves them to `testbed gc`, which tb_up runs once. */
#ifndef FLIT_TESTBED_H
#define FLIT_TESTBED_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TB_MAX 16                     /* testbeds one process can have up */

static char tb_names[TB_MAX][9];      /* brought up by this process, for tb_atexit */
static pid_t tb_owner;                /* the process that registered tb_atexit */

/* Path of tools/testbed: $FLIT_TESTBED, else "tools/testbed" relative to the
 * cwd (tests run from the repository root). */
static inline const char *tb_tool(void)
{
	const char *p = getenv("FLIT_TESTBED");
	return p && *p ? p : "tools/testbed";
}

/* Runs `testbed CMD --name NAME ARGS` through /bin/sh (ARGS is split by the
 * shell, so it may hold several options); returns the tool's exit status, or
 * -1 if it could not run or died from a signal. */
static inline int tb_run(const char *cmd, const char *name, const char *args)
{
	char line[1024];
	const char *tool = tb_tool();
	int n;

	/* single-quote the tool path and the name: ' can't appear in them */
	if (strchr(tool, '\'') || strchr(name, '\''))
		return -1;
	n = snprintf(line, sizeof(line), "'%s' %s --name '%s' %s", tool, cmd, name,
		     args ? args : "");
	if (n < 0 || (size_t)n >= sizeof(line))
		return -1;
	fflush(NULL);
	int st = system(line);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static inline void tb_forget(const char *name)
{
	for (int i = 0; i < TB_MAX; i++)
		if (strcmp(tb_names[i], name) == 0)
			tb_names[i][0] = '\0';
}

static void tb_atexit(void)
{
	if (getpid() != tb_owner)     /* a forked child exiting: not ours to tear down */
		return;
	for (int i = 0; i < TB_MAX; i++)
		if (tb_names[i][0]) {
			tb_run("down", tb_names[i], ">/dev/null");
			tb_names[i][0] = '\0';
		}
}

/* int tb_up(name, hosts, opts): `testbed up --name NAME --hosts HOSTS OPTS
 * --owner-pid getpid()`.  OPTS (may be NULL): e.g. "--loss 5 --dup 1".
 * Returns 0; 77 after printing "SKIP: reason" when not root or network
 * namespaces are unavailable; 3 if an impairment is not supported here
 * (reorder/delay without sch_netem); else the tool's exit status (-1: could
 * not run it). */
static inline int tb_up(const char *name, int hosts, const char *opts)
{
	char args[512];
	int i, rc, slot = -1;

	if (geteuid() != 0) {
		printf("SKIP: testbed needs root (network namespaces)\n");
		return 77;
	}
	if (access(tb_tool(), X_OK) != 0) {
		fprintf(stderr, "tb_up: %s: %s (set FLIT_TESTBED or run from the repository root)\n",
			tb_tool(), strerror(errno));
		return -1;
	}
	if (strlen(name) >= sizeof(tb_names[0]))
		return 2;                  /* the tool would refuse it too */
	if (tb_owner != getpid()) {    /* first call in this process */
		char gc[1024];
		tb_owner = getpid();
		memset(tb_names, 0, sizeof(tb_names));
		atexit(tb_atexit);
		snprintf(gc, sizeof(gc), "'%s' gc >/dev/null 2>&1", tb_tool());
		if (!strchr(tb_tool(), '\''))
			(void)!system(gc);
	}
	for (i = 0; i < TB_MAX; i++) {
		if (strcmp(tb_names[i], name) == 0) { slot = i; break; }
		if (slot < 0 && !tb_names[i][0])
			slot = i;
	}
	if (slot < 0) {
		fprintf(stderr, "tb_up: more than %d testbeds in one process\n", TB_MAX);
		return -1;
	}
	snprintf(args, sizeof(args), "--hosts %d %s --owner-pid %ld", hosts, opts ? opts : "",
		 (long)getpid());
	rc = tb_run("up", name, args);
	if (rc == 4) {
		printf("SKIP: network namespaces unavailable (testbed up exited 4)\n");
		return 77;
	}
	/* remember it even on failure: `down` is harmless if nothing is left */
	snprintf(tb_names[slot], sizeof(tb_names[slot]), "%s", name);
	return rc;
}

/* Takes testbed NAME down (idempotent): 0 or the tool's exit status. */
static inline int tb_down(const char *name)
{
	tb_forget(name);
	return tb_run("down", name, NULL);
}

/* Changes the link of host HOST (0 = all links) of testbed NAME: OPTS are
 * merged with what is in effect, "--clear" resets first, e.g. "--loss 20",
 * "--clear --dup 1".  Impairments act on the switch port towards the host:
 * they affect what that host receives.  Returns 0, 3 if unsupported here,
 * else the tool's exit status. */
static inline int tb_impair(const char *name, int host, const char *opts)
{
	char args[512];
	if (host > 0)
		snprintf(args, sizeof(args), "--host %d %s", host, opts ? opts : "");
	else
		snprintf(args, sizeof(args), "%s", opts ? opts : "");
	return tb_run("impair", name, args);
}

/* Moves the calling thread into the network namespace of host HOST of
 * testbed NAME (HOST 0: the switch namespace).  Meant for a forked child (or
 * a dedicated thread) before it opens its sockets; sockets opened earlier
 * stay in their namespace.  Returns 0 or -errno. */
static inline int tb_enter(const char *name, int host)
{
	char path[64];
	int fd, rc = 0;

	if (host > 0)
		snprintf(path, sizeof(path), "/run/netns/%s-h%d", name, host);
	else
		snprintf(path, sizeof(path), "/run/netns/%s-sw", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNET) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* "10.77.0.HOST" (the default subnet).  Returns one of 4 rotating static
 * buffers, so up to 4 results can be used in one expression. */
static inline const char *tb_addr(int host)
{
	static char buf[4][16];
	static unsigned next;
	char *b = buf[next++ % 4];
	snprintf(b, sizeof(buf[0]), "10.77.0.%d", host);
	return b;
}

#endif /* FLIT_TESTBED_H */
