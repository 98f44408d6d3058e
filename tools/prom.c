// SPDX-License-Identifier: BSD-2-Clause
/*
 * The Prometheus exposition of flit's counters and the HTTP server that
 * serves it (prom.h).  Read by flit-stat only; linked into every tool as
 * the other tools/ files are.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prom.h"
#include "tool.h"

/* ---- exposition ---------------------------------------------------------- */

enum role { ROLE_CONTEXT, ROLE_TRANSPORT, ROLE_PUB, ROLE_SUB };

static const char *const role_name[] = { "context", "transport", "pub", "sub" };

/* The slots each kind of row fills (docs/STATS.md, "Counters"); a slot
 * outside its row's set is shown too when it is not zero. */
#define BIT(s) (1u << (s))
#define SEND_SLOTS (BIT(FLIT_STATS_MSGS_SENT) | BIT(FLIT_STATS_BYTES_SENT) |          \
		    BIT(FLIT_STATS_FRAMES_SENT) | BIT(FLIT_STATS_BACK_PRESSURED) |    \
		    BIT(FLIT_STATS_MALFORMED) | BIT(FLIT_STATS_READERS_EVICTED) |     \
		    BIT(FLIT_STATS_NAKS_RECEIVED) | BIT(FLIT_STATS_RETRANSMISSIONS) | \
		    BIT(FLIT_STATS_RATE_LIMITED))
static const uint32_t role_slots[] = {
	[ROLE_CONTEXT] = (BIT(FLIT_STATS_SOURCES) - 1) | BIT(FLIT_STATS_MSGS_FILTERED),
	[ROLE_TRANSPORT] = SEND_SLOTS,
	[ROLE_PUB] = SEND_SLOTS,
	[ROLE_SUB] = BIT(FLIT_STATS_MSGS_RECEIVED) | BIT(FLIT_STATS_BYTES_RECEIVED) |
		     BIT(FLIT_STATS_DUPLICATES) | BIT(FLIT_STATS_MSGS_LOST) |
		     BIT(FLIT_STATS_LOSS_EVENTS) | BIT(FLIT_STATS_SOURCES_JOINED) |
		     BIT(FLIT_STATS_SOURCES_LEFT) | BIT(FLIT_STATS_SOURCES),
};

static const char *const slot_help[FLIT_STATS_COUNTERS_USED] = {
	[FLIT_STATS_MSGS_SENT] = "Messages sent.",
	[FLIT_STATS_BYTES_SENT] = "Bytes of messages sent.",
	[FLIT_STATS_FRAMES_SENT] = "Frames (or batches) sent.",
	[FLIT_STATS_BACK_PRESSURED] = "Sends refused with FLIT_BACK_PRESSURED.",
	[FLIT_STATS_MSGS_RECEIVED] = "Messages received (context: delivered to at least one subscriber).",
	[FLIT_STATS_BYTES_RECEIVED] = "Bytes of messages received.",
	[FLIT_STATS_FRAMES_RECEIVED] = "Frames received.",
	[FLIT_STATS_MALFORMED] = "Frames dropped as malformed.",
	[FLIT_STATS_DUPLICATES] = "Messages dropped as already delivered.",
	[FLIT_STATS_MSGS_LOST] = "Messages reported lost to subscribers (unrecoverable).",
	[FLIT_STATS_LOSS_EVENTS] = "FLIT_MSG_LOSS events.",
	[FLIT_STATS_READERS_EVICTED] = "Dead receivers evicted by this process's sources.",
	[FLIT_STATS_SOURCES_JOINED] = "Sources that began (BOS).",
	[FLIT_STATS_SOURCES_LEFT] = "Sources that ended (EOS).",
	[FLIT_STATS_NAKS_SENT] = "NAK ranges sent by this process's receivers.",
	[FLIT_STATS_NAKS_RECEIVED] = "NAK ranges received by this process's sources.",
	[FLIT_STATS_RETRANSMISSIONS] = "Frames retransmitted.",
	[FLIT_STATS_RETX_RECEIVED] = "Retransmitted frames received.",
	[FLIT_STATS_FOREIGN_DROPPED] = "Datagrams dropped as not flit frames.",
	[FLIT_STATS_UNKNOWN_SESSION] = "Frames of sessions not (yet) resolved.",
	[FLIT_STATS_RATE_LIMITED] = "Sends refused by the data rate limit.",
	[FLIT_STATS_SOURCES] = "Sources delivering to the subscriber now.",
	[FLIT_STATS_MSGS_FILTERED] = "Messages of joined shared sessions' topics no subscriber here wants, dropped.",
};

