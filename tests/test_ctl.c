// SPDX-License-Identifier: BSD-2-Clause
/*
 * Control-frame codec tests (userspace/ctl.h): the encoders, flit_ctl_check()
 * and the accessors.
 *
 * Every frame type round-trips (encode, check, read back through the
 * accessors); the golden frames pin the bytes of the examples in
 * docs/PROTOCOL.md, "Control frames", and are also parsed out of that page,
 * so the document and the code cannot drift apart.  Every malformed shape is
 * checked against the exact enum flit_frame_err the page's check tables give,
 * truncations and refused encodes run against a PROT_NONE guard page, so a
 * read or write one byte too far faults.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ctl.h"

#define SESSION        0x1a2b3c4du
#define DOMAIN_DEFAULT 0x933b5bdeu /* flit_domain_id("default") */
#define BUFSZ          512

/* Offsets inside a frame header (docs/PROTOCOL.md, "Frame header"). */
#define OFF_MAGIC   0
#define OFF_VERSION 2
#define OFF_TYPE    3
#define OFF_FLAGS   4
#define OFF_COUNT   6
#define OFF_LEN     8
#define OFF_SESSION 12
#define OFF_SEQ     16
#define OFF_BODY    24

/* ---- golden frames: docs/PROTOCOL.md, "Control frame examples" ---------- */

static const uint8_t golden_hb[32] = {
	0x46, 0x4c, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, /* FL, v1, HB, flags, count 0 */
	0x20, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 32, session */
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq (next) 1000 */
	0x84, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* trail 900 */
};

static const uint8_t golden_nak[56] = {
	0x46, 0x4c, 0x01, 0x03, 0x00, 0x00, 0x02, 0x00, /* NAK, count 2 */
	0x38, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 56, session */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 0 */
	0xde, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* first 990 */
	0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* n 5, status 0 */
	0xe4, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* first 996 */
	0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* n 2, status 0 */
};

static const uint8_t golden_ncf[72] = {
	0x46, 0x4c, 0x01, 0x04, 0x00, 0x00, 0x03, 0x00, /* NCF, count 3 */
	0x48, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 72, session */
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 1000 */
	0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* first 100 */
	0x0a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, /* n 10, GONE */
	0xde, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* first 990 */
	0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* n 5, RETX */
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* first 1000 */
	0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, /* n 2, FUTURE */
};

static const uint8_t golden_info[88] = {
	0x46, 0x4c, 0x01, 0x05, 0x00, 0x00, 0x02, 0x00, /* INFO, count 2 */
	0x58, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 88, session */
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 1000 */
	0xde, 0x5b, 0x3b, 0x93, 0x01, 0x00, 0xc0, 0x5d, /* domain, MCAST, 0, 24000 */
	0xef, 0x01, 0x02, 0x03, 0xc0, 0xa8, 0x01, 0x0a, /* 239.1.2.3, 192.168.1.10 */
	0xc1, 0x5d, 0x00, 0x00, 0x92, 0x10, 0x00, 0x00, /* 24001, 0, pid 4242 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0d, 0x00, /* idx 0, EXACT, 0, len 13 */
	'p', 'r', 'i', 'c', 'e', 's', '.', 'e',
	'u', 'r', 'u', 's', 'd', 0x00, 0x00, 0x00,
	0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, /* idx 1, EXACT, 0, len 4 */
	'n', 'e', 'w', 's', 0x00, 0x00, 0x00, 0x00,
};

static const uint8_t golden_info_page[96] = {
	0x46, 0x4c, 0x01, 0x05, 0x01, 0x00, 0x02, 0x00, /* INFO, PAGE, count 2 */
	0x60, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 96, session */
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 1000 */
	0xde, 0x5b, 0x3b, 0x93, 0x01, 0x00, 0xc0, 0x5d, /* domain, MCAST, 0, 24000 */
	0xef, 0x01, 0x02, 0x03, 0xc0, 0xa8, 0x01, 0x0a, /* 239.1.2.3, 192.168.1.10 */
	0xc1, 0x5d, 0x00, 0x00, 0x92, 0x10, 0x00, 0x00, /* 24001, 0, pid 4242 */
	0x2c, 0x01, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x00, /* idx 300, EXACT, 0, len 11 */
	'm', 'd', '.', 's', 'y', 'm', '0', '0',
	'3', '0', '0', 0x00, 0x00, 0x00, 0x00, 0x00,
	0x2d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x00, /* idx 301, EXACT, 0, len 11 */
	'm', 'd', '.', 's', 'y', 'm', '0', '0',
	'3', '0', '1', 0x00, 0x00, 0x00, 0x00, 0x00,
};

static const uint8_t golden_info_ended_final[80] = {
	0x46, 0x4c, 0x01, 0x05, 0x07, 0x00, 0x01, 0x00, /* INFO, PAGE|ENDED|FINAL, count 1 */
	0x50, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 80, session */
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 1000 */
	0xde, 0x5b, 0x3b, 0x93, 0x01, 0x00, 0xc0, 0x5d, /* domain, MCAST, 0, 24000 */
	0xef, 0x01, 0x02, 0x03, 0xc0, 0xa8, 0x01, 0x0a, /* 239.1.2.3, 192.168.1.10 */
	0xc1, 0x5d, 0x00, 0x00, 0x92, 0x10, 0x00, 0x00, /* 24001, 0, pid 4242 */
	0x2c, 0x01, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x00, /* idx 300, EXACT, 0, len 11 */
	'm', 'd', '.', 's', 'y', 'm', '0', '0',
	'3', '0', '0', 0x00, 0x00, 0x00, 0x00, 0x00,
	0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* final: 42 sent */
};

static const uint8_t golden_info_page_next[80] = {
	0x46, 0x4c, 0x01, 0x05, 0x09, 0x00, 0x01, 0x00, /* INFO, PAGE|NEXT, count 1 */
	0x50, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 80, session */
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 1000 */
	0xde, 0x5b, 0x3b, 0x93, 0x01, 0x00, 0xc0, 0x5d, /* domain, MCAST, 0, 24000 */
	0xef, 0x01, 0x02, 0x03, 0xc0, 0xa8, 0x01, 0x0a, /* 239.1.2.3, 192.168.1.10 */
	0xc1, 0x5d, 0x00, 0x00, 0x92, 0x10, 0x00, 0x00, /* 24001, 0, pid 4242 */
	0x2c, 0x01, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x00, /* idx 300, EXACT, 0, len 11 */
	'm', 'd', '.', 's', 'y', 'm', '0', '0',
	'3', '0', '0', 0x00, 0x00, 0x00, 0x00, 0x00,
	0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* next: its message 42 */
};

