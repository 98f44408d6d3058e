// SPDX-License-Identifier: BSD-2-Clause
/*
 * Datagram I/O tests (transports/udp/udp_io.h): every behaviour runs over
 * both backends, from one table (sockets, io_uring), on 127.0.0.1 with
 * ephemeral ports.  Where io_uring cannot be set up here, its tests are
 * cmocka skips that say why, not failures.
 *
 * Payloads are checkable: a datagram carries its id (its length, or a
 * sequence number in its first 8 bytes) and a pattern derived from it, so
 * a torn, shifted or mixed-up delivery is caught byte by byte.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"
#include "udp/udp_io.h"

struct backend {
	enum flit_udp_backend b;
	const char *name;
	bool single;    /* io_uring: one RECVMSG per datagram (the fallback) */
	bool ring_send; /* io_uring: SEND requests through the ring */
	bool poll_recv; /* io_uring: readiness by a multishot poll, recvmmsg */
};
static struct backend B_SOCKETS = { FLIT_UDP_SOCKETS, "sockets", false, false, false };
static struct backend B_URING = { FLIT_UDP_URING, "io_uring", false, false, false };
static struct backend B_URING1 = { FLIT_UDP_URING, "io_uring, one recvmsg per datagram", true, false, false };
static struct backend B_URINGR = { FLIT_UDP_URING, "io_uring, sends through the ring", false, true, false };
static struct backend B_URINGP = { FLIT_UDP_URING, "io_uring, readiness by a poll", false, false, true };
static struct backend B_URINGPR = { FLIT_UDP_URING, "io_uring, readiness by a poll, ring sends", false, true, true };

#define MAXD 256

static uint8_t pat(unsigned id, size_t j)
{
	return (uint8_t)(id * 131u + j * 7u + 1u);
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Voluntary context switches of this thread: a call that blocked slept,
 * one that was only preempted (the machine is shared) did not. */
static long vcsw(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw;
}

/* A UDP socket bound to 127.0.0.1 on an ephemeral port. */
static int udp_bound(struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)a, sizeof(*a)), 0);
	socklen_t l = sizeof(*a);
	assert_int_equal(getsockname(fd, (struct sockaddr *)a, &l), 0);
	return fd;
}

static void set_buf(int fd, int opt_force, int opt, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
		assert_int_equal(setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes)), 0);
}

static struct flit_udp_io_cfg cfg_of(void **state, unsigned batch, unsigned dgram_max)
{
	const struct backend *be = *state;
	struct flit_udp_io_cfg c = {
		.backend = be->b, .batch = batch, .dgram_max = dgram_max,
		.uring_single_recv = be->single,
		.uring_ring_send = be->ring_send,
		.uring_poll_recv = be->poll_recv,
	};
	return c;
}

/* Open fd with cfg; an io_uring backend that is not usable here makes the
 * test a skip (first open of a test only: nothing to clean up yet). */
static struct flit_udp_io *open_or_skip(int fd, const struct flit_udp_io_cfg *cfg)
{
	struct flit_udp_io *io = NULL;
	int r = flit_udp_io_open(fd, cfg, &io);
	if (r == -EOPNOTSUPP && cfg->backend == FLIT_UDP_URING) {
		printf("SKIP: io_uring backend unavailable: %s\n", flit_errmsg());
		skip();
	}
	if (r)
		fail_msg("flit_udp_io_open: %d %s", r, flit_errmsg());
	assert_non_null(io);
	return io;
}

struct pair {
	struct flit_udp_io *rx, *tx;
	struct sockaddr_in rx_addr, tx_addr;
};

static void pair_open(struct pair *p, const struct flit_udp_io_cfg *rxcfg,
		      const struct flit_udp_io_cfg *txcfg)
{
	int rfd = udp_bound(&p->rx_addr);
	set_buf(rfd, SO_RCVBUFFORCE, SO_RCVBUF, 8 << 20);
	p->rx = open_or_skip(rfd, rxcfg);
	p->tx = open_or_skip(udp_bound(&p->tx_addr), txcfg);
}

static void pair_close(struct pair *p)
{
	flit_udp_io_close(p->rx);
	flit_udp_io_close(p->tx);
}

static struct flit_udp_io_stats stats(const struct flit_udp_io *io)
{
	struct flit_udp_io_stats s;
	flit_udp_io_stats(io, &s);
	return s;
}

/* Send all of d (looping on partial counts), failing the test on error. */
static void send_all(struct flit_udp_io *io, const struct flit_dgram *d, unsigned n)
{
	uint64_t end = tl_now_ms() + 2000;
	unsigned done = 0;
	while (done < n) {
		int r = flit_udp_io_send(io, d + done, n - done);
		if (r < 0)
			fail_msg("flit_udp_io_send: %d %s", r, flit_errmsg());
		done += (unsigned)r;
		assert_true(tl_now_ms() < end);
	}
}

typedef void (*dgram_fn)(const struct flit_dgram *d, unsigned n, void *arg);

/* Receive until `until(arg)` or ms pass; fn sees every batch (its views
 * expire at the next recv). */
static void recv_loop(struct flit_udp_io *io, unsigned ms, bool (*until)(void *),
		      dgram_fn fn, void *arg)
{
	struct flit_dgram d[MAXD];
	uint64_t end = tl_now_ms() + ms;
	while (!until(arg) && tl_now_ms() < end) {
		int r = flit_udp_io_recv(io, d, MAXD);
		if (r < 0)
			fail_msg("flit_udp_io_recv: %d %s", r, flit_errmsg());
		if (r > 0)
			fn(d, (unsigned)r, arg);
	}
}

/* ---- round trip ---------------------------------------------------------- */

struct rt {
	unsigned sizes[64], got, seen[64], order[64];
	struct sockaddr_in from;
};

static bool rt_done(void *arg)
{
	return ((struct rt *)arg)->got >= 64;
}

static void rt_check(const struct flit_dgram *d, unsigned n, void *arg)
{
	struct rt *t = arg;
	for (unsigned i = 0; i < n; i++) {
		unsigned id = 64;
		for (unsigned k = 0; k < 64; k++)
			if (t->sizes[k] == d[i].len)
				id = k;
		if (id == 64)
			fail_msg("datagram of unexpected length %u", d[i].len);
		const uint8_t *b = d[i].buf;
		for (size_t j = 0; j < d[i].len; j++)
			if (b[j] != pat(id, j))
				fail_msg("datagram %u byte %zu: %#x, want %#x", id, j, b[j], pat(id, j));
		assert_int_equal(d[i].addr.sin_family, AF_INET);
		assert_int_equal(d[i].addr.sin_port, t->from.sin_port);
		assert_int_equal(d[i].addr.sin_addr.s_addr, t->from.sin_addr.s_addr);
		assert_int_equal(d[i].rx_ts_ns, 0);
		t->seen[id]++;
		assert_true(t->got < 64);
		t->order[t->got++] = id;
	}
}

