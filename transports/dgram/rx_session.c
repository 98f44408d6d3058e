// SPDX-License-Identifier: BSD-2-Clause
/*
 * The receive side's remote sessions: binding a session a subscriber
 * wants, late join, INFO and the other control frames, and each datagram's
 * way to the reliability layer (userspace/rel.h) and the core.
 * (session.h: the state and the shared functions.)
 */
#include "dgram/session.h"

/* ---- receive side: sessions ------------------------------------------------ */

struct rsess *dg_sess_find(struct flit_tp *tp, uint32_t id)
{
	if (tp->last && tp->last->id == id)
		return tp->last;
	for (struct rsess *s = tp->sess; s; s = s->next)
		if (s->id == id)
			return tp->last = s;
	return NULL;
}

bool dg_sess_wanted(const struct rsess *s)
{
	for (unsigned i = 0; i < s->ntopics; i++)
		if (flit_ctx_wants(s->tp->ctx, s->tname[i]))
			return true;
	return false;
}

static int rel_deliver(void *arg, const void *frame, size_t len)
{
	struct rsess *s = arg;
	if (frame == s->cur) {
		s->core->frame_ts = s->cur_ts;
		s->core->frame_ts_flags = s->cur_ts_flags;
	} else {
		s->core->frame_ts = 0;
	}
	int n = flit_rx_frame(s->tp->ctx, s->core, frame, len);
	s->core->frame_ts = 0;
	return n < 0 ? 0 : n;
}

static int rel_loss(void *arg, uint64_t first, uint64_t n)
{
	struct rsess *s = arg;
	int ev = flit_rx_session_loss(s->core, first, n);
	if (s->core->next_seq < first + n)
		s->core->next_seq = first + n;
	s->core->started = true;
	return ev;
}

static int rel_skip(void *arg, uint64_t first, uint64_t n)
{
	struct rsess *s = arg;
	return flit_rx_session_skip(s->core, first, n);
}

void dg_send_join(struct rsess *s, uint16_t flags)
{
	struct flit_tp *tp = s->tp;
	size_t n = flit_ctl_join_encode(tp->ctl, sizeof(tp->ctl), s->id, tp->domain, flags);
	dg_rx_send(tp, tp->ctl, n, &s->ctl);
}

int dg_sess_bind(struct rsess *s, uint64_t next, bool start_known, uint64_t now)
{
	struct flit_tp *tp = s->tp;
	struct flit_cfg_receiver rc;
	char src[64], e[48];
	int err;

	flit_ctx_rcv_cfg(tp->ctx, s->tname[0], &rc);
	for (unsigned i = 0; i < s->ntopics; i++)
		if (flit_ctx_wants(tp->ctx, s->tname[i])) {
			flit_ctx_rcv_cfg(tp->ctx, s->tname[i], &rc);
			break;
		}
	struct flit_rel_rx_cfg relc = {
		.nak_backoff_ns = rc.udp_nak_backoff_us * US,
		.nak_interval_ns = rc.udp_nak_interval_ms * MS,
		.nak_timeout_ns = rc.udp_nak_timeout_ms * MS,
		.reorder_bytes = rc.udp_reorder,
	};
	s->timeout_ns = rc.udp_session_timeout_ms * MS;
	if (s->mode == FLIT_MODE_MCAST) {
		s->sock = dg_rsock_get(tp, s->group, s->port);
		if (!s->sock)
			return -errno;
	}
	err = flit_rel_rx_new(&relc, rng_next(&tp->rng) ^ s->id, rel_deliver, rel_loss, s, &s->rel);
	if (err)
		goto fail;
	flit_rel_rx_on_skip(s->rel, rel_skip);
	/* named by the transport that receives it (the wire is the same),
	 * so an application can tell which path delivered */
	snprintf(src, sizeof(src), "%s:%s", tp->xp ? "xdp" : tp->ud_mode ? "rdma-mc" : "udp", flit_ep_str(&s->ctl, e, sizeof(e)));
	s->core = flit_rx_session_new(tp->ctx, s->id, src);
	if (!s->core) {
		err = -errno;
		goto fail;
	}
	for (unsigned i = 0; i < s->ntopics; i++)
		flit_rx_session_topic(s->core, s->tidx[i], s->tname[i]);
	if (start_known) {
		/* ask the source where to start (late join, or from its first
		 * message for a subscriber older than it); meanwhile nothing
		 * is taken, and INFO's seq is where to start if it never says */
		s->lj_wait = true;
		s->lj_tries = 1;
		s->lj_at = now + LATE_WAIT_NS;
		s->lj_fallback = next;
		tp->lj_waiting++;
		if (s->lj_at < tp->next_house)
			tp->next_house = s->lj_at;
		dg_send_join(s, FLIT_JF_LATE);
	} else {
		dg_send_join(s, 0);
	}
	s->next_join = now + JOIN_NS;
	s->last_heard = now;
	if (s->mode == FLIT_MODE_UNICAST)
		tp->want_ucast_every_poll = true;
	flit_info("udp: joined session %08x (%s) from %s", s->id, s->tname[0], src);
	return 0;
fail:
	flit_rel_rx_free(s->rel);
	s->rel = NULL;
	dg_rsock_put(tp, s->sock);
	s->sock = NULL;
	return err;
}

