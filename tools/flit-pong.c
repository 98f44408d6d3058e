// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit-pong: ping-pong latency through the library (the lbmpong method).
 *
 * The ping side publishes on "<prefix>.ping" and subscribes to
 * "<prefix>.pong"; the pong side republishes every ping payload on pong from
 * inside its callback.  One sample = (arrival of the reply - send) / 2, both
 * read by the ping on one CPU with fenced TSC reads: t0 just before
 * flit_pub_send(), t1 in the ping's callback when the reply with the awaited
 * sequence number is delivered (its verification comes after t1).
 *
 * Payload: a sequence number in the first 8 bytes, then a pattern derived
 * from it (tool_payload_fill), checked on every reply.  Sequence numbers with
 * the top bit set are control messages: HELLO (start-up) and BYE (the pong
 * echoes it and exits).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <flit/tstamp.h>

#include "tool.h"

static const char usage[] =
"Usage: flit-pong [-t TRANSPORT] [-s SIZE] [-n COUNT] [options]\n"
"Ping-pong latency between two processes through flit; reports RTT/2 in ns.\n"
"The pong side is forked unless --role is given.\n"
"\n"
"  -t, --transport T      shm (default), udp, xdp, rdma; every context gets\n"
"                         context.transports = T (shm opens no socket)\n"
"  -s, --size BYTES       message size, 8 .. 16M (default 16; suffixes K M)\n"
"  -n, --count N          measured round trips (default 100000; suffixes k M)\n"
"  -w, --warmup N         unmeasured round trips first (default 10000)\n"
"  -c, --cpus A,B         pin ping to CPU A, pong to CPU B (default 0,1)\n"
"  -m, --mode M           shm ring mode: paced (default) or overwrite\n"
"  -T, --timeout S        give up when start-up or one round trip takes longer\n"
"                         than S seconds (default 10; udp start-up: at least 2)\n"
"  -C, --config LINE      a config line for every context, e.g.\n"
"                         'context.udp.backend = io_uring' (repeatable; after\n"
"                         the tool's own lines, see docs/CONFIG.md)\n"
"      --netns NAME       run in network namespace NAME (/run/netns/NAME; the\n"
"                         forked pong too, unless --peer-netns); needs root\n"
"      --peer-netns NAME  the forked pong runs in network namespace NAME\n"
"                         (e.g. tools/testbed hosts: --netns tb-h1\n"
"                         --peer-netns tb-h2); not with --role\n"
"  -r, --role R           run only one side: ping or pong (two commands)\n"
"  -p, --peer-topic-prefix P\n"
"                         topics are P.ping and P.pong (default with --role:\n"
"                         flit-pong; without: flit-pong.<pid>)\n"
"      --rdma-addr A      rdma: the peer's address (default: this host's RDMA\n"
"                         device address; with --role, the other host's)\n"
"      --rdma-port P      rdma: the ping listens on port P, the pong on P+1\n"
"                         (default 14500 with --role, else one from the pid)\n"
"      --timestamps MODE  software or hardware: stamp every message (send\n"
"                         stamps, kernel or NIC receive and transmit stamps:\n"
"                         context.udp.timestamps/tx_timestamps = MODE on both\n"
"                         sides) and report one-way latencies beside RTT/2;\n"
"                         says when hardware stamps are not available (with\n"
"                         --role: give it to both sides)\n"
"  -j, --json             one JSON object on stdout (header to stderr)\n"
"  -H, --hist             print a log2 histogram of RTT/2\n"
"  -v, --verbose          library messages to stderr (-vv: debug)\n"
"  -h, --help             this text\n"
"\n"
"With -t udp and neither --role nor --peer-netns, both sides share one\n"
"namespace (this host's, or --netns) over multicast loopback: a multicast\n"
"route must exist there.\n"
"\n"
"Exit status: 0 ok, 1 runtime failure, 2 usage error.\n";

#define SEQ_CTL   (1ull << 63)
#define SEQ_HELLO SEQ_CTL
#define SEQ_BYE   UINT64_MAX

/* Spins between clock checks in the wait loops (about a millisecond). */
#define CHECK_EVERY 0x3fffu

struct options {
	struct tool_opts com;           /* -t -s -m -c -T -C -p -j -H -v, --role ... */
	uint64_t count, warmup;
	int ts;                         /* --timestamps: FLIT_TS_NONE, _SOFTWARE, _HARDWARE */
	uint64_t rdma_frame;            /* rdma: frame_max for the size, 0: default */
};

/* Start-up of a network transport waits at least this long: topic
 * resolution takes 10-100 ms, more on a loaded host. */
#define NET_STARTUP_MIN_S 2.0

/* The ping's view of the replies (callback argument). */
struct ping_state {
	const struct tool_clock *clk;
	size_t size;
	uint64_t expect;        /* sequence number awaited */
	uint64_t t1;            /* tool_now() when it arrived */
	bool got;
	bool hello_seen, bye_seen;
	struct tool_peer peer;  /* the pong's source, known from its first echo */
	uint64_t stale;         /* replies to other messages (extra hellos) */
	uint64_t lost;          /* messages reported lost (overwrite mode) */
	/* first bad reply */
	uint64_t bad;
	uint64_t bad_seq;
	size_t bad_len;
	long bad_off;
	/* --timestamps: the awaited reply's stamps, taken after t1 */
	bool ts;
	const void *sent;       /* the ping's payload of `expect` */
	uint64_t send_rt;       /* CLOCK_REALTIME just before that send */
	uint64_t msg_seq;       /* the library's sequence number of that message */
	uint32_t rx_flags;      /* the reply's FLIT_MSGF_* */
	uint64_t rx_ts, reply_send_ts;
	uint64_t peer_rx;       /* the pong's receive stamp of the ping (RXTAG_*) */
	uint64_t peer_plain;    /* replies whose bytes 8..15 the pong left as sent */
};

/* --timestamps: the pong writes its receive stamp of each ping into bytes
 * 8..15 of the echo (messages of 16 bytes or more, not control messages),
 * tagged with its kind; 0: it had none. */
#define RXTAG_HW   (1ull << 63)         /* the NIC's hardware stamp (its PHC) */
#define RXTAG_KERN (1ull << 62)         /* the kernel's software stamp (CLOCK_REALTIME) */
#define RXTAG_MASK (RXTAG_KERN - 1)     /* neither: the library's delivery stamp (CLOCK_REALTIME) */
#define TS_MIN_SIZE 16

/* The pong's state (callback argument). */
struct pong_state {
	const struct tool_clock *clk;
	flit_pub *pub;
	uint64_t timeout_ticks;
	uint64_t echoed;
	bool bye;
	struct tool_peer ping;  /* the ping's source */
	int err;                /* first send failure, -errno or status */
	char errmsg[256];
	void *ts_buf;           /* --timestamps: the echo with the stamp in it */
};

/* One side's library objects (and the forked pong, on the ping side): what
 * a failure must close and reap. */
struct side {
	const struct options *o;
	const struct tool_clock *clk;
	flit_ctx *ctx;
	flit_pub *pub;
	flit_sub *sub;
	struct ping_state st;
	pid_t child;            /* the forked pong, or 0 */
	uint64_t timeout_ticks;
	void *buf;
	bool pong;              /* this is the pong side */
};

