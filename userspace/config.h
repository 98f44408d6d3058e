/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Configuration: "scope.key = value" lines (or "[scope]" sections followed by
 * "key = value" lines, and topic-specific sections '[source "glob"]' /
 * '[receiver "glob"]').  Scopes: context, source, receiver.  Reference of
 * every key: docs/CONFIG.md.
 *
 * Precedence, lowest first: built-in defaults < config file (opts->config_file
 * or $FLIT_CONFIG) < environment FLIT_<SCOPE>_<KEY> (dots become '_', upper
 * case, e.g. FLIT_SOURCE_SHM_MODE=overwrite) < the context's inline config
 * string < topic sections of all of those, in the same order < the object's
 * own options string.
 *
 * Every key and value is validated when it is loaded: an unknown key or a bad
 * value fails with -EINVAL and a trail naming "file:line: ..." (or
 * "environment FLIT_X: ..." or "<origin>:line: ...").
 */
#ifndef FLIT_CONFIG_H
#define FLIT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLIT_NAME_MAX 64
#define FLIT_PATH_MAX 256

enum flit_shm_mode {
	FLIT_SHM_PACED = 0,     /* lossless: writer waits for the slowest reader */
	FLIT_SHM_OVERWRITE = 1, /* writer never waits; lapped readers see loss */
};

enum flit_udp_mode {
	FLIT_UDP_MULTICAST = 0,
	FLIT_UDP_UNICAST = 1,
};

enum flit_udp_uring_send {
	FLIT_UDP_URING_SEND_SOCKET = 0, /* sendmmsg on the socket, the ring untouched */
	FLIT_UDP_URING_SEND_RING = 1,   /* SEND requests through the ring */
};

enum flit_udp_uring_recv {
	FLIT_UDP_URING_RECV_RECVMSG = 0, /* a multishot RECVMSG into provided buffers */
	FLIT_UDP_URING_RECV_POLL = 1,    /* readiness by a multishot poll, recvmmsg */
};

enum flit_udp_topic_numbers {
	FLIT_UDP_TSEQ_SHORT = 0, /* 8-byte message headers, the number in them (FLIT_FF_SHORT) */
	FLIT_UDP_TSEQ_LONG = 1,  /* 16-byte headers: for receivers older than short headers */
};

enum flit_udp_ts {
	FLIT_UDP_TS_OFF = 0,
	FLIT_UDP_TS_SOFTWARE = 1,
	FLIT_UDP_TS_HARDWARE = 2,
};

enum flit_udp_service {
	FLIT_UDP_SERVICE_THREAD = 0, /* a context thread answers NAKs, queries, timers */
	FLIT_UDP_SERVICE_POLL = 1,   /* only flit_ctx_poll() does */
};

enum flit_rdma_mode {
	FLIT_RDMA_SEND = 0,  /* SEND into the receiver's posted buffers */
	FLIT_RDMA_WRITE = 1, /* RDMA WRITE with immediate into its buffer ring */
	FLIT_RDMA_MULTICAST = 2, /* UD multicast to a group: the session layer of udp/xdp */
};

#define FLIT_ENDPOINT_MAX 32 /* "255.255.255.255:65535" or "a.b.c.d/nn" */