static const uint8_t golden_info_rdma_mc[72] = {
	0x46, 0x4c, 0x01, 0x05, 0x00, 0x00, 0x01, 0x00, /* INFO, count 1 */
	0x48, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 72, session */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 0 */
	0xde, 0x5b, 0x3b, 0x93, 0x04, 0x00, 0x41, 0x38, /* domain, RDMA_MCAST, 0, 14401 */
	0xef, 0xc0, 0x4e, 0x09, 0xc0, 0xa8, 0x32, 0x01, /* 239.192.78.9, 192.168.50.1 */
	0x40, 0x9c, 0x00, 0x00, 0x92, 0x10, 0x00, 0x00, /* 40000, 0, pid 4242 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, 0x00, /* idx 0, EXACT, 0, len 9 */
	'm', 'd', '.', 'e', 'u', 'r', 'u', 's',
	'd', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static const uint8_t golden_query[72] = {
	0x46, 0x4c, 0x01, 0x06, 0x00, 0x00, 0x02, 0x00, /* QUERY, count 2 */
	0x48, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* len 72, session 0 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 0 */
	0xde, 0x5b, 0x3b, 0x93, 0x00, 0x00, 0x00, 0x00, /* domain, reserved */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0d, 0x00, /* idx 0, EXACT, 0, len 13 */
	'p', 'r', 'i', 'c', 'e', 's', '.', 'e',
	'u', 'r', 'u', 's', 'd', 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x06, 0x00, /* idx 0, PATTERN, 0, len 6 */
	'n', 'e', 'w', 's', '.', '*', 0x00, 0x00,
};

static const uint8_t golden_join[32] = {
	0x46, 0x4c, 0x01, 0x07, 0x00, 0x00, 0x00, 0x00, /* JOIN, flags 0 */
	0x20, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 32, session */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 0 */
	0xde, 0x5b, 0x3b, 0x93, 0x00, 0x00, 0x00, 0x00, /* domain, reserved */
};

static const uint8_t golden_late[56] = {
	0x46, 0x4c, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, /* LATE, flags 0, count 0 */
	0x38, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, /* len 56, session */
	0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 1000: live from here */
	0x84, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* trail 900 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* origin 0 */
	0x00, 0xf9, 0x02, 0x95, 0x00, 0x00, 0x00, 0x00, /* age 2.5 s */
	0xf4, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* late_join 500, reserved */
};

/* The values of the examples. */
static const struct flit_seq_range g_nak[2] = {
	{ 990, 5, 0 },
	{ 996, 2, 0 },
};
static const struct flit_seq_range g_ncf[3] = {
	{ 100, 10, FLIT_NCF_GONE },
	{ 990, 5, FLIT_NCF_RETX },
	{ 1000, 2, FLIT_NCF_FUTURE },
};
static const struct flit_ctl_name g_topics[2] = {
	{ .idx = 0, .kind = FLIT_NAME_EXACT, .len = 13, .name = "prices.eurusd" },
	{ .idx = 1, .kind = FLIT_NAME_EXACT, .len = 4, .name = "news" },
};
static const struct flit_ctl_name g_query[2] = {
	{ .idx = 0, .kind = FLIT_NAME_EXACT, .len = 13, .name = "prices.eurusd" },
	{ .idx = 0, .kind = FLIT_NAME_PATTERN, .len = 6, .name = "news.*" },
};

static struct flit_ctl_info g_info(void)
{
	struct flit_ctl_info i = {
		.domain = DOMAIN_DEFAULT,
		.mode = FLIT_MODE_MCAST,
		.data_port = 24000,
		.data_addr = inet_addr("239.1.2.3"),
		.ctl_addr = inet_addr("192.168.1.10"),
		.ctl_port = 24001,
		.pid = 4242,
	};
	return i;
}

static size_t enc_hb(void *b, size_t cap)
{
	return flit_ctl_hb_encode(b, cap, SESSION, 1000, 900);
}
static size_t enc_nak(void *b, size_t cap)
{
	return flit_ctl_ranges_encode(b, cap, FLIT_FT_NAK, SESSION, 0, g_nak, 2);
}
static size_t enc_ncf(void *b, size_t cap)
{
	return flit_ctl_ranges_encode(b, cap, FLIT_FT_NCF, SESSION, 1000, g_ncf, 3);
}
static size_t enc_info(void *b, size_t cap)
{
	struct flit_ctl_info i = g_info();
	return flit_ctl_info_encode(b, cap, SESSION, 1000, &i, g_topics, 2);
}
static const struct flit_ctl_name g_page[2] = {
	{ .idx = 300, .kind = FLIT_NAME_EXACT, .len = 11, .name = "md.sym00300" },
	{ .idx = 301, .kind = FLIT_NAME_EXACT, .len = 11, .name = "md.sym00301" },
};
static size_t enc_info_page(void *b, size_t cap)
{
	struct flit_ctl_info i = g_info();
	return flit_ctl_info_encode_flags(b, cap, FLIT_INFOF_PAGE, SESSION, 1000, &i, g_page, 2);
}
static size_t enc_info_ended_final(void *b, size_t cap)
{
	struct flit_ctl_info i = g_info();
	const uint64_t final = 42;
	return flit_ctl_info_encode_final(b, cap, FLIT_INFOF_PAGE | FLIT_INFOF_ENDED | FLIT_INFOF_FINAL,
					  SESSION, 1000, &i, g_page, 1, &final);
}
static size_t enc_info_page_next(void *b, size_t cap)
{
	struct flit_ctl_info i = g_info();
	const uint64_t next = 42;
	return flit_ctl_info_encode_final(b, cap, FLIT_INFOF_PAGE | FLIT_INFOF_NEXT,
					  SESSION, 1000, &i, g_page, 1, &next);
}
static const struct flit_ctl_name g_rdma_mc[1] = {
	{ .idx = 0, .kind = FLIT_NAME_EXACT, .len = 9, .name = "md.eurusd" },
};
static size_t enc_info_rdma_mc(void *b, size_t cap)
{
	struct flit_ctl_info i = {
		.domain = DOMAIN_DEFAULT, .mode = FLIT_MODE_RDMA_MCAST,
		.data_port = 14401, .data_addr = inet_addr("239.192.78.9"),
		.ctl_addr = inet_addr("192.168.50.1"), .ctl_port = 40000, .pid = 4242,
	};
	return flit_ctl_info_encode(b, cap, SESSION, 0, &i, g_rdma_mc, 1);
}
static size_t enc_query(void *b, size_t cap)
{
	return flit_ctl_query_encode(b, cap, 0, flit_domain_id("default"),
				     g_query, 2);
}
static size_t enc_join(void *b, size_t cap)
{
	return flit_ctl_join_encode(b, cap, SESSION, flit_domain_id("default"), 0);
}
static const struct flit_ctl_late g_late = {
	.trail = 900, .origin = 0, .age_ns = 2500000000ull, .late_join = 500,
};
static size_t enc_late(void *b, size_t cap)
{
	return flit_ctl_late_encode(b, cap, SESSION, 1000, &g_late);
}

struct golden {
	const char *name;    /* as in tests/fuzz/corpus/ctl/ and the doc */
	const uint8_t *bytes;
	size_t len;
	uint8_t type;
	size_t (*encode)(void *buf, size_t cap);
};

static const struct golden goldens[] = {
	{ "golden_hb", golden_hb, sizeof(golden_hb), FLIT_FT_HB, enc_hb },
	{ "golden_nak", golden_nak, sizeof(golden_nak), FLIT_FT_NAK, enc_nak },
	{ "golden_ncf", golden_ncf, sizeof(golden_ncf), FLIT_FT_NCF, enc_ncf },
	{ "golden_info", golden_info, sizeof(golden_info), FLIT_FT_INFO, enc_info },
	{ "golden_info_page", golden_info_page, sizeof(golden_info_page), FLIT_FT_INFO, enc_info_page },
	{ "golden_info_rdma_mc", golden_info_rdma_mc, sizeof(golden_info_rdma_mc), FLIT_FT_INFO,
	  enc_info_rdma_mc },
	{ "golden_info_ended_final", golden_info_ended_final, sizeof(golden_info_ended_final),
	  FLIT_FT_INFO, enc_info_ended_final },
	{ "golden_info_page_next", golden_info_page_next, sizeof(golden_info_page_next),
	  FLIT_FT_INFO, enc_info_page_next },
	{ "golden_query", golden_query, sizeof(golden_query), FLIT_FT_QUERY, enc_query },
	{ "golden_join", golden_join, sizeof(golden_join), FLIT_FT_JOIN, enc_join },
	{ "golden_late", golden_late, sizeof(golden_late), FLIT_FT_LATE, enc_late },
};
#define N_GOLDEN (sizeof(goldens) / sizeof(goldens[0]))

/* ---- helpers ------------------------------------------------------------- */

static void expect_err_at(const uint8_t *buf, size_t buflen,
			  enum flit_frame_err want, const char *what, int line)
{
	struct flit_frame_hdr h;
	enum flit_frame_err got = flit_ctl_check(buf, buflen, &h);

	if (got != want)
		fail_msg("line %d %s: flit_ctl_check got %d (%s), want %d (%s)",
			 line, what ? what : "", got, flit_frame_strerr(got),
			 want, flit_frame_strerr(want));
}
#define expect_err(b, l, w) expect_err_at((b), (l), (w), NULL, __LINE__)
#define expect_err_in(g, b, l, w) expect_err_at((b), (l), (w), (g)->name, __LINE__)

/* A golden frame copied into buf (BUFSZ bytes, the rest zero). */
static void put_golden(uint8_t *buf, const struct golden *g)
{
	memset(buf, 0, BUFSZ);
	memcpy(buf, g->bytes, g->len);
}

static const struct golden *golden_of(uint8_t type)
{
	for (size_t i = 0; i < N_GOLDEN; i++)
		if (goldens[i].type == type)
			return &goldens[i];
	fail_msg("no golden frame of type %u", type);
	return NULL;
}

static bool hdr_eq(const struct flit_frame_hdr *a, const struct flit_frame_hdr *b)
{
	return a->version == b->version && a->type == b->type &&
	       a->flags == b->flags && a->count == b->count &&
	       a->len == b->len && a->session_id == b->session_id &&
	       a->seq == b->seq;
}

/* f (flen bytes) is a valid control frame: also at an odd address with bytes
 * after it, and the DATA validator refuses it by type.  Fills *h. */
static void check_ok(const uint8_t *f, size_t flen, struct flit_frame_hdr *h)
{
	struct flit_frame_hdr h2;
	enum flit_frame_err e = flit_ctl_check(f, flen, h);

	if (e != FLIT_FE_OK)
		fail_msg("flit_ctl_check: %s", flit_frame_strerr(e));
	assert_int_equal(h->version, FLIT_WIRE_VERSION);
	assert_int_equal(h->len, flen);

	uint8_t *o = malloc(flen + 1 + 16);
	assert_non_null(o);
	memcpy(o + 1, f, flen);
	memset(o + 1 + flen, 0x5a, 16);
	assert_int_equal(flit_ctl_check(o + 1, flen + 16, &h2), FLIT_FE_OK);
	assert_true(hdr_eq(h, &h2));
	free(o);

	assert_int_equal(flit_frame_validate(f, flen, &h2), FLIT_FE_TYPE);
}

static void expect_names(const uint8_t *f, const struct flit_frame_hdr *h,
			 const struct flit_ctl_name *want, unsigned n)
{
	struct flit_ctl_name_iter it;
	struct flit_ctl_name got;
	unsigned i = 0;

	assert_int_equal(h->count, n);
	flit_ctl_names_init(&it, f, h);
	while (flit_ctl_names_next(&it, &got)) {
		assert_true(i < n);
		assert_int_equal(got.idx, want[i].idx);
		assert_int_equal(got.kind, want[i].kind);
		assert_int_equal(got.len, want[i].len);
		assert_true((const uint8_t *)got.name >= f + OFF_BODY);
		assert_true((const uint8_t *)got.name + got.len <= f + h->len);
		assert_memory_equal(got.name, want[i].name, want[i].len);
		i++;
	}
	assert_int_equal(i, n);
	assert_ptr_equal(it.p, f + h->len);
	assert_false(flit_ctl_names_next(&it, &got));
}

/* The k-th byte a name may hold (0 <= k < 223): 0x20..0x7e, 0x80..0xff. */
#define N_NAME_BYTES (95 + 128)
static char name_byte(unsigned k)
{
	k %= N_NAME_BYTES;
	return (char)(k < 95 ? 0x20 + k : 0x80 + (k - 95));
}

/* Storage for generated names. */
struct names {
	unsigned n;
	struct flit_ctl_name e[FLIT_CTL_NAMES_MAX * 4];
	char buf[FLIT_CTL_NAMES_MAX * 4][256];
};

/* n names of lengths 1..255 (varied), bytes drawn from every allowed value. */
static void names_make(struct names *s, unsigned n, bool query, unsigned seed)
{
	assert_true(n <= FLIT_CTL_NAMES_MAX * 4);
	s->n = n;
	for (unsigned i = 0; i < n; i++) {
		uint16_t len = (uint16_t)(1 + (seed * 37u + i * 61u) % 255u);
		if (i == 0)
			len = 255;
		if (i == 1)
			len = 1;
		if (i == 2)
			len = 8;
		for (unsigned j = 0; j < len; j++)
			s->buf[i][j] = name_byte(seed + i * 255u + j);
		s->e[i].idx = query ? 0 : 1000u + i * 7u;
		s->e[i].kind = query ? (uint8_t)(i & 1) : FLIT_NAME_EXACT;
		s->e[i].len = len;
		s->e[i].name = s->buf[i];
	}
}

static size_t names_size(const struct flit_ctl_name *e, unsigned n)
{
	size_t s = 0;
	for (unsigned i = 0; i < n; i++)
		s += 8 + flit_align8(e[i].len);
	return s;
}

/* ---- guard page: a read or write past the end faults ------------------- */

struct guard {
	uint8_t *map;
	uint8_t *end; /* first byte of the PROT_NONE region */
	size_t size;  /* usable bytes before it */
};

static void guard_map(struct guard *g, size_t size)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t usable = (size + pg - 1) / pg * pg;

	g->map = mmap(NULL, usable + pg, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(g->map != MAP_FAILED);
	assert_int_equal(mprotect(g->map + usable, pg, PROT_NONE), 0);
	g->end = g->map + usable;
	g->size = usable;
}

static void guard_unmap(struct guard *g)
{
	munmap(g->map, g->size + (size_t)sysconf(_SC_PAGESIZE));
}

static uint8_t *guard_place(struct guard *g, const uint8_t *f, size_t l)
{
	assert_true(l <= g->size);
	memcpy(g->end - l, f, l);
	return g->end - l;
}

/* ---- domain id ----------------------------------------------------------- */

static void domain_id_is_fnv1a_32(void **state)
{
	/* the FNV reference vectors, and the examples' domain */
	assert_int_equal(flit_domain_id(""), 0x811c9dc5u);
	assert_int_equal(flit_domain_id("a"), 0xe40c292cu);
	assert_int_equal(flit_domain_id("foobar"), 0xbf9cf968u);
	assert_int_equal(flit_domain_id("default"), DOMAIN_DEFAULT);
	assert_int_not_equal(flit_domain_id("default"), flit_domain_id("Default"));
	/* bytes above 0x7f are hashed as unsigned */
	uint32_t h = 2166136261u;
	h = (h ^ 0xe9u) * 16777619u;
	assert_int_equal(flit_domain_id("\xe9"), h);
}

/* ---- round trips --------------------------------------------------------- */

/* The flags each type may carry (docs/PROTOCOL.md, "Common rules"). */
static uint16_t known_flags(uint8_t type)
{
	return type == FLIT_FT_HB ? FLIT_HBF_END
	       : type == FLIT_FT_JOIN ? FLIT_JF_LEAVE | FLIT_JF_LATE
	       : type == FLIT_FT_INFO ? FLIT_INFOF_PAGE | FLIT_INFOF_ENDED : 0;
}

static void hb_round_trips(void **state)
{
	static const uint64_t v[][2] = {
		{ 1000, 900 }, { 0, 0 }, { 5, 5 }, { 1, 0 },
		{ UINT64_MAX, 0 }, { UINT64_MAX, UINT64_MAX },
		{ 0x0123456789abcdefull, 0x0123456789abcdeeull },
	};
	uint8_t f[64];
	struct flit_frame_hdr h;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		memset(f, 0xa5, sizeof(f));
		size_t n = flit_ctl_hb_encode(f, sizeof(f), 0xfeedf00d + (uint32_t)i,
					      v[i][0], v[i][1]);
		assert_int_equal(n, 32);
		check_ok(f, n, &h);
		assert_int_equal(h.type, FLIT_FT_HB);
		assert_int_equal(h.flags, 0);
		assert_int_equal(h.count, 0);
		assert_int_equal(h.session_id, 0xfeedf00d + (uint32_t)i);
		assert_int_equal(h.seq, v[i][0]);
		assert_int_equal(flit_ctl_hb_trail(f), v[i][1]);
		for (size_t j = n; j < sizeof(f); j++)
			assert_int_equal(f[j], 0xa5);
	}
}

/* The encoder writes flags 0; a closing source sets FLIT_HBF_END itself. */
static void hb_end_flag_is_accepted(void **state)
{
	uint8_t f[32];
	struct flit_frame_hdr h;

	assert_int_equal(flit_ctl_hb_encode(f, sizeof(f), SESSION, 77, 70), 32);
	assert_int_equal(flit_ld16(f + OFF_FLAGS), 0);
	flit_st16(f + OFF_FLAGS, FLIT_HBF_END);
	check_ok(f, 32, &h);
	assert_int_equal(h.flags, FLIT_HBF_END);
	assert_int_equal(h.seq, 77);
	assert_int_equal(flit_ctl_hb_trail(f), 70);
	flit_st16(f + OFF_FLAGS, FLIT_HBF_END | 0x0002);
	expect_err(f, 32, FLIT_FE_FLAGS);
}

