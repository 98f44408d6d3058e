/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Internal core: the transport interface and the objects transports share
 * with the core.  A transport never knows about subscribers: it hands whole
 * frames, tagged with the receive session they came from, to a frame handler
 * (normally flit_rx_frame()), and it reports sessions found and lost.
 *
 * Threading: a context, its subscribers and its receive side belong to the
 * thread that polls it.  Each publisher may be driven by one thread at a time
 * (distinct publishers from distinct threads is fine).  Creating and closing
 * objects must not race with polling the same context.
 */
#ifndef FLIT_CORE_H
#define FLIT_CORE_H

#include <flit/flit.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "config.h"
#include "error.h"

struct flit_tp;   /* a transport's per-context state */
struct flit_tsrc; /* a transport's per-publisher state */
struct flit_rx_session;
struct flit_tx_stamp;    /* include/flit/tstamp.h */
struct flit_res_ad;
struct flit_ts_status;

/* Zeroed memory on a cache line of its own: a publisher's hot state, read
 * on every send, is one line (not two) whichever of 100,000 it is.  free(). */
static inline void *flit_calloc_line(size_t size)
{
	size_t n = (size + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, n);

	if (p)
		memset(p, 0, n);
	return p;
}

/* The bytes of a source held by its publisher (flit_transport_ops.src_size)
 * that share the line of the publisher's ops, source pointer and stats
 * tick (userspace/ctx.c). */
#define FLIT_SRC_HOT 40u

/* Frame handler: a transport's poll calls it for each frame received.
 * Returns the number of messages and events delivered, or -EBADMSG when the
 * frame was dropped as malformed (already counted). */
typedef int (*flit_frame_fn)(void *arg, struct flit_rx_session *rs,
			     const void *frame, size_t len);

/* transport capabilities */
#define FLIT_CAP_MULTICAST  (1u << 0) /* one send reaches many hosts */
#define FLIT_CAP_ZERO_COPY  (1u << 1) /* claim/commit writes in place */
#define FLIT_CAP_RELIABLE   (1u << 2) /* lossless without the NAK layer */
#define FLIT_CAP_TIMESTAMPS (1u << 3) /* kernel/NIC receive stamps */
#define FLIT_CAP_LOCAL      (1u << 4) /* same host only */

struct flit_transport_ops {
	const char *name;
	unsigned caps;

	int (*open)(struct flit_ctx *ctx, struct flit_tp **out);
	void (*close)(struct flit_tp *tp);

	/* source side: one flit_tsrc per publisher.  src_size 0: src_open
	 * allocates it and src_close frees it.  Otherwise the publisher
	 * holds it: src_open gets *out pointing at src_size zeroed bytes
	 * (8-aligned) in the publisher's own allocation, whose first
	 * FLIT_SRC_HOT bytes share the cache line of what the core reads
	 * for every send (put what a send reads there: a send of any of
	 * 100,000 topics then misses one line, not two, one after the
	 * other); src_close must not free them, nor src_open on failure. */
	size_t src_size;
	int (*src_open)(struct flit_tp *tp, const char *topic,
			const struct flit_cfg_source *cfg,
			struct flit_tsrc **out);
	void (*src_close)(struct flit_tsrc *src);
	int (*send)(struct flit_tsrc *src, const void *data, size_t len);
	int (*claim)(struct flit_tsrc *src, size_t len, void **buf);
	int (*commit)(struct flit_tsrc *src, size_t len);
	int (*abort)(struct flit_tsrc *src);
	int (*flush)(struct flit_tsrc *src);
	int (*receivers)(struct flit_tsrc *src);
	size_t (*max_msg)(const struct flit_tsrc *src);
	uint64_t (*next_seq)(const struct flit_tsrc *src);
	/* add the source's send-side counters into *c */
	void (*src_counters)(const struct flit_tsrc *src, struct flit_counters *c);

	/* receive side: the set of subscriptions changed; attach to sources
	 * that are now wanted and detach from those no longer wanted */
	int (*subs_changed)(struct flit_tp *tp);
	/* deliver up to `limit` messages, frames through fn(arg, ...) */
	int (*poll)(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg);
	/* optional: one line on how the transport is set up */
	const char *(*describe)(const struct flit_tp *tp);
	/* optional: the transmit stamp of the datagram that carried `seq`
	 * (flit_pub_tx_stamp(), include/flit/tstamp.h) */
	int (*tx_stamp)(struct flit_tsrc *src, uint64_t seq, struct flit_tx_stamp *out);
	/* optional: what the transport stamps (flit_ctx_ts_status()) */
	int (*ts_status)(const struct flit_tp *tp, struct flit_ts_status *out);

