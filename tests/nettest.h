/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Publish/subscribe across the netns testbed for the network transports'
 * integration tests (tests/test_udp.c, tests/test_xdp.c).  Every process
 * runs in one host namespace (a forked child that setns()es there).
 * Publishers send sequence-numbered, pattern-checked payloads; a subscriber
 * checks that every message arrives exactly once and in order, or lies
 * inside a reported loss range.
 *
 * Transport of a side: its spec's .transport, else $FLIT_TEST_NET ("udp" or
 * "xdp"; default udp), so that the udp suite runs again over AF_XDP
 * (tests/test_udp_xdp.sh).  An xdp side uses its host's eth0 and attaches
 * flit's program itself (context.xdp.attach = auto); its subscriber reports
 * the program's counters too.
 */
#ifndef FLIT_NETTEST_H
#define FLIT_NETTEST_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"
#include "testbed.h"
#include "xdp/xdp_prog.h"

static inline const char *nt_default(void)
{
	const char *e = getenv("FLIT_TEST_NET");
	return e && !strcmp(e, "xdp") ? "xdp" : "udp";
}

static inline bool nt_xdp(const char *transport)
{
	return !strcmp(transport ? transport : nt_default(), "xdp");
}

static char tb[16];

/* What a subscriber process saw (sent to the parent through a pipe). */
struct sub_result {
	uint64_t delivered, lost, loss_events, order_errors, pattern_errors;
	uint64_t first_seq, bos, eos, retx, kernel_ts, ts_off;
	uint64_t late, first_live;  /* FLIT_MSGF_LATE_JOIN messages; first unmarked seq */
	uint64_t join_ms;           /* from the subscriber's creation to its first message */
	uint64_t uncounted;         /* callbacks flit_ctx_poll() did not count in
				     * its return (a poll that says 0 for what it
				     * delivered stalls a polling loop) */
	struct flit_counters c;
	uint64_t xdp[FLIT_XDP_COUNTERS];  /* the program's counters (xdp only) */
	int ok;      /* finished: saw the last message (or its loss) */
	char why[160];
};

struct sub_state {
	uint64_t n, next, first, t0;
	uint64_t calls;             /* callbacks */
	bool started, live;
	struct sub_result r;
	volatile int done;
};

static inline void sub_cb(flit_sub *s, const struct flit_msg *m, void *arg)
{
	struct sub_state *st = arg;
	uint64_t seq;
	(void)s;

	st->calls++;
	switch (m->kind) {
	case FLIT_MSG_BOS:
		st->r.bos++;
		return;
	case FLIT_MSG_EOS:
		st->r.eos++;
		return;
	case FLIT_MSG_LOSS:
		st->r.loss_events++;
		st->r.lost += m->lost;
		if (!st->started) {
			/* the session's first messages may be the lost ones */
			st->started = true;
			st->first = st->r.first_seq = m->seq;
			st->next = m->seq;
		}
		if (m->seq != st->next)
			st->r.order_errors++;
		st->next = m->seq + m->lost;
		break;
	case FLIT_MSG_DATA:
		if (tl_check(m->data, m->len, &seq) || seq != m->seq) {
			st->r.pattern_errors++;
			return;
		}
		if (!st->started) {
			st->started = true;
			st->first = st->r.first_seq = seq;
			st->next = seq;
			st->r.join_ms = tl_now_ms() - st->t0;
		}
		if (seq != st->next)
			st->r.order_errors++;
		st->next = seq + 1;
		st->r.delivered++;
		if (m->flags & FLIT_MSGF_LATE_JOIN) {
			st->r.late++;
			if (st->live) /* a retained message after a live one */
				st->r.order_errors++;
		} else if (!st->live) {
			st->live = true;
			st->r.first_live = seq;
		}
		if (m->flags & FLIT_MSGF_RETX)
			st->r.retx++;
		if ((m->flags & FLIT_MSGF_RECV_TS_KERNEL) && (m->flags & FLIT_MSGF_RECV_TS)) {
			struct timespec now;
			clock_gettime(CLOCK_REALTIME, &now);
			uint64_t n = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
			st->r.kernel_ts++;
			if (m->recv_ts_ns > n || n - m->recv_ts_ns > 1000000000u)
				st->r.ts_off++;
		}
		break;
	}
	if (st->next >= st->n)
		st->done = 1;
}

/* A context on the network transport (NULL: the default one). */
static inline flit_ctx *net_ctx_on(const char *transport, const char *cfg)
{
	char b[1024];
	transport = transport ? transport : nt_default();
	snprintf(b, sizeof(b), "context.transports = %s\n%s%s", transport,
		 !strcmp(transport, "xdp") ? "context.udp.interface = eth0\n" : "", cfg ? cfg : "");
	return tl_ctx(b);
}

