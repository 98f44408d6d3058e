// SPDX-License-Identifier: BSD-2-Clause
/*
 * The udp transport: kernel UDP multicast (and unicast) sessions with topic
 * resolution and NAK reliability (userspace/rel.h), in the manner of LBT-RM.
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
 * Wire format: docs/PROTOCOL.md.  Settings: docs/CONFIG.md (context.udp.*,
 * context.xdp.*, source.udp.*, receiver.udp.*).
 */
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
#include "udp/udp_io.h"
#include "xdp/xdp_path.h"

#define MS  1000000ull
#define US  1000ull
#define RX_DGRAM_MAX   65507u
#define CTL_BUF        2048u
#define HOUSE_NS       (5 * MS)   /* housekeeping period when no timer is due sooner */
#define JOIN_NS        (1000 * MS)/* receiver keepalive to its sources */
#define LATE_WAIT_NS   (20 * MS)  /* a joining receiver waits this for LATE (doubling) */
#define LATE_TRIES     3
#define XK_IDLE_POLLS  32         /* xdp: empty polls between clock reads */
#define RCV_EXPIRE_NS  (3500 * MS)/* a source forgets a silent receiver */
#define QUERY_MIN_NS   (10 * MS)
#define QUERY_EXACT_MAX_NS (1000 * MS)
#define ADVERT_MIN_NS  (10 * MS)
#define UNKNOWN_QUERY_NS (200 * MS)
#define NUNK 16
#define NENDED 32
#define MAX_SOCKS 64        /* group:port sockets per context */
#define MAX_SESS 4096       /* remote sessions known per context */

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
	unsigned ntopics;
	uint32_t *tidx;
	char **tname;
	struct rsock *sock;         /* multicast: the socket data comes on */
	struct flit_rx_session *core; /* bound: some subscriber wants it */
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
	size_t held_bytes;
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

struct udp_src {
	struct udp_src *next;
	struct flit_tp *tp;
	pthread_mutex_t lock;
	char topic[FLIT_TOPIC_MAX + 1];
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
	uint32_t max_dgram, batch_min;
	uint64_t batch_ivl, batch_t0;
	uint8_t *buf;                /* the frame being built */
	uint32_t flen;
	uint16_t count;
	uint64_t next_seq;           /* of the next message */
	uint64_t created;            /* CLOCK_MONOTONIC */
	uint32_t late_join;          /* source.late_join */
	bool claimed;
	uint8_t *claim_pl;
	struct advert adv;
	uint64_t last_direct;        /* last INFO sent straight to an asker */
	struct flit_txts *txts;      /* transmit stamps (context.udp.tx_timestamps), or NULL */
	struct flit_counters c;      /* msgs/bytes/frames sent, naks, retx, ... */
	uint8_t ctl[CTL_BUF] __attribute__((aligned(8)));
};

/* Another transport's source (rdma) advertised on the resolver channel. */
struct fad {
	struct fad *next;
	uint32_t session;
	uint8_t mode;
	uint32_t addr;               /* network order; 0: our address */
	uint16_t port;
	struct advert adv;
	char topic[FLIT_TOPIC_MAX + 1];
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
	uint32_t xk_max;             /* largest datagram xk sends (bigger: the kernel) */
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
	char **found;                /* topics another transport was given */
	unsigned nfound;
	uint64_t rng;
	uint8_t ctl[CTL_BUF] __attribute__((aligned(8)));

	/* source side */
	pthread_mutex_t lock;        /* srcs, res_fd, the thread's state */
	struct udp_src *srcs;
	struct fad *fads;            /* other transports' sources */
	bool xk_tx_ts;               /* xdp: AF_XDP TX metadata stamps on */
	int res_fd;                  /* hears queries for our sources */
	int epfd, wakefd;
	pthread_t thread;
	bool thread_on, stop;
	uint64_t last_poll;          /* when flit_ctx_poll() last ran (atomic) */
	uint64_t srng;               /* the service's random numbers (tp->lock) */
	uint64_t batch_cap;          /* shortest batch interval of a batching source (atomic) */
	uint8_t rbuf[CTL_BUF] __attribute__((aligned(8)));
};

static uint64_t mono(void)
{
	return flit_monotonic_now();
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static bool same_ep(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* ---- sockets ------------------------------------------------------------------ */

static int sock_err(const char *what, const char *where)
{
	int e = errno;
	return flit_err(e, "udp: %s %s: %s", what, where, strerror(e));
}

/* A UDP socket with the context's options, bound to addr:port. */
static int udp_socket(struct flit_tp *tp, struct in_addr addr, uint16_t port,
		      bool reuse, bool rx)
{
	char where[48];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = addr,
				  .sin_port = htons(port) };
	int one = 1, zero = 0, fd, v;

	flit_ep_str(&sa, where, sizeof(where));
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return sock_err("socket", where);
	if (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		goto fail;
	v = (int)tp->cc->udp_rcvbuf;
	if (rx && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)))
		goto fail;
	v = (int)tp->cc->udp_sndbuf;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)))
		goto fail;
	if (tp->cc->udp_busy_poll_us) {
		v = (int)tp->cc->udp_busy_poll_us;
		/* best effort: SO_BUSY_POLL needs CAP_NET_ADMIN to raise */
		if (setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v)))
			flit_info("udp: SO_BUSY_POLL %d on %s: %s", v, where, strerror(errno));
		setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one));
	}
	v = (int)tp->cc->udp_ttl;
	if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &v, sizeof(v)))
		goto fail;
	v = tp->cc->udp_loopback;
	if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &v, sizeof(v)))
		goto fail;
	/* only the groups this socket joined, not every group of the host */
	if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero)))
		goto fail;
	if (tp->ifaddr.s_addr &&
	    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &tp->ifaddr, sizeof(tp->ifaddr)))
		goto fail;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		goto fail;
	return fd;
fail:
	v = sock_err("socket option/bind", where);
	close(fd);
	return v;
}

static int join_group(struct flit_tp *tp, int fd, struct in_addr group)
{
	struct ip_mreqn m = { .imr_multiaddr = group, .imr_address = tp->ifaddr,
			      .imr_ifindex = (int)tp->ifindex };
	if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m))) {
		char where[48];
		struct sockaddr_in a = { .sin_addr = group };
		flit_ep_str(&a, where, sizeof(where));
		int e = errno;
		return flit_err(e, "udp: join multicast group %s%s%s: %s%s", where,
				tp->ifindex ? " on " : "", tp->ifindex ? tp->cc->udp_interface : "",
				strerror(e), e == ENODEV ? " (no multicast route: set context.udp.interface)" : "");
	}
	return 0;
}

static int io_wrap(struct flit_tp *tp, int fd, bool rx, struct flit_udp_io **out)
{
	struct flit_udp_io_cfg c = tp->iocfg;
	int spare = -1, err;

	if (!rx) {
		/* sources send only through io; their control traffic is read
		 * with plain calls by the service */
		c.batch = 1;
		c.tx_only = true;
		c.timestamps = false;
		memset(&c.impair, 0, sizeof(c.impair));
	}
	/* the io object owns fd even when it fails: keep a copy for the
	 * fallback to sockets */
	if (c.backend == FLIT_UDP_URING && (spare = dup(fd)) < 0) {
		err = -errno;
		close(fd);
		return flit_err(-err, "udp: dup: %s", strerror(-err));
	}
	err = flit_udp_io_open(fd, &c, out);
	if (err == -EOPNOTSUPP && spare >= 0) {
		flit_warn("udp: io_uring unavailable (%s); using sockets", flit_errmsg());
		tp->iocfg.backend = FLIT_UDP_SOCKETS;
		c.backend = FLIT_UDP_SOCKETS;
		err = flit_udp_io_open(spare, &c, out);
		spare = -1;
	}
	if (spare >= 0)
		close(spare);
	return err;
}

/* A receive socket for group:port, shared by every session on it. */
static struct rsock *rsock_get(struct flit_tp *tp, struct in_addr group, uint16_t port)
{
	struct rsock *r;
	int fd, err;

	unsigned nsocks = 0;
	for (r = tp->socks; r; r = r->next, nsocks++)
		if (r->group.s_addr == group.s_addr && r->port == port) {
			r->refs++; /* may revive one waiting to be reaped */
			return r;
		}
	if (nsocks >= MAX_SOCKS)
		return flit_err_null(EMFILE, "udp: more than %d multicast groups joined by one context", MAX_SOCKS);
	r = calloc(1, sizeof(*r));
	if (!r)
		return flit_err_null(ENOMEM, "udp: out of memory");
	r->group = group;
	r->port = port;
	r->refs = 1;
	fd = udp_socket(tp, (struct in_addr){ INADDR_ANY }, port, true, true);
	if (fd < 0 || (err = join_group(tp, fd, group))) {
		if (fd >= 0)
			close(fd);
		free(r);
		return NULL;
	}
	if ((err = io_wrap(tp, fd, true, &r->io))) {
		free(r);
		return flit_null(-err);
	}
	if (tp->xp && (err = flit_xdp_path_flow_get(tp->xp, group, htons(port)))) {
		flit_udp_io_close(r->io);
		free(r);
		return flit_null(-err);
	}
	r->next = tp->socks;
	tp->socks = r;
	return r;
}

/* Drop a reference.  The socket is closed by rsock_reap(), after the poll
 * loops: a session may end (and release its socket) while that socket's
 * datagrams are being handled. */
static void rsock_put(struct flit_tp *tp, struct rsock *r)
{
	(void)tp;
	if (r && r->refs)
		r->refs--;
}

static void rsock_reap(struct flit_tp *tp)
{
	for (struct rsock **pp = &tp->socks; *pp;) {
		struct rsock *r = *pp;
		if (r->refs) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		if (tp->xp)
			flit_xdp_path_flow_put(tp->xp, r->group, htons(r->port));
		flit_udp_io_close(r->io);
		free(r);
	}
}

/* Send one control frame from the receiver's unicast socket. */
static void rx_send(struct flit_tp *tp, const void *buf, size_t len,
		    const struct sockaddr_in *to)
{
	struct flit_dgram d = { .buf = (void *)buf, .len = (uint32_t)len, .addr = *to };
	if (tp->ucast && len)
		flit_udp_io_send(tp->ucast, &d, 1);
}

/* ---- receive side: sessions ------------------------------------------------ */

static struct rsess *sess_find(struct flit_tp *tp, uint32_t id)
{
	if (tp->last && tp->last->id == id)
		return tp->last;
	for (struct rsess *s = tp->sess; s; s = s->next)
		if (s->id == id)
			return tp->last = s;
	return NULL;
}

static bool sess_wanted(const struct rsess *s)
{
	for (unsigned i = 0; i < s->ntopics; i++)
		if (flit_ctx_wants(s->tp->ctx, s->tname[i]))
			return true;
	return false;
}

static int rel_deliver(void *arg, const void *frame, size_t len)
{
	struct rsess *s = arg;
	if (frame == s->cur) {
		s->core->frame_ts = s->cur_ts;
		s->core->frame_ts_flags = s->cur_ts_flags;
	} else {
		s->core->frame_ts = 0;
	}
	int n = flit_rx_frame(s->tp->ctx, s->core, frame, len);
	s->core->frame_ts = 0;
	return n < 0 ? 0 : n;
}

static int rel_loss(void *arg, uint64_t first, uint64_t n)
{
	struct rsess *s = arg;
	int ev = flit_rx_session_loss(s->core, first, n);
	if (s->core->next_seq < first + n)
		s->core->next_seq = first + n;
	s->core->started = true;
	return ev;
}

static void send_join(struct rsess *s, uint16_t flags)
{
	struct flit_tp *tp = s->tp;
	size_t n = flit_ctl_join_encode(tp->ctl, sizeof(tp->ctl), s->id, tp->domain, flags);
	rx_send(tp, tp->ctl, n, &s->ctl);
}

