// SPDX-License-Identifier: BSD-2-Clause
/*
 * The io_uring backend of the udp datagram path (udp_io.h).
 *
 * One ring per io object, made with SINGLE_ISSUER + DEFER_TASKRUN +
 * TASKRUN_FLAG + R_DISABLED where the kernel has them (else a plain ring,
 * said in the description), enabled by the first recv or send so that
 * SINGLE_ISSUER binds it to the thread that uses it.  The socket is the
 * ring's registered file 0.
 *
 * Receive: one multishot RECVMSG (kernel 6.0) stays armed on the socket
 * and fills buffers of a provided-buffer ring (5.19): every datagram is one
 * completion naming its buffer, which holds the kernel's io_uring_recvmsg_out
 * header, the sender's address, the control data (timestamps) and the
 * payload.  Nothing is re-posted per datagram.  A recv call gives back the
 * buffers whose views it handed out the call before, enters the kernel only
 * when something can be pending (IORING_SQ_TASKRUN set by an arrival,
 * SQEs to submit, or the last enter produced receives), and hands out views
 * from the completions in order; with nothing pending it makes no system
 * call at all.  When the buffers run out (the application did not call
 * recv for a while) the kernel ends the multishot with -ENOBUFS and the
 * datagrams wait in the socket; the next call re-arms it.
 *
 * Receive by readiness (cfg.uring_poll_recv): one multishot POLL_ADD
 * stays armed on the socket instead; an arrival queues its task work and
 * sets IORING_SQ_TASKRUN, and the recv call that sees the flag takes the
 * datagrams with recvmmsg at once, as the sockets backend does, leaving
 * the task work for the next call's enter (which also says, by the
 * poll's POLLIN, whether more came meanwhile).  The datagram is taken by
 * the cheapest receive and the ring's work is off the critical path;
 * when datagrams come one at a time that is two system calls a datagram,
 * three when the receive took all it asked for and must look again (a
 * sparse stream's: the session layer then asks for one at a time,
 * dg_drain_any()), where the multishot RECVMSG makes one (ready_recv()).
 *
 * Without multishot (or with cfg.uring_single_recv) it falls back to
 * `batch` RECVMSG requests, one per receive slot, posted as linked chains
 * (see flush_reposts()), and says so in the description.
 *
 * Send, by default (cfg.uring_ring_send off): straight through the socket
 * with sendmmsg, as the sockets backend sends, from any thread, without
 * binding the ring.  flit hands every datagram to the kernel before the
 * send call returns, so a ring send is one enter per call as sendmmsg is
 * one system call per call, and on 6.18 the enter that issues a SEND costs
 * more than the sendmmsg (measured: README, "udp: io_uring against
 * sockets": RTT/2 p50 0.25-0.35 us less, unbatched throughput 1.05-1.10x,
 * batched 1.1x through the socket).
 *
 * Send through the ring (cfg.uring_ring_send): each datagram is copied
 * into one of `batch` send slots and a SEND posted with its destination in
 * the SQE (SENDMSG before 6.0); one enter per send call submits them all
 * (several SQEs per submit when a call sends several).  DEFER_TASKRUN
 * issues them inline, so the slots are free again when the enter returns.
 * A thread other than the ring's sends straight through the socket.
 *
 * NAPI busy polling (IORING_REGISTER_NAPI) is not registered: io_uring
 * runs it only while a task waits in io_uring_enter for completions, and
 * flit never waits in a ring (it spins with non-blocking polls or sleeps in
 * epoll, where the socket's SO_BUSY_POLL applies).
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "udp/udp_io_impl.h"
#include "udp/uring_compat.h"

/* user_data: receive slot i is i (one RECVMSG per datagram), send slot j
 * is UD_SEND | j, the multishot RECVMSG is UD_MSHOT. */
#define UD_SEND       0x10000ull
#define UD_MSHOT      0x20000ull
#define UD_POLL       0x40000ull
/* the provided-buffer group of the multishot receive (one per ring) */
#define BGID          0
/* provided buffers: at least this many, a power of two */
#define NBUFS_MIN     64u
/* receives reaped by one enter after which the next call enters again
 * even without IORING_SQ_TASKRUN (see enter()) */
#define MAYBE_MORE_RX 16u
/* Post receive requests as linked chains (see flush_reposts()). */
#ifndef URING_LINK_RECVS
#define URING_LINK_RECVS 1
#endif

