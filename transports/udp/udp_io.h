/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Datagram I/O for the udp transport, behind one small interface with two
 * backends: plain sockets (recvmmsg/sendmmsg, MSG_DONTWAIT) and io_uring
 * (liburing; IORING_SETUP_DEFER_TASKRUN + SINGLE_ISSUER where the kernel has
 * them, else plain setup, reported by flit_udp_io_describe()).  Never
 * blocks.  The receive-side impairment of dgram/dgram.h (cfg.impair, for
 * tests) wraps either backend.
 *
 * Receive gives views of datagrams in buffers the io object owns; they are
 * valid until the next flit_udp_io_recv() or close on the same object.
 *
 * Threads: an io object is used by one thread at a time.  With io_uring
 * under SINGLE_ISSUER the ring is bound to the first thread that calls
 * recv, or send when sends go through the ring (uring_ring_send; it may be
 * opened and closed elsewhere); from any other thread recv fails with
 * -EEXIST and send goes straight through sendmmsg.
 */
#ifndef FLIT_UDP_IO_H
#define FLIT_UDP_IO_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dgram/dgram.h"

enum flit_udp_backend {
	FLIT_UDP_SOCKETS = 0,
	FLIT_UDP_URING = 1,
};

struct flit_udp_io_cfg {
	enum flit_udp_backend backend;
	unsigned batch;        /* datagrams per recv/send syscall, 1..256 */
	unsigned dgram_max;    /* largest datagram received, bytes (<= 65507) */
	bool tx_only;          /* never receive on this object (io_uring posts
				* no receive requests, so the socket's other
				* readers see every datagram) */
	bool timestamps;       /* SO_TIMESTAMPING rx software (+hardware when
				* the NIC has a clock and the transport enabled
				* it with SIOCSHWTSTAMP; see rx_ts_hw_ns) */
	bool uring_single_recv; /* io_uring: one RECVMSG per datagram instead
				 * of a multishot RECVMSG into a provided-buffer
				 * ring (the fallback on kernels before 6.0;
				 * tests keep it exercised) */
	bool uring_poll_recv;  /* io_uring: a multishot POLL_ADD tells when the
				* socket is readable (seen without a system
				* call), and recvmmsg takes the datagrams; else
				* (the default) a multishot RECVMSG fills
				* provided buffers.  Lower latency, more system
				* calls per burst (README) */
	bool uring_ring_send;  /* io_uring: datagrams go out as SEND requests
				* through the ring (several per enter); else
				* (the default) through sendmmsg on the socket,
				* as the sockets backend sends: each datagram is
				* handed to the kernel before send returns, and
				* one system call costs less than a ring enter
				* that issues the same send (README, udp:
				* io_uring against sockets) */
	struct flit_dgram_impair impair;
};

/* Per io object.  rx_dgrams/rx_bytes: received from the kernel and not
 * truncated, before impairment (delivered = rx_dgrams - impair_dropped +
 * impair_duplicated, once nothing is held back).  tx_dgrams/tx_bytes: taken
 * by send.  tx_errors: errors the kernel reported for sending, including
 * ICMP errors for earlier datagrams that surface on a later send or recv.
 * tx_eagain: sends cut short by a full socket buffer (io_uring: no free
 * send slot).  syscalls: recvmmsg/sendmmsg/sendmsg/io_uring_enter/
 * io_uring_register calls made. */
struct flit_udp_io_stats {
	uint64_t rx_dgrams, rx_bytes, rx_truncated;
	uint64_t tx_dgrams, tx_bytes, tx_errors, tx_eagain;
	uint64_t syscalls;
	uint64_t impair_dropped, impair_duplicated, impair_reordered;
};

struct flit_udp_io;

/* Wrap a UDP socket (non-blocking is set here); the io object owns fd from
 * now on, even on failure.  0 or -errno (-EOPNOTSUPP: io_uring not usable
 * here, with a trail saying why). */
int flit_udp_io_open(int fd, const struct flit_udp_io_cfg *cfg,
		     struct flit_udp_io **out);
void flit_udp_io_close(struct flit_udp_io *io);

int flit_udp_io_fd(const struct flit_udp_io *io);

/* Receive up to n datagrams without blocking: fills d[0..ret) (buf points
 * into the io object's buffers) and returns how many (0: none waiting), or
 * -errno.  A datagram larger than dgram_max is dropped and counted as
 * truncated. */
int flit_udp_io_recv(struct flit_udp_io *io, struct flit_dgram *d,
		     unsigned n);
/* Send n datagrams (buf, len, addr) without blocking; the data is copied or
 * handed to the kernel before this returns.  Returns how many were taken
 * (fewer than n when the socket buffer is full: the rest were not sent), or
 * -errno if the first one failed for another reason than EAGAIN.  Errors
 * that concern one destination or an earlier datagram (ECONNREFUSED,
 * EHOSTUNREACH, ENETUNREACH, ... from ICMP; ENOBUFS, EPERM drops) do not
 * stop the batch: they are counted in tx_errors and the datagram is taken
 * (after one retry for ICMP errors, which may belong to an earlier one).  With io_uring, errors of datagrams already taken show up in
 * tx_errors later.  Over loopback UDP there is no back-pressure: a full
 * receiver drops, the sender never sees EAGAIN. */
int flit_udp_io_send(struct flit_udp_io *io, const struct flit_dgram *d,
		     unsigned n);
void flit_udp_io_stats(const struct flit_udp_io *io,
		       struct flit_udp_io_stats *out);
/* "sockets", "io_uring (defer_taskrun, single_issuer)", "io_uring (plain
 * setup: ...)", with ", impaired (...)" appended when impairment is on. */
const char *flit_udp_io_describe(const struct flit_udp_io *io);

#endif /* FLIT_UDP_IO_H */
