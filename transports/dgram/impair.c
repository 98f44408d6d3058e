// SPDX-License-Identifier: BSD-2-Clause
/*
 * Receive-side impairment of a datagram path (see dgram.h): loss,
 * duplication and reordering, seeded, between a path's receive function and
 * the session layer, so that every path (kernel sockets, io_uring, AF_XDP)
 * is impaired the same way in tests.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "dgram/dgram.h"

/* Bounded retries when a fetch produced nothing deliverable (all dropped
 * by the impairment). */
#define RECV_TRIES    4
/* Reorder: a held datagram is let go after this many recv calls in which
 * nothing arrived. */
#define HOLD_IDLE_CALLS 3
/* Reorder: at most this many held back at once, and buffers for them plus
 * the ones handed out (views until the next call) in the same call. */
#define HOLD_MAX      8
#define HOLD_BUFS     (2 * HOLD_MAX)
enum { HB_FREE, HB_HELD, HB_VIEW };

/* A datagram held back by the reorder impairment. */
struct held {
	struct flit_dgram d;            /* d.buf: a copy in a hold buffer */
	unsigned left;                  /* deliveries to wait for; 0: due */
	unsigned buf;
};

struct flit_impair {
	struct flit_dgram_impair cfg;
	unsigned batch, stride;
	uint64_t rng;
	struct flit_impair_stats st;
	struct flit_dgram *raw;         /* last fetched batch, batch entries */
	unsigned raw_n, raw_i;          /* not yet processed: raw[raw_i..raw_n) */
	uint8_t *dupbuf;                /* batch copies, reused every call */
	unsigned dup_used;
	uint8_t *pendbuf[2];            /* a duplicate that did not fit in d[] */
	struct flit_dgram pend;
	bool pend_on;
	unsigned pend_sel;
	struct held held[HOLD_MAX];     /* in the order they were held */
	unsigned nheld;
	uint8_t *holdbuf;               /* HOLD_BUFS buffers */
	uint8_t hold_state[HOLD_BUFS];  /* HB_FREE, HB_HELD, HB_VIEW */
	unsigned idle;
	char desc[128];
};

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64* */
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* true with probability bp / 10000 */
static bool rng_bp(uint64_t *s, uint32_t bp)
{
	return (uint32_t)(((unsigned __int128)rng_next(s) * 10000u) >> 64) < bp;
}

static uint64_t seed_mix(uint64_t seed)
{
	/* splitmix64 step: any seed, 0 included, gives a non-zero state */
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 0x9e3779b97f4a7c15ull;
}

static void copy_dgram(struct flit_dgram *to, uint8_t *buf,
		       const struct flit_dgram *from)
{
	*to = *from;
	memcpy(buf, from->buf, from->len);
	to->buf = buf;
}

/* A datagram was delivered: every held one waits for one less. */
static void held_tick(struct flit_impair *im)
{
	for (unsigned i = 0; i < im->nheld; i++)
		if (im->held[i].left)
			im->held[i].left--;
}

/* Deliver the held datagrams that are due, oldest first, while there is
 * room; each delivery counts for the others. */
static void held_flush(struct flit_impair *im, struct flit_dgram *d, unsigned n, unsigned *out)
{
	while (*out < n) {
		unsigned i = 0;
		while (i < im->nheld && im->held[i].left)
			i++;
		if (i == im->nheld)
			return;
		d[(*out)++] = im->held[i].d;
		im->hold_state[im->held[i].buf] = HB_VIEW;
		memmove(&im->held[i], &im->held[i + 1], (im->nheld - i - 1) * sizeof(im->held[0]));
		im->nheld--;
		held_tick(im);
	}
}

/* Deliver g (a view that stays valid until the next call). */
static void deliver(struct flit_impair *im, struct flit_dgram *d, unsigned n, unsigned *out,
		    const struct flit_dgram *g)
{
	d[(*out)++] = *g;
	held_tick(im);
	held_flush(im, d, n, out);
}

/* Hold g back for 1..8 deliveries, if there is room for it. */
static bool hold(struct flit_impair *im, const struct flit_dgram *g)
{
	unsigned b = 0;
	/* drawn first, so that the random sequence does not depend on room */
	unsigned left = 1 + (unsigned)(rng_next(&im->rng) >> 61);
	if (im->nheld == HOLD_MAX)
		return false;
	while (b < HOLD_BUFS && im->hold_state[b] != HB_FREE)
		b++;
	if (b == HOLD_BUFS)
		return false;
	struct held *h = &im->held[im->nheld++];
	copy_dgram(&h->d, im->holdbuf + (size_t)b * im->stride, g);
	h->buf = b;
	h->left = left;
	im->hold_state[b] = HB_HELD;
	return true;
}

