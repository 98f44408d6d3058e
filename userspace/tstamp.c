// SPDX-License-Identifier: BSD-2-Clause
/*
 * Timestamping: interface capabilities (ETHTOOL_GET_TS_INFO), NIC hardware
 * stamping (SIOCGHWTSTAMP/SIOCSHWTSTAMP), PTP hardware clocks and their
 * offset to the host's clocks, and the kernel's transmit stamps of a UDP
 * socket.  See include/flit/tstamp.h and userspace/txts.h.
 *
 * Nothing here is on a data path: the transmit stamps are read from the
 * error queue by the service or when the application asks.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/ethtool.h>
#include <linux/net_tstamp.h>
#include <linux/ptp_clock.h>
#include <linux/sockios.h>

#include <flit/tstamp.h>

#include "codec.h"
#include "error.h"
#include "txts.h"

/* uapi 6.1 has all three offset ioctls; older headers may not. */
#ifndef PTP_SYS_OFFSET_PRECISE
#define PTP_SYS_OFFSET_PRECISE _IOWR(PTP_CLK_MAGIC, 8, struct ptp_sys_offset_precise)
#endif
#ifndef PTP_SYS_OFFSET_EXTENDED
#define PTP_SYS_OFFSET_EXTENDED _IOWR(PTP_CLK_MAGIC, 9, struct ptp_sys_offset_extended)
#endif
/* Kernel 6.12 turned ptp_sys_offset_extended.rsv[0] into `clockid` (the host
 * clock of the bracketing reads: REALTIME, MONOTONIC or MONOTONIC_RAW);
 * uapi 6.1 still calls it rsv[0].  Older kernels refuse a non-zero value
 * with EINVAL, and we then bracket with CLOCK_REALTIME. */
#define PTP_EXT_CLOCKID(x) ((x)->rsv[0])
#ifndef SOF_TIMESTAMPING_OPT_TSONLY
#define SOF_TIMESTAMPING_OPT_TSONLY (1 << 11)
#endif
#ifndef SO_EE_ORIGIN_TIMESTAMPING
#define SO_EE_ORIGIN_TIMESTAMPING 4
#endif
#ifndef SCM_TSTAMP_SND
#define SCM_TSTAMP_SND 0
#endif
#ifndef IPV6_RECVERR
#define IPV6_RECVERR 25
#endif
/* A dynamic POSIX clock for a character device fd (kernel's CLOCKFD). */
#define FD_TO_CLOCKID(fd) ((clockid_t)((~(unsigned)(fd) << 3) | 3u))

#define NS 1000000000ull
#define PHC_SAMPLES_DEFAULT 9u
#define RATE_MIN_GAP_NS 10000000ull   /* 10 ms between syncs to measure a rate */
#define RATE_MAX_DEV 0.01             /* beyond 1 %: a stepped clock, not a rate */

/* SCM_TIMESTAMPING and struct sock_extended_err, declared here (as
 * transports/udp/udp_io.c does) to keep linux/errqueue.h's struct timespec
 * out of the way of libc's. */
struct scm_ts3 {
	struct timespec ts[3];
};

struct ext_err {
	uint32_t ee_errno;
	uint8_t ee_origin, ee_type, ee_code, ee_pad;
	uint32_t ee_info;
	uint32_t ee_data;
};

/* ---- helpers -------------------------------------------------------------- */

static bool out_ok(const void *out, size_t sz, size_t min)
{
	return out && sz >= min;
}

static uint64_t ts_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * NS + (uint64_t)t->tv_nsec;
}

static uint64_t ptp_ns(const struct ptp_clock_time *t)
{
	return (uint64_t)t->sec * NS + t->nsec;
}

/* 0 if ifname names an interface, else -ENODEV/-EINVAL with a trail. */
static int check_ifname(const char *what, const char *ifname)
{
	if (!ifname || !*ifname)
		return flit_err(EINVAL, "%s: no interface name", what);
	if (strlen(ifname) >= IFNAMSIZ)
		return flit_err(ENODEV, "%s: %.40s...: no such interface (names are at most %d bytes)",
				what, ifname, IFNAMSIZ - 1);
	if (!if_nametoindex(ifname))
		return flit_err(ENODEV, "%s: %s: no such interface", what, ifname);
	return 0;
}

