// SPDX-License-Identifier: BSD-2-Clause
/*
 * The udp, xdp and rdma multicast transports' operations (flit_udp_ops,
 * flit_xdp_ops, flit_rdma_mc_ops):
 * timestamps set-up, opening a context's transport, sources opened and
 * closed, and the poll.
 * (session.h: the state and the shared functions.)
 */
#include <ifaddrs.h>

#include "dgram/session.h"

/* ---- timestamps -------------------------------------------------------------- */

_Static_assert((int)FLIT_UDP_TS_OFF == (int)FLIT_TS_NONE &&
	       (int)FLIT_UDP_TS_SOFTWARE == (int)FLIT_TS_SOFTWARE &&
	       (int)FLIT_UDP_TS_HARDWARE == (int)FLIT_TS_HARDWARE, "config and API timestamp kinds differ");

/* NIC hardware stamping where the configuration asks for it (the one place
 * that sets a NIC up: flit_hwts_enable()), and what is in effect, for
 * flit_ctx_ts_status() and the description.  Never fails: without hardware
 * the stamps are the kernel's software ones, and tp->ts.why says why. */
static void ts_setup(struct flit_tp *tp, bool xdp)
{
	const struct flit_cfg_context *cc = tp->cc;
	struct flit_ts_status *t = &tp->ts;
	struct flit_ts_info ti = { .sz = sizeof(ti) };
	unsigned dirs = 0, ok = 0;

	memset(t, 0, sizeof(*t));
	t->sz = sizeof(*t);
	t->rx_asked = t->rx = cc->udp_timestamps;
	/* xdp sends data through AF_XDP: its stamps are context.xdp.* */
	t->tx_asked = t->tx = xdp ? FLIT_TS_NONE : cc->udp_tx_timestamps;
	t->phc_index = -1;
	snprintf(t->ifname, sizeof(t->ifname), "%s", cc->udp_interface);
	if (cc->udp_interface[0] && flit_ts_info_get(cc->udp_interface, &ti) == 0)
		t->phc_index = ti.phc_index;
	dirs = (t->rx == FLIT_TS_HARDWARE ? FLIT_HWTS_RX : 0) | (t->tx == FLIT_TS_HARDWARE ? FLIT_HWTS_TX : 0);
	if (!dirs)
		return;
	if (!cc->udp_interface[0]) {
		snprintf(t->why, sizeof(t->why), "hardware timestamps need context.udp.interface "
			 "(the NIC to set up)");
	} else if (flit_hwts_enable(cc->udp_interface, dirs, NULL) == 0) {
		ok = dirs;
	} else {
		snprintf(t->why, sizeof(t->why), "%s", flit_errmsg());
		/* perhaps one direction only (the first reason is kept) */
		if (dirs == (FLIT_HWTS_RX | FLIT_HWTS_TX)) {
			ok |= flit_hwts_enable(cc->udp_interface, FLIT_HWTS_RX, NULL) == 0 ? FLIT_HWTS_RX : 0;
			ok |= flit_hwts_enable(cc->udp_interface, FLIT_HWTS_TX, NULL) == 0 ? FLIT_HWTS_TX : 0;
		}
	}
	if (ok == dirs) {
		t->why[0] = '\0';
		return;
	}
	if ((dirs & ~ok) & FLIT_HWTS_RX)
		t->rx = FLIT_TS_SOFTWARE;
	if ((dirs & ~ok) & FLIT_HWTS_TX)
		t->tx = FLIT_TS_SOFTWARE;
	flit_warn("udp: hardware timestamps asked for but not available: %s; using software stamps", t->why);
}

/* "; stamps: rx software, tx software (hardware asked for, not available:
 * ...)", or where the driver accepted hardware stamping "; stamps set up: rx
 * hardware, tx hardware on eth1 (the NIC's where it gives one, else the
 * kernel's)": a set-up, not what the stamps were (a driver may accept and
 * never stamp); each message and transmit stamp says its own kind. */
static void ts_describe(struct flit_tp *tp)
{
	const struct flit_ts_status *t = &tp->ts;
	size_t l = strlen(tp->desc);

	if (!t->rx_asked && !t->tx_asked)
		return;
	if (t->rx == FLIT_TS_HARDWARE || t->tx == FLIT_TS_HARDWARE)
		snprintf(tp->desc + l, sizeof(tp->desc) - l, "; stamps set up: rx %s, tx %s%s%s "
			 "(the NIC's where it gives one, else the kernel's)%s%s%s",
			 flit_ts_kind_name(t->rx), flit_ts_kind_name(t->tx),
			 t->ifname[0] ? " on " : "", t->ifname,
			 t->why[0] ? " (hardware asked for, not available: " : "", t->why,
			 t->why[0] ? ")" : "");
	else
		snprintf(tp->desc + l, sizeof(tp->desc) - l, "; stamps: rx %s, tx %s%s%s%s",
			 flit_ts_kind_name(t->rx), flit_ts_kind_name(t->tx),
			 t->why[0] ? " (hardware asked for, not available: " : "", t->why,
			 t->why[0] ? ")" : "");
}

