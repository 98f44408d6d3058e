// SPDX-License-Identifier: BSD-2-Clause
/*
 * AF_XDP data path of the xdp transport (see xsk_io.h), on libxdp's xsk API.
 *
 * Layout.  One socket per rx queue, each with its own UMEM of cfg.frames
 * frames (mmap'd: page aligned, huge pages when asked and reserved).  Frame
 * addresses are multiples of frame_size (aligned mode); a packet starts
 * FLIT_XSK_HEADROOM bytes in, where the kernel puts received data
 * (XDP_PACKET_HEADROOM) and where we put sent frames too.  The sending
 * socket's UMEM is split: the first half receives, the second half sends;
 * the other queues only receive, so all their frames receive.  All sends go
 * out through one socket: queue 0's, or with cfg.tx_own_queue one of its
 * own on the device's last queue, where nothing is received (the program's
 * XSKMAP has no entry for it).  In copy mode a socket that both sends and
 * receives has its send state (the kernel's xdp_sock and buffer pool, e.g.
 * the completion ring's lock) on cache lines the receive path of the other
 * CPU writes too: every round trip moves them between the CPUs (2.24 ->
 * 1.93 us RTT/2 with a socket of its own, when this VM's vCPUs sat on
 * distant host cores).
 *
 * Receive: frames the kernel filled are taken from the rx ring; the ones
 * handed out as views are remembered ("held") and go back to the fill ring
 * at the next recv, the ones dropped go back at once.  Free receive frames
 * wait on a stack until the fill ring has room; with more receive frames
 * than fill entries (the default: 2048 and 1024) the spare ones top the
 * fill ring up in the same call that took frames, so it stays full while
 * views are out.  Refilling reads the consumer index the kernel writes, a
 * cache line that comes from the CPU that received; so the ring is topped
 * up once the kernel took REFILL_BATCH (32, at most a quarter of the ring)
 * frames from it, not after every frame, unless the last refill left it
 * short.  A queue on which nothing arrived costs one read of the rx
 * producer (plus, with need_wakeup, of the fill ring's flags).  The rx
 * ring's consumer is released as soon as the descriptors are read: the
 * frame, not the descriptor, is what a view keeps alive.
 *
 * Send: a free frame from a stack, headers built in place behind the copied
 * payload, a descriptor on the tx ring; one submit and, when the ring asks
 * for it (always in copy mode, where the kernel transmits only inside the
 * syscall), one kick.  Completed frames come back from the completion ring
 * when the free stack runs low, and in flit_xsk_tx_service().  In copy mode
 * the kernel sends at most max_tx_budget descriptors per kick (32 unless
 * XDP_MAX_TX_SKB_BUDGET, Linux >= 6.17, raised it to the ring size): a kick
 * that ends with EAGAIN after progress is repeated, a bounded number of
 * times.
 *
 * Unicast destinations: a 64-entry cache of next-hop MACs (neigh.c does the
 * rtnetlink work).  A known destination costs a hash probe and a coarse
 * clock read.  Entries are refreshed by flit_xsk_tx_service() once they are
 * a second old and still in use (outside the tx lock), and used without a
 * refresh for up to 10 s; an unknown next hop is looked up again at most
 * every 100 ms (every second when the route does not go out here).
 *
 * Stamps (xsk_io.h).  RX: with cfg.rx_meta, recv_frames() is instantiated
 * a second time, reading (and clearing the magic of) struct
 * flit_xdp_rx_meta in front of each frame; without it the loop is the one it
 * always was.  TX: with cfg.tx_timestamps the sending socket and UMEM are set
 * up through the raw socket API (struct xdp_umem_reg with tx_metadata_len,
 * Linux 6.8; XDP_UMEM_TX_METADATA_LEN, Linux 6.11, required since), the
 * rings mapped here and kept in libxdp's ring structs, so the ring code is
 * shared.  Each frame sent gets 16 bytes of struct xsk_tx_metadata in front
 * of it (flags TIMESTAMP, then the union the kernel writes the completion
 * stamp into) and, 8 bytes before that, its id; tx_reap() turns each
 * completed frame into a struct flit_xsk_tx_stamp in a ring of ring_size
 * entries that flit_xsk_tx_stamps() empties.  Frames start 256 bytes into
 * their UMEM frame, so all of that lies in headroom nobody else uses.
 *
 * Threads: recv touches only the rx half of the object; send and
 * tx_service serialize on a spinlock around the tx ring, the free stack,
 * the neighbour cache and the IPv4 ID.  Netlink has its own mutex, taken
 * either under the spinlock (a send that must look up) or alone (refresh),
 * never the other way round.
 */
/* <net/if.h> before any <linux/...> header that pulls in <linux/if.h> */
#include <net/if.h>
#include <net/if_arp.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_xdp.h>
#include <linux/sockios.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <xdp/xsk.h>

#include "error.h"
#include "flit_xdp.h"
#include "xdp/neigh.h"
#include "xdp/pkt.h"
#include "xdp/xsk_io.h"

/* Newer than the 6.1 uapi headers. */
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef SO_BUSY_POLL
#define SO_BUSY_POLL 46
#endif
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif
#ifndef XDP_MAX_TX_SKB_BUDGET
#define XDP_MAX_TX_SKB_BUDGET 9         /* Linux 6.17 */
#endif
/* AF_XDP TX metadata (Linux 6.8; the UMEM flag 6.11) */
#ifndef XDP_UMEM_TX_METADATA_LEN
#define XDP_UMEM_TX_METADATA_LEN (1 << 2)
#endif
#ifndef XDP_TX_METADATA
#define XDP_TX_METADATA (1 << 1)        /* xdp_desc.options */
#endif
#ifndef XDP_TXMD_FLAGS_TIMESTAMP
#define XDP_TXMD_FLAGS_TIMESTAMP (1 << 0)
#endif

/* struct xdp_umem_reg of Linux >= 6.8 (the 6.1 uapi ends at flags). */
struct umem_reg_v3 {
	uint64_t addr, len;
	uint32_t chunk_size, headroom, flags, tx_metadata_len;
};

/* The part of struct xsk_tx_metadata flit uses: flags, and the union whose
 * first 8 bytes are the completion stamp (the request's checksum fields
 * otherwise, unused).  Registered as tx_metadata_len 16: the kernel reads
 * past that only for XDP_TXMD_FLAGS_LAUNCH_TIME (6.14), never asked for. */
struct txmd {
	uint64_t flags;
	uint64_t tx_timestamp;
};
#define TXMD_LEN          16u
#define TXMD_ID_OFF       (TXMD_LEN + 8u)       /* the frame's id, before it */

/* Where packet data starts in a frame: the kernel's XDP_PACKET_HEADROOM for
 * received frames (UMEM headroom 0); sent frames use the same offset, so
 * what one flit sends another flit with the same frame size receives. */
#define FLIT_XSK_HEADROOM 256u
#define MAX_QUEUES        256u
#define COPY_TX_BUDGET    32u           /* copy mode's per-kick default */
#define KICK_TRIES        8
#define BIND_RETRY_MS     1000
#define BIND_RETRY_STEP_US 20000

#define NEIGH_SLOTS       64u           /* power of 2 */
#define NEIGH_PROBE       8u
#define NEIGH_FRESH_MS    1000          /* refresh (tx_service) after */
#define NEIGH_VALID_MS    10000         /* used without refresh until */
#define NEIGH_RETRY_MS    100           /* unknown MAC: look up again after */
#define NOROUTE_RETRY_MS  1000          /* not via this interface: again after */

enum { NE_OK = 1, NE_PENDING, NE_NOROUTE };

struct nent {
	uint32_t daddr;         /* network order; 0: free slot */
	uint8_t state;
	bool used;              /* sent to since the last lookup */
	uint8_t mac[6];
	uint64_t t_check;       /* OK: refresh from; others: look up again from */
	uint64_t t_valid;       /* OK: usable until */
};

/* One rx queue: its socket and UMEM.  The first cache lines are the
 * receiving thread's, the ring state senders write (queue 0) is on lines
 * of its own. */
struct xq {
	struct xsk_ring_cons rx;
	struct xsk_ring_prod fill;
	uint8_t *area;
	int fd;
	unsigned nrx;                   /* receive frames: [0, nrx) */
	uint64_t *rx_free;              /* stack of frame addresses, nrx */
	unsigned rx_nfree;
	uint64_t *held;                 /* handed out by the last recv, ring_size */
	unsigned nheld;
	unsigned taken;                 /* frames received since the last refill */
	unsigned refill_at;             /* refill once taken reaches this */
	bool fill_short;                /* the last refill could not fill the ring */

