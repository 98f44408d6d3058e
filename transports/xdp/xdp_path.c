// SPDX-License-Identifier: BSD-2-Clause
/* The xdp transport's hold on one interface: program, maps, sockets. */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include <flit/tstamp.h>

#include "error.h"
#include "xdp/xdp_path.h"
#include "xdp/xdp_prog.h"

#define MAX_FLOWS 128
#define MAX_FILTERED 4096

struct pflow {
	uint32_t daddr;
	uint16_t dport;
	unsigned refs;
};

struct flit_xdp_path {
	struct flit_xdp_maps maps;
	struct flit_xsk *xk;
	bool attached_here;          /* detach at close */
	bool filter;
	enum flit_xdp_mode mode;
	struct pflow flows[MAX_FLOWS];
	unsigned nflows;
	uint32_t *filtered;          /* sessions put in the filter (whole or parted) */
	unsigned nfiltered;
	struct ring_buffer *reports; /* the program's filtered ring (parted sessions) */
	flit_xdp_report_fn report_fn;
	void *report_arg;
	char ifname[16];
	char ts_why[256];            /* RX stamps asked for, the program has none */
	char hw_why[256];            /* RX stamps asked for, the NIC refused */
	char desc[1024];
};

static int clear_flow(void *arg, const struct flit_xdp_flow_key *k, const struct flit_xdp_flow *v)
{
	(void)v;
	flit_xdp_flow_del(arg, k->daddr, k->dport);
	return 0;
}

static int clear_session(void *arg, uint32_t session, uint32_t topic, uint32_t flags)
{
	(void)topic; (void)flags;
	flit_xdp_session_del(arg, session);
	return 0;
}

/* Delete while iterating may skip entries of a hash map: repeat until a
 * pass finds nothing (bounded). */
static void clear_maps(const struct flit_xdp_maps *m)
{
	for (int i = 0; i < 8; i++) {
		flit_xdp_flow_each(m, clear_flow, (void *)m);
		flit_xdp_topic_each(m, clear_session, (void *)m);
	}
}

/* a record of the filtered ring: a frame of a parted session dropped
 * (report_fn NULL: thrown away) */
static int on_report(void *ctx, void *data, size_t size)
{
	struct flit_xdp_path *p = ctx;
	const struct flit_xdp_filtered *r = data;

	if (size >= sizeof(*r) && p->report_fn)
		p->report_fn(p->report_arg, r->session, r->gen, r->seq, r->count);
	return 0;
}

