// SPDX-License-Identifier: BSD-2-Clause
/*
 * The rdma transport: reliable-connected queue pairs set up with librdmacm,
 * one per (source, receiver), carrying the codec's frames.
 *
 * Source side.  A context that publishes over rdma listens with rdma_cm on
 * context.rdma.address:port.  A receiver connects with the topic it wants
 * (an FNV-1a 64 hash in the connect request's private data, with its
 * receive buffers: count = credits, size, and their address and rkey); the
 * context's connection thread (flit-rdma, asleep in poll() between CM
 * events) finds the source, creates the QP and accepts (private data: the
 * session, the address of the credit counter the receiver writes, the data
 * path).  Once established it posts an INFO frame (session, next sequence
 * number, topic) and adds the connection to the source's fan-out.  A send
 * builds its frame in a registered slot of the source's slot ring and posts
 * it to every connection: SEND into the receiver's next buffer, or RDMA
 * WRITE with immediate (the frame length) into the same buffer, by
 * source.rdma.mode; inline when it fits.  Sends are signalled every
 * slots/4 work requests; a slot is reused when every connection has
 * completed the frame that used it before.
 *
 * Flow control.  Each frame consumes one receive buffer.  The receiver
 * returns buffers by RDMA-writing a cumulative "freed" counter into the
 * source's memory (every depth/4 buffers, when the frames stop, and once a
 * second as a keepalive).  A source whose receiver has no buffer left (one is kept for
 * the END frame), or whose send queue or slot ring is full, polls its
 * completion queues once and then returns FLIT_BACK_PRESSURED: nothing is
 * sent to anyone (all or nothing, so no receiver sees a gap).  A slow
 * receiver slows its source; nothing is dropped.
 *
 * Receive side.  For each subscribed topic with receiver.rdma.static =
 * addr:port a receiver keeps one connection to the source context there,
 * driven from flit_ctx_poll() (rdma_cm events on a non-blocking channel,
 * looked at about every millisecond).  Completion queues are polled without a
 * system call; a buffer is re-posted once its frame has been delivered.
 * INFO starts the session (BOS); HB with FLIT_HBF_END ends it (EOS); a
 * disconnect, a failed work request or a silent peer ends it with
 * FLIT_MSGF_SOURCE_DIED after the frames already received are delivered.
 * Failed or lost connections are retried after receiver.rdma.retry_ms,
 * backing off to ten times that; the reason (no listener, no such topic,
 * unreachable) is logged once per change.
 *
 * Why SEND by default, not WRITE with immediate: docs/PROTOCOL.md, "RDMA
 * connections".  Verbs return positive error numbers (ibv_post_*) or -1 with
 * errno (librdmacm, ibv_create_*): converted here to -errno.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "core.h"
#include "ctl.h"
#include "rdma/rdma.h"

#define MS             1000000ull
#define HOUSE_NS       (1 * MS)    /* receive-side timers: CM events, reconnects */
#define KEEPALIVE_NS   (1000 * MS) /* a receiver rewrites its counter this often */
#define CM_TIMEOUT_MS  2000        /* address and route resolution */
#define CLOSE_WAIT_NS  (2000 * MS) /* a closing source waits for END completions */
#define MAX_DEVS       8
#define CTL_BYTES      512         /* INFO with a 255-byte topic: 312 */
#define SIG_RING       64          /* signalled sends outstanding per connection */
#define RX_SQ          32          /* receiver: credit writes outstanding */
#define CW_SLOTS       32
#define RX_BATCH       16
#define WRID_SEND      (1ull << 63) /* receiver: a credit write's completion */
/* Polls between two looks at the clock (timers: CM events, reconnects,
 * keepalives), so that a spinning receiver does not pay for a clock read
 * each time: 1024 polls are tens of microseconds on hardware, about a
 * millisecond under emulation (where a clock read is a 1.4 us system call:
 * the TCG guest's clocksource is the HPET).  Until a connection is up,
 * every IDLE_POLLS_CONNECTING. */
#define IDLE_POLLS     1024
#define IDLE_POLLS_CONNECTING 16

/* ---- wire: connection private data ------------------------------------------ */

uint64_t flit_rdma_topic_hash(const char *topic)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)topic; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

static void wire_hdr(uint8_t *p, uint8_t byte3)
{
	flit_st16(p, FLIT_RDMA_MAGIC);
	p[2] = FLIT_RDMA_VERSION;
	p[3] = byte3;
}

void flit_rdma_req_encode(uint8_t out[FLIT_RDMA_REQ_LEN], const struct flit_rdma_req *r)
{
	memset(out, 0, FLIT_RDMA_REQ_LEN);
	wire_hdr(out, r->flags);
	flit_st32(out + 4, r->domain);
	flit_st64(out + 8, r->topic_hash);
	flit_st32(out + 16, r->depth);
	flit_st32(out + 20, r->buf_size);
	flit_st64(out + 24, r->ring_addr);
	flit_st32(out + 32, r->ring_rkey);
	flit_st32(out + 36, r->sub_age_ms);
}

void flit_rdma_rep_encode(uint8_t out[FLIT_RDMA_REP_LEN], const struct flit_rdma_rep *r)
{
	memset(out, 0, FLIT_RDMA_REP_LEN);
	wire_hdr(out, r->mode);
	flit_st32(out + 4, r->session_id);
	flit_st64(out + 8, r->credit_addr);
	flit_st32(out + 16, r->credit_rkey);
	flit_st32(out + 20, r->frame_max);
	flit_st32(out + 24, r->depth);
	flit_st32(out + 28, r->late);
}

void flit_rdma_rej_encode(uint8_t out[FLIT_RDMA_REJ_LEN], const struct flit_rdma_rej_msg *r)
{
	memset(out, 0, FLIT_RDMA_REJ_LEN);
	wire_hdr(out, r->reason);
	flit_st32(out + 4, r->value);
}

static int wire_check(const uint8_t *p, size_t len, size_t need, unsigned *version)
{
	if (version)
		*version = 0;
	if (len < 4 || flit_ld16(p) != FLIT_RDMA_MAGIC)
		return -EPROTO;
	if (version)
		*version = p[2];
	if (p[2] != FLIT_RDMA_VERSION || len < need)
		return -EPROTO;
	return 0;
}

int flit_rdma_req_decode(const void *buf, size_t len, struct flit_rdma_req *r,
			 unsigned *version)
{
	const uint8_t *p = buf;
	int err = wire_check(p, len, FLIT_RDMA_REQ_LEN, version);

	if (err)
		return err;
	r->flags = p[3];
	r->domain = flit_ld32(p + 4);
	r->topic_hash = flit_ld64(p + 8);
	r->depth = flit_ld32(p + 16);
	r->buf_size = flit_ld32(p + 20);
	r->ring_addr = flit_ld64(p + 24);
	r->ring_rkey = flit_ld32(p + 32);
	r->sub_age_ms = flit_ld32(p + 36);
	if ((r->flags & ~(FLIT_RDMA_REQF_RING | FLIT_RDMA_REQF_LATE)) || r->depth < 4 ||
	    r->depth > 65536 || r->buf_size < 64 || (r->buf_size & 63))
		return -EINVAL;
	return 0;
}

int flit_rdma_rep_decode(const void *buf, size_t len, struct flit_rdma_rep *r)
{
	const uint8_t *p = buf;
	int err = wire_check(p, len, FLIT_RDMA_REP_LEN, NULL);

	if (err)
		return err;
	r->mode = p[3];
	r->session_id = flit_ld32(p + 4);
	r->credit_addr = flit_ld64(p + 8);
	r->credit_rkey = flit_ld32(p + 16);
	r->frame_max = flit_ld32(p + 20);
	r->depth = flit_ld32(p + 24);
	r->late = flit_ld32(p + 28);
	if ((r->mode != FLIT_RDMA_WIRE_SEND && r->mode != FLIT_RDMA_WIRE_WRITE) ||
	    r->frame_max < FLIT_FRAME_HDR_LEN)
		return -EINVAL;
	return 0;
}

int flit_rdma_rej_decode(const void *buf, size_t len, struct flit_rdma_rej_msg *r)
{
	const uint8_t *p = buf;
	int err = wire_check(p, len, FLIT_RDMA_REJ_LEN, NULL);

	if (err)
		return err;
	r->reason = p[3];
	r->value = flit_ld32(p + 4);
	return 0;
}

const char *flit_rdma_rej_str(unsigned reason)
{
	switch (reason) {
	case FLIT_RDMA_REJ_NO_TOPIC: return "no source of that topic listens there";
	case FLIT_RDMA_REJ_VERSION: return "protocol version mismatch";
	case FLIT_RDMA_REJ_DOMAIN: return "the source is in another domain (context.domain)";
	case FLIT_RDMA_REJ_FRAME: return "the source's frames are larger than our receive buffers";
	case FLIT_RDMA_REJ_RESOURCES: return "the source could not set the connection up";
	case FLIT_RDMA_REJ_BAD: return "the source refused our request as malformed";
	default: return "refused";
	}
}

/* ---- state --------------------------------------------------------------------- */

/* Source side: the block a connection registers for its receiver: the
 * credit counter the receiver writes, and the frames only this connection
 * sends (INFO, END). */
struct sblk {
	_Alignas(64) volatile uint64_t freed; /* buffers the receiver re-posted, cumulative */
	uint8_t pad[56];
	uint8_t info[CTL_BYTES];
	uint8_t end[64];
};

struct rsrc;

struct sconn {                   /* source side: one receiver */
	struct sconn *next;          /* tp->sconns (tp->lock) */
	struct flit_tp *tp;
	struct rsrc *src;            /* NULL once detached (tp->lock) */
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct sblk *blk;
	unsigned dev;
	uint8_t mode;                /* enum flit_rdma_wire_mode */
	uint32_t depth, bufsz, rkey, inl, sq;
	uint64_t ring;
	/* the rest: the source's lock */
	uint64_t sent;               /* receive buffers consumed */
	uint64_t limit;              /* sent may reach it (cached credits) */
	uint64_t wr_posted, wr_done, last_sig;
	uint64_t first_frame;        /* the first source frame posted here */
	/* planned at accept (late join, or a receiver older than the source):
	 * replay retained frames from replay_from, INFO's seq, how many
	 * messages before the live stream are the retained ones */
	uint64_t replay_from, info_seq;
	uint32_t late;
	bool replay;
	uint64_t frames_done;        /* frames below it have completed */
	uint64_t sig_head, sig_tail;
	struct { uint64_t wr, frames; } sig[SIG_RING];
	bool established, dead, end_posted, end_done;
	char peer[48];
};

