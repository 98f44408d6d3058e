// SPDX-License-Identifier: BSD-2-Clause
/*
 * RDMA multicast through an unreliable-datagram queue pair (ud_path.h).
 *
 * One rdma_cm id bound to the local address owns the queue pair (UD, its
 * qkey rdma_cm's RDMA_UDP_QKEY); joining a group on it attaches the queue
 * pair (librdmacm does, on the join's event).  A second id, without a queue
 * pair, joins the groups we send to as a send-only member: its join gives
 * the address handle, remote QPN (0xffffff) and qkey to send with, attaches
 * nothing (a source does not receive its own datagrams) and, on RoCE, joins
 * no IP group (the kernel loops nothing back to a host without receivers).
 *
 * Receive buffers: `depth` of them, each the 40-byte GRH area and the path
 * MTU, registered once, posted at open.  A receive hands out views of the
 * completed buffers and posts them again at the next call.  Sends copy the
 * datagram into one of SEND_SLOTS registered slots; every SIG_EVERY-th send
 * is signaled, and its completion frees the slots up to it (a send queue
 * completes in order).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "error.h"
#include "rdma/ud_path.h"

#define GRH_LEN     40u
#define SEND_SLOTS  256u         /* a power of 2, a multiple of SIG_EVERY */
#define SIG_EVERY   16u
#define RX_POLL_MAX 64u
#define MAX_GROUPS  64u
#define JOIN_WAIT_MS 5000

/* the first 12 bytes of an IPv4-mapped GID (::ffff:a.b.c.d) */
static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

struct ud_group {
	struct in_addr group;
	unsigned rx_refs;            /* joined on rid (attached) while > 0 */
	bool tx;                     /* joined on sid: ah, qpn, qkey valid */
	struct ibv_ah *ah;
	uint32_t qpn, qkey;
};

struct flit_ud_path {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *rid;      /* owns the QP; receive joins */
	struct rdma_cm_id *sid;      /* send joins (no QP) */
	struct ibv_pd *pd;
	struct ibv_cq *rcq, *scq;
	struct ibv_qp *qp;
	uint32_t mtu;
	unsigned depth;
	uint8_t *rbuf;
	struct ibv_mr *rmr;
	uint32_t rsz;                /* bytes per receive buffer: GRH + MTU */
	uint64_t *lent;              /* buffers handed out by the last recv */
	unsigned nlent;
	struct ibv_wc stash[RX_POLL_MAX]; /* completions polled by rx_pending */
	unsigned nstash, stash_at;
	uint8_t *sbuf;
	struct ibv_mr *smr;
	uint64_t s_head, s_tail;     /* sends posted / known complete */
	pthread_mutex_t lock;        /* sends, joins (the event channel) */
	struct ud_group groups[MAX_GROUPS];
	unsigned ngroups;
	char desc[256];
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *dev_name(const struct rdma_cm_id *id)
{
	return id && id->verbs && id->verbs->device ? ibv_get_device_name(id->verbs->device) : "?";
}

static void ip_str(struct in_addr a, char *buf, size_t n)
{
	if (!inet_ntop(AF_INET, &a, buf, (socklen_t)n))
		snprintf(buf, n, "?");
}

static int post_recv(struct flit_ud_path *p, const uint64_t *slots, unsigned n)
{
	struct ibv_recv_wr wr[RX_POLL_MAX], *bad;
	struct ibv_sge sge[RX_POLL_MAX];

	while (n) {
		unsigned k = n < RX_POLL_MAX ? n : RX_POLL_MAX;
		for (unsigned i = 0; i < k; i++) {
			sge[i] = (struct ibv_sge){ .addr = (uintptr_t)(p->rbuf + slots[i] * p->rsz),
						   .length = p->rsz, .lkey = p->rmr->lkey };
			wr[i] = (struct ibv_recv_wr){ .wr_id = slots[i], .sg_list = &sge[i], .num_sge = 1,
						      .next = i + 1 < k ? &wr[i + 1] : NULL };
		}
		int e = ibv_post_recv(p->qp, wr, &bad);
		if (e)
			return flit_err(e, "rdma multicast: post receive buffers on %s: %s",
					dev_name(p->rid), strerror(e));
		slots += k;
		n -= k;
	}
	return 0;
}

/* Wait for the join event of `id` for `group`: 0, or -errno with the
 * reason.  Lock held. */
static int join_wait(struct flit_ud_path *p, struct rdma_cm_id *id, struct in_addr group,
		     struct rdma_ud_param *out)
{
	char g[INET_ADDRSTRLEN];
	uint64_t until = mono_ns() + JOIN_WAIT_MS * 1000000ull;

