// SPDX-License-Identifier: BSD-2-Clause
/*
 * udp transport integration tests on the netns testbed (tools/testbed):
 *
 *            h1 10.77.0.1        h2 10.77.0.2        h3 10.77.0.3
 *               eth0                eth0                eth0
 *                |                   |                   |
 *               p1 ------------ br0 (switch ns) -------- p3
 *                                    |
 *                                   p2
 *
 * Every process runs in one host namespace (a forked child that setns()es
 * there).  Publishers send sequence-numbered, pattern-checked payloads; a
 * subscriber checks that every message arrives exactly once and in order, or
 * lies inside a reported loss range.  Loss, duplication and reordering come
 * from the library's receive-side impairment (context.udp.impair: the
 * "wrapping transport"), and from the testbed's links where the kernel has
 * the means (tb_impair).
 *
 * With FLIT_TEST_NET=xdp (tests/test_udp_xdp.sh) every case runs over the xdp
 * transport instead (AF_XDP data path, same sessions and reliability); the
 * few that are about the kernel socket path skip there, saying why.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nettest.h"
#include "codec.h"
#include "ctl.h"

#define N_BIG 100000

/* The io_uring backend moves the kernel sockets' datagrams: over xdp it
 * carries no data, so its cases run once, in the udp suite. */
static void skip_over_xdp(const char *why)
{
	if (nt_xdp(NULL)) {
		printf("# SKIP over xdp: %s\n", why);
		skip();
	}
}


static void two_hosts_deliver_100k_in_order(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .topic = "t.two", .n = N_BIG, .size = 64, .want_receivers = 1 };
	struct sub_spec ss = { .host = 2, .topic = "t.two" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 60000);
	check_result(&r, N_BIG, false, "h1->h2");
	assert_int_equal(r.first_seq, 0);
}

static void multicast_fans_out_to_two_hosts(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .topic = "t.fan", .n = N_BIG, .size = 100,
			       .want_receivers = 2, .src_cfg = "batch = true" };
	struct sub_spec ss[2] = { { .host = 2, .topic = "t.fan" }, { .host = 3, .topic = "t.fan" } };
	struct sub_result r[2];
	run(&pa, ss, 2, r, 60000);
	check_result(&r[0], N_BIG, false, "h1->h2");
	check_result(&r[1], N_BIG, false, "h1->h3");
}

static void late_joiner_finds_running_source(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .topic = "t.late", .n = 1500, .size = 32, .gap_us = 1000 };
	struct sub_spec ss = { .host = 3, .topic = "t.late", .delay_ms = 400 };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 20000);
	check_result(&r, pa.n, false, "late h3");
	assert_true(r.first_seq > 0);
}

/* Late join: a source with source.late_join = 10000 has sent 1,000,000
 * messages (batched) when the receiver (receiver.late_join) joins: it gets
 * exactly the last 10,000, marked, then the live stream, no gap, no
 * duplicate, in order. */
#define LJ_BULK 1000000
#define LJ_LIVE 1000
static void pub_bulk_then_live(const struct pub_args *a, int stop)
{
	unsigned char buf[64];
	if (tb_enter(tb, a->host))
		_exit(3);
	flit_ctx *ctx = net_ctx_on(a->transport, a->cfg);
	FLIT_OPTS(flit_pub_opts, po, .transport = a->transport ? a->transport : nt_default(),
		  .config = a->src_cfg);
	flit_pub *pub = ctx ? flit_pub_new(ctx, a->topic, &po) : NULL;
	if (!pub) {
		fprintf(stderr, "publisher: %s\n", flit_errmsg());
		_exit(5);
	}
	for (uint64_t i = 0; i < a->n; i++) {
		if (i == LJ_BULK) {
			/* the bulk is out: wait for the late joiner, then go live */
			flit_pub_flush(pub);
			uint64_t end = tl_now_ms() + 20000;
			while (flit_pub_receivers(pub) < 1 && tl_now_ms() < end)
				usleep(1000);
			if (flit_pub_receivers(pub) < 1)
				_exit(6);
		}
		tl_fill(buf, a->size, i);
		int r;
		while ((r = flit_pub_send(pub, buf, a->size)) != 0) {
			if (r < 0)
				_exit(7);
			flit_ctx_poll(ctx, 0);
		}
		if (i >= LJ_BULK)
			usleep(200);
	}
	flit_pub_flush(pub);
	struct pollfd p = { .fd = stop, .events = POLLIN };
	while (poll(&p, 1, 100) == 0)
		flit_ctx_poll(ctx, 0);
	flit_pub_close(pub);
	flit_ctx_close(ctx);
	_exit(0);
}

