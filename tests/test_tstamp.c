// SPDX-License-Identifier: BSD-2-Clause
/*
 * Timestamps (userspace/tstamp.c, include/flit/tstamp.h, userspace/txts.h):
 *
 * Without privilege: the PHC offset and conversion arithmetic on synthetic
 * samples, the transmit-stamp ring (datagram numbering, lookups), which of
 * a socket's stamps a message or datagram carries and the kind it is flagged
 * with (flit_ts_pick: hardware only where set up and given), and the
 * answers for an interface that does not exist.
 *
 * As root, on a veth pair in two network namespaces this process makes
 * (both die with it):
 *
 *   netns A: this process (unshare)          netns B (unshare, held by an fd)
 *   +------------------------------+          +---------------------------+
 *   | tsv0 10.98.0.1/24            |<-------->| tsv1 10.98.0.2/24         |
 *   | route 224.0.0.0/4 dev tsv0   |   veth   | route 224.0.0.0/4 dev tsv1|
 *   +------------------------------+          +---------------------------+
 *
 * ts-info reports software stamps and no PTP clock; a UDP socket gets
 * software receive and transmit stamps; enabling hardware stamps gives the
 * documented "not available" outcome and the PHC lookup -ENODEV; a udp
 * context asked for hardware stamps falls back to software ones and says
 * why, and its publisher's transmit stamps belong to the messages they are
 * returned for (send stamp <= transmit stamp <= the receiver's stamp).
 * Without root that part is a skip with the reason (exit 77) after the
 * unprivileged tests ran.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/net_tstamp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <flit/tstamp.h>

#include "testlib.h"
#include "codec.h"
#include "txts.h"
#include "vethns.h"

#define IF_A   "tsv0"
#define IF_B   "tsv1"
#define ADDR_A "10.98.0.1"
#define ADDR_B "10.98.0.2"
#define PORT   15123
#define S      1000000000ull


/* ---- PHC arithmetic on synthetic samples ------------------------------------ */

static void phc_sync_keeps_the_narrowest_bracket(void **state)
{
	(void)state;
	/* PHC = host - 37 s (a TAI-like offset); brackets of 900, 120, 400 ns */
	const uint64_t off = 37 * S;
	struct flit_phc_sample v[] = {
		{ 1000 * S + 0, 1000 * S + 450 - off, 1000 * S + 900 },
		{ 1000 * S + 5000, 1000 * S + 5060 - off, 1000 * S + 5120 },
		{ 1000 * S + 9000, 1000 * S + 9200 - off, 1000 * S + 9400 },
	};
	struct flit_phc_sync s = { .sz = sizeof(s) };

	assert_int_equal(flit_phc_sync_samples(v, 3, CLOCK_REALTIME, &s), 0);
	assert_int_equal(s.method, FLIT_PHC_SAMPLES);
	assert_int_equal(s.samples, 3);
	assert_int_equal(s.host, CLOCK_REALTIME);
	assert_true(s.phc_ns == v[1].phc);
	assert_true(s.host_ns == 1000 * S + 5060);   /* the middle of the bracket */
	assert_true(s.uncertainty_ns == 60);
	assert_true(s.rate == 1.0);
	assert_true(flit_phc_offset_ns(&s) == (int64_t)off);
	/* a hardware stamp 1 ms after the reference, on the host clock */
	assert_true(flit_phc_to_host(&s, v[1].phc + 1000000) == 1000 * S + 5060 + 1000000);
	assert_true(flit_phc_from_host(&s, 1000 * S + 5060 + 1000000) == v[1].phc + 1000000);
	/* before the reference too */
	assert_true(flit_phc_to_host(&s, v[1].phc - 7) == 1000 * S + 5060 - 7);
}

static void phc_sync_ignores_reversed_brackets_and_refuses_none_usable(void **state)
{
	(void)state;
	struct flit_phc_sample v[] = {
		{ 2000, 1500, 1000 },   /* reversed: ignored however narrow */
		{ 5000, 5100, 5300 },
	};
	struct flit_phc_sync s = { .sz = sizeof(s) };

	assert_int_equal(flit_phc_sync_samples(v, 2, CLOCK_MONOTONIC_RAW, &s), 0);
	assert_true(s.phc_ns == 5100 && s.host_ns == 5150 && s.uncertainty_ns == 150);
	assert_int_equal(s.host, CLOCK_MONOTONIC_RAW);

	struct flit_phc_sync z = { .sz = sizeof(z) };
	assert_int_equal(flit_phc_sync_samples(v, 1, CLOCK_REALTIME, &z), -EINVAL);
	assert_non_null(strstr(flit_errmsg(), "none of 1 samples is usable"));
	assert_int_equal(flit_phc_sync_samples(NULL, 0, CLOCK_REALTIME, &z), -EINVAL);
	struct flit_phc_sync nosz = { 0 };
	assert_int_equal(flit_phc_sync_samples(v, 2, CLOCK_REALTIME, &nosz), -EINVAL);
}

