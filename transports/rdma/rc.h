/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The rdma transport: reliable-connected queue pairs set up with librdmacm,
 * carrying the codec's frames: one connection per (source session,
 * receiving context).
 *
 * Sessions.  The publishers of a context that share their source settings
 * share one session by default, as over udp (source.session = NAME groups
 * them by name, = own gives a publisher a session of its own; a publisher
 * with source.late_join and no name has its own): one slot ring, one
 * sequence space, one set of connections, frames that mix their messages
 * (each carries its topic's index and, once the session has had a second
 * topic, its topic's own number: FLIT_FF_TSEQ).  Up to 65,536 topics a
 * session.  A topic added to a running session is named to its
 * connections by an INFO page in the stream, before its first message; a
 * publisher that closes ends its topic with an INFO ENDED (its final
 * number) in the stream; the last one ends the session (HB END).
 *
 * Source side.  A context that publishes over rdma listens with rdma_cm on
 * context.rdma.address:port.  A receiver connects with a topic it wants
 * (an FNV-1a 64 hash in the connect request's private data, with its
 * receive buffers: count = credits, size, and their address and rkey); the
 * context's connection thread (flit-rdma, asleep in poll() between CM
 * events) finds the topic's session, creates the QP and accepts (private
 * data: the session, the address of the credit counter the receiver
 * writes, the data path).  Once established the connection catches up:
 * INFO naming every live topic of the session (one INFO for a session of
 * one topic, else pages, with each topic's next number when no frame is
 * open), then the frames kept for it (late join) or built since, from the
 * slots, as its credits allow; then it takes the live stream.  Meanwhile
 * the others go on, until the slot ring is full of frames it has not had.
 * A send builds its frame in a registered slot of the session's slot ring
 * and posts it to every connection: SEND into the receiver's next buffer,
 * or RDMA WRITE with immediate (the frame length) into the same buffer, by
 * source.rdma.mode; inline when it fits.  Sends are signalled every
 * slots/4 work requests; a slot is reused when every connection has
 * completed the frame that used it before.
 *
 * Flow control.  Each frame consumes one receive buffer.  The receiver
 * returns buffers by RDMA-writing a cumulative "freed" counter into the
 * source's memory (every depth/4 buffers, when the frames stop, and once a
 * second as a keepalive).  A session whose receiver has no buffer left (one
 * is kept for the END frame), or whose send queue or slot ring is full,
 * polls its completion queues once and then returns FLIT_BACK_PRESSURED:
 * nothing is sent to anyone (all or nothing, so no receiver sees a gap).
 * A slow receiver slows its source; nothing is dropped.
 *
 * Receive side.  For each subscribed topic with receiver.rdma.static =
 * addr:port, or found by resolution, a receiver wants a connection to the
 * source context there; topics of one session share one (a target whose
 * topic a connection's session names, or whose session resolution told,
 * takes that connection; two connections that turn out to be to one
 * session become one).  Connections are driven from flit_ctx_poll()
 * (rdma_cm events on a non-blocking channel, looked at about every
 * millisecond).  Completion queues are polled without a system call; a
 * buffer is re-posted once its frame has been delivered.  INFO starts the
 * session (BOS for each wanted topic it names); INFO ENDED ends topics;
 * HB with FLIT_HBF_END ends the session (EOS); a disconnect, a failed work
 * request or a silent peer ends it with FLIT_MSGF_SOURCE_DIED after the
 * frames already received are delivered.  Failed or lost connections are
 * retried after receiver.rdma.retry_ms, backing off to ten times that; the
 * reason (no listener, no such topic, unreachable) is logged once per
 * change.
 *
 * The files: rc.h (this: the state both sides share), rc_src.c (the source
 * side: sessions, sending, open and close), rc_conn.c (the source side's
 * connections: listener, connection thread, accept, naming and catch-up),
 * rc_rx.c (the receive side), rdma.c (devices, open and close, the
 * transport's operations), wire.c (the connection messages, rdma.h).
 *
 * Why SEND by default, not WRITE with immediate: docs/PROTOCOL.md, "RDMA
 * connections".  Verbs return positive error numbers (ibv_post_*) or -1 with
 * errno (librdmacm, ibv_create_*): converted here to -errno.
 */
#ifndef FLIT_RDMA_RC_H
#define FLIT_RDMA_RC_H

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

/* ---- state --------------------------------------------------------------------- */

/* Source side: the block a connection registers for its receiver: the
 * credit counter the receiver writes, and the frame only this connection
 * sends (END). */
struct sblk {
	_Alignas(64) volatile uint64_t freed; /* buffers the receiver re-posted, cumulative */
	uint8_t pad[56];
	uint8_t end[64];
};

struct rsess;

struct sconn {                   /* source side: one receiver */
	struct sconn *next;          /* tp->sconns (tp->lock) */
	struct flit_tp *tp;
	struct rsess *src;           /* NULL once detached (tp->lock) */
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct sblk *blk;
	unsigned dev;
	uint8_t mode;                /* enum flit_rdma_wire_mode */
	uint32_t depth, bufsz, rkey, inl, sq;
	uint64_t ring;
	uint64_t rcv_id;             /* the receiving context (REQ) */
	uint64_t want;               /* the topic it asked for (REQ topic_hash) */
	/* the rest: the session's lock */
	uint64_t sent;               /* receive buffers consumed */
	uint64_t limit;              /* sent may reach it (cached credits) */
	uint64_t wr_posted, wr_done, last_sig;
	uint64_t first_frame;        /* the first session frame posted here */
	/* planned at accept (late join, or a receiver older than the source):
	 * replay retained frames from replay_from, INFO's seq, how many
	 * messages before the live stream are the retained ones */
	uint64_t replay_from, info_seq;
	uint32_t late;
	bool replay;
	/* catching up (established, not yet in the live stream): INFO pages
	 * naming the session's topics of indexes name_next .. name_end (those
	 * added later are named in the stream), built as its credits allow
	 * (the session's lock is not held for 100,000 names at once) into a
	 * ring of pg_n registered buffers (pg_wr: the request that last used
	 * each), all at name_seq; then the frames from catch_next on, from
	 * their slots */
	bool catching;
	uint8_t *pgbuf;
	struct ibv_mr *pg_mr;
	uint64_t *pg_wr;
	unsigned pg_n, pages;
	uint32_t name_next, name_end;
	uint64_t name_seq;
	uint64_t catch_next;
	uint64_t names_wr;           /* the pages' last request: once done, the ring goes */
	uint64_t frames_done;        /* frames below it have completed */
	uint64_t sig_head, sig_tail;
	struct { uint64_t wr, frames; } sig[SIG_RING];
	bool established, dead, end_posted, end_done;
	char peer[48];
};

/* A publisher: one topic of a session (the transport's flit_tsrc).  Its
 * messages carry idx (and, in a session of several topics, next_tseq). */
struct rtopic {
	struct rsess *ss;
	struct rtopic *hnext;        /* tp->tphash chain (tp->lock) */
	uint32_t idx;                /* topic index in the session's DATA */
	uint64_t next_tseq;          /* the topic's own number of its next message */
	uint64_t hash;               /* flit_rdma_topic_hash() */
	uint64_t msgs_sent, bytes_sent;
	bool advertised;             /* on the resolver channel (flit_ctx_res_advertise) */
	char topic[FLIT_TOPIC_MAX + 1];
};

#define RC_TOPICS_MAX   65536    /* topic indexes 0 .. 65535 */
#define RC_SESS_NAME    64       /* source.session */

/* A source session: one slot ring, sequence space and set of connections
 * for its publishers' topics.  The lock covers everything but the list
 * links. */
struct rsess {
	pthread_mutex_t lock;        /* the fields below, conns, and posting */
	struct rsess *next;          /* tp->srcs (tp->lock) */
	struct flit_tp *tp;
	char label[FLIT_TOPIC_MAX + 1]; /* for messages: its first topic, or
					 * "session NAME" */
	char name[RC_SESS_NAME];     /* source.session's name; "" unnamed */
	bool own;                    /* source.session = own (or late join) */
	char cfgkey[200];            /* the settings its publishers share */
	struct rtopic **topics;      /* by index; NULL: free (ended) */
	unsigned ntopics, captopics, live;
	unsigned lead;               /* the lowest index in use: its publisher
				      * reports the session's counters */
	bool tseq;                   /* several topics (once a second came):
				      * every message carries its topic's number */
	bool paged;                  /* told in INFO pages (named, or several topics) */
	uint32_t *ann;               /* added, to be named before the next frame:
				      * ann[ann_head .. nann) (an index whose topic
				      * closed meanwhile is skipped) */
	unsigned nann, ann_head, capann;
	struct rtopic **endq;        /* closed, their ends to be told before the
				      * next frame (each freed once told) */
	unsigned nend, end_head, capend; /* endq[end_head .. nend) */
	struct sconn **conns;        /* established: catching up or in the fan-out */
	unsigned nconns, capconns, ncatching;
	uint8_t *slots;
	size_t stride, slots_len;
	uint32_t nslots, sig_every;
	struct ibv_mr *mr[MAX_DEVS];
	uint64_t nframes;            /* frames posted: the next frame's number */
	uint8_t *frame;              /* the frame being built (its slot), or NULL */
	uint32_t flen;
	uint16_t fcount;
	uint8_t *claim;              /* a claimed message's payload */
	uint32_t claim_max;
	struct rtopic *claimer;      /* whose claim is open */
	pthread_t claim_thread;
	uint64_t next_seq;
	uint64_t created;            /* CLOCK_MONOTONIC */
	uint32_t late_join;          /* source.late_join: frames kept with no receiver */
	uint32_t session;
	bool ts, batch;
	uint8_t mode;
	uint32_t frame_max, frame_cap;
	size_t max_msg;
	uint32_t inline_max;
	struct flit_counters c;      /* frames_sent, back_pressured, readers_evicted */
	struct flit_counters c_base; /* c when the lead was last handed on */
};

/* Receive side (the polling thread only). */
enum rc_state { RC_ADDR, RC_ROUTE, RC_CONNECTING, RC_UP, RC_DOWN };

struct rtarget;

struct rconn {                   /* receiver: one connection to a source session */
	struct rconn *next;          /* tp->rconns */
	struct flit_tp *tp;
	struct rtarget *t;           /* the target it was made for (its failures
				      * are told there), or another that uses it;
				      * NULL: none uses it any more */
	struct sockaddr_in sa;       /* the source context's listener */
	unsigned refs;               /* targets that use it */
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
	/* the topics its session named, by flit_rdma_topic_hash(): their
	 * index (open addressing; a stale entry fails the name check) */
	uint64_t *nkey;
	uint32_t *nidx;
	unsigned ncap, nn;
	bool ended, broken, bad; /* bad: the peer broke the protocol */
	bool paged;                  /* its session is told in INFO pages */
	bool merged;                 /* a second connection to a session we
				      * have one to: its targets went there */
	uint64_t last_write;
	char name[64];
};

struct rtarget {                 /* a topic we connect for, and where */
	struct rtarget *next;
	struct rtarget *hnext;       /* tp->thash chain */
	struct sockaddr_in sa;
	char ep[24];
	uint64_t hash;
	struct rconn *c;             /* the connection to its session, shared */
	uint32_t session;            /* resolved: the session advertised (0: not known) */
	uint32_t depth, bufsz, retry_ms, delay_ms;
	uint64_t retry_at;
	uint64_t attached;           /* when it took its connection */
	bool anew;                   /* its next request asks the source to drop
				      * a connection of ours it still counts */
	uint32_t why;                /* the last failure's text hashed (0: none):
				      * logged once per change */
	bool mark;
	bool resolved;               /* found by resolution, not the static map */
	uint64_t heard;              /* resolved: its last advertisement */
	char topic[];                /* (a pattern subscriber's: 100,000 of them) */
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
	struct rsess *srcs;
	struct rtopic **tphash;      /* the open publishers by topic hash */
	unsigned tpcap, ntp;
	struct sconn *sconns;
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	struct sockaddr_in laddr;    /* bound listen address */
	int wakefd;
	pthread_t thread;
	bool thread_on, stop;

	/* receive side: the polling thread */
	uint64_t rcv_id;            /* this context in its connect requests */
	struct rdma_event_channel *rch;
	struct rtarget *targets;
	struct rtarget **thash;     /* targets by topic and listener */
	unsigned thcap, ntargets;
	struct rconn *rconns;
	struct rconn *rr;           /* where the next poll starts (NULL: the head) */
	uint64_t next_house, now;   /* now: the last housekeeping's clock */
	uint64_t next_check;        /* targets on connections that do not name them */
	unsigned idle, nup;         /* nup: connections up */
	bool in_poll, dirty, pattern_warned;
};

static inline uint64_t mono(void)
{
	return flit_monotonic_now();
}

/* ---- the source side's helpers (rc_src.c, rc_conn.c) ---- */

static inline uint8_t *slot_of(const struct rsess *s, uint64_t f)
{
	return s->slots + (f & (s->nslots - 1)) * s->stride;
}

static inline void src_lock(struct rsess *s) { pthread_mutex_lock(&s->lock); }
static inline void src_unlock(struct rsess *s) { pthread_mutex_unlock(&s->lock); }

/* Re-read a connection's credit counter; the receiver writes it. */
static inline void conn_credits(struct sconn *c)
{
	uint64_t freed = __atomic_load_n(&c->blk->freed, __ATOMIC_ACQUIRE);
	/* a receiver frees what it received, never more: anything else is
	 * a torn or bogus write, and the next one will be whole */
	if (freed <= c->sent)
		c->limit = c->depth + freed - 1; /* one buffer stays for END */
}

/* Connection c can take one more request now. */
static inline bool conn_room(const struct sconn *c)
{
	return c->sent < c->limit && c->wr_posted - c->wr_done < c->sq - 2 &&
	       c->sig_tail - c->sig_head < SIG_RING - 2;
}

/* rdma.c: the devices, and what both sides use */
int rc_dev_index(const struct flit_tp *tp, const struct ibv_context *verbs);
const char *rc_dev_name(const struct ibv_context *verbs);
struct ibv_mr *rc_reg_mr(struct ibv_pd *pd, void *p, size_t len, int access, const char *what);
int rc_nonblock(int fd);
void rc_describe_update(struct flit_tp *tp, const struct rsess *s);

/* rc_src.c: sending (the application's threads, session lock held) */
int rc_conn_post(struct sconn *c, const void *buf, uint32_t len, uint32_t lkey,
		 uint64_t frames, bool force_sig, uint32_t sig_every);
int rc_conn_reap(struct sconn *c);
void rc_src_progress(struct rsess *s);
int rc_src_pending(struct rsess *s);
size_t rc_info_encode(const struct rsess *s, uint8_t *buf, size_t cap, uint64_t seq,
		      const uint32_t *idx, unsigned n, bool nums, bool ended,
		      const struct rtopic *gone, unsigned *took);
struct rtopic *rc_topic_of_hash(const struct flit_tp *tp, uint64_t hash);
/* rc_conn.c: connections (the connection thread, tp->lock held) */
int rc_listen_start(struct flit_tp *tp);
void rc_conn_catchup(struct rsess *s, struct sconn *c);
void rc_conn_names_free(struct sconn *c);
/* rc_src.c: the source side's operations */
int rdma_src_open(struct flit_tp *tp, const char *topic,
		  const struct flit_cfg_source *cfg, struct flit_tsrc **out);
void rdma_src_close(struct flit_tsrc *ts);
int rdma_send(struct flit_tsrc *ts, const void *data, size_t len);
int rdma_claim(struct flit_tsrc *ts, size_t len, void **buf);
int rdma_commit(struct flit_tsrc *ts, size_t len);
int rdma_abort(struct flit_tsrc *ts);
int rdma_flush(struct flit_tsrc *ts);
int rdma_receivers(struct flit_tsrc *ts);
size_t rdma_max_msg(const struct flit_tsrc *ts);
uint64_t rdma_next_seq(const struct flit_tsrc *ts);
void rdma_src_counters(const struct flit_tsrc *ts, struct flit_counters *c);
void rc_listen_stop(struct flit_tp *tp);
/* Wake the connection thread (it moves connections that catch up on). */
void rc_wake(struct flit_tp *tp);

/* rc_rx.c: the receive side (the polling thread) */
int rdma_poll(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg);
int rdma_subs_changed(struct flit_tp *tp);
void rdma_res_found(struct flit_tp *tp, const struct flit_res_ad *ad);
void rc_rx_close(struct flit_tp *tp);

#endif /* FLIT_RDMA_RC_H */
