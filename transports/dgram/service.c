// SPDX-License-Identifier: BSD-2-Clause
/*
 * The source side's service: NAKs and retransmissions, queries, joins,
 * heartbeats, adverts on the resolver channel, other transports' adverts;
 * and the context's service thread that runs it (context.udp.service).
 * (session.h: the state and the shared functions.)
 */
#include "dgram/session.h"

/* ---- source side: the service (NAKs, queries, joins, timers) ------------- */

static size_t src_info(struct udp_src *s, void *buf, size_t cap)
{
	struct flit_tp *tp = s->tp;
	struct flit_ctl_info in = {
		.domain = tp->domain,
		.mode = s->mode,
		.data_port = s->mode == FLIT_MODE_MCAST ? ntohs(s->dest.sin_port) : ntohs(s->self.sin_port),
		.data_addr = s->mode == FLIT_MODE_MCAST ? s->dest.sin_addr.s_addr : 0,
		.ctl_addr = s->self.sin_addr.s_addr,
		.ctl_port = ntohs(s->self.sin_port),
		.pid = (uint32_t)getpid(),
	};
	struct flit_ctl_name t = { .idx = 0, .kind = FLIT_NAME_EXACT,
				   .len = (uint16_t)strlen(s->topic), .name = s->topic };
	return flit_ctl_info_encode(buf, cap, s->session, flit_rel_tx_next(s->rel), &in, &t, 1);
}

static void src_add_rcv(struct udp_src *s, const struct sockaddr_in *a, bool leave, uint64_t now)
{
	for (unsigned i = 0; i < s->nrcv; i++)
		if (same_ep(&s->rcv[i].a, a)) {
			if (leave)
				s->rcv[i] = s->rcv[--s->nrcv];
			else
				s->rcv[i].expires = now + RCV_EXPIRE_NS;
			return;
		}
	if (leave)
		return;
	if (s->nrcv == s->caprcv) {
		unsigned cap = s->caprcv ? s->caprcv * 2 : 4;
		if (cap > 4096)
			return; /* a flood of joins: ignore beyond this */
		struct urcv *v = realloc(s->rcv, cap * sizeof(*v));
		if (!v)
			return;
		s->rcv = v;
		s->caprcv = cap;
	}
	s->rcv[s->nrcv++] = (struct urcv){ .a = *a, .expires = now + RCV_EXPIRE_NS };
}

/* Does a QUERY (checked) name `topic`, exactly or by a pattern? */
static bool query_wants(const uint8_t *q, const struct flit_frame_hdr *h, const char *topic)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	char name[FLIT_TOPIC_MAX + 1];

	flit_ctl_names_init(&it, q, h);
	while (flit_ctl_names_next(&it, &nm)) {
		dg_ctl_name_str(&nm, name);
		if (nm.kind == FLIT_NAME_PATTERN ? fnmatch(name, topic, 0) == 0 : !strcmp(name, topic))
			return true;
	}
	return false;
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

/* A control datagram that arrived on the source's own socket. */
static void src_ctl(struct udp_src *s, const uint8_t *p, size_t len,
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
		bool match = h.session_id == s->session || query_wants(p, &h, s->topic);
		/* at most one direct answer per millisecond: a flood of
		 * queries must not turn into a flood of answers */
		if (match && now - s->last_direct >= 1 * MS) {
			s->last_direct = now;
			size_t l = src_info(s, s->ctl, sizeof(s->ctl));
			if (sendto(s->fd, s->ctl, l, MSG_DONTWAIT, (const struct sockaddr *)from,
				   sizeof(*from)) >= 0 && s->txts)
				flit_txts_sent(s->txts, s->ctl, l, 1);
		}
		break;
	}
	case FLIT_FT_JOIN:
		if (h.session_id != s->session || flit_ctl_domain(p) != tp->domain)
			break;
		src_add_rcv(s, from, h.flags & FLIT_JF_LEAVE, now);
		if (h.flags & FLIT_JF_LATE) {
			/* where the live stream starts, and what is retained */
			uint64_t next = flit_rel_tx_next(s->rel);
			struct flit_ctl_late late = {
				.trail = flit_rel_tx_trail(s->rel, now),
				.origin = 0, /* next_seq starts there */
				.age_ns = now - s->created,
				.late_join = s->late_join,
			};
			size_t l = flit_ctl_late_encode(s->ctl, sizeof(s->ctl), s->session, next, &late);
			if (l && sendto(s->fd, s->ctl, l, MSG_DONTWAIT, (const struct sockaddr *)from,
					sizeof(*from)) >= 0 && s->txts)
				flit_txts_sent(s->txts, s->ctl, l, 1);
		}
		break;
	default:
		break; /* our own multicast looped back, or noise */
	}
}

