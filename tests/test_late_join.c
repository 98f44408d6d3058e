// SPDX-License-Identifier: BSD-2-Clause
/* Late join over shm (transports/shm, docs/PROTOCOL.md "shm ring records"):
 * a subscriber older than its source starts at the source's first message;
 * a receiver with receiver.late_join joining a running source with
 * source.late_join = N first gets the last N messages the ring still holds,
 * marked FLIT_MSGF_LATE_JOIN, then the live stream with no gap or duplicate
 * at the seam; without either key it joins live; a writer racing the
 * catch-up never makes it deliver a torn, repeated or unordered message. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "testlib.h"

struct rx {
	uint64_t n, late, bad, bos, eos, loss, loss_events;
	uint64_t first, last;     /* flit seq of the first and last message */
	uint64_t first_live;      /* flit seq of the first unmarked message */
	bool have, have_live;
	uint64_t want;
	int done;
};

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct rx *r = arg;
	uint64_t pseq;

	(void)sub;
	switch (m->kind) {
	case FLIT_MSG_BOS: r->bos++; return;
	case FLIT_MSG_EOS: r->eos++; return;
	case FLIT_MSG_LOSS:
		r->loss += m->lost;
		r->loss_events++;
		/* a loss continues the sequence after it */
		if (r->have && m->seq != r->last + 1)
			r->bad++;
		r->last = m->seq + m->lost - 1;
		r->have = true;
		return;
	case FLIT_MSG_DATA: break;
	}
	/* payload carries the flit seq: nothing torn, nothing out of order */
	if (tl_check(m->data, m->len, &pseq) || pseq != m->seq ||
	    (r->have && m->seq != r->last + 1))
		r->bad++;
	if (m->flags & FLIT_MSGF_LATE_JOIN) {
		r->late++;
		if (r->have_live) /* a retained message after a live one */
			r->bad++;
	} else if (!r->have_live) {
		r->have_live = true;
		r->first_live = m->seq;
	}
	if (!r->n)
		r->first = m->seq;
	r->last = m->seq;
	r->have = true;
	if (++r->n == r->want)
		r->done = 1;
}

static flit_pub *pub_new(flit_ctx *ctx, const char *topic, const char *cfg)
{
	FLIT_OPTS(flit_pub_opts, po, .config = cfg);
	flit_pub *p = flit_pub_new(ctx, topic, &po);
	if (!p)
		fprintf(stderr, "flit_pub_new: %s\n", flit_errmsg());
	return p;
}

static flit_sub *sub_new(flit_ctx *ctx, const char *topic, const char *cfg,
			 struct rx *r)
{
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg, .arg = r, .config = cfg);
	flit_sub *s = flit_sub_new(ctx, topic, &so);
	if (!s)
		fprintf(stderr, "flit_sub_new: %s\n", flit_errmsg());
	return s;
}

/* send messages seq from..to-1 (the payload carries the seq) */
static void send_range(flit_pub *p, uint64_t from, uint64_t to)
{
	unsigned char buf[16];

	for (uint64_t i = from; i < to; i++) {
		tl_fill(buf, sizeof(buf), i);
		assert_int_equal(flit_pub_send(p, buf, sizeof(buf)), 0);
	}
}

/* poll until r has `want` messages (or 10 s) */
static void poll_for(flit_ctx *ctx, struct rx *r, uint64_t want)
{
	r->want = want;
	r->done = r->n >= want;
	tl_poll_until(ctx, &r->done, 10000);
}

/* poll until the subscriber attached (BOS), then a little more */
static void poll_bos(flit_ctx *ctx, struct rx *r)
{
	uint64_t end = tl_now_ms() + 5000;
	while (!r->bos && tl_now_ms() < end)
		flit_ctx_poll(ctx, 0);
	assert_int_equal(r->bos, 1);
}

/* A publishing and a subscribing context, and what the subscriber got. */
struct pair {
	flit_ctx *pc, *sc;
	flit_pub *p;
	flit_sub *s;
	struct rx r;
};

static void pair_pub(struct pair *x, const char *topic, const char *cfg)
{
	if (!x->pc)
		x->pc = tl_ctx(NULL);
	x->p = pub_new(x->pc, topic, cfg);
	assert_non_null(x->p);
}

static void pair_sub(struct pair *x, const char *topic, const char *cfg)
{
	if (!x->sc)
		x->sc = tl_ctx(NULL);
	x->s = sub_new(x->sc, topic, cfg, &x->r);
	assert_non_null(x->s);
}

static void pair_close(struct pair *x)
{
	flit_sub_close(x->s);
	flit_pub_close(x->p);
	flit_ctx_close(x->sc);
	flit_ctx_close(x->pc);
}

/* n messages from `first`, `late` of them marked; none lost, none bad */
static void expect_rx(const struct rx *r, uint64_t n, uint64_t first, uint64_t late)
{
	assert_int_equal(r->n, n);
	assert_int_equal(r->first, first);
	assert_int_equal(r->late, late);
	assert_int_equal(r->loss, 0);
	assert_int_equal(r->bad, 0);
}

static void subscriber_older_than_its_source_gets_the_first_message(void **state)
{
	struct pair x = { 0 };

	(void)state;
	pair_sub(&x, "lj.first", NULL);
	pair_pub(&x, "lj.first", NULL);
	/* sent before the subscriber has even seen the ring */
	send_range(x.p, 0, 5);
	poll_for(x.sc, &x.r, 5);
	expect_rx(&x.r, 5, 0, 0);
	pair_close(&x);
}