/* Fail: take a forked pong down and reap it, close our objects (so no ring
 * file is left behind), then exit 1 with the message. */
static noreturn TOOL_FMT(2, 3) void side_fail(struct side *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tool_sides_fail(&p->child, "pong", p->sub, p->pub, p->ctx, msg);
}

/* ---- shared set-up --------------------------------------------------------- */

/* rdma: the port this side listens on (ping: rdma_port, pong: + 1). */
static unsigned rdma_listen_port(const struct side *p)
{
	return p->o->com.rdma_port + (p->pong ? 1 : 0);
}

static void open_ctx(struct side *p)
{
	char err[768];

	if (!strcmp(p->o->com.transport, "rdma")) {
		struct tool_config c = p->o->com.config;
		tool_config_add(&c, "context.rdma.port = %u", rdma_listen_port(p));
		p->ctx = tool_ctx_new(&c, err, sizeof(err));
		if (!p->ctx)
			side_fail(p, "creating the context: %s", err);
		return;
	}
	p->ctx = tool_ctx_new(&p->o->com.config, err, sizeof(err));
	if (!p->ctx)
		side_fail(p, "creating the context: %s", err);
}

static void open_pub(struct side *p, const char *topic)
{
	const struct options *o = p->o;
	char config[128];
	FLIT_OPTS(flit_pub_opts, popts, .transport = o->com.transport, .config = config);

	/* Both sides publish unbatched, whatever a config file or -C says. */
	if (!strcmp(o->com.transport, "shm"))
		snprintf(config, sizeof(config), "batch = false\nshm.mode = %s\n",
			 o->com.overwrite ? "overwrite" : "paced");
	else if (!strcmp(o->com.transport, "rdma") && o->rdma_frame)
		snprintf(config, sizeof(config), "batch = false\nrdma.frame_max = %llu\n",
			 (unsigned long long)o->rdma_frame);
	else
		snprintf(config, sizeof(config), "batch = false\n");
	p->pub = flit_pub_new(p->ctx, topic, &popts);
	if (!p->pub)
		side_fail(p, "publishing '%s' on %s: %s", topic, o->com.transport,
			  flit_errmsg());
	if (o->com.size > flit_pub_max_msg(p->pub))
		side_fail(p, "size %zu is larger than the %s source's largest "
			  "message (%zu bytes)", o->com.size, o->com.transport,
			  flit_pub_max_msg(p->pub));
}

static void open_sub(struct side *p, const char *topic, flit_msg_fn fn,
		     void *arg)
{
	char config[160] = "";
	FLIT_OPTS(flit_sub_opts, sopts, .on_msg = fn, .arg = arg, .config = config);

	/* rdma: the peer's source listens on the other port of the pair */
	if (!strcmp(p->o->com.transport, "rdma"))
		snprintf(config, sizeof(config), "rdma.static = %s:%u\n%s%llu\n",
			 p->o->com.rdma_addr, p->o->com.rdma_port * 2 + 1 - rdma_listen_port(p),
			 p->o->rdma_frame ? "rdma.frame_max = " : "# ",
			 (unsigned long long)p->o->rdma_frame);
	p->sub = flit_sub_new(p->ctx, topic, &sopts);
	if (!p->sub)
		side_fail(p, "subscribing to '%s': %s", topic, flit_errmsg());
}

/* ---- pong side ---------------------------------------------------------------- */

static void pong_on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct pong_state *s = arg;
	uint64_t spins = 0, t0 = 0;
	int rc;

	(void)sub;
	if (m->kind == FLIT_MSG_EOS && tool_peer_eos(&s->ping, m))
		return;
	if (m->kind != FLIT_MSG_DATA || s->err)
		return;
	tool_peer_data(&s->ping, m);
	/* Echo from inside the callback.  The ping reads its replies while it
	 * waits, so back-pressure here is brief; bound it all the same. */
	const void *echo = m->data;
	if (s->ts_buf && m->len >= TS_MIN_SIZE && !(tool_payload_seq(m->data) & SEQ_CTL)) {
		uint64_t tag = !(m->flags & FLIT_MSGF_RECV_TS) ? 0 :
			       (m->recv_ts_ns & RXTAG_MASK) |
			       (m->flags & FLIT_MSGF_RECV_TS_HW ? RXTAG_HW :
				m->flags & FLIT_MSGF_RECV_TS_KERNEL ? RXTAG_KERN : 0);
		memcpy(s->ts_buf, m->data, m->len);
		memcpy((char *)s->ts_buf + 8, &tag, sizeof(tag));
		echo = s->ts_buf;
	}
	while ((rc = flit_pub_send(s->pub, echo, m->len)) == FLIT_BACK_PRESSURED ||
	       rc == FLIT_NOT_CONNECTED) {
		if ((++spins & CHECK_EVERY) == 0) {
			uint64_t now = tool_now(s->clk);
			if (!t0)
				t0 = now;
			else if (now - t0 > s->timeout_ticks)
				break;
		}
	}
	if (rc) {
		s->err = rc;
		snprintf(s->errmsg, sizeof(s->errmsg), "echoing a %zu-byte message: %s",
			 m->len, rc < 0 ? flit_errmsg() : flit_strstatus(rc));
		return;
	}
	s->echoed++;
	if (m->len >= 8 && tool_payload_seq(m->data) == SEQ_BYE)
		s->bye = true;
}

/* Serve until BYE, the ping's EOS or `timeout` of silence.  Returns 0. */
static int run_pong(const struct options *o, const struct tool_clock *clk,
		    const char *ping_topic, const char *pong_topic)
{
	struct pong_state s = { .clk = clk, .timeout_ticks = tool_ticks(clk, o->com.timeout_s * 1e9) };
	struct side p = { .o = o, .clk = clk, .pong = true };
	uint64_t spins = 0, idle_since = 0;
	bool idle = false;

	if (o->ts && o->com.size >= TS_MIN_SIZE && !(s.ts_buf = malloc(o->com.size)))
		tool_fail("out of memory");
	open_ctx(&p);
	open_sub(&p, ping_topic, pong_on_msg, &s);
	open_pub(&p, pong_topic);
	s.pub = p.pub;
	while (!s.bye && !s.ping.gone && !s.err) {
		int n = flit_ctx_poll(p.ctx, 0);

		if (n < 0)
			side_fail(&p, "polling: %s", flit_errmsg());
		if (n > 0) {
			idle = false;
			continue;
		}
		if ((++spins & CHECK_EVERY) == 0) {
			uint64_t now = tool_now(clk);
			if (!idle) {
				idle = true;
				idle_since = now;
			} else if (now - idle_since > s.timeout_ticks) {
				side_fail(&p, "no message on '%s' for %g s",
					  ping_topic, o->com.timeout_s);
			}
		}
	}
	if (s.err)
		side_fail(&p, "%s", s.errmsg);
	if (!s.bye)
		side_fail(&p, "the ping side's source ended before saying bye%s",
			  s.ping.died ? " (its process died)" : "");
	flit_pub_flush(p.pub);
	flit_sub_close(p.sub);
	flit_pub_close(p.pub);
	flit_ctx_close(p.ctx);
	free(s.ts_buf);
	return 0;
}

