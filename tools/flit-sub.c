// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit-sub: subscribe to a topic or a pattern and print what arrives, one
 * line per message or event (in the manner of mosquitto_sub).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static const char usage[] =
"Usage: flit-sub [-t TRANSPORT] [options] PATTERN\n"
"Subscribe to a topic, or to every topic matching a pattern ('*', '?' and\n"
"[set] as in fnmatch(3)), and print one line per message and per event.\n"
"\n"
"  -t, --transport T   only use transport T (shm, udp, xdp, rdma; the context\n"
"                      gets context.transports = T); default: any\n"
"  -n, --count N       exit after N messages\n"
"  -l, --live          start at the live stream of a running source; by\n"
"                      default (receiver.late_join) first get what it keeps\n"
"                      for late joiners (flit-pub keeps what it sends)\n"
"  -e, --eos           exit when every source that began (BOS) has ended\n"
"                      (EOS): a subscriber of one publisher ends with it\n"
"  -T, --timeout S     exit after S seconds (status 1 if --count was given\n"
"                      and not reached)\n"
"  -j, --json          one JSON object per line\n"
"  -B, --max-bytes N   print at most N payload bytes (default 256)\n"
"  -s, --spin          busy-poll (default: sleep 100 us when idle)\n"
"  -S, --timestamps    stamp arrival times (receiver timestamps = true)\n"
"  -C, --config LINE   a config line for the context, e.g.\n"
"                      'context.udp.backend = io_uring' (repeatable); a key\n"
"                      without a scope is a receiver key ('timestamps = on')\n"
"  -v, --verbose       how each transport is set up (\"set-up:\" lines: XDP mode,\n"
"                      copy or zero-copy, ...), library messages to stderr\n"
"                      (-vv: debug)\n"
"  -h, --help          this text\n"
"\n"
"Lines: TOPIC seq=N source=S len=L [late-join] [latency_ns=X] \"PAYLOAD\"\n"
"       TOPIC BOS|EOS source=S [source-died]\n"
"       TOPIC LOSS seq=A..B lost=N source=S\n"
"latency_ns is shown for messages stamped by their source (flit-pub -S): from\n"
"that stamp to the receive stamp (-S; a NIC's is on another clock, so then to\n"
"the delivery), both CLOCK_REALTIME.\n"
"\n"
"Exit status: 0 ok, 1 runtime failure or timeout before --count, 2 usage.\n";

/* Set by SIGINT/SIGTERM: stop polling, close cleanly. */
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct options {
	const char *transport;  /* NULL: any */
	const char *pattern;
	uint64_t count;         /* 0: unlimited */
	double timeout_s;       /* 0: none */
	size_t max_bytes;
	bool json, spin, timestamps, eos, live;
	struct tool_config config;      /* the context's inline config */
	int verbose;
};

struct sub_state {
	const struct options *o;
	uint64_t got;
	unsigned begun, ended; /* sources that sent BOS, EOS */
};

/* Print payload bytes: printable ASCII as is, the rest escaped; JSON-safe
 * with `json` (bytes >= 0x80 become \u00XX). */
