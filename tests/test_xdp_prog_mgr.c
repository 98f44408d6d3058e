// SPDX-License-Identifier: BSD-2-Clause
/*
 * The XDP program manager (transports/xdp/xdp_prog.h) through its API: attach
 * in skb mode pins the program and its maps and status says so (single
 * program, and why); attach again changes nothing; flows, sessions/topics,
 * xsks and counters through the pinned maps; stale pins are replaced; a
 * non-flit program on the interface is refused by name; maps opened before a
 * detach stay usable, detach removes the pins and a second detach is
 * -ENOENT.  Two namespaces with an interface of the same name attach side by
 * side (pins in <name>/ and <name>@<cookie>/, maps apart, detaching one
 * leaves the other); the pins of a namespace deleted without detaching are
 * seen as gone, collected by flit_xdp_gc(), and their canonical name is free
 * again.  flit_xdp_mode_* and flit_xdp_counter_name() without privileges.
 *
 * Topology, in network namespaces of this process only
 * (unshare(CLONE_NEWNET), switched with setns(); nothing touches the host's
 * interfaces):
 *
 *     [ns1]  fmPIDa <-veth-> fmPIDb
 *     [ns2]  fmPIDa <-veth-> fmPIDz      (the same name as in ns1)
 *            fmPIDc <-veth-> fmPIDd
 *     [ns3]  fmPIDc <-veth-> fmPIDd      (made and dropped in one test)
 *
 * The pins go to the global bpffs (/sys/fs/bpf/flit/fmPIDa...), hence the
 * per-process names.  Needs root (CAP_SYS_ADMIN for the namespaces and
 * bpffs, CAP_NET_ADMIN, CAP_BPF): a skip without.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include <flit/flit.h>
#include "xdp/xdp_prog.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

static char ifa[IFNAMSIZ], ifb[IFNAMSIZ], ifc[IFNAMSIZ], ifd[IFNAMSIZ],
	    ifz[IFNAMSIZ];
static bool have_net;   /* namespace, veth and bpffs ready */
static int ns1 = -1, ns2 = -1;  /* fds of the namespaces */

static void enter(int ns)
{
	assert_int_equal(setns(ns, CLONE_NEWNET), 0);
}

static void need_net(void)
{
	if (!have_net) {
		printf("SKIP: no private network namespace with a veth (needs root)\n");
		skip();
	}
	enter(ns1);     /* a failed test may have left us elsewhere */
}

static bool path_exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

static bool pin_exists(const char *ifname, const char *name)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s/%s", FLIT_XDP_PIN_ROOT, ifname, name);
	return path_exists(p);
}

/* SO_NETNS_COOKIE of this thread's namespace */
static uint64_t my_cookie(void)
{
	uint64_t c = 0;
	socklen_t len = sizeof(c);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &c, &len), 0);
	close(fd);
	return c;
}

static void canon_dir(char *buf, size_t len, const char *ifname)
{
	snprintf(buf, len, "%s/%s", FLIT_XDP_PIN_ROOT, ifname);
}

static void alt_dir(char *buf, size_t len, const char *ifname, uint64_t cookie)
{
	snprintf(buf, len, "%s/%s@%llu", FLIT_XDP_PIN_ROOT, ifname,
		 (unsigned long long)cookie);
}

static void attach_skb(const char *ifname)
{
	enum flit_xdp_mode got = FLIT_XDP_MODE_AUTO;
	int rc = flit_xdp_attach(ifname, FLIT_XDP_MODE_SKB, &got);

	if (rc)
		printf("attach: %s\n", flit_errmsg());
	assert_int_equal(rc, 0);
	assert_int_equal(got, FLIT_XDP_MODE_SKB);
}

/* ---- without privileges ---- */

static void mode_names_round_trip(void **state)
{
	enum flit_xdp_mode m;

	for (int i = FLIT_XDP_MODE_AUTO; i <= FLIT_XDP_MODE_SKB; i++) {
		assert_int_equal(flit_xdp_mode_parse(flit_xdp_mode_str(i), &m), 0);
		assert_int_equal(m, i);
	}
	assert_int_equal(flit_xdp_mode_parse("generic", &m), -EINVAL);
	assert_non_null(strstr(flit_errmsg(), "generic"));
	assert_int_equal(flit_xdp_mode_parse("", &m), -EINVAL);
}

