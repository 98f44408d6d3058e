// SPDX-License-Identifier: BSD-2-Clause
/* shm publish/subscribe behaviour: threads and processes, receiver-paced
 * delivery of 1 M sequence-numbered messages with a pattern check (zero
 * loss, no duplicate, in order), batching, zero-copy claim/commit, discovery
 * in either start order, one live writer per topic. */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "testlib.h"

struct rx {
	uint64_t next;       /* next expected seq (payload) */
	uint64_t n, bad, bos, eos, loss;
	uint64_t last_flit_seq;
	bool have_seq;
	int done;
	uint64_t want;
	size_t len;
};

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct rx *r = arg;
	uint64_t seq = 0;

	switch (m->kind) {
	case FLIT_MSG_BOS: r->bos++; return;
	case FLIT_MSG_EOS: r->eos++; r->done = 1; return;
	case FLIT_MSG_LOSS: r->loss += m->lost; return;
	case FLIT_MSG_DATA: break;
	}
	if ((r->len && m->len != r->len) || tl_check(m->data, m->len, &seq) || seq != r->next ||
	    (r->have_seq && m->seq != r->last_flit_seq + 1))
		r->bad++;
	r->have_seq = true;
	r->last_flit_seq = m->seq;
	r->next = seq + 1;
	if (++r->n == r->want)
		r->done = 1;
}

static flit_sub *sub_new(flit_ctx *ctx, const char *topic, struct rx *r)
{
	return tl_sub(ctx, topic, on_msg, r);
}

static int send_spin(flit_pub *p, const void *d, size_t len)
{
	uint64_t end = tl_now_ms() + 10000;
	int rc;
	while ((rc = flit_pub_send(p, d, len)) == FLIT_BACK_PRESSURED && tl_now_ms() < end)
		;
	return rc;
}

static int wait_receivers(flit_pub *p, int n)
{
	uint64_t end = tl_now_ms() + 5000;
	while (flit_pub_receivers(p) < n && tl_now_ms() < end)
		usleep(1000);
	return flit_pub_receivers(p);
}

/* ---- same process, two contexts (threads) ---- */

struct thr { const char *topic; uint64_t count; size_t len; const char *cfg; int rc; };

static void *pub_thread(void *arg)
{
	struct thr *t = arg;
	flit_ctx *ctx = tl_ctx(NULL);
	FLIT_OPTS(flit_pub_opts, po, .config = t->cfg);
	flit_pub *p = flit_pub_new(ctx, t->topic, &po);
	unsigned char buf[4096];

	t->rc = -1;
	if (!p || wait_receivers(p, 1) < 1)
		goto out;
	for (uint64_t i = 0; i < t->count; i++) {
		tl_fill(buf, t->len, i);
		if (send_spin(p, buf, t->len))
			goto out;
	}
	flit_pub_flush(p);
	t->rc = 0;
out:
	flit_pub_close(p);
	flit_ctx_close(ctx);
	return NULL;
}

static void run_threads(const char *topic, uint64_t count, size_t len, const char *pubcfg)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct rx r = { .want = count, .len = len };
	flit_sub *s = sub_new(ctx, topic, &r);
	struct thr t = { topic, count, len, pubcfg, -1 };
	pthread_t th;

	assert_non_null(s);
	assert_int_equal(pthread_create(&th, NULL, pub_thread, &t), 0);
	tl_poll_until(ctx, &r.done, 30000);
	pthread_join(th, NULL);
	assert_int_equal(t.rc, 0);
	assert_int_equal(r.n, count);
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.loss, 0);
	assert_int_equal(r.bos, 1);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

static void threads_deliver_every_message_in_order(void **state)
{
	run_threads("t.threads", 200000, 24, NULL);
}

static void batched_source_delivers_every_message_in_order(void **state)
{
	run_threads("t.batched", 200000, 16, "batch = true\nbatch_max = 4K");
}

static void small_ring_wraps_and_back_pressures_without_loss(void **state)
{
	/* 4 KiB ring, messages of odd sizes: constant wrapping and padding */
	run_threads("t.wrap", 100000, 333, "shm.capacity = 64K");
}

/* ---- two processes, 1 M messages ---- */

