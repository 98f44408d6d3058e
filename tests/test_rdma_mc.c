// SPDX-License-Identifier: BSD-2-Clause
/* RDMA multicast (source.rdma.mode = multicast): the session layer of
 * udp/xdp over a UD queue pair (transports/rdma/ud_path.c), against a real
 * verbs device.  On a host without one the program exits 77 "SKIP: ...";
 * tests/test_rdma_vm.sh runs it inside a Soft-RoCE guest, where the
 * processes of a case share the guest's one device (the kernel loops the
 * group's packets back to the members on the host, as a switch would).
 *
 * Each case runs in a child process of its own and forks its receivers
 * before any verbs object exists (tests/rdmatest.h).  The receivers inject
 * loss in the library's receive path (context.udp.impair, the udp tests'
 * impairment); NAKs and retransmissions repair it.  FLIT_RDMA_MC_COUNT sets
 * the messages of the fan-out cases (default 1,000,000). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <net/if.h>
#include <cmocka.h>

#include "testlib.h"

#ifdef FLIT_HAVE_RDMA
#include <infiniband/verbs.h>
#include "rdmatest.h"

#define GROUP "239.192.78.9" /* the cases' multicast group */

static uint64_t mc_count = 1000000;

/* A context of rdma multicast on this host's RDMA address. */
static flit_ctx *mc_ctx(const char *extra)
{
	char cfg[1024];
	snprintf(cfg, sizeof(cfg), "context.transports = rdma\ncontext.log_level = info\n"
		 "context.rdma.address = %s\n%s", addr, extra ? extra : "");
	flit_ctx *ctx = tl_ctx(cfg);
	CHECK(ctx, "context");
	return ctx;
}

static flit_pub *mc_pub(flit_ctx *ctx, const char *topic, const char *extra)
{
	char cfg[512];
	snprintf(cfg, sizeof(cfg), "rdma.mode = multicast\nudp.group = %s\n%s", GROUP, extra ? extra : "");
	FLIT_OPTS(flit_pub_opts, o, .transport = "rdma", .config = cfg);
	flit_pub *p = flit_pub_new(ctx, topic, &o);
	CHECK(p, "publisher %s", topic);
	return p;
}

static flit_sub *mc_sub(flit_ctx *ctx, const char *topic, struct rx *r)
{
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg, .arg = r);
	flit_sub *s = flit_sub_new(ctx, topic, &so);
	CHECK(s, "subscriber %s", topic);
	return s;
}

/* A device counter of the port the address is on (hw_counters), or -1. */
static long long port_counter(const char *name)
{
	char path[600], dev[256] = "";
	struct dirent *de;
	DIR *dir = opendir("/sys/class/infiniband");
	long long v = -1;

	while (dir && !dev[0] && (de = readdir(dir)))
		if (de->d_name[0] != '.')
			snprintf(dev, sizeof(dev), "%s", de->d_name);
	if (dir)
		closedir(dir);
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev, name);
	FILE *f = fopen(path, "r");
	if (f && fscanf(f, "%lld", &v) != 1)
		v = -1;
	if (f)
		fclose(f);
	return v;
}

/* ---- receivers ------------------------------------------------------------------ */

struct mc_job {
	const char *topic;
	uint64_t count;         /* messages 0 .. count-1 */
	size_t size;
	unsigned loss_pct;      /* injected in the receive path */
	bool from_join;         /* joins a running session: from wherever it joins */
	bool die;               /* killed by the case once it has had some */
	unsigned ms;
	unsigned seed;
};

/* Everything in order, no loss reported, the clean EOS; with loss
 * injected, the NAKs and retransmissions that repaired it counted.  A byte
 * on done_fd at BOS and another once it has had the last message. */
