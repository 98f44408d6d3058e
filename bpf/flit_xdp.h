/* SPDX-License-Identifier: BSD-2-Clause */
/* Layouts shared by the XDP program and user space (loader, xdp transport).
 * Bump FLIT_XDP_VERSION whenever a map layout or meaning changes: the loader
 * refuses to reuse a pinned program of another version. */
#ifndef FLIT_XDP_H
#define FLIT_XDP_H

#define FLIT_XDP_VERSION 1

/* per-CPU counters, index = enum flit_xdp_counter */
enum flit_xdp_counter {
	FLIT_XDP_PASSED = 0,     /* handed to the kernel stack */
	FLIT_XDP_REDIRECTED,     /* steered to an AF_XDP socket */
	FLIT_XDP_FILTERED,       /* dropped: topic nobody here wants */
	FLIT_XDP_MALFORMED,      /* dropped: flit frame that fails checks */
	FLIT_XDP_NO_SOCKET,      /* flit flow without a bound socket */
	FLIT_XDP_COUNTERS,
};

#endif
