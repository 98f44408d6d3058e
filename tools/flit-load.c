// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit-load: latency under a rate-controlled load, with reflected pings (the
 * lbmpubload / lbmsubload method of 29West / Ultra Messaging).
 *
 * The publisher sends a stream on "<prefix>.load" at a requested rate; the
 * subscriber checks each message's sequence number, discards load messages
 * and republishes every ping at once on "<prefix>.reply", where the
 * publisher reads it back.  One sample = (arrival of the reflection - the
 * send time the ping carries) / 2, both read by the publisher on its CPU.
 *
 * The rate loop (outer/inner loop with catch-up): the outer loop reads the
 * clock, computes how many messages should have been sent by now at the
 * requested rate (message i is due i/rate seconds after the start), sends
 * the ones not sent yet as one batch (at most --max-batch), flushes the
 * source, polls its context for reflections, and spins (or, with --sleep,
 * sleeps until the next message is due).  A stall is made up by larger
 * batches afterwards, so the schedule, not the loop's speed, sets the rate.
 *
 * Pings: about --ping-rate per second, one in each interval of rate /
 * ping_rate messages, at a uniformly random position in it, so that a ping's
 * place in the catch-up batch and in a transport batch (a datagram, a
 * batched shm frame) varies and does not alias with the batching.
 *
 * A point (size, rate) runs a warm-up, then the measured messages: those due
 * in the --duration after it.  Achieved rate = measured messages / (time
 * from when the first was due to when the last was sent): the sender keeping
 * up gives the requested rate, a stall it made up for costs nothing, a
 * sender that cannot keep up shows.  A sender still behind its schedule
 * without a break for the last 5 % of the point (at least 25 ms) makes the
 * point CPU-bound (the backlog is not sent then), and the sweep of that size
 * stops there.
 *
 * Rounds (--rounds N): the sweep of a size runs N times over, and each row
 * merges its rate's N points (histograms merged, counters summed).  On a
 * machine whose stalls of a few ms set the average (a VM, a host without
 * isolated CPUs), interleaving the rates that way gives each rate the same
 * share of the machine's bad phases, where N times the duration once per
 * rate gives one rate a quiet minute and the next a noisy one.
 *
 * Interference: each side counts the times the kernel switched it out
 * while it wanted to run (involuntary context switches, getrusage), and the
 * publisher its longest turn of the rate loop (which also shows a vCPU the
 * hypervisor held); both go with each row, so an average set by a stall
 * says so (the publisher's count covers its point with the warm-up, the
 * subscriber's the time from one end-of-point answer to the next).
 *
 * Stalls (--stall-us, default 50 on shm, 500 on the network transports):
 * each side counts the turns of its loop that took longer (a preemption, a
 * held vCPU: not a poll's own work, at most 256 messages; a publisher's
 * turn also sends up to --max-batch messages, and its --sleep is not
 * counted).  The subscriber writes its count into bytes 16..23 of each
 * reflection (and tells its limit in its answer to hello, its count in
 * every end-of-point answer).  At each ping's send the publisher keeps its
 * own count and the subscriber's last reflected one.  A ping met a stall
 * when its reflection finds either count moved, when it was due before the
 * end of a stall of the publisher (the catch-up after it, behind its
 * backlog), or when the subscriber's count moved between its reflection
 * and the next (a stall while reflecting it).  Each row also gives the
 * statistics of the pings that met none: the transport's latency under
 * that load without the machine's stalls (messages of 24 bytes or more).
 *
 * Payload: the first 8 bytes are kind (top byte: load, ping, hello, end,
 * bye) and the stream sequence number (56 bits, every message after the
 * start-up counts); a ping carries its send time (TSC ticks) in bytes 8..15.
 * The rest is a fixed pattern (not checked: the subscriber's check must stay
 * cheap).  At the end of each point the publisher sends "end", and the
 * subscriber answers with its counters (messages, gaps, duplicates, bad
 * messages, reflections): every ping sent before "end" has been reflected
 * by then (both streams are in order), so a ping missing is lost.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <flit/hist.h>

#include "tool.h"

static const char usage[] =
"Usage: flit-load [-t TRANSPORT] [-s SIZES] [-r RATES] [-d SECONDS] [options]\n"
"Latency under load: messages at a requested rate with pings among them,\n"
"reflected by the subscriber; RTT/2 per ping.  The subscriber is forked\n"
"unless --role is given.\n"
"\n"
"  -t, --transport T      shm (default), udp, xdp, rdma; every context gets\n"
"                         context.transports = T (shm opens no socket)\n"
"  -s, --sizes LIST       message sizes, 16 .. 16M, e.g. \"32 128 256 512 1024\"\n"
"                         (the default; blanks or commas; suffixes K M)\n"
"  -r, --rates LIST       offered rates in msgs/s, e.g. \"100k 500k 1M 2M\" (the\n"
"                         default; suffixes k M G x1000, fractions: 1.5M);\n"
"                         run in increasing order\n"
"  -d, --duration S       measured seconds per point (default 2)\n"
"  -w, --warmup S         unmeasured seconds at the rate first (default 0.25)\n"
"      --rounds N         sweep each size N times over (default 1); a row merges\n"
"                         its rate's N points, so every rate meets the same\n"
"                         share of the machine's stalls; the sweep stops at\n"
"                         the first rate CPU-bound in any round\n"
"      --stall-us US      a loop turn of either side longer than US is a\n"
"                         stall (default 50 on shm, 500 on the network\n"
"                         transports; 0: not watched); each row says\n"
"                         how many pings met one and the latency of the rest\n"
"                         (messages of 24 bytes or more)\n"
"  -P, --ping-rate N      pings per second (default 5000; at most one ping\n"
"                         per message)\n"
"  -B, --max-batch N      most messages sent per wake-up, 1 .. 1M (default 256)\n"
"      --sleep            sleep until the next message is due instead of\n"
"                         spinning (a wake-up costs ~40 us on some VMs)\n"
"      --topics N         spread the load over N topics of one session\n"
"                         (P.load.00000 ..), 1 .. 65536; the subscriber takes\n"
"                         them all by a pattern (rdma: each topic) and answers\n"
"                         hello once it knows every one (default 1: the topic\n"
"                         P.load)\n"
"      --no-batch         one transport frame per message (default: the\n"
"                         source batches, source.batch = true, and each\n"
"                         catch-up batch is flushed)\n"
"  -c, --cpus A,B         pin the publisher to CPU A, the subscriber to B\n"
"                         (default: the first two CPUs this process may use)\n"
"  -T, --timeout S        give up when start-up, an end-of-point answer or a\n"
"                         stalled send takes longer than S seconds (default\n"
"                         10; udp start-up: at least 2)\n"
"  -C, --config LINE      a config line for every context (repeatable; after\n"
"                         the tool's own lines, see docs/CONFIG.md)\n"
"      --netns NAME       run in network namespace NAME (the forked\n"
"                         subscriber too, unless --peer-netns); needs root\n"
"      --peer-netns NAME  the forked subscriber runs in network namespace\n"
"                         NAME; not with --role\n"
"  -R, --role R           run only one side: pub or sub (two commands; start\n"
"                         the sub first)\n"
"  -p, --peer-topic-prefix P\n"
"                         topics are P.load and P.reply (default with --role:\n"
"                         flit-load; without: flit-load.<pid>)\n"
"  -j, --json             one JSON object per point on stdout (header to\n"
"                         stderr)\n"
"      --csv              CSV on stdout, a header line first (header to stderr)\n"
"  -H, --hist             after each point, a log2 histogram of RTT/2 (on the\n"
"                         header's stream)\n"
"  -v, --verbose          library messages to stderr (-vv: debug)\n"
"  -h, --help             this text\n"
"\n"
"Table: per message size, one row per rate: Msgs/sec (offered), Min, Mean,\n"
"Median, 99.9%, Max, StdDev of RTT/2 in microseconds, the achieved rate,\n"
"pings measured and lost; \"CPU-bound after X msgs/sec\" ends a size's sweep\n"
"when the sender could not keep up (behind its schedule without a break for\n"
"the last 5 % of the point, at least 25 ms).  Under it, per rate: the times\n"
"the kernel switched each side out while it could run, and the publisher's\n"
"longest turn of its loop (a stall there, e.g. a vCPU held by its host).\n"
"\n"
"Exit status: 0 ok, 1 runtime failure (on shm also: a ping lost, a sequence\n"
"gap or duplicate), 2 usage error.\n";

/* ---- payload ------------------------------------------------------------------ */

#define KIND_SHIFT 56
#define SEQ_MASK   ((1ull << KIND_SHIFT) - 1)

enum kind {
	K_LOAD = 'L',
	K_PING = 'P',
	K_HELLO = 'H',  /* start-up, outside the stream; echoed */
	K_END = 'E',    /* end of a point: answered with the subscriber's counters */
	K_BYE = 'B',    /* echoed; the subscriber exits */
};

/* Smallest message: kind + sequence, then the ping's send time. */
#define MIN_SIZE 16
/* A reflection carries the subscriber's stall count from here on, so a
 * message needs STALL_MIN bytes to carry it. */
#define STALL_OFF 16
#define STALL_MIN (STALL_OFF + 8)
/* The subscriber's answer to hello: its stall limit (ns), count, and
 * preemptions, after the hello's first word. */
enum { HELLO_WORD0, HELLO_LIMIT_NS, HELLO_STALLS, HELLO_PREEMPTED, HELLO_WORDS };

/* The subscriber's answer to K_END: word 0 echoes the end message. */
enum {
	REP_WORD0, REP_POINT, REP_MSGS, REP_GAPS, REP_DUPES, REP_BAD, REP_PINGS,
	REP_LOST, REP_REPLY_BP, REP_NAKS_SENT, REP_RETX_RECEIVED, REP_PREEMPTED,
	REP_STALLS, REP_WORDS
};

static inline uint64_t ld64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void st64(void *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

static inline uint64_t word0(enum kind k, uint64_t seq)
{
	return (uint64_t)k << KIND_SHIFT | (seq & SEQ_MASK);
}

/* Times the kernel switched the calling thread out while it could run. */
static uint64_t preempted(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? 0 : (uint64_t)ru.ru_nivcsw;
}

/* Loop turns longer than `limit` ticks: call once per turn (an unfenced
 * clock read: a turn's length, not an order, is wanted). */
struct stall_watch {
	uint64_t limit;         /* 0: not watched */
	uint64_t last;          /* the previous turn's clock; 0: none yet */
	uint64_t count;
	uint64_t at;            /* when the last stall ended */
};

static inline void stall_turn(struct stall_watch *w, const struct tool_clock *clk)
{
	uint64_t now;

	if (!w->limit)
		return;
	now = clk->use_tsc ? flit_tsc_ticks() : flit_monotonic_raw_ns();
	/* signed: an unfenced read may come before the last one */
	if (w->last && (int64_t)(now - w->last) > (int64_t)w->limit) {
		w->count++;
		w->at = now;
	}
	w->last = now;
}

/* ---- options ------------------------------------------------------------------ */

#define MAX_LIST 16
/* Spins between clock checks in the wait loops. */
#define CHECK_EVERY 0x3fffu
/* udp start-up waits at least this long (topic resolution: 10-100 ms). */
#define NET_STARTUP_MIN_S 2.0
/* A point is CPU-bound when the sender has been behind its schedule without
 * a break for the last BEHIND_FRAC of the duration (at least BEHIND_MIN_S):
 * its backlog kept growing.  (Not "achieved < 98 %" alone: on a shared VM a
 * sender preempted for a few ms just before the end misses that on a short
 * point while it keeps up with ease; a sender that cannot keep up is behind
 * from the moment it falls behind to the end.) */
#define BEHIND_FRAC 0.05
#define BEHIND_MIN_S 0.025
/* Pings in flight, at most (a power of two). */
#define FIFO_CAP (1u << 16)

struct options {
	struct tool_opts com;           /* -t -c -T -C -p -j -H -v, --role ... */
	size_t sizes[MAX_LIST];
	int nsizes;
	double rates[MAX_LIST];
	int nrates;
	double duration_s, warmup_s, ping_rate, stall_us;
	uint64_t max_batch;
	int rounds;
	unsigned topics;        /* --topics: load topics of one session */
	bool sleep, batch, csv;
};

/* --stall-us in ticks (0: not watched; parse() takes 0 or 1 us and more,
 * never less than a tick). */
static uint64_t stall_limit(const struct options *o, const struct tool_clock *clk)
{
	return tool_ticks(clk, o->stall_us * 1e3);
}

/* A source: shm paced (lossless: a lost ping means a bug), batched or not;
 * in session `session` if not NULL. */
static flit_pub *open_pub(flit_ctx *ctx, const struct options *o,
			  const char *topic, bool batch, const char *session)
{
	char config[128];
	FLIT_OPTS(flit_pub_opts, popts, .transport = o->com.transport, .config = config);

	snprintf(config, sizeof(config), "batch = %s\n%s%s%s", batch ? "true" : "false",
		 strcmp(o->com.transport, "shm") ? "" : "shm.mode = paced\n",
		 session ? "session = " : "", session ? session : "");
	return flit_pub_new(ctx, topic, &popts);
}

/* ---- subscriber side ---------------------------------------------------------- */

struct sub_state {
	const struct tool_clock *clk;
	flit_ctx *ctx;
	flit_pub *reply;
	uint64_t timeout_ticks;
	uint64_t next;          /* stream sequence number expected */
	/* the library's sequence number of stream message 0 (the source
	 * numbers the start-up hellos too): a LOSS range is not a gap */
	uint64_t base;
	bool based;
	uint64_t msgs, gaps, dupes, bad, pings, lost, reply_bp;
	bool bye;
	struct tool_peer pub;   /* the load's source */
	struct stall_watch stall;
	uint8_t *rbuf;          /* a ping marked with the stall count */
	size_t rbuf_len;
	uint64_t known, topics; /* --topics: BOS seen, and how many to wait for */
	int err;                /* first reflection failure, -errno or status */
	char errmsg[256];
};

/* Send on the reply topic at once; back-pressure is brief (the publisher
 * polls its replies whenever it waits), but bound it all the same. */
static void sub_reflect(struct sub_state *s, const void *data, size_t len)
{
	uint64_t spins = 0, t0 = 0;
	int rc;

	while ((rc = flit_pub_send(s->reply, data, len)) == FLIT_BACK_PRESSURED ||
	       rc == FLIT_NOT_CONNECTED) {
		s->reply_bp++;
		if ((++spins & CHECK_EVERY) == 0) {
			uint64_t now = tool_now(s->clk);

			if (!t0)
				t0 = now;
			else if (now - t0 > s->timeout_ticks)
				break;
		}
	}
	if (rc == FLIT_OK)
		rc = flit_pub_flush(s->reply);
	if (rc && !s->err) {
		s->err = rc;
		snprintf(s->errmsg, sizeof(s->errmsg), "reflecting a %zu-byte message: %s",
			 len, rc < 0 ? flit_errmsg() : flit_strstatus(rc));
	}
}

static void sub_on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct sub_state *s = arg;
	uint64_t w, seq, rep[REP_WORDS];
	struct flit_counters ctr = { .sz = sizeof(ctr) };

	(void)sub;
	switch (m->kind) {
	case FLIT_MSG_DATA:
		break;
	case FLIT_MSG_BOS:
		s->known++;
		return;
	case FLIT_MSG_EOS:
		tool_peer_eos(&s->pub, m);
		return;
	case FLIT_MSG_LOSS:
		s->lost += m->lost;
		if (s->based && m->seq == s->base + s->next)
			s->next += m->lost;
		return;
	default:
		return;
	}
	if (m->len < MIN_SIZE) {
		s->bad++;
		return;
	}
	tool_peer_data(&s->pub, m);
	w = ld64(m->data);
	seq = w & SEQ_MASK;
	if (w >> KIND_SHIFT == K_HELLO) {
		uint64_t hello[HELLO_WORDS] = {
			[HELLO_WORD0] = w,
			[HELLO_LIMIT_NS] = (uint64_t)tool_ns(s->clk, s->stall.limit),
			[HELLO_STALLS] = s->stall.count,
			[HELLO_PREEMPTED] = preempted(),
		};

		/* --topics: the stream starts once every topic is known
		 * here (a message of a topic not learned yet is not ours) */
		if (s->known < s->topics)
			return;
		sub_reflect(s, hello, sizeof(hello));
		return;
	}
	/* The stream: one compare per message. */
	if (!s->based) {
		s->based = true;
		s->base = m->seq - seq;
	}
	s->msgs++;
	if (seq == s->next) {
		s->next++;
	} else if (seq > s->next) {
		s->gaps += seq - s->next;
		s->next = seq + 1;
	} else {
		s->dupes++;
	}
	switch (w >> KIND_SHIFT) {
	case K_LOAD:
		return;
	case K_PING:
		s->pings++;
		if (s->stall.limit && m->len >= STALL_MIN) {
			/* a stall inside this poll, before the ping, counts */
			stall_turn(&s->stall, s->clk);
			if (m->len > s->rbuf_len) {
				uint8_t *b = realloc(s->rbuf, m->len);

				if (!b) {
					s->err = -ENOMEM;
					snprintf(s->errmsg, sizeof(s->errmsg), "out of memory");
					return;
				}
				s->rbuf = b;
				s->rbuf_len = m->len;
			}
			memcpy(s->rbuf, m->data, m->len);
			st64(s->rbuf + STALL_OFF, s->stall.count);
			sub_reflect(s, s->rbuf, m->len);
		} else {
			sub_reflect(s, m->data, m->len);
		}
		return;
	case K_END:
		rep[REP_WORD0] = w;
		rep[REP_POINT] = ld64((const uint8_t *)m->data + 8);
		rep[REP_MSGS] = s->msgs;
		rep[REP_GAPS] = s->gaps;
		rep[REP_DUPES] = s->dupes;
		rep[REP_BAD] = s->bad;
		rep[REP_PINGS] = s->pings;
		rep[REP_LOST] = s->lost;
		rep[REP_REPLY_BP] = s->reply_bp;
		/* network transports: what reliability had to do */
		if (flit_ctx_counters(s->ctx, &ctr))
			memset(&ctr, 0, sizeof(ctr));
		rep[REP_NAKS_SENT] = ctr.naks_sent;
		rep[REP_RETX_RECEIVED] = ctr.retx_received;
		rep[REP_PREEMPTED] = preempted();
		rep[REP_STALLS] = s->stall.count;
		sub_reflect(s, rep, sizeof(rep));
		return;
	case K_BYE:
		sub_reflect(s, m->data, m->len);
		s->bye = true;
		return;
	default:
		s->bad++;
	}
}

/* The subscriber: serve until bye, the publisher's end, or `timeout` of
 * silence.  Returns the exit status. */
static int run_sub(const struct options *o, const struct tool_clock *clk,
		   const char *load_topic, const char *reply_topic)
{
	struct sub_state s = {
		.clk = clk, .timeout_ticks = tool_ticks(clk, o->com.timeout_s * 1e9),
		.stall.limit = stall_limit(o, clk), .topics = o->topics,
	};
	uint64_t spins = 0, idle_since = 0;
	bool idle = false;
	flit_ctx *ctx;
	flit_sub *sub;
	char err[768];
	FLIT_OPTS(flit_sub_opts, sopts, .on_msg = sub_on_msg, .arg = &s);

	ctx = tool_ctx_new(&o->com.config, err, sizeof(err));
	if (!ctx)
		tool_fail("creating the context: %s", err);
	s.ctx = ctx;
	s.reply = open_pub(ctx, o, reply_topic, false, NULL);
	if (!s.reply) {
		snprintf(err, sizeof(err), "%s", flit_errmsg());
		flit_ctx_close(ctx);
		tool_fail("publishing '%s' on %s: %s", reply_topic, o->com.transport, err);
	}
	sub = tool_spread_subscribe(ctx, o->com.transport, load_topic, o->topics, &sopts);
	if (!sub) {
		snprintf(err, sizeof(err), "%s", flit_errmsg());
		flit_pub_close(s.reply);
		flit_ctx_close(ctx);
		tool_fail("subscribing to '%s': %s", load_topic, err);
	}
	while (!s.bye && !s.pub.gone && !s.err) {
		int n;

		stall_turn(&s.stall, clk);
		n = flit_ctx_poll(ctx, 0);

		if (n < 0) {
			snprintf(s.errmsg, sizeof(s.errmsg), "polling: %s", flit_errmsg());
			s.err = n;
			break;
		}
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
				snprintf(s.errmsg, sizeof(s.errmsg), "no message on '%s' "
					 "for %g s", load_topic, o->com.timeout_s);
				s.err = -ETIMEDOUT;
				break;
			}
		}
	}
	flit_pub_flush(s.reply);
	flit_sub_close(sub);
	flit_pub_close(s.reply);
	flit_ctx_close(ctx);
	free(s.rbuf);
	if (s.err)
		tool_fail("%s", s.errmsg);
	if (!s.bye)
		tool_fail("the publisher's source ended before saying bye%s",
			  s.pub.died ? " (its process died)" : "");
	if (o->com.role == TOOL_SIDE_B)
		printf("# %s: %llu messages, %llu pings reflected, gaps %llu, "
		       "duplicates %llu, bad %llu, lost %llu\n", tool_name(),
		       (unsigned long long)s.msgs, (unsigned long long)s.pings,
		       (unsigned long long)s.gaps, (unsigned long long)s.dupes,
		       (unsigned long long)s.bad, (unsigned long long)s.lost);
	return 0;
}

