/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Kernel transmit stamps of one UDP socket (SO_TIMESTAMPING, read from the
 * error queue), internal.  Public side: flit_pub_tx_stamp() in
 * include/flit/tstamp.h.
 *
 * The socket is set up with SOF_TIMESTAMPING_OPT_ID | OPT_TSONLY: the kernel
 * numbers the datagrams the socket sends 0, 1, 2, ... (sk_tskey) and queues
 * for each a stamp that carries the number but not the packet.  The number
 * is mapped back to a datagram by counting the datagrams the socket took, in
 * the same order, here (flit_txts_sent()): the caller must report every
 * datagram sent on the socket, control frames too, under the lock that
 * serialises its sends.  Kernels >= 6.13 give a number back to the socket
 * when the send fails (EAGAIN, a pending ICMP error); a datagram the kernel
 * numbered and then dropped with an error (a firewall's EPERM) shifts the
 * count by one until the socket is set up again.
 */
#ifndef FLIT_TXTS_H
#define FLIT_TXTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <flit/tstamp.h>

/* Datagrams remembered (a power of two). */
#define FLIT_TXTS_RING 256u

struct flit_txts_ent {
	uint32_t key;        /* the kernel's number of the datagram */
	uint32_t count;      /* messages (0: not a first transmission of data) */
	uint64_t seq;
	uint64_t ts;         /* 0: no stamp yet */
	uint32_t flags;      /* FLIT_TXTS_* */
	bool used;
};

struct flit_txts {
	uint32_t next_key;   /* number the kernel gives the next datagram */
	uint32_t newest;     /* ring index of the newest stamped data entry */
	bool any;            /* newest is valid */
	int kind;            /* FLIT_TS_SOFTWARE or FLIT_TS_HARDWARE */
	uint64_t stamps, unmatched; /* stamps read; stamps of datagrams forgotten */
	struct flit_txts_ent e[FLIT_TXTS_RING];
};

/* SO_TIMESTAMPING transmit stamps on fd: software (kind FLIT_TS_SOFTWARE),
 * or hardware with software where the device has none (FLIT_TS_HARDWARE;
 * the NIC must be set up with flit_hwts_enable(..., FLIT_HWTS_TX)), numbered
 * (OPT_ID) and without the packet (OPT_TSONLY).  Keeps receive-stamp flags
 * already set on fd.  Resets the kernel's numbering.  0 or -errno. */
int flit_txts_enable(int fd, int kind);

/* Start counting from 0 (call right after flit_txts_enable()). */
void flit_txts_init(struct flit_txts *t, int kind);

/* `n` datagrams, all carrying frame f[0..len), were taken by the socket. */
void flit_txts_sent(struct flit_txts *t, const void *f, size_t len, unsigned n);

/* A datagram whose stamp came back with the packet itself (AF_XDP TX
 * metadata: no numbering): frame f[0..len), stamp ts (0: none) of kind
 * flags (FLIT_TXTS_*).  Only first transmissions of DATA frames are kept. */
void flit_txts_stamped(struct flit_txts *t, const void *f, size_t len, uint64_t ts,
		       uint32_t flags);

/* Read the stamps queued on fd's error queue into the ring (non-blocking,
 * at most `max` per call).  Returns the number read, or -errno. */
int flit_txts_drain(struct flit_txts *t, int fd, unsigned max);

/* The stamp of the datagram carrying `seq` (FLIT_TX_STAMP_LATEST: the
 * newest stamped): 0, -EAGAIN (sent, no stamp yet), -ENOENT (not known). */
int flit_txts_lookup(const struct flit_txts *t, uint64_t seq, struct flit_tx_stamp *out);

/* One stamp read from an error queue. */
struct flit_txts_rec {
	uint32_t key;
	uint64_t sw_ns;      /* software stamp (CLOCK_REALTIME), 0 none */
	uint64_t hw_ns;      /* raw hardware stamp (PHC), 0 none */
};

/* Which of a socket's two stamps a message or datagram carries, and its
 * kind: the NIC's (FLIT_TXTS_HARDWARE) only where hardware stamping is in
 * effect (kind FLIT_TS_HARDWARE) and the NIC gave one (non-zero), else the
 * kernel's software stamp (FLIT_TXTS_SOFTWARE), else none (0, *flags 0).
 * The socket's raw-hardware slot is not trusted outside hardware mode: the
 * kernel fills it whenever an skb carries anything there (on veth, the
 * TX-metadata pointer of an AF_XDP frame), and a NIC another program (ptp4l)
 * set up stamps every socket's packets.  A hardware mode whose NIC gives no
 * stamp (a driver that accepts SIOCSHWTSTAMP and never stamps, qemu's
 * e1000e) thus yields software stamps, flagged so. */
static inline uint64_t flit_ts_pick(int kind, uint64_t sw_ns, uint64_t hw_ns, uint32_t *flags)
{
	if (kind == FLIT_TS_HARDWARE && hw_ns) {
		*flags = FLIT_TXTS_HARDWARE;
		return hw_ns;
	}
	*flags = sw_ns ? FLIT_TXTS_SOFTWARE : 0;
	return sw_ns;
}

/* Read up to n stamps from fd's error queue without blocking: how many
 * (0: none queued), or -errno.  Queued entries that are not transmit stamps
 * (ICMP errors with IP_RECVERR) are skipped. */
int flit_txts_read(int fd, struct flit_txts_rec *r, unsigned n);

#endif /* FLIT_TXTS_H */
