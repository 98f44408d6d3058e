/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the running kernel, and one interface, give flit's XDP paths, each
 * found by trying it, never from the version number (distribution kernels
 * backport, and this machine's kernel refuses freplace that its version
 * has): for `flit-loader status` and for the messages of refusals.
 *
 *   bpffs      bpffs mounted on /sys/fs/bpf (flit's pins): statfs()
 *   rx_meta    the XDP RX-metadata kfuncs (hardware RX stamps, Linux 6.3):
 *              bpf_xdp_metadata_rx_timestamp in the kernel's BTF
 *   dev_bound  device-bound XDP programs (BPF_F_XDP_DEV_BOUND_ONLY, Linux
 *              6.3; the RX-metadata program is one): a two-instruction
 *              program loaded with the flag for lo, which a kernel that
 *              knows the flag refuses with EOPNOTSUPP (lo has no XDP
 *              driver) and an older one with EINVAL (unknown flag)
 *   tx_meta    AF_XDP TX metadata (TX stamps, Linux 6.8): a UMEM registered
 *              with it (flit_xsk_txmd_probe())
 *   freplace   an extension program replacing a function of a loaded XDP
 *              program, which libxdp's dispatcher needs (Linux 5.10 for the
 *              dispatcher; refused with EPERM on this machine, even as
 *              root): flit_xdp_freplace_probe()
 * and per interface, from the kernel's netdev netlink family (Linux 6.3):
 * its xdp-features (zero-copy AF_XDP: xsk-zerocopy), the RX-metadata kfuncs
 * its driver implements and its AF_XDP TX-metadata features; and whether a
 * program can be bound to it.
 *
 * Control plane only: every call loads programs, opens sockets, parses BTF.
 * Library code: nothing printed; the answers are text for the caller.
 */
#ifndef FLIT_XDP_FEATURES_H
#define FLIT_XDP_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

enum flit_feat_state {
	FLIT_FEAT_UNKNOWN = 0,  /* could not be tried: how says why */
	FLIT_FEAT_YES,
	FLIT_FEAT_NO,           /* how names the kernel version that has it,
				 * or why this kernel refuses it */
};

struct flit_feat {
	enum flit_feat_state state;
	char how[224];          /* what was tried and what came back */
};

struct flit_xdp_kernel_feats {
	char release[65];       /* uname -r */
	struct flit_feat bpffs, rx_meta, dev_bound, tx_meta, freplace;
};

/* Every kernel feature above, into *k (never fails: a probe that cannot run
 * says so in its answer). */
void flit_xdp_kernel_feats(struct flit_xdp_kernel_feats *k);

/* The two probes the RX-metadata program's refusal uses, alone:
 * rx_meta as above; dev_bound for ifname (a program bound to it, which
 * also says whether its driver has XDP), or for the kernel (NULL: lo). */
void flit_xdp_probe_rx_meta(struct flit_feat *f);
void flit_xdp_probe_dev_bound(const char *ifname, struct flit_feat *f);

/* netdev xdp-features bits (uapi linux/netdev.h, Linux 6.3; the 6.1
 * headers here lack them) */
#define FLIT_NETDEV_XDP_BASIC         (1ull << 0)
#define FLIT_NETDEV_XDP_REDIRECT      (1ull << 1)
#define FLIT_NETDEV_XDP_NDO_XMIT      (1ull << 2)
#define FLIT_NETDEV_XDP_XSK_ZEROCOPY  (1ull << 3)
#define FLIT_NETDEV_XDP_HW_OFFLOAD    (1ull << 4)
#define FLIT_NETDEV_XDP_RX_SG         (1ull << 5)
#define FLIT_NETDEV_XDP_NDO_XMIT_SG   (1ull << 6)

struct flit_xdp_iface_feats {
	char driver[33];        /* ethtool's driver name, "" if none */
	bool known;             /* the netdev family answered (xdp, rx_meta,
				 * xsk, zc_max_segs are meaningful) */
	uint64_t xdp;           /* FLIT_NETDEV_XDP_* */
	uint64_t rx_meta;       /* RX-metadata kfuncs the driver implements:
				 * 1 timestamp, 2 hash, 4 vlan-tag */
	uint64_t xsk;           /* AF_XDP TX metadata the driver fills in
				 * zero-copy mode: 1 tx-timestamp, 2
				 * tx-checksum, 4 launch-time */
	uint32_t zc_max_segs;   /* with xsk-zerocopy */
	struct flit_feat zerocopy;  /* AF_XDP zero-copy on this interface */
	struct flit_feat dev_bound; /* a device-bound program for it loads */
};

/* The interface's features, in this network namespace.  0, or -ENODEV
 * when there is no such interface (trail set). */
int flit_xdp_iface_feats(const char *ifname, struct flit_xdp_iface_feats *f);

/* Names of the set bits, space-separated ("basic redirect rx-sg"), "none"
 * for 0, as the kernel's netdev family spells them. */
enum flit_feat_set { FLIT_FEATS_XDP, FLIT_FEATS_RX_META, FLIT_FEATS_XSK };
const char *flit_xdp_feat_names(enum flit_feat_set set, uint64_t bits, char *buf,
				size_t len);

#endif /* FLIT_XDP_FEATURES_H */
