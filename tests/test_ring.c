// SPDX-License-Identifier: BSD-2-Clause
/*
 * The shm ring (transports/shm/shm_ring.h) in plain memory, no files:
 * 64-bit positions across 2^32 and 2^63, records ending exactly at the ring
 * end and padding records, the paced writer's limit and the join protocol,
 * stale bytes of an older lap that look like tags, the overwrite reader's
 * lap detection, impossible records, header validation; with threads: a
 * stress of 2 M records, stale bytes against a reader spinning at the
 * writer, and the (position, seq) snapshot a joining reader takes.
 *
 * Frames are built in place with the codec's builders (one message each,
 * topic 7, payload = tl_fill(seq)) and read back with shm_rd_next(); every
 * frame is validated and compared byte by byte with what was published.
 *
 * The ring memory is page-aligned (posix_memalign + memset) rather than
 * calloc'd: struct shm_hdr has 64-byte-aligned members, and the sanitizer
 * build checks that alignment, as an mmap of the real file would give it.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "testlib.h"
#include "codec.h"
#include "config.h"
#include "shm/shm_ring.h"

#define SESSION   0x5eed1234u
#define TOPIC_IDX 7u
/* tag 8 + frame header 24 + message header 8 */
#define REC_OVERHEAD 40u

/* ---- helpers ------------------------------------------------------------ */

/* Memory a test owns: freed by the teardown when an assertion cuts the
 * test short, so a failure reports itself rather than leaks. */
#define OWNED_MAX 16
static void *owned[OWNED_MAX];

static void *own_realloc(void *old, size_t n)
{
	void *p = realloc(old, n);

	assert_non_null(p);
	for (int i = 0; i < OWNED_MAX; i++)
		if (owned[i] == old) {
			owned[i] = p;
			return p;
		}
	fail_msg("more than %d allocations in one test", OWNED_MAX);
	return NULL;
}

static void *own_alloc(size_t n)
{
	void *p = NULL;

	/* page-aligned, zeroed */
	assert_int_equal(posix_memalign(&p, 4096, n), 0);
	memset(p, 0, n);
	for (int i = 0; i < OWNED_MAX; i++)
		if (!owned[i]) {
			owned[i] = p;
			return p;
		}
	free(p);
	fail_msg("more than %d allocations in one test", OWNED_MAX);
	return NULL;
}

static void own_free(void *p)
{
	for (int i = 0; i < OWNED_MAX; i++)
		if (p && owned[i] == p)
			owned[i] = NULL;
	free(p);
}

static int free_owned(void **state)
{
	for (int i = 0; i < OWNED_MAX; i++) {
		free(owned[i]);
		owned[i] = NULL;
	}
	return 0;
}

struct rng { uint64_t s; };

