// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * flit's XDP steering program.  Maps, counters and the decisions it makes:
 * bpf/flit_xdp.h.  Per packet, in order:
 *
 *   Ethernet, at most two 802.1Q/802.1ad tags (VLAN counted once per
 *   frame; a third tag counts as another EtherType), IPv4 with its options
 *   (a version other than 4 or IHL < 5 cannot be parsed: SHORT, like a
 *   truncated header), protocol (before the fragment test, so a TCP
 *   fragment is NOT_UDP), no MF and no offset (else FRAGMENT: the kernel
 *   reassembles), UDP, (daddr, dport) in flows      -> XDP_PASS + reason
 *   a flow's payload < 4 bytes or without 'F' 'L'   -> PASS_NOT_FLIT
 *   magic, but the UDP length runs past the packet
 *   or the IPv4 total length, or is < 8             -> MALFORMED (any type)
 *   type 2..8, control frames (rare and small;
 *   flit_ctl_check() in user space validates them)  -> steer
 *   type 0 or > 8: nothing sends them (9..15 are
 *   reserved for control frames a later protocol
 *   revision, and FLIT_XDP_VERSION, would add);
 *   user space would refuse them (FLIT_FE_TYPE)     -> MALFORMED
 *   DATA failing checks 1..6 of docs/PROTOCOL.md
 *   against the UDP payload (short, version, flags,
 *   len >= 24, len % 8 == 0, len <= payload)        -> MALFORMED
 *   DATA of a session not in sessions, or without
 *   FLIT_XDP_SESS_FILTER                            -> steer, messages unread
 *   DATA of a filtering session: checks 7a..7c on each message, in turn
 *   (bpf_loop), and 8 once all are read, a topics lookup each:
 *     a failed check before a wanted topic         -> MALFORMED
 *     a wanted topic (value != 0), or with
 *     FLIT_XDP_SESS_REPORT one at or above named   -> steer (rest unread)
 *     all messages read, none wanted               -> FILTERED
 *       with REPORT: (session, seq, count) written
 *       to filtered first; the ring full           -> REPORT_FULL, steer
 *     a frame over WALK_BYTES_MAX bytes            -> WALK_LIMIT, steer
 *   steer: bpf_redirect_map(xsks, slot_base + rx_queue_index); an empty or
 *   out-of-range slot gives XDP_PASS (NO_SOCKET), so a kernel socket on the
 *   group still gets the datagram.
 *
 * Two programs share that logic (steer()): flit_xdp_steer, the one attached
 * by default, and flit_xdp_ts, which also writes the NIC's receive stamp in
 * front of each steered frame (put_rx_meta(): device-bound, native mode
 * only, loaded when hardware RX stamps are asked for).
 *
 * Steered frames are not validated whole here: user space runs
 * flit_frame_validate() on everything it receives.  The program reads only
 * what a decision needs, and drops (FILTERED) only a frame it has read
 * whole and found well formed.
 *
 * Latency path: one flows lookup per UDP packet, one sessions lookup per
 * DATA frame, one topics lookup per walked message (filtering sessions
 * only), bpf_redirect_map() (its own xsks lookup; the XDP_PASS in its flags
 * is its verdict for an empty slot, so no separate bpf_map_lookup_elem()),
 * and the per-CPU counters, bumped in one place.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "flit_xdp.h"

/* The frame is little-endian and read with plain loads (docs/PROTOCOL.md). */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "flit_xdp.bpf.c reads little-endian flit fields with plain loads"
#endif

/* read by user space before reusing a pinned program */
const volatile __u32 flit_xdp_version = FLIT_XDP_VERSION;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLIT_XDP_FLOWS_MAX);
	__type(key, struct flit_xdp_flow_key);
	__type(value, struct flit_xdp_flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, FLIT_XDP_XSKS_MAX);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLIT_XDP_SESSIONS_MAX);
	__type(key, __u32);
	__type(value, struct flit_xdp_session);
} sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLIT_XDP_TOPICS_MAX);
	__type(key, struct flit_xdp_topic_key);
	__type(value, __u32);
} topics SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, FLIT_XDP_FILTERED_BYTES);
} filtered SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLIT_XDP_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} version SEC(".maps");

