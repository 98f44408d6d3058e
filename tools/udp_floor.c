// SPDX-License-Identifier: BSD-2-Clause
/*
 * The floor of a udp path (flit-floor --lines udp): a UDP ping-pong between
 * this process and a forked peer with the bare calls flit's udp transport
 * makes, without the library, so that flit-pong -t udp on either backend
 * has the same path's floor beside it.
 *
 *   sockets   recvfrom(MSG_DONTWAIT) in a spin, sendto()
 *   io_uring  DEFER_TASKRUN + SINGLE_ISSUER + TASKRUN_FLAG ring, the socket as
 *             registered file 0, one multishot RECVMSG into a ring of 64
 *             provided buffers, sendto(); the spin reads the ring's flags
 *             and enters only when the kernel has work pending (what
 *             transports/udp/uring_io.c does by default)
 *   +poll     instead of the RECVMSG a multishot POLL_ADD: the flag seen,
 *             recvfrom() takes the datagram, the next look enters to run
 *             the poll's task work (context.udp.uring_recv = poll)
 *   +ring-send  SEND with the destination in the SQE instead of sendto()
 *             (context.udp.uring_send = ring; what "io_uring" was before
 *             2026-12-02)
 *
 * The ping binds port+1, the pong port (so that both can share a network
 * namespace); the pong answers whoever sent.  Timing by the ping only, with
 * the fenced TSC reads of flit-pong.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool.h"
#include "udp/uring_compat.h"

#define NBUF    64u
#define BUFLEN  2048u
#define UD_RECV 1u
#define UD_SEND 2u
#define UD_POLL 3u

struct uend {
	int fd;
	bool uring, poll_recv, ring_send;
	bool recheck;               /* +poll: a readiness was used: enter next */
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	uint8_t *bufs;
	struct msghdr mh;           /* multishot layout: the sender's address */
	struct sockaddr_in from;    /* sender of the last datagram */
	uint8_t buf[BUFLEN];
};

static int end_open(struct uend *e, const struct udp_floor *f, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	memset(e, 0, sizeof(*e));
	e->uring = f->uring;
	e->poll_recv = f->uring && f->poll_recv;
	e->ring_send = f->uring && f->ring_send;
	e->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (e->fd < 0 || bind(e->fd, (struct sockaddr *)&a, sizeof(a)))
		return -errno;
	if (!e->uring)
		return 0;
	struct io_uring_params p = { .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
					      IORING_SETUP_TASKRUN_FLAG };
	int r = io_uring_queue_init_params(64, &e->ring, &p);
	if (r < 0)
		return r;
	if ((r = io_uring_register_files(&e->ring, &e->fd, 1)) < 0)
		return r;
	e->br = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	e->bufs = malloc((size_t)NBUF * BUFLEN);
	if (e->br == MAP_FAILED || !e->bufs)
		return -ENOMEM;
	struct io_uring_buf_reg reg = { .ring_addr = (unsigned long)(uintptr_t)e->br,
					.ring_entries = NBUF, .bgid = 0 };
	if ((r = io_uring_register_buf_ring(&e->ring, &reg, 0)) < 0)
		return r;
	io_uring_buf_ring_init(e->br);
	for (unsigned i = 0; i < NBUF; i++)
		io_uring_buf_ring_add(e->br, e->bufs + (size_t)i * BUFLEN, BUFLEN, (unsigned short)i,
				      (int)NBUF - 1, (int)i);
	io_uring_buf_ring_advance(e->br, NBUF);
	e->mh.msg_namelen = sizeof(struct sockaddr_in);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	if (e->poll_recv) {
		io_uring_prep_poll_multishot(sqe, 0, POLLIN);
		sqe->flags |= IOSQE_FIXED_FILE;
		io_uring_sqe_set_data64(sqe, UD_POLL);
	} else {
		io_uring_prep_recvmsg_multishot(sqe, 0, &e->mh, 0);
		sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
		sqe->buf_group = 0;
		io_uring_sqe_set_data64(sqe, UD_RECV);
	}
	r = io_uring_submit_and_get_events(&e->ring);
	return r < 0 ? r : 0;
}