struct rsrc {                    /* one publisher */
	pthread_mutex_t lock;        /* the fields below, conns, and posting */
	struct rsrc *next;           /* tp->srcs (tp->lock) */
	struct flit_tp *tp;
	struct sconn **conns;        /* established, in the fan-out */
	unsigned nconns, capconns;
	uint8_t *slots;
	size_t stride, slots_len;
	uint32_t nslots, sig_every;
	struct ibv_mr *mr[MAX_DEVS];
	uint64_t nframes;            /* frames posted: the next frame's number */
	bool advertised;             /* on the resolver channel (flit_ctx_res_advertise) */
	uint8_t *frame;              /* the frame being built (its slot), or NULL */
	uint32_t flen;
	uint16_t fcount;
	uint8_t *claim;
	uint32_t claim_max;
	uint64_t next_seq;
	uint64_t created;            /* CLOCK_MONOTONIC */
	uint32_t late_join;          /* source.late_join: frames kept with no receiver */
	uint32_t session;
	uint64_t hash;
	bool ts, batch;
	uint8_t mode;
	uint32_t frame_max, frame_cap;
	size_t max_msg;
	uint32_t inline_max;
	struct flit_counters c;
	char topic[FLIT_TOPIC_MAX + 1];
};

/* Receive side (the polling thread only). */
enum rc_state { RC_ADDR, RC_ROUTE, RC_CONNECTING, RC_UP, RC_DOWN };

struct rtarget;

struct rconn {                   /* receiver: one connection to a source */
	struct rconn *next;          /* tp->rconns */
	struct flit_tp *tp;
	struct rtarget *t;           /* NULL: the target went away */
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *mem;                /* depth buffers, then CW_SLOTS counter words */
	size_t memlen;
	uint64_t *cw;
	uint32_t depth, bufsz, inl;
	enum rc_state state;
	uint64_t received, freed, written, cw_posted, cw_done;
	uint64_t rx_seen;            /* received at the last housekeeping */
	uint64_t credit_addr;
	uint32_t credit_rkey, session, frame_max;
	uint32_t late;               /* REP: messages kept for late join before the live stream */
	uint8_t mode;
	struct flit_rx_session *rs;
	bool ended, broken, bad; /* bad: the peer broke the protocol */
	uint64_t last_write;
	char name[64];
};

struct rtarget {                 /* a topic we connect for, and where */
	struct rtarget *next;
	struct sockaddr_in sa;
	char ep[32];
	char topic[FLIT_TOPIC_MAX + 1];
	uint64_t hash;
	struct rconn *c;
	uint32_t depth, bufsz, retry_ms, delay_ms;
	uint64_t retry_at;
	char why[200];               /* the last failure, logged once */
	bool mark;
	bool resolved;               /* found by resolution, not the static map */
	uint64_t heard;              /* resolved: its last advertisement */
};

struct rdev {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
};

struct flit_tp {
	struct flit_ctx *ctx;
	const struct flit_cfg_context *cc;
	uint32_t domain;
	struct ibv_context **devlist; /* rdma_get_devices() */
	struct rdev dev[MAX_DEVS];
	unsigned ndev;
	char desc[384];

	/* source side: the connection thread and the application's threads */
	pthread_mutex_t lock;        /* srcs, sconns, the listener */
	struct rsrc *srcs;
	struct sconn *sconns;
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	struct sockaddr_in laddr;    /* bound listen address */
	int wakefd;
	pthread_t thread;
	bool thread_on, stop;

	/* receive side: the polling thread */
	struct rdma_event_channel *rch;
	struct rtarget *targets;
	struct rconn *rconns;
	uint64_t next_house, now;   /* now: the last housekeeping's clock */
	unsigned idle, nup;         /* nup: connections up */
	bool in_poll, dirty, pattern_warned;
};

static uint64_t mono(void)
{
	return flit_monotonic_now();
}

static int dev_index(const struct flit_tp *tp, const struct ibv_context *verbs)
{
	for (unsigned i = 0; i < tp->ndev; i++)
		if (tp->dev[i].verbs == verbs)
			return (int)i;
	return -1;
}

static const char *dev_name(const struct ibv_context *verbs)
{
	return verbs && verbs->device ? ibv_get_device_name(verbs->device) : "?";
}

/* ibv_reg_mr with a readable failure (memlock limits are the usual cause). */
static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *p, size_t len, int access,
			     const char *what)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, p, len, access);
	if (!mr) {
		int e = errno;
		flit_err(e, "rdma: cannot register %zu bytes of %s on %s: %s%s", len, what,
			 dev_name(pd->context), strerror(e),
			 e == ENOMEM || e == EPERM ? " (locked-memory limit: raise ulimit -l)" : "");
		errno = e;
	}
	return mr;
}

/* ---- source side: sending ------------------------------------------------------- */

/* Post one frame (or control frame) to a connection; -errno on failure.
 * `frames`: what a completion of this request proves sent (source frames
 * below it).  Caller holds the source's lock (or owns the connection). */
static int conn_post(struct sconn *c, const void *buf, uint32_t len, uint32_t lkey,
		     uint64_t frames, bool force_sig, uint32_t sig_every)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	bool sig = force_sig || c->wr_posted + 1 - c->last_sig >= sig_every;

	if (sig) {
		wr.wr_id = c->sig_tail;
		wr.send_flags = IBV_SEND_SIGNALED;
	}
	if (len <= c->inl)
		wr.send_flags |= IBV_SEND_INLINE;
	if (c->mode == FLIT_RDMA_WIRE_WRITE) {
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl(len);
		wr.wr.rdma.remote_addr = c->ring + (c->sent % c->depth) * (uint64_t)c->bufsz;
		wr.wr.rdma.rkey = c->rkey;
	} else {
		wr.opcode = IBV_WR_SEND;
	}
	int r = ibv_post_send(c->qp, &wr, &bad);
	if (FLIT_UNLIKELY(r))
		return -r; /* verbs: a positive errno */
	c->wr_posted++;
	c->sent++;
	if (sig) {
		c->sig[c->sig_tail % SIG_RING].wr = c->wr_posted;
		c->sig[c->sig_tail % SIG_RING].frames = frames;
		c->sig_tail++;
		c->last_sig = c->wr_posted;
	}
	return 0;
}

/* Reap a connection's send completions.  Returns -EIO when it failed. */
static int conn_reap(struct sconn *c)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (FLIT_UNLIKELY(wc[i].status != IBV_WC_SUCCESS)) {
				if (!c->dead)
					flit_info("rdma: receiver %s: send failed: %s", c->peer,
						  ibv_wc_status_str(wc[i].status));
				c->dead = true;
				continue;
			}
			if (wc[i].wr_id != c->sig_head || c->sig_head == c->sig_tail) {
				c->dead = true; /* cannot happen: completions come in order */
				continue;
			}
			c->wr_done = c->sig[c->sig_head % SIG_RING].wr;
			if (c->sig[c->sig_head % SIG_RING].frames > c->frames_done)
				c->frames_done = c->sig[c->sig_head % SIG_RING].frames;
			c->sig_head++;
			if (c->end_posted && c->sig_head == c->sig_tail)
				c->end_done = true;
		}
	}
	if (n < 0)
		c->dead = true;
	return c->dead ? -EIO : 0;
}

/* Re-read a connection's credit counter; the receiver writes it. */
static void conn_credits(struct sconn *c)
{
	uint64_t freed = __atomic_load_n(&c->blk->freed, __ATOMIC_ACQUIRE);
	/* a receiver frees what it received, never more: anything else is
	 * a torn or bogus write, and the next one will be whole */
	if (freed <= c->sent)
		c->limit = c->depth + freed - 1; /* one buffer stays for END */
}

/* Poll every connection, refresh credits, drop dead ones.  Lock held. */
static void src_progress(struct rsrc *s)
{
	unsigned j = 0;

	for (unsigned i = 0; i < s->nconns; i++) {
		struct sconn *c = s->conns[i];
		conn_reap(c);
		conn_credits(c);
		if (FLIT_UNLIKELY(c->dead)) {
			/* the connection thread frees it after the disconnect */
			rdma_disconnect(c->id);
			s->c.readers_evicted++;
			continue;
		}
		s->conns[j++] = c;
	}
	s->nconns = j;
}

/* Can frame number `f` be built in its slot now (every connection has
 * completed the frame that used the slot before)? */
static inline bool slot_free(const struct rsrc *s, uint64_t f)
{
	if (f < s->nslots)
		return true;
	for (unsigned i = 0; i < s->nconns; i++) {
		const struct sconn *c = s->conns[i];
		uint64_t done = c->frames_done > c->first_frame ? c->frames_done : c->first_frame;
		if (f - s->nslots >= done)
			return false;
	}
	return true;
}

/* Every connection can take one more frame now. */
static inline bool conns_ready(const struct rsrc *s)
{
	for (unsigned i = 0; i < s->nconns; i++) {
		const struct sconn *c = s->conns[i];
		if (c->sent >= c->limit || c->wr_posted - c->wr_done >= c->sq - 2 ||
		    c->sig_tail - c->sig_head >= SIG_RING - 2)
			return false;
	}
	return true;
}

/* 0 when a frame can be started (slot) and/or posted (credits) now;
 * else FLIT_NOT_CONNECTED or FLIT_BACK_PRESSURED.  Lock held. */
static int src_ready(struct rsrc *s, bool slot, bool post)
{
	for (int pass = 0; pass < 2; pass++) {
		/* with late join, frames to nobody are kept in their slots */
		if (!s->nconns && !s->late_join)
			return FLIT_NOT_CONNECTED;
		if ((!slot || slot_free(s, s->nframes)) && (!post || conns_ready(s)))
			return 0;
		if (pass == 0)
			src_progress(s);
	}
	s->c.back_pressured++;
	return FLIT_BACK_PRESSURED;
}

/* Post the open frame to every connection.  Lock held; src_ready() said
 * yes.  A connection that refuses the post is dropped (the others go on). */
