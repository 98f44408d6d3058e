// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit-stat: the live counters of running flit processes, read from their
 * contexts' counters files (userspace/stats.h, docs/STATS.md), and the
 * counters of flit's XDP program, read from its pinned per-CPU map
 * (transports/xdp/xdp_prog.h, read-only).  Nothing here writes to a
 * process; --gc removes files whose writer is gone.  --prometheus and
 * --serve give the same counters in Prometheus' format (prom.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "prom.h"
#include "stats.h"
#include "tool.h"
#include "xdp/xdp_prog.h"

#define DEFAULT_DIR "/dev/shm/flit-stats"
#define MAX_FILES 4096
#define MAX_XDP 16
#define STR_(x) #x
#define STR(x) STR_(x)

static const char usage[] =
"Usage: flit-stat [options] [PID | --all]\n"
"       flit-stat --xdp IFACE [--netns NS] [--json] [--watch[=S]]\n"
"       flit-stat --prometheus [PID | --all] [--max-topics N] [--xdp IFACE]\n"
"       flit-stat --serve ADDR:PORT [PID | --all] [--max-topics N] [--xdp IFACE]\n"
"       flit-stat --gc\n"
"Live counters of flit processes: every context writes its counters to a\n"
"file in context.stats_dir (one row for the context's totals, one per\n"
"transport, publisher and subscriber); and the counters of flit's XDP\n"
"program on an interface.\n"
"\n"
"  (no PID)             list the processes that have counters files\n"
"  PID                  the counters of each context of process PID\n"
"  -a, --all            the counters of every live process\n"
"  -t, --topic GLOB     only publishers and subscribers whose topic (or\n"
"                       pattern) matches GLOB (fnmatch(3))\n"
"  -r, --rows N         at most N publisher and N subscriber rows per\n"
"                       context, the busiest (most messages, or the highest\n"
"                       rate with --watch); the others summed in one line\n"
"                       per kind (default 20; 0: every row; not --json)\n"
"  -j, --json           one JSON object per context (and per interface) and\n"
"                       sample, on one line\n"
"  -w, --watch[=S]      every S seconds (default 1; also '--watch S' for S up\n"
"                       to 300), totals with per-second rates beside them,\n"
"                       until interrupted\n"
"  -x, --xdp IFACE      the XDP program's counters on IFACE, by verdict and\n"
"                       reason (pinned under " FLIT_XDP_PIN_ROOT "/IFACE/;\n"
"                       needs CAP_BPF and CAP_NET_ADMIN, or CAP_SYS_ADMIN);\n"
"                       repeat it or give a comma list for several\n"
"  -N, --netns NS       IFACE is in network namespace NS (needs CAP_SYS_ADMIN)\n"
"  -P, --prometheus     the counters of every live process (or of PID) in\n"
"                       the Prometheus text format 0.0.4, for node_exporter's\n"
"                       textfile collector\n"
"      --serve ADDR:PORT  serve them over HTTP at /metrics until SIGINT or\n"
"                       SIGTERM: 127.0.0.1:9470, [::1]:9470 (port 0: any)\n"
"      --max-topics N   with those two: at most N publisher and subscriber\n"
"                       rows per process get their own series (the oldest);\n"
"                       the others are summed in topic=\"_other\" (default\n"
"                       " STR(PROM_MAX_TOPICS_DEFAULT) ")\n"
"  -d, --dir DIR        where the counters files are (default:\n"
"                       $FLIT_CONTEXT_STATS_DIR, else " DEFAULT_DIR ")\n"
"      --gc             remove the counters files whose process is gone\n"
"  -v, --verbose        library messages to stderr (-vv: debug)\n"
"  -h, --help           this text\n"
"\n"
"Rates are computed from the writer's own refresh times (each row carries\n"
"the CLOCK_MONOTONIC time it was written: context.stats_interval_ms).\n"
"\n"
"Exit status: 0 ok, 1 runtime failure (no counters file for PID, XDP\n"
"counters unreadable, cannot listen), 2 usage.\n";

struct options {
	const char *dir;
	int pid;              /* 0: none */
	bool all, json, gc;
	double watch_s;       /* 0: once */
	const char *topic;
	const char *xdp[MAX_XDP];
	int nxdp;
	const char *netns;
	bool prom;            /* --prometheus, or --serve */
	const char *serve;
	struct prom_addr addr;
	long max_topics;      /* -1: not given */
	long rows;            /* text: publisher and subscriber rows shown per
			       * kind and context (0: all; -1: not given) */
	int verbose;
};

static struct options o;
/* --rows when not given */
#define ROWS_DEFAULT 20
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- arguments ----------------------------------------------------------- */

/* "123": a pid (positive, fits an int); false otherwise */
static bool parse_pid(const char *s, int *pid)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v <= 0 || v > INT32_MAX)
		return false;
	*pid = (int)v;
	return true;
}

/* "--watch S" takes S when it looks like an interval: a number up to 300,
 * or one with a fraction (a PID below 300 is a kernel thread's). */
static bool looks_like_interval(const char *s)
{
	char *end;
	double v;

	if (!s || *s < '0' || *s > '9')
		return false;
	v = strtod(s, &end);
	return !*end && (strchr(s, '.') || v <= 300);
}

