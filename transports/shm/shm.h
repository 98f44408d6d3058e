/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The shm transport (internal to transports/shm/): rings in shared-memory
 * files under <shm_dir>/<domain>/, one live writer each, any number of
 * readers (threads or processes).  The ring itself: shm_ring.h.
 *
 * Sessions.  Publishers of one context with equal shm settings share one
 * session ring, "@<session id>.ring", by default (source.session empty),
 * or the ring of the session they name (source.session = NAME): one
 * sequence space, implicit batching across their topics (source.batch), a
 * table in the ring that names its topics (index -> name), and each
 * message carries its topic's index and, once a second topic came, its
 * topic's own number (FLIT_FF_TSEQ).  Closing a publisher ends its topic
 * (an ended-log entry: its subscribers get EOS after its last message);
 * the session ends with its last topic, or with its process.  A publisher
 * with source.session = own, or with late join (what a ring retains is
 * the session's last messages, not the topic's), gets a ring of its own,
 * named by its topic ("<topic>.ring", no table): one live writer per
 * topic, a second gets EADDRINUSE, a new one takes over a dead writer's.
 *
 * Liveness uses open-file-description locks (F_OFD_SETLK), which the
 * kernel drops when the holder dies, whatever pid namespace it lives in:
 *   byte 0      held by the writer for its lifetime;
 *   byte 1 + i  held by the reader that owns slot i.
 * A blocked writer evicts slots whose lock is free; an idle reader declares
 * the writer dead when byte 0 is free.  A ring is linked under its name
 * only once its writer holds byte 0, so a named ring whose byte 0 is free
 * is dead: whoever finds a dead session ring removes it.
 *
 * Discovery: writers bump a generation counter in <dir>/.registry after
 * creating or removing a ring; pollers rescan the directory when it changes
 * (and every receiver.discovery_ms as a fallback).  A context with
 * subscribers maps every session ring of the domain and watches its table
 * (no reader slot: a paced writer never waits for a watcher); it takes a
 * slot and reads the ring once a topic it wants is named there.
 *
 * The files: shm.c (the transport: directory, registry, discovery, the
 * operations table), shm_src.c (sessions and publishers: the writer side),
 * shm_rx.c (attachments: the reader side and the poll).
 */
#ifndef FLIT_SHM_H
#define FLIT_SHM_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core.h"
#include "shm/shm_ring.h"
#include "shm/shm_lock.h"

#define REGISTRY_NAME  ".registry"
#define REGISTRY_MAGIC 0x5947455254494c46ull /* "FLITREGY" */
#define HOUSEKEEP_POLLS 256
#define ENC_NAME_MAX   200
#define SESS_CFGKEY_MAX 160

struct registry {
	uint64_t magic;
	uint64_t pad[7];
	_Atomic uint64_t gen;
};

struct shm_att; /* a reader's attachment to one ring */
struct shm_sess;

struct flit_tp {
	struct flit_ctx *ctx;
	char dir[PATH_MAX];
	int reg_fd;
	struct registry *reg;
	uint64_t seen_gen;
	struct shm_att *atts;
	unsigned polls;
	uint64_t next_scan_ns;
	uint32_t discovery_ms;
	/* (dev, ino) of rings found dead, so rescans skip them */
	struct { dev_t dev; ino_t ino; } *stale;
	unsigned nstale, capstale;
	/* source side: the sessions (lock: the list, and a session's topics
	 * as publishers come and go) */
	pthread_mutex_t lock;
	struct shm_sess *srcs;
};

/* A publisher: one topic of a session (the transport's flit_tsrc). */
/* Held by its publisher (flit_shm_ops.src_size): what a send reads and
 * writes in the publisher's first line (FLIT_SRC_HOT bytes). */
struct shm_topic {
	struct shm_sess *ss;
	uint64_t tseq;               /* its own number of its next message */
	uint64_t msgs, bytes;
	uint32_t idx;                /* its index in the session's messages */
};                                   /* (its name: flit_pub_topic()) */
_Static_assert(sizeof(struct shm_topic) <= FLIT_SRC_HOT,
	       "a shm send's state in its publisher's first line");