static void every_counter_has_a_name(void **state)
{
	for (unsigned i = 0; i < FLIT_XDP_COUNTERS; i++)
		assert_non_null(flit_xdp_counter_name(i));
	assert_string_equal(flit_xdp_counter_name(FLIT_XDP_PASSED), "passed");
	assert_null(flit_xdp_counter_name(FLIT_XDP_COUNTERS));
}

static void bad_interface_names_are_einval(void **state)
{
	struct flit_xdp_status st;

	assert_int_equal(flit_xdp_attach("", FLIT_XDP_MODE_SKB, NULL), -EINVAL);
	assert_int_equal(flit_xdp_attach("a/b", FLIT_XDP_MODE_SKB, NULL), -EINVAL);
	assert_int_equal(flit_xdp_status("..", &st), -EINVAL);
	assert_int_equal(flit_xdp_detach("0123456789abcdefX"), -EINVAL);
	/* '@' and ':' are the pin directories' own */
	assert_int_equal(flit_xdp_status("eth0@5", &st), -EINVAL);
	assert_non_null(strstr(flit_errmsg(), "'@'"));
	assert_int_equal(flit_xdp_attach("eth0:1", FLIT_XDP_MODE_SKB, NULL), -EINVAL);
}

/* ---- on the veth ---- */

static void attach_to_missing_interface_is_enodev(void **state)
{
	need_net();
	assert_int_equal(flit_xdp_attach("fmnosuch0", FLIT_XDP_MODE_SKB, NULL), -ENODEV);
	assert_non_null(strstr(flit_errmsg(), "fmnosuch0"));
}

static void attach_pins_and_status_tells_single_program(void **state)
{
	struct flit_xdp_status st;
	static const char *const pins[] = {
		"owner", "ifref", "prog", "flows", "xsks", "sessions", "topics",
		"counters", "version",
	};
	char dir[128];

	need_net();
	attach_skb(ifa);
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++)
		assert_true(pin_exists(ifa, pins[i]));
	assert_int_equal(flit_xdp_status(ifa, &st), 0);
	assert_true(st.attached && st.flit && st.pinned && !st.foreign);
	canon_dir(dir, sizeof(dir), ifa);
	assert_string_equal(st.pin_dir, dir);
	assert_int_equal(st.mode, FLIT_XDP_MODE_SKB);
	assert_int_equal(st.version, FLIT_XDP_VERSION);
	assert_true(st.prog_id > 0);
	assert_string_equal(st.other, "");
	if (st.multiprog) {
		assert_string_equal(st.why_single, "");
	} else {
		assert_true(st.why_single[0] != '\0');
		printf("single program: %s\n", st.why_single);
	}

	/* the kernel has exactly that program on the interface, generic mode */
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	assert_int_equal(bpf_xdp_query((int)if_nametoindex(ifa), 0, &q), 0);
	if (!st.multiprog)
		assert_int_equal(q.skb_prog_id, st.prog_id);
}

static void attach_again_changes_nothing(void **state)
{
	struct flit_xdp_status a, b;
	enum flit_xdp_mode got = FLIT_XDP_MODE_AUTO;

	need_net();
	assert_int_equal(flit_xdp_status(ifa, &a), 0);
	assert_true(a.flit);
	/* asked native: still 0, and told the mode it really has */
	assert_int_equal(flit_xdp_attach(ifa, FLIT_XDP_MODE_NATIVE, &got), 0);
	assert_int_equal(got, FLIT_XDP_MODE_SKB);
	assert_int_equal(flit_xdp_status(ifa, &b), 0);
	assert_int_equal(a.prog_id, b.prog_id);
}

struct flows_seen {
	int n;
	uint32_t slot_of_group;
};

static int on_flow(void *arg, const struct flit_xdp_flow_key *k,
		   const struct flit_xdp_flow *v)
{
	struct flows_seen *s = arg;

	if (k->daddr == inet_addr("239.1.2.3") && k->dport == htons(4000))
		s->slot_of_group = v->slot_base;
	s->n++;
	return 0;
}

