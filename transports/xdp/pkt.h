/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Ethernet/IPv4/UDP frames for the AF_XDP data path: parse a received frame,
 * build one to send.  Pure code over caller memory: no I/O, no allocation,
 * everything static inline (it runs once per datagram on a path measured in
 * hundreds of nanoseconds).
 *
 * Parsing never reads a byte before checking it lies inside the frame, and
 * trusts no length field: the IPv4 total length must fit in the frame (the
 * frame may be longer: Ethernet padding), the UDP length in the IPv4 payload
 * (it may be shorter: the rest is ignored, as Linux does).  Fragments, IPv4
 * options and VLAN tags: see flit_pkt_parse().
 *
 * Addresses and ports are kept in network order throughout, as in
 * struct sockaddr_in.
 *
 * Checksums (RFC 1071) are summed 64 bits at a time with end-around carry,
 * over native-order loads: the one's complement sum commutes with byte
 * swapping (RFC 1071, 2.(B)), so the folded result, stored back in native
 * order, has the right bytes on either endianness.  No load is assumed
 * aligned (memcpy, which compiles to plain loads on x86).
 */
#ifndef FLIT_XDP_PKT_H
#define FLIT_XDP_PKT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#define FLIT_PKT_ETH_LEN   14u
#define FLIT_PKT_VLAN_LEN  4u
#define FLIT_PKT_IP_LEN    20u          /* without options */
#define FLIT_PKT_UDP_LEN   8u
#define FLIT_PKT_HDR_LEN   (FLIT_PKT_ETH_LEN + FLIT_PKT_IP_LEN + FLIT_PKT_UDP_LEN)
/* Largest UDP payload in an IPv4 packet (65535 - 20 - 8). */
#define FLIT_PKT_PAYLOAD_MAX 65507u

#define FLIT_ETH_P_IP      0x0800
#define FLIT_ETH_P_8021Q   0x8100
#define FLIT_ETH_P_8021AD  0x88a8

enum flit_pkt_res {
	FLIT_PKT_OK = 0,
	FLIT_PKT_SHORT,     /* the frame ends before a header, or before the
			     * IPv4 total length, or the IPv4 payload has no
			     * room for a UDP header */
	FLIT_PKT_BADHDR,    /* inconsistent header: IPv4 version != 4, IHL < 5,
			     * total length < header length, UDP length < 8
			     * or > the IPv4 payload */
	FLIT_PKT_PROTO,     /* not IPv4 (IPv6, ARP, more than two VLAN tags),
			     * not UDP, or an IPv4 fragment */
	FLIT_PKT_IPCSUM,    /* bad IPv4 header checksum */
	FLIT_PKT_UDPCSUM,   /* bad UDP checksum (0: none, accepted) */
	FLIT_PKT__MAX
};

/* A parsed datagram: a view into the frame. */
struct flit_pkt_info {
	const uint8_t *payload;  /* UDP payload, inside the frame */
	uint32_t len;            /* UDP payload bytes (UDP length - 8) */
	uint32_t saddr, daddr;   /* network order */
	uint16_t sport, dport;   /* network order */
	uint16_t vlan_tci;       /* outermost tag's TCI (host order), 0: none */
	uint8_t nvlan;           /* VLAN tags skipped, 0..2 */
	uint8_t ttl;
};

/* What a built frame carries. */
struct flit_pkt_hdr {
	uint8_t dmac[6], smac[6];
	uint32_t saddr, daddr;   /* network order */
	uint16_t sport, dport;   /* network order */
	uint16_t id;             /* IPv4 identification, host order */
	uint8_t ttl;
};

static inline const char *flit_pkt_res_str(enum flit_pkt_res r)
{
	switch (r) {
	case FLIT_PKT_OK: return "ok";
	case FLIT_PKT_SHORT: return "truncated";
	case FLIT_PKT_BADHDR: return "inconsistent header";
	case FLIT_PKT_PROTO: return "not IPv4/UDP";
	case FLIT_PKT_IPCSUM: return "bad IPv4 header checksum";
	case FLIT_PKT_UDPCSUM: return "bad UDP checksum";
	default: return "?";
	}
}

/* ---- checksums ---------------------------------------------------------- */

static inline uint64_t flit_csum_add(uint64_t s, uint64_t w)
{
	uint64_t r;
	if (__builtin_add_overflow(s, w, &r))
		r++;            /* end-around carry; cannot overflow again */
	return r;
}

/* Add len bytes at p to the running sum s (64-bit accumulator, fold it with
 * flit_csum_fold()).  p must start at an even offset of the summed data. */
