// SPDX-License-Identifier: BSD-2-Clause
/*
 * Datagram I/O for the udp transport (see udp_io.h): a sockets backend
 * (recvmmsg/sendmmsg, MSG_DONTWAIT) and an io_uring backend (liburing),
 * either under the receive-side impairment of dgram/ when it is on.
 *
 * Everything the steady-state path touches is allocated at open: receive
 * buffers of dgram_max bytes (one per batch entry) with their iovecs,
 * addresses, control space and message headers; for io_uring also the send
 * slots and the completion bookkeeping.  A recv or send call then makes at
 * most one syscall, unless an error or a partial send makes it retry.
 *
 * io_uring, in short: `batch` RECVMSG requests stay posted, one per receive
 * buffer, as linked chains (see uring_flush_reposts()).  A recv call
 * re-posts the buffers whose views it handed out the call before, enters
 * the kernel once (submit + get events) only when something can be pending
 * (IORING_SQ_TASKRUN, SQEs to submit, or the last enter produced
 * receives), moves the completions it finds to a FIFO and hands out views
 * from it.  Sends copy each datagram into one of `batch` send slots and
 * post a SENDMSG; a slot is free again when its completion is reaped.  The
 * ring is created disabled (R_DISABLED) and enabled by the first recv or
 * send, so SINGLE_ISSUER binds it to the thread that uses it, not to the
 * one that opened it.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <linux/net_tstamp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "udp/udp_io.h"

/* liburing 2.3 / uapi 6.1 have these; older headers may not. */
#ifndef IORING_SETUP_R_DISABLED
#define IORING_SETUP_R_DISABLED (1U << 6)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG (1U << 9)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif
#ifndef IORING_SQ_CQ_OVERFLOW
#define IORING_SQ_CQ_OVERFLOW (1U << 1)
#endif
#ifndef IORING_SQ_TASKRUN
#define IORING_SQ_TASKRUN (1U << 2)
#endif

#define BATCH_MAX     256u
#define DGRAM_MAX     65507u
/* Control space per received datagram: SCM_TIMESTAMPING takes
 * CMSG_SPACE(3 * 16) = 64 bytes; room for one more small cmsg. */
#define RX_CTL_LEN    128u
/* user_data of io_uring requests: receive slot i is i, send slot j is
 * UD_SEND | j. */
#define UD_SEND       0x10000ull
/* Bounded retries when a receive produced nothing deliverable (all
 * truncated, or an ICMP error in the way). */
#define RECV_TRIES    4
/* Post receive requests as linked chains (see uring_flush_reposts()). */
#ifndef URING_LINK_RECVS
#define URING_LINK_RECVS 1
#endif

/* SCM_TIMESTAMPING payload (struct scm_timestamping of linux/errqueue.h,
 * declared here to keep that header's struct timespec out of our way). */
struct scm_ts3 {
	struct timespec ts[3];
};

struct tx_slot {
	struct msghdr mh;
	struct iovec iov;
	struct sockaddr_in addr;
	bool retried;           /* re-posted once after an ICMP-class error */
};

struct rx_done {                /* a completed RECVMSG not yet handed out */
	uint16_t slot;
	int32_t res;
};

struct uring {
	struct io_uring ring;
	unsigned flags;         /* setup flags the kernel accepted */
	bool enabled;           /* R_DISABLED ring enabled (first use) */
	bool maybe_more;        /* last enter produced completions: look again */
	bool ring_ok;           /* io_uring_queue_init succeeded */
	bool single;            /* SINGLE_ISSUER: bound to owner once enabled */
	pthread_t owner;
	unsigned nslots, tx_stride;
	uint8_t *txbuf;
	struct tx_slot *tx;
	uint16_t *tx_free;
	unsigned ntx_free;
	unsigned tx_requeued;   /* send slots re-queued since the last submit */
	struct rx_done *done;   /* FIFO, capacity batch */
	unsigned done_head, done_n;
	uint16_t *repost;       /* receive slots to post again */
	unsigned nrepost;
};

struct flit_udp_io {
	int fd;
	enum flit_udp_backend backend;
	unsigned batch, dgram_max, stride;
	bool timestamps;
	bool tx_only;
	struct flit_impair *im;         /* NULL: impairment off */
	struct flit_udp_io_stats st;