static void phc_rate_comes_from_two_syncs_and_converts_both_ways(void **state)
{
	(void)state;
	/* the PHC runs 50 ppm slow: host advances 1.00005 s per PHC second */
	const double rate = 1.00005;
	const uint64_t phc0 = 500 * S, host0 = 1700000000ull * S;
	struct flit_phc_sample a = { host0 - 10, phc0, host0 + 10 };
	uint64_t phc1 = phc0 + 2 * S;
	uint64_t host1 = host0 + (uint64_t)(2e9 * rate + 0.5);
	struct flit_phc_sample b = { host1 - 10, phc1, host1 + 10 };
	struct flit_phc_sync s = { .sz = sizeof(s) };

	assert_int_equal(flit_phc_sync_samples(&a, 1, CLOCK_REALTIME, &s), 0);
	assert_true(s.rate == 1.0);
	assert_int_equal(flit_phc_sync_samples(&b, 1, CLOCK_REALTIME, &s), 0);
	assert_true(s.rate > 1.0000499 && s.rate < 1.0000501);
	/* 1 s past the second sync: 1.00005 s on the host clock, within 1 ns */
	uint64_t h = flit_phc_to_host(&s, phc1 + S);
	int64_t want = (int64_t)(host1 + 1000050000ull);
	assert_true(llabs((long long)((int64_t)h - want)) <= 1);
	uint64_t back = flit_phc_from_host(&s, h);
	assert_true(llabs((long long)((int64_t)back - (int64_t)(phc1 + S))) <= 1);

	/* a stepped clock (1 s in 2 s) is not a rate: stays 1.0 */
	struct flit_phc_sample c = { host1 + 2 * S - 10, phc1 + 3 * S, host1 + 2 * S + 10 };
	assert_int_equal(flit_phc_sync_samples(&c, 1, CLOCK_REALTIME, &s), 0);
	assert_true(s.rate == 1.0);
	/* another host clock: no rate across clocks */
	struct flit_phc_sample d = { 100 * S, phc1 + 4 * S, 100 * S + 20 };
	assert_int_equal(flit_phc_sync_samples(&d, 1, CLOCK_MONOTONIC_RAW, &s), 0);
	assert_true(s.rate == 1.0);
}

static void phc_to_tsc_follows_the_calibration(void **state)
{
	(void)state;
	struct flit_tsc c = { .ns_per_tick = 0.5, .ref_tick = 1000000, .ref_ns = 3 * S };
	struct flit_phc_sample v = { 4 * S - 2, 9 * S, 4 * S + 2 };
	struct flit_phc_sync s = { .sz = sizeof(s) };

	assert_int_equal(flit_phc_sync_samples(&v, 1, CLOCK_MONOTONIC_RAW, &s), 0);
	/* PHC 9 s = mono 4 s = 1 s after the TSC reference = 2e9 ticks later */
	assert_true(flit_phc_to_tsc(&s, &c, 9 * S) == 1000000 + 2000000000ull);
	assert_true(flit_phc_to_tsc(&s, &c, 9 * S + 10) == 1000000 + 2000000020ull);
}

/* ---- the transmit-stamp ring ----------------------------------------------------- */

static size_t data_frame(uint8_t *buf, uint64_t seq, bool retx)
{
	uint8_t *pl = flit_frame_put_single(buf, 0x11223344, seq, 0, 8, false, 0);
	memset(pl, 0xab, 8);
	if (retx)
		flit_st16(buf + 4, flit_ld16(buf + 4) | FLIT_FF_RETX);
	return FLIT_FRAME_HDR_LEN + flit_msg_wire_len(8, false);
}

