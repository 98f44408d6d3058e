/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * flit timestamps: what an interface can stamp, NIC hardware stamping, the
 * NIC's PTP hardware clock (PHC) and its conversion to the host's clocks,
 * the transmit stamps of a publisher's datagrams, and what a context's
 * transport actually stamps.
 *
 * The clocks, and who uses which:
 *  - intervals measured by the tools (RTT/2, throughput): the TSC calibrated
 *    against CLOCK_MONOTONIC_RAW, named "tsc" (flit/clock.h; "monotonic_raw"
 *    where the TSC is not a clock);
 *  - flit_msg.send_ts_ns (source.timestamps), the library's receive stamp
 *    (receiver.timestamps), the kernel's software receive stamps
 *    (FLIT_MSGF_RECV_TS_KERNEL) and software transmit stamps
 *    (FLIT_TXTS_SOFTWARE): CLOCK_REALTIME, named "realtime";
 *  - NIC hardware receive stamps (FLIT_MSGF_RECV_TS_HW) and transmit stamps
 *    (FLIT_TXTS_HARDWARE): the raw time of the NIC's PHC, named "phc".  They
 *    compare with each other when the PHCs involved are one clock or are
 *    synchronised (ptp4l/phc2sys), and with the host's clocks only through
 *    flit_phc_sync() + flit_phc_to_host().
 * A one-way latency (a stamp taken on one host minus one taken on another)
 * only means something when both stamps come from the same clock: one host's
 * CLOCK_REALTIME, or PHC-synchronised NICs.
 *
 * Hardware stamps need a NIC with a PHC; on a device without one (veth, lo,
 * most virtual NICs) flit_hwts_enable() returns -EOPNOTSUPP and the udp
 * transport falls back to software stamps, which flit_ctx_ts_status() and
 * the tools report.
 *
 * Output structs start with `size_t sz`: set it (to sizeof) before the call;
 * the call fills that many bytes at most.
 */
#ifndef FLIT_TSTAMP_H
#define FLIT_TSTAMP_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <flit/clock.h>
#include <flit/flit.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- what an interface can stamp ----------------------------------------- */

struct flit_ts_info {
	size_t sz;
	char ifname[16];
	uint32_t so_timestamping;  /* SOF_TIMESTAMPING_* the device supports */
	int phc_index;             /* N of /dev/ptpN; -1: no PTP hardware clock */
	uint32_t tx_types;         /* bits 1 << HWTSTAMP_TX_* */
	uint32_t rx_filters;       /* bits 1 << HWTSTAMP_FILTER_* */
	bool sw_tx, sw_rx;         /* software transmit / receive stamps */
	bool hw_tx, hw_rx;         /* raw hardware transmit / receive stamps */
	size_t :0;
};

/* ETHTOOL_GET_TS_INFO of `ifname` (no privilege needed).  0, or -ENODEV
 * ("<if>: no such interface"), -EINVAL (bad arguments, out->sz unset), or
 * another -errno of the ioctl, with a trail. */
FLIT_API int flit_ts_info_get(const char *ifname, struct flit_ts_info *out);

/* One line for reports: "veth0: software tx+rx stamps; no hardware stamps;
 * no PTP hardware clock", "eth1: software tx+rx stamps; hardware tx+rx
 * (rx filters: all); PHC /dev/ptp0".  Copies into buf (NUL-terminated,
 * truncated to len) and returns the full length, or -EINVAL. */
FLIT_API int flit_ts_info_describe(const struct flit_ts_info *ti, char *buf,
				   size_t len);

/* ---- NIC hardware stamping ------------------------------------------------ */

#define FLIT_HWTS_RX 1u   /* stamp received packets (rx filter "all") */
#define FLIT_HWTS_TX 2u   /* stamp sent packets (tx type "on") */

struct flit_hwts {
	size_t sz;
	int tx_type;        /* HWTSTAMP_TX_* now in effect (read back) */
	int rx_filter;      /* HWTSTAMP_FILTER_* now in effect (read back) */
	int phc_index;      /* the device's PHC (/dev/ptpN) */
	bool changed;       /* this call changed the device's setting */
	size_t :0;
};