int flit_impair_recv(struct flit_impair *im, flit_dgram_recv_fn fn, void *arg,
		     struct flit_dgram *d, unsigned n)
{
	unsigned out = 0;
	int err = 0;

	/* the views of the last call expire now */
	im->dup_used = 0;
	for (unsigned b = 0; b < HOLD_BUFS; b++)
		if (im->hold_state[b] == HB_VIEW)
			im->hold_state[b] = HB_FREE;
	/* first what could not be delivered last time */
	if (im->pend_on) {
		im->pend_on = false;
		im->pend_sel ^= 1;   /* a view now; the next one goes in the other */
		deliver(im, d, n, &out, &im->pend);
	}
	held_flush(im, d, n, &out);

	/* Fetch from the backend only when its last batch is used up and no
	 * view into that batch went out in this call: the backend reuses its
	 * buffers on the next fetch.  Fetch again (bounded) while a batch
	 * yields nothing, so that 0 still means "nothing waiting". */
	bool raw_out = false, got_any = false;
	for (int tries = 0; out < n && tries < RECV_TRIES; tries++) {
		if (im->raw_i == im->raw_n) {
			if (raw_out)
				break;
			int r = fn(arg, im->raw, im->batch);
			if (r < 0) {
				err = r;
				break;
			}
			im->raw_n = (unsigned)r;
			im->raw_i = 0;
			if (!r) {
				/* nothing arrived: after a few such calls let
				 * the held ones go, so none is stuck */
				if (!got_any && im->nheld && ++im->idle >= HOLD_IDLE_CALLS) {
					for (unsigned i = 0; i < im->nheld; i++)
						im->held[i].left = 0;
					held_flush(im, d, n, &out);
					im->idle = 0;
				}
				break;
			}
			got_any = true;
			im->idle = 0;
		}
		while (out < n && im->raw_i < im->raw_n) {
			const struct flit_dgram *g = &im->raw[im->raw_i++];
			if (im->cfg.loss_bp && rng_bp(&im->rng, im->cfg.loss_bp)) {
				im->st.dropped++;
				continue;
			}
			if (im->cfg.reorder_bp && rng_bp(&im->rng, im->cfg.reorder_bp) &&
			    hold(im, g)) {
				im->st.reordered++;
				continue;
			}
			bool dup = im->cfg.dup_bp && rng_bp(&im->rng, im->cfg.dup_bp);
			raw_out = true;
			deliver(im, d, n, &out, g);
			if (!dup)
				continue;
			im->st.duplicated++;
			if (out < n) {
				struct flit_dgram c;
				copy_dgram(&c, im->dupbuf + (size_t)im->dup_used++ * im->stride, g);
				deliver(im, d, n, &out, &c);
			} else {
				copy_dgram(&im->pend, im->pendbuf[im->pend_sel], g);
				im->pend_on = true;
			}
		}
	}
	return out ? (int)out : err;
}

bool flit_dgram_impair_on(const struct flit_dgram_impair *cfg)
{
	return cfg->loss_bp || cfg->dup_bp || cfg->reorder_bp;
}

int flit_impair_open(const struct flit_dgram_impair *cfg, unsigned batch, unsigned dgram_max,
		     struct flit_impair **out)
{
	*out = NULL;
	if (cfg->loss_bp > 10000 || cfg->dup_bp > 10000 || cfg->reorder_bp > 10000)
		return flit_err(EINVAL, "impairment above 100%% (loss %u, dup %u, reorder %u in 1/100 %%)",
				cfg->loss_bp, cfg->dup_bp, cfg->reorder_bp);
	if (!batch || !dgram_max)
		return flit_err(EINVAL, "impairment: batch %u, dgram_max %u", batch, dgram_max);
	struct flit_impair *im = calloc(1, sizeof(*im));
	if (!im)
		return flit_err(ENOMEM, "impairment state");
	im->cfg = *cfg;
	im->batch = batch;
	im->stride = (dgram_max + 63u) & ~63u;
	im->rng = seed_mix(cfg->seed);
	im->raw = calloc(batch, sizeof(*im->raw));
	/* dup copies (batch), 2 pending, then the hold buffers */
	im->dupbuf = aligned_alloc(64, ((size_t)batch + 2 + HOLD_BUFS) * im->stride);
	if (!im->raw || !im->dupbuf) {
		flit_impair_close(im);
		return flit_err(ENOMEM, "impairment buffers");
	}
	uint8_t *p = im->dupbuf + (size_t)batch * im->stride;
	im->pendbuf[0] = p;
	im->pendbuf[1] = p + im->stride;
	im->holdbuf = p + 2 * (size_t)im->stride;
	snprintf(im->desc, sizeof(im->desc),
		 "impaired (loss %u.%02u%%, dup %u.%02u%%, reorder %u.%02u%%, seed %llu)",
		 cfg->loss_bp / 100, cfg->loss_bp % 100, cfg->dup_bp / 100, cfg->dup_bp % 100,
		 cfg->reorder_bp / 100, cfg->reorder_bp % 100, (unsigned long long)cfg->seed);
	*out = im;
	return 0;
}

