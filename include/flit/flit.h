/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * flit — low-latency topic publish/subscribe.
 *
 * Conventions (all calls):
 *  - Calls return 0 or a non-negative count on success, -errno on error.
 *  - Hot-path send calls may also return a positive *status* (enum flit_status):
 *    not an error, the message was not taken; act as the status says.
 *  - Constructors return NULL and set errno.  Destructors accept NULL.
 *  - After any failure, flit_errmsg() describes what failed, where and why.
 *  - The library never prints: install a print callback with flit_set_print().
 *  - Options structs start with `size_t sz`; declare them with FLIT_OPTS() so
 *    that a program built against an older header keeps working.
 */
#ifndef FLIT_FLIT_H
#define FLIT_FLIT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLIT_VERSION_MAJOR 0
#define FLIT_VERSION_MINOR 1
#define FLIT_VERSION_PATCH 0

#ifndef FLIT_API
#define FLIT_API __attribute__((visibility("default")))
#endif

/* Declare and zero-initialise an options struct with its size filled in. */
#define FLIT_OPTS(TYPE, NAME, ...)                                             \
	struct TYPE NAME = ({                                                  \
		memset(&NAME, 0, sizeof(struct TYPE));                         \
		(struct TYPE){ .sz = sizeof(struct TYPE), __VA_ARGS__ };       \
	})

typedef struct flit_ctx flit_ctx;
typedef struct flit_pub flit_pub;
typedef struct flit_sub flit_sub;

/* Longest topic name, in bytes, without the terminating NUL. */
#define FLIT_TOPIC_MAX 255

/* Outcomes of the hot-path send calls that are not errors. */
enum flit_status {
	FLIT_OK = 0,
	/* Receiver-paced source: the slowest live receiver has not made room.
	 * Nothing was sent.  Poll your own work and retry; a receiver that died
	 * is evicted automatically, so retrying never waits forever. */
	FLIT_BACK_PRESSURED = 1,
	/* The transport has no connected receiver and cannot buffer (unicast and
	 * connected transports).  Nothing was sent; retry later or drop. */
	FLIT_NOT_CONNECTED = 2,
};

/* ---- errors and logging ------------------------------------------------ */

enum flit_log_level {
	FLIT_LOG_ERROR = 0,
	FLIT_LOG_WARN = 1,
	FLIT_LOG_INFO = 2,
	FLIT_LOG_DEBUG = 3,
};

typedef void (*flit_print_fn)(enum flit_log_level level, const char *fmt,
			      va_list ap);

/* Install the process-wide print callback (NULL: silence, the default).
 * Returns the previous one.  The callback may be called from any thread. */
FLIT_API flit_print_fn flit_set_print(flit_print_fn fn);

/* The calling thread's description of its most recent failure:
 * "what failed: where: why".  Never NULL; "" if nothing failed yet. */
FLIT_API const char *flit_errmsg(void);

/* Name of a status or error code returned by a flit call (static string). */
FLIT_API const char *flit_strstatus(int rc);

/* ---- context ------------------------------------------------------------ */

struct flit_ctx_opts {
	size_t sz;
	/* Configuration file.  NULL: the file named by $FLIT_CONFIG, if set. */
	const char *config_file;
	/* Extra "scope.key = value" lines applied after the file (overrides). */
	const char *config;
	size_t :0;
};

/* Create a context: the unit that owns transports and is polled by one
 * thread.  NULL + errno on failure (bad config: EINVAL, see flit_errmsg()). */
FLIT_API flit_ctx *flit_ctx_new(const struct flit_ctx_opts *opts);
FLIT_API void flit_ctx_close(flit_ctx *ctx);

/* Busy-poll every transport of the context, delivering messages and events
 * to subscriber callbacks on the calling thread.  Frames are delivered whole,
 * so `limit` (<= 0: a default of 256) is where polling stops, not a hard cap:
 * the frame that reaches it is finished.  Also does discovery and liveness
 * housekeeping, cheaply.  Returns the number of messages delivered plus the
 * number of events (one per subscriber), or -errno. */
FLIT_API int flit_ctx_poll(flit_ctx *ctx, int limit);