	alignas(64) struct xsk_ring_cons comp;  /* every UMEM has one; the sender's uses it */
	struct xsk_ring_prod tx;        /* the sending socket's only */
	struct xsk_umem *umem;
	struct xsk_socket *sk;
	size_t area_len;
	bool huge;
	bool raw;                       /* socket and rings set up here, not
					 * by libxdp (TX metadata) */
	void *rmap[4];                  /* raw: fill, comp, rx, tx mappings */
	size_t rmap_len[4];
};

struct rx_stats {
	uint64_t frames, bytes, short_, proto, ipcsum, udpcsum, wakeups;
};

struct flit_xsk {
	/* ---- receive side: the recv thread only ---- */
	struct xq *q;                   /* nq rx queues, then the own tx queue */
	unsigned nq;
	unsigned nqa;                   /* entries of q: nq, + 1 with an own tx queue */
	unsigned rr;                    /* queue recv starts at */
	unsigned ring_size;
	uint64_t frame_mask;
	bool verify_csum;
	bool rx_kick_busy;              /* busy poll: recvfrom on an empty ring */
	bool need_wakeup;
	bool rx_meta;                   /* cfg.rx_meta */
	struct rx_stats rs;
	uint64_t rx_ts_hw, rx_ts_none;
	char rx_ts_why[160];            /* set once, at the first frame without */

	/* ---- send side: under lock ---- */
	alignas(64) _Atomic int lock;
	struct xq *txq;                 /* &q[0], or &q[nq] (cfg.tx_own_queue) */
	unsigned txqid;                 /* its queue id */
	uint64_t *tx_free;              /* stack of frame addresses */
	unsigned tx_nfree, ntx;
	unsigned reap_below;            /* reap completions below this many free */
	bool kick_pending;              /* a kick failed or left work: retry */
	bool copy;                      /* copy mode (not zero-copy) */
	bool tx_need_wakeup;
	uint16_t ip_id;
	uint8_t ttl_mc, ttl_uc;
	uint32_t max_payload;
	struct flit_pkt_hdr tmpl;       /* smac, saddr */
	struct nent neigh[NEIGH_SLOTS];
	unsigned neigh_scan;
	uint64_t tx_frames, tx_bytes, tx_full, tx_no_neigh, tx_too_big, tx_wakeups;
	bool tx_ts;                     /* cfg.tx_timestamps */
	uint32_t tx_id;                 /* id of the next datagram sent */
	struct flit_xsk_tx_stamp *txs;  /* ring of ring_size stamps */
	unsigned txs_head, txs_n;
	uint64_t tx_ts_got, tx_ts_none, tx_ts_lost;
	uint64_t tai_off;               /* CLOCK_TAI - CLOCK_REALTIME, whole s */

	/* ---- control ---- */
	alignas(64) pthread_mutex_t nl_lock;
	struct flit_neigh nl;
	bool nl_open;
	struct flit_xsk_cfg cfg;
	unsigned ifindex;
	unsigned mtu;
	unsigned tx_budget;             /* descriptors per kick in copy mode */
	struct in_addr addr;
	char zc_why[96];                /* why zero-copy was not used */
	char huge_why[96];              /* why huge pages were not used */
	char desc[512];
};

/* ---- small helpers ------------------------------------------------------ */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static inline void tx_lock(struct flit_xsk *x)
{
	unsigned spins = 0;
	while (atomic_exchange_explicit(&x->lock, 1, memory_order_acquire)) {
		while (atomic_load_explicit(&x->lock, memory_order_relaxed)) {
			/* the holder may be in a netlink round trip or
			 * preempted: stop burning the CPU it may need */
			if (++spins > 2000)
				sched_yield();
			else
				cpu_relax();
		}
	}
}

static inline bool tx_trylock(struct flit_xsk *x)
{
	return !atomic_load_explicit(&x->lock, memory_order_relaxed) &&
	       !atomic_exchange_explicit(&x->lock, 1, memory_order_acquire);
}

static inline void tx_unlock(struct flit_xsk *x)
{
	atomic_store_explicit(&x->lock, 0, memory_order_release);
}

/* vDSO, a few ns: precise enough for second-scale cache ages. */
static inline uint64_t coarse_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char *ip_str(uint32_t a, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)&a;
	snprintf(buf, len, "%u.%u.%u.%u", p[0], p[1], p[2], p[3]);
	return buf;
}

/* CLOCK_TAI - CLOCK_REALTIME: the kernel's TAI offset, a whole number of
 * seconds (0 until someone sets it: chrony, ntpd, ptp4l), read as the
 * difference of the two clocks rounded to the second. */
static uint64_t tai_offset(void)
{
	struct timespec r, t;

	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_TAI, &t);
	int64_t d = (int64_t)(t.tv_sec - r.tv_sec) * 1000000000 + (t.tv_nsec - r.tv_nsec);
	return (uint64_t)((d + 500000000) / 1000000000) * 1000000000u;
}

static bool pow2(unsigned v)
{
	return v && !(v & (v - 1));
}

/* ---- interface facts ------------------------------------------------------ */

static int if_facts(struct flit_xsk *x, uint8_t mac[6])
{
	const char *ifn = x->cfg.ifname;
	struct ifreq ifr;
	int fd, r = 0;
	char a[16];

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return flit_err(errno, "xsk: socket for interface ioctls");

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifn);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr)) {
		r = flit_err(errno, "xsk: SIOCGIFHWADDR on %s", ifn);
		goto out;
	}
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER &&
	    ifr.ifr_hwaddr.sa_family != ARPHRD_LOOPBACK) {
		r = flit_err(EOPNOTSUPP, "xsk: %s is not an Ethernet interface (ARPHRD %u)",
			     ifn, (unsigned)ifr.ifr_hwaddr.sa_family);
		goto out;
	}
	memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifn);
	ifr.ifr_addr.sa_family = AF_INET;
	if (ioctl(fd, SIOCGIFADDR, &ifr)) {
		int e = errno;
		if (e == EADDRNOTAVAIL)
			r = flit_err(e, "xsk: %s has no IPv4 address (the source "
				     "address of sends): add one", ifn);
		else
			r = flit_err(e, "xsk: SIOCGIFADDR on %s", ifn);
		goto out;
	}
	x->addr = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifn);
	if (ioctl(fd, SIOCGIFMTU, &ifr)) {
		r = flit_err(errno, "xsk: SIOCGIFMTU on %s", ifn);
		goto out;
	}
	x->mtu = (unsigned)ifr.ifr_mtu;
	flit_debug("xsk: %s ifindex %u, %s, mtu %u", ifn, x->ifindex,
		   ip_str(x->addr.s_addr, a, sizeof(a)), x->mtu);
out:
	close(fd);
	return r;
}

/* The device's rx queue count: ETHTOOL_GCHANNELS (rx-only plus combined
 * channels), else the rx-* entries in sysfs, else 1. */
static unsigned dev_rx_queues(const char *ifn)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct ifreq ifr;
	unsigned n = 0;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd >= 0) {
		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifn);
		ifr.ifr_data = (void *)&ch;
		if (!ioctl(fd, SIOCETHTOOL, &ifr))
			n = ch.rx_count + ch.combined_count;
		close(fd);
	}
	if (n)
		return n;

	/* sysfs shows the network namespace it was mounted in: only a
	 * fallback */
	char path[64];
	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", ifn);
	DIR *d = opendir(path);
	if (d) {
		for (struct dirent *e; (e = readdir(d));)
			if (!strncmp(e->d_name, "rx-", 3))
				n++;
		closedir(d);
	}
	return n ? n : 1;
}

/* What a kernel UDP socket sends unicast with (IP_TTL unset): the
 * namespace's net.ipv4.ip_default_ttl. */
static uint8_t default_ttl(void)
{
	unsigned v = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_default_ttl", "re");
	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v >= 1 && v <= 255 ? (uint8_t)v : 64;
}

/* ---- UMEM and sockets ----------------------------------------------------- */