/* Wire headers, declared here rather than taken from vmlinux.h: those carry
 * preserve_access_index, and packet bytes need no CO-RE relocation. */
#define ETH_HLEN_      14
#define ETH_P_IP_      0x0800
#define ETH_P_IPV6_    0x86dd
#define ETH_P_8021Q_   0x8100
#define ETH_P_8021AD_  0x88a8
#define IPPROTO_UDP_   17
#define IP_MF_OFFSET   0x3fff  /* MF flag and fragment offset */

struct flit_vlan_hdr {
	__be16 tci;
	__be16 proto;
};

struct flit_ip4_hdr {
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__sum16 check;
	__be32 saddr;
	__be32 daddr;
};

struct flit_udp_hdr {
	__be16 source;
	__be16 dest;
	__be16 len;
	__sum16 check;
};

/* flit frame header (docs/PROTOCOL.md), little-endian */
struct flit_wire_hdr {
	__u16 magic;
	__u8 version;
	__u8 type;
	__u16 flags;
	__u16 count;
	__u32 len;
	__u32 session_id;
	__u64 seq;
};

#define FLIT_MAGIC       0x4c46
#define FLIT_VERSION     1
#define FLIT_T_DATA      1
#define FLIT_T_CTL_LAST  8      /* types 2..8: control frames (8: LATE) */
#define FLIT_F_TS        0x0001
#define FLIT_F_TSEQ      0x0004 /* each message carries its topic's number */
#define FLIT_F_SHORT     0x0008 /* with TSEQ: short headers (topic u16, len u16, tseq u32) */
#define FLIT_F_KNOWN     0x000f /* TS | RETX | TSEQ | SHORT */
#define FLIT_HDR_LEN     24
#define FLIT_MSG_LEN_MAX 0x00ffffffu

/* The message walk addresses the frame with an offset the verifier must see
 * bounded: frames of filtered sessions longer than this are steered unread
 * (counted WALK_LIMIT), so the mask below never changes an offset.  A
 * linear XDP buffer is at most a page in driver mode; only generic mode on
 * a device with a huge MTU could see more. */
#define WALK_BYTES_MAX   0x7ff8

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		(*v)++;
}

/*
 * A frame of no wanted message, read whole: dropped (FILTERED).  Of a
 * REPORT session only once its messages are told in
 * filtered; a full ring steers it instead (REPORT_FULL: user space drops
 * it), so the session's receiver never takes a drop here for a loss.  A
 * frame of no messages numbers nothing: nothing to tell.
 */
static __always_inline __u32 filtered_told(const struct flit_wire_hdr *fh, bool report,
					   __u32 gen)
{
	if (!report || fh->count == 0)
		return FLIT_XDP_FILTERED;
	struct flit_xdp_filtered r = {
		.session = fh->session_id, .gen = gen, .seq = fh->seq, .count = fh->count,
	};
	if (bpf_ringbuf_output(&filtered, &r, sizeof(r), BPF_RB_NO_WAKEUP)) {
		count(FLIT_XDP_REPORT_FULL);
		return FLIT_XDP_REDIRECTED;
	}
	return FLIT_XDP_FILTERED;
}

/*
 * The message walk, one message a call of bpf_loop() (Linux 5.17): the
 * verifier checks walk_one() once, whatever the number of messages, where
 * a bounded loop is checked once per turn (~830 instructions a message).
 * The frame's pointers come through w, spilled on the caller's stack, with
 * the types the verifier gave them there.  verdict stays 0 while the walk
 * goes on; it ends the walk (return 1) with the frame's verdict: a wanted
 * message, one user space has not learnt (REPORT), or a malformed one.
 */
struct walk {
	void *fh, *data_end;
	__u32 off;      /* of the next message, in the frame */
	__u32 flen, sm, mh, named, session;
	__u32 verdict;
	bool report;
};

/* Messages a frame of WALK_BYTES_MAX bytes can hold (8-byte headers, no
 * payload): no walk is longer. */
#define WALK_MSGS_MAX ((WALK_BYTES_MAX - FLIT_HDR_LEN) / 8)

