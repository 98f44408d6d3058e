/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The session layer of the udp and xdp transports (internal to
 * transports/dgram/): UDP multicast (and unicast) sessions with topic
 * resolution and NAK reliability (userspace/rel.h), in the manner of
 * LBT-RM, over a datagram path: kernel sockets (udp) or AF_XDP (xdp).
 *
 * A source (one per publisher) owns one UDP socket: it sends DATA frames to
 * its multicast group:port (or to each joined receiver in unicast mode), and
 * receives NAKs, "who is session" queries and joins on it.  Its session is
 * advertised on the resolver channel (a multicast group per domain) with a
 * backoff, and whenever a query matches.  Retransmissions, NCFs, heartbeats,
 * adverts and idle-batch flushes are the source-side service, run by a
 * context thread (context.udp.service = thread, default) or by
 * flit_ctx_poll() (= poll).  Sources are locked (a mutex per source) so the
 * application's send and the service never race; the receive side belongs
 * to the polling thread alone and takes no lock.
 *
 * The receive side keeps one socket per multicast group:port it listens on,
 * one unicast socket (queries, NAKs and joins go out on it; INFO replies and
 * unicast data come back to it), and a resolver socket that hears adverts.
 * A session is bound when an INFO names a wanted topic: the receiver starts
 * at the INFO's next sequence number, joins the group and sends JOIN to the
 * source (keepalive once a second: the source counts its receivers and, in
 * unicast mode, sends to them).
 *
 * RDMA multicast (source.rdma.mode = multicast; flit_rdma_mc_ops) is this
 * code with a UD data path (transports/rdma/ud_path.h): DATA goes once to
 * the session's group as RDMA multicast, every joined receiver's queue pair
 * gets it; its INFO has mode FLIT_MODE_RDMA_MCAST (udp and xdp contexts
 * leave such sessions alone, as this one leaves theirs).  Everything else
 * (NAKs, retransmissions, heartbeats, joins, resolution) goes over the
 * kernel sockets as for udp: the group:port sockets stay, and the poll reads
 * them when the UD queue has been empty for XK_IDLE_POLLS polls and at
 * housekeeping, as xdp reads its kernel sockets.
 *
 * The xdp transport is this code with an AF_XDP data path
 * (transports/xdp/xdp_path.h): DATA and session control frames on the flows
 * we listen on (the groups joined and the unicast socket's port) are
 * steered by flit's XDP program to AF_XDP sockets and received there; DATA
 * is sent through them (frames built byte for byte as the kernel would).
 * The kernel sockets stay: they join the groups (IGMP, NIC filters), send
 * NAKs, joins, queries and the service's frames, hear the resolver, and are
 * drained at housekeeping for what XDP hands to the kernel (fragments, no
 * socket in the slot after a detach).
 *
 * The files of transports/dgram/, and what each one holds:
 *   session.h      this: the constants, the state (struct flit_tp, sources,
 *                  remote sessions), the functions the files share (dg_*)
 *   sockets.c      kernel sockets: set-up, multicast groups, the group:port
 *                  sockets the receive side listens on
 *   rx_session.c   remote sessions: bind, late join, INFO, each datagram's
 *                  way to the reliability layer, draining a datagram path
 *   rx_resolve.c   the receive side's resolution (queries, static maps,
 *                  rebinding) and its timers (housekeeping)
 *   source.c       sources: send, claim/commit, flush, counters
 *   service.c      the source side's service (NAKs, queries, joins,
 *                  heartbeats, adverts) and the context's service thread
 *   transport.c    timestamps set-up, open/close, poll: the udp, xdp and
 *                  rdma multicast transport operations (flit_udp_ops,
 *                  flit_xdp_ops, flit_rdma_mc_ops)
 *   dgram.h, impair.c  the datagram every path hands over, and the test
 *                  impairment around any path
 * The datagram paths themselves live with their transports: kernel
 * sockets and io_uring in transports/udp/udp_io.h, AF_XDP in
 * transports/xdp/xdp_path.h, RDMA multicast in transports/rdma/ud_path.h;
 * none depends on another.
 *
 * Wire format: docs/PROTOCOL.md.  Settings: docs/CONFIG.md (context.udp.*,
 * context.xdp.*, source.udp.*, receiver.udp.*).
 */