	/* optional, a transport with a resolver channel (udp, xdp): advertise
	 * another transport's source there and answer queries for it, until
	 * withdrawn (any thread) */
	int (*res_advertise)(struct flit_tp *tp, const struct flit_res_ad *ad);
	void (*res_withdraw)(struct flit_tp *tp, uint32_t session, const char *topic);
	/* optional, a transport without one (rdma): resolution found a source
	 * of ad->mode for a topic a subscriber wants (the polling thread) */
	void (*res_found)(struct flit_tp *tp, const struct flit_res_ad *ad);
};

extern const struct flit_transport_ops flit_shm_ops;
extern const struct flit_transport_ops flit_udp_ops;
extern const struct flit_transport_ops flit_xdp_ops;
#ifdef FLIT_HAVE_RDMA
extern const struct flit_transport_ops flit_rdma_ops; /* transports/rdma */
/* rdma multicast: the session layer of transports/dgram over a UD queue
 * pair (transports/rdma/ud_path.h); named "rdma" too, so that a context
 * listing rdma hears both kinds of source */
extern const struct flit_transport_ops flit_rdma_mc_ops;
#endif

/* ---- receive sessions: what the core knows of one remote source -------- */

/* One line each (the array is line-aligned): a message's delivery reads
 * its topic's line alone, whichever of 100,000 it is. */
struct flit_rx_topic {
	flit_sub *one;        /* subs[0] when nsubs is 1: a message's delivery
			       * reads this line alone (10,000 topics: no
			       * miss on each topic's own array) */
	/* a session of several topics (frames with FLIT_FF_TSEQ): the topic's
	 * next number, known from its first message after subscribers
	 * came; a jump is the topic's loss */
	uint64_t next_tseq;
	unsigned nsubs;
	bool tseq_known;
	bool seen;            /* a message of it came (wanted or not) */
	flit_sub **subs;
	char *name;
} __attribute__((aligned(64)));

struct flit_rx_session {
	struct flit_ctx *ctx;
	uint32_t session_id;
	bool started;         /* next_seq is meaningful */
	bool catching_up;     /* delivering what the source retained (late join) */
	bool rcv_ts;          /* some subscriber wants receive stamps */
	bool tseq;            /* several topics (frames with FLIT_FF_TSEQ, or
			       * two named): loss is told per topic, in the
			       * topic's numbers, not per session */
	bool origin0;         /* started at the session's first message: every
			       * topic it names is known from its number 0 */
	bool skipped;         /* messages of unknown topics were dropped before
			       * us (flit_rx_session_skip): origin0 no longer
			       * tells a topic's first number */
	uint64_t next_seq;
	/* late join: messages below late_until are the retained ones
	 * (FLIT_MSGF_LATE_JOIN); those below late_from were retained beyond
	 * what this receiver asked for and are skipped without a count */
	uint64_t late_from, late_until;
	/* receive stamp of the frame being delivered, set by a transport that
	 * has one (kernel/NIC), else 0: the core reads CLOCK_REALTIME */
	uint64_t frame_ts;
	uint32_t frame_ts_flags;  /* FLIT_MSGF_RECV_TS_KERNEL or _HW */
	struct flit_rx_topic *topics; /* indexed by the frame's topic index */
	uint32_t ntopics, captopics;
	/* messages of topic indexes no INFO named (a shared session's topic
	 * whose page was lost): the transport may ask the source again */
	uint64_t unnamed;
	char source[96];
	struct flit_rx_session *next;
};

/* Create a session for a source found by a transport; the transport then
 * names its topics with flit_rx_session_topic().  NULL + errno. */
struct flit_rx_session *flit_rx_session_new(struct flit_ctx *ctx,
					    uint32_t session_id,
					    const char *source);
/* Bind topic index -> name; delivers BOS to the subscribers it matches.
 * Returns how many subscribers want it (0: the transport may detach). */
int flit_rx_session_topic(struct flit_rx_session *rs, uint32_t idx,
			  const char *name);
/* Topic idx's messages are all to come from its number tseq on (the
 * transport reads them from its first): a jump is its loss. */
void flit_rx_session_topic_from(struct flit_rx_session *rs, uint32_t idx, uint64_t tseq);
/* The next message of the session will carry `seq` (when the transport
 * knows where the receiver joined); gaps after it are reported as loss. */
void flit_rx_session_start(struct flit_rx_session *rs, uint64_t seq);
/* Late join: the transport is about to hand over messages the source
 * retained, from `from` on (the first may come later: what the source no
 * longer holds is not loss), marked as late-join up to `until`, the first
 * live message.  Messages below `from` are skipped. */
void flit_rx_session_late_join(struct flit_rx_session *rs, uint64_t from,
			       uint64_t until);
/* End of session: deliver EOS (flags: FLIT_MSGF_SOURCE_DIED or 0), free.
 * Returns the number of EOS events delivered. */
