// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit-topics: what many topics cost one context, measured the way a
 * market-data user meets it (one source per instrument).
 *
 *   pub: creates N publishers of topics PREFIX00000, PREFIX00001, ... in one
 *        context, then idles polling every 1 ms; reports the time to create
 *        them (and per topic at the start and at the end: is it linear?),
 *        file descriptors, RSS and the CPU of the idle process.
 *   sub PATTERN: subscribes to PATTERN and reports when N distinct topics
 *        were found (a BOS or a message of each), or how many by the timeout.
 *
 * tools/bench-topics.sh runs both per transport for N = 1 .. 100,000.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"
#include "xdp/xdp_prog.h"

static const char usage[] =
"Usage: flit-topics [-t TRANSPORT] [options] pub\n"
"       flit-topics [-t TRANSPORT] [options] sub PATTERN\n"
"What many topics cost one context.\n"
"\n"
"pub: create N publishers of topics PREFIX00000.. in one context, then idle,\n"
"     polling every 1 ms (--no-poll: not at all): time to create (and per\n"
"     topic, first and last tenth),\n"
"     file descriptors, RSS, CPU of the idle process, the library's share of\n"
"     it (its threads and flit_ctx_poll()) and, measured after, of the same\n"
"     1 ms sleep loop without the library: the floor.\n"
"sub: subscribe to PATTERN until N distinct topics are found (a BOS or a\n"
"     message of each) or the timeout: time to find them, or how many.\n"
"\n"
"  -t, --transport T    shm (default), udp, xdp, rdma\n"
"  -n, --topics N       topics (default 1000; k, M suffixes)\n"
"  -p, --prefix P       topic prefix (default md.sym)\n"
"  -i, --idle S         pub: seconds of idling measured (default 2)\n"
"  -l, --linger S       seconds to stay up after the result, polling (pub:\n"
"                       so that subscribers can find the topics; sub: a\n"
"                       subscriber as it stays once resolution is stable)\n"
"                       (default 0; SIGINT/SIGTERM end it early)\n"
"  -s, --send           pub: one message on every topic after creating them\n"
"      --no-poll        pub: never call flit_ctx_poll() (but when a send is\n"
"                       back-pressured): idle and linger sleep 100 ms at a\n"
"                       time; a publisher need not poll (the library's\n"
"                       threads answer, advertise and keep it alive)\n"
"  -r, --rounds R       pub: after the idle time (subscribers have joined),\n"
"                       R rounds of one message on every topic (unbatched\n"
"                       unless -C 'source.batch = true')\n"
"  -m, --messages M     sub: also wait for M messages; then, after --linger\n"
"                       (the rest of the publication), the messages of\n"
"                       other topics dropped (msgs_filtered), NAKs and loss,\n"
"                       and over xdp what the XDP program did meanwhile:\n"
"                       frames dropped there (filtered) and steered up\n"
"  -S, --session NAME   pub: the topics share session NAME\n"
"                       (source.session; NAME, NAME1, ... for each 50,000:\n"
"                       a session holds at most 65,536 topics); 'own':\n"
"                       each topic a session of its own (without -S the\n"
"                       topics share sessions of 65,536)\n"
"  -T, --timeout S      pub: stop creating after S seconds (default 60);\n"
"                       sub: give up after S seconds (default 20)\n"
"  -C, --config LINE    a config line for the context (repeatable)\n"
"      --json           one JSON object on stdout (with created_at_s, pub:\n"
"                       when the last topic was made; subscribed_at_s and\n"
"                       found_at_s, sub: on CLOCK_MONOTONIC_RAW, which\n"
"                       network namespaces share)\n"
"  -v, --verbose        library messages (-vv: debug)\n"
"  -h, --help           this text\n"
"\n"
"The soft limit of open files is raised to the hard one (ulimit -Hn).\n"
"pub ends 1 when it could not create all N (the result says where and why);\n"
"sub ends 1 when it found fewer than N by the timeout.\n"
"Exit status: 0 ok, 1 runtime failure, 2 usage error.\n";

struct options {
	const char *transport, *prefix, *pattern, *session;
	bool sub, send, json, no_poll;
	uint64_t n, rounds, want_msgs;
	char ifname[IF_NAMESIZE];  /* context.udp.interface (the xdp counters) */
	double idle_s, linger_s, timeout_s;
	struct tool_config config;
	int verbose;
};

