/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The shm transport's ring: one writer, many readers, in caller-provided
 * memory (a shared file mapping, or any buffer for tests).
 *
 * Memory = header (hdr_size bytes, a multiple of 4096) + data ring (capacity
 * bytes, a power of two).  Positions are 64-bit byte counts that only grow;
 * offset = position & (capacity - 1).  The header:
 *
 *   0x000  geometry, written once by the writer before the file is published,
 *          protected by a check value (struct shm_geom)
 *   0x200  writer line: tail, latest, intent, start  (written per record)
 *   0x240  status line: closed flag, writer pid      (written rarely)
 *   0x280  readers_gen line
 *   0x2c0  topics line: how many topics the table names, how many ended
 *   0x400  reader slots, one 64-byte line each: state word, position
 *
 * A session ring (geom.topics_max > 0) carries the messages of many topics,
 * each message with its topic's index (docs/PROTOCOL.md), and after the data
 * ring a table that names them:
 *   table_off                       topics_max entries (struct shm_topic_ent):
 *                                   a topic's name, where its first record
 *                                   went, when it was created
 *   table_off + 32 * topics_max     the ended log: topics_max entries
 *                                   (struct shm_ended), in the order the
 *                                   topics ended (an index ends once: indexes
 *                                   are never reused in a ring)
 *   table_off + 64 * topics_max     names: names_size bytes, NUL-terminated
 *                                   names, each at an 8-byte boundary
 *   ... + names_size                per reader slot, a bitmap of the topics
 *                                   its reader wants (bit i of 64-bit word
 *                                   i / 64): a publisher's receivers are the
 *                                   active slots with its bit set
 * The writer fills an entry and then publishes it by storing the count
 * (release); a topic's entry is published before its first record, and an
 * ended entry after its last.  The table is sparse in the file: only what
 * is written costs memory.  A ring with topics_max 0 carries one topic,
 * geom.topic, at index 0.
 *
 * Records (docs/PROTOCOL.md, "shm ring records"): an 8-byte tag then a flit
 * frame, starting on a 64-byte line (so a small message is one cache line:
 * one line transfer between cores) and never straddling the end of the
 * ring.  tag = position|1 for a frame, position|3 for padding to the end of
 * the ring.  A reader at P accepts the record only if the tag is exactly P|1
 * (or P|3).  A zero or a value of another lap means "not yet".
 *
 * Stale bytes of an older lap must never look like a tag, so the tag slot of
 * the next record is always zero when a record's tag is released.  The
 * writer keeps a window of SHM_ZERO_AHEAD bytes beyond its position zeroed,
 * extending it *after* each release: the zeroing stores (and the ownership
 * requests for those lines) are then off the critical path, and the lines
 * are already owned when the next record is written.  Only a record longer
 * than the window clears the next slot before its release.
 *
 * Receiver-paced mode: a record [P, P+len) overwrites what was at positions
 * [P-cap, P+len-cap); the writer may write it only when every active reader
 * is at or past P+len+8-cap (+8 for the cleared next tag slot).  Readers
 * publish their position after each poll; the writer caches the minimum and
 * rescans only when the cached limit is reached.
 *
 * Overwrite mode, and readers that cannot write the file: the writer stores
 * `intent` (the end of the record it is about to write) before writing, so a
 * reader that copied a record at P checks afterwards that intent <= P + cap:
 * otherwise it was lapped (the copy may be torn) and it resumes at `latest`.
 *
 * Late join: `start` is the position of the oldest record still intact.  The
 * writer moves it past the records a write is about to overwrite before it
 * announces that write in `intent`, so a reader that starts at `start` and
 * reads by copying (checking `intent` after each copy, as above) either reads
 * intact records or knows it was lapped.  `late_join` is how many of the most
 * recent messages the writer offers a reader that joins late (0: none).
 */
