// SPDX-License-Identifier: BSD-2-Clause
/*
 * shm transport, the reader side: attachments to rings, a session ring's
 * topic table, and the poll.  See shm.h.
 *
 * An attachment to a ring of one topic reads it from the start.  An
 * attachment to a session ring first watches: it maps the ring, holds no
 * reader slot, and looks at the table's count on every poll; once the
 * table names a topic a subscriber wants, it takes a slot, joins at the
 * live position (catching up from the first record of each wanted topic
 * created after its subscriber, if the ring still holds it), names every
 * topic of the table to the core (which drops the unwanted ones' messages
 * and counts them as filtered), and from then on names each topic the
 * table adds before delivering any frame after it, and ends each topic
 * the ended log lists once it has read up to where the topic ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm/shm.h"

bool shm_attached(const struct flit_tp *tp, dev_t dev, ino_t ino)
{
	for (const struct shm_att *a = tp->atts; a; a = a->next)
		if (a->dev == dev && a->ino == ino)
			return true;
	return false;
}

static void slot_release(struct shm_att *a)
{
	if (a->rd.slot) {
		uint32_t st = atomic_load(&a->rd.slot->state);
		atomic_store_explicit(&a->rd.slot->state, (st & ~0xffu) | SHM_SLOT_FREE,
				      memory_order_release);
		a->rd.slot = NULL;
	}
	if (a->slot_idx != UINT32_MAX) {
		struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET,
				    .l_start = 1 + a->slot_idx, .l_len = 1 };
		fcntl(a->fd, F_OFD_SETLK, &fl);
		a->slot_idx = UINT32_MAX;
	}
}

/* Stop reading a session ring (no topic of it is wanted any more): the
 * slot goes back, the core forgets the session; the ring stays watched. */
static void att_deactivate(struct shm_att *a)
{
	slot_release(a);
	if (a->rs)
		flit_rx_session_end(a->rs, 0);
	a->rs = NULL;
	a->cu_on = false;
	free(a->rd.scratch);
	free(a->cu.scratch);
	a->rd.scratch = a->cu.scratch = NULL;
	free(a->pend);
	a->pend = NULL;
	a->npend = a->cappend = 0;
	a->ntopics_seen = a->nended_seen = 0;
}

/* The topics the ended log lists, into a->ended_bm (a watcher's: an ended
 * topic is no reason to start reading). */
static uint32_t ended_count(const struct shm_att *a);

static void ended_sync(struct shm_att *a)
{
	uint32_t n = ended_count(a);
	struct shm_ended e;

	for (; a->nended_bm < n; a->nended_bm++)
		if (!shm_ring_ended_get(a->map, &a->g, a->nended_bm, &e))
			a->ended_bm[e.idx / 8] |= (uint8_t)(1u << (e.idx % 8));
}

/* Returns the number of EOS events delivered. */
int shm_att_detach(struct flit_tp *tp, struct shm_att *a, uint32_t eos_flags)
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
	free(a->pend);
	free(a->ended_bm);
	free(a);
	return events;
}

/* Take a reader slot: the first whose lock we can take.  0, or -EUSERS. */
static int slot_claim(struct shm_att *a)
{
	for (uint32_t i = 0; i < a->g.max_readers; i++) {
		if (shm_ofd_lock(a->fd, 1 + i, F_WRLCK))
			continue;
		struct shm_slot *sl = shm_slot(a->map, i);
		uint32_t st_old = atomic_load(&sl->state);
		a->gen_state = ((st_old + 0x100u) & ~0xffu) | SHM_SLOT_ACTIVE;
		sl->pid = (uint32_t)getpid();
		a->slot_idx = i;
		return 0;
	}
	return flit_err(EUSERS, "shm: %s: all %u reader slots are taken (source.shm.max_readers)",
			a->path, a->g.max_readers);
}

static const char *source_name(const struct shm_att *a, char *buf, size_t cap)
{
	const struct shm_hdr *h = a->map;

	snprintf(buf, cap, "shm:pid=%u,session=%08x%s", h->st.writer_pid, a->g.session_id,
		 a->writable ? "" : ",passive");
	return buf;
}

