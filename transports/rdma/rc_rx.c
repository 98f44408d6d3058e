// SPDX-License-Identifier: BSD-2-Clause
/*
 * The rdma transport's receive side (design: rc.h): connections to
 * sources, their frames, the targets subscriptions make.
 */
#include "rdma/rc.h"

/* ---- receive side: connections ----------------------------------------------- */

static void credit_write(struct rconn *c, bool force);

/* Re-post buffer `slot`. */
static int post_recv(struct rconn *c, uint32_t slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->mem + (size_t)slot * c->bufsz),
			       .length = c->bufsz, .lkey = c->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	int r = ibv_post_recv(c->qp, &wr, &bad);
	return r ? -r : 0;
}

static void rconn_free(struct flit_tp *tp, struct rconn *c)
{
	for (struct rconn **pp = &tp->rconns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (tp->rr == c)
		tp->rr = c->next;
	for (struct rtarget *t = tp->targets; t; t = t->next)
		if (t->c == c)
			t->c = NULL;
	if (c->state == RC_UP)
		tp->nup--;
	if (c->id && (c->state == RC_UP || c->state == RC_CONNECTING))
		rdma_disconnect(c->id);
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	free(c->mem);
	free(c->nkey);
	free(c->nidx);
	if (c->id)
		rdma_destroy_id(c->id);
	free(c);
}

/* A target's next attempt: after its delay, which doubles up to 10x. */
static void target_retry(struct rtarget *t, uint64_t now)
{
	t->retry_at = now + (uint64_t)t->delay_ms * MS;
	t->delay_ms = t->delay_ms * 2 > t->retry_ms * 10 ? t->retry_ms * 10 : t->delay_ms * 2;
}

/* A failure on the way to (or on) a connection: say why, once per change. */
static void target_fail(struct rtarget *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void target_fail(struct rtarget *t, const char *fmt, ...)
{
	char why[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	uint32_t h = flit_domain_id(why) | 1; /* FNV-1a 32 */
	if (h != t->why) {
		flit_warn("rdma: '%s' from %s: %s; retrying every %u..%u ms", t->topic, t->ep, why,
			  t->retry_ms, t->retry_ms * 10);
		t->why = h;
	} else {
		flit_debug("rdma: '%s' from %s: %s", t->topic, t->ep, why);
	}
}

/* End a connection: deliver what arrived, then EOS (died unless the
 * source said END), free it, and schedule the next attempt. */
static int rconn_down(struct flit_tp *tp, struct rconn *c, uint64_t now);

static inline bool same_ep(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* Target t uses connection c. */
static void target_attach(struct rconn *c, struct rtarget *t)
{
	t->c = c;
	c->refs++;
	if (!c->t)
		c->t = t;
}

/* Target t leaves its connection, which it returns (NULL: none). */
static struct rconn *target_detach(struct flit_tp *tp, struct rtarget *t)
{
	struct rconn *c = t->c;

	if (!c)
		return NULL;
	t->c = NULL;
	c->refs--;
	if (c->t == t) {
		c->t = NULL;
		for (struct rtarget *o = tp->targets; o && !c->t; o = o->next)
			if (o->c == c)
				c->t = o;
	}
	return c;
}

/* Is entry i of c's name table still a topic its session names? */
static bool conn_name_live(const struct rconn *c, unsigned i)
{
	const struct flit_rx_session *rs = c->rs;
	uint32_t idx = c->nidx[i];

	return rs && idx < rs->ntopics && rs->topics[idx].name &&
	       (flit_rdma_topic_hash(rs->topics[idx].name) | 1) == c->nkey[i];
}

/* Connection c's session named topic idx, of hash h. */
static void conn_name_add(struct rconn *c, uint64_t h, uint32_t idx)
{
	if (2 * (c->nn + 1) > c->ncap) {
		/* full: the entries of topics that ended or were renamed go,
		 * the table grows only for the live ones */
		unsigned live = 0;
		for (unsigned i = 0; i < c->ncap; i++)
			live += c->nkey[i] && conn_name_live(c, i);
		unsigned cap = 64;
		while (4 * (live + 1) > cap)
			cap *= 2; /* a quarter full: room before the next look */
		uint64_t *k = calloc(cap, sizeof(*k));
		uint32_t *v = calloc(cap, sizeof(*v));
		if (!k || !v) {
			free(k);
			free(v);
			return; /* the target looks by connecting: REJ SESSION */
		}
		c->nn = 0;
		for (unsigned i = 0; i < c->ncap; i++)
			if (c->nkey[i] && conn_name_live(c, i)) {
				unsigned j = (unsigned)c->nkey[i] & (cap - 1);
				while (k[j])
					j = (j + 1) & (cap - 1);
				k[j] = c->nkey[i];
				v[j] = c->nidx[i];
				c->nn++;
			}
		free(c->nkey);
		free(c->nidx);
		c->nkey = k;
		c->nidx = v;
		c->ncap = cap;
	}
	h |= 1; /* 0 marks a free entry */
	unsigned j = (unsigned)h & (c->ncap - 1);
	while (c->nkey[j] && !(c->nkey[j] == h && c->nidx[j] == idx))
		j = (j + 1) & (c->ncap - 1);
	if (!c->nkey[j])
		c->nn++;
	c->nkey[j] = h;
	c->nidx[j] = idx;
}

/* Does the session on connection c name topic `name` (live)? */
static bool conn_names(const struct rconn *c, const char *name, uint64_t h)
{
	const struct flit_rx_session *rs = c->rs;

	if (!rs || !c->ncap)
		return false;
	h |= 1;
	for (unsigned j = (unsigned)h & (c->ncap - 1); c->nkey[j]; j = (j + 1) & (c->ncap - 1))
		if (c->nkey[j] == h && c->nidx[j] < rs->ntopics && rs->topics[c->nidx[j]].name &&
		    !strcmp(rs->topics[c->nidx[j]].name, name))
			return true;
	return false;
}

/* A connection target t can use: one to its source context whose session
 * names its topic, or is the session resolution told.  *wait: one to
 * that context is still being set up (it may be to the same session:
 * see once it is up). */
static struct rconn *conn_for(struct flit_tp *tp, const struct rtarget *t, bool *wait)
{
	*wait = false;
	for (struct rconn *c = tp->rconns; c; c = c->next) {
		if (c->broken || c->merged || !same_ep(&c->sa, &t->sa))
			continue;
		if (c->state != RC_UP) {
			*wait = true;
			continue;
		}
		if ((t->session && c->session == t->session) || conn_names(c, t->topic, t->hash))
			return c;
	}
	/* its session, reached at another address */
	for (struct rconn *c = tp->rconns; t->session && c; c = c->next) {
		if (!c->broken && !c->merged && c->state == RC_UP && c->session == t->session)
			return c;
	}
	return NULL;
}

static int rconn_start(struct flit_tp *tp, struct rtarget *t, uint64_t now)
{
	bool wait;
	struct rconn *c = conn_for(tp, t, &wait);

	if (c) {
		target_attach(c, t);
		t->attached = now;
		flit_debug("%s: '%s' shares the connection to session %08x", c->name, t->topic, c->session);
		return 0;
	}
	if (wait)
		return 0; /* the next housekeeping looks again */
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->tp = tp;
	c->sa = t->sa;
	c->depth = t->depth;
	c->bufsz = t->bufsz;
	c->state = RC_ADDR;
	snprintf(c->name, sizeof(c->name), "rdma:%s", t->ep);
	if (rdma_create_id(tp->rch, &c->id, c, RDMA_PS_TCP)) {
		int e = errno;
		free(c);
		target_fail(t, "cannot create a connection id: %s", strerror(e));
		target_retry(t, now);
		return -e;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&t->sa, CM_TIMEOUT_MS)) {
		int e = errno;
		rdma_destroy_id(c->id);
		free(c);
		target_fail(t, "cannot resolve the address: %s", strerror(e));
		target_retry(t, now);
		return -e;
	}
	c->next = tp->rconns;
	tp->rconns = c;
	target_attach(c, t);
	t->attached = now;
	return 0;
}

/* Route known: QP, buffers (all posted before we connect), connect. */
static int rconn_connect(struct flit_tp *tp, struct rconn *c)
{
	struct rtarget *t = c->t;
	int d = rc_dev_index(tp, c->id->verbs);

	if (d < 0) {
		target_fail(t, "the route goes through device %s, which this context did not open",
			    rc_dev_name(c->id->verbs));
		return -ENODEV;
	}
	c->memlen = (size_t)c->depth * c->bufsz + CW_SLOTS * sizeof(uint64_t);
	c->mem = aligned_alloc(4096, (c->memlen + 4095) & ~(size_t)4095);
	if (!c->mem) {
		target_fail(t, "out of memory for %u buffers of %u bytes", c->depth, c->bufsz);
		return -ENOMEM;
	}
	memset(c->mem, 0, c->memlen);
	c->cw = (uint64_t *)(c->mem + (size_t)c->depth * c->bufsz);
	c->mr = rc_reg_mr(tp->dev[d].pd, c->mem, c->memlen,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "receive buffers");
	if (!c->mr) {
		target_fail(t, "%s", flit_errmsg());
		return -ENOMEM;
	}
	c->cq = ibv_create_cq(c->id->verbs, (int)(c->depth + RX_SQ), NULL, NULL, 0);
	if (!c->cq) {
		target_fail(t, "cannot create a completion queue: %s", strerror(errno));
		return -errno;
	}
	for (uint32_t inl = 64;; inl = 0) {
		struct ibv_qp_init_attr qa = {
			.send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = RX_SQ, .max_recv_wr = c->depth, .max_send_sge = 1,
				 .max_recv_sge = 1, .max_inline_data = inl },
		};
		if (rdma_create_qp(c->id, tp->dev[d].pd, &qa) == 0) {
			c->qp = c->id->qp;
			c->inl = qa.cap.max_inline_data < inl ? qa.cap.max_inline_data : inl;
			break;
		}
		if (!inl) {
			target_fail(t, "cannot create a queue pair: %s", strerror(errno));
			return -errno;
		}
	}
	for (uint32_t i = 0; i < c->depth; i++) {
		int err = post_recv(c, i);
		if (err) {
			target_fail(t, "cannot post receive buffers: %s", strerror(-err));
			return err;
		}
	}
	/* late join: asked for, and how old our oldest subscriber of the topic
	 * is (the source starts an older one at its first message) */
	bool late = flit_ctx_join_mode(tp->ctx, t->topic, 0) == FLIT_JOIN_LATE;
	uint64_t since = flit_ctx_sub_since(tp->ctx, t->topic), rt = flit_realtime_now();
	uint64_t age_ms = since && rt > since ? (rt - since) / 1000000u : 0;
	struct flit_rdma_req rq = {
		.flags = FLIT_RDMA_REQF_RING | (late ? FLIT_RDMA_REQF_LATE : 0) |
			 (t->anew ? FLIT_RDMA_REQF_ANEW : 0),
		.domain = tp->domain, .topic_hash = t->hash,
		.depth = c->depth, .buf_size = c->bufsz,
		.ring_addr = (uintptr_t)c->mem, .ring_rkey = c->mr->rkey,
		.sub_age_ms = age_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)age_ms,
		.rcv_id = tp->rcv_id,
	};
	uint8_t pd[FLIT_RDMA_REQ_LEN];
	flit_rdma_req_encode(pd, &rq);
	struct rdma_conn_param cp = {
		.private_data = pd, .private_data_len = sizeof(pd),
		.responder_resources = 0, .initiator_depth = 0,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	if (rdma_connect(c->id, &cp)) {
		target_fail(t, "cannot connect: %s", strerror(errno));
		return -errno;
	}
	c->state = RC_CONNECTING;
	return 0;
}

/* Write the credit counter (buffers freed) into the source's memory. */
static void credit_write(struct rconn *c, bool force)
{
	if (c->state != RC_UP || (!force && c->freed == c->written))
		return;
	if (c->cw_posted - c->cw_done >= RX_SQ - 8)
		return; /* completions pending: the next poll retries */
	uint64_t *w = &c->cw[c->cw_posted % CW_SLOTS];
	*w = htole64(c->freed);
	struct ibv_sge sge = { .addr = (uintptr_t)w, .length = 8, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = WRID_SEND | (c->cw_posted + 1), .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = (c->inl >= 8 ? IBV_SEND_INLINE : 0) |
			      ((c->cw_posted + 1) % 8 == 0 ? IBV_SEND_SIGNALED : 0),
		.wr.rdma = { .remote_addr = c->credit_addr, .rkey = c->credit_rkey },
	}, *bad;
	int r = ibv_post_send(c->qp, &wr, &bad);
	if (r) {
		flit_info("%s: credit write failed: %s", c->name, strerror(r));
		c->broken = true;
		return;
	}
	c->cw_posted++;
	c->written = c->freed;
	c->last_write = c->tp->now;
}

/* A topic of connection c's session ended: the targets of that name leave
 * it (the topic may come back elsewhere: they look again, after their
 * retry delay). */
static struct rtarget *target_find(struct flit_tp *tp, const char *topic,
				   const struct sockaddr_in *sa);

static void topic_ended(struct flit_tp *tp, struct rconn *c, const char *name, uint64_t now)
{
	/* the target of that name at this listener (a hash lookup: a
	 * session of 100,000 topics may end many); one that reached the
	 * session at another address finds out by its check (housekeeping) */
	struct rtarget *t = target_find(tp, name, &c->sa);
	if (t && t->c == c) {
		target_detach(tp, t);
		t->delay_ms = t->retry_ms;
		target_retry(t, now);
	}
	if (!c->refs)
		c->broken = true; /* nothing of it is wanted any more */
}

/* INFO from the source: the first starts the session (BOS for each wanted
 * topic it names); pages name more topics (a session of several), ENDED
 * ends topics (EOS). */
static int on_info(struct flit_tp *tp, struct rconn *c, const uint8_t *p,
		   const struct flit_frame_hdr *h)
{
	struct flit_ctl_info in;
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	char name[FLIT_TOPIC_MAX + 1];
	bool ended = h->flags & FLIT_INFOF_ENDED, first = !c->rs;
	int ev = 0, want = 0;

	flit_ctl_info_get(p, &in);
	if (in.domain != tp->domain || h->session_id != c->session || (first && (ended || !h->count))) {
		flit_ctx_rx_counters(tp->ctx)->malformed++;
		c->broken = true;
		return 0;
	}
	if (first) {
		c->rs = flit_rx_session_new(tp->ctx, h->session_id, c->name);
		if (!c->rs) {
			c->broken = true;
			return 0;
		}
		if (c->late)
			flit_rx_session_late_join(c->rs, h->seq, h->seq + c->late);
		else
			flit_rx_session_start(c->rs, h->seq);
	}
	if (h->flags & FLIT_INFOF_PAGE)
		c->paged = true;
	flit_ctl_names_init(&it, p, h);
	for (unsigned i = 0; flit_ctl_names_next(&it, &nm); i++) {
		memcpy(name, nm.name, nm.len);
		name[nm.len] = '\0';
		if (nm.idx > UINT16_MAX || (!(h->flags & (FLIT_INFOF_PAGE | FLIT_INFOF_ENDED)) && nm.idx >= h->count))
			continue;
		if (ended) {
			uint64_t final = (h->flags & FLIT_INFOF_FINAL) ? flit_ctl_info_final(p, h, i) : UINT64_MAX;
			ev += flit_rx_session_topic_end(c->rs, nm.idx, 0, final);
			topic_ended(tp, c, name, tp->now);
			continue;
		}
		int n = flit_rx_session_topic(c->rs, nm.idx, name);
		conn_name_add(c, flit_rdma_topic_hash(name), nm.idx);
		want += n > 0 ? n : 0;
		ev += n > 0 ? n : 0;
	}
	/* each topic's number at the INFO's seq, when the session is there
	 * (named first: the second topic named makes the session count each
	 * topic on its own) */
	if ((h->flags & FLIT_INFOF_NEXT) && c->rs->next_seq == h->seq) {
		flit_ctl_names_init(&it, p, h);
		for (unsigned i = 0; flit_ctl_names_next(&it, &nm); i++)
			if (nm.idx <= UINT16_MAX)
				flit_rx_session_topic_from(c->rs, nm.idx, flit_ctl_info_final(p, h, i));
	}
	if (!first)
		return ev;
	if (!want && !c->paged) {
		flit_info("%s: session %08x has no topic we want; leaving", c->name, h->session_id);
		c->broken = true;
	} else {
		flit_info("%s: joined session %08x (%s%s) at #%llu", c->name, h->session_id,
			  c->t ? c->t->topic : "?", c->paged ? ", in pages" : "", (unsigned long long)h->seq);
		for (struct rtarget *t = tp->targets; t; t = t->next)
			if (t->c == c) {
				t->delay_ms = t->retry_ms;
				t->why = 0;
				t->anew = false;
			}
	}
	return ev;
}

/* One received frame in buffer `slot`. */
static int rx_frame(struct flit_tp *tp, struct rconn *c, const uint8_t *p, uint32_t len,
		    flit_frame_fn fn, void *arg)
{
	struct flit_counters *ctr = flit_ctx_rx_counters(tp->ctx);
	struct flit_frame_hdr h;

	if (FLIT_UNLIKELY(len < FLIT_FRAME_HDR_LEN || flit_ld16(p) != FLIT_WIRE_MAGIC)) {
		ctr->foreign_dropped++;
		return 0;
	}
	if (FLIT_LIKELY(p[3] == FLIT_FT_DATA)) {
		if (FLIT_UNLIKELY(!c->rs)) {
			ctr->unknown_session++;
			return 0;
		}
		int n = fn(arg, c->rs, p, len);
		return n > 0 ? n : 0;
	}
	if (flit_ctl_check(p, len, &h) != FLIT_FE_OK || h.session_id != c->session) {
		ctr->malformed++;
		return 0;
	}
	if (h.type == FLIT_FT_INFO)
		return on_info(tp, c, p, &h);
	if (h.type == FLIT_FT_HB && (h.flags & FLIT_HBF_END) && c->rs) {
		c->ended = true;
		int ev = flit_rx_session_end(c->rs, 0);
		c->rs = NULL;
		return ev;
	}
	return 0;
}

/* Poll one connection's completions, delivering up to `limit` messages
 * (all of them when limit < 0). */
static int rconn_poll(struct flit_tp *tp, struct rconn *c, int limit, flit_frame_fn fn, void *arg)
{
	struct ibv_wc wc[RX_BATCH];
	int total = 0;

	while (limit < 0 || total < limit) {
		int want = RX_BATCH;
		if (limit >= 0 && limit - total < want)
			want = limit - total;
		int n = ibv_poll_cq(c->cq, want, wc);
		if (n <= 0) {
			if (n < 0)
				c->broken = true;
			break;
		}
		for (int i = 0; i < n; i++) {
			struct ibv_wc *w = &wc[i];
			if (FLIT_UNLIKELY(w->status != IBV_WC_SUCCESS)) {
				if (!c->broken && w->status != IBV_WC_WR_FLUSH_ERR)
					flit_info("%s: %s", c->name, ibv_wc_status_str(w->status));
				c->broken = true;
				continue;
			}
			if (w->wr_id & WRID_SEND) {
				c->cw_done = w->wr_id & ~WRID_SEND;
				continue;
			}
			uint32_t slot = (uint32_t)(c->received % c->depth);
			uint32_t len = w->opcode == IBV_WC_RECV_RDMA_WITH_IMM ? ntohl(w->imm_data) : w->byte_len;
			if (FLIT_UNLIKELY(w->wr_id != slot || len > c->bufsz || c->bad)) {
				if (!c->bad)
					flit_warn("%s: a frame of %u bytes in buffer %llu, expected buffer %u "
						  "of %u bytes: protocol error, disconnecting", c->name, len,
						  (unsigned long long)w->wr_id, slot, c->bufsz);
				c->bad = c->broken = true;
				continue;
			}
			c->received++;
			total += rx_frame(tp, c, c->mem + (size_t)slot * c->bufsz, len, fn, arg);
			if (FLIT_UNLIKELY(post_recv(c, slot))) {
				c->broken = true;
				continue;
			}
			c->freed++;
			if (c->freed - c->written >= c->depth / 4)
				credit_write(c, false);
		}
		if (n < want)
			break;
	}
	return total;
}

static int rconn_down(struct flit_tp *tp, struct rconn *c, uint64_t now)
{
	int ev = 0;

	if (c->state == RC_UP && c->cq && !c->merged)
		ev += rconn_poll(tp, c, -1, flit_rx_frame, tp->ctx);
	if (c->rs && !c->refs) {
		/* nobody wants it any more (a topic moved away): quietly */
		flit_rx_session_end(c->rs, 0);
		c->rs = NULL;
	}
	if (c->rs) {
		flit_info("%s: session %08x ended: the source is gone", c->name, c->session);
		ev += flit_rx_session_end(c->rs, FLIT_MSGF_SOURCE_DIED);
		c->rs = NULL;
	}
	for (struct rtarget *t = tp->targets; t; t = t->next)
		if (t->c == c)
			target_retry(t, now);
	rconn_free(tp, c);
	return ev;
}

/* The connection's established: the source's answer. */
static void rconn_up(struct flit_tp *tp, struct rconn *c, const void *pd, size_t pdlen, uint64_t now)
{
	struct flit_rdma_rep rep;

	if (flit_rdma_rep_decode(pd, pdlen, &rep) || rep.depth != c->depth || rep.frame_max > c->bufsz) {
		if (c->t)
			target_fail(c->t, "the source's accept message is not one we understand");
		c->broken = true;
		return;
	}
	c->mode = rep.mode;
	c->session = rep.session_id;
	c->credit_addr = rep.credit_addr;
	c->credit_rkey = rep.credit_rkey;
	c->frame_max = rep.frame_max;
	c->late = rep.late;
	c->state = RC_UP;
	c->last_write = now;
	tp->nup++;
	/* a second connection to a session we have one to (its target did
	 * not know, by name or by resolution): its targets take that one */
	for (struct rconn *o = tp->rconns; o; o = o->next) {
		if (o == c || o->state != RC_UP || o->broken || o->merged || o->session != c->session)
			continue;
		for (struct rtarget *t = tp->targets; t; t = t->next)
			if (t->c == c) {
				target_detach(tp, t);
				target_attach(o, t);
				t->attached = now;
				t->delay_ms = t->retry_ms;
				t->why = 0;
			}
		flit_debug("%s: session %08x again: its topics share the connection there", c->name,
			   c->session);
		c->merged = c->broken = true;
		return;
	}
}

static const char *cm_status(const struct rdma_cm_event *ev, char *buf, size_t n)
{
	int st = ev->status;

	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		struct flit_rdma_rej_msg m;
		if (ev->param.conn.private_data &&
		    flit_rdma_rej_decode(ev->param.conn.private_data, ev->param.conn.private_data_len, &m) == 0) {
			if (m.reason == FLIT_RDMA_REJ_FRAME)
				snprintf(buf, n, "refused: the source's frames are up to %u bytes, our buffers %s "
					 "(raise receiver.rdma.frame_max)", m.value, "smaller");
			else if (m.reason == FLIT_RDMA_REJ_RESOURCES)
				snprintf(buf, n, "refused: the source could not set the connection up (%s)",
					 strerror((int)m.value));
			else
				snprintf(buf, n, "refused: %s", flit_rdma_rej_str(m.reason));
			return buf;
		}
		/* IB CM reason 8: invalid service id, nobody listens there */
		if (st == 8)
			snprintf(buf, n, "no listener at that address and port (connection refused)");
		else
			snprintf(buf, n, "connection rejected (IB CM reason %d)", st);
		return buf;
	}
	const char *what;
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_ERROR: what = "cannot resolve the address (not reachable through an RDMA device?)"; break;
	case RDMA_CM_EVENT_ROUTE_ERROR: what = "cannot resolve the route"; break;
	case RDMA_CM_EVENT_UNREACHABLE: what = "unreachable"; break;
	case RDMA_CM_EVENT_CONNECT_ERROR: what = "connection failed"; break;
	default: what = rdma_event_str(ev->event); break;
	}
	snprintf(buf, n, "%s%s%s", what, st ? ": " : "", st ? strerror(st < 0 ? -st : st) : "");
	return buf;
}

