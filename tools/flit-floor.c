// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit-floor: the core-to-core floor of any shared-memory transport.
 *
 * Two threads pinned to two CPUs bounce a cache line: A writes a value, B
 * spins until it sees it and writes the answer, A spins until it sees the
 * answer.  One round trip moves the line A->B->A, so RTT/2 is the one-way
 * cost a shm transport cannot beat on this pair of CPUs.  Timing is taken by
 * A only, with the same fenced TSC reads flit-pong uses, so the two tools'
 * figures compare directly.
 *
 * Mode "single-line" (default): both directions flip the same 64-byte line
 * (odd values A->B, even values B->A).  Mode "two-lines": each direction has
 * its own line, so every transfer is a read of a line the peer wrote last.
 * Mode "ring": each direction is an shm transport ring (transports/shm's
 * record protocol, one writer and one reader, receiver-paced) carrying a
 * frame of SIZE payload bytes, without the library around it: what the
 * ring's protocol itself costs above the line floors.  Mode "udp": the floor
 * of a udp path, a bare UDP ping-pong with a forked peer through sockets or
 * io_uring (udp_floor.c), for flit-pong -t udp to be read against.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"
#include "codec.h"
#include "config.h"
#include "shm/shm_ring.h"

static const char usage[] =
"Usage: flit-floor [options]\n"
"Core-to-core cache-line ping-pong between two pinned threads: the latency\n"
"floor of shared-memory messaging; or (--lines udp) a bare UDP ping-pong with\n"
"a forked peer: the floor of a udp path.  Reports RTT/2 in ns.\n"
"\n"
"  -n, --count N      measured round trips (default 1000000; suffixes k M)\n"
"  -w, --warmup N     unmeasured round trips first (default 100000)\n"
"  -c, --cpus A,B     CPUs of the two threads (default: the first two allowed)\n"
"  -l, --lines 1|2|ring|udp  one shared line (default), one line per\n"
"                     direction, an shm ring per direction (the transport's\n"
"                     record protocol without the library), or udp: this\n"
"                     process pings a forked peer over UDP, both spinning\n"
"  -s, --size N       ring: payload bytes per message (default 16; 0 to\n"
"                     4096); udp: datagram bytes (default 32; 1 to 1472)\n"
"  -b, --backend B    udp: sockets (recvfrom/sendto, default) or io_uring\n"
"                     (multishot recvmsg into provided buffers, sendto; no\n"
"                     system call while nothing is pending), with +poll\n"
"                     (readiness by a multishot poll, recvfrom) and/or\n"
"                     +ring-send (SEND through the ring): flit's\n"
"                     context.udp.uring_recv = poll, uring_send = ring\n"
"      --peer ADDR    udp: the peer's IPv4 address (default 127.0.0.1)\n"
"      --port P       udp: the peer's port (default 14700; this side P+1)\n"
"      --netns NAME   udp: run in network namespace NAME (needs root)\n"
"      --peer-netns NAME  udp: the forked peer in namespace NAME\n"
"  -T, --timeout S    give up if one round trip takes longer (default 5)\n"
"  -j, --json         one JSON object on stdout (header to stderr)\n"
"  -H, --hist         print a log2 histogram of the samples\n"
"  -h, --help         this text\n"
"\n"
"Exit status: 0 ok, 1 runtime failure, 2 usage error.\n";

struct line {
	_Alignas(64) _Atomic uint64_t v;
	char pad[64 - sizeof(uint64_t)];
};

/* Shared by the two threads.  The lines come first, each on its own cache
 * line; the read-only setup and the control flags after them, apart. */
enum floor_mode { ONE_LINE, TWO_LINES, RING, UDP };

#define RING_CAP (1u << 20)

