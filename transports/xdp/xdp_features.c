// SPDX-License-Identifier: BSD-2-Clause
/* What the kernel and an interface give flit's XDP paths.  Contract in
 * xdp_features.h. */
#include <net/if.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/sockios.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "error.h"
#include "xdp/xdp_features.h"
#include "xdp/xdp_prog.h"
#include "xdp/xsk_io.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif
#ifndef BPF_F_XDP_DEV_BOUND_ONLY
#define BPF_F_XDP_DEV_BOUND_ONLY (1U << 6)     /* Linux 6.3 */
#endif

/* The netdev generic netlink family (uapi linux/netdev.h, Linux 6.3) */
#define NETDEV_FAMILY "netdev"
#define NETDEV_CMD_DEV_GET 1
enum {
	NETDEV_A_DEV_IFINDEX = 1,
	NETDEV_A_DEV_PAD,
	NETDEV_A_DEV_XDP_FEATURES,              /* u64 */
	NETDEV_A_DEV_XDP_ZC_MAX_SEGS,           /* u32, with xsk-zerocopy */
	NETDEV_A_DEV_XDP_RX_METADATA_FEATURES,  /* u64, Linux 6.3 */
	NETDEV_A_DEV_XSK_FEATURES,              /* u64, Linux 6.8 */
};

__attribute__((format(printf, 3, 4)))
static void say(struct flit_feat *f, enum flit_feat_state st, const char *fmt, ...)
{
	va_list ap;

	f->state = st;
	va_start(ap, fmt);
	vsnprintf(f->how, sizeof(f->how), fmt, ap);
	va_end(ap);
}

static const char *errname(int err)
{
	switch (err) {
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case EINVAL: return "EINVAL";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case E2BIG: return "E2BIG";
	case EBUSY: return "EBUSY";
	case ENODEV: return "ENODEV";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case 524: return "ENOTSUPP";    /* the kernel's own, leaks out of bpf() */
	}
	return strerror(err);
}

static void driver_name(const char *ifname, char *buf, size_t len);

/* ---- kernel ------------------------------------------------------------------- */

static void probe_bpffs(struct flit_feat *f)
{
	struct statfs sf;

	if (statfs("/sys/fs/bpf", &sf) == 0 && (unsigned long)sf.f_type == BPF_FS_MAGIC)
		say(f, FLIT_FEAT_YES, "mounted on /sys/fs/bpf");
	else
		say(f, FLIT_FEAT_NO, "not mounted on /sys/fs/bpf ('flit-loader attach' "
		    "mounts it; 'ip netns exec' hides it: use nsenter --net)");
}

void flit_xdp_probe_rx_meta(struct flit_feat *f)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int id, err = btf ? 0 : errno;

	if (!btf) {
		say(f, FLIT_FEAT_UNKNOWN, "no kernel BTF to look in (%s: %s); the XDP "
		    "RX-metadata kfuncs came in Linux 6.3", "/sys/kernel/btf/vmlinux",
		    strerror(err));
		return;
	}
	id = btf__find_by_name_kind(btf, "bpf_xdp_metadata_rx_timestamp", BTF_KIND_FUNC);
	btf__free(btf);
	if (id > 0)
		say(f, FLIT_FEAT_YES, "bpf_xdp_metadata_rx_timestamp is in the kernel's BTF");
	else
		say(f, FLIT_FEAT_NO, "no bpf_xdp_metadata_rx_timestamp in the kernel's BTF: "
		    "the XDP RX-metadata kfuncs (hardware RX stamps) need Linux 6.3");
}

/* r0 = XDP_PASS; exit, loaded for ifindex with flags: fd or -errno */
static int load_pass(unsigned ifindex, unsigned flags)
{
	struct bpf_insn insns[] = {
		{ .code = 0xb7, .dst_reg = 0, .imm = 2 },       /* mov r0, XDP_PASS */
		{ .code = 0x95 },                               /* exit */
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .prog_flags = flags, .prog_ifindex = ifindex);
	int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "flit_probe", "GPL", insns, 2, &o);

	return fd < 0 ? -errno : fd;
}

