// SPDX-License-Identifier: BSD-2-Clause
/*
 * libFuzzer target for the AF_XDP frame parser (transports/xdp/pkt.h):
 * flit_pkt_parse() on arbitrary bytes, with and without UDP checksum
 * verification.  Checks, abort()ing on any violation:
 *  - the result is one of the enum's values, with a name;
 *  - for an accepted frame, the payload lies inside the input, after at
 *    least the 42 header bytes, and every payload byte is read (ASan sees any
 *    read outside the input, which is copied to a malloc'd buffer of exactly
 *    `size` bytes);
 *  - accepting with verification implies accepting without it, with the same
 *    view; a rejection without verification is the same rejection with it;
 *  - rebuilding a frame from the parsed fields and payload (flit_pkt_build)
 *    parses back, verified, to the same addresses, ports and payload.
 *
 *   make BUILD=build fuzz-build
 *   build/fuzz/fuzz_xdp_pkt -max_total_time=60 tests/fuzz/corpus/xdp_pkt
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xdp/pkt.h"
#include "fuzz.h"

static volatile uint64_t sink;

static void check_accepted(const uint8_t *buf, size_t size, const struct flit_pkt_info *pi)
{
	CHECK(pi->payload >= buf + FLIT_PKT_HDR_LEN);
	CHECK(pi->payload <= buf + size);
	CHECK(pi->len <= (size_t)(buf + size - pi->payload));
	CHECK(pi->len <= FLIT_PKT_PAYLOAD_MAX);
	CHECK(pi->nvlan <= 2);
	uint64_t s = 0;
	for (uint32_t i = 0; i < pi->len; i++)
		s += pi->payload[i];
	sink += s;

	/* rebuild and parse again */
	uint32_t cap = FLIT_PKT_HDR_LEN + pi->len;
	uint8_t *f = malloc(cap);
	CHECK(f);
	struct flit_pkt_hdr h = {
		.dmac = { 1, 2, 3, 4, 5, 6 },
		.smac = { 6, 5, 4, 3, 2, 1 },
		.saddr = pi->saddr, .daddr = pi->daddr,
		.sport = pi->sport, .dport = pi->dport,
		.id = 7, .ttl = pi->ttl,
	};
	CHECK(flit_pkt_build(f, cap, &h, pi->payload, pi->len) == cap);
	CHECK(flit_pkt_build(f, cap - 1, &h, pi->payload, pi->len) == 0);
	struct flit_pkt_info q;
	CHECK(flit_pkt_parse(f, cap, true, &q) == FLIT_PKT_OK);
	CHECK(q.saddr == pi->saddr && q.daddr == pi->daddr);
	CHECK(q.sport == pi->sport && q.dport == pi->dport);
	CHECK(q.len == pi->len && q.payload == f + FLIT_PKT_HDR_LEN);
	CHECK(q.ttl == pi->ttl && q.nvlan == 0);
	CHECK(memcmp(q.payload, pi->payload, pi->len) == 0);
	free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 70000)
		return 0;
	/* Exactly `size` bytes, so ASan flags a read of buf[size]. */
	uint8_t *buf = malloc(size ? size : 1);
	struct flit_pkt_info a, b;

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	enum flit_pkt_res rv = flit_pkt_parse(buf, (uint32_t)size, true, &a);
	enum flit_pkt_res rn = flit_pkt_parse(buf, (uint32_t)size, false, &b);
	CHECK((unsigned)rv < FLIT_PKT__MAX && (unsigned)rn < FLIT_PKT__MAX);
	CHECK(strcmp(flit_pkt_res_str(rv), "?") != 0);
	CHECK(rn != FLIT_PKT_UDPCSUM);
	if (rn != FLIT_PKT_OK)
		CHECK(rv == rn);
	else
		CHECK(rv == FLIT_PKT_OK || rv == FLIT_PKT_UDPCSUM);
	if (rv == FLIT_PKT_OK) {
		CHECK(a.payload == b.payload && a.len == b.len);
		check_accepted(buf, size, &a);
	}
	if (rn == FLIT_PKT_OK)
		check_accepted(buf, size, &b);
	free(buf);
	return 0;
}
