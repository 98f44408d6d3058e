// SPDX-License-Identifier: BSD-2-Clause
/*
 * AF_XDP data path (transports/xdp/xsk_io.h) on a veth pair, against kernel
 * UDP sockets.  Needs root (namespaces, XDP, AF_XDP): otherwise, or when the
 * kernel has no AF_XDP or refuses the XDP program, the whole file is a skip
 * with the reason (exit 77).
 *
 * Topology, private to this test process (both namespaces die with it):
 *
 *   netns A: this process (unshare)          netns B (unshare, held by an fd)
 *   +------------------------------+          +---------------------------+
 *   | veth0 10.99.0.1/24           |<-------->| veth1 10.99.0.2/24        |
 *   |   XDP: IPv4/UDP -> xsks[rxq] |   veth   |   tx checksum offload off |
 *   |        everything else: pass|          | kernel UDP sockets        |
 *   | flit_xsk on veth0 queue 0    |          |                           |
 *   | route 224.0.0.0/4 dev veth0  |          | route 224.0.0.0/4 dev veth1|
 *   +------------------------------+          +---------------------------+
 *
 * The XDP program is the test's own, ten instructions assembled here: it
 * redirects only IPv4/UDP (libxdp's default program redirects everything,
 * ARP included, and neighbour resolution could never complete), and it is
 * not flit's program (written elsewhere).  B's tx checksum offload is off
 * because a veth forwards locally sent packets with partial checksums
 * (CHECKSUM_PARTIAL: only the pseudo-header sum in the UDP checksum field),
 * which the AF_XDP path would rightly count as bad when it verifies them.
 *
 * Sockets of B are created by switching this (single) thread into B with
 * setns() and back: a socket stays in the namespace it was created in.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <net/if.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "testlib.h"
#include "error.h"
#include "xdp/pkt.h"
#include "xdp/xsk_io.h"
#include "vethns.h"

#define IF_A     "veth0"
#define IF_B     "veth1"
#define ADDR_A   "10.99.0.1"
#define ADDR_B   "10.99.0.2"
#define GROUP    "239.192.76.1"
#define MAXD     256

static int map_fd = -1, prog_fd = -1;
static unsigned ifindex_a;
static bool prog_skb;                   /* attached in skb mode (else native) */

/* ---- namespaces, commands ------------------------------------------------- */


static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* A UDP socket in B bound to ADDR_B:port (port 0: any), non-blocking, with
 * a big receive buffer; joins GROUP when join. */
static int udp_b(uint16_t port, bool join, struct sockaddr_in *bound)
{
	in_b();
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	assert_true(fd >= 0);
	int v = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v));
	struct sockaddr_in a = sin_of(join ? "0.0.0.0" : ADDR_B, port);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	if (join) {
		struct ip_mreqn m = { .imr_ifindex = (int)if_nametoindex(IF_B) };
		inet_pton(AF_INET, GROUP, &m.imr_multiaddr);
		assert_int_equal(setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)), 0);
	}
	socklen_t l = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &l);
	if (bound)
		*bound = a;
	in_a();
	return fd;
}

/* Udp InCsumErrors and InErrors of B's /proc/net/snmp. */
static void udp_errors_b(unsigned long *csum, unsigned long *inerr)
{
	char names[512] = "", vals[512] = "", line[512];
	in_b();
	FILE *f = fopen("/proc/net/snmp", "r");
	in_a();
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Udp:", 4))
			continue;
		if (!names[0])
			snprintf(names, sizeof(names), "%s", line);
		else
			snprintf(vals, sizeof(vals), "%s", line);
	}
	fclose(f);
	*csum = *inerr = ~0ul;
	char *sn, *sv;
	char *n = strtok_r(names, " \n", &sn), *v = strtok_r(vals, " \n", &sv);
	while (n && v) {
		if (!strcmp(n, "InCsumErrors"))
			*csum = strtoul(v, NULL, 10);
		if (!strcmp(n, "InErrors"))
			*inerr = strtoul(v, NULL, 10);
		n = strtok_r(NULL, " \n", &sn);
		v = strtok_r(NULL, " \n", &sv);
	}
	assert_true(*csum != ~0ul && *inerr != ~0ul);
}

/* ---- the XDP program -------------------------------------------------------- */

#define INSN(c, d, s, o, i) \
	((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })

static int prog_load(void)
{
	struct bpf_insn p[] = {
		INSN(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 4, 0),            /* 0: r2 = data_end */
		INSN(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 0, 0),            /* 1: r3 = data */
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, 4, 3, 0, 0),          /* 2: r4 = r3 */
		INSN(BPF_ALU64 | BPF_ADD | BPF_K, 4, 0, 0, 34),         /* 3: r4 += eth+ip */
		INSN(BPF_JMP | BPF_JGT | BPF_X, 4, 2, 10, 0),           /* 4: short: pass */
		INSN(BPF_LDX | BPF_MEM | BPF_H, 5, 3, 12, 0),           /* 5: ethertype */
		INSN(BPF_JMP | BPF_JNE | BPF_K, 5, 0, 8, htons(0x0800)),/* 6: not IPv4 */
		INSN(BPF_LDX | BPF_MEM | BPF_B, 5, 3, 23, 0),           /* 7: IP protocol */
		INSN(BPF_JMP | BPF_JNE | BPF_K, 5, 0, 6, 17),           /* 8: not UDP */
		INSN(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 16, 0),           /* 9: rx_queue_index */
		INSN(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd), /* 10-11 */
		INSN(0, 0, 0, 0, 0),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, XDP_PASS),   /* 12: no socket: pass */
		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map), /* 13 */
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),                   /* 14 */
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, XDP_PASS),   /* 15: pass */
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	return bpf_prog_load(BPF_PROG_TYPE_XDP, "flit_t_udp", "GPL", p,
			     sizeof(p) / sizeof(p[0]), NULL);
}

static int prog_attach(bool skb)
{
	bpf_xdp_detach((int)ifindex_a, prog_skb ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE, NULL);
	int r = bpf_xdp_attach((int)ifindex_a, prog_fd,
			       skb ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE, NULL);
	if (!r)
		prog_skb = skb;
	return r;
}

/* ---- xsk helpers ------------------------------------------------------------ */

/* Objects a test opened, closed by the teardown when an assertion cut the
 * test short (a socket left open would keep the queue busy for the rest). */
static struct flit_xsk *opened[4];

static void track(struct flit_xsk *x)
{
	for (unsigned i = 0; i < 4; i++)
		if (!opened[i]) {
			opened[i] = x;
			return;
		}
	fail_msg("more than 4 xsk objects open");
}

