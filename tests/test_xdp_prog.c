// SPDX-License-Identifier: BSD-2-Clause
/*
 * The XDP steering program (bpf/flit_xdp.bpf.c) decides as bpf/flit_xdp.h
 * says: crafted packets go through BPF_PROG_TEST_RUN on the embedded
 * skeleton, and every case checks the verdict and the counter deltas (summed
 * over CPUs): the expected counters move by exactly one, all others by none.
 * DATA frames come from flit_frame_encode() and control frames from
 * flit_ctl_hb_encode(), so the wire format is the real one.
 *
 * Sockets: without an AF_XDP socket in its slot a steered frame passes
 * (PASSED + NO_SOCKET), which is what most cases here see.  A bare AF_XDP
 * socket (never bound) in the slot is enough for bpf_redirect_map() to
 * return XDP_REDIRECT; test_run does not carry out the redirect.  The slot
 * arithmetic (slot_base + rx_queue_index) is checked on a veth with 4 rx
 * queues created in a private network namespace (unshare(CLONE_NEWNET) of
 * this process only; nothing touches the host's interfaces):
 *
 *     [netns of this test]  fxp0 (4 rx queues) <-veth-> fxp1
 *
 * Needs CAP_BPF (and CAP_NET_ADMIN, CAP_SYS_ADMIN for the namespace); loading
 * refused with EPERM is a skip, any other load failure (the verifier) fails.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <net/if.h>
#include <cmocka.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>

#include "codec.h"
#include "ctl.h"
#include "flit_xdp.skel.h"
#include "../bpf/flit_xdp.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif

#define FLOW_ADDR   0x0a4d0001u   /* 10.77.0.1 */
#define FLOW_PORT   14600
#define OTHER_PORT  14601
#define SESS_FILT   0x5e550001u   /* sessions: FLIT_XDP_SESS_FILTER */
#define SESS_PLAIN  0x5e550002u   /* sessions: listed, flags 0 */
#define SESS_NONE   0x5e550003u   /* not in sessions */
#define SESS_REP    0x5e550004u   /* FILTER | REPORT, named REP_NAMED */
#define REP_NAMED   9u            /* T_OTHER (9) and above: not named yet */
#define T_WANTED    7u            /* topics (SESS_FILT, 7) = 1 */
#define T_WANTED2   40u           /* topics (SESS_FILT, 40) = 1 */
#define T_ZERO      8u            /* topics (SESS_FILT, 8) = 0: listed, not wanted */
#define T_OTHER     9u            /* not in topics */
#define VERIFIED_MAX 50000u       /* instructions the verifier may walk */
#define SLOT_SOCK   5u            /* flow FLOW_ADDR:OTHER_PORT, an AF_XDP socket */

static struct flit_xdp *skel;
static int xsk_fd = -1;

/* ---- maps ---- */

static void flow_add(uint32_t addr, uint16_t port, uint32_t slot_base)
{
	struct flit_xdp_flow_key k = { .daddr = htonl(addr), .dport = htons(port) };
	struct flit_xdp_flow v = { .slot_base = slot_base };
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(skel->maps.flows), &k, &v, BPF_ANY), 0);
}

#define REP_GEN 0x9e11u            /* SESS_REP's generation */

static void session_set_named(uint32_t s, uint32_t flags, uint32_t named)
{
	struct flit_xdp_session v = { .flags = flags, .named = named, .gen = REP_GEN };
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(skel->maps.sessions), &s, &v,
					     BPF_ANY), 0);
}

static void session_set(uint32_t s, uint32_t flags)
{
	session_set_named(s, flags, 0);
}

/* The records of the filtered ring, taken (at most cap; the count). */
struct reports { struct flit_xdp_filtered r[64]; unsigned n, cap, total; };

static int report_cb(void *ctx, void *data, size_t size)
{
	struct reports *rp = ctx;
	assert_int_equal(size, sizeof(struct flit_xdp_filtered));
	if (rp->n < rp->cap)
		memcpy(&rp->r[rp->n++], data, sizeof(rp->r[0]));
	rp->total++;
	return 0;
}

static struct reports reports_take(void)
{
	struct reports rp = { .cap = 64 };
	struct ring_buffer *rb = ring_buffer__new(bpf_map__fd(skel->maps.filtered), report_cb,
						  &rp, NULL);
	assert_non_null(rb);
	assert_true(ring_buffer__consume(rb) >= 0);
	ring_buffer__free(rb);
	return rp;
}

static void topic_set(uint32_t s, uint32_t t, uint32_t wanted)
{
	struct flit_xdp_topic_key k = { .session = s, .topic = t };
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(skel->maps.topics), &k, &wanted,
					     BPF_ANY), 0);
}

static void counters_read(uint64_t *out)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t vals[ncpu];

	for (uint32_t i = 0; i < FLIT_XDP_COUNTERS; i++) {
		assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.counters), &i, vals), 0);
		out[i] = 0;
		for (int c = 0; c < ncpu; c++)
			out[i] += vals[c];
	}
}

/* ---- packets ---- */

/* Ethernet [tags] IPv4 UDP around a payload.  Zero fields take the
 * defaults: IPv4, IHL 5, UDP, FLOW_ADDR:FLOW_PORT, consistent lengths. */
struct pkt_spec {
	unsigned vlans;          /* tags, outermost first */
	uint16_t tpid[3];        /* 0: 0x8100 */
	uint16_t ethertype;      /* after the tags */
	unsigned ihl;
	uint16_t frag_off;       /* host order: flags and offset */
	uint8_t proto;
	uint32_t daddr;
	uint16_t dport;
	int ulen_adj;            /* added to the UDP length field */
	int totlen_adj;          /* added to the IPv4 total length */
	size_t trailer;          /* zero bytes after the datagram (Ethernet padding) */
};

