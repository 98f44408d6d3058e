// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit's XDP program manager: attach the embedded steering program through
 * libxdp, pin it and its maps per interface, and work with those pins.
 * Contract in xdp_prog.h.
 *
 * libxdp and libbpf print to stderr by default (libxdp even at INFO level:
 * "Falling back to loading single prog without dispatcher"), and a library
 * must not.  Every call here that may make them print holds `quiet`: their
 * print callbacks are swapped for ones that forward to flit's log at debug
 * level for the duration, and put back after.  The mutex also serializes
 * this process's control-plane calls; other processes are kept out by an
 * flock() on the pin root (the way libxdp locks its own bpffs directory).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "error.h"
#include "xdp/verifier_log.h"
#include "xdp/xdp_features.h"
#include "xdp/xdp_prog.h"
#include "flit_xdp.skel.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif
#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71      /* Linux 5.14 */
#endif
#ifndef BPF_F_XDP_DEV_BOUND_ONLY
#define BPF_F_XDP_DEV_BOUND_ONLY (1U << 6)     /* Linux 6.3 */
#endif

#define BPFFS_MNT "/sys/fs/bpf"
#define CAPS_MSG "needs CAP_NET_ADMIN and CAP_BPF (or CAP_SYS_ADMIN)"

/* Pins in a pin directory (xdp_prog.h), in the order they are pinned:
 * owner and ifref first (a directory found anywhere tells whose it is and
 * whether its interface still exists), version last.  A directory is filled
 * under a staging name and renamed into place complete; it is emptied in the
 * reverse order, version first (readers stop using it) and owner last. */
enum { PIN_OWNER, PIN_IFREF, PIN_PROG, PIN_FLOWS, PIN_XSKS, PIN_SESSIONS,
       PIN_TOPICS, PIN_FILTERED, PIN_COUNTERS, PIN_VERSION, PIN_N };
static const char *const pin_names[PIN_N] = {
	"owner", "ifref", "prog", "flows", "xsks", "sessions", "topics",
	"filtered", "counters", "version",
};

/* Value of the "owner" pin: whose pins these are. */
struct flit_xdp_owner {
	uint64_t netns; /* SO_NETNS_COOKIE of the interface's namespace */
	uint32_t ifindex;
	uint32_t pad;
};

/* ---- libbpf/libxdp messages into flit's log --------------------------------- */

static pthread_mutex_t quiet_lock = PTHREAD_MUTEX_INITIALIZER;
static libbpf_print_fn_t saved_bpf_print;
static libxdp_print_fn_t saved_xdp_print;
/* last warning of libbpf/libxdp, and the load logs among the warnings
 * (verifier_log.h), for error trails (under quiet_lock) */
static char last_warn[256];
static bool last_warn_first;    /* last_warn is what a failure said first */
static struct flit_vlog vlog;

static void first_line(char *dst, size_t len, const char *src)
{
	size_t n = strcspn(src, "\n");

	if (n >= len)
		n = len - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static bool is_echo(const char *msg)
{
	return strstr(msg, "failed to load object") || strstr(msg, "failed to load BPF skeleton") ||
	       strstr(msg, "': failed to load: ");
}

__attribute__((format(printf, 2, 0)))
static int forward(int is_warn, const char *fmt, va_list ap)
{
	char *msg = NULL;
	int n = vasprintf(&msg, fmt, ap);

	if (n < 0)
		return 0;
	while (n > 0 && msg[n - 1] == '\n')
		msg[--n] = '\0';
	/* libbpf's "raise 'ulimit -l'" and "RLIMIT_MEMLOCK" guesses are wrong
	 * here: the EPERM is a missing capability or a refused program type;
	 * and what a failed load says first ("prog 'x': BPF program load
	 * failed: ...") beats its echoes up the stack ("failed to load object",
	 * "... BPF skeleton") */
	if (is_warn && !flit_vlog_feed(&vlog, msg) && !strstr(msg, "ulimit -l") &&
	    !strstr(msg, "RLIMIT_MEMLOCK")) {
		bool echo = is_echo(msg);

		if (!echo || !last_warn_first) {
			first_line(last_warn, sizeof(last_warn), msg);
			last_warn_first = !echo;
		}
	}
	flit_debug("%s", msg);
	free(msg);
	return n;
}

__attribute__((format(printf, 2, 0)))
static int bpf_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	return forward(lvl == LIBBPF_WARN, fmt, ap);
}

__attribute__((format(printf, 2, 0)))
static int xdp_print(enum libxdp_print_level lvl, const char *fmt, va_list ap)
{
	return forward(lvl == LIBXDP_WARN, fmt, ap);
}

static void quiet_enter(void)
{
	pthread_mutex_lock(&quiet_lock);
	saved_bpf_print = libbpf_set_print(bpf_print);
	saved_xdp_print = libxdp_set_print(xdp_print);
	last_warn[0] = '\0';
	last_warn_first = false;
	flit_vlog_reset(&vlog);
}

static void quiet_exit(void)
{
	libbpf_set_print(saved_bpf_print);
	libxdp_set_print(saved_xdp_print);
	pthread_mutex_unlock(&quiet_lock);
}

#define WARN_SUFFIX_MAX (FLIT_VLOG_REASON_MAX + 16)

/* ": verifier: <its reason>" for a trail, or ": <libbpf's last warning>",
 * "" if none */
static const char *warn_suffix(char *buf, size_t len)
{
	flit_vlog_flush(&vlog);  /* a log whose end never came */
	if (vlog.reason[0])
		snprintf(buf, len, ": verifier: %s", vlog.reason);
	else if (last_warn[0])
		snprintf(buf, len, ": %s", last_warn);
	else
		buf[0] = '\0';
	return buf;
}

/* A failed bpf()/netlink call: EPERM names the capabilities. */
__attribute__((format(printf, 2, 3)))
static int sys_err(int err, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (err == EPERM)
		return flit_err(EPERM, "%s: " CAPS_MSG, what);
	return flit_err(err, "%s", what);
}

/* A failed file operation on the pins: EACCES/EPERM also mean privilege. */
__attribute__((format(printf, 2, 3)))
static int file_err(int err, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (err == EPERM || err == EACCES)
		return flit_err(err, "%s: " CAPS_MSG, what);
	return flit_err(err, "%s", what);
}

/* ---- small helpers ------------------------------------------------------------ */

const char *flit_xdp_mode_str(enum flit_xdp_mode m)
{
	switch (m) {
	case FLIT_XDP_MODE_AUTO: return "auto";
	case FLIT_XDP_MODE_NATIVE: return "native";
	case FLIT_XDP_MODE_SKB: return "skb";
	}
	return "?";
}

int flit_xdp_mode_parse(const char *s, enum flit_xdp_mode *m)
{
	static const enum flit_xdp_mode all[] = {
		FLIT_XDP_MODE_AUTO, FLIT_XDP_MODE_NATIVE, FLIT_XDP_MODE_SKB,
	};

	for (size_t i = 0; s && i < sizeof(all) / sizeof(all[0]); i++) {
		if (!strcmp(s, flit_xdp_mode_str(all[i]))) {
			*m = all[i];
			return 0;
		}
	}
	return flit_err(EINVAL, "XDP mode '%s': expected native, skb or auto",
			s ? s : "(null)");
}

static enum xdp_attach_mode to_libxdp_mode(enum flit_xdp_mode m)
{
	return m == FLIT_XDP_MODE_SKB ? XDP_MODE_SKB : XDP_MODE_NATIVE;
}

static int check_ifname(const char *ifname)
{
	size_t n = ifname ? strlen(ifname) : 0;

	if (n == 0 || n >= IFNAMSIZ || strchr(ifname, '/') ||
	    !strcmp(ifname, ".") || !strcmp(ifname, ".."))
		return flit_err(EINVAL, "bad interface name '%s'",
				ifname ? ifname : "(null)");
	/* '@' separates the namespace in pin directory names, ':' stands
	 * for '.' there (and the kernel refuses it in interface names) */
	if (strchr(ifname, '@') || strchr(ifname, ':'))
		return flit_err(EINVAL, "interface name '%s': flit does not support "
				"'@' or ':' in interface names (its pin directories "
				"use them)", ifname);
	return 0;
}

static int ifindex_of(const char *ifname, unsigned *ifindex)
{
	unsigned i = if_nametoindex(ifname);

	if (!i)
		return flit_err(errno == ENXIO || errno == ENODEV ? ENODEV : errno,
				"no interface %s in this network namespace", ifname);
	*ifindex = i;
	return 0;
}

/* ifname as a name in bpffs, which refuses '.' (reserved): '.' as ':',
 * which interface names cannot hold. */
static void encode_ifname(char out[IFNAMSIZ], const char *ifname)
{
	size_t i;

	for (i = 0; ifname[i] && i < IFNAMSIZ - 1; i++)
		out[i] = ifname[i] == '.' ? ':' : ifname[i];
	out[i] = '\0';
}

/* The pin directory of ifname: canonical (alt 0), or of the namespace with
 * cookie alt: FLIT_XDP_PIN_ROOT/<ifname>[@<alt>]. */
static void dir_of(char *buf, size_t len, const char *ifname, uint64_t alt)
{
	char enc[IFNAMSIZ];

	encode_ifname(enc, ifname);
	if (alt)
		snprintf(buf, len, "%s/%s@%llu", FLIT_XDP_PIN_ROOT, enc,
			 (unsigned long long)alt);
	else
		snprintf(buf, len, "%s/%s", FLIT_XDP_PIN_ROOT, enc);
}

static void pin_path(char *buf, size_t len, const char *dir, int which)
{
	int n = snprintf(buf, len, "%s/%s", dir, pin_names[which]);

	if (n < 0 || (size_t)n >= len)
		buf[0] = '\0';         /* cannot happen: dir is short */
}

