// SPDX-License-Identifier: BSD-2-Clause
/*
 * Datagram I/O for the udp transport (see udp_io.h): the io object, the
 * sockets backend (recvfrom/recvmmsg, sendto/sendmmsg, MSG_DONTWAIT), the
 * helpers both backends share, and the public calls, which hand over to
 * the io_uring backend (uring_io.c) when it is chosen, under the
 * receive-side impairment of dgram/ when it is on.
 *
 * Everything the steady-state path touches is allocated at open: receive
 * buffers of dgram_max bytes (one per batch entry) with their iovecs,
 * addresses, control space and message headers.  A recv or send call then
 * makes at most one syscall, unless an error or a partial send makes it
 * retry.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/net_tstamp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "udp/udp_io_impl.h"

/* SCM_TIMESTAMPING payload (struct scm_timestamping of linux/errqueue.h,
 * declared here to keep that header's struct timespec out of our way). */
struct scm_ts3 {
	struct timespec ts[3];
};

/* ---- helpers ------------------------------------------------------------ */

static unsigned min_u(unsigned a, unsigned b)
{
	return a < b ? a : b;
}

const char *uio_addr_str(const struct sockaddr_in *a, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)&a->sin_addr.s_addr;
	snprintf(buf, len, "%u.%u.%u.%u:%u", p[0], p[1], p[2], p[3],
		 (unsigned)ntohs(a->sin_port));
	return buf;
}

/* Errors that an ICMP message for an earlier datagram can leave on the
 * socket (or that one destination, not the socket, causes): they must not
 * wedge sending to everybody else. */
bool uio_icmp_class(int e)
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
bool uio_tx_dropped_class(int e)
{
	return e == ENOBUFS || e == EPERM;
}

static uint64_t ts_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

void uio_parse_ts_cmsg(const struct cmsghdr *c, struct flit_dgram *d)
{
	if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING &&
	    c->cmsg_len >= CMSG_LEN(sizeof(struct scm_ts3))) {
		struct scm_ts3 t;
		memcpy(&t, CMSG_DATA(c), sizeof(t));
		d->rx_ts_ns = ts_ns(&t.ts[0]);
		d->rx_ts_hw_ns = ts_ns(&t.ts[2]);
	}
}

static void parse_ts(const struct msghdr *mh, struct flit_dgram *d)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR((struct msghdr *)mh, c))
		uio_parse_ts_cmsg(c, d);
}