#ifndef FLIT_DGRAM_SESSION_H
#define FLIT_DGRAM_SESSION_H

#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/net_tstamp.h>
#include <linux/sockios.h>

#include <flit/tstamp.h>

#include "core.h"
#include "ctl.h"
#include "rel.h"
#include "txts.h"
#include "udp/udp_io.h"     /* the kernel sockets' datagram path */
#include "xdp/xdp_path.h"    /* the AF_XDP datagram path */
#include "rdma/ud_path.h"    /* the RDMA multicast (UD) datagram path */

#define MS  1000000ull
#define US  1000ull
#define RX_DGRAM_MAX   65507u
#define CTL_BUF        2048u
#define HOUSE_NS       (5 * MS)   /* housekeeping period when no timer is due sooner */
#define JOIN_NS        (1000 * MS)/* receiver keepalive to its sources */
#define LATE_WAIT_NS   (20 * MS)  /* a joining receiver waits this for LATE (doubling) */
#define LATE_TRIES     3
#define XK_IDLE_POLLS  32         /* xdp: empty polls between clock reads, at most */
#define XK_IDLE_NS     (20 * 1000) /* ... as many as take about this long */
#define RCV_EXPIRE_NS  (3500 * MS)/* a source forgets a silent receiver */
#define QUERY_MIN_NS   (10 * MS)
#define QUERY_EXACT_MAX_NS (1000 * MS)
#define ADVERT_MIN_NS  (10 * MS)
#define UNKNOWN_QUERY_NS (200 * MS)
#define NUNK 16
#define NENDED 32
#define NNEWSRC 256      /* sources heard, not wanted: remembered for the query they trigger */
#define NEWSRC_QUERY_NS (100 * MS) /* at most one query a new source triggers, this often */
#define MAX_SOCKS 64        /* group:port sockets per context */
#define MAX_SESS 4096       /* remote sessions known per context */
#define FLIT_SESSION_NAME_MAX 63  /* source.session */
#define MAX_TOPICS_PER_SESS 65536 /* topic indexes 0 .. 65535 */
#define ANN_MAX 128         /* topics announced in one page */
#define ANSWERS_MAX 64      /* askers a session answers at once */

#ifndef SO_BUSY_POLL
#define SO_BUSY_POLL 46
#endif
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif

/* ---- receive side --------------------------------------------------------- */

struct rsock {                  /* a multicast group:port we listen on */
	struct rsock *next;
	struct in_addr group;
	uint16_t port;
	unsigned refs;              /* 0: closed after the current poll */
	unsigned want;              /* adaptive receive batch */
	struct flit_udp_io *io;
};

struct rsess {                  /* a remote source's session */
	struct rsess *next;
	struct flit_tp *tp;
	uint32_t id;
	struct sockaddr_in ctl;     /* NAKs, joins, queries go here */
	uint8_t mode;
	struct in_addr group;
	uint16_t port;
	unsigned ntopics, captopics; /* the topics INFO named: index, name */
	/* topics of a shared session that ended (INFO ENDED) with messages
	 * still to deliver: each ends once the session's data reaches seq */
	struct { uint32_t idx; uint64_t seq, final; } pend_end[16];
	unsigned npend_end;
	uint32_t *tidx;
	char **tname;
	uint32_t *pos;              /* by topic index: its place in tidx + 1 (0: none) */
	unsigned npos;
	struct rsock *sock;         /* multicast: the socket data comes on */
	struct flit_rx_session *core; /* bound: some subscriber wants it */
	uint64_t unnamed_seen;      /* core->unnamed when last looked at */
	uint64_t idq_at;            /* last query by id for unnamed topics */
	struct flit_rel_rx *rel;
	const void *cur;            /* the datagram being handled (stamps) */
	uint64_t cur_ts;
	uint32_t cur_ts_flags;
	uint64_t timeout_ns;
	uint64_t last_heard, next_join;
	/* joining: waiting for the source's LATE answer (where to start);
	 * data that comes meanwhile is held and replayed once started */
	bool lj_wait;
	unsigned lj_tries;
	uint64_t lj_at;             /* ask again (or give up) at */
	uint64_t lj_fallback;       /* start here if the source never answers */
	struct held *held;          /* data that came while waiting, to replay */
	unsigned nheld, capheld;
	/* and pages' topic numbers (FLIT_INFOF_NEXT) at their seq, for where
	 * the session starts */
	struct { uint64_t seq, num; uint32_t idx; } *nexts;
	unsigned nnexts, capnexts;
	size_t held_bytes;
	/* xdp: parted (rx_part.c): frames of none of its wanted topics are
	 * dropped in XDP and told to rel as skipped */
	bool parted;
	bool part_eval;             /* decided, for the topics named so far */
	bool part_failed;           /* the program's tables refused: not again
				     * until subscriptions change */
	uint32_t xnamed;            /* the program's bound: indexes at or above it
				     * are steered (only grows) */
	uint32_t xtop;              /* highest index named here + 1 */
	uint32_t xgen;              /* this parting's generation (its records) */
};