int flit_rx_session_end(struct flit_rx_session *rs, uint32_t flags);
/* One topic of the session ended (a shared session goes on): EOS (flags as
 * above) to its subscribers, the index forgotten.  Returns the events. */
/* Topic idx ended: EOS to its subscribers.  final: how many messages it
 * sent (its next number), UINT64_MAX when not known; those of its last
 * (or, known from 0, first) that never came are told lost before. */
int flit_rx_session_topic_end(struct flit_rx_session *rs, uint32_t idx, uint32_t flags,
			      uint64_t final);
/* Messages [first, first + n) of the session are lost: counted, and told
 * to every subscriber of its topics, unless its frames carry topic numbers
 * (rs->tseq): then each topic's next message tells its own loss. */
int flit_rx_session_loss(struct flit_rx_session *rs, uint64_t first, uint64_t n);
/* Messages [first, first + n) of the session were dropped before the
 * transport took them (the XDP program's topic filter), in sequence order
 * where a frame would have been delivered: counted as filtered, not lost.
 * Returns events (0). */
int flit_rx_session_skip(struct flit_rx_session *rs, uint64_t first, uint64_t n);

/* The transport's source under a publisher (for the library and its
 * tests: not in include/flit). */
struct flit_tsrc *flit_pub_tsrc(flit_pub *pub);

/* The default frame handler (arg = the context). */
int flit_rx_frame(void *arg, struct flit_rx_session *rs, const void *frame,
		  size_t len);

/* Call fn for each subscriber (topic or pattern, its settings); stops at
 * and returns the first non-zero return. */
int flit_ctx_each_sub(const struct flit_ctx *ctx,
		      int (*fn)(void *arg, const char *topic, bool pattern,
				const struct flit_cfg_receiver *cfg),
		      void *arg);
/* Does any subscriber of ctx want topic `name`? */
bool flit_ctx_wants(const struct flit_ctx *ctx, const char *name);
/* Does the context have any subscriber at all? */
bool flit_ctx_wants_any(const struct flit_ctx *ctx);
const struct flit_cfg_context *flit_ctx_cfg(const struct flit_ctx *ctx);
/* Effective receiver settings for a topic (defaults if no subscriber). */
void flit_ctx_rcv_cfg(const struct flit_ctx *ctx, const char *topic,
		      struct flit_cfg_receiver *out);
/* Where a receiver joining a source of `topic` starts.  src_created_ns: the
 * source's creation time (CLOCK_REALTIME), 0 if unknown. */
enum flit_join {
	FLIT_JOIN_LIVE = 0,  /* at the live stream */
	FLIT_JOIN_FIRST,     /* a subscriber existed before the source: at the
			      * source's first message */
	FLIT_JOIN_LATE,      /* receiver.late_join: first what the source retains */
};
enum flit_join flit_ctx_join_mode(const struct flit_ctx *ctx, const char *topic,
				  uint64_t src_created_ns);
/* (with src_created_ns 0: FLIT_JOIN_LATE if a subscriber asks for late join) */
/* When the oldest subscriber matching `topic` was created (CLOCK_REALTIME
 * ns), 0 if none: for a source that decides where a receiver starts. */
uint64_t flit_ctx_sub_since(const struct flit_ctx *ctx, const char *topic);
/* Receive-side counters a transport may bump from its poll thread. */
struct flit_counters *flit_ctx_rx_counters(struct flit_ctx *ctx);

/* ---- topic resolution for transports without a resolver of their own ----
 * An rdma source is advertised on the domain's resolver channel by the
 * context's udp (or xdp) transport, as INFO with mode FLIT_MODE_RDMA; that
 * transport hands such INFO heard for a wanted topic to the rdma transport. */
struct flit_res_ad {
	uint32_t session;
	uint8_t mode;              /* enum flit_ctl_mode: FLIT_MODE_RDMA */
	uint32_t addr;             /* where to connect (network order); advertised
				    * 0: the address the INFO came from */
	uint16_t port;             /* host order */
	const char *topic;
};
/* Advertise (the topic is copied) / withdraw (the topic of the session, or
 * NULL: one of its topics).  -ENOPROTOOPT: no transport
 * of the context has a resolver channel (udp not listed, or its resolver is
 * off).  Any thread. */
int flit_ctx_res_advertise(struct flit_ctx *ctx, const struct flit_res_ad *ad);
void flit_ctx_res_withdraw(struct flit_ctx *ctx, uint32_t session, const char *topic);
/* From a resolver transport's poll: hand ad (addr resolved, not 0) to the
 * transport of ad->mode, if the context has it open. */
void flit_ctx_res_found(struct flit_ctx *ctx, const struct flit_res_ad *ad);

uint64_t flit_realtime_now(void);
uint64_t flit_monotonic_now(void);
bool flit_topic_valid(const char *topic);

#endif /* FLIT_CORE_H */