static void src_post_frame(struct rsrc *s)
{
	uint8_t *f = s->frame;
	uint64_t nf = s->nframes;
	bool dropped = false;

	flit_st16(f + 6, s->fcount);
	flit_st32(f + 8, s->flen);
	for (unsigned i = 0; i < s->nconns; i++) {
		struct sconn *c = s->conns[i];
		int err = conn_post(c, f, s->flen, s->mr[c->dev]->lkey, nf + 1, false, s->sig_every);
		if (FLIT_UNLIKELY(err)) {
			flit_info("rdma: receiver %s: post failed: %s", c->peer, strerror(-err));
			c->dead = dropped = true;
		}
	}
	s->nframes = nf + 1;
	s->c.frames_sent++;
	s->frame = NULL;
	s->fcount = 0;
	if (FLIT_UNLIKELY(dropped))
		src_progress(s);
}

static inline uint8_t *slot_of(const struct rsrc *s, uint64_t f)
{
	return s->slots + (f & (s->nslots - 1)) * s->stride;
}

static void src_lock(struct rsrc *s) { pthread_mutex_lock(&s->lock); }
static void src_unlock(struct rsrc *s) { pthread_mutex_unlock(&s->lock); }

/* Post the open batch frame, if any.  0 or a status.  Lock held. */
static int src_flush_locked(struct rsrc *s)
{
	if (!s->frame || !s->fcount)
		return 0;
	int r = src_ready(s, false, true);
	if (r == FLIT_NOT_CONNECTED) {
		/* every receiver went away: nobody is owed these */
		s->frame = NULL;
		s->fcount = 0;
		return 0;
	}
	if (r)
		return r;
	src_post_frame(s);
	return 0;
}

/* Room for one message of `len` bytes: returns its header position in the
 * open frame (starting one if needed) via *at, or a status.  Lock held. */
static int src_room(struct rsrc *s, size_t len, uint8_t **at)
{
	size_t mlen = flit_msg_wire_len(len, s->ts);

	if (s->batch && s->frame) {
		if (s->flen + mlen <= s->frame_cap && s->fcount < UINT16_MAX) {
			*at = s->frame + s->flen;
			return 0;
		}
		int r = src_flush_locked(s);
		if (r)
			return r;
	}
	/* a new frame: its slot must be free; unbatched, it goes out at once,
	 * so the receivers' credits are needed now as well */
	int r = src_ready(s, true, !s->batch);
	if (r)
		return r;
	s->frame = slot_of(s, s->nframes);
	flit_frame_begin(s->frame, FLIT_FT_DATA, s->ts ? FLIT_FF_TS : 0, s->session, s->next_seq);
	s->flen = FLIT_FRAME_HDR_LEN;
	s->fcount = 0;
	*at = s->frame + FLIT_FRAME_HDR_LEN;
	return 0;
}

/* Account the message whose payload is at pl; post when due. */
static void src_msg_done(struct rsrc *s, uint8_t *pl, uint32_t len)
{
	if (len & 7)
		memset(pl + len, 0, flit_align8(len) - len);
	s->flen = (uint32_t)(pl + flit_align8(len) - s->frame);
	s->fcount++;
	s->next_seq++;
	s->c.msgs_sent++;
	s->c.bytes_sent += len;
	if (!s->batch)
		src_post_frame(s); /* src_room() checked the credits */
	else if (s->flen + FLIT_MSG_HDR_LEN + FLIT_MSG_TS_LEN + 8 > s->frame_cap ||
		 s->fcount == UINT16_MAX)
		src_flush_locked(s); /* full: if refused, the next send retries */
}

static int rdma_send(struct flit_tsrc *ts, const void *data, size_t len)
{
	struct rsrc *s = (struct rsrc *)ts;
	uint8_t *m, *pl;

	if (FLIT_UNLIKELY(len > s->max_msg))
		return flit_err(EMSGSIZE, "rdma: %s: message of %zu bytes exceeds the largest %zu "
				"(source.rdma.frame_max %u)", s->topic, len, s->max_msg, s->frame_max);
	src_lock(s);
	if (FLIT_UNLIKELY(s->claim)) {
		src_unlock(s);
		return flit_err(EBUSY, "rdma: %s: send while a claim is open", s->topic);
	}
	int r = src_room(s, len, &m);
	if (FLIT_UNLIKELY(r)) {
		src_unlock(s);
		return r;
	}
	pl = flit_frame_put_hdr(m, 0, (uint32_t)len, s->ts, s->ts ? flit_realtime_now() : 0);
	if (len)
		memcpy(pl, data, len);
	src_msg_done(s, pl, (uint32_t)len);
	src_unlock(s);
	return 0;
}

static int rdma_claim(struct flit_tsrc *ts, size_t len, void **buf)
{
	struct rsrc *s = (struct rsrc *)ts;
	uint8_t *m;

	if (len > s->max_msg)
		return flit_err(EMSGSIZE, "rdma: %s: claim of %zu bytes exceeds the largest %zu "
				"(source.rdma.frame_max %u)", s->topic, len, s->max_msg, s->frame_max);
	src_lock(s);
	if (s->claim) {
		src_unlock(s);
		return flit_err(EBUSY, "rdma: %s: a claim is already open", s->topic);
	}
	int r = src_room(s, len, &m);
	if (r) {
		src_unlock(s);
		return r;
	}
	s->claim = flit_frame_put_hdr(m, 0, (uint32_t)len, s->ts, s->ts ? flit_realtime_now() : 0);
	s->claim_max = (uint32_t)len;
	*buf = s->claim;
	/* the caller writes the payload unlocked: the slot is ours (nothing
	 * posts an open frame while a claim is open) */
	src_unlock(s);
	return 0;
}

static int rdma_commit(struct flit_tsrc *ts, size_t len)
{
	struct rsrc *s = (struct rsrc *)ts;

	src_lock(s);
	if (!s->claim || len > s->claim_max) {
		src_unlock(s);
		return flit_err(EINVAL, s->claim ? "rdma: %s: commit of %zu bytes exceeds the claim"
					       : "rdma: %s: commit without a claim (%zu bytes)", s->topic, len);
	}
	uint8_t *pl = s->claim;
	flit_st32(pl - (s->ts ? 12 : 4), (uint32_t)len);
	s->claim = NULL;
	src_msg_done(s, pl, (uint32_t)len);
	src_unlock(s);
	return 0;
}

static int rdma_abort(struct flit_tsrc *ts)
{
	struct rsrc *s = (struct rsrc *)ts;

	src_lock(s);
	if (!s->claim) {
		src_unlock(s);
		return flit_err(EINVAL, "rdma: %s: abort without a claim", s->topic);
	}
	s->claim = NULL;
	if (!s->fcount)
		s->frame = NULL;
	src_unlock(s);
	return 0;
}

static int rdma_flush(struct flit_tsrc *ts)
{
	struct rsrc *s = (struct rsrc *)ts;

	src_lock(s);
	if (s->claim) {
		src_unlock(s);
		return flit_err(EBUSY, "rdma: %s: flush with a claim open (commit or abort it first)", s->topic);
	}
	int r = src_flush_locked(s);
	src_unlock(s);
	return r;
}

static int rdma_receivers(struct flit_tsrc *ts)
{
	struct rsrc *s = (struct rsrc *)ts;

	src_lock(s);
	src_progress(s);
	int n = (int)s->nconns;
	src_unlock(s);
	return n;
}

static size_t rdma_max_msg(const struct flit_tsrc *ts)
{
	return ((const struct rsrc *)ts)->max_msg;
}

static uint64_t rdma_next_seq(const struct flit_tsrc *ts)
{
	return ((const struct rsrc *)ts)->next_seq;
}

static void rdma_src_counters(const struct flit_tsrc *ts, struct flit_counters *c)
{
	struct rsrc *s = (struct rsrc *)ts;

	src_lock(s);
	c->msgs_sent += s->c.msgs_sent;
	c->bytes_sent += s->c.bytes_sent;
	c->frames_sent += s->c.frames_sent;
	c->back_pressured += s->c.back_pressured;
	c->readers_evicted += s->c.readers_evicted;
	src_unlock(s);
}

/* ---- source side: connections (the connection thread, tp->lock held) ---------- */

