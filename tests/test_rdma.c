// SPDX-License-Identifier: BSD-2-Clause
/* The rdma transport (transports/rdma) against a real verbs device.
 *
 * On a host without one (ibv_get_device_list finds none) only the wire
 * tests of the connection messages run, and the program then exits 77
 * "SKIP: no RDMA device (...)"; tests/test_rdma_vm.sh runs it inside a
 * Soft-RoCE guest.  Topology: every case runs on this host's RDMA address
 * ($FLIT_RDMA_IP, else the IPv4-mapped GID of the first active port), the
 * sources of a case listen on ports of its own (30000 + a pid-derived
 * offset), and receivers find them with receiver.rdma.static.
 *
 * Each case runs in a child process of its own, forked before any verbs
 * object exists: librdmacm's device contexts must not be inherited across
 * fork(), so a case that needs more processes forks them all first and
 * starts them later through pipes.  Inside a case, failures are CHECK()s
 * that print and exit the child; the cmocka test asserts its exit status.
 * Counts are kept small (Soft-RoCE under TCG moves a few thousand messages
 * a second); timeouts are generous and bounded. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <dirent.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "testlib.h"

#ifdef FLIT_HAVE_RDMA
#include <infiniband/verbs.h>
#include "rdma/rdma.h"
#include "rdmatest.h"
#endif

#ifdef FLIT_HAVE_RDMA

/* ---- contexts, publishers, subscribers ----------------------------------- */

/* A context using rdma only; `port`: where its sources listen (0: none). */
static flit_ctx *ctx_new(unsigned port, const char *extra)
{
	char cfg[1024];
	snprintf(cfg, sizeof(cfg), "context.transports = rdma\ncontext.log_level = info\n"
		 "context.rdma.port = %u\n%s", port ? port : 1, extra ? extra : "");
	flit_ctx *ctx = tl_ctx(cfg);
	CHECK(ctx, "context");
	return ctx;
}

static flit_pub *pub_new(flit_ctx *ctx, const char *topic, const char *cfg)
{
	FLIT_OPTS(flit_pub_opts, o, .transport = "rdma", .config = cfg);
	flit_pub *p = flit_pub_new(ctx, topic, &o);
	CHECK(p, "publisher %s", topic);
	return p;
}

static flit_sub *sub_new(flit_ctx *ctx, const char *topic, unsigned port, const char *extra,
			 struct rx *r)
{
	char cfg[256];
	snprintf(cfg, sizeof(cfg), "rdma.static = %s:%u\n%s", addr, port, extra ? extra : "");
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg, .arg = r, .config = cfg);
	flit_sub *s = flit_sub_new(ctx, topic, &so);
	CHECK(s, "subscriber %s", topic);
	return s;
}



/* ---- cases: pub/sub between processes ---------------------------------------- */

struct rx_job {
	const char *topic;
	unsigned port;
	uint64_t count;         /* messages expected: 0 .. count-1 */
	size_t size;
	const char *extra;      /* receiver options */
	bool from_join;         /* a late joiner: starts wherever it joins */
	unsigned ms;
};

/* A receiver process: everything in order, no loss, then the clean EOS.
 * Writes a byte on done_fd at BOS and another after its first 100. */
static int rx_body(void *arg, int done_fd)
{
	struct rx_job *j = arg;
	struct rx r = { .size = j->size };
	flit_set_print(capture);
	flit_ctx *ctx = ctx_new(0, NULL);
	flit_sub *s = sub_new(ctx, j->topic, j->port, j->extra, &r);

	CHECK(poll_until(ctx, &r.bos, 1, j->ms), "BOS of %s from port %u", j->topic, j->port);
	CHECK(write(done_fd, "b", 1) == 1, "pipe");
	CHECK(poll_until(ctx, &r.got, 100 < j->count ? 100 : j->count, j->ms), "first messages");
	CHECK(write(done_fd, "h", 1) == 1, "pipe");
	CHECK(poll_until(ctx, &r.eos, 1, j->ms), "EOS after %llu messages (next %llu)",
	      (unsigned long long)r.got, (unsigned long long)r.next);
	CHECK(!r.bad, "%llu bad: %s", (unsigned long long)r.bad, r.why);
	CHECK(!r.died, "EOS says the source died");
	CHECK(r.next == j->count, "last message %llu, want %llu", (unsigned long long)r.next - 1,
	      (unsigned long long)j->count - 1);
	if (!j->from_join)
		CHECK(r.first == 0 && r.got == j->count, "got %llu from %llu",
		      (unsigned long long)r.got, (unsigned long long)r.first);
	flit_sub_close(s);
	flit_ctx_close(ctx);
	return 0;
}

static int case_pubsub_100k(void)
{
	unsigned port = new_port();
	struct rx_job j = { .topic = "t.100k", .port = port, .count = 100000, .size = 32, .ms = 120000 };
	struct kid k = kid_fork(rx_body, &j);
	kid_start(&k);

	flit_ctx *ctx = ctx_new(port, NULL);
	flit_pub *p = pub_new(ctx, "t.100k", NULL); /* unbatched: 100 000 frames */
	CHECK(wait_receivers(p, NULL, 1, 30000), "the receiver did not connect");
	for (uint64_t i = 0; i < j.count; i++)
		CHECK(send_one(p, NULL, i, j.size, 30000, NULL), "message %llu stuck", (unsigned long long)i);
	CHECK(flush_all(p, 30000), "flush");
	struct flit_counters c = { .sz = sizeof(c) };
	CHECK(flit_ctx_counters(ctx, &c) == 0 && c.msgs_sent == j.count, "counted %llu sent",
	      (unsigned long long)c.msgs_sent);
	flit_pub_close(p); /* END: the receiver's clean EOS */
	int st = kid_wait(&k, 120000);
	flit_ctx_close(ctx);
	CHECK(st == 0, "receiver exit %d", st);
	return 0;
}

static void rc_pubsub_100k_messages_in_order_between_processes(void **state)
{
	(void)state;
	isolated(case_pubsub_100k, 180000);
}

static int case_two_subscribers(void)
{
	unsigned port = new_port();
	struct rx_job j = { .topic = "t.fan", .port = port, .count = 3000, .size = 64, .ms = 60000 };
	struct kid k1 = kid_fork(rx_body, &j), k2 = kid_fork(rx_body, &j);
	kid_start(&k1);
	kid_start(&k2);

	flit_ctx *ctx = ctx_new(port, NULL);
	flit_pub *p = pub_new(ctx, "t.fan", NULL); /* unbatched: a frame per message */
	CHECK(wait_receivers(p, NULL, 2, 30000), "%d of 2 receivers connected", flit_pub_receivers(p));
	for (uint64_t i = 0; i < j.count; i++)
		CHECK(send_one(p, NULL, i, j.size, 30000, NULL), "message %llu stuck", (unsigned long long)i);
	flit_pub_close(p);
	int s1 = kid_wait(&k1, 60000), s2 = kid_wait(&k2, 60000);
	flit_ctx_close(ctx);
	CHECK(s1 == 0 && s2 == 0, "receivers exit %d and %d", s1, s2);
	return 0;
}

static void two_subscribers_on_one_source_get_every_message(void **state)
{
	(void)state;
	isolated(case_two_subscribers, 120000);
}

/* A receiver killed mid-stream is dropped (its disconnect frees the
 * source's side), the others go on without a gap, and a new receiver
 * connects to the same source and gets everything from where it joined. */