/* Join the ring: a slot (if writable), the live position, the reader.
 * *seq0: the sequence number there (SHM_SEQ_UNKNOWN: unknown). */
static int att_join(struct shm_att *a, uint64_t *pos, uint64_t *seq0)
{
	int err;

	a->slot_idx = UINT32_MAX;
	if (a->writable && (err = slot_claim(a)))
		return err;
	bool copy = !a->writable || a->g.mode == FLIT_SHM_OVERWRITE;
	if (copy && !(a->rd.scratch = malloc(a->g.max_frame))) {
		slot_release(a);
		return flit_err(ENOMEM, "shm: out of memory");
	}
	struct shm_slot *sl = a->writable ? shm_slot(a->map, a->slot_idx) : NULL;
	if (sl && a->table) {
		/* a slot's bitmap may hold a dead predecessor's bits */
		_Atomic uint64_t *w = shm_wants(a->map, &a->g, a->slot_idx);
		for (uint64_t i = 0; i < shm_wants_size(a->g.topics_max) / 8; i++)
			atomic_store_explicit(&w[i], 0, memory_order_relaxed);
	}
	*pos = shm_rd_join((struct shm_hdr *)a->map, sl, a->gen_state, seq0);
	shm_rd_init_g(&a->rd, a->map, &a->g, sl, a->rd.scratch, copy, *pos);
	a->checked_pos = a->rd.pos;
	return 0;
}

/* Catch up from `from` (a copying reader) to where rd joined, if the ring
 * still holds it. */
static int att_catch_up_from(struct shm_att *a, uint64_t from, uint64_t pos)
{
	if (from >= pos || pos - from > a->g.capacity || (from & (SHM_REC_ALIGN - 1)))
		return 0;
	if (!(a->cu.scratch = malloc(a->g.max_frame)))
		return flit_err(ENOMEM, "shm: out of memory");
	shm_rd_init_g(&a->cu, a->map, &a->g, NULL, a->cu.scratch, true, from);
	a->cu_end = pos;
	a->cu_on = true;
	return 1;
}

/* Tell the ring's writer whether this reader wants topic idx (a session
 * ring: flit_pub_receivers() counts the readers that want its topic). */
static void want_bit(struct shm_att *a, uint32_t idx, bool on)
{
	if (!a->rd.slot || idx >= a->g.topics_max)
		return;
	_Atomic uint64_t *w = &shm_wants(a->map, &a->g, a->slot_idx)[idx / 64];
	uint64_t bit = 1ull << (idx % 64);
	if (on)
		atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
	else
		atomic_fetch_and_explicit(w, ~bit, memory_order_relaxed);
}

/* ---- a ring of one topic ---------------------------------------------------- */

static int att_activate_own(struct flit_tp *tp, struct shm_att *a)
{
	const struct shm_hdr *h = a->map;
	char source[96];
	uint64_t seq0, pos;
	int err;

	if ((err = att_join(a, &pos, &seq0)))
		return err;
	/* where this receiver starts: a subscriber older than the ring, from
	 * its first message; a late joiner, the last source.late_join ones */
	enum flit_join jm = flit_ctx_join_mode(tp->ctx, a->topic, a->g.create_ns);
	uint64_t offered = atomic_load(&h->w.late_join);
	if (seq0 != SHM_SEQ_UNKNOWN &&
	    (jm == FLIT_JOIN_FIRST || (jm == FLIT_JOIN_LATE && offered))) {
		uint64_t from = atomic_load_explicit(&h->w.start, memory_order_acquire);
		if ((err = att_catch_up_from(a, from, pos)) < 0)
			goto fail;
	}
	a->rs = flit_rx_session_new(tp->ctx, a->g.session_id, source_name(a, source, sizeof(source)));
	if (!a->rs) {
		err = -errno;
		goto fail;
	}
	/* we join at seq0 (or before it, catching up): a lap before our first
	 * read is loss from there */
	if (jm == FLIT_JOIN_FIRST && seq0 != SHM_SEQ_UNKNOWN)
		flit_rx_session_start(a->rs, 0);
	else if (a->cu_on)
		flit_rx_session_late_join(a->rs, seq0 > offered ? seq0 - offered : 0, seq0);
	else if (seq0 != SHM_SEQ_UNKNOWN)
		flit_rx_session_start(a->rs, seq0);
	return flit_rx_session_topic(a->rs, 0, a->topic);
fail:
	slot_release(a);
	return err;
}