static void txts_ring_numbers_every_datagram_and_remembers_first_transmissions(void **state)
{
	(void)state;
	struct flit_txts *t = calloc(1, sizeof(*t));
	uint8_t f[64] __attribute__((aligned(8))), hb[32] = { 0x46, 0x4c, 1, FLIT_FT_HB };
	struct flit_tx_stamp out = { .sz = sizeof(out) };

	assert_non_null(t);
	flit_txts_init(t, FLIT_TS_SOFTWARE);
	size_t l = data_frame(f, 10, false);
	flit_txts_sent(t, f, l, 1);              /* key 0: seq 10 */
	flit_txts_sent(t, hb, sizeof(hb), 1);    /* key 1: a heartbeat */
	l = data_frame(f, 11, false);
	flit_txts_sent(t, f, l, 2);              /* keys 2, 3: seq 11 to two receivers */
	l = data_frame(f, 10, true);
	flit_txts_sent(t, f, l, 1);              /* key 4: a retransmission of 10 */
	assert_int_equal(t->next_key, 5);

	assert_int_equal(flit_txts_lookup(t, 10, &out), -EAGAIN);
	assert_int_equal(flit_txts_lookup(t, FLIT_TX_STAMP_LATEST, &out), -EAGAIN);
	assert_int_equal(flit_txts_lookup(t, 12, &out), -ENOENT);
	/* stamps as the error queue would give them */
	t->e[0].ts = 111; t->e[0].flags = FLIT_TXTS_SOFTWARE;
	t->e[3].ts = 333; t->e[3].flags = FLIT_TXTS_SOFTWARE;
	t->newest = 3; t->any = true;
	assert_false(t->e[1].used);              /* control frames: counted only */
	assert_false(t->e[4].used);              /* repairs: counted only */
	assert_int_equal(flit_txts_lookup(t, 10, &out), 0);
	assert_true(out.seq == 10 && out.count == 1 && out.ts_ns == 111);
	assert_int_equal(flit_txts_lookup(t, 11, &out), 0);
	assert_true(out.ts_ns == 333);           /* key 2 has none yet: key 3's */
	t->e[2].ts = 222;
	assert_int_equal(flit_txts_lookup(t, 11, &out), 0);
	assert_true(out.ts_ns == 222);           /* the earliest datagram */
	assert_int_equal(flit_txts_lookup(t, FLIT_TX_STAMP_LATEST, &out), 0);
	assert_true(out.seq == 11 && out.ts_ns == 333);

	/* 256 datagrams later the first ones are forgotten */
	for (unsigned i = 0; i < FLIT_TXTS_RING; i++) {
		l = data_frame(f, 100 + i, false);
		flit_txts_sent(t, f, l, 1);
	}
	assert_int_equal(flit_txts_lookup(t, 10, &out), -ENOENT);
	assert_int_equal(flit_txts_lookup(t, 100 + FLIT_TXTS_RING - 1, &out), -EAGAIN);
	free(t);
}

static void txts_ring_counts_a_batched_frame_as_its_messages(void **state)
{
	(void)state;
	struct flit_txts *t = calloc(1, sizeof(*t));
	uint8_t f[256] __attribute__((aligned(8)));
	struct flit_tx_stamp out = { .sz = sizeof(out) };

	assert_non_null(t);
	flit_txts_init(t, FLIT_TS_SOFTWARE);
	flit_frame_begin(f, FLIT_FT_DATA, 0, 7, 40);
	size_t len = FLIT_FRAME_HDR_LEN;
	for (int i = 0; i < 3; i++) {
		uint8_t *pl = flit_frame_put_hdr(f + len, 0, 8, false, 0);
		memset(pl, i, 8);
		len = flit_frame_end_msg(f, pl, 8);
	}
	flit_txts_sent(t, f, len, 1);
	t->e[0].ts = 5;
	assert_int_equal(flit_txts_lookup(t, 42, &out), 0);
	assert_true(out.seq == 40 && out.count == 3);
	assert_int_equal(flit_txts_lookup(t, 43, &out), -ENOENT);
	assert_int_equal(flit_txts_lookup(t, 39, &out), -ENOENT);
	free(t);
}

/* The kind a stamp is flagged with comes from what it is, not from what
 * was set up: qemu's e1000e accepts SIOCSHWTSTAMP and never stamps, so its
 * "hardware" sockets carry the kernel's software stamps, which must not be
 * flagged hardware (tools label their samples by these flags). */
static void a_stamp_is_hardware_only_in_hardware_mode_and_when_the_nic_gave_one(void **state)
{
	(void)state;
	uint32_t fl = 99;

	/* hardware mode, the NIC stamped: its stamp */
	assert_true(flit_ts_pick(FLIT_TS_HARDWARE, 100, 200, &fl) == 200);
	assert_int_equal(fl, FLIT_TXTS_HARDWARE);
	/* hardware mode, no NIC stamp (0): the kernel's, flagged software */
	assert_true(flit_ts_pick(FLIT_TS_HARDWARE, 100, 0, &fl) == 100);
	assert_int_equal(fl, FLIT_TXTS_SOFTWARE);
	/* software mode: whatever is in the raw-hardware slot is ignored */
	assert_true(flit_ts_pick(FLIT_TS_SOFTWARE, 100, 200, &fl) == 100);
	assert_int_equal(fl, FLIT_TXTS_SOFTWARE);
	/* neither stamp: none, in either mode */
	assert_true(flit_ts_pick(FLIT_TS_HARDWARE, 0, 0, &fl) == 0);
	assert_int_equal(fl, 0);
	assert_true(flit_ts_pick(FLIT_TS_SOFTWARE, 0, 200, &fl) == 0);
	assert_int_equal(fl, 0);
	assert_true(flit_ts_pick(FLIT_TS_NONE, 100, 200, &fl) == 100);
	assert_int_equal(fl, FLIT_TXTS_SOFTWARE);
}

/* ---- interfaces that do not exist ------------------------------------------------- */

