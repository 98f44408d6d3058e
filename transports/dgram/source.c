// SPDX-License-Identifier: BSD-2-Clause
/*
 * Source sessions and their publishers (struct utopic, the transport's
 * flit_tsrc): the application's send, claim/commit, flush and batching of
 * messages of one or several topics into the session's frames, the data
 * path's transmit, counters.
 * (session.h: the state and the shared functions.)
 */
#include <sched.h>

#include "dgram/session.h"

/* ---- source side ---------------------------------------------------------------- */

/* Send a frame from the service (plain syscalls: io_uring rings belong to
 * the application's thread) to the session's destination(s). */
void dg_src_raw(struct usess *s, const void *buf, size_t len)
{
	if (s->mode == FLIT_MODE_MCAST) {
		if (sendto(s->fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&s->dest, sizeof(s->dest)) < 0)
			flit_debug("udp: %s: send: %s", s->topic, strerror(errno));
		else if (s->txts)
			flit_txts_sent(s->txts, buf, len, 1);
		return;
	}
	for (unsigned i = 0; i < s->nrcv; i++)
		if (sendto(s->fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&s->rcv[i].a,
			   sizeof(s->rcv[i].a)) >= 0 && s->txts)
			flit_txts_sent(s->txts, buf, len, 1);
}

/* Send a DATA frame from the application's thread through the io backend.
 * Returns 0, FLIT_BACK_PRESSURED (socket full: nothing sent) or
 * FLIT_NOT_CONNECTED (unicast, no receiver). */
static int src_xmit_xsk(struct usess *s, const void *buf, size_t len);

static int src_xmit(struct usess *s, const void *buf, size_t len)
{
	struct flit_dgram d[16];
	unsigned n = 0;

	if (s->tp->xk && len <= s->tp->xk_max)
		return src_xmit_xsk(s, buf, len);
	if (s->tp->ud) {
		/* rdma multicast: frames fit the path MTU (dg max_dgram) */
		int r = flit_ud_path_send(s->tp->ud, s->dest.sin_addr, buf, (uint32_t)len);
		if (r < 0)
			flit_debug("rdma multicast: %s: send: %s", s->topic, flit_errmsg());
		return r == 1 ? 0 : FLIT_BACK_PRESSURED;
	}

	if (s->mode == FLIT_MODE_MCAST) {
		d[0] = (struct flit_dgram){ .buf = (void *)buf, .len = (uint32_t)len, .addr = s->dest };
		n = 1;
	} else {
		if (!s->nrcv)
			return FLIT_NOT_CONNECTED;
		for (unsigned i = 0; i < s->nrcv; i++) {
			d[n++] = (struct flit_dgram){ .buf = (void *)buf, .len = (uint32_t)len,
							  .addr = s->rcv[i].a };
			if (n == 16 || i + 1 == s->nrcv) {
				int r = flit_udp_io_send(s->io, d, n);
				if (FLIT_UNLIKELY(s->txts != NULL) && r > 0)
					flit_txts_sent(s->txts, buf, len, (unsigned)r);
				if (r <= 0 && i + 1 == n)
					return FLIT_BACK_PRESSURED;
				n = 0;
			}
		}
		return 0;
	}
	int r = flit_udp_io_send(s->io, d, n);
	if (FLIT_UNLIKELY(s->txts != NULL) && r > 0)
		flit_txts_sent(s->txts, buf, len, (unsigned)r);
	return r == 1 ? 0 : FLIT_BACK_PRESSURED;
}

/* src_xmit over AF_XDP: a unicast receiver whose MAC is not known yet gets
 * this frame through the kernel (which resolves it). */
static int src_xmit_xsk(struct usess *s, const void *buf, size_t len)
{
	struct flit_xsk *xk = s->tp->xk;
	struct flit_dgram d = { .buf = (void *)buf, .len = (uint32_t)len, .addr = s->dest };

	if (s->mode == FLIT_MODE_MCAST)
		return flit_xsk_send(xk, &d, 1, s->self.sin_port) == 1 ? 0 : FLIT_BACK_PRESSURED;
	if (!s->nrcv)
		return FLIT_NOT_CONNECTED;
	unsigned sent = 0;
	for (unsigned i = 0; i < s->nrcv; i++) {
		d.addr = s->rcv[i].a;
		int r = flit_xsk_send(xk, &d, 1, s->self.sin_port);
		if (r == -EHOSTUNREACH)
			r = flit_udp_io_send(s->io, &d, 1);
		sent += r == 1;
	}
	return sent ? 0 : FLIT_BACK_PRESSURED;
}