#ifndef FLIT_SHM_RING_H
#define FLIT_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SHM_MAGIC        0x314d48535449464cull /* "LFITSHM1" little-endian */
#define SHM_VERSION      2u
#define SHM_CAP_MIN      (4096ull)
#define SHM_CAP_MAX      (1ull << 30)
#define SHM_READERS_MAX  1024u
#define SHM_SLOTS_OFF    0x400u
#define SHM_SLOT_SIZE    64u
#define SHM_TOPICS_MAX   65536u  /* a session ring's topic indexes: 0 .. 65535 */
#define SHM_NAME_AVG     48u     /* names area: this many bytes a topic */

#define SHM_REC_ALIGN    64ull
#define SHM_ZERO_AHEAD   2048ull

#define SHM_TAG_VALID    1ull
#define SHM_TAG_PAD      2ull

#define SHM_SLOT_FREE    0u
#define SHM_SLOT_ACTIVE  1u
/* slot state word: generation << 8 | state */

struct shm_geom {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size;     /* offset of the data ring */
	uint64_t capacity;     /* data ring bytes, power of two */
	uint64_t max_frame;    /* largest frame the writer writes (<= cap/4) */
	uint32_t max_readers;
	uint32_t mode;         /* enum flit_shm_mode */
	uint32_t session_id;
	uint32_t topic_len;
	uint64_t create_ns;    /* CLOCK_REALTIME */
	char topic[256];       /* NUL-terminated: the topic (topics_max 0), or
				* the session ring's first topic */
	uint32_t topics_max;   /* 0: one topic; else the table's entries */
	uint32_t names_size;   /* bytes of the table's names area */
	uint64_t table_off;    /* the table: hdr_size + capacity (topics_max > 0) */
	uint64_t check;        /* FNV-1a 64 of all bytes above */
};

/* A session ring's topic: its name at names + name_off (name_len bytes and
 * a NUL), where the writer stood when it was added (its first record is
 * there or later), and when (CLOCK_REALTIME). */
struct shm_topic_ent {
	uint32_t name_off;
	uint16_t name_len;
	uint16_t flags;        /* 0 */
	uint32_t pad[2];
	uint64_t first_pos;
	uint64_t create_ns;
};

/* A topic of a session ring ended (its publisher closed): its last record
 * ends before end_pos, and it sent `final` messages (its topic numbers). */
struct shm_ended {
	uint32_t idx;
	uint32_t flags;        /* 0 */
	uint64_t end_pos;
	uint64_t final;
	uint64_t pad;
};

struct shm_topics_line {
	_Atomic uint32_t ntopics;   /* entries published */
	_Atomic uint32_t nended;    /* ended-log entries published */
	uint64_t names_used;        /* the writer's: bytes of names written */
} __attribute__((aligned(64)));

struct shm_writer_line {
	_Atomic uint64_t tail;   /* end of the last committed record */
	_Atomic uint64_t latest; /* start of the last committed frame record */
	_Atomic uint64_t intent; /* end of the record being written */
	_Atomic uint64_t start;  /* position of the oldest intact record */
	_Atomic uint64_t next_seq; /* sequence number of the message at tail */
	_Atomic uint64_t gen;    /* odd while tail/latest/next_seq change */
	_Atomic uint64_t late_join; /* messages offered to late joiners (written once) */
} __attribute__((aligned(64)));

struct shm_status_line {
	_Atomic uint32_t closed; /* writer closed cleanly; nothing more comes */
	uint32_t writer_pid;     /* informational (pid namespaces differ) */
} __attribute__((aligned(64)));

struct shm_slot {
	_Atomic uint32_t state;  /* gen << 8 | SHM_SLOT_* */
	uint32_t pid;
	_Atomic uint64_t pos;
} __attribute__((aligned(64)));

struct shm_hdr {
	struct shm_geom geom;
	char pad0[0x200 - sizeof(struct shm_geom)];
	struct shm_writer_line w;   /* 0x200 */
	struct shm_status_line st;  /* 0x240 */
	struct {
		_Atomic uint64_t readers_gen;
	} __attribute__((aligned(64))) r; /* 0x280 */
	struct shm_topics_line tl;  /* 0x2c0 */
};

