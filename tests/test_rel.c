// SPDX-License-Identifier: BSD-2-Clause
/*
 * Reliability engine tests (userspace/rel.h): token bucket, source-side
 * retention / NAK answers / retransmission pacing / heartbeat schedule, the
 * receiver's reorder buffer, gap list and NAK timers, and a randomized
 * end-to-end property test over a lossy, duplicating, reordering channel
 * driven by a simulated clock.
 *
 * Every time is explicit: nothing here sleeps or reads a clock.  Frames are
 * real DATA frames (codec.h) whose messages carry msgval(seq) in their first
 * 8 payload bytes, so a frame delivered with the wrong sequence number or
 * torn bytes is caught by the callbacks.  Receiver callbacks record events
 * as a string ("D4+2" = frame of 2 messages from seq 4 delivered, "L1+3" =
 * messages 1..3 reported lost), compared whole so order is checked too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "ctl.h"
#include "rel.h"

#define SESSION 0x5e55u
#define KiB     1024u
#define GAPS_MAX 4096u  /* rel.c: most gaps a receiver tracks */

static uint64_t msgval(uint64_t seq)
{
	return seq * 0x9e3779b97f4a7c15ull ^ 0x0123456789abcdefull;
}

/* A DATA frame of `count` messages from seq, each with `paylen` (>= 8)
 * payload bytes; returns its length.  buf must be 8-aligned and large. */
static size_t mkframe_sz(void *buf, uint64_t seq, unsigned count, uint32_t paylen)
{
	uint8_t *f = buf;
	uint32_t len = FLIT_FRAME_HDR_LEN;

	flit_frame_begin(f, FLIT_FT_DATA, 0, SESSION, seq);
	for (unsigned i = 0; i < count; i++) {
		uint8_t *pl = flit_frame_put_hdr(f + len, 7, paylen, false, 0);
		memset(pl, 0xa5, paylen);
		flit_st64(pl, msgval(seq + i));
		len = flit_frame_end_msg(f, pl, paylen);
	}
	return len;
}

static size_t mkframe(void *buf, uint64_t seq, unsigned count)
{
	return mkframe_sz(buf, seq, count, 8);
}

/* Frame length of one message with `paylen` bytes. */
static uint32_t frame_len1(uint32_t paylen)
{
	return FLIT_FRAME_HDR_LEN + (uint32_t)flit_msg_wire_len(paylen, false);
}

/* Check a frame and its payloads; *h filled. */
static bool frame_ok(const void *frame, size_t len, struct flit_frame_hdr *h)
{
	if (flit_frame_validate(frame, len, h) != FLIT_FE_OK || h->type != FLIT_FT_DATA)
		return false;
	struct flit_frame_iter it;
	struct flit_wmsg m;
	flit_frame_iter_init(&it, frame, h);
	while (flit_frame_iter_next(&it, &m))
		if (m.len < 8 || flit_ld64(m.data) != msgval(m.seq))
			return false;
	return true;
}

/* ==== token bucket ======================================================== */

static void rl_unlimited_always_takes_and_never_waits(void **state)
{
	(void)state;
	struct flit_ratelimit rl;
	flit_rl_init(&rl, 0, 100, 0);
	for (int i = 0; i < 10; i++)
		assert_true(flit_rl_take(&rl, 1000000000ull, 0));
	assert_int_equal(flit_rl_wait(&rl, UINT64_MAX, 0), 0);
}

static void rl_starts_full_and_refills_at_rate(void **state)
{
	(void)state;
	struct flit_ratelimit rl;
	flit_rl_init(&rl, 1000, 100, 5000);  /* 1000 units/s: 1 ms per unit */
	assert_true(flit_rl_take(&rl, 100, 5000));
	assert_false(flit_rl_take(&rl, 1, 5000));
	assert_int_equal(flit_rl_wait(&rl, 1, 5000), 1000000);
	assert_false(flit_rl_take(&rl, 1, 5000 + 999999));
	assert_true(flit_rl_take(&rl, 1, 5000 + 1000000));
	assert_false(flit_rl_take(&rl, 1, 5000 + 1000000));
	/* 10 ms later: 10 units */
	assert_true(flit_rl_take(&rl, 10, 5000 + 11000000));
	assert_false(flit_rl_take(&rl, 1, 5000 + 11000000));
}

static void rl_burst_caps_the_bucket(void **state)
{
	(void)state;
	struct flit_ratelimit rl;
	flit_rl_init(&rl, 1000, 100, 0);
	assert_true(flit_rl_take(&rl, 100, 0));
	/* an hour idle refills no more than the burst */
	uint64_t t = 3600ull * 1000000000ull;
	assert_int_equal(flit_rl_wait(&rl, 100, t), 0);
	assert_true(flit_rl_take(&rl, 100, t));
	assert_false(flit_rl_take(&rl, 1, t));
}

static void rl_wait_is_time_until_the_units_are_there(void **state)
{
	(void)state;
	struct flit_ratelimit rl;
	flit_rl_init(&rl, 3, 10, 0);  /* 3 units/s */
	assert_true(flit_rl_take(&rl, 10, 0));
	assert_int_equal(flit_rl_wait(&rl, 1, 0), 333333334);  /* rounded up */
	assert_int_equal(flit_rl_wait(&rl, 2, 0), 666666667);
	assert_int_equal(flit_rl_wait(&rl, 3, 0), 1000000000);
	assert_int_equal(flit_rl_wait(&rl, 1, 333333334), 0);
	assert_false(flit_rl_take(&rl, 1, 333333333));
	assert_true(flit_rl_take(&rl, 1, 333333334));
	/* wait is a pure query */
	assert_int_equal(flit_rl_wait(&rl, 1, 333333334), 333333333);
}

static void rl_take_larger_than_burst_needs_a_full_bucket(void **state)
{
	(void)state;
	struct flit_ratelimit rl;
	flit_rl_init(&rl, 1000, 100, 0);
	assert_true(flit_rl_take(&rl, 150, 0));       /* full: goes, empties it */
	assert_false(flit_rl_take(&rl, 150, 50000000));
	assert_int_equal(flit_rl_wait(&rl, 150, 50000000), 50000000); /* until full */
	assert_true(flit_rl_take(&rl, 150, 100000000));
	assert_false(flit_rl_take(&rl, 1, 100000000));
}

/* ==== source side ======================================================== */

static const struct flit_rel_tx_cfg TXCFG = {
	.retain_bytes = 64 * KiB,
	.retain_ns = 1000000000,
	.retx_rate = 0,
	.hb_min_ns = 1000,
	.hb_max_ns = 8000,
};

static struct flit_rel_tx *tx_mk(const struct flit_rel_tx_cfg *cfg, uint64_t now)
{
	struct flit_rel_tx *tx = NULL;
	assert_int_equal(flit_rel_tx_new(cfg, now, &tx), 0);
	assert_non_null(tx);
	return tx;
}

/* Send frames of `count` messages and `paylen` bytes each, n of them. */
static void tx_send(struct flit_rel_tx *tx, unsigned n, unsigned count,
		    uint32_t paylen, uint64_t now)
{
	static uint64_t buf[(64 * KiB + 64) / 8];
	for (unsigned i = 0; i < n; i++) {
		uint64_t seq = flit_rel_tx_next(tx);
		size_t len = mkframe_sz(buf, seq, count, paylen);
		assert_int_equal(flit_rel_tx_sent(tx, buf, len, seq, count, now), 0);
	}
}

/* The next retransmission's seq, or UINT64_MAX if none now. */
static uint64_t tx_retx_seq(struct flit_rel_tx *tx, uint64_t now, uint64_t *wait)
{
	size_t len = 0;
	uint64_t w = 12345;
	const void *f = flit_rel_tx_retx_next(tx, now, &len, &w);
	if (wait)
		*wait = w;
	if (!f)
		return UINT64_MAX;
	assert_int_equal(w, 0);
	struct flit_frame_hdr h;
	assert_true(frame_ok(f, len, &h));
	assert_true(h.flags & FLIT_FF_RETX);
	return h.seq;
}

#define R(f, k, s) ((struct flit_seq_range){ .first = (f), .n = (k), .status = (s) })

static void assert_range(struct flit_seq_range got, struct flit_seq_range want)
{
	if (got.first != want.first || got.n != want.n || got.status != want.status)
		fail_msg("range {%llu +%u st %u}, expected {%llu +%u st %u}",
			 (unsigned long long)got.first, got.n, got.status,
			 (unsigned long long)want.first, want.n, want.status);
}

static void tx_new_rejects_bad_config(void **state)
{
	(void)state;
	struct flit_rel_tx *tx = (void *)1;
	struct flit_rel_tx_cfg c = TXCFG;
	c.retain_bytes = 64 * KiB - 1;
	assert_int_equal(flit_rel_tx_new(&c, 0, &tx), -EINVAL);
	assert_null(tx);
	c = TXCFG;
	c.retain_ns = 0;
	assert_int_equal(flit_rel_tx_new(&c, 0, &tx), -EINVAL);
	c = TXCFG;
	c.hb_min_ns = 0;
	assert_int_equal(flit_rel_tx_new(&c, 0, &tx), -EINVAL);
	c = TXCFG;
	c.hb_max_ns = c.hb_min_ns - 1;
	assert_int_equal(flit_rel_tx_new(&c, 0, &tx), -EINVAL);
	assert_int_equal(flit_rel_tx_new(NULL, 0, &tx), -EINVAL);
	flit_rel_tx_free(NULL);
}

static void tx_first_frame_sets_the_start_then_frames_must_follow(void **state)
{
	(void)state;
	uint64_t buf[32];
	struct flit_rel_tx *tx = tx_mk(&TXCFG, 0);
	assert_int_equal(flit_rel_tx_next(tx), 0);
	assert_int_equal(flit_rel_tx_trail(tx, 0), 0);

	size_t len = mkframe(buf, 100, 3);
	assert_int_equal(flit_rel_tx_sent(tx, buf, len, 100, 3, 0), 0);
	assert_int_equal(flit_rel_tx_next(tx), 103);
	assert_int_equal(flit_rel_tx_trail(tx, 0), 100);

	len = mkframe(buf, 104, 1);  /* skips 103 */
	assert_int_equal(flit_rel_tx_sent(tx, buf, len, 104, 1, 0), -EINVAL);
	len = mkframe(buf, 102, 1);  /* overlaps */
	assert_int_equal(flit_rel_tx_sent(tx, buf, len, 102, 1, 0), -EINVAL);
	assert_int_equal(flit_rel_tx_sent(tx, buf, len, 103, 0, 0), -EINVAL);
	assert_int_equal(flit_rel_tx_sent(tx, buf, len, UINT64_MAX, 2, 0), -EINVAL);
	assert_int_equal(flit_rel_tx_next(tx), 103);
	flit_rel_tx_free(tx);
}