/* The largest message: room for its topic number too, whether or not the
 * session has several topics yet (the size does not change when a second
 * publisher joins). */
static uint32_t max_msg_of(const struct usess *s)
{
	uint32_t room = s->max_dgram - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN -
		(s->ts ? FLIT_MSG_TS_LEN : 0) - FLIT_MSG_TSEQ_LEN;
	return room & ~7u;
}

/* The DATA flags of the session's next frame. */
static uint16_t data_flags(const struct usess *s)
{
	return (uint16_t)((s->ts ? FLIT_FF_TS : 0) |
			  (s->tseq ? FLIT_FF_TSEQ | (s->short_hdr ? FLIT_FF_SHORT : 0) : 0));
}

/* The flags of the frame being built. */
static uint16_t frame_flags(const struct usess *s)
{
	return flit_ld16(s->buf + 4);
}

/* Topic t is about to send: a number a short header cannot hold ends the
 * short headers of its session for good (a frame open in short form goes
 * as it is, the next in long form).  Lock held. */
static inline void tseq_form(struct usess *s, const struct utopic *t)
{
	if (FLIT_UNLIKELY(s->short_hdr && t->next_tseq > FLIT_SHORT_TSEQ_MAX))
		s->short_hdr = false;
}

/* Topic t's next message goes with session number seq: its number is
 * taken, and remembered for its transmit stamp. */
static uint64_t take_tseq(const struct usess *s, struct utopic *t, uint64_t seq)
{
	uint64_t n = t->next_tseq;

	/* read without the lock by flit_pub_next_seq() */
	__atomic_store_n(&t->next_tseq, n + 1, __ATOMIC_RELAXED);
	/* the session says (t->txmap is outside the publisher's first line) */
	if (FLIT_UNLIKELY(s->txts != NULL) && t->txmap) {
		t->txmap[n % FLIT_TXTS_RING].tseq = n;
		t->txmap[n % FLIT_TXTS_RING].seq = seq;
	}
	return n;
}

/* Write the header of a message of topic t at msg in the frame being built
 * (its session number s->next_seq): its payload pointer.  take: the topic's
 * number is taken now (a send), else at the commit of a claim. */
static uint8_t *put_msg_hdr(struct usess *s, struct utopic *t, uint8_t *msg,
			    uint32_t len, uint64_t tsv, bool take)
{
	uint64_t n = take ? take_tseq(s, t, s->next_seq) : t->next_tseq;
	uint16_t fl = frame_flags(s);

	if (fl & FLIT_FF_SHORT)
		return flit_frame_put_hdr_short(msg, t->idx, len, s->ts, tsv, n);
	if (fl & FLIT_FF_TSEQ)
		return flit_frame_put_hdr_tseq(msg, t->idx, len, s->ts, tsv, n);
	return flit_frame_put_hdr(msg, t->idx, len, s->ts, tsv);
}

/* Send the frame being built.  Called with the lock held. */
int dg_src_flush_locked(struct usess *s, uint64_t now, bool raw)
{
	if (!s->count)
		return 0;
	if (s->rate_on && !flit_rl_take(&s->rl, s->flen, now)) {
		s->c.rate_limited++;
		return FLIT_BACK_PRESSURED;
	}
	uint64_t seq = flit_ld64(s->buf + 16);
	if (FLIT_UNLIKELY(s->nann))
		dg_src_announce(s); /* the topics of this frame first */
	if (raw) {
		dg_src_raw(s, s->buf, s->flen);
	} else {
		int r = src_xmit(s, s->buf, s->flen);
		/* a batch is numbered already: if the socket refused it, it
		 * is lost like a drop on the wire and repaired by NAK */
		if (r == FLIT_BACK_PRESSURED)
			s->c.back_pressured++;
	}
	flit_rel_tx_sent(s->rel, s->buf, s->flen, seq, s->count, now);
	s->c.frames_sent++;
	s->count = 0;
	s->flen = 0;
	return 0;
}


/* The clock of a send, read once and only when needed: a message added to
 * an open batch needs none (0: not read yet). */
static inline uint64_t send_clock(uint64_t *now)
{
	if (!*now)
		*now = mono();
	return *now;
}