static void ranges_round_trip(uint8_t type, const struct flit_seq_range *r,
			      unsigned n, uint64_t seq)
{
	size_t need = 24 + 16 * (size_t)n;
	uint8_t *f = malloc(need + 64);
	struct flit_frame_hdr h;
	struct flit_seq_range got;

	assert_non_null(f);
	memset(f, 0xa5, need + 64);
	assert_int_equal(flit_ctl_ranges_encode(f, need + 64, type, SESSION, seq,
						r, n), need);
	for (size_t j = need; j < need + 64; j++)
		assert_int_equal(f[j], 0xa5);
	check_ok(f, need, &h);
	assert_int_equal(h.type, type);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.count, n);
	assert_int_equal(h.session_id, SESSION);
	assert_int_equal(h.seq, seq);
	for (unsigned i = 0; i < n; i++) {
		flit_ctl_range(f, i, &got);
		assert_int_equal(got.first, r[i].first);
		assert_int_equal(got.n, r[i].n);
		assert_int_equal(got.status, type == FLIT_FT_NCF ? r[i].status : 0);
	}
	free(f);
}

static void nak_and_ncf_round_trip(void **state)
{
	struct flit_seq_range r[90];

	for (unsigned i = 0; i < 90; i++) {
		r[i].first = 0x0123456789abull + 1000ull * i;
		r[i].n = 1 + i * 13;
		r[i].status = i % 3;
	}
	r[1].n = UINT32_MAX;
	r[2].first = 0;
	r[3].first = UINT64_MAX - 1; /* the top range: [2^64-2, 2^64-1) */
	r[3].n = 1;
	r[4].first = UINT64_MAX - UINT32_MAX;
	r[4].n = UINT32_MAX;
	for (int t = 0; t < 2; t++) {
		uint8_t type = t ? FLIT_FT_NCF : FLIT_FT_NAK;
		ranges_round_trip(type, r, 1, t ? 77 : 0);
		ranges_round_trip(type, r, 3, 5);
		ranges_round_trip(type, r, FLIT_CTL_RANGES_MAX, UINT64_MAX);
		ranges_round_trip(type, r, 90, 1); /* a 1472-byte datagram's worth */
	}
}

/* ctl.h: a NAK's status fields are written as 0 whatever the caller passed. */
static void nak_encoder_writes_status_zero(void **state)
{
	const struct flit_seq_range r[3] = {
		{ 10, 1, FLIT_NCF_GONE }, { 20, 2, 7 }, { 30, 3, UINT32_MAX },
	};
	uint8_t f[128];

	memset(f, 0xa5, sizeof(f));
	assert_int_equal(flit_ctl_ranges_encode(f, sizeof(f), FLIT_FT_NAK, 1, 0, r, 3),
			 72);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(flit_ld32(f + 24 + 16 * i + 12), 0);
	ranges_round_trip(FLIT_FT_NAK, r, 3, 0);
}

static void ranges_frame_takes_at_most_65535_ranges(void **state)
{
	const unsigned n = 65536;
	struct flit_seq_range *r = calloc(n, sizeof(*r));
	size_t cap = 24 + 16 * (size_t)n;
	uint8_t *f = malloc(cap);
	struct flit_frame_hdr h;

	assert_non_null(r);
	assert_non_null(f);
	for (unsigned i = 0; i < n; i++)
		r[i] = (struct flit_seq_range){ .first = i, .n = 1, .status = i % 3 };
	memset(f, 0xee, cap);
	assert_int_equal(flit_ctl_ranges_encode(f, cap, FLIT_FT_NCF, 1, 2, r, n), 0);
	for (size_t j = 0; j < cap; j++)
		assert_int_equal(f[j], 0xee);
	assert_int_equal(flit_ctl_ranges_encode(f, cap, FLIT_FT_NCF, 1, 2, r, n - 1),
			 cap - 16);
	check_ok(f, cap - 16, &h);
	assert_int_equal(h.count, 65535);
	struct flit_seq_range got;
	flit_ctl_range(f, 65534, &got);
	assert_int_equal(got.first, 65534);
	assert_int_equal(got.status, 65534 % 3);
	free(f);
	free(r);
}

static void info_round_trip(const struct flit_ctl_info *info,
			    const struct flit_ctl_name *t, unsigned n,
			    uint64_t next)
{
	size_t need = 48 + names_size(t, n);
	uint8_t *f = malloc(need + 64);
	struct flit_frame_hdr h;
	struct flit_ctl_info got;

	assert_non_null(f);
	memset(f, 0xa5, need + 64); /* padding must come out zero anyway */
	assert_int_equal(flit_ctl_info_encode(f, need + 64, SESSION, next, info, t, n),
			 need);
	for (size_t j = need; j < need + 64; j++)
		assert_int_equal(f[j], 0xa5);
	check_ok(f, need, &h);
	assert_int_equal(h.type, FLIT_FT_INFO);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.session_id, SESSION);
	assert_int_equal(h.seq, next);
	memset(&got, 0xcc, sizeof(got));
	flit_ctl_info_get(f, &got);
	assert_int_equal(got.domain, info->domain);
	assert_int_equal(got.mode, info->mode);
	assert_int_equal(got.data_port, info->data_port);
	assert_int_equal(got.data_addr, info->data_addr);
	assert_int_equal(got.ctl_addr, info->ctl_addr);
	assert_int_equal(got.ctl_port, info->ctl_port);
	assert_int_equal(got.pid, info->pid);
	assert_int_equal(flit_ctl_domain(f), info->domain);
	expect_names(f, &h, t, n);
	free(f);
}

static void info_round_trips(void **state)
{
	struct flit_ctl_info mc = g_info();
	struct flit_ctl_info uc = {
		.domain = flit_domain_id("prod"), .mode = FLIT_MODE_UNICAST,
		.data_port = 30001, .data_addr = 0, .ctl_addr = 0,
		.ctl_port = 30001, .pid = UINT32_MAX,
	};
	struct flit_ctl_info odd = {
		.domain = UINT32_MAX, .mode = FLIT_MODE_MCAST, .data_port = UINT16_MAX,
		.data_addr = UINT32_MAX, .ctl_addr = inet_addr("10.0.0.1"),
		.ctl_port = UINT16_MAX, .pid = 0,
	};
	static struct names s;

	info_round_trip(&mc, g_topics, 2, 1000);
	info_round_trip(&uc, NULL, 0, 0);
	info_round_trip(&mc, g_topics, 0, UINT64_MAX);
	names_make(&s, FLIT_CTL_NAMES_MAX, false, 1);
	info_round_trip(&uc, s.e, s.n, 12345);
	names_make(&s, FLIT_CTL_NAMES_MAX * 4, false, 2);
	info_round_trip(&odd, s.e, s.n, 1);
}

/* Addresses travel as the bytes of a struct in_addr, i.e. the dotted quad. */
static void info_addresses_are_in_network_order(void **state)
{
	uint8_t f[64];
	struct flit_ctl_info i = g_info();

	assert_int_equal(flit_ctl_info_encode(f, sizeof(f), 1, 1, &i, NULL, 0), 48);
	assert_memory_equal(f + 32, "\xef\x01\x02\x03", 4);
	assert_memory_equal(f + 36, "\xc0\xa8\x01\x0a", 4);
	assert_int_equal(flit_ld16(f + 30), 24000);
	assert_int_equal(flit_ld16(f + 40), 24001);
}

static void every_allowed_name_byte_round_trips(void **state)
{
	static char bytes[N_NAME_BYTES];
	struct flit_ctl_name t[2];
	struct flit_ctl_info i = g_info();

	for (unsigned k = 0; k < N_NAME_BYTES; k++)
		bytes[k] = name_byte(k);
	/* 223 bytes: 0x20..0x7e then 0x80..0xff, in two entries */
	t[0] = (struct flit_ctl_name){ .idx = 1, .len = 200, .name = bytes };
	t[1] = (struct flit_ctl_name){ .idx = 2, .len = N_NAME_BYTES - 200,
				       .name = bytes + 200 };
	info_round_trip(&i, t, 2, 1);
	assert_int_equal((uint8_t)bytes[0], 0x20);
	assert_int_equal((uint8_t)bytes[94], 0x7e);
	assert_int_equal((uint8_t)bytes[95], 0x80);
	assert_int_equal((uint8_t)bytes[N_NAME_BYTES - 1], 0xff);
}

static void query_round_trip(uint32_t session, uint32_t domain,
			     const struct flit_ctl_name *q, unsigned n)
{
	size_t need = 32 + names_size(q, n);
	uint8_t *f = malloc(need + 64);
	struct flit_frame_hdr h;

	assert_non_null(f);
	memset(f, 0xa5, need + 64);
	assert_int_equal(flit_ctl_query_encode(f, need + 64, session, domain, q, n),
			 need);
	for (size_t j = need; j < need + 64; j++)
		assert_int_equal(f[j], 0xa5);
	check_ok(f, need, &h);
	assert_int_equal(h.type, FLIT_FT_QUERY);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.session_id, session);
	assert_int_equal(h.seq, 0);
	assert_int_equal(flit_ctl_domain(f), domain);
	expect_names(f, &h, q, n);
	free(f);
}

static void query_round_trips(void **state)
{
	static struct names s;

	query_round_trip(0, DOMAIN_DEFAULT, g_query, 2);
	query_round_trip(SESSION, DOMAIN_DEFAULT, NULL, 0); /* who is SESSION? */
	query_round_trip(SESSION, 1, g_query, 1);
	names_make(&s, FLIT_CTL_NAMES_MAX, true, 3);
	query_round_trip(0, UINT32_MAX, s.e, s.n);
	names_make(&s, FLIT_CTL_NAMES_MAX * 4, true, 4);
	query_round_trip(0, 0, s.e, s.n);
}

static void join_round_trips(void **state)
{
	static const uint16_t flags[] = { 0, FLIT_JF_LEAVE };
	uint8_t f[64];
	struct flit_frame_hdr h;

	for (int i = 0; i < 2; i++) {
		memset(f, 0xa5, sizeof(f));
		assert_int_equal(flit_ctl_join_encode(f, sizeof(f), SESSION + (uint32_t)i,
						      0xabcdef01u, flags[i]), 32);
		for (size_t j = 32; j < sizeof(f); j++)
			assert_int_equal(f[j], 0xa5);
		check_ok(f, 32, &h);
		assert_int_equal(h.type, FLIT_FT_JOIN);
		assert_int_equal(h.flags, flags[i]);
		assert_int_equal(h.count, 0);
		assert_int_equal(h.session_id, SESSION + (uint32_t)i);
		assert_int_equal(h.seq, 0);
		assert_int_equal(flit_ctl_domain(f), 0xabcdef01u);
	}
}

static void names_frame_takes_at_most_65535_entries(void **state)
{
	const unsigned n = 65536;
	struct flit_ctl_name *t = calloc(n, sizeof(*t));
	size_t cap = 48 + 16 * (size_t)n;
	uint8_t *f = malloc(cap);
	struct flit_ctl_info info = g_info();
	struct flit_frame_hdr h;

	assert_non_null(t);
	assert_non_null(f);
	for (unsigned i = 0; i < n; i++)
		t[i] = (struct flit_ctl_name){ .idx = i, .len = 1, .name = "t" };
	memset(f, 0xee, cap);
	assert_int_equal(flit_ctl_info_encode(f, cap, 1, 1, &info, t, n), 0);
	for (unsigned i = 0; i < n; i++)
		t[i].idx = 0;
	assert_int_equal(flit_ctl_query_encode(f, cap, 0, 1, t, n), 0);
	for (size_t j = 0; j < cap; j++)
		assert_int_equal(f[j], 0xee);
	for (unsigned i = 0; i < n; i++)
		t[i].idx = i;
	assert_int_equal(flit_ctl_info_encode(f, cap, 1, 1, &info, t, n - 1),
			 cap - 16);
	check_ok(f, cap - 16, &h);
	expect_names(f, &h, t, n - 1);
	free(f);
	free(t);
}

/* Only INFO and QUERY frames have name entries. */
static void names_iterator_is_empty_for_frames_without_names(void **state)
{
	static const uint8_t types[] = { FLIT_FT_HB, FLIT_FT_NAK, FLIT_FT_NCF,
					 FLIT_FT_JOIN };
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	struct flit_frame_hdr h;

	for (size_t i = 0; i < sizeof(types); i++) {
		const struct golden *g = golden_of(types[i]);
		check_ok(g->bytes, g->len, &h);
		flit_ctl_names_init(&it, g->bytes, &h);
		assert_false(flit_ctl_names_next(&it, &nm));
	}
	/* an INFO frame without topics */
	uint8_t f[64];
	struct flit_ctl_info info = g_info();
	assert_int_equal(flit_ctl_info_encode(f, sizeof(f), 1, 1, &info, NULL, 0), 48);
	check_ok(f, 48, &h);
	flit_ctl_names_init(&it, f, &h);
	assert_false(flit_ctl_names_next(&it, &nm));
}