static int stop_at_first(void *arg, const struct flit_xdp_flow_key *k,
			 const struct flit_xdp_flow *v)
{
	(*(int *)arg)++;
	return 42;
}

static void flows_round_trip(void **state)
{
	struct flit_xdp_maps m;
	struct flows_seen s = { 0 };
	int calls = 0;

	need_net();
	assert_int_equal(flit_xdp_maps_open(ifa, &m), 0);
	assert_string_equal(m.pin_dir + strlen(FLIT_XDP_PIN_ROOT) + 1, ifa);
	assert_int_equal(flit_xdp_flow_add(&m, inet_addr("239.1.2.3"), htons(4000), 3), 0);
	assert_int_equal(flit_xdp_flow_add(&m, inet_addr("10.0.0.1"), htons(5), 0), 0);
	assert_int_equal(flit_xdp_flow_add(&m, inet_addr("10.0.0.1"), htons(6),
					   FLIT_XDP_XSKS_MAX), -EINVAL);
	assert_int_equal(flit_xdp_flow_each(&m, on_flow, &s), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.slot_of_group, 3);
	assert_int_equal(flit_xdp_flow_each(&m, stop_at_first, &calls), 42);
	assert_int_equal(calls, 1);

	/* the program's own map, as the kernel sees it */
	struct flit_xdp_flow_key k = { .daddr = inet_addr("239.1.2.3"), .dport = htons(4000) };
	struct flit_xdp_flow v;
	assert_int_equal(bpf_map_lookup_elem(m.flows, &k, &v), 0);
	assert_int_equal(v.slot_base, 3);

	assert_int_equal(flit_xdp_flow_del(&m, inet_addr("10.0.0.1"), htons(5)), 0);
	assert_int_equal(flit_xdp_flow_del(&m, inet_addr("10.0.0.1"), htons(5)), -ENOENT);
	assert_non_null(strstr(flit_errmsg(), "10.0.0.1:5"));
	s = (struct flows_seen){ 0 };
	assert_int_equal(flit_xdp_flow_each(&m, on_flow, &s), 0);
	assert_int_equal(s.n, 1);
	flit_xdp_maps_close(&m);
	flit_xdp_maps_close(&m);        /* twice is fine */
	assert_int_equal(m.flows, -1);
}

struct topic_seen {
	int n;
	uint32_t s[8], t[8], f[8];
};

static int on_topic(void *arg, uint32_t session, uint32_t topic, uint32_t flags)
{
	struct topic_seen *ts = arg;

	if (ts->n < 8) {
		ts->s[ts->n] = session;
		ts->t[ts->n] = topic;
		ts->f[ts->n] = flags;
	}
	ts->n++;
	return 0;
}

