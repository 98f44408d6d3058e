/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The datagram: what every datagram path of flit hands to the session
 * layer and takes from it, whatever moves it (kernel sockets and io_uring
 * in transports/udp/, AF_XDP in transports/xdp/), and the receive-side
 * impairment that can sit between any path and the session layer in tests
 * (loss, duplication, reordering, seeded): the "wrapping transport" of
 * DESIGN.md, not an #ifdef in a real path.
 *
 * The paths depend on this header and on nothing of each other; the core's
 * configuration checks context.udp.impair with flit_dgram_impair_parse().
 */
#ifndef FLIT_DGRAM_H
#define FLIT_DGRAM_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct flit_dgram {
	void *buf;
	uint32_t len;
	struct sockaddr_in addr;  /* recv: sender; send: destination
				   * (sin_family 0: the connected peer) */
	uint64_t rx_ts_ns;        /* CLOCK_REALTIME software stamp, 0 none */
	uint64_t rx_ts_hw_ns;     /* NIC (PHC) raw hardware stamp, 0 none */
};

/* A path's receive: up to n datagrams into d[0..ret) without blocking,
 * views valid until the next call; 0 none waiting, or -errno. */
typedef int (*flit_dgram_recv_fn)(void *arg, struct flit_dgram *d, unsigned n);

/* ---- impairment ------------------------------------------------------------ */

/* Receive-side impairment (all zero: off).  Probabilities in basis points
 * (1/100 %, 0..10000), per received datagram. */
struct flit_dgram_impair {
	uint32_t loss_bp;      /* drop */
	uint32_t dup_bp;       /* deliver twice (the second is a copy) */
	uint32_t reorder_bp;   /* hold back and deliver after 1..8 later ones
				* (up to 8 held at once; released anyway after
				* a few recv calls in which nothing arrived) */
	uint64_t seed;         /* xorshift64* seed; 0 is a seed like any other */
};

struct flit_impair_stats {
	uint64_t dropped, duplicated, reordered;
};

struct flit_impair;

/* Parse "loss=5%,dup=1%,reorder=2.5%,seed=7" (percent 0..100 with up to
 * two decimals, '%' optional; seed a decimal integer; any subset, any
 * order, each key once).  0, or -EINVAL with a trail naming the bad item
 * (*out untouched). */
int flit_dgram_impair_parse(const char *s, struct flit_dgram_impair *out);
/* true if cfg impairs anything */
bool flit_dgram_impair_on(const struct flit_dgram_impair *cfg);

/* An impairment for a path that fetches up to batch datagrams of at most
 * dgram_max bytes per call.  0 or -errno (-EINVAL above 100 %). */
int flit_impair_open(const struct flit_dgram_impair *cfg, unsigned batch, unsigned dgram_max,
		     struct flit_impair **out);
void flit_impair_close(struct flit_impair *im);
/* Receive through the impairment: fetches from fn(arg, ..., batch) when
 * its last batch is used up, and gives up to n datagrams with the same
 * contract as fn (views valid until the next call; 0: nothing waiting). */
int flit_impair_recv(struct flit_impair *im, flit_dgram_recv_fn fn, void *arg,
		     struct flit_dgram *d, unsigned n);
void flit_impair_stats(const struct flit_impair *im, struct flit_impair_stats *out);
/* "impaired (loss 5.00%, dup 0.00%, reorder 0.00%, seed 7)" */
const char *flit_impair_describe(const struct flit_impair *im);

#endif /* FLIT_DGRAM_H */