/* ---- publisher side ------------------------------------------------------------ */

struct ping_rec {
	uint64_t seq;           /* stream sequence number */
	uint64_t tsc;           /* send time, tool clock ticks */
	uint64_t stalls;        /* the publisher's stall count then */
	uint64_t sub_stalls;    /* the subscriber's, as last reflected then */
	bool measured;          /* sent in the measured interval */
	bool late;              /* sent more than a stall after it was due */
};

/* RTT in ticks, to 1/1024, up to an hour: one geometry for every histogram
 * of the run (flit_hist_merge needs it). */
static flit_hist *rtt_hist_new(const struct tool_clock *clk)
{
	return flit_hist_new(10, tool_ticks(clk, 3600e9));
}

/* The publisher's view of the replies (callback argument). */
struct pub_state {
	const struct tool_clock *clk;
	flit_hist *hist;        /* RTT of measured pings, ticks */
	flit_hist *clean;       /* ... of those that met no stall */
	struct stall_watch stall;       /* the publisher's loop */
	uint64_t sub_stalls;    /* the subscriber's count in the last reflection */
	bool sub_watch;         /* the subscriber counts its stalls */
	uint64_t sub_limit_ns;  /* ... with this limit (its hello answer) */
	uint64_t sub_preempted; /* its preemptions then */
	uint64_t pings_stalled; /* measured pings that met a stall */
	struct {                /* the last reflection, its verdict pending */
		bool valid, measured, stalled;
		uint64_t rtt, sub_stalls;
	} pend;
	struct ping_rec *fifo;  /* pings sent, not yet reflected */
	uint64_t head, tail;    /* fifo[head & (FIFO_CAP-1)] .. tail */
	uint64_t pings_rx;      /* reflections matched */
	uint64_t pings_lost;    /* never reflected */
	uint64_t pings_dup;     /* reflections of nothing outstanding */
	uint64_t bad;           /* replies of wrong length, kind or contents */
	uint64_t lost_events;   /* messages reported lost (LOSS) on the reply topic */
	bool hello_seen, bye_seen;
	bool end_seen;
	uint64_t end_point;     /* the point an end answer is awaited for */
	uint64_t rep[REP_WORDS];
	struct tool_peer peer;  /* the reflections' source */
};

