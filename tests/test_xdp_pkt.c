// SPDX-License-Identifier: BSD-2-Clause
/*
 * Frame parsing and building of the AF_XDP data path (transports/xdp/pkt.h).
 *
 * Checksums are checked against a deliberately naive byte-wise RFC 1071
 * implementation written here (16-bit big-endian words, 32-bit sum, folded
 * at the end), and against golden bytes: the IPv4 header of the Wikipedia
 * "IPv4 header checksum" example (checksum 0xb861) and one whole UDP frame
 * whose checksums tcpdump validated when this test was written.
 *
 * Malformed frames are derived from a good one by changing one thing and,
 * where the change would otherwise be caught by a checksum first, fixing
 * the checksums up again with the reference implementation, so each case
 * tests the reason it is named after.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xdp/pkt.h"

#define ETH 14u

/* ---- reference implementation ------------------------------------------- */

static uint32_t ref_sum(const uint8_t *p, size_t len, uint32_t s)
{
	for (size_t i = 0; i + 1 < len; i += 2) {
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
		s = (s & 0xffff) + (s >> 16);
	}
	if (len & 1)
		s += (uint32_t)p[len - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return s;
}

/* checksum value, host order, as it should read big-endian off the wire */
static uint16_t ref_csum(const uint8_t *p, size_t len)
{
	return (uint16_t)~ref_sum(p, len, 0);
}

static uint16_t ref_udp_csum(const uint8_t *ip, const uint8_t *udp, uint16_t ulen)
{
	uint32_t s = 0;
	s = ref_sum(ip + 12, 8, s);             /* source and destination */
	s += 17;
	s += ulen;
	s = ref_sum(udp, ulen, s);
	uint16_t c = (uint16_t)~s;
	return c ? c : 0xffff;
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Recompute both checksums of the frame whose IPv4 header is at ip. */
static void fix_csums(uint8_t *ip)
{
	unsigned hlen = (ip[0] & 15u) * 4;
	wr16(ip + 10, 0);
	wr16(ip + 10, ref_csum(ip, hlen));
	uint8_t *udp = ip + hlen;
	uint16_t ulen = rd16(udp + 4);
	wr16(udp + 6, 0);
	wr16(udp + 6, ref_udp_csum(ip, udp, ulen));
}

/* ---- fixtures ---------------------------------------------------------- */

static uint32_t ip4(unsigned a, unsigned b, unsigned c, unsigned d)
{
	return htonl(a << 24 | b << 16 | c << 8 | d);
}

static struct flit_pkt_hdr hdr_example(void)
{
	struct flit_pkt_hdr h = {
		.dmac = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 },
		.smac = { 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee },
		.saddr = ip4(10, 99, 0, 1),
		.daddr = ip4(10, 99, 0, 2),
		.sport = htons(40000),
		.dport = htons(14600),
		.id = 0x1234,
		.ttl = 64,
	};
	return h;
}

static void pattern(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131u + i * 7u + 1u);
}

/* A good frame with a payload of len pattern bytes; returns its length. */
static uint32_t good_frame(uint8_t *f, uint32_t cap, uint32_t len)
{
	uint8_t pl[2048];
	struct flit_pkt_hdr h = hdr_example();
	assert_true(len <= sizeof(pl));
	pattern(pl, len, len);
	uint32_t n = flit_pkt_build(f, cap, &h, pl, len);
	assert_int_equal(n, FLIT_PKT_HDR_LEN + len);
	return n;
}

static enum flit_pkt_res parse(const uint8_t *f, uint32_t len, bool verify,
			       struct flit_pkt_info *pi)
{
	/* exactly len bytes on the heap: ASan catches a read past the end */
	uint8_t *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, f, len);
	enum flit_pkt_res r = flit_pkt_parse(copy, len, verify, pi);
	if (r == FLIT_PKT_OK) {
		assert_true(pi->payload >= copy && pi->payload + pi->len <= copy + len);
		pi->payload = f + (pi->payload - copy);   /* point into f again */
	}
	free(copy);
	return r;
}

/* ---- round trip ---------------------------------------------------------- */