/* --xdp NAME[,NAME...], added to o.xdp (a name given twice counts once) */
static void parse_xdp(char *arg)
{
	char *name;

	while ((name = strsep(&arg, ","))) {
		bool dup = false;

		if (!*name || strlen(name) >= 16 || strpbrk(name, "/@: "))
			tool_usage_exit("--xdp: bad interface name '%s'", name);
		for (int i = 0; i < o.nxdp; i++)
			dup |= !strcmp(o.xdp[i], name);
		if (dup)
			continue;
		if (o.nxdp == MAX_XDP)
			tool_usage_exit("--xdp: at most %d interfaces", MAX_XDP);
		o.xdp[o.nxdp++] = name;
	}
}

static void parse(int argc, char **argv)
{
	enum { OPT_GC = 256, OPT_SERVE, OPT_MAX_TOPICS };
	static const struct option longopts[] = {
		{ "all",     no_argument,       NULL, 'a' },
		{ "topic",   required_argument, NULL, 't' },
		{ "json",    no_argument,       NULL, 'j' },
		{ "watch",   optional_argument, NULL, 'w' },
		{ "xdp",     required_argument, NULL, 'x' },
		{ "netns",   required_argument, NULL, 'N' },
		{ "dir",     required_argument, NULL, 'd' },
		{ "gc",      no_argument,       NULL, OPT_GC },
		{ "prometheus", no_argument,    NULL, 'P' },
		{ "serve",   required_argument, NULL, OPT_SERVE },
		{ "max-topics", required_argument, NULL, OPT_MAX_TOPICS },
		{ "rows",    required_argument, NULL, 'r' },
		{ "verbose", no_argument,       NULL, 'v' },
		{ "help",    no_argument,       NULL, 'h' },
		{ 0 }
	};
	int opt;

	o.max_topics = -1;
	o.rows = -1;
	o.dir = getenv("FLIT_CONTEXT_STATS_DIR");
	if (!o.dir || !*o.dir)
		o.dir = DEFAULT_DIR;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":at:r:jw::x:N:d:Pvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'a': o.all = true; break;
		case 't':
			if (!*optarg)
				tool_usage_exit("--topic: empty pattern");
			o.topic = optarg;
			break;
		case 'j': o.json = true; break;
		case 'r': o.rows = (long)tool_parse_count("--rows", optarg, 0, 10000000); break;
		case 'w':
			if (!optarg && optind < argc && looks_like_interval(argv[optind]))
				optarg = argv[optind++];
			o.watch_s = optarg ? tool_parse_seconds("--watch interval", optarg, 0.05, 3600) : 1;
			break;
		case 'x': parse_xdp(optarg); break;
		case 'N': o.netns = tool_parse_netns("--netns", optarg); break;
		case 'd':
			if (optarg[0] != '/')
				tool_usage_exit("--dir: '%s' is not an absolute path", optarg);
			o.dir = optarg;
			break;
		case OPT_GC: o.gc = true; break;
		case 'P': o.prom = true; break;
		case OPT_SERVE:
			if (prom_parse_addr(optarg, &o.addr) < 0)
				tool_usage_exit("--serve: '%s' is not ADDR:PORT (numeric: "
						"127.0.0.1:9470, [::1]:9470)", optarg);
			o.serve = optarg;
			o.prom = true;
			break;
		case OPT_MAX_TOPICS:
			o.max_topics = (long)tool_parse_count("--max-topics", optarg, 0, 10000000);
			break;
		case 'v': o.verbose++; break;
		case 'h': tool_help_exit();
		default: tool_getopt_error(opt, argv);
		}
	}
	if (optind < argc) {
		if (!parse_pid(argv[optind], &o.pid))
			tool_usage_exit("'%s' is not a PID", argv[optind]);
		optind++;
	}
	if (optind < argc)
		tool_usage_exit("unexpected argument '%s'", argv[optind]);
	if (o.pid && o.all)
		tool_usage_exit("give a PID or --all, not both");
	if (o.netns && !o.nxdp)
		tool_usage_exit("--netns names the namespace of --xdp IFACE");
	if (o.gc && (o.pid || o.all || o.nxdp || o.watch_s || o.topic || o.prom))
		tool_usage_exit("--gc takes no other option but --dir");
	if (o.prom && (o.json || o.watch_s))
		tool_usage_exit("--prometheus and --serve take neither --json nor --watch");
	if (o.max_topics >= 0 && !o.prom)
		tool_usage_exit("--max-topics goes with --prometheus or --serve");
	if (o.max_topics < 0)
		o.max_topics = PROM_MAX_TOPICS_DEFAULT;
	if (o.rows >= 0 && (o.json || o.prom || o.gc || (!o.pid && !o.all)))
		tool_usage_exit("--rows goes with the text table of a PID or --all");
	if (o.rows < 0)
		o.rows = ROWS_DEFAULT;
	if (o.prom && !o.pid)
		o.all = true;
}

/* ---- counters files -------------------------------------------------------- */

struct file {
	char path[FLIT_PATH_MAX + 300];
	int pid;
	unsigned idx;
};

static int file_cmp(const void *a, const void *b)
{
	const struct file *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The counters files in o.dir ("<pid>-<n>"), of `pid` only if not 0, in
 * pid and context order.  Returns how many (<= max), or -errno (the
 * directory is unreadable; none is 0 files). */
static int scan_dir(int pid, struct file *out, int max)
{
	DIR *d = opendir(o.dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d)) && n < max) {
		unsigned idx;
		int p, len;

		if (sscanf(e->d_name, "%d-%u%n", &p, &idx, &len) != 2 || e->d_name[len] ||
		    p <= 0 || (pid && p != pid))
			continue;
		snprintf(out[n].path, sizeof(out[n].path), "%s/%s", o.dir, e->d_name);
		out[n].pid = p;
		out[n].idx = idx;
		n++;
	}
	closedir(d);
	qsort(out, (size_t)n, sizeof(*out), file_cmp);
	return n;
}

