// SPDX-License-Identifier: BSD-2-Clause
/*
 * Wire codec tests: flit_frame_encode() / the inline builders,
 * flit_frame_validate() and the frame iterator.
 *
 * Every malformed shape is checked against the exact enum flit_frame_err the
 * validator must return, in the order docs/PROTOCOL.md ("What a receiver
 * checks") gives.  The golden tests pin the bytes of the worked examples in
 * docs/PROTOCOL.md, so the document and the code cannot drift apart.
 *
 * Payloads carry their sequence number in a checkable pattern (pat()), so a
 * message delivered with the wrong seq, the wrong offset or a torn copy is
 * caught byte by byte.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec.h"

#define SESSION 0x1a2b3c4du
#define MAXN    128

/* Offsets inside a frame header (docs/PROTOCOL.md, "Frame header"). */
#define OFF_MAGIC   0
#define OFF_VERSION 2
#define OFF_TYPE    3
#define OFF_FLAGS   4
#define OFF_COUNT   6
#define OFF_LEN     8

/* Payload byte j of the message with sequence number seq. */
static uint8_t pat(uint64_t seq, size_t j)
{
	return (uint8_t)(seq * 131u + j * 7u + 1u);
}

/* A batch of messages to encode, with payloads that follow pat(). */
struct batch {
	unsigned n;
	uint64_t seq;
	uint32_t topics[MAXN];
	uint32_t lens[MAXN];
	uint64_t ts[MAXN];
	uint8_t *data[MAXN];
	const void *payloads[MAXN];
};

static void batch_init(struct batch *b, uint64_t seq, unsigned n,
		       const uint32_t *lens)
{
	assert_true(n <= MAXN);
	memset(b, 0, sizeof(*b));
	b->n = n;
	b->seq = seq;
	for (unsigned i = 0; i < n; i++) {
		b->topics[i] = 100u + i * 3u;
		b->lens[i] = lens[i];
		b->ts[i] = 1700000000000000000ull + i * 1000u + 7u;
		b->data[i] = malloc(lens[i] ? lens[i] : 1);
		assert_non_null(b->data[i]);
		for (uint32_t j = 0; j < lens[i]; j++)
			b->data[i][j] = pat(seq + i, j);
		b->payloads[i] = b->data[i];
	}
}

static void batch_free(struct batch *b)
{
	for (unsigned i = 0; i < b->n; i++)
		free(b->data[i]);
}

static size_t batch_wire_len(const struct batch *b, bool ts)
{
	size_t n = FLIT_FRAME_HDR_LEN;
	for (unsigned i = 0; i < b->n; i++)
		n += flit_msg_wire_len(b->lens[i], ts);
	return n;
}

/* Encode b into a fresh buffer of exactly the frame's size (so ASan sees any
 * write past it).  Passes the ts array even without FLIT_FF_TS: it must then
 * be ignored. */
static uint8_t *batch_encode(const struct batch *b, uint16_t flags,
			     size_t *flen)
{
	size_t want = batch_wire_len(b, flags & FLIT_FF_TS);
	uint8_t *f = malloc(want);
	assert_non_null(f);
	size_t n = flit_frame_encode(f, want, flags, SESSION, b->seq, b->n,
				     b->topics, b->payloads, b->lens, b->ts);
	assert_int_equal(n, want);
	*flen = n;
	return f;
}

/* Validate and walk f, comparing every field and payload byte with b, and
 * check that every padding byte is zero. */
static void check_frame(const uint8_t *f, size_t flen, uint16_t flags,
			const struct batch *b)
{
	struct flit_frame_hdr h;
	bool ts = flags & FLIT_FF_TS;

	assert_int_equal(flit_frame_validate(f, flen, &h), FLIT_FE_OK);
	assert_int_equal(h.version, FLIT_WIRE_VERSION);
	assert_int_equal(h.type, FLIT_FT_DATA);
	assert_int_equal(h.flags, flags);
	assert_int_equal(h.count, b->n);
	assert_int_equal(h.len, flen);
	assert_int_equal(h.session_id, SESSION);
	assert_int_equal(h.seq, b->seq);

	struct flit_frame_iter it;
	struct flit_wmsg m;
	unsigned i = 0;
	size_t off = FLIT_FRAME_HDR_LEN;

	flit_frame_iter_init(&it, f, &h);
	while (flit_frame_iter_next(&it, &m)) {
		assert_true(i < b->n);
		assert_int_equal(m.topic, b->topics[i]);
		assert_int_equal(m.len, b->lens[i]);
		assert_int_equal(m.seq, b->seq + i);
		assert_int_equal(m.ts, ts ? b->ts[i] : 0);
		assert_ptr_equal(m.data, f + off + FLIT_MSG_HDR_LEN +
					 (ts ? FLIT_MSG_TS_LEN : 0));
		for (uint32_t j = 0; j < m.len; j++)
			if (m.data[j] != pat(b->seq + i, j))
				fail_msg("msg %u byte %u: %#x, want %#x", i, j,
					 m.data[j], pat(b->seq + i, j));
		for (size_t j = m.len; j < flit_align8(m.len); j++)
			if (m.data[j] != 0)
				fail_msg("msg %u padding byte %zu is %#x", i, j,
					 m.data[j]);
		off += flit_msg_wire_len(m.len, ts);
		i++;
	}
	assert_int_equal(i, b->n);
	assert_int_equal(off, flen);
	assert_ptr_equal(it.p, f + flen);
	assert_false(flit_frame_iter_next(&it, &m));
}

static void round_trip(uint16_t flags, uint64_t seq, unsigned n,
		       const uint32_t *lens)
{
	struct batch b;
	size_t flen;

	batch_init(&b, seq, n, lens);
	uint8_t *f = batch_encode(&b, flags, &flen);
	check_frame(f, flen, flags, &b);
	free(f);
	batch_free(&b);
}

static const uint32_t mixed_lens[] = { 0, 1, 7, 8, 9, 70000, 15, 16, 17, 0, 3 };
#define N_MIXED (sizeof(mixed_lens) / sizeof(mixed_lens[0]))

/* ---- round trips --------------------------------------------------------- */

static void one_message_round_trips(void **state)
{
	const uint32_t lens[] = { 5 };
	round_trip(0, 1, 1, lens);
}

static void one_message_with_timestamp_round_trips(void **state)
{
	const uint32_t lens[] = { 5 };
	round_trip(FLIT_FF_TS, 1, 1, lens);
}