/* Room at the end of the frame being built for a message of `len` bytes:
 * sends the frame first if the message would not fit, starts a frame if
 * none is open (reading the clock then, into *now).  0,
 * FLIT_BACK_PRESSURED or FLIT_NOT_CONNECTED.  Lock held. */
static int src_make_room(struct usess *s, size_t len, uint64_t *now)
{
	uint16_t fl = data_flags(s);

	/* a frame begun before a second topic joined (or before the short
	 * headers ended) goes as it is */
	if (s->count && (s->flen + flit_msg_hdr_len(fl) + flit_align8(len) > s->max_dgram ||
			 frame_flags(s) != fl)) {
		int r = dg_src_flush_locked(s, send_clock(now), false);
		if (r)
			return r;
	}
	if (s->mode == FLIT_MODE_UNICAST && !s->nrcv)
		return FLIT_NOT_CONNECTED;
	if (!s->count) {
		flit_frame_begin(s->buf, FLIT_FT_DATA, fl, s->session, s->next_seq);
		s->flen = FLIT_FRAME_HDR_LEN;
		s->batch_t0 = send_clock(now);
	}
	return 0;
}

/* Account the message whose payload was just written at pl; true when the
 * frame is due to be sent (unbatched, batch_min reached, or count full). */
static bool src_msg_done(struct usess *s, uint8_t *pl, uint32_t len)
{
	s->flen = flit_frame_end_msg(s->buf, pl, len);
	s->count++;
	s->next_seq++;
	s->c.msgs_sent++;
	s->c.bytes_sent += len;
	return !s->batching || s->flen >= s->batch_min || s->count == UINT16_MAX;
}

/* A publisher of this session in another thread holds a claim: wait for
 * its commit or abort (the session's one frame is being written there, as
 * Ultra Messaging's transport session is locked while a source's buffer is
 * acquired).  Lock held on entry and return; false: the claim is this
 * thread's own (waiting would wait for itself). */
static bool claim_wait(struct usess *s)
{
	while (s->claimed) {
		if (pthread_equal(s->claim_thread, pthread_self()))
			return false;
		src_unlock(s);
		sched_yield();
		src_lock(s);
	}
	return true;
}

int dg_send(struct flit_tsrc *ts, const void *data, size_t len)
{
	struct utopic *t = (struct utopic *)ts;
	struct usess *s = t->ss;
	uint64_t now = 0;
	int r = 0;

	if (FLIT_UNLIKELY(len > max_msg_of(s)))
		return flit_err(EMSGSIZE, "%s: %s: message of %zu bytes exceeds %u (%s)",
				s->tp->ud ? "rdma multicast" : "udp", t->topic, len, max_msg_of(s),
				s->tp->ud && s->max_dgram == (s->tp->ud_max & ~7u) ?
				"a frame is one datagram of the path MTU; larger messages "
				"go with source.rdma.mode = send" : "source.udp.max_datagram");
	src_lock(s);
	if (FLIT_UNLIKELY(s->claimed) && !claim_wait(s)) {
		src_unlock(s);
		return flit_err(EBUSY, "udp: %s: send during a claim%s", t->topic,
				s->claimer == t ? "" : " of another publisher of its session");
	}
	if (!s->batching)
		now = mono();
	uint64_t tsv = s->ts ? flit_realtime_now() : 0;
	if (FLIT_UNLIKELY(!s->batching && s->count) && dg_src_flush_locked(s, now, false)) {
		s->c.back_pressured++;
		src_unlock(s);
		return FLIT_BACK_PRESSURED;
	}
	tseq_form(s, t);
	if (!s->batching) {
		uint32_t flen = (uint32_t)(FLIT_FRAME_HDR_LEN + flit_msg_wire_len(len, s->ts));
		uint8_t *pl;
		if (FLIT_LIKELY(!s->tseq)) {
			pl = flit_frame_put_single(s->buf, s->session, s->next_seq, t->idx,
						   (uint32_t)len, s->ts, tsv);
		} else if (s->short_hdr) {
			pl = flit_frame_put_single_short(s->buf, s->session, s->next_seq, t->idx,
							 (uint32_t)len, s->ts, tsv,
							 t->next_tseq);
		} else {
			flen += FLIT_MSG_TSEQ_LEN;
			pl = flit_frame_put_single_tseq(s->buf, s->session, s->next_seq, t->idx,
							(uint32_t)len, s->ts, tsv,
							t->next_tseq);
		}
		if (len)
			memcpy(pl, data, len);
		if (s->rate_on && !flit_rl_take(&s->rl, flen, now)) {
			s->c.rate_limited++;
			s->c.back_pressured++;
			src_unlock(s);
			return FLIT_BACK_PRESSURED;
		}
		if (FLIT_UNLIKELY(s->nann))
			dg_src_announce(s); /* this topic first */
		r = src_xmit(s, s->buf, flen);
		if (r) {
			if (r == FLIT_BACK_PRESSURED)
				s->c.back_pressured++;
			src_unlock(s);
			return r;
		}
		flit_rel_tx_sent(s->rel, s->buf, flen, s->next_seq, 1, now);
		take_tseq(s, t, s->next_seq);
		s->next_seq++;
		s->c.msgs_sent++;
		s->c.bytes_sent += len;
		s->c.frames_sent++;
		t->msgs_sent++;
		t->bytes_sent += len;
		src_unlock(s);
		return 0;
	}
	/* implicit batching */
	r = src_make_room(s, len, &now);
	if (r) {
		if (r == FLIT_BACK_PRESSURED)
			s->c.back_pressured++;
		src_unlock(s);
		return r;
	}
	uint8_t *pl = put_msg_hdr(s, t, s->buf + s->flen, (uint32_t)len, tsv, true);
	if (len)
		memcpy(pl, data, len);
	t->msgs_sent++;
	t->bytes_sent += len;
	if (src_msg_done(s, pl, (uint32_t)len))
		dg_src_flush_locked(s, send_clock(&now), false);
	src_unlock(s);
	return 0;
}

