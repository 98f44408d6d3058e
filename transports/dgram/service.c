// SPDX-License-Identifier: BSD-2-Clause
/*
 * The source side's service: NAKs and retransmissions, queries, joins,
 * heartbeats, adverts on the resolver channel, other transports' adverts;
 * and the context's service thread that runs it (context.udp.service).
 * (session.h: the state and the shared functions.)
 */
#include "dgram/session.h"

/* ---- source side: the service (NAKs, queries, joins, timers) ------------- */

/* In a QUERY's header as we keep it (not on the wire): its patterns do not
 * count. */
#define QUERY_EXACT_ONLY 0x8000

/* Does a QUERY (checked) name `topic`, exactly or by a pattern? */
static bool query_wants(const uint8_t *q, const struct flit_frame_hdr *h, const char *topic)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	char name[FLIT_TOPIC_MAX + 1];

	flit_ctl_names_init(&it, q, h);
	while (flit_ctl_names_next(&it, &nm)) {
		if (nm.kind == FLIT_NAME_PATTERN && (h->flags & QUERY_EXACT_ONLY))
			continue;
		dg_ctl_name_str(&nm, name);
		if (nm.kind == FLIT_NAME_PATTERN ? fnmatch(name, topic, 0) == 0 : !strcmp(name, topic))
			return true;
	}
	return false;
}

/* Does a QUERY name a topic of the session?  Lock held. */
static bool query_wants_sess(const uint8_t *q, const struct flit_frame_hdr *h, const struct usess *s)
{
	for (unsigned i = 0; i < s->ntopics; i++)
		if (s->topics[i] && query_wants(q, h, s->topics[i]->topic))
			return true;
	return false;
}

struct answer;
struct fad;
static bool fad_wants(const struct fad *a, const uint8_t *q, const struct flit_frame_hdr *h);
static void fad_answer(struct flit_tp *tp, struct fad *a, const struct sockaddr_in *to,
		       const uint8_t *q, const struct flit_frame_hdr *qh, uint64_t now);

/* ---- INFO: whole, or in pages ---------------------------------------------- */

#define PAGE_NAMES 128  /* names in one INFO at most */

struct page {
	struct flit_ctl_name t[PAGE_NAMES];
	uint64_t next[PAGE_NAMES];   /* each topic's number of its next message */
	unsigned n;
	size_t used, room;
};

static void page_init(struct page *p, const struct usess *s, size_t cap)
{
	p->n = 0;
	p->used = 0;
	p->room = (cap < s->max_dgram ? cap : s->max_dgram) - FLIT_CTL_INFO_HDR_LEN;
}

/* Add topic u; false (nothing added) when the page is full. */
static bool page_add(struct page *p, const struct utopic *u)
{
	size_t len = strlen(u->topic), w = flit_ctl_name_len(len);

	/* the name and, with FLIT_INFOF_NEXT or FINAL, its number (8 bytes) */
	if (p->n == PAGE_NAMES || p->used + w + 8 > p->room)
		return false;
	p->used += w + 8;
	p->next[p->n] = u->next_tseq;
	p->t[p->n++] = (struct flit_ctl_name){ .idx = u->idx, .kind = FLIT_NAME_EXACT,
					       .len = (uint16_t)len, .name = u->topic };
	return true;
}

static size_t page_encode_final(struct usess *s, const struct page *p, void *buf, size_t cap,
				uint16_t flags, const uint64_t *final)
{
	struct flit_tp *tp = s->tp;
	struct flit_ctl_info in = {
		.domain = tp->domain,
		.mode = s->tp->ud ? FLIT_MODE_RDMA_MCAST : s->mode,
		.data_port = s->mode == FLIT_MODE_MCAST ? ntohs(s->dest.sin_port) : ntohs(s->self.sin_port),
		.data_addr = s->mode == FLIT_MODE_MCAST ? s->dest.sin_addr.s_addr : 0,
		.ctl_addr = s->self.sin_addr.s_addr,
		.ctl_port = ntohs(s->self.sin_port),
		.pid = (uint32_t)getpid(),
	};
	return p->n ? flit_ctl_info_encode_final(buf, cap, flags, s->session, flit_rel_tx_next(s->rel),
						 &in, p->t, p->n, final) : 0;
}

/* A page of live topics.  A session of several topics (each numbered on
 * its own) tells each topic's next number at the INFO's seq
 * (FLIT_INFOF_NEXT), when no batch is open (its messages have numbers
 * but are not sent yet: the INFO's seq is before them). */
static size_t page_encode(struct usess *s, const struct page *p, void *buf, size_t cap,
			  uint16_t flags)
{
	if (s->tseq && (flags & FLIT_INFOF_PAGE) && !s->count && !s->claimed &&
	    flit_rel_tx_next(s->rel) == s->next_seq)
		return page_encode_final(s, p, buf, cap, flags | FLIT_INFOF_NEXT, p->next);
	return page_encode_final(s, p, buf, cap, flags, NULL);
}

/* An INFO of the session's topics from index *from on (those a QUERY q
 * names, if q), as many as one datagram holds; *from moves past them
 * (ntopics: none left).  A session of its own (one topic) sends the whole
 * INFO, flags 0; a shared one (source.session) pages (FLIT_INFOF_PAGE),
 * even when all its topics fit, so that receivers know it may grow.
 * 0 when no topic from *from on is listed.  Lock held. */