static void batch_of_mixed_lengths_round_trips(void **state)
{
	round_trip(0, 5000, N_MIXED, mixed_lens);
}

static void batch_of_mixed_lengths_with_timestamps_round_trips(void **state)
{
	round_trip(FLIT_FF_TS, 5000, N_MIXED, mixed_lens);
}

static void largest_message_round_trips(void **state)
{
	const uint32_t lens[] = { 3, FLIT_MSG_LEN_MAX, 0 };
	round_trip(FLIT_FF_TS, 77, 3, lens);
}

static void frame_of_only_empty_messages_round_trips(void **state)
{
	uint32_t lens[MAXN] = { 0 };
	round_trip(0, 9, MAXN, lens);
}

/* A DATA frame with no message is well formed: 24 bytes, count 0. */
static void empty_frame_is_accepted(void **state)
{
	/* Larger than the frame only because gcc -O2 -Warray-bounds cannot see
	 * that the iterator below reads nothing. */
	uint8_t f[64];
	struct flit_frame_hdr h;

	assert_int_equal(flit_frame_encode(f, FLIT_FRAME_HDR_LEN, 0, SESSION, 3,
					   0, NULL, NULL, NULL, NULL),
			 FLIT_FRAME_HDR_LEN);
	assert_int_equal(flit_frame_validate(f, FLIT_FRAME_HDR_LEN, &h),
			 FLIT_FE_OK);
	assert_int_equal(h.count, 0);
	assert_int_equal(h.len, FLIT_FRAME_HDR_LEN);

	struct flit_frame_iter it;
	struct flit_wmsg m;
	flit_frame_iter_init(&it, f, &h);
	assert_false(flit_frame_iter_next(&it, &m));
}

static void iterator_yields_consecutive_sequence_numbers(void **state)
{
	uint32_t lens[MAXN];
	struct batch b;
	size_t flen;
	const uint64_t base = 0x0123456789abcdefull;

	for (unsigned i = 0; i < MAXN; i++)
		lens[i] = i % 11;
	batch_init(&b, base, MAXN, lens);
	uint8_t *f = batch_encode(&b, 0, &flen);

	struct flit_frame_hdr h;
	struct flit_frame_iter it;
	struct flit_wmsg m;
	uint64_t want = base;

	assert_int_equal(flit_frame_validate(f, flen, &h), FLIT_FE_OK);
	flit_frame_iter_init(&it, f, &h);
	while (flit_frame_iter_next(&it, &m))
		assert_int_equal(m.seq, want++);
	assert_int_equal(want, base + MAXN);
	free(f);
	batch_free(&b);
}

/* Without FLIT_FF_TS the encoder ignores the ts array and the iterator gives
 * ts 0; with it and no array, every timestamp is 0 on the wire. */
static void timestamps_only_travel_with_the_ts_flag(void **state)
{
	const uint32_t lens[] = { 4, 12 };
	struct batch b;
	uint8_t f[128];
	struct flit_frame_hdr h;
	struct flit_frame_iter it;
	struct flit_wmsg m;

	batch_init(&b, 1, 2, lens);
	size_t n = flit_frame_encode(f, sizeof(f), 0, SESSION, 1, 2, b.topics,
				     b.payloads, b.lens, b.ts);
	assert_int_equal(n, 24 + 16 + 24);
	assert_int_equal(flit_frame_validate(f, n, &h), FLIT_FE_OK);
	flit_frame_iter_init(&it, f, &h);
	while (flit_frame_iter_next(&it, &m))
		assert_int_equal(m.ts, 0);

	n = flit_frame_encode(f, sizeof(f), FLIT_FF_TS, SESSION, 1, 2, b.topics,
			      b.payloads, b.lens, NULL);
	assert_int_equal(n, 24 + 24 + 32);
	assert_int_equal(flit_frame_validate(f, n, &h), FLIT_FE_OK);
	assert_int_equal(flit_ld64(f + 24 + 8), 0);
	assert_int_equal(flit_ld64(f + 24 + 24 + 8), 0);
	flit_frame_iter_init(&it, f, &h);
	while (flit_frame_iter_next(&it, &m))
		assert_int_equal(m.ts, 0);
	batch_free(&b);
}

/* Padding is zero even when the buffer held garbage, and the encoder writes
 * nothing past the length it returns. */
static void encoder_zeroes_padding_and_stays_in_bounds(void **state)
{
	struct batch b;
	uint8_t *f = malloc(200000);

	assert_non_null(f);
	batch_init(&b, 42, N_MIXED, mixed_lens);
	for (int ts = 0; ts <= 1; ts++) {
		uint16_t flags = ts ? FLIT_FF_TS : 0;
		memset(f, 0xa5, 200000);
		size_t n = flit_frame_encode(f, 200000, flags, SESSION, 42, b.n,
					     b.topics, b.payloads, b.lens, b.ts);
		assert_int_equal(n, batch_wire_len(&b, ts));
		check_frame(f, n, flags, &b); /* checks the padding bytes */
		for (size_t j = n; j < 200000; j++)
			if (f[j] != 0xa5)
				fail_msg("byte %zu past the frame was written", j);
	}
	batch_free(&b);
	free(f);
}

/* The data-path builders (begin / put_hdr / end_msg) produce the same bytes
 * as flit_frame_encode(). */
static void inline_builders_match_encode(void **state)
{
	struct batch b;
	static uint8_t a[100000], c[100000];

	batch_init(&b, 900, N_MIXED, mixed_lens);
	for (int ts = 0; ts <= 1; ts++) {
		uint16_t flags = ts ? FLIT_FF_TS : 0;
		memset(a, 0x5a, sizeof(a));
		memset(c, 0x5a, sizeof(c));
		size_t n = flit_frame_encode(a, sizeof(a), flags, SESSION, 900,
					     b.n, b.topics, b.payloads, b.lens,
					     b.ts);
		assert_true(n > 0);

		uint8_t *m = c + FLIT_FRAME_HDR_LEN;
		uint32_t flen = FLIT_FRAME_HDR_LEN;
		flit_frame_begin(c, FLIT_FT_DATA, flags, SESSION, 900);
		for (unsigned i = 0; i < b.n; i++) {
			uint8_t *pl = flit_frame_put_hdr(m, b.topics[i], b.lens[i],
							 ts, b.ts[i]);
			memcpy(pl, b.data[i], b.lens[i]);
			flen = flit_frame_end_msg(c, pl, b.lens[i]);
			m = c + flen;
		}
		assert_int_equal(flen, n);
		assert_memory_equal(a, c, sizeof(a));
	}
	batch_free(&b);
}