static uint64_t rnd(struct rng *r)
{
	/* xorshift64*: deterministic, so a failure replays */
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dull;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* One published record, as the test remembers it. */
struct rec {
	uint64_t pos, seq;
	uint32_t len;
	bool trap; /* payload holds stale-tag bait instead of tl_fill() */
};

struct log {
	struct rec *v;
	size_t n, cap;
};

static void log_add(struct log *lg, struct rec r)
{
	if (lg->n == lg->cap) {
		lg->cap = lg->cap ? lg->cap * 2 : 1024;
		lg->v = own_realloc(lg->v, lg->cap * sizeof(*lg->v));
	}
	lg->v[lg->n++] = r;
}

struct ring {
	void *mem;
	uint64_t size, cap, mask, max_frame;
	struct shm_hdr *hdr;
	uint8_t *data;
	struct shm_wr w;
	struct log log;
	uint64_t seq;
	/* what the writes did (so tests can assert a case really happened) */
	uint64_t exact_end, pad64, pad_big, big_records;
};

static void ring_open(struct ring *g, uint64_t cap, uint32_t readers,
		      uint32_t mode, uint64_t start)
{
	memset(g, 0, sizeof(*g));
	g->cap = cap;
	g->mask = cap - 1;
	g->size = shm_hdr_size(readers) + cap;
	g->mem = own_alloc(g->size);
	assert_int_equal(shm_ring_init(g->mem, cap, readers, mode, SESSION, "t.ring", start), 0);
	assert_int_equal(shm_ring_validate(g->mem, g->size), 0);
	g->hdr = g->mem;
	g->data = (uint8_t *)g->mem + g->hdr->geom.hdr_size;
	g->max_frame = g->hdr->geom.max_frame;
	shm_wr_init(&g->w, g->mem);
	assert_true(g->w.pos == start);
	assert_true(g->w.paced == (mode == FLIT_SHM_PACED));
}

static void ring_close(struct ring *g)
{
	own_free(g->log.v);
	own_free(g->mem);
}

static uint64_t ld_tag(const struct ring *g, uint64_t pos)
{
	return atomic_load((const _Atomic uint64_t *)(g->data + (pos & g->mask)));
}

static uint32_t frame_need(uint32_t len)
{
	return FLIT_FRAME_HDR_LEN + (uint32_t)flit_msg_wire_len(len, false);
}

/* Payload length whose one-message frame makes a record of exactly `rec`
 * bytes (a multiple of 64); `slack` varies the frame length inside it. */
static uint32_t len_for_rec(const struct ring *g, uint64_t rec, uint64_t slack)
{
	uint64_t len = rec - REC_OVERHEAD;

	slack %= 64;
	len -= slack < len ? slack : len;
	if (len > g->max_frame - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN)
		len = g->max_frame - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN;
	assert_true(shm_rec_len(frame_need((uint32_t)len)) == rec);
	return (uint32_t)len;
}

static uint32_t max_len(const struct ring *g)
{
	return (uint32_t)(g->max_frame - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN);
}

/* Stale-tag bait: the 64-bit word at absolute position x holds the tag a
 * record at x + cap (or x + 2 cap) would carry, frame or padding. */
static uint64_t bait(const struct ring *g, uint64_t x)
{
	uint64_t lap = (x >> 6) & 1 ? 2 * g->cap : g->cap;
	return (x + lap) | ((x >> 7) & 1 ? SHM_TAG_VALID | SHM_TAG_PAD : SHM_TAG_VALID);
}

static void fill_bait(const struct ring *g, uint8_t *p, uint64_t pos, uint32_t len)
{
	for (uint32_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v = bait(g, pos + i);
		memcpy(p + i, &v, 8);
	}
	memset(p + (len & ~7u), 0xa5, len & 7);
}

/* Reserve, build and fill the frame of message `seq` in place.  Returns the
 * frame (not yet published) or NULL when the writer has no room.  Counts the
 * ring-end cases the record hits. */
static uint8_t *build(struct ring *g, uint64_t seq, uint32_t len, bool trap,
		      uint32_t *flen)
{
	uint64_t off = g->w.pos & g->mask, rec = shm_rec_len(frame_need(len));
	uint8_t *f = shm_wr_reserve(&g->w, frame_need(len));

	if (!f)
		return NULL;
	if (off + rec == g->cap)
		g->exact_end++;
	else if (off + rec > g->cap)
		*(g->cap - off == 64 ? &g->pad64 : &g->pad_big) += 1;
	if (rec > SHM_ZERO_AHEAD)
		g->big_records++;
	assert_ptr_equal(f, g->data + (g->w.pos & g->mask) + 8);
	flit_frame_begin(f, FLIT_FT_DATA, 0, SESSION, seq);
	uint8_t *p = flit_frame_put_hdr(f + FLIT_FRAME_HDR_LEN, TOPIC_IDX, len, false, 0);
	if (trap)
		fill_bait(g, p, g->w.pos + REC_OVERHEAD, len);
	else
		tl_fill(p, len, seq);
	*flen = flit_frame_end_msg(f, p, len);
	assert_int_equal(*flen, frame_need(len));
	return f;
}

/* Publish the frame build() made and remember it. */
static void publish(struct ring *g, uint64_t seq, uint32_t len, bool trap, uint32_t flen)
{
	uint64_t pos = g->w.pos;

	g->w.seq = seq + 1; /* the writer's next message, as shm.c counts */
	shm_wr_publish(&g->w, flen);
	assert_true(ld_tag(g, pos) == (pos | SHM_TAG_VALID));
	assert_true(atomic_load(&g->hdr->w.next_seq) == seq + 1);
	assert_true((atomic_load(&g->hdr->w.gen) & 1) == 0);
	assert_true(g->w.pos == pos + shm_rec_len(flen));
	assert_true(atomic_load(&g->hdr->w.tail) == g->w.pos);
	assert_true(atomic_load(&g->hdr->w.latest) == pos);
	/* the slot after the newest record always reads "not written" */
	assert_true(ld_tag(g, g->w.pos) == 0);
	log_add(&g->log, (struct rec){ .pos = pos, .seq = seq, .len = len, .trap = trap });
}

/* Write the next message (payload `len`); false if the ring is full. */
static bool put(struct ring *g, uint32_t len, bool trap)
{
	uint32_t flen;

	if (!build(g, g->seq, len, trap, &flen))
		return false;
	publish(g, g->seq++, len, trap, flen);
	return true;
}

struct rdr {
	struct shm_rd rd;
	uint8_t *scratch;
	size_t next; /* index in the ring's log of the next expected record */
	uint64_t lapped;
};

/* Claim reader slot i as shm.c does (bump the generation, mark it active)
 * and join at the writer's tail. */
static void rdr_join(struct rdr *x, struct ring *g, unsigned i, bool copy)
{
	struct shm_slot *s = shm_slot(g->mem, i);
	uint32_t st = atomic_load(&s->state);
	uint64_t seq = ~0ull;
	uint64_t pos = shm_rd_join(g->hdr, s, ((st + 0x100u) & ~0xffu) | SHM_SLOT_ACTIVE, &seq);

	memset(x, 0, sizeof(*x));
	assert_true(pos == atomic_load(&g->hdr->w.tail));
	assert_true(pos == g->w.pos);
	/* the snapshot names the message that will be at pos */
	assert_true(seq == g->seq);
	assert_int_equal(atomic_load(&s->state) & 0xff, SHM_SLOT_ACTIVE);
	assert_true(atomic_load(&s->pos) == pos);
	x->scratch = copy ? own_alloc(g->max_frame) : NULL;
	shm_rd_init(&x->rd, g->mem, s, x->scratch, copy, pos);
	x->next = g->log.n;
}

/* A reader without a slot (cannot write the file): copies, checks intent. */
static void rdr_passive(struct rdr *x, struct ring *g)
{
	uint64_t seq = ~0ull, pos = shm_rd_join(g->hdr, NULL, 0, &seq);

	memset(x, 0, sizeof(*x));
	assert_true(pos == g->w.pos);
	assert_true(seq == g->seq);
	x->scratch = own_alloc(g->max_frame);
	shm_rd_init(&x->rd, g->mem, NULL, x->scratch, true, pos);
	x->next = g->log.n;
}

/* Leave the slot as att_detach() does. */
static void rdr_leave(struct rdr *x)
{
	if (x->rd.slot) {
		uint32_t st = atomic_load(&x->rd.slot->state);
		atomic_store(&x->rd.slot->state, (st & ~0xffu) | SHM_SLOT_FREE);
	}
	own_free(x->scratch);
	x->scratch = NULL;
}

static void check_frame(const struct ring *g, const struct rdr *x, const void *frame,
			uint32_t flen, const struct rec *want)
{
	struct flit_frame_hdr h;
	struct flit_frame_iter it;
	struct flit_wmsg m = { 0 };
	static uint8_t exp[1 << 16]; /* above every max_frame used here */

	if (x->rd.copy)
		assert_ptr_equal(frame, x->scratch);
	else
		assert_ptr_equal(frame, g->data + (want->pos & g->mask) + 8);
	assert_int_equal(flen, frame_need(want->len));
	assert_int_equal(flit_frame_validate(frame, flen, &h), FLIT_FE_OK);
	assert_int_equal(h.len, flen);
	assert_int_equal(h.count, 1);
	assert_int_equal(h.session_id, SESSION);
	assert_true(h.seq == want->seq);
	flit_frame_iter_init(&it, frame, &h);
	assert_true(flit_frame_iter_next(&it, &m));
	assert_int_equal(m.topic, TOPIC_IDX);
	assert_int_equal(m.len, want->len);
	assert_true(want->len <= sizeof(exp));
	if (want->trap)
		fill_bait(g, exp, want->pos + REC_OVERHEAD, want->len);
	else
		tl_fill(exp, want->len, want->seq);
	assert_memory_equal(m.data, exp, want->len);
	assert_false(flit_frame_iter_next(&it, &m));
}

/* The next record must be the reader's next logged one, byte for byte. */
static void expect_frame(struct ring *g, struct rdr *x)
{
	const void *f;
	uint32_t len;

	assert_true(x->next < g->log.n);
	assert_int_equal(shm_rd_next(&x->rd, &f, &len), SHM_RD_FRAME);
	check_frame(g, x, f, len, &g->log.v[x->next]);
	assert_true(x->rd.pos == g->log.v[x->next].pos + shm_rec_len(len));
	x->next++;
}

/* Read everything published so far; the reader ends at the writer. */
static void drain(struct ring *g, struct rdr *x)
{
	const void *f;
	uint32_t len;
	enum shm_rd_res res;

	while (x->next < g->log.n)
		expect_frame(g, x);
	res = shm_rd_next(&x->rd, &f, &len);
	assert_int_equal(res, SHM_RD_NONE);
	assert_true(x->rd.pos == g->w.pos);
	shm_rd_commit(&x->rd);
}

/* ---- position arithmetic ----------------------------------------------- */

/* Several laps of records of varying sizes from `start`: records that end
 * exactly at the ring end, padding of 64 bytes and of more, records larger
 * than the zero-ahead window, a paced reader with a slot (reads in place)
 * and a passive copying reader, both checked frame by frame. */
static void run_laps(uint64_t cap, uint64_t start, unsigned laps, uint64_t seed)
{
	struct ring g;
	struct rdr a, b;
	struct rng r = { seed };

	ring_open(&g, cap, 2, FLIT_SHM_PACED, start);
	rdr_join(&a, &g, 1, false);
	rdr_passive(&b, &g);
	assert_true(a.rd.pos == start);

	for (unsigned i = 0; g.w.pos - start < laps * cap; i++) {
		uint64_t off = g.w.pos & g.mask, rem = cap - off;
		uint64_t maxrec = g.max_frame + 64;
		uint32_t len = (uint32_t)(rnd(&r) % (max_len(&g) + 1));

		/* near the end of the ring, pick what happens there */
		switch (rem <= maxrec ? rnd(&r) % 5 : 4) {
		case 0: /* end exactly at the ring end */
			len = len_for_rec(&g, rem, rnd(&r));
			break;
		case 1: /* too long for the rest: pad the rem bytes */
			if (rem + 64 <= maxrec)
				len = len_for_rec(&g, rem + 64 * (1 + rnd(&r) % ((maxrec - rem) / 64)),
						  rnd(&r));
			break;
		case 2: /* leave one line before the end: a 64-byte pad next */
			if (rem > 64)
				len = len_for_rec(&g, rem - 64, rnd(&r));
			break;
		default:
			if (i % 8 == 0)
				len = (uint32_t)(rnd(&r) % 25); /* one-line records */
			break;
		}
		if (!put(&g, len, false)) {
			/* the paced writer waits for reader a only */
			drain(&g, &a);
			drain(&g, &b);
			assert_true(put(&g, len, false));
		}
		if (rnd(&r) % 3 == 0) {
			drain(&g, &a);
			drain(&g, &b);
		}
	}
	drain(&g, &a);
	drain(&g, &b);
	assert_true(a.rd.pos == g.w.pos);
	assert_true(b.rd.pos == g.w.pos);
	assert_true(atomic_load(&g.hdr->w.tail) == g.w.pos);
	print_message("cap %llu from %#llx: %llu records, %llu end exactly at the end, "
		      "pads: %llu of 64 B, %llu larger; %llu records beyond the zero-ahead window\n",
		      (unsigned long long)cap, (unsigned long long)start,
		      (unsigned long long)g.log.n, (unsigned long long)g.exact_end,
		      (unsigned long long)g.pad64, (unsigned long long)g.pad_big,
		      (unsigned long long)g.big_records);
	assert_true(g.exact_end > 0);
	assert_true(g.pad64 > 0);
	assert_true(g.pad_big > 0);
	if (g.max_frame > SHM_ZERO_AHEAD)
		assert_true(g.big_records > 0);
	rdr_leave(&a);
	rdr_leave(&b);
	ring_close(&g);
}

static void positions_near_2_pow_63_and_2_pow_32_wrap_offsets_correctly(void **state)
{
	const uint64_t p32 = 1ull << 32, p63 = 1ull << 63;

	/* small ring, many laps across 2^32 */
	run_laps(4096, p32 - 3 * 4096 - 5 * 64, 100, 1);
	/* 2^32 is crossed mid-lap as well as at a lap boundary */
	run_laps(4096, p32 - 4096, 50, 2);
	/* positions with bit 63 set; 16 KiB frames exceed the zero-ahead window */
	run_laps(65536, p63 - 2 * 65536 - 3 * 64, 60, 3);
	run_laps(8192, p63 - 64, 60, 4);
}

/* ---- ring end ----------------------------------------------------------- */

static void record_ending_exactly_at_ring_end_and_pad_records(void **state)
{
	const uint64_t cap = 4096, s = 5 * cap;
	struct ring g;
	struct rdr a;
	const void *f;
	uint32_t len, flen;

	assert_true(shm_rec_len(24) == 64);
	assert_true(shm_rec_len(56) == 64);
	assert_true(shm_rec_len(57) == 128);
	ring_open(&g, cap, 1, FLIT_SHM_PACED, s);
	rdr_join(&a, &g, 0, false);

	/* three 1 KiB records, then a fourth that ends exactly at the end */
	for (int i = 0; i < 4; i++) {
		assert_true(put(&g, len_for_rec(&g, 1024, i * 8), false));
		expect_frame(&g, &a);
		shm_rd_commit(&a.rd);
	}
	assert_true(g.exact_end == 1);
	assert_true(g.pad64 + g.pad_big == 0);
	assert_true(ld_tag(&g, s + 3072) == ((s + 3072) | SHM_TAG_VALID));
	assert_true(g.w.pos == s + cap);
	assert_true(a.rd.pos == s + cap);
	/* the next lap starts at offset 0 with no padding */
	assert_true(put(&g, 0, false));
	assert_true(ld_tag(&g, s + cap) == ((s + cap) | SHM_TAG_VALID));
	drain(&g, &a);

	/* up to one line before the end, then a two-line record: a 64-byte pad */
	for (int i = 0; i < 3; i++) {
		assert_true(put(&g, len_for_rec(&g, 1024, 0), false));
		drain(&g, &a);
	}
	assert_true(put(&g, len_for_rec(&g, 896, 0), false));
	drain(&g, &a);
	assert_true(g.w.pos == s + 2 * cap - 64);
	assert_true(put(&g, len_for_rec(&g, 128, 3), false));
	assert_true(g.pad64 == 1);
	assert_true(ld_tag(&g, s + 2 * cap - 64) ==
		    ((s + 2 * cap - 64) | SHM_TAG_VALID | SHM_TAG_PAD));
	assert_true(ld_tag(&g, s + 2 * cap) == ((s + 2 * cap) | SHM_TAG_VALID));
	assert_true(g.w.pos == s + 2 * cap + 128);
	/* one call skips the padding and returns the frame after it */
	expect_frame(&g, &a);
	drain(&g, &a);

	/* a large pad (896 bytes), and the largest record (max_frame) */
	for (int i = 0; i < 3; i++) {
		assert_true(put(&g, len_for_rec(&g, 1024, 0), false));
		drain(&g, &a);
	}
	assert_true((g.w.pos & g.mask) == 3200);
	assert_true(put(&g, max_len(&g), false));
	assert_true(g.pad_big == 1);
	assert_true(ld_tag(&g, s + 3 * cap - 896) ==
		    ((s + 3 * cap - 896) | SHM_TAG_VALID | SHM_TAG_PAD));
	assert_true(g.w.pos == s + 3 * cap + g.max_frame + 64);
	drain(&g, &a);

	/* padding is published by reserve, before the frame after it: the
	 * reader skips it and waits at the start of the next lap */
	while ((g.w.pos & g.mask) + 1024 <= cap) {
		assert_true(put(&g, len_for_rec(&g, 512, 0), false));
		drain(&g, &a);
	}
	uint64_t padpos = g.w.pos;
	uint8_t *fr = build(&g, g.seq, len_for_rec(&g, 1024, 0), false, &flen);
	assert_non_null(fr);
	assert_true(ld_tag(&g, padpos) == (padpos | SHM_TAG_VALID | SHM_TAG_PAD));
	assert_int_equal(shm_rd_next(&a.rd, &f, &len), SHM_RD_NONE);
	assert_true(a.rd.pos == (padpos | g.mask) + 1);
	assert_int_equal(shm_rd_next(&a.rd, &f, &len), SHM_RD_NONE);
	publish(&g, g.seq, len_for_rec(&g, 1024, 0), false, flen);
	g.seq++;
	drain(&g, &a);
	rdr_leave(&a);
	ring_close(&g);
}

/* ---- paced writer ------------------------------------------------------- */

static uint64_t slot_min(const struct ring *g)
{
	uint64_t min = g->w.pos;

	for (uint32_t i = 0; i < g->hdr->geom.max_readers; i++) {
		struct shm_slot *s = shm_slot(g->mem, i);
		if ((atomic_load(&s->state) & 0xff) == SHM_SLOT_ACTIVE && atomic_load(&s->pos) < min)
			min = atomic_load(&s->pos);
	}
	return min;
}

/* Would a record for `len` fit by the paced rule (padding included)? */
static bool fits(const struct ring *g, uint32_t len)
{
	uint64_t off = g->w.pos & g->mask, rec = shm_rec_len(frame_need(len));
	uint64_t pad = off + rec > g->cap ? g->cap - off : 0;

	return g->w.pos + pad + rec + 8 <= slot_min(g) + g->cap;
}

static void paced_writer_stops_at_slowest_reader_and_resumes_when_it_advances(void **state)
{
	const uint64_t cap = 4096, s = 1ull << 40;
	struct ring g;
	struct rdr a, b;
	struct rng r = { 77 };
	uint64_t refused = 0;

	ring_open(&g, cap, 4, FLIT_SHM_PACED, s);
	rdr_join(&a, &g, 0, false);

	/* one-line records: 63 fit (63 * 64 + 8 <= cap), the 64th would
	 * overwrite the tag slot of the unread record at s */
	for (int i = 0; i < 63; i++)
		assert_true(put(&g, 24, false));
	assert_false(put(&g, 24, false));
	assert_false(put(&g, 0, false));
	assert_true(g.w.pos == s + 63 * 64);
	/* reading without committing makes no room: the frame may be in use */
	expect_frame(&g, &a);
	assert_false(put(&g, 0, false));
	shm_rd_commit(&a.rd);
	assert_true(put(&g, 24, false));
	assert_false(put(&g, 0, false));

	/* a second reader: the writer waits for the slower of the two */
	drain(&g, &a);
	rdr_join(&b, &g, 3, false);
	for (int i = 0; i < 63; i++)
		assert_true(put(&g, 8, false));
	assert_false(put(&g, 8, false));
	drain(&g, &a); /* the faster one alone changes nothing */
	assert_false(put(&g, 8, false));
	expect_frame(&g, &b);
	expect_frame(&g, &b);
	shm_rd_commit(&b.rd);
	assert_true(put(&g, 8, false));
	assert_true(put(&g, 8, false));
	assert_false(put(&g, 8, false));
	drain(&g, &a);
	drain(&g, &b);

	/* random sizes: reserve refuses exactly when the record (with its pad
	 * and the next tag slot) would reach unread bytes of a slot */
	for (int i = 0; i < 20000; i++) {
		uint32_t len = (uint32_t)(rnd(&r) % (max_len(&g) + 1));
		bool want = fits(&g, len);

		assert_int_equal(put(&g, len, false), want);
		if (!want) {
			refused++;
			/* readers advance by a random number of records */
			struct rdr *x = rnd(&r) & 1 ? &a : &b;
			for (int k = (int)(rnd(&r) % 4); k >= 0 && x->next < g.log.n; k--)
				expect_frame(&g, x);
			shm_rd_commit(&x->rd);
		}
	}
	assert_true(refused > 1000);
	drain(&g, &a);
	drain(&g, &b);
	rdr_leave(&a);
	rdr_leave(&b);
	ring_close(&g);
}

static void free_or_evicted_slot_does_not_hold_the_writer(void **state)
{
	const uint64_t cap = 4096, s = 1ull << 40;
	struct ring g;
	struct rdr a, b, c;

	/* every slot is free (state 0, position 0, far behind the start) */
	ring_open(&g, cap, 4, FLIT_SHM_PACED, s);
	for (int i = 0; i < 200; i++)
		assert_true(put(&g, 500, false));
	assert_true(g.w.pos > s + 10 * cap);

	/* a reader that left: its slot keeps its old position, state free */
	rdr_join(&a, &g, 2, false);
	assert_true(put(&g, 500, false));
	rdr_leave(&a);
	assert_true(atomic_load(&shm_slot(g.mem, 2)->pos) < g.w.pos);
	for (int i = 0; i < 200; i++)
		assert_true(put(&g, 500, false));

	/* a reader evicted while holding the writer back (as evict_dead()
	 * does: CAS the state word to free, keeping the generation) */
	rdr_join(&b, &g, 1, false);
	rdr_join(&c, &g, 3, false);
	while (put(&g, 300, false))
		;
	drain(&g, &c);
	assert_false(put(&g, 300, false));
	uint32_t st = atomic_load(&b.rd.slot->state);
	assert_int_equal(st & 0xff, SHM_SLOT_ACTIVE);
	assert_true(atomic_compare_exchange_strong(&b.rd.slot->state, &st,
						   (st & ~0xffu) | SHM_SLOT_FREE));
	assert_true(put(&g, 300, false));
	/* ...and only the remaining reader holds it from now on */
	while (put(&g, 300, false))
		;
	assert_false(fits(&g, 300));
	assert_true(slot_min(&g) == c.rd.pos);
	drain(&g, &c);
	assert_true(put(&g, 300, false));
	own_free(b.scratch);
	rdr_leave(&c);
	ring_close(&g);
}

static void joining_reader_starts_at_tail_and_sees_only_new_records(void **state)
{
	const uint64_t cap = 8192, s = 3 * 64;
	struct ring g;
	struct rdr a, b;
	const void *f;
	uint32_t len, flen;

	ring_open(&g, cap, 2, FLIT_SHM_PACED, s);
	for (int i = 0; i < 100; i++)
		assert_true(put(&g, (uint32_t)(i * 37 % 1500), false));
	assert_true(g.w.pos > s + 3 * cap);

	rdr_join(&a, &g, 0, false);
	assert_true(a.rd.pos == g.w.pos);
	assert_true(atomic_load(&a.rd.slot->pos) == g.w.pos);
	assert_int_equal(shm_rd_next(&a.rd, &f, &len), SHM_RD_NONE);
	for (int i = 0; i < 5; i++)
		assert_true(put(&g, 100 + i, false));
	for (int i = 0; i < 5; i++) {
		expect_frame(&g, &a);
		assert_true(g.log.v[a.next - 1].seq == 100u + i);
	}
	drain(&g, &a);

	/* joining while a frame is being written: the reader starts at that
	 * frame, which is not yet visible */
	uint8_t *fr = build(&g, g.seq, 64, false, &flen);
	assert_non_null(fr);
	rdr_join(&b, &g, 1, false);
	assert_true(b.rd.pos == g.w.pos);
	assert_int_equal(shm_rd_next(&b.rd, &f, &len), SHM_RD_NONE);
	publish(&g, g.seq, 64, false, flen);
	g.seq++;
	b.next = g.log.n - 1;
	expect_frame(&g, &b);
	assert_true(g.log.v[b.next - 1].seq == 105);

	/* the writer's limit, cached before b joined, still keeps b's records:
	 * fill until refused, then b reads every one of them intact */
	drain(&g, &a);
	while (put(&g, 700, false))
		drain(&g, &a);
	drain(&g, &b);
	drain(&g, &a);
	rdr_leave(&a);
	rdr_leave(&b);
	ring_close(&g);
}

/* ---- stale bytes -------------------------------------------------------- */

/* Every payload word holds the tag a record one or two laps later would
 * carry at that position (frame or pad).  Records vary in size, so on the
 * next lap tag slots land inside old payloads.  A reader that is caught up,
 * or is at the writer's position while the writer fills its next frame, must
 * see "nothing new" every time: that is what the zero-ahead window and the
 * cleared next tag slot guarantee. */
static void stale_bytes_from_an_older_lap_never_pass_for_a_tag(void **state)
{
	struct rng r = { 4242 };
	uint64_t armed = 0;

	for (int ringno = 0; ringno < 2; ringno++) {
		const uint64_t cap = ringno ? 4096 : 16384;
		const uint64_t s = ringno ? (1ull << 63) - 7 * 64 : 11 * cap + 64;
		struct ring g;
		struct rdr a, p;
		const void *f;
		uint32_t len, flen;

		ring_open(&g, cap, 1, FLIT_SHM_PACED, s);
		rdr_join(&a, &g, 0, false);
		rdr_passive(&p, &g);
		for (int i = 0; g.w.pos - s < 40 * cap; i++) {
			uint32_t l = (uint32_t)(rnd(&r) % (max_len(&g) + 1));
			if (i % 3 == 0)
				l = (uint32_t)(rnd(&r) % 200);
			uint8_t *fr = build(&g, g.seq, l, true, &flen);
			if (!fr) {
				/* held by reader a: it reads everything */
				drain(&g, &a);
				drain(&g, &p);
				continue;
			}
			/* the frame is written but not published: a reader that
			 * catches up stops at the writer, whatever lies there */
			if (rnd(&r) % 4 == 0) {
				while (a.next < g.log.n)
					expect_frame(&g, &a);
				assert_int_equal(shm_rd_next(&a.rd, &f, &len), SHM_RD_NONE);
				assert_true(a.rd.pos == g.w.pos);
				assert_int_equal(shm_rd_next(&a.rd, &f, &len), SHM_RD_NONE);
				while (p.next < g.log.n)
					expect_frame(&g, &p);
				assert_int_equal(shm_rd_next(&p.rd, &f, &len), SHM_RD_NONE);
				assert_true(p.rd.pos == g.w.pos);
				shm_rd_commit(&a.rd);
			}
			publish(&g, g.seq, l, true, flen);
			g.seq++;
			/* bait armed beyond the zeroed window: the next lap's tag
			 * value sits there, one lap early */
			for (uint64_t x = (g.w.zeroed + 63) & ~63ull; x < g.w.zeroed + 4096 &&
			     x < slot_min(&g) + cap; x += 64)
				if (ld_tag(&g, x) == (x | SHM_TAG_VALID) ||
				    ld_tag(&g, x) == (x | SHM_TAG_VALID | SHM_TAG_PAD))
					armed++;
			if (rnd(&r) % 4 == 0) {
				drain(&g, &a);
				drain(&g, &p);
			}
		}
		drain(&g, &a);
		drain(&g, &p);
		rdr_leave(&a);
		rdr_leave(&p);
		ring_close(&g);
	}
	/* the bait really was in place where a tag would be read next lap */
	print_message("stale tags in place beyond the zeroed window: %llu\n",
		      (unsigned long long)armed);
	assert_true(armed > 1000);
}

/* ---- overwrite mode ----------------------------------------------------- */

/* Read with a copying reader: frames must be the logged ones in order; a
 * lap resumes at the newest record. */
static enum shm_rd_res ow_next(struct ring *g, struct rdr *x)
{
	const void *f;
	uint32_t len;
	uint64_t p = x->rd.pos;
	enum shm_rd_res res = shm_rd_next(&x->rd, &f, &len);

	switch (res) {
	case SHM_RD_FRAME:
		assert_true(x->next < g->log.n);
		check_frame(g, x, f, len, &g->log.v[x->next]);
		x->next++;
		break;
	case SHM_RD_LAPPED:
		x->lapped++;
		/* the writer announced bytes of the record the reader was at */
		assert_true(atomic_load(&g->hdr->w.intent) > p + g->cap);
		assert_true(x->rd.pos == atomic_load(&g->hdr->w.latest));
		assert_true(x->rd.pos > p);
		/* resume at the newest record */
		x->next = g->log.n - 1;
		assert_true(g->log.v[x->next].pos == x->rd.pos);
		break;
	case SHM_RD_NONE:
		assert_true(x->rd.pos == g->w.pos);
		break;
	default:
		fail_msg("unexpected result %d at %llu", res, (unsigned long long)p);
	}
	return res;
}

static void overwrite_reader_detects_lap_and_resumes_at_latest(void **state)
{
	const uint64_t cap = 4096, s = (1ull << 32) - 64 * 40;
	struct ring g;
	struct rdr a, p;
	struct rng r = { 99 };

	ring_open(&g, cap, 2, FLIT_SHM_OVERWRITE, s);
	rdr_join(&a, &g, 0, true);   /* a slot, but overwrite writers never wait */
	rdr_passive(&p, &g);

	/* less than a lap behind: every record arrives */
	for (int i = 0; i < 16; i++)
		assert_true(put(&g, 24, false));
	assert_true(atomic_load(&g.hdr->w.intent) <= s + cap);
	for (int i = 0; i < 16; i++)
		assert_int_equal(ow_next(&g, &a), SHM_RD_FRAME);
	assert_int_equal(ow_next(&g, &a), SHM_RD_NONE);

	/* the writer never refuses, whatever the readers do */
	for (int i = 0; i < 200; i++)
		assert_true(put(&g, (uint32_t)(i * 13 % 900), false));
	assert_int_equal(ow_next(&g, &a), SHM_RD_LAPPED);
	assert_int_equal(ow_next(&g, &a), SHM_RD_FRAME);
	assert_true(g.log.v[a.next - 1].seq == g.seq - 1);
	assert_int_equal(ow_next(&g, &a), SHM_RD_NONE);
	assert_int_equal(ow_next(&g, &p), SHM_RD_LAPPED);
	assert_int_equal(ow_next(&g, &p), SHM_RD_FRAME);
	assert_int_equal(ow_next(&g, &p), SHM_RD_NONE);
	for (int i = 0; i < 5; i++)
		assert_true(put(&g, 100, false));
	for (int i = 0; i < 5; i++) {
		assert_int_equal(ow_next(&g, &a), SHM_RD_FRAME);
		assert_int_equal(ow_next(&g, &p), SHM_RD_FRAME);
	}

	/* random interleaving: what is delivered is intact and in order, and
	 * a lap is reported only when the writer announced the reader's bytes */
	uint64_t frames = 0;
	for (int i = 0; i < 20000; i++) {
		for (int k = (int)(rnd(&r) % 8); k >= 0; k--)
			assert_true(put(&g, (uint32_t)(rnd(&r) % (max_len(&g) + 1)), false));
		for (int k = (int)(rnd(&r) % 8); k >= 0; k--) {
			enum shm_rd_res res = ow_next(&g, &a);
			frames += res == SHM_RD_FRAME;
			if (res == SHM_RD_NONE)
				break;
		}
	}
	assert_true(a.lapped > 100);
	assert_true(frames > 1000);
	while (ow_next(&g, &a) != SHM_RD_NONE)
		;

	/* the record's bytes are intact, but the writer has announced that it
	 * is about to overwrite them: a copy made now may be torn */
	assert_true(put(&g, 40, false));
	assert_true(put(&g, 40, false));
	uint64_t at = a.rd.pos;
	atomic_store(&g.hdr->w.intent, at + cap + 8);
	assert_true(ld_tag(&g, at) == (at | SHM_TAG_VALID));
	assert_int_equal(ow_next(&g, &a), SHM_RD_LAPPED);
	assert_int_equal(ow_next(&g, &a), SHM_RD_FRAME);
	assert_true(g.log.v[a.next - 1].pos == at + shm_rec_len(frame_need(40)));
	/* ...while intent == at + cap exactly is not a lap */
	assert_true(put(&g, 40, false));
	at = a.rd.pos;
	atomic_store(&g.hdr->w.intent, at + cap);
	assert_int_equal(ow_next(&g, &a), SHM_RD_FRAME);
	rdr_leave(&a);
	rdr_leave(&p);
	ring_close(&g);
}

/* ---- impossible records ------------------------------------------------- */

static void impossible_frame_length_is_reported_corrupt(void **state)
{
	const uint64_t cap = 4096;
	const uint32_t bad[] = { 0, 8, 16, 23, 28, 60, 1024 + 8, 4096, 0x7ffffff8u, 0xfffffff8u };
	struct ring g;
	const void *f;
	uint32_t len;

	for (int copy = 0; copy < 2; copy++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]) + 1; i++) {
			/* last case: a valid length that runs past the ring's end */
			bool straddle = i == sizeof(bad) / sizeof(bad[0]);
			uint64_t s = straddle ? 9 * cap - 256 : 9 * cap + 128;
			uint32_t flen = straddle ? 512 : bad[i];
			struct rdr x;
			uint8_t *rec;

			ring_open(&g, cap, 1, copy ? FLIT_SHM_OVERWRITE : FLIT_SHM_PACED, s);
			if (copy)
				rdr_passive(&x, &g);
			else
				rdr_join(&x, &g, 0, false);
			rec = g.data + (s & g.mask);
			flit_frame_begin(rec + 8, FLIT_FT_DATA, 0, SESSION, 0);
			flit_st32(rec + 16, flen);
			atomic_store((_Atomic uint64_t *)rec, s | SHM_TAG_VALID);
			assert_int_equal(shm_rd_next(&x.rd, &f, &len), SHM_RD_CORRUPT);
			assert_true(x.rd.pos == s);
			/* and again: the reader does not move past it */
			assert_int_equal(shm_rd_next(&x.rd, &f, &len), SHM_RD_CORRUPT);
			if (copy) {
				/* a copying reader that was lapped meanwhile was
				 * looking at a record being overwritten */
				atomic_store(&g.hdr->w.intent, s + cap + 64);
				assert_int_equal(shm_rd_next(&x.rd, &f, &len), SHM_RD_LAPPED);
			}
			rdr_leave(&x);
			ring_close(&g);
		}
	}
}