/* --session: topics per session name */
#define SESSION_TOPICS 50000

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	return (double)flit_monotonic_raw_ns() / 1e9;
}

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;
	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n > 3 ? n - 3 : 0;   /* ".", "..", and the directory's own fd */
}

static uint64_t rss_bytes(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "re");
	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* CPU seconds of the process (who: RUSAGE_SELF) or of this thread alone
 * (RUSAGE_THREAD: the floor, without the library's threads). */
static double cpu_of(int who)
{
	struct rusage ru;
	getrusage(who, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* This thread's CPU time, to the nanosecond (getrusage() rounds to
 * microseconds: a poll of an idle context takes less). */
static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void topic_name(char *buf, size_t len, const char *prefix, uint64_t i, uint64_t n)
{
	int w = n > 100000 ? (int)snprintf(NULL, 0, "%llu", (unsigned long long)(n - 1)) : 5;
	snprintf(buf, len, "%s%0*llu", prefix, w, (unsigned long long)i);
}

/* ---- pub ------------------------------------------------------------------- */

/* One message on each of pubs[0..n) (value: round << 32 | topic number);
 * the messages sent. */
static uint64_t send_round(flit_ctx *ctx, flit_pub **pubs, uint64_t n, uint64_t round, bool poll)
{
	uint64_t sent = 0;

	for (uint64_t i = 0; i < n && !stop; i++) {
		uint64_t v = round << 32 | i;
		for (int tries = 0; tries < 1000; tries++) {
			int rc = flit_pub_send(pubs[i], &v, sizeof(v));
			if (rc == FLIT_OK) {
				sent++;
				break;
			}
			if (rc < 0)
				break;
			flit_ctx_poll(ctx, 0);
			tool_sleep_us(100);
		}
		if ((i & 255) == 255 && poll)
			flit_ctx_poll(ctx, 0);
	}
	return sent;
}

static int run_pub(const struct options *o, flit_ctx *ctx)
{
	flit_pub **pubs = calloc(o->n, sizeof(*pubs));
	char topic[FLIT_TOPIC_MAX + 1], why[512] = "";
	uint64_t made = 0, tenth = o->n >= 10 ? o->n / 10 : 1;
	double t0 = now_s(), t_first = 0, t_last0 = 0, t_end;
	char scfg[96] = "";
	FLIT_OPTS(flit_pub_opts, popts, .transport = o->transport, .config = o->session ? scfg : NULL);

	if (!pubs)
		tool_fail("no memory for %llu publishers", (unsigned long long)o->n);
	for (; made < o->n && !stop; made++) {
		if (made == o->n - tenth)
			t_last0 = now_s();
		topic_name(topic, sizeof(topic), o->prefix, made, o->n);
		if (o->session && made % SESSION_TOPICS == 0) {
			if (made && strcmp(o->session, "own"))
				snprintf(scfg, sizeof(scfg), "session = %s%llu\n", o->session,
					 (unsigned long long)(made / SESSION_TOPICS));
			else
				snprintf(scfg, sizeof(scfg), "session = %s\n", o->session);
		}
		pubs[made] = flit_pub_new(ctx, topic, &popts);
		if (!pubs[made]) {
			snprintf(why, sizeof(why), "publisher %llu ('%s'): %s",
				 (unsigned long long)made, topic, flit_errmsg());
			break;
		}
		if (made + 1 == tenth)
			t_first = now_s() - t0;
		if ((made & 255) == 255) {
			if (!o->no_poll)
				flit_ctx_poll(ctx, 0);
			if (now_s() - t0 > o->timeout_s) {
				made++;
				snprintf(why, sizeof(why), "stopped after %g s (--timeout)", o->timeout_s);
				break;
			}
		}
	}
	t_end = now_s();
	if (stop && !why[0])
		snprintf(why, sizeof(why), "interrupted");
	double create_s = t_end - t0;
	double us_first = made >= tenth ? t_first * 1e6 / (double)tenth : 0;
	double us_last = made == o->n && t_last0 ? (t_end - t_last0) * 1e6 / (double)tenth : 0;
	unsigned fds = count_fds();

	uint64_t sent = o->send ? send_round(ctx, pubs, made, 0, !o->no_poll) : 0;

	/* the idle process: polling every 1 ms, as an application's loop
	 * (--no-poll: sleeping 100 ms at a time, never polling: a publisher
	 * need not, the library's threads do its part).  The library's
	 * share: its threads (the process less this one) and this thread's
	 * time in flit_ctx_poll() */
	const unsigned nap_us = o->no_poll ? 100000 : 1000;
	double c0 = cpu_of(RUSAGE_SELF), m0 = cpu_of(RUSAGE_THREAD), w0 = now_s(), in_poll = 0;
	while (!stop && now_s() - w0 < o->idle_s) {
		if (!o->no_poll) {
			double p0 = thread_cpu_s();
			flit_ctx_poll(ctx, 0);
			in_poll += thread_cpu_s() - p0;
		}
		tool_sleep_us(nap_us);
	}
	double idle_wall = now_s() - w0, idle_cpu = cpu_of(RUSAGE_SELF) - c0;
	double lib_cpu = idle_cpu - (cpu_of(RUSAGE_THREAD) - m0) + in_poll;
	double cpu_pct = idle_wall > 0 ? 100.0 * idle_cpu / idle_wall : 0;
	double lib_pct = idle_wall > 0 ? 100.0 * (lib_cpu > 0 ? lib_cpu : 0) / idle_wall : 0;
	/* the floor: the same loop for a second, without the library (what
	 * its wake-ups cost here: 1000 a second, or 10 with --no-poll): this
	 * thread's CPU alone, the library's own threads go on meanwhile */
	double fc0 = cpu_of(RUSAGE_THREAD), fw0 = now_s();
	while (!stop && now_s() - fw0 < 1.0)
		tool_sleep_us(nap_us);
	double floor_pct = 100.0 * (cpu_of(RUSAGE_THREAD) - fc0) / (now_s() - fw0);
	uint64_t rss = rss_bytes();

	/* --rounds: the subscribers have had the idle time to join */
	double r0 = now_s();
	uint64_t rsent = 0;
	for (uint64_t r = 0; r < o->rounds && !stop; r++)
		rsent += send_round(ctx, pubs, made, r, !o->no_poll);
	for (uint64_t i = 0; i < made && o->rounds; i++)
		flit_pub_flush(pubs[i]);
	double rounds_s = now_s() - r0;

	if (o->json) {
		printf("{\"tool\":\"flit-topics\",\"mode\":\"pub\",\"transport\":\"%s\",\"topics\":%llu,"
		       "\"created\":%llu,\"create_s\":%.4f,\"us_per_topic_first\":%.2f,"
		       "\"us_per_topic_last\":%.2f,\"fds\":%u,\"rss_bytes\":%llu,\"idle_s\":%.2f,"
		       "\"idle_cpu_pct\":%.2f,\"idle_lib_pct\":%.2f,\"idle_floor_pct\":%.2f,\"sent\":%llu,"
		       "\"session\":\"%s\",\"created_at_s\":%.6f,\"poll\":\"%s\"",
		       o->transport, (unsigned long long)o->n, (unsigned long long)made, create_s,
		       us_first, us_last, fds, (unsigned long long)rss, idle_wall, cpu_pct, lib_pct, floor_pct,
		       (unsigned long long)sent, o->session ? o->session : "", t_end,
		       o->no_poll ? "none" : "1ms");
		if (o->rounds)
			printf(",\"rounds\":%llu,\"round_msgs\":%llu,\"rounds_s\":%.4f",
			       (unsigned long long)o->rounds, (unsigned long long)rsent, rounds_s);
		if (why[0]) {
			printf(",\"error\":\"");
			for (const char *p = why; *p; p++)
				printf(*p == '"' || *p == '\\' ? "\\%c" : (unsigned char)*p < 32 ? " " : "%c", *p);
			printf("\"");
		}
		printf("}\n");
	} else {
		printf("# flit-topics pub: %s, %llu topics '%s...'%s%s\n", o->transport,
		       (unsigned long long)o->n, o->prefix, o->session ? ", session " : "",
		       o->session ? o->session : "");
		printf("created %llu of %llu in %.3f s (%.1f us/topic for the first tenth, %.1f for the last)\n",
		       (unsigned long long)made, (unsigned long long)o->n, create_s, us_first, us_last);
		if (why[0])
			printf("stopped: %s\n", why);
		printf("%u fds, RSS %.1f MiB, idle CPU %.2f %% of a core over %.1f s, the library's "
		       "%.2f %% (its threads and flit_ctx_poll(); the %s sleep loop alone: %.2f %%)\n",
		       fds, (double)rss / 1048576.0, cpu_pct, idle_wall, lib_pct,
		       o->no_poll ? "100 ms, not polling," : "1 ms", floor_pct);
		if (o->send)
			printf("sent one message on %llu topics\n", (unsigned long long)sent);
		if (o->rounds)
			printf("sent %llu rounds: %llu messages in %.3f s\n",
			       (unsigned long long)o->rounds, (unsigned long long)rsent, rounds_s);
	}
	fflush(stdout);

	double l0 = now_s();
	while (!stop && now_s() - l0 < o->linger_s) {
		if (!o->no_poll)
			flit_ctx_poll(ctx, 0);
		tool_sleep_us(nap_us);
	}
	for (uint64_t i = 0; i < made; i++)
		flit_pub_close(pubs[i]);
	free(pubs);
	return made == o->n ? 0 : 1;
}

/* ---- sub ------------------------------------------------------------------- */

struct seen {
	uint64_t *h;            /* open addressing, 0 free */
	uint64_t cap, n;
	double t0, t_all;
	uint64_t want, msgs;
};

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h ? h : 1;
}

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct seen *s = arg;
	(void)sub;
	if (m->kind == FLIT_MSG_DATA)
		s->msgs++;
	if (m->kind != FLIT_MSG_DATA && m->kind != FLIT_MSG_BOS)
		return;
	uint64_t h = hash(m->topic), i = h & (s->cap - 1);
	while (s->h[i] && s->h[i] != h)
		i = (i + 1) & (s->cap - 1);
	if (s->h[i])
		return;
	s->h[i] = h;
	if (++s->n == s->want)
		s->t_all = now_s();
}