static void batch_of_64_sized_1_to_1472_round_trips_with_sender_address(void **state)
{
	struct flit_udp_io_cfg c = cfg_of(state, 64, 1472);
	struct pair p;
	pair_open(&p, &c, &c);

	static uint8_t bufs[64][1472];
	struct flit_dgram d[64];
	struct rt t = { .from = p.tx_addr };
	uint64_t bytes = 0;
	for (unsigned i = 0; i < 64; i++) {
		t.sizes[i] = 1 + i * 1471 / 63;
		for (size_t j = 0; j < t.sizes[i]; j++)
			bufs[i][j] = pat(i, j);
		d[i] = (struct flit_dgram){ .buf = bufs[i], .len = t.sizes[i], .addr = p.rx_addr };
		bytes += t.sizes[i];
	}
	assert_int_equal(t.sizes[0], 1);
	assert_int_equal(t.sizes[63], 1472);

	assert_int_equal(flit_udp_io_send(p.tx, d, 64), 64);
	/* the data was copied or handed over: scribbling on it now is fine */
	memset(bufs, 0xee, sizeof(bufs));
	struct flit_udp_io_stats ts = stats(p.tx);
	assert_int_equal(ts.tx_dgrams, 64);
	assert_int_equal(ts.tx_bytes, bytes);
	assert_int_equal(ts.tx_errors, 0);

	recv_loop(p.rx, 2000, rt_done, rt_check, &t);
	assert_int_equal(t.got, 64);
	for (unsigned i = 0; i < 64; i++)
		assert_int_equal(t.seen[i], 1);
	/* loopback keeps order, and so must both backends */
	for (unsigned i = 0; i < 64; i++)
		assert_int_equal(t.order[i], i);
	struct flit_udp_io_stats rs = stats(p.rx);
	assert_int_equal(rs.rx_dgrams, 64);
	assert_int_equal(rs.rx_bytes, bytes);
	assert_int_equal(rs.rx_truncated, 0);
	pair_close(&p);
}

/* ---- nothing pending ------------------------------------------------------ */

static void recv_with_nothing_pending_returns_0_without_blocking(void **state)
{
	struct flit_udp_io_cfg c = cfg_of(state, 32, 1472);
	struct sockaddr_in a;
	struct flit_udp_io *io = open_or_skip(udp_bound(&a), &c);
	struct flit_dgram d[32];

	long v0 = vcsw();
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < 3; i++)
		assert_int_equal(flit_udp_io_recv(io, d, 32), 0);
	uint64_t sys0 = stats(io).syscalls;
	for (int i = 0; i < 1000; i++)
		assert_int_equal(flit_udp_io_recv(io, d, 32), 0);
	uint64_t dt = now_ns(CLOCK_MONOTONIC) - t0;
	long slept = vcsw() - v0;
	uint64_t sys = stats(io).syscalls - sys0;
	printf("# %s: 1003 empty recv calls in %.1f us, %llu syscalls for the last 1000\n",
	       flit_udp_io_describe(io), dt / 1e3, (unsigned long long)sys);
	assert_true(dt < 50ull * 1000000);
	assert_int_equal(slept, 0);   /* never slept */
	/* at most one syscall per call; with DEFER_TASKRUN + TASKRUN_FLAG
	 * the kernel tells us when nothing can be pending: none at all */
	assert_true(sys <= 1000);
	if (strstr(flit_udp_io_describe(io), "(defer_taskrun, single_issuer"))
		assert_int_equal(sys, 0);
	flit_udp_io_close(io);
}

/* ---- zero-length requests --------------------------------------------------- */

static void send_and_recv_of_zero_datagrams_are_no_ops(void **state)
{
	struct flit_udp_io_cfg c = cfg_of(state, 8, 1472);
	struct pair p;
	pair_open(&p, &c, &c);
	struct flit_udp_io_stats r0 = stats(p.rx), t0 = stats(p.tx);

	assert_int_equal(flit_udp_io_recv(p.rx, NULL, 0), 0);
	assert_int_equal(flit_udp_io_send(p.tx, NULL, 0), 0);

	struct flit_udp_io_stats r1 = stats(p.rx), t1 = stats(p.tx);
	assert_memory_equal(&r0, &r1, sizeof(r0));
	assert_memory_equal(&t0, &t1, sizeof(t0));
	pair_close(&p);
}

/* ---- oversize ---------------------------------------------------------------- */

struct one {
	unsigned got;
	uint32_t len;
	uint8_t first;
};

static bool one_done(void *arg)
{
	return ((struct one *)arg)->got >= 1;
}

static void one_take(const struct flit_dgram *d, unsigned n, void *arg)
{
	struct one *o = arg;
	for (unsigned i = 0; i < n; i++) {
		o->got++;
		o->len = d[i].len;
		o->first = *(const uint8_t *)d[i].buf;
	}
}

static void oversize_datagram_is_dropped_and_counted_and_the_next_arrives(void **state)
{
	struct flit_udp_io_cfg rc = cfg_of(state, 16, 512), tc = cfg_of(state, 16, 1472);
	struct pair p;
	pair_open(&p, &rc, &tc);

	static uint8_t big[1000], small[100];
	memset(big, 0xbb, sizeof(big));
	memset(small, 0x55, sizeof(small));
	struct flit_dgram d[2] = {
		{ .buf = big, .len = sizeof(big), .addr = p.rx_addr },
		{ .buf = small, .len = sizeof(small), .addr = p.rx_addr },
	};
	send_all(p.tx, d, 2);

	struct one o = { 0 };
	recv_loop(p.rx, 2000, one_done, one_take, &o);
	assert_int_equal(o.got, 1);
	assert_int_equal(o.len, 100);
	assert_int_equal(o.first, 0x55);
	/* a datagram of exactly dgram_max bytes is not truncated */
	static uint8_t edge[512];
	memset(edge, 0x77, sizeof(edge));
	d[0] = (struct flit_dgram){ .buf = edge, .len = sizeof(edge), .addr = p.rx_addr };
	send_all(p.tx, d, 1);
	o = (struct one){ 0 };
	recv_loop(p.rx, 2000, one_done, one_take, &o);
	assert_int_equal(o.got, 1);
	assert_int_equal(o.len, 512);
	assert_int_equal(o.first, 0x77);

	struct flit_udp_io_stats s = stats(p.rx);
	assert_int_equal(s.rx_truncated, 1);
	assert_int_equal(s.rx_dgrams, 2);
	assert_int_equal(s.rx_bytes, 612);
	pair_close(&p);
}