static void sconn_free(struct flit_tp *tp, struct sconn *c)
{
	for (struct sconn **pp = &tp->sconns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	free(c->blk);
	if (c->id)
		rdma_destroy_id(c->id);
	free(c);
}

/* Take a connection out of its source's fan-out (tp->lock held). */
static void sconn_detach(struct sconn *c)
{
	struct rsrc *s = c->src;

	if (!s)
		return;
	src_lock(s);
	for (unsigned i = 0; i < s->nconns; i++)
		if (s->conns[i] == c) {
			s->conns[i] = s->conns[--s->nconns];
			break;
		}
	src_unlock(s);
	c->src = NULL;
}

static void reject(struct rdma_cm_id *id, unsigned reason, uint32_t value)
{
	uint8_t pd[FLIT_RDMA_REJ_LEN];
	struct flit_rdma_rej_msg m = { .reason = (uint8_t)reason, .value = value };

	flit_rdma_rej_encode(pd, &m);
	rdma_reject(id, pd, sizeof(pd));
}

/* A connect request on the listener: find the source, set up, accept. */
/* What a new connection gets before the live stream (lock held): a
 * receiver older than the source, everything from the source's first
 * message that its slots still hold; one asking for late join, the last
 * source.late_join messages they hold.  At most depth - 2 frames (the
 * receiver's credits, less INFO and the END kept back).  Without late join
 * the source keeps nothing (its sends to nobody were refused). */
static void replay_plan(struct rsrc *s, struct sconn *c, const struct flit_rdma_req *rq)
{
	uint64_t next = s->frame ? flit_ld64(s->frame + 16) : s->next_seq;
	uint64_t age_ms = (mono() - s->created) / 1000000u;
	bool first = s->late_join && rq->sub_age_ms > age_ms;
	bool late = s->late_join && (rq->flags & FLIT_RDMA_REQF_LATE);
	uint64_t lo = s->nframes > s->nslots ? s->nframes - s->nslots : 0;
	uint64_t room = rq->depth - 2;

	c->replay = false;
	c->late = 0;
	if (!first && !late)
		return;
	if (s->nframes - lo > room)
		lo = s->nframes - room;
	uint64_t want = first ? 0 : next > s->late_join ? next - s->late_join : 0;
	uint64_t f = s->nframes;
	while (f > lo && flit_ld64(slot_of(s, f - 1) + 16) > want)
		f--;
	if (f > lo)
		f--; /* the frame holding `want` */
	if (f == s->nframes && !first)
		return; /* nothing kept */
	c->replay = true;
	c->replay_from = f;
	if (first) {
		c->info_seq = 0; /* what it no longer holds is loss */
	} else {
		uint64_t fs = flit_ld64(slot_of(s, f) + 16);
		c->info_seq = fs > want ? fs : want;
		c->late = (uint32_t)(next - c->info_seq);
	}
}

static void on_connect_request(struct flit_tp *tp, struct rdma_cm_id *id,
			       const uint8_t *pd, size_t pdlen)
{
	struct flit_rdma_req rq;
	struct sconn *c = NULL;
	struct rsrc *s;
	unsigned ver;
	char peer[48];
	int err, d;

	flit_ep_str((struct sockaddr_in *)rdma_get_peer_addr(id), peer, sizeof(peer));
	err = flit_rdma_req_decode(pd, pdlen, &rq, &ver);
	if (err == -EPROTO) {
		flit_info("rdma: connection from %s refused: not a flit receiver, or version %u (ours: %u)",
			  peer, ver, FLIT_RDMA_VERSION);
		reject(id, FLIT_RDMA_REJ_VERSION, FLIT_RDMA_VERSION);
		goto drop;
	}
	if (err) {
		reject(id, FLIT_RDMA_REJ_BAD, 0);
		goto drop;
	}
	if (rq.domain != tp->domain) {
		reject(id, FLIT_RDMA_REJ_DOMAIN, tp->domain);
		goto drop;
	}
	for (s = tp->srcs; s; s = s->next)
		if (s->hash == rq.topic_hash)
			break;
	if (!s) {
		reject(id, FLIT_RDMA_REJ_NO_TOPIC, 0);
		goto drop;
	}
	if (rq.buf_size < s->frame_max) {
		flit_info("rdma: %s: receiver %s has %u-byte buffers, frames need %u: refused",
			  s->topic, peer, rq.buf_size, s->frame_max);
		reject(id, FLIT_RDMA_REJ_FRAME, s->frame_max);
		goto drop;
	}
	if (s->mode == FLIT_RDMA_WIRE_WRITE && !(rq.flags & FLIT_RDMA_REQF_RING)) {
		reject(id, FLIT_RDMA_REJ_BAD, 0);
		goto drop;
	}
	d = dev_index(tp, id->verbs);
	if (d < 0 || !s->mr[d]) {
		flit_warn("rdma: connection from %s on device %s, which this context did not open",
			  peer, dev_name(id->verbs));
		reject(id, FLIT_RDMA_REJ_RESOURCES, ENODEV);
		goto drop;
	}
	const char *what = "out of memory";
	c = calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	c->tp = tp;
	c->id = id;
	c->dev = (unsigned)d;
	c->mode = s->mode;
	c->depth = rq.depth;
	c->bufsz = rq.buf_size;
	c->ring = rq.ring_addr;
	c->rkey = rq.ring_rkey;
	c->sq = s->nslots + 4;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	c->blk = aligned_alloc(64, sizeof(*c->blk));
	if (!c->blk)
		goto fail;
	memset(c->blk, 0, sizeof(*c->blk));
	c->mr = reg_mr(tp->dev[d].pd, c->blk, sizeof(*c->blk),
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "a credit block");
	if (!c->mr) {
		what = flit_errmsg();
		goto fail;
	}
	what = "cannot create a completion queue";
	c->cq = ibv_create_cq(id->verbs, (int)c->sq + 1, NULL, NULL, 0);
	if (!c->cq)
		goto fail;
	what = "cannot create a queue pair";
	/* inline: as much as asked, or less if the device says no */
	for (uint32_t inl = s->inline_max;; inl = inl > 64 ? 64 : 0) {
		struct ibv_qp_init_attr qa = {
			.send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = c->sq, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1, .max_inline_data = inl },
		};
		if (rdma_create_qp(id, tp->dev[d].pd, &qa) == 0) {
			c->qp = id->qp;
			c->inl = qa.cap.max_inline_data < inl ? qa.cap.max_inline_data : inl;
			break;
		}
		if (!inl)
			goto fail;
	}
	c->src = s;
	id->context = c;
	c->next = tp->sconns;
	tp->sconns = c;
	src_lock(s);
	replay_plan(s, c, &rq);
	src_unlock(s);

	struct flit_rdma_rep rep = {
		.mode = c->mode, .session_id = s->session,
		.credit_addr = (uintptr_t)&c->blk->freed, .credit_rkey = c->mr->rkey,
		.frame_max = s->frame_max, .depth = c->depth, .late = c->late,
	};
	uint8_t rpd[FLIT_RDMA_REP_LEN];
	flit_rdma_rep_encode(rpd, &rep);
	struct rdma_conn_param cp = {
		.private_data = rpd, .private_data_len = sizeof(rpd),
		.responder_resources = 0, .initiator_depth = 0,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	if (rdma_accept(id, &cp)) {
		flit_info("rdma: %s: accepting %s: %s", s->topic, peer, strerror(errno));
		sconn_free(tp, c);
	}
	return;
fail:
	err = c ? errno : ENOMEM;
	flit_warn("rdma: %s: cannot set up the connection from %s: %s (%s)", s->topic, peer,
		  what, strerror(err));
	reject(id, FLIT_RDMA_REJ_RESOURCES, (uint32_t)err);
	if (c) {
		/* not linked yet, and no queue pair: only its memory */
		if (c->cq)
			ibv_destroy_cq(c->cq);
		if (c->mr)
			ibv_dereg_mr(c->mr);
		free(c->blk);
		free(c);
	}
drop:
	rdma_destroy_id(id);
}

/* Established: send INFO, then the connection joins the fan-out. */
static void on_established(struct flit_tp *tp, struct sconn *c)
{
	struct rsrc *s = c->src;

	if (!s) { /* the source closed meanwhile */
		rdma_disconnect(c->id);
		return;
	}
	src_lock(s);
	struct flit_ctl_info in = {
		.domain = tp->domain, .mode = FLIT_MODE_UNICAST,
		.data_port = ntohs(tp->laddr.sin_port), .data_addr = 0,
		.ctl_addr = tp->laddr.sin_addr.s_addr, .ctl_port = ntohs(tp->laddr.sin_port),
		.pid = (uint32_t)getpid(),
	};
	struct flit_ctl_name t = { .idx = 0, .kind = FLIT_NAME_EXACT,
				   .len = (uint16_t)strlen(s->topic), .name = s->topic };
	/* the receiver's first message: the first not yet posted anywhere,
	 * or the first of the frames kept for it (replay_plan) */
	uint64_t next = s->frame ? flit_ld64(s->frame + 16) : s->next_seq;
	uint64_t from = s->nframes;
	if (c->replay) {
		from = c->replay_from;
		next = c->info_seq;
		/* frames sent since the plan are replayed too; what the slots or
		 * the receiver's credits cannot hold any more is a gap (loss) */
		uint64_t lo = s->nframes > s->nslots ? s->nframes - s->nslots : 0;
		if (s->nframes - lo > c->depth - 2)
			lo = s->nframes - (c->depth - 2);
		if (from < lo)
			from = lo;
	}
	size_t l = flit_ctl_info_encode(c->blk->info, sizeof(c->blk->info), s->session, next, &in, &t, 1);
	c->first_frame = from;
	c->limit = c->depth - 1;
	int err = l ? conn_post(c, c->blk->info, (uint32_t)l, c->mr->lkey, from, true, s->sig_every)
		    : -EINVAL;
	for (uint64_t f = from; !err && f < s->nframes; f++) {
		const uint8_t *fr = slot_of(s, f);
		err = conn_post(c, fr, flit_ld32(fr + 8), s->mr[c->dev]->lkey, f + 1, false, s->sig_every);
	}
	if (err) {
		src_unlock(s);
		flit_warn("rdma: %s: receiver %s: cannot send INFO: %s", s->topic, c->peer, strerror(-err));
		rdma_disconnect(c->id);
		return;
	}
	if (s->nconns == s->capconns) {
		unsigned cap = s->capconns ? s->capconns * 2 : 4;
		struct sconn **v = realloc(s->conns, cap * sizeof(*v));
		if (!v) {
			src_unlock(s);
			rdma_disconnect(c->id);
			return;
		}
		s->conns = v;
		s->capconns = cap;
	}
	s->conns[s->nconns++] = c;
	c->established = true;
	src_unlock(s);
	flit_info("rdma: %s: receiver %s joined (%s, %u buffers of %u bytes, inline <= %u)",
		  s->topic, c->peer, c->mode == FLIT_RDMA_WIRE_WRITE ? "write" : "send",
		  c->depth, c->bufsz, c->inl);
}

static void src_cm_event(struct flit_tp *tp, struct rdma_cm_event *ev)
{
	enum rdma_cm_event_type type = ev->event;
	struct rdma_cm_id *id = ev->id;
	uint8_t pd[64];
	size_t pdlen = 0;

	if (type == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data) {
		pdlen = ev->param.conn.private_data_len < sizeof(pd) ?
			ev->param.conn.private_data_len : sizeof(pd);
		memcpy(pd, ev->param.conn.private_data, pdlen);
	}
	/* ack first: destroying an id waits for its events' acks */
	rdma_ack_cm_event(ev);

	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		on_connect_request(tp, id, pd, pdlen);
		return;
	}
	if (id == tp->lid || id->context == tp || !id->context)
		return; /* e.g. DEVICE_REMOVAL on the listener: nothing to do */
	struct sconn *c = id->context;
	switch (type) {
	case RDMA_CM_EVENT_ESTABLISHED:
		on_established(tp, c);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (c->src && c->established)
			flit_info("rdma: %s: receiver %s left (%s)", c->src->topic, c->peer,
				  rdma_event_str(type));
		sconn_detach(c);
		rdma_disconnect(id);
		sconn_free(tp, c);
		break;
	default:
		break;
	}
}