/* The XDP program's counters of o->ifname; 0 or -errno (said on stderr). */
static int xdp_counters(const struct options *o, uint64_t *out)
{
	struct flit_xdp_maps m;
	int rc = o->ifname[0] ? flit_xdp_maps_open(o->ifname, &m) : -ENOENT;

	if (rc == 0) {
		rc = flit_xdp_counters(&m, out);
		flit_xdp_maps_close(&m);
	}
	if (rc < 0)
		fprintf(stderr, "flit-topics: the XDP program's counters%s%s: %s\n",
			o->ifname[0] ? " of " : "", o->ifname,
			o->ifname[0] ? flit_errmsg() : "no context.udp.interface given");
	return rc;
}

static int run_sub(const struct options *o, flit_ctx *ctx)
{
	struct seen s = { .want = o->n };
	for (s.cap = 1024; s.cap < 2 * o->n; s.cap *= 2)
		;
	s.h = calloc(s.cap, sizeof(*s.h));
	if (!s.h)
		tool_fail("no memory for %llu topics", (unsigned long long)o->n);
	FLIT_OPTS(flit_sub_opts, sopts, .on_msg = on_msg, .arg = &s,
		  .pattern = strpbrk(o->pattern, "*?[") != NULL);
	s.t0 = now_s();
	flit_sub *sub = flit_sub_new(ctx, o->pattern, &sopts);
	if (!sub)
		tool_fail("subscribing to '%s' on %s: %s", o->pattern, o->transport, flit_errmsg());
	/* the program's counters from here (over xdp: the context has just
	 * attached it, or found it attached) */
	uint64_t x0[FLIT_XDP_COUNTERS] = { 0 }, x1[FLIT_XDP_COUNTERS] = { 0 };
	bool xc = o->want_msgs && !strcmp(o->transport, "xdp") && xdp_counters(o, x0) == 0;
	while (!stop && (s.n < s.want || s.msgs < o->want_msgs) && now_s() - s.t0 < o->timeout_s) {
		if (flit_ctx_poll(ctx, 0) <= 0)
			tool_sleep_us(200);
	}
	double find_s = s.n >= s.want ? s.t_all - s.t0 : now_s() - s.t0;
	double msgs_s = now_s() - s.t0;
	bool done = s.n >= s.want && s.msgs >= o->want_msgs;
	/* --messages: what the rest of the publication did, counted after the
	 * linger (the result comes then) */
	double l0 = now_s();
	while (o->want_msgs && !stop && now_s() - l0 < o->linger_s) {
		flit_ctx_poll(ctx, 0);
		tool_sleep_us(1000);
	}
	struct flit_counters c = { .sz = sizeof(c) };
	flit_ctx_counters(ctx, &c);
	if (xc && xdp_counters(o, x1) == 0)
		for (int i = 0; i < FLIT_XDP_COUNTERS; i++)
			x1[i] -= x0[i];
	if (o->json) {
		printf("{\"tool\":\"flit-topics\",\"mode\":\"sub\",\"transport\":\"%s\",\"pattern\":\"%s\","
		       "\"topics\":%llu,\"found\":%llu,\"find_s\":%.4f,\"complete\":%s,\"msgs\":%llu,"
		       "\"subscribed_at_s\":%.6f",
		       o->transport, o->pattern, (unsigned long long)o->n, (unsigned long long)s.n,
		       find_s, done ? "true" : "false", (unsigned long long)s.msgs, s.t0);
		if (s.n >= s.want)
			printf(",\"found_at_s\":%.6f", s.t_all);
		if (o->want_msgs)
			printf(",\"msgs_wanted\":%llu,\"msgs_filtered\":%llu,\"msgs_filtered_early\":%llu,"
			       "\"naks_sent\":%llu,\"msgs_lost\":%llu", (unsigned long long)o->want_msgs,
			       (unsigned long long)c.msgs_filtered,
			       (unsigned long long)c.msgs_filtered_early, (unsigned long long)c.naks_sent,
			       (unsigned long long)c.msgs_lost);
		if (xc)
			printf(",\"xdp_filtered\":%llu,\"xdp_redirected\":%llu,\"xdp_report_full\":%llu",
			       (unsigned long long)x1[FLIT_XDP_FILTERED],
			       (unsigned long long)x1[FLIT_XDP_REDIRECTED],
			       (unsigned long long)x1[FLIT_XDP_REPORT_FULL]);
		printf("}\n");
	} else if (o->want_msgs) {
		printf("%s%llu of %llu messages of '%s' in %.3f s; %llu of other topics dropped "
		       "(msgs_filtered; %llu before they reached this process), %llu NAK ranges, "
		       "%llu lost\n", done ? "" : "only ",
		       (unsigned long long)s.msgs, (unsigned long long)o->want_msgs, o->pattern,
		       msgs_s, (unsigned long long)c.msgs_filtered,
		       (unsigned long long)c.msgs_filtered_early,
		       (unsigned long long)c.naks_sent, (unsigned long long)c.msgs_lost);
		if (xc)
			printf("the XDP program of %s meanwhile: %llu frames dropped (filtered), "
			       "%llu steered up, %llu steered for a full ring\n", o->ifname,
			       (unsigned long long)x1[FLIT_XDP_FILTERED],
			       (unsigned long long)x1[FLIT_XDP_REDIRECTED],
			       (unsigned long long)x1[FLIT_XDP_REPORT_FULL]);
	} else if (s.n >= s.want)
		printf("found %llu topics of '%s' in %.3f s (%llu messages)\n", (unsigned long long)s.n,
		       o->pattern, find_s, (unsigned long long)s.msgs);
	else
		printf("found %llu of %llu topics of '%s' in %.3f s%s\n", (unsigned long long)s.n,
		       (unsigned long long)s.want, o->pattern, find_s, stop ? " (interrupted)" : " (timeout)");
	fflush(stdout);
	l0 = now_s();
	while (!o->want_msgs && !stop && now_s() - l0 < o->linger_s) {
		flit_ctx_poll(ctx, 0);
		tool_sleep_us(1000);
	}
	flit_sub_close(sub);
	free(s.h);
	return done ? 0 : 1;
}