/* Make the NIC `ifname` stamp in hardware what `dirs` (FLIT_HWTS_*) asks
 * for: reads its setting (SIOCGHWTSTAMP) and, unless that already covers
 * `dirs`, sets it (SIOCSHWTSTAMP) and reads it back.  The setting belongs to
 * the device, not to the caller: it stays after the process ends, and other
 * users (ptp4l) see it; a setting that already covers `dirs` is left alone.
 * out may be NULL.  Returns:
 *   0            stamping on; *out says how
 *   -EOPNOTSUPP  "<if>: no hardware timestamping (driver refuses SIOCSHWTSTAMP)"
 *                (veth, lo, most virtual NICs), or the driver cannot do the
 *                direction asked for
 *   -ENODEV      "<if> has no PTP hardware clock" (stamps would not be
 *                convertible), or "<if>: no such interface"
 *   -EPERM       "<if>: setting hardware timestamping needs CAP_NET_ADMIN"
 *   -EINVAL      bad arguments
 * each with the trail (flit_errmsg()) saying so. */
FLIT_API int flit_hwts_enable(const char *ifname, unsigned dirs,
			      struct flit_hwts *out);

/* ---- PTP hardware clocks ----------------------------------------------------- */

typedef struct flit_phc flit_phc;

/* Open the PHC of `ifname` (/dev/ptpN from ETHTOOL_GET_TS_INFO) or /dev/ptpN
 * itself.  NULL + errno: ENODEV ("<if> has no PTP hardware clock", or no such
 * interface / device), EACCES (the device's permissions), ... with a trail. */
FLIT_API flit_phc *flit_phc_open(const char *ifname);
FLIT_API flit_phc *flit_phc_open_index(int index);
FLIT_API void flit_phc_close(flit_phc *phc);
FLIT_API int flit_phc_index(const flit_phc *phc);
/* The dynamic clock id (FD_TO_CLOCKID) for clock_gettime(). */
FLIT_API clockid_t flit_phc_clockid(const flit_phc *phc);
/* The PHC's time now, ns.  0 or -errno. */
FLIT_API int flit_phc_now(const flit_phc *phc, uint64_t *ns);

/* How a PHC/host pair was measured, best first. */
enum flit_phc_method {
	FLIT_PHC_NONE = 0,
	FLIT_PHC_PRECISE = 1,   /* PTP_SYS_OFFSET_PRECISE: a cross-timestamp by the device */
	FLIT_PHC_EXTENDED = 2,  /* PTP_SYS_OFFSET_EXTENDED: host reads around each PHC read by the driver */
	FLIT_PHC_BASIC = 3,     /* PTP_SYS_OFFSET: host reads around the driver's gettime */
	FLIT_PHC_SAMPLES = 4,   /* flit_phc_sync_samples() on the caller's samples */
};

/* One PHC reading bracketed by two host clock readings (ns). */
struct flit_phc_sample {
	uint64_t sys_before;
	uint64_t phc;
	uint64_t sys_after;
};

/* A PHC reading and the host clock's at the same instant, and the rate
 * between the two clocks.  Zero it before the first flit_phc_sync(); keep
 * it across calls to have the rate measured. */
struct flit_phc_sync {
	size_t sz;
	clockid_t host;          /* CLOCK_REALTIME or CLOCK_MONOTONIC_RAW */
	int method;              /* enum flit_phc_method of the last sync */
	unsigned samples;        /* samples taken (the best one is kept) */
	uint64_t phc_ns;         /* reference: the PHC ... */
	uint64_t host_ns;        /* ... and the host clock at that instant */
	uint64_t uncertainty_ns; /* +- (half the best bracket; 0: PRECISE) */
	double rate;             /* host ns per PHC ns; 1.0 until two syncs */
	size_t :0;
};

/* Measure the PHC against `host` (CLOCK_REALTIME or CLOCK_MONOTONIC_RAW)
 * with PTP_SYS_OFFSET_PRECISE, else _EXTENDED, else PTP_SYS_OFFSET, taking
 * `samples` readings (1..25; 0: 9) and keeping the one with the smallest
 * bracket.  If *s holds an earlier sync of the same clocks at least 10 ms
 * before, s->rate becomes the ratio of the two intervals.  0, or -EINVAL,
 * -EOPNOTSUPP (no method works), -errno. */
FLIT_API int flit_phc_sync(flit_phc *phc, clockid_t host, unsigned samples,
			   struct flit_phc_sync *s);

/* The same from the caller's samples (pure arithmetic: no device).  Samples
 * whose bracket is reversed are ignored; -EINVAL if none is usable. */
FLIT_API int flit_phc_sync_samples(const struct flit_phc_sample *v, unsigned n,
				   clockid_t host, struct flit_phc_sync *s);

/* host - phc at the reference instant, ns. */
static inline int64_t flit_phc_offset_ns(const struct flit_phc_sync *s)
{
	return (int64_t)(s->host_ns - s->phc_ns);
}