static void tx_start_sets_the_first_seq(void **state)
{
	(void)state;
	uint64_t buf[32];
	struct flit_rel_tx *tx = tx_mk(&TXCFG, 0);
	flit_rel_tx_start(tx, 500);
	assert_int_equal(flit_rel_tx_next(tx), 500);
	assert_int_equal(flit_rel_tx_trail(tx, 0), 500);
	size_t len = mkframe(buf, 501, 1);
	assert_int_equal(flit_rel_tx_sent(tx, buf, len, 501, 1, 0), -EINVAL);
	len = mkframe(buf, 500, 2);
	assert_int_equal(flit_rel_tx_sent(tx, buf, len, 500, 2, 0), 0);
	flit_rel_tx_start(tx, 7);  /* too late: ignored */
	assert_int_equal(flit_rel_tx_next(tx), 502);

	/* before any frame everything NAKed is FUTURE or GONE around start */
	struct flit_rel_tx *t2 = tx_mk(&TXCFG, 0);
	flit_rel_tx_start(t2, 10);
	struct flit_seq_range ncf[4], nak[] = { R(5, 10, 0) };
	assert_int_equal(flit_rel_tx_nak(t2, nak, 1, 0, ncf, 4), 2);
	assert_range(ncf[0], R(5, 5, FLIT_NCF_GONE));
	assert_range(ncf[1], R(10, 5, FLIT_NCF_FUTURE));
	flit_rel_tx_free(t2);
	flit_rel_tx_free(tx);
}

/* 16 KiB frames: four fit the 64 KiB retention exactly. */
#define BIG_PAY (16 * KiB - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN)

static void tx_evicts_oldest_frames_by_size(void **state)
{
	(void)state;
	assert_int_equal(frame_len1(BIG_PAY), 16 * KiB);
	struct flit_rel_tx *tx = tx_mk(&TXCFG, 0);
	tx_send(tx, 4, 1, BIG_PAY, 0);
	struct flit_rel_tx_stats st;
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.evicted_frames, 0);
	assert_int_equal(flit_rel_tx_trail(tx, 0), 0);

	tx_send(tx, 1, 1, BIG_PAY, 0);
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.evicted_frames, 1);
	assert_int_equal(flit_rel_tx_trail(tx, 0), 1);
	assert_int_equal(flit_rel_tx_next(tx), 5);

	/* a small frame fits beside four big ones? 64K + small > 64K: no */
	tx_send(tx, 1, 1, 8, 0);
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.evicted_frames, 2);
	assert_int_equal(flit_rel_tx_trail(tx, 0), 2);

	struct flit_seq_range ncf[4], nak[] = { R(1, 1, 0), R(2, 1, 0) };
	assert_int_equal(flit_rel_tx_nak(tx, nak, 2, 0, ncf, 4), 2);
	assert_range(ncf[0], R(1, 1, FLIT_NCF_GONE));
	assert_range(ncf[1], R(2, 1, FLIT_NCF_RETX));
	flit_rel_tx_free(tx);
}

static void tx_evicts_frames_older_than_retain_ns(void **state)
{
	(void)state;
	struct flit_rel_tx_cfg c = TXCFG;
	c.retain_ns = 1000;
	struct flit_rel_tx *tx = tx_mk(&c, 0);
	tx_send(tx, 1, 2, 8, 0);     /* [0, 2) at 0 */
	tx_send(tx, 1, 3, 8, 500);   /* [2, 5) at 500 */
	assert_int_equal(flit_rel_tx_trail(tx, 1000), 0);  /* age == retain_ns: kept */
	assert_int_equal(flit_rel_tx_trail(tx, 1001), 2);
	assert_int_equal(flit_rel_tx_trail(tx, 1500), 2);
	assert_int_equal(flit_rel_tx_trail(tx, 1501), 5);  /* == next */
	assert_int_equal(flit_rel_tx_next(tx), 5);
	struct flit_rel_tx_stats st;
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.evicted_frames, 2);

	/* a NAK is answered against the trail at its own time */
	tx_send(tx, 1, 1, 8, 2000);  /* [5, 6) */
	struct flit_seq_range ncf[4], nak[] = { R(4, 2, 0) };
	assert_int_equal(flit_rel_tx_nak(tx, nak, 1, 2500, ncf, 4), 2);
	assert_range(ncf[0], R(4, 1, FLIT_NCF_GONE));
	assert_range(ncf[1], R(5, 1, FLIT_NCF_RETX));
	assert_int_equal(flit_rel_tx_nak(tx, nak, 1, 3001, ncf, 4), 1);
	assert_range(ncf[0], R(4, 2, FLIT_NCF_GONE));
	flit_rel_tx_free(tx);
}

static void tx_frame_larger_than_retention_is_not_retained(void **state)
{
	(void)state;
	struct flit_rel_tx *tx = tx_mk(&TXCFG, 0);
	tx_send(tx, 2, 1, 8, 0);                    /* [0, 2) retained */
	size_t big = 64 * KiB + 8;
	uint8_t *f = aligned_alloc(8, big + 64);
	assert_non_null(f);
	size_t len = mkframe_sz(f, 2, 1, (uint32_t)(big - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN));
	assert_true(len > TXCFG.retain_bytes);
	assert_int_equal(flit_rel_tx_sent(tx, f, len, 2, 1, 0), 0);
	free(f);
	struct flit_rel_tx_stats st;
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.evicted_frames, 3);     /* it and everything older */
	assert_int_equal(flit_rel_tx_next(tx), 3);
	assert_int_equal(flit_rel_tx_trail(tx, 0), 3);
	tx_send(tx, 1, 1, 8, 0);
	assert_int_equal(flit_rel_tx_trail(tx, 0), 3);
	assert_int_equal(flit_rel_tx_next(tx), 4);
	flit_rel_tx_free(tx);
}

/* Frames of 2 messages, 16 KiB each: after five, [2, 10) is retained. */
static struct flit_rel_tx *tx_with_trail_2_next_10(const struct flit_rel_tx_cfg *c)
{
	struct flit_rel_tx *tx = tx_mk(c, 0);
	tx_send(tx, 5, 2, 8168, 0);  /* 16376 bytes a frame: four fit */
	assert_int_equal(flit_rel_tx_trail(tx, 0), 2);
	assert_int_equal(flit_rel_tx_next(tx), 10);
	return tx;
}

static void tx_nak_splits_ranges_into_gone_retx_future(void **state)
{
	(void)state;
	struct flit_rel_tx *tx = tx_with_trail_2_next_10(&TXCFG);
	struct flit_seq_range ncf[16];
	const struct flit_seq_range nak[] = {
		R(0, 1, 0),    /* below the trail */
		R(1, 3, 0),    /* straddles the trail: GONE 1, RETX 2..3 */
		R(9, 3, 0),    /* straddles the head: RETX 9, FUTURE 10..11 */
		R(0, 20, 0),   /* all three */
		R(12, 1, 0),   /* never sent */
		R(5, 0, 0),    /* empty: ignored */
	};
	unsigned k = flit_rel_tx_nak(tx, nak, 6, 0, ncf, 16);
	assert_int_equal(k, 9);
	assert_range(ncf[0], R(0, 1, FLIT_NCF_GONE));
	assert_range(ncf[1], R(1, 1, FLIT_NCF_GONE));
	assert_range(ncf[2], R(2, 2, FLIT_NCF_RETX));
	assert_range(ncf[3], R(9, 1, FLIT_NCF_RETX));
	assert_range(ncf[4], R(10, 2, FLIT_NCF_FUTURE));
	assert_range(ncf[5], R(0, 2, FLIT_NCF_GONE));
	assert_range(ncf[6], R(2, 8, FLIT_NCF_RETX));
	assert_range(ncf[7], R(10, 10, FLIT_NCF_FUTURE));
	assert_range(ncf[8], R(12, 1, FLIT_NCF_FUTURE));

	struct flit_rel_tx_stats st;
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.naks_received, 1);
	assert_int_equal(st.ranges_received, 6);
	assert_int_equal(st.ncf_gone, 3);
	assert_int_equal(st.ncf_future, 3);
	assert_int_equal(st.retx_dup_ignored, 2);  /* frames 2 and 8 again */

	/* queued in NAK order, each frame once */
	assert_int_equal(tx_retx_seq(tx, 0, NULL), 2);
	assert_int_equal(tx_retx_seq(tx, 0, NULL), 8);
	assert_int_equal(tx_retx_seq(tx, 0, NULL), 4);
	assert_int_equal(tx_retx_seq(tx, 0, NULL), 6);
	uint64_t w;
	assert_int_equal(tx_retx_seq(tx, 0, &w), UINT64_MAX);
	assert_int_equal(w, UINT64_MAX);

	/* at most ncf_cap ranges are written; the frames are still queued */
	k = flit_rel_tx_nak(tx, nak, 6, 0, ncf, 2);
	assert_int_equal(k, 2);
	assert_range(ncf[1], R(1, 1, FLIT_NCF_GONE));
	assert_int_equal(tx_retx_seq(tx, 0, NULL), 2);
	flit_rel_tx_free(tx);
}

static void tx_duplicate_nak_does_not_queue_a_frame_twice(void **state)
{
	(void)state;
	struct flit_rel_tx *tx = tx_mk(&TXCFG, 0);
	tx_send(tx, 3, 2, 8, 0);  /* [0,2) [2,4) [4,6) */
	struct flit_seq_range ncf[4], nak[] = { R(3, 1, 0) };
	assert_int_equal(flit_rel_tx_nak(tx, nak, 1, 0, ncf, 4), 1);
	assert_range(ncf[0], R(3, 1, FLIT_NCF_RETX));
	assert_int_equal(flit_rel_tx_nak(tx, nak, 1, 0, ncf, 4), 1);
	nak[0] = R(2, 2, 0);
	assert_int_equal(flit_rel_tx_nak(tx, nak, 1, 0, ncf, 4), 1);
	struct flit_rel_tx_stats st;
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.retx_dup_ignored, 2);

	assert_int_equal(tx_retx_seq(tx, 0, NULL), 2);
	assert_int_equal(tx_retx_seq(tx, 0, NULL), UINT64_MAX);
	/* once handed out it may be NAKed and queued again */
	assert_int_equal(flit_rel_tx_nak(tx, nak, 1, 0, ncf, 4), 1);
	assert_int_equal(tx_retx_seq(tx, 0, NULL), 2);
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.retx_frames, 2);
	assert_int_equal(st.retx_dup_ignored, 2);
	flit_rel_tx_free(tx);
}

