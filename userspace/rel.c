// SPDX-License-Identifier: BSD-2-Clause
/*
 * Reliability in the manner of LBT-RM (rel.h): token bucket, source-side
 * retention / NAK answering / retransmission queue / heartbeat schedule, and
 * the receiver's reorder buffer, gap list and NAK timers.
 *
 * Nothing here reads a clock, sleeps, locks or prints: every time is the
 * caller's `now`, errors go to the error trail (flit_err).
 *
 * Source data structures
 *   retention  a ring (power-of-two array) of {seq, count, time, len, copy}
 *              in sequence order and without holes: [trail, next).  O(1)
 *              append and evict, O(log n) lookup by seq (binary search over
 *              the ring's logical indexes).  Each frame is one malloc'ed
 *              copy, so a pointer handed out stays put until it is evicted.
 *   retx queue a FIFO ring of frame seqs, the same capacity as the retention
 *              ring; a retained frame is queued at most once (its `queued`
 *              flag).  Entries of frames evicted meanwhile are skipped when
 *              popped, and dropped by a compaction when the ring is full, so
 *              live entries <= retained frames <= capacity always.
 *
 * Receiver data structures
 *   held       frames received ahead of a gap: an array sorted by (seq, end)
 *              with a movable front, so the usual operations (append at the
 *              tail, pop at the front) are O(1) and an insert in the middle
 *              moves the shorter side.
 *   gaps       the missing set [expected, high) minus the held frames, as a
 *              sorted array (same layout) of disjoint {first, end, opened_at,
 *              next_nak_at, naks_sent, abandoned}.  New gaps only ever open
 *              at the tail; a frame inside a gap trims or splits it.
 *              Invariant: if there is a gap, the first one starts at
 *              `expected` once the ready held frames were delivered; held
 *              frames never cover a missing seq.
 *
 * Giving up (timeout, NCF GONE, heartbeat trail, reorder_bytes, gap cap)
 * marks gaps `abandoned`; rx_advance() then reports the abandoned gaps at
 * the front as loss (adjacent ones in one call) and delivers the held frames
 * behind them, in sequence order.  An abandoned gap behind a gap still open
 * waits (no more NAKs) until it reaches the front, so loss and delivery
 * callbacks always run in sequence order.
 *
 * Callback errors: a frame or loss range is consumed before its callback
 * runs, so a failing callback is never called again for the same frame or
 * range (each message is delivered or reported lost exactly once); the call
 * returns the error and the remaining work (held frames that became in
 * order, abandoned gaps at the front) is resumed by the next call on the
 * receiver; flit_rel_rx_deadline() returns 0 meanwhile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "error.h"
#include "rel.h"

#define RL_SCALE 1000000000ull
/* Most gaps a receiver tracks; beyond it the oldest is given up. */
#define REL_GAPS_MAX 4096u
/* Smallest retention buffer (bytes) and retransmission burst. */
#define REL_RETAIN_MIN (64u * 1024u)

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* ---- token bucket ------------------------------------------------------- */

static uint64_t rl_cap(const struct flit_ratelimit *rl)
{
	return sat_mul(rl->burst, RL_SCALE);
}

/* Tokens (scaled) the bucket holds at now. */
static uint64_t rl_level(const struct flit_ratelimit *rl, uint64_t now)
{
	uint64_t t = rl->tokens, cap = rl_cap(rl);

	if (now > rl->last_ns)
		t = sat_add(t, sat_mul(now - rl->last_ns, rl->rate));
	return min_u64(t, cap);
}

/* Scaled tokens a take of `units` needs: a take larger than the bucket
 * needs a full bucket. */
static uint64_t rl_need(const struct flit_ratelimit *rl, uint64_t units)
{
	return units > rl->burst ? rl_cap(rl) : sat_mul(units, RL_SCALE);
}

void flit_rl_init(struct flit_ratelimit *rl, uint64_t rate, uint64_t burst,
		  uint64_t now)
{
	rl->rate = rate;
	rl->burst = burst;
	rl->last_ns = now;
	rl->tokens = rl_cap(rl);
}

bool flit_rl_take(struct flit_ratelimit *rl, uint64_t units, uint64_t now)
{
	if (!rl->rate)
		return true;
	uint64_t t = rl_level(rl, now), need = rl_need(rl, units);
	rl->tokens = t;
	if (now > rl->last_ns)
		rl->last_ns = now;
	if (t < need)
		return false;
	rl->tokens = t - need;
	return true;
}

uint64_t flit_rl_wait(const struct flit_ratelimit *rl, uint64_t units,
		      uint64_t now)
{
	if (!rl->rate)
		return 0;
	uint64_t t = rl_level(rl, now), need = rl_need(rl, units);
	if (t >= need)
		return 0;
	uint64_t d = need - t;
	return d / rl->rate + (d % rl->rate != 0);
}