static int area_alloc(struct flit_xsk *x, struct xq *q, size_t len)
{
	if (x->cfg.hugepages) {
		size_t hl = (len + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
		void *p = mmap(NULL, hl, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		if (p != MAP_FAILED) {
			q->area = p;
			q->area_len = hl;
			q->huge = true;
			return 0;
		}
		if (!x->huge_why[0]) {
			snprintf(x->huge_why, sizeof(x->huge_why), "%s",
				 errno == ENOMEM ? "none reserved (vm.nr_hugepages)" : strerror(errno));
			flit_warn("xsk: no huge pages for the UMEM of %s (%s): using normal pages",
				  x->cfg.ifname, x->huge_why);
		}
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return flit_err(errno, "xsk: UMEM of %zu bytes", len);
	q->area = p;
	q->area_len = len;
	q->huge = false;
	return 0;
}

/* A failed UMEM registration (or AF_XDP socket), as the error to return. */
static int umem_err(struct flit_xsk *x, int r, size_t len)
{
	if (r == -EPERM || r == -EACCES)
		return flit_err(EPERM, "xsk: AF_XDP socket for %s: needs CAP_NET_RAW",
				x->cfg.ifname);
	if (r == -EAFNOSUPPORT)
		return flit_err(EOPNOTSUPP, "xsk: this kernel has no AF_XDP sockets "
				"(CONFIG_XDP_SOCKETS)");
	if (r == -ENOBUFS) {
		/* the kernel charges the pinned UMEM to RLIMIT_MEMLOCK unless
		 * the process has CAP_IPC_LOCK */
		struct rlimit rl = { 0, 0 };
		getrlimit(RLIMIT_MEMLOCK, &rl);
		return flit_err(EPERM, "xsk: UMEM of %zu KiB for %s is over RLIMIT_MEMLOCK "
				"(%llu KiB, all UMEMs of the user counted): needs CAP_IPC_LOCK, "
				"or fewer frames", len >> 10, x->cfg.ifname,
				(unsigned long long)(rl.rlim_cur >> 10));
	}
	return flit_err(-r, "xsk: UMEM registration for %s (%u frames of %u bytes)",
			x->cfg.ifname, x->cfg.frames, x->cfg.frame_size);
}

static int umem_create(struct flit_xsk *x, struct xq *q, size_t len)
{
	struct xsk_umem_config uc = {
		.fill_size = x->ring_size,
		.comp_size = x->ring_size,
		.frame_size = x->cfg.frame_size,
		.frame_headroom = 0,
		.flags = 0,
	};
	int r = xsk_umem__create(&q->umem, q->area, len, &q->fill, &q->comp, &uc);
	if (!r)
		return 0;
	q->umem = NULL;
	return umem_err(x, r, len);
}

/* One UMEM registration of a page with these flags and tx_metadata_len,
 * on a socket of its own: 0 or -errno. */
static int txmd_try(uint32_t flags, uint32_t mdlen, void *page, long pagesz)
{
	struct umem_reg_v3 mr = {
		.addr = (uintptr_t)page,
		.len = (uint64_t)pagesz,
		.chunk_size = (uint32_t)pagesz,
		.flags = flags,
		.tx_metadata_len = mdlen,
	};
	int fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0), r;

	if (fd < 0)
		return -errno;
	r = setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &mr, sizeof(mr)) ? -errno : 0;
	close(fd);
	return r;
}

int flit_xsk_txmd_probe(void)
{
	/* 0: not known yet, else the answer + 1 (contexts may open at once
	 * on several threads: they would find the same) */
	static int answer;
	long pagesz = sysconf(_SC_PAGESIZE);
	int known = __atomic_load_n(&answer, __ATOMIC_RELAXED), r;
	void *page;

	if (known)
		return known - 1;
	page = mmap(NULL, (size_t)pagesz, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return -errno;
	r = txmd_try(XDP_UMEM_TX_METADATA_LEN, TXMD_LEN, page, pagesz);
	if (r == 0) {
		r = FLIT_XSK_TXMD_FLAG;
	} else if (r == -EINVAL) {
		/* the flag is unknown: does the kernel read the field at all?
		 * 6.8..6.10 refuse a length that is not a multiple of 8,
		 * older kernels never look at it */
		r = txmd_try(0, 7, page, pagesz);
		if (r == -EINVAL)
			r = FLIT_XSK_TXMD_NOFLAG;
		else if (r == 0)
			r = FLIT_XSK_TXMD_NONE;
	}
	munmap(page, (size_t)pagesz);
	if (r >= 0)
		__atomic_store_n(&answer, r + 1, __ATOMIC_RELAXED);
	return r;
}

/* Point libxdp's ring struct r at a ring mapped at map (offsets o, n
 * entries); a producer's cached consumer runs n ahead, as libxdp keeps it. */
#define RING_SET(r, map, o, n, is_prod) do {                                   \
		(r)->producer = (void *)((char *)(map) + (o).producer);          \
		(r)->consumer = (void *)((char *)(map) + (o).consumer);          \
		(r)->flags = (void *)((char *)(map) + (o).flags);                \
		(r)->ring = (char *)(map) + (o).desc;                            \
		(r)->mask = (n) - 1;                                             \
		(r)->size = (n);                                                 \
		(r)->cached_prod = __atomic_load_n((r)->producer, __ATOMIC_ACQUIRE); \
		(r)->cached_cons = __atomic_load_n((r)->consumer, __ATOMIC_ACQUIRE) + \
				   ((is_prod) ? (n) : 0);                        \
	} while (0)

static int raw_map(struct flit_xsk *x, struct xq *q, int i, size_t len, off_t pgoff,
		   void **out)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		       q->fd, pgoff);

	if (p == MAP_FAILED)
		return flit_err(errno, "xsk: mapping ring %d of the AF_XDP socket on %s",
				i, x->cfg.ifname);
	q->rmap[i] = p;
	q->rmap_len[i] = len;
	*out = p;
	return 0;
}

/* The sending socket, its UMEM and rings set up by hand, with AF_XDP TX
 * metadata (cfg.tx_timestamps): libxdp 1.3.1's UMEM config cannot ask for
 * it.  Binding is left to sock_create(), as with libxdp.
 *
 * Linux 6.8 added tx_metadata_len in what was the padding of struct
 * xdp_umem_reg, which older kernels ignore (the descriptors asking for
 * metadata would then be refused one by one), and Linux 6.11 takes it only
 * with XDP_UMEM_TX_METADATA_LEN, which 6.8..6.10 refuse (EINVAL):
 * flit_xsk_txmd_probe() tells which, by trying, before 6.8 EOPNOTSUPP up
 * front. */
static int raw_umem_create(struct flit_xsk *x, struct xq *q, size_t len)
{
	struct umem_reg_v3 mr = {
		.addr = (uintptr_t)q->area,
		.len = len,
		.chunk_size = x->cfg.frame_size,
		.headroom = 0,
		.flags = XDP_UMEM_TX_METADATA_LEN,
		.tx_metadata_len = TXMD_LEN,
	};
	struct xdp_mmap_offsets off;
	socklen_t ol = sizeof(off);
	unsigned n = x->ring_size;
	int md = flit_xsk_txmd_probe();
	void *m = NULL;
	int r;

	if (md == FLIT_XSK_TXMD_NONE) {
		struct utsname u;

		return flit_err(EOPNOTSUPP, "xsk: TX timestamps need AF_XDP TX metadata "
				"(Linux 6.8): this kernel (%s) ignores tx_metadata_len in "
				"the UMEM registration", uname(&u) ? "?" : u.release);
	}
	if (md == FLIT_XSK_TXMD_NOFLAG)
		mr.flags = 0;
	q->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (q->fd < 0)
		return umem_err(x, -errno, len);
	q->raw = true;
	r = setsockopt(q->fd, SOL_XDP, XDP_UMEM_REG, &mr, sizeof(mr));
	if (r && errno == EINVAL && md < 0) {
		/* not probed (no AF_XDP socket for it): as 6.8..6.10 */
		mr.flags = 0;
		r = setsockopt(q->fd, SOL_XDP, XDP_UMEM_REG, &mr, sizeof(mr));
	}
	if (r) {
		if (errno == EINVAL)
			return flit_err(EOPNOTSUPP, "xsk: UMEM registration with TX metadata "
					"(%u bytes) refused on %s (EINVAL): this kernel has no "
					"AF_XDP TX metadata (Linux 6.8)", TXMD_LEN, x->cfg.ifname);
		return umem_err(x, -errno, len);
	}
	if (setsockopt(q->fd, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof(n)) ||
	    setsockopt(q->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof(n)) ||
	    setsockopt(q->fd, SOL_XDP, XDP_RX_RING, &n, sizeof(n)) ||
	    (q == x->txq && setsockopt(q->fd, SOL_XDP, XDP_TX_RING, &n, sizeof(n))))
		return flit_err(errno, "xsk: ring sizes (%u) of the AF_XDP socket on %s",
				n, x->cfg.ifname);
	if (getsockopt(q->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &ol) || ol != sizeof(off))
		return flit_err(errno ? errno : EPROTO, "xsk: ring offsets of the AF_XDP "
				"socket on %s", x->cfg.ifname);
	if ((r = raw_map(x, q, 0, off.fr.desc + n * sizeof(uint64_t),
			 XDP_UMEM_PGOFF_FILL_RING, &m)))
		return r;
	RING_SET(&q->fill, m, off.fr, n, true);
	if ((r = raw_map(x, q, 1, off.cr.desc + n * sizeof(uint64_t),
			 XDP_UMEM_PGOFF_COMPLETION_RING, &m)))
		return r;
	RING_SET(&q->comp, m, off.cr, n, false);
	if ((r = raw_map(x, q, 2, off.rx.desc + n * sizeof(struct xdp_desc),
			 XDP_PGOFF_RX_RING, &m)))
		return r;
	RING_SET(&q->rx, m, off.rx, n, false);
	if (q == x->txq) {
		if ((r = raw_map(x, q, 3, off.tx.desc + n * sizeof(struct xdp_desc),
				 XDP_PGOFF_TX_RING, &m)))
			return r;
		RING_SET(&q->tx, m, off.tx, n, true);
	}
	return 0;
}