static size_t build(uint8_t *b, const struct pkt_spec *s, const void *pl, size_t plen)
{
	static const uint8_t mac[12] = { 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1 };
	size_t o = 0;

	memcpy(b, mac, 12);
	o = 12;
	for (unsigned i = 0; i < s->vlans; i++) {
		uint16_t tpid = s->tpid[i] ? s->tpid[i] : 0x8100;
		b[o++] = tpid >> 8;
		b[o++] = tpid & 0xff;
		b[o++] = 0;
		b[o++] = 100 + i;    /* VLAN id */
	}
	uint16_t et = s->ethertype ? s->ethertype : 0x0800;
	b[o++] = et >> 8;
	b[o++] = et & 0xff;
	if (et != 0x0800) {
		memcpy(b + o, pl, plen);
		return o + plen;
	}

	unsigned ihl = s->ihl ? s->ihl : 5;
	unsigned hlen = ihl < 5 ? 20 : ihl * 4;  /* bytes written */
	uint8_t *ip = b + o;
	memset(ip, 0, hlen);
	ip[0] = 0x40 | (ihl & 0xf);
	uint16_t tot = htons((uint16_t)(hlen + 8 + plen + s->totlen_adj));
	memcpy(ip + 2, &tot, 2);
	ip[4] = 0x12;
	ip[5] = 0x34;
	uint16_t frag = htons(s->frag_off);
	memcpy(ip + 6, &frag, 2);
	ip[8] = 64;
	ip[9] = s->proto ? s->proto : 17;
	uint32_t saddr = htonl(0x0a4d0002u), daddr = htonl(s->daddr ? s->daddr : FLOW_ADDR);
	memcpy(ip + 12, &saddr, 4);
	memcpy(ip + 16, &daddr, 4);
	memset(ip + 20, 1, hlen - 20);           /* options: NOP */
	o += hlen;

	uint8_t *udp = b + o;
	uint16_t sport = htons(40000), dport = htons(s->dport ? s->dport : FLOW_PORT);
	uint16_t ulen = htons((uint16_t)(8 + plen + s->ulen_adj));
	memcpy(udp, &sport, 2);
	memcpy(udp + 2, &dport, 2);
	memcpy(udp + 4, &ulen, 2);
	memset(udp + 6, 0, 2);
	o += 8;
	memcpy(b + o, pl, plen);
	o += plen;
	memset(b + o, 0, s->trailer);
	return o + s->trailer;
}

/* A DATA frame of n messages on topics[], payloads of varied length with a
 * checkable pattern (lengths 0..12: every padding amount shows up). */
/* messages in a test frame: 180 empty ones fill a 1472-byte datagram */
#define WALK_TEST_MAX 180

static size_t data_frame(uint8_t *f, size_t cap, uint16_t flags, uint32_t sess,
			 unsigned n, const uint32_t *topics)
{
	static uint8_t pay[WALK_TEST_MAX][16];
	const void *pls[WALK_TEST_MAX];
	uint32_t lens[WALK_TEST_MAX];
	uint64_t ts[WALK_TEST_MAX], tseq[WALK_TEST_MAX];

	assert_true(n <= WALK_TEST_MAX);
	for (unsigned i = 0; i < n; i++) {
		/* more than 64: empty, as many as a 1472-byte datagram holds */
		lens[i] = n > 64 ? 0 : (i * 5 + 1) % 13;
		for (unsigned j = 0; j < 16; j++)
			pay[i][j] = (uint8_t)(i * 31 + j);
		pls[i] = pay[i];
		ts[i] = 1700000000000000000ull + i;
		tseq[i] = 500 + i;
	}
	size_t len = flit_frame_encode_tseq(f, cap, flags, sess, 1000, n, topics, pls, lens, ts,
					    tseq);
	assert_true(len > 0);
	struct flit_frame_hdr h;
	assert_int_equal(flit_frame_validate(f, len, &h), FLIT_FE_OK);
	return len;
}

static size_t one_msg_frame(uint8_t *f, uint32_t sess, uint32_t topic)
{
	return data_frame(f, 256, 0, sess, 1, &topic);
}

/* ---- running ---- */

struct outcome {
	int ret;
	uint64_t d[FLIT_XDP_COUNTERS];
};

/* Runs the program once on pkt[0..len) (ctx md: rx queue, metadata, or a
 * linear part shorter than len); 0 or -errno of the test run. */
static int try_run(const void *pkt, size_t len, const struct xdp_md *md, struct outcome *o)
{
	uint64_t before[FLIT_XDP_COUNTERS], after[FLIT_XDP_COUNTERS];
	struct xdp_md ctx = md ? *md : (struct xdp_md){ 0 };
	LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = pkt, .data_size_in = (uint32_t)len,
		    .repeat = 1);

	if (md) {
		if (!ctx.data_end)
			ctx.data_end = (uint32_t)len;
		run.ctx_in = &ctx;
		run.ctx_size_in = sizeof(ctx);
	}
	counters_read(before);
	int err = bpf_prog_test_run_opts(bpf_program__fd(skel->progs.flit_xdp_steer), &run);
	if (err)
		return err;
	counters_read(after);
	o->ret = (int)run.retval;
	for (int i = 0; i < FLIT_XDP_COUNTERS; i++)
		o->d[i] = after[i] - before[i];
	return 0;
}

static struct outcome run_ctx(const void *pkt, size_t len, const struct xdp_md *md)
{
	struct outcome o = { 0 };
	int err = try_run(pkt, len, md, &o);
	if (err)
		fprintf(stderr, "bpf_prog_test_run_opts: %s\n", strerror(-err));
	assert_int_equal(err, 0);
	return o;
}

static struct outcome run(const void *pkt, size_t len)
{
	return run_ctx(pkt, len, NULL);
}

static struct outcome run_spec(const struct pkt_spec *s, const void *pl, size_t plen)
{
	uint8_t b[4096];
	size_t n = build(b, s, pl, plen);
	assert_true(n <= sizeof(b));
	return run(b, n);
}

static const char *const counter_names[] = FLIT_XDP_COUNTER_NAMES;

/* The verdict is ret; the counters in the -1-terminated list moved by one,
 * every other counter stayed. */
static void expect_(const struct outcome *o, int ret, const int *ctrs, const char *where)
{
	uint64_t want[FLIT_XDP_COUNTERS] = { 0 };
	bool ok = o->ret == ret;

	for (const int *c = ctrs; *c >= 0; c++)
		want[*c]++;
	for (int i = 0; i < FLIT_XDP_COUNTERS; i++)
		ok &= o->d[i] == want[i];
	if (!ok) {
		fprintf(stderr, "%s: verdict %d (want %d); counter deltas:", where, o->ret, ret);
		for (int i = 0; i < FLIT_XDP_COUNTERS; i++)
			if (o->d[i] || want[i])
				fprintf(stderr, " %s %llu (want %llu)", counter_names[i],
					(unsigned long long)o->d[i], (unsigned long long)want[i]);
		fprintf(stderr, "\n");
	}
	assert_true(ok);
}

#define STR_(x) #x
#define STR(x) STR_(x)
#define expect(o, ret, ...) \
	expect_(&(o), ret, (const int[]){ __VA_ARGS__, -1 }, __FILE__ ":" STR(__LINE__))