static inline flit_ctx *net_ctx(const char *cfg)
{
	return net_ctx_on(NULL, cfg);
}

/* Child: subscribe in host `host`, report through fd. */
static inline void sub_main(int host, const char *transport, const char *topic, bool pattern,
		     uint64_t n, const char *cfg, int fd, unsigned timeout_ms)
{
	struct sub_state st = { .n = n, .t0 = tl_now_ms() };
	if (tb_enter(tb, host))
		_exit(3);
	flit_ctx *ctx = net_ctx_on(transport, cfg);
	if (!ctx) {
		fprintf(stderr, "subscriber context: %s\n", flit_errmsg());
		_exit(4);
	}
	FLIT_OPTS(flit_sub_opts, so, .on_msg = sub_cb, .arg = &st, .pattern = pattern);
	flit_sub *sub = flit_sub_new(ctx, topic, &so);
	if (!sub)
		_exit(5);
	uint64_t end = tl_now_ms() + timeout_ms, polled = 0;
	while (!st.done && tl_now_ms() < end) {
		int k = flit_ctx_poll(ctx, 0);
		polled += k > 0 ? (uint64_t)k : 0;
	}
	st.r.uncounted = st.calls > polled ? st.calls - polled : 0;
	st.r.ok = st.done;
	if (!st.done)
		snprintf(st.r.why, sizeof(st.r.why), "timed out at seq %llu of %llu (delivered %llu)",
			 (unsigned long long)st.next, (unsigned long long)n,
			 (unsigned long long)st.r.delivered);
	st.r.c.sz = sizeof(st.r.c);
	flit_ctx_counters(ctx, &st.r.c);
	if (nt_xdp(transport)) {
		struct flit_xdp_maps m;
		if (flit_xdp_maps_open("eth0", &m) == 0) {
			flit_xdp_counters(&m, st.r.xdp);
			flit_xdp_maps_close(&m);
		}
	}
	if (fd >= 0 && write(fd, &st.r, sizeof(st.r)) != sizeof(st.r))
		_exit(6);
	flit_sub_close(sub);
	flit_ctx_close(ctx);
	_exit(0);
}

struct pub_args {
	int host;
	const char *transport;   /* NULL: nt_default() */
	const char *topic, *cfg, *src_cfg;
	uint64_t n;
	size_t size;
	int want_receivers;   /* wait for this many joins before sending */
	unsigned gap_us;      /* pause between messages (late join) */
	bool close_now;       /* close right after the last send */
	/* optional: the publisher child's body instead of pub_main() (same
	 * contract: exit 0 when done and told to stop), and something the
	 * parent does while the test runs, during_ms after the publisher
	 * started (must return 0) */
	void (*main)(const struct pub_args *a, int stop);
	int (*during)(void);
	unsigned during_ms;
};

/* Child: publish n messages, then serve NAKs until the parent says stop
 * (closes `stop`). */
static inline void pub_main(const struct pub_args *a, int stop)
{
	unsigned char buf[2048];
	if (tb_enter(tb, a->host))
		_exit(3);
	flit_ctx *ctx = net_ctx_on(a->transport, a->cfg);
	if (!ctx) {
		fprintf(stderr, "publisher context: %s\n", flit_errmsg());
		_exit(4);
	}
	FLIT_OPTS(flit_pub_opts, po, .transport = a->transport ? a->transport : nt_default(),
		  .config = a->src_cfg);
	flit_pub *pub = flit_pub_new(ctx, a->topic, &po);
	if (!pub) {
		fprintf(stderr, "flit_pub_new: %s\n", flit_errmsg());
		_exit(5);
	}
	uint64_t end = tl_now_ms() + 10000;
	while (a->want_receivers && flit_pub_receivers(pub) < a->want_receivers) {
		if (tl_now_ms() > end) {
			fprintf(stderr, "publisher: only %d of %d receivers joined\n",
				flit_pub_receivers(pub), a->want_receivers);
			_exit(6);
		}
		flit_ctx_poll(ctx, 0);
		usleep(1000);
	}
	for (uint64_t i = 0; i < a->n; i++) {
		tl_fill(buf, a->size, i);
		int r;
		while ((r = flit_pub_send(pub, buf, a->size)) != 0) {
			if (r < 0) {
				fprintf(stderr, "send: %s\n", flit_errmsg());
				_exit(7);
			}
			flit_ctx_poll(ctx, 0);
		}
		if (a->gap_us)
			usleep(a->gap_us);
	}
	flit_pub_flush(pub);
	/* serve NAKs (the service thread does) until told to stop */
	struct pollfd p = { .fd = stop, .events = POLLIN };
	while (!a->close_now && poll(&p, 1, 100) == 0)
		flit_ctx_poll(ctx, 0);
	flit_pub_close(pub);
	flit_ctx_close(ctx);
	_exit(0);
}