static void xsk_close(struct flit_xsk *x)
{
	for (unsigned i = 0; i < 4; i++)
		if (opened[i] == x)
			opened[i] = NULL;
	flit_xsk_close(x);
}

static int teardown(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		flit_xsk_close(opened[i]);
		opened[i] = NULL;
	}
	if (prog_skb && prog_attach(false))
		return -1;
	return 0;
}

static struct flit_xsk_cfg cfg_default(void)
{
	struct flit_xsk_cfg c = {
		.ifname = IF_A,
		.queues = 1,
		.need_wakeup = true,
		.verify_csum = true,
		.xdp_skb_mode = prog_skb,
		.ttl = 1,
	};
	return c;
}

static struct flit_xsk *xsk_open_cfg(const struct flit_xsk_cfg *c)
{
	struct flit_xsk *x = NULL;
	int r = flit_xsk_open(c, &x);
	if (r)
		fail_msg("flit_xsk_open: %d %s", r, flit_errmsg());
	assert_non_null(x);
	uint32_t q = 0;
	int fd = flit_xsk_fd(x, 0);
	assert_true(fd >= 0);
	assert_int_equal(bpf_map_update_elem(map_fd, &q, &fd, 0), 0);
	track(x);
	return x;
}

static struct flit_xsk *xsk_open(void)
{
	struct flit_xsk_cfg c = cfg_default();
	return xsk_open_cfg(&c);
}

/* Receive until want datagrams (copied into bufs) or ms pass. */
struct got {
	uint8_t buf[MAXD][2048];
	uint32_t len[MAXD];
	struct sockaddr_in src[MAXD], dst[MAXD];
	unsigned n;
};

static unsigned xsk_recv_until(struct flit_xsk *x, struct got *g, unsigned want, unsigned ms)
{
	struct flit_dgram d[64];
	struct sockaddr_in dst[64];
	uint64_t end = tl_now_ms() + ms;
	while (g->n < want && tl_now_ms() < end) {
		unsigned room = want - g->n < 64 ? want - g->n : 64;
		int r = flit_xsk_recv(x, d, dst, room);
		assert_true(r >= 0);
		for (int i = 0; i < r; i++) {
			assert_true(d[i].len <= sizeof(g->buf[0]));
			memcpy(g->buf[g->n], d[i].buf, d[i].len);
			g->len[g->n] = d[i].len;
			g->src[g->n] = d[i].addr;
			g->dst[g->n] = dst[i];
			assert_int_equal(d[i].rx_ts_ns, 0);
			g->n++;
		}
	}
	return g->n;
}

/* Receive up to want datagrams on a non-blocking kernel socket within ms. */
static unsigned sock_recv_until(int fd, struct got *g, unsigned want, unsigned ms)
{
	uint64_t end = tl_now_ms() + ms;
	while (g->n < want && tl_now_ms() < end) {
		socklen_t l = sizeof(g->src[0]);
		ssize_t r = recvfrom(fd, g->buf[g->n], sizeof(g->buf[0]), 0,
				     (struct sockaddr *)&g->src[g->n], &l);
		if (r < 0) {
			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
			usleep(200);
			continue;
		}
		g->len[g->n++] = (uint32_t)r;
	}
	return g->n;
}

/* Send n datagrams (tl_fill payloads of lens[i] bytes, seq first + i) to
 * dst through x, retrying a full ring; asserts each is taken. */
static void xsk_send_all(struct flit_xsk *x, const struct sockaddr_in *dst, unsigned n,
			 uint64_t first, uint32_t (*len_of)(unsigned), uint16_t sport)
{
	static uint8_t bufs[64][2048];
	unsigned i = 0;
	uint64_t end = tl_now_ms() + 2000;
	while (i < n) {
		struct flit_dgram d[16];
		unsigned k = n - i < 16 ? n - i : 16;
		for (unsigned j = 0; j < k; j++) {
			uint32_t len = len_of(i + j);
			tl_fill(bufs[j], len, first + i + j);
			d[j] = (struct flit_dgram){ .buf = bufs[j], .len = len, .addr = *dst };
		}
		int r = flit_xsk_send(x, d, k, sport);
		if (r < 0)
			fail_msg("flit_xsk_send: %d %s", r, flit_errmsg());
		i += (unsigned)r;
		if (!r) {
			flit_xsk_tx_service(x);
			assert_true(tl_now_ms() < end);
		}
	}
	flit_xsk_tx_service(x);
}

static uint32_t len_cycle(unsigned i)
{
	return 8 + (i * 37) % 1400;
}

static uint32_t len_64(unsigned i)
{
	(void)i;
	return 64;
}

static void check_in_order(const struct got *g, uint64_t first, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t seq;
		assert_int_equal(tl_check(g->buf[i], g->len[i], &seq), 0);
		assert_int_equal(seq, first + i);
	}
}

/* ---- tests ------------------------------------------------------------------- */

static void kernel_udp_datagrams_arrive_with_payload_source_and_destination(void **state)
{
	(void)state;
	struct flit_xsk *x = xsk_open();
	struct sockaddr_in src;
	int fd = udp_b(0, false, &src);
	static struct got g;
	memset(&g, 0, sizeof(g));

	struct sockaddr_in to_a = sin_of(ADDR_A, 14600), to_g = sin_of(GROUP, 14601);
	int ttl = 4;
	setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl));
	uint8_t b[1500];
	unsigned sent = 0;
	for (unsigned i = 0; i < 100; i++) {
		uint32_t len = len_cycle(i);
		tl_fill(b, len, i);
		const struct sockaddr_in *to = i % 2 ? &to_g : &to_a;
		assert_int_equal(sendto(fd, b, len, 0, (const struct sockaddr *)to, sizeof(*to)),
				 (ssize_t)len);
		sent++;
		if (i % 16 == 15)
			xsk_recv_until(x, &g, sent, 1000);
	}
	assert_int_equal(xsk_recv_until(x, &g, 100, 2000), 100);
	check_in_order(&g, 0, 100);
	uint64_t frame_bytes = 0;
	for (unsigned i = 0; i < 100; i++) {
		assert_int_equal(g.len[i], len_cycle(i));
		assert_int_equal(g.src[i].sin_family, AF_INET);
		assert_int_equal(g.src[i].sin_addr.s_addr, src.sin_addr.s_addr);
		assert_int_equal(g.src[i].sin_port, src.sin_port);
		const struct sockaddr_in *to = i % 2 ? &to_g : &to_a;
		assert_int_equal(g.dst[i].sin_addr.s_addr, to->sin_addr.s_addr);
		assert_int_equal(g.dst[i].sin_port, to->sin_port);
		frame_bytes += 42 + g.len[i];
	}

	/* nothing more: recv returns 0 at once */
	struct flit_dgram d[4];
	assert_int_equal(flit_xsk_recv(x, d, NULL, 4), 0);

	struct flit_xsk_stats st;
	flit_xsk_stats(x, &st);
	assert_int_equal(st.rx_frames, 100);
	assert_int_equal(st.rx_bytes, frame_bytes);
	assert_int_equal(st.rx_dropped_short + st.rx_dropped_proto + st.rx_dropped_ipcsum +
			 st.rx_dropped_udpcsum, 0);
	/* copy mode: the kernel never asks for a fill-ring wakeup */
	assert_int_equal(st.wakeups, 0);
	close(fd);
	xsk_close(x);
}