struct floor_run {
	struct line a;                  /* A -> B, and B -> A with one line */
	struct line b;                  /* B -> A with two lines */
	_Alignas(64) uint64_t total;    /* warm-up + measured round trips */
	bool two_lines;
	enum floor_mode mode;
	uint32_t size;                  /* ring: payload bytes */
	void *ring[2];                  /* ring: A -> B, B -> A */
	int cpu_b;
	uint64_t timeout_ticks;
	const struct tool_clock *clk;
	_Alignas(64) _Atomic int b_state;   /* 0 starting, 1 ready, 2 done, <0 -errno */
	_Atomic bool abort;
};

/* Spins between clock checks in the wait loops: rare enough to cost
 * nothing, frequent enough (~1 ms) to notice a stall. */
#define CHECK_EVERY 0xffffu

/* ---- ring mode ------------------------------------------------------------- */

/* One side's ends: it writes ring[out], reads ring[!out] (slot 0). */
struct ring_end {
	struct shm_wr w;
	struct shm_rd r;
	uint64_t seq, rseq;      /* next sent, next expected */
	bool bad;                /* a record out of sequence or of the wrong size */
	uint8_t buf[4096];
};

static void ring_end_init(struct ring_end *e, struct floor_run *r, int out)
{
	uint64_t seq;
	struct shm_slot *sl = shm_slot(r->ring[!out], 0);
	uint64_t pos = shm_rd_join(r->ring[!out], sl, SHM_SLOT_ACTIVE, &seq);

	shm_wr_init(&e->w, r->ring[out]);
	shm_rd_init(&e->r, r->ring[!out], sl, NULL, false, pos);
	e->seq = e->rseq = 0;
	e->bad = false;
	memset(e->buf, 0xa5, sizeof(e->buf));
}

/* What shm_send()'s fast path does: the frame in place, then publish. */
static bool ring_send(struct ring_end *e, uint32_t size)
{
	uint32_t flen = (uint32_t)(FLIT_FRAME_HDR_LEN + flit_msg_wire_len(size, false));
	uint8_t *f = shm_wr_reserve(&e->w, flen);

	if (!f)
		return false;
	uint8_t *pl = flit_frame_put_single(f, 1, e->seq++, 0, size, false, 0);
	memcpy(pl, e->buf, size);
	shm_wr_publish(&e->w, flen);
	return true;
}

/* Poll once: the payload copied out, true; nothing yet, false. */
static bool ring_recv(struct ring_end *e, uint32_t size)
{
	const void *f;
	uint32_t len;

	if (shm_rd_next(&e->r, &f, &len) != SHM_RD_FRAME)
		return false;
	if (flit_ld64((const uint8_t *)f + 16) != e->rseq++ ||
	    len != FLIT_FRAME_HDR_LEN + flit_msg_wire_len(size, false))
		e->bad = true;
	memcpy(e->buf, (const uint8_t *)f + FLIT_FRAME_HDR_LEN + FLIT_MSG_HDR_LEN,
	       len - FLIT_FRAME_HDR_LEN - FLIT_MSG_HDR_LEN);
	shm_rd_commit(&e->r);
	return true;
}

static void *ring_b(struct floor_run *r)
{
	struct ring_end *e = aligned_alloc(64, (sizeof(*e) + 63) & ~(size_t)63);

	if (!e) {
		atomic_store(&r->b_state, -ENOMEM);
		return NULL;
	}
	ring_end_init(e, r, 1);
	atomic_store(&r->b_state, 1);
	for (uint64_t i = 0; i < r->total; i++) {
		uint64_t spins = 0;
		while (!ring_recv(e, r->size))
			if ((++spins & CHECK_EVERY) == 0 &&
			    atomic_load_explicit(&r->abort, memory_order_relaxed))
				goto cancel;
		while (!ring_send(e, r->size))
			if ((++spins & CHECK_EVERY) == 0 &&
			    atomic_load_explicit(&r->abort, memory_order_relaxed))
				goto cancel;
	}
	atomic_store(&r->b_state, e->bad ? -EPROTO : 2);
	free(e);
	return NULL;
cancel:
	atomic_store(&r->b_state, -ECANCELED);
	free(e);
	return NULL;
}

