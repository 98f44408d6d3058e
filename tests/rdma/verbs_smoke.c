// SPDX-License-Identifier: BSD-2-Clause
/*
 * verbs_smoke — the RDMA harness's own check that verbs work where the RDMA
 * tests are about to run (in the Soft-RoCE guest, or on a host's device):
 * open the device, query device, port and GID, register memory, connect two
 * RC queue pairs to each other through the port and move data with SEND,
 * SEND with immediate, RDMA WRITE and RDMA READ, then two UD queue pairs
 * through an address handle.  Every payload is checked byte for byte.
 *
 * Device: $FLIT_RDMA_DEVICE (default: the first one), port $FLIT_RDMA_PORT
 * (default 1), GID index $FLIT_RDMA_GID_INDEX (default: the port's IPv4-mapped
 * GID on RoCE, none on InfiniBand, where the LID addresses the port).
 *
 * Built by tests/test_rdma_vm.sh: cc -std=gnu11 -O2 verbs_smoke.c -libverbs
 * Exit: 0 all passed, 1 a check failed, 77 no RDMA device ("SKIP: ...").
 * Output: "ok"/"FAIL" per check and "N passed, N failed".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_SIZE (1u << 20)	/* registered: a memlock limit below this fails */
#define MSG_MAX 4096
#define QKEY 0x11111111u
#define POLL_TIMEOUT_S 10

static int passed, failed;

static bool check(bool ok, const char *what, int err)
{
	if (ok) {
		passed++;
		printf("ok   %s\n", what);
	} else {
		failed++;
		printf("FAIL %s%s%s\n", what, err ? ": " : "", err ? strerror(err) : "");
	}
	fflush(stdout);
	return ok;
}

struct smoke {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *rc[2], *ud[2];
	struct ibv_ah *ah;
	uint8_t *buf;
	uint8_t port;
	struct ibv_port_attr pa;
	bool roce;
	int gid_index;
	union ibv_gid gid;
};

static int env_int(const char *name, int dflt)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > 65535) {
		fprintf(stderr, "verbs_smoke: bad %s '%s'\n", name, s);
		exit(1);
	}
	return (int)v;
}

/* The port's GID of an IPv4 address (::ffff:a.b.c.d, RoCEv2), else any
 * non-zero one; -1 if none. */
static int find_gid(struct smoke *s)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	union ibv_gid g;
	int i, any = -1;

	for (i = 0; i < s->pa.gid_tbl_len; i++) {
		if (ibv_query_gid(s->ctx, s->port, i, &g))
			continue;
		if (!memcmp(g.raw, v4, sizeof(v4)))
			return i;
		if (any < 0 && (g.global.subnet_prefix || g.global.interface_id))
			any = i;
	}
	return any;
}

static void fill_ah(const struct smoke *s, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->port_num = s->port;
	ah->dlid = s->pa.lid;
	if (s->gid_index >= 0) {
		ah->is_global = 1;
		ah->grh.dgid = s->gid;
		ah->grh.sgid_index = (uint8_t)s->gid_index;
		ah->grh.hop_limit = 64;
	}
}

/*
 * Wait for the completions of work requests a and, if b != 0, b (a send and
 * its receive share one CQ, in an order that is the provider's) within
 * POLL_TIMEOUT_S; b's completion goes to *wc_b.  0 or an errno.
 */
static int poll_wrs(struct smoke *s, uint64_t a, uint64_t b, struct ibv_wc *wc_b)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	bool got_a = false, got_b = !b;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!got_a || !got_b) {
		n = ibv_poll_cq(s->cq, 1, &wc);
		if (n < 0)
			return EIO;
		if (n == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > POLL_TIMEOUT_S)
				return ETIMEDOUT;
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			printf("# wr %llu: %s\n", (unsigned long long)wc.wr_id,
			       ibv_wc_status_str(wc.status));
			return EIO;
		}
		if (wc.wr_id == a && !got_a) {
			got_a = true;
		} else if (b && wc.wr_id == b && !got_b) {
			got_b = true;
			*wc_b = wc;
		} else {
			printf("# unexpected completion of wr %llu\n", (unsigned long long)wc.wr_id);
			return EPROTO;
		}
	}
	return 0;
}

static int rc_connect(struct smoke *s, struct ibv_qp *qp, uint32_t dest_qpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = s->port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};
	int e;

	e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS);
	if (e)
		return e;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = s->pa.active_mtu;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	fill_ah(s, &a.ah_attr);
	e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER);
	if (e)
		return e;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int ud_ready(struct smoke *s, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = s->port, .qkey = QKEY };
	int e;

	e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	if (e)
		return e;
	a.qp_state = IBV_QPS_RTR;
	e = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (e)
		return e;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static void pattern(uint8_t *p, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static int post_recv(struct smoke *s, struct ibv_qp *qp, uint64_t id, void *at, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)at, .length = len, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static int post_send(struct smoke *s, struct ibv_qp *qp, struct ibv_send_wr *wr, void *at,
		     uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)at, .length = len, .lkey = s->mr->lkey };
	struct ibv_send_wr *bad;

	wr->sg_list = &sge;
	wr->num_sge = 1;
	wr->send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(qp, wr, &bad);
}