/* The source refused connection c: this context has (or is setting up) a
 * connection to the session of c's topic.  Its targets take that one, or
 * look again at the next housekeeping (it is still on its way). */
static void same_session(struct flit_tp *tp, struct rconn *c, uint32_t session, uint64_t now)
{
	struct rconn *o = NULL, *pending = NULL;

	/* by the session alone: the source context may be reached at two
	 * addresses (a static map and resolution), its session is one */
	for (o = tp->rconns; o; o = o->next) {
		if (o == c || o->broken || o->merged)
			continue;
		if (o->state == RC_UP && o->session == session)
			break;
		if (o->state != RC_UP && same_ep(&o->sa, &c->sa))
			pending = o; /* may be that session: its accept tells */
	}
	for (struct rtarget *t = tp->targets; t; t = t->next)
		if (t->c == c) {
			target_detach(tp, t);
			t->session = session;
			if (o) {
				target_attach(o, t);
				t->attached = now;
			} else if (pending) {
				t->retry_at = now; /* the next housekeeping looks again */
			} else {
				/* the source counts a connection of ours to that
				 * session that we do not have (gone, its end not
				 * seen there): ask anew, the source drops it */
				target_fail(t, "the source holds a connection of ours to session %08x that we "
					    "no longer have: asking it to drop that one", session);
				t->anew = true;
				target_retry(t, now);
			}
		}
	c->merged = c->broken = true;
	tp->next_house = 0;
}