static void xsk_multicast_reaches_a_joined_socket_with_good_checksums(void **state)
{
	(void)state;
	struct flit_xsk *x = xsk_open();
	int fd = udp_b(14700, true, NULL);
	unsigned long csum0, inerr0, csum1, inerr1;
	udp_errors_b(&csum0, &inerr0);

	struct sockaddr_in to = sin_of(GROUP, 14700);
	xsk_send_all(x, &to, 200, 1000, len_cycle, htons(40001));
	static struct got g;
	memset(&g, 0, sizeof(g));
	assert_int_equal(sock_recv_until(fd, &g, 200, 2000), 200);
	check_in_order(&g, 1000, 200);
	for (unsigned i = 0; i < 200; i++) {
		assert_int_equal(g.len[i], len_cycle(i));
		assert_int_equal(g.src[i].sin_addr.s_addr, flit_xsk_addr(x).s_addr);
		assert_int_equal(g.src[i].sin_port, htons(40001));
	}
	udp_errors_b(&csum1, &inerr1);
	assert_int_equal(csum1, 0);
	assert_int_equal(inerr1, 0);

	struct flit_xsk_stats st;
	flit_xsk_stats(x, &st);
	assert_int_equal(st.tx_frames, 200);
	uint64_t bytes = 0;
	for (unsigned i = 0; i < 200; i++)
		bytes += 42 + len_cycle(i);
	assert_int_equal(st.tx_bytes, bytes);
	assert_true(st.wakeups >= 13);   /* copy mode: a kick per send call */
	assert_int_equal(st.tx_no_neigh, 0);
	close(fd);
	xsk_close(x);
}

static void xsk_unicast_resolves_the_neighbour_then_reaches_the_peer(void **state)
{
	(void)state;
	assert_int_equal(sh("ip neigh flush dev " IF_A " >/dev/null 2>&1"), 0);
	struct flit_xsk *x = xsk_open();
	struct sockaddr_in b;
	int fd = udp_b(0, false, &b);
	unsigned long csum1, inerr1;

	uint8_t buf[100];
	tl_fill(buf, sizeof(buf), 0);
	struct flit_dgram d = { .buf = buf, .len = sizeof(buf), .addr = b };
	uint64_t t0 = tl_now_ms();
	int r = flit_xsk_send(x, &d, 1, htons(40002));
	/* the table was flushed: unknown, resolution started */
	assert_int_equal(r, -EHOSTUNREACH);
	assert_non_null(strstr(flit_errmsg(), "resolution started"));
	unsigned refused = 1;
	while (r != 1) {
		assert_true(tl_now_ms() - t0 < 1000);
		usleep(5000);
		r = flit_xsk_send(x, &d, 1, htons(40002));
		if (r == -EHOSTUNREACH)
			refused++;
		else
			assert_int_equal(r, 1);
	}
	printf("# next hop resolved after %llu ms\n", (unsigned long long)(tl_now_ms() - t0));
	struct flit_xsk_stats st;
	flit_xsk_stats(x, &st);
	assert_int_equal(st.tx_no_neigh, refused);

	xsk_send_all(x, &b, 100, 1, len_cycle, htons(40002));
	static struct got g;
	memset(&g, 0, sizeof(g));
	assert_int_equal(sock_recv_until(fd, &g, 101, 2000), 101);
	check_in_order(&g, 0, 1);
	for (unsigned i = 1; i < 101; i++) {
		uint64_t seq;
		assert_int_equal(tl_check(g.buf[i], g.len[i], &seq), 0);
		assert_int_equal(seq, i);
		assert_int_equal(g.src[i].sin_addr.s_addr, flit_xsk_addr(x).s_addr);
		assert_int_equal(g.src[i].sin_port, htons(40002));
	}
	udp_errors_b(&csum1, &inerr1);
	assert_int_equal(csum1, 0);
	assert_int_equal(inerr1, 0);

	/* the cache answers now: keep sending through tx_service refreshes */
	for (int i = 0; i < 50; i++) {
		assert_int_equal(flit_xsk_send(x, &d, 1, htons(40002)), 1);
		flit_xsk_tx_service(x);
	}
	close(fd);
	xsk_close(x);
}

static void unicast_to_a_local_address_is_refused_for_the_kernel_path(void **state)
{
	(void)state;
	struct flit_xsk *x = xsk_open();
	uint8_t buf[8] = { 0 };
	struct flit_dgram d = { .buf = buf, .len = 8, .addr = sin_of(ADDR_A, 9) };
	assert_int_equal(flit_xsk_send(x, &d, 1, htons(1)), -EHOSTUNREACH);
	assert_non_null(strstr(flit_errmsg(), "not reached through"));
	d.addr = sin_of("10.98.0.1", 9);    /* no route at all */
	assert_int_equal(flit_xsk_send(x, &d, 1, htons(1)), -EHOSTUNREACH);
	struct flit_xsk_stats st;
	flit_xsk_stats(x, &st);
	assert_int_equal(st.tx_no_neigh, 2);
	assert_int_equal(st.tx_frames, 0);
	xsk_close(x);
}