static void late_join(const char *sub_cfg, const char *what)
{
	struct pub_args pa = { .host = 1, .topic = "t.lj", .n = LJ_BULK + LJ_LIVE, .size = 16,
			       .src_cfg = "late_join = 10000\nbatch = true\nudp.batch_interval_us = 100",
			       .main = pub_bulk_then_live };
	/* joins once the bulk is (mostly) out: whatever it has sent by then,
	 * the receiver gets its last 10,000 */
	struct sub_spec ss = { .host = 2, .topic = "t.lj", .cfg = sub_cfg, .delay_ms = 1500 };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 60000);
	check_result(&r, pa.n, false, what);
	printf("# %s: first %llu, %llu retained then live from %llu; first message %llu ms after "
	       "the subscriber was created; %llu NAKs sent\n", what,
	       (unsigned long long)r.first_seq, (unsigned long long)r.late,
	       (unsigned long long)r.first_live, (unsigned long long)r.join_ms,
	       (unsigned long long)r.c.naks_sent);
	assert_int_equal(r.late, 10000);
	assert_int_equal(r.first_live, r.first_seq + 10000);
	assert_true(r.first_live <= LJ_BULK);
	assert_int_equal(r.delivered, pa.n - r.first_seq);
}

static void late_join_gets_the_last_10000_then_live(void **state)
{
	(void)state;
	late_join("receiver.late_join = on\n", "late join");
}

static void late_join_under_5pct_loss(void **state)
{
	(void)state;
	late_join("receiver.late_join = on\ncontext.udp.impair = loss=5%,seed=11\n", "late join, 5% loss");
}

/* A subscriber older than its source starts at the source's first message,
 * even though the source did not wait for it. */
static void subscriber_older_than_source_gets_the_first_message(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .topic = "t.first", .n = 2000, .size = 32 };
	struct sub_spec ss = { .host = 2, .topic = "t.first" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 20000);
	check_result(&r, pa.n, false, "subscriber first");
	assert_int_equal(r.first_seq, 0);
	assert_int_equal(r.delivered, pa.n);
	assert_int_equal(r.late, 0);
}

static void wildcard_finds_topic_created_later(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .topic = "wild.new", .n = 5000, .size = 48, .want_receivers = 1 };
	struct sub_spec ss = { .host = 2, .topic = "wild.*", .pattern = true };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 20000);
	check_result(&r, pa.n, false, "wildcard");
}

static void static_map_multicast_without_resolver(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .topic = "st.m", .n = 5000, .size = 40, .want_receivers = 1,
			       .cfg = "context.udp.resolver = off",
			       .src_cfg = "udp.group = 239.192.88.8\nudp.port = 14500" };
	struct sub_spec ss = { .host = 2, .topic = "st.m",
			       .cfg = "context.udp.resolver = off\n[receiver \"st.*\"]\nudp.static = 239.192.88.8:14500\n" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 20000);
	check_result(&r, pa.n, false, "static multicast");
}

static void static_map_unicast_source(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .topic = "st.u", .n = 5000, .size = 40, .want_receivers = 1,
			       .cfg = "context.udp.resolver = off",
			       .src_cfg = "udp.mode = unicast\nudp.ctl_port = 14600" };
	struct sub_spec ss = { .host = 3, .topic = "st.u",
			       .cfg = "context.udp.resolver = off\n[receiver \"st.u\"]\nudp.static = 10.77.0.1:14600\n" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 20000);
	check_result(&r, pa.n, false, "static unicast");
}

/* Loss with duplication and reordering on the receiver's side. */
static void lossy(const char *backend, double loss, bool allow_loss, bool batch)
{
	char cfg[256], what[64];
	snprintf(cfg, sizeof(cfg), "context.udp.backend = %s\ncontext.udp.impair = loss=%g%%,dup=1%%,reorder=2%%,seed=%d\n",
		 backend, loss, (int)(loss * 10) + 1);
	char pcfg[128];
	snprintf(pcfg, sizeof(pcfg), "context.udp.backend = %s\n", backend);
	struct pub_args pa = { .host = 1, .topic = "t.loss", .n = N_BIG, .size = 56, .want_receivers = 1,
			       .cfg = pcfg, .src_cfg = batch ? "batch = true\nudp.batch_min = 256" : NULL };
	struct sub_spec ss = { .host = 2, .topic = "t.loss", .cfg = cfg };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 90000);
	snprintf(what, sizeof(what), "%s loss %g%%%s", backend, loss, batch ? " batched" : "");
	check_result(&r, N_BIG, allow_loss, what);
	assert_true(r.c.naks_sent > 0);
	assert_true(r.retx > 0);
}