enum { ENTRY_OTHER, ENTRY_PINS, ENTRY_STAGING };

/* What an entry of the pin root is: a pin directory (ENTRY_PINS: its
 * interface name in ifname, *alt its namespace cookie or 0 if canonical),
 * the staging directory of an attach ("<ifname>@new<pid>"), or something
 * flit did not make. */
static int parse_entry(const char *name, char ifname[IFNAMSIZ], uint64_t *alt)
{
	const char *at = strchr(name, '@');
	size_t n = at ? (size_t)(at - name) : strlen(name);
	char *end;

	*alt = 0;
	/* <ifname>@<20 digits at most> fits FLIT_XDP_PIN_DIR_MAX */
	if (n == 0 || n >= IFNAMSIZ || strlen(name) > IFNAMSIZ + 20)
		return ENTRY_OTHER;
	for (size_t i = 0; i < n; i++) {
		if (name[i] == '.' || name[i] == '/')
			return ENTRY_OTHER;
		ifname[i] = name[i] == ':' ? '.' : name[i];
	}
	ifname[n] = '\0';
	if (!at)
		return ENTRY_PINS;
	if (isdigit((unsigned char)at[1])) {
		errno = 0;
		*alt = strtoull(at + 1, &end, 10);
		return !errno && !*end && *alt ? ENTRY_PINS : ENTRY_OTHER;
	}
	if (!strncmp(at + 1, "new", 3) && isdigit((unsigned char)at[4])) {
		strtoul(at + 4, &end, 10);
		return *end ? ENTRY_OTHER : ENTRY_STAGING;
	}
	return ENTRY_OTHER;
}

/* The calling thread's network namespace, as a cookie that is never reused
 * (the namespace inode number, which can be, before Linux 5.14). */
static int netns_id(uint64_t *id)
{
	socklen_t len = sizeof(*id);
	struct stat st;
	int fd, err = 0;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return flit_err(errno, "socket for the network namespace cookie");
	if (getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, id, &len) < 0) {
		if (stat("/proc/thread-self/ns/net", &st) == 0)
			*id = (uint64_t)st.st_ino | 1ull << 63;
		else
			err = flit_err(errno, "network namespace of this thread");
	}
	close(fd);
	return err;
}

/* Driver name of an interface ("veth", ...), "" if it has none. */
static int driver_of(const char *ifname, char *buf, size_t len)
{
	struct ethtool_drvinfo di = { .cmd = ETHTOOL_GDRVINFO };
	struct ifreq ifr;
	int fd, err = 0;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&di;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return flit_err(errno, "socket for ethtool");
	if (ioctl(fd, SIOCETHTOOL, &ifr) < 0) {
		if (errno == EOPNOTSUPP)
			di.driver[0] = '\0';
		else
			err = flit_err(errno, "ETHTOOL_GDRVINFO on %s", ifname);
	}
	close(fd);
	snprintf(buf, len, "%.*s", (int)sizeof(di.driver), di.driver);
	return err;
}

/* ---- bpffs ------------------------------------------------------------------------ */

static bool is_bpffs(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && (unsigned long)sf.f_type == BPF_FS_MAGIC;
}

static bool read_link(const char *path, char *buf, size_t len)
{
	ssize_t n = readlink(path, buf, len - 1);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

static int parent_of(int pid)
{
	char path[64], line[128];
	int ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "PPid: %d", &ppid) == 1)
			break;
	fclose(f);
	return ppid;
}

/* Is this process in a mount namespace of its own, that its ancestors (or
 * pid 1) are not in?  `ip netns exec` makes one, with its own /sys, where a
 * bpffs mounted now would be private to the command and its pins gone when
 * it exits.  Ancestors whose namespace cannot be read are skipped (pid 1's
 * often cannot); false when nothing can be compared. */
static bool private_mount_ns(void)
{
	char self[64], other[64], path[64];
	int pid = getppid();

	if (!read_link("/proc/self/ns/mnt", self, sizeof(self)))
		return false;
	for (int depth = 0; pid > 0 && depth < 64; depth++) {
		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", pid);
		if (read_link(path, other, sizeof(other)) && strcmp(self, other))
			return true;
		if (pid == 1)
			break;
		pid = parent_of(pid);
	}
	return false;
}

int flit_xdp_bpffs_ensure(void)
{
	if (is_bpffs(BPFFS_MNT))
		return 0;
	if (private_mount_ns())
		return flit_err(ENOENT, "no bpffs on %s in this mount namespace, "
				"which is not the system's (as under `ip netns exec`): "
				"pins made here would vanish with it; run in the "
				"system's mount namespace (nsenter --net=/run/netns/NAME)",
				BPFFS_MNT);
	if (mount("bpf", BPFFS_MNT, "bpf", 0, "mode=0700") < 0) {
		int err = errno;
		if (err == EPERM)
			return flit_err(EPERM, "mounting bpffs on %s needs CAP_SYS_ADMIN",
					BPFFS_MNT);
		return flit_err(err, "mounting bpffs on %s", BPFFS_MNT);
	}
	return 0;
}

static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return flit_err(ENAMETOOLONG, "%s", path);
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, 0700) < 0 && errno != EEXIST)
				return file_err(errno, "mkdir %s", buf);
			*p = c;
			if (!c)
				break;
		}
	}
	return 0;
}

/* Exclusive lock on the pin root against other processes.  fd or -errno. */
static int pin_root_lock(void)
{
	int fd, err = mkdir_p(FLIT_XDP_PIN_ROOT);

	if (err)
		return err;
	fd = open(FLIT_XDP_PIN_ROOT, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return file_err(errno, "open %s", FLIT_XDP_PIN_ROOT);
	if (flock(fd, LOCK_EX) < 0) {
		err = flit_err(errno, "flock %s", FLIT_XDP_PIN_ROOT);
		close(fd);
		return err;
	}
	return fd;
}

static void pin_root_unlock(int fd)
{
	if (fd >= 0)
		close(fd);      /* drops the flock */
}

/* Remove the pins in dir (version first, owner last) and dir.  Missing ones
 * are fine. */
static int remove_dir(const char *dir)
{
	char path[PATH_MAX];

	for (int i = PIN_N - 1; i >= 0; i--) {
		pin_path(path, sizeof(path), dir, i);
		if (unlink(path) < 0 && errno != ENOENT)
			return file_err(errno, "removing pin %s", path);
	}
	if (rmdir(dir) < 0 && errno != ENOENT) {
		if (errno == ENOTEMPTY || errno == EEXIST)
			return flit_err(ENOTEMPTY, "removing %s: it holds files flit "
					"did not pin there", dir);
		return file_err(errno, "removing %s", dir);
	}
	return 0;
}

/* ---- what is on an interface, what is pinned ------------------------------------- */

/* The skeleton's steering program, by name: the object also holds
 * flit_xdp_ts, in a section of the same name once libbpf has dropped its
 * "?" (not loaded by default). */
static struct bpf_program *skel_prog(struct bpf_object *obj)
{
	return bpf_object__find_program_by_name(obj, FLIT_XDP_PROG_NAME);
}

/* The kernel's name of flit's program (bpf_prog_info.name), cached. */
static const char *flit_prog_name(void)
{
	static char name[BPF_OBJ_NAME_LEN];
	struct flit_xdp *skel;
	struct bpf_program *p;

	if (name[0])
		return name;
	skel = flit_xdp__open();
	if (!skel)
		return "flit_xdp_steer";
	p = skel_prog(skel->obj);
	snprintf(name, sizeof(name), "%s", p ? bpf_program__name(p) : "flit_xdp_steer");
	flit_xdp__destroy(skel);
	return name;
}

struct ifstate {
	const char *ifname;
	unsigned ifindex;       /* 0: no such interface here */
	/* the XDP program(s) attached */
	bool attached, multiprog;
	enum flit_xdp_mode mode;
	uint32_t main_id;       /* the dispatcher, or the single program */
	char main_name[BPF_OBJ_NAME_LEN];
	uint32_t ids[16];       /* single program, or the dispatcher's components */
	char names[16][BPF_OBJ_NAME_LEN];
	uint32_t prio[16], chain[16];   /* the components' run priority and
				 * chain-call actions (bit 1 << XDP_*) */
	int nids;
	/* the pins */
	uint64_t ns;            /* this network namespace's cookie */
	char canon[FLIT_XDP_PIN_DIR_MAX];       /* FLIT_XDP_PIN_ROOT/<ifname> */
	char dir[FLIT_XDP_PIN_DIR_MAX];         /* this namespace's pin directory, or where
				 * attach would make it */
	bool pinned;            /* dir exists */
	bool has_owner;
	uint32_t pin_prog_id, pin_version;
	struct flit_xdp_owner owner;
	bool foreign;           /* canon holds the pins of another live
				 * interface (another namespace's) */
	bool dir_taken;         /* dir (not pinned) exists and holds another
				 * live interface's pins */
	bool canon_junk;        /* canon is no one's (no owner pin, or its
				 * interface is gone): attach removes it */
	/* conclusions */
	bool flit;              /* the pinned program is attached here */
	bool ts;                /* flit's program attached is flit_xdp_ts */
	bool flit_unpinned;     /* a single program of flit's name that is
				 * not the pinned one (no pins, or pins of
				 * another program) */
};

/* The name and id of the program with this id.  Through a file descriptor
 * closed again here: libxdp 1.3's xdp_program__from_id() keeps a duplicate of
 * the descriptor it opens and never closes the original, so every read of a
 * single program through it leaked a reference, and a detached program lived
 * until the process exited (a device-bound one then outlived its device: on
 * 6.18 a namespace's teardown faulted in __bpf_prog_offload_destroy). */
static int prog_name_of(const char *ifname, uint32_t id, char *name, size_t len)
{
	struct bpf_prog_info info;
	__u32 ilen = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id), err = 0;

	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;         /* gone meanwhile */
		return sys_err(errno, "reading XDP program id %u on %s", id, ifname);
	}
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &ilen))
		err = sys_err(errno, "reading XDP program id %u on %s", id, ifname);
	else
		snprintf(name, len, "%s", info.name);
	close(fd);
	return err;
}

