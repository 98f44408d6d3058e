// SPDX-License-Identifier: BSD-2-Clause
/* Context, publishers, subscribers, and delivery of frames to callbacks. */
#include <errno.h>
#include <limits.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <flit/tstamp.h>

#include "core.h"
#include "stats.h"

#define POLL_DEFAULT_LIMIT 256
#define RDMA_MISSING "transport rdma: this libflit was built without RDMA (libibverbs/librdmacm missing at build time)"

static bool listed(const char *l, const char *name);

static const struct flit_transport_ops *const transports[] = {
	&flit_shm_ops,
	&flit_udp_ops,
	&flit_xdp_ops,
#ifdef FLIT_HAVE_RDMA
	&flit_rdma_ops,
	&flit_rdma_mc_ops, /* also "rdma": the sources of source.rdma.mode = multicast */
#endif
};
#define NTRANSPORTS (sizeof(transports) / sizeof(transports[0]))

struct flit_ctx {
	struct flit_cfg cfg;
	struct flit_cfg_context ccfg;
	struct flit_tp *tp[NTRANSPORTS];
	flit_pub *pubs;
	flit_sub *subs;
	struct flit_rx_session *sessions;
	struct flit_counters rx;        /* receive side, poll thread only */
	uint64_t nevents;               /* BOS, EOS and LOSS callbacks made */
	struct flit_counters closed_tx; /* send counters of closed publishers */
	int in_callback;
	struct flit_stats *stats;       /* the counters file (userspace/stats.h) */
	struct flit_stats_tick stats_tick;
	struct flit_stats_when stats_when;
	flit_pub *stats_next;       /* where the next stats tick goes on */
	unsigned npubs;             /* publishers (atomic: their ticks read it) */
};

/* A publisher is one allocation.  The handle is a line of its own: what
 * every send reads (ops, source, stats tick), then the transport's own
 * state of the topic when the transport keeps it here (ops->src_size: its
 * first FLIT_SRC_HOT bytes in this line).  What only set-up, stats and
 * close read (struct pub_cold) sits in the lines before the handle.  A
 * send of one of 100,000 topics, none in cache, then misses one line
 * instead of two, the second's address read from the first. */
struct pub_cold {
	/* a stats tick's clock check reads these two (in one line: a
	 * publisher of a few messages a second checks at every send) */
	flit_ctx *ctx;
	struct flit_stats_pub st;    /* its tick's clock first */
	flit_pub *next, *prev;
	char topic[FLIT_TOPIC_MAX + 1];
} __attribute__((aligned(64)));

struct flit_pub {
	const struct flit_transport_ops *ops;
	struct flit_tsrc *src;       /* held here: == (void *)tsrc */
	struct flit_stats_tick tick;
	uint64_t tsrc[];             /* ops->src_size bytes */
} __attribute__((aligned(64)));

_Static_assert(offsetof(struct flit_pub, tsrc) + FLIT_SRC_HOT == 64,
	       "FLIT_SRC_HOT: the bytes of a held source in the publisher's first line");

static inline struct pub_cold *cold(const flit_pub *pub)
{
	return (struct pub_cold *)pub - 1;
}

struct flit_sub {
	flit_ctx *ctx;
	flit_msg_fn fn;
	void *arg;
	struct flit_stats_sub st; /* counted where the callback is called */
	bool pattern;
	struct flit_cfg_receiver cfg;
	uint64_t created_ns;      /* CLOCK_REALTIME */
	flit_sub *next;
	char topic[FLIT_TOPIC_MAX + 1];
};

uint64_t flit_realtime_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t flit_monotonic_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool flit_topic_valid(const char *topic)
{
	if (!topic || !*topic)
		return false;
	size_t n = strnlen(topic, FLIT_TOPIC_MAX + 1);
	if (n > FLIT_TOPIC_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)topic[i] < 0x20 || topic[i] == 0x7f)
			return false;
	return true;
}

/* Check an options struct: NULL is fine; sz must cover `sz`, and bytes past
 * what this library knows must be zero (a newer caller's unset fields). */
static int opts_check(const void *opts, size_t known, const char *what)
{
	if (!opts)
		return 0;
	size_t sz = *(const size_t *)opts;
	if (sz < sizeof(size_t))
		return flit_err(EINVAL, "%s: sz %zu too small", what, sz);
	for (size_t i = known; i < sz; i++)
		if (((const unsigned char *)opts)[i])
			return flit_err(EINVAL, "%s: unknown option set at byte %zu (library older than the caller)", what, i);
	return 0;
}

/* Field of an options struct if the caller's struct has it, else 0/NULL. */
#define OPT(opts, field, dflt)                                                 \
	((opts) && (opts)->sz >= offsetof(__typeof__(*(opts)), field) +        \
				   sizeof((opts)->field) ?                     \
		 (opts)->field : (dflt))

/* ---- context ------------------------------------------------------------ */

static int subs_changed(flit_ctx *ctx);

