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
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool.h"

static const char usage[] =
"Usage: flit-thru [-t TRANSPORT] [-s SIZE] [-n COUNT | -d SECONDS] [options]\n"
"Maximum message rate from one publisher to N forked receivers.\n"
"\n"
"  -t, --transport T    shm (default), udp, xdp, rdma\n"
"  -s, --size BYTES     message size, 8 .. 16M (default 16; suffixes K M)\n"
"  -n, --count N        messages to send (default 10000000; suffixes k M G)\n"
"  -d, --duration S     send for S seconds instead of a count\n"
"  -R, --receivers N    receiver processes, 1 .. 64 (default 1)\n"
"  -b, --batch          pack messages into frames (source batch = true) up to\n"
"                       --batch-max bytes; default: one frame per message\n"
"      --batch-max B    largest batched frame (source batch_max), 256 .. 1M\n"
"  -z, --zero-copy      send with claim/commit instead of a copying send\n"
"  -m, --mode M         shm ring mode: paced (default, lossless) or overwrite\n"
"  -c, --cpus LIST      publisher on the first CPU, receivers round-robin on\n"
"                       the rest (default: every CPU this process may use)\n"
"  -T, --timeout S      give up when start-up or the stream stalls longer than\n"
"                       S seconds (default 10)\n"
"  -j, --json           JSON objects on stdout, one per line (header to stderr)\n"
"  -v, --verbose        library messages to stderr (-vv: debug)\n"
"  -h, --help           this text\n"
"\n"
"Exit status: 0 ok, 1 runtime failure (including gaps or duplicates in paced\n"
"mode), 2 usage error.\n";

#define MAX_RECEIVERS 64
#define CHECK_EVERY 0xffffu

struct options {
	const char *transport;
	size_t size;
	uint64_t count;         /* 0 with a duration */
	double duration_s;
	int receivers;
	bool batch, zero_copy, overwrite, json;
	uint64_t batch_max;     /* 0: the library's default */
	int cpus[TOOL_MAX_CPUS], ncpus;
	double timeout_s;
	int verbose;
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
	char errmsg[200];
};