static void a_bad_interface_name_is_enodev_with_a_message(void **state)
{
	(void)state;
	struct flit_ts_info ti = { .sz = sizeof(ti) };

	assert_int_equal(flit_ts_info_get("nosuch0", &ti), -ENODEV);
	assert_non_null(strstr(flit_errmsg(), "nosuch0: no such interface"));
	assert_int_equal(flit_hwts_enable("nosuch0", FLIT_HWTS_RX, NULL), -ENODEV);
	assert_non_null(strstr(flit_errmsg(), "nosuch0: no such interface"));
	errno = 0;
	assert_null(flit_phc_open("nosuch0"));
	assert_int_equal(errno, ENODEV);
	assert_non_null(strstr(flit_errmsg(), "nosuch0: no such interface"));
	assert_int_equal(flit_ts_info_get("a-name-much-too-long-for-linux", &ti), -ENODEV);
	assert_non_null(strstr(flit_errmsg(), "no such interface"));
	assert_int_equal(flit_ts_info_get("", &ti), -EINVAL);
	assert_int_equal(flit_ts_info_get("lo", NULL), -EINVAL);
	assert_int_equal(flit_hwts_enable("lo", 0, NULL), -EINVAL);
	assert_int_equal(flit_hwts_enable("lo", 4, NULL), -EINVAL);
	errno = 0;
	assert_null(flit_phc_open_index(-1));
	assert_int_equal(errno, ENODEV);
	errno = 0;
	assert_null(flit_phc_open_index(4095));   /* /dev/ptp4095 */
	assert_int_equal(errno, ENODEV);
	assert_string_equal(flit_ts_kind_name(FLIT_TS_NONE), "none");
	assert_string_equal(flit_ts_kind_name(FLIT_TS_SOFTWARE), "software");
	assert_string_equal(flit_ts_kind_name(FLIT_TS_HARDWARE), "hardware");
	assert_string_equal(flit_ts_kind_name(7), "?");
}

static void tx_stamps_are_refused_where_there_are_none(void **state)
{
	(void)state;
	flit_ctx *ctx = tl_ctx("context.transports = shm\n");
	struct flit_tx_stamp out = { .sz = sizeof(out) };
	struct flit_ts_status st = { .sz = sizeof(st) };

	assert_non_null(ctx);
	flit_pub *pub = flit_pub_new(ctx, "ts.shm", NULL);
	assert_non_null(pub);
	assert_int_equal(flit_pub_tx_stamp(pub, 0, &out), -EOPNOTSUPP);
	assert_non_null(strstr(flit_errmsg(), "makes no transmit stamps"));
	assert_int_equal(flit_pub_tx_stamp(pub, 0, NULL), -EINVAL);
	assert_int_equal(flit_ctx_ts_status(ctx, "shm", &st), -EOPNOTSUPP);
	assert_int_equal(flit_ctx_ts_status(ctx, "udp", &st), -ENOENT);
	flit_pub_close(pub);
	flit_ctx_close(ctx);
}

/* ---- on a veth pair (root) ------------------------------------------------------------- */

static uint64_t now_rt(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * S + (uint64_t)t.tv_nsec;
}

static void ts_info_reports_software_stamps_on_veth(void **state)
{
	(void)state;
	struct flit_ts_info ti = { .sz = sizeof(ti) };
	char d[256];

	assert_int_equal(flit_ts_info_get(IF_A, &ti), 0);
	assert_string_equal(ti.ifname, IF_A);
	assert_true(ti.sw_tx);
	assert_true(ti.sw_rx);
	assert_false(ti.hw_tx);
	assert_false(ti.hw_rx);
	assert_int_equal(ti.phc_index, -1);
	int n = flit_ts_info_describe(&ti, d, sizeof(d));
	assert_true(n > 0 && (size_t)n < sizeof(d));
	printf("# %s\n", d);
	assert_non_null(strstr(d, IF_A ": software tx+rx stamps"));
	assert_non_null(strstr(d, "no hardware stamps"));
	assert_non_null(strstr(d, "no PTP hardware clock"));
	/* truncation reports the full length */
	char small[8];
	assert_int_equal(flit_ts_info_describe(&ti, small, sizeof(small)), n);
	assert_int_equal(strlen(small), sizeof(small) - 1);
}

static void hardware_stamps_on_veth_are_not_available(void **state)
{
	(void)state;
	struct flit_hwts hw = { .sz = sizeof(hw) };
	static const unsigned dirs[] = { FLIT_HWTS_RX, FLIT_HWTS_TX, FLIT_HWTS_RX | FLIT_HWTS_TX };

	for (unsigned i = 0; i < 3; i++) {
		int r = flit_hwts_enable(IF_A, dirs[i], &hw);
		printf("# flit_hwts_enable(%s, %u): %d: %s\n", IF_A, dirs[i], r, flit_errmsg());
		assert_true(r == -EOPNOTSUPP || r == -ENODEV);
		if (r == -EOPNOTSUPP)
			assert_non_null(strstr(flit_errmsg(), IF_A ": no hardware timestamping "
					       "(driver refuses SIOCSHWTSTAMP"));
		else
			assert_non_null(strstr(flit_errmsg(), IF_A " has no PTP hardware clock"));
	}
}

static void phc_lookup_on_veth_is_enodev(void **state)
{
	(void)state;
	errno = 0;
	assert_null(flit_phc_open(IF_A));
	assert_int_equal(errno, ENODEV);
	assert_non_null(strstr(flit_errmsg(), IF_A " has no PTP hardware clock"));
}