static void held_free(struct rsess *s)
{
	if (!s->held && !s->nexts)
		return;
	for (unsigned i = 0; i < s->nheld; i++)
		free(s->held[i].f);
	free(s->held);
	s->held = NULL;
	s->nheld = s->capheld = 0;
	s->held_bytes = 0;
	free(s->nexts);
	s->nexts = NULL;
	s->nnexts = s->capnexts = 0;
}

/* Keep a datagram that came before the session started (copied; beyond
 * HELD_MAX_BYTES it is dropped: NAKs repair it once started). */
static void held_add(struct rsess *s, const uint8_t *p, const struct flit_frame_hdr *h)
{
	if (s->held_bytes + h->len > HELD_MAX_BYTES)
		return;
	if (s->nheld == s->capheld) {
		unsigned cap = s->capheld ? 2 * s->capheld : 16;
		struct held *n = realloc(s->held, cap * sizeof(*n));
		if (!n)
			return;
		s->held = n;
		s->capheld = cap;
	}
	uint8_t *f = malloc(h->len);
	if (!f)
		return;
	memcpy(f, p, h->len);
	s->held[s->nheld++] = (struct held){ f, h->len, h->count, h->seq };
	s->held_bytes += h->len;
}

static int sess_start_at(struct rsess *s, uint64_t start, const char *how,
			 const struct flit_ctl_late *late, uint64_t next);

/* Start the session: where the source's answer to our JOIN with
 * FLIT_JF_LATE says (late, non-NULL; next: its live start), or where INFO
 * said when it never came.  Returns the events delivered (the data that
 * came meanwhile, held until now). */
int dg_sess_start(struct rsess *s, const struct flit_ctl_late *late, uint64_t next)
{
	struct flit_tp *tp = s->tp;
	uint64_t start = s->lj_fallback;
	const char *how = "live";

	s->lj_wait = false;
	tp->lj_waiting--;
	if (late) {
		uint64_t rt = flit_realtime_now();
		uint64_t born = late->age_ns < rt ? rt - late->age_ns : 0;
		enum flit_join jm = FLIT_JOIN_LIVE;
		for (unsigned i = 0; i < s->ntopics && jm == FLIT_JOIN_LIVE; i++)
			if (flit_ctx_wants(tp->ctx, s->tname[i]))
				jm = flit_ctx_join_mode(tp->ctx, s->tname[i], born);
		if (jm == FLIT_JOIN_FIRST) {
			/* from the source's first message: what it no longer
			 * retains is lost (NAK, then GONE) */
			start = late->origin;
			how = "first";
		} else if (jm == FLIT_JOIN_LATE && late->late_join) {
			uint64_t want = next - late->origin > late->late_join ?
					next - late->late_join : late->origin;
			start = want > late->trail ? want : late->trail;
			flit_rx_session_late_join(s->core, start, next);
			flit_info("udp: session %08x: late join from %llu, live from %llu", s->id,
				  (unsigned long long)start, (unsigned long long)next);
			return sess_start_at(s, start, "late join", late, next);
		} else if (start > next) {
			start = next;
		}
	}
	flit_rx_session_start(s->core, start);
	return sess_start_at(s, start, how, late, next);
}

/* Start the reliability layer at `start` and hand it what came meanwhile:
 * the events delivered. */
static int sess_start_at(struct rsess *s, uint64_t start, const char *how,
			 const struct flit_ctl_late *late, uint64_t next)
{
	uint64_t now = mono();
	int ev = 0;

	flit_rel_rx_start(s->rel, start);
	flit_debug("udp: session %08x starts at %llu (%s), %u datagrams held", s->id,
		   (unsigned long long)start, how, s->nheld);
	/* the pages' numbers at where we start: each topic's from there */
	for (unsigned i = 0; i < s->nnexts && s->core; i++)
		if (s->nexts[i].seq == start)
			flit_rx_session_topic_from(s->core, s->nexts[i].idx, s->nexts[i].num);
	for (unsigned i = 0; i < s->nheld && s->core; i++) {
		int n = flit_rel_rx_data(s->rel, s->held[i].f, s->held[i].len, s->held[i].seq,
					 s->held[i].count, now);
		ev += n > 0 ? n : 0;
	}
	held_free(s);
	/* LATE said where the source is: what is missing up to there is a gap
	 * now (NAKed after the backoff), not at the next heartbeat of an idle
	 * source (up to source.udp.hb_max_ms away) */
	if (late && s->core && start < next) {
		int n = flit_rel_rx_hb(s->rel, next, late->trail, now);
		ev += n > 0 ? n : 0;
	}
	if (s->core)
		dg_part_sync(s);
	return ev;
}