/* ---- full socket buffer ------------------------------------------------------- */

/* UDP over loopback has no back-pressure: the sender's skb is orphaned as
 * it is handed to lo, and what the receiver has no room for is dropped
 * there.  A full send buffer, the case where send must return a partial
 * count, is made with a connected AF_UNIX datagram pair whose reader does
 * not read (its queue charges the sender).  Destination sin_family 0: the
 * connected peer. */
static void send_to_full_socket_buffer_returns_partial_count_without_blocking(void **state)
{
	struct flit_udp_io_cfg c = cfg_of(state, 64, 1472);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	set_buf(sv[0], SO_SNDBUFFORCE, SO_SNDBUF, 16384);
	set_buf(sv[1], SO_RCVBUFFORCE, SO_RCVBUF, 16384);
	struct flit_udp_io *io = open_or_skip(sv[0], &c);

	static uint8_t buf[64][1000];
	struct flit_dgram d[64];
	for (unsigned i = 0; i < 64; i++) {
		memset(buf[i], (int)i, sizeof(buf[i]));
		d[i] = (struct flit_dgram){ .buf = buf[i], .len = sizeof(buf[i]) };
	}
	unsigned taken = 0, calls = 0;
	int r = 64;
	uint64_t worst = 0;
	long v0 = vcsw();
	while (r == 64 && calls < 1000) {
		uint64_t t0 = now_ns(CLOCK_MONOTONIC);
		r = flit_udp_io_send(io, d, 64);
		uint64_t dt = now_ns(CLOCK_MONOTONIC) - t0;
		if (dt > worst)
			worst = dt;
		if (r < 0)
			fail_msg("flit_udp_io_send: %d %s", r, flit_errmsg());
		taken += (unsigned)r;
		calls++;
	}
	assert_true(r >= 0 && r < 64);
	/* and it stays full: nothing is taken, nothing blocks */
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < 100; i++) {
		int z = flit_udp_io_send(io, d, 64);
		assert_true(z >= 0 && z < 64);
		taken += (unsigned)z;
	}
	uint64_t dt = now_ns(CLOCK_MONOTONIC) - t0;
	long slept = vcsw() - v0;
	struct flit_udp_io_stats s = stats(io);
	printf("# %s: full after %u datagrams in %u calls, worst call %.1f us, "
	       "100 calls on a full buffer %.1f us\n", flit_udp_io_describe(io), taken, calls,
	       worst / 1e3, dt / 1e3);
	/* never slept; the time bounds only catch a gross stall, since a
	 * busy shared machine may preempt us for a while */
	assert_int_equal(slept, 0);
	assert_true(worst < 1000ull * 1000000);
	assert_true(dt < 1000ull * 1000000);
	assert_true(s.tx_eagain >= 1);
	assert_int_equal(s.tx_dgrams, taken);
	assert_int_equal(s.tx_errors, 0);

	/* Everything taken arrives once the reader reads: drain it, and let
	 * the io object run what the kernel held for it. */
	static uint8_t rb[2048];
	unsigned got = 0;
	uint64_t end = tl_now_ms() + 2000;
	while (got < taken && tl_now_ms() < end) {
		ssize_t n = recv(sv[1], rb, sizeof(rb), MSG_DONTWAIT);
		if (n >= 0) {
			assert_int_equal(n, 1000);
			got++;
			continue;
		}
		struct flit_dgram x[4];
		assert_true(flit_udp_io_recv(io, x, 4) >= 0);
	}
	assert_int_equal(got, taken);
	assert_true(recv(sv[1], rb, sizeof(rb), MSG_DONTWAIT) < 0);
	flit_udp_io_close(io);
	close(sv[1]);
}

struct cnt {
	unsigned got;
};

static bool never(void *arg)
{
	(void)arg;
	return false;
}

static void cnt_take(const struct flit_dgram *d, unsigned n, void *arg)
{
	(void)d;
	((struct cnt *)arg)->got += n;
}

static void send_to_unread_udp_socket_never_blocks(void **state)
{
	struct flit_udp_io_cfg c = cfg_of(state, 64, 1472);
	struct sockaddr_in ra, ta;
	int rfd = udp_bound(&ra);
	set_buf(rfd, SO_RCVBUFFORCE, SO_RCVBUF, 4096);
	int tfd = udp_bound(&ta);
	set_buf(tfd, SO_SNDBUFFORCE, SO_SNDBUF, 4096);
	struct flit_udp_io *tx = open_or_skip(tfd, &c);
	struct flit_udp_io *rx = open_or_skip(rfd, &c);

	static uint8_t buf[1472];
	struct flit_dgram d[64];
	for (unsigned i = 0; i < 64; i++)
		d[i] = (struct flit_dgram){ .buf = buf, .len = sizeof(buf), .addr = ra };
	unsigned taken = 0;
	uint64_t worst = 0;
	long v0 = vcsw();
	for (int i = 0; i < 200; i++) {
		uint64_t t0 = now_ns(CLOCK_MONOTONIC);
		int r = flit_udp_io_send(tx, d, 64);
		uint64_t dt = now_ns(CLOCK_MONOTONIC) - t0;
		worst = dt > worst ? dt : worst;
		if (r < 0)
			fail_msg("flit_udp_io_send: %d %s", r, flit_errmsg());
		assert_true(r <= 64);
		taken += (unsigned)r;
	}
	long slept = vcsw() - v0;
	struct cnt n = { 0 };
	recv_loop(rx, 100, never, cnt_take, &n);
	printf("# %s: took %u of 12800, receiver got %u, worst call %.1f us\n",
	       flit_udp_io_describe(tx), taken, n.got, worst / 1e3);
	assert_int_equal(slept, 0);
	assert_true(worst < 1000ull * 1000000);
	assert_true(n.got < taken);   /* the rest was dropped at the receiver */
	flit_udp_io_close(tx);
	flit_udp_io_close(rx);
}

/* ---- ICMP errors ---------------------------------------------------------------- */

/* With IP_RECVERR an unconnected UDP socket learns of ICMP port
 * unreachables: the error fails the next send (or recv), whatever its
 * destination.  It must not wedge sending, nor cost the innocent datagram. */