static size_t src_info_page(struct usess *s, void *buf, size_t cap, unsigned *from,
			    const uint8_t *q, const struct flit_frame_hdr *qh)
{
	struct page p;
	unsigned i = *from, start = *from;

	page_init(&p, s, cap);
	for (; i < s->ntopics; i++) {
		const struct utopic *u = s->topics[i];
		if (!u || (q && !query_wants(q, qh, u->topic)))
			continue;
		if (!page_add(&p, u))
			break;
	}
	*from = i;
	bool whole = !sess_pages(s) && !q && start == 0 && i == s->ntopics && p.n == s->ntopics;
	return page_encode(s, &p, buf, cap, whole ? 0 : FLIT_INFOF_PAGE);
}

/* ---- the session's receivers learn topics added and ended ---------------- */

/* The page of the topics added since the last one, on the data path. */
void dg_src_announce(struct usess *s)
{
	struct page p;

	page_init(&p, s, sizeof(s->ctl));
	for (unsigned i = 0; i < s->nann; i++) {
		const struct utopic *u = s->topics[s->ann[i]];
		if (u)  /* not ended meanwhile */
			page_add(&p, u);
	}
	s->nann = 0;
	size_t l = page_encode(s, &p, s->ctl, sizeof(s->ctl), FLIT_INFOF_PAGE);
	if (l)
		dg_src_raw(s, s->ctl, l);
}

void dg_src_topic_added(struct usess *s, const struct utopic *t)
{
	struct page p;

	if (!s->nrcv)
		return; /* receivers that join later get every page */
	/* one page for many topics: full (or a frame about to go, or the
	 * service) sends it */
	page_init(&p, s, sizeof(s->ctl));
	bool fits = s->nann < ANN_MAX;
	for (unsigned i = 0; fits && i < s->nann; i++)
		if (s->topics[s->ann[i]])
			fits = page_add(&p, s->topics[s->ann[i]]);
	if (!fits || !page_add(&p, t))
		dg_src_announce(s);
	s->ann[s->nann++] = t->idx;
}

void dg_src_topic_ended(struct usess *s, const struct utopic *t)
{
	struct page p;

	if (s->nann)
		dg_src_announce(s);
	page_init(&p, s, sizeof(s->ctl) - 8);
	page_add(&p, t);
	/* with how many it sent: a receiver tells the loss of its last ones */
	uint64_t final = __atomic_load_n(&t->next_tseq, __ATOMIC_RELAXED);
	size_t l = page_encode_final(s, &p, s->ctl, sizeof(s->ctl), FLIT_INFOF_PAGE |
				     FLIT_INFOF_ENDED | FLIT_INFOF_FINAL, &final);
	/* twice, as the HB that ends a session: one loss is common */
	dg_src_raw(s, s->ctl, l);
	dg_src_raw(s, s->ctl, l);
}

/* ---- answers to queries and joins: paced (context.udp.resolver_rate_limit) */

/* INFO pages owed to one asker: every topic, or those a QUERY names. */
struct answer {
	struct sockaddr_in to;
	unsigned from;               /* the next topic index to list */
	bool late;                   /* a LATE answer follows the last page */
	struct flit_frame_hdr qh;
	uint32_t qlen;               /* 0: every topic */
	uint8_t q[];                 /* the QUERY */
};

/* The LATE answer to a joining receiver: where the live stream starts,
 * and what is retained.  Lock held. */
static void src_late_to(struct usess *s, const struct sockaddr_in *to, uint64_t now)
{
	struct flit_ctl_late late = {
		.trail = flit_rel_tx_trail(s->rel, now),
		.origin = 0, /* next_seq starts there */
		.age_ns = now - s->created,
		.late_join = s->late_join,
	};
	size_t l = flit_ctl_late_encode(s->ctl, sizeof(s->ctl), s->session, flit_rel_tx_next(s->rel), &late);
	if (l && sendto(s->fd, s->ctl, l, MSG_DONTWAIT, (const struct sockaddr *)to,
			sizeof(*to)) >= 0 && s->txts)
		flit_txts_sent(s->txts, s->ctl, l, 1);
}

/* Drop answer i (sent or no longer wanted).  Lock held. */
static void answer_drop(struct usess *s, unsigned i)
{
	free(s->ans[i]);
	memmove(s->ans + i, s->ans + i + 1, (--s->nans - i) * sizeof(*s->ans));
	if (s->ans_next > i)
		s->ans_next--;
}

/* Send what the answers owe, as far as the resolver's rate allows, a page
 * to each asker in turn: the page a query for one topic owes does not wait
 * behind the 500 a joining receiver is owed.  The time to go on
 * (UINT64_MAX: nothing owed).  tp->lock and the lock held. */
static uint64_t src_answers(struct usess *s, uint64_t now)
{
	struct flit_tp *tp = s->tp;

	while (s->nans) {
		if (s->ans_next >= s->nans)
			s->ans_next = 0;
		unsigned i = s->ans_next;
		struct answer *a = s->ans[i];
		unsigned from = a->from;
		size_t l = src_info_page(s, s->ctl, sizeof(s->ctl), &from, a->qlen ? a->q : NULL, &a->qh);
		if (!l) {
			if (a->late)
				src_late_to(s, &a->to, now);
			answer_drop(s, i);
			continue;
		}
		if (!flit_rl_take(&tp->res_rl, l, now))
			return now + flit_rl_wait(&tp->res_rl, l, now);
		a->from = from;
		if (sendto(s->fd, s->ctl, l, MSG_DONTWAIT, (const struct sockaddr *)&a->to,
			   sizeof(a->to)) >= 0 && s->txts)
			flit_txts_sent(s->txts, s->ctl, l, 1);
		s->ans_next = i + 1;
	}
	return UINT64_MAX;
}