/* rdma_cm events of the receive side. */
static int rx_cm_events(struct flit_tp *tp, uint64_t now)
{
	struct rdma_cm_event *ev;
	int events = 0;

	while (rdma_get_cm_event(tp->rch, &ev) == 0) {
		struct rconn *c = ev->id->context;
		enum rdma_cm_event_type type = ev->event;
		uint8_t pd[64];
		size_t pdlen = 0;
		char why[160];

		if (ev->param.conn.private_data && (type == RDMA_CM_EVENT_ESTABLISHED)) {
			pdlen = ev->param.conn.private_data_len < sizeof(pd) ?
				ev->param.conn.private_data_len : sizeof(pd);
			memcpy(pd, ev->param.conn.private_data, pdlen);
		}
		struct flit_rdma_rej_msg rej = { 0 };
		if (type == RDMA_CM_EVENT_REJECTED && ev->param.conn.private_data &&
		    flit_rdma_rej_decode(ev->param.conn.private_data, ev->param.conn.private_data_len, &rej))
			rej.reason = 0;
		cm_status(ev, why, sizeof(why));
		rdma_ack_cm_event(ev);
		if (!c)
			continue;
		if (type == RDMA_CM_EVENT_REJECTED && rej.reason == FLIT_RDMA_REJ_SESSION) {
			same_session(tp, c, rej.value, now);
			continue;
		}
		switch (type) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(c->id, CM_TIMEOUT_MS)) {
				if (c->t)
					target_fail(c->t, "cannot resolve the route: %s", strerror(errno));
				c->broken = true;
			} else {
				c->state = RC_ROUTE;
			}
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			if (!c->t || rconn_connect(tp, c))
				c->broken = true;
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c->t)
				rconn_up(tp, c, pd, pdlen, now);
			else
				c->broken = true;
			break;
		case RDMA_CM_EVENT_ADDR_ERROR:
		case RDMA_CM_EVENT_ROUTE_ERROR:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (c->t)
				target_fail(c->t, "%s", why);
			c->broken = true;
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			flit_debug("%s: %s", c->name, why);
			c->broken = true;
			break;
		default:
			break;
		}
	}
	for (struct rconn *c = tp->rconns, *next; c; c = next) {
		next = c->next;
		if (c->broken)
			events += rconn_down(tp, c, now);
	}
	return events;
}