static void sessions_and_topics_round_trip(void **state)
{
	struct flit_xdp_maps m;
	struct topic_seen ts = { 0 };

	need_net();
	assert_int_equal(flit_xdp_maps_open(ifa, &m), 0);
	assert_int_equal(flit_xdp_session_set(&m, 0x1a2b3c4d, FLIT_XDP_SESS_FILTER, 0, 0), 0);
	assert_int_equal(flit_xdp_session_set(&m, 7, 0x80, 0, 0), -EINVAL);
	assert_int_equal(flit_xdp_topic_set(&m, 0x1a2b3c4d, 9, true), 0);
	assert_int_equal(flit_xdp_topic_set(&m, 0x1a2b3c4d, 2, true), 0);
	assert_int_equal(flit_xdp_topic_set(&m, 0x1a2b3c4d, 5, true), 0);
	assert_int_equal(flit_xdp_topic_set(&m, 0x1a2b3c4d, 5, false), 0);
	assert_int_equal(flit_xdp_topic_set(&m, 0x1a2b3c4d, 5, false), 0);
	assert_int_equal(flit_xdp_session_set(&m, 3, 0, 0, 0), 0);

	/* sorted; the session without topics once, topic UINT32_MAX */
	assert_int_equal(flit_xdp_topic_each(&m, on_topic, &ts), 0);
	assert_int_equal(ts.n, 3);
	assert_int_equal(ts.s[0], 3);
	assert_int_equal(ts.t[0], UINT32_MAX);
	assert_int_equal(ts.f[0], 0);
	assert_int_equal(ts.s[1], 0x1a2b3c4d);
	assert_int_equal(ts.t[1], 2);
	assert_int_equal(ts.f[1], FLIT_XDP_SESS_FILTER);
	assert_int_equal(ts.t[2], 9);

	assert_int_equal(flit_xdp_session_del(&m, 0x1a2b3c4d), 0);
	assert_int_equal(flit_xdp_session_del(&m, 0x1a2b3c4d), -ENOENT);
	struct flit_xdp_topic_key k = { .session = 0x1a2b3c4d, .topic = 2 };
	uint32_t v;
	assert_int_equal(bpf_map_lookup_elem(m.topics, &k, &v), -ENOENT);
	ts = (struct topic_seen){ 0 };
	assert_int_equal(flit_xdp_topic_each(&m, on_topic, &ts), 0);
	assert_int_equal(ts.n, 1);
	assert_int_equal(flit_xdp_session_del(&m, 3), 0);

	/* several at once, parted ones (REPORT, named) among them: one pass
	 * over the topics; another session's topics stay */
	assert_int_equal(flit_xdp_session_set(&m, 11, FLIT_XDP_SESS_FILTER | FLIT_XDP_SESS_REPORT,
					      40, 7), 0);
	assert_int_equal(flit_xdp_session_set(&m, 12, FLIT_XDP_SESS_FILTER, 0, 0), 0);
	assert_int_equal(flit_xdp_session_set(&m, 13, FLIT_XDP_SESS_FILTER, 0, 0), 0);
	for (uint32_t t = 0; t < 30; t++) {
		assert_int_equal(flit_xdp_topic_set(&m, 11, t, true), 0);
		assert_int_equal(flit_xdp_topic_set(&m, 13, t, true), 0);
	}
	struct flit_xdp_session sv;
	uint32_t sid = 11;
	assert_int_equal(bpf_map_lookup_elem(m.sessions, &sid, &sv), 0);
	assert_int_equal(sv.flags, FLIT_XDP_SESS_FILTER | FLIT_XDP_SESS_REPORT);
	assert_int_equal(sv.named, 40);
	assert_int_equal(sv.gen, 7);
	const uint32_t gone[] = { 12, 11, 99 };
	assert_int_equal(flit_xdp_sessions_del(&m, gone, 3), 0);
	ts = (struct topic_seen){ 0 };
	assert_int_equal(flit_xdp_topic_each(&m, on_topic, &ts), 0);
	assert_int_equal(ts.n, 30);         /* session 13's */
	for (int i = 0; i < 8; i++)
		assert_int_equal(ts.s[i], 13);
	assert_int_equal(bpf_map_lookup_elem(m.sessions, &sid, &sv), -ENOENT);
	assert_int_equal(flit_xdp_session_del(&m, 13), 0);
	flit_xdp_maps_close(&m);
}

static void xsk_slots_and_counters(void **state)
{
	struct flit_xdp_maps m;
	uint64_t c[FLIT_XDP_COUNTERS];
	int xsk, udp;

	need_net();
	assert_int_equal(flit_xdp_maps_open(ifa, &m), 0);
	xsk = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(udp >= 0);
	if (xsk >= 0) {
		assert_int_equal(flit_xdp_xsk_set(&m, 5, xsk), 0);
		assert_int_equal(flit_xdp_xsk_clear(&m, 5), 0);
		close(xsk);
	}
	assert_int_equal(flit_xdp_xsk_clear(&m, 5), 0);    /* already empty */
	assert_int_equal(flit_xdp_xsk_set(&m, FLIT_XDP_XSKS_MAX, udp), -EINVAL);
	assert_true(flit_xdp_xsk_set(&m, 1, udp) < 0);      /* not an AF_XDP socket */
	close(udp);

	memset(c, 0xff, sizeof(c));
	assert_int_equal(flit_xdp_counters(&m, c), 0);
	for (unsigned i = 0; i < FLIT_XDP_COUNTERS; i++)
		assert_true(c[i] < (1ull << 48));
	flit_xdp_maps_close(&m);
}