static void tx_retransmissions_are_paced_by_the_rate_limit(void **state)
{
	(void)state;
	struct flit_rel_tx_cfg c = TXCFG;
	c.retain_bytes = 128 * KiB;
	c.retx_rate = 1000000;  /* 1 byte/us; burst max(64 KiB, 16 KiB) */
	const uint64_t T = 5000000000ull;
	struct flit_rel_tx *tx = tx_mk(&c, 0);
	tx_send(tx, 6, 1, BIG_PAY, T);
	struct flit_seq_range ncf[4], nak[] = { R(0, 6, 0) };
	assert_int_equal(flit_rel_tx_nak(tx, nak, 1, T, ncf, 4), 1);

	uint64_t w;
	for (uint64_t s = 0; s < 4; s++)  /* a full bucket: four at once */
		assert_int_equal(tx_retx_seq(tx, T, NULL), s);
	assert_int_equal(tx_retx_seq(tx, T, &w), UINT64_MAX);
	assert_int_equal(w, 16384000);   /* 16384 bytes at 1 byte/us */
	assert_int_equal(tx_retx_seq(tx, T + 16383999, &w), UINT64_MAX);
	assert_int_equal(w, 1);
	assert_int_equal(tx_retx_seq(tx, T + 16384000, NULL), 4);
	assert_int_equal(tx_retx_seq(tx, T + 16384000, &w), UINT64_MAX);
	assert_int_equal(w, 16384000);
	assert_int_equal(tx_retx_seq(tx, T + 2 * 16384000, NULL), 5);
	assert_int_equal(tx_retx_seq(tx, T + 2 * 16384000, &w), UINT64_MAX);
	assert_int_equal(w, UINT64_MAX);  /* queue empty */
	struct flit_rel_tx_stats st;
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.retx_frames, 6);
	assert_int_equal(st.retx_bytes, 6 * 16384);
	flit_rel_tx_free(tx);
}

static void tx_retx_burst_grows_to_the_largest_frame(void **state)
{
	(void)state;
	struct flit_rel_tx_cfg c = TXCFG;
	c.retain_bytes = 256 * KiB;
	c.retain_ns = 3600ull * 1000000000ull;
	c.retx_rate = 1000;
	struct flit_rel_tx *tx = tx_mk(&c, 0);
	size_t big = 100 * KiB;
	uint8_t *f = aligned_alloc(8, big);
	assert_non_null(f);
	size_t len = mkframe_sz(f, 0, 1, (uint32_t)(big - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN));
	assert_int_equal(len, big);
	assert_int_equal(flit_rel_tx_sent(tx, f, len, 0, 1, 0), 0);
	free(f);
	struct flit_seq_range ncf[2], nak[] = { R(0, 1, 0) };
	flit_rel_tx_nak(tx, nak, 1, 0, ncf, 2);
	/* the bucket started full at 64 KiB: a 100 KiB frame needs a full
	 * (now 100 KiB deep) bucket: 36 KiB more at 1000 bytes/s */
	uint64_t w;
	assert_int_equal(tx_retx_seq(tx, 0, &w), UINT64_MAX);
	assert_int_equal(w, 36864000000ull);
	assert_int_equal(tx_retx_seq(tx, 36864000000ull, NULL), 0);
	flit_rel_tx_free(tx);
}

static void tx_retx_frame_is_the_original_plus_retx_flag(void **state)
{
	(void)state;
	uint64_t buf[64];
	struct flit_rel_tx *tx = tx_mk(&TXCFG, 0);
	size_t len = mkframe(buf, 0, 4);
	assert_int_equal(flit_rel_tx_sent(tx, buf, len, 0, 4, 0), 0);
	memset(buf, 0, sizeof(buf));  /* the source reuses its buffer */
	uint64_t orig[64];
	mkframe(orig, 0, 4);
	struct flit_seq_range ncf[2], nak[] = { R(1, 1, 0) };
	flit_rel_tx_nak(tx, nak, 1, 0, ncf, 2);
	size_t rlen;
	uint64_t w;
	const uint8_t *r = flit_rel_tx_retx_next(tx, 0, &rlen, &w);
	assert_non_null(r);
	assert_int_equal(rlen, len);
	assert_int_equal(flit_ld16(r + 4), FLIT_FF_RETX);
	assert_memory_equal(r, orig, 4);
	assert_memory_equal(r + 6, (uint8_t *)orig + 6, len - 6);
	struct flit_frame_hdr h;
	assert_int_equal(flit_frame_validate(r, rlen, &h), FLIT_FE_OK);
	assert_int_equal(h.flags, FLIT_FF_RETX);
	flit_rel_tx_free(tx);
}

static void tx_retx_skips_frames_evicted_while_queued(void **state)
{
	(void)state;
	struct flit_rel_tx_cfg c = TXCFG;
	c.retain_ns = 1000;
	struct flit_rel_tx *tx = tx_mk(&c, 0);
	tx_send(tx, 4, 1, BIG_PAY, 0);
	struct flit_seq_range ncf[2], nak[] = { R(0, 2, 0) };
	flit_rel_tx_nak(tx, nak, 1, 0, ncf, 2);
	tx_send(tx, 2, 1, BIG_PAY, 10);          /* evicts 0 and 1 by size */
	uint64_t w;
	assert_int_equal(tx_retx_seq(tx, 10, &w), UINT64_MAX);
	assert_int_equal(w, UINT64_MAX);

	nak[0] = R(2, 4, 0);
	flit_rel_tx_nak(tx, nak, 1, 10, ncf, 2);
	/* 2 and 3 (sent at 0) aged out meanwhile; 4 and 5 (at 10) not */
	assert_int_equal(tx_retx_seq(tx, 1005, NULL), 4);
	assert_int_equal(tx_retx_seq(tx, 1005, NULL), 5);
	assert_int_equal(tx_retx_seq(tx, 1005, NULL), UINT64_MAX);
	struct flit_rel_tx_stats st;
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.retx_frames, 2);

	/* many NAK/evict rounds never outgrow the queue */
	for (int i = 0; i < 1000; i++) {
		tx_send(tx, 1, 1, 8, 2000 + (uint64_t)i);
		uint64_t s = flit_rel_tx_next(tx) - 1;
		nak[0] = R(s, 1, 0);
		assert_int_equal(flit_rel_tx_nak(tx, nak, 1, 2000 + (uint64_t)i, ncf, 2), 1);
	}
	assert_int_equal(tx_retx_seq(tx, 1000000, NULL), UINT64_MAX);
	flit_rel_tx_free(tx);
}

static void tx_retx_queue_drops_entries_of_evicted_frames_when_full(void **state)
{
	(void)state;
	struct flit_rel_tx *tx = tx_mk(&TXCFG, 0);  /* four 16 KiB frames kept */
	struct flit_seq_range ncf[2], nak[1];
	for (uint64_t i = 0; i < 1000; i++) {
		tx_send(tx, 1, 1, BIG_PAY, 0);
		nak[0] = R(i, 1, 0);
		assert_int_equal(flit_rel_tx_nak(tx, nak, 1, 0, ncf, 2), 1);
		assert_range(ncf[0], R(i, 1, FLIT_NCF_RETX));
	}
	for (uint64_t s = 996; s < 1000; s++)
		assert_int_equal(tx_retx_seq(tx, 0, NULL), s);
	assert_int_equal(tx_retx_seq(tx, 0, NULL), UINT64_MAX);
	struct flit_rel_tx_stats st;
	flit_rel_tx_stats(tx, &st);
	assert_int_equal(st.retx_dup_ignored, 0);
	assert_int_equal(st.evicted_frames, 996);
	flit_rel_tx_free(tx);
}

static void tx_heartbeat_backs_off_from_min_to_max(void **state)
{
	(void)state;
	struct flit_rel_tx *tx = tx_mk(&TXCFG, 100);  /* min 1000, max 8000 */
	assert_int_equal(flit_rel_tx_hb_due(tx), 1100);
	flit_rel_tx_hb_sent(tx, 1100);
	assert_int_equal(flit_rel_tx_hb_due(tx), 3100);
	flit_rel_tx_hb_sent(tx, 3100);
	assert_int_equal(flit_rel_tx_hb_due(tx), 7100);
	flit_rel_tx_hb_sent(tx, 7150);  /* sent a little late: from then */
	assert_int_equal(flit_rel_tx_hb_due(tx), 15150);
	flit_rel_tx_hb_sent(tx, 15150);
	assert_int_equal(flit_rel_tx_hb_due(tx), 23150);  /* capped */
	flit_rel_tx_free(tx);
}

static void tx_heartbeat_resets_to_min_after_data(void **state)
{
	(void)state;
	struct flit_rel_tx *tx = tx_mk(&TXCFG, 0);
	flit_rel_tx_hb_sent(tx, 1000);
	flit_rel_tx_hb_sent(tx, 3000);
	flit_rel_tx_hb_sent(tx, 7000);
	assert_int_equal(flit_rel_tx_hb_due(tx), 15000);
	tx_send(tx, 1, 1, 8, 9000);
	assert_int_equal(flit_rel_tx_hb_due(tx), 10000);
	flit_rel_tx_hb_sent(tx, 10000);
	assert_int_equal(flit_rel_tx_hb_due(tx), 12000);
	tx_send(tx, 1, 1, 8, 11000);
	assert_int_equal(flit_rel_tx_hb_due(tx), 12000);
	flit_rel_tx_free(tx);
}

/* ==== receiver side ====================================================== */

struct rec {
	char ev[4096];
	size_t evlen;
	int delivers, losses;
	int fail_deliver_at;  /* fail the n-th deliver call (1-based), 0 never */
	int fail_loss_at;
	bool reenter;
	int reenter_ret;
	struct flit_rel_rx *rx;
};

static void rec_add(struct rec *r, char kind, uint64_t a, uint64_t n)
{
	int k = snprintf(r->ev + r->evlen, sizeof(r->ev) - r->evlen, "%s%c%llu+%llu",
			 r->evlen ? " " : "", kind, (unsigned long long)a,
			 (unsigned long long)n);
	assert_true(k > 0 && (size_t)k < sizeof(r->ev) - r->evlen);
	r->evlen += (size_t)k;
}

/* The events so far, cleared. */
static const char *evs(struct rec *r)
{
	static char out[4096];
	memcpy(out, r->ev, r->evlen + 1);
	r->evlen = 0;
	r->ev[0] = 0;
	return out;
}

static int rec_deliver(void *arg, const void *frame, size_t len)
{
	struct rec *r = arg;
	struct flit_frame_hdr h;
	assert_true(frame_ok(frame, len, &h));
	rec_add(r, 'D', h.seq, h.count);
	if (r->reenter) {
		r->reenter = false;
		r->reenter_ret = flit_rel_rx_data(r->rx, frame, len, h.seq, h.count, 0);
	}
	if (++r->delivers == r->fail_deliver_at)
		return -EIO;
	return 1;
}

static int rec_loss(void *arg, uint64_t first, uint64_t n)
{
	struct rec *r = arg;
	rec_add(r, 'L', first, n);
	if (++r->losses == r->fail_loss_at)
		return -EPIPE;
	return 1;
}

static int rec_skip(void *arg, uint64_t first, uint64_t n)
{
	struct rec *r = arg;
	rec_add(r, 'S', first, n);
	return 0;
}

static const struct flit_rel_rx_cfg RXCFG = {
	.nak_backoff_ns = 1000,
	.nak_interval_ns = 10000,
	.nak_timeout_ns = 100000,
	.reorder_bytes = 1u << 20,
};

static struct flit_rel_rx *rx_mk(const struct flit_rel_rx_cfg *cfg, uint64_t seed,
				 struct rec *r)
{
	memset(r, 0, sizeof(*r));
	struct flit_rel_rx *rx = NULL;
	assert_int_equal(flit_rel_rx_new(cfg, seed, rec_deliver, rec_loss, r, &rx), 0);
	assert_non_null(rx);
	r->rx = rx;
	return rx;
}

