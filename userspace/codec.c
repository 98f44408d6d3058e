// SPDX-License-Identifier: BSD-2-Clause
#include "codec.h"

static const char *const fe_names[FLIT_FE__MAX] = {
	[FLIT_FE_OK] = "ok",
	[FLIT_FE_SHORT] = "shorter than a frame header",
	[FLIT_FE_MAGIC] = "bad magic (not a flit frame)",
	[FLIT_FE_VERSION] = "unknown protocol version",
	[FLIT_FE_TYPE] = "unknown frame type",
	[FLIT_FE_FLAGS] = "unknown frame flags",
	[FLIT_FE_LEN] = "frame length unaligned, too small or past the buffer",
	[FLIT_FE_COUNT] = "message count disagrees with the frame length",
	[FLIT_FE_MSG_LEN] = "message length runs past the frame",
	[FLIT_FE_MSG_FLAGS] = "reserved message bits set",
};

const char *flit_frame_strerr(enum flit_frame_err e)
{
	if ((unsigned)e >= FLIT_FE__MAX)
		return "?";
	return fe_names[e];
}

enum flit_frame_err flit_frame_validate(const void *buf, size_t buflen,
					struct flit_frame_hdr *h)
{
	return flit_frame_check(buf, buflen, h);
}

size_t flit_frame_encode_tseq(void *buf, size_t cap, uint16_t flags,
			      uint32_t session_id, uint64_t seq, unsigned n,
			      const uint32_t *topics, const void *const *payloads,
			      const uint32_t *lens, const uint64_t *ts,
			      const uint64_t *tseq)
{
	bool has_ts = flags & FLIT_FF_TS, has_tseq = flags & FLIT_FF_TSEQ;
	bool shrt = flags & FLIT_FF_SHORT;
	uint64_t need = FLIT_FRAME_HDR_LEN;

	if (n > UINT16_MAX || (flags & ~FLIT_FF_KNOWN) || (has_tseq && n && !tseq) ||
	    (shrt && !has_tseq))
		return 0;
	for (unsigned i = 0; i < n; i++) {
		if (lens[i] > FLIT_MSG_LEN_MAX ||
		    (shrt && (lens[i] > FLIT_SHORT_LEN_MAX || topics[i] > FLIT_SHORT_TOPIC_MAX ||
			      tseq[i] > FLIT_SHORT_TSEQ_MAX)))
			return 0;
		need += flit_msg_wire_len(lens[i], has_ts) +
			(has_tseq && !shrt ? FLIT_MSG_TSEQ_LEN : 0);
	}
	if (need > cap || need > FLIT_FRAME_LEN_MAX)
		return 0;

	uint8_t *f = (uint8_t *)buf;
	uint8_t *m = f + FLIT_FRAME_HDR_LEN;
	flit_frame_begin(f, FLIT_FT_DATA, flags, session_id, seq);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *pl = shrt ?
			flit_frame_put_hdr_short(m, topics[i], lens[i], has_ts,
						 ts ? ts[i] : 0, tseq[i]) :
			has_tseq ?
			flit_frame_put_hdr_tseq(m, topics[i], lens[i], has_ts,
						ts ? ts[i] : 0, tseq[i]) :
			flit_frame_put_hdr(m, topics[i], lens[i], has_ts, ts ? ts[i] : 0);
		if (lens[i])
			memcpy(pl, payloads[i], lens[i]);
		flit_frame_end_msg(f, pl, lens[i]);
		m = pl + flit_align8(lens[i]);
	}
	return (size_t)need;
}

size_t flit_frame_encode(void *buf, size_t cap, uint16_t flags,
			 uint32_t session_id, uint64_t seq, unsigned n,
			 const uint32_t *topics, const void *const *payloads,
			 const uint32_t *lens, const uint64_t *ts)
{
	if (flags & FLIT_FF_TSEQ)
		return 0;       /* the topic numbers are flit_frame_encode_tseq()'s */
	return flit_frame_encode_tseq(buf, cap, flags, session_id, seq, n, topics,
				      payloads, lens, ts, NULL);
}
