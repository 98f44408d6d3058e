/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * flit-stat's Prometheus side (tool code, not the library): the counters
 * of counters files (userspace/stats.h) and of flit's XDP program in the
 * Prometheus text exposition format, version 0.0.4 (what node_exporter's
 * textfile collector reads), and a small HTTP/1.1 server that answers
 * GET /metrics with it.  Metric names and labels are in docs/STATS.md.
 *
 * Cardinality.  Publisher and subscriber rows are per topic, and a process
 * may have 65536 of them per context: past `max_topics` rows per process
 * the rest are summed into one series per context and role (per transport
 * for publishers) with topic="_other".  The rows kept are the oldest (by
 * the row's creation time), so a topic keeps its series for as long as it
 * lives.  _other is a sum over a changing set of rows: it drops when one
 * of them closes.
 *
 * The server is single-threaded: one ppoll() over the listening socket and
 * at most PROM_MAX_CONNS connections, each with a deadline, one request
 * per connection (Connection: close).  A slow or silent client costs a
 * slot until its deadline, never the other scrapes.
 */
#ifndef FLIT_PROM_H
#define FLIT_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "stats.h"
#include "xdp/xdp_prog.h"

#define PROM_CONTENT_TYPE       "text/plain; version=0.0.4; charset=utf-8"
#define PROM_MAX_TOPICS_DEFAULT 1000
#define PROM_OTHER_TOPIC        "_other"

/* One interface's XDP counters. */
struct prom_xdp {
	const char *ifname;
	const char *netns;          /* NULL: flit-stat's own namespace */
	bool up;                    /* c[] was read (else only flit_xdp_up 0) */
	uint64_t c[FLIT_XDP_COUNTERS];
};

struct prom_input {
	struct flit_stats_snap *const *snaps; /* live contexts, by pid then context */
	unsigned nsnaps;
	unsigned stale;             /* stale counters files seen */
	const struct prom_xdp *xdp;
	unsigned nxdp;
	const char *topic;          /* fnmatch(3) filter of topic rows; NULL: all */
	unsigned max_topics;        /* publisher and subscriber rows per process */
	uint64_t now_ns;            /* CLOCK_MONOTONIC, for the refresh age */
};

/* Write the exposition of `in` to f.  0, or -ENOMEM (nothing written);
 * write errors are f's (ferror). */
int prom_write(FILE *f, const struct prom_input *in);

/* Write s as a label value: backslash, double quote and newline escaped,
 * bytes that are not UTF-8 replaced by U+FFFD (label values must be UTF-8). */
void prom_label_value(FILE *f, const char *s);

/* ---- the HTTP server -------------------------------------------------------- */

#define PROM_MAX_CONNS       32
#define PROM_REQUEST_MAX     8192    /* request line and headers, bytes */
#define PROM_CONN_TIMEOUT_MS 10000   /* accept to last byte out */

struct prom_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	char text[64];              /* "127.0.0.1:9470", "[::1]:9470" */
};

/* "IPv4:PORT" or "[IPv6]:PORT", numeric, port 0..65535 (0: any free
 * port).  0, or -EINVAL. */
int prom_parse_addr(const char *s, struct prom_addr *a);

/* A listening socket on a (its text then has the port bound).  The fd, or
 * -1 with what went wrong (and what to do about it) in err. */
int prom_listen(struct prom_addr *a, char *err, size_t len);

/* Makes the body of GET /metrics into f: 0, or -errno (the client gets a
 * 500 saying so). */
typedef int (*prom_body_fn)(void *arg, FILE *f);

/* Serve on fd until SIGINT or SIGTERM (handlers installed here): GET and
 * HEAD of /metrics (the exposition), / (a pointer to it); 404 for any other
 * path, 405 for other methods, 400 for what is not HTTP/1.x, 431 past
 * PROM_REQUEST_MAX.  verbose: a line on stderr per request.  Returns 0
 * when stopped by a signal, or -errno (poll failed). */
int prom_serve(int fd, prom_body_fn body, void *arg, int verbose);

#endif /* FLIT_PROM_H */