/* The target: 1,000,000 sent, late_join = 10000: exactly the last
 * 10,000, then the live stream, no gap, no duplicate, in order. */
static void late_joiner_gets_exactly_the_last_n_then_live(void **state)
{
	struct pair x = { 0 };

	(void)state;
	pair_pub(&x, "lj.last", "source.late_join = 10000\n");
	send_range(x.p, 0, 1000000);
	pair_sub(&x, "lj.last", "receiver.late_join = on\n");
	poll_for(x.sc, &x.r, 10000);
	send_range(x.p, 1000000, 1000100);
	poll_for(x.sc, &x.r, 10100);
	expect_rx(&x.r, 10100, 990000, 10000);
	assert_int_equal(x.r.first_live, 1000000);
	assert_int_equal(x.r.last, 1000099);
	pair_close(&x);
}

/* receiver.late_join off, or a source that offers nothing: the live stream */
static void join_live_without_both_keys(const char *pcfg, const char *scfg)
{
	struct pair x = { 0 };

	pair_pub(&x, "lj.live", pcfg);
	send_range(x.p, 0, 100);
	pair_sub(&x, "lj.live", scfg);
	poll_bos(x.sc, &x.r);
	send_range(x.p, 100, 110);
	poll_for(x.sc, &x.r, 10);
	expect_rx(&x.r, 10, 100, 0);
	pair_close(&x);
}

static void receiver_without_late_join_joins_live(void **state)
{
	(void)state;
	join_live_without_both_keys("source.late_join = 1000\n", NULL);
}

static void source_without_late_join_offers_nothing(void **state)
{
	(void)state;
	join_live_without_both_keys(NULL, "receiver.late_join = on\n");
}

/* More asked for than the ring holds: what it holds, from the oldest
 * intact record, not reported as loss. */
static void late_join_gets_what_the_ring_still_holds(void **state)
{
	struct pair x = { 0 };

	(void)state;
	pair_pub(&x, "lj.wrap", "source.late_join = 100000\nsource.shm.capacity = 64K\n");
	send_range(x.p, 0, 50000);  /* 64-byte records: the ring holds ~1000 */
	pair_sub(&x, "lj.wrap", "receiver.late_join = on\n");
	poll_bos(x.sc, &x.r);
	for (int i = 0; i < 20; i++)
		flit_ctx_poll(x.sc, 0);
	send_range(x.p, 50000, 50001);
	uint64_t end = tl_now_ms() + 5000;
	while (x.r.last != 50000 && tl_now_ms() < end)
		flit_ctx_poll(x.sc, 0);
	assert_int_equal(x.r.last, 50000);
	assert_int_equal(x.r.first_live, 50000);
	assert_true(x.r.late >= 500 && x.r.late <= 1024);
	expect_rx(&x.r, x.r.late + 1, 50000 - x.r.late, x.r.late);
	pair_close(&x);
}

struct writer { flit_pub *p; uint64_t from, to; volatile int go; };

static void *writer_thread(void *arg)
{
	struct writer *w = arg;
	unsigned char buf[16];

	for (uint64_t i = w->from; i < w->to; i++) {
		tl_fill(buf, sizeof(buf), i);
		uint64_t end = tl_now_ms() + 10000;
		int rc;
		while ((rc = flit_pub_send(w->p, buf, sizeof(buf))) == FLIT_BACK_PRESSURED &&
		       tl_now_ms() < end)
			;
		if (rc)
			return (void *)1;
	}
	return NULL;
}

/* The writer keeps writing (and overwriting what is being caught up on)
 * while the receiver joins: whatever it gets is whole and in order, and
 * every gap is a reported loss. */
static void late_join_racing_the_writer_stays_in_order(void **state)
{
	struct pair x = { 0 };
	pthread_t th;
	void *wr;

	(void)state;
	pair_pub(&x, "lj.race", "source.late_join = 20000\nsource.shm.capacity = 256K\n");
	struct writer w = { .p = x.p, .from = 20000, .to = 400000 };
	struct rx *r = &x.r;
	send_range(x.p, 0, 20000);
	assert_int_equal(pthread_create(&th, NULL, writer_thread, &w), 0);
	pair_sub(&x, "lj.race", "receiver.late_join = on\n");
	uint64_t end = tl_now_ms() + 20000;
	while (r->last + 1 < w.to && tl_now_ms() < end)
		flit_ctx_poll(x.sc, 0);
	pthread_join(th, &wr);
	assert_null(wr);
	assert_int_equal(r->last, w.to - 1);
	assert_int_equal(r->bad, 0);
	assert_int_equal(r->n + r->loss, w.to - r->first);
	print_message("racing: first %llu, %llu retained delivered, %llu lost in %llu events\n",
		      (unsigned long long)r->first, (unsigned long long)r->late,
		      (unsigned long long)r->loss, (unsigned long long)r->loss_events);
	pair_close(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(subscriber_older_than_its_source_gets_the_first_message),
		cmocka_unit_test(late_joiner_gets_exactly_the_last_n_then_live),
		cmocka_unit_test(receiver_without_late_join_joins_live),
		cmocka_unit_test(source_without_late_join_offers_nothing),
		cmocka_unit_test(late_join_gets_what_the_ring_still_holds),
		cmocka_unit_test(late_join_racing_the_writer_stays_in_order),
	};
	setenv("FLIT_CONTEXT_TRANSPORTS", "shm", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