/* RC: a SEND of len bytes (with immediate data if imm) from rc[0] to rc[1]. */
static bool rc_send(struct smoke *s, uint32_t len, bool imm)
{
	uint8_t *src = s->buf, *dst = s->buf + MSG_MAX;
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND };
	struct ibv_wc wc = { 0 };
	char what[96];
	int e;

	pattern(src, len, (uint8_t)len);
	memset(dst, 0, MSG_MAX);
	wr.imm_data = htonl(0xf117u);
	snprintf(what, sizeof(what), "RC SEND%s of %u B delivered intact", imm ? " with immediate" : "",
		 len);
	e = post_recv(s, s->rc[1], 2, dst, MSG_MAX);
	if (!e)
		e = post_send(s, s->rc[0], &wr, src, len);
	if (!e)
		e = poll_wrs(s, 1, 2, &wc);
	return check(!e && wc.byte_len == len && !memcmp(src, dst, len) &&
		     (!imm || ((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0xf117u)),
		     what, e);
}

static bool rc_rdma(struct smoke *s, enum ibv_wr_opcode op, uint32_t len)
{
	uint8_t *local = s->buf + 2 * MSG_MAX, *remote = s->buf + 3 * MSG_MAX;
	struct ibv_send_wr wr = { .wr_id = 3, .opcode = op };
	char what[64];
	int e;

	if (op == IBV_WR_RDMA_WRITE) {
		pattern(local, len, 0x5a);
		memset(remote, 0, len);
	} else {
		pattern(remote, len, 0xa5);
		memset(local, 0, len);
	}
	wr.wr.rdma.remote_addr = (uintptr_t)remote;
	wr.wr.rdma.rkey = s->mr->rkey;
	snprintf(what, sizeof(what), "RC RDMA %s of %u B verified",
		 op == IBV_WR_RDMA_WRITE ? "WRITE" : "READ", len);
	e = post_send(s, s->rc[0], &wr, local, len);
	if (!e)
		e = poll_wrs(s, 3, 0, NULL);
	return check(!e && !memcmp(local, remote, len), what, e);
}

static bool ud_send(struct smoke *s, uint32_t len)
{
	/* a UD receive starts with the 40-byte GRH slot */
	uint8_t *src = s->buf + 4 * MSG_MAX, *dst = s->buf + 5 * MSG_MAX;
	struct ibv_send_wr wr = { .wr_id = 5, .opcode = IBV_WR_SEND };
	struct ibv_wc wc = { 0 };
	char what[64];
	int e;

	pattern(src, len, 0x33);
	memset(dst, 0, 40 + len);
	wr.wr.ud.ah = s->ah;
	wr.wr.ud.remote_qpn = s->ud[1]->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	snprintf(what, sizeof(what), "UD SEND of %u B through an address handle", len);
	e = post_recv(s, s->ud[1], 6, dst, 40 + len);
	if (!e)
		e = post_send(s, s->ud[0], &wr, src, len);
	if (!e)
		e = poll_wrs(s, 5, 6, &wc);
	return check(!e && wc.byte_len == 40 + len && !memcmp(src, dst + 40, len), what, e);
}

static void smoke_close(struct smoke *s)
{
	if (s->ah)
		ibv_destroy_ah(s->ah);
	for (int i = 0; i < 2; i++) {
		if (s->ud[i])
			ibv_destroy_qp(s->ud[i]);
		if (s->rc[i])
			ibv_destroy_qp(s->rc[i]);
	}
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
}