/* The pending reflection's verdict, now that the subscriber's count after
 * it is known (`sub_now`): moved means a stall while it was reflected. */
static void pend_settle(struct pub_state *s, uint64_t sub_now)
{
	if (!s->pend.valid)
		return;
	s->pend.valid = false;
	if (!s->pend.measured)
		return;
	if (s->pend.stalled || (s->sub_watch && sub_now != s->pend.sub_stalls))
		s->pings_stalled++;
	else
		flit_hist_record(s->clean, s->pend.rtt);
}

static void pub_on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct pub_state *s = arg;
	uint64_t t1 = tool_now(s->clk), w, seq, tsc;

	(void)sub;
	switch (m->kind) {
	case FLIT_MSG_DATA:
		break;
	case FLIT_MSG_EOS:
		tool_peer_eos(&s->peer, m);
		return;
	case FLIT_MSG_LOSS:
		s->lost_events += m->lost;
		return;
	default:
		return;
	}
	if (m->len < MIN_SIZE) {
		s->bad++;
		return;
	}
	tool_peer_data(&s->peer, m);
	w = ld64(m->data);
	seq = w & SEQ_MASK;
	switch (w >> KIND_SHIFT) {
	case K_PING:
		tsc = ld64((const uint8_t *)m->data + 8);
		/* Earlier pings still outstanding were skipped: lost. */
		while (s->head != s->tail && s->fifo[s->head & (FIFO_CAP - 1)].seq < seq) {
			s->pings_lost++;
			s->head++;
		}
		if (s->head != s->tail && s->fifo[s->head & (FIFO_CAP - 1)].seq == seq) {
			const struct ping_rec *r = &s->fifo[s->head & (FIFO_CAP - 1)];

			if (r->tsc != tsc) {
				s->bad++;
			} else {
				s->pings_rx++;
				if (r->measured)
					flit_hist_record(s->hist, t1 - tsc);
				if (s->stall.limit && m->len >= STALL_MIN) {
					uint64_t sub_st = s->sub_watch ?
						ld64((const uint8_t *)m->data + STALL_OFF) : 0;

					stall_turn(&s->stall, s->clk);
					pend_settle(s, sub_st);
					s->pend.valid = true;
					s->pend.measured = r->measured;
					s->pend.rtt = t1 - tsc;
					s->pend.sub_stalls = sub_st;
					s->pend.stalled = r->late || s->stall.count != r->stalls ||
							  sub_st != r->sub_stalls;
					s->sub_stalls = sub_st;
				}
			}
			s->head++;
		} else {
			s->pings_dup++;
		}
		return;
	case K_HELLO:
		if (m->len >= sizeof(uint64_t) * HELLO_WORDS) {
			const uint8_t *d = m->data;

			s->sub_limit_ns = ld64(d + 8 * HELLO_LIMIT_NS);
			s->sub_preempted = ld64(d + 8 * HELLO_PREEMPTED);
			if (!s->hello_seen)
				s->sub_stalls = ld64(d + 8 * HELLO_STALLS);
		}
		s->hello_seen = true;
		return;
	case K_END:
		if (m->len != sizeof(s->rep) ||
		    ld64((const uint8_t *)m->data + 8 * REP_POINT) != s->end_point) {
			s->bad++;
			return;
		}
		memcpy(s->rep, m->data, sizeof(s->rep));
		s->end_seen = true;
		return;
	case K_BYE:
		s->bye_seen = true;
		return;
	default:
		s->bad++;
	}
}