static void max_payload_is_sent_and_one_byte_more_is_emsgsize(void **state)
{
	(void)state;
	struct flit_xsk *x = xsk_open();
	int fd = udp_b(14800, true, NULL);
	uint32_t mp = flit_xsk_max_payload(x);
	/* MTU 1500 is the bound here: 2048 - 256 - 42 would be 1750 */
	assert_int_equal(mp, 1472);

	static uint8_t buf[2048];
	tl_fill(buf, mp + 1, 77);
	struct flit_dgram d[2] = {
		{ .buf = buf, .len = mp, .addr = sin_of(GROUP, 14800) },
		{ .buf = buf, .len = mp + 1, .addr = sin_of(GROUP, 14800) },
	};
	/* the second stops the batch; then it is the first and fails */
	assert_int_equal(flit_xsk_send(x, d, 2, htons(5)), 1);
	assert_int_equal(flit_xsk_send(x, &d[1], 1, htons(5)), -EMSGSIZE);
	assert_non_null(strstr(flit_errmsg(), "1473"));
	struct flit_xsk_stats st;
	flit_xsk_stats(x, &st);
	assert_int_equal(st.tx_too_big, 1);
	assert_int_equal(st.tx_frames, 1);

	static struct got g;
	memset(&g, 0, sizeof(g));
	assert_int_equal(sock_recv_until(fd, &g, 1, 1000), 1);
	assert_int_equal(g.len[0], mp);
	uint64_t seq;
	assert_int_equal(tl_check(g.buf[0], mp, &seq), 0);
	assert_int_equal(seq, 77);
	close(fd);
	xsk_close(x);
}

static void reopen_on_the_same_queue_right_after_close_succeeds(void **state)
{
	(void)state;
	struct flit_xsk *x = xsk_open();
	xsk_close(x);
	uint64_t t0 = tl_now_ms();
	x = xsk_open();         /* EBUSY for a while: retried inside */
	uint64_t ms = tl_now_ms() - t0;
	printf("# reopened after %llu ms\n", (unsigned long long)ms);
	assert_true(ms < 1500);

	/* and it works */
	int fd = udp_b(0, false, NULL);
	uint8_t b[32];
	tl_fill(b, sizeof(b), 5);
	struct sockaddr_in to = sin_of(ADDR_A, 14900);
	assert_int_equal(sendto(fd, b, sizeof(b), 0, (struct sockaddr *)&to, sizeof(to)), 32);
	static struct got g;
	memset(&g, 0, sizeof(g));
	assert_int_equal(xsk_recv_until(x, &g, 1, 1000), 1);
	close(fd);
	xsk_close(x);
}

static void a_second_socket_on_a_taken_queue_fails_with_ebusy_after_retrying(void **state)
{
	(void)state;
	struct flit_xsk *x = xsk_open();
	struct flit_xsk_cfg c = cfg_default();
	struct flit_xsk *y = NULL;
	uint64_t t0 = tl_now_ms();
	assert_int_equal(flit_xsk_open(&c, &y), -EBUSY);
	assert_null(y);
	assert_true(tl_now_ms() - t0 >= 900);
	assert_non_null(strstr(flit_errmsg(), "busy"));
	xsk_close(x);
}

static void skb_and_native_mode_programs_both_deliver(void **state)
{
	(void)state;
	for (int skb = 1; skb >= 0; skb--) {
		assert_int_equal(prog_attach(skb), 0);
		struct flit_xsk *x = xsk_open();
		const char *desc = flit_xsk_describe(x);
		printf("# %s\n", desc);
		assert_non_null(strstr(desc, skb ? "skb" : "native"));
		assert_non_null(strstr(desc, "copy mode"));

		int fd = udp_b(0, false, NULL);
		uint8_t b[200];
		struct sockaddr_in to = sin_of(ADDR_A, 15000);
		for (unsigned i = 0; i < 20; i++) {
			tl_fill(b, sizeof(b), i);
			assert_int_equal(sendto(fd, b, sizeof(b), 0, (struct sockaddr *)&to,
						sizeof(to)), 200);
		}
		static struct got g;
		memset(&g, 0, sizeof(g));
		assert_int_equal(xsk_recv_until(x, &g, 20, 1000), 20);
		check_in_order(&g, 0, 20);

		int mfd = udp_b(15001, true, NULL);
		struct sockaddr_in mto = sin_of(GROUP, 15001);
		xsk_send_all(x, &mto, 20, 0, len_64, htons(15001));
		memset(&g, 0, sizeof(g));
		assert_int_equal(sock_recv_until(mfd, &g, 20, 1000), 20);
		check_in_order(&g, 0, 20);
		close(fd);
		close(mfd);
		xsk_close(x);
	}
	assert_false(prog_skb);
}

static void zero_copy_on_veth_is_refused_or_falls_back_as_configured(void **state)
{
	(void)state;
	struct flit_xsk_cfg c = cfg_default();
	struct flit_xsk *x = NULL;

	c.zerocopy = FLIT_XSK_ZC_ON;
	assert_int_equal(flit_xsk_open(&c, &x), -EOPNOTSUPP);
	assert_null(x);
	assert_non_null(strstr(flit_errmsg(), "zero-copy"));

	c.zerocopy = FLIT_XSK_ZC_AUTO;
	x = xsk_open_cfg(&c);
	const char *desc = flit_xsk_describe(x);
	printf("# %s\n", desc);
	assert_non_null(strstr(desc, "copy mode (zero-copy refused"));
	xsk_close(x);

	c.zerocopy = FLIT_XSK_ZC_ON;
	c.xdp_skb_mode = true;
	assert_int_equal(flit_xsk_open(&c, &x), -EOPNOTSUPP);
	assert_non_null(strstr(flit_errmsg(), "native"));
}

static void describe_names_every_performance_choice(void **state)
{
	(void)state;
	struct flit_xsk_cfg c = cfg_default();
	c.zerocopy = FLIT_XSK_ZC_OFF;
	c.busy_poll_us = 50;
	c.busy_poll_budget = 16;
	c.hugepages = true;
	c.frames = 1024;
	c.ring_size = 256;
	struct flit_xsk *x = xsk_open_cfg(&c);
	const char *desc = flit_xsk_describe(x);
	printf("# %s\n", desc);
	assert_non_null(strstr(desc, "copy mode"));
	assert_non_null(strstr(desc, "native XDP"));
	assert_non_null(strstr(desc, "need_wakeup"));
	assert_non_null(strstr(desc, "busy-poll 50 us budget 16"));
	assert_non_null(strstr(desc, "1 queue"));
	assert_non_null(strstr(desc, "1024x2048 B UMEM"));
	assert_non_null(strstr(desc, "huge pages"));    /* used, or why not */
	assert_non_null(strstr(desc, "rings 256"));
	assert_non_null(strstr(desc, "UDP checksum verified"));
	assert_non_null(strstr(desc, "max payload 1472 B"));

	/* busy poll: an empty recv drives NAPI with a syscall, counted */
	struct flit_dgram d[4];
	struct flit_xsk_stats st;
	assert_int_equal(flit_xsk_recv(x, d, NULL, 4), 0);
	flit_xsk_stats(x, &st);
	assert_int_equal(st.wakeups, 1);
	xsk_close(x);
}

