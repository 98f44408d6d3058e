// SPDX-License-Identifier: BSD-2-Clause
/*
 * xdp transport integration tests on the netns testbed (tools/testbed; see
 * tests/nettest.h): AF_XDP to AF_XDP, AF_XDP to kernel UDP and back (the
 * frames are the same bytes, checksums included: the receiving kernel's UDP
 * error counters stay at zero), the topic filter proven by the program's
 * counters, unicast with neighbour resolution, detaching under a live
 * subscriber, and a restart with the program left attached.  The udp suite's
 * reliability cases also run over xdp (tests/test_udp_xdp.sh).
 *
 * Hosts h1..h3 have eth0 (veth): AF_XDP runs in copy mode there and the
 * contexts attach flit's program in skb mode (context.xdp.mode = auto).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nettest.h"

#define N 100000

/* Udp InErrors and InCsumErrors of /proc/net/snmp in host `host`. */
struct udp_err { uint64_t in_errors, csum_errors; };

static struct udp_err snmp_udp(int host)
{
	struct udp_err e = { UINT64_MAX, UINT64_MAX };
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = tl_fork();
	if (pid == 0) {
		close(p[0]);
		if (tb_enter(tb, host))
			_exit(3);
		FILE *f = fopen("/proc/net/snmp", "re");
		char hdr[1024], val[1024];
		struct udp_err r = { UINT64_MAX, UINT64_MAX };
		while (f && fgets(hdr, sizeof(hdr), f) && fgets(val, sizeof(val), f)) {
			if (strncmp(hdr, "Udp:", 4) || strncmp(val, "Udp:", 4))
				continue;
			char *hs, *vs, *h = strtok_r(hdr + 4, " \n", &hs), *v = strtok_r(val + 4, " \n", &vs);
			for (; h && v; h = strtok_r(NULL, " \n", &hs), v = strtok_r(NULL, " \n", &vs)) {
				if (!strcmp(h, "InErrors"))
					r.in_errors = strtoull(v, NULL, 10);
				if (!strcmp(h, "InCsumErrors"))
					r.csum_errors = strtoull(v, NULL, 10);
			}
		}
		if (f)
			fclose(f);
		if (write(p[1], &r, sizeof(r)) != sizeof(r))
			_exit(4);
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &e, sizeof(e)), sizeof(e));
	close(p[0]);
	waitpid(pid, NULL, 0);
	assert_true(e.in_errors != UINT64_MAX && e.csum_errors != UINT64_MAX);
	return e;
}

static void xdp_print(const struct sub_result *r, const char *what)
{
	static const char *const names[] = FLIT_XDP_COUNTER_NAMES;
	printf("# %s: xdp", what);
	for (unsigned i = 0; i < FLIT_XDP_COUNTERS; i++)
		if (r->xdp[i])
			printf(" %s %llu", names[i], (unsigned long long)r->xdp[i]);
	printf("\n");
}

static void xdp_to_xdp_delivers_100k_in_order(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .transport = "xdp", .topic = "x.two", .n = N, .size = 64,
			       .want_receivers = 1 };
	struct sub_spec ss = { .host = 2, .transport = "xdp", .topic = "x.two" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 60000);
	check_result(&r, N, false, "xdp h1 -> xdp h2");
	xdp_print(&r, "xdp h2");
	assert_int_equal(r.first_seq, 0);
	/* the data came through the program and the AF_XDP socket */
	assert_true(r.xdp[FLIT_XDP_REDIRECTED] >= N / 2);
	assert_int_equal(r.xdp[FLIT_XDP_MALFORMED], 0);
}

/* What AF_XDP sends, a kernel socket receives, checksums verified by the
 * receiving kernel; and a kernel source reaches an AF_XDP receiver. */
static void xdp_and_kernel_udp_interoperate_with_valid_checksums(void **state)
{
	(void)state;
	struct udp_err e0 = snmp_udp(2);
	struct pub_args pa = { .host = 1, .transport = "xdp", .topic = "x.k", .n = N, .size = 200,
			       .want_receivers = 2, .src_cfg = "batch = true" };
	struct sub_spec ss[2] = { { .host = 2, .transport = "udp", .topic = "x.k" },
				  { .host = 3, .transport = "udp", .topic = "x.k" } };
	struct sub_result r[2];
	run(&pa, ss, 2, r, 60000);
	check_result(&r[0], N, false, "xdp h1 -> kernel udp h2");
	check_result(&r[1], N, false, "xdp h1 -> kernel udp h3");
	struct udp_err e1 = snmp_udp(2);
	printf("# h2 Udp InErrors %llu -> %llu, InCsumErrors %llu -> %llu\n",
	       (unsigned long long)e0.in_errors, (unsigned long long)e1.in_errors,
	       (unsigned long long)e0.csum_errors, (unsigned long long)e1.csum_errors);
	assert_int_equal(e1.csum_errors, e0.csum_errors);
	assert_int_equal(e1.in_errors, e0.in_errors);

	struct pub_args pk = { .host = 3, .transport = "udp", .topic = "x.rev", .n = N, .size = 64,
			       .want_receivers = 1 };
	struct sub_spec sx = { .host = 1, .transport = "xdp", .topic = "x.rev" };
	struct sub_result rx;
	run(&pk, &sx, 1, &rx, 60000);
	check_result(&rx, N, false, "kernel udp h3 -> xdp h1");
	xdp_print(&rx, "xdp h1");
	assert_true(rx.xdp[FLIT_XDP_REDIRECTED] >= N / 2);
}