/* ---- receive side: targets --------------------------------------------------- */

struct tbuild { struct flit_tp *tp; };

static struct rtarget *target_find(struct flit_tp *tp, const char *topic,
				   const struct sockaddr_in *sa);
static struct rtarget *target_new(struct flit_tp *tp, const char *topic,
				  const struct sockaddr_in *sa, const struct flit_cfg_receiver *rc);

static int target_add(void *arg, const char *topic, bool pattern, const struct flit_cfg_receiver *rc)
{
	struct flit_tp *tp = ((struct tbuild *)arg)->tp;
	struct sockaddr_in sa;
	struct rtarget *t;

	if (!rc->rdma_static[0])
		return 0;
	if (pattern) {
		if (!tp->pattern_warned)
			flit_warn("rdma: receiver.rdma.static applies to exact topics; pattern subscription "
				  "'%s' finds rdma sources through the resolver channel only", topic);
		tp->pattern_warned = true;
		return 0;
	}
	flit_ep_parse(rc->rdma_static, &sa);
	if ((t = target_find(tp, topic, &sa))) {
		/* the subscribers' settings now (one may have gone, another
		 * come): for its next connection */
		t->mark = true;
		t->depth = rc->rdma_depth;
		t->bufsz = (rc->rdma_frame_max + 63) & ~63u;
		if (t->retry_ms != rc->rdma_retry_ms)
			t->retry_ms = t->delay_ms = rc->rdma_retry_ms;
		return 0;
	}
	target_new(tp, topic, &sa, rc);
	return 0;
}

