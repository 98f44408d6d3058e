// SPDX-License-Identifier: BSD-2-Clause
/*
 * shm overwrite mode through the public API: the writer never waits; a
 * reader that falls a lap behind resumes at the newest record and reports
 * what it missed as FLIT_MSG_LOSS.
 *
 * What every case checks on the subscriber's event log: the DATA seqs and
 * the LOSS ranges (seq .. seq + lost - 1) tile the published range exactly
 * once, in increasing order, each LOSS immediately followed by the DATA
 * that ends the gap; every DATA payload passes tl_check() with the seq it
 * carries (a torn copy cannot); the context counters agree with the events.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "testlib.h"

#define OW_CFG "shm.mode = overwrite\nshm.capacity = 64K"

struct ev {
	enum flit_msg_kind kind;
	uint64_t seq, lost;
	bool intact; /* DATA: payload pattern and length check out */
};

struct evlog {
	struct ev *v;
	size_t n, cap;
	uint64_t bos, eos;
	size_t len;  /* expected payload length, 0: len_of() */
	_Atomic int done;
};

/* Payload length of message seq in the variable-size cases. */
static size_t len_of(uint64_t seq)
{
	return 8 + (size_t)((seq * 2654435761u) % 700);
}

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct evlog *l = arg;
	struct ev e = { .kind = m->kind, .seq = m->seq, .lost = m->lost };
	uint64_t pseq;

	switch (m->kind) {
	case FLIT_MSG_BOS:
		l->bos++;
		return;
	case FLIT_MSG_EOS:
		l->eos++;
		atomic_store(&l->done, 1);
		return;
	case FLIT_MSG_LOSS:
		break;
	case FLIT_MSG_DATA:
		e.intact = !tl_check(m->data, m->len, &pseq) && pseq == m->seq &&
			   m->len == (l->len ? l->len : len_of(m->seq));
		break;
	}
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4096;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			abort();
	}
	l->v[l->n++] = e;
}

/* What a test opened: the teardown closes it, also after a failed
 * assertion (publishers, then subscribers, then contexts). */
static struct {
	flit_ctx *ctx[4];
	flit_pub *pub[4];
	flit_sub *sub[4];
	struct evlog *log[4];
} res;

#define KEEP(arr, x) ({                                                    \
	size_t i_ = 0;                                                     \
	while (i_ < sizeof(res.arr) / sizeof(res.arr[0]) && res.arr[i_])  \
		i_++;                                                      \
	assert_true(i_ < sizeof(res.arr) / sizeof(res.arr[0]));            \
	res.arr[i_] = (x);                                                 \
})

static int close_all(void **state)
{
	for (int i = 0; i < 4; i++)
		flit_pub_close(res.pub[i]);
	for (int i = 0; i < 4; i++)
		flit_sub_close(res.sub[i]);
	for (int i = 0; i < 4; i++)
		flit_ctx_close(res.ctx[i]);
	for (int i = 0; i < 4; i++)
		if (res.log[i]) {
			free(res.log[i]->v);
			free(res.log[i]);
		}
	memset(&res, 0, sizeof(res));
	return 0;
}

/* An event log for one subscriber; `len`: expected payload length (0:
 * len_of(seq)). */
static struct evlog *evlog_new(size_t len)
{
	struct evlog *l = calloc(1, sizeof(*l));

	assert_non_null(l);
	KEEP(log, l);
	l->len = len;
	return l;
}

static flit_ctx *ctx_new(void)
{
	flit_ctx *ctx = tl_ctx(NULL);

	assert_non_null(ctx);
	KEEP(ctx, ctx);
	return ctx;
}

struct tally {
	uint64_t data, lost, losses, last;
};

/* Walk the log from `first`: DATA and LOSS tile [first, end) exactly once,
 * in order; a gap is only ever closed by one LOSS right before its DATA. */
static struct tally check_log(const struct evlog *l, size_t from, uint64_t first)
{
	struct tally t = { 0 };
	uint64_t next = first;
	bool after_loss = false;