	uint8_t *rxbuf;                 /* batch * stride */
	struct mmsghdr *rmsg;           /* io_uring uses rmsg[i].msg_hdr */
	struct iovec *riov;
	struct sockaddr_in *raddr;
	uint8_t *rctl;                  /* batch * RX_CTL_LEN, or NULL */
	size_t ctl_len;

	struct mmsghdr *smsg;           /* sockets send */
	struct iovec *siov;

	struct uring *u;                /* io_uring backend, else NULL */
	char desc[200];
};

/* ---- helpers ------------------------------------------------------------ */

static void *zalloc(size_t n)
{
	return calloc(1, n ? n : 1);
}

static unsigned min_u(unsigned a, unsigned b)
{
	return a < b ? a : b;
}

static const char *addr_str(const struct sockaddr_in *a, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)&a->sin_addr.s_addr;
	snprintf(buf, len, "%u.%u.%u.%u:%u", p[0], p[1], p[2], p[3],
		 (unsigned)ntohs(a->sin_port));
	return buf;
}

/* Errors that an ICMP message for an earlier datagram can leave on the
 * socket (or that one destination, not the socket, causes): they must not
 * wedge sending to everybody else. */
static bool icmp_class(int e)
{
	switch (e) {
	case ECONNREFUSED: case EHOSTUNREACH: case ENETUNREACH:
	case EHOSTDOWN: case ENETDOWN: case ENONET: case EPROTO:
	case ENOPROTOOPT:
		return true;
	default:
		return false;
	}
}

/* Datagram dropped on the way out, nothing to retry. */
static bool tx_dropped_class(int e)
{
	return e == ENOBUFS || e == EPERM;
}

static uint64_t ts_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

static void parse_ts(const struct msghdr *mh, struct flit_dgram *d)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR((struct msghdr *)mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct scm_ts3))) {
			struct scm_ts3 t;
			memcpy(&t, CMSG_DATA(c), sizeof(t));
			d->rx_ts_ns = ts_ns(&t.ts[0]);
			d->rx_ts_hw_ns = ts_ns(&t.ts[2]);
		}
	}
}

/* Fill d from receive slot i, len bytes. */
static inline void rx_fill(struct flit_udp_io *io, unsigned i, uint32_t len,
			   struct flit_dgram *d)
{
	d->buf = io->rxbuf + (size_t)i * io->stride;
	d->len = len;
	d->addr = io->raddr[i];
	d->rx_ts_ns = 0;
	d->rx_ts_hw_ns = 0;
	if (io->timestamps)
		parse_ts(&io->rmsg[i].msg_hdr, d);
	io->st.rx_dgrams++;
	io->st.rx_bytes += len;
}

static inline void rx_reset_hdr(struct flit_udp_io *io, unsigned i)
{
	struct msghdr *mh = &io->rmsg[i].msg_hdr;
	mh->msg_namelen = sizeof(struct sockaddr_in);
	mh->msg_controllen = io->ctl_len;
	mh->msg_flags = 0;
}

/* Destination for a send: sin_family 0 means "the connected peer". */
static inline void tx_set_name(struct msghdr *mh, const struct sockaddr_in *a)
{
	if (a->sin_family) {
		mh->msg_name = (void *)a;
		mh->msg_namelen = sizeof(*a);
	} else {
		mh->msg_name = NULL;
		mh->msg_namelen = 0;
	}
}

/* ---- sockets backend ----------------------------------------------------- */

/* What a failed receive call (errno e) means: 0 nothing there, 1 call
 * again, else -errno with the trail set. */
static int recv_failed(struct flit_udp_io *io, int e, const char *call)
{
	if (e == EAGAIN || e == EWOULDBLOCK)
		return 0;
	if (e == EINTR)
		return 1;
	if (icmp_class(e) || e == EMSGSIZE) {
		/* an ICMP error for an earlier send, reported here: it is the
		 * sender's business */
		io->st.tx_errors++;
		return 1;
	}
	return flit_err(e, "udp io: %s on fd %d", call, io->fd);
}

/* One datagram, no control data: recvfrom(), the kernel's cheapest receive
 * (~80 ns less per call than recvmmsg() of one here, and a spinning
 * latency-bound receiver makes one call per poll). */
