// SPDX-License-Identifier: BSD-2-Clause
/*
 * The rdma transport's source side (design: rc.h): sessions and their
 * publishers, sending (frames in the slot ring, posted to every connection
 * in the live stream), what the stream owes its receivers (topics named
 * and ended), open and close.  Connections: rc_conn.c.
 */
#include <sched.h>

#include "rdma/rc.h"

/* ---- source side: sending ------------------------------------------------------- */

/* Post one frame (or control frame) to a connection; -errno on failure.
 * `frames`: what a completion of this request proves sent (source frames
 * below it).  Caller holds the source's lock (or owns the connection). */
int rc_conn_post(struct sconn *c, const void *buf, uint32_t len, uint32_t lkey,
		 uint64_t frames, bool force_sig, uint32_t sig_every)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	bool sig = force_sig || c->wr_posted + 1 - c->last_sig >= sig_every;

	if (sig) {
		wr.wr_id = c->sig_tail;
		wr.send_flags = IBV_SEND_SIGNALED;
	}
	if (len <= c->inl)
		wr.send_flags |= IBV_SEND_INLINE;
	if (c->mode == FLIT_RDMA_WIRE_WRITE) {
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl(len);
		wr.wr.rdma.remote_addr = c->ring + (c->sent % c->depth) * (uint64_t)c->bufsz;
		wr.wr.rdma.rkey = c->rkey;
	} else {
		wr.opcode = IBV_WR_SEND;
	}
	int r = ibv_post_send(c->qp, &wr, &bad);
	if (FLIT_UNLIKELY(r))
		return -r; /* verbs: a positive errno */
	c->wr_posted++;
	c->sent++;
	if (sig) {
		c->sig[c->sig_tail % SIG_RING].wr = c->wr_posted;
		c->sig[c->sig_tail % SIG_RING].frames = frames;
		c->sig_tail++;
		c->last_sig = c->wr_posted;
	}
	return 0;
}

/* Reap a connection's send completions.  Returns -EIO when it failed. */
int rc_conn_reap(struct sconn *c)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (FLIT_UNLIKELY(wc[i].status != IBV_WC_SUCCESS)) {
				if (!c->dead)
					flit_info("rdma: receiver %s: send failed: %s", c->peer,
						  ibv_wc_status_str(wc[i].status));
				c->dead = true;
				continue;
			}
			if (wc[i].wr_id != c->sig_head || c->sig_head == c->sig_tail) {
				c->dead = true; /* cannot happen: completions come in order */
				continue;
			}
			c->wr_done = c->sig[c->sig_head % SIG_RING].wr;
			if (c->sig[c->sig_head % SIG_RING].frames > c->frames_done)
				c->frames_done = c->sig[c->sig_head % SIG_RING].frames;
			c->sig_head++;
			if (c->end_posted && c->sig_head == c->sig_tail)
				c->end_done = true;
		}
	}
	if (n < 0)
		c->dead = true;
	return c->dead ? -EIO : 0;
}

/* Poll every connection, refresh credits, move the catching-up ones on,
 * drop dead ones.  Lock held. */
void rc_src_progress(struct rsess *s)
{
	unsigned j = 0;

	for (unsigned i = 0; i < s->nconns; i++) {
		struct sconn *c = s->conns[i];
		rc_conn_reap(c);
		conn_credits(c);
		if (FLIT_UNLIKELY(c->catching) && !c->dead)
			rc_conn_catchup(s, c);
		if (FLIT_UNLIKELY(c->pgbuf) && !c->catching && c->wr_done >= c->names_wr)
			rc_conn_names_free(c); /* the pages are out: memory and registration go */
		if (FLIT_UNLIKELY(c->dead)) {
			/* the connection thread frees it after the disconnect */
			rdma_disconnect(c->id);
			if (c->catching) {
				c->catching = false;
				s->ncatching--;
			}
			s->c.readers_evicted++;
			continue;
		}
		s->conns[j++] = c;
	}
	s->nconns = j;
}

/* Can frame number `f` be built in its slot now (every connection has
 * completed the frame that used the slot before, or will never want it)? */
static inline bool slot_free(const struct rsess *s, uint64_t f)
{
	if (f < s->nslots)
		return true;
	for (unsigned i = 0; i < s->nconns; i++) {
		const struct sconn *c = s->conns[i];
		uint64_t done = c->frames_done > c->first_frame ? c->frames_done : c->first_frame;
		if (f - s->nslots >= done)
			return false;
	}
	return true;
}

/* Every connection in the live stream can take one more frame now. */
static inline bool conns_ready(const struct rsess *s)
{
	for (unsigned i = 0; i < s->nconns; i++) {
		const struct sconn *c = s->conns[i];
		if (!c->catching && !conn_room(c))
			return false;
	}
	return true;
}