struct tx_slot {
	struct msghdr mh;
	struct iovec iov;
	struct sockaddr_in addr;
	bool retried;           /* re-posted once after an ICMP-class error */
};

struct rx_done {                /* a receive completion not yet handed out */
	uint16_t slot;          /* receive slot, or provided buffer id */
	int32_t res;
};

struct uring {
	struct io_uring ring;
	bool enabled;           /* R_DISABLED ring enabled (first use) */
	bool maybe_more;        /* last enter produced completions: look again */
	bool ring_ok;           /* io_uring_queue_init succeeded */
	bool single;            /* SINGLE_ISSUER: bound to owner once enabled */
	bool fixed;             /* the socket is registered file 0 */
	pthread_t owner;

	bool ring_send;         /* sends as SEND requests (else sendmmsg) */
	unsigned nslots, tx_stride;     /* send slots: 0 unless ring_send */
	uint8_t *txbuf;
	struct tx_slot *tx;
	uint16_t *tx_free;
	unsigned ntx_free;
	unsigned tx_requeued;   /* send slots re-queued since the last submit */
	bool use_sendmsg;       /* SENDMSG, not SEND with an address (< 6.0) */
	bool send_proven;       /* a SEND with an address has succeeded */

	struct rx_done *done;   /* FIFO of receive completions: room for every
				 * provided buffer (done_cap == nbufs) or receive slot */
	unsigned done_cap, done_head, done_n;
	int rx_err;             /* a receive error to report, 0 none */

	/* multishot RECVMSG into the provided-buffer ring */
	bool mshot;             /* this way (else one RECVMSG per datagram) */
	bool armed;             /* the multishot request is in the kernel */
	bool mshot_worked;      /* it completed with data at least once */
	struct io_uring_buf_ring *br;
	size_t br_bytes;
	uint8_t *bufs;
	unsigned nbufs, buf_len;
	uint16_t *ret;          /* buffers handed out by the last call */
	unsigned nret;
	struct msghdr mmh;      /* the layout of a buffer: name, control */

	/* one RECVMSG per datagram */
	uint16_t *repost;       /* receive slots to post again */
	unsigned nrepost;

	/* readiness: a multishot POLL_ADD, datagrams by recvmmsg */
	bool ready;             /* this way */
	bool poll_armed;        /* the poll request is in the kernel */
	bool poll_in;           /* the last enter reaped POLLIN */
	bool recheck;           /* a readiness was used: enter before trusting
				 * the flag again */
	bool more;              /* the last receive did not find the socket
				 * empty: receive again before anything else */
	bool poll_refused;      /* the kernel refused the poll: recvmmsg on
				 * every call, as the sockets backend */
};

static inline void sqe_fd(const struct uring *u, struct io_uring_sqe *sqe)
{
	if (u->fixed) {
		sqe->fd = 0;
		sqe->flags |= IOSQE_FIXED_FILE;
	}
}

/* A receive completion to hand out, after those before it. */
static inline void done_push(struct uring *u, uint16_t slot, int32_t res)
{
	unsigned tail = (u->done_head + u->done_n) % u->done_cap;
	u->done[tail].slot = slot;
	u->done[tail].res = res;
	u->done_n++;
}

/* The oldest receive completion not yet handed out (u->done_n > 0). */
static inline struct rx_done done_pop(struct uring *u)
{
	struct rx_done c = u->done[u->done_head];
	u->done_head = (u->done_head + 1) % u->done_cap;
	u->done_n--;
	return c;
}

/* The ')' that closes the description's "io_uring (...)" part (what
 * follows it, such as the impairment, is another part). */
static char *desc_end(struct flit_udp_io *io)
{
	int depth = 0;
	for (char *c = strchr(io->desc, '('); c && *c; c++) {
		depth += (*c == '(') - (*c == ')');
		if (depth == 0)
			return c;
	}
	return io->desc + strlen(io->desc);
}

/* Put `text` in the description's io_uring part from `from` (inside it) to
 * its closing ')', keeping that and what follows: a fallback says what the
 * backend does now. */
static void desc_splice(struct flit_udp_io *io, char *from, const char *text)
{
	char tail[sizeof(io->desc)];
	snprintf(tail, sizeof(tail), "%s", desc_end(io));
	snprintf(from, sizeof(io->desc) - (size_t)(from - io->desc), "%s%s", text, tail);
}