/* ---- ping side ----------------------------------------------------------------- */

static void ping_on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct ping_state *s = arg;
	uint64_t seq;
	long off;

	(void)sub;
	switch (m->kind) {
	case FLIT_MSG_DATA:
		break;
	case FLIT_MSG_EOS:
		tool_peer_eos(&s->peer, m);
		return;
	case FLIT_MSG_LOSS:
		s->lost += m->lost;
		return;
	default:
		return;
	}
	tool_peer_data(&s->peer, m);
	seq = m->len >= 8 ? tool_payload_seq(m->data) : 0;
	if (seq == s->expect && m->len == s->size) {
		s->t1 = tool_now(s->clk);       /* the reply is here: stop the clock */
		s->got = true;
		if (s->ts) {
			s->rx_flags = m->flags;
			s->rx_ts = m->recv_ts_ns;
			s->reply_send_ts = m->send_ts_ns;
			s->peer_rx = 0;
			if (m->len >= TS_MIN_SIZE) {
				/* the pong's stamp is in bytes 8..15: check the rest */
				const char *got = m->data, *want = s->sent;
				memcpy(&s->peer_rx, got + 8, sizeof(s->peer_rx));
				if (!memcmp(got + 8, want + 8, 8)) {
					s->peer_rx = 0;         /* a pong without --timestamps */
					s->peer_plain++;
				}
				off = -1;
				bool same = !memcmp(got, want, 8) &&
					    !memcmp(got + 16, want + 16, m->len - 16);
				for (size_t i = 0; !same && i < m->len && off < 0; i++)
					if ((i < 8 || i >= 16) && got[i] != want[i])
						off = (long)i;
				if (off >= 0 && !s->bad++) {
					s->bad_seq = seq;
					s->bad_len = m->len;
					s->bad_off = off;
				}
				return;
			}
		}
	} else if (seq == SEQ_BYE) {
		s->bye_seen = true;
	} else {
		if ((seq & SEQ_CTL) && seq != SEQ_BYE)
			s->hello_seen = true;
		s->stale++;
	}
	/* a stale data reply under --timestamps has the pong's stamp in bytes
	 * 8..15: it is counted as stale, its pattern is not checked */
	if (s->ts && m->len >= TS_MIN_SIZE && !(seq & SEQ_CTL) && seq != s->expect)
		return;
	off = m->len == s->size ? tool_payload_check(m->data, m->len, seq) : 0;
	if (off >= 0 && !s->bad++) {
		s->bad_seq = seq;
		s->bad_len = m->len;
		s->bad_off = off;
	}
}

/* Called when a wait has spun for a while: fail after `limit` ticks (secs
 * seconds) or on a dead peer. */
static void ping_check_limit(struct side *p, uint64_t t0, uint64_t limit,
			     double secs, const char *what)
{
	int status;
	char why[96];

	if (p->child > 0 && tool_child_exited(p->child, &status) == 1) {
		p->child = 0;
		side_fail(p, "%s: the pong process %s", what,
			  tool_wstatus_str(status, why, sizeof(why)));
	}
	if (p->st.peer.gone)
		side_fail(p, "%s: the pong side's source ended%s", what,
			  p->st.peer.died ? " (its process died)" : "");
	if (tool_now(p->clk) - t0 > limit)
		side_fail(p, "%s: no answer within %g s", what, secs);
}

static void ping_check(struct side *p, uint64_t t0, const char *what)
{
	ping_check_limit(p, t0, p->timeout_ticks, p->o->com.timeout_s, what);
}

/* Send buf, spinning while back-pressured (bounded). */
static void ping_send(struct side *p, const char *what)
{
	uint64_t spins = 0, t0 = tool_now(p->clk);
	int rc;

	while ((rc = flit_pub_send(p->pub, p->buf, p->o->com.size)) == FLIT_BACK_PRESSURED ||
	       rc == FLIT_NOT_CONNECTED)
		if ((++spins & CHECK_EVERY) == 0)
			ping_check(p, t0, what);
	if (rc)
		side_fail(p, "%s: send: %s", what, flit_errmsg());
}

/* Start-up: sources and receivers find each other asynchronously, so say
 * hello every millisecond until the first echo comes back. */
static void ping_hello(struct side *p)
{
	const struct tool_clock *clk = p->clk;
	uint64_t ms = tool_ticks(clk, 1e6), t0 = tool_now(clk), next = t0;
	uint64_t k = 0, limit = p->timeout_ticks;
	double secs = p->o->com.timeout_s;

	if (p->o->com.net && secs < NET_STARTUP_MIN_S) {
		secs = NET_STARTUP_MIN_S;
		limit = tool_ticks(clk, secs * 1e9);
	}

	p->st.expect = SEQ_HELLO - 1;   /* matches nothing: hellos are stale */
	while (!p->st.hello_seen) {
		uint64_t now = tool_now(clk);

		if (now >= next) {
			int rc;

			tool_payload_fill(p->buf, p->o->com.size, SEQ_HELLO | k++);
			rc = flit_pub_send(p->pub, p->buf, p->o->com.size);
			if (rc < 0)
				side_fail(p, "start-up: send: %s", flit_errmsg());
			next = now + ms;
			if (p->st.peer.gone || now - t0 > limit ||
			    (p->child > 0 && k % 16 == 0))
				ping_check_limit(p, t0, limit, secs, p->child ?
					   "start-up" : "start-up (is 'flit-pong "
					   "--role pong' running with the same prefix?)");
		}
		if (flit_ctx_poll(p->ctx, 0) < 0)
			side_fail(p, "polling: %s", flit_errmsg());
	}
}

/* One round trip of `seq`; returns its ticks.  The measured path: no system
 * call, no allocation; clock checks only after CHECK_EVERY idle polls. */
static inline uint64_t ping_round(struct side *p, uint64_t seq)
{
	struct ping_state *s = &p->st;
	uint64_t spins = 0, t0;
	int rc;

	tool_payload_fill(p->buf, p->o->com.size, seq);
	s->expect = seq;
	s->got = false;
	if (s->ts) {                            /* --timestamps, before t0 */
		s->msg_seq = flit_pub_next_seq(p->pub);
		s->send_rt = flit_realtime_ns();
	}
	t0 = tool_now(p->clk);
	while ((rc = flit_pub_send(p->pub, p->buf, p->o->com.size)) != FLIT_OK) {
		if (rc < 0)
			side_fail(p, "round trip %llu: send: %s",
				  (unsigned long long)seq, flit_errmsg());
		if ((++spins & CHECK_EVERY) == 0)
			ping_check(p, t0, "sending");
	}
	while (!s->got && !s->bad) {
		if (flit_ctx_poll(p->ctx, 1) < 0)
			side_fail(p, "polling: %s", flit_errmsg());
		if ((++spins & CHECK_EVERY) == 0)
			ping_check(p, t0, "waiting for a reply");
	}
	if (s->bad)
		side_fail(p, "bad reply (seq %llu, %zu bytes, expected %zu): %s at "
			  "byte %ld", (unsigned long long)s->bad_seq, s->bad_len,
			  p->o->com.size, s->bad_len != p->o->com.size ? "wrong length" :
			  "corrupt payload", s->bad_off);
	return s->t1 - t0;
}