/* Frames crafted in B and sent raw on veth1: each bad one is dropped and
 * counted under its reason, the good one after them arrives. */
static void malformed_frames_are_dropped_and_counted(void **state)
{
	(void)state;
	struct flit_xsk *x = xsk_open();
	in_b();
	int ps = socket(AF_PACKET, SOCK_RAW, 0);
	in_a();
	assert_true(ps >= 0);
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_halen = 6 };
	in_b();
	ll.sll_ifindex = (int)if_nametoindex(IF_B);
	in_a();

	uint8_t mac_a[6];
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), IF_A);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	assert_int_equal(ioctl(s, SIOCGIFHWADDR, &ifr), 0);
	close(s);
	memcpy(mac_a, ifr.ifr_hwaddr.sa_data, 6);

	struct flit_pkt_hdr h = {
		.saddr = sin_of(ADDR_B, 0).sin_addr.s_addr,
		.daddr = sin_of(ADDR_A, 0).sin_addr.s_addr,
		.sport = htons(1111), .dport = htons(2222), .ttl = 64,
	};
	memcpy(h.dmac, mac_a, 6);
	uint8_t f[128], pl[40];
	tl_fill(pl, sizeof(pl), 9);
	uint32_t n;

#define SEND(len) assert_int_equal(sendto(ps, f, (len), 0, (struct sockaddr *)&ll, \
					  sizeof(ll)), (ssize_t)(len))
	n = flit_pkt_build(f, sizeof(f), &h, pl, sizeof(pl));
	f[n - 1] ^= 1;                  /* bad UDP checksum */
	SEND(n);
	n = flit_pkt_build(f, sizeof(f), &h, pl, sizeof(pl));
	f[14 + 8] ^= 1;                 /* TTL: bad IPv4 header checksum */
	SEND(n);
	n = flit_pkt_build(f, sizeof(f), &h, pl, sizeof(pl));
	SEND(n - 10);                   /* truncated: total length > frame */
	n = flit_pkt_build(f, sizeof(f), &h, pl, sizeof(pl));
	f[14 + 6] = 0x20;               /* a first fragment (MF) */
	f[14 + 10] = f[14 + 11] = 0;
	uint16_t v = (uint16_t)~flit_csum_fold(flit_csum_partial(f + 14, 20, 0));
	memcpy(f + 14 + 10, &v, 2);
	SEND(n);
	n = flit_pkt_build(f, sizeof(f), &h, pl, sizeof(pl));
	SEND(n);                        /* good */
#undef SEND
	close(ps);

	static struct got g;
	memset(&g, 0, sizeof(g));
	assert_int_equal(xsk_recv_until(x, &g, 1, 1000), 1);
	check_in_order(&g, 9, 1);
	struct flit_xsk_stats st;
	flit_xsk_stats(x, &st);
	assert_int_equal(st.rx_frames, 5);
	assert_int_equal(st.rx_dropped_udpcsum, 1);
	assert_int_equal(st.rx_dropped_ipcsum, 1);
	assert_int_equal(st.rx_dropped_short, 1);
	assert_int_equal(st.rx_dropped_proto, 1);
	xsk_close(x);
}

/* Many more datagrams than the rings and UMEM hold, both ways: frames are
 * recycled through fill/rx and tx/completion rings without loss. */
static void rings_wrap_around_many_times_without_loss(void **state)
{
	(void)state;
	struct flit_xsk_cfg c = cfg_default();
	c.frames = 64;                  /* 32 rx + 32 tx frames */
	c.ring_size = 16;
	struct flit_xsk *x = xsk_open_cfg(&c);
	int fd = udp_b(15100, true, NULL);
	struct sockaddr_in to = sin_of(GROUP, 15100);
	static struct got g;

	for (unsigned round = 0; round < 20; round++) {
		xsk_send_all(x, &to, 100, round * 100, len_64, htons(15100));
		memset(&g, 0, sizeof(g));
		assert_int_equal(sock_recv_until(fd, &g, 100, 1000), 100);
		check_in_order(&g, round * 100, 100);
	}
	struct flit_xsk_stats st;
	flit_xsk_stats(x, &st);
	assert_int_equal(st.tx_frames, 2000);

	int ufd = udp_b(0, false, NULL);
	struct sockaddr_in to_a = sin_of(ADDR_A, 15101);
	uint8_t b[64];
	for (unsigned round = 0; round < 20; round++) {
		/* 12 fit the fill ring, kept topped up from the 16 spare
		 * frames while the last call's 12 views are out (refilled
		 * once the kernel took 4, a quarter of the ring: >= 13 in it) */
		for (unsigned i = 0; i < 12; i++) {
			tl_fill(b, sizeof(b), round * 12 + i);
			assert_int_equal(sendto(ufd, b, sizeof(b), 0, (struct sockaddr *)&to_a,
						sizeof(to_a)), 64);
		}
		memset(&g, 0, sizeof(g));
		assert_int_equal(xsk_recv_until(x, &g, 12, 1000), 12);
		check_in_order(&g, round * 12, 12);
	}
	close(fd);
	close(ufd);
	xsk_close(x);
}

static void send_stops_at_a_full_ring_and_counts_it(void **state)
{
	(void)state;
	struct flit_xsk_cfg c = cfg_default();
	c.frames = 128;                 /* 64 tx frames */
	c.ring_size = 16;               /* but 16 tx descriptors */
	struct flit_xsk *x = xsk_open_cfg(&c);
	int fd = udp_b(15300, true, NULL);
	static uint8_t b[40][64];
	struct flit_dgram d[40];
	for (unsigned i = 0; i < 40; i++) {
		tl_fill(b[i], 64, i);
		d[i] = (struct flit_dgram){ .buf = b[i], .len = 64,
						.addr = sin_of(GROUP, 15300) };
	}
	assert_int_equal(flit_xsk_send(x, d, 40, htons(15300)), 16);
	struct flit_xsk_stats st;
	flit_xsk_stats(x, &st);
	assert_int_equal(st.tx_full, 1);
	assert_int_equal(st.tx_frames, 16);
	/* the kick drained the ring: the rest goes now */
	assert_int_equal(flit_xsk_send(x, d + 16, 16, htons(15300)), 16);
	assert_int_equal(flit_xsk_send(x, d + 32, 8, htons(15300)), 8);
	static struct got g;
	memset(&g, 0, sizeof(g));
	assert_int_equal(sock_recv_until(fd, &g, 40, 1000), 40);
	check_in_order(&g, 0, 40);
	close(fd);
	xsk_close(x);
}