/* Feed the frame [seq, seq + count); returns what rx_data returned. */
static int rx_put(struct flit_rel_rx *rx, uint64_t seq, unsigned count, uint64_t now)
{
	uint64_t buf[64];
	size_t len = mkframe(buf, seq, count);
	return flit_rel_rx_data(rx, buf, len, seq, count, now);
}

/* A retransmission: the same frame with FLIT_FF_RETX. */
static int rx_put_retx(struct flit_rel_rx *rx, uint64_t seq, unsigned count, uint64_t now)
{
	uint64_t buf[64];
	size_t len = mkframe(buf, seq, count);
	flit_st16((uint8_t *)buf + 4, FLIT_FF_RETX);
	return flit_rel_rx_data(rx, buf, len, seq, count, now);
}

/* Run the timer; the NAK ranges as "first+n ..." */
static const char *rx_naks(struct flit_rel_rx *rx, uint64_t now, unsigned cap, int *ret)
{
	static char out[1024];
	struct flit_seq_range r[64];
	unsigned n = 999;
	assert_true(cap <= 64);
	int x = flit_rel_rx_timer(rx, now, r, cap, &n);
	if (ret)
		*ret = x;
	else
		assert_true(x >= 0);
	assert_true(n <= cap);
	size_t o = 0;
	out[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(r[i].status, 0);
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%llu+%u", i ? " " : "",
				      (unsigned long long)r[i].first, r[i].n);
	}
	return out;
}

static void rx_new_rejects_bad_config(void **state)
{
	(void)state;
	struct flit_rel_rx *rx = (void *)1;
	struct rec r;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_interval_ns = 0;
	assert_int_equal(flit_rel_rx_new(&c, 1, rec_deliver, rec_loss, &r, &rx), -EINVAL);
	assert_null(rx);
	c = RXCFG;
	c.nak_timeout_ns = 0;
	assert_int_equal(flit_rel_rx_new(&c, 1, rec_deliver, rec_loss, &r, &rx), -EINVAL);
	c = RXCFG;
	c.reorder_bytes = 0;
	assert_int_equal(flit_rel_rx_new(&c, 1, rec_deliver, rec_loss, &r, &rx), -EINVAL);
	assert_int_equal(flit_rel_rx_new(&RXCFG, 1, NULL, rec_loss, &r, &rx), -EINVAL);
	assert_int_equal(flit_rel_rx_new(&RXCFG, 1, rec_deliver, NULL, &r, &rx), -EINVAL);
	flit_rel_rx_free(NULL);
}

static void rx_rejects_bad_frames(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 1, &r);
	uint64_t buf[8];
	size_t len = mkframe(buf, 0, 1);
	assert_int_equal(flit_rel_rx_data(rx, buf, len, 0, 0, 0), -EINVAL);
	assert_int_equal(flit_rel_rx_data(rx, buf, len, UINT64_MAX, 2, 0), -EINVAL);
	assert_int_equal(flit_rel_rx_data(rx, NULL, len, 0, 1, 0), -EINVAL);
	assert_int_equal(flit_rel_rx_data(rx, buf, 0, 0, 1, 0), -EINVAL);
	assert_false(flit_rel_rx_started(rx));
	flit_rel_rx_free(rx);
}

/* ==== skipped ranges (dropped before the receiver: flit_rel_rx_skip) ===== */

static void rx_skip_needs_its_callback_and_a_range(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 1, &r);
	assert_int_equal(flit_rel_rx_skip(rx, 0, 1, 0), -EINVAL);   /* no callback */
	flit_rel_rx_on_skip(rx, rec_skip);
	assert_int_equal(flit_rel_rx_skip(rx, 0, 0, 0), -EINVAL);
	assert_int_equal(flit_rel_rx_skip(rx, UINT64_MAX, 2, 0), -EINVAL);
	/* before the receiver started: nothing to place it against */
	assert_int_equal(flit_rel_rx_skip(rx, 0, 4, 0), 0);
	assert_false(flit_rel_rx_started(rx));
	assert_string_equal(evs(&r), "");
	flit_rel_rx_free(rx);
}

static void rx_skip_in_order_moves_on_without_a_nak(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 1, &r);
	flit_rel_rx_on_skip(rx, rec_skip);
	assert_int_equal(rx_put(rx, 0, 2, 0), 1);
	assert_int_equal(flit_rel_rx_skip(rx, 2, 5, 0), 0);
	assert_int_equal(rx_put(rx, 7, 1, 0), 1);
	/* overlapping what came: only the part not seen is told */
	assert_int_equal(flit_rel_rx_skip(rx, 6, 4, 0), 0);
	/* wholly behind: nothing (and no duplicate counted) */
	assert_int_equal(flit_rel_rx_skip(rx, 3, 2, 0), 0);
	assert_string_equal(evs(&r), "D0+2 S2+5 D7+1 S8+2");
	assert_int_equal(flit_rel_rx_expected(rx), 10);
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	assert_string_equal(rx_naks(rx, 1000000, 8, NULL), "");
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.msgs_skipped, 7);
	assert_int_equal(st.duplicates + st.gaps_opened + st.frames_held, 0);
	flit_rel_rx_free(rx);
}

static void rx_skip_fills_a_gap_and_releases_what_was_held(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 1, &r);
	flit_rel_rx_on_skip(rx, rec_skip);
	assert_int_equal(rx_put(rx, 0, 1, 0), 1);
	assert_int_equal(rx_put(rx, 5, 1, 0), 0);           /* gap 1..4 */
	assert_int_not_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	/* the frames of the gap were dropped before us: told after the fact */
	assert_int_equal(flit_rel_rx_skip(rx, 1, 4, 10), 1);
	assert_string_equal(evs(&r), "D0+1 S1+4 D5+1");
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	assert_string_equal(rx_naks(rx, 1000000, 8, NULL), "");
	/* a skip in the middle of a gap splits it: the rest is NAKed */
	assert_int_equal(rx_put(rx, 10, 1, 20), 0);         /* gap 6..9 */
	assert_int_equal(flit_rel_rx_skip(rx, 7, 2, 20), 0);
	assert_string_equal(rx_naks(rx, 5000, 8, NULL), "6+1 9+1");
	assert_int_equal(rx_put(rx, 6, 1, 5001), 1);        /* repaired: 6, then 7..8 */
	assert_int_equal(rx_put(rx, 9, 1, 5002), 2);        /* 9, then 10 */
	assert_string_equal(evs(&r), "D6+1 S7+2 D9+1 D10+1");
	assert_int_equal(flit_rel_rx_expected(rx), 11);
	flit_rel_rx_free(rx);
}

static void rx_skip_ahead_is_held_until_its_turn(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 1, &r);
	flit_rel_rx_on_skip(rx, rec_skip);
	assert_int_equal(rx_put(rx, 0, 1, 0), 1);
	assert_int_equal(flit_rel_rx_skip(rx, 3, 2, 0), 0);  /* gap 1..2 */
	assert_int_equal(rx_put(rx, 5, 1, 0), 0);
	assert_string_equal(rx_naks(rx, 5000, 8, NULL), "1+2");
	assert_int_equal(rx_put(rx, 1, 2, 5001), 2);         /* 1..2, then 5 */
	assert_string_equal(evs(&r), "D0+1 D1+2 S3+2 D5+1");
	/* a gap given up before a held skip: loss, then the skip */
	assert_int_equal(flit_rel_rx_skip(rx, 8, 1, 2000000), 0);
	int ret;
	rx_naks(rx, 2000000 + 200000, 8, &ret);
	assert_true(ret >= 1);
	assert_string_equal(evs(&r), "L6+2 S8+1");
	assert_int_equal(flit_rel_rx_expected(rx), 9);
	flit_rel_rx_free(rx);
}

static void rx_delivers_in_order_frames_at_once(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 1, &r);
	assert_false(flit_rel_rx_started(rx));
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	assert_int_equal(rx_put(rx, 0, 2, 0), 1);
	assert_true(flit_rel_rx_started(rx));
	assert_int_equal(rx_put(rx, 2, 3, 0), 1);
	assert_int_equal(rx_put(rx, 5, 1, 0), 1);
	assert_string_equal(evs(&r), "D0+2 D2+3 D5+1");
	assert_int_equal(flit_rel_rx_expected(rx), 6);
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.frames_held + st.duplicates + st.gaps_opened, 0);
	flit_rel_rx_free(rx);
}

static void rx_starts_at_the_first_frame_or_at_start(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 1, &r);
	assert_int_equal(rx_put(rx, 100, 3, 0), 1);
	assert_int_equal(flit_rel_rx_expected(rx), 103);
	assert_int_equal(rx_put(rx, 99, 1, 0), 0);  /* before the start: old */
	assert_string_equal(evs(&r), "D100+3");
	flit_rel_rx_free(rx);

	rx = rx_mk(&RXCFG, 1, &r);
	flit_rel_rx_start(rx, 50);
	assert_true(flit_rel_rx_started(rx));
	assert_int_equal(flit_rel_rx_expected(rx), 50);
	assert_int_equal(rx_put(rx, 52, 1, 0), 0);  /* held: 50..51 missing */
	flit_rel_rx_start(rx, 52);                  /* ignored once started */
	assert_string_equal(rx_naks(rx, 1000, 8, NULL), "50+2");
	assert_int_equal(rx_put(rx, 50, 2, 0), 2);
	assert_string_equal(evs(&r), "D50+2 D52+1");
	flit_rel_rx_free(rx);
}

static void rx_single_gap_is_naked_after_backoff_and_repaired_in_order(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 7, &r);
	const uint64_t T = 1000000;
	assert_int_equal(rx_put(rx, 0, 2, T), 1);
	assert_int_equal(rx_put(rx, 4, 2, T), 0);  /* [2, 4) lost */
	assert_int_equal(rx_put(rx, 6, 1, T + 10), 0);
	assert_string_equal(evs(&r), "D0+2");
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.frames_held, 2);
	assert_int_equal(st.gaps_opened, 1);

	uint64_t d = flit_rel_rx_deadline(rx);
	assert_true(d >= T && d <= T + RXCFG.nak_backoff_ns);
	if (d > T)
		assert_string_equal(rx_naks(rx, d - 1, 8, NULL), "");
	assert_string_equal(rx_naks(rx, d, 8, NULL), "2+2");
	assert_string_equal(rx_naks(rx, d, 8, NULL), "");  /* rescheduled */
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.naks_ranges, 1);

	assert_int_equal(rx_put_retx(rx, 2, 2, d + 100), 3);
	assert_string_equal(evs(&r), "D2+2 D4+2 D6+1");
	assert_int_equal(flit_rel_rx_expected(rx), 7);
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.gaps_repaired, 1);
	assert_int_equal(st.loss_events, 0);
	flit_rel_rx_free(rx);
}

