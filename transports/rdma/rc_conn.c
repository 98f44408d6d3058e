// SPDX-License-Identifier: BSD-2-Clause
/*
 * The rdma transport's source side, its connections (design: rc.h): the
 * listener and its connection thread, accepting a receiver, naming it the
 * session's topics and catching it up, and the thread's timer for the
 * sessions that send nothing.  Sending: rc_src.c.
 */
#include "rdma/rc.h"

void rc_conn_names_free(struct sconn *c)
{
	if (c->pg_mr)
		ibv_dereg_mr(c->pg_mr);
	c->pg_mr = NULL;
	free(c->pgbuf);
	c->pgbuf = NULL;
	free(c->pg_wr);
	c->pg_wr = NULL;
	c->pg_n = 0;
}

/* ---- source side: connections (the connection thread, tp->lock held) ---------- */

static void sconn_free(struct flit_tp *tp, struct sconn *c)
{
	for (struct sconn **pp = &tp->sconns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	rc_conn_names_free(c);
	free(c->blk);
	if (c->id)
		rdma_destroy_id(c->id);
	free(c);
}

/* Take a connection out of its session (tp->lock held). */
static void sconn_detach(struct sconn *c)
{
	struct rsess *s = c->src;

	if (!s)
		return;
	src_lock(s);
	for (unsigned i = 0; i < s->nconns; i++)
		if (s->conns[i] == c) {
			s->conns[i] = s->conns[--s->nconns];
			if (c->catching) {
				c->catching = false;
				s->ncatching--;
			}
			break;
		}
	src_unlock(s);
	c->src = NULL;
}

static void reject(struct rdma_cm_id *id, unsigned reason, uint32_t value)
{
	uint8_t pd[FLIT_RDMA_REJ_LEN];
	struct flit_rdma_rej_msg m = { .reason = (uint8_t)reason, .value = value };

	flit_rdma_rej_encode(pd, &m);
	rdma_reject(id, pd, sizeof(pd));
}

/* The oldest frame a connection of `depth` credits can be given from the
 * slots: one the slots still hold (the open frame is being built in the
 * slot of frame nframes - nslots) and its credits take (less INFO and the
 * END kept back).  Lock held. */
static uint64_t replay_lo(const struct rsess *s, uint32_t depth)
{
	uint64_t keep = s->nslots - (s->frame ? 1 : 0);
	uint64_t lo = s->nframes > keep ? s->nframes - keep : 0;

	if (s->nframes - lo > depth - 2)
		lo = s->nframes - (depth - 2);
	return lo;
}

/* What a new connection gets before the live stream (lock held): a
 * receiver older than the source, everything from the session's first
 * message that its slots still hold; one asking for late join, the last
 * source.late_join messages they hold.  At most depth - 2 frames (the
 * receiver's credits, less INFO and the END kept back).  Without late join
 * the source keeps nothing (its sends to nobody were refused). */
static void replay_plan(struct rsess *s, struct sconn *c, const struct flit_rdma_req *rq)
{
	uint64_t next = s->frame ? flit_ld64(s->frame + 16) : s->next_seq;
	uint64_t age_ms = (mono() - s->created) / 1000000u;
	bool first = s->late_join && rq->sub_age_ms > age_ms;
	bool late = s->late_join && (rq->flags & FLIT_RDMA_REQF_LATE);
	uint64_t lo = replay_lo(s, rq->depth);

	c->replay = false;
	c->late = 0;
	if (!first && !late)
		return;
	uint64_t want = first ? 0 : next > s->late_join ? next - s->late_join : 0;
	uint64_t f = s->nframes;
	/* the first frame holding a message at or after `want` (INFO frames
	 * in the ring carry the session's next number: they count as theirs) */
	while (f > lo && flit_ld64(slot_of(s, f - 1) + 16) > want)
		f--;
	if (f > lo)
		f--; /* the frame holding `want` */
	if (f == s->nframes && !first)
		return; /* nothing kept */
	c->replay = true;
	c->replay_from = f;
	if (first) {
		c->info_seq = 0; /* what it no longer holds is loss */
	} else {
		uint64_t fs = flit_ld64(slot_of(s, f) + 16);
		c->info_seq = fs > want ? fs : want;
		c->late = (uint32_t)(next - c->info_seq);
	}
}

/* The session of the topic a receiver asks for (tp->lock held). */
static struct rsess *sess_of_hash(struct flit_tp *tp, uint64_t hash)
{
	struct rtopic *t = rc_topic_of_hash(tp, hash);
	return t ? t->ss : NULL;
}

static void on_connect_request(struct flit_tp *tp, struct rdma_cm_id *id,
			       const uint8_t *pd, size_t pdlen)
{
	struct flit_rdma_req rq;
	struct sconn *c = NULL;
	struct rsess *s;
	unsigned ver;
	char peer[48];
	int err, d;

	flit_ep_str((struct sockaddr_in *)rdma_get_peer_addr(id), peer, sizeof(peer));
	err = flit_rdma_req_decode(pd, pdlen, &rq, &ver);
	if (err == -EPROTO) {
		flit_info("rdma: connection from %s refused: not a flit receiver, or version %u (ours: %u)",
			  peer, ver, FLIT_RDMA_VERSION);
		reject(id, FLIT_RDMA_REJ_VERSION, FLIT_RDMA_VERSION);
		goto drop;
	}
	if (err) {
		reject(id, FLIT_RDMA_REJ_BAD, 0);
		goto drop;
	}
	if (rq.domain != tp->domain) {
		reject(id, FLIT_RDMA_REJ_DOMAIN, tp->domain);
		goto drop;
	}
	if (!(s = sess_of_hash(tp, rq.topic_hash))) {
		reject(id, FLIT_RDMA_REJ_NO_TOPIC, 0);
		goto drop;
	}
	for (struct sconn *o = tp->sconns; o; o = o->next) {
		if (o->src != s || o->rcv_id != rq.rcv_id || o->dead)
			continue;
		if (rq.flags & FLIT_RDMA_REQF_ANEW) {
			/* the receiver has no connection to the session: this
			 * one is gone there (its end never reached us) */
			flit_info("rdma: %s: receiver %s asks anew: its connection from %s is gone", s->label,
				  peer, o->peer);
			src_lock(s);
			o->dead = true;
			rc_src_progress(s);
			src_unlock(s);
			rdma_disconnect(o->id);
			continue;
		}
		/* that context has the session: the topic comes on it */
		reject(id, FLIT_RDMA_REJ_SESSION, s->session);
		goto drop;
	}
	if (rq.buf_size < s->frame_max) {
		flit_info("rdma: %s: receiver %s has %u-byte buffers, frames need %u: refused",
			  s->label, peer, rq.buf_size, s->frame_max);
		reject(id, FLIT_RDMA_REJ_FRAME, s->frame_max);
		goto drop;
	}
	if (s->mode == FLIT_RDMA_WIRE_WRITE && !(rq.flags & FLIT_RDMA_REQF_RING)) {
		reject(id, FLIT_RDMA_REJ_BAD, 0);
		goto drop;
	}
	d = rc_dev_index(tp, id->verbs);
	if (d < 0 || !s->mr[d]) {
		flit_warn("rdma: connection from %s on device %s, which this context did not open",
			  peer, rc_dev_name(id->verbs));
		reject(id, FLIT_RDMA_REJ_RESOURCES, ENODEV);
		goto drop;
	}
	const char *what = "out of memory";
	c = calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	c->tp = tp;
	c->id = id;
	c->dev = (unsigned)d;
	c->mode = s->mode;
	c->depth = rq.depth;
	c->bufsz = rq.buf_size;
	c->ring = rq.ring_addr;
	c->rkey = rq.ring_rkey;
	c->rcv_id = rq.rcv_id;
	c->want = rq.topic_hash;
	c->sq = s->nslots + 4;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	c->blk = aligned_alloc(64, sizeof(*c->blk));
	if (!c->blk)
		goto fail;
	memset(c->blk, 0, sizeof(*c->blk));
	c->mr = rc_reg_mr(tp->dev[d].pd, c->blk, sizeof(*c->blk),
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "a credit block");
	if (!c->mr) {
		what = flit_errmsg();
		goto fail;
	}
	what = "cannot create a completion queue";
	c->cq = ibv_create_cq(id->verbs, (int)c->sq + 1, NULL, NULL, 0);
	if (!c->cq)
		goto fail;
	what = "cannot create a queue pair";
	/* inline: as much as asked, or less if the device says no */
	for (uint32_t inl = s->inline_max;; inl = inl > 64 ? 64 : 0) {
		struct ibv_qp_init_attr qa = {
			.send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = c->sq, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1, .max_inline_data = inl },
		};
		if (rdma_create_qp(id, tp->dev[d].pd, &qa) == 0) {
			c->qp = id->qp;
			c->inl = qa.cap.max_inline_data < inl ? qa.cap.max_inline_data : inl;
			break;
		}
		if (!inl)
			goto fail;
	}
	c->src = s;
	id->context = c;
	c->next = tp->sconns;
	tp->sconns = c;
	src_lock(s);
	replay_plan(s, c, &rq);
	src_unlock(s);

	struct flit_rdma_rep rep = {
		.mode = c->mode, .session_id = s->session,
		.credit_addr = (uintptr_t)&c->blk->freed, .credit_rkey = c->mr->rkey,
		.frame_max = s->frame_max, .depth = c->depth, .late = c->late,
	};
	uint8_t rpd[FLIT_RDMA_REP_LEN];
	flit_rdma_rep_encode(rpd, &rep);
	struct rdma_conn_param cp = {
		.private_data = rpd, .private_data_len = sizeof(rpd),
		.responder_resources = 0, .initiator_depth = 0,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	if (rdma_accept(id, &cp)) {
		flit_info("rdma: %s: accepting %s: %s", s->label, peer, strerror(errno));
		sconn_free(tp, c);
	}
	return;
fail:
	err = c ? errno : ENOMEM;
	flit_warn("rdma: %s: cannot set up the connection from %s: %s (%s)", s->label, peer,
		  what, strerror(err));
	reject(id, FLIT_RDMA_REJ_RESOURCES, (uint32_t)err);
	if (c) {
		/* not linked yet, and no queue pair: only its memory */
		if (c->cq)
			ibv_destroy_cq(c->cq);
		if (c->mr)
			ibv_dereg_mr(c->mr);
		free(c->blk);
		free(c);
	}
drop:
	rdma_destroy_id(id);
}

/* The ring of page buffers of connection c: up to its credits, at most
 * 32 frames.  0 or -errno.  Session lock held. */
static int conn_pages_init(struct rsess *s, struct sconn *c)
{
	c->pg_n = c->depth < 32 ? c->depth : 32;
	c->pgbuf = aligned_alloc(64, (size_t)c->pg_n * s->stride);
	c->pg_wr = calloc(c->pg_n, sizeof(*c->pg_wr));
	if (!c->pgbuf || !c->pg_wr)
		return -ENOMEM;
	c->pg_mr = rc_reg_mr(s->tp->dev[c->dev].pd, c->pgbuf, (size_t)c->pg_n * s->stride, 0, "INFO pages");
	return c->pg_mr ? 0 : -ENOMEM;
}

/* The next INFO page of connection c into a free buffer of its ring, and
 * posted: 1, or 0 (no buffer free, or nothing left to name), or -errno.
 * nums: each topic's next number is valid at name_seq (the first pages,
 * built where the connection starts).  Session lock held. */
static int conn_page(struct rsess *s, struct sconn *c, bool nums)
{
	unsigned b = c->pages % c->pg_n;
	uint32_t idx[64];
	unsigned n = 0, took;

	if (c->pg_wr[b] > c->wr_done)
		return 0; /* its last page still on its way: a completion frees it */
	while (c->name_next < c->name_end && n < 64) {
		if (s->topics[c->name_next])
			idx[n++] = c->name_next;
		c->name_next++;
	}
	if (!n)
		return 0;
	uint8_t *p = c->pgbuf + (size_t)b * s->stride;
	size_t l = rc_info_encode(s, p, s->frame_max, c->name_seq, idx, n, nums, false, NULL, &took);
	if (took < n) /* those it did not take: the next page's */
		c->name_next = idx[took];
	if (!l)
		return 0;
	/* signalled at the ring's half and end: completions free buffers */
	bool sig = b == c->pg_n / 2 - 1 || b == c->pg_n - 1 || c->name_next >= c->name_end;
	int err = rc_conn_post(c, p, (uint32_t)l, c->pg_mr->lkey, c->catch_next, sig, s->sig_every);
	if (err)
		return err;
	c->pg_wr[b] = c->wr_posted;
	c->pages++;
	if (c->name_next >= c->name_end)
		c->names_wr = c->wr_posted;
	return 1;
}

/* Move connection c on with what it catches up on: its INFO pages, then
 * the session's frames it has not had, from their slots, as far as its
 * credits and send queue allow; then it takes the live stream.  Session
 * lock held. */
void rc_conn_catchup(struct rsess *s, struct sconn *c)
{
	int r = 1;

	while (c->name_next < c->name_end && conn_room(c) && (r = conn_page(s, c, false)) > 0)
		;
	if (r < 0) {
		flit_info("rdma: receiver %s: post failed: %s", c->peer, strerror(-r));
		c->dead = true;
		return;
	}
	if (c->name_next < c->name_end)
		return;
	while (c->catch_next < s->nframes && conn_room(c)) {
		const uint8_t *f = slot_of(s, c->catch_next);
		int err = rc_conn_post(c, f, flit_ld32(f + 8), s->mr[c->dev]->lkey, c->catch_next + 1, false,
				       s->sig_every);
		if (err) {
			flit_info("rdma: receiver %s: post failed: %s", c->peer, strerror(-err));
			c->dead = true;
			return;
		}
		c->catch_next++;
	}
	/* (not while a claim is open: its commit posts without looking at
	 * this connection's room) */
	if (c->catch_next == s->nframes && !s->claim) {
		c->catching = false;
		s->ncatching--;
		flit_debug("rdma: %s: receiver %s caught up (%u pages)", s->label, c->peer, c->pages);
	}
}

/* Established: the connection names the session's topics, catches up,
 * then takes the live stream. */
static void on_established(struct flit_tp *tp, struct sconn *c)
{
	struct rsess *s = c->src;

	if (!s || c->dead) { /* the session closed meanwhile, or the receiver asked anew */
		rdma_disconnect(c->id);
		return;
	}
	struct rtopic *w = rc_topic_of_hash(tp, c->want);
	if (!w || w->ss != s) {
		/* the topic it asked for ended meanwhile: its pages would not
		 * name it, and the receiver would wait for it on this
		 * connection; it asks again (and is told there is none) */
		flit_info("rdma: %s: receiver %s: the topic it asked for ended before it joined",
			  s->label, c->peer);
		rdma_disconnect(c->id);
		return;
	}
	src_lock(s);
	/* the receiver's first message: the first not yet posted anywhere,
	 * or the first of the frames kept for it (replay_plan) */
	uint64_t next = s->frame ? flit_ld64(s->frame + 16) : s->next_seq;
	uint64_t from = s->nframes;
	/* each topic's next number is told at `next` when no message is
	 * between them (no frame open, nothing replayed) */
	bool nums = !s->frame && !s->claim;
	if (c->replay) {
		from = c->replay_from;
		next = c->info_seq;
		nums = false;
		/* frames sent since the plan are replayed too; what the slots or
		 * the receiver's credits cannot hold any more is a gap (loss) */
		uint64_t lo = replay_lo(s, c->depth);
		if (from < lo)
			from = lo;
	}
	c->first_frame = from;
	c->catch_next = from;
	c->limit = c->depth - 1;
	c->name_seq = next;
	c->name_next = 0;
	c->name_end = s->ntopics;
	int err = conn_pages_init(s, c);
	/* the first page now, with each topic's number where it starts (if
	 * nothing is between); the rest as its credits come back */
	if (!err && conn_page(s, c, nums) < 0)
		err = -EIO;
	if (!err && s->nconns == s->capconns) {
		unsigned cap = s->capconns ? s->capconns * 2 : 4;
		struct sconn **v = realloc(s->conns, cap * sizeof(*v));
		if (v) {
			s->conns = v;
			s->capconns = cap;
		} else {
			err = -ENOMEM;
		}
	}
	if (err) {
		src_unlock(s);
		flit_warn("rdma: %s: receiver %s: cannot name the topics: %s", s->label, c->peer,
			  strerror(-err));
		rdma_disconnect(c->id);
		return;
	}
	s->conns[s->nconns++] = c;
	c->established = true;
	c->catching = true;
	s->ncatching++;
	rc_conn_catchup(s, c);
	src_unlock(s);
	flit_info("rdma: %s: receiver %s joined (%s, %u buffers of %u bytes, inline <= %u; %u topic%s "
		  "named in INFO pages)", s->label, c->peer, c->mode == FLIT_RDMA_WIRE_WRITE ? "write" : "send",
		  c->depth, c->bufsz, c->inl, s->live, s->live == 1 ? "" : "s");
	if (s->ncatching)
		rc_wake(tp); /* the connection thread moves it on while no send does */
}

/* Move the connections that catch up on, and tell the receivers of
 * topics added and ended, for sessions that send nothing (the connection
 * thread, every millisecond while there is any).  tp->lock held.
 * Returns whether any of that is still to do. */
static bool sess_catchup_all(struct flit_tp *tp)
{
	bool more = false;

	for (struct rsess *s = tp->srcs; s; s = s->next) {
		if (!__atomic_load_n(&s->ncatching, __ATOMIC_RELAXED) &&
		    !__atomic_load_n(&s->nann, __ATOMIC_RELAXED) && !__atomic_load_n(&s->nend, __ATOMIC_RELAXED))
			continue;
		src_lock(s);
		if (!s->claim) {
			rc_src_progress(s);
			if (s->nann || s->nend)
				rc_src_pending(s); /* a topic named or ended though none sends */
		}
		more |= s->ncatching || s->nann || s->nend;
		src_unlock(s);
	}
	return more;
}

static void src_cm_event(struct flit_tp *tp, struct rdma_cm_event *ev)
{
	enum rdma_cm_event_type type = ev->event;
	struct rdma_cm_id *id = ev->id;
	uint8_t pd[64];
	size_t pdlen = 0;

	if (type == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data) {
		pdlen = ev->param.conn.private_data_len < sizeof(pd) ?
			ev->param.conn.private_data_len : sizeof(pd);
		memcpy(pd, ev->param.conn.private_data, pdlen);
	}
	/* ack first: destroying an id waits for its events' acks */
	rdma_ack_cm_event(ev);

	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		on_connect_request(tp, id, pd, pdlen);
		return;
	}
	if (id == tp->lid || id->context == tp || !id->context)
		return; /* e.g. DEVICE_REMOVAL on the listener: nothing to do */
	struct sconn *c = id->context;
	switch (type) {
	case RDMA_CM_EVENT_ESTABLISHED:
		on_established(tp, c);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (c->src && c->established)
			flit_info("rdma: %s: receiver %s left (%s)", c->src->label, c->peer,
				  rdma_event_str(type));
		sconn_detach(c);
		rdma_disconnect(id);
		sconn_free(tp, c);
		break;
	default:
		break;
	}
}