/* An ioctl on the interface through a throw-away socket: 0 or -errno
 * (errno kept for the caller's message). */
static int if_ioctl(const char *ifname, unsigned long req, void *data)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int r = 0;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = data;
	if (ioctl(fd, req, &ifr) < 0)
		r = -errno;
	close(fd);
	errno = -r;
	return r;
}

/* ---- interface capabilities ------------------------------------------------- */

int flit_ts_info_get(const char *ifname, struct flit_ts_info *out)
{
	struct ethtool_ts_info ti = { .cmd = ETHTOOL_GET_TS_INFO };
	struct flit_ts_info v;
	int r;

	if (!out_ok(out, out ? out->sz : 0, sizeof(size_t)))
		return flit_err(EINVAL, "timestamping info: no result struct (or its sz unset)");
	if ((r = check_ifname("timestamping info", ifname)))
		return r;
	if ((r = if_ioctl(ifname, SIOCETHTOOL, &ti)))
		return flit_err(-r, "timestamping info: %s: ETHTOOL_GET_TS_INFO: %s", ifname, strerror(-r));
	memset(&v, 0, sizeof(v));
	snprintf(v.ifname, sizeof(v.ifname), "%s", ifname);
	v.so_timestamping = ti.so_timestamping;
	v.phc_index = ti.phc_index;
	v.tx_types = ti.tx_types;
	v.rx_filters = ti.rx_filters;
	v.sw_tx = ti.so_timestamping & SOF_TIMESTAMPING_TX_SOFTWARE;
	v.sw_rx = ti.so_timestamping & SOF_TIMESTAMPING_RX_SOFTWARE;
	v.hw_tx = (ti.so_timestamping & SOF_TIMESTAMPING_TX_HARDWARE) &&
		  (ti.so_timestamping & SOF_TIMESTAMPING_RAW_HARDWARE) &&
		  (ti.tx_types & (1u << HWTSTAMP_TX_ON));
	v.hw_rx = (ti.so_timestamping & SOF_TIMESTAMPING_RX_HARDWARE) &&
		  (ti.so_timestamping & SOF_TIMESTAMPING_RAW_HARDWARE) &&
		  (ti.rx_filters & ~(1u << HWTSTAMP_FILTER_NONE));
	v.sz = out->sz < sizeof(v) ? out->sz : sizeof(v);
	memcpy(out, &v, v.sz);
	return 0;
}

static const char *const rx_filter_names[] = {
	[HWTSTAMP_FILTER_NONE] = "none",
	[HWTSTAMP_FILTER_ALL] = "all",
	[HWTSTAMP_FILTER_SOME] = "some",
	[HWTSTAMP_FILTER_PTP_V1_L4_EVENT] = "ptpv1-l4-event",
	[HWTSTAMP_FILTER_PTP_V1_L4_SYNC] = "ptpv1-l4-sync",
	[HWTSTAMP_FILTER_PTP_V1_L4_DELAY_REQ] = "ptpv1-l4-delay-req",
	[HWTSTAMP_FILTER_PTP_V2_L4_EVENT] = "ptpv2-l4-event",
	[HWTSTAMP_FILTER_PTP_V2_L4_SYNC] = "ptpv2-l4-sync",
	[HWTSTAMP_FILTER_PTP_V2_L4_DELAY_REQ] = "ptpv2-l4-delay-req",
	[HWTSTAMP_FILTER_PTP_V2_L2_EVENT] = "ptpv2-l2-event",
	[HWTSTAMP_FILTER_PTP_V2_L2_SYNC] = "ptpv2-l2-sync",
	[HWTSTAMP_FILTER_PTP_V2_L2_DELAY_REQ] = "ptpv2-l2-delay-req",
	[HWTSTAMP_FILTER_PTP_V2_EVENT] = "ptpv2-event",
	[HWTSTAMP_FILTER_PTP_V2_SYNC] = "ptpv2-sync",
	[HWTSTAMP_FILTER_PTP_V2_DELAY_REQ] = "ptpv2-delay-req",
	[HWTSTAMP_FILTER_NTP_ALL] = "ntp-all",
};

