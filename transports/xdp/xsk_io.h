/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * AF_XDP data path of the xdp transport: one AF_XDP socket per rx queue of an
 * interface (libxdp's xsk API), each with its own UMEM; receive parses
 * Ethernet[/802.1Q]/IPv4/UDP and hands out UDP payloads, send builds the
 * same frames the kernel would send for a UDP socket bound to the
 * interface's address (IPv4 header and UDP checksums computed, multicast
 * MAC mapping, unicast next hop's MAC from the kernel's route and neighbour
 * tables over rtnetlink).  The datagram views are struct flit_dgram, so
 * the udp transport's session code handles them unchanged.
 *
 * This object never loads an XDP program (XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD):
 * the caller puts flit_xsk_fd(x, q) into the steering program's xsks map.
 *
 * UMEM per queue: frames of cfg.frame_size bytes, half for receive (the fill
 * ring is kept full) and half for send (a free list refilled from the
 * completion ring).  Huge pages when cfg.hugepages (falls back to normal
 * pages with a warning when none are reserved).  Zero-copy is asked for
 * when cfg.zerocopy allows and the driver can; otherwise copy mode, and
 * flit_xsk_describe() says which, never hiding it.
 *
 * Stamps (both off by default; off, the per-frame paths are the same code
 * as without them: recv and send pick a variant once per call):
 *   cfg.rx_meta: the steering program is flit_xdp_ts, which writes struct
 *   flit_xdp_rx_meta (bpf/flit_xdp.h) in front of every frame it steers;
 *   recv hands its non-zero NIC stamp out as rx_ts_hw_ns (the NIC clock's
 *   time, PHC ns, not converted) and counts frames without one.  The first
 *   frame that comes without a stamp logs once why (flit_xsk_rx_ts_why()).
 *   cfg.tx_timestamps: queue 0's UMEM is registered with AF_XDP TX metadata
 *   (Linux >= 6.8; through the raw socket API: libxdp 1.3.1 has no field
 *   for it) and every frame sent asks for its completion stamp; the stamps
 *   come back through flit_xsk_tx_stamps(): the kernel's CLOCK_TAI when the
 *   frame completed in copy mode (a software stamp, taken when the skb is
 *   freed), the NIC clock (PHC) in zero-copy mode, as the driver fills it.
 *
 * Threads: recv from one thread at a time; send may be called from any
 * thread (an internal spinlock serializes the tx ring and free list; recv
 * never takes it).
 */
#ifndef FLIT_XSK_IO_H
#define FLIT_XSK_IO_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include <flit/tstamp.h>   /* FLIT_TXTS_* */

#include "dgram/dgram.h"   /* struct flit_dgram */

enum flit_xsk_zc {
	FLIT_XSK_ZC_AUTO = 0,   /* zero-copy if the driver has it, else copy */
	FLIT_XSK_ZC_OFF,        /* copy mode */
	FLIT_XSK_ZC_ON,         /* zero-copy or fail (-EOPNOTSUPP) */
};

struct flit_xsk_cfg {
	char ifname[16];
	unsigned queues;        /* rx queues 0..queues-1 (0: all of the device's) */
	unsigned frames;        /* UMEM frames per queue, power of 2 (default 4096) */
	unsigned frame_size;    /* 2048 or 4096 (default 2048) */
	unsigned ring_size;     /* rx/tx/fill/completion ring entries (default 1024) */
	bool hugepages;
	enum flit_xsk_zc zerocopy;
	bool xdp_skb_mode;      /* the program runs in skb (generic) mode: bind
				 * with XDP_COPY (libxdp needs the same mode) */
	bool need_wakeup;       /* XDP_USE_NEED_WAKEUP (default on) */
	unsigned busy_poll_us;  /* SO_PREFER_BUSY_POLL + SO_BUSY_POLL (0: off) */
	unsigned busy_poll_budget; /* SO_BUSY_POLL_BUDGET (0: kernel default) */
	bool verify_csum;       /* drop received UDP datagrams with a bad
				 * checksum (IPv4 header checksum is always
				 * verified) */
	uint8_t ttl;            /* of sent IPv4 packets (multicast TTL; 0: 1;
				 * unicast uses net.ipv4.ip_default_ttl, as a
				 * kernel socket would) */
	bool rx_meta;           /* frames carry struct flit_xdp_rx_meta (the
				 * program is flit_xdp_ts): read the NIC stamp */
	bool tx_timestamps;     /* AF_XDP TX metadata stamps (see above);
				 * -EOPNOTSUPP before Linux 6.8 */
	bool tx_own_queue;      /* send through a socket of its own on the
				 * device's last queue, which is not received
				 * on (needs 2 queues or more); else through
				 * queue 0's */
};