/* ---- a session ring's table --------------------------------------------------- */

static void table_bad(struct flit_tp *tp, struct shm_att *a)
{
	flit_ctx_rx_counters(tp->ctx)->malformed++;
	if (!a->table_bad)
		flit_warn("shm: %s: %s (the topic is ignored)", a->path, flit_errmsg());
	a->table_bad = true;
}

/* How many entries the table has published (bounded by its size). */
static uint32_t table_count(const struct shm_att *a)
{
	const struct shm_hdr *h = a->map;
	uint32_t n = atomic_load_explicit(&h->tl.ntopics, memory_order_acquire);
	return n < a->g.topics_max ? n : a->g.topics_max;
}

static uint32_t ended_count(const struct shm_att *a)
{
	const struct shm_hdr *h = a->map;
	uint32_t n = atomic_load_explicit(&h->tl.nended, memory_order_acquire);
	return n < a->g.topics_max ? n : a->g.topics_max;
}

/* Where the reader is: catching up, or live. */
static inline uint64_t att_pos(const struct shm_att *a)
{
	return a->cu_on ? a->cu.pos : a->rd.pos;
}

static int pend_add(struct shm_att *a, uint32_t idx, uint64_t end_pos, uint64_t final)
{
	if (a->npend == a->cappend) {
		unsigned cap = a->cappend ? a->cappend * 2 : 8;
		void *p = realloc(a->pend, cap * sizeof(*a->pend));
		if (!p)
			return flit_err(ENOMEM, "shm: out of memory");
		a->pend = p;
		a->cappend = cap;
	}
	a->pend[a->npend].idx = idx;
	a->pend[a->npend].end_pos = end_pos;
	a->pend[a->npend].final = final;
	a->npend++;
	return 0;
}

/* End the topics whose last record the reader has passed. */
static int run_ends(struct shm_att *a)
{
	uint64_t pos = att_pos(a);
	unsigned i = 0;
	int events = 0;

	while (i < a->npend && a->pend[i].end_pos <= pos) {
		events += flit_rx_session_topic_end(a->rs, a->pend[i].idx, 0, a->pend[i].final);
		want_bit(a, a->pend[i].idx, false);
		i++;
	}
	if (i) {
		memmove(a->pend, a->pend + i, (a->npend - i) * sizeof(*a->pend));
		a->npend -= i;
		a->ended_some = true;
	}
	return events;
}

static bool rs_wants_any(const struct flit_rx_session *rs);
static int att_name_topics(struct flit_tp *tp, struct shm_att *a, uint64_t from,
			   const uint8_t *skip);

/* New ended-log entries: each topic ends once the reader passes its end. */
static int att_ended(struct flit_tp *tp, struct shm_att *a)
{
	uint32_t n = ended_count(a);
	struct shm_ended e;
	int events = 0;

	/* a topic's entry is published before its end: name what came since
	 * we last looked, so that no end finds its topic unnamed */
	if (table_count(a) != a->ntopics_seen)
		events += att_name_topics(tp, a, att_pos(a), NULL);
	for (; a->nended_seen < n; a->nended_seen++) {
		if (shm_ring_ended_get(a->map, &a->g, a->nended_seen, &e)) {
			table_bad(tp, a);
			continue;
		}
		if (e.idx < a->ntopics_seen && pend_add(a, e.idx, e.end_pos, e.final))
			flit_warn("%s", flit_errmsg());
	}
	events += run_ends(a);
	/* topics ended and nothing of the ring is wanted any more: back to
	 * watching (the slot goes back: a paced writer no longer waits for
	 * us); looked at only after an end, not on every entry of the log */
	if (a->ended_some && !a->npend && !a->cu_on) {
		a->ended_some = false;
		if (rs_wants_any(a->rs))
			return events;
		att_deactivate(a);
		a->ntopics_seen = table_count(a);
	}
	return events;
}

