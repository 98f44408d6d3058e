/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Code shared by the flit tools (not part of the library): option parsing,
 * usage and exit codes, CPU pinning, the measurement clock, exact statistics
 * over a sample array, histograms, and the table and JSON output.
 *
 * Exit codes of every tool: 0 success, 1 runtime failure, 2 misuse.
 *
 * Output conventions: human-readable lines on stdout, header and diagnostic
 * lines start with '#'.  With --json, stdout carries only JSON objects, one
 * per result line, and the '#' header goes to stderr.  JSON keys: tool,
 * transport, size, count, rate, min_ns, avg_ns, p50_ns, p99_ns, p999_ns,
 * max_ns, stddev_ns, msgs_per_sec, clock, mode, load (absent ones omitted),
 * plus tool-specific keys.
 */
#ifndef FLIT_TOOL_H
#define FLIT_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdnoreturn.h>
#include <string.h>
#include <sys/types.h>

#include <flit/clock.h>
#include <flit/flit.h>
#include <flit/hist.h>

#define TOOL_FMT(a, b) __attribute__((format(printf, a, b)))

/* Most CPUs a --cpus list may name. */
#define TOOL_MAX_CPUS 64

/* ---- identity, usage, exit codes ---------------------------------------- */

/* Name the program (for messages) and its usage text (printed by --help on
 * stdout and after a misuse on stderr).  Call first. */
void tool_init(const char *name, const char *usage);
const char *tool_name(void);

/* --help: usage on stdout, exit 0. */
noreturn void tool_help_exit(void);
/* Misuse: "name: message" and the usage on stderr, exit 2. */
noreturn void tool_usage_exit(const char *fmt, ...) TOOL_FMT(1, 2);
/* Runtime failure: "name: message" on stderr, exit 1. */
noreturn void tool_fail(const char *fmt, ...) TOOL_FMT(1, 2);
/* "name: message" on stderr, nothing else. */
void tool_warn(const char *fmt, ...) TOOL_FMT(1, 2);

/* After getopt_long() returned '?' or ':' (optstring must start with ':',
 * and opterr = 0): report the bad option and exit 2. */
noreturn void tool_getopt_error(int c, char *const argv[]);

/* ---- argument parsing (each one exits 2 on a bad value) ----------------- */

/* Unsigned integer in [min, max]; decimal suffixes k, M, G (x1000). */
uint64_t tool_parse_count(const char *what, const char *arg, uint64_t min,
			  uint64_t max);
/* Byte size in [min, max]; binary suffixes K, M, G (x1024), k = K. */
uint64_t tool_parse_size(const char *what, const char *arg, uint64_t min,
			 uint64_t max);
/* Seconds (decimal fraction allowed) in [min, max]. */
double tool_parse_seconds(const char *what, const char *arg, double min,
			  double max);
/* A transport name flit knows: shm, udp, xdp, rdma.  (Whether the library
 * built here has it is a runtime question: flit_pub_new() answers.) */
const char *tool_parse_transport(const char *arg);
/* --topics N (flit-thru, flit-load): topic i of n is BASE.0000i (n > 1) or
 * BASE itself (n == 1); a subscriber takes them all by BASE.* (or BASE). */
void tool_spread_topic(char *buf, size_t len, const char *base, unsigned i, unsigned n);
void tool_spread_pattern(char *buf, size_t len, const char *base, unsigned n);
/* Subscribe to the n topics of BASE: one subscriber of BASE.* (n > 1) or
 * BASE; over rdma, whose static map serves exact topics, one subscriber a
 * topic (the topics of one session share one connection).  opts->pattern
 * is set here.  Returns the first subscriber (the rest close with the
 * context), or NULL with the library's error. */
flit_sub *tool_spread_subscribe(flit_ctx *ctx, const char *transport, const char *base, unsigned n,
				struct flit_sub_opts *opts);
/* "A,B,C" or ranges "0-3", each CPU one this process may run on.  Fills
 * cpus[], returns how many (1 .. max). */
int tool_parse_cpus(const char *arg, int *cpus, int max);
/* The CPUs this process may run on, lowest first (at most max). */
int tool_default_cpus(int *cpus, int max);
/* "0,1" for a list; buf of len bytes. */
const char *tool_cpus_str(const int *cpus, int n, char *buf, size_t len);