static int ring_a(struct floor_run *r, uint64_t warmup, uint64_t *samples)
{
	struct ring_end *e = aligned_alloc(64, (sizeof(*e) + 63) & ~(size_t)63);
	const struct tool_clock *clk = r->clk;
	int rc = 0;

	if (!e)
		return -ENOMEM;
	ring_end_init(e, r, 0);
	shm_wr_refresh_limit(&e->w); /* B's reader slot is taken by now */
	for (uint64_t i = 0; i < r->total && !rc; i++) {
		uint64_t spins = 0, t0, t1;
		t0 = tool_now(clk);
		while (!ring_send(e, r->size))
			if ((++spins & CHECK_EVERY) == 0 && tool_now(clk) - t0 > r->timeout_ticks)
				rc = -ETIMEDOUT;
		while (!rc && !ring_recv(e, r->size))
			if ((++spins & CHECK_EVERY) == 0 && tool_now(clk) - t0 > r->timeout_ticks)
				rc = -ETIMEDOUT;
		t1 = tool_now(clk);
		if (i >= warmup)
			samples[i - warmup] = t1 - t0;
	}
	if (!rc && e->bad)
		rc = -EPROTO;
	free(e);
	return rc;
}

/* ---- line modes ------------------------------------------------------------ */

static void *thread_b(void *arg)
{
	struct floor_run *r = arg;
	_Atomic uint64_t *in = &r->a.v;
	_Atomic uint64_t *out = r->two_lines ? &r->b.v : &r->a.v;
	int rc = tool_pin_cpu(r->cpu_b);

	if (rc) {
		atomic_store(&r->b_state, rc);
		return NULL;
	}
	if (r->mode == RING)
		return ring_b(r);
	atomic_store(&r->b_state, 1);
	for (uint64_t i = 0; i < r->total; i++) {
		uint64_t want = r->two_lines ? i + 1 : 2 * i + 1;
		uint64_t reply = r->two_lines ? i + 1 : 2 * i + 2;
		uint64_t spins = 0;

		while (atomic_load_explicit(in, memory_order_acquire) != want) {
			if ((++spins & CHECK_EVERY) == 0 &&
			    atomic_load_explicit(&r->abort, memory_order_relaxed)) {
				atomic_store(&r->b_state, -ECANCELED);
				return NULL;
			}
		}
		atomic_store_explicit(out, reply, memory_order_release);
	}
	atomic_store(&r->b_state, 2);
	return NULL;
}

/* Thread A: the timed side.  Returns 0 or -ETIMEDOUT. */
static int run_a(struct floor_run *r, uint64_t warmup, uint64_t *samples)
{
	_Atomic uint64_t *out = &r->a.v;
	_Atomic uint64_t *in = r->two_lines ? &r->b.v : &r->a.v;
	const struct tool_clock *clk = r->clk;

	for (uint64_t i = 0; i < r->total; i++) {
		uint64_t val = r->two_lines ? i + 1 : 2 * i + 1;
		uint64_t want = r->two_lines ? i + 1 : 2 * i + 2;
		uint64_t spins = 0, t0, t1;

		t0 = tool_now(clk);
		atomic_store_explicit(out, val, memory_order_release);
		while (atomic_load_explicit(in, memory_order_acquire) != want) {
			if ((++spins & CHECK_EVERY) == 0 &&
			    tool_now(clk) - t0 > r->timeout_ticks)
				return -ETIMEDOUT;
		}
		t1 = tool_now(clk);
		if (i >= warmup)
			samples[i - warmup] = t1 - t0;
	}
	return 0;
}

/* The result: a table row or a JSON line, and the histogram if asked;
 * frees samples. */
static void print_result(const struct tool_result *res, bool json, bool hist, FILE *hdr,
			 uint64_t *samples, uint64_t count, const struct tool_clock *clk)
{
	if (json) {
		tool_json_print(stdout, res);
	} else {
		tool_lat_header(stdout);
		tool_lat_row(stdout, res);
	}
	if (hist)
		tool_hist_print(hdr, samples, count, clk->tsc.ns_per_tick / 2);
	free(samples);
}