static int sess_bind(struct rsess *s, uint64_t next, bool start_known, uint64_t now)
{
	struct flit_tp *tp = s->tp;
	struct flit_cfg_receiver rc;
	char src[64], e[48];
	int err;

	flit_ctx_rcv_cfg(tp->ctx, s->tname[0], &rc);
	for (unsigned i = 0; i < s->ntopics; i++)
		if (flit_ctx_wants(tp->ctx, s->tname[i])) {
			flit_ctx_rcv_cfg(tp->ctx, s->tname[i], &rc);
			break;
		}
	struct flit_rel_rx_cfg relc = {
		.nak_backoff_ns = rc.udp_nak_backoff_us * US,
		.nak_interval_ns = rc.udp_nak_interval_ms * MS,
		.nak_timeout_ns = rc.udp_nak_timeout_ms * MS,
		.reorder_bytes = rc.udp_reorder,
	};
	s->timeout_ns = rc.udp_session_timeout_ms * MS;
	if (s->mode == FLIT_MODE_MCAST) {
		s->sock = rsock_get(tp, s->group, s->port);
		if (!s->sock)
			return -errno;
	}
	err = flit_rel_rx_new(&relc, rng_next(&tp->rng) ^ s->id, rel_deliver, rel_loss, s, &s->rel);
	if (err)
		goto fail;
	/* named by the transport that receives it (the wire is the same),
	 * so an application can tell which path delivered */
	snprintf(src, sizeof(src), "%s:%s", tp->xp ? "xdp" : "udp", flit_ep_str(&s->ctl, e, sizeof(e)));
	s->core = flit_rx_session_new(tp->ctx, s->id, src);
	if (!s->core) {
		err = -errno;
		goto fail;
	}
	for (unsigned i = 0; i < s->ntopics; i++)
		flit_rx_session_topic(s->core, s->tidx[i], s->tname[i]);
	if (start_known) {
		/* ask the source where to start (late join, or from its first
		 * message for a subscriber older than it); meanwhile nothing
		 * is taken, and INFO's seq is where to start if it never says */
		s->lj_wait = true;
		s->lj_tries = 1;
		s->lj_at = now + LATE_WAIT_NS;
		s->lj_fallback = next;
		tp->lj_waiting++;
		if (s->lj_at < tp->next_house)
			tp->next_house = s->lj_at;
		send_join(s, FLIT_JF_LATE);
	} else {
		send_join(s, 0);
	}
	s->next_join = now + JOIN_NS;
	s->last_heard = now;
	if (s->mode == FLIT_MODE_UNICAST)
		tp->want_ucast_every_poll = true;
	flit_info("udp: joined session %08x (%s) from %s", s->id, s->tname[0], src);
	return 0;
fail:
	flit_rel_rx_free(s->rel);
	s->rel = NULL;
	rsock_put(tp, s->sock);
	s->sock = NULL;
	return err;
}

static void held_free(struct rsess *s)
{
	if (!s->held)
		return;
	for (unsigned i = 0; i < s->nheld; i++)
		free(s->held[i].f);
	free(s->held);
	s->held = NULL;
	s->nheld = s->capheld = 0;
	s->held_bytes = 0;
}

/* Keep a datagram that came before the session started (copied; beyond
 * HELD_MAX_BYTES it is dropped: NAKs repair it once started). */
static void held_add(struct rsess *s, const uint8_t *p, const struct flit_frame_hdr *h)
{
	if (s->held_bytes + h->len > HELD_MAX_BYTES)
		return;
	if (s->nheld == s->capheld) {
		unsigned cap = s->capheld ? 2 * s->capheld : 16;
		struct held *n = realloc(s->held, cap * sizeof(*n));
		if (!n)
			return;
		s->held = n;
		s->capheld = cap;
	}
	uint8_t *f = malloc(h->len);
	if (!f)
		return;
	memcpy(f, p, h->len);
	s->held[s->nheld++] = (struct held){ f, h->len, h->count, h->seq };
	s->held_bytes += h->len;
}

static void sess_start_at(struct rsess *s, uint64_t start, const char *how,
			  const struct flit_ctl_late *late, uint64_t next);

/* Start the session: where the source's answer to our JOIN with
 * FLIT_JF_LATE says (late, non-NULL; next: its live start), or where INFO
 * said when it never came. */
static void sess_start(struct rsess *s, const struct flit_ctl_late *late, uint64_t next)
{
	struct flit_tp *tp = s->tp;
	uint64_t start = s->lj_fallback;
	const char *how = "live";

	s->lj_wait = false;
	tp->lj_waiting--;
	if (late) {
		uint64_t rt = flit_realtime_now();
		uint64_t born = late->age_ns < rt ? rt - late->age_ns : 0;
		enum flit_join jm = FLIT_JOIN_LIVE;
		for (unsigned i = 0; i < s->ntopics && jm == FLIT_JOIN_LIVE; i++)
			if (flit_ctx_wants(tp->ctx, s->tname[i]))
				jm = flit_ctx_join_mode(tp->ctx, s->tname[i], born);
		if (jm == FLIT_JOIN_FIRST) {
			/* from the source's first message: what it no longer
			 * retains is lost (NAK, then GONE) */
			start = late->origin;
			how = "first";
		} else if (jm == FLIT_JOIN_LATE && late->late_join) {
			uint64_t want = next - late->origin > late->late_join ?
					next - late->late_join : late->origin;
			start = want > late->trail ? want : late->trail;
			flit_rx_session_late_join(s->core, start, next);
			flit_info("udp: session %08x: late join from %llu, live from %llu", s->id,
				  (unsigned long long)start, (unsigned long long)next);
			sess_start_at(s, start, "late join", late, next);
			return;
		} else if (start > next) {
			start = next;
		}
	}
	flit_rx_session_start(s->core, start);
	sess_start_at(s, start, how, late, next);
}

/* Start the reliability layer at `start` and hand it what came meanwhile. */
static void sess_start_at(struct rsess *s, uint64_t start, const char *how,
			  const struct flit_ctl_late *late, uint64_t next)
{
	uint64_t now = mono();

	flit_rel_rx_start(s->rel, start);
	flit_debug("udp: session %08x starts at %llu (%s), %u datagrams held", s->id,
		   (unsigned long long)start, how, s->nheld);
	for (unsigned i = 0; i < s->nheld && s->core; i++)
		flit_rel_rx_data(s->rel, s->held[i].f, s->held[i].len, s->held[i].seq,
				 s->held[i].count, now);
	held_free(s);
	/* LATE said where the source is: what is missing up to there is a gap
	 * now (NAKed after the backoff), not at the next heartbeat of an idle
	 * source (up to source.udp.hb_max_ms away) */
	if (late && s->core && start < next)
		flit_rel_rx_hb(s->rel, next, late->trail, now);
}

static int sess_unbind(struct rsess *s, uint32_t flags, bool leave)
{
	int ev = 0;
	if (!s->core)
		return 0;
	if (s->lj_wait) {
		s->lj_wait = false;
		s->tp->lj_waiting--;
	}
	held_free(s);
	if (leave)
		send_join(s, FLIT_JF_LEAVE);
	ev = flit_rx_session_end(s->core, flags);
	s->core = NULL;
	flit_rel_rx_free(s->rel);
	s->rel = NULL;
	rsock_put(s->tp, s->sock);
	s->sock = NULL;
	return ev;
}

static void sess_free_topics(struct rsess *s)
{
	for (unsigned i = 0; i < s->ntopics; i++)
		free(s->tname[i]);
	free(s->tname);
	free(s->tidx);
	s->tname = NULL;
	s->tidx = NULL;
	s->ntopics = 0;
}

static void sess_delete(struct flit_tp *tp, struct rsess *s)
{
	for (struct rsess **pp = &tp->sess; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	if (tp->last == s)
		tp->last = NULL;
	tp->nsess--;
	sess_free_topics(s);
	free(s);
}

static void update_ucast_need(struct flit_tp *tp);

/* A bound session ended (END heartbeat or silence): remember its id so a
 * late advert does not bring it back, and look for its successor. */
static void sess_ended(struct flit_tp *tp, struct rsess *s, uint64_t now)
{
	tp->ended[tp->ended_next] = s->id;
	tp->ended_next = (tp->ended_next + 1) % NENDED;
	sess_delete(tp, s);
	update_ucast_need(tp);
	tp->query_ivl = QUERY_MIN_NS / 2;
	tp->query_at = now;
}

static void update_ucast_need(struct flit_tp *tp)
{
	tp->want_ucast_every_poll = false;
	for (struct rsess *s = tp->sess; s; s = s->next)
		if (s->core && s->mode == FLIT_MODE_UNICAST)
			tp->want_ucast_every_poll = true;
}

/* A decoded name (not NUL-terminated, 1..255 bytes) as a C string in buf. */
static const char *ctl_name_str(const struct flit_ctl_name *nm, char buf[FLIT_TOPIC_MAX + 1])
{
	memcpy(buf, nm->name, nm->len);
	buf[nm->len] = '\0';
	return buf;
}

static bool found_has(const struct flit_tp *tp, const char *topic)
{
	for (unsigned i = 0; i < tp->nfound; i++)
		if (!strcmp(tp->found[i], topic))
			return true;
	return false;
}

/* INFO of another transport's source (rdma): hand each wanted topic to
 * the context, which gives it to that transport.  Remembered, so that
 * queries stop asking for it. */
static int on_foreign_info(struct flit_tp *tp, const uint8_t *f, const struct flit_frame_hdr *h,
			   const struct flit_ctl_info *in, const struct sockaddr_in *from)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	char name[FLIT_TOPIC_MAX + 1];

	if (!in->data_port) {
		flit_ctx_rx_counters(tp->ctx)->malformed++;
		return 0;
	}
	flit_ctl_names_init(&it, f, h);
	while (flit_ctl_names_next(&it, &nm)) {
		ctl_name_str(&nm, name);
		if (!flit_ctx_wants(tp->ctx, name))
			continue;
		struct flit_res_ad ad = {
			.session = h->session_id, .mode = in->mode,
			.addr = in->data_addr ? in->data_addr : from->sin_addr.s_addr,
			.port = in->data_port, .topic = name,
		};
		flit_ctx_res_found(tp->ctx, &ad);
		if (!found_has(tp, name) && tp->nfound < MAX_FOUND) {
			if (!tp->found)
				tp->found = calloc(MAX_FOUND, sizeof(*tp->found));
			if (tp->found && (tp->found[tp->nfound] = strdup(name)))
				tp->nfound++;
		}
	}
	return 0;
}

/* An INFO frame (from the resolver, a query reply, or a static source). */
static int on_info(struct flit_tp *tp, const uint8_t *f, const struct flit_frame_hdr *h,
		   const struct sockaddr_in *from, uint64_t now)
{
	struct flit_ctl_info in;
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	struct rsess *s;

	flit_ctl_info_get(f, &in);
	if (in.domain != tp->domain || h->count == 0)
		return 0;
	if (in.mode == FLIT_MODE_RDMA)
		return on_foreign_info(tp, f, h, &in, from);
	/* topic indexes name slots of a table the core allocates: only
	 * 0 .. count-1 are sane (a source of this library uses 0) */
	flit_ctl_names_init(&it, f, h);
	while (flit_ctl_names_next(&it, &nm))
		if (nm.idx >= h->count) {
			flit_ctx_rx_counters(tp->ctx)->malformed++;
			return 0;
		}
	for (unsigned i = 0; i < NENDED; i++)
		if (tp->ended[i] == h->session_id)
			return 0; /* a late advert of a session that ended */
	s = sess_find(tp, h->session_id);
	if (!s) {
		bool any = false;
		flit_ctl_names_init(&it, f, h);
		while (flit_ctl_names_next(&it, &nm)) {
			char name[FLIT_TOPIC_MAX + 1];
			any |= flit_ctx_wants(tp->ctx, ctl_name_str(&nm, name));
		}
		if (!any) {
			/* not for us: remember nothing (over xdp, its data is
			 * dropped in XDP from now on) */
			if (tp->xp)
				flit_xdp_path_filter(tp->xp, h->session_id);
			return 0;
		}
		if (tp->nsess >= MAX_SESS) {
			flit_ctx_rx_counters(tp->ctx)->unknown_session++;
			return 0;
		}
		s = calloc(1, sizeof(*s));
		if (!s)
			return flit_err(ENOMEM, "udp: out of memory");
		s->tp = tp;
		s->id = h->session_id;
		s->next = tp->sess;
		tp->sess = s;
		tp->nsess++;
	}
	s->last_heard = now;
	if (s->core)
		return 0; /* bound: INFO only refreshes liveness */
	/* (re)learn the session's addresses and topics */
	sess_free_topics(s);
	s->mode = in.mode;
	s->ctl.sin_family = AF_INET;
	s->ctl.sin_addr.s_addr = in.ctl_addr ? in.ctl_addr : from->sin_addr.s_addr;
	s->ctl.sin_port = in.ctl_port ? htons(in.ctl_port) : from->sin_port;
	s->group.s_addr = in.data_addr;
	s->port = in.data_port;
	s->tidx = calloc(h->count, sizeof(*s->tidx));
	s->tname = calloc(h->count, sizeof(*s->tname));
	if (!s->tidx || !s->tname) {
		sess_delete(tp, s);
		return flit_err(ENOMEM, "udp: out of memory");
	}
	flit_ctl_names_init(&it, f, h);
	while (flit_ctl_names_next(&it, &nm)) {
		char *n = strndup(nm.name, nm.len);
		if (!n)
			break;
		s->tidx[s->ntopics] = nm.idx;
		s->tname[s->ntopics++] = n;
	}
	if (s->mode == FLIT_MODE_MCAST && (!IN_MULTICAST(ntohl(s->group.s_addr)) || !s->port)) {
		flit_ctx_rx_counters(tp->ctx)->malformed++;
		sess_delete(tp, s);
		return 0;
	}
	if (sess_wanted(s)) {
		int err = sess_bind(s, h->seq, true, now);
		if (err < 0)
			flit_warn("udp: cannot join session %08x: %s", s->id, flit_errmsg());
	}
	return 0;
}