/* A receiver left: what it was owed is nobody's.  Lock held. */
static void answers_forget(struct usess *s, const struct sockaddr_in *to)
{
	for (unsigned i = 0; i < s->nans;)
		if (same_ep(&s->ans[i]->to, to))
			answer_drop(s, i);
		else
			i++;
}

/* Owe `to` the pages of the topics QUERY q names (every topic: q NULL),
 * then a LATE answer if `late`; what can go now goes.  An asker already
 * owed the same is not answered twice: the answer under way lists topics
 * added meanwhile too.  tp->lock and the lock held. */
static void src_answer(struct usess *s, const struct sockaddr_in *to, const uint8_t *q,
		       const struct flit_frame_hdr *qh, bool late, uint64_t now)
{
	uint32_t qlen = q ? qh->len : 0;

	for (unsigned i = 0; i < s->nans; i++) {
		struct answer *a = s->ans[i];
		if (!same_ep(&a->to, to))
			continue;
		if (!qlen && a->qlen) {
			a->qlen = 0;  /* now every topic: from the first */
			a->from = 0;
		}
		if (!a->qlen || (a->qlen == qlen && !memcmp(a->q, q, qlen))) {
			a->late |= late;
			src_answers(s, now);
			return;
		}
	}
	if (s->nans == ANSWERS_MAX)
		return; /* asked again later: a flood of askers waits */
	struct answer *a = malloc(sizeof(*a) + qlen);
	if (!a)
		return;
	*a = (struct answer){ .to = *to, .late = late, .qlen = qlen };
	if (qlen) {
		a->qh = *qh;
		memcpy(a->q, q, qlen);
	}
	s->ans[s->nans++] = a;
	src_answers(s, now);
}

void dg_src_answers_free(struct usess *s)
{
	while (s->nans)
		free(s->ans[--s->nans]);
}

/* Is `a` a receiver joined to the session? */
static bool src_has_rcv(const struct usess *s, const struct sockaddr_in *a)
{
	for (unsigned i = 0; i < s->nrcv; i++)
		if (same_ep(&s->rcv[i].a, a))
			return true;
	return false;
}

/* A JOIN (or leave) from a; true when a is a receiver we did not have. */
static bool src_add_rcv(struct usess *s, const struct sockaddr_in *a, bool leave, uint64_t now)
{
	for (unsigned i = 0; i < s->nrcv; i++)
		if (same_ep(&s->rcv[i].a, a)) {
			if (leave)
				s->rcv[i] = s->rcv[--s->nrcv];
			else
				s->rcv[i].expires = now + RCV_EXPIRE_NS;
			return false;
		}
	if (leave)
		return false;
	if (s->nrcv == s->caprcv) {
		unsigned cap = s->caprcv ? s->caprcv * 2 : 4;
		if (cap > 4096)
			return false; /* a flood of joins: ignore beyond this */
		struct urcv *v = realloc(s->rcv, cap * sizeof(*v));
		if (!v)
			return false;
		s->rcv = v;
		s->caprcv = cap;
	}
	s->rcv[s->nrcv++] = (struct urcv){ .a = *a, .expires = now + RCV_EXPIRE_NS };
	return true;
}

void dg_advert_start(struct advert *a, uint64_t now)
{
	a->ivl = ADVERT_MIN_NS / 2;
	a->at = now;
}

/* The INFO went out: the next one after twice the interval, up to max. */
static void advert_sent(struct advert *a, uint64_t now, uint64_t max)
{
	a->last = now;
	a->ivl = a->ivl * 2 > max ? max : a->ivl * 2;
	a->at = now + a->ivl;
}

/* A matching query: answer within a few ms (spread: many sources, one
 * query), but not more often than ADVERT_MIN_NS.  tp->lock held. */
static void advert_soon(struct flit_tp *tp, struct advert *a, uint64_t now)
{
	uint64_t at = now + rng_next(&tp->srng) % (2 * MS);

	if (at < a->last + ADVERT_MIN_NS)
		at = a->last + ADVERT_MIN_NS;
	if (at < a->at)
		a->at = at;
}

/* A QUERY (not by session id) from `from`: the pages of the topics it
 * names.  A receiver joined to the session learns topics added on the data
 * path: its patterns are not answered again (they would list every topic,
 * at every query), only the topics it names exactly.  Locks held. */
static void src_query(struct usess *s, const uint8_t *q, const struct flit_frame_hdr *h,
		      const struct sockaddr_in *from, uint64_t now)
{
	struct flit_frame_hdr eh = *h;

	if (src_has_rcv(s, from))
		eh.flags |= QUERY_EXACT_ONLY;
	src_answer(s, from, q, &eh, false, now);
}