static inline unsigned target_slot(const struct flit_tp *tp, uint64_t h, const struct sockaddr_in *sa)
{
	h ^= ((uint64_t)sa->sin_addr.s_addr << 16 | sa->sin_port) * 0x9e3779b97f4a7c15ull;
	return (unsigned)(h >> 32) & (tp->thcap - 1);
}

/* The target of topic at sa (a hash of them: thousands of exact topics). */
static struct rtarget *target_find(struct flit_tp *tp, const char *topic,
				   const struct sockaddr_in *sa)
{
	uint64_t h = flit_rdma_topic_hash(topic);

	if (!tp->thcap)
		return NULL;
	for (struct rtarget *t = tp->thash[target_slot(tp, h, sa)]; t; t = t->hnext)
		if (t->hash == h && !strcmp(t->topic, topic) && same_ep(&t->sa, sa))
			return t;
	return NULL;
}

/* Target t into the hash (growing it), or out of it. */
static bool target_hash_add(struct flit_tp *tp, struct rtarget *t)
{
	if (tp->ntargets + 1 > tp->thcap) {
		unsigned cap = tp->thcap ? tp->thcap * 2 : 64;
		struct rtarget **v = calloc(cap, sizeof(*v));
		if (!v)
			return false;
		free(tp->thash);
		tp->thash = v;
		tp->thcap = cap;
		for (struct rtarget *o = tp->targets; o; o = o->next) {
			unsigned j = target_slot(tp, o->hash, &o->sa);
			o->hnext = v[j];
			v[j] = o;
		}
	}
	unsigned j = target_slot(tp, t->hash, &t->sa);
	t->hnext = tp->thash[j];
	tp->thash[j] = t;
	tp->ntargets++;
	return true;
}