/* A socket in B listening on PORT with software receive stamps. */
static int rx_socket_b(void)
{
	in_b();
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	int v = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
	struct timeval tv = { .tv_sec = 5 };
	in_a();
	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &v, sizeof(v)), 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Receive one datagram: its length, and its software stamp in *ts. */
static ssize_t recv_stamped(int fd, void *buf, size_t len, uint64_t *ts)
{
	char ctl[256] __attribute__((aligned(8)));
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	ssize_t n = recvmsg(fd, &mh, 0);

	*ts = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING) {
			struct timespec t[3];
			memcpy(t, CMSG_DATA(c), sizeof(t));
			*ts = (uint64_t)t[0].tv_sec * S + (uint64_t)t[0].tv_nsec;
		}
	return n;
}

static void a_udp_socket_gets_software_rx_and_tx_stamps(void **state)
{
	(void)state;
	int rfd = rx_socket_b();
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	uint8_t f[64] __attribute__((aligned(8))), hb[32] = { 0x46, 0x4c, 1, FLIT_FT_HB }, buf[128];
	struct flit_txts *t = calloc(1, sizeof(*t));
	uint64_t rx_ts[8], t0 = now_rt();

	assert_true(fd >= 0);
	assert_non_null(t);
	inet_pton(AF_INET, ADDR_B, &to.sin_addr);
	/* The first socket asking for stamps turns the kernel's receive
	 * stamping on from a work queue (net_enable_timestamp()): until it
	 * runs, datagrams come unstamped.  Wait for it (bounded), before fd
	 * numbers its datagrams. */
	for (int i = 0; i < 200; i++) {
		uint64_t ts;
		assert_true(sendto(fd, "probe", 5, 0, (struct sockaddr *)&to, sizeof(to)) == 5);
		assert_true(recv_stamped(rfd, buf, sizeof(buf), &ts) == 5);
		if (ts)
			break;
		usleep(5000);
	}
	assert_int_equal(flit_txts_enable(fd, FLIT_TS_SOFTWARE), 0);
	flit_txts_init(t, FLIT_TS_SOFTWARE);
	/* data 0, heartbeat, data 1, heartbeat, data 2: the kernel numbers
	 * all five, the ring maps the data ones back to their seq */
	for (int i = 0; i < 5; i++) {
		size_t l = i % 2 ? sizeof(hb) : data_frame(f, (uint64_t)i / 2, false);
		const void *p = i % 2 ? (const void *)hb : (const void *)f;
		assert_true(sendto(fd, p, l, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)l);
		flit_txts_sent(t, p, l, 1);
		assert_true(recv_stamped(rfd, buf, sizeof(buf), &rx_ts[i]) == (ssize_t)l);
		assert_true(rx_ts[i] != 0);      /* software receive stamp */
	}
	/* software stamps are queued by the time the send returns on veth */
	int n = flit_txts_drain(t, fd, 64);
	assert_int_equal(n, 5);
	assert_int_equal(t->stamps, 5);
	assert_int_equal(t->unmatched, 2);       /* the heartbeats */
	for (uint64_t seq = 0; seq < 3; seq++) {
		struct flit_tx_stamp out = { .sz = sizeof(out) };
		assert_int_equal(flit_txts_lookup(t, seq, &out), 0);
		assert_true(out.seq == seq && out.count == 1);
		assert_int_equal(out.flags, FLIT_TXTS_SOFTWARE);
		/* one host, one CLOCK_REALTIME: sent, then received */
		assert_true(out.ts_ns >= t0);
		assert_true(out.ts_ns <= rx_ts[seq * 2]);
		if (seq)
			assert_true(out.ts_ns > rx_ts[seq * 2 - 1]);
	}
	struct flit_tx_stamp out = { .sz = sizeof(out) };
	assert_int_equal(flit_txts_lookup(t, FLIT_TX_STAMP_LATEST, &out), 0);
	assert_true(out.seq == 2);
	/* the queue is empty now */
	struct flit_txts_rec r;
	assert_int_equal(flit_txts_read(fd, &r, 1), 0);
	close(fd);
	close(rfd);
	free(t);
}

/* ---- a udp context asked for hardware stamps on veth ------------------------------------ */

/* The receiver runs on its own thread in B: a context creates sockets as
 * it polls (a session found joins its group), and a socket belongs to the
 * namespace of the thread that creates it. */
struct got {
	unsigned n;                     /* written by the B thread (atomic) */
	uint64_t seq[64], send_ts[64], recv_ts[64];
	uint32_t flags[64];
	int ready;                      /* 1: subscribed, -1: failed */
	int stop;
	struct flit_ts_status st;
};

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct got *g = arg;
	unsigned n = __atomic_load_n(&g->n, __ATOMIC_RELAXED);
	(void)sub;
	if (m->kind != FLIT_MSG_DATA || n == 64)
		return;
	g->seq[n] = m->seq;
	g->send_ts[n] = m->send_ts_ns;
	g->recv_ts[n] = m->recv_ts_ns;
	g->flags[n] = m->flags;
	__atomic_store_n(&g->n, n + 1, __ATOMIC_RELEASE);
}