/* Bind a socket set up by raw_umem_create(): 0 or -errno. */
static int raw_bind(struct flit_xsk *x, struct xq *q, unsigned qid, uint16_t flags)
{
	struct sockaddr_xdp sa = {
		.sxdp_family = AF_XDP,
		.sxdp_flags = flags,
		.sxdp_ifindex = x->ifindex,
		.sxdp_queue_id = qid,
	};

	return bind(q->fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
}

/* Bind queue qid.  EBUSY (a socket closed just before on the same queue
 * is still being torn down) is retried until deadline.  Zero-copy per
 * cfg: tried first unless off or skb mode; in AUTO a refusal falls back to
 * copy mode and is remembered for the other queues and describe(). */
static int sock_create(struct flit_xsk *x, struct xq *q, unsigned qid, bool *zc,
		       uint64_t deadline)
{
	struct xsk_socket_config sc = {
		.rx_size = x->ring_size,
		.tx_size = x->ring_size,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.xdp_flags = 0,
	};
	unsigned busy = 0;

	for (;;) {
		sc.bind_flags = (uint16_t)((*zc ? XDP_ZEROCOPY : XDP_COPY) |
					   (x->cfg.need_wakeup ? XDP_USE_NEED_WAKEUP : 0));
		int r;
		if (q->raw) {
			r = raw_bind(x, q, qid, sc.bind_flags);
		} else {
			r = xsk_socket__create(&q->sk, x->cfg.ifname, qid, q->umem, &q->rx,
					       q == x->txq ? &q->tx : NULL, &sc);
			if (r)
				q->sk = NULL;
		}
		if (!r)
			break;
		if (r == -EBUSY && mono_ms() < deadline) {
			busy++;
			usleep(BIND_RETRY_STEP_US);
			continue;
		}
		if (*zc && r != -EBUSY && r != -ENODEV && r != -EPERM) {
			if (x->cfg.zerocopy == FLIT_XSK_ZC_ON)
				return flit_err(EOPNOTSUPP, "xsk: zero-copy bind of %s queue %u "
						"refused (%s) and zerocopy is required",
						x->cfg.ifname, qid, strerror(-r));
			snprintf(x->zc_why, sizeof(x->zc_why), "%s", strerror(-r));
			flit_debug("xsk: %s queue %u: zero-copy refused (%s), copy mode",
				   x->cfg.ifname, qid, x->zc_why);
			*zc = false;
			continue;
		}
		if (r == -EBUSY)
			return flit_err(EBUSY, "xsk: queue %u of %s still busy after %d ms "
					"(another AF_XDP socket bound to it?)", qid,
					x->cfg.ifname, BIND_RETRY_MS);
		if (r == -EPERM || r == -EACCES)
			return flit_err(EPERM, "xsk: AF_XDP socket on %s: needs CAP_NET_RAW",
					x->cfg.ifname);
		if (r == -EINVAL && qid >= dev_rx_queues(x->cfg.ifname))
			return flit_err(EINVAL, "xsk: %s has no rx queue %u", x->cfg.ifname, qid);
		return flit_err(-r, "xsk: binding an AF_XDP socket to %s queue %u (%s mode)",
				x->cfg.ifname, qid, *zc ? "zero-copy" : "copy");
	}
	if (busy)
		flit_debug("xsk: %s queue %u bound after %u EBUSY retries", x->cfg.ifname,
			   qid, busy);
	if (!q->raw)
		q->fd = xsk_socket__fd(q->sk);
	return 0;
}

static int sock_options(struct flit_xsk *x, struct xq *q, unsigned qid)
{
	const struct flit_xsk_cfg *c = &x->cfg;
	int v;

	if (c->busy_poll_us) {
		v = 1;
		if (setsockopt(q->fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &v, sizeof(v)))
			goto busy_fail;
		v = (int)c->busy_poll_us;
		if (setsockopt(q->fd, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v)))
			goto busy_fail;
		if (c->busy_poll_budget) {
			v = (int)c->busy_poll_budget;
			if (setsockopt(q->fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &v, sizeof(v)))
				goto busy_fail;
		}
	}
	if (q == x->txq && x->copy) {
		unsigned b = x->ring_size;
		if (b > COPY_TX_BUDGET &&
		    !setsockopt(q->fd, SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &b, sizeof(b)))
			x->tx_budget = b;
	}
	return 0;
busy_fail:;
	int e = errno;
	if (e == EPERM || e == EACCES)
		return flit_err(EPERM, "xsk: busy-poll socket options on %s queue %u "
				"(%u us, budget %u): raising them needs CAP_NET_ADMIN",
				c->ifname, qid, c->busy_poll_us, c->busy_poll_budget);
	return flit_err(e, "xsk: busy-poll socket options on %s queue %u", c->ifname, qid);
}

/* ---- receive --------------------------------------------------------------- */

#define REFILL_BATCH 32u

/* Free receive frames into the fill ring, as many as it takes. */
static inline void rx_refill(struct xq *q)
{
	uint32_t idx;
	unsigned n = xsk_prod_nb_free(&q->fill, q->rx_nfree);

	q->taken = 0;
	if (n > q->rx_nfree)
		n = q->rx_nfree;
	if (n && xsk_ring_prod__reserve(&q->fill, n, &idx) == n) {
		for (unsigned i = 0; i < n; i++)
			*xsk_ring_prod__fill_addr(&q->fill, idx + i) = q->rx_free[--q->rx_nfree];
		xsk_ring_prod__submit(&q->fill, n);
	}
	/* room left as far as we know (libxdp keeps cached_cons one ring
	 * ahead): the free frames ran out first */
	q->fill_short = q->fill.cached_cons - q->fill.cached_prod != 0;
}

/* rx_refill() once the kernel has taken a batch, or when the ring is short. */
static inline void rx_refill_lazy(struct xq *q)
{
	if (q->taken >= q->refill_at || q->fill_short)
		rx_refill(q);
}

bool flit_xsk_rx_pending(struct flit_xsk *x)
{
	for (unsigned i = 0; i < x->nq; i++)
		if (xsk_cons_nb_avail(&x->q[i].rx, 1))
			return true;
	return false;
}

/* A frame came without a NIC stamp (cfg.rx_meta): count it, and say why
 * once.  err: the kfunc's return; present: the metadata was there. */
__attribute__((cold, noinline))
static void rx_ts_none(struct flit_xsk *x, int err, bool present)
{
	const char *ifn = x->cfg.ifname;

	x->rx_ts_none++;
	if (x->rx_ts_why[0])
		return;
	if (!present)
		snprintf(x->rx_ts_why, sizeof(x->rx_ts_why), "frames from %s come without "
			 "flit's RX metadata (the program attached is not %s?)", ifn,
			 FLIT_XDP_PROG_NAME_TS);
	else if (!err)
		snprintf(x->rx_ts_why, sizeof(x->rx_ts_why), "%s gives none "
			 "(bpf_xdp_metadata_rx_timestamp() succeeds with a stamp of 0, "
			 "as veth does)", ifn);
	else if (err == -EOPNOTSUPP || err == -524 /* ENOTSUPP */)
		snprintf(x->rx_ts_why, sizeof(x->rx_ts_why), "%s gives none (its driver "
			 "has no XDP RX timestamp: bpf_xdp_metadata_rx_timestamp() "
			 "says EOPNOTSUPP)", ifn);
	else if (err == -ENODATA)
		snprintf(x->rx_ts_why, sizeof(x->rx_ts_why), "%s gave a frame without "
			 "one (ENODATA: hardware RX stamping off, or not for this "
			 "frame)", ifn);
	else
		snprintf(x->rx_ts_why, sizeof(x->rx_ts_why), "%s gives none "
			 "(bpf_xdp_metadata_rx_timestamp(): %s)", ifn, strerror(-err));
	flit_warn("xsk: hardware RX stamps asked for, but %s: messages come without "
		  "a hardware receive stamp", x->rx_ts_why);
}