static void target_hash_del(struct flit_tp *tp, struct rtarget *t)
{
	for (struct rtarget **pp = &tp->thash[target_slot(tp, t->hash, &t->sa)]; *pp; pp = &(*pp)->hnext)
		if (*pp == t) {
			*pp = t->hnext;
			tp->ntargets--;
			return;
		}
}

/* A new target, connected at the next housekeeping. */
static struct rtarget *target_new(struct flit_tp *tp, const char *topic,
				  const struct sockaddr_in *sa, const struct flit_cfg_receiver *rc)
{
	struct rtarget *t = calloc(1, sizeof(*t) + strlen(topic) + 1);

	if (!t)
		return NULL;
	t->sa = *sa;
	flit_ep_str(sa, t->ep, sizeof(t->ep));
	strcpy(t->topic, topic);
	t->hash = flit_rdma_topic_hash(topic);
	t->depth = rc->rdma_depth;
	t->bufsz = (rc->rdma_frame_max + 63) & ~63u;
	t->retry_ms = rc->rdma_retry_ms;
	t->delay_ms = t->retry_ms;
	t->retry_at = 0; /* now */
	t->mark = true;
	if (!target_hash_add(tp, t)) {
		free(t);
		return NULL;
	}
	t->next = tp->targets;
	tp->targets = t;
	tp->next_house = 0; /* connect soon */
	return t;
}