void flit_xdp_probe_dev_bound(const char *ifname, struct flit_feat *f)
{
	/* without an interface, lo: ifindex 1 in every network namespace */
	unsigned ifindex = ifname ? if_nametoindex(ifname) : 1;
	char drv[33], who[64];
	int fd;

	if (!ifindex) {
		say(f, FLIT_FEAT_UNKNOWN, "no interface %s here", ifname);
		return;
	}
	fd = load_pass(ifindex, BPF_F_XDP_DEV_BOUND_ONLY);
	if (fd >= 0) {
		close(fd);
		say(f, FLIT_FEAT_YES, "a program bound to %s with BPF_F_XDP_DEV_BOUND_ONLY "
		    "loaded", ifname ? ifname : "lo");
	} else if (fd == -EOPNOTSUPP && !ifname) {
		say(f, FLIT_FEAT_YES, "the kernel takes BPF_F_XDP_DEV_BOUND_ONLY (a program "
		    "bound to lo is refused only because lo has no XDP driver)");
	} else if (fd == -EOPNOTSUPP) {
		driver_name(ifname, drv, sizeof(drv));
		if (drv[0])
			snprintf(who, sizeof(who), "the %s driver of %s", drv, ifname);
		else
			snprintf(who, sizeof(who), "%s", ifname);
		say(f, FLIT_FEAT_NO, "%s has no XDP to bind a program to (EOPNOTSUPP): "
		    "device-bound programs need a driver with native XDP", who);
	} else if (fd == -EINVAL) {
		say(f, FLIT_FEAT_NO, "the kernel refuses BPF_F_XDP_DEV_BOUND_ONLY (EINVAL): "
		    "device-bound XDP programs (hardware RX stamps) need Linux 6.3");
	} else if (fd == -EPERM || fd == -EACCES) {
		say(f, FLIT_FEAT_UNKNOWN, "loading a program needs CAP_BPF (or CAP_SYS_ADMIN)");
	} else {
		say(f, FLIT_FEAT_UNKNOWN, "a device-bound load for %s failed: %s",
		    ifname ? ifname : "lo", errname(-fd));
	}
}

static void probe_tx_meta(struct flit_feat *f)
{
	int r = flit_xsk_txmd_probe();

	switch (r) {
	case FLIT_XSK_TXMD_FLAG:
		say(f, FLIT_FEAT_YES, "an AF_XDP UMEM registered with tx_metadata_len "
		    "(and XDP_UMEM_TX_METADATA_LEN)");
		break;
	case FLIT_XSK_TXMD_NOFLAG:
		say(f, FLIT_FEAT_YES, "an AF_XDP UMEM registered with tx_metadata_len "
		    "(as Linux 6.8..6.10 take it, without XDP_UMEM_TX_METADATA_LEN)");
		break;
	case FLIT_XSK_TXMD_NONE:
		say(f, FLIT_FEAT_NO, "the kernel ignores tx_metadata_len in an AF_XDP UMEM "
		    "registration: AF_XDP TX metadata (TX stamps) needs Linux 6.8");
		break;
	case -EPERM:
	case -EACCES:
		say(f, FLIT_FEAT_UNKNOWN, "an AF_XDP socket needs CAP_NET_RAW");
		break;
	case -EAFNOSUPPORT:
		say(f, FLIT_FEAT_NO, "no AF_XDP sockets in this kernel (CONFIG_XDP_SOCKETS)");
		break;
	default:
		say(f, FLIT_FEAT_UNKNOWN, "an AF_XDP UMEM registration failed: %s",
		    errname(-r));
	}
}

static void probe_freplace(struct flit_feat *f)
{
	bool unknown;
	int r = flit_xdp_freplace_probe(&unknown);

	if (unknown)
		say(f, FLIT_FEAT_UNKNOWN, "flit's own program did not load (%s), so no "
		    "extension of it could be tried%s", errname(-r),
		    r == -EPERM ? ": needs CAP_BPF (or CAP_SYS_ADMIN)" :
		    ": 'flit-loader attach' says why");
	else if (r == 0)
		say(f, FLIT_FEAT_YES, "an extension (freplace, BPF_PROG_TYPE_EXT) of flit's "
		    "program loaded: libxdp's dispatcher can run flit beside other XDP "
		    "programs");
	else if (r == -EPERM || r == -EACCES)
		say(f, FLIT_FEAT_NO, "flit's program loaded, an extension of it (freplace, "
		    "BPF_PROG_TYPE_EXT) got %s%s: libxdp attaches one XDP program per "
		    "interface, without its multi-program dispatcher", errname(-r),
		    geteuid() == 0 ? " even as root" : "");
	else
		say(f, FLIT_FEAT_NO, "flit's program loaded, an extension of it (freplace, "
		    "BPF_PROG_TYPE_EXT) got %s: libxdp attaches one XDP program per "
		    "interface (its dispatcher needs freplace of XDP programs, Linux "
		    "5.10)", errname(-r));
}