/* A datagram kept while a joining receiver waits for LATE. */
struct held { uint8_t *f; uint32_t len, count; uint64_t seq; };
#define HELD_MAX_BYTES (4u << 20)

/* ---- source side ------------------------------------------------------------ */

struct urcv { struct sockaddr_in a; uint64_t expires; };

/* When a source's INFO goes to the resolver channel next: ADVERT_MIN_NS
 * after its creation, then doubling to context.udp.resolver_max_ms, and
 * soon after a matching query (advert_soon()). */
struct advert { uint64_t at, ivl, last; };

/* A publisher: one topic of a source session (the transport's flit_tsrc).
 * Its messages carry idx; the session does the rest.  Held by its
 * publisher (src_size in transport.c's SESSION_OPS): what a send reads and
 * writes first, in the publisher's first line (FLIT_SRC_HOT bytes). */
struct utopic {
	struct usess *ss;
	uint64_t next_tseq;          /* the topic's own number of its next message */
	uint64_t msgs_sent, bytes_sent;
	uint32_t idx;                /* topic index in the session's DATA */
	/* transmit stamps on (the session's txts), the session of several
	 * topics: which session number the topic's recent messages had (by
	 * topic number) */
	struct { uint64_t tseq, seq; } *txmap;
	char topic[FLIT_TOPIC_MAX + 1];
};
_Static_assert(offsetof(struct utopic, idx) + sizeof(uint32_t) <= FLIT_SRC_HOT,
	       "a datagram send's state of its topic in its publisher's first line");

/* A source session: one socket, one sequence space, one retention and
 * NAK state, heartbeats, adverts and frames, for one topic (each publisher
 * its own session, the default) or for the topics of every publisher of
 * the context that names the session (source.session), whose messages
 * share its frames.  The lock covers everything but the list links. */