/* Per object, summed over queues.  rx_frames: taken from rx rings;
 * rx_bytes, tx_bytes: frame bytes (Ethernet header included);
 * rx_dropped_*: frames not handed out (counted, freed): too short or
 * inconsistent Ethernet/IPv4/UDP headers, not IPv4/UDP (or a fragment), bad
 * IPv4 header checksum, bad UDP checksum.  tx_*: frames put on tx rings;
 * tx_full: sends refused for a full ring or no free frame; tx_no_neigh:
 * unicast sends refused because the next hop's MAC is not known yet (a
 * neighbour resolution was started) or the destination's route does not
 * leave through this interface (local, another interface, none): the caller
 * sends that one through the kernel; tx_too_big: datagram larger than
 * flit_xsk_max_payload().  wakeups: sendto/recvfrom/poll syscalls made for
 * kicks and need_wakeup. */
struct flit_xsk_stats {
	uint64_t rx_frames, rx_bytes;
	uint64_t rx_dropped_short, rx_dropped_proto, rx_dropped_ipcsum,
		 rx_dropped_udpcsum;
	uint64_t tx_frames, tx_bytes, tx_full, tx_no_neigh, tx_too_big;
	uint64_t wakeups;
	/* cfg.rx_meta: frames handed out with a NIC stamp, without one (the
	 * metadata says 0 or an error, or there is none) */
	uint64_t rx_ts_hw, rx_ts_none;
	/* cfg.tx_timestamps: completions with a stamp, without one (0: the
	 * driver gave none), stamps lost because flit_xsk_tx_stamps() was not
	 * called often enough (the oldest are overwritten) */
	uint64_t tx_ts, tx_ts_none, tx_ts_lost;
};

/* A TX completion stamp (cfg.tx_timestamps).  id counts the datagrams this
 * object sent, from 0, in the order flit_xsk_send() took them: the shape of
 * SO_TIMESTAMPING's OPT_ID key, so it maps onto the kernel-socket transmit
 * stamps of userspace/txts.h (struct flit_txts_rec: key = id, sw_ns or
 * hw_ns = ts_ns by flags).  daddr, dport, ip_id and head (the first bytes
 * of the UDP payload: a flit frame header, with its session and sequence
 * number) tell which datagram it was. */
#define FLIT_XSK_TX_STAMP_HEAD 24
struct flit_xsk_tx_stamp {
	uint64_t ts_ns;         /* FLIT_TXTS_SOFTWARE: CLOCK_REALTIME (the
				 * kernel's CLOCK_TAI stamp less the TAI
				 * offset, whole seconds, read at open);
				 * FLIT_TXTS_HARDWARE: the NIC's PHC, raw;
				 * 0: no stamp */
	uint64_t raw_ns;        /* as the kernel wrote it (copy mode: CLOCK_TAI) */
	uint32_t flags;         /* FLIT_TXTS_* (flit/tstamp.h), 0: no stamp */
	uint32_t id;
	uint32_t len;           /* UDP payload bytes */
	uint32_t daddr;         /* network order */
	uint16_t dport;         /* network order */
	uint16_t ip_id;         /* host order */
	uint8_t head[FLIT_XSK_TX_STAMP_HEAD];   /* min(len, 24) bytes valid */
};

struct flit_xsk;

/* Create the sockets (retrying EBUSY for up to 1 s: a socket closed just
 * before on the same queue).  Needs CAP_NET_RAW (and CAP_IPC_LOCK for UMEM
 * beyond RLIMIT_MEMLOCK): -EPERM with a trail naming it.  The interface must
 * have an IPv4 address (the source address of sends). */
int flit_xsk_open(const struct flit_xsk_cfg *cfg, struct flit_xsk **out);
void flit_xsk_close(struct flit_xsk *x);

unsigned flit_xsk_queues(const struct flit_xsk *x);
int flit_xsk_fd(const struct flit_xsk *x, unsigned queue);
struct in_addr flit_xsk_addr(const struct flit_xsk *x);   /* interface IPv4 */
/* "copy mode, skb, need_wakeup, busy-poll 50 us, 1 queue, 4096x2048 B UMEM
 * (huge pages)" and the like: every choice that changes performance. */
const char *flit_xsk_describe(const struct flit_xsk *x);
/* Largest UDP payload a send takes: frame_size - headroom (256) - 42, and
 * at most the interface's MTU (read at open) - 28, since the device drops
 * larger frames silently. */