static long walk_one(__u64 i, void *arg)
{
	struct walk *w = arg;
	__u32 off = w->off;
	(void)i;

	if (off + w->mh > w->flen)
		goto malformed;
	/* off <= flen <= WALK_BYTES_MAX: the mask is for the verifier */
	__u32 *m = w->fh + (off & WALK_BYTES_MAX);
	if ((void *)(m + 2) > w->data_end)  /* flen <= plen: never taken */
		goto malformed;
	__u32 w0 = m[0], sm = w->sm;
	__u32 lf = (m[1] & ~sm) | ((w0 >> 16) & sm); /* short: no message flags */
	if (lf > FLIT_MSG_LEN_MAX)
		goto malformed;
	struct flit_xdp_topic_key tkey = { .session = w->session, .topic = w0 & (~sm | 0xffff) };
	off += w->mh + ((lf + 7) & ~7u);
	if (off > w->flen)
		goto malformed;
	w->off = off;
	if (w->report && tkey.topic >= w->named) {
		w->verdict = FLIT_XDP_REDIRECTED;
		return 1;
	}
	__u32 *want = bpf_map_lookup_elem(&topics, &tkey);
	if (want && *want) {
		w->verdict = FLIT_XDP_REDIRECTED;
		return 1;
	}
	return 0;
malformed:
	w->verdict = FLIT_XDP_MALFORMED;
	return 1;
}

/*
 * The decision, as the counter it is accounted in: FLIT_XDP_REDIRECTED for
 * "steer to the flow's socket" (*slot_base set), FLIT_XDP_FILTERED or
 * FLIT_XDP_MALFORMED for a drop, a PASS_* reason for XDP_PASS.  The counters
 * are bumped in one place, flit_xdp_steer(), which keeps the program small.
 */