struct usess {
	struct usess *next;
	struct flit_tp *tp;
	pthread_mutex_t lock;
	char topic[FLIT_TOPIC_MAX + 1]; /* for messages: the first topic, or
					 * "session NAME" of a named session */
	char name[FLIT_SESSION_NAME_MAX + 1]; /* source.session's name; "" unnamed */
	bool own;                    /* source.session = own: no other publisher's */
	char cfgkey[400];            /* the settings its publishers must share */
	struct utopic **topics;      /* by index; NULL: free (ended) */
	unsigned ntopics, captopics, live;
	unsigned lead;               /* the lowest index in use: its publisher
				      * reports the session's counters */
	unsigned page;               /* the next topic an advert page starts at */
	struct utopic *claimer;      /* whose claim is open */
	uint32_t session;
	int fd;
	struct flit_udp_io *io;      /* the application thread's data sends */
	struct sockaddr_in self;     /* bound address (port: ctl port) */
	struct sockaddr_in dest;     /* multicast group:port */
	uint8_t mode;
	struct urcv *rcv;            /* joined receivers */
	unsigned nrcv, caprcv;
	struct flit_rel_tx *rel;
	struct flit_ratelimit rl;
	bool rate_on;
	bool ts, batching;
	bool tseq;                   /* several topics (once a second joined): every
				      * message carries its topic's number */
	bool short_hdr;              /* ... in short headers (FLIT_FF_SHORT):
				      * source.udp.topic_numbers = short, until a
				      * topic's number passes 2^32 - 1 (then
				      * long headers for good) */
	uint32_t max_dgram, batch_min;
	uint64_t batch_ivl, batch_t0;
	uint8_t *buf;                /* the frame being built */
	uint32_t flen;
	uint16_t count;
	uint64_t next_seq;           /* of the next message */
	uint64_t created;            /* CLOCK_MONOTONIC */
	uint32_t late_join;          /* source.late_join */
	bool claimed;
	pthread_t claim_thread;      /* whose claim is open */
	uint8_t *claim_pl;
	struct advert adv;
	/* topics added that the session's receivers have not been told of:
	 * one page (dg_src_announce) before the next frame, or at the
	 * service */
	uint32_t ann[ANN_MAX];
	unsigned nann;
	struct answer *ans[ANSWERS_MAX]; /* INFO pages owed to askers, paced */
	unsigned nans, ans_next;     /* the asker whose page goes next */
	struct flit_txts *txts;      /* transmit stamps (context.udp.tx_timestamps), or NULL */
	struct flit_counters c;      /* msgs/bytes/frames sent, naks, retx, ... */
	struct flit_counters c_base; /* c when the lead was last handed on */
	uint8_t ctl[CTL_BUF] __attribute__((aligned(8)));
};

/* Another transport's source session (rdma) advertised on the resolver
 * channel, as a shared session of ours is: one page of its topics per
 * advert (the next page the next time), and the pages of what a QUERY
 * names to the asker, paced. */
struct fad {
	struct fad *next;
	uint32_t session;
	uint8_t mode;
	uint32_t addr;               /* network order; 0: our address */
	uint16_t port;
	char **topics;               /* its topics, in no order */
	unsigned ntopics, captopics;
	/* where each topic is in topics[] (a withdraw of one of 100,000):
	 * open addressing by FNV-1a 64 | 2 (0 free, 1 removed) */
	struct { uint64_t h; uint32_t pos; } *hx;
	unsigned hcap, hused;
	unsigned page;               /* the next topic an advert page starts at */
	struct advert adv;
	struct answer *ans[ANSWERS_MAX]; /* pages owed to askers */
	unsigned nans;
};

#define MAX_FOUND 1024          /* topics resolved to another transport */

struct flit_tp {
	struct flit_ctx *ctx;
	const struct flit_cfg_context *cc;
	uint32_t domain;
	struct in_addr ifaddr;       /* 0: let routing choose */
	unsigned ifindex;
	struct flit_udp_io_cfg iocfg;
	struct sockaddr_in resolver; /* port 0: multicast resolution off */
	struct flit_ts_status ts;    /* what this context stamps (flit_ctx_ts_status) */

	/* receive side: the polling thread only */
	struct rsock *socks;
	struct rsess *sess;
	struct rsess *last;
	struct flit_udp_io *ucast;
	struct flit_udp_io *res_rx;
	unsigned ucast_want, res_want;
	struct flit_xdp_path *xp;    /* xdp transport: the AF_XDP data path */
	struct flit_xsk *xk;
	struct flit_impair *xk_im;   /* impairment around xk (tests), or NULL */
	struct sockaddr_in ucast_self; /* the unicast socket's address */
	char desc[1024];             /* xdp with stamps: ~700 */
	unsigned xk_want, xk_idle;
	unsigned xk_skip;            /* empty polls without a clock read: 1 .. XK_IDLE_POLLS */
	uint64_t xk_tick_at;         /* the last poll that read the clock */
	unsigned nparted;            /* sessions parted in XDP (rx_part.c) */
	uint32_t part_gen;           /* the last parting's generation */
	int part_ev;                 /* events of skips, during dg_part_reports() */
	bool in_reports;
	uint64_t part_now;
	uint32_t xk_max;             /* largest datagram xk sends (bigger: the kernel) */
	struct flit_ud_path *ud;     /* rdma multicast: the UD data path */
	struct flit_impair *ud_im;   /* impairment around ud (tests), or NULL */
	unsigned ud_want;
	uint32_t ud_max;             /* largest datagram: the path MTU */
	bool ud_mode;                /* rdma multicast (tp->ud NULL: unavailable) */
	bool xk_fallback_warned;
	struct flit_dgram *dg;
	unsigned nstatic;
	struct rsock **statics;      /* static-map multicast sockets held */
	struct sockaddr_in *static_uc; /* static-map unicast query targets */
	unsigned nstatic_uc;
	uint64_t next_house, query_at, query_ivl;
	bool in_poll, dirty, want_ucast_every_poll;
	unsigned lj_waiting;         /* sessions waiting for LATE: read ucast every poll */
	struct { uint32_t id; uint64_t at; } unk[NUNK];
	unsigned unk_next;
	uint32_t ended[NENDED];
	unsigned ended_next, nsess;
	/* the queries a source not heard before triggers: its id, once */
	uint32_t newsrc[NNEWSRC];
	unsigned newsrc_next;
	uint64_t newsrc_q_at;
	bool query_wanted;           /* the last query asked for something */
	char **found;                /* topics another transport was given */
	unsigned nfound;
	uint64_t rng;
	uint8_t ctl[CTL_BUF] __attribute__((aligned(8)));