/* A frame of a session we do not know: ask its sender who it is (rate
 * limited per session id), if anything here could want it. */
static void on_unknown(struct flit_tp *tp, uint32_t id, const struct sockaddr_in *from,
		       uint64_t now)
{
	flit_ctx_rx_counters(tp->ctx)->unknown_session++;
	if (!flit_ctx_wants_any(tp->ctx))
		return;
	for (unsigned i = 0; i < NUNK; i++)
		if (tp->unk[i].id == id && now - tp->unk[i].at < UNKNOWN_QUERY_NS)
			return;
	tp->unk[tp->unk_next].id = id;
	tp->unk[tp->unk_next].at = now;
	tp->unk_next = (tp->unk_next + 1) % NUNK;
	size_t n = flit_ctl_query_encode(tp->ctl, sizeof(tp->ctl), id, tp->domain, NULL, 0);
	rx_send(tp, tp->ctl, n, from);
}

/* One received datagram (data socket, unicast socket or resolver). */
static int on_dgram(struct flit_tp *tp, const struct flit_dgram *d, uint64_t now)
{
	const uint8_t *p = d->buf;
	struct flit_counters *c = flit_ctx_rx_counters(tp->ctx);
	struct flit_frame_hdr h;
	struct rsess *s;
	enum flit_frame_err fe;

	if (FLIT_UNLIKELY(d->len < FLIT_FRAME_HDR_LEN || flit_ld16(p) != FLIT_WIRE_MAGIC)) {
		c->foreign_dropped++;
		return 0;
	}
	if (FLIT_LIKELY(p[3] == FLIT_FT_DATA)) {
		s = sess_find(tp, flit_ld32(p + 12));
		if (FLIT_UNLIKELY(!s || !s->core)) {
			if (!s)
				on_unknown(tp, flit_ld32(p + 12), &d->addr, now);
			return 0;
		}
		fe = flit_frame_check(p, d->len, &h);
		if (FLIT_UNLIKELY(fe != FLIT_FE_OK)) {
			c->malformed++;
			flit_debug("udp: frame from %08x dropped: %s", s->id, flit_frame_strerr(fe));
			return 0;
		}
		s->last_heard = now;
		if (FLIT_UNLIKELY(s->lj_wait)) {
			/* not started yet: kept for then (or repaired by NAK) */
			held_add(s, p, &h);
			return 0;
		}
		if (FLIT_UNLIKELY((h.flags & FLIT_FF_RETX) && !flit_rel_rx_started(s->rel)))
			return 0; /* a late joiner starts on live data, not on repairs for others */
		s->cur = p;
		/* a NIC stamp only where one is in effect and given, else the
		 * kernel's (flit_ts_pick) */
		uint32_t tsk;
		s->cur_ts = flit_ts_pick(tp->ts.rx, d->rx_ts_ns, d->rx_ts_hw_ns, &tsk);
		s->cur_ts_flags = tsk == FLIT_TXTS_HARDWARE ? FLIT_MSGF_RECV_TS_HW :
				  tsk ? FLIT_MSGF_RECV_TS_KERNEL : 0;
		int n = flit_rel_rx_data(s->rel, p, h.len, h.seq, h.count, now);
		s->cur = NULL;
		uint64_t dl = flit_rel_rx_deadline(s->rel);
		if (dl < tp->next_house)
			tp->next_house = dl;
		return n < 0 ? 0 : n;
	}

	fe = flit_ctl_check(p, d->len, &h);
	if (fe != FLIT_FE_OK) {
		c->malformed++;
		flit_debug("udp: control frame dropped: %s", flit_frame_strerr(fe));
		return 0;
	}
	switch (h.type) {
	case FLIT_FT_HB:
		s = sess_find(tp, h.session_id);
		if (!s) {
			on_unknown(tp, h.session_id, &d->addr, now);
			return 0;
		}
		s->last_heard = now;
		if (!s->core)
			return 0;
		if (s->lj_wait && (h.flags & FLIT_HBF_END))
			sess_start(s, NULL, h.seq);
		else if (s->lj_wait)
			return 0;
		if (h.flags & FLIT_HBF_END) {
			/* nothing more will come: what is still missing is
			 * lost (reported), what is held is delivered */
			int ev = flit_rel_rx_hb(s->rel, h.seq, h.seq, now);
			ev = (ev < 0 ? 0 : ev) + sess_unbind(s, 0, false);
			sess_ended(tp, s, now);
			return ev;
		}
		{
			int n = flit_rel_rx_hb(s->rel, h.seq, flit_ctl_hb_trail(p), now);
			uint64_t dl = flit_rel_rx_deadline(s->rel);
			if (dl < tp->next_house)
				tp->next_house = dl;
			return n < 0 ? 0 : n;
		}
	case FLIT_FT_NCF: {
		struct flit_seq_range r[FLIT_CTL_RANGES_MAX];
		unsigned n = h.count < FLIT_CTL_RANGES_MAX ? h.count : FLIT_CTL_RANGES_MAX;
		s = sess_find(tp, h.session_id);
		if (!s || !s->core || s->lj_wait)
			return 0;
		for (unsigned i = 0; i < n; i++)
			flit_ctl_range(p, i, &r[i]);
		int ev = flit_rel_rx_ncf(s->rel, r, n, now);
		return ev < 0 ? 0 : ev;
	}
	case FLIT_FT_INFO:
		return on_info(tp, p, &h, &d->addr, now);
	case FLIT_FT_LATE: {
		struct flit_ctl_late late;
		s = sess_find(tp, h.session_id);
		if (!s || !s->core || !s->lj_wait)
			return 0; /* answered twice, or not asked */
		flit_ctl_late_get(p, &late);
		s->last_heard = now;
		sess_start(s, &late, h.seq);
		uint64_t dl = flit_rel_rx_deadline(s->rel);
		if (dl < tp->next_house)
			tp->next_house = dl;
		return 0;
	}
	default:
		/* NAK, QUERY, JOIN are for sources; a receiver ignores them */
		return 0;
	}
}

/* the AF_XDP path's receive, for the impairment (flit_dgram_recv_fn) */
static int xsk_recv_fn(void *arg, struct flit_dgram *d, unsigned n)
{
	return flit_xsk_recv(arg, d, NULL, n);
}

/* Receive and handle datagrams.  The batch adapts: a full batch doubles
 * the next one (up to context.udp.rx_batch), a short one shrinks it to what
 * came, so a sparse latency-bound stream pays for one receive attempt per
 * datagram, not for a second one that finds the socket empty. */
static int drain_any(struct flit_tp *tp, struct flit_udp_io *io, struct flit_xsk *xk,
		     unsigned *want, int limit, uint64_t now)
{
	int total = 0;

	while (total < limit) {
		unsigned w = *want ? *want : 1;
		int n = !xk ? flit_udp_io_recv(io, tp->dg, w) :
			tp->xk_im ? flit_impair_recv(tp->xk_im, xsk_recv_fn, xk, tp->dg, w) :
			flit_xsk_recv(xk, tp->dg, NULL, w);
		if (n <= 0)
			return n < 0 ? n : total;
		for (int i = 0; i < n; i++)
			total += on_dgram(tp, &tp->dg[i], now);
		if ((unsigned)n < w) {
			*want = (unsigned)n;
			break;
		}
		*want = w * 2 > tp->iocfg.batch ? tp->iocfg.batch : w * 2;
	}
	return total;
}

static int drain(struct flit_tp *tp, struct flit_udp_io *io, unsigned *want,
		 int limit, uint64_t now)
{
	return drain_any(tp, io, NULL, want, limit, now);
}

/* ---- receive side: resolution ------------------------------------------------ */

struct qbuild {
	struct flit_tp *tp;
	struct flit_ctl_name names[FLIT_CTL_NAMES_MAX];
	unsigned n;
	size_t bytes;     /* frame length so far: one datagram of <= 1472 */
	bool unresolved_exact, patterns;
};

#define QUERY_DGRAM_MAX 1472u

static bool topic_bound(struct flit_tp *tp, const char *topic)
{
	if (found_has(tp, topic))
		return true;
	for (struct rsess *s = tp->sess; s; s = s->next)
		if (s->core)
			for (unsigned i = 0; i < s->ntopics; i++)
				if (!strcmp(s->tname[i], topic))
					return true;
	return false;
}

static void query_flush(struct qbuild *q)
{
	struct flit_tp *tp = q->tp;
	if (!q->n)
		return;
	size_t len = flit_ctl_query_encode(tp->ctl, sizeof(tp->ctl), 0, tp->domain, q->names, q->n);
	if (tp->resolver.sin_port)
		rx_send(tp, tp->ctl, len, &tp->resolver);
	for (unsigned i = 0; i < tp->nstatic_uc; i++)
		rx_send(tp, tp->ctl, len, &tp->static_uc[i]);
	q->n = 0;
	q->bytes = 0;
}

static int query_add(void *arg, const char *topic, bool pattern,
		     const struct flit_cfg_receiver *rc)
{
	struct qbuild *q = arg;
	(void)rc;
	if (!pattern && topic_bound(q->tp, topic))
		return 0;
	for (unsigned i = 0; i < q->n; i++)
		if (q->names[i].kind == pattern && !strcmp(q->names[i].name, topic))
			return 0;
	if (pattern)
		q->patterns = true;
	else
		q->unresolved_exact = true;
	size_t entry = 8 + flit_align8(strlen(topic));
	if (!q->bytes)
		q->bytes = FLIT_FRAME_HDR_LEN + 8;
	if (q->bytes + entry > QUERY_DGRAM_MAX)
		query_flush(q);
	if (!q->bytes)
		q->bytes = FLIT_FRAME_HDR_LEN + 8;
	q->bytes += entry;
	q->names[q->n++] = (struct flit_ctl_name){ .kind = pattern ? FLIT_NAME_PATTERN : FLIT_NAME_EXACT,
						   .len = (uint16_t)strlen(topic), .name = topic };
	if (q->n == FLIT_CTL_NAMES_MAX)
		query_flush(q);
	return 0;
}

static void send_queries(struct flit_tp *tp, uint64_t now)
{
	struct qbuild q = { .tp = tp };

	flit_ctx_each_sub(tp->ctx, query_add, &q);
	query_flush(&q);
	uint64_t max = q.unresolved_exact ? QUERY_EXACT_MAX_NS : tp->cc->udp_resolver_max_ms * MS;
	if (max > tp->cc->udp_resolver_max_ms * MS)
		max = tp->cc->udp_resolver_max_ms * MS;
	tp->query_ivl = tp->query_ivl * 2 > max ? max : tp->query_ivl * 2;
	if (!q.unresolved_exact && !q.patterns)
		tp->query_ivl = UINT64_MAX / 4; /* nothing to ask for */
	tp->query_at = now + tp->query_ivl;
}

/* Static topic map: listen on the multicast groups, query the unicast
 * addresses that subscribers' receiver.udp.static name. */
struct stbuild { struct flit_tp *tp; int err; };

static int static_add(void *arg, const char *topic, bool pattern,
		      const struct flit_cfg_receiver *rc)
{
	struct stbuild *b = arg;
	struct flit_tp *tp = b->tp;
	struct sockaddr_in a;
	(void)topic; (void)pattern;

	if (!rc->udp_static[0])
		return 0;
	flit_ep_parse(rc->udp_static, &a);
	if (IN_MULTICAST(ntohl(a.sin_addr.s_addr))) {
		struct rsock **v = realloc(tp->statics, (tp->nstatic + 1) * sizeof(*v));
		if (!v)
			return b->err = flit_err(ENOMEM, "udp: out of memory");
		tp->statics = v;
		struct rsock *r = rsock_get(tp, a.sin_addr, ntohs(a.sin_port));
		if (!r) {
			flit_warn("udp: receiver.udp.static %s: %s", rc->udp_static, flit_errmsg());
			return 0;
		}
		tp->statics[tp->nstatic++] = r;
	} else {
		for (unsigned i = 0; i < tp->nstatic_uc; i++)
			if (same_ep(&tp->static_uc[i], &a))
				return 0;
		struct sockaddr_in *v = realloc(tp->static_uc, (tp->nstatic_uc + 1) * sizeof(*v));
		if (!v)
			return b->err = flit_err(ENOMEM, "udp: out of memory");
		tp->static_uc = v;
		tp->static_uc[tp->nstatic_uc++] = a;
	}
	return 0;
}