/* Name entries [ntopics_seen, count) to the core.  from: where the reader
 * started (a topic added there or later is read from its first message:
 * its numbers are known from 0).  skip: topics to leave unnamed (ended
 * before the reader's start), or NULL. */
static int att_name_topics(struct flit_tp *tp, struct shm_att *a, uint64_t from,
			   const uint8_t *skip)
{
	uint32_t n = table_count(a);
	char name[FLIT_TOPIC_MAX + 1];
	uint64_t first, created;
	int events = 0;

	uint32_t deferred = UINT32_MAX;

	for (; a->ntopics_seen < n; a->ntopics_seen++) {
		uint32_t i = a->ntopics_seen;
		if (skip && (skip[i / 8] & (1u << (i % 8))))
			continue;
		if (shm_ring_topic_get(a->map, &a->g, i, name, sizeof(name), &first, &created)) {
			table_bad(tp, a);
			continue;
		}
		int r = flit_rx_session_topic(a->rs, i, name);
		if (r < 0) {
			flit_warn("%s", flit_errmsg());
			continue;
		}
		events += r;
		if (r)
			want_bit(a, i, true);
		/* a topic whose first record is still ahead of us, or whose
		 * subscriber is older than it (it wants the topic from its
		 * first message: what the ring no longer holds is its loss),
		 * is known from its number 0; the session numbers each topic
		 * once it has two, so the one named before that waits */
		if (first >= from || flit_ctx_join_mode(tp->ctx, name, created) == FLIT_JOIN_FIRST) {
			if (a->rs->tseq)
				flit_rx_session_topic_from(a->rs, i, 0);
			else
				deferred = i;
		}
	}
	if (deferred != UINT32_MAX && a->rs->tseq)
		flit_rx_session_topic_from(a->rs, deferred, 0);
	return events;
}

/* Does a subscriber want a topic of entries [from, count)? */
static bool table_wants(struct flit_tp *tp, struct shm_att *a, uint32_t from)
{
	uint32_t n = table_count(a);
	char name[FLIT_TOPIC_MAX + 1];
	uint64_t first, created;

	ended_sync(a);
	for (uint32_t i = from; i < n; i++) {
		if (a->ended_bm[i / 8] & (1u << (i % 8)))
			continue; /* over: no reason to read the ring */
		if (shm_ring_topic_get(a->map, &a->g, i, name, sizeof(name), &first, &created)) {
			table_bad(tp, a);
			continue;
		}
		if (flit_ctx_wants(tp->ctx, name))
			return true;
	}
	return false;
}

/* Start reading a session ring: a topic of it is wanted.  Returns the
 * events (BOS) or -errno. */
static int att_activate_session(struct flit_tp *tp, struct shm_att *a)
{
	const struct shm_hdr *h = a->map;
	char name[FLIT_TOPIC_MAX + 1], source[96];
	uint64_t seq0, pos, first, created;
	uint32_t n, ne;
	int err, events = 0;

	if ((err = att_join(a, &pos, &seq0)))
		return err;
	/* catch up from the first record of each wanted topic created after
	 * its subscriber, if the ring still holds it */
	uint64_t from = pos, start = atomic_load_explicit(&h->w.start, memory_order_acquire);
	n = table_count(a);
	for (uint32_t i = 0; i < n; i++) {
		if (shm_ring_topic_get(a->map, &a->g, i, name, sizeof(name), &first, &created))
			continue;
		if (first < from && first >= start &&
		    flit_ctx_join_mode(tp->ctx, name, created) ==
		    FLIT_JOIN_FIRST && flit_ctx_wants(tp->ctx, name))
			from = first;
	}
	if (seq0 != SHM_SEQ_UNKNOWN && from < pos && (err = att_catch_up_from(a, from, pos)) < 0)
		goto fail;
	err = 0;
	if (!a->cu_on)
		from = pos;
	a->rs = flit_rx_session_new(tp->ctx, a->g.session_id, source_name(a, source, sizeof(source)));
	if (!a->rs) {
		err = -errno;
		goto fail;
	}
	if (!a->cu_on && seq0 != SHM_SEQ_UNKNOWN) {
		/* one topic so far, whose subscriber is older than it: from its
		 * first message (the session's numbers are the topic's), what
		 * the ring no longer holds told lost, as a ring of its own does */
		bool first0 = n == 1 && !shm_ring_topic_get(a->map, &a->g, 0, name, sizeof(name),
							     &first, &created) &&
			flit_ctx_wants(tp->ctx, name) &&
			flit_ctx_join_mode(tp->ctx, name, created) == FLIT_JOIN_FIRST && first == 0;
		flit_rx_session_start(a->rs, first0 ? 0 : seq0);
	}
	/* topics that ended before where we start are not named; those that
	 * end after it end when the reader gets there */
	uint8_t *skip = calloc(a->g.topics_max / 8 + 1, 1);
	if (!skip) {
		err = flit_err(ENOMEM, "shm: out of memory");
		goto fail_rs;
	}
	struct shm_ended e;
	ne = ended_count(a);
	for (a->nended_seen = 0; a->nended_seen < ne; a->nended_seen++) {
		if (shm_ring_ended_get(a->map, &a->g, a->nended_seen, &e)) {
			table_bad(tp, a);
			continue;
		}
		if (e.end_pos <= from)
			skip[e.idx / 8] |= (uint8_t)(1u << (e.idx % 8));
		else if ((err = pend_add(a, e.idx, e.end_pos, e.final)))
			break;
	}
	a->ntopics_seen = 0;
	if (!err)
		events = att_name_topics(tp, a, from, skip);
	free(skip);
	if (err)
		goto fail_rs;
	return events;
fail_rs:
	flit_rx_session_end(a->rs, 0);
	a->rs = NULL;
fail:
	att_deactivate(a);
	return err;
}