/* One series of a context: a row, several rows with the same labels, or
 * the rows past the cap (topic _other), summed. */
struct series {
	enum role role;
	char *labels;   /* `,role="pub",transport="shm",topic="md.eur"`, escaped */
	uint64_t c[FLIT_STATS_COUNTERS_USED];
};

struct ctx_out {
	const struct flit_stats_snap *s;
	struct series *v;
	size_t n;
	unsigned topics[2];   /* publisher, subscriber rows after the filter */
	unsigned other[2];    /* ... of them summed into _other */
};

/* A topic row of a process, for choosing which ones keep their series. */
struct topic_ref {
	const struct flit_stats_row *r;
	unsigned ctx;         /* index into the ctx_out array */
	bool kept;
};

static bool is_utf8_tail(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t k;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		k = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		k = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		k = 4;
	else
		return 0;
	if (n < k)
		return 0;
	for (size_t i = 1; i < k; i++)
		if (!is_utf8_tail(s[i]))
			return 0;
	/* overlong forms, surrogates, past U+10FFFF */
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
		return 0;
	return k;
}

void prom_label_value(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	while (n) {
		size_t k = utf8_len(p, n);

		if (!k) {
			fputs("\xef\xbf\xbd", f);
			k = 1;
		} else if (*p == '\\') {
			fputs("\\\\", f);
		} else if (*p == '"') {
			fputs("\\\"", f);
		} else if (*p == '\n') {
			fputs("\\n", f);
		} else {
			fwrite(p, 1, k, f);
		}
		p += k;
		n -= k;
	}
}

/* `,name="value"` appended to the labels being built in f */
static void label(FILE *f, const char *name, const char *value)
{
	fprintf(f, ",%s=\"", name);
	prom_label_value(f, value);
	fputc('"', f);
}

/* The labels of a series after pid and context; NULL when out of memory. */
static char *series_labels(enum role role, const char *transport, const char *topic)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	label(f, "role", role_name[role]);
	if (transport && *transport)
		label(f, "transport", transport);
	if (topic)
		label(f, "topic", topic);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int series_cmp(const void *a, const void *b)
{
	const struct series *x = a, *y = b;

	if (x->role != y->role)
		return x->role < y->role ? -1 : 1;
	return strcmp(x->labels, y->labels);
}

static int topic_ref_cmp(const void *a, const void *b)
{
	const struct topic_ref *x = a, *y = b;

	if (x->r->created_ns != y->r->created_ns)
		return x->r->created_ns < y->r->created_ns ? -1 : 1;
	return strcmp(x->r->name, y->r->name);
}

static bool row_topic_wanted(const struct flit_stats_row *r, const char *glob)
{
	return !glob || fnmatch(glob, r->name, 0) == 0;
}

static bool is_topic_row(const struct flit_stats_row *r)
{
	return r->kind == FLIT_STATS_ROW_PUBLISHER || r->kind == FLIT_STATS_ROW_SUBSCRIBER;
}