static void *cm_thread(void *arg)
{
	struct flit_tp *tp = arg;
	struct pollfd pf[2] = {
		{ .fd = tp->lch->fd, .events = POLLIN },
		{ .fd = tp->wakefd, .events = POLLIN },
	};
	bool catching = false;

	while (!__atomic_load_n(&tp->stop, __ATOMIC_ACQUIRE)) {
		if (poll(pf, 2, catching ? 1 : -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents) {
			uint64_t v;
			if (read(tp->wakefd, &v, sizeof(v)) < 0)
				(void)0;
		}
		for (;;) {
			struct rdma_cm_event *ev;
			if (rdma_get_cm_event(tp->lch, &ev))
				break; /* EAGAIN: the channel is non-blocking */
			pthread_mutex_lock(&tp->lock);
			src_cm_event(tp, ev);
			pthread_mutex_unlock(&tp->lock);
		}
		pthread_mutex_lock(&tp->lock);
		catching = sess_catchup_all(tp);
		pthread_mutex_unlock(&tp->lock);
	}
	return NULL;
}

void rc_wake(struct flit_tp *tp)
{
	uint64_t one = 1;

	if (tp->wakefd >= 0 && write(tp->wakefd, &one, sizeof(one)) < 0)
		(void)0;
}

/* Listen for receivers (first source of the context).  tp->lock held. */
int rc_listen_start(struct flit_tp *tp)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)tp->cc->rdma_port) };
	char where[48];
	int err;

	if (tp->lid)
		return 0;
	if (tp->cc->rdma_address[0])
		inet_pton(AF_INET, tp->cc->rdma_address, &a.sin_addr);
	flit_ep_str(&a, where, sizeof(where));
	tp->lch = rdma_create_event_channel();
	if (!tp->lch)
		return flit_err(errno, "rdma: cannot create an event channel: %s", strerror(errno));
	if ((err = rc_nonblock(tp->lch->fd)) ||
	    rdma_create_id(tp->lch, &tp->lid, tp, RDMA_PS_TCP)) {
		err = flit_err(err ? -err : errno, "rdma: cannot create a listener: %s",
			       strerror(err ? -err : errno));
		goto fail;
	}
	if (rdma_bind_addr(tp->lid, (struct sockaddr *)&a)) {
		int e = errno;
		err = flit_err(e, "rdma: cannot listen on %s: %s%s", where, strerror(e),
			       e == EADDRINUSE ? " (context.rdma.port: another context or process listens "
						 "there; give each publishing context its own port, or 0 for any)" :
			       e == EADDRNOTAVAIL || e == ENODEV ? " (context.rdma.address must be the address of "
								   "an RDMA device's interface)" : "");
		goto fail;
	}
	if (tp->lid->verbs && rc_dev_index(tp, tp->lid->verbs) < 0) {
		err = flit_err(ENODEV, "rdma: %s is on device %s, which this context did not open",
			       where, rc_dev_name(tp->lid->verbs));
		goto fail;
	}
	if (rdma_listen(tp->lid, 64)) {
		err = flit_err(errno, "rdma: cannot listen on %s: %s", where, strerror(errno));
		goto fail;
	}
	tp->laddr = *(struct sockaddr_in *)rdma_get_local_addr(tp->lid);
	tp->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (tp->wakefd < 0) {
		err = flit_err(errno, "rdma: eventfd: %s", strerror(errno));
		goto fail;
	}
	tp->stop = false;
	err = pthread_create(&tp->thread, NULL, cm_thread, tp);
	if (err) {
		err = flit_err(err, "rdma: cannot start the connection thread: %s", strerror(err));
		goto fail;
	}
	pthread_setname_np(tp->thread, "flit-rdma");
	tp->thread_on = true;
	flit_info("rdma: listening on %s", flit_ep_str(&tp->laddr, where, sizeof(where)));
	return 0;