/* 0 when a frame can be started (slot) and/or posted (credits) now;
 * else FLIT_NOT_CONNECTED or FLIT_BACK_PRESSURED.  Lock held. */
static int src_ready(struct rsess *s, bool slot, bool post)
{
	for (int pass = 0; pass < 2; pass++) {
		/* with late join, frames to nobody are kept in their slots */
		if (!s->nconns && !s->late_join)
			return FLIT_NOT_CONNECTED;
		if ((!slot || slot_free(s, s->nframes)) && (!post || conns_ready(s)))
			return 0;
		if (pass == 0)
			rc_src_progress(s);
	}
	s->c.back_pressured++;
	return FLIT_BACK_PRESSURED;
}

/* Post the frame built in slot nframes (flen bytes) to every connection in
 * the live stream (those catching up take it from its slot).  Lock held;
 * src_ready() said yes.  A connection that refuses the post is dropped
 * (the others go on). */
static void src_post_slot(struct rsess *s, uint32_t flen)
{
	const uint8_t *f = slot_of(s, s->nframes);
	uint64_t nf = s->nframes;
	bool dropped = false;

	for (unsigned i = 0; i < s->nconns; i++) {
		struct sconn *c = s->conns[i];
		if (FLIT_UNLIKELY(c->catching))
			continue;
		int err = rc_conn_post(c, f, flen, s->mr[c->dev]->lkey, nf + 1, false, s->sig_every);
		if (FLIT_UNLIKELY(err)) {
			flit_info("rdma: receiver %s: post failed: %s", c->peer, strerror(-err));
			c->dead = dropped = true;
		}
	}
	s->nframes = nf + 1;
	if (FLIT_UNLIKELY(dropped || s->ncatching))
		rc_src_progress(s);
}

/* Post the open DATA frame.  Lock held; src_ready() said yes. */
static void src_post_frame(struct rsess *s)
{
	flit_st16(s->frame + 6, s->fcount);
	flit_st32(s->frame + 8, s->flen);
	s->c.frames_sent++;
	s->frame = NULL;
	s->fcount = 0;
	src_post_slot(s, s->flen);
}

/* Post the open batch frame, if any.  0 or a status.  Lock held. */
static int src_flush_locked(struct rsess *s)
{
	if (!s->frame || !s->fcount)
		return 0;
	int r = src_ready(s, false, true);
	if (r == FLIT_NOT_CONNECTED) {
		/* every receiver went away: nobody is owed these */
		s->frame = NULL;
		s->fcount = 0;
		return 0;
	}
	if (r)
		return r;
	src_post_frame(s);
	return 0;
}

/* The fixed part of the session's INFO. */
static void sess_info(const struct rsess *s, struct flit_ctl_info *in)
{
	const struct flit_tp *tp = s->tp;

	*in = (struct flit_ctl_info){
		.domain = tp->domain, .mode = FLIT_MODE_UNICAST,
		.data_port = ntohs(tp->laddr.sin_port), .data_addr = 0,
		.ctl_addr = tp->laddr.sin_addr.s_addr, .ctl_port = ntohs(tp->laddr.sin_port),
		.pid = (uint32_t)getpid(),
	};
}

/* One INFO of topics idx[0..n) (those still live) at buf: a page (the
 * session is paged), with each topic's next number at `seq` when `nums`,
 * or the ENDED INFO of one topic with its final number.  How many of idx
 * it took go to *took (it stops where the next would not fit in cap).
 * Returns the frame's length, 0 when none of them is live. */
size_t rc_info_encode(const struct rsess *s, uint8_t *buf, size_t cap, uint64_t seq,
		      const uint32_t *idx, unsigned n, bool nums, bool ended,
		      const struct rtopic *gone, unsigned *took)
{
	struct flit_ctl_name t[64];
	uint64_t num[64];
	struct flit_ctl_info in;
	unsigned k = 0, i = 0;
	size_t used = FLIT_CTL_INFO_HDR_LEN;

	sess_info(s, &in);
	for (; i < n && k < 64; i++) {
		const struct rtopic *u = gone ? gone : s->topics[idx[i]];
		if (!u)
			continue;
		size_t len = strlen(u->topic), w = flit_ctl_name_len(len) + 8; /* and its number */
		if (used + w > cap)
			break;
		used += w;
		num[k] = u->next_tseq;
		t[k++] = (struct flit_ctl_name){ .idx = u->idx, .kind = FLIT_NAME_EXACT,
						 .len = (uint16_t)len, .name = u->topic };
	}
	*took = i;
	if (!k)
		return 0;
	if (ended)
		return flit_ctl_info_encode_final(buf, cap, FLIT_INFOF_ENDED | FLIT_INFOF_FINAL, s->session,
						  seq, &in, t, k, num);
	if (!s->paged)
		return flit_ctl_info_encode(buf, cap, s->session, seq, &in, t, k);
	if (nums && s->tseq)
		return flit_ctl_info_encode_final(buf, cap, FLIT_INFOF_PAGE | FLIT_INFOF_NEXT, s->session,
						  seq, &in, t, k, num);
	return flit_ctl_info_encode_flags(buf, cap, FLIT_INFOF_PAGE, s->session, seq, &in, t, k);
}

