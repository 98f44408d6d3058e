// SPDX-License-Identifier: BSD-2-Clause
/*
 * Shared source sessions (source.session) across the netns testbed
 * (tools/testbed, 3 hosts): the publishers of one context that name a
 * session share one socket, one sequence space and its frames; each DATA
 * message carries its topic's index, INFO pages name the topics.
 *
 * A publisher process in h1 creates topics PREFIX.0 .. PREFIX.k-1 in one
 * session and sends rounds of one message per topic (payload: topic number,
 * round).  Subscriber processes (h2, h3) check, per topic, that every round
 * arrives once and in order (or inside a reported loss), that each topic
 * has one BOS, and that all came from one session.
 *
 * With FLIT_TEST_NET=xdp (tests/test_sessions_xdp.sh) every side runs on
 * the xdp transport instead.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "codec.h"
#include "core.h"
#include "ctl.h"
#include "dgram/session.h"
#include "nettest.h"

#define MAXT 64

/* What a subscriber saw, per topic (sent to the parent through a pipe). */
struct msub_result {
	unsigned ntopics;           /* topics seen (BOS or a message) */
	uint64_t got[MAXT], bos[MAXT], eos[MAXT], lost_events, order_errors, bad;
	uint64_t lost[MAXT];        /* messages a LOSS of the topic told */
	uint64_t seq_errors;        /* a message whose seq is not its round (each
				     * topic numbers its own messages from 0),
				     * or a LOSS not starting at the topic's next */
	uint64_t next[MAXT];        /* the next round expected */
	uint32_t sessions[4];       /* distinct session ids seen */
	unsigned nsessions;
	int ok;
	struct flit_counters c;
	uint64_t xdp[FLIT_XDP_COUNTERS]; /* the host's program (xdp only) */
};

struct msub {
	const char *prefix;
	uint64_t rounds[MAXT];      /* done when each topic k with rounds[k]
				     * has them all, or its EOS */
	struct msub_result r;
	volatile int done;
};

static int topic_no(const char *prefix, const char *topic)
{
	size_t l = strlen(prefix);
	if (strncmp(topic, prefix, l) || topic[l] != '.')
		return -1;
	int k = atoi(topic + l + 1);
	return k >= 0 && k < MAXT ? k : -1;
}

static void msub_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct msub *st = arg;
	(void)sub;
	int k = topic_no(st->prefix, m->topic);
	if (k < 0) {
		st->r.bad++;
		return;
	}
	bool known = false;
	for (unsigned i = 0; i < st->r.nsessions; i++)
		known |= st->r.sessions[i] == m->session_id;
	if (!known && st->r.nsessions < 4)
		st->r.sessions[st->r.nsessions++] = m->session_id;
	if (!st->r.bos[k] && !st->r.got[k] && (unsigned)k + 1 > st->r.ntopics)
		st->r.ntopics = (unsigned)k + 1;
	switch (m->kind) {
	case FLIT_MSG_BOS:
		st->r.bos[k]++;
		break;
	case FLIT_MSG_EOS:
		st->r.eos[k]++;
		break;
	case FLIT_MSG_LOSS:
		/* told per topic, in the topic's numbers: from its next */
		st->r.lost_events++;
		if (m->seq != st->r.next[k] || !m->lost)
			st->r.seq_errors++;
		st->r.lost[k] += m->lost;
		st->r.next[k] = m->seq + m->lost;
		break;
	case FLIT_MSG_DATA: {
		uint32_t v[2];
		if (m->len < sizeof(v)) {
			st->r.bad++;
			break;
		}
		memcpy(v, m->data, sizeof(v));
		if (v[0] != (uint32_t)k) {
			st->r.bad++;
			break;
		}
		if (v[1] != st->r.next[k])
			st->r.order_errors++;
		if (m->seq != v[1])
			st->r.seq_errors++;
		st->r.next[k] = v[1] + 1ull;
		st->r.got[k]++;
		break;
	}
	}
	bool all = true;
	for (unsigned i = 0; i < MAXT && all; i++)
		all = !st->rounds[i] || st->r.next[i] >= st->rounds[i] || st->r.eos[i];
	if (all)
		st->done = 1;
}

/* Child: subscribe to `topic` (a pattern if it has '*') in host `host`. */
static void msub_main(int host, const char *topic, struct msub *st, const char *cfg, int fd,
		      unsigned timeout_ms)
{
	if (tb_enter(tb, host))
		_exit(3);
	flit_ctx *ctx = net_ctx(cfg);
	if (!ctx)
		_exit(4);
	FLIT_OPTS(flit_sub_opts, so, .on_msg = msub_cb, .arg = st, .pattern = strchr(topic, '*') != NULL);
	flit_sub *sub = flit_sub_new(ctx, topic, &so);
	if (!sub)
		_exit(5);
	tl_poll_until(ctx, &st->done, timeout_ms);
	st->r.ok = st->done;
	st->r.c.sz = sizeof(st->r.c);
	flit_ctx_counters(ctx, &st->r.c);
	struct flit_xdp_maps m;
	if (nt_xdp(NULL) && flit_xdp_maps_open("eth0", &m) == 0) {
		flit_xdp_counters(&m, st->r.xdp);
		flit_xdp_maps_close(&m);
	}
	if (write(fd, &st->r, sizeof(st->r)) != sizeof(st->r))
		_exit(6);
	flit_sub_close(sub);
	flit_ctx_close(ctx);
	_exit(0);
}

static pid_t msub_start(int host, const char *topic, struct msub *st, const char *cfg, int rp[2],
			unsigned timeout_ms)
{
	assert_int_equal(pipe(rp), 0);
	pid_t pid = tl_fork();
	if (pid == 0) {
		close(rp[0]);
		msub_main(host, topic, st, cfg, rp[1], timeout_ms);
	}
	close(rp[1]);
	return pid;
}

static void msub_wait(pid_t pid, int rp[2], struct msub_result *r)
{
	int status;
	memset(r, 0, sizeof(*r));
	ssize_t got = read(rp[0], r, sizeof(*r));
	close(rp[0]);
	waitpid(pid, &status, 0);
	if (got != sizeof(*r))
		fail_msg("subscriber exited without a result (status %#x)", status);
}

/* The publisher's plan. */
struct mpub {
	const char *prefix, *src_cfg, *cfg;
	unsigned ntopics;           /* created at the start */
	unsigned later;             /* one more topic (index ntopics) created
				     * after `later` rounds; 0: none */
	uint64_t rounds;
	unsigned gap_us;            /* between rounds */
	int close_first_after;      /* close topic 0 after this many rounds (-1: never) */
	int want_receivers;
	int quiet;                  /* this topic sends in the first and the last
				     * round only (0: none; topic 0 can't be) */
};

static int mpub_send(flit_ctx *ctx, flit_pub *p, uint32_t k, uint32_t round)
{
	uint32_t v[4] = { k, round, 0, 0 };
	int r;
	while ((r = flit_pub_send(p, v, sizeof(v))) != 0) {
		if (r < 0)
			return r;
		flit_ctx_poll(ctx, 0);
	}
	return 0;
}

static void mpub_main(const struct mpub *a, int stop)
{
	flit_pub *pub[MAXT] = { 0 };
	char topic[64];

	if (tb_enter(tb, 1))
		_exit(3);
	flit_ctx *ctx = net_ctx(a->cfg);
	if (!ctx)
		_exit(4);
	FLIT_OPTS(flit_pub_opts, po, .transport = nt_default(), .config = a->src_cfg);
	for (unsigned k = 0; k < a->ntopics; k++) {
		snprintf(topic, sizeof(topic), "%s.%u", a->prefix, k);
		if (!(pub[k] = flit_pub_new(ctx, topic, &po))) {
			fprintf(stderr, "flit_pub_new %s: %s\n", topic, flit_errmsg());
			_exit(5);
		}
	}
	uint64_t end = tl_now_ms() + 10000;
	while (flit_pub_receivers(pub[0]) < a->want_receivers) {
		if (tl_now_ms() > end)
			_exit(6);
		flit_ctx_poll(ctx, 0);
		usleep(1000);
	}
	unsigned n = a->ntopics;
	for (uint32_t i = 0; i < a->rounds; i++) {
		if (a->later && i == a->later) {
			snprintf(topic, sizeof(topic), "%s.%u", a->prefix, n);
			if (!(pub[n] = flit_pub_new(ctx, topic, &po)))
				_exit(7);
			n++;
		}
		if (a->close_first_after >= 0 && i == (uint32_t)a->close_first_after && pub[0]) {
			flit_pub_close(pub[0]);
			pub[0] = NULL;
		}
		for (unsigned k = 0; k < n; k++) {
			if (a->quiet && k == (unsigned)a->quiet && i && i + 1 != a->rounds)
				continue;
			uint32_t round = a->later && k == a->ntopics ? i - a->later : i;
			if (a->quiet && k == (unsigned)a->quiet && i)
				round = 1;  /* its second message */
			if (pub[k] && mpub_send(ctx, pub[k], k, round))
				_exit(8);
		}
		if (a->gap_us)
			usleep(a->gap_us);
	}
	for (unsigned k = 0; k < n; k++)
		if (pub[k])
			flit_pub_flush(pub[k]);
	struct pollfd p = { .fd = stop, .events = POLLIN };
	while (poll(&p, 1, 20) == 0)
		flit_ctx_poll(ctx, 0);
	for (unsigned k = 0; k < n; k++)
		flit_pub_close(pub[k]);
	flit_ctx_close(ctx);
	_exit(0);
}

/* Publisher and subscribers: sub i in host hosts[i] on topics[i]. */
static void mrun(const struct mpub *pa, unsigned nsubs, const int *hosts, const char *const *topics,
		 struct msub *subs, const char *sub_cfg, struct msub_result *res, unsigned timeout_ms)
{
	int rp[4][2], stop[2];
	pid_t sp[4];