static __always_inline __u32 classify(struct xdp_md *ctx, __u32 *slot_base)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct flit_ip4_hdr *ip;
	struct flit_udp_hdr *udp;
	struct flit_wire_hdr *fh;
	struct flit_xdp_flow_key fkey;
	struct flit_xdp_flow *flow;
	__u32 l2, hlen, ulen, plen;
	__u16 proto;

	/* ---- Ethernet and up to two VLAN tags ---- */
	if (data + ETH_HLEN_ > data_end)
		return FLIT_XDP_PASS_SHORT;
	proto = *(__be16 *)(data + 12);
	l2 = ETH_HLEN_;
	if (proto == bpf_htons(ETH_P_8021Q_) || proto == bpf_htons(ETH_P_8021AD_)) {
		count(FLIT_XDP_VLAN);
#pragma unroll
		for (int i = 0; i < 2; i++) {
			struct flit_vlan_hdr *vh = data + l2;

			if (proto != bpf_htons(ETH_P_8021Q_) && proto != bpf_htons(ETH_P_8021AD_))
				break;
			if ((void *)(vh + 1) > data_end)
				return FLIT_XDP_PASS_SHORT;
			proto = vh->proto;
			l2 += sizeof(*vh);
		}
	}
	if (proto == bpf_htons(ETH_P_IPV6_))
		return FLIT_XDP_PASS_IPV6;
	if (proto != bpf_htons(ETH_P_IP_))   /* also a third VLAN tag */
		return FLIT_XDP_PASS_NOT_IPV4;

	/* ---- IPv4 ---- */
	ip = data + l2;
	if ((void *)(ip + 1) > data_end)
		return FLIT_XDP_PASS_SHORT;
	if ((ip->ver_ihl >> 4) != 4 || (ip->ver_ihl & 0xf) < 5)
		return FLIT_XDP_PASS_SHORT;
	hlen = (ip->ver_ihl & 0xf) * 4;        /* 20..60 */
	if (data + l2 + hlen > data_end)
		return FLIT_XDP_PASS_SHORT;
	if (ip->protocol != IPPROTO_UDP_)
		return FLIT_XDP_PASS_NOT_UDP;
	if (ip->frag_off & bpf_htons(IP_MF_OFFSET))
		return FLIT_XDP_PASS_FRAGMENT;

	/* ---- UDP and the flow ---- */
	udp = data + l2 + hlen;
	if ((void *)(udp + 1) > data_end)
		return FLIT_XDP_PASS_SHORT;
	fkey.daddr = ip->daddr;
	fkey.dport = udp->dest;
	fkey.pad = 0;
	flow = bpf_map_lookup_elem(&flows, &fkey);
	if (!flow)
		return FLIT_XDP_PASS_NO_FLOW;
	*slot_base = flow->slot_base;

	/* ---- flit? ---- */
	fh = (void *)(udp + 1);
	if ((void *)fh + 4 > data_end || fh->magic != FLIT_MAGIC)
		return FLIT_XDP_PASS_NOT_FLIT;
	/* The datagram must lie inside the packet and the IPv4 packet; bytes
	 * past it (Ethernet padding) are not part of the frame. */
	ulen = bpf_ntohs(udp->len);
	/* Verifiers before Linux 6.16 track no range through a byte swap: to
	 * 6.1 and 6.12 ulen is unbounded after it, and pointer arithmetic with
	 * it is refused ("math between pkt pointer and register with unbounded
	 * min value").  The mask gives them the 16 bits; the barrier keeps
	 * clang from dropping it, which it may, knowing what a bswap16 yields. */
	barrier_var(ulen);
	ulen &= 0xffff;
	if (ulen < sizeof(*udp) || data + l2 + hlen + ulen > data_end ||
	    hlen + ulen > bpf_ntohs(ip->tot_len))
		return FLIT_XDP_MALFORMED;
	plen = ulen - sizeof(*udp);
	if (plen < 4)                           /* the magic was padding */
		return FLIT_XDP_PASS_NOT_FLIT;

	if (fh->type != FLIT_T_DATA) {
		if (fh->type >= 2 && fh->type <= FLIT_T_CTL_LAST)
			return FLIT_XDP_REDIRECTED;
		return FLIT_XDP_MALFORMED;
	}

	/* ---- DATA: header checks (PROTOCOL.md "What a receiver checks" 1..6) ---- */
	if (plen < FLIT_HDR_LEN || (void *)(fh + 1) > data_end)
		return FLIT_XDP_MALFORMED;
	__u32 flen = fh->len;
	__u16 flags = fh->flags;
	if (fh->version != FLIT_VERSION || (flags & ~FLIT_F_KNOWN) ||
	    (flags & (FLIT_F_SHORT | FLIT_F_TSEQ)) == FLIT_F_SHORT ||
	    flen < FLIT_HDR_LEN || (flen & 7) || flen > plen)
		return FLIT_XDP_MALFORMED;

	__u32 session = fh->session_id;
	struct flit_xdp_session *sv = bpf_map_lookup_elem(&sessions, &session);
	if (!sv || !(sv->flags & FLIT_XDP_SESS_FILTER))
		return FLIT_XDP_REDIRECTED;
	/* REPORT: topics at or above named are steered */
	bool report = sv->flags & FLIT_XDP_SESS_REPORT;
	__u32 named = sv->named, gen = sv->gen;

	/* ---- the topic filter: PROTOCOL.md checks 7a..7c, 8 ---- */
	if (flen > WALK_BYTES_MAX) {
		count(FLIT_XDP_WALK_LIMIT);
		return FLIT_XDP_REDIRECTED;
	}
	/* short headers (FLIT_F_SHORT): topic and length in the first word,
	 * the number in the second.  Chosen by masks, not branches: the walk
	 * is verified once (bpf_loop), but a branch in it is still two paths */
	__u32 sbit = (flags >> 3) & 1;
	struct walk w = {
		.fh = fh, .data_end = data_end, .off = FLIT_HDR_LEN, .flen = flen,
		.sm = -sbit,                    /* all ones when short */
		.mh = 8 + ((flags & FLIT_F_TS) << 3) + ((((flags >> 2) & 1) & ~sbit) << 3),
		.named = named, .report = report, .session = session,
	};
	/* a frame of flen bytes holds at most (flen - 24) / 8 messages: more
	 * in count fails check 7a before the walk ends */
	__u32 nmsg = fh->count;
	if (nmsg > WALK_MSGS_MAX)
		nmsg = WALK_MSGS_MAX;
	bpf_loop(nmsg, walk_one, &w, 0);
	if (w.verdict)
		return w.verdict;
	if (nmsg != fh->count || w.off != flen)
		return FLIT_XDP_MALFORMED;     /* whole frame read: its length */
	return filtered_told(fh, report, gen);
}