static void build_then_parse_gives_back_addresses_ports_and_payload(void **state)
{
	(void)state;
	uint8_t f[2048], pl[1500];
	struct flit_pkt_hdr h = hdr_example();

	for (uint32_t len = 0; len <= 1472; len += (len < 70 ? 1 : 97)) {
		pattern(pl, len, len);
		uint32_t n = flit_pkt_build(f, sizeof(f), &h, pl, len);
		assert_int_equal(n, 42 + len);

		struct flit_pkt_info pi;
		assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_OK);
		assert_int_equal(pi.len, len);
		assert_ptr_equal(pi.payload, f + 42);
		assert_memory_equal(pi.payload, pl, len);
		assert_int_equal(pi.saddr, h.saddr);
		assert_int_equal(pi.daddr, h.daddr);
		assert_int_equal(pi.sport, h.sport);
		assert_int_equal(pi.dport, h.dport);
		assert_int_equal(pi.ttl, 64);
		assert_int_equal(pi.nvlan, 0);
	}
}

static void built_headers_are_the_documented_fields(void **state)
{
	(void)state;
	uint8_t f[256];
	struct flit_pkt_hdr h = hdr_example();
	uint32_t n = flit_pkt_build(f, sizeof(f), &h, "hello", 5);
	assert_int_equal(n, 47);
	assert_memory_equal(f, h.dmac, 6);
	assert_memory_equal(f + 6, h.smac, 6);
	assert_int_equal(rd16(f + 12), 0x0800);
	const uint8_t *ip = f + ETH;
	assert_int_equal(ip[0], 0x45);                  /* v4, no options */
	assert_int_equal(ip[1], 0);                     /* TOS */
	assert_int_equal(rd16(ip + 2), 20 + 8 + 5);     /* total length */
	assert_int_equal(rd16(ip + 4), 0x1234);         /* ID */
	assert_int_equal(rd16(ip + 6), 0);              /* DF clear, no fragment */
	assert_int_equal(ip[8], 64);
	assert_int_equal(ip[9], 17);
	assert_memory_equal(ip + 12, &h.saddr, 4);
	assert_memory_equal(ip + 16, &h.daddr, 4);
	const uint8_t *udp = ip + 20;
	assert_int_equal(rd16(udp), 40000);
	assert_int_equal(rd16(udp + 2), 14600);
	assert_int_equal(rd16(udp + 4), 13);
	assert_memory_equal(udp + 8, "hello", 5);
}

static void build_refuses_what_does_not_fit(void **state)
{
	(void)state;
	uint8_t f[100], pl[100] = { 0 };
	struct flit_pkt_hdr h = hdr_example();
	assert_int_equal(flit_pkt_build(f, 100, &h, pl, 58), 100);
	assert_int_equal(flit_pkt_build(f, 100, &h, pl, 59), 0);
	assert_int_equal(flit_pkt_build(f, 41, &h, pl, 0), 0);
	assert_int_equal(flit_pkt_build(f, 42, &h, pl, 0), 42);
	assert_int_equal(flit_pkt_build(f, UINT32_MAX, &h, pl, FLIT_PKT_PAYLOAD_MAX + 1), 0);
}

/* ---- checksums ---------------------------------------------------------- */

static void checksums_match_a_bytewise_rfc1071_reference(void **state)
{
	(void)state;
	uint8_t f[2048], pl[1500];
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	for (int iter = 0; iter < 3000; iter++) {
		struct flit_pkt_hdr h = hdr_example();
		rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
		uint32_t len = (uint32_t)(rng % 1473);
		h.saddr = (uint32_t)rng;
		h.daddr = (uint32_t)(rng >> 32);
		h.sport = (uint16_t)(rng >> 11);
		h.dport = (uint16_t)(rng >> 27);
		h.id = (uint16_t)(rng >> 40);
		h.ttl = (uint8_t)(rng >> 56);
		for (uint32_t i = 0; i < len; i++) {
			rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
			/* runs of 0xff stress the carries */
			pl[i] = (iter & 1) ? 0xff : (uint8_t)rng;
		}
		uint32_t n = flit_pkt_build(f, sizeof(f), &h, pl, len);
		assert_int_equal(n, 42 + len);

		uint8_t *ip = f + ETH, *udp = ip + 20;
		uint16_t ipc = rd16(ip + 10), udc = rd16(udp + 6);
		wr16(ip + 10, 0);
		assert_int_equal(ipc, ref_csum(ip, 20));
		wr16(ip + 10, ipc);
		wr16(udp + 6, 0);
		assert_int_equal(udc, ref_udp_csum(ip, udp, (uint16_t)(8 + len)));
		wr16(udp + 6, udc);
	}
}