/* ---- pinning and processes ---------------------------------------------- */

/* Pin the calling thread to one CPU.  0 or -errno. */
int tool_pin_cpu(int cpu);
/* In a freshly forked child: die with the parent (PR_SET_PDEATHSIG), and
 * exit at once if it is already gone.  No orphans, whatever happens. */
void tool_child_init(pid_t parent);
/* Reap `pid`: wait up to timeout_ms for it to exit, then SIGKILL it and
 * reap it.  Returns 0 with *status filled, or -errno. */
int tool_reap(pid_t pid, unsigned timeout_ms, int *status);
/* Non-blocking check: 1 if `pid` has exited (and is reaped: *status), 0 if
 * it still runs, -errno on error. */
int tool_child_exited(pid_t pid, int *status);
/* "exited with status 3" / "killed by signal 9 (Killed)". */
const char *tool_wstatus_str(int status, char *buf, size_t len);

/* Sleep (slow paths only: a wake-up costs ~40 us here). */
/* User + system CPU time of this process (all its threads), ns. */
uint64_t tool_cpu_ns(void);
void tool_sleep_us(unsigned us);

/* ---- configuration lines ------------------------------------------------- */

/* The inline configuration a tool gives every context it creates
 * (flit_ctx_opts.config): its own lines (context.transports = T) followed by
 * the user's -C lines, one per line, so a -C line overrides a tool line. */
#define TOOL_CONFIG_MAX   4096
#define TOOL_CONFIG_LINES 64

struct tool_config {
	char text[TOOL_CONFIG_MAX];
	size_t len;
	int nlines;
	/* line i + 1 of text: the -C argument it came from, or NULL (the
	 * tool's own line) */
	const char *user[TOOL_CONFIG_LINES];
};

void tool_config_init(struct tool_config *c);
/* One line of the tool's own (printf format; no newline in it). */
void tool_config_add(struct tool_config *c, const char *fmt, ...) TOOL_FMT(2, 3);
/* Keep a -C argument in lines[*n] until the tool's own lines are in (-t may
 * come after -C); usage error (exit 2) past TOOL_CONFIG_LINES - 1 lines. */
void tool_config_defer(const char **lines, int *n, const char *arg);
/* One -C argument: a line, as given (usage error, exit 2, for a newline in
 * it or too much text).  With `scope` ("source", "receiver"), a bare
 * "key = value" whose key names no scope gets "scope." put in front (so
 * flit-pub -C 'batch = true' still means source.batch). */
void tool_config_add_user(struct tool_config *c, const char *arg,
			  const char *scope);
/* The value of a fully qualified key (case-insensitive) as the last line
 * setting it says, else as the environment (FLIT_SCOPE_KEY) says, else NULL.
 * (A $FLIT_CONFIG file is not read here.) */
const char *tool_config_get(const struct tool_config *c, const char *key,
			    char *buf, size_t len);
/* The udp path the lines (or the environment) choose, as the results name
 * it: "sockets", "io_uring", with "+poll" for context.udp.uring_recv =
 * poll and "+ring-send" for context.udp.uring_send = ring. */
const char *tool_udp_path_label(const struct tool_config *c, char *buf, size_t len);
/* Such a label back into its parts (flit-floor -b): 0, or -1 if it is not
 * one. */
int tool_udp_path_parse(const char *label, bool *uring, bool *poll_recv, bool *ring_send);
/* The -C lines as given, joined with "; " (NULL if there are none): for
 * the results (JSON "config"). */
const char *tool_config_user(const struct tool_config *c, char *buf, size_t len);
/* flit_ctx_new() with the lines.  NULL on failure, with *errbuf saying why;
 * when the library rejected a -C line, the message quotes it:
 * "-C 'source.batch = maybe': <context options>:2: bad value ...". */
flit_ctx *tool_ctx_new(const struct tool_config *c, char *errbuf, size_t len);
/* Check the lines now (create and close a context: no transport is opened,
 * nothing is sent); on a bad line, fail (exit 1) naming it. */
void tool_config_check(const struct tool_config *c);

/* ---- network namespaces -------------------------------------------------- */