static inline uint64_t flit_csum_partial(const void *p, size_t len, uint64_t s)
{
	const uint8_t *b = p;
	uint64_t w0, w1, w2, w3;
	uint64_t s1 = 0;

	/* two independent accumulators: their carry chains overlap */
	while (len >= 32) {
		memcpy(&w0, b, 8);
		memcpy(&w1, b + 8, 8);
		memcpy(&w2, b + 16, 8);
		memcpy(&w3, b + 24, 8);
		s = flit_csum_add(s, w0);
		s1 = flit_csum_add(s1, w1);
		s = flit_csum_add(s, w2);
		s1 = flit_csum_add(s1, w3);
		b += 32;
		len -= 32;
	}
	while (len >= 8) {
		memcpy(&w0, b, 8);
		s = flit_csum_add(s, w0);
		b += 8;
		len -= 8;
	}
	s = flit_csum_add(s, s1);
	if (len >= 4) {
		uint32_t v;
		memcpy(&v, b, 4);
		s = flit_csum_add(s, v);
		b += 4;
		len -= 4;
	}
	if (len >= 2) {
		uint16_t v;
		memcpy(&v, b, 2);
		s = flit_csum_add(s, v);
		b += 2;
		len -= 2;
	}
	if (len) {
		/* the odd byte is the first of a zero-padded 16-bit word */
		uint16_t v = 0;
		memcpy(&v, b, 1);
		s = flit_csum_add(s, v);
	}
	return s;
}

/* Fold a 64-bit sum to 16 bits (not complemented), native order. */
static inline uint16_t flit_csum_fold(uint64_t s)
{
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffffu) + (s >> 16);
	s = (s & 0xffffu) + (s >> 16);
	return (uint16_t)s;
}

/* The UDP pseudo-header's sum (addresses network order, ulen host order). */
static inline uint64_t flit_csum_pseudo(uint32_t saddr, uint32_t daddr,
					uint16_t ulen)
{
	return (uint64_t)saddr + daddr + htons(17) + htons(ulen);
}

/* ---- helpers -------------------------------------------------------------- */

static inline uint16_t flit_pkt_rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* daddr in network order */
static inline bool flit_pkt_is_multicast(uint32_t daddr)
{
	return (ntohl(daddr) & 0xf0000000u) == 0xe0000000u;
}

/* RFC 1112: 01:00:5e followed by the group's low 23 bits. */
static inline void flit_pkt_mcast_mac(uint32_t group, uint8_t mac[6])
{
	uint32_t g = ntohl(group);
	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = (uint8_t)(g >> 16) & 0x7f;
	mac[4] = (uint8_t)(g >> 8);
	mac[5] = (uint8_t)g;
}

/* ---- parse ------------------------------------------------------------ */

/* Parse an Ethernet frame of len bytes: up to two 802.1Q/802.1ad tags,
 * IPv4 (options skipped, header checksum always verified, fragments
 * refused), UDP (checksum verified when verify_udp and not 0).  FLIT_PKT_OK
 * fills *out; any other result leaves it partly written. */
static inline enum flit_pkt_res flit_pkt_parse(const void *frame, uint32_t len,
					       bool verify_udp,
					       struct flit_pkt_info *out)
{
	const uint8_t *f = frame;
	uint32_t off = FLIT_PKT_ETH_LEN;
	uint16_t type;

	if (len < FLIT_PKT_ETH_LEN)
		return FLIT_PKT_SHORT;
	type = flit_pkt_rd16(f + 12);
	out->nvlan = 0;
	out->vlan_tci = 0;
	while (type == FLIT_ETH_P_8021Q || type == FLIT_ETH_P_8021AD) {
		if (out->nvlan == 2)
			return FLIT_PKT_PROTO;
		if (len < off + FLIT_PKT_VLAN_LEN)
			return FLIT_PKT_SHORT;
		if (!out->nvlan)
			out->vlan_tci = flit_pkt_rd16(f + off);
		type = flit_pkt_rd16(f + off + 2);
		off += FLIT_PKT_VLAN_LEN;
		out->nvlan++;
	}
	if (type != FLIT_ETH_P_IP)
		return FLIT_PKT_PROTO;
	if (len - off < FLIT_PKT_IP_LEN)
		return FLIT_PKT_SHORT;

	const uint8_t *ip = f + off;
	if (ip[0] >> 4 != 4)
		return FLIT_PKT_BADHDR;
	uint32_t hlen = (uint32_t)(ip[0] & 15) * 4;
	if (hlen < FLIT_PKT_IP_LEN)
		return FLIT_PKT_BADHDR;
	if (len - off < hlen)
		return FLIT_PKT_SHORT;
	uint32_t tot = flit_pkt_rd16(ip + 2);
	if (tot < hlen)
		return FLIT_PKT_BADHDR;
	if (len - off < tot)
		return FLIT_PKT_SHORT;
	if (flit_csum_fold(flit_csum_partial(ip, hlen, 0)) != 0xffff)
		return FLIT_PKT_IPCSUM;
	if (flit_pkt_rd16(ip + 6) & 0x3fff)     /* MF or a fragment offset */
		return FLIT_PKT_PROTO;
	if (ip[9] != 17)
		return FLIT_PKT_PROTO;
	if (tot - hlen < FLIT_PKT_UDP_LEN)
		return FLIT_PKT_SHORT;