	ip_str(group, g, sizeof(g));
	for (;;) {
		struct rdma_cm_event *ev;
		struct pollfd pfd = { .fd = p->ch->fd, .events = POLLIN };
		uint64_t now = mono_ns();
		if (now >= until)
			return flit_err(ETIMEDOUT, "rdma multicast: join %s on %s: no answer in %d ms",
					g, dev_name(p->rid), JOIN_WAIT_MS);
		int r = poll(&pfd, 1, (int)((until - now) / 1000000ull) + 1);
		if (r < 0 && errno != EINTR)
			return flit_err(errno, "rdma multicast: poll: %s", strerror(errno));
		if (r <= 0)
			continue;
		if (rdma_get_cm_event(p->ch, &ev)) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return flit_err(errno, "rdma multicast: rdma_get_cm_event: %s", strerror(errno));
		}
		enum rdma_cm_event_type t = ev->event;
		int status = ev->status;
		bool ours = ev->id == id;
		if (ours && t == RDMA_CM_EVENT_MULTICAST_JOIN && out)
			*out = ev->param.ud;
		rdma_ack_cm_event(ev);
		if (!ours)
			continue; /* the other id's: address change, device removal */
		if (t == RDMA_CM_EVENT_MULTICAST_JOIN)
			return 0;
		if (t == RDMA_CM_EVENT_MULTICAST_ERROR || t == RDMA_CM_EVENT_UNREACHABLE) {
			int e = status < 0 ? -status : (status ? status : EHOSTUNREACH);
			return flit_err(e, "rdma multicast: join %s on %s refused: %s (%s)", g,
					dev_name(p->rid), rdma_event_str(t), strerror(e));
		}
	}
}

int flit_ud_path_default_addr(struct in_addr *out, char *dev, size_t devlen)
{
	struct ibv_device **l;
	int n = 0;
	bool found = false;

	if (!(l = ibv_get_device_list(&n)))
		return -ENODEV;
	for (int i = 0; i < n && !found; i++) {
		struct ibv_context *c = ibv_open_device(l[i]);
		struct ibv_device_attr da;
		if (!c)
			continue;
		for (uint8_t port = 1; !found && !ibv_query_device(c, &da) && port <= da.phys_port_cnt; port++) {
			struct ibv_port_attr pa;
			if (ibv_query_port(c, port, &pa) || pa.state != IBV_PORT_ACTIVE)
				continue;
			for (int g = 0; g < pa.gid_tbl_len && g < 64 && !found; g++) {
				union ibv_gid gid;
				if (ibv_query_gid(c, port, g, &gid) || memcmp(gid.raw, v4mapped, 12))
					continue;
				memcpy(&out->s_addr, gid.raw + 12, 4);
				snprintf(dev, devlen, "%s", ibv_get_device_name(l[i]));
				found = true;
			}
		}
		ibv_close_device(c);
	}
	ibv_free_device_list(l);
	return found ? 0 : -ENODEV;
}