int flit_xdp_path_open(const struct flit_cfg_context *cc, struct flit_xdp_path **out)
{
	struct flit_xdp_path *p;
	struct flit_xdp_status st;
	const char *ifname = cc->udp_interface;
	const char *how;
	const bool want_rx = cc->xdp_rx_timestamps == 1;
	char rx_note[400] = "";
	int err;

	if (!ifname[0])
		return flit_err(EINVAL, "xdp: context.udp.interface must name the interface to use");
	p = calloc(1, sizeof(*p));
	if (!p)
		return flit_err(ENOMEM, "xdp: out of memory");
	p->maps.flows = p->maps.xsks = p->maps.sessions = p->maps.topics = -1;
	p->maps.filtered = p->maps.counters = p->maps.version = -1;
	p->filter = cc->xdp_filter;
	snprintf(p->ifname, sizeof(p->ifname), "%s", ifname);
	p->filtered = calloc(MAX_FILTERED, sizeof(*p->filtered));
	if (!p->filtered) {
		free(p);
		return flit_err(ENOMEM, "xdp: out of memory");
	}

	err = flit_xdp_bpffs_ensure();
	if (err)
		goto fail;
	/* pins without an attached program (a crash, `ip link set dev X xdp
	 * off`) count as not attached: attaching cleans them up */
	err = flit_xdp_status_quick(ifname, &st);
	if (err)
		goto fail;
	if (st.attached && st.flit) {
		how = "attached before (flit-loader or another flit context)";
	} else if (cc->xdp_attach == FLIT_XDP_ATTACH_PINNED) {
		err = flit_err(ENOENT, "xdp: flit's program is not attached to %s "
			       "(context.xdp.attach = pinned: run `flit-loader attach %s`)",
			       ifname, ifname);
		goto fail;
	} else {
		err = flit_xdp_attach_flags(ifname, (enum flit_xdp_mode)cc->xdp_mode,
					    want_rx ? FLIT_XDP_ATTACH_RX_TS : 0, NULL);
		if (err)
			goto fail;
		p->attached_here = true;
		how = "attached by this context (detached when it closes)";
		if ((err = flit_xdp_status_quick(ifname, &st)))
			goto fail;
	}
	err = flit_xdp_maps_open(ifname, &p->maps);
	if (err)
		goto fail;
	p->mode = st.mode;
	if (p->filter) {
		p->reports = ring_buffer__new(p->maps.filtered, on_report, p, NULL);
		if (!p->reports) {
			err = flit_err(errno, "xdp: %s: reading the program's filtered ring",
				       ifname);
			goto fail;
		}
	}

	if (want_rx && !st.rx_timestamps) {
		snprintf(p->ts_why, sizeof(p->ts_why), "flit's program on %s was attached "
			 "without them (flit-loader attach %s --rx-timestamps)", ifname, ifname);
		flit_warn("xdp: hardware RX stamps asked for, but %s: messages come "
			  "without a hardware receive stamp", p->ts_why);
		snprintf(rx_note, sizeof(rx_note), "; RX stamps asked for, none: %s",
			 p->ts_why);
	} else if (want_rx) {
		/* the kfunc reads what the NIC stamped: have it stamp (the
		 * device's setting, left on) */
		struct flit_hwts hw = { .sz = sizeof(hw) };
		if (flit_hwts_enable(ifname, FLIT_HWTS_RX, &hw) == 0) {
			snprintf(rx_note, sizeof(rx_note), "; NIC RX stamping on (PHC "
				 "/dev/ptp%d; stamps raw, clock phc)", hw.phc_index);
		} else {
			snprintf(p->hw_why, sizeof(p->hw_why), "%s", flit_errmsg());
			snprintf(rx_note, sizeof(rx_note), "; NIC RX stamping not "
				 "available: %s", p->hw_why);
			flit_info("xdp: %s: hardware RX stamping: %s", ifname, p->hw_why);
		}
	}

	struct flit_xsk_cfg xc = {
		.queues = cc->xdp_queues,
		.frames = cc->xdp_frames,
		.frame_size = cc->xdp_frame_size,
		.ring_size = cc->xdp_ring_size,
		.hugepages = cc->xdp_hugepages,
		.zerocopy = cc->xdp_zerocopy == 1 ? FLIT_XSK_ZC_OFF :
			    cc->xdp_zerocopy == 2 ? FLIT_XSK_ZC_ON : FLIT_XSK_ZC_AUTO,
		.xdp_skb_mode = st.mode == FLIT_XDP_MODE_SKB,
		.need_wakeup = cc->xdp_need_wakeup,
		.busy_poll_us = cc->xdp_busy_poll_us,
		.busy_poll_budget = cc->xdp_busy_poll_budget,
		.verify_csum = cc->xdp_verify_checksums,
		.ttl = (uint8_t)cc->udp_ttl,
		.rx_meta = want_rx && st.rx_timestamps,
		.tx_timestamps = cc->xdp_tx_timestamps,
		.tx_own_queue = cc->xdp_tx_queue == 1,
	};
	snprintf(xc.ifname, sizeof(xc.ifname), "%s", ifname);
	err = flit_xsk_open(&xc, &p->xk);
	if (err)
		goto fail;
	if (flit_xsk_queues(p->xk) > FLIT_XDP_XSKS_MAX) {
		err = flit_err(E2BIG, "xdp: %s has %u queues; flit steers to %d at most (set context.xdp.queues)",
			       ifname, flit_xsk_queues(p->xk), FLIT_XDP_XSKS_MAX);
		goto fail;
	}
	/* we own the interface's queues now: what the maps still hold is a
	 * crashed application's (and so are the records of its ring) */
	clear_maps(&p->maps);
	if (p->reports)
		ring_buffer__consume(p->reports);
	for (unsigned q = 0; q < flit_xsk_queues(p->xk); q++) {
		err = flit_xdp_xsk_set(&p->maps, q, flit_xsk_fd(p->xk, q));
		if (err)
			goto fail;
	}
	const char *clk = flit_xsk_tx_clock(p->xk);
	if (clk && !strcmp(clk, "phc")) {
		/* zero-copy: the driver fills the TX stamp from the NIC, if the
		 * NIC stamps sent packets */
		struct flit_hwts hw = { .sz = sizeof(hw) };
		if (flit_hwts_enable(ifname, FLIT_HWTS_TX, &hw))
			flit_info("xdp: %s: hardware TX stamping: %s", ifname, flit_errmsg());
	}
	snprintf(p->desc, sizeof(p->desc), "xdp on %s: %s mode, %s%s, program %s; %s%s",
		 ifname, flit_xdp_mode_str(st.mode),
		 st.multiprog ? "libxdp dispatcher" : "single program",
		 st.rx_timestamps ? " (" FLIT_XDP_PROG_NAME_TS ", device-bound: through "
		 "libbpf)" : "", how,
		 flit_xsk_describe(p->xk), rx_note);
	*out = p;
	return 0;
fail:
	flit_xdp_path_close(p);
	return err;
}