/* A control datagram that arrived on the source's own socket. */
static void src_ctl(struct usess *s, const uint8_t *p, size_t len,
		    const struct sockaddr_in *from, uint64_t now)
{
	struct flit_tp *tp = s->tp;
	struct flit_frame_hdr h;

	if (len < FLIT_FRAME_HDR_LEN || flit_ld16(p) != FLIT_WIRE_MAGIC ||
	    flit_ctl_check(p, len, &h) != FLIT_FE_OK) {
		s->c.malformed++;
		return;
	}
	switch (h.type) {
	case FLIT_FT_NAK: {
		struct flit_seq_range nak[FLIT_CTL_RANGES_MAX], ncf[FLIT_CTL_RANGES_MAX];
		unsigned n = h.count < FLIT_CTL_RANGES_MAX ? h.count : FLIT_CTL_RANGES_MAX;
		if (h.session_id != s->session)
			return;
		for (unsigned i = 0; i < n; i++)
			flit_ctl_range(p, i, &nak[i]);
		s->c.naks_received += n;
		unsigned m = flit_rel_tx_nak(s->rel, nak, n, now, ncf, FLIT_CTL_RANGES_MAX);
		if (m) {
			size_t l = flit_ctl_ranges_encode(s->ctl, sizeof(s->ctl), FLIT_FT_NCF, s->session,
							  flit_rel_tx_next(s->rel), ncf, m);
			dg_src_raw(s, s->ctl, l);
		}
		break;
	}
	case FLIT_FT_QUERY: {
		if (flit_ctl_domain(p) != tp->domain)
			return;
		/* by session id: every topic; else what the query names */
		if (h.session_id == s->session)
			src_answer(s, from, NULL, NULL, false, now);
		else
			src_query(s, p, &h, from, now);
		break;
	}
	case FLIT_FT_JOIN:
		if (h.session_id != s->session || flit_ctl_domain(p) != tp->domain)
			break;
		bool fresh = src_add_rcv(s, from, h.flags & FLIT_JF_LEAVE, now);
		if (h.flags & FLIT_JF_LEAVE)
			answers_forget(s, from);
		bool late = h.flags & FLIT_JF_LATE;
		/* a receiver new to a shared session gets every topic's page
		 * first (it may have bound on a page without them all), and
		 * the LATE answer that starts its data after them */
		if (sess_pages(s) && !(h.flags & FLIT_JF_LEAVE) && (fresh || late))
			src_answer(s, from, NULL, NULL, late, now);
		else if (late)
			src_late_to(s, from, now);
		break;
	default:
		break; /* our own multicast looped back, or noise */
	}
}

/* Run the source's service; returns its next deadline.  Lock held. */
static uint64_t src_service(struct usess *s, uint64_t now)
{
	struct flit_tp *tp = s->tp;
	struct sockaddr_in from;
	socklen_t fl;
	uint64_t next = UINT64_MAX, wait;
	const void *f;
	size_t len;

	for (int i = 0; i < 64; i++) {
		fl = sizeof(from);
		ssize_t n = recvfrom(s->fd, tp->rbuf, sizeof(tp->rbuf), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);
		if (n < 0)
			break;
		src_ctl(s, tp->rbuf, (size_t)n, &from, now);
	}
	/* transmit stamps: keep the error queue short (it also wakes the
	 * service thread's epoll while it holds anything) */
	if (s->txts)
		flit_txts_drain(s->txts, s->fd, 1024);
	while ((f = flit_rel_tx_retx_next(s->rel, now, &len, &wait))) {
		dg_src_raw(s, f, len);
		s->c.retransmissions++;
	}
	if (wait != UINT64_MAX && now + wait < next)
		next = now + wait;
	/* heartbeat: the next seq sent so far and the retention trail */
	if (now >= flit_rel_tx_hb_due(s->rel)) {
		size_t l = flit_ctl_hb_encode(s->ctl, sizeof(s->ctl), s->session, flit_rel_tx_next(s->rel),
					      flit_rel_tx_trail(s->rel, now));
		dg_src_raw(s, s->ctl, l);
		flit_rel_tx_hb_sent(s->rel, now);
	}
	if (flit_rel_tx_hb_due(s->rel) < next)
		next = flit_rel_tx_hb_due(s->rel);
	/* idle batch */
	if (s->count && !s->claimed) {
		if (now - s->batch_t0 >= s->batch_ivl)
			dg_src_flush_locked(s, now, true);
		else if (s->batch_t0 + s->batch_ivl < next)
			next = s->batch_t0 + s->batch_ivl;
	}
	/* INFO pages owed to askers */
	if (s->nans && (wait = src_answers(s, now)) < next)
		next = wait;
	/* topics added that a frame has not announced yet */
	if (s->nann)
		dg_src_announce(s);
	/* advertisement with backoff, within the resolver's rate */
	if (now >= s->adv.at && tp->resolver.sin_port && tp->res_fd >= 0) {
		/* one page per advert, the next one the next time */
		unsigned page = s->page >= s->ntopics ? 0 : s->page;
		len = src_info_page(s, s->ctl, sizeof(s->ctl), &page, NULL, NULL);
		if (len && !flit_rl_take(&tp->res_rl, len, now)) {
			s->adv.at = now + flit_rl_wait(&tp->res_rl, len, now);
		} else {
			s->page = page;
			if (len)
				sendto(tp->res_fd, s->ctl, len, MSG_DONTWAIT, (struct sockaddr *)&tp->resolver,
				       sizeof(tp->resolver));
			advert_sent(&s->adv, now, tp->cc->udp_resolver_max_ms * MS);
		}
	}
	if (tp->resolver.sin_port && s->adv.at < next)
		next = s->adv.at;
	/* forget silent receivers */
	for (unsigned i = 0; i < s->nrcv;)
		if (s->rcv[i].expires <= now)
			s->rcv[i] = s->rcv[--s->nrcv];
		else
			i++;
	return next;
}