static void end_close(struct uend *e)
{
	if (e->uring) {
		io_uring_queue_exit(&e->ring);
		if (e->br && e->br != MAP_FAILED)
			munmap(e->br, 4096);
		free(e->bufs);
	}
	if (e->fd >= 0)
		close(e->fd);
}

static int end_send(struct uend *e, const struct sockaddr_in *to, uint32_t size)
{
	if (!e->ring_send)
		return sendto(e->fd, e->buf, size, 0, (const struct sockaddr *)to, sizeof(*to)) < 0
			       ? -errno : 0;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_send(sqe, 0, e->buf, size, 0);
	io_uring_prep_send_set_addr(sqe, (const struct sockaddr *)to, sizeof(*to));
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, UD_SEND);
	int r = io_uring_submit_and_get_events(&e->ring);
	return r < 0 ? r : 0;
}

/* +poll: the poll's completions since the last enter (POLLIN: 1). */
static int poll_reap(struct uend *e)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	int in = 0, err = 0;
	io_uring_for_each_cqe(&e->ring, head, cqe) {
		seen++;
		if (cqe->res < 0 && !err)
			err = cqe->res;
		else if (io_uring_cqe_get_data64(cqe) == UD_POLL && (cqe->res & POLLIN))
			in = 1;
		if (io_uring_cqe_get_data64(cqe) == UD_POLL && !(cqe->flags & IORING_CQE_F_MORE) && !err)
			err = -ECANCELED;   /* not re-armed here */
	}
	io_uring_cq_advance(&e->ring, seen);
	return err ? err : in;
}

/* One look for a datagram: 1 got one (sender in e->from), 0 none, -errno. */
static int end_poll(struct uend *e)
{
	if (e->poll_recv) {
		/* as ready_recv() in transports/udp/uring_io.c, for one datagram
		 * at a time (the ping-pong has at most one in flight) */
		if (e->recheck) {
			e->recheck = false;
			int r = io_uring_get_events(&e->ring);
			if (r < 0 && r != -EINTR && r != -EAGAIN)
				return r;
			if ((r = poll_reap(e)) <= 0)
				return r;
		} else if (!(IO_URING_READ_ONCE(*e->ring.sq.kflags) & IORING_SQ_TASKRUN)) {
			return 0;
		}
		e->recheck = true;
	}
	if (!e->uring || e->poll_recv) {
		socklen_t al = sizeof(e->from);
		ssize_t n = recvfrom(e->fd, e->buf, BUFLEN, MSG_DONTWAIT,
				     (struct sockaddr *)&e->from, &al);
		if (n >= 0)
			return 1;
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
	}
	if (IO_URING_READ_ONCE(*e->ring.sq.kflags) & IORING_SQ_TASKRUN) {
		int r = io_uring_get_events(&e->ring);
		if (r < 0 && r != -EINTR && r != -EAGAIN)
			return r;
	}
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	int got = 0, err = 0;
	io_uring_for_each_cqe(&e->ring, head, cqe) {
		seen++;
		if (io_uring_cqe_get_data64(cqe) != UD_RECV) {
			if (cqe->res < 0 && !err)
				err = cqe->res;
			continue;
		}
		if (!(cqe->flags & IORING_CQE_F_MORE) && !err)
			err = cqe->res < 0 ? cqe->res : -ECANCELED;  /* not re-armed here */
		if (cqe->flags & IORING_CQE_F_BUFFER) {
			unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
			uint8_t *b = e->bufs + (size_t)bid * BUFLEN;
			struct io_uring_recvmsg_out *o = io_uring_recvmsg_validate(b, cqe->res, &e->mh);
			if (o)
				memcpy(&e->from, io_uring_recvmsg_name(o), sizeof(e->from));
			io_uring_buf_ring_add(e->br, b, BUFLEN, (unsigned short)bid, (int)NBUF - 1, 0);
			io_uring_buf_ring_advance(e->br, 1);
			got += o != NULL;
		}
	}
	io_uring_cq_advance(&e->ring, seen);
	return err ? err : got > 0;
}