static void icmp_error_from_a_dead_peer_does_not_wedge_sending(void **state)
{
	struct flit_udp_io_cfg c = cfg_of(state, 8, 1472);
	struct sockaddr_in dead, ra, ta;
	close(udp_bound(&dead));
	int rfd = udp_bound(&ra), tfd = udp_bound(&ta);
	int one = 1;
	assert_int_equal(setsockopt(tfd, IPPROTO_IP, IP_RECVERR, &one, sizeof(one)), 0);
	struct flit_udp_io *rx = open_or_skip(rfd, &c);
	struct flit_udp_io *tx = open_or_skip(tfd, &c);

	uint8_t buf[64];
	unsigned sent_live = 0;
	for (unsigned round = 0; round < 10; round++) {
		tl_fill(buf, sizeof(buf), round);
		struct flit_dgram d[2] = {
			{ .buf = buf, .len = sizeof(buf), .addr = dead },
			{ .buf = buf, .len = sizeof(buf), .addr = ra },
		};
		/* to the dead port first, then to the live one, in separate
		 * calls so the ICMP error is waiting for the second */
		int r = flit_udp_io_send(tx, &d[0], 1);
		assert_true(r == 1);
		r = flit_udp_io_send(tx, &d[1], 1);
		if (r < 0)
			fail_msg("send after ICMP error: %d %s", r, flit_errmsg());
		assert_int_equal(r, 1);
		sent_live++;
		/* the transport polls its socket: errors may surface there */
		struct flit_dgram x[4];
		int q = flit_udp_io_recv(tx, x, 4);
		if (q < 0)
			fail_msg("recv after ICMP error: %d %s", q, flit_errmsg());
		assert_int_equal(q, 0);
	}
	struct cnt n = { 0 };
	uint64_t end = tl_now_ms() + 2000;
	struct flit_dgram x[16];
	while (n.got < sent_live && tl_now_ms() < end) {
		int r = flit_udp_io_recv(rx, x, 16);
		assert_true(r >= 0);
		for (int i = 0; i < r; i++) {
			uint64_t seq = 0;
			assert_int_equal(tl_check(x[i].buf, x[i].len, &seq), 0);
			assert_int_equal(seq, n.got);
			n.got++;
		}
		/* completions of re-sent datagrams run when tx is polled */
		flit_udp_io_recv(tx, x, 16);
	}
	struct flit_udp_io_stats s = stats(tx);
	printf("# %s: %u live datagrams delivered, tx_errors %llu\n", flit_udp_io_describe(tx),
	       n.got, (unsigned long long)s.tx_errors);
	assert_int_equal(n.got, sent_live);
	assert_true(s.tx_errors >= 1);
	flit_udp_io_close(rx);
	flit_udp_io_close(tx);
}

/* ---- timestamps ----------------------------------------------------------------- */

struct tsc {
	unsigned got;
	bool on;
};

static bool tsc_done(void *arg)
{
	return ((struct tsc *)arg)->got >= 8;
}

static void tsc_check(const struct flit_dgram *d, unsigned n, void *arg)
{
	struct tsc *t = arg;
	uint64_t now = now_ns(CLOCK_REALTIME);
	for (unsigned i = 0; i < n; i++) {
		t->got++;
		assert_int_equal(d[i].rx_ts_hw_ns, 0);
		if (!t->on) {
			assert_int_equal(d[i].rx_ts_ns, 0);
			continue;
		}
		assert_true(d[i].rx_ts_ns != 0);
		uint64_t diff = now > d[i].rx_ts_ns ? now - d[i].rx_ts_ns : d[i].rx_ts_ns - now;
		if (diff >= 1000000000ull)
			fail_msg("rx stamp %llu is %llu ns away from CLOCK_REALTIME",
				 (unsigned long long)d[i].rx_ts_ns, (unsigned long long)diff);
	}
}

static void rx_timestamps(void **state, bool on)
{
	struct flit_udp_io_cfg rc = cfg_of(state, 8, 1472), tc = rc;
	rc.timestamps = on;
	struct pair p;
	pair_open(&p, &rc, &tc);
	uint8_t buf[8][100];
	struct flit_dgram d[8];
	for (unsigned i = 0; i < 8; i++) {
		tl_fill(buf[i], sizeof(buf[i]), i);
		d[i] = (struct flit_dgram){ .buf = buf[i], .len = sizeof(buf[i]), .addr = p.rx_addr };
	}
	/* The kernel switches its rx stamping on from a workqueue when the
	 * first socket asks for it: until then datagrams come unstamped (0,
	 * "none").  Wait for a stamped one before checking. */
	if (on) {
		struct flit_dgram x[8];
		bool stamped = false;
		uint64_t end = tl_now_ms() + 2000;
		while (!stamped && tl_now_ms() < end) {
			send_all(p.tx, d, 1);
			struct cnt n = { 0 };
			uint64_t e2 = tl_now_ms() + 100;
			while (!n.got && tl_now_ms() < e2) {
				int r = flit_udp_io_recv(p.rx, x, 8);
				assert_true(r >= 0);
				for (int i = 0; i < r; i++)
					stamped |= x[i].rx_ts_ns != 0;
				n.got += (unsigned)r;
			}
			usleep(1000);
		}
		assert_true(stamped);
	}
	send_all(p.tx, d, 8);
	struct tsc t = { .on = on };
	recv_loop(p.rx, 2000, tsc_done, tsc_check, &t);
	assert_int_equal(t.got, 8);
	pair_close(&p);
}

static void software_rx_timestamps_are_close_to_realtime_when_enabled(void **state)
{
	rx_timestamps(state, true);
}

static void rx_timestamps_are_0_when_disabled(void **state)
{
	rx_timestamps(state, false);
}

/* ---- impairment ----------------------------------------------------------------- */

#define IMP_N 5000
#define IMP_LEN 64

struct imp {
	struct flit_udp_io *rx;
	unsigned sent, delivered;
	uint16_t count[IMP_N];
	uint32_t order[2 * IMP_N];
};

static bool imp_caught_up(void *arg)
{
	struct imp *m = arg;
	return stats(m->rx).rx_dgrams >= m->sent;
}

static void imp_take(const struct flit_dgram *d, unsigned n, void *arg)
{
	struct imp *m = arg;
	for (unsigned i = 0; i < n; i++) {
		uint64_t seq = 0;
		assert_int_equal(d[i].len, IMP_LEN);
		if (tl_check(d[i].buf, d[i].len, &seq))
			fail_msg("impaired delivery %u: torn content", m->delivered);
		assert_true(seq < IMP_N);
		for (unsigned j = 0; j < i; j++)   /* a duplicate is a copy */
			assert_ptr_not_equal(d[i].buf, d[j].buf);
		m->count[seq]++;
		assert_true(m->delivered < 2 * IMP_N);
		m->order[m->delivered++] = (uint32_t)seq;
	}
}