void flit_xdp_kernel_feats(struct flit_xdp_kernel_feats *k)
{
	struct utsname u;

	memset(k, 0, sizeof(*k));
	snprintf(k->release, sizeof(k->release), "%s", uname(&u) ? "?" : u.release);
	probe_bpffs(&k->bpffs);
	flit_xdp_probe_rx_meta(&k->rx_meta);
	flit_xdp_probe_dev_bound(NULL, &k->dev_bound);
	probe_tx_meta(&k->tx_meta);
	probe_freplace(&k->freplace);
}

/* ---- the netdev family (generic netlink) ---------------------------------------- */

struct nlreq {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char attrs[64];
};

static void put_attr(struct nlreq *r, uint16_t type, const void *v, uint16_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)r + NLMSG_ALIGN(r->n.nlmsg_len));

	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, v, len);
	r->n.nlmsg_len = NLMSG_ALIGN(r->n.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/* One request, one answer into buf: the answer's attributes (their
 * length in *alen, start returned), or NULL with *err = -errno. */
static const struct nlattr *genl_call(int fd, uint16_t family, uint8_t cmd, uint16_t atype,
				      const void *aval, uint16_t alen_in, char *buf,
				      size_t len, size_t *alen, int *err)
{
	struct nlreq r;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct nlmsghdr *h;
	ssize_t n;

	memset(&r, 0, sizeof(r));
	r.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r.n.nlmsg_type = family;
	r.n.nlmsg_flags = NLM_F_REQUEST;
	r.n.nlmsg_seq = 1;
	r.g.cmd = cmd;
	r.g.version = 1;
	put_attr(&r, atype, aval, alen_in);
	if (sendto(fd, &r, r.n.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		*err = -errno;
		return NULL;
	}
	n = recv(fd, buf, len, 0);
	if (n < 0) {
		*err = -errno;
		return NULL;
	}
	h = (struct nlmsghdr *)buf;
	if (!NLMSG_OK(h, (size_t)n)) {
		*err = -EPROTO;
		return NULL;
	}
	if (h->nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(h);

		*err = e->error ? e->error : -EPROTO;
		return NULL;
	}
	if (h->nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN)) {
		*err = -EPROTO;
		return NULL;
	}
	*alen = h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	return (const struct nlattr *)((char *)NLMSG_DATA(h) + GENL_HDRLEN);
}

#define ATTRS_EACH(a, first, len)                                                  \
	for (const struct nlattr *a = (first); (size_t)((const char *)a - (const char *)(first)) + \
	     NLA_HDRLEN <= (len) && a->nla_len >= NLA_HDRLEN &&                       \
	     (size_t)((const char *)a - (const char *)(first)) + a->nla_len <= (len); \
	     a = (const struct nlattr *)((const char *)a + NLA_ALIGN(a->nla_len)))

static uint64_t attr_uint(const struct nlattr *a)
{
	uint64_t v64 = 0;
	uint32_t v32 = 0;
	uint16_t v16 = 0;
	size_t n = a->nla_len - NLA_HDRLEN;
	const char *p = (const char *)a + NLA_HDRLEN;

	if (n >= 8) {
		memcpy(&v64, p, 8);
		return v64;
	}
	if (n >= 4) {
		memcpy(&v32, p, 4);
		return v32;
	}
	if (n >= 2)
		memcpy(&v16, p, 2);
	return v16;
}

/* The netdev family's answer for ifindex into f: 0, or -errno (-ENOENT:
 * no such family, kernel < 6.3). */
static int netdev_dev_get(unsigned ifindex, struct flit_xdp_iface_feats *f)
{
	char buf[8192];
	struct timeval tv = { .tv_sec = 2 };
	const struct nlattr *at;
	uint16_t family = 0;
	uint32_t idx = ifindex;
	size_t alen;
	int fd, err = 0;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	at = genl_call(fd, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME,
		       NETDEV_FAMILY, sizeof(NETDEV_FAMILY), buf, sizeof(buf), &alen, &err);
	if (at) {
		ATTRS_EACH(a, at, alen)
			if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
				family = (uint16_t)attr_uint(a);
		if (!family)
			err = -ENOENT;
	}
	if (family)
		at = genl_call(fd, family, NETDEV_CMD_DEV_GET, NETDEV_A_DEV_IFINDEX, &idx,
			       sizeof(idx), buf, sizeof(buf), &alen, &err);
	close(fd);
	if (!family || !at)
		return err;
	ATTRS_EACH(a, at, alen) {
		switch (a->nla_type & NLA_TYPE_MASK) {
		case NETDEV_A_DEV_XDP_FEATURES: f->xdp = attr_uint(a); break;
		case NETDEV_A_DEV_XDP_ZC_MAX_SEGS: f->zc_max_segs = (uint32_t)attr_uint(a); break;
		case NETDEV_A_DEV_XDP_RX_METADATA_FEATURES: f->rx_meta = attr_uint(a); break;
		case NETDEV_A_DEV_XSK_FEATURES: f->xsk = attr_uint(a); break;
		}
	}
	f->known = true;
	return 0;
}

/* ---- one interface ---------------------------------------------------------------- */

static void driver_name(const char *ifname, char *buf, size_t len)
{
	struct ethtool_drvinfo di = { .cmd = ETHTOOL_GDRVINFO };
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&di;
	buf[0] = '\0';
	if (fd >= 0 && ioctl(fd, SIOCETHTOOL, &ifr) == 0)
		snprintf(buf, len, "%.*s", (int)sizeof(di.driver), di.driver);
	if (fd >= 0)
		close(fd);
}

int flit_xdp_iface_feats(const char *ifname, struct flit_xdp_iface_feats *f)
{
	unsigned ifindex = ifname ? if_nametoindex(ifname) : 0;
	const char *drv;
	char names[160], drvbuf[64];
	int err;

	memset(f, 0, sizeof(*f));
	if (!ifindex)
		return flit_err(ENODEV, "no interface %s here", ifname ? ifname : "(null)");
	driver_name(ifname, f->driver, sizeof(f->driver));
	if (f->driver[0])
		snprintf(drvbuf, sizeof(drvbuf), "the %s driver", f->driver);
	else
		snprintf(drvbuf, sizeof(drvbuf), "%s", ifname);
	drv = drvbuf;

	err = netdev_dev_get(ifindex, f);
	if (err == -ENOENT && !f->known)
		say(&f->zerocopy, FLIT_FEAT_UNKNOWN, "no netdev netlink family to ask "
		    "(xdp-features came in Linux 6.3)");
	else if (err)
		say(&f->zerocopy, FLIT_FEAT_UNKNOWN, "the netdev netlink family did not "
		    "answer for %s: %s", ifname, errname(-err));
	else if (f->xdp & FLIT_NETDEV_XDP_XSK_ZEROCOPY)
		say(&f->zerocopy, FLIT_FEAT_YES, "%s advertises xsk-zerocopy (up to %u "
		    "segment%s a frame)", drv, f->zc_max_segs, f->zc_max_segs == 1 ? "" : "s");
	else
		say(&f->zerocopy, FLIT_FEAT_NO, "%s does not advertise xsk-zerocopy "
		    "(xdp-features: %s): AF_XDP runs in copy mode", drv,
		    flit_xdp_feat_names(FLIT_FEATS_XDP, f->xdp, names, sizeof(names)));

	flit_xdp_probe_dev_bound(ifname, &f->dev_bound);
	return 0;
}

const char *flit_xdp_feat_names(enum flit_feat_set set, uint64_t bits, char *buf,
				size_t len)
{
	static const char *const xdp[] = { "basic", "redirect", "ndo-xmit", "xsk-zerocopy",
					   "hw-offload", "rx-sg", "ndo-xmit-sg" };
	static const char *const rx[] = { "timestamp", "hash", "vlan-tag" };
	static const char *const xsk[] = { "tx-timestamp", "tx-checksum", "tx-launch-time-fifo" };
	const char *const *names = set == FLIT_FEATS_XDP ? xdp : set == FLIT_FEATS_RX_META ? rx : xsk;
	unsigned n = set == FLIT_FEATS_XDP ? 7 : 3;
	size_t o = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	for (unsigned i = 0; i < 64; i++) {
		char other[16];
		const char *name = other;
		int w;

		if (!(bits & (1ull << i)))
			continue;
		if (i < n)
			name = names[i];
		else
			snprintf(other, sizeof(other), "bit%u", i);
		w = snprintf(buf + o, len - o, "%s%s", o ? " " : "", name);
		if (w < 0 || (size_t)w >= len - o)
			break;
		o += (size_t)w;
	}
	if (!o)
		snprintf(buf, len, "none");
	return buf;
}