int dg_sess_unbind(struct rsess *s, uint32_t flags, bool leave)
{
	int ev = 0;
	if (!s->core)
		return 0;
	if (s->lj_wait) {
		s->lj_wait = false;
		s->tp->lj_waiting--;
	}
	held_free(s);
	dg_part_end(s);
	if (leave)
		dg_send_join(s, FLIT_JF_LEAVE);
	ev = flit_rx_session_end(s->core, flags);
	s->core = NULL;
	flit_rel_rx_free(s->rel);
	s->rel = NULL;
	dg_rsock_put(s->tp, s->sock);
	s->sock = NULL;
	return ev;
}

static void sess_free_topics(struct rsess *s)
{
	for (unsigned i = 0; i < s->ntopics; i++)
		free(s->tname[i]);
	free(s->tname);
	free(s->tidx);
	free(s->pos);
	s->tname = NULL;
	s->tidx = NULL;
	s->pos = NULL;
	s->ntopics = s->captopics = s->npos = 0;
}

/* Where topic index idx is in s's list, or -1. */
static int sess_topic_find(const struct rsess *s, uint32_t idx)
{
	return idx < s->npos ? (int)s->pos[idx] - 1 : -1;
}

/* Room in s->pos for index idx (at most 65,536 slots: a page's indexes
 * are checked).  0 or -ENOMEM. */
static int sess_pos_room(struct rsess *s, uint32_t idx)
{
	if (idx < s->npos)
		return 0;
	unsigned n = s->npos ? s->npos : 16;
	while (n <= idx)
		n *= 2;
	uint32_t *v = realloc(s->pos, n * sizeof(*v));
	if (!v)
		return flit_err(ENOMEM, "udp: out of memory");
	memset(v + s->npos, 0, (n - s->npos) * sizeof(*v));
	s->pos = v;
	s->npos = n;
	return 0;
}

/* Learn topic (idx, name) of s; a bound session's subscribers that want it
 * get BOS.  A known index with another name: the name is the new one.
 * 0 or -ENOMEM. */
static int sess_topic_add(struct rsess *s, uint32_t idx, const struct flit_ctl_name *nm)
{
	int at = sess_topic_find(s, idx);

	/* every advert names the topics again: known ones cost no copy */
	if (at >= 0 && strlen(s->tname[at]) == nm->len && !memcmp(s->tname[at], nm->name, nm->len))
		return 0;
	char *n = strndup(nm->name, nm->len);
	if (!n || sess_pos_room(s, idx) < 0) {
		free(n);
		return flit_err(ENOMEM, "udp: out of memory");
	}
	if (at >= 0) {
		free(s->tname[at]);
		s->tname[at] = n;
	} else {
		if (s->ntopics == s->captopics) {
			unsigned cap = s->captopics ? s->captopics * 2 : 4;
			uint32_t *ti = realloc(s->tidx, cap * sizeof(*ti));
			if (ti)
				s->tidx = ti;
			char **tn = ti ? realloc(s->tname, cap * sizeof(*tn)) : NULL;
			if (!tn) {
				free(n);
				return flit_err(ENOMEM, "udp: out of memory");
			}
			s->tname = tn;
			s->captopics = cap;
		}
		at = (int)s->ntopics++;
		s->tidx[at] = idx;
		s->tname[at] = n;
		s->pos[idx] = (uint32_t)at + 1;
	}
	if (s->core) {
		flit_rx_session_topic(s->core, idx, s->tname[at]);
		dg_part_topic(s, idx, true);
	}
	return 0;
}

/* An INFO with FLIT_INFOF_NEXT: each topic's number of its next message
 * at the INFO's seq.  A receiver whose session is exactly there (nothing
 * delivered past it, nothing before it missing) knows those topics'
 * numbers from now on: a message of one that never comes is told as its
 * loss, in its numbers (a late joiner's first messages too). */