static void other_program_is_refused_by_name(void **state)
{
	static const struct bpf_insn pass[] = {
		{ .code = 0xb7, .dst_reg = 0, .imm = XDP_PASS },    /* r0 = XDP_PASS */
		{ .code = 0x95 },                                   /* exit */
	};
	struct flit_xdp_status st;
	int fd, ifindex;

	need_net();
	ifindex = (int)if_nametoindex(ifb);
	fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "someone_else", "GPL", pass, 2, NULL);
	assert_true(fd >= 0);
	assert_int_equal(bpf_xdp_attach(ifindex, fd, XDP_FLAGS_SKB_MODE, NULL), 0);

	assert_int_equal(flit_xdp_attach(ifb, FLIT_XDP_MODE_AUTO, NULL), -EBUSY);
	assert_non_null(strstr(flit_errmsg(), "someone_else"));
	assert_false(pin_exists(ifb, "prog"));
	assert_int_equal(flit_xdp_status(ifb, &st), 0);
	assert_true(st.attached && !st.flit && !st.pinned);
	assert_string_equal(st.other, "someone_else");
	assert_int_equal(flit_xdp_detach(ifb), -ENOENT);

	assert_int_equal(bpf_xdp_detach(ifindex, XDP_FLAGS_SKB_MODE, NULL), 0);
	close(fd);
}

static void stale_pins_are_replaced(void **state)
{
	struct flit_xdp_status a, b;

	need_net();
	assert_int_equal(flit_xdp_status(ifa, &a), 0);
	assert_true(a.flit);
	/* what `ip link set dev X xdpgeneric off` does */
	assert_int_equal(bpf_xdp_detach((int)if_nametoindex(ifa), XDP_FLAGS_SKB_MODE, NULL), 0);
	assert_int_equal(flit_xdp_status(ifa, &b), 0);
	assert_true(b.pinned && !b.flit && !b.attached);

	attach_skb(ifa);
	assert_int_equal(flit_xdp_status(ifa, &b), 0);
	assert_true(b.flit);
	assert_int_not_equal(a.prog_id, b.prog_id);
}

/* flows of m: whether daddr:dport is there, and how many */
struct flow_find {
	uint32_t daddr;
	uint16_t dport;
	bool found;
	int n;
};

static int find_flow(void *arg, const struct flit_xdp_flow_key *k,
		     const struct flit_xdp_flow *v)
{
	struct flow_find *f = arg;

	if (k->daddr == f->daddr && k->dport == f->dport)
		f->found = true;
	f->n++;
	return 0;
}

static bool has_flow(const char *ifname, const char *addr, uint16_t port)
{
	struct flit_xdp_maps m;
	struct flow_find f = { .daddr = inet_addr(addr), .dport = htons(port) };

	assert_int_equal(flit_xdp_maps_open(ifname, &m), 0);
	assert_int_equal(flit_xdp_flow_each(&m, find_flow, &f), 0);
	flit_xdp_maps_close(&m);
	return f.found;
}

static void add_flow(const char *ifname, const char *addr, uint16_t port)
{
	struct flit_xdp_maps m;

	assert_int_equal(flit_xdp_maps_open(ifname, &m), 0);
	assert_int_equal(flit_xdp_flow_add(&m, inet_addr(addr), htons(port), 0), 0);
	flit_xdp_maps_close(&m);
}