static void ping_bye(struct side *p)
{
	uint64_t spins = 0, t0;

	tool_payload_fill(p->buf, p->o->com.size, SEQ_BYE);
	ping_send(p, "saying bye");
	flit_pub_flush(p->pub);
	t0 = tool_now(p->clk);
	/* Wait for the echo: the pong has seen the end.  Bounded. */
	while (!p->st.bye_seen && !p->st.peer.gone &&
	       tool_now(p->clk) - t0 < p->timeout_ticks) {
		if (flit_ctx_poll(p->ctx, 0) < 0)
			break;
		if ((++spins & CHECK_EVERY) == 0 && p->child > 0) {
			char why[96];
			int status;

			if (tool_child_exited(p->child, &status) == 1) {
				p->child = 0;
				if (!WIFEXITED(status) || WEXITSTATUS(status))
					side_fail(p, "the pong process %s",
						  tool_wstatus_str(status, why, sizeof(why)));
				break;
			}
		}
	}
}

/* ---- one-way latency from timestamps (--timestamps) --------------------------- */

/* Three one-way series, each a difference of two stamps of one clock:
 *   fwd   ping -> pong: the ping's CLOCK_REALTIME just before the send ->
 *         the pong's receive stamp (kernel software, or the library's);
 *   back  pong -> ping: the send stamp in the reply (source.timestamps) ->
 *         the ping's receive stamp (kernel, NIC converted through the
 *         ping's PHC, or the library's);
 *   wire  ping -> pong: the kernel's or NIC's transmit stamp of the ping's
 *         datagram (flit_pub_tx_stamp) -> the pong's receive stamp of the
 *         same kind (software: CLOCK_REALTIME; hardware: the NICs' PHCs).
 * Each pair is classed by the stamps it really had (from -> to, clock); a
 * series reports the class most of its pairs had and leaves the others out
 * (counted), so that no figure mixes clocks.  Stamps are read after each
 * round trip's clock stopped. */
enum { OW_FWD, OW_BACK, OW_WIRE, OW_N };

static const char *const ow_key[OW_N] = { "ping_to_pong", "pong_to_ping", "ping_to_pong_wire" };
static const char *const ow_label[OW_N] = { "1w-fwd", "1w-back", "1w-wire" };

/* A class of pairs: which stamps, which clock (pointers to literals). */
struct ow_class {
	const char *from, *to, *clock;
	size_t n;
};

#define OW_CLASSES 4    /* back has 3 (ping rx hardware, kernel, library) */

struct ow_series {
	int64_t *v;
	uint8_t *cls;           /* each value's class */
	size_t n;               /* values (after ow_stats: those of the class reported) */
	uint64_t missing;       /* rounds without a usable pair of stamps */
	uint64_t negative;      /* < 0: the two clocks disagree */
	uint64_t left_out;      /* pairs of other classes than the one reported */
	struct ow_class c[OW_CLASSES];
	int nc;
	const char *from, *to, *clock;  /* the class reported */
	struct tool_stats st;
};

/* What each stamp of a sample was, decided from the stamp itself (the
 * message's FLIT_MSGF_RECV_TS_*, the pong's tag, the transmit stamp's
 * FLIT_TXTS_*), never from the set-up: a driver may accept hardware
 * stamping and give no stamp (qemu's e1000e), and the library then hands
 * out the kernel's software stamps, flagged so. */
enum { SEEN_HW, SEEN_KERNEL, SEEN_LIBRARY, SEEN_NONE, SEEN_N };
static const char *const seen_key[SEEN_N] = { "hardware", "software", "library", "none" };
static const char *const seen_name[SEEN_N] = {
	"hardware", "software (kernel)", "software (the library's, at delivery)", "none" };

enum { SITE_PING_RX, SITE_PONG_RX, SITE_PING_TX, SITE_N };
static const char *const site_name[SITE_N] = {
	"receive (ping side)", "receive (pong side)", "transmit (ping side)" };
static const char *const site_key[SITE_N] = { "ts_rx_seen", "ts_pong_rx_seen", "ts_tx_seen" };

struct one_way {
	struct ow_series s[OW_N];
	struct flit_ts_status st;
	bool have_st, tx;
	uint64_t seen[SITE_N][SEEN_N];
	bool site[SITE_N];      /* the site has samples to count */
	flit_phc *phc;          /* the ping's NIC clock, for hardware receive stamps */
	struct flit_phc_sync sync;
	uint64_t synced_at;     /* round of the last sync */
	uint64_t peer_plain;    /* replies without the pong's stamp */
	char phc_why[256];
};

static void ow_add(struct ow_series *s, int64_t v, const char *from, const char *to,
		   const char *clock)
{
	int k = 0;

	while (k < s->nc && (s->c[k].from != from || s->c[k].to != to || s->c[k].clock != clock))
		k++;
	if (k == OW_CLASSES) {          /* not reached: at most 3 classes a series */
		s->missing++;
		return;
	}
	if (k == s->nc)
		s->c[s->nc++] = (struct ow_class){ from, to, clock, 0 };
	s->c[k].n++;
	s->cls[s->n] = (uint8_t)k;
	s->v[s->n++] = v;
}

static void ow_init(struct side *p, struct one_way *ow)
{
	const struct options *o = p->o;

	memset(ow, 0, sizeof(*ow));
	for (int d = 0; d < OW_N; d++)
		if (!(ow->s[d].v = calloc(o->count, sizeof(int64_t))) ||
		    !(ow->s[d].cls = calloc(o->count, 1)))
			side_fail(p, "out of memory");
	ow->st.sz = sizeof(ow->st);
	ow->have_st = flit_ctx_ts_status(p->ctx, o->com.transport, &ow->st) == 0;
	ow->tx = ow->have_st && ow->st.tx != FLIT_TS_NONE;
	ow->site[SITE_PING_RX] = true;
	ow->site[SITE_PONG_RX] = o->com.size >= TS_MIN_SIZE;
	ow->site[SITE_PING_TX] = ow->tx;
	if (ow->have_st && ow->st.rx == FLIT_TS_HARDWARE) {
		ow->phc = flit_phc_open(ow->st.ifname);
		if (!ow->phc)
			snprintf(ow->phc_why, sizeof(ow->phc_why), "%s", flit_errmsg());
	}
	ow->sync.sz = sizeof(ow->sync);
}

/* A hardware receive stamp of the ping's NIC on CLOCK_REALTIME (synced
 * again every 1024 rounds, so that the rate between the clocks is known). */
static bool ow_phc_to_rt(struct one_way *ow, uint64_t round, uint64_t *ns)
{
	if (!ow->phc)
		return false;
	if (!ow->sync.phc_ns || round - ow->synced_at >= 1024) {
		if (flit_phc_sync(ow->phc, CLOCK_REALTIME, 0, &ow->sync)) {
			snprintf(ow->phc_why, sizeof(ow->phc_why), "%s", flit_errmsg());
			flit_phc_close(ow->phc);
			ow->phc = NULL;
			return false;
		}
		ow->synced_at = round;
	}
	*ns = flit_phc_to_host(&ow->sync, *ns);
	return true;
}

