// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit-thru: maximum throughput, 1:1 or 1:N (the lbmsrc/lbmrcv method).
 *
 * N receiver processes are forked and pinned; the publisher (this process)
 * waits until its source has N receivers, then sends sequence-numbered
 * messages as fast as the transport takes them, spinning on
 * FLIT_BACK_PRESSURED and counting each refusal.  Each receiver checks the
 * sequence (gaps and duplicates must be zero in paced mode), times its first
 * to its last message, and reports through a pipe.  The end of the stream is
 * COUNT messages or the publisher's close (FLIT_MSG_EOS).
 *
 * Network transports (udp): the kernel takes datagrams as fast as they come
 * and drops what a receiver's socket cannot hold, so the publisher is not
 * run open-loop: every receiver publishes how far it has got in a shared
 * page (mapped before the fork: it works across network namespaces), and the
 * publisher keeps at most --window messages beyond the slowest one.  What
 * counts is the rate each receiver *received*, with the library's NAK,
 * retransmission and loss counters next to it.  A receiver stops at the last
 * message (COUNT, or the total the publisher posts in the page when it
 * stops), at EOS, or after a quiet period of 2 s.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool.h"

static const char usage[] =
"Usage: flit-thru [-t TRANSPORT] [-s SIZE] [-n COUNT | -d SECONDS] [options]\n"
"Maximum message rate from one publisher to N forked receivers.\n"
"\n"
"  -t, --transport T    shm (default), udp, xdp, rdma; every context gets\n"
"                       context.transports = T (shm opens no socket)\n"
"  -s, --size BYTES     message size, 8 .. 16M (default 16; suffixes K M)\n"
"  -n, --count N        messages to send (default 10000000; suffixes k M G)\n"
"  -d, --duration S     send for S seconds instead of a count\n"
"  -R, --receivers N    receiver processes, 1 .. 64 (default 1)\n"
"  -b, --batch          pack messages into frames (source.batch = true) up to\n"
"                       --batch-max bytes (udp: a datagram); default: one\n"
"                       frame per message\n"
"      --batch-max B    largest batched frame (source batch_max), 256 .. 1M\n"
"  -z, --zero-copy      send with claim/commit instead of a copying send\n"
"      --topics N       spread the messages over N topics (1 .. 65536; message\n"
"                       i on topic i mod N) that share one session; receivers\n"
"                       subscribe to them all by a pattern (rdma: to each;\n"
"                       default 1: one topic)\n"
"  -m, --mode M         shm ring mode: paced (default, lossless) or overwrite\n"
"  -c, --cpus LIST      publisher on the first CPU, receivers round-robin on\n"
"                       the rest (default: every CPU this process may use)\n"
"  -T, --timeout S      give up when start-up or the stream stalls longer than\n"
"                       S seconds (default 10; udp start-up: at least 2)\n"
"  -W, --window N       udp: at most N messages in flight beyond the slowest\n"
"                       receiver (default: 4096 datagrams' worth; 0: none,\n"
"                       open loop, the kernel drops what receivers miss)\n"
"      --rdma-addr A    rdma: the address receivers connect to (default: this\n"
"                       host's RDMA device address)\n"
"      --rdma-port P    rdma: the publisher listens on port P (default: one\n"
"                       from the pid); rdma is credit-paced: no --window\n"
"  -C, --config LINE    a config line for every context, e.g.\n"
"                       'context.udp.backend = io_uring' (repeatable; after\n"
"                       the tool's own lines, see docs/CONFIG.md)\n"
"      --netns NAME     run in network namespace NAME (/run/netns/NAME; the\n"
"                       receivers too, unless --peer-netns); needs root\n"
"      --peer-netns NAME\n"
"                       the receivers run in network namespace NAME (e.g.\n"
"                       --netns tb-h1 --peer-netns tb-h2)\n"
"  -j, --json           JSON objects on stdout, one per line (header to stderr)\n"
"  -v, --verbose        library messages to stderr (-vv: debug)\n"
"  -h, --help           this text\n"
"\n"
"udp: msgs/s is what each receiver received (first to last message); the\n"
"JSON has naks_sent, retransmissions and msgs_lost.  Without --peer-netns the\n"
"receivers share the publisher's namespace (multicast loopback: a multicast\n"
"route must exist there).\n"
"\n"
"Exit status: 0 ok, 1 runtime failure (including gaps or duplicates in paced\n"
"mode), 2 usage error.\n";

#define MAX_RECEIVERS 64
#define CHECK_EVERY 0xffffu
/* udp: start-up waits at least this long (topic resolution takes 10-100
 * ms), and a receiver that has heard nothing for QUIET_S reports. */
#define NET_STARTUP_MIN_S 2.0
#define NET_QUIET_S 2.0
/* udp: the default window, in datagrams (x messages per datagram when
 * batching): well inside the receive buffer (context.udp.rcvbuf, 4M). */
#define NET_WINDOW_DGRAMS 4096

struct options {
	struct tool_opts com;           /* -t -s -m -c -T -C -j -v, --netns ... */
	uint64_t count;         /* 0 with a duration */
	double duration_s;
	int receivers;
	bool batch, zero_copy;
	uint64_t batch_max;     /* 0: the library's default */
	int64_t window;                 /* < 0: the default */
	uint64_t rdma_frame;            /* rdma: frame_max for the size, 0: default */
	unsigned topics;                /* publishers of one session (1: one topic) */
};

/* Shared by the publisher and its receivers (MAP_SHARED, mapped before the
 * fork), one cache line per writer. */
struct progress {
	_Alignas(64) uint64_t total;    /* messages sent in all; UINT64_MAX: sending */
	struct {
		_Alignas(64) uint64_t next; /* below it: delivered or reported lost */
		uint64_t bos;               /* topics it knows (BOS events) */
	} rx[MAX_RECEIVERS];
};