/* ns1 and ns2 each have ifa: both attach, each to its own pins */
static void same_name_in_two_namespaces_side_by_side(void **state)
{
	struct flit_xdp_status s1, s2;
	struct flit_xdp_maps m;
	char canon[128], alt2[128];
	uint64_t c2;

	need_net();
	attach_skb(ifa);                        /* ns1: canonical */
	enter(ns2);
	c2 = my_cookie();
	canon_dir(canon, sizeof(canon), ifa);
	alt_dir(alt2, sizeof(alt2), ifa, c2);

	/* before: ns2 is told where its pins would go */
	assert_int_equal(flit_xdp_status(ifa, &s2), 0);
	assert_true(!s2.attached && !s2.pinned && s2.foreign);
	assert_string_equal(s2.pin_dir, alt2);
	assert_int_equal(flit_xdp_maps_open(ifa, &m), -ENOENT);

	attach_skb(ifa);                        /* ns2: <ifa>@<cookie> */
	assert_true(path_exists(alt2));
	assert_int_equal(flit_xdp_status(ifa, &s2), 0);
	assert_true(s2.attached && s2.flit && s2.pinned && s2.foreign);
	assert_string_equal(s2.pin_dir, alt2);
	assert_int_equal(flit_xdp_maps_open(ifa, &m), 0);
	assert_string_equal(m.pin_dir, alt2);
	flit_xdp_maps_close(&m);
	/* again: nothing changes */
	assert_int_equal(flit_xdp_attach(ifa, FLIT_XDP_MODE_SKB, NULL), 0);

	enter(ns1);
	assert_int_equal(flit_xdp_status(ifa, &s1), 0);
	assert_true(s1.flit && s1.pinned && !s1.foreign);
	assert_string_equal(s1.pin_dir, canon);
	assert_int_not_equal(s1.prog_id, s2.prog_id);

	/* maps apart */
	add_flow(ifa, "239.1.1.1", 1111);
	enter(ns2);
	add_flow(ifa, "239.2.2.2", 2222);
	assert_false(has_flow(ifa, "239.1.1.1", 1111));
	assert_true(has_flow(ifa, "239.2.2.2", 2222));
	enter(ns1);
	assert_true(has_flow(ifa, "239.1.1.1", 1111));
	assert_false(has_flow(ifa, "239.2.2.2", 2222));

	/* detach in ns2 leaves ns1 alone */
	enter(ns2);
	assert_int_equal(flit_xdp_detach(ifa), 0);
	assert_false(path_exists(alt2));
	enter(ns1);
	assert_int_equal(flit_xdp_status(ifa, &s1), 0);
	assert_true(s1.flit);
	assert_true(has_flow(ifa, "239.1.1.1", 1111));

	/* and the other way round: ns1 detaches, ns2 keeps its pins at
	 * <ifa>@<cookie> while the canonical name is free */
	enter(ns2);
	attach_skb(ifa);
	enter(ns1);
	assert_int_equal(flit_xdp_detach(ifa), 0);
	assert_false(path_exists(canon));
	assert_int_equal(flit_xdp_status(ifa, &s1), 0);
	assert_true(!s1.pinned && !s1.foreign && !s1.attached);
	assert_string_equal(s1.pin_dir, canon);
	enter(ns2);
	assert_int_equal(flit_xdp_status(ifa, &s2), 0);
	assert_true(s2.flit && !s2.foreign);
	assert_string_equal(s2.pin_dir, alt2);
	add_flow(ifa, "239.3.3.3", 3333);

	/* ns1 takes the canonical name again; ns2 has its own to the end */
	enter(ns1);
	attach_skb(ifa);
	assert_int_equal(flit_xdp_status(ifa, &s1), 0);
	assert_string_equal(s1.pin_dir, canon);
	enter(ns2);
	assert_true(has_flow(ifa, "239.3.3.3", 3333));
	assert_int_equal(flit_xdp_detach(ifa), 0);
	assert_int_equal(flit_xdp_detach(ifa), -ENOENT);
	assert_non_null(strstr(flit_errmsg(), "another one"));
	enter(ns1);
	assert_int_equal(flit_xdp_status(ifa, &s1), 0);
	assert_true(s1.flit);
}

struct dir_seen {
	const char *path;
	bool found, mine, gone;
	uint64_t netns;
	int n;
};

static int see_dir(void *arg, const struct flit_xdp_pin_dir *d)
{
	struct dir_seen *ds = arg;

	ds->n++;
	if (!strcmp(d->path, ds->path)) {
		ds->found = true;
		ds->mine = d->mine;
		ds->gone = d->gone;
		ds->netns = d->netns;
	}
	return 0;
}

static void dir_state(const char *path, struct dir_seen *ds)
{
	*ds = (struct dir_seen){ .path = path };
	assert_int_equal(flit_xdp_pin_dir_each(see_dir, ds), 0);
}

static void count_removed(void *arg, const char *dir)
{
	struct dir_seen *ds = arg;

	if (!strcmp(dir, ds->path))
		ds->found = true;
	ds->n++;
}