/* ---- encoder refusals ---------------------------------------------------- */

static void encode_refuses_when_frame_does_not_fit(void **state)
{
	const uint32_t lens[] = { 0, 1, 7, 8, 9 };
	struct batch b;
	uint8_t f[256];

	batch_init(&b, 1, 5, lens);
	for (int ts = 0; ts <= 1; ts++) {
		uint16_t flags = ts ? FLIT_FF_TS : 0;
		size_t need = batch_wire_len(&b, ts);

		memset(f, 0xee, sizeof(f));
		assert_int_equal(flit_frame_encode(f, need - 1, flags, SESSION, 1,
						   b.n, b.topics, b.payloads,
						   b.lens, b.ts), 0);
		for (size_t j = 0; j < sizeof(f); j++)
			assert_int_equal(f[j], 0xee); /* untouched */
		assert_int_equal(flit_frame_encode(f, FLIT_FRAME_HDR_LEN - 1,
						   flags, SESSION, 1, 0, NULL,
						   NULL, NULL, NULL), 0);
		assert_int_equal(flit_frame_encode(f, need, flags, SESSION, 1,
						   b.n, b.topics, b.payloads,
						   b.lens, b.ts), need);
	}
	batch_free(&b);
}

static void encode_refuses_message_longer_than_24_bits(void **state)
{
	uint8_t f[64];
	uint32_t topic = 1;
	uint32_t len = FLIT_MSG_LEN_MAX + 1;
	const void *pl = NULL; /* must not be read */

	assert_int_equal(flit_frame_encode(f, sizeof(f), 0, SESSION, 1, 1, &topic,
					   &pl, &len, NULL), 0);
	len = UINT32_MAX;
	assert_int_equal(flit_frame_encode(f, sizeof(f), 0, SESSION, 1, 1, &topic,
					   &pl, &len, NULL), 0);
}

static void encode_takes_at_most_65535_messages(void **state)
{
	const unsigned n = 65536;
	uint32_t *topics = calloc(n, sizeof(*topics));
	uint32_t *lens = calloc(n, sizeof(*lens));
	const void **pls = calloc(n, sizeof(*pls));
	size_t cap = FLIT_FRAME_HDR_LEN + (size_t)n * FLIT_MSG_HDR_LEN;
	uint8_t *f = malloc(cap);
	struct flit_frame_hdr h;

	assert_non_null(topics);
	assert_non_null(lens);
	assert_non_null(pls);
	assert_non_null(f);
	assert_int_equal(flit_frame_encode(f, cap, 0, SESSION, 1, n, topics, pls,
					   lens, NULL), 0);
	size_t got = flit_frame_encode(f, cap, 0, SESSION, 1, n - 1, topics, pls,
				       lens, NULL);
	assert_int_equal(got, cap - FLIT_MSG_HDR_LEN);
	assert_int_equal(flit_frame_validate(f, got, &h), FLIT_FE_OK);
	assert_int_equal(h.count, 65535);
	free(f);
	free(pls);
	free(lens);
	free(topics);
}

/* ---- rejection of malformed frames --------------------------------------- */

/*
 * The frame most rejection tests start from: seq 10, no timestamps,
 *   24 header | msg0 @24: hdr 8 + "5 bytes"+3 pad | msg1 @40: hdr 8, len 0 |
 *   msg2 @48: hdr 8 + 9 bytes + 7 pad | end @72
 * placed in a buffer of BUFSZ bytes (the rest zero).
 */
#define BUFSZ   128
#define STD_LEN 72
#define MSG0 24
#define MSG1 40
#define MSG2 48

static void std_frame(uint8_t *buf, uint16_t flags)
{
	static const uint32_t lens[] = { 5, 0, 9 };
	struct batch b;

	batch_init(&b, 10, 3, lens);
	memset(buf, 0, BUFSZ);
	size_t n = flit_frame_encode(buf, BUFSZ, flags, SESSION, 10, 3, b.topics,
				     b.payloads, b.lens, b.ts);
	assert_int_equal(n, batch_wire_len(&b, flags & FLIT_FF_TS));
	batch_free(&b);
}

static void expect_err(const uint8_t *buf, size_t buflen,
		       enum flit_frame_err want)
{
	struct flit_frame_hdr h;
	enum flit_frame_err got = flit_frame_validate(buf, buflen, &h);

	if (got != want)
		fail_msg("validate: got %d (%s), want %d (%s)", got,
			 flit_frame_strerr(got), want, flit_frame_strerr(want));
}

static void std_frame_is_valid(void **state)
{
	uint8_t buf[BUFSZ];

	std_frame(buf, 0);
	expect_err(buf, STD_LEN, FLIT_FE_OK);
	/* bytes after the frame in the buffer are not part of it */
	expect_err(buf, BUFSZ, FLIT_FE_OK);
}

static void validate_rejects_buffer_shorter_than_header(void **state)
{
	uint8_t buf[BUFSZ];

	std_frame(buf, 0);
	for (size_t l = 0; l < FLIT_FRAME_HDR_LEN; l++)
		expect_err(buf, l, FLIT_FE_SHORT);
	expect_err(NULL, 0, FLIT_FE_SHORT);
}

static void validate_rejects_bad_magic(void **state)
{
	uint8_t buf[BUFSZ];

	std_frame(buf, 0);
	assert_int_equal(buf[0], 'F');
	assert_int_equal(buf[1], 'L');
	buf[0] = 'L';
	buf[1] = 'F'; /* byte-swapped: a big-endian writer */
	expect_err(buf, STD_LEN, FLIT_FE_MAGIC);
	for (int byte = 0; byte < 2; byte++)
		for (int bit = 0; bit < 8; bit++) {
			std_frame(buf, 0);
			buf[byte] ^= (uint8_t)(1u << bit);
			expect_err(buf, STD_LEN, FLIT_FE_MAGIC);
		}
}

static void validate_rejects_bad_version(void **state)
{
	static const uint8_t bad[] = { 0, 2, 3, 0x81, 0xff };
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < sizeof(bad); i++) {
		std_frame(buf, 0);
		buf[OFF_VERSION] = bad[i];
		expect_err(buf, STD_LEN, FLIT_FE_VERSION);
	}
}