/* Open network namespace NAME (/run/netns/NAME, as `ip netns` and
 * tools/testbed make them; a NAME starting with '/' is a path such as
 * /proc/PID/ns/net).  Returns an fd, or -1 with the reason in errbuf
 * ("network namespace 'x' does not exist (/run/netns/x: No such file ...)"). */
int tool_netns_open(const char *name, char *errbuf, size_t len);
/* setns(fd, CLONE_NEWNET) for the calling thread (call it before any
 * context or socket exists).  0, or -1 with the reason in errbuf (EPERM:
 * "setns needs CAP_SYS_ADMIN: run as root"). */
int tool_netns_enter(int fd, const char *name, char *errbuf, size_t len);
/* Both, failing (exit 1) with the reason. */
void tool_netns_enter_name(const char *name);
/* A usage check of a --netns argument (exit 2 if empty or it holds '/'
 * without being an absolute path). */
const char *tool_parse_netns(const char *opt, const char *arg);
/* udp without context.udp.interface needs a route for multicast in the
 * calling thread's namespace (`netns`: its name for the message, NULL: the
 * one we started in): 0 if one exists (or an interface is set), else -1 with
 * advice in errbuf (add a route, name the interface, or use the testbed). */
int tool_udp_route_check(const struct tool_config *c, const char *netns,
			 char *errbuf, size_t len);
/* Before a side's context, in the namespace it runs in: -t xdp needs
 * context.udp.interface (usage error, exit 2), -t udp a multicast route
 * (tool_udp_route_check; runtime failure, exit 1). */
void tool_net_check(const char *transport, const struct tool_config *c,
		    const char *netns);

/* rdma: the IPv4 address of this host's first active RDMA port (its
 * IPv4-mapped GID, as RoCE has it; /sys/class/infiniband), for tools that
 * connect to themselves.  0; -1 when no port has one; -2 when there is
 * no RDMA device at all (the library will say so). */
int tool_rdma_local_addr(char *buf, size_t len);

/* -t rdma's address in buf: kept if set (--rdma-addr), else this host's
 * (tool_rdma_local_addr), else 127.0.0.1 when there is no RDMA device (the
 * library then says "no RDMA device"); fails (exit 1) when devices exist
 * but no port has an IPv4 address. */
void tool_rdma_addr_default(char *buf, size_t len);
/* --rdma-addr: an IPv4 address, copied into buf (usage error, exit 2, if
 * it is not one). */
void tool_parse_rdma_addr(const char *arg, char *buf, size_t len);

/* ---- the options the measuring tools share (flit-pong, flit-load, flit-thru) */

enum tool_side { TOOL_SIDES_BOTH, TOOL_SIDE_A, TOOL_SIDE_B };

/* Codes of the shared options that have no letter; a tool's own such
 * options are numbered from TOOL_OPT_OWN. */
enum {
	TOOL_OPT_NETNS = 256,
	TOOL_OPT_PEER_NETNS,
	TOOL_OPT_RDMA_ADDR,
	TOOL_OPT_RDMA_PORT,
	TOOL_OPT_OWN,
};

/* The longopts entries of the options every one of these tools has; a tool
 * lists the other shared ones it offers ("size" 's', "mode" 'm', "hist" 'H',
 * "peer-topic-prefix" 'p', "rdma-addr" TOOL_OPT_RDMA_ADDR, "rdma-port"
 * TOOL_OPT_RDMA_PORT) beside its own. */
#define TOOL_LONGOPTS                                                      \
	{ "transport",  required_argument, NULL, 't' },                    \
	{ "cpus",       required_argument, NULL, 'c' },                    \
	{ "timeout",    required_argument, NULL, 'T' },                    \
	{ "config",     required_argument, NULL, 'C' },                    \
	{ "netns",      required_argument, NULL, TOOL_OPT_NETNS },         \
	{ "peer-netns", required_argument, NULL, TOOL_OPT_PEER_NETNS },    \
	{ "json",       no_argument,       NULL, 'j' },                    \
	{ "verbose",    no_argument,       NULL, 'v' },                    \
	{ "help",       no_argument,       NULL, 'h' }

/* What a tool is, for the shared options' defaults, checks and messages. */
struct tool_shape {
	/* Two sides A (measures) and B (answers, forked unless --role): the
	 * --role values ("ping", "pong") and the sides' names in messages
	 * ("publisher", "subscriber").  NULL: one process and its forked
	 * receivers (flit-thru): no --role, any number of CPUs. */
	const char *role[2], *side[2];
	/* --rdma-port P: the tool listens on P .. P + rdma_ports - 1 */
	unsigned rdma_ports;
};