#define PASSED(reason) FLIT_XDP_PASSED, FLIT_XDP_##reason
/* a steered frame with no socket in its slot */
#define STEERED_NO_SOCKET FLIT_XDP_PASSED, FLIT_XDP_NO_SOCKET

/* ---- set-up ---- */

static int setup(void **state)
{
	skel = flit_xdp__open_and_load();
	if (!skel)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	if (xsk_fd >= 0)
		close(xsk_fd);
	xsk_fd = -1;
	flit_xdp__destroy(skel);
	return 0;
}

static int maps_setup(void **state)
{
	flow_add(FLOW_ADDR, FLOW_PORT, 0);
	session_set(SESS_FILT, FLIT_XDP_SESS_FILTER);
	session_set(SESS_PLAIN, 0);
	session_set_named(SESS_REP, FLIT_XDP_SESS_FILTER | FLIT_XDP_SESS_REPORT, REP_NAMED);
	topic_set(SESS_REP, T_WANTED, 1);
	topic_set(SESS_FILT, T_WANTED, 1);
	topic_set(SESS_FILT, T_WANTED2, 1);
	topic_set(SESS_FILT, T_ZERO, 0);
	/* the topic of another session does not count for SESS_FILT */
	topic_set(SESS_PLAIN, T_OTHER, 1);
	return 0;
}

/* ---- layers below flit ---- */

static void truncated_ethernet_passes_short(void **state)
{
	/* test_run refuses a linear part shorter than an Ethernet header
	 * unless (kernels with "linear_sz = ctx->data_end") the rest of the
	 * data goes to fragments: an 8-byte linear packet then */
	uint8_t b[16] = { 2, 0, 0, 0, 0, 2, 2, 0 };
	struct xdp_md md = { .data_end = 8 };
	struct outcome o;
	int err = try_run(b, sizeof(b), &md, &o);
	if (err == -EINVAL) {
		printf("SKIP: this kernel's test_run takes no packet shorter than 14 bytes\n");
		skip();
	}
	assert_int_equal(err, 0);
	expect(o, XDP_PASS, PASSED(PASS_SHORT));
}

static void truncated_vlan_tag_passes_short(void **state)
{
	uint8_t b[16] = { 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0, 100 };
	struct outcome o = run(b, sizeof(b));
	expect(o, XDP_PASS, PASSED(PASS_SHORT), FLIT_XDP_VLAN);

	/* the second tag cut short */
	uint8_t c[20] = { 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xa8, 0, 100, 0x81, 0x00, 0, 101 };
	o = run(c, sizeof(c));
	expect(o, XDP_PASS, PASSED(PASS_SHORT), FLIT_XDP_VLAN);
}

static void truncated_ipv4_header_passes_short(void **state)
{
	uint8_t b[512], f[256];
	size_t n = build(b, &(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_NONE, 1));
	(void)n;
	struct outcome o = run(b, 14 + 19);
	expect(o, XDP_PASS, PASSED(PASS_SHORT));
}

static void ipv4_ihl_below_5_passes_short(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_NONE, 1);
	for (unsigned ihl = 1; ihl < 5; ihl++) {
		struct outcome o = run_spec(&(struct pkt_spec){ .ihl = ihl }, f, fl);
		expect(o, XDP_PASS, PASSED(PASS_SHORT));
	}
	/* IHL 0 is written as 0x40 by build(): patch it */
	uint8_t b[512];
	size_t n = build(b, &(struct pkt_spec){ 0 }, f, fl);
	b[14] = 0x40;
	struct outcome o = run(b, n);
	expect(o, XDP_PASS, PASSED(PASS_SHORT));
}

static void ipv4_version_not_4_passes_short(void **state)
{
	uint8_t b[512], f[256];
	size_t n = build(b, &(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_NONE, 1));
	b[14] = 0x65;
	struct outcome o = run(b, n);
	expect(o, XDP_PASS, PASSED(PASS_SHORT));
}

static void ipv4_options_past_packet_pass_short(void **state)
{
	uint8_t b[512], f[256];
	size_t n = build(b, &(struct pkt_spec){ .ihl = 15 }, f, one_msg_frame(f, SESS_NONE, 1));
	(void)n;
	struct outcome o = run(b, 14 + 40);   /* IHL says 60 bytes */
	expect(o, XDP_PASS, PASSED(PASS_SHORT));
}

static void ipv4_options_are_skipped_and_frame_steered(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_FILT, T_WANTED);
	for (unsigned ihl = 6; ihl <= 15; ihl++) {
		struct outcome o = run_spec(&(struct pkt_spec){ .ihl = ihl }, f, fl);
		expect(o, XDP_PASS, STEERED_NO_SOCKET);
	}
	/* and the filter reads the frame at the right place */
	fl = one_msg_frame(f, SESS_FILT, T_OTHER);
	struct outcome o = run_spec(&(struct pkt_spec){ .ihl = 11 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
}

static void truncated_udp_header_passes_short(void **state)
{
	uint8_t b[512], f[256];
	size_t n = build(b, &(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_NONE, 1));
	(void)n;
	struct outcome o = run(b, 14 + 20 + 7);
	expect(o, XDP_PASS, PASSED(PASS_SHORT));
}

static void ipv4_fragments_pass_to_the_kernel(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_FILT, T_OTHER);
	/* MF on the first fragment */
	struct outcome o = run_spec(&(struct pkt_spec){ .frag_off = 0x2000 }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_FRAGMENT));
	/* a later fragment (offset 185 * 8), last one and not */
	o = run_spec(&(struct pkt_spec){ .frag_off = 185 }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_FRAGMENT));
	o = run_spec(&(struct pkt_spec){ .frag_off = 0x2000 | 185 }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_FRAGMENT));
	/* DF alone is not a fragment */
	o = run_spec(&(struct pkt_spec){ .frag_off = 0x4000 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
}

static void ipv6_passes_ipv6(void **state)
{
	uint8_t pl[60] = { 0x60 };
	struct outcome o = run_spec(&(struct pkt_spec){ .ethertype = 0x86dd }, pl, sizeof(pl));
	expect(o, XDP_PASS, PASSED(PASS_IPV6));
	o = run_spec(&(struct pkt_spec){ .vlans = 1, .ethertype = 0x86dd }, pl, sizeof(pl));
	expect(o, XDP_PASS, PASSED(PASS_IPV6), FLIT_XDP_VLAN);
}

static void arp_passes_not_ipv4(void **state)
{
	uint8_t pl[28] = { 0, 1, 8, 0, 6, 4, 0, 1 };
	struct outcome o = run_spec(&(struct pkt_spec){ .ethertype = 0x0806 }, pl, sizeof(pl));
	expect(o, XDP_PASS, PASSED(PASS_NOT_IPV4));
}

static void tcp_and_icmp_pass_not_udp(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_FILT, T_OTHER);
	struct outcome o = run_spec(&(struct pkt_spec){ .proto = 6 }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_NOT_UDP));
	o = run_spec(&(struct pkt_spec){ .proto = 1 }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_NOT_UDP));
	/* a TCP fragment is "not UDP" first */
	o = run_spec(&(struct pkt_spec){ .proto = 6, .frag_off = 0x2000 }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_NOT_UDP));
}