	/* source side */
	pthread_mutex_t lock;        /* srcs, res_fd, the thread's state */
	struct usess *srcs;
	struct fad *fads;            /* other transports' sources */
	bool xk_tx_ts;               /* xdp: AF_XDP TX metadata stamps on */
	int res_fd;                  /* hears queries for our sources */
	int epfd, wakefd;
	pthread_t thread;
	bool thread_on, stop;
	uint64_t last_poll;          /* when flit_ctx_poll() last ran (atomic) */
	uint64_t srng;               /* the service's random numbers (tp->lock) */
	/* what the sources send for resolution (adverts, answers to queries
	 * and joins): context.udp.resolver_rate_limit (tp->lock) */
	struct flit_ratelimit res_rl;
	/* exact queries heard lately (service.c): a topic made after its
	 * asker asked is answered at once, not at the asker's next query
	 * (tp->lock) */
	struct heard_query *heard;
	uint64_t batch_cap;          /* shortest batch interval of a batching source (atomic) */
	uint8_t rbuf[CTL_BUF] __attribute__((aligned(8)));
};

static inline uint64_t mono(void)
{
	return flit_monotonic_now();
}

static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static inline bool same_ep(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* The session is told in INFO pages (named, or it has had several topics):
 * a receiver adds a page's topics to what it knows. */
static inline bool sess_pages(const struct usess *s)
{
	return s->name[0] || s->tseq;
}

static inline void src_lock(struct usess *s) { pthread_mutex_lock(&s->lock); }
static inline void src_unlock(struct usess *s) { pthread_mutex_unlock(&s->lock); }

/* ---- sockets.c: kernel sockets and the group:port sockets */
int dg_udp_socket(struct flit_tp *tp, struct in_addr addr, uint16_t port,
		      bool reuse, bool rx);
int dg_join_group(struct flit_tp *tp, int fd, struct in_addr group);
int dg_io_wrap(struct flit_tp *tp, int fd, bool rx, struct flit_udp_io **out);
struct rsock *dg_rsock_get(struct flit_tp *tp, struct in_addr group, uint16_t port);
void dg_rsock_put(struct flit_tp *tp, struct rsock *r);
void dg_rsock_reap(struct flit_tp *tp);
void dg_rx_send(struct flit_tp *tp, const void *buf, size_t len,
		    const struct sockaddr_in *to);

/* ---- rx_session.c: remote sessions */
/* The remote session of id (the last one found is tried first), or NULL. */
struct rsess *dg_sess_find(struct flit_tp *tp, uint32_t id);
bool dg_sess_wanted(const struct rsess *s);
void dg_send_join(struct rsess *s, uint16_t flags);
int dg_sess_bind(struct rsess *s, uint64_t next, bool start_known, uint64_t now);
int dg_sess_start(struct rsess *s, const struct flit_ctl_late *late, uint64_t next);
int dg_sess_unbind(struct rsess *s, uint32_t flags, bool leave);
void dg_sess_delete(struct flit_tp *tp, struct rsess *s);
void dg_sess_ended(struct flit_tp *tp, struct rsess *s, uint64_t now);
/* End the topics of s that ended (INFO ENDED) whose messages are all in. */
void dg_sess_pending_ends(struct rsess *s);
void dg_update_ucast_need(struct flit_tp *tp);
const char *dg_ctl_name_str(const struct flit_ctl_name *nm, char buf[FLIT_TOPIC_MAX + 1]);
bool dg_found_has(const struct flit_tp *tp, const char *topic);
int dg_drain_any(struct flit_tp *tp, struct flit_udp_io *io, struct flit_xsk *xk,
		     unsigned *want, int limit, uint64_t now);
int dg_drain(struct flit_tp *tp, struct flit_udp_io *io, unsigned *want,
		 int limit, uint64_t now);
int dg_drain_ud(struct flit_tp *tp, int limit, uint64_t now);

/* ---- rx_part.c: xdp, the program's topic filter for bound sessions */
void dg_part_sync(struct rsess *s);
void dg_part_topic(struct rsess *s, uint32_t idx, bool added);
void dg_part_flush(struct rsess *s);
void dg_part_end(struct rsess *s);
int dg_part_reports(struct flit_tp *tp, uint64_t now);

/* ---- rx_resolve.c: the receive side's resolution and timers */
void dg_statics_release(struct flit_tp *tp);
void dg_rebind(struct flit_tp *tp, uint64_t now);
void dg_xsk_tx_stamps_route(struct flit_tp *tp);
int dg_housekeeping(struct flit_tp *tp, uint64_t now, int limit);

/* ---- source.c: sources */
void dg_src_raw(struct usess *s, const void *buf, size_t len);
int dg_src_flush_locked(struct usess *s, uint64_t now, bool raw);

/* ---- service.c: the source side's service and the service thread */
/* The session's receivers learn of topic t on its data path: added (in an
 * INFO page with others, ahead of t's first message) or ended (INFO ENDED,
 * twice, at once).  Lock held. */
void dg_src_topic_added(struct usess *s, const struct utopic *t);
void dg_src_topic_ended(struct usess *s, const struct utopic *t);
/* Topic t was added to session s: answer the askers heard lately whose
 * query names it exactly (tp->lock and the lock held). */
void dg_src_topic_wanted(struct usess *s, const struct utopic *t, uint64_t now);
/* Forget the queries heard (udp_close). */
void dg_heard_free(struct flit_tp *tp);
/* The page of the topics added and not announced yet (s->nann).  Lock held. */
void dg_src_announce(struct usess *s);
/* Free the answers the session owes.  Lock held. */
void dg_src_answers_free(struct usess *s);
void dg_advert_start(struct advert *a, uint64_t now);
uint64_t dg_service_all(struct flit_tp *tp, uint64_t now);
void dg_wake(struct flit_tp *tp);
void dg_thread_watch(struct flit_tp *tp, int fd);
int dg_thread_start(struct flit_tp *tp);
void dg_batch_cap_update(struct flit_tp *tp);

/* ---- service.c: the transport operations it implements */
int dg_res_advertise(struct flit_tp *tp, const struct flit_res_ad *ad);
void dg_res_withdraw(struct flit_tp *tp, uint32_t session, const char *topic);
void dg_fads_free(struct flit_tp *tp);

/* ---- source.c: the transport operations it implements */
int dg_send(struct flit_tsrc *ts, const void *data, size_t len);
int dg_claim(struct flit_tsrc *ts, size_t len, void **buf);
int dg_commit(struct flit_tsrc *ts, size_t len);
int dg_abort(struct flit_tsrc *ts);
int dg_flush(struct flit_tsrc *ts);
int dg_receivers(struct flit_tsrc *ts);
size_t dg_max_msg(const struct flit_tsrc *ts);
uint64_t dg_next_seq(const struct flit_tsrc *ts);
int dg_tx_stamp(struct flit_tsrc *ts, uint64_t seq, struct flit_tx_stamp *out);
void dg_src_counters(const struct flit_tsrc *ts, struct flit_counters *c);

#endif /* FLIT_DGRAM_SESSION_H */
