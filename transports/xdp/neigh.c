// SPDX-License-Identifier: BSD-2-Clause
/*
 * Route and neighbour lookups over rtnetlink (see neigh.h).  Each lookup is
 * one request answered by one message: RTM_GETROUTE with RTA_DST (the
 * kernel's output route lookup, as `ip route get` does) and RTM_GETNEIGH
 * without NLM_F_DUMP (the single-entry get of Linux >= 5.0, which needs the
 * interface and NDA_DST).  Replies of an earlier request that timed out are
 * recognised by their sequence number and skipped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "error.h"
#include "xdp/neigh.h"

/* Bound on one netlink round trip: the kernel answers in microseconds, so
 * this only matters when something is badly wrong. */
#define NL_TIMEOUT_MS 250
/* The discard service: where resolution datagrams go. */
#define DISCARD_PORT 9

#define NUD_USABLE (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | \
		    NUD_PERMANENT | NUD_NOARP)

static const char *ip_str(uint32_t a, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)&a;
	snprintf(buf, len, "%u.%u.%u.%u", p[0], p[1], p[2], p[3]);
	return buf;
}

int flit_neigh_open(struct flit_neigh *n, const char *ifname, unsigned ifindex)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = NL_TIMEOUT_MS * 1000 };
	int r;

	memset(n, 0, sizeof(*n));
	n->nl = n->udp = -1;
	n->ifindex = ifindex;
	snprintf(n->ifname, sizeof(n->ifname), "%s", ifname);

	n->nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (n->nl < 0) {
		r = flit_err(errno, "neigh: rtnetlink socket");
		goto fail;
	}
	if (setsockopt(n->nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		r = flit_err(errno, "neigh: SO_RCVTIMEO on the rtnetlink socket");
		goto fail;
	}
	n->udp = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (n->udp < 0) {
		r = flit_err(errno, "neigh: UDP socket for neighbour resolution");
		goto fail;
	}
	/* Keeps the resolution datagram on this interface.  Only a nicety: the
	 * route was checked to leave through it before any datagram is sent,
	 * so a refusal (EPERM in a restricted namespace) is not fatal. */
	if (setsockopt(n->udp, SOL_SOCKET, SO_BINDTODEVICE, n->ifname,
		       (socklen_t)strlen(n->ifname) + 1))
		flit_debug("neigh: SO_BINDTODEVICE %s: %s (resolution datagrams "
			   "follow the routing table)", n->ifname, strerror(errno));
	return 0;
fail:
	flit_neigh_close(n);
	return r;
}

void flit_neigh_close(struct flit_neigh *n)
{
	if (!n)
		return;
	if (n->nl >= 0)
		close(n->nl);
	if (n->udp >= 0)
		close(n->udp);
	n->nl = n->udp = -1;
}

static void add_attr(struct nlmsghdr *nh, size_t cap, unsigned short type,
		     const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len));
	size_t need = NLMSG_ALIGN(nh->nlmsg_len) + RTA_SPACE(len);

	if (need > cap)
		return;         /* requests are built with room to spare */
	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	nh->nlmsg_len = (uint32_t)need;
}

/* Send req and wait for the answer with its sequence number: a message of
 * type want (returned in *out, inside buf), or an error.  -errno. */
static int nl_talk(struct flit_neigh *n, struct nlmsghdr *req, uint16_t want,
		   char *buf, size_t buflen, struct nlmsghdr **out)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };

	req->nlmsg_seq = ++n->seq;
	if (sendto(n->nl, req, req->nlmsg_len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) < 0)
		return -errno;
	for (;;) {
		ssize_t len = recv(n->nl, buf, buflen, 0);
		if (len < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		}
		for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)len);
		     nh = NLMSG_NEXT(nh, len)) {
			if (nh->nlmsg_seq != req->nlmsg_seq)
				continue;       /* an answer to an earlier, timed-out request */
			if (nh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(nh);
				if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
					return -EPROTO;
				return e->error ? e->error : -ENOENT;
			}
			if (nh->nlmsg_type == want) {
				*out = nh;
				return 0;
			}
		}
	}
}