static int mc_rx_body(void *arg, int done_fd)
{
	struct mc_job *j = arg;
	struct rx r = { .size = j->size };
	char extra[256] = "";

	flit_set_print(capture);
	if (j->loss_pct)
		snprintf(extra, sizeof(extra), "context.udp.impair = loss=%u%%,seed=%u\n", j->loss_pct, j->seed);
	flit_ctx *ctx = mc_ctx(extra);
	flit_sub *s = mc_sub(ctx, j->topic, &r);

	CHECK(poll_until(ctx, &r.bos, 1, j->ms), "BOS of %s", j->topic);
	CHECK(write(done_fd, "b", 1) == 1, "pipe");
	CHECK(poll_until(ctx, &r.next, j->count, j->ms), "%llu messages, the last %llu (%llu bad: %s)",
	      (unsigned long long)r.got, (unsigned long long)r.next - 1, (unsigned long long)r.bad, r.why);
	CHECK(write(done_fd, "a", 1) == 1, "pipe");
	CHECK(poll_until(ctx, &r.eos, 1, j->ms), "EOS after %llu messages (next %llu)",
	      (unsigned long long)r.got, (unsigned long long)r.next);
	CHECK(!r.bad, "%llu bad: %s", (unsigned long long)r.bad, r.why);
	CHECK(!r.died, "EOS says the source died");
	CHECK(r.next == j->count, "last message %llu, want %llu", (unsigned long long)r.next - 1,
	      (unsigned long long)j->count - 1);
	if (!j->from_join)
		CHECK(r.first == 0 && r.got == j->count, "got %llu from %llu",
		      (unsigned long long)r.got, (unsigned long long)r.first);
	struct flit_counters c = { .sz = sizeof(c) };
	CHECK(flit_ctx_counters(ctx, &c) == 0, "counters");
	CHECK(c.msgs_lost == 0 && c.loss_events == 0, "%llu lost", (unsigned long long)c.msgs_lost);
	if (j->loss_pct)
		CHECK(c.naks_sent > 0 && c.retx_received > 0, "loss %u%% repaired without NAKs (%llu) or "
		      "retransmissions (%llu)?", j->loss_pct, (unsigned long long)c.naks_sent,
		      (unsigned long long)c.retx_received);
	printf("#   receiver %d: %llu messages in %llu frames, %llu NAK ranges sent, %llu retransmissions, "
	       "%llu duplicates\n", (int)getpid(), (unsigned long long)r.got, (unsigned long long)c.frames_received,
	       (unsigned long long)c.naks_sent, (unsigned long long)c.retx_received,
	       (unsigned long long)c.duplicates);
	fflush(stdout);
	flit_sub_close(s);
	flit_ctx_close(ctx);
	return 0;
}

/* A receiver that is killed: it only keeps receiving. */
static int mc_rx_doomed(void *arg, int done_fd)
{
	struct mc_job *j = arg;
	struct rx r = { .size = j->size };
	flit_set_print(capture);
	flit_ctx *ctx = mc_ctx(NULL);
	mc_sub(ctx, j->topic, &r);
	CHECK(poll_until(ctx, &r.bos, 1, j->ms), "BOS of %s", j->topic);
	CHECK(poll_until(ctx, &r.got, 1000, j->ms), "first messages");
	CHECK(write(done_fd, "h", 1) == 1, "pipe");
	for (;;)
		if (flit_ctx_poll(ctx, 0) <= 0)
			sched_yield();
}

/* ---- the publisher ------------------------------------------------------------ */

/* Send messages [from, to) of sequence-numbered payloads of j->size bytes,
 * then flush. */
static void mc_send_all(flit_pub *p, const struct mc_job *j, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++)
		CHECK(send_one(p, NULL, i, j->size, 60000, NULL), "message %llu stuck", (unsigned long long)i);
	CHECK(flush_all(p, 30000), "flush");
}

#define PUB_CFG "batch = true\nudp.rate_limit = 40M\nudp.retain = 256M\nudp.retain_ms = 60000\n"