static void csum_partial_matches_reference_for_every_length_and_all_ones(void **state)
{
	(void)state;
	static uint8_t buf[65536 + 8];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	for (size_t len = 0; len <= 300; len++) {
		uint16_t got = (uint16_t)~flit_csum_fold(flit_csum_partial(buf, len, 0));
		uint16_t want = ref_csum(buf, len);
		/* the library sums native-order words: compare the bytes */
		uint8_t gb[2], wb[2];
		memcpy(gb, &got, 2);
		wr16(wb, want);
		assert_memory_equal(gb, wb, 2);
	}
	memset(buf, 0xff, sizeof(buf));
	for (size_t len = 65530; len <= 65536; len++) {
		uint16_t got = (uint16_t)~flit_csum_fold(flit_csum_partial(buf, len, 0));
		uint8_t gb[2], wb[2];
		memcpy(gb, &got, 2);
		wr16(wb, ref_csum(buf, len));
		assert_memory_equal(gb, wb, 2);
	}
}

/* Wikipedia, "Internet checksum" / IPv4 header checksum example. */
static void golden_ipv4_header_checksum_is_b861(void **state)
{
	(void)state;
	uint8_t ip[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
			   0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7 };
	assert_int_equal(ref_csum(ip, 20), 0xb861);
	uint16_t v = (uint16_t)~flit_csum_fold(flit_csum_partial(ip, 20, 0));
	memcpy(ip + 10, &v, 2);
	assert_int_equal(ip[10], 0xb8);
	assert_int_equal(ip[11], 0x61);
	assert_int_equal(flit_csum_fold(flit_csum_partial(ip, 20, 0)), 0xffff);
}

/* hdr_example() with payload "flit": checksums from an independent Python
 * RFC 1071 implementation; `tcpdump -vvv` 4.99 reads the frame as
 * "[udp sum ok]" with no "bad cksum" for the IPv4 header. */
static const uint8_t golden_frame[] = {
	0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,
	0x08, 0x00,
	0x45, 0x00, 0x00, 0x20, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, 0x53, 0xd1,
	0x0a, 0x63, 0x00, 0x01, 0x0a, 0x63, 0x00, 0x02,
	0x9c, 0x40, 0x39, 0x08, 0x00, 0x0c, 0x45, 0xe4,
	'f', 'l', 'i', 't',
};

static void golden_frame_is_built_byte_for_byte_and_parses(void **state)
{
	(void)state;
	uint8_t f[128];
	struct flit_pkt_hdr h = hdr_example();
	uint32_t n = flit_pkt_build(f, sizeof(f), &h, "flit", 4);
	assert_int_equal(n, sizeof(golden_frame));
	assert_memory_equal(f, golden_frame, sizeof(golden_frame));

	struct flit_pkt_info pi;
	assert_int_equal(parse(golden_frame, sizeof(golden_frame), true, &pi), FLIT_PKT_OK);
	assert_int_equal(pi.len, 4);
	assert_memory_equal(pi.payload, "flit", 4);
}

static void udp_checksum_of_zero_is_sent_as_ffff_and_accepted(void **state)
{
	(void)state;
	uint8_t f[128], pl[8] = { 1, 2, 3, 4, 0, 0, 7, 8 };
	struct flit_pkt_hdr h = hdr_example();

	flit_pkt_build(f, sizeof(f), &h, pl, sizeof(pl));
	/* payload bytes 4..5 (an even offset of the UDP data) set to the
	 * checksum: the sum becomes 0xffff and the checksum 0 */
	memcpy(pl + 4, f + ETH + 20 + 6, 2);
	uint32_t n = flit_pkt_build(f, sizeof(f), &h, pl, sizeof(pl));
	assert_int_equal(rd16(f + ETH + 20 + 6), 0xffff);
	struct flit_pkt_info pi;
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_OK);
}