static int scan(int pid, struct file *out, int max)
{
	int n = scan_dir(pid, out, max);

	if (n < 0)
		tool_fail("cannot read %s: %s", o.dir, strerror(-n));
	return n;
}

/* Counters shown for each kind of row (others too when not zero). */
static const unsigned show_pub[] = {
	FLIT_STATS_MSGS_SENT, FLIT_STATS_BYTES_SENT, FLIT_STATS_FRAMES_SENT,
	FLIT_STATS_BACK_PRESSURED, FLIT_STATS_NAKS_RECEIVED, FLIT_STATS_RETRANSMISSIONS,
};
static const unsigned show_sub[] = {
	FLIT_STATS_MSGS_RECEIVED, FLIT_STATS_BYTES_RECEIVED, FLIT_STATS_MSGS_LOST,
	FLIT_STATS_LOSS_EVENTS, FLIT_STATS_DUPLICATES, FLIT_STATS_SOURCES,
};
static const unsigned show_ctx[] = {
	FLIT_STATS_MSGS_SENT, FLIT_STATS_BYTES_SENT, FLIT_STATS_MSGS_RECEIVED,
	FLIT_STATS_BYTES_RECEIVED, FLIT_STATS_MSGS_LOST, FLIT_STATS_NAKS_SENT,
	FLIT_STATS_NAKS_RECEIVED, FLIT_STATS_RETRANSMISSIONS, FLIT_STATS_BACK_PRESSURED,
};

static bool shown(const struct flit_stats_row *r, unsigned c)
{
	const unsigned *l;
	size_t n;

	switch (r->kind) {
	case FLIT_STATS_ROW_SUBSCRIBER: l = show_sub; n = sizeof(show_sub) / sizeof(*l); break;
	case FLIT_STATS_ROW_CONTEXT: l = show_ctx; n = sizeof(show_ctx) / sizeof(*l); break;
	default: l = show_pub; n = sizeof(show_pub) / sizeof(*l); break;
	}
	for (size_t i = 0; i < n; i++)
		if (l[i] == c)
			return true;
	return r->c[c] != 0;
}

/* Order in which a row's counters are printed: the kind's list, then the
 * others that are not zero. */
static size_t order(const struct flit_stats_row *r, unsigned *out)
{
	const unsigned *l;
	size_t n, k = 0;

	switch (r->kind) {
	case FLIT_STATS_ROW_SUBSCRIBER: l = show_sub; n = sizeof(show_sub) / sizeof(*l); break;
	case FLIT_STATS_ROW_CONTEXT: l = show_ctx; n = sizeof(show_ctx) / sizeof(*l); break;
	default: l = show_pub; n = sizeof(show_pub) / sizeof(*l); break;
	}
	for (size_t i = 0; i < n; i++)
		out[k++] = l[i];
	for (unsigned c = 0; c < FLIT_STATS_COUNTERS_USED; c++) {
		bool listed = false;
		for (size_t i = 0; i < n; i++)
			listed |= l[i] == c;
		if (!listed && shown(r, c))
			out[k++] = c;
	}
	return k;
}

static bool same_object(const struct flit_stats_row *p, const struct flit_stats_row *r)
{
	return p->kind == r->kind && p->created_ns == r->created_ns &&
	       !strcmp(p->transport, r->transport) &&
	       (r->kind == FLIT_STATS_ROW_TRANSPORT || !strcmp(p->name, r->name));
}

/* The same row in the previous sample of the same file: first where row i
 * of this sample was (rows keep their place while their object lives, so
 * thousands of rows cost one look each), else anywhere. */
static const struct flit_stats_row *prev_row(const struct flit_stats_snap *prev,
					     const struct flit_stats_row *r, unsigned i)
{
	if (!prev)
		return NULL;
	if (i < prev->nrows && same_object(&prev->rows[i], r))
		return &prev->rows[i];
	for (unsigned k = 0; k < prev->nrows; k++)
		if (same_object(&prev->rows[k], r))
			return &prev->rows[k];
	return NULL;
}

/* Per second, over the writer's own refresh times; -1: no earlier sample. */
static double rate(const struct flit_stats_row *r, const struct flit_stats_row *p,
		   unsigned c)
{
	if (!p)
		return -1;
	if (r->updated_ns <= p->updated_ns || r->c[c] < p->c[c] || c == FLIT_STATS_SOURCES)
		return 0;
	return (double)(r->c[c] - p->c[c]) * 1e9 / (double)(r->updated_ns - p->updated_ns);
}

static bool row_wanted(const struct flit_stats_row *r)
{
	if (!o.topic || (r->kind != FLIT_STATS_ROW_PUBLISHER && r->kind != FLIT_STATS_ROW_SUBSCRIBER))
		return true;
	return fnmatch(o.topic, r->name, 0) == 0;
}

static void fmt_count(char *buf, size_t len, double v)
{
	if (v >= 1e10)
		snprintf(buf, len, "%.1fG", v / 1e9);
	else if (v >= 1e7)
		snprintf(buf, len, "%.1fM", v / 1e6);
	else
		snprintf(buf, len, "%.0f", v);
}