/* s holds one program, s->main_id named s->main_name. */
static void one_program(struct ifstate *s)
{
	s->ids[0] = s->main_id;
	memcpy(s->names[0], s->main_name, sizeof(s->names[0]));
	s->nids = 1;
}

/* What is attached to s->ifindex.  A single program is read by netlink and
 * its own info; libxdp is asked only about its dispatcher (several programs
 * in run order, their priorities and chain-call actions). */
static int read_attached(struct ifstate *s)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	struct xdp_multiprog *mp;
	struct xdp_program *p;
	uint32_t id;
	int err;

	err = bpf_xdp_query((int)s->ifindex, 0, &q);
	if (err)
		return sys_err(-err, "querying XDP on %s", s->ifname);
	if (q.attach_mode == XDP_ATTACHED_NONE)
		return 0;
	/* one mode's program: native before generic before offloaded */
	id = q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id ? q.skb_prog_id :
		q.hw_prog_id ? q.hw_prog_id : q.prog_id;
	s->mode = id == q.skb_prog_id && !q.drv_prog_id ?
		FLIT_XDP_MODE_SKB : FLIT_XDP_MODE_NATIVE;
	err = prog_name_of(s->ifname, id, s->main_name, sizeof(s->main_name));
	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	if (strcmp(s->main_name, "xdp_dispatcher")) {
		s->attached = true;
		s->main_id = id;
		one_program(s);
		return 0;
	}

	mp = xdp_multiprog__get_from_ifindex((int)s->ifindex);
	err = (int)libxdp_get_error(mp);
	if (err == -ENOENT || !mp)
		return 0;       /* gone meanwhile */
	if (err)
		return sys_err(-err, "reading the XDP programs on %s", s->ifname);
	s->attached = true;
	s->multiprog = !xdp_multiprog__is_legacy(mp);
	s->mode = xdp_multiprog__attach_mode(mp) == XDP_MODE_SKB ?
		FLIT_XDP_MODE_SKB : FLIT_XDP_MODE_NATIVE;
	s->main_id = id;
	if (!s->multiprog) {
		one_program(s);
	} else {
		for (p = xdp_multiprog__next_prog(NULL, mp); p && s->nids < 16;
		     p = xdp_multiprog__next_prog(p, mp)) {
			s->ids[s->nids] = xdp_program__id(p);
			snprintf(s->names[s->nids], sizeof(s->names[0]), "%s",
				 xdp_program__name(p));
			/* next_prog() walks them in run order */
			s->prio[s->nids] = xdp_program__run_prio(p);
			s->chain[s->nids] = 0;
			for (unsigned a = XDP_ABORTED; a <= XDP_REDIRECT; a++)
				if (xdp_program__chain_call_enabled(p, (enum xdp_action)a))
					s->chain[s->nids] |= 1u << a;
			s->nids++;
		}
	}
	xdp_multiprog__close(mp);
	return 0;
}

static int map_read(int fd, uint32_t key, void *val, const char *path)
{
	if (bpf_map_lookup_elem(fd, &key, val) < 0)
		return sys_err(errno, "reading %s", path);
	return 0;
}

/* One pin directory, as found. */
struct dirinfo {
	bool exists, has_owner, has_ifref;
	bool gone;              /* ifref empty: the interface no longer exists */
	struct flit_xdp_owner owner;
	uint32_t prog_id, version;      /* 0: no such pin */
};

/* Open pin `which` of dir: fd, -1 if it does not exist, else -errno. */
static int pin_open(const char *dir, int which, const char *what)
{
	char path[PATH_MAX];
	int fd;

	pin_path(path, sizeof(path), dir, which);
	fd = bpf_obj_get(path);
	if (fd >= 0)
		return fd;
	if (errno == ENOENT)
		return -1;
	return sys_err(errno, "opening pinned %s %s", what, path);
}