/* One point's results. */
struct point {
	size_t size;
	double rate;            /* offered */
	double achieved;        /* msgs/s over the measured interval */
	double secs;            /* measured interval */
	uint64_t sent;          /* measured messages sent */
	uint64_t pings_sent, pings_rx, pings_lost, pings_dup;
	uint64_t back_pressured;        /* sends refused (paced shm: the reader) */
	uint64_t batches;               /* wake-ups that sent something (measured) */
	uint64_t wakeups;               /* outer loop turns (measured) */
	uint64_t max_backlog;           /* most messages due and not sent */
	bool cpu_bound, cut;            /* cut: the backlog was not sent in time */
	/* the subscriber's counters over this point */
	uint64_t rx_msgs, gaps, dupes, rx_bad, reflected, reply_bp, loss;
	uint64_t naks_sent, retx_received;      /* the subscriber's context */
	uint64_t retransmissions, naks_received; /* the publisher's context */
	uint64_t bad;                   /* bad replies here */
	/* interference: involuntary context switches of each side, and the
	 * publisher's longest turn of its rate loop */
	uint64_t pub_preempted, sub_preempted, max_turn_ns;
	uint64_t pings_stalled;         /* measured pings that met a stall */
	int rounds;                     /* points merged into this one */
	struct tool_stats st;
	struct tool_stats clean;        /* the pings that met no stall */
};

/* The publisher's run: its objects, and the forked subscriber. */
struct pub {
	const struct options *o;
	const struct tool_clock *clk;
	flit_ctx *ctx;
	flit_pub *pub;          /* the load (--topics: its first topic) */
	flit_pub **pubs;        /* --topics: the load's topics, one session */
	unsigned npubs, k;      /* ... and the next one to send on */
	flit_sub *sub;
	pid_t child;            /* the forked subscriber, or 0 */
	uint64_t timeout_ticks;
	uint64_t seq;           /* next stream sequence number */
	uint64_t npoint;        /* points run (end messages sent) */
	uint64_t rng;
	uint8_t *buf;
	struct pub_state st;
	uint64_t prev_rep[REP_WORDS];   /* the previous end answer */
	flit_hist *hists[MAX_LIST];     /* per rate of a size: its rounds merged */
	flit_hist *cleans[MAX_LIST];    /* ... of the pings that met no stall */
};

static noreturn TOOL_FMT(2, 3) void pub_fail(struct pub *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tool_sides_fail(&p->child, "subscriber", p->sub, p->pub, p->ctx, msg);
}

/* In a wait, every CHECK_EVERY spins: fail after `limit` ticks since t0, or
 * when the subscriber is gone. */
static void pub_check_limit(struct pub *p, uint64_t t0, uint64_t limit,
			    double secs, const char *what)
{
	char why[96];
	int status;

	if (p->child > 0 && tool_child_exited(p->child, &status) == 1) {
		p->child = 0;
		pub_fail(p, "%s: the subscriber process %s", what,
			 tool_wstatus_str(status, why, sizeof(why)));
	}
	if (p->st.peer.gone)
		pub_fail(p, "%s: the subscriber's source ended%s", what,
			 p->st.peer.died ? " (its process died)" : "");
	if (tool_now(p->clk) - t0 > limit)
		pub_fail(p, "%s: no progress within %g s", what, secs);
}

static void pub_check(struct pub *p, uint64_t t0, const char *what)
{
	pub_check_limit(p, t0, p->timeout_ticks, p->o->com.timeout_s, what);
}

static void pub_poll(struct pub *p)
{
	stall_turn(&p->st.stall, p->clk);
	if (flit_ctx_poll(p->ctx, 0) < 0)
		pub_fail(p, "polling: %s", flit_errmsg());
}

/* A control message of the stream (end, bye), sent and flushed; while
 * back-pressured, the replies are read (bounded). */
static void pub_send_ctl(struct pub *p, enum kind k, uint64_t arg, const char *what)
{
	uint64_t spins = 0, t0 = tool_now(p->clk);
	uint8_t msg[MIN_SIZE];
	int rc;

	st64(msg, word0(k, p->seq));
	st64(msg + 8, arg);
	while ((rc = flit_pub_send(p->pub, msg, sizeof(msg))) != FLIT_OK) {
		if (rc < 0)
			pub_fail(p, "%s: send: %s", what, flit_errmsg());
		pub_poll(p);
		if ((++spins & CHECK_EVERY) == 0)
			pub_check(p, t0, what);
	}
	p->seq++;
	if ((rc = flit_pub_flush(p->pub)) < 0)
		pub_fail(p, "%s: flush: %s", what, flit_errmsg());
}

/* Start-up: sources and receivers find each other asynchronously, so say
 * hello every millisecond until the first echo comes back. */
static void pub_hello(struct pub *p)
{
	const struct tool_clock *clk = p->clk;
	uint64_t ms = tool_ticks(clk, 1e6), t0 = tool_now(clk), next = t0;
	uint64_t k = 0, limit = p->timeout_ticks;
	double secs = p->o->com.timeout_s;
	uint8_t msg[MIN_SIZE];

	if (p->o->com.net && secs < NET_STARTUP_MIN_S) {
		secs = NET_STARTUP_MIN_S;
		limit = tool_ticks(clk, secs * 1e9);
	}
	while (!p->st.hello_seen) {
		uint64_t now = tool_now(clk);

		if (now >= next) {
			int rc;

			st64(msg, word0(K_HELLO, k++));
			st64(msg + 8, 0);
			rc = flit_pub_send(p->pub, msg, sizeof(msg));
			if (rc < 0)
				pub_fail(p, "start-up: send: %s", flit_errmsg());
			if (flit_pub_flush(p->pub) < 0)
				pub_fail(p, "start-up: flush: %s", flit_errmsg());
			next = now + ms;
			if (p->st.peer.gone || now - t0 > limit ||
			    (p->child > 0 && k % 16 == 0))
				pub_check_limit(p, t0, limit, secs, p->child ?
					"start-up" : "start-up (is 'flit-load --role sub' "
					"running with the same prefix and transport?)");
		}
		pub_poll(p);
	}
}

/* End of a point: send "end", wait for the subscriber's counters; every ping
 * of the point has been reflected by then, or is lost. */
static void pub_end(struct pub *p, struct point *pt)
{
	uint64_t spins = 0, t0;
	const uint64_t *r = p->st.rep, *q = p->prev_rep;

	p->st.end_seen = false;
	p->st.end_point = p->npoint;
	pub_send_ctl(p, K_END, p->npoint, "ending a point");
	p->npoint++;
	t0 = tool_now(p->clk);
	while (!p->st.end_seen) {
		pub_poll(p);
		if ((++spins & CHECK_EVERY) == 0)
			pub_check(p, t0, "waiting for the subscriber's end-of-point answer");
	}
	p->st.pings_lost += p->st.tail - p->st.head;
	p->st.head = p->st.tail;
	if (p->st.sub_watch)
		p->st.sub_stalls = r[REP_STALLS];
	pend_settle(&p->st, p->st.sub_stalls);
	pt->rx_msgs = r[REP_MSGS] - q[REP_MSGS];
	pt->gaps = r[REP_GAPS] - q[REP_GAPS];
	pt->dupes = r[REP_DUPES] - q[REP_DUPES];
	pt->rx_bad = r[REP_BAD] - q[REP_BAD];
	pt->reflected = r[REP_PINGS] - q[REP_PINGS];
	pt->loss = r[REP_LOST] - q[REP_LOST];
	pt->reply_bp = r[REP_REPLY_BP] - q[REP_REPLY_BP];
	pt->naks_sent = r[REP_NAKS_SENT] - q[REP_NAKS_SENT];
	pt->retx_received = r[REP_RETX_RECEIVED] - q[REP_RETX_RECEIVED];
	pt->sub_preempted = r[REP_PREEMPTED] - q[REP_PREEMPTED];
	memcpy(p->prev_rep, r, sizeof(p->prev_rep));
}

static inline uint64_t rng_next(uint64_t *s)
{
	/* xorshift64* */
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, 1). */
static inline double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* Index of ping k: a uniformly random message of interval k (messages
 * [k * every, (k + 1) * every)), but not before message `min` (intervals
 * shorter than 2 messages may pick the same one twice). */
static inline uint64_t ping_index(uint64_t *rng, uint64_t k, double every,
				  uint64_t min)
{
	uint64_t i = (uint64_t)(((double)k + rng_unit(rng)) * every);

	return i > min ? i : min;
}

/* When message i of a point is due: i / rate after its start. */
static inline uint64_t due_at(uint64_t t_start, double per_tick, uint64_t i)
{
	return t_start + (uint64_t)((double)i / per_tick);
}