static void loss_1pct_is_repaired(void **state) { (void)state; lossy("sockets", 1, false, false); }
static void loss_5pct_is_repaired(void **state) { (void)state; lossy("sockets", 5, false, false); }
static void loss_20pct_delivers_or_reports(void **state) { (void)state; lossy("sockets", 20, true, true); }
static void io_uring_loss_5pct_is_repaired(void **state)
{
	(void)state;
	skip_over_xdp("the io_uring backend carries no data over xdp");
	lossy("io_uring", 5, false, false);
}

static void io_uring_loss_20pct_delivers_or_reports(void **state)
{
	(void)state;
	skip_over_xdp("the io_uring backend carries no data over xdp");
	lossy("io_uring", 20, true, true);
}

static void io_uring_two_hosts_deliver_in_order(void **state)
{
	(void)state;
	skip_over_xdp("the io_uring backend carries no data over xdp");
	struct pub_args pa = { .host = 1, .topic = "t.ur", .n = N_BIG, .size = 64, .want_receivers = 1,
			       .cfg = "context.udp.backend = io_uring" };
	struct sub_spec ss = { .host = 2, .topic = "t.ur", .cfg = "context.udp.backend = io_uring" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 60000);
	check_result(&r, N_BIG, false, "io_uring h1->h2");
}

/* Loss on the testbed's link (nftables or netem), not in the library. */
static void link_loss_5pct_is_repaired(void **state)
{
	(void)state;
	int rc = tb_impair(tb, 2, "--loss 5 --dup 1");
	if (rc) {
		printf("# SKIP link impairment unavailable (testbed exit %d)\n", rc);
		skip();
	}
	struct pub_args pa = { .host = 1, .topic = "t.link", .n = N_BIG, .size = 64, .want_receivers = 1 };
	struct sub_spec ss = { .host = 2, .topic = "t.link" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 90000);
	tb_impair(tb, 2, "--clear");
	check_result(&r, N_BIG, false, "link loss 5%");
	assert_true(r.c.naks_sent > 0);
}

static void kernel_timestamps_reach_the_message(void **state)
{
	(void)state;
	skip_over_xdp("kernel receive stamps come with kernel sockets (AF_XDP stamps are NIC metadata)");
	struct pub_args pa = { .host = 1, .topic = "t.ts", .n = 2000, .size = 32, .want_receivers = 1 };
	struct sub_spec ss = { .host = 2, .topic = "t.ts", .cfg = "context.udp.timestamps = software" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 20000);
	check_result(&r, pa.n, false, "timestamps");
	/* the kernel turns stamping on asynchronously: the first few may lack it */
	assert_true(r.kernel_ts > pa.n / 2);
	assert_int_equal(r.ts_off, 0);
}

/* A source that closes at once: what the receiver misses at that moment is
 * reported lost (the END heartbeat), never silently dropped. */
static void source_close_reports_the_missing_tail(void **state)
{
	(void)state;
	struct pub_args pa = { .host = 1, .topic = "t.end", .n = 3000, .size = 40, .want_receivers = 1,
			       .close_now = true };
	struct sub_spec ss = { .host = 2, .topic = "t.end",
			       .cfg = "context.udp.impair = loss=20%,seed=5\n" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 20000);
	check_result(&r, pa.n, true, "close at once, 20% loss");
}