/* Unlink and free *pp, closing its connection (EOS only to subscribers
 * that still want it: none, when the subscriptions went). */
static void target_drop(struct flit_tp *tp, struct rtarget **pp)
{
	struct rtarget *t = *pp;

	*pp = t->next;
	target_hash_del(tp, t);
	struct rconn *c = target_detach(tp, t);
	if (c && !c->refs) {
		/* no topic of its session is wanted any more */
		if (c->rs)
			flit_rx_session_end(c->rs, 0);
		c->rs = NULL;
		rconn_free(tp, c);
	}
	free(t);
}

/* Resolution (the context's udp transport heard an rdma source's INFO for
 * a topic a subscriber wants): connect to it, or note that it is alive. */
void rdma_res_found(struct flit_tp *tp, const struct flit_res_ad *ad)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(ad->port),
				  .sin_addr.s_addr = ad->addr };
	struct flit_cfg_receiver rc;
	struct rtarget *t;

	if (ad->mode != FLIT_MODE_RDMA || !ad->port || !ad->addr)
		return;
	if (!(t = target_find(tp, ad->topic, &sa))) {
		flit_ctx_rcv_cfg(tp->ctx, ad->topic, &rc);
		if (!(t = target_new(tp, ad->topic, &sa, &rc)))
			return;
		t->resolved = true;
		flit_info("rdma: '%s': source session %08x at %s, found by resolution", t->topic,
			  ad->session, t->ep);
	}
	t->heard = mono();
	t->session = ad->session;
	if (t->c && t->c->state == RC_UP && t->c->session != ad->session) {
		/* the topic moved to another session of that context: there */
		struct rconn *c = target_detach(tp, t);
		flit_info("rdma: '%s': now in session %08x at %s", t->topic, ad->session, t->ep);
		if (!c->refs)
			c->broken = true;
		t->retry_at = 0;
		tp->next_house = 0;
	}
}

/* Targets follow the subscriptions: new ones connect at the next poll,
 * gone ones are closed (EOS to nobody: no subscriber wants them). */