/* Send IMP_N datagrams to an impaired receiver in chunks, receiving as it
 * goes so that the kernel never drops any (rx_dgrams counts every one the
 * kernel delivered), then poll a while longer for anything held back. */
static void imp_run(void **state, const struct flit_dgram_impair *im, struct imp *m)
{
	struct flit_udp_io_cfg rc = cfg_of(state, 64, 1472), tc = cfg_of(state, 64, 1472);
	rc.impair = *im;
	struct pair p;
	pair_open(&p, &rc, &tc);
	memset(m, 0, sizeof(*m));
	m->rx = p.rx;

	static uint8_t buf[50][IMP_LEN];
	struct flit_dgram d[50];
	for (unsigned base = 0; base < IMP_N; base += 50) {
		for (unsigned i = 0; i < 50; i++) {
			tl_fill(buf[i], IMP_LEN, base + i);
			d[i] = (struct flit_dgram){ .buf = buf[i], .len = IMP_LEN, .addr = p.rx_addr };
		}
		send_all(p.tx, d, 50);
		m->sent += 50;
		recv_loop(p.rx, 2000, imp_caught_up, imp_take, m);
		assert_int_equal(stats(p.rx).rx_dgrams, m->sent);
	}
	recv_loop(p.rx, 50, never, imp_take, m);
	struct flit_udp_io_stats s = stats(p.rx);
	printf("# %s: %u sent, %u delivered, dropped %llu, duplicated %llu, reordered %llu\n",
	       flit_udp_io_describe(p.rx), m->sent, m->delivered,
	       (unsigned long long)s.impair_dropped, (unsigned long long)s.impair_duplicated,
	       (unsigned long long)s.impair_reordered);
	assert_int_equal(s.rx_dgrams, IMP_N);
	assert_int_equal(s.rx_truncated, 0);
	assert_int_equal(m->delivered, IMP_N - s.impair_dropped + s.impair_duplicated);
	pair_close(&p);
}

static void loss_20_percent_drops_about_a_fifth_and_counts_each(void **state)
{
	struct flit_dgram_impair im = { .loss_bp = 2000, .seed = 42 };
	struct imp *m = malloc(sizeof(*m));
	assert_non_null(m);
	imp_run(state, &im, m);
	/* 15..25 % lost */
	assert_true(m->delivered >= IMP_N * 75 / 100);
	assert_true(m->delivered <= IMP_N * 85 / 100);
	unsigned lost = 0;
	for (unsigned i = 0; i < IMP_N; i++) {
		assert_true(m->count[i] <= 1);
		lost += m->count[i] == 0;
	}
	assert_int_equal(lost, IMP_N - m->delivered);
	for (unsigned i = 1; i < m->delivered; i++)   /* loss alone keeps order */
		assert_true(m->order[i] > m->order[i - 1]);
	free(m);
}

static void dup_10_percent_delivers_identical_copies(void **state)
{
	struct flit_dgram_impair im = { .dup_bp = 1000, .seed = 7 };
	struct imp *m = malloc(sizeof(*m));
	assert_non_null(m);
	imp_run(state, &im, m);
	unsigned twice = 0;
	for (unsigned i = 0; i < IMP_N; i++) {
		assert_true(m->count[i] == 1 || m->count[i] == 2);
		twice += m->count[i] == 2;
	}
	assert_int_equal(m->delivered, IMP_N + twice);
	assert_true(twice >= IMP_N * 7 / 100 && twice <= IMP_N * 13 / 100);
	free(m);
}

static void reorder_10_percent_loses_nothing_but_changes_order(void **state)
{
	struct flit_dgram_impair im = { .reorder_bp = 1000, .seed = 0 };
	struct imp *m = malloc(sizeof(*m));
	assert_non_null(m);
	imp_run(state, &im, m);
	assert_int_equal(m->delivered, IMP_N);
	for (unsigned i = 0; i < IMP_N; i++)
		assert_int_equal(m->count[i], 1);
	unsigned inversions = 0, worst = 0;
	for (unsigned p = 0; p < IMP_N; p++) {
		unsigned late = 0;   /* later datagrams delivered before this one */
		for (unsigned q = p >= 16 ? p - 16 : 0; q < p; q++)
			late += m->order[q] > m->order[p];
		inversions += late > 0;
		worst = late > worst ? late : worst;
	}
	printf("# %u datagrams came late, at most %u places\n", inversions, worst);
	assert_true(inversions >= IMP_N * 5 / 100);
	assert_true(worst >= 1 && worst <= 8);
	free(m);
}

/* Held datagram when traffic stops: it still comes out after a few calls. */
static void reordered_datagram_is_not_stuck_when_traffic_stops(void **state)
{
	struct flit_udp_io_cfg rc = cfg_of(state, 8, 1472), tc = rc;
	rc.impair = (struct flit_dgram_impair){ .reorder_bp = 10000, .seed = 3 };
	struct pair p;
	pair_open(&p, &rc, &tc);
	uint8_t buf[IMP_LEN];
	tl_fill(buf, sizeof(buf), 99);
	struct flit_dgram d = { .buf = buf, .len = sizeof(buf), .addr = p.rx_addr };
	send_all(p.tx, &d, 1);
	struct one o = { 0 };
	recv_loop(p.rx, 2000, one_done, one_take, &o);
	assert_int_equal(o.got, 1);
	assert_int_equal(o.len, IMP_LEN);
	assert_int_equal(stats(p.rx).impair_reordered, 1);
	pair_close(&p);
}

/* Same seed, same fate; seed 0 is a seed like any other. */
static void impairment_is_reproducible_from_its_seed(void **state)
{
	struct flit_dgram_impair im = { .loss_bp = 3000, .dup_bp = 500, .reorder_bp = 500, .seed = 0 };
	struct imp *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	assert_non_null(a);
	assert_non_null(b);
	imp_run(state, &im, a);
	imp_run(state, &im, b);
	/* which were lost and which doubled; the exact order may differ
	 * where a held datagram was let go because nothing arrived */
	assert_int_equal(a->delivered, b->delivered);
	assert_memory_equal(a->count, b->count, sizeof(a->count));
	free(a);
	free(b);
}