/* What the stream owes its receivers before the next frame: the ends of
 * topics that closed (INFO ENDED, after their last frame), then the names
 * of topics added (INFO pages).  The open frame goes first.  0 or a
 * status.  Lock held, no claim open. */
int rc_src_pending(struct rsess *s)
{
	int r = src_flush_locked(s);
	if (r)
		return r;
	while (s->nend || s->nann) {
		r = src_ready(s, true, true);
		if (r == FLIT_NOT_CONNECTED) {
			/* nobody to tell: a receiver that comes gets every name */
			for (unsigned i = s->end_head; i < s->nend; i++)
				free(s->endq[i]);
			s->nend = s->end_head = s->nann = s->ann_head = 0;
			return 0;
		}
		if (r)
			return r;
		unsigned took;
		uint8_t *f = slot_of(s, s->nframes);
		size_t l;
		if (s->nend) {
			struct rtopic *gone = s->endq[s->end_head];
			uint32_t idx = gone->idx;
			l = rc_info_encode(s, f, s->frame_max, s->next_seq, &idx, 1, false, true, gone, &took);
			free(gone);
			if (++s->end_head == s->nend)
				s->nend = s->end_head = 0;
		} else {
			/* no frame is open: each topic's number is its next at next_seq */
			l = rc_info_encode(s, f, s->frame_max, s->next_seq, s->ann + s->ann_head,
					   s->nann - s->ann_head, true, false, NULL, &took);
			if (!took)
				took = 1; /* cannot happen: frame_max holds the INFO of any topic (open) */
			s->ann_head += took;
			if (s->ann_head == s->nann)
				s->nann = s->ann_head = 0;
		}
		if (l)
			src_post_slot(s, (uint32_t)l);
	}
	return 0;
}

/* Room for one message of `len` bytes: returns its header position in the
 * open frame (starting one if needed) via *at, or a status.  Lock held. */
static int src_room(struct rsess *s, size_t len, uint8_t **at)
{
	size_t mlen = flit_msg_wire_len(len, s->ts) + (s->tseq ? FLIT_MSG_TSEQ_LEN : 0);

	if (FLIT_UNLIKELY(s->nann | s->nend)) {
		int r = rc_src_pending(s);
		if (r)
			return r;
	}
	if (s->batch && s->frame) {
		if (s->flen + mlen <= s->frame_cap && s->fcount < UINT16_MAX &&
		    !(flit_ld16(s->frame + 4) & FLIT_FF_TSEQ) == !s->tseq) {
			*at = s->frame + s->flen;
			return 0;
		}
		int r = src_flush_locked(s);
		if (r)
			return r;
	}
	/* a new frame: its slot must be free; unbatched, it goes out at once,
	 * so the receivers' credits are needed now as well */
	int r = src_ready(s, true, !s->batch);
	if (r)
		return r;
	s->frame = slot_of(s, s->nframes);
	flit_frame_begin(s->frame, FLIT_FT_DATA,
			 (s->ts ? FLIT_FF_TS : 0) | (s->tseq ? FLIT_FF_TSEQ : 0), s->session, s->next_seq);
	s->flen = FLIT_FRAME_HDR_LEN;
	s->fcount = 0;
	*at = s->frame + FLIT_FRAME_HDR_LEN;
	return 0;
}

/* The message header of topic t at m; returns the payload's place. */
static inline uint8_t *src_put_hdr(struct rsess *s, struct rtopic *t, uint8_t *m, size_t len)
{
	uint64_t ts = s->ts ? flit_realtime_now() : 0;

	if (flit_ld16(s->frame + 4) & FLIT_FF_TSEQ)
		return flit_frame_put_hdr_tseq(m, t->idx, (uint32_t)len, s->ts, ts, t->next_tseq);
	return flit_frame_put_hdr(m, t->idx, (uint32_t)len, s->ts, ts);
}

/* Account topic t's message whose payload is at pl; post when due. */
static void src_msg_done(struct rsess *s, struct rtopic *t, uint8_t *pl, uint32_t len)
{
	if (len & 7)
		memset(pl + len, 0, flit_align8(len) - len);
	s->flen = (uint32_t)(pl + flit_align8(len) - s->frame);
	s->fcount++;
	s->next_seq++;
	t->next_tseq++;
	t->msgs_sent++;
	t->bytes_sent += len;
	if (!s->batch)
		src_post_frame(s); /* src_room() checked the credits */
	else if (s->flen + FLIT_MSG_HDR_LEN + FLIT_MSG_TS_LEN + FLIT_MSG_TSEQ_LEN + 8 > s->frame_cap ||
		 s->fcount == UINT16_MAX)
		src_flush_locked(s); /* full: if refused, the next send retries */
}