static int udp_ts_status(const struct flit_tp *tp, struct flit_ts_status *out)
{
	struct flit_ts_status v = tp->ts;

	if (tp->xp && !v.why[0]) {
		const char *why = flit_xdp_path_ts_why(tp->xp);
		if (why && why[0])
			snprintf(v.why, sizeof(v.why), "%s", why);
		else if (v.tx_asked == FLIT_TS_HARDWARE && v.tx == FLIT_TS_SOFTWARE)
			snprintf(v.why, sizeof(v.why), "%s: AF_XDP in copy mode: the kernel's software "
				 "stamp at completion, not the NIC's", v.ifname);
	}
	v.sz = out->sz < sizeof(v) ? out->sz : sizeof(v);
	memcpy(out, &v, v.sz);
	return 0;
}

/* ---- transport operations --------------------------------------------------- */

/* The interface that has IPv4 address a: its index, or 0. */
static unsigned if_of_addr(struct in_addr a)
{
	struct ifaddrs *ifs, *i;
	unsigned idx = 0;

	if (getifaddrs(&ifs))
		return 0;
	for (i = ifs; i && !idx; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a.s_addr)
			idx = if_nametoindex(i->ifa_name);
	freeifaddrs(ifs);
	return idx;
}

/* rdma multicast: the UD path on the device of context.rdma.address, else
 * of context.udp.interface's address, else on the first RDMA device with an
 * IPv4 address.  Never fails the transport: without
 * it (no such device, a device without UD, no address to find one by) the
 * transport hears no rdma multicast session and its sources are refused,
 * saying why (tp->desc); an rdma context of RC sources runs on. */
static void ud_setup(struct flit_tp *tp)
{
	const struct flit_cfg_context *cc = tp->cc;
	int err = 0;

	if (!tp->ifaddr.s_addr)
		err = flit_err(EINVAL, "no RDMA device with an IPv4 address: set context.rdma.address "
			       "(the device's IPv4 address) or context.udp.interface");
	else
		err = flit_ud_path_open(tp->ifaddr, cc->rdma_mc_depth, &tp->ud);
	if (!err && cc->udp_impair[0])
		err = flit_impair_open(&tp->iocfg.impair, tp->iocfg.batch, flit_ud_path_max(tp->ud), &tp->ud_im);
	if (err) {
		snprintf(tp->desc, sizeof(tp->desc), "rdma multicast: unavailable (%s)", flit_errmsg());
		flit_info("%s", tp->desc);
		flit_ud_path_close(tp->ud);
		tp->ud = NULL;
		return;
	}
	tp->ud_max = flit_ud_path_max(tp->ud);
	snprintf(tp->desc, sizeof(tp->desc), "%s; control and retransmissions over udp: %s%s%s",
		 flit_ud_path_describe(tp->ud), flit_udp_io_describe(tp->ucast),
		 tp->ud_im ? "; receive " : "", tp->ud_im ? flit_impair_describe(tp->ud_im) : "");
	flit_info("%s", tp->desc);
}

enum { PATH_SOCKETS, PATH_XDP, PATH_UD };

