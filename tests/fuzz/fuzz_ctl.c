// SPDX-License-Identifier: BSD-2-Clause
/*
 * libFuzzer target for the control-frame codec (userspace/ctl.h).
 *
 * Decode side: flit_ctl_check() on arbitrary bytes (copied to a malloc'd
 * buffer of exactly `size` bytes, so ASan flags any read past it), and for
 * every frame it accepts:
 *  - the header is one of types 2..7 with its flags, len inside the buffer,
 *    and the same frame cut to h.len bytes checks the same;
 *  - the DATA validator refuses it (FLIT_FE_TYPE), and conversely a frame
 *    flit_frame_validate() accepts is refused by flit_ctl_check() as
 *    FLIT_FE_TYPE;
 *  - every accessor is walked (HB trail, every range, INFO fixed part, every
 *    name entry, the domain), and every value is in its documented range;
 *    every name byte is read;
 *  - re-encoding the decoded values gives back the input's first h.len
 *    bytes exactly (the encoding is canonical), except the ignored seq of
 *    QUERY and JOIN frames, which encoders write as 0, and an HB's flags,
 *    which the HB encoder does not take (a closing source sets
 *    FLIT_HBF_END after encoding); and one byte less of room makes the
 *    encoder refuse without writing.
 *
 * Encode side: the input is also read as encoder arguments (a list of
 * names, of ranges, HB values); every encoder call either refuses (and
 * then an argument really was out of range) or produces a frame
 * flit_ctl_check() accepts and that decodes to the arguments.
 *
 * Any violation abort()s.
 *
 *   clang -D_GNU_SOURCE -Iinclude -Iuserspace -g -O1 \
 *     -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_ctl.c \
 *     userspace/ctl.c userspace/codec.c -o /tmp/fuzz_ctl
 *   mkdir -p /tmp/corpus && /tmp/fuzz_ctl /tmp/corpus tests/fuzz/corpus/ctl
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "fuzz.h"

/* Decoded entries of one frame (count is a u16). */
static struct flit_seq_range ranges[65536];
static struct flit_ctl_name names[65536];
static uint64_t finals[65536];

static volatile uint64_t sink;

static bool hdr_eq(const struct flit_frame_hdr *a, const struct flit_frame_hdr *b)
{
	return a->version == b->version && a->type == b->type &&
	       a->flags == b->flags && a->count == b->count &&
	       a->len == b->len && a->session_id == b->session_id &&
	       a->seq == b->seq;
}

static bool name_byte_ok(uint8_t c)
{
	return c >= 0x20 && c != 0x7f;
}

/* Walk the names of an accepted INFO/QUERY frame into names[]. */
static unsigned walk_names(const uint8_t *buf, const struct flit_frame_hdr *h)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	/* INFO with FINAL: its numbers after the names */
	const size_t nums = h->type == FLIT_FT_INFO && (h->flags & FLIT_INFOF_NUMS) ?
			    (size_t)h->count * 8 : 0;
	const uint8_t *end = buf + h->len - nums;
	size_t off = h->type == FLIT_FT_INFO ? 48 : 32;
	unsigned n = 0;
	uint64_t sum = 0;

	flit_ctl_names_init(&it, buf, h);
	while (flit_ctl_names_next(&it, &nm)) {
		CHECK(n < h->count);
		CHECK(nm.len >= 1 && nm.len <= 255);
		if (h->type == FLIT_FT_INFO) {
			CHECK(nm.kind == FLIT_NAME_EXACT);
		} else {
			CHECK(nm.idx == 0);
			CHECK(nm.kind == FLIT_NAME_EXACT ||
			      nm.kind == FLIT_NAME_PATTERN);
		}
		CHECK((const uint8_t *)nm.name == buf + off + 8);
		CHECK(end - (const uint8_t *)nm.name >= (ptrdiff_t)flit_align8(nm.len));
		for (unsigned j = 0; j < nm.len; j++) {
			CHECK(name_byte_ok((uint8_t)nm.name[j]));
			sum += (uint8_t)nm.name[j];
		}
		for (size_t j = nm.len; j < flit_align8(nm.len); j++)
			CHECK(nm.name[j] == 0);
		names[n++] = nm;
		off += 8 + flit_align8(nm.len);
	}
	CHECK(n == h->count);
	CHECK(off == h->len - nums);
	CHECK(it.p == end);
	for (unsigned i = 0; nums && i < n; i++) {
		finals[i] = flit_ctl_info_final(buf, h, i);
		sum += finals[i];
	}
	sink += sum;
	return n;
}