/* Another thread's claim is open: wait for its commit (this thread's
 * own: false, waiting would wait for itself).  Lock held. */
static bool claim_wait(struct rsess *s)
{
	while (s->claim) {
		if (pthread_equal(s->claim_thread, pthread_self()))
			return false;
		src_unlock(s);
		sched_yield();
		src_lock(s);
	}
	return true;
}

int rdma_send(struct flit_tsrc *ts, const void *data, size_t len)
{
	struct rtopic *t = (struct rtopic *)ts;
	struct rsess *s = t->ss;
	uint8_t *m, *pl;

	if (FLIT_UNLIKELY(len > s->max_msg))
		return flit_err(EMSGSIZE, "rdma: %s: message of %zu bytes exceeds the largest %zu "
				"(source.rdma.frame_max %u)", t->topic, len, s->max_msg, s->frame_max);
	src_lock(s);
	if (FLIT_UNLIKELY(s->claim) && !claim_wait(s)) {
		src_unlock(s);
		return flit_err(EBUSY, "rdma: %s: send while a claim is open%s", t->topic,
				s->claimer == t ? "" : " (of another publisher of its session, on this thread)");
	}
	int r = src_room(s, len, &m);
	if (FLIT_UNLIKELY(r)) {
		src_unlock(s);
		return r;
	}
	pl = src_put_hdr(s, t, m, len);
	if (len)
		memcpy(pl, data, len);
	src_msg_done(s, t, pl, (uint32_t)len);
	src_unlock(s);
	return 0;
}

int rdma_claim(struct flit_tsrc *ts, size_t len, void **buf)
{
	struct rtopic *t = (struct rtopic *)ts;
	struct rsess *s = t->ss;
	uint8_t *m;

	if (len > s->max_msg)
		return flit_err(EMSGSIZE, "rdma: %s: claim of %zu bytes exceeds the largest %zu "
				"(source.rdma.frame_max %u)", t->topic, len, s->max_msg, s->frame_max);
	src_lock(s);
	if (s->claim && !claim_wait(s)) {
		src_unlock(s);
		return flit_err(EBUSY, "rdma: %s: a claim is already open%s", t->topic,
				s->claimer == t ? "" : " (of another publisher of its session, on this thread)");
	}
	int r = src_room(s, len, &m);
	if (r) {
		src_unlock(s);
		return r;
	}
	s->claim = src_put_hdr(s, t, m, len);
	s->claim_max = (uint32_t)len;
	s->claimer = t;
	s->claim_thread = pthread_self();
	*buf = s->claim;
	/* the caller writes the payload unlocked: the slot is ours (nothing
	 * posts an open frame while a claim is open) */
	src_unlock(s);
	return 0;
}

int rdma_commit(struct flit_tsrc *ts, size_t len)
{
	struct rtopic *t = (struct rtopic *)ts;
	struct rsess *s = t->ss;

	src_lock(s);
	if (!s->claim || s->claimer != t || len > s->claim_max) {
		src_unlock(s);
		return flit_err(EINVAL, s->claim && s->claimer == t ?
				"rdma: %s: commit of %zu bytes exceeds the claim" :
				"rdma: %s: commit without a claim (%zu bytes)", t->topic, len);
	}
	uint8_t *pl = s->claim;
	flit_st32(pl - flit_msg_hdr_len(flit_ld16(s->frame + 4)) + 4, (uint32_t)len);
	s->claim = NULL;
	s->claimer = NULL;
	src_msg_done(s, t, pl, (uint32_t)len);
	src_unlock(s);
	return 0;
}

int rdma_abort(struct flit_tsrc *ts)
{
	struct rtopic *t = (struct rtopic *)ts;
	struct rsess *s = t->ss;

	src_lock(s);
	if (!s->claim || s->claimer != t) {
		src_unlock(s);
		return flit_err(EINVAL, "rdma: %s: abort without a claim", t->topic);
	}
	s->claim = NULL;
	s->claimer = NULL;
	if (!s->fcount)
		s->frame = NULL;
	src_unlock(s);
	return 0;
}

int rdma_flush(struct flit_tsrc *ts)
{
	struct rtopic *t = (struct rtopic *)ts;
	struct rsess *s = t->ss;

	src_lock(s);
	if (s->claim && !claim_wait(s)) {
		src_unlock(s);
		return flit_err(EBUSY, s->claimer == t ? "rdma: %s: flush with a claim open (commit or abort it first)"
				: "rdma: %s: flush while this thread holds a claim of another publisher of its session",
				t->topic);
	}
	int r = s->nann || s->nend ? rc_src_pending(s) : src_flush_locked(s);
	src_unlock(s);
	return r;
}