/* ---- rejection ------------------------------------------------------------ */

static void truncation_at_every_length_is_short(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 30);
	struct flit_pkt_info pi;
	for (uint32_t len = 0; len < n; len++)
		assert_int_equal(parse(f, len, true, &pi), FLIT_PKT_SHORT);
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_OK);
}

static void ethernet_padding_after_the_ip_packet_is_ignored(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 2);       /* 44 bytes: pads to 60 */
	memset(f + n, 0xee, 16);
	struct flit_pkt_info pi;
	assert_int_equal(parse(f, 60, true, &pi), FLIT_PKT_OK);
	assert_int_equal(pi.len, 2);
}

static void ihl_below_5_is_badhdr(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;
	for (uint8_t ihl = 0; ihl < 5; ihl++) {
		f[ETH] = (uint8_t)(0x40 | ihl);
		assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_BADHDR);
	}
}

static void ip_version_other_than_4_is_badhdr(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;
	f[ETH] = 0x65;
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_BADHDR);
}

static void ip_total_length_beyond_the_frame_is_short(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;
	wr16(f + ETH + 2, (uint16_t)(n - ETH + 1));
	fix_csums(f + ETH);
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_SHORT);
	wr16(f + ETH + 2, 0xffff);
	fix_csums(f + ETH);
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_SHORT);
}

static void ip_total_length_below_header_length_is_badhdr(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;
	wr16(f + ETH + 2, 19);
	fix_csums(f + ETH);
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_BADHDR);
}

static void ip_payload_without_room_for_udp_header_is_short(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;
	wr16(f + ETH + 2, 20 + 7);
	uint8_t *ip = f + ETH;
	wr16(ip + 10, 0);
	wr16(ip + 10, ref_csum(ip, 20));
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_SHORT);
}

static void udp_length_beyond_ip_payload_or_below_8_is_badhdr(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;
	uint8_t *udp = f + ETH + 20;
	wr16(udp + 4, 19);              /* IP payload is 18 */
	wr16(udp + 6, 0);
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_BADHDR);
	for (uint16_t ul = 0; ul < 8; ul++) {
		wr16(udp + 4, ul);
		assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_BADHDR);
	}
}

static void udp_length_below_ip_payload_takes_the_udp_length(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;
	wr16(f + ETH + 20 + 4, 8 + 6);
	fix_csums(f + ETH);
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_OK);
	assert_int_equal(pi.len, 6);
}

static void fragments_are_proto_but_df_is_fine(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;
	const uint16_t flags[] = { 0x2000 /* MF */, 0x0001 /* offset 8 */, 0x1fff, 0x6000 };
	for (unsigned i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		wr16(f + ETH + 6, flags[i]);
		fix_csums(f + ETH);
		assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_PROTO);
	}
	wr16(f + ETH + 6, 0x4000);      /* DF */
	fix_csums(f + ETH);
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_OK);
}

static void non_udp_ipv6_and_arp_are_proto(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;

	f[ETH + 9] = 6;                 /* TCP */
	wr16(f + ETH + 10, 0);
	wr16(f + ETH + 10, ref_csum(f + ETH, 20));
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_PROTO);

	n = good_frame(f, sizeof(f), 10);
	wr16(f + 12, 0x86dd);
	f[ETH] = 0x60;
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_PROTO);
	wr16(f + 12, 0x0806);
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_PROTO);
}

static void bad_ip_header_checksum_is_ipcsum(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 10);
	struct flit_pkt_info pi;
	f[ETH + 11] ^= 1;
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_IPCSUM);
	assert_int_equal(parse(f, n, false, &pi), FLIT_PKT_IPCSUM);   /* always */
	f[ETH + 11] ^= 1;
	f[ETH + 8] ^= 0x10;             /* TTL changed, checksum not */
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_IPCSUM);
}