struct flit_cfg_context {
	char domain[FLIT_NAME_MAX];    /* context.domain = default ([A-Za-z0-9_.-]+) */
	char shm_dir[FLIT_PATH_MAX];   /* context.shm_dir = /dev/shm/flit (absolute) */
	int log_level;                 /* context.log_level = warn (error|warn|info|debug) */
	bool stats;                    /* context.stats = on: the counters file (flit-stat, docs/STATS.md) */
	char stats_dir[FLIT_PATH_MAX]; /* context.stats_dir = /dev/shm/flit-stats (absolute) */
	uint32_t stats_interval_ms;    /* context.stats_interval_ms = 100: longest a live counter waits for the file (1..60000) */
	uint32_t stats_rows;           /* context.stats_rows = 256: rows of the file (16..65536) */
	uint32_t stats_file_mode;      /* context.stats_file_mode = 0600 (0600, 0640 or 0660) */
	char transports[32];           /* context.transports = shm,udp: transports this context may use */
	char udp_interface[16];        /* context.udp.interface = (empty: routing decides) */
	char udp_resolver[FLIT_ENDPOINT_MAX]; /* context.udp.resolver = 239.192.76.1:14400 (group:port or off) */
	uint32_t udp_resolver_max_ms;  /* context.udp.resolver_max_ms = 5000: advert/query backoff cap */
	uint64_t udp_resolver_rate_limit; /* context.udp.resolver_rate_limit = 16M: adverts and
					   * answers to queries, bits/s (0: none) */
	int udp_backend;               /* context.udp.backend = sockets (sockets|io_uring) */
	int udp_uring_send;            /* context.udp.uring_send = socket (socket|ring) */
	int udp_uring_recv;            /* context.udp.uring_recv = recvmsg (recvmsg|poll) */
	uint32_t udp_rx_batch;         /* context.udp.rx_batch = 32: datagrams per receive call */
	uint32_t udp_busy_poll_us;     /* context.udp.busy_poll_us = 0: SO_BUSY_POLL */
	uint64_t udp_rcvbuf;           /* context.udp.rcvbuf = 4M */
	uint64_t udp_sndbuf;           /* context.udp.sndbuf = 1M */
	uint32_t udp_ttl;              /* context.udp.ttl = 16: multicast TTL */
	bool udp_loopback;             /* context.udp.loopback = true: IP_MULTICAST_LOOP */
	int udp_timestamps;            /* context.udp.timestamps = off (off|software|hardware) */
	int udp_tx_timestamps;         /* context.udp.tx_timestamps = off (off|software|hardware): sources' transmit stamps */
	int udp_service;               /* context.udp.service = thread (thread|poll) */
	char udp_impair[64];           /* context.udp.impair = (tests: loss=5%,dup=1%,reorder=2%,seed=N) */
	/* xdp: the udp transport's sessions over AF_XDP (context.udp.* apply too) */
	int xdp_mode;                  /* context.xdp.mode = auto (auto|native|skb) */
	int xdp_attach;                /* context.xdp.attach = auto (auto|pinned|self) */
	uint32_t xdp_queues;           /* context.xdp.queues = 0: all rx queues */
	uint32_t xdp_frames;           /* context.xdp.frames = 4096: UMEM frames per queue (power of 2) */
	uint32_t xdp_frame_size;       /* context.xdp.frame_size = 2048 (2048|4096) */
	uint32_t xdp_ring_size;        /* context.xdp.ring_size = 1024: ring entries (power of 2) */
	bool xdp_hugepages;            /* context.xdp.hugepages = false */
	int xdp_zerocopy;              /* context.xdp.zerocopy = auto (auto|off|on) */
	bool xdp_need_wakeup;          /* context.xdp.need_wakeup = true */
	int xdp_tx_queue;              /* context.xdp.tx_queue = shared (shared|own) */
	uint32_t xdp_busy_poll_us;     /* context.xdp.busy_poll_us = 0 */
	uint32_t xdp_busy_poll_budget; /* context.xdp.busy_poll_budget = 0: kernel default */
	bool xdp_verify_checksums;     /* context.xdp.verify_checksums = true */
	bool xdp_filter;               /* context.xdp.filter = true: drop unwanted topics in XDP */
	int xdp_rx_timestamps;         /* context.xdp.rx_timestamps = off (off|hardware): NIC stamps in XDP RX metadata */
	bool xdp_tx_timestamps;        /* context.xdp.tx_timestamps = false: AF_XDP TX metadata completion stamps */
	/* rdma: where this context's sources accept connections (rdma_cm) */
	char rdma_address[FLIT_ENDPOINT_MAX]; /* context.rdma.address = (empty: every RDMA device) */
	uint32_t rdma_port;            /* context.rdma.port = 14500 (0: any free port) */
	uint32_t rdma_mc_depth;        /* context.rdma.multicast_depth = 1024: UD receive buffers (16..16384) */
};

enum flit_xdp_attach_policy {
	FLIT_XDP_ATTACH_AUTO = 0,   /* flit-loader's pins if present, else attach (and detach at close) */
	FLIT_XDP_ATTACH_PINNED = 1, /* only flit-loader's pins */
	FLIT_XDP_ATTACH_SELF = 2,   /* attach (reusing an attached flit program) */
};

struct flit_cfg_source {
	char transport[16];            /* source.transport = shm (shm|udp|xdp) */
	enum flit_shm_mode shm_mode;   /* source.shm.mode = paced (paced|overwrite) */
	uint64_t shm_capacity;         /* source.shm.capacity = 1M: power of two, 64K..1G, suffixes K M G */
	uint32_t shm_max_readers;      /* source.shm.max_readers = 16 (1..1024) */
	uint32_t shm_file_mode;        /* source.shm.file_mode = 0600 (octal; 0600, 0640 or 0660) */
	uint32_t shm_liveness_ms;      /* source.shm.liveness_ms = 10: how often a blocked writer checks readers (1..10000) */
	bool timestamps;               /* source.timestamps = false: stamp messages with CLOCK_REALTIME */
	uint32_t late_join;            /* source.late_join = 0: the last N messages a late-joining receiver gets (0: none) */
	char session[64];              /* source.session: udp/xdp: empty: publishers of equal source settings share a session (one socket, sequence space, frames); FLIT_SESSION_OWN: a session of its own; a name: the publishers naming it share it */
#define FLIT_SESSION_OWN "own"
	bool batch;                    /* source.batch = false: pack messages into frames until batch_max or flush */
	uint32_t batch_max;            /* source.batch_max = 8K: largest frame, bytes (256..1M) */
	int udp_mode;                  /* source.udp.mode = multicast (multicast|unicast) */
	char udp_group[FLIT_ENDPOINT_MAX]; /* source.udp.group = 239.192.77.0/24: group, or range picked by topic hash */
	uint32_t udp_port;             /* source.udp.port = 14401: multicast destination port */
	uint32_t udp_ctl_port;         /* source.udp.ctl_port = 0: the source's own port (0: any) */
	uint32_t udp_max_datagram;     /* source.udp.max_datagram = 1472 */
	uint32_t udp_batch_min;        /* source.udp.batch_min = 0: send a batch at this many bytes (0: when full) */
	uint32_t udp_batch_interval_us;/* source.udp.batch_interval_us = 1000: longest a batched message waits */
	uint64_t udp_rate_limit;       /* source.udp.rate_limit = 0: data, bits/s (0: none) */
	uint64_t udp_retx_rate_limit;  /* source.udp.retx_rate_limit = 0: retransmissions, bits/s */
	uint64_t udp_retain;           /* source.udp.retain = 16M: retention buffer bytes */
	uint32_t udp_retain_ms;        /* source.udp.retain_ms = 5000 */
	uint32_t udp_hb_min_ms;        /* source.udp.hb_min_ms = 5 */
	uint32_t udp_hb_max_ms;        /* source.udp.hb_max_ms = 1000 */
	int udp_topic_numbers;         /* source.udp.topic_numbers = short (short|long): how a message of a session of several topics carries its topic's number */
	int rdma_mode;                 /* source.rdma.mode = send (send|write|multicast): SEND/RECV, RDMA WRITE with immediate, or UD multicast */
	uint32_t rdma_frame_max;       /* source.rdma.frame_max = 8K: largest frame (a receiver's buffers must hold it) */
	uint32_t rdma_slots;           /* source.rdma.slots = 64: frames in flight per source (power of 2, 8..4096) */
	uint32_t rdma_inline;          /* source.rdma.inline = 256: send frames up to this size inline (0: never) */
};