/*
 * The RX-metadata variant's stamp (flit_xdp_ts): the NIC's receive time of
 * the frame, read through the XDP RX-metadata kfunc (Linux 6.3), written
 * with the kfunc's return code into struct flit_xdp_rx_meta in front of the
 * packet (bpf_xdp_adjust_meta).  AF_XDP keeps the metadata area: zero-copy
 * receives into the UMEM frame itself, and copy mode copies data_meta along
 * with the packet (net/xdp/xsk.c __xsk_rcv()), so user space finds it right
 * before the first byte of the frame.
 *
 * The kfunc is declared __weak: bpftool 7.1's vmlinux.h carries no kfunc
 * prototypes, and a strong extern that the kernel lacks (before 6.3) would
 * fail the load of the whole object, flit_xdp_steer included, although only
 * a device-bound program may call it (the verifier refuses it elsewhere,
 * which is why flit_xdp_ts does not load by default: SEC("?xdp")).
 *
 * A driver without the op gives -EOPNOTSUPP, a frame without a stamp
 * -ENODATA; veth answers 0 with a stamp of 0 for frames that came through
 * the stack of its peer: user space treats a 0 stamp as none, whatever the
 * return code.  No metadata room (adjust_meta fails): the frame is steered
 * without it, and user space sees no magic.
 */
extern int bpf_xdp_metadata_rx_timestamp(const struct xdp_md *ctx,
					 __u64 *timestamp) __ksym __weak;

static __always_inline void put_rx_meta(struct xdp_md *ctx)
{
	struct flit_xdp_rx_meta *m;
	__u64 ts = 0;
	int r;

	r = bpf_xdp_metadata_rx_timestamp(ctx, &ts);
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*m)))
		return;
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return;
	m->rx_ts = r ? 0 : ts;
	m->rx_ts_err = r;
	m->magic = FLIT_XDP_META_MAGIC;
}

/* Both programs: classify, then redirect, drop or pass, and count.  stamp
 * is a constant of each program (the plain one has no metadata code). */
static __always_inline int steer(struct xdp_md *ctx, const bool stamp)
{
	__u32 slot_base = 0;
	__u32 c = classify(ctx, &slot_base);

	if (c == FLIT_XDP_REDIRECTED) {
		if (stamp)
			put_rx_meta(ctx);
		/* An empty (or out of range) slot makes bpf_redirect_map()
		 * return XDP_PASS, its flags' low bits: a kernel socket on
		 * the group still gets the datagram. */
		if (bpf_redirect_map(&xsks, slot_base + ctx->rx_queue_index,
				     XDP_PASS) == XDP_REDIRECT) {
			count(FLIT_XDP_REDIRECTED);
			return XDP_REDIRECT;
		}
		c = FLIT_XDP_NO_SOCKET;
	}
	if (c == FLIT_XDP_FILTERED || c == FLIT_XDP_MALFORMED) {
		count(c);
		return XDP_DROP;
	}
	count(FLIT_XDP_PASSED);
	count(c);
	return XDP_PASS;
}

/* The steering program: what flit-loader and the xdp transport attach. */
SEC("xdp")
int flit_xdp_steer(struct xdp_md *ctx)
{
	return steer(ctx, false);
}

/* The same, with the NIC's receive stamp in front of every steered frame
 * (struct flit_xdp_rx_meta).  Calls a device-bound-only kfunc, so it loads
 * only for one device (prog_ifindex + BPF_F_XDP_DEV_BOUND_ONLY, Linux 6.3)
 * and attaches only in native mode; not loaded unless asked for ("?"). */
SEC("?xdp")
int flit_xdp_ts(struct xdp_md *ctx)
{
	return steer(ctx, true);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