/* ---- main ------------------------------------------------------------------ */

static void parse(int argc, char **argv, struct options *o)
{
	enum { OPT_JSON = 256, OPT_NO_POLL };
	static const struct option longopts[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "topics",    required_argument, NULL, 'n' },
		{ "prefix",    required_argument, NULL, 'p' },
		{ "idle",      required_argument, NULL, 'i' },
		{ "linger",    required_argument, NULL, 'l' },
		{ "send",      no_argument,       NULL, 's' },
		{ "no-poll",   no_argument,       NULL, OPT_NO_POLL },
		{ "rounds",    required_argument, NULL, 'r' },
		{ "messages",  required_argument, NULL, 'm' },
		{ "session",   required_argument, NULL, 'S' },
		{ "timeout",   required_argument, NULL, 'T' },
		{ "config",    required_argument, NULL, 'C' },
		{ "json",      no_argument,       NULL, OPT_JSON },
		{ "verbose",   no_argument,       NULL, 'v' },
		{ "help",      no_argument,       NULL, 'h' },
		{ 0 }
	};
	const char *cfg[TOOL_CONFIG_LINES];
	int opt, ncfg = 0;
	bool timeout_set = false;

	*o = (struct options){ .transport = "shm", .prefix = "md.sym", .n = 1000, .idle_s = 2 };
	while ((opt = getopt_long(argc, argv, ":t:n:p:i:l:sr:m:S:T:C:vh", longopts, NULL)) != -1) {
		switch (opt) {
		case 't': o->transport = tool_parse_transport(optarg); break;
		case 'n': o->n = tool_parse_count("topic count", optarg, 1, 10000000); break;
		case 'p': o->prefix = optarg; break;
		case 'i': o->idle_s = tool_parse_seconds("idle", optarg, 0, 3600); break;
		case 'l': o->linger_s = tool_parse_seconds("linger", optarg, 0, 86400); break;
		case 's': o->send = true; break;
		case 'r': o->rounds = tool_parse_count("rounds", optarg, 1, 1000000); break;
		case 'm': o->want_msgs = tool_parse_count("messages", optarg, 1, 1000000000); break;
		case 'S': o->session = optarg;
			  if (!*optarg || strlen(optarg) > 56 || strspn(optarg, "abcdefghijklmnopqrstuvwxyz"
				"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != strlen(optarg))
				  tool_usage_exit("bad --session '%s': 1..56 characters of A-Z a-z 0-9 _ . -",
						  optarg);
			  break;
		case 'T': o->timeout_s = tool_parse_seconds("timeout", optarg, 0.001, 86400);
			  timeout_set = true; break;
		case 'C': tool_config_defer(cfg, &ncfg, optarg); break;
		case OPT_JSON: o->json = true; break;
		case OPT_NO_POLL: o->no_poll = true; break;
		case 'v': o->verbose++; break;
		case 'h': tool_help_exit();
		default: tool_getopt_error(opt, argv);
		}
	}
	if (optind >= argc)
		tool_usage_exit("missing pub or sub");
	const char *mode = argv[optind++];
	if (!strcmp(mode, "sub")) {
		o->sub = true;
		if (optind >= argc)
			tool_usage_exit("sub: missing PATTERN");
		o->pattern = argv[optind++];
		if (!*o->pattern || strlen(o->pattern) > FLIT_TOPIC_MAX)
			tool_usage_exit("bad PATTERN: 1..%d bytes", FLIT_TOPIC_MAX);
		if (o->send || o->session || o->rounds || o->no_poll)
			tool_usage_exit("--send, --rounds, --session and --no-poll are for pub");
	} else if (o->want_msgs) {
		tool_usage_exit("--messages is for sub");
	} else if (strcmp(mode, "pub")) {
		tool_usage_exit("unknown mode '%s' (pub or sub)", mode);
	}
	if (optind < argc)
		tool_usage_exit("unexpected argument '%s'", argv[optind]);
	if (!o->sub && (!*o->prefix || strpbrk(o->prefix, "*?[") ||
			strlen(o->prefix) + 8 > FLIT_TOPIC_MAX))
		tool_usage_exit("bad prefix '%s': 1..%d bytes, no pattern characters",
				o->prefix, FLIT_TOPIC_MAX - 8);
	if (!timeout_set)
		o->timeout_s = o->sub ? 20 : 60;
	tool_config_init(&o->config);
	tool_config_add(&o->config, "context.transports = %s", o->transport);
	for (int i = 0; i < ncfg; i++)
		tool_config_add_user(&o->config, cfg[i], o->sub ? "receiver" : "source");
	char ifn[64];
	const char *v = tool_config_get(&o->config, "context.udp.interface", ifn, sizeof(ifn));
	if (v)
		snprintf(o->ifname, sizeof(o->ifname), "%s", v);
}

int main(int argc, char **argv)
{
	struct options o;
	struct sigaction sa = { .sa_handler = on_signal };
	char err[768];

	tool_init("flit-topics", usage);
	parse(argc, argv, &o);
	tool_set_verbose(o.verbose);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* the soft fd limit up to the hard one: measure what the transport
	 * costs, not the shell's default of 1024 */
	struct rlimit nof;
	if (getrlimit(RLIMIT_NOFILE, &nof) == 0 && nof.rlim_cur < nof.rlim_max) {
		nof.rlim_cur = nof.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nof);
	}
	tool_net_check(o.transport, &o.config, NULL);
	flit_ctx *ctx = tool_ctx_new(&o.config, err, sizeof(err));
	if (!ctx)
		tool_fail("creating the context: %s", err);
	int rc = o.sub ? run_sub(&o, ctx) : run_pub(&o, ctx);
	flit_ctx_close(ctx);
	return rc;
}