/* The shared options' values.  Set by tool_opts_init(), the getopt loop
 * (tool_opts_parse, tool_opts_role), tool_opts_end() and
 * tool_opts_finish(); read by the tool after that. */
struct tool_opts {
	const struct tool_shape *shape;
	const char *transport;          /* -t: shm (default), udp, xdp, rdma */
	bool net;                       /* a network transport (not shm) */
	size_t size;                    /* -s: message size (default 16) */
	bool overwrite;                 /* -m overwrite: the shm ring mode */
	double timeout_s;               /* -T (default 10) */
	/* -c, else the CPUs this process may use; two sides: [0] side A,
	 * [1] side B (the same CPU when only one is given or allowed) */
	int cpus[TOOL_MAX_CPUS], ncpus;
	enum tool_side role;            /* --role: one side alone */
	/* -p, else the tool's name, and ".<pid>" after it without --role */
	char prefix[FLIT_TOPIC_MAX - 8];
	bool json, hist;                /* -j, -H */
	int verbose;                    /* -v, repeatable */
	const char *netns, *peer_netns;
	char rdma_addr[64];             /* --rdma-addr, "" if not given */
	unsigned rdma_port;             /* --rdma-port, 0 if not given */
	/* every context's inline config: context.transports = T, the tool's
	 * own lines, the -C lines */
	struct tool_config config;
	/* the parse's own */
	bool cpus_set, prefix_set;
	const char *cfg[TOOL_CONFIG_LINES];
	int ncfg;
};

/* The defaults, for a tool of this shape (static: it is kept). */
void tool_opts_init(struct tool_opts *t, const struct tool_shape *shape);
/* In the getopt loop, after the tool's own cases (a letter the tool gives a
 * meaning of its own, such as flit-load's -s LIST, is its case): -t -s -m -c
 * -T -C -p -j -H -v -h --netns --peer-netns --rdma-addr --rdma-port; which
 * of them a tool offers is its optstring and longopts.  Anything else is a
 * misuse (tool_getopt_error, exit 2). */
void tool_opts_parse(struct tool_opts *t, int opt, const char *arg,
		     char *const argv[]);
/* --role (its letter is the tool's): one of shape->role. */
void tool_opts_role(struct tool_opts *t, const char *arg);
/* After the getopt loop: nothing but options (exit 2), --peer-netns only
 * without --role, t->net, and the config's first line (context.transports
 * = T: an shm run opens no socket, a udp run does not see shm).  The tool's
 * own config lines follow, then tool_opts_finish(). */
void tool_opts_end(struct tool_opts *t, int argc, char *const argv[]);
/* The -C lines after the tool's (so one overrides a tool line), the CPUs
 * (default: the first ones this process may use; two sides without --role:
 * two different ones), the default topic prefix. */
void tool_opts_finish(struct tool_opts *t);

struct tool_clock;

/* Before any context or socket: enter --netns, open --peer-netns, check the
 * network and the -C lines (tool_net_check, tool_config_check), calibrate
 * *clk.  Returns the peer namespace's fd, or -1 without --peer-netns. */
int tool_opts_start(const struct tool_opts *t, struct tool_clock *clk);
/* In a forked process of the other side: enter the peer namespace (peer_fd
 * from tool_opts_start; -1: stay) and check the network there. */
void tool_opts_enter_peer(const struct tool_opts *t, int peer_fd);

/* ---- two-sided tools (flit-pong, flit-load) ------------------------------- */

/* Pin the calling thread to `cpu`, or fail (exit 1) saying why. */
void tool_pin_or_fail(int cpu);

/* The common main() of a tool with two sides A (measures: ping, publisher)
 * and B (answers: pong, subscriber), after tool_opts_finish().  In order:
 * tool_opts_start(); then run side A or side B alone (--role), or both: A's
 * CPU pinned before forking (so a refusal leaves no child), B forked as
 * "<tool> (<role B>)" into the peer namespace, pinned to its CPU, exiting
 * with run_b's status, die-with-parent.  Returns what run_a (given B's pid,
 * or 0) or run_b returned. */
