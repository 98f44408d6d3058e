/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Control frames of the flit wire protocol: heartbeats, NAKs, NAK
 * confirmations, session advertisements, queries and unicast joins.  They
 * share the 24-byte frame header of DATA frames (codec.h); the body depends
 * on the type.  Byte-by-byte layout: docs/PROTOCOL.md, "Control frames".
 * All integers little-endian; IPv4 addresses are 4 bytes in network order
 * (as in struct in_addr), i.e. the dotted quad in order.
 *
 * Decoding is two-step, as for DATA: flit_ctl_check() validates every
 * length, count and reserved field of a whole frame against the buffer; only
 * a frame it accepted may be read with the accessors below.
 */
#ifndef FLIT_CTL_H
#define FLIT_CTL_H

#include "codec.h"

/* ranges per NAK/NCF frame this library sends (a 1472-byte datagram holds 90) */
#define FLIT_CTL_RANGES_MAX 64
/* names per INFO/QUERY frame this library sends */
#define FLIT_CTL_NAMES_MAX  16

/* HB flags */
#define FLIT_HBF_END  0x0001u /* the source closed: end of session */

/* INFO flags (none: the INFO lists every topic of the session, indexes
 * 0 .. count-1) */
#define FLIT_INFOF_PAGE  0x0001u /* a part of the session's topics (a shared
				  * session with more than one frame holds):
				  * indexes 0 .. 65535, merged by receivers */
#define FLIT_INFOF_ENDED 0x0002u /* the topics listed ended (their publishers
				  * closed): their subscribers get EOS; the
				  * session goes on */
#define FLIT_INFOF_FINAL 0x0004u /* with ENDED: after the names, one 8-byte
				  * number per topic, the number its next
				  * message would have had (how many it sent) */
#define FLIT_INFOF_NEXT  0x0008u /* without ENDED: after the names, one 8-byte
				  * number per topic, the number of its next
				  * message at this INFO's seq (the session's
				  * next): a receiver that starts there knows
				  * each topic's numbers from then on */
#define FLIT_INFOF_NUMS  (FLIT_INFOF_FINAL | FLIT_INFOF_NEXT)

/* JOIN flags */
#define FLIT_JF_LEAVE 0x0001u
#define FLIT_JF_LATE  0x0002u /* joining: answer with LATE (where to start) */

/* INFO session modes */
enum flit_ctl_mode {
	FLIT_MODE_MCAST = 1,   /* data to a multicast group */
	FLIT_MODE_UNICAST = 2, /* data to each joined receiver */
	FLIT_MODE_RDMA = 3,    /* an rdma source: connect to data_addr:data_port */
	FLIT_MODE_RDMA_MCAST = 4, /* data to an RDMA multicast group (UD, the
				   * GID ::ffff:data_addr); control frames and
				   * retransmissions to data_addr:data_port */
};

/* NCF per-range status */
enum flit_ncf_status {
	FLIT_NCF_RETX = 0,   /* will be retransmitted (suppress your NAK) */
	FLIT_NCF_GONE = 1,   /* no longer retained: unrecoverable */
	FLIT_NCF_FUTURE = 2, /* never sent: the NAK was bogus */
};

/* A range of message sequence numbers [first, first + n), n >= 1. */
struct flit_seq_range {
	uint64_t first;
	uint32_t n;
	uint32_t status;   /* NCF: enum flit_ncf_status; NAK: 0 */
};

/* QUERY name kinds (also used for INFO topic entries: always EXACT) */
enum flit_ctl_name_kind {
	FLIT_NAME_EXACT = 0,
	FLIT_NAME_PATTERN = 1, /* fnmatch(3) pattern, flags 0 */
};

/* A name entry of an INFO (topic of the session) or QUERY frame.  On
 * decode, name points into the frame and is NOT NUL-terminated. */
struct flit_ctl_name {
	uint32_t idx;      /* INFO: topic index used in DATA frames; QUERY: 0 */
	uint8_t kind;      /* enum flit_ctl_name_kind */
	uint16_t len;      /* 1..FLIT_TOPIC_MAX (255) */
	const char *name;
};

/* The fixed part of an INFO frame. */
struct flit_ctl_info {
	uint32_t domain;      /* flit_domain_id() of the source's domain */
	uint8_t mode;         /* enum flit_ctl_mode */
	uint16_t data_port;   /* MCAST: group port; UNICAST: = ctl_port */
	uint32_t data_addr;   /* MCAST: group (network order); UNICAST: 0 */
	uint32_t ctl_addr;    /* where NAKs/queries/joins go; 0 = the
			       * datagram's source address */
	uint16_t ctl_port;    /* 0 = the datagram's source port */
	uint32_t pid;         /* the source's process id (diagnostics) */
};

/* The body of a LATE frame: a source's answer to a JOIN with FLIT_JF_LATE
 * (the frame's seq is the source's next sequence number: the live stream
 * starts there). */
struct flit_ctl_late {
	uint64_t trail;       /* oldest sequence number still retained (<= seq) */
	uint64_t origin;      /* the source's first sequence number (<= seq) */
	uint64_t age_ns;      /* how long the source has existed */
	uint32_t late_join;   /* messages it gives late joiners (source.late_join) */
};