/* Look at a session ring's table: new topics (named to the core, or for a
 * watcher, whether one is wanted) and ended ones.  all: a watcher looks at
 * every entry again (the subscriptions changed).  Returns events. */
static int att_table(struct flit_tp *tp, struct shm_att *a, bool all)
{
	if (!a->rs) {
		uint32_t from = all ? 0 : a->ntopics_seen;
		a->ntopics_seen = table_count(a);
		if (!table_wants(tp, a, from))
			return 0;
		int r = att_activate_session(tp, a);
		a->retry = r < 0;
		if (r < 0)
			flit_warn("%s", flit_errmsg());
		return r < 0 ? 0 : r;
	}
	return att_name_topics(tp, a, att_pos(a), NULL);
}

/* ---- attaching -------------------------------------------------------------- */

int shm_att_open(struct flit_tp *tp, int fd, bool writable, const char *path,
		 const struct stat *st)
{
	const struct shm_hdr *h;
	struct shm_att *a;
	struct flit_cfg_receiver rc;
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
	a->writable = writable;
	a->slot_idx = UINT32_MAX;
	snprintf(a->path, sizeof(a->path), "%s", path);
	a->map_len = (size_t)st->st_size;
	a->map = mmap(NULL, a->map_len, PROT_READ | (writable ? PROT_WRITE : 0),
		      MAP_SHARED, fd, 0);
	if (a->map == MAP_FAILED) {
		err = flit_err(errno, "shm: %s: cannot map", path);
		free(a);
		goto bad_fd;
	}
	memcpy(&a->g, &((const struct shm_hdr *)a->map)->geom, sizeof(a->g));
	if ((err = shm_geom_validate(&a->g, (uint64_t)st->st_size))) {
		flit_err_wrap(-err, "shm: %s", path);
		goto bad;
	}
	h = a->map;
	held = shm_ofd_held(fd, 0);
	if (held <= 0) { /* the writer is gone: nothing will ever arrive */
		bool dead = held == 0 && !atomic_load(&h->st.closed);
		munmap(a->map, a->map_len);
		free(a);
		shm_mark_stale(tp, st->st_dev, st->st_ino);
		if (dead)
			shm_remove_dead(tp, path, st->st_dev, st->st_ino);
		close(fd);
		return 0;
	}
	a->table = a->g.topics_max > 0;
	snprintf(a->topic, sizeof(a->topic), "%s", a->g.topic);
	if (a->table && !(a->ended_bm = calloc(a->g.topics_max / 8 + 1, 1))) {
		err = flit_err(ENOMEM, "shm: out of memory");
		munmap(a->map, a->map_len);
		free(a);
		close(fd);
		return err;
	}
	flit_ctx_rcv_cfg(tp->ctx, a->table ? "" : a->topic, &rc);
	a->liveness_ms = rc.shm_liveness_ms;
	a->next_check_ns = flit_monotonic_now() + (uint64_t)a->liveness_ms * 1000000u;
	a->next = tp->atts;
	tp->atts = a;
	if (a->table)
		return att_table(tp, a, true);
	err = att_activate_own(tp, a);
	if (err < 0) {
		/* all slots taken: not stale, a slot may free up */
		if (err != -EUSERS)
			shm_mark_stale(tp, st->st_dev, st->st_ino);
		shm_att_detach(tp, a, 0);
	}
	return err;
bad:
	munmap(a->map, a->map_len);
	free(a->rd.scratch);
	free(a->cu.scratch);
	free(a);
bad_fd:
	shm_mark_stale(tp, st->st_dev, st->st_ino);
	close(fd);
	return err;
}