static int tp_open(struct flit_ctx *ctx, int path, struct flit_tp **out)
{
	const struct flit_cfg_context *cc = flit_ctx_cfg(ctx);
	struct flit_tp *tp = calloc(1, sizeof(*tp));
	const bool xdp = path == PATH_XDP;
	int err = 0, fd;

	if (!tp)
		return flit_err(ENOMEM, "udp: out of memory");
	tp->ctx = ctx;
	tp->cc = cc;
	tp->res_fd = tp->epfd = tp->wakefd = -1;
	tp->domain = flit_domain_id(cc->domain);
	tp->rng = mono() ^ ((uint64_t)getpid() << 32);
	tp->srng = tp->rng * 0x9e3779b97f4a7c15ull + 1;
	/* resolution's bytes/s; a 64 KiB burst (~45 pages) goes at once */
	flit_rl_init(&tp->res_rl, cc->udp_resolver_rate_limit / 8, 64 * 1024, mono());
	pthread_mutex_init(&tp->lock, NULL);
	tp->iocfg = (struct flit_udp_io_cfg){
		.backend = cc->udp_backend == 1 ? FLIT_UDP_URING : FLIT_UDP_SOCKETS,
		.batch = cc->udp_rx_batch,
		.dgram_max = RX_DGRAM_MAX,
		.timestamps = cc->udp_timestamps != FLIT_UDP_TS_OFF,
		.uring_ring_send = cc->udp_uring_send == FLIT_UDP_URING_SEND_RING,
		.uring_poll_recv = cc->udp_uring_recv == FLIT_UDP_URING_RECV_POLL,
	};
	if (cc->udp_impair[0] && (err = flit_dgram_impair_parse(cc->udp_impair, &tp->iocfg.impair)))
		goto fail;
	if (cc->udp_interface[0]) {
		struct ifreq ifr = { 0 };
		tp->ifindex = if_nametoindex(cc->udp_interface);
		if (!tp->ifindex) {
			err = flit_err(ENODEV, "udp: context.udp.interface %s: no such interface", cc->udp_interface);
			goto fail;
		}
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", cc->udp_interface);
		if (fd >= 0 && ioctl(fd, SIOCGIFADDR, &ifr) == 0)
			tp->ifaddr = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr;
		if (fd >= 0)
			close(fd);
		if (!tp->ifaddr.s_addr) {
			err = flit_err(EADDRNOTAVAIL, "udp: context.udp.interface %s has no IPv4 address",
				       cc->udp_interface);
			goto fail;
		}
	}
	if (path == PATH_UD) {
		tp->ud_mode = true;
		char dev[64];
		if (cc->rdma_address[0] && !cc->udp_interface[0]) {
			/* the device's interface carries the udp side too */
			inet_pton(AF_INET, cc->rdma_address, &tp->ifaddr);
			tp->ifindex = if_of_addr(tp->ifaddr);
		} else if (!cc->udp_interface[0] && flit_ud_path_default_addr(&tp->ifaddr, dev, sizeof(dev)) == 0) {
			tp->ifindex = if_of_addr(tp->ifaddr);
			flit_debug("rdma multicast: on %s, the first RDMA device with an IPv4 address", dev);
		}
	}
	ts_setup(tp, xdp);
	tp->dg = calloc(tp->iocfg.batch, sizeof(*tp->dg));
	if (!tp->dg) {
		err = flit_err(ENOMEM, "udp: out of memory");
		goto fail;
	}
	/* the receiver's unicast socket */
	fd = dg_udp_socket(tp, tp->ifaddr, 0, false, true);
	if (fd < 0 || (err = dg_io_wrap(tp, fd, true, &tp->ucast))) {
		err = fd < 0 ? fd : err;
		goto fail;
	}
	if (xdp) {
		socklen_t sl = sizeof(tp->ucast_self);
		getsockname(flit_udp_io_fd(tp->ucast), (struct sockaddr *)&tp->ucast_self, &sl);
		if (!tp->ifaddr.s_addr) {
			err = flit_err(EINVAL, "xdp: context.udp.interface must name the interface to use");
			goto fail;
		}
		if ((err = flit_xdp_path_open(cc, &tp->xp)))
			goto fail;
		tp->xk = flit_xdp_path_xsk(tp->xp);
		tp->xk_max = flit_xsk_max_payload(tp->xk);
		if (cc->xdp_rx_timestamps)
			tp->ts.rx_asked = tp->ts.rx = FLIT_TS_HARDWARE;
		if (cc->xdp_tx_timestamps && flit_xsk_tx_clock(tp->xk)) {
			/* AF_XDP TX metadata: the kernel's software stamp in
			 * copy mode, the NIC's in zero-copy mode */
			tp->xk_tx_ts = true;
			tp->ts.tx_asked = FLIT_TS_HARDWARE;
			tp->ts.tx = strcmp(flit_xsk_tx_clock(tp->xk), "phc") == 0 ? FLIT_TS_HARDWARE
										  : FLIT_TS_SOFTWARE;
		}
		if ((err = flit_xdp_path_flow_get(tp->xp, tp->ifaddr, tp->ucast_self.sin_port)))
			goto fail;
		if (cc->udp_impair[0]) {
			/* tests: the same impairment as the socket path */
			if ((err = flit_impair_open(&tp->iocfg.impair, tp->iocfg.batch, RX_DGRAM_MAX,
						    &tp->xk_im))) {
				err = flit_err_wrap(-err, "xdp");
				goto fail;
			}
		}
		snprintf(tp->desc, sizeof(tp->desc), "%s%s%s", flit_xdp_path_describe(tp->xp),
			 tp->xk_im ? "; receive " : "", tp->xk_im ? flit_impair_describe(tp->xk_im) : "");
		flit_info("%s", tp->desc);
	} else if (path == PATH_UD) {
		ud_setup(tp);
	} else {
		snprintf(tp->desc, sizeof(tp->desc), "udp: %s", flit_udp_io_describe(tp->ucast));
	}
	ts_describe(tp);
	/* the resolver channel: adverts for the receive side, queries for
	 * the source side (two sockets on one group:port) */
	if (strcmp(cc->udp_resolver, "off")) {
		flit_ep_parse(cc->udp_resolver, &tp->resolver);
		fd = dg_udp_socket(tp, (struct in_addr){ INADDR_ANY }, ntohs(tp->resolver.sin_port), true, true);
		if (fd >= 0 && dg_join_group(tp, fd, tp->resolver.sin_addr)) {
			close(fd);
			fd = -1;
		}
		/* io_wrap owns fd from here, even when it fails */
		if (fd >= 0 && dg_io_wrap(tp, fd, true, &tp->res_rx) == 0) {
			fd = dg_udp_socket(tp, (struct in_addr){ INADDR_ANY }, ntohs(tp->resolver.sin_port), true, true);
			if (fd >= 0 && dg_join_group(tp, fd, tp->resolver.sin_addr) == 0)
				tp->res_fd = fd;
			else if (fd >= 0)
				close(fd);
		}
		if (tp->res_fd < 0) {
			flit_warn("udp: resolver %s unusable (%s): topic resolution by multicast is off; "
				  "use receiver.udp.static or set context.udp.interface",
				  cc->udp_resolver, flit_errmsg());
			tp->resolver.sin_port = 0;
		}
	}
	tp->next_house = mono();
	tp->xk_tick_at = tp->next_house;
	tp->xk_skip = 1;        /* every poll reads the clock until polls prove fast */
	tp->query_ivl = QUERY_MIN_NS / 2;
	*out = tp;
	return 0;
fail:
	flit_impair_close(tp->xk_im);
	flit_xdp_path_close(tp->xp);
	flit_impair_close(tp->ud_im);
	flit_ud_path_close(tp->ud);
	flit_udp_io_close(tp->ucast);
	free(tp->dg);
	free(tp);
	return err;
}

