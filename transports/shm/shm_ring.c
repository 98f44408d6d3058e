// SPDX-License-Identifier: BSD-2-Clause
/* Ring set-up, validation and the writer's slow paths (see shm_ring.h). */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "shm/shm_ring.h"
#include "config.h"
#include "core.h"

uint64_t shm_geom_check(const struct shm_geom *g)
{
	const unsigned char *p = (const unsigned char *)g;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < offsetof(struct shm_geom, check); i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int shm_ring_init(void *mem, uint64_t capacity, uint32_t max_readers,
		  uint32_t mode, uint32_t session_id, const char *topic,
		  uint64_t start)
{
	struct shm_hdr *h = mem;
	size_t tlen = strlen(topic);

	if (capacity < SHM_CAP_MIN || capacity > SHM_CAP_MAX ||
	    (capacity & (capacity - 1)) || !max_readers ||
	    max_readers > SHM_READERS_MAX || tlen >= sizeof(h->geom.topic) ||
	    (start & (SHM_REC_ALIGN - 1)))
		return flit_err(EINVAL, "shm ring: bad geometry (capacity %llu, readers %u)",
				(unsigned long long)capacity, max_readers);
	memset(&h->geom, 0, sizeof(h->geom));
	h->geom.magic = SHM_MAGIC;
	h->geom.version = SHM_VERSION;
	h->geom.hdr_size = shm_hdr_size(max_readers);
	h->geom.capacity = capacity;
	h->geom.max_frame = capacity / 4;
	h->geom.max_readers = max_readers;
	h->geom.mode = mode;
	h->geom.session_id = session_id;
	h->geom.topic_len = (uint32_t)tlen;
	memcpy(h->geom.topic, topic, tlen);
	h->geom.create_ns = flit_realtime_now();
	h->geom.check = shm_geom_check(&h->geom);
	atomic_store(&h->w.tail, start);
	atomic_store(&h->w.latest, start);
	atomic_store(&h->w.intent, start);
	atomic_store(&h->w.start, start);
	return 0;
}

int shm_ring_init_session(void *mem, uint64_t capacity, uint32_t max_readers,
			  uint32_t mode, uint32_t session_id, const char *topic,
			  uint32_t topics_max, uint32_t names_size)
{
	struct shm_hdr *h = mem;
	int err;

	if (!topics_max || topics_max > SHM_TOPICS_MAX || names_size < 4096 ||
	    (names_size & 7) || names_size > (1u << 30))
		return flit_err(EINVAL, "shm ring: bad topic table (%u topics, %u bytes of names)",
				topics_max, names_size);
	if ((err = shm_ring_init(mem, capacity, max_readers, mode, session_id, topic, 0)))
		return err;
	h->geom.topics_max = topics_max;
	h->geom.names_size = names_size;
	h->geom.table_off = (uint64_t)h->geom.hdr_size + capacity;
	h->geom.check = shm_geom_check(&h->geom);
	return 0;
}

int shm_ring_topic_add(void *mem, const char *name, uint64_t pos, uint64_t create_ns)
{
	struct shm_hdr *h = mem;
	uint32_t idx = atomic_load_explicit(&h->tl.ntopics, memory_order_relaxed);
	size_t len = strlen(name);
	uint64_t need = (len + 1 + 7) & ~7ull;

	if (idx >= h->geom.topics_max || h->tl.names_used + need > h->geom.names_size)
		return -ENOSPC;
	struct shm_topic_ent *e = &shm_topic_ents(mem)[idx];
	memcpy(shm_names(mem) + h->tl.names_used, name, len + 1);
	e->name_off = (uint32_t)h->tl.names_used;
	e->name_len = (uint16_t)len;
	e->first_pos = pos;
	e->create_ns = create_ns;
	h->tl.names_used += need;
	atomic_store_explicit(&h->tl.ntopics, idx + 1, memory_order_release);
	return (int)idx;
}

void shm_ring_topic_end(void *mem, uint32_t idx, uint64_t end_pos, uint64_t final)
{
	struct shm_hdr *h = mem;
	uint32_t i = atomic_load_explicit(&h->tl.nended, memory_order_relaxed);
	struct shm_ended *e = &shm_ended_log(mem)[i];

	if (i >= h->geom.topics_max)
		return; /* cannot happen: each index ends once */
	e->idx = idx;
	e->flags = 0;
	e->end_pos = end_pos;
	e->final = final;
	atomic_store_explicit(&h->tl.nended, i + 1, memory_order_release);
}

int shm_ring_topic_get(const void *mem, const struct shm_geom *g, uint32_t idx, char *out,
		       size_t cap, uint64_t *first_pos, uint64_t *create_ns)
{
	if (idx >= g->topics_max)
		return flit_err(EBADMSG, "topic index %u beyond the table's %u", idx, g->topics_max);
	const struct shm_topic_ent *e =
		(const struct shm_topic_ent *)((const char *)mem + g->table_off) + idx;
	const char *names = (const char *)mem + g->table_off + (uint64_t)g->topics_max * 64;
	uint32_t off = e->name_off, len = e->name_len;
	uint64_t first = e->first_pos, created = e->create_ns;

	if (len == 0 || (uint64_t)off + len >= g->names_size || len >= cap)
		return flit_err(EBADMSG, "topic %u: bad name (offset %u, %u bytes)", idx, off, len);
	/* copied, then checked: the writer's process may change it meanwhile */
	memcpy(out, names + off, len);
	out[len] = 0;
	if (strlen(out) != len || names[off + len] != 0)
		return flit_err(EBADMSG, "topic %u: bad name (offset %u, %u bytes)", idx, off, len);
	if (!flit_topic_valid(out))
		return flit_err(EBADMSG, "topic %u: '%s' is not a valid topic name", idx, out);
	if (first & (SHM_REC_ALIGN - 1))
		return flit_err(EBADMSG, "topic %u: first position %llu is not a record's", idx,
				(unsigned long long)first);
	*first_pos = first;
	*create_ns = created;
	return 0;
}

int shm_ring_ended_get(const void *mem, const struct shm_geom *g, uint32_t i,
		       struct shm_ended *out)
{
	if (i >= g->topics_max)
		return flit_err(EBADMSG, "ended entry %u beyond the table's %u", i, g->topics_max);
	memcpy(out, (const char *)mem + g->table_off + (uint64_t)g->topics_max * 32 +
	       (uint64_t)i * sizeof(*out), sizeof(*out));
	if (out->idx >= g->topics_max)
		return flit_err(EBADMSG, "ended entry %u names topic %u, beyond the table's %u",
				i, out->idx, g->topics_max);
	return 0;
}

int shm_ring_validate(const void *mem, uint64_t size)
{
	if (size < SHM_SLOTS_OFF)
		return flit_err(EBADMSG, "file too short for a flit shm header (%llu bytes)",
				(unsigned long long)size);
	return shm_geom_validate(&((const struct shm_hdr *)mem)->geom, size);
}

int shm_geom_validate(const struct shm_geom *g, uint64_t size)
{
	if (size < SHM_SLOTS_OFF)
		return flit_err(EBADMSG, "file too short for a flit shm header (%llu bytes)",
				(unsigned long long)size);
	if (g->magic != SHM_MAGIC)
		return flit_err(EBADMSG, "not a flit shm ring (bad magic)");
	if (g->version != SHM_VERSION)
		return flit_err(EPROTO, "flit shm ring version %u, this library reads %u",
				g->version, SHM_VERSION);
	if (g->check != shm_geom_check(g))
		return flit_err(EBADMSG, "shm ring header is corrupted (check value mismatch)");
	if (g->capacity < SHM_CAP_MIN || g->capacity > SHM_CAP_MAX ||
	    (g->capacity & (g->capacity - 1)))
		return flit_err(EBADMSG, "shm ring: bad capacity %llu",
				(unsigned long long)g->capacity);
	if (!g->max_readers || g->max_readers > SHM_READERS_MAX ||
	    g->hdr_size != shm_hdr_size(g->max_readers))
		return flit_err(EBADMSG, "shm ring: bad reader table (%u readers, header %u bytes)",
				g->max_readers, g->hdr_size);
	if (g->max_frame < 64 || g->max_frame > g->capacity / 4 || (g->max_frame & 7))
		return flit_err(EBADMSG, "shm ring: bad max frame %llu",
				(unsigned long long)g->max_frame);
	if (g->mode > FLIT_SHM_OVERWRITE)
		return flit_err(EBADMSG, "shm ring: unknown mode %u", g->mode);
	if (g->topic_len == 0 || g->topic_len >= sizeof(g->topic) ||
	    memchr(g->topic, 0, sizeof(g->topic)) != g->topic + g->topic_len)
		return flit_err(EBADMSG, "shm ring: bad topic name");
	if (g->topics_max && (g->topics_max > SHM_TOPICS_MAX || g->names_size < 4096 ||
			      (g->names_size & 7) || g->names_size > (1u << 30) ||
			      g->table_off != (uint64_t)g->hdr_size + g->capacity))
		return flit_err(EBADMSG, "shm ring: bad topic table (%u topics, %u bytes of names, at %llu)",
				g->topics_max, g->names_size, (unsigned long long)g->table_off);
	if (!g->topics_max && (g->names_size || g->table_off))
		return flit_err(EBADMSG, "shm ring: a table of no topics");
	uint64_t want = (uint64_t)g->hdr_size + g->capacity + shm_table_size(g->topics_max, g->names_size, g->max_readers);
	if (size != want)
		return flit_err(EBADMSG, "shm ring: file is %llu bytes, geometry says %llu (truncated?)",
				(unsigned long long)size, (unsigned long long)want);
	return 0;
}

void shm_wr_init(struct shm_wr *w, void *mem)
{
	struct shm_hdr *h = mem;

	memset(w, 0, sizeof(*w));
	w->hdr = h;
	w->data = (uint8_t *)mem + h->geom.hdr_size;
	w->cap = h->geom.capacity;
	w->mask = w->cap - 1;
	w->max_frame = h->geom.max_frame;
	w->max_readers = h->geom.max_readers;
	w->paced = h->geom.mode == FLIT_SHM_PACED;
	w->pos = atomic_load(&h->w.tail);
	w->zeroed = w->pos;
	w->intent = atomic_load(&h->w.intent);
	w->oldest = atomic_load(&h->w.start);
	w->gen = atomic_load(&h->w.gen);
	w->seq = atomic_load(&h->w.next_seq);
	shm_wr_refresh_limit(w);
}

void shm_wr_retire(struct shm_wr *w, uint64_t end)
{
	uint64_t o = w->oldest;

	/* walk our own records from the oldest: each is intact until this
	 * write, whose intent is not announced yet */
	while (o + w->cap < end && o < w->pos) {
		uint64_t off = o & w->mask;
		uint64_t tag = atomic_load_explicit((_Atomic uint64_t *)(w->data + off),
						    memory_order_relaxed);
		uint32_t flen;

		if (tag == (o | SHM_TAG_VALID | SHM_TAG_PAD)) {
			o += w->cap - off;
			continue;
		}
		memcpy(&flen, w->data + off + 16, 4);
		if (tag != (o | SHM_TAG_VALID) || flen < 24 || flen > w->max_frame) {
			o = w->pos; /* not a record of ours: keep nothing */
			break;
		}
		o += shm_rec_len(flen);
	}
	if (o > w->pos)
		o = w->pos;
	w->oldest = o;
	/* ordered before the data writes by shm_wr_intent's release fence */
	atomic_store_explicit(&w->hdr->w.start, o, memory_order_relaxed);
}

void shm_wr_refresh_limit(struct shm_wr *w)
{
	uint64_t min = w->pos;

	/* pairs with the fence in shm_rd_join(): either we see a joining
	 * reader's slot, or it sees our tail (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	for (uint32_t i = 0; i < w->max_readers; i++) {
		struct shm_slot *s = shm_slot(w->hdr, i);
		uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);
		if ((st & 0xff) != SHM_SLOT_ACTIVE)
			continue;
		uint64_t p = atomic_load_explicit(&s->pos, memory_order_acquire);
		if (p < min)
			min = p;
	}
	w->limit = min + w->cap;
}

void shm_wr_pad(struct shm_wr *w)
{
	uint64_t off = w->pos & w->mask, end = w->pos + (w->cap - off);

	shm_wr_intent(w, end + 8);
	if (end + 8 > w->zeroed)
		atomic_store_explicit((_Atomic uint64_t *)w->data, 0, memory_order_relaxed);
	atomic_store_explicit((_Atomic uint64_t *)(w->data + off),
			      w->pos | SHM_TAG_VALID | SHM_TAG_PAD,
			      memory_order_release);
	w->pos = end;
	shm_wr_state(w, end, ~0ull);
}

void shm_wr_zero_ahead(struct shm_wr *w)
{
	uint64_t from = w->zeroed > w->pos ? w->zeroed : w->pos;
	uint64_t to = w->pos + SHM_ZERO_AHEAD;

	/* zeroing position x overwrites x - cap: paced readers must be past it */
	if (w->paced && to > w->limit) {
		shm_wr_refresh_limit(w);
		if (to > w->limit)
			to = w->limit;
	}
	if (to <= from)
		return;
	shm_wr_intent(w, to);
	while (from < to) {
		uint64_t off = from & w->mask;
		uint64_t n = to - from;
		if (n > w->cap - off)
			n = w->cap - off;
		memset(w->data + off, 0, n);
		from += n;
	}
	w->zeroed = to;
}

void shm_rd_init(struct shm_rd *r, void *mem, struct shm_slot *slot,
		 uint8_t *scratch, bool copy, uint64_t pos)
{
	shm_rd_init_g(r, mem, &((struct shm_hdr *)mem)->geom, slot, scratch, copy, pos);
}

void shm_rd_init_g(struct shm_rd *r, void *mem, const struct shm_geom *g,
		   struct shm_slot *slot, uint8_t *scratch, bool copy, uint64_t pos)
{
	struct shm_hdr *h = mem;

	memset(r, 0, sizeof(*r));
	r->hdr = h;
	r->data = (const uint8_t *)mem + g->hdr_size;
	r->cap = g->capacity;
	r->mask = r->cap - 1;
	r->max_frame = g->max_frame;
	r->slot = slot;
	r->scratch = scratch;
	r->copy = copy;
	r->pos = pos;
}

/* Consistent (tail, next_seq) snapshot.  A writer preempted mid-update
 * holds it for as long as the scheduler likes, so retry for up to a second;
 * a writer that never finishes died mid-update: then *seq = SHM_SEQ_UNKNOWN
 * (the session takes its first frame's sequence number). */
static uint64_t tail_snapshot(const struct shm_hdr *hdr, uint64_t *seq)
{
	struct timespec ts;
	uint64_t t, deadline = 0;

	for (unsigned i = 1;; i++) {
		uint64_t g1 = atomic_load_explicit(&hdr->w.gen, memory_order_acquire);
		t = atomic_load_explicit(&hdr->w.tail, memory_order_relaxed);
		*seq = atomic_load_explicit(&hdr->w.next_seq, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (!(g1 & 1) && atomic_load_explicit(&hdr->w.gen, memory_order_relaxed) == g1)
			return t;
		if (i % 1024 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
			if (!deadline) {
				deadline = now + 1000000000u;
			} else if (now > deadline) {
				*seq = SHM_SEQ_UNKNOWN;
				return atomic_load_explicit(&hdr->w.tail, memory_order_acquire);
			}
			sched_yield();
		}
	}
}

uint64_t shm_rd_join(struct shm_hdr *hdr, struct shm_slot *slot, uint32_t gen_state,
		     uint64_t *seq)
{
	uint64_t t;

	if (!slot)
		return tail_snapshot(hdr, seq);
	t = atomic_load_explicit(&hdr->w.tail, memory_order_acquire);
	atomic_store_explicit(&slot->pos, t, memory_order_relaxed);
	atomic_store_explicit(&slot->state, gen_state, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	/* a writer that computed its limit without seeing us computed it from
	 * a tail no later than this one, so starting here is safe */
	t = tail_snapshot(hdr, seq);
	atomic_store_explicit(&slot->pos, t, memory_order_release);
	atomic_fetch_add(&hdr->r.readers_gen, 1);
	return t;
}