static void *cm_thread(void *arg)
{
	struct flit_tp *tp = arg;
	struct pollfd pf[2] = {
		{ .fd = tp->lch->fd, .events = POLLIN },
		{ .fd = tp->wakefd, .events = POLLIN },
	};

	while (!__atomic_load_n(&tp->stop, __ATOMIC_ACQUIRE)) {
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents) {
			uint64_t v;
			if (read(tp->wakefd, &v, sizeof(v)) < 0)
				(void)0;
		}
		for (;;) {
			struct rdma_cm_event *ev;
			if (rdma_get_cm_event(tp->lch, &ev))
				break; /* EAGAIN: the channel is non-blocking */
			pthread_mutex_lock(&tp->lock);
			src_cm_event(tp, ev);
			pthread_mutex_unlock(&tp->lock);
		}
	}
	return NULL;
}

static int nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ? -errno : 0;
}

static void describe_update(struct flit_tp *tp, const struct rsrc *s);

/* Listen for receivers (first source of the context).  tp->lock held. */
static int listen_start(struct flit_tp *tp)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)tp->cc->rdma_port) };
	char where[48];
	int err;

	if (tp->lid)
		return 0;
	if (tp->cc->rdma_address[0])
		inet_pton(AF_INET, tp->cc->rdma_address, &a.sin_addr);
	flit_ep_str(&a, where, sizeof(where));
	tp->lch = rdma_create_event_channel();
	if (!tp->lch)
		return flit_err(errno, "rdma: cannot create an event channel: %s", strerror(errno));
	if ((err = nonblock(tp->lch->fd)) ||
	    rdma_create_id(tp->lch, &tp->lid, tp, RDMA_PS_TCP)) {
		err = flit_err(err ? -err : errno, "rdma: cannot create a listener: %s",
			       strerror(err ? -err : errno));
		goto fail;
	}
	if (rdma_bind_addr(tp->lid, (struct sockaddr *)&a)) {
		int e = errno;
		err = flit_err(e, "rdma: cannot listen on %s: %s%s", where, strerror(e),
			       e == EADDRINUSE ? " (context.rdma.port: another context or process listens "
						 "there; give each publishing context its own port, or 0 for any)" :
			       e == EADDRNOTAVAIL || e == ENODEV ? " (context.rdma.address must be the address of "
								   "an RDMA device's interface)" : "");
		goto fail;
	}
	if (tp->lid->verbs && dev_index(tp, tp->lid->verbs) < 0) {
		err = flit_err(ENODEV, "rdma: %s is on device %s, which this context did not open",
			       where, dev_name(tp->lid->verbs));
		goto fail;
	}
	if (rdma_listen(tp->lid, 64)) {
		err = flit_err(errno, "rdma: cannot listen on %s: %s", where, strerror(errno));
		goto fail;
	}
	tp->laddr = *(struct sockaddr_in *)rdma_get_local_addr(tp->lid);
	tp->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (tp->wakefd < 0) {
		err = flit_err(errno, "rdma: eventfd: %s", strerror(errno));
		goto fail;
	}
	tp->stop = false;
	err = pthread_create(&tp->thread, NULL, cm_thread, tp);
	if (err) {
		err = flit_err(err, "rdma: cannot start the connection thread: %s", strerror(err));
		goto fail;
	}
	pthread_setname_np(tp->thread, "flit-rdma");
	tp->thread_on = true;
	flit_info("rdma: listening on %s", flit_ep_str(&tp->laddr, where, sizeof(where)));
	return 0;
fail:
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	tp->wakefd = -1;
	if (tp->lid)
		rdma_destroy_id(tp->lid);
	tp->lid = NULL;
	rdma_destroy_event_channel(tp->lch);
	tp->lch = NULL;
	return err;
}

/* Stop the connection thread, then free what is left (no source is open). */
static void listen_stop(struct flit_tp *tp)
{
	if (tp->thread_on) {
		uint64_t one = 1;
		__atomic_store_n(&tp->stop, true, __ATOMIC_RELEASE);
		if (write(tp->wakefd, &one, sizeof(one)) < 0)
			(void)0;
		pthread_join(tp->thread, NULL);
		tp->thread_on = false;
	}
	pthread_mutex_lock(&tp->lock);
	while (tp->sconns) {
		struct sconn *c = tp->sconns;
		sconn_detach(c);
		rdma_disconnect(c->id);
		sconn_free(tp, c);
	}
	if (tp->lid)
		rdma_destroy_id(tp->lid);
	tp->lid = NULL;
	if (tp->lch)
		rdma_destroy_event_channel(tp->lch);
	tp->lch = NULL;
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	tp->wakefd = -1;
	pthread_mutex_unlock(&tp->lock);
}

/* ---- source side: open and close -------------------------------------------- */

static int rdma_src_open(struct flit_tp *tp, const char *topic,
			 const struct flit_cfg_source *cfg, struct flit_tsrc **out)
{
	struct rsrc *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return flit_err(ENOMEM, "rdma: out of memory");
	pthread_mutex_init(&s->lock, NULL);
	s->tp = tp;
	snprintf(s->topic, sizeof(s->topic), "%s", topic);
	s->hash = flit_rdma_topic_hash(topic);
	while (!s->session)
		if (getrandom(&s->session, sizeof(s->session), 0) != sizeof(s->session))
			s->session = (uint32_t)(mono() ^ (uint64_t)getpid() << 16 ^ (uintptr_t)s);
	s->ts = cfg->timestamps;
	s->batch = cfg->batch;
	s->created = mono();
	s->late_join = cfg->late_join;
	s->mode = cfg->rdma_mode == FLIT_RDMA_WRITE ? FLIT_RDMA_WIRE_WRITE : FLIT_RDMA_WIRE_SEND;
	s->frame_max = cfg->rdma_frame_max & ~7u;
	s->frame_cap = s->batch && cfg->batch_max < s->frame_max ? cfg->batch_max & ~7u : s->frame_max;
	s->max_msg = (s->frame_max - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN -
		      (s->ts ? FLIT_MSG_TS_LEN : 0)) & ~(size_t)7;
	if (s->max_msg > FLIT_MSG_LEN_MAX)
		s->max_msg = FLIT_MSG_LEN_MAX;
	s->inline_max = cfg->rdma_inline;
	s->nslots = cfg->rdma_slots;
	s->sig_every = s->nslots / 4;
	s->stride = (s->frame_max + 63) & ~(size_t)63;
	s->slots_len = s->stride * s->nslots;
	s->slots = aligned_alloc(4096, (s->slots_len + 4095) & ~(size_t)4095);
	if (!s->slots) {
		err = flit_err(ENOMEM, "rdma: %s: cannot allocate %zu bytes of send slots "
			       "(source.rdma.slots x frame_max)", topic, s->slots_len);
		goto fail;
	}
	memset(s->slots, 0, s->slots_len);
	for (unsigned d = 0; d < tp->ndev; d++) {
		s->mr[d] = reg_mr(tp->dev[d].pd, s->slots, s->slots_len, 0, "send slots");
		if (!s->mr[d]) {
			err = -errno;
			flit_err_wrap(-err, "rdma: %s", topic);
			goto fail;
		}
	}
	pthread_mutex_lock(&tp->lock);
	for (struct rsrc *o = tp->srcs; o; o = o->next)
		if (o->hash == s->hash) {
			pthread_mutex_unlock(&tp->lock);
			err = flit_err(EADDRINUSE, "rdma: topic '%s' already has a source in this context", topic);
			goto fail;
		}
	err = listen_start(tp);
	if (!err) {
		s->next = tp->srcs;
		tp->srcs = s;
		describe_update(tp, s);
	}
	pthread_mutex_unlock(&tp->lock);
	if (err)
		goto fail;
	{
		/* on the domain's resolver channel, when the context has one
		 * (udp listed): receivers find it by topic or pattern */
		struct flit_res_ad ad = {
			.session = s->session, .mode = FLIT_MODE_RDMA,
			.addr = tp->laddr.sin_addr.s_addr, .port = ntohs(tp->laddr.sin_port),
			.topic = topic,
		};
		s->advertised = flit_ctx_res_advertise(tp->ctx, &ad) == 0;
		if (!s->advertised)
			flit_debug("rdma: source %s is not advertised (%s): receivers find it "
				   "through receiver.rdma.static", topic, flit_errmsg());
	}
	flit_info("rdma: source %s session %08x (%s, frames <= %u bytes, %u slots)", topic, s->session,
		  s->mode == FLIT_RDMA_WIRE_WRITE ? "write" : "send", s->frame_max, s->nslots);
	*out = (struct flit_tsrc *)s;
	return 0;
fail:
	for (unsigned d = 0; d < tp->ndev; d++)
		if (s->mr[d])
			ibv_dereg_mr(s->mr[d]);
	free(s->slots);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return err;
}

static void rdma_src_close(struct flit_tsrc *ts)
{
	struct rsrc *s = (struct rsrc *)ts;
	struct flit_tp *tp = s->tp;

	/* no new receiver from now on */
	if (s->advertised)
		flit_ctx_res_withdraw(tp->ctx, s->session);
	pthread_mutex_lock(&tp->lock);
	for (struct rsrc **pp = &tp->srcs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&tp->lock);

	/* the last frame, then END to every receiver (a buffer and a send
	 * slot were kept for it), and wait until they have it all */
	src_lock(s);
	s->claim = NULL;
	src_flush_locked(s);
	src_progress(s);
	uint64_t end_seq = s->next_seq;
	for (unsigned i = 0; i < s->nconns; i++) {
		struct sconn *c = s->conns[i];
		size_t l = flit_ctl_hb_encode(c->blk->end, sizeof(c->blk->end), s->session, end_seq, end_seq);
		flit_st16(c->blk->end + 4, FLIT_HBF_END);
		if (c->sent < c->depth + c->blk->freed &&
		    conn_post(c, c->blk->end, (uint32_t)l, c->mr->lkey, s->nframes, true, 1) == 0)
			c->end_posted = true;
	}
	for (uint64_t t0 = mono(); mono() - t0 < CLOSE_WAIT_NS;) {
		bool all = true;
		for (unsigned i = 0; i < s->nconns; i++) {
			struct sconn *c = s->conns[i];
			conn_reap(c);
			all &= !c->end_posted || c->end_done || c->dead;
		}
		if (all)
			break;
		usleep(100);
	}
	src_unlock(s);

	/* detach every connection of ours; the connection thread frees them
	 * when their disconnect completes */
	pthread_mutex_lock(&tp->lock);
	for (struct sconn *c = tp->sconns; c; c = c->next)
		if (c->src == s) {
			src_lock(s);
			c->src = NULL;
			src_unlock(s);
			rdma_disconnect(c->id);
		}
	s->nconns = 0;
	pthread_mutex_unlock(&tp->lock);

	for (unsigned d = 0; d < tp->ndev; d++)
		if (s->mr[d])
			ibv_dereg_mr(s->mr[d]);
	free(s->slots);
	free(s->conns);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- receive side: connections ----------------------------------------------- */

static void credit_write(struct rconn *c, bool force);

/* Re-post buffer `slot`. */
static int post_recv(struct rconn *c, uint32_t slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->mem + (size_t)slot * c->bufsz),
			       .length = c->bufsz, .lkey = c->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	int r = ibv_post_recv(c->qp, &wr, &bad);
	return r ? -r : 0;
}