/* n = 1 still delivers everything, dups and held ones included. */
static void impaired_recv_of_one_at_a_time_loses_nothing_extra(void **state)
{
	struct flit_udp_io_cfg rc = cfg_of(state, 16, 1472), tc = rc;
	rc.impair = (struct flit_dgram_impair){ .dup_bp = 3000, .reorder_bp = 3000, .seed = 5 };
	struct pair p;
	pair_open(&p, &rc, &tc);
	static uint8_t buf[200][IMP_LEN];
	struct flit_dgram d[200];
	for (unsigned i = 0; i < 200; i++) {
		tl_fill(buf[i], IMP_LEN, i);
		d[i] = (struct flit_dgram){ .buf = buf[i], .len = IMP_LEN, .addr = p.rx_addr };
	}
	unsigned count[200] = { 0 }, total = 0;
	for (unsigned base = 0; base < 200; base += 10) {
		send_all(p.tx, d + base, 10);
		uint64_t end = tl_now_ms() + 500;
		while (tl_now_ms() < end && stats(p.rx).rx_dgrams < base + 10) {
			struct flit_dgram x;
			int r = flit_udp_io_recv(p.rx, &x, 1);
			assert_true(r == 0 || r == 1);
			if (r) {
				uint64_t seq = 0;
				assert_int_equal(tl_check(x.buf, x.len, &seq), 0);
				count[seq]++;
				total++;
			}
		}
	}
	for (int i = 0; i < 20; i++) {
		struct flit_dgram x;
		if (flit_udp_io_recv(p.rx, &x, 1) == 1) {
			uint64_t seq = 0;
			assert_int_equal(tl_check(x.buf, x.len, &seq), 0);
			count[seq]++;
			total++;
		}
	}
	struct flit_udp_io_stats s = stats(p.rx);
	assert_int_equal(s.rx_dgrams, 200);
	assert_int_equal(total, 200 + s.impair_duplicated);
	for (unsigned i = 0; i < 200; i++)
		assert_true(count[i] == 1 || count[i] == 2);
	pair_close(&p);
}

/* ---- threads -------------------------------------------------------------------- */

struct thr {
	struct pair *p;
	int r;
};

static void *thr_send(void *arg)
{
	struct thr *t = arg;
	uint8_t buf[IMP_LEN];
	tl_fill(buf, sizeof(buf), 1);
	struct flit_dgram d = { .buf = buf, .len = sizeof(buf), .addr = t->p->rx_addr };
	t->r = flit_udp_io_send(t->p->tx, &d, 1);
	return NULL;
}

static void *thr_recv(void *arg)
{
	struct thr *t = arg;
	struct flit_dgram x[4];
	t->r = flit_udp_io_recv(t->p->rx, x, 4);
	return NULL;
}

/* Receive one datagram on rx (this thread) and return its sequence number. */
static uint64_t recv_one_seq(struct flit_udp_io *rx)
{
	struct flit_dgram x[4];
	uint64_t end = tl_now_ms() + 2000, seq = ~0ull;
	int r = 0;
	while (r == 0 && tl_now_ms() < end)
		r = flit_udp_io_recv(rx, x, 4);
	if (r != 1)
		fail_msg("recv: %d %s", r, r < 0 ? flit_errmsg() : "");
	assert_int_equal(tl_check(x[0].buf, x[0].len, &seq), 0);
	return seq;
}

/* Opened on one thread (as a context would), used on others.  io_uring
 * with SINGLE_ISSUER is bound to the first thread that uses it: another
 * thread cannot receive on it (-EEXIST) but can still send (straight
 * through the socket), e.g. a service thread under the source's lock. */