static int case_dead_subscriber(void)
{
	unsigned port = new_port();
	const uint64_t n = 3000;
	struct rx_job stay = { .topic = "t.dead", .port = port, .count = n, .size = 40, .ms = 60000 };
	struct rx_job late = stay;
	late.from_join = true;
	struct rx_job victim = stay;
	victim.count = UINT64_MAX / 2; /* never finishes: killed */
	struct kid kv = kid_fork(rx_body, &victim), ks = kid_fork(rx_body, &stay),
		   kl = kid_fork(rx_body, &late);
	kid_start(&kv);
	kid_start(&ks);

	flit_ctx *ctx = ctx_new(port, NULL);
	flit_pub *p = pub_new(ctx, "t.dead", NULL);
	CHECK(wait_receivers(p, NULL, 2, 30000), "%d of 2 receivers connected", flit_pub_receivers(p));
	uint64_t i = 0;
	for (; i < 1000; i++)
		CHECK(send_one(p, NULL, i, stay.size, 30000, NULL), "message %llu stuck", (unsigned long long)i);
	CHECK(kid_signalled(&kv, 30000) && kid_signalled(&kv, 30000), "the victim saw its first messages");
	kill(kv.pid, SIGKILL);
	CHECK(kid_wait(&kv, 10000) == 128 + SIGKILL, "the victim did not die");
	/* keep sending: the dead receiver's credits run out, the source
	 * back-pressures until its disconnect is seen, then it is dropped */
	uint64_t t0 = tl_now_ms(), dropped = 0, at = 0;
	for (; !dropped || i < 1500; i++) {
		CHECK(send_one(p, NULL, i, stay.size, 30000, NULL), "message %llu stuck after the kill",
		      (unsigned long long)i);
		if (!dropped && flit_pub_receivers(p) == 1) {
			dropped = tl_now_ms() - t0 + 1;
			at = i;
		}
	}
	fprintf(stderr, "# the dead receiver was dropped %llu ms after its death, at message %llu\n",
		(unsigned long long)dropped - 1, (unsigned long long)at);
	struct flit_counters c = { .sz = sizeof(c) };
	CHECK(flit_ctx_counters(ctx, &c) == 0, "counters");

	kid_start(&kl); /* reconnect: a new receiver on the same source */
	CHECK(kid_signalled(&kl, 30000), "the new receiver's BOS");
	CHECK(wait_receivers(p, NULL, 2, 30000), "the new receiver is counted");
	for (; i < n; i++)
		CHECK(send_one(p, NULL, i, stay.size, 30000, NULL), "message %llu stuck", (unsigned long long)i);
	flit_pub_close(p);
	int a = kid_wait(&ks, 60000), b = kid_wait(&kl, 60000);
	flit_ctx_close(ctx);
	CHECK(a == 0 && b == 0, "the survivor exit %d, the new receiver exit %d", a, b);
	return 0;
}

static void dead_subscriber_is_dropped_others_continue_new_one_connects(void **state)
{
	(void)state;
	isolated(case_dead_subscriber, 150000);
}

struct tx_job {
	const char *topic;
	unsigned port;
	uint64_t count;
	size_t size;
	bool hang;              /* after sending, wait to be killed */
};

static int tx_body(void *arg, int done_fd)
{
	struct tx_job *j = arg;
	flit_set_print(capture);
	flit_ctx *ctx = ctx_new(j->port, NULL);
	flit_pub *p = pub_new(ctx, j->topic, NULL);
	CHECK(wait_receivers(p, NULL, 1, 30000), "no receiver");
	for (uint64_t i = 0; i < j->count; i++)
		CHECK(send_one(p, NULL, i, j->size, 30000, NULL), "message %llu stuck", (unsigned long long)i);
	CHECK(write(done_fd, "s", 1) == 1, "pipe");
	if (j->hang)
		for (;;)
			pause(); /* killed: no END goes out */
	flit_pub_close(p);
	flit_ctx_close(ctx);
	return 0;
}

/* A source that dies (kill -9) ends its session with SOURCE_DIED after
 * what it sent is delivered; the receiver frees the connection, retries,
 * and joins the source that comes back on the same port. */
static int case_source_dies(void)
{
	unsigned port = new_port();
	struct tx_job j1 = { .topic = "t.src", .port = port, .count = 500, .size = 24, .hang = true };
	struct tx_job j2 = j1;
	j2.hang = false;
	j2.count = 300;
	struct kid k1 = kid_fork(tx_body, &j1), k2 = kid_fork(tx_body, &j2);
	kid_start(&k1);

	struct rx r = { .size = 24 };
	flit_ctx *ctx = ctx_new(0, "receiver.rdma.retry_ms = 50\n");
	flit_sub *s = sub_new(ctx, "t.src", port, NULL, &r);
	CHECK(poll_until(ctx, &r.got, 500, 60000), "got %llu of 500", (unsigned long long)r.got);
	uint32_t first_session = r.session;
	kill(k1.pid, SIGKILL);
	CHECK(kid_wait(&k1, 10000) == 128 + SIGKILL, "the source did not die");
	CHECK(poll_until(ctx, &r.eos, 1, 30000), "no EOS after the source died");
	CHECK(r.died == 1, "EOS without FLIT_MSGF_SOURCE_DIED");
	CHECK(!r.bad && r.next == 500, "bad %llu (%s), next %llu", (unsigned long long)r.bad, r.why,
	      (unsigned long long)r.next);

	kid_start(&k2); /* the source comes back: a new session, from 0 */
	r.started = false;
	CHECK(poll_until(ctx, &r.bos, 2, 60000), "no BOS from the new source");
	CHECK(r.session != first_session, "the same session id again");
	CHECK(poll_until(ctx, &r.eos, 2, 60000), "the new source's clean EOS (got %llu)",
	      (unsigned long long)r.got);
	CHECK(r.died == 1 && !r.bad && r.got == 800 && r.first == 0 && r.next == 300,
	      "died %llu bad %llu (%s) got %llu next %llu", (unsigned long long)r.died,
	      (unsigned long long)r.bad, r.why, (unsigned long long)r.got, (unsigned long long)r.next);
	CHECK(kid_wait(&k2, 30000) == 0, "the second source failed");
	flit_sub_close(s);
	flit_ctx_close(ctx);
	return 0;
}

static void source_death_ends_session_receiver_reconnects(void **state)
{
	(void)state;
	isolated(case_source_dies, 150000);
}

/* ---- cases: sessions of several topics --------------------------------------- */

#define ST_N      200
#define ST_ROUNDS 50

/* The publishers of a context share one session by default.  A receiver of
 * several of its topics connects once (its source counts one receiver);
 * every topic's messages arrive in order, numbered on their own, mixed in
 * batched frames; a topic added to the running session is named in the
 * stream before its first message (BOS, then its messages from 0); a
 * publisher that closes ends its topic alone (EOS after its last message)
 * while the others go on; the last one ends the session (EOS, clean). */