	assert_int_equal(pipe(stop), 0);
	for (unsigned i = 0; i < nsubs; i++)
		sp[i] = msub_start(hosts[i], topics[i], &subs[i], sub_cfg, rp[i], timeout_ms);
	usleep(100 * 1000);
	pid_t pp = tl_fork();
	if (pp == 0) {
		close(stop[1]);
		mpub_main(pa, stop[0]);
	}
	close(stop[0]);
	for (unsigned i = 0; i < nsubs; i++)
		msub_wait(sp[i], rp[i], &res[i]);
	close(stop[1]);
	int status;
	waitpid(pp, &status, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void show(const char *what, const struct msub_result *r, unsigned n)
{
	printf("# %s: %u topics, %u session(s), loss events %llu, order errors %llu, seq errors %llu, "
	       "bad %llu, malformed %llu, naks %llu:", what, r->ntopics, r->nsessions,
	       (unsigned long long)r->lost_events, (unsigned long long)r->order_errors,
	       (unsigned long long)r->seq_errors,
	       (unsigned long long)r->bad, (unsigned long long)r->c.malformed,
	       (unsigned long long)r->c.naks_sent);
	for (unsigned k = 0; k < n; k++)
		printf(" %u:%llu/%llu/%llu", k, (unsigned long long)r->got[k], (unsigned long long)r->bos[k],
		       (unsigned long long)r->eos[k]);
	printf("\n");
}

/* Run body (which _exit()s with 0 when all went well) in a child in h1. */
static void in_h1(void (*body)(void))
{
	pid_t pid = tl_fork();
	if (pid == 0) {
		if (tb_enter(tb, 1))
			_exit(3);
		body();
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

#define SHARED "session = md\nbatch = true"

static void topics_of_one_session_arrive_each_in_order(void **state)
{
	(void)state;
	struct mpub pa = { .prefix = "ss", .src_cfg = SHARED, .ntopics = 8, .rounds = 5000,
			   .close_first_after = -1, .want_receivers = 2 };
	struct msub subs[2] = { { .prefix = "ss", .rounds = { 5000, 5000, 5000, 5000, 5000, 5000, 5000, 5000 } },
				{ .prefix = "ss", .rounds = { [3] = 5000 } } };
	const int hosts[2] = { 2, 3 };
	const char *const topics[2] = { "ss.*", "ss.3" };
	struct msub_result r[2];

	mrun(&pa, 2, hosts, topics, subs, NULL, r, 30000);
	show("pattern ss.* (h2)", &r[0], 8);
	show("exact ss.3 (h3)", &r[1], 8);
	assert_true(r[0].ok);
	assert_int_equal(r[0].nsessions, 1);
	assert_int_equal(r[0].ntopics, 8);
	for (unsigned k = 0; k < 8; k++) {
		assert_int_equal(r[0].got[k], 5000);
		assert_int_equal(r[0].bos[k], 1);
	}
	assert_int_equal(r[0].order_errors + r[0].bad + r[0].lost_events + r[0].seq_errors, 0);
	assert_int_equal(r[0].c.msgs_filtered, 0);   /* it wants every topic */
	/* the exact subscriber: its topic alone, every message, nothing of
	 * the other seven although they share its frames: their messages are
	 * dropped and counted (msgs_filtered) */
	assert_true(r[1].ok);
	assert_int_equal(r[1].got[3], 5000);
	assert_int_equal(r[1].bos[3], 1);
	for (unsigned k = 0; k < 8; k++)
		if (k != 3)
			assert_int_equal(r[1].got[k] + r[1].bos[k], 0);
	assert_int_equal(r[1].order_errors + r[1].bad + r[1].c.malformed + r[1].seq_errors, 0);
	/* (the last round's ss.4 .. ss.7 may come after ss.3's last
	 * message, in a frame of their own, once the subscriber is done) */
	assert_true(r[1].c.msgs_filtered >= 7 * 5000 - 4 && r[1].c.msgs_filtered <= 7 * 5000);
}

static void topic_added_to_a_running_session_reaches_the_pattern_subscriber(void **state)
{
	(void)state;
	struct mpub pa = { .prefix = "sa", .src_cfg = SHARED, .ntopics = 2, .later = 500, .rounds = 2000,
			   .gap_us = 200, .close_first_after = -1, .want_receivers = 1 };
	struct msub subs[1] = { { .prefix = "sa", .rounds = { 2000, 2000, 1500 } } };
	const int hosts[1] = { 2 };
	const char *const topics[1] = { "sa.*" };
	struct msub_result r;

	mrun(&pa, 1, hosts, topics, subs, NULL, &r, 30000);
	show("pattern sa.*", &r, 3);
	assert_true(r.ok);
	assert_int_equal(r.nsessions, 1);
	assert_int_equal(r.got[0], 2000);
	assert_int_equal(r.got[1], 2000);
	/* the topic added after 500 rounds: its BOS, then all of its 1500 */
	assert_int_equal(r.bos[2], 1);
	assert_int_equal(r.got[2], 1500);
	assert_int_equal(r.order_errors + r.bad + r.lost_events + r.seq_errors, 0);
}

static void closing_one_publisher_ends_its_topic_alone(void **state)
{
	(void)state;
	struct mpub pa = { .prefix = "sc", .src_cfg = SHARED, .ntopics = 3, .rounds = 3000, .gap_us = 100,
			   .close_first_after = 1000, .want_receivers = 1 };
	/* done when topics 1 and 2 have all their rounds and topic 0 its EOS */
	struct msub subs[1] = { { .prefix = "sc", .rounds = { 3000, 3000, 3000 } } };
	const int hosts[1] = { 2 };
	const char *const topics[1] = { "sc.*" };
	struct msub_result r;

	mrun(&pa, 1, hosts, topics, subs, NULL, &r, 15000);
	show("pattern sc.*", &r, 3);
	assert_true(r.ok);
	assert_int_equal(r.got[0], 1000);
	assert_int_equal(r.eos[0], 1);       /* its topic ended ... */
	assert_int_equal(r.got[1], 3000);    /* ... the others went on */
	assert_int_equal(r.got[2], 3000);
	assert_int_equal(r.eos[1] + r.eos[2], 0);
	assert_int_equal(r.order_errors + r.bad + r.lost_events + r.seq_errors, 0);
}

static void loss_5pct_is_repaired_across_the_topics_of_a_session(void **state)
{
	(void)state;
	struct mpub pa = { .prefix = "sl", .src_cfg = SHARED, .ntopics = 5, .rounds = 4000,
			   .close_first_after = -1, .want_receivers = 1 };
	struct msub subs[1] = { { .prefix = "sl", .rounds = { 4000, 4000, 4000, 4000, 4000 } } };
	const int hosts[1] = { 3 };
	const char *const topics[1] = { "sl.*" };
	struct msub_result r;

	mrun(&pa, 1, hosts, topics, subs, "context.udp.impair = loss=5%,seed=21\n", &r, 30000);
	show("pattern sl.*, 5% loss", &r, 5);
	assert_true(r.ok);
	for (unsigned k = 0; k < 5; k++)
		assert_int_equal(r.got[k], 4000);
	assert_true(r.c.naks_sent > 0);
	assert_int_equal(r.order_errors + r.bad + r.lost_events + r.seq_errors, 0);
}

/* A subscriber of one topic of a 40-topic session, frames unbatched (one
 * message each): every message of its topic, in order; the others counted
 * filtered.  Over xdp they never reach user space: the program drops their
 * frames (its "filtered" counter) and tells the receiver's reliability
 * layer, which neither NAKs them nor takes them for loss.  With loss
 * (impair, after the program): the topic's messages are repaired, across
 * numbers the program dropped. */
static void one_topic_among_40(const char *prefix, const char *impair)
{
	char topic[16];
	snprintf(topic, sizeof(topic), "%s.5", prefix);
	struct mpub pa = { .prefix = prefix, .src_cfg = "session = md", .ntopics = 40,
			   .rounds = 1000, .gap_us = 200, .close_first_after = -1,
			   .want_receivers = 1 };
	struct msub subs[1] = { { .prefix = prefix, .rounds = { [5] = 1000 } } };
	const int hosts[1] = { 3 };
	const char *const topics[1] = { topic };
	struct msub_result r;

	mrun(&pa, 1, hosts, topics, subs, impair, &r, 30000);
	show(topic, &r, 8);
	printf("# msgs_filtered %llu (early %llu), naks %llu; xdp: filtered %llu, redirected %llu, "
	       "report_full %llu\n", (unsigned long long)r.c.msgs_filtered,
	       (unsigned long long)r.c.msgs_filtered_early, (unsigned long long)r.c.naks_sent,
	       (unsigned long long)r.xdp[FLIT_XDP_FILTERED],
	       (unsigned long long)r.xdp[FLIT_XDP_REDIRECTED],
	       (unsigned long long)r.xdp[FLIT_XDP_REPORT_FULL]);
	assert_true(r.ok);
	assert_int_equal(r.got[5], 1000);
	assert_int_equal(r.bos[5], 1);
	assert_int_equal(r.order_errors + r.bad + r.c.malformed + r.seq_errors + r.lost_events, 0);
	assert_int_equal(r.c.msgs_lost, 0);
	/* the other 39 topics' messages up to the last round's (those after
	 * topic 5's last may come once the subscriber is done) */
	assert_true(r.c.msgs_filtered >= 39 * 999 && r.c.msgs_filtered <= 39 * 1000);
	if (nt_xdp(NULL)) {
		/* dropped in the program, not copied up: one frame each */
		assert_true(r.xdp[FLIT_XDP_FILTERED] >= 39 * 999);
		/* all of them once the session started (frames that came
		 * before, while it waited for the source's answer, are
		 * filtered in user space: a few rounds at most) */
		assert_true(r.c.msgs_filtered_early + 39 * 5 >= r.c.msgs_filtered);
		/* no NAK for what the program dropped (39,000 frames: were
		 * they taken for gaps, thousands); a frame steered on another
		 * rx queue may overtake a drop's record by microseconds, and
		 * the NAK backoff is up to 2 ms: a stray NAK is possible */
		if (!impair)
			assert_true(r.c.naks_sent < 10);
	}
	else
		assert_int_equal(r.c.msgs_filtered_early, 0);
	if (impair)
		assert_true(r.c.naks_sent > 0);
}

static void a_subscriber_of_one_topic_among_40_gets_it_alone(void **state)
{
	(void)state;
	one_topic_among_40("so", NULL);
}

static void a_subscriber_of_one_topic_among_40_has_its_loss_repaired(void **state)
{
	(void)state;
	one_topic_among_40("sr", "context.udp.impair = loss=5%,seed=5\n");
}

/* A subscriber of a topic that is quiet while the session's other topics
 * are busy (a session timeout of 400 ms, 2 s of others' traffic): the
 * session lives on (over xdp the program drops every frame it gets, and
 * the drops it tells show the source alive, as frames would), and the
 * topic's second message comes. */
static void a_quiet_topic_of_a_busy_session_lives_on(void **state)
{
	(void)state;
	struct mpub pa = { .prefix = "sq", .src_cfg = "session = md", .ntopics = 8,
			   .rounds = 2000, .gap_us = 1000, .close_first_after = -1,
			   .want_receivers = 1, .quiet = 5 };
	struct msub subs[1] = { { .prefix = "sq", .rounds = { [5] = 2 } } };
	const int hosts[1] = { 3 };
	const char *const topics[1] = { "sq.5" };
	struct msub_result r;

	mrun(&pa, 1, hosts, topics, subs, "receiver.udp.session_timeout_ms = 400\n", &r, 30000);
	show("sq.5, quiet", &r, 8);
	printf("# msgs_filtered %llu (early %llu); xdp: filtered %llu\n",
	       (unsigned long long)r.c.msgs_filtered, (unsigned long long)r.c.msgs_filtered_early,
	       (unsigned long long)r.xdp[FLIT_XDP_FILTERED]);
	assert_true(r.ok);
	assert_int_equal(r.got[5], 2);
	assert_int_equal(r.bos[5], 1);
	assert_int_equal(r.eos[5], 0);
	assert_int_equal(r.order_errors + r.bad + r.seq_errors + r.lost_events, 0);
	if (nt_xdp(NULL))
		assert_true(r.c.msgs_filtered_early > 7 * 1900);
}

/* Loss NAK cannot repair (the source keeps 1 ms of data): each topic's
 * subscriber is told its own loss, in its own numbers, when its next
 * message shows the jump; every number up to the last seen is a message
 * or inside a LOSS, once. */
static void unrepaired_loss_is_told_per_topic_in_its_numbers(void **state)
{
	(void)state;
	struct mpub pa = { .prefix = "su", .src_cfg = SHARED "\nudp.retain_ms = 1", .ntopics = 4,
			   .rounds = 3000, .gap_us = 300, .close_first_after = -1, .want_receivers = 1 };
	/* the last few of a topic may be lost with nothing after them to
	 * tell: done a little before the end */
	struct msub subs[1] = { { .prefix = "su", .rounds = { 2900, 2900, 2900, 2900 } } };
	const int hosts[1] = { 3 };
	const char *const topics[1] = { "su.*" };
	struct msub_result r;

	mrun(&pa, 1, hosts, topics, subs, "context.udp.impair = loss=5%,seed=7\n", &r, 30000);
	show("pattern su.*, 5% loss, 1 ms retained", &r, 4);
	assert_true(r.ok);
	assert_true(r.lost_events > 0);
	uint64_t lost = 0;
	for (unsigned k = 0; k < 4; k++) {
		assert_int_equal(r.got[k] + r.lost[k], r.next[k]);
		lost += r.lost[k];
	}
	/* the session's count: every message lost once, told or still to be
	 * told (the tail) */
	assert_true(r.c.msgs_lost >= lost);
	assert_int_equal(r.order_errors + r.bad + r.seq_errors, 0);
}

/* The same loss, and topic 0 closes after 1,500 rounds while the others go
 * on: its subscriber is told every number up to its last, its last ones too
 * (INFO ENDED carries how many it sent), then EOS. */
static void an_ended_topic_s_loss_is_told_up_to_its_last_message(void **state)
{
	(void)state;
	struct mpub pa = { .prefix = "se", .src_cfg = SHARED "\nudp.retain_ms = 1", .ntopics = 3,
			   .rounds = 3000, .gap_us = 300, .close_first_after = 1500,
			   .want_receivers = 1 };
	struct msub subs[1] = { { .prefix = "se", .rounds = { 1500, 2900, 2900 } } };
	const int hosts[1] = { 3 };
	const char *const topics[1] = { "se.*" };
	struct msub_result r;

	mrun(&pa, 1, hosts, topics, subs, "context.udp.impair = loss=5%,seed=11\n", &r, 30000);
	show("pattern se.*, 5% loss, 1 ms retained, se.0 closed", &r, 3);
	assert_true(r.ok);
	assert_int_equal(r.eos[0], 1);
	assert_int_equal(r.next[0], 1500);
	assert_int_equal(r.got[0] + r.lost[0], 1500);
	assert_int_equal(r.order_errors + r.bad + r.seq_errors, 0);
}

/* A publisher of a shared session (the default) sending from another thread
 * while its session is claimed. */
struct other_send { flit_pub *p; volatile int done; int rc; };

static void *other_send_main(void *arg)
{
	struct other_send *o = arg;
	o->rc = flit_pub_send(o->p, "b", 1);
	__atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* In h1: two publishers with equal settings share a session; while one has
 * a claim open, its number is the one the claimed message will carry; the
 * other's send from another thread waits for the commit, from the same
 * thread it is refused (EBUSY, naming the other publisher). */
static void a_claim_holds_the_shared_session_for_other_threads_only_body(void)
{
	flit_ctx *ctx = net_ctx(NULL);
	FLIT_OPTS(flit_pub_opts, po, .transport = nt_default());
	flit_pub *a = ctx ? flit_pub_new(ctx, "cl.a", &po) : NULL;
	flit_pub *b = a ? flit_pub_new(ctx, "cl.b", &po) : NULL;
	void *buf;
	if (!b || flit_pub_send(a, "a0", 2) || flit_pub_send(b, "b0", 2))
		_exit(4);
	if (flit_pub_next_seq(a) != 1 || flit_pub_claim(a, 8, &buf))
		_exit(5);
	if (flit_pub_next_seq(a) != 1)     /* the claim's number: taken at commit */
		_exit(6);
	if (flit_pub_send(b, "x", 1) != -EBUSY || !strstr(flit_errmsg(), "another publisher"))
		_exit(7);
	struct other_send o = { .p = b };
	pthread_t th;
	if (pthread_create(&th, NULL, other_send_main, &o))
		_exit(8);
	usleep(50 * 1000);
	if (__atomic_load_n(&o.done, __ATOMIC_ACQUIRE))
		_exit(9);                  /* it did not wait */
	memcpy(buf, "claimed!", 8);
	if (flit_pub_commit(a, 8))
		_exit(10);
	pthread_join(th, NULL);
	if (o.rc != 0 || flit_pub_next_seq(a) != 2 || flit_pub_next_seq(b) != 2)
		_exit(11);
	if (flit_pub_claim(a, 8, &buf) || flit_pub_abort(a) || flit_pub_next_seq(a) != 2)
		_exit(12);
	flit_pub_close(b);
	flit_pub_close(a);
	flit_ctx_close(ctx);
	_exit(0);
}

static void a_claim_holds_the_shared_session_for_other_threads_only(void **state)
{
	(void)state;
	in_h1(a_claim_holds_the_shared_session_for_other_threads_only_body);
}

/* In h1: what flit_pub_new says to a publisher whose settings differ from
 * its session's first publisher, and that another session name is free. */
static void publisher_with_other_settings_is_refused_naming_the_session_body(void)
{
	flit_ctx *ctx = net_ctx(NULL);
	FLIT_OPTS(flit_pub_opts, a, .transport = nt_default(), .config = "session = md\nbatch = true");
	FLIT_OPTS(flit_pub_opts, b, .transport = nt_default(), .config = "session = md\nbatch = false");
	FLIT_OPTS(flit_pub_opts, c, .transport = nt_default(), .config = "session = other\nbatch = false");
	flit_pub *p1 = ctx ? flit_pub_new(ctx, "sr.a", &a) : NULL;
	if (!p1)
		_exit(4);
	flit_pub *p2 = flit_pub_new(ctx, "sr.b", &b);
	if (p2 || errno != EINVAL || !strstr(flit_errmsg(), "session 'md'") ||
	    !strstr(flit_errmsg(), "sr.a")) {
		fprintf(stderr, "second publisher: %p %s\n", (void *)p2, flit_errmsg());
		_exit(5);
	}
	flit_pub *p3 = flit_pub_new(ctx, "sr.b", &c);
	if (!p3)
		_exit(6);
	flit_pub_close(p3);
	flit_pub_close(p1);
	flit_ctx_close(ctx);
	_exit(0);
}

static void publisher_with_other_settings_is_refused_naming_the_session(void **state)
{
	(void)state;
	in_h1(publisher_with_other_settings_is_refused_naming_the_session_body);
}

/* In h1: a session holds 65,536 topics (indexes 0 .. 65535); one more is
 * refused naming the session, and once a topic ended its index is taken
 * by the next. */
static void a_session_holds_65536_topics_then_reuses_ended_indexes_body(void)
{
	enum { N = 65536 };
	char topic[32];
	flit_ctx *ctx = net_ctx("context.stats = off\n");
	FLIT_OPTS(flit_pub_opts, po, .transport = nt_default(), .config = "session = big");
	flit_pub **p = calloc(N + 1, sizeof(*p));
	if (!ctx || !p)
		_exit(4);
	for (int i = 0; i < N; i++) {
		snprintf(topic, sizeof(topic), "big.%d", i);
		if (!(p[i] = flit_pub_new(ctx, topic, &po))) {
			fprintf(stderr, "topic %d: %s\n", i, flit_errmsg());
			_exit(5);
		}
	}
	if (flit_pub_new(ctx, "big.more", &po) || errno != ENOSPC ||
	    !strstr(flit_errmsg(), "session 'big' holds 65536 topics")) {
		fprintf(stderr, "topic 65537: %s\n", flit_errmsg());
		_exit(6);
	}
	flit_pub_close(p[777]);
	if (!(p[777] = flit_pub_new(ctx, "big.again", &po)) || flit_pub_send(p[777], "x", 1) != 0) {
		fprintf(stderr, "after a close: %s\n", flit_errmsg());
		_exit(7);
	}
	for (int i = 0; i < N; i++)
		flit_pub_close(p[i]);
	free(p);
	flit_ctx_close(ctx);
	_exit(0);
}

static void a_session_holds_65536_topics_then_reuses_ended_indexes(void **state)
{
	(void)state;
	in_h1(a_session_holds_65536_topics_then_reuses_ended_indexes_body);
}

struct killed { unsigned bos, eos, died, data; volatile int done; };

static void killed_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct killed *x = arg;
	(void)sub;
	x->bos += m->kind == FLIT_MSG_BOS;
	x->data += m->kind == FLIT_MSG_DATA;
	if (m->kind == FLIT_MSG_EOS) {
		x->eos++;
		x->died += !!(m->flags & FLIT_MSGF_SOURCE_DIED);
	}
	if (x->eos == 8)
		x->done = 1;
}

/* A publishing process killed: every topic of its session ends, each with
 * EOS marked SOURCE_DIED, once the session is silent for the receiver's
 * timeout (1 s here). */
static void a_killed_publisher_ends_every_topic_of_its_session(void **state)
{
	(void)state;
	enum { K = 8 };
	int rp[2], ready[2];
	assert_int_equal(pipe(rp), 0);
	assert_int_equal(pipe(ready), 0);
	pid_t sp = tl_fork();
	if (sp == 0) {
		static struct killed st;
		close(rp[0]);
		close(ready[0]);
		if (tb_enter(tb, 2))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\n");
		FLIT_OPTS(flit_sub_opts, so, .pattern = true, .arg = &st, .on_msg = killed_cb,
			  .config = "udp.session_timeout_ms = 1000");
		if (!ctx || !flit_sub_new(ctx, "sk.*", &so))
			_exit(4);
		/* tell the parent once every topic has a message here */
		bool told = false;
		uint64_t end = tl_now_ms() + 20000;
		while (!st.done && tl_now_ms() < end) {
			flit_ctx_poll(ctx, 0);
			if (!told && st.data >= K) {
				told = write(ready[1], "r", 1) == 1;
			}
			usleep(200);
		}
		unsigned v[4] = { st.bos, st.eos, st.died, st.data };
		if (write(rp[1], v, sizeof(v)) != sizeof(v))
			_exit(5);
		flit_ctx_close(ctx);
		_exit(0);
	}
	close(rp[1]);
	close(ready[1]);
	usleep(100 * 1000);
	pid_t pp = tl_fork();
	if (pp == 0) {
		char topic[32];
		flit_pub *p[K];
		if (tb_enter(tb, 1))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\n");
		FLIT_OPTS(flit_pub_opts, po, .transport = nt_default(), .config = "session = killed");
		for (int i = 0; i < K; i++) {
			snprintf(topic, sizeof(topic), "sk.%d", i);
			if (!ctx || !(p[i] = flit_pub_new(ctx, topic, &po)))
				_exit(4);
		}
		/* a message on every topic, again and again, until killed */
		for (uint32_t r = 0;; r++) {
			for (int i = 0; i < K; i++)
				(void)flit_pub_send(p[i], &r, sizeof(r));
			flit_ctx_poll(ctx, 0);
			usleep(2000);
		}
	}
	char c;
	bool ready_ok = read(ready[0], &c, 1) == 1;
	close(ready[0]);
	kill(pp, SIGKILL);
	int status;
	waitpid(pp, &status, 0);
	unsigned v[4] = { 0 };
	ssize_t got = read(rp[0], v, sizeof(v));
	close(rp[0]);
	waitpid(sp, &status, 0);
	printf("# killed publisher: %u BOS, %u EOS (%u SOURCE_DIED), %u messages\n", v[0], v[1], v[2], v[3]);
	assert_true(ready_ok);
	assert_int_equal(got, sizeof(v));
	assert_int_equal(v[0], K);
	assert_int_equal(v[1], K);
	assert_int_equal(v[2], K);
}

/* Bad INFO pages (forged in h1, sent to the resolver channel) at a
 * pattern subscriber in h2: an index out of range, one index twice, a
 * truncated page, a page of topics nobody wants: each dropped and counted
 * (malformed), no topic of them begins; a good page after them is taken. */
static int forge_info(uint8_t *buf, size_t cap, uint32_t session, uint16_t flags,
		      const uint32_t *idx, const char *const *names, unsigned n)
{
	struct flit_ctl_name t[8];
	struct flit_ctl_info in = {
		.domain = flit_domain_id("default"), .mode = FLIT_MODE_MCAST, .data_port = 14950,
		.ctl_port = 14951, .pid = 1,
	};
	inet_pton(AF_INET, "239.192.90.9", &in.data_addr);
	for (unsigned i = 0; i < n; i++)
		t[i] = (struct flit_ctl_name){ .idx = idx[i], .kind = FLIT_NAME_EXACT,
					       .len = (uint16_t)strlen(names[i]), .name = names[i] };
	return (int)flit_ctl_info_encode_flags(buf, cap, flags, session, 0, &in, t, n);
}

struct forged { unsigned bos[4]; unsigned other; };

static void forged_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct forged *x = arg;
	(void)sub;
	if (m->kind != FLIT_MSG_BOS)
		return;
	if (!strcmp(m->topic, "sb.good"))
		x->bos[0]++;
	else
		x->other++;
}

static void bad_info_pages_are_dropped_and_counted(void **state)
{
	(void)state;
	int rp[2];
	assert_int_equal(pipe(rp), 0);
	pid_t sp = tl_fork();
	if (sp == 0) {
		static struct forged st;
		close(rp[0]);
		if (tb_enter(tb, 2))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\n");
		FLIT_OPTS(flit_sub_opts, so, .pattern = true, .arg = &st, .on_msg = forged_cb);
		if (!ctx || !flit_sub_new(ctx, "sb.*", &so))
			_exit(4);
		uint64_t end = tl_now_ms() + 3000;
		while (tl_now_ms() < end) {
			flit_ctx_poll(ctx, 0);
			usleep(500);
		}
		struct flit_counters c = { .sz = sizeof(c) };
		flit_ctx_counters(ctx, &c);
		unsigned v[3] = { st.bos[0], st.other, (unsigned)c.malformed };
		if (write(rp[1], v, sizeof(v)) != sizeof(v))
			_exit(5);
		flit_ctx_close(ctx);
		_exit(0);
	}
	close(rp[1]);
	usleep(300 * 1000);
	pid_t fp = tl_fork();
	if (fp == 0) {
		if (tb_enter(tb, 1))
			_exit(3);
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(14400) };
		inet_pton(AF_INET, "239.192.76.1", &dst.sin_addr);
		uint8_t b[2048] __attribute__((aligned(8)));
		const uint32_t out_of_range[] = { 70000 }, twice[] = { 5, 5 }, one[] = { 3 };
		const char *const n1[] = { "sb.range" }, *const n2[] = { "sb.a", "sb.b" },
				  *const ntr[] = { "sb.truncated" }, *const nnot[] = { "other.topic" },
				  *const good[] = { "sb.good" };
		for (int round = 0; round < 5; round++) {
			int l = forge_info(b, sizeof(b), 0x5b0001, FLIT_INFOF_PAGE, out_of_range, n1, 1);
			sendto(fd, b, (size_t)l, 0, (struct sockaddr *)&dst, sizeof(dst));
			l = forge_info(b, sizeof(b), 0x5b0002, FLIT_INFOF_PAGE, twice, n2, 2);
			sendto(fd, b, (size_t)l, 0, (struct sockaddr *)&dst, sizeof(dst));
			l = forge_info(b, sizeof(b), 0x5b0003, FLIT_INFOF_PAGE, one, ntr, 1);
			sendto(fd, b, (size_t)l - 8, 0, (struct sockaddr *)&dst, sizeof(dst));
			l = forge_info(b, sizeof(b), 0x5b0004, FLIT_INFOF_PAGE, one, nnot, 1);
			sendto(fd, b, (size_t)l, 0, (struct sockaddr *)&dst, sizeof(dst));
			usleep(20 * 1000);
		}
		int l = forge_info(b, sizeof(b), 0x5b0005, FLIT_INFOF_PAGE, one, good, 1);
		sendto(fd, b, (size_t)l, 0, (struct sockaddr *)&dst, sizeof(dst));
		_exit(0);
	}
	int status;
	waitpid(fp, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unsigned v[3] = { 0 };
	ssize_t got = read(rp[0], v, sizeof(v));
	close(rp[0]);
	waitpid(sp, &status, 0);
	printf("# forged pages: sb.good began %u time(s), other topics %u, malformed %u\n", v[0], v[1], v[2]);
	assert_int_equal(got, sizeof(v));
	assert_int_equal(v[0], 1);        /* the good page: its topic, once */
	assert_int_equal(v[1], 0);        /* none of the bad ones */
	assert_true(v[2] >= 15);          /* 3 bad pages x 5 rounds */
}

/* A late joiner knows each topic's numbers from the INFO page it joined
 * by (FLIT_INFOF_NEXT): a forged session in h1 pages sn.a (next 40) and
 * sn.b (next 7) at the session's number 1000; its first frames are sn.b's
 * number 7 and then sn.a's number 43: the pattern subscriber in h2 is told
 * sn.a's loss of 40 .. 42 before its message.  A page without the numbers
 * (another session, the same frames): no loss can be told, the topic's
 * first message starts it. */
struct nextlog { uint64_t lost[2][2], first[2][2], msgs[2]; };

static void next_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct nextlog *x = arg;
	(void)sub;
	int s = m->session_id == 0x5c0002;   /* 0: with NEXT, 1: without */
	int k = !strcmp(m->topic, "sn.b") || !strcmp(m->topic, "so.b");
	if (m->kind == FLIT_MSG_LOSS) {
		x->lost[s][k] += m->lost;
		x->first[s][k] = m->seq;
	} else if (m->kind == FLIT_MSG_DATA) {
		x->msgs[s]++;
	}
}

static void a_late_joiner_is_told_a_topic_s_loss_from_the_page_s_numbers(void **state)
{
	(void)state;
	int rp[2];
	assert_int_equal(pipe(rp), 0);
	pid_t sp = tl_fork();
	if (sp == 0) {
		static struct nextlog st;
		close(rp[0]);
		if (tb_enter(tb, 2))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\n");
		FLIT_OPTS(flit_sub_opts, so, .pattern = true, .arg = &st, .on_msg = next_cb);
		if (!ctx || !flit_sub_new(ctx, "sn.*", &so) || !flit_sub_new(ctx, "so.*", &so))
			_exit(4);
		uint64_t end = tl_now_ms() + 3000;
		while (tl_now_ms() < end && st.msgs[0] + st.msgs[1] < 4) {
			flit_ctx_poll(ctx, 0);
			usleep(200);
		}
		if (write(rp[1], &st, sizeof(st)) != sizeof(st))
			_exit(5);
		flit_ctx_close(ctx);
		_exit(0);
	}
	close(rp[1]);
	usleep(300 * 1000);
	pid_t fp = tl_fork();
	if (fp == 0) {
		if (tb_enter(tb, 1))
			_exit(3);
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		unsigned char loop = 0;
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof(loop));
		struct sockaddr_in res = { .sin_family = AF_INET, .sin_port = htons(14400) };
		struct sockaddr_in data = { .sin_family = AF_INET, .sin_port = htons(14950) };
		inet_pton(AF_INET, "239.192.76.1", &res.sin_addr);
		inet_pton(AF_INET, "239.192.90.9", &data.sin_addr);
		uint8_t b[2048] __attribute__((aligned(8)));
		const uint32_t idx[] = { 0, 1 };
		const char *const nn[] = { "sn.a", "sn.b" }, *const no[] = { "so.a", "so.b" };
		struct flit_ctl_name t[2];
		struct flit_ctl_info in = {
			.domain = flit_domain_id("default"), .mode = FLIT_MODE_MCAST, .data_port = 14950,
			.ctl_port = 14951, .pid = 1, .data_addr = data.sin_addr.s_addr,
		};
		const uint64_t next[2] = { 40, 7 };
		for (int round = 0; round < 3; round++) {
			for (unsigned i = 0; i < 2; i++)
				t[i] = (struct flit_ctl_name){ .idx = idx[i], .kind = FLIT_NAME_EXACT,
							       .len = 4, .name = nn[i] };
			size_t l = flit_ctl_info_encode_final(b, sizeof(b), FLIT_INFOF_PAGE | FLIT_INFOF_NEXT,
							      0x5c0001, 1000, &in, t, 2, next);
			sendto(fd, b, l, 0, (struct sockaddr *)&res, sizeof(res));
			for (unsigned i = 0; i < 2; i++)
				t[i].name = no[i];
			l = flit_ctl_info_encode_flags(b, sizeof(b), FLIT_INFOF_PAGE, 0x5c0002, 1000, &in, t, 2);
			sendto(fd, b, l, 0, (struct sockaddr *)&res, sizeof(res));
			usleep(30 * 1000);
		}
		/* the sessions' first frames: sn.b's 7, then sn.a's 43 */
		for (uint32_t sess = 0x5c0001; sess <= 0x5c0002; sess++) {
			uint8_t *pl = flit_frame_put_single_tseq(b, sess, 1000, 1, 4, false, 0, 7);
			memcpy(pl, "bbbb", 4);
			sendto(fd, b, FLIT_FRAME_HDR_LEN + flit_msg_wire_len(4, false) + 8, 0,
			       (struct sockaddr *)&data, sizeof(data));
			pl = flit_frame_put_single_tseq(b, sess, 1001, 0, 4, false, 0, 43);
			memcpy(pl, "aaaa", 4);
			sendto(fd, b, FLIT_FRAME_HDR_LEN + flit_msg_wire_len(4, false) + 8, 0,
			       (struct sockaddr *)&data, sizeof(data));
		}
		_exit(0);
	}
	int status;
	waitpid(fp, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct nextlog v;
	ssize_t got = read(rp[0], &v, sizeof(v));
	close(rp[0]);
	waitpid(sp, &status, 0);
	assert_int_equal(got, sizeof(v));
	printf("# with the page's numbers: %llu messages, sn.a lost %llu from %llu, sn.b lost %llu; "
	       "without: %llu messages, lost %llu and %llu\n",
	       (unsigned long long)v.msgs[0], (unsigned long long)v.lost[0][0],
	       (unsigned long long)v.first[0][0], (unsigned long long)v.lost[0][1],
	       (unsigned long long)v.msgs[1], (unsigned long long)v.lost[1][0],
	       (unsigned long long)v.lost[1][1]);
	assert_int_equal(v.msgs[0], 2);
	assert_int_equal(v.msgs[1], 2);
	assert_int_equal(v.lost[0][0], 3);    /* sn.a: 40, 41, 42 */
	assert_int_equal(v.first[0][0], 40);
	assert_int_equal(v.lost[0][1], 0);    /* sn.b: its 7 came */
	assert_int_equal(v.lost[1][0], 0);    /* so.a: nothing to tell it by */
	assert_int_equal(v.lost[1][1], 0);
}

/* ---- many topics: pattern subscribers find them all, at the paced rate */

#define MANY 20000

struct found {
	uint8_t seen[MANY];
	unsigned n, twice, stray;
	volatile int done;
};

static void found_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct found *f = arg;
	(void)sub;
	if (m->kind != FLIT_MSG_BOS)
		return;
	int k = strncmp(m->topic, "mt.", 3) ? -1 : atoi(m->topic + 3);
	if (k < 0 || k >= MANY) {
		f->stray++;
		return;
	}
	if (f->seen[k]++)
		f->twice++;
	else if (++f->n == MANY)
		f->done = 1;
}

/* Child: in `host`, subscribe to mt.* and write what it found, and in
 * how many ms, to fd. */
static void found_main(int host, int fd)
{
	static struct found f;
	if (tb_enter(tb, host))
		_exit(3);
	uint64_t t0 = tl_now_ms();
	flit_ctx *ctx = net_ctx("context.stats = off\n");
	FLIT_OPTS(flit_sub_opts, so, .on_msg = found_cb, .arg = &f, .pattern = true);
	if (!ctx || !flit_sub_new(ctx, "mt.*", &so))
		_exit(4);
	tl_poll_until(ctx, &f.done, 30000);
	unsigned v[4] = { f.n, f.twice, f.stray, (unsigned)(tl_now_ms() - t0) };
	if (write(fd, v, sizeof(v)) != sizeof(v))
		_exit(5);
	flit_ctx_close(ctx);
	_exit(0);
}

static pid_t found_start(int host, int rp[2])
{
	assert_int_equal(pipe(rp), 0);
	pid_t pid = tl_fork();
	if (pid == 0) {
		close(rp[0]);
		found_main(host, rp[1]);
	}
	close(rp[1]);
	return pid;
}

static void found_wait(pid_t pid, int rp[2], unsigned v[4])
{
	int status;
	memset(v, 0, 4 * sizeof(*v));
	ssize_t got = read(rp[0], v, 4 * sizeof(*v));
	close(rp[0]);
	waitpid(pid, &status, 0);
	if (got != 4 * sizeof(*v))
		fail_msg("subscriber exited without a result (status %#x)", status);
}

/* A session of 20,000 topics (h1, its resolution paced at 2 Mbit/s): a
 * pattern subscriber that was there first (h2) learns them while they are
 * created, one that comes after (h3) from the pages the session sends it,
 * which take a while at that rate; each finds every topic once. */
static void pattern_subscribers_find_20000_topics_of_a_session_at_the_paced_rate(void **state)
{
	(void)state;
	int early[2], late[2], ready[2], stop[2];
	unsigned ve[4], vl[4];

	pid_t ep = found_start(2, early);
	usleep(100 * 1000);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(stop), 0);
	pid_t pp = tl_fork();
	if (pp == 0) {
		char topic[32];
		close(ready[0]);
		close(stop[1]);
		if (tb_enter(tb, 1))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\ncontext.udp.resolver_rate_limit = 2M\n");
		FLIT_OPTS(flit_pub_opts, po, .transport = nt_default(), .config = "session = many");
		if (!ctx)
			_exit(4);
		for (int i = 0; i < MANY; i++) {
			snprintf(topic, sizeof(topic), "mt.%d", i);
			if (!flit_pub_new(ctx, topic, &po))
				_exit(5);
			if (i % 1000 == 0)
				flit_ctx_poll(ctx, 0);
		}
		if (write(ready[1], "r", 1) != 1)
			_exit(6);
		struct pollfd p = { .fd = stop[0], .events = POLLIN };
		while (poll(&p, 1, 1) == 0)
			flit_ctx_poll(ctx, 0);
		flit_ctx_close(ctx);
		_exit(0);
	}
	close(ready[1]);
	close(stop[0]);
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	pid_t lp = found_start(3, late);
	found_wait(ep, early, ve);
	found_wait(lp, late, vl);
	close(stop[1]);
	int status;
	waitpid(pp, &status, 0);
	printf("# first subscriber: %u of %u topics (%u twice) in %u ms; the later one: %u (%u twice) "
	       "in %u ms\n", ve[0], MANY, ve[1], ve[3], vl[0], vl[1], vl[3]);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(ve[0], MANY);
	assert_int_equal(vl[0], MANY);
	assert_int_equal(ve[1] + ve[2] + vl[1] + vl[2], 0);
	/* ~330 KB of pages at 250 KB/s after a 64 KiB burst: at least ~1 s
	 * (a lower bound, which a slow machine cannot break) */
	assert_true(vl[3] >= 700);
}

