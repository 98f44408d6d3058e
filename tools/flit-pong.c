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
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

enum role { ROLE_BOTH, ROLE_PING, ROLE_PONG };

struct options {
	const char *transport;
	size_t size;
	uint64_t count, warmup;
	int cpus[2], ncpus;
	bool overwrite, json, hist;
	double timeout_s;
	enum role role;
	char prefix[FLIT_TOPIC_MAX - 8];
	int verbose;
	struct tool_config config;      /* every context's inline config */
	const char *netns, *peer_netns;
	bool net;                       /* a network transport (not shm) */
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
	bool peer_gone, peer_died;
	/* The pong's source, known from its first echo: only its EOS counts
	 * (a stale source of the same topic may come and go). */
	bool peer_known;
	uint32_t peer_session;
	uint64_t stale;         /* replies to other messages (extra hellos) */
	uint64_t lost;          /* messages reported lost (overwrite mode) */
	/* first bad reply */
	uint64_t bad;
	uint64_t bad_seq;
	size_t bad_len;
	long bad_off;
};

/* The pong's state (callback argument). */
struct pong_state {
	const struct tool_clock *clk;
	flit_pub *pub;
	uint64_t timeout_ticks;
	uint64_t echoed;
	bool bye, ping_gone, ping_died;
	bool ping_known;        /* ping_session is the ping's source */
	uint32_t ping_session;
	int err;                /* first send failure, -errno or status */
	char errmsg[256];
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
};

/* Fail: take a forked pong down and reap it, close our objects (so no ring
 * file is left behind), then exit 1 with the message. */
static noreturn TOOL_FMT(2, 3) void side_fail(struct side *p, const char *fmt, ...)
{
	char msg[512], why[96];
	int status;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	why[0] = '\0';
	if (p->child > 0) {
		if (tool_child_exited(p->child, &status) == 1) {
			tool_wstatus_str(status, why, sizeof(why));
		} else {
			kill(p->child, SIGKILL);
			waitpid(p->child, &status, 0);
		}
		p->child = 0;
	}
	flit_sub_close(p->sub);
	flit_pub_close(p->pub);
	flit_ctx_close(p->ctx);
	if (*why)
		tool_fail("%s (the pong process %s)", msg, why);
	tool_fail("%s", msg);
}

/* ---- shared set-up --------------------------------------------------------- */

static void open_ctx(struct side *p)
{
	char err[768];

	p->ctx = tool_ctx_new(&p->o->config, err, sizeof(err));
	if (!p->ctx)
		side_fail(p, "creating the context: %s", err);
}

static void open_pub(struct side *p, const char *topic)
{
	const struct options *o = p->o;
	char config[64];
	FLIT_OPTS(flit_pub_opts, popts, .transport = o->transport, .config = config);

	/* Both sides publish unbatched, whatever a config file or -C says. */
	if (!strcmp(o->transport, "shm"))
		snprintf(config, sizeof(config), "batch = false\nshm.mode = %s\n",
			 o->overwrite ? "overwrite" : "paced");
	else
		snprintf(config, sizeof(config), "batch = false\n");
	p->pub = flit_pub_new(p->ctx, topic, &popts);
	if (!p->pub)
		side_fail(p, "publishing '%s' on %s: %s", topic, o->transport,
			  flit_errmsg());
	if (o->size > flit_pub_max_msg(p->pub))
		side_fail(p, "size %zu is larger than the %s source's largest "
			  "message (%zu bytes)", o->size, o->transport,
			  flit_pub_max_msg(p->pub));
}

static void open_sub(struct side *p, const char *topic, flit_msg_fn fn,
		     void *arg)
{
	FLIT_OPTS(flit_sub_opts, sopts, .on_msg = fn, .arg = arg);

	p->sub = flit_sub_new(p->ctx, topic, &sopts);
	if (!p->sub)
		side_fail(p, "subscribing to '%s': %s", topic, flit_errmsg());
}

static void pin(int cpu)
{
	int rc = tool_pin_cpu(cpu);

	if (rc)
		tool_fail("pinning to CPU %d: %s", cpu, strerror(-rc));
}

/* ---- pong side ---------------------------------------------------------------- */