/* What a receiver sends back through its pipe (well under PIPE_BUF). */
struct rx_report {
	int id, cpu;
	int failed;             /* 1: see errmsg */
	bool eos, source_died;
	uint64_t msgs, bytes;
	uint64_t gaps;          /* messages skipped in the sequence */
	uint64_t dupes;         /* messages at or below one already seen */
	uint64_t lost;          /* reported by LOSS events */
	uint64_t bad_len;
	double secs;            /* first to last message */
	bool quiet;             /* stopped after the quiet period */
	/* the receiver's context (network transports) */
	uint64_t naks_sent, retx_received, msgs_lost;
	char errmsg[1024];     /* the report stays under PIPE_BUF */
};

_Static_assert(sizeof(struct rx_report) <= PIPE_BUF, "one atomic pipe write");

struct rx_state {
	const struct tool_clock *clk;
	size_t size;
	uint64_t next;          /* expected sequence number */
	uint64_t t_first;
	bool started, eos, died;
	bool net;               /* udp: a LOSS range is not a gap */
	struct rx_report *rep;
	uint64_t *bos;          /* in the shared page: BOS events so far */
};

static void rx_on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct rx_state *s = arg;
	struct rx_report *r = s->rep;
	uint64_t seq;

	(void)sub;
	switch (m->kind) {
	case FLIT_MSG_DATA:
		break;
	case FLIT_MSG_BOS:
		__atomic_fetch_add(s->bos, 1, __ATOMIC_RELEASE);
		return;
	case FLIT_MSG_EOS:
		s->eos = true;
		s->died = m->flags & FLIT_MSGF_SOURCE_DIED;
		return;
	case FLIT_MSG_LOSS:
		r->lost += m->lost;
		/* library sequence numbers are the payload's (one source, from
		 * 0): a reported range is not a gap */
		if (s->net && m->seq == s->next)
			s->next += m->lost;
		return;
	default:
		return;
	}
	if (!s->started) {
		s->started = true;
		s->t_first = tool_now(s->clk);
	}
	r->msgs++;
	r->bytes += m->len;
	if (m->len != s->size || m->len < 8) {
		r->bad_len++;
		return;
	}
	seq = tool_payload_seq(m->data);
	if (seq == s->next) {
		s->next++;
	} else if (seq > s->next) {
		r->gaps += seq - s->next;
		s->next = seq + 1;
	} else {
		r->dupes++;
	}
}

/* Report through the pipe and exit (closing the subscription first, so the
 * source need not wait to evict our reader slot). */
static noreturn void rx_exit(int fd, struct rx_report *r, const char *what,
			     flit_ctx *ctx, flit_sub *sub)
{
	if (what) {
		r->failed = 1;
		snprintf(r->errmsg, sizeof(r->errmsg), "%s: %s", what, flit_errmsg());
	}
	flit_sub_close(sub);
	flit_ctx_close(ctx);
	if (write(fd, r, sizeof(*r)) != (ssize_t)sizeof(*r))
		_exit(1);
	_exit(r->failed);
}

/* A receiver process: runs until COUNT messages, EOS, or a stall. */
static noreturn void run_receiver(const struct options *o,
				  const struct tool_clock *clk, const char *topic,
				  int id, int cpu, int fd, struct progress *pg)
{
	struct rx_report rep = { .id = id, .cpu = cpu };
	struct rx_state s = { .clk = clk, .size = o->com.size, .rep = &rep, .net = o->com.net,
			      .bos = &pg->rx[id - 1].bos };
	uint64_t stop_at = o->count ? o->count : UINT64_MAX;
	uint64_t timeout = tool_ticks(clk, o->com.timeout_s * 1e9);
	uint64_t quiet = tool_ticks(clk, NET_QUIET_S * 1e9);
	uint64_t t_last = 0, idle_since = 0, spins = 0;
	uint64_t *mine = &pg->rx[id - 1].next;
	struct flit_counters ctr = { .sz = sizeof(ctr) };
	bool idle = false;
	flit_ctx *ctx = NULL;
	flit_sub *sub = NULL;
	char err[768];
	int rc = tool_pin_cpu(cpu);

	if (rc) {
		errno = -rc;
		rx_exit(fd, &rep, "pinning", ctx, sub);
	}
	char rcfg[160] = "";
	FLIT_OPTS(flit_sub_opts, sopts, .on_msg = rx_on_msg, .arg = &s, .config = rcfg);
	if (!strcmp(o->com.transport, "rdma"))
		snprintf(rcfg, sizeof(rcfg), "rdma.static = %s:%u\n%s%llu\n", o->com.rdma_addr,
			 o->com.rdma_port, o->rdma_frame ? "rdma.frame_max = " : "# ",
			 (unsigned long long)o->rdma_frame);
	ctx = tool_ctx_new(&o->com.config, err, sizeof(err));
	if (!ctx) {
		rep.failed = 1;
		snprintf(rep.errmsg, sizeof(rep.errmsg), "creating the context: %s", err);
		rx_exit(fd, &rep, NULL, ctx, sub);
	}
	/* --topics: every topic of the session, topic.00000 .. */
	sub = tool_spread_subscribe(ctx, o->com.transport, topic, o->topics, &sopts);
	if (!sub)
		rx_exit(fd, &rep, "subscribing", ctx, sub);

	/* shm: until COUNT messages or EOS.  udp: until the last message
	 * (delivered or reported lost), EOS, or a quiet period. */
	while (!s.eos && (o->com.net ? s.next < stop_at : rep.msgs < stop_at)) {
		int n = flit_ctx_poll(ctx, 0);

		if (n > 0) {
			t_last = tool_now(clk);
			idle = false;
			__atomic_store_n(mine, s.next, __ATOMIC_RELEASE);
			continue;
		}
		if (n < 0)
			rx_exit(fd, &rep, "polling", ctx, sub);
		if (o->com.net && s.next >= __atomic_load_n(&pg->total, __ATOMIC_ACQUIRE))
			break;          /* the publisher stopped and we have it all */
		if ((++spins & CHECK_EVERY) == 0) {
			uint64_t now = tool_now(clk);

			if (!idle) {
				idle = true;
				idle_since = now;
			} else if (o->com.net && s.started && now - idle_since > quiet) {
				rep.quiet = true;
				break;
			} else if (now - idle_since > timeout) {
				rep.failed = 1;
				snprintf(rep.errmsg, sizeof(rep.errmsg),
					 "nothing received for %g s (%llu messages so far)",
					 o->com.timeout_s, (unsigned long long)rep.msgs);
				break;
			}
		}
	}
	__atomic_store_n(mine, s.next, __ATOMIC_RELEASE);
	if (flit_ctx_counters(ctx, &ctr) == 0) {
		rep.naks_sent = ctr.naks_sent;
		rep.retx_received = ctr.retx_received;
		rep.msgs_lost = ctr.msgs_lost;
	}
	rep.eos = s.eos;
	rep.source_died = s.died;
	if (s.started && t_last > s.t_first)
		rep.secs = tool_ns(clk, t_last - s.t_first) / 1e9;
	rx_exit(fd, &rep, NULL, ctx, sub);
}