/* ---- header validation -------------------------------------------------- */

struct geom_case {
	const char *what;
	int err;
	const char *msg;  /* expected in flit_errmsg() */
	bool keep_check;  /* do not recompute the check value */
	void (*mutate)(struct shm_geom *g, uint64_t *size);
};

static void m_magic(struct shm_geom *g, uint64_t *sz) { g->magic ^= 1; }
static void m_version(struct shm_geom *g, uint64_t *sz) { g->version = 3; }
static void m_version1(struct shm_geom *g, uint64_t *sz) { g->version = 1; }
static void m_names_no_table(struct shm_geom *g, uint64_t *sz) { g->names_size = 4096; }
static void m_table_off(struct shm_geom *g, uint64_t *sz)
{
	g->topics_max = 16;
	g->names_size = 4096;
	g->table_off = g->hdr_size + g->capacity + 64;
	*sz += shm_table_size(16, 4096, 16);
}
static void m_topics_max(struct shm_geom *g, uint64_t *sz)
{
	g->topics_max = SHM_TOPICS_MAX + 1;
	g->names_size = 4096;
	g->table_off = g->hdr_size + g->capacity;
	*sz += shm_table_size(SHM_TOPICS_MAX + 1, 4096, 16);
}
static void m_names_align(struct shm_geom *g, uint64_t *sz)
{
	g->topics_max = 16;
	g->names_size = 4100;
	g->table_off = g->hdr_size + g->capacity;
	*sz += shm_table_size(16, 4100, 16);
}
static void m_table_short(struct shm_geom *g, uint64_t *sz)
{
	g->topics_max = 16;
	g->names_size = 4096;
	g->table_off = g->hdr_size + g->capacity;
	*sz += shm_table_size(16, 4096, 16) - 4096;
}
static void m_version0(struct shm_geom *g, uint64_t *sz) { g->version = 0; }
static void m_check(struct shm_geom *g, uint64_t *sz) { g->session_id ^= 0x100; }
static void m_check_topic(struct shm_geom *g, uint64_t *sz) { g->topic[200] = 'x'; }
static void m_cap_pow2(struct shm_geom *g, uint64_t *sz) { g->capacity = 3 * 4096; }
static void m_cap_small(struct shm_geom *g, uint64_t *sz) { g->capacity = 2048; *sz = g->hdr_size + 2048; }
static void m_cap_big(struct shm_geom *g, uint64_t *sz) { g->capacity = 1ull << 31; }
static void m_cap_zero(struct shm_geom *g, uint64_t *sz) { g->capacity = 0; }
static void m_readers0(struct shm_geom *g, uint64_t *sz) { g->max_readers = 0; }
static void m_readers_max(struct shm_geom *g, uint64_t *sz) { g->max_readers = SHM_READERS_MAX + 1; }
static void m_hdr_size(struct shm_geom *g, uint64_t *sz) { g->hdr_size += 4096; }
static void m_hdr_size_readers(struct shm_geom *g, uint64_t *sz) { g->max_readers = 200; }
static void m_frame_small(struct shm_geom *g, uint64_t *sz) { g->max_frame = 56; }
static void m_frame_big(struct shm_geom *g, uint64_t *sz) { g->max_frame = g->capacity / 4 + 8; }
static void m_frame_align(struct shm_geom *g, uint64_t *sz) { g->max_frame = 1020; }
static void m_mode(struct shm_geom *g, uint64_t *sz) { g->mode = FLIT_SHM_OVERWRITE + 1; }
static void m_topic_len0(struct shm_geom *g, uint64_t *sz) { g->topic_len = 0; }
static void m_topic_len_big(struct shm_geom *g, uint64_t *sz) { g->topic_len = sizeof(g->topic); }
static void m_topic_len_off(struct shm_geom *g, uint64_t *sz) { g->topic_len = 3; }
static void m_topic_nonul(struct shm_geom *g, uint64_t *sz)
{
	memset(g->topic, 'a', sizeof(g->topic));
	g->topic_len = sizeof(g->topic) - 1;
}
static void m_size_short(struct shm_geom *g, uint64_t *sz) { *sz -= 4096; }
static void m_size_long(struct shm_geom *g, uint64_t *sz) { *sz += 1; }
static void m_size_tiny(struct shm_geom *g, uint64_t *sz) { *sz = SHM_SLOTS_OFF - 8; }