static void rconn_free(struct flit_tp *tp, struct rconn *c)
{
	for (struct rconn **pp = &tp->rconns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (c->t && c->t->c == c)
		c->t->c = NULL;
	if (c->state == RC_UP)
		tp->nup--;
	if (c->id && (c->state == RC_UP || c->state == RC_CONNECTING))
		rdma_disconnect(c->id);
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	free(c->mem);
	if (c->id)
		rdma_destroy_id(c->id);
	free(c);
}

/* A target's next attempt: after its delay, which doubles up to 10x. */
static void target_retry(struct rtarget *t, uint64_t now)
{
	t->retry_at = now + (uint64_t)t->delay_ms * MS;
	t->delay_ms = t->delay_ms * 2 > t->retry_ms * 10 ? t->retry_ms * 10 : t->delay_ms * 2;
}

/* A failure on the way to (or on) a connection: say why, once per change. */
static void target_fail(struct rtarget *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void target_fail(struct rtarget *t, const char *fmt, ...)
{
	char why[sizeof(t->why)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (strcmp(why, t->why)) {
		flit_warn("rdma: '%s' from %s: %s; retrying every %u..%u ms", t->topic, t->ep, why,
			  t->retry_ms, t->retry_ms * 10);
		snprintf(t->why, sizeof(t->why), "%s", why);
	} else {
		flit_debug("rdma: '%s' from %s: %s", t->topic, t->ep, why);
	}
}

/* End a connection: deliver what arrived, then EOS (died unless the
 * source said END), free it, and schedule the next attempt. */
static int rconn_down(struct flit_tp *tp, struct rconn *c, uint64_t now);

static int rconn_start(struct flit_tp *tp, struct rtarget *t, uint64_t now)
{
	struct rconn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->tp = tp;
	c->t = t;
	c->depth = t->depth;
	c->bufsz = t->bufsz;
	c->state = RC_ADDR;
	snprintf(c->name, sizeof(c->name), "rdma:%s", t->ep);
	if (rdma_create_id(tp->rch, &c->id, c, RDMA_PS_TCP)) {
		int e = errno;
		free(c);
		target_fail(t, "cannot create a connection id: %s", strerror(e));
		target_retry(t, now);
		return -e;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&t->sa, CM_TIMEOUT_MS)) {
		int e = errno;
		rdma_destroy_id(c->id);
		free(c);
		target_fail(t, "cannot resolve the address: %s", strerror(e));
		target_retry(t, now);
		return -e;
	}
	c->next = tp->rconns;
	tp->rconns = c;
	t->c = c;
	return 0;
}

/* Route known: QP, buffers (all posted before we connect), connect. */
static int rconn_connect(struct flit_tp *tp, struct rconn *c)
{
	struct rtarget *t = c->t;
	int d = dev_index(tp, c->id->verbs);

	if (d < 0) {
		target_fail(t, "the route goes through device %s, which this context did not open",
			    dev_name(c->id->verbs));
		return -ENODEV;
	}
	c->memlen = (size_t)c->depth * c->bufsz + CW_SLOTS * sizeof(uint64_t);
	c->mem = aligned_alloc(4096, (c->memlen + 4095) & ~(size_t)4095);
	if (!c->mem) {
		target_fail(t, "out of memory for %u buffers of %u bytes", c->depth, c->bufsz);
		return -ENOMEM;
	}
	memset(c->mem, 0, c->memlen);
	c->cw = (uint64_t *)(c->mem + (size_t)c->depth * c->bufsz);
	c->mr = reg_mr(tp->dev[d].pd, c->mem, c->memlen,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "receive buffers");
	if (!c->mr) {
		target_fail(t, "%s", flit_errmsg());
		return -ENOMEM;
	}
	c->cq = ibv_create_cq(c->id->verbs, (int)(c->depth + RX_SQ), NULL, NULL, 0);
	if (!c->cq) {
		target_fail(t, "cannot create a completion queue: %s", strerror(errno));
		return -errno;
	}
	for (uint32_t inl = 64;; inl = 0) {
		struct ibv_qp_init_attr qa = {
			.send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = RX_SQ, .max_recv_wr = c->depth, .max_send_sge = 1,
				 .max_recv_sge = 1, .max_inline_data = inl },
		};
		if (rdma_create_qp(c->id, tp->dev[d].pd, &qa) == 0) {
			c->qp = c->id->qp;
			c->inl = qa.cap.max_inline_data < inl ? qa.cap.max_inline_data : inl;
			break;
		}
		if (!inl) {
			target_fail(t, "cannot create a queue pair: %s", strerror(errno));
			return -errno;
		}
	}
	for (uint32_t i = 0; i < c->depth; i++) {
		int err = post_recv(c, i);
		if (err) {
			target_fail(t, "cannot post receive buffers: %s", strerror(-err));
			return err;
		}
	}
	/* late join: asked for, and how old our oldest subscriber of the topic
	 * is (the source starts an older one at its first message) */
	bool late = flit_ctx_join_mode(tp->ctx, t->topic, 0) == FLIT_JOIN_LATE;
	uint64_t since = flit_ctx_sub_since(tp->ctx, t->topic), rt = flit_realtime_now();
	uint64_t age_ms = since && rt > since ? (rt - since) / 1000000u : 0;
	struct flit_rdma_req rq = {
		.flags = FLIT_RDMA_REQF_RING | (late ? FLIT_RDMA_REQF_LATE : 0),
		.domain = tp->domain, .topic_hash = t->hash,
		.depth = c->depth, .buf_size = c->bufsz,
		.ring_addr = (uintptr_t)c->mem, .ring_rkey = c->mr->rkey,
		.sub_age_ms = age_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)age_ms,
	};
	uint8_t pd[FLIT_RDMA_REQ_LEN];
	flit_rdma_req_encode(pd, &rq);
	struct rdma_conn_param cp = {
		.private_data = pd, .private_data_len = sizeof(pd),
		.responder_resources = 0, .initiator_depth = 0,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	if (rdma_connect(c->id, &cp)) {
		target_fail(t, "cannot connect: %s", strerror(errno));
		return -errno;
	}
	c->state = RC_CONNECTING;
	return 0;
}

/* Write the credit counter (buffers freed) into the source's memory. */
static void credit_write(struct rconn *c, bool force)
{
	if (c->state != RC_UP || (!force && c->freed == c->written))
		return;
	if (c->cw_posted - c->cw_done >= RX_SQ - 8)
		return; /* completions pending: the next poll retries */
	uint64_t *w = &c->cw[c->cw_posted % CW_SLOTS];
	*w = htole64(c->freed);
	struct ibv_sge sge = { .addr = (uintptr_t)w, .length = 8, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = WRID_SEND | (c->cw_posted + 1), .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = (c->inl >= 8 ? IBV_SEND_INLINE : 0) |
			      ((c->cw_posted + 1) % 8 == 0 ? IBV_SEND_SIGNALED : 0),
		.wr.rdma = { .remote_addr = c->credit_addr, .rkey = c->credit_rkey },
	}, *bad;
	int r = ibv_post_send(c->qp, &wr, &bad);
	if (r) {
		flit_info("%s: credit write failed: %s", c->name, strerror(r));
		c->broken = true;
		return;
	}
	c->cw_posted++;
	c->written = c->freed;
	c->last_write = c->tp->now;
}

/* INFO from the source: the session starts (BOS). */
static int on_info(struct flit_tp *tp, struct rconn *c, const uint8_t *p,
		   const struct flit_frame_hdr *h)
{
	struct flit_ctl_info in;
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	char name[FLIT_TOPIC_MAX + 1];
	int ev = 0, want = 0;

	flit_ctl_info_get(p, &in);
	if (c->rs || in.domain != tp->domain || h->count == 0 || h->session_id != c->session) {
		flit_ctx_rx_counters(tp->ctx)->malformed++;
		c->broken = true;
		return 0;
	}
	c->rs = flit_rx_session_new(tp->ctx, h->session_id, c->name);
	if (!c->rs) {
		c->broken = true;
		return 0;
	}
	if (c->late)
		flit_rx_session_late_join(c->rs, h->seq, h->seq + c->late);
	else
		flit_rx_session_start(c->rs, h->seq);
	flit_ctl_names_init(&it, p, h);
	while (flit_ctl_names_next(&it, &nm)) {
		memcpy(name, nm.name, nm.len);
		name[nm.len] = '\0';
		if (nm.idx >= h->count || !c->t || flit_rdma_topic_hash(name) != c->t->hash)
			continue;
		int n = flit_rx_session_topic(c->rs, nm.idx, name);
		want += n > 0 ? n : 0;
		ev += n > 0 ? n : 0;
	}
	if (!want) {
		flit_info("%s: session %08x has no topic we want; leaving", c->name, h->session_id);
		c->broken = true;
	} else {
		flit_info("%s: joined session %08x (%s) at #%llu", c->name, h->session_id,
			  c->t->topic, (unsigned long long)h->seq);
		c->t->delay_ms = c->t->retry_ms;
		c->t->why[0] = '\0';
	}
	return ev;
}

/* One received frame in buffer `slot`. */
static int rx_frame(struct flit_tp *tp, struct rconn *c, const uint8_t *p, uint32_t len,
		    flit_frame_fn fn, void *arg)
{
	struct flit_counters *ctr = flit_ctx_rx_counters(tp->ctx);
	struct flit_frame_hdr h;

	if (FLIT_UNLIKELY(len < FLIT_FRAME_HDR_LEN || flit_ld16(p) != FLIT_WIRE_MAGIC)) {
		ctr->foreign_dropped++;
		return 0;
	}
	if (FLIT_LIKELY(p[3] == FLIT_FT_DATA)) {
		if (FLIT_UNLIKELY(!c->rs)) {
			ctr->unknown_session++;
			return 0;
		}
		int n = fn(arg, c->rs, p, len);
		return n > 0 ? n : 0;
	}
	if (flit_ctl_check(p, len, &h) != FLIT_FE_OK || h.session_id != c->session) {
		ctr->malformed++;
		return 0;
	}
	if (h.type == FLIT_FT_INFO)
		return on_info(tp, c, p, &h);
	if (h.type == FLIT_FT_HB && (h.flags & FLIT_HBF_END) && c->rs) {
		c->ended = true;
		int ev = flit_rx_session_end(c->rs, 0);
		c->rs = NULL;
		return ev;
	}
	return 0;
}

/* Poll one connection's completions, delivering up to `limit` messages
 * (all of them when limit < 0). */
static int rconn_poll(struct flit_tp *tp, struct rconn *c, int limit, flit_frame_fn fn, void *arg)
{
	struct ibv_wc wc[RX_BATCH];
	int total = 0;

	while (limit < 0 || total < limit) {
		int want = RX_BATCH;
		if (limit >= 0 && limit - total < want)
			want = limit - total;
		int n = ibv_poll_cq(c->cq, want, wc);
		if (n <= 0) {
			if (n < 0)
				c->broken = true;
			break;
		}
		for (int i = 0; i < n; i++) {
			struct ibv_wc *w = &wc[i];
			if (FLIT_UNLIKELY(w->status != IBV_WC_SUCCESS)) {
				if (!c->broken && w->status != IBV_WC_WR_FLUSH_ERR)
					flit_info("%s: %s", c->name, ibv_wc_status_str(w->status));
				c->broken = true;
				continue;
			}
			if (w->wr_id & WRID_SEND) {
				c->cw_done = w->wr_id & ~WRID_SEND;
				continue;
			}
			uint32_t slot = (uint32_t)(c->received % c->depth);
			uint32_t len = w->opcode == IBV_WC_RECV_RDMA_WITH_IMM ? ntohl(w->imm_data) : w->byte_len;
			if (FLIT_UNLIKELY(w->wr_id != slot || len > c->bufsz || c->bad)) {
				if (!c->bad)
					flit_warn("%s: a frame of %u bytes in buffer %llu, expected buffer %u "
						  "of %u bytes: protocol error, disconnecting", c->name, len,
						  (unsigned long long)w->wr_id, slot, c->bufsz);
				c->bad = c->broken = true;
				continue;
			}
			c->received++;
			total += rx_frame(tp, c, c->mem + (size_t)slot * c->bufsz, len, fn, arg);
			if (FLIT_UNLIKELY(post_recv(c, slot))) {
				c->broken = true;
				continue;
			}
			c->freed++;
			if (c->freed - c->written >= c->depth / 4)
				credit_write(c, false);
		}
		if (n < want)
			break;
	}
	return total;
}

static int rconn_down(struct flit_tp *tp, struct rconn *c, uint64_t now)
{
	int ev = 0;

	if (c->state == RC_UP && c->cq)
		ev += rconn_poll(tp, c, -1, flit_rx_frame, tp->ctx);
	if (c->rs) {
		flit_info("%s: session %08x ended: the source is gone", c->name, c->session);
		ev += flit_rx_session_end(c->rs, FLIT_MSGF_SOURCE_DIED);
		c->rs = NULL;
	}
	if (c->t)
		target_retry(c->t, now);
	rconn_free(tp, c);
	return ev;
}

/* The connection's established: the source's answer. */
static void rconn_up(struct flit_tp *tp, struct rconn *c, const void *pd, size_t pdlen, uint64_t now)
{
	struct flit_rdma_rep rep;

	if (flit_rdma_rep_decode(pd, pdlen, &rep) || rep.depth != c->depth || rep.frame_max > c->bufsz) {
		target_fail(c->t, "the source's accept message is not one we understand");
		c->broken = true;
		return;
	}
	c->mode = rep.mode;
	c->session = rep.session_id;
	c->credit_addr = rep.credit_addr;
	c->credit_rkey = rep.credit_rkey;
	c->frame_max = rep.frame_max;
	c->late = rep.late;
	c->state = RC_UP;
	c->last_write = now;
	tp->nup++;
}

static const char *cm_status(const struct rdma_cm_event *ev, char *buf, size_t n)
{
	int st = ev->status;

	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		struct flit_rdma_rej_msg m;
		if (ev->param.conn.private_data &&
		    flit_rdma_rej_decode(ev->param.conn.private_data, ev->param.conn.private_data_len, &m) == 0) {
			if (m.reason == FLIT_RDMA_REJ_FRAME)
				snprintf(buf, n, "refused: the source's frames are up to %u bytes, our buffers %s "
					 "(raise receiver.rdma.frame_max)", m.value, "smaller");
			else if (m.reason == FLIT_RDMA_REJ_RESOURCES)
				snprintf(buf, n, "refused: the source could not set the connection up (%s)",
					 strerror((int)m.value));
			else
				snprintf(buf, n, "refused: %s", flit_rdma_rej_str(m.reason));
			return buf;
		}
		/* IB CM reason 8: invalid service id, nobody listens there */
		if (st == 8)
			snprintf(buf, n, "no listener at that address and port (connection refused)");
		else
			snprintf(buf, n, "connection rejected (IB CM reason %d)", st);
		return buf;
	}
	const char *what;
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_ERROR: what = "cannot resolve the address (not reachable through an RDMA device?)"; break;
	case RDMA_CM_EVENT_ROUTE_ERROR: what = "cannot resolve the route"; break;
	case RDMA_CM_EVENT_UNREACHABLE: what = "unreachable"; break;
	case RDMA_CM_EVENT_CONNECT_ERROR: what = "connection failed"; break;
	default: what = rdma_event_str(ev->event); break;
	}
	snprintf(buf, n, "%s%s%s", what, st ? ": " : "", st ? strerror(st < 0 ? -st : st) : "");
	return buf;
}