static void *b_receiver(void *arg)
{
	struct got *g = arg;
	char cfg[512];
	flit_ctx *cb = NULL;
	flit_sub *sub = NULL;

	if (setns(ns_b, CLONE_NEWNET) == 0) {
		snprintf(cfg, sizeof(cfg), "context.transports = udp\ncontext.udp.interface = " IF_B "\n"
			 "context.udp.timestamps = software\ncontext.domain = tstamp%d\n", (int)getpid());
		cb = tl_ctx(cfg);
		FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg, .arg = g);
		sub = cb ? flit_sub_new(cb, "ts.udp", &so) : NULL;
		g->st.sz = sizeof(g->st);
		if (sub && flit_ctx_ts_status(cb, "udp", &g->st))
			g->st.sz = 0;
	}
	__atomic_store_n(&g->ready, sub ? 1 : -1, __ATOMIC_RELEASE);
	while (sub && !__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE)) {
		flit_ctx_poll(cb, 0);
		usleep(100);
	}
	flit_sub_close(sub);
	flit_ctx_close(cb);
	return NULL;
}

/* A fresh struct got and the b_receiver thread on it, subscribed. */
static struct got *receiver_start(pthread_t *th)
{
	struct got *g = calloc(1, sizeof(*g));

	assert_non_null(g);
	assert_int_equal(pthread_create(th, NULL, b_receiver, g), 0);
	while (!__atomic_load_n(&g->ready, __ATOMIC_ACQUIRE))
		usleep(1000);
	assert_int_equal(g->ready, 1);
	return g;
}

static void poll_for_ms(flit_ctx *c, unsigned ms)
{
	uint64_t until = tl_now_ms() + ms;
	while (tl_now_ms() < until) {
		flit_ctx_poll(c, 0);
		usleep(200);
	}
}

/* Publish until the receiver thread `th` (b_receiver) gets a message, then
 * 20 messages `gap_ms` apart; stop the receiver and check each message's
 * transmit stamp: its own datagram's, after its send stamp and at most
 * `after_rx_ns` after the receiver's kernel stamp (a stamp of another
 * datagram, gap_ms away, would fall outside).  A kernel socket's stamp is
 * taken before the device gets the packet (0); an AF_XDP completion stamp
 * in copy mode after veth has delivered it (a few microseconds). */
static void send_and_check_tx_stamps(flit_pub *pub, flit_pub *other, flit_ctx *ca, struct got *g,
				     pthread_t th, unsigned gap_ms, uint64_t after_rx_ns)
{
	uint64_t until = tl_now_ms() + 15000;
	struct flit_tx_stamp out = { .sz = sizeof(out) };

	while (!__atomic_load_n(&g->n, __ATOMIC_ACQUIRE) && tl_now_ms() < until) {
		assert_true(flit_pub_send(pub, "hello", 5) >= 0);
		poll_for_ms(ca, 3);
	}
	assert_true(__atomic_load_n(&g->n, __ATOMIC_ACQUIRE) > 0);
	poll_for_ms(ca, 20);
	__atomic_store_n(&g->n, 0, __ATOMIC_RELEASE);
	uint64_t first = flit_pub_next_seq(pub);
	for (int i = 0; i < 20; i++) {
		/* another topic of the session in between: the session's
		 * numbers run ahead of the topic's */
		if (other && i % 3 == 0)
			assert_int_equal(flit_pub_send(other, "other", 5), 0);
		assert_int_equal(flit_pub_send(pub, "stamped!", 8), 0);
		poll_for_ms(ca, gap_ms);
	}
	until = tl_now_ms() + 5000;
	while (__atomic_load_n(&g->n, __ATOMIC_ACQUIRE) < 20 && tl_now_ms() < until)
		poll_for_ms(ca, 1);
	__atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	assert_int_equal(g->n, 20);
	for (unsigned i = 0; i < g->n; i++) {
		assert_true(g->seq[i] == first + i);
		assert_true(g->flags[i] & FLIT_MSGF_SEND_TS);
		assert_true(g->flags[i] & FLIT_MSGF_RECV_TS_KERNEL);
		int r = flit_pub_tx_stamp(pub, g->seq[i], &out);
		if (r)
			printf("# seq %llu: %s\n", (unsigned long long)g->seq[i], flit_errmsg());
		assert_int_equal(r, 0);
		assert_true(out.seq == g->seq[i] && out.count == 1);
		assert_int_equal(out.flags, FLIT_TXTS_SOFTWARE);
		assert_true(g->send_ts[i] <= out.ts_ns);
		assert_true(out.ts_ns <= g->recv_ts[i] + after_rx_ns);
	}
	assert_int_equal(flit_pub_tx_stamp(pub, FLIT_TX_STAMP_LATEST, &out), 0);
	assert_true(out.seq == first + 19);
	assert_int_equal(flit_pub_tx_stamp(pub, first + 1000, &out), -ENOENT);
	assert_non_null(strstr(flit_errmsg(), "no datagram carrying that message"));
}