static int fan_out(unsigned nrx, unsigned loss)
{
	struct mc_job j = { .topic = "mc.fan", .count = mc_count, .size = 32, .loss_pct = loss,
			    .ms = 300000 };
	struct kid k[4];

	for (unsigned i = 0; i < nrx; i++) {
		j.seed = 7 + i;
		k[i] = kid_fork(mc_rx_body, &j);
	}
	for (unsigned i = 0; i < nrx; i++)
		kid_start(&k[i]);
	flit_ctx *ctx = mc_ctx(NULL);
	flit_pub *p = mc_pub(ctx, "mc.fan", PUB_CFG);
	CHECK(wait_receivers(p, NULL, (int)nrx, 30000), "%d of %u receivers joined", flit_pub_receivers(p), nrx);
	for (unsigned i = 0; i < nrx; i++)
		CHECK(kid_signalled(&k[i], 30000), "receiver %u had no BOS", i);
	long long sent0 = port_counter("sent_pkts");
	uint64_t t0 = tl_now_ms();
	mc_send_all(p, &j, 0, j.count);
	struct flit_counters c = { .sz = sizeof(c) };
	CHECK(flit_ctx_counters(ctx, &c) == 0 && c.msgs_sent == j.count, "counted %llu sent",
	      (unsigned long long)c.msgs_sent);
	long long sent = port_counter("sent_pkts") - sent0;
	printf("#   %llu messages in %llu frames to %u receivers (loss %u%%) in %llu ms; the device sent "
	       "%lld packets\n", (unsigned long long)j.count, (unsigned long long)c.frames_sent, nrx, loss,
	       (unsigned long long)(tl_now_ms() - t0), sent);
	fflush(stdout);
	/* one send per frame, however many receivers (connections would take
	 * nrx); the device may drop a UD send it has no room for (Soft-RoCE
	 * does under load: unreliable datagrams), which NAKs repair */
	if (sent0 >= 0)
		CHECK(sent <= (long long)c.frames_sent + 16 && sent * 2 >= (long long)c.frames_sent,
		      "the device sent %lld packets for %llu frames to %u receivers", sent,
		      (unsigned long long)c.frames_sent, nrx);
	/* the source's retention serves the NAKs (the context's service
	 * thread answers them) until every receiver has had the last
	 * message; then END: their EOS */
	for (unsigned i = 0; i < nrx; i++)
		if (!kid_signalled(&k[i], 300000))
			break; /* its exit status says why */
	flit_pub_close(p);
	int bad = 0;
	for (unsigned i = 0; i < nrx; i++) {
		int st = kid_wait(&k[i], 30000);
		if (st)
			fprintf(stderr, "receiver %u: exit %d\n", i, st);
		bad += st != 0;
	}
	flit_ctx_close(ctx);
	CHECK(!bad, "%d of %u receivers failed", bad, nrx);
	return 0;
}

static int case_two_at_1pct(void) { return fan_out(2, 1); }
static int case_four_at_5pct(void) { return fan_out(4, 5); }

static void two_receivers_get_every_message_in_order_with_1pct_loss_repaired(void **state)
{
	(void)state;
	isolated(case_two_at_1pct, 600000);
}

static void four_receivers_get_every_message_in_order_with_5pct_loss_repaired(void **state)
{
	(void)state;
	isolated(case_four_at_5pct, 600000);
}

/* ---- a receiver joins a running session, another dies -------------------------- */

static int case_join_and_die(void)
{
	struct mc_job full = { .topic = "mc.jd", .count = mc_count / 5, .size = 64, .ms = 300000 };
	struct mc_job join = full, doomed = full;
	join.from_join = true;
	struct kid a = kid_fork(mc_rx_body, &full), d = kid_fork(mc_rx_doomed, &doomed),
		   b = kid_fork(mc_rx_body, &join);

	kid_start(&a);
	kid_start(&d);
	flit_ctx *ctx = mc_ctx(NULL);
	flit_pub *p = mc_pub(ctx, "mc.jd", PUB_CFG);
	CHECK(wait_receivers(p, NULL, 2, 30000), "%d of 2 receivers joined", flit_pub_receivers(p));
	CHECK(kid_signalled(&a, 30000), "the first receiver had no BOS");
	uint64_t half = full.count / 2;
	mc_send_all(p, &full, 0, half / 2);
	/* the doomed one has had some: it dies mid-stream */
	CHECK(kid_signalled(&d, 60000), "the doomed receiver had no messages");
	kill(d.pid, SIGKILL);
	CHECK(kid_wait(&d, 10000) == 128 + SIGKILL, "the doomed receiver did not die");
	mc_send_all(p, &full, half / 2, half);
	/* a receiver joins the running session */
	kid_start(&b);
	CHECK(kid_signalled(&b, 60000), "the joining receiver had no BOS");
	mc_send_all(p, &full, half, full.count);
	CHECK(kid_signalled(&a, 300000) && kid_signalled(&b, 300000), "a receiver did not get the last message");
	flit_pub_close(p);
	int sa = kid_wait(&a, 30000), sb = kid_wait(&b, 30000);
	flit_ctx_close(ctx);
	CHECK(sa == 0 && sb == 0, "receivers exit %d (from the start) and %d (joined)", sa, sb);
	return 0;
}