static int read_dir(const char *dir, struct dirinfo *d)
{
	char path[PATH_MAX];
	struct bpf_prog_info info;
	__u32 len = sizeof(info), ifindex;
	struct stat st;
	int fd, err = 0;

	memset(d, 0, sizeof(*d));
	if (stat(dir, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return file_err(errno, "stat %s", dir);
	}
	d->exists = true;

	fd = pin_open(dir, PIN_OWNER, "map");
	if (fd < -1)
		return fd;
	if (fd >= 0) {
		pin_path(path, sizeof(path), dir, PIN_OWNER);
		err = map_read(fd, 0, &d->owner, path);
		d->has_owner = !err;
		close(fd);
		if (err)
			return err;
	}

	fd = pin_open(dir, PIN_IFREF, "map");
	if (fd < -1)
		return fd;
	if (fd >= 0) {
		d->has_ifref = true;
		if (bpf_map_lookup_elem(fd, &(uint32_t){ 0 }, &ifindex) < 0) {
			if (errno == ENOENT)
				d->gone = true;
			else
				err = sys_err(errno, "reading %s/%s", dir,
					      pin_names[PIN_IFREF]);
		}
		close(fd);
		if (err)
			return err;
	}

	fd = pin_open(dir, PIN_PROG, "program");
	if (fd < -1)
		return fd;
	if (fd >= 0) {
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
			d->prog_id = info.id;
		close(fd);
	}

	fd = pin_open(dir, PIN_VERSION, "map");
	if (fd < -1)
		return fd;
	if (fd >= 0) {
		pin_path(path, sizeof(path), dir, PIN_VERSION);
		err = map_read(fd, 0, &d->version, path);
		close(fd);
	}
	return err;
}

static void use_dir(struct ifstate *s, const char *dir, const struct dirinfo *d)
{
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	s->pinned = true;
	s->has_owner = d->has_owner;
	s->owner = d->owner;
	s->pin_prog_id = d->prog_id;
	s->pin_version = d->version;
}

/* Are the pins in d this interface's: owner is this namespace and this
 * ifindex?  Also when the interface is missing here (its pins, stale), or
 * when theirs is gone (stale, whichever it was).  Not when they belong to
 * another live interface of this namespace (renamed since). */
static bool owned_here(const struct ifstate *s, const struct dirinfo *d)
{
	return d->has_owner && d->owner.netns == s->ns &&
	       (!s->ifindex || d->owner.ifindex == s->ifindex || d->gone);
}

/* Find this namespace's pin directory for s->ifname (xdp_prog.h): canonical
 * if its owner is this namespace's interface, else <ifname>@<cookie> if it
 * exists.  When there is none, s->dir is where attach would make it:
 * canonical unless another live interface's pins hold it. */
static int resolve_pins(struct ifstate *s)
{
	char alt[FLIT_XDP_PIN_DIR_MAX];
	struct dirinfo c, a;
	int err;

	dir_of(s->canon, sizeof(s->canon), s->ifname, 0);
	snprintf(s->dir, sizeof(s->dir), "%s", s->canon);
	if (!is_bpffs(BPFFS_MNT))
		return 0;
	err = read_dir(s->canon, &c);
	if (err)
		return err;
	if (c.exists && owned_here(s, &c)) {
		use_dir(s, s->canon, &c);
		return 0;
	}
	/* no owner: a crash between mkdir and the first pin (or pins of a
	 * flit without owner pins); owner with ifref empty: its interface
	 * is gone.  Neither is anyone's any more. */
	s->foreign = c.exists && c.has_owner && !c.gone;
	s->canon_junk = c.exists && !s->foreign;
	dir_of(alt, sizeof(alt), s->ifname, s->ns);
	err = read_dir(alt, &a);
	if (err)
		return err;
	if (a.exists && (owned_here(s, &a) || !a.has_owner)) {
		use_dir(s, alt, &a);    /* named after this namespace */
	} else if (a.exists) {
		snprintf(s->dir, sizeof(s->dir), "%s", alt);
		s->dir_taken = true;
	} else if (s->foreign) {
		snprintf(s->dir, sizeof(s->dir), "%s", alt);
	}
	return 0;
}

/* Everything about ifname here.  An interface missing in this namespace
 * is not an error (its pins may still be shown): s->ifindex = 0. */
static int inspect(const char *ifname, struct ifstate *s)
{
	int err;

	memset(s, 0, sizeof(*s));
	s->ifname = ifname;
	s->ifindex = if_nametoindex(ifname);
	if (s->ifindex) {
		err = read_attached(s);
		if (err)
			return err;
	}
	err = netns_id(&s->ns);
	if (!err)
		err = resolve_pins(s);
	if (err)
		return err;
	for (int i = 0; s->pinned && i < s->nids; i++)
		if (s->pin_prog_id && s->ids[i] == s->pin_prog_id) {
			s->flit = true;
			s->ts = !strcmp(s->names[i], FLIT_XDP_PROG_NAME_TS);
		}
	if (!s->flit && s->attached && !s->multiprog &&
	    (!strcmp(s->main_name, flit_prog_name()) ||
	     !strcmp(s->main_name, FLIT_XDP_PROG_NAME_TS))) {
		s->flit_unpinned = true;
		s->ts = !strcmp(s->main_name, FLIT_XDP_PROG_NAME_TS);
	}
	return 0;
}

/* Attached program i is flit's: its pinned program, or the single one
 * that bears flit's name without pins (inspect()). */
static bool is_flit_prog(const struct ifstate *s, int i)
{
	return (s->flit && s->ids[i] == s->pin_prog_id) ||
	       (s->flit_unpinned && s->ids[i] == s->main_id);
}

/* The first attached program that is not flit's, "" if none. */
static const char *other_name(const struct ifstate *s)
{
	for (int i = 0; i < s->nids; i++)
		if (!is_flit_prog(s, i))
			return s->names[i];
	return "";
}

/* ---- why libxdp attached a single program ---------------------------------------- */

/* Can this kernel replace a function of a loaded XDP program (freplace,
 * BPF_PROG_TYPE_EXT)?  libxdp's dispatcher needs it.  Probed by loading the
 * skeleton (maps shrunk to one entry) and then a second copy as an
 * extension of the first: 0 if allowed, else the kernel's -errno.  When the
 * first load fails the question stays open: *unknown is set.  A definite
 * answer is cached. */
static bool freplace_known;  /* freplace_probe() has its answer */

static int freplace_probe(bool *unknown)
{
	static int answer;
	struct flit_xdp *tgt = NULL, *ext = NULL;
	struct bpf_program *tp, *ep;
	struct bpf_map *m;
	int err;

	*unknown = false;
	if (freplace_known)
		return answer;
	*unknown = true;
	tgt = flit_xdp__open();
	ext = flit_xdp__open();
	if (!tgt || !ext) {
		err = -errno;
		goto out;
	}
	bpf_object__for_each_map(m, tgt->obj)
		bpf_map__set_max_entries(m, 1);
	bpf_object__for_each_map(m, ext->obj)
		bpf_map__set_max_entries(m, 1);
	tp = skel_prog(tgt->obj);
	ep = skel_prog(ext->obj);
	if (!tp || !ep) {
		err = -ENOENT;
		goto out;
	}
	err = flit_xdp__load(tgt);
	if (err)
		goto out;
	bpf_program__set_type(ep, BPF_PROG_TYPE_EXT);
	bpf_program__set_expected_attach_type(ep, 0);
	err = bpf_program__set_attach_target(ep, bpf_program__fd(tp),
					     bpf_program__name(tp));
	if (err)
		goto out;
	err = flit_xdp__load(ext);
	*unknown = false;
	freplace_known = true;
	answer = err;
out:
	flit_xdp__destroy(ext);
	flit_xdp__destroy(tgt);
	last_warn[0] = '\0';
	last_warn_first = false;
	flit_vlog_reset(&vlog);
	return err;
}

int flit_xdp_freplace_probe(bool *unknown)
{
	int err;

	quiet_enter();
	err = freplace_probe(unknown);
	quiet_exit();
	return err;
}

/* Why flit's program is attached alone.  probe false: without loading the
 * program twice to ask the kernel about freplace (~25 ms of verification),
 * unless this process already knows the answer: a context attaching or
 * looking needs no reason, flit-loader's status and attach give it. */
static void why_single(const struct ifstate *s, char *buf, size_t len, bool probe)
{
	bool unknown;
	int err;

	if (s->multiprog) {
		buf[0] = '\0';
		return;
	}
	if (s->ts) {
		snprintf(buf, len, "device-bound program (hardware RX stamps in XDP RX "
			 "metadata): attached alone through libbpf, as libxdp (1.3.1) "
			 "cannot load device-bound programs");
		return;
	}
	if (!probe && !freplace_known) {
		snprintf(buf, len, "libxdp attached flit as the only program "
			 "(`flit-loader status %s` says why)", s->ifname);
		return;
	}
	err = freplace_probe(&unknown);
	if (unknown)
		snprintf(buf, len, "libxdp attached flit as the only program "
			 "(whether the kernel allows freplace could not be probed: %s)",
			 strerror(-err));
	else if (err == -EPERM || err == -EACCES)
		snprintf(buf, len, "kernel refused freplace (%s): libxdp attached "
			 "flit as the only program", err == -EPERM ? "EPERM" : "EACCES");
	else if (err)
		snprintf(buf, len, "freplace unavailable (%s): libxdp attached "
			 "flit as the only program", strerror(-err));
	else if (getenv("LIBXDP_SKIP_DISPATCHER"))
		snprintf(buf, len, "LIBXDP_SKIP_DISPATCHER is set: libxdp attached "
			 "flit as the only program");
	else
		snprintf(buf, len, "attached without libxdp's dispatcher (freplace "
			 "works now: re-attach to use it)");
}

/* ---- every pin directory, and the stale ones ------------------------------------- */

struct entry {
	char name[IFNAMSIZ + 21];       /* what parse_entry() accepts */
};

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* The names in the pin root that flit made (pin and staging directories),
 * sorted.  *out NULL and *n 0 when there is no pin root. */
static int list_root(struct entry **out, size_t *n)
{
	struct entry *ents = NULL;
	size_t cap = 0;
	struct dirent *de;
	char ifname[IFNAMSIZ];
	uint64_t alt;
	DIR *d;

	*out = NULL;
	*n = 0;
	if (!is_bpffs(BPFFS_MNT))
		return 0;
	d = opendir(FLIT_XDP_PIN_ROOT);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		return file_err(errno, "reading %s", FLIT_XDP_PIN_ROOT);
	}
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR ||
		    parse_entry(de->d_name, ifname, &alt) == ENTRY_OTHER)
			continue;
		if (*n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			struct entry *e = realloc(ents, nc * sizeof(*ents));

			if (!e) {
				free(ents);
				closedir(d);
				return flit_err(ENOMEM, "reading %s", FLIT_XDP_PIN_ROOT);
			}
			ents = e;
			cap = nc;
		}
		memcpy(ents[(*n)++].name, de->d_name, strlen(de->d_name) + 1);
	}
	closedir(d);
	if (*n)
		qsort(ents, *n, sizeof(*ents), cmp_entry);
	*out = ents;
	return 0;
}

int flit_xdp_pin_dir_each(int (*fn)(void *arg, const struct flit_xdp_pin_dir *d),
			  void *arg)
{
	struct entry *ents;
	struct flit_xdp_pin_dir pd;
	struct dirinfo di;
	char ifname[IFNAMSIZ];
	uint64_t alt, ns;
	size_t n;
	int err, rc = 0;

	quiet_enter();
	err = netns_id(&ns);
	if (!err)
		err = list_root(&ents, &n);
	quiet_exit();
	if (err)
		return err;
	for (size_t i = 0; i < n && !rc; i++) {
		if (parse_entry(ents[i].name, ifname, &alt) != ENTRY_PINS)
			continue;
		memset(&pd, 0, sizeof(pd));
		snprintf(pd.path, sizeof(pd.path), "%s/%s", FLIT_XDP_PIN_ROOT,
			 ents[i].name);
		quiet_enter();
		err = read_dir(pd.path, &di);
		quiet_exit();
		if (err) {
			rc = err;
			break;
		}
		if (!di.exists)
			continue;       /* removed meanwhile */
		snprintf(pd.ifname, sizeof(pd.ifname), "%s", ifname);
		if (di.has_owner) {
			pd.netns = di.owner.netns;
			pd.ifindex = di.owner.ifindex;
		}
		pd.mine = di.has_owner && di.owner.netns == ns;
		pd.gone = di.gone;
		rc = fn(arg, &pd);
	}
	free(ents);
	return rc;
}

/* flit_xdp_gc() with the pin root locked (and quiet). */
static int gc_locked(void (*fn)(void *arg, const char *dir), void *arg)
{
	char path[PATH_MAX], ifname[IFNAMSIZ];
	struct entry *ents;
	struct dirinfo di;
	uint64_t alt;
	size_t n;
	int err, removed = 0;

	err = list_root(&ents, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		int kind = parse_entry(ents[i].name, ifname, &alt);

		snprintf(path, sizeof(path), "%s/%s", FLIT_XDP_PIN_ROOT, ents[i].name);
		if (kind == ENTRY_STAGING) {
			/* an attach that did not finish (the lock is ours) */
			flit_info("%s: removing the staging directory of an attach "
				  "that did not finish", path);
		} else {
			err = read_dir(path, &di);
			if (err)
				break;
			if (!di.exists)
				continue;
			if (!di.has_owner) {
				/* no owner: a crash between mkdir and the first
				 * pin, or removing.  Only if empty: pins without
				 * an owner may be an older flit's, alive */
				if (rmdir(path) == 0) {
					removed++;
					if (fn)
						fn(arg, path);
				}
				continue;
			}
			if (!di.gone)
				continue;
			flit_info("%s: removing the pins of %s (ifindex %u, network "
				  "namespace %llu): the interface no longer exists",
				  path, ifname, di.owner.ifindex,
				  (unsigned long long)di.owner.netns);
		}
		err = remove_dir(path);
		if (err)
			break;
		removed++;
		if (fn)
			fn(arg, path);
	}
	free(ents);
	return err ? err : removed;
}

int flit_xdp_gc(void (*fn)(void *arg, const char *dir), void *arg)
{
	int lock, rc;

	quiet_enter();
	if (!is_bpffs(BPFFS_MNT)) {
		quiet_exit();
		return 0;
	}
	lock = pin_root_lock();
	if (lock < 0) {
		quiet_exit();
		return lock;
	}
	rc = gc_locked(fn, arg);
	pin_root_unlock(lock);
	quiet_exit();
	return rc;
}

/* ---- attach ------------------------------------------------------------------------- */

/* The owner map (namespace cookie, ifindex) and the ifref DEVMAP (the
 * interface itself, resolved in this thread's namespace), and the version. */