/* One point: the rate loop, then the end-of-point exchange. */
static void run_point(struct pub *p, size_t size, double rate, struct point *pt)
{
	const struct options *o = p->o;
	const struct tool_clock *clk = p->clk;
	struct pub_state *s = &p->st;
	double per_tick = rate * clk->tsc.ns_per_tick / 1e9;    /* msgs per tick */
	double every = rate / o->ping_rate;
	uint64_t i0 = (uint64_t)(rate * o->warmup_s);
	uint64_t i1 = i0 + (uint64_t)llround(rate * o->duration_s);
	double behind_s = o->duration_s * BEHIND_FRAC > BEHIND_MIN_S ?
			  o->duration_s * BEHIND_FRAC : BEHIND_MIN_S;
	uint64_t t_start, t_m0, t_end, t_behind, t_caught, t_done, t_stall, now = 0;
	uint64_t sent = 0, kping = 0, next_ping, spins = 0, prev, max_turn = 0, pre0;
	struct flit_counters c0 = { .sz = sizeof(c0) }, c1 = { .sz = sizeof(c1) };

	if (every < 1)
		every = 1;
	memset(pt, 0, sizeof(*pt));
	pt->size = size;
	pt->rate = rate;
	pt->rounds = 1;
	flit_hist_reset(s->hist);
	flit_hist_reset(s->clean);
	s->pings_rx = s->pings_lost = s->pings_dup = s->bad = s->pings_stalled = 0;
	s->stall.last = 0;      /* the time between points is no stall */
	tool_payload_fill(p->buf, size, 0);     /* the pattern after the header */
	next_ping = ping_index(&p->rng, 0, every, 0);
	if (flit_ctx_counters(p->ctx, &c0))
		memset(&c0, 0, sizeof(c0));

	t_start = tool_now(clk);
	t_m0 = due_at(t_start, per_tick, i0);
	t_end = due_at(t_start, per_tick, i1);  /* the last one is due */
	t_behind = tool_ticks(clk, behind_s * 1e9);
	t_done = t_caught = t_stall = prev = t_start;
	pre0 = preempted();
	while (sent < i1) {
		uint64_t due, n, j;
		bool wrote = false;

		now = tool_now(clk);
		if (sent >= i0) {
			pt->wakeups++;
			if (now - prev > max_turn)
				max_turn = now - prev;
		}
		prev = now;
		due = (uint64_t)((double)(now - t_start) * per_tick) + 1;
		if (due > i1)
			due = i1;
		if (now > t_end && now - t_caught > t_behind) {
			/* behind without a break for t_behind, and past the
			 * end: CPU-bound, the backlog is not worth sending */
			pt->cut = true;
			break;
		}
		n = due > sent ? due - sent : 0;
		if (n > pt->max_backlog && sent >= i0)
			pt->max_backlog = n;
		if (n > o->max_batch)
			n = o->max_batch;
		for (j = 0; j < n; j++) {
			/* (>=: a ping skipped while the fifo was full is
			 * sent with the next message) */
			bool ping = sent >= next_ping && s->tail - s->head < FIFO_CAP;
			int rc;

			st64(p->buf, word0(ping ? K_PING : K_LOAD, p->seq));
			if (ping) {
				struct ping_rec *r = &s->fifo[s->tail & (FIFO_CAP - 1)];

				r->seq = p->seq & SEQ_MASK;
				r->measured = sent >= i0;
				r->stalls = s->stall.count;
				r->sub_stalls = s->sub_stalls;
				r->tsc = tool_now(clk);
				/* one due before a stall ended queues behind its
				 * backlog */
				r->late = s->stall.limit &&
					  s->stall.at > due_at(t_start, per_tick, sent);
				st64(p->buf + 8, r->tsc);
			}
			rc = flit_pub_send(p->pubs[p->k], p->buf, size);
			if (rc != FLIT_OK) {
				if (rc < 0)
					pub_fail(p, "sending message %llu: %s",
						 (unsigned long long)p->seq, flit_errmsg());
				/* Back-pressured: nothing sent; the rest of the
				 * batch stays due, the replies are read. */
				pt->back_pressured++;
				break;
			}
			if (ping) {
				s->tail++;
				if (sent >= i0)
					pt->pings_sent++;
				next_ping = ping_index(&p->rng, ++kping, every, sent + 1);
			}
			p->seq++;
			sent++;
			wrote = true;
			if (++p->k == p->npubs)
				p->k = 0;
		}
		if (wrote) {
			int rc = flit_pub_flush(p->pub);

			if (rc < 0)
				pub_fail(p, "flushing: %s", flit_errmsg());
			t_done = tool_now(clk);
			t_stall = t_done;
			if (sent > i0)
				pt->batches++;
		}
		if (sent == due)
			t_caught = now;         /* nothing due is left */
		pub_poll(p);
		if (!wrote) {
			if (sent < due) {
				/* Refused: fail only when nothing moves for the
				 * timeout (a dead reader is evicted long before). */
				if ((++spins & CHECK_EVERY) == 0)
					pub_check(p, t_stall, "sending (back-pressured)");
			} else if (o->sleep) {
				uint64_t at = due_at(t_start, per_tick, sent);

				now = tool_now(clk);
				if (at > now) {
					tool_sleep_us((unsigned)(tool_ns(clk, at - now) / 1000) + 1);
					/* asked for: neither a stall nor a turn */
					s->stall.last = 0;
					prev = tool_now(clk);
				}
			}
		}
	}
	if (pt->cut && sent <= i0) {
		/* not even through the warm-up: the rate of the whole point */
		pt->sent = sent;
		pt->secs = tool_ns(clk, now - t_start) / 1e9;
	} else {
		pt->sent = sent - i0;
		pt->secs = tool_ns(clk, (pt->cut ? now : t_done) - t_m0) / 1e9;
	}
	pt->achieved = pt->secs > 0 ? (double)pt->sent / pt->secs : 0;
	pt->cpu_bound = pt->cut;
	pt->pub_preempted = preempted() - pre0;
	pt->max_turn_ns = (uint64_t)tool_ns(clk, max_turn);

	pub_end(p, pt);
	if (flit_ctx_counters(p->ctx, &c1) == 0) {
		pt->retransmissions = c1.retransmissions - c0.retransmissions;
		pt->naks_received = c1.naks_received - c0.naks_received;
	}
	pt->pings_rx = s->pings_rx;
	pt->pings_lost = s->pings_lost;
	pt->pings_dup = s->pings_dup;
	pt->bad = s->bad;
	pt->pings_stalled = s->pings_stalled;
}

/* Round r > 0 of a point: add it to the rounds before (acc), whose
 * histogram the caller merges.  The rate is over all measured intervals. */
static void point_add(struct point *acc, const struct point *pt)
{
	acc->secs += pt->secs;
	acc->sent += pt->sent;
	acc->achieved = acc->secs > 0 ? (double)acc->sent / acc->secs : 0;
	acc->pings_sent += pt->pings_sent;
	acc->pings_rx += pt->pings_rx;
	acc->pings_lost += pt->pings_lost;
	acc->pings_dup += pt->pings_dup;
	acc->back_pressured += pt->back_pressured;
	acc->batches += pt->batches;
	acc->wakeups += pt->wakeups;
	if (pt->max_backlog > acc->max_backlog)
		acc->max_backlog = pt->max_backlog;
	acc->cpu_bound |= pt->cpu_bound;
	acc->cut |= pt->cut;
	acc->rx_msgs += pt->rx_msgs;
	acc->gaps += pt->gaps;
	acc->dupes += pt->dupes;
	acc->rx_bad += pt->rx_bad;
	acc->reflected += pt->reflected;
	acc->reply_bp += pt->reply_bp;
	acc->loss += pt->loss;
	acc->naks_sent += pt->naks_sent;
	acc->retx_received += pt->retx_received;
	acc->retransmissions += pt->retransmissions;
	acc->naks_received += pt->naks_received;
	acc->bad += pt->bad;
	acc->pub_preempted += pt->pub_preempted;
	acc->sub_preempted += pt->sub_preempted;
	if (pt->max_turn_ns > acc->max_turn_ns)
		acc->max_turn_ns = pt->max_turn_ns;
	acc->pings_stalled += pt->pings_stalled;
	acc->rounds++;
}

/* ---- output ------------------------------------------------------------------------ */

/* 2000000 -> "2,000,000" */
static const char *commas(double v, char *buf, size_t len)
{
	char digits[32];
	size_t n, out = 0;

	snprintf(digits, sizeof(digits), "%.0f", v);
	n = strlen(digits);
	for (size_t i = 0; i < n && out + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[out++] = ',';
		buf[out++] = digits[i];
	}
	buf[out] = '\0';
	return buf;
}

