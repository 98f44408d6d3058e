// SPDX-License-Identifier: BSD-2-Clause
/*
 * Kernel sockets of the udp and xdp transports: creation and options,
 * multicast group membership, the io wrapping, and the group:port sockets
 * the receive side listens on (shared by the sessions on them).
 * (session.h: the state and the shared functions.)
 */
#include "dgram/session.h"

/* ---- sockets ------------------------------------------------------------------ */

static int sock_err(const char *what, const char *where)
{
	int e = errno;
	return flit_err(e, "udp: %s %s: %s", what, where, strerror(e));
}

/* A UDP socket with the context's options, bound to addr:port. */
int dg_udp_socket(struct flit_tp *tp, struct in_addr addr, uint16_t port,
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

int dg_join_group(struct flit_tp *tp, int fd, struct in_addr group)
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

int dg_io_wrap(struct flit_tp *tp, int fd, bool rx, struct flit_udp_io **out)
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
struct rsock *dg_rsock_get(struct flit_tp *tp, struct in_addr group, uint16_t port)
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
	fd = dg_udp_socket(tp, (struct in_addr){ INADDR_ANY }, port, true, true);
	if (fd < 0 || (err = dg_join_group(tp, fd, group))) {
		if (fd >= 0)
			close(fd);
		free(r);
		return NULL;
	}
	if ((err = dg_io_wrap(tp, fd, true, &r->io))) {
		free(r);
		return flit_null(-err);
	}
	if ((tp->xp && (err = flit_xdp_path_flow_get(tp->xp, group, htons(port)))) ||
	    (tp->ud && (err = flit_ud_path_join(tp->ud, group)))) {
		flit_udp_io_close(r->io);
		free(r);
		return flit_null(-err);
	}
	r->next = tp->socks;
	tp->socks = r;
	return r;
}

/* Drop a reference.  The socket is closed by dg_rsock_reap(), after the poll
 * loops: a session may end (and release its socket) while that socket's
 * datagrams are being handled. */
void dg_rsock_put(struct flit_tp *tp, struct rsock *r)
{
	(void)tp;
	if (r && r->refs)
		r->refs--;
}

void dg_rsock_reap(struct flit_tp *tp)
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
		if (tp->ud)
			flit_ud_path_leave(tp->ud, r->group);
		flit_udp_io_close(r->io);
		free(r);
	}
}

/* Send one control frame from the receiver's unicast socket. */
void dg_rx_send(struct flit_tp *tp, const void *buf, size_t len,
		    const struct sockaddr_in *to)
{
	struct flit_dgram d = { .buf = (void *)buf, .len = (uint32_t)len, .addr = *to };
	if (tp->ucast && len)
		flit_udp_io_send(tp->ucast, &d, 1);
}
