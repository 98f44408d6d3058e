// SPDX-License-Identifier: BSD-2-Clause
/*
 * shm transport: one ring file per topic under <shm_dir>/<domain>/, one live
 * writer per topic, any number of readers (threads or processes).
 *
 * Liveness uses open-file-description locks (F_OFD_SETLK), which the kernel
 * drops when the holder dies, whatever pid namespace it lives in:
 *   byte 0      held by the writer for its lifetime;
 *   byte 1 + i  held by the reader that owns slot i.
 * A blocked writer evicts slots whose lock is free; an idle reader declares
 * the writer dead when byte 0 is free.  A new writer takes over a topic whose
 * writer died by renaming a fresh file over the old name.
 *
 * Discovery: writers bump a generation counter in <dir>/.registry after
 * creating or removing a ring; pollers rescan the directory when it changes
 * (and every receiver.discovery_ms as a fallback).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "shm/shm_ring.h"

#define REGISTRY_NAME  ".registry"
#define REGISTRY_MAGIC 0x5947455254494c46ull /* "FLITREGY" */
#define HOUSEKEEP_POLLS 256
#define ENC_NAME_MAX   200

struct registry {
	uint64_t magic;
	uint64_t pad[7];
	_Atomic uint64_t gen;
};

struct shm_att; /* a reader's attachment to one ring */

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
};

struct flit_tsrc {
	struct shm_wr w;   /* hot state first */
	bool batch, ts;
	uint32_t batch_max;
	uint32_t session_id;
	size_t max_msg;
	struct flit_tp *tp;
	int fd;
	void *map;
	size_t map_len;
	dev_t dev;
	ino_t ino;
	uint64_t next_liveness_ns;
	uint32_t liveness_ms;
	uint64_t evicted;
	char path[PATH_MAX];
};

struct shm_att {
	struct shm_rd rd;
	struct flit_rx_session *rs;
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
	uint64_t checked_pos;   /* position at the last liveness check */
	uint64_t next_check_ns;
	uint32_t liveness_ms;
	bool dead, corrupt;
	char topic[FLIT_TOPIC_MAX + 1];
};

/* ---- helpers ------------------------------------------------------------ */

static int ofd_lock(int fd, off_t byte, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1 };
	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

/* 1 if someone holds a lock on `byte`, 0 if free, -errno on error. */
static int ofd_held(int fd, off_t byte)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1 };
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

static int mkdir_shared(const char *path)
{
	if (mkdir(path, 01777) == 0) {
		chmod(path, 01777); /* umask applies to mkdir */
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	return -errno;
}

/* Topic -> file name: [A-Za-z0-9_.-] kept (no leading '.'), others %XX;
 * names that would be too long become "#<hash>" (the header holds the name). */
static void topic_to_name(const char *topic, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)topic; *p; p++) {
		bool keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
			    (*p == '.' && p != (const unsigned char *)topic);
		if (o + 4 > ENC_NAME_MAX)
			goto hashed;
		if (keep) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	snprintf(out + o, cap - o, ".ring");
	return;
hashed:;
	uint64_t h = 0xcbf29ce484222325ull;
	for (const unsigned char *p = (const unsigned char *)topic; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	snprintf(out, cap, "#%016llx.ring", (unsigned long long)h);
}

/* File name -> topic; false for hashed names (read the header instead). */
static bool name_to_topic(const char *name, char *out, size_t cap)
{
	size_t n = strlen(name), o = 0;

	if (n < 6 || strcmp(name + n - 5, ".ring") || name[0] == '#' || name[0] == '.')
		return false;
	for (size_t i = 0; i < n - 5; i++) {
		unsigned v;
		if (o + 1 >= cap)
			return false;
		if (name[i] == '%') {
			if (i + 2 >= n - 5 || sscanf(name + i + 1, "%2x", &v) != 1)
				return false;
			out[o++] = (char)v;
			i += 2;
		} else {
			out[o++] = name[i];
		}
	}
	out[o] = 0;
	return o > 0;
}

static void registry_bump(struct flit_tp *tp)
{
	if (tp->reg)
		atomic_fetch_add(&tp->reg->gen, 1);
}

/* ---- transport instance ------------------------------------------------- */

static int shm_open_tp(struct flit_ctx *ctx, struct flit_tp **out)
{
	const struct flit_cfg_context *c = flit_ctx_cfg(ctx);
	struct flit_cfg_receiver rc;
	struct flit_tp *tp;
	char path[PATH_MAX + 16];
	int err;

	tp = calloc(1, sizeof(*tp));
	if (!tp)
		return flit_err(ENOMEM, "shm: out of memory");
	tp->ctx = ctx;
	tp->reg_fd = -1;
	flit_ctx_rcv_cfg(ctx, "", &rc);
	tp->discovery_ms = rc.discovery_ms;
	if ((err = mkdir_shared(c->shm_dir))) {
		free(tp);
		return flit_err(-err, "shm: cannot create directory %s", c->shm_dir);
	}
	if ((size_t)snprintf(tp->dir, sizeof(tp->dir), "%s/%s", c->shm_dir, c->domain) >= sizeof(tp->dir)) {
		free(tp);
		return flit_err(ENAMETOOLONG, "shm: directory name too long");
	}
	if ((err = mkdir_shared(tp->dir))) {
		free(tp);
		return flit_err(-err, "shm: cannot create directory %s", tp->dir);
	}

	/* The registry only speeds up discovery: without it (no permission),
	 * the periodic rescan still finds every source. */
	snprintf(path, sizeof(path), "%s/" REGISTRY_NAME, tp->dir);
	tp->reg_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (tp->reg_fd >= 0) {
		struct stat st;
		if (fstat(tp->reg_fd, &st) == 0 && st.st_size < 4096 &&
		    ftruncate(tp->reg_fd, 4096) < 0)
			flit_warn("shm: %s: cannot size registry", path);
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, tp->reg_fd, 0);
		if (m != MAP_FAILED) {
			tp->reg = m;
			if (tp->reg->magic != REGISTRY_MAGIC)
				tp->reg->magic = REGISTRY_MAGIC;
			tp->seen_gen = atomic_load(&tp->reg->gen) - 1; /* scan once */
		}
	}
	if (!tp->reg)
		flit_warn("shm: registry %s unavailable; discovery falls back to rescans every %u ms",
			  path, tp->discovery_ms);
	*out = tp;
	return 0;
}