int flit_ts_info_describe(const struct flit_ts_info *ti, char *buf, size_t len)
{
	char f[160] = "";
	size_t fl = 0;

	if (!ti || (!buf && len))
		return flit_err(EINVAL, "timestamping info: describe: bad arguments");
	for (unsigned i = 1; i < sizeof(rx_filter_names) / sizeof(rx_filter_names[0]); i++)
		if ((ti->rx_filters & (1u << i)) && fl < sizeof(f))
			fl += (size_t)snprintf(f + fl, sizeof(f) - fl, "%s%s", fl ? "," : "",
					       rx_filter_names[i] ? rx_filter_names[i] : "?");
	char sw[32], hw[220], phc[32];
	if (ti->sw_tx || ti->sw_rx)
		snprintf(sw, sizeof(sw), "software %s%s%s stamps", ti->sw_tx ? "tx" : "",
			 ti->sw_tx && ti->sw_rx ? "+" : "", ti->sw_rx ? "rx" : "");
	else
		snprintf(sw, sizeof(sw), "no software stamps");
	if (ti->hw_tx || ti->hw_rx)
		snprintf(hw, sizeof(hw), "hardware %s%s%s%s%s%s", ti->hw_tx ? "tx" : "",
			 ti->hw_tx && ti->hw_rx ? "+" : "", ti->hw_rx ? "rx" : "",
			 ti->hw_rx ? " (rx filters: " : "", ti->hw_rx ? f : "", ti->hw_rx ? ")" : "");
	else
		snprintf(hw, sizeof(hw), "no hardware stamps");
	if (ti->phc_index >= 0)
		snprintf(phc, sizeof(phc), "PHC /dev/ptp%d", ti->phc_index);
	else
		snprintf(phc, sizeof(phc), "no PTP hardware clock");
	return snprintf(buf, len, "%s: %s; %s; %s", ti->ifname, sw, hw, phc);
}

/* ---- hardware stamping ---------------------------------------------------------- */

static bool hwts_covers(const struct hwtstamp_config *c, unsigned dirs)
{
	if ((dirs & FLIT_HWTS_TX) && c->tx_type != HWTSTAMP_TX_ON &&
	    c->tx_type != HWTSTAMP_TX_ONESTEP_SYNC && c->tx_type != HWTSTAMP_TX_ONESTEP_P2P)
		return false;
	/* every packet: only "all" will do (PTP-only filters stamp PTP) */
	if ((dirs & FLIT_HWTS_RX) && c->rx_filter != HWTSTAMP_FILTER_ALL)
		return false;
	return true;
}