/* Wait (10 s at most, else exit 6) for a receiver of want, send n messages
 * on want and on other in turn, then serve until the parent says stop. */
static void pair_send_serve(flit_ctx *ctx, flit_pub *want, flit_pub *other, uint64_t n, int stop)
{
	unsigned char buf[64];
	uint64_t end = tl_now_ms() + 10000;

	while (flit_pub_receivers(want) < 1) {
		if (tl_now_ms() > end)
			_exit(6);
		flit_ctx_poll(ctx, 0);
		usleep(1000);
	}
	for (uint64_t i = 0; i < n; i++) {
		tl_fill(buf, sizeof(buf), i);
		while (flit_pub_send(want, buf, sizeof(buf)) != 0)
			flit_ctx_poll(ctx, 0);
		while (flit_pub_send(other, buf, sizeof(buf)) != 0)
			flit_ctx_poll(ctx, 0);
		if (i % 64 == 0)
			usleep(200);
	}
	struct pollfd p = { .fd = stop, .events = POLLIN };
	while (poll(&p, 1, 50) == 0)
		flit_ctx_poll(ctx, 0);
}

/* Two sources on one group:port, each its own session (source.session =
 * own); the AF_XDP receiver wants one: the other session's frames are
 * dropped by the program, not copied up. */
static void two_pub_main(const struct pub_args *a, int stop)
{
	if (tb_enter(tb, 1))
		_exit(3);
	flit_ctx *ctx = net_ctx_on("xdp", NULL);
	if (!ctx)
		_exit(4);
	const char *grp = "udp.group = 239.192.90.7\nudp.port = 14900\nsession = own";
	FLIT_OPTS(flit_pub_opts, po, .transport = "xdp", .config = grp);
	flit_pub *want = flit_pub_new(ctx, "f.want", &po);
	flit_pub *other = flit_pub_new(ctx, "f.other", &po);
	if (!want || !other)
		_exit(5);
	pair_send_serve(ctx, want, other, a->n, stop);
	flit_pub_close(want);
	flit_pub_close(other);
	flit_ctx_close(ctx);
	_exit(0);
}

static void topic_filter_drops_unwanted_sessions_in_xdp(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .n = 20000, .main = two_pub_main };
	struct sub_spec ss = { .host = 2, .transport = "xdp", .topic = "f.want" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 60000);
	check_result(&r, 20000, false, "f.want over xdp");
	xdp_print(&r, "filter h2");
	/* f.other's 20000 messages: all but the first few (before its
	 * session was learnt) dropped in XDP */
	assert_true(r.xdp[FLIT_XDP_FILTERED] >= 15000);
	assert_true(r.c.unknown_session < 5000);
}

/* A shared session (the default) that began with a topic nobody on h2
 * wants, so h2 drops it in XDP (h2 steers its group:port for g.anchor, a
 * session of its own there that sends nothing); then a wanted topic joins
 * it: the page naming it lifts the filter, and every message of it
 * arrives. */
static void late_want_main(const struct pub_args *a, int stop)
{
	unsigned char buf[64];
	if (tb_enter(tb, 1))
		_exit(3);
	flit_ctx *ctx = net_ctx_on("xdp", NULL);
	if (!ctx)
		_exit(4);
	FLIT_OPTS(flit_pub_opts, po, .transport = "xdp",
		  .config = "udp.group = 239.192.90.8\nudp.port = 14902");
	FLIT_OPTS(flit_pub_opts, pown, .transport = "xdp",
		  .config = "udp.group = 239.192.90.8\nudp.port = 14902\nsession = own");
	flit_pub *anchor = flit_pub_new(ctx, "g.anchor", &pown);
	flit_pub *other = flit_pub_new(ctx, "g.other", &po);
	if (!other || !anchor)
		_exit(5);
	/* the unwanted topic alone for a while: its adverts reach h2, its
	 * frames are dropped there */
	uint64_t end = tl_now_ms() + 1500;
	for (uint64_t i = 0; tl_now_ms() < end; i++) {
		tl_fill(buf, sizeof(buf), i);
		flit_pub_send(other, buf, sizeof(buf));
		flit_ctx_poll(ctx, 0);
		usleep(2000);
	}
	flit_pub *want = flit_pub_new(ctx, "g.want", &po);
	if (!want)
		_exit(7);
	pair_send_serve(ctx, want, other, a->n, stop);
	flit_pub_close(want);
	flit_pub_close(other);
	flit_pub_close(anchor);
	flit_ctx_close(ctx);
	_exit(0);
}