static void statics_release(struct flit_tp *tp)
{
	for (unsigned i = 0; i < tp->nstatic; i++)
		rsock_put(tp, tp->statics[i]);
	tp->nstatic = 0;
	tp->nstatic_uc = 0;
}

/* Bind sessions that became wanted, unbind those no longer wanted. */
static void rebind(struct flit_tp *tp, uint64_t now)
{
	struct stbuild b = { .tp = tp };

	statics_release(tp);
	if (tp->xp)
		flit_xdp_path_unfilter_all(tp->xp); /* wants changed: learn again */
	flit_ctx_each_sub(tp->ctx, static_add, &b);
	for (struct rsess *s = tp->sess, *next; s; s = next) {
		next = s->next;
		bool want = s->ntopics && sess_wanted(s);
		if (want && !s->core) {
			/* start where the source is now: a late joiner */
			if (sess_bind(s, 0, false, now) < 0)
				flit_warn("udp: cannot join session %08x: %s", s->id, flit_errmsg());
		} else if (!want && s->core) {
			sess_unbind(s, 0, true);
			sess_delete(tp, s);
		}
	}
	update_ucast_need(tp);
	tp->query_ivl = QUERY_MIN_NS / 2;
	tp->query_at = now;
	tp->dirty = false;
	if (!tp->in_poll)
		rsock_reap(tp);
}

/* xdp with context.xdp.tx_timestamps: hand the AF_XDP completion stamps to
 * the sources whose frames they carried (by the session id in the frame
 * header), where flit_pub_tx_stamp() finds them. */
static void src_lock(struct udp_src *s);
static void src_unlock(struct udp_src *s);

static void xsk_tx_stamps_route(struct flit_tp *tp)
{
	struct flit_xsk_tx_stamp st[64];
	int n;

	if (!tp->xk_tx_ts)
		return;
	pthread_mutex_lock(&tp->lock);
	while ((n = flit_xsk_tx_stamps(tp->xk, st, 64)) > 0) {
		for (int i = 0; i < n; i++) {
			size_t hl = st[i].len < FLIT_XSK_TX_STAMP_HEAD ? st[i].len : FLIT_XSK_TX_STAMP_HEAD;
			if (hl < FLIT_FRAME_HDR_LEN)
				continue;
			uint32_t session = flit_ld32(st[i].head + 12);
			for (struct udp_src *s = tp->srcs; s; s = s->next)
				if (s->session == session && s->txts) {
					src_lock(s);
					flit_txts_stamped(s->txts, st[i].head, hl, st[i].ts_ns, st[i].flags);
					src_unlock(s);
					break;
				}
		}
		if (n < 64)
			break;
	}
	pthread_mutex_unlock(&tp->lock);
}

/* Timers of the receive side: NAKs, joins, liveness, queries. */
static int housekeeping(struct flit_tp *tp, uint64_t now, int limit)
{
	struct flit_seq_range naks[FLIT_CTL_RANGES_MAX];
	uint64_t next = now + HOUSE_NS;
	int ev = 0;

	if (tp->res_rx)
		ev += drain(tp, tp->res_rx, &tp->res_want, limit, now);
	if ((!tp->want_ucast_every_poll || tp->xk) && tp->ucast)
		ev += drain(tp, tp->ucast, &tp->ucast_want, limit, now);
	if (tp->xk) {
		/* what XDP left to the kernel on our flows: fragments, or
		 * everything once the program was detached under us */
		int k = 0;
		for (struct rsock *r = tp->socks; r; r = r->next)
			if (r->refs) {
				int n = drain(tp, r->io, &r->want, limit, now);
				k += n > 0 ? n : 0;
			}
		if (k && !tp->xk_fallback_warned) {
			tp->xk_fallback_warned = true;
			flit_warn("xdp: data arrives through kernel sockets (program detached, or fragments?): "
				  "it is delivered, but at housekeeping pace");
		}
		ev += k;
		flit_xsk_tx_service(tp->xk);
		xsk_tx_stamps_route(tp);
	}
	for (struct rsess *s = tp->sess, *sn; s; s = sn) {
		sn = s->next;
		if (!s->core) {
			/* an unbound session we heard of: forget it when silent */
			if (now - s->last_heard > 10000 * MS)
				sess_delete(tp, s);
			continue;
		}
		if (now - s->last_heard > s->timeout_ns) {
			flit_info("udp: session %08x silent for %llu ms: source gone",
				  s->id, (unsigned long long)((now - s->last_heard) / MS));
			ev += sess_unbind(s, FLIT_MSGF_SOURCE_DIED, false);
			sess_ended(tp, s, now);
			continue;
		}
		if (now >= s->next_join) {
			send_join(s, 0);
			s->next_join = now + JOIN_NS;
		}
		if (s->lj_wait) {
			if (now >= s->lj_at) {
				if (s->lj_tries++ < LATE_TRIES) {
					send_join(s, FLIT_JF_LATE);
					s->lj_at = now + (LATE_WAIT_NS << s->lj_tries);
				} else {
					/* a source that does not answer (an older
					 * flit): start where INFO said */
					sess_start(s, NULL, s->lj_fallback);
				}
			}
			if (s->lj_wait) {
				if (s->lj_at < next)
					next = s->lj_at;
				continue;
			}
		}
		if (flit_rel_rx_deadline(s->rel) <= now) {
			unsigned n = 0;
			int r = flit_rel_rx_timer(s->rel, now, naks, FLIT_CTL_RANGES_MAX, &n);
			if (r > 0)
				ev += r;
			if (n) {
				size_t len = flit_ctl_ranges_encode(tp->ctl, sizeof(tp->ctl), FLIT_FT_NAK,
								    s->id, 0, naks, n);
				rx_send(tp, tp->ctl, len, &s->ctl);
				flit_ctx_rx_counters(tp->ctx)->naks_sent += n;
			}
		}
		uint64_t dl = flit_rel_rx_deadline(s->rel);
		if (dl < next)
			next = dl;
	}
	if (now >= tp->query_at)
		send_queries(tp, now);
	tp->next_house = next;
	return ev;
}

/* ---- source side ---------------------------------------------------------------- */

/* Send a frame from the service (plain syscalls: io_uring rings belong to
 * the application's thread) to the session's destination(s). */
static void src_raw(struct udp_src *s, const void *buf, size_t len)
{
	if (s->mode == FLIT_MODE_MCAST) {
		if (sendto(s->fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&s->dest, sizeof(s->dest)) < 0)
			flit_debug("udp: %s: send: %s", s->topic, strerror(errno));
		else if (s->txts)
			flit_txts_sent(s->txts, buf, len, 1);
		return;
	}
	for (unsigned i = 0; i < s->nrcv; i++)
		if (sendto(s->fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&s->rcv[i].a,
			   sizeof(s->rcv[i].a)) >= 0 && s->txts)
			flit_txts_sent(s->txts, buf, len, 1);
}

/* Send a DATA frame from the application's thread through the io backend.
 * Returns 0, FLIT_BACK_PRESSURED (socket full: nothing sent) or
 * FLIT_NOT_CONNECTED (unicast, no receiver). */
static int src_xmit_xsk(struct udp_src *s, const void *buf, size_t len);

static int src_xmit(struct udp_src *s, const void *buf, size_t len)
{
	struct flit_dgram d[16];
	unsigned n = 0;

	if (s->tp->xk && len <= s->tp->xk_max)
		return src_xmit_xsk(s, buf, len);

	if (s->mode == FLIT_MODE_MCAST) {
		d[0] = (struct flit_dgram){ .buf = (void *)buf, .len = (uint32_t)len, .addr = s->dest };
		n = 1;
	} else {
		if (!s->nrcv)
			return FLIT_NOT_CONNECTED;
		for (unsigned i = 0; i < s->nrcv; i++) {
			d[n++] = (struct flit_dgram){ .buf = (void *)buf, .len = (uint32_t)len,
							  .addr = s->rcv[i].a };
			if (n == 16 || i + 1 == s->nrcv) {
				int r = flit_udp_io_send(s->io, d, n);
				if (FLIT_UNLIKELY(s->txts != NULL) && r > 0)
					flit_txts_sent(s->txts, buf, len, (unsigned)r);
				if (r <= 0 && i + 1 == n)
					return FLIT_BACK_PRESSURED;
				n = 0;
			}
		}
		return 0;
	}
	int r = flit_udp_io_send(s->io, d, n);
	if (FLIT_UNLIKELY(s->txts != NULL) && r > 0)
		flit_txts_sent(s->txts, buf, len, (unsigned)r);
	return r == 1 ? 0 : FLIT_BACK_PRESSURED;
}

/* src_xmit over AF_XDP: a unicast receiver whose MAC is not known yet gets
 * this frame through the kernel (which resolves it). */
static int src_xmit_xsk(struct udp_src *s, const void *buf, size_t len)
{
	struct flit_xsk *xk = s->tp->xk;
	struct flit_dgram d = { .buf = (void *)buf, .len = (uint32_t)len, .addr = s->dest };

	if (s->mode == FLIT_MODE_MCAST)
		return flit_xsk_send(xk, &d, 1, s->self.sin_port) == 1 ? 0 : FLIT_BACK_PRESSURED;
	if (!s->nrcv)
		return FLIT_NOT_CONNECTED;
	unsigned sent = 0;
	for (unsigned i = 0; i < s->nrcv; i++) {
		d.addr = s->rcv[i].a;
		int r = flit_xsk_send(xk, &d, 1, s->self.sin_port);
		if (r == -EHOSTUNREACH)
			r = flit_udp_io_send(s->io, &d, 1);
		sent += r == 1;
	}
	return sent ? 0 : FLIT_BACK_PRESSURED;
}

static uint32_t max_msg_of(const struct udp_src *s)
{
	uint32_t room = s->max_dgram - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN - (s->ts ? FLIT_MSG_TS_LEN : 0);
	return room & ~7u;
}

/* Send the frame being built.  Called with the lock held. */
static int src_flush_locked(struct udp_src *s, uint64_t now, bool raw)
{
	if (!s->count)
		return 0;
	if (s->rate_on && !flit_rl_take(&s->rl, s->flen, now)) {
		s->c.rate_limited++;
		return FLIT_BACK_PRESSURED;
	}
	uint64_t seq = flit_ld64(s->buf + 16);
	if (raw) {
		src_raw(s, s->buf, s->flen);
	} else {
		int r = src_xmit(s, s->buf, s->flen);
		/* a batch is numbered already: if the socket refused it, it
		 * is lost like a drop on the wire and repaired by NAK */
		if (r == FLIT_BACK_PRESSURED)
			s->c.back_pressured++;
	}
	flit_rel_tx_sent(s->rel, s->buf, s->flen, seq, s->count, now);
	s->c.frames_sent++;
	s->count = 0;
	s->flen = 0;
	return 0;
}

static void src_lock(struct udp_src *s) { pthread_mutex_lock(&s->lock); }
static void src_unlock(struct udp_src *s) { pthread_mutex_unlock(&s->lock); }

/* Room at the end of the frame being built for a message of `len` bytes:
 * sends the frame first if the message would not fit, starts a frame if
 * none is open.  0, FLIT_BACK_PRESSURED or FLIT_NOT_CONNECTED.  Lock held. */
static int src_make_room(struct udp_src *s, size_t len, uint64_t now)
{
	if (s->count && s->flen + flit_msg_wire_len(len, s->ts) > s->max_dgram) {
		int r = src_flush_locked(s, now, false);
		if (r)
			return r;
	}
	if (s->mode == FLIT_MODE_UNICAST && !s->nrcv)
		return FLIT_NOT_CONNECTED;
	if (!s->count) {
		flit_frame_begin(s->buf, FLIT_FT_DATA, s->ts ? FLIT_FF_TS : 0, s->session, s->next_seq);
		s->flen = FLIT_FRAME_HDR_LEN;
		s->batch_t0 = now;
	}
	return 0;
}

/* Account the message whose payload was just written at pl; true when the
 * frame is due to be sent (unbatched, batch_min reached, or count full). */
static bool src_msg_done(struct udp_src *s, uint8_t *pl, uint32_t len)
{
	s->flen = flit_frame_end_msg(s->buf, pl, len);
	s->count++;
	s->next_seq++;
	s->c.msgs_sent++;
	s->c.bytes_sent += len;
	return !s->batching || s->flen >= s->batch_min || s->count == UINT16_MAX;
}