/* After round trip `round` (message `seq`): count what its stamps were and
 * add the pairs it got. */
static void ow_round(struct side *p, struct one_way *ow, uint64_t round)
{
	const struct ping_state *s = &p->st;
	uint64_t code = s->peer_rx, prx = code & RXTAG_MASK;
	const char *pto = code & RXTAG_HW ? "pong rx hardware" :
			  code & RXTAG_KERN ? "pong rx kernel" : "pong rx library";
	bool rx_hw = s->rx_flags & FLIT_MSGF_RECV_TS_HW;

	ow->seen[SITE_PING_RX][!(s->rx_flags & FLIT_MSGF_RECV_TS) ? SEEN_NONE : rx_hw ? SEEN_HW :
			       s->rx_flags & FLIT_MSGF_RECV_TS_KERNEL ? SEEN_KERNEL : SEEN_LIBRARY]++;
	if (ow->site[SITE_PONG_RX])
		ow->seen[SITE_PONG_RX][!code ? SEEN_NONE : code & RXTAG_HW ? SEEN_HW :
				       code & RXTAG_KERN ? SEEN_KERNEL : SEEN_LIBRARY]++;

	/* back: the reply's send stamp -> our receive stamp */
	if ((s->rx_flags & FLIT_MSGF_SEND_TS) && (s->rx_flags & FLIT_MSGF_RECV_TS)) {
		uint64_t rx = s->rx_ts;
		if (!rx_hw || ow_phc_to_rt(ow, round, &rx))
			ow_add(&ow->s[OW_BACK], (int64_t)(rx - s->reply_send_ts), "pong send",
			       rx_hw ? "ping rx hardware" : s->rx_flags & FLIT_MSGF_RECV_TS_KERNEL ?
			       "ping rx kernel" : "ping rx library",
			       rx_hw ? "realtime (ping's PHC converted)" : "realtime");
		else
			ow->s[OW_BACK].missing++;
	} else {
		ow->s[OW_BACK].missing++;
	}
	/* fwd: our send -> the pong's receive stamp, when it is CLOCK_REALTIME */
	if (code && !(code & RXTAG_HW))
		ow_add(&ow->s[OW_FWD], (int64_t)(prx - s->send_rt), "ping send", pto, "realtime");
	else
		ow->s[OW_FWD].missing++;
	/* wire: our transmit stamp -> the pong's receive stamp of that kind */
	if (!ow->tx)
		return;
	struct flit_tx_stamp tx = { .sz = sizeof(tx) };
	bool got = flit_pub_tx_stamp(p->pub, s->msg_seq, &tx) == 0 && tx.ts_ns;
	bool tx_hw = got && (tx.flags & FLIT_TXTS_HARDWARE);
	ow->seen[SITE_PING_TX][!got ? SEEN_NONE : tx_hw ? SEEN_HW : SEEN_KERNEL]++;
	if (got && code && (tx_hw ? (code & RXTAG_HW) != 0 : (code & RXTAG_KERN) != 0))
		ow_add(&ow->s[OW_WIRE], (int64_t)(prx - tx.ts_ns),
		       tx_hw ? "ping tx hardware" : "ping tx kernel", pto, tx_hw ? "phc" : "realtime");
	else
		ow->s[OW_WIRE].missing++;
}

/* Statistics of the class most pairs had (the others are counted in
 * left_out): signed values, shifted by the minimum (exact), then back. */
static void ow_stats(struct ow_series *s)
{
	int64_t mn = INT64_MAX;
	uint64_t *u = (uint64_t *)s->v;
	size_t n = 0;
	int best = 0;

	memset(&s->st, 0, sizeof(s->st));
	if (!s->n)
		return;
	for (int k = 1; k < s->nc; k++)
		if (s->c[k].n > s->c[best].n)
			best = k;
	s->from = s->c[best].from;
	s->to = s->c[best].to;
	s->clock = s->c[best].clock;
	for (size_t i = 0; i < s->n; i++)
		if (s->cls[i] == best)
			s->v[n++] = s->v[i];
	s->left_out = s->n - n;
	s->n = n;
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i] < mn)
			mn = s->v[i];
		s->negative += s->v[i] < 0;
	}
	for (size_t i = 0; i < s->n; i++)
		u[i] = (uint64_t)(s->v[i] - mn);
	tool_stats_compute(u, s->n, 1.0, &s->st);
	s->st.min += (double)mn;
	s->st.avg += (double)mn;
	s->st.p50 += (double)mn;
	s->st.p99 += (double)mn;
	s->st.p999 += (double)mn;
	s->st.max += (double)mn;
}

/* The clock(s) of the one-way figures: "realtime", "phc", "realtime+phc". */
static const char *ow_clock(const struct one_way *ow)
{
	bool rt = false, phc = false;

	for (int d = 0; d < OW_N; d++)
		if (ow->s[d].n) {
			rt |= strncmp(ow->s[d].clock, "realtime", 8) == 0;
			phc |= strcmp(ow->s[d].clock, "phc") == 0;
		}
	return rt && phc ? "realtime+phc" : phc ? "phc" : rt ? "realtime" : "none";
}

static uint64_t seen_total(const uint64_t *c)
{
	uint64_t n = 0;

	for (int k = 0; k < SEEN_N; k++)
		n += c[k];
	return n;
}

/* The kind of a site's stamps: "hardware", "software", "library", "none"
 * (no stamp at all), "mixed" (more than one kind; samples without a stamp
 * do not make a mix). */
static const char *seen_kind(const uint64_t *c)
{
	int k = SEEN_NONE, kinds = 0;

	for (int i = 0; i < SEEN_NONE; i++)
		if (c[i]) {
			k = i;
			kinds++;
		}
	return kinds > 1 ? "mixed" : seen_key[k];
}

/* "3000 software (kernel)", "296 software (kernel), 4 none" */
static void seen_str(char *buf, size_t len, const uint64_t *c)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int k = 0; k < SEEN_N; k++)
		if (c[k] && off < len)
			off += (size_t)snprintf(buf + off, len - off, "%s%llu %s", off ? ", " : "",
						(unsigned long long)c[k], seen_name[k]);
	if (!off)
		snprintf(buf, len, "no samples");
}

/* Hardware asked for and not every sample of `site` got a hardware stamp:
 * say so, and why as far as this side knows ("accepted by the driver" only
 * where this side's driver did accept).  Returns false if nothing to say. */
static bool seen_hw_phrase(char *buf, size_t len, const struct options *o,
			   const struct one_way *ow, int site)
{
	const uint64_t *c = ow->seen[site];
	int set = !ow->have_st ? FLIT_TS_NONE : site == SITE_PING_TX ? ow->st.tx : ow->st.rx;
	unsigned long long hw = c[SEEN_HW], n = seen_total(c);

	if (o->ts != FLIT_TS_HARDWARE || hw == n || !ow->site[site])
		return false;
	snprintf(buf, len, site == SITE_PONG_RX ?
		 "hardware asked for, but %llu of %llu samples carried a hardware stamp" :
		 set == FLIT_TS_HARDWARE ? "hardware asked for and accepted by the driver, "
		 "but %llu of %llu samples carried a hardware stamp" :
		 "hardware asked for, not available: %llu of %llu samples carried a hardware stamp",
		 hw, n);
	return true;
}