static void ring_validate_rejects_each_bad_geometry(void **state)
{
	static const struct geom_case cases[] = {
		{ "magic", EBADMSG, "bad magic", true, m_magic },
		{ "newer version", EPROTO, "version 3, this library reads 2", false, m_version },
		{ "older version (one ring a topic, no table)", EPROTO, "version 1", false, m_version1 },
		{ "names without a table", EBADMSG, "table of no topics", false, m_names_no_table },
		{ "table not after the ring", EBADMSG, "bad topic table", false, m_table_off },
		{ "table of too many topics", EBADMSG, "bad topic table (65537", false, m_topics_max },
		{ "names area unaligned", EBADMSG, "bad topic table", false, m_names_align },
		{ "file shorter than the table", EBADMSG, "truncated", false, m_table_short },
		{ "version 0", EPROTO, "version 0", true, m_version0 },
		{ "check value", EBADMSG, "check value", true, m_check },
		{ "check value (topic)", EBADMSG, "check value", true, m_check_topic },
		{ "capacity not a power of two", EBADMSG, "bad capacity 12288", false, m_cap_pow2 },
		{ "capacity too small", EBADMSG, "bad capacity 2048", false, m_cap_small },
		{ "capacity too large", EBADMSG, "bad capacity", false, m_cap_big },
		{ "capacity zero", EBADMSG, "bad capacity 0", false, m_cap_zero },
		{ "no readers", EBADMSG, "reader table", false, m_readers0 },
		{ "too many readers", EBADMSG, "reader table", false, m_readers_max },
		{ "hdr_size", EBADMSG, "reader table", false, m_hdr_size },
		{ "readers disagree with hdr_size", EBADMSG, "reader table", false, m_hdr_size_readers },
		{ "max_frame too small", EBADMSG, "max frame 56", false, m_frame_small },
		{ "max_frame above cap/4", EBADMSG, "max frame", false, m_frame_big },
		{ "max_frame unaligned", EBADMSG, "max frame 1020", false, m_frame_align },
		{ "mode", EBADMSG, "unknown mode 2", false, m_mode },
		{ "topic_len 0", EBADMSG, "topic", false, m_topic_len0 },
		{ "topic_len 256", EBADMSG, "topic", false, m_topic_len_big },
		{ "topic_len before the NUL", EBADMSG, "topic", false, m_topic_len_off },
		{ "topic not NUL-terminated", EBADMSG, "topic", false, m_topic_nonul },
		{ "file shorter than the geometry", EBADMSG, "truncated", false, m_size_short },
		{ "file longer than the geometry", EBADMSG, "truncated", false, m_size_long },
		{ "file shorter than a header", EBADMSG, "too short", false, m_size_tiny },
	};
	const uint64_t cap = 16384;
	const uint32_t readers = 16;
	uint64_t size = shm_hdr_size(readers) + cap;
	void *mem = NULL;
	struct shm_hdr *h;
	struct shm_geom good;

	mem = own_alloc(size);
	h = mem;
	assert_int_equal(shm_ring_init(mem, cap, readers, FLIT_SHM_PACED, SESSION, "t.geom", 0), 0);
	assert_int_equal(shm_ring_validate(mem, size), 0);
	assert_int_equal(h->geom.hdr_size, 4096);
	assert_int_equal(h->geom.max_frame, cap / 4);
	good = h->geom;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct geom_case *c = &cases[i];
		uint64_t sz = size;

		h->geom = good;
		c->mutate(&h->geom, &sz);
		if (!c->keep_check)
			h->geom.check = shm_geom_check(&h->geom);
		int rc = shm_ring_validate(mem, sz);
		if (rc != -c->err || !strstr(flit_errmsg(), c->msg))
			fail_msg("%s: got %d (%s), want %d with \"%s\"", c->what, rc,
				 flit_errmsg(), -c->err, c->msg);
	}
	/* the good header still passes, and the other modes are accepted */
	h->geom = good;
	assert_int_equal(shm_ring_validate(mem, size), 0);
	h->geom.mode = FLIT_SHM_OVERWRITE;
	h->geom.check = shm_geom_check(&h->geom);
	assert_int_equal(shm_ring_validate(mem, size), 0);

	/* init refuses what validate would refuse */
	assert_int_equal(shm_ring_init(mem, 3 * 4096, readers, 0, 1, "t", 0), -EINVAL);
	assert_int_equal(shm_ring_init(mem, 2048, readers, 0, 1, "t", 0), -EINVAL);
	assert_int_equal(shm_ring_init(mem, cap, 0, 0, 1, "t", 0), -EINVAL);
	assert_int_equal(shm_ring_init(mem, cap, SHM_READERS_MAX + 1, 0, 1, "t", 0), -EINVAL);
	assert_int_equal(shm_ring_init(mem, cap, readers, 0, 1, "t", 8), -EINVAL);
	char longtopic[300];
	memset(longtopic, 'a', sizeof(longtopic) - 1);
	longtopic[sizeof(longtopic) - 1] = 0;
	assert_int_equal(shm_ring_init(mem, cap, readers, 0, 1, longtopic, 0), -EINVAL);
	own_free(mem);
}

