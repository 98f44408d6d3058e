// SPDX-License-Identifier: BSD-2-Clause
/*
 * The receive side's resolution: queries for the topics subscribers want,
 * static maps, rebinding when subscriptions change; and its timers
 * (housekeeping: NAKs, joins, liveness, queries).
 * (session.h: the state and the shared functions.)
 */
#include "dgram/session.h"

/* ---- receive side: resolution ------------------------------------------------ */

struct qbuild {
	struct flit_tp *tp;
	struct flit_ctl_name names[FLIT_CTL_NAMES_MAX];
	unsigned n;
	size_t bytes;     /* frame length so far: one datagram of <= 1472 */
	bool unresolved_exact, patterns;
};

#define QUERY_DGRAM_MAX 1472u

static bool topic_bound(struct flit_tp *tp, const char *topic)
{
	if (dg_found_has(tp, topic))
		return true;
	for (struct rsess *s = tp->sess; s; s = s->next)
		if (s->core)
			for (unsigned i = 0; i < s->ntopics; i++)
				if (!strcmp(s->tname[i], topic))
					return true;
	return false;
}

static void query_flush(struct qbuild *q)
{
	struct flit_tp *tp = q->tp;
	if (!q->n)
		return;
	size_t len = flit_ctl_query_encode(tp->ctl, sizeof(tp->ctl), 0, tp->domain, q->names, q->n);
	if (tp->resolver.sin_port)
		dg_rx_send(tp, tp->ctl, len, &tp->resolver);
	for (unsigned i = 0; i < tp->nstatic_uc; i++)
		dg_rx_send(tp, tp->ctl, len, &tp->static_uc[i]);
	q->n = 0;
	q->bytes = 0;
}

static int query_add(void *arg, const char *topic, bool pattern,
		     const struct flit_cfg_receiver *rc)
{
	struct qbuild *q = arg;
	(void)rc;
	if (!pattern && topic_bound(q->tp, topic))
		return 0;
	for (unsigned i = 0; i < q->n; i++)
		if (q->names[i].kind == pattern && !strcmp(q->names[i].name, topic))
			return 0;
	if (pattern)
		q->patterns = true;
	else
		q->unresolved_exact = true;
	size_t entry = flit_ctl_name_len(strlen(topic));
	if (!q->bytes)
		q->bytes = FLIT_FRAME_HDR_LEN + 8;
	if (q->bytes + entry > QUERY_DGRAM_MAX)
		query_flush(q);
	if (!q->bytes)
		q->bytes = FLIT_FRAME_HDR_LEN + 8;
	q->bytes += entry;
	q->names[q->n++] = (struct flit_ctl_name){ .kind = pattern ? FLIT_NAME_PATTERN : FLIT_NAME_EXACT,
						   .len = (uint16_t)strlen(topic), .name = topic };
	if (q->n == FLIT_CTL_NAMES_MAX)
		query_flush(q);
	return 0;
}

static void send_queries(struct flit_tp *tp, uint64_t now)
{
	struct qbuild q = { .tp = tp };

	flit_ctx_each_sub(tp->ctx, query_add, &q);
	query_flush(&q);
	tp->query_wanted = q.unresolved_exact || q.patterns;
	uint64_t max = q.unresolved_exact ? QUERY_EXACT_MAX_NS : tp->cc->udp_resolver_max_ms * MS;
	if (max > tp->cc->udp_resolver_max_ms * MS)
		max = tp->cc->udp_resolver_max_ms * MS;
	tp->query_ivl = tp->query_ivl * 2 > max ? max : tp->query_ivl * 2;
	if (!q.unresolved_exact && !q.patterns)
		tp->query_ivl = UINT64_MAX / 4; /* nothing to ask for */
	tp->query_at = now + tp->query_ivl;
}

/* Static topic map: listen on the multicast groups, query the unicast
 * addresses that subscribers' receiver.udp.static name. */
struct stbuild { struct flit_tp *tp; int err; };