static void a_wanted_topic_added_to_an_unwanted_session_arrives_whole(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .n = 5000, .main = late_want_main };
	struct sub_spec ss = { .host = 2, .transport = "xdp", .topic = "g.[aw]*", .pattern = true };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 60000);
	check_result(&r, 5000, false, "g.want, added to a filtered session, over xdp");
	assert_int_equal(r.bos, 2);     /* g.anchor, g.want */
	xdp_print(&r, "late want h2");
	/* before the wanted topic came, g.other's frames were dropped */
	assert_true(r.xdp[FLIT_XDP_FILTERED] > 0);
}

/* Unicast over AF_XDP: the source sends to each joined receiver, its MAC
 * taken from the neighbour table (resolved through the kernel first). */
static void unicast_over_xdp_resolves_the_neighbour(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .transport = "xdp", .topic = "x.uni", .n = 20000, .size = 64,
			       .want_receivers = 2, .src_cfg = "udp.mode = unicast" };
	struct sub_spec ss[2] = { { .host = 2, .transport = "xdp", .topic = "x.uni" },
				  { .host = 3, .transport = "udp", .topic = "x.uni" } };
	struct sub_result r[2];
	run(&pa, ss, 2, r, 60000);
	check_result(&r[0], pa.n, false, "unicast xdp h1 -> xdp h2");
	check_result(&r[1], pa.n, false, "unicast xdp h1 -> kernel h3");
}

/* flit-loader style: the program attached and pinned beforehand (as by
 * `flit-loader attach`), contexts with context.xdp.attach = pinned come and
 * go (the second right after the first: the AF_XDP queue may be busy for a
 * moment), and the program outlives them; a detach under a live subscriber
 * loses nothing (the data falls back to the kernel sockets). */
static int host_call(int host, int what)
{
	pid_t pid = tl_fork();
	if (pid == 0) {
		if (tb_enter(tb, host))
			_exit(3);
		int rc = what ? flit_xdp_detach("eth0") : flit_xdp_attach("eth0", FLIT_XDP_MODE_AUTO, NULL);
		if (rc)
			fprintf(stderr, "%s: %s\n", what ? "detach" : "attach", flit_errmsg());
		_exit(rc ? 1 : 0);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int detach_h2(void)
{
	return host_call(2, 1);
}

static void pinned_program_outlives_restarts_and_detach_loses_nothing(void **state)
{
	(void)state;
	assert_int_equal(host_call(2, 0), 0);
	for (int round = 0; round < 2; round++) {
		struct pub_args pa = { .host = 1, .transport = "udp", .topic = "x.pin", .n = 5000, .size = 64,
				       .want_receivers = 1 };
		struct sub_spec ss = { .host = 2, .transport = "xdp", .topic = "x.pin",
				       .cfg = "context.xdp.attach = pinned\n" };
		struct sub_result r;
		run(&pa, &ss, 1, &r, 30000);
		check_result(&r, pa.n, false, round ? "pinned, restarted" : "pinned");
		assert_true(r.xdp[FLIT_XDP_REDIRECTED] > 0);
	}

	/* detach while a subscriber is live: h1 publishes slowly, the parent
	 * detaches in h2 half way */
	struct pub_args pa = { .host = 1, .transport = "udp", .topic = "x.det", .n = 3000, .size = 64,
			       .want_receivers = 1, .gap_us = 500, .during = detach_h2,
			       .during_ms = 1000 };
	struct sub_spec ss = { .host = 2, .transport = "xdp", .topic = "x.det",
			       .cfg = "context.xdp.attach = pinned\n" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 30000);
	check_result(&r, pa.n, false, "detached under a live subscriber");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(xdp_to_xdp_delivers_100k_in_order),
		cmocka_unit_test(xdp_and_kernel_udp_interoperate_with_valid_checksums),
		cmocka_unit_test(topic_filter_drops_unwanted_sessions_in_xdp),
		cmocka_unit_test(a_wanted_topic_added_to_an_unwanted_session_arrives_whole),
		cmocka_unit_test(unicast_over_xdp_resolves_the_neighbour),
		cmocka_unit_test(pinned_program_outlives_restarts_and_detach_loses_nothing),
	};
	return nt_suite("x", tests, sizeof(tests) / sizeof(tests[0]));
}