/* ---- source side -------------------------------------------------------- */

struct tx_frame {
	uint64_t seq;
	uint64_t time;
	uint8_t *buf;
	size_t len;
	uint32_t count;
	bool queued;     /* in the retransmission queue */
};

struct flit_rel_tx {
	struct flit_rel_tx_cfg cfg;
	/* retention ring: frames [trail, next) */
	struct tx_frame *ring;
	size_t cap, head, n;     /* cap is a power of two (or 0) */
	uint64_t bytes;          /* sum of retained lengths */
	/* retransmission queue: seqs of queued frames, capacity cap */
	uint64_t *q;
	size_t qhead, qn;
	uint64_t next;
	bool started;
	size_t max_len;
	struct flit_ratelimit rl;
	uint64_t hb_base, hb_ival;
	struct flit_rel_tx_stats st;
};

static inline struct tx_frame *txf(const struct flit_rel_tx *tx, size_t i)
{
	return &tx->ring[(tx->head + i) & (tx->cap - 1)];
}

static inline uint64_t *txq(const struct flit_rel_tx *tx, size_t i)
{
	return &tx->q[(tx->qhead + i) & (tx->cap - 1)];
}

int flit_rel_tx_new(const struct flit_rel_tx_cfg *cfg, uint64_t now,
		    struct flit_rel_tx **out)
{
	*out = NULL;
	if (!cfg)
		return flit_err(EINVAL, "rel tx: no config");
	if (cfg->retain_bytes < REL_RETAIN_MIN)
		return flit_err(EINVAL, "rel tx: retain_bytes %llu below %u",
				(unsigned long long)cfg->retain_bytes, REL_RETAIN_MIN);
	if (!cfg->retain_ns || !cfg->hb_min_ns || cfg->hb_max_ns < cfg->hb_min_ns)
		return flit_err(EINVAL, "rel tx: need retain_ns > 0 and 0 < hb_min_ns <= hb_max_ns");

	struct flit_rel_tx *tx = calloc(1, sizeof(*tx));
	if (!tx)
		return flit_err(ENOMEM, "rel tx: allocating state");
	tx->cfg = *cfg;
	flit_rl_init(&tx->rl, cfg->retx_rate, REL_RETAIN_MIN, now);
	tx->hb_base = now;
	tx->hb_ival = cfg->hb_min_ns;
	*out = tx;
	return 0;
}

void flit_rel_tx_free(struct flit_rel_tx *tx)
{
	if (!tx)
		return;
	for (size_t i = 0; i < tx->n; i++)
		free(txf(tx, i)->buf);
	free(tx->ring);
	free(tx->q);
	free(tx);
}

static void tx_evict_one(struct flit_rel_tx *tx)
{
	struct tx_frame *f = txf(tx, 0);
	free(f->buf);
	f->buf = NULL;
	tx->bytes -= f->len;
	tx->head = (tx->head + 1) & (tx->cap - 1);
	tx->n--;
	tx->st.evicted_frames++;
}

static void tx_evict_age(struct flit_rel_tx *tx, uint64_t now)
{
	while (tx->n && now > sat_add(txf(tx, 0)->time, tx->cfg.retain_ns))
		tx_evict_one(tx);
}

static uint64_t tx_trail(const struct flit_rel_tx *tx)
{
	return tx->n ? txf(tx, 0)->seq : tx->next;
}

/* Room for one more retained frame (and queue entry). */
static int tx_grow(struct flit_rel_tx *tx)
{
	if (tx->n < tx->cap)
		return 0;
	size_t ncap = tx->cap ? tx->cap * 2 : 64;
	struct tx_frame *ring = malloc(ncap * sizeof(*ring));
	uint64_t *q = malloc(ncap * sizeof(*q));
	if (!ring || !q) {
		free(ring);
		free(q);
		return -ENOMEM;
	}
	for (size_t i = 0; i < tx->n; i++)
		ring[i] = *txf(tx, i);
	for (size_t i = 0; i < tx->qn; i++)
		q[i] = *txq(tx, i);
	free(tx->ring);
	free(tx->q);
	tx->ring = ring;
	tx->q = q;
	tx->cap = ncap;
	tx->head = 0;
	tx->qhead = 0;
	return 0;
}