/* ns3 attaches ifc first (canonical), ns2 then gets <ifc>@<cookie>; ns3 is
 * dropped without detaching: its pins are seen gone, gc removes them, and
 * ns2 gets the canonical name on its next attach */
static void pins_of_a_deleted_namespace_are_collected(void **state)
{
	struct flit_xdp_status st;
	struct dir_seen ds;
	char canon[128], alt2[128], cmd[256];
	uint64_t c3;
	int ns3, tries;

	need_net();
	canon_dir(canon, sizeof(canon), ifc);
	assert_int_equal(unshare(CLONE_NEWNET), 0);
	ns3 = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	assert_true(ns3 >= 0);
	c3 = my_cookie();
	snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name %s && "
		 "ip link set %s up && ip link set %s up", ifc, ifd, ifc, ifd);
	assert_int_equal(system(cmd), 0);
	attach_skb(ifc);
	assert_int_equal(flit_xdp_status(ifc, &st), 0);
	assert_string_equal(st.pin_dir, canon);
	dir_state(canon, &ds);
	assert_true(ds.found && ds.mine && !ds.gone);
	assert_true(ds.netns == c3);

	enter(ns2);
	alt_dir(alt2, sizeof(alt2), ifc, my_cookie());
	attach_skb(ifc);
	assert_int_equal(flit_xdp_status(ifc, &st), 0);
	assert_true(st.foreign && st.flit);
	assert_string_equal(st.pin_dir, alt2);
	dir_state(canon, &ds);
	assert_true(ds.found && !ds.mine && !ds.gone);

	/* drop ns3: no thread, fd or mount holds it; the kernel deletes it
	 * (asynchronously), destroying its veth and flit's program with it */
	close(ns3);
	for (tries = 0; tries < 100; tries++) {
		dir_state(canon, &ds);
		if (ds.gone)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
	}
	assert_true(ds.found && ds.gone);
	assert_true(path_exists(canon));        /* nobody removed it yet */
	assert_int_equal(flit_xdp_status(ifc, &st), 0);
	assert_true(st.flit && !st.foreign);    /* gone is no one's */
	assert_string_equal(st.pin_dir, alt2);

	ds = (struct dir_seen){ .path = canon };
	assert_true(flit_xdp_gc(count_removed, &ds) >= 1);
	assert_true(ds.found);
	assert_false(path_exists(canon));
	assert_true(path_exists(alt2));         /* live: kept */
	assert_int_equal(flit_xdp_gc(NULL, NULL) >= 0, 1);
	assert_true(path_exists(alt2));

	/* ns2's next attach takes the canonical name */
	assert_int_equal(flit_xdp_detach(ifc), 0);
	attach_skb(ifc);
	assert_int_equal(flit_xdp_status(ifc, &st), 0);
	assert_string_equal(st.pin_dir, canon);
	assert_false(path_exists(alt2));
	assert_int_equal(flit_xdp_detach(ifc), 0);
	enter(ns1);
}

/* a namespace deleted while holding the canonical name: the next attach
 * (of anyone) removes its pins first, and takes the name */
static void attach_sweeps_pins_of_deleted_namespaces(void **state)
{
	struct flit_xdp_status st;
	struct dir_seen ds;
	char canon[128], cmd[256];
	int ns3, tries;

	need_net();
	canon_dir(canon, sizeof(canon), ifc);
	assert_int_equal(unshare(CLONE_NEWNET), 0);
	ns3 = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	assert_true(ns3 >= 0);
	snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name %s",
		 ifc, ifd);
	assert_int_equal(system(cmd), 0);
	attach_skb(ifc);
	enter(ns2);
	close(ns3);
	for (tries = 0; tries < 100; tries++) {
		dir_state(canon, &ds);
		if (ds.gone)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
	}
	assert_true(ds.gone);
	attach_skb(ifc);
	assert_int_equal(flit_xdp_status(ifc, &st), 0);
	assert_true(st.flit && !st.foreign);
	assert_string_equal(st.pin_dir, canon);
	dir_state(canon, &ds);
	assert_true(ds.found && ds.mine && !ds.gone);
	assert_int_equal(flit_xdp_detach(ifc), 0);
	enter(ns1);
}