static void bad_udp_checksum_is_udpcsum_only_when_verifying(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 33);
	struct flit_pkt_info pi;
	f[n - 1] ^= 0x40;               /* payload corrupted */
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_UDPCSUM);
	assert_int_equal(parse(f, n, false, &pi), FLIT_PKT_OK);
	f[n - 1] ^= 0x40;
	f[ETH + 20 + 7] ^= 1;           /* checksum itself corrupted */
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_UDPCSUM);
	f[ETH + 12] ^= 1;               /* source address (pseudo-header) */
	f[ETH + 20 + 7] ^= 1;
	wr16(f + ETH + 10, 0);
	wr16(f + ETH + 10, ref_csum(f + ETH, 20));
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_UDPCSUM);
}

static void udp_checksum_0_means_none_and_is_accepted(void **state)
{
	(void)state;
	uint8_t f[256];
	uint32_t n = good_frame(f, sizeof(f), 33);
	struct flit_pkt_info pi;
	wr16(f + ETH + 20 + 6, 0);
	f[n - 1] ^= 0x40;               /* nothing checks the payload now */
	assert_int_equal(parse(f, n, true, &pi), FLIT_PKT_OK);
	assert_int_equal(pi.len, 33);
}

static void ip_options_are_skipped(void **state)
{
	(void)state;
	uint8_t g[256], f[300];
	uint32_t n = good_frame(g, sizeof(g), 12);
	struct flit_pkt_info pi;

	for (unsigned ihl = 6; ihl <= 15; ihl++) {
		unsigned opt = (ihl - 5) * 4;
		memcpy(f, g, ETH + 20);
		memset(f + ETH + 20, 1, opt);           /* NOPs */
		memcpy(f + ETH + 20 + opt, g + ETH + 20, n - ETH - 20);
		f[ETH] = (uint8_t)(0x40 | ihl);
		wr16(f + ETH + 2, (uint16_t)(rd16(g + ETH + 2) + opt));
		fix_csums(f + ETH);
		assert_int_equal(parse(f, n + opt, true, &pi), FLIT_PKT_OK);
		assert_int_equal(pi.len, 12);
		assert_ptr_equal(pi.payload, f + ETH + 20 + opt + 8);
		/* cut inside the options */
		assert_int_equal(parse(f, ETH + 20 + opt - 1, true, &pi), FLIT_PKT_SHORT);
	}
}

/* Insert VLAN tags (tpid, tci) after the MAC addresses of good frame g. */
static uint32_t tagged(uint8_t *f, const uint8_t *g, uint32_t n, const uint16_t *tags,
		       unsigned ntags)
{
	memcpy(f, g, 12);
	for (unsigned i = 0; i < ntags; i++) {
		wr16(f + 12 + 4 * i, tags[2 * i]);
		wr16(f + 14 + 4 * i, tags[2 * i + 1]);
	}
	memcpy(f + 12 + 4 * ntags, g + 12, n - 12);
	return n + 4 * ntags;
}

static void single_and_double_vlan_tags_are_skipped(void **state)
{
	(void)state;
	uint8_t g[256], f[300];
	uint32_t n = good_frame(g, sizeof(g), 20), m;
	struct flit_pkt_info pi;

	const uint16_t one[] = { 0x8100, 0x2064 };
	m = tagged(f, g, n, one, 1);
	assert_int_equal(parse(f, m, true, &pi), FLIT_PKT_OK);
	assert_int_equal(pi.nvlan, 1);
	assert_int_equal(pi.vlan_tci, 0x2064);
	assert_int_equal(pi.len, 20);
	assert_ptr_equal(pi.payload, f + 18 + 28);

	const uint16_t two[] = { 0x88a8, 0x0123, 0x8100, 0x0456 };
	m = tagged(f, g, n, two, 2);
	assert_int_equal(parse(f, m, true, &pi), FLIT_PKT_OK);
	assert_int_equal(pi.nvlan, 2);
	assert_int_equal(pi.vlan_tci, 0x0123);
	assert_ptr_equal(pi.payload, f + 22 + 28);
	for (uint32_t len = 0; len < m; len++)
		assert_int_equal(parse(f, len, true, &pi), FLIT_PKT_SHORT);

	const uint16_t qq[] = { 0x8100, 1, 0x8100, 2 };
	m = tagged(f, g, n, qq, 2);
	assert_int_equal(parse(f, m, true, &pi), FLIT_PKT_OK);
}