int flit_rel_tx_sent(struct flit_rel_tx *tx, const void *frame, size_t len,
		     uint64_t seq, uint32_t count, uint64_t now)
{
	uint64_t end;

	if (!frame || !len || !count || __builtin_add_overflow(seq, (uint64_t)count, &end))
		return flit_err(EINVAL, "rel tx: bad frame (len %zu, seq %llu, count %u)",
				len, (unsigned long long)seq, count);
	if (tx->started && seq != tx->next)
		return flit_err(EINVAL, "rel tx: frame seq %llu out of order (next %llu)",
				(unsigned long long)seq, (unsigned long long)tx->next);

	tx_evict_age(tx, now);
	tx->hb_base = now;
	tx->hb_ival = tx->cfg.hb_min_ns;
	tx->started = true;
	tx->next = end;

	uint8_t *copy = NULL;
	int err = 0;
	if (len <= tx->cfg.retain_bytes) {
		err = tx_grow(tx);
		if (!err) {
			copy = malloc(len);
			if (!copy)
				err = -ENOMEM;
		}
	}
	if (!copy) {
		/* Not retained: everything older goes too, so that the
		 * retention stays [trail, next) without holes. */
		while (tx->n)
			tx_evict_one(tx);
		tx->st.evicted_frames++;
		return err ? flit_err(-err, "rel tx: retaining a %zu-byte frame", len) : 0;
	}
	memcpy(copy, frame, len);
	while (tx->n && tx->bytes + len > tx->cfg.retain_bytes)
		tx_evict_one(tx);
	struct tx_frame *f = txf(tx, tx->n);
	*f = (struct tx_frame){ .seq = seq, .time = now, .buf = copy, .len = len,
				.count = count, .queued = false };
	tx->n++;
	tx->bytes += len;
	if (len > tx->max_len) {
		tx->max_len = len;
		if (len > tx->rl.burst)
			tx->rl.burst = len;
	}
	return 0;
}

uint64_t flit_rel_tx_next(const struct flit_rel_tx *tx)
{
	return tx->next;
}

void flit_rel_tx_start(struct flit_rel_tx *tx, uint64_t seq)
{
	if (tx->started)
		return;
	tx->started = true;
	tx->next = seq;
}

uint64_t flit_rel_tx_trail(struct flit_rel_tx *tx, uint64_t now)
{
	tx_evict_age(tx, now);
	return tx_trail(tx);
}