int flit_ud_path_open(struct in_addr local, unsigned depth, struct flit_ud_path **out)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr = local };
	struct ibv_port_attr pa;
	char where[INET_ADDRSTRLEN];
	int err;

	ip_str(local, where, sizeof(where));
	if (depth < 16 || depth > 16384)
		return flit_err(EINVAL, "rdma multicast: %u receive buffers (16 .. 16384)", depth);
	struct flit_ud_path *p = calloc(1, sizeof(*p));
	if (!p)
		return flit_err(ENOMEM, "rdma multicast: out of memory");
	pthread_mutex_init(&p->lock, NULL);
	p->depth = depth;
	p->ch = rdma_create_event_channel();
	if (!p->ch) {
		err = flit_err(errno, "rdma multicast: cannot create an event channel: %s (is rdma_ucm loaded?)",
			       strerror(errno));
		goto fail;
	}
	if (rdma_create_id(p->ch, &p->rid, p, RDMA_PS_UDP) || rdma_create_id(p->ch, &p->sid, p, RDMA_PS_UDP)) {
		err = flit_err(errno, "rdma multicast: rdma_create_id: %s", strerror(errno));
		goto fail;
	}
	if (rdma_bind_addr(p->rid, (struct sockaddr *)&a) || rdma_bind_addr(p->sid, (struct sockaddr *)&a)) {
		err = flit_err(errno, "rdma multicast: bind to %s: %s%s", where, strerror(errno),
			       errno == EADDRNOTAVAIL || errno == ENODEV ? " (no RDMA device has that address)" : "");
		goto fail;
	}
	if (!p->rid->verbs || p->rid->verbs != p->sid->verbs) {
		err = flit_err(ENODEV, "rdma multicast: no RDMA device has address %s", where);
		goto fail;
	}
	if ((err = ibv_query_port(p->rid->verbs, p->rid->port_num, &pa))) {
		err = flit_err(err, "rdma multicast: query port %u of %s: %s", p->rid->port_num,
			       dev_name(p->rid), strerror(err));
		goto fail;
	}
	p->mtu = 128u << pa.active_mtu; /* IBV_MTU_256 is 1 */
	p->rsz = GRH_LEN + p->mtu;
	p->pd = ibv_alloc_pd(p->rid->verbs);
	p->rcq = p->pd ? ibv_create_cq(p->rid->verbs, (int)depth, NULL, NULL, 0) : NULL;
	p->scq = p->rcq ? ibv_create_cq(p->rid->verbs, (int)SEND_SLOTS, NULL, NULL, 0) : NULL;
	if (!p->scq) {
		err = flit_err(errno, "rdma multicast: protection domain or completion queues on %s: %s",
			       dev_name(p->rid), strerror(errno));
		goto fail;
	}
	struct ibv_qp_init_attr qa = {
		.send_cq = p->scq, .recv_cq = p->rcq, .qp_type = IBV_QPT_UD, .sq_sig_all = 0,
		.cap = { .max_send_wr = SEND_SLOTS, .max_recv_wr = depth, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (rdma_create_qp(p->rid, p->pd, &qa)) {
		err = flit_err(errno, "rdma multicast: cannot create a UD queue pair on %s: %s%s",
			       dev_name(p->rid), strerror(errno),
			       errno == EOPNOTSUPP || errno == EINVAL ? " (the device has no unreliable datagrams: "
			       "siw does not; rxe and RDMA NICs do)" : "");
		goto fail;
	}
	p->qp = p->rid->qp;
	size_t rlen = (size_t)depth * p->rsz, slen = (size_t)SEND_SLOTS * p->mtu;
	p->rbuf = aligned_alloc(4096, (rlen + 4095) & ~(size_t)4095);
	p->sbuf = aligned_alloc(4096, (slen + 4095) & ~(size_t)4095);
	p->lent = calloc(depth, sizeof(*p->lent));
	if (!p->rbuf || !p->sbuf || !p->lent) {
		err = flit_err(ENOMEM, "rdma multicast: out of memory");
		goto fail;
	}
	p->rmr = ibv_reg_mr(p->pd, p->rbuf, rlen, IBV_ACCESS_LOCAL_WRITE);
	p->smr = p->rmr ? ibv_reg_mr(p->pd, p->sbuf, slen, 0) : NULL;
	if (!p->smr) {
		int e = errno;
		err = flit_err(e, "rdma multicast: cannot register %zu bytes of buffers on %s: %s%s",
			       rlen + slen, dev_name(p->rid), strerror(e),
			       e == ENOMEM || e == EPERM ? " (locked-memory limit: raise ulimit -l)" : "");
		goto fail;
	}
	for (unsigned i = 0; i < depth; i++)
		p->lent[i] = i;
	if ((err = post_recv(p, p->lent, depth)))
		goto fail;
	snprintf(p->desc, sizeof(p->desc), "rdma multicast (UD) on %s port %u (%s), path MTU %u, %u receive buffers",
		 dev_name(p->rid), p->rid->port_num, where, p->mtu, depth);
	*out = p;
	return 0;
fail:
	flit_ud_path_close(p);
	return err;
}

void flit_ud_path_close(struct flit_ud_path *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->ngroups; i++) {
		struct ud_group *g = &p->groups[i];
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr = g->group };
		if (g->rx_refs)
			rdma_leave_multicast(p->rid, (struct sockaddr *)&a);
		if (g->tx) {
			ibv_destroy_ah(g->ah);
			rdma_leave_multicast(p->sid, (struct sockaddr *)&a);
		}
	}
	if (p->qp)
		rdma_destroy_qp(p->rid);
	if (p->rmr)
		ibv_dereg_mr(p->rmr);
	if (p->smr)
		ibv_dereg_mr(p->smr);
	if (p->scq)
		ibv_destroy_cq(p->scq);
	if (p->rcq)
		ibv_destroy_cq(p->rcq);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->sid)
		rdma_destroy_id(p->sid);
	if (p->rid)
		rdma_destroy_id(p->rid);
	if (p->ch)
		rdma_destroy_event_channel(p->ch);
	free(p->rbuf);
	free(p->sbuf);
	free(p->lent);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