/* ---- two threads -------------------------------------------------------- */

#define STRESS_CAP   (64 * 1024)
#define STRESS_MAXP  2000u
#define STRESS_SECS  60

/* tl_fill()'s pattern from a table: payload byte i >= 8 of seq is
 * (seq * 31 + i) & 0xff, i.e. ramp[(seq * 31 + 8) & 0xff + i - 8] */
static uint8_t ramp[256 + STRESS_MAXP];

static uint32_t stress_len(uint64_t seq)
{
	return 1 + (uint32_t)(mix64(seq) % STRESS_MAXP);
}

static void ramp_fill(uint8_t *p, uint32_t len, uint64_t seq)
{
	for (uint32_t i = 0; i < len && i < 8; i++)
		p[i] = (uint8_t)(seq >> (8 * i));
	if (len > 8)
		memcpy(p + 8, ramp + ((seq * 31 + 8) & 0xff), len - 8);
}

static bool ramp_check(const uint8_t *p, uint32_t len, uint64_t seq)
{
	for (uint32_t i = 0; i < len && i < 8; i++)
		if (p[i] != (uint8_t)(seq >> (8 * i)))
			return false;
	return len <= 8 || !memcmp(p + 8, ramp + ((seq * 31 + 8) & 0xff), len - 8);
}