/* ---- golden bytes -------------------------------------------------------- */

static void encoders_match_protocol_doc_golden_bytes(void **state)
{
	uint8_t f[BUFSZ];

	for (size_t i = 0; i < N_GOLDEN; i++) {
		const struct golden *g = &goldens[i];
		memset(f, 0xcc, sizeof(f));
		size_t n = g->encode(f, sizeof(f));
		if (n != g->len || memcmp(f, g->bytes, g->len) != 0)
			fail_msg("%s: encoder output differs from the golden bytes",
				 g->name);
		for (size_t j = n; j < sizeof(f); j++)
			assert_int_equal(f[j], 0xcc);
	}
}

/* The document's bytes decode to the document's values. */
static void golden_frames_decode_to_documented_values(void **state)
{
	struct flit_frame_hdr h;
	struct flit_seq_range r;
	struct flit_ctl_info info, want = g_info();

	check_ok(golden_hb, sizeof(golden_hb), &h);
	assert_int_equal(h.type, FLIT_FT_HB);
	assert_int_equal(h.session_id, SESSION);
	assert_int_equal(h.seq, 1000);
	assert_int_equal(flit_ctl_hb_trail(golden_hb), 900);

	check_ok(golden_nak, sizeof(golden_nak), &h);
	assert_int_equal(h.type, FLIT_FT_NAK);
	assert_int_equal(h.count, 2);
	for (unsigned i = 0; i < 2; i++) {
		flit_ctl_range(golden_nak, i, &r);
		assert_int_equal(r.first, g_nak[i].first);
		assert_int_equal(r.n, g_nak[i].n);
		assert_int_equal(r.status, 0);
	}

	check_ok(golden_ncf, sizeof(golden_ncf), &h);
	assert_int_equal(h.type, FLIT_FT_NCF);
	assert_int_equal(h.count, 3);
	assert_int_equal(h.seq, 1000);
	for (unsigned i = 0; i < 3; i++) {
		flit_ctl_range(golden_ncf, i, &r);
		assert_int_equal(r.first, g_ncf[i].first);
		assert_int_equal(r.n, g_ncf[i].n);
		assert_int_equal(r.status, g_ncf[i].status);
	}

	check_ok(golden_info, sizeof(golden_info), &h);
	assert_int_equal(h.type, FLIT_FT_INFO);
	assert_int_equal(h.seq, 1000);
	flit_ctl_info_get(golden_info, &info);
	assert_int_equal(info.domain, DOMAIN_DEFAULT);
	assert_int_equal(info.mode, FLIT_MODE_MCAST);
	assert_int_equal(info.data_port, 24000);
	assert_int_equal(info.data_addr, want.data_addr);
	assert_int_equal(info.ctl_addr, want.ctl_addr);
	assert_int_equal(info.ctl_port, 24001);
	assert_int_equal(info.pid, 4242);
	expect_names(golden_info, &h, g_topics, 2);

	check_ok(golden_info_rdma_mc, sizeof(golden_info_rdma_mc), &h);
	assert_int_equal(h.seq, 0);
	flit_ctl_info_get(golden_info_rdma_mc, &info);
	assert_int_equal(info.mode, FLIT_MODE_RDMA_MCAST);
	assert_int_equal(info.data_port, 14401);
	assert_int_equal(info.data_addr, inet_addr("239.192.78.9"));
	assert_int_equal(info.ctl_port, 40000);
	expect_names(golden_info_rdma_mc, &h, g_rdma_mc, 1);

	check_ok(golden_query, sizeof(golden_query), &h);
	assert_int_equal(h.type, FLIT_FT_QUERY);
	assert_int_equal(h.session_id, 0);
	assert_int_equal(flit_ctl_domain(golden_query), DOMAIN_DEFAULT);
	expect_names(golden_query, &h, g_query, 2);

	check_ok(golden_join, sizeof(golden_join), &h);
	assert_int_equal(h.type, FLIT_FT_JOIN);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.session_id, SESSION);
	assert_int_equal(flit_ctl_domain(golden_join), DOMAIN_DEFAULT);

	struct flit_ctl_late late;
	check_ok(golden_late, sizeof(golden_late), &h);
	assert_int_equal(h.type, FLIT_FT_LATE);
	assert_int_equal(h.seq, 1000);
	flit_ctl_late_get(golden_late, &late);
	assert_int_equal(late.trail, 900);
	assert_int_equal(late.origin, 0);
	assert_int_equal(late.age_ns, 2500000000ull);
	assert_int_equal(late.late_join, 500);
}

/* LATE: trail and origin after the live start, a reserved byte, a count or
 * a length off: refused; the encoder refuses the same values. */
static void late_is_checked(void **state)
{
	uint8_t buf[BUFSZ];
	struct flit_ctl_late l = g_late;

	(void)state;
	memcpy(buf, golden_late, sizeof(golden_late));
	flit_st64(buf + 24, 1001);                  /* trail > seq */
	expect_err(buf, sizeof(golden_late), FLIT_FE_COUNT);
	memcpy(buf, golden_late, sizeof(golden_late));
	flit_st64(buf + 32, 1001);                  /* origin > seq */
	expect_err(buf, sizeof(golden_late), FLIT_FE_COUNT);
	memcpy(buf, golden_late, sizeof(golden_late));
	buf[55] = 1;                                /* reserved */
	expect_err(buf, sizeof(golden_late), FLIT_FE_MSG_FLAGS);
	memcpy(buf, golden_late, sizeof(golden_late));
	flit_st16(buf + 6, 1);                      /* count */
	expect_err(buf, sizeof(golden_late), FLIT_FE_COUNT);
	l.trail = 1001;
	assert_int_equal(flit_ctl_late_encode(buf, sizeof(buf), SESSION, 1000, &l), 0);
	l = g_late;
	l.origin = 1001;
	assert_int_equal(flit_ctl_late_encode(buf, sizeof(buf), SESSION, 1000, &l), 0);
	assert_int_equal(flit_ctl_late_encode(buf, 55, SESSION, 1000, &g_late), 0);
	/* JOIN: leave and late together mean nothing */
	assert_int_equal(flit_ctl_join_encode(buf, sizeof(buf), SESSION, 1,
					      FLIT_JF_LEAVE | FLIT_JF_LATE), 0);
	memcpy(buf, golden_join, sizeof(golden_join));
	flit_st16(buf + 4, FLIT_JF_LEAVE | FLIT_JF_LATE);
	expect_err(buf, sizeof(golden_join), FLIT_FE_FLAGS);
}

/* docs/PROTOCOL.md, found from the working directory (make check runs at the
 * top of the tree), from this file's path, or from the binary's
 * (<tree>/<build>/tests/test_ctl).  NULL if none works. */
static char *read_protocol_doc(void)
{
	static char path[4096], exe_path[4096];
	const char *src = __FILE__;
	const char *t = strstr(src, "tests/test_ctl.c");
	const char *cands[3] = { "docs/PROTOCOL.md", NULL, NULL };

	if (t) {
		snprintf(path, sizeof(path), "%.*sdocs/PROTOCOL.md",
			 (int)(t - src), src);
		cands[1] = path;
	}
	ssize_t n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 32);
	if (n > 0) {
		exe_path[n] = 0;
		for (int up = 0; up < 3; up++) { /* strip /test_ctl, /tests, /<build> */
			char *slash = strrchr(exe_path, '/');
			if (slash)
				*slash = 0;
		}
		strcat(exe_path, "/docs/PROTOCOL.md");
		cands[2] = exe_path;
	}
	for (int i = 0; i < 3; i++) {
		if (!cands[i])
			continue;
		FILE *fp = fopen(cands[i], "r");
		if (!fp)
			continue;
		char *doc = NULL;
		size_t len = 0, cap = 0, got;
		char chunk[4096];
		while ((got = fread(chunk, 1, sizeof(chunk), fp)) > 0) {
			if (len + got + 1 > cap) {
				cap = (len + got + 1) * 2;
				doc = realloc(doc, cap);
				assert_non_null(doc);
			}
			memcpy(doc + len, chunk, got);
			len += got;
		}
		fclose(fp);
		if (!doc)
			continue;
		doc[len] = 0;
		return doc;
	}
	return NULL;
}

/*
 * The bytes of the annotated dump after "<!-- name -->" in doc: lines
 * "  0xOFF  hh hh ...  field" inside the fenced block; offsets must follow
 * on from the bytes before them, and the last offset line ("end") has none.
 */
static size_t doc_dump(const char *doc, const char *name, uint8_t *out,
		       size_t cap)
{
	char marker[64];
	snprintf(marker, sizeof(marker), "<!-- %s -->", name);
	const char *m = strstr(doc, marker);
	if (!m)
		fail_msg("docs/PROTOCOL.md has no %s", marker);
	if (strstr(m + 1, marker))
		fail_msg("docs/PROTOCOL.md has %s twice", marker);
	const char *p = m + strlen(marker);
	while (*p == '\n' || *p == ' ')
		p++;
	if (strncmp(p, "```", 3) != 0)
		fail_msg("%s: no code block right after the marker", name);
	p = strchr(p, '\n');
	assert_non_null(p);
	p++;
	const char *end = strstr(p, "```");
	assert_non_null(end);

	size_t n = 0;
	bool ended = false;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		const char *q = p;
		while (q < eol && *q == ' ')
			q++;
		if (eol - q > 2 && q[0] == '0' && q[1] == 'x') {
			char *e;
			unsigned long off = strtoul(q + 2, &e, 16);
			if (ended)
				fail_msg("%s: bytes after the end line", name);
			if (off != n)
				fail_msg("%s: line at 0x%lx, but 0x%zx bytes came before",
					 name, off, n);
			q = e;
			size_t before = n;
			if (eol - q >= 4 && q[0] == ' ' && q[1] == ' ' &&
			    isxdigit((unsigned char)q[2])) {
				q += 2;
				while (eol - q >= 2 && isxdigit((unsigned char)q[0]) &&
				       isxdigit((unsigned char)q[1]) &&
				       (q + 2 == eol || q[2] == ' ')) {
					char hex[3] = { q[0], q[1], 0 };
					assert_true(n < cap);
					out[n++] = (uint8_t)strtoul(hex, NULL, 16);
					q += 2;
					if (eol - q >= 2 && q[0] == ' ' && q[1] != ' ')
						q++;
					else
						break;
				}
			}
			if (n == before)
				ended = true;
		}
		p = eol + 1;
	}
	if (!ended)
		fail_msg("%s: no end line", name);
	return n;
}

static void protocol_doc_dumps_match_golden_frames(void **state)
{
	char *doc = read_protocol_doc();

	if (!doc) {
		print_message("docs/PROTOCOL.md not found: run from the source tree\n");
		skip();
	}
	for (size_t i = 0; i < N_GOLDEN; i++) {
		const struct golden *g = &goldens[i];
		uint8_t bytes[BUFSZ];
		size_t n = doc_dump(doc, g->name, bytes, sizeof(bytes));
		if (n != g->len)
			fail_msg("%s: the doc shows %zu bytes, the golden frame has %zu",
				 g->name, n, g->len);
		for (size_t j = 0; j < n; j++)
			if (bytes[j] != g->bytes[j])
				fail_msg("%s: byte 0x%zx is %02x in the doc, %02x in the test",
					 g->name, j, bytes[j], g->bytes[j]);
	}
	free(doc);
}

/* ---- encoder refusals ---------------------------------------------------- */

/* Every cap below the frame's size: 0, and not one byte written (the
 * buffer ends at the guard page, so a write past cap faults).  At exactly
 * the size it fits. */