static void print_payload(FILE *f, const unsigned char *p, size_t len,
			  size_t max, bool json)
{
	size_t n = len < max ? len : max;

	fputc('"', f);
	tool_escape(f, p, n, TOOL_ESC_HIGH | (json ? TOOL_ESC_JSON : 0));
	fputc('"', f);
	if (n < len && !json)
		fprintf(f, "...(+%zu bytes)", len - n);
}

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct sub_state *s = arg;
	const struct options *o = s->o;
	const char *source = m->source ? m->source : "?";
	const char *topic = m->topic ? m->topic : o->pattern;
	bool stamped = m->flags & FLIT_MSGF_SEND_TS;
	int64_t latency = 0;

	(void)sub;
	if (stop || (o->count && s->got >= o->count))
		return;
	if (m->kind == FLIT_MSG_DATA && stamped) {
		/* the send stamp is CLOCK_REALTIME: so must the other end be.
		 * A NIC's receive stamp is its PHC's time, another clock: then
		 * the time of delivery */
		bool rt = (m->flags & FLIT_MSGF_RECV_TS) && !(m->flags & FLIT_MSGF_RECV_TS_HW);
		uint64_t recv = rt ? m->recv_ts_ns : flit_realtime_ns();
		latency = (int64_t)(recv - m->send_ts_ns);
	}

	if (o->json) {
		static const char *const kinds[] = { "data", "bos", "eos", "loss" };

		printf("{\"kind\":\"%s\",\"topic\":", (unsigned)m->kind < 4 ?
		       kinds[m->kind] : "unknown");
		tool_json_str(stdout, topic);
		printf(",\"source\":");
		tool_json_str(stdout, source);
		switch (m->kind) {
		case FLIT_MSG_DATA:
			printf(",\"seq\":%llu,\"len\":%zu", (unsigned long long)m->seq, m->len);
			if (m->flags & FLIT_MSGF_LATE_JOIN)
				printf(",\"late_join\":true");
			if (stamped)
				printf(",\"latency_ns\":%lld", (long long)latency);
			printf(",\"payload\":");
			print_payload(stdout, m->data, m->len, o->max_bytes, true);
			if (m->len > o->max_bytes)
				printf(",\"truncated\":true");
			break;
		case FLIT_MSG_EOS:
			printf(",\"source_died\":%s",
			       m->flags & FLIT_MSGF_SOURCE_DIED ? "true" : "false");
			break;
		case FLIT_MSG_LOSS:
			printf(",\"seq\":%llu,\"lost\":%llu", (unsigned long long)m->seq,
			       (unsigned long long)m->lost);
			break;
		default:
			break;
		}
		printf("}\n");
	} else {
		switch (m->kind) {
		case FLIT_MSG_DATA:
			printf("%s seq=%llu source=%s len=%zu ", topic,
			       (unsigned long long)m->seq, source, m->len);
			if (m->flags & FLIT_MSGF_LATE_JOIN)
				printf("late-join ");
			if (stamped)
				printf("latency_ns=%lld ", (long long)latency);
			print_payload(stdout, m->data, m->len, o->max_bytes, false);
			putchar('\n');
			break;
		case FLIT_MSG_BOS:
			printf("%s BOS source=%s\n", topic, source);
			break;
		case FLIT_MSG_EOS:
			printf("%s EOS source=%s%s\n", topic, source,
			       m->flags & FLIT_MSGF_SOURCE_DIED ? " source-died" : "");
			break;
		case FLIT_MSG_LOSS:
			printf("%s LOSS seq=%llu..%llu lost=%llu source=%s\n", topic,
			       (unsigned long long)m->seq,
			       (unsigned long long)(m->seq + m->lost - 1),
			       (unsigned long long)m->lost, source);
			break;
		default:
			printf("%s event %d source=%s\n", topic, (int)m->kind, source);
		}
	}
	if (m->kind == FLIT_MSG_DATA)
		s->got++;
	else if (m->kind == FLIT_MSG_BOS)
		s->begun++;
	else if (m->kind == FLIT_MSG_EOS)
		s->ended++;
}