/* FNV-1a 32 of a domain name: the domain id carried by INFO/QUERY/JOIN. */
uint32_t flit_domain_id(const char *domain);
/* FNV-1a 64 of a name's bytes (offset basis 0xcbf29ce484222325, prime
 * 0x100000001b3): the rdma connect request's topic hash, and the tables
 * that look topics up by name. */
uint64_t flit_name_hash64(const char *name);

/* What INFO frames take, for a sender filling one to a size: the frame
 * header and INFO's fixed part before the names, and one name entry of a
 * `len`-byte name (with FLIT_INFOF_FINAL or NEXT, 8 bytes more a name;
 * a QUERY's name entries are the same). */
#define FLIT_CTL_INFO_HDR_LEN 48u
static inline size_t flit_ctl_name_len(size_t len)
{
	return 8 + flit_align8(len);
}

/* Validate a whole control frame (type 2..8) in buf[0..buflen): header
 * (magic, version, known type, flags known for the type, len aligned and
 * <= buflen), then the body: sizes implied by count, reserved bytes zero,
 * each range n >= 1 and first + n without overflow, names 1..255 bytes,
 * name padding zero, INFO mode known, and the frame ends exactly at len.
 * Returns FLIT_FE_OK and fills *h, or why it was refused.  A DATA frame
 * gives FLIT_FE_TYPE (use flit_frame_check()). */
enum flit_frame_err flit_ctl_check(const void *buf, size_t buflen,
				   struct flit_frame_hdr *h);

/* ---- encoders: return the frame length, or 0 if it does not fit in cap
 * (or an argument is out of range: n == 0 for ranges, a name of length 0
 * or > 255, more than 65535 entries).  buf must be 8-byte aligned. ---- */

/* HB: seq = next sequence number the source will send; trail = oldest
 * sequence number still retained (trail <= next). */
size_t flit_ctl_hb_encode(void *buf, size_t cap, uint32_t session,
			  uint64_t next, uint64_t trail);
/* NAK (type FLIT_FT_NAK, status fields written as 0) or NCF. */
size_t flit_ctl_ranges_encode(void *buf, size_t cap, uint8_t type,
			      uint32_t session, uint64_t seq,
			      const struct flit_seq_range *r, unsigned n);
size_t flit_ctl_info_encode(void *buf, size_t cap, uint32_t session,
			    uint64_t next, const struct flit_ctl_info *info,
			    const struct flit_ctl_name *topics, unsigned n);
/* INFO with flags (FLIT_INFOF_*: a page of a shared session's topics, or the
 * topics that ended); 0 for a flag it does not know. */
size_t flit_ctl_info_encode_flags(void *buf, size_t cap, uint16_t flags, uint32_t session,
				  uint64_t next, const struct flit_ctl_info *info,
				  const struct flit_ctl_name *topics, unsigned n);
/* INFO with FLIT_INFOF_FINAL among flags (and ENDED): final[i] is topic
 * i's number of its next message (how many it sent); with FLIT_INFOF_NEXT
 * (and not ENDED): its number of its next message at `next`. */
size_t flit_ctl_info_encode_final(void *buf, size_t cap, uint16_t flags, uint32_t session,
				  uint64_t next, const struct flit_ctl_info *info,
				  const struct flit_ctl_name *topics, unsigned n,
				  const uint64_t *final);
/* QUERY: session 0 asks by names; session != 0 asks "who is this session"
 * (n may then be 0). */
size_t flit_ctl_query_encode(void *buf, size_t cap, uint32_t session,
			     uint32_t domain, const struct flit_ctl_name *names,
			     unsigned n);
size_t flit_ctl_join_encode(void *buf, size_t cap, uint32_t session,
			    uint32_t domain, uint16_t flags);
/* LATE: seq = next; trail and origin must be <= next. */
size_t flit_ctl_late_encode(void *buf, size_t cap, uint32_t session,
			    uint64_t next, const struct flit_ctl_late *late);

/* ---- accessors for a frame flit_ctl_check() accepted ---- */

/* HB trail. */
uint64_t flit_ctl_hb_trail(const void *frame);
/* Range i (< h->count) of a NAK or NCF. */
void flit_ctl_range(const void *frame, unsigned i, struct flit_seq_range *r);
/* INFO fixed part. */
void flit_ctl_info_get(const void *frame, struct flit_ctl_info *info);
/* LATE body. */
void flit_ctl_late_get(const void *frame, struct flit_ctl_late *late);
/* INFO with FLIT_INFOF_FINAL or FLIT_INFOF_NEXT: topic i's (i < h->count)
 * number. */
uint64_t flit_ctl_info_final(const void *frame, const struct flit_frame_hdr *h, unsigned i);
/* QUERY/JOIN domain id. */
uint32_t flit_ctl_domain(const void *frame);

/* Walk the name entries of an INFO or QUERY frame. */
struct flit_ctl_name_iter {
	const uint8_t *p;
	unsigned left;
};
void flit_ctl_names_init(struct flit_ctl_name_iter *it, const void *frame,
			 const struct flit_frame_hdr *h);
bool flit_ctl_names_next(struct flit_ctl_name_iter *it,
			 struct flit_ctl_name *out);

#endif /* FLIT_CTL_H */