static double age_s(uint64_t then_ns)
{
	double now = mono_s() * 1e9;

	return now > (double)then_ns ? (now - (double)then_ns) / 1e9 : 0;
}

/* The label column of a row of the text table. */
static void row_label(const struct flit_stats_row *r, char *buf, size_t len)
{
	switch (r->kind) {
	case FLIT_STATS_ROW_CONTEXT:
		snprintf(buf, len, "  %-10s %-4s %-20s", "total", "", "");
		break;
	case FLIT_STATS_ROW_TRANSPORT:
		snprintf(buf, len, "  %-10s %-4s %-20s", "transport", r->transport, "");
		break;
	case FLIT_STATS_ROW_PUBLISHER:
		snprintf(buf, len, "  %-10s %-4s %-20s", "pub", r->transport, r->name);
		break;
	default:
		snprintf(buf, len, "  %-10s %-4s %-20s", "sub",
			 (r->flags & FLIT_STATS_RF_PATTERN) ? "pat" : "", r->name);
		break;
	}
}

/* One row of the text table: its label and counters (rates from p). */
static void print_row(const struct flit_stats_row *r, const struct flit_stats_row *p,
		      const char *label)
{
	unsigned idx[FLIT_STATS_COUNTERS_USED + 8];

	printf("%s", label);
	size_t n = order(r, idx);
	for (size_t k = 0; k < n; k++) {
		char v[32], rv[32];
		double rt = rate(r, p, idx[k]);

		fmt_count(v, sizeof(v), (double)r->c[idx[k]]);
		printf(" %s=%s", flit_stats_counter_name(idx[k]), v);
		if (rt > 0 || (rt == 0 && p && (idx[k] == FLIT_STATS_MSGS_SENT ||
						 idx[k] == FLIT_STATS_MSGS_RECEIVED))) {
			fmt_count(rv, sizeof(rv), rt);
			printf(" (%s/s)", rv);
		}
	}
	if (r->kind == FLIT_STATS_ROW_TRANSPORT && r->name[0])
		printf("  [%s]", r->name);
	printf("\n");
}

/* Publisher and subscriber rows, busiest first (--rows). */
struct ranked {
	unsigned i;     /* index in the sample */
	double key;     /* messages, or their rate */
	const struct flit_stats_row *p;   /* the row in the previous sample */
};

static int ranked_cmp(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? 1 : -1;
	return x->i < y->i ? -1 : x->i > y->i;   /* then in file order */
}

static void print_text(const struct flit_stats_snap *s, const struct flit_stats_snap *prev)
{
	const struct flit_stats_hdr *h = &s->hdr;
	struct ranked *rk = NULL;
	bool cut = false;

	printf("pid %u (%s) context %u: domain %s, transports %s, up %.1f s, refreshed %.2f s ago\n",
	       h->pid, h->comm, h->ctx_index, h->domain, h->transports,
	       age_s(h->created_mono_ns), age_s(h->updated_ns));
	if (!prev)
		printf("  %s: %s\n", s->path, h->cmdline);
	if (h->rows_dropped)
		printf("  warning: %u objects have no row: the file is full (raise context.stats_rows)\n",
		       h->rows_dropped);
	if (s->torn)
		printf("  warning: %u rows were being written on every read (writer died mid-write?)\n",
		       s->torn);
	if (o.rows && s->nrows > (unsigned)o.rows && !(rk = calloc(s->nrows, sizeof(*rk))))
		tool_fail("out of memory for %u rows", s->nrows);
	for (uint32_t kind = FLIT_STATS_ROW_CONTEXT; kind <= FLIT_STATS_ROW_SUBSCRIBER; kind++) {
		bool pubsub = kind == FLIT_STATS_ROW_PUBLISHER || kind == FLIT_STATS_ROW_SUBSCRIBER;
		unsigned key = kind == FLIT_STATS_ROW_PUBLISHER ? FLIT_STATS_MSGS_SENT
								: FLIT_STATS_MSGS_RECEIVED;
		unsigned nk = 0;

		for (unsigned i = 0; i < s->nrows; i++) {
			const struct flit_stats_row *r = &s->rows[i], *p;
			char label[320];

			if (r->kind != kind || !row_wanted(r))
				continue;
			p = prev_row(prev, r, i);
			if (pubsub && rk) {
				/* ranked below: the busiest o.rows of them */
				double rt = rate(r, p, key);
				rk[nk++] = (struct ranked){ i, rt >= 0 ? rt : (double)r->c[key], p };
				continue;
			}
			row_label(r, label, sizeof(label));
			print_row(r, p, label);
		}
		if (!pubsub || !rk || !nk)
			continue;
		qsort(rk, nk, sizeof(*rk), ranked_cmp);
		unsigned shown_n = nk < (unsigned)o.rows ? nk : (unsigned)o.rows;
		struct flit_stats_row rest = { .kind = kind }, prest = { .kind = kind };
		bool have_prev = prev != NULL;
		for (unsigned k = 0; k < nk; k++) {
			const struct flit_stats_row *r = &s->rows[rk[k].i];
			const struct flit_stats_row *p = rk[k].p;
			char label[320];

			if (k < shown_n) {
				row_label(r, label, sizeof(label));
				print_row(r, p, label);
				continue;
			}
			/* the rest, summed; their rate over the span of the
			 * newest rows (each row's own times would not add up) */
			for (unsigned c = 0; c < FLIT_STATS_COUNTERS_USED; c++) {
				rest.c[c] += r->c[c];
				prest.c[c] += p ? p->c[c] : r->c[c];
			}
			if (r->updated_ns > rest.updated_ns)
				rest.updated_ns = r->updated_ns;
			if (p && p->updated_ns > prest.updated_ns)
				prest.updated_ns = p->updated_ns;
			have_prev &= p != NULL;
		}
		if (nk > shown_n) {
			char label[320], more[64];
			cut = true;
			snprintf(more, sizeof(more), "... %u more", nk - shown_n);
			snprintf(label, sizeof(label), "  %-10s %-4s %-20s",
				 kind == FLIT_STATS_ROW_PUBLISHER ? "pubs" : "subs", "", more);
			print_row(&rest, have_prev ? &prest : NULL, label);
		}
	}
	if (cut)
		printf("  (the busiest %ld publisher and subscriber rows each; --topic GLOB to "
		       "choose, --rows 0 for all)\n", o.rows);
	free(rk);
}