_Static_assert(sizeof(struct shm_geom) <= 0x200, "geometry fits");
_Static_assert(sizeof(struct shm_hdr) <= SHM_SLOTS_OFF, "header fits");
_Static_assert(sizeof(struct shm_slot) == SHM_SLOT_SIZE, "slot is a line");
_Static_assert(offsetof(struct shm_geom, topics_max) == 0x138 &&
	       offsetof(struct shm_geom, check) == 0x148 &&
	       offsetof(struct shm_hdr, tl) == 0x2c0, "docs/PROTOCOL.md's offsets");
_Static_assert(sizeof(struct shm_topic_ent) == 32, "topic entry");
_Static_assert(sizeof(struct shm_ended) == 32, "ended entry");

static inline struct shm_slot *shm_slot(void *base, unsigned i)
{
	return (struct shm_slot *)((char *)base + SHM_SLOTS_OFF) + i;
}

static inline uint32_t shm_hdr_size(uint32_t max_readers)
{
	uint32_t end = SHM_SLOTS_OFF + max_readers * SHM_SLOT_SIZE;
	return (end + 4095u) & ~4095u;
}

uint64_t shm_geom_check(const struct shm_geom *g);

/* Bytes of a reader slot's bitmap of wanted topics. */
static inline uint64_t shm_wants_size(uint32_t topics_max)
{
	return ((uint64_t)topics_max + 63) / 64 * 8;
}

/* Bytes of a session ring's table (page multiple), 0 for topics_max 0. */
static inline uint64_t shm_table_size(uint32_t topics_max, uint32_t names_size,
				      uint32_t max_readers)
{
	if (!topics_max)
		return 0;
	return ((uint64_t)topics_max * 64 + names_size +
		(uint64_t)max_readers * shm_wants_size(topics_max) + 4095u) & ~4095ull;
}

/* Initialise a ring in mem (shm_hdr_size(max_readers) + capacity bytes,
 * zeroed).  start is the first position (tests use huge values to exercise
 * 64-bit arithmetic).  Returns 0 or -EINVAL. */
int shm_ring_init(void *mem, uint64_t capacity, uint32_t max_readers,
		  uint32_t mode, uint32_t session_id, const char *topic,
		  uint64_t start);

/* shm_ring_init() for a session ring: a table of topics_max topics (1 ..
 * SHM_TOPICS_MAX) with names_size bytes of names after the data ring (the
 * memory: shm_hdr_size() + capacity + shm_table_size(), zeroed).  `topic`
 * is the first topic's name (informational). */
int shm_ring_init_session(void *mem, uint64_t capacity, uint32_t max_readers,
			  uint32_t mode, uint32_t session_id, const char *topic,
			  uint32_t topics_max, uint32_t names_size);

/* Validate a ring header against the size of the memory it sits in.
 * Returns 0, or -EBADMSG/-EPROTO with a trail naming the problem. */
int shm_ring_validate(const void *mem, uint64_t size);
/* The same for a copy of the geometry (a reader validates its own copy and
 * uses only that: the file's may change under it). */
int shm_geom_validate(const struct shm_geom *g, uint64_t size);

/* ---- a session ring's topics ------------------------------------------------ */

static inline struct shm_topic_ent *shm_topic_ents(void *mem)
{
	struct shm_hdr *h = mem;
	return (struct shm_topic_ent *)((char *)mem + h->geom.table_off);
}

static inline struct shm_ended *shm_ended_log(void *mem)
{
	struct shm_hdr *h = mem;
	return (struct shm_ended *)((char *)mem + h->geom.table_off +
				    (uint64_t)h->geom.topics_max * 32);
}

static inline char *shm_names(void *mem)
{
	struct shm_hdr *h = mem;
	return (char *)mem + h->geom.table_off + (uint64_t)h->geom.topics_max * 64;
}