	const uint8_t *udp = ip + hlen;
	uint32_t ulen = flit_pkt_rd16(udp + 4);
	if (ulen < FLIT_PKT_UDP_LEN || ulen > tot - hlen)
		return FLIT_PKT_BADHDR;

	memcpy(&out->saddr, ip + 12, 4);
	memcpy(&out->daddr, ip + 16, 4);
	if (verify_udp && (udp[6] | udp[7])) {
		uint64_t s = flit_csum_pseudo(out->saddr, out->daddr, (uint16_t)ulen);
		if (flit_csum_fold(flit_csum_partial(udp, ulen, s)) != 0xffff)
			return FLIT_PKT_UDPCSUM;
	}
	memcpy(&out->sport, udp, 2);
	memcpy(&out->dport, udp + 2, 2);
	out->ttl = ip[8];
	out->payload = udp + FLIT_PKT_UDP_LEN;
	out->len = ulen - FLIT_PKT_UDP_LEN;
	return FLIT_PKT_OK;
}

/* ---- build ------------------------------------------------------------ */

/* Write the 42 header bytes for a payload of len bytes that is already at
 * frame + FLIT_PKT_HDR_LEN, with the IPv4 header checksum and the full UDP
 * checksum (pseudo-header included; a 0 result is sent as 0xffff).  IPv4:
 * no options, TOS 0, DF clear.  len must be <= FLIT_PKT_PAYLOAD_MAX.
 * Returns the frame length. */
static inline uint32_t flit_pkt_build_hdr(void *frame, const struct flit_pkt_hdr *h,
					  uint32_t len)
{
	uint8_t *f = frame;
	uint8_t *ip = f + FLIT_PKT_ETH_LEN;
	uint8_t *udp = ip + FLIT_PKT_IP_LEN;
	uint16_t ulen = (uint16_t)(len + FLIT_PKT_UDP_LEN);
	uint16_t tot = (uint16_t)(ulen + FLIT_PKT_IP_LEN);
	uint16_t v;

	memcpy(f, h->dmac, 6);
	memcpy(f + 6, h->smac, 6);
	f[12] = FLIT_ETH_P_IP >> 8;
	f[13] = FLIT_ETH_P_IP & 0xff;

	ip[0] = 0x45;
	ip[1] = 0;
	ip[2] = (uint8_t)(tot >> 8);
	ip[3] = (uint8_t)tot;
	ip[4] = (uint8_t)(h->id >> 8);
	ip[5] = (uint8_t)h->id;
	ip[6] = 0;
	ip[7] = 0;
	ip[8] = h->ttl;
	ip[9] = 17;
	ip[10] = 0;
	ip[11] = 0;
	memcpy(ip + 12, &h->saddr, 4);
	memcpy(ip + 16, &h->daddr, 4);
	v = (uint16_t)~flit_csum_fold(flit_csum_partial(ip, FLIT_PKT_IP_LEN, 0));
	memcpy(ip + 10, &v, 2);

	memcpy(udp, &h->sport, 2);
	memcpy(udp + 2, &h->dport, 2);
	udp[4] = (uint8_t)(ulen >> 8);
	udp[5] = (uint8_t)ulen;
	udp[6] = 0;
	udp[7] = 0;
	v = (uint16_t)~flit_csum_fold(flit_csum_partial(udp, ulen,
				flit_csum_pseudo(h->saddr, h->daddr, ulen)));
	if (!v)
		v = 0xffff;     /* RFC 768: 0 means "no checksum" */
	memcpy(udp + 6, &v, 2);
	return FLIT_PKT_HDR_LEN + len;
}

/* Build a whole frame into frame[0..cap): headers, then len payload bytes
 * copied from payload.  Returns the frame length, or 0 when it does not fit
 * in cap or len > FLIT_PKT_PAYLOAD_MAX. */
static inline uint32_t flit_pkt_build(void *frame, uint32_t cap,
				      const struct flit_pkt_hdr *h,
				      const void *payload, uint32_t len)
{
	if (len > FLIT_PKT_PAYLOAD_MAX || cap < FLIT_PKT_HDR_LEN ||
	    len > cap - FLIT_PKT_HDR_LEN)
		return 0;
	if (len)
		memcpy((uint8_t *)frame + FLIT_PKT_HDR_LEN, payload, len);
	return flit_pkt_build_hdr(frame, h, len);
}

#endif /* FLIT_XDP_PKT_H */