/* claim/commit over udp: a claim does not hold up other calls. */
static void claim_leaves_other_calls_free(void **state)
{
	(void)state;
	pid_t pid = tl_fork();
	if (pid == 0) {
		alarm(10);
		if (tb_enter(tb, 1))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.udp.resolver = off");
		FLIT_OPTS(flit_pub_opts, po, .transport = nt_default());
		flit_pub *pub = flit_pub_new(ctx, "t.claim", &po);
		void *buf;
		if (!pub || flit_pub_claim(pub, 64, &buf))
			_exit(4);
		memset(buf, 7, 64);
		struct flit_counters c = { .sz = sizeof(c) };
		if (flit_pub_send(pub, "x", 1) != -EBUSY || flit_pub_flush(pub) != 0 ||
		    flit_ctx_counters(ctx, &c) || flit_ctx_poll(ctx, 0) < 0 ||
		    flit_pub_receivers(pub) != 0)
			_exit(5);
		if (flit_pub_commit(pub, 64) || flit_pub_send(pub, "x", 1))
			_exit(6);
		flit_ctx_counters(ctx, &c);
		if (c.msgs_sent != 2 || flit_pub_next_seq(pub) != 2)
			_exit(7);
		if (flit_pub_claim(pub, 8, &buf) || flit_pub_abort(pub) || flit_pub_commit(pub, 8) != -EINVAL)
			_exit(8);
		flit_pub_close(pub);
		flit_ctx_close(ctx);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* Child: count resolver-channel datagrams in h3 for `ms`, in two halves. */
static void count_resolver(int fd, unsigned ms)
{
	if (tb_enter(tb, 3))
		_exit(3);
	int s = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(14400) };
	bind(s, (struct sockaddr *)&a, sizeof(a));
	struct ip_mreqn m = { 0 };
	inet_pton(AF_INET, "239.192.76.1", &m.imr_multiaddr);
	setsockopt(s, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
	uint64_t half[2] = { 0, 0 }, t0 = tl_now_ms();
	char b[2048];
	for (;;) {
		uint64_t el = tl_now_ms() - t0;
		if (el >= ms)
			break;
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 50) > 0 && recv(s, b, sizeof(b), 0) > 0)
			half[el >= ms / 2]++;
	}
	if (write(fd, half, sizeof(half)) != sizeof(half))
		_exit(6);
	_exit(0);
}