static void pong_on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct pong_state *s = arg;
	uint64_t spins = 0, t0 = 0;
	int rc;

	(void)sub;
	if (m->kind == FLIT_MSG_EOS && s->ping_known &&
	    m->session_id == s->ping_session) {
		s->ping_gone = true;
		s->ping_died = m->flags & FLIT_MSGF_SOURCE_DIED;
		return;
	}
	if (m->kind != FLIT_MSG_DATA || s->err)
		return;
	if (!s->ping_known) {
		s->ping_known = true;
		s->ping_session = m->session_id;
	}
	/* Echo from inside the callback.  The ping reads its replies while it
	 * waits, so back-pressure here is brief; bound it all the same. */
	while ((rc = flit_pub_send(s->pub, m->data, m->len)) == FLIT_BACK_PRESSURED ||
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
	struct pong_state s = { .clk = clk, .timeout_ticks = tool_ticks(clk, o->timeout_s * 1e9) };
	struct side p = { .o = o, .clk = clk };
	uint64_t spins = 0, idle_since = 0;
	bool idle = false;

	open_ctx(&p);
	open_sub(&p, ping_topic, pong_on_msg, &s);
	open_pub(&p, pong_topic);
	s.pub = p.pub;
	while (!s.bye && !s.ping_gone && !s.err) {
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
					  ping_topic, o->timeout_s);
			}
		}
	}
	if (s.err)
		side_fail(&p, "%s", s.errmsg);
	if (!s.bye)
		side_fail(&p, "the ping side's source ended before saying bye%s",
			  s.ping_died ? " (its process died)" : "");
	flit_pub_flush(p.pub);
	flit_sub_close(p.sub);
	flit_pub_close(p.pub);
	flit_ctx_close(p.ctx);
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
		if (s->peer_known && m->session_id == s->peer_session) {
			s->peer_gone = true;
			s->peer_died = m->flags & FLIT_MSGF_SOURCE_DIED;
		}
		return;
	case FLIT_MSG_LOSS:
		s->lost += m->lost;
		return;
	default:
		return;
	}
	if (!s->peer_known) {
		s->peer_known = true;
		s->peer_session = m->session_id;
	}
	seq = m->len >= 8 ? tool_payload_seq(m->data) : 0;
	if (seq == s->expect && m->len == s->size) {
		s->t1 = tool_now(s->clk);       /* the reply is here: stop the clock */
		s->got = true;
	} else if (seq == SEQ_BYE) {
		s->bye_seen = true;
	} else {
		if ((seq & SEQ_CTL) && seq != SEQ_BYE)
			s->hello_seen = true;
		s->stale++;
	}
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
	if (p->st.peer_gone)
		side_fail(p, "%s: the pong side's source ended%s", what,
			  p->st.peer_died ? " (its process died)" : "");
	if (tool_now(p->clk) - t0 > limit)
		side_fail(p, "%s: no answer within %g s", what, secs);
}

static void ping_check(struct side *p, uint64_t t0, const char *what)
{
	ping_check_limit(p, t0, p->timeout_ticks, p->o->timeout_s, what);
}

