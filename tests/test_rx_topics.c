// SPDX-License-Identifier: BSD-2-Clause
/*
 * The core's receive path for a session of several topics (userspace/ctx.c,
 * docs/PROTOCOL.md "Sequence numbers"), fed crafted frames: no transport.
 *
 *   - each topic's messages carry its own number (FLIT_FF_TSEQ) and that is
 *     what a subscriber sees as seq, from 0, whatever the session's;
 *   - a jump in a topic's numbers is that topic's LOSS, in its numbers,
 *     told to its subscribers alone, before the message that showed it; the
 *     session's gap is counted but not told per session;
 *   - a receiver that had the session from its first message knows every
 *     topic from 0 (the loss of a topic's first messages is told); one that
 *     joined later learns a topic's number from its next message (no LOSS),
 *     unless an INFO page told it each topic's number where it started
 *     (FLIT_INFOF_NEXT: then the loss of the first ones is told);
 *   - frames of the time the session had one topic (no flag) number that
 *     topic with the session's numbers, and the flag's first frame goes on
 *     from there without a false LOSS;
 *   - a session of one topic keeps telling loss per session;
 *   - BOS of a session of several topics says the topic's number (0 for
 *     one whose messages have not begun), not the session's;
 *   - a topic that ended with more messages than came (INFO ENDED with its
 *     final number) has the rest told lost before its EOS, in its numbers;
 *     none of them if it came whole; nothing where its numbers are not
 *     known;
 *   - messages dropped before the core (the XDP program's topic filter,
 *     flit_rx_session_skip) are counted filtered, not lost, and a topic
 *     subscribed after such a drop learns its number from its next
 *     message (the drop may have held some of its messages).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "testlib.h"
#include "codec.h"
#include "core.h"

#define SID 0x5e55100du

struct ev { int kind; char topic[16]; uint64_t seq, lost; };

struct rec {
	struct ev e[64];
	unsigned n;
};

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct rec *r = arg;
	(void)sub;
	if (r->n < 64) {
		struct ev *e = &r->e[r->n++];
		e->kind = m->kind;
		snprintf(e->topic, sizeof(e->topic), "%s", m->topic);
		e->seq = m->seq;
		e->lost = m->lost;
	}
}

static flit_ctx *ctx;
static struct rec ra, rb;      /* subscribers of t.a and t.b */
static flit_sub *sa, *sb;

static int setup(void **state)
{
	(void)state;
	memset(&ra, 0, sizeof(ra));
	memset(&rb, 0, sizeof(rb));
	ctx = tl_ctx(NULL);
	if (!ctx)
		return -1;
	sa = tl_sub(ctx, "t.a", on_msg, &ra);
	sb = tl_sub(ctx, "t.b", on_msg, &rb);
	return sa && sb ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	flit_sub_close(sa);
	flit_sub_close(sb);
	flit_ctx_close(ctx);
	return 0;
}

/* A session started at `start`, its topics "t.a" (index 0), "t.b" (1) and
 * "t.c" (2, nobody's). */
static struct flit_rx_session *session(uint64_t start)
{
	struct flit_rx_session *rs = flit_rx_session_new(ctx, SID, "test");
	assert_non_null(rs);
	flit_rx_session_start(rs, start);
	assert_int_equal(flit_rx_session_topic(rs, 0, "t.a"), 1);
	assert_int_equal(flit_rx_session_topic(rs, 1, "t.b"), 1);
	assert_int_equal(flit_rx_session_topic(rs, 2, "t.c"), 0);
	return rs;
}

/* Feed one frame from session number seq: n messages of topics[i] with
 * topic numbers tseq[i] (tseq NULL: a frame without FLIT_FF_TSEQ). */
static int feed_as(uint16_t fl, struct flit_rx_session *rs, uint64_t seq, unsigned n,
		   const uint32_t *topics, const uint64_t *tseq)
{
	uint8_t f[512];
	const void *pl[8];
	uint32_t lens[8];

	for (unsigned i = 0; i < n; i++) {
		pl[i] = "payload!";
		lens[i] = 8;
	}
	size_t len = tseq ?
		flit_frame_encode_tseq(f, sizeof(f), fl, SID, seq, n, topics, pl, lens,
				       NULL, tseq) :
		flit_frame_encode(f, sizeof(f), 0, SID, seq, n, topics, pl, lens, NULL);
	assert_true(len > 0);
	return flit_rx_frame(ctx, rs, f, len);
}