static void run(struct smoke *s, struct ibv_device *dev)
{
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_device_attr da;
	struct ibv_ah_attr aa;
	char what[160], gs[INET6_ADDRSTRLEN] = "-";
	int e, want_gid;

	s->ctx = ibv_open_device(dev);
	snprintf(what, sizeof(what), "open %s", ibv_get_device_name(dev));
	if (!check(s->ctx, what, errno))
		return;
	e = ibv_query_device(s->ctx, &da);
	if (!check(!e, "query the device", e))
		return;
	printf("# %s: fw %s, max_qp %d, max_cqe %d, max_mr_size %llu, %u port(s)\n",
	       ibv_get_device_name(dev), da.fw_ver, da.max_qp, da.max_cqe,
	       (unsigned long long)da.max_mr_size, da.phys_port_cnt);
	e = ibv_query_port(s->ctx, s->port, &s->pa);
	snprintf(what, sizeof(what), "query port %u", s->port);
	if (!check(!e, what, e))
		return;
	s->roce = s->pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	printf("# port %u: %s, link layer %s, active MTU %d, LID %u\n", s->port,
	       ibv_port_state_str(s->pa.state), s->roce ? "Ethernet (RoCE)" : "InfiniBand",
	       128 << s->pa.active_mtu, s->pa.lid);
	if (!check(s->pa.state == IBV_PORT_ACTIVE, "port is ACTIVE", 0))
		return;
	want_gid = env_int("FLIT_RDMA_GID_INDEX", -1);
	s->gid_index = want_gid >= 0 ? want_gid : s->roce ? find_gid(s) : -1;
	if (s->gid_index >= 0) {
		e = ibv_query_gid(s->ctx, s->port, s->gid_index, &s->gid);
		if (!e)
			inet_ntop(AF_INET6, s->gid.raw, gs, sizeof(gs));
		snprintf(what, sizeof(what), "GID index %d: %s%s", s->gid_index, gs,
			 want_gid >= 0 ? " (FLIT_RDMA_GID_INDEX)" : "");
		if (!check(!e && (s->gid.global.subnet_prefix || s->gid.global.interface_id), what,
			   e))
			return;
	} else if (!check(!s->roce, "a GID for RoCE (none found: FLIT_RDMA_GID_INDEX)", 0)) {
		return;
	}

	s->buf = aligned_alloc(4096, BUF_SIZE);
	s->pd = ibv_alloc_pd(s->ctx);
	if (!check(s->buf && s->pd, "allocate a protection domain", errno))
		return;
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!check(s->mr, "register 1 MiB (memlock limit: ulimit -l)", errno))
		return;
	s->cq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	if (!check(s->cq, "create a completion queue", errno))
		return;
	qia.send_cq = qia.recv_cq = s->cq;
	s->rc[0] = ibv_create_qp(s->pd, &qia);
	s->rc[1] = ibv_create_qp(s->pd, &qia);
	if (!check(s->rc[0] && s->rc[1], "create two RC queue pairs", errno))
		return;
	e = rc_connect(s, s->rc[0], s->rc[1]->qp_num);
	if (!e)
		e = rc_connect(s, s->rc[1], s->rc[0]->qp_num);
	if (!check(!e, "connect them through the port (INIT, RTR, RTS)", e))
		return;
	rc_send(s, 64, false);
	rc_send(s, MSG_MAX, false);
	rc_send(s, 8, true);
	rc_rdma(s, IBV_WR_RDMA_WRITE, 256);
	rc_rdma(s, IBV_WR_RDMA_READ, MSG_MAX);

	qia.qp_type = IBV_QPT_UD;
	s->ud[0] = ibv_create_qp(s->pd, &qia);
	s->ud[1] = ibv_create_qp(s->pd, &qia);
	if (!check(s->ud[0] && s->ud[1], "create two UD queue pairs", errno))
		return;
	e = ud_ready(s, s->ud[0]);
	if (!e)
		e = ud_ready(s, s->ud[1]);
	if (!check(!e, "UD queue pairs to RTS", e))
		return;
	fill_ah(s, &aa);
	s->ah = ibv_create_ah(s->pd, &aa);
	if (!check(s->ah, "create an address handle to the port", errno))
		return;
	ud_send(s, 64);
	ud_send(s, 256);
}

int main(void)
{
	struct smoke s = { .gid_index = -1 };
	struct ibv_device **list, *dev = NULL;
	const char *want = getenv("FLIT_RDMA_DEVICE");
	int num = 0;

	list = ibv_get_device_list(&num);
	if (!list || num == 0) {
		printf("SKIP: no RDMA device (libibverbs found none%s%s)\n", list ? "" : ": ",
		       list ? "" : strerror(errno));
		if (list)
			ibv_free_device_list(list);
		return 77;
	}
	for (int i = 0; i < num && !dev; i++)
		if (!want || !*want || !strcmp(ibv_get_device_name(list[i]), want))
			dev = list[i];
	if (!dev) {
		printf("FAIL FLIT_RDMA_DEVICE=%s: no such device (", want);
		for (int i = 0; i < num; i++)
			printf("%s%s", i ? ", " : "", ibv_get_device_name(list[i]));
		printf(")\n0 passed, 1 failed\n");
		ibv_free_device_list(list);
		return 1;
	}
	s.port = (uint8_t)env_int("FLIT_RDMA_PORT", 1);
	run(&s, dev);
	smoke_close(&s);
	ibv_free_device_list(list);
	printf("%d passed, %d failed\n", passed, failed);
	return failed || !passed ? 1 : 0;
}