/* A second veth pair, mq0 (A, 10.99.1.1) <-> mq1 (B, 10.99.1.2), two queues a
 * side, flit's program on mq0 in skb mode with an XSKMAP of its own (*mq_map);
 * mq_down() removes it all.  mq_cfg(): an xsk configuration for mq0. */
static unsigned mq_up(int *mq_map, int *pfd)
{
	assert_int_equal(sh("ip link add mq0 numtxqueues 2 numrxqueues 2 type veth peer name mq1 "
			    "numtxqueues 2 numrxqueues 2 netns /proc/%d/fd/%d && "
			    "ip addr add 10.99.1.1/24 dev mq0 && ip link set mq0 up && "
			    "ip route replace 239.192.77.0/24 dev mq0",
			    (int)getpid(), ns_b), 0);
	in_b();
	int r = sh("ip addr add 10.99.1.2/24 dev mq1 && ip link set mq1 up");
	int rc = tx_csum_off("mq1");
	in_a();
	assert_int_equal(r, 0);
	assert_int_equal(rc, 0);
	unsigned ifi = if_nametoindex("mq0");
	*mq_map = bpf_map_create(BPF_MAP_TYPE_XSKMAP, "flit_t_mq", 4, 4, 4, NULL);
	assert_true(*mq_map >= 0);
	/* the program refers to map_fd: point a copy of it at mq_map */
	int saved = map_fd;
	map_fd = *mq_map;
	*pfd = prog_load();
	map_fd = saved;
	assert_true(*pfd >= 0);
	assert_int_equal(bpf_xdp_attach((int)ifi, *pfd, XDP_FLAGS_SKB_MODE, NULL), 0);
	return ifi;
}

static void mq_down(unsigned ifi, int mq_map, int pfd)
{
	bpf_xdp_detach((int)ifi, XDP_FLAGS_SKB_MODE, NULL);
	close(pfd);
	close(mq_map);
	sh("ip link del mq0");
}

static void mq_cfg(struct flit_xsk_cfg *c)
{
	snprintf(c->ifname, sizeof(c->ifname), "mq0");
	c->queues = 0;
	c->xdp_skb_mode = true;
	c->frames = 256;
	c->ring_size = 64;
}

/* A second veth pair with two rx queues: queues = 0 opens both, recv polls
 * both.  Which queue a datagram lands on is veth's choice (the sender's tx
 * queue, hashed per flow): 32 flows make both likely, all must arrive. */
static void all_rx_queues_of_the_device_are_opened_and_polled(void **state)
{
	(void)state;
	int mq_map, pfd;
	unsigned ifi = mq_up(&mq_map, &pfd);
	struct flit_xsk_cfg c = cfg_default();
	mq_cfg(&c);
	struct flit_xsk *x = NULL;
	assert_int_equal(flit_xsk_open(&c, &x), 0);
	track(x);
	assert_int_equal(flit_xsk_queues(x), 2);
	assert_non_null(strstr(flit_xsk_describe(x), "2 queues"));
	assert_true(flit_xsk_fd(x, 0) != flit_xsk_fd(x, 1));
	assert_int_equal(flit_xsk_fd(x, 2), -EINVAL);
	for (uint32_t q = 0; q < 2; q++) {
		int fd = flit_xsk_fd(x, q);
		assert_int_equal(bpf_map_update_elem(mq_map, &q, &fd, 0), 0);
	}

	static struct got g;
	memset(&g, 0, sizeof(g));
	struct sockaddr_in to = sin_of("10.99.1.1", 15400);
	uint8_t b[64];
	for (unsigned i = 0; i < 32; i++) {
		in_b();
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		in_a();
		tl_fill(b, sizeof(b), i);
		assert_int_equal(sendto(fd, b, sizeof(b), 0, (struct sockaddr *)&to, sizeof(to)), 64);
		close(fd);
		assert_int_equal(xsk_recv_until(x, &g, i + 1, 1000), i + 1);
	}
	check_in_order(&g, 0, 32);
	xsk_close(x);
	mq_down(ifi, mq_map, pfd);
}

/* cfg.tx_own_queue: one queue receives, the last one sends through a socket
 * of its own; a one-queue device is refused, naming what to do. */
static void an_own_tx_queue_sends_from_the_last_queue_and_the_rest_receive(void **state)
{
	(void)state;
	struct flit_xsk_cfg c = cfg_default();
	c.tx_own_queue = true;
	struct flit_xsk *x = NULL;
	assert_int_equal(flit_xsk_open(&c, &x), -EINVAL);
	assert_non_null(strstr(flit_errmsg(), "numtxqueues 2 numrxqueues 2"));

	int mq_map, pfd;
	unsigned ifi = mq_up(&mq_map, &pfd);
	in_b();
	int rfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	assert_true(rfd >= 0);
	struct sockaddr_in ba = sin_of("0.0.0.0", 15500);
	assert_int_equal(bind(rfd, (struct sockaddr *)&ba, sizeof(ba)), 0);
	struct ip_mreqn m = { .imr_ifindex = (int)if_nametoindex("mq1") };
	inet_pton(AF_INET, "239.192.77.1", &m.imr_multiaddr);
	assert_int_equal(setsockopt(rfd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)), 0);
	in_a();

	mq_cfg(&c);
	c.tx_own_queue = true;
	assert_int_equal(flit_xsk_open(&c, &x), 0);
	track(x);
	assert_int_equal(flit_xsk_queues(x), 1);
	assert_int_equal(flit_xsk_fd(x, 1), -EINVAL);
	assert_non_null(strstr(flit_xsk_describe(x), "1 rx queue, tx on queue 1 (a socket of its own)"));
	uint32_t q0 = 0;
	int fd0 = flit_xsk_fd(x, 0);
	assert_int_equal(bpf_map_update_elem(mq_map, &q0, &fd0, 0), 0);

	/* sends: from queue 1's socket, all of them, in order */
	static struct got g;
	struct sockaddr_in to = sin_of("239.192.77.1", 15500);
	xsk_send_all(x, &to, 100, 0, len_cycle, htons(15501));
	memset(&g, 0, sizeof(g));
	assert_int_equal(sock_recv_until(rfd, &g, 100, 2000), 100);
	check_in_order(&g, 0, 100);
	struct flit_xsk_stats st;
	flit_xsk_stats(x, &st);
	assert_int_equal(st.tx_frames, 100);

	/* receives: on queue 0, from 8 flows (one that the peer's kernel
	 * handed to queue 1 would find no socket there and go to this
	 * kernel instead: each arrives at most once, intact, and here all of
	 * them come to queue 0) */
	struct sockaddr_in back = sin_of("10.99.1.1", 15502);
	uint8_t b[64];
	for (unsigned i = 0; i < 8; i++) {
		in_b();
		int sfd = socket(AF_INET, SOCK_DGRAM, 0);
		in_a();
		tl_fill(b, sizeof(b), i);
		assert_int_equal(sendto(sfd, b, sizeof(b), 0, (struct sockaddr *)&back, sizeof(back)), 64);
		close(sfd);
	}
	memset(&g, 0, sizeof(g));
	unsigned n = xsk_recv_until(x, &g, 8, 1000);
	assert_true(n >= 1);
	unsigned seen = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t seq = UINT64_MAX;
		assert_int_equal(tl_check(g.buf[i], g.len[i], &seq), 0);
		assert_true(seq < 8 && !(seen & 1u << seq));
		seen |= 1u << seq;
	}
	close(rfd);
	xsk_close(x);
	mq_down(ifi, mq_map, pfd);
}