uint32_t flit_ud_path_max(const struct flit_ud_path *p)
{
	return p->mtu;
}

const char *flit_ud_path_describe(const struct flit_ud_path *p)
{
	return p->desc;
}

/* The group's entry (a new one with `add`); NULL when full or absent. */
static struct ud_group *group_of(struct flit_ud_path *p, struct in_addr group, bool add)
{
	for (unsigned i = 0; i < p->ngroups; i++)
		if (p->groups[i].group.s_addr == group.s_addr)
			return &p->groups[i];
	if (!add || p->ngroups >= MAX_GROUPS)
		return NULL;
	struct ud_group *g = &p->groups[p->ngroups++];
	memset(g, 0, sizeof(*g));
	g->group = group;
	return g;
}

static void group_gc(struct flit_ud_path *p, struct ud_group *g)
{
	if (g->rx_refs || g->tx)
		return;
	*g = p->groups[--p->ngroups];
}

/* Join `group` on `id` (send_only: as a send-only member, where the kernel
 * takes the flag; an older one makes it a full member) and wait for the
 * answer (its parameters in *out, if given): 0, or -errno with the reason
 * and nothing left joined.  Lock held. */
static int join(struct flit_ud_path *p, struct rdma_cm_id *id, struct in_addr group, bool send_only,
		struct rdma_ud_param *out)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr = group };
	struct rdma_cm_join_mc_attr_ex mc = {
		.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
		.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
		.addr = (struct sockaddr *)&a,
	};
	char gs[INET_ADDRSTRLEN];
	int err;

	if ((!send_only || rdma_join_multicast_ex(id, &mc, p)) &&
	    rdma_join_multicast(id, (struct sockaddr *)&a, p)) {
		ip_str(group, gs, sizeof(gs));
		return flit_err(errno, "rdma multicast: join %s on %s%s: %s", gs, dev_name(p->rid),
				send_only ? " to send" : "", strerror(errno));
	}
	if ((err = join_wait(p, id, group, out)))
		rdma_leave_multicast(id, (struct sockaddr *)&a);
	return err;
}