/* The NIC stamp in front of the frame at a (cfg.rx_meta), 0 if none; the
 * magic is cleared so that a later frame in this UMEM frame steered
 * without metadata cannot show this one's. */
static inline uint64_t rx_meta_take(struct flit_xsk *x, struct xq *q, uint64_t a)
{
	struct flit_xdp_rx_meta *m;

	if (FLIT_UNLIKELY((a & ~x->frame_mask) < sizeof(*m))) {
		rx_ts_none(x, 0, false);
		return 0;
	}
	m = (struct flit_xdp_rx_meta *)(q->area + a - sizeof(*m));
	if (FLIT_LIKELY(m->magic == FLIT_XDP_META_MAGIC)) {
		uint64_t ts = m->rx_ts;
		int err = m->rx_ts_err;

		m->magic = 0;
		if (FLIT_LIKELY(ts != 0)) {
			x->rx_ts_hw++;
			return ts;
		}
		rx_ts_none(x, err, true);
		return 0;
	}
	rx_ts_none(x, 0, false);
	return 0;
}

/* The receive loop; meta is a constant of each instantiation, so the one
 * without stamps carries no stamp code at all. */
static inline __attribute__((always_inline))
int recv_frames(struct flit_xsk *x, struct flit_dgram *d,
		struct sockaddr_in *dst, unsigned n, const bool meta)
{
	const unsigned nq = x->nq;
	unsigned qi = x->rr, got = 0;