/* Header lines ('#', after the run header): what was asked, what was set
 * up, what the samples' stamps really were, whether the one-way figures
 * mean anything. */
static void ow_header(FILE *hdr, const struct options *o, const struct one_way *ow)
{
	const char *asked = flit_ts_kind_name(o->ts);
	char b[256];

	if (ow->have_st)
		fprintf(hdr, "# timestamps: %s asked for; set up%s%s: receive %s, transmit %s%s\n",
			     asked, ow->st.ifname[0] ? " on " : "", ow->st.ifname,
			     flit_ts_kind_name(ow->st.rx), flit_ts_kind_name(ow->st.tx),
			     ow->st.rx == FLIT_TS_HARDWARE || ow->st.tx == FLIT_TS_HARDWARE ?
			     " (the driver accepted hardware stamping: what the samples carried "
			     "is counted below)" : "");
	else
		fprintf(hdr, "# timestamps: %s asked for; the %s transport has no stamp settings "
			     "of its own: the stamps messages carry are used (the library's "
			     "CLOCK_REALTIME send and delivery stamps where there are no others)\n",
			     asked, o->com.transport);
	if (ow->have_st && ow->st.why[0])
		fprintf(hdr, "# timestamps: hardware stamps asked for but not available: %s; "
			     "using software stamps\n", ow->st.why);
	else if (o->ts == FLIT_TS_HARDWARE && !ow->have_st)
		fprintf(hdr, "# timestamps: hardware stamps asked for but not available "
			     "(the %s transport has none); using the library's stamps\n", o->com.transport);
	for (int site = 0; site < SITE_N; site++) {
		char why[160];

		if (!ow->site[site])
			continue;
		seen_str(b, sizeof(b), ow->seen[site]);
		if (seen_hw_phrase(why, sizeof(why), o, ow, site))
			fprintf(hdr, "# stamps seen, %s: %s: %s\n", site_name[site], why, b);
		else
			fprintf(hdr, "# stamps seen, %s: %s\n", site_name[site], b);
	}
	if (ow->phc_why[0])
		fprintf(hdr, "# timestamps: this side's PHC is not usable (%s): hardware receive "
			     "stamps are left out of 1w-back\n", ow->phc_why);
	if (ow->peer_plain)
		fprintf(hdr, "# timestamps: %llu replies came without the pong's receive stamp "
			     "(run the pong side with --timestamps too)\n",
			     (unsigned long long)ow->peer_plain);
	if (o->com.size < TS_MIN_SIZE)
		fprintf(hdr, "# timestamps: ping->pong one-way needs messages of %d bytes or more "
			     "(the pong returns its receive stamp in bytes 8..15)\n", TS_MIN_SIZE);
	fprintf(hdr, "# one-way (ns, separate from RTT/2): 1w-fwd = ping send -> pong receive "
		     "stamp, 1w-back = pong send stamp -> ping receive stamp, 1w-wire = ping "
		     "transmit stamp -> pong receive stamp; each of one clock, that of the "
		     "stamps the samples had: clock %s\n", ow_clock(ow));
	fprintf(hdr, "# one-way validity: %s\n", o->com.role == TOOL_SIDES_BOTH ?
		     "ping and pong run on this host: their stamps share one CLOCK_REALTIME "
		     "(hardware pairs: one NIC clock, or PHC-synchronised NICs)" :
		     "ping and pong may run on different hosts: meaningful only if their "
		     "CLOCK_REALTIME (software stamps) or NIC clocks (hardware: PHC-synchronised, "
		     "ptp4l) are synchronised; not checked here");
}

/* The JSON members: ",\"timestamps\":...,\"one_way\":{...}". */
static size_t ow_json(char *buf, size_t len, const struct options *o, const struct one_way *ow)
{
	size_t off = 0;
	char tmp[768];

#define OW_PUT(...) do { \
		int n_ = snprintf(buf + off, len - off, __VA_ARGS__); \
		if (n_ < 0 || (size_t)n_ >= len - off) { buf[0] = '\0'; return 0; } \
		off += (size_t)n_; \
	} while (0)
	OW_PUT(",\"timestamps\":\"%s\",\"ts_clock\":\"%s\"", flit_ts_kind_name(o->ts), ow_clock(ow));
	/* ts_rx, ts_tx: what this side's stamps were (from the samples) */
	OW_PUT(",\"ts_rx\":\"%s\",\"ts_tx\":\"%s\"", seen_kind(ow->seen[SITE_PING_RX]),
	       ow->site[SITE_PING_TX] ? seen_kind(ow->seen[SITE_PING_TX]) : "none");
	if (ow->have_st)
		OW_PUT(",\"ts_rx_set_up\":\"%s\",\"ts_tx_set_up\":\"%s\"",
		       flit_ts_kind_name(ow->st.rx), flit_ts_kind_name(ow->st.tx));
	for (int site = 0; site < SITE_N; site++) {
		const uint64_t *c = ow->seen[site];
		if (!ow->site[site])
			continue;
		OW_PUT(",\"%s\":{", site_key[site]);
		for (int k = 0; k < SEEN_N; k++)
			OW_PUT("%s\"%s\":%llu", k ? "," : "", seen_key[k], (unsigned long long)c[k]);
		OW_PUT("}");
	}
	if (ow->have_st && ow->st.why[0])
		off += tool_json_member(buf + off, len - off, "ts_hw_unavailable", ow->st.why);
	else if (o->ts == FLIT_TS_HARDWARE && !ow->have_st) {
		snprintf(tmp, sizeof(tmp), "the %s transport has no NIC stamps", o->com.transport);
		off += tool_json_member(buf + off, len - off, "ts_hw_unavailable", tmp);
	}
	/* hardware asked for, and samples without a hardware stamp */
	size_t t = 0;
	tmp[0] = '\0';
	for (int site = 0; site < SITE_N && t < sizeof(tmp); site++) {
		char why[160];
		if (seen_hw_phrase(why, sizeof(why), o, ow, site))
			t += (size_t)snprintf(tmp + t, sizeof(tmp) - t, "%s%s: %s", t ? "; " : "",
					      site_name[site], why);
	}
	if (tmp[0])
		off += tool_json_member(buf + off, len - off, "ts_hw_missing", tmp);
	off += tool_json_member(buf + off, len - off, "one_way_valid",
				o->com.role == TOOL_SIDES_BOTH ? "same host: CLOCK_REALTIME shared" :
				"two processes, possibly two hosts: needs synchronised clocks");
	OW_PUT(",\"one_way\":{");
	bool first = true;
	for (int d = 0; d < OW_N; d++) {
		const struct ow_series *s = &ow->s[d];
		if (!s->n) {
			OW_PUT("%s\"%s\":{\"n\":0,\"missing\":%llu}", first ? "" : ",", ow_key[d],
			       (unsigned long long)s->missing);
			first = false;
			continue;
		}
		OW_PUT("%s\"%s\":{\"n\":%zu,\"from\":\"%s\",\"to\":\"%s\",\"clock\":\"%s\","
		       "\"min_ns\":%.0f,\"avg_ns\":%.1f,\"p50_ns\":%.0f,\"p99_ns\":%.0f,"
		       "\"p999_ns\":%.0f,\"max_ns\":%.0f,\"stddev_ns\":%.1f,\"negative\":%llu,"
		       "\"missing\":%llu", first ? "" : ",", ow_key[d], s->n, s->from, s->to,
		       s->clock, s->st.min, s->st.avg, s->st.p50, s->st.p99, s->st.p999, s->st.max,
		       s->st.stddev, (unsigned long long)s->negative,
		       (unsigned long long)s->missing);
		if (s->left_out)
			OW_PUT(",\"mixed\":true,\"left_out\":%llu", (unsigned long long)s->left_out);
		OW_PUT("}");
		first = false;
	}
	OW_PUT("}");