/* Run the source's service; returns its next deadline.  Lock held. */
static uint64_t src_service(struct udp_src *s, uint64_t now)
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
	/* advertisement with backoff */
	if (now >= s->adv.at && tp->resolver.sin_port && tp->res_fd >= 0) {
		len = src_info(s, s->ctl, sizeof(s->ctl));
		sendto(tp->res_fd, s->ctl, len, MSG_DONTWAIT, (struct sockaddr *)&tp->resolver,
		       sizeof(tp->resolver));
		advert_sent(&s->adv, now, tp->cc->udp_resolver_max_ms * MS);
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
		for (struct udp_src *s = tp->srcs; s; s = s->next) {
			if (!query_wants(tp->rbuf, &h, s->topic))
				continue;
			src_lock(s);
			advert_soon(tp, &s->adv, now);
			src_unlock(s);
		}
		for (struct fad *a = tp->fads; a; a = a->next)
			if (query_wants(tp->rbuf, &h, a->topic))
				advert_soon(tp, &a->adv, now);
	}
}


/* Advertise the other transports' sources that are due.  tp->lock held.
 * Returns the next deadline. */
static uint64_t fads_service(struct flit_tp *tp, uint64_t now)
{
	uint64_t next = UINT64_MAX, max = tp->cc->udp_resolver_max_ms * MS;

	if (!tp->resolver.sin_port || tp->res_fd < 0)
		return next;
	for (struct fad *a = tp->fads; a; a = a->next) {
		if (now >= a->adv.at) {
			uint8_t buf[512] __attribute__((aligned(8))); /* one 255-byte topic: 312 */
			struct flit_ctl_info in = {
				.domain = tp->domain, .mode = a->mode,
				.data_port = a->port, .data_addr = a->addr,
				.pid = (uint32_t)getpid(),
			};
			struct flit_ctl_name t = { .idx = 0, .kind = FLIT_NAME_EXACT,
						   .len = (uint16_t)strlen(a->topic), .name = a->topic };
			size_t len = flit_ctl_info_encode(buf, sizeof(buf), a->session, 0, &in, &t, 1);
			if (len)
				sendto(tp->res_fd, buf, len, MSG_DONTWAIT,
				       (struct sockaddr *)&tp->resolver, sizeof(tp->resolver));
			advert_sent(&a->adv, now, max);
		}
		if (a->adv.at < next)
			next = a->adv.at;
	}
	return next;
}

int dg_res_advertise(struct flit_tp *tp, const struct flit_res_ad *ad)
{
	struct fad *a;

	if (!tp->resolver.sin_port || tp->res_fd < 0)
		return flit_err(ENOPROTOOPT, "%s: topic resolution by multicast is off (context.udp.resolver)",
				tp->xp ? "xdp" : "udp");
	if (strlen(ad->topic) > FLIT_TOPIC_MAX || !(a = calloc(1, sizeof(*a))))
		return flit_err(ad->topic && strlen(ad->topic) > FLIT_TOPIC_MAX ? EINVAL : ENOMEM,
				"udp: cannot advertise topic '%s'", ad->topic);
	a->session = ad->session;
	a->mode = ad->mode;
	a->addr = ad->addr;
	a->port = ad->port;
	strcpy(a->topic, ad->topic);
	dg_advert_start(&a->adv, mono());
	pthread_mutex_lock(&tp->lock);
	a->next = tp->fads;
	tp->fads = a;
	pthread_mutex_unlock(&tp->lock);
	if (dg_thread_start(tp))
		flit_warn("%s; advertisements are sent by flit_ctx_poll() only", flit_errmsg());
	dg_wake(tp);
	return 0;
}

void dg_res_withdraw(struct flit_tp *tp, uint32_t session)
{
	pthread_mutex_lock(&tp->lock);
	for (struct fad **pp = &tp->fads; *pp; pp = &(*pp)->next)
		if ((*pp)->session == session) {
			struct fad *a = *pp;
			*pp = a->next;
			free(a);
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
	for (struct udp_src *s = tp->srcs; s; s = s->next) {
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
	for (struct udp_src *s = tp->srcs; s; s = s->next)
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
	for (struct udp_src *o = tp->srcs; o; o = o->next)
		if (o->batching && (!cap || o->batch_ivl < cap))
			cap = o->batch_ivl;
	__atomic_store_n(&tp->batch_cap, cap, __ATOMIC_RELAXED);
}