static int udp_send(struct flit_tsrc *ts, const void *data, size_t len)
{
	struct udp_src *s = (struct udp_src *)ts;
	uint64_t now;
	int r = 0;

	if (FLIT_UNLIKELY(len > max_msg_of(s)))
		return flit_err(EMSGSIZE, "udp: %s: message of %zu bytes exceeds %u (source.udp.max_datagram)",
				s->topic, len, max_msg_of(s));
	src_lock(s);
	if (FLIT_UNLIKELY(s->claimed)) {
		src_unlock(s);
		return flit_err(EBUSY, "udp: %s: send during claim", s->topic);
	}
	now = mono();
	uint64_t tsv = s->ts ? flit_realtime_now() : 0;
	if (FLIT_UNLIKELY(!s->batching && s->count) && src_flush_locked(s, now, false)) {
		s->c.back_pressured++;
		src_unlock(s);
		return FLIT_BACK_PRESSURED;
	}
	if (!s->batching) {
		uint32_t flen = (uint32_t)(FLIT_FRAME_HDR_LEN + flit_msg_wire_len(len, s->ts));
		uint8_t *pl = flit_frame_put_single(s->buf, s->session, s->next_seq, 0,
						    (uint32_t)len, s->ts, tsv);
		if (len)
			memcpy(pl, data, len);
		if (s->rate_on && !flit_rl_take(&s->rl, flen, now)) {
			s->c.rate_limited++;
			s->c.back_pressured++;
			src_unlock(s);
			return FLIT_BACK_PRESSURED;
		}
		r = src_xmit(s, s->buf, flen);
		if (r) {
			if (r == FLIT_BACK_PRESSURED)
				s->c.back_pressured++;
			src_unlock(s);
			return r;
		}
		flit_rel_tx_sent(s->rel, s->buf, flen, s->next_seq, 1, now);
		s->next_seq++;
		s->c.msgs_sent++;
		s->c.bytes_sent += len;
		s->c.frames_sent++;
		src_unlock(s);
		return 0;
	}
	/* implicit batching */
	r = src_make_room(s, len, now);
	if (r) {
		if (r == FLIT_BACK_PRESSURED)
			s->c.back_pressured++;
		src_unlock(s);
		return r;
	}
	uint8_t *pl = flit_frame_put_hdr(s->buf + s->flen, 0, (uint32_t)len, s->ts, tsv);
	if (len)
		memcpy(pl, data, len);
	if (src_msg_done(s, pl, (uint32_t)len))
		src_flush_locked(s, now, false);
	src_unlock(s);
	return 0;
}

static int udp_claim(struct flit_tsrc *ts, size_t len, void **buf)
{
	struct udp_src *s = (struct udp_src *)ts;
	uint64_t now;

	if (len > max_msg_of(s))
		return flit_err(EMSGSIZE, "udp: %s: claim of %zu bytes exceeds %u", s->topic, len, max_msg_of(s));
	src_lock(s);
	if (s->claimed) {
		src_unlock(s);
		return flit_err(EBUSY, "udp: %s: already claimed", s->topic);
	}
	now = mono();
	int r = src_make_room(s, len, now);
	if (r) {
		src_unlock(s);
		return r;
	}
	s->claim_pl = flit_frame_put_hdr(s->buf + s->flen, 0, (uint32_t)len, s->ts,
					 s->ts ? flit_realtime_now() : 0);
	s->claimed = true;
	*buf = s->claim_pl;
	/* the caller writes the payload without the lock: the service leaves
	 * a claimed frame alone, and sends from this thread see `claimed` */
	src_unlock(s);
	return 0;
}

static int udp_commit(struct flit_tsrc *ts, size_t len)
{
	struct udp_src *s = (struct udp_src *)ts;
	src_lock(s);
	if (!s->claimed) {
		src_unlock(s);
		return flit_err(EINVAL, "udp: %s: commit without claim", s->topic);
	}
	uint8_t *mh = s->claim_pl - (s->ts ? 16 : 8);
	uint32_t claimed_len = flit_ld32(mh + 4);
	if (len > claimed_len) {
		src_unlock(s);
		return flit_err(EINVAL, "udp: %s: commit of %zu bytes exceeds the claim of %u",
				s->topic, len, claimed_len);
	}
	flit_st32(mh + 4, (uint32_t)len);
	s->claimed = false;
	/* the message is numbered: if the rate limit holds the frame back,
	 * it stays pending and goes with the next send, flush or service */
	if (src_msg_done(s, s->claim_pl, (uint32_t)len))
		src_flush_locked(s, mono(), false);
	src_unlock(s);
	return 0;
}

static int udp_abort(struct flit_tsrc *ts)
{
	struct udp_src *s = (struct udp_src *)ts;
	src_lock(s);
	if (!s->claimed) {
		src_unlock(s);
		return flit_err(EINVAL, "udp: %s: abort without claim", s->topic);
	}
	s->claimed = false;
	if (!s->count)
		s->flen = 0;
	src_unlock(s);
	return 0;
}

static int udp_flush(struct flit_tsrc *ts)
{
	struct udp_src *s = (struct udp_src *)ts;
	src_lock(s);
	int r = s->claimed ? 0 : src_flush_locked(s, mono(), false);
	src_unlock(s);
	return r;
}

static int udp_receivers(struct flit_tsrc *ts)
{
	struct udp_src *s = (struct udp_src *)ts;
	uint64_t now = mono();
	int n = 0;
	src_lock(s);
	for (unsigned i = 0; i < s->nrcv; i++)
		n += s->rcv[i].expires > now;
	src_unlock(s);
	return n;
}

static size_t udp_max_msg(const struct flit_tsrc *ts)
{
	return max_msg_of((const struct udp_src *)ts);
}

static uint64_t udp_next_seq(const struct flit_tsrc *ts)
{
	return ((const struct udp_src *)ts)->next_seq;
}

static int udp_tx_stamp(struct flit_tsrc *ts, uint64_t seq, struct flit_tx_stamp *out)
{
	struct udp_src *s = (struct udp_src *)ts;
	int r;

	if (!s->txts)
		return flit_err(EOPNOTSUPP, "udp: %s: transmit stamps are off (context.udp.tx_timestamps)",
				s->topic);
	if (s->tp->xk_tx_ts) {
		xsk_tx_stamps_route(s->tp);
		r = 0;
		src_lock(s);
	} else {
		src_lock(s);
		r = flit_txts_drain(s->txts, s->fd, 1024);
	}
	if (r >= 0)
		r = flit_txts_lookup(s->txts, seq, out);
	src_unlock(s);
	if (r == -EAGAIN)
		return flit_err(EAGAIN, "udp: %s: the transmit stamp of message %llu has not come back yet",
				s->topic, (unsigned long long)seq);
	if (r == -ENOENT)
		return flit_err(ENOENT, "udp: %s: no datagram %s among the last %u sent", s->topic,
				seq == FLIT_TX_STAMP_LATEST ? "stamped" : "carrying that message",
				FLIT_TXTS_RING);
	return r < 0 ? flit_err_wrap(-r, "udp: %s", s->topic) : 0;
}

static void udp_src_counters(const struct flit_tsrc *ts, struct flit_counters *c)
{
	struct udp_src *s = (struct udp_src *)ts;
	src_lock(s);
	c->msgs_sent += s->c.msgs_sent;
	c->bytes_sent += s->c.bytes_sent;
	c->frames_sent += s->c.frames_sent;
	c->back_pressured += s->c.back_pressured;
	c->naks_received += s->c.naks_received;
	c->retransmissions += s->c.retransmissions;
	c->rate_limited += s->c.rate_limited;
	c->malformed += s->c.malformed;
	src_unlock(s);
}

/* ---- source side: the service (NAKs, queries, joins, timers) ------------- */

static size_t src_info(struct udp_src *s, void *buf, size_t cap)
{
	struct flit_tp *tp = s->tp;
	struct flit_ctl_info in = {
		.domain = tp->domain,
		.mode = s->mode,
		.data_port = s->mode == FLIT_MODE_MCAST ? ntohs(s->dest.sin_port) : ntohs(s->self.sin_port),
		.data_addr = s->mode == FLIT_MODE_MCAST ? s->dest.sin_addr.s_addr : 0,
		.ctl_addr = s->self.sin_addr.s_addr,
		.ctl_port = ntohs(s->self.sin_port),
		.pid = (uint32_t)getpid(),
	};
	struct flit_ctl_name t = { .idx = 0, .kind = FLIT_NAME_EXACT,
				   .len = (uint16_t)strlen(s->topic), .name = s->topic };
	return flit_ctl_info_encode(buf, cap, s->session, flit_rel_tx_next(s->rel), &in, &t, 1);
}

static void src_add_rcv(struct udp_src *s, const struct sockaddr_in *a, bool leave, uint64_t now)
{
	for (unsigned i = 0; i < s->nrcv; i++)
		if (same_ep(&s->rcv[i].a, a)) {
			if (leave)
				s->rcv[i] = s->rcv[--s->nrcv];
			else
				s->rcv[i].expires = now + RCV_EXPIRE_NS;
			return;
		}
	if (leave)
		return;
	if (s->nrcv == s->caprcv) {
		unsigned cap = s->caprcv ? s->caprcv * 2 : 4;
		if (cap > 4096)
			return; /* a flood of joins: ignore beyond this */
		struct urcv *v = realloc(s->rcv, cap * sizeof(*v));
		if (!v)
			return;
		s->rcv = v;
		s->caprcv = cap;
	}
	s->rcv[s->nrcv++] = (struct urcv){ .a = *a, .expires = now + RCV_EXPIRE_NS };
}

/* Does a QUERY (checked) name `topic`, exactly or by a pattern? */
static bool query_wants(const uint8_t *q, const struct flit_frame_hdr *h, const char *topic)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	char name[FLIT_TOPIC_MAX + 1];

	flit_ctl_names_init(&it, q, h);
	while (flit_ctl_names_next(&it, &nm)) {
		ctl_name_str(&nm, name);
		if (nm.kind == FLIT_NAME_PATTERN ? fnmatch(name, topic, 0) == 0 : !strcmp(name, topic))
			return true;
	}
	return false;
}

static void advert_start(struct advert *a, uint64_t now)
{
	a->ivl = ADVERT_MIN_NS / 2;
	a->at = now;
}

/* The INFO went out: the next one after twice the interval, up to max. */
static void advert_sent(struct advert *a, uint64_t now, uint64_t max)
{
	a->last = now;
	a->ivl = a->ivl * 2 > max ? max : a->ivl * 2;
	a->at = now + a->ivl;
}

/* A matching query: answer within a few ms (spread: many sources, one
 * query), but not more often than ADVERT_MIN_NS.  tp->lock held. */
static void advert_soon(struct flit_tp *tp, struct advert *a, uint64_t now)
{
	uint64_t at = now + rng_next(&tp->srng) % (2 * MS);

	if (at < a->last + ADVERT_MIN_NS)
		at = a->last + ADVERT_MIN_NS;
	if (at < a->at)
		a->at = at;
}