uint32_t flit_xsk_max_payload(const struct flit_xsk *x);

/* Receive up to n UDP datagrams from all queues without blocking: d[i].buf
 * points at the UDP payload inside the UMEM, d[i].addr is the IPv4 source
 * address and UDP source port, rx_ts_ns 0 (no software stamps on this
 * path), rx_ts_hw_ns the NIC's stamp with cfg.rx_meta (0: none).
 * The views stay valid until the next flit_xsk_recv() (their frames then go
 * back to the fill ring).  Returns how many, 0, or -errno.  dst (may be
 * NULL) receives each datagram's destination (address, port), used to tell
 * flows apart. */
int flit_xsk_recv(struct flit_xsk *x, struct flit_dgram *d,
		  struct sockaddr_in *dst, unsigned n);

/* Anything waiting on a receive ring?  A few loads, no syscall: lets a
 * spinning poll loop skip the rest of its work while nothing came. */
bool flit_xsk_rx_pending(struct flit_xsk *x);

/* Send n datagrams with source port sport (network order) to d[i].addr:
 * each is copied into a UMEM frame behind freshly built headers; one kick
 * (sendto) per call when the ring needs it.  Returns how many were taken
 * (stops at the first that cannot: full ring -> the rest not sent), or
 * -errno for the first.  A unicast datagram whose next hop's MAC is unknown
 * returns -EHOSTUNREACH at its position if it is the first (count 0 taken),
 * having asked the kernel to resolve it; callers send it through a kernel
 * socket instead (also what -EHOSTUNREACH means for a destination whose
 * route does not leave through this interface).  Larger than
 * flit_xsk_max_payload(): -EMSGSIZE; not AF_INET: -EDESTADDRREQ. */
int flit_xsk_send(struct flit_xsk *x, const struct flit_dgram *d,
		  unsigned n, uint16_t sport);

/* Reap the completion rings and re-kick tx when frames are still pending
 * (for copy mode, where the kernel sends only in the kick).  Cheap when
 * there is nothing to do. */
void flit_xsk_tx_service(struct flit_xsk *x);

void flit_xsk_stats(const struct flit_xsk *x, struct flit_xsk_stats *out);

/* cfg.tx_timestamps: the completion stamps collected since the last call,
 * oldest first, up to n (completions are reaped first).  Returns how many
 * (0 without tx_timestamps).  Up to ring_size stamps are kept: call it at
 * least that often per ring_size datagrams sent (else tx_ts_lost).  Any
 * thread (takes the tx lock). */
int flit_xsk_tx_stamps(struct flit_xsk *x, struct flit_xsk_tx_stamp *out, unsigned n);

/* The clock of the TX stamps' ts_ns: "realtime" (copy mode: the kernel's
 * software CLOCK_TAI stamp at completion, moved to CLOCK_REALTIME) or "phc"
 * (zero-copy: the NIC's clock, as its driver fills it); NULL without
 * tx_timestamps. */
const char *flit_xsk_tx_clock(const struct flit_xsk *x);

/* Does the kernel give AF_XDP TX metadata (cfg.tx_timestamps)?  Found by
 * registering a one-page UMEM with it (twice at most, on sockets of their
 * own, closed at once), once per process:
 *   FLIT_XSK_TXMD_FLAG    tx_metadata_len with XDP_UMEM_TX_METADATA_LEN
 *                         (Linux >= 6.11)
 *   FLIT_XSK_TXMD_NOFLAG  tx_metadata_len without the flag (6.8 .. 6.10)
 *   FLIT_XSK_TXMD_NONE    the kernel ignores tx_metadata_len (< 6.8)
 * or -errno when it cannot tell (-EPERM: no CAP_NET_RAW; -EAFNOSUPPORT: no
 * AF_XDP sockets).  Not for hot paths (two socket()+setsockopt()). */
enum { FLIT_XSK_TXMD_NONE = 0, FLIT_XSK_TXMD_NOFLAG = 1, FLIT_XSK_TXMD_FLAG = 2 };
int flit_xsk_txmd_probe(void);

/* cfg.rx_meta: why frames came without a NIC stamp ("veth0 gives none:
 * bpf_xdp_metadata_rx_timestamp() returned a stamp of 0", ...), "" while
 * every frame had one (or none came yet). */
const char *flit_xsk_rx_ts_why(const struct flit_xsk *x);

#endif /* FLIT_XSK_IO_H */