static int case_session_topics(const char *pcfg, uint64_t rounds)
{
	unsigned port = new_port();
	flit_ctx *pc = ctx_new(port, NULL), *rc = ctx_new(0, NULL);
	flit_pub *p[ST_N + 1] = { 0 };
	static const char *const want[] = { "md.s000", "md.s007", "md.s100", "md.s199", "md.new" };
	const unsigned nw = 5, closed = 7, closed_at = (unsigned)rounds * 3 / 5, added_at = (unsigned)rounds / 2;
	struct rx r[5];
	flit_sub *s[5];
	char name[32];

	for (unsigned i = 0; i < ST_N; i++) {
		snprintf(name, sizeof(name), "md.s%03u", i);
		p[i] = pub_new(pc, name, pcfg);
	}
	for (unsigned k = 0; k < nw; k++) {
		r[k] = (struct rx){ .size = 24 };
		s[k] = sub_new(rc, want[k], port, NULL, &r[k]);
	}
	for (unsigned k = 0; k < nw - 1; k++)
		CHECK(poll_until(rc, &r[k].bos, 1, 30000), "BOS of %s", want[k]);
	/* the targets that waited for the first connection take it */
	for (uint64_t end = tl_now_ms() + 500; tl_now_ms() < end;)
		flit_ctx_poll(rc, 0);
	CHECK(flit_pub_receivers(p[0]) == 1 && flit_pub_receivers(p[ST_N - 1]) == 1,
	      "%d and %d receivers: one connection for the session's topics, not one a topic",
	      flit_pub_receivers(p[0]), flit_pub_receivers(p[ST_N - 1]));
	CHECK(logged("topics named in"), "the source did not say how it named its topics:\n%s", log_text);
	for (uint64_t round = 0; round < rounds; round++) {
		if (round == added_at)
			p[ST_N] = pub_new(pc, "md.new", pcfg);
		if (round == closed_at) {
			CHECK(flush_poll(p[closed], rc, 30000), "flush before the close");
			flit_pub_close(p[closed]);
			p[closed] = NULL;
		}
		for (unsigned i = 0; i <= ST_N; i++)
			if (p[i])
				CHECK(send_one(p[i], rc, i == ST_N ? round - added_at : round, 24, 30000, NULL),
				      "round %llu, topic %u stuck", (unsigned long long)round, i);
	}
	CHECK(flush_poll(p[0], rc, 30000), "flush");
	const uint64_t expect[5] = { rounds, closed_at, rounds, rounds, rounds - added_at };
	for (unsigned k = 0; k < nw; k++)
		CHECK(poll_until(rc, &r[k].got, expect[k], 30000), "%s: %llu of %llu (%s)", want[k],
		      (unsigned long long)r[k].got, (unsigned long long)expect[k], r[k].why);
	CHECK(poll_until(rc, &r[1].eos, 1, 30000), "the closed topic's EOS");
	CHECK(r[0].eos + r[2].eos + r[3].eos + r[4].eos == 0, "a topic's close ended others");
	CHECK(flit_pub_receivers(p[0]) == 1, "%d receivers after a topic came and one went",
	      flit_pub_receivers(p[0]));
	for (unsigned i = 0; i <= ST_N; i++)
		if (p[i])
			flit_pub_close(p[i]);
	for (unsigned k = 0; k < nw; k++) {
		CHECK(poll_until(rc, &r[k].eos, 1, 30000), "%s: no EOS", want[k]);
		CHECK(!r[k].bad && r[k].first == 0 && r[k].got == expect[k] && r[k].bos == 1 && !r[k].died,
		      "%s: %llu bad (%s), %llu from %llu, BOS %llu, died %llu", want[k],
		      (unsigned long long)r[k].bad, r[k].why, (unsigned long long)r[k].got,
		      (unsigned long long)r[k].first, (unsigned long long)r[k].bos,
		      (unsigned long long)r[k].died);
	}
	struct flit_counters c = { .sz = sizeof(c) };
	CHECK(flit_ctx_counters(pc, &c) == 0, "counters");
	uint64_t sent = (uint64_t)ST_N * rounds - (rounds - closed_at) + (rounds - added_at);
	CHECK(c.msgs_sent == sent, "counted %llu sent, want %llu", (unsigned long long)c.msgs_sent,
	      (unsigned long long)sent);
	for (unsigned k = 0; k < nw; k++)
		flit_sub_close(s[k]);
	flit_ctx_close(rc);
	flit_ctx_close(pc);
	return 0;
}

static int case_session_batched(void) { return case_session_topics("batch = true\n", ST_ROUNDS); }
static int case_session_unbatched(void) { return case_session_topics(NULL, 10); }

static void topics_of_a_session_share_one_connection_batched(void **state)
{
	(void)state;
	isolated(case_session_batched, 120000);
}

static void topics_of_a_session_share_one_connection_unbatched(void **state)
{
	(void)state;
	isolated(case_session_unbatched, 120000);
}

/* A receiver that connects to a running session of many topics is told
 * all of them (INFO pages, more than its credits: as they come back),
 * while the session goes on sending; its wanted topic's messages come from
 * where it joined, in order, told with the topic's own numbers; a
 * source.session = own publisher beside them is a session of its own. */
static int case_session_join_running(void)
{
	unsigned port = new_port();
	const unsigned n = 3000;
	flit_ctx *pc = ctx_new(port, NULL), *rc = ctx_new(0, NULL);
	flit_pub **p = calloc(n, sizeof(*p));
	char name[64];
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "big.topic.with.a.longer.name.%05u", i);
		p[i] = pub_new(pc, name, "batch = true\n");
	}
	flit_pub *own = pub_new(pc, "own.topic", "session = own\n");
	/* the session is sending before the receiver comes (to nobody: refused) */
	unsigned char buf[24];
	tl_fill(buf, sizeof(buf), 0);
	CHECK(flit_pub_send(p[0], buf, sizeof(buf)) == FLIT_NOT_CONNECTED, "a send to nobody");
	struct rx r = { .size = 24 }, ro = { .size = 24 };
	/* 8 buffers of 16 KiB: the pages need more, they come as credits return */
	flit_sub *s = sub_new(rc, "big.topic.with.a.longer.name.02999", port, "rdma.depth = 8\n", &r);
	flit_sub *so = sub_new(rc, "own.topic", port, NULL, &ro);
	CHECK(poll_until(rc, &r.bos, 1, 60000), "BOS of the last topic named");
	CHECK(poll_until(rc, &ro.bos, 1, 60000), "BOS of the own session's topic");
	CHECK(wait_receivers(p[0], rc, 1, 30000) && wait_receivers(own, rc, 1, 30000),
	      "a connection for each session");
	for (uint64_t round = 0; round < 5; round++) {
		for (unsigned i = 0; i < n; i++)
			CHECK(send_one(p[i], rc, round, 24, 30000, NULL), "round %llu topic %u", (unsigned long long)round, i);
		CHECK(send_one(own, rc, round, 24, 30000, NULL), "own, round %llu", (unsigned long long)round);
	}
	CHECK(flush_poll(p[0], rc, 30000), "flush");
	CHECK(poll_until(rc, &r.got, 5, 30000) && poll_until(rc, &ro.got, 5, 30000), "got %llu and %llu of 5",
	      (unsigned long long)r.got, (unsigned long long)ro.got);
	for (unsigned i = 0; i < n; i++)
		flit_pub_close(p[i]);
	flit_pub_close(own);
	CHECK(poll_until(rc, &r.eos, 1, 30000) && poll_until(rc, &ro.eos, 1, 30000), "EOS");
	CHECK(!r.bad && !ro.bad && r.got == 5 && r.first == 0 && ro.got == 5 && !r.died && !ro.died,
	      "%s / %s", r.why, ro.why);
	struct flit_counters c = { .sz = sizeof(c) };
	CHECK(flit_ctx_counters(rc, &c) == 0 && c.msgs_received == 10 && c.msgs_filtered == 5 * (uint64_t)(n - 1),
	      "delivered %llu, filtered %llu (every topic's messages come; the unwanted ones are dropped, counted)",
	      (unsigned long long)c.msgs_received, (unsigned long long)c.msgs_filtered);
	flit_sub_close(s);
	flit_sub_close(so);
	flit_ctx_close(rc);
	flit_ctx_close(pc);
	free(p);
	return 0;
}

static void a_receiver_joins_a_running_session_of_3000_topics(void **state)
{
	(void)state;
	isolated(case_session_join_running, 150000);
}

/* A publishing process killed (kill -9) ends each of its session's topics
 * with SOURCE_DIED, after what they sent. */