int flit_neigh_route(struct flit_neigh *n, uint32_t daddr, struct flit_route *r)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		char attrs[64];
	} req;
	alignas(struct nlmsghdr) char buf[4096];
	struct nlmsghdr *nh;
	int err;

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	req.nh.nlmsg_type = RTM_GETROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.rt.rtm_family = AF_INET;
	req.rt.rtm_dst_len = 32;
	add_attr(&req.nh, sizeof(req), RTA_DST, &daddr, 4);

	err = nl_talk(n, &req.nh, RTM_NEWROUTE, buf, sizeof(buf), &nh);
	if (err)
		return err == -ENETUNREACH || err == -EHOSTUNREACH || err == -ENOENT ?
		       -ENETUNREACH : err;
	if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg)))
		return -EPROTO;

	const struct rtmsg *rm = NLMSG_DATA(nh);
	int alen = (int)RTM_PAYLOAD(nh);
	memset(r, 0, sizeof(*r));
	r->type = rm->rtm_type;
	for (const struct rtattr *a = RTM_RTA(rm); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
		size_t plen = RTA_PAYLOAD(a);
		switch (a->rta_type) {
		case RTA_OIF:
			if (plen >= 4)
				memcpy(&r->oif, RTA_DATA(a), 4);
			break;
		case RTA_GATEWAY:
			if (plen >= 4)
				memcpy(&r->gateway, RTA_DATA(a), 4);
			break;
		case RTA_PREFSRC:
			if (plen >= 4)
				memcpy(&r->prefsrc, RTA_DATA(a), 4);
			break;
		case RTA_VIA:   /* an IPv6 next hop for an IPv4 route */
			r->gateway = UINT32_MAX;
			break;
		default:
			break;
		}
	}
	return 0;
}

int flit_neigh_get(struct flit_neigh *n, uint32_t addr, uint8_t mac[6],
		   uint16_t *state)
{
	struct {
		struct nlmsghdr nh;
		struct ndmsg nd;
		char attrs[32];
	} req;
	alignas(struct nlmsghdr) char buf[4096];
	struct nlmsghdr *nh;
	int err;

	if (state)
		*state = 0;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
	req.nh.nlmsg_type = RTM_GETNEIGH;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nd.ndm_family = AF_INET;
	req.nd.ndm_ifindex = (int)n->ifindex;
	add_attr(&req.nh, sizeof(req), NDA_DST, &addr, 4);

	err = nl_talk(n, &req.nh, RTM_NEWNEIGH, buf, sizeof(buf), &nh);
	if (err)
		return err;
	if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct ndmsg)))
		return -EPROTO;

	const struct ndmsg *nd = NLMSG_DATA(nh);
	int alen = (int)(nh->nlmsg_len - NLMSG_LENGTH(sizeof(*nd)));
	bool have = false;
	if (state)
		*state = nd->ndm_state;
	for (const struct rtattr *a = (const struct rtattr *)((const char *)nd + NLMSG_ALIGN(sizeof(*nd)));
	     RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
		if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
			memcpy(mac, RTA_DATA(a), 6);
			have = true;
		}
	}
	if (!have || !(nd->ndm_state & NUD_USABLE))
		return -ENOENT;
	return 0;
}

int flit_neigh_kick(struct flit_neigh *n, uint32_t daddr)
{
	struct sockaddr_in to = {
		.sin_family = AF_INET,
		.sin_port = htons(DISCARD_PORT),
		.sin_addr.s_addr = daddr,
	};
	if (sendto(n->udp, "", 0, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to)) < 0 &&
	    errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;   /* EAGAIN: packets already queued for resolution */
	return 0;
}

int flit_neigh_resolve(struct flit_neigh *n, uint32_t daddr, uint8_t mac[6],
		       uint32_t *nexthop)
{
	struct flit_route r;
	char a[16];
	int err;

	if (daddr == INADDR_BROADCAST) {
		memset(mac, 0xff, 6);
		if (nexthop)
			*nexthop = daddr;
		return 0;
	}
	err = flit_neigh_route(n, daddr, &r);
	if (err)
		return err;
	if (r.type == RTN_BROADCAST && r.oif == n->ifindex) {
		memset(mac, 0xff, 6);
		if (nexthop)
			*nexthop = daddr;
		return 0;
	}
	if (r.type != RTN_UNICAST || r.oif != n->ifindex || r.gateway == UINT32_MAX) {
		flit_debug("neigh: %s is not reached through %s (route type %u, oif %u)",
			   ip_str(daddr, a, sizeof(a)), n->ifname, r.type, r.oif);
		return -ENETUNREACH;
	}
	uint32_t hop = r.gateway ? r.gateway : daddr;
	if (nexthop)
		*nexthop = hop;
	err = flit_neigh_get(n, hop, mac, NULL);
	if (err == 0)
		return 0;
	if (err != -ENOENT)
		return err;
	err = flit_neigh_kick(n, daddr);
	if (err)
		flit_debug("neigh: resolution datagram to %s: %s",
			   ip_str(daddr, a, sizeof(a)), strerror(-err));
	return -EHOSTUNREACH;
}
