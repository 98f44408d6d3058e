/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Layouts shared by the XDP steering program (bpf/flit_xdp.bpf.c) and user
 * space (flit-loader, the xdp transport).  Plain C types only: the program
 * includes it after vmlinux.h, user space after <linux/types.h>.
 *
 * Bump FLIT_XDP_VERSION whenever a map layout or meaning changes: user space
 * refuses pinned maps of another version (the program's .rodata
 * flit_xdp_version and the pinned "version" array hold it).
 *
 * Maps (the object's map names; pinned by user space under
 * /sys/fs/bpf/flit/<ifname>/<name>):
 *   flows     HASH   struct flit_xdp_flow_key -> struct flit_xdp_flow
 *   xsks      XSKMAP u32 slot -> AF_XDP socket (slot = flow.slot_base + rx queue)
 *   sessions  HASH   u32 session id -> struct flit_xdp_session
 *   topics    HASH   struct flit_xdp_topic_key -> u32 (1: wanted; of a REPORT
 *             session also: not known to user space, steer it)
 *   filtered  RINGBUF struct flit_xdp_filtered records: the frames dropped
 *             for sessions with FLIT_XDP_SESS_REPORT (one consumer: the
 *             context that owns the interface's sockets)
 *   counters  PERCPU_ARRAY u32 (enum flit_xdp_counter) -> u64
 *   version   ARRAY  u32 0 -> u32 FLIT_XDP_VERSION (written at load)
 *
 * The program's decisions (every packet gets exactly one verdict counter
 * and, for XDP_PASS, one reason counter):
 *   - not a flit flow: XDP_PASS, untouched, with the first reason that
 *     applies: short (any header cut short, IHL < 5, IPv4 version != 4),
 *     ipv6, not_ipv4 (other EtherTypes, a third VLAN tag), not_udp (decided
 *     before fragments), fragment (MF or an offset), no_flow ((daddr,
 *     dport) not in flows);
 *   - a flow's UDP payload under 4 bytes or without the flit magic:
 *     XDP_PASS (NOT_FLIT);
 *   - the magic, but a UDP length that contradicts the packet or the IPv4
 *     total length, a frame type 0 or > 7, or a DATA header or message
 *     lengths that fail the checks of docs/PROTOCOL.md: XDP_DROP
 *     (MALFORMED);
 *   - a DATA frame of a session listed in sessions with FLIT_XDP_SESS_FILTER
 *     in which no message's (session, topic) has a non-zero value in topics:
 *     XDP_DROP (FILTERED); a frame with any wanted message is steered whole,
 *     and one longer than 0x7ff8 bytes is steered unread (WALK_LIMIT);
 *     every message of a frame is read, however many a datagram holds
 *   - with FLIT_XDP_SESS_REPORT also: a message of a topic at or above the
 *     session's `named` (one user space has not learnt yet) makes the frame
 *     steered whole (below it, user space lists in topics what it wants
 *     and what it does not know); a dropped frame of messages is written to
 *     filtered (session, the session value's gen, first seq, count) first,
 *     and when the ring is full it is steered instead (REPORT_FULL), so no
 *     drop goes untold;
 *   - everything else on a flow (control frames 2..7, DATA of sessions not
 *     listed): redirected to xsks[slot_base + rx_queue_index]; no socket
 *     there: XDP_PASS (NO_SOCKET), so a kernel socket on the group still
 *     gets it.
 *
 * A filtered frame leaves a gap in its session's sequence numbers.  A
 * session filtered without FLIT_XDP_SESS_REPORT is one user space does not
 * receive at all, so no reliability layer sees those gaps; a session user
 * space receives (some of its topics wanted) is filtered with REPORT, and
 * the records of filtered tell its reliability layer which numbers were
 * dropped here rather than lost (userspace/rel.h flit_rel_rx_skip()).
 */
#ifndef FLIT_XDP_H
#define FLIT_XDP_H

#define FLIT_XDP_VERSION 5

#define FLIT_XDP_FLOWS_MAX    1024
#define FLIT_XDP_XSKS_MAX     64    /* slots in xsks */
#define FLIT_XDP_SESSIONS_MAX 16384
#define FLIT_XDP_TOPICS_MAX   65536
#define FLIT_XDP_FILTERED_BYTES (1024 * 1024) /* the filtered ring's size: 32,768
					       * records (24 bytes + an 8-byte header) */

/* Key of flows: destination of the UDP datagram, both in network order. */
struct flit_xdp_flow_key {
	__u32 daddr;
	__u16 dport;
	__u16 pad;   /* 0 */
};

struct flit_xdp_flow {
	__u32 slot_base;   /* xsks slot of rx queue 0 */
	__u32 flags;       /* 0 (reserved) */
};

/* value of sessions */
struct flit_xdp_session {
	__u32 flags;       /* FLIT_XDP_SESS_* */
	__u32 named;       /* with FLIT_XDP_SESS_REPORT: topic indexes below it
			    * are known to user space (the others steered) */
	__u32 gen;         /* with REPORT: copied into each record, so that user
			    * space tells a record of this parting from one
			    * left by an earlier one */
	__u32 pad;         /* 0 */
};

#define FLIT_XDP_SESS_FILTER 0x1u  /* drop DATA frames with no wanted topic */
#define FLIT_XDP_SESS_REPORT 0x2u  /* ... told in filtered; unnamed topics steered */
#define FLIT_XDP_SESS_KNOWN  0x3u

/* record of filtered: a DATA frame dropped for a REPORT session, its
 * messages [seq, seq + count) */
struct flit_xdp_filtered {
	__u32 session;
	__u32 gen;         /* the session value's gen when it was dropped */
	__u64 seq;
	__u32 count;
	__u32 pad;         /* 0 */
};

struct flit_xdp_topic_key {
	__u32 session;     /* host order, as in the frame (little-endian wire) */
	__u32 topic;       /* topic index within the session */
};

/* per-CPU counters, index = enum flit_xdp_counter */
enum flit_xdp_counter {
	/* verdicts: each packet counts in exactly one of these */
	FLIT_XDP_PASSED = 0,     /* XDP_PASS: handed to the kernel stack */
	FLIT_XDP_REDIRECTED,     /* steered to an AF_XDP socket */
	FLIT_XDP_FILTERED,       /* XDP_DROP: topic nobody here wants */
	FLIT_XDP_MALFORMED,      /* XDP_DROP: flit frame that fails checks */
	/* reasons of XDP_PASS: each passed packet counts in one of these */
	FLIT_XDP_PASS_SHORT,     /* truncated Ethernet/VLAN/IPv4/UDP header */
	FLIT_XDP_PASS_NOT_IPV4,  /* other EtherType (ARP, ...) except IPv6 */
	FLIT_XDP_PASS_IPV6,      /* IPv6 (flit flows are IPv4) */
	FLIT_XDP_PASS_NOT_UDP,   /* IPv4, another protocol */
	FLIT_XDP_PASS_FRAGMENT,  /* IPv4 fragment: the kernel reassembles */
	FLIT_XDP_PASS_NO_FLOW,   /* UDP to a (daddr, dport) not in flows */
	FLIT_XDP_PASS_NOT_FLIT,  /* a flow's payload is not a flit frame */
	FLIT_XDP_NO_SOCKET,      /* a flow's frame, no socket in its slot */
	/* extra information (not verdicts) */
	FLIT_XDP_VLAN,           /* frames that carried 802.1Q/802.1ad tags */
	FLIT_XDP_WALK_LIMIT,     /* frames steered unread: over 0x7ff8 bytes */
	FLIT_XDP_REPORT_FULL,    /* frames steered, not dropped: filtered was full */
	FLIT_XDP_COUNTERS,
};

/*
 * RX metadata of the timestamping variant of the program (flit_xdp_ts, in
 * bpf/flit_xdp.bpf.c): 16 bytes in the frame's metadata area, so in an
 * AF_XDP frame right before the packet's first byte (desc.addr - 16).
 * User space trusts it only with the magic, and clears the magic when it
 * has read it (a UMEM frame is reused, and a frame steered without
 * metadata would otherwise show the last one's).
 *   rx_ts      bpf_xdp_metadata_rx_timestamp(): the NIC clock's (PHC) time
 *              of reception in ns; 0: none (error, or a driver that
 *              answers 0, as veth does)
 *   rx_ts_err  the kfunc's return: 0, -EOPNOTSUPP (driver without the op),
 *              -ENODATA (no stamp for this frame: stamping off, ...)
 */
struct flit_xdp_rx_meta {
	__u64 rx_ts;
	__s32 rx_ts_err;
	__u32 magic;       /* FLIT_XDP_META_MAGIC */
};

#define FLIT_XDP_META_MAGIC 0x53544c46u  /* "FLTS" little-endian */

/* Kernel names (bpf_prog_info.name) of the two programs. */
#define FLIT_XDP_PROG_NAME    "flit_xdp_steer"
#define FLIT_XDP_PROG_NAME_TS "flit_xdp_ts"

#define FLIT_XDP_COUNTER_NAMES {                                          \
	"passed", "redirected", "filtered", "malformed",                  \
	"pass_short", "pass_not_ipv4", "pass_ipv6", "pass_not_udp",       \
	"pass_fragment", "pass_no_flow", "pass_not_flit", "pass_no_socket", \
	"vlan", "walk_limit", "report_full" }

#endif