static int sock_recv1(struct flit_udp_io *io, struct flit_dgram *d)
{
	for (int tries = 0; tries < RECV_TRIES; tries++) {
		socklen_t alen = sizeof(io->raddr[0]);
		ssize_t got = recvfrom(io->fd, io->rxbuf, io->dgram_max, MSG_DONTWAIT | MSG_TRUNC,
				       (struct sockaddr *)&io->raddr[0], &alen);
		io->st.syscalls++;
		if (FLIT_UNLIKELY(got < 0)) {
			int r = recv_failed(io, errno, "recvfrom");
			if (r == 1)
				continue;
			return r;
		}
		if (FLIT_UNLIKELY((size_t)got > io->dgram_max)) {
			io->st.rx_truncated++;
			continue;
		}
		rx_fill(io, 0, (uint32_t)got, d);
		return 1;
	}
	return 0;
}

static int sock_recv(struct flit_udp_io *io, struct flit_dgram *d, unsigned n)
{
	unsigned want = min_u(n, io->batch);
	int out = 0;

	if (want == 1 && !io->timestamps)
		return sock_recv1(io, d);
	for (int tries = 0; tries < RECV_TRIES; tries++) {
		for (unsigned i = 0; i < want; i++)
			rx_reset_hdr(io, i);
		int got = recvmmsg(io->fd, io->rmsg, want, MSG_DONTWAIT | MSG_TRUNC, NULL);
		io->st.syscalls++;
		if (FLIT_UNLIKELY(got < 0)) {
			int r = recv_failed(io, errno, "recvmmsg");
			if (r == 1)
				continue;
			return r;
		}
		for (int i = 0; i < got; i++) {
			const struct mmsghdr *m = &io->rmsg[i];
			if (FLIT_UNLIKELY(m->msg_len > io->dgram_max ||
					  (m->msg_hdr.msg_flags & MSG_TRUNC))) {
				io->st.rx_truncated++;
				continue;
			}
			rx_fill(io, (unsigned)i, m->msg_len, &d[out++]);
		}
		if (FLIT_LIKELY(out > 0 || (unsigned)got < want))
			break;
	}
	return out;
}

static int sock_send(struct flit_udp_io *io, const struct flit_dgram *d, unsigned n)
{
	unsigned taken = 0;
	bool retried = false;   /* d[taken] already retried after an ICMP error */

	while (taken < n) {
		unsigned k = min_u(n - taken, io->batch);
		for (unsigned i = 0; i < k; i++) {
			const struct flit_dgram *g = &d[taken + i];
			io->siov[i].iov_base = g->buf;
			io->siov[i].iov_len = g->len;
			tx_set_name(&io->smsg[i].msg_hdr, &g->addr);
		}
		int r;
		if (k == 1) {
			/* sendto(): less work in the kernel than sendmmsg() of one */
			const struct msghdr *mh = &io->smsg[0].msg_hdr;
			r = sendto(io->fd, io->siov[0].iov_base, io->siov[0].iov_len, MSG_DONTWAIT,
				   mh->msg_name, mh->msg_namelen) < 0 ? -1 : 1;
		} else {
			r = sendmmsg(io->fd, io->smsg, k, MSG_DONTWAIT);
		}
		io->st.syscalls++;
		if (FLIT_LIKELY(r > 0)) {
			for (int i = 0; i < r; i++)
				io->st.tx_bytes += d[taken + i].len;
			io->st.tx_dgrams += r;
			taken += r;
			retried = false;
			continue;   /* fewer than k: the next call tells why */
		}
		int e = r < 0 ? errno : EAGAIN;
		if (e == EAGAIN || e == EWOULDBLOCK) {
			io->st.tx_eagain++;
			break;
		}
		if (e == EINTR)
			continue;
		if (icmp_class(e) || tx_dropped_class(e)) {
			io->st.tx_errors++;
			/* An ICMP error left by an earlier datagram fails
			 * this one once: retry it.  If it fails again the
			 * error is its own: count it as sent and go on. */
			if (icmp_class(e) && !retried) {
				retried = true;
				continue;
			}
			taken++;
			retried = false;
			continue;
		}
		if (taken == 0) {
			char a[32];
			return flit_err(e, "udp io: send of %u bytes to %s on fd %d",
					(unsigned)d[0].len, addr_str(&d[0].addr, a, sizeof(a)),
					io->fd);
		}
		break;  /* the next call reports it on its first datagram */
	}
	return (int)taken;
}

/* ---- io_uring backend ---------------------------------------------------- */