static int add_series(struct ctx_out *co, size_t *cap, enum role role, const char *transport,
		      const char *topic, const uint64_t *c)
{
	struct series *sr;

	if (co->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct series *v = realloc(co->v, ncap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		co->v = v;
		*cap = ncap;
	}
	sr = &co->v[co->n];
	sr->role = role;
	sr->labels = series_labels(role, transport, topic);
	if (!sr->labels)
		return -ENOMEM;
	memcpy(sr->c, c, sizeof(sr->c));
	co->n++;
	return 0;
}

/* Sort a context's series and sum those with the same labels (two
 * subscribers of one topic, topics that differ only in bytes that are not
 * UTF-8, a topic named _other): the exposition must not repeat a series. */
static void merge_series(struct ctx_out *co)
{
	size_t w = 0;

	qsort(co->v, co->n, sizeof(*co->v), series_cmp);
	for (size_t i = 0; i < co->n; i++) {
		if (w && co->v[w - 1].role == co->v[i].role &&
		    !strcmp(co->v[w - 1].labels, co->v[i].labels)) {
			for (unsigned k = 0; k < FLIT_STATS_COUNTERS_USED; k++)
				co->v[w - 1].c[k] += co->v[i].c[k];
			free(co->v[i].labels);
			continue;
		}
		co->v[w++] = co->v[i];
	}
	co->n = w;
}

/* Choose the topic rows of the contexts [from, to) (one process) that keep
 * their own series: the max_topics oldest. */
static int choose_topics(const struct prom_input *in, struct ctx_out *co, unsigned from,
			 unsigned to, bool **kept_out)
{
	struct topic_ref *refs;
	size_t n = 0, total = 0;

	for (unsigned i = from; i < to; i++)
		total += co[i].s->nrows;
	refs = calloc(total ? total : 1, sizeof(*refs));
	if (!refs)
		return -ENOMEM;
	for (unsigned i = from; i < to; i++) {
		const struct flit_stats_snap *s = co[i].s;

		kept_out[i] = calloc(s->nrows ? s->nrows : 1, sizeof(bool));
		if (!kept_out[i]) {
			free(refs);
			return -ENOMEM;
		}
		for (unsigned j = 0; j < s->nrows; j++) {
			const struct flit_stats_row *r = &s->rows[j];

			if (!is_topic_row(r) || !row_topic_wanted(r, in->topic))
				continue;
			co[i].topics[r->kind == FLIT_STATS_ROW_SUBSCRIBER]++;
			refs[n].r = r;
			refs[n].ctx = i;
			n++;
		}
	}
	if (n > in->max_topics)
		qsort(refs, n, sizeof(*refs), topic_ref_cmp);
	for (size_t k = 0; k < n; k++) {
		const struct flit_stats_snap *s = co[refs[k].ctx].s;

		if (k < in->max_topics)
			kept_out[refs[k].ctx][refs[k].r - s->rows] = true;
		else
			co[refs[k].ctx].other[refs[k].r->kind == FLIT_STATS_ROW_SUBSCRIBER]++;
	}
	free(refs);
	return 0;
}

/* The series of one context; kept[j]: row j has its own series. */
static int build_ctx(const struct prom_input *in, struct ctx_out *co, const bool *kept)
{
	const struct flit_stats_snap *s = co->s;
	uint64_t sub_other[FLIT_STATS_COUNTERS_USED] = { 0 };
	struct {
		char transport[sizeof(s->rows[0].transport)];
		uint64_t c[FLIT_STATS_COUNTERS_USED];
	} pub_other[8];
	unsigned npo = 0;
	size_t cap = 0;
	int rc;

	for (unsigned j = 0; j < s->nrows; j++) {
		const struct flit_stats_row *r = &s->rows[j];

		switch (r->kind) {
		case FLIT_STATS_ROW_CONTEXT:
			rc = add_series(co, &cap, ROLE_CONTEXT, NULL, NULL, r->c);
			break;
		case FLIT_STATS_ROW_TRANSPORT:
			rc = add_series(co, &cap, ROLE_TRANSPORT, r->transport, NULL, r->c);
			break;
		case FLIT_STATS_ROW_PUBLISHER:
		case FLIT_STATS_ROW_SUBSCRIBER:
			if (!row_topic_wanted(r, in->topic))
				continue;
			if (kept[j]) {
				rc = add_series(co, &cap, r->kind == FLIT_STATS_ROW_PUBLISHER ?
						ROLE_PUB : ROLE_SUB, r->transport, r->name, r->c);
				break;
			}
			uint64_t *sum = sub_other;
			if (r->kind == FLIT_STATS_ROW_PUBLISHER) {
				unsigned t = 0;
				while (t < npo && strcmp(pub_other[t].transport, r->transport))
					t++;
				if (t == npo) {
					/* transports are a handful; past 8, the last takes the rest */
					if (npo < sizeof(pub_other) / sizeof(*pub_other)) {
						memset(&pub_other[npo], 0, sizeof(*pub_other));
						memcpy(pub_other[npo].transport, r->transport,
						       sizeof(r->transport));
						npo++;
					}
					t = npo - 1;
				}
				sum = pub_other[t].c;
			}
			for (unsigned k = 0; k < FLIT_STATS_COUNTERS_USED; k++)
				sum[k] += r->c[k];
			continue;
		default:
			continue;
		}
		if (rc < 0)
			return rc;
	}
	for (unsigned t = 0; t < npo; t++)
		if ((rc = add_series(co, &cap, ROLE_PUB, pub_other[t].transport, PROM_OTHER_TOPIC,
				     pub_other[t].c)) < 0)
			return rc;
	if (co->other[1] &&
	    (rc = add_series(co, &cap, ROLE_SUB, NULL, PROM_OTHER_TOPIC, sub_other)) < 0)
		return rc;
	merge_series(co);
	return 0;
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* `name{pid="1",context="0"` -- the caller adds labels and the value */
static void sample_start(FILE *f, const char *name, const struct flit_stats_snap *s)
{
	fprintf(f, "%s{pid=\"%u\",context=\"%u\"", name, s->hdr.pid, s->hdr.ctx_index);
}

static void write_contexts(FILE *f, const struct prom_input *in, const struct ctx_out *co)
{
	static const char other_help[] =
		" Rows: role=context (the totals), transport, pub, sub; topic=\"" PROM_OTHER_TOPIC
		"\" sums the topic rows of a process past flit-stat --max-topics.";
	char name[64], help[256];

	family(f, "flit_context_info", "gauge",
	       "A live flit context (counters file <pid>-<context>): its command, domain and transports.");
	for (unsigned i = 0; i < in->nsnaps; i++) {
		const struct flit_stats_hdr *h = &co[i].s->hdr;

		sample_start(f, "flit_context_info", co[i].s);
		label(f, "comm", h->comm);
		label(f, "domain", h->domain);
		label(f, "transports", h->transports);
		fputs("} 1\n", f);
	}
	family(f, "flit_context_start_time_seconds", "gauge",
	       "When the context was made, seconds since the epoch.");
	for (unsigned i = 0; i < in->nsnaps; i++) {
		sample_start(f, "flit_context_start_time_seconds", co[i].s);
		fprintf(f, "} %.3f\n", (double)co[i].s->hdr.created_real_ns / 1e9);
	}
	family(f, "flit_context_refresh_age_seconds", "gauge",
	       "Seconds since the context last wrote its counters (context.stats_interval_ms; "
	       "a large value: the process stopped polling and publishing).");
	for (unsigned i = 0; i < in->nsnaps; i++) {
		uint64_t u = co[i].s->hdr.updated_ns;

		sample_start(f, "flit_context_refresh_age_seconds", co[i].s);
		fprintf(f, "} %.3f\n", in->now_ns > u ? (double)(in->now_ns - u) / 1e9 : 0.0);
	}
	family(f, "flit_context_refreshes_total", "counter", "Refreshes of the counters file.");
	for (unsigned i = 0; i < in->nsnaps; i++) {
		sample_start(f, "flit_context_refreshes_total", co[i].s);
		fprintf(f, "} %llu\n", (unsigned long long)co[i].s->hdr.refreshes);
	}
	family(f, "flit_context_rows_dropped_total", "counter",
	       "Publishers, subscribers and transports left without a row: the file was full "
	       "(raise context.stats_rows).");
	for (unsigned i = 0; i < in->nsnaps; i++) {
		sample_start(f, "flit_context_rows_dropped_total", co[i].s);
		fprintf(f, "} %u\n", co[i].s->hdr.rows_dropped);
	}
	family(f, "flit_context_torn_rows", "gauge",
	       "Rows still being written after every retry of this read (a writer died mid-write?).");
	for (unsigned i = 0; i < in->nsnaps; i++) {
		sample_start(f, "flit_context_torn_rows", co[i].s);
		fprintf(f, "} %u\n", co[i].s->torn);
	}
	family(f, "flit_topics", "gauge",
	       "Publisher (role=pub) and subscriber (role=sub) rows that --topic selects; "
	       "those past --max-topics are in topic=\"" PROM_OTHER_TOPIC "\".");
	for (unsigned i = 0; i < in->nsnaps; i++)
		for (unsigned k = 0; k < 2; k++) {
			sample_start(f, "flit_topics", co[i].s);
			fprintf(f, ",role=\"%s\"} %u\n", role_name[ROLE_PUB + k], co[i].topics[k]);
		}
	family(f, "flit_topics_other", "gauge",
	       "Of flit_topics, the rows summed into topic=\"" PROM_OTHER_TOPIC "\" (past --max-topics).");
	for (unsigned i = 0; i < in->nsnaps; i++)
		for (unsigned k = 0; k < 2; k++) {
			sample_start(f, "flit_topics_other", co[i].s);
			fprintf(f, ",role=\"%s\"} %u\n", role_name[ROLE_PUB + k], co[i].other[k]);
		}

	for (unsigned slot = 0; slot < FLIT_STATS_COUNTERS_USED; slot++) {
		bool gauge = slot == FLIT_STATS_SOURCES;

		snprintf(name, sizeof(name), "flit_%s%s", flit_stats_counter_name(slot),
			 gauge ? "" : "_total");
		snprintf(help, sizeof(help), "%s%s", slot_help[slot], other_help);
		family(f, name, gauge ? "gauge" : "counter", help);
		for (unsigned i = 0; i < in->nsnaps; i++)
			for (size_t k = 0; k < co[i].n; k++) {
				const struct series *sr = &co[i].v[k];

				if (!(role_slots[sr->role] & BIT(slot)) && !sr->c[slot])
					continue;
				sample_start(f, name, co[i].s);
				fprintf(f, "%s} %llu\n", sr->labels, (unsigned long long)sr->c[slot]);
			}
	}
}

/* [from, to) of the XDP counters: verdicts, reasons of XDP_PASS */
static void write_xdp(FILE *f, const struct prom_input *in)
{
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
		{ "flit_xdp_up", "gauge",
		  "1 if flit's XDP program's counters on the interface were read, else 0." },
		{ "flit_xdp_packets_total", "counter",
		  "Packets seen by flit's XDP program, by verdict (each packet has one)." },
		{ "flit_xdp_passed_total", "counter",
		  "Packets flit's XDP program passed to the kernel, by reason (each has one)." },
		{ "flit_xdp_vlan_total", "counter", "Frames that carried 802.1Q/802.1ad tags." },
		{ "flit_xdp_walk_limit_total", "counter",
		  "Frames steered unread by the topic filter: longer than 0x7ff8 bytes." },
	};

	for (size_t g = 0; g < sizeof(fam) / sizeof(*fam); g++) {
		unsigned from, to;

		switch (g) {
		case 0: from = to = 0; break;
		case 1: from = FLIT_XDP_PASSED; to = FLIT_XDP_PASS_SHORT; break;
		case 2: from = FLIT_XDP_PASS_SHORT; to = FLIT_XDP_VLAN; break;
		case 3: from = FLIT_XDP_VLAN; to = FLIT_XDP_VLAN + 1; break;
		default: from = FLIT_XDP_WALK_LIMIT; to = FLIT_XDP_WALK_LIMIT + 1; break;
		}
		family(f, fam[g].name, fam[g].type, fam[g].help);
		for (unsigned x = 0; x < in->nxdp; x++) {
			const struct prom_xdp *p = &in->xdp[x];
			unsigned i = from;

			if (g && !p->up)
				continue;
			do {
				fprintf(f, "%s{interface=\"", fam[g].name);
				prom_label_value(f, p->ifname);
				fputc('"', f);
				if (p->netns)
					label(f, "netns", p->netns);
				if (g == 1)
					label(f, "verdict", flit_xdp_counter_name(i));
				else if (g == 2)
					label(f, "reason", flit_xdp_counter_name(i) + 5); /* "pass_" */
				if (g)
					fprintf(f, "} %llu\n", (unsigned long long)p->c[i]);
				else
					fprintf(f, "} %d\n", p->up);
			} while (++i < to);
		}
	}
}

int prom_write(FILE *f, const struct prom_input *in)
{
	struct ctx_out *co = calloc(in->nsnaps ? in->nsnaps : 1, sizeof(*co));
	bool **kept = calloc(in->nsnaps ? in->nsnaps : 1, sizeof(*kept));
	int rc = co && kept ? 0 : -ENOMEM;

	for (unsigned i = 0; !rc && i < in->nsnaps; i++)
		co[i].s = in->snaps[i];
	/* one process at a time: the snaps come by pid */
	for (unsigned from = 0, to; !rc && from < in->nsnaps; from = to) {
		for (to = from + 1; to < in->nsnaps && in->snaps[to]->hdr.pid == in->snaps[from]->hdr.pid; )
			to++;
		rc = choose_topics(in, co, from, to, kept);
		for (unsigned i = from; !rc && i < to; i++)
			rc = build_ctx(in, &co[i], kept[i]);
	}
	if (!rc) {
		family(f, "flit_stat_contexts", "gauge",
		       "Live flit contexts whose counters file flit-stat read.");
		fprintf(f, "flit_stat_contexts %u\n", in->nsnaps);
		family(f, "flit_stat_stale_files", "gauge",
		       "Counters files whose process died without closing its context "
		       "(flit-stat --gc removes them).");
		fprintf(f, "flit_stat_stale_files %u\n", in->stale);
		write_contexts(f, in, co);
		if (in->nxdp)
			write_xdp(f, in);
	}
	for (unsigned i = 0; co && kept && i < in->nsnaps; i++) {
		for (size_t k = 0; k < co[i].n; k++)
			free(co[i].v[k].labels);
		free(co[i].v);
		free(kept[i]);
	}
	free(co);
	free(kept);
	return rc;
}

/* ---- the HTTP server -------------------------------------------------------- */

int prom_parse_addr(const char *s, struct prom_addr *a)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon, *port;
	char *end;
	unsigned long p;
	bool v6 = s[0] == '[';

	memset(a, 0, sizeof(*a));
	if (v6) {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = 0;
		port = close + 2;
	} else {
		colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= sizeof(host) || strchr(s, ':') != colon)
			return -EINVAL;
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = 0;
		port = colon + 1;
	}
	if (*port < '0' || *port > '9')
		return -EINVAL;
	errno = 0;
	p = strtoul(port, &end, 10);
	if (errno || *end || p > 65535)
		return -EINVAL;
	if (v6) {
		struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&a->ss;
		if (inet_pton(AF_INET6, host, &sa->sin6_addr) != 1)
			return -EINVAL;
		sa->sin6_family = AF_INET6;
		sa->sin6_port = htons((uint16_t)p);
		a->len = sizeof(*sa);
	} else {
		struct sockaddr_in *sa = (struct sockaddr_in *)&a->ss;
		if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
			return -EINVAL;
		sa->sin_family = AF_INET;
		sa->sin_port = htons((uint16_t)p);
		a->len = sizeof(*sa);
	}
	snprintf(a->text, sizeof(a->text), "%s%s%s:%lu", v6 ? "[" : "", host, v6 ? "]" : "", p);
	return 0;
}