static void rx_first_nak_time_is_uniform_within_backoff(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 1000000;
	c.nak_timeout_ns = 1000000000;  /* not the earliest timer */
	uint64_t lo = UINT64_MAX, hi = 0;
	for (uint64_t seed = 0; seed < 200; seed++) {  /* seed 0 works too */
		struct rec r;
		struct flit_rel_rx *rx = rx_mk(&c, seed, &r);
		flit_rel_rx_start(rx, 0);
		assert_int_equal(rx_put(rx, 1, 1, 5000), 0);
		uint64_t d = flit_rel_rx_deadline(rx) - 5000;
		assert_true(d <= c.nak_backoff_ns);
		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
		flit_rel_rx_free(rx);
	}
	assert_true(lo < c.nak_backoff_ns / 20);
	assert_true(hi > c.nak_backoff_ns - c.nak_backoff_ns / 20);

	/* backoff 0: at once */
	c.nak_backoff_ns = 0;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 0, &r);
	flit_rel_rx_start(rx, 0);
	rx_put(rx, 1, 1, 5000);
	assert_int_equal(flit_rel_rx_deadline(rx), 5000);
	flit_rel_rx_free(rx);
}

static void rx_many_gaps_are_naked_in_one_timer_call_as_separate_ranges(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 0;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 3, &r);
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 2, 1, 0);
	rx_put(rx, 5, 1, 0);
	rx_put(rx, 9, 2, 0);
	rx_put(rx, 20, 1, 0);
	assert_string_equal(rx_naks(rx, 0, 64, NULL), "1+1 3+2 6+3 11+9");
	/* repairing one in the middle leaves the others to be NAKed again */
	assert_int_equal(rx_put(rx, 6, 3, 1), 0);
	assert_string_equal(rx_naks(rx, 100000 - 1, 64, NULL), "1+1 3+2 11+9");
	assert_string_equal(evs(&r), "D0+1");
	flit_rel_rx_free(rx);
}

static void rx_adjacent_gaps_go_out_as_one_range(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 0;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 3, &r);
	rx_put(rx, 0, 5, 0);
	assert_int_equal(flit_rel_rx_hb(rx, 10, 0, 10), 0);  /* [5, 10) at 10 */
	assert_int_equal(flit_rel_rx_hb(rx, 20, 0, 20), 0);  /* [10, 20) at 20 */
	assert_string_equal(rx_naks(rx, 20, 64, NULL), "5+15");
	/* they still time out separately */
	assert_string_equal(rx_naks(rx, 100010, 64, NULL), "10+10");
	assert_string_equal(evs(&r), "D0+5 L5+5");
	rx_naks(rx, 100020, 64, NULL);
	assert_string_equal(evs(&r), "L10+10");
	flit_rel_rx_free(rx);
}

static void rx_frame_inside_a_gap_splits_it(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 0;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 3, &r);
	rx_put(rx, 0, 1, 0);
	flit_rel_rx_hb(rx, 10, 0, 0);     /* [1, 10) missing */
	assert_int_equal(rx_put(rx, 4, 2, 0), 0);
	assert_string_equal(rx_naks(rx, 0, 64, NULL), "1+3 6+4");
	assert_int_equal(rx_put(rx, 6, 4, 1), 0);  /* tail piece repaired */
	assert_int_equal(rx_put(rx, 1, 3, 2), 3);
	assert_string_equal(evs(&r), "D0+1 D1+3 D4+2 D6+4");
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.gaps_opened, 1);
	assert_int_equal(st.gaps_repaired, 2);  /* counted per piece */
	flit_rel_rx_free(rx);
}

static void rx_renaks_after_the_interval(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 0;
	c.nak_timeout_ns = 1000000;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 11, &r);
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 3, 1, 0);
	assert_string_equal(rx_naks(rx, 0, 8, NULL), "1+2");
	uint64_t prev = 0;
	for (int i = 0; i < 5; i++) {
		uint64_t d = flit_rel_rx_deadline(rx);
		assert_true(d >= prev + c.nak_interval_ns);
		assert_true(d <= prev + c.nak_interval_ns + c.nak_interval_ns / 2);
		assert_string_equal(rx_naks(rx, d - 1, 8, NULL), "");
		assert_string_equal(rx_naks(rx, d, 8, NULL), "1+2");
		prev = d;
	}
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.naks_ranges, 6);
	flit_rel_rx_free(rx);
}

static void rx_gives_up_after_timeout_reporting_loss_before_later_frames(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 5, &r);  /* timeout 100000 */
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 3, 2, 10);          /* gap [1, 3) opened at 10 */
	rx_put(rx, 6, 1, 50000);       /* gap [5, 6) opened at 50000 */
	assert_string_equal(evs(&r), "D0+1");
	assert_true(flit_rel_rx_deadline(rx) <= 100010);

	rx_naks(rx, 100009, 8, NULL);
	assert_string_equal(evs(&r), "");
	int ret;
	const char *naks = rx_naks(rx, 100010, 8, &ret);
	assert_int_equal(ret, 2);
	assert_string_equal(evs(&r), "L1+2 D3+2");
	assert_int_equal(flit_rel_rx_expected(rx), 5);
	/* the other gap is still open, and NAKed if due */
	assert_true(strcmp(naks, "") == 0 || strcmp(naks, "5+1") == 0);
	assert_int_equal(rx_put(rx, 2, 1, 100011), 0);  /* too late: a duplicate */

	rx_naks(rx, 150000, 8, NULL);
	assert_string_equal(evs(&r), "L5+1 D6+1");
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.loss_events, 2);
	assert_int_equal(st.msgs_unrecoverable, 3);
	assert_int_equal(st.gaps_repaired, 0);
	assert_int_equal(st.duplicates, 1);
	flit_rel_rx_free(rx);
}

static void rx_ncf_retx_suppresses_nak_until_the_interval_passes(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 5000;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 2, &r);
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 3, 1, 0);  /* [1, 3) */
	struct flit_seq_range ncf[] = { R(0, 10, FLIT_NCF_RETX) };
	assert_int_equal(flit_rel_rx_ncf(rx, ncf, 1, 1), 0);
	assert_int_equal(flit_rel_rx_deadline(rx), 10001);
	assert_string_equal(rx_naks(rx, 10000, 8, NULL), "");
	/* a second confirmation at the same time changes nothing */
	assert_int_equal(flit_rel_rx_ncf(rx, ncf, 1, 1), 0);
	assert_int_equal(flit_rel_rx_deadline(rx), 10001);
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.naks_suppressed, 1);
	assert_string_equal(rx_naks(rx, 10001, 8, NULL), "1+2");
	flit_rel_rx_free(rx);
}

static void rx_ncf_retx_suppresses_only_the_overlapping_part(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 0;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 2, &r);
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 10, 1, 0);  /* [1, 10) */
	rx_put(rx, 12, 1, 0);  /* [11, 12) */
	/* a peer's NAK heard on the group, passed as RETX */
	struct flit_seq_range peer[] = { R(3, 2, FLIT_NCF_RETX), R(11, 1, FLIT_NCF_RETX) };
	assert_int_equal(flit_rel_rx_ncf(rx, peer, 2, 0), 0);
	assert_string_equal(rx_naks(rx, 0, 8, NULL), "1+2 5+5");
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.naks_suppressed, 2);
	/* once every piece is due again they go out coalesced */
	assert_string_equal(rx_naks(rx, 15000, 8, NULL), "1+9 11+1");
	flit_rel_rx_free(rx);
}

static void rx_ncf_gone_gives_up_at_once(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 2, &r);
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 3, 2, 0);  /* [1, 3) */
	rx_put(rx, 7, 1, 0);  /* [5, 7) */
	struct flit_seq_range ncf[] = { R(0, 2, FLIT_NCF_GONE), R(2, 1, FLIT_NCF_GONE),
					R(5, 1, FLIT_NCF_GONE) };
	assert_int_equal(flit_rel_rx_ncf(rx, ncf, 3, 10), 3);
	assert_string_equal(evs(&r), "D0+1 L1+2 D3+2 L5+1");
	assert_int_equal(flit_rel_rx_expected(rx), 6);
	/* 6 is still missing and NAKed */
	assert_string_equal(rx_naks(rx, 2000, 8, NULL), "6+1");
	flit_rel_rx_free(rx);
}

static void rx_ncf_gone_behind_an_open_gap_waits_its_turn(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 0;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 2, &r);
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 2, 1, 0);  /* [1, 2) */
	rx_put(rx, 4, 1, 0);  /* [3, 4) */
	struct flit_seq_range ncf[] = { R(3, 1, FLIT_NCF_GONE) };
	assert_int_equal(flit_rel_rx_ncf(rx, ncf, 1, 0), 0);
	assert_string_equal(rx_naks(rx, 0, 8, NULL), "1+1");  /* not 3 */
	assert_int_equal(rx_put(rx, 1, 1, 5), 4);
	assert_string_equal(evs(&r), "D0+1 D1+1 D2+1 L3+1 D4+1");
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	flit_rel_rx_free(rx);
}

static void rx_ncf_future_is_ignored(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 2, &r);
	struct flit_seq_range ncf[] = { R(1, 2, FLIT_NCF_FUTURE), R(1, 2, 77) };
	assert_int_equal(flit_rel_rx_ncf(rx, ncf, 2, 0), 0);  /* not started */
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 3, 1, 0);
	uint64_t d = flit_rel_rx_deadline(rx);
	assert_int_equal(flit_rel_rx_ncf(rx, ncf, 2, 0), 0);
	assert_int_equal(flit_rel_rx_deadline(rx), d);
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.naks_suppressed + st.loss_events, 0);
	assert_string_equal(rx_naks(rx, d, 8, NULL), "1+2");
	flit_rel_rx_free(rx);
}

static void rx_heartbeat_detects_tail_loss(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	rx_put(rx, 0, 4, 0);
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	assert_int_equal(flit_rel_rx_hb(rx, 4, 0, 50), 0);   /* nothing missing */
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	assert_int_equal(flit_rel_rx_hb(rx, 6, 0, 100), 0);  /* 4, 5 lost */
	assert_int_equal(flit_rel_rx_hb(rx, 6, 0, 200), 0);  /* same: no new gap */
	assert_int_equal(flit_rel_rx_hb(rx, 3, 0, 200), 0);  /* stale */
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.gaps_opened, 1);
	uint64_t d = flit_rel_rx_deadline(rx);
	assert_true(d >= 100 && d <= 100 + RXCFG.nak_backoff_ns);
	assert_string_equal(rx_naks(rx, d, 8, NULL), "4+2");
	assert_int_equal(rx_put_retx(rx, 4, 2, d + 1), 1);
	assert_string_equal(evs(&r), "D0+4 D4+2");
	flit_rel_rx_free(rx);
}

static void rx_heartbeat_starts_a_receiver_at_next(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	assert_int_equal(flit_rel_rx_hb(rx, 10, 3, 0), 0);
	assert_true(flit_rel_rx_started(rx));
	assert_int_equal(flit_rel_rx_expected(rx), 10);
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	assert_int_equal(rx_put(rx, 8, 2, 0), 0);   /* before the start */
	assert_int_equal(rx_put(rx, 10, 1, 0), 1);
	assert_string_equal(evs(&r), "D10+1");
	flit_rel_rx_free(rx);
}

