/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * flit's XDP steering program on one interface: attach, detach, inspect, and
 * its pinned maps.  Used by flit-loader (loader/) and by the xdp transport;
 * library code (never prints; errors are -errno with a flit_err trail).
 *
 * The program is the skeleton of bpf/flit_xdp.bpf.c, embedded: nothing is
 * loaded from a path at run time.  Attaching goes through libxdp, so where the
 * kernel allows the multi-program dispatcher flit coexists with other XDP
 * programs; where it does not (freplace refused: this machine), libxdp
 * attaches the single program and flit_xdp_status() says so.
 *
 * Pins, under FLIT_XDP_PIN_ROOT/<ifname>/ (bpffs mounted there if needed):
 *   prog, flows, xsks, sessions, topics, counters, version
 * (bpf/flit_xdp.h has the layouts).  Pins of another FLIT_XDP_VERSION are
 * refused with -EPROTO, naming both versions.
 *
 * Privilege: attaching and opening pins need CAP_NET_ADMIN and CAP_BPF (or
 * CAP_SYS_ADMIN); without them these fail with -EPERM and a trail that names
 * the missing capability.
 */
#ifndef FLIT_XDP_PROG_H
#define FLIT_XDP_PROG_H

#include <linux/types.h>
#include <stdbool.h>
#include <stdint.h>

#include "flit_xdp.h"

#define FLIT_XDP_PIN_ROOT "/sys/fs/bpf/flit"

enum flit_xdp_mode {
	FLIT_XDP_MODE_AUTO = 0,   /* native, except skb on veth (faster there) */
	FLIT_XDP_MODE_NATIVE,     /* driver mode (XDP_FLAGS_DRV_MODE) */
	FLIT_XDP_MODE_SKB,        /* generic mode (XDP_FLAGS_SKB_MODE) */
};

/* Handles on the pinned maps of one interface (fds -1 when closed). */
struct flit_xdp_maps {
	char ifname[16];
	unsigned ifindex;
	int flows, xsks, sessions, topics, counters, version;
};

struct flit_xdp_status {
	bool attached;            /* some XDP program is attached to ifname */
	bool flit;                /* ... and it is flit's (pinned, same prog id) */
	bool pinned;              /* flit's pins exist under the pin root */
	enum flit_xdp_mode mode;  /* native or skb (or hw: reported as native) */
	bool multiprog;           /* attached through libxdp's dispatcher */
	uint32_t prog_id;         /* flit's program id (0: none) */
	uint32_t version;         /* FLIT_XDP_VERSION of the pins (0: none) */
	char other[64];           /* name of a non-flit program attached, "" */
	char why_single[160];     /* why not multiprog, "" when multiprog */
};

/* "native", "skb", "auto" <-> enum; parse returns -EINVAL for others. */
const char *flit_xdp_mode_str(enum flit_xdp_mode m);
int flit_xdp_mode_parse(const char *s, enum flit_xdp_mode *m);

/* Mount bpffs on /sys/fs/bpf when it is not mounted.  0 or -errno. */
int flit_xdp_bpffs_ensure(void);

/* Load the embedded program and attach it to ifname in mode, pinning its
 * program and maps.  Already attached by flit with the same version: 0
 * (nothing changes; *mode_out tells the mode it has).  Another (non-flit)
 * program attached and no dispatcher: -EBUSY naming it.  No such
 * interface: -ENODEV.  mode_out may be NULL. */
int flit_xdp_attach(const char *ifname, enum flit_xdp_mode mode,
		    enum flit_xdp_mode *mode_out);

/* Detach flit's program from ifname and remove its pins.  Live AF_XDP
 * sockets keep working as sockets but receive nothing more (their
 * applications see flows gone).  Not attached: -ENOENT. */
int flit_xdp_detach(const char *ifname);

int flit_xdp_status(const char *ifname, struct flit_xdp_status *st);

/* Open the pinned maps of ifname (version checked).  -ENOENT when flit is
 * not attached there. */
int flit_xdp_maps_open(const char *ifname, struct flit_xdp_maps *m);
void flit_xdp_maps_close(struct flit_xdp_maps *m);

/* flows: daddr and dport in network order */
int flit_xdp_flow_add(const struct flit_xdp_maps *m, uint32_t daddr,
		      uint16_t dport, uint32_t slot_base);
int flit_xdp_flow_del(const struct flit_xdp_maps *m, uint32_t daddr,
		      uint16_t dport);
/* Calls fn for each flow; stops and returns fn's value when not 0. */
int flit_xdp_flow_each(const struct flit_xdp_maps *m,
		       int (*fn)(void *arg, const struct flit_xdp_flow_key *k,
				 const struct flit_xdp_flow *v),
		       void *arg);

/* xsks: put an AF_XDP socket fd into a slot / clear the slot */
int flit_xdp_xsk_set(const struct flit_xdp_maps *m, uint32_t slot, int xsk_fd);
int flit_xdp_xsk_clear(const struct flit_xdp_maps *m, uint32_t slot);

/* topic filter: session known with filtering on (flags FLIT_XDP_SESS_*),
 * and its wanted topic indexes */
int flit_xdp_session_set(const struct flit_xdp_maps *m, uint32_t session,
			 uint32_t flags);
/* removes the session and all its topics */
int flit_xdp_session_del(const struct flit_xdp_maps *m, uint32_t session);
int flit_xdp_topic_set(const struct flit_xdp_maps *m, uint32_t session,
		       uint32_t topic, bool wanted);
/* Each (session, wanted topic); a session with no wanted topic is reported
 * once with topic UINT32_MAX. */
int flit_xdp_topic_each(const struct flit_xdp_maps *m,
			int (*fn)(void *arg, uint32_t session, uint32_t topic,
				  uint32_t sess_flags),
			void *arg);

/* Counters summed over CPUs, out[FLIT_XDP_COUNTERS]. */
int flit_xdp_counters(const struct flit_xdp_maps *m, uint64_t *out);
const char *flit_xdp_counter_name(unsigned i);

#endif /* FLIT_XDP_PROG_H */
