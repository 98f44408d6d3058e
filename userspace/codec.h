/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The flit wire codec: one frame = header + a batch of messages.  The same
 * bytes travel in a shm ring record, a UDP datagram, an AF_XDP frame and an
 * RDMA send.  Byte-by-byte layout: docs/PROTOCOL.md.  All integers are
 * little-endian.
 *
 * Decoding is two-step: flit_frame_validate() checks every length against
 * the buffer (and nothing is read before it is checked); only a frame it
 * accepted may be walked with flit_frame_iter_*().  A frame is accepted or
 * dropped whole, so a bad message never lets earlier ones through twice.
 */
#ifndef FLIT_CODEC_H
#define FLIT_CODEC_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FLIT_WIRE_MAGIC   0x4c46u /* bytes 'F' 'L' */
#define FLIT_WIRE_VERSION 1u

enum flit_frame_type {
	FLIT_FT_DATA = 1,
	/* control frames (userspace/ctl.h, docs/PROTOCOL.md) */
	FLIT_FT_HB = 2,    /* session heartbeat: next seq and retention trail */
	FLIT_FT_NAK = 3,   /* receiver -> source: ranges to retransmit */
	FLIT_FT_NCF = 4,   /* source -> receivers: NAK confirmation per range */
	FLIT_FT_INFO = 5,  /* session advertisement: addresses and topics */
	FLIT_FT_QUERY = 6, /* who publishes these topics / this session? */
	FLIT_FT_JOIN = 7,  /* receiver registers with (or leaves) a source */
	FLIT_FT_LATE = 8,  /* source -> joining receiver: where it starts (late join) */
	/* 9..15 reserved */
};

/* DATA frame flags */
#define FLIT_FF_TS        0x0001u /* every message carries a send timestamp */
#define FLIT_FF_RETX      0x0002u /* a retransmission (same bytes otherwise) */
#define FLIT_FF_TSEQ      0x0004u /* every message carries its topic's own
				   * sequence number (a session of several
				   * topics); without it a message's topic
				   * sequence number is its session's */
#define FLIT_FF_SHORT     0x0008u /* with FLIT_FF_TSEQ only: short message
				   * headers, the topic's number in them:
				   * topic u16, length u16, tseq u32 (8
				   * bytes where the long form takes 16) */
#define FLIT_FF_KNOWN     (FLIT_FF_TS | FLIT_FF_RETX | FLIT_FF_TSEQ | FLIT_FF_SHORT)

#define FLIT_FRAME_HDR_LEN 24u
#define FLIT_MSG_HDR_LEN   8u
#define FLIT_MSG_TS_LEN    8u
#define FLIT_MSG_TSEQ_LEN  8u
#define FLIT_MSG_LEN_MAX   0x00ffffffu /* 24-bit payload length */
/* what a short header (FLIT_FF_SHORT) holds */
#define FLIT_SHORT_TOPIC_MAX 0xffffu
#define FLIT_SHORT_LEN_MAX   0xffffu
#define FLIT_SHORT_TSEQ_MAX  0xffffffffu
#define FLIT_FRAME_LEN_MAX 0x7ffffff8u

static inline size_t flit_align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Bytes one message of `len` payload bytes takes in a frame. */
static inline size_t flit_msg_wire_len(size_t len, bool ts)
{
	return FLIT_MSG_HDR_LEN + (ts ? FLIT_MSG_TS_LEN : 0) + flit_align8(len);
}

/* Bytes of a message's header in a frame of these DATA flags: topic and
 * length, then the send timestamp (FLIT_FF_TS), then the topic sequence
 * number (FLIT_FF_TSEQ); a short header (FLIT_FF_SHORT) holds the topic's
 * number in its first 8 bytes. */
static inline uint32_t flit_msg_hdr_len(uint16_t flags)
{
	return FLIT_MSG_HDR_LEN + ((flags & FLIT_FF_TS) ? FLIT_MSG_TS_LEN : 0) +
		((flags & (FLIT_FF_TSEQ | FLIT_FF_SHORT)) == FLIT_FF_TSEQ ? FLIT_MSG_TSEQ_LEN : 0);
}