/* Reader slot i's bitmap of wanted topics in a session ring of geometry g
 * (a reader passes its validated copy: the file's may change under it). */
static inline _Atomic uint64_t *shm_wants(void *mem, const struct shm_geom *g, uint32_t i)
{
	return (_Atomic uint64_t *)((char *)mem + g->table_off + (uint64_t)g->topics_max * 64 +
				    g->names_size + (uint64_t)i * shm_wants_size(g->topics_max));
}

/* Writer: add a topic whose first record goes at or after pos.  Returns its
 * index, or -ENOSPC when the table or its names area is full (the session
 * takes no more topics). */
int shm_ring_topic_add(void *mem, const char *name, uint64_t pos, uint64_t create_ns);
/* Writer: topic idx ended before end_pos, after `final` messages. */
void shm_ring_topic_end(void *mem, uint32_t idx, uint64_t end_pos, uint64_t final);
/* Reader: topic idx of the ring in mem whose geometry, validated by
 * shm_ring_validate(), the reader copied to g (the file's own may change
 * under it): its name copied to out (cap bytes), *first_pos (a record
 * boundary), *create_ns.  0, or -EBADMSG with a trail naming what is
 * wrong. */
int shm_ring_topic_get(const void *mem, const struct shm_geom *g, uint32_t idx, char *out,
		       size_t cap, uint64_t *first_pos, uint64_t *create_ns);
/* Reader: ended-log entry i, validated: 0 or -EBADMSG. */
int shm_ring_ended_get(const void *mem, const struct shm_geom *g, uint32_t i,
		       struct shm_ended *out);

/* ---- writer -------------------------------------------------------------- */

struct shm_wr {
	struct shm_hdr *hdr;
	uint8_t *data;
	uint64_t cap, mask;
	uint64_t pos;      /* where the next record (or the open frame) starts */
	uint64_t limit;    /* cached: records must end at or before this - 8 */
	uint64_t zeroed;   /* [pos, zeroed) holds only zeros */
	uint64_t intent;   /* last value stored to hdr->w.intent */
	uint64_t oldest;   /* last value stored to hdr->w.start */
	uint64_t max_frame;
	uint32_t max_readers;
	bool paced;
	/* open frame (batching or claim), written in place at pos */
	uint8_t *frame;    /* NULL when no frame is open */
	uint32_t flen;     /* open frame's length and message count: kept here and */
	uint32_t fcount;   /* written to its header on publish (that line is the
			    * one a caught-up reader spins on) */
	uint8_t *claim;    /* payload of an open claim */
	uint32_t claim_max;
	uint64_t seq;      /* next message's sequence number */
	uint64_t readers_gen;
	uint64_t gen;      /* our copy of hdr->w.gen */
	/* counters */
	uint64_t msgs, bytes, frames, back_pressured;
};

void shm_wr_init(struct shm_wr *w, void *mem);

static inline uint64_t shm_rec_len(uint64_t flen)
{
	return (8 + flen + SHM_REC_ALIGN - 1) & ~(SHM_REC_ALIGN - 1);
}

/* Move hdr->w.start past the records that writing up to `end` overwrites. */
void shm_wr_retire(struct shm_wr *w, uint64_t end);