void flit_impair_close(struct flit_impair *im)
{
	if (!im)
		return;
	free(im->raw);
	free(im->dupbuf);
	free(im);
}

void flit_impair_stats(const struct flit_impair *im, struct flit_impair_stats *out)
{
	*out = im->st;
}

const char *flit_impair_describe(const struct flit_impair *im)
{
	return im->desc;
}

/* ---- the spec ------------------------------------------------------------------ */

/* "12", "12.5", "12.34", optionally followed by '%': 0..100 -> basis points */
static bool parse_pct(const char *s, size_t len, uint32_t *bp)
{
	uint32_t ip = 0, frac = 0;
	size_t i = 0, digits = 0, fd = 0;

	if (len && s[len - 1] == '%')
		len--;
	while (i < len && s[i] >= '0' && s[i] <= '9') {
		ip = ip * 10 + (uint32_t)(s[i] - '0');
		if (ip > 100)
			return false;
		i++;
		digits++;
	}
	if (!digits)
		return false;
	if (i < len && s[i] == '.') {
		i++;
		while (i < len && s[i] >= '0' && s[i] <= '9' && fd < 2) {
			frac = frac * 10 + (uint32_t)(s[i] - '0');
			i++;
			fd++;
		}
		if (!fd)
			return false;
		if (fd == 1)
			frac *= 10;
	}
	if (i != len)
		return false;
	uint32_t v = ip * 100 + frac;
	if (v > 10000)
		return false;
	*bp = v;
	return true;
}

static bool parse_u64(const char *s, size_t len, uint64_t *v)
{
	uint64_t x = 0;
	if (!len || len > 20)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned dg = (unsigned)(s[i] - '0');
		if (x > (UINT64_MAX - dg) / 10)
			return false;
		x = x * 10 + dg;
	}
	*v = x;
	return true;
}

int flit_dgram_impair_parse(const char *s, struct flit_dgram_impair *out)
{
	struct flit_dgram_impair v = { 0 };
	unsigned seen = 0;

	if (!s || !out)
		return flit_err(EINVAL, "udp impairment: no %s", !s ? "string" : "result");
	const char *p = s;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *item = p;
		size_t ilen = len;
		/* trim blanks around the item */
		while (ilen && (*item == ' ' || *item == '\t')) {
			item++;
			ilen--;
		}
		while (ilen && (item[ilen - 1] == ' ' || item[ilen - 1] == '\t'))
			ilen--;
		const char *eq = memchr(item, '=', ilen);
		if (!ilen)
			return flit_err(EINVAL, "udp impairment \"%s\": empty item", s);
		if (!eq)
			return flit_err(EINVAL, "udp impairment \"%s\": item \"%.*s\" is not key=value",
					s, (int)ilen, item);
		size_t klen = (size_t)(eq - item);
		const char *val = eq + 1;
		size_t vlen = ilen - klen - 1;
		static const char *const keys[] = { "loss", "dup", "reorder", "seed" };
		unsigned k = 0;
		while (k < 4 && !(strlen(keys[k]) == klen && !memcmp(keys[k], item, klen)))
			k++;
		if (k == 4)
			return flit_err(EINVAL, "udp impairment \"%s\": unknown key in \"%.*s\" "
					"(known: loss, dup, reorder, seed)", s, (int)ilen, item);
		if (seen & (1u << k))
			return flit_err(EINVAL, "udp impairment \"%s\": \"%.*s\": %s given twice",
					s, (int)ilen, item, keys[k]);
		seen |= 1u << k;
		bool ok;
		switch (k) {
		case 0: ok = parse_pct(val, vlen, &v.loss_bp); break;
		case 1: ok = parse_pct(val, vlen, &v.dup_bp); break;
		case 2: ok = parse_pct(val, vlen, &v.reorder_bp); break;
		default: ok = parse_u64(val, vlen, &v.seed); break;
		}
		if (!ok)
			return flit_err(EINVAL, "udp impairment \"%s\": bad value in \"%.*s\" (%s)",
					s, (int)ilen, item,
					k == 3 ? "want an unsigned integer"
					       : "want a percentage 0..100 with up to two decimals");
		if (!end)
			break;
		p = end + 1;
		if (!*p)
			return flit_err(EINVAL, "udp impairment \"%s\": empty item after the last ','", s);
	}
	*out = v;
	return 0;
}