static struct io_uring_sqe *uring_post_recv(struct flit_udp_io *io, unsigned slot)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->u->ring);
	if (FLIT_UNLIKELY(!sqe))
		return NULL;
	rx_reset_hdr(io, slot);
	/* MSG_TRUNC: the completion gives the datagram's real length */
	io_uring_prep_recvmsg(sqe, io->fd, &io->rmsg[slot].msg_hdr, MSG_TRUNC);
	io_uring_sqe_set_data64(sqe, slot);
	return sqe;
}

/* Post the receive slots waiting in u->repost, as one linked chain.
 *
 * Linked, only the head of a chain waits on the socket; the next is issued
 * when it completes.  Unlinked, every posted RECVMSG arms its own poll on
 * the socket and each arriving datagram wakes all of them (one gets it,
 * the others fail and re-arm): with 64 posted that costs ~20 us per
 * datagram on a trickle, against ~6 us for 1.  A chain keeps that to the
 * few chains in flight.  (A failed receive cancels the rest of its chain:
 * -ECANCELED completions, which are simply posted again.) */
static void uring_flush_reposts(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	struct io_uring_sqe *prev = NULL;
	unsigned k = 0, m = u->nrepost;

	while (k < m) {
		struct io_uring_sqe *sqe = uring_post_recv(io, u->repost[k]);
		if (FLIT_UNLIKELY(!sqe))
			break;
		if (prev && URING_LINK_RECVS)
			prev->flags |= IOSQE_IO_LINK;
		prev = sqe;
		k++;
	}
	if (FLIT_UNLIKELY(k < m))
		memmove(u->repost, u->repost + k, (m - k) * sizeof(*u->repost));
	u->nrepost = m - k;
}

static bool uring_post_send(struct flit_udp_io *io, unsigned slot)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->u->ring);
	if (FLIT_UNLIKELY(!sqe))
		return false;
	io_uring_prep_sendmsg(sqe, io->fd, &io->u->tx[slot].mh, 0);
	io_uring_sqe_set_data64(sqe, UD_SEND | slot);
	return true;
}

/* Move every completion in the CQ to where it belongs: send slots back to
 * the free list (or re-queued once after an ICMP-class error), receives to
 * the FIFO.  No syscall.  Returns how many receives completed. */
static unsigned uring_reap(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0, rx = 0;

	io_uring_for_each_cqe(&u->ring, head, cqe) {
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		seen++;
		if (ud & UD_SEND) {
			unsigned s = (unsigned)(ud & (UD_SEND - 1));
			int res = cqe->res;
			if (FLIT_UNLIKELY(res < 0)) {
				io->st.tx_errors++;
				if (res == -EAGAIN)
					io->st.tx_eagain++;
				if (icmp_class(-res) && !u->tx[s].retried) {
					u->tx[s].retried = true;
					if (uring_post_send(io, s)) {
						u->tx_requeued++;
						continue;
					}
				}
			}
			u->tx_free[u->ntx_free++] = (uint16_t)s;
		} else {
			unsigned tail = (u->done_head + u->done_n) % io->batch;
			u->done[tail].slot = (uint16_t)ud;
			u->done[tail].res = cqe->res;
			u->done_n++;
			rx++;
		}
	}
	io_uring_cq_advance(&u->ring, seen);
	return rx;
}

static bool uring_need_enter(const struct uring *u)
{
	return io_uring_sq_ready(&u->ring) || u->maybe_more ||
	       (IO_URING_READ_ONCE(*u->ring.sq.kflags) &
		(IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW));
}

/* Enter once: submit what is queued and run pending completions
 * (DEFER_TASKRUN only posts them from inside io_uring_enter). */
static int uring_enter(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	int r = io_uring_submit_and_get_events(&u->ring);
	io->st.syscalls++;
	if (FLIT_UNLIKELY(r < 0) && r != -EINTR && r != -EAGAIN && r != -EBUSY)
		return flit_err(-r, "udp io: io_uring_enter on fd %d", io->fd);
	u->tx_requeued = 0;
	/* DEFER_TASKRUN runs a bounded amount of work per enter and clears
	 * IORING_SQ_TASKRUN first: after one that produced receives, look
	 * again next time even if the flag is clear */
	u->maybe_more = uring_reap(io) > 0;
	return 0;
}

/* Enable a ring made with R_DISABLED, binding it to this thread.  (No
 * registered ring fd: it would pin the ring, and the socket, to this
 * thread's lifetime if the object were closed from another thread.) */