static int udp_open(struct flit_ctx *ctx, struct flit_tp **out)
{
	return tp_open(ctx, PATH_SOCKETS, out);
}

static const char *udp_describe(const struct flit_tp *tp)
{
	return tp->desc;
}

static int xdp_open(struct flit_ctx *ctx, struct flit_tp **out)
{
	return tp_open(ctx, PATH_XDP, out);
}

#ifdef FLIT_HAVE_RDMA
static int rdma_mc_open(struct flit_ctx *ctx, struct flit_tp **out)
{
	return tp_open(ctx, PATH_UD, out);
}
#endif

static void udp_close(struct flit_tp *tp)
{
	if (tp->thread_on) {
		__atomic_store_n(&tp->stop, true, __ATOMIC_RELEASE);
		dg_wake(tp);
		pthread_join(tp->thread, NULL);
	}
	while (tp->sess) {
		dg_sess_unbind(tp->sess, 0, true);
		dg_sess_delete(tp, tp->sess);
	}
	dg_statics_release(tp);
	free(tp->statics);
	dg_fads_free(tp);
	dg_heard_free(tp);
	for (unsigned i = 0; i < tp->nfound; i++)
		free(tp->found[i]);
	free(tp->found);
	free(tp->static_uc);
	dg_rsock_reap(tp);
	flit_impair_close(tp->xk_im);
	flit_xdp_path_close(tp->xp); /* removes our flows, filter, sockets */
	tp->xp = NULL;
	tp->xk = NULL;
	flit_impair_close(tp->ud_im);
	flit_ud_path_close(tp->ud); /* leaves its groups */
	tp->ud = NULL;
	while (tp->socks) {
		struct rsock *r = tp->socks;
		tp->socks = r->next;
		flit_udp_io_close(r->io);
		free(r);
	}
	flit_udp_io_close(tp->ucast);
	flit_udp_io_close(tp->res_rx);
	if (tp->res_fd >= 0)
		close(tp->res_fd);
	if (tp->epfd >= 0)
		close(tp->epfd);
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	pthread_mutex_destroy(&tp->lock);
	free(tp->dg);
	free(tp);
}

/* The group of a topic: a fixed group, or one of a range by topic hash. */
static struct in_addr pick_group(const char *spec, const char *topic)
{
	char b[FLIT_ENDPOINT_MAX];
	struct in_addr a;
	snprintf(b, sizeof(b), "%s", spec);
	char *slash = strchr(b, '/');
	unsigned bits = 32;
	if (slash) {
		*slash = '\0';
		bits = (unsigned)atoi(slash + 1);
	}
	inet_pton(AF_INET, b, &a);
	if (bits < 32) {
		uint32_t host = ~0u >> bits, base = ntohl(a.s_addr) & ~host;
		uint32_t h = flit_domain_id(topic) & host;
		if (h == 0 && host > 1)
			h = 1; /* avoid .0 */
		a.s_addr = htonl(base | h);
	}
	return a;
}

/* The source settings the publishers of one session must share. */
static void cfg_key(const struct flit_cfg_source *c, char *buf, size_t len)
{
	snprintf(buf, len, "mode %d group %s port %u ctl_port %u max_datagram %u batch %d batch_min %u "
		 "batch_interval_us %u rate_limit %llu retx_rate_limit %llu retain %llu retain_ms %u "
		 "hb %u..%u timestamps %d late_join %u topic_numbers %d",
		 c->udp_mode, c->udp_group, c->udp_port, c->udp_ctl_port, c->udp_max_datagram, c->batch,
		 c->udp_batch_min, c->udp_batch_interval_us, (unsigned long long)c->udp_rate_limit,
		 (unsigned long long)c->udp_retx_rate_limit, (unsigned long long)c->udp_retain,
		 c->udp_retain_ms, c->udp_hb_min_ms, c->udp_hb_max_ms, c->timestamps, c->late_join,
		 c->udp_topic_numbers);
}