/* A session: one ring, written by the publishers of its topics. */
struct shm_sess {
	struct shm_wr w;             /* hot state first */
	struct shm_lock lk;          /* shared: the writer's lock (shm_lock.h) */
	bool shared;                 /* publishers may come: lock every write */
	bool batch, ts;
	bool tseq;                   /* several topics: messages carry FLIT_FF_TSEQ */
	bool table;                  /* a session ring (a topic table) */
	bool full;                   /* the table takes no more topics */
	uint16_t fflags;             /* DATA flags of the frames it writes */
	uint32_t batch_max;
	uint32_t session_id;
	size_t max_msg;
	struct shm_topic *claimer;   /* whose claim is open */
	struct flit_tp *tp;
	struct shm_sess *next;
	struct shm_topic **topics;   /* by index; NULL: ended */
	uint32_t ntopics, captopics, live, lead;
	uint64_t frames_base, bp_base, ev_base; /* reported by closed leads */
	uint64_t frames_rep, bp_rep, ev_rep;    /* what the lead last reported */
	int fd;
	void *map;
	size_t map_len;
	dev_t dev;
	ino_t ino;
	uint64_t next_liveness_ns;
	uint32_t liveness_ms;
	uint64_t evicted;
	char name[64];               /* source.session; "" unnamed */
	char cfgkey[SESS_CFGKEY_MAX];
	char path[PATH_MAX];
};

struct shm_att {
	struct shm_rd rd;
	struct flit_rx_session *rs;  /* NULL: watching a session ring */
	bool table;                  /* a session ring */
	bool writable;
	bool retry;                  /* activation failed (no free slot): again
				      * at the next discovery tick */
	struct shm_geom g;           /* the geometry, validated: the file's own
				      * may change under us, this does not */
	uint8_t *ended_bm;           /* a watcher's: topics the ended log lists */
	uint32_t nended_bm;          /* ended-log entries folded into ended_bm */
	uint32_t ntopics_seen;       /* table entries looked at */
	uint32_t nended_seen;        /* ended-log entries looked at */
	/* topics that ended at a position the reader has not reached */
	struct { uint32_t idx; uint64_t end_pos, final; } *pend;
	unsigned npend, cappend;
	/* catching up (late join, or a subscriber older than the source):
	 * a copying reader from the oldest intact record to where rd joined */
	bool cu_on;
	uint64_t cu_end;
	struct shm_rd cu;
	struct shm_att *next;
	int fd;
	void *map;
	size_t map_len;
	dev_t dev;
	ino_t ino;
	unsigned slot_idx;
	uint32_t gen_state;
	uint64_t checked_pos;        /* position at the last liveness check */
	uint64_t next_check_ns;
	uint32_t liveness_ms;
	bool dead, corrupt, table_bad;
	bool ended_some;             /* run_ends() ended a topic since att_ended() looked */
	char topic[FLIT_TOPIC_MAX + 1]; /* own ring: its topic; session: the first */
	char path[PATH_MAX];
};

/* ---- shm.c: helpers the files share */
int shm_ofd_lock(int fd, off_t byte, short type);
/* 1 if someone holds a lock on `byte`, 0 if free, -errno on error. */
int shm_ofd_held(int fd, off_t byte);
void shm_topic_to_name(const char *topic, char *out, size_t cap);
void shm_registry_bump(struct flit_tp *tp);
bool shm_is_stale(const struct flit_tp *tp, dev_t dev, ino_t ino);
void shm_mark_stale(struct flit_tp *tp, dev_t dev, ino_t ino);
/* Remove a dead session ring at path if it is still the file (dev, ino). */
void shm_remove_dead(struct flit_tp *tp, const char *path, dev_t dev, ino_t ino);
/* Remove every dead session ring of the directory (a new session's
 * writer does it: rings whose process was killed go, subscribers or not). */
void shm_sweep_dead(struct flit_tp *tp);

/* ---- shm_src.c: the writer side (flit_transport_ops' source operations) */
int shm_src_open(struct flit_tp *tp, const char *topic,
		 const struct flit_cfg_source *cfg, struct flit_tsrc **out);
void shm_src_close(struct flit_tsrc *src);
int shm_send(struct flit_tsrc *src, const void *data, size_t len);
int shm_claim(struct flit_tsrc *src, size_t len, void **buf);
int shm_commit(struct flit_tsrc *src, size_t len);
int shm_abort(struct flit_tsrc *src);
int shm_flush(struct flit_tsrc *src);
int shm_receivers(struct flit_tsrc *src);
size_t shm_max_msg(const struct flit_tsrc *src);
uint64_t shm_next_seq(const struct flit_tsrc *src);
void shm_src_counters(const struct flit_tsrc *src, struct flit_counters *c);

/* ---- shm_rx.c: the reader side */
/* Attach to a ring file (fd open, read-write if `writable`); returns the
 * events delivered or -errno with a trail naming the file. */
int shm_att_open(struct flit_tp *tp, int fd, bool writable, const char *path,
		 const struct stat *st);
int shm_att_detach(struct flit_tp *tp, struct shm_att *a, uint32_t eos_flags);
bool shm_attached(const struct flit_tp *tp, dev_t dev, ino_t ino);
int shm_rx_subs_changed(struct flit_tp *tp);
int shm_rx_poll(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg);
/* shm.c's: scan the directory, attaching what is wanted (events) */
int shm_rescan(struct flit_tp *tp);

#endif /* FLIT_SHM_H */