static void validate_rejects_unknown_type(void **state)
{
	uint8_t buf[BUFSZ];

	for (unsigned t = 0; t < 256; t++) {
		if (t == FLIT_FT_DATA)
			continue;
		std_frame(buf, 0);
		buf[OFF_TYPE] = (uint8_t)t;
		expect_err(buf, STD_LEN, FLIT_FE_TYPE);
	}
}

static void validate_rejects_unknown_flags(void **state)
{
	uint8_t buf[BUFSZ];

	for (int bit = 0; bit < 16; bit++) {
		uint16_t f = (uint16_t)(1u << bit);
		if (f & FLIT_FF_KNOWN)
			continue;
		std_frame(buf, 0);
		flit_st16(buf + OFF_FLAGS, f);
		expect_err(buf, STD_LEN, FLIT_FE_FLAGS);
		std_frame(buf, FLIT_FF_TS);
		flit_st16(buf + OFF_FLAGS, f | FLIT_FF_TS);
		expect_err(buf, BUFSZ, FLIT_FE_FLAGS);
	}
	std_frame(buf, 0);
	flit_st16(buf + OFF_FLAGS, 0xffff);
	expect_err(buf, STD_LEN, FLIT_FE_FLAGS);
}

static void validate_rejects_unaligned_frame_length(void **state)
{
	uint8_t buf[BUFSZ];

	for (uint32_t l = STD_LEN + 1; l < STD_LEN + 8; l++) {
		std_frame(buf, 0);
		flit_st32(buf + OFF_LEN, l);
		expect_err(buf, BUFSZ, FLIT_FE_LEN);
	}
	std_frame(buf, 0);
	flit_st32(buf + OFF_LEN, FLIT_FRAME_HDR_LEN + 4);
	expect_err(buf, BUFSZ, FLIT_FE_LEN);
}

static void validate_rejects_frame_length_below_header(void **state)
{
	uint8_t buf[BUFSZ];

	for (uint32_t l = 0; l < FLIT_FRAME_HDR_LEN; l++) {
		std_frame(buf, 0);
		flit_st32(buf + OFF_LEN, l);
		expect_err(buf, BUFSZ, FLIT_FE_LEN);
	}
}

static void validate_rejects_frame_length_past_buffer(void **state)
{
	uint8_t buf[BUFSZ];

	std_frame(buf, 0);
	for (size_t l = FLIT_FRAME_HDR_LEN; l < STD_LEN; l++)
		expect_err(buf, l, FLIT_FE_LEN);
	flit_st32(buf + OFF_LEN, BUFSZ + 8);
	expect_err(buf, BUFSZ, FLIT_FE_LEN);
	flit_st32(buf + OFF_LEN, 0xfffffff8u);
	expect_err(buf, BUFSZ, FLIT_FE_LEN);
}

/* count larger than the messages present: the walk runs out of frame. */
static void validate_rejects_count_too_large(void **state)
{
	static const uint16_t bad[] = { 4, 5, 100, 0xffff };
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		std_frame(buf, 0);
		flit_st16(buf + OFF_COUNT, bad[i]);
		expect_err(buf, BUFSZ, FLIT_FE_COUNT);
	}
}

/* count smaller than the messages present: bytes remain after the last one. */
static void validate_rejects_count_too_small(void **state)
{
	uint8_t buf[BUFSZ];

	for (uint16_t c = 0; c < 3; c++) {
		std_frame(buf, 0);
		flit_st16(buf + OFF_COUNT, c);
		expect_err(buf, BUFSZ, FLIT_FE_COUNT);
		std_frame(buf, FLIT_FF_TS);
		flit_st16(buf + OFF_COUNT, c);
		expect_err(buf, BUFSZ, FLIT_FE_COUNT);
	}
	/* a frame of zero-filled bytes after a valid one also counts */
	std_frame(buf, 0);
	flit_st32(buf + OFF_LEN, STD_LEN + 8);
	expect_err(buf, BUFSZ, FLIT_FE_COUNT);
}

static void validate_rejects_message_running_past_frame(void **state)
{
	uint8_t buf[BUFSZ];

	/* last message: 9 -> 17 bytes needs 24, only 16 are left */
	std_frame(buf, 0);
	flit_st32(buf + MSG2 + 4, 17);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_LEN);

	/* first message claims the largest length */
	std_frame(buf, 0);
	flit_st32(buf + MSG0 + 4, FLIT_MSG_LEN_MAX);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_LEN);

	/* the empty message claims one byte past the frame end */
	std_frame(buf, 0);
	flit_st32(buf + MSG1 + 4, STD_LEN - MSG1 - 8 + 1);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_LEN);

	/* with timestamps (end 96): msg0 5 -> 57 needs 64, 56 are left */
	std_frame(buf, FLIT_FF_TS);
	flit_st32(buf + MSG0 + 4, 57);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_LEN);
}

/*
 * A length inside the frame but wrong shifts every later header: the walk
 * then reads payload as headers and ends off the frame's end.  That is a count
 * mismatch, not a message running past the frame.
 */
static void validate_rejects_shifted_message_boundaries(void **state)
{
	uint8_t buf[BUFSZ];

	/* msg0 5 -> 13 swallows msg1's header: 2 messages fill the frame, the
	 * third finds no room */
	std_frame(buf, 0);
	flit_st32(buf + MSG0 + 4, 13);
	expect_err(buf, BUFSZ, FLIT_FE_COUNT);
	/* msg0 5 -> 1 still pads to 8: the same frame, 4 payload bytes fewer */
	std_frame(buf, 0);
	flit_st32(buf + MSG0 + 4, 1);
	expect_err(buf, BUFSZ, FLIT_FE_OK);
}

static void validate_rejects_reserved_message_bits(void **state)
{
	uint8_t buf[BUFSZ];

	for (int bit = 24; bit < 32; bit++) {
		for (int msg = 0; msg < 3; msg++) {
			static const unsigned off[] = { MSG0, MSG1, MSG2 };
			static const uint32_t len[] = { 5, 0, 9 };
			std_frame(buf, 0);
			flit_st32(buf + off[msg] + 4, len[msg] | (1u << bit));
			expect_err(buf, BUFSZ, FLIT_FE_MSG_FLAGS);
		}
		std_frame(buf, FLIT_FF_TS);
		flit_st32(buf + MSG0 + 4, 5u | (1u << bit));
		expect_err(buf, BUFSZ, FLIT_FE_MSG_FLAGS);
	}
	std_frame(buf, 0);
	flit_st32(buf + MSG0 + 4, FLIT_MSG_LEN_MAX + 1);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_FLAGS);
}