static void encoders_refuse_every_cap_below_the_frame_size(void **state)
{
	struct guard g;
	static struct names s;
	static struct flit_seq_range r[FLIT_CTL_RANGES_MAX];
	struct flit_ctl_info info = g_info();

	guard_map(&g, 8192);
	for (size_t i = 0; i < N_GOLDEN; i++) {
		const struct golden *gd = &goldens[i];
		for (size_t cap = 0; cap < gd->len; cap++) {
			uint8_t *p = g.end - cap;
			memset(p, 0xee, cap);
			if (gd->encode(p, cap) != 0)
				fail_msg("%s: encoded into %zu bytes", gd->name, cap);
			for (size_t j = 0; j < cap; j++)
				if (p[j] != 0xee)
					fail_msg("%s: cap %zu, byte %zu written",
						 gd->name, cap, j);
		}
		uint8_t *p = g.end - gd->len;
		assert_int_equal(gd->encode(p, gd->len), gd->len);
		assert_memory_equal(p, gd->bytes, gd->len);
	}

	/* larger frames: many long names, many ranges */
	names_make(&s, FLIT_CTL_NAMES_MAX, false, 9);
	size_t need = 48 + names_size(s.e, s.n);
	for (size_t cap = 0; cap < need; cap++) {
		uint8_t *p = g.end - cap;
		memset(p, 0xee, cap);
		assert_int_equal(flit_ctl_info_encode(p, cap, 1, 1, &info, s.e, s.n), 0);
		for (size_t j = 0; j < cap; j++)
			assert_int_equal(p[j], 0xee);
	}
	assert_int_equal(flit_ctl_info_encode(g.end - need, need, 1, 1, &info,
					      s.e, s.n), need);

	names_make(&s, FLIT_CTL_NAMES_MAX, true, 9);
	need = 32 + names_size(s.e, s.n);
	for (size_t cap = 0; cap < need; cap++) {
		uint8_t *p = g.end - cap;
		memset(p, 0xee, cap);
		assert_int_equal(flit_ctl_query_encode(p, cap, 0, 1, s.e, s.n), 0);
		for (size_t j = 0; j < cap; j++)
			assert_int_equal(p[j], 0xee);
	}
	assert_int_equal(flit_ctl_query_encode(g.end - need, need, 0, 1, s.e, s.n),
			 need);

	for (unsigned i = 0; i < FLIT_CTL_RANGES_MAX; i++)
		r[i] = (struct flit_seq_range){ 100u * i, 1 + i, i % 3 };
	need = 24 + 16 * FLIT_CTL_RANGES_MAX;
	for (size_t cap = 0; cap < need; cap++) {
		uint8_t *p = g.end - cap;
		memset(p, 0xee, cap);
		assert_int_equal(flit_ctl_ranges_encode(p, cap, FLIT_FT_NCF, 1, 1, r,
							FLIT_CTL_RANGES_MAX), 0);
		for (size_t j = 0; j < cap; j++)
			assert_int_equal(p[j], 0xee);
	}
	assert_int_equal(flit_ctl_ranges_encode(g.end - need, need, FLIT_FT_NCF, 1,
						1, r, FLIT_CTL_RANGES_MAX), need);
	guard_unmap(&g);
}

/* An out-of-range argument: 0 returned, the buffer untouched. */
static uint8_t rbuf[4096];
#define REFUSED(call)                                                          \
	do {                                                                   \
		memset(rbuf, 0xee, sizeof(rbuf));                              \
		assert_int_equal((call), 0);                                   \
		for (size_t j_ = 0; j_ < sizeof(rbuf); j_++)                   \
			if (rbuf[j_] != 0xee)                                  \
				fail_msg("%s wrote byte %zu", #call, j_);      \
	} while (0)

static void ranges_encoder_refuses_bad_ranges(void **state)
{
	struct flit_seq_range r[3] = { { 10, 1, 0 }, { 20, 2, 1 }, { 30, 3, 2 } };
	const size_t cap = sizeof(rbuf);

	/* no ranges */
	REFUSED(flit_ctl_ranges_encode(rbuf, cap, FLIT_FT_NAK, 1, 0, r, 0));
	REFUSED(flit_ctl_ranges_encode(rbuf, cap, FLIT_FT_NCF, 1, 0, NULL, 0));
	/* not a ranges frame type */
	static const uint8_t bad_types[] = { 0, FLIT_FT_DATA, FLIT_FT_HB,
					     FLIT_FT_INFO, FLIT_FT_QUERY,
					     FLIT_FT_JOIN, 8, 255 };
	for (size_t i = 0; i < sizeof(bad_types); i++)
		REFUSED(flit_ctl_ranges_encode(rbuf, cap, bad_types[i], 1, 0, r, 3));
	for (int t = 0; t < 2; t++) {
		uint8_t type = t ? FLIT_FT_NCF : FLIT_FT_NAK;
		for (unsigned i = 0; i < 3; i++) {
			struct flit_seq_range save = r[i];
			/* an empty range, first, middle or last */
			r[i].n = 0;
			REFUSED(flit_ctl_ranges_encode(rbuf, cap, type, 1, 0, r, 3));
			/* a range whose end wraps */
			r[i].first = UINT64_MAX - 4;
			r[i].n = 5;
			REFUSED(flit_ctl_ranges_encode(rbuf, cap, type, 1, 0, r, 3));
			r[i].first = UINT64_MAX;
			r[i].n = UINT32_MAX;
			REFUSED(flit_ctl_ranges_encode(rbuf, cap, type, 1, 0, r, 3));
			/* ... one less is the top range */
			r[i].first = UINT64_MAX - 5;
			r[i].n = 5;
			assert_int_equal(flit_ctl_ranges_encode(rbuf, cap, type, 1,
								0, r, 3), 72);
			r[i] = save;
		}
	}
	/* NCF status above FUTURE */
	static const uint32_t bad_status[] = { 3, 4, 0x80000000u, UINT32_MAX };
	for (size_t i = 0; i < 4; i++) {
		r[2].status = bad_status[i];
		REFUSED(flit_ctl_ranges_encode(rbuf, cap, FLIT_FT_NCF, 1, 0, r, 3));
		/* a NAK ignores it */
		assert_int_equal(flit_ctl_ranges_encode(rbuf, cap, FLIT_FT_NAK, 1,
							0, r, 3), 72);
	}
}

static void hb_encoder_refuses_trail_after_next(void **state)
{
	REFUSED(flit_ctl_hb_encode(rbuf, sizeof(rbuf), 1, 1000, 1001));
	REFUSED(flit_ctl_hb_encode(rbuf, sizeof(rbuf), 1, 0, UINT64_MAX));
	assert_int_equal(flit_ctl_hb_encode(rbuf, sizeof(rbuf), 1, 1000, 1000), 32);
}

static void info_encoder_takes_page_and_ended_and_refuses_other_flags(void **state)
{
	uint8_t f[BUFSZ];
	struct flit_frame_hdr h;
	struct flit_ctl_info i = g_info();
	(void)state;

	for (uint16_t fl = 0; fl < 4; fl++) {
		size_t n = flit_ctl_info_encode_flags(f, sizeof(f), fl, SESSION, 7, &i, g_page, 2);
		assert_int_equal(n, 96);
		check_ok(f, n, &h);
		assert_int_equal(h.flags, fl);
		assert_int_equal(h.count, 2);
	}
	for (int bit = 2; bit < 16; bit++)
		assert_int_equal(flit_ctl_info_encode_flags(f, sizeof(f), (uint16_t)(1u << bit), SESSION, 7,
							    &i, g_page, 2), 0);
}

static void join_encoder_refuses_unknown_flags(void **state)
{
	for (int bit = 2; bit < 16; bit++)
		REFUSED(flit_ctl_join_encode(rbuf, sizeof(rbuf), 1, 2,
					     (uint16_t)(1u << bit)));
	REFUSED(flit_ctl_join_encode(rbuf, sizeof(rbuf), 1, 2, 0xffff));
}

/* FLIT_INFOF_FINAL: only with ENDED, a number per topic after the names */
static void info_final_numbers_are_checked(void **state)
{
	uint8_t f[BUFSZ], buf[BUFSZ];
	struct flit_frame_hdr h;
	struct flit_ctl_info i = g_info();
	const uint16_t fl = FLIT_INFOF_PAGE | FLIT_INFOF_ENDED | FLIT_INFOF_FINAL;
	const uint64_t final[2] = { 0, UINT64_MAX - 1 };
	(void)state;

	size_t n = flit_ctl_info_encode_final(f, sizeof(f), fl, SESSION, 7, &i, g_page, 2, final);
	assert_int_equal(n, 96 + 16);
	check_ok(f, n, &h);
	assert_int_equal(h.flags, fl);
	assert_int_equal(flit_ctl_info_final(f, &h, 0), 0);
	assert_int_equal(flit_ctl_info_final(f, &h, 1), UINT64_MAX - 1);
	struct flit_ctl_name_iter it;
	struct flit_ctl_name nm;
	flit_ctl_names_init(&it, f, &h);
	assert_true(flit_ctl_names_next(&it, &nm) && nm.idx == 300);
	assert_true(flit_ctl_names_next(&it, &nm) && nm.idx == 301);
	assert_false(flit_ctl_names_next(&it, &nm));
	/* ENDED alone takes them too */
	assert_int_equal(flit_ctl_info_encode_final(f, sizeof(f), FLIT_INFOF_ENDED | FLIT_INFOF_FINAL,
						    SESSION, 7, &i, g_page, 2, final), 112);
	check_ok(f, 112, &h);
	/* the encoders: FINAL with its numbers, only with ENDED */
	assert_int_equal(flit_ctl_info_encode_flags(f, sizeof(f), fl, SESSION, 7, &i, g_page, 2), 0);
	assert_int_equal(flit_ctl_info_encode_final(f, sizeof(f), fl, SESSION, 7, &i, g_page, 2, NULL), 0);
	assert_int_equal(flit_ctl_info_encode_final(f, sizeof(f), FLIT_INFOF_PAGE, SESSION, 7, &i,
						    g_page, 2, final), 0);
	assert_int_equal(flit_ctl_info_encode_final(f, sizeof(f), FLIT_INFOF_PAGE | FLIT_INFOF_FINAL,
						    SESSION, 7, &i, g_page, 2, final), 0);
	assert_int_equal(flit_ctl_info_encode_final(f, 111, fl, SESSION, 7, &i, g_page, 2, final), 0);

	/* the check: FINAL without ENDED, without its numbers, or its
	 * numbers taken for a name */
	memcpy(buf, golden_info_ended_final, sizeof(golden_info_ended_final));
	flit_st16(buf + OFF_FLAGS, FLIT_INFOF_PAGE | FLIT_INFOF_FINAL);
	expect_err(buf, sizeof(golden_info_ended_final), FLIT_FE_FLAGS);
	flit_st16(buf + OFF_FLAGS, FLIT_INFOF_PAGE | FLIT_INFOF_ENDED);
	expect_err(buf, sizeof(golden_info_ended_final), FLIT_FE_COUNT);
	memcpy(buf, golden_info_ended_final, sizeof(golden_info_ended_final));
	flit_st32(buf + 8, 72);   /* len: the numbers cut off (the name then runs past) */
	expect_err(buf, 72, FLIT_FE_MSG_LEN);
	flit_st32(buf + 8, 48);   /* room for neither */
	expect_err(buf, 48, FLIT_FE_COUNT);
	memcpy(buf, golden_info_page, sizeof(golden_info_page));
	flit_st16(buf + OFF_FLAGS, FLIT_INFOF_PAGE | FLIT_INFOF_ENDED | FLIT_INFOF_FINAL);
	expect_err(buf, sizeof(golden_info_page), FLIT_FE_MSG_LEN);  /* no numbers: names run past */

	/* FLIT_INFOF_NEXT: the same layout, only without ENDED */
	const uint16_t nx = FLIT_INFOF_PAGE | FLIT_INFOF_NEXT;
	n = flit_ctl_info_encode_final(f, sizeof(f), nx, SESSION, 7, &i, g_page, 2, final);
	assert_int_equal(n, 96 + 16);
	check_ok(f, n, &h);
	assert_int_equal(h.flags, nx);
	assert_int_equal(flit_ctl_info_final(f, &h, 1), UINT64_MAX - 1);
	assert_int_equal(flit_ctl_info_encode_flags(f, sizeof(f), nx, SESSION, 7, &i, g_page, 2), 0);
	assert_int_equal(flit_ctl_info_encode_final(f, sizeof(f), nx, SESSION, 7, &i, g_page, 2, NULL), 0);
	assert_int_equal(flit_ctl_info_encode_final(f, sizeof(f), nx | FLIT_INFOF_ENDED, SESSION, 7, &i,
						    g_page, 2, final), 0);
	assert_int_equal(flit_ctl_info_encode_final(f, sizeof(f), FLIT_INFOF_NUMS | FLIT_INFOF_ENDED,
						    SESSION, 7, &i, g_page, 2, final), 0);
	memcpy(buf, golden_info_page_next, sizeof(golden_info_page_next));
	flit_st16(buf + OFF_FLAGS, nx | FLIT_INFOF_ENDED);           /* NEXT of ended topics */
	expect_err(buf, sizeof(golden_info_page_next), FLIT_FE_FLAGS);
	flit_st16(buf + OFF_FLAGS, FLIT_INFOF_PAGE);                  /* the number taken for a name */
	expect_err(buf, sizeof(golden_info_page_next), FLIT_FE_COUNT);
	memcpy(buf, golden_info_page, sizeof(golden_info_page));
	flit_st16(buf + OFF_FLAGS, nx);
	expect_err(buf, sizeof(golden_info_page), FLIT_FE_MSG_LEN);   /* no numbers: names run past */
}

static void info_encoder_refuses_unknown_mode(void **state)
{
	struct flit_ctl_info i = g_info();

	for (unsigned m = 0; m < 256; m++) {
		if (m >= FLIT_MODE_MCAST && m <= FLIT_MODE_RDMA_MCAST)
			continue;
		i.mode = (uint8_t)m;
		REFUSED(flit_ctl_info_encode(rbuf, sizeof(rbuf), 1, 1, &i, g_topics, 2));
		REFUSED(flit_ctl_info_encode(rbuf, sizeof(rbuf), 1, 1, &i, NULL, 0));
	}
}

/* A bad name, at every position of a three-name list, in INFO and QUERY. */
static void name_encoders_refuse_bad_names(void **state)
{
	static const uint8_t bad_bytes[] = { 0x00, 0x01, 0x09, 0x0a, 0x0d, 0x1b,
					     0x1f, 0x7f };
	struct flit_ctl_info info = g_info();
	char nb[300];

	for (int q = 0; q < 2; q++) {
		for (unsigned pos = 0; pos < 3; pos++) {
			struct flit_ctl_name e[3] = {
				{ .len = 3, .name = "abc" },
				{ .len = 4, .name = "defg" },
				{ .len = 5, .name = "hijkl" },
			};
			for (unsigned i = 0; i < 3; i++)
				e[i].idx = q ? 0 : i;
			struct flit_ctl_name good = e[pos];
#define ENC() (q ? flit_ctl_query_encode(rbuf, sizeof(rbuf), 0, 1, e, 3)      \
		 : flit_ctl_info_encode(rbuf, sizeof(rbuf), 1, 1, &info, e, 3))
			assert_true(ENC() > 0);
			/* length 0, 256 and more */
			e[pos].len = 0;
			REFUSED(ENC());
			e[pos].name = NULL;
			REFUSED(ENC());
			memset(nb, 'x', sizeof(nb));
			e[pos].name = nb;
			e[pos].len = 256;
			REFUSED(ENC());
			e[pos].len = UINT16_MAX;
			REFUSED(ENC());
			e[pos].len = 255;
			assert_true(ENC() > 0);
			/* a forbidden byte at the start, middle or end */
			for (size_t b = 0; b < sizeof(bad_bytes); b++) {
				for (unsigned at = 0; at < 255; at += 127) {
					nb[at] = (char)bad_bytes[b];
					REFUSED(ENC());
					nb[at] = 'x';
				}
			}
			e[pos] = good;
			/* kinds */
			e[pos].kind = FLIT_NAME_PATTERN;
			if (q)
				assert_true(ENC() > 0);
			else
				REFUSED(ENC()); /* INFO topics are EXACT */
			for (unsigned k = 2; k < 256; k++) {
				e[pos].kind = (uint8_t)k;
				REFUSED(ENC());
			}
			e[pos] = good;
			/* a QUERY name's idx is 0; an INFO topic's is anything */
			e[pos].idx = q ? 1 : UINT32_MAX;
			if (q)
				REFUSED(ENC());
			else
				assert_true(ENC() > 0);
#undef ENC
		}
	}
	/* n > 0 without an array */
	REFUSED(flit_ctl_query_encode(rbuf, sizeof(rbuf), 0, 1, NULL, 1));
	REFUSED(flit_ctl_info_encode(rbuf, sizeof(rbuf), 1, 1, &info, NULL, 1));
	REFUSED(flit_ctl_info_encode(rbuf, sizeof(rbuf), 1, 1, NULL, NULL, 0));
}