static inline uint16_t flit_ld16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static inline uint32_t flit_ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static inline uint64_t flit_ld64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }
static inline void flit_st16(uint8_t *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static inline void flit_st32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static inline void flit_st64(uint8_t *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }

/* Decoded frame header. */
struct flit_frame_hdr {
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint16_t count;
	uint32_t len;
	uint32_t session_id;
	uint64_t seq;     /* sequence number of the first message */
};

/* Why a frame was refused (for counters and messages). */
enum flit_frame_err {
	FLIT_FE_OK = 0,
	FLIT_FE_SHORT,       /* buffer shorter than the frame header */
	FLIT_FE_MAGIC,       /* not a flit frame */
	FLIT_FE_VERSION,     /* unknown protocol version */
	FLIT_FE_TYPE,        /* unknown frame type */
	FLIT_FE_FLAGS,       /* unknown flag bits */
	FLIT_FE_LEN,         /* frame length not aligned, too small or past buffer */
	FLIT_FE_COUNT,       /* message count disagrees with the bytes present */
	FLIT_FE_MSG_LEN,     /* a message's length runs past the frame */
	FLIT_FE_MSG_FLAGS,   /* reserved message bits set */
	FLIT_FE__MAX,
};

const char *flit_frame_strerr(enum flit_frame_err e);

/* Check a whole frame in buf[0..buflen).  On success fills *h and returns
 * FLIT_FE_OK; the frame occupies h->len <= buflen bytes. */
enum flit_frame_err flit_frame_validate(const void *buf, size_t buflen,
					struct flit_frame_hdr *h);

/* The body of flit_frame_validate(), inline for the delivery hot path. */
static inline enum flit_frame_err flit_frame_check(const void *buf, size_t buflen,
						   struct flit_frame_hdr *h)
{
	const uint8_t *p = (const uint8_t *)buf;

	if (buflen < FLIT_FRAME_HDR_LEN)
		return FLIT_FE_SHORT;
	if (flit_ld16(p) != FLIT_WIRE_MAGIC)
		return FLIT_FE_MAGIC;
	h->version = p[2];
	h->type = p[3];
	h->flags = flit_ld16(p + 4);
	h->count = flit_ld16(p + 6);
	h->len = flit_ld32(p + 8);
	h->session_id = flit_ld32(p + 12);
	h->seq = flit_ld64(p + 16);
	if (h->version != FLIT_WIRE_VERSION)
		return FLIT_FE_VERSION;
	if (h->type != FLIT_FT_DATA)
		return FLIT_FE_TYPE;
	if ((h->flags & ~FLIT_FF_KNOWN) ||
	    (h->flags & (FLIT_FF_SHORT | FLIT_FF_TSEQ)) == FLIT_FF_SHORT)
		return FLIT_FE_FLAGS;
	if (h->len < FLIT_FRAME_HDR_LEN || (h->len & 7) || h->len > buflen)
		return FLIT_FE_LEN;

	/* Walk the messages: each header and payload must lie inside the
	 * frame, and the last one must end exactly at the frame's end. */
	size_t off = FLIT_FRAME_HDR_LEN;
	size_t mhdr = flit_msg_hdr_len(h->flags);
	bool shrt = h->flags & FLIT_FF_SHORT;
	for (unsigned i = 0; i < h->count; i++) {
		if (h->len - off < mhdr)
			return FLIT_FE_COUNT;
		uint32_t lf;
		if (shrt) {
			lf = flit_ld16(p + off + 2);    /* no message flags */
		} else {
			lf = flit_ld32(p + off + 4);
			if (lf > FLIT_MSG_LEN_MAX)
				return FLIT_FE_MSG_FLAGS;
		}
		off += mhdr;
		if (flit_align8(lf) > h->len - off)
			return FLIT_FE_MSG_LEN;
		off += flit_align8(lf);
	}
	if (off != h->len)
		return FLIT_FE_COUNT;
	return FLIT_FE_OK;
}

/* ---- encoding ---- */

/* Start a frame at buf (FLIT_FRAME_HDR_LEN bytes, 8-aligned). */
static inline void flit_frame_begin(void *buf, uint8_t type, uint16_t flags,
				    uint32_t session_id, uint64_t seq)
{
	uint8_t *p = (uint8_t *)buf;
	flit_st16(p + 0, FLIT_WIRE_MAGIC);
	p[2] = FLIT_WIRE_VERSION;
	p[3] = type;
	flit_st16(p + 4, flags);
	flit_st16(p + 6, 0);
	flit_st32(p + 8, FLIT_FRAME_HDR_LEN);
	flit_st32(p + 12, session_id);
	flit_st64(p + 16, seq);
}

/* Zero the padding of a `len`-byte payload at pl by clearing its last
 * 8-byte word; call before copying the payload in. */
static inline void flit_zero_pad(uint8_t *pl, uint32_t len)
{
	if (len & 7)
		flit_st64(pl + (len & ~7u), 0);
}

/* The one-message DATA frame of the three writers below: its header (flags,
 * flen bytes), the message's first word w0 and timestamp, the padding word
 * after the `len` payload bytes at pl zeroed.  A handful of 64-bit stores. */
static inline uint8_t *flit_frame_put_one_(uint8_t *f, uint16_t flags, uint32_t flen,
					   uint32_t session_id, uint64_t seq, uint64_t w0,
					   bool has_ts, uint64_t ts, uint8_t *pl, uint32_t len)
{
	flit_st64(f, (uint64_t)FLIT_WIRE_MAGIC | (uint64_t)FLIT_WIRE_VERSION << 16 |
		     (uint64_t)FLIT_FT_DATA << 24 | (uint64_t)flags << 32 | 1ull << 48);
	flit_st64(f + 8, (uint64_t)flen | (uint64_t)session_id << 32);
	flit_st64(f + 16, seq);
	flit_st64(f + 24, w0);
	if (has_ts)
		flit_st64(f + 32, ts);
	flit_zero_pad(pl, len);
	return pl;
}

/* Write the header of a complete one-message DATA frame at f (8-aligned) and
 * return the payload pointer; the frame is FLIT_FRAME_HDR_LEN +
 * flit_msg_wire_len(len, ts) bytes.  The padding word after the payload is
 * zeroed here, so the caller just copies `len` bytes.  Hot path of every
 * unbatched send. */
static inline uint8_t *flit_frame_put_single(uint8_t *f, uint32_t session_id,
					     uint64_t seq, uint32_t topic,
					     uint32_t len, bool has_ts, uint64_t ts)
{
	uint32_t flen = (uint32_t)(FLIT_FRAME_HDR_LEN + flit_msg_wire_len(len, has_ts));
	uint8_t *pl = f + FLIT_FRAME_HDR_LEN + FLIT_MSG_HDR_LEN + (has_ts ? FLIT_MSG_TS_LEN : 0);

	return flit_frame_put_one_(f, has_ts ? FLIT_FF_TS : 0, flen, session_id, seq,
				   (uint64_t)topic | (uint64_t)len << 32, has_ts, ts, pl, len);
}

/* flit_frame_put_single() for a session of several topics: the frame has
 * FLIT_FF_TSEQ and the message carries tseq, its topic's sequence number;
 * the frame is FLIT_FRAME_HDR_LEN + flit_msg_wire_len(len, has_ts) +
 * FLIT_MSG_TSEQ_LEN bytes. */
static inline uint8_t *flit_frame_put_single_tseq(uint8_t *f, uint32_t session_id,
						  uint64_t seq, uint32_t topic,
						  uint32_t len, bool has_ts, uint64_t ts,
						  uint64_t tseq)
{
	uint32_t mh = FLIT_MSG_HDR_LEN + (has_ts ? FLIT_MSG_TS_LEN : 0);
	uint32_t flen = (uint32_t)(FLIT_FRAME_HDR_LEN + flit_msg_wire_len(len, has_ts) +
				   FLIT_MSG_TSEQ_LEN);
	uint8_t *pl = f + FLIT_FRAME_HDR_LEN + mh + FLIT_MSG_TSEQ_LEN;

	flit_st64(f + FLIT_FRAME_HDR_LEN + mh, tseq);
	return flit_frame_put_one_(f, (uint16_t)((has_ts ? FLIT_FF_TS : 0) | FLIT_FF_TSEQ), flen,
				   session_id, seq, (uint64_t)topic | (uint64_t)len << 32,
				   has_ts, ts, pl, len);
}

/* flit_frame_put_single_tseq() in short form (FLIT_FF_TSEQ | FLIT_FF_SHORT):
 * topic, len and tseq within the FLIT_SHORT_*_MAX limits (the caller's
 * check); the frame is FLIT_FRAME_HDR_LEN + flit_msg_wire_len(len, has_ts)
 * bytes, as a frame of one topic. */
static inline uint8_t *flit_frame_put_single_short(uint8_t *f, uint32_t session_id,
						   uint64_t seq, uint32_t topic,
						   uint32_t len, bool has_ts, uint64_t ts,
						   uint64_t tseq)
{
	uint32_t flen = (uint32_t)(FLIT_FRAME_HDR_LEN + flit_msg_wire_len(len, has_ts));
	uint8_t *pl = f + FLIT_FRAME_HDR_LEN + FLIT_MSG_HDR_LEN + (has_ts ? FLIT_MSG_TS_LEN : 0);

	return flit_frame_put_one_(f, (uint16_t)((has_ts ? FLIT_FF_TS : 0) | FLIT_FF_TSEQ |
						 FLIT_FF_SHORT), flen, session_id, seq,
				   (uint64_t)topic | (uint64_t)len << 16 | tseq << 32,
				   has_ts, ts, pl, len);
}

/* Write a message header at msg (the frame's current end) and return the
 * payload pointer.  The caller writes `len` payload bytes there and then calls
 * flit_frame_end_msg().  ts is written only if the frame has FLIT_FF_TS. */
static inline uint8_t *flit_frame_put_hdr(uint8_t *msg, uint32_t topic,
					  uint32_t len, bool has_ts,
					  uint64_t ts)
{
	flit_st32(msg, topic);
	flit_st32(msg + 4, len);
	if (has_ts) {
		flit_st64(msg + 8, ts);
		return msg + 16;
	}
	return msg + 8;
}

/* flit_frame_put_hdr() in a frame with FLIT_FF_TSEQ: the message carries
 * tseq, its topic's sequence number, after the timestamp. */
static inline uint8_t *flit_frame_put_hdr_tseq(uint8_t *msg, uint32_t topic,
					       uint32_t len, bool has_ts,
					       uint64_t ts, uint64_t tseq)
{
	uint8_t *q = flit_frame_put_hdr(msg, topic, len, has_ts, ts);

	flit_st64(q, tseq);
	return q + FLIT_MSG_TSEQ_LEN;
}

/* flit_frame_put_hdr() in a frame with FLIT_FF_TSEQ | FLIT_FF_SHORT: topic,
 * len and tseq within the FLIT_SHORT_*_MAX limits (the caller's check). */
static inline uint8_t *flit_frame_put_hdr_short(uint8_t *msg, uint32_t topic,
						uint32_t len, bool has_ts,
						uint64_t ts, uint64_t tseq)
{
	flit_st64(msg, (uint64_t)topic | (uint64_t)len << 16 | tseq << 32);
	if (has_ts) {
		flit_st64(msg + 8, ts);
		return msg + 16;
	}
	return msg + 8;
}

/* A message header's payload length (as written at a claim) and its
 * rewrite (at the commit), in a frame of these flags. */
static inline uint32_t flit_msg_hdr_get_len(const uint8_t *msg, uint16_t flags)
{
	return (flags & FLIT_FF_SHORT) ? flit_ld16(msg + 2) : flit_ld32(msg + 4);
}

static inline void flit_msg_hdr_set_len(uint8_t *msg, uint16_t flags, uint32_t len)
{
	if (flags & FLIT_FF_SHORT)
		flit_st16(msg + 2, (uint16_t)len);
	else
		flit_st32(msg + 4, len);
}

/* Account one message of `len` bytes in the frame header, zeroing the
 * padding after the payload.  Returns the new frame length. */
static inline uint32_t flit_frame_end_msg(uint8_t *frame, uint8_t *payload,
					  uint32_t len)
{
	uint32_t pad = (uint32_t)(flit_align8(len) - len);
	if (pad)
		memset(payload + len, 0, pad);
	uint32_t flen = (uint32_t)(payload + len + pad - frame);
	flit_st16(frame + 6, (uint16_t)(flit_ld16(frame + 6) + 1));
	flit_st32(frame + 8, flen);
	return flen;
}

/* Encode a frame of n messages into buf (cap bytes).  Returns the frame
 * length, or 0 if it does not fit.  For tests, tools and slow paths. */
size_t flit_frame_encode(void *buf, size_t cap, uint16_t flags,
			 uint32_t session_id, uint64_t seq, unsigned n,
			 const uint32_t *topics, const void *const *payloads,
			 const uint32_t *lens, const uint64_t *ts);

/* flit_frame_encode() with FLIT_FF_TSEQ set in flags: message i carries
 * tseq[i], its topic's sequence number; with FLIT_FF_SHORT too, in short
 * headers (0 when a topic, length or number exceeds FLIT_SHORT_*_MAX). */
size_t flit_frame_encode_tseq(void *buf, size_t cap, uint16_t flags,
			      uint32_t session_id, uint64_t seq, unsigned n,
			      const uint32_t *topics, const void *const *payloads,
			      const uint32_t *lens, const uint64_t *ts,
			      const uint64_t *tseq);

/* ---- walking a validated frame ---- */

struct flit_wmsg {
	uint32_t topic;
	uint32_t len;
	uint64_t seq;     /* the session's */
	uint64_t tseq;    /* the topic's: seq when the frame has no FLIT_FF_TSEQ */
	uint64_t ts;      /* 0 when the frame has no timestamps */
	const uint8_t *data;
};

struct flit_frame_iter {
	const uint8_t *p;
	unsigned left;
	bool ts, tseq, shrt;
	uint64_t seq;
};

static inline void flit_frame_iter_init(struct flit_frame_iter *it,
					const void *frame,
					const struct flit_frame_hdr *h)
{
	it->p = (const uint8_t *)frame + FLIT_FRAME_HDR_LEN;
	it->left = h->count;
	it->ts = h->flags & FLIT_FF_TS;
	it->tseq = h->flags & FLIT_FF_TSEQ;
	it->shrt = h->flags & FLIT_FF_SHORT;
	it->seq = h->seq;
}

/* Next message of a frame accepted by flit_frame_validate(); false at end. */
static inline bool flit_frame_iter_next(struct flit_frame_iter *it,
					struct flit_wmsg *m)
{
	if (!it->left)
		return false;
	const uint8_t *p = it->p;
	uint64_t w = flit_ld64(p);
	m->seq = it->seq++;
	if (it->shrt) {
		m->topic = (uint32_t)(w & 0xffff);
		m->len = (uint32_t)(w >> 16 & 0xffff);
	} else {
		m->topic = (uint32_t)w;
		m->len = (uint32_t)(w >> 32);
	}
	if (it->ts) {
		m->ts = flit_ld64(p + 8);
		m->data = p + 16;
	} else {
		m->ts = 0;
		m->data = p + 8;
	}
	if (it->shrt) {
		m->tseq = w >> 32;
	} else if (it->tseq) {
		m->tseq = flit_ld64(m->data);
		m->data += FLIT_MSG_TSEQ_LEN;
	} else {
		m->tseq = m->seq;
	}
	it->p = m->data + flit_align8(m->len);
	it->left--;
	return true;
}

#endif /* FLIT_CODEC_H */