/* Bait for the threaded case: every word holds the tag of the position one
 * lap later, so any stale word read as the next tag slot passes for one. */
static void fill_bait1(const struct ring *g, uint8_t *p, uint64_t pos, uint32_t len)
{
	for (uint32_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v = (pos + i + g->cap) | SHM_TAG_VALID;
		memcpy(p + i, &v, 8);
	}
}

static bool check_bait1(const struct ring *g, const uint8_t *p, uint64_t pos, uint32_t len)
{
	for (uint32_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v;
		memcpy(&v, p + i, 8);
		if (v != ((pos + i + g->cap) | SHM_TAG_VALID))
			return false;
	}
	return true;
}

/* Half small records, half larger than the zero-ahead window. */
static uint32_t bait_len(const struct ring *g, uint64_t seq)
{
	uint64_t h = mix64(seq ^ 0x5a5a);

	if (h & 1)
		return (uint32_t)((h >> 8) % 200);
	return (uint32_t)(SHM_ZERO_AHEAD / 2 + (h >> 8) % (max_len(g) - SHM_ZERO_AHEAD / 2));
}

struct stress {
	struct ring *g;
	struct shm_rd rd;
	bool bait;       /* payloads are stale-tag bait, not tl_fill() */
	uint64_t count;
	uint64_t deadline_ms;
	_Atomic int stop;
	/* results */
	uint64_t written, got, full, idle;
	char werr[160], rerr[160];
};

static void backoff(unsigned *spins)
{
	if (++*spins % 64 == 0)
		sched_yield();
}

static void *stress_writer(void *arg)
{
	struct stress *t = arg;
	struct shm_wr *w = &t->g->w;

	for (uint64_t seq = 0; seq < t->count; seq++) {
		uint32_t len = t->bait ? bait_len(t->g, seq) : stress_len(seq), flen;
		unsigned spins = 0;
		uint8_t *f;

		while (!(f = shm_wr_reserve(w, frame_need(len)))) {
			t->full++;
			backoff(&spins);
			if (atomic_load_explicit(&t->stop, memory_order_relaxed))
				return NULL;
			if (spins % 4096 == 0 && tl_now_ms() > t->deadline_ms) {
				snprintf(t->werr, sizeof(t->werr), "writer stuck at seq %llu",
					 (unsigned long long)seq);
				atomic_store(&t->stop, 1);
				return NULL;
			}
		}
		flit_frame_begin(f, FLIT_FT_DATA, 0, SESSION, seq);
		uint8_t *p = flit_frame_put_hdr(f + FLIT_FRAME_HDR_LEN, TOPIC_IDX, len, false, 0);
		if (t->bait)
			fill_bait1(t->g, p, w->pos + REC_OVERHEAD, len);
		else
			ramp_fill(p, len, seq);
		flen = flit_frame_end_msg(f, p, len);
		w->seq = seq + 1;
		shm_wr_publish(w, flen);
		t->written++;
	}
	return NULL;
}

/* Check the frame of record `seq` that the reader found at `pos`. */
static bool stress_check(struct stress *t, const void *f, uint32_t flen, uint64_t pos,
			 uint64_t seq)
{
	struct flit_frame_hdr h;
	struct flit_frame_iter it;
	struct flit_wmsg m = { 0 };

	if (flit_frame_validate(f, flen, &h) != FLIT_FE_OK || h.seq != seq ||
	    h.count != 1 || h.session_id != SESSION)
		return false;
	flit_frame_iter_init(&it, f, &h);
	if (!flit_frame_iter_next(&it, &m))
		return false;
	if (t->bait)
		return m.len == bait_len(t->g, seq) &&
		       check_bait1(t->g, m.data, pos + REC_OVERHEAD, m.len);
	return m.len == stress_len(seq) && ramp_check(m.data, m.len, seq);
}

static void *stress_reader(void *arg)
{
	struct stress *t = arg;
	unsigned spins = 0, batch = 0;
	/* A frame is checked only after the next call: the reader looks at the
	 * following tag slot as soon as it can, racing the writer's clearing
	 * of it.  The frame stays valid until the position is committed. */
	const void *pf = NULL;
	uint32_t plen = 0;
	uint64_t ppos = 0, pseq = 0;

	for (;;) {
		const void *f;
		uint32_t flen;
		enum shm_rd_res res = shm_rd_next(&t->rd, &f, &flen);

		if (pf) {
			if (!stress_check(t, pf, plen, ppos, pseq)) {
				snprintf(t->rerr, sizeof(t->rerr),
					 "record %llu at %#llx: bad frame or payload (frame seq %llu)",
					 (unsigned long long)pseq, (unsigned long long)ppos,
					 plen >= 24 ? (unsigned long long)flit_ld64((const uint8_t *)pf + 16)
						    : 0ull);
				atomic_store(&t->stop, 1);
				return NULL;
			}
			pf = NULL;
			t->got++;
			/* publish the position every few records, as a poll would */
			if (++batch == 16) {
				/* not past a frame still to be checked */
				uint64_t keep = t->rd.pos;
				if (res == SHM_RD_FRAME)
					t->rd.pos = keep - shm_rec_len(flen);
				shm_rd_commit(&t->rd);
				t->rd.pos = keep;
				batch = 0;
			}
		}
		if (t->got == t->count && res == SHM_RD_NONE)
			break;
		if (res == SHM_RD_FRAME) {
			if (t->got >= t->count) {
				snprintf(t->rerr, sizeof(t->rerr), "a record after the last one");
				atomic_store(&t->stop, 1);
				return NULL;
			}
			pf = f;
			plen = flen;
			ppos = t->rd.pos - shm_rec_len(flen);
			pseq = t->got;
			spins = 0;
			continue;
		}
		if (res != SHM_RD_NONE) {
			snprintf(t->rerr, sizeof(t->rerr), "record %llu: result %d",
				 (unsigned long long)t->got, res);
			atomic_store(&t->stop, 1);
			return NULL;
		}
		shm_rd_commit(&t->rd);
		batch = 0;
		t->idle++;
		backoff(&spins);
		if (atomic_load_explicit(&t->stop, memory_order_relaxed))
			return NULL;
		if (spins % 4096 == 0 && tl_now_ms() > t->deadline_ms) {
			snprintf(t->rerr, sizeof(t->rerr), "reader stuck after %llu records",
				 (unsigned long long)t->got);
			atomic_store(&t->stop, 1);
			return NULL;
		}
	}
	shm_rd_commit(&t->rd);
	return NULL;
}