/* ---- rejection of malformed frames --------------------------------------- */

static void check_accepts_golden_frames_with_bytes_after_them(void **state)
{
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < N_GOLDEN; i++) {
		const struct golden *g = &goldens[i];
		put_golden(buf, g);
		expect_err_in(g, buf, g->len, FLIT_FE_OK);
		memset(buf + g->len, 0xff, BUFSZ - g->len);
		expect_err_in(g, buf, BUFSZ, FLIT_FE_OK);
	}
}

/* The fixed part of each type: what a cut frame whose len agrees gives. */
static size_t fixed_len(uint8_t type)
{
	switch (type) {
	case FLIT_FT_INFO:
		return 48;
	case FLIT_FT_QUERY:
		return 32;
	default:
		return SIZE_MAX; /* the whole frame is fixed by count */
	}
}

static void check_rejects_truncated_frames_of_every_type(void **state)
{
	struct guard g;
	struct flit_frame_hdr h;

	guard_map(&g, 4096);
	for (size_t i = 0; i < N_GOLDEN; i++) {
		const struct golden *gd = &goldens[i];
		uint8_t *p = guard_place(&g, gd->bytes, gd->len);
		expect_err_in(gd, p, gd->len, FLIT_FE_OK);

		/* the buffer cut: the header's len no longer fits */
		for (size_t l = 0; l < gd->len; l++) {
			p = guard_place(&g, gd->bytes, l);
			expect_err_in(gd, p, l, l < FLIT_FRAME_HDR_LEN ? FLIT_FE_SHORT
								       : FLIT_FE_LEN);
		}
		/* the frame cut and its len made to agree: the body walk meets
		 * the end of the buffer */
		for (size_t l = FLIT_FRAME_HDR_LEN; l < gd->len; l++) {
			p = guard_place(&g, gd->bytes, l);
			flit_st32(p + OFF_LEN, (uint32_t)l);
			enum flit_frame_err e = flit_ctl_check(p, l, &h);
			if (l & 7)
				assert_int_equal(e, FLIT_FE_LEN);
			else if (l < fixed_len(gd->type))
				assert_int_equal(e, FLIT_FE_COUNT);
			else if (e != FLIT_FE_COUNT && e != FLIT_FE_MSG_LEN)
				fail_msg("%s cut to %zu: %s", gd->name, l,
					 flit_frame_strerr(e));
		}
	}
	guard_unmap(&g);
}

static void check_rejects_bad_magic(void **state)
{
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < N_GOLDEN; i++) {
		const struct golden *g = &goldens[i];
		put_golden(buf, g);
		buf[0] = 'L';
		buf[1] = 'F';
		expect_err_in(g, buf, g->len, FLIT_FE_MAGIC);
		for (int byte = 0; byte < 2; byte++)
			for (int bit = 0; bit < 8; bit++) {
				put_golden(buf, g);
				buf[byte] ^= (uint8_t)(1u << bit);
				expect_err_in(g, buf, g->len, FLIT_FE_MAGIC);
			}
	}
}

static void check_rejects_bad_version(void **state)
{
	static const uint8_t bad[] = { 0, 2, 3, 0x81, 0xff };
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < N_GOLDEN; i++)
		for (size_t v = 0; v < sizeof(bad); v++) {
			put_golden(buf, &goldens[i]);
			buf[OFF_VERSION] = bad[v];
			expect_err_in(&goldens[i], buf, goldens[i].len,
				      FLIT_FE_VERSION);
		}
}

static void check_rejects_data_and_unknown_types(void **state)
{
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < N_GOLDEN; i++)
		for (unsigned t = 0; t < 256; t++) {
			if (t >= FLIT_FT_HB && t <= FLIT_FT_LATE)
				continue;
			put_golden(buf, &goldens[i]);
			buf[OFF_TYPE] = (uint8_t)t;
			expect_err_in(&goldens[i], buf, BUFSZ, FLIT_FE_TYPE);
		}
}

/* A real DATA frame is for flit_frame_validate(), not flit_ctl_check(). */
static void check_rejects_a_data_frame(void **state)
{
	uint8_t f[128];
	struct flit_frame_hdr h;
	const uint32_t topic = 7, len = 5;
	const void *pl = "hello";

	size_t n = flit_frame_encode(f, sizeof(f), 0, SESSION, 1000, 1, &topic,
				     &pl, &len, NULL);
	assert_int_equal(n, 40);
	assert_int_equal(flit_frame_validate(f, n, &h), FLIT_FE_OK);
	expect_err(f, n, FLIT_FE_TYPE);
	n = flit_frame_encode(f, sizeof(f), 0, SESSION, 0, 0, NULL, NULL, NULL, NULL);
	assert_int_equal(n, 24);
	expect_err(f, n, FLIT_FE_TYPE);
}

static void check_rejects_unknown_flags(void **state)
{
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < N_GOLDEN; i++) {
		const struct golden *g = &goldens[i];
		/* FINAL and NEXT change the body (info_final_numbers_are_checked) */
		if (g->type == FLIT_FT_INFO && (flit_ld16(g->bytes + OFF_FLAGS) & FLIT_INFOF_NUMS))
			continue;
		for (int bit = 0; bit < 16; bit++) {
			uint16_t f = (uint16_t)(1u << bit);
			put_golden(buf, g);
			flit_st16(buf + OFF_FLAGS, f);
			if (g->type == FLIT_FT_INFO && (f & FLIT_INFOF_NUMS)) {
				/* without their numbers: refused all the same */
				struct flit_frame_hdr hh;
				assert_int_not_equal(flit_ctl_check(buf, g->len, &hh), FLIT_FE_OK);
				continue;
			}
			bool known = (f & known_flags(g->type)) == f;
			expect_err_in(g, buf, g->len,
				      known ? FLIT_FE_OK : FLIT_FE_FLAGS);
		}
		put_golden(buf, g);
		flit_st16(buf + OFF_FLAGS, 0xffff);
		expect_err_in(g, buf, g->len, FLIT_FE_FLAGS);
		/* DATA's flags mean nothing here (INFO's bits 0 and 1 are its
		 * own: PAGE and ENDED) */
		flit_st16(buf + OFF_FLAGS, FLIT_FF_TS | FLIT_FF_RETX);
		expect_err_in(g, buf, g->len,
			      g->type == FLIT_FT_INFO ? FLIT_FE_OK : FLIT_FE_FLAGS);
	}
}

static void check_rejects_bad_frame_length(void **state)
{
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < N_GOLDEN; i++) {
		const struct golden *g = &goldens[i];
		/* unaligned */
		for (uint32_t l = (uint32_t)g->len - 7; l < g->len + 8; l++) {
			if (l == g->len)
				continue;
			put_golden(buf, g);
			flit_st32(buf + OFF_LEN, l);
			expect_err_in(g, buf, BUFSZ, FLIT_FE_LEN);
		}
		/* below the header */
		for (uint32_t l = 0; l < FLIT_FRAME_HDR_LEN; l++) {
			put_golden(buf, g);
			flit_st32(buf + OFF_LEN, l);
			expect_err_in(g, buf, BUFSZ, FLIT_FE_LEN);
		}
		/* past the buffer */
		put_golden(buf, g);
		for (size_t l = FLIT_FRAME_HDR_LEN; l < g->len; l++)
			expect_err_in(g, buf, l, FLIT_FE_LEN);
		flit_st32(buf + OFF_LEN, BUFSZ + 8);
		expect_err_in(g, buf, BUFSZ, FLIT_FE_LEN);
		flit_st32(buf + OFF_LEN, 0xfffffff8u);
		expect_err_in(g, buf, BUFSZ, FLIT_FE_LEN);
	}
}

/* len 8 more than the body, the extra bytes zero (or anything): left over. */
static void check_rejects_trailing_bytes_inside_len(void **state)
{
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < N_GOLDEN; i++) {
		const struct golden *g = &goldens[i];
		for (uint32_t extra = 8; extra <= 64; extra += 8) {
			put_golden(buf, g);
			flit_st32(buf + OFF_LEN, (uint32_t)g->len + extra);
			expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
			memset(buf + g->len, 0x41, extra);
			expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
		}
	}
}