/* How a session of several topics carries their numbers on the wire: in
 * short headers (FLIT_FF_SHORT, 8 bytes a message as for one topic) until
 * a topic's number passes 2^32 - 1, then in the long form for good; with
 * source.udp.topic_numbers = long always in the long form.  h1 publishes
 * sh.0 (numbers from 0) and sh.1 (from 2^32 - 3, set under the library),
 * every second message of sh.1 by claim and commit of fewer bytes than
 * claimed; h2 subscribes by pattern; h3 reads the session's datagrams with
 * a kernel socket and walks them. */
#define SH_GROUP "239.192.77.201"
#define SH_ROUNDS 8
#define SH_FIRST (0x100000000ull - 3)

struct shlog {
	unsigned frames, shortf, longf, short_after_long, bad;
	uint64_t max_short, first_long;  /* topic numbers */
	unsigned first_long_topic;
	uint64_t got[2], next[2], lost[2], seq_errors, len_errors;
	int done;
};

static void sh_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct shlog *x = arg;
	(void)sub;
	int k = !strcmp(m->topic, "sh.1");
	if (m->kind == FLIT_MSG_LOSS) {
		/* sh.1's first 2^32 - 3 never came: told only when the
		 * receiver knew the topic from 0 (before the number was set) */
		if (k && m->seq == 0 && m->lost == SH_FIRST)
			return;
		x->lost[k] += m->lost;
		x->next[k] = m->seq + m->lost;
	} else if (m->kind == FLIT_MSG_DATA) {
		uint64_t v = 0;
		if (m->len != 8)
			x->len_errors++;
		else
			memcpy(&v, m->data, 8);
		if (m->seq != x->next[k] || v != m->seq)
			x->seq_errors++;
		x->next[k] = m->seq + 1;
		if (++x->got[k] == SH_ROUNDS && x->got[!k] == SH_ROUNDS)
			x->done = 1;
	}
}

