/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * RDMA multicast: an unreliable-datagram (UD) queue pair attached to the
 * multicast groups of the sessions it receives, and sending to the groups of
 * its sources, one send reaching every member.  It is a datagram path under
 * the session layer of transports/dgram/ (dgram.h): the sessions, NAK
 * reliability, heartbeats, late join and topic filtering are that layer's,
 * as over kernel sockets or AF_XDP.  The groups are IPv4 multicast groups;
 * rdma_cm maps one to the multicast GID ::ffff:group (RoCE v2: IP multicast
 * on the wire to UDP port 4791, joined with IGMP by the kernel; InfiniBand:
 * the subnet manager's group).  A datagram is at most the port's path MTU
 * (flit_ud_path_max(): 1024 on Soft-RoCE over an Ethernet MTU of 1500).
 *
 * Threads: receive and join on one thread (the context's polling thread);
 * send from any thread (a lock of the path's own); joins for sending take
 * the same lock as joins for receiving (one rdma_cm event channel).
 */
#ifndef FLIT_RDMA_UD_PATH_H
#define FLIT_RDMA_UD_PATH_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dgram/dgram.h"

struct flit_ud_path;

#ifdef FLIT_HAVE_RDMA

/* A UD queue pair on the RDMA device of the local IPv4 address `local`
 * (rdma_cm finds it), with `depth` receive buffers (16 .. 16384).  0 or
 * -errno with a trail (no RDMA device there, a device without UD, the
 * locked-memory limit). */
int flit_ud_path_open(struct in_addr local, unsigned depth, struct flit_ud_path **out);
void flit_ud_path_close(struct flit_ud_path *p);

/* The IPv4 address of the first active RDMA port that has one (a RoCE
 * port's IPv4-mapped GID), and its device's name: 0, or -ENODEV. */
int flit_ud_path_default_addr(struct in_addr *out, char *dev, size_t devlen);

/* The largest datagram: the port's path MTU in bytes. */
uint32_t flit_ud_path_max(const struct flit_ud_path *p);
/* "rdma multicast (UD) on rxe0 port 1 (192.168.50.1), path MTU 1024, 256
 * receive buffers" */
const char *flit_ud_path_describe(const struct flit_ud_path *p);

/* Receive the group's datagrams (reference counted; the first join attaches
 * the queue pair).  0 or -errno. */
int flit_ud_path_join(struct flit_ud_path *p, struct in_addr group);
void flit_ud_path_leave(struct flit_ud_path *p, struct in_addr group);

/* Join the group for sending now (a source's first send would): 0 or
 * -errno with the reason. */
int flit_ud_path_sender(struct flit_ud_path *p, struct in_addr group);

/* Send one datagram of at most flit_ud_path_max() bytes to the group (the
 * first send to a group joins it for sending: rdma_cm's address handle).
 * 1 sent, 0 every send slot in flight (back-pressure: nothing sent),
 * -errno (-EMSGSIZE too large, a join refused). */
int flit_ud_path_send(struct flit_ud_path *p, struct in_addr group, const void *buf, uint32_t len);

/* flit_dgram_recv_fn: up to n datagrams, views valid until the next call;
 * addr is the sender's IPv4 address (port 0: a UD datagram carries none). */
int flit_ud_path_recv(void *p, struct flit_dgram *d, unsigned n);

/* Has a datagram come (without a system call: the completion queue is in
 * user memory)?  What it polled, the next recv returns first. */
bool flit_ud_path_rx_pending(struct flit_ud_path *p);

#else /* built without libibverbs/librdmacm: the path never opens */

#include <errno.h>
static inline int flit_ud_path_open(struct in_addr l, unsigned d, struct flit_ud_path **o)
{ (void)l; (void)d; (void)o; return -EPROTONOSUPPORT; }
static inline void flit_ud_path_close(struct flit_ud_path *p) { (void)p; }
static inline int flit_ud_path_default_addr(struct in_addr *o, char *d, size_t l)
{ (void)o; (void)d; (void)l; return -ENODEV; }
static inline uint32_t flit_ud_path_max(const struct flit_ud_path *p) { (void)p; return 0; }
static inline const char *flit_ud_path_describe(const struct flit_ud_path *p) { (void)p; return ""; }
static inline int flit_ud_path_join(struct flit_ud_path *p, struct in_addr g)
{ (void)p; (void)g; return -EPROTONOSUPPORT; }
static inline void flit_ud_path_leave(struct flit_ud_path *p, struct in_addr g) { (void)p; (void)g; }
static inline int flit_ud_path_sender(struct flit_ud_path *p, struct in_addr g)
{ (void)p; (void)g; return -EPROTONOSUPPORT; }
static inline int flit_ud_path_send(struct flit_ud_path *p, struct in_addr g, const void *b, uint32_t l)
{ (void)p; (void)g; (void)b; (void)l; return -EPROTONOSUPPORT; }
static inline int flit_ud_path_recv(void *p, struct flit_dgram *d, unsigned n)
{ (void)p; (void)d; (void)n; return -EPROTONOSUPPORT; }
static inline bool flit_ud_path_rx_pending(struct flit_ud_path *p) { (void)p; return false; }

#endif /* FLIT_HAVE_RDMA */

#endif /* FLIT_RDMA_UD_PATH_H */