/* ---- exact queries heard lately ------------------------------------------ */

/* A receiver waiting for a topic nobody publishes yet asks again every
 * QUERY_EXACT_MAX_NS at most.  The exact names its queries ask for are kept
 * twice that long, with who asked, in a table of HEARD_SLOTS by the name's
 * hash (a later name of the same slot replaces it: that asker is answered
 * at its next query, as without the table): a topic made meanwhile is
 * answered at once, instead of at the asker's next query or after the
 * pages of its session's other topics on the resolver channel.  One look-up
 * a topic made. */
#define HEARD_SLOTS 256
#define HEARD_NS    (2 * QUERY_EXACT_MAX_NS)

struct heard_query {
	uint64_t hash, at;           /* flit_name_hash64(name); at 0: free */
	struct sockaddr_in from;
	char name[FLIT_TOPIC_MAX + 1];
};

/* The exact names of a QUERY (checked) from `from`.  tp->lock held. */
static void heard_note(struct flit_tp *tp, const struct sockaddr_in *from, const uint8_t *q,
		       const struct flit_frame_hdr *h, uint64_t now)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	char name[FLIT_TOPIC_MAX + 1];

	flit_ctl_names_init(&it, q, h);
	while (flit_ctl_names_next(&it, &nm)) {
		if (nm.kind != FLIT_NAME_EXACT)
			continue; /* patterns: the pages of topics added tell them */
		if (!tp->heard && !(tp->heard = calloc(HEARD_SLOTS, sizeof(*tp->heard))))
			return;
		dg_ctl_name_str(&nm, name);
		uint64_t hv = flit_name_hash64(name);
		struct heard_query *e = &tp->heard[hv % HEARD_SLOTS];
		e->hash = hv;
		e->at = now;
		e->from = *from;
		memcpy(e->name, name, sizeof(name));
	}
}

void dg_src_topic_wanted(struct usess *s, const struct utopic *t, uint64_t now)
{
	struct flit_tp *tp = s->tp;

	if (!tp->heard)
		return;
	uint64_t hv = flit_name_hash64(t->topic);
	struct heard_query *e = &tp->heard[hv % HEARD_SLOTS];
	if (!e->at || e->hash != hv || now - e->at > HEARD_NS || strcmp(e->name, t->topic))
		return;
	/* what it asked of this topic: its page, paced as an answer */
	uint8_t q[FLIT_TOPIC_MAX + 64] __attribute__((aligned(8)));
	struct flit_ctl_name nm = { .kind = FLIT_NAME_EXACT, .len = (uint16_t)strlen(t->topic),
				    .name = t->topic };
	struct flit_frame_hdr qh;
	size_t l = flit_ctl_query_encode(q, sizeof(q), 0, tp->domain, &nm, 1);
	if (l && flit_ctl_check(q, l, &qh) == FLIT_FE_OK) {
		qh.flags |= QUERY_EXACT_ONLY;
		src_answer(s, &e->from, q, &qh, false, now);
	}
	e->at = 0; /* answered: its next query, if any, asks again */
}

void dg_heard_free(struct flit_tp *tp)
{
	free(tp->heard);
	tp->heard = NULL;
}

/* Queries heard on the resolver channel: advertise matching sources soon. */
static void res_service(struct flit_tp *tp, uint64_t now)
{
	struct sockaddr_in from;
	socklen_t fl;
	struct flit_frame_hdr h;

	if (tp->res_fd < 0)
		return;
	for (int i = 0; i < 64; i++) {
		fl = sizeof(from);
		ssize_t n = recvfrom(tp->res_fd, tp->rbuf, sizeof(tp->rbuf), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);
		if (n < 0)
			break;
		if (flit_ctl_check(tp->rbuf, (size_t)n, &h) != FLIT_FE_OK || h.type != FLIT_FT_QUERY ||
		    flit_ctl_domain(tp->rbuf) != tp->domain)
			continue;
		if (!h.session_id)
			heard_note(tp, &from, tp->rbuf, &h, now);
		for (struct usess *s = tp->srcs; s; s = s->next) {
			src_lock(s);
			/* a session of one topic answers on the resolver
			 * channel soon (one INFO for every asker); a shared
			 * one sends the asker the pages of what it names */
			if (s->ntopics == 1 && !sess_pages(s)) {
				if (query_wants_sess(tp->rbuf, &h, s))
					advert_soon(tp, &s->adv, now);
			} else {
				src_query(s, tp->rbuf, &h, &from, now);
			}
			src_unlock(s);
		}
		for (struct fad *a = tp->fads; a; a = a->next)
			if (fad_wants(a, tp->rbuf, &h))
				fad_answer(tp, a, &from, tp->rbuf, &h, now);
	}
}


/* ---- other transports' sources (rdma): adverts and answers -------------- */

#define FAD_DGRAM 1400u /* an INFO page of a foreign session: one datagram */

/* An INFO of fad a's topics from *from on (those QUERY q names, if q), as
 * many as one datagram holds; *from moves past them.  A session of one
 * topic is one INFO, flags 0; more are pages (receivers take the names;
 * the indexes of a foreign session's INFO mean nothing).  0: none left. */