static void resolution_traffic_backs_off(void **state)
{
	(void)state;
	int p[2], stop[2];
	uint64_t half[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(pipe(stop), 0);
	/* a source and a wildcard subscriber (which never stops asking) */
	pid_t pub = tl_fork();
	if (pub == 0) {
		struct pub_args pa = { .host = 1, .topic = "t.quiet", .n = 1, .size = 8 };
		close(stop[1]);
		pub_main(&pa, stop[0]);
	}
	close(stop[0]);
	pid_t sub = tl_fork();
	if (sub == 0) {
		close(p[0]);
		sub_main(2, NULL, "nothing.*", true, 1, NULL, -1, 6000);
	}
	pid_t cnt = tl_fork();
	if (cnt == 0)
		count_resolver(p[1], 6000);
	close(p[1]);
	assert_int_equal(read(p[0], half, sizeof(half)), sizeof(half));
	close(stop[1]);
	int st;
	waitpid(cnt, &st, 0);
	waitpid(pub, &st, 0);
	kill(sub, SIGKILL);
	waitpid(sub, &st, 0);
	printf("# resolver datagrams: first 3 s %llu, next 3 s %llu\n",
	       (unsigned long long)half[0], (unsigned long long)half[1]);
	assert_true(half[0] > 0);
	/* 10 ms doubling: ~9 adverts and ~9 queries early, then 1-2 each */
	assert_true(half[1] < half[0]);
	assert_true(half[1] <= 8);
}

/* source.udp.rate_limit: sends over the rate are refused, not queued. */
static void rate_limit_bounds_the_send_rate(void **state)
{
	(void)state;
	pid_t pid = tl_fork();
	if (pid == 0) {
		if (tb_enter(tb, 1))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.udp.resolver = off");
		FLIT_OPTS(flit_pub_opts, po, .transport = nt_default(), .config = "udp.rate_limit = 8M");
		flit_pub *pub = flit_pub_new(ctx, "t.rate", &po);
		if (!pub)
			_exit(4);
		unsigned char buf[1000] = { 0 };
		uint64_t ok = 0, bp = 0, t0 = tl_now_ms();
		while (tl_now_ms() - t0 < 1000) {
			int r = flit_pub_send(pub, buf, sizeof(buf));
			if (r == 0)
				ok++;
			else if (r == FLIT_BACK_PRESSURED)
				bp++;
			else
				_exit(5);
		}
		struct flit_counters c = { .sz = sizeof(c) };
		flit_ctx_counters(ctx, &c);
		printf("# 1 s at 8 Mbit/s: %llu sent, %llu refused, rate_limited %llu\n",
		       (unsigned long long)ok, (unsigned long long)bp, (unsigned long long)c.rate_limited);
		fflush(stdout);
		/* 1 MB/s of 1032-byte datagrams: ~970 in a second, plus a 10 ms
		 * burst; generous bounds for a noisy machine */
		_exit(ok >= 700 && ok <= 1200 && bp > 0 && c.rate_limited == bp ? 0 : 6);
	}
	int st;
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* Child in h3: listen to the group, then attack the session it hears. */
static void attacker_main(const char *group, uint16_t port)
{
	if (tb_enter(tb, 3))
		_exit(3);
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	struct ip_mreqn m = { 0 };
	inet_pton(AF_INET, group, &m.imr_multiaddr);
	setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	uint8_t f[2048] __attribute__((aligned(8)));
	struct sockaddr_in src;
	socklen_t sl = sizeof(src);
	ssize_t n;
	do
		n = recvfrom(fd, f, sizeof(f), 0, (struct sockaddr *)&src, &sl);
	while (n > 0 && (n < 24 || f[3] != FLIT_FT_DATA));
	if (n <= 0)
		_exit(8);
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, group, &dst.sin_addr);
	uint8_t g[2048] __attribute__((aligned(8)));
	for (int round = 0; round < 50; round++) {
		/* foreign application on the same group:port */
		sendto(fd, "hello, not flit", 15, 0, (struct sockaddr *)&dst, sizeof(dst));
		/* truncated frame */
		sendto(fd, f, (size_t)n - 8, 0, (struct sockaddr *)&dst, sizeof(dst));
		/* unknown version */
		memcpy(g, f, (size_t)n);
		g[2] = 9;
		sendto(fd, g, (size_t)n, 0, (struct sockaddr *)&dst, sizeof(dst));
		/* count lies */
		memcpy(g, f, (size_t)n);
		flit_st16(g + 6, 7);
		sendto(fd, g, (size_t)n, 0, (struct sockaddr *)&dst, sizeof(dst));
		/* NAKs for never-sent and long-gone sequence numbers, to the
		 * source's own socket, and a flood of them */
		struct flit_seq_range r[2] = { { .first = 1ull << 40, .n = 1000 }, { .first = 0, .n = 1 } };
		size_t l = flit_ctl_ranges_encode(g, sizeof(g), FLIT_FT_NAK, flit_ld32(f + 12), 0, r, 2);
		for (int k = 0; k < 200; k++)
			sendto(fd, g, l, 0, (struct sockaddr *)&src, sizeof(src));
		usleep(10000);
	}
	_exit(0);
}

static void bad_input_is_dropped_and_counted(void **state)
{
	(void)state;
	pid_t att = tl_fork();
	if (att == 0)
		attacker_main("239.192.88.9", 14700);
	struct pub_args pa = { .host = 1, .topic = "t.bad", .n = 20000, .size = 64, .want_receivers = 1,
			       .gap_us = 30, .src_cfg = "udp.group = 239.192.88.9\nudp.port = 14700" };
	struct sub_spec ss = { .host = 2, .topic = "t.bad" };
	struct sub_result r;
	run(&pa, &ss, 1, &r, 60000);
	int status;
	waitpid(att, &status, 0);
	check_result(&r, pa.n, false, "under attack");
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(r.c.foreign_dropped > 0);
	/* over xdp, malformed flit frames are dropped by the program */
	assert_true(r.c.malformed > 0 || r.xdp[FLIT_XDP_MALFORMED] > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(two_hosts_deliver_100k_in_order),
		cmocka_unit_test(multicast_fans_out_to_two_hosts),
		cmocka_unit_test(late_joiner_finds_running_source),
		cmocka_unit_test(late_join_gets_the_last_10000_then_live),
		cmocka_unit_test(late_join_under_5pct_loss),
		cmocka_unit_test(subscriber_older_than_source_gets_the_first_message),
		cmocka_unit_test(wildcard_finds_topic_created_later),
		cmocka_unit_test(static_map_multicast_without_resolver),
		cmocka_unit_test(static_map_unicast_source),
		cmocka_unit_test(loss_1pct_is_repaired),
		cmocka_unit_test(loss_5pct_is_repaired),
		cmocka_unit_test(loss_20pct_delivers_or_reports),
		cmocka_unit_test(io_uring_two_hosts_deliver_in_order),
		cmocka_unit_test(io_uring_loss_5pct_is_repaired),
		cmocka_unit_test(io_uring_loss_20pct_delivers_or_reports),
		cmocka_unit_test(link_loss_5pct_is_repaired),
		cmocka_unit_test(bad_input_is_dropped_and_counted),
		cmocka_unit_test(kernel_timestamps_reach_the_message),
		cmocka_unit_test(resolution_traffic_backs_off),
		cmocka_unit_test(rate_limit_bounds_the_send_rate),
		cmocka_unit_test(source_close_reports_the_missing_tail),
		cmocka_unit_test(claim_leaves_other_calls_free),
	};
	return nt_suite("u", tests, sizeof(tests) / sizeof(tests[0]));
}
