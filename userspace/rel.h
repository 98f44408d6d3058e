/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Reliability in the manner of LBT-RM, independent of any socket: the udp
 * transport uses it now and the xdp transport reuses it unchanged.  Time is
 * passed in (CLOCK_MONOTONIC ns), so every rule is unit-testable.
 *
 * Sequence numbers count messages; a DATA frame carries messages
 * [seq, seq + count).  Frames are retained, NAKed and retransmitted whole,
 * so a retransmission is byte-for-byte the original frame (plus
 * FLIT_FF_RETX).
 *
 * Source (flit_rel_tx): keeps sent frames in a bounded retention buffer
 * (bytes and age), answers NAKs with NCF ranges (RETX / GONE / FUTURE) and
 * a queue of frames to retransmit that a token bucket paces, and schedules
 * heartbeats whose interval doubles from hb_min to hb_max while the source
 * is idle, so receivers see loss at the tail.
 *
 * Receiver (flit_rel_rx), one per session: delivers frames once and in
 * order through deliver(); holds frames that arrive ahead of a gap (bounded
 * by reorder_bytes); NAKs each gap after a random backoff, again every
 * nak_interval while it stays open, and gives up after nak_timeout by
 * calling loss(first, n) before delivering what follows.  An NCF (or another
 * receiver's NAK heard on the group) with RETX suppresses our NAK for those
 * ranges for one nak_interval; GONE gives up on them at once.  Many gaps are
 * tracked and NAKed concurrently (at most 4096: beyond that the oldest is
 * given up, so a hostile sender cannot exhaust memory).
 *
 * Loss and delivery callbacks always run in sequence order: a gap given up
 * (GONE, timeout) behind a gap still open is reported when it reaches the
 * front; adjacent gaps given up together are reported as one range.
 */
#ifndef FLIT_REL_H
#define FLIT_REL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl.h"

/* ---- token bucket (data and retransmission rate limits) ---------------- */

struct flit_ratelimit {
	uint64_t rate;    /* units per second; 0 = unlimited */
	uint64_t burst;   /* bucket depth in units (>= the largest take) */
	uint64_t tokens;  /* scaled by 1e9 to keep integer precision */
	uint64_t last_ns;
};

/* The bucket starts full. */
void flit_rl_init(struct flit_ratelimit *rl, uint64_t rate, uint64_t burst,
		  uint64_t now);
/* Take `units` if the bucket holds them now (refilled for the time since the
 * last call); true if taken.  Unlimited buckets always succeed.  A take
 * larger than burst succeeds once the bucket is full. */
bool flit_rl_take(struct flit_ratelimit *rl, uint64_t units, uint64_t now);
/* ns until `units` could be taken (0 = now). */
uint64_t flit_rl_wait(const struct flit_ratelimit *rl, uint64_t units,
		      uint64_t now);

/* ---- source side -------------------------------------------------------- */

struct flit_rel_tx_cfg {
	uint64_t retain_bytes;  /* retention buffer: frame bytes kept (>= 64K) */
	uint64_t retain_ns;     /* and their maximum age */
	uint64_t retx_rate;     /* retransmission limit, bytes/s (0: none) */
	uint64_t hb_min_ns;     /* first heartbeat this long after the last data */
	uint64_t hb_max_ns;     /* interval doubles up to this while idle */
};

struct flit_rel_tx_stats {
	uint64_t naks_received;   /* NAK frames given to flit_rel_tx_nak */
	uint64_t ranges_received;
	uint64_t retx_frames;     /* frames handed out for retransmission */
	uint64_t retx_bytes;
	uint64_t retx_dup_ignored;/* NAKed frames already queued */
	uint64_t ncf_gone;        /* ranges answered GONE (even past ncf_cap) */
	uint64_t ncf_future;      /* ranges answered FUTURE (never sent) */
	uint64_t evicted_frames;  /* dropped from retention (size or age) */
};

struct flit_rel_tx;

/* NULL-safe free; new returns 0 or -errno (-EINVAL for a bad cfg:
 * retain_bytes < 64K, retain_ns == 0, hb_min_ns == 0 or hb_max_ns <
 * hb_min_ns).  The retransmission burst is max(64 KiB, largest frame). */
int flit_rel_tx_new(const struct flit_rel_tx_cfg *cfg, uint64_t now,
		    struct flit_rel_tx **out);
void flit_rel_tx_free(struct flit_rel_tx *tx);

/* A DATA frame of `count` messages starting at `seq` was sent: retain a copy
 * and restart the heartbeat backoff.  Frames must come in order without
 * gaps (seq == flit_rel_tx_next()), except the first one, which sets the
 * start (unless flit_rel_tx_start() set it: then it must match).  Oldest
 * frames are evicted to stay within retain_bytes.  A frame larger than
 * retain_bytes is not retained (counted as evicted), and neither are the
 * frames before it, so the retention stays [trail, next) without holes.
 * -EINVAL out of order (or count 0, seq + count overflowing): nothing
 * changes.  -ENOMEM: the frame is dropped from retention as if too large,
 * but next still advances past it. */
int flit_rel_tx_sent(struct flit_rel_tx *tx, const void *frame, size_t len,
		     uint64_t seq, uint32_t count, uint64_t now);
/* Next sequence number to be sent (0 before any frame unless started). */
uint64_t flit_rel_tx_next(const struct flit_rel_tx *tx);
/* Set the first sequence number before any frame was sent (ignored after). */
void flit_rel_tx_start(struct flit_rel_tx *tx, uint64_t seq);
/* Oldest retained sequence number after evicting frames older than
 * retain_ns (== next when nothing is retained). */
uint64_t flit_rel_tx_trail(struct flit_rel_tx *tx, uint64_t now);

/* Answer a NAK of n ranges: each range is split into the part below the
 * trail (GONE), the part in [trail, next) (RETX: the frames covering it are
 * queued for retransmission unless already queued), and the part >= next
 * (FUTURE).  Writes up to ncf_cap NCF ranges to ncf and returns how many;
 * frames are queued and stats counted for every range, written or not. */
unsigned flit_rel_tx_nak(struct flit_rel_tx *tx,
			 const struct flit_seq_range *nak, unsigned n,
			 uint64_t now, struct flit_seq_range *ncf,
			 unsigned ncf_cap);
/* The next queued retransmission, if the rate limit allows it now: returns
 * the retained frame (FLIT_FF_RETX set) and its length; the pointer is valid
 * until the next call on tx.  NULL when nothing can go now; *wait_ns is
 * then the time until the limiter allows the next one, or UINT64_MAX if the
 * queue is empty (0 when a frame is returned; len and wait_ns may be NULL).
 * Frames evicted (by size or age) while queued are skipped.  A frame handed
 * out may be queued again by a later NAK. */
const void *flit_rel_tx_retx_next(struct flit_rel_tx *tx, uint64_t now,
				  size_t *len, uint64_t *wait_ns);
/* When the next heartbeat is due (CLOCK_MONOTONIC ns). */
uint64_t flit_rel_tx_hb_due(const struct flit_rel_tx *tx);
/* A heartbeat went out now: double the interval (up to hb_max). */
void flit_rel_tx_hb_sent(struct flit_rel_tx *tx, uint64_t now);
void flit_rel_tx_stats(const struct flit_rel_tx *tx,
		       struct flit_rel_tx_stats *out);

/* ---- receiver side ------------------------------------------------------ */

struct flit_rel_rx_cfg {
	uint64_t nak_backoff_ns;  /* first NAK of a gap after uniform [0, this] */
	uint64_t nak_interval_ns; /* re-NAK an open gap after this (+ up to 1/2 random) */
	uint64_t nak_timeout_ns;  /* give up on a gap this long after it opened */
	uint64_t reorder_bytes;   /* frames held ahead of gaps; past it the
				   * oldest gap is given up */
};

struct flit_rel_rx_stats {
	uint64_t frames_held;     /* arrived ahead of a gap */
	uint64_t duplicates;      /* frames entirely already delivered or held */
	uint64_t gaps_opened;
	uint64_t gaps_repaired;   /* closed by (re)transmissions (the pieces of a
				   * gap split by a frame count one each) */
	uint64_t naks_ranges;     /* ranges put into NAKs */
	uint64_t naks_suppressed; /* NAKs deferred by an NCF or a peer's NAK
				   * (once per gap whose NAK time moved) */
	uint64_t msgs_unrecoverable;
	uint64_t loss_events;
	uint64_t msgs_skipped;    /* told dropped before us (flit_rel_rx_skip) */
};

/* Delivery callbacks; a negative return aborts the call that made it and
 * is returned from it.  Non-negative returns are summed (events).
 *
 * A frame or loss range is consumed before its callback runs, so a failing
 * callback is not called again for it (each message is delivered or
 * reported lost exactly once).  The work left (held frames now in order,
 * gaps given up) resumes at the start of the next data/hb/ncf/timer call,
 * before that call's own input; if resuming fails again, that input is not
 * looked at (a DATA frame is then recovered like a lost one).  Meanwhile
 * flit_rel_rx_deadline() returns 0.  Callbacks must not call data/hb/ncf/
 * timer on the same receiver (-EBUSY) nor free it. */
typedef int (*flit_rel_deliver_fn)(void *arg, const void *frame, size_t len);
typedef int (*flit_rel_loss_fn)(void *arg, uint64_t first, uint64_t n);
/* messages [first, first + n) were dropped before this receiver (nothing
 * here wants them): in order, where they would have been delivered */
typedef int (*flit_rel_skip_fn)(void *arg, uint64_t first, uint64_t n);

struct flit_rel_rx;

/* -EINVAL without callbacks or with nak_interval_ns, nak_timeout_ns or
 * reorder_bytes 0.  seed feeds the NAK timer jitter (any value, 0 too). */
int flit_rel_rx_new(const struct flit_rel_rx_cfg *cfg, uint64_t seed,
		    flit_rel_deliver_fn deliver, flit_rel_loss_fn loss,
		    void *arg, struct flit_rel_rx **out);
void flit_rel_rx_free(struct flit_rel_rx *rx);
/* The callback for flit_rel_rx_skip() (none: skips are refused). */
void flit_rel_rx_on_skip(struct flit_rel_rx *rx, flit_rel_skip_fn skip);

/* The first sequence number this receiver wants (the session's next seq at
 * the time it was resolved).  Without it, the first frame or heartbeat sets
 * the start (a heartbeat starts at its `next`).  Ignored once started. */
void flit_rel_rx_start(struct flit_rel_rx *rx, uint64_t seq);
bool flit_rel_rx_started(const struct flit_rel_rx *rx);
/* Next sequence number to deliver. */
uint64_t flit_rel_rx_expected(const struct flit_rel_rx *rx);

/* A DATA frame (already validated) of `count` messages from `seq`: in order
 * it is delivered at once, followed by held frames that are now in order;
 * ahead of a gap it is copied and held and the gap opened (NAK timer armed);
 * wholly behind or already held it is dropped as a duplicate.  A frame that
 * starts before expected but ends after it is delivered (the core drops the
 * messages already seen).  Returns events or -errno (-EINVAL for count 0 or
 * seq + count overflowing, -ENOMEM: the frame was not taken). */
int flit_rel_rx_data(struct flit_rel_rx *rx, const void *frame, size_t len,
		     uint64_t seq, uint32_t count, uint64_t now);
/* Messages [seq, seq + count) were dropped before this receiver, on
 * purpose (the XDP program's topic filter; none of them is wanted here):
 * they fill their place like a frame, and when they are in order the skip
 * callback is told the part not seen before, instead of a delivery.  No
 * NAK is sent for them.  Ignored before the receiver has started, and
 * where already delivered or held (not counted as duplicates).  Returns
 * events or -errno (-EINVAL: count 0, overflow, no skip callback). */
int flit_rel_rx_skip(struct flit_rel_rx *rx, uint64_t seq, uint32_t count, uint64_t now);
/* A heartbeat: messages [max(expected, held end), next) are missing (a gap
 * at the tail); messages missing below trail are unrecoverable now (a trail
 * above next is taken as next; a next below what was seen is ignored). */
int flit_rel_rx_hb(struct flit_rel_rx *rx, uint64_t next, uint64_t trail,
		   uint64_t now);
/* NCF ranges from the source, or NAK ranges of another receiver (pass them
 * with status FLIT_NCF_RETX): RETX suppresses, GONE gives up, FUTURE is
 * ignored.  Suppression moves a gap's next NAK to at least now +
 * nak_interval (splitting the gap where the range cuts it).  Returns events
 * or -errno. */
int flit_rel_rx_ncf(struct flit_rel_rx *rx, const struct flit_seq_range *r,
		    unsigned n, uint64_t now);
/* Run timers: gaps past nak_timeout are given up (loss, then what follows
 * is delivered); gaps whose NAK time came are written to naks (at most
 * cap, lowest sequence numbers first; the rest stay due) and rescheduled.
 * Adjacent missing messages go out as one range; a range holds at most
 * UINT32_MAX messages, so larger gaps take several (one too large for cap
 * ranges is NAKed in part).  *n_naks = ranges written.
 * Returns events or -errno. */
int flit_rel_rx_timer(struct flit_rel_rx *rx, uint64_t now,
		      struct flit_seq_range *naks, unsigned cap,
		      unsigned *n_naks);
/* Earliest timer (CLOCK_MONOTONIC ns), UINT64_MAX if none, 0 if work
 * interrupted by a callback error is pending. */
uint64_t flit_rel_rx_deadline(const struct flit_rel_rx *rx);
void flit_rel_rx_stats(const struct flit_rel_rx *rx,
		       struct flit_rel_rx_stats *out);

#endif /* FLIT_REL_H */