/* Encode the decoded frame again into exactly cap bytes. */
static size_t reencode(uint8_t *out, size_t cap, const uint8_t *buf,
		       const struct flit_frame_hdr *h, unsigned n)
{
	struct flit_ctl_info info;

	switch (h->type) {
	case FLIT_FT_HB:
		return flit_ctl_hb_encode(out, cap, h->session_id, h->seq,
					  flit_ctl_hb_trail(buf));
	case FLIT_FT_NAK:
	case FLIT_FT_NCF:
		return flit_ctl_ranges_encode(out, cap, h->type, h->session_id,
					      h->seq, ranges, n);
	case FLIT_FT_INFO:
		flit_ctl_info_get(buf, &info);
		return flit_ctl_info_encode_final(out, cap, h->flags, h->session_id, h->seq,
						  &info, names, n,
						  (h->flags & FLIT_INFOF_NUMS) ? finals : NULL);
	case FLIT_FT_QUERY:
		return flit_ctl_query_encode(out, cap, h->session_id,
					     flit_ctl_domain(buf), names, n);
	case FLIT_FT_JOIN:
		return flit_ctl_join_encode(out, cap, h->session_id,
					    flit_ctl_domain(buf), h->flags);
	case FLIT_FT_LATE: {
		struct flit_ctl_late late;
		flit_ctl_late_get(buf, &late);
		return flit_ctl_late_encode(out, cap, h->session_id, h->seq, &late);
	}
	}
	abort();
}

static void check_accepted(uint8_t *buf, size_t size,
			   const struct flit_frame_hdr *h)
{
	struct flit_frame_hdr h2;
	unsigned n = 0;

	CHECK(h->version == FLIT_WIRE_VERSION);
	CHECK(h->type >= FLIT_FT_HB && h->type <= FLIT_FT_LATE);
	CHECK(h->flags == 0 ||
	      (h->type == FLIT_FT_JOIN && (h->flags == FLIT_JF_LEAVE || h->flags == FLIT_JF_LATE)) ||
	      (h->type == FLIT_FT_HB && h->flags == FLIT_HBF_END) ||
	      (h->type == FLIT_FT_INFO &&
	       !(h->flags & ~(FLIT_INFOF_PAGE | FLIT_INFOF_ENDED | FLIT_INFOF_NUMS)) &&
	       (!(h->flags & FLIT_INFOF_FINAL) || (h->flags & FLIT_INFOF_ENDED)) &&
	       (!(h->flags & FLIT_INFOF_NEXT) || !(h->flags & FLIT_INFOF_ENDED))));
	CHECK(h->len >= FLIT_FRAME_HDR_LEN && h->len <= size && !(h->len & 7));

	/* The frame alone (without the bytes after it) is the same frame. */
	CHECK(flit_ctl_check(buf, h->len, &h2) == FLIT_FE_OK);
	CHECK(hdr_eq(h, &h2));
	CHECK(flit_frame_validate(buf, size, &h2) == FLIT_FE_TYPE);

	switch (h->type) {
	case FLIT_FT_HB:
		CHECK(h->count == 0 && h->len == 32);
		CHECK(flit_ctl_hb_trail(buf) <= h->seq);
		break;
	case FLIT_FT_NAK:
	case FLIT_FT_NCF:
		CHECK(h->count >= 1 && h->len == 24 + 16u * h->count);
		for (n = 0; n < h->count; n++) {
			flit_ctl_range(buf, n, &ranges[n]);
			CHECK(ranges[n].n >= 1);
			CHECK(ranges[n].first <= UINT64_MAX - ranges[n].n);
			CHECK(h->type == FLIT_FT_NAK ? ranges[n].status == 0
						     : ranges[n].status <= FLIT_NCF_FUTURE);
		}
		break;
	case FLIT_FT_INFO: {
		struct flit_ctl_info info;
		flit_ctl_info_get(buf, &info);
		CHECK(info.mode >= FLIT_MODE_MCAST && info.mode <= FLIT_MODE_RDMA_MCAST);
		CHECK(info.domain == flit_ctl_domain(buf));
		sink += info.data_port + info.data_addr + info.ctl_addr +
			info.ctl_port + info.pid;
		n = walk_names(buf, h);
		break;
	}
	case FLIT_FT_QUERY:
		sink += flit_ctl_domain(buf);
		n = walk_names(buf, h);
		break;
	case FLIT_FT_JOIN:
		CHECK(h->count == 0 && h->len == 32);
		sink += flit_ctl_domain(buf);
		break;
	case FLIT_FT_LATE: {
		struct flit_ctl_late late;
		CHECK(h->count == 0 && h->len == 56);
		flit_ctl_late_get(buf, &late);
		CHECK(late.trail <= h->seq && late.origin <= h->seq);
		sink += late.age_ns + late.late_join;
		break;
	}
	}

	/* Re-encode into a buffer of exactly h->len bytes. */
	uint8_t *canon = malloc(h->len);
	uint8_t *out = malloc(h->len);
	CHECK(canon && out);
	memcpy(canon, buf, h->len);
	if (h->type == FLIT_FT_QUERY || h->type == FLIT_FT_JOIN)
		memset(canon + 16, 0, 8); /* ignored seq, written as 0 */
	size_t got = reencode(out, h->len, buf, h, n);
	CHECK(got == h->len);
	if (h->type == FLIT_FT_HB) /* the encoder writes 0; END is set after */
		flit_st16(out + 4, h->flags);
	CHECK(memcmp(out, canon, h->len) == 0);
	CHECK(flit_ctl_check(out, got, &h2) == FLIT_FE_OK);
	free(out);

	/* One byte less does not fit, and nothing is written. */
	size_t small = h->len - 1;
	out = malloc(small ? small : 1);
	CHECK(out);
	memset(out, 0xee, small);
	CHECK(reencode(out, small, buf, h, n) == 0);
	for (size_t j = 0; j < small; j++)
		CHECK(out[j] == 0xee);
	free(out);
	free(canon);
}