flit_ctx *flit_ctx_new(const struct flit_ctx_opts *opts)
{
	flit_ctx *ctx;
	const char *file, *extra;
	int err;

	if ((err = opts_check(opts, sizeof(*opts), "flit_ctx_opts")))
		return flit_null(-err);
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return flit_err_null(ENOMEM, "context: out of memory");
	flit_cfg_init(&ctx->cfg);

	file = OPT(opts, config_file, NULL);
	if (!file)
		file = getenv("FLIT_CONFIG");
	if (file && *file && (err = flit_cfg_load_file(&ctx->cfg, file)))
		goto fail;
	if ((err = flit_cfg_load_env(&ctx->cfg)))
		goto fail;
	extra = OPT(opts, config, NULL);
	if (extra && (err = flit_cfg_load_string(&ctx->cfg, extra, "<context options>")))
		goto fail;
	if ((err = flit_cfg_context(&ctx->cfg, &ctx->ccfg)))
		goto fail;
#ifndef FLIT_HAVE_RDMA
	if (listed(ctx->ccfg.transports, "rdma")) {
		err = flit_err(EPROTONOSUPPORT, RDMA_MISSING " (context.transports = %s)",
			       ctx->ccfg.transports);
		goto fail;
	}
#endif
	flit_log_level_raise(ctx->ccfg.log_level);
	if (!(ctx->stats = flit_stats_open(&ctx->ccfg))) {
		err = -errno;
		goto fail;
	}
	flit_stats_tick_init(ctx->stats, &ctx->stats_tick, &ctx->stats_when);
	return ctx;
fail:
	flit_cfg_free(&ctx->cfg);
	free(ctx);
	errno = -err;
	return NULL;
}

void flit_ctx_close(flit_ctx *ctx)
{
	if (!ctx)
		return;
	flit_stats_closing(ctx->stats);
	/* unbind every subscriber in one pass (one rescan, not one per
	 * subscriber); no events are delivered to them */
	flit_sub *subs = ctx->subs;
	ctx->subs = NULL;
	if (subs)
		subs_changed(ctx);
	while (subs) {
		flit_sub *next = subs->next;
		free(subs);
		subs = next;
	}
	while (ctx->pubs)
		flit_pub_close(ctx->pubs);
	for (unsigned i = 0; i < NTRANSPORTS; i++)
		if (ctx->tp[i])
			transports[i]->close(ctx->tp[i]);
	/* transports end their sessions on close; free any left over */
	while (ctx->sessions)
		flit_rx_session_end(ctx->sessions, 0);
	flit_stats_ctx_write(ctx->stats, &ctx->rx, flit_monotonic_now());
	flit_stats_close(ctx->stats);
	flit_cfg_free(&ctx->cfg);
	free(ctx);
}

const struct flit_cfg_context *flit_ctx_cfg(const struct flit_ctx *ctx)
{
	return &ctx->ccfg;
}

struct flit_counters *flit_ctx_rx_counters(struct flit_ctx *ctx)
{
	return &ctx->rx;
}

static int transport_index(const char *name)
{
	for (unsigned i = 0; i < NTRANSPORTS; i++)
		if (!strcmp(transports[i]->name, name))
			return (int)i;
	return -1;
}