#undef OW_PUT
	return off;
}

static void ow_rows(FILE *f, const struct options *o, const struct one_way *ow)
{
	bool any = false;

	for (int d = 0; d < OW_N; d++) {
		const struct ow_series *s = &ow->s[d];
		struct tool_result r;

		if (!s->n)
			continue;
		any = true;
		tool_result_init(&r, "flit-pong");
		r.label = ow_label[d];
		r.size = (int64_t)o->com.size;
		r.lat = &s->st;
		tool_lat_row(f, &r);
	}
	if (!any)
		fprintf(f, "# one-way: no pair of stamps came back\n");
	for (int d = 0; d < OW_N; d++) {
		const struct ow_series *s = &ow->s[d];
		if (s->n)
			fprintf(f, "# %s: %s -> %s (%s), %zu samples%s", ow_label[d], s->from, s->to,
				s->clock, s->n, s->negative ? ", some negative: the clocks disagree" : "");
		if (s->n && s->left_out) {
			fprintf(f, "; %llu pairs of other stamps left out (", (unsigned long long)s->left_out);
			for (int k = 0, j = 0; k < s->nc; k++)
				if (s->c[k].from != s->from || s->c[k].to != s->to || s->c[k].clock != s->clock)
					fprintf(f, "%s%zu %s -> %s, %s", j++ ? "; " : "", s->c[k].n,
						s->c[k].from, s->c[k].to, s->c[k].clock);
			fprintf(f, "): a series holds one kind of stamps");
		}
		if (s->n)
			fprintf(f, "\n");
	}
}

static void ow_free(struct one_way *ow)
{
	for (int d = 0; d < OW_N; d++) {
		free(ow->s[d].v);
		free(ow->s[d].cls);
	}
	flit_phc_close(ow->phc);
}