static void udp_context_falls_back_to_software_and_stamps_what_it_sends(void **state)
{
	(void)state;
	char cfg[512];
	pthread_t th;
	struct got *g = receiver_start(&th);

	/* the receiver side reports its own stamps */
	assert_true(g->st.sz && g->st.rx == FLIT_TS_SOFTWARE && g->st.tx == FLIT_TS_NONE &&
		    !g->st.why[0]);

	snprintf(cfg, sizeof(cfg), "context.transports = udp\ncontext.udp.interface = " IF_A "\n"
		 "context.udp.timestamps = hardware\ncontext.udp.tx_timestamps = hardware\n"
		 "source.timestamps = true\ncontext.domain = tstamp%d\n", (int)getpid());
	flit_ctx *ca = tl_ctx(cfg);
	assert_non_null(ca);
	FLIT_OPTS(flit_pub_opts, po, .transport = "udp", .config = "session = stamps");
	flit_pub *pub = flit_pub_new(ca, "ts.udp", &po);
	assert_non_null(pub);
	/* a second topic in its session: every message numbered by topic */
	flit_pub *other = flit_pub_new(ca, "ts.other", &po);
	assert_non_null(other);

	/* hardware was asked for; veth has none: software, and why */
	struct flit_ts_status st = { .sz = sizeof(st) };
	assert_int_equal(flit_ctx_ts_status(ca, "udp", &st), 0);
	printf("# status: rx %s (asked %s), tx %s (asked %s), phc %d, why: %s\n",
	       flit_ts_kind_name(st.rx), flit_ts_kind_name(st.rx_asked), flit_ts_kind_name(st.tx),
	       flit_ts_kind_name(st.tx_asked), st.phc_index, st.why);
	assert_int_equal(st.rx_asked, FLIT_TS_HARDWARE);
	assert_int_equal(st.tx_asked, FLIT_TS_HARDWARE);
	assert_int_equal(st.rx, FLIT_TS_SOFTWARE);
	assert_int_equal(st.tx, FLIT_TS_SOFTWARE);
	assert_int_equal(st.phc_index, -1);
	assert_string_equal(st.ifname, IF_A);
	assert_non_null(strstr(st.why, IF_A ": no hardware timestamping (driver refuses SIOCSHWTSTAMP)"));
	char desc[1024];
	assert_true(flit_ctx_describe(ca, "udp", desc, sizeof(desc)) > 0);
	printf("# %s\n", desc);
	assert_non_null(strstr(desc, "stamps: rx software, tx software (hardware asked for, not available"));

	/* 7 ms apart: heartbeats (5 ms after the last data) go out on the
	 * same socket in between, numbered by the kernel too */
	send_and_check_tx_stamps(pub, other, ca, g, th, 7, 0);
	flit_pub_close(other);
	flit_pub_close(pub);
	flit_ctx_close(ca);
	free(g);
}

/* The same over AF_XDP: TX metadata completion stamps (the kernel's software
 * CLOCK_TAI in copy mode, moved to CLOCK_REALTIME) reach flit_pub_tx_stamp()
 * by the session and sequence number of the frame they carried. */
static void xdp_context_stamps_what_it_sends_through_af_xdp(void **state)
{
	(void)state;
	char cfg[512];
	pthread_t th;
	struct got *g = receiver_start(&th);


	snprintf(cfg, sizeof(cfg), "context.transports = xdp\ncontext.udp.interface = " IF_A "\n"
		 "context.xdp.tx_timestamps = true\nsource.timestamps = true\n"
		 "context.domain = tstamp%d\n", (int)getpid());
	flit_ctx *ca = tl_ctx(cfg);
	assert_non_null(ca);
	FLIT_OPTS(flit_pub_opts, po, .transport = "xdp");
	flit_pub *pub = flit_pub_new(ca, "ts.udp", &po);
	if (!pub && (errno == EOPNOTSUPP || errno == EPERM)) {
		printf("# xdp transmit stamps not available here: %s\n", flit_errmsg());
		__atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
		flit_ctx_close(ca);
		free(g);
		skip();
	}
	assert_non_null(pub);
	struct flit_ts_status st = { .sz = sizeof(st) };
	assert_int_equal(flit_ctx_ts_status(ca, "xdp", &st), 0);
	printf("# xdp status: tx %s (asked %s), why: %s\n", flit_ts_kind_name(st.tx),
	       flit_ts_kind_name(st.tx_asked), st.why);
	assert_int_equal(st.tx, FLIT_TS_SOFTWARE);   /* copy mode on veth */
	assert_non_null(strstr(st.why, "copy mode"));

	send_and_check_tx_stamps(pub, NULL, ca, g, th, 2, 1000000);
	flit_pub_close(pub);
	flit_ctx_close(ca);
	free(g);
}