/* One RECVMSG per datagram: every receive slot to be posted. */
static void single_queue_all(struct flit_udp_io *io)
{
	for (unsigned i = 0; i < io->batch; i++)
		io->u->repost[io->u->nrepost++] = (uint16_t)i;
}

/* ---- receive: one multishot RECVMSG --------------------------------------------- */

static inline uint8_t *mbuf(const struct uring *u, unsigned bid)
{
	return u->bufs + (size_t)bid * u->buf_len;
}

/* Give the buffers handed out by the last call back to the kernel. */
static void mshot_return(struct uring *u)
{
	int mask = io_uring_buf_ring_mask(u->nbufs);
	for (unsigned i = 0; i < u->nret; i++)
		io_uring_buf_ring_add(u->br, mbuf(u, u->ret[i]), u->buf_len, u->ret[i], mask,
				      (int)i);
	io_uring_buf_ring_advance(u->br, (int)u->nret);
	u->nret = 0;
}

static bool mshot_arm(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	if (FLIT_UNLIKELY(!sqe))
		return false;
	/* MSG_TRUNC: the header's payloadlen is the datagram's real length */
	io_uring_prep_recvmsg_multishot(sqe, io->fd, &u->mmh, MSG_TRUNC);
	sqe_fd(u, sqe);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	io_uring_sqe_set_data64(sqe, UD_MSHOT);
	u->armed = true;
	return true;
}

/* A completion of the multishot request (in the CQ walk). */
static unsigned mshot_cqe(struct flit_udp_io *io, const struct io_uring_cqe *cqe)
{
	struct uring *u = io->u;
	int res = cqe->res;

	if (!(cqe->flags & IORING_CQE_F_MORE))
		u->armed = false;  /* ended: the next recv re-arms it */
	if (FLIT_LIKELY(cqe->flags & IORING_CQE_F_BUFFER)) {
		done_push(u, (uint16_t)(cqe->flags >> IORING_CQE_BUFFER_SHIFT), res);
		u->mshot_worked = true;
		return 1;
	}
	if (res == -ENOBUFS || res == -EAGAIN || res == -EINTR || res == -ECANCELED || res >= 0)
		return 0;
	if (res == -EINVAL && !u->mshot_worked) {
		/* a kernel with provided-buffer rings but no multishot
		 * RECVMSG (5.19): one RECVMSG per datagram from now on */
		u->mshot = false;
		single_queue_all(io);
		/* the description said multishot: say what it is now */
		char *m = strstr(io->desc, ", multishot recvmsg");
		if (m)
			desc_splice(io, m, ", one recvmsg per datagram (the kernel refused a "
				    "multishot recvmsg: 6.0+)");
		return 0;
	}
	if (uio_icmp_class(-res) || res == -EMSGSIZE)
		io->st.tx_errors++;
	else if (!u->rx_err)
		u->rx_err = res;
	return 0;
}

/* Hand out up to n views from the completions received.  *dropped: some
 * were not deliverable (truncated). */
static int mshot_take(struct flit_udp_io *io, struct flit_dgram *d, unsigned n, bool *dropped)
{
	struct uring *u = io->u;
	int out = 0;

	while ((unsigned)out < n && u->done_n) {
		struct rx_done c = done_pop(u);
		u->ret[u->nret++] = c.slot;   /* back to the kernel next call */
		struct io_uring_recvmsg_out *o =
			c.slot < u->nbufs ? io_uring_recvmsg_validate(mbuf(u, c.slot), c.res, &u->mmh)
					  : NULL;
		if (FLIT_UNLIKELY(!o || (o->flags & MSG_TRUNC) || o->payloadlen > io->dgram_max ||
				  o->payloadlen > io_uring_recvmsg_payload_length(o, c.res, &u->mmh))) {
			io->st.rx_truncated++;
			*dropped = true;
			continue;
		}
		struct flit_dgram *g = &d[out++];
		g->buf = io_uring_recvmsg_payload(o, &u->mmh);
		g->len = o->payloadlen;
		memset(&g->addr, 0, sizeof(g->addr));
		memcpy(&g->addr, io_uring_recvmsg_name(o),
		       o->namelen < sizeof(g->addr) ? o->namelen : sizeof(g->addr));
		g->rx_ts_ns = 0;
		g->rx_ts_hw_ns = 0;
		if (io->timestamps)
			for (struct cmsghdr *cm = io_uring_recvmsg_cmsg_firsthdr(o, &u->mmh); cm;
			     cm = io_uring_recvmsg_cmsg_nexthdr(o, &u->mmh, cm))
				uio_parse_ts_cmsg(cm, g);
		io->st.rx_dgrams++;
		io->st.rx_bytes += g->len;
	}
	return out;
}