static unsigned addr_port(const struct prom_addr *a)
{
	if (a->ss.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
	return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
}

int prom_listen(struct prom_addr *a, char *err, size_t len)
{
	int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
	unsigned port = addr_port(a);
	char *colon;

	if (fd < 0) {
		snprintf(err, len, "cannot make a socket for %s: %s%s", a->text, strerror(errno),
			 errno == EAFNOSUPPORT ? " (IPv6 disabled on this host?)" : "");
		return -1;
	}
	/* a restart may find the last run's connections in TIME_WAIT */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a->ss, a->len) < 0) {
		int e = errno;

		if (e == EADDRINUSE)
			snprintf(err, len, "cannot listen on %s: the address is in use "
				 "(another flit-stat --serve, or another server?)", a->text);
		else if (e == EACCES && port < 1024)
			snprintf(err, len, "cannot listen on %s: port %u is below 1024: that needs "
				 "CAP_NET_BIND_SERVICE (run as root, or pick a port >= 1024)",
				 a->text, port);
		else if (e == EADDRNOTAVAIL)
			snprintf(err, len, "cannot listen on %s: no interface of this host has "
				 "that address", a->text);
		else
			snprintf(err, len, "cannot listen on %s: %s", a->text, strerror(e));
		close(fd);
		return -1;
	}
	if (listen(fd, 64) < 0) {
		snprintf(err, len, "cannot listen on %s: %s", a->text, strerror(errno));
		close(fd);
		return -1;
	}
	a->len = sizeof(a->ss);
	if (!port && getsockname(fd, (struct sockaddr *)&a->ss, &a->len) == 0 &&
	    (colon = strrchr(a->text, ':')))
		snprintf(colon + 1, sizeof(a->text) - (size_t)(colon + 1 - a->text), "%u",
			 addr_port(a));
	return fd;
}