int rdma_receivers(struct flit_tsrc *ts)
{
	struct rsess *s = ((struct rtopic *)ts)->ss;

	src_lock(s);
	rc_src_progress(s);
	int n = (int)s->nconns;
	src_unlock(s);
	return n;
}

size_t rdma_max_msg(const struct flit_tsrc *ts)
{
	return ((const struct rtopic *)ts)->ss->max_msg;
}

uint64_t rdma_next_seq(const struct flit_tsrc *ts)
{
	return __atomic_load_n(&((const struct rtopic *)ts)->next_tseq, __ATOMIC_RELAXED);
}

/* A publisher's counters: its own messages and bytes; the session's
 * frames, back-pressure and evictions with the session's lead publisher
 * only (the lowest index in use), so that a context's totals count them
 * once. */
void rdma_src_counters(const struct flit_tsrc *ts, struct flit_counters *c)
{
	const struct rtopic *t = (const struct rtopic *)ts;
	struct rsess *s = t->ss;

	src_lock(s);
	c->msgs_sent += t->msgs_sent;
	c->bytes_sent += t->bytes_sent;
	if (s->lead < s->ntopics && s->topics[s->lead] == t) {
		c->frames_sent += s->c.frames_sent - s->c_base.frames_sent;
		c->back_pressured += s->c.back_pressured - s->c_base.back_pressured;
		c->readers_evicted += s->c.readers_evicted - s->c_base.readers_evicted;
	}
	src_unlock(s);
}

/* The context's open publishers by topic hash (tp->lock held). */
struct rtopic *rc_topic_of_hash(const struct flit_tp *tp, uint64_t hash)
{
	if (!tp->tpcap)
		return NULL;
	for (struct rtopic *t = tp->tphash[(hash >> 20) & (tp->tpcap - 1)]; t; t = t->hnext)
		if (t->hash == hash)
			return t;
	return NULL;
}

static bool topic_hash_add(struct flit_tp *tp, struct rtopic *t)
{
	if (tp->ntp + 1 > tp->tpcap) {
		unsigned cap = tp->tpcap ? tp->tpcap * 2 : 64;
		struct rtopic **v = calloc(cap, sizeof(*v));
		if (!v)
			return false;
		for (unsigned i = 0; i < tp->tpcap; i++)
			for (struct rtopic *o = tp->tphash[i], *n; o; o = n) {
				n = o->hnext;
				o->hnext = v[(o->hash >> 20) & (cap - 1)];
				v[(o->hash >> 20) & (cap - 1)] = o;
			}
		free(tp->tphash);
		tp->tphash = v;
		tp->tpcap = cap;
	}
	struct rtopic **b = &tp->tphash[(t->hash >> 20) & (tp->tpcap - 1)];
	t->hnext = *b;
	*b = t;
	tp->ntp++;
	return true;
}

static void topic_hash_del(struct flit_tp *tp, struct rtopic *t)
{
	if (!tp->tpcap)
		return;
	for (struct rtopic **pp = &tp->tphash[(t->hash >> 20) & (tp->tpcap - 1)]; *pp; pp = &(*pp)->hnext)
		if (*pp == t) {
			*pp = t->hnext;
			tp->ntp--;
			return;
		}
}


/* ---- source side: open and close -------------------------------------------- */

/* The source settings the publishers of one session must share. */
static void cfg_key(const struct flit_cfg_source *c, char *buf, size_t len)
{
	snprintf(buf, len, "mode %d frame_max %u slots %u inline %u batch %d batch_max %u timestamps %d "
		 "late_join %u", c->rdma_mode, c->rdma_frame_max, c->rdma_slots, c->rdma_inline, c->batch,
		 c->batch_max, c->timestamps, c->late_join);
}

/* Is idx's previous topic's end still to be told? */
static bool idx_ending(const struct rsess *s, uint32_t idx)
{
	for (unsigned i = s->end_head; i < s->nend; i++)
		if (s->endq[i]->idx == idx)
			return true;
	return false;
}

/* Topic t joins session s (lock held): the next index; the receivers
 * connected are told its name before the next frame.  0 or -errno. */