static int make_owner_maps(struct flit_xdp *skel, const struct ifstate *s,
			   int *owner_fd, int *ifref_fd)
{
	struct flit_xdp_owner own = { .netns = s->ns, .ifindex = s->ifindex };
	uint32_t key = 0, ver = FLIT_XDP_VERSION, ifindex = s->ifindex;
	int fd;

	if (bpf_map_update_elem(bpf_map__fd(skel->maps.version), &key, &ver, BPF_ANY) < 0)
		return sys_err(errno, "writing the version map");
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "flit_owner", sizeof(key),
			    sizeof(own), 1, NULL);
	if (fd < 0)
		return sys_err(errno, "creating the owner map");
	*owner_fd = fd;
	if (bpf_map_update_elem(fd, &key, &own, BPF_ANY) < 0)
		return sys_err(errno, "writing the owner map");
	fd = bpf_map_create(BPF_MAP_TYPE_DEVMAP, "flit_ifref", sizeof(key),
			    sizeof(ifindex), 1, NULL);
	if (fd < 0)
		return sys_err(errno, "creating the ifref map (DEVMAP)");
	*ifref_fd = fd;
	if (bpf_map_update_elem(fd, &key, &ifindex, BPF_ANY) < 0)
		return sys_err(errno, "putting %s (ifindex %u) in the ifref map",
			       s->ifname, s->ifindex);
	return 0;
}

/* Pin everything into staging, then rename it to dir: readers see the
 * directory complete or not at all. */
static int pin_all(const char *dir, const char *staging, struct flit_xdp *skel,
		   int prog_fd, int owner_fd, int ifref_fd)
{
	char path[PATH_MAX];
	int fds[PIN_N];

	fds[PIN_OWNER] = owner_fd;
	fds[PIN_IFREF] = ifref_fd;
	fds[PIN_PROG] = prog_fd;
	fds[PIN_FLOWS] = bpf_map__fd(skel->maps.flows);
	fds[PIN_XSKS] = bpf_map__fd(skel->maps.xsks);
	fds[PIN_SESSIONS] = bpf_map__fd(skel->maps.sessions);
	fds[PIN_TOPICS] = bpf_map__fd(skel->maps.topics);
	fds[PIN_FILTERED] = bpf_map__fd(skel->maps.filtered);
	fds[PIN_COUNTERS] = bpf_map__fd(skel->maps.counters);
	fds[PIN_VERSION] = bpf_map__fd(skel->maps.version);

	if (mkdir(staging, 0700) < 0)
		return file_err(errno, "mkdir %s", staging);
	for (int i = 0; i < PIN_N; i++) {
		pin_path(path, sizeof(path), staging, i);
		if (bpf_obj_pin(fds[i], path) < 0)
			return sys_err(errno, "pinning %s", path);
	}
	if (rename(staging, dir) < 0)
		return file_err(errno, "renaming %s to %s", staging, dir);
	return 0;
}

static int detach_id(const char *ifname, const struct ifstate *s, uint32_t id);

/* Detach flit's pinned program and remove its pins (detach). */
static int detach_pinned(const char *ifname, const struct ifstate *s)
{
	int err = detach_id(ifname, s, s->pin_prog_id);

	return err ? err : remove_dir(s->dir);
}

/* ... then look again, for a program to replace it (attach). */
static int detach_pinned_reinspect(const char *ifname, struct ifstate *s)
{
	int err = detach_pinned(ifname, s);

	return err ? err : inspect(ifname, s);
}

/* Load flit_xdp_ts alone from skel, device-bound to ifindex.  A refusal
 * says which of its needs is missing, each tried (xdp_features.h): the
 * RX-metadata kfunc and device-bound programs (Linux 6.3), a driver with
 * XDP; else the verifier's reason. */
static int load_ts(struct flit_xdp *skel, const char *ifname, unsigned ifindex)
{
	struct bpf_program *p = skel->progs.flit_xdp_ts;
	struct flit_feat kf, db;
	char w[WARN_SUFFIX_MAX];
	int err;

	bpf_program__set_autoload(skel->progs.flit_xdp_steer, false);
	bpf_program__set_autoload(p, true);
	bpf_program__set_ifindex(p, ifindex);
	err = bpf_program__set_flags(p, bpf_program__flags(p) | BPF_F_XDP_DEV_BOUND_ONLY);
	if (!err)
		err = flit_xdp__load(skel);
	if (!err)
		return 0;
	err = -err;
	warn_suffix(w, sizeof(w));
	if (err == EPERM)
		return flit_err(EPERM, "load flit's RX-metadata program for %s%s: " CAPS_MSG,
				ifname, w);
	flit_xdp_probe_rx_meta(&kf);
	if (kf.state == FLIT_FEAT_NO)
		return flit_err(EOPNOTSUPP, "load flit's RX-metadata program for %s: %s",
				ifname, kf.how);
	flit_xdp_probe_dev_bound(ifname, &db);
	if (db.state == FLIT_FEAT_NO)
		return flit_err(EOPNOTSUPP, "load flit's RX-metadata program for %s: %s",
				ifname, db.how);
	return flit_err(err, "load flit's RX-metadata program (%s, device-bound to %s)%s",
			FLIT_XDP_PROG_NAME_TS, ifname, w);
}

/* Attach flit_xdp_ts through libbpf: native mode, only if nothing is
 * attached (libxdp's dispatcher cannot take a device-bound program). */
static int attach_ts(const char *ifname, unsigned ifindex, int prog_fd)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, o);
	char w[WARN_SUFFIX_MAX];
	int err = bpf_xdp_attach((int)ifindex, prog_fd,
				 XDP_FLAGS_DRV_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST, &o);

	if (!err)
		return 0;
	err = -err;
	warn_suffix(w, sizeof(w));
	if (err == EPERM)
		return flit_err(EPERM, "attach flit's RX-metadata program to %s (native "
				"mode)%s: " CAPS_MSG, ifname, w);
	if (err == EBUSY || err == EEXIST)
		return flit_err(EBUSY, "attach flit's RX-metadata program to %s: another "
				"XDP program was attached meanwhile%s", ifname, w);
	if (err == EOPNOTSUPP)
		return flit_err(err, "attach flit's RX-metadata program to %s: the driver "
				"has no native XDP%s (hardware RX stamps need it)", ifname, w);
	return flit_err(err, "attach flit's RX-metadata program to %s (native mode)%s",
			ifname, w);
}

static void detach_fd(unsigned ifindex, int prog_fd)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = prog_fd);

	bpf_xdp_detach((int)ifindex, XDP_FLAGS_DRV_MODE | XDP_FLAGS_REPLACE, &o);
}

static uint32_t prog_id_of(int fd)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

static int do_attach(const char *ifname, enum flit_xdp_mode mode,
		     enum flit_xdp_mode *mode_out, unsigned flags)
{
	char drv[64], why[300], staging[PATH_MAX], enc[IFNAMSIZ];
	struct flit_xdp *skel = NULL;
	struct xdp_program *xp = NULL;
	struct ifstate s;
	unsigned ifindex;
	int lock = -1, owner_fd = -1, ifref_fd = -1, prog_fd = -1, err, n;
	bool attached = false;
	const bool force = flags & FLIT_XDP_ATTACH_FORCE;
	const bool rx_ts = flags & FLIT_XDP_ATTACH_RX_TS;

	err = check_ifname(ifname);
	if (err)
		return err;
	if (mode != FLIT_XDP_MODE_AUTO && mode != FLIT_XDP_MODE_NATIVE &&
	    mode != FLIT_XDP_MODE_SKB)
		return flit_err(EINVAL, "attach to %s: bad XDP mode %d", ifname, (int)mode);
	if (flags & ~(FLIT_XDP_ATTACH_FORCE | FLIT_XDP_ATTACH_RX_TS))
		return flit_err(EINVAL, "attach to %s: unknown flags 0x%x", ifname, flags);
	if (rx_ts && mode == FLIT_XDP_MODE_SKB)
		return flit_err(EINVAL, "attach to %s: hardware RX stamps need native mode: "
				"the RX-metadata program is device-bound, and the kernel runs "
				"device-bound programs in native (driver) mode only, not in "
				"skb (generic) mode", ifname);
	err = ifindex_of(ifname, &ifindex);
	if (err)
		return err;
	encode_ifname(enc, ifname);
	snprintf(staging, sizeof(staging), "%s/%s@new%d", FLIT_XDP_PIN_ROOT, enc,
		 (int)getpid());

	quiet_enter();
	err = flit_xdp_bpffs_ensure();
	if (err)
		goto out;
	lock = pin_root_lock();
	if (lock < 0) {
		err = lock;
		goto out;
	}
	/* pins of interfaces that no longer exist (namespaces deleted
	 * without detaching) go first: they may hold the canonical name */
	n = gc_locked(NULL, NULL);
	if (n < 0)
		flit_debug("attach to %s: removing stale pin directories: %s",
			   ifname, flit_errmsg());
	err = inspect(ifname, &s);
	if (err)
		goto out;