static int tx3_body(void *arg, int done_fd)
{
	unsigned port = *(unsigned *)arg;
	flit_set_print(capture);
	flit_ctx *ctx = ctx_new(port, NULL);
	flit_pub *p[3] = { pub_new(ctx, "k.a", NULL), pub_new(ctx, "k.b", NULL), pub_new(ctx, "k.c", NULL) };
	CHECK(wait_receivers(p[0], NULL, 1, 30000), "no receiver");
	for (uint64_t i = 0; i < 100; i++)
		for (unsigned k = 0; k < 3; k++)
			CHECK(send_one(p[k], NULL, i, 24, 30000, NULL), "message %llu stuck", (unsigned long long)i);
	CHECK(write(done_fd, "s", 1) == 1, "pipe");
	for (;;)
		pause();
}

static int case_session_killed(void)
{
	unsigned port = new_port();
	struct kid k = kid_fork(tx3_body, &port);
	kid_start(&k);
	flit_ctx *ctx = ctx_new(0, NULL);
	struct rx r[3] = { { .size = 24 }, { .size = 24 }, { .size = 24 } };
	flit_sub *s[3] = { sub_new(ctx, "k.a", port, NULL, &r[0]), sub_new(ctx, "k.b", port, NULL, &r[1]),
			   sub_new(ctx, "k.c", port, NULL, &r[2]) };
	for (unsigned i = 0; i < 3; i++)
		CHECK(poll_until(ctx, &r[i].got, 100, 60000), "topic %u: %llu of 100", i, (unsigned long long)r[i].got);
	kill(k.pid, SIGKILL);
	CHECK(kid_wait(&k, 10000) == 128 + SIGKILL, "the source did not die");
	for (unsigned i = 0; i < 3; i++) {
		CHECK(poll_until(ctx, &r[i].eos, 1, 30000), "topic %u: no EOS after the source died", i);
		CHECK(r[i].died == 1 && !r[i].bad && r[i].next == 100 && r[i].bos == 1,
		      "topic %u: died %llu bad %llu (%s) next %llu", i, (unsigned long long)r[i].died,
		      (unsigned long long)r[i].bad, r[i].why, (unsigned long long)r[i].next);
		flit_sub_close(s[i]);
	}
	flit_ctx_close(ctx);
	return 0;
}

static void a_killed_publisher_ends_each_topic_of_its_session(void **state)
{
	(void)state;
	isolated(case_session_killed, 90000);
}

/* ---- cases: one process -------------------------------------------------------- */

/* A receiver that stops polling: after its buffers (depth; one goes to
 * INFO, one is kept for END) the source says FLIT_BACK_PRESSURED and sends
 * nothing; once it polls again everything arrives, in order, and sending
 * resumes. */
static int case_credits(void)
{
	unsigned port = new_port();
	const unsigned depth = 8;
	char extra[64];
	struct rx r = { .size = 16 };
	flit_ctx *pc = ctx_new(port, NULL), *rc = ctx_new(0, NULL);
	flit_pub *p = pub_new(pc, "t.credits", NULL);
	snprintf(extra, sizeof(extra), "rdma.depth = %u\n", depth);
	flit_sub *s = sub_new(rc, "t.credits", port, extra, &r);
	CHECK(poll_until(rc, &r.bos, 1, 30000), "BOS");
	CHECK(wait_receivers(p, rc, 1, 30000), "connected");

	uint64_t seq = 0;
	for (int round = 0; round < 20; round++) {
		unsigned char buf[16];
		unsigned ok = 0, refused = 0;
		/* the receiver does not poll: the source runs out.  (The
		 * credits it returned last round may still be on the way: the
		 * first send may wait for them.) */
		for (uint64_t end = tl_now_ms() + 10000; refused < 1000;) {
			tl_fill(buf, sizeof(buf), seq);
			int rc2 = flit_pub_send(p, buf, sizeof(buf));
			CHECK(rc2 == FLIT_OK || rc2 == FLIT_BACK_PRESSURED, "status %d", rc2);
			if (rc2 == FLIT_OK) {
				seq++;
				ok++;
				refused = 0;
			} else if (ok) {
				refused++;
			} else {
				CHECK(tl_now_ms() < end, "round %d: nothing sent after the receiver caught up", round);
				usleep(100);
			}
		}
		CHECK(ok <= depth - (round == 0 ? 2 : 1), "%u messages went into %u buffers", ok, depth);
		/* the receiver catches up: everything so far, in order */
		CHECK(poll_until(rc, &r.got, seq, 30000), "got %llu of %llu", (unsigned long long)r.got,
		      (unsigned long long)seq);
		/* and returns its buffers (written within a millisecond) */
		for (uint64_t end = tl_now_ms() + 50; tl_now_ms() < end;)
			flit_ctx_poll(rc, 0);
	}
	CHECK(!r.bad && r.next == seq, "bad %llu (%s)", (unsigned long long)r.bad, r.why);
	struct flit_counters c = { .sz = sizeof(c) };
	CHECK(flit_ctx_counters(pc, &c) == 0 && c.back_pressured >= 20 * 1000, "back_pressured %llu",
	      (unsigned long long)c.back_pressured);
	flit_pub_close(p);
	CHECK(poll_until(rc, &r.eos, 1, 30000), "EOS");
	CHECK(!r.died, "a clean close said the source died");
	flit_sub_close(s);
	flit_ctx_close(rc);
	flit_ctx_close(pc);
	return 0;
}

static void credit_exhaustion_backpressures_and_recovers(void **state)
{
	(void)state;
	isolated(case_credits, 90000);
}

/* Larger than the largest message: EMSGSIZE naming the limit; a receiver
 * whose buffers cannot hold the source's frames is refused, saying so. */
static int case_too_large(void)
{
	unsigned port = new_port();
	struct rx r = { .size = 16 };
	flit_ctx *pc = ctx_new(port, NULL), *rc = ctx_new(0, "receiver.rdma.retry_ms = 50\n");
	flit_pub *p = pub_new(pc, "t.big", "rdma.frame_max = 1K\n");
	size_t max = flit_pub_max_msg(p);
	CHECK(max > 900 && max < 1024, "max_msg %zu", max);
	static unsigned char big[4096];
	int rc2 = flit_pub_send(p, big, max + 1);
	CHECK(rc2 == -EMSGSIZE, "send of max + 1: %d", rc2);
	CHECK(strstr(flit_errmsg(), "exceeds") && strstr(flit_errmsg(), "frame_max"),
	      "message: %s", flit_errmsg());
	void *buf;
	CHECK(flit_pub_claim(p, max + 1, &buf) == -EMSGSIZE, "claim of max + 1");

	/* 512-byte buffers for 1K frames: refused, with the reason */
	flit_sub *s = sub_new(rc, "t.big", port, "rdma.frame_max = 512\n", &r);
	for (uint64_t end = tl_now_ms() + 20000; !logged("frames are up to 1024 bytes") && tl_now_ms() < end;)
		flit_ctx_poll(rc, 0);
	CHECK(logged("frames are up to 1024 bytes"), "no clear refusal logged:\n%s", log_text);
	CHECK(flit_pub_receivers(p) == 0 && r.bos == 0, "connected anyway");
	flit_sub_close(s);

	/* buffers of the right size: it works, up to max exactly */
	struct rx r2 = { .size = max };
	s = sub_new(rc, "t.big", port, "rdma.frame_max = 1K\n", &r2);
	CHECK(poll_until(rc, &r2.bos, 1, 30000), "BOS");
	CHECK(wait_receivers(p, rc, 1, 30000), "connected");
	for (uint64_t i = 0; i < 50; i++)
		CHECK(send_one(p, rc, i, max, 30000, NULL), "send");
	CHECK(poll_until(rc, &r2.got, 50, 30000) && !r2.bad, "got %llu, bad %llu (%s)",
	      (unsigned long long)r2.got, (unsigned long long)r2.bad, r2.why);
	flit_sub_close(s);
	flit_pub_close(p);
	flit_ctx_close(rc);
	flit_ctx_close(pc);
	return 0;
}