/* ---- publisher --------------------------------------------------------------- */

/* The publisher's run: its receivers and its library objects, all of which a
 * failure must reap or close (a ring file must not be left behind). */
struct thru {
	pid_t pid[MAX_RECEIVERS];
	int fd[MAX_RECEIVERS];          /* report pipes */
	int n;
	flit_ctx *ctx;
	flit_pub *pub;                  /* pubs[0] */
	flit_pub **pubs;                /* --topics: one per topic */
	unsigned npubs;
	struct progress *pg;
	uint64_t acked;                 /* the slowest receiver's progress, last seen */
};

static void kill_children(struct thru *c)
{
	int status;

	for (int i = 0; i < c->n; i++) {
		if (c->pid[i] > 0) {
			kill(c->pid[i], SIGKILL);
			waitpid(c->pid[i], &status, 0);
			c->pid[i] = 0;
		}
	}
}

static noreturn TOOL_FMT(2, 3) void thru_fail(struct thru *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kill_children(c);
	for (unsigned i = 0; i < c->npubs; i++)
		flit_pub_close(c->pubs[i]);
	flit_ctx_close(c->ctx);
	tool_fail("%s", msg);
}

/* During a stall: fail if a receiver died. */
static void check_children(struct thru *c, const char *what)
{
	char why[96];
	int status;

	for (int i = 0; i < c->n; i++) {
		if (c->pid[i] > 0 && tool_child_exited(c->pid[i], &status) == 1) {
			c->pid[i] = 0;
			thru_fail(c, "%s: receiver %d %s", what, i + 1,
				  tool_wstatus_str(status, why, sizeof(why)));
		}
	}
}

static int rx_cpu(const struct options *o, int i)
{
	return o->com.ncpus > 1 ? o->com.cpus[1 + i % (o->com.ncpus - 1)] : o->com.cpus[0];
}

struct tx_result {
	uint64_t sent, back_pressured;
	uint64_t window_waits;          /* udp: sends held back by the window */
	uint64_t window;                /* udp: the window (0: none) */
	double secs;
	uint64_t cpu_ns;                /* the publisher process's CPU time (all
					 * its threads) from the first send to
					 * the flush */
	/* the publisher's context (network transports) */
	uint64_t retransmissions, naks_received, rate_limited;
	char setup[512];                /* flit_ctx_describe() of the transport */
};