static void sess_info_next(struct rsess *s, const void *f, const struct flit_frame_hdr *h)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	unsigned i = 0;

	if (!(h->flags & FLIT_INFOF_NEXT) || !s->core)
		return;
	if (s->lj_wait) {
		/* not started yet (the source is asked where to): kept for
		 * where it starts (dg_sess_start) */
		flit_ctl_names_init(&it, f, h);
		for (; flit_ctl_names_next(&it, &nm); i++) {
			if (s->nnexts == s->capnexts) {
				unsigned cap = s->capnexts ? 2 * s->capnexts : 16;
				void *p = cap <= MAX_TOPICS_PER_SESS ?
					realloc(s->nexts, cap * sizeof(*s->nexts)) : NULL;
				if (!p)
					return;
				s->nexts = p;
				s->capnexts = cap;
			}
			s->nexts[s->nnexts].seq = h->seq;
			s->nexts[s->nnexts].idx = nm.idx;
			s->nexts[s->nnexts++].num = flit_ctl_info_final(f, h, i);
		}
		return;
	}
	if (!s->core->started || s->core->next_seq != h->seq)
		return;
	flit_ctl_names_init(&it, f, h);
	for (; flit_ctl_names_next(&it, &nm); i++)
		flit_rx_session_topic_from(s->core, nm.idx, flit_ctl_info_final(f, h, i));
}

/* Topic idx of s ended: its subscribers get EOS. */
static void sess_topic_end_now(struct rsess *s, uint32_t idx, uint64_t final)
{
	int at = sess_topic_find(s, idx);
	if (at < 0)
		return;
	if (s->core)
		flit_rx_session_topic_end(s->core, idx, 0, final);
	free(s->tname[at]);
	s->ntopics--;
	s->pos[idx] = 0;
	s->tidx[at] = s->tidx[s->ntopics];
	s->tname[at] = s->tname[s->ntopics];
	if ((unsigned)at < s->ntopics)
		s->pos[s->tidx[at]] = (uint32_t)at + 1;
	dg_part_topic(s, idx, false);
}

/* Topic idx of s ended (INFO ENDED) after the messages before `seq` (the
 * source's next when it ended): EOS once they are delivered (or reported
 * lost), not before a repair still on its way. */
static void sess_topic_ended(struct rsess *s, uint32_t idx, uint64_t seq, uint64_t final)
{
	if (sess_topic_find(s, idx) < 0)
		return;
	if (!s->core || !s->core->started || s->core->next_seq >= seq || s->npend_end == 16) {
		sess_topic_end_now(s, idx, final);
		return;
	}
	for (unsigned i = 0; i < s->npend_end; i++)
		if (s->pend_end[i].idx == idx)
			return;
	s->pend_end[s->npend_end].idx = idx;
	s->pend_end[s->npend_end].final = final;
	s->pend_end[s->npend_end++].seq = seq;
}

/* End the pending topics whose messages are all delivered. */
void dg_sess_pending_ends(struct rsess *s)
{
	for (unsigned i = 0; i < s->npend_end;)
		if (!s->core || s->core->next_seq >= s->pend_end[i].seq) {
			sess_topic_end_now(s, s->pend_end[i].idx, s->pend_end[i].final);
			s->pend_end[i] = s->pend_end[--s->npend_end];
		} else {
			i++;
		}
}