/* A socket joined to group:port (its address in *a; type flags such as
 * SOCK_NONBLOCK), or -1. */
static int group_listen(const char *group, uint16_t port, int flags, struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_DGRAM | flags, 0), one = 1;
	struct ip_mreq mr = { .imr_interface.s_addr = htonl(INADDR_ANY) };
	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, group, &mr.imr_multiaddr);
	a->sin_addr = mr.imr_multiaddr;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)a, sizeof(*a)) ||
	    setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)))
		return -1;
	return fd;
}

static int sh_observer(void)
{
	struct sockaddr_in a;
	return group_listen(SH_GROUP, 14401, SOCK_NONBLOCK, &a);
}

static void sh_observe(int fd, struct shlog *x)
{
	uint8_t b[2048] __attribute__((aligned(8)));
	ssize_t n;
	while ((n = recv(fd, b, sizeof(b), 0)) > 0) {
		struct flit_frame_hdr h;
		struct flit_frame_iter it;
		struct flit_wmsg m;
		if (flit_frame_validate(b, (size_t)n, &h) != FLIT_FE_OK) {
			if (n >= 4 && b[3] == FLIT_FT_DATA)
				x->bad++;
			continue;       /* control frames */
		}
		if ((h.flags & FLIT_FF_RETX) || !h.count)
			continue;
		x->frames++;
		bool shrt = h.flags & FLIT_FF_SHORT;
		if (!(h.flags & FLIT_FF_TSEQ))
			x->bad++;       /* two topics from the start */
		shrt ? x->shortf++ : x->longf++;
		if (shrt && x->longf)
			x->short_after_long++;
		flit_frame_iter_init(&it, b, &h);
		bool first = true;
		while (flit_frame_iter_next(&it, &m)) {
			if (shrt && m.tseq > x->max_short)
				x->max_short = m.tseq;
			if (!shrt && x->longf == 1 && first) {
				x->first_long = m.tseq;
				x->first_long_topic = m.topic;
			}
			first = false;
		}
	}
}