/* 1500000 -> "1.5 M" */
static const char *short_rate(double v, char *buf, size_t len)
{
	if (v >= 1e9)
		snprintf(buf, len, "%.4g G", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, len, "%.4g M", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%.4g K", v / 1e3);
	else
		snprintf(buf, len, "%.4g", v);
	return buf;
}

static void mode_str(const struct options *o, char *buf, size_t len)
{
	char cpustr[32], first[128];

	tool_cpus_str(o->com.cpus, o->com.ncpus, cpustr, sizeof(cpustr));
	if (!strcmp(o->com.transport, "udp") || !strcmp(o->com.transport, "xdp")) {
		char m[32], b[48];
		const char *um = tool_config_get(&o->com.config, "source.udp.mode", m, sizeof(m));

		snprintf(first, sizeof(first), "%s,%s,%s", o->com.transport,
			 um && *um ? um : "multicast",
			 !strcmp(o->com.transport, "xdp") ? "af_xdp"
				 : tool_udp_path_label(&o->com.config, b, sizeof(b)));
	} else {
		snprintf(first, sizeof(first), "%s", strcmp(o->com.transport, "shm") ?
			 "default" : "paced");
	}
	if (o->com.role != TOOL_SIDES_BOTH)
		snprintf(cpustr, sizeof(cpustr), "%d", o->com.cpus[0]);
	char topics[24] = "";
	if (o->topics > 1)
		snprintf(topics, sizeof(topics), ",topics=%u", o->topics);
	snprintf(buf, len, "%s,%s,%s,max_batch=%llu,ping_rate=%g%s,pinned=%s", first,
		 o->batch ? "batched" : "unbatched", o->sleep ? "sleep" : "spin",
		 (unsigned long long)o->max_batch, o->ping_rate, topics, cpustr);
}

static void table_group(const struct options *o, size_t size)
{
	printf("\n# %s, %zu-byte messages; RTT/2 in microseconds\n", o->com.transport, size);
	printf("# %12s %9s %9s %9s %9s %10s %9s %13s %7s %5s\n", "Msgs/sec", "Min",
	       "Mean", "Median", "99.9%", "Max", "StdDev", "achieved", "pings", "lost");
}

static void table_row(const struct point *pt)
{
	char r[32], a[32];
	const struct tool_stats *s = &pt->st;

	if (s->n)
		printf("%14s %9.3f %9.3f %9.3f %9.3f %10.3f %9.3f", commas(pt->rate, r, sizeof(r)),
		       s->min / 1e3, s->avg / 1e3, s->p50 / 1e3, s->p999 / 1e3,
		       s->max / 1e3, s->stddev / 1e3);
	else    /* no ping in the measured interval */
		printf("%14s %9s %9s %9s %9s %10s %9s", commas(pt->rate, r, sizeof(r)),
		       "-", "-", "-", "-", "-", "-");
	printf(" %13s %7llu %5llu%s\n", commas(pt->achieved, a, sizeof(a)),
	       (unsigned long long)s->n, (unsigned long long)pt->pings_lost,
	       pt->cpu_bound ? "  CPU-bound" : "");
	fflush(stdout);
}

/* --hist: the histogram's buckets folded into log2 buckets of RTT/2 ns. */
struct log2_hist {
	double scale;           /* ns per recorded unit */
	uint64_t count[64];
};

static int log2_add(uint64_t lo, uint64_t hi, uint64_t count, void *arg)
{
	struct log2_hist *l = arg;
	double ns = (double)lo * l->scale;
	int b = 0;

	(void)hi;
	while (ns >= 2.0 && b < 63) {
		ns /= 2.0;
		b++;
	}
	l->count[b] += count;
	return 0;
}

static void hist_print(FILE *f, const flit_hist *h, double scale)
{
	struct log2_hist l = { .scale = scale };
	uint64_t n = flit_hist_count(h), peak = 0, cum = 0;
	int lo = 63, hi = 0;

	if (!n)
		return;
	flit_hist_foreach(h, log2_add, &l);
	for (int b = 0; b < 64; b++) {
		if (!l.count[b])
			continue;
		lo = b < lo ? b : lo;
		hi = b > hi ? b : hi;
		peak = l.count[b] > peak ? l.count[b] : peak;
	}
	fprintf(f, "# RTT/2 histogram (ns, log2 buckets)\n");
	for (int b = lo; b <= hi; b++) {
		char bar[41];
		int w = (int)((double)l.count[b] * 40.0 / (double)peak + 0.5);

		cum += l.count[b];
		memset(bar, '#', (size_t)w);
		bar[w] = '\0';
		fprintf(f, "#  %10llu .. %-10llu %9llu %8.3f %8.3f  %s\n",
			b ? 1ull << b : 0ull, 1ull << (b + 1),
			(unsigned long long)l.count[b], 100.0 * (double)l.count[b] / (double)n,
			100.0 * (double)cum / (double)n, bar);
	}
	fflush(f);
}

/* Pings of this size carry the subscriber's stall count. */
static bool stalls_watched(const struct options *o, size_t size)
{
	return o->stall_us > 0 && size >= STALL_MIN;
}

static const char csv_header[] =
	"tool,transport,size,rate,msgs_per_sec,sent,count,pings_lost,min_ns,avg_ns,"
	"p50_ns,p99_ns,p999_ns,max_ns,stddev_ns,cpu_bound,back_pressured,gaps,"
	"dupes,batches,clock,mode,rounds,pub_preempted,sub_preempted,max_turn_ns,"
	"pings_stalled,unstalled_avg_ns\n";

static void csv_row(const struct options *o, const struct point *pt,
		    const char *clock, const char *mode)
{
	const struct tool_stats *s = &pt->st;
	char lat[160] = ",,,,,,";      /* no ping measured: empty fields */
	char st[64] = ",";             /* no stall watch: empty fields */

	if (stalls_watched(o, pt->size))
		snprintf(st, sizeof(st), pt->clean.n ? "%llu,%.1f" : "%llu,",
			 (unsigned long long)pt->pings_stalled, pt->clean.avg);

	if (s->n)
		snprintf(lat, sizeof(lat), "%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f", s->min,
			 s->avg, s->p50, s->p99, s->p999, s->max, s->stddev);
	printf("flit-load,%s,%zu,%.0f,%.1f,%llu,%llu,%llu,%s,%s,%llu,%llu,%llu,%llu,"
	       "%s,\"%s\",%d,%llu,%llu,%llu,%s\n", o->com.transport, pt->size, pt->rate, pt->achieved,
	       (unsigned long long)pt->sent, (unsigned long long)s->n,
	       (unsigned long long)pt->pings_lost, lat,
	       pt->cpu_bound ? "true" : "false", (unsigned long long)pt->back_pressured,
	       (unsigned long long)pt->gaps, (unsigned long long)pt->dupes,
	       (unsigned long long)pt->batches, clock, mode, pt->rounds,
	       (unsigned long long)pt->pub_preempted, (unsigned long long)pt->sub_preempted,
	       (unsigned long long)pt->max_turn_ns, st);
	fflush(stdout);
}

static void json_row(const struct options *o, const struct point *pt,
		     const char *clock, const char *mode, const char *setup)
{
	char extra[2048], cfgs[512];
	struct tool_result res;
	size_t off;

	tool_result_init(&res, "flit-load");
	res.transport = o->com.transport;
	res.size = (int64_t)pt->size;
	res.count = (int64_t)pt->st.n;
	res.rate = pt->rate;
	res.lat = &pt->st;
	res.msgs_per_sec = pt->achieved;
	res.clock = clock;
	res.mode = mode;
	off = (size_t)snprintf(extra, sizeof(extra),
		"\"sent\":%llu,\"secs\":%.6f,\"pings_sent\":%llu,\"pings_lost\":%llu,"
		"\"pings_dup\":%llu,\"cpu_bound\":%s,\"back_pressured\":%llu,"
		"\"batches\":%llu,\"wakeups\":%llu,\"max_backlog\":%llu,\"gaps\":%llu,\"dupes\":%llu,"
		"\"received\":%llu,\"reflected\":%llu,\"bad\":%llu,\"lost\":%llu,"
		"\"reply_back_pressured\":%llu,\"duration\":%g,\"warmup\":%g,"
		"\"ping_rate\":%g,\"max_batch\":%llu,\"rounds\":%d,\"pub_preempted\":%llu,"
		"\"sub_preempted\":%llu,\"max_turn_ns\":%llu,\"stall_us\":%g",
		(unsigned long long)pt->sent, pt->secs,
		(unsigned long long)pt->pings_sent, (unsigned long long)pt->pings_lost,
		(unsigned long long)pt->pings_dup, pt->cpu_bound ? "true" : "false",
		(unsigned long long)pt->back_pressured, (unsigned long long)pt->batches,
		(unsigned long long)pt->wakeups, (unsigned long long)pt->max_backlog, (unsigned long long)pt->gaps,
		(unsigned long long)pt->dupes, (unsigned long long)pt->rx_msgs,
		(unsigned long long)pt->reflected,
		(unsigned long long)(pt->bad + pt->rx_bad), (unsigned long long)pt->loss,
		(unsigned long long)pt->reply_bp, o->duration_s, o->warmup_s,
		o->ping_rate, (unsigned long long)o->max_batch, pt->rounds,
		(unsigned long long)pt->pub_preempted, (unsigned long long)pt->sub_preempted,
		(unsigned long long)pt->max_turn_ns, o->stall_us);
	if (stalls_watched(o, pt->size) && pt->clean.n)
		off += (size_t)snprintf(extra + off, sizeof(extra) - off,
			",\"pings_stalled\":%llu,\"unstalled\":{\"count\":%llu,"
			"\"avg_ns\":%.1f,\"p50_ns\":%.1f,\"p999_ns\":%.1f,\"max_ns\":%.1f}",
			(unsigned long long)pt->pings_stalled,
			(unsigned long long)pt->clean.n, pt->clean.avg, pt->clean.p50,
			pt->clean.p999, pt->clean.max);
	else if (stalls_watched(o, pt->size))
		off += (size_t)snprintf(extra + off, sizeof(extra) - off,
			",\"pings_stalled\":%llu,\"unstalled\":{\"count\":0}",
			(unsigned long long)pt->pings_stalled);
	if (o->com.net)
		off += (size_t)snprintf(extra + off, sizeof(extra) - off,
			",\"naks_sent\":%llu,\"retx_received\":%llu,"
			"\"retransmissions\":%llu,\"naks_received\":%llu",
			(unsigned long long)pt->naks_sent,
			(unsigned long long)pt->retx_received,
			(unsigned long long)pt->retransmissions,
			(unsigned long long)pt->naks_received);
	if (o->com.netns)
		off += tool_json_member(extra + off, sizeof(extra) - off, "netns", o->com.netns);
	if (o->com.peer_netns)
		off += tool_json_member(extra + off, sizeof(extra) - off, "peer_netns",
					o->com.peer_netns);
	if (tool_config_user(&o->com.config, cfgs, sizeof(cfgs)))
		off += tool_json_member(extra + off, sizeof(extra) - off, "config", cfgs);
	if (setup[0])
		tool_json_member(extra + off, sizeof(extra) - off, "setup", setup);
	res.extra = extra;
	tool_json_print(stdout, &res);
}

/* After the table of a size: what the machine took from each row. */
static void table_interference(const struct options *o, const struct point *acc, int n)
{
	bool watched = stalls_watched(o, acc[0].size);
	char r[32], stall[32];

	snprintf(stall, sizeof(stall), "met a stall > %g us", o->stall_us);
	printf("# %12s %24s %22s", "Msgs/sec", "switched out: pub / sub",
	       "longest pub turn (us)");
	if (watched)
		printf(" %22s %9s %9s", stall, "Mean", "99.9%");
	printf("\n");
	for (int i = 0; i < n; i++) {
		const struct point *a = &acc[i];

		printf("# %12s %13llu / %-8llu %22.1f", commas(a->rate, r, sizeof(r)),
		       (unsigned long long)a->pub_preempted,
		       (unsigned long long)a->sub_preempted, a->max_turn_ns / 1e3);
		if (watched && a->clean.n)
			printf(" %22llu %9.3f %9.3f", (unsigned long long)a->pings_stalled,
			       a->clean.avg / 1e3, a->clean.p999 / 1e3);
		else if (watched)
			printf(" %22llu %9s %9s", (unsigned long long)a->pings_stalled, "-", "-");
		printf("\n");
	}
	if (watched)
		printf("# (Mean, 99.9%%: RTT/2 of the pings that met no stall)\n");
	fflush(stdout);
}

/* ---- the publisher's run --------------------------------------------------------------- */

/* A row: `a` (the rounds of one point merged) and its histogram; a
 * CPU-bound row ends the size's sweep, which `sustained` (the rate before)
 * went to. */
static void point_print(struct pub *p, struct point *a, int ri,
			const char *mode, const char *setup, double sustained)
{
	const struct options *o = p->o;
	const struct tool_clock *clk = p->clk;
	const flit_hist *h = p->hists[ri];
	char r[32], ach[32];

	tool_stats_from_hist(h, clk->tsc.ns_per_tick / 2, &a->st);
	tool_stats_from_hist(p->cleans[ri], clk->tsc.ns_per_tick / 2, &a->clean);
	if (o->com.json)
		json_row(o, a, clk->name, mode, setup);
	else if (o->csv)
		csv_row(o, a, clk->name, mode);
	else
		table_row(a);
	if (o->com.hist)
		hist_print(o->com.json || o->csv ? stderr : stdout, h, clk->tsc.ns_per_tick / 2);
	if (!a->cpu_bound)
		return;
	if (o->com.json || o->csv) {
		tool_warn("%zu bytes: CPU-bound at %s msgs/sec (achieved %.0f): the "
			  "sweep of this size stops", a->size,
			  short_rate(a->rate, r, sizeof(r)), a->achieved);
		return;
	}
	if (sustained > 0)
		printf("CPU-bound after %s msgs/sec", short_rate(sustained, r, sizeof(r)));
	else
		printf("CPU-bound below %s msgs/sec", short_rate(a->rate, r, sizeof(r)));
	printf(" (offered %s, achieved %s%s)\n", short_rate(a->rate, r, sizeof(r)),
	       short_rate(a->achieved, ach, sizeof(ach)),
	       a->back_pressured ? ", the receiver back-pressured" : "");
}

static int run_pub(const struct options *o, const struct tool_clock *clk,
		   const char *load_topic, const char *reply_topic, pid_t child)
{
	struct pub p = {
		.o = o, .clk = clk, .child = child,
		.timeout_ticks = tool_ticks(clk, o->com.timeout_s * 1e9),
		.st = { .clk = clk },
	};
	char err[768], mode[256], clkdesc[128], setup[512] = "", rounds[48] = "";
	size_t maxsize = 0;
	FILE *hdr = o->com.json || o->csv ? stderr : stdout;
	uint64_t bad = 0, lost = 0, gaps = 0, pbad = 0;
	int status, rc = 0;
	FLIT_OPTS(flit_sub_opts, sopts, .on_msg = pub_on_msg, .arg = &p.st);

	for (int i = 0; i < o->nsizes; i++)
		maxsize = o->sizes[i] > maxsize ? o->sizes[i] : maxsize;
	p.st.fifo = calloc(FIFO_CAP, sizeof(*p.st.fifo));
	p.buf = aligned_alloc(64, (maxsize + 63) & ~(size_t)63);
	p.st.hist = rtt_hist_new(clk);
	p.st.clean = rtt_hist_new(clk);
	if (!p.st.fifo || !p.buf || !p.st.hist || !p.st.clean)
		pub_fail(&p, "out of memory");
	p.st.stall.limit = stall_limit(o, clk);
	for (int i = 0; i < o->nrates; i++) {
		p.hists[i] = rtt_hist_new(clk);
		p.cleans[i] = rtt_hist_new(clk);
		if (!p.hists[i] || !p.cleans[i])
			pub_fail(&p, "out of memory");
	}
	memset(p.buf, 0, maxsize);
	p.rng = flit_tsc_ticks() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	if (!p.rng)
		p.rng = 1;

	p.ctx = tool_ctx_new(&o->com.config, err, sizeof(err));
	if (!p.ctx)
		pub_fail(&p, "creating the context: %s", err);
	p.sub = flit_sub_new(p.ctx, reply_topic, &sopts);
	if (!p.sub)
		pub_fail(&p, "subscribing to '%s': %s", reply_topic, flit_errmsg());
	p.pubs = calloc(o->topics, sizeof(*p.pubs));
	if (!p.pubs)
		pub_fail(&p, "out of memory");
	for (unsigned i = 0; i < o->topics; i++) {
		char t[FLIT_TOPIC_MAX + 16];
		tool_spread_topic(t, sizeof(t), load_topic, i, o->topics);
		p.pubs[i] = open_pub(p.ctx, o, t, o->batch, o->topics > 1 ? "flit-load\n" : NULL);
		if (!p.pubs[i])
			pub_fail(&p, "publishing '%s' on %s: %s", t, o->com.transport, flit_errmsg());
		p.npubs = i + 1;
	}
	p.pub = p.pubs[0];
	if (maxsize > flit_pub_max_msg(p.pub))
		pub_fail(&p, "size %zu is larger than the %s source's largest message "
			 "(%zu bytes)", maxsize, o->com.transport, flit_pub_max_msg(p.pub));
	pub_hello(&p);
	/* the subscriber's counters from here on; does it watch its stalls? */
	p.prev_rep[REP_PREEMPTED] = p.st.sub_preempted;
	p.prev_rep[REP_STALLS] = p.st.sub_stalls;
	p.st.sub_watch = p.st.stall.limit && p.st.sub_limit_ns;
	if (p.st.stall.limit && !p.st.sub_limit_ns)
		tool_warn("the subscriber watches no stall (--stall-us 0 there): only the "
			  "publisher's stalls are counted");
	else if (p.st.stall.limit && llabs((long long)p.st.sub_limit_ns -
					   (long long)(o->stall_us * 1e3)) > 1000)
		tool_warn("the subscriber's stall limit is %g us, the publisher's %g us",
			  p.st.sub_limit_ns / 1e3, o->stall_us);
	if (flit_ctx_describe(p.ctx, o->com.transport, setup, sizeof(setup)) < 0)
		setup[0] = '\0';

	mode_str(o, mode, sizeof(mode));
	if (o->rounds > 1)
		snprintf(rounds, sizeof(rounds), ", %d rounds merged per row", o->rounds);
	tool_header(hdr, "%s load with reflected pings, topic '%s', %s; publisher on "
		    "CPU %d; %g s per point after %g s warm-up%s; clock %s", o->com.transport,
		    load_topic, mode, o->com.cpus[0], o->duration_s, o->warmup_s, rounds,
		    tool_clock_desc(clk, clkdesc, sizeof(clkdesc)));
	if (setup[0] && strcmp(setup, o->com.transport))
		tool_header(hdr, "%s", setup);
	if (o->csv)
		fputs(csv_header, stdout);

	for (int si = 0; si < o->nsizes; si++) {
		struct point acc[MAX_LIST];
		int nr = o->nrates;     /* rates swept: to the first CPU-bound one */

		if (!o->com.json && !o->csv)
			table_group(o, o->sizes[si]);
		for (int round = 0; round < o->rounds; round++) {
			bool last = round == o->rounds - 1;

			for (int ri = 0; ri < nr; ri++) {
				struct point pt, *a = &acc[ri];

				run_point(&p, o->sizes[si], o->rates[ri], &pt);
				bad += pt.bad + pt.rx_bad + pt.pings_dup;
				lost += pt.pings_lost;
				gaps += pt.gaps + pt.dupes;
				pbad += pt.loss;
				if (!round) {
					*a = pt;
					flit_hist_reset(p.hists[ri]);
					flit_hist_reset(p.cleans[ri]);
				} else {
					point_add(a, &pt);
				}
				flit_hist_merge(p.hists[ri], p.st.hist);
				flit_hist_merge(p.cleans[ri], p.st.clean);
				if (last)
					point_print(&p, a, ri, mode, setup,
						    ri ? o->rates[ri - 1] : 0);
				if (a->cpu_bound) {
					nr = ri + 1;
					break;
				}
			}
		}
		if (!o->com.json && !o->csv)
			table_interference(o, acc, nr);
	}

	pub_send_ctl(&p, K_BYE, 0, "saying bye");
	{
		uint64_t spins = 0, t0 = tool_now(clk);

		while (!p.st.bye_seen && !p.st.peer.gone) {
			pub_poll(&p);
			if ((++spins & CHECK_EVERY) == 0)
				pub_check(&p, t0, "waiting for the bye's echo");
		}
	}
	flit_sub_close(p.sub);
	for (unsigned i = 0; i < p.npubs; i++)
		flit_pub_close(p.pubs[i]);
	free(p.pubs);
	flit_ctx_close(p.ctx);
	p.sub = NULL;
	p.pub = NULL;
	p.ctx = NULL;
	if (p.child > 0) {
		char why[96];

		if (tool_reap(p.child, 5000, &status))
			tool_fail("reaping the subscriber process: %s", strerror(errno));
		p.child = 0;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			tool_fail("the subscriber process %s",
				  tool_wstatus_str(status, why, sizeof(why)));
	}
	flit_hist_free(p.st.hist);
	flit_hist_free(p.st.clean);
	for (int i = 0; i < o->nrates; i++) {
		flit_hist_free(p.hists[i]);
		flit_hist_free(p.cleans[i]);
	}
	free(p.st.fifo);
	free(p.buf);

	if (bad) {
		tool_warn("%llu bad or duplicate messages or reflections",
			  (unsigned long long)bad);
		rc = 1;
	}
	if (lost || gaps || pbad) {
		tool_warn("%llu pings lost, %llu sequence gaps or duplicates, %llu "
			  "messages reported lost%s", (unsigned long long)lost,
			  (unsigned long long)gaps, (unsigned long long)pbad,
			  o->com.net ? " (reported, not an error on a network transport)" :
			  ", where paced shm must have none");
		if (!o->com.net)
			rc = 1;
	}
	return rc;
}

/* ---- main -------------------------------------------------------------------------- */

static double parse_rate(const char *arg)
{
	double v, mult = 1;
	char *end;

	if (!*arg || *arg == '-' || *arg == '+' || *arg == ' ')
		tool_usage_exit("bad rate '%s': not a number", arg);
	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || !isfinite(v))
		tool_usage_exit("bad rate '%s': not a number", arg);
	switch (*end) {
	case 'k': case 'K': mult = 1e3; end++; break;
	case 'm': case 'M': mult = 1e6; end++; break;
	case 'g': case 'G': mult = 1e9; end++; break;
	}
	if (*end)
		tool_usage_exit("bad rate '%s': trailing '%s'", arg, end);
	v *= mult;
	if (v < 1 || v > 1e9)
		tool_usage_exit("bad rate '%s': must be 1..1G msgs/s", arg);
	return v;
}