struct tool_sides {
	const struct tool_opts *opts;
	struct tool_clock *clk;
	int (*run_a)(void *arg, pid_t peer);
	int (*run_b)(void *arg);
	void *arg;
};
int tool_run_sides(const struct tool_sides *s);

/* The other side's source as a subscriber callback sees it: known from
 * its first data message; only its EOS counts as its end (a stale source
 * of the same topic may come and go). */
struct tool_peer {
	bool known, gone, died;  /* died: its EOS said FLIT_MSGF_SOURCE_DIED */
	uint32_t session;
};

static inline void tool_peer_data(struct tool_peer *p, const struct flit_msg *m)
{
	if (!p->known) {
		p->known = true;
		p->session = m->session_id;
	}
}

/* An EOS: true (and gone) when it is the peer's. */
static inline bool tool_peer_eos(struct tool_peer *p, const struct flit_msg *m)
{
	if (!p->known || m->session_id != p->session)
		return false;
	p->gone = true;
	p->died = m->flags & FLIT_MSGF_SOURCE_DIED;
	return true;
}

/* Fail from side A: take the forked side B (*child > 0) down, or say how it
 * ended ("msg (the <peer> process exited with status 3)"), close the
 * objects (NULL is fine; so no ring file is left behind), exit 1. */
noreturn void tool_sides_fail(pid_t *child, const char *peer, flit_sub *sub,
			      flit_pub *pub, flit_ctx *ctx, const char *msg);

/* ---- the measurement clock ---------------------------------------------- */

struct tool_clock {
	struct flit_tsc tsc;    /* ns_per_tick = 1 when falling back */
	bool use_tsc;
	const char *name;       /* "tsc" or "monotonic_raw" */
};

/* Calibrate the TSC (~100 ms) or fall back to CLOCK_MONOTONIC_RAW. */
void tool_clock_init(struct tool_clock *clk);
/* "tsc 2.995 GHz, invariant, calibrated against CLOCK_MONOTONIC_RAW" */
const char *tool_clock_desc(const struct tool_clock *clk, char *buf, size_t len);

/* A fenced reading, in ticks of the tool clock. */
static inline uint64_t tool_now(const struct tool_clock *clk)
{
	return clk->use_tsc ? flit_tsc_ticks_ordered() : flit_monotonic_raw_ns();
}

static inline double tool_ns(const struct tool_clock *clk, uint64_t ticks)
{
	return (double)ticks * clk->tsc.ns_per_tick;
}

static inline uint64_t tool_ticks(const struct tool_clock *clk, double ns)
{
	return (uint64_t)(ns / clk->tsc.ns_per_tick);
}

/* ---- the floor of a udp path (udp_floor.c, flit-floor --lines udp) ------- */

struct udp_floor {
	bool uring;             /* io_uring, else recvfrom/sendto */
	bool poll_recv;         /* io_uring: readiness by a multishot poll,
				 * recvfrom (else a multishot recvmsg) */
	bool ring_send;         /* io_uring: SEND through the ring (else sendto) */
	const char *peer;       /* the pong's IPv4 address */
	uint16_t port;          /* the pong's port; the ping binds port + 1 */
	uint32_t size;          /* datagram bytes */
	int cpus[2];            /* ping (this process), pong (forked) */
	const char *netns, *peer_netns;   /* NULL: stay */
	double timeout_s;       /* start-up, and one round trip */
};

/* Fork the pong, enter f->netns, ping count measured round trips after
 * warmup (at least 1: the first one waits for the peer) into samples (TSC
 * ticks per round trip).  0, or -errno (-ETIMEDOUT: no answer; -ECHILD: the
 * peer failed).  Usage errors exit 2, set-up failures exit 1. */
int udp_floor_run(const struct udp_floor *f, uint64_t warmup, uint64_t count,
		  uint64_t *samples);

/* ---- statistics ---------------------------------------------------------- */

struct tool_stats {
	uint64_t n;
	double min, avg, p50, p99, p999, max, stddev;   /* ns */
};

/* Exact statistics of v[0..n): sorts v in place (ascending), then reports
 * each value times `scale` (e.g. ns per tick / 2 for RTT/2 from round-trip
 * ticks).  Percentiles by nearest rank: the smallest value with at least
 * p% of the samples at or below it.  stddev is the population deviation. */