static int sess_add_topic(struct rsess *s, struct rtopic *t)
{
	unsigned idx = s->ntopics;

	if (s->ntopics >= RC_TOPICS_MAX && s->live < s->ntopics) {
		/* every index was used once: take one whose topic ended (its
		 * receivers had its end; a page names the new topic) */
		idx = 0;
		while (s->topics[idx] || idx_ending(s, idx))
			if (++idx == s->ntopics)
				return flit_err(EAGAIN, "rdma: session '%s': every topic index is in use or its "
						"end not yet told to the receivers: try again", s->name);
	} else if (s->ntopics == s->captopics) {
		if (s->ntopics >= RC_TOPICS_MAX)
			return flit_err(ENOSPC, "rdma: session '%s' holds %u topics, the most one session can "
					"(topic indexes 0 .. 65535): name another for '%s'", s->name,
					s->ntopics, t->topic);
		unsigned cap = s->captopics ? s->captopics * 2 : 4;
		struct rtopic **v = realloc(s->topics, cap * sizeof(*v));
		if (!v)
			return flit_err(ENOMEM, "rdma: out of memory");
		s->topics = v;
		s->captopics = cap;
	}
	if (s->live && (s->nconns || s->late_join) && s->nann == s->capann) {
		unsigned cap = s->capann ? s->capann * 2 : 64;
		uint32_t *v = realloc(s->ann, cap * sizeof(*v));
		if (!v)
			return flit_err(ENOMEM, "rdma: out of memory");
		s->ann = v;
		s->capann = cap;
	}
	t->ss = s;
	t->idx = idx;
	s->topics[idx] = t;
	if (idx == s->ntopics)
		s->ntopics++;
	if (!s->live)
		s->lead = idx;
	if (s->live++) {
		/* a second topic: from now on every message carries its
		 * topic's own number (FLIT_FF_TSEQ), and receivers are told
		 * the session in pages */
		s->tseq = s->paged = true;
		if (s->nconns || s->late_join) {
			s->ann[s->nann++] = idx;
			if (s->nann == 1)
				rc_wake(s->tp); /* named within a millisecond, sends or not */
		}
	}
	return 0;
}