static void message_larger_than_negotiated_size_is_refused_clearly(void **state)
{
	(void)state;
	isolated(case_too_large, 90000);
}

/* Nobody listens on that port: a clear message, retries, and no call that
 * blocks (each poll returns within a second). */
static int case_no_listener(void)
{
	unsigned port = new_port();
	struct rx r = { .size = 16 };
	flit_ctx *rc = ctx_new(0, NULL);
	flit_sub *s = sub_new(rc, "t.nobody", port, NULL, &r);
	uint64_t worst = 0;
	for (uint64_t end = tl_now_ms() + 20000; !logged("no listener") && tl_now_ms() < end;) {
		uint64_t t0 = tl_now_ms();
		CHECK(flit_ctx_poll(rc, 0) >= 0, "poll");
		if (tl_now_ms() - t0 > worst)
			worst = tl_now_ms() - t0;
	}
	CHECK(logged("no listener"), "no clear message:\n%s", log_text);
	CHECK(worst < 1000, "a poll took %llu ms", (unsigned long long)worst);
	CHECK(r.bos == 0, "BOS from nowhere");
	flit_sub_close(s);

	/* a listener, but not that topic: refused, said so; the source
	 * appears later and the receiver's retry finds it */
	flit_ctx *pc = ctx_new(port, NULL);
	flit_pub *other = pub_new(pc, "t.other", NULL);
	s = sub_new(rc, "t.later", port, NULL, &r);
	for (uint64_t end = tl_now_ms() + 20000; !logged("no source of that topic") && tl_now_ms() < end;)
		flit_ctx_poll(rc, 0);
	CHECK(logged("no source of that topic"), "no clear message:\n%s", log_text);
	flit_pub *p = pub_new(pc, "t.later", NULL);
	CHECK(poll_until(rc, &r.bos, 1, 30000), "the late source was not found");
	/* t.later joined t.other's session (the publishers of a context
	 * share one): the connection is the session's */
	CHECK(wait_receivers(p, rc, 1, 30000) && flit_pub_receivers(other) == 1, "receivers");
	flit_sub_close(s);
	flit_pub_close(p);
	flit_pub_close(other);
	flit_ctx_close(pc);
	flit_ctx_close(rc);
	return 0;
}

static void connect_without_listener_fails_clearly_and_never_hangs(void **state)
{
	(void)state;
	isolated(case_no_listener, 90000);
}

/* RDMA WRITE with immediate, claim/commit (zero-copy into the registered
 * slot), timestamps and batching: the same frames, all delivered, in
 * order; a clean close is an EOS without SOURCE_DIED. */
static int case_write_mode(void)
{
	unsigned port = new_port();
	struct rx r = { .size = 48 }, rb = { .size = 48 };
	flit_ctx *pc = ctx_new(port, NULL), *rc = ctx_new(0, "receiver.timestamps = true\n");
	flit_pub *p = pub_new(pc, "t.write", "rdma.mode = write\ntimestamps = true\n");
	flit_pub *pb = pub_new(pc, "t.writeb", "rdma.mode = write\nbatch = true\n");
	flit_sub *s = sub_new(rc, "t.write", port, NULL, &r);
	flit_sub *sb = sub_new(rc, "t.writeb", port, NULL, &rb);
	CHECK(poll_until(rc, &r.bos, 1, 30000) && poll_until(rc, &rb.bos, 1, 30000), "BOS");
	CHECK(wait_receivers(p, rc, 1, 30000) && wait_receivers(pb, rc, 1, 30000), "connected");
	for (uint64_t i = 0; i < 3000; i++) {
		void *buf;
		int rc2;
		while ((rc2 = flit_pub_claim(p, 48, &buf)) > 0)
			flit_ctx_poll(rc, 0);
		CHECK(rc2 == 0, "claim");
		tl_fill(buf, 48, i);
		CHECK(flit_pub_commit(p, 48) == 0, "commit");
		CHECK(send_one(pb, rc, i, 48, 30000, NULL), "batched send");
	}
	CHECK(flit_pub_flush(pb) >= 0, "flush");
	flit_pub_close(p);
	flit_pub_close(pb);
	CHECK(poll_until(rc, &r.eos, 1, 30000) && poll_until(rc, &rb.eos, 1, 30000), "EOS");
	CHECK(!r.bad && !rb.bad && r.got == 3000 && rb.got == 3000, "claim: %llu bad (%s); batched: %llu bad (%s)",
	      (unsigned long long)r.bad, r.why, (unsigned long long)rb.bad, rb.why);
	CHECK(!r.died && !rb.died, "a clean close said the source died");
	flit_sub_close(s);
	flit_sub_close(sb);
	flit_ctx_close(rc);
	flit_ctx_close(pc);
	return 0;
}

/* Late join: a source with source.late_join = 40 sends 100 messages with
 * no receiver (kept in its frame slots, where without late join the sends
 * would be refused); a receiver asking for late join gets the last 40,
 * marked, then the live stream; one that does not ask starts live; a
 * subscriber older than its source gets its first message although the
 * source sent before it connected. */
static int case_late_join(void)
{
	unsigned port = new_port(), port2 = new_port();
	struct rx rl = { .size = 24 }, r = { .size = 24 }, rf = { .size = 24 };
	flit_ctx *pc = ctx_new(port, NULL);
	flit_pub *p = pub_new(pc, "t.lj", "late_join = 40\n");
	for (uint64_t i = 0; i < 100; i++)
		CHECK(send_one(p, NULL, i, 24, 10000, NULL), "kept message %llu", (unsigned long long)i);
	flit_ctx *rc = ctx_new(0, NULL), *rc2 = ctx_new(0, NULL);
	flit_sub *sl = sub_new(rc, "t.lj", port, "late_join = on\n", &rl);
	CHECK(poll_until(rc, &rl.got, 40, 30000), "late join: %llu of 40 (%s)",
	      (unsigned long long)rl.got, rl.why);
	flit_sub *s = sub_new(rc2, "t.lj", port, NULL, &r);
	CHECK(poll_until(rc2, &r.bos, 1, 30000), "the second receiver's BOS");
	for (uint64_t end = tl_now_ms() + 30000; flit_pub_receivers(p) < 2 && tl_now_ms() < end;) {
		flit_ctx_poll(rc, 0);
		flit_ctx_poll(rc2, 0);
	}
	CHECK(flit_pub_receivers(p) == 2, "2 receivers");
	for (uint64_t i = 100; i < 110; i++)
		CHECK(send_one(p, rc, i, 24, 30000, NULL), "live message %llu", (unsigned long long)i);
	CHECK(poll_until(rc, &rl.got, 50, 30000) && poll_until(rc2, &r.got, 10, 30000),
	      "live: %llu of 50, %llu of 10", (unsigned long long)rl.got, (unsigned long long)r.got);
	CHECK(!rl.bad && rl.first == 60 && rl.late == 40 && rl.first_live == 100,
	      "late joiner: first %llu, %llu marked, live from %llu (%s)", (unsigned long long)rl.first,
	      (unsigned long long)rl.late, (unsigned long long)rl.first_live, rl.why);
	CHECK(!r.bad && r.first == 100 && r.late == 0, "live receiver: first %llu, %llu marked (%s)",
	      (unsigned long long)r.first, (unsigned long long)r.late, r.why);
	flit_sub_close(sl);
	flit_sub_close(s);
	flit_pub_close(p);

	/* the subscriber first (connecting in vain), then its source */
	flit_sub *sf = sub_new(rc, "t.first", port2, NULL, &rf);
	for (uint64_t end = tl_now_ms() + 300; tl_now_ms() < end;)
		flit_ctx_poll(rc, 0);
	flit_ctx *pc2 = ctx_new(port2, NULL);
	flit_pub *p2 = pub_new(pc2, "t.first", "late_join = 100\n");
	for (uint64_t i = 0; i < 20; i++)
		CHECK(send_one(p2, rc, i, 24, 10000, NULL), "message %llu", (unsigned long long)i);
	CHECK(poll_until(rc, &rf.got, 20, 30000), "older subscriber: %llu of 20 (%s)",
	      (unsigned long long)rf.got, rf.why);
	CHECK(!rf.bad && rf.first == 0 && rf.late == 0, "older subscriber: first %llu, %llu marked (%s)",
	      (unsigned long long)rf.first, (unsigned long long)rf.late, rf.why);
	flit_sub_close(sf);
	flit_pub_close(p2);
	flit_ctx_close(pc2);
	flit_ctx_close(rc2);
	flit_ctx_close(rc);
	flit_ctx_close(pc);
	return 0;
}