int flit_hwts_enable(const char *ifname, unsigned dirs, struct flit_hwts *out)
{
	struct flit_ts_info ti = { .sz = sizeof(ti) };
	struct hwtstamp_config cur = { 0 }, want;
	bool have_cur, changed = false;
	int r;

	if (out && out->sz < sizeof(size_t))
		return flit_err(EINVAL, "hardware timestamps: result struct without its sz");
	if (!dirs || (dirs & ~(FLIT_HWTS_RX | FLIT_HWTS_TX)))
		return flit_err(EINVAL, "hardware timestamps: bad directions 0x%x (FLIT_HWTS_RX|FLIT_HWTS_TX)", dirs);
	if ((r = check_ifname("hardware timestamps", ifname)))
		return r;
	/* What the device says it can do (no privilege needed). */
	if ((r = flit_ts_info_get(ifname, &ti)))
		return r;

	have_cur = if_ioctl(ifname, SIOCGHWTSTAMP, &cur) == 0;
	if (!have_cur || !hwts_covers(&cur, dirs)) {
		want = have_cur ? cur : (struct hwtstamp_config){ 0 };
		want.flags = 0;
		if (dirs & FLIT_HWTS_TX)
			want.tx_type = HWTSTAMP_TX_ON;
		if (dirs & FLIT_HWTS_RX)
			want.rx_filter = HWTSTAMP_FILTER_ALL;
		r = if_ioctl(ifname, SIOCSHWTSTAMP, &want);
		if (r == -EPERM || r == -EACCES) {
			/* dev_ioctl checks the capability before the driver: a
			 * device that cannot stamp at all is told as such */
			if (!ti.hw_tx && !ti.hw_rx && ti.phc_index < 0)
				return flit_err(EOPNOTSUPP, "hardware timestamps: %s: no hardware timestamping "
						"(driver refuses SIOCSHWTSTAMP; ethtool lists software modes only)",
						ifname);
			return flit_err(EPERM, "hardware timestamps: %s: setting hardware timestamping "
					"needs CAP_NET_ADMIN (SIOCSHWTSTAMP: %s)", ifname, strerror(-r));
		}
		if (r == -EOPNOTSUPP || r == -ENOTTY || r == -EINVAL)
			return flit_err(EOPNOTSUPP, "hardware timestamps: %s: no hardware timestamping "
					"(driver refuses SIOCSHWTSTAMP)", ifname);
		if (r == -ERANGE)
			return flit_err(EOPNOTSUPP, "hardware timestamps: %s: the driver cannot stamp %s "
					"(SIOCSHWTSTAMP: %s)", ifname,
					dirs == FLIT_HWTS_TX ? "sent packets" :
					dirs == FLIT_HWTS_RX ? "every received packet" :
					"sent and every received packet", strerror(-r));
		if (r)
			return flit_err(-r, "hardware timestamps: %s: SIOCSHWTSTAMP: %s", ifname, strerror(-r));
		changed = true;
		/* the driver writes back what it did (it may widen the rx
		 * filter); a second read says what is in effect */
		cur = want;
		if (if_ioctl(ifname, SIOCGHWTSTAMP, &cur))
			cur = want;
		if (!hwts_covers(&cur, dirs))
			return flit_err(EOPNOTSUPP, "hardware timestamps: %s: the driver took SIOCSHWTSTAMP "
					"but stamps %s (tx type %d, rx filter %d)", ifname,
					(dirs & FLIT_HWTS_RX) && cur.rx_filter != HWTSTAMP_FILTER_ALL ?
					"not every received packet" : "no sent packet",
					cur.tx_type, cur.rx_filter);
	}
	if (ti.phc_index < 0)
		return flit_err(ENODEV, "hardware timestamps: %s has no PTP hardware clock "
				"(its stamps could not be compared with any clock)", ifname);
	if (out) {
		struct flit_hwts v = { .tx_type = cur.tx_type, .rx_filter = cur.rx_filter,
				       .phc_index = ti.phc_index, .changed = changed };
		v.sz = out->sz < sizeof(v) ? out->sz : sizeof(v);
		memcpy(out, &v, v.sz);
	}
	return 0;
}

/* ---- PTP hardware clocks --------------------------------------------------------- */

struct flit_phc {
	int fd;
	int index;
	clockid_t clk;
	bool no_precise, no_extended, no_ext_clockid; /* what the driver refused */
};

flit_phc *flit_phc_open_index(int index)
{
	char path[32];
	struct stat st;
	flit_phc *p;
	int fd;

	if (index < 0)
		return flit_err_null(ENODEV, "PHC: no PTP hardware clock (index %d)", index);
	snprintf(path, sizeof(path), "/dev/ptp%d", index);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		return flit_err_null(e == ENOENT ? ENODEV : e, "PHC: %s: %s", path, strerror(e));
	}
	if (fstat(fd, &st) || !S_ISCHR(st.st_mode)) {
		close(fd);
		return flit_err_null(ENODEV, "PHC: %s is not a character device", path);
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		close(fd);
		return flit_err_null(ENOMEM, "PHC: out of memory");
	}
	p->fd = fd;
	p->index = index;
	p->clk = FD_TO_CLOCKID(fd);
	struct timespec t;
	if (clock_gettime(p->clk, &t)) {
		int e = errno;
		flit_phc_close(p);
		return flit_err_null(e, "PHC: %s: clock_gettime: %s", path, strerror(e));
	}
	return p;
}

flit_phc *flit_phc_open(const char *ifname)
{
	struct flit_ts_info ti = { .sz = sizeof(ti) };
	int r;

	if ((r = check_ifname("PHC", ifname)) || (r = flit_ts_info_get(ifname, &ti)))
		return flit_null(-r);
	if (ti.phc_index < 0)
		return flit_err_null(ENODEV, "PHC: %s has no PTP hardware clock", ifname);
	flit_phc *p = flit_phc_open_index(ti.phc_index);
	if (!p) {
		int e = errno;
		flit_err_wrap(e, "PHC of %s", ifname);
		return flit_null(e);
	}
	return p;
}

