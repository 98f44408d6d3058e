// SPDX-License-Identifier: BSD-2-Clause
/*
 * libFuzzer target for the wire codec: flit_frame_validate() on arbitrary
 * bytes, and for every frame it accepts:
 *  - the iterator walks exactly h.count messages, each inside the frame, with
 *    seq h.seq + i, the wire lengths adding up to h.len, ending at buf + h.len;
 *  - every payload byte is read (ASan sees any read outside the input, which
 *    is copied to a malloc'd buffer of exactly `size` bytes);
 *  - flit_frame_encode() of the decoded messages gives back the input's first
 *    h.len bytes with every padding byte zeroed (the format is canonical up to
 *    padding), and its output validates to the same header.
 * Any violation abort()s.
 *
 * Padding: the validator accepts non-zero padding bytes (docs/PROTOCOL.md
 * says senders write zeros and receivers ignore them), so the re-encode check
 * compares against the input with its padding zeroed.  Build with
 * -DFUZZ_STRICT_PADDING to abort on non-zero padding instead, i.e. to find
 * such frames.
 *
 *   clang -D_GNU_SOURCE -Iinclude -Iuserspace -g -O1 \
 *     -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_codec.c \
 *     userspace/codec.c -o /tmp/fuzz_codec
 *   mkdir -p /tmp/corpus && /tmp/fuzz_codec /tmp/corpus tests/fuzz/corpus/codec
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fuzz.h"

/* Decoded messages of one frame (count is a u16). */
static uint32_t topics[65536];
static uint32_t lens[65536];
static uint64_t tss[65536];
static uint64_t tseqs[65536];
static const void *payloads[65536];

static volatile uint64_t sink;

/* Field by field: the struct has padding holes memcmp would read. */
static bool hdr_eq(const struct flit_frame_hdr *a, const struct flit_frame_hdr *b)
{
	return a->version == b->version && a->type == b->type &&
	       a->flags == b->flags && a->count == b->count &&
	       a->len == b->len && a->session_id == b->session_id &&
	       a->seq == b->seq;
}

static void check_accepted(uint8_t *buf, size_t size,
			   const struct flit_frame_hdr *h)
{
	const bool ts = h->flags & FLIT_FF_TS, tq = h->flags & FLIT_FF_TSEQ;
	const uint8_t *end = buf + h->len;

	CHECK(h->version == FLIT_WIRE_VERSION);
	CHECK(h->type == FLIT_FT_DATA);
	CHECK(!(h->flags & ~FLIT_FF_KNOWN));
	CHECK(h->len >= FLIT_FRAME_HDR_LEN && h->len <= size && !(h->len & 7));

	/* Walk: bounds, sequence numbers, lengths; touch every payload byte. */
	struct flit_frame_iter it;
	struct flit_wmsg m;
	size_t wire = FLIT_FRAME_HDR_LEN;
	unsigned n = 0;
	uint64_t sum = 0;
	bool pad_zero = true;

	flit_frame_iter_init(&it, buf, h);
	while (flit_frame_iter_next(&it, &m)) {
		CHECK(n < h->count);
		CHECK(m.len <= FLIT_MSG_LEN_MAX);
		CHECK(m.seq == h->seq + n);
		CHECK(m.data == buf + wire + flit_msg_hdr_len(h->flags));
		if (!tq)
			CHECK(m.tseq == m.seq);
		if (h->flags & FLIT_FF_SHORT)
			CHECK(tq && m.topic <= FLIT_SHORT_TOPIC_MAX && m.len <= FLIT_SHORT_LEN_MAX &&
			      m.tseq <= FLIT_SHORT_TSEQ_MAX);
		CHECK(m.data >= buf + FLIT_FRAME_HDR_LEN && m.data <= end);
		CHECK((size_t)(end - m.data) >= flit_align8(m.len));
		if (!ts)
			CHECK(m.ts == 0);
		for (uint32_t j = 0; j < m.len; j++)
			sum += m.data[j];
		for (size_t j = m.len; j < flit_align8(m.len); j++)
			if (m.data[j])
				pad_zero = false;
		topics[n] = m.topic;
		lens[n] = m.len;
		tss[n] = m.ts;
		tseqs[n] = m.tseq;
		payloads[n] = m.data;
		wire += flit_msg_hdr_len(h->flags) + flit_align8(m.len);
		n++;
	}
	sink += sum;
	CHECK(n == h->count);
	CHECK(wire == h->len);
	CHECK(it.p == end);
#ifdef FUZZ_STRICT_PADDING
	CHECK(pad_zero);
#endif

	/* The frame alone (without the bytes after it) is the same frame. */
	struct flit_frame_hdr h2;
	CHECK(flit_frame_validate(buf, h->len, &h2) == FLIT_FE_OK);
	CHECK(hdr_eq(h, &h2));

	/* Re-encode into a buffer of exactly h->len bytes. */
	uint8_t *canon = malloc(h->len);
	uint8_t *out = malloc(h->len);
	CHECK(canon && out);
	memcpy(canon, buf, h->len);
	if (!pad_zero) {
		flit_frame_iter_init(&it, canon, h);
		while (flit_frame_iter_next(&it, &m))
			memset(canon + (m.data - canon) + m.len, 0,
			       flit_align8(m.len) - m.len);
	}
	size_t got = flit_frame_encode_tseq(out, h->len, h->flags, h->session_id,
					    h->seq, n, topics, payloads, lens,
					    ts ? tss : NULL, tq ? tseqs : NULL);
	CHECK(got == h->len);
	CHECK(memcmp(out, canon, h->len) == 0);
	CHECK(flit_frame_validate(out, got, &h2) == FLIT_FE_OK);
	CHECK(hdr_eq(h, &h2));
	/* One byte less does not fit. */
	CHECK(flit_frame_encode_tseq(out, h->len - 1, h->flags, h->session_id,
				     h->seq, n, topics, payloads, lens,
				     ts ? tss : NULL, tq ? tseqs : NULL) == 0);
	free(out);
	free(canon);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Exactly `size` bytes, so ASan flags a read of buf[size]. */
	uint8_t *buf = malloc(size ? size : 1);
	struct flit_frame_hdr h;

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	enum flit_frame_err e = flit_frame_validate(size ? buf : NULL, size, &h);
	CHECK((unsigned)e < FLIT_FE__MAX);
	CHECK(flit_frame_strerr(e) != NULL);
	if (e == FLIT_FE_OK)
		check_accepted(buf, size, &h);
	free(buf);
	return 0;
}