static void joining_receiver_and_killed_receiver_leave_the_others_whole(void **state)
{
	(void)state;
	isolated(case_join_and_die, 600000);
}

/* ---- refusals ----------------------------------------------------------------- */

static int case_refusals(void)
{
	flit_ctx *ctx = mc_ctx(NULL);
	flit_pub *p = mc_pub(ctx, "mc.big", NULL);
	size_t max = flit_pub_max_msg(p);
	char buf[8192] = { 0 };

	CHECK(max > 512 && max < 8192, "largest message %zu", max);
	CHECK(flit_pub_send(p, buf, max) == FLIT_OK, "a message of the largest size");
	int rc = flit_pub_send(p, buf, max + 1);
	CHECK(rc == -EMSGSIZE && strstr(flit_errmsg(), "path MTU") &&
	      strstr(flit_errmsg(), "source.rdma.mode = send"), "one byte more: %d", rc);
	FLIT_OPTS(flit_pub_opts, o, .transport = "rdma",
		  .config = "rdma.mode = multicast\nudp.mode = unicast\n");
	CHECK(!flit_pub_new(ctx, "mc.uni", &o) && strstr(flit_errmsg(), "unicast does not apply"),
	      "unicast mode taken");
	char desc[2048];
	CHECK(flit_ctx_describe(ctx, "rdma", desc, sizeof(desc)) > 0 && strstr(desc, "rdma multicast (UD) on "),
	      "description: %s", desc);
	flit_pub_close(p);
	flit_ctx_close(ctx);

	/* an address no RDMA device has: the connected transport runs on,
	 * multicast sources are refused with the reason */
	flit_ctx *c2 = tl_ctx("context.transports = rdma\ncontext.rdma.address = 127.0.0.1\n");
	CHECK(c2, "context");
	FLIT_OPTS(flit_pub_opts, o2, .transport = "rdma", .config = "rdma.mode = multicast\n");
	CHECK(!flit_pub_new(c2, "mc.nodev", &o2) && strstr(flit_errmsg(), "rdma multicast: unavailable"),
	      "a source without a device");
	flit_ctx_close(c2);
	return 0;
}

static void message_over_the_path_mtu_and_unicast_mode_are_refused_clearly(void **state)
{
	(void)state;
	isolated(case_refusals, 60000);
}

int main(void)
{
	const struct CMUnitTest cases[] = {
		cmocka_unit_test(message_over_the_path_mtu_and_unicast_mode_are_refused_clearly),
		cmocka_unit_test(two_receivers_get_every_message_in_order_with_1pct_loss_repaired),
		cmocka_unit_test(four_receivers_get_every_message_in_order_with_5pct_loss_repaired),
		cmocka_unit_test(joining_receiver_and_killed_receiver_leave_the_others_whole),
	};
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	if (l)
		ibv_free_device_list(l);
	if (!l || n <= 0) {
		printf("SKIP: no RDMA device (ibv_get_device_list found none%s%s; tests/test_rdma_vm.sh "
		       "runs this in a Soft-RoCE guest)\n", l ? "" : ": ", l ? "" : strerror(errno));
		return 77;
	}
	if (!local_addr(addr, sizeof(addr))) {
		printf("SKIP: an RDMA device, but no port with an IPv4 address (set FLIT_RDMA_IP)\n");
		return 77;
	}
	const char *e = getenv("FLIT_RDMA_MC_COUNT");
	if (e && *e)
		mc_count = strtoull(e, NULL, 10);
	if (mc_count < 10000)
		mc_count = 10000;
	printf("# RDMA address %s, %llu messages a fan-out case\n", addr, (unsigned long long)mc_count);
	fflush(stdout);
	return cmocka_run_group_tests_name("rdma multicast", cases, NULL, NULL);
}

#else /* !FLIT_HAVE_RDMA */

int main(void)
{
	printf("SKIP: built without RDMA (libibverbs/librdmacm missing at build time)\n");
	return 77;
}

#endif