enum conn_state { CONN_FREE, CONN_READ, CONN_WRITE, CONN_DRAIN };

struct conn {
	int fd;
	enum conn_state state;
	uint64_t deadline_ms;
	char req[PROM_REQUEST_MAX + 1];
	size_t nreq;
	char *out;           /* response: head and body */
	size_t nout, sent;
	char peer[64];
};

static volatile sig_atomic_t serve_stop;

static void serve_on_signal(int sig)
{
	(void)sig;
	serve_stop = 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void conn_close(struct conn *c)
{
	close(c->fd);
	free(c->out);
	c->out = NULL;
	c->state = CONN_FREE;
}

/* The response into c->out: status, a body (for HEAD, the head alone). */
static void respond(struct conn *c, int status, const char *reason, const char *ctype,
		    const char *extra, const char *body, size_t blen, bool head_only)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f) {
		fprintf(f, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			"%sConnection: close\r\n\r\n", status, reason, ctype, blen, extra);
		if (!head_only)
			fwrite(body, 1, blen, f);
		if (fclose(f)) {
			free(buf);
			buf = NULL;
		}
	}
	if (!buf) {
		conn_close(c);
		return;
	}
	c->out = buf;
	c->nout = len;
	c->sent = 0;
	c->state = CONN_WRITE;
}