static void three_vlan_tags_are_proto(void **state)
{
	(void)state;
	uint8_t g[256], f[300];
	uint32_t n = good_frame(g, sizeof(g), 20);
	struct flit_pkt_info pi;
	const uint16_t three[] = { 0x88a8, 1, 0x8100, 2, 0x8100, 3 };
	uint32_t m = tagged(f, g, n, three, 3);
	assert_int_equal(parse(f, m, true, &pi), FLIT_PKT_PROTO);
}

/* ---- multicast ----------------------------------------------------------- */

static void multicast_mac_is_01005e_and_low_23_bits(void **state)
{
	(void)state;
	static const struct {
		unsigned a, b, c, d;
		uint8_t mac[6];
	} cases[] = {
		{ 239, 192, 76, 1, { 0x01, 0x00, 0x5e, 0x40, 0x4c, 0x01 } },
		{ 224, 0, 0, 1, { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 } },
		{ 239, 255, 255, 255, { 0x01, 0x00, 0x5e, 0x7f, 0xff, 0xff } },
		{ 225, 128, 0, 1, { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 } },   /* bit 23 dropped */
		{ 232, 1, 2, 3, { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 } },
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t mac[6];
		uint32_t g = ip4(cases[i].a, cases[i].b, cases[i].c, cases[i].d);
		assert_true(flit_pkt_is_multicast(g));
		flit_pkt_mcast_mac(g, mac);
		assert_memory_equal(mac, cases[i].mac, 6);
	}
	assert_false(flit_pkt_is_multicast(ip4(223, 255, 255, 255)));
	assert_false(flit_pkt_is_multicast(ip4(240, 0, 0, 1)));
	assert_false(flit_pkt_is_multicast(ip4(10, 99, 0, 2)));
}

static void every_result_has_a_name(void **state)
{
	(void)state;
	for (int r = 0; r < FLIT_PKT__MAX; r++)
		assert_string_not_equal(flit_pkt_res_str((enum flit_pkt_res)r), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(build_then_parse_gives_back_addresses_ports_and_payload),
		cmocka_unit_test(built_headers_are_the_documented_fields),
		cmocka_unit_test(build_refuses_what_does_not_fit),
		cmocka_unit_test(checksums_match_a_bytewise_rfc1071_reference),
		cmocka_unit_test(csum_partial_matches_reference_for_every_length_and_all_ones),
		cmocka_unit_test(golden_ipv4_header_checksum_is_b861),
		cmocka_unit_test(golden_frame_is_built_byte_for_byte_and_parses),
		cmocka_unit_test(udp_checksum_of_zero_is_sent_as_ffff_and_accepted),
		cmocka_unit_test(truncation_at_every_length_is_short),
		cmocka_unit_test(ethernet_padding_after_the_ip_packet_is_ignored),
		cmocka_unit_test(ihl_below_5_is_badhdr),
		cmocka_unit_test(ip_version_other_than_4_is_badhdr),
		cmocka_unit_test(ip_total_length_beyond_the_frame_is_short),
		cmocka_unit_test(ip_total_length_below_header_length_is_badhdr),
		cmocka_unit_test(ip_payload_without_room_for_udp_header_is_short),
		cmocka_unit_test(udp_length_beyond_ip_payload_or_below_8_is_badhdr),
		cmocka_unit_test(udp_length_below_ip_payload_takes_the_udp_length),
		cmocka_unit_test(fragments_are_proto_but_df_is_fine),
		cmocka_unit_test(non_udp_ipv6_and_arp_are_proto),
		cmocka_unit_test(bad_ip_header_checksum_is_ipcsum),
		cmocka_unit_test(bad_udp_checksum_is_udpcsum_only_when_verifying),
		cmocka_unit_test(udp_checksum_0_means_none_and_is_accepted),
		cmocka_unit_test(ip_options_are_skipped),
		cmocka_unit_test(single_and_double_vlan_tags_are_skipped),
		cmocka_unit_test(three_vlan_tags_are_proto),
		cmocka_unit_test(multicast_mac_is_01005e_and_low_23_bits),
		cmocka_unit_test(every_result_has_a_name),
	};
	return cmocka_run_group_tests_name("xdp_pkt", tests, NULL, NULL);
}