struct sub_spec {
	int host;
	const char *transport;   /* NULL: nt_default() */
	const char *topic;
	bool pattern;
	const char *cfg;
	unsigned delay_ms;   /* start this long after the publisher */
};

/* Fork a subscriber for spec; its result comes on rp[0] (rp[1] is closed
 * here). */
static inline pid_t sub_start(const struct sub_spec *ss, uint64_t n, int rp[2], unsigned timeout_ms)
{
	assert_int_equal(pipe(rp), 0);
	pid_t pid = tl_fork();
	if (pid == 0) {
		close(rp[0]);
		sub_main(ss->host, ss->transport, ss->topic, ss->pattern, n, ss->cfg, rp[1], timeout_ms);
	}
	close(rp[1]);
	return pid;
}

/* Run one publisher and nsubs subscribers; results in res[]. */
static inline void run(const struct pub_args *pa, const struct sub_spec *ss, int nsubs,
		struct sub_result *res, unsigned timeout_ms)
{
	int rp[8][2], stop[2];
	pid_t sp[8], pp;

	assert_true(nsubs <= 8);
	assert_int_equal(pipe(stop), 0);
	for (int i = 0; i < nsubs; i++) {
		if (ss[i].delay_ms)
			continue;
		sp[i] = sub_start(&ss[i], pa->n, rp[i], timeout_ms);
	}
	if (!pa->gap_us)
		usleep(100 * 1000); /* let the subscribers start before the source */
	pp = tl_fork();
	if (pp == 0) {
		close(stop[1]);
		(pa->main ? pa->main : pub_main)(pa, stop[0]);
		_exit(0);
	}
	close(stop[0]);
	if (pa->during) {
		usleep(pa->during_ms * 1000);
		assert_int_equal(pa->during(), 0);
	}
	for (int i = 0; i < nsubs; i++) {
		if (!ss[i].delay_ms)
			continue;
		usleep(ss[i].delay_ms * 1000);
		sp[i] = sub_start(&ss[i], pa->n, rp[i], timeout_ms);
	}
	for (int i = 0; i < nsubs; i++) {
		int status;
		memset(&res[i], 0, sizeof(res[i]));
		ssize_t got = read(rp[i][0], &res[i], sizeof(res[i]));
		close(rp[i][0]);
		waitpid(sp[i], &status, 0);
		if (got != sizeof(res[i]))
			fail_msg("subscriber %d in h%d exited without a result (status %#x)", i, ss[i].host, status);
	}
	close(stop[1]);
	int status;
	waitpid(pp, &status, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Every message exactly once in order, or in a reported loss range. */
static inline void check_result(const struct sub_result *r, uint64_t n, bool allow_loss, const char *what)
{
	printf("# %s: delivered %llu lost %llu (%llu events) retx %llu first %llu naks %llu "
	       "dups %llu malformed %llu foreign %llu\n", what,
	       (unsigned long long)r->delivered, (unsigned long long)r->lost,
	       (unsigned long long)r->loss_events, (unsigned long long)r->retx,
	       (unsigned long long)r->first_seq, (unsigned long long)r->c.naks_sent,
	       (unsigned long long)r->c.duplicates, (unsigned long long)r->c.malformed,
	       (unsigned long long)r->c.foreign_dropped);
	if (!r->ok)
		fail_msg("%s: %s", what, r->why);
	assert_int_equal(r->order_errors, 0);
	assert_int_equal(r->pattern_errors, 0);
	assert_int_equal(r->uncounted, 0);
	assert_int_equal(r->delivered + r->lost, n - r->first_seq);
	if (!allow_loss)
		assert_int_equal(r->lost, 0);
	assert_true(r->bos >= 1);
}

/* main() of a testbed suite: a 3-host testbed named PREFIX<pid>, the tests,
 * the testbed down; 77 when the testbed cannot be had here (not root). */
static inline int nt_suite(const char *prefix, const struct CMUnitTest *tests, size_t n)
{
	snprintf(tb, sizeof(tb), "%s%d", prefix, (int)(getpid() % 1000000));
	int rc = tb_up(tb, 3, "");
	if (rc == 77)
		return 77;
	if (rc) {
		printf("testbed up failed: %d\n", rc);
		return 1;
	}
	rc = _cmocka_run_group_tests(prefix, tests, n, NULL, NULL);
	tb_down(tb);
	return rc;
}

#endif /* FLIT_NETTEST_H */