static void vlan_tagged_flit_frames_are_steered(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_FILT, T_WANTED);
	struct outcome o = run_spec(&(struct pkt_spec){ .vlans = 1 }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET, FLIT_XDP_VLAN);
	o = run_spec(&(struct pkt_spec){ .vlans = 1, .tpid = { 0x88a8 } }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET, FLIT_XDP_VLAN);
	/* QinQ: 802.1ad outside, 802.1Q inside */
	o = run_spec(&(struct pkt_spec){ .vlans = 2, .tpid = { 0x88a8, 0x8100 } }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET, FLIT_XDP_VLAN);
	/* the filter reads behind two tags too */
	fl = one_msg_frame(f, SESS_FILT, T_OTHER);
	o = run_spec(&(struct pkt_spec){ .vlans = 2, .tpid = { 0x88a8, 0x8100 } }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED, FLIT_XDP_VLAN);
}

static void third_vlan_tag_passes_not_ipv4(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_FILT, T_WANTED);
	struct outcome o = run_spec(&(struct pkt_spec){ .vlans = 3 }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_NOT_IPV4), FLIT_XDP_VLAN);
}

static void udp_to_no_flow_passes_no_flow(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_FILT, T_OTHER);
	struct outcome o = run_spec(&(struct pkt_spec){ .dport = 9999 }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_NO_FLOW));
	o = run_spec(&(struct pkt_spec){ .daddr = 0x0a4d0009u }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_NO_FLOW));
}

/* ---- a flow's payload ---- */

static void non_flit_payload_passes_not_flit(void **state)
{
	uint8_t pl[64];
	memset(pl, 0xab, sizeof(pl));
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, pl, sizeof(pl));
	expect(o, XDP_PASS, PASSED(PASS_NOT_FLIT));
	/* empty, and shorter than magic + version + type */
	o = run_spec(&(struct pkt_spec){ 0 }, pl, 0);
	expect(o, XDP_PASS, PASSED(PASS_NOT_FLIT));
	uint8_t fl3[3] = { 0x46, 0x4c, 1 };
	o = run_spec(&(struct pkt_spec){ 0 }, fl3, 3);
	expect(o, XDP_PASS, PASSED(PASS_NOT_FLIT));
	/* a 2-byte datagram "FL" whose Ethernet padding goes on like a
	 * frame header: the UDP length says it is too short */
	uint8_t b[512];
	size_t n = build(b, &(struct pkt_spec){ .trailer = 30 }, fl3, 2);
	b[n - 30] = FLIT_WIRE_VERSION;
	b[n - 29] = FLIT_FT_HB;
	o = run(b, n);
	expect(o, XDP_PASS, PASSED(PASS_NOT_FLIT));
}

static void flow_without_socket_passes_no_socket(void **state)
{
	uint8_t f[256];
	uint32_t t = 1;
	size_t fl = data_frame(f, sizeof(f), 0, SESS_NONE, 1, &t);
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	/* Ethernet padding after the datagram is not part of it */
	o = run_spec(&(struct pkt_spec){ .trailer = 20 }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	/* nor are bytes in the datagram past the frame's len */
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl + 16);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
}

static void udp_length_past_packet_is_malformed(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_NONE, 1);
	struct outcome o = run_spec(&(struct pkt_spec){ .ulen_adj = 1 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	/* past the IPv4 packet, though inside the Ethernet frame */
	o = run_spec(&(struct pkt_spec){ .totlen_adj = -8, .trailer = 8 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	/* shorter than the UDP header */
	o = run_spec(&(struct pkt_spec){ .ulen_adj = -(int)fl - 1 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
}

static void udp_length_shorter_than_frame_is_malformed(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_NONE, 1);
	/* the frame's len runs past the datagram (into Ethernet padding) */
	struct outcome o = run_spec(&(struct pkt_spec){ .ulen_adj = -8, .totlen_adj = -8 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	/* the datagram ends inside the frame header */
	o = run_spec(&(struct pkt_spec){ .ulen_adj = -(int)fl + 20, .totlen_adj = -(int)fl + 20 },
		     f, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
}

static void data_with_bad_header_is_malformed(void **state)
{
	uint8_t f[256], g[256];
	size_t fl = one_msg_frame(f, SESS_NONE, 1);
	struct outcome o;

	memcpy(g, f, fl);
	g[2] = 2;                                    /* version */
	o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	memcpy(g, f, fl);
	g[2] = 0;
	o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);

	/* unknown flags, and bit 3 (FLIT_FF_SHORT) without FLIT_FF_TSEQ */
	for (unsigned bit = 3; bit < 16; bit++) {
		memcpy(g, f, fl);
		flit_st16(g + 4, (uint16_t)(1u << bit));
		o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
		expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	}

	const uint32_t bad_len[] = { 0, 16, 23, 25, (uint32_t)fl - 4, (uint32_t)fl + 8, 0x7ffffff8 };
	for (size_t i = 0; i < sizeof(bad_len) / sizeof(bad_len[0]); i++) {
		memcpy(g, f, fl);
		flit_st32(g + 8, bad_len[i]);
		o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
		expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	}

	/* a DATA header cut short by the datagram */
	o = run_spec(&(struct pkt_spec){ 0 }, f, 16);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
}

static void known_flags_are_accepted(void **state)
{
	uint8_t f[256];
	uint32_t t = T_WANTED;
	size_t fl = data_frame(f, sizeof(f), FLIT_FF_RETX, SESS_FILT, 1, &t);
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	fl = data_frame(f, sizeof(f), FLIT_FF_RETX | FLIT_FF_TS, SESS_FILT, 1, &t);
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	fl = data_frame(f, sizeof(f), FLIT_FF_RETX | FLIT_FF_TS | FLIT_FF_TSEQ, SESS_FILT, 1, &t);
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	fl = data_frame(f, sizeof(f), FLIT_FF_RETX | FLIT_FF_TS | FLIT_FF_TSEQ | FLIT_FF_SHORT,
			SESS_FILT, 1, &t);
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
}

static void unknown_frame_types_are_malformed(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_NONE, 1);
	const uint8_t types[] = { 0, 9, 15, 16, 255 };
	for (size_t i = 0; i < sizeof(types); i++) {
		f[3] = types[i];
		struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	}
}

static void control_frames_are_steered_unfiltered(void **state)
{
	uint8_t f[256];
	size_t fl = flit_ctl_hb_encode(f, sizeof(f), SESS_FILT, 1000, 900);
	assert_true(fl > 0);
	assert_int_equal(f[3], FLIT_FT_HB);
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	/* types 3..7 likewise: the program reads only magic and type */
	for (uint8_t t = FLIT_FT_NAK; t <= FLIT_FT_JOIN; t++) {
		f[3] = t;
		o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_PASS, STEERED_NO_SOCKET);
	}
}

/* ---- the topic filter ---- */

static void wanted_topic_is_steered(void **state)
{
	uint8_t f[256];
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_FILT, T_WANTED));
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	o = run_spec(&(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_FILT, T_WANTED2));
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
}

static void unwanted_topic_is_filtered(void **state)
{
	uint8_t f[256];
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_FILT, T_OTHER));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	/* listed with value 0: not wanted */
	o = run_spec(&(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_FILT, T_ZERO));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	/* wanted by another session only */
	topic_set(SESS_PLAIN, T_OTHER, 1);
	o = run_spec(&(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_FILT, T_OTHER));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
}

