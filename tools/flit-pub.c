// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit-pub: publish a few messages from the command line (in the manner of
 * mosquitto_pub): each MESSAGE argument, or each line of a file or of stdin,
 * is one message.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static const char usage[] =
"Usage: flit-pub [-t TRANSPORT] [options] TOPIC [MESSAGE...]\n"
"       flit-pub [-t TRANSPORT] [options] --file F TOPIC\n"
"Publish each MESSAGE (or each line of F; '-' reads stdin) as one message.\n"
"\n"
"  -t, --transport T        shm (default), udp, xdp, rdma; the context gets\n"
"                           context.transports = T\n"
"  -f, --file F             read messages from F, one per line ('-': stdin)\n"
"  -w, --wait-receivers N   first wait until the source has N receivers\n"
"  -l, --linger MS          keep the source open MS ms after the last message\n"
"                           so receivers can read it (default 100)\n"
"  -T, --timeout S          bound on --wait-receivers and on back-pressure\n"
"                           (default 5)\n"
"  -L, --late-join N        keep the last N messages for receivers that join\n"
"                           late (source.late_join; default: every MESSAGE,\n"
"                           or 10000 with --file; 0: none)\n"
"  -S, --timestamps         stamp messages with their send time\n"
"  -C, --config LINE        a config line for the context, e.g.\n"
"                           'source.udp.mode = unicast' (repeatable); a key\n"
"                           without a scope is a source key ('batch = true')\n"
"  -v, --verbose            how the transport is set up (\"set-up:\" line: XDP\n"
"                           mode, copy or zero-copy, ...), what was sent;\n"
"                           library messages (-vv: debug)\n"
"  -h, --help               this text\n"
"\n"
"SIGINT or SIGTERM closes the source cleanly (its receivers get EOS): exit 0\n"
"when every message was sent (ending --linger), else 1.\n"
"\n"
"Exit status: 0 ok, 1 runtime failure, 2 usage error.\n";

struct options {
	const char *transport;
	const char *topic;
	const char *file;
	char **msgs;
	int nmsgs;
	int wait_receivers;
	unsigned linger_ms;
	double timeout_s;
	bool timestamps;
	long late_join;                 /* -1: the default */
	struct tool_config config;      /* the context's inline config */
	int verbose;
};

/* Set by SIGINT/SIGTERM: stop, and close cleanly (subscribers get EOS, an
 * XDP program this context attached is detached). */
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* The library objects, closed on every exit (no ring file left behind). */
struct run {
	const struct options *o;
	flit_ctx *ctx;
	flit_pub *pub;
};

static noreturn TOOL_FMT(2, 3) void run_fail(struct run *r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	flit_pub_close(r->pub);
	flit_ctx_close(r->ctx);
	tool_fail("%s", msg);
}

/* A signal came while `what`: close and fail. */
static void check_stop(struct run *r, const char *what)
{
	if (stop)
		run_fail(r, "interrupted %s (the source closed cleanly)", what);
}

/* Send one message; while back-pressured, poll and retry up to the timeout. */
static void send_one(struct run *r, const char *data, size_t len)
{
	const struct options *o = r->o;
	uint64_t deadline = flit_monotonic_raw_ns() + (uint64_t)(o->timeout_s * 1e9);
	int rc;

	while ((rc = flit_pub_send(r->pub, data, len)) != FLIT_OK) {
		if (rc < 0)
			run_fail(r, "sending a %zu-byte message: %s", len, flit_errmsg());
		if (flit_monotonic_raw_ns() > deadline)
			run_fail(r, "sending: %s for %g s", flit_strstatus(rc), o->timeout_s);
		check_stop(r, "while back-pressured");
		flit_ctx_poll(r->ctx, 0);
		tool_sleep_us(100);
	}
}

static uint64_t send_file(struct run *r)
{
	const struct options *o = r->o;
	FILE *f = strcmp(o->file, "-") ? fopen(o->file, "re") : stdin;
	char *line = NULL;
	size_t cap = 0;
	uint64_t n = 0;
	ssize_t len;

	if (!f)
		run_fail(r, "%s: %s", o->file, strerror(errno));
	while ((len = getline(&line, &cap, f)) >= 0) {
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		send_one(r, line, (size_t)len);
		n++;
		check_stop(r, "while sending");
	}
	check_stop(r, "while reading");    /* (a read the signal cut short) */
	if (ferror(f))
		run_fail(r, "reading %s: %s", o->file, strerror(errno));
	free(line);
	if (f != stdin)
		fclose(f);
	return n;
}

