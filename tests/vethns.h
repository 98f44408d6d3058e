/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * For tests that build two private network namespaces A and B (a veth pair
 * between them) inside their own process: the namespaces' fds, switching
 * the calling thread between them, running a shell command, and turning a
 * device's tx checksum offload off.  Include
 * after <cmocka.h>.
 */
#ifndef FLIT_TEST_VETHNS_H
#define FLIT_TEST_VETHNS_H

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <net/if.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>

static int ns_a = -1, ns_b = -1;

static inline void in_a(void)
{
	if (setns(ns_a, CLONE_NEWNET))
		fail_msg("setns A: %s", strerror(errno));
}

static inline void in_b(void)
{
	if (setns(ns_b, CLONE_NEWNET))
		fail_msg("setns B: %s", strerror(errno));
}

/* system(3) of a printf-formatted command: its exit status, -1 if it did
 * not exit normally. */
__attribute__((format(printf, 1, 2)))
static inline int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(NULL);
	int st = system(cmd);
	return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

/* Turn a device's tx checksum offload off (what `ethtool -K dev tx off`
 * does), in the current namespace. */
static inline int tx_csum_off(const char *ifn)
{
	struct ethtool_value ev = { .cmd = ETHTOOL_STXCSUM, .data = 0 };
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), r;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifn);
	ifr.ifr_data = (void *)&ev;
	r = ioctl(fd, SIOCETHTOOL, &ifr);
	close(fd);
	return r;
}

#endif /* FLIT_TEST_VETHNS_H */