static void respond_text(struct conn *c, int status, const char *reason, const char *extra,
			 const char *text, bool head_only)
{
	respond(c, status, reason, "text/plain; charset=utf-8", extra, text, strlen(text),
		head_only);
}

/* A whole request head is in c->req: answer it. */
static void handle(struct conn *c, prom_body_fn body, void *arg, int verbose)
{
	static const char index_page[] =
		"<html><head><title>flit-stat</title></head><body>\n"
		"<h1>flit-stat</h1>\n"
		"<p>The counters of the flit processes of this host: "
		"<a href=\"/metrics\">/metrics</a>.</p>\n</body></html>\n";
	char method[16], target[1024], version[16];
	int status = 0;

	if (sscanf(c->req, "%15[A-Z] %1023[^ \r\n] %15[^ \r\n]", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7)) {
		respond_text(c, 400, "Bad Request", "", "not an HTTP/1.x request\n", false);
		status = 400;
		goto log;
	}
	bool head = !strcmp(method, "HEAD");
	char *q = strchr(target, '?');
	if (q)
		*q = 0;
	if (strcmp(method, "GET") && !head) {
		respond_text(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
			     "only GET (and HEAD) here\n", false);
		status = 405;
	} else if (!strcmp(target, "/metrics")) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		int rc = f ? body(arg, f) : -ENOMEM;

		if (f && fclose(f) && !rc)
			rc = -ENOMEM;
		if (rc < 0) {
			char msg[160];
			snprintf(msg, sizeof(msg), "flit-stat: cannot make the exposition: %s\n",
				 strerror(-rc));
			respond_text(c, 500, "Internal Server Error", "", msg, head);
			status = 500;
		} else {
			respond(c, 200, "OK", PROM_CONTENT_TYPE, "", buf, len, head);
			status = 200;
		}
		free(buf);
	} else if (!strcmp(target, "/")) {
		respond(c, 200, "OK", "text/html; charset=utf-8", "", index_page,
			sizeof(index_page) - 1, head);
		status = 200;
	} else {
		respond_text(c, 404, "Not Found", "", "not found: the counters are at /metrics\n", head);
		status = 404;
	}