static void parse(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "transport",      required_argument, NULL, 't' },
		{ "file",           required_argument, NULL, 'f' },
		{ "wait-receivers", required_argument, NULL, 'w' },
		{ "linger",         required_argument, NULL, 'l' },
		{ "late-join",      required_argument, NULL, 'L' },
		{ "timeout",        required_argument, NULL, 'T' },
		{ "timestamps",     no_argument,       NULL, 'S' },
		{ "config",         required_argument, NULL, 'C' },
		{ "verbose",        no_argument,       NULL, 'v' },
		{ "help",           no_argument,       NULL, 'h' },
		{ 0 }
	};
	const char *cfg[TOOL_CONFIG_LINES];
	int opt, ncfg = 0;

	*o = (struct options){ .transport = "shm", .linger_ms = 100, .timeout_s = 5, .late_join = -1 };
	/* '+' would stop at the first non-option; we allow options anywhere. */
	while ((opt = getopt_long(argc, argv, ":t:f:w:l:L:T:SC:vh", longopts, NULL)) != -1) {
		switch (opt) {
		case 't': o->transport = tool_parse_transport(optarg); break;
		case 'f': o->file = optarg; break;
		case 'w': o->wait_receivers = (int)tool_parse_count("receiver count", optarg, 0, 1 << 20); break;
		case 'l': o->linger_ms = (unsigned)tool_parse_count("linger", optarg, 0, 3600000); break;
		case 'T': o->timeout_s = tool_parse_seconds("timeout", optarg, 0.001, 86400); break;
		case 'L': o->late_join = (long)tool_parse_count("late join", optarg, 0, 16777216); break;
		case 'S': o->timestamps = true; break;
		case 'C': tool_config_defer(cfg, &ncfg, optarg); break;
		case 'v': o->verbose++; break;
		case 'h': tool_help_exit();
		default: tool_getopt_error(opt, argv);
		}
	}
	if (optind >= argc)
		tool_usage_exit("missing TOPIC");
	o->topic = argv[optind++];
	if (!*o->topic || strlen(o->topic) > FLIT_TOPIC_MAX)
		tool_usage_exit("bad topic: 1..%d bytes", FLIT_TOPIC_MAX);
	if (strpbrk(o->topic, "*?["))
		tool_usage_exit("bad topic '%s': patterns are for subscribers", o->topic);
	o->msgs = argv + optind;
	o->nmsgs = argc - optind;
	if (o->file && o->nmsgs)
		tool_usage_exit("give MESSAGE arguments or --file, not both");
	if (!o->file && !o->nmsgs)
		tool_usage_exit("nothing to send: give MESSAGE arguments or --file");
	tool_config_init(&o->config);
	tool_config_add(&o->config, "context.transports = %s", o->transport);
	/* a receiver that comes a moment late still gets what was sent (a -C
	 * line may still set it: it comes after) */
	if (o->late_join < 0)
		o->late_join = o->file ? 10000 : o->nmsgs;
	tool_config_add(&o->config, "source.late_join = %ld", o->late_join);
	for (int i = 0; i < ncfg; i++)
		tool_config_add_user(&o->config, cfg[i], "source");
}

int main(int argc, char **argv)
{
	struct options o;
	struct run r = { .o = &o };
	uint64_t sent = 0, deadline;
	char err[768];
	int rc;

	struct sigaction sa = { .sa_handler = on_signal };

	tool_init("flit-pub", usage);
	parse(argc, argv, &o);
	tool_set_verbose(o.verbose);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	FLIT_OPTS(flit_pub_opts, popts, .transport = o.transport,
		  .config = o.timestamps ? "timestamps = true\n" : NULL);
	r.ctx = tool_ctx_new(&o.config, err, sizeof(err));
	if (!r.ctx)
		run_fail(&r, "creating the context: %s", err);
	r.pub = flit_pub_new(r.ctx, o.topic, &popts);
	if (!r.pub)
		run_fail(&r, "publishing '%s' on %s: %s", o.topic, o.transport, flit_errmsg());
	tool_print_setup(r.ctx);

	if (o.wait_receivers > 0) {
		deadline = flit_monotonic_raw_ns() + (uint64_t)(o.timeout_s * 1e9);
		while ((rc = flit_pub_receivers(r.pub)) < o.wait_receivers) {
			if (rc < 0)
				run_fail(&r, "counting receivers: %s", rc == -EOPNOTSUPP ?
					 "the transport cannot tell" : flit_errmsg());
			if (flit_monotonic_raw_ns() > deadline)
				run_fail(&r, "%d of %d receivers after %g s", rc,
					 o.wait_receivers, o.timeout_s);
			check_stop(&r, "while waiting for receivers");
			flit_ctx_poll(r.ctx, 0);
			tool_sleep_us(1000);
		}
	}

	uint64_t cpu0 = tool_cpu_ns(), t0 = flit_monotonic_raw_ns();
	if (o.file) {
		sent = send_file(&r);
	} else {
		for (int i = 0; i < o.nmsgs; i++, sent++) {
			send_one(&r, o.msgs[i], strlen(o.msgs[i]));
			check_stop(&r, "while sending");
		}
	}
	deadline = flit_monotonic_raw_ns() + (uint64_t)(o.timeout_s * 1e9);
	while ((rc = flit_pub_flush(r.pub)) != FLIT_OK) {
		if (rc < 0)
			run_fail(&r, "flushing: %s", flit_errmsg());
		if (flit_monotonic_raw_ns() > deadline)
			run_fail(&r, "flushing: %s for %g s", flit_strstatus(rc), o.timeout_s);
		check_stop(&r, "while flushing");
		flit_ctx_poll(r.ctx, 0);
		tool_sleep_us(100);
	}
	uint64_t cpu = tool_cpu_ns() - cpu0, secs_ns = flit_monotonic_raw_ns() - t0;
	if (o.verbose)
		fprintf(stderr, "%s: sent %llu message%s to '%s' (%d receiver%s) in %.6f s, "
			"CPU %.0f ns/msg (this process, from the first send to the flush)\n",
			tool_name(), (unsigned long long)sent, sent == 1 ? "" : "s",
			o.topic, flit_pub_receivers(r.pub),
			flit_pub_receivers(r.pub) == 1 ? "" : "s", (double)secs_ns / 1e9,
			sent ? (double)cpu / (double)sent : 0.0);
	deadline = flit_monotonic_raw_ns() + (uint64_t)o.linger_ms * 1000000u;
	/* (a signal ends the linger: everything was sent) */
	while (flit_monotonic_raw_ns() < deadline && !stop) {
		flit_ctx_poll(r.ctx, 0);
		tool_sleep_us(1000);
	}
	flit_pub_close(r.pub);
	flit_ctx_close(r.ctx);
	return 0;
}