void flit_xdp_path_close(struct flit_xdp_path *p)
{
	if (!p)
		return;
	if (p->maps.flows >= 0) {
		for (unsigned i = 0; i < p->nflows; i++)
			flit_xdp_flow_del(&p->maps, p->flows[i].daddr, p->flows[i].dport);
		flit_xdp_sessions_del(&p->maps, p->filtered, p->nfiltered);
		if (p->xk)
			for (unsigned q = 0; q < flit_xsk_queues(p->xk); q++)
				flit_xdp_xsk_clear(&p->maps, q);
	}
	flit_xsk_close(p->xk);
	ring_buffer__free(p->reports);
	flit_xdp_maps_close(&p->maps);
	if (p->attached_here) {
		if (flit_xdp_detach(p->ifname))
			flit_warn("xdp: detaching from %s: %s", p->ifname, flit_errmsg());
	}
	free(p->filtered);
	free(p);
}

struct flit_xsk *flit_xdp_path_xsk(const struct flit_xdp_path *p)
{
	return p->xk;
}

const char *flit_xdp_path_describe(const struct flit_xdp_path *p)
{
	return p->desc;
}

int flit_xdp_path_flow_get(struct flit_xdp_path *p, struct in_addr daddr, uint16_t dport)
{
	for (unsigned i = 0; i < p->nflows; i++)
		if (p->flows[i].daddr == daddr.s_addr && p->flows[i].dport == dport) {
			p->flows[i].refs++;
			return 0;
		}
	if (p->nflows == MAX_FLOWS)
		return flit_err(EMFILE, "xdp: more than %d flows steered by one context", MAX_FLOWS);
	int err = flit_xdp_flow_add(&p->maps, daddr.s_addr, dport, 0);
	if (err)
		return err;
	p->flows[p->nflows++] = (struct pflow){ daddr.s_addr, dport, 1 };
	return 0;
}

void flit_xdp_path_flow_put(struct flit_xdp_path *p, struct in_addr daddr, uint16_t dport)
{
	for (unsigned i = 0; i < p->nflows; i++)
		if (p->flows[i].daddr == daddr.s_addr && p->flows[i].dport == dport) {
			if (--p->flows[i].refs)
				return;
			flit_xdp_flow_del(&p->maps, daddr.s_addr, dport);
			p->flows[i] = p->flows[--p->nflows];
			return;
		}
}