/* Is a topic the core names for this session still wanted? */
static bool rs_wants_any(const struct flit_rx_session *rs)
{
	for (uint32_t i = 0; i < rs->ntopics; i++)
		if (rs->topics[i].nsubs)
			return true;
	return false;
}

int shm_rx_subs_changed(struct flit_tp *tp)
{
	bool any = flit_ctx_wants_any(tp->ctx);

	/* detach from rings nobody wants any more (frees their slots, so a
	 * paced writer stops waiting for us); a session ring is watched
	 * while the context has subscribers */
	for (struct shm_att *a = tp->atts, *next; a; a = next) {
		next = a->next;
		if (!a->table) {
			if (!flit_ctx_wants(tp->ctx, a->topic))
				shm_att_detach(tp, a, 0);
		} else if (!any) {
			shm_att_detach(tp, a, 0);
		} else if (a->rs && !rs_wants_any(a->rs)) {
			att_deactivate(a);
		} else if (a->rs) {
			for (uint32_t i = 0; i < a->rs->ntopics; i++)
				want_bit(a, i, a->rs->topics[i].nsubs > 0);
		} else {
			att_table(tp, a, true);
		}
	}
	if (any)
		shm_rescan(tp);
	return 0;
}

/* Idle reader: is the writer still there?  Runs every liveness_ms at most,
 * only when nothing arrived since the previous check. */
static void att_check(struct shm_att *a, uint64_t now)
{
	const struct shm_hdr *h = a->map;

	if (now < a->next_check_ns)
		return;
	a->next_check_ns = now + (uint64_t)a->liveness_ms * 1000000u;
	if (a->rs && a->rd.pos != a->checked_pos) {
		a->checked_pos = a->rd.pos;
		return;
	}
	if (atomic_load_explicit(&h->st.closed, memory_order_acquire))
		a->dead = true;
	else if (shm_ofd_held(a->fd, 0) == 0)
		a->dead = true;
}

/* Deliver what the ring held before the reader joined, from the oldest
 * intact record to where it joined, copying each (the writer may overwrite
 * them meanwhile: then the rest is lost, and the core reports it when the
 * live stream starts). */
static int att_catch_up(struct flit_tp *tp, struct shm_att *a, int limit, flit_frame_fn fn, void *arg)
{
	const struct shm_hdr *h = a->map;
	const void *frame;
	uint32_t len;
	int n = 0;

	while (a->cu.pos < a->cu_end && n < limit) {
		enum shm_rd_res r = shm_rd_next(&a->cu, &frame, &len);
		if (r != SHM_RD_FRAME) {
			a->cu.pos = a->cu_end; /* lapped (or nothing where a record was) */
			break;
		}
		if (a->table && atomic_load_explicit(&h->tl.ntopics, memory_order_relaxed) != a->ntopics_seen)
			n += att_table(tp, a, false);
		int d = fn(arg, a->rs, frame, len);
		if (d > 0)
			n += d;
		if (a->npend)
			n += run_ends(a);
	}
	if (a->cu.pos >= a->cu_end) {
		a->cu_on = false;
		free(a->cu.scratch);
		a->cu.scratch = NULL;
	}
	return n;
}