/* One writer thread, one reader thread with a slot, on a paced ring. */
static void run_stress(struct stress *t, uint64_t cap, uint64_t start)
{
	struct ring g;
	pthread_t wt, rt;
	const void *f;
	uint32_t len;

	t->deadline_ms = tl_now_ms() + STRESS_SECS * 1000;
	ring_open(&g, cap, 2, FLIT_SHM_PACED, start);
	t->g = &g;
	struct shm_slot *s = shm_slot(g.mem, 1);
	uint64_t seq0;
	uint64_t pos = shm_rd_join(g.hdr, s, 0x100u | SHM_SLOT_ACTIVE, &seq0);

	assert_true(pos == start && seq0 == 0);
	shm_rd_init(&t->rd, g.mem, s, NULL, false, pos);

	assert_int_equal(pthread_create(&rt, NULL, stress_reader, t), 0);
	assert_int_equal(pthread_create(&wt, NULL, stress_writer, t), 0);
	pthread_join(wt, NULL);
	pthread_join(rt, NULL);
	if (t->werr[0] || t->rerr[0])
		fail_msg("%s %s", t->werr, t->rerr);
	assert_true(t->written == t->count);
	assert_true(t->got == t->count);
	assert_int_equal(shm_rd_next(&t->rd, &f, &len), SHM_RD_NONE);
	assert_true(t->rd.pos == g.w.pos);
	/* many laps, and the writer had to wait for the reader */
	assert_true(g.w.pos - start > 1000 * cap);
	print_message("%s: %llu records, %llu MiB, writer refused %llu times, reader idle %llu\n",
		      t->bait ? "bait" : "stress", (unsigned long long)t->got,
		      (unsigned long long)((g.w.pos - start) >> 20),
		      (unsigned long long)t->full, (unsigned long long)t->idle);
	ring_close(&g);
}

static void threaded_stress_delivers_every_record_once_in_order_byte_exact(void **state)
{
	struct stress t;
	uint8_t a[STRESS_MAXP], b[STRESS_MAXP];

	for (size_t i = 0; i < sizeof(ramp); i++)
		ramp[i] = (uint8_t)i;
	for (uint64_t seq = 0; seq < 300; seq += 7) { /* same bytes as tl_fill() */
		tl_fill(a, stress_len(seq), seq);
		ramp_fill(b, stress_len(seq), seq);
		assert_memory_equal(a, b, stress_len(seq));
		assert_true(ramp_check(a, stress_len(seq), seq));
	}
	memset(&t, 0, sizeof(t));
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	t.count = 500000; /* instrumented: same shape, fewer records (time) */
#else
	t.count = 2000000;
#endif
	run_stress(&t, STRESS_CAP, (1ull << 32) - 8 * STRESS_CAP);
}

/* The stale-bytes case with a reader thread spinning at the writer's
 * position: every payload word is the tag its position gets one lap later,
 * and half the records are longer than the zero-ahead window, so the tag
 * slot after them is cleared only by the publish itself, in the instant
 * before the tag is released. */
static void stale_bytes_never_pass_for_a_tag_under_a_concurrent_reader(void **state)
{
	struct stress t;

	memset(&t, 0, sizeof(t));
	t.bait = true;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	t.count = 50000;
#else
	t.count = 200000;
#endif
	run_stress(&t, 16384, (1ull << 63) - 3 * 16384 + 64);
}

/* Readers join while the writer runs (nothing else holds it back): the
 * (position, seq) snapshot names the first record the reader then finds,
 * and the records from there on are intact although the writer's cached
 * limit may predate the join (the Dekker pairing in shm_rd_join()). */
struct runner {
	struct ring *g;
	_Atomic int stop;
	uint64_t written;
};

static void *run_writer(void *arg)
{
	struct runner *t = arg;
	struct shm_wr *w = &t->g->w;

	for (uint64_t seq = 0; !atomic_load_explicit(&t->stop, memory_order_relaxed); seq++) {
		uint32_t len = stress_len(seq) / 4, flen;
		uint8_t *f;

		while (!(f = shm_wr_reserve(w, frame_need(len))))
			if (atomic_load_explicit(&t->stop, memory_order_relaxed))
				return NULL;
		flit_frame_begin(f, FLIT_FT_DATA, 0, SESSION, seq);
		uint8_t *p = flit_frame_put_hdr(f + FLIT_FRAME_HDR_LEN, TOPIC_IDX, len, false, 0);
		ramp_fill(p, len, seq);
		flen = flit_frame_end_msg(f, p, len);
		w->seq = seq + 1;
		shm_wr_publish(w, flen);
		t->written++;
	}
	return NULL;
}

/* Spin (bounded) for the next result other than NONE. */
static enum shm_rd_res next_spin(struct shm_rd *rd, const void **f, uint32_t *len)
{
	enum shm_rd_res res = SHM_RD_NONE;
	uint64_t end = tl_now_ms() + 5000;

	for (unsigned i = 0; res == SHM_RD_NONE; i++) {
		res = shm_rd_next(rd, f, len);
		if (res == SHM_RD_NONE && i % 1024 == 1023) {
			sched_yield();
			if (tl_now_ms() > end)
				break;
		}
	}
	return res;
}

static void join_snapshot_names_the_first_record_while_the_writer_runs(void **state)
{
	struct ring g;
	struct runner t = { .g = &g };
	pthread_t th;
	uint8_t *scratch;
	unsigned joins = 0, passive_laps = 0;
	uint64_t end;
	char err[200] = "";

	for (size_t i = 0; i < sizeof(ramp); i++)
		ramp[i] = (uint8_t)i;
	ring_open(&g, 65536, 4, FLIT_SHM_PACED, (1ull << 32) - 4 * 65536);
	scratch = own_alloc(g.max_frame);
	assert_int_equal(pthread_create(&th, NULL, run_writer, &t), 0);
	end = tl_now_ms() + 1500;
	for (unsigned k = 0; k < 3000 && tl_now_ms() < end && !err[0]; k++) {
		struct shm_slot *sl = shm_slot(g.mem, k % 4);
		uint32_t st = atomic_load(&sl->state);
		bool passive = k % 5 == 4;
		uint64_t seq0 = ~0ull, pos;
		struct shm_rd rd;
		const void *f;
		uint32_t len;

		if (passive)
			pos = shm_rd_join(g.hdr, NULL, 0, &seq0);
		else
			pos = shm_rd_join(g.hdr, sl, ((st + 0x100u) & ~0xffu) | SHM_SLOT_ACTIVE, &seq0);
		shm_rd_init(&rd, g.mem, passive ? NULL : sl, passive ? scratch : NULL, passive, pos);
		/* no assertion while the writer runs: note the failure, stop */
		for (uint64_t seq = seq0; seq < seq0 + 20 && !err[0]; seq++) {
			enum shm_rd_res res = next_spin(&rd, &f, &len);
			struct flit_frame_hdr h;
			struct flit_frame_iter it;
			struct flit_wmsg m = { 0 };

			if (passive && res == SHM_RD_LAPPED) {
				passive_laps++;
				break;
			}
			if (res != SHM_RD_FRAME || flit_frame_validate(f, len, &h) != FLIT_FE_OK)
				snprintf(err, sizeof(err), "join %u at %#llx (seq %llu): result %d or bad frame",
					 k, (unsigned long long)pos, (unsigned long long)seq0, res);
			else if (h.seq != seq)
				snprintf(err, sizeof(err),
					 "join %u at %#llx: snapshot seq %llu, record %llu has seq %llu",
					 k, (unsigned long long)pos, (unsigned long long)seq0,
					 (unsigned long long)(seq - seq0), (unsigned long long)h.seq);
			else if ((flit_frame_iter_init(&it, f, &h), !flit_frame_iter_next(&it, &m)) ||
				 m.len != stress_len(seq) / 4 || !ramp_check(m.data, m.len, seq))
				snprintf(err, sizeof(err), "join %u: record seq %llu is damaged",
					 k, (unsigned long long)seq);
			/* slowly, so that the writer catches up with us */
			if (seq % 4 == 0)
				shm_rd_commit(&rd);
		}
		if (!passive) {
			st = atomic_load(&sl->state);
			atomic_store(&sl->state, (st & ~0xffu) | SHM_SLOT_FREE);
		}
		joins++;
	}
	atomic_store(&t.stop, 1);
	pthread_join(th, NULL);
	if (err[0])
		fail_msg("%s", err);
	print_message("joins: %u (%u passive readers lapped), writer wrote %llu records\n",
		      joins, passive_laps, (unsigned long long)t.written);
	assert_true(joins >= 100);
	own_free(scratch);
	ring_close(&g);
}