static void check_rejects_hb_and_join_with_a_count(void **state)
{
	static const uint16_t bad[] = { 1, 2, 0xffff };
	uint8_t buf[BUFSZ];

	for (int j = 0; j < 2; j++) {
		const struct golden *g = golden_of(j ? FLIT_FT_JOIN : FLIT_FT_HB);
		for (size_t i = 0; i < 3; i++) {
			put_golden(buf, g);
			flit_st16(buf + OFF_COUNT, bad[i]);
			expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
		}
	}
}

static void check_rejects_hb_trail_after_next(void **state)
{
	uint8_t buf[BUFSZ];

	put_golden(buf, golden_of(FLIT_FT_HB));
	flit_st64(buf + OFF_BODY, 1001); /* next is 1000 */
	expect_err(buf, 32, FLIT_FE_COUNT);
	flit_st64(buf + OFF_BODY, UINT64_MAX);
	expect_err(buf, 32, FLIT_FE_COUNT);
	flit_st64(buf + OFF_BODY, 1000); /* nothing retained */
	expect_err(buf, 32, FLIT_FE_OK);
	flit_st64(buf + OFF_SEQ, 0);
	flit_st64(buf + OFF_BODY, 0);
	expect_err(buf, 32, FLIT_FE_OK);
	flit_st64(buf + OFF_BODY, 1);
	expect_err(buf, 32, FLIT_FE_COUNT);
}

static void check_rejects_range_count_lies(void **state)
{
	uint8_t buf[BUFSZ];

	for (int t = 0; t < 2; t++) {
		const struct golden *g = golden_of(t ? FLIT_FT_NCF : FLIT_FT_NAK);
		uint16_t have = (uint16_t)((g->len - 24) / 16);
		/* no ranges at all: count 0, with or without the body */
		put_golden(buf, g);
		flit_st16(buf + OFF_COUNT, 0);
		expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
		flit_st32(buf + OFF_LEN, 24);
		expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
		/* too many */
		const uint16_t more[] = { (uint16_t)(have + 1), (uint16_t)(have + 2),
					  100, 0xffff };
		for (int i = 0; i < 4; i++) {
			put_golden(buf, g);
			flit_st16(buf + OFF_COUNT, more[i]);
			expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
		}
		/* too few */
		for (uint16_t c = 1; c < have; c++) {
			put_golden(buf, g);
			flit_st16(buf + OFF_COUNT, c);
			expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
		}
		/* len half a range more or less */
		put_golden(buf, g);
		flit_st32(buf + OFF_LEN, (uint32_t)g->len - 8);
		expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
		flit_st32(buf + OFF_LEN, (uint32_t)g->len + 8);
		expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
	}
}

static void check_rejects_empty_and_wrapping_ranges(void **state)
{
	uint8_t buf[BUFSZ];

	for (int t = 0; t < 2; t++) {
		const struct golden *g = golden_of(t ? FLIT_FT_NCF : FLIT_FT_NAK);
		unsigned have = (unsigned)(g->len - 24) / 16;
		for (unsigned i = 0; i < have; i++) {
			uint8_t *r = buf + 24 + 16 * i;
			put_golden(buf, g);
			flit_st32(r + 8, 0); /* n = 0 */
			expect_err_in(g, buf, g->len, FLIT_FE_COUNT);
			flit_st32(r + 8, 5);
			flit_st64(r, UINT64_MAX - 4); /* end = 2^64 */
			expect_err_in(g, buf, g->len, FLIT_FE_COUNT);
			flit_st64(r, UINT64_MAX);
			flit_st32(r + 8, 1);
			expect_err_in(g, buf, g->len, FLIT_FE_COUNT);
			flit_st32(r + 8, UINT32_MAX);
			expect_err_in(g, buf, g->len, FLIT_FE_COUNT);
			flit_st64(r, UINT64_MAX - 5); /* end = 2^64 - 1: fine */
			flit_st32(r + 8, 5);
			expect_err_in(g, buf, g->len, FLIT_FE_OK);
			flit_st64(r, UINT64_MAX - UINT32_MAX);
			flit_st32(r + 8, UINT32_MAX);
			expect_err_in(g, buf, g->len, FLIT_FE_OK);
		}
	}
}

static void check_rejects_bad_range_status(void **state)
{
	static const uint32_t bad_ncf[] = { 3, 4, 0x100, 0x80000000u, UINT32_MAX };
	static const uint32_t bad_nak[] = { 1, 2, 3, 0x100, UINT32_MAX };
	uint8_t buf[BUFSZ];

	for (int t = 0; t < 2; t++) {
		const struct golden *g = golden_of(t ? FLIT_FT_NCF : FLIT_FT_NAK);
		unsigned have = (unsigned)(g->len - 24) / 16;
		for (unsigned i = 0; i < have; i++)
			for (size_t b = 0; b < 5; b++) {
				put_golden(buf, g);
				flit_st32(buf + 24 + 16 * i + 12, t ? bad_ncf[b] : bad_nak[b]);
				expect_err_in(g, buf, g->len, FLIT_FE_MSG_FLAGS);
			}
		/* the valid NCF statuses */
		if (t)
			for (uint32_t s = 0; s <= FLIT_NCF_FUTURE; s++) {
				put_golden(buf, g);
				flit_st32(buf + 24 + 12, s);
				expect_err_in(g, buf, g->len, FLIT_FE_OK);
			}
	}
}

static void check_rejects_unknown_info_mode(void **state)
{
	uint8_t buf[BUFSZ];
	const struct golden *g = golden_of(FLIT_FT_INFO);

	for (unsigned m = 0; m < 256; m++) {
		put_golden(buf, g);
		buf[28] = (uint8_t)m;
		expect_err(buf, g->len, m >= FLIT_MODE_MCAST && m <= FLIT_MODE_RDMA_MCAST
					       ? FLIT_FE_OK : FLIT_FE_MSG_FLAGS);
	}
}

/* Every bit of every reserved field of the fixed bodies. */
static void check_rejects_non_zero_reserved_fields(void **state)
{
	static const struct { uint8_t type; unsigned off, len; } rsv[] = {
		{ FLIT_FT_INFO, 29, 1 },  { FLIT_FT_INFO, 42, 2 },
		{ FLIT_FT_QUERY, 28, 4 }, { FLIT_FT_JOIN, 28, 4 },
	};
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < sizeof(rsv) / sizeof(rsv[0]); i++) {
		const struct golden *g = golden_of(rsv[i].type);
		for (unsigned byte = 0; byte < rsv[i].len; byte++)
			for (int bit = 0; bit < 8; bit++) {
				put_golden(buf, g);
				assert_int_equal(buf[rsv[i].off + byte], 0);
				buf[rsv[i].off + byte] = (uint8_t)(1u << bit);
				expect_err_in(g, buf, g->len, FLIT_FE_MSG_FLAGS);
			}
	}
}

/* The name entries of the INFO and QUERY goldens: offset of each entry. */
struct entries {
	const struct golden *g;
	unsigned n;
	unsigned off[2];
	unsigned len[2];
};

static struct entries entries_of(uint8_t type)
{
	struct entries e = { .g = golden_of(type), .n = 2 };
	const uint8_t *f = e.g->bytes;
	unsigned off = type == FLIT_FT_INFO ? 48 : 32;

	for (unsigned i = 0; i < 2; i++) {
		e.off[i] = off;
		e.len[i] = flit_ld16(f + off + 6);
		off += 8 + (unsigned)flit_align8(e.len[i]);
	}
	assert_int_equal(off, e.g->len);
	return e;
}

static void check_rejects_name_count_lies(void **state)
{
	uint8_t buf[BUFSZ];

	for (int q = 0; q < 2; q++) {
		const struct golden *g = golden_of(q ? FLIT_FT_QUERY : FLIT_FT_INFO);
		static const uint16_t bad[] = { 0, 1, 3, 4, 0xffff };
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			put_golden(buf, g);
			flit_st16(buf + OFF_COUNT, bad[i]);
			expect_err_in(g, buf, g->len, FLIT_FE_COUNT);
			expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
		}
		/* count 3 and len 8 more: the zero bytes after the frame read as
		 * a third entry's header, of name length 0, then 1 */
		put_golden(buf, g);
		flit_st16(buf + OFF_COUNT, 3);
		flit_st32(buf + OFF_LEN, (uint32_t)g->len + 8);
		flit_st16(buf + g->len + 6, 0); /* (len 0 if it were read) */
		expect_err_in(g, buf, BUFSZ, FLIT_FE_MSG_FLAGS);
		flit_st16(buf + g->len + 6, 1);
		expect_err_in(g, buf, BUFSZ, FLIT_FE_MSG_LEN);
		/* the fixed body cut short */
		put_golden(buf, g);
		flit_st16(buf + OFF_COUNT, 0);
		for (uint32_t l = 24; l < (q ? 32u : 48u); l += 8) {
			flit_st32(buf + OFF_LEN, l);
			expect_err_in(g, buf, BUFSZ, FLIT_FE_COUNT);
		}
	}
}

static void check_rejects_bad_name_lengths(void **state)
{
	uint8_t buf[BUFSZ];

	for (int q = 0; q < 2; q++) {
		struct entries e = entries_of(q ? FLIT_FT_QUERY : FLIT_FT_INFO);
		for (unsigned i = 0; i < e.n; i++) {
			uint8_t *lp = buf + e.off[i] + 6;
			static const uint16_t bad[] = { 0, 256, 257, 0x1000, 0xffff };
			for (size_t b = 0; b < 5; b++) {
				put_golden(buf, e.g);
				flit_st16(lp, bad[b]);
				expect_err_in(e.g, buf, BUFSZ, FLIT_FE_MSG_FLAGS);
			}
			/* past the frame: up to 255 */
			unsigned room = e.g->len - e.off[i] - 8;
			for (unsigned l = room + 1; l <= 255; l++) {
				put_golden(buf, e.g);
				flit_st16(lp, (uint16_t)l);
				expect_err_in(e.g, buf, e.g->len, FLIT_FE_MSG_LEN);
			}
			/* inside the padded size: the bytes that turn into name or
			 * padding are checked as such */
			for (unsigned l = 1; l <= flit_align8(e.len[i]); l++) {
				if (l == e.len[i])
					continue;
				put_golden(buf, e.g);
				flit_st16(lp, (uint16_t)l);
				if (flit_align8(l) != flit_align8(e.len[i]))
					continue; /* shifts later entries */
				/* longer: a padding NUL becomes a name byte; shorter:
				 * a name byte becomes non-zero padding */
				expect_err_in(e.g, buf, e.g->len, FLIT_FE_MSG_FLAGS);
			}
		}
	}
}

static void check_rejects_forbidden_name_bytes(void **state)
{
	uint8_t buf[BUFSZ];

	for (int q = 0; q < 2; q++) {
		struct entries e = entries_of(q ? FLIT_FT_QUERY : FLIT_FT_INFO);
		for (unsigned i = 0; i < e.n; i++)
			for (unsigned at = 0; at < e.len[i]; at++)
				for (unsigned c = 0; c < 256; c++) {
					put_golden(buf, e.g);
					buf[e.off[i] + 8 + at] = (uint8_t)c;
					bool ok = c >= 0x20 && c != 0x7f;
					expect_err_in(e.g, buf, e.g->len,
						      ok ? FLIT_FE_OK : FLIT_FE_MSG_FLAGS);
				}
	}
}

static void check_rejects_non_zero_name_padding(void **state)
{
	uint8_t buf[BUFSZ];

	for (int q = 0; q < 2; q++) {
		struct entries e = entries_of(q ? FLIT_FT_QUERY : FLIT_FT_INFO);
		for (unsigned i = 0; i < e.n; i++)
			for (unsigned at = e.len[i]; at < flit_align8(e.len[i]); at++)
				for (int bit = 0; bit < 8; bit++) {
					put_golden(buf, e.g);
					buf[e.off[i] + 8 + at] = (uint8_t)(1u << bit);
					expect_err_in(e.g, buf, e.g->len,
						      FLIT_FE_MSG_FLAGS);
				}
	}
}