/* Split a list at blanks and commas: sizes (size_t) or rates (double). */
static int parse_list(const char *what, const char *arg, void *out, bool rates)
{
	char buf[512], *save = NULL, *w;
	int n = 0;

	if (strlen(arg) >= sizeof(buf))
		tool_usage_exit("bad %s list: too long", what);
	snprintf(buf, sizeof(buf), "%s", arg);
	for (w = strtok_r(buf, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
		if (n == MAX_LIST)
			tool_usage_exit("bad %s list '%s': more than %d values", what,
					arg, MAX_LIST);
		if (rates)
			((double *)out)[n++] = parse_rate(w);
		else
			((size_t *)out)[n++] = tool_parse_size("size", w, MIN_SIZE, 16 << 20);
	}
	if (!n)
		tool_usage_exit("bad %s list '%s': empty", what, arg);
	return n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void parse(int argc, char **argv, struct options *o)
{
	enum { OPT_SLEEP = TOOL_OPT_OWN, OPT_NO_BATCH, OPT_CSV, OPT_ROUNDS, OPT_STALL, OPT_TOPICS };
	static const struct tool_shape shape = {
		.role = { "pub", "sub" }, .side = { "publisher", "subscriber" },
	};
	static const struct option longopts[] = {
		TOOL_LONGOPTS,
		{ "sizes",     required_argument, NULL, 's' },
		{ "size",      required_argument, NULL, 's' },
		{ "rates",     required_argument, NULL, 'r' },
		{ "rate",      required_argument, NULL, 'r' },
		{ "duration",  required_argument, NULL, 'd' },
		{ "warmup",    required_argument, NULL, 'w' },
		{ "rounds",    required_argument, NULL, OPT_ROUNDS },
		{ "stall-us",  required_argument, NULL, OPT_STALL },
		{ "ping-rate", required_argument, NULL, 'P' },
		{ "max-batch", required_argument, NULL, 'B' },
		{ "sleep",     no_argument,       NULL, OPT_SLEEP },
		{ "no-batch",  no_argument,       NULL, OPT_NO_BATCH },
		{ "topics",    required_argument, NULL, OPT_TOPICS },
		{ "role",      required_argument, NULL, 'R' },
		{ "peer-topic-prefix", required_argument, NULL, 'p' },
		{ "csv",       no_argument,       NULL, OPT_CSV },
		{ "hist",      no_argument,       NULL, 'H' },
		{ 0 }
	};
	struct tool_opts *t = &o->com;
	int opt;

	*o = (struct options){
		.duration_s = 2, .warmup_s = 0.25, .ping_rate = 5000, .max_batch = 256,
		.rounds = 1, .stall_us = -1, .batch = true, .topics = 1,
	};
	tool_opts_init(t, &shape);
	o->nsizes = parse_list("size", "32 128 256 512 1024", o->sizes, false);
	o->nrates = parse_list("rate", "100k 500k 1M 2M", o->rates, true);
	while ((opt = getopt_long(argc, argv, ":t:s:r:d:w:P:B:c:T:R:p:C:jHvh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 's': o->nsizes = parse_list("size", optarg, o->sizes, false); break;
		case 'r': o->nrates = parse_list("rate", optarg, o->rates, true); break;
		case 'd': o->duration_s = tool_parse_seconds("duration", optarg, 0.01, 86400); break;
		case 'w': o->warmup_s = tool_parse_seconds("warmup", optarg, 0, 3600); break;
		case OPT_ROUNDS:
			o->rounds = (int)tool_parse_count("rounds", optarg, 1, 1000);
			break;
		case OPT_STALL:
			o->stall_us = tool_parse_seconds("stall-us", optarg, 0, 1e6);
			if (o->stall_us > 0 && o->stall_us < 1)
				tool_usage_exit("bad stall-us '%s': 0 (off) or 1 .. 1000000", optarg);
			break;
		case 'P': o->ping_rate = parse_rate(optarg); break;
		case 'B': o->max_batch = tool_parse_count("max-batch", optarg, 1, 1000000); break;
		case OPT_SLEEP: o->sleep = true; break;
		case OPT_NO_BATCH: o->batch = false; break;
		case OPT_TOPICS: o->topics = (unsigned)tool_parse_count("topics", optarg, 1, 65536); break;
		case 'R': tool_opts_role(t, optarg); break;
		case OPT_CSV: o->csv = true; break;
		default: tool_opts_parse(t, opt, optarg, argv);
		}
	}
	tool_opts_end(t, argc, argv);
	if (t->json && o->csv)
		tool_usage_exit("--json and --csv exclude each other");
	for (int i = 0; i < o->nrates; i++)
		if (o->rates[i] * o->duration_s < 1)
			tool_usage_exit("bad rate %g with duration %g s: not one message "
					"in the measured interval", o->rates[i], o->duration_s);
	qsort(o->rates, (size_t)o->nrates, sizeof(o->rates[0]), cmp_double);
	if (o->stall_us < 0)    /* a poll of 256 datagrams takes a few 100 us */
		o->stall_us = t->net ? 500 : 50;
	tool_opts_finish(t);
}

struct load_run {
	const struct options *o;
	struct tool_clock clk;
	char load_topic[FLIT_TOPIC_MAX + 1], reply_topic[FLIT_TOPIC_MAX + 1];
};

static int side_pub(void *arg, pid_t peer)
{
	struct load_run *r = arg;

	return run_pub(r->o, &r->clk, r->load_topic, r->reply_topic, peer);
}

static int side_sub(void *arg)
{
	struct load_run *r = arg;

	return run_sub(r->o, &r->clk, r->load_topic, r->reply_topic);
}

int main(int argc, char **argv)
{
	struct options o;
	struct load_run r = { .o = &o };

	tool_init("flit-load", usage);
	parse(argc, argv, &o);
	tool_set_verbose(o.com.verbose);
	snprintf(r.load_topic, sizeof(r.load_topic), "%s.load", o.com.prefix);
	snprintf(r.reply_topic, sizeof(r.reply_topic), "%s.reply", o.com.prefix);
	return tool_run_sides(&(struct tool_sides){
		.opts = &o.com, .clk = &r.clk,
		.run_a = side_pub, .run_b = side_sub, .arg = &r,
	});
}