/* Topic t joins session s (lock held): the next index, its page advertised
 * now.  1: the service should be woken for it, 0: it wakes soon anyway,
 * or -ENOSPC. */
static int sess_add_topic(struct usess *s, struct utopic *t, uint64_t now)
{
	unsigned idx = s->ntopics;

	if (s->ntopics >= MAX_TOPICS_PER_SESS && s->live < s->ntopics) {
		/* every index was used once: take one whose topic ended (its
		 * receivers had its end; a page names the new topic) */
		idx = 0;
		while (s->topics[idx])
			idx++;
	} else if (s->ntopics == s->captopics) {
		if (s->ntopics >= MAX_TOPICS_PER_SESS)
			return flit_err(ENOSPC, "udp: session '%s' holds %u topics, the most one session can "
					"(topic indexes 0 .. 65535): name another for '%s'", s->name,
					s->ntopics, t->topic);
		unsigned cap = s->captopics ? s->captopics * 2 : 4;
		struct utopic **v = realloc(s->topics, cap * sizeof(*v));
		if (!v)
			return flit_err(ENOMEM, "udp: out of memory");
		s->topics = v;
		s->captopics = cap;
	}
	if (s->txts && !t->txmap) {
		t->txmap = calloc(FLIT_TXTS_RING, sizeof(*t->txmap));
		if (!t->txmap)
			return flit_err(ENOMEM, "udp: out of memory");
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
		 * topic's own number (FLIT_FF_TSEQ) */
		s->tseq = true;
		/* the session's receivers learn it on the data path, before
		 * its first message (a receiver that joins later gets every
		 * page); the resolver channel gets the pages again from the
		 * first, at the shortest interval */
		dg_src_topic_added(s, t);
		s->page = 0;
		bool due = s->adv.at <= now + ADVERT_MIN_NS;
		dg_advert_start(&s->adv, now);
		/* the service wakes for it soon anyway (a burst of
		 * publishers: not once each) */
		return due ? 0 : 1;
	}
	return 1;
}