/* ---- receive: one RECVMSG per datagram ------------------------------------------- */

static struct io_uring_sqe *post_recv(struct flit_udp_io *io, unsigned slot)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->u->ring);
	if (FLIT_UNLIKELY(!sqe))
		return NULL;
	uio_rx_reset_hdr(io, slot);
	/* MSG_TRUNC: the completion gives the datagram's real length */
	io_uring_prep_recvmsg(sqe, io->fd, &io->rmsg[slot].msg_hdr, MSG_TRUNC);
	sqe_fd(io->u, sqe);
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
static void flush_reposts(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	struct io_uring_sqe *prev = NULL;
	unsigned k = 0, m = u->nrepost;

	while (k < m) {
		struct io_uring_sqe *sqe = post_recv(io, u->repost[k]);
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

static int single_take(struct flit_udp_io *io, struct flit_dgram *d, unsigned n, bool *dropped)
{
	struct uring *u = io->u;
	int out = 0;

	while ((unsigned)out < n && u->done_n) {
		struct rx_done c = done_pop(u);
		u->repost[u->nrepost++] = c.slot;
		if (FLIT_LIKELY(c.res >= 0 && (unsigned)c.res <= io->dgram_max &&
				!(io->rmsg[c.slot].msg_hdr.msg_flags & MSG_TRUNC))) {
			uio_rx_fill(io, c.slot, (uint32_t)c.res, &d[out++]);
			continue;
		}
		*dropped = true;
		if (c.res >= 0)
			io->st.rx_truncated++;
		else if (uio_icmp_class(-c.res) || c.res == -EMSGSIZE)
			io->st.tx_errors++;
		else if (c.res != -EAGAIN && c.res != -EINTR && c.res != -ECANCELED &&
			 c.res != -ENOBUFS && !u->rx_err)
			u->rx_err = c.res;
	}
	return out;
}

/* ---- the ring ----------------------------------------------------------------------- */

/* A SEND with its destination in the SQE (6.0): no msghdr for the kernel
 * to copy in.  Before 6.0 the kernel refuses the address (-EINVAL on the
 * first send), and SENDMSG is used from then on. */
static bool post_send(struct flit_udp_io *io, unsigned slot)
{
	struct uring *u = io->u;
	struct tx_slot *t = &u->tx[slot];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	if (FLIT_UNLIKELY(!sqe))
		return false;
	if (FLIT_LIKELY(!u->use_sendmsg)) {
		io_uring_prep_send(sqe, io->fd, t->iov.iov_base, t->iov.iov_len, 0);
		if (t->addr.sin_family)
			io_uring_prep_send_set_addr(sqe, (const struct sockaddr *)&t->addr,
						    sizeof(t->addr));
	} else {
		io_uring_prep_sendmsg(sqe, io->fd, &t->mh, 0);
	}
	sqe_fd(u, sqe);
	io_uring_sqe_set_data64(sqe, UD_SEND | slot);
	return true;
}

/* Move every completion in the CQ to where it belongs: send slots back to
 * the free list (or re-queued once after an ICMP-class error), receives to
 * the FIFO.  No syscall.  Returns how many receives completed. */
static unsigned reap(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0, rx = 0;

	io_uring_for_each_cqe(&u->ring, head, cqe) {
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		seen++;
		if (ud == UD_MSHOT) {
			rx += mshot_cqe(io, cqe);
		} else if (ud == UD_POLL) {
			if (!(cqe->flags & IORING_CQE_F_MORE))
				u->poll_armed = false;  /* re-armed by the next recv */
			if (cqe->res > 0 && (cqe->res & (POLLIN | POLLERR)))
				u->poll_in = true;
			if (FLIT_UNLIKELY(cqe->res < 0 && cqe->res != -ECANCELED && !u->poll_refused)) {
				/* no multishot poll here (5.13+): what the
				 * sockets backend does, said so */
				char why[160];
				u->poll_refused = true;
				snprintf(why, sizeof(why), ", readiness asked but the kernel refused a "
					 "multishot poll (%s; 5.13+): recvmmsg on every call",
					 strerror(-cqe->res));
				char *m = strstr(io->desc, ", readiness by a multishot poll");
				desc_splice(io, m ? m : desc_end(io), why);
			}
		} else if (ud & UD_SEND) {
			unsigned s = (unsigned)(ud & (UD_SEND - 1));
			int res = cqe->res;
			if (FLIT_UNLIKELY(res == -EINVAL && !u->send_proven && !u->use_sendmsg)) {
				/* a kernel before 6.0: no address in a SEND */
				u->use_sendmsg = true;
				desc_splice(io, desc_end(io), ", sendmsg: the kernel refused a "
					    "send with an address (6.0+)");
				if (post_send(io, s)) {
					u->tx_requeued++;
					continue;
				}
			}
			if (FLIT_LIKELY(res >= 0))
				u->send_proven = true;
			if (FLIT_UNLIKELY(res < 0)) {
				io->st.tx_errors++;
				if (res == -EAGAIN)
					io->st.tx_eagain++;
				if (uio_icmp_class(-res) && !u->tx[s].retried) {
					u->tx[s].retried = true;
					if (post_send(io, s)) {
						u->tx_requeued++;
						continue;
					}
				}
			}
			u->tx_free[u->ntx_free++] = (uint16_t)s;
		} else {
			done_push(u, (uint16_t)ud, cqe->res);
			rx++;
		}
	}
	io_uring_cq_advance(&u->ring, seen);
	return rx;
}

static bool need_enter(const struct uring *u)
{
	return io_uring_sq_ready(&u->ring) || u->maybe_more ||
	       (IO_URING_READ_ONCE(*u->ring.sq.kflags) &
		(IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW));
}

/* Enter once: submit what is queued and run pending completions
 * (DEFER_TASKRUN only posts them from inside io_uring_enter). */
static int enter(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	int r = io_uring_submit_and_get_events(&u->ring);
	io->st.syscalls++;
	if (FLIT_UNLIKELY(r < 0) && r != -EINTR && r != -EAGAIN && r != -EBUSY)
		return flit_err(-r, "udp io: io_uring_enter on fd %d", io->fd);
	u->tx_requeued = 0;
	/* DEFER_TASKRUN (6.13+) runs a bounded amount of task work per enter
	 * (20 items) and clears IORING_SQ_TASKRUN first, so what is left is
	 * not flagged.  This ring has at most a few items pending (its one
	 * multishot receive re-queues itself after 32 datagrams, flagged
	 * anew), but after an enter that brought a burst, look once more
	 * anyway.  A single datagram is not a burst: no second enter for it. */
	u->maybe_more = reap(io) >= MAYBE_MORE_RX;
	return 0;
}

/* Enable a ring made with R_DISABLED, binding it to this thread.  (No
 * registered ring fd: it would pin the ring, and the socket, to this
 * thread's lifetime if the object were closed from another thread.) */
static int enable(struct flit_udp_io *io)
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
static inline int check_thread(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	if (FLIT_UNLIKELY(!u->enabled))
		return enable(io);
	if (FLIT_UNLIKELY(u->single && !pthread_equal(u->owner, pthread_self())))
		return 1;
	return 0;
}

/* Readiness: the multishot poll on the socket (its completions are reaped
 * by enter(): poll_in, poll_armed). */
static bool poll_arm(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	if (FLIT_UNLIKELY(!sqe))
		return false;
	io_uring_prep_poll_multishot(sqe, io->fd, POLLIN);
	sqe_fd(u, sqe);
	io_uring_sqe_set_data64(sqe, UD_POLL);
	u->poll_armed = true;
	return true;
}

/*
 * A receive told by readiness.  A datagram's arrival wakes the armed poll,
 * which queues its task work and sets IORING_SQ_TASKRUN: the flag is seen
 * without a system call, and the datagrams are taken at once by recvmmsg,
 * as the sockets backend takes them (the poll's task work, which only
 * looks at the socket, waits).  The poll tells of arrivals, not of what
 * waits: until a receive finds the socket empty (fewer than asked, or
 * EAGAIN) the next call receives again.  Then the next call enters: the
 * task work runs, the flag clears, the poll waits again, and what it saw
 * (POLLIN: more came after that receive) says whether to receive.
 * Nothing pending, the flag clear: no system call.
 */
static int ready_recv(struct flit_udp_io *io, struct flit_dgram *d, unsigned n)
{
	struct uring *u = io->u;
	bool dry;

	if (FLIT_UNLIKELY(u->poll_refused))
		return uio_sock_recv(io, d, n, NULL);
	if (u->more) {
		/* what the last receive left */
	} else if (u->recheck || !u->poll_armed) {
		u->recheck = false;
		if (!u->poll_armed && !poll_arm(io))
			return flit_err(EOVERFLOW, "udp io: io_uring SQ full on fd %d", io->fd);
		int r = enter(io);
		if (r < 0)
			return r;
		if (!u->poll_in)
			return 0;
	} else if (FLIT_LIKELY(!u->poll_in && !(IO_URING_READ_ONCE(*u->ring.sq.kflags) &
						 (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)))) {
		/* (poll_in: an enter of a send through the ring ran the task
		 * work and cleared the flag) */
		return 0;
	}
	u->poll_in = false;
	u->recheck = true;
	int r = uio_sock_recv(io, d, n, &dry);
	u->more = !dry && r >= 0;
	return r;
}

int uio_uring_recv(struct flit_udp_io *io, struct flit_dgram *d, unsigned n)
{
	struct uring *u = io->u;
	int out = 0;

	int rc = check_thread(io);
	if (FLIT_UNLIKELY(rc != 0))
		return rc < 0 ? rc : flit_err(EEXIST, "udp io: io_uring object of fd %d received "
					       "on from a thread other than the one that first "
					       "used it (SINGLE_ISSUER)", io->fd);
	if (u->ready)
		return ready_recv(io, d, n);
	for (int tries = 0; tries < UIO_RECV_TRIES; tries++) {
		bool dropped = false;

		/* the views handed out by the previous call expire now */
		if (u->mshot) {
			if (u->nret)
				mshot_return(u);
			/* (re-)arm when it ended and a buffer is free */
			if (FLIT_UNLIKELY(!u->armed) && u->done_n < u->nbufs)
				mshot_arm(io);
		} else if (u->nrepost) {
			flush_reposts(io);
		}
		if (need_enter(u)) {
			int r = enter(io);
			if (r < 0)
				return r;
		} else if (FLIT_UNLIKELY(io_uring_cq_ready(&u->ring))) {
			reap(io);
		}
		out = u->mshot ? mshot_take(io, d, n, &dropped) : single_take(io, d, n, &dropped);
		if (out > 0 || !dropped || u->rx_err)
			break;
	}
	if (out)
		return out;
	if (FLIT_UNLIKELY(u->rx_err)) {
		int e = u->rx_err;
		u->rx_err = 0;
		return flit_err(-e, "udp io: io_uring recvmsg on fd %d", io->fd);
	}
	return 0;
}

/* ---- send ----------------------------------------------------------------------------- */

static int send_one_direct(struct flit_udp_io *io, const struct flit_dgram *g)
{
	struct msghdr mh = { 0 };
	struct iovec iov = { g->buf, g->len };

	uio_tx_set_name(&mh, &g->addr);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	for (int tries = 0; tries < 2; tries++) {
		ssize_t r = sendmsg(io->fd, &mh, MSG_DONTWAIT);
		io->st.syscalls++;
		if (r >= 0)
			return 1;
		if (errno == EINTR)
			continue;
		if (uio_icmp_class(errno) && tries == 0) {
			io->st.tx_errors++;
			continue;
		}
		break;
	}
	return -errno;
}

int uio_uring_send(struct flit_udp_io *io, const struct flit_dgram *d, unsigned n)
{
	struct uring *u = io->u;
	unsigned taken = 0, queued = 0;

	/* the default: through the socket, the ring untouched (not bound to
	 * this thread either) */
	if (!u->ring_send)
		return uio_sock_send(io, d, n);
	int rc = check_thread(io);
	if (FLIT_UNLIKELY(rc < 0))
		return rc;
	/* Another thread than the ring's (say a service thread sending for a
	 * source, under the caller's lock): it cannot enter the ring, so it
	 * sends straight through the socket. */
	if (FLIT_UNLIKELY(rc > 0))
		return uio_sock_send(io, d, n);
	while (taken < n) {
		const struct flit_dgram *g = &d[taken];

		if (FLIT_UNLIKELY(g->len > u->tx_stride)) {
			/* larger than a send slot: straight to the kernel,
			 * after what is queued before it */
			if (io_uring_sq_ready(&u->ring)) {
				int r = enter(io);
				if (r < 0)
					return taken ? (int)taken : r;
				queued = 0;
			}
			int r = send_one_direct(io, g);
			if (r == -EAGAIN || r == -EWOULDBLOCK) {
				io->st.tx_eagain++;
				break;
			}
			if (r < 0 && (uio_icmp_class(-r) || uio_tx_dropped_class(-r))) {
				io->st.tx_errors++;
			} else if (r < 0) {
				if (taken)
					break;
				char a[32];
				return flit_err(-r, "udp io: sendmsg of %u bytes to %s on fd %d",
						(unsigned)g->len, uio_addr_str(&g->addr, a, sizeof(a)),
						io->fd);
			} else {
				io->st.tx_dgrams++;
				io->st.tx_bytes += g->len;
			}
			taken++;
			continue;
		}
		if (FLIT_UNLIKELY(!u->ntx_free)) {
			reap(io);
			if (!u->ntx_free && (queued || need_enter(u))) {
				int r = enter(io);
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
		uio_tx_set_name(&t->mh, &t->addr);
		t->retried = false;
		if (FLIT_UNLIKELY(!post_send(io, s))) {
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
		int r = enter(io);
		if (r < 0)
			return taken ? (int)taken : r;
		/* send once more any that an ICMP error for an earlier
		 * datagram failed (error path only) */
		if (FLIT_UNLIKELY(u->tx_requeued)) {
			r = enter(io);
			if (r < 0)
				return taken ? (int)taken : r;
		}
	}
	return (int)taken;
}

/* ---- open and close ---------------------------------------------------------------- */

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

static unsigned pow2_at_least(unsigned v)
{
	unsigned p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

/* The provided-buffer ring of the multishot receive.  0, or the errno
 * that says this ring cannot have one (the caller falls back). */
static int mshot_setup(struct flit_udp_io *io)
{
	struct uring *u = io->u;
	long page = sysconf(_SC_PAGESIZE);

	u->mmh.msg_namelen = sizeof(struct sockaddr_in);
	u->mmh.msg_controllen = io->ctl_len;
	u->buf_len = (unsigned)(sizeof(struct io_uring_recvmsg_out) + u->mmh.msg_namelen +
				u->mmh.msg_controllen + io->dgram_max);
	u->buf_len = (u->buf_len + 63u) & ~63u;
	u->nbufs = u->done_cap;   /* the FIFO holds a completion per buffer */
	u->br_bytes = ((size_t)u->nbufs * sizeof(struct io_uring_buf) + (size_t)page - 1) &
		      ~((size_t)page - 1);
	u->br = mmap(NULL, u->br_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (u->br == MAP_FAILED) {
		u->br = NULL;
		return errno;
	}
	u->bufs = aligned_alloc(64, (size_t)u->nbufs * u->buf_len);
	u->ret = uio_zalloc(u->nbufs * sizeof(*u->ret));
	if (!u->bufs || !u->ret)
		return ENOMEM;
	struct io_uring_buf_reg reg = { .ring_addr = (unsigned long)(uintptr_t)u->br,
					.ring_entries = u->nbufs, .bgid = BGID };
	int r = io_uring_register_buf_ring(&u->ring, &reg, 0);
	io->st.syscalls++;
	if (r < 0)
		return -r;
	io_uring_buf_ring_init(u->br);
	for (unsigned i = 0; i < u->nbufs; i++)
		u->ret[u->nret++] = (uint16_t)i;
	mshot_return(u);
	return 0;
}

int uio_uring_open(struct flit_udp_io *io, const struct flit_udp_io_cfg *cfg)
{
	struct uring *u = uio_zalloc(sizeof(*u));
	if (!u)
		return flit_err(ENOMEM, "udp io: io_uring state");
	io->u = u;

	u->ring_send = cfg->uring_ring_send;
	u->nslots = u->ring_send ? io->batch : 0;
	u->tx_stride = (io->dgram_max + 63u) & ~63u;
	if (u->nslots) {
		u->txbuf = aligned_alloc(64, (size_t)u->nslots * u->tx_stride);
		u->tx = uio_zalloc(u->nslots * sizeof(*u->tx));
		u->tx_free = uio_zalloc(u->nslots * sizeof(*u->tx_free));
		if (!u->txbuf || !u->tx || !u->tx_free)
			return flit_err(ENOMEM, "udp io: io_uring send slots (%u of %u bytes)",
					u->nslots, u->tx_stride);
	}
	u->done_cap = io->batch > NBUFS_MIN ? pow2_at_least(io->batch) : NBUFS_MIN;
	u->done = uio_zalloc(u->done_cap * sizeof(*u->done));
	u->repost = uio_zalloc(io->batch * sizeof(*u->repost));
	if (!u->done || !u->repost)
		return flit_err(ENOMEM, "udp io: io_uring receive state (%u completions)", u->done_cap);
	for (unsigned s = 0; s < u->nslots; s++) {
		struct tx_slot *t = &u->tx[s];
		t->iov.iov_base = u->txbuf + (size_t)s * u->tx_stride;
		t->mh.msg_iov = &t->iov;
		t->mh.msg_iovlen = 1;
		u->tx_free[s] = (uint16_t)(u->nslots - 1 - s);
	}
	u->ntx_free = u->nslots;

	/* The SQ holds every request that can be outstanding (a receive per
	 * slot in the fallback, a send per slot); the CQ every completion:
	 * one per provided buffer and per send slot, twice over. */
	unsigned entries = pow2_at_least(io->batch + u->nslots + 1);
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		  IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE;
	p.cq_entries = 2 * pow2_at_least(u->done_cap + u->nslots);
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
	u->single = p.flags & IORING_SETUP_SINGLE_ISSUER;
	u->enabled = !(p.flags & IORING_SETUP_R_DISABLED);

	int l = snprintf(io->desc, sizeof(io->desc), "io_uring (%s",
			 (p.flags & IORING_SETUP_DEFER_TASKRUN)
				 ? "defer_taskrun, single_issuer"
				 : "plain setup: the kernel refused defer_taskrun, single_issuer");
	/* the socket as registered file 0 (5.1): no file lookup per request */
	r = io_uring_register_files(&u->ring, &io->fd, 1);
	io->st.syscalls++;
	u->fixed = r == 0;
	l += snprintf(io->desc + l, sizeof(io->desc) - (size_t)l, "%s%s",
		      u->fixed ? ", registered file" : ", file not registered",
		      u->ring_send ? ", sends: SEND through the ring" : ", sends: sendmmsg on the socket");
	u->ready = !io->tx_only && !cfg->uring_single_recv && cfg->uring_poll_recv;
	if (u->ready && !(p.flags & IORING_SETUP_TASKRUN_FLAG)) {
		/* readiness is IORING_SQ_TASKRUN, set only with TASKRUN_FLAG
		 * (a plain ring here): the multishot RECVMSG instead */
		u->ready = false;
		l += snprintf(io->desc + l, sizeof(io->desc) - (size_t)l,
			      ", readiness asked but a plain ring has no taskrun_flag: "
			      "multishot recvmsg");
	}
	if (u->ready) {
		l += snprintf(io->desc + l, sizeof(io->desc) - (size_t)l,
			      ", readiness by a multishot poll, datagrams by recvmmsg");
	} else if (!io->tx_only) {
		int e = cfg->uring_single_recv ? -1 : mshot_setup(io);
		u->mshot = e == 0;
		if (u->mshot)
			l += snprintf(io->desc + l, sizeof(io->desc) - (size_t)l,
				      ", multishot recvmsg into %u provided buffers", u->nbufs);
		else if (e < 0)
			l += snprintf(io->desc + l, sizeof(io->desc) - (size_t)l,
				      ", one recvmsg per datagram (asked)");
		else
			l += snprintf(io->desc + l, sizeof(io->desc) - (size_t)l,
				      ", one recvmsg per datagram (no provided-buffer ring: %s; "
				      "needs 5.19)", strerror(e));
	}
	snprintf(io->desc + l, sizeof(io->desc) - (size_t)l, ")");
	if (u->ready) {
		u->recheck = true;   /* the first recv arms the poll and looks */
	} else if (!io->tx_only) {
		if (u->mshot) {
			mshot_arm(io);
		} else {
			single_queue_all(io);
			flush_reposts(io);
			if (u->nrepost)
				return flit_err(EOVERFLOW, "udp io: io_uring SQ too small (%u)", entries);
		}
	}
	return 0;
}

void uio_uring_close(struct uring *u)
{
	if (!u)
		return;
	if (u->ring_ok)
		io_uring_queue_exit(&u->ring);
	if (u->br)
		munmap(u->br, u->br_bytes);
	free(u->bufs);
	free(u->ret);
	free(u->txbuf);
	free(u->tx);
	free(u->tx_free);
	free(u->done);
	free(u->repost);
	free(u);
}