static void rx_heartbeat_trail_above_expected_gives_up_below_it(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 3, 1, 0);  /* [1, 3) */
	rx_put(rx, 6, 1, 0);  /* [4, 6) */
	evs(&r);
	/* trail 5: 1..4 are gone; 5 may still come; 7 is new at the tail */
	assert_int_equal(flit_rel_rx_hb(rx, 8, 5, 10), 3);
	assert_string_equal(evs(&r), "L1+2 D3+1 L4+1");
	assert_int_equal(flit_rel_rx_expected(rx), 5);
	assert_string_equal(rx_naks(rx, 10000, 8, NULL), "5+1 7+1");
	/* trail == next: everything up to next is gone */
	assert_int_equal(flit_rel_rx_hb(rx, 9, 9, 20), 3);
	assert_string_equal(evs(&r), "L5+1 D6+1 L7+2");
	assert_int_equal(flit_rel_rx_expected(rx), 9);
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	/* a trail beyond next is taken as next */
	assert_int_equal(flit_rel_rx_hb(rx, 10, 12, 30), 1);
	assert_string_equal(evs(&r), "L9+1");
	assert_int_equal(flit_rel_rx_expected(rx), 10);
	flit_rel_rx_free(rx);
}

static void rx_drops_and_counts_duplicates(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	assert_int_equal(rx_put(rx, 0, 2, 0), 1);
	assert_int_equal(rx_put(rx, 0, 2, 0), 0);       /* wholly old */
	assert_int_equal(rx_put(rx, 1, 1, 0), 0);       /* inside the old */
	assert_int_equal(rx_put(rx, 4, 2, 0), 0);       /* held */
	assert_int_equal(rx_put(rx, 4, 2, 0), 0);       /* already held */
	assert_int_equal(rx_put(rx, 5, 1, 0), 0);       /* inside a held one */
	assert_int_equal(rx_put_retx(rx, 0, 2, 0), 0);  /* retx of delivered */
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.duplicates, 5);
	assert_int_equal(st.frames_held, 1);
	assert_int_equal(rx_put(rx, 2, 2, 0), 2);
	assert_string_equal(evs(&r), "D0+2 D2+2 D4+2");
	flit_rel_rx_free(rx);
}

static void rx_delivers_a_frame_straddling_expected(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	rx_put(rx, 0, 4, 0);
	assert_int_equal(rx_put(rx, 2, 4, 0), 1);  /* 2, 3 seen: core drops them */
	assert_int_equal(flit_rel_rx_expected(rx), 6);
	/* a frame overlapping a held one and a gap is held for its new part */
	rx_put(rx, 8, 2, 0);                       /* [6, 8) missing */
	assert_int_equal(rx_put(rx, 7, 3, 0), 0);  /* brings 7 */
	assert_string_equal(rx_naks(rx, 2000, 8, NULL), "6+1");
	assert_int_equal(rx_put(rx, 6, 1, 0), 2);  /* 8+2 overtaken by 7+3 */
	assert_string_equal(evs(&r), "D0+4 D2+4 D6+1 D7+3");
	assert_int_equal(flit_rel_rx_expected(rx), 10);
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.duplicates, 1);
	flit_rel_rx_free(rx);
}

static void rx_reorder_bytes_limit_gives_up_the_oldest_gap(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.reorder_bytes = 2 * frame_len1(8);
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 4, &r);
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 2, 1, 0);  /* gap 1 */
	rx_put(rx, 4, 1, 0);  /* gap 3: two held, at the limit */
	assert_string_equal(evs(&r), "D0+1");
	assert_int_equal(rx_put(rx, 6, 1, 0), 2);  /* third: over it */
	assert_string_equal(evs(&r), "L1+1 D2+1");
	assert_int_equal(flit_rel_rx_expected(rx), 3);
	/* one frame larger than the limit: everything before it goes */
	uint64_t buf[64];
	size_t len = mkframe_sz(buf, 10, 1, 64);
	assert_true(len > c.reorder_bytes);
	assert_int_equal(flit_rel_rx_data(rx, buf, len, 10, 1, 0), 6);
	assert_string_equal(evs(&r), "L3+1 D4+1 L5+1 D6+1 L7+3 D10+1");
	flit_rel_rx_free(rx);
}

static void rx_gap_cap_gives_up_the_oldest_gap(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	rx_put(rx, 0, 1, 0);
	for (uint64_t k = 1; k <= GAPS_MAX; k++)  /* gaps 1, 3, 5, ... */
		assert_int_equal(rx_put(rx, 2 * k, 1, 0), 0);
	assert_string_equal(evs(&r), "D0+1");
	assert_int_equal(rx_put(rx, 2 * GAPS_MAX + 2, 1, 0), 2);
	assert_string_equal(evs(&r), "L1+1 D2+1");
	/* the NAKs cover the 4096 open gaps, lowest first */
	struct flit_seq_range n[64];
	unsigned k;
	assert_int_equal(flit_rel_rx_timer(rx, 5000, n, 64, &k), 0);
	assert_int_equal(k, 64);
	assert_int_equal(n[0].first, 3);
	assert_int_equal(n[63].first, 129);
	flit_rel_rx_free(rx);
}

static void rx_nak_cap_leaves_the_rest_due(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 0;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 4, &r);
	for (uint64_t s = 0; s <= 10; s += 2)
		rx_put(rx, s, 1, 0);  /* gaps 1 3 5 7 9 */
	assert_string_equal(rx_naks(rx, 0, 2, NULL), "1+1 3+1");
	assert_int_equal(flit_rel_rx_deadline(rx), 0);
	assert_string_equal(rx_naks(rx, 1, 2, NULL), "5+1 7+1");
	assert_string_equal(rx_naks(rx, 2, 0, NULL), "");
	assert_string_equal(rx_naks(rx, 2, 2, NULL), "9+1");
	assert_string_equal(rx_naks(rx, 3, 2, NULL), "");
	assert_true(flit_rel_rx_deadline(rx) >= c.nak_interval_ns);
	flit_rel_rx_free(rx);
}

static void rx_huge_gap_is_naked_in_u32_ranges(void **state)
{
	(void)state;
	struct flit_rel_rx_cfg c = RXCFG;
	c.nak_backoff_ns = 0;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&c, 4, &r);
	flit_rel_rx_start(rx, 0);
	const uint64_t N = (1ull << 33) + 5;
	flit_rel_rx_hb(rx, N, 0, 0);
	char want[128];
	snprintf(want, sizeof(want), "0+%u %llu+%u %llu+7", UINT32_MAX,
		 (unsigned long long)UINT32_MAX, UINT32_MAX,
		 2ull * UINT32_MAX);
	assert_string_equal(rx_naks(rx, 0, 8, NULL), want);
	/* with no room for all of it, the part that fits goes and it is
	 * rescheduled all the same */
	assert_string_equal(rx_naks(rx, 20000, 1, NULL), "0+4294967295");
	assert_true(flit_rel_rx_deadline(rx) > 20000);
	/* giving it up reports the whole range once */
	rx_naks(rx, 100000, 8, NULL);
	char loss[64];
	snprintf(loss, sizeof(loss), "L0+%llu", (unsigned long long)N);
	assert_string_equal(evs(&r), loss);
	flit_rel_rx_free(rx);
}

static void rx_deliver_error_is_returned_and_delivery_resumes(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	r.fail_deliver_at = 3;
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 2, 1, 0);
	rx_put(rx, 3, 1, 0);
	assert_int_equal(rx_put(rx, 1, 1, 0), -EIO);  /* 1 ok, 2 fails */
	assert_string_equal(evs(&r), "D0+1 D1+1 D2+1");
	assert_int_equal(flit_rel_rx_expected(rx), 3);  /* 2 was consumed */
	assert_int_equal(flit_rel_rx_deadline(rx), 0);  /* work pending */
	assert_string_equal(rx_naks(rx, 1, 8, NULL), "");
	assert_string_equal(evs(&r), "D3+1");          /* not 2 again */
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);

	/* an in-order frame whose delivery fails is consumed too */
	r.fail_deliver_at = 5;
	assert_int_equal(rx_put(rx, 4, 1, 0), -EIO);
	assert_int_equal(flit_rel_rx_expected(rx), 5);
	assert_int_equal(rx_put(rx, 5, 1, 0), 1);
	assert_string_equal(evs(&r), "D4+1 D5+1");
	flit_rel_rx_free(rx);
}

static void rx_error_while_resuming_is_returned_by_any_call(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	struct flit_seq_range n[8], ncf[] = { R(0, 1, FLIT_NCF_RETX) };
	unsigned k = 99;
	rx_put(rx, 0, 1, 0);
	for (uint64_t s = 2; s <= 5; s++)
		rx_put(rx, s, 1, 0);
	r.fail_deliver_at = 3;
	assert_int_equal(rx_put(rx, 1, 1, 0), -EIO);      /* D2 fails */
	r.fail_deliver_at = 4;
	assert_int_equal(flit_rel_rx_timer(rx, 10, n, 8, &k), -EIO);  /* D3 */
	assert_int_equal(k, 0);
	r.fail_deliver_at = 5;
	assert_int_equal(flit_rel_rx_hb(rx, 6, 0, 20), -EIO);         /* D4 */
	r.fail_deliver_at = 6;
	assert_int_equal(flit_rel_rx_ncf(rx, ncf, 1, 30), -EIO);      /* D5 */
	assert_int_equal(flit_rel_rx_expected(rx), 6);
	assert_int_equal(flit_rel_rx_deadline(rx), 0);
	r.fail_deliver_at = 0;
	assert_int_equal(flit_rel_rx_timer(rx, 40, n, 8, &k), 0);
	assert_int_equal(k, 0);
	assert_int_equal(flit_rel_rx_deadline(rx), UINT64_MAX);
	assert_string_equal(evs(&r), "D0+1 D1+1 D2+1 D3+1 D4+1 D5+1");
	flit_rel_rx_free(rx);
}

static void rx_loss_error_is_returned_and_delivery_resumes(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	r.fail_loss_at = 1;
	rx_put(rx, 0, 1, 0);
	rx_put(rx, 2, 1, 0);
	rx_put(rx, 4, 1, 0);
	struct flit_seq_range ncf[] = { R(1, 1, FLIT_NCF_GONE), R(3, 1, FLIT_NCF_GONE) };
	assert_int_equal(flit_rel_rx_ncf(rx, ncf, 2, 0), -EPIPE);
	assert_string_equal(evs(&r), "D0+1 L1+1");
	assert_int_equal(flit_rel_rx_deadline(rx), 0);
	/* any call resumes: here a duplicate frame */
	assert_int_equal(rx_put(rx, 0, 1, 0), 3);
	assert_string_equal(evs(&r), "D2+1 L3+1 D4+1");
	assert_int_equal(flit_rel_rx_expected(rx), 5);
	struct flit_rel_rx_stats st;
	flit_rel_rx_stats(rx, &st);
	assert_int_equal(st.loss_events, 2);
	flit_rel_rx_free(rx);
}

static void rx_refuses_calls_from_its_callbacks(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	r.reenter = true;
	assert_int_equal(rx_put(rx, 0, 1, 0), 1);
	assert_int_equal(r.reenter_ret, -EBUSY);
	assert_string_equal(evs(&r), "D0+1");
	assert_int_equal(flit_rel_rx_expected(rx), 1);
	flit_rel_rx_free(rx);
}