static void frame_of_no_messages_is_filtered(void **state)
{
	uint8_t f[64];
	size_t fl = data_frame(f, sizeof(f), 0, SESS_FILT, 0, NULL);
	assert_int_equal(fl, FLIT_FRAME_HDR_LEN);
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
}

static void batch_with_one_wanted_message_is_steered_whole(void **state)
{
	uint8_t f[1024];
	uint32_t t[8] = { T_OTHER, T_ZERO, T_OTHER, T_OTHER, T_ZERO, T_OTHER, T_OTHER, T_OTHER };
	for (unsigned w = 0; w < 8; w++) {
		uint32_t tt[8];
		memcpy(tt, t, sizeof(tt));
		tt[w] = T_WANTED;
		struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f,
					    data_frame(f, sizeof(f), 0, SESS_FILT, 8, tt));
		expect(o, XDP_PASS, STEERED_NO_SOCKET);
	}
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), 0, SESS_FILT, 8, t));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
}

static void timestamped_frames_are_walked(void **state)
{
	uint8_t f[1024];
	uint32_t t[5] = { T_OTHER, T_OTHER, T_OTHER, T_OTHER, T_OTHER };
	/* a timestamp's bytes that look like a wanted topic must not count */
	size_t fl = data_frame(f, sizeof(f), FLIT_FF_TS, SESS_FILT, 5, t);
	flit_st64(f + 24 + 8, T_WANTED);
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	t[4] = T_WANTED;
	fl = data_frame(f, sizeof(f), FLIT_FF_TS, SESS_FILT, 5, t);
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	/* the same frame read without the TS flag is misaligned garbage */
	flit_st16(f + 4, 0);
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
}

/* ---- a parted session (FLIT_XDP_SESS_REPORT) ---- */

static void parted_session_drops_and_tells_each_frame(void **state)
{
	uint8_t f[1024];
	reports_take();
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_REP, T_ZERO));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	uint32_t t[8] = { 1, 2, 3, 4, 5, 6, 8, 0 };  /* T_WANTED is 7 */
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), FLIT_FF_TSEQ, SESS_REP, 8, t));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	/* wanted: steered, nothing told */
	t[6] = T_WANTED;
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), 0, SESS_REP, 8, t));
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	/* no messages: dropped, nothing to tell */
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), 0, SESS_REP, 0, NULL));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	/* a malformed frame is not told (user space never sees its numbers) */
	size_t fl = one_msg_frame(f, SESS_REP, T_ZERO);
	flit_st32(f + 24 + 4, 200);
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);

	struct reports rp = reports_take();
	assert_int_equal(rp.total, 2);
	assert_int_equal(rp.r[0].session, SESS_REP);
	assert_int_equal(rp.r[0].gen, REP_GEN);
	assert_int_equal(rp.r[0].count, 1);
	assert_int_equal(rp.r[0].seq, 1000);
	assert_int_equal(rp.r[1].session, SESS_REP);
	assert_int_equal(rp.r[1].count, 8);
	assert_int_equal(rp.r[1].seq, 1000);
	/* a session filtered whole tells nothing */
	o = run_spec(&(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_FILT, T_OTHER));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	assert_int_equal(reports_take().total, 0);
}

static void parted_session_steers_topics_not_named_yet(void **state)
{
	uint8_t f[1024];
	reports_take();
	/* T_OTHER = REP_NAMED: user space has not learnt it, it may be wanted */
	struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_REP, T_OTHER));
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	uint32_t t[4] = { 1, 2, 0xfffffffeu, 3 };
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), 0, SESS_REP, 4, t));
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	/* named further: dropped */
	session_set_named(SESS_REP, FLIT_XDP_SESS_FILTER | FLIT_XDP_SESS_REPORT, REP_NAMED + 1);
	o = run_spec(&(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_REP, T_OTHER));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	session_set_named(SESS_REP, FLIT_XDP_SESS_FILTER | FLIT_XDP_SESS_REPORT, REP_NAMED);
	assert_int_equal(reports_take().total, 1);
}