int dg_claim(struct flit_tsrc *ts, size_t len, void **buf)
{
	struct utopic *t = (struct utopic *)ts;
	struct usess *s = t->ss;
	uint64_t now = 0;

	if (len > max_msg_of(s))
		return flit_err(EMSGSIZE, "udp: %s: claim of %zu bytes exceeds %u", t->topic, len, max_msg_of(s));
	src_lock(s);
	if (s->claimed && !claim_wait(s)) {
		src_unlock(s);
		return flit_err(EBUSY, "udp: %s: already claimed%s", t->topic,
				s->claimer == t ? "" : " by another publisher of its session");
	}
	tseq_form(s, t);
	int r = src_make_room(s, len, &now);
	if (r) {
		src_unlock(s);
		return r;
	}
	s->claim_pl = put_msg_hdr(s, t, s->buf + s->flen, (uint32_t)len,
				  s->ts ? flit_realtime_now() : 0, false);
	s->claimed = true;
	s->claimer = t;
	s->claim_thread = pthread_self();
	*buf = s->claim_pl;
	/* the caller writes the payload without the lock: the service leaves
	 * a claimed frame alone, and sends from this thread see `claimed` */
	src_unlock(s);
	return 0;
}

int dg_commit(struct flit_tsrc *ts, size_t len)
{
	struct utopic *t = (struct utopic *)ts;
	struct usess *s = t->ss;
	src_lock(s);
	if (!s->claimed || s->claimer != t) {
		src_unlock(s);
		return flit_err(EINVAL, "udp: %s: commit without claim", t->topic);
	}
	uint16_t fl = frame_flags(s);
	uint8_t *mh = s->claim_pl - flit_msg_hdr_len(fl);
	uint32_t claimed_len = flit_msg_hdr_get_len(mh, fl);
	if (len > claimed_len) {
		src_unlock(s);
		return flit_err(EINVAL, "udp: %s: commit of %zu bytes exceeds the claim of %u",
				t->topic, len, claimed_len);
	}
	flit_msg_hdr_set_len(mh, fl, (uint32_t)len);
	s->claimed = false;
	s->claimer = NULL;
	take_tseq(s, t, s->next_seq);      /* the number its header carries */
	t->msgs_sent++;
	t->bytes_sent += len;
	/* the message is numbered: if the rate limit holds the frame back,
	 * it stays pending and goes with the next send, flush or service */
	if (src_msg_done(s, s->claim_pl, (uint32_t)len))
		dg_src_flush_locked(s, mono(), false);
	src_unlock(s);
	return 0;
}