void flit_phc_close(flit_phc *phc)
{
	if (!phc)
		return;
	close(phc->fd);
	free(phc);
}

int flit_phc_index(const flit_phc *phc)
{
	return phc ? phc->index : -1;
}

clockid_t flit_phc_clockid(const flit_phc *phc)
{
	return phc ? phc->clk : (clockid_t)-1;
}

int flit_phc_now(const flit_phc *phc, uint64_t *ns)
{
	struct timespec t;

	if (!phc || !ns)
		return flit_err(EINVAL, "PHC: read: bad arguments");
	if (clock_gettime(phc->clk, &t))
		return flit_err(errno, "PHC: /dev/ptp%d: clock_gettime: %s", phc->index, strerror(errno));
	*ns = ts_ns(&t);
	return 0;
}

static uint64_t clock_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return ts_ns(&t);
}

/* The best (narrowest) of n brackets, as a sample: its index, or -1. */
static int best_sample(const struct flit_phc_sample *v, unsigned n)
{
	int best = -1;
	uint64_t w = UINT64_MAX;

	for (unsigned i = 0; i < n; i++)
		if (v[i].sys_after >= v[i].sys_before && v[i].phc &&
		    v[i].sys_after - v[i].sys_before < w) {
			w = v[i].sys_after - v[i].sys_before;
			best = (int)i;
		}
	return best;
}

/* Fill *s with a new reference (phc, host, uncertainty), measuring the rate
 * against the previous one when it is of the same clocks and far enough. */
static void sync_set(struct flit_phc_sync *s, clockid_t host, int method, unsigned samples,
		     uint64_t phc, uint64_t hostns, uint64_t unc)
{
	struct flit_phc_sync v = { .host = host, .method = method, .samples = samples,
				   .phc_ns = phc, .host_ns = hostns, .uncertainty_ns = unc,
				   .rate = 1.0 };
	size_t sz = s->sz;

	if (sz >= offsetof(struct flit_phc_sync, rate) + sizeof(double) &&
	    s->phc_ns && s->host == host && phc > s->phc_ns &&
	    phc - s->phc_ns >= RATE_MIN_GAP_NS && hostns > s->host_ns) {
		double rate = (double)(hostns - s->host_ns) / (double)(phc - s->phc_ns);
		if (rate > 1.0 - RATE_MAX_DEV && rate < 1.0 + RATE_MAX_DEV)
			v.rate = rate;
	}
	v.sz = sz < sizeof(v) ? sz : sizeof(v);
	memcpy(s, &v, v.sz);
}

int flit_phc_sync_samples(const struct flit_phc_sample *v, unsigned n, clockid_t host,
			  struct flit_phc_sync *s)
{
	if (!s || s->sz < offsetof(struct flit_phc_sync, uncertainty_ns) + sizeof(uint64_t) ||
	    (!v && n))
		return flit_err(EINVAL, "PHC sync: bad arguments (result struct and its sz)");
	int b = best_sample(v, n);
	if (b < 0)
		return flit_err(EINVAL, "PHC sync: none of %u samples is usable "
				"(a bracket ends before it starts, or the PHC read 0)", n);
	uint64_t w = v[b].sys_after - v[b].sys_before;
	sync_set(s, host, FLIT_PHC_SAMPLES, n, v[b].phc, v[b].sys_before + w / 2, (w + 1) / 2);
	return 0;
}

/* CLOCK_MONOTONIC_RAW - CLOCK_REALTIME now, from the narrowest of a few
 * brackets; *unc: half that bracket. */
static int64_t mono_minus_real(uint64_t *unc)
{
	uint64_t w = UINT64_MAX;
	int64_t off = 0;

	for (int i = 0; i < 9; i++) {
		uint64_t a = clock_ns(CLOCK_MONOTONIC_RAW);
		uint64_t rt = clock_ns(CLOCK_REALTIME);
		uint64_t b = clock_ns(CLOCK_MONOTONIC_RAW);
		if (b >= a && b - a < w) {
			w = b - a;
			off = (int64_t)(a + (b - a) / 2 - rt);
		}
	}
	*unc = (w + 1) / 2;
	return off;
}