static int att_detach(struct flit_tp *tp, struct shm_att *a, uint32_t eos_flags);

static void shm_close_tp(struct flit_tp *tp)
{
	while (tp->atts)
		att_detach(tp, tp->atts, 0);
	if (tp->reg)
		munmap(tp->reg, 4096);
	if (tp->reg_fd >= 0)
		close(tp->reg_fd);
	free(tp->stale);
	free(tp);
}

/* ---- source (writer) ---------------------------------------------------- */

static uint32_t new_session_id(void)
{
	uint32_t id = 0;
	while (!id)
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = (uint32_t)getpid() ^ (uint32_t)flit_monotonic_now();
	return id;
}

/* Undo create_ring()'s mapping and descriptor (the name is the caller's). */
static void ring_unmap(struct flit_tsrc *s)
{
	if (s->map)
		munmap(s->map, s->map_len);
	s->map = NULL;
	close(s->fd);
	s->fd = -1;
}

/* Create, initialise and lock a fresh ring file at tmp. */
static int create_ring(struct flit_tsrc *s, const char *tmp, const char *topic,
		       const struct flit_cfg_source *cfg)
{
	uint32_t hsz = shm_hdr_size(cfg->shm_max_readers);
	int err;

	s->map_len = (size_t)hsz + cfg->shm_capacity;
	s->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, cfg->shm_file_mode);
	if (s->fd < 0)
		return flit_err(errno, "shm: cannot create %s", tmp);
	if (fchmod(s->fd, cfg->shm_file_mode) < 0 ||
	    ftruncate(s->fd, (off_t)s->map_len) < 0) {
		err = flit_err(errno, "shm: cannot size %s to %zu bytes", tmp, s->map_len);
		goto fail;
	}
	if ((err = ofd_lock(s->fd, 0, F_WRLCK))) {
		err = flit_err(-err, "shm: cannot lock %s", tmp);
		goto fail;
	}
	s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_POPULATE, s->fd, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		err = flit_err(errno, "shm: cannot map %s (%zu bytes)", tmp, s->map_len);
		goto fail;
	}
	if ((err = shm_ring_init(s->map, cfg->shm_capacity, cfg->shm_max_readers,
				 cfg->shm_mode, s->session_id, topic, 0)))
		goto fail;
	((struct shm_hdr *)s->map)->st.writer_pid = (uint32_t)getpid();
	atomic_store(&((struct shm_hdr *)s->map)->w.late_join, cfg->late_join);
	return 0;
fail:
	ring_unmap(s);
	unlink(tmp);
	return err;
}