fail:
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	tp->wakefd = -1;
	if (tp->lid)
		rdma_destroy_id(tp->lid);
	tp->lid = NULL;
	rdma_destroy_event_channel(tp->lch);
	tp->lch = NULL;
	return err;
}

/* Stop the connection thread, then free what is left (no source is open). */
void rc_listen_stop(struct flit_tp *tp)
{
	if (tp->thread_on) {
		uint64_t one = 1;
		__atomic_store_n(&tp->stop, true, __ATOMIC_RELEASE);
		if (write(tp->wakefd, &one, sizeof(one)) < 0)
			(void)0;
		pthread_join(tp->thread, NULL);
		tp->thread_on = false;
	}
	pthread_mutex_lock(&tp->lock);
	while (tp->sconns) {
		struct sconn *c = tp->sconns;
		sconn_detach(c);
		rdma_disconnect(c->id);
		sconn_free(tp, c);
	}
	if (tp->lid)
		rdma_destroy_id(tp->lid);
	tp->lid = NULL;
	if (tp->lch)
		rdma_destroy_event_channel(tp->lch);
	tp->lch = NULL;
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	tp->wakefd = -1;
	free(tp->tphash);
	tp->tphash = NULL;
	tp->tpcap = tp->ntp = 0;
	pthread_mutex_unlock(&tp->lock);
}
