// SPDX-License-Identifier: BSD-2-Clause
/*
 * shm transport, the writer side: sessions (one ring each) and the
 * publishers (topics) that write into them.  See shm.h.
 *
 * A session that may have several publishers (every one but
 * source.session = own) is locked for each write: a spin lock that the
 * thread holding it may take again, held from a claim to its commit (the
 * claim writes in place, in the ring, where the next message would go).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm/shm.h"
#include "shm/shm_lock.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* ---- the session lock (shm_lock.h) ---------------------------------------- */

static inline void sess_lock(struct shm_sess *s) { shm_lock_take(&s->lk); }
static inline bool sess_trylock(struct shm_sess *s) { return shm_lock_try(&s->lk); }
static inline void sess_unlock(struct shm_sess *s) { shm_lock_give(&s->lk); }

/* t's claim is open and held by another thread: a shared session's claim
 * holds the session's lock until its commit, on its own thread. */
static inline bool claim_elsewhere(struct shm_sess *s, const struct shm_topic *t)
{
	return s->claimer == t &&
		atomic_load_explicit(&s->lk.owner, memory_order_relaxed) != shm_lock_tid();
}

/* ---- rings -------------------------------------------------------------- */

static uint32_t new_session_id(void)
{
	uint32_t id = 0;
	while (!id)
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = (uint32_t)getpid() ^ (uint32_t)flit_monotonic_now();
	return id;
}

/* Undo create_ring()'s mapping and descriptor (the name is the caller's). */
static void ring_unmap(struct shm_sess *s)
{
	if (s->map)
		munmap(s->map, s->map_len);
	s->map = NULL;
	close(s->fd);
	s->fd = -1;
}

/* Create, initialise and lock a fresh ring file at tmp: a session ring (a
 * topic table) if table, else the ring of `topic` alone. */
static int create_ring(struct shm_sess *s, const char *tmp, const char *topic,
		       const struct flit_cfg_source *cfg, bool table)
{
	uint32_t hsz = shm_hdr_size(cfg->shm_max_readers);
	uint32_t names = SHM_TOPICS_MAX * SHM_NAME_AVG;
	size_t live = (size_t)hsz + cfg->shm_capacity;
	int err;

	s->map_len = live + (table ? shm_table_size(SHM_TOPICS_MAX, names, cfg->shm_max_readers) : 0);
	s->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, cfg->shm_file_mode);
	if (s->fd < 0)
		return flit_err(errno, "shm: cannot create %s", tmp);
	if (fchmod(s->fd, cfg->shm_file_mode) < 0 ||
	    ftruncate(s->fd, (off_t)s->map_len) < 0) {
		err = flit_err(errno, "shm: cannot size %s to %zu bytes", tmp, s->map_len);
		goto fail;
	}
	if ((err = shm_ofd_lock(s->fd, 0, F_WRLCK))) {
		err = flit_err(-err, "shm: cannot lock %s", tmp);
		goto fail;
	}
	/* the header and the data ring in memory now; a session ring's
	 * table stays sparse, a page at a time as topics are added */
	s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE,
		      MAP_SHARED | (table ? 0 : MAP_POPULATE), s->fd, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		err = flit_err(errno, "shm: cannot map %s (%zu bytes)", tmp, s->map_len);
		goto fail;
	}
	if (table && madvise(s->map, live, MADV_POPULATE_WRITE))
		for (size_t o = 0; o < live; o += 4096) /* before 5.14 */
			((volatile char *)s->map)[o] = 0;
	err = table ? shm_ring_init_session(s->map, cfg->shm_capacity, cfg->shm_max_readers,
					    cfg->shm_mode, s->session_id, topic, SHM_TOPICS_MAX, names)
		    : shm_ring_init(s->map, cfg->shm_capacity, cfg->shm_max_readers,
				    cfg->shm_mode, s->session_id, topic, 0);
	if (err)
		goto fail;
	((struct shm_hdr *)s->map)->st.writer_pid = (uint32_t)getpid();
	atomic_store(&((struct shm_hdr *)s->map)->w.late_join, cfg->late_join);
	return 0;