static void json_counters(const struct flit_stats_row *r, const struct flit_stats_row *p)
{
	unsigned idx[FLIT_STATS_COUNTERS_USED + 8];
	size_t n = order(r, idx);

	printf("\"counters\":{");
	for (size_t k = 0; k < n; k++)
		printf("%s\"%s\":%llu", k ? "," : "", flit_stats_counter_name(idx[k]),
		       (unsigned long long)r->c[idx[k]]);
	printf("}");
	if (p) {
		printf(",\"per_sec\":{");
		for (size_t k = 0; k < n; k++)
			printf("%s\"%s\":%.1f", k ? "," : "", flit_stats_counter_name(idx[k]),
			       rate(r, p, idx[k]));
		printf("}");
	}
}

static void print_json(const struct flit_stats_snap *s, const struct flit_stats_snap *prev)
{
	const struct flit_stats_hdr *h = &s->hdr;
	static const char *const arrays[] = {
		[FLIT_STATS_ROW_TRANSPORT] = "transports",
		[FLIT_STATS_ROW_PUBLISHER] = "publishers",
		[FLIT_STATS_ROW_SUBSCRIBER] = "subscribers",
	};

	printf("{\"tool\":\"flit-stat\",\"pid\":%u,\"context\":%u,\"comm\":", h->pid, h->ctx_index);
	tool_json_str(stdout, h->comm);
	printf(",\"cmdline\":");
	tool_json_str(stdout, h->cmdline);
	printf(",\"domain\":");
	tool_json_str(stdout, h->domain);
	printf(",\"transports_enabled\":");
	tool_json_str(stdout, h->transports);
	printf(",\"file\":");
	tool_json_str(stdout, s->path);
	printf(",\"time\":%ld,\"up_s\":%.3f,\"refreshed_s_ago\":%.3f,\"interval_ms\":%u,"
	       "\"clock\":\"%s\",\"rows_dropped\":%u,\"torn\":%u",
	       (long)time(NULL), age_s(h->created_mono_ns), age_s(h->updated_ns),
	       h->interval_ms, h->clock, h->rows_dropped, s->torn);
	for (unsigned i = 0; i < s->nrows; i++)
		if (s->rows[i].kind == FLIT_STATS_ROW_CONTEXT) {
			printf(",\"total\":{");
			json_counters(&s->rows[i], prev_row(prev, &s->rows[i], i));
			printf("}");
		}
	for (uint32_t kind = FLIT_STATS_ROW_TRANSPORT; kind <= FLIT_STATS_ROW_SUBSCRIBER; kind++) {
		bool first = true;

		printf(",\"%s\":[", arrays[kind]);
		for (unsigned i = 0; i < s->nrows; i++) {
			const struct flit_stats_row *r = &s->rows[i];

			if (r->kind != kind || !row_wanted(r))
				continue;
			printf("%s{", first ? "" : ",");
			first = false;
			if (kind == FLIT_STATS_ROW_TRANSPORT) {
				printf("\"transport\":");
				tool_json_str(stdout, r->transport);
				printf(",\"description\":");
				tool_json_str(stdout, r->name);
			} else {
				printf("\"topic\":");
				tool_json_str(stdout, r->name);
				if (kind == FLIT_STATS_ROW_PUBLISHER) {
					printf(",\"transport\":");
					tool_json_str(stdout, r->transport);
				} else {
					printf(",\"pattern\":%s",
					       (r->flags & FLIT_STATS_RF_PATTERN) ? "true" : "false");
				}
			}
			printf(",\"age_s\":%.3f,", age_s(r->updated_ns));
			json_counters(r, prev_row(prev, r, i));
			printf("}");
		}
		printf("]");
	}
	printf("}\n");
}

/* Read a file; NULL (and a message unless quiet) if it is unreadable or
 * stale.  *stale tells which. */
static struct flit_stats_snap *read_live(const struct file *f, bool quiet, bool *stale)
{
	struct flit_stats_snap *s = calloc(1, sizeof(*s));
	char why[160];
	int rc;

	if (!s)
		tool_fail("out of memory");
	*stale = false;
	if ((rc = flit_stats_read(f->path, s)) < 0) {
		if (!quiet && rc != -ENOENT)
			tool_warn("%s", flit_errmsg());
		free(s);
		return NULL;
	}
	rc = flit_stats_liveness(f->path, &s->hdr, why, sizeof(why));
	if (rc != FLIT_STATS_LIVE) {
		if (!quiet && rc > 0)
			tool_warn("%s is stale: %s (flit-stat --gc removes it)", f->path, why);
		*stale = rc > 0;
		flit_stats_snap_free(s);
		free(s);
		return NULL;
	}
	return s;
}