static int static_add(void *arg, const char *topic, bool pattern,
		      const struct flit_cfg_receiver *rc)
{
	struct stbuild *b = arg;
	struct flit_tp *tp = b->tp;
	struct sockaddr_in a;
	(void)topic; (void)pattern;

	if (!rc->udp_static[0])
		return 0;
	flit_ep_parse(rc->udp_static, &a);
	if (IN_MULTICAST(ntohl(a.sin_addr.s_addr))) {
		struct rsock **v = realloc(tp->statics, (tp->nstatic + 1) * sizeof(*v));
		if (!v)
			return b->err = flit_err(ENOMEM, "udp: out of memory");
		tp->statics = v;
		struct rsock *r = dg_rsock_get(tp, a.sin_addr, ntohs(a.sin_port));
		if (!r) {
			flit_warn("udp: receiver.udp.static %s: %s", rc->udp_static, flit_errmsg());
			return 0;
		}
		tp->statics[tp->nstatic++] = r;
	} else {
		for (unsigned i = 0; i < tp->nstatic_uc; i++)
			if (same_ep(&tp->static_uc[i], &a))
				return 0;
		struct sockaddr_in *v = realloc(tp->static_uc, (tp->nstatic_uc + 1) * sizeof(*v));
		if (!v)
			return b->err = flit_err(ENOMEM, "udp: out of memory");
		tp->static_uc = v;
		tp->static_uc[tp->nstatic_uc++] = a;
	}
	return 0;
}

void dg_statics_release(struct flit_tp *tp)
{
	for (unsigned i = 0; i < tp->nstatic; i++)
		dg_rsock_put(tp, tp->statics[i]);
	tp->nstatic = 0;
	tp->nstatic_uc = 0;
}

/* Bind sessions that became wanted, unbind those no longer wanted. */
void dg_rebind(struct flit_tp *tp, uint64_t now)
{
	struct stbuild b = { .tp = tp };

	dg_statics_release(tp);
	if (tp->xp) {
		dg_part_reports(tp, now);           /* parted sessions' last drops */
		flit_xdp_path_unfilter_all(tp->xp); /* wants changed: learn again */
		for (struct rsess *s = tp->sess; s; s = s->next)
			s->parted = s->part_failed = s->part_eval = false;
		tp->nparted = 0;
	}
	flit_ctx_each_sub(tp->ctx, static_add, &b);
	for (struct rsess *s = tp->sess, *next; s; s = next) {
		next = s->next;
		bool want = s->ntopics && dg_sess_wanted(s);
		if (want && !s->core) {
			/* start where the source is now: a late joiner */
			if (dg_sess_bind(s, 0, false, now) < 0)
				flit_warn("udp: cannot join session %08x: %s", s->id, flit_errmsg());
		} else if (!want && s->core) {
			dg_sess_unbind(s, 0, true);
			dg_sess_delete(tp, s);
		}
	}
	for (struct rsess *s = tp->sess; s && tp->xp; s = s->next)
		dg_part_sync(s);    /* what is wanted now */
	dg_update_ucast_need(tp);
	tp->query_ivl = QUERY_MIN_NS / 2;
	tp->query_at = now;
	tp->next_house = now;   /* the query at the next poll, not up to HOUSE_NS on */
	tp->dirty = false;
	if (!tp->in_poll)
		dg_rsock_reap(tp);
}

/* xdp with context.xdp.tx_timestamps: hand the AF_XDP completion stamps to
 * the sources whose frames they carried (by the session id in the frame
 * header), where flit_pub_tx_stamp() finds them. */

void dg_xsk_tx_stamps_route(struct flit_tp *tp)
{
	struct flit_xsk_tx_stamp st[64];
	int n;

	if (!tp->xk_tx_ts)
		return;
	pthread_mutex_lock(&tp->lock);
	while ((n = flit_xsk_tx_stamps(tp->xk, st, 64)) > 0) {
		for (int i = 0; i < n; i++) {
			size_t hl = st[i].len < FLIT_XSK_TX_STAMP_HEAD ? st[i].len : FLIT_XSK_TX_STAMP_HEAD;
			if (hl < FLIT_FRAME_HDR_LEN)
				continue;
			uint32_t session = flit_ld32(st[i].head + 12);
			for (struct usess *s = tp->srcs; s; s = s->next)
				if (s->session == session && s->txts) {
					src_lock(s);
					flit_txts_stamped(s->txts, st[i].head, hl, st[i].ts_ns, st[i].flags);
					src_unlock(s);
					break;
				}
		}
		if (n < 64)
			break;
	}
	pthread_mutex_unlock(&tp->lock);
}