static size_t fad_page(const struct flit_tp *tp, const struct fad *a, uint8_t *buf, size_t cap,
		       unsigned *from, const uint8_t *q, const struct flit_frame_hdr *qh)
{
	struct flit_ctl_name t[PAGE_NAMES];
	unsigned n = 0, i = *from;
	size_t used = FLIT_CTL_INFO_HDR_LEN;

	for (; i < a->ntopics && n < PAGE_NAMES; i++) {
		const char *name = a->topics[i];
		if (q && !query_wants(q, qh, name))
			continue;
		size_t len = strlen(name), w = flit_ctl_name_len(len);
		if (used + w > cap)
			break;
		used += w;
		t[n] = (struct flit_ctl_name){ .idx = n, .kind = FLIT_NAME_EXACT, .len = (uint16_t)len,
					       .name = name };
		n++;
	}
	*from = i;
	if (!n)
		return 0;
	struct flit_ctl_info in = {
		.domain = tp->domain, .mode = a->mode,
		.data_port = a->port, .data_addr = a->addr,
		.pid = (uint32_t)getpid(),
	};
	return flit_ctl_info_encode_flags(buf, cap, a->ntopics > 1 ? FLIT_INFOF_PAGE : 0, a->session, 0,
					  &in, t, n);
}

/* Does a QUERY name a topic of fad a? */
static bool fad_wants(const struct fad *a, const uint8_t *q, const struct flit_frame_hdr *h)
{
	for (unsigned i = 0; i < a->ntopics; i++)
		if (query_wants(q, h, a->topics[i]))
			return true;
	return false;
}

/* Send what fad a's answers owe, within the resolver's rate; the time to
 * go on (UINT64_MAX: nothing owed).  tp->lock held. */
static uint64_t fad_answers(struct flit_tp *tp, struct fad *a, uint64_t now)
{
	uint8_t buf[FAD_DGRAM] __attribute__((aligned(8)));

	while (a->nans) {
		struct answer *w = a->ans[0];
		unsigned from = w->from;
		size_t l = fad_page(tp, a, buf, sizeof(buf), &from, w->qlen ? w->q : NULL, &w->qh);
		if (!l) {
			free(w);
			memmove(a->ans, a->ans + 1, --a->nans * sizeof(*a->ans));
			continue;
		}
		if (!flit_rl_take(&tp->res_rl, l, now))
			return now + flit_rl_wait(&tp->res_rl, l, now);
		w->from = from;
		sendto(tp->res_fd, buf, l, MSG_DONTWAIT, (const struct sockaddr *)&w->to, sizeof(w->to));
	}
	return UINT64_MAX;
}

/* Owe `to` the pages of fad a's topics QUERY q names (once per asker and
 * query); what can go now goes.  tp->lock held. */
static void fad_answer(struct flit_tp *tp, struct fad *a, const struct sockaddr_in *to,
		       const uint8_t *q, const struct flit_frame_hdr *qh, uint64_t now)
{
	for (unsigned i = 0; i < a->nans; i++)
		if (same_ep(&a->ans[i]->to, to) && a->ans[i]->qlen == qh->len &&
		    !memcmp(a->ans[i]->q, q, qh->len))
			return; /* under way */
	if (a->nans == ANSWERS_MAX)
		return; /* asked again later: a flood of askers waits */
	struct answer *w = malloc(sizeof(*w) + qh->len);
	if (!w)
		return;
	*w = (struct answer){ .to = *to, .qlen = qh->len, .qh = *qh };
	memcpy(w->q, q, qh->len);
	a->ans[a->nans++] = w;
	fad_answers(tp, a, now);
}

/* Advertise the other transports' sources that are due (one page each),
 * and answer their askers.  tp->lock held.  Returns the next deadline. */
static uint64_t fads_service(struct flit_tp *tp, uint64_t now)
{
	uint64_t next = UINT64_MAX, max = tp->cc->udp_resolver_max_ms * MS;
	uint8_t buf[FAD_DGRAM] __attribute__((aligned(8)));

	if (!tp->resolver.sin_port || tp->res_fd < 0)
		return next;
	for (struct fad *a = tp->fads; a; a = a->next) {
		uint64_t w = a->nans ? fad_answers(tp, a, now) : UINT64_MAX;
		if (w < next)
			next = w;
		if (now >= a->adv.at) {
			unsigned page = a->page >= a->ntopics ? 0 : a->page;
			size_t len = fad_page(tp, a, buf, sizeof(buf), &page, NULL, NULL);
			if (len && !flit_rl_take(&tp->res_rl, len, now)) {
				a->adv.at = now + flit_rl_wait(&tp->res_rl, len, now);
			} else {
				a->page = page;
				if (len)
					sendto(tp->res_fd, buf, len, MSG_DONTWAIT,
					       (struct sockaddr *)&tp->resolver, sizeof(tp->resolver));
				advert_sent(&a->adv, now, max);
			}
		}
		if (a->adv.at < next)
			next = a->adv.at;
	}
	return next;
}

static uint64_t fad_hash(const char *topic)
{
	return flit_name_hash64(topic) | 2; /* 0 and 1 mark free and removed entries */
}

/* The index entry of topic (h its hash), or of position pos (topic NULL). */
static unsigned fad_slot(const struct fad *a, uint64_t h, const char *topic, uint32_t pos)
{
	for (unsigned j = (unsigned)(h >> 7) & (a->hcap - 1);; j = (j + 1) & (a->hcap - 1)) {
		if (!a->hx[j].h)
			return UINT32_MAX;
		if (a->hx[j].h == h && (topic ? !strcmp(a->topics[a->hx[j].pos], topic) : a->hx[j].pos == pos))
			return j;
	}
}