/* A control datagram that arrived on the source's own socket. */
static void src_ctl(struct udp_src *s, const uint8_t *p, size_t len,
		    const struct sockaddr_in *from, uint64_t now)
{
	struct flit_tp *tp = s->tp;
	struct flit_frame_hdr h;

	if (len < FLIT_FRAME_HDR_LEN || flit_ld16(p) != FLIT_WIRE_MAGIC ||
	    flit_ctl_check(p, len, &h) != FLIT_FE_OK) {
		s->c.malformed++;
		return;
	}
	switch (h.type) {
	case FLIT_FT_NAK: {
		struct flit_seq_range nak[FLIT_CTL_RANGES_MAX], ncf[FLIT_CTL_RANGES_MAX];
		unsigned n = h.count < FLIT_CTL_RANGES_MAX ? h.count : FLIT_CTL_RANGES_MAX;
		if (h.session_id != s->session)
			return;
		for (unsigned i = 0; i < n; i++)
			flit_ctl_range(p, i, &nak[i]);
		s->c.naks_received += n;
		unsigned m = flit_rel_tx_nak(s->rel, nak, n, now, ncf, FLIT_CTL_RANGES_MAX);
		if (m) {
			size_t l = flit_ctl_ranges_encode(s->ctl, sizeof(s->ctl), FLIT_FT_NCF, s->session,
							  flit_rel_tx_next(s->rel), ncf, m);
			src_raw(s, s->ctl, l);
		}
		break;
	}
	case FLIT_FT_QUERY: {
		if (flit_ctl_domain(p) != tp->domain)
			return;
		bool match = h.session_id == s->session || query_wants(p, &h, s->topic);
		/* at most one direct answer per millisecond: a flood of
		 * queries must not turn into a flood of answers */
		if (match && now - s->last_direct >= 1 * MS) {
			s->last_direct = now;
			size_t l = src_info(s, s->ctl, sizeof(s->ctl));
			if (sendto(s->fd, s->ctl, l, MSG_DONTWAIT, (const struct sockaddr *)from,
				   sizeof(*from)) >= 0 && s->txts)
				flit_txts_sent(s->txts, s->ctl, l, 1);
		}
		break;
	}
	case FLIT_FT_JOIN:
		if (h.session_id != s->session || flit_ctl_domain(p) != tp->domain)
			break;
		src_add_rcv(s, from, h.flags & FLIT_JF_LEAVE, now);
		if (h.flags & FLIT_JF_LATE) {
			/* where the live stream starts, and what is retained */
			uint64_t next = flit_rel_tx_next(s->rel);
			struct flit_ctl_late late = {
				.trail = flit_rel_tx_trail(s->rel, now),
				.origin = 0, /* next_seq starts there */
				.age_ns = now - s->created,
				.late_join = s->late_join,
			};
			size_t l = flit_ctl_late_encode(s->ctl, sizeof(s->ctl), s->session, next, &late);
			if (l && sendto(s->fd, s->ctl, l, MSG_DONTWAIT, (const struct sockaddr *)from,
					sizeof(*from)) >= 0 && s->txts)
				flit_txts_sent(s->txts, s->ctl, l, 1);
		}
		break;
	default:
		break; /* our own multicast looped back, or noise */
	}
}

/* Run the source's service; returns its next deadline.  Lock held. */
static uint64_t src_service(struct udp_src *s, uint64_t now)
{
	struct flit_tp *tp = s->tp;
	struct sockaddr_in from;
	socklen_t fl;
	uint64_t next = UINT64_MAX, wait;
	const void *f;
	size_t len;

	for (int i = 0; i < 64; i++) {
		fl = sizeof(from);
		ssize_t n = recvfrom(s->fd, tp->rbuf, sizeof(tp->rbuf), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);
		if (n < 0)
			break;
		src_ctl(s, tp->rbuf, (size_t)n, &from, now);
	}
	/* transmit stamps: keep the error queue short (it also wakes the
	 * service thread's epoll while it holds anything) */
	if (s->txts)
		flit_txts_drain(s->txts, s->fd, 1024);
	while ((f = flit_rel_tx_retx_next(s->rel, now, &len, &wait))) {
		src_raw(s, f, len);
		s->c.retransmissions++;
	}
	if (wait != UINT64_MAX && now + wait < next)
		next = now + wait;
	/* heartbeat: the next seq sent so far and the retention trail */
	if (now >= flit_rel_tx_hb_due(s->rel)) {
		size_t l = flit_ctl_hb_encode(s->ctl, sizeof(s->ctl), s->session, flit_rel_tx_next(s->rel),
					      flit_rel_tx_trail(s->rel, now));
		src_raw(s, s->ctl, l);
		flit_rel_tx_hb_sent(s->rel, now);
	}
	if (flit_rel_tx_hb_due(s->rel) < next)
		next = flit_rel_tx_hb_due(s->rel);
	/* idle batch */
	if (s->count && !s->claimed) {
		if (now - s->batch_t0 >= s->batch_ivl)
			src_flush_locked(s, now, true);
		else if (s->batch_t0 + s->batch_ivl < next)
			next = s->batch_t0 + s->batch_ivl;
	}
	/* advertisement with backoff */
	if (now >= s->adv.at && tp->resolver.sin_port && tp->res_fd >= 0) {
		len = src_info(s, s->ctl, sizeof(s->ctl));
		sendto(tp->res_fd, s->ctl, len, MSG_DONTWAIT, (struct sockaddr *)&tp->resolver,
		       sizeof(tp->resolver));
		advert_sent(&s->adv, now, tp->cc->udp_resolver_max_ms * MS);
	}
	if (tp->resolver.sin_port && s->adv.at < next)
		next = s->adv.at;
	/* forget silent receivers */
	for (unsigned i = 0; i < s->nrcv;)
		if (s->rcv[i].expires <= now)
			s->rcv[i] = s->rcv[--s->nrcv];
		else
			i++;
	return next;
}

/* Queries heard on the resolver channel: advertise matching sources soon. */
static void res_service(struct flit_tp *tp, uint64_t now)
{
	struct sockaddr_in from;
	socklen_t fl;
	struct flit_frame_hdr h;

	if (tp->res_fd < 0)
		return;
	for (int i = 0; i < 64; i++) {
		fl = sizeof(from);
		ssize_t n = recvfrom(tp->res_fd, tp->rbuf, sizeof(tp->rbuf), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);
		if (n < 0)
			break;
		if (flit_ctl_check(tp->rbuf, (size_t)n, &h) != FLIT_FE_OK || h.type != FLIT_FT_QUERY ||
		    flit_ctl_domain(tp->rbuf) != tp->domain)
			continue;
		for (struct udp_src *s = tp->srcs; s; s = s->next) {
			if (!query_wants(tp->rbuf, &h, s->topic))
				continue;
			src_lock(s);
			advert_soon(tp, &s->adv, now);
			src_unlock(s);
		}
		for (struct fad *a = tp->fads; a; a = a->next)
			if (query_wants(tp->rbuf, &h, a->topic))
				advert_soon(tp, &a->adv, now);
	}
}

static int thread_start(struct flit_tp *tp);
static void wake(struct flit_tp *tp);

/* Advertise the other transports' sources that are due.  tp->lock held.
 * Returns the next deadline. */
static uint64_t fads_service(struct flit_tp *tp, uint64_t now)
{
	uint64_t next = UINT64_MAX, max = tp->cc->udp_resolver_max_ms * MS;

	if (!tp->resolver.sin_port || tp->res_fd < 0)
		return next;
	for (struct fad *a = tp->fads; a; a = a->next) {
		if (now >= a->adv.at) {
			uint8_t buf[512] __attribute__((aligned(8))); /* one 255-byte topic: 312 */
			struct flit_ctl_info in = {
				.domain = tp->domain, .mode = a->mode,
				.data_port = a->port, .data_addr = a->addr,
				.pid = (uint32_t)getpid(),
			};
			struct flit_ctl_name t = { .idx = 0, .kind = FLIT_NAME_EXACT,
						   .len = (uint16_t)strlen(a->topic), .name = a->topic };
			size_t len = flit_ctl_info_encode(buf, sizeof(buf), a->session, 0, &in, &t, 1);
			if (len)
				sendto(tp->res_fd, buf, len, MSG_DONTWAIT,
				       (struct sockaddr *)&tp->resolver, sizeof(tp->resolver));
			advert_sent(&a->adv, now, max);
		}
		if (a->adv.at < next)
			next = a->adv.at;
	}
	return next;
}

static int udp_res_advertise(struct flit_tp *tp, const struct flit_res_ad *ad)
{
	struct fad *a;

	if (!tp->resolver.sin_port || tp->res_fd < 0)
		return flit_err(ENOPROTOOPT, "%s: topic resolution by multicast is off (context.udp.resolver)",
				tp->xp ? "xdp" : "udp");
	if (strlen(ad->topic) > FLIT_TOPIC_MAX || !(a = calloc(1, sizeof(*a))))
		return flit_err(ad->topic && strlen(ad->topic) > FLIT_TOPIC_MAX ? EINVAL : ENOMEM,
				"udp: cannot advertise topic '%s'", ad->topic);
	a->session = ad->session;
	a->mode = ad->mode;
	a->addr = ad->addr;
	a->port = ad->port;
	strcpy(a->topic, ad->topic);
	advert_start(&a->adv, mono());
	pthread_mutex_lock(&tp->lock);
	a->next = tp->fads;
	tp->fads = a;
	pthread_mutex_unlock(&tp->lock);
	if (thread_start(tp))
		flit_warn("%s; advertisements are sent by flit_ctx_poll() only", flit_errmsg());
	wake(tp);
	return 0;
}

static void udp_res_withdraw(struct flit_tp *tp, uint32_t session)
{
	pthread_mutex_lock(&tp->lock);
	for (struct fad **pp = &tp->fads; *pp; pp = &(*pp)->next)
		if ((*pp)->session == session) {
			struct fad *a = *pp;
			*pp = a->next;
			free(a);
			break;
		}
	pthread_mutex_unlock(&tp->lock);
}

/* One pass of the source-side service; returns the next deadline. */
static uint64_t service_all(struct flit_tp *tp, uint64_t now)
{
	uint64_t next = now + 1000 * MS;

	pthread_mutex_lock(&tp->lock);
	res_service(tp, now);
	uint64_t fdl = fads_service(tp, now);
	if (fdl < next)
		next = fdl;
	for (struct udp_src *s = tp->srcs; s; s = s->next) {
		src_lock(s);
		uint64_t dl = src_service(s, now);
		if (s->batching && now + s->batch_ivl < dl)
			dl = now + s->batch_ivl; /* a batch may start any time */
		src_unlock(s);
		if (dl < next)
			next = dl;
	}
	pthread_mutex_unlock(&tp->lock);
	return next;
}

/* While the application polls, its poll serves the sources (every
 * HOUSE_NS) and the thread stays asleep: no wake-up steals the CPU of a
 * spinning application.  The thread takes over once polling stops. */
#define POLL_FRESH_NS (2 * MS)
#define POLL_NAP_MAX_NS (50 * MS)

static void *service_thread(void *arg)
{
	struct flit_tp *tp = arg;
	struct epoll_event ev[16];

	uint64_t nap = 0;

	for (;;) {
		uint64_t now = mono();
		uint64_t lp = __atomic_load_n(&tp->last_poll, __ATOMIC_RELAXED);
		if (lp && now - lp < POLL_FRESH_NS) {
			/* the application polls: check back later, less and less
			 * often (up to POLL_NAP_MAX_NS), but within a batch
			 * interval while a batching source exists */
			struct pollfd pf = { .fd = tp->wakefd, .events = POLLIN };
			nap = nap ? nap * 2 : POLL_FRESH_NS;
			if (nap > POLL_NAP_MAX_NS)
				nap = POLL_NAP_MAX_NS;
			uint64_t w = nap, cap = __atomic_load_n(&tp->batch_cap, __ATOMIC_RELAXED);
			if (cap && cap < w)
				w = cap;
			struct timespec to = { .tv_sec = (time_t)(w / 1000000000ull),
					       .tv_nsec = (long)(w % 1000000000ull) };
			if (__atomic_load_n(&tp->stop, __ATOMIC_ACQUIRE))
				break;
			if (ppoll(&pf, 1, &to, NULL) > 0) {
				uint64_t v;
				if (read(tp->wakefd, &v, sizeof(v)) < 0)
					(void)0;
			}
			continue;
		}
		nap = 0;
		uint64_t next = service_all(tp, now);
		if (__atomic_load_n(&tp->stop, __ATOMIC_ACQUIRE))
			break;
		now = mono();
		uint64_t wait = next > now ? next - now : 0;
		struct timespec to = { .tv_sec = (time_t)(wait / 1000000000ull),
				       .tv_nsec = (long)(wait % 1000000000ull) };
		int n = epoll_pwait2(tp->epfd, ev, 16, &to, NULL);
		for (int i = 0; i < n; i++)
			if (ev[i].data.fd == tp->wakefd) {
				uint64_t v;
				if (read(tp->wakefd, &v, sizeof(v)) < 0)
					(void)0;
			}
	}
	return NULL;
}

static void wake(struct flit_tp *tp)
{
	uint64_t one = 1;
	if (tp->thread_on && write(tp->wakefd, &one, sizeof(one)) < 0)
		(void)0;
}

static void thread_watch(struct flit_tp *tp, int fd)
{
	struct epoll_event e = { .events = EPOLLIN, .data.fd = fd };
	epoll_ctl(tp->epfd, EPOLL_CTL_ADD, fd, &e);
}

/* Start the service thread, watching the resolver and every source so far
 * (sources opened later are added by udp_src_open). */