static int feed(struct flit_rx_session *rs, uint64_t seq, unsigned n, const uint32_t *topics,
		const uint64_t *tseq)
{
	return feed_as(FLIT_FF_TSEQ, rs, seq, n, topics, tseq);
}

static void expect(const struct rec *r, unsigned i, int kind, uint64_t seq, uint64_t lost)
{
	if (i >= r->n)
		fail_msg("event %u of %u", i, r->n);
	if (r->e[i].kind != kind || r->e[i].seq != seq || r->e[i].lost != lost)
		fail_msg("event %u: kind %d seq %llu lost %llu, want kind %d seq %llu lost %llu", i,
			 r->e[i].kind, (unsigned long long)r->e[i].seq,
			 (unsigned long long)r->e[i].lost, kind, (unsigned long long)seq,
			 (unsigned long long)lost);
}

static void each_topic_is_numbered_on_its_own(void **state)
{
	(void)state;
	struct flit_rx_session *rs = session(0);
	expect(&ra, 0, FLIT_MSG_BOS, 0, 0);
	expect(&rb, 0, FLIT_MSG_BOS, 0, 0);
	const uint32_t t1[4] = { 0, 1, 2, 0 };
	const uint64_t q1[4] = { 0, 0, 0, 1 };
	assert_int_equal(feed(rs, 0, 4, t1, q1), 3);     /* t.c's is nobody's */
	const uint32_t t2[2] = { 1, 0 };
	const uint64_t q2[2] = { 1, 2 };
	assert_int_equal(feed(rs, 4, 2, t2, q2), 2);
	assert_int_equal(ra.n, 4);
	expect(&ra, 1, FLIT_MSG_DATA, 0, 0);
	expect(&ra, 2, FLIT_MSG_DATA, 1, 0);
	expect(&ra, 3, FLIT_MSG_DATA, 2, 0);
	assert_int_equal(rb.n, 3);
	expect(&rb, 1, FLIT_MSG_DATA, 0, 0);
	expect(&rb, 2, FLIT_MSG_DATA, 1, 0);
	flit_rx_session_end(rs, 0);
	expect(&ra, 4, FLIT_MSG_EOS, 3, 0);              /* its next number */
	expect(&rb, 3, FLIT_MSG_EOS, 2, 0);
}

static void a_topic_s_jump_is_its_own_loss_in_its_numbers(void **state)
{
	(void)state;
	struct flit_rx_session *rs = session(0);
	const uint32_t t1[2] = { 0, 1 };
	const uint64_t q1[2] = { 0, 0 };
	feed(rs, 0, 2, t1, q1);
	/* session messages 2 .. 6 lost on the wire, and never repaired: three
	 * of t.a, two of t.b; the session's gap is counted, not told */
	struct flit_counters c0 = { .sz = sizeof(c0) }, c1 = { .sz = sizeof(c1) };
	flit_ctx_counters(ctx, &c0);
	assert_int_equal(flit_rx_session_loss(rs, 2, 5), 0);
	rs->next_seq = 7;       /* as a transport's reliability layer moves it */
	flit_ctx_counters(ctx, &c1);
	assert_int_equal(c1.msgs_lost - c0.msgs_lost, 5);
	assert_int_equal(ra.n, 2);
	assert_int_equal(rb.n, 2);
	const uint32_t t2[2] = { 1, 0 };
	const uint64_t q2[2] = { 3, 4 };
	/* 2 messages, and a LOSS each: before the message that showed it */
	assert_int_equal(feed(rs, 7, 2, t2, q2), 4);
	expect(&rb, 2, FLIT_MSG_LOSS, 1, 2);
	expect(&rb, 3, FLIT_MSG_DATA, 3, 0);
	expect(&ra, 2, FLIT_MSG_LOSS, 1, 3);
	expect(&ra, 3, FLIT_MSG_DATA, 4, 0);
	flit_rx_session_end(rs, 0);
}

/* Short headers (FLIT_FF_SHORT) number a topic as the long form does: a
 * jump in them is the topic's loss, and the sender's switch to the long
 * form at 2^32 goes on without a false LOSS (no number is cut to 32 bits
 * on the way). */