static int shm_src_open(struct flit_tp *tp, const char *topic,
			const struct flit_cfg_source *cfg, struct flit_tsrc **out)
{
	char name[ENC_NAME_MAX + 32], tmp[PATH_MAX + ENC_NAME_MAX + 64];
	struct flit_tsrc *s;
	int err = 0;

	s = calloc(1, sizeof(*s));
	if (!s)
		return flit_err(ENOMEM, "shm: out of memory");
	s->tp = tp;
	s->fd = -1;
	s->session_id = new_session_id();
	s->batch = cfg->batch;
	s->ts = cfg->timestamps;
	s->batch_max = cfg->batch_max;
	s->liveness_ms = cfg->shm_liveness_ms;
	topic_to_name(topic, name, sizeof(name));
	if ((size_t)snprintf(s->path, sizeof(s->path), "%s/%s", tp->dir, name) >= sizeof(s->path)) {
		free(s);
		return flit_err(ENAMETOOLONG, "shm: path too long");
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.new-%08x-%s", tp->dir, s->session_id, name) >= sizeof(tmp)) {
		free(s);
		return flit_err(ENAMETOOLONG, "shm: path too long");
	}

	for (int attempt = 0; attempt < 16; attempt++) {
		struct stat st_old, st_path;
		int old = open(s->path, O_RDWR | O_CLOEXEC);

		if (old < 0 && errno != ENOENT) {
			err = flit_err(errno, "shm: cannot open %s", s->path);
			break;
		}
		if (old >= 0) {
			/* An existing ring: its writer is alive iff it holds byte 0. */
			if (ofd_lock(old, 0, F_WRLCK)) {
				struct shm_hdr h;
				ssize_t n = pread(old, &h, sizeof(h), 0);
				close(old);
				err = flit_err(EADDRINUSE, "shm: topic '%s' already has a live writer (pid %u, %s)",
					       topic, n == (ssize_t)sizeof(h) ? h.st.writer_pid : 0, s->path);
				break;
			}
			/* We hold the dead writer's lock; make sure the name still
			 * points at that file, or another writer got there first. */
			if (fstat(old, &st_old) || stat(s->path, &st_path) ||
			    st_old.st_ino != st_path.st_ino || st_old.st_dev != st_path.st_dev) {
				close(old);
				continue;
			}
		}
		if ((err = create_ring(s, tmp, topic, cfg))) {
			if (old >= 0)
				close(old);
			break;
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
			break;
		}
		struct stat st;
		fstat(s->fd, &st);
		s->dev = st.st_dev;
		s->ino = st.st_ino;
		shm_wr_init(&s->w, s->map);
		s->max_msg = s->w.max_frame - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN - FLIT_MSG_TS_LEN;
		/* a batch frame can be no larger than the ring's largest record */
		if (s->batch_max > s->w.max_frame)
			s->batch_max = (uint32_t)s->w.max_frame;
		if (s->max_msg > FLIT_MSG_LEN_MAX)
			s->max_msg = FLIT_MSG_LEN_MAX;
		registry_bump(tp);
		*out = s;
		return 0;
	}
	if (!err)
		err = flit_err(EAGAIN, "shm: topic '%s': lost the race to create %s too often", topic, s->path);
	free(s);
	return err;
}

/* Account one message taken by the source. */
static inline void count_msg(struct shm_wr *w, size_t len)
{
	w->seq++;
	w->msgs++;
	w->bytes += len;
}

/* No further message (even an empty one) fits in the open batch frame. */
static inline bool batch_full(const struct flit_tsrc *s)
{
	return s->w.flen + FLIT_MSG_HDR_LEN + FLIT_MSG_TS_LEN + 8 > s->batch_max;
}

static void src_publish_open(struct flit_tsrc *s)
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

static void shm_src_close(struct flit_tsrc *s)
{
	struct stat st;

	if (!s)
		return;
	s->w.claim = NULL;
	if (s->w.frame && s->w.fcount)
		src_publish_open(s);
	atomic_store_explicit(&s->w.hdr->st.closed, 1, memory_order_release);
	/* remove the name only if it is still ours (not a successor's) */
	if (stat(s->path, &st) == 0 && st.st_ino == s->ino && st.st_dev == s->dev)
		unlink(s->path);
	registry_bump(s->tp);
	munmap(s->map, s->map_len);
	close(s->fd);
	free(s);
}

/* Evict readers that died (their slot lock is free).  Slow path: runs when
 * the writer is blocked, at most every liveness_ms. */