static void rx_free_releases_held_frames(void **state)
{
	(void)state;
	struct rec r;
	struct flit_rel_rx *rx = rx_mk(&RXCFG, 4, &r);
	rx_put(rx, 0, 1, 0);
	for (uint64_t s = 2; s < 200; s += 3)
		rx_put(rx, s, 2, 0);
	flit_rel_rx_free(rx);  /* ASan checks for leaks */
}

/* ==== randomized end-to-end property ====================================== */

struct simcfg {
	const char *name;
	unsigned loss_pm;      /* data and heartbeat loss, per mille */
	unsigned dup_pm;       /* duplication */
	unsigned ctl_loss_pm;  /* NAK / NCF loss */
	uint64_t delay_ns, jitter_ns, send_gap_ns;
	uint64_t burst_frames, pause_ns;  /* idle pause_ns after each burst */
	unsigned receivers;
	struct flit_rel_tx_cfg tx;
	struct flit_rel_rx_cfg rx;
	bool expect_no_loss;
	bool expect_loss;
};

enum { P_DATA, P_HB, P_NAK, P_NCF, P_PEER_NAK };

struct pkt {
	uint64_t at, order;
	int kind, dst;         /* dst: receiver index (-1: the source) */
	uint64_t seq, trail;   /* DATA: seq, count; HB: next, trail */
	uint32_t count;
	unsigned n;            /* NAK/NCF ranges */
	size_t len;
	struct pkt *next_free;
	uint64_t body[FLIT_CTL_RANGES_MAX * sizeof(struct flit_seq_range) / 8];
};

struct sim;

struct simrx {
	struct sim *sim;
	struct flit_rel_rx *rx;
	uint64_t cursor;       /* everything below: delivered or lost */
	uint64_t lost;
	bool bad;
	char why[160];
};

#define SIM_RX_MAX 3

struct sim {
	const struct simcfg *c;
	uint64_t rng, now, order;
	struct pkt **heap;
	size_t hn, hcap;
	struct pkt *free_pkts;  /* recycled: the sim sends ~10^6 packets */
	struct flit_rel_tx *tx;
	struct simrx r[SIM_RX_MAX];
	uint64_t total;
};