static void short_and_long_headers_number_a_topic_alike(void **state)
{
	(void)state;
	const uint16_t sh = FLIT_FF_TSEQ | FLIT_FF_SHORT;
	struct flit_rx_session *rs = session(0);
	const uint32_t t1[3] = { 0, 1, 0 };
	const uint64_t q1[3] = { 0, 0, 1 };
	assert_int_equal(feed_as(sh, rs, 0, 3, t1, q1), 3);
	/* session messages 3 .. 4 lost: two of t.a */
	assert_int_equal(flit_rx_session_loss(rs, 3, 2), 0);
	rs->next_seq = 5;
	const uint32_t t2[2] = { 0, 1 };
	const uint64_t q2[2] = { 4, 0xffffffffull };
	assert_int_equal(feed_as(sh, rs, 5, 2, t2, q2), 4);
	expect(&ra, 3, FLIT_MSG_LOSS, 2, 2);
	expect(&ra, 4, FLIT_MSG_DATA, 4, 0);
	expect(&rb, 2, FLIT_MSG_LOSS, 1, 0xffffffffull - 1);
	expect(&rb, 3, FLIT_MSG_DATA, 0xffffffffull, 0);
	/* t.b passes 2^32: its session's frames go on in the long form */
	const uint32_t t3[2] = { 1, 0 };
	const uint64_t q3[2] = { 0x100000000ull, 5 };
	assert_int_equal(feed_as(FLIT_FF_TSEQ, rs, 7, 2, t3, q3), 2);
	expect(&rb, 4, FLIT_MSG_DATA, 0x100000000ull, 0);
	expect(&ra, 5, FLIT_MSG_DATA, 5, 0);
	assert_int_equal(ra.n, 6);
	assert_int_equal(rb.n, 5);
	flit_rx_session_end(rs, 0);
	expect(&rb, 5, FLIT_MSG_EOS, 0x100000001ull, 0);
}

static void from_the_session_s_start_a_topic_s_first_messages_count(void **state)
{
	(void)state;
	struct flit_rx_session *rs = session(0);
	/* t.b's numbers 0 and 1 never came (and nothing else told it) */
	const uint32_t t1[1] = { 1 };
	const uint64_t q1[1] = { 2 };
	assert_int_equal(feed(rs, 0, 1, t1, q1), 2);
	expect(&rb, 1, FLIT_MSG_LOSS, 0, 2);
	expect(&rb, 2, FLIT_MSG_DATA, 2, 0);
	flit_rx_session_end(rs, 0);
}

static void joined_later_a_topic_s_number_is_learnt_without_loss(void **state)
{
	(void)state;
	struct flit_rx_session *rs = session(1000);
	expect(&rb, 0, FLIT_MSG_BOS, 0, 0);             /* not yet known: 0 */
	const uint32_t t1[2] = { 1, 0 };
	const uint64_t q1[2] = { 500, 700 };
	assert_int_equal(feed(rs, 1000, 2, t1, q1), 2);
	expect(&rb, 1, FLIT_MSG_DATA, 500, 0);
	expect(&ra, 1, FLIT_MSG_DATA, 700, 0);
	/* a subscriber new to a running topic learns it the same way */
	struct rec rc = { 0 };
	flit_sub *sc = tl_sub(ctx, "t.c", on_msg, &rc);
	assert_non_null(sc);
	const uint32_t t2[1] = { 2 };
	const uint64_t q2[1] = { 42 };
	assert_int_equal(feed(rs, 1002, 1, t2, q2), 1);
	expect(&rc, 0, FLIT_MSG_BOS, 0, 0);
	expect(&rc, 1, FLIT_MSG_DATA, 42, 0);
	flit_rx_session_end(rs, 0);
	flit_sub_close(sc);
}

/* Joined later, but told where each topic's numbers are (an INFO page
 * with FLIT_INFOF_NEXT at the session's start): the loss of a topic's
 * first messages after the join is told, in its numbers; a topic that has
 * had a message keeps its own count. */