	if (++x->rr == nq)
		x->rr = 0;
	for (unsigned k = 0; k < nq; k++) {
		struct xq *q = &x->q[qi];
		if (++qi == nq)
			qi = 0;

		/* last call's views are dead: their frames are free again.
		 * (The fill ring only has room after frames were taken: an
		 * idle queue never reads the kernel-written consumer.) */
		if (q->nheld) {
			memcpy(q->rx_free + q->rx_nfree, q->held, q->nheld * sizeof(*q->held));
			q->rx_nfree += q->nheld;
			q->nheld = 0;
			rx_refill_lazy(q);
		}
		if (got == n)
			continue;

		uint32_t idx;
		unsigned want = n - got < x->ring_size ? n - got : x->ring_size;
		unsigned r = xsk_ring_cons__peek(&q->rx, want, &idx);
		if (!r) {
			if (x->rx_kick_busy ||
			    (x->need_wakeup && xsk_ring_prod__needs_wakeup(&q->fill))) {
				x->rs.wakeups++;
				recvfrom(q->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
			}
			continue;
		}
		for (unsigned i = 0; i < r; i++) {
			const struct xdp_desc *rd = xsk_ring_cons__rx_desc(&q->rx, idx + i);
			uint64_t a = rd->addr;
			uint32_t len = rd->len;
			struct flit_pkt_info pi;

			x->rs.frames++;
			x->rs.bytes += len;
			uint64_t hw = meta ? rx_meta_take(x, q, a) : 0;
			enum flit_pkt_res pr = flit_pkt_parse(q->area + a, len, x->verify_csum, &pi);
			if (FLIT_UNLIKELY(pr != FLIT_PKT_OK)) {
				switch (pr) {
				case FLIT_PKT_PROTO: x->rs.proto++; break;
				case FLIT_PKT_IPCSUM: x->rs.ipcsum++; break;
				case FLIT_PKT_UDPCSUM: x->rs.udpcsum++; break;
				default: x->rs.short_++; break;
				}
				q->rx_free[q->rx_nfree++] = a & x->frame_mask;
				continue;
			}
			q->held[q->nheld++] = a & x->frame_mask;

			struct flit_dgram *o = &d[got];
			o->buf = (void *)pi.payload;
			o->len = pi.len;
			memset(&o->addr, 0, sizeof(o->addr));
			o->addr.sin_family = AF_INET;
			o->addr.sin_port = pi.sport;
			o->addr.sin_addr.s_addr = pi.saddr;
			o->rx_ts_ns = 0;
			o->rx_ts_hw_ns = hw;
			if (dst) {
				memset(&dst[got], 0, sizeof(dst[got]));
				dst[got].sin_family = AF_INET;
				dst[got].sin_port = pi.dport;
				dst[got].sin_addr.s_addr = pi.daddr;
			}
			got++;
		}
		xsk_ring_cons__release(&q->rx, r);
		q->taken += r;
		/* spare frames (and dropped ones) top the fill ring up, so
		 * the kernel keeps receiving while the views are out */
		if (q->rx_nfree)
			rx_refill_lazy(q);
	}
	return (int)got;
}

int flit_xsk_recv(struct flit_xsk *x, struct flit_dgram *d,
		  struct sockaddr_in *dst, unsigned n)
{
	if (FLIT_UNLIKELY(x->rx_meta))
		return recv_frames(x, d, dst, n, true);
	return recv_frames(x, d, dst, n, false);
}

const char *flit_xsk_rx_ts_why(const struct flit_xsk *x)
{
	return x->rx_ts_why;
}

/* ---- send ------------------------------------------------------------------ */

/* A completed frame's TX stamp into the stamp ring (cfg.tx_timestamps).
 * addr is the descriptor's: the packet, behind its metadata and id; the
 * headers are the ones flit_xsk_send() built (no VLAN, no IPv4 options). */
__attribute__((noinline))
static void tx_stamp_take(struct flit_xsk *x, uint64_t addr)
{
	const uint8_t *f = x->txq->area + addr;
	const struct txmd *md = (const struct txmd *)(f - TXMD_LEN);
	unsigned cap = x->ring_size;
	uint16_t be16;

	if (x->txs_n == cap) {          /* nobody collected: drop the oldest */
		x->txs_head = (x->txs_head + 1) & (cap - 1);
		x->txs_n--;
		x->tx_ts_lost++;
	}
	struct flit_xsk_tx_stamp *s = &x->txs[(x->txs_head + x->txs_n++) & (cap - 1)];
	s->raw_ns = md->tx_timestamp;
	if (s->raw_ns) {
		x->tx_ts_got++;
		s->flags = x->copy ? FLIT_TXTS_SOFTWARE : FLIT_TXTS_HARDWARE;
		s->ts_ns = x->copy ? s->raw_ns - x->tai_off : s->raw_ns;
	} else {
		x->tx_ts_none++;
		s->flags = 0;
		s->ts_ns = 0;
	}
	memcpy(&s->id, f - TXMD_ID_OFF, sizeof(s->id));
	memcpy(&s->daddr, f + FLIT_PKT_ETH_LEN + 16, 4);
	memcpy(&s->dport, f + FLIT_PKT_ETH_LEN + FLIT_PKT_IP_LEN + 2, 2);
	memcpy(&be16, f + FLIT_PKT_ETH_LEN + 4, 2);
	s->ip_id = ntohs(be16);
	memcpy(&be16, f + FLIT_PKT_ETH_LEN + FLIT_PKT_IP_LEN + 4, 2);
	s->len = ntohs(be16) >= FLIT_PKT_UDP_LEN ? ntohs(be16) - FLIT_PKT_UDP_LEN : 0;
	memset(s->head, 0, sizeof(s->head));
	memcpy(s->head, f + FLIT_PKT_HDR_LEN,
	       s->len < sizeof(s->head) ? s->len : sizeof(s->head));
}

static void tx_reap(struct flit_xsk *x)
{
	struct xq *q = x->txq;
	uint32_t idx;
	unsigned r = xsk_ring_cons__peek(&q->comp, x->ring_size, &idx);

	if (!r)
		return;
	if (FLIT_UNLIKELY(x->tx_ts)) {
		for (unsigned i = 0; i < r; i++) {
			uint64_t a = *xsk_ring_cons__comp_addr(&q->comp, idx + i);
			tx_stamp_take(x, a);
			x->tx_free[x->tx_nfree++] = a & x->frame_mask;
		}
	} else {
		for (unsigned i = 0; i < r; i++)
			x->tx_free[x->tx_nfree++] = *xsk_ring_cons__comp_addr(&q->comp, idx + i) &
						    x->frame_mask;
	}
	xsk_ring_cons__release(&q->comp, r);
}

static inline uint32_t tx_consumer(const struct xq *q)
{
	return __atomic_load_n(q->tx.consumer, __ATOMIC_ACQUIRE);
}

static inline bool tx_unconsumed(const struct xq *q)
{
	return tx_consumer(q) != q->tx.cached_prod;
}

/* sendto() to make the kernel transmit.  Failures are not the caller's:
 * EAGAIN (budget used up or the device queue full), EBUSY (a frame dropped
 * by the device: its completion still comes), ENOBUFS (no skb), ENETDOWN
 * ... leave kick_pending set for the next send or tx_service. */
static void tx_kick(struct flit_xsk *x)
{
	struct xq *q = x->txq;
	uint32_t before = tx_consumer(q);

	for (int i = 0; i < KICK_TRIES; i++) {
		x->tx_wakeups++;
		if (sendto(q->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0) {
			x->kick_pending = false;
			return;
		}
		int e = errno;
		if (e == EINTR)
			continue;
		x->kick_pending = true;
		if (e != EAGAIN && e != EBUSY)
			return;
		uint32_t c = tx_consumer(q);
		if (c == q->tx.cached_prod) {
			x->kick_pending = false;        /* all taken after all */
			return;
		}
		if (c == before)
			return;                         /* no progress: later */
		before = c;
	}
}

/* Look the next hop of daddr up now (slow path), updating entry e.
 * Called under the tx lock. */
static int neigh_lookup(struct flit_xsk *x, struct nent *e, uint32_t daddr,
			uint8_t mac[6])
{
	char a[16];
	int r;

	pthread_mutex_lock(&x->nl_lock);
	r = flit_neigh_resolve(&x->nl, daddr, mac, NULL);
	pthread_mutex_unlock(&x->nl_lock);

	uint64_t t = coarse_ms();
	e->daddr = daddr;
	if (r == 0) {
		e->state = NE_OK;
		memcpy(e->mac, mac, 6);
		e->t_check = t + NEIGH_FRESH_MS;
		e->t_valid = t + NEIGH_VALID_MS;
		e->used = true;
		return 0;
	}
	if (r == -ENETUNREACH) {
		e->state = NE_NOROUTE;
		e->t_check = t + NOROUTE_RETRY_MS;
		return flit_err(EHOSTUNREACH, "xsk: %s is not reached through %s: "
				"send it through the kernel", ip_str(daddr, a, sizeof(a)),
				x->cfg.ifname);
	}
	e->state = NE_PENDING;
	e->t_check = t + NEIGH_RETRY_MS;
	if (r == -EHOSTUNREACH)
		return flit_err(EHOSTUNREACH, "xsk: next hop of %s on %s not resolved yet "
				"(resolution started)", ip_str(daddr, a, sizeof(a)),
				x->cfg.ifname);
	return flit_err(EHOSTUNREACH, "xsk: route/neighbour lookup of %s on %s failed (%s)",
			ip_str(daddr, a, sizeof(a)), x->cfg.ifname, strerror(-r));
}

static inline unsigned neigh_hash(uint32_t daddr)
{
	return (daddr * 0x9e3779b1u) >> 26;     /* 6 bits: NEIGH_SLOTS */
}

/* The MAC to send to unicast daddr: 0, or -EHOSTUNREACH. */
static inline int neigh_mac(struct flit_xsk *x, uint32_t daddr, uint8_t mac[6])
{
	unsigned h = neigh_hash(daddr);
	struct nent *e = NULL, *victim = NULL;

	for (unsigned i = 0; i < NEIGH_PROBE; i++) {
		struct nent *c = &x->neigh[(h + i) & (NEIGH_SLOTS - 1)];
		if (c->daddr == daddr) {
			e = c;
			break;
		}
		if (!victim || (victim->daddr && (!c->daddr || c->t_check < victim->t_check)))
			victim = c;
	}
	if (FLIT_LIKELY(e != NULL)) {
		uint64_t t = coarse_ms();
		if (FLIT_LIKELY(e->state == NE_OK && t < e->t_valid)) {
			e->used = true;
			memcpy(mac, e->mac, 6);
			return 0;
		}
		if (e->state != NE_OK && t < e->t_check)
			return -EHOSTUNREACH;
	} else {
		e = victim;
		memset(e, 0, sizeof(*e));
	}
	return neigh_lookup(x, e, daddr, mac);
}

/* The send loop; ts is a constant of each instantiation (TX metadata
 * stamps asked for), so the one without stamps is the plain loop. */
static inline __attribute__((always_inline))
int send_frames(struct flit_xsk *x, const struct flit_dgram *d,
		unsigned n, uint16_t sport, const bool ts)
{
	struct xq *q = x->txq;
	struct flit_pkt_hdr h = x->tmpl;
	unsigned k = 0;
	int err = 0;

	if (FLIT_UNLIKELY(!n))
		return 0;
	h.sport = sport;
	tx_lock(x);
	if (x->tx_nfree < n || x->tx_nfree < x->reap_below)
		tx_reap(x);
	for (; k < n; k++) {
		const struct flit_dgram *g = &d[k];
		uint32_t da = g->addr.sin_addr.s_addr;
		uint32_t idx;

		if (FLIT_UNLIKELY(g->len > x->max_payload)) {
			if (!k) {
				x->tx_too_big++;
				err = flit_err(EMSGSIZE, "xsk: datagram of %u bytes, %s takes "
					       "at most %u", g->len, x->cfg.ifname, x->max_payload);
			}
			break;
		}
		if (FLIT_UNLIKELY(g->addr.sin_family != AF_INET)) {
			if (!k)
				err = flit_err(EDESTADDRREQ, "xsk: send needs an AF_INET "
					       "destination (family %u)",
					       (unsigned)g->addr.sin_family);
			break;
		}
		if (flit_pkt_is_multicast(da)) {
			flit_pkt_mcast_mac(da, h.dmac);
			h.ttl = x->ttl_mc;
		} else {
			int r = neigh_mac(x, da, h.dmac);
			if (FLIT_UNLIKELY(r)) {
				if (!k) {
					x->tx_no_neigh++;
					err = r;
				}
				break;
			}
			h.ttl = x->ttl_uc;
		}
		if (FLIT_UNLIKELY(!x->tx_nfree)) {
			tx_reap(x);
			if (!x->tx_nfree) {
				x->tx_full++;
				break;
			}
		}
		if (FLIT_UNLIKELY(!xsk_ring_prod__reserve(&q->tx, 1, &idx))) {
			x->tx_full++;
			break;
		}
		uint64_t base = x->tx_free[--x->tx_nfree];
		uint8_t *f = q->area + base + FLIT_XSK_HEADROOM;
		h.daddr = da;
		h.dport = g->addr.sin_port;
		h.id = x->ip_id++;
		if (g->len)
			memcpy(f + FLIT_PKT_HDR_LEN, g->buf, g->len);
		uint32_t flen = flit_pkt_build_hdr(f, &h, g->len);

		struct xdp_desc *td = xsk_ring_prod__tx_desc(&q->tx, idx);
		td->addr = base + FLIT_XSK_HEADROOM;
		td->len = flen;
		if (ts) {
			/* ask for the completion stamp; the id rides in front */
			struct txmd *md = (struct txmd *)(f - TXMD_LEN);
			uint32_t id = x->tx_id++;
			md->flags = XDP_TXMD_FLAGS_TIMESTAMP;
			md->tx_timestamp = 0;
			memcpy(f - TXMD_ID_OFF, &id, sizeof(id));
			td->options = XDP_TX_METADATA;
		} else {
			td->options = 0;
		}
		x->tx_frames++;
		x->tx_bytes += flen;
	}
	if (k) {
		xsk_ring_prod__submit(&q->tx, k);
		if (!x->tx_need_wakeup || xsk_ring_prod__needs_wakeup(&q->tx))
			tx_kick(x);
	} else if (x->kick_pending) {
		tx_kick(x);     /* a full ring may be waiting for just that */
	}
	tx_unlock(x);
	return k ? (int)k : err;
}

int flit_xsk_send(struct flit_xsk *x, const struct flit_dgram *d,
		  unsigned n, uint16_t sport)
{
	if (FLIT_UNLIKELY(x->tx_ts))
		return send_frames(x, d, n, sport, true);
	return send_frames(x, d, n, sport, false);
}

int flit_xsk_tx_stamps(struct flit_xsk *x, struct flit_xsk_tx_stamp *out, unsigned n)
{
	unsigned k = 0;

	if (!x->tx_ts)
		return 0;
	tx_lock(x);
	tx_reap(x);
	for (; k < n && x->txs_n; k++) {
		out[k] = x->txs[x->txs_head];
		x->txs_head = (x->txs_head + 1) & (x->ring_size - 1);
		x->txs_n--;
	}
	tx_unlock(x);
	return (int)k;
}

const char *flit_xsk_tx_clock(const struct flit_xsk *x)
{
	if (!x->tx_ts)
		return NULL;
	return x->copy ? "realtime" : "phc";
}

/* Refresh one cache entry outside the tx lock (netlink mutex alone). */
static void neigh_refresh(struct flit_xsk *x, unsigned slot, uint32_t daddr)
{
	uint8_t mac[6];
	int r;

	if (pthread_mutex_trylock(&x->nl_lock))
		return;         /* a send is looking something up: next time */
	r = flit_neigh_resolve(&x->nl, daddr, mac, NULL);
	pthread_mutex_unlock(&x->nl_lock);

	uint64_t t = coarse_ms();
	tx_lock(x);
	struct nent *e = &x->neigh[slot];
	if (e->daddr == daddr) {
		if (r == 0) {
			e->state = NE_OK;
			memcpy(e->mac, mac, 6);
			e->t_check = t + NEIGH_FRESH_MS;
			e->t_valid = t + NEIGH_VALID_MS;
			e->used = false;
		} else if (r == -EHOSTUNREACH) {
			e->state = NE_PENDING;
			e->t_check = t + NEIGH_RETRY_MS;
		} else if (r == -ENETUNREACH) {
			e->state = NE_NOROUTE;
			e->t_check = t + NOROUTE_RETRY_MS;
		}       /* netlink trouble: keep what we had */
	}
	tx_unlock(x);
}

void flit_xsk_tx_service(struct flit_xsk *x)
{
	uint32_t daddr = 0;
	unsigned slot = 0;

	if (!x || !tx_trylock(x))
		return;         /* a sender holds it: it reaps and kicks itself */
	struct xq *q = x->txq;
	if (x->tx_nfree < x->ntx) {
		/* frames out: the only case with anything to reap or kick */
		tx_reap(x);
		if (x->kick_pending ||
		    (tx_unconsumed(q) && (!x->tx_need_wakeup || xsk_ring_prod__needs_wakeup(&q->tx))))
			tx_kick(x);
	} else {
		x->kick_pending = false;
	}

	/* look at a few cache entries per call for one that is due */
	uint64_t t = 0;
	for (unsigned i = 0; i < 4; i++) {
		unsigned s = x->neigh_scan++ & (NEIGH_SLOTS - 1);
		struct nent *e = &x->neigh[s];
		if (e->state != NE_OK || !e->used)
			continue;
		if (!t)
			t = coarse_ms();
		if (t >= e->t_check) {
			e->t_check = t + NEIGH_FRESH_MS;    /* one refresh at a time */
			daddr = e->daddr;
			slot = s;
			break;
		}
	}
	tx_unlock(x);
	if (daddr)
		neigh_refresh(x, slot, daddr);
}

/* ---- open / close / introspection ------------------------------------------ */

static int cfg_check(struct flit_xsk_cfg *c)
{
	if (!c->ifname[0] || !memchr(c->ifname, 0, sizeof(c->ifname)))
		return flit_err(EINVAL, "xsk: no interface name");
	if (!c->frames)
		c->frames = 4096;
	if (!c->frame_size)
		c->frame_size = 2048;
	if (!c->ring_size)
		c->ring_size = 1024;
	if (!pow2(c->frames) || c->frames < 16 || c->frames > (1u << 20))
		return flit_err(EINVAL, "xsk: frames %u: a power of 2 in 16..%u", c->frames,
				1u << 20);
	if (c->frame_size != 2048 && c->frame_size != 4096)
		return flit_err(EINVAL, "xsk: frame_size %u: 2048 or 4096", c->frame_size);
	if (!pow2(c->ring_size) || c->ring_size < 16 || c->ring_size > 32768)
		return flit_err(EINVAL, "xsk: ring_size %u: a power of 2 in 16..32768",
				c->ring_size);
	if ((unsigned)c->zerocopy > FLIT_XSK_ZC_ON)
		return flit_err(EINVAL, "xsk: zerocopy %d unknown", (int)c->zerocopy);
	if (c->zerocopy == FLIT_XSK_ZC_ON && c->xdp_skb_mode)
		return flit_err(EOPNOTSUPP, "xsk: zero-copy needs the XDP program in native "
				"mode, not skb mode");
	if (c->queues > MAX_QUEUES)
		return flit_err(EINVAL, "xsk: %u queues, at most %u", c->queues, MAX_QUEUES);
	return 0;
}

static void describe(struct flit_xsk *x)
{
	const struct flit_xsk_cfg *c = &x->cfg;
	char *p = x->desc, *end = x->desc + sizeof(x->desc);
	bool huge = x->q[0].huge;

#define ADD(...) do { int n_ = snprintf(p, (size_t)(end - p), __VA_ARGS__); \
		if (n_ > 0) p += (n_ < end - p ? n_ : end - p - 1); } while (0)
	if (!x->copy)
		ADD("zero-copy");
	else if (x->zc_why[0])
		ADD("copy mode (zero-copy refused: %s)", x->zc_why);
	else if (c->xdp_skb_mode)
		ADD("copy mode (skb mode program)");
	else
		ADD("copy mode");
	ADD(", %s XDP", c->xdp_skb_mode ? "skb (generic)" : "native");
	ADD(", %s", c->need_wakeup ? "need_wakeup" : "no need_wakeup (kick every send)");
	if (c->busy_poll_us) {
		ADD(", busy-poll %u us", c->busy_poll_us);
		if (c->busy_poll_budget)
			ADD(" budget %u", c->busy_poll_budget);
		ADD(" (recv kicks NAPI when a ring is empty)");
	} else {
		ADD(", busy-poll off");
	}
	if (x->txq == &x->q[0])
		ADD(", %u queue%s (tx on queue 0)", x->nq, x->nq == 1 ? "" : "s");
	else
		ADD(", %u rx queue%s, tx on queue %u (a socket of its own)", x->nq,
		    x->nq == 1 ? "" : "s", x->txqid);
	ADD(", %ux%u B UMEM per queue", c->frames, c->frame_size);
	if (huge)
		ADD(" (huge pages)");
	else if (c->hugepages)
		ADD(" (normal pages: huge pages %s)", x->huge_why[0] ? x->huge_why : "unavailable");
	ADD(", rings %u", x->ring_size);
	if (x->copy)
		ADD(", tx budget %u per kick", x->tx_budget);
	ADD(", TTL %u unicast / %u multicast", x->ttl_uc, x->ttl_mc);
	ADD(", UDP checksum %s", c->verify_csum ? "verified" : "not verified");
	ADD(", max payload %u B", x->max_payload);
	if (x->rx_meta)
		ADD(", RX stamps from XDP RX metadata");
	if (x->tx_ts)
		ADD(", TX stamps from TX metadata (%s)", x->copy ?
		    "software, CLOCK_TAI at completion, as realtime" :
		    "the NIC's, clock phc");
#undef ADD
}

/* The fill and completion rings of a UMEM that no socket uses: libxdp
 * unmaps them when the last socket goes (xsk_socket__delete), and leaves
 * them mapped when none was ever created or binding failed; mapped, they
 * keep the UMEM socket, and its pinned pages, alive after close(). */
static void umem_rings_unmap(struct flit_xsk *x, struct xq *q)
{
	struct xdp_mmap_offsets off;
	socklen_t ol = sizeof(off);

	if (getsockopt(xsk_umem__fd(q->umem), SOL_XDP, XDP_MMAP_OFFSETS, &off, &ol) ||
	    ol != sizeof(off))
		return;
	if (q->fill.ring)
		munmap((char *)q->fill.ring - off.fr.desc,
		       off.fr.desc + x->ring_size * sizeof(uint64_t));
	if (q->comp.ring)
		munmap((char *)q->comp.ring - off.cr.desc,
		       off.cr.desc + x->ring_size * sizeof(uint64_t));
}

static void q_close(struct flit_xsk *x, struct xq *q)
{
	if (q->raw) {
		for (int i = 0; i < 4; i++)
			if (q->rmap[i])
				munmap(q->rmap[i], q->rmap_len[i]);
		if (q->fd >= 0)
			close(q->fd);
	}
	if (q->sk)
		xsk_socket__delete(q->sk);
	else if (q->umem)
		umem_rings_unmap(x, q);
	if (q->umem)
		xsk_umem__delete(q->umem);
	if (q->area)
		munmap(q->area, q->area_len);
	free(q->rx_free);
	free(q->held);
	memset(q, 0, sizeof(*q));
	q->fd = -1;
}

void flit_xsk_close(struct flit_xsk *x)
{
	if (!x)
		return;
	if (x->q)
		for (unsigned i = 0; i < x->nqa; i++)
			q_close(x, &x->q[i]);
	free(x->q);
	free(x->tx_free);
	free(x->txs);
	if (x->nl_open) {
		flit_neigh_close(&x->nl);
		pthread_mutex_destroy(&x->nl_lock);
	}
	free(x);
}

int flit_xsk_open(const struct flit_xsk_cfg *cfg, struct flit_xsk **out)
{
	struct flit_xsk *x = NULL;
	uint8_t mac[6];
	int r;

	if (!cfg || !out)
		return flit_err(EINVAL, "xsk: open without %s", !cfg ? "a config" : "a result pointer");
	*out = NULL;
	if (posix_memalign((void **)&x, 64, sizeof(*x)))
		return flit_err(ENOMEM, "xsk: object");
	memset(x, 0, sizeof(*x));
	x->cfg = *cfg;
	atomic_init(&x->lock, 0);
	r = cfg_check(&x->cfg);
	if (r)
		goto fail;
	const struct flit_xsk_cfg *c = &x->cfg;

	x->ifindex = if_nametoindex(c->ifname);
	if (!x->ifindex) {
		r = flit_err(errno == ENXIO ? ENODEV : errno, "xsk: no interface %s", c->ifname);
		goto fail;
	}
	r = if_facts(x, mac);
	if (r)
		goto fail;

	unsigned devq = dev_rx_queues(c->ifname);
	x->nq = c->queues ? c->queues : devq;
	if (x->nq > devq) {
		r = flit_err(EINVAL, "xsk: %u queues asked for, %s has %u rx queue%s",
			     x->nq, c->ifname, devq, devq == 1 ? "" : "s");
		goto fail;
	}
	if (x->nq > MAX_QUEUES)
		x->nq = MAX_QUEUES;
	if (c->tx_own_queue) {
		if (devq < 2 || (c->queues && c->queues >= devq)) {
			r = flit_err(EINVAL, "xsk: a sending queue of its own (context.xdp.tx_queue = "
				     "own) is %s's last queue, and %s (veth: create it with "
				     "numtxqueues 2 numrxqueues 2; a NIC: ethtool -L)", c->ifname,
				     devq < 2 ? "it has only one" : "context.xdp.queues asks to receive on it");
			goto fail;
		}
		if (x->nq > devq - 1)
			x->nq = devq - 1;
	}
	x->nqa = x->nq + (c->tx_own_queue ? 1 : 0);

	x->ring_size = c->ring_size;
	x->frame_mask = ~(uint64_t)(c->frame_size - 1);
	x->verify_csum = c->verify_csum;
	x->need_wakeup = c->need_wakeup;
	x->rx_kick_busy = c->busy_poll_us > 0;
	x->ttl_mc = c->ttl ? c->ttl : 1;
	x->ttl_uc = default_ttl();
	x->tx_budget = COPY_TX_BUDGET;
	x->ip_id = (uint16_t)(getpid() ^ (uintptr_t)x >> 6);
	memcpy(x->tmpl.smac, mac, 6);
	x->tmpl.saddr = x->addr.s_addr;

	uint32_t mp = c->frame_size - FLIT_XSK_HEADROOM - FLIT_PKT_HDR_LEN;
	if (x->mtu >= FLIT_PKT_IP_LEN + FLIT_PKT_UDP_LEN &&
	    x->mtu - FLIT_PKT_IP_LEN - FLIT_PKT_UDP_LEN < mp)
		mp = x->mtu - FLIT_PKT_IP_LEN - FLIT_PKT_UDP_LEN;
	x->max_payload = mp;

	if (posix_memalign((void **)&x->q, 64, x->nqa * sizeof(*x->q)))
		x->q = NULL;
	if (x->q)
		memset(x->q, 0, x->nqa * sizeof(*x->q));
	if (!x->q) {
		r = flit_err(ENOMEM, "xsk: queue state");
		goto fail;
	}
	for (unsigned i = 0; i < x->nqa; i++)
		x->q[i].fd = -1;
	x->txq = &x->q[c->tx_own_queue ? x->nq : 0];
	x->txqid = c->tx_own_queue ? devq - 1 : 0;
	x->rx_meta = c->rx_meta;
	x->tx_ts = c->tx_timestamps;
	if (x->tx_ts) {
		x->tai_off = tai_offset();
		x->txs = calloc(x->ring_size, sizeof(*x->txs));
		if (!x->txs) {
			r = flit_err(ENOMEM, "xsk: TX stamp ring");
			goto fail;
		}
	}
	x->ntx = c->frames / 2;
	x->tx_free = calloc(x->ntx, sizeof(*x->tx_free));
	if (!x->tx_free) {
		r = flit_err(ENOMEM, "xsk: tx frame stack");
		goto fail;
	}
	/* keep the completion ring from filling up: reap once half of it
	 * could be waiting */
	x->reap_below = x->ntx > x->ring_size / 2 ? x->ntx - x->ring_size / 2 : 0;

	bool zc = c->zerocopy != FLIT_XSK_ZC_OFF && !c->xdp_skb_mode;
	size_t len = (size_t)c->frames * c->frame_size;
	uint64_t deadline = mono_ms() + BIND_RETRY_MS;
	for (unsigned i = 0; i < x->nqa; i++) {
		struct xq *q = &x->q[i];
		unsigned qid = q == x->txq ? x->txqid : i;
		q->fd = -1;
		q->nrx = q == x->txq ? c->frames - x->ntx : c->frames;
		q->rx_free = calloc(q->nrx, sizeof(*q->rx_free));
		q->held = calloc(x->ring_size, sizeof(*q->held));
		if (!q->rx_free || !q->held) {
			r = flit_err(ENOMEM, "xsk: frame stacks of queue %u", i);
			goto fail;
		}
		r = area_alloc(x, q, len);
		if (r)
			goto fail;
		/* TX metadata is the sending socket's only */
		r = q == x->txq && c->tx_timestamps ? raw_umem_create(x, q, len)
						    : umem_create(x, q, len);
		if (r)
			goto fail;
		r = sock_create(x, q, qid, &zc, deadline);
		if (r)
			goto fail;
		/* later queues do not try zero-copy again once it failed, nor
		 * copy once it worked */
		x->copy = !zc;
		r = sock_options(x, q, qid);
		if (r)
			goto fail;
		for (unsigned f = q->nrx; f-- > 0;)
			q->rx_free[q->rx_nfree++] = (uint64_t)f * c->frame_size;
		q->refill_at = x->ring_size / 4 < REFILL_BATCH ? x->ring_size / 4 : REFILL_BATCH;
		if (!q->refill_at)
			q->refill_at = 1;
		rx_refill(q);
	}
	for (unsigned f = x->ntx; f-- > 0;)
		x->tx_free[x->tx_nfree++] = (uint64_t)(c->frames - x->ntx + f) * c->frame_size;
	/* copy mode transmits only inside a syscall: kick whatever the flag
	 * says (it is not kept up to date there) */
	x->tx_need_wakeup = c->need_wakeup && !x->copy;

	r = flit_neigh_open(&x->nl, c->ifname, x->ifindex);
	if (r)
		goto fail;
	pthread_mutex_init(&x->nl_lock, NULL);
	x->nl_open = true;

	describe(x);
	flit_debug("xsk: %s: %s", c->ifname, x->desc);
	*out = x;
	return 0;
fail:
	flit_xsk_close(x);
	return r;
}

unsigned flit_xsk_queues(const struct flit_xsk *x)
{
	return x->nq;
}

int flit_xsk_fd(const struct flit_xsk *x, unsigned queue)
{
	return queue < x->nq ? x->q[queue].fd : -EINVAL;
}

struct in_addr flit_xsk_addr(const struct flit_xsk *x)
{
	return x->addr;
}

const char *flit_xsk_describe(const struct flit_xsk *x)
{
	return x->desc;
}

uint32_t flit_xsk_max_payload(const struct flit_xsk *x)
{
	return x->max_payload;
}

void flit_xsk_stats(const struct flit_xsk *x, struct flit_xsk_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->rx_frames = x->rs.frames;
	out->rx_bytes = x->rs.bytes;
	out->rx_dropped_short = x->rs.short_;
	out->rx_dropped_proto = x->rs.proto;
	out->rx_dropped_ipcsum = x->rs.ipcsum;
	out->rx_dropped_udpcsum = x->rs.udpcsum;
	out->tx_frames = x->tx_frames;
	out->tx_bytes = x->tx_bytes;
	out->tx_full = x->tx_full;
	out->tx_no_neigh = x->tx_no_neigh;
	out->tx_too_big = x->tx_too_big;
	out->wakeups = x->rs.wakeups + x->tx_wakeups;
	out->rx_ts_hw = x->rx_ts_hw;
	out->rx_ts_none = x->rx_ts_none;
	out->tx_ts = x->tx_ts_got;
	out->tx_ts_none = x->tx_ts_none;
	out->tx_ts_lost = x->tx_ts_lost;
}