/* Has receiver i exited?  (Not reaped: collect() does that.) */
static bool rx_gone(const struct thru *c, int i)
{
	siginfo_t si = { 0 };

	return c->pid[i] <= 0 ||
	       (waitid(P_PID, (id_t)c->pid[i], &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		si.si_pid == c->pid[i]);
}

/* The slowest live receiver's progress (UINT64_MAX if none is left). */
static uint64_t rx_min(struct thru *c, bool skip_gone)
{
	uint64_t m = UINT64_MAX;

	for (int i = 0; i < c->n; i++) {
		uint64_t v = __atomic_load_n(&c->pg->rx[i].next, __ATOMIC_ACQUIRE);

		if (v < m && !(skip_gone && rx_gone(c, i)))
			m = v;
	}
	return m;
}

/* udp: before sending `seq`, wait until it is less than a window beyond the
 * slowest receiver.  Flushes an open batch first (it may hold what the
 * receivers wait for).  Fails when no receiver moves for the timeout. */
static void tx_window(flit_pub *pub, const struct options *o, uint64_t seq,
		      struct tx_result *tx, const struct tool_clock *clk,
		      struct thru *c)
{
	uint64_t spins = 0, t0 = 0, last;
	bool flushed = false;

	if (seq - c->acked < tx->window)
		return;
	c->acked = rx_min(c, false);
	if (seq - c->acked < tx->window)
		return;
	tx->window_waits++;
	last = c->acked;
	for (;;) {
		if (!flushed) {
			int rc = flit_pub_flush(pub);

			if (rc < 0)
				thru_fail(c, "flushing: %s", flit_errmsg());
			flushed = rc == FLIT_OK;
		}
		c->acked = rx_min(c, false);
		if (seq - c->acked < tx->window)
			return;
		/* NAKs and retransmissions, with context.udp.service = poll */
		if (flit_ctx_poll(c->ctx, 0) < 0)
			thru_fail(c, "polling: %s", flit_errmsg());
		if ((++spins & 0xfffu) == 0) {
			uint64_t now = tool_now(clk);

			if (c->acked != last || !t0) {
				last = c->acked;
				t0 = now;
			} else if (tool_ns(clk, now - t0) > o->com.timeout_s * 1e9) {
				thru_fail(c, "sending message %llu: the slowest receiver "
					  "is at %llu and has not moved for %g s",
					  (unsigned long long)seq,
					  (unsigned long long)c->acked, o->com.timeout_s);
			}
			check_children(c, "sending");
		}
	}
}

/* Send one message; spins while refused.  The hot path. */
static inline void tx_one(flit_pub *pub, const struct options *o, void *buf,
			  uint64_t seq, struct tx_result *tx,
			  const struct tool_clock *clk, struct thru *c)
{
	uint64_t spins = 0, t0 = 0;
	int rc;

	if (tx->window)
		tx_window(pub, o, seq, tx, clk, c);
	for (;;) {
		if (o->zero_copy) {
			void *p;

			rc = flit_pub_claim(pub, o->com.size, &p);
			if (rc == FLIT_OK) {
				memcpy(p, buf, o->com.size);
				memcpy(p, &seq, sizeof(seq));
				rc = flit_pub_commit(pub, o->com.size);
			}
		} else {
			memcpy(buf, &seq, sizeof(seq));
			rc = flit_pub_send(pub, buf, o->com.size);
		}
		if (rc == FLIT_OK)
			return;
		if (rc < 0)
			thru_fail(c, "sending message %llu: %s",
				  (unsigned long long)seq, flit_errmsg());
		tx->back_pressured++;
		if ((++spins & CHECK_EVERY) == 0) {
			uint64_t now = tool_now(clk);

			if (!t0)
				t0 = now;
			else if (tool_ns(clk, now - t0) > o->com.timeout_s * 1e9)
				thru_fail(c, "sending message %llu: %s for %g s",
					  (unsigned long long)seq, flit_strstatus(rc),
					  o->com.timeout_s);
			check_children(c, "sending");
		}
	}
}

static void run_publisher(const struct options *o, const struct tool_clock *clk,
			  const char *topic, struct thru *c,
			  struct tx_result *tx)
{
	char config[192] = "", err[768];
	size_t off = 0;
	uint64_t t0, t1, deadline = 0, spins = 0;
	double startup_s = o->com.net && o->com.timeout_s < NET_STARTUP_MIN_S ?
			   NET_STARTUP_MIN_S : o->com.timeout_s;
	flit_ctx *ctx;
	flit_pub *pub;
	void *buf;
	int rc;

	if (!strcmp(o->com.transport, "shm"))
		off += (size_t)snprintf(config + off, sizeof(config) - off,
					"shm.mode = %s\n", o->com.overwrite ? "overwrite" : "paced");
	off += (size_t)snprintf(config + off, sizeof(config) - off, "batch = %s\n",
				o->batch ? "true" : "false");
	if (o->batch_max)
		off += (size_t)snprintf(config + off, sizeof(config) - off, "batch_max = %llu\n",
					(unsigned long long)o->batch_max);
	if (o->rdma_frame)
		off += (size_t)snprintf(config + off, sizeof(config) - off, "rdma.frame_max = %llu\n",
					(unsigned long long)o->rdma_frame);
	if (o->topics > 1)
		snprintf(config + off, sizeof(config) - off, "session = flit-thru\n");

	rc = tool_pin_cpu(o->com.cpus[0]);
	if (rc)
		thru_fail(c, "pinning to CPU %d: %s", o->com.cpus[0], strerror(-rc));
	FLIT_OPTS(flit_pub_opts, popts, .transport = o->com.transport, .config = config);
	{
		/* rdma: the publisher's context listens for the receivers */
		struct tool_config pc = o->com.config;
		if (!strcmp(o->com.transport, "rdma"))
			tool_config_add(&pc, "context.rdma.port = %u", o->com.rdma_port);
		ctx = c->ctx = tool_ctx_new(&pc, err, sizeof(err));
	}
	if (!ctx)
		thru_fail(c, "creating the context: %s", err);
	c->pubs = calloc(o->topics, sizeof(*c->pubs));
	if (!c->pubs)
		thru_fail(c, "out of memory");
	for (unsigned i = 0; i < o->topics; i++) {
		char t[FLIT_TOPIC_MAX + 16];
		tool_spread_topic(t, sizeof(t), topic, i, o->topics);
		c->pubs[i] = flit_pub_new(ctx, t, &popts);
		if (!c->pubs[i])
			thru_fail(c, "publishing '%s' on %s: %s", t, o->com.transport,
				  flit_errmsg());
		c->npubs = i + 1;
	}
	pub = c->pub = c->pubs[0];
	if (o->com.size > flit_pub_max_msg(pub))
		thru_fail(c, "size %zu is larger than the %s source's largest "
			  "message (%zu bytes)", o->com.size, o->com.transport,
			  flit_pub_max_msg(pub));
	buf = aligned_alloc(64, (o->com.size + 63) & ~(size_t)63);
	if (!buf)
		thru_fail(c, "out of memory");
	tool_payload_fill(buf, o->com.size, 0);

	/* Start when every receiver is attached and (--topics) knows every
	 * topic: a message of a topic it has not learned yet is not for it
	 * (slow path: sleeping is fine). */
	t0 = tool_now(clk);
	for (;;) {
		uint64_t known = UINT64_MAX;
		rc = flit_pub_receivers(pub);
		if (rc < 0)
			thru_fail(c, "counting receivers of '%s': %s", topic,
				  rc == -EOPNOTSUPP ? "the transport cannot tell" :
				  flit_errmsg());
		for (int i = 0; i < o->receivers; i++) {
			uint64_t b = __atomic_load_n(&c->pg->rx[i].bos, __ATOMIC_ACQUIRE);
			known = b < known ? b : known;
		}
		if (rc >= o->receivers && (o->topics == 1 || known >= o->topics))
			break;
		if (tool_ns(clk, tool_now(clk) - t0) > startup_s * 1e9)
			thru_fail(c, "start-up: %d of %d receivers attached after %g s%s", rc,
				  o->receivers, startup_s, o->topics == 1 ? "" :
				  known < o->topics ? ", the slowest knows too few of the topics" : "");
		check_children(c, "start-up");
		flit_ctx_poll(ctx, 0);
		tool_sleep_us(1000);
	}

	uint64_t cpu0 = tool_cpu_ns();
	t0 = tool_now(clk);
	/* --topics: message seq on topic seq mod N (one session: one
	 * sequence, the receivers check it whole) */
	unsigned k = 0;
	if (o->count) {
		for (uint64_t seq = 0; seq < o->count; seq++) {
			tx_one(c->pubs[k], o, buf, seq, tx, clk, c);
			if (++k == o->topics)
				k = 0;
		}
		tx->sent = o->count;
	} else {
		deadline = t0 + tool_ticks(clk, o->duration_s * 1e9);
		for (uint64_t seq = 0;; seq++) {
			if ((seq & 1023) == 0 && tool_now(clk) >= deadline) {
				tx->sent = seq;
				break;
			}
			tx_one(c->pubs[k], o, buf, seq, tx, clk, c);
			if (++k == o->topics)
				k = 0;
		}
	}
	t1 = tool_now(clk);
	while ((rc = flit_pub_flush(pub)) != FLIT_OK) {
		if (rc < 0)
			thru_fail(c, "flushing: %s", flit_errmsg());
		if ((++spins & CHECK_EVERY) == 0) {
			if (tool_ns(clk, tool_now(clk) - t1) > o->com.timeout_s * 1e9)
				thru_fail(c, "flushing: %s for %g s",
					  flit_strstatus(rc), o->com.timeout_s);
			check_children(c, "flushing");
		}
	}
	t1 = tool_now(clk);
	tx->secs = tool_ns(clk, t1 - t0) / 1e9;
	tx->cpu_ns = tool_cpu_ns() - cpu0;
	/* Tell the receivers where the stream ends. */
	__atomic_store_n(&c->pg->total, tx->sent, __ATOMIC_RELEASE);
	if (o->com.net) {
		/* Keep the source (its retransmissions) until every receiver
		 * has it all, has gone, or none moves for the quiet period. */
		uint64_t last = rx_min(c, true), since = tool_now(clk);

		while (last < tx->sent) {
			uint64_t now, m;

			flit_ctx_poll(ctx, 0);
			tool_sleep_us(200);
			now = tool_now(clk);
			m = rx_min(c, true);
			if (m != last) {
				last = m;
				since = now;
			} else if (tool_ns(clk, now - since) > (NET_QUIET_S + 1) * 1e9) {
				break;
			}
		}
	}
	{
		struct flit_counters ctr = { .sz = sizeof(ctr) };

		if (flit_ctx_counters(ctx, &ctr) == 0) {
			tx->retransmissions = ctr.retransmissions;
			tx->naks_received = ctr.naks_received;
			tx->rate_limited = ctr.rate_limited;
		}
		if (flit_ctx_describe(ctx, o->com.transport, tx->setup, sizeof(tx->setup)) < 0)
			tx->setup[0] = '\0';
	}
	for (unsigned i = 0; i < c->npubs; i++)
		flit_pub_close(c->pubs[i]); /* receivers get EOS */
	flit_ctx_close(ctx);
	free(c->pubs);
	c->pubs = NULL;
	c->npubs = 0;
	c->pub = NULL;
	c->ctx = NULL;
	free(buf);
}

/* Read every receiver's report (bounded) and reap them all. */
static void collect(const struct options *o, struct thru *c,
		    struct rx_report *reps)
{
	uint64_t deadline = flit_monotonic_raw_ns() + (uint64_t)(o->com.timeout_s * 1e9);
	char why[96];

	for (int i = 0; i < c->n; i++) {
		struct pollfd pfd = { .fd = c->fd[i], .events = POLLIN };
		uint64_t now = flit_monotonic_raw_ns();
		int ms = now < deadline ? (int)((deadline - now) / 1000000) + 1 : 0;
		ssize_t got = 0;

		if (poll(&pfd, 1, ms) == 1)
			got = read(c->fd[i], &reps[i], sizeof(reps[i]));
		close(c->fd[i]);
		if (got != (ssize_t)sizeof(reps[i])) {
			int status;

			if (tool_reap(c->pid[i], 1000, &status) == 0) {
				c->pid[i] = 0;
				thru_fail(c, "receiver %d gave no report: it %s", i + 1,
					  tool_wstatus_str(status, why, sizeof(why)));
			}
			thru_fail(c, "receiver %d gave no report within %g s",
				  i + 1, o->com.timeout_s);
		}
	}
	for (int i = 0; i < c->n; i++) {
		int status;

		if (tool_reap(c->pid[i], 5000, &status))
			thru_fail(c, "reaping receiver %d: %s", i + 1, strerror(errno));
		c->pid[i] = 0;
	}
}

/* ---- output ------------------------------------------------------------------- */

static void print_row(const struct options *o, const char *clk, const char *mode,
		      const char *side, int id, int cpu, uint64_t msgs, double secs,
		      double mps, const char *extra_json, const char *extra_text)
{
	double mbps = mps * (double)o->com.size / 1e6;
	char label[32], cpustr[16] = "-", idstr[40] = "", extra[2560];
	struct tool_result r;

	if (cpu >= 0)
		snprintf(cpustr, sizeof(cpustr), "%d", cpu);
	if (!o->com.json) {
		if (id)
			snprintf(label, sizeof(label), "%s %d", side, id);
		else
			snprintf(label, sizeof(label), "%s", side);
		printf("%-12s %5s %12llu %8.3f %12.0f %10.1f  %s\n", label, cpustr,
		       (unsigned long long)msgs, secs, mps, mbps, extra_text);
		return;
	}
	if (id && cpu >= 0)
		snprintf(idstr, sizeof(idstr), ",\"id\":%d,\"cpu\":%d", id, cpu);
	else if (cpu >= 0)
		snprintf(idstr, sizeof(idstr), ",\"cpu\":%d", cpu);
	tool_result_init(&r, "flit-thru");
	r.transport = o->com.transport;
	r.size = (int64_t)o->com.size;
	r.count = (int64_t)msgs;
	r.msgs_per_sec = mps;
	r.clock = clk;
	r.mode = mode;
	snprintf(extra, sizeof(extra), "\"side\":\"%s\"%s,"
		 "\"secs\":%.6f,\"mb_per_sec\":%.1f%s%s", side, idstr, secs,
		 mbps, *extra_json ? "," : "", extra_json);
	r.extra = extra;
	tool_json_print(stdout, &r);
}

static int report(const struct options *o, const struct tool_clock *clk,
		  const char *topic, const struct tx_result *tx,
		  const struct rx_report *reps)
{
	char cpustr[128], mode[256], clkdesc[128], ej[2048], et[256], first[128];
	char cfgs[512];
	double agg_mps = 0, agg_secs = 0;
	uint64_t agg_msgs = 0, bad = 0, agg_naks = 0, agg_lost = 0, shortfall = 0;
	bool paced = !o->com.overwrite;
	FILE *hdr = o->com.json ? stderr : stdout;
	int rc = 0;
	size_t off;

	tool_cpus_str(o->com.cpus, o->com.ncpus, cpustr, sizeof(cpustr));
	if (!strcmp(o->com.transport, "udp") || !strcmp(o->com.transport, "xdp")) {
		char m[32], b[48];
		const char *um = tool_config_get(&o->com.config, "source.udp.mode", m, sizeof(m));

		snprintf(first, sizeof(first), "%s,%s,%s", o->com.transport, um && *um ? um : "multicast",
			 !strcmp(o->com.transport, "xdp") ? "af_xdp"
				 : tool_udp_path_label(&o->com.config, b, sizeof(b)));
	} else if (!strcmp(o->com.transport, "rdma")) {
		char m[32];
		const char *rm = tool_config_get(&o->com.config, "source.rdma.mode", m, sizeof(m));

		snprintf(first, sizeof(first), "%s", rm && !strcmp(rm, "multicast") ? "rdma,ud,multicast" :
			 rm && !strcmp(rm, "write") ? "rdma,rc,write,credits" : "rdma,rc,send,credits");
	} else {
		snprintf(first, sizeof(first), "%s", o->com.net ? "default" :
			 paced ? "paced" : "overwrite");
	}
	off = (size_t)snprintf(mode, sizeof(mode), "%s,%s,%sspin,", first,
			       o->batch ? "batched" : "unbatched",
			       o->zero_copy ? "zero-copy," : "");
	if (o->com.net)
		off += (size_t)snprintf(mode + off, sizeof(mode) - off, "window=%llu,",
					(unsigned long long)tx->window);
	if (o->topics > 1)
		off += (size_t)snprintf(mode + off, sizeof(mode) - off, "topics=%u,", o->topics);
	snprintf(mode + off, sizeof(mode) - off, "receivers=%d,pinned=%s",
		 o->receivers, cpustr);
	tool_header(hdr, "%s throughput, %zu-byte messages, %s; topic '%s'; "
		    "publisher on CPU %d%s; clock %s", o->com.transport, o->com.size, mode,
		    topic, o->com.cpus[0], o->receivers > o->com.ncpus - 1 ?
		    ", receivers share CPUs" : "",
		    tool_clock_desc(clk, clkdesc, sizeof(clkdesc)));
	if (tx->setup[0] && strcmp(tx->setup, o->com.transport))
		tool_header(hdr, "%s", tx->setup);
	if (!o->com.json)
		printf("%-12s %5s %12s %8s %12s %10s  %s\n", "# side", "cpu", "msgs",
		       "secs", "msgs/s", "MB/s", "checks");

	for (int i = 0; i < o->receivers; i++) {
		const struct rx_report *r = &reps[i];
		double mps = r->secs > 0 ? (double)r->msgs / r->secs : 0;
		uint64_t got = r->msgs + (o->com.net ? r->lost : 0);
		uint64_t missing = o->count && got < o->count ? o->count - got : 0;

		agg_mps += mps;
		agg_msgs += r->msgs;
		agg_secs = r->secs > agg_secs ? r->secs : agg_secs;
		/* udp in duration mode: the total the publisher sent */
		if (o->com.net && !o->count && r->msgs + r->lost < tx->sent)
			missing = tx->sent - r->msgs - r->lost;
		off = (size_t)snprintf(ej, sizeof(ej), "\"gaps\":%llu,\"dupes\":%llu,"
			 "\"lost\":%llu,\"missing\":%llu,\"bad_len\":%llu,\"eos\":%s",
			 (unsigned long long)r->gaps, (unsigned long long)r->dupes,
			 (unsigned long long)r->lost, (unsigned long long)missing,
			 (unsigned long long)r->bad_len, r->eos ? "true" : "false");
		if (o->com.net)
			snprintf(ej + off, sizeof(ej) - off, ",\"naks_sent\":%llu,"
				 "\"retx_received\":%llu,\"msgs_lost\":%llu,\"quiet\":%s",
				 (unsigned long long)r->naks_sent,
				 (unsigned long long)r->retx_received,
				 (unsigned long long)r->msgs_lost, r->quiet ? "true" : "false");
		off = (size_t)snprintf(et, sizeof(et), "gaps %llu, dupes %llu, lost %llu%s%s",
			 (unsigned long long)r->gaps, (unsigned long long)r->dupes,
			 (unsigned long long)r->lost, missing ? ", MISSING" : "",
			 r->bad_len ? ", BAD LENGTHS" : "");
		if (o->com.net)
			snprintf(et + off, sizeof(et) - off, ", NAKs %llu, retx %llu",
				 (unsigned long long)r->naks_sent,
				 (unsigned long long)r->retx_received);
		agg_naks += r->naks_sent;
		agg_lost += r->msgs_lost;
		print_row(o, clk->name, mode, "receiver", i + 1, r->cpu, r->msgs,
			  r->secs, mps, ej, et);
		if (r->failed) {
			tool_warn("receiver %d: %s", i + 1, r->errmsg);
			rc = 1;
		}
		if (r->source_died) {
			tool_warn("receiver %d: the source died", i + 1);
			rc = 1;
		}
		if (!strcmp(o->com.transport, "rdma")) {
			/* credit-paced and reliable: lossless, like paced shm */
			bad += r->bad_len + r->gaps + r->dupes + r->lost + missing;
		} else if (o->com.net) {
			/* reliable, not lossless: a loss is reported, not an error */
			bad += r->bad_len + r->gaps + r->dupes;
			shortfall += r->lost + missing;
		} else {
			bad += r->bad_len + (paced ? r->gaps + r->dupes + r->lost + missing : 0);
		}
	}
	off = (size_t)snprintf(ej, sizeof(ej), "\"receivers\":%d", o->receivers);
	if (o->com.net)
		snprintf(ej + off, sizeof(ej) - off, ",\"naks_sent\":%llu,"
			 "\"retransmissions\":%llu,\"msgs_lost\":%llu",
			 (unsigned long long)agg_naks,
			 (unsigned long long)tx->retransmissions,
			 (unsigned long long)agg_lost);
	snprintf(et, sizeof(et), "%d receiver%s, sum of rates", o->receivers,
		 o->receivers == 1 ? "" : "s");
	print_row(o, clk->name, mode, "aggregate", 0, -1, agg_msgs, agg_secs,
		  agg_mps, ej, et);
	double cpu_per_msg = tx->sent ? (double)tx->cpu_ns / (double)tx->sent : 0;
	off = (size_t)snprintf(ej, sizeof(ej), "\"back_pressured\":%llu,\"cpu_ns_per_msg\":%.1f",
			       (unsigned long long)tx->back_pressured, cpu_per_msg);
	if (o->com.net)
		off += (size_t)snprintf(ej + off, sizeof(ej) - off,
			 ",\"window\":%llu,\"window_waits\":%llu,\"retransmissions\":%llu,"
			 "\"naks_received\":%llu,\"rate_limited\":%llu",
			 (unsigned long long)tx->window,
			 (unsigned long long)tx->window_waits,
			 (unsigned long long)tx->retransmissions,
			 (unsigned long long)tx->naks_received,
			 (unsigned long long)tx->rate_limited);
	if (o->com.netns)
		off += tool_json_member(ej + off, sizeof(ej) - off, "netns", o->com.netns);
	if (o->com.peer_netns)
		off += tool_json_member(ej + off, sizeof(ej) - off, "peer_netns", o->com.peer_netns);
	if (tool_config_user(&o->com.config, cfgs, sizeof(cfgs)))
		off += tool_json_member(ej + off, sizeof(ej) - off, "config", cfgs);
	if (tx->setup[0])
		tool_json_member(ej + off, sizeof(ej) - off, "setup", tx->setup);
	off = (size_t)snprintf(et, sizeof(et), "CPU %.0f ns/msg, back-pressured %llu times",
			       cpu_per_msg, (unsigned long long)tx->back_pressured);
	if (o->com.net)
		snprintf(et + off, sizeof(et) - off, ", window waits %llu, "
			 "retransmitted %llu", (unsigned long long)tx->window_waits,
			 (unsigned long long)tx->retransmissions);
	print_row(o, clk->name, mode, "sender", 0, o->com.cpus[0], tx->sent, tx->secs,
		  tx->secs > 0 ? (double)tx->sent / tx->secs : 0, ej, et);
	if (bad) {
		tool_warn("%llu sequence or length errors %s, where there must be "
			  "none", (unsigned long long)bad, o->com.net ? "(delivery is in "
			  "order, duplicates are dropped)" : "in paced mode");
		rc = 1;
	}
	if (shortfall)
		tool_warn("%llu messages lost or missing (reported, not an error "
			  "on %s)", (unsigned long long)shortfall, o->com.transport);
	return rc;
}

/* ---- main ----------------------------------------------------------------------- */

static void parse(int argc, char **argv, struct options *o)
{
	enum { OPT_BATCH_MAX = TOOL_OPT_OWN, OPT_TOPICS };
	static const struct tool_shape shape = { .rdma_ports = 1 };
	static const struct option longopts[] = {
		TOOL_LONGOPTS,
		{ "size",      required_argument, NULL, 's' },
		{ "count",     required_argument, NULL, 'n' },
		{ "duration",  required_argument, NULL, 'd' },
		{ "receivers", required_argument, NULL, 'R' },
		{ "batch",     no_argument,       NULL, 'b' },
		{ "batch-max", required_argument, NULL, OPT_BATCH_MAX },
		{ "zero-copy", no_argument,       NULL, 'z' },
		{ "mode",      required_argument, NULL, 'm' },
		{ "window",    required_argument, NULL, 'W' },
		{ "topics",    required_argument, NULL, OPT_TOPICS },
		{ "rdma-addr", required_argument, NULL, TOOL_OPT_RDMA_ADDR },
		{ "rdma-port", required_argument, NULL, TOOL_OPT_RDMA_PORT },
		{ 0 }
	};
	struct tool_opts *t = &o->com;
	bool count_set = false;
	int opt;

	*o = (struct options){ .count = 10000000, .receivers = 1, .window = -1, .topics = 1 };
	tool_opts_init(t, &shape);
	while ((opt = getopt_long(argc, argv, ":t:s:n:d:R:bzm:c:T:W:C:jvh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'n':
			o->count = tool_parse_count("count", optarg, 1, 1ull << 40);
			count_set = true;
			break;
		case 'd': o->duration_s = tool_parse_seconds("duration", optarg, 0.001, 86400); break;
		case 'R': o->receivers = (int)tool_parse_count("receivers", optarg, 1, MAX_RECEIVERS); break;
		case 'b': o->batch = true; break;
		case OPT_BATCH_MAX: o->batch_max = tool_parse_size("batch-max", optarg, 256, 1 << 20); break;
		case 'z': o->zero_copy = true; break;
		case 'W': o->window = (int64_t)tool_parse_count("window", optarg, 0, 1ull << 30); break;
		case OPT_TOPICS: o->topics = (unsigned)tool_parse_count("topics", optarg, 1, 65536); break;
		default: tool_opts_parse(t, opt, optarg, argv);
		}
	}
	tool_opts_end(t, argc, argv);
	if (count_set && o->duration_s > 0)
		tool_usage_exit("--count and --duration exclude each other");
	if (o->duration_s > 0)
		o->count = 0;
	if (o->batch_max && !o->batch)
		tool_usage_exit("--batch-max needs --batch");
	if (o->window >= 0 && !t->net)
		tool_usage_exit("--window is for network transports (shm is "
				"receiver-paced)");
	if (!strcmp(t->transport, "rdma")) {
		uint64_t need = (24 + 16 + t->size + 7 + 63) & ~63ull;
		if (o->window >= 0)
			tool_usage_exit("--window is for udp and xdp (rdma is paced by "
					"its receivers' credits)");
		o->window = 0;
		if (need > 8192 || (o->batch && o->batch_max > 8192))
			o->rdma_frame = need > o->batch_max ? need : o->batch_max;
		if (!t->rdma_port)
			t->rdma_port = 20000 + (unsigned)(getpid() % 40000);
		tool_rdma_addr_default(t->rdma_addr, sizeof(t->rdma_addr));
	}
	tool_opts_finish(t);
}

/* A size value of the config ("4M"), or def. */
static uint64_t config_size(const struct options *o, const char *key, uint64_t def)
{
	char buf[32], *end;
	const char *v = tool_config_get(&o->com.config, key, buf, sizeof(buf));
	uint64_t n;

	if (!v || !*v)
		return def;
	n = strtoull(v, &end, 10);
	switch (*end) {
	case 'k': case 'K': n <<= 10; break;
	case 'm': case 'M': n <<= 20; break;
	case 'g': case 'G': n <<= 30; break;
	}
	return n ? n : def;
}

/* udp: the default window.  Half the receive buffer (the kernel doubles
 * SO_RCVBUF for its bookkeeping, so that is a quarter of what it holds), at
 * about a kilobyte of kernel overhead per datagram. */
static uint64_t default_window(const struct options *o)
{
	uint64_t rcvbuf = config_size(o, "context.udp.rcvbuf", 4 << 20);
	uint64_t dgram_max = config_size(o, "source.udp.max_datagram", 1472);
	uint64_t rec = (o->com.size + 7) / 8 * 8 + 8, per = 1, dgram, n;

	if (o->batch && dgram_max > 32 + rec)
		per = (dgram_max - 32) / rec;
	dgram = 32 + per * rec;
	n = (rcvbuf / 2) / (dgram + 1024);
	if (n > NET_WINDOW_DGRAMS)
		n = NET_WINDOW_DGRAMS;
	if (n < 16)
		n = 16;
	return n * per;
}

int main(int argc, char **argv)
{
	char topic[FLIT_TOPIC_MAX + 1];
	struct rx_report reps[MAX_RECEIVERS];
	struct thru c = { .n = 0 };
	struct tx_result tx = { 0 };
	struct tool_clock clk;
	struct options o;
	pid_t parent = getpid();
	int peer_fd;

	tool_init("flit-thru", usage);
	parse(argc, argv, &o);
	tool_set_verbose(o.com.verbose);
	/* This side's namespace first: no context or socket exists yet. */
	peer_fd = tool_opts_start(&o.com, &clk);
	snprintf(topic, sizeof(topic), "flit-thru.%d", (int)parent);
	memset(reps, 0, sizeof(reps));
	c.pg = mmap(NULL, sizeof(*c.pg), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c.pg == MAP_FAILED)
		tool_fail("mmap: %s", strerror(errno));
	c.pg->total = UINT64_MAX;
	tx.window = !o.com.net ? 0 : o.window >= 0 ? (uint64_t)o.window : default_window(&o);

	fflush(NULL);
	for (int i = 0; i < o.receivers; i++) {
		int fds[2];
		pid_t pid;

		if (pipe2(fds, O_CLOEXEC))
			thru_fail(&c, "pipe: %s", strerror(errno));
		pid = fork();
		if (pid < 0)
			thru_fail(&c, "fork: %s", strerror(errno));
		if (pid == 0) {
			char name[32];

			close(fds[0]);
			for (int j = 0; j < c.n; j++)
				close(c.fd[j]);
			tool_child_init(parent);
			snprintf(name, sizeof(name), "flit-thru (receiver %d)", i + 1);
			tool_init(name, usage);
			tool_opts_enter_peer(&o.com, peer_fd);
			run_receiver(&o, &clk, topic, i + 1, rx_cpu(&o, i), fds[1], c.pg);
		}
		close(fds[1]);
		c.pid[c.n] = pid;
		c.fd[c.n] = fds[0];
		c.n++;
	}

	if (peer_fd >= 0)
		close(peer_fd);
	run_publisher(&o, &clk, topic, &c, &tx);
	collect(&o, &c, reps);
	return report(&o, &clk, topic, &tx, reps);
}