static uint64_t min_t(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t sim_rand(struct sim *s)
{
	uint64_t x = s->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

static bool sim_chance(struct sim *s, unsigned pm)
{
	return sim_rand(s) % 1000 < pm;
}

static bool pkt_before(const struct pkt *a, const struct pkt *b)
{
	return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static void heap_push(struct sim *s, struct pkt *p)
{
	if (s->hn == s->hcap) {
		s->hcap = s->hcap ? s->hcap * 2 : 1024;
		s->heap = realloc(s->heap, s->hcap * sizeof(*s->heap));
		assert_non_null(s->heap);
	}
	size_t i = s->hn++;
	while (i && pkt_before(p, s->heap[(i - 1) / 2])) {
		s->heap[i] = s->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	s->heap[i] = p;
}

static struct pkt *heap_pop(struct sim *s)
{
	struct pkt *top = s->heap[0], *last = s->heap[--s->hn];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= s->hn)
			break;
		if (c + 1 < s->hn && pkt_before(s->heap[c + 1], s->heap[c]))
			c++;
		if (!pkt_before(s->heap[c], last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (s->hn)
		s->heap[i] = last;
	return top;
}

/* Put copies of a packet on the wire to dst: lost, duplicated, jittered
 * (which reorders packets sent within the jitter of each other). */
static void sim_send(struct sim *s, const struct pkt *tmpl, const void *body,
		     size_t blen, int dst, unsigned loss_pm)
{
	if (sim_chance(s, loss_pm))
		return;
	int copies = 1 + sim_chance(s, s->c->dup_pm);
	for (int i = 0; i < copies; i++) {
		assert_true(blen <= sizeof(tmpl->body));
		struct pkt *p = s->free_pkts;
		if (p)
			s->free_pkts = p->next_free;
		else
			p = malloc(sizeof(*p));
		assert_non_null(p);
		memcpy(p, tmpl, offsetof(struct pkt, body));
		p->dst = dst;
		p->len = blen;
		p->at = s->now + s->c->delay_ns + sim_rand(s) % (s->c->jitter_ns + 1);
		p->order = s->order++;
		if (blen)
			memcpy(p->body, body, blen);
		heap_push(s, p);
	}
}

static void sim_multicast(struct sim *s, const struct pkt *tmpl, const void *body,
			  size_t blen, unsigned loss_pm)
{
	for (unsigned i = 0; i < s->c->receivers; i++)
		sim_send(s, tmpl, body, blen, (int)i, loss_pm);
}

static int sim_deliver(void *arg, const void *frame, size_t len)
{
	struct simrx *r = arg;
	struct flit_frame_hdr h;
	if (r->bad)
		return 0;
	if (!frame_ok(frame, len, &h)) {
		r->bad = true;
		snprintf(r->why, sizeof(r->why), "bad frame delivered at %llu",
			 (unsigned long long)r->cursor);
	} else if (h.seq > r->cursor || h.seq + h.count <= r->cursor) {
		r->bad = true;
		snprintf(r->why, sizeof(r->why), "frame [%llu, %llu) delivered at %llu",
			 (unsigned long long)h.seq, (unsigned long long)(h.seq + h.count),
			 (unsigned long long)r->cursor);
	} else {
		r->cursor = h.seq + h.count;
	}
	return 1;
}

static int sim_loss(void *arg, uint64_t first, uint64_t n)
{
	struct simrx *r = arg;
	if (r->bad)
		return 0;
	if (first != r->cursor || !n) {
		r->bad = true;
		snprintf(r->why, sizeof(r->why), "loss [%llu, +%llu) reported at %llu",
			 (unsigned long long)first, (unsigned long long)n,
			 (unsigned long long)r->cursor);
		return 0;
	}
	r->cursor += n;
	r->lost += n;
	return 1;
}

struct simres {
	uint64_t lost[SIM_RX_MAX];
	uint64_t retx_frames, ncf_gone, sim_ns;
	struct flit_rel_rx_stats rst[SIM_RX_MAX];
};

static void sim_handle(struct sim *s, struct pkt *p, uint64_t *retx_at)
{
	struct flit_seq_range rr[FLIT_CTL_RANGES_MAX], ncf[FLIT_CTL_RANGES_MAX];
	int ret = 0;

	if (p->kind == P_NAK) {  /* at the source */
		memcpy(rr, p->body, p->n * sizeof(*rr));
		unsigned k = flit_rel_tx_nak(s->tx, rr, p->n, s->now, ncf, FLIT_CTL_RANGES_MAX);
		if (k) {
			struct pkt t = { .kind = P_NCF, .n = k };
			sim_multicast(s, &t, ncf, k * sizeof(*ncf), s->c->ctl_loss_pm);
		}
		*retx_at = s->now;
		return;
	}
	struct flit_rel_rx *rx = s->r[p->dst].rx;
	switch (p->kind) {
	case P_DATA:
		ret = flit_rel_rx_data(rx, p->body, p->len, p->seq, p->count, s->now);
		break;
	case P_HB:
		ret = flit_rel_rx_hb(rx, p->seq, p->trail, s->now);
		break;
	case P_NCF:
	case P_PEER_NAK:
		memcpy(rr, p->body, p->n * sizeof(*rr));
		for (unsigned i = 0; p->kind == P_PEER_NAK && i < p->n; i++)
			rr[i].status = FLIT_NCF_RETX;
		ret = flit_rel_rx_ncf(rx, rr, p->n, s->now);
		break;
	}
	if (ret < 0)
		fail_msg("%s: receiver %d: call failed: %d", s->c->name, p->dst, ret);
}

static void sim_run(const struct simcfg *c, uint64_t seed, uint64_t total,
		    struct simres *res)
{
	struct sim s = { .c = c, .rng = seed * 0x9e3779b97f4a7c15ull + 1, .total = total };
	uint64_t frame[64];
	uint64_t sent = 0, frames = 0, next_send = 0, retx_at = UINT64_MAX;
	struct flit_seq_range naks[FLIT_CTL_RANGES_MAX];

	assert_true(c->receivers <= SIM_RX_MAX);
	assert_int_equal(flit_rel_tx_new(&c->tx, 0, &s.tx), 0);
	for (unsigned i = 0; i < c->receivers; i++) {
		s.r[i].sim = &s;
		assert_int_equal(flit_rel_rx_new(&c->rx, seed * 31 + i, sim_deliver, sim_loss,
						 &s.r[i], &s.r[i].rx), 0);
		flit_rel_rx_start(s.r[i].rx, 0);  /* as the core does on resolve */
	}

	for (uint64_t iter = 0;; iter++) {
		bool done = sent == total;
		for (unsigned i = 0; i < c->receivers; i++) {
			if (s.r[i].bad)
				fail_msg("%s seed %llu: receiver %u: %s", c->name,
					 (unsigned long long)seed, i, s.r[i].why);
			done = done && s.r[i].cursor == total;
		}
		if (done)
			break;
		if (s.now > 600ull * 1000000000ull || iter > 50000000)
			fail_msg("%s seed %llu: stuck at %llu ns (cursor %llu of %llu)", c->name,
				 (unsigned long long)seed, (unsigned long long)s.now,
				 (unsigned long long)s.r[0].cursor, (unsigned long long)total);

		/* the next thing to happen */
		uint64_t t = UINT64_MAX;
		if (sent < total)
			t = next_send;
		if (s.hn)
			t = min_t(t, s.heap[0]->at);
		t = min_t(t, flit_rel_tx_hb_due(s.tx));
		t = min_t(t, retx_at);
		for (unsigned i = 0; i < c->receivers; i++)
			t = min_t(t, flit_rel_rx_deadline(s.r[i].rx));
		if (t > s.now)
			s.now = t;

		if (sent < total && next_send <= s.now) {
			unsigned count = 1 + (unsigned)(sim_rand(&s) % 8);
			if (count > total - sent)
				count = (unsigned)(total - sent);
			size_t len = mkframe(frame, sent, count);
			assert_int_equal(flit_rel_tx_sent(s.tx, frame, len, sent, count, s.now), 0);
			struct pkt tp = { .kind = P_DATA, .seq = sent, .count = count };
			sim_multicast(&s, &tp, frame, len, c->loss_pm);
			sent += count;
			next_send = s.now + 1 + sim_rand(&s) % (2 * c->send_gap_ns);
			if (++frames % c->burst_frames == 0)
				next_send += c->pause_ns;
		}
		while (s.hn && s.heap[0]->at <= s.now) {
			struct pkt *p = heap_pop(&s);
			sim_handle(&s, p, &retx_at);
			p->next_free = s.free_pkts;
			s.free_pkts = p;
		}
		if (flit_rel_tx_hb_due(s.tx) <= s.now) {
			struct pkt tp = { .kind = P_HB, .seq = flit_rel_tx_next(s.tx),
					  .trail = flit_rel_tx_trail(s.tx, s.now) };
			sim_multicast(&s, &tp, NULL, 0, c->loss_pm);
			flit_rel_tx_hb_sent(s.tx, s.now);
		}
		if (retx_at <= s.now) {
			const void *f;
			size_t len;
			uint64_t wait;
			while ((f = flit_rel_tx_retx_next(s.tx, s.now, &len, &wait))) {
				struct flit_frame_hdr h;
				assert_int_equal(flit_frame_validate(f, len, &h), FLIT_FE_OK);
				assert_true(h.flags & FLIT_FF_RETX);
				struct pkt tp = { .kind = P_DATA, .seq = h.seq, .count = h.count };
				sim_multicast(&s, &tp, f, len, c->loss_pm);
			}
			retx_at = wait == UINT64_MAX ? UINT64_MAX : s.now + wait;
		}
		for (unsigned i = 0; i < c->receivers; i++) {
			if (flit_rel_rx_deadline(s.r[i].rx) > s.now)
				continue;
			unsigned k;
			int ret = flit_rel_rx_timer(s.r[i].rx, s.now, naks, FLIT_CTL_RANGES_MAX, &k);
			if (ret < 0)
				fail_msg("%s: timer failed: %d", c->name, ret);
			if (!k)
				continue;
			struct pkt tp = { .kind = P_NAK, .n = k };
			sim_send(&s, &tp, naks, k * sizeof(*naks), -1, c->ctl_loss_pm);
			tp.kind = P_PEER_NAK;
			for (unsigned j = 0; j < c->receivers; j++)
				if (j != i)
					sim_send(&s, &tp, naks, k * sizeof(*naks), (int)j,
						 c->ctl_loss_pm);
		}
	}

	struct flit_rel_tx_stats ts;
	flit_rel_tx_stats(s.tx, &ts);
	res->retx_frames = ts.retx_frames;
	res->ncf_gone = ts.ncf_gone;
	res->sim_ns = s.now;
	for (unsigned i = 0; i < c->receivers; i++) {
		assert_int_equal(flit_rel_rx_expected(s.r[i].rx), total);
		res->lost[i] = s.r[i].lost;
		flit_rel_rx_stats(s.r[i].rx, &res->rst[i]);
		assert_int_equal(res->rst[i].msgs_unrecoverable, s.r[i].lost);
		flit_rel_rx_free(s.r[i].rx);
	}
	while (s.hn)
		free(heap_pop(&s));
	while (s.free_pkts) {
		struct pkt *p = s.free_pkts;
		s.free_pkts = p->next_free;
		free(p);
	}
	free(s.heap);
	flit_rel_tx_free(s.tx);
}

#define MS 1000000ull

static const struct simcfg SIMS[] = {
	{
		/* default-like settings over a 5 % lossy link: nothing lost */
		.name = "5% loss, defaults", .loss_pm = 50, .dup_pm = 50, .ctl_loss_pm = 50,
		.delay_ns = 50000, .jitter_ns = 20000, .send_gap_ns = 5000,
		.burst_frames = 2000, .pause_ns = 20 * MS, .receivers = 2,
		.tx = { .retain_bytes = 16u << 20, .retain_ns = 10000 * MS,
			.retx_rate = 50u << 20, .hb_min_ns = 5 * MS, .hb_max_ns = 500 * MS },
		.rx = { .nak_backoff_ns = 2 * MS, .nak_interval_ns = 10 * MS,
			.nak_timeout_ns = 2000 * MS, .reorder_bytes = 8u << 20 },
		.expect_no_loss = true,
	},
	{
		/* 20 % loss of everything, same settings */
		.name = "20% loss, defaults", .loss_pm = 200, .dup_pm = 50, .ctl_loss_pm = 200,
		.delay_ns = 50000, .jitter_ns = 20000, .send_gap_ns = 5000,
		.burst_frames = 2000, .pause_ns = 20 * MS, .receivers = 2,
		.tx = { .retain_bytes = 16u << 20, .retain_ns = 10000 * MS,
			.retx_rate = 50u << 20, .hb_min_ns = 5 * MS, .hb_max_ns = 500 * MS },
		.rx = { .nak_backoff_ns = 2 * MS, .nak_interval_ns = 10 * MS,
			.nak_timeout_ns = 2000 * MS, .reorder_bytes = 8u << 20 },
	},
	{
		/* 20 % loss with tight retention (size and age), reorder buffer,
		 * timeout and retransmission rate: losses are reported through
		 * every path (GONE, heartbeat trail, timeout, reorder limit) */
		.name = "20% loss, tight", .loss_pm = 200, .dup_pm = 50, .ctl_loss_pm = 200,
		.delay_ns = 50000, .jitter_ns = 30000, .send_gap_ns = 5000,
		.burst_frames = 1000, .pause_ns = 10 * MS, .receivers = 3,
		.tx = { .retain_bytes = 64 * KiB, .retain_ns = 5 * MS,
			.retx_rate = 8u << 20, .hb_min_ns = 1 * MS, .hb_max_ns = 20 * MS },
		.rx = { .nak_backoff_ns = 2 * MS, .nak_interval_ns = 5 * MS,
			.nak_timeout_ns = 15 * MS, .reorder_bytes = 40 * KiB },
		.expect_loss = true,
	},
};

static void rx_tx_random_channel_delivers_everything_once_in_order_or_reports_loss(void **state)
{
	(void)state;
	const uint64_t total = 100000;
	for (size_t i = 0; i < sizeof(SIMS) / sizeof(SIMS[0]); i++) {
		const struct simcfg *c = &SIMS[i];
		for (uint64_t seed = 1; seed <= 3; seed++) {
			struct simres res = { 0 };
			sim_run(c, seed, total, &res);
			uint64_t lost = 0;
			for (unsigned k = 0; k < c->receivers; k++)
				lost += res.lost[k];
			print_message("%-20s seed %llu: %.3f s simulated, %llu retx, lost %llu "
				      "(%llu gaps, %llu repaired, %llu NAK ranges, %llu suppressed, %llu dups)\n",
				      c->name, (unsigned long long)seed, res.sim_ns / 1e9,
				      (unsigned long long)res.retx_frames, (unsigned long long)lost,
				      (unsigned long long)res.rst[0].gaps_opened,
				      (unsigned long long)res.rst[0].gaps_repaired,
				      (unsigned long long)res.rst[0].naks_ranges,
				      (unsigned long long)res.rst[0].naks_suppressed,
				      (unsigned long long)res.rst[0].duplicates);
			assert_true(res.retx_frames > 0);
			if (c->expect_no_loss)
				assert_int_equal(lost, 0);
			if (c->expect_loss)
				assert_true(lost > 0);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rl_unlimited_always_takes_and_never_waits),
		cmocka_unit_test(rl_starts_full_and_refills_at_rate),
		cmocka_unit_test(rl_burst_caps_the_bucket),
		cmocka_unit_test(rl_wait_is_time_until_the_units_are_there),
		cmocka_unit_test(rl_take_larger_than_burst_needs_a_full_bucket),
		cmocka_unit_test(tx_new_rejects_bad_config),
		cmocka_unit_test(tx_first_frame_sets_the_start_then_frames_must_follow),
		cmocka_unit_test(tx_start_sets_the_first_seq),
		cmocka_unit_test(tx_evicts_oldest_frames_by_size),
		cmocka_unit_test(tx_evicts_frames_older_than_retain_ns),
		cmocka_unit_test(tx_frame_larger_than_retention_is_not_retained),
		cmocka_unit_test(tx_nak_splits_ranges_into_gone_retx_future),
		cmocka_unit_test(tx_duplicate_nak_does_not_queue_a_frame_twice),
		cmocka_unit_test(tx_retransmissions_are_paced_by_the_rate_limit),
		cmocka_unit_test(tx_retx_burst_grows_to_the_largest_frame),
		cmocka_unit_test(tx_retx_frame_is_the_original_plus_retx_flag),
		cmocka_unit_test(tx_retx_skips_frames_evicted_while_queued),
		cmocka_unit_test(tx_retx_queue_drops_entries_of_evicted_frames_when_full),
		cmocka_unit_test(tx_heartbeat_backs_off_from_min_to_max),
		cmocka_unit_test(tx_heartbeat_resets_to_min_after_data),
		cmocka_unit_test(rx_new_rejects_bad_config),
		cmocka_unit_test(rx_rejects_bad_frames),
		cmocka_unit_test(rx_delivers_in_order_frames_at_once),
		cmocka_unit_test(rx_skip_needs_its_callback_and_a_range),
		cmocka_unit_test(rx_skip_in_order_moves_on_without_a_nak),
		cmocka_unit_test(rx_skip_fills_a_gap_and_releases_what_was_held),
		cmocka_unit_test(rx_skip_ahead_is_held_until_its_turn),
		cmocka_unit_test(rx_starts_at_the_first_frame_or_at_start),
		cmocka_unit_test(rx_single_gap_is_naked_after_backoff_and_repaired_in_order),
		cmocka_unit_test(rx_first_nak_time_is_uniform_within_backoff),
		cmocka_unit_test(rx_many_gaps_are_naked_in_one_timer_call_as_separate_ranges),
		cmocka_unit_test(rx_adjacent_gaps_go_out_as_one_range),
		cmocka_unit_test(rx_frame_inside_a_gap_splits_it),
		cmocka_unit_test(rx_renaks_after_the_interval),
		cmocka_unit_test(rx_gives_up_after_timeout_reporting_loss_before_later_frames),
		cmocka_unit_test(rx_ncf_retx_suppresses_nak_until_the_interval_passes),
		cmocka_unit_test(rx_ncf_retx_suppresses_only_the_overlapping_part),
		cmocka_unit_test(rx_ncf_gone_gives_up_at_once),
		cmocka_unit_test(rx_ncf_gone_behind_an_open_gap_waits_its_turn),
		cmocka_unit_test(rx_ncf_future_is_ignored),
		cmocka_unit_test(rx_heartbeat_detects_tail_loss),
		cmocka_unit_test(rx_heartbeat_starts_a_receiver_at_next),
		cmocka_unit_test(rx_heartbeat_trail_above_expected_gives_up_below_it),
		cmocka_unit_test(rx_drops_and_counts_duplicates),
		cmocka_unit_test(rx_delivers_a_frame_straddling_expected),
		cmocka_unit_test(rx_reorder_bytes_limit_gives_up_the_oldest_gap),
		cmocka_unit_test(rx_gap_cap_gives_up_the_oldest_gap),
		cmocka_unit_test(rx_nak_cap_leaves_the_rest_due),
		cmocka_unit_test(rx_huge_gap_is_naked_in_u32_ranges),
		cmocka_unit_test(rx_deliver_error_is_returned_and_delivery_resumes),
		cmocka_unit_test(rx_error_while_resuming_is_returned_by_any_call),
		cmocka_unit_test(rx_loss_error_is_returned_and_delivery_resumes),
		cmocka_unit_test(rx_refuses_calls_from_its_callbacks),
		cmocka_unit_test(rx_free_releases_held_frames),
		cmocka_unit_test(rx_tx_random_channel_delivers_everything_once_in_order_or_reports_loss),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