/* PTP_SYS_OFFSET_EXTENDED bracketed by `clk` into v[0..n): 0 or -errno. */
static int ext_read(const flit_phc *phc, unsigned n, clockid_t clk, struct flit_phc_sample *v)
{
	struct ptp_sys_offset_extended e;

	memset(&e, 0, sizeof(e));
	e.n_samples = n;
	PTP_EXT_CLOCKID(&e) = (unsigned)clk;   /* CLOCK_REALTIME is 0 */
	if (ioctl(phc->fd, PTP_SYS_OFFSET_EXTENDED, &e))
		return -errno;
	for (unsigned i = 0; i < n; i++)
		v[i] = (struct flit_phc_sample){ ptp_ns(&e.ts[i][0]), ptp_ns(&e.ts[i][1]),
						 ptp_ns(&e.ts[i][2]) };
	return 0;
}

int flit_phc_sync(flit_phc *phc, clockid_t host, unsigned samples, struct flit_phc_sync *s)
{
	struct flit_phc_sample v[PTP_MAX_SAMPLES];
	unsigned n = 0;
	clockid_t bracket = CLOCK_REALTIME;
	int method = 0;

	if (!phc || !s || s->sz < offsetof(struct flit_phc_sync, uncertainty_ns) + sizeof(uint64_t))
		return flit_err(EINVAL, "PHC sync: bad arguments (result struct and its sz)");
	if (host != CLOCK_REALTIME && host != CLOCK_MONOTONIC_RAW)
		return flit_err(EINVAL, "PHC sync: host clock %d: CLOCK_REALTIME or CLOCK_MONOTONIC_RAW",
				(int)host);
	if (samples > PTP_MAX_SAMPLES)
		return flit_err(EINVAL, "PHC sync: %u samples: at most %d", samples, PTP_MAX_SAMPLES);
	if (!samples)
		samples = PHC_SAMPLES_DEFAULT;

	/* 1. a cross-timestamp by the device: exact, both host clocks */
	if (!phc->no_precise) {
		struct ptp_sys_offset_precise p;
		memset(&p, 0, sizeof(p));
		if (ioctl(phc->fd, PTP_SYS_OFFSET_PRECISE, &p) == 0) {
			sync_set(s, host, FLIT_PHC_PRECISE, 1, ptp_ns(&p.device),
				 ptp_ns(host == CLOCK_REALTIME ? &p.sys_realtime : &p.sys_monoraw), 0);
			return 0;
		}
		phc->no_precise = true;   /* EOPNOTSUPP: most drivers */
	}
	/* 2. the driver brackets its own device read; since 6.12 with the
	 * host clock we ask for */
	if (!phc->no_extended) {
		bool use_clockid = host != CLOCK_REALTIME && !phc->no_ext_clockid;
		int r = ext_read(phc, samples, use_clockid ? host : CLOCK_REALTIME, v);
		if (r == -EINVAL && use_clockid) {
			phc->no_ext_clockid = true;   /* before 6.12: REALTIME only */
			use_clockid = false;
			r = ext_read(phc, samples, CLOCK_REALTIME, v);
		}
		if (r == 0) {
			n = samples;
			method = FLIT_PHC_EXTENDED;
			bracket = use_clockid ? host : CLOCK_REALTIME;
		} else {
			phc->no_extended = true;
		}
	}
	/* 3. the oldest: host reads around the driver's gettime */
	if (!method) {
		struct ptp_sys_offset b;
		memset(&b, 0, sizeof(b));
		b.n_samples = samples;
		if (ioctl(phc->fd, PTP_SYS_OFFSET, &b))
			return flit_err(errno == ENOTTY ? EOPNOTSUPP : errno,
					"PHC sync: /dev/ptp%d: no offset measurement works "
					"(PRECISE, EXTENDED, PTP_SYS_OFFSET: %s)", phc->index, strerror(errno));
		for (unsigned i = 0; i < samples; i++)
			v[i] = (struct flit_phc_sample){ ptp_ns(&b.ts[2 * i]), ptp_ns(&b.ts[2 * i + 1]),
							 ptp_ns(&b.ts[2 * i + 2]) };
		n = samples;
		method = FLIT_PHC_BASIC;
	}
	int best = best_sample(v, n);
	if (best < 0)
		return flit_err(EIO, "PHC sync: /dev/ptp%d: no usable sample out of %u", phc->index, n);
	uint64_t w = v[best].sys_after - v[best].sys_before;
	uint64_t hostns = v[best].sys_before + w / 2, unc = (w + 1) / 2;
	if (bracket != host) {
		/* bracketed with CLOCK_REALTIME, wanted MONOTONIC_RAW */
		uint64_t u2;
		hostns = (uint64_t)((int64_t)hostns + mono_minus_real(&u2));
		unc += u2;
	}
	sync_set(s, host, method, n, v[best].phc, hostns, unc);
	return 0;
}