	if (s.flit && s.pin_version == FLIT_XDP_VERSION && rx_ts && !s.ts) {
		if (!force) {
			err = flit_err(EEXIST, "attach to %s: flit's program is attached "
				       "without hardware RX stamps (%s, %s mode); detach it "
				       "first, or force the attach (flit-loader attach "
				       "--rx-timestamps --force)", ifname, s.main_name,
				       flit_xdp_mode_str(s.mode));
			goto out;
		}
		flit_info("%s: replacing flit's program (id %u) by the one with hardware "
			  "RX stamps", ifname, s.pin_prog_id);
		err = detach_pinned_reinspect(ifname, &s);
		if (err)
			goto out;
	}
	if (s.flit) {
		if (s.pin_version == FLIT_XDP_VERSION) {
			if (mode_out)
				*mode_out = s.mode;     /* already there */
			err = 0;
			goto out;
		}
		if (!force) {
			err = flit_err(EPROTO, "attach to %s: flit XDP version %u is "
				       "attached and pinned at %s, this is version %u; "
				       "detach it first, or force the attach "
				       "(flit-loader attach --force)", ifname, s.pin_version,
				       s.dir, FLIT_XDP_VERSION);
			goto out;
		}
		flit_warn("%s: replacing flit XDP version %u (program id %u) by "
			  "version %u", ifname, s.pin_version, s.pin_prog_id,
			  FLIT_XDP_VERSION);
		err = detach_pinned_reinspect(ifname, &s);
		if (err)
			goto out;
	} else if (s.pinned) {
		/* flit's program is not attached here: stale pins of this
		 * namespace (a crash, `ip link set dev X xdp off`) */
		flit_info("%s: flit's program (id %u) is no longer attached to %s: "
			  "removing its stale pins", s.dir, s.pin_prog_id, ifname);
		err = remove_dir(s.dir);
		if (!err)
			err = inspect(ifname, &s);
		if (err)
			goto out;
	}
	if (s.dir_taken) {
		err = flit_err(EBUSY, "attach to %s: both %s and %s hold the pins of "
			       "other live interfaces named %s (renamed since they "
			       "were attached?); detach them first", ifname, s.canon,
			       s.dir, ifname);
		goto out;
	}
	if (s.canon_junk && !strcmp(s.dir, s.canon)) {
		/* no one's (no owner pin, or gc could not remove it) */
		flit_info("%s: removing pins that belong to no live interface",
			  s.canon);
		err = remove_dir(s.canon);
		if (err)
			goto out;
	}

	if (s.attached && !s.multiprog) {
		if (s.flit_unpinned)
			err = flit_err(EBUSY, "attach to %s: flit's program %s (id %u) "
				       "is attached without pins at %s (pinned in "
				       "another mount namespace, or pins removed); "
				       "detach it first", ifname, s.main_name,
				       s.main_id, s.dir);
		else
			err = flit_err(EBUSY, "attach to %s: another XDP program is "
				       "attached: %s (id %u, %s mode), and the kernel "
				       "runs one program per interface without libxdp's "
				       "dispatcher; detach it first", ifname,
				       s.main_name[0] ? s.main_name : "?", s.main_id,
				       flit_xdp_mode_str(s.mode));
		goto out;
	}

	if (rx_ts && s.attached) {
		err = flit_err(EBUSY, "attach to %s: hardware RX stamps need flit's "
			       "device-bound program alone on the interface, and libxdp's "
			       "dispatcher is attached (with %s); detach it first", ifname,
			       other_name(&s)[0] ? other_name(&s) : "other programs");
		goto out;
	}
	if (rx_ts) {
		mode = FLIT_XDP_MODE_NATIVE;    /* device-bound: native only */
	} else if (mode == FLIT_XDP_MODE_AUTO) {
		if (s.attached) {
			mode = s.mode;  /* join the dispatcher in its mode */
		} else {
			err = driver_of(ifname, drv, sizeof(drv));
			if (err)
				goto out;
			/* generic XDP is faster than native on veth */
			mode = !strcmp(drv, "veth") ? FLIT_XDP_MODE_SKB
						    : FLIT_XDP_MODE_NATIVE;
		}
	}

	skel = flit_xdp__open();
	if (!skel) {
		err = sys_err(errno, "opening flit's XDP program (embedded skeleton)");
		goto out;
	}
	if (rx_ts) {
		err = load_ts(skel, ifname, ifindex);
		if (err)
			goto out;
		err = attach_ts(ifname, ifindex, bpf_program__fd(skel->progs.flit_xdp_ts));
		if (err)
			goto out;
		prog_fd = bpf_program__fd(skel->progs.flit_xdp_ts);
		attached = true;
		goto pin;
	}
	DECLARE_LIBXDP_OPTS(xdp_program_opts, xo, .obj = skel->obj,
			    .prog_name = FLIT_XDP_PROG_NAME);
	xp = xdp_program__create(&xo);
	err = (int)libxdp_get_error(xp);
	if (err) {
		xp = NULL;
		err = flit_err(-err, "flit's XDP object has no program %s", FLIT_XDP_PROG_NAME);
		goto out;
	}
	err = xdp_program__attach(xp, (int)ifindex, to_libxdp_mode(mode), 0);
	if (err) {
		char w[WARN_SUFFIX_MAX];

		err = -err;
		warn_suffix(w, sizeof(w));
		if (err == EPERM)
			err = flit_err(EPERM, "attach flit to %s (%s mode)%s: " CAPS_MSG,
				       ifname, flit_xdp_mode_str(mode), w);
		else if (err == EOPNOTSUPP && mode == FLIT_XDP_MODE_NATIVE)
			err = flit_err(err, "attach flit to %s: the driver has no native "
				       "XDP%s (use skb mode)", ifname, w);
		else
			err = flit_err(err, "attach flit to %s (%s mode)%s", ifname,
				       flit_xdp_mode_str(mode), w);
		goto out;
	}
	attached = true;
	prog_fd = xdp_program__fd(xp);
pin:
	err = make_owner_maps(skel, &s, &owner_fd, &ifref_fd);
	if (!err)
		err = pin_all(s.dir, staging, skel, prog_fd, owner_fd, ifref_fd);
	if (err)
		goto out;

	err = inspect(ifname, &s);
	if (!err && !s.flit)
		err = flit_err(EAGAIN, "attach to %s: flit's program is not attached "
			       "after attaching it (replaced meanwhile?)", ifname);
	if (err)
		goto out;
	why_single(&s, why, sizeof(why), false);
	if (why[0])
		flit_info("%s: %s", ifname, why);
	flit_info("%s: pins in %s", ifname, s.dir);
	if (mode_out)
		*mode_out = s.mode;
out:
	if (err && attached) {
		int e = 0;
		if (xp)
			e = xdp_program__detach(xp, (int)ifindex, to_libxdp_mode(mode), 0);
		else
			detach_fd(ifindex, prog_fd);
		if (e)
			flit_warn("attach to %s failed, and detaching again too: %s",
				  ifname, strerror(-e));
		remove_dir(staging);
		/* s.dir is ours only if the rename made it */
		if (s.pinned && s.pin_prog_id == prog_id_of(prog_fd))
			remove_dir(s.dir);
	}
	if (owner_fd >= 0)
		close(owner_fd);
	if (ifref_fd >= 0)
		close(ifref_fd);
	if (xp)
		xdp_program__close(xp);
	flit_xdp__destroy(skel);
	pin_root_unlock(lock);
	quiet_exit();
	return err;
}

int flit_xdp_attach(const char *ifname, enum flit_xdp_mode mode,
		    enum flit_xdp_mode *mode_out)
{
	return do_attach(ifname, mode, mode_out, 0);
}

int flit_xdp_attach_force(const char *ifname, enum flit_xdp_mode mode,
			  enum flit_xdp_mode *mode_out)
{
	return do_attach(ifname, mode, mode_out, FLIT_XDP_ATTACH_FORCE);
}

int flit_xdp_attach_flags(const char *ifname, enum flit_xdp_mode mode,
			  unsigned flags, enum flit_xdp_mode *mode_out)
{
	return do_attach(ifname, mode, mode_out, flags);
}

/* ---- detach ------------------------------------------------------------------------ */

/* Detach program `id` from the interface: through libxdp (which knows the
 * dispatcher), else, for a single program, by netlink, and only if it is
 * still that program (XDP_FLAGS_REPLACE with its fd). */
static int detach_id(const char *ifname, const struct ifstate *s, uint32_t id)
{
	int err;

	if (s->multiprog) {
		struct xdp_program *p = xdp_program__from_id(id);

		err = (int)libxdp_get_error(p);
		if (!err) {
			err = xdp_program__detach(p, (int)s->ifindex,
						  to_libxdp_mode(s->mode), 0);
			xdp_program__close(p);
		}
	} else {
		LIBBPF_OPTS(bpf_xdp_attach_opts, o);
		__u32 flags = XDP_FLAGS_REPLACE | (s->mode == FLIT_XDP_MODE_SKB ?
			XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE);
		int fd = bpf_prog_get_fd_by_id(id);

		if (fd < 0)
			return sys_err(errno, "detach from %s: program id %u", ifname, id);
		o.old_prog_fd = fd;
		err = bpf_xdp_detach((int)s->ifindex, flags, &o);
		close(fd);
	}
	if (err)
		return sys_err(-err, "detach flit's program (id %u) from %s", id, ifname);
	return 0;
}