	for (size_t i = from; i < l->n; i++) {
		const struct ev *e = &l->v[i];
		if (e->kind == FLIT_MSG_LOSS) {
			if (after_loss || e->seq != next || e->lost == 0)
				fail_msg("event %zu: LOSS %llu+%llu, expected one at %llu%s", i,
					 (unsigned long long)e->seq, (unsigned long long)e->lost,
					 (unsigned long long)next, after_loss ? " (after a LOSS)" : "");
			next += e->lost;
			t.lost += e->lost;
			t.losses++;
			after_loss = true;
			continue;
		}
		if (e->seq != next)
			fail_msg("event %zu: DATA seq %llu, expected %llu (%s)", i,
				 (unsigned long long)e->seq, (unsigned long long)next,
				 e->seq > next ? "gap without LOSS" : "duplicate or reordered");
		if (!e->intact)
			fail_msg("event %zu: DATA seq %llu fails the pattern check (torn?)", i,
				 (unsigned long long)e->seq);
		next = e->seq + 1;
		t.data++;
		t.last = e->seq;
		after_loss = false;
	}
	if (after_loss)
		fail_msg("log ends with a LOSS not followed by DATA");
	return t;
}

static flit_sub *sub_new(flit_ctx *ctx, const char *topic, struct evlog *l)
{
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg, .arg = l);
	flit_sub *s = flit_sub_new(ctx, topic, &so);
	if (!s)
		fail_msg("flit_sub_new: %s", flit_errmsg());
	KEEP(sub, s);
	return s;
}

static flit_pub *pub_try(flit_ctx *ctx, const char *topic, const char *cfg)
{
	FLIT_OPTS(flit_pub_opts, po, .config = cfg);
	flit_pub *p = flit_pub_new(ctx, topic, &po);
	if (!p)
		fprintf(stderr, "flit_pub_new: %s\n", flit_errmsg());
	return p;
}

static flit_pub *pub_new(flit_ctx *ctx, const char *topic, const char *cfg)
{
	flit_pub *p = pub_try(ctx, topic, cfg);

	if (!p)
		fail_msg("flit_pub_new: %s", flit_errmsg());
	KEEP(pub, p);
	return p;
}

/* Poll until the subscriber has seen its source. */
static void wait_bos(flit_ctx *ctx, struct evlog *l)
{
	for (int i = 0; i < 2000 && !l->bos; i++) {
		flit_ctx_poll(ctx, 0);
		if (!l->bos)
			usleep(500);
	}
	assert_int_equal(l->bos, 1);
}

/* Poll until nothing more arrives for a while. */
static void poll_quiet(flit_ctx *ctx)
{
	for (int idle = 0; idle < 1000;)
		idle = flit_ctx_poll(ctx, 0) > 0 ? 0 : idle + 1;
}

static void check_counters(flit_ctx *ctx, const struct tally *t)
{
	FLIT_OPTS(flit_counters, c);

	assert_int_equal(flit_ctx_counters(ctx, &c), 0);
	assert_true(c.msgs_lost == t->lost);
	assert_true(c.loss_events == t->losses);
	assert_true(c.msgs_received == t->data);
	assert_true(c.malformed == 0);
	assert_true(c.duplicates == 0);
}

static void send_burst(flit_pub *p, uint64_t from, uint64_t n, size_t len)
{
	unsigned char buf[1024];

	for (uint64_t i = from; i < from + n; i++) {
		tl_fill(buf, len, i);
		assert_int_equal(flit_pub_send(p, buf, len), 0);
	}
}

/* (a) 5000 x 100 B into a 64 KiB ring (~340 records a lap) before the
 * subscriber's first poll after joining: it was lapped many times. */