/* Put session in the filter with flags, named and gen (again: updated). */
static int filter_set(struct flit_xdp_path *p, uint32_t session, uint32_t flags,
		      uint32_t named, uint32_t gen)
{
	bool known = false;

	if (!p->filter)
		return flit_err(EOPNOTSUPP, "xdp: context.xdp.filter is off");
	for (unsigned i = 0; i < p->nfiltered && !known; i++)
		known = p->filtered[i] == session;
	if (!known && p->nfiltered == MAX_FILTERED)
		return flit_err(ENOSPC, "xdp: %u sessions filtered already", MAX_FILTERED);
	int err = flit_xdp_session_set(&p->maps, session, flags, named, gen);
	if (err)
		return err;
	if (!known)
		p->filtered[p->nfiltered++] = session;
	return 0;
}

void flit_xdp_path_filter(struct flit_xdp_path *p, uint32_t session)
{
	if (p->filter && filter_set(p, session, FLIT_XDP_SESS_FILTER, 0, 0))
		flit_debug("xdp: filtering session %08x: %s", session, flit_errmsg());
}

int flit_xdp_path_part(struct flit_xdp_path *p, uint32_t session, uint32_t named,
		       uint32_t gen)
{
	return filter_set(p, session, FLIT_XDP_SESS_FILTER | FLIT_XDP_SESS_REPORT, named, gen);
}

int flit_xdp_path_part_topic(struct flit_xdp_path *p, uint32_t session, uint32_t topic,
			     bool steer)
{
	if (!p->filter)
		return flit_err(EOPNOTSUPP, "xdp: context.xdp.filter is off");
	return flit_xdp_topic_set(&p->maps, session, topic, steer);
}

void flit_xdp_path_unpart(struct flit_xdp_path *p, uint32_t session)
{
	for (unsigned i = 0; i < p->nfiltered; i++)
		if (p->filtered[i] == session) {
			p->filtered[i] = p->filtered[--p->nfiltered];
			break;
		}
	/* whatever was written (a parting that failed half way too) */
	if (p->filter && flit_xdp_sessions_del(&p->maps, &session, 1))
		flit_debug("xdp: %s", flit_errmsg());
}

int flit_xdp_path_reports(struct flit_xdp_path *p, flit_xdp_report_fn fn, void *arg)
{
	if (!p->reports)
		return 0;
	p->report_fn = fn;
	p->report_arg = arg;
	int n = ring_buffer__consume(p->reports);
	p->report_fn = NULL;
	return n < 0 ? flit_err(-n, "xdp: reading the filtered ring") : n;
}

void flit_xdp_path_unfilter(struct flit_xdp_path *p, uint32_t session)
{
	for (unsigned i = 0; i < p->nfiltered; i++)
		if (p->filtered[i] == session) {
			flit_xdp_session_del(&p->maps, session);
			p->filtered[i] = p->filtered[--p->nfiltered];
			return;
		}
}

void flit_xdp_path_unfilter_all(struct flit_xdp_path *p)
{
	if (flit_xdp_sessions_del(&p->maps, p->filtered, p->nfiltered))
		flit_debug("xdp: %s", flit_errmsg());
	p->nfiltered = 0;
}

const char *flit_xdp_path_ts_why(const struct flit_xdp_path *p)
{
	if (p->ts_why[0])
		return p->ts_why;
	if (p->xk && flit_xsk_rx_ts_why(p->xk)[0])
		return flit_xsk_rx_ts_why(p->xk);
	return p->hw_why;
}

int flit_xdp_path_counters(const struct flit_xdp_path *p, uint64_t *out)
{
	return flit_xdp_counters(&p->maps, out);
}