static void joined_later_with_the_numbers_a_topic_s_first_loss_is_told(void **state)
{
	(void)state;
	struct flit_rx_session *rs = session(1000);
	flit_rx_session_topic_from(rs, 0, 700);
	flit_rx_session_topic_from(rs, 1, 500);
	const uint32_t t1[2] = { 1, 0 };
	const uint64_t q1[2] = { 500, 703 };
	assert_int_equal(feed(rs, 1000, 2, t1, q1), 3);
	expect(&rb, 1, FLIT_MSG_DATA, 500, 0);          /* as told: no loss */
	expect(&ra, 1, FLIT_MSG_LOSS, 700, 3);          /* 700 .. 702 never came */
	expect(&ra, 2, FLIT_MSG_DATA, 703, 0);
	flit_rx_session_topic_from(rs, 1, 9000);         /* seen: its own count stays */
	const uint32_t t2[1] = { 1 };
	const uint64_t q2[1] = { 501 };
	assert_int_equal(feed(rs, 1002, 1, t2, q2), 1);
	expect(&rb, 2, FLIT_MSG_DATA, 501, 0);
	flit_rx_session_end(rs, 0);
}

static void frames_of_the_one_topic_time_go_on_into_topic_numbers(void **state)
{
	(void)state;
	struct flit_rx_session *rs = flit_rx_session_new(ctx, SID, "test");
	assert_non_null(rs);
	flit_rx_session_start(rs, 0);
	assert_int_equal(flit_rx_session_topic(rs, 0, "t.a"), 1);
	const uint32_t t1[3] = { 0, 0, 0 };
	assert_int_equal(feed(rs, 0, 3, t1, NULL), 3);   /* one topic: no flag */
	/* a one-topic session's loss is told per session */
	assert_int_equal(flit_rx_session_loss(rs, 3, 2), 1);
	rs->next_seq = 5;       /* as a transport's reliability layer moves it */
	expect(&ra, 4, FLIT_MSG_LOSS, 3, 2);
	const uint32_t t2[1] = { 0 };
	assert_int_equal(feed(rs, 5, 1, t2, NULL), 1);
	/* t.b joins the session: topic numbers from here; t.a's go on */
	assert_int_equal(flit_rx_session_topic(rs, 1, "t.b"), 1);
	const uint32_t t3[2] = { 1, 0 };
	const uint64_t q3[2] = { 0, 6 };
	int got = feed(rs, 6, 2, t3, q3);
	for (unsigned i = 0; got != 2 && i < ra.n; i++)
		printf("# t.a event %u: kind %d seq %llu lost %llu\n", i, ra.e[i].kind,
		       (unsigned long long)ra.e[i].seq, (unsigned long long)ra.e[i].lost);
	assert_int_equal(got, 2);
	expect(&ra, 6, FLIT_MSG_DATA, 6, 0);
	expect(&rb, 1, FLIT_MSG_DATA, 0, 0);
	for (unsigned i = 0; i < ra.n; i++)
		assert_true(ra.e[i].kind != FLIT_MSG_LOSS || i == 4);
	flit_rx_session_end(rs, 0);
}

static void skipped_messages_are_filtered_not_lost_and_hide_no_topic_s_start(void **state)
{
	(void)state;
	struct flit_rx_session *rs = session(0);
	const uint32_t t1[1] = { 0 };
	const uint64_t q1[1] = { 0 };
	assert_int_equal(feed(rs, 0, 1, t1, q1), 1);
	struct flit_counters c0 = { .sz = sizeof(c0) }, c1 = { .sz = sizeof(c1) };
	flit_ctx_counters(ctx, &c0);
	/* session messages 1 .. 5 dropped in XDP (t.c's, say, nobody's) */
	assert_int_equal(flit_rx_session_skip(rs, 1, 5), 0);
	flit_ctx_counters(ctx, &c1);
	assert_int_equal(c1.msgs_filtered - c0.msgs_filtered, 5);
	assert_int_equal(c1.msgs_lost - c0.msgs_lost, 0);
	assert_int_equal(c1.loss_events - c0.loss_events, 0);
	/* the next frame follows on: no session gap */
	const uint32_t t2[1] = { 0 };
	const uint64_t q2[1] = { 1 };
	assert_int_equal(feed(rs, 6, 1, t2, q2), 1);
	flit_ctx_counters(ctx, &c0);
	assert_int_equal(c0.msgs_lost - c1.msgs_lost, 0);
	expect(&ra, 2, FLIT_MSG_DATA, 1, 0);
	/* t.c gets a subscriber now: its messages may have been among those
	 * dropped, so it starts from its next, with no LOSS */
	struct rec rc = { 0 };
	flit_sub *sc = tl_sub(ctx, "t.c", on_msg, &rc);
	assert_non_null(sc);
	expect(&rc, 0, FLIT_MSG_BOS, 0, 0);
	const uint32_t t3[1] = { 2 };
	const uint64_t q3[1] = { 5 };
	assert_int_equal(feed(rs, 7, 1, t3, q3), 1);
	assert_int_equal(rc.n, 2);
	expect(&rc, 1, FLIT_MSG_DATA, 5, 0);
	flit_rx_session_end(rs, 0);
	flit_sub_close(sc);
}