struct rx_state {
	const struct tool_clock *clk;
	size_t size;
	uint64_t next;          /* expected sequence number */
	uint64_t t_first;
	bool started, eos, died;
	struct rx_report *rep;
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
	case FLIT_MSG_EOS:
		s->eos = true;
		s->died = m->flags & FLIT_MSGF_SOURCE_DIED;
		return;
	case FLIT_MSG_LOSS:
		r->lost += m->lost;
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
				  int id, int cpu, int fd)
{
	struct rx_report rep = { .id = id, .cpu = cpu };
	struct rx_state s = { .clk = clk, .size = o->size, .rep = &rep };
	uint64_t stop_at = o->count ? o->count : UINT64_MAX;
	uint64_t timeout = tool_ticks(clk, o->timeout_s * 1e9);
	uint64_t t_last = 0, idle_since = 0, spins = 0;
	bool idle = false;
	flit_ctx *ctx = NULL;
	flit_sub *sub = NULL;
	int rc = tool_pin_cpu(cpu);

	if (rc) {
		errno = -rc;
		rx_exit(fd, &rep, "pinning", ctx, sub);
	}
	FLIT_OPTS(flit_ctx_opts, copts);
	FLIT_OPTS(flit_sub_opts, sopts, .on_msg = rx_on_msg, .arg = &s);
	ctx = flit_ctx_new(&copts);
	if (!ctx)
		rx_exit(fd, &rep, "creating the context", ctx, sub);
	sub = flit_sub_new(ctx, topic, &sopts);
	if (!sub)
		rx_exit(fd, &rep, "subscribing", ctx, sub);

	while (!s.eos && rep.msgs < stop_at) {
		int n = flit_ctx_poll(ctx, 0);

		if (n > 0) {
			t_last = tool_now(clk);
			idle = false;
			continue;
		}
		if (n < 0)
			rx_exit(fd, &rep, "polling", ctx, sub);
		if ((++spins & CHECK_EVERY) == 0) {
			uint64_t now = tool_now(clk);

			if (!idle) {
				idle = true;
				idle_since = now;
			} else if (now - idle_since > timeout) {
				rep.failed = 1;
				snprintf(rep.errmsg, sizeof(rep.errmsg),
					 "nothing received for %g s (%llu messages so far)",
					 o->timeout_s, (unsigned long long)rep.msgs);
				break;
			}
		}
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
	flit_pub *pub;
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
	flit_pub_close(c->pub);
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
	return o->ncpus > 1 ? o->cpus[1 + i % (o->ncpus - 1)] : o->cpus[0];
}

struct tx_result {
	uint64_t sent, back_pressured;
	double secs;
};

/* Send one message; spins while refused.  The hot path. */
static inline void tx_one(flit_pub *pub, const struct options *o, void *buf,
			  uint64_t seq, struct tx_result *tx,
			  const struct tool_clock *clk, struct thru *c)
{
	uint64_t spins = 0, t0 = 0;
	int rc;

	for (;;) {
		if (o->zero_copy) {
			void *p;

			rc = flit_pub_claim(pub, o->size, &p);
			if (rc == FLIT_OK) {
				memcpy(p, buf, o->size);
				memcpy(p, &seq, sizeof(seq));
				rc = flit_pub_commit(pub, o->size);
			}
		} else {
			memcpy(buf, &seq, sizeof(seq));
			rc = flit_pub_send(pub, buf, o->size);
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
			else if (tool_ns(clk, now - t0) > o->timeout_s * 1e9)
				thru_fail(c, "sending message %llu: %s for %g s",
					  (unsigned long long)seq, flit_strstatus(rc),
					  o->timeout_s);
			check_children(c, "sending");
		}
	}
}

static void run_publisher(const struct options *o, const struct tool_clock *clk,
			  const char *topic, struct thru *c,
			  struct tx_result *tx)
{
	char config[128] = "";
	size_t off = 0;
	uint64_t t0, t1, deadline = 0, spins = 0;
	flit_ctx *ctx;
	flit_pub *pub;
	void *buf;
	int rc;

	if (!strcmp(o->transport, "shm"))
		off += (size_t)snprintf(config + off, sizeof(config) - off,
					"shm.mode = %s\n", o->overwrite ? "overwrite" : "paced");
	off += (size_t)snprintf(config + off, sizeof(config) - off, "batch = %s\n",
				o->batch ? "true" : "false");
	if (o->batch_max)
		snprintf(config + off, sizeof(config) - off, "batch_max = %llu\n",
			 (unsigned long long)o->batch_max);

	rc = tool_pin_cpu(o->cpus[0]);
	if (rc)
		thru_fail(c, "pinning to CPU %d: %s", o->cpus[0], strerror(-rc));
	FLIT_OPTS(flit_ctx_opts, copts);
	FLIT_OPTS(flit_pub_opts, popts, .transport = o->transport, .config = config);
	ctx = c->ctx = flit_ctx_new(&copts);
	if (!ctx)
		thru_fail(c, "creating the context: %s", flit_errmsg());
	pub = c->pub = flit_pub_new(ctx, topic, &popts);
	if (!pub)
		thru_fail(c, "publishing '%s' on %s: %s", topic, o->transport,
			  flit_errmsg());
	if (o->size > flit_pub_max_msg(pub))
		thru_fail(c, "size %zu is larger than the %s source's largest "
			  "message (%zu bytes)", o->size, o->transport,
			  flit_pub_max_msg(pub));
	buf = aligned_alloc(64, (o->size + 63) & ~(size_t)63);
	if (!buf)
		thru_fail(c, "out of memory");
	tool_payload_fill(buf, o->size, 0);

	/* Start when every receiver is attached (slow path: sleeping is fine). */
	t0 = tool_now(clk);
	for (;;) {
		rc = flit_pub_receivers(pub);
		if (rc < 0)
			thru_fail(c, "counting receivers of '%s': %s", topic,
				  rc == -EOPNOTSUPP ? "the transport cannot tell" :
				  flit_errmsg());
		if (rc >= o->receivers)
			break;
		if (tool_ns(clk, tool_now(clk) - t0) > o->timeout_s * 1e9)
			thru_fail(c, "start-up: %d of %d receivers attached after %g s",
				  rc, o->receivers, o->timeout_s);
		check_children(c, "start-up");
		flit_ctx_poll(ctx, 0);
		tool_sleep_us(1000);
	}

	t0 = tool_now(clk);
	if (o->count) {
		for (uint64_t seq = 0; seq < o->count; seq++)
			tx_one(pub, o, buf, seq, tx, clk, c);
		tx->sent = o->count;
	} else {
		deadline = t0 + tool_ticks(clk, o->duration_s * 1e9);
		for (uint64_t seq = 0;; seq++) {
			if ((seq & 1023) == 0 && tool_now(clk) >= deadline) {
				tx->sent = seq;
				break;
			}
			tx_one(pub, o, buf, seq, tx, clk, c);
		}
	}
	t1 = tool_now(clk);
	while ((rc = flit_pub_flush(pub)) != FLIT_OK) {
		if (rc < 0)
			thru_fail(c, "flushing: %s", flit_errmsg());
		if ((++spins & CHECK_EVERY) == 0) {
			if (tool_ns(clk, tool_now(clk) - t1) > o->timeout_s * 1e9)
				thru_fail(c, "flushing: %s for %g s",
					  flit_strstatus(rc), o->timeout_s);
			check_children(c, "flushing");
		}
	}
	t1 = tool_now(clk);
	tx->secs = tool_ns(clk, t1 - t0) / 1e9;
	flit_pub_close(pub);        /* receivers get EOS */
	flit_ctx_close(ctx);
	c->pub = NULL;
	c->ctx = NULL;
	free(buf);
}

/* Read every receiver's report (bounded) and reap them all. */
static void collect(const struct options *o, struct thru *c,
		    struct rx_report *reps)
{
	uint64_t deadline = flit_monotonic_raw_ns() + (uint64_t)(o->timeout_s * 1e9);
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
				  i + 1, o->timeout_s);
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
	double mbps = mps * (double)o->size / 1e6;
	char label[32], cpustr[16] = "-", idstr[40] = "", extra[512];
	struct tool_result r;

	if (cpu >= 0)
		snprintf(cpustr, sizeof(cpustr), "%d", cpu);
	if (!o->json) {
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
	r.transport = o->transport;
	r.size = (int64_t)o->size;
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
	char cpustr[128], mode[192], clkdesc[128], ej[256], et[256];
	double agg_mps = 0, agg_secs = 0;
	uint64_t agg_msgs = 0, bad = 0;
	bool paced = !o->overwrite;
	FILE *hdr = o->json ? stderr : stdout;
	int rc = 0;

	tool_cpus_str(o->cpus, o->ncpus, cpustr, sizeof(cpustr));
	snprintf(mode, sizeof(mode), "%s,%s,%s%s,receivers=%d,pinned=%s",
		 strcmp(o->transport, "shm") ? "default" : paced ? "paced" : "overwrite",
		 o->batch ? "batched" : "unbatched", o->zero_copy ? "zero-copy," : "",
		 "spin", o->receivers, cpustr);
	tool_header(hdr, "%s throughput, %zu-byte messages, %s; topic '%s'; "
		    "publisher on CPU %d%s; clock %s", o->transport, o->size, mode,
		    topic, o->cpus[0], o->receivers > o->ncpus - 1 ?
		    ", receivers share CPUs" : "",
		    tool_clock_desc(clk, clkdesc, sizeof(clkdesc)));
	if (!o->json)
		printf("%-12s %5s %12s %8s %12s %10s  %s\n", "# side", "cpu", "msgs",
		       "secs", "msgs/s", "MB/s", "checks");

	for (int i = 0; i < o->receivers; i++) {
		const struct rx_report *r = &reps[i];
		double mps = r->secs > 0 ? (double)r->msgs / r->secs : 0;
		uint64_t missing = o->count && r->msgs < o->count ? o->count - r->msgs : 0;

		agg_mps += mps;
		agg_msgs += r->msgs;
		agg_secs = r->secs > agg_secs ? r->secs : agg_secs;
		snprintf(ej, sizeof(ej), "\"gaps\":%llu,\"dupes\":%llu,\"lost\":%llu,"
			 "\"missing\":%llu,\"bad_len\":%llu,\"eos\":%s",
			 (unsigned long long)r->gaps, (unsigned long long)r->dupes,
			 (unsigned long long)r->lost, (unsigned long long)missing,
			 (unsigned long long)r->bad_len, r->eos ? "true" : "false");
		snprintf(et, sizeof(et), "gaps %llu, dupes %llu, lost %llu%s%s",
			 (unsigned long long)r->gaps, (unsigned long long)r->dupes,
			 (unsigned long long)r->lost, missing ? ", MISSING" : "",
			 r->bad_len ? ", BAD LENGTHS" : "");
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
		bad += r->bad_len + (paced ? r->gaps + r->dupes + r->lost + missing : 0);
	}
	snprintf(ej, sizeof(ej), "\"receivers\":%d", o->receivers);
	snprintf(et, sizeof(et), "%d receiver%s, sum of rates", o->receivers,
		 o->receivers == 1 ? "" : "s");
	print_row(o, clk->name, mode, "aggregate", 0, -1, agg_msgs, agg_secs,
		  agg_mps, ej, et);
	snprintf(ej, sizeof(ej), "\"back_pressured\":%llu",
		 (unsigned long long)tx->back_pressured);
	snprintf(et, sizeof(et), "back-pressured %llu times",
		 (unsigned long long)tx->back_pressured);
	print_row(o, clk->name, mode, "sender", 0, o->cpus[0], tx->sent, tx->secs,
		  tx->secs > 0 ? (double)tx->sent / tx->secs : 0, ej, et);
	if (bad) {
		tool_warn("%llu sequence or length errors in paced mode, where "
			  "there must be none", (unsigned long long)bad);
		rc = 1;
	}
	return rc;
}

/* ---- main ----------------------------------------------------------------------- */

static void parse(int argc, char **argv, struct options *o)
{
	enum { OPT_BATCH_MAX = 256 };
	static const struct option longopts[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "size",      required_argument, NULL, 's' },
		{ "count",     required_argument, NULL, 'n' },
		{ "duration",  required_argument, NULL, 'd' },
		{ "receivers", required_argument, NULL, 'R' },
		{ "batch",     no_argument,       NULL, 'b' },
		{ "batch-max", required_argument, NULL, OPT_BATCH_MAX },
		{ "zero-copy", no_argument,       NULL, 'z' },
		{ "mode",      required_argument, NULL, 'm' },
		{ "cpus",      required_argument, NULL, 'c' },
		{ "timeout",   required_argument, NULL, 'T' },
		{ "json",      no_argument,       NULL, 'j' },
		{ "verbose",   no_argument,       NULL, 'v' },
		{ "help",      no_argument,       NULL, 'h' },
		{ 0 }
	};
	bool count_set = false, cpus_set = false;
	int opt;

	*o = (struct options){
		.transport = "shm", .size = 16, .count = 10000000, .receivers = 1,
		.timeout_s = 10,
	};
	while ((opt = getopt_long(argc, argv, ":t:s:n:d:R:bzm:c:T:jvh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 't': o->transport = tool_parse_transport(optarg); break;
		case 's': o->size = tool_parse_size("size", optarg, 8, 16 << 20); break;
		case 'n':
			o->count = tool_parse_count("count", optarg, 1, 1ull << 40);
			count_set = true;
			break;
		case 'd': o->duration_s = tool_parse_seconds("duration", optarg, 0.001, 86400); break;
		case 'R': o->receivers = (int)tool_parse_count("receivers", optarg, 1, MAX_RECEIVERS); break;
		case 'b': o->batch = true; break;
		case OPT_BATCH_MAX: o->batch_max = tool_parse_size("batch-max", optarg, 256, 1 << 20); break;
		case 'z': o->zero_copy = true; break;
		case 'm':
			if (!strcmp(optarg, "paced"))
				o->overwrite = false;
			else if (!strcmp(optarg, "overwrite"))
				o->overwrite = true;
			else
				tool_usage_exit("bad mode '%s': paced or overwrite", optarg);
			break;
		case 'c':
			o->ncpus = tool_parse_cpus(optarg, o->cpus, TOOL_MAX_CPUS);
			cpus_set = true;
			break;
		case 'T': o->timeout_s = tool_parse_seconds("timeout", optarg, 0.01, 3600); break;
		case 'j': o->json = true; break;
		case 'v': o->verbose++; break;
		case 'h': tool_help_exit();
		default: tool_getopt_error(opt, argv);
		}
	}
	if (optind < argc)
		tool_usage_exit("unexpected argument '%s'", argv[optind]);
	if (count_set && o->duration_s > 0)
		tool_usage_exit("--count and --duration exclude each other");
	if (o->duration_s > 0)
		o->count = 0;
	if (o->batch_max && !o->batch)
		tool_usage_exit("--batch-max needs --batch");
	if (!cpus_set) {
		o->ncpus = tool_default_cpus(o->cpus, TOOL_MAX_CPUS);
		if (o->ncpus == 0)
			tool_fail("no CPU to run on (sched_getaffinity)");
	}
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

	tool_init("flit-thru", usage);
	parse(argc, argv, &o);
	tool_set_verbose(o.verbose);
	tool_clock_init(&clk);
	snprintf(topic, sizeof(topic), "flit-thru.%d", (int)parent);
	memset(reps, 0, sizeof(reps));

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
			run_receiver(&o, &clk, topic, i + 1, rx_cpu(&o, i), fds[1]);
		}
		close(fds[1]);
		c.pid[c.n] = pid;
		c.fd[c.n] = fds[0];
		c.n++;
	}

	run_publisher(&o, &clk, topic, &c, &tx);
	collect(&o, &c, reps);
	return report(&o, &clk, topic, &tx, reps);
}