fail:
	ring_unmap(s);
	unlink(tmp);
	return err;
}

/* The ring of one topic, named by it: one live writer; a dead writer's
 * ring is taken over (renamed over). */
static int own_ring_open(struct shm_sess *s, const char *topic,
			 const struct flit_cfg_source *cfg)
{
	char name[ENC_NAME_MAX + 32], tmp[PATH_MAX + ENC_NAME_MAX + 64];
	struct flit_tp *tp = s->tp;
	int err = 0;

	shm_topic_to_name(topic, name, sizeof(name));
	if ((size_t)snprintf(s->path, sizeof(s->path), "%s/%s", tp->dir, name) >= sizeof(s->path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.new-%08x-%s", tp->dir, s->session_id, name) >= sizeof(tmp))
		return flit_err(ENAMETOOLONG, "shm: path too long");

	for (int attempt = 0; attempt < 16; attempt++) {
		struct stat st_old, st_path;
		int old = open(s->path, O_RDWR | O_CLOEXEC);

		if (old < 0 && errno != ENOENT)
			return flit_err(errno, "shm: cannot open %s", s->path);
		if (old >= 0) {
			/* An existing ring: its writer is alive iff it holds byte 0. */
			if (shm_ofd_lock(old, 0, F_WRLCK)) {
				struct shm_hdr h;
				ssize_t n = pread(old, &h, sizeof(h), 0);
				close(old);
				return flit_err(EADDRINUSE, "shm: topic '%s' already has a live writer (pid %u, %s)",
						topic, n == (ssize_t)sizeof(h) ? h.st.writer_pid : 0, s->path);
			}
			/* We hold the dead writer's lock; make sure the name still
			 * points at that file, or another writer got there first. */
			if (fstat(old, &st_old) || stat(s->path, &st_path) ||
			    st_old.st_ino != st_path.st_ino || st_old.st_dev != st_path.st_dev) {
				close(old);
				continue;
			}
		}
		if ((err = create_ring(s, tmp, topic, cfg, false))) {
			if (old >= 0)
				close(old);
			return err;
		}
		if (old >= 0) {
			/* take over from the dead writer atomically */
			err = rename(tmp, s->path) ? -errno : 0;
			close(old);
		} else {
			err = link(tmp, s->path) ? -errno : 0;
			unlink(tmp);
		}
		if (err == -EEXIST) { /* another writer won the race; look again */
			ring_unmap(s);
			continue;
		}
		if (err) {
			err = flit_err(-err, "shm: cannot publish %s", s->path);
			ring_unmap(s);
			unlink(tmp);
			return err;
		}
		return 0;
	}
	return flit_err(EAGAIN, "shm: topic '%s': lost the race to create %s too often", topic, s->path);
}

/* A session ring, "@<session id>.ring" (a new id if that name is taken). */
static int sess_ring_open(struct shm_sess *s, const char *topic,
			  const struct flit_cfg_source *cfg)
{
	struct flit_tp *tp = s->tp;
	char tmp[PATH_MAX + 64];
	int err;

	shm_sweep_dead(tp);
	for (int attempt = 0; attempt < 16; attempt++) {
		if (attempt)
			s->session_id = new_session_id();
		if ((size_t)snprintf(s->path, sizeof(s->path), "%s/@%08x.ring", tp->dir,
				     s->session_id) >= sizeof(s->path) ||
		    (size_t)snprintf(tmp, sizeof(tmp), "%s/.new-%08x-@.ring", tp->dir,
				     s->session_id) >= sizeof(tmp))
			return flit_err(ENAMETOOLONG, "shm: path too long");
		if ((err = create_ring(s, tmp, topic, cfg, true)))
			return err;
		/* linked under its name only now that we hold byte 0 */
		err = link(tmp, s->path) ? -errno : 0;
		unlink(tmp);
		if (err == -EEXIST) {
			ring_unmap(s);
			continue;
		}
		if (err) {
			err = flit_err(-err, "shm: cannot publish %s", s->path);
			ring_unmap(s);
			return err;
		}
		return 0;
	}
	return flit_err(EAGAIN, "shm: no free session ring name in %s", tp->dir);
}

/* ---- sessions ------------------------------------------------------------ */

/* The settings the publishers of one session must share. */
static void cfg_key(const struct flit_cfg_source *c, char *out, size_t cap)
{
	snprintf(out, cap, "mode=%d cap=%llu readers=%u fmode=%o live=%u batch=%d/%u ts=%d",
		 (int)c->shm_mode, (unsigned long long)c->shm_capacity, c->shm_max_readers,
		 c->shm_file_mode, c->shm_liveness_ms, c->batch, c->batch_max, c->timestamps);
}

static void sess_free(struct shm_sess *s)
{
	free(s->topics);
	free(s);
}

/* Add topic t (named topic) to session s (locked).  0, or -ENOSPC: the
 * session takes no more topics (its table is full), or -ENOMEM. */
static int sess_add_topic(struct shm_sess *s, struct shm_topic *t, const char *topic)
{
	struct shm_wr *w = &s->w;
	uint32_t idx = 0;

	if (s->table) {
		if (s->full)
			return -ENOSPC;
		if (s->ntopics == s->captopics) {
			uint32_t cap = s->captopics ? s->captopics * 2 : 16;
			void *p = realloc(s->topics, cap * sizeof(*s->topics));
			if (!p)
				return flit_err(ENOMEM, "shm: out of memory");
			s->topics = p;
			s->captopics = cap;
		}
		if (s->live == 1 && !s->tseq) {
			/* a second topic: from now on every message carries its
			 * topic's own number (FLIT_FF_TSEQ); what is batched
			 * goes out without first */
			if (s->claimer)
				return flit_err(EBUSY, "shm: a claim is open on session %08x",
						s->session_id);
			if (w->frame && w->fcount) {
				flit_st16(w->frame + 6, (uint16_t)w->fcount);
				flit_st32(w->frame + 8, w->flen);
				shm_wr_publish(w, w->flen);
				w->frame = NULL;
				w->fcount = 0;
			}
		}
		int r = shm_ring_topic_add(s->map, topic, w->pos, flit_realtime_now());
		if (r < 0) {
			s->full = true;
			return -ENOSPC;
		}
		idx = (uint32_t)r;
		if (s->live >= 1 && !s->tseq) {
			s->tseq = true;
			s->fflags |= FLIT_FF_TSEQ;
		}
	} else {
		if (!s->captopics) {
			s->topics = calloc(1, sizeof(*s->topics));
			if (!s->topics)
				return flit_err(ENOMEM, "shm: out of memory");
			s->captopics = 1;
		}
	}
	t->ss = s;
	t->idx = idx;
	s->topics[idx] = t;
	if (idx >= s->ntopics)
		s->ntopics = idx + 1;
	if (!s->live)
		s->lead = idx;
	s->live++;
	return 0;
}

static int sess_new(struct flit_tp *tp, struct shm_topic *t, const char *topic,
		    const struct flit_cfg_source *cfg, bool own, const char *key,
		    struct shm_sess **out)
{
	struct shm_sess *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return flit_err(ENOMEM, "shm: out of memory");
	s->tp = tp;
	s->fd = -1;
	s->session_id = new_session_id();
	s->batch = cfg->batch;
	s->ts = cfg->timestamps;
	s->fflags = s->ts ? FLIT_FF_TS : 0;
	s->batch_max = cfg->batch_max;
	s->liveness_ms = cfg->shm_liveness_ms;
	s->shared = !own;
	s->table = !own;
	snprintf(s->name, sizeof(s->name), "%s", own ? "" : cfg->session);
	snprintf(s->cfgkey, sizeof(s->cfgkey), "%s", key);
	err = own ? own_ring_open(s, topic, cfg) : sess_ring_open(s, topic, cfg);
	if (err) {
		free(s);
		return err;
	}
	struct stat st;
	fstat(s->fd, &st);
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	shm_wr_init(&s->w, s->map);
	/* a session's with room for topic numbers from the start (a second
	 * publisher must not shrink it) */
	s->max_msg = s->w.max_frame - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN - FLIT_MSG_TS_LEN -
		(s->table ? FLIT_MSG_TSEQ_LEN : 0);
	/* a batch frame can be no larger than the ring's largest record */
	if (s->batch_max > s->w.max_frame)
		s->batch_max = (uint32_t)s->w.max_frame;
	if (s->max_msg > FLIT_MSG_LEN_MAX)
		s->max_msg = FLIT_MSG_LEN_MAX;
	if ((err = sess_add_topic(s, t, topic))) {
		atomic_store(&s->w.hdr->st.closed, 1);
		unlink(s->path);
		ring_unmap(s);
		sess_free(s);
		return err < 0 ? err : flit_err(ENOSPC, "shm: %s: no room for topic '%s'",
						 s->path, topic);
	}
	*out = s;
	return 0;
}

int shm_src_open(struct flit_tp *tp, const char *topic,
		 const struct flit_cfg_source *cfg, struct flit_tsrc **out)
{
	struct shm_topic *t = (struct shm_topic *)*out; /* held by the publisher, zeroed */
	struct shm_sess *s;
	char key[SESS_CFGKEY_MAX];
	int err;

	cfg_key(cfg, key, sizeof(key));
	/* a ring of its own: asked for, or late join (a ring retains the
	 * session's last messages, not the topic's: N of them may hold
	 * none of its) */
	bool own = !strcmp(cfg->session, FLIT_SESSION_OWN) || (!cfg->session[0] && cfg->late_join);

again:
	pthread_mutex_lock(&tp->lock);
	if (!own) {
		for (s = tp->srcs; s; s = s->next) {
			if (!s->table || s->full || strcmp(s->name, cfg->session))
				continue;
			if (strcmp(s->cfgkey, key)) {
				if (!cfg->session[0])
					continue;
				pthread_mutex_unlock(&tp->lock);
				return flit_err(EINVAL, "shm: publisher '%s' names session '%s' with other "
						"source settings than its other publishers (source.shm.*, "
						"batch, batch_max and timestamps must be equal)",
						topic, cfg->session);
			}
			/* never wait for a session while holding the list (its
			 * holder, in a claim, may be waiting for the list) */
			if (!sess_trylock(s)) {
				pthread_mutex_unlock(&tp->lock);
				sched_yield();
				goto again;
			}
			err = sess_add_topic(s, t, topic);
			sess_unlock(s);
			if (err == -ENOSPC)
				continue;
			pthread_mutex_unlock(&tp->lock);
			if (err)
				return err;
			flit_debug("shm: source %s in session %08x, topic index %u", topic,
				   s->session_id, t->idx);
			*out = (struct flit_tsrc *)t;
			return 0;
		}
	}
	err = sess_new(tp, t, topic, cfg, own, key, &s);
	if (err) {
		pthread_mutex_unlock(&tp->lock);
		return err;
	}
	s->next = tp->srcs;
	tp->srcs = s;
	pthread_mutex_unlock(&tp->lock);
	shm_registry_bump(tp);
	flit_debug("shm: source %s: %s", topic, s->path);
	*out = (struct flit_tsrc *)t;
	return 0;
}

/* Publish the open frame. */
static void sess_publish_open(struct shm_sess *s)
{
	struct shm_wr *w = &s->w;

	if (w->frame) {
		flit_st16(w->frame + 6, (uint16_t)w->fcount);
		flit_st32(w->frame + 8, w->flen);
		shm_wr_publish(w, w->flen);
		w->frame = NULL;
		w->fcount = 0;
	}
}

/* Undo an open claim: the ring ahead of the writer must stay zero (stale
 * bytes could otherwise pass for a record tag). */
static void claim_undo(struct shm_sess *s)
{
	struct shm_wr *w = &s->w;
	uint8_t *msg = w->frame + w->flen;

	memset(msg, 0, (size_t)(w->claim + flit_align8(w->claim_max) - msg));
	w->claim = NULL;
	s->claimer = NULL;
	if (w->fcount == 0) {
		memset(w->frame, 0, FLIT_FRAME_HDR_LEN);
		w->frame = NULL; /* nothing else in the frame: forget it */
	}
}

static void sess_close(struct shm_sess *s)
{
	struct flit_tp *tp = s->tp;
	struct stat st;

	for (struct shm_sess **pp = &tp->srcs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	atomic_store_explicit(&s->w.hdr->st.closed, 1, memory_order_release);
	/* remove the name only if it is still ours (not a successor's) */
	if (stat(s->path, &st) == 0 && st.st_ino == s->ino && st.st_dev == s->dev)
		unlink(s->path);
	shm_registry_bump(tp);
	munmap(s->map, s->map_len);
	close(s->fd);
	sess_free(s);
}

void shm_src_close(struct flit_tsrc *ts)
{
	struct shm_topic *t = (struct shm_topic *)ts;
	struct shm_sess *s;
	struct flit_tp *tp;

	if (!t)
		return;
	s = t->ss;
	tp = s->tp;
	/* the session first, then the list: a thread holding the session (a
	 * claim) may wait for the list (flit_pub_new), never the other way */
	if (s->shared)
		sess_lock(s);
	pthread_mutex_lock(&tp->lock);
	if (s->claimer == t) {
		claim_undo(s);
		if (s->shared)
			sess_unlock(s); /* the claim's */
	}
	/* what it sent goes out first (unless this thread's claim of
	 * another topic holds the frame: then its end is after that frame) */
	uint64_t end = s->w.pos + (s->claimer ? 1 : 0);
	if (!s->claimer)
		sess_publish_open(s);
	/* the session goes on: the topic ends (its last topic ends with it) */
	if (s->table && s->live > 1)
		shm_ring_topic_end(s->map, t->idx, s->claimer ? end : s->w.pos, t->tseq);
	s->topics[t->idx] = NULL;
	s->live--;
	if (s->lead == t->idx && s->live) {
		/* the next publisher reports the session's counters */
		s->frames_base = s->frames_rep;
		s->bp_base = s->bp_rep;
		s->ev_base = s->ev_rep;
		while (s->lead < s->ntopics && !s->topics[s->lead])
			s->lead++;
	}
	bool last = !s->live;
	/* a session nobody else names ends with its last topic */
	if (s->shared)
		sess_unlock(s);
	if (last)
		sess_close(s);
	pthread_mutex_unlock(&tp->lock);
	/* t is its publisher's (flit_shm_ops.src_size) */
}

/* Evict readers that died (their slot lock is free).  Slow path: runs when
 * the writer is blocked, at most every liveness_ms. */
static unsigned evict_dead(struct shm_sess *s, bool force)
{
	uint64_t now = flit_monotonic_now();
	unsigned n = 0;

	if (!force && now < s->next_liveness_ns)
		return 0;
	s->next_liveness_ns = now + (uint64_t)s->liveness_ms * 1000000u;
	for (uint32_t i = 0; i < s->w.max_readers; i++) {
		struct shm_slot *sl = shm_slot(s->w.hdr, i);
		uint32_t st = atomic_load(&sl->state);
		if ((st & 0xff) != SHM_SLOT_ACTIVE || shm_ofd_held(s->fd, 1 + i) != 0)
			continue;
		/* CAS on the generation: a reader that re-claimed the slot
		 * meanwhile holds its lock and bumped the generation */
		if (atomic_compare_exchange_strong(&sl->state, &st,
						   (st & ~0xffu) | SHM_SLOT_FREE)) {
			n++;
			flit_info("shm: %s: evicted dead reader in slot %u (pid %u)",
				  s->path, i, sl->pid);
		}
	}
	s->evicted += n;
	if (n)
		shm_wr_refresh_limit(&s->w);
	return n;
}

/* Account one message of t. */
static inline void count_msg(struct shm_sess *s, struct shm_topic *t, size_t len)
{
	s->w.seq++;
	s->w.msgs++;
	s->w.bytes += len;
	t->tseq++;
	t->msgs++;
	t->bytes += len;
}

/* Bytes a message of len takes in the session's frames. */
static inline uint32_t msg_len(const struct shm_sess *s, size_t len)
{
	return (uint32_t)flit_msg_wire_len(len, s->ts) + (s->tseq ? FLIT_MSG_TSEQ_LEN : 0);
}

static inline uint8_t *put_hdr(const struct shm_sess *s, const struct shm_topic *t,
			       uint8_t *m, size_t len)
{
	uint64_t ts = s->ts ? flit_realtime_now() : 0;

	if (s->tseq)
		return flit_frame_put_hdr_tseq(m, t->idx, (uint32_t)len, s->ts, ts, t->tseq);
	return flit_frame_put_hdr(m, t->idx, (uint32_t)len, s->ts, ts);
}

/* No further message (even an empty one) fits in the open batch frame. */
static inline bool batch_full(const struct shm_sess *s)
{
	return s->w.flen + FLIT_MSG_HDR_LEN + FLIT_MSG_TS_LEN + (s->table ? FLIT_MSG_TSEQ_LEN : 0) + 8 >
		s->batch_max;
}

static int sess_claim(struct shm_sess *s, struct shm_topic *t, size_t len, void **buf)
{
	struct shm_wr *w = &s->w;
	uint64_t mlen;
	uint8_t *m;

	if (FLIT_UNLIKELY(s->claimer))
		return flit_err(EBUSY, s->claimer == t ? "shm: a claim is already open on this source"
				: "shm: a claim of another publisher of this session is open on this thread");
	if (FLIT_UNLIKELY(len > s->max_msg))
		return flit_err(EMSGSIZE, "shm: message of %zu bytes exceeds the maximum %zu",
				len, s->max_msg);
	mlen = msg_len(s, len);
	if (w->frame) {
		/* batching: append to the open frame if it still fits */
		if (w->flen + mlen <= s->batch_max && w->fcount < UINT16_MAX &&
		    shm_wr_extend(w, w->flen + mlen)) {
			m = w->frame + w->flen;
			goto put;
		}
		sess_publish_open(s);
	}
	w->frame = shm_wr_reserve(w, FLIT_FRAME_HDR_LEN + mlen);
	if (FLIT_UNLIKELY(!w->frame)) {
		w->back_pressured++;
		if (evict_dead(s, false))
			w->frame = shm_wr_reserve(w, FLIT_FRAME_HDR_LEN + mlen);
		if (!w->frame)
			return FLIT_BACK_PRESSURED;
	}
	flit_frame_begin(w->frame, FLIT_FT_DATA, s->fflags, s->session_id, w->seq);
	w->flen = FLIT_FRAME_HDR_LEN;
	w->fcount = 0;
	m = w->frame + FLIT_FRAME_HDR_LEN;
put:
	w->claim = put_hdr(s, t, m, len);
	w->claim_max = (uint32_t)len;
	s->claimer = t;
	*buf = w->claim;
	return 0;
}

static int sess_commit(struct shm_sess *s, struct shm_topic *t, size_t len)
{
	struct shm_wr *w = &s->w;
	uint8_t *payload = w->claim;

	if (FLIT_UNLIKELY(!payload || s->claimer != t || len > w->claim_max))
		return flit_err(EINVAL, payload && s->claimer == t ? "shm: commit of %zu bytes exceeds the claim"
				: "shm: commit without a claim (%zu bytes)", len);
	if (len != w->claim_max) {
		flit_st32(payload - (s->tseq ? FLIT_MSG_TSEQ_LEN : 0) - (s->ts ? FLIT_MSG_TS_LEN : 0) - 4,
			  (uint32_t)len);
		/* keep the writer's zeroed window zero past the shorter message */
		memset(payload + flit_align8(len), 0,
		       flit_align8(w->claim_max) - flit_align8(len));
	}
	if (len & 7)
		memset(payload + len, 0, flit_align8(len) - len);
	w->flen = (uint32_t)(payload + flit_align8(len) - w->frame);
	w->fcount++;
	w->claim = NULL;
	s->claimer = NULL;
	count_msg(s, t, len);
	/* unbatched: every message is its own frame; batched: publish when no
	 * further message could fit */
	if (!s->batch || batch_full(s))
		sess_publish_open(s);
	return 0;
}

int shm_claim(struct flit_tsrc *ts, size_t len, void **buf)
{
	struct shm_topic *t = (struct shm_topic *)ts;
	struct shm_sess *s = t->ss;

	if (!s->shared)
		return sess_claim(s, t, len, buf);
	if (claim_elsewhere(s, t))
		return flit_err(EBUSY, "shm: a claim is already open on this source (on another thread)");
	shm_lock_take_for_claim(&s->lk);
	int rc = sess_claim(s, t, len, buf);
	/* held until the commit (or abort) */
	if (rc)
		sess_unlock(s);
	return rc;
}

int shm_commit(struct flit_tsrc *ts, size_t len)
{
	struct shm_topic *t = (struct shm_topic *)ts;
	struct shm_sess *s = t->ss;

	if (!s->shared)
		return sess_commit(s, t, len);
	if (claim_elsewhere(s, t))
		return flit_err(EBUSY, "shm: commit on another thread than the claim's (a shared session's "
				"claim holds its lock until the commit, on the claiming thread; "
				"source.session = own lifts that)");
	sess_lock(s);
	int rc = sess_commit(s, t, len);
	sess_unlock(s);
	if (!rc)
		sess_unlock(s); /* the claim's */
	return rc;
}

int shm_abort(struct flit_tsrc *ts)
{
	struct shm_topic *t = (struct shm_topic *)ts;
	struct shm_sess *s = t->ss;

	if (s->shared) {
		if (claim_elsewhere(s, t))
			return flit_err(EBUSY, "shm: abort on another thread than the claim's (a shared "
					"session's claim holds its lock until then)");
		sess_lock(s);
	}
	if (!s->w.claim || s->claimer != t) {
		if (s->shared)
			sess_unlock(s);
		return flit_err(EINVAL, "shm: abort without a claim");
	}
	claim_undo(s);
	if (s->shared) {
		sess_unlock(s);
		sess_unlock(s); /* the claim's */
	}
	return 0;
}

static int sess_send(struct shm_sess *s, struct shm_topic *t, const void *data, size_t len)
{
	struct shm_wr *w = &s->w;
	void *buf;

	/* fast path: unbatched, nothing open, fits before the ring's end and
	 * within the readers' limit: write the whole frame and publish */
	if (FLIT_LIKELY(!s->batch && !w->frame && len <= s->max_msg)) {
		uint32_t flen = FLIT_FRAME_HDR_LEN + msg_len(s, len);
		uint64_t rec = shm_rec_len(flen), off = w->pos & w->mask;
		if (FLIT_LIKELY(off + rec <= w->cap && shm_wr_room(w, w->pos + rec + 8))) {
			shm_wr_intent(w, w->pos + rec + 8);
			uint64_t ts = s->ts ? flit_realtime_now() : 0;
			uint8_t *pl = FLIT_LIKELY(!s->tseq)
				? flit_frame_put_single(w->data + off + 8, s->session_id, w->seq,
							t->idx, (uint32_t)len, s->ts, ts)
				: flit_frame_put_single_tseq(w->data + off + 8, s->session_id, w->seq,
							     t->idx, (uint32_t)len, s->ts, ts, t->tseq);
			if (len)
				memcpy(pl, data, len);
			count_msg(s, t, len);
			shm_wr_publish(w, flen);
			return 0;
		}
	}
	/* fast path: append to the open batch frame in place */
	if (FLIT_LIKELY(s->batch && w->frame && !s->claimer && len <= s->max_msg)) {
		uint32_t nflen = w->flen + msg_len(s, len);
		if (FLIT_LIKELY(nflen <= s->batch_max && w->fcount < UINT16_MAX &&
				shm_wr_extend(w, nflen))) {
			uint8_t *pl = put_hdr(s, t, w->frame + w->flen, len);
			flit_zero_pad(pl, (uint32_t)len);
			if (len)
				memcpy(pl, data, len);
			w->flen = nflen;
			w->fcount++;
			count_msg(s, t, len);
			if (batch_full(s))
				sess_publish_open(s);
			return 0;
		}
	}
	int rc = sess_claim(s, t, len, &buf);

	if (FLIT_UNLIKELY(rc))
		return rc;
	if (len)
		memcpy(buf, data, len);
	return sess_commit(s, t, len);
}

int shm_send(struct flit_tsrc *ts, const void *data, size_t len)
{
	struct shm_topic *t = (struct shm_topic *)ts;
	struct shm_sess *s = t->ss;

	if (!s->shared)
		return sess_send(s, t, data, len);
	sess_lock(s);
	int rc = FLIT_LIKELY(!s->claimer)
		? sess_send(s, t, data, len)
		: flit_err(EBUSY, s->claimer == t ? "shm: a claim is already open on this source"
			   : "shm: a claim of another publisher of this session is open on this thread");
	sess_unlock(s);
	return rc;
}

int shm_flush(struct flit_tsrc *ts)
{
	struct shm_topic *t = (struct shm_topic *)ts;
	struct shm_sess *s = t->ss;
	int rc = 0;

	if (s->shared)
		sess_lock(s);
	if (s->claimer)
		rc = flit_err(EBUSY, "shm: flush with a claim open (commit or abort it first)");
	else
		sess_publish_open(s);
	if (s->shared)
		sess_unlock(s);
	return rc;
}

int shm_receivers(struct flit_tsrc *ts)
{
	const struct shm_topic *t = (const struct shm_topic *)ts;
	struct shm_sess *s = t->ss;
	int n = 0;

	if (s->shared)
		sess_lock(s);
	evict_dead(s, true);
	if (s->shared)
		sess_unlock(s);
	/* a session ring: the readers that want this topic */
	uint32_t idx = ((struct shm_topic *)ts)->idx;
	for (uint32_t i = 0; i < s->w.max_readers; i++)
		if ((atomic_load(&shm_slot(s->w.hdr, i)->state) & 0xff) == SHM_SLOT_ACTIVE &&
		    (!s->table || (atomic_load(&shm_wants(s->map, &s->w.hdr->geom, i)[idx / 64]) >> (idx % 64) & 1)))
			n++;
	return n;
}

size_t shm_max_msg(const struct flit_tsrc *ts)
{
	return ((const struct shm_topic *)ts)->ss->max_msg;
}

uint64_t shm_next_seq(const struct flit_tsrc *ts)
{
	return ((const struct shm_topic *)ts)->tseq;
}

/* A publisher's counters: its own messages and bytes; the session's frames,
 * back-pressure and evictions with its lead publisher only (the lowest
 * index in use), so that a context's totals count them once. */
void shm_src_counters(const struct flit_tsrc *ts, struct flit_counters *c)
{
	const struct shm_topic *t = (const struct shm_topic *)ts;
	struct shm_sess *s = t->ss;

	/* never wait (a claim may hold the lock for long): without it, the
	 * counts as they stand (aligned 64-bit loads), the lead's report not
	 * remembered */
	bool locked = !s->shared || sess_trylock(s);
	c->msgs_sent += t->msgs;
	c->bytes_sent += t->bytes;
	if (s->lead == t->idx) {
		c->frames_sent += s->w.frames - s->frames_base;
		c->back_pressured += s->w.back_pressured - s->bp_base;
		c->readers_evicted += s->evicted - s->ev_base;
		/* a closing lead's last report goes into the context's totals:
		 * the next lead reports from there (nothing counted twice, and
		 * nothing published since lost) */
		if (locked) {
			s->frames_rep = s->w.frames;
			s->bp_rep = s->w.back_pressured;
			s->ev_rep = s->evicted;
		}
	}
	if (s->shared && locked)
		sess_unlock(s);
}