static void sh_run(const char *what, const char *src_cfg, struct shlog *out)
{
	int rp[2], op[2], stop[2];
	assert_int_equal(pipe(rp), 0);
	assert_int_equal(pipe(op), 0);
	assert_int_equal(pipe(stop), 0);
	pid_t sp = tl_fork();
	if (sp == 0) {
		static struct shlog x;
		close(rp[0]);
		if (tb_enter(tb, 2))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\n");
		FLIT_OPTS(flit_sub_opts, so, .pattern = true, .arg = &x, .on_msg = sh_cb);
		if (!ctx || !flit_sub_new(ctx, "sh.*", &so))
			_exit(4);
		x.next[1] = SH_FIRST;
		tl_poll_until(ctx, &x.done, 15000);
		if (write(rp[1], &x, sizeof(x)) != sizeof(x))
			_exit(5);
		flit_ctx_close(ctx);
		_exit(0);
	}
	close(rp[1]);
	pid_t op_pid = tl_fork();
	if (op_pid == 0) {
		static struct shlog x;
		close(op[0]);
		close(stop[1]);
		if (tb_enter(tb, 3))
			_exit(3);
		int fd = sh_observer();
		if (fd < 0)
			_exit(4);
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = stop[0], .events = POLLIN } };
		while (!(poll(p, 2, 1000) > 0 && p[1].revents))
			sh_observe(fd, &x);
		sh_observe(fd, &x);
		if (write(op[1], &x, sizeof(x)) != sizeof(x))
			_exit(5);
		_exit(0);
	}
	close(op[1]);
	close(stop[0]);
	usleep(300 * 1000);
	pid_t pp = tl_fork();
	if (pp == 0) {
		if (tb_enter(tb, 1))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\n");
		FLIT_OPTS(flit_pub_opts, po, .transport = nt_default(), .config = src_cfg);
		flit_pub *p0 = ctx ? flit_pub_new(ctx, "sh.0", &po) : NULL;
		flit_pub *p1 = p0 ? flit_pub_new(ctx, "sh.1", &po) : NULL;
		if (!p1)
			_exit(4);
		/* before its first message, as if it had sent 2^32 - 3 */
		((struct utopic *)flit_pub_tsrc(p1))->next_tseq = SH_FIRST;
		uint64_t end = tl_now_ms() + 10000;
		while (flit_pub_receivers(p0) < 1) {
			if (tl_now_ms() > end)
				_exit(5);
			flit_ctx_poll(ctx, 0);
			usleep(1000);
		}
		for (uint64_t i = 0; i < SH_ROUNDS; i++) {
			uint64_t v = i, w = SH_FIRST + i;
			void *buf;
			if (flit_pub_send(p0, &v, 8))
				_exit(6);
			if (i % 2) {
				if (flit_pub_claim(p1, 64, &buf))
					_exit(7);
				memcpy(buf, &w, 8);
				if (flit_pub_commit(p1, 8))
					_exit(8);
			} else if (flit_pub_send(p1, &w, 8)) {
				_exit(9);
			}
			usleep(2000);
		}
		flit_pub_flush(p0);
		for (int i = 0; i < 200; i++) {
			flit_ctx_poll(ctx, 0);
			usleep(5000);
		}
		flit_ctx_close(ctx);
		_exit(0);
	}
	int status;
	struct shlog sub = { 0 };
	ssize_t got = read(rp[0], &sub, sizeof(sub));
	close(rp[0]);
	waitpid(sp, &status, 0);
	waitpid(pp, &status, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(stop[1]);
	got = got == sizeof(sub) ? read(op[0], out, sizeof(*out)) : -1;
	close(op[0]);
	waitpid(op_pid, &status, 0);
	assert_int_equal(got, sizeof(*out));
	printf("# %s: sh.0 %llu, sh.1 %llu messages (other loss %llu), seq errors %llu, "
	       "length errors %llu; on the wire: %u frames, %u short (numbers up to %llu), %u long "
	       "(the first from topic %u's %llu), short after long %u, bad %u\n",
	       what, (unsigned long long)sub.got[0], (unsigned long long)sub.got[1],
	       (unsigned long long)sub.lost[1], (unsigned long long)sub.seq_errors,
	       (unsigned long long)sub.len_errors, out->frames, out->shortf,
	       (unsigned long long)out->max_short, out->longf, out->first_long_topic,
	       (unsigned long long)out->first_long, out->short_after_long, out->bad);
	/* every message, in order, in its topic's numbers, whatever the form */
	assert_int_equal(sub.got[0], SH_ROUNDS);
	assert_int_equal(sub.got[1], SH_ROUNDS);
	assert_int_equal(sub.seq_errors, 0);
	assert_int_equal(sub.len_errors, 0);
	assert_int_equal(sub.lost[0], 0);
	assert_int_equal(sub.lost[1], 0);
	assert_true(out->frames > 0);
	assert_int_equal(out->bad, 0);
	assert_int_equal(out->short_after_long, 0);
}