int dg_abort(struct flit_tsrc *ts)
{
	struct utopic *t = (struct utopic *)ts;
	struct usess *s = t->ss;
	src_lock(s);
	if (!s->claimed || s->claimer != t) {
		src_unlock(s);
		return flit_err(EINVAL, "udp: %s: abort without claim", t->topic);
	}
	s->claimed = false;
	s->claimer = NULL;
	if (!s->count)
		s->flen = 0;
	src_unlock(s);
	return 0;
}

int dg_flush(struct flit_tsrc *ts)
{
	struct usess *s = ((struct utopic *)ts)->ss;
	src_lock(s);
	int r = s->claimed ? 0 : dg_src_flush_locked(s, mono(), false);
	src_unlock(s);
	return r;
}

int dg_receivers(struct flit_tsrc *ts)
{
	struct usess *s = ((struct utopic *)ts)->ss;
	uint64_t now = mono();
	int n = 0;
	src_lock(s);
	for (unsigned i = 0; i < s->nrcv; i++)
		n += s->rcv[i].expires > now;
	src_unlock(s);
	return n;
}

size_t dg_max_msg(const struct flit_tsrc *ts)
{
	return max_msg_of(((const struct utopic *)ts)->ss);
}

uint64_t dg_next_seq(const struct flit_tsrc *ts)
{
	return __atomic_load_n(&((const struct utopic *)ts)->next_tseq, __ATOMIC_RELAXED);
}

int dg_tx_stamp(struct flit_tsrc *ts, uint64_t seq, struct flit_tx_stamp *out)
{
	struct utopic *t = (struct utopic *)ts;
	struct usess *s = t->ss;
	int r;

	if (!s->txts)
		return flit_err(EOPNOTSUPP, "udp: %s: transmit stamps are off (context.udp.tx_timestamps)",
				t->topic);
	if (s->tp->xk_tx_ts) {
		dg_xsk_tx_stamps_route(s->tp);
		r = 0;
		src_lock(s);
	} else {
		src_lock(s);
		r = flit_txts_drain(s->txts, s->fd, 1024);
	}
	uint64_t asked = seq;
	if (r >= 0 && s->tseq) {
		/* the topic's number -> the session's, for the stamp; the
		 * newest: this topic's newest message */
		if (seq == FLIT_TX_STAMP_LATEST)
			asked = seq = t->next_tseq - 1;
		if (t->txmap && t->next_tseq && seq < t->next_tseq &&
		    t->txmap[seq % FLIT_TXTS_RING].tseq == seq)
			seq = t->txmap[seq % FLIT_TXTS_RING].seq;
		else
			r = -ENOENT;
	}
	if (r >= 0)
		r = flit_txts_lookup(s->txts, seq, out);
	if (r >= 0 && s->tseq)
		out->seq = asked;       /* in the topic's numbers */
	src_unlock(s);
	if (r == -EAGAIN)
		return flit_err(EAGAIN, "udp: %s: the transmit stamp of message %llu has not come back yet",
				t->topic, (unsigned long long)asked);
	if (r == -ENOENT)
		return flit_err(ENOENT, "udp: %s: no datagram %s among the last %u sent", t->topic,
				seq == FLIT_TX_STAMP_LATEST ? "stamped" : "carrying that message",
				FLIT_TXTS_RING);
	return r < 0 ? flit_err_wrap(-r, "udp: %s", t->topic) : 0;
}

/* A publisher's counters: its own messages and bytes; the session's frames,
 * NAKs, retransmissions, ... with the session's lead publisher only (the
 * lowest index in use), so that a context's totals count them once. */
void dg_src_counters(const struct flit_tsrc *ts, struct flit_counters *c)
{
	const struct utopic *t = (const struct utopic *)ts;
	struct usess *s = t->ss;
	src_lock(s);
	c->msgs_sent += t->msgs_sent;
	c->bytes_sent += t->bytes_sent;
	if (s->lead >= s->ntopics || s->topics[s->lead] != t) {
		src_unlock(s);
		return;
	}
	/* since the lead was last handed on: what the closed leads reported
	 * went into the context's totals already */
	c->frames_sent += s->c.frames_sent - s->c_base.frames_sent;
	c->back_pressured += s->c.back_pressured - s->c_base.back_pressured;
	c->naks_received += s->c.naks_received - s->c_base.naks_received;
	c->retransmissions += s->c.retransmissions - s->c_base.retransmissions;
	c->rate_limited += s->c.rate_limited - s->c_base.rate_limited;
	c->malformed += s->c.malformed - s->c_base.malformed;
	src_unlock(s);
}
