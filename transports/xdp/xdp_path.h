/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The xdp transport's hold on one interface: the steering program (attached
 * by flit-loader, or by the context itself), its maps, and the AF_XDP
 * sockets.  The session layer of the udp and xdp transports
 * (transports/dgram/) runs unchanged on top: it registers the flows it
 * listens on, tells which sessions nobody here wants (dropped in XDP), and
 * receives and sends datagrams through flit_xdp_path_xsk().
 *
 * One xdp context per interface and host at a time (an rx queue takes one
 * AF_XDP socket): a second gets -EBUSY.  At open the context takes over the
 * interface's flows and filter (stale entries of a crashed application are
 * removed); at close it removes its own, and detaches the program if it
 * attached it.
 */
#ifndef FLIT_XDP_PATH_H
#define FLIT_XDP_PATH_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "xdp/xsk_io.h"

struct flit_xdp_path;

int flit_xdp_path_open(const struct flit_cfg_context *cc, struct flit_xdp_path **out);
void flit_xdp_path_close(struct flit_xdp_path *p);

struct flit_xsk *flit_xdp_path_xsk(const struct flit_xdp_path *p);
/* "xdp on eth0: skb mode, single program (...), attached by flit-loader;
 * <xsk description>" */
const char *flit_xdp_path_describe(const struct flit_xdp_path *p);

/* Steer UDP datagrams to group/addr:port (network order) to our sockets;
 * reference counted.  0 or -errno. */
int flit_xdp_path_flow_get(struct flit_xdp_path *p, struct in_addr daddr, uint16_t dport);
void flit_xdp_path_flow_put(struct flit_xdp_path *p, struct in_addr daddr, uint16_t dport);

/* A session nobody here wants: its DATA frames are dropped in XDP (when
 * context.xdp.filter is on).  unfilter_all forgets them all (subscriptions
 * changed: they are learnt again from their next frames). */
void flit_xdp_path_filter(struct flit_xdp_path *p, uint32_t session);
/* A filtered session names a topic someone here wants (a shared session
 * that began with topics nobody wants): its frames come again. */
void flit_xdp_path_unfilter(struct flit_xdp_path *p, uint32_t session);
void flit_xdp_path_unfilter_all(struct flit_xdp_path *p);

/* A session received here that carries topics nobody here wants: its DATA
 * frames of no wanted topic are dropped in XDP ("parted"), and each drop is
 * told through flit_xdp_path_reports() with gen (its sequence numbers were
 * not lost).  named: topic indexes at or above it are steered up (not known
 * here: they may be wanted); below it, those given as steer are (wanted
 * ones, and indexes not named here), the others dropped.  Called again:
 * named and gen updated.  Topics are given one by one (steer, or not: the
 * entry removed), before a named that covers them.  flit_xdp_path_unpart()
 * ends it and removes whatever was written for the session.  -EOPNOTSUPP
 * with context.xdp.filter off; -E2BIG, -ENOSPC: the program's tables are
 * full (unpart it: user space filters it). */
int flit_xdp_path_part(struct flit_xdp_path *p, uint32_t session, uint32_t named,
		       uint32_t gen);
int flit_xdp_path_part_topic(struct flit_xdp_path *p, uint32_t session, uint32_t topic,
			     bool steer);
void flit_xdp_path_unpart(struct flit_xdp_path *p, uint32_t session);
/* Hand each record of the frames dropped for parted sessions since the last
 * call to fn: the number of records, or -errno.  Call it after taking a
 * batch from the sockets and before handling it (a frame steered after a
 * drop finds the drop told), and before unparting a session (its last
 * drops are told).  The records of an earlier parting of the same session
 * carry another gen. */
typedef void (*flit_xdp_report_fn)(void *arg, uint32_t session, uint32_t gen, uint64_t seq,
				   uint32_t count);
int flit_xdp_path_reports(struct flit_xdp_path *p, flit_xdp_report_fn fn, void *arg);

/* context.xdp.rx_timestamps = hardware and no stamps: why, the first that
 * applies: "flit's program on eth0 was attached without them ...", what
 * frames showed ("veth0 gives none ...", flit_xsk_rx_ts_why()), what the NIC
 * said when asked to stamp ("veth0: no hardware timestamping ...",
 * flit_hwts_enable()); "" while none is known missing. */
const char *flit_xdp_path_ts_why(const struct flit_xdp_path *p);

/* The program's counters summed over CPUs (out[FLIT_XDP_COUNTERS]). */
int flit_xdp_path_counters(const struct flit_xdp_path *p, uint64_t *out);

#endif /* FLIT_XDP_PATH_H */