static void two_processes_one_million_messages_paced(void **state)
{
	const uint64_t count = 1000000;
	pid_t pid = tl_fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		flit_ctx *ctx = tl_ctx(NULL);
		flit_pub *p = flit_pub_new(ctx, "t.procs", NULL);
		unsigned char buf[64];
		if (!p || wait_receivers(p, 1) < 1)
			_exit(3);
		for (uint64_t i = 0; i < count; i++) {
			tl_fill(buf, sizeof(buf), i);
			if (send_spin(p, buf, sizeof(buf)))
				_exit(4);
		}
		flit_pub_close(p);
		flit_ctx_close(ctx);
		_exit(0);
	}
	flit_ctx *ctx = tl_ctx(NULL);
	struct rx r = { .want = count + 1, .len = 64 }; /* until EOS */
	flit_sub *s = sub_new(ctx, "t.procs", &r);
	int st;

	tl_poll_until(ctx, &r.done, 60000);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(r.n, count);
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.loss, 0);
	assert_int_equal(r.eos, 1);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

/* ---- discovery, claim/commit, exclusivity ---- */

static void subscriber_finds_publisher_started_before_or_after(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct rx r1 = { 0 }, r2 = { 0 };
	flit_pub *early = flit_pub_new(pc, "t.early", NULL);
	flit_sub *s1 = sub_new(sc, "t.early", &r1);    /* after its publisher */
	flit_sub *s2 = sub_new(sc, "t.late", &r2);     /* before its publisher */
	flit_pub *late = flit_pub_new(pc, "t.late", NULL);
	unsigned char b[16];

	assert_non_null(early);
	assert_non_null(late);
	r1.want = r2.want = 1;
	for (int i = 0; i < 1000 && !(r1.bos && r2.bos); i++) {
		flit_ctx_poll(sc, 0);
		usleep(1000);
	}
	assert_int_equal(r1.bos, 1);
	assert_int_equal(r2.bos, 1);
	tl_fill(b, sizeof(b), 0);
	assert_int_equal(flit_pub_send(early, b, sizeof(b)), 0);
	assert_int_equal(flit_pub_send(late, b, sizeof(b)), 0);
	tl_poll_until(sc, &r1.done, 2000);
	tl_poll_until(sc, &r2.done, 2000);
	assert_int_equal(r1.n, 1);
	assert_int_equal(r2.n, 1);
	flit_pub_close(late);
	r2.done = 0;
	tl_poll_until(sc, &r2.done, 2000);
	assert_int_equal(r2.eos, 1);
	flit_sub_close(s1);
	flit_sub_close(s2);
	flit_pub_close(early);
	flit_ctx_close(pc);
	flit_ctx_close(sc);
}

static void pattern_subscriber_gets_matching_topics_only(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct rx r = { .want = 2 };
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg, .arg = &r, .pattern = true);
	flit_sub *s = flit_sub_new(ctx, "prices.*", &so);
	flit_pub *a = flit_pub_new(ctx, "prices.eur", NULL);
	flit_pub *b = flit_pub_new(ctx, "news.eur", NULL);
	unsigned char buf[8];

	assert_non_null(s);
	for (int i = 0; i < 100 && r.bos < 1; i++)
		flit_ctx_poll(ctx, 0);
	assert_int_equal(r.bos, 1);
	tl_fill(buf, 8, 0);
	assert_int_equal(flit_pub_send(b, buf, 8), 0);
	assert_int_equal(flit_pub_send(a, buf, 8), 0);
	for (int i = 0; i < 100; i++)
		flit_ctx_poll(ctx, 0);
	assert_int_equal(r.n, 1);
	flit_pub_close(a);
	flit_pub_close(b);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