/* ---- the listing ------------------------------------------------------------- */

static int list(void)
{
	static struct file files[MAX_FILES];
	int n = scan(0, files, MAX_FILES), shown_n = 0;

	if (!o.json)
		printf("%-8s %-4s %-16s %-7s %10s %5s  %s\n", "PID", "CTX", "COMMAND", "STATE",
		       "UP", "ROWS", "FILE");
	for (int i = 0; i < n; i++) {
		struct flit_stats_snap s;
		char why[160] = "", up[32];
		int live;

		int rc = flit_stats_read(files[i].path, &s);
		if (rc < 0) {
			if (rc != -ENOENT)
				tool_warn("%s", flit_errmsg());
			continue;
		}
		live = flit_stats_liveness(files[i].path, &s.hdr, why, sizeof(why));
		snprintf(up, sizeof(up), "%.1fs", age_s(s.hdr.created_mono_ns));
		if (o.json) {
			printf("{\"tool\":\"flit-stat\",\"pid\":%u,\"context\":%u,\"comm\":",
			       s.hdr.pid, s.hdr.ctx_index);
			tool_json_str(stdout, s.hdr.comm);
			printf(",\"state\":\"%s\"", live == FLIT_STATS_LIVE ? "live" : "stale");
			if (live != FLIT_STATS_LIVE) {
				printf(",\"why\":");
				tool_json_str(stdout, why);
			}
			printf(",\"up_s\":%.3f,\"rows\":%u,\"file\":", age_s(s.hdr.created_mono_ns),
			       s.nrows);
			tool_json_str(stdout, files[i].path);
			printf(",\"cmdline\":");
			tool_json_str(stdout, s.hdr.cmdline);
			printf("}\n");
		} else {
			printf("%-8u %-4u %-16s %-7s %10s %5u  %s%s%s%s\n", s.hdr.pid, s.hdr.ctx_index,
			       s.hdr.comm, live == FLIT_STATS_LIVE ? "live" : "stale",
			       live == FLIT_STATS_LIVE ? up : "-", s.nrows, files[i].path,
			       live == FLIT_STATS_LIVE ? "" : " (", why, live == FLIT_STATS_LIVE ? "" : ")");
		}
		flit_stats_snap_free(&s);
		shown_n++;
	}
	if (!shown_n && !o.json)
		printf("# no counters files in %s\n", o.dir);
	return 0;
}

/* ---- counters of processes ----------------------------------------------------- */

struct slot {
	char path[FLIT_PATH_MAX + 300];
	uint64_t created;
	struct flit_stats_snap *snap;
	bool seen;
};

static struct slot slots[MAX_FILES];
static int nslots;

static struct slot *slot_of(const char *path, uint64_t created)
{
	for (int i = 0; i < nslots; i++)
		if (slots[i].created == created && !strcmp(slots[i].path, path))
			return &slots[i];
	return NULL;
}

static void slot_drop(struct slot *sl)
{
	flit_stats_snap_free(sl->snap);
	free(sl->snap);
	*sl = slots[--nslots];
}

/* o.pid has no live counters file: say why, exit 1. */
static noreturn void pid_not_live(int stale)
{
	if (stale)
		tool_fail("pid %d has no live counters file in %s, only stale ones", o.pid, o.dir);
	if (kill(o.pid, 0) < 0 && errno == ESRCH)
		tool_fail("no process %d (and no counters file for it in %s)", o.pid, o.dir);
	tool_fail("no counters file for pid %d in %s (not a flit process, "
		  "context.stats = off there, or another context.stats_dir: --dir)", o.pid, o.dir);
}

/* One sample of the files of o.pid (or of all): printed, kept for rates.
 * Returns the number of live contexts shown. */
static int sample(bool first)
{
	static struct file files[MAX_FILES];
	int n = scan(o.pid, files, MAX_FILES), live = 0, stale = 0;

	for (int i = 0; i < nslots; i++)
		slots[i].seen = false;
	for (int i = 0; i < n; i++) {
		bool is_stale;
		struct flit_stats_snap *s = read_live(&files[i], !first || o.all, &is_stale);
		struct slot *sl;

		if (!s) {
			stale += is_stale;
			continue;
		}
		live++;
		sl = slot_of(files[i].path, s->hdr.created_mono_ns);
		if (o.json)
			print_json(s, sl ? sl->snap : NULL);
		else
			print_text(s, sl ? sl->snap : NULL);
		if (sl) {
			flit_stats_snap_free(sl->snap);
			free(sl->snap);
		} else if (nslots < MAX_FILES) {
			sl = &slots[nslots++];
			memcpy(sl->path, files[i].path, sizeof(sl->path));
			sl->created = s->hdr.created_mono_ns;
		} else {
			flit_stats_snap_free(s);
			free(s);
			continue;
		}
		sl->snap = s;
		sl->seen = true;
	}
	for (int i = 0; i < nslots; ) {
		if (slots[i].seen) {
			i++;
			continue;
		}
		if (!o.json)
			printf("pid %u context %u: closed\n", slots[i].snap->hdr.pid,
			       slots[i].snap->hdr.ctx_index);
		slot_drop(&slots[i]);
	}
	if (first && o.pid && !live)
		pid_not_live(stale);
	if (first && o.all && !live && !o.json)
		printf("# no live flit process has a counters file in %s\n", o.dir);
	fflush(stdout);
	return live;
}

