/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Inside the udp datagram path (udp_io.h): the io object both backends
 * share, the helpers of udp_io.c they both use, and the io_uring backend's
 * entry points (uring_io.c).  Not for the session layer: it sees udp_io.h.
 */
#ifndef FLIT_UDP_IO_IMPL_H
#define FLIT_UDP_IO_IMPL_H

#include <stdlib.h>
#include <sys/socket.h>

#include "error.h"
#include "udp/udp_io.h"

#define UIO_BATCH_MAX 256u
#define UIO_DGRAM_MAX 65507u
/* Control space per received datagram: SCM_TIMESTAMPING takes
 * CMSG_SPACE(3 * 16) = 64 bytes; room for one more small cmsg. */
#define UIO_RX_CTL_LEN 128u
/* Bounded retries when a receive produced nothing deliverable (all
 * truncated, or an ICMP error in the way). */
#define UIO_RECV_TRIES 4

struct uring;

struct flit_udp_io {
	int fd;
	enum flit_udp_backend backend;
	unsigned batch, dgram_max, stride;
	bool timestamps;
	bool tx_only;
	struct flit_impair *im;         /* NULL: impairment off */
	struct flit_udp_io_stats st;

	uint8_t *rxbuf;                 /* batch * stride */
	struct mmsghdr *rmsg;           /* io_uring (one RECVMSG per datagram)
					 * uses rmsg[i].msg_hdr */
	struct iovec *riov;
	struct sockaddr_in *raddr;
	uint8_t *rctl;                  /* batch * UIO_RX_CTL_LEN, or NULL */
	size_t ctl_len;

	struct mmsghdr *smsg;           /* sockets send */
	struct iovec *siov;

	struct uring *u;                /* io_uring backend, else NULL */
	char desc[256];
};

/* ---- udp_io.c: shared helpers ---------------------------------------------- */

/* calloc of n bytes (at least 1): zeroed, NULL when out of memory */
static inline void *uio_zalloc(size_t n)
{
	return calloc(1, n ? n : 1);
}

const char *uio_addr_str(const struct sockaddr_in *a, char *buf, size_t len);
/* Errors an ICMP message for an earlier datagram can leave on the socket
 * (or that one destination, not the socket, causes). */
bool uio_icmp_class(int e);
/* Datagram dropped on the way out, nothing to retry. */
bool uio_tx_dropped_class(int e);
/* SCM_TIMESTAMPING of one control message into d (other cmsgs ignored). */
void uio_parse_ts_cmsg(const struct cmsghdr *c, struct flit_dgram *d);
/* Fill d from receive slot i of rxbuf, len bytes (timestamps from its
 * msghdr), and count it. */
void uio_rx_fill(struct flit_udp_io *io, unsigned i, uint32_t len, struct flit_dgram *d);
void uio_rx_reset_hdr(struct flit_udp_io *io, unsigned i);
/* Destination for a send: sin_family 0 means "the connected peer". */
void uio_tx_set_name(struct msghdr *mh, const struct sockaddr_in *a);
/* The sockets backend's send (the io_uring backend's way out from a
 * thread that may not enter its ring, and its default send). */
int uio_sock_send(struct flit_udp_io *io, const struct flit_dgram *d, unsigned n);
/* The sockets backend's receive: recvfrom/recvmmsg, MSG_DONTWAIT (the
 * io_uring backend's once a multishot poll has told it the socket is
 * readable, cfg.uring_poll_recv).  *dry (may be NULL): the socket was
 * found empty (EAGAIN, or recvmmsg gave fewer than asked), so what comes
 * next wakes its waiters. */
int uio_sock_recv(struct flit_udp_io *io, struct flit_dgram *d, unsigned n, bool *dry);

/* ---- uring_io.c: the io_uring backend ---------------------------------------- */

/* Set up io->u for io (buffers allocated, fd set, io->desc to fill).
 * 0, or -EOPNOTSUPP with a trail when io_uring cannot be used here. */
int uio_uring_open(struct flit_udp_io *io, const struct flit_udp_io_cfg *cfg);
void uio_uring_close(struct uring *u);
int uio_uring_recv(struct flit_udp_io *io, struct flit_dgram *d, unsigned n);
int uio_uring_send(struct flit_udp_io *io, const struct flit_dgram *d, unsigned n);

#endif /* FLIT_UDP_IO_IMPL_H */
