/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Next hop and its MAC address for an IPv4 destination, from the kernel's
 * route and neighbour tables over rtnetlink: what the AF_XDP send path needs
 * to address a unicast frame the way the kernel would.
 *
 * Resolution of an unknown neighbour is left to the kernel: we send an empty
 * UDP datagram to the destination's port 9 (discard) through a kernel socket
 * bound to the interface, which makes the kernel ARP for the next hop (and
 * deliver that datagram once it knows it; the discard service, or an ICMP
 * port unreachable, is the peer's answer, both harmless).  That needs no
 * privilege beyond the socket and works for gateways too.  (Creating an
 * INCOMPLETE entry with RTM_NEWNEIGH needs CAP_NET_ADMIN and does not make
 * the kernel probe.)
 *
 * Not thread-safe: one caller at a time per object (xsk_io serializes).
 * Each call is one or two netlink round trips (~10-30 us): slow path only.
 */
#ifndef FLIT_XDP_NEIGH_H
#define FLIT_XDP_NEIGH_H

#include <stdint.h>

struct flit_neigh {
	int nl;                 /* NETLINK_ROUTE socket */
	int udp;                /* resolution trigger, bound to the interface */
	unsigned ifindex;
	uint32_t seq;
	char ifname[16];
};

/* Route lookup result (addresses network order). */
struct flit_route {
	unsigned oif;           /* output interface */
	uint32_t gateway;       /* 0: directly connected */
	uint32_t prefsrc;       /* 0: none given */
	uint8_t type;           /* RTN_UNICAST, RTN_LOCAL, RTN_BROADCAST, ... */
};

/* Open for interface ifname/ifindex.  0 or -errno with a trail (then the
 * object is closed). */
int flit_neigh_open(struct flit_neigh *n, const char *ifname, unsigned ifindex);
/* Safe after a failed open and more than once. */
void flit_neigh_close(struct flit_neigh *n);

/* RTM_GETROUTE for daddr (network order).  0, -ENETUNREACH (no route), or
 * -errno. */
int flit_neigh_route(struct flit_neigh *n, uint32_t daddr, struct flit_route *r);

/* RTM_GETNEIGH for addr on the interface: 0 and mac when the entry is usable
 * (REACHABLE, STALE, DELAY, PROBE, PERMANENT, NOARP with an address),
 * -ENOENT when there is none or it is not usable (INCOMPLETE, FAILED, NONE),
 * or -errno.  *state (may be NULL) gets the NUD_* state, 0 when none. */
int flit_neigh_get(struct flit_neigh *n, uint32_t addr, uint8_t mac[6],
		   uint16_t *state);

/* Ask the kernel to resolve the next hop of daddr (see above).  0 or -errno. */
int flit_neigh_kick(struct flit_neigh *n, uint32_t daddr);

/* The whole lookup: the route of daddr must leave through the interface;
 * broadcast routes give ff:ff:ff:ff:ff:ff; otherwise the next hop is the
 * gateway, or daddr when directly connected, and its MAC comes from the
 * neighbour table.  Returns 0 with mac (and *nexthop, may be NULL),
 * -EHOSTUNREACH when the MAC is unknown (resolution started),
 * -ENETUNREACH when daddr is not reached through this interface (no route,
 * a local address, another interface, a gateway that is not IPv4), or
 * -errno for a netlink failure. */
int flit_neigh_resolve(struct flit_neigh *n, uint32_t daddr, uint8_t mac[6],
		       uint32_t *nexthop);

#endif /* FLIT_XDP_NEIGH_H */