static int udp_src_open(struct flit_tp *tp, const char *topic,
			const struct flit_cfg_source *cfg, struct flit_tsrc **out)
{
	struct utopic *t;
	char key[sizeof(((struct usess *)0)->cfgkey)];
	int err;

	if (tp->ud_mode && !tp->ud)
		return flit_err(ENODEV, "%s", tp->desc); /* "rdma multicast: unavailable (why)" */
	if (tp->ud_mode && cfg->udp_mode == FLIT_UDP_UNICAST)
		return flit_err(EINVAL, "rdma multicast sends to a group: source.udp.mode = unicast does not "
				"apply (source.rdma.mode = send or write: a connection per receiver)");
	t = (struct utopic *)*out; /* held by the publisher, zeroed */
	snprintf(t->topic, sizeof(t->topic), "%s", topic);
	cfg_key(cfg, key, sizeof(key));
	/* unnamed: the session of the publishers with equal settings, while
	 * it has room; a session of its own for rdma multicast, and for a
	 * publisher with late join (what a session retains is the session's
	 * last messages, not the topic's: N of them may hold none of its) */
	bool own = !strcmp(cfg->session, FLIT_SESSION_OWN) ||
		(!cfg->session[0] && (tp->ud_mode || cfg->late_join));
	const char *name = own ? "" : cfg->session;
	if (!own) {
		/* a named session: join it if it exists */
		pthread_mutex_lock(&tp->lock);
		for (struct usess *s = tp->srcs; s; s = s->next) {
			if (s->own || strcmp(s->name, name))
				continue;
			if (!name[0] && (strcmp(s->cfgkey, key) || s->live >= MAX_TOPICS_PER_SESS))
				continue;
			if (strcmp(s->cfgkey, key)) {
				char first[FLIT_TOPIC_MAX + 1] = "";
				src_lock(s);
				for (unsigned i = 0; i < s->ntopics && !first[0]; i++)
					if (s->topics[i])
						snprintf(first, sizeof(first), "%s", s->topics[i]->topic);
				src_unlock(s);
				pthread_mutex_unlock(&tp->lock);
				return flit_err(EINVAL, "udp: publisher '%s' names session '%s' with other source "
						"settings than its publisher '%s' (source.udp.*, batch, "
						"timestamps and late_join must be equal)", topic, cfg->session,
						first);
			}
			src_lock(s);
			uint64_t now = mono();
			err = sess_add_topic(s, t, now);
			if (err >= 0)
				dg_src_topic_wanted(s, t, now);
			src_unlock(s);
			pthread_mutex_unlock(&tp->lock);
			if (err < 0) {
				free(t->txmap);
				return err;
			}
			if (err)
				dg_wake(tp);
			flit_debug("udp: source %s in session '%s' %08x, topic index %u", topic,
				   s->name[0] ? s->name : s->topic, s->session, t->idx);
			*out = (struct flit_tsrc *)t;
			return 0;
		}
		pthread_mutex_unlock(&tp->lock);
	}
	struct usess *s = calloc(1, sizeof(*s));
	uint64_t now = mono();
	socklen_t sl = sizeof(s->self);

	if (!s)
		return flit_err(ENOMEM, "udp: out of memory");
	s->tp = tp;
	s->fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->own = own;
	snprintf(s->cfgkey, sizeof(s->cfgkey), "%s", key);
	if (s->name[0])
		snprintf(s->topic, sizeof(s->topic), "session %s", s->name);
	else
		snprintf(s->topic, sizeof(s->topic), "%s", topic);
	/* the application's thread: not tp->rng (the poll thread's) */
	while (!s->session)
		if (getrandom(&s->session, sizeof(s->session), 0) != sizeof(s->session))
			s->session = (uint32_t)(mono() ^ (uint64_t)getpid() << 16 ^ (uintptr_t)s);
	s->mode = cfg->udp_mode == FLIT_UDP_UNICAST ? FLIT_MODE_UNICAST : FLIT_MODE_MCAST;
	s->created = now;
	s->late_join = cfg->late_join;
	s->ts = cfg->timestamps;
	s->batching = cfg->batch;
	/* a short header's length holds any datagram's message */
	s->short_hdr = cfg->udp_topic_numbers == FLIT_UDP_TSEQ_SHORT;
	s->max_dgram = cfg->udp_max_datagram & ~7u;
	if (tp->ud && s->max_dgram > tp->ud_max)
		s->max_dgram = tp->ud_max & ~7u; /* a frame is one UD datagram */
	s->batch_min = cfg->udp_batch_min && cfg->udp_batch_min < s->max_dgram ? cfg->udp_batch_min : s->max_dgram;
	s->batch_ivl = cfg->udp_batch_interval_us * US;
	s->dest.sin_family = AF_INET;
	/* a range: the group by the topic's name, or the session's */
	s->dest.sin_addr = pick_group(cfg->udp_group, s->name[0] ? s->name : topic);
	s->dest.sin_port = htons((uint16_t)cfg->udp_port);
	s->buf = aligned_alloc(64, (s->max_dgram + 63) & ~63u);
	if (!s->buf) {
		err = flit_err(ENOMEM, "udp: out of memory");
		goto fail;
	}
	if (cfg->udp_rate_limit) {
		s->rate_on = true;
		uint64_t bps = cfg->udp_rate_limit / 8;
		flit_rl_init(&s->rl, bps, bps / 100 > 4 * s->max_dgram ? bps / 100 : 4 * s->max_dgram, now);
	}
	struct flit_rel_tx_cfg rc = {
		.retain_bytes = cfg->udp_retain,
		.retain_ns = cfg->udp_retain_ms * MS,
		.retx_rate = cfg->udp_retx_rate_limit / 8,
		.hb_min_ns = cfg->udp_hb_min_ms * MS,
		.hb_max_ns = (cfg->udp_hb_max_ms > cfg->udp_hb_min_ms ? cfg->udp_hb_max_ms : cfg->udp_hb_min_ms) * MS,
	};
	if ((err = flit_rel_tx_new(&rc, now, &s->rel)))
		goto fail;
	s->fd = dg_udp_socket(tp, tp->ifaddr, (uint16_t)cfg->udp_ctl_port, false, false);
	if (s->fd < 0) {
		err = s->fd;
		s->fd = -1;
		goto fail;
	}
	getsockname(s->fd, (struct sockaddr *)&s->self, &sl);
	if (tp->ud && (err = flit_ud_path_sender(tp->ud, s->dest.sin_addr)))
		goto fail;
	if (tp->ts.tx != FLIT_TS_NONE) {
		s->txts = malloc(sizeof(*s->txts));
		if (!s->txts) {
			err = flit_err(ENOMEM, "udp: out of memory");
			goto fail;
		}
		if (!tp->xk_tx_ts && (err = flit_txts_enable(s->fd, tp->ts.tx)))
			goto fail;
		flit_txts_init(s->txts, tp->ts.tx);
		/* the stamps queue up against the receive buffer between two
		 * drains (5 ms while the application polls): room for a few
		 * thousand (best effort: capped at net.core.rmem_max) */
		int rb = (int)tp->cc->udp_rcvbuf;
		setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb));
	}
	{
		int fd2 = dup(s->fd);
		if (fd2 < 0 || (err = dg_io_wrap(tp, fd2, false, &s->io))) {
			err = fd2 < 0 ? -errno : err;
			goto fail;
		}
	}
	dg_advert_start(&s->adv, now);
	if ((err = sess_add_topic(s, t, now)) < 0)
		goto fail;
	err = 0;
	pthread_mutex_lock(&tp->lock);
	if (s->name[0]) {
		/* another thread may have made the same named session
		 * meanwhile: then this one is not needed */
		for (struct usess *o = tp->srcs; o; o = o->next)
			if (!strcmp(o->name, s->name)) {
				pthread_mutex_unlock(&tp->lock);
				err = flit_err(EAGAIN, "udp: session '%s' was created by two threads at once",
					       s->name);
				goto fail;
			}
	}
	s->next = tp->srcs;
	tp->srcs = s;
	dg_batch_cap_update(tp);
	if (tp->thread_on)
		dg_thread_watch(tp, s->fd);
	pthread_mutex_unlock(&tp->lock);
	if (dg_thread_start(tp))
		flit_warn("%s; sources are served by flit_ctx_poll() only", flit_errmsg());
	dg_wake(tp);
	{
		char e[48];
		flit_info("udp: source %s session %08x%s%s to %s", topic, s->session, s->name[0] ? " " : "",
			  s->name, flit_ep_str(&s->dest, e, sizeof(e)));
	}
	*out = (struct flit_tsrc *)t;
	return 0;