static void validate_rejects_message_header_cut_in_the_middle(void **state)
{
	uint8_t buf[BUFSZ];

	/* With timestamps a message header is 16 bytes: a frame can end 8 bytes
	 * into one and still be aligned.  std_frame with ts: msg0 @24 (16+8),
	 * msg1 @48 (16), msg2 @64 (16+16), end 96. */
	std_frame(buf, FLIT_FF_TS);
	flit_st32(buf + OFF_LEN, 56); /* cut msg1's header after 8 bytes */
	expect_err(buf, BUFSZ, FLIT_FE_COUNT);
	flit_st32(buf + OFF_LEN, 72); /* cut msg2's header after 8 bytes */
	expect_err(buf, BUFSZ, FLIT_FE_COUNT);

	/* The first message's header cut: a frame of 32 bytes claiming one. */
	std_frame(buf, FLIT_FF_TS);
	flit_st16(buf + OFF_COUNT, 1);
	flit_st32(buf + OFF_LEN, 32);
	expect_err(buf, BUFSZ, FLIT_FE_COUNT);

	/* A buffer cut inside a header (the frame length still says 72). */
	std_frame(buf, 0);
	expect_err(buf, MSG2 + 4, FLIT_FE_LEN);
}

/* When several things are wrong, the first check in docs/PROTOCOL.md order
 * decides the reason. */
static void validate_checks_in_documented_order(void **state)
{
	uint8_t buf[BUFSZ];

	std_frame(buf, 0);
	buf[OFF_MAGIC] = 0;
	expect_err(buf, FLIT_FRAME_HDR_LEN - 1, FLIT_FE_SHORT);
	buf[OFF_VERSION] = 9;
	expect_err(buf, BUFSZ, FLIT_FE_MAGIC);
	buf[OFF_MAGIC] = 'F';
	buf[OFF_TYPE] = 9;
	expect_err(buf, BUFSZ, FLIT_FE_VERSION);
	buf[OFF_VERSION] = FLIT_WIRE_VERSION;
	flit_st16(buf + OFF_FLAGS, 0x8000);
	expect_err(buf, BUFSZ, FLIT_FE_TYPE);
	buf[OFF_TYPE] = FLIT_FT_DATA;
	flit_st32(buf + OFF_LEN, 1);
	expect_err(buf, BUFSZ, FLIT_FE_FLAGS);
	flit_st16(buf + OFF_FLAGS, 0);
	flit_st16(buf + OFF_COUNT, 9);
	expect_err(buf, BUFSZ, FLIT_FE_LEN);
	flit_st32(buf + OFF_LEN, STD_LEN);
	expect_err(buf, BUFSZ, FLIT_FE_COUNT);
	flit_st16(buf + OFF_COUNT, 3);
	expect_err(buf, BUFSZ, FLIT_FE_OK);

	/* within one message: reserved bits before the length */
	flit_st32(buf + MSG1 + 4, 0xffffffffu);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_FLAGS);
	/* a bad message stops the walk: later count problems are not seen */
	flit_st32(buf + MSG1 + 4, 0x00ffffffu);
	flit_st16(buf + OFF_COUNT, 2);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_LEN);
}

/* ---- bounds: never read past buflen ------------------------------------- */

struct guard {
	uint8_t *map;
	uint8_t *end; /* first byte of the PROT_NONE page */
	size_t pg;
};