static void full_report_ring_steers_instead_of_dropping(void **state)
{
	uint8_t f[256], b[512];
	reports_take();
	size_t n = build(b, &(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_REP, T_ZERO));
	/* more frames than the ring holds records, nothing read meanwhile */
	const uint32_t runs = FLIT_XDP_FILTERED_BYTES / 24 + 100;
	uint64_t before[FLIT_XDP_COUNTERS], after[FLIT_XDP_COUNTERS];
	LIBBPF_OPTS(bpf_test_run_opts, many, .data_in = b, .data_size_in = (uint32_t)n,
		    .repeat = runs);
	counters_read(before);
	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(skel->progs.flit_xdp_steer), &many), 0);
	counters_read(after);
	assert_int_equal(many.retval, XDP_PASS);      /* the last: steered (no socket) */
	uint64_t filt = after[FLIT_XDP_FILTERED] - before[FLIT_XDP_FILTERED];
	uint64_t full = after[FLIT_XDP_REPORT_FULL] - before[FLIT_XDP_REPORT_FULL];
	uint64_t nosock = after[FLIT_XDP_NO_SOCKET] - before[FLIT_XDP_NO_SOCKET];
	printf("# %u runs: %llu dropped and told, %llu steered (ring full)\n", runs,
	       (unsigned long long)filt, (unsigned long long)full);
	assert_true(filt > 0 && full > 0);
	assert_int_equal(filt + full, runs);
	assert_int_equal(nosock, full);
	/* every drop is told: the ring holds exactly the dropped frames */
	assert_int_equal(reports_take().total, filt);
	/* read: drops again */
	struct outcome o = run(b, n);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	assert_int_equal(reports_take().total, 1);
}

static void frames_with_topic_numbers_are_walked(void **state)
{
	uint8_t f[1024];
	uint32_t t[5] = { T_OTHER, T_OTHER, T_OTHER, T_OTHER, T_OTHER };
	const uint16_t fl_of[] = { FLIT_FF_TSEQ, FLIT_FF_TSEQ | FLIT_FF_TS };

	for (unsigned k = 0; k < 2; k++) {
		uint32_t mh = flit_msg_hdr_len(fl_of[k]);
		t[4] = T_OTHER;
		size_t fl = data_frame(f, sizeof(f), fl_of[k], SESS_FILT, 5, t);
		/* a topic number's bytes that look like a wanted topic must
		 * not count */
		flit_st64(f + 24 + mh - 8, T_WANTED);
		struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_DROP, FLIT_XDP_FILTERED);
		t[4] = T_WANTED;
		fl = data_frame(f, sizeof(f), fl_of[k], SESS_FILT, 5, t);
		o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_PASS, STEERED_NO_SOCKET);
		/* read without the TSEQ flag: misaligned garbage */
		flit_st16(f + 4, (uint16_t)(fl_of[k] & ~FLIT_FF_TSEQ));
		o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	}
}

/* Short headers (FLIT_FF_TSEQ | FLIT_FF_SHORT): the topic is the low 16
 * bits of the first word, the length the high 16 (a wanted topic with a
 * length is found only so), the number after them is not a topic; read in
 * the long form, or with a length past the frame, they are malformed. */
static void frames_in_short_headers_are_walked(void **state)
{
	uint8_t f[1024];
	uint32_t t[5] = { T_OTHER, T_OTHER, T_OTHER, T_OTHER, T_OTHER };
	const uint16_t fl_of[] = { FLIT_FF_TSEQ | FLIT_FF_SHORT,
				   FLIT_FF_TSEQ | FLIT_FF_SHORT | FLIT_FF_TS };

	for (unsigned k = 0; k < 2; k++) {
		t[4] = T_OTHER;
		size_t fl = data_frame(f, sizeof(f), fl_of[k], SESS_FILT, 5, t);
		assert_int_equal(flit_msg_hdr_len(fl_of[k]), k ? 16 : 8);
		flit_st32(f + 24 + 4, T_WANTED);        /* a number, not a topic */
		struct outcome o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_DROP, FLIT_XDP_FILTERED);
		t[4] = T_WANTED;
		fl = data_frame(f, sizeof(f), fl_of[k], SESS_FILT, 5, t);
		size_t last = fl - 8 - flit_msg_hdr_len(fl_of[k]);  /* message 4: 8 bytes */
		assert_int_equal(flit_ld16(f + last), T_WANTED);
		assert_int_equal(flit_ld16(f + last + 2), 8);
		o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_PASS, STEERED_NO_SOCKET);
		/* the same bytes in the long form: misaligned garbage */
		flit_st16(f + 4, (uint16_t)(fl_of[k] & ~FLIT_FF_SHORT));
		o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
		/* short without the topic numbers' flag */
		flit_st16(f + 4, (uint16_t)(fl_of[k] & ~FLIT_FF_TSEQ));
		o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
		/* a length past the frame */
		flit_st16(f + 4, fl_of[k]);
		flit_st16(f + last + 2, 0xfff0);
		o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
		expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	}
}

/* The walk reads every message of a frame, however many a datagram
 * holds (bpf_loop: no limit but the frame's bytes): a batch of 64, or of
 * 180 empty messages, none wanted, is dropped; the last one wanted, or
 * one in the middle, steers it. */
static void walk_reads_every_message_of_a_frame(void **state)
{
	uint8_t f[2048];
	uint32_t t[WALK_TEST_MAX];
	struct outcome o;

	(void)state;
	for (int i = 0; i < WALK_TEST_MAX; i++)
		t[i] = T_OTHER;
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), 0, SESS_FILT, 33, t));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), FLIT_FF_TS, SESS_FILT, 64, t));
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	size_t fl = data_frame(f, sizeof(f), 0, SESS_FILT, WALK_TEST_MAX, t);
	assert_true(fl >= 1400 && fl <= 1472);
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	t[WALK_TEST_MAX - 1] = T_WANTED;
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), 0, SESS_FILT, WALK_TEST_MAX, t));
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	t[WALK_TEST_MAX - 1] = T_OTHER;
	t[100] = T_WANTED;
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), 0, SESS_FILT, WALK_TEST_MAX, t));
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	/* a count of one more than the frame holds: malformed, not dropped
	 * as filtered */
	t[100] = T_OTHER;
	fl = data_frame(f, sizeof(f), 0, SESS_FILT, WALK_TEST_MAX, t);
	flit_st16(f + 6, WALK_TEST_MAX + 1);
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
}