static void run_ping(const struct options *o, const struct tool_clock *clk,
		     const char *ping_topic, const char *pong_topic, pid_t child)
{
	struct side p = {
		.o = o, .clk = clk, .child = child,
		.timeout_ticks = tool_ticks(clk, o->com.timeout_s * 1e9),
		.st = { .clk = clk, .size = o->com.size },
	};
	char cpustr[32], mode[160], clkdesc[128], extra[8192], cfgs[512], setup[512] = "";
	struct one_way ow;
	struct flit_counters ctr = { .sz = sizeof(ctr) };
	bool have_ctr;
	struct tool_stats stats;
	struct tool_result res;
	uint64_t *samples;
	FILE *hdr = o->com.json ? stderr : stdout;
	int status;

	samples = malloc(o->count * sizeof(*samples));
	p.buf = aligned_alloc(64, (o->com.size + 63) & ~(size_t)63);
	if (!samples || !p.buf)
		side_fail(&p, "out of memory");
	memset(samples, 0, o->count * sizeof(*samples));   /* fault in now */
	memset(p.buf, 0, o->com.size);

	open_ctx(&p);
	open_sub(&p, pong_topic, ping_on_msg, &p.st);
	open_pub(&p, ping_topic);

	ping_hello(&p);
	if (o->ts) {
		p.st.ts = true;
		p.st.sent = p.buf;
		ow_init(&p, &ow);
	}
	for (uint64_t i = 0; i < o->warmup; i++)
		ping_round(&p, i);
	for (uint64_t i = 0; i < o->count; i++) {
		samples[i] = ping_round(&p, o->warmup + i);
		if (o->ts)
			ow_round(&p, &ow, i);
	}
	ping_bye(&p);
	if (o->ts) {
		for (int d = 0; d < OW_N; d++)
			ow_stats(&ow.s[d]);
		ow.peer_plain = p.st.peer_plain;
	}

	have_ctr = flit_ctx_counters(p.ctx, &ctr) == 0;
	if (flit_ctx_describe(p.ctx, o->com.transport, setup, sizeof(setup)) < 0)
		setup[0] = '\0';
	flit_sub_close(p.sub);
	flit_pub_close(p.pub);
	flit_ctx_close(p.ctx);
	p.sub = NULL;
	p.pub = NULL;
	p.ctx = NULL;
	if (p.child > 0) {
		char why[96];

		if (tool_reap(p.child, 5000, &status))
			tool_fail("reaping the pong process: %s", strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			tool_fail("the pong process %s",
				  tool_wstatus_str(status, why, sizeof(why)));
	}

	tool_cpus_str(o->com.cpus, o->com.ncpus, cpustr, sizeof(cpustr));
	if (!strcmp(o->com.transport, "udp") || !strcmp(o->com.transport, "xdp")) {
		char m[32], b[48];
		const char *um = tool_config_get(&o->com.config, "source.udp.mode", m, sizeof(m));

		/* xdp: the data path is AF_XDP; its set-up is in "setup" */
		snprintf(mode, sizeof(mode), "%s,%s,%s,unbatched,spin,pinned=%s", o->com.transport,
			 um && *um ? um : "multicast",
			 !strcmp(o->com.transport, "xdp") ? "af_xdp"
				 : tool_udp_path_label(&o->com.config, b, sizeof(b)), cpustr);
	} else if (!strcmp(o->com.transport, "rdma")) {
		char m[32];
		const char *rm = tool_config_get(&o->com.config, "source.rdma.mode", m, sizeof(m));

		bool mc = rm && !strcmp(rm, "multicast");
		snprintf(mode, sizeof(mode), "rdma,%s,unbatched,spin,pinned=%s",
			 mc ? "ud,multicast" : !rm || !*rm ? "rc,send" : !strcmp(rm, "write") ? "rc,write" : "rc,send",
			 cpustr);
	} else {
		snprintf(mode, sizeof(mode), "%s,unbatched,spin,pinned=%s",
			 strcmp(o->com.transport, "shm") ? "default" :
			 o->com.overwrite ? "overwrite" : "paced", cpustr);
	}
	tool_header(hdr, "%s ping-pong, %zu-byte messages, %s; ping '%s' on CPU %d; "
		    "RTT/2 in ns; clock %s", o->com.transport, o->com.size, mode, ping_topic,
		    o->com.cpus[0], tool_clock_desc(clk, clkdesc, sizeof(clkdesc)));
	if (setup[0] && strcmp(setup, o->com.transport))
		tool_header(hdr, "%s", setup);
	if (o->ts)
		ow_header(hdr, o, &ow);
	if (p.st.lost)
		tool_warn("%llu replies reported lost (overwrite mode)",
			  (unsigned long long)p.st.lost);

	tool_stats_compute(samples, o->count, clk->tsc.ns_per_tick / 2, &stats);
	tool_result_init(&res, "flit-pong");
	res.label = o->com.transport;
	res.transport = o->com.transport;
	res.size = (int64_t)o->com.size;
	res.count = (int64_t)o->count;
	res.lat = &stats;
	res.clock = clk->name;
	res.mode = mode;
	{
		size_t off = (size_t)snprintf(extra, sizeof(extra),
					      "\"warmup\":%llu,\"lost\":%llu",
					      (unsigned long long)o->warmup,
					      (unsigned long long)p.st.lost);
		/* the ping's own context: NAKs its receiver sent, frames its
		 * source retransmitted, messages reported lost to it */
		if (o->com.net && have_ctr)
			off += (size_t)snprintf(extra + off, sizeof(extra) - off,
				",\"naks_sent\":%llu,\"retransmissions\":%llu,"
				"\"msgs_lost\":%llu",
				(unsigned long long)ctr.naks_sent,
				(unsigned long long)ctr.retransmissions,
				(unsigned long long)ctr.msgs_lost);
		if (o->com.netns)
			off += tool_json_member(extra + off, sizeof(extra) - off,
						"netns", o->com.netns);
		if (o->com.peer_netns)
			off += tool_json_member(extra + off, sizeof(extra) - off,
						"peer_netns", o->com.peer_netns);
		if (tool_config_user(&o->com.config, cfgs, sizeof(cfgs)))
			off += tool_json_member(extra + off, sizeof(extra) - off, "config", cfgs);
		if (setup[0])
			off += tool_json_member(extra + off, sizeof(extra) - off, "setup", setup);
		if (o->ts)
			off += ow_json(extra + off, sizeof(extra) - off, o, &ow);
		tool_cdf_member(extra + off, sizeof(extra) - off, samples, o->count,
				clk->tsc.ns_per_tick / 2);
	}
	res.extra = extra;
	if (o->com.json) {
		tool_json_print(stdout, &res);
	} else {
		tool_lat_header(stdout);
		tool_lat_row(stdout, &res);
		if (o->ts)
			ow_rows(stdout, o, &ow);
	}
	if (o->com.hist)
		tool_hist_print(hdr, samples, o->count, clk->tsc.ns_per_tick / 2);
	if (o->ts)
		ow_free(&ow);
	free(samples);
	free(p.buf);
}

/* ---- main ---------------------------------------------------------------------- */

static void parse(int argc, char **argv, struct options *o)
{
	enum { OPT_TIMESTAMPS = TOOL_OPT_OWN };
	static const struct tool_shape shape = {
		.role = { "ping", "pong" }, .side = { "ping", "pong" },
		.rdma_ports = 2,        /* the ping listens on P, the pong on P + 1 */
	};
	static const struct option longopts[] = {
		TOOL_LONGOPTS,
		{ "size",      required_argument, NULL, 's' },
		{ "count",     required_argument, NULL, 'n' },
		{ "warmup",    required_argument, NULL, 'w' },
		{ "mode",      required_argument, NULL, 'm' },
		{ "role",      required_argument, NULL, 'r' },
		{ "peer-topic-prefix", required_argument, NULL, 'p' },
		{ "timestamps", required_argument, NULL, OPT_TIMESTAMPS },
		{ "rdma-addr", required_argument, NULL, TOOL_OPT_RDMA_ADDR },
		{ "rdma-port", required_argument, NULL, TOOL_OPT_RDMA_PORT },
		{ "hist",      no_argument,       NULL, 'H' },
		{ 0 }
	};
	struct tool_opts *t = &o->com;
	int opt;

	*o = (struct options){ .count = 100000, .warmup = 10000 };
	tool_opts_init(t, &shape);
	while ((opt = getopt_long(argc, argv, ":t:s:n:w:c:m:T:r:p:C:jHvh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'n': o->count = tool_parse_count("count", optarg, 1, 1000000000); break;
		case 'w': o->warmup = tool_parse_count("warmup", optarg, 0, 1000000000); break;
		case 'r': tool_opts_role(t, optarg); break;
		case OPT_TIMESTAMPS:
			if (!strcmp(optarg, "software"))
				o->ts = FLIT_TS_SOFTWARE;
			else if (!strcmp(optarg, "hardware"))
				o->ts = FLIT_TS_HARDWARE;
			else
				tool_usage_exit("bad --timestamps '%s': software or hardware", optarg);
			break;
		default: tool_opts_parse(t, opt, optarg, argv);
		}
	}
	tool_opts_end(t, argc, argv);
	if (o->ts) {
		/* both sides: send stamps in every message, kernel or NIC
		 * receive stamps (the library's own where the transport has
		 * none), transmit stamps of the udp sources */
		const char *m = flit_ts_kind_name(o->ts);
		tool_config_add(&t->config, "source.timestamps = true");
		tool_config_add(&t->config, "receiver.timestamps = true");
		tool_config_add(&t->config, "context.udp.timestamps = %s", m);
		tool_config_add(&t->config, "context.udp.tx_timestamps = %s", m);
	}
	tool_opts_finish(t);
	if (!strcmp(t->transport, "rdma")) {
		/* the frame: header, message header and timestamp, payload */
		uint64_t need = (24 + 16 + t->size + 7 + 63) & ~63ull;
		if (need > 8192)
			o->rdma_frame = need;
		if (!t->rdma_port)
			t->rdma_port = t->role == TOOL_SIDES_BOTH ? 20000 + 2 * (unsigned)(getpid() % 20000) : 14500;
		tool_rdma_addr_default(t->rdma_addr, sizeof(t->rdma_addr));
	}
}

struct pong_run {
	const struct options *o;
	struct tool_clock clk;
	char ping_topic[FLIT_TOPIC_MAX + 1], pong_topic[FLIT_TOPIC_MAX + 1];
};

static int side_ping(void *arg, pid_t peer)
{
	struct pong_run *r = arg;

	run_ping(r->o, &r->clk, r->ping_topic, r->pong_topic, peer);
	return 0;
}

static int side_pong(void *arg)
{
	struct pong_run *r = arg;

	return run_pong(r->o, &r->clk, r->ping_topic, r->pong_topic);
}

int main(int argc, char **argv)
{
	struct options o;
	struct pong_run r = { .o = &o };

	tool_init("flit-pong", usage);
	parse(argc, argv, &o);
	tool_set_verbose(o.com.verbose);
	snprintf(r.ping_topic, sizeof(r.ping_topic), "%s.ping", o.com.prefix);
	snprintf(r.pong_topic, sizeof(r.pong_topic), "%s.pong", o.com.prefix);
	return tool_run_sides(&(struct tool_sides){
		.opts = &o.com, .clk = &r.clk,
		.run_a = side_ping, .run_b = side_pong, .arg = &r,
	});
}