/* ---- transmit stamps of a socket ------------------------------------------------------ */

int flit_txts_enable(int fd, int kind)
{
	int v = 0;
	socklen_t l = sizeof(v);

	if (kind != FLIT_TS_SOFTWARE && kind != FLIT_TS_HARDWARE)
		return flit_err(EINVAL, "transmit stamps: kind %d", kind);
	/* keep receive flags someone set; OPT_ID off first, so that the
	 * kernel's numbering restarts at 0 when it is turned on */
	if (getsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &v, &l))
		v = 0;
	v &= SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_RX_HARDWARE |
	     SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_RAW_HARDWARE;
	if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &v, sizeof(v)))
		return flit_err(errno, "transmit stamps: SO_TIMESTAMPING on fd %d: %s", fd, strerror(errno));
	v |= SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
	     SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
	/* with TX_HARDWARE too, a device that stamps in hardware gives that
	 * stamp only (the software one is skipped when the driver takes the
	 * packet for stamping); any other gives the software one */
	if (kind == FLIT_TS_HARDWARE)
		v |= SOF_TIMESTAMPING_TX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE;
	if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &v, sizeof(v)))
		return flit_err(errno, "transmit stamps: SO_TIMESTAMPING on fd %d: %s", fd, strerror(errno));
	return 0;
}

void flit_txts_init(struct flit_txts *t, int kind)
{
	memset(t, 0, sizeof(*t));
	t->kind = kind;
}

void flit_txts_sent(struct flit_txts *t, const void *f, size_t len, unsigned n)
{
	const uint8_t *p = f;
	bool data = p && len >= FLIT_FRAME_HDR_LEN && flit_ld16(p) == FLIT_WIRE_MAGIC &&
		    p[3] == FLIT_FT_DATA && !(flit_ld16(p + 4) & FLIT_FF_RETX);

	for (unsigned i = 0; i < n; i++) {
		uint32_t key = t->next_key++;
		if (!data)
			continue;   /* only keys are counted for control frames */
		struct flit_txts_ent *e = &t->e[key & (FLIT_TXTS_RING - 1)];
		if (t->any && e == &t->e[t->newest])
			t->any = false;   /* the newest stamped one is overwritten */
		*e = (struct flit_txts_ent){ .key = key, .count = flit_ld16(p + 6),
					     .seq = flit_ld64(p + 16), .used = true };
	}
}

void flit_txts_stamped(struct flit_txts *t, const void *f, size_t len, uint64_t ts,
		       uint32_t flags)
{
	const uint8_t *p = f;

	if (!p || len < FLIT_FRAME_HDR_LEN || flit_ld16(p) != FLIT_WIRE_MAGIC ||
	    p[3] != FLIT_FT_DATA || (flit_ld16(p + 4) & FLIT_FF_RETX))
		return;
	uint32_t key = t->next_key++;
	unsigned i = key & (FLIT_TXTS_RING - 1);
	t->e[i] = (struct flit_txts_ent){ .key = key, .count = flit_ld16(p + 6),
					  .seq = flit_ld64(p + 16), .used = true };
	if (ts) {
		t->e[i].ts = ts;
		t->e[i].flags = flags;
		t->newest = i;
		t->any = true;
		t->stamps++;
	} else if (t->any && t->newest == i) {
		t->any = false;
	}
}