/* Is transport i named in context.transports? */
static bool listed(const char *l, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = l; (p = strstr(p, name)); p += n)
		if ((p == l || p[-1] == ',' || p[-1] == ' ') &&
		    (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
			return true;
	return false;
}

static bool tp_enabled(const flit_ctx *ctx, unsigned i)
{
	return listed(ctx->ccfg.transports, transports[i]->name);
}

static int ctx_tp(flit_ctx *ctx, unsigned i, struct flit_tp **out)
{
	if (!tp_enabled(ctx, i))
		return flit_err(ENOPROTOOPT, "transport %s is not in context.transports (%s)",
				transports[i]->name, ctx->ccfg.transports);
	if (!ctx->tp[i]) {
		int err = transports[i]->open(ctx, &ctx->tp[i]);
		if (err)
			return flit_err_wrap(-err, "transport %s", transports[i]->name);
	}
	*out = ctx->tp[i];
	return 0;
}

/* ---- the counters file (userspace/stats.h) ------------------------------- */

static const char *tp_desc(const flit_ctx *ctx, unsigned i)
{
	return transports[i]->describe ? transports[i]->describe(ctx->tp[i]) : transports[i]->name;
}

static void pub_stats_write(flit_pub *pub, uint64_t now)
{
	struct flit_counters c;

	memset(&c, 0, sizeof(c));
	c.sz = sizeof(c);
	pub->ops->src_counters(pub->src, &c);
	flit_stats_pub_write(cold(pub)->ctx->stats, &cold(pub)->st, &c, now);
}

#define STATS_PUBS_PER_TICK 1000

/* Out of line: the hot paths pay a decrement and a branch (stats.h). */
static __attribute__((noinline, cold)) void pub_stats_tick(flit_pub *pub)
{
	uint64_t now;

	/* with more than STATS_PUBS_PER_TICK publishers, each writes its row
	 * every N/1000 intervals from its own calls, as the poll does: 100,000
	 * publishers must not read the clock and write rows 100,000 times
	 * an interval */
	struct pub_cold *c = cold(pub);
	unsigned every = 1 + __atomic_load_n(&c->ctx->npubs, __ATOMIC_RELAXED) / STATS_PUBS_PER_TICK;
	if (flit_stats_tick_due(c->ctx->stats, &pub->tick, &c->st.when, every, &now))
		pub_stats_write(pub, now);
}

static __attribute__((noinline, cold)) void ctx_stats_tick(flit_ctx *ctx)
{
	uint64_t now;

	if (!flit_stats_tick_due(ctx->stats, &ctx->stats_tick, &ctx->stats_when, 1, &now))
		return;
	/* at most STATS_PUBS_PER_TICK publishers a tick, going round: a
	 * context with 100,000 writes each every 10 s, not all of them
	 * every 100 ms */
	flit_pub *p = ctx->stats_next ? ctx->stats_next : ctx->pubs;
	for (unsigned n = 0; p && n < STATS_PUBS_PER_TICK; n++) {
		pub_stats_write(p, now);
		p = cold(p)->next;
	}
	ctx->stats_next = p;
	for (flit_sub *s = ctx->subs; s; s = s->next)
		flit_stats_sub_write(ctx->stats, &s->st, now);
	for (unsigned i = 0; i < NTRANSPORTS; i++)
		if (ctx->tp[i])
			flit_stats_transport_write(ctx->stats, i, transports[i]->name,
						   tp_desc(ctx, i), now);
	flit_stats_ctx_write(ctx->stats, &ctx->rx, now);
}

int flit_ctx_stats_path(const flit_ctx *ctx, char *buf, size_t len)
{
	if (!ctx)
		return flit_err(EINVAL, "flit_ctx_stats_path: NULL context");
	return flit_stats_path(ctx->stats, buf, len);
}

int flit_ctx_poll(flit_ctx *ctx, int limit)
{
	int total = 0;

	if (FLIT_UNLIKELY(!ctx))
		return flit_err(EINVAL, "flit_ctx_poll: NULL context");
	/* what the callbacks got, counted where they are made: a transport's
	 * own count (for the limit) can miss an event it caused indirectly
	 * (BOS from an INFO, data held until a session started) */
	uint64_t m0 = ctx->rx.msgs_received, e0 = ctx->nevents;
	if (flit_stats_tick_hit(&ctx->stats_tick))
		ctx_stats_tick(ctx);
	if (limit <= 0)
		limit = POLL_DEFAULT_LIMIT;
	for (unsigned i = 0; i < NTRANSPORTS && total < limit; i++) {
		if (!ctx->tp[i])
			continue;
		int n = transports[i]->poll(ctx->tp[i], limit - total,
					    flit_rx_frame, ctx);
		if (FLIT_UNLIKELY(n < 0))
			return n;
		total += n;
	}
	uint64_t d = ctx->rx.msgs_received - m0 + ctx->nevents - e0;
	return d > INT_MAX ? INT_MAX : (int)d;
}

int flit_ctx_describe(const flit_ctx *ctx, const char *transport, char *buf, size_t len)
{
	if (!ctx || !transport || (!buf && len))
		return flit_err(EINVAL, "flit_ctx_describe: bad arguments");
	int i = transport_index(transport), n = 0;
	if (i < 0)
		return flit_err(ENOENT, "flit_ctx_describe: transport '%s' is not open in this context", transport);
	/* rdma is two: connections and multicast; each one open is said */
	for (unsigned k = (unsigned)i; k < NTRANSPORTS; k++) {
		if (!ctx->tp[k] || strcmp(transports[k]->name, transport))
			continue;
		size_t at = (size_t)n < len ? (size_t)n : len;
		n += snprintf(buf ? buf + at : NULL, len - at, "%s%s", n ? "; " : "", tp_desc(ctx, k));
	}
	if (!n)
		return flit_err(ENOENT, "flit_ctx_describe: transport '%s' is not open in this context", transport);
	return n;
}

int flit_ctx_ts_status(const flit_ctx *ctx, const char *transport, struct flit_ts_status *out)
{
	if (!ctx || !transport || !out || out->sz < sizeof(size_t))
		return flit_err(EINVAL, "flit_ctx_ts_status: bad arguments (out->sz must be set)");
	int i = transport_index(transport);
	if (i < 0 || !ctx->tp[i])
		return flit_err(ENOENT, "flit_ctx_ts_status: transport '%s' is not open in this context", transport);
	if (!transports[i]->ts_status)
		return flit_err(EOPNOTSUPP, "flit_ctx_ts_status: the %s transport makes no kernel or NIC stamps",
				transports[i]->name);
	return transports[i]->ts_status(ctx->tp[i], out);
}

int flit_ctx_counters(const flit_ctx *ctx, struct flit_counters *out)
{
	struct flit_counters c;

	if (!ctx || !out || out->sz < sizeof(size_t))
		return flit_err(EINVAL, "flit_ctx_counters: bad arguments");
	c = ctx->rx;
	c.msgs_sent += ctx->closed_tx.msgs_sent;
	c.bytes_sent += ctx->closed_tx.bytes_sent;
	c.frames_sent += ctx->closed_tx.frames_sent;
	c.back_pressured += ctx->closed_tx.back_pressured;
	c.readers_evicted += ctx->closed_tx.readers_evicted;
	c.naks_received += ctx->closed_tx.naks_received;
	c.retransmissions += ctx->closed_tx.retransmissions;
	c.rate_limited += ctx->closed_tx.rate_limited;
	for (const flit_pub *p = ctx->pubs; p; p = cold(p)->next)
		p->ops->src_counters(p->src, &c);
	c.sz = out->sz < sizeof(c) ? out->sz : sizeof(c);
	memcpy(out, &c, c.sz);
	return 0;
}

/* ---- publishers --------------------------------------------------------- */

flit_pub *flit_pub_new(flit_ctx *ctx, const char *topic,
		       const struct flit_pub_opts *opts)
{
	struct flit_cfg_source cfg;
	const char *tname;
	struct flit_tp *tp;
	flit_pub *pub;
	int err, ti;

	if (!ctx)
		return flit_err_null(EINVAL, "flit_pub_new: NULL context");
	if (!flit_topic_valid(topic))
		return flit_err_null(EINVAL, "flit_pub_new: invalid topic name (1..%d printable bytes)", FLIT_TOPIC_MAX);
	if ((err = opts_check(opts, sizeof(*opts), "flit_pub_opts")))
		return flit_null(-err);
	if ((err = flit_cfg_source(&ctx->cfg, topic, OPT(opts, config, NULL), &cfg))) {
		flit_err_wrap(-err, "publisher '%s'", topic);
		return flit_null(-err);
	}
	tname = OPT(opts, transport, NULL);
	if (!tname)
		tname = cfg.transport;
	ti = transport_index(tname);
	if (ti < 0 && !strcmp(tname, "rdma"))
		return flit_err_null(EPROTONOSUPPORT, "flit_pub_new: " RDMA_MISSING);
	if (ti < 0)
		return flit_err_null(EPROTONOSUPPORT, "flit_pub_new: unknown transport '%s' (available: shm, udp, xdp%s)",
				     tname, NTRANSPORTS > 3 ? ", rdma" : "");
#ifdef FLIT_HAVE_RDMA
	if (transports[ti] == &flit_rdma_ops && cfg.rdma_mode == FLIT_RDMA_MULTICAST)
		ti++; /* flit_rdma_mc_ops, next in transports[] */
#endif
	if ((err = ctx_tp(ctx, (unsigned)ti, &tp)))
		return flit_null(-err);

	const struct flit_transport_ops *ops = transports[ti];
	size_t held = (offsetof(struct flit_pub, tsrc) + ops->src_size + 63) & ~(size_t)63;
	struct pub_cold *c = flit_calloc_line(sizeof(struct pub_cold) + held);
	if (!c)
		return flit_err_null(ENOMEM, "flit_pub_new: out of memory");
	pub = (flit_pub *)(c + 1);
	c->ctx = ctx;
	pub->ops = ops;
	strcpy(c->topic, topic);
	if (ops->src_size)
		pub->src = (struct flit_tsrc *)pub->tsrc;
	err = ops->src_open(tp, topic, &cfg, &pub->src);
	if (err) {
		free(c);
		flit_err_wrap(-err, "publisher '%s'", topic);
		return flit_null(-err);
	}
	flit_stats_transport_write(ctx->stats, (unsigned)ti, ops->name,
				   tp_desc(ctx, (unsigned)ti), flit_monotonic_now());
	flit_stats_pub_add(ctx->stats, &c->st, &pub->tick, (unsigned)ti, ops->name, topic);
	c->next = ctx->pubs;
	c->prev = NULL;
	if (ctx->pubs)
		cold(ctx->pubs)->prev = pub;
	ctx->pubs = pub;
	__atomic_fetch_add(&ctx->npubs, 1, __ATOMIC_RELAXED);
	return pub;
}

void flit_pub_close(flit_pub *pub)
{
	if (!pub)
		return;
	struct pub_cold *c = cold(pub);
	flit_ctx *ctx = c->ctx;
	struct flit_counters last;
	memset(&last, 0, sizeof(last));
	last.sz = sizeof(last);
	pub->ops->src_counters(pub->src, &last);
	flit_stats_counters_add(&ctx->closed_tx, &last);
	pub->ops->src_close(pub->src);
	flit_stats_pub_remove(ctx->stats, &c->st, &last);
	if (c->prev)
		cold(c->prev)->next = c->next;
	else
		ctx->pubs = c->next;
	if (c->next)
		cold(c->next)->prev = c->prev;
	if (ctx->stats_next == pub)
		ctx->stats_next = c->next;
	__atomic_fetch_sub(&ctx->npubs, 1, __ATOMIC_RELAXED);
	free(c);
}

int flit_pub_send(flit_pub *pub, const void *data, size_t len)
{
	if (flit_stats_tick_hit(&pub->tick))
		pub_stats_tick(pub);
	return pub->ops->send(pub->src, data, len);
}

int flit_pub_claim(flit_pub *pub, size_t len, void **buf)
{
	return pub->ops->claim(pub->src, len, buf);
}

int flit_pub_commit(flit_pub *pub, size_t len)
{
	if (flit_stats_tick_hit(&pub->tick))
		pub_stats_tick(pub);
	return pub->ops->commit(pub->src, len);
}

int flit_pub_abort(flit_pub *pub)
{
	return pub->ops->abort(pub->src);
}

int flit_pub_flush(flit_pub *pub)
{
	if (flit_stats_tick_hit(&pub->tick))
		pub_stats_tick(pub);
	return pub->ops->flush(pub->src);
}

size_t flit_pub_max_msg(const flit_pub *pub)
{
	return pub->ops->max_msg(pub->src);
}

uint64_t flit_pub_next_seq(const flit_pub *pub)
{
	return pub->ops->next_seq(pub->src);
}

struct flit_tsrc *flit_pub_tsrc(flit_pub *pub)
{
	return pub->src;
}

const char *flit_pub_topic(const flit_pub *pub)
{
	return cold(pub)->topic;
}

int flit_pub_receivers(const flit_pub *pub)
{
	if (!pub->ops->receivers)
		return -EOPNOTSUPP;
	return pub->ops->receivers(pub->src);
}

int flit_pub_tx_stamp(flit_pub *pub, uint64_t seq, struct flit_tx_stamp *out)
{
	if (!pub || !out || out->sz < sizeof(size_t))
		return flit_err(EINVAL, "flit_pub_tx_stamp: bad arguments (out->sz must be set)");
	if (!pub->ops->tx_stamp)
		return flit_err(EOPNOTSUPP, "flit_pub_tx_stamp: %s: the %s transport makes no transmit stamps",
				cold(pub)->topic, pub->ops->name);
	return pub->ops->tx_stamp(pub->src, seq, out);
}

/* ---- subscribers and sessions ------------------------------------------- */

static bool sub_matches(const flit_sub *s, const char *name)
{
	if (s->pattern)
		return fnmatch(s->topic, name, 0) == 0;
	return strcmp(s->topic, name) == 0;
}

bool flit_ctx_wants(const struct flit_ctx *ctx, const char *name)
{
	for (const flit_sub *s = ctx->subs; s; s = s->next)
		if (sub_matches(s, name))
			return true;
	return false;
}

int flit_ctx_each_sub(const struct flit_ctx *ctx,
		      int (*fn)(void *arg, const char *topic, bool pattern,
				const struct flit_cfg_receiver *cfg),
		      void *arg)
{
	for (const flit_sub *s = ctx->subs; s; s = s->next) {
		int r = fn(arg, s->topic, s->pattern, &s->cfg);
		if (r)
			return r;
	}
	return 0;
}

bool flit_ctx_wants_any(const struct flit_ctx *ctx)
{
	return ctx->subs != NULL;
}

void flit_ctx_rcv_cfg(const struct flit_ctx *ctx, const char *topic,
		      struct flit_cfg_receiver *out)
{
	for (const flit_sub *s = ctx->subs; s; s = s->next)
		if (sub_matches(s, topic)) {
			*out = s->cfg;
			return;
		}
	flit_cfg_receiver(&ctx->cfg, topic, NULL, out);
}

uint64_t flit_ctx_sub_since(const struct flit_ctx *ctx, const char *topic)
{
	uint64_t since = 0;

	for (const flit_sub *s = ctx->subs; s; s = s->next)
		if (sub_matches(s, topic) && (!since || s->created_ns < since))
			since = s->created_ns;
	return since;
}

enum flit_join flit_ctx_join_mode(const struct flit_ctx *ctx, const char *topic,
				  uint64_t src_created_ns)
{
	uint64_t since = flit_ctx_sub_since(ctx, topic);

	if (src_created_ns && since && since <= src_created_ns)
		return FLIT_JOIN_FIRST;
	for (const flit_sub *s = ctx->subs; s; s = s->next)
		if (sub_matches(s, topic) && s->cfg.late_join)
			return FLIT_JOIN_LATE;
	return FLIT_JOIN_LIVE;
}

/* ---- resolution on behalf of transports without a resolver (core.h) ----- */

int flit_ctx_res_advertise(struct flit_ctx *ctx, const struct flit_res_ad *ad)
{
	int err = 0;

	for (unsigned i = 0; i < NTRANSPORTS; i++) {
		struct flit_tp *tp;
		if (!transports[i]->res_advertise || !tp_enabled(ctx, i))
			continue;
		if ((err = ctx_tp(ctx, i, &tp)) == 0 &&
		    (err = transports[i]->res_advertise(tp, ad)) == 0)
			return 0;
	}
	/* err: why the last one tried refused; none tried: */
	return err ? err : flit_err(ENOPROTOOPT, "no transport with a resolver channel in "
				    "context.transports (%s)", ctx->ccfg.transports);
}

void flit_ctx_res_withdraw(struct flit_ctx *ctx, uint32_t session, const char *topic)
{
	for (unsigned i = 0; i < NTRANSPORTS; i++)
		if (transports[i]->res_withdraw && ctx->tp[i])
			transports[i]->res_withdraw(ctx->tp[i], session, topic);
}

void flit_ctx_res_found(struct flit_ctx *ctx, const struct flit_res_ad *ad)
{
	for (unsigned i = 0; i < NTRANSPORTS; i++)
		if (transports[i]->res_found && ctx->tp[i])
			transports[i]->res_found(ctx->tp[i], ad);
}

static void deliver_event(struct flit_rx_session *rs, flit_sub *s,
			  const char *topic, enum flit_msg_kind kind,
			  uint32_t flags, uint64_t seq, uint64_t lost)
{
	struct flit_msg m = {
		.kind = kind,
		.flags = flags,
		.topic = topic,
		.seq = seq,
		.lost = lost,
		.session_id = rs->session_id,
		.source = rs->source,
	};
	if (kind == FLIT_MSG_BOS) {
		s->st.bos++;
	} else if (kind == FLIT_MSG_EOS) {
		s->st.eos++;
	} else if (kind == FLIT_MSG_LOSS) {
		s->st.lost += lost;
		s->st.loss_events++;
	}
	rs->ctx->nevents++;
	rs->ctx->in_callback++;
	s->fn(s, &m, s->arg);
	rs->ctx->in_callback--;
}

/* The session has several topics from now on (a second one named, or a
 * frame with FLIT_FF_TSEQ): each is numbered on its own.  A topic that had
 * messages came in the time of one topic, whose numbers were the
 * session's: it goes on from the session's next. */
static void tseq_begin(struct flit_rx_session *rs)
{
	rs->tseq = true;
	for (uint32_t i = 0; i < rs->ntopics; i++) {
		struct flit_rx_topic *t = &rs->topics[i];
		if (t->seen) {
			t->next_tseq = rs->next_seq;
			t->tseq_known = rs->started;
		}
	}
}

/* Where topic t of session rs is, in the topic's numbers (BOS, EOS): the
 * session's next number while it has one topic; with several, the topic's
 * next, 0 before it is known. */
static uint64_t topic_seq(const struct flit_rx_session *rs, const struct flit_rx_topic *t)
{
	if (t->tseq_known)
		return t->next_tseq;
	return rs->tseq ? 0 : rs->next_seq;
}

/* Recompute which subscribers receive topic t of session rs; BOS to the new
 * ones.  Returns the number of subscribers. */
static int topic_bind(struct flit_rx_session *rs, struct flit_rx_topic *t)
{
	flit_ctx *ctx = rs->ctx;
	unsigned n = 0, old = t->nsubs;
	flit_sub **subs, **prev = t->subs;

	for (flit_sub *s = ctx->subs; s; s = s->next)
		n += sub_matches(s, t->name);
	subs = n ? calloc(n, sizeof(*subs)) : NULL;
	if (n && !subs)
		return flit_err(ENOMEM, "session: out of memory");
	n = 0;
	for (flit_sub *s = ctx->subs; s; s = s->next)
		if (sub_matches(s, t->name))
			subs[n++] = s;
	t->subs = subs;
	t->nsubs = n;
	t->one = n == 1 ? subs[0] : NULL;
	if (!old) {
		/* a receiver that has the session from its first message
		 * knows a topic none of whose messages came yet from 0;
		 * else it learns the topic's number from its next message */
		t->tseq_known = rs->origin0 && !t->seen && !rs->skipped;
		t->next_tseq = 0;
	}
	for (unsigned i = 0; i < n; i++) {
		bool known = false;
		for (unsigned j = 0; j < old && !known; j++)
			known = prev[j] == subs[i];
		if (subs[i]->cfg.timestamps)
			rs->rcv_ts = true;
		if (!known)
			deliver_event(rs, subs[i], t->name, FLIT_MSG_BOS, 0,
				      topic_seq(rs, t), 0);
	}
	free(prev);
	return (int)n;
}

struct flit_rx_session *flit_rx_session_new(struct flit_ctx *ctx,
					    uint32_t session_id,
					    const char *source)
{
	struct flit_rx_session *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return flit_err_null(ENOMEM, "session: out of memory");
	rs->ctx = ctx;
	rs->session_id = session_id;
	snprintf(rs->source, sizeof(rs->source), "%s", source);
	rs->next = ctx->sessions;
	ctx->sessions = rs;
	ctx->rx.sources_joined++;
	return rs;
}

int flit_rx_session_topic(struct flit_rx_session *rs, uint32_t idx,
			  const char *name)
{
	if (idx > UINT16_MAX)
		return flit_err(EINVAL, "session %08x: topic index %u out of range", rs->session_id, idx);
	if (idx >= rs->captopics) {
		/* doubling: a session's topics come one index after another */
		uint32_t cap = rs->captopics ? rs->captopics : 4;
		while (cap <= idx)
			cap *= 2;
		struct flit_rx_topic *t = flit_calloc_line((size_t)cap * sizeof(*t));
		if (!t)
			return flit_err(ENOMEM, "session: out of memory");
		if (rs->captopics)
			memcpy(t, rs->topics, rs->captopics * sizeof(*t));
		free(rs->topics);
		rs->topics = t;
		rs->captopics = cap;
	}
	if (idx >= rs->ntopics)
		rs->ntopics = idx + 1;
	if (rs->ntopics > 1 && !rs->tseq)
		tseq_begin(rs);         /* its source numbers each topic */
	struct flit_rx_topic *t = &rs->topics[idx];
	if (!t->name || strcmp(t->name, name)) {
		free(t->name);
		free(t->subs);
		t->subs = NULL;
		t->nsubs = 0;
		t->one = NULL;
		t->tseq_known = false;
		t->seen = false;        /* a new topic on this index: from 0 */
		t->name = strdup(name);
		if (!t->name)
			return flit_err(ENOMEM, "session: out of memory");
	}
	return topic_bind(rs, t);
}

void flit_rx_session_topic_from(struct flit_rx_session *rs, uint32_t idx, uint64_t tseq)
{
	/* one topic: its numbers are the session's, told by the session */
	if (rs->tseq && idx < rs->ntopics && rs->topics[idx].name && !rs->topics[idx].seen) {
		rs->topics[idx].tseq_known = true;
		rs->topics[idx].next_tseq = tseq;
	}
}

void flit_rx_session_start(struct flit_rx_session *rs, uint64_t seq)
{
	rs->started = true;
	rs->next_seq = seq;
	rs->origin0 = seq == 0;
}

void flit_rx_session_late_join(struct flit_rx_session *rs, uint64_t from,
			       uint64_t until)
{
	rs->started = true;
	rs->catching_up = true;
	rs->next_seq = from;
	rs->late_from = from;
	rs->late_until = until;
	rs->origin0 = from == 0;
}

int flit_rx_session_end(struct flit_rx_session *rs, uint32_t flags)
{
	flit_ctx *ctx = rs->ctx;
	int events = 0;

	for (uint32_t i = 0; i < rs->ntopics; i++) {
		struct flit_rx_topic *t = &rs->topics[i];
		for (unsigned j = 0; j < t->nsubs; j++, events++)
			deliver_event(rs, t->subs[j], t->name, FLIT_MSG_EOS,
				      flags, topic_seq(rs, t), 0);
		free(t->subs);
		free(t->name);
	}
	free(rs->topics);
	for (struct flit_rx_session **pp = &ctx->sessions; *pp; pp = &(*pp)->next)
		if (*pp == rs) {
			*pp = rs->next;
			break;
		}
	ctx->rx.sources_left++;
	free(rs);
	return events;
}

int flit_rx_session_topic_end(struct flit_rx_session *rs, uint32_t idx, uint32_t flags,
			      uint64_t final)
{
	int events = 0;

	if (idx >= rs->ntopics || !rs->topics[idx].name)
		return 0;
	struct flit_rx_topic *t = &rs->topics[idx];
	/* how many it sent, known: the last ones that never came are its
	 * loss, told before its end (the first ones, if none came and its
	 * numbers are known from 0) */
	if (final != UINT64_MAX && t->nsubs) {
		bool known = t->tseq_known || (rs->origin0 && !rs->skipped && !t->seen);
		uint64_t next = t->tseq_known ? t->next_tseq : 0;
		if (!rs->tseq) {
			/* one topic: its numbers are the session's */
			known = rs->started;
			next = rs->next_seq;
		}
		if (known && final > next) {
			for (unsigned j = 0; j < t->nsubs; j++, events++)
				deliver_event(rs, t->subs[j], t->name, FLIT_MSG_LOSS, 0, next,
					      final - next);
			t->next_tseq = final;
			t->tseq_known = true;
		}
	}
	for (unsigned j = 0; j < t->nsubs; j++, events++)
		deliver_event(rs, t->subs[j], t->name, FLIT_MSG_EOS, flags, topic_seq(rs, t), 0);
	free(t->subs);
	free(t->name);
	*t = (struct flit_rx_topic){ 0 };
	return events;
}

int flit_rx_session_loss(struct flit_rx_session *rs, uint64_t first, uint64_t n)
{
	int events = 0;

	rs->ctx->rx.msgs_lost += n;
	rs->ctx->rx.loss_events++;
	if (rs->tseq)
		return 0;       /* each topic's next message tells its own */
	for (uint32_t i = 0; i < rs->ntopics; i++) {
		struct flit_rx_topic *t = &rs->topics[i];
		for (unsigned j = 0; j < t->nsubs; j++, events++)
			deliver_event(rs, t->subs[j], t->name, FLIT_MSG_LOSS, 0,
				      first, n);
	}
	return events;
}

int flit_rx_session_skip(struct flit_rx_session *rs, uint64_t first, uint64_t n)
{
	if (!rs->started)
		flit_rx_session_start(rs, first);
	if (rs->next_seq < first + n)
		rs->next_seq = first + n;
	/* which topics those messages were of is not known: a topic wanted
	 * from now on learns its number from its next message */
	rs->skipped = true;
	rs->ctx->rx.msgs_filtered += n;
	rs->ctx->rx.msgs_filtered_early += n;
	return 0;
}

/* Out of line: a message of topic t whose number is not the topic's next
 * (a session of several topics): its first since subscribers came, or a
 * jump, the topic's loss, told to its subscribers in its numbers. */
static __attribute__((noinline)) int topic_resync(struct flit_rx_session *rs,
						  struct flit_rx_topic *t, uint64_t tseq)
{
	int events = 0;

	if (t->tseq_known && tseq > t->next_tseq) {
		for (unsigned j = 0; j < t->nsubs; j++, events++)
			deliver_event(rs, t->subs[j], t->name, FLIT_MSG_LOSS, 0,
				      t->next_tseq, tseq - t->next_tseq);
	}
	t->tseq_known = true;
	return events;
}

/* Out of line: first frame of a session, or a frame that does not start at
 * the next expected sequence number (a gap: report it; an overlap: the
 * walk below drops the duplicates). */
static __attribute__((noinline)) int rx_resync(struct flit_rx_session *rs,
					       uint64_t seq)
{
	if (!rs->started) {
		rs->started = true;
		rs->next_seq = seq;
		rs->origin0 = seq == 0;
		return 0;
	}
	/* the first retained message may be later than asked for: the
	 * source no longer held the ones before it */
	if (rs->catching_up && seq > rs->next_seq && rs->next_seq == rs->late_from &&
	    seq <= rs->late_until) {
		rs->next_seq = seq;
		return 0;
	}
	if (seq > rs->next_seq) {
		int events = flit_rx_session_loss(rs, rs->next_seq, seq - rs->next_seq);
		rs->next_seq = seq;
		return events;
	}
	return 0;
}

int flit_rx_frame(void *arg, struct flit_rx_session *rs, const void *frame,
		  size_t len)
{
	flit_ctx *ctx = arg;
	struct flit_frame_hdr h;
	struct flit_frame_iter it;
	struct flit_wmsg w;
	enum flit_frame_err fe;
	int delivered = 0;

	fe = flit_frame_check(frame, len, &h);
	if (FLIT_UNLIKELY(fe != FLIT_FE_OK || h.session_id != rs->session_id)) {
		ctx->rx.malformed++;
		flit_debug("%s: frame dropped: %s", rs->source,
			   fe ? flit_frame_strerr(fe) : "session id mismatch");
		return -EBADMSG;
	}
	ctx->rx.frames_received++;
	if (FLIT_UNLIKELY(h.seq != rs->next_seq || !rs->started))
		delivered = rx_resync(rs, h.seq);
	/* topic numbers from the first frame that has them on, if no second
	 * topic was named before: loss is then told per topic (a gap before
	 * that frame, per session, above) */
	if (FLIT_UNLIKELY((h.flags & FLIT_FF_TSEQ) && !rs->tseq))
		tseq_begin(rs);

	struct flit_msg m;
	m.kind = FLIT_MSG_DATA;
	m.flags = (h.flags & FLIT_FF_TS) ? FLIT_MSGF_SEND_TS : 0;
	m.lost = 0;
	m.session_id = rs->session_id;
	m.source = rs->source;
	m.recv_ts_ns = 0;
	if (FLIT_UNLIKELY(rs->frame_ts)) {
		m.recv_ts_ns = rs->frame_ts;
		m.flags |= FLIT_MSGF_RECV_TS | rs->frame_ts_flags;
	} else if (rs->rcv_ts) {
		m.recv_ts_ns = flit_realtime_now();
		m.flags |= FLIT_MSGF_RECV_TS;
	}
	if (FLIT_UNLIKELY(h.flags & FLIT_FF_RETX)) {
		m.flags |= FLIT_MSGF_RETX;
		ctx->rx.retx_received++;
	}
	bool late = FLIT_UNLIKELY(rs->catching_up);

	flit_frame_iter_init(&it, frame, &h);
	ctx->in_callback++;
	while (flit_frame_iter_next(&it, &w)) {
		if (FLIT_UNLIKELY(w.seq < rs->next_seq)) {
			if (w.seq < rs->late_from)
				continue; /* retained, not asked for */
			ctx->rx.duplicates++;
			for (unsigned i = 0; w.topic < rs->ntopics && i < rs->topics[w.topic].nsubs; i++)
				rs->topics[w.topic].subs[i]->st.dups++;
			continue;
		}
		rs->next_seq = w.seq + 1;
		/* a topic not (yet) named by INFO, or that ended: a shared
		 * session's other topics, not for us */
		if (FLIT_UNLIKELY(w.topic >= rs->ntopics)) {
			rs->unnamed++;
			ctx->rx.msgs_filtered++;
			continue;
		}
		struct flit_rx_topic *t = &rs->topics[w.topic];
		t->seen = true;
		if (FLIT_UNLIKELY(!t->nsubs)) {
			rs->unnamed += !t->name;
			ctx->rx.msgs_filtered++;
			continue;
		}
		if (FLIT_UNLIKELY(late)) {
			if (w.seq < rs->late_until) {
				m.flags |= FLIT_MSGF_LATE_JOIN;
			} else {
				m.flags &= ~FLIT_MSGF_LATE_JOIN;
				rs->catching_up = late = false;
			}
		}
		/* several topics: each is numbered on its own (a frame
		 * without FLIT_FF_TSEQ is of the time the session had one
		 * topic, whose numbers were the session's) */
		if (FLIT_UNLIKELY(rs->tseq)) {
			if (FLIT_UNLIKELY(w.tseq != t->next_tseq || !t->tseq_known))
				delivered += topic_resync(rs, t, w.tseq);
			t->next_tseq = w.tseq + 1;
		}
		m.data = w.data;
		m.len = w.len;
		m.seq = w.tseq;
		m.send_ts_ns = w.ts;
		m.topic = t->name;
		if (FLIT_LIKELY(t->one)) {
			flit_sub *s = t->one;
			s->st.msgs++;
			s->st.bytes += w.len;
			s->fn(s, &m, s->arg);
		} else {
			for (unsigned i = 0; i < t->nsubs; i++) {
				flit_sub *s = t->subs[i];
				s->st.msgs++;
				s->st.bytes += w.len;
				s->fn(s, &m, s->arg);
			}
		}
		ctx->rx.msgs_received++;
		ctx->rx.bytes_received += w.len;
		delivered++;
	}
	ctx->in_callback--;
	return delivered;
}

static int subs_changed(flit_ctx *ctx)
{
	int err = 0;

	for (struct flit_rx_session *rs = ctx->sessions; rs; rs = rs->next) {
		rs->rcv_ts = false;
		for (uint32_t i = 0; i < rs->ntopics; i++)
			if (rs->topics[i].name)
				topic_bind(rs, &rs->topics[i]);
	}
	for (unsigned i = 0; i < NTRANSPORTS; i++) {
		struct flit_tp *tp;
		/* a transport that is not open holds no subscription: with
		 * none left, there is nothing to open it for */
		if (!tp_enabled(ctx, i) || (!ctx->subs && !ctx->tp[i]))
			continue;
		int e = ctx_tp(ctx, i, &tp);
		if (!e)
			e = transports[i]->subs_changed(tp);
		if (e && !err)
			err = e;
	}
	return err;
}

flit_sub *flit_sub_new(flit_ctx *ctx, const char *topic,
		       const struct flit_sub_opts *opts)
{
	flit_sub *sub;
	int err;

	if (!ctx)
		return flit_err_null(EINVAL, "flit_sub_new: NULL context");
	if (!flit_topic_valid(topic))
		return flit_err_null(EINVAL, "flit_sub_new: invalid topic name (1..%d printable bytes)", FLIT_TOPIC_MAX);
	if ((err = opts_check(opts, sizeof(*opts), "flit_sub_opts")))
		return flit_null(-err);
	if (!OPT(opts, on_msg, NULL))
		return flit_err_null(EINVAL, "flit_sub_new: opts.on_msg callback is required");
	/* Every transport of context.transports must start: one that cannot
	 * (an XDP program the verifier refuses, a missing capability, no
	 * such interface) fails the subscription with its reason, rather
	 * than leave a subscriber that never hears what it was set up to
	 * hear.  A later flit_sub_new() tries again. */
	for (unsigned i = 0; i < NTRANSPORTS; i++) {
		struct flit_tp *tp;
		if (tp_enabled(ctx, i) && (err = ctx_tp(ctx, i, &tp)))
			return flit_null(-err);
	}
	sub = calloc(1, sizeof(*sub));
	if (!sub)
		return flit_err_null(ENOMEM, "flit_sub_new: out of memory");
	sub->ctx = ctx;
	sub->fn = opts->on_msg;
	sub->arg = OPT(opts, arg, NULL);
	sub->pattern = OPT(opts, pattern, false);
	sub->created_ns = flit_realtime_now();
	strcpy(sub->topic, topic);
	err = flit_cfg_receiver(&ctx->cfg, sub->pattern ? NULL : topic,
				OPT(opts, config, NULL), &sub->cfg);
	if (err) {
		free(sub);
		flit_err_wrap(-err, "subscriber '%s'", topic);
		return flit_null(-err);
	}
	flit_stats_sub_add(ctx->stats, &sub->st, topic, sub->pattern);
	sub->next = ctx->subs;
	ctx->subs = sub;
	/* discovery problems (a corrupted ring, say) are logged by the
	 * transport; they do not stop the subscription */
	subs_changed(ctx);
	return sub;
}

void flit_sub_close(flit_sub *sub)
{
	if (!sub)
		return;
	flit_ctx *ctx = sub->ctx;
	for (flit_sub **pp = &ctx->subs; *pp; pp = &(*pp)->next)
		if (*pp == sub) {
			*pp = sub->next;
			break;
		}
	subs_changed(ctx);
	flit_stats_sub_remove(ctx->stats, &sub->st);
	free(sub);
}