/* Counters of one context, all monotonic. */
struct flit_counters {
	size_t sz;
	uint64_t msgs_sent;
	uint64_t bytes_sent;
	uint64_t frames_sent;
	uint64_t back_pressured;  /* sends refused with FLIT_BACK_PRESSURED */
	uint64_t msgs_received;   /* delivered to at least one subscriber */
	uint64_t bytes_received;
	uint64_t frames_received;
	uint64_t malformed;       /* frames dropped as malformed */
	uint64_t duplicates;      /* messages dropped as already delivered */
	uint64_t msgs_lost;       /* messages reported lost to subscribers */
	uint64_t loss_events;
	uint64_t readers_evicted; /* dead receivers evicted by our sources */
	uint64_t sources_joined;
	uint64_t sources_left;
	/* network transports (udp, xdp) */
	uint64_t naks_sent;       /* NAK ranges sent by our receivers */
	uint64_t naks_received;   /* NAK ranges received by our sources */
	uint64_t retransmissions; /* frames retransmitted by our sources */
	uint64_t retx_received;   /* retransmitted frames received */
	uint64_t foreign_dropped; /* datagrams that are not flit frames */
	uint64_t unknown_session; /* frames of sessions not (yet) resolved */
	uint64_t rate_limited;    /* sends refused by the data rate limit */
	/* messages of a joined shared session's topics that no subscriber of
	 * this context wants (or not yet named): dropped after reliability
	 * (udp, xdp), on arrival (rdma, shm), or in the XDP program before the copy into user space
	 * (xdp: frames of none of the wanted topics; the program's counters
	 * count those frames as "filtered") */
	uint64_t msgs_filtered;
	/* of msgs_filtered, those dropped before they reached this process:
	 * in the XDP program (xdp, a session of which some topics are wanted
	 * here), which told the context their numbers */
	uint64_t msgs_filtered_early;
};

/* Copy the context's counters into *out (out->sz must be set). */
FLIT_API int flit_ctx_counters(const flit_ctx *ctx, struct flit_counters *out);

/* How transport `transport` is set up in this context, in one line (for
 * reports: every choice that changes performance, e.g. for xdp the XDP
 * mode, copy or zero-copy, need_wakeup, busy-poll, queues and UMEM).  A
 * transport opens with the first publisher or subscriber that uses it.
 * Copies the text into buf (NUL-terminated, truncated to len) and returns
 * its full length, or -ENOENT (not open in this context) or -EINVAL. */
FLIT_API int flit_ctx_describe(const flit_ctx *ctx, const char *transport,
			       char *buf, size_t len);

/* Path of the context's counters file, which flit-stat reads (context.stats,
 * context.stats_dir; format in docs/STATS.md): one per context, removed by
 * flit_ctx_close().  Copies it into buf (NUL-terminated, truncated to len)
 * and returns its full length; -ENOENT when context.stats is off, or the
 * error that kept the file from being made (the context works without it). */
FLIT_API int flit_ctx_stats_path(const flit_ctx *ctx, char *buf, size_t len);

/* ---- publishing --------------------------------------------------------- */

struct flit_pub_opts {
	size_t sz;
	/* Transport name ("shm").  NULL: source.transport from the config. */
	const char *transport;
	/* "key = value" lines in source scope, overriding the config file. */
	const char *config;
	size_t :0;
};

/* Create a source of `topic`.  NULL + errno on failure; EADDRINUSE if the
 * transport allows one live writer per topic and another one is alive. */
FLIT_API flit_pub *flit_pub_new(flit_ctx *ctx, const char *topic,
				const struct flit_pub_opts *opts);
/* Flush, tell receivers the source ended, free. */
FLIT_API void flit_pub_close(flit_pub *pub);

/* Copy and send one message.  Returns 0, a positive enum flit_status
 * (nothing sent), or -errno (-EMSGSIZE: larger than flit_pub_max_msg()). */
FLIT_API int flit_pub_send(flit_pub *pub, const void *data, size_t len);

/* Zero-copy send: reserve `len` bytes in the transport's buffer and return a
 * pointer to them in *buf; write the message there, then commit it (possibly
 * shorter) or abort it.  Exactly one claim may be open per source.  While it
 * is open, the other publishers of its transport session wait (another
 * thread) or get -EBUSY (the same thread); a shm session's claim is
 * committed or aborted on the thread that made it (-EBUSY elsewhere).
 * Returns 0, a positive enum flit_status, or -errno. */
FLIT_API int flit_pub_claim(flit_pub *pub, size_t len, void **buf);
FLIT_API int flit_pub_commit(flit_pub *pub, size_t len);
FLIT_API int flit_pub_abort(flit_pub *pub);

/* Make every message sent so far visible to receivers (closes an open
 * batch).  Returns 0, a positive status, or -errno. */