/* Index of the retained frame holding seq s (tx->n if none). */
static size_t tx_find(const struct flit_rel_tx *tx, uint64_t s)
{
	size_t lo = 0, hi = tx->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (txf(tx, mid)->seq <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return tx->n;
	struct tx_frame *f = txf(tx, lo - 1);
	return s - f->seq < f->count ? lo - 1 : tx->n;
}

/* Drop queue entries of frames no longer retained. */
static void tx_q_compact(struct flit_rel_tx *tx)
{
	uint64_t trail = tx_trail(tx);
	size_t k = 0;

	for (size_t i = 0; i < tx->qn; i++) {
		uint64_t s = *txq(tx, i);
		if (s >= trail)
			*txq(tx, k++) = s;
	}
	tx->qn = k;
}

/* Queue the frames covering [a, b), all retained. */
static void tx_queue(struct flit_rel_tx *tx, uint64_t a, uint64_t b)
{
	for (size_t i = tx_find(tx, a); i < tx->n; i++) {
		struct tx_frame *f = txf(tx, i);
		if (f->seq >= b)
			break;
		if (f->queued) {
			tx->st.retx_dup_ignored++;
			continue;
		}
		if (tx->qn == tx->cap)
			tx_q_compact(tx);
		if (tx->qn == tx->cap)  /* cannot happen: live entries <= n */
			break;
		f->queued = true;
		*txq(tx, tx->qn++) = f->seq;
	}
}

static void ncf_put(struct flit_seq_range *ncf, unsigned cap, unsigned *k,
		    uint64_t a, uint64_t b, uint32_t status)
{
	if (*k < cap)
		ncf[(*k)++] = (struct flit_seq_range){ .first = a,
			.n = (uint32_t)(b - a), .status = status };
}

unsigned flit_rel_tx_nak(struct flit_rel_tx *tx,
			 const struct flit_seq_range *nak, unsigned n,
			 uint64_t now, struct flit_seq_range *ncf,
			 unsigned ncf_cap)
{
	unsigned k = 0;

	tx->st.naks_received++;
	tx->st.ranges_received += n;
	tx_evict_age(tx, now);
	uint64_t trail = tx_trail(tx), next = tx->next;

	for (unsigned i = 0; i < n; i++) {
		if (!nak[i].n)
			continue;
		uint64_t a = nak[i].first, b = sat_add(a, nak[i].n);
		if (a < trail) {
			uint64_t e = min_u64(b, trail);
			ncf_put(ncf, ncf_cap, &k, a, e, FLIT_NCF_GONE);
			tx->st.ncf_gone++;
		}
		uint64_t ra = max_u64(a, trail), rb = min_u64(b, next);
		if (ra < rb) {
			tx_queue(tx, ra, rb);
			ncf_put(ncf, ncf_cap, &k, ra, rb, FLIT_NCF_RETX);
		}
		if (b > next) {
			ncf_put(ncf, ncf_cap, &k, max_u64(a, next), b, FLIT_NCF_FUTURE);
			tx->st.ncf_future++;
		}
	}
	return k;
}

const void *flit_rel_tx_retx_next(struct flit_rel_tx *tx, uint64_t now,
				  size_t *len, uint64_t *wait_ns)
{
	tx_evict_age(tx, now);
	while (tx->qn) {
		size_t i = tx_find(tx, *txq(tx, 0));
		if (i == tx->n) {  /* evicted while queued */
			tx->qhead = (tx->qhead + 1) & (tx->cap - 1);
			tx->qn--;
			continue;
		}
		struct tx_frame *f = txf(tx, i);
		if (!flit_rl_take(&tx->rl, f->len, now)) {
			if (wait_ns)
				*wait_ns = flit_rl_wait(&tx->rl, f->len, now);
			return NULL;
		}
		tx->qhead = (tx->qhead + 1) & (tx->cap - 1);
		tx->qn--;
		f->queued = false;
		if (f->len >= 6)
			flit_st16(f->buf + 4, (uint16_t)(flit_ld16(f->buf + 4) | FLIT_FF_RETX));
		tx->st.retx_frames++;
		tx->st.retx_bytes += f->len;
		if (len)
			*len = f->len;
		if (wait_ns)
			*wait_ns = 0;
		return f->buf;
	}
	if (wait_ns)
		*wait_ns = UINT64_MAX;
	return NULL;
}

uint64_t flit_rel_tx_hb_due(const struct flit_rel_tx *tx)
{
	return sat_add(tx->hb_base, tx->hb_ival);
}

void flit_rel_tx_hb_sent(struct flit_rel_tx *tx, uint64_t now)
{
	tx->hb_base = now;
	tx->hb_ival = min_u64(sat_mul(tx->hb_ival, 2), tx->cfg.hb_max_ns);
}

void flit_rel_tx_stats(const struct flit_rel_tx *tx,
		       struct flit_rel_tx_stats *out)
{
	*out = tx->st;
}

/* ---- receiver side ------------------------------------------------------ */

/* An array kept in order, with a movable front (see the top comment). */
struct vec {
	void *base;
	size_t off, n, cap;  /* elements [off, off + n) of cap are used */
};

struct rx_gap {
	uint64_t first, end;     /* missing [first, end) */
	uint64_t opened_at;
	uint64_t next_nak_at;
	uint32_t naks_sent;
	bool abandoned;          /* given up, loss not reported yet */
};

struct rx_held {
	uint64_t seq, end;
	uint8_t *buf;
	size_t len;
};

struct flit_rel_rx {
	struct flit_rel_rx_cfg cfg;
	flit_rel_deliver_fn deliver;
	flit_rel_loss_fn loss;
	flit_rel_skip_fn skip;
	void *arg;
	uint64_t rng;
	bool started;
	bool pending;   /* a callback failed: resume delivery on the next call */
	bool in_cb;
	uint64_t expected;
	uint64_t high;  /* end of the known sequence space (>= expected) */
	struct vec gaps, held;
	uint64_t held_bytes;
	struct flit_rel_rx_stats st;
};

/* Make sure one element can be appended at the back. */
static int vec_room(struct vec *v, size_t esz)
{
	if (v->off + v->n < v->cap)
		return 0;
	if (v->n < v->cap / 2) {
		memmove(v->base, (char *)v->base + v->off * esz, v->n * esz);
		v->off = 0;
		return 0;
	}
	size_t ncap = v->cap ? v->cap * 2 : 16;
	char *nb = malloc(ncap * esz);
	if (!nb)
		return -ENOMEM;
	if (v->n)
		memcpy(nb, (char *)v->base + v->off * esz, v->n * esz);
	free(v->base);
	v->base = nb;
	v->off = 0;
	v->cap = ncap;
	return 0;
}

/* Open a slot at index i (moving the shorter side); -ENOMEM. */
static int vec_insert(struct vec *v, size_t esz, size_t i)
{
	char *b;

	if (v->off && i < v->n - i) {
		b = (char *)v->base + v->off * esz;
		memmove(b - esz, b, i * esz);
		v->off--;
	} else {
		if (vec_room(v, esz))
			return -ENOMEM;
		b = (char *)v->base + v->off * esz;
		memmove(b + (i + 1) * esz, b + i * esz, (v->n - i) * esz);
	}
	v->n++;
	return 0;
}

/* Remove k elements at index i. */
static void vec_remove(struct vec *v, size_t esz, size_t i, size_t k)
{
	if (i == 0) {
		v->off += k;
	} else {
		char *b = (char *)v->base + v->off * esz;
		memmove(b + i * esz, b + (i + k) * esz, (v->n - i - k) * esz);
	}
	v->n -= k;
	if (!v->n)
		v->off = 0;
}

static inline struct rx_gap *gap(const struct flit_rel_rx *rx, size_t i)
{
	return &((struct rx_gap *)rx->gaps.base)[rx->gaps.off + i];
}

static inline struct rx_held *held(const struct flit_rel_rx *rx, size_t i)
{
	return &((struct rx_held *)rx->held.base)[rx->held.off + i];
}

/* xorshift64* */
static uint64_t rx_rand(struct flit_rel_rx *rx)
{
	uint64_t x = rx->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rx->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, max]. */
static uint64_t rx_uniform(struct flit_rel_rx *rx, uint64_t max)
{
	if (!max)
		return 0;
	uint64_t r = rx_rand(rx);
	return max == UINT64_MAX ? r : r % (max + 1);
}

int flit_rel_rx_new(const struct flit_rel_rx_cfg *cfg, uint64_t seed,
		    flit_rel_deliver_fn deliver, flit_rel_loss_fn loss,
		    void *arg, struct flit_rel_rx **out)
{
	*out = NULL;
	if (!cfg || !deliver || !loss)
		return flit_err(EINVAL, "rel rx: config and callbacks are required");
	if (!cfg->nak_interval_ns || !cfg->nak_timeout_ns || !cfg->reorder_bytes)
		return flit_err(EINVAL, "rel rx: nak_interval_ns, nak_timeout_ns and reorder_bytes must be > 0");

	struct flit_rel_rx *rx = calloc(1, sizeof(*rx));
	if (!rx)
		return flit_err(ENOMEM, "rel rx: allocating state");
	rx->cfg = *cfg;
	rx->deliver = deliver;
	rx->loss = loss;
	rx->arg = arg;
	/* splitmix64 of the seed: any seed (0 too) gives a nonzero state */
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	rx->rng = z ? z : 0x9e3779b97f4a7c15ull;
	*out = rx;
	return 0;
}

void flit_rel_rx_free(struct flit_rel_rx *rx)
{
	if (!rx)
		return;
	for (size_t i = 0; i < rx->held.n; i++)
		free(held(rx, i)->buf);
	free(rx->held.base);
	free(rx->gaps.base);
	free(rx);
}

void flit_rel_rx_on_skip(struct flit_rel_rx *rx, flit_rel_skip_fn skip)
{
	rx->skip = skip;
}

void flit_rel_rx_start(struct flit_rel_rx *rx, uint64_t seq)
{
	if (rx->started)
		return;
	rx->started = true;
	rx->expected = rx->high = seq;
}

bool flit_rel_rx_started(const struct flit_rel_rx *rx)
{
	return rx->started;
}

uint64_t flit_rel_rx_expected(const struct flit_rel_rx *rx)
{
	return rx->expected;
}

/* Index of the first gap ending after s. */
static size_t gap_after(const struct flit_rel_rx *rx, uint64_t s)
{
	size_t lo = 0, hi = rx->gaps.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (gap(rx, mid)->end <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool gap_overlaps(const struct flit_rel_rx *rx, uint64_t a, uint64_t b)
{
	size_t i = gap_after(rx, a);
	return i < rx->gaps.n && gap(rx, i)->first < b;
}

/* Append the gap [first, end) (first >= every gap's end). */
static int gap_open(struct flit_rel_rx *rx, uint64_t first, uint64_t end,
		    uint64_t now)
{
	if (vec_insert(&rx->gaps, sizeof(struct rx_gap), rx->gaps.n))
		return -ENOMEM;
	*gap(rx, rx->gaps.n - 1) = (struct rx_gap){
		.first = first, .end = end, .opened_at = now,
		.next_nak_at = sat_add(now, rx_uniform(rx, rx->cfg.nak_backoff_ns)),
	};
	rx->st.gaps_opened++;
	return 0;
}

/* If x lies strictly inside a gap, split it there; -ENOMEM (unchanged). */
static int gap_split_at(struct flit_rel_rx *rx, uint64_t x)
{
	size_t i = gap_after(rx, x);
	if (i == rx->gaps.n || gap(rx, i)->first >= x)
		return 0;
	if (vec_insert(&rx->gaps, sizeof(struct rx_gap), i + 1))
		return -ENOMEM;
	struct rx_gap *g = gap(rx, i), *h = gap(rx, i + 1);
	*h = *g;
	h->first = x;
	g->end = x;
	return 0;
}

/* [s, e) arrived: remove it from the missing set.  Needs room for one
 * insert when a frame may land strictly inside a gap. */
static int gap_fill(struct flit_rel_rx *rx, uint64_t s, uint64_t e)
{
	size_t i = gap_after(rx, s);

	while (i < rx->gaps.n && gap(rx, i)->first < e) {
		struct rx_gap *g = gap(rx, i);
		if (s <= g->first && e >= g->end) {
			vec_remove(&rx->gaps, sizeof(struct rx_gap), i, 1);
			rx->st.gaps_repaired++;
		} else if (s <= g->first) {
			g->first = e;
			break;
		} else if (e >= g->end) {
			g->end = s;
			i++;
		} else {
			if (gap_split_at(rx, e))
				return -ENOMEM;
			gap(rx, i)->end = s;
			break;
		}
	}
	return 0;
}

static int rx_call_deliver(struct flit_rel_rx *rx, const void *frame, size_t len)
{
	rx->in_cb = true;
	int r = rx->deliver(rx->arg, frame, len);
	rx->in_cb = false;
	return r;
}

static int rx_call_loss(struct flit_rel_rx *rx, uint64_t first, uint64_t n)
{
	rx->in_cb = true;
	int r = rx->loss(rx->arg, first, n);
	rx->in_cb = false;
	return r;
}

static int rx_call_skip(struct flit_rel_rx *rx, uint64_t first, uint64_t n)
{
	rx->st.msgs_skipped += n;
	rx->in_cb = true;
	int r = rx->skip(rx->arg, first, n);
	rx->in_cb = false;
	return r;
}

static int ev_add(int ev, int r)
{
	return r > INT32_MAX - ev ? INT32_MAX : ev + r;
}

/* Deliver the held frames that are in order and give up the abandoned gaps
 * at the front, in sequence order.  Returns events or a callback's error
 * (the work left stays pending). */
static int rx_advance(struct flit_rel_rx *rx)
{
	int ev = 0, r;

	rx->pending = true;
	for (;;) {
		while (rx->held.n && held(rx, 0)->seq <= rx->expected) {
			struct rx_held h = *held(rx, 0);
			vec_remove(&rx->held, sizeof(struct rx_held), 0, 1);
			rx->held_bytes -= h.len;
			if (h.end <= rx->expected) {
				/* overtaken by an overlapping frame */
				rx->st.duplicates += h.buf != NULL;
				free(h.buf);
				continue;
			}
			uint64_t from = rx->expected;
			rx->expected = h.end;
			r = h.buf ? rx_call_deliver(rx, h.buf, h.len) :
				    rx_call_skip(rx, from, h.end - from);
			free(h.buf);
			if (r < 0)
				return r;
			ev = ev_add(ev, r);
		}
		if (!rx->gaps.n || !gap(rx, 0)->abandoned)
			break;
		/* the front gap starts at expected: report it and the
		 * abandoned gaps adjacent to it as one range */
		size_t k = 1;
		while (k < rx->gaps.n && gap(rx, k)->abandoned &&
		       gap(rx, k)->first == gap(rx, k - 1)->end)
			k++;
		uint64_t first = gap(rx, 0)->first, end = gap(rx, k - 1)->end;
		vec_remove(&rx->gaps, sizeof(struct rx_gap), 0, k);
		rx->expected = end;
		rx->st.msgs_unrecoverable += end - first;
		rx->st.loss_events++;
		r = rx_call_loss(rx, first, end - first);
		if (r < 0)
			return r;
		ev = ev_add(ev, r);
	}
	rx->pending = false;
	return ev;
}

/* Finish a call: enforce the gap cap and reorder_bytes (giving up the
 * oldest gaps), deliver what became in order. */
static int rx_settle(struct flit_rel_rx *rx, int ev)
{
	for (;;) {
		if (rx->pending || (rx->gaps.n && gap(rx, 0)->abandoned) ||
		    (rx->held.n && held(rx, 0)->seq <= rx->expected)) {
			int r = rx_advance(rx);
			if (r < 0)
				return r;
			ev = ev_add(ev, r);
		}
		if (rx->gaps.n > REL_GAPS_MAX ||
		    (rx->gaps.n && rx->held_bytes > rx->cfg.reorder_bytes)) {
			gap(rx, 0)->abandoned = true;
			continue;
		}
		return ev;
	}
}

/* Common entry: refuse re-entry from a callback, resume pending work. */
static int rx_enter(struct flit_rel_rx *rx, const char *what)
{
	if (rx->in_cb)
		return flit_err(EBUSY, "rel rx: %s called from a delivery callback", what);
	if (!rx->pending)
		return 0;
	return rx_advance(rx);
}

/* Messages [seq, end) arrived: in a frame (deliver it), or frame NULL:
 * dropped before us as messages nobody here wants (skip them). */
static int rx_take(struct flit_rel_rx *rx, const void *frame, size_t len,
		   uint64_t seq, uint64_t end, uint64_t now)
{
	int ev, r;

	ev = rx_enter(rx, frame ? "flit_rel_rx_data" : "flit_rel_rx_skip");
	if (ev < 0)
		return ev;
	if (!rx->started) {
		if (!frame)
			return ev;  /* nothing to start from */
		flit_rel_rx_start(rx, seq);
	}

	if (end <= rx->expected) {
		if (frame)
			rx->st.duplicates++;
		return ev;
	}
	if (seq <= rx->expected) {
		/* in order: no gap can start before expected, so this only
		 * trims or removes gaps (no split, no allocation) */
		if (gap_fill(rx, seq, end))
			return flit_err(ENOMEM, "rel rx: gap list");
		uint64_t from = rx->expected;
		rx->high = max_u64(rx->high, end);
		rx->expected = end;
		r = frame ? rx_call_deliver(rx, frame, len) : rx_call_skip(rx, from, end - from);
		if (r < 0) {
			rx->pending = true;
			return r;
		}
		ev = ev_add(ev, r);
		if (!rx->held.n && !rx->gaps.n)
			return ev;
		return rx_settle(rx, ev);
	}

	/* ahead of expected: hold it, unless it brings nothing missing */
	if (end <= rx->high && !gap_overlaps(rx, seq, end)) {
		if (frame)
			rx->st.duplicates++;
		return ev;
	}
	if (vec_room(&rx->gaps, sizeof(struct rx_gap)) ||
	    vec_room(&rx->held, sizeof(struct rx_held)))
		return flit_err(ENOMEM, "rel rx: holding a frame");
	uint8_t *copy = NULL;
	if (frame) {
		copy = malloc(len);
		if (!copy)
			return flit_err(ENOMEM, "rel rx: holding a %zu-byte frame", len);
		memcpy(copy, frame, len);
	} else {
		len = sizeof(struct rx_held); /* what it costs: reorder_bytes bounds it */
	}

	/* Either a gap opens at the tail (seq > high: nothing to fill) or
	 * [seq, end) may split one gap: one insert at most, room reserved. */
	if (seq > rx->high)
		r = gap_open(rx, rx->high, seq, now);
	else
		r = gap_fill(rx, seq, end);
	if (r) {  /* not reached: room was reserved */
		free(copy);
		return flit_err(ENOMEM, "rel rx: gap list");
	}
	rx->high = max_u64(rx->high, end);

	size_t lo = 0, hi = rx->held.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct rx_held *h = held(rx, mid);
		if (h->seq < seq || (h->seq == seq && h->end <= end))
			lo = mid + 1;
		else
			hi = mid;
	}
	vec_insert(&rx->held, sizeof(struct rx_held), lo);  /* room reserved */
	*held(rx, lo) = (struct rx_held){ .seq = seq, .end = end, .buf = copy, .len = len };
	rx->held_bytes += len;
	if (frame)
		rx->st.frames_held++;
	return rx_settle(rx, ev);
}

int flit_rel_rx_data(struct flit_rel_rx *rx, const void *frame, size_t len,
		     uint64_t seq, uint32_t count, uint64_t now)
{
	uint64_t end;

	if (!frame || !len || !count || __builtin_add_overflow(seq, (uint64_t)count, &end))
		return flit_err(EINVAL, "rel rx: bad frame (len %zu, seq %llu, count %u)",
				len, (unsigned long long)seq, count);
	return rx_take(rx, frame, len, seq, end, now);
}

int flit_rel_rx_skip(struct flit_rel_rx *rx, uint64_t seq, uint32_t count, uint64_t now)
{
	uint64_t end;

	if (!rx->skip || !count || __builtin_add_overflow(seq, (uint64_t)count, &end))
		return flit_err(EINVAL, "rel rx: bad skip (seq %llu, count %u%s)",
				(unsigned long long)seq, count,
				rx->skip ? "" : ", no skip callback");
	return rx_take(rx, NULL, 0, seq, end, now);
}

/* Give up every missing seq below x. */
static int rx_abandon_below(struct flit_rel_rx *rx, uint64_t x)
{
	if (gap_split_at(rx, x))
		return -ENOMEM;
	for (size_t i = 0; i < rx->gaps.n && gap(rx, i)->end <= x; i++)
		gap(rx, i)->abandoned = true;
	return 0;
}

int flit_rel_rx_hb(struct flit_rel_rx *rx, uint64_t next, uint64_t trail,
		   uint64_t now)
{
	int ev = rx_enter(rx, "flit_rel_rx_hb");
	if (ev < 0)
		return ev;
	if (!rx->started) {
		flit_rel_rx_start(rx, next);
		return ev;
	}
	trail = min_u64(trail, next);
	if (next > rx->high) {
		if (gap_open(rx, rx->high, next, now))
			return flit_err(ENOMEM, "rel rx: gap list");
		rx->high = next;
	}
	if (trail > rx->expected && rx_abandon_below(rx, trail))
		return flit_err(ENOMEM, "rel rx: gap list");
	return rx_settle(rx, ev);
}

int flit_rel_rx_ncf(struct flit_rel_rx *rx, const struct flit_seq_range *r,
		    unsigned n, uint64_t now)
{
	int ev = rx_enter(rx, "flit_rel_rx_ncf"), err = 0;
	if (ev < 0)
		return ev;
	if (!rx->started)
		return ev;
	uint64_t defer = sat_add(now, rx->cfg.nak_interval_ns);

	for (unsigned k = 0; k < n && !err; k++) {
		if (!r[k].n || (r[k].status != FLIT_NCF_RETX && r[k].status != FLIT_NCF_GONE))
			continue;
		uint64_t a = max_u64(r[k].first, rx->expected);
		uint64_t b = min_u64(sat_add(r[k].first, r[k].n), rx->high);
		if (a >= b || !gap_overlaps(rx, a, b))
			continue;
		if (r[k].status == FLIT_NCF_GONE) {
			err = gap_split_at(rx, a) ? -ENOMEM : gap_split_at(rx, b);
			for (size_t i = gap_after(rx, a);
			     !err && i < rx->gaps.n && gap(rx, i)->first < b; i++)
				gap(rx, i)->abandoned = true;
			continue;
		}
		/* RETX: split only the gaps whose NAK actually moves */
		for (size_t i = gap_after(rx, a);
		     !err && i < rx->gaps.n && gap(rx, i)->first < b; i++) {
			struct rx_gap *g = gap(rx, i);
			if (g->abandoned || g->next_nak_at >= defer)
				continue;
			if (g->first < a) {
				err = gap_split_at(rx, a);
				continue;  /* the part from a is next */
			}
			if (g->end > b && (err = gap_split_at(rx, b)))
				break;
			gap(rx, i)->next_nak_at = defer;
			rx->st.naks_suppressed++;
		}
	}
	/* on -ENOMEM the ranges before are applied: settle them anyway */
	ev = rx_settle(rx, ev);
	if (ev >= 0 && err)
		return flit_err(ENOMEM, "rel rx: gap list");
	return ev;
}

int flit_rel_rx_timer(struct flit_rel_rx *rx, uint64_t now,
		      struct flit_seq_range *naks, unsigned cap,
		      unsigned *n_naks)
{
	unsigned out = 0;

	*n_naks = 0;
	int ev = rx_enter(rx, "flit_rel_rx_timer");
	if (ev < 0)
		return ev;
	for (size_t i = 0; i < rx->gaps.n; i++) {
		struct rx_gap *g = gap(rx, i);
		if (now >= sat_add(g->opened_at, rx->cfg.nak_timeout_ns))
			g->abandoned = true;
	}
	ev = rx_settle(rx, ev);
	if (ev < 0 || !cap)
		return ev;

	/* NAK the due gaps in sequence order, adjacent ones in one range */
	for (size_t i = 0; i < rx->gaps.n; i++) {
		struct rx_gap *g = gap(rx, i);
		if (g->abandoned || g->next_nak_at > now)
			continue;
		unsigned first_out = out;
		uint64_t a = g->first;
		while (a < g->end) {
			struct flit_seq_range *last = out ? &naks[out - 1] : NULL;
			uint64_t left = g->end - a;
			if (last && last->first + last->n == a && last->n < UINT32_MAX) {
				uint64_t add = min_u64(left, UINT32_MAX - last->n);
				last->n += (uint32_t)add;
				a += add;
			} else if (out < cap) {
				uint32_t k = (uint32_t)min_u64(left, UINT32_MAX);
				naks[out++] = (struct flit_seq_range){ .first = a, .n = k };
				a += k;
			} else {
				break;
			}
		}
		/* A gap is rescheduled once all of it went out; one too big
		 * for a whole NAK alone is sent in part and rescheduled. */
		if (a == g->end || first_out == 0) {
			g->naks_sent++;
			g->next_nak_at = sat_add(sat_add(now, rx->cfg.nak_interval_ns),
						 rx_uniform(rx, rx->cfg.nak_interval_ns / 2));
		}
		if (a < g->end)
			break;
	}
	rx->st.naks_ranges += out;
	*n_naks = out;
	return ev;
}

uint64_t flit_rel_rx_deadline(const struct flit_rel_rx *rx)
{
	uint64_t d = UINT64_MAX;

	if (rx->pending)
		return 0;
	for (size_t i = 0; i < rx->gaps.n; i++) {
		const struct rx_gap *g = gap(rx, i);
		if (g->abandoned)
			continue;
		d = min_u64(d, g->next_nak_at);
		d = min_u64(d, sat_add(g->opened_at, rx->cfg.nak_timeout_ns));
	}
	return d;
}

void flit_rel_rx_stats(const struct flit_rel_rx *rx,
		       struct flit_rel_rx_stats *out)
{
	*out = rx->st;
}