static void check_rejects_bad_name_header(void **state)
{
	uint8_t buf[BUFSZ];

	for (int q = 0; q < 2; q++) {
		struct entries e = entries_of(q ? FLIT_FT_QUERY : FLIT_FT_INFO);
		for (unsigned i = 0; i < e.n; i++) {
			uint8_t *ent = buf + e.off[i];
			/* the reserved byte */
			for (int bit = 0; bit < 8; bit++) {
				put_golden(buf, e.g);
				ent[5] = (uint8_t)(1u << bit);
				expect_err_in(e.g, buf, e.g->len, FLIT_FE_MSG_FLAGS);
			}
			/* kind: INFO EXACT only, QUERY EXACT or PATTERN */
			for (unsigned k = 0; k < 256; k++) {
				put_golden(buf, e.g);
				ent[4] = (uint8_t)k;
				bool ok = k == FLIT_NAME_EXACT ||
					  (q && k == FLIT_NAME_PATTERN);
				expect_err_in(e.g, buf, e.g->len,
					      ok ? FLIT_FE_OK : FLIT_FE_MSG_FLAGS);
			}
			/* idx: QUERY 0 only, INFO anything */
			static const uint32_t idx[] = { 1, 0x80, 0x10000, UINT32_MAX };
			for (size_t k = 0; k < 4; k++) {
				put_golden(buf, e.g);
				flit_st32(ent, idx[k]);
				expect_err_in(e.g, buf, e.g->len,
					      q ? FLIT_FE_MSG_FLAGS : FLIT_FE_OK);
			}
		}
	}
}

/* Fields receivers ignore, and values any field may hold. */
static void check_ignores_seq_of_nak_query_and_join(void **state)
{
	static const uint8_t types[] = { FLIT_FT_NAK, FLIT_FT_QUERY, FLIT_FT_JOIN };
	uint8_t buf[BUFSZ];

	for (size_t i = 0; i < sizeof(types); i++) {
		const struct golden *g = golden_of(types[i]);
		put_golden(buf, g);
		flit_st64(buf + OFF_SEQ, UINT64_MAX);
		expect_err_in(g, buf, g->len, FLIT_FE_OK);
		flit_st32(buf + OFF_SESSION, UINT32_MAX);
		expect_err_in(g, buf, g->len, FLIT_FE_OK);
	}
}

/* When several things are wrong, the first check in docs/PROTOCOL.md order
 * decides the reason. */
static void check_checks_in_documented_order(void **state)
{
	uint8_t buf[BUFSZ];

	/* header: as for DATA */
	put_golden(buf, golden_of(FLIT_FT_INFO));
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
	buf[OFF_TYPE] = FLIT_FT_INFO;
	flit_st32(buf + OFF_LEN, 1);
	expect_err(buf, BUFSZ, FLIT_FE_FLAGS);
	flit_st16(buf + OFF_FLAGS, 0);
	flit_st16(buf + OFF_COUNT, 9);
	expect_err(buf, BUFSZ, FLIT_FE_LEN);
	flit_st32(buf + OFF_LEN, 88);
	expect_err(buf, BUFSZ, FLIT_FE_COUNT);
	flit_st16(buf + OFF_COUNT, 2);
	expect_err(buf, BUFSZ, FLIT_FE_OK);

	/* INFO: the fixed body's size before its fields */
	buf[28] = 0; /* mode */
	expect_err(buf, BUFSZ, FLIT_FE_MSG_FLAGS);
	flit_st32(buf + OFF_LEN, 40);
	expect_err(buf, BUFSZ, FLIT_FE_COUNT);
	flit_st32(buf + OFF_LEN, 88);
	buf[28] = FLIT_MODE_MCAST;
	/* one entry: its header before its length, its length before its bytes */
	buf[48 + 5] = 1;         /* reserved */
	flit_st16(buf + 48 + 6, 0xffff);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_FLAGS);
	buf[48 + 5] = 0;
	flit_st16(buf + 48 + 6, 200); /* past the frame */
	buf[56] = 0;                  /* and a NUL in the name */
	expect_err(buf, BUFSZ, FLIT_FE_MSG_LEN);
	flit_st16(buf + 48 + 6, 13);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_FLAGS);
	buf[56] = 'p';
	expect_err(buf, BUFSZ, FLIT_FE_OK);
	/* entries in order: a bad first one hides a bad second one */
	buf[56] = 0x7f;
	flit_st16(buf + 72 + 6, 200);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_FLAGS);
	buf[56] = 'p';
	expect_err(buf, BUFSZ, FLIT_FE_MSG_LEN);
	/* a bad entry stops the walk: the count is not looked at */
	flit_st16(buf + OFF_COUNT, 5);
	expect_err(buf, BUFSZ, FLIT_FE_MSG_LEN);

	/* NCF: the size before the ranges, each range's n before its status,
	 * the ranges in order */
	put_golden(buf, golden_of(FLIT_FT_NCF));
	flit_st32(buf + 24 + 12, 3);            /* range 0 status */
	flit_st32(buf + 40 + 8, 0);             /* range 1 n */
	expect_err(buf, 72, FLIT_FE_MSG_FLAGS);
	flit_st16(buf + OFF_COUNT, 2);
	expect_err(buf, 72, FLIT_FE_COUNT);
	flit_st16(buf + OFF_COUNT, 3);
	flit_st32(buf + 24 + 8, 0);             /* range 0 n */
	expect_err(buf, 72, FLIT_FE_COUNT);
	flit_st32(buf + 24 + 8, 10);
	flit_st32(buf + 24 + 12, 1);
	expect_err(buf, 72, FLIT_FE_COUNT);     /* range 1 n */
	flit_st32(buf + 40 + 8, 5);
	expect_err(buf, 72, FLIT_FE_OK);

	/* QUERY and JOIN: size before the reserved word */
	put_golden(buf, golden_of(FLIT_FT_JOIN));
	buf[28] = 1;
	expect_err(buf, 32, FLIT_FE_MSG_FLAGS);
	flit_st16(buf + OFF_COUNT, 1);
	expect_err(buf, 32, FLIT_FE_COUNT);
	put_golden(buf, golden_of(FLIT_FT_QUERY));
	buf[28] = 1;
	expect_err(buf, 72, FLIT_FE_MSG_FLAGS);
	flit_st16(buf + OFF_COUNT, 0);
	flit_st32(buf + OFF_LEN, 24);
	expect_err(buf, 72, FLIT_FE_COUNT);

	/* HB: the trail */
	put_golden(buf, golden_of(FLIT_FT_HB));
	flit_st64(buf + OFF_BODY, 5000);
	expect_err(buf, 32, FLIT_FE_COUNT);
	flit_st64(buf + OFF_BODY, 900);
	expect_err(buf, 32, FLIT_FE_OK);
}

/* Random corruptions of the goldens never crash or read past the buffer
 * (guard page), and the accessors of whatever is accepted stay inside the
 * frame.  (tests/fuzz/fuzz_ctl.c does this, and the re-encoding, for
 * arbitrary bytes.) */
static void check_survives_random_corruption(void **state)
{
	struct guard g;
	uint32_t rnd = 12345;
	struct flit_frame_hdr h;

	guard_map(&g, 4096);
	for (int iter = 0; iter < 200000; iter++) {
		const struct golden *gd = &goldens[iter % N_GOLDEN];
		uint8_t f[BUFSZ];
		memcpy(f, gd->bytes, gd->len);
		int flips = 1 + (int)((rnd = rnd * 1103515245u + 12345u) >> 16) % 3;
		for (int k = 0; k < flips; k++) {
			rnd = rnd * 1103515245u + 12345u;
			size_t at = (rnd >> 8) % gd->len;
			rnd = rnd * 1103515245u + 12345u;
			f[at] ^= (uint8_t)(1u + ((rnd >> 16) % 255u));
		}
		uint8_t *p = guard_place(&g, f, gd->len);
		enum flit_frame_err e = flit_ctl_check(p, gd->len, &h);
		assert_true((unsigned)e < FLIT_FE__MAX);
		if (e != FLIT_FE_OK)
			continue;
		assert_true(h.len <= gd->len);
		/* read everything an accepted frame offers */
		if (h.type == FLIT_FT_NAK || h.type == FLIT_FT_NCF) {
			struct flit_seq_range r;
			for (unsigned i = 0; i < h.count; i++) {
				flit_ctl_range(p, i, &r);
				assert_true(r.n >= 1);
			}
		} else if (h.type == FLIT_FT_INFO || h.type == FLIT_FT_QUERY) {
			struct flit_ctl_name_iter it;
			struct flit_ctl_name nm;
			unsigned n = 0;
			/* INFO with FINAL or NEXT: the numbers after the names */
			size_t nums = h.type == FLIT_FT_INFO && (h.flags & FLIT_INFOF_NUMS) ?
				      (size_t)h.count * 8 : 0;
			flit_ctl_names_init(&it, p, &h);
			while (flit_ctl_names_next(&it, &nm)) {
				assert_true(nm.len >= 1 && nm.len <= 255);
				assert_true((const uint8_t *)nm.name + nm.len <= p + h.len - nums);
				n++;
			}
			assert_int_equal(n, h.count);
			assert_ptr_equal(it.p, p + h.len - nums);
			volatile uint64_t sum = 0;
			for (unsigned i = 0; nums && i < h.count; i++)
				sum += flit_ctl_info_final(p, &h, i);
			(void)sum;
		}
	}
	guard_unmap(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(domain_id_is_fnv1a_32),
		cmocka_unit_test(hb_round_trips),
		cmocka_unit_test(hb_end_flag_is_accepted),
		cmocka_unit_test(nak_and_ncf_round_trip),
		cmocka_unit_test(nak_encoder_writes_status_zero),
		cmocka_unit_test(ranges_frame_takes_at_most_65535_ranges),
		cmocka_unit_test(info_round_trips),
		cmocka_unit_test(info_addresses_are_in_network_order),
		cmocka_unit_test(every_allowed_name_byte_round_trips),
		cmocka_unit_test(query_round_trips),
		cmocka_unit_test(join_round_trips),
		cmocka_unit_test(names_frame_takes_at_most_65535_entries),
		cmocka_unit_test(names_iterator_is_empty_for_frames_without_names),
		cmocka_unit_test(encoders_match_protocol_doc_golden_bytes),
		cmocka_unit_test(golden_frames_decode_to_documented_values),
		cmocka_unit_test(protocol_doc_dumps_match_golden_frames),
		cmocka_unit_test(encoders_refuse_every_cap_below_the_frame_size),
		cmocka_unit_test(ranges_encoder_refuses_bad_ranges),
		cmocka_unit_test(hb_encoder_refuses_trail_after_next),
		cmocka_unit_test(join_encoder_refuses_unknown_flags),
		cmocka_unit_test(info_encoder_takes_page_and_ended_and_refuses_other_flags),
		cmocka_unit_test(late_is_checked),
		cmocka_unit_test(info_encoder_refuses_unknown_mode),
		cmocka_unit_test(info_final_numbers_are_checked),
		cmocka_unit_test(name_encoders_refuse_bad_names),
		cmocka_unit_test(check_accepts_golden_frames_with_bytes_after_them),
		cmocka_unit_test(check_rejects_truncated_frames_of_every_type),
		cmocka_unit_test(check_rejects_bad_magic),
		cmocka_unit_test(check_rejects_bad_version),
		cmocka_unit_test(check_rejects_data_and_unknown_types),
		cmocka_unit_test(check_rejects_a_data_frame),
		cmocka_unit_test(check_rejects_unknown_flags),
		cmocka_unit_test(check_rejects_bad_frame_length),
		cmocka_unit_test(check_rejects_trailing_bytes_inside_len),
		cmocka_unit_test(check_rejects_hb_and_join_with_a_count),
		cmocka_unit_test(check_rejects_hb_trail_after_next),
		cmocka_unit_test(check_rejects_range_count_lies),
		cmocka_unit_test(check_rejects_empty_and_wrapping_ranges),
		cmocka_unit_test(check_rejects_bad_range_status),
		cmocka_unit_test(check_rejects_unknown_info_mode),
		cmocka_unit_test(check_rejects_non_zero_reserved_fields),
		cmocka_unit_test(check_rejects_name_count_lies),
		cmocka_unit_test(check_rejects_bad_name_lengths),
		cmocka_unit_test(check_rejects_forbidden_name_bytes),
		cmocka_unit_test(check_rejects_non_zero_name_padding),
		cmocka_unit_test(check_rejects_bad_name_header),
		cmocka_unit_test(check_ignores_seq_of_nak_query_and_join),
		cmocka_unit_test(check_checks_in_documented_order),
		cmocka_unit_test(check_survives_random_corruption),
	};
	return cmocka_run_group_tests_name("ctl", tests, NULL, NULL);
}