static void burst_before_first_poll_is_reported_as_loss_covering_every_seq(void **state)
{
	flit_ctx *ctx = ctx_new();
	struct evlog *l = evlog_new(100);

	sub_new(ctx, "ow.burst", l);
	flit_pub *p = pub_new(ctx, "ow.burst", OW_CFG);
	wait_bos(ctx, l);
	assert_int_equal(flit_pub_receivers(p), 1);
	send_burst(p, 0, 5000, 100);
	poll_quiet(ctx);

	struct tally t = check_log(l, 0, 0);
	print_message("burst: %llu delivered, %llu lost in %llu LOSS events\n",
		      (unsigned long long)t.data, (unsigned long long)t.lost,
		      (unsigned long long)t.losses);
	/* every seq of 0..4999 is accounted for, exactly once */
	assert_true(t.data + t.lost == 5000);
	assert_true(t.last == 4999);
	assert_true(t.losses >= 1);
	check_counters(ctx, &t);
}

/* The same burst once the subscriber has started delivering, three times. */
static void burst_after_delivery_is_reported_as_loss_covering_every_seq(void **state)
{
	flit_ctx *ctx = ctx_new();
	struct evlog *l = evlog_new(100);

	sub_new(ctx, "ow.burst2", l);
	flit_pub *p = pub_new(ctx, "ow.burst2", OW_CFG);
	wait_bos(ctx, l);
	send_burst(p, 0, 10, 100);
	poll_quiet(ctx);
	assert_int_equal(l->n, 10);
	for (int round = 0; round < 3; round++) {
		send_burst(p, 10 + 5000 * (uint64_t)round, 5000, 100);
		poll_quiet(ctx);
	}
	struct tally t = check_log(l, 0, 0);
	print_message("bursts: %llu delivered, %llu lost in %llu LOSS events\n",
		      (unsigned long long)t.data, (unsigned long long)t.lost,
		      (unsigned long long)t.losses);
	assert_true(t.data + t.lost == 15010);
	assert_true(t.last == 15009);
	assert_true(t.losses >= 3);
	check_counters(ctx, &t);
}

/* ---- (b) a writer thread blasting, a slow reader ---- */

struct blaster {
	const char *topic, *cfg;
	_Atomic int *first_seen; /* reader got message 0 */
	uint64_t ms;
	uint64_t sent;
	int rc, bp;
};

static void *blast(void *arg)
{
	struct blaster *b = arg;
	flit_ctx *ctx = tl_ctx(NULL);
	flit_pub *p = ctx ? pub_try(ctx, b->topic, b->cfg) : NULL;
	unsigned char buf[1024];
	uint64_t end, t0;

	b->rc = -1;
	if (!p)
		goto out;
	t0 = tl_now_ms();
	while (flit_pub_receivers(p) < 1 && tl_now_ms() < t0 + 5000)
		usleep(1000);
	/* one message the reader receives before the blast */
	tl_fill(buf, len_of(0), 0);
	if (flit_pub_send(p, buf, len_of(0)) || flit_pub_flush(p))
		goto out;
	b->sent = 1;
	while (!atomic_load(b->first_seen) && tl_now_ms() < t0 + 5000)
		usleep(100);
	end = tl_now_ms() + b->ms;
	while (tl_now_ms() < end) {
		for (int k = 0; k < 256; k++, b->sent++) {
			size_t len = len_of(b->sent);
			tl_fill(buf, len, b->sent);
			int rc = flit_pub_send(p, buf, len);
			if (rc == FLIT_BACK_PRESSURED)
				b->bp++;
			else if (rc)
				goto out;
		}
	}
	b->rc = 0;
out:
	flit_pub_close(p); /* flushes an open batch */
	flit_ctx_close(ctx);
	return NULL;
}