/* rdma_cm events of the receive side. */
static int rx_cm_events(struct flit_tp *tp, uint64_t now)
{
	struct rdma_cm_event *ev;
	int events = 0;

	while (rdma_get_cm_event(tp->rch, &ev) == 0) {
		struct rconn *c = ev->id->context;
		enum rdma_cm_event_type type = ev->event;
		uint8_t pd[64];
		size_t pdlen = 0;
		char why[160];

		if (ev->param.conn.private_data && (type == RDMA_CM_EVENT_ESTABLISHED)) {
			pdlen = ev->param.conn.private_data_len < sizeof(pd) ?
				ev->param.conn.private_data_len : sizeof(pd);
			memcpy(pd, ev->param.conn.private_data, pdlen);
		}
		cm_status(ev, why, sizeof(why));
		rdma_ack_cm_event(ev);
		if (!c)
			continue;
		switch (type) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(c->id, CM_TIMEOUT_MS)) {
				if (c->t)
					target_fail(c->t, "cannot resolve the route: %s", strerror(errno));
				c->broken = true;
			} else {
				c->state = RC_ROUTE;
			}
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			if (!c->t || rconn_connect(tp, c))
				c->broken = true;
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c->t)
				rconn_up(tp, c, pd, pdlen, now);
			else
				c->broken = true;
			break;
		case RDMA_CM_EVENT_ADDR_ERROR:
		case RDMA_CM_EVENT_ROUTE_ERROR:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (c->t)
				target_fail(c->t, "%s", why);
			c->broken = true;
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			flit_debug("%s: %s", c->name, why);
			c->broken = true;
			break;
		default:
			break;
		}
	}
	for (struct rconn *c = tp->rconns, *next; c; c = next) {
		next = c->next;
		if (c->broken)
			events += rconn_down(tp, c, now);
	}
	return events;
}

/* ---- receive side: targets --------------------------------------------------- */

struct tbuild { struct flit_tp *tp; };

static struct rtarget *target_find(struct flit_tp *tp, const char *topic,
				   const struct sockaddr_in *sa);
static struct rtarget *target_new(struct flit_tp *tp, const char *topic,
				  const struct sockaddr_in *sa, const struct flit_cfg_receiver *rc);

static int target_add(void *arg, const char *topic, bool pattern, const struct flit_cfg_receiver *rc)
{
	struct flit_tp *tp = ((struct tbuild *)arg)->tp;
	struct sockaddr_in sa;
	struct rtarget *t;

	if (!rc->rdma_static[0])
		return 0;
	if (pattern) {
		if (!tp->pattern_warned)
			flit_warn("rdma: receiver.rdma.static applies to exact topics; pattern subscription "
				  "'%s' finds rdma sources through the resolver channel only", topic);
		tp->pattern_warned = true;
		return 0;
	}
	flit_ep_parse(rc->rdma_static, &sa);
	if ((t = target_find(tp, topic, &sa))) {
		t->mark = true;
		return 0;
	}
	target_new(tp, topic, &sa, rc);
	return 0;
}

static struct rtarget *target_find(struct flit_tp *tp, const char *topic,
				   const struct sockaddr_in *sa)
{
	for (struct rtarget *t = tp->targets; t; t = t->next)
		if (!strcmp(t->topic, topic) && t->sa.sin_addr.s_addr == sa->sin_addr.s_addr &&
		    t->sa.sin_port == sa->sin_port)
			return t;
	return NULL;
}

/* A new target, connected at the next housekeeping. */
static struct rtarget *target_new(struct flit_tp *tp, const char *topic,
				  const struct sockaddr_in *sa, const struct flit_cfg_receiver *rc)
{
	struct rtarget *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->sa = *sa;
	flit_ep_str(sa, t->ep, sizeof(t->ep));
	snprintf(t->topic, sizeof(t->topic), "%s", topic);
	t->hash = flit_rdma_topic_hash(topic);
	t->depth = rc->rdma_depth;
	t->bufsz = (rc->rdma_frame_max + 63) & ~63u;
	t->retry_ms = rc->rdma_retry_ms;
	t->delay_ms = t->retry_ms;
	t->retry_at = 0; /* now */
	t->mark = true;
	t->next = tp->targets;
	tp->targets = t;
	tp->next_house = 0; /* connect soon */
	return t;
}