/* A PHC time (e.g. a hardware stamp) on the host clock of the sync.  The
 * error grows with the distance from the reference by the rate's error
 * (sync again every second or so on a clock nobody disciplines). */
static inline uint64_t flit_phc_to_host(const struct flit_phc_sync *s, uint64_t phc_ns)
{
	/* integer distance first: a double holds ns since 1970 to 256 ns only */
	int64_t d = (int64_t)(phc_ns - s->phc_ns);
	double skew = (double)d * (s->rate - 1.0);

	return s->host_ns + (uint64_t)d + (uint64_t)(int64_t)(skew < 0 ? skew - 0.5 : skew + 0.5);
}

/* A host time on the PHC (the inverse). */
static inline uint64_t flit_phc_from_host(const struct flit_phc_sync *s, uint64_t host_ns)
{
	int64_t d = (int64_t)(host_ns - s->host_ns);
	double skew = (double)d / s->rate - (double)d;

	return s->phc_ns + (uint64_t)d + (uint64_t)(int64_t)(skew < 0 ? skew - 0.5 : skew + 0.5);
}

/* A PHC time as a TSC reading, for a sync against CLOCK_MONOTONIC_RAW and a
 * TSC calibrated against that clock (flit_tsc_calibrate()). */
static inline uint64_t flit_phc_to_tsc(const struct flit_phc_sync *s,
				       const struct flit_tsc *c, uint64_t phc_ns)
{
	int64_t d = (int64_t)(flit_phc_to_host(s, phc_ns) - c->ref_ns);
	double t = (double)d / c->ns_per_tick;

	return c->ref_tick + (uint64_t)(int64_t)(t < 0 ? t - 0.5 : t + 0.5);
}

/* ---- transmit stamps of a publisher's datagrams ---------------------------- */

#define FLIT_TXTS_SOFTWARE 1u  /* CLOCK_REALTIME, as the datagram was handed to the device */
#define FLIT_TXTS_HARDWARE 2u  /* the NIC's PHC, as the packet left */

#define FLIT_TX_STAMP_LATEST UINT64_MAX

struct flit_tx_stamp {
	size_t sz;
	uint64_t seq;        /* first message the datagram carried (a session
			      * of several topics: the message asked for,
			      * in its topic's numbers) */
	uint32_t count;      /* messages in it */
	uint32_t flags;      /* FLIT_TXTS_* */
	uint64_t ts_ns;      /* the stamp */
	size_t :0;
};

/* The transmit stamp of the datagram that carried message `seq` of `pub`
 * (FLIT_TX_STAMP_LATEST: of the newest datagram stamped so far; in a session
 * of several topics, of the publisher's newest message), on a udp
 * source with context.udp.tx_timestamps on.  Reads the stamps the kernel
 * has queued (a system call), so call it off the measured path: a software
 * stamp is there when the send returns, a hardware one a few microseconds
 * later.  The last 256 datagrams are remembered.  Returns 0, or
 *   -EAGAIN      that datagram's stamp has not come back (yet)
 *   -ENOENT      no such datagram among the last 256 (not sent yet, too
 *                old, or it was not sent through the stamping socket)
 *   -EOPNOTSUPP  stamps are off for this publisher or its transport has none
 *   -EINVAL      bad arguments. */
FLIT_API int flit_pub_tx_stamp(flit_pub *pub, uint64_t seq, struct flit_tx_stamp *out);

/* ---- what a context's transport stamps ----------------------------------------- */

enum flit_ts_kind {
	FLIT_TS_NONE = 0,
	FLIT_TS_SOFTWARE = 1,
	FLIT_TS_HARDWARE = 2,
};

struct flit_ts_status {
	size_t sz;
	int rx_asked, rx;    /* enum flit_ts_kind: receive stamps configured / given */
	int tx_asked, tx;    /* transmit stamps of its sources: configured / given */
	int phc_index;       /* the interface's PHC, -1: none or no interface */
	char ifname[16];     /* context.udp.interface ("" if none) */
	char why[256];       /* hardware asked for and not given: why ("" else) */
	size_t :0;
};

/* What `transport` ("udp") stamps in this context (open: it opens with the
 * first publisher or subscriber using it).  0, -ENOENT (not open),
 * -EOPNOTSUPP (the transport stamps nothing), -EINVAL. */
FLIT_API int flit_ctx_ts_status(const flit_ctx *ctx, const char *transport,
				struct flit_ts_status *out);

/* "none", "software", "hardware" (static string; "?" for other values). */
FLIT_API const char *flit_ts_kind_name(int kind);

#ifdef __cplusplus
}
#endif
#endif /* FLIT_TSTAMP_H */