static void run_blast(const char *topic, const char *cfg)
{
	flit_ctx *ctx = ctx_new();
	struct evlog *l = evlog_new(0);
	_Atomic int first_seen = 0;
	struct blaster b = { .topic = topic, .cfg = cfg, .first_seen = &first_seen, .ms = 700 };
	pthread_t th;
	uint64_t end = tl_now_ms() + 15000;
	unsigned polls = 0;

	sub_new(ctx, topic, l);
	assert_int_equal(pthread_create(&th, NULL, blast, &b), 0);
	while (!atomic_load(&l->done) && tl_now_ms() < end) {
		flit_ctx_poll(ctx, 16);
		if (l->n)
			atomic_store(&first_seen, 1);
		if (++polls % 4 == 0)
			usleep(200);
	}
	pthread_join(th, NULL);
	assert_int_equal(b.rc, 0);
	assert_int_equal(b.bp, 0);
	assert_int_equal(l->eos, 1);

	struct tally t = check_log(l, 0, 0);
	print_message("%s: %llu sent, %llu delivered, %llu lost in %llu LOSS events\n", topic,
		      (unsigned long long)b.sent, (unsigned long long)t.data,
		      (unsigned long long)t.lost, (unsigned long long)t.losses);
	assert_true(t.data + t.lost == b.sent);
	assert_true(t.last == b.sent - 1);
	/* the reader really was lapped, and still got a fair share */
	assert_true(t.losses > 10);
	assert_true(t.data > 1000);
	check_counters(ctx, &t);
}

static void slow_reader_of_a_blasting_writer_gets_intact_messages_and_loss_for_every_gap(void **state)
{
	run_blast("ow.blast", OW_CFG);
}

static void same_with_batched_frames(void **state)
{
	run_blast("ow.blast.batch", OW_CFG "\nbatch = true\nbatch_max = 4K");
}

/* ---- (c) the writer never waits ---- */

static void overwrite_writer_is_never_back_pressured_by_a_stalled_reader(void **state)
{
	flit_ctx *pc = ctx_new(), *qc = ctx_new(), *sc = ctx_new();
	struct evlog *l = evlog_new(200), *lp = evlog_new(200);
	unsigned char buf[200] = { 0 };
	FLIT_OPTS(flit_counters, c);
	int rc = 0;

	sub_new(sc, "ow.stall", l);
	sub_new(sc, "pc.stall", lp);
	flit_pub *p = pub_new(pc, "ow.stall", OW_CFG);
	flit_pub *paced = pub_new(qc, "pc.stall", "shm.capacity = 64K");
	for (int i = 0; i < 2000 && !(l->bos && lp->bos); i++) {
		flit_ctx_poll(sc, 0);
		usleep(500);
	}
	assert_int_equal(l->bos, 1);
	assert_int_equal(lp->bos, 1);
	/* the subscriber's context never polls again, yet stays alive */

	/* control: the same reader holds a paced writer back */
	for (int i = 0; i < 100000 && (rc = flit_pub_send(paced, buf, sizeof(buf))) == 0; i++)
		;
	assert_int_equal(rc, FLIT_BACK_PRESSURED);

	/* ~80 laps of the 64 KiB ring */
	for (uint64_t i = 0; i < 20000; i++) {
		tl_fill(buf, sizeof(buf), i);
		rc = flit_pub_send(p, buf, sizeof(buf));
		if (rc)
			fail_msg("send %llu: %s", (unsigned long long)i, flit_strstatus(rc));
	}
	assert_int_equal(flit_pub_receivers(p), 1);
	assert_int_equal(flit_pub_send(paced, buf, sizeof(buf)), FLIT_BACK_PRESSURED);
	assert_int_equal(flit_ctx_counters(pc, &c), 0);
	assert_true(c.msgs_sent == 20000);
	assert_true(c.back_pressured == 0);
	assert_int_equal(flit_ctx_counters(qc, &c), 0);
	assert_true(c.back_pressured >= 2);
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, close_all)
	const struct CMUnitTest tests[] = {
		T(burst_before_first_poll_is_reported_as_loss_covering_every_seq),
		T(burst_after_delivery_is_reported_as_loss_covering_every_seq),
		T(slow_reader_of_a_blasting_writer_gets_intact_messages_and_loss_for_every_gap),
		T(same_with_batched_frames),
		T(overwrite_writer_is_never_back_pressured_by_a_stalled_reader),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