/* ---- the XDP program's counters --------------------------------------------------- */

static struct flit_xdp_maps xmaps[MAX_XDP];
static uint64_t xprev[MAX_XDP][FLIT_XDP_COUNTERS];
static double xprev_t[MAX_XDP];

/* Open the maps of interface i into *m, or fail (exit 1) saying why. */
static void xdp_open(int i, struct flit_xdp_maps *m)
{
	const char *ifname = o.xdp[i];
	int rc = flit_xdp_maps_open(ifname, m);

	if (rc == -EPERM || rc == -EACCES)
		tool_fail("reading the XDP counters of %s needs CAP_BPF and CAP_NET_ADMIN "
			  "(or CAP_SYS_ADMIN): %s", ifname, flit_errmsg());
	if (rc == -ENOENT)
		tool_fail("flit's XDP program is not attached to %s%s%s (%s)", ifname,
			  o.netns ? " in network namespace " : "", o.netns ? o.netns : "",
			  flit_errmsg());
	if (rc < 0)
		tool_fail("XDP counters of %s: %s", ifname, flit_errmsg());
}

/* Into --netns (once), then the maps of every --xdp interface. */
static void xdp_open_all(void)
{
	if (o.netns)
		tool_netns_enter_name(o.netns);
	for (int i = 0; i < o.nxdp; i++)
		xdp_open(i, &xmaps[i]);
}

static void xdp_close_all(void)
{
	for (int i = 0; i < o.nxdp; i++)
		flit_xdp_maps_close(&xmaps[i]);
}

/* [from, to) of the counters: verdicts, reasons of XDP_PASS, the others */
static const struct {
	const char *label, *json;
	unsigned from, to;
} xgroups[] = {
	{ "verdicts", "verdicts", FLIT_XDP_PASSED, FLIT_XDP_PASS_SHORT },
	{ "passed because", "pass_reasons", FLIT_XDP_PASS_SHORT, FLIT_XDP_VLAN },
	{ "also", "other", FLIT_XDP_VLAN, FLIT_XDP_COUNTERS },
};

static void xdp_sample(int x, bool first)
{
	const char *ifname = o.xdp[x];
	const struct flit_xdp_maps *m = &xmaps[x];
	uint64_t c[FLIT_XDP_COUNTERS], *prev = xprev[x];
	double t = mono_s(), dt = t - xprev_t[x];
	int rc = flit_xdp_counters(m, c);

	if (rc < 0)
		tool_fail("XDP counters of %s: %s", ifname, flit_errmsg());
	if (o.json) {
		printf("{\"tool\":\"flit-stat\",\"xdp\":");
		tool_json_str(stdout, ifname);
		if (o.netns) {
			printf(",\"netns\":");
			tool_json_str(stdout, o.netns);
		}
		printf(",\"pin_dir\":");
		tool_json_str(stdout, m->pin_dir);
		printf(",\"time\":%ld,\"cpus\":%d", (long)time(NULL), libbpf_num_possible_cpus());
		for (size_t g = 0; g < sizeof(xgroups) / sizeof(*xgroups); g++) {
			printf(",\"%s\":{", xgroups[g].json);
			for (unsigned i = xgroups[g].from; i < xgroups[g].to; i++)
				printf("%s\"%s\":%llu", i > xgroups[g].from ? "," : "",
				       flit_xdp_counter_name(i), (unsigned long long)c[i]);
			printf("}");
		}
		if (!first) {
			printf(",\"interval_s\":%.3f,\"per_sec\":{", dt);
			for (unsigned i = 0; i < FLIT_XDP_COUNTERS; i++)
				printf("%s\"%s\":%.1f", i ? "," : "", flit_xdp_counter_name(i),
				       (double)(c[i] - prev[i]) / dt);
			printf("}");
		}
		printf("}\n");
	} else {
		printf("xdp %s%s%s (%s, sum over %d CPUs)\n", ifname, o.netns ? " in " : "",
		       o.netns ? o.netns : "", m->pin_dir, libbpf_num_possible_cpus());
		for (size_t g = 0; g < sizeof(xgroups) / sizeof(*xgroups); g++) {
			printf("  %-15s", xgroups[g].label);
			for (unsigned i = xgroups[g].from; i < xgroups[g].to; i++) {
				const char *name = flit_xdp_counter_name(i);
				char v[32], rv[32];

				if (g == 1 && !strncmp(name, "pass_", 5))
					name += 5;
				fmt_count(v, sizeof(v), (double)c[i]);
				printf(" %s=%s", name, v);
				if (!first && c[i] != prev[i]) {
					fmt_count(rv, sizeof(rv), (double)(c[i] - prev[i]) / dt);
					printf(" (%s/s)", rv);
				}
			}
			printf("\n");
		}
	}
	fflush(stdout);
	memcpy(prev, c, sizeof(c));
	xprev_t[x] = t;
}

/* ---- Prometheus ----------------------------------------------------------------- */

static bool serving;
static bool xdp_down[MAX_XDP];   /* last scrape could not read it (said once) */

/* The exposition of the live contexts of o.pid (or all) and of the --xdp
 * interfaces, into f.  One-shot: a PID without a live file and unreadable
 * XDP counters fail (exit 1); serving, nothing does: what cannot be read is
 * left out (flit_xdp_up 0), and said on stderr once. */