static int thread_start(struct flit_tp *tp)
{
	int err;

	if (tp->thread_on || tp->cc->udp_service != FLIT_UDP_SERVICE_THREAD)
		return 0;
	tp->epfd = epoll_create1(EPOLL_CLOEXEC);
	tp->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (tp->epfd < 0 || tp->wakefd < 0) {
		err = flit_err(errno, "udp: service thread: %s", strerror(errno));
		goto fail;
	}
	thread_watch(tp, tp->wakefd);
	if (tp->res_fd >= 0)
		thread_watch(tp, tp->res_fd);
	pthread_mutex_lock(&tp->lock);
	for (struct udp_src *s = tp->srcs; s; s = s->next)
		thread_watch(tp, s->fd);
	pthread_mutex_unlock(&tp->lock);
	err = pthread_create(&tp->thread, NULL, service_thread, tp);
	if (err) {
		err = flit_err(err, "udp: cannot start the service thread: %s", strerror(err));
		goto fail;
	}
	pthread_setname_np(tp->thread, "flit-udp");
	tp->thread_on = true;
	return 0;
fail:
	if (tp->epfd >= 0)
		close(tp->epfd);
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	tp->epfd = tp->wakefd = -1;
	return err;
}

/* The service thread's longest nap while the application polls: the
 * shortest batch interval of a batching source (0: none).  tp->lock held. */
static void batch_cap_update(struct flit_tp *tp)
{
	uint64_t cap = 0;
	for (struct udp_src *o = tp->srcs; o; o = o->next)
		if (o->batching && (!cap || o->batch_ivl < cap))
			cap = o->batch_ivl;
	__atomic_store_n(&tp->batch_cap, cap, __ATOMIC_RELAXED);
}

/* ---- timestamps -------------------------------------------------------------- */

_Static_assert((int)FLIT_UDP_TS_OFF == (int)FLIT_TS_NONE &&
	       (int)FLIT_UDP_TS_SOFTWARE == (int)FLIT_TS_SOFTWARE &&
	       (int)FLIT_UDP_TS_HARDWARE == (int)FLIT_TS_HARDWARE, "config and API timestamp kinds differ");

/* NIC hardware stamping where the configuration asks for it (the one place
 * that sets a NIC up: flit_hwts_enable()), and what is in effect, for
 * flit_ctx_ts_status() and the description.  Never fails: without hardware
 * the stamps are the kernel's software ones, and tp->ts.why says why. */
static void ts_setup(struct flit_tp *tp, bool xdp)
{
	const struct flit_cfg_context *cc = tp->cc;
	struct flit_ts_status *t = &tp->ts;
	struct flit_ts_info ti = { .sz = sizeof(ti) };
	unsigned dirs = 0, ok = 0;

	memset(t, 0, sizeof(*t));
	t->sz = sizeof(*t);
	t->rx_asked = t->rx = cc->udp_timestamps;
	/* xdp sends data through AF_XDP: its stamps are context.xdp.* */
	t->tx_asked = t->tx = xdp ? FLIT_TS_NONE : cc->udp_tx_timestamps;
	t->phc_index = -1;
	snprintf(t->ifname, sizeof(t->ifname), "%s", cc->udp_interface);
	if (cc->udp_interface[0] && flit_ts_info_get(cc->udp_interface, &ti) == 0)
		t->phc_index = ti.phc_index;
	dirs = (t->rx == FLIT_TS_HARDWARE ? FLIT_HWTS_RX : 0) | (t->tx == FLIT_TS_HARDWARE ? FLIT_HWTS_TX : 0);
	if (!dirs)
		return;
	if (!cc->udp_interface[0]) {
		snprintf(t->why, sizeof(t->why), "hardware timestamps need context.udp.interface "
			 "(the NIC to set up)");
	} else if (flit_hwts_enable(cc->udp_interface, dirs, NULL) == 0) {
		ok = dirs;
	} else {
		snprintf(t->why, sizeof(t->why), "%s", flit_errmsg());
		/* perhaps one direction only (the first reason is kept) */
		if (dirs == (FLIT_HWTS_RX | FLIT_HWTS_TX)) {
			ok |= flit_hwts_enable(cc->udp_interface, FLIT_HWTS_RX, NULL) == 0 ? FLIT_HWTS_RX : 0;
			ok |= flit_hwts_enable(cc->udp_interface, FLIT_HWTS_TX, NULL) == 0 ? FLIT_HWTS_TX : 0;
		}
	}
	if (ok == dirs) {
		t->why[0] = '\0';
		return;
	}
	if ((dirs & ~ok) & FLIT_HWTS_RX)
		t->rx = FLIT_TS_SOFTWARE;
	if ((dirs & ~ok) & FLIT_HWTS_TX)
		t->tx = FLIT_TS_SOFTWARE;
	flit_warn("udp: hardware timestamps asked for but not available: %s; using software stamps", t->why);
}

/* "; stamps: rx software, tx software (hardware asked for, not available:
 * ...)", or where the driver accepted hardware stamping "; stamps set up: rx
 * hardware, tx hardware on eth1 (the NIC's where it gives one, else the
 * kernel's)": a set-up, not what the stamps were (a driver may accept and
 * never stamp); each message and transmit stamp says its own kind. */
static void ts_describe(struct flit_tp *tp)
{
	const struct flit_ts_status *t = &tp->ts;
	size_t l = strlen(tp->desc);

	if (!t->rx_asked && !t->tx_asked)
		return;
	if (t->rx == FLIT_TS_HARDWARE || t->tx == FLIT_TS_HARDWARE)
		snprintf(tp->desc + l, sizeof(tp->desc) - l, "; stamps set up: rx %s, tx %s%s%s "
			 "(the NIC's where it gives one, else the kernel's)%s%s%s",
			 flit_ts_kind_name(t->rx), flit_ts_kind_name(t->tx),
			 t->ifname[0] ? " on " : "", t->ifname,
			 t->why[0] ? " (hardware asked for, not available: " : "", t->why,
			 t->why[0] ? ")" : "");
	else
		snprintf(tp->desc + l, sizeof(tp->desc) - l, "; stamps: rx %s, tx %s%s%s%s",
			 flit_ts_kind_name(t->rx), flit_ts_kind_name(t->tx),
			 t->why[0] ? " (hardware asked for, not available: " : "", t->why,
			 t->why[0] ? ")" : "");
}

static int udp_ts_status(const struct flit_tp *tp, struct flit_ts_status *out)
{
	struct flit_ts_status v = tp->ts;

	if (tp->xp && !v.why[0]) {
		const char *why = flit_xdp_path_ts_why(tp->xp);
		if (why && why[0])
			snprintf(v.why, sizeof(v.why), "%s", why);
		else if (v.tx_asked == FLIT_TS_HARDWARE && v.tx == FLIT_TS_SOFTWARE)
			snprintf(v.why, sizeof(v.why), "%s: AF_XDP in copy mode: the kernel's software "
				 "stamp at completion, not the NIC's", v.ifname);
	}
	v.sz = out->sz < sizeof(v) ? out->sz : sizeof(v);
	memcpy(out, &v, v.sz);
	return 0;
}

/* ---- transport operations --------------------------------------------------- */

static int tp_open(struct flit_ctx *ctx, bool xdp, struct flit_tp **out)
{
	const struct flit_cfg_context *cc = flit_ctx_cfg(ctx);
	struct flit_tp *tp = calloc(1, sizeof(*tp));
	int err = 0, fd;

	if (!tp)
		return flit_err(ENOMEM, "udp: out of memory");
	tp->ctx = ctx;
	tp->cc = cc;
	tp->res_fd = tp->epfd = tp->wakefd = -1;
	tp->domain = flit_domain_id(cc->domain);
	tp->rng = mono() ^ ((uint64_t)getpid() << 32);
	tp->srng = tp->rng * 0x9e3779b97f4a7c15ull + 1;
	pthread_mutex_init(&tp->lock, NULL);
	tp->iocfg = (struct flit_udp_io_cfg){
		.backend = cc->udp_backend == 1 ? FLIT_UDP_URING : FLIT_UDP_SOCKETS,
		.batch = cc->udp_rx_batch,
		.dgram_max = RX_DGRAM_MAX,
		.timestamps = cc->udp_timestamps != FLIT_UDP_TS_OFF,
	};
	if (cc->udp_impair[0] && (err = flit_dgram_impair_parse(cc->udp_impair, &tp->iocfg.impair)))
		goto fail;
	if (cc->udp_interface[0]) {
		struct ifreq ifr = { 0 };
		tp->ifindex = if_nametoindex(cc->udp_interface);
		if (!tp->ifindex) {
			err = flit_err(ENODEV, "udp: context.udp.interface %s: no such interface", cc->udp_interface);
			goto fail;
		}
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", cc->udp_interface);
		if (fd >= 0 && ioctl(fd, SIOCGIFADDR, &ifr) == 0)
			tp->ifaddr = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr;
		if (fd >= 0)
			close(fd);
		if (!tp->ifaddr.s_addr) {
			err = flit_err(EADDRNOTAVAIL, "udp: context.udp.interface %s has no IPv4 address",
				       cc->udp_interface);
			goto fail;
		}
	}
	ts_setup(tp, xdp);
	tp->dg = calloc(tp->iocfg.batch, sizeof(*tp->dg));
	if (!tp->dg) {
		err = flit_err(ENOMEM, "udp: out of memory");
		goto fail;
	}
	/* the receiver's unicast socket */
	fd = udp_socket(tp, tp->ifaddr, 0, false, true);
	if (fd < 0 || (err = io_wrap(tp, fd, true, &tp->ucast))) {
		err = fd < 0 ? fd : err;
		goto fail;
	}
	if (xdp) {
		socklen_t sl = sizeof(tp->ucast_self);
		getsockname(flit_udp_io_fd(tp->ucast), (struct sockaddr *)&tp->ucast_self, &sl);
		if (!tp->ifaddr.s_addr) {
			err = flit_err(EINVAL, "xdp: context.udp.interface must name the interface to use");
			goto fail;
		}
		if ((err = flit_xdp_path_open(cc, &tp->xp)))
			goto fail;
		tp->xk = flit_xdp_path_xsk(tp->xp);
		tp->xk_max = flit_xsk_max_payload(tp->xk);
		if (cc->xdp_rx_timestamps)
			tp->ts.rx_asked = tp->ts.rx = FLIT_TS_HARDWARE;
		if (cc->xdp_tx_timestamps && flit_xsk_tx_clock(tp->xk)) {
			/* AF_XDP TX metadata: the kernel's software stamp in
			 * copy mode, the NIC's in zero-copy mode */
			tp->xk_tx_ts = true;
			tp->ts.tx_asked = FLIT_TS_HARDWARE;
			tp->ts.tx = strcmp(flit_xsk_tx_clock(tp->xk), "phc") == 0 ? FLIT_TS_HARDWARE
										  : FLIT_TS_SOFTWARE;
		}
		if ((err = flit_xdp_path_flow_get(tp->xp, tp->ifaddr, tp->ucast_self.sin_port)))
			goto fail;
		if (cc->udp_impair[0]) {
			/* tests: the same impairment as the socket path */
			if ((err = flit_impair_open(&tp->iocfg.impair, tp->iocfg.batch, RX_DGRAM_MAX,
						    &tp->xk_im))) {
				err = flit_err_wrap(-err, "xdp");
				goto fail;
			}
		}
		snprintf(tp->desc, sizeof(tp->desc), "%s%s%s", flit_xdp_path_describe(tp->xp),
			 tp->xk_im ? "; receive " : "", tp->xk_im ? flit_impair_describe(tp->xk_im) : "");
		flit_info("%s", tp->desc);
	} else {
		snprintf(tp->desc, sizeof(tp->desc), "udp: %s", flit_udp_io_describe(tp->ucast));
	}
	ts_describe(tp);
	/* the resolver channel: adverts for the receive side, queries for
	 * the source side (two sockets on one group:port) */
	if (strcmp(cc->udp_resolver, "off")) {
		flit_ep_parse(cc->udp_resolver, &tp->resolver);
		fd = udp_socket(tp, (struct in_addr){ INADDR_ANY }, ntohs(tp->resolver.sin_port), true, true);
		if (fd >= 0 && join_group(tp, fd, tp->resolver.sin_addr)) {
			close(fd);
			fd = -1;
		}
		/* io_wrap owns fd from here, even when it fails */
		if (fd >= 0 && io_wrap(tp, fd, true, &tp->res_rx) == 0) {
			fd = udp_socket(tp, (struct in_addr){ INADDR_ANY }, ntohs(tp->resolver.sin_port), true, true);
			if (fd >= 0 && join_group(tp, fd, tp->resolver.sin_addr) == 0)
				tp->res_fd = fd;
			else if (fd >= 0)
				close(fd);
		}
		if (tp->res_fd < 0) {
			flit_warn("udp: resolver %s unusable (%s): topic resolution by multicast is off; "
				  "use receiver.udp.static or set context.udp.interface",
				  cc->udp_resolver, flit_errmsg());
			tp->resolver.sin_port = 0;
		}
	}
	tp->next_house = mono();
	tp->query_ivl = QUERY_MIN_NS / 2;
	*out = tp;
	return 0;
fail:
	flit_impair_close(tp->xk_im);
	flit_xdp_path_close(tp->xp);
	flit_udp_io_close(tp->ucast);
	free(tp->dg);
	free(tp);
	return err;
}