static void topic_numbers_go_in_short_headers_until_2_32(void **state)
{
	(void)state;
	struct shlog w;
	sh_run("unbatched", "session = sh\nudp.group = " SH_GROUP, &w);
	/* unbatched: one message a frame; sh.1's 2^32 - 3 .. 2^32 - 1 and
	 * sh.0's first four short, then long from sh.1's 2^32 on */
	assert_int_equal(w.frames, 2 * SH_ROUNDS);
	assert_int_equal(w.shortf, 7);
	assert_int_equal(w.max_short, 0xffffffffull);
	assert_int_equal(w.first_long, 0x100000000ull);
	assert_int_equal(w.first_long_topic, 1);
	sh_run("batched", "session = sh\nbatch = true\nudp.batch_interval_us = 100000\n"
	       "udp.group = " SH_GROUP, &w);
	/* batched: the frame open in short form when the number came was sent
	 * as it was, the long one begins with it */
	assert_true(w.shortf >= 1 && w.longf >= 1);
	assert_int_equal(w.max_short, 0xffffffffull);
	assert_int_equal(w.first_long, 0x100000000ull);
	assert_int_equal(w.first_long_topic, 1);
	sh_run("udp.topic_numbers = long", "session = sh\nudp.topic_numbers = long\n"
	       "udp.group = " SH_GROUP, &w);
	assert_int_equal(w.frames, 2 * SH_ROUNDS);
	assert_int_equal(w.shortf, 0);
	assert_int_equal(w.first_long_topic, 0);    /* sh.0's 0 */
	assert_int_equal(w.first_long, 0);
}

/* A receiver waiting for a topic nobody publishes yet asks again at most
 * every second; a source that heard it ask answers a topic made meanwhile
 * at once.  h2 asks ONE QUERY naming wq.late exactly from a plain socket
 * (never again, and not on the resolver group: adverts cannot reach it);
 * h1 has a running session of ten topics wq.0 .. wq.9 and then makes
 * wq.late in it: h2's socket gets an INFO page naming wq.late alone. */
static void asker_main(int fd)
{
	if (tb_enter(tb, 2))
		_exit(3);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in any = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET,
								    .sin_port = htons(14400) };
	inet_pton(AF_INET, "239.192.76.1", &dst.sin_addr);
	if (s < 0 || bind(s, (struct sockaddr *)&any, sizeof(any)))
		_exit(4);
	uint8_t b[2048] __attribute__((aligned(8)));
	struct flit_ctl_name q = { .kind = FLIT_NAME_EXACT, .len = 7, .name = "wq.late" };
	size_t l = flit_ctl_query_encode(b, sizeof(b), 0, flit_domain_id("default"), &q, 1);
	if (!l || sendto(s, b, l, 0, (struct sockaddr *)&dst, sizeof(dst)) != (ssize_t)l)
		_exit(5);
	unsigned v[3] = { 0 };  /* pages naming wq.late, names in them, other names */
	if (write(fd, v, 1) != 1) /* asked: h1 may make the topic */
		_exit(6);
	uint64_t end = tl_now_ms() + 4000;
	while (tl_now_ms() < end) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(s, b, sizeof(b), 0);
		struct flit_frame_hdr h;
		if (n <= 0 || flit_ctl_check(b, (size_t)n, &h) != FLIT_FE_OK || h.type != FLIT_FT_INFO)
			continue;
		struct flit_ctl_name_iter it;
		struct flit_ctl_name nm;
		bool late = false;
		flit_ctl_names_init(&it, b, &h);
		while (flit_ctl_names_next(&it, &nm)) {
			v[1]++;
			if (nm.len == 7 && !memcmp(nm.name, "wq.late", 7))
				late = true;
			else
				v[2]++;
		}
		v[0] += late;
	}
	if (write(fd, v, sizeof(v)) != sizeof(v))
		_exit(7);
	_exit(0);
}

static void a_topic_made_after_its_query_is_answered_at_once(void **state)
{
	(void)state;
	int ap[2], go[2];
	assert_int_equal(pipe(ap), 0);
	assert_int_equal(pipe(go), 0);
	pid_t pp = tl_fork();
	if (pp == 0) {
		close(go[1]);
		if (tb_enter(tb, 1))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\n");
		FLIT_OPTS(flit_pub_opts, po, .transport = nt_default(), .config = "session = wq\n");
		char t[32];
		if (!ctx) {
			fprintf(stderr, "publisher context: %s\n", flit_errmsg());
			_exit(4);
		}
		for (int i = 0; i < 10; i++) {
			snprintf(t, sizeof(t), "wq.%d", i);
			if (!flit_pub_new(ctx, t, &po)) {
				fprintf(stderr, "publisher %s: %s\n", t, flit_errmsg());
				_exit(5);
			}
		}
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(6);
		if (!flit_pub_new(ctx, "wq.late", &po)) {
			fprintf(stderr, "publisher wq.late: %s\n", flit_errmsg());
			_exit(7);
		}
		uint64_t end = tl_now_ms() + 4500;
		while (tl_now_ms() < end) {
			flit_ctx_poll(ctx, 0);
			usleep(1000);
		}
		flit_ctx_close(ctx);
		_exit(0);
	}
	close(go[0]);
	usleep(500 * 1000);           /* h1's session runs, its adverts going */
	pid_t ak = tl_fork();
	if (ak == 0) {
		close(ap[0]);
		asker_main(ap[1]);
	}
	close(ap[1]);
	char c;
	assert_int_equal(read(ap[0], &c, 1), 1);
	usleep(300 * 1000);           /* h1 heard it: wq.late does not exist */
	signal(SIGPIPE, SIG_IGN);     /* h1 gone: said below */
	assert_int_equal(write(go[1], "x", 1), 1);
	unsigned v[3] = { 0 };
	ssize_t got = read(ap[0], v, sizeof(v));
	int status;
	waitpid(ak, &status, 0);
	waitpid(pp, &status, 0);
	close(ap[0]);
	close(go[1]);
	printf("# one query for wq.late, asked before it existed: %u page(s) naming it, %u name(s), %u other(s)\n",
	       v[0], v[1], v[2]);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(got, sizeof(v));
	assert_true(v[0] >= 1);       /* answered, without asking again */
	assert_int_equal(v[2], 0);    /* what it named, nothing else */
}

/* Answers share the resolver's rate a page at a time: a query's one page
 * does not wait behind every page a joining receiver is owed, and a
 * receiver that leaves is owed nothing more.  h1 publishes 20,000 topics
 * in one session, the resolver paced at 2 Mbit/s.  In h2, socket B asks
 * for rr.00007 (learning the session and its control port), socket A joins
 * the session (owed all ~330 pages, ~2 s at that rate), then B asks for
 * rr.19000: B's page comes while A has had few of its pages.  Then A
 * leaves: its pages stop. */
struct rr_log { unsigned a_before_b, a_total, a_after_leave, b_pages; };
static struct sockaddr_in rr_from;      /* of the last datagram */

/* An INFO on fd; its arrival (the kernel's stamp, ns) in *at. */
static ssize_t rr_recv_info(int fd, uint8_t *b, size_t cap, struct flit_frame_hdr *h, uint64_t *at)
{
	struct sockaddr_in from;
	char cb[CMSG_SPACE(sizeof(struct timespec))];
	struct iovec iov = { .iov_base = b, .iov_len = cap };
	struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov,
			     .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof(cb) };
	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);
	if (n <= 0)
		return -1;
	rr_from = from;
	*at = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;
			memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			*at = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
	if (flit_ctl_check(b, (size_t)n, h) != FLIT_FE_OK || h->type != FLIT_FT_INFO)
		return -1;
	return n;
}

static int rr_query(int fd, const char *topic)
{
	uint8_t b[512] __attribute__((aligned(8)));
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(14400) };
	inet_pton(AF_INET, "239.192.76.1", &dst.sin_addr);
	struct flit_ctl_name q = { .kind = FLIT_NAME_EXACT, .len = (uint16_t)strlen(topic), .name = topic };
	size_t l = flit_ctl_query_encode(b, sizeof(b), 0, flit_domain_id("default"), &q, 1);
	return l && sendto(fd, b, l, 0, (struct sockaddr *)&dst, sizeof(dst)) == (ssize_t)l ? 0 : -1;
}

static void rr_asker_main(int fd)
{
	if (tb_enter(tb, 2))
		_exit(3);
	int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in any = { .sin_family = AF_INET };
	int on = 1;
	if (a < 0 || b < 0 || bind(a, (struct sockaddr *)&any, sizeof(any)) ||
	    bind(b, (struct sockaddr *)&any, sizeof(any)) ||
	    setsockopt(a, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) ||
	    setsockopt(b, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)))
		_exit(4);
	uint8_t buf[2048] __attribute__((aligned(8)));
	struct flit_frame_hdr h;
	struct flit_ctl_info in = { 0 };
	uint32_t session = 0;
	struct rr_log x = { 0 };
	uint64_t at, asked, b_at = 0, a_at[1024];
	/* B: where the session is (asking again while the publisher starts) */
	for (uint64_t end = tl_now_ms() + 5000, next = 0; !session && tl_now_ms() < end; usleep(1000)) {
		if (tl_now_ms() >= next) {
			rr_query(b, "rr.00007");
			next = tl_now_ms() + 200;
		}
		if (rr_recv_info(b, buf, sizeof(buf), &h, &at) > 0) {
			flit_ctl_info_get(buf, &in);
			session = h.session_id;
		}
	}
	if (!session)
		_exit(5);
	/* A joins: owed every page */
	/* 0: the answer's source address and port */
	struct sockaddr_in ctl = rr_from;
	if (in.ctl_addr)
		ctl.sin_addr.s_addr = in.ctl_addr;
	if (in.ctl_port)
		ctl.sin_port = htons(in.ctl_port);
	size_t l = flit_ctl_join_encode(buf, sizeof(buf), session, flit_domain_id("default"), 0);
	if (!l || sendto(a, buf, l, 0, (struct sockaddr *)&ctl, sizeof(ctl)) != (ssize_t)l)
		_exit(6);
	/* its first pages (the rate's burst), then B's question: of A's
	 * pages that came after it, how many before B's answer (the
	 * kernel's stamps tell the order across the two sockets) */
	for (uint64_t end = tl_now_ms() + 3000; !x.a_total && tl_now_ms() < end; usleep(200))
		if (rr_recv_info(a, buf, sizeof(buf), &h, &at) > 0)
			a_at[x.a_total++] = at;
	usleep(50 * 1000);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	asked = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	rr_query(b, "rr.19000");
	for (uint64_t end = tl_now_ms() + 4000; tl_now_ms() < end && (!x.b_pages || tl_now_ms() < end - 3500);
	     usleep(200)) {
		while (x.a_total < 1024 && rr_recv_info(a, buf, sizeof(buf), &h, &at) > 0)
			a_at[x.a_total++] = at;
		if (!x.b_pages && rr_recv_info(b, buf, sizeof(buf), &h, &b_at) > 0)
			x.b_pages++;
	}
	for (unsigned i = 0; i < x.a_total; i++)
		x.a_before_b += b_at && a_at[i] > asked && a_at[i] < b_at;

	/* A leaves, and the pages still on their way are taken */
	l = flit_ctl_join_encode(buf, sizeof(buf), session, flit_domain_id("default"), FLIT_JF_LEAVE);
	sendto(a, buf, l, 0, (struct sockaddr *)&ctl, sizeof(ctl));
	for (uint64_t end = tl_now_ms() + 100; tl_now_ms() < end; usleep(200))
		x.a_total += rr_recv_info(a, buf, sizeof(buf), &h, &at) > 0;
	for (uint64_t end = tl_now_ms() + 1000; tl_now_ms() < end; usleep(500))
		x.a_after_leave += rr_recv_info(a, buf, sizeof(buf), &h, &at) > 0;
	if (write(fd, &x, sizeof(x)) != sizeof(x))
		_exit(7);
	_exit(0);
}