/* The cached MAC follows the neighbour table: flit_xsk_tx_service()
 * refreshes an entry in use once it is a second old. */
static void a_changed_neighbour_mac_is_picked_up_by_tx_service(void **state)
{
	(void)state;
	struct flit_xsk *x = xsk_open();
	struct sockaddr_in b;
	int fd = udp_b(0, false, &b);
	uint8_t buf[64];
	struct flit_dgram d = { .buf = buf, .len = sizeof(buf), .addr = b };
	uint64_t seq = 0, end = tl_now_ms() + 1000;
	int r;
	tl_fill(buf, sizeof(buf), seq);
	while ((r = flit_xsk_send(x, &d, 1, htons(15500))) != 1) {
		assert_int_equal(r, -EHOSTUNREACH);
		assert_true(tl_now_ms() < end);
		usleep(5000);
	}
	static struct got g;
	memset(&g, 0, sizeof(g));
	assert_int_equal(sock_recv_until(fd, &g, 1, 1000), 1);

	/* B's interface gets a new address; A's table is told at once */
	in_b();
	r = sh("ip link set " IF_B " address 02:00:00:00:99:02");
	in_a();
	assert_int_equal(r, 0);
	assert_int_equal(sh("ip neigh replace " ADDR_B " lladdr 02:00:00:00:99:02 dev " IF_A
			    " nud reachable"), 0);

	/* until the refresh, frames go to the old MAC and B drops them */
	uint64_t t0 = tl_now_ms();
	unsigned got_back = 0;
	end = t0 + 3000;
	while (!got_back && tl_now_ms() < end) {
		tl_fill(buf, sizeof(buf), ++seq);
		assert_int_equal(flit_xsk_send(x, &d, 1, htons(15500)), 1);
		flit_xsk_tx_service(x);
		memset(&g, 0, sizeof(g));
		got_back = sock_recv_until(fd, &g, 1, 10);
	}
	printf("# new MAC used after %llu ms\n", (unsigned long long)(tl_now_ms() - t0));
	assert_int_equal(got_back, 1);
	close(fd);
	xsk_close(x);
}

static void open_failures_say_what_is_wrong(void **state)
{
	(void)state;
	struct flit_xsk_cfg c = cfg_default();
	struct flit_xsk *x = (struct flit_xsk *)&c;

	snprintf(c.ifname, sizeof(c.ifname), "nosuchif0");
	assert_int_equal(flit_xsk_open(&c, &x), -ENODEV);
	assert_null(x);
	assert_non_null(strstr(flit_errmsg(), "nosuchif0"));

	c = cfg_default();
	c.frames = 1000;
	assert_int_equal(flit_xsk_open(&c, &x), -EINVAL);
	assert_non_null(strstr(flit_errmsg(), "power of 2"));
	c = cfg_default();
	c.frame_size = 3000;
	assert_int_equal(flit_xsk_open(&c, &x), -EINVAL);
	c = cfg_default();
	c.queues = 2;
	assert_int_equal(flit_xsk_open(&c, &x), -EINVAL);
	assert_non_null(strstr(flit_errmsg(), "1 rx queue"));

	/* an interface without an IPv4 address */
	assert_int_equal(sh("ip link add noaddr0 type veth peer name noaddr1 && "
			    "ip link set noaddr0 up && ip link set noaddr1 up"), 0);
	c = cfg_default();
	snprintf(c.ifname, sizeof(c.ifname), "noaddr0");
	assert_int_equal(flit_xsk_open(&c, &x), -EADDRNOTAVAIL);
	assert_non_null(strstr(flit_errmsg(), "no IPv4 address"));
	sh("ip link del noaddr0");
}

static int drop_cap(int cap)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data))
		return -1;
	data[cap / 32].effective &= ~(1u << (cap % 32));
	data[cap / 32].permitted &= ~(1u << (cap % 32));
	data[cap / 32].inheritable &= ~(1u << (cap % 32));
	return (int)syscall(SYS_capset, &hdr, data);
}