static void tx_stamps_off_by_default_on_udp(void **state)
{
	(void)state;
	char cfg[256];
	snprintf(cfg, sizeof(cfg), "context.transports = udp\ncontext.udp.interface = " IF_A "\n"
		 "context.domain = tstampoff%d\n", (int)getpid());
	flit_ctx *c = tl_ctx(cfg);
	assert_non_null(c);
	FLIT_OPTS(flit_pub_opts, po, .transport = "udp");
	flit_pub *pub = flit_pub_new(c, "ts.off", &po);
	assert_non_null(pub);
	struct flit_tx_stamp out = { .sz = sizeof(out) };
	assert_int_equal(flit_pub_tx_stamp(pub, 0, &out), -EOPNOTSUPP);
	assert_non_null(strstr(flit_errmsg(), "transmit stamps are off"));
	struct flit_ts_status st = { .sz = sizeof(st) };
	assert_int_equal(flit_ctx_ts_status(c, "udp", &st), 0);
	assert_true(st.rx == FLIT_TS_NONE && st.tx == FLIT_TS_NONE && !st.why[0]);
	flit_pub_close(pub);
	flit_ctx_close(c);
}

/* ---- setup ------------------------------------------------------------------------------- */

static int setup_veth(char *why, size_t len)
{
	if (geteuid() != 0) {
		snprintf(why, len, "needs root (network namespaces, veth)");
		return 77;
	}
	if (sh("ip -V >/dev/null 2>&1")) {
		snprintf(why, len, "iproute2 (ip) not found");
		return 77;
	}
	if (unshare(CLONE_NEWNET) || (ns_a = open("/proc/self/ns/net", O_RDONLY)) < 0 ||
	    unshare(CLONE_NEWNET) || (ns_b = open("/proc/self/ns/net", O_RDONLY)) < 0 ||
	    setns(ns_a, CLONE_NEWNET)) {
		snprintf(why, len, "cannot create network namespaces: %s", strerror(errno));
		return 77;
	}
	if (sh("ip link add " IF_A " type veth peer name " IF_B " netns /proc/%d/fd/%d",
	       (int)getpid(), ns_b) ||
	    sh("ip addr add " ADDR_A "/24 dev " IF_A " && ip link set lo up && "
	       "ip link set " IF_A " up && ip route add 224.0.0.0/4 dev " IF_A)) {
		snprintf(why, len, "veth setup failed in A");
		return 1;
	}
	if (setns(ns_b, CLONE_NEWNET))
		return 1;
	int r = sh("ip addr add " ADDR_B "/24 dev " IF_B " && ip link set lo up && "
		   "ip link set " IF_B " up && ip route add 224.0.0.0/4 dev " IF_B);
	if (setns(ns_a, CLONE_NEWNET) || r) {
		snprintf(why, len, "veth setup failed in B");
		return 1;
	}
	return 0;
}

static void print_stderr(enum flit_log_level level, const char *fmt, va_list ap)
{
	(void)level;
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

int main(void)
{
	if (getenv("TSTAMP_VERBOSE"))   /* library messages, for debugging */
		flit_set_print(print_stderr);
	const struct CMUnitTest plain[] = {
		cmocka_unit_test(phc_sync_keeps_the_narrowest_bracket),
		cmocka_unit_test(phc_sync_ignores_reversed_brackets_and_refuses_none_usable),
		cmocka_unit_test(phc_rate_comes_from_two_syncs_and_converts_both_ways),
		cmocka_unit_test(phc_to_tsc_follows_the_calibration),
		cmocka_unit_test(txts_ring_numbers_every_datagram_and_remembers_first_transmissions),
		cmocka_unit_test(txts_ring_counts_a_batched_frame_as_its_messages),
		cmocka_unit_test(a_stamp_is_hardware_only_in_hardware_mode_and_when_the_nic_gave_one),
		cmocka_unit_test(a_bad_interface_name_is_enodev_with_a_message),
		cmocka_unit_test(tx_stamps_are_refused_where_there_are_none),
	};
	const struct CMUnitTest veth[] = {
		cmocka_unit_test(ts_info_reports_software_stamps_on_veth),
		cmocka_unit_test(hardware_stamps_on_veth_are_not_available),
		cmocka_unit_test(phc_lookup_on_veth_is_enodev),
		cmocka_unit_test(a_udp_socket_gets_software_rx_and_tx_stamps),
		cmocka_unit_test(udp_context_falls_back_to_software_and_stamps_what_it_sends),
		cmocka_unit_test(tx_stamps_off_by_default_on_udp),
		cmocka_unit_test(xdp_context_stamps_what_it_sends_through_af_xdp),
	};
	char why[256];
	int failed = cmocka_run_group_tests_name("tstamp", plain, NULL, NULL);
	if (failed)
		return failed;
	int rc = setup_veth(why, sizeof(why));
	if (rc == 77) {
		printf("SKIP: %s (the unprivileged tests passed)\n", why);
		return 77;
	}
	if (rc) {
		printf("%s\n", why);
		return rc;
	}
	return cmocka_run_group_tests_name("tstamp_veth", veth, NULL, NULL);
}