int flit_ud_path_join(struct flit_ud_path *p, struct in_addr group)
{
	int err = 0;

	pthread_mutex_lock(&p->lock);
	struct ud_group *g = group_of(p, group, true);
	if (!g) {
		err = flit_err(EMFILE, "rdma multicast: more than %u groups on one context", MAX_GROUPS);
	} else if (g->rx_refs++ == 0 && (err = join(p, p->rid, group, false, NULL))) {
		g->rx_refs = 0;
		group_gc(p, g);
	}
	pthread_mutex_unlock(&p->lock);
	return err;
}

void flit_ud_path_leave(struct flit_ud_path *p, struct in_addr group)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr = group };

	pthread_mutex_lock(&p->lock);
	struct ud_group *g = group_of(p, group, false);
	if (g && g->rx_refs && --g->rx_refs == 0) {
		rdma_leave_multicast(p->rid, (struct sockaddr *)&a);
		group_gc(p, g);
	}
	pthread_mutex_unlock(&p->lock);
}

/* Join `g` for sending, as a send-only member: no IGMP join, so where no
 * receiver of this host joined the group the kernel loops no copy of each
 * send back to it.  Lock held. */
static int tx_join(struct flit_ud_path *p, struct ud_group *g)
{
	struct rdma_ud_param ud;
	int err;

	if ((err = join(p, p->sid, g->group, true, &ud)))
		return err;
	g->ah = ibv_create_ah(p->pd, &ud.ah_attr);
	if (!g->ah) {
		char gs[INET_ADDRSTRLEN];
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr = g->group };
		ip_str(g->group, gs, sizeof(gs));
		err = flit_err(errno, "rdma multicast: address handle for %s on %s: %s", gs,
			       dev_name(p->rid), strerror(errno));
		rdma_leave_multicast(p->sid, (struct sockaddr *)&a);
		return err;
	}
	g->qpn = ud.qp_num;
	g->qkey = ud.qkey;
	g->tx = true;
	return 0;
}

/* Free the slots of completed sends.  Lock held. */
static void tx_reap(struct flit_ud_path *p)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(p->scq, 16, wc)) > 0)
		for (int i = 0; i < n; i++)
			if (wc[i].wr_id + 1 > p->s_tail)
				p->s_tail = wc[i].wr_id + 1; /* a send in error frees its slot too */
}

/* The group's entry, joined for sending.  Lock held. */
static int tx_group(struct flit_ud_path *p, struct in_addr group, struct ud_group **out)
{
	struct ud_group *g = group_of(p, group, true);
	int err;

	if (!g)
		return flit_err(EMFILE, "rdma multicast: more than %u groups on one context", MAX_GROUPS);
	if (!g->tx && (err = tx_join(p, g))) {
		group_gc(p, g);
		return err;
	}
	*out = g;
	return 0;
}

int flit_ud_path_sender(struct flit_ud_path *p, struct in_addr group)
{
	struct ud_group *g;

	pthread_mutex_lock(&p->lock);
	int err = tx_group(p, group, &g);
	pthread_mutex_unlock(&p->lock);
	return err;
}