struct flit_cfg_receiver {
	bool timestamps;               /* receiver.timestamps = false: stamp arrival with CLOCK_REALTIME */
	bool late_join;                /* receiver.late_join = false: joining a running source, first get what it retains for late joiners */
	uint32_t shm_liveness_ms;      /* receiver.shm.liveness_ms = 10: how often an idle reader checks its writer (1..10000) */
	uint32_t discovery_ms;         /* receiver.discovery_ms = 100: rescan for new sources at least this often (1..60000) */
	uint32_t udp_nak_backoff_us;   /* receiver.udp.nak_backoff_us = 2000 */
	uint32_t udp_nak_interval_ms;  /* receiver.udp.nak_interval_ms = 10 */
	uint32_t udp_nak_timeout_ms;   /* receiver.udp.nak_timeout_ms = 2000 */
	uint64_t udp_reorder;          /* receiver.udp.reorder = 4M: bytes held ahead of gaps */
	uint32_t udp_session_timeout_ms; /* receiver.udp.session_timeout_ms = 5000 */
	char udp_static[FLIT_ENDPOINT_MAX]; /* receiver.udp.static = (addr:port: static topic map) */
	char rdma_static[FLIT_ENDPOINT_MAX]; /* receiver.rdma.static = (addr:port of the source's context.rdma listener) */
	uint32_t rdma_depth;           /* receiver.rdma.depth = 64: receive buffers per connection = credits (4..4096) */
	uint32_t rdma_frame_max;       /* receiver.rdma.frame_max = 16K: bytes per receive buffer */
	uint32_t rdma_retry_ms;        /* receiver.rdma.retry_ms = 200: first reconnect delay (backs off to 10x) */
};

struct flit_cfg_entry;

/* A loaded configuration: validated entries, applied per object. */
struct flit_cfg {
	struct flit_cfg_entry *entries;
	unsigned n, cap;
};

void flit_cfg_init(struct flit_cfg *cfg);
void flit_cfg_free(struct flit_cfg *cfg);

/* Append the file's entries.  -ENOENT etc. if unreadable, -EINVAL with
 * "path:line: ..." on a bad line. */
int flit_cfg_load_file(struct flit_cfg *cfg, const char *path);
/* Append entries from text; origin names it in errors ("<ctx options>"). */
int flit_cfg_load_string(struct flit_cfg *cfg, const char *text,
			 const char *origin);
/* Append entries from FLIT_<SCOPE>_<KEY> environment variables
 * (FLIT_CONFIG itself is the file name and is not a key). */
int flit_cfg_load_env(struct flit_cfg *cfg);

/* Resolve the effective settings.  `extra` is an object's own options text
 * (may be NULL), validated here: -EINVAL with "<origin>:line: ..." on error. */
int flit_cfg_context(const struct flit_cfg *cfg, struct flit_cfg_context *out);
int flit_cfg_source(const struct flit_cfg *cfg, const char *topic,
		    const char *extra, struct flit_cfg_source *out);
int flit_cfg_receiver(const struct flit_cfg *cfg, const char *topic,
		      const char *extra, struct flit_cfg_receiver *out);

/* An "a.b.c.d:port" endpoint value (as the parser validated it) into *a
 * (port 0 when it has none), and a sockaddr back to "a.b.c.d:port" in buf. */
struct sockaddr_in;
void flit_ep_parse(const char *s, struct sockaddr_in *a);
const char *flit_ep_str(const struct sockaddr_in *a, char *buf, size_t n);

#endif /* FLIT_CONFIG_H */