int flit_xdp_detach(const char *ifname)
{
	struct ifstate s;
	int lock = -1, err;

	err = check_ifname(ifname);
	if (err)
		return err;
	quiet_enter();
	if (!is_bpffs(BPFFS_MNT)) {
		/* nothing pinned; maybe a program attached with its pins in a
		 * bpffs we cannot see */
		err = inspect(ifname, &s);
		if (!err && s.flit_unpinned)
			err = detach_id(ifname, &s, s.main_id);
		else if (!err)
			err = flit_err(ENOENT, "flit is not attached to %s (no bpffs "
				       "on %s, so no pins)", ifname, BPFFS_MNT);
		goto out;
	}
	lock = pin_root_lock();
	if (lock < 0) {
		err = lock;
		goto out;
	}
	err = inspect(ifname, &s);
	if (err)
		goto out;
	if (s.flit) {
		err = detach_pinned(ifname, &s);
	} else if (s.flit_unpinned) {
		/* flit's program without its pins here: detach it, and this
		 * namespace's stale pins if any */
		err = detach_id(ifname, &s, s.main_id);
		if (!err && s.pinned)
			err = remove_dir(s.dir);
	} else if (s.pinned) {
		flit_info("%s: flit's program was no longer attached to %s: removed "
			  "its stale pins", s.dir, ifname);
		err = remove_dir(s.dir);
	} else if (!s.ifindex) {
		err = flit_err(ENODEV, "no interface %s in this network namespace",
			       ifname);
	} else if (s.foreign) {
		err = flit_err(ENOENT, "flit is not attached to %s in this network "
			       "namespace (no pins at %s; those at %s are of %s in "
			       "another one)", ifname, s.dir, s.canon, ifname);
	} else {
		err = flit_err(ENOENT, "flit is not attached to %s (no pins at %s)",
			       ifname, s.dir);
	}
out:
	pin_root_unlock(lock);
	quiet_exit();
	return err;
}

/* ---- status ------------------------------------------------------------------------ */

static int status(const char *ifname, struct flit_xdp_status *st, bool probe)
{
	struct ifstate s;
	int err;

	memset(st, 0, sizeof(*st));
	err = check_ifname(ifname);
	if (err)
		return err;
	quiet_enter();
	err = inspect(ifname, &s);
	if (err)
		goto out;
	if (!s.ifindex && !s.pinned) {
		err = flit_err(ENODEV, "no interface %s in this network namespace",
			       ifname);
		goto out;
	}
	snprintf(st->pin_dir, sizeof(st->pin_dir), "%s", s.dir);
	st->attached = s.attached;
	st->flit = s.flit;
	st->pinned = s.pinned;
	st->foreign = s.foreign;
	st->mode = s.attached ? s.mode : FLIT_XDP_MODE_AUTO;
	st->multiprog = s.multiprog;
	st->rx_timestamps = (s.flit || s.flit_unpinned) && s.ts;
	st->prog_id = s.flit ? s.pin_prog_id : s.flit_unpinned ? s.main_id : 0;
	st->version = s.pinned ? s.pin_version : 0;
	snprintf(st->other, sizeof(st->other), "%s", other_name(&s));
	if ((s.flit || s.flit_unpinned) && !s.multiprog)
		why_single(&s, st->why_single, sizeof(st->why_single), probe);
	for (int i = 0; s.attached && i < s.nids && st->nprogs < 10; i++) {
		struct flit_xdp_prog_slot *ps = &st->progs[st->nprogs++];

		snprintf(ps->name, sizeof(ps->name), "%s", s.names[i]);
		ps->id = s.ids[i];
		ps->prio = s.multiprog ? s.prio[i] : 0;
		ps->chain_actions = s.multiprog ? s.chain[i] : 0;
		ps->flit = is_flit_prog(&s, i);
	}
out:
	quiet_exit();
	return err;
}

int flit_xdp_status(const char *ifname, struct flit_xdp_status *st)
{
	return status(ifname, st, true);
}

int flit_xdp_status_quick(const char *ifname, struct flit_xdp_status *st)
{
	return status(ifname, st, false);
}

/* ---- the pinned maps ------------------------------------------------------------------ */