log:
	if (verbose)
		fprintf(stderr, "%s: %s \"%.*s\" %d %zu\n", tool_name(), c->peer,
			(int)strcspn(c->req, "\r\n"), c->req, status, c->out ? c->nout : 0);
}

static void peer_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char h[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, h, sizeof(h));
		snprintf(buf, len, "[%s]:%u", h, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const void *)ss;
		inet_ntop(AF_INET, &s4->sin_addr, h, sizeof(h));
		snprintf(buf, len, "%s:%u", h, ntohs(s4->sin_port));
	}
}

static void conn_read(struct conn *c, prom_body_fn body, void *arg, int verbose)
{
	ssize_t n = recv(c->fd, c->req + c->nreq, PROM_REQUEST_MAX - c->nreq, 0);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->nreq += (size_t)n;
	c->req[c->nreq] = 0;
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		handle(c, body, arg, verbose);
	else if (c->nreq == PROM_REQUEST_MAX)
		respond_text(c, 431, "Request Header Fields Too Large", "",
			     "request head too large\n", false);
}

static void conn_write(struct conn *c)
{
	ssize_t n = send(c->fd, c->out + c->sent, c->nout - c->sent, MSG_NOSIGNAL);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->sent += (size_t)n;
	if (c->sent < c->nout)
		return;
	/* all out: end our side and read what the client still sends until it
	 * closes, so that closing with unread bytes (a request body) does not
	 * reset the connection under the response */
	shutdown(c->fd, SHUT_WR);
	c->state = CONN_DRAIN;
	c->deadline_ms = now_ms() + 1000;
}