static unsigned evict_dead(struct flit_tsrc *s, bool force)
{
	uint64_t now = flit_monotonic_now();
	unsigned n = 0;

	if (!force && now < s->next_liveness_ns)
		return 0;
	s->next_liveness_ns = now + (uint64_t)s->liveness_ms * 1000000u;
	for (uint32_t i = 0; i < s->w.max_readers; i++) {
		struct shm_slot *sl = shm_slot(s->w.hdr, i);
		uint32_t st = atomic_load(&sl->state);
		if ((st & 0xff) != SHM_SLOT_ACTIVE || ofd_held(s->fd, 1 + i) != 0)
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

static int shm_claim(struct flit_tsrc *s, size_t len, void **buf)
{
	struct shm_wr *w = &s->w;
	uint64_t mlen;
	uint8_t *m;

	if (FLIT_UNLIKELY(w->claim))
		return flit_err(EBUSY, "shm: a claim is already open on this source");
	if (FLIT_UNLIKELY(len > s->max_msg))
		return flit_err(EMSGSIZE, "shm: message of %zu bytes exceeds the maximum %zu",
				len, s->max_msg);
	mlen = flit_msg_wire_len(len, s->ts);
	if (w->frame) {
		/* batching: append to the open frame if it still fits */
		if (w->flen + mlen <= s->batch_max && w->fcount < UINT16_MAX &&
		    shm_wr_extend(w, w->flen + mlen)) {
			m = w->frame + w->flen;
			goto put;
		}
		src_publish_open(s);
	}
	w->frame = shm_wr_reserve(w, FLIT_FRAME_HDR_LEN + mlen);
	if (FLIT_UNLIKELY(!w->frame)) {
		w->back_pressured++;
		if (evict_dead(s, false))
			w->frame = shm_wr_reserve(w, FLIT_FRAME_HDR_LEN + mlen);
		if (!w->frame)
			return FLIT_BACK_PRESSURED;
	}
	flit_frame_begin(w->frame, FLIT_FT_DATA, s->ts ? FLIT_FF_TS : 0,
			 s->session_id, w->seq);
	w->flen = FLIT_FRAME_HDR_LEN;
	w->fcount = 0;
	m = w->frame + FLIT_FRAME_HDR_LEN;
put:
	w->claim = flit_frame_put_hdr(m, 0, (uint32_t)len, s->ts,
				      s->ts ? flit_realtime_now() : 0);
	w->claim_max = (uint32_t)len;
	*buf = w->claim;
	return 0;
}

static int shm_commit(struct flit_tsrc *s, size_t len)
{
	struct shm_wr *w = &s->w;
	uint8_t *payload = w->claim;

	if (FLIT_UNLIKELY(!payload || len > w->claim_max))
		return flit_err(EINVAL, payload ? "shm: commit of %zu bytes exceeds the claim"
					       : "shm: commit without a claim (%zu bytes)", len);
	if (len != w->claim_max) {
		flit_st32(payload - (s->ts ? 12 : 4), (uint32_t)len);
		/* keep the writer's zeroed window zero past the shorter message */
		memset(payload + flit_align8(len), 0,
		       flit_align8(w->claim_max) - flit_align8(len));
	}
	if (len & 7)
		memset(payload + len, 0, flit_align8(len) - len);
	w->flen = (uint32_t)(payload + flit_align8(len) - w->frame);
	w->fcount++;
	w->claim = NULL;
	count_msg(w, len);
	/* unbatched: every message is its own frame; batched: publish when no
	 * further message could fit */
	if (!s->batch || batch_full(s))
		src_publish_open(s);
	return 0;
}

static int shm_abort(struct flit_tsrc *s)
{
	struct shm_wr *w = &s->w;

	if (!w->claim)
		return flit_err(EINVAL, "shm: abort without a claim");
	/* undo every byte the claim wrote: the ring ahead of the writer must
	 * stay zero (stale bytes could otherwise pass for a record tag) */
	uint8_t *msg = w->frame + w->flen;
	memset(msg, 0, (size_t)(w->claim + flit_align8(w->claim_max) - msg));
	w->claim = NULL;
	if (w->fcount == 0) {
		memset(w->frame, 0, FLIT_FRAME_HDR_LEN);
		w->frame = NULL; /* nothing else in the frame: forget it */
	}
	return 0;
}

static int shm_send(struct flit_tsrc *s, const void *data, size_t len)
{
	struct shm_wr *w = &s->w;
	void *buf;

	/* fast path: unbatched, nothing open, fits before the ring's end and
	 * within the readers' limit: write the whole frame and publish */
	if (FLIT_LIKELY(!s->batch && !w->frame && !w->claim && len <= s->max_msg)) {
		uint32_t flen = (uint32_t)(FLIT_FRAME_HDR_LEN + flit_msg_wire_len(len, s->ts));
		uint64_t rec = shm_rec_len(flen), off = w->pos & w->mask;
		if (FLIT_LIKELY(off + rec <= w->cap && shm_wr_room(w, w->pos + rec + 8))) {
			shm_wr_intent(w, w->pos + rec + 8);
			uint8_t *pl = flit_frame_put_single(w->data + off + 8, s->session_id,
							    w->seq, 0, (uint32_t)len, s->ts,
							    s->ts ? flit_realtime_now() : 0);
			if (len)
				memcpy(pl, data, len);
			count_msg(w, len);
			shm_wr_publish(w, flen);
			return 0;
		}
	}
	/* fast path: append to the open batch frame in place */
	if (FLIT_LIKELY(s->batch && w->frame && !w->claim && len <= s->max_msg)) {
		uint32_t mlen = (uint32_t)flit_msg_wire_len(len, s->ts);
		uint32_t nflen = w->flen + mlen;
		if (FLIT_LIKELY(nflen <= s->batch_max && w->fcount < UINT16_MAX &&
				shm_wr_extend(w, nflen))) {
			uint8_t *pl = flit_frame_put_hdr(w->frame + w->flen, 0, (uint32_t)len,
							 s->ts, s->ts ? flit_realtime_now() : 0);
			flit_zero_pad(pl, (uint32_t)len);
			if (len)
				memcpy(pl, data, len);
			w->flen = nflen;
			w->fcount++;
			count_msg(w, len);
			if (batch_full(s))
				src_publish_open(s);
			return 0;
		}
	}
	int rc = shm_claim(s, len, &buf);

	if (FLIT_UNLIKELY(rc))
		return rc;
	if (len)
		memcpy(buf, data, len);
	return shm_commit(s, len);
}

static int shm_flush(struct flit_tsrc *s)
{
	if (s->w.claim)
		return flit_err(EBUSY, "shm: flush with a claim open (commit or abort it first)");
	src_publish_open(s);
	return 0;
}

static int shm_receivers(struct flit_tsrc *s)
{
	int n = 0;

	evict_dead(s, true);
	for (uint32_t i = 0; i < s->w.max_readers; i++)
		if ((atomic_load(&shm_slot(s->w.hdr, i)->state) & 0xff) == SHM_SLOT_ACTIVE)
			n++;
	return n;
}

static size_t shm_max_msg(const struct flit_tsrc *s)
{
	return s->max_msg;
}

static uint64_t shm_next_seq(const struct flit_tsrc *s)
{
	return s->w.seq;
}

static void shm_src_counters(const struct flit_tsrc *s, struct flit_counters *c)
{
	c->msgs_sent += s->w.msgs;
	c->bytes_sent += s->w.bytes;
	c->frames_sent += s->w.frames;
	c->back_pressured += s->w.back_pressured;
	c->readers_evicted += s->evicted;
}

/* ---- receive side ------------------------------------------------------- */

static bool is_stale(const struct flit_tp *tp, dev_t dev, ino_t ino)
{
	for (unsigned i = 0; i < tp->nstale; i++)
		if (tp->stale[i].dev == dev && tp->stale[i].ino == ino)
			return true;
	return false;
}

static void mark_stale(struct flit_tp *tp, dev_t dev, ino_t ino)
{
	if (tp->nstale == tp->capstale) {
		unsigned cap = tp->capstale ? tp->capstale * 2 : 8;
		void *p = realloc(tp->stale, cap * sizeof(*tp->stale));
		if (!p)
			return;
		tp->stale = p;
		tp->capstale = cap;
	}
	tp->stale[tp->nstale].dev = dev;
	tp->stale[tp->nstale].ino = ino;
	tp->nstale++;
}

/* Returns the number of EOS events delivered. */
static int att_detach(struct flit_tp *tp, struct shm_att *a, uint32_t eos_flags)
{
	int events = 0;

	for (struct shm_att **pp = &tp->atts; *pp; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	if (a->rd.slot) {
		uint32_t st = atomic_load(&a->rd.slot->state);
		atomic_store_explicit(&a->rd.slot->state, (st & ~0xffu) | SHM_SLOT_FREE,
				      memory_order_release);
	}
	if (a->rs)
		events = flit_rx_session_end(a->rs, eos_flags);
	munmap(a->map, a->map_len);
	close(a->fd); /* drops our slot lock */
	free(a->rd.scratch);
	free(a->cu.scratch);
	free(a);
	return events;
}

/* Attach to a ring file (fd open, read-write if `writable`).  Returns the
 * number of BOS events delivered (0 when skipped because its writer is gone)
 * or -errno with a trail
 * naming the file (corrupted, foreign, truncated); such files are remembered
 * and not tried again. */
static int att_open(struct flit_tp *tp, int fd, bool writable, const char *path,
		    const struct stat *st)
{
	const struct shm_hdr *h;
	struct shm_att *a;
	struct flit_cfg_receiver rc;
	char source[96];
	uint32_t gen_state = 0;
	int err, held;

	if ((uint64_t)st->st_size < SHM_SLOTS_OFF) {
		err = flit_err(EBADMSG, "shm: %s: file too short for a flit shm header (%lld bytes)",
			       path, (long long)st->st_size);
		goto bad_fd;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		close(fd);
		return flit_err(ENOMEM, "shm: out of memory");
	}
	a->fd = fd;
	a->dev = st->st_dev;
	a->ino = st->st_ino;
	a->map_len = (size_t)st->st_size;
	a->map = mmap(NULL, a->map_len, PROT_READ | (writable ? PROT_WRITE : 0),
		      MAP_SHARED, fd, 0);
	if (a->map == MAP_FAILED) {
		err = flit_err(errno, "shm: %s: cannot map", path);
		free(a);
		goto bad_fd;
	}
	if ((err = shm_ring_validate(a->map, (uint64_t)st->st_size))) {
		flit_err_wrap(-err, "shm: %s", path);
		goto bad;
	}
	h = a->map;
	held = ofd_held(fd, 0);
	if (held <= 0) { /* the writer is gone: nothing will ever arrive */
		err = 0;
		goto bad;
	}
	snprintf(a->topic, sizeof(a->topic), "%s", h->geom.topic);
	flit_ctx_rcv_cfg(tp->ctx, a->topic, &rc);
	a->liveness_ms = rc.shm_liveness_ms;

	/* claim a reader slot: the first whose lock we can take */
	a->slot_idx = UINT32_MAX;
	if (writable) {
		for (uint32_t i = 0; i < h->geom.max_readers; i++) {
			if (ofd_lock(fd, 1 + i, F_WRLCK))
				continue;
			struct shm_slot *sl = shm_slot(a->map, i);
			uint32_t st_old = atomic_load(&sl->state);
			gen_state = ((st_old + 0x100u) & ~0xffu) | SHM_SLOT_ACTIVE;
			sl->pid = (uint32_t)getpid();
			a->slot_idx = i;
			break;
		}
		if (a->slot_idx == UINT32_MAX) {
			err = flit_err(EUSERS, "shm: %s: all %u reader slots are taken (source.shm.max_readers)",
				       path, h->geom.max_readers);
			munmap(a->map, a->map_len);
			free(a);
			close(fd);
			return err; /* not stale: a slot may free up */
		}
	}
	bool copy = !writable || h->geom.mode == FLIT_SHM_OVERWRITE;
	if (copy && !(a->rd.scratch = malloc(h->geom.max_frame))) {
		err = flit_err(ENOMEM, "shm: out of memory");
		goto bad;
	}
	uint8_t *scratch = a->rd.scratch;
	struct shm_slot *sl = writable ? shm_slot(a->map, a->slot_idx) : NULL;
	uint64_t seq0;
	uint64_t pos = shm_rd_join((struct shm_hdr *)a->map, sl, gen_state, &seq0);
	shm_rd_init(&a->rd, a->map, sl, scratch, copy, pos);
	a->checked_pos = a->rd.pos;
	/* where this receiver starts: a subscriber older than the ring, from
	 * its first message; a late joiner, the last source.late_join ones */
	enum flit_join jm = flit_ctx_join_mode(tp->ctx, a->topic, h->geom.create_ns);
	uint64_t offered = atomic_load(&h->w.late_join);
	if (seq0 != SHM_SEQ_UNKNOWN &&
	    (jm == FLIT_JOIN_FIRST || (jm == FLIT_JOIN_LATE && offered))) {
		uint64_t from = atomic_load_explicit(&h->w.start, memory_order_acquire);
		if (from < pos && pos - from <= h->geom.capacity) {
			if (!(a->cu.scratch = malloc(h->geom.max_frame))) {
				err = flit_err(ENOMEM, "shm: out of memory");
				goto bad_slot;
			}
			shm_rd_init(&a->cu, a->map, NULL, a->cu.scratch, true, from);
			a->cu_end = pos;
			a->cu_on = true;
		}
	}
	a->next_check_ns = flit_monotonic_now() + (uint64_t)a->liveness_ms * 1000000u;

	snprintf(source, sizeof(source), "shm:pid=%u,session=%08x%s",
		 h->st.writer_pid, h->geom.session_id, writable ? "" : ",passive");
	a->rs = flit_rx_session_new(tp->ctx, h->geom.session_id, source);
	if (!a->rs) {
		err = -errno;
		goto bad_slot;
	}
	/* we join at seq0 (or before it, catching up): a lap before our first
	 * read is loss from there */
	if (jm == FLIT_JOIN_FIRST && seq0 != SHM_SEQ_UNKNOWN)
		flit_rx_session_start(a->rs, 0);
	else if (a->cu_on)
		flit_rx_session_late_join(a->rs, seq0 > offered ? seq0 - offered : 0, seq0);
	else if (seq0 != SHM_SEQ_UNKNOWN)
		flit_rx_session_start(a->rs, seq0);
	a->next = tp->atts;
	tp->atts = a;
	if ((err = flit_rx_session_topic(a->rs, 0, a->topic)) < 0)
		att_detach(tp, a, 0);
	return err;

bad_slot:
	if (a->rd.slot)
		atomic_store(&a->rd.slot->state, (gen_state & ~0xffu) | SHM_SLOT_FREE);
bad:
	munmap(a->map, a->map_len);
	free(a->rd.scratch);
	free(a->cu.scratch);
	free(a);
bad_fd:
	mark_stale(tp, st->st_dev, st->st_ino);
	close(fd);
	return err;
}

static bool attached(const struct flit_tp *tp, dev_t dev, ino_t ino)
{
	for (const struct shm_att *a = tp->atts; a; a = a->next)
		if (a->dev == dev && a->ino == ino)
			return true;
	return false;
}

/* Read a hashed-name ring's topic from its header (bounded, validated). */
static bool header_topic(int fd, char *out, size_t cap)
{
	struct shm_geom g;

	if (pread(fd, &g, sizeof(g), 0) != (ssize_t)sizeof(g) || g.magic != SHM_MAGIC ||
	    g.check != shm_geom_check(&g) || g.topic_len >= sizeof(g.topic) ||
	    g.topic[g.topic_len] != 0 || g.topic_len >= cap)
		return false;
	memcpy(out, g.topic, g.topic_len + 1);
	return true;
}

/* Scan the directory and attach to every ring a subscriber wants.  Returns
 * the number of BOS events delivered; problems with single files are logged
 * (and remembered, so they are reported once). */
static int rescan(struct flit_tp *tp)
{
	char topic[FLIT_TOPIC_MAX + 1], path[PATH_MAX + 256];
	struct dirent *de;
	int events = 0;
	DIR *d = opendir(tp->dir);

	if (!d) {
		flit_warn("shm: cannot read directory %s: %s", tp->dir, strerror(errno));
		return 0;
	}
	while ((de = readdir(d))) {
		struct stat st;
		bool hashed = de->d_name[0] == '#';
		bool writable = true;
		int fd, err;

		if (!hashed && !name_to_topic(de->d_name, topic, sizeof(topic)))
			continue;
		if (!hashed && !flit_ctx_wants(tp->ctx, topic))
			continue;
		snprintf(path, sizeof(path), "%s/%s", tp->dir, de->d_name);
		if (stat(path, &st) || !S_ISREG(st.st_mode) ||
		    attached(tp, st.st_dev, st.st_ino) || is_stale(tp, st.st_dev, st.st_ino))
			continue;
		fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno == EACCES) {
			writable = false; /* e.g. group-readable ring: passive reader */
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		}
		if (fd < 0)
			continue; /* removed meanwhile, or not ours to read */
		if (hashed && (!header_topic(fd, topic, sizeof(topic)) ||
			       !flit_ctx_wants(tp->ctx, topic))) {
			close(fd);
			continue;
		}
		if (fstat(fd, &st)) {
			close(fd);
			continue;
		}
		err = att_open(tp, fd, writable, path, &st);
		if (err < 0)
			flit_warn("%s", flit_errmsg());
		else
			events += err;
	}
	closedir(d);
	return events;
}

static int shm_subs_changed(struct flit_tp *tp)
{
	/* detach from rings nobody wants any more (frees their slots, so a
	 * paced writer stops waiting for us) */
	for (struct shm_att *a = tp->atts, *next; a; a = next) {
		next = a->next;
		if (!flit_ctx_wants(tp->ctx, a->topic))
			att_detach(tp, a, 0);
	}
	if (flit_ctx_wants_any(tp->ctx))
		rescan(tp);
	return 0;
}

/* Idle reader: is the writer still there?  Runs every liveness_ms at most,
 * only when nothing arrived since the previous check. */
static void att_check(struct flit_tp *tp, struct shm_att *a, uint64_t now)
{
	const struct shm_hdr *h = a->rd.hdr;

	if (now < a->next_check_ns)
		return;
	a->next_check_ns = now + (uint64_t)a->liveness_ms * 1000000u;
	if (a->rd.pos != a->checked_pos) {
		a->checked_pos = a->rd.pos;
		return;
	}
	if (atomic_load_explicit(&h->st.closed, memory_order_acquire))
		a->dead = true;
	else if (ofd_held(a->fd, 0) == 0)
		a->dead = true;
}

/* Deliver what the ring held before the reader joined, from the oldest
 * intact record to where it joined, copying each (the writer may overwrite
 * them meanwhile: then the rest is lost, and the core reports it when the
 * live stream starts). */
static int att_catch_up(struct shm_att *a, int limit, flit_frame_fn fn, void *arg)
{
	const void *frame;
	uint32_t len;
	int n = 0;

	while (a->cu.pos < a->cu_end && n < limit) {
		enum shm_rd_res r = shm_rd_next(&a->cu, &frame, &len);
		if (r != SHM_RD_FRAME) {
			a->cu.pos = a->cu_end; /* lapped (or nothing where a record was) */
			break;
		}
		int d = fn(arg, a->rs, frame, len);
		if (d > 0)
			n += d;
	}
	if (a->cu.pos >= a->cu_end) {
		a->cu_on = false;
		free(a->cu.scratch);
		a->cu.scratch = NULL;
	}
	return n;
}

static int shm_poll(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg)
{
	int n = 0;

	if (tp->reg && FLIT_UNLIKELY(atomic_load_explicit(&tp->reg->gen, memory_order_relaxed) != tp->seen_gen)) {
		tp->seen_gen = atomic_load(&tp->reg->gen);
		if (flit_ctx_wants_any(tp->ctx))
			n += rescan(tp);
	}
	for (struct shm_att *a = tp->atts, *next; a; a = next) {
		next = a->next;
		uint64_t start = a->rd.pos;
		const void *frame;
		uint32_t len;
		enum shm_rd_res r;
		if (FLIT_UNLIKELY(a->cu_on)) {
			n += att_catch_up(a, limit - n, fn, arg);
			if (a->cu_on || n >= limit)
				continue;
		}
		while ((r = shm_rd_next(&a->rd, &frame, &len)) == SHM_RD_FRAME) {
			int d = fn(arg, a->rs, frame, len);
			if (d > 0 && (n += d) >= limit)
				break;
		}
		if (FLIT_UNLIKELY(r == SHM_RD_CORRUPT)) {
			flit_warn("shm: ring of topic '%s' holds an impossible record at position %llu; detaching",
				  a->topic, (unsigned long long)a->rd.pos);
			flit_ctx_rx_counters(tp->ctx)->malformed++;
			a->corrupt = a->dead = true;
		}
		/* SHM_RD_LAPPED: the reader resumed at `latest`; the core reports
		 * the gap as loss when the next frame arrives */
		if (a->rd.pos != start)
			shm_rd_commit(&a->rd);
		/* a dead or closed source ends once everything it published
		 * has been delivered */
		if (FLIT_UNLIKELY(a->dead) && (r == SHM_RD_NONE || a->corrupt)) {
			bool died = a->corrupt || !atomic_load(&a->rd.hdr->st.closed);
			mark_stale(tp, a->dev, a->ino);
			n += att_detach(tp, a, died ? FLIT_MSGF_SOURCE_DIED : 0);
		}
	}
	if (FLIT_UNLIKELY(++tp->polls >= HOUSEKEEP_POLLS)) {
		tp->polls = 0;
		uint64_t now = flit_monotonic_now();
		for (struct shm_att *a = tp->atts; a; a = a->next)
			att_check(tp, a, now);
		if (now >= tp->next_scan_ns) {
			tp->next_scan_ns = now + (uint64_t)tp->discovery_ms * 1000000u;
			if (flit_ctx_wants_any(tp->ctx))
				n += rescan(tp);
		}
	}
	return n;
}

const struct flit_transport_ops flit_shm_ops = {
	.name = "shm",
	.caps = FLIT_CAP_ZERO_COPY | FLIT_CAP_RELIABLE | FLIT_CAP_LOCAL,
	.open = shm_open_tp,
	.close = shm_close_tp,
	.src_open = shm_src_open,
	.src_close = shm_src_close,
	.send = shm_send,
	.claim = shm_claim,
	.commit = shm_commit,
	.abort = shm_abort,
	.flush = shm_flush,
	.receivers = shm_receivers,
	.max_msg = shm_max_msg,
	.next_seq = shm_next_seq,
	.src_counters = shm_src_counters,
	.subs_changed = shm_subs_changed,
	.poll = shm_poll,
};