/* A dead (or closed) ring: its session ends; a dead session ring goes. */
static int att_gone(struct flit_tp *tp, struct shm_att *a)
{
	bool died = a->corrupt || !atomic_load(&((struct shm_hdr *)a->map)->st.closed);
	char path[PATH_MAX];
	dev_t dev = a->dev;
	ino_t ino = a->ino;

	snprintf(path, sizeof(path), "%s", a->path);
	shm_mark_stale(tp, dev, ino);
	int n = shm_att_detach(tp, a, died ? FLIT_MSGF_SOURCE_DIED : 0);
	if (died)
		shm_remove_dead(tp, path, dev, ino);
	return n;
}

int shm_rx_poll(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg)
{
	int n = 0;

	if (tp->reg && FLIT_UNLIKELY(atomic_load_explicit(&tp->reg->gen, memory_order_relaxed) != tp->seen_gen)) {
		tp->seen_gen = atomic_load(&tp->reg->gen);
		if (flit_ctx_wants_any(tp->ctx))
			n += shm_rescan(tp);
	}
	for (struct shm_att *a = tp->atts, *next; a; a = next) {
		next = a->next;
		const struct shm_hdr *h = a->map;
		if (FLIT_UNLIKELY(a->table)) {
			if (atomic_load_explicit(&h->tl.ntopics, memory_order_relaxed) != a->ntopics_seen)
				n += att_table(tp, a, false);
			if (!a->rs) {
				if (FLIT_UNLIKELY(a->dead))
					n += att_gone(tp, a);
				continue;
			}
		}
		uint64_t start = a->rd.pos;
		const void *frame;
		uint32_t len;
		enum shm_rd_res r = SHM_RD_NONE;
		if (FLIT_UNLIKELY(a->cu_on)) {
			n += att_catch_up(tp, a, limit - n, fn, arg);
			if (a->cu_on || n >= limit)
				continue;
		}
		while ((r = shm_rd_next(&a->rd, &frame, &len)) == SHM_RD_FRAME) {
			/* a frame may carry a topic the table named after we
			 * last looked (named before its first record) */
			if (FLIT_UNLIKELY(a->table) &&
			    atomic_load_explicit(&h->tl.ntopics, memory_order_relaxed) != a->ntopics_seen)
				n += att_table(tp, a, false);
			int d = fn(arg, a->rs, frame, len);
			if (d > 0 && (n += d) >= limit)
				break;
		}
		if (FLIT_UNLIKELY(r == SHM_RD_CORRUPT)) {
			flit_warn("shm: ring %s holds an impossible record at position %llu; detaching",
				  a->path, (unsigned long long)a->rd.pos);
			flit_ctx_rx_counters(tp->ctx)->malformed++;
			a->corrupt = a->dead = true;
		}
		/* SHM_RD_LAPPED: the reader resumed at `latest`; the core reports
		 * the gap as loss when the next frame arrives */
		if (a->rd.pos != start)
			shm_rd_commit(&a->rd);
		if (FLIT_UNLIKELY(a->table) &&
		    (a->npend || atomic_load_explicit(&h->tl.nended, memory_order_relaxed) != a->nended_seen))
			n += att_ended(tp, a);
		/* a dead or closed source ends once everything it published
		 * has been delivered */
		if (FLIT_UNLIKELY(a->dead) && (r == SHM_RD_NONE || a->corrupt))
			n += att_gone(tp, a);
	}
	if (FLIT_UNLIKELY(++tp->polls >= HOUSEKEEP_POLLS)) {
		tp->polls = 0;
		uint64_t now = flit_monotonic_now();
		for (struct shm_att *a = tp->atts; a; a = a->next)
			att_check(a, now);
		if (now >= tp->next_scan_ns) {
			tp->next_scan_ns = now + (uint64_t)tp->discovery_ms * 1000000u;
			/* a session ring whose slots were all taken: try again */
			for (struct shm_att *a = tp->atts; a; a = a->next)
				if (a->retry && !a->rs)
					n += att_table(tp, a, true);
			if (flit_ctx_wants_any(tp->ctx))
				n += shm_rescan(tp);
		}
	}
	return n;
}