/* ---- encode side --------------------------------------------------------- */

static uint8_t encbuf[1 << 20];

/* The frame in encbuf (got bytes) checks, with the expected header. */
static void check_encoded(size_t got, uint8_t type, uint16_t flags,
			  uint16_t count, uint32_t session, uint64_t seq,
			  struct flit_frame_hdr *h)
{
	CHECK(got >= FLIT_FRAME_HDR_LEN && got <= sizeof(encbuf) && !(got & 7));
	CHECK(flit_ctl_check(encbuf, got, h) == FLIT_FE_OK);
	CHECK(h->type == type && h->flags == flags && h->count == count &&
	      h->len == got && h->session_id == session && h->seq == seq);
}

/* Names cut from the input: [len byte][kind byte][idx byte][len bytes]... */
static unsigned input_names(const uint8_t *d, size_t size, const uint8_t **rest)
{
	unsigned n = 0;
	size_t i = 0;

	while (n < FLIT_CTL_NAMES_MAX * 4 && size - i >= 3) {
		uint8_t l = d[i], kind = d[i + 1], idx = d[i + 2];
		i += 3;
		if (l > size - i)
			break;
		names[n].len = l;
		names[n].kind = kind & 0x81; /* mostly 0 or 1, sometimes bad */
		names[n].idx = idx & 0x40 ? idx : 0;
		names[n].name = (const char *)d + i;
		i += l;
		n++;
	}
	*rest = d + i;
	return n;
}

static bool names_valid(unsigned n, bool query)
{
	for (unsigned i = 0; i < n; i++) {
		const struct flit_ctl_name *e = &names[i];
		if (e->len == 0)
			return false;
		if (query ? (e->idx != 0 || e->kind > FLIT_NAME_PATTERN)
			  : e->kind != FLIT_NAME_EXACT)
			return false;
		for (unsigned j = 0; j < e->len; j++)
			if (!name_byte_ok((uint8_t)e->name[j]))
				return false;
	}
	return true;
}

static void check_names_back(const struct flit_frame_hdr *h, unsigned n)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	unsigned i = 0;

	flit_ctl_names_init(&it, encbuf, h);
	while (flit_ctl_names_next(&it, &nm)) {
		CHECK(i < n);
		CHECK(nm.idx == names[i].idx && nm.kind == names[i].kind &&
		      nm.len == names[i].len);
		CHECK(memcmp(nm.name, names[i].name, nm.len) == 0);
		i++;
	}
	CHECK(i == n);
}

static uint64_t ld64_at(const uint8_t *d, size_t size, size_t at)
{
	uint8_t b[8] = { 0 };
	if (at < size)
		memcpy(b, d + at, size - at < 8 ? size - at : 8);
	return flit_ld64(b);
}