static void message_running_past_frame_is_malformed(void **state)
{
	uint8_t f[1024], g[1024];
	uint32_t t[3] = { T_OTHER, T_OTHER, T_WANTED };
	size_t fl = data_frame(f, sizeof(f), 0, SESS_FILT, 3, t);
	struct outcome o;
	/* message offsets: 24, 24+8+align8(1)=40, 40+8+align8(6)=56 */
	const size_t m1 = 24, m2 = 40;

	/* first message's length runs past the frame */
	memcpy(g, f, fl);
	flit_st32(g + m1 + 4, (uint32_t)fl);
	o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	/* ... by one padded word only */
	memcpy(g, f, fl);
	flit_st32(g + m2 + 4, (uint32_t)(fl - m2 - 8 + 1));
	o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	/* the largest 24-bit length */
	memcpy(g, f, fl);
	flit_st32(g + m1 + 4, FLIT_MSG_LEN_MAX);
	o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	/* reserved message flag bits */
	for (unsigned bit = 24; bit < 32; bit++) {
		memcpy(g, f, fl);
		flit_st32(g + m1 + 4, flit_ld32(g + m1 + 4) | 1u << bit);
		o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
		expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	}
	/* reserved bits that would wrap the padded length to 0 */
	{
		uint8_t z[64];
		uint32_t zt = T_OTHER, zl = 0;
		const void *zp = z;
		size_t zfl = flit_frame_encode(z, sizeof(z), 0, SESS_FILT, 1, 1, &zt, &zp, &zl, NULL);
		assert_int_equal(zfl, 32);
		o = run_spec(&(struct pkt_spec){ 0 }, z, zfl);
		expect(o, XDP_DROP, FLIT_XDP_FILTERED);
		for (uint32_t lf = 0xfffffff9u; lf != 0; lf++) {
			flit_st32(z + 28, lf);
			o = run_spec(&(struct pkt_spec){ 0 }, z, zfl);
			expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
		}
	}
	/* count larger than the messages present (check 7a) */
	memcpy(g, f, fl);
	flit_st16(g + 6, 4);
	o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);   /* the wanted third one decides first */
	t[2] = T_OTHER;
	fl = data_frame(f, sizeof(f), 0, SESS_FILT, 3, t);
	memcpy(g, f, fl);
	flit_st16(g + 6, 4);
	o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	/* count smaller: bytes left over after the last message (check 8) */
	memcpy(g, f, fl);
	flit_st16(g + 6, 2);
	o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
	expect(o, XDP_DROP, FLIT_XDP_MALFORMED);
	/* the unchanged frame is merely filtered */
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
}

static void sessions_not_filtering_are_steered_unread(void **state)
{
	uint8_t f[256], g[256];
	uint32_t t = 3;   /* in no session's topics */
	struct outcome o;

	/* not in sessions; listed without FLIT_XDP_SESS_FILTER */
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), 0, SESS_NONE, 1, &t));
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	o = run_spec(&(struct pkt_spec){ 0 }, f, data_frame(f, sizeof(f), 0, SESS_PLAIN, 1, &t));
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	/* unread: a bad message length is left to user space's validation */
	size_t fl = data_frame(f, sizeof(f), 0, SESS_PLAIN, 1, &t);
	memcpy(g, f, fl);
	flit_st32(g + 24 + 4, 0x01000000);
	o = run_spec(&(struct pkt_spec){ 0 }, g, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	/* filtering switched on for the session takes effect at once */
	session_set(SESS_PLAIN, FLIT_XDP_SESS_FILTER);
	o = run_spec(&(struct pkt_spec){ 0 }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	session_set(SESS_PLAIN, 0);
}

static void flow_on_other_port_shares_nothing(void **state)
{
	uint8_t f[256];
	size_t fl = one_msg_frame(f, SESS_FILT, T_WANTED);
	/* same address, port not a flow */
	struct outcome o = run_spec(&(struct pkt_spec){ .dport = FLOW_PORT + 100 }, f, fl);
	expect(o, XDP_PASS, PASSED(PASS_NO_FLOW));
}

/* ---- redirect into a socket ---- */

/* An AF_XDP socket for the XSKMAP, unbound: enough for BPF_PROG_TEST_RUN's
 * redirect verdict.  It needs an RX ring: newer kernels (seen on 7.3) refuse
 * to put a socket without one into an XSKMAP (ENOBUFS), as it could never
 * receive; 6.1 to 6.18 take it. */
static int xsk_socket(void)
{
	int n = 64;

	if (xsk_fd < 0) {
		xsk_fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
		if (xsk_fd >= 0 && setsockopt(xsk_fd, SOL_XDP, XDP_RX_RING, &n, sizeof(n))) {
			int e = errno;
			close(xsk_fd);
			xsk_fd = -1;
			errno = e;
		}
	}
	return xsk_fd;
}

static void frame_with_socket_in_slot_is_redirected(void **state)
{
	uint8_t f[256];
	int fd = xsk_socket();
	if (fd < 0) {
		printf("SKIP: socket(AF_XDP): %s\n", strerror(errno));
		skip();
	}
	uint32_t slot = SLOT_SOCK;
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(skel->maps.xsks), &slot, &fd, BPF_ANY), 0);
	flow_add(FLOW_ADDR, OTHER_PORT, SLOT_SOCK);

	size_t fl = one_msg_frame(f, SESS_FILT, T_WANTED);
	struct outcome o = run_spec(&(struct pkt_spec){ .dport = OTHER_PORT }, f, fl);
	expect(o, XDP_REDIRECT, FLIT_XDP_REDIRECTED);
	o = run_spec(&(struct pkt_spec){ .dport = OTHER_PORT, .vlans = 2 }, f, fl);
	expect(o, XDP_REDIRECT, FLIT_XDP_REDIRECTED, FLIT_XDP_VLAN);
	/* filtered and malformed frames still drop, non-flit still pass */
	fl = one_msg_frame(f, SESS_FILT, T_OTHER);
	o = run_spec(&(struct pkt_spec){ .dport = OTHER_PORT }, f, fl);
	expect(o, XDP_DROP, FLIT_XDP_FILTERED);
	fl = flit_ctl_hb_encode(f, sizeof(f), SESS_FILT, 1, 1);
	o = run_spec(&(struct pkt_spec){ .dport = OTHER_PORT }, f, fl);
	expect(o, XDP_REDIRECT, FLIT_XDP_REDIRECTED);
	memset(f, 0, 32);
	o = run_spec(&(struct pkt_spec){ .dport = OTHER_PORT }, f, 32);
	expect(o, XDP_PASS, PASSED(PASS_NOT_FLIT));

	/* the slot emptied: the kernel stack gets the datagram */
	assert_int_equal(bpf_map_delete_elem(bpf_map__fd(skel->maps.xsks), &slot), 0);
	fl = one_msg_frame(f, SESS_FILT, T_WANTED);
	o = run_spec(&(struct pkt_spec){ .dport = OTHER_PORT }, f, fl);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
}