int rdma_src_open(struct flit_tp *tp, const char *topic,
		  const struct flit_cfg_source *cfg, struct flit_tsrc **out)
{
	struct rtopic *t = calloc(1, sizeof(*t));
	struct rsess *s = NULL;
	char key[sizeof(s->cfgkey)];
	int err;

	if (!t)
		return flit_err(ENOMEM, "rdma: out of memory");
	snprintf(t->topic, sizeof(t->topic), "%s", topic);
	t->hash = flit_rdma_topic_hash(topic);
	uint32_t frame_max = cfg->rdma_frame_max & ~7u;
	size_t info = FLIT_CTL_INFO_HDR_LEN + flit_ctl_name_len(strlen(topic)) + 8;
	if (info > frame_max) {
		free(t);
		return flit_err(EINVAL, "rdma: %s: source.rdma.frame_max %u is too small for the INFO that "
				"names a topic of %zu bytes (%zu bytes)", topic, frame_max, strlen(topic), info);
	}
	cfg_key(cfg, key, sizeof(key));
	/* unnamed: the session of the publishers with equal settings, while
	 * it has room; one of its own for a publisher with late join (what a
	 * session keeps is the session's last messages, not the topic's) */
	bool own = !strcmp(cfg->session, FLIT_SESSION_OWN) || (!cfg->session[0] && cfg->late_join);
	const char *name = own ? "" : cfg->session;

	pthread_mutex_lock(&tp->lock);
	if (rc_topic_of_hash(tp, t->hash)) {
		pthread_mutex_unlock(&tp->lock);
		free(t);
		return flit_err(EADDRINUSE, "rdma: topic '%s' already has a source in this context", topic);
	}
	if (!topic_hash_add(tp, t)) {
		pthread_mutex_unlock(&tp->lock);
		free(t);
		return flit_err(ENOMEM, "rdma: out of memory");
	}
	for (struct rsess *o = tp->srcs; o && !own; o = o->next) {
		if (o->own || strcmp(o->name, name))
			continue;
		if (!name[0] && (strcmp(o->cfgkey, key) || o->live >= RC_TOPICS_MAX))
			continue;
		if (strcmp(o->cfgkey, key)) {
			topic_hash_del(tp, t);
			pthread_mutex_unlock(&tp->lock);
			free(t);
			return flit_err(EINVAL, "rdma: publisher '%s' names session '%s' with other source settings "
					"than its publishers (%s: source.rdma.*, batch, batch_max, timestamps and "
					"late_join must be equal)", topic, name, o->label);
		}
		src_lock(o);
		err = sess_add_topic(o, t);
		src_unlock(o);
		if (err < 0) {
			topic_hash_del(tp, t);
			pthread_mutex_unlock(&tp->lock);
			free(t);
			return err;
		}
		s = o;
		break;
	}
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s) {
			topic_hash_del(tp, t);
			pthread_mutex_unlock(&tp->lock);
			free(t);
			return flit_err(ENOMEM, "rdma: out of memory");
		}
		pthread_mutex_init(&s->lock, NULL);
		s->tp = tp;
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->own = own;
		s->paged = name[0] != '\0';
		snprintf(s->cfgkey, sizeof(s->cfgkey), "%s", key);
		if (name[0])
			snprintf(s->label, sizeof(s->label), "session %s", name);
		else
			snprintf(s->label, sizeof(s->label), "%s", topic);
		while (!s->session)
			if (getrandom(&s->session, sizeof(s->session), 0) != sizeof(s->session))
				s->session = (uint32_t)(mono() ^ (uint64_t)getpid() << 16 ^ (uintptr_t)s);
		s->ts = cfg->timestamps;
		s->batch = cfg->batch;
		s->created = mono();
		s->late_join = cfg->late_join;
		s->mode = cfg->rdma_mode == FLIT_RDMA_WRITE ? FLIT_RDMA_WIRE_WRITE : FLIT_RDMA_WIRE_SEND;
		s->frame_max = frame_max;
		s->frame_cap = s->batch && cfg->batch_max < s->frame_max ? cfg->batch_max & ~7u : s->frame_max;
		/* the largest message, with its topic's number (a session may
		 * come to have several topics: the same limit from the start) */
		s->max_msg = (s->frame_max - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN -
			      (s->ts ? FLIT_MSG_TS_LEN : 0) - FLIT_MSG_TSEQ_LEN) & ~(size_t)7;
		if (s->max_msg > FLIT_MSG_LEN_MAX)
			s->max_msg = FLIT_MSG_LEN_MAX;
		s->inline_max = cfg->rdma_inline;
		s->nslots = cfg->rdma_slots;
		s->sig_every = s->nslots / 4;
		s->stride = (s->frame_max + 63) & ~(size_t)63;
		s->slots_len = s->stride * s->nslots;
		s->slots = aligned_alloc(4096, (s->slots_len + 4095) & ~(size_t)4095);
		if (!s->slots) {
			err = flit_err(ENOMEM, "rdma: %s: cannot allocate %zu bytes of send slots "
				       "(source.rdma.slots x frame_max)", topic, s->slots_len);
			goto fail;
		}
		memset(s->slots, 0, s->slots_len);
		for (unsigned d = 0; d < tp->ndev; d++) {
			s->mr[d] = rc_reg_mr(tp->dev[d].pd, s->slots, s->slots_len, 0, "send slots");
			if (!s->mr[d]) {
				err = -errno;
				flit_err_wrap(-err, "rdma: %s", topic);
				goto fail;
			}
		}
		if ((err = sess_add_topic(s, t)) < 0 || (err = rc_listen_start(tp)))
			goto fail;
		s->next = tp->srcs;
		tp->srcs = s;
		rc_describe_update(tp, s);
		flit_info("rdma: source %s session %08x%s%s (%s, frames <= %u bytes, %u slots)", topic,
			  s->session, name[0] ? " " : "", name, s->mode == FLIT_RDMA_WIRE_WRITE ? "write" : "send",
			  s->frame_max, s->nslots);
	} else {
		flit_debug("rdma: source %s in session %08x (%s), topic index %u", topic, s->session, s->label,
			   t->idx);
	}
	pthread_mutex_unlock(&tp->lock);
	{
		/* on the domain's resolver channel, when the context has one
		 * (udp listed): receivers find it by topic or pattern */
		struct flit_res_ad ad = {
			.session = s->session, .mode = FLIT_MODE_RDMA,
			.addr = tp->laddr.sin_addr.s_addr, .port = ntohs(tp->laddr.sin_port),
			.topic = topic,
		};
		t->advertised = flit_ctx_res_advertise(tp->ctx, &ad) == 0;
		if (!t->advertised)
			flit_debug("rdma: source %s is not advertised (%s): receivers find it "
				   "through receiver.rdma.static", topic, flit_errmsg());
	}
	*out = (struct flit_tsrc *)t;
	return 0;
fail:
	topic_hash_del(tp, t);
	pthread_mutex_unlock(&tp->lock);
	for (unsigned d = 0; d < tp->ndev; d++)
		if (s->mr[d])
			ibv_dereg_mr(s->mr[d]);
	free(s->slots);
	free(s->topics);
	pthread_mutex_destroy(&s->lock);
	free(s);
	free(t);
	return err;
}

/* Post a frame that must go (the last frame of a closing session): wait
 * for the credits and a slot, as long as CLOSE_WAIT_NS at most.  0, or
 * the status it gave up with.  Lock held, released while waiting. */
static int src_wait(struct rsess *s, bool slot, bool post)
{
	uint64_t t0 = mono();
	int r;

	while ((r = src_ready(s, slot, post)) == FLIT_BACK_PRESSURED && mono() - t0 < CLOSE_WAIT_NS) {
		src_unlock(s);
		usleep(100);
		src_lock(s);
	}
	return r;
}

