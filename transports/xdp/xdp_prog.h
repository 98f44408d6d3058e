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
 * Pins: one directory per interface and network namespace under
 * FLIT_XDP_PIN_ROOT (bpffs mounted on /sys/fs/bpf if needed), holding
 *   owner, ifref, prog, flows, xsks, sessions, topics, counters, version
 * (bpf/flit_xdp.h has the layouts of the program's maps).  owner is a
 * one-entry array: the network namespace cookie (SO_NETNS_COOKIE) and the
 * ifindex the pins belong to.  ifref is a one-entry DEVMAP holding that
 * interface: the kernel empties it when the interface is unregistered (its
 * namespace deleted, the interface deleted or moved away), so anyone can
 * tell pins of an interface that no longer exists.
 *
 * Directory names.  bpffs is global, not per network namespace, and several
 * namespaces may each have an eth0 (tools/testbed gives every host one):
 *   FLIT_XDP_PIN_ROOT/<ifname>/            canonical: the first namespace to
 *                                          attach on <ifname> gets it
 *   FLIT_XDP_PIN_ROOT/<ifname>@<cookie>/   a namespace that finds the
 *                                          canonical one taken by another
 *                                          namespace's live interface; cookie
 *                                          in decimal, e.g. eth0@4107
 * <ifname> is written with '.' as ':' (bpffs refuses '.' in names, interface
 * names cannot hold ':'): eth0.100 -> eth0:100.  Interface names with '@'
 * or ':' are refused (-EINVAL).  Every call resolves "my" directory the same
 * way: <ifname>/ if its owner is this namespace's <ifname> (cookie and
 * ifindex; or the ifindex's interface is gone, or <ifname> is missing here:
 * then the pins are this namespace's stale ones), else
 * <ifname>@<my cookie>/ if it exists; flit_xdp_status() reports it.  When
 * neither exists, attach makes <ifname>/ if no live interface holds it,
 * else <ifname>@<my cookie>/.
 *
 * Stale pins: a directory of this namespace whose program is no longer
 * attached to the interface (a crash, `ip link set dev X xdp off`, the
 * interface re-created) is replaced on attach and removed on detach.  A
 * directory whose interface is gone (ifref empty) is stale for everyone:
 * attach removes all such directories first (so the canonical name is free
 * again once its namespace is deleted) and flit_xdp_gc() removes them on
 * demand.  Pins of another live interface are never touched.
 * Directories appear complete (pinned under a staging name
 * <ifname>@new<pid>, then renamed into place) and lose version first and
 * owner last when removed.  Pins of another FLIT_XDP_VERSION are refused
 * with -EPROTO, naming both versions.
 *
 * Hardware RX stamps (FLIT_XDP_ATTACH_RX_TS): the program attached is then
 * flit_xdp_ts, the same steering with the NIC's receive stamp written in
 * front of every steered frame (struct flit_xdp_rx_meta).  Its RX-metadata
 * kfunc makes it a device-bound program (loaded for this ifindex with
 * BPF_F_XDP_DEV_BOUND_ONLY, Linux 6.3), which runs in native mode only and
 * which libxdp 1.3.1 cannot load: it is attached alone, through libbpf
 * (bpf_xdp_attach(), XDP_FLAGS_DRV_MODE), and flit_xdp_status() says so.
 * Its pins and maps are the same.
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
/* size of a pin directory path: root, ifname, '@', 20 digits, NUL */
#define FLIT_XDP_PIN_DIR_MAX 64

enum flit_xdp_mode {
	FLIT_XDP_MODE_AUTO = 0,   /* native, except skb on veth (faster there) */
	FLIT_XDP_MODE_NATIVE,     /* driver mode (XDP_FLAGS_DRV_MODE) */
	FLIT_XDP_MODE_SKB,        /* generic mode (XDP_FLAGS_SKB_MODE) */
};

/* Handles on the pinned maps of one interface (fds -1 when closed). */
struct flit_xdp_maps {
	char ifname[16];
	unsigned ifindex;
	int flows, xsks, sessions, topics, filtered, counters, version;
	char pin_dir[FLIT_XDP_PIN_DIR_MAX];     /* where they were opened */
};

struct flit_xdp_status {
	bool attached;            /* some XDP program is attached to ifname */
	bool flit;                /* ... and it is flit's (pinned, same prog id) */
	bool pinned;              /* this namespace's pin directory exists */
	bool foreign;             /* the canonical directory <ifname>/ holds
				   * the pins of a live interface of this name
				   * in another network namespace (so this
				   * one's are, or go, in <ifname>@<cookie>/) */
	enum flit_xdp_mode mode;  /* native or skb (or hw: reported as native) */
	bool multiprog;           /* attached through libxdp's dispatcher */
	bool rx_timestamps;       /* flit's program attached is flit_xdp_ts
				   * (hardware RX stamps in RX metadata;
				   * device-bound, attached through libbpf) */
	uint32_t prog_id;         /* flit's program id (0: none); also set
				   * when a program of flit's name is attached
				   * here without its pins (flit false) */
	uint32_t version;         /* FLIT_XDP_VERSION of the pins (0: none) */
	char other[64];           /* name of a non-flit program attached, "" */
	/* the programs attached, in the order they run: the dispatcher's
	 * components by priority (libxdp runs the lowest first, and the next
	 * only when one returns an action in its chain_actions), or the
	 * single program */
	struct flit_xdp_prog_slot {
		char name[16];    /* BPF_OBJ_NAME_LEN */
		uint32_t id;
		uint32_t prio;    /* run priority (dispatcher only) */
		uint32_t chain_actions; /* bit 1 << XDP_*: the next runs after these */
		bool flit;        /* flit's program */
	} progs[10];              /* libxdp's dispatcher holds at most 10 */
	unsigned nprogs;
	char why_single[160];     /* why not multiprog, "" when multiprog */
	char pin_dir[FLIT_XDP_PIN_DIR_MAX]; /* this namespace's pin directory
				   * for ifname: where the pins are (pinned) or
				   * where attach would put them */
};

/* One directory under FLIT_XDP_PIN_ROOT, as flit_xdp_pin_dir_each() sees it. */
struct flit_xdp_pin_dir {
	char path[FLIT_XDP_PIN_DIR_MAX];
	char ifname[16];          /* the interface it was made for */
	uint64_t netns;           /* its owner's namespace cookie (0: no owner
				   * pin: debris of a crash, removed by gc if
				   * empty) */
	uint32_t ifindex;         /* its owner's ifindex */
	bool mine;                /* owner is this network namespace */
	bool gone;                /* its interface no longer exists: stale for
				   * every namespace (gc removes it) */
};

/* "native", "skb", "auto" <-> enum; parse returns -EINVAL for others. */
const char *flit_xdp_mode_str(enum flit_xdp_mode m);
int flit_xdp_mode_parse(const char *s, enum flit_xdp_mode *m);

/* Mount bpffs on /sys/fs/bpf when it is not mounted.  0 or -errno;
 * -ENOENT without mounting when this process is in a mount namespace its
 * ancestors are not in (`ip netns exec`): a bpffs mounted there, and the
 * pins in it, would vanish with the process. */
int flit_xdp_bpffs_ensure(void);

/* Load the embedded program and attach it to ifname in mode, pinning its
 * program and maps.  Already attached by flit with the same version: 0
 * (nothing changes; *mode_out tells the mode it has).  Another (non-flit)
 * program attached and no dispatcher: -EBUSY naming it.  No such
 * interface: -ENODEV.  mode_out may be NULL. */
int flit_xdp_attach(const char *ifname, enum flit_xdp_mode mode,
		    enum flit_xdp_mode *mode_out);
/* flit_xdp_attach(), except that this namespace's pins of another version
 * are replaced (that version's program is detached here first).  Another
 * namespace's pins are never touched, forced or not. */
int flit_xdp_attach_force(const char *ifname, enum flit_xdp_mode mode,
			  enum flit_xdp_mode *mode_out);

/* flags of flit_xdp_attach_flags() */
#define FLIT_XDP_ATTACH_FORCE 0x1u  /* as flit_xdp_attach_force(); also
				     * replaces flit's program without RX
				     * stamps by the one with (RX_TS) */
#define FLIT_XDP_ATTACH_RX_TS 0x2u  /* attach flit_xdp_ts (see above):
				     * native mode (AUTO means native here,
				     * veth included; SKB: -EINVAL), alone on
				     * the interface.  flit's program without
				     * stamps already attached: -EEXIST unless
				     * FORCE.  Without RX_TS, flit_xdp_ts
				     * already attached is kept (it steers the
				     * same): 0 */
int flit_xdp_attach_flags(const char *ifname, enum flit_xdp_mode mode,
			  unsigned flags, enum flit_xdp_mode *mode_out);

/* Detach flit's program from ifname and remove this namespace's pins.
 * Live AF_XDP sockets keep working as sockets but receive nothing more
 * (their applications see flows gone).  Not attached: -ENOENT; only stale
 * pins (program gone): they are removed, 0. */
int flit_xdp_detach(const char *ifname);

/* What is on ifname in this network namespace, and this namespace's pin
 * directory for it (st->pin_dir).  -ENODEV when there is no such interface
 * here and no pins of this namespace for that name. */
int flit_xdp_status(const char *ifname, struct flit_xdp_status *st);
/* flit_xdp_status() without asking the kernel why a single program
 * (why_single then names flit-loader status, unless this process asked
 * before): no program load, for a context that opens the xdp path. */
int flit_xdp_status_quick(const char *ifname, struct flit_xdp_status *st);

/* Can this kernel replace a function of a loaded XDP program (freplace,
 * BPF_PROG_TYPE_EXT), which libxdp's multi-program dispatcher needs?  Tried
 * by loading flit's program (maps of one entry) and a copy of it as an
 * extension of the first; a definite answer is kept for the process.  0:
 * yes; the kernel's -errno for the extension: no (this machine: -EPERM,
 * even as root), *unknown false.  *unknown true when flit's own program did
 * not load (the -errno returned is that load's).  Not for hot paths. */
int flit_xdp_freplace_probe(bool *unknown);

/* Calls fn for each pin directory under FLIT_XDP_PIN_ROOT (any namespace),
 * in name order; stops and returns fn's value when not 0.  No bpffs or no
 * pin root: 0 without calls. */
int flit_xdp_pin_dir_each(int (*fn)(void *arg, const struct flit_xdp_pin_dir *d),
			  void *arg);

/* Remove the pin directories whose interface no longer exists (any
 * namespace's: see ifref above) and staging directories of attaches that
 * did not finish.  fn (may be NULL) is called with each directory removed,
 * after.  Returns how many, or -errno. */
int flit_xdp_gc(void (*fn)(void *arg, const char *dir), void *arg);

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

/* topic filter: session known with filtering on (flags FLIT_XDP_SESS_*;
 * named, gen: with FLIT_XDP_SESS_REPORT, topic indexes below named are
 * known to user space, and gen goes into the session's records), and its
 * wanted topic indexes */
int flit_xdp_session_set(const struct flit_xdp_maps *m, uint32_t session,
			 uint32_t flags, uint32_t named, uint32_t gen);
/* removes the session and all its topics */
int flit_xdp_session_del(const struct flit_xdp_maps *m, uint32_t session);
/* removes the sessions and their topics (one pass over the topics table);
 * sessions not there are no error */
int flit_xdp_sessions_del(const struct flit_xdp_maps *m, const uint32_t *sessions, size_t n);
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