static void fuzz_encoders(const uint8_t *d, size_t size)
{
	struct flit_frame_hdr h;
	const uint8_t *rest;
	size_t got;

	/* HB from the first 16 bytes */
	uint64_t next = ld64_at(d, size, 0), trail = ld64_at(d, size, 8);
	got = flit_ctl_hb_encode(encbuf, sizeof(encbuf), 7, next, trail);
	if (trail > next) {
		CHECK(got == 0);
	} else {
		check_encoded(got, FLIT_FT_HB, 0, 0, 7, next, &h);
		CHECK(flit_ctl_hb_trail(encbuf) == trail);
	}

	/* JOIN with the first two bytes as flags */
	uint16_t jf = (uint16_t)ld64_at(d, size, 0);
	got = flit_ctl_join_encode(encbuf, sizeof(encbuf), 9, (uint32_t)trail, jf);
	if ((jf & ~(FLIT_JF_LEAVE | FLIT_JF_LATE)) || jf == (FLIT_JF_LEAVE | FLIT_JF_LATE)) {
		CHECK(got == 0);
	} else {
		check_encoded(got, FLIT_FT_JOIN, jf, 0, 9, 0, &h);
		CHECK(flit_ctl_domain(encbuf) == (uint32_t)trail);
	}

	/* LATE from the first 32 bytes: next, trail, origin, age */
	struct flit_ctl_late lt = { .trail = trail, .origin = ld64_at(d, size, 16),
				    .age_ns = ld64_at(d, size, 24), .late_join = (uint32_t)next };
	got = flit_ctl_late_encode(encbuf, sizeof(encbuf), 5, next, &lt);
	if (lt.trail > next || lt.origin > next) {
		CHECK(got == 0);
	} else {
		struct flit_ctl_late back;
		check_encoded(got, FLIT_FT_LATE, 0, 0, 5, next, &h);
		flit_ctl_late_get(encbuf, &back);
		CHECK(back.trail == lt.trail && back.origin == lt.origin &&
		      back.age_ns == lt.age_ns && back.late_join == lt.late_join);
	}

	/* ranges: 16 bytes each */
	unsigned nr = 0;
	for (size_t i = 0; i + 16 <= size && nr < 256; i += 16, nr++) {
		ranges[nr].first = flit_ld64(d + i);
		ranges[nr].n = flit_ld32(d + i + 8);
		ranges[nr].status = flit_ld32(d + i + 12) & 0x80000003u;
	}
	for (int t = 0; t < 2; t++) {
		uint8_t type = t ? FLIT_FT_NCF : FLIT_FT_NAK;
		bool ok = nr > 0;
		for (unsigned i = 0; i < nr; i++)
			if (ranges[i].n == 0 ||
			    ranges[i].first > UINT64_MAX - ranges[i].n ||
			    (t && ranges[i].status > FLIT_NCF_FUTURE))
				ok = false;
		got = flit_ctl_ranges_encode(encbuf, sizeof(encbuf), type, 3, next,
					     ranges, nr);
		if (!ok) {
			CHECK(got == 0);
			continue;
		}
		check_encoded(got, type, 0, (uint16_t)nr, 3, next, &h);
		for (unsigned i = 0; i < nr; i++) {
			struct flit_seq_range r;
			flit_ctl_range(encbuf, i, &r);
			CHECK(r.first == ranges[i].first && r.n == ranges[i].n);
			CHECK(r.status == (t ? ranges[i].status : 0));
		}
	}

	/* names: the same list as INFO topics and as QUERY names */
	unsigned nn = input_names(d, size, &rest);
	struct flit_ctl_info info = {
		.domain = (uint32_t)next,
		.mode = (uint8_t)(size & 7),
		.data_port = (uint16_t)trail,
		.data_addr = (uint32_t)(trail >> 16),
		.ctl_addr = (uint32_t)next,
		.ctl_port = (uint16_t)(next >> 32),
		.pid = (uint32_t)size,
	};
	bool mode_ok = info.mode >= FLIT_MODE_MCAST && info.mode <= FLIT_MODE_RDMA_MCAST;
	got = flit_ctl_info_encode(encbuf, sizeof(encbuf), 5, trail, &info, names, nn);
	if (!mode_ok || !names_valid(nn, false)) {
		CHECK(got == 0);
	} else {
		struct flit_ctl_info back;
		check_encoded(got, FLIT_FT_INFO, 0, (uint16_t)nn, 5, trail, &h);
		flit_ctl_info_get(encbuf, &back);
		CHECK(back.domain == info.domain && back.mode == info.mode &&
		      back.data_port == info.data_port &&
		      back.data_addr == info.data_addr &&
		      back.ctl_addr == info.ctl_addr &&
		      back.ctl_port == info.ctl_port && back.pid == info.pid);
		check_names_back(&h, nn);
	}
	got = flit_ctl_query_encode(encbuf, sizeof(encbuf), (uint32_t)next,
				    (uint32_t)trail, names, nn);
	if (!names_valid(nn, true)) {
		CHECK(got == 0);
	} else {
		check_encoded(got, FLIT_FT_QUERY, 0, (uint16_t)nn, (uint32_t)next,
			      0, &h);
		CHECK(flit_ctl_domain(encbuf) == (uint32_t)trail);
		check_names_back(&h, nn);
	}
	sink += (uint64_t)(rest - d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Exactly `size` bytes, so ASan flags a read of buf[size]. */
	uint8_t *buf = malloc(size ? size : 1);
	struct flit_frame_hdr h, hd;

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	enum flit_frame_err e = flit_ctl_check(size ? buf : NULL, size, &h);
	CHECK((unsigned)e < FLIT_FE__MAX);
	if (e == FLIT_FE_OK)
		check_accepted(buf, size, &h);
	if (flit_frame_validate(size ? buf : NULL, size, &hd) == FLIT_FE_OK)
		CHECK(e == FLIT_FE_TYPE);
	fuzz_encoders(buf, size);
	free(buf);
	return 0;
}