/* One topic of a session that goes on ends: its INFO ENDED (its final
 * number) goes in the stream after what it sent, before the next frame or
 * within a millisecond (the connection thread).  Returns whether t went
 * into that queue (then it is freed once told; else the caller frees it).
 * Lock held. */
static bool sess_end_topic(struct rsess *s, struct rtopic *t)
{
	if (s->claimer == t) {
		s->claim = NULL;
		s->claimer = NULL;
		if (!s->fcount)
			s->frame = NULL;
	}
	s->topics[t->idx] = NULL;
	s->live--;
	/* the next publisher reports the session's counters from here on */
	if (s->lead == t->idx) {
		s->c_base = s->c;
		while (s->lead < s->ntopics && !s->topics[s->lead])
			s->lead++;
	}
	if (!s->nconns && !s->late_join)
		return false; /* nobody to tell */
	if (s->nend == s->capend) {
		unsigned cap = s->capend ? s->capend * 2 : 8;
		struct rtopic **v = realloc(s->endq, cap * sizeof(*v));
		if (!v) {
			flit_warn("rdma: %s: out of memory: the end of %s is told at the session's end",
				  s->label, t->topic);
			return false;
		}
		s->endq = v;
		s->capend = cap;
	}
	s->endq[s->nend++] = t; /* freed once told */
	if (!s->claim)
		rc_src_pending(s);
	if (s->nend)
		rc_wake(s->tp);
	return true;
}

void rdma_src_close(struct flit_tsrc *ts)
{
	struct rtopic *t = (struct rtopic *)ts;
	struct rsess *s = t->ss;
	struct flit_tp *tp = s->tp;

	/* no new receiver for it from now on */
	if (t->advertised)
		flit_ctx_res_withdraw(tp->ctx, s->session, t->topic);
	pthread_mutex_lock(&tp->lock);
	topic_hash_del(tp, t);
	src_lock(s);
	if (s->live > 1) {
		bool queued = sess_end_topic(s, t);
		src_unlock(s);
		pthread_mutex_unlock(&tp->lock);
		if (!queued)
			free(t);
		return;
	}
	src_unlock(s);
	for (struct rsess **pp = &tp->srcs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&tp->lock);

	/* the last frame, the connections that catch up caught up, then END
	 * to every receiver (a buffer and a send slot were kept for it), and
	 * wait until they have it all */
	src_lock(s);
	s->claim = NULL;
	s->nann = s->ann_head = 0;
	if (s->frame && s->fcount && src_wait(s, false, true) == 0)
		src_post_frame(s);
	/* the other topics' ends: the session's END ends them */
	for (unsigned i = s->end_head; i < s->nend; i++)
		free(s->endq[i]);
	s->nend = s->end_head = 0;
	for (uint64_t t0 = mono(); s->ncatching && mono() - t0 < CLOSE_WAIT_NS;) {
		rc_src_progress(s);
		if (s->ncatching) {
			src_unlock(s);
			usleep(100);
			src_lock(s);
		}
	}
	rc_src_progress(s);
	uint64_t end_seq = s->next_seq;
	for (unsigned i = 0; i < s->nconns; i++) {
		struct sconn *c = s->conns[i];
		if (c->catching)
			continue; /* it never caught up: its receiver sees the disconnect */
		size_t l = flit_ctl_hb_encode(c->blk->end, sizeof(c->blk->end), s->session, end_seq, end_seq);
		flit_st16(c->blk->end + 4, FLIT_HBF_END);
		if (c->sent < c->depth + c->blk->freed &&
		    rc_conn_post(c, c->blk->end, (uint32_t)l, c->mr->lkey, s->nframes, true, 1) == 0)
			c->end_posted = true;
	}
	for (uint64_t t0 = mono(); mono() - t0 < CLOSE_WAIT_NS;) {
		bool all = true;
		for (unsigned i = 0; i < s->nconns; i++) {
			struct sconn *c = s->conns[i];
			rc_conn_reap(c);
			all &= !c->end_posted || c->end_done || c->dead;
		}
		if (all)
			break;
		usleep(100);
	}
	src_unlock(s);

	/* detach every connection of ours; the connection thread frees them
	 * when their disconnect completes */
	pthread_mutex_lock(&tp->lock);
	for (struct sconn *c = tp->sconns; c; c = c->next)
		if (c->src == s) {
			src_lock(s);
			c->src = NULL;
			src_unlock(s);
			rdma_disconnect(c->id);
		}
	s->nconns = 0;
	pthread_mutex_unlock(&tp->lock);

	for (unsigned d = 0; d < tp->ndev; d++)
		if (s->mr[d])
			ibv_dereg_mr(s->mr[d]);
	free(s->slots);
	free(s->conns);
	free(s->topics);
	free(s->endq);
	free(s->ann);
	pthread_mutex_destroy(&s->lock);
	free(s);
	free(t);
}