fail:
	flit_udp_io_close(s->io);
	flit_rel_tx_free(s->rel);
	if (s->fd >= 0)
		close(s->fd);
	free(s->txts);
	free(s->buf);
	free(s->topics);
	free(s);
	free(t->txmap);
	return err;
}

static void udp_src_close(struct flit_tsrc *ts)
{
	struct utopic *t = (struct utopic *)ts;
	struct usess *s = t->ss;
	struct flit_tp *tp = s->tp;
	uint64_t now = mono();

	pthread_mutex_lock(&tp->lock);
	src_lock(s);
	if (s->live > 1) {
		/* one topic of a shared session ends: what it sent goes
		 * first (unless another publisher's claim holds the frame),
		 * then the INFO that ends it; the session goes on */
		if (s->claimed && s->claimer == t) {
			s->claimed = false;
			s->claimer = NULL;
			if (!s->count)
				s->flen = 0;
		}
		if (!s->claimed)
			dg_src_flush_locked(s, now, true);
		s->topics[t->idx] = NULL;
		s->live--;
		/* the next publisher reports the session's counters from
		 * here on (closing in creation order walks each slot once) */
		if (s->lead == t->idx) {
			s->c_base = s->c;
			while (s->lead < s->ntopics && !s->topics[s->lead])
				s->lead++;
		}
		dg_src_topic_ended(s, t);
		src_unlock(s);
		pthread_mutex_unlock(&tp->lock);
		free(t->txmap);         /* t is its publisher's */
		return;
	}
	src_unlock(s);
	for (struct usess **pp = &tp->srcs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	if (tp->thread_on)
		epoll_ctl(tp->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	dg_batch_cap_update(tp);
	pthread_mutex_unlock(&tp->lock);
	src_lock(s);
	s->claimed = false;
	s->rate_on = false; /* the last frame goes, whatever the rate */
	dg_src_flush_locked(s, now, true);
	/* tell receivers the session ended (twice: a single loss is common) */
	size_t l = flit_ctl_hb_encode(s->ctl, sizeof(s->ctl), s->session, flit_rel_tx_next(s->rel),
				      flit_rel_tx_trail(s->rel, now));
	if (l) {
		flit_st16(s->ctl + 4, FLIT_HBF_END);
		dg_src_raw(s, s->ctl, l);
		dg_src_raw(s, s->ctl, l);
	}
	dg_src_answers_free(s);
	src_unlock(s);
	flit_udp_io_close(s->io);
	close(s->fd);
	flit_rel_tx_free(s->rel);
	pthread_mutex_destroy(&s->lock);
	free(s->txts);
	free(s->rcv);
	free(s->buf);
	free(s->topics);
	free(s);
	free(t->txmap);         /* t is its publisher's */
}

static int udp_subs_changed(struct flit_tp *tp)
{
	if (tp->in_poll) {
		tp->dirty = true; /* a callback changed subscriptions: after the poll */
		return 0;
	}
	dg_rebind(tp, mono());
	return 0;
}

static int udp_poll(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg)
{
	int total = 0;
	uint64_t now;
	(void)fn; (void)arg; /* frames go through the reliability layer */

	/* AF_XDP or the UD queue with nothing waiting: not even a clock read
	 * (a spinning latency-bound receiver then checks a ring and returns);
	 * the timers and the kernel sockets are looked at every xk_skip of
	 * these.  xk_skip follows the poll rate: as many polls as take about
	 * XK_IDLE_NS (up to XK_IDLE_POLLS when spinning; 1, every poll, for a
	 * loop that sleeps between polls, whose timers and queries would
	 * otherwise wait 32 of its sleeps) */
	if (((tp->xk && !tp->xk_im && !flit_xsk_rx_pending(tp->xk)) ||
	     (tp->ud && !tp->ud_im && !flit_ud_path_rx_pending(tp->ud))) &&
	    ++tp->xk_idle < tp->xk_skip && !tp->dirty)
		return 0;
	const bool idle_tick = tp->xk_idle >= tp->xk_skip;
	tp->xk_idle = 0;
	tp->in_poll = true;
	now = mono();
	if (idle_tick) {
		uint64_t span = now - tp->xk_tick_at;
		if (span > XK_IDLE_NS && tp->xk_skip > 1)
			tp->xk_skip /= 2;
		else if (span < XK_IDLE_NS / 2 && tp->xk_skip < XK_IDLE_POLLS)
			tp->xk_skip *= 2;
	}
	tp->xk_tick_at = now;
	__atomic_store_n(&tp->last_poll, now, __ATOMIC_RELAXED);
	int err = 0;
	if (tp->xk) {
		/* AF_XDP: every flow we listen on, unicast included */
		int n = dg_drain_any(tp, NULL, tp->xk, &tp->xk_want, limit, now);
		if (n > 0)
			total += n;
		else if (n < 0)
			err = n;
	} else {
		if (tp->ud) {
			/* rdma multicast: the UD queue pair, then the sockets
			 * (retransmissions, heartbeats) */
			int n = dg_drain_ud(tp, limit, now);
			if (n > 0)
				total += n;
			else if (n < 0)
				err = n;
		}
		/* rdma multicast reads its kernel sockets (heartbeats,
		 * retransmissions) on the XK_IDLE_POLLS-th of a run of polls
		 * that found the UD queue empty, and at housekeeping; udp on
		 * every poll (and rdma multicast too under a test impairment) */
		const bool socks = !tp->ud || tp->ud_im || idle_tick || now >= tp->next_house;
		for (struct rsock *r = socks ? tp->socks : NULL; r && total < limit; r = r->next) {
			if (!r->refs)
				continue; /* released during this poll */
			int n = dg_drain(tp, r->io, &r->want, limit - total, now);
			if (n > 0)
				total += n;
			else if (n < 0 && !err)
				err = n;
		}
	}
	if ((tp->want_ucast_every_poll || tp->lj_waiting) && !tp->xk && total < limit) {
		int n = dg_drain(tp, tp->ucast, &tp->ucast_want, limit - total, now);
		if (n > 0)
			total += n;
		else if (n < 0 && !err)
			err = n;
	}
	if (FLIT_UNLIKELY(now >= tp->next_house)) {
		total += dg_housekeeping(tp, now, limit);
		if (__atomic_load_n(&tp->srcs, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&tp->fads, __ATOMIC_RELAXED)) {
			uint64_t dl = dg_service_all(tp, now);
			if (dl < tp->next_house)
				tp->next_house = dl;
		}
	}
	tp->in_poll = false;
	if (FLIT_UNLIKELY(tp->dirty))
		dg_rebind(tp, now);
	dg_rsock_reap(tp);
	if (FLIT_UNLIKELY(err) && !total)
		return flit_err_wrap(-err, tp->xk ? "xdp: receive" : tp->ud ? "rdma multicast: receive" : "udp: receive");
	return total;
}

/* udp, xdp and rdma multicast differ in how they open (the data path) and
 * what they can stamp; everything else is this code on all three.  udp and
 * xdp also carry the rdma transport's resolution (res_advertise). */
#define SESSION_OPS                        \
	.close = udp_close,                \
	.src_size = sizeof(struct utopic), \
	.src_open = udp_src_open,          \
	.src_close = udp_src_close,        \
	.send = dg_send,                  \
	.claim = dg_claim,                \
	.commit = dg_commit,              \
	.abort = dg_abort,                \
	.flush = dg_flush,                \
	.receivers = dg_receivers,        \
	.max_msg = dg_max_msg,            \
	.next_seq = dg_next_seq,          \
	.src_counters = dg_src_counters,  \
	.subs_changed = udp_subs_changed,  \
	.poll = udp_poll,                  \
	.describe = udp_describe

const struct flit_transport_ops flit_udp_ops = {
	.name = "udp",
	.caps = FLIT_CAP_MULTICAST | FLIT_CAP_TIMESTAMPS,
	.open = udp_open,
	.tx_stamp = dg_tx_stamp,
	.ts_status = udp_ts_status,
	.res_advertise = dg_res_advertise,
	.res_withdraw = dg_res_withdraw,
	SESSION_OPS,
};

const struct flit_transport_ops flit_xdp_ops = {
	.name = "xdp",
	.caps = FLIT_CAP_MULTICAST,
	.open = xdp_open,
	.tx_stamp = dg_tx_stamp,
	.ts_status = udp_ts_status,
	.res_advertise = dg_res_advertise,
	.res_withdraw = dg_res_withdraw,
	SESSION_OPS,
};

#ifdef FLIT_HAVE_RDMA
/* source.rdma.mode = multicast (the core picks it for such a source; a
 * context listing rdma opens it beside the connected rdma transport) */
const struct flit_transport_ops flit_rdma_mc_ops = {
	.name = "rdma",
	.caps = FLIT_CAP_MULTICAST,
	.open = rdma_mc_open,
	SESSION_OPS,
};
#endif