static void io_object_opened_on_one_thread_works_on_another(void **state)
{
	const struct backend *be = *state;
	struct flit_udp_io_cfg c = cfg_of(state, 8, 1472);
	struct pair p;
	pair_open(&p, &c, &c);
	struct thr t = { .p = &p };
	pthread_t th;

	/* tx first used on thread A, rx on this one */
	assert_int_equal(pthread_create(&th, NULL, thr_send, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(t.r, 1);
	assert_int_equal(recv_one_seq(p.rx), 1);

	/* this thread sends on tx, which A used first */
	uint8_t buf[IMP_LEN];
	tl_fill(buf, sizeof(buf), 2);
	struct flit_dgram d = { .buf = buf, .len = sizeof(buf), .addr = p.rx_addr };
	assert_int_equal(flit_udp_io_send(p.tx, &d, 1), 1);
	assert_int_equal(stats(p.tx).tx_dgrams, 2);
	assert_int_equal(recv_one_seq(p.rx), 2);

	/* thread B receives on rx, which this thread used first */
	assert_int_equal(pthread_create(&th, NULL, thr_recv, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	if (be->b == FLIT_UDP_URING && strstr(flit_udp_io_describe(p.rx), "(defer_taskrun, single_issuer"))
		assert_int_equal(t.r, -EEXIST);
	else
		assert_int_equal(t.r, 0);
	pair_close(&p);
}

/* io_uring sending through the socket (the default) leaves the ring alone:
 * a send neither enters it nor binds it to the sending thread, so the
 * thread that receives first owns it even after another thread sent; with
 * sends through the ring the first sender owns it (SINGLE_ISSUER). */
static void uring_socket_sends_do_not_bind_the_ring_to_the_sender(void **state)
{
	const struct backend *be = *state;
	struct flit_udp_io_cfg c = cfg_of(state, 8, 1472);
	struct pair p;
	pair_open(&p, &c, &c);
	struct thr t = { .p = &p };
	pthread_t th;

	/* thread A sends on rx's io object first (to tx's address) */
	struct pair back = { .rx = p.tx, .tx = p.rx, .rx_addr = p.tx_addr, .tx_addr = p.rx_addr };
	t.p = &back;
	uint64_t s0 = stats(p.rx).syscalls;
	assert_int_equal(pthread_create(&th, NULL, thr_send, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(t.r, 1);
	/* a socket send is one system call (no ring enabled, none entered) */
	if (!be->ring_send)
		assert_int_equal(stats(p.rx).syscalls - s0, 1);
	assert_int_equal(recv_one_seq(p.tx), 1);
	/* then this thread receives on it */
	uint8_t buf[IMP_LEN];
	tl_fill(buf, sizeof(buf), 2);
	struct flit_dgram d = { .buf = buf, .len = sizeof(buf), .addr = p.rx_addr };
	assert_int_equal(flit_udp_io_send(p.tx, &d, 1), 1);
	bool bound = be->b == FLIT_UDP_URING && be->ring_send &&
		     strstr(flit_udp_io_describe(p.rx), "(defer_taskrun, single_issuer");
	if (bound) {
		struct flit_dgram x[4];
		assert_int_equal(flit_udp_io_recv(p.rx, x, 4), -EEXIST);
	} else {
		assert_int_equal(recv_one_seq(p.rx), 2);
	}
	pair_close(&p);
}

/* A datagram that arrives after a receive has used the socket's readiness
 * (the poll's task work still waiting, so its arrival sets no new flag) is
 * taken by the next call, which runs the task work and finds the socket
 * readable; when nothing came, that call takes nothing, and from then on an
 * empty receive makes no system call.  Every backend passes it; the
 * readiness one is why it exists. */
static void datagram_after_a_used_readiness_is_not_missed(void **state)
{
	struct flit_udp_io_cfg c = cfg_of(state, 8, 1472);
	struct pair p;
	pair_open(&p, &c, &c);
	uint8_t buf[IMP_LEN];
	struct flit_dgram x[8];

	for (uint64_t seq = 1; seq <= 3; seq++) {
		tl_fill(buf, sizeof(buf), seq);
		struct flit_dgram d = { .buf = buf, .len = sizeof(buf), .addr = p.rx_addr };
		assert_int_equal(flit_udp_io_send(p.tx, &d, 1), 1);
		assert_int_equal(recv_one_seq(p.rx), seq);
	}
	/* two more, the second sent after the first was taken, before the
	 * receiver looks again */
	tl_fill(buf, sizeof(buf), 4);
	struct flit_dgram d = { .buf = buf, .len = sizeof(buf), .addr = p.rx_addr };
	assert_int_equal(flit_udp_io_send(p.tx, &d, 1), 1);
	assert_int_equal(recv_one_seq(p.rx), 4);
	tl_fill(buf, sizeof(buf), 5);
	assert_int_equal(flit_udp_io_send(p.tx, &d, 1), 1);
	usleep(20000);   /* it is in the socket */
	int r = flit_udp_io_recv(p.rx, x, 8);
	assert_int_equal(r, 1);
	uint64_t seq = ~0ull;
	assert_int_equal(tl_check(x[0].buf, x[0].len, &seq), 0);
	assert_int_equal(seq, 5);
	/* nothing more: at most the calls that settle the readiness enter */
	for (int i = 0; i < 3; i++)
		assert_int_equal(flit_udp_io_recv(p.rx, x, 8), 0);
	uint64_t s0 = stats(p.rx).syscalls;
	for (int i = 0; i < 100; i++)
		assert_int_equal(flit_udp_io_recv(p.rx, x, 8), 0);
	if (strstr(flit_udp_io_describe(p.rx), "(defer_taskrun, single_issuer"))
		assert_int_equal(stats(p.rx).syscalls - s0, 0);
	pair_close(&p);
}

/* A datagram waiting while the receiving object sends is received: a send
 * through the ring enters it, which runs the receive's task work (and, by
 * readiness, clears the flag the arrival set); what that enter reaped must
 * still bring the datagram in. */
static void datagram_waiting_across_a_send_of_the_receiver_is_received(void **state)
{
	struct flit_udp_io_cfg c = cfg_of(state, 8, 1472);
	struct pair p;
	pair_open(&p, &c, &c);
	uint8_t buf[IMP_LEN];
	struct flit_dgram x[8];

	assert_int_equal(flit_udp_io_recv(p.rx, x, 8), 0);  /* armed, empty */
	tl_fill(buf, sizeof(buf), 1);
	struct flit_dgram d = { .buf = buf, .len = sizeof(buf), .addr = p.rx_addr };
	assert_int_equal(flit_udp_io_send(p.tx, &d, 1), 1);
	usleep(20000);   /* in rx's socket */
	tl_fill(buf, sizeof(buf), 2);
	struct flit_dgram back = { .buf = buf, .len = sizeof(buf), .addr = p.tx_addr };
	assert_int_equal(flit_udp_io_send(p.rx, &back, 1), 1);
	assert_int_equal(recv_one_seq(p.rx), 1);
	assert_int_equal(recv_one_seq(p.tx), 2);
	pair_close(&p);
}

/* ---- a burst beyond the receive buffers ------------------------------------------- */

/* 1,000 datagrams wait in the socket before the receiver takes 3 at a
 * time: far more than the io_uring backend's provided buffers (64) or
 * receive slots (8), so its multishot receive runs out of buffers
 * (-ENOBUFS) and is re-armed again and again; the socket holds the rest.
 * Every datagram arrives once, in order, byte for byte. */
static void burst_beyond_the_receive_buffers_arrives_whole_and_in_order(void **state)
{
	struct flit_udp_io_cfg c = cfg_of(state, 8, 1472);
	struct pair p;
	pair_open(&p, &c, &c);
	set_buf(flit_udp_io_fd(p.rx), SO_RCVBUFFORCE, SO_RCVBUF, 8 << 20);
	enum { N = 1000, LEN = 200 };
	struct flit_dgram x[3];

	/* the receiver's first call arms its receive */
	assert_int_equal(flit_udp_io_recv(p.rx, x, 3), 0);
	for (unsigned i = 0; i < N; i++) {
		uint8_t buf[LEN];
		tl_fill(buf, sizeof(buf), i);
		struct flit_dgram d = { .buf = buf, .len = LEN, .addr = p.rx_addr };
		send_all(p.tx, &d, 1);
	}
	unsigned got = 0;
	uint64_t end = tl_now_ms() + 5000;
	while (got < N && tl_now_ms() < end) {
		int r = flit_udp_io_recv(p.rx, x, 3);
		if (r < 0)
			fail_msg("recv: %d %s", r, flit_errmsg());
		assert_true(r <= 3);
		for (int k = 0; k < r; k++, got++) {
			uint64_t seq = ~0ull;
			assert_int_equal(x[k].len, LEN);
			assert_int_equal(tl_check(x[k].buf, x[k].len, &seq), 0);
			if (seq != got)
				fail_msg("datagram %u arrived as number %u", (unsigned)seq, got);
			assert_int_equal(x[k].addr.sin_port, p.tx_addr.sin_port);
		}
	}
	struct flit_udp_io_stats rs = stats(p.rx);
	printf("# %s: %u of %u received, %llu syscalls\n", flit_udp_io_describe(p.rx), got, N,
	       (unsigned long long)rs.syscalls);
	assert_int_equal(got, N);
	assert_int_equal(rs.rx_dgrams, N);
	assert_int_equal(rs.rx_truncated, 0);
	assert_int_equal(flit_udp_io_recv(p.rx, x, 3), 0);
	pair_close(&p);
}

/* ---- impairment spec parsing ------------------------------------------------------- */

/* ---- open ------------------------------------------------------------------------- */

static void open_rejects_bad_config_and_closes_the_fd(void **state)
{
	struct flit_udp_io_cfg good = cfg_of(state, 8, 1472);
	struct flit_udp_io_cfg bad[4] = { good, good, good, good };
	bad[0].batch = 0;
	bad[1].batch = 257;
	bad[2].dgram_max = 65508;
	bad[3].impair.loss_bp = 10001;
	for (int i = 0; i < 4; i++) {
		struct sockaddr_in a;
		int fd = udp_bound(&a);
		struct flit_udp_io *io = (void *)1;
		assert_int_equal(flit_udp_io_open(fd, &bad[i], &io), -EINVAL);
		assert_null(io);
		assert_true(fcntl(fd, F_GETFD) < 0);   /* owned, so closed */
		assert_true(strlen(flit_errmsg()) > 0);
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct flit_udp_io *io;
	assert_int_equal(flit_udp_io_open(fd, &good, &io), -EINVAL);
	assert_non_null(strstr(flit_errmsg(), "datagram"));
}

static void describe_names_the_backend(void **state)
{
	const struct backend *be = *state;
	struct flit_udp_io_cfg c = cfg_of(state, 8, 1472);
	struct sockaddr_in a;
	struct flit_udp_io *io = open_or_skip(udp_bound(&a), &c);
	const char *s = flit_udp_io_describe(io);
	printf("# describe: %s\n", s);
	assert_true(strncmp(s, be->b == FLIT_UDP_URING ? "io_uring" : be->name,
			    strlen(be->b == FLIT_UDP_URING ? "io_uring" : be->name)) == 0);
	/* how io_uring receives: what was asked, or why not */
	if (be->b == FLIT_UDP_URING && be->single)
		assert_non_null(strstr(s, "one recvmsg per datagram (asked)"));
	else if (be->b == FLIT_UDP_URING && be->poll_recv)
		assert_non_null(strstr(s, ", readiness by a multishot poll, datagrams by recvmmsg"));
	else if (be->b == FLIT_UDP_URING)
		assert_true(strstr(s, "multishot recvmsg into 64 provided buffers") ||
			    strstr(s, "one recvmsg per datagram (no provided-buffer ring"));
	/* how it sends */
	if (be->b == FLIT_UDP_URING)
		assert_non_null(strstr(s, be->ring_send ? ", sends: SEND through the ring"
					      : ", sends: sendmmsg on the socket"));
	assert_true(flit_udp_io_fd(io) >= 0);
	flit_udp_io_close(io);
	c.impair.loss_bp = 150;
	c.impair.seed = 9;
	io = open_or_skip(udp_bound(&a), &c);
	printf("# describe: %s\n", flit_udp_io_describe(io));
	assert_non_null(strstr(flit_udp_io_describe(io), "loss 1.50%"));
	flit_udp_io_close(io);
}

/* io_uring refused (as with sysctl kernel.io_uring_disabled): opening the
 * io_uring backend says so with -EOPNOTSUPP and a trail, so the caller can
 * fall back.  A seccomp filter in a child makes io_uring_setup fail. */
static void uring_open_reports_eopnotsupp_with_a_trail_when_io_uring_is_refused(void **state)
{
	(void)state;
	pid_t pid = tl_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(3);
		struct flit_udp_io_cfg c = { .backend = FLIT_UDP_URING, .batch = 8, .dgram_max = 1472 };
		struct sockaddr_in a;
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)))
			_exit(4);
		struct flit_udp_io *io = NULL;
		int r = flit_udp_io_open(fd, &c, &io);
		printf("# open under seccomp: %d, trail: %s\n", r, flit_errmsg());
		fflush(stdout);
		if (r != -EOPNOTSUPP || io)
			_exit(5);
		if (!strstr(flit_errmsg(), "io_uring") || !strstr(flit_errmsg(), "not permitted"))
			_exit(6);
		if (fcntl(fd, F_GETFD) >= 0)
			_exit(7);
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

#define EACH(f)                                                       \
	{ #f " [sockets]", f, NULL, NULL, &B_SOCKETS },               \
	{ #f " [io_uring]", f, NULL, NULL, &B_URING },                \
	{ #f " [io_uring, one recvmsg each]", f, NULL, NULL, &B_URING1 }, \
	{ #f " [io_uring, sends through the ring]", f, NULL, NULL, &B_URINGR }, \
	{ #f " [io_uring, readiness by a poll]", f, NULL, NULL, &B_URINGP }, \
	{ #f " [io_uring, readiness by a poll, ring sends]", f, NULL, NULL, &B_URINGPR }

int main(void)
{
	const struct CMUnitTest tests[] = {
		EACH(batch_of_64_sized_1_to_1472_round_trips_with_sender_address),
		EACH(recv_with_nothing_pending_returns_0_without_blocking),
		EACH(send_and_recv_of_zero_datagrams_are_no_ops),
		EACH(oversize_datagram_is_dropped_and_counted_and_the_next_arrives),
		EACH(send_to_full_socket_buffer_returns_partial_count_without_blocking),
		EACH(send_to_unread_udp_socket_never_blocks),
		EACH(icmp_error_from_a_dead_peer_does_not_wedge_sending),
		EACH(software_rx_timestamps_are_close_to_realtime_when_enabled),
		EACH(rx_timestamps_are_0_when_disabled),
		EACH(loss_20_percent_drops_about_a_fifth_and_counts_each),
		EACH(dup_10_percent_delivers_identical_copies),
		EACH(reorder_10_percent_loses_nothing_but_changes_order),
		EACH(reordered_datagram_is_not_stuck_when_traffic_stops),
		EACH(impairment_is_reproducible_from_its_seed),
		EACH(impaired_recv_of_one_at_a_time_loses_nothing_extra),
		EACH(burst_beyond_the_receive_buffers_arrives_whole_and_in_order),
		EACH(open_rejects_bad_config_and_closes_the_fd),
		EACH(describe_names_the_backend),
		EACH(io_object_opened_on_one_thread_works_on_another),
		EACH(uring_socket_sends_do_not_bind_the_ring_to_the_sender),
		EACH(datagram_after_a_used_readiness_is_not_missed),
		EACH(datagram_waiting_across_a_send_of_the_receiver_is_received),
		cmocka_unit_test(uring_open_reports_eopnotsupp_with_a_trail_when_io_uring_is_refused),
	};
	return cmocka_run_group_tests_name("udp_io", tests, NULL, NULL);
}