static int prom_body(void *arg, FILE *f)
{
	static struct file files[MAX_FILES];
	static struct flit_stats_snap *snaps[MAX_FILES];
	struct prom_xdp xs[MAX_XDP];
	struct prom_input in = { .snaps = snaps, .xdp = xs, .nxdp = (unsigned)o.nxdp,
				 .topic = o.topic, .max_topics = (unsigned)o.max_topics };
	int n = scan_dir(o.pid, files, MAX_FILES), rc;

	(void)arg;
	if (n < 0) {
		if (!serving)
			tool_fail("cannot read %s: %s", o.dir, strerror(-n));
		tool_warn("cannot read %s: %s", o.dir, strerror(-n));
		n = 0;
	}
	for (int i = 0; i < n; i++) {
		bool stale;
		struct flit_stats_snap *s = read_live(&files[i], true, &stale);

		if (s)
			snaps[in.nsnaps++] = s;
		in.stale += stale;
	}
	if (!serving && o.pid && !in.nsnaps)
		pid_not_live((int)in.stale);
	for (int x = 0; x < o.nxdp; x++) {
		struct flit_xdp_maps m;

		xs[x] = (struct prom_xdp){ .ifname = o.xdp[x], .netns = o.netns };
		if (!serving) {
			if ((rc = flit_xdp_counters(&xmaps[x], xs[x].c)) < 0)
				tool_fail("XDP counters of %s: %s", o.xdp[x], flit_errmsg());
			xs[x].up = true;
			continue;
		}
		/* opened anew each time: a program attached again has new maps */
		rc = flit_xdp_maps_open(o.xdp[x], &m);
		if (rc == 0) {
			rc = flit_xdp_counters(&m, xs[x].c);
			flit_xdp_maps_close(&m);
		}
		xs[x].up = rc == 0;
		if (rc < 0 && !xdp_down[x])
			tool_warn("XDP counters of %s: %s", o.xdp[x], flit_errmsg());
		else if (rc == 0 && xdp_down[x])
			tool_warn("XDP counters of %s readable again", o.xdp[x]);
		xdp_down[x] = rc < 0;
	}
	in.now_ns = (uint64_t)(mono_s() * 1e9);
	rc = prom_write(f, &in);
	for (unsigned i = 0; i < in.nsnaps; i++) {
		flit_stats_snap_free(snaps[i]);
		free(snaps[i]);
	}
	return rc;
}

static int prom_main(void)
{
	char err[256];
	int lfd = -1, rc;

	/* bound before entering --netns: the address is in flit-stat's own
	 * namespace, the interfaces in NS */
	if (o.serve && (lfd = prom_listen(&o.addr, err, sizeof(err))) < 0)
		tool_fail("%s", err);
	if (o.nxdp)
		xdp_open_all();
	if (!o.serve) {
		rc = prom_body(NULL, stdout);
		xdp_close_all();
		if (rc < 0)
			tool_fail("the exposition: %s", strerror(-rc));
		if (fflush(stdout) || ferror(stdout))
			tool_fail("writing the exposition: %s", strerror(errno));
		return 0;
	}
	xdp_close_all();    /* checked; each scrape opens them anew */
	serving = true;
	printf("# serving the counters of %s at http://%s/metrics\n",
	       o.pid ? "one process" : "every live flit process", o.addr.text);
	fflush(stdout);
	rc = prom_serve(lfd, prom_body, NULL, o.verbose);
	close(lfd);
	if (rc < 0)
		tool_fail("serving: %s", strerror(-rc));
	return 0;
}

/* ---- main ------------------------------------------------------------------------- */

static void gc_print(void *arg, const char *path, const char *why)
{
	(void)arg;
	printf("removed %s (%s)\n", path, why);
}

int main(int argc, char **argv)
{
	bool procs;

	tool_init("flit-stat", usage);
	parse(argc, argv);
	tool_set_verbose(o.verbose);

	if (o.gc) {
		int n = flit_stats_gc(o.dir, gc_print, NULL);
		if (n < 0)
			tool_fail("%s", flit_errmsg());
		if (!n)
			printf("# no stale counters files in %s\n", o.dir);
		return 0;
	}
	if (o.prom)
		return prom_main();
	procs = o.pid || o.all;
	if (!procs && !o.nxdp)
		return list();
	xdp_open_all();

	if (procs)
		sample(true);
	for (int x = 0; x < o.nxdp; x++)
		xdp_sample(x, true);
	if (!o.watch_s) {
		xdp_close_all();
		return 0;
	}

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop) {
		struct timespec ts = {
			.tv_sec = (time_t)o.watch_s,
			.tv_nsec = (long)((o.watch_s - (double)(time_t)o.watch_s) * 1e9),
		};
		if (nanosleep(&ts, NULL) < 0 || stop)
			break;
		if (!o.json) {
			char hms[16];
			time_t now = time(NULL);
			strftime(hms, sizeof(hms), "%H:%M:%S", localtime(&now));
			printf("--- %s\n", hms);
		}
		if (procs && !sample(false) && o.pid) {
			if (!o.json)
				printf("pid %d has no live counters file any more: done\n", o.pid);
			break;
		}
		for (int x = 0; x < o.nxdp; x++)
			xdp_sample(x, false);
	}
	while (nslots)
		slot_drop(&slots[0]);
	xdp_close_all();
	return 0;
}