static int uring_enable(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	/* liburing 2.3 declares io_uring_enable_rings() but does not export
	 * it: the raw syscall */
	long r = syscall(__NR_io_uring_register, u->ring.ring_fd,
			 IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	io->st.syscalls++;
	if (r < 0)
		return flit_err(errno, "udp io: enabling the io_uring ring of fd %d", io->fd);
	u->enabled = true;
	u->owner = pthread_self();
	return 0;
}

/* First use enables the ring; with SINGLE_ISSUER only that thread may
 * enter it from then on (the kernel would say -EEXIST).  1: another
 * thread. */
static inline int uring_check_thread(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	if (FLIT_UNLIKELY(!u->enabled))
		return uring_enable(io);
	if (FLIT_UNLIKELY(u->single && !pthread_equal(u->owner, pthread_self())))
		return 1;
	return 0;
}

static int uring_recv(struct flit_udp_io *io, struct flit_dgram *d, unsigned n)
{
	struct uring *u = io->u;
	int out = 0, err = 0;

	int rc = uring_check_thread(io);
	if (FLIT_UNLIKELY(rc != 0))
		return rc < 0 ? rc : flit_err(EEXIST, "udp io: io_uring object of fd %d received "
					       "on from a thread other than the one that first "
					       "used it (SINGLE_ISSUER)", io->fd);
	for (int tries = 0; tries < RECV_TRIES; tries++) {
		bool dropped = false;

		/* the views handed out by the previous call expire now;
		 * (retry) post again what failed */
		if (u->nrepost)
			uring_flush_reposts(io);
		if (uring_need_enter(u)) {
			int r = uring_enter(io);
			if (r < 0)
				return r;
		} else {
			uring_reap(io);
		}
		while ((unsigned)out < n && u->done_n) {
			struct rx_done c = u->done[u->done_head];
			u->done_head = (u->done_head + 1) % io->batch;
			u->done_n--;
			if (FLIT_LIKELY(c.res >= 0 && (unsigned)c.res <= io->dgram_max &&
					!(io->rmsg[c.slot].msg_hdr.msg_flags & MSG_TRUNC))) {
				rx_fill(io, c.slot, (uint32_t)c.res, &d[out++]);
				u->repost[u->nrepost++] = c.slot;
				continue;
			}
			dropped = true;
			if (c.res >= 0)
				io->st.rx_truncated++;
			else if (icmp_class(-c.res) || c.res == -EMSGSIZE)
				io->st.tx_errors++;
			else if (c.res != -EAGAIN && c.res != -EINTR &&
				 c.res != -ECANCELED && c.res != -ENOBUFS && !err)
				err = flit_err(-c.res, "udp io: io_uring recvmsg on fd %d", io->fd);
			u->repost[u->nrepost++] = c.slot;
		}
		if (out > 0 || !dropped || err)
			break;
	}
	return out ? out : err;
}

static int uring_send_one_direct(struct flit_udp_io *io, const struct flit_dgram *g)
{
	struct msghdr mh = { 0 };
	struct iovec iov = { g->buf, g->len };

	tx_set_name(&mh, &g->addr);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	for (int tries = 0; tries < 2; tries++) {
		ssize_t r = sendmsg(io->fd, &mh, MSG_DONTWAIT);
		io->st.syscalls++;
		if (r >= 0)
			return 1;
		if (errno == EINTR)
			continue;
		if (icmp_class(errno) && tries == 0) {
			io->st.tx_errors++;
			continue;
		}
		break;
	}
	return -errno;
}

static int uring_send(struct flit_udp_io *io, const struct flit_dgram *d, unsigned n)
{
	struct uring *u = io->u;
	unsigned taken = 0, queued = 0;

	int rc = uring_check_thread(io);
	if (FLIT_UNLIKELY(rc < 0))
		return rc;
	/* Another thread than the ring's (say a service thread sending for a
	 * source, under the caller's lock): it cannot enter the ring, so it
	 * sends straight through the socket. */
	if (FLIT_UNLIKELY(rc > 0))
		return sock_send(io, d, n);
	while (taken < n) {
		const struct flit_dgram *g = &d[taken];

		if (FLIT_UNLIKELY(g->len > u->tx_stride)) {
			/* larger than a send slot: straight to the kernel,
			 * after what is queued before it */
			if (io_uring_sq_ready(&u->ring)) {
				int r = uring_enter(io);
				if (r < 0)
					return taken ? (int)taken : r;
				queued = 0;
			}
			int r = uring_send_one_direct(io, g);
			if (r == -EAGAIN || r == -EWOULDBLOCK) {
				io->st.tx_eagain++;
				break;
			}
			if (r < 0 && (icmp_class(-r) || tx_dropped_class(-r))) {
				io->st.tx_errors++;
			} else if (r < 0) {
				if (taken)
					break;
				char a[32];
				return flit_err(-r, "udp io: sendmsg of %u bytes to %s on fd %d",
						(unsigned)g->len, addr_str(&g->addr, a, sizeof(a)),
						io->fd);
			} else {
				io->st.tx_dgrams++;
				io->st.tx_bytes += g->len;
			}
			taken++;
			continue;
		}
		if (FLIT_UNLIKELY(!u->ntx_free)) {
			uring_reap(io);
			if (!u->ntx_free && (queued || uring_need_enter(u))) {
				int r = uring_enter(io);
				if (r < 0)
					return taken ? (int)taken : r;
				queued = 0;
			}
			if (!u->ntx_free) {
				io->st.tx_eagain++;
				break;
			}
		}
		unsigned s = u->tx_free[--u->ntx_free];
		struct tx_slot *t = &u->tx[s];
		memcpy(u->txbuf + (size_t)s * u->tx_stride, g->buf, g->len);
		t->iov.iov_len = g->len;
		t->addr = g->addr;
		tx_set_name(&t->mh, &t->addr);
		t->retried = false;
		if (FLIT_UNLIKELY(!uring_post_send(io, s))) {
			/* SQ full: cannot happen, it has room for every slot */
			u->tx_free[u->ntx_free++] = (uint16_t)s;
			io->st.tx_eagain++;
			break;
		}
		queued++;
		io->st.tx_dgrams++;
		io->st.tx_bytes += g->len;
		taken++;
	}
	if (queued) {
		/* sends issued inline have completed when this returns: their
		 * slots are free again */
		int r = uring_enter(io);
		if (r < 0)
			return taken ? (int)taken : r;
		/* send once more any that an ICMP error for an earlier
		 * datagram failed (error path only) */
		if (FLIT_UNLIKELY(u->tx_requeued)) {
			r = uring_enter(io);
			if (r < 0)
				return taken ? (int)taken : r;
		}
	}
	return (int)taken;
}

static int sysctl_int(const char *path)
{
	int v = -1;
	FILE *f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int uring_open(struct flit_udp_io *io)
{
	struct uring *u = zalloc(sizeof(*u));
	if (!u)
		return flit_err(ENOMEM, "udp io: io_uring state");
	io->u = u;

	u->nslots = io->batch;
	u->tx_stride = (io->dgram_max + 63u) & ~63u;
	u->txbuf = aligned_alloc(64, (size_t)u->nslots * u->tx_stride);
	u->tx = zalloc(u->nslots * sizeof(*u->tx));
	u->tx_free = zalloc(u->nslots * sizeof(*u->tx_free));
	u->done = zalloc(io->batch * sizeof(*u->done));
	u->repost = zalloc(io->batch * sizeof(*u->repost));
	if (!u->txbuf || !u->tx || !u->tx_free || !u->done || !u->repost)
		return flit_err(ENOMEM, "udp io: io_uring buffers (%u slots of %u bytes)",
				u->nslots, u->tx_stride);
	for (unsigned s = 0; s < u->nslots; s++) {
		struct tx_slot *t = &u->tx[s];
		t->iov.iov_base = u->txbuf + (size_t)s * u->tx_stride;
		t->mh.msg_iov = &t->iov;
		t->mh.msg_iovlen = 1;
		u->tx_free[s] = (uint16_t)(u->nslots - 1 - s);
	}
	u->ntx_free = u->nslots;

	/* SQ holds every receive and send request that can be outstanding;
	 * the CQ (twice the SQ) all their completions. */
	unsigned entries = 1;
	while (entries < io->batch + u->nslots)
		entries <<= 1;
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		  IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED;
	int r = io_uring_queue_init_params(entries, &u->ring, &p);
	if (r == -EINVAL) {
		memset(&p, 0, sizeof(p));
		r = io_uring_queue_init_params(entries, &u->ring, &p);
	}
	if (r < 0) {
		int dis = sysctl_int("/proc/sys/kernel/io_uring_disabled");
		char why[64] = "";
		if (dis > 0)
			snprintf(why, sizeof(why), ", sysctl kernel.io_uring_disabled = %d", dis);
		flit_err(-r, "io_uring_setup(%u entries) failed%s", entries, why);
		/* the cause stays in the trail; the caller sees "not supported" */
		return flit_err_wrap(EOPNOTSUPP, "udp io: io_uring backend not usable here");
	}
	u->ring_ok = true;
	u->flags = p.flags;
	u->single = p.flags & IORING_SETUP_SINGLE_ISSUER;
	u->enabled = !(p.flags & IORING_SETUP_R_DISABLED);
	for (unsigned i = 0; i < io->batch && !io->tx_only; i++)
		u->repost[u->nrepost++] = (uint16_t)i;
	uring_flush_reposts(io);
	if (u->nrepost)
		return flit_err(EOVERFLOW, "udp io: io_uring SQ too small (%u)", entries);
	if (p.flags & IORING_SETUP_DEFER_TASKRUN)
		snprintf(io->desc, sizeof(io->desc), "io_uring (defer_taskrun, single_issuer)");
	else
		snprintf(io->desc, sizeof(io->desc),
			 "io_uring (plain setup: the kernel refused defer_taskrun, single_issuer)");
	return 0;
}

static void uring_close(struct uring *u)
{
	if (!u)
		return;
	if (u->ring_ok)
		io_uring_queue_exit(&u->ring);
	free(u->txbuf);
	free(u->tx);
	free(u->tx_free);
	free(u->done);
	free(u->repost);
	free(u);
}

/* the backend's receive, under the impairment (flit_dgram_recv_fn) */
static int backend_recv(void *arg, struct flit_dgram *d, unsigned n)
{
	struct flit_udp_io *io = arg;
	return io->backend == FLIT_UDP_URING ? uring_recv(io, d, n) : sock_recv(io, d, n);
}

/* ---- public ---------------------------------------------------------------- */

int flit_udp_io_open(int fd, const struct flit_udp_io_cfg *cfg, struct flit_udp_io **out)
{
	struct flit_udp_io *io = NULL;
	int r;

	if (out)
		*out = NULL;
	if (!cfg || !out) {
		r = flit_err(EINVAL, "udp io: open without %s", !cfg ? "a config" : "a result pointer");
		goto fail;
	}
	if (fd < 0) {
		r = flit_err(EBADF, "udp io: bad fd %d", fd);
		goto fail;
	}
	if (cfg->backend != FLIT_UDP_SOCKETS && cfg->backend != FLIT_UDP_URING) {
		r = flit_err(EINVAL, "udp io: unknown backend %d", (int)cfg->backend);
		goto fail;
	}
	if (cfg->batch < 1 || cfg->batch > BATCH_MAX) {
		r = flit_err(EINVAL, "udp io: batch %u out of range 1..%u", cfg->batch, BATCH_MAX);
		goto fail;
	}
	if (cfg->dgram_max < 1 || cfg->dgram_max > DGRAM_MAX) {
		r = flit_err(EINVAL, "udp io: dgram_max %u out of range 1..%u",
			     cfg->dgram_max, DGRAM_MAX);
		goto fail;
	}

	int type = 0;
	socklen_t tl = sizeof(type);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0) {
		r = flit_err(errno, "udp io: fd %d is not a socket", fd);
		goto fail;
	}
	if (type != SOCK_DGRAM) {
		r = flit_err(EINVAL, "udp io: fd %d is not a datagram socket (type %d)", fd, type);
		goto fail;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		r = flit_err(errno, "udp io: making fd %d non-blocking", fd);
		goto fail;
	}
	if (cfg->timestamps) {
		int v = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
			SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE;
		if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &v, sizeof(v)) < 0) {
			r = flit_err(errno, "udp io: SO_TIMESTAMPING on fd %d", fd);
			goto fail;
		}
	}

	io = zalloc(sizeof(*io));
	if (!io) {
		r = flit_err(ENOMEM, "udp io: io object");
		goto fail;
	}
	io->fd = fd;
	io->backend = cfg->backend;
	io->batch = cfg->batch;
	io->dgram_max = cfg->dgram_max;
	io->stride = (cfg->dgram_max + 63u) & ~63u;
	io->timestamps = cfg->timestamps;
	io->tx_only = cfg->tx_only;
	io->ctl_len = cfg->timestamps ? RX_CTL_LEN : 0;

	io->rxbuf = aligned_alloc(64, (size_t)io->batch * io->stride);
	io->rmsg = zalloc(io->batch * sizeof(*io->rmsg));
	io->riov = zalloc(io->batch * sizeof(*io->riov));
	io->raddr = zalloc(io->batch * sizeof(*io->raddr));
	io->rctl = cfg->timestamps ? aligned_alloc(16, (size_t)io->batch * RX_CTL_LEN) : NULL;
	io->smsg = zalloc(io->batch * sizeof(*io->smsg));
	io->siov = zalloc(io->batch * sizeof(*io->siov));
	if (!io->rxbuf || !io->rmsg || !io->riov || !io->raddr || !io->smsg || !io->siov ||
	    (cfg->timestamps && !io->rctl)) {
		r = flit_err(ENOMEM, "udp io: buffers for %u datagrams of %u bytes",
			     io->batch, io->dgram_max);
		goto fail;
	}
	for (unsigned i = 0; i < io->batch; i++) {
		struct msghdr *mh = &io->rmsg[i].msg_hdr;
		io->riov[i].iov_base = io->rxbuf + (size_t)i * io->stride;
		io->riov[i].iov_len = io->dgram_max;
		mh->msg_name = &io->raddr[i];
		mh->msg_namelen = sizeof(io->raddr[i]);
		mh->msg_iov = &io->riov[i];
		mh->msg_iovlen = 1;
		mh->msg_control = io->rctl ? io->rctl + (size_t)i * RX_CTL_LEN : NULL;
		mh->msg_controllen = io->ctl_len;
		io->smsg[i].msg_hdr.msg_iov = &io->siov[i];
		io->smsg[i].msg_hdr.msg_iovlen = 1;
	}

	if (io->backend == FLIT_UDP_URING) {
		r = uring_open(io);
		if (r < 0)
			goto fail;
	} else {
		snprintf(io->desc, sizeof(io->desc), "sockets");
	}

	if (flit_dgram_impair_on(&cfg->impair)) {
		r = flit_impair_open(&cfg->impair, io->batch, io->dgram_max, &io->im);
		if (r < 0) {
			r = flit_err_wrap(-r, "udp io");
			goto fail;
		}
		size_t l = strlen(io->desc);
		snprintf(io->desc + l, sizeof(io->desc) - l, ", %s", flit_impair_describe(io->im));
	}
	*out = io;
	return 0;