void tool_stats_compute(uint64_t *v, size_t n, double scale,
			struct tool_stats *st);

/* The same statistics from a histogram (include/flit/hist.h), each value
 * times `scale`: n, min, max, avg and stddev exact, p50/p99/p99.9 by
 * nearest rank to within the histogram's precision. */
void tool_stats_from_hist(const flit_hist *h, double scale,
			  struct tool_stats *st);

/* ",\"cdf\":[[pct,ns],...]" for sorted v[0..n) (scaled as above): the
 * distribution at 0 (min), 1..99 %, the tail to 99.99 %, and 100 (max), by
 * nearest rank; for plots.  Returns the bytes written (0: did not fit). */
size_t tool_cdf_member(char *buf, size_t len, const uint64_t *sorted, size_t n,
		       double scale);

/* Histogram of sorted v[0..n) (scaled as above) in log2 buckets of ns:
 * [2^k, 2^(k+1)) with count, percentage and cumulative percentage. */
void tool_hist_print(FILE *f, const uint64_t *sorted, size_t n, double scale);

/* ---- payloads ------------------------------------------------------------ */

/* Sequence number in the first 8 bytes (host order), then a pattern that
 * depends on the sequence number, so stale and corrupt data are caught.
 * len >= 8. */
void tool_payload_fill(void *buf, size_t len, uint64_t seq);
/* -1 if buf holds the payload of `seq` exactly, else the first bad offset. */
long tool_payload_check(const void *buf, size_t len, uint64_t seq);
static inline uint64_t tool_payload_seq(const void *buf)
{
	uint64_t s;

	memcpy(&s, buf, sizeof(s));
	return s;
}

/* ---- output --------------------------------------------------------------- */

struct tool_result {
	const char *tool;
	const char *transport;  /* NULL: absent */
	const char *clock;
	const char *mode;
	const char *label;      /* table only: first column ("" if none) */
	int64_t size;           /* < 0: absent */
	int64_t count;          /* < 0: absent */
	double rate;            /* offered rate, msgs/s; < 0: absent */
	const struct tool_stats *lat;   /* NULL: no latency fields */
	double msgs_per_sec;    /* < 0: absent */
	/* NULL or more members, pre-formatted: "\"gaps\":0,\"side\":\"rx\"" */
	const char *extra;
};

/* Every field absent. */
void tool_result_init(struct tool_result *r, const char *tool);

/* One JSON object and a newline (adds "load" from /proc/loadavg). */
void tool_json_print(FILE *f, const struct tool_result *r);
/* A JSON string literal, escaped. */
/* Write len bytes escaped for a quoted string: quotes, backslashes and
 * control bytes always; bytes >= 0x80 too with TOOL_ESC_HIGH (binary data);
 * as \u00XX with TOOL_ESC_JSON, else as \xXX. */
#define TOOL_ESC_JSON 1u
#define TOOL_ESC_HIGH 2u
void tool_escape(FILE *f, const void *data, size_t len, unsigned flags);
void tool_json_str(FILE *f, const char *s);
/* ",\"key\":\"val\"" into buf (for tool_result.extra), val escaped; returns
 * the bytes written (0 if it does not fit: buf unchanged). */
size_t tool_json_member(char *buf, size_t len, const char *key, const char *val);

/* The latency table: header, then one row per result (ns). */
void tool_lat_header(FILE *f);
void tool_lat_row(FILE *f, const struct tool_result *r);

/* "0.23 0.13 0.07" from /proc/loadavg ("?" if unreadable). */
const char *tool_loadavg(char *buf, size_t len);
/* The run header: "# <tool>: <text>", then "# load: ... cpus online N". */
void tool_header(FILE *f, const char *fmt, ...) TOOL_FMT(2, 3);

/* -v: library messages (flit_set_print) to stderr; level 1 shows warnings
 * and info, 2 and more also debug.  0: silence. */
void tool_set_verbose(int level);
/* With -v: one line on stderr per transport open in ctx, how it is set up
 * ("flit-sub: set-up: xdp on eth0: native mode, ..., zero-copy, ...";
 * flit_ctx_describe()). */
void tool_print_setup(const flit_ctx *ctx);

#endif /* FLIT_TOOL_H */