static void a_query_s_page_does_not_wait_behind_a_joiner_s_pages(void **state)
{
	(void)state;
	int rp[2], go[2], ready[2];
	assert_int_equal(pipe(rp), 0);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ready), 0);
	pid_t pp = tl_fork();
	if (pp == 0) {
		close(go[1]);
		close(ready[0]);
		if (tb_enter(tb, 1))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\ncontext.udp.resolver_rate_limit = 2000000\n");
		FLIT_OPTS(flit_pub_opts, po, .transport = nt_default(), .config = "session = rr\n");
		char t[32];
		if (!ctx) {
			fprintf(stderr, "publisher context: %s\n", flit_errmsg());
			_exit(4);
		}
		for (int i = 0; i < 20000; i++) {
			snprintf(t, sizeof(t), "rr.%05d", i);
			if (!flit_pub_new(ctx, t, &po)) {
				fprintf(stderr, "publisher %s: %s\n", t, flit_errmsg());
				_exit(5);
			}
		}
		if (write(ready[1], "r", 1) != 1) /* all 20,000 are there */
			_exit(6);
		char c;
		(void)!read(go[0], &c, 1); /* until the asker is done */
		flit_ctx_close(ctx);
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	char r;
	assert_int_equal(read(ready[0], &r, 1), 1);
	close(ready[0]);
	pid_t ak = tl_fork();
	if (ak == 0) {
		close(rp[0]);
		rr_asker_main(rp[1]);
	}
	close(rp[1]);
	struct rr_log x = { 0 };
	ssize_t got = read(rp[0], &x, sizeof(x));
	int status, pstatus;
	waitpid(ak, &status, 0);
	close(go[1]);
	waitpid(pp, &pstatus, 0);
	close(rp[0]);
	printf("# a joiner's pages between a query and its one page: %u; %u in all; after it left: %u\n",
	       x.a_before_b, x.a_total, x.a_after_leave);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(WIFEXITED(pstatus) && WEXITSTATUS(pstatus) == 0);
	assert_int_equal(got, sizeof(x));
	assert_int_equal(x.b_pages, 1);
	assert_true(x.a_before_b <= 3);      /* a page each in turn: not ~300 */
	assert_true(x.a_total < 200);        /* it left: not every page */
	assert_int_equal(x.a_after_leave, 0);
}

/* A receiver waiting for a topic asks a source it hears start, at once:
 * not at its next query, which its backoff has put up to a second away
 * (a source made after the receiver's last query otherwise waits that
 * long).  h2 subscribes to nw.want, which nobody publishes; h1 watches its
 * queries on the resolver channel and, once they are far apart, forges the
 * first page of a new session (naming nw.other) shortly after one: h2
 * asks again within a few ms.  The same session's next page asks nothing. */
struct nw_log { int64_t gap, first_ms, again; unsigned queries; };

static bool query_of(const uint8_t *b, ssize_t n, const char *topic)
{
	struct flit_frame_hdr h;
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	if (n <= 0 || flit_ctl_check(b, (size_t)n, &h) != FLIT_FE_OK || h.type != FLIT_FT_QUERY)
		return false;
	flit_ctl_names_init(&it, b, &h);
	while (flit_ctl_names_next(&it, &nm))
		if (nm.len == strlen(topic) && !memcmp(nm.name, topic, nm.len))
			return true;
	return false;
}

/* A socket on the resolver channel (its address in *a), or -1. */
static int resolver_listen(struct sockaddr_in *a)
{
	return group_listen("239.192.76.1", 14400, 0, a);
}

/* The time (ms) of the next query for nw.want within wait_ms, or -1. */
static int64_t nw_next_query(int fd, unsigned wait_ms, struct nw_log *x)
{
	uint8_t b[2048] __attribute__((aligned(8)));
	for (uint64_t end = tl_now_ms() + wait_ms; tl_now_ms() < end;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 5) <= 0)
			continue;
		if (query_of(b, recv(fd, b, sizeof(b), 0), "nw.want")) {
			x->queries++;
			return (int64_t)tl_now_ms();
		}
	}
	return -1;
}

static void nw_watch_main(int fd)
{
	if (tb_enter(tb, 1))
		_exit(3);
	struct sockaddr_in a;
	int s = resolver_listen(&a);
	if (s < 0)
		_exit(4);
	struct nw_log x = { .gap = -1, .first_ms = -1, .again = -1 };
	/* its queries' backoff: wait until two are >= 600 ms apart */
	int64_t prev = nw_next_query(s, 3000, &x), q = prev;
	while (prev >= 0 && (q = nw_next_query(s, 1500, &x)) >= 0 && q - prev < 600)
		prev = q;
	if (q < 0)
		_exit(5);
	x.gap = q - prev;
	usleep(100 * 1000);
	uint8_t b[2048] __attribute__((aligned(8)));
	const uint32_t idx[] = { 0 };
	const char *const other[] = { "nw.other" };
	int l = forge_info(b, sizeof(b), 0x5d0001, FLIT_INFOF_PAGE, idx, other, 1);
	int64_t sent = (int64_t)tl_now_ms();
	if (sendto(s, b, (size_t)l, 0, (struct sockaddr *)&a, sizeof(a)) != l)
		_exit(6);
	int64_t t = nw_next_query(s, 1500, &x);
	x.first_ms = t < 0 ? -1 : t - sent;
	/* the same source's next page: known, no query (the next one is
	 * due a backoff interval after the one it triggered) */
	usleep(150 * 1000);
	sent = (int64_t)tl_now_ms();
	sendto(s, b, (size_t)l, 0, (struct sockaddr *)&a, sizeof(a));
	t = nw_next_query(s, 300, &x);
	x.again = t < 0 ? -1 : t - sent;
	if (write(fd, &x, sizeof(x)) != sizeof(x))
		_exit(7);
	_exit(0);
}

static void nw_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	(void)sub; (void)m; (void)arg;
}

static void a_waiting_subscriber_asks_a_source_it_hears_start(void **state)
{
	(void)state;
	int rp[2], stop[2];
	assert_int_equal(pipe(rp), 0);
	assert_int_equal(pipe(stop), 0);
	pid_t sp = tl_fork();
	if (sp == 0) {
		close(stop[1]);
		if (tb_enter(tb, 2))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\n");
		FLIT_OPTS(flit_sub_opts, so, .on_msg = nw_cb);
		if (!ctx || !flit_sub_new(ctx, "nw.want", &so))
			_exit(4);
		for (;;) {
			struct pollfd p = { .fd = stop[0], .events = POLLIN };
			if (poll(&p, 1, 0) > 0)
				break;
			flit_ctx_poll(ctx, 0);
			usleep(1000);
		}
		flit_ctx_close(ctx);
		_exit(0);
	}
	close(stop[0]);
	pid_t wp = tl_fork();
	if (wp == 0) {
		close(rp[0]);
		nw_watch_main(rp[1]);
	}
	close(rp[1]);
	struct nw_log x = { 0 };
	ssize_t got = read(rp[0], &x, sizeof(x));
	int status, sstatus;
	waitpid(wp, &status, 0);
	close(stop[1]);
	waitpid(sp, &sstatus, 0);
	close(rp[0]);
	printf("# queries %lld ms apart; a new source's first page: asked again after %lld ms; "
	       "its next page: %lld (-1: no query)\n", (long long)x.gap, (long long)x.first_ms,
	       (long long)x.again);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(WIFEXITED(sstatus) && WEXITSTATUS(sstatus) == 0);
	assert_int_equal(got, sizeof(x));
	assert_true(x.gap >= 600);
	/* at once, not at the next of its backoff (>= 500 ms away) */
	assert_true(x.first_ms >= 0 && x.first_ms < 250);
	assert_int_equal(x.again, -1);
}

/* 100,000 topics of one context (two sessions: 65,536 a session), three
 * rounds of one message on each, batched: a pattern subscriber of all
 * (h2) has every message once and in its topic's order, one BOS each,
 * from two sessions; an exact subscriber of one (h3) has its three and no
 * other, the rest of its session's topics dropped and counted (over xdp,
 * in the program, from the second round: by then it has the session's
 * pages).  The publisher starts its rounds once the pattern subscriber has
 * named all 100,000 (BOS). */
#define HK_N 100000u
#define HK_ROUNDS 3u
#define HK_ONE 77777u

struct hk_log {
	uint64_t msgs, bos, eos, lost, order_errors, bad, filtered, filtered_early, naks;
	uint32_t sessions[4];
	unsigned nsessions, topics_all_rounds;
	int ok;
};

struct hk_sub {
	uint8_t next[HK_N], bos[HK_N];
	unsigned want, named, complete;
	int ready_fd;               /* written once every topic has its BOS */
	struct hk_log r;
	volatile int done;
};

static void hk_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct hk_sub *x = arg;
	(void)sub;
	unsigned k;
	if (sscanf(m->topic, "hk.%05u", &k) != 1 || k >= HK_N) {
		x->r.bad++;
		return;
	}
	bool known = false;
	for (unsigned i = 0; i < x->r.nsessions; i++)
		known |= x->r.sessions[i] == m->session_id;
	if (!known && x->r.nsessions < 4)
		x->r.sessions[x->r.nsessions++] = m->session_id;
	switch (m->kind) {
	case FLIT_MSG_BOS:
		x->r.bos++;
		if (!x->bos[k]++ && ++x->named == x->want && x->ready_fd >= 0) {
			if (write(x->ready_fd, "n", 1) != 1)
				x->r.bad++;
			close(x->ready_fd);
			x->ready_fd = -1;
		}
		break;
	case FLIT_MSG_EOS:
		x->r.eos++;
		break;
	case FLIT_MSG_LOSS:
		x->r.lost += m->lost;
		break;
	case FLIT_MSG_DATA: {
		uint32_t v[2];
		if (m->len < sizeof(v))
			goto bad;
		memcpy(v, m->data, sizeof(v));
		if (v[0] != k)
			goto bad;
		if (v[1] != x->next[k] || m->seq != v[1])
			x->r.order_errors++;
		x->next[k] = (uint8_t)(v[1] + 1);
		x->r.msgs++;
		if (x->next[k] == HK_ROUNDS && ++x->complete == x->want)
			x->done = 1;
		break;
	bad:
		x->r.bad++;
		break;
	}
	}
}

static void hk_sub_main(int host, const char *topic, unsigned want, int ready_fd, int fd)
{
	static struct hk_sub x;
	if (tb_enter(tb, host))
		_exit(3);
	x.want = want;
	x.ready_fd = ready_fd;
	flit_ctx *ctx = net_ctx("context.stats = off\n");
	FLIT_OPTS(flit_sub_opts, so, .on_msg = hk_cb, .arg = &x, .pattern = strchr(topic, '*') != NULL);
	if (!ctx || !flit_sub_new(ctx, topic, &so))
		_exit(4);
	tl_poll_until(ctx, &x.done, 40000);
	/* a while longer: nothing more may come (twice, another topic) */
	uint64_t end = tl_now_ms() + 300;
	while (tl_now_ms() < end)
		if (flit_ctx_poll(ctx, 0) <= 0)
			usleep(200);
	x.r.ok = x.done;
	x.r.topics_all_rounds = x.complete;
	struct flit_counters c = { .sz = sizeof(c) };
	flit_ctx_counters(ctx, &c);
	x.r.filtered = c.msgs_filtered;
	x.r.filtered_early = c.msgs_filtered_early;
	x.r.naks = c.naks_sent;
	if (write(fd, &x.r, sizeof(x.r)) != sizeof(x.r))
		_exit(6);
	flit_ctx_close(ctx);
	_exit(0);
}