fail:
	if (io)
		flit_udp_io_close(io);
	else if (fd >= 0)
		close(fd);
	return r;
}

void flit_udp_io_close(struct flit_udp_io *io)
{
	if (!io)
		return;
	/* the ring first: the kernel must be done with our buffers */
	uring_close(io->u);
	flit_impair_close(io->im);
	free(io->rxbuf);
	free(io->rmsg);
	free(io->riov);
	free(io->raddr);
	free(io->rctl);
	free(io->smsg);
	free(io->siov);
	if (io->fd >= 0)
		close(io->fd);
	free(io);
}

int flit_udp_io_fd(const struct flit_udp_io *io)
{
	return io->fd;
}

int flit_udp_io_recv(struct flit_udp_io *io, struct flit_dgram *d, unsigned n)
{
	if (FLIT_UNLIKELY(!n || io->tx_only))
		return n ? flit_err(EINVAL, "udp io: receive on a send-only io object") : 0;
	if (FLIT_UNLIKELY(io->im != NULL))
		return flit_impair_recv(io->im, backend_recv, io, d, n);
	return backend_recv(io, d, n);
}

int flit_udp_io_send(struct flit_udp_io *io, const struct flit_dgram *d, unsigned n)
{
	if (FLIT_UNLIKELY(!n))
		return 0;
	return io->backend == FLIT_UDP_URING ? uring_send(io, d, n) : sock_send(io, d, n);
}

void flit_udp_io_stats(const struct flit_udp_io *io, struct flit_udp_io_stats *out)
{
	*out = io->st;
	if (io->im) {
		struct flit_impair_stats is;
		flit_impair_stats(io->im, &is);
		out->impair_dropped = is.dropped;
		out->impair_duplicated = is.duplicated;
		out->impair_reordered = is.reordered;
	}
}

const char *flit_udp_io_describe(const struct flit_udp_io *io)
{
	return io->desc;
}