static void parse(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "transport",  required_argument, NULL, 't' },
		{ "count",      required_argument, NULL, 'n' },
		{ "eos",        no_argument,       NULL, 'e' },
		{ "live",       no_argument,       NULL, 'l' },
		{ "timeout",    required_argument, NULL, 'T' },
		{ "json",       no_argument,       NULL, 'j' },
		{ "max-bytes",  required_argument, NULL, 'B' },
		{ "spin",       no_argument,       NULL, 's' },
		{ "timestamps", no_argument,       NULL, 'S' },
		{ "config",     required_argument, NULL, 'C' },
		{ "verbose",    no_argument,       NULL, 'v' },
		{ "help",       no_argument,       NULL, 'h' },
		{ 0 }
	};
	const char *cfg[TOOL_CONFIG_LINES];
	int opt, ncfg = 0;

	*o = (struct options){ .max_bytes = 256 };
	while ((opt = getopt_long(argc, argv, ":t:n:elT:jB:sSC:vh", longopts, NULL)) != -1) {
		switch (opt) {
		case 't': o->transport = tool_parse_transport(optarg); break;
		case 'n': o->count = tool_parse_count("count", optarg, 1, UINT64_MAX / 2); break;
		case 'T': o->timeout_s = tool_parse_seconds("timeout", optarg, 0.001, 86400 * 365); break;
		case 'e': o->eos = true; break;
		case 'l': o->live = true; break;
		case 'j': o->json = true; break;
		case 'B': o->max_bytes = tool_parse_size("max-bytes", optarg, 0, 1 << 30); break;
		case 's': o->spin = true; break;
		case 'S': o->timestamps = true; break;
		case 'C': tool_config_defer(cfg, &ncfg, optarg); break;
		case 'v': o->verbose++; break;
		case 'h': tool_help_exit();
		default: tool_getopt_error(opt, argv);
		}
	}
	if (optind >= argc)
		tool_usage_exit("missing PATTERN");
	o->pattern = argv[optind++];
	if (optind < argc)
		tool_usage_exit("unexpected argument '%s'", argv[optind]);
	if (!*o->pattern || strlen(o->pattern) > FLIT_TOPIC_MAX)
		tool_usage_exit("bad pattern: 1..%d bytes", FLIT_TOPIC_MAX);
	tool_config_init(&o->config);
	if (o->transport)
		tool_config_add(&o->config, "context.transports = %s", o->transport);
	/* (a -C line may still set it: it comes after) */
	tool_config_add(&o->config, "receiver.late_join = %s", o->live ? "off" : "on");
	for (int i = 0; i < ncfg; i++)
		tool_config_add_user(&o->config, cfg[i], "receiver");
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct options o;
	struct sub_state s = { .o = &o };
	uint64_t deadline = 0;
	flit_ctx *ctx;
	flit_sub *sub;
	char err[768];
	int rc = 0;

	tool_init("flit-sub", usage);
	parse(argc, argv, &o);
	tool_set_verbose(o.verbose);
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	FLIT_OPTS(flit_sub_opts, sopts, .on_msg = on_msg, .arg = &s,
		  .pattern = strpbrk(o.pattern, "*?[") != NULL,
		  .config = o.timestamps ? "timestamps = true\n" : NULL);
	ctx = tool_ctx_new(&o.config, err, sizeof(err));
	if (!ctx)
		tool_fail("creating the context: %s", err);
	sub = flit_sub_new(ctx, o.pattern, &sopts);
	if (!sub)
		tool_fail("subscribing to '%s': %s", o.pattern, flit_errmsg());
	tool_print_setup(ctx);

	if (o.timeout_s > 0)
		deadline = flit_monotonic_raw_ns() + (uint64_t)(o.timeout_s * 1e9);
	while (!stop && !(o.count && s.got >= o.count) &&
	       !(o.eos && s.begun && s.ended >= s.begun)) {
		int n = flit_ctx_poll(ctx, 0);

		if (n < 0) {
			tool_warn("polling: %s", flit_errmsg());
			rc = 1;
			break;
		}
		if (deadline && flit_monotonic_raw_ns() >= deadline) {
			if (o.count) {
				tool_warn("timeout after %g s: %llu of %llu messages",
					  o.timeout_s, (unsigned long long)s.got,
					  (unsigned long long)o.count);
				rc = 1;
			}
			break;
		}
		if (n == 0 && !o.spin)
			tool_sleep_us(100);
	}
	fflush(stdout);
	flit_sub_close(sub);
	flit_ctx_close(ctx);
	return rc;
}