static void late_join_replays_kept_frames_then_live(void **state)
{
	(void)state;
	isolated(case_late_join, 90000);
}

/* Late join with a wrapped slot ring and a batch frame open when the
 * receiver joins (its credits more than the slots): what is replayed is
 * what the slots hold, in order, never the open frame's slot, then the
 * open frame once flushed. */
static int case_late_join_open_frame(void)
{
	unsigned port = new_port();
	struct rx r = { .size = 24 };
	flit_ctx *pc = ctx_new(port, NULL), *rc = ctx_new(0, NULL);
	/* 8 slots of frames holding 4 messages of 24 bytes */
	flit_pub *p = pub_new(pc, "t.ljopen", "late_join = 1000\nbatch = true\nbatch_max = 256\n"
			      "rdma.slots = 8\n");
	uint64_t i = 0;
	for (; i < 100; i++)
		CHECK(send_one(p, NULL, i, 24, 10000, NULL), "kept message %llu", (unsigned long long)i);
	flit_sub *s = sub_new(rc, "t.ljopen", port, "late_join = on\nrdma.depth = 64\n", &r);
	CHECK(poll_until(rc, &r.bos, 1, 30000), "BOS");
	CHECK(wait_receivers(p, rc, 1, 30000), "connected");
	for (; i < 110; i++)
		CHECK(send_one(p, rc, i, 24, 10000, NULL), "live message %llu", (unsigned long long)i);
	CHECK(flush_poll(p, rc, 10000), "flush");
	CHECK(poll_until(rc, &r.next, 110, 30000), "up to 110: next %llu (%s)", (unsigned long long)r.next, r.why);
	CHECK(!r.bad && r.late > 0 && r.first + r.got == 110, "first %llu, %llu got, %llu late, bad %llu (%s)",
	      (unsigned long long)r.first, (unsigned long long)r.got, (unsigned long long)r.late,
	      (unsigned long long)r.bad, r.why);
	flit_sub_close(s);
	flit_pub_close(p);
	flit_ctx_close(rc);
	flit_ctx_close(pc);
	return 0;
}

static void late_join_with_a_frame_open_replays_only_what_the_slots_hold(void **state)
{
	(void)state;
	isolated(case_late_join_open_frame, 90000);
}

/* A flush while another thread holds a claim of another publisher of the
 * session waits for its commit, then the frame goes (it used to return at
 * once, leaving the batch unsent). */
struct claim_job { flit_pub *p; volatile int stage; };

static void *claimer(void *arg)
{
	struct claim_job *j = arg;
	void *buf;
	while (flit_pub_claim(j->p, 24, &buf) > 0)
		usleep(100);
	tl_fill(buf, 24, 0);
	j->stage = 1;
	usleep(200000);
	CHECK(flit_pub_commit(j->p, 24) == 0, "commit");
	j->stage = 2;
	return NULL;
}

static int case_flush_waits_for_claim(void)
{
	unsigned port = new_port();
	struct rx rx = { .size = 24 }, ry = { .size = 24 };
	flit_ctx *pc = ctx_new(port, NULL), *rc = ctx_new(0, NULL);
	flit_pub *x = pub_new(pc, "t.fx", "batch = true\n"), *y = pub_new(pc, "t.fy", "batch = true\n");
	flit_sub *sx = sub_new(rc, "t.fx", port, NULL, &rx), *sy = sub_new(rc, "t.fy", port, NULL, &ry);
	CHECK(poll_until(rc, &rx.bos, 1, 30000) && poll_until(rc, &ry.bos, 1, 30000), "BOS");
	CHECK(wait_receivers(x, rc, 1, 30000), "connected");
	unsigned char buf[24];
	tl_fill(buf, sizeof(buf), 0);
	CHECK(flit_pub_send(x, buf, sizeof(buf)) == FLIT_OK, "send (into the open batch)");
	struct claim_job j = { .p = y };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, claimer, &j) == 0, "thread");
	while (!j.stage)
		usleep(100);
	CHECK(flit_pub_flush(x) == FLIT_OK, "flush while the other's claim is open");
	CHECK(j.stage == 2, "the flush returned before the other thread's commit");
	pthread_join(th, NULL);
	CHECK(poll_until(rc, &rx.got, 1, 30000), "the flushed message did not come");
	CHECK(poll_until(rc, &ry.got, 1, 30000), "the committed message did not come");
	CHECK(!rx.bad && !ry.bad, "%s / %s", rx.why, ry.why);
	flit_sub_close(sx);
	flit_sub_close(sy);
	flit_pub_close(x);
	flit_pub_close(y);
	flit_ctx_close(rc);
	flit_ctx_close(pc);
	return 0;
}

/* flit_ctx_poll() with a limit takes the connections in turn: a busy one
 * does not keep another's frames waiting until it is drained. */
struct fair { struct rx *r; uint64_t *busy_before; uint64_t *busy; };

static void on_fair(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct fair *f = arg;
	on_msg(sub, m, f->r);
	if (m->kind == FLIT_MSG_DATA && f->busy_before && f->r->got == 1)
		*f->busy_before = *f->busy;
}

static int case_poll_fair(void)
{
	unsigned pa = new_port(), pb = new_port();
	struct rx ra = { .size = 24 }, rb = { .size = 24 };
	uint64_t busy_before = UINT64_MAX;
	struct fair fa = { .r = &ra }, fb = { .r = &rb, .busy_before = &busy_before, .busy = &ra.got };
	flit_ctx *ca = ctx_new(pa, NULL), *cb = ctx_new(pb, NULL), *rc = ctx_new(0, NULL);
	flit_pub *a = pub_new(ca, "t.busy", "batch = true\n"), *b = pub_new(cb, "t.quiet", NULL);
	char cfg[128];
	snprintf(cfg, sizeof(cfg), "rdma.static = %s:%u\n", addr, pb);
	FLIT_OPTS(flit_sub_opts, ob, .on_msg = on_fair, .arg = &fb, .config = cfg);
	flit_sub *sb = flit_sub_new(rc, "t.quiet", &ob);
	CHECK(sb && poll_until(rc, &rb.bos, 1, 30000), "BOS of the quiet one");
	char cfg2[128];
	snprintf(cfg2, sizeof(cfg2), "rdma.static = %s:%u\n", addr, pa);
	FLIT_OPTS(flit_sub_opts, oa, .on_msg = on_fair, .arg = &fa, .config = cfg2);
	flit_sub *sa = flit_sub_new(rc, "t.busy", &oa);
	CHECK(sa && poll_until(rc, &ra.bos, 1, 30000), "BOS of the busy one"); /* its connection: the list's head */
	CHECK(wait_receivers(a, rc, 1, 30000) && wait_receivers(b, rc, 1, 30000), "connected");
	/* both send while the receiver does not poll: the frames wait in its buffers */
	for (uint64_t i = 0; i < 5000; i++)
		CHECK(send_one(a, NULL, i, 24, 10000, NULL), "busy %llu", (unsigned long long)i);
	CHECK(flush_all(a, 10000), "flush");
	for (uint64_t i = 0; i < 5; i++)
		CHECK(send_one(b, NULL, i, 24, 10000, NULL), "quiet %llu", (unsigned long long)i);
	usleep(1000000);
	for (uint64_t end = tl_now_ms() + 30000; (ra.got < 5000 || rb.got < 5) && tl_now_ms() < end;)
		flit_ctx_poll(rc, 4);
	CHECK(ra.got == 5000 && rb.got == 5 && !ra.bad && !rb.bad, "got %llu and %llu", (unsigned long long)ra.got,
	      (unsigned long long)rb.got);
	printf("# the quiet connection's first message after %llu of the busy one's 5000\n",
	       (unsigned long long)busy_before);
	CHECK(busy_before < 2500, /* taken in turn: a frame or a few of the busy one's (the last may still be on their way), not all of it */ "the quiet connection's first message came after %llu of the busy one's",
	      (unsigned long long)busy_before);
	flit_sub_close(sa);
	flit_sub_close(sb);
	flit_pub_close(a);
	flit_pub_close(b);
	flit_ctx_close(rc);
	flit_ctx_close(ca);
	flit_ctx_close(cb);
	return 0;
}