void flit_xdp_maps_close(struct flit_xdp_maps *m)
{
	int *fds[] = { &m->flows, &m->xsks, &m->sessions, &m->topics,
		       &m->filtered, &m->counters, &m->version };

	if (!m)
		return;
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

int flit_xdp_maps_open(const char *ifname, struct flit_xdp_maps *m)
{
	static const int which[] = { PIN_FLOWS, PIN_XSKS, PIN_SESSIONS, PIN_TOPICS,
				     PIN_FILTERED, PIN_COUNTERS, PIN_VERSION };
	int *fds[] = { &m->flows, &m->xsks, &m->sessions, &m->topics,
		       &m->filtered, &m->counters, &m->version };
	char path[PATH_MAX];
	struct ifstate s;
	int err;

	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		*fds[i] = -1;
	err = check_ifname(ifname);
	if (err)
		return err;
	snprintf(m->ifname, sizeof(m->ifname), "%s", ifname);

	quiet_enter();
	err = ifindex_of(ifname, &m->ifindex);
	if (!err)
		err = inspect(ifname, &s);
	if (err)
		goto out;
	snprintf(m->pin_dir, sizeof(m->pin_dir), "%s", s.dir);
	if (!s.pinned) {
		err = flit_err(ENOENT, "flit is not attached to %s%s (no pins at %s%s%s%s)",
			       ifname, s.foreign ? " in this network namespace" : "",
			       s.dir, s.foreign ? "; those at " : "",
			       s.foreign ? s.canon : "",
			       !is_bpffs(BPFFS_MNT) ? "; no bpffs mounted here" :
			       s.foreign ? " are of another one" : "");
		goto out;
	}
	if (s.pin_version != FLIT_XDP_VERSION) {
		err = flit_err(EPROTO, "the pins at %s are flit XDP version %u, this is "
			       "version %u", s.dir, s.pin_version, FLIT_XDP_VERSION);
		goto out;
	}
	if (!s.flit) {
		err = flit_err(ENOENT, "flit's program is no longer attached to %s "
			       "(stale pins at %s: attach again)", ifname, s.dir);
		goto out;
	}
	for (size_t i = 0; i < sizeof(which) / sizeof(which[0]); i++) {
		pin_path(path, sizeof(path), s.dir, which[i]);
		*fds[i] = bpf_obj_get(path);
		if (*fds[i] < 0) {
			err = sys_err(errno, "opening pinned map %s", path);
			goto out;
		}
	}
out:
	if (err)
		flit_xdp_maps_close(m);
	quiet_exit();
	return err;
}

/* ---- flows --------------------------------------------------------------------------- */

static int map_err(const struct flit_xdp_maps *m, const char *map, const char *what)
{
	return sys_err(errno, "%s: %s in map %s", m->ifname, what, map);
}

int flit_xdp_flow_add(const struct flit_xdp_maps *m, uint32_t daddr,
		      uint16_t dport, uint32_t slot_base)
{
	struct flit_xdp_flow_key k = { .daddr = daddr, .dport = dport };
	struct flit_xdp_flow v = { .slot_base = slot_base };

	if (slot_base >= FLIT_XDP_XSKS_MAX)
		return flit_err(EINVAL, "%s: flow slot %u out of range (0..%u)",
				m->ifname, slot_base, FLIT_XDP_XSKS_MAX - 1);
	if (bpf_map_update_elem(m->flows, &k, &v, BPF_ANY) < 0) {
		if (errno == E2BIG)
			return flit_err(E2BIG, "%s: flows table full (%u flows)",
					m->ifname, FLIT_XDP_FLOWS_MAX);
		return map_err(m, "flows", "adding a flow");
	}
	return 0;
}

int flit_xdp_flow_del(const struct flit_xdp_maps *m, uint32_t daddr,
		      uint16_t dport)
{
	struct flit_xdp_flow_key k = { .daddr = daddr, .dport = dport };

	if (bpf_map_delete_elem(m->flows, &k) < 0) {
		if (errno == ENOENT) {
			char a[INET_ADDRSTRLEN];
			const unsigned char *b = (const unsigned char *)&daddr;

			snprintf(a, sizeof(a), "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
			return flit_err(ENOENT, "%s: no flow %s:%u", m->ifname, a,
					(unsigned)ntohs(dport));
		}
		return map_err(m, "flows", "deleting a flow");
	}
	return 0;
}

struct flow_ent {
	struct flit_xdp_flow_key k;
	struct flit_xdp_flow v;
};

static int cmp_flow(const void *a, const void *b)
{
	const struct flow_ent *x = a, *y = b;
	uint32_t xa = ntohl(x->k.daddr), ya = ntohl(y->k.daddr);
	uint16_t xp = ntohs(x->k.dport), yp = ntohs(y->k.dport);

	if (xa != ya)
		return xa < ya ? -1 : 1;
	return xp < yp ? -1 : xp > yp;
}

int flit_xdp_flow_each(const struct flit_xdp_maps *m,
		       int (*fn)(void *arg, const struct flit_xdp_flow_key *k,
				 const struct flit_xdp_flow *v),
		       void *arg)
{
	struct flit_xdp_flow_key k, next;
	struct flow_ent *ents;
	size_t n = 0, cap = 64;
	int err, rc = 0;

	ents = malloc(cap * sizeof(*ents));
	if (!ents)
		return flit_err(ENOMEM, "%s: listing flows", m->ifname);
	/* copy first: fn may change the map, and get_next_key restarts from
	 * the beginning when the current key is deleted */
	for (err = bpf_map_get_next_key(m->flows, NULL, &next); !err;
	     err = bpf_map_get_next_key(m->flows, &k, &next)) {
		k = next;
		if (n == cap) {
			struct flow_ent *e = realloc(ents, 2 * cap * sizeof(*ents));
			if (!e) {
				free(ents);
				return flit_err(ENOMEM, "%s: listing flows", m->ifname);
			}
			ents = e;
			cap *= 2;
		}
		if (bpf_map_lookup_elem(m->flows, &k, &ents[n].v) < 0) {
			if (errno == ENOENT)
				continue;       /* deleted meanwhile */
			rc = map_err(m, "flows", "reading a flow");
			goto out;
		}
		ents[n++].k = k;
	}
	if (errno != ENOENT) {
		rc = map_err(m, "flows", "listing flows");
		goto out;
	}
	qsort(ents, n, sizeof(*ents), cmp_flow);
	for (size_t i = 0; i < n && !rc; i++)
		rc = fn(arg, &ents[i].k, &ents[i].v);
out:
	free(ents);
	return rc;
}

/* ---- AF_XDP sockets ------------------------------------------------------------------- */

int flit_xdp_xsk_set(const struct flit_xdp_maps *m, uint32_t slot, int xsk_fd)
{
	if (slot >= FLIT_XDP_XSKS_MAX)
		return flit_err(EINVAL, "%s: xsk slot %u out of range (0..%u)",
				m->ifname, slot, FLIT_XDP_XSKS_MAX - 1);
	if (bpf_map_update_elem(m->xsks, &slot, &xsk_fd, BPF_ANY) < 0)
		return sys_err(errno, "%s: putting AF_XDP socket fd %d in xsks[%u]",
			       m->ifname, xsk_fd, slot);
	return 0;
}

int flit_xdp_xsk_clear(const struct flit_xdp_maps *m, uint32_t slot)
{
	if (slot >= FLIT_XDP_XSKS_MAX)
		return flit_err(EINVAL, "%s: xsk slot %u out of range (0..%u)",
				m->ifname, slot, FLIT_XDP_XSKS_MAX - 1);
	if (bpf_map_delete_elem(m->xsks, &slot) < 0 && errno != ENOENT)
		return sys_err(errno, "%s: clearing xsks[%u]", m->ifname, slot);
	return 0;
}

/* ---- sessions and topics ---------------------------------------------------------------- */

int flit_xdp_session_set(const struct flit_xdp_maps *m, uint32_t session,
			 uint32_t flags, uint32_t named, uint32_t gen)
{
	struct flit_xdp_session v = { .flags = flags, .named = named, .gen = gen };

	if (flags & ~FLIT_XDP_SESS_KNOWN)
		return flit_err(EINVAL, "%s: session 0x%08x: unknown flags 0x%x",
				m->ifname, session, flags);
	if (bpf_map_update_elem(m->sessions, &session, &v, BPF_ANY) < 0) {
		if (errno == E2BIG)
			return flit_err(E2BIG, "%s: sessions table full (%u sessions)",
					m->ifname, FLIT_XDP_SESSIONS_MAX);
		return map_err(m, "sessions", "setting a session");
	}
	return 0;
}

/* Keys of topics, all of them (or those of one session). */
static int topic_keys(const struct flit_xdp_maps *m, bool one, uint32_t session,
		      struct flit_xdp_topic_key **out, size_t *nout)
{
	struct flit_xdp_topic_key k, next, *keys = NULL;
	size_t n = 0, cap = 0;
	int err;

	for (err = bpf_map_get_next_key(m->topics, NULL, &next); !err;
	     err = bpf_map_get_next_key(m->topics, &k, &next)) {
		k = next;
		if (one && k.session != session)
			continue;
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			struct flit_xdp_topic_key *e = realloc(keys, nc * sizeof(*keys));
			if (!e) {
				free(keys);
				return flit_err(ENOMEM, "%s: listing topics", m->ifname);
			}
			keys = e;
			cap = nc;
		}
		keys[n++] = k;
	}
	if (errno != ENOENT) {
		free(keys);
		return map_err(m, "topics", "listing topics");
	}
	*out = keys;
	*nout = n;
	return 0;
}

int flit_xdp_session_del(const struct flit_xdp_maps *m, uint32_t session)
{
	struct flit_xdp_topic_key *keys;
	size_t n;
	bool found = false;
	int err;

	if (bpf_map_delete_elem(m->sessions, &session) == 0)
		found = true;
	else if (errno != ENOENT)
		return map_err(m, "sessions", "deleting a session");
	err = topic_keys(m, true, session, &keys, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		if (bpf_map_delete_elem(m->topics, &keys[i]) < 0 && errno != ENOENT) {
			err = map_err(m, "topics", "deleting a topic");
			break;
		}
		found = true;
	}
	free(keys);
	if (!err && !found)
		err = flit_err(ENOENT, "%s: no session 0x%08x", m->ifname, session);
	return err;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int flit_xdp_sessions_del(const struct flit_xdp_maps *m, const uint32_t *sessions, size_t n)
{
	struct flit_xdp_topic_key *keys;
	uint32_t *sorted;
	size_t nk;
	int err = 0;

	if (!n)
		return 0;
	sorted = malloc(n * sizeof(*sorted));
	if (!sorted)
		return flit_err(ENOMEM, "%s: deleting sessions", m->ifname);
	memcpy(sorted, sessions, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_u32);
	for (size_t i = 0; i < n; i++)
		if (bpf_map_delete_elem(m->sessions, &sorted[i]) < 0 && errno != ENOENT && !err)
			err = map_err(m, "sessions", "deleting a session");
	/* their topics, in one pass over the table */
	int e = topic_keys(m, false, 0, &keys, &nk);
	if (e) {
		free(sorted);
		return err ? err : e;
	}
	for (size_t i = 0; i < nk; i++)
		if (bsearch(&keys[i].session, sorted, n, sizeof(*sorted), cmp_u32) &&
		    bpf_map_delete_elem(m->topics, &keys[i]) < 0 && errno != ENOENT && !err)
			err = map_err(m, "topics", "deleting a topic");
	free(keys);
	free(sorted);
	return err;
}

int flit_xdp_topic_set(const struct flit_xdp_maps *m, uint32_t session,
		       uint32_t topic, bool wanted)
{
	struct flit_xdp_topic_key k = { .session = session, .topic = topic };
	uint32_t one = 1;

	if (wanted) {
		if (bpf_map_update_elem(m->topics, &k, &one, BPF_ANY) < 0) {
			if (errno == E2BIG)
				return flit_err(E2BIG, "%s: topics table full (%u topics)",
						m->ifname, FLIT_XDP_TOPICS_MAX);
			return map_err(m, "topics", "adding a topic");
		}
	} else if (bpf_map_delete_elem(m->topics, &k) < 0 && errno != ENOENT) {
		return map_err(m, "topics", "deleting a topic");
	}
	return 0;
}

struct topic_ent {
	uint32_t session, topic, flags;
};

static int cmp_topic(const void *a, const void *b)
{
	const struct topic_ent *x = a, *y = b;

	if (x->session != y->session)
		return x->session < y->session ? -1 : 1;
	return x->topic < y->topic ? -1 : x->topic > y->topic;
}

int flit_xdp_topic_each(const struct flit_xdp_maps *m,
			int (*fn)(void *arg, uint32_t session, uint32_t topic,
				  uint32_t sess_flags),
			void *arg)
{
	struct flit_xdp_topic_key *keys = NULL;
	struct topic_ent *ents = NULL;
	uint32_t s, next;
	size_t n, ne = 0, cap;
	int err, rc = 0;

	err = topic_keys(m, false, 0, &keys, &n);
	if (err)
		return err;
	cap = n + 64;
	ents = malloc(cap * sizeof(*ents));
	if (!ents) {
		rc = flit_err(ENOMEM, "%s: listing topics", m->ifname);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct flit_xdp_session f = { 0 };
		uint32_t v;

		if (bpf_map_lookup_elem(m->topics, &keys[i], &v) < 0 || !v)
			continue;       /* gone meanwhile, or not wanted */
		if (bpf_map_lookup_elem(m->sessions, &keys[i].session, &f) < 0)
			f.flags = 0;
		ents[ne++] = (struct topic_ent){ keys[i].session, keys[i].topic, f.flags };
	}
	/* sessions without a wanted topic: once, topic UINT32_MAX */
	for (err = bpf_map_get_next_key(m->sessions, NULL, &next); !err;
	     err = bpf_map_get_next_key(m->sessions, &s, &next)) {
		struct flit_xdp_session f;
		bool has = false;

		s = next;
		for (size_t i = 0; i < ne && !has; i++)
			has = ents[i].session == s;
		if (has || bpf_map_lookup_elem(m->sessions, &s, &f) < 0)
			continue;
		if (ne == cap) {
			struct topic_ent *e = realloc(ents, 2 * cap * sizeof(*ents));
			if (!e) {
				rc = flit_err(ENOMEM, "%s: listing topics", m->ifname);
				goto out;
			}
			ents = e;
			cap *= 2;
		}
		ents[ne++] = (struct topic_ent){ s, UINT32_MAX, f.flags };
	}
	if (errno != ENOENT) {
		rc = map_err(m, "sessions", "listing sessions");
		goto out;
	}
	qsort(ents, ne, sizeof(*ents), cmp_topic);
	for (size_t i = 0; i < ne && !rc; i++)
		rc = fn(arg, ents[i].session, ents[i].topic, ents[i].flags);
out:
	free(ents);
	free(keys);
	return rc;
}

/* ---- counters ---------------------------------------------------------------------------- */

int flit_xdp_counters(const struct flit_xdp_maps *m, uint64_t *out)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals;

	if (ncpu <= 0)
		return flit_err(-ncpu, "number of possible CPUs");
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return flit_err(ENOMEM, "%s: reading counters", m->ifname);
	for (uint32_t i = 0; i < FLIT_XDP_COUNTERS; i++) {
		out[i] = 0;
		if (bpf_map_lookup_elem(m->counters, &i, vals) < 0) {
			int err = map_err(m, "counters", "reading a counter");
			free(vals);
			return err;
		}
		for (int c = 0; c < ncpu; c++)
			out[i] += vals[c];
	}
	free(vals);
	return 0;
}

const char *flit_xdp_counter_name(unsigned i)
{
	static const char *const names[] = FLIT_XDP_COUNTER_NAMES;

	_Static_assert(sizeof(names) / sizeof(names[0]) == FLIT_XDP_COUNTERS,
		       "FLIT_XDP_COUNTER_NAMES has one name per counter");
	return i < FLIT_XDP_COUNTERS ? names[i] : NULL;
}