static void detach_removes_pins_and_keeps_open_maps(void **state)
{
	struct flit_xdp_maps m;
	struct flit_xdp_status st;

	need_net();
	assert_int_equal(flit_xdp_maps_open(ifa, &m), 0);
	assert_int_equal(flit_xdp_detach(ifa), 0);
	assert_false(pin_exists(ifa, "version"));
	assert_int_equal(flit_xdp_status(ifa, &st), 0);
	assert_true(!st.attached && !st.pinned && !st.flit);
	/* fds opened before stay usable */
	assert_int_equal(flit_xdp_flow_add(&m, inet_addr("239.9.9.9"), htons(9), 0), 0);
	flit_xdp_maps_close(&m);

	assert_int_equal(flit_xdp_maps_open(ifa, &m), -ENOENT);
	assert_int_equal(flit_xdp_detach(ifa), -ENOENT);
	assert_non_null(strstr(flit_errmsg(), "not attached"));
}

static int setup_net(void **state)
{
	char cmd[512];
	int id = (int)(getpid() % 100000);

	snprintf(ifa, sizeof(ifa), "fm%da", id);
	snprintf(ifb, sizeof(ifb), "fm%db", id);
	snprintf(ifc, sizeof(ifc), "fm%dc", id);
	snprintf(ifd, sizeof(ifd), "fm%dd", id);
	snprintf(ifz, sizeof(ifz), "fm%dz", id);
	if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0)
		return 0;
	ns1 = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name %s && "
		 "ip link set %s up && ip link set %s up", ifa, ifb, ifa, ifb);
	if (ns1 < 0 || system(cmd) != 0)
		return 0;
	if (unshare(CLONE_NEWNET) != 0)
		return 0;
	ns2 = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name %s && "
		 "ip link set %s up && ip link set %s up && "
		 "ip link add %s type veth peer name %s && "
		 "ip link set %s up && ip link set %s up",
		 ifa, ifz, ifa, ifz, ifc, ifd, ifc, ifd);
	if (ns2 < 0 || system(cmd) != 0 || setns(ns1, CLONE_NEWNET) != 0)
		return 0;
	if (flit_xdp_bpffs_ensure() != 0) {
		printf("no bpffs: %s\n", flit_errmsg());
		return 0;
	}
	have_net = true;
	return 0;
}

static int teardown_net(void **state)
{
	if (ns2 >= 0 && setns(ns2, CLONE_NEWNET) == 0) {
		flit_xdp_detach(ifa);
		flit_xdp_detach(ifc);
	}
	if (ns1 >= 0 && setns(ns1, CLONE_NEWNET) == 0) {
		flit_xdp_detach(ifa);
		flit_xdp_detach(ifb);
		flit_xdp_detach(ifc);
	}
	if (ns2 >= 0)
		close(ns2);
	if (ns1 >= 0)
		close(ns1);
	/* pins of a namespace a failed test left (gone once it is) */
	if (have_net)
		flit_xdp_gc(NULL, NULL);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mode_names_round_trip),
		cmocka_unit_test(every_counter_has_a_name),
		cmocka_unit_test(bad_interface_names_are_einval),
		cmocka_unit_test(attach_to_missing_interface_is_enodev),
		cmocka_unit_test(attach_pins_and_status_tells_single_program),
		cmocka_unit_test(attach_again_changes_nothing),
		cmocka_unit_test(flows_round_trip),
		cmocka_unit_test(sessions_and_topics_round_trip),
		cmocka_unit_test(xsk_slots_and_counters),
		cmocka_unit_test(other_program_is_refused_by_name),
		cmocka_unit_test(stale_pins_are_replaced),
		cmocka_unit_test(same_name_in_two_namespaces_side_by_side),
		cmocka_unit_test(pins_of_a_deleted_namespace_are_collected),
		cmocka_unit_test(attach_sweeps_pins_of_deleted_namespaces),
		cmocka_unit_test(detach_removes_pins_and_keeps_open_maps),
	};

	return cmocka_run_group_tests(tests, setup_net, teardown_net);
}