/* Unlink and free *pp, closing its connection (EOS only to subscribers
 * that still want it: none, when the subscriptions went). */
static void target_drop(struct flit_tp *tp, struct rtarget **pp)
{
	struct rtarget *t = *pp;

	*pp = t->next;
	if (t->c) {
		struct rconn *c = t->c;
		if (c->rs)
			flit_rx_session_end(c->rs, 0);
		c->rs = NULL;
		c->t = NULL;
		rconn_free(tp, c);
	}
	free(t);
}

/* Resolution (the context's udp transport heard an rdma source's INFO for
 * a topic a subscriber wants): connect to it, or note that it is alive. */
static void rdma_res_found(struct flit_tp *tp, const struct flit_res_ad *ad)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(ad->port),
				  .sin_addr.s_addr = ad->addr };
	struct flit_cfg_receiver rc;
	struct rtarget *t;

	if (ad->mode != FLIT_MODE_RDMA || !ad->port || !ad->addr)
		return;
	if (!(t = target_find(tp, ad->topic, &sa))) {
		flit_ctx_rcv_cfg(tp->ctx, ad->topic, &rc);
		if (!(t = target_new(tp, ad->topic, &sa, &rc)))
			return;
		t->resolved = true;
		flit_info("rdma: '%s': source session %08x at %s, found by resolution", t->topic,
			  ad->session, t->ep);
	}
	t->heard = mono();
}

/* Targets follow the subscriptions: new ones connect at the next poll,
 * gone ones are closed (EOS to nobody: no subscriber wants them). */
static void rebind(struct flit_tp *tp)
{
	struct tbuild b = { .tp = tp };

	for (struct rtarget *t = tp->targets; t; t = t->next)
		t->mark = t->resolved && flit_ctx_wants(tp->ctx, t->topic);
	flit_ctx_each_sub(tp->ctx, target_add, &b);
	for (struct rtarget **pp = &tp->targets; *pp;) {
		if ((*pp)->mark)
			pp = &(*pp)->next;
		else
			target_drop(tp, pp);
	}
	tp->dirty = false;
	tp->next_house = 0; /* connect soon */
}

static int rdma_subs_changed(struct flit_tp *tp)
{
	if (tp->in_poll) {
		tp->dirty = true; /* a callback changed subscriptions: after the poll */
		return 0;
	}
	rebind(tp);
	return 0;
}

static int housekeeping(struct flit_tp *tp, uint64_t now)
{
	tp->now = now;
	int ev = rx_cm_events(tp, now);

	/* a resolved source that stopped advertising and cannot be reached
	 * is forgotten (it moved, or it is gone for good) */
	uint64_t expiry = 3 * (uint64_t)tp->cc->udp_resolver_max_ms * MS + 1000 * MS;
	for (struct rtarget **pp = &tp->targets; *pp;) {
		struct rtarget *t = *pp;
		if (t->resolved && now - t->heard > expiry && (!t->c || t->c->state != RC_UP)) {
			flit_info("rdma: '%s': source at %s no longer advertised; forgotten", t->topic, t->ep);
			target_drop(tp, pp);
		} else {
			pp = &t->next;
		}
	}
	for (struct rtarget *t = tp->targets; t; t = t->next)
		if (!t->c && now >= t->retry_at)
			rconn_start(tp, t, now);
	/* credits of a stream that stopped (a running one returns them every
	 * depth/4 frames), and the keepalive */
	for (struct rconn *c = tp->rconns; c; c = c->next) {
		if (c->state == RC_UP &&
		    ((c->freed != c->written && c->received == c->rx_seen) ||
		     now - c->last_write >= KEEPALIVE_NS))
			credit_write(c, true);
		c->rx_seen = c->received;
	}
	tp->next_house = now + HOUSE_NS;
	return ev;
}

static int rdma_poll(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg)
{
	int total = 0;

	tp->in_poll = true;
	for (struct rconn *c = tp->rconns; c && total < limit; c = c->next)
		if (FLIT_LIKELY(c->state == RC_UP))
			total += rconn_poll(tp, c, limit - total, fn, arg);
	/* timers: a clock read every IDLE_POLLS polls */
	if (FLIT_UNLIKELY(++tp->idle >= (tp->nup ? IDLE_POLLS : IDLE_POLLS_CONNECTING))) {
		tp->idle = 0;
		uint64_t now = mono();
		if (now >= tp->next_house)
			total += housekeeping(tp, now);
	}
	for (struct rconn *c = tp->rconns, *next; c; c = next) {
		next = c->next;
		if (FLIT_UNLIKELY(c->broken) && c->state == RC_UP)
			total += rconn_down(tp, c, mono());
	}
	tp->in_poll = false;
	if (FLIT_UNLIKELY(tp->dirty))
		rebind(tp);
	return total;
}

/* ---- the transport ------------------------------------------------------------ */

static void describe_update(struct flit_tp *tp, const struct rsrc *s)
{
	char where[48] = "-";
	size_t off = 0;

	off += (size_t)snprintf(tp->desc + off, sizeof(tp->desc) - off, "rdma: RC, device%s",
				tp->ndev > 1 ? "s" : "");
	for (unsigned i = 0; i < tp->ndev && off < sizeof(tp->desc); i++)
		off += (size_t)snprintf(tp->desc + off, sizeof(tp->desc) - off, "%s%s", i ? "," : " ",
					dev_name(tp->dev[i].verbs));
	if (tp->lid)
		flit_ep_str(&tp->laddr, where, sizeof(where));
	if (off < sizeof(tp->desc) && s)
		snprintf(tp->desc + off, sizeof(tp->desc) - off,
			 "; sources listen on %s, %s, frames <= %u B, %u slots, inline <= %u B",
			 where, s->mode == FLIT_RDMA_WIRE_WRITE ? "RDMA WRITE with immediate" : "SEND/RECV",
			 s->frame_max, s->nslots, s->inline_max);
}

static int rdma_open(struct flit_ctx *ctx, struct flit_tp **out)
{
	struct ibv_device **list;
	int n = 0;

	/* the library's own question first, for a clear answer */
	list = ibv_get_device_list(&n);
	if (list)
		ibv_free_device_list(list);
	if (!list || n <= 0)
		return flit_err(ENODEV, "rdma: no RDMA device (ibv_get_device_list found none%s%s: no RDMA NIC, "
				"no Soft-RoCE/rxe device, or no RDMA support in this kernel)",
				list ? "" : ": ", list ? "" : strerror(errno));
	struct flit_tp *tp = calloc(1, sizeof(*tp));
	if (!tp)
		return flit_err(ENOMEM, "rdma: out of memory");
	tp->ctx = ctx;
	tp->cc = flit_ctx_cfg(ctx);
	tp->domain = flit_domain_id(tp->cc->domain);
	tp->wakefd = -1;
	pthread_mutex_init(&tp->lock, NULL);
	int err;
	tp->devlist = rdma_get_devices(&n);
	if (!tp->devlist || n <= 0) {
		err = flit_err(ENODEV, "rdma: no RDMA device (rdma_get_devices found none)");
		goto fail;
	}
	for (int i = 0; i < n && i < MAX_DEVS; i++) {
		tp->dev[i].verbs = tp->devlist[i];
		tp->dev[i].pd = ibv_alloc_pd(tp->devlist[i]);
		if (!tp->dev[i].pd) {
			err = flit_err(errno, "rdma: cannot allocate a protection domain on %s: %s",
				       dev_name(tp->devlist[i]), strerror(errno));
			goto fail;
		}
		tp->ndev++;
	}
	tp->rch = rdma_create_event_channel();
	if (!tp->rch) {
		err = flit_err(errno, "rdma: cannot create an event channel: %s (is rdma_ucm loaded?)",
			       strerror(errno));
		goto fail;
	}
	if ((err = nonblock(tp->rch->fd))) {
		err = flit_err(-err, "rdma: event channel: %s", strerror(-err));
		goto fail;
	}
	describe_update(tp, NULL);
	*out = tp;
	return 0;
fail:
	if (tp->rch)
		rdma_destroy_event_channel(tp->rch);
	for (unsigned i = 0; i < tp->ndev; i++)
		ibv_dealloc_pd(tp->dev[i].pd);
	if (tp->devlist)
		rdma_free_devices(tp->devlist);
	pthread_mutex_destroy(&tp->lock);
	free(tp);
	return err;
}

static void rdma_close(struct flit_tp *tp)
{
	while (tp->rconns) {
		struct rconn *c = tp->rconns;
		if (c->rs)
			flit_rx_session_end(c->rs, 0);
		c->rs = NULL;
		rconn_free(tp, c);
	}
	while (tp->targets) {
		struct rtarget *t = tp->targets;
		tp->targets = t->next;
		free(t);
	}
	listen_stop(tp);
	rdma_destroy_event_channel(tp->rch);
	for (unsigned i = 0; i < tp->ndev; i++)
		ibv_dealloc_pd(tp->dev[i].pd);
	rdma_free_devices(tp->devlist);
	pthread_mutex_destroy(&tp->lock);
	free(tp);
}

static const char *rdma_describe(const struct flit_tp *tp)
{
	return tp->desc;
}

const struct flit_transport_ops flit_rdma_ops = {
	.name = "rdma",
	.caps = FLIT_CAP_RELIABLE | FLIT_CAP_ZERO_COPY,
	.open = rdma_open,
	.close = rdma_close,
	.src_open = rdma_src_open,
	.src_close = rdma_src_close,
	.send = rdma_send,
	.claim = rdma_claim,
	.commit = rdma_commit,
	.abort = rdma_abort,
	.flush = rdma_flush,
	.receivers = rdma_receivers,
	.max_msg = rdma_max_msg,
	.next_seq = rdma_next_seq,
	.src_counters = rdma_src_counters,
	.subs_changed = rdma_subs_changed,
	.poll = rdma_poll,
	.describe = rdma_describe,
	.res_found = rdma_res_found,
};