static void slot_is_slot_base_plus_rx_queue(void **state)
{
	uint8_t b[512], f[256];
	int fd = xsk_socket();
	if (fd < 0) {
		printf("SKIP: socket(AF_XDP): %s\n", strerror(errno));
		skip();
	}
	/* a 4-queue veth in a namespace of our own (see the header) */
	if (unshare(CLONE_NEWNET) != 0 ||
	    system("ip link add fxp0 numrxqueues 4 type veth peer name fxp1 numrxqueues 4") != 0) {
		printf("SKIP: no private netns with a 4-queue veth: %s\n", strerror(errno));
		skip();
	}
	unsigned ifindex = if_nametoindex("fxp0");
	assert_true(ifindex > 0);

	/* flow slot_base 20, socket in slot 23: rx queue 3 */
	uint32_t slot = 23;
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(skel->maps.xsks), &slot, &fd, BPF_ANY), 0);
	flow_add(FLOW_ADDR, OTHER_PORT + 1, 20);
	size_t n = build(b, &(struct pkt_spec){ .dport = OTHER_PORT + 1 }, f,
			 one_msg_frame(f, SESS_NONE, 1));
	for (uint32_t q = 0; q < 4; q++) {
		struct xdp_md md = { .ingress_ifindex = ifindex, .rx_queue_index = q };
		struct outcome o = run_ctx(b, n, &md);
		if (q == 3)
			expect(o, XDP_REDIRECT, FLIT_XDP_REDIRECTED);
		else
			expect(o, XDP_PASS, STEERED_NO_SOCKET);
	}
	/* slot_base + queue past the map's 64 slots: no socket */
	flow_add(FLOW_ADDR, OTHER_PORT + 1, FLIT_XDP_XSKS_MAX - 1);
	struct xdp_md md = { .ingress_ifindex = ifindex, .rx_queue_index = 2 };
	struct outcome o = run_ctx(b, n, &md);
	expect(o, XDP_PASS, STEERED_NO_SOCKET);
	assert_int_equal(bpf_map_delete_elem(bpf_map__fd(skel->maps.xsks), &slot), 0);
}

static void skeleton_carries_its_version(void **state)
{
	assert_int_equal(skel->rodata->flit_xdp_version, FLIT_XDP_VERSION);
}

static void every_packet_counts_once_in_a_batch(void **state)
{
	uint8_t b[512], f[256];
	size_t n = build(b, &(struct pkt_spec){ 0 }, f, one_msg_frame(f, SESS_FILT, T_OTHER));
	uint64_t before[FLIT_XDP_COUNTERS], after[FLIT_XDP_COUNTERS];
	LIBBPF_OPTS(bpf_test_run_opts, r, .data_in = b, .data_size_in = (uint32_t)n, .repeat = 100);

	counters_read(before);
	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(skel->progs.flit_xdp_steer), &r), 0);
	counters_read(after);
	assert_int_equal(r.retval, XDP_DROP);
	assert_int_equal(after[FLIT_XDP_FILTERED] - before[FLIT_XDP_FILTERED], 100);
	assert_int_equal(after[FLIT_XDP_PASSED] - before[FLIT_XDP_PASSED], 0);
}

int main(void)
{
	struct flit_xdp *probe = flit_xdp__open_and_load();
	if (!probe) {
		int e = errno;
		if (e == EPERM) {
			printf("SKIP: loading the XDP program: %s (needs CAP_BPF, CAP_NET_ADMIN)\n",
			       strerror(e));
			return 77;
		}
		printf("FAIL: loading the XDP program: %s (verifier log above)\n", strerror(e));
		return 1;
	}
	struct bpf_prog_info info = { 0 };
	uint32_t ilen = sizeof(info);
	if (bpf_obj_get_info_by_fd(bpf_program__fd(probe->progs.flit_xdp_steer), &info, &ilen) == 0)
		printf("flit_xdp_steer: %u instructions, %u verified, %u bytes JITed\n",
		       info.xlated_prog_len / 8, info.verified_insns, info.jited_prog_len);
	flit_xdp__destroy(probe);
	/* every xdp context loads the program: its verification is part of
	 * starting one.  A branch per message in the walk once took it from
	 * ~23,000 to ~90,000 instructions verified, and a context's start
	 * under 6.1 in a TCG guest from 2 s to 15 s. */
	if (info.verified_insns > VERIFIED_MAX) {
		printf("FAIL: the verifier walked %u instructions of flit_xdp_steer, more than %u: "
		       "a branch in the message walk? (choose by masks there)\n",
		       info.verified_insns, VERIFIED_MAX);
		return 1;
	}

#define T(fn) cmocka_unit_test_setup(fn, maps_setup)
	const struct CMUnitTest tests[] = {
		T(truncated_ethernet_passes_short),
		T(truncated_vlan_tag_passes_short),
		T(truncated_ipv4_header_passes_short),
		T(ipv4_ihl_below_5_passes_short),
		T(ipv4_version_not_4_passes_short),
		T(ipv4_options_past_packet_pass_short),
		T(ipv4_options_are_skipped_and_frame_steered),
		T(truncated_udp_header_passes_short),
		T(ipv4_fragments_pass_to_the_kernel),
		T(ipv6_passes_ipv6),
		T(arp_passes_not_ipv4),
		T(tcp_and_icmp_pass_not_udp),
		T(vlan_tagged_flit_frames_are_steered),
		T(third_vlan_tag_passes_not_ipv4),
		T(udp_to_no_flow_passes_no_flow),
		T(non_flit_payload_passes_not_flit),
		T(flow_without_socket_passes_no_socket),
		T(udp_length_past_packet_is_malformed),
		T(udp_length_shorter_than_frame_is_malformed),
		T(data_with_bad_header_is_malformed),
		T(known_flags_are_accepted),
		T(unknown_frame_types_are_malformed),
		T(control_frames_are_steered_unfiltered),
		T(wanted_topic_is_steered),
		T(unwanted_topic_is_filtered),
		T(frame_of_no_messages_is_filtered),
		T(batch_with_one_wanted_message_is_steered_whole),
		T(timestamped_frames_are_walked),
		T(frames_with_topic_numbers_are_walked),
		T(parted_session_drops_and_tells_each_frame),
		T(parted_session_steers_topics_not_named_yet),
		T(full_report_ring_steers_instead_of_dropping),
		T(frames_in_short_headers_are_walked),
		T(walk_reads_every_message_of_a_frame),
		T(message_running_past_frame_is_malformed),
		T(sessions_not_filtering_are_steered_unread),
		T(flow_on_other_port_shares_nothing),
		T(frame_with_socket_in_slot_is_redirected),
		T(slot_is_slot_base_plus_rx_queue),
		T(skeleton_carries_its_version),
		T(every_packet_counts_once_in_a_batch),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