/* --lines udp: the run, its header and its result. */
static int udp_main(struct udp_floor *uf, uint32_t size, const int cpus[2], double timeout_s,
		    uint64_t warmup, uint64_t count, bool json, bool hist,
		    const struct tool_clock *clk, FILE *hdr)
{
	char cpustr[64], mode[160], clkdesc[128];
	struct tool_stats st;
	struct tool_result res;
	uint64_t *samples = malloc(count * sizeof(*samples));

	if (!samples)
		tool_fail("out of memory for %llu samples", (unsigned long long)count);
	memset(samples, 0, count * sizeof(*samples));
	uf->size = size;
	uf->cpus[0] = cpus[0];
	uf->cpus[1] = cpus[1];
	uf->timeout_s = timeout_s;
	tool_cpus_str(cpus, 2, cpustr, sizeof(cpustr));
	tool_header(hdr, "bare udp ping-pong (no library), %s, %u-byte datagrams to %s:%u%s%s, "
		    "ping on CPU %d, pong on CPU %d, both spinning; RTT/2 in ns; clock %s",
		    !uf->uring ? "sockets (recvfrom, sendto)"
		    : uf->poll_recv && uf->ring_send ? "io_uring (defer_taskrun, single_issuer, multishot poll, recvfrom, send)"
		    : uf->poll_recv ? "io_uring (defer_taskrun, single_issuer, multishot poll, recvfrom, sendto)"
		    : uf->ring_send ? "io_uring (defer_taskrun, single_issuer, multishot recvmsg, send)"
		    : "io_uring (defer_taskrun, single_issuer, multishot recvmsg, sendto)",
		    size, uf->peer, (unsigned)uf->port, uf->peer_netns ? ", peer in netns " : "",
		    uf->peer_netns ? uf->peer_netns : "", cpus[0], cpus[1],
		    tool_clock_desc(clk, clkdesc, sizeof(clkdesc)));
	int rc = udp_floor_run(uf, warmup, count, samples);
	if (rc == -ETIMEDOUT)
		tool_fail("no answer from %s:%u within %g s (is the peer's address right, "
			  "and the path up?)", uf->peer, (unsigned)uf->port, timeout_s);
	if (rc == -ECHILD)
		tool_fail("the peer failed (a socket or io_uring could not be set up there, "
			  "or it waited %g s for a datagram)", timeout_s + 2);
	if (rc)
		tool_fail("ping: %s", strerror(-rc));
	snprintf(mode, sizeof(mode), "udp,%s%s%s,spin,pinned=%s", uf->uring ? "io_uring" : "sockets",
		 uf->poll_recv ? "+poll" : "", uf->ring_send ? "+ring-send" : "", cpustr);
	tool_stats_compute(samples, count, clk->tsc.ns_per_tick / 2, &st);
	tool_result_init(&res, "flit-floor");
	res.label = "udp";
	res.size = size;
	res.count = (int64_t)count;
	res.lat = &st;
	res.clock = clk->name;
	res.mode = mode;
	print_result(&res, json, hist, hdr, samples, count, clk);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "count",   required_argument, NULL, 'n' },
		{ "warmup",  required_argument, NULL, 'w' },
		{ "cpus",    required_argument, NULL, 'c' },
		{ "lines",   required_argument, NULL, 'l' },
		{ "size",    required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "json",    no_argument,       NULL, 'j' },
		{ "hist",    no_argument,       NULL, 'H' },
		{ "backend", required_argument, NULL, 'b' },
		{ "peer",    required_argument, NULL, 'P' },
		{ "port",    required_argument, NULL, 'p' },
		{ "netns",   required_argument, NULL, 'N' },
		{ "peer-netns", required_argument, NULL, 'M' },
		{ "help",    no_argument,       NULL, 'h' },
		{ 0 }
	};
	uint64_t count = 1000000, warmup = 100000;
	double timeout_s = 5;
	bool json = false, hist = false, two_lines = false, cpus_set = false, size_set = false;
	enum floor_mode fmode = ONE_LINE;
	struct udp_floor uf = { .peer = "127.0.0.1", .port = 14700, .size = 32 };
	bool udp_opt = false;
	uint32_t size = 16;
	int cpus[2], opt, rc, b_state;
	char cpustr[64], mode[160], clkdesc[128];
	struct tool_clock clk;
	struct floor_run *r;
	struct tool_stats st;
	struct tool_result res;
	uint64_t *samples;
	pthread_t tb;
	FILE *hdr;

	tool_init("flit-floor", usage);
	while ((opt = getopt_long(argc, argv, ":n:w:c:l:s:T:b:jHh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n': count = tool_parse_count("count", optarg, 1, 1000000000); break;
		case 'w': warmup = tool_parse_count("warmup", optarg, 0, 1000000000); break;
		case 'c':
			if (tool_parse_cpus(optarg, cpus, 2) != 2)
				tool_usage_exit("bad cpu list '%s': needs two CPUs", optarg);
			if (cpus[0] == cpus[1])
				tool_usage_exit("bad cpu list '%s': the CPUs must differ "
						"(spinning threads sharing a CPU wait for "
						"the scheduler)", optarg);
			cpus_set = true;
			break;
		case 'l':
			if (!strcmp(optarg, "1"))
				fmode = ONE_LINE;
			else if (!strcmp(optarg, "2"))
				fmode = TWO_LINES;
			else if (!strcmp(optarg, "ring"))
				fmode = RING;
			else if (!strcmp(optarg, "udp"))
				fmode = UDP;
			else
				tool_usage_exit("bad lines '%s': 1, 2, ring or udp", optarg);
			two_lines = fmode == TWO_LINES;
			break;
		case 's':
			size = (uint32_t)tool_parse_count("size", optarg, 0, 4096);
			size_set = true;
			break;
		case 'b':
			if (tool_udp_path_parse(optarg, &uf.uring, &uf.poll_recv, &uf.ring_send))
				tool_usage_exit("bad backend '%s': sockets or io_uring, io_uring+poll, "
						"io_uring+ring-send, io_uring+poll+ring-send", optarg);
			udp_opt = true;
			break;
		case 'P': uf.peer = optarg; udp_opt = true; break;
		case 'p': uf.port = (uint16_t)tool_parse_count("port", optarg, 1, 65534); udp_opt = true; break;
		case 'N': uf.netns = tool_parse_netns("--netns", optarg); udp_opt = true; break;
		case 'M': uf.peer_netns = tool_parse_netns("--peer-netns", optarg); udp_opt = true; break;
		case 'T': timeout_s = tool_parse_seconds("timeout", optarg, 0.001, 3600); break;
		case 'j': json = true; break;
		case 'H': hist = true; break;
		case 'h': tool_help_exit();
		default: tool_getopt_error(opt, argv);
		}
	}
	if (optind < argc)
		tool_usage_exit("unexpected argument '%s'", argv[optind]);
	if (size_set && fmode != RING && fmode != UDP)
		tool_usage_exit("--size applies to --lines ring or udp (a line is 64 bytes)");
	if (udp_opt && fmode != UDP)
		tool_usage_exit("--backend, --peer, --port, --netns and --peer-netns apply to --lines udp");
	if (fmode == UDP && size_set && (size < 1 || size > 1472))
		tool_usage_exit("bad size %u: a udp datagram of 1 to 1472 bytes", size);
	if (!cpus_set && tool_default_cpus(cpus, 2) < 2)
		tool_fail("needs two CPUs; this process may use only one");

	hdr = json ? stderr : stdout;
	tool_clock_init(&clk);

	if (fmode == UDP)
		return udp_main(&uf, size_set ? size : 32, cpus, timeout_s, warmup, count, json, hist,
				&clk, hdr);
	r = aligned_alloc(64, sizeof(*r));
	samples = malloc(count * sizeof(*samples));
	if (!r || !samples)
		tool_fail("out of memory for %llu samples", (unsigned long long)count);
	memset(r, 0, sizeof(*r));
	/* Touch every sample page now: no page fault inside the timed loop. */
	memset(samples, 0, count * sizeof(*samples));
	r->total = warmup + count;
	r->two_lines = two_lines;
	r->mode = fmode;
	r->size = size;
	if (fmode == RING) {
		uint32_t hs = shm_hdr_size(1);
		for (int k = 0; k < 2; k++) {
			r->ring[k] = aligned_alloc(4096, hs + RING_CAP);
			if (!r->ring[k])
				tool_fail("out of memory for the rings");
			memset(r->ring[k], 0, hs + RING_CAP);
			if (shm_ring_init(r->ring[k], RING_CAP, 1, FLIT_SHM_PACED, 1, "flit-floor", 0))
				tool_fail("ring: %s", flit_errmsg());
		}
	}
	r->cpu_b = cpus[1];
	r->clk = &clk;
	r->timeout_ticks = tool_ticks(&clk, timeout_s * 1e9);

	rc = tool_pin_cpu(cpus[0]);
	if (rc)
		tool_fail("pinning to CPU %d: %s", cpus[0], strerror(-rc));
	rc = pthread_create(&tb, NULL, thread_b, r);
	if (rc)
		tool_fail("creating the second thread: %s", strerror(rc));
	/* Wait for B to be pinned and spinning (bounded). */
	{
		uint64_t t0 = tool_now(&clk);
		while ((b_state = atomic_load(&r->b_state)) == 0) {
			if (tool_now(&clk) - t0 > r->timeout_ticks)
				break;
			sched_yield();
		}
	}
	if (b_state == 1)
		rc = fmode == RING ? ring_a(r, warmup, samples) : run_a(r, warmup, samples);
	else
		rc = b_state < 0 ? b_state : -ETIMEDOUT;
	atomic_store(&r->abort, true);
	pthread_join(tb, NULL);
	if (b_state < 0)
		tool_fail("second thread: pinning to CPU %d: %s", cpus[1], strerror(-b_state));
	if (rc == -EPROTO || atomic_load(&r->b_state) == -EPROTO)
		tool_fail("ring: a record arrived out of sequence or with the wrong size");
	if (rc == -ENOMEM)
		tool_fail("out of memory");
	if (rc)
		tool_fail("no answer from CPU %d within %g s (%s)", cpus[1], timeout_s,
			  b_state == 1 ? "round trip stalled" : "thread did not start");

	tool_cpus_str(cpus, 2, cpustr, sizeof(cpustr));
	snprintf(mode, sizeof(mode), "%s,spin,pinned=%s",
		 fmode == RING ? "ring" : two_lines ? "two-lines" : "single-line", cpustr);
	if (fmode == RING)
		tool_header(hdr, "shm ring ping-pong (the record protocol, no library), %u-byte "
			    "payload, threads pinned to CPUs %s; RTT/2 in ns; clock %s", size, cpustr,
			    tool_clock_desc(&clk, clkdesc, sizeof(clkdesc)));
	else
		tool_header(hdr, "cache-line ping-pong, %s, threads pinned to CPUs %s; "
			    "RTT/2 in ns; clock %s", two_lines ? "one line per direction" :
			    "one shared line", cpustr, tool_clock_desc(&clk, clkdesc, sizeof(clkdesc)));

	tool_stats_compute(samples, count, clk.tsc.ns_per_tick / 2, &st);
	tool_result_init(&res, "flit-floor");
	res.label = fmode == RING ? "ring" : "floor";
	res.size = fmode == RING ? (int64_t)size : 64;
	res.count = (int64_t)count;
	res.lat = &st;
	res.clock = clk.name;
	res.mode = mode;
	print_result(&res, json, hist, hdr, samples, count, &clk);
	free(r->ring[0]);
	free(r->ring[1]);
	free(r);
	return 0;
}