static void a_limited_poll_takes_connections_in_turn(void **state)
{
	(void)state;
	isolated(case_poll_fair, 90000);
}

static void a_flush_waits_for_another_threads_claim_then_sends(void **state)
{
	(void)state;
	isolated(case_flush_waits_for_claim, 90000);
}

static void write_mode_zero_copy_batching_deliver_everything(void **state)
{
	(void)state;
	isolated(case_write_mode, 90000);
}


/* ---- the wire: connection messages (no device needed) ---------------------- */

/* ---- resolution through the udp transport's resolver channel ------------- */

/* The pattern subscriber's messages, by topic: rx[0] for res.a, rx[1] res.b. */
static void on_pattern(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct rx *r = arg;
	on_msg(sub, m, &r[strcmp(m->topic, "res.a") ? 1 : 0]);
}

static void poll_both(flit_ctx *a, flit_ctx *b)
{
	if (flit_ctx_poll(a, 0) + flit_ctx_poll(b, 0) <= 0)
		sched_yield();
}

/* With udp in the contexts, rdma sources are advertised on the domain's
 * resolver channel (INFO, mode RDMA): a pattern subscriber that was there
 * before them and an exact subscriber that comes after them find them with
 * no static map, get every message in order, and see the sources' END. */
static int case_resolved(void)
{
	unsigned port = new_port();
	const uint64_t n = 1000;
	char res[256], ifname[IFNAMSIZ];
	CHECK(iface_of(addr, ifname, sizeof(ifname)), "no interface has %s", addr);
	snprintf(res, sizeof(res), "context.transports = udp,rdma\ncontext.udp.interface = %s\n"
		 "context.udp.resolver = 239.192.77.%u:%u\n", ifname, 1 + port % 250, port);
	flit_ctx *sc = ctx_new(0, res), *lc = ctx_new(0, res), *pc = ctx_new(port, res);
	struct rx pat[2] = { { .size = 48 }, { .size = 48 } }, late = { .size = 48 };
	FLIT_OPTS(flit_sub_opts, po, .on_msg = on_pattern, .arg = pat, .pattern = true);
	flit_sub *sp = flit_sub_new(sc, "res.*", &po);
	CHECK(sp, "pattern subscriber");
	flit_pub *a = pub_new(pc, "res.a", NULL), *b = pub_new(pc, "res.b", NULL);
	FLIT_OPTS(flit_sub_opts, lo, .on_msg = on_msg, .arg = &late);
	flit_sub *sl = flit_sub_new(lc, "res.b", &lo);
	CHECK(sl, "late exact subscriber");
	/* res.a and res.b share a session: each receiving context connects
	 * once, for both (sc for the pattern, lc for res.b) */
	for (uint64_t end = tl_now_ms() + 30000;
	     flit_pub_receivers(a) != 2 || flit_pub_receivers(b) != 2;) {
		CHECK(tl_now_ms() < end, "receivers: res.a %d of 2, res.b %d of 2",
		      flit_pub_receivers(a), flit_pub_receivers(b));
		poll_both(sc, lc);
	}
	CHECK(logged("found by resolution"), "the receivers did not say how they found the sources");
	for (uint64_t i = 0; i < n; i++) {
		unsigned char buf[48];
		tl_fill(buf, sizeof(buf), i);
		for (flit_pub **p = (flit_pub *[]){ a, b, NULL }; *p; p++)
			for (uint64_t end = tl_now_ms() + 30000; flit_pub_send(*p, buf, sizeof(buf)) != FLIT_OK;) {
				CHECK(tl_now_ms() < end, "message %llu stuck", (unsigned long long)i);
				poll_both(sc, lc);
			}
	}
	flit_pub_close(a);
	flit_pub_close(b);
	for (uint64_t end = tl_now_ms() + 30000;
	     pat[0].eos + pat[1].eos + late.eos < 3;) {
		CHECK(tl_now_ms() < end, "got %llu+%llu+%llu of %llu each, EOS %llu+%llu+%llu",
		      (unsigned long long)pat[0].got, (unsigned long long)pat[1].got,
		      (unsigned long long)late.got, (unsigned long long)n,
		      (unsigned long long)pat[0].eos, (unsigned long long)pat[1].eos,
		      (unsigned long long)late.eos);
		poll_both(sc, lc);
	}
	struct rx *all[] = { &pat[0], &pat[1], &late };
	for (unsigned k = 0; k < 3; k++) {
		CHECK(!all[k]->bad, "receiver %u: %s", k, all[k]->why);
		CHECK(all[k]->got == n && all[k]->first == 0 && all[k]->bos == 1 && !all[k]->died,
		      "receiver %u: %llu messages from %llu, BOS %llu, died %llu", k,
		      (unsigned long long)all[k]->got, (unsigned long long)all[k]->first,
		      (unsigned long long)all[k]->bos, (unsigned long long)all[k]->died);
	}
	flit_sub_close(sp);
	flit_sub_close(sl);
	flit_ctx_close(pc);
	flit_ctx_close(sc);
	flit_ctx_close(lc);
	return 0;
}

static void resolver_finds_sources_for_pattern_and_late_exact_subscribers(void **state)
{
	(void)state;
	isolated(case_resolved, 90000);
}