FLIT_API int flit_pub_flush(flit_pub *pub);

/* Largest message the source accepts, in bytes. */
FLIT_API size_t flit_pub_max_msg(const flit_pub *pub);
/* Sequence number the next message will carry: the topic's own, from 0,
 * whether or not its transport session carries other topics too. */
FLIT_API uint64_t flit_pub_next_seq(const flit_pub *pub);
FLIT_API const char *flit_pub_topic(const flit_pub *pub);
/* Receivers currently attached to this source where the transport knows
 * (shm: live readers that want its topic), or -EOPNOTSUPP. */
FLIT_API int flit_pub_receivers(const flit_pub *pub);

/* ---- subscribing -------------------------------------------------------- */

enum flit_msg_kind {
	FLIT_MSG_DATA = 0,
	/* A source of the topic was found: beginning of session. */
	FLIT_MSG_BOS = 1,
	/* The source ended (closed, or its process died: flags has
	 * FLIT_MSGF_SOURCE_DIED).  Nothing more comes from it. */
	FLIT_MSG_EOS = 2,
	/* Messages seq .. seq + lost - 1 of this topic from this source cannot
	 * be delivered.  In a session of several topics, told when the
	 * topic's next message shows the jump (its first messages too when
	 * the receiver has had the session from its start; the last ones
	 * before EOS, with nothing after them, are counted in the context's
	 * msgs_lost only). */
	FLIT_MSG_LOSS = 3,
};

#define FLIT_MSGF_SOURCE_DIED (1u << 0)
#define FLIT_MSGF_SEND_TS     (1u << 1) /* send_ts_ns is valid */
#define FLIT_MSGF_RECV_TS     (1u << 2) /* recv_ts_ns is valid */
#define FLIT_MSGF_RECV_TS_KERNEL (1u << 3) /* recv_ts_ns is the kernel's software stamp */
#define FLIT_MSGF_RECV_TS_HW  (1u << 4) /* recv_ts_ns is the NIC's hardware stamp (PHC) */
#define FLIT_MSGF_RETX        (1u << 5) /* came in a retransmission */
/* a message the source retained and gave this receiver when it joined late
 * (receiver.late_join; messages sent before the join, then the live stream) */
#define FLIT_MSGF_LATE_JOIN   (1u << 6)

/* A message (or event) as seen by a subscriber callback.  The view and the
 * memory it points to are valid only during the callback. */
struct flit_msg {
	enum flit_msg_kind kind;
	uint32_t flags;         /* FLIT_MSGF_* */
	const void *data;       /* payload (DATA) */
	size_t len;
	const char *topic;
	uint64_t seq;           /* the topic's sequence number at its source (BOS
				 * and EOS: of its next message; 0 when not
				 * known yet in a session of several topics) */
	uint64_t lost;          /* LOSS: number of messages lost from seq */
	uint32_t session_id;    /* the source's session id */
	const char *source;     /* e.g. "shm:pid=123,session=1a2b3c4d", "udp:10.77.0.1:40123"
				 * (the transport that received it: "xdp:..." over AF_XDP) */
	uint64_t send_ts_ns;    /* CLOCK_REALTIME at send, if flagged */
	uint64_t recv_ts_ns;    /* CLOCK_REALTIME at receive, if flagged */
};

typedef void (*flit_msg_fn)(flit_sub *sub, const struct flit_msg *msg,
			    void *arg);

struct flit_sub_opts {
	size_t sz;
	flit_msg_fn on_msg;     /* required */
	void *arg;
	/* The topic argument is a pattern: '*' matches any run of characters,
	 * '?' one character, [set] a class (fnmatch(3) without flags). */
	bool pattern;
	/* "key = value" lines in receiver scope, overriding the config file. */
	const char *config;
	size_t :0;
};

/* Subscribe to `topic` (or a pattern).  Sources found before or after this
 * call are delivered from flit_ctx_poll().  NULL + errno on failure, among
 * them a transport of context.transports that cannot start (an XDP program
 * the kernel refuses, a missing capability, a missing interface):
 * flit_errmsg() names it and why ("transport xdp: ... verifier: ..."). */
FLIT_API flit_sub *flit_sub_new(flit_ctx *ctx, const char *topic,
				const struct flit_sub_opts *opts);
/* Stop delivery.  Must not be called from a callback of the same context. */
FLIT_API void flit_sub_close(flit_sub *sub);

#ifdef __cplusplus
}
#endif
#endif /* FLIT_FLIT_H */