static void guard_map(struct guard *g)
{
	g->pg = (size_t)sysconf(_SC_PAGESIZE);
	g->map = mmap(NULL, 2 * g->pg, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(g->map != MAP_FAILED);
	assert_int_equal(mprotect(g->map + g->pg, g->pg, PROT_NONE), 0);
	g->end = g->map + g->pg;
}

static void guard_unmap(struct guard *g)
{
	munmap(g->map, 2 * g->pg);
}

/* Copy frame[0..l) so that it ends right at the guard page. */
static uint8_t *guard_place(struct guard *g, const uint8_t *frame, size_t l)
{
	assert_true(l <= g->pg);
	memcpy(g->end - l, frame, l);
	return g->end - l;
}

static void validator_never_reads_past_buflen(void **state)
{
	static const uint32_t lens[] = { 0, 1, 7, 8, 9, 100, 3 };
	struct guard g;
	struct batch b;
	struct flit_frame_hdr h;

	guard_map(&g);
	batch_init(&b, 55, 7, lens);
	for (int ts = 0; ts <= 1; ts++) {
		uint16_t flags = ts ? FLIT_FF_TS : 0;
		size_t flen;
		uint8_t *f = batch_encode(&b, flags, &flen);
		uint8_t *p;

		/* The whole frame ending at the guard page: valid, and every
		 * payload byte up to the last one can be read. */
		p = guard_place(&g, f, flen);
		check_frame(p, flen, flags, &b);

		/* Every truncation: rejected, the header and its length check
		 * tell why. */
		for (size_t l = 0; l < flen; l++) {
			p = guard_place(&g, f, l);
			expect_err(p, l, l < FLIT_FRAME_HDR_LEN ? FLIT_FE_SHORT
								: FLIT_FE_LEN);
		}

		/* Every truncation whose header is made to agree (len = l): the
		 * message walk itself meets the end of the buffer. */
		for (size_t l = FLIT_FRAME_HDR_LEN; l < flen; l++) {
			p = guard_place(&g, f, l);
			flit_st32(p + OFF_LEN, (uint32_t)l);
			enum flit_frame_err e = flit_frame_validate(p, l, &h);
			if (l & 7)
				assert_int_equal(e, FLIT_FE_LEN);
			else if (e != FLIT_FE_COUNT && e != FLIT_FE_MSG_LEN)
				fail_msg("truncated to %zu: %s", l,
					 flit_frame_strerr(e));
		}

		/* A full frame at the guard whose count or last length lies. */
		p = guard_place(&g, f, flen);
		flit_st16(p + OFF_COUNT, 0xffff);
		expect_err(p, flen, FLIT_FE_COUNT);
		p = guard_place(&g, f, flen);
		flit_st32(p + flen - flit_msg_wire_len(3, ts) + 4, 9);
		expect_err(p, flen, FLIT_FE_MSG_LEN);
		free(f);
	}
	batch_free(&b);
	guard_unmap(&g);
}

/* ---- strings ------------------------------------------------------------- */

static void frame_strerr_names_every_code(void **state)
{
	for (int e = 0; e < FLIT_FE__MAX; e++) {
		const char *s = flit_frame_strerr((enum flit_frame_err)e);
		assert_non_null(s);
		assert_true(strlen(s) > 1);
		assert_string_not_equal(s, "?");
		for (int o = 0; o < e; o++)
			assert_string_not_equal(
				s, flit_frame_strerr((enum flit_frame_err)o));
	}
	assert_non_null(flit_frame_strerr(FLIT_FE__MAX));
	assert_non_null(flit_frame_strerr((enum flit_frame_err)-1));
	assert_non_null(flit_frame_strerr((enum flit_frame_err)1000));
}

/* ---- golden bytes: the worked examples of docs/PROTOCOL.md --------------- */

/* docs/PROTOCOL.md, "Worked example": flags TS, session 0x1a2b3c4d,
 * seq 1000, "hello" on topic 7 and "!" on topic 8. */
static const uint8_t golden_ts[72] = {
	/* frame header */
	0x46, 0x4c,                                     /* magic "FL" */
	0x01,                                           /* version 1 */
	0x01,                                           /* type DATA */
	0x01, 0x00,                                     /* flags: TS */
	0x02, 0x00,                                     /* count 2 */
	0x48, 0x00, 0x00, 0x00,                         /* len 72 */
	0x4d, 0x3c, 0x2b, 0x1a,                         /* session */
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 1000 */
	/* message 0, seq 1000 */
	0x07, 0x00, 0x00, 0x00,                         /* topic 7 */
	0x05, 0x00, 0x00, 0x00,                         /* len 5, flags 0 */
	0x15, 0xcd, 0x85, 0x3d, 0xfe, 0x9c, 0x97, 0x17, /* ts */
	'h', 'e', 'l', 'l', 'o', 0x00, 0x00, 0x00,      /* payload + pad */
	/* message 1, seq 1001 */
	0x08, 0x00, 0x00, 0x00,                         /* topic 8 */
	0x01, 0x00, 0x00, 0x00,                         /* len 1, flags 0 */
	0xfd, 0xd0, 0x85, 0x3d, 0xfe, 0x9c, 0x97, 0x17, /* ts */
	'!', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  /* payload + pad */
};

/* docs/PROTOCOL.md, the same messages without the TS flag. */
static const uint8_t golden_nots[56] = {
	0x46, 0x4c, 0x01, 0x01, 0x00, 0x00, 0x02, 0x00,
	0x38, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a,
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x07, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
	'h', 'e', 'l', 'l', 'o', 0x00, 0x00, 0x00,
	0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
	'!', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* docs/PROTOCOL.md, the same messages in a session of several topics, no
 * TS: flag TSEQ, topic numbers 12 and 3. */
static const uint8_t golden_tseq[72] = {
	0x46, 0x4c, 0x01, 0x01, 0x04, 0x00, 0x02, 0x00,
	0x48, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a,
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x07, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
	0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* tseq 12 */
	'h', 'e', 'l', 'l', 'o', 0x00, 0x00, 0x00,
	0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
	0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* tseq 3 */
	'!', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* docs/PROTOCOL.md, the same in short headers (flags TSEQ | SHORT): topic
 * u16, len u16, tseq u32, as long as the frame of one topic. */
static const uint8_t golden_short[56] = {
	0x46, 0x4c, 0x01, 0x01, 0x0c, 0x00, 0x02, 0x00,
	0x38, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a,
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x07, 0x00, 0x05, 0x00, 0x0c, 0x00, 0x00, 0x00, /* topic 7, len 5, tseq 12 */
	'h', 'e', 'l', 'l', 'o', 0x00, 0x00, 0x00,
	0x08, 0x00, 0x01, 0x00, 0x03, 0x00, 0x00, 0x00, /* topic 8, len 1, tseq 3 */
	'!', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static const uint32_t g_topics[2] = { 7, 8 };
static const uint64_t g_tseq[2] = { 12, 3 };
static const uint32_t g_lens[2] = { 5, 1 };
static const void *const g_payloads[2] = { "hello", "!" };
static const uint64_t g_ts[2] = { 1700000000123456789ull,
				  1700000000123457789ull };

static void golden_check(uint16_t flags, const uint8_t *golden, size_t glen)
{
	uint8_t f[128];
	struct flit_frame_hdr h;
	struct flit_frame_iter it;
	struct flit_wmsg m;

	memset(f, 0xcc, sizeof(f));
	size_t n = (flags & FLIT_FF_TSEQ) ?
		flit_frame_encode_tseq(f, sizeof(f), flags, 0x1a2b3c4d, 1000, 2,
				       g_topics, g_payloads, g_lens, g_ts, g_tseq) :
		flit_frame_encode(f, sizeof(f), flags, 0x1a2b3c4d, 1000, 2,
				  g_topics, g_payloads, g_lens, g_ts);
	assert_int_equal(n, glen);
	assert_memory_equal(f, golden, glen);

	/* and the document's bytes decode to the document's values */
	assert_int_equal(flit_frame_validate(golden, glen, &h), FLIT_FE_OK);
	assert_int_equal(h.flags, flags);
	assert_int_equal(h.count, 2);
	assert_int_equal(h.session_id, 0x1a2b3c4d);
	assert_int_equal(h.seq, 1000);
	flit_frame_iter_init(&it, golden, &h);
	for (unsigned i = 0; i < 2; i++) {
		assert_true(flit_frame_iter_next(&it, &m));
		assert_int_equal(m.topic, g_topics[i]);
		assert_int_equal(m.len, g_lens[i]);
		assert_int_equal(m.seq, 1000 + i);
		assert_int_equal(m.tseq, (flags & FLIT_FF_TSEQ) ? g_tseq[i] : 1000 + i);
		assert_int_equal(m.ts, (flags & FLIT_FF_TS) ? g_ts[i] : 0);
		assert_memory_equal(m.data, g_payloads[i], g_lens[i]);
	}
	assert_false(flit_frame_iter_next(&it, &m));
}

static void encode_matches_protocol_doc_golden_bytes(void **state)
{
	golden_check(FLIT_FF_TS, golden_ts, sizeof(golden_ts));
}

static void encode_without_ts_matches_protocol_doc_golden_bytes(void **state)
{
	golden_check(0, golden_nots, sizeof(golden_nots));
}

static void encode_with_topic_numbers_matches_protocol_doc_golden_bytes(void **state)
{
	golden_check(FLIT_FF_TSEQ, golden_tseq, sizeof(golden_tseq));
}

static void encode_in_short_headers_matches_protocol_doc_golden_bytes(void **state)
{
	golden_check(FLIT_FF_TSEQ | FLIT_FF_SHORT, golden_short, sizeof(golden_short));
	assert_int_equal(sizeof(golden_short), sizeof(golden_nots));
}

/* Short headers with timestamps: topic, len and tseq in the first 8 bytes,
 * then ts; the one-message and header writers give the encoder's bytes,
 * and a claim's length reads and rewrites in either form. */
static void short_headers_hold_the_number_before_the_timestamp(void **state)
{
	uint8_t f[128], g[128];
	struct flit_frame_hdr h;
	struct flit_frame_iter it;
	struct flit_wmsg m;
	uint16_t fl = FLIT_FF_TS | FLIT_FF_TSEQ | FLIT_FF_SHORT;
	const uint64_t big[2] = { 0xfffffffeull, 0xffffffffull };
	const uint32_t tops[2] = { 0, 0xffff };

	assert_int_equal(flit_msg_hdr_len(fl), 16);
	assert_int_equal(flit_msg_hdr_len(FLIT_FF_TSEQ | FLIT_FF_SHORT), 8);
	size_t n = flit_frame_encode_tseq(f, sizeof(f), fl, 0x1a2b3c4d, 1000, 2,
					  tops, g_payloads, g_lens, g_ts, big);
	assert_int_equal(n, 24 + 16 + 8 + 16 + 8);
	assert_int_equal(flit_ld16(f + 24), 0);
	assert_int_equal(flit_ld16(f + 26), 5);
	assert_int_equal(flit_ld32(f + 28), 0xfffffffeu);
	assert_int_equal(flit_ld64(f + 32), g_ts[0]);
	assert_int_equal(flit_frame_validate(f, n, &h), FLIT_FE_OK);
	flit_frame_iter_init(&it, f, &h);
	for (unsigned i = 0; i < 2; i++) {
		assert_true(flit_frame_iter_next(&it, &m));
		assert_int_equal(m.topic, tops[i]);
		assert_int_equal(m.len, g_lens[i]);
		assert_int_equal(m.tseq, big[i]);
		assert_int_equal(m.seq, 1000 + i);
		assert_int_equal(m.ts, g_ts[i]);
		assert_memory_equal(m.data, g_payloads[i], g_lens[i]);
	}
	assert_false(flit_frame_iter_next(&it, &m));

	memset(g, 0xcc, sizeof(g));
	uint8_t *pl = flit_frame_put_single_short(g, 0x1a2b3c4d, 1000, 0, 5, true, g_ts[0],
						  0xfffffffeull);
	memcpy(pl, "hello", 5);
	assert_int_equal(flit_ld32(g + 8), 24 + 16 + 8);
	assert_memory_equal(g + 8 + 4, f + 8 + 4, 12);      /* session, seq */
	assert_memory_equal(g + 24, f + 24, 24);            /* the message */
	assert_int_equal(flit_frame_validate(g, 48, &h), FLIT_FE_OK);
	assert_int_equal(h.flags, fl);

	uint8_t *q = flit_frame_put_hdr_short(g, 9, 300, true, 5, 77);
	assert_ptr_equal(q, g + 16);
	assert_int_equal(flit_msg_hdr_get_len(g, fl), 300);
	flit_msg_hdr_set_len(g, fl, 12);
	assert_int_equal(flit_ld64(g), 9 | 12ull << 16 | 77ull << 32);
	flit_frame_put_hdr_tseq(g, 9, 300, false, 0, 77);
	assert_int_equal(flit_msg_hdr_get_len(g, FLIT_FF_TSEQ), 300);
	flit_msg_hdr_set_len(g, FLIT_FF_TSEQ, 12);
	assert_int_equal(flit_ld32(g + 4), 12);
	assert_int_equal(flit_ld32(g), 9);
}

/* What a short header cannot hold is refused by the encoder, and a short
 * frame is never read in the long form or the other way round. */
static void short_headers_refuse_what_they_cannot_hold(void **state)
{
	static uint8_t big[70000], out[70000];
	uint8_t f[256];
	struct flit_frame_hdr h;
	uint16_t fl = FLIT_FF_TSEQ | FLIT_FF_SHORT;
	const void *pls[1] = { big };
	uint32_t len = 65536, top = 7;
	uint64_t tseq = 1;

	assert_int_equal(flit_frame_encode_tseq(out, sizeof(out), fl, 1, 0, 1, &top, pls,
						&len, NULL, &tseq), 0);
	len = 65535;
	assert_int_equal(flit_frame_encode_tseq(out, sizeof(out), fl, 1, 0, 1, &top, pls,
						&len, NULL, &tseq), 24 + 8 + 65536);
	assert_int_equal(flit_frame_validate(out, 24 + 8 + 65536, &h), FLIT_FE_OK);
	len = 3;
	top = 65536;
	assert_int_equal(flit_frame_encode_tseq(f, sizeof(f), fl, 1, 0, 1, &top, pls,
						&len, NULL, &tseq), 0);
	top = 65535;
	tseq = 0x100000000ull;
	assert_int_equal(flit_frame_encode_tseq(f, sizeof(f), fl, 1, 0, 1, &top, pls,
						&len, NULL, &tseq), 0);
	/* the long form holds it */
	assert_int_equal(flit_frame_encode_tseq(f, sizeof(f), FLIT_FF_TSEQ, 1, 0, 1, &top, pls,
						&len, NULL, &tseq), 24 + 16 + 8);
	/* SHORT without TSEQ: refused by both */
	assert_int_equal(flit_frame_encode_tseq(f, sizeof(f), FLIT_FF_SHORT, 1, 0, 1, &top,
						pls, &len, NULL, &tseq), 0);
	memcpy(f, golden_short, sizeof(golden_short));
	flit_st16(f + 4, FLIT_FF_SHORT);
	assert_int_equal(flit_frame_validate(f, sizeof(golden_short), &h), FLIT_FE_FLAGS);
	flit_st16(f + 4, FLIT_FF_SHORT | FLIT_FF_TS);
	assert_int_equal(flit_frame_validate(f, sizeof(golden_short), &h), FLIT_FE_FLAGS);
	/* the short frame read as long: the walk fails */
	flit_st16(f + 4, FLIT_FF_TSEQ);
	assert_int_not_equal(flit_frame_validate(f, sizeof(golden_short), &h), FLIT_FE_OK);
	/* the long frame read as short: refused too */
	memcpy(f, golden_tseq, sizeof(golden_tseq));
	flit_st16(f + 4, FLIT_FF_TSEQ | FLIT_FF_SHORT);
	assert_int_not_equal(flit_frame_validate(f, sizeof(golden_tseq), &h), FLIT_FE_OK);
	/* a short length past the frame */
	memcpy(f, golden_short, sizeof(golden_short));
	flit_st16(f + 24 + 2, 30);
	assert_int_equal(flit_frame_validate(f, sizeof(golden_short), &h), FLIT_FE_MSG_LEN);
	/* the length's top bits are length, not message flags: 0xffff fits
	 * only in a frame that long */
	flit_st16(f + 24 + 2, 0xffff);
	assert_int_equal(flit_frame_validate(f, sizeof(golden_short), &h), FLIT_FE_MSG_LEN);
	/* one message short of count */
	memcpy(f, golden_short, sizeof(golden_short));
	flit_st16(f + 6, 3);
	assert_int_equal(flit_frame_validate(f, sizeof(golden_short), &h), FLIT_FE_COUNT);
}

/* Both flags: ts, then tseq, per message; the one-message writer and the
 * header writer give the encoder's bytes; without TSEQ flag the encoder
 * refuses topic numbers it would drop. */
static void topic_numbers_follow_the_timestamp(void **state)
{
	uint8_t f[128], g[128];
	struct flit_frame_hdr h;
	struct flit_frame_iter it;
	struct flit_wmsg m;
	uint16_t fl = FLIT_FF_TS | FLIT_FF_TSEQ;

	size_t n = flit_frame_encode_tseq(f, sizeof(f), fl, 0x1a2b3c4d, 1000, 1,
					  g_topics, g_payloads, g_lens, g_ts, g_tseq);
	assert_int_equal(n, 24 + 8 + 8 + 8 + 8);
	assert_int_equal(flit_msg_hdr_len(fl), 24);
	assert_int_equal(flit_ld64(f + 32), g_ts[0]);
	assert_int_equal(flit_ld64(f + 40), g_tseq[0]);
	assert_int_equal(flit_frame_validate(f, n, &h), FLIT_FE_OK);
	flit_frame_iter_init(&it, f, &h);
	assert_true(flit_frame_iter_next(&it, &m));
	assert_int_equal(m.tseq, 12);
	assert_int_equal(m.ts, g_ts[0]);
	assert_memory_equal(m.data, "hello", 5);

	memset(g, 0xcc, sizeof(g));
	uint8_t *pl = flit_frame_put_single_tseq(g, 0x1a2b3c4d, 1000, 7, 5, true, g_ts[0], 12);
	memcpy(pl, "hello", 5);
	assert_memory_equal(g, f, n);

	/* a frame read without its TSEQ flag is refused (the walk no
	 * longer ends at len) */
	flit_st16(f + 4, FLIT_FF_TS);
	assert_int_not_equal(flit_frame_validate(f, n, &h), FLIT_FE_OK);
	assert_int_equal(flit_frame_encode(g, sizeof(g), fl, 1, 0, 1, g_topics, g_payloads,
					   g_lens, g_ts), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_message_round_trips),
		cmocka_unit_test(one_message_with_timestamp_round_trips),
		cmocka_unit_test(batch_of_mixed_lengths_round_trips),
		cmocka_unit_test(batch_of_mixed_lengths_with_timestamps_round_trips),
		cmocka_unit_test(largest_message_round_trips),
		cmocka_unit_test(frame_of_only_empty_messages_round_trips),
		cmocka_unit_test(empty_frame_is_accepted),
		cmocka_unit_test(iterator_yields_consecutive_sequence_numbers),
		cmocka_unit_test(timestamps_only_travel_with_the_ts_flag),
		cmocka_unit_test(encoder_zeroes_padding_and_stays_in_bounds),
		cmocka_unit_test(inline_builders_match_encode),
		cmocka_unit_test(encode_refuses_when_frame_does_not_fit),
		cmocka_unit_test(encode_refuses_message_longer_than_24_bits),
		cmocka_unit_test(encode_takes_at_most_65535_messages),
		cmocka_unit_test(std_frame_is_valid),
		cmocka_unit_test(validate_rejects_buffer_shorter_than_header),
		cmocka_unit_test(validate_rejects_bad_magic),
		cmocka_unit_test(validate_rejects_bad_version),
		cmocka_unit_test(validate_rejects_unknown_type),
		cmocka_unit_test(validate_rejects_unknown_flags),
		cmocka_unit_test(validate_rejects_unaligned_frame_length),
		cmocka_unit_test(validate_rejects_frame_length_below_header),
		cmocka_unit_test(validate_rejects_frame_length_past_buffer),
		cmocka_unit_test(validate_rejects_count_too_large),
		cmocka_unit_test(validate_rejects_count_too_small),
		cmocka_unit_test(validate_rejects_message_running_past_frame),
		cmocka_unit_test(validate_rejects_shifted_message_boundaries),
		cmocka_unit_test(validate_rejects_reserved_message_bits),
		cmocka_unit_test(validate_rejects_message_header_cut_in_the_middle),
		cmocka_unit_test(validate_checks_in_documented_order),
		cmocka_unit_test(validator_never_reads_past_buflen),
		cmocka_unit_test(frame_strerr_names_every_code),
		cmocka_unit_test(encode_matches_protocol_doc_golden_bytes),
		cmocka_unit_test(encode_without_ts_matches_protocol_doc_golden_bytes),
		cmocka_unit_test(encode_with_topic_numbers_matches_protocol_doc_golden_bytes),
		cmocka_unit_test(encode_in_short_headers_matches_protocol_doc_golden_bytes),
		cmocka_unit_test(short_headers_hold_the_number_before_the_timestamp),
		cmocka_unit_test(short_headers_refuse_what_they_cannot_hold),
		cmocka_unit_test(topic_numbers_follow_the_timestamp),
	};
	return cmocka_run_group_tests_name("codec", tests, NULL, NULL);
}