static void rebind(struct flit_tp *tp)
{
	struct tbuild b = { .tp = tp };

	for (struct rtarget *t = tp->targets; t; t = t->next)
		t->mark = t->resolved && flit_ctx_wants(tp->ctx, t->topic);
	flit_ctx_each_sub(tp->ctx, target_add, &b);
	for (struct rtarget **pp = &tp->targets; *pp;) {
		if ((*pp)->mark)
			pp = &(*pp)->next;
		else
			target_drop(tp, pp);
	}
	tp->dirty = false;
	tp->next_house = 0; /* connect soon */
}

int rdma_subs_changed(struct flit_tp *tp)
{
	/* at the next poll: an application that subscribes to thousands of
	 * topics one after the other rebinds once */
	tp->dirty = true;
	tp->next_house = 0;
	return 0;
}

static int housekeeping(struct flit_tp *tp, uint64_t now)
{
	tp->now = now;
	int ev = rx_cm_events(tp, now);

	/* a resolved source that stopped advertising and cannot be reached
	 * is forgotten (it moved, or it is gone for good) */
	uint64_t expiry = 3 * (uint64_t)tp->cc->udp_resolver_max_ms * MS + 1000 * MS;
	for (struct rtarget **pp = &tp->targets; *pp;) {
		struct rtarget *t = *pp;
		if (t->resolved && now - t->heard > expiry && (!t->c || t->c->state != RC_UP)) {
			flit_info("rdma: '%s': source at %s no longer advertised; forgotten", t->topic, t->ep);
			target_drop(tp, pp);
		} else {
			pp = &t->next;
		}
	}
	for (struct rtarget *t = tp->targets; t; t = t->next)
		if (!t->c && now >= t->retry_at)
			rconn_start(tp, t, now);
	/* once a second: a static target on a connection whose session has
	 * not named its topic for a while (it ended as the target took the
	 * connection) looks again: the topic may be in another session */
	if (now >= tp->next_check) {
		tp->next_check = now + 1000 * MS;
		for (struct rtarget *t = tp->targets; t; t = t->next) {
			struct rconn *c = t->c;
			if (!c || t->resolved || c->state != RC_UP || !c->rs || now - t->attached < 2000 * MS ||
			    conn_names(c, t->topic, t->hash))
				continue;
			flit_debug("%s: '%s' is not in session %08x: looking again", c->name, t->topic, c->session);
			target_detach(tp, t);
			t->session = 0;
			target_retry(t, now);
			if (!c->refs)
				c->broken = true;
		}
	}
	/* credits of a stream that stopped (a running one returns them every
	 * depth/4 frames), and the keepalive */
	for (struct rconn *c = tp->rconns; c; c = c->next) {
		if (c->state == RC_UP &&
		    ((c->freed != c->written && c->received == c->rx_seen) ||
		     now - c->last_write >= KEEPALIVE_NS))
			credit_write(c, true);
		c->rx_seen = c->received;
	}
	tp->next_house = now + HOUSE_NS;
	return ev;
}

int rdma_poll(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg)
{
	int total = 0;

	if (FLIT_UNLIKELY(tp->dirty))
		rebind(tp);
	tp->in_poll = true;
	/* from where the last poll's limit stopped (a busy connection must
	 * not keep the others' frames and credit returns waiting) */
	struct rconn *start = tp->rr ? tp->rr : tp->rconns;
	tp->rr = NULL;
	for (struct rconn *c = start; c && total < limit;) {
		if (FLIT_LIKELY(c->state == RC_UP && !c->merged)) {
			total += rconn_poll(tp, c, limit - total, fn, arg);
			if (total >= limit) {
				tp->rr = c->next;
				break;
			}
		}
		c = c->next ? c->next : tp->rconns;
		if (c == start)
			break;
	}
	/* timers: a clock read every IDLE_POLLS polls */
	if (FLIT_UNLIKELY(++tp->idle >= (tp->nup ? IDLE_POLLS : IDLE_POLLS_CONNECTING))) {
		tp->idle = 0;
		uint64_t now = mono();
		if (now >= tp->next_house)
			total += housekeeping(tp, now);
	}
	for (struct rconn *c = tp->rconns, *next; c; c = next) {
		next = c->next;
		if (FLIT_UNLIKELY(c->broken) && c->state == RC_UP)
			total += rconn_down(tp, c, mono());
	}
	tp->in_poll = false;
	if (FLIT_UNLIKELY(tp->dirty))
		rebind(tp);
	return total;
}

/* The context closes: every connection and target goes (EOS to the
 * subscribers still there). */
void rc_rx_close(struct flit_tp *tp)
{
	while (tp->rconns) {
		struct rconn *c = tp->rconns;
		if (c->rs)
			flit_rx_session_end(c->rs, 0);
		c->rs = NULL;
		rconn_free(tp, c);
	}
	while (tp->targets) {
		struct rtarget *t = tp->targets;
		tp->targets = t->next;
		free(t);
	}
	free(tp->thash);
	tp->thash = NULL;
	tp->thcap = tp->ntargets = 0;
}