static inline void shm_wr_intent(struct shm_wr *w, uint64_t end)
{
	if (end > w->intent) {
		if (__builtin_expect(end > w->oldest + w->cap, 0))
			shm_wr_retire(w, end);
		w->intent = end;
		atomic_store_explicit(&w->hdr->w.intent, end, memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
	}
}

/* Extend the zeroed window towards pos + SHM_ZERO_AHEAD, as far as the
 * readers allow (paced) and after announcing it (overwrite readers). */
void shm_wr_zero_ahead(struct shm_wr *w);

/* Make room for a frame of `need` bytes (tag excluded) at w->pos, padding to
 * the end of the ring if it does not fit contiguously.  Returns a pointer to
 * the frame area, or NULL if the readers have not made room (paced). */
static inline uint8_t *shm_wr_reserve(struct shm_wr *w, uint64_t need);
/* Recompute w->limit from the active readers' positions. */
void shm_wr_refresh_limit(struct shm_wr *w);
/* Write a padding record from w->pos to the end of the ring. */
void shm_wr_pad(struct shm_wr *w);

static inline bool shm_wr_room(struct shm_wr *w, uint64_t end)
{
	if (!w->paced || end <= w->limit)
		return true;
	shm_wr_refresh_limit(w);
	return end <= w->limit;
}

static inline uint8_t *shm_wr_reserve(struct shm_wr *w, uint64_t need)
{
	uint64_t off = w->pos & w->mask, rec = shm_rec_len(need);
	uint64_t pad = off + rec > w->cap ? w->cap - off : 0;

	/* +8: the tag slot of the following record is cleared on publish */
	if (!shm_wr_room(w, w->pos + pad + rec + 8))
		return NULL;
	if (pad)
		shm_wr_pad(w);
	/* announce the bytes about to be overwritten before writing them */
	shm_wr_intent(w, w->pos + rec + 8);
	return w->data + (w->pos & w->mask) + 8;
}

/* Grow the open frame (at w->pos) to `need` bytes in place, if it still fits
 * before the end of the ring and the readers have made room. */
static inline bool shm_wr_extend(struct shm_wr *w, uint64_t need)
{
	uint64_t rec = shm_rec_len(need);

	if ((w->pos & w->mask) + rec > w->cap || !shm_wr_room(w, w->pos + rec + 8))
		return false;
	shm_wr_intent(w, w->pos + rec + 8);
	return true;
}
/* Update tail (and latest, unless ~0) and next_seq as one consistent
 * snapshot for joining readers (a seqlock on the writer's own line). */
static inline void shm_wr_state(struct shm_wr *w, uint64_t tail, uint64_t latest)
{
	atomic_store_explicit(&w->hdr->w.gen, ++w->gen, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	if (latest != ~0ull)
		atomic_store_explicit(&w->hdr->w.latest, latest, memory_order_relaxed);
	atomic_store_explicit(&w->hdr->w.next_seq, w->seq, memory_order_relaxed);
	atomic_store_explicit(&w->hdr->w.tail, tail, memory_order_relaxed);
	atomic_store_explicit(&w->hdr->w.gen, ++w->gen, memory_order_release);
}

/* Publish the open frame of `flen` bytes at w->pos. */
static inline void shm_wr_publish(struct shm_wr *w, uint32_t flen)
{
	uint64_t p = w->pos, end = p + shm_rec_len(flen);
	uint8_t *rec = w->data + (p & w->mask);

	if (__builtin_expect(end + 8 > w->zeroed, 0))
		atomic_store_explicit((_Atomic uint64_t *)(w->data + (end & w->mask)),
				      0, memory_order_relaxed);
	atomic_store_explicit((_Atomic uint64_t *)rec, p | SHM_TAG_VALID,
			      memory_order_release);
	shm_wr_state(w, end, p);
	w->pos = end;
	w->frames++;
	if (w->zeroed < end + SHM_ZERO_AHEAD / 2)
		shm_wr_zero_ahead(w);
}

/* ---- reader -------------------------------------------------------------- */

struct shm_rd {
	struct shm_hdr *hdr;
	const uint8_t *data;
	uint64_t cap, mask, max_frame;
	uint64_t pos;
	struct shm_slot *slot; /* NULL: passive (cannot write the file) */
	uint8_t *scratch;      /* copy buffer for overwrite/passive reading */
	bool copy;             /* copy then check `intent` (overwrite, passive) */
};

enum shm_rd_res {
	SHM_RD_NONE = 0,   /* nothing new */
	SHM_RD_FRAME,      /* *frame, *len valid until the next call */
	SHM_RD_LAPPED,     /* overwritten before we read it: resumed at latest */
	SHM_RD_CORRUPT,    /* a record's length is impossible: stop reading */
};

/* Reader at position pos.  For a paced reader with a slot, `pos` must come
 * from shm_rd_join(). */
void shm_rd_init(struct shm_rd *r, void *mem, struct shm_slot *slot,
		 uint8_t *scratch, bool copy, uint64_t pos);
/* shm_rd_init() with the reader's validated copy of the geometry. */
void shm_rd_init_g(struct shm_rd *r, void *mem, const struct shm_geom *g,
		   struct shm_slot *slot, uint8_t *scratch, bool copy, uint64_t pos);
#define SHM_SEQ_UNKNOWN UINT64_MAX
/* Claim-time join protocol for a slot: returns the position to start at and
 * in *seq the sequence number of the message there (SHM_SEQ_UNKNOWN if the
 * writer died in the middle of publishing).  slot NULL: a passive
 * reader, which only takes the snapshot. */
uint64_t shm_rd_join(struct shm_hdr *hdr, struct shm_slot *slot, uint32_t gen_state,
		     uint64_t *seq);

/* Next record.  Advances r->pos past it (the caller publishes positions with
 * shm_rd_commit() after delivery, so a paced writer cannot overwrite a frame
 * that is being delivered). */
static inline enum shm_rd_res shm_rd_next(struct shm_rd *r, const void **frame,
					  uint32_t *len)
{
	for (int pads = 0; pads < 2; pads++) {
		uint64_t p = r->pos, off = p & r->mask;
		uint64_t tag = atomic_load_explicit(
			(const _Atomic uint64_t *)(r->data + off), memory_order_acquire);

		if (tag == (p | SHM_TAG_VALID)) {
			const uint8_t *f = r->data + off + 8;
			uint32_t flen;
			memcpy(&flen, f + 8, 4);
			if (__builtin_expect(flen < 24 || (flen & 7) || flen > r->max_frame ||
					     off + shm_rec_len(flen) > r->cap, 0)) {
				/* a copying reader may be looking at a record
				 * being overwritten: that is a lap, not damage */
				if (r->copy && atomic_load_explicit(&r->hdr->w.intent,
						memory_order_acquire) > p + r->cap)
					goto lapped;
				return SHM_RD_CORRUPT;
			}
			/* fetch the frame's other lines in parallel now, rather
			 * than one miss at a time as the payload is read */
			for (uint32_t o = 64; o < flen + 8; o += 64)
				__builtin_prefetch(f + o);
			if (r->copy) {
				memcpy(r->scratch, f, flen);
				atomic_thread_fence(memory_order_acquire);
				uint64_t in = atomic_load_explicit(&r->hdr->w.intent,
								   memory_order_relaxed);
				if (in > p + r->cap)
					goto lapped;
				f = r->scratch;
			}
			r->pos = p + shm_rec_len(flen);
			*frame = f;
			*len = flen;
			return SHM_RD_FRAME;
		}
		if (tag == (p | SHM_TAG_VALID | SHM_TAG_PAD)) {
			if (r->copy) {
				uint64_t in = atomic_load_explicit(&r->hdr->w.intent,
								   memory_order_acquire);
				if (in > p + r->cap)
					goto lapped;
			}
			r->pos = p + (r->cap - off);
			continue;
		}
		if (r->copy && atomic_load_explicit(&r->hdr->w.intent,
						    memory_order_acquire) > p + r->cap)
			goto lapped;
		return SHM_RD_NONE;
	}
	return SHM_RD_NONE;
lapped:
	r->pos = atomic_load_explicit(&r->hdr->w.latest, memory_order_acquire);
	return SHM_RD_LAPPED;
}

static inline void shm_rd_commit(struct shm_rd *r)
{
	if (r->slot)
		atomic_store_explicit(&r->slot->pos, r->pos, memory_order_release);
}

#endif /* FLIT_SHM_RING_H */