static void an_ended_topic_s_last_lost_messages_are_told_before_its_eos(void **state)
{
	(void)state;
	struct flit_rx_session *rs = session(0);
	const uint32_t t1[2] = { 0, 1 };
	const uint64_t q1[2] = { 0, 0 };
	assert_int_equal(feed(rs, 0, 2, t1, q1), 2);
	/* t.a sent 5 (numbers 0 .. 4): 1 .. 4 never came */
	assert_int_equal(flit_rx_session_topic_end(rs, 0, 0, 5), 2);
	expect(&ra, 2, FLIT_MSG_LOSS, 1, 4);
	expect(&ra, 3, FLIT_MSG_EOS, 5, 0);
	/* t.b came whole: EOS alone */
	assert_int_equal(flit_rx_session_topic_end(rs, 1, 0, 1), 1);
	expect(&rb, 2, FLIT_MSG_EOS, 1, 0);
	assert_int_equal(rb.n, 3);
	flit_rx_session_end(rs, 0);
}

static void an_ended_topic_whose_numbers_are_not_known_ends_without_loss(void **state)
{
	(void)state;
	/* joined later: t.a's numbers never seen */
	struct flit_rx_session *rs = session(1000);
	assert_int_equal(flit_rx_session_topic_end(rs, 0, 0, 700), 1);
	expect(&ra, 1, FLIT_MSG_EOS, 0, 0);
	/* from the session's first message, none of t.b's came: all lost */
	flit_rx_session_end(rs, 0);
	rs = session(0);
	unsigned n0 = rb.n;
	assert_int_equal(flit_rx_session_topic_end(rs, 1, 0, 3), 2);
	expect(&rb, n0, FLIT_MSG_LOSS, 0, 3);
	expect(&rb, n0 + 1, FLIT_MSG_EOS, 3, 0);
	/* final not known (an older source): EOS alone */
	unsigned a0 = ra.n;
	assert_int_equal(flit_rx_session_topic_end(rs, 0, 0, UINT64_MAX), 1);
	expect(&ra, a0, FLIT_MSG_EOS, 0, 0);
	flit_rx_session_end(rs, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(each_topic_is_numbered_on_its_own, setup, teardown),
		cmocka_unit_test_setup_teardown(a_topic_s_jump_is_its_own_loss_in_its_numbers, setup,
						teardown),
		cmocka_unit_test_setup_teardown(short_and_long_headers_number_a_topic_alike, setup,
						teardown),
		cmocka_unit_test_setup_teardown(from_the_session_s_start_a_topic_s_first_messages_count,
						setup, teardown),
		cmocka_unit_test_setup_teardown(joined_later_a_topic_s_number_is_learnt_without_loss,
						setup, teardown),
		cmocka_unit_test_setup_teardown(joined_later_with_the_numbers_a_topic_s_first_loss_is_told,
						setup, teardown),
		cmocka_unit_test_setup_teardown(frames_of_the_one_topic_time_go_on_into_topic_numbers,
						setup, teardown),
		cmocka_unit_test_setup_teardown(skipped_messages_are_filtered_not_lost_and_hide_no_topic_s_start,
						setup, teardown),
		cmocka_unit_test_setup_teardown(an_ended_topic_s_last_lost_messages_are_told_before_its_eos,
						setup, teardown),
		cmocka_unit_test_setup_teardown(an_ended_topic_whose_numbers_are_not_known_ends_without_loss,
						setup, teardown),
	};
	return cmocka_run_group_tests_name("rx_topics", tests, NULL, NULL);
}