/* Index topics[pos] (growing or rebuilding the table when full). */
static bool fad_index(struct fad *a, uint32_t pos)
{
	if (2 * (a->hused + 1) > a->hcap) {
		unsigned cap = a->hcap ? a->hcap : 16;
		while (2 * (a->ntopics + 1) > cap)
			cap *= 2;
		void *v = calloc(cap, sizeof(*a->hx));
		if (!v)
			return false;
		free(a->hx);
		a->hx = v;
		a->hcap = cap;
		a->hused = 0;
		for (uint32_t i = 0; i < a->ntopics; i++)
			if (i != pos)
				fad_index(a, i);
	}
	uint64_t h = fad_hash(a->topics[pos]);
	unsigned j = (unsigned)(h >> 7) & (a->hcap - 1);
	while (a->hx[j].h > 1)
		j = (j + 1) & (a->hcap - 1);
	if (!a->hx[j].h)
		a->hused++;
	a->hx[j].h = h;
	a->hx[j].pos = pos;
	return true;
}

static void fad_free(struct fad *a)
{
	for (unsigned i = 0; i < a->ntopics; i++)
		free(a->topics[i]);
	while (a->nans)
		free(a->ans[--a->nans]);
	free(a->topics);
	free(a->hx);
	free(a);
}

void dg_fads_free(struct flit_tp *tp)
{
	while (tp->fads) {
		struct fad *a = tp->fads;
		tp->fads = a->next;
		fad_free(a);
	}
}

int dg_res_advertise(struct flit_tp *tp, const struct flit_res_ad *ad)
{
	struct fad *a;
	char *topic;

	if (!tp->resolver.sin_port || tp->res_fd < 0)
		return flit_err(ENOPROTOOPT, "%s: topic resolution by multicast is off (context.udp.resolver)",
				tp->xp ? "xdp" : "udp");
	if (!ad->topic || strlen(ad->topic) > FLIT_TOPIC_MAX || !(topic = strdup(ad->topic)))
		return flit_err(ad->topic && strlen(ad->topic) > FLIT_TOPIC_MAX ? EINVAL : ENOMEM,
				"udp: cannot advertise topic '%s'", ad->topic ? ad->topic : "");
	pthread_mutex_lock(&tp->lock);
	for (a = tp->fads; a; a = a->next)
		if (a->session == ad->session && a->mode == ad->mode && a->addr == ad->addr &&
		    a->port == ad->port)
			break;
	if (!a && (a = calloc(1, sizeof(*a)))) {
		a->session = ad->session;
		a->mode = ad->mode;
		a->addr = ad->addr;
		a->port = ad->port;
		a->next = tp->fads;
		tp->fads = a;
	}
	if (a && a->ntopics == a->captopics) {
		unsigned cap = a->captopics ? a->captopics * 2 : 4;
		char **v = realloc(a->topics, cap * sizeof(*v));
		if (v) {
			a->topics = v;
			a->captopics = cap;
		}
	}
	if (!a || a->ntopics == a->captopics) {
		pthread_mutex_unlock(&tp->lock);
		free(topic);
		return flit_err(ENOMEM, "udp: cannot advertise topic '%s'", ad->topic);
	}
	a->topics[a->ntopics++] = topic;
	if (!fad_index(a, a->ntopics - 1)) {
		a->ntopics--;
		pthread_mutex_unlock(&tp->lock);
		free(topic);
		return flit_err(ENOMEM, "udp: cannot advertise topic '%s'", ad->topic);
	}
	/* the pages again from the first, soon (a burst of topics: the
	 * resolver's rate paces them) */
	bool soon = a->ntopics == 1 || a->adv.at > mono() + ADVERT_MIN_NS;
	a->page = 0;
	if (soon)
		dg_advert_start(&a->adv, mono());
	pthread_mutex_unlock(&tp->lock);
	if (dg_thread_start(tp))
		flit_warn("%s; advertisements are sent by flit_ctx_poll() only", flit_errmsg());
	if (soon)
		dg_wake(tp); /* its deadline moved earlier */
	return 0;
}

void dg_res_withdraw(struct flit_tp *tp, uint32_t session, const char *topic)
{
	pthread_mutex_lock(&tp->lock);
	for (struct fad **pp = &tp->fads; *pp; pp = &(*pp)->next) {
		struct fad *a = *pp;
		if (a->session != session)
			continue;
		unsigned j = topic && a->hcap ? fad_slot(a, fad_hash(topic), topic, 0) : UINT32_MAX;
		uint32_t i = j != UINT32_MAX ? a->hx[j].pos : topic ? UINT32_MAX : a->ntopics - 1;
		if (i == UINT32_MAX)
			break;
		if (j == UINT32_MAX && a->hcap)
			j = fad_slot(a, fad_hash(a->topics[i]), NULL, i);
		if (j != UINT32_MAX)
			a->hx[j].h = 1; /* removed */
		free(a->topics[i]);
		if (i != --a->ntopics) {
			/* the last topic takes its place */
			unsigned k = fad_slot(a, fad_hash(a->topics[a->ntopics]), NULL, a->ntopics);
			a->topics[i] = a->topics[a->ntopics];
			if (k != UINT32_MAX)
				a->hx[k].pos = i;
		}
		if (!a->ntopics) {
			*pp = a->next;
			fad_free(a);
		}
		break;
	}
	pthread_mutex_unlock(&tp->lock);
}