int flit_ud_path_send(struct flit_ud_path *p, struct in_addr group, const void *buf, uint32_t len)
{
	struct ud_group *g;
	int err;

	if (len > p->mtu)
		return flit_err(EMSGSIZE, "rdma multicast: a %u-byte datagram is larger than the path MTU "
				"of %s (%u)", len, dev_name(p->rid), p->mtu);
	pthread_mutex_lock(&p->lock);
	if ((err = tx_group(p, group, &g)))
		goto out;
	if (p->s_head - p->s_tail >= SEND_SLOTS - 1)
		tx_reap(p);
	if (p->s_head - p->s_tail >= SEND_SLOTS - 1) {
		err = 0; /* every slot in flight */
		goto out;
	}
	uint64_t i = p->s_head;
	uint8_t *slot = p->sbuf + (size_t)(i & (SEND_SLOTS - 1)) * p->mtu;
	memcpy(slot, buf, len);
	struct ibv_sge sge = { .addr = (uintptr_t)slot, .length = len, .lkey = p->smr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = (i % SIG_EVERY == SIG_EVERY - 1) ? IBV_SEND_SIGNALED : 0,
		.wr.ud = { .ah = g->ah, .remote_qpn = g->qpn, .remote_qkey = g->qkey },
	}, *bad;
	if ((err = ibv_post_send(p->qp, &wr, &bad))) {
		err = flit_err(err, "rdma multicast: post send on %s: %s", dev_name(p->rid), strerror(err));
		goto out;
	}
	p->s_head++;
	err = 1;
	if ((p->s_head & (SIG_EVERY - 1)) == 0)
		tx_reap(p);
out:
	pthread_mutex_unlock(&p->lock);
	return err;
}

/* The sender's IPv4 address from a receive buffer's 40-byte GRH area: on
 * RoCE v2 over IPv4 its last 20 bytes are the IPv4 header; else it is a
 * GRH whose source GID may be IPv4-mapped.  0 when neither. */
static uint32_t sender_of(const uint8_t *grh)
{
	uint32_t a = 0;
	if ((grh[20] >> 4) == 4) {
		memcpy(&a, grh + 20 + 12, 4);
	} else if ((grh[0] >> 4) == 6) {
		if (!memcmp(grh + 8, v4mapped, 12))
			memcpy(&a, grh + 20, 4);
	}
	return a;
}

bool flit_ud_path_rx_pending(struct flit_ud_path *p)
{
	if (p->stash_at < p->nstash)
		return true;
	int got = ibv_poll_cq(p->rcq, RX_POLL_MAX, p->stash);
	p->stash_at = 0;
	p->nstash = got > 0 ? (unsigned)got : 0;
	return got != 0; /* < 0: the next recv says so */
}

int flit_ud_path_recv(void *arg, struct flit_dgram *d, unsigned n)
{
	struct flit_ud_path *p = arg;
	struct ibv_wc own[RX_POLL_MAX], *wc = own;
	int err, got;

	if (p->nlent) {
		err = post_recv(p, p->lent, p->nlent);
		p->nlent = 0;
		if (err)
			return err;
	}
	if (n > RX_POLL_MAX)
		n = RX_POLL_MAX;
	if (p->stash_at < p->nstash) {
		/* what flit_ud_path_rx_pending() polled first */
		wc = p->stash + p->stash_at;
		got = (int)(p->nstash - p->stash_at < n ? p->nstash - p->stash_at : n);
		p->stash_at += (unsigned)got;
	} else {
		got = ibv_poll_cq(p->rcq, (int)n, wc);
		if (got < 0)
			return flit_err(EIO, "rdma multicast: poll the receive queue of %s failed", dev_name(p->rid));
	}
	unsigned k = 0;
	for (int i = 0; i < got; i++) {
		uint8_t *b = p->rbuf + wc[i].wr_id * p->rsz;
		p->lent[p->nlent++] = wc[i].wr_id;
		if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len < GRH_LEN)
			continue; /* a receive in error: its buffer goes back */
		d[k] = (struct flit_dgram){ .buf = b + GRH_LEN, .len = wc[i].byte_len - GRH_LEN };
		d[k].addr.sin_family = AF_INET;
		d[k].addr.sin_addr.s_addr = (wc[i].wc_flags & IBV_WC_GRH) ? sender_of(b) : 0;
		k++;
	}
	return (int)k;
}