static void wire_messages_round_trip_and_refuse_malformed(void **state)
{
	uint8_t b[64];
	(void)state;

	struct flit_rdma_req q = { .flags = FLIT_RDMA_REQF_RING, .domain = 0x933b5bde,
				   .topic_hash = flit_rdma_topic_hash("md.eur"), .depth = 64,
				   .buf_size = 16384, .ring_addr = 0x7f0012345000ull, .ring_rkey = 0xabcd,
				   .rcv_id = 0x0123456789abcdefull };
	struct flit_rdma_req q2;
	unsigned ver;
	flit_rdma_req_encode(b, &q);
	assert_int_equal(b[0], 'F');
	assert_int_equal(b[1], 'R');
	assert_int_equal(b[2], FLIT_RDMA_VERSION);
	assert_int_equal(flit_rdma_req_decode(b, FLIT_RDMA_REQ_LEN, &q2, &ver), 0);
	assert_memory_equal(&q.topic_hash, &q2.topic_hash, 8);
	assert_int_equal(q2.depth, 64);
	assert_int_equal(q2.buf_size, 16384);
	assert_int_equal(q2.ring_rkey, 0xabcd);
	assert_true(q2.ring_addr == q.ring_addr);
	assert_true(q2.rcv_id == 0x0123456789abcdefull);
	assert_int_equal(b[40], 0xef); /* little-endian at offset 40 */
	/* rdma_cm pads private data with zeros: longer is fine */
	memset(b + FLIT_RDMA_REQ_LEN, 0, sizeof(b) - FLIT_RDMA_REQ_LEN);
	assert_int_equal(flit_rdma_req_decode(b, 56, &q2, &ver), 0);
	/* short, foreign, other version, bad fields */
	assert_int_equal(flit_rdma_req_decode(b, FLIT_RDMA_REQ_LEN - 1, &q2, &ver), -EPROTO);
	assert_int_equal(flit_rdma_req_decode(b, 3, &q2, &ver), -EPROTO);
	b[2] = 1; /* before late join: refused, naming its version */
	assert_int_equal(flit_rdma_req_decode(b, FLIT_RDMA_REQ_LEN, &q2, &ver), -EPROTO);
	assert_int_equal(ver, 1);
	b[2] = FLIT_RDMA_VERSION;
	b[0] = 'X';
	assert_int_equal(flit_rdma_req_decode(b, FLIT_RDMA_REQ_LEN, &q2, &ver), -EPROTO);
	assert_int_equal(ver, 0);
	b[0] = 'F';
	b[3] = 0x80;
	assert_int_equal(flit_rdma_req_decode(b, FLIT_RDMA_REQ_LEN, &q2, &ver), -EINVAL);
	b[3] = 1;
	q.depth = 0;
	flit_rdma_req_encode(b, &q);
	assert_int_equal(flit_rdma_req_decode(b, FLIT_RDMA_REQ_LEN, &q2, &ver), -EINVAL);
	q.depth = 64;
	q.buf_size = 1000; /* not a multiple of 64 */
	flit_rdma_req_encode(b, &q);
	assert_int_equal(flit_rdma_req_decode(b, FLIT_RDMA_REQ_LEN, &q2, &ver), -EINVAL);

	struct flit_rdma_rep p = { .mode = FLIT_RDMA_WIRE_WRITE, .session_id = 0x12345678,
				   .credit_addr = 0x55aa00001000ull, .credit_rkey = 7, .frame_max = 8192,
				   .depth = 64 }, p2;
	flit_rdma_rep_encode(b, &p);
	assert_int_equal(flit_rdma_rep_decode(b, FLIT_RDMA_REP_LEN, &p2), 0);
	assert_int_equal(p2.mode, FLIT_RDMA_WIRE_WRITE);
	assert_int_equal(p2.session_id, 0x12345678);
	assert_true(p2.credit_addr == p.credit_addr);
	assert_int_equal(p2.frame_max, 8192);
	b[3] = 3; /* unknown mode */
	assert_int_equal(flit_rdma_rep_decode(b, FLIT_RDMA_REP_LEN, &p2), -EINVAL);
	assert_int_equal(flit_rdma_rep_decode(b, 10, &p2), -EPROTO);

	struct flit_rdma_rej_msg j = { .reason = FLIT_RDMA_REJ_FRAME, .value = 65536 }, j2;
	flit_rdma_rej_encode(b, &j);
	assert_int_equal(flit_rdma_rej_decode(b, FLIT_RDMA_REJ_LEN, &j2), 0);
	assert_int_equal(j2.reason, FLIT_RDMA_REJ_FRAME);
	assert_int_equal(j2.value, 65536);
	memset(b, 0, sizeof(b)); /* an IB CM reject without our payload */
	assert_int_equal(flit_rdma_rej_decode(b, 148, &j2), -EPROTO);
	assert_non_null(strstr(flit_rdma_rej_str(FLIT_RDMA_REJ_NO_TOPIC), "no source"));
	assert_non_null(strstr(flit_rdma_rej_str(FLIT_RDMA_REJ_SESSION), "session"));

	/* FNV-1a 64 reference values */
	assert_true(flit_rdma_topic_hash("") == 0xcbf29ce484222325ull);
	assert_true(flit_rdma_topic_hash("a") == 0xaf63dc4c8601ec8cull);
}

int main(void)
{
	const struct CMUnitTest wire[] = {
		cmocka_unit_test(wire_messages_round_trip_and_refuse_malformed),
	};
	const struct CMUnitTest verbs[] = {
		cmocka_unit_test(message_larger_than_negotiated_size_is_refused_clearly),
		cmocka_unit_test(connect_without_listener_fails_clearly_and_never_hangs),
		cmocka_unit_test(credit_exhaustion_backpressures_and_recovers),
		cmocka_unit_test(write_mode_zero_copy_batching_deliver_everything),
		cmocka_unit_test(late_join_replays_kept_frames_then_live),
		cmocka_unit_test(late_join_with_a_frame_open_replays_only_what_the_slots_hold),
		cmocka_unit_test(a_flush_waits_for_another_threads_claim_then_sends),
		cmocka_unit_test(a_limited_poll_takes_connections_in_turn),
		cmocka_unit_test(rc_pubsub_100k_messages_in_order_between_processes),
		cmocka_unit_test(two_subscribers_on_one_source_get_every_message),
		cmocka_unit_test(dead_subscriber_is_dropped_others_continue_new_one_connects),
		cmocka_unit_test(source_death_ends_session_receiver_reconnects),
		cmocka_unit_test(resolver_finds_sources_for_pattern_and_late_exact_subscribers),
		cmocka_unit_test(topics_of_a_session_share_one_connection_batched),
		cmocka_unit_test(topics_of_a_session_share_one_connection_unbatched),
		cmocka_unit_test(a_receiver_joins_a_running_session_of_3000_topics),
		cmocka_unit_test(a_killed_publisher_ends_each_topic_of_its_session),
	};
	int n = 0, fails = cmocka_run_group_tests_name("rdma wire", wire, NULL, NULL);
	struct ibv_device **l = ibv_get_device_list(&n);

	if (l)
		ibv_free_device_list(l);
	if (!l || n <= 0) {
		if (fails)
			return 1;
		printf("SKIP: no RDMA device (ibv_get_device_list found none%s%s: no RDMA NIC or "
		       "Soft-RoCE device here; tests/test_rdma_vm.sh runs this in a Soft-RoCE guest)\n",
		       l ? "" : ": ", l ? "" : strerror(errno));
		return 77;
	}
	if (!local_addr(addr, sizeof(addr))) {
		printf("SKIP: an RDMA device, but no port with an IPv4 address (set FLIT_RDMA_IP)\n");
		return fails ? 1 : 77;
	}
	port_next = 30000 + (unsigned)(getpid() % 1000) * 16;
	printf("# RDMA address %s, ports from %u\n", addr, port_next);
	fflush(stdout);
	if (getenv("FLIT_TEST_FILTER")) /* one case, by a glob of its name */
		cmocka_set_test_filter(getenv("FLIT_TEST_FILTER"));
	return fails + cmocka_run_group_tests_name("rdma", verbs, NULL, NULL);
}

#else /* !FLIT_HAVE_RDMA */

int main(void)
{
	/* -t rdma must say why it cannot work, not fail obscurely */
	FLIT_OPTS(flit_ctx_opts, o, .config = "context.transports = shm,rdma\n");
	flit_ctx *ctx = flit_ctx_new(&o);
	if (ctx || !strstr(flit_errmsg(), "built without RDMA")) {
		printf("FAIL: context with rdma: %s\n", ctx ? "created" : flit_errmsg());
		return 1;
	}
	printf("SKIP: built without RDMA (libibverbs/librdmacm missing at build time)\n");
	return 77;
}

#endif