static void missing_privileges_are_eperm_naming_the_capability(void **state)
{
	(void)state;
	for (int which = 0; which < 2; which++) {
		pid_t pid = tl_fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct flit_xsk_cfg c = cfg_default();
			struct flit_xsk *x = NULL;
			const char *capname = which ? "CAP_IPC_LOCK" : "CAP_NET_RAW";
			if (which) {
				struct rlimit rl = { 1 << 20, 1 << 20 };
				if (drop_cap(CAP_IPC_LOCK) || setrlimit(RLIMIT_MEMLOCK, &rl))
					_exit(2);
				c.frames = 4096;        /* 8 MiB */
			} else if (drop_cap(CAP_NET_RAW)) {
				_exit(2);
			}
			int r = flit_xsk_open(&c, &x);
			printf("# without %s: %d %s\n", capname, r, flit_errmsg());
			fflush(stdout);
			if (r != -EPERM)
				_exit(3);
			if (!strstr(flit_errmsg(), capname))
				_exit(4);
			_exit(0);
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Not a benchmark (tools/ has those): prints what one recv and one send
 * cost here, to catch gross regressions by eye.  Asserts only sanity. */
static void one_recv_and_one_send_cost_is_printed(void **state)
{
	(void)state;
	enum { N = 400 };
	static uint64_t rx[N], tx[N];
	struct flit_xsk *x = xsk_open();
	int fd = udp_b(15200, true, NULL);
	int ufd = udp_b(0, false, NULL);
	struct sockaddr_in to_a = sin_of(ADDR_A, 15201), mto = sin_of(GROUP, 15200);
	uint8_t b[64], rb[128];
	struct flit_dgram d[1];
	unsigned nr = 0;

	for (unsigned i = 0; i < N; i++) {
		tl_fill(b, sizeof(b), i);
		sendto(ufd, b, sizeof(b), 0, (struct sockaddr *)&to_a, sizeof(to_a));
		uint64_t end = tl_now_ms() + 200;
		for (;;) {
			uint64_t t0 = now_ns();
			int r = flit_xsk_recv(x, d, NULL, 1);
			uint64_t t1 = now_ns();
			if (r == 1) {
				rx[nr++] = t1 - t0;
				break;
			}
			assert_true(r == 0 && tl_now_ms() < end);
		}

		struct flit_dgram s = { .buf = b, .len = sizeof(b), .addr = mto };
		uint64_t t0 = now_ns();
		assert_int_equal(flit_xsk_send(x, &s, 1, htons(15200)), 1);
		tx[i] = now_ns() - t0;
		while (recv(fd, rb, sizeof(rb), 0) < 0 && tl_now_ms() < end)
			;
	}
	qsort(rx, nr, sizeof(rx[0]), cmp_u64);
	qsort(tx, N, sizeof(tx[0]), cmp_u64);
	printf("# recv of one 64 B datagram: median %llu ns, p99 %llu ns (%u samples)\n",
	       (unsigned long long)rx[nr / 2], (unsigned long long)rx[nr * 99 / 100], nr);
	printf("# send of one 64 B datagram (copy mode: the kick transmits it through "
	       "veth into B's socket): median %llu ns, p99 %llu ns\n",
	       (unsigned long long)tx[N / 2], (unsigned long long)tx[N * 99 / 100]);
	assert_int_equal(nr, N);
	close(fd);
	close(ufd);
	xsk_close(x);
}

/* ---- setup --------------------------------------------------------------- */

static int skip_all(const char *why)
{
	printf("SKIP: %s\n", why);
	return 77;
}

static int setup_topology(void)
{
	char why[256];
	int fd;

	if (geteuid() != 0)
		return skip_all("needs root (network namespaces, XDP, AF_XDP)");
	fd = socket(AF_XDP, SOCK_RAW, 0);
	if (fd < 0) {
		snprintf(why, sizeof(why), "no AF_XDP sockets here: %s", strerror(errno));
		return skip_all(why);
	}
	close(fd);
	if (sh("ip -V >/dev/null 2>&1"))
		return skip_all("iproute2 (ip) not found");

	if (unshare(CLONE_NEWNET))
		return skip_all("cannot create a network namespace");
	ns_a = open("/proc/self/ns/net", O_RDONLY);
	if (unshare(CLONE_NEWNET))
		return skip_all("cannot create a second network namespace");
	ns_b = open("/proc/self/ns/net", O_RDONLY);
	if (ns_a < 0 || ns_b < 0 || setns(ns_a, CLONE_NEWNET))
		return skip_all("cannot switch network namespaces");

	if (sh("ip link add " IF_A " type veth peer name " IF_B " netns /proc/%d/fd/%d",
	       (int)getpid(), ns_b) ||
	    sh("ip addr add " ADDR_A "/24 dev " IF_A " && ip link set lo up && "
	       "ip link set " IF_A " up && ip route add 224.0.0.0/4 dev " IF_A)) {
		printf("topology setup failed in A\n");
		return 1;
	}
	in_b();
	int r = sh("ip addr add " ADDR_B "/24 dev " IF_B " && ip link set lo up && "
		   "ip link set " IF_B " up && ip route add 224.0.0.0/4 dev " IF_B);
	int rc = tx_csum_off(IF_B);
	in_a();
	if (r || rc) {
		printf("topology setup failed in B (%d, tx csum off %d: %s)\n", r, rc,
		       strerror(errno));
		return 1;
	}
	ifindex_a = if_nametoindex(IF_A);

	map_fd = bpf_map_create(BPF_MAP_TYPE_XSKMAP, "flit_t_xsks", 4, 4, 4, NULL);
	if (map_fd < 0) {
		snprintf(why, sizeof(why), "cannot create an XSKMAP: %s", strerror(-map_fd));
		return skip_all(why);
	}
	prog_fd = prog_load();
	if (prog_fd < 0) {
		snprintf(why, sizeof(why), "cannot load an XDP program: %s", strerror(-prog_fd));
		return skip_all(why);
	}
	r = prog_attach(false);
	if (r) {
		snprintf(why, sizeof(why), "cannot attach XDP in native mode to veth: %s",
			 strerror(-r));
		return skip_all(why);
	}
	return 0;
}

int main(void)
{
	int rc = setup_topology();
	if (rc)
		return rc;
#define T(f) cmocka_unit_test_teardown(f, teardown)
	const struct CMUnitTest tests[] = {
		T(kernel_udp_datagrams_arrive_with_payload_source_and_destination),
		T(xsk_multicast_reaches_a_joined_socket_with_good_checksums),
		T(xsk_unicast_resolves_the_neighbour_then_reaches_the_peer),
		T(unicast_to_a_local_address_is_refused_for_the_kernel_path),
		T(max_payload_is_sent_and_one_byte_more_is_emsgsize),
		T(reopen_on_the_same_queue_right_after_close_succeeds),
		T(a_second_socket_on_a_taken_queue_fails_with_ebusy_after_retrying),
		T(skb_and_native_mode_programs_both_deliver),
		T(zero_copy_on_veth_is_refused_or_falls_back_as_configured),
		T(describe_names_every_performance_choice),
		T(malformed_frames_are_dropped_and_counted),
		T(rings_wrap_around_many_times_without_loss),
		T(open_failures_say_what_is_wrong),
		T(missing_privileges_are_eperm_naming_the_capability),
		T(send_stops_at_a_full_ring_and_counts_it),
		T(all_rx_queues_of_the_device_are_opened_and_polled),
		T(an_own_tx_queue_sends_from_the_last_queue_and_the_rest_receive),
		T(a_changed_neighbour_mac_is_picked_up_by_tx_service),
		T(one_recv_and_one_send_cost_is_printed),
	};
	return cmocka_run_group_tests_name("xsk_io", tests, NULL, NULL);
}