int flit_txts_read(int fd, struct flit_txts_rec *r, unsigned n)
{
	unsigned got = 0;

	while (got < n) {
		char ctl[256] __attribute__((aligned(8)));
		char data[64];
		struct iovec iov = { .iov_base = data, .iov_len = sizeof(data) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };
		struct flit_txts_rec rec = { 0 };
		bool is_ts = false, have_key = false;

		if (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			if (got)
				break;
			return flit_err(errno, "transmit stamps: reading the error queue of fd %d: %s",
					fd, strerror(errno));
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING &&
			    c->cmsg_len >= CMSG_LEN(sizeof(struct scm_ts3))) {
				struct scm_ts3 t;
				memcpy(&t, CMSG_DATA(c), sizeof(t));
				rec.sw_ns = ts_ns(&t.ts[0]);
				rec.hw_ns = ts_ns(&t.ts[2]);
				is_ts = true;
			} else if (((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
				    (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) &&
				   c->cmsg_len >= CMSG_LEN(sizeof(struct ext_err))) {
				struct ext_err e;
				memcpy(&e, CMSG_DATA(c), sizeof(e));
				if (e.ee_errno == ENOMSG && e.ee_origin == SO_EE_ORIGIN_TIMESTAMPING &&
				    e.ee_info == SCM_TSTAMP_SND) {
					rec.key = e.ee_data;
					have_key = true;
				}
			}
		}
		if (is_ts && have_key && (rec.sw_ns || rec.hw_ns))
			r[got++] = rec;
	}
	return (int)got;
}

int flit_txts_drain(struct flit_txts *t, int fd, unsigned max)
{
	struct flit_txts_rec r[16];
	int total = 0;

	while ((unsigned)total < max) {
		unsigned want = max - (unsigned)total < 16 ? max - (unsigned)total : 16;
		int n = flit_txts_read(fd, r, want);
		if (n <= 0)
			return total ? total : n;
		for (int i = 0; i < n; i++) {
			struct flit_txts_ent *e = &t->e[r[i].key & (FLIT_TXTS_RING - 1)];
			uint32_t fl;
			uint64_t ts = flit_ts_pick(t->kind, r[i].sw_ns, r[i].hw_ns, &fl);
			t->stamps++;
			if (!e->used || e->key != r[i].key) {
				t->unmatched++;   /* a control frame, or forgotten */
				continue;
			}
			if (!ts)
				continue;         /* a NIC stamp outside hardware mode only */
			e->ts = ts;
			e->flags = fl;
			uint32_t idx = r[i].key & (FLIT_TXTS_RING - 1);
			if (!t->any || (int32_t)(r[i].key - t->e[t->newest].key) > 0) {
				t->newest = idx;
				t->any = true;
			}
		}
		total += n;
		if ((unsigned)n < want)
			break;
	}
	return total;
}

static void fill_stamp(const struct flit_txts_ent *e, struct flit_tx_stamp *out)
{
	struct flit_tx_stamp v = { .seq = e->seq, .count = e->count, .flags = e->flags,
				   .ts_ns = e->ts };
	v.sz = out->sz < sizeof(v) ? out->sz : sizeof(v);
	memcpy(out, &v, v.sz);
}

int flit_txts_lookup(const struct flit_txts *t, uint64_t seq, struct flit_tx_stamp *out)
{
	const struct flit_txts_ent *best = NULL;
	bool pending = false;

	if (seq == FLIT_TX_STAMP_LATEST) {
		if (t->any) {
			fill_stamp(&t->e[t->newest], out);
			return 0;
		}
		for (unsigned i = 0; i < FLIT_TXTS_RING; i++)
			pending |= t->e[i].used;
		return pending ? -EAGAIN : -ENOENT;
	}
	/* the earliest stamped datagram that carried seq (a unicast source
	 * sends a frame once per receiver) */
	for (unsigned i = 0; i < FLIT_TXTS_RING; i++) {
		const struct flit_txts_ent *e = &t->e[i];
		if (!e->used || seq < e->seq || seq - e->seq >= e->count)
			continue;
		if (!e->ts) {
			pending = true;
			continue;
		}
		if (!best || (int32_t)(e->key - best->key) < 0)
			best = e;
	}
	if (best) {
		fill_stamp(best, out);
		return 0;
	}
	return pending ? -EAGAIN : -ENOENT;
}

const char *flit_ts_kind_name(int kind)
{
	switch (kind) {
	case FLIT_TS_NONE: return "none";
	case FLIT_TS_SOFTWARE: return "software";
	case FLIT_TS_HARDWARE: return "hardware";
	default: return "?";
	}
}