static void claim_commit_sends_in_place_and_abort_sends_nothing(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct rx r = { .want = 2 };
	flit_sub *s = sub_new(ctx, "t.claim", &r);
	flit_pub *p = flit_pub_new(ctx, "t.claim", NULL);
	void *buf;

	assert_non_null(p);
	for (int i = 0; i < 100 && !r.bos; i++)
		flit_ctx_poll(ctx, 0);
	assert_int_equal(flit_pub_claim(p, 100, &buf), 0);
	assert_int_equal(flit_pub_claim(p, 100, &buf), -EBUSY);
	tl_fill(buf, 40, 0);
	assert_int_equal(flit_pub_commit(p, 40), 0);     /* shorter than claimed */
	assert_int_equal(flit_pub_commit(p, 40), -EINVAL);
	assert_int_equal(flit_pub_claim(p, 10, &buf), 0);
	assert_int_equal(flit_pub_abort(p), 0);
	assert_int_equal(flit_pub_claim(p, 64, &buf), 0);
	tl_fill(buf, 64, 1);
	assert_int_equal(flit_pub_commit(p, 64), 0);
	tl_poll_until(ctx, &r.done, 2000);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.bad, 0);
	assert_int_equal(flit_pub_next_seq(p), 2);
	flit_pub_close(p);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

static void oversized_message_is_refused(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	flit_pub *p = flit_pub_new(ctx, "t.big", NULL);
	size_t max = flit_pub_max_msg(p);
	void *big = calloc(1, max + 1);

	assert_true(max >= 65536);
	assert_int_equal(flit_pub_send(p, big, max + 1), -EMSGSIZE);
	assert_non_null(strstr(flit_errmsg(), "exceeds"));
	assert_int_equal(flit_pub_send(p, big, max), 0);
	free(big);
	flit_pub_close(p);
	flit_ctx_close(ctx);
}

static void second_live_writer_on_a_topic_is_refused(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	/* a ring of its own is named by its topic: one live writer */
	FLIT_OPTS(flit_pub_opts, po, .config = "source.session = own");
	flit_pub *p = flit_pub_new(ctx, "t.excl", &po);
	flit_pub *q = flit_pub_new(ctx, "t.excl", &po);

	assert_non_null(p);
	assert_null(q);
	assert_int_equal(errno, EADDRINUSE);
	assert_non_null(strstr(flit_errmsg(), "live writer"));
	flit_pub_close(p);
	q = flit_pub_new(ctx, "t.excl", &po); /* free again after close */
	assert_non_null(q);
	flit_pub_close(q);
	flit_ctx_close(ctx);
}

struct tsrx { int got; struct flit_msg m; char topic[64], source[96]; };

static void ts_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct tsrx *x = arg;
	if (m->kind == FLIT_MSG_DATA) {
		x->m = *m;
		snprintf(x->topic, sizeof(x->topic), "%s", m->topic);
		snprintf(x->source, sizeof(x->source), "%s", m->source);
		x->got = 1;
	}
}

static void timestamps_are_carried_when_configured(void **state)
{
	struct tsrx t = { 0 };
	flit_ctx *ctx = tl_ctx("receiver.timestamps = true\nsource.timestamps = true\n");
	FLIT_OPTS(flit_sub_opts, so, .on_msg = ts_cb, .arg = &t);
	flit_sub *s = flit_sub_new(ctx, "t.ts", &so);
	flit_pub *p = flit_pub_new(ctx, "t.ts", NULL);

	flit_ctx_poll(ctx, 0);
	assert_int_equal(flit_pub_send(p, "x", 1), 0);
	tl_poll_until(ctx, &t.got, 1000);
	assert_true(t.got);
	assert_true(t.m.flags & FLIT_MSGF_SEND_TS);
	assert_true(t.m.flags & FLIT_MSGF_RECV_TS);
	assert_true(t.m.recv_ts_ns >= t.m.send_ts_ns);
	assert_true(t.m.recv_ts_ns - t.m.send_ts_ns < 1000000000ull);
	assert_string_equal(t.topic, "t.ts");
	assert_non_null(strstr(t.source, "shm:pid="));
	flit_pub_close(p);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(threads_deliver_every_message_in_order),
		cmocka_unit_test(batched_source_delivers_every_message_in_order),
		cmocka_unit_test(small_ring_wraps_and_back_pressures_without_loss),
		cmocka_unit_test(two_processes_one_million_messages_paced),
		cmocka_unit_test(subscriber_finds_publisher_started_before_or_after),
		cmocka_unit_test(pattern_subscriber_gets_matching_topics_only),
		cmocka_unit_test(claim_commit_sends_in_place_and_abort_sends_nothing),
		cmocka_unit_test(oversized_message_is_refused),
		cmocka_unit_test(second_live_writer_on_a_topic_is_refused),
		cmocka_unit_test(timestamps_are_carried_when_configured),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