/* Wait for one datagram for at most `ticks`: 1, 0 timed out, -errno. */
static int end_wait(struct uend *e, const struct tool_clock *clk, uint64_t ticks)
{
	uint64_t t0 = tool_now(clk);
	for (unsigned spins = 0;; spins++) {
		int r = end_poll(e);
		if (r)
			return r;
		if ((spins & 0x3ff) == 0 && tool_now(clk) - t0 > ticks)
			return 0;
	}
}

static noreturn void pong_main(const struct udp_floor *f, uint16_t port, uint64_t total)
{
	struct uend e;
	if (f->peer_netns)
		tool_netns_enter_name(f->peer_netns);
	tool_pin_or_fail(f->cpus[1]);
	int r = end_open(&e, f, port);
	if (r < 0)
		tool_fail("pong: %s socket on port %u: %s", f->uring ? "io_uring" : "udp",
			  (unsigned)port, strerror(-r));
	struct tool_clock clk;
	tool_clock_init(&clk);
	uint64_t wait = tool_ticks(&clk, (f->timeout_s + 2) * 1e9);
	for (uint64_t i = 0; i < total;) {
		r = end_wait(&e, &clk, wait);
		if (r <= 0)
			_exit(r < 0 ? 3 : 4);
		if (end_send(&e, &e.from, f->size))
			_exit(5);
		i++;
	}
	end_close(&e);
	_exit(0);
}

int udp_floor_run(const struct udp_floor *f, uint64_t warmup, uint64_t count, uint64_t *samples)
{
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(f->port) };
	if (inet_pton(AF_INET, f->peer, &peer.sin_addr) != 1)
		tool_fail("bad --peer '%s': an IPv4 address", f->peer);
	/* the first round trip (start-up) is warm-up in any case */
	uint64_t skip = warmup ? warmup : 1, total = skip + count;
	pid_t child = fork();
	if (child < 0)
		tool_fail("fork: %s", strerror(errno));
	if (child == 0) {
		tool_child_init(getppid());
		pong_main(f, f->port, total);
	}
	if (f->netns)
		tool_netns_enter_name(f->netns);
	tool_pin_or_fail(f->cpus[0]);
	struct uend e;
	int r = end_open(&e, f, (uint16_t)(f->port + 1));
	if (r < 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		tool_fail("ping: %s socket on port %u: %s", f->uring ? "io_uring" : "udp",
			  (unsigned)(f->port + 1), strerror(-r));
	}
	struct tool_clock clk;
	tool_clock_init(&clk);
	uint64_t limit = tool_ticks(&clk, f->timeout_s * 1e9), resend = tool_ticks(&clk, 20e6);
	uint64_t start = tool_now(&clk);
	int rc = 0;

	/* the first round trip: until the peer is up (a datagram sent before
	 * it bound its socket is lost), send again every 20 ms */
	for (;;) {
		if ((r = end_send(&e, &peer, f->size)) < 0) {
			rc = r;
			break;
		}
		r = end_wait(&e, &clk, resend);
		if (r != 0) {
			rc = r < 0 ? r : 0;
			break;
		}
		int cst;
		if (tool_now(&clk) - start > limit || tool_child_exited(child, &cst) != 0) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	for (uint64_t i = 1; i < total && rc == 0; i++) {
		uint64_t t0 = tool_now(&clk);
		if ((r = end_send(&e, &peer, f->size)) < 0) {
			rc = r;
			break;
		}
		r = end_wait(&e, &clk, limit);
		uint64_t t1 = tool_now(&clk);
		if (r <= 0) {
			rc = r < 0 ? r : -ETIMEDOUT;
			break;
		}
		if (i >= skip)
			samples[i - skip] = t1 - t0;
	}
	end_close(&e);
	int st = 0;
	if (rc) {
		kill(child, SIGKILL);
		waitpid(child, &st, 0);
		return rc;
	}
	if (tool_reap(child, 5000, &st) || !WIFEXITED(st) || WEXITSTATUS(st))
		return -ECHILD;
	return 0;
}