void dg_sess_delete(struct flit_tp *tp, struct rsess *s)
{
	for (struct rsess **pp = &tp->sess; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	if (tp->last == s)
		tp->last = NULL;
	dg_part_end(s);
	tp->nsess--;
	sess_free_topics(s);
	free(s);
}


/* A bound session ended (END heartbeat or silence): remember its id so a
 * late advert does not bring it back, and look for its successor. */
void dg_sess_ended(struct flit_tp *tp, struct rsess *s, uint64_t now)
{
	tp->ended[tp->ended_next] = s->id;
	tp->ended_next = (tp->ended_next + 1) % NENDED;
	dg_sess_delete(tp, s);
	dg_update_ucast_need(tp);
	tp->query_ivl = QUERY_MIN_NS / 2;
	tp->query_at = now;
	tp->next_house = now;
}

void dg_update_ucast_need(struct flit_tp *tp)
{
	tp->want_ucast_every_poll = false;
	for (struct rsess *s = tp->sess; s; s = s->next)
		if (s->core && s->mode == FLIT_MODE_UNICAST)
			tp->want_ucast_every_poll = true;
}

/* A decoded name (not NUL-terminated, 1..255 bytes) as a C string in buf. */
const char *dg_ctl_name_str(const struct flit_ctl_name *nm, char buf[FLIT_TOPIC_MAX + 1])
{
	memcpy(buf, nm->name, nm->len);
	buf[nm->len] = '\0';
	return buf;
}

bool dg_found_has(const struct flit_tp *tp, const char *topic)
{
	for (unsigned i = 0; i < tp->nfound; i++)
		if (!strcmp(tp->found[i], topic))
			return true;
	return false;
}

/* INFO of another transport's source (rdma): hand each wanted topic to
 * the context, which gives it to that transport.  Remembered, so that
 * queries stop asking for it. */
static int on_foreign_info(struct flit_tp *tp, const uint8_t *f, const struct flit_frame_hdr *h,
			   const struct flit_ctl_info *in, const struct sockaddr_in *from)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	char name[FLIT_TOPIC_MAX + 1];

	if (!in->data_port) {
		flit_ctx_rx_counters(tp->ctx)->malformed++;
		return 0;
	}
	flit_ctl_names_init(&it, f, h);
	while (flit_ctl_names_next(&it, &nm)) {
		dg_ctl_name_str(&nm, name);
		if (!flit_ctx_wants(tp->ctx, name))
			continue;
		struct flit_res_ad ad = {
			.session = h->session_id, .mode = in->mode,
			.addr = in->data_addr ? in->data_addr : from->sin_addr.s_addr,
			.port = in->data_port, .topic = name,
		};
		flit_ctx_res_found(tp->ctx, &ad);
		if (!dg_found_has(tp, name) && tp->nfound < MAX_FOUND) {
			if (!tp->found)
				tp->found = calloc(MAX_FOUND, sizeof(*tp->found));
			if (tp->found && (tp->found[tp->nfound] = strdup(name)))
				tp->nfound++;
		}
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Does every name of the INFO have an index in range (a whole INFO's 0 ..
 * count-1, a page's 0 .. 65535), each index once?  A frame naming one
 * index twice would rename a topic under its subscribers' feet. */
static bool info_indexes_ok(const uint8_t *f, const struct flit_frame_hdr *h, bool page)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	uint32_t small[256], *v = h->count <= 256 ? small : malloc(h->count * sizeof(*v));
	unsigned n = 0;
	bool ok = v != NULL;

	flit_ctl_names_init(&it, f, h);
	while (ok && flit_ctl_names_next(&it, &nm)) {
		ok = (page ? nm.idx <= UINT16_MAX : nm.idx < h->count) && n < h->count;
		if (ok)
			v[n++] = nm.idx;
	}
	if (ok && n > 1) {
		qsort(v, n, sizeof(*v), cmp_u32);
		for (unsigned i = 1; i < n && ok; i++)
			ok = v[i] != v[i - 1];
	}
	if (v != small)
		free(v);
	return ok;
}

/* A source not heard before, which names nothing we want in this INFO (a
 * source advertises its first page when it starts): if we still look for
 * topics, ask now rather than at the next query (up to 1 s away, its
 * backoff): the source may have them, or make them soon and answer then
 * (it keeps the exact names it heard).  Once per source, and at most
 * every NEWSRC_QUERY_NS however many sources start. */
static void heard_new_source(struct flit_tp *tp, uint32_t id, uint64_t now)
{
	for (unsigned i = 0; i < NNEWSRC; i++)
		if (tp->newsrc[i] == id)
			return;
	tp->newsrc[tp->newsrc_next] = id;
	tp->newsrc_next = (tp->newsrc_next + 1) % NNEWSRC;
	if (!tp->query_wanted || now - tp->newsrc_q_at < NEWSRC_QUERY_NS)
		return;
	tp->newsrc_q_at = now;
	if (tp->query_at > now)
		tp->query_at = now;
	tp->next_house = now;
}

/* An INFO frame (from the resolver, a query reply, or a static source). */
static int on_info(struct flit_tp *tp, const uint8_t *f, const struct flit_frame_hdr *h,
		   const struct sockaddr_in *from, uint64_t now)
{
	struct flit_ctl_info in;
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	struct rsess *s;

	flit_ctl_info_get(f, &in);
	if (in.domain != tp->domain || h->count == 0)
		return 0;
	if (tp->ud_mode) {
		/* rdma multicast hears its own kind of session only, and
		 * handles it as a multicast one (the data comes by UD) */
		if (in.mode != FLIT_MODE_RDMA_MCAST || !tp->ud)
			return 0;
		in.mode = FLIT_MODE_MCAST;
	} else if (in.mode == FLIT_MODE_RDMA_MCAST) {
		return 0; /* rdma multicast's: not on this path */
	}
	if (in.mode == FLIT_MODE_RDMA)
		return on_foreign_info(tp, f, h, &in, from);
	/* topic indexes name slots of a table the core allocates: a whole
	 * INFO's are 0 .. count-1 (a session of one topic: 0); a page's (a
	 * shared session's) any of 0 .. 65535 */
	bool page = h->flags & (FLIT_INFOF_PAGE | FLIT_INFOF_ENDED);
	if (!info_indexes_ok(f, h, page)) {
		flit_ctx_rx_counters(tp->ctx)->malformed++;
		return 0;
	}
	for (unsigned i = 0; i < NENDED; i++)
		if (tp->ended[i] == h->session_id)
			return 0; /* a late advert of a session that ended */
	s = dg_sess_find(tp, h->session_id);
	if (h->flags & FLIT_INFOF_ENDED) {
		/* topics of a shared session ended: EOS to their subscribers */
		if (s) {
			unsigned i = 0;
			flit_ctl_names_init(&it, f, h);
			for (; flit_ctl_names_next(&it, &nm); i++)
				sess_topic_ended(s, nm.idx, h->seq, (h->flags & FLIT_INFOF_FINAL) ?
						 flit_ctl_info_final(f, h, i) : UINT64_MAX);
		}
		return 0;
	}
	if (!s) {
		bool any = false;
		flit_ctl_names_init(&it, f, h);
		while (flit_ctl_names_next(&it, &nm)) {
			char name[FLIT_TOPIC_MAX + 1];
			any |= flit_ctx_wants(tp->ctx, dg_ctl_name_str(&nm, name));
		}
		if (!any) {
			/* not for us: remember nothing (over xdp, its data is
			 * dropped in XDP from now on; not for a page: another
			 * page of the session may name a wanted topic) */
			if (tp->xp && !page)
				flit_xdp_path_filter(tp->xp, h->session_id);
			heard_new_source(tp, h->session_id, now);
			return 0;
		}
		if (tp->nsess >= MAX_SESS) {
			flit_ctx_rx_counters(tp->ctx)->unknown_session++;
			return 0;
		}
		/* a session dropped in XDP for its first topics, which now
		 * names a wanted one */
		if (tp->xp)
			flit_xdp_path_unfilter(tp->xp, h->session_id);
		s = calloc(1, sizeof(*s));
		if (!s)
			return flit_err(ENOMEM, "udp: out of memory");
		s->tp = tp;
		s->id = h->session_id;
		s->next = tp->sess;
		tp->sess = s;
		tp->nsess++;
	}
	s->last_heard = now;
	if (s->core) {
		/* bound: INFO refreshes liveness, and a shared session's
		 * INFO may name topics added since (BOS to who wants them) */
		flit_ctl_names_init(&it, f, h);
		while (flit_ctl_names_next(&it, &nm))
			if (sess_topic_add(s, nm.idx, &nm) < 0)
				return -ENOMEM;
		sess_info_next(s, f, h);
		dg_part_flush(s);
		/* joining: the source sends every page, then LATE (paced:
		 * a large session's pages take a while); wait on */
		if (s->lj_wait && page && now + LATE_WAIT_NS > s->lj_at)
			s->lj_at = now + LATE_WAIT_NS;
		return 0;
	}
	/* (re)learn the session's addresses and topics: a whole INFO
	 * replaces what we knew, a page adds to it */
	if (!page)
		sess_free_topics(s);
	s->mode = in.mode;
	s->ctl.sin_family = AF_INET;
	s->ctl.sin_addr.s_addr = in.ctl_addr ? in.ctl_addr : from->sin_addr.s_addr;
	s->ctl.sin_port = in.ctl_port ? htons(in.ctl_port) : from->sin_port;
	s->group.s_addr = in.data_addr;
	s->port = in.data_port;
	flit_ctl_names_init(&it, f, h);
	while (flit_ctl_names_next(&it, &nm))
		if (sess_topic_add(s, nm.idx, &nm) < 0) {
			dg_sess_delete(tp, s);
			return -ENOMEM;
		}
	if (s->mode == FLIT_MODE_MCAST && (!IN_MULTICAST(ntohl(s->group.s_addr)) || !s->port)) {
		flit_ctx_rx_counters(tp->ctx)->malformed++;
		dg_sess_delete(tp, s);
		return 0;
	}
	if (dg_sess_wanted(s)) {
		int err = dg_sess_bind(s, h->seq, true, now);
		if (err < 0)
			flit_warn("udp: cannot join session %08x: %s", s->id, flit_errmsg());
		else
			sess_info_next(s, f, h);
	}
	return 0;
}

/* Messages of topics the session never named came (their page was lost,
 * or is on its way): a subscriber may want them, so ask the source for
 * every page, at most once a second. */
static void sess_unnamed(struct rsess *s, uint64_t now)
{
	struct flit_tp *tp = s->tp;

	s->unnamed_seen = s->core->unnamed;
	if (now - s->idq_at < 1000 * MS)
		return;
	s->idq_at = now;
	size_t n = flit_ctl_query_encode(tp->ctl, sizeof(tp->ctl), s->id, tp->domain, NULL, 0);
	dg_rx_send(tp, tp->ctl, n, &s->ctl);
}

/* A frame of a session we do not know: ask its sender who it is (rate
 * limited per session id), if anything here could want it. */
static void on_unknown(struct flit_tp *tp, uint32_t id, const struct sockaddr_in *from,
		       uint64_t now)
{
	flit_ctx_rx_counters(tp->ctx)->unknown_session++;
	/* port 0: a UD datagram, which names no port to ask (resolution
	 * finds the session: its adverts, our queries by topic) */
	if (!flit_ctx_wants_any(tp->ctx) || !from->sin_port)
		return;
	for (unsigned i = 0; i < NUNK; i++)
		if (tp->unk[i].id == id && now - tp->unk[i].at < UNKNOWN_QUERY_NS)
			return;
	tp->unk[tp->unk_next].id = id;
	tp->unk[tp->unk_next].at = now;
	tp->unk_next = (tp->unk_next + 1) % NUNK;
	size_t n = flit_ctl_query_encode(tp->ctl, sizeof(tp->ctl), id, tp->domain, NULL, 0);
	dg_rx_send(tp, tp->ctl, n, from);
}

/* One received datagram (data socket, unicast socket or resolver). */
static int on_dgram(struct flit_tp *tp, const struct flit_dgram *d, uint64_t now)
{
	const uint8_t *p = d->buf;
	struct flit_counters *c = flit_ctx_rx_counters(tp->ctx);
	struct flit_frame_hdr h;
	struct rsess *s;
	enum flit_frame_err fe;

	if (FLIT_UNLIKELY(d->len < FLIT_FRAME_HDR_LEN || flit_ld16(p) != FLIT_WIRE_MAGIC)) {
		c->foreign_dropped++;
		return 0;
	}
	if (FLIT_LIKELY(p[3] == FLIT_FT_DATA)) {
		s = dg_sess_find(tp, flit_ld32(p + 12));
		if (FLIT_UNLIKELY(!s || !s->core)) {
			if (!s)
				on_unknown(tp, flit_ld32(p + 12), &d->addr, now);
			return 0;
		}
		fe = flit_frame_check(p, d->len, &h);
		if (FLIT_UNLIKELY(fe != FLIT_FE_OK)) {
			c->malformed++;
			flit_debug("udp: frame from %08x dropped: %s", s->id, flit_frame_strerr(fe));
			return 0;
		}
		s->last_heard = now;
		if (FLIT_UNLIKELY(s->lj_wait)) {
			/* not started yet: kept for then (or repaired by NAK) */
			held_add(s, p, &h);
			return 0;
		}
		if (FLIT_UNLIKELY((h.flags & FLIT_FF_RETX) && !flit_rel_rx_started(s->rel)))
			return 0; /* a late joiner starts on live data, not on repairs for others */
		s->cur = p;
		/* a NIC stamp only where one is in effect and given, else the
		 * kernel's (flit_ts_pick) */
		uint32_t tsk;
		s->cur_ts = flit_ts_pick(tp->ts.rx, d->rx_ts_ns, d->rx_ts_hw_ns, &tsk);
		s->cur_ts_flags = tsk == FLIT_TXTS_HARDWARE ? FLIT_MSGF_RECV_TS_HW :
				  tsk ? FLIT_MSGF_RECV_TS_KERNEL : 0;
		int n = flit_rel_rx_data(s->rel, p, h.len, h.seq, h.count, now);
		s->cur = NULL;
		/* xdp: part the session once its numbers are placed */
		if (FLIT_UNLIKELY(tp->xp && !s->part_eval))
			dg_part_sync(s);
		if (FLIT_UNLIKELY(s->core->unnamed != s->unnamed_seen))
			sess_unnamed(s, now);
		if (FLIT_UNLIKELY(s->npend_end))
			dg_sess_pending_ends(s);
		uint64_t dl = flit_rel_rx_deadline(s->rel);
		if (dl < tp->next_house)
			tp->next_house = dl;
		return n < 0 ? 0 : n;
	}

	fe = flit_ctl_check(p, d->len, &h);
	if (fe != FLIT_FE_OK) {
		c->malformed++;
		flit_debug("udp: control frame dropped: %s", flit_frame_strerr(fe));
		return 0;
	}
	switch (h.type) {
	case FLIT_FT_HB:
		s = dg_sess_find(tp, h.session_id);
		if (!s) {
			on_unknown(tp, h.session_id, &d->addr, now);
			return 0;
		}
		s->last_heard = now;
		if (!s->core)
			return 0;
		int started = 0;
		if (s->lj_wait && (h.flags & FLIT_HBF_END))
			started = dg_sess_start(s, NULL, h.seq);
		else if (s->lj_wait)
			return 0;
		if (h.flags & FLIT_HBF_END) {
			/* nothing more will come: what is still missing is
			 * lost (reported), what is held is delivered */
			int ev = flit_rel_rx_hb(s->rel, h.seq, h.seq, now);
			ev = started + (ev < 0 ? 0 : ev) + dg_sess_unbind(s, 0, false);
			dg_sess_ended(tp, s, now);
			return ev;
		}
		{
			int n = flit_rel_rx_hb(s->rel, h.seq, flit_ctl_hb_trail(p), now);
			if (s->npend_end)
				dg_sess_pending_ends(s);
			uint64_t dl = flit_rel_rx_deadline(s->rel);
			if (dl < tp->next_house)
				tp->next_house = dl;
			return n < 0 ? 0 : n;
		}
	case FLIT_FT_NCF: {
		struct flit_seq_range r[FLIT_CTL_RANGES_MAX];
		unsigned n = h.count < FLIT_CTL_RANGES_MAX ? h.count : FLIT_CTL_RANGES_MAX;
		s = dg_sess_find(tp, h.session_id);
		if (!s || !s->core || s->lj_wait)
			return 0;
		for (unsigned i = 0; i < n; i++)
			flit_ctl_range(p, i, &r[i]);
		int ev = flit_rel_rx_ncf(s->rel, r, n, now);
		if (s->npend_end)
			dg_sess_pending_ends(s);
		return ev < 0 ? 0 : ev;
	}
	case FLIT_FT_INFO:
		return on_info(tp, p, &h, &d->addr, now);
	case FLIT_FT_LATE: {
		struct flit_ctl_late late;
		s = dg_sess_find(tp, h.session_id);
		if (!s || !s->core || !s->lj_wait)
			return 0; /* answered twice, or not asked */
		flit_ctl_late_get(p, &late);
		s->last_heard = now;
		int ev = dg_sess_start(s, &late, h.seq);
		uint64_t dl = flit_rel_rx_deadline(s->rel);
		if (dl < tp->next_house)
			tp->next_house = dl;
		return ev;
	}
	default:
		/* NAK, QUERY, JOIN are for sources; a receiver ignores them */
		return 0;
	}
}

/* the AF_XDP path's receive, for the impairment (flit_dgram_recv_fn) */
static int xsk_recv_fn(void *arg, struct flit_dgram *d, unsigned n)
{
	return flit_xsk_recv(arg, d, NULL, n);
}

/* Receive from recv(arg, ...) through the impairment im (or none). */
static int recv_via(struct flit_impair *im, flit_dgram_recv_fn recv, void *arg,
		    struct flit_dgram *d, unsigned n)
{
	return im ? flit_impair_recv(im, recv, arg, d, n) : recv(arg, d, n);
}

/* Receive and handle datagrams.  The batch adapts: a full batch doubles
 * the next one (up to context.udp.rx_batch), a short one shrinks it to what
 * came, so a sparse latency-bound stream pays for one receive attempt per
 * datagram, not for a second one that finds the socket empty. */
int dg_drain_any(struct flit_tp *tp, struct flit_udp_io *io, struct flit_xsk *xk,
		     unsigned *want, int limit, uint64_t now)
{
	int total = 0;

	while (total < limit) {
		unsigned w = *want ? *want : 1;
		int n = io ? flit_udp_io_recv(io, tp->dg, w) :
			xk ? recv_via(tp->xk_im, xsk_recv_fn, xk, tp->dg, w) :
			recv_via(tp->ud_im, flit_ud_path_recv, tp->ud, tp->dg, w);
		/* xdp: the drops of parted sessions told before the frames
		 * that came after them */
		if (xk)
			total += dg_part_reports(tp, now);
		if (n <= 0)
			return n < 0 ? n : total;
		for (int i = 0; i < n; i++)
			total += on_dgram(tp, &tp->dg[i], now);
		if ((unsigned)n < w) {
			*want = (unsigned)n;
			break;
		}
		*want = w * 2 > tp->iocfg.batch ? tp->iocfg.batch : w * 2;
	}
	return total;
}

int dg_drain(struct flit_tp *tp, struct flit_udp_io *io, unsigned *want,
		 int limit, uint64_t now)
{
	return dg_drain_any(tp, io, NULL, want, limit, now);
}

/* rdma multicast: the UD queue pair's datagrams */
int dg_drain_ud(struct flit_tp *tp, int limit, uint64_t now)
{
	return dg_drain_any(tp, NULL, NULL, &tp->ud_want, limit, now);
}