/* Fill d from receive slot i, len bytes. */
void uio_rx_fill(struct flit_udp_io *io, unsigned i, uint32_t len,
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

void uio_rx_reset_hdr(struct flit_udp_io *io, unsigned i)
{
	struct msghdr *mh = &io->rmsg[i].msg_hdr;
	mh->msg_namelen = sizeof(struct sockaddr_in);
	mh->msg_controllen = io->ctl_len;
	mh->msg_flags = 0;
}

/* Destination for a send: sin_family 0 means "the connected peer". */
void uio_tx_set_name(struct msghdr *mh, const struct sockaddr_in *a)
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
	if (uio_icmp_class(e) || e == EMSGSIZE) {
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
static int sock_recv1(struct flit_udp_io *io, struct flit_dgram *d, bool *dry)
{
	for (int tries = 0; tries < UIO_RECV_TRIES; tries++) {
		socklen_t alen = sizeof(io->raddr[0]);
		ssize_t got = recvfrom(io->fd, io->rxbuf, io->dgram_max, MSG_DONTWAIT | MSG_TRUNC,
				       (struct sockaddr *)&io->raddr[0], &alen);
		io->st.syscalls++;
		if (FLIT_UNLIKELY(got < 0)) {
			int r = recv_failed(io, errno, "recvfrom");
			if (r == 1)
				continue;
			*dry = r == 0;
			return r;
		}
		if (FLIT_UNLIKELY((size_t)got > io->dgram_max)) {
			io->st.rx_truncated++;
			continue;
		}
		uio_rx_fill(io, 0, (uint32_t)got, d);
		return 1;
	}
	return 0;
}

int uio_sock_recv(struct flit_udp_io *io, struct flit_dgram *d, unsigned n, bool *dry)
{
	unsigned want = min_u(n, io->batch);
	int out = 0;
	bool dry_ = false;

	if (!dry)
		dry = &dry_;
	*dry = false;
	if (want == 1 && !io->timestamps)
		return sock_recv1(io, d, dry);
	for (int tries = 0; tries < UIO_RECV_TRIES; tries++) {
		for (unsigned i = 0; i < want; i++)
			uio_rx_reset_hdr(io, i);
		int got = recvmmsg(io->fd, io->rmsg, want, MSG_DONTWAIT | MSG_TRUNC, NULL);
		io->st.syscalls++;
		if (FLIT_UNLIKELY(got < 0)) {
			int r = recv_failed(io, errno, "recvmmsg");
			if (r == 1)
				continue;
			*dry = r == 0;
			return r;
		}
		/* fewer than asked: the queue ran dry (MSG_DONTWAIT) */
		*dry = (unsigned)got < want;
		for (int i = 0; i < got; i++) {
			const struct mmsghdr *m = &io->rmsg[i];
			if (FLIT_UNLIKELY(m->msg_len > io->dgram_max ||
					  (m->msg_hdr.msg_flags & MSG_TRUNC))) {
				io->st.rx_truncated++;
				continue;
			}
			uio_rx_fill(io, (unsigned)i, m->msg_len, &d[out++]);
		}
		if (FLIT_LIKELY(out > 0 || (unsigned)got < want))
			break;
	}
	return out;
}

int uio_sock_send(struct flit_udp_io *io, const struct flit_dgram *d, unsigned n)
{
	unsigned taken = 0;
	bool retried = false;   /* d[taken] already retried after an ICMP error */

	while (taken < n) {
		unsigned k = min_u(n - taken, io->batch);
		for (unsigned i = 0; i < k; i++) {
			const struct flit_dgram *g = &d[taken + i];
			io->siov[i].iov_base = g->buf;
			io->siov[i].iov_len = g->len;
			uio_tx_set_name(&io->smsg[i].msg_hdr, &g->addr);
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
		if (uio_icmp_class(e) || uio_tx_dropped_class(e)) {
			io->st.tx_errors++;
			/* An ICMP error left by an earlier datagram fails
			 * this one once: retry it.  If it fails again the
			 * error is its own: count it as sent and go on. */
			if (uio_icmp_class(e) && !retried) {
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
					(unsigned)d[0].len, uio_addr_str(&d[0].addr, a, sizeof(a)),
					io->fd);
		}
		break;  /* the next call reports it on its first datagram */
	}
	return (int)taken;
}

/* the backend's receive, under the impairment (flit_dgram_recv_fn) */
static int backend_recv(void *arg, struct flit_dgram *d, unsigned n)
{
	struct flit_udp_io *io = arg;
	return io->backend == FLIT_UDP_URING ? uio_uring_recv(io, d, n) : uio_sock_recv(io, d, n, NULL);
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
	if (cfg->batch < 1 || cfg->batch > UIO_BATCH_MAX) {
		r = flit_err(EINVAL, "udp io: batch %u out of range 1..%u", cfg->batch, UIO_BATCH_MAX);
		goto fail;
	}
	if (cfg->dgram_max < 1 || cfg->dgram_max > UIO_DGRAM_MAX) {
		r = flit_err(EINVAL, "udp io: dgram_max %u out of range 1..%u",
			     cfg->dgram_max, UIO_DGRAM_MAX);
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

	io = uio_zalloc(sizeof(*io));
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
	io->ctl_len = cfg->timestamps ? UIO_RX_CTL_LEN : 0;

	io->rxbuf = aligned_alloc(64, (size_t)io->batch * io->stride);
	io->rmsg = uio_zalloc(io->batch * sizeof(*io->rmsg));
	io->riov = uio_zalloc(io->batch * sizeof(*io->riov));
	io->raddr = uio_zalloc(io->batch * sizeof(*io->raddr));
	io->rctl = cfg->timestamps ? aligned_alloc(16, (size_t)io->batch * UIO_RX_CTL_LEN) : NULL;
	io->smsg = uio_zalloc(io->batch * sizeof(*io->smsg));
	io->siov = uio_zalloc(io->batch * sizeof(*io->siov));
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
		mh->msg_control = io->rctl ? io->rctl + (size_t)i * UIO_RX_CTL_LEN : NULL;
		mh->msg_controllen = io->ctl_len;
		io->smsg[i].msg_hdr.msg_iov = &io->siov[i];
		io->smsg[i].msg_hdr.msg_iovlen = 1;
	}

	if (io->backend == FLIT_UDP_URING) {
		r = uio_uring_open(io, cfg);
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
	uio_uring_close(io->u);
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
	return io->backend == FLIT_UDP_URING ? uio_uring_send(io, d, n) : uio_sock_send(io, d, n);
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