/* Send buf, spinning while back-pressured (bounded). */
static void ping_send(struct side *p, const char *what)
{
	uint64_t spins = 0, t0 = tool_now(p->clk);
	int rc;

	while ((rc = flit_pub_send(p->pub, p->buf, p->o->size)) == FLIT_BACK_PRESSURED ||
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
	double secs = p->o->timeout_s;

	if (p->o->net && secs < NET_STARTUP_MIN_S) {
		secs = NET_STARTUP_MIN_S;
		limit = tool_ticks(clk, secs * 1e9);
	}

	p->st.expect = SEQ_HELLO - 1;   /* matches nothing: hellos are stale */
	while (!p->st.hello_seen) {
		uint64_t now = tool_now(clk);

		if (now >= next) {
			int rc;

			tool_payload_fill(p->buf, p->o->size, SEQ_HELLO | k++);
			rc = flit_pub_send(p->pub, p->buf, p->o->size);
			if (rc < 0)
				side_fail(p, "start-up: send: %s", flit_errmsg());
			next = now + ms;
			if (p->st.peer_gone || now - t0 > limit ||
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

	tool_payload_fill(p->buf, p->o->size, seq);
	s->expect = seq;
	s->got = false;
	t0 = tool_now(p->clk);
	while ((rc = flit_pub_send(p->pub, p->buf, p->o->size)) != FLIT_OK) {
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
			  p->o->size, s->bad_len != p->o->size ? "wrong length" :
			  "corrupt payload", s->bad_off);
	return s->t1 - t0;
}

static void ping_bye(struct side *p)
{
	uint64_t spins = 0, t0;

	tool_payload_fill(p->buf, p->o->size, SEQ_BYE);
	ping_send(p, "saying bye");
	flit_pub_flush(p->pub);
	t0 = tool_now(p->clk);
	/* Wait for the echo: the pong has seen the end.  Bounded. */
	while (!p->st.bye_seen && !p->st.peer_gone &&
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

static void run_ping(const struct options *o, const struct tool_clock *clk,
		     const char *ping_topic, const char *pong_topic, pid_t child)
{
	struct side p = {
		.o = o, .clk = clk, .child = child,
		.timeout_ticks = tool_ticks(clk, o->timeout_s * 1e9),
		.st = { .clk = clk, .size = o->size },
	};
	char cpustr[32], mode[160], clkdesc[128], extra[4096], cfgs[512], setup[512] = "";
	struct flit_counters ctr = { .sz = sizeof(ctr) };
	bool have_ctr;
	struct tool_stats stats;
	struct tool_result res;
	uint64_t *samples;
	FILE *hdr = o->json ? stderr : stdout;
	int status;

	samples = malloc(o->count * sizeof(*samples));
	p.buf = aligned_alloc(64, (o->size + 63) & ~(size_t)63);
	if (!samples || !p.buf)
		side_fail(&p, "out of memory");
	memset(samples, 0, o->count * sizeof(*samples));   /* fault in now */
	memset(p.buf, 0, o->size);

	open_ctx(&p);
	open_sub(&p, pong_topic, ping_on_msg, &p.st);
	open_pub(&p, ping_topic);

	ping_hello(&p);
	for (uint64_t i = 0; i < o->warmup; i++)
		ping_round(&p, i);
	for (uint64_t i = 0; i < o->count; i++)
		samples[i] = ping_round(&p, o->warmup + i);
	ping_bye(&p);

	have_ctr = flit_ctx_counters(p.ctx, &ctr) == 0;
	if (flit_ctx_describe(p.ctx, o->transport, setup, sizeof(setup)) < 0)
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

	tool_cpus_str(o->cpus, o->ncpus, cpustr, sizeof(cpustr));
	if (!strcmp(o->transport, "udp") || !strcmp(o->transport, "xdp")) {
		char m[32], b[32];
		const char *um = tool_config_get(&o->config, "source.udp.mode", m, sizeof(m));
		const char *ub = tool_config_get(&o->config, "context.udp.backend", b, sizeof(b));

		/* xdp: the data path is AF_XDP; its set-up is in "setup" */
		snprintf(mode, sizeof(mode), "%s,%s,%s,unbatched,spin,pinned=%s", o->transport,
			 um && *um ? um : "multicast",
			 !strcmp(o->transport, "xdp") ? "af_xdp" : ub && *ub ? ub : "sockets", cpustr);
	} else {
		snprintf(mode, sizeof(mode), "%s,unbatched,spin,pinned=%s",
			 strcmp(o->transport, "shm") ? "default" :
			 o->overwrite ? "overwrite" : "paced", cpustr);
	}
	tool_header(hdr, "%s ping-pong, %zu-byte messages, %s; ping '%s' on CPU %d; "
		    "RTT/2 in ns; clock %s", o->transport, o->size, mode, ping_topic,
		    o->cpus[0], tool_clock_desc(clk, clkdesc, sizeof(clkdesc)));
	if (setup[0] && strcmp(setup, o->transport))
		tool_header(hdr, "%s", setup);
	if (p.st.lost)
		tool_warn("%llu replies reported lost (overwrite mode)",
			  (unsigned long long)p.st.lost);

	tool_stats_compute(samples, o->count, clk->tsc.ns_per_tick / 2, &stats);
	tool_result_init(&res, "flit-pong");
	res.label = o->transport;
	res.transport = o->transport;
	res.size = (int64_t)o->size;
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
		if (o->net && have_ctr)
			off += (size_t)snprintf(extra + off, sizeof(extra) - off,
				",\"naks_sent\":%llu,\"retransmissions\":%llu,"
				"\"msgs_lost\":%llu",
				(unsigned long long)ctr.naks_sent,
				(unsigned long long)ctr.retransmissions,
				(unsigned long long)ctr.msgs_lost);
		if (o->netns)
			off += tool_json_member(extra + off, sizeof(extra) - off,
						"netns", o->netns);
		if (o->peer_netns)
			off += tool_json_member(extra + off, sizeof(extra) - off,
						"peer_netns", o->peer_netns);
		if (tool_config_user(&o->config, cfgs, sizeof(cfgs)))
			off += tool_json_member(extra + off, sizeof(extra) - off, "config", cfgs);
		if (setup[0])
			off += tool_json_member(extra + off, sizeof(extra) - off, "setup", setup);
		tool_cdf_member(extra + off, sizeof(extra) - off, samples, o->count,
				clk->tsc.ns_per_tick / 2);
	}
	res.extra = extra;
	if (o->json) {
		tool_json_print(stdout, &res);
	} else {
		tool_lat_header(stdout);
		tool_lat_row(stdout, &res);
	}
	if (o->hist)
		tool_hist_print(hdr, samples, o->count, clk->tsc.ns_per_tick / 2);
	free(samples);
	free(p.buf);
}

/* ---- main ---------------------------------------------------------------------- */

static void parse(int argc, char **argv, struct options *o)
{
	enum { OPT_NETNS = 256, OPT_PEER_NETNS };
	static const struct option longopts[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "size",      required_argument, NULL, 's' },
		{ "count",     required_argument, NULL, 'n' },
		{ "warmup",    required_argument, NULL, 'w' },
		{ "cpus",      required_argument, NULL, 'c' },
		{ "mode",      required_argument, NULL, 'm' },
		{ "timeout",   required_argument, NULL, 'T' },
		{ "role",      required_argument, NULL, 'r' },
		{ "peer-topic-prefix", required_argument, NULL, 'p' },
		{ "config",    required_argument, NULL, 'C' },
		{ "netns",     required_argument, NULL, OPT_NETNS },
		{ "peer-netns", required_argument, NULL, OPT_PEER_NETNS },
		{ "json",      no_argument,       NULL, 'j' },
		{ "hist",      no_argument,       NULL, 'H' },
		{ "verbose",   no_argument,       NULL, 'v' },
		{ "help",      no_argument,       NULL, 'h' },
		{ 0 }
	};
	bool prefix_set = false, cpus_set = false;
	const char *cfg[TOOL_CONFIG_LINES];
	int opt, ncfg = 0;

	*o = (struct options){
		.transport = "shm", .size = 16, .count = 100000, .warmup = 10000,
		.cpus = { 0, 1 }, .ncpus = 2, .timeout_s = 10, .role = ROLE_BOTH,
	};
	while ((opt = getopt_long(argc, argv, ":t:s:n:w:c:m:T:r:p:C:jHvh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 't': o->transport = tool_parse_transport(optarg); break;
		case 's': o->size = tool_parse_size("size", optarg, 8, 16 << 20); break;
		case 'n': o->count = tool_parse_count("count", optarg, 1, 1000000000); break;
		case 'w': o->warmup = tool_parse_count("warmup", optarg, 0, 1000000000); break;
		case 'c':
			o->ncpus = tool_parse_cpus(optarg, o->cpus, 2);
			cpus_set = true;
			if (o->ncpus == 1)
				o->cpus[1] = o->cpus[0];
			break;
		case 'm':
			if (!strcmp(optarg, "paced"))
				o->overwrite = false;
			else if (!strcmp(optarg, "overwrite"))
				o->overwrite = true;
			else
				tool_usage_exit("bad mode '%s': paced or overwrite", optarg);
			break;
		case 'T': o->timeout_s = tool_parse_seconds("timeout", optarg, 0.01, 3600); break;
		case 'r':
			if (!strcmp(optarg, "ping"))
				o->role = ROLE_PING;
			else if (!strcmp(optarg, "pong"))
				o->role = ROLE_PONG;
			else
				tool_usage_exit("bad role '%s': ping or pong", optarg);
			break;
		case 'p':
			if (!*optarg || strlen(optarg) >= sizeof(o->prefix))
				tool_usage_exit("bad topic prefix '%s': 1..%zu bytes",
						optarg, sizeof(o->prefix) - 1);
			snprintf(o->prefix, sizeof(o->prefix), "%s", optarg);
			prefix_set = true;
			break;
		case 'C': tool_config_defer(cfg, &ncfg, optarg); break;
		case OPT_NETNS: o->netns = tool_parse_netns("--netns", optarg); break;
		case OPT_PEER_NETNS:
			o->peer_netns = tool_parse_netns("--peer-netns", optarg);
			break;
		case 'j': o->json = true; break;
		case 'H': o->hist = true; break;
		case 'v': o->verbose++; break;
		case 'h': tool_help_exit();
		default: tool_getopt_error(opt, argv);
		}
	}
	if (optind < argc)
		tool_usage_exit("unexpected argument '%s'", argv[optind]);
	if (o->peer_netns && o->role != ROLE_BOTH)
		tool_usage_exit("--peer-netns is for the forked pong: not with --role "
				"(use --netns on each side)");
	/* Every context: only the transport measured (an shm run opens no
	 * socket, a udp run does not see shm), then the user's lines. */
	o->net = strcmp(o->transport, "shm") != 0;
	tool_config_init(&o->config);
	tool_config_add(&o->config, "context.transports = %s", o->transport);
	for (int i = 0; i < ncfg; i++)
		tool_config_add_user(&o->config, cfg[i], NULL);
	if (!cpus_set) {
		/* The first two CPUs we may use (0,1 on most machines). */
		o->ncpus = tool_default_cpus(o->cpus, 2);
		if (o->ncpus == 0)
			tool_fail("no CPU to run on (sched_getaffinity)");
		if (o->ncpus == 1) {
			if (o->role == ROLE_BOTH)
				tool_fail("needs two CPUs; this process may use only one");
			o->cpus[1] = o->cpus[0];
		}
	}
	if (o->role == ROLE_BOTH && o->ncpus == 2 && o->cpus[0] == o->cpus[1])
		tool_usage_exit("bad cpu list: ping and pong spin, so they need "
				"two different CPUs");
	if (!prefix_set)
		snprintf(o->prefix, sizeof(o->prefix), o->role == ROLE_BOTH ?
			 "flit-pong.%d" : "flit-pong", (int)getpid());
}

int main(int argc, char **argv)
{
	char ping_topic[FLIT_TOPIC_MAX + 1], pong_topic[FLIT_TOPIC_MAX + 1];
	char err[512];
	struct options o;
	struct tool_clock clk;
	pid_t parent, child;
	int peer_fd = -1;

	tool_init("flit-pong", usage);
	parse(argc, argv, &o);
	tool_set_verbose(o.verbose);
	snprintf(ping_topic, sizeof(ping_topic), "%s.ping", o.prefix);
	snprintf(pong_topic, sizeof(pong_topic), "%s.pong", o.prefix);
	/* This side's namespace first: no context or socket exists yet. */
	if (o.netns)
		tool_netns_enter_name(o.netns);
	if (o.peer_netns && (peer_fd = tool_netns_open(o.peer_netns, err, sizeof(err))) < 0)
		tool_fail("%s", err);
	tool_net_check(o.transport, &o.config, o.netns);
	tool_config_check(&o.config);      /* a bad -C line fails here, once */
	tool_clock_init(&clk);

	switch (o.role) {
	case ROLE_PING:
		pin(o.cpus[0]);
		run_ping(&o, &clk, ping_topic, pong_topic, 0);
		return 0;
	case ROLE_PONG:
		pin(o.cpus[1]);
		return run_pong(&o, &clk, ping_topic, pong_topic);
	case ROLE_BOTH:
		break;
	}

	/* Pin before forking, so a refusal leaves no child behind; the child
	 * moves itself to its own CPU. */
	pin(o.cpus[0]);
	fflush(NULL);
	parent = getpid();
	child = fork();
	if (child < 0)
		tool_fail("fork: %s", strerror(errno));
	if (child == 0) {
		tool_child_init(parent);
		tool_init("flit-pong (pong)", usage);
		if (peer_fd >= 0) {
			if (tool_netns_enter(peer_fd, o.peer_netns, err, sizeof(err)))
				tool_fail("%s", err);
			close(peer_fd);
			tool_net_check(o.transport, &o.config, o.peer_netns);
		}
		pin(o.cpus[1]);
		exit(run_pong(&o, &clk, ping_topic, pong_topic));
	}
	if (peer_fd >= 0)
		close(peer_fd);
	run_ping(&o, &clk, ping_topic, pong_topic, child);
	return 0;
}