static void conn_drain(struct conn *c)
{
	char buf[4096];
	ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		conn_close(c);
}

int prom_serve(int lfd, prom_body_fn body, void *arg, int verbose)
{
	static struct conn conns[PROM_MAX_CONNS];
	struct pollfd pfd[PROM_MAX_CONNS + 1];
	struct sigaction sa;
	sigset_t block, saved, orig;
	uint64_t accept_after = 0;
	int rc = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = serve_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* the signals are let in only inside ppoll(): none is lost between the
	 * check of serve_stop and the wait */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &saved);
	orig = saved;
	sigdelset(&orig, SIGINT);
	sigdelset(&orig, SIGTERM);

	while (!serve_stop) {
		uint64_t now = now_ms(), wait = UINT64_MAX;
		int idx[PROM_MAX_CONNS + 1], n = 0, nfree = 0;

		for (int i = 0; i < PROM_MAX_CONNS; i++) {
			struct conn *c = &conns[i];

			if (c->state == CONN_FREE) {
				nfree++;
				continue;
			}
			if (now >= c->deadline_ms) {
				if (verbose)
					fprintf(stderr, "%s: %s: timed out\n", tool_name(), c->peer);
				conn_close(c);
				nfree++;
				continue;
			}
			if (c->deadline_ms - now < wait)
				wait = c->deadline_ms - now;
			pfd[n].fd = c->fd;
			pfd[n].events = c->state == CONN_WRITE ? POLLOUT : POLLIN;
			idx[n++] = i;
		}
		/* when every slot is taken, new clients wait in the backlog (and
		 * for a moment after accept() ran out of file descriptors) */
		if (nfree && now < accept_after && accept_after - now < wait)
			wait = accept_after - now;
		if (nfree && now >= accept_after) {
			pfd[n].fd = lfd;
			pfd[n].events = POLLIN;
			idx[n++] = -1;
		}
		struct timespec ts = { (time_t)(wait / 1000), (long)(wait % 1000) * 1000000 };
		int r = ppoll(pfd, (nfds_t)n, wait == UINT64_MAX ? NULL : &ts, &orig);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		for (int k = 0; k < n && r > 0; k++) {
			if (!pfd[k].revents)
				continue;
			if (idx[k] >= 0) {
				struct conn *c = &conns[idx[k]];

				if (c->state == CONN_READ)
					conn_read(c, body, arg, verbose);
				else if (c->state == CONN_WRITE)
					conn_write(c);
				else
					conn_drain(c);
				continue;
			}
			for (int i = 0; i < PROM_MAX_CONNS; i++) {
				struct conn *c = &conns[i];
				struct sockaddr_storage ss;
				socklen_t sl = sizeof(ss);
				int fd;

				if (c->state != CONN_FREE)
					continue;
				fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (fd < 0) {
					if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
						tool_warn("accept: %s", strerror(errno));
						accept_after = now_ms() + 100;
					}
					break;
				}
				c->fd = fd;
				c->state = CONN_READ;
				c->nreq = 0;
				c->deadline_ms = now_ms() + PROM_CONN_TIMEOUT_MS;
				peer_text(&ss, c->peer, sizeof(c->peer));
			}
		}
	}
	for (int i = 0; i < PROM_MAX_CONNS; i++)
		if (conns[i].state != CONN_FREE)
			conn_close(&conns[i]);
	sigprocmask(SIG_SETMASK, &saved, NULL);
	return rc;
}