static int udp_open(struct flit_ctx *ctx, struct flit_tp **out)
{
	return tp_open(ctx, false, out);
}

static const char *udp_describe(const struct flit_tp *tp)
{
	return tp->desc;
}

static int xdp_open(struct flit_ctx *ctx, struct flit_tp **out)
{
	return tp_open(ctx, true, out);
}

static void udp_close(struct flit_tp *tp)
{
	if (tp->thread_on) {
		__atomic_store_n(&tp->stop, true, __ATOMIC_RELEASE);
		wake(tp);
		pthread_join(tp->thread, NULL);
	}
	while (tp->sess) {
		sess_unbind(tp->sess, 0, true);
		sess_delete(tp, tp->sess);
	}
	statics_release(tp);
	free(tp->statics);
	while (tp->fads) {
		struct fad *a = tp->fads;
		tp->fads = a->next;
		free(a);
	}
	for (unsigned i = 0; i < tp->nfound; i++)
		free(tp->found[i]);
	free(tp->found);
	free(tp->static_uc);
	rsock_reap(tp);
	flit_impair_close(tp->xk_im);
	flit_xdp_path_close(tp->xp); /* removes our flows, filter, sockets */
	tp->xp = NULL;
	tp->xk = NULL;
	while (tp->socks) {
		struct rsock *r = tp->socks;
		tp->socks = r->next;
		flit_udp_io_close(r->io);
		free(r);
	}
	flit_udp_io_close(tp->ucast);
	flit_udp_io_close(tp->res_rx);
	if (tp->res_fd >= 0)
		close(tp->res_fd);
	if (tp->epfd >= 0)
		close(tp->epfd);
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	pthread_mutex_destroy(&tp->lock);
	free(tp->dg);
	free(tp);
}

/* The group of a topic: a fixed group, or one of a range by topic hash. */
static struct in_addr pick_group(const char *spec, const char *topic)
{
	char b[FLIT_ENDPOINT_MAX];
	struct in_addr a;
	snprintf(b, sizeof(b), "%s", spec);
	char *slash = strchr(b, '/');
	unsigned bits = 32;
	if (slash) {
		*slash = '\0';
		bits = (unsigned)atoi(slash + 1);
	}
	inet_pton(AF_INET, b, &a);
	if (bits < 32) {
		uint32_t host = ~0u >> bits, base = ntohl(a.s_addr) & ~host;
		uint32_t h = flit_domain_id(topic) & host;
		if (h == 0 && host > 1)
			h = 1; /* avoid .0 */
		a.s_addr = htonl(base | h);
	}
	return a;
}

static int udp_src_open(struct flit_tp *tp, const char *topic,
			const struct flit_cfg_source *cfg, struct flit_tsrc **out)
{
	struct udp_src *s = calloc(1, sizeof(*s));
	uint64_t now = mono();
	socklen_t sl = sizeof(s->self);
	int err;

	if (!s)
		return flit_err(ENOMEM, "udp: out of memory");
	s->tp = tp;
	s->fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	snprintf(s->topic, sizeof(s->topic), "%s", topic);
	/* the application's thread: not tp->rng (the poll thread's) */
	while (!s->session)
		if (getrandom(&s->session, sizeof(s->session), 0) != sizeof(s->session))
			s->session = (uint32_t)(mono() ^ (uint64_t)getpid() << 16 ^ (uintptr_t)s);
	s->mode = cfg->udp_mode == FLIT_UDP_UNICAST ? FLIT_MODE_UNICAST : FLIT_MODE_MCAST;
	s->created = now;
	s->late_join = cfg->late_join;
	s->ts = cfg->timestamps;
	s->batching = cfg->batch;
	s->max_dgram = cfg->udp_max_datagram & ~7u;
	s->batch_min = cfg->udp_batch_min && cfg->udp_batch_min < s->max_dgram ? cfg->udp_batch_min : s->max_dgram;
	s->batch_ivl = cfg->udp_batch_interval_us * US;
	s->dest.sin_family = AF_INET;
	s->dest.sin_addr = pick_group(cfg->udp_group, topic);
	s->dest.sin_port = htons((uint16_t)cfg->udp_port);
	s->buf = aligned_alloc(64, (s->max_dgram + 63) & ~63u);
	if (!s->buf) {
		err = flit_err(ENOMEM, "udp: out of memory");
		goto fail;
	}
	if (cfg->udp_rate_limit) {
		s->rate_on = true;
		uint64_t bps = cfg->udp_rate_limit / 8;
		flit_rl_init(&s->rl, bps, bps / 100 > 4 * s->max_dgram ? bps / 100 : 4 * s->max_dgram, now);
	}
	struct flit_rel_tx_cfg rc = {
		.retain_bytes = cfg->udp_retain,
		.retain_ns = cfg->udp_retain_ms * MS,
		.retx_rate = cfg->udp_retx_rate_limit / 8,
		.hb_min_ns = cfg->udp_hb_min_ms * MS,
		.hb_max_ns = (cfg->udp_hb_max_ms > cfg->udp_hb_min_ms ? cfg->udp_hb_max_ms : cfg->udp_hb_min_ms) * MS,
	};
	if ((err = flit_rel_tx_new(&rc, now, &s->rel)))
		goto fail;
	s->fd = udp_socket(tp, tp->ifaddr, (uint16_t)cfg->udp_ctl_port, false, false);
	if (s->fd < 0) {
		err = s->fd;
		s->fd = -1;
		goto fail;
	}
	getsockname(s->fd, (struct sockaddr *)&s->self, &sl);
	if (tp->ts.tx != FLIT_TS_NONE) {
		s->txts = malloc(sizeof(*s->txts));
		if (!s->txts) {
			err = flit_err(ENOMEM, "udp: out of memory");
			goto fail;
		}
		if (!tp->xk_tx_ts && (err = flit_txts_enable(s->fd, tp->ts.tx)))
			goto fail;
		flit_txts_init(s->txts, tp->ts.tx);
		/* the stamps queue up against the receive buffer between two
		 * drains (5 ms while the application polls): room for a few
		 * thousand (best effort: capped at net.core.rmem_max) */
		int rb = (int)tp->cc->udp_rcvbuf;
		setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb));
	}
	{
		int fd2 = dup(s->fd);
		if (fd2 < 0 || (err = io_wrap(tp, fd2, false, &s->io))) {
			err = fd2 < 0 ? -errno : err;
			goto fail;
		}
	}
	advert_start(&s->adv, now);
	pthread_mutex_lock(&tp->lock);
	s->next = tp->srcs;
	tp->srcs = s;
	batch_cap_update(tp);
	if (tp->thread_on)
		thread_watch(tp, s->fd);
	pthread_mutex_unlock(&tp->lock);
	if (thread_start(tp))
		flit_warn("%s; sources are served by flit_ctx_poll() only", flit_errmsg());
	wake(tp);
	{
		char e[48];
		flit_info("udp: source %s session %08x to %s", topic, s->session, flit_ep_str(&s->dest, e, sizeof(e)));
	}
	*out = (struct flit_tsrc *)s;
	return 0;
fail:
	flit_rel_tx_free(s->rel);
	if (s->fd >= 0)
		close(s->fd);
	free(s->txts);
	free(s->buf);
	free(s);
	return err;
}

static void udp_src_close(struct flit_tsrc *ts)
{
	struct udp_src *s = (struct udp_src *)ts;
	struct flit_tp *tp = s->tp;
	uint64_t now = mono();

	pthread_mutex_lock(&tp->lock);
	for (struct udp_src **pp = &tp->srcs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	if (tp->thread_on)
		epoll_ctl(tp->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	batch_cap_update(tp);
	pthread_mutex_unlock(&tp->lock);
	src_lock(s);
	s->claimed = false;
	s->rate_on = false; /* the last frame goes, whatever the rate */
	src_flush_locked(s, now, true);
	/* tell receivers the session ended (twice: a single loss is common) */
	size_t l = flit_ctl_hb_encode(s->ctl, sizeof(s->ctl), s->session, flit_rel_tx_next(s->rel),
				      flit_rel_tx_trail(s->rel, now));
	if (l) {
		flit_st16(s->ctl + 4, FLIT_HBF_END);
		src_raw(s, s->ctl, l);
		src_raw(s, s->ctl, l);
	}
	src_unlock(s);
	flit_udp_io_close(s->io);
	close(s->fd);
	flit_rel_tx_free(s->rel);
	pthread_mutex_destroy(&s->lock);
	free(s->txts);
	free(s->rcv);
	free(s->buf);
	free(s);
}

static int udp_subs_changed(struct flit_tp *tp)
{
	if (tp->in_poll) {
		tp->dirty = true; /* a callback changed subscriptions: after the poll */
		return 0;
	}
	rebind(tp, mono());
	return 0;
}

static int udp_poll(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg)
{
	int total = 0;
	uint64_t now;
	(void)fn; (void)arg; /* frames go through the reliability layer */

	/* AF_XDP with nothing waiting: not even a clock read (a spinning
	 * latency-bound receiver then checks a ring and returns); the timers
	 * and the kernel sockets are looked at every XK_IDLE_POLLS of these */
	if (tp->xk && !tp->xk_im && !flit_xsk_rx_pending(tp->xk) &&
	    ++tp->xk_idle < XK_IDLE_POLLS && !tp->dirty)
		return 0;
	tp->xk_idle = 0;
	tp->in_poll = true;
	now = mono();
	__atomic_store_n(&tp->last_poll, now, __ATOMIC_RELAXED);
	int err = 0;
	if (tp->xk) {
		/* AF_XDP: every flow we listen on, unicast included */
		int n = drain_any(tp, NULL, tp->xk, &tp->xk_want, limit, now);
		if (n > 0)
			total += n;
		else if (n < 0)
			err = n;
	} else {
		for (struct rsock *r = tp->socks; r && total < limit; r = r->next) {
			if (!r->refs)
				continue; /* released during this poll */
			int n = drain(tp, r->io, &r->want, limit - total, now);
			if (n > 0)
				total += n;
			else if (n < 0 && !err)
				err = n;
		}
	}
	if ((tp->want_ucast_every_poll || tp->lj_waiting) && !tp->xk && total < limit) {
		int n = drain(tp, tp->ucast, &tp->ucast_want, limit - total, now);
		if (n > 0)
			total += n;
		else if (n < 0 && !err)
			err = n;
	}
	if (FLIT_UNLIKELY(now >= tp->next_house)) {
		total += housekeeping(tp, now, limit);
		if (__atomic_load_n(&tp->srcs, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&tp->fads, __ATOMIC_RELAXED)) {
			uint64_t dl = service_all(tp, now);
			if (dl < tp->next_house)
				tp->next_house = dl;
		}
	}
	tp->in_poll = false;
	if (FLIT_UNLIKELY(tp->dirty))
		rebind(tp, now);
	rsock_reap(tp);
	if (FLIT_UNLIKELY(err) && !total)
		return flit_err_wrap(-err, tp->xk ? "xdp: receive" : "udp: receive");
	return total;
}

/* udp and xdp differ in how they open (the data path) and what they can
 * stamp; everything else is this code on both. */
#define SESSION_OPS                        \
	.close = udp_close,                \
	.src_open = udp_src_open,          \
	.src_close = udp_src_close,        \
	.send = udp_send,                  \
	.claim = udp_claim,                \
	.commit = udp_commit,              \
	.abort = udp_abort,                \
	.flush = udp_flush,                \
	.receivers = udp_receivers,        \
	.max_msg = udp_max_msg,            \
	.next_seq = udp_next_seq,          \
	.src_counters = udp_src_counters,  \
	.subs_changed = udp_subs_changed,  \
	.poll = udp_poll,                  \
	.res_advertise = udp_res_advertise, \
	.res_withdraw = udp_res_withdraw,  \
	.describe = udp_describe

const struct flit_transport_ops flit_udp_ops = {
	.name = "udp",
	.caps = FLIT_CAP_MULTICAST | FLIT_CAP_TIMESTAMPS,
	.open = udp_open,
	.tx_stamp = udp_tx_stamp,
	.ts_status = udp_ts_status,
	SESSION_OPS,
};

const struct flit_transport_ops flit_xdp_ops = {
	.name = "xdp",
	.caps = FLIT_CAP_MULTICAST,
	.open = xdp_open,
	.tx_stamp = udp_tx_stamp,
	.ts_status = udp_ts_status,
	SESSION_OPS,
};