/* Timers of the receive side: NAKs, joins, liveness, queries. */
int dg_housekeeping(struct flit_tp *tp, uint64_t now, int limit)
{
	struct flit_seq_range naks[FLIT_CTL_RANGES_MAX];
	uint64_t next = now + HOUSE_NS;
	int ev = 0;

	if (tp->res_rx)
		ev += dg_drain(tp, tp->res_rx, &tp->res_want, limit, now);
	if ((!tp->want_ucast_every_poll || tp->xk) && tp->ucast)
		ev += dg_drain(tp, tp->ucast, &tp->ucast_want, limit, now);
	if (tp->xk) {
		/* what XDP left to the kernel on our flows: fragments, or
		 * everything once the program was detached under us */
		int k = 0;
		for (struct rsock *r = tp->socks; r; r = r->next)
			if (r->refs) {
				int n = dg_drain(tp, r->io, &r->want, limit, now);
				k += n > 0 ? n : 0;
			}
		if (k && !tp->xk_fallback_warned) {
			tp->xk_fallback_warned = true;
			flit_warn("xdp: data arrives through kernel sockets (program detached, or fragments?): "
				  "it is delivered, but at housekeeping pace");
		}
		ev += k;
		flit_xsk_tx_service(tp->xk);
		dg_xsk_tx_stamps_route(tp);
	}
	for (struct rsess *s = tp->sess, *sn; s; s = sn) {
		sn = s->next;
		if (!s->core) {
			/* an unbound session we heard of: forget it when silent */
			if (now - s->last_heard > 10000 * MS)
				dg_sess_delete(tp, s);
			continue;
		}
		if (now - s->last_heard > s->timeout_ns) {
			flit_info("udp: session %08x silent for %llu ms: source gone",
				  s->id, (unsigned long long)((now - s->last_heard) / MS));
			ev += dg_sess_unbind(s, FLIT_MSGF_SOURCE_DIED, false);
			dg_sess_ended(tp, s, now);
			continue;
		}
		if (now >= s->next_join) {
			dg_send_join(s, 0);
			s->next_join = now + JOIN_NS;
		}
		if (s->lj_wait) {
			if (now >= s->lj_at) {
				if (s->lj_tries++ < LATE_TRIES) {
					dg_send_join(s, FLIT_JF_LATE);
					s->lj_at = now + (LATE_WAIT_NS << s->lj_tries);
				} else {
					/* a source that does not answer (an older
					 * flit): start where INFO said */
					ev += dg_sess_start(s, NULL, s->lj_fallback);
				}
			}
			if (s->lj_wait) {
				if (s->lj_at < next)
					next = s->lj_at;
				continue;
			}
		}
		if (flit_rel_rx_deadline(s->rel) <= now) {
			unsigned n = 0;
			int r = flit_rel_rx_timer(s->rel, now, naks, FLIT_CTL_RANGES_MAX, &n);
			if (r > 0)
				ev += r;
			if (n) {
				size_t len = flit_ctl_ranges_encode(tp->ctl, sizeof(tp->ctl), FLIT_FT_NAK,
								    s->id, 0, naks, n);
				dg_rx_send(tp, tp->ctl, len, &s->ctl);
				flit_ctx_rx_counters(tp->ctx)->naks_sent += n;
			}
		}
		uint64_t dl = flit_rel_rx_deadline(s->rel);
		if (dl < next)
			next = dl;
	}
	if (now >= tp->query_at)
		send_queries(tp, now);
	tp->next_house = next;
	return ev;
}