static void hk_pub_main(int named_fd, int stop)
{
	char topic[32];
	if (tb_enter(tb, 1))
		_exit(3);
	flit_ctx *ctx = net_ctx("context.stats = off\n");
	FLIT_OPTS(flit_pub_opts, po, .transport = nt_default(), .config = "batch = true\n");
	flit_pub **p = calloc(HK_N, sizeof(*p));
	if (!ctx || !p)
		_exit(4);
	for (unsigned k = 0; k < HK_N; k++) {
		snprintf(topic, sizeof(topic), "hk.%05u", k);
		if (!(p[k] = flit_pub_new(ctx, topic, &po))) {
			fprintf(stderr, "flit_pub_new %s: %s\n", topic, flit_errmsg());
			_exit(5);
		}
	}
	/* the pattern subscriber has named them all; the exact one joined */
	struct pollfd w = { .fd = named_fd, .events = POLLIN };
	uint64_t end = tl_now_ms() + 30000;
	while (poll(&w, 1, 0) == 0 || flit_pub_receivers(p[HK_ONE]) < 2) {
		if (tl_now_ms() > end) {
			fprintf(stderr, "subscribers not there: %d receivers of hk.%u\n",
				flit_pub_receivers(p[HK_ONE]), HK_ONE);
			_exit(6);
		}
		flit_ctx_poll(ctx, 0);
		usleep(1000);
	}
	for (uint32_t i = 0; i < HK_ROUNDS; i++) {
		for (unsigned k = 0; k < HK_N; k++)
			if (mpub_send(ctx, p[k], k, i))
				_exit(7);
		for (unsigned k = 0; k < HK_N; k++)
			flit_pub_flush(p[k]);
		/* after the first round, the time the session's pages take
		 * to reach the exact subscriber (~1.2 MB paced at 16 Mbit/s,
		 * shared with the pattern subscriber): over xdp its program
		 * then drops every other topic's frame */
		unsigned gap = i ? 100 : 2500;
		for (uint64_t until = tl_now_ms() + gap; tl_now_ms() < until; usleep(500))
			flit_ctx_poll(ctx, 0);
	}
	struct pollfd sp = { .fd = stop, .events = POLLIN };
	while (poll(&sp, 1, 5) == 0)
		flit_ctx_poll(ctx, 0);
	flit_ctx_close(ctx);   /* closes the 100,000 publishers */
	free(p);
	_exit(0);
}

static void topics_100000_arrive_each_in_order_at_pattern_and_exact_subscribers(void **state)
{
	(void)state;
	int ra[2], re[2], named[2], stop[2];
	assert_int_equal(pipe(ra), 0);
	assert_int_equal(pipe(re), 0);
	assert_int_equal(pipe(named), 0);
	assert_int_equal(pipe(stop), 0);
	char one[32];
	snprintf(one, sizeof(one), "hk.%05u", HK_ONE);
	pid_t sa = tl_fork();
	if (sa == 0) {
		close(ra[0]);
		close(named[0]);
		hk_sub_main(2, "hk.*", HK_N, named[1], ra[1]);
	}
	pid_t se = tl_fork();
	if (se == 0) {
		close(re[0]);
		close(named[1]);
		hk_sub_main(3, one, 1, -1, re[1]);
	}
	close(ra[1]);
	close(re[1]);
	close(named[1]);
	pid_t pp = tl_fork();
	if (pp == 0) {
		close(stop[1]);
		hk_pub_main(named[0], stop[0]);
	}
	close(named[0]);
	close(stop[0]);
	struct hk_log a = { 0 }, e = { 0 };
	ssize_t ga = read(ra[0], &a, sizeof(a)), ge = read(re[0], &e, sizeof(e));
	int sta, ste, stp;
	waitpid(sa, &sta, 0);
	waitpid(se, &ste, 0);
	close(stop[1]);
	waitpid(pp, &stp, 0);
	close(ra[0]);
	close(re[0]);
	printf("# 'hk.*': %llu messages, %u topics with all %u rounds, %llu BOS, %u session(s), "
	       "order errors %llu, bad %llu, lost %llu, naks %llu\n",
	       (unsigned long long)a.msgs, a.topics_all_rounds, HK_ROUNDS, (unsigned long long)a.bos,
	       a.nsessions, (unsigned long long)a.order_errors, (unsigned long long)a.bad,
	       (unsigned long long)a.lost, (unsigned long long)a.naks);
	printf("# '%s': %llu messages, %llu BOS, bad %llu; the others dropped: %llu (%llu before user "
	       "space)\n", one, (unsigned long long)e.msgs, (unsigned long long)e.bos,
	       (unsigned long long)e.bad, (unsigned long long)e.filtered,
	       (unsigned long long)e.filtered_early);
	assert_true(WIFEXITED(stp) && WEXITSTATUS(stp) == 0);
	assert_true(WIFEXITED(sta) && WEXITSTATUS(sta) == 0);
	assert_true(WIFEXITED(ste) && WEXITSTATUS(ste) == 0);
	assert_int_equal(ga, sizeof(a));
	assert_int_equal(ge, sizeof(e));
	assert_true(a.ok);
	assert_int_equal(a.msgs, (uint64_t)HK_N * HK_ROUNDS);
	assert_int_equal(a.topics_all_rounds, HK_N);
	assert_int_equal(a.bos, HK_N);
	assert_int_equal(a.nsessions, 2);
	assert_int_equal(a.order_errors + a.bad + a.lost, 0);
	assert_true(e.ok);
	assert_int_equal(e.msgs, HK_ROUNDS);
	assert_int_equal(e.bos, 1);
	assert_int_equal(e.order_errors + e.bad + e.lost, 0);
	/* its session's other 34,463 topics: dropped, every round */
	assert_true(e.filtered >= (uint64_t)(HK_N - 65536 - 1) * HK_ROUNDS);
	/* over xdp, once it knows the session's names, before user space:
	 * the last two rounds at least, batched (frames of ~60 messages),
	 * but for the others in the frame that holds hk.77777 (it comes up
	 * whole: at most 180 messages a frame) */
	if (nt_xdp(NULL))
		assert_true(e.filtered_early >= (uint64_t)(HK_N - 65536 - 1 - 180) * (HK_ROUNDS - 1));
}

/* A subscription's first query leaves at the next poll of a loop that
 * sleeps between polls (over xdp the poll skips its timers while the
 * rings are empty, as many polls as take ~20 us: not 32 polls, 32 sleeps,
 * of such a loop).  h1 watches the resolver channel and says when the
 * query for pq.want came; h2 subscribes, then polls with 2 ms sleeps,
 * counting its polls until h1 saw the query. */
static void pq_watch_main(int ready, int seen)
{
	if (tb_enter(tb, 1))
		_exit(3);
	struct sockaddr_in a;
	uint8_t b[2048] __attribute__((aligned(8)));
	int s = resolver_listen(&a);
	if (s < 0 || write(ready, "r", 1) != 1)
		_exit(4);
	for (uint64_t end = tl_now_ms() + 5000; tl_now_ms() < end;) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 5) > 0 && query_of(b, recv(s, b, sizeof(b), 0), "pq.want")) {
			if (write(seen, "q", 1) != 1)
				_exit(5);
			_exit(0);
		}
	}
	_exit(6);
}

static void a_subscription_s_query_leaves_at_the_next_poll_of_a_sleeping_loop(void **state)
{
	(void)state;
	int ready[2], seen[2], rp[2];
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(seen), 0);
	assert_int_equal(pipe(rp), 0);
	pid_t wp = tl_fork();
	if (wp == 0) {
		close(ready[0]);
		close(seen[0]);
		pq_watch_main(ready[1], seen[1]);
	}
	close(ready[1]);
	close(seen[1]);
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	pid_t sp = tl_fork();
	if (sp == 0) {
		close(rp[0]);
		if (tb_enter(tb, 2))
			_exit(3);
		flit_ctx *ctx = net_ctx("context.stats = off\n");
		FLIT_OPTS(flit_sub_opts, so, .on_msg = nw_cb);
		/* the context's first polls: the transport up, spinning */
		for (int i = 0; ctx && i < 200; i++)
			flit_ctx_poll(ctx, 0);
		for (int i = 0; ctx && i < 20; i++) {
			flit_ctx_poll(ctx, 0);
			usleep(2000);
		}
		if (!ctx || !flit_sub_new(ctx, "pq.want", &so))
			_exit(4);
		int polls = 0;
		for (; polls < 100; polls++) {
			struct pollfd p = { .fd = seen[0], .events = POLLIN };
			if (poll(&p, 1, 0) > 0)
				break;
			flit_ctx_poll(ctx, 0);
			usleep(2000);
		}
		if (write(rp[1], &polls, sizeof(polls)) != sizeof(polls))
			_exit(5);
		flit_ctx_close(ctx);
		_exit(0);
	}
	close(rp[1]);
	close(seen[0]);
	int polls = -1, status, wstatus;
	ssize_t got = read(rp[0], &polls, sizeof(polls));
	waitpid(sp, &status, 0);
	waitpid(wp, &wstatus, 0);
	close(rp[0]);
	close(ready[0]);
	printf("# a new subscription's query seen after %d poll(s), 2 ms apart\n", polls);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
	assert_int_equal(got, sizeof(polls));
	/* the first poll sends it; h1 says so before the third */
	assert_true(polls >= 1 && polls <= 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(topics_of_one_session_arrive_each_in_order),
		cmocka_unit_test(topic_added_to_a_running_session_reaches_the_pattern_subscriber),
		cmocka_unit_test(closing_one_publisher_ends_its_topic_alone),
		cmocka_unit_test(loss_5pct_is_repaired_across_the_topics_of_a_session),
		cmocka_unit_test(unrepaired_loss_is_told_per_topic_in_its_numbers),
		cmocka_unit_test(an_ended_topic_s_loss_is_told_up_to_its_last_message),
		cmocka_unit_test(a_subscriber_of_one_topic_among_40_gets_it_alone),
		cmocka_unit_test(a_subscriber_of_one_topic_among_40_has_its_loss_repaired),
		cmocka_unit_test(a_quiet_topic_of_a_busy_session_lives_on),
		cmocka_unit_test(publisher_with_other_settings_is_refused_naming_the_session),
		cmocka_unit_test(a_claim_holds_the_shared_session_for_other_threads_only),
		cmocka_unit_test(a_session_holds_65536_topics_then_reuses_ended_indexes),
		cmocka_unit_test(pattern_subscribers_find_20000_topics_of_a_session_at_the_paced_rate),
		cmocka_unit_test(a_killed_publisher_ends_every_topic_of_its_session),
		cmocka_unit_test(bad_info_pages_are_dropped_and_counted),
		cmocka_unit_test(a_late_joiner_is_told_a_topic_s_loss_from_the_page_s_numbers),
		cmocka_unit_test(topic_numbers_go_in_short_headers_until_2_32),
		cmocka_unit_test(a_topic_made_after_its_query_is_answered_at_once),
		cmocka_unit_test(a_query_s_page_does_not_wait_behind_a_joiner_s_pages),
		cmocka_unit_test(a_waiting_subscriber_asks_a_source_it_hears_start),
		cmocka_unit_test(topics_100000_arrive_each_in_order_at_pattern_and_exact_subscribers),
		cmocka_unit_test(a_subscription_s_query_leaves_at_the_next_poll_of_a_sleeping_loop),

	};
	return nt_suite("s", tests, sizeof(tests) / sizeof(tests[0]));
}