/* A writer preempted inside its (tail, next_seq) update — after next_seq,
 * before tail, as shm_wr_state() orders the stores — for a few ms, which a
 * busy 2-CPU machine does routinely.  A reader joining meanwhile must still
 * get a matching pair: either both old or both new.  (The writer's half
 * update is replayed by hand; a second thread completes it 20 ms later.) */
struct stall {
	struct ring *g;
	uint64_t tail;
	unsigned ms;
};

static void *finish_update(void *arg)
{
	struct stall *s = arg;
	struct shm_wr *w = &s->g->w;

	usleep(s->ms * 1000);
	atomic_store_explicit(&w->hdr->w.tail, s->tail, memory_order_relaxed);
	atomic_store_explicit(&w->hdr->w.gen, ++w->gen, memory_order_release);
	return NULL;
}

static void join_snapshot_is_consistent_when_the_writer_stalls_mid_update(void **state)
{
	struct ring g;
	struct stall st = { .g = &g, .ms = 20 };
	pthread_t th;
	uint32_t flen;
	uint64_t seq = ~0ull, pos, t0;

	ring_open(&g, 4096, 2, FLIT_SHM_PACED, 1ull << 20);
	for (int i = 0; i < 10; i++)
		assert_true(put(&g, 100, false));
	/* message 10: written, its tag released; then the header update
	 * stops half-way (what shm_wr_publish() does, store by store) */
	uint64_t p = g.w.pos;
	assert_non_null(build(&g, 10, 100, false, &flen));
	atomic_store((_Atomic uint64_t *)(g.data + (p & g.mask)), p | SHM_TAG_VALID);
	atomic_store_explicit(&g.hdr->w.gen, ++g.w.gen, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&g.hdr->w.latest, p, memory_order_relaxed);
	atomic_store_explicit(&g.hdr->w.next_seq, 11, memory_order_relaxed);
	st.tail = p + shm_rec_len(flen);
	assert_int_equal(pthread_create(&th, NULL, finish_update, &st), 0);

	t0 = tl_now_ms();
	pos = shm_rd_join(g.hdr, shm_slot(g.mem, 0), 0x100u | SHM_SLOT_ACTIVE, &seq);
	uint64_t waited = tl_now_ms() - t0;
	pthread_join(th, NULL);
	print_message("join returned (%#llx, seq %llu) after %llu ms; consistent pairs: "
		      "(%#llx, 10) or (%#llx, 11)\n", (unsigned long long)pos,
		      (unsigned long long)seq, (unsigned long long)waited,
		      (unsigned long long)p, (unsigned long long)st.tail);
	assert_true((pos == p && seq == 10) || (pos == st.tail && seq == 11));
	ring_close(&g);
}

/* A session ring's table: topics added in order, each name and first
 * position read back; ends in the order they came; a full table or names
 * area refuses the next topic; a damaged entry is refused, not read out of
 * bounds. */
static void session_table_names_topics_ends_them_and_refuses_damage(void **state)
{
	const uint64_t cap = 16384;
	const uint32_t readers = 4, tmax = 512, names = 4096;
	uint64_t size = shm_hdr_size(readers) + cap + shm_table_size(tmax, names, readers);
	void *mem = own_alloc(size);
	struct shm_hdr *h = mem;
	char name[FLIT_TOPIC_MAX + 1], want[64];
	uint64_t first, created;
	struct shm_ended e;

	(void)state;
	assert_int_equal(shm_ring_init_session(mem, cap, readers, FLIT_SHM_PACED, SESSION, "md.a",
					       0, names), -EINVAL);
	assert_int_equal(shm_ring_init_session(mem, cap, readers, FLIT_SHM_PACED, SESSION, "md.a",
					       SHM_TOPICS_MAX + 1, names), -EINVAL);
	assert_int_equal(shm_ring_init_session(mem, cap, readers, FLIT_SHM_PACED, SESSION, "md.a",
					       tmax, names), 0);
	assert_int_equal(shm_ring_validate(mem, size), 0);
	assert_int_equal(shm_ring_validate(mem, size - 4096), -EBADMSG);
	for (int i = 0; i < 10; i++) {
		snprintf(want, sizeof(want), "md.sym%05d", i);
		assert_int_equal(shm_ring_topic_add(mem, want, 64u * (unsigned)i, 1000u + (unsigned)i), i);
	}
	assert_int_equal(atomic_load(&h->tl.ntopics), 10);
	for (int i = 0; i < 10; i++) {
		snprintf(want, sizeof(want), "md.sym%05d", i);
		assert_int_equal(shm_ring_topic_get(mem, &h->geom, (uint32_t)i, name, sizeof(name), &first, &created), 0);
		assert_string_equal(name, want);
		assert_int_equal(first, 64u * (unsigned)i);
		assert_int_equal(created, 1000u + (unsigned)i);
	}
	shm_ring_topic_end(mem, 7, 4096, 12);
	shm_ring_topic_end(mem, 2, 8192, 0);
	assert_int_equal(atomic_load(&h->tl.nended), 2);
	assert_int_equal(shm_ring_ended_get(mem, &h->geom, 0, &e), 0);
	assert_true(e.idx == 7 && e.end_pos == 4096 && e.final == 12);
	assert_int_equal(shm_ring_ended_get(mem, &h->geom, 1, &e), 0);
	assert_true(e.idx == 2 && e.end_pos == 8192 && e.final == 0);

	/* damage: a name running past the area, a name without its NUL, an
	 * invalid topic name, an ended entry naming no topic of the table */
	struct shm_topic_ent *ent = shm_topic_ents(mem);
	struct shm_topic_ent keep = ent[3];
	ent[3].name_off = names - 4;
	assert_int_equal(shm_ring_topic_get(mem, &h->geom, 3, name, sizeof(name), &first, &created), -EBADMSG);
	assert_non_null(strstr(flit_errmsg(), "bad name"));
	ent[3] = keep;
	ent[3].name_len = 3; /* "md." then not a NUL */
	assert_int_equal(shm_ring_topic_get(mem, &h->geom, 3, name, sizeof(name), &first, &created), -EBADMSG);
	ent[3] = keep;
	shm_names(mem)[ent[3].name_off] = '\x01';
	assert_int_equal(shm_ring_topic_get(mem, &h->geom, 3, name, sizeof(name), &first, &created), -EBADMSG);
	assert_non_null(strstr(flit_errmsg(), "not a valid topic name"));
	assert_int_equal(shm_ring_topic_get(mem, &h->geom, tmax, name, sizeof(name), &first, &created), -EBADMSG);
	shm_ended_log(mem)[1].idx = tmax;
	assert_int_equal(shm_ring_ended_get(mem, &h->geom, 1, &e), -EBADMSG);
	assert_int_equal(shm_ring_ended_get(mem, &h->geom, tmax, &e), -EBADMSG);

	/* the names area fills before the table: 4096 bytes of 16-byte names */
	int n = 10;
	for (;; n++) {
		snprintf(want, sizeof(want), "md.sym%05d", n);
		if (shm_ring_topic_add(mem, want, 0, 0) < 0)
			break;
	}
	assert_int_equal(n, names / 16);
	assert_int_equal(shm_ring_topic_add(mem, "x", 0, 0), -ENOSPC);
	own_free(mem);
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, free_owned)
	const struct CMUnitTest tests[] = {
		T(positions_near_2_pow_63_and_2_pow_32_wrap_offsets_correctly),
		T(record_ending_exactly_at_ring_end_and_pad_records),
		T(paced_writer_stops_at_slowest_reader_and_resumes_when_it_advances),
		T(free_or_evicted_slot_does_not_hold_the_writer),
		T(joining_reader_starts_at_tail_and_sees_only_new_records),
		T(stale_bytes_from_an_older_lap_never_pass_for_a_tag),
		T(overwrite_reader_detects_lap_and_resumes_at_latest),
		T(impossible_frame_length_is_reported_corrupt),
		T(ring_validate_rejects_each_bad_geometry),
		T(session_table_names_topics_ends_them_and_refuses_damage),
		T(threaded_stress_delivers_every_record_once_in_order_byte_exact),
		T(stale_bytes_never_pass_for_a_tag_under_a_concurrent_reader),
		T(join_snapshot_names_the_first_record_while_the_writer_runs),
		T(join_snapshot_is_consistent_when_the_writer_stalls_mid_update),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