/* One pass of the source-side service; returns the next deadline. */
uint64_t dg_service_all(struct flit_tp *tp, uint64_t now)
{
	uint64_t next = now + 1000 * MS;

	pthread_mutex_lock(&tp->lock);
	res_service(tp, now);
	uint64_t fdl = fads_service(tp, now);
	if (fdl < next)
		next = fdl;
	for (struct usess *s = tp->srcs; s; s = s->next) {
		src_lock(s);
		uint64_t dl = src_service(s, now);
		if (s->batching && now + s->batch_ivl < dl)
			dl = now + s->batch_ivl; /* a batch may start any time */
		src_unlock(s);
		if (dl < next)
			next = dl;
	}
	pthread_mutex_unlock(&tp->lock);
	return next;
}

/* While the application polls, its poll serves the sources (every
 * HOUSE_NS) and the thread stays asleep: no wake-up steals the CPU of a
 * spinning application.  The thread takes over once polling stops. */
#define POLL_FRESH_NS (2 * MS)
#define POLL_NAP_MAX_NS (50 * MS)

static void *service_thread(void *arg)
{
	struct flit_tp *tp = arg;
	struct epoll_event ev[16];

	uint64_t nap = 0;

	for (;;) {
		uint64_t now = mono();
		uint64_t lp = __atomic_load_n(&tp->last_poll, __ATOMIC_RELAXED);
		if (lp && now - lp < POLL_FRESH_NS) {
			/* the application polls: check back later, less and less
			 * often (up to POLL_NAP_MAX_NS), but within a batch
			 * interval while a batching source exists */
			struct pollfd pf = { .fd = tp->wakefd, .events = POLLIN };
			nap = nap ? nap * 2 : POLL_FRESH_NS;
			if (nap > POLL_NAP_MAX_NS)
				nap = POLL_NAP_MAX_NS;
			uint64_t w = nap, cap = __atomic_load_n(&tp->batch_cap, __ATOMIC_RELAXED);
			if (cap && cap < w)
				w = cap;
			struct timespec to = { .tv_sec = (time_t)(w / 1000000000ull),
					       .tv_nsec = (long)(w % 1000000000ull) };
			if (__atomic_load_n(&tp->stop, __ATOMIC_ACQUIRE))
				break;
			if (ppoll(&pf, 1, &to, NULL) > 0) {
				uint64_t v;
				if (read(tp->wakefd, &v, sizeof(v)) < 0)
					(void)0;
			}
			continue;
		}
		nap = 0;
		uint64_t next = dg_service_all(tp, now);
		if (__atomic_load_n(&tp->stop, __ATOMIC_ACQUIRE))
			break;
		now = mono();
		uint64_t wait = next > now ? next - now : 0;
		struct timespec to = { .tv_sec = (time_t)(wait / 1000000000ull),
				       .tv_nsec = (long)(wait % 1000000000ull) };
		int n = epoll_pwait2(tp->epfd, ev, 16, &to, NULL);
		for (int i = 0; i < n; i++)
			if (ev[i].data.fd == tp->wakefd) {
				uint64_t v;
				if (read(tp->wakefd, &v, sizeof(v)) < 0)
					(void)0;
			}
	}
	return NULL;
}

void dg_wake(struct flit_tp *tp)
{
	uint64_t one = 1;
	if (tp->thread_on && write(tp->wakefd, &one, sizeof(one)) < 0)
		(void)0;
}

void dg_thread_watch(struct flit_tp *tp, int fd)
{
	struct epoll_event e = { .events = EPOLLIN, .data.fd = fd };
	epoll_ctl(tp->epfd, EPOLL_CTL_ADD, fd, &e);
}

/* Start the service thread, watching the resolver and every source so far
 * (sources opened later are added by udp_src_open). */
int dg_thread_start(struct flit_tp *tp)
{
	int err;

	if (tp->thread_on || tp->cc->udp_service != FLIT_UDP_SERVICE_THREAD)
		return 0;
	tp->epfd = epoll_create1(EPOLL_CLOEXEC);
	tp->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (tp->epfd < 0 || tp->wakefd < 0) {
		err = flit_err(errno, "udp: service thread: %s", strerror(errno));
		goto fail;
	}
	dg_thread_watch(tp, tp->wakefd);
	if (tp->res_fd >= 0)
		dg_thread_watch(tp, tp->res_fd);
	pthread_mutex_lock(&tp->lock);
	for (struct usess *s = tp->srcs; s; s = s->next)
		dg_thread_watch(tp, s->fd);
	pthread_mutex_unlock(&tp->lock);
	err = pthread_create(&tp->thread, NULL, service_thread, tp);
	if (err) {
		err = flit_err(err, "udp: cannot start the service thread: %s", strerror(err));
		goto fail;
	}
	pthread_setname_np(tp->thread, "flit-udp");
	tp->thread_on = true;
	return 0;
fail:
	if (tp->epfd >= 0)
		close(tp->epfd);
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	tp->epfd = tp->wakefd = -1;
	return err;
}

/* The service thread's longest nap while the application polls: the
 * shortest batch interval of a batching source (0: none).  tp->lock held. */
void dg_batch_cap_update(struct flit_tp *tp)
{
	uint64_t cap = 0;
	for (struct usess *o = tp->srcs; o; o = o->next)
		if (o->batching && (!cap || o->batch_ivl < cap))
			cap = o->batch_ivl;
	__atomic_store_n(&tp->batch_cap, cap, __ATOMIC_RELAXED);
}
