// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit-loader: attach, detach and inspect flit's XDP steering program and
 * its pinned maps (in the manner of xdp-loader).  Everything it does goes
 * through the program manager (transports/xdp/xdp_prog.h); this file is
 * argument parsing and output.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "error.h"              /* flit_log_level_raise */
#include "tool.h"
#include "xdp/xdp_features.h"
#include "xdp/xdp_prog.h"

#define PROG "flit-loader"

static const char usage_main[] =
"Usage: flit-loader [-v] COMMAND [ARGS]\n"
"Attach, detach and inspect flit's XDP steering program and its pinned maps\n"
"(" FLIT_XDP_PIN_ROOT "/IFACE/, or IFACE@NETNS-COOKIE/ in a network namespace\n"
"that finds IFACE/ taken by another one's interface of that name).\n"
"\n"
"Commands:\n"
"  attach IFACE [--mode native|skb|auto] [--rx-timestamps] [--force]\n"
"  detach IFACE\n"
"  status [IFACE] [--json]\n"
"  gc\n"
"  flows IFACE add ADDR:PORT [--slot N] | del ADDR:PORT | list [--json]\n"
"  topics IFACE add SESSION TOPIC | del SESSION | filter SESSION [on|off]\n"
"             | list [--json]\n"
"  stats IFACE [--json] [--watch]\n"
"\n"
"  -v, --verbose   library messages to stderr (-vv: debug)\n"
"  -h, --help      this text ('flit-loader COMMAND --help': one command)\n"
"      --version   versions of flit and of its XDP program\n"
"\n"
"Needs CAP_NET_ADMIN and CAP_BPF (or CAP_SYS_ADMIN); attach mounts bpffs on\n"
"/sys/fs/bpf when it is not mounted.\n"
"Exit status: 0 ok, 1 failure, 2 usage.\n";

static const char usage_attach[] =
"Usage: flit-loader attach IFACE [--mode native|skb|auto] [--rx-timestamps]\n"
"                          [--force]\n"
"Attach flit's XDP program to IFACE and pin it and its maps under\n"
FLIT_XDP_PIN_ROOT "/IFACE/ (IFACE@NETNS-COOKIE/ when IFACE/ holds the pins of\n"
"an interface of that name in another network namespace).  Already attached\n"
"(same version): nothing changes.  Pins of interfaces that no longer exist\n"
"are removed first.\n"
"\n"
"  -m, --mode M    native (driver), skb (generic) or auto (default: skb on\n"
"                  veth, where it is faster, native elsewhere)\n"
"  -r, --rx-timestamps\n"
"                  attach the program that writes the NIC's receive stamp in\n"
"                  front of each frame (XDP RX metadata): device-bound, so\n"
"                  native mode only (auto means native), alone on IFACE, and\n"
"                  attached through libbpf (libxdp 1.3.1 cannot load it)\n"
"  -f, --force     replace this namespace's flit pins of another version, or\n"
"                  flit's program without RX stamps by the one with them\n"
"  -v, --verbose   library messages to stderr (-vv: debug)\n"
"  -h, --help      this text\n";

static const char usage_detach[] =
"Usage: flit-loader detach IFACE\n"
"Detach flit's XDP program from IFACE and remove this network namespace's\n"
"pins of it.  AF_XDP sockets of running applications stay open but receive\n"
"nothing more.\n"
"\n"
"  -v, --verbose   library messages to stderr (-vv: debug)\n"
"  -h, --help      this text\n";

static const char usage_status[] =
"Usage: flit-loader status [IFACE] [--json]\n"
"Show whether flit's program is attached to IFACE, in which mode, alone or\n"
"behind libxdp's dispatcher (and why), its program id, version, pin\n"
"directory and flow count, and what the interface gives (xdp-features,\n"
"zero-copy AF_XDP, device-bound programs).  Without IFACE: every interface\n"
"of this network namespace with pins under " FLIT_XDP_PIN_ROOT ", then the\n"
"pin directories of other namespaces (and whether their interface is gone).\n"
"Then what the running kernel gives flit's XDP paths, each tried, with the\n"
"Linux version that has what is missing: bpffs, the XDP RX-metadata kfunc,\n"
"device-bound programs, AF_XDP TX metadata, freplace (libxdp's dispatcher).\n"
"\n"
"  -j, --json      with IFACE, one JSON object (the kernel's features under\n"
"                  \"kernel\"); without, one per line: per interface, per pin\n"
"                  directory of another namespace (\"other_netns\":true),\n"
"                  then {\"kernel\":{...}}\n"
"  -v, --verbose   library messages to stderr (-vv: debug)\n"
"  -h, --help      this text\n";

static const char usage_gc[] =
"Usage: flit-loader gc\n"
"Remove the pin directories under " FLIT_XDP_PIN_ROOT " whose interface no\n"
"longer exists (in any network namespace: a namespace deleted without\n"
"detaching, an interface deleted), and leftovers of interrupted attaches.\n"
"Pins of live interfaces are never removed.  Prints each directory removed.\n"
"\n"
"  -v, --verbose   library messages to stderr (-vv: debug)\n"
"  -h, --help      this text\n";

static const char usage_flows[] =
"Usage: flit-loader flows IFACE add ADDR:PORT [--slot N]\n"
"       flit-loader flows IFACE del ADDR:PORT\n"
"       flit-loader flows IFACE list [--json]\n"
"The UDP destinations (IPv4 group or address, port) the program steers to\n"
"AF_XDP sockets: a frame of a flow arriving on rx queue Q goes to xsks slot\n"
"N + Q.\n"
"\n"
"  -s, --slot N    first xsks slot of the flow (default 0)\n"
"  -j, --json      list as one JSON object\n"
"  -v, --verbose   library messages to stderr (-vv: debug)\n"
"  -h, --help      this text\n";

static const char usage_topics[] =
"Usage: flit-loader topics IFACE add SESSION TOPIC\n"
"       flit-loader topics IFACE del SESSION\n"
"       flit-loader topics IFACE filter SESSION [on|off]\n"
"       flit-loader topics IFACE list [--json]\n"
"The topic filter: DATA frames of a session with filtering on are dropped\n"
"in XDP unless they carry a wanted topic.  add marks TOPIC (an index) of\n"
"SESSION wanted; filter turns filtering on (default) or off; del forgets the\n"
"session and its topics.  SESSION: 0x1a2b3c4d or decimal.\n"
"\n"
"  -j, --json      list as one JSON object\n"
"  -v, --verbose   library messages to stderr (-vv: debug)\n"
"  -h, --help      this text\n";

static const char usage_stats[] =
"Usage: flit-loader stats IFACE [--json] [--watch]\n"
"The program's counters, summed over CPUs.\n"
"\n"
"  -j, --json      one JSON object (per second with --watch)\n"
"  -w, --watch     every second, the totals and the per-second rates, until\n"
"                  interrupted\n"
"  -v, --verbose   library messages to stderr (-vv: debug)\n"
"  -h, --help      this text\n";

static int verbose;

static void set_verbose(int v)
{
	verbose = v;
	/* warnings always; -v info, -vv debug */
	if (v >= 2)
		flit_log_level_raise(FLIT_LOG_DEBUG);
	else if (v == 1)
		flit_log_level_raise(FLIT_LOG_INFO);
	tool_set_verbose(v >= 2 ? 2 : 1);
}

/* A library call failed: its trail, exit 1. */
static noreturn void fail_rc(int rc)
{
	const char *m = flit_errmsg();

	tool_fail("%s", m[0] ? m : strerror(-rc));
}

/* ---- per-command option parsing ------------------------------------------- */

enum { OPT_VERSION = 256 };

struct cmd_opts {
	const char *mode;
	bool force, json, watch, have_slot, rx_ts;
	uint64_t slot;
	int nargs;
	char *args[8];  /* operands after the command word */
};

/* Parse argv (argv[0] = the command word) with the options in `allow`
 * ("mfjwsv"), operands into o->args. */
static void parse_cmd(int argc, char **argv, const char *usage,
		      const char *allow, struct cmd_opts *o)
{
	static const struct option longopts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "force", no_argument, NULL, 'f' },
		{ "rx-timestamps", no_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "watch", no_argument, NULL, 'w' },
		{ "slot", required_argument, NULL, 's' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, v = verbose;

	tool_init(PROG, usage);
	memset(o, 0, sizeof(*o));
	optind = 1;
	while ((c = getopt_long(argc, argv, ":m:frjws:vh", longopts, NULL)) != -1) {
		if (c == 'h')
			tool_help_exit();
		if (c == '?' || c == ':')
			tool_getopt_error(c, argv);
		if (!strchr(allow, c))
			tool_usage_exit("option '%s' does not apply to '%s'",
					argv[optind - 1], argv[0]);
		switch (c) {
		case 'm': o->mode = optarg; break;
		case 'f': o->force = true; break;
		case 'r': o->rx_ts = true; break;
		case 'j': o->json = true; break;
		case 'w': o->watch = true; break;
		case 's':
			o->slot = tool_parse_count("--slot", optarg, 0, FLIT_XDP_XSKS_MAX - 1);
			o->have_slot = true;
			break;
		case 'v': v++; break;
		}
	}
	for (int i = optind; i < argc; i++) {
		if (o->nargs == (int)(sizeof(o->args) / sizeof(o->args[0])))
			tool_usage_exit("too many arguments");
		o->args[o->nargs++] = argv[i];
	}
	set_verbose(v);
}

static const char *need_iface(const struct cmd_opts *o, const char *cmd)
{
	if (o->nargs < 1)
		tool_usage_exit("%s: missing IFACE", cmd);
	if (!o->args[0][0] || strlen(o->args[0]) >= 16 || strchr(o->args[0], '/') ||
	    strchr(o->args[0], '@') || strchr(o->args[0], ':'))
		tool_usage_exit("bad interface name '%s'", o->args[0]);
	return o->args[0];
}

static void max_args(const struct cmd_opts *o, int n)
{
	if (o->nargs > n)
		tool_usage_exit("unexpected argument '%s'", o->args[n]);
}

/* ---- status ----------------------------------------------------------------- */

static int count_flow(void *arg, const struct flit_xdp_flow_key *k,
		      const struct flit_xdp_flow *v)
{
	(*(long *)arg)++;
	return 0;
}

/* Flows of ifname, or -1 when its maps cannot be opened. */
static long flow_count(const char *ifname)
{
	struct flit_xdp_maps m;
	long n = 0;

	if (flit_xdp_maps_open(ifname, &m) < 0)
		return -1;
	if (flit_xdp_flow_each(&m, count_flow, &n) < 0)
		n = -1;
	flit_xdp_maps_close(&m);
	return n;
}

/* ---- what the kernel and an interface give (xdp_features.h) ----------------- */

static const char *feat_word(enum flit_feat_state st)
{
	return st == FLIT_FEAT_YES ? "yes" : st == FLIT_FEAT_NO ? "no" : "unknown";
}

static void feat_json(const char *key, const struct flit_feat *f)
{
	printf(",\"%s\":{\"state\":\"%s\",\"how\":", key, feat_word(f->state));
	tool_json_str(stdout, f->how);
	printf("}");
}

static void feat_text(const char *label, const struct flit_feat *f)
{
	printf("  %-15s %s: %s\n", label, feat_word(f->state), f->how);
}

static void kernel_json_members(const struct flit_xdp_kernel_feats *k)
{
	printf("{\"release\":");
	tool_json_str(stdout, k->release);
	feat_json("bpffs", &k->bpffs);
	feat_json("rx_metadata_kfunc", &k->rx_meta);
	feat_json("dev_bound", &k->dev_bound);
	feat_json("tx_metadata", &k->tx_meta);
	feat_json("freplace", &k->freplace);
	printf("}");
}

static void kernel_text(const struct flit_xdp_kernel_feats *k)
{
	printf("kernel %s, for flit's XDP paths:\n", k->release);
	feat_text("bpffs:", &k->bpffs);
	feat_text("rx-meta kfunc:", &k->rx_meta);
	feat_text("device-bound:", &k->dev_bound);
	feat_text("tx metadata:", &k->tx_meta);
	feat_text("freplace:", &k->freplace);
}

static void iface_json(const struct flit_xdp_iface_feats *f)
{
	char b[200];

	printf(",\"driver\":");
	tool_json_str(stdout, f->driver);
	printf(",\"xdp_features\":");
	if (f->known)
		tool_json_str(stdout, flit_xdp_feat_names(FLIT_FEATS_XDP, f->xdp, b, sizeof(b)));
	else
		printf("null");
	printf(",\"rx_metadata_features\":");
	if (f->known)
		tool_json_str(stdout, flit_xdp_feat_names(FLIT_FEATS_RX_META, f->rx_meta, b,
							  sizeof(b)));
	else
		printf("null");
	feat_json("zerocopy", &f->zerocopy);
	feat_json("dev_bound", &f->dev_bound);
}

static void iface_text(const struct flit_xdp_iface_feats *f)
{
	char b[200];

	if (f->known) {
		printf("  %-12s %s%s", "xdp:", f->driver[0] ? f->driver : "no driver name",
		       f->driver[0] ? " driver, " : ", ");
		printf("xdp-features %s", flit_xdp_feat_names(FLIT_FEATS_XDP, f->xdp, b,
							       sizeof(b)));
		printf(", rx-metadata %s", flit_xdp_feat_names(FLIT_FEATS_RX_META, f->rx_meta,
								b, sizeof(b)));
		printf(", xsk-features %s\n", flit_xdp_feat_names(FLIT_FEATS_XSK, f->xsk, b,
								 sizeof(b)));
	}
	printf("  %-12s %s: %s\n", "zero-copy:", feat_word(f->zerocopy.state), f->zerocopy.how);
	printf("  %-12s %s: %s\n", "dev-bound:", feat_word(f->dev_bound.state),
	       f->dev_bound.how);
}

/* "XDP_PASS,XDP_DROP" for bits 1 << XDP_*, "none" */
static const char *chain_str(uint32_t bits, char *buf, size_t len)
{
	static const char *const act[] = { "XDP_ABORTED", "XDP_DROP", "XDP_PASS",
					   "XDP_TX", "XDP_REDIRECT" };
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned a = 0; a < 5; a++)
		if (bits & (1u << a))
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s",
					      n ? "," : "", act[a]);
	if (!buf[0])
		snprintf(buf, len, "none");
	return buf;
}

static void status_json(const char *ifname, const struct flit_xdp_status *st,
			long flows, const struct flit_xdp_iface_feats *f,
			const struct flit_xdp_kernel_feats *k)
{
	printf("{\"ifname\":");
	tool_json_str(stdout, ifname);
	printf(",\"attached\":%s,\"flit\":%s,\"pinned\":%s,\"foreign\":%s",
	       st->attached ? "true" : "false", st->flit ? "true" : "false",
	       st->pinned ? "true" : "false", st->foreign ? "true" : "false");
	printf(",\"mode\":");
	if (st->attached)
		tool_json_str(stdout, flit_xdp_mode_str(st->mode));
	else
		printf("null");
	printf(",\"multiprog\":%s,\"rx_timestamps\":%s,\"why_single\":",
	       st->multiprog ? "true" : "false", st->rx_timestamps ? "true" : "false");
	tool_json_str(stdout, st->why_single);
	printf(",\"prog_id\":%u,\"version\":%u,\"pin_dir\":", st->prog_id,
	       st->version);
	tool_json_str(stdout, st->pin_dir);
	printf(",\"other\":");
	tool_json_str(stdout, st->other);
	printf(",\"programs\":[");
	for (unsigned i = 0; i < st->nprogs; i++) {
		const struct flit_xdp_prog_slot *ps = &st->progs[i];
		char b[64];

		printf("%s{\"name\":", i ? "," : "");
		tool_json_str(stdout, ps->name);
		printf(",\"id\":%u,\"flit\":%s", ps->id, ps->flit ? "true" : "false");
		if (st->multiprog) {
			printf(",\"priority\":%u,\"chain_actions\":", ps->prio);
			tool_json_str(stdout, chain_str(ps->chain_actions, b, sizeof(b)));
		}
		printf("}");
	}
	printf("]");
	if (flows >= 0)
		printf(",\"flows\":%ld", flows);
	else
		printf(",\"flows\":null");
	if (f)
		iface_json(f);
	if (k) {
		printf(",\"kernel\":");
		kernel_json_members(k);
	}
	printf("}\n");
}

/* ifname's canonical pin directory name: '.' written ':' (xdp_prog.h) */
static const char *canon_name(const char *ifname)
{
	static char buf[16];

	snprintf(buf, sizeof(buf), "%s", ifname);
	for (char *p = buf; *p; p++)
		if (*p == '.')
			*p = ':';
	return buf;
}

static void status_text(const char *ifname, const struct flit_xdp_status *st,
			long flows, const struct flit_xdp_iface_feats *f)
{
	bool ours = st->flit || (st->attached && st->prog_id);

	if (st->flit)
		printf("%s: flit attached\n", ifname);
	else if (ours)
		printf("%s: flit's program attached without its pins (removed, "
		       "replaced, or in another mount namespace): 'flit-loader "
		       "detach' detaches it\n", ifname);
	else if (st->pinned)
		printf("%s: flit not attached (stale pins: 'flit-loader attach' or "
		       "'detach' removes them)\n", ifname);
	else
		printf("%s: flit not attached\n", ifname);
	if (ours) {
		printf("  mode:        %s\n", st->mode == FLIT_XDP_MODE_SKB ?
		       "skb (generic XDP)" : "native (driver XDP)");
		if (st->multiprog)
			printf("  programs:    libxdp dispatcher (multi-program)\n");
		else
			printf("  programs:    single program, no dispatcher: %s\n",
			       st->why_single[0] ? st->why_single : "?");
		printf("  program id:  %u\n", st->prog_id);
		if (st->rx_timestamps)
			printf("  RX stamps:   the NIC's, in XDP RX metadata (%s)\n",
			       FLIT_XDP_PROG_NAME_TS);
	}
	if (st->version)
		printf("  version:     %u%s\n", st->version,
		       st->version == FLIT_XDP_VERSION ? "" :
		       " (not this flit-loader's version)");
	if (st->pinned)
		printf("  pins:        %s\n", st->pin_dir);
	else
		printf("  pins:        none (attach would make %s)\n", st->pin_dir);
	if (st->foreign)
		printf("  note:        %s/%s holds the pins of another interface "
		       "named %s (in another network namespace, or renamed since)\n",
		       FLIT_XDP_PIN_ROOT, canon_name(ifname), ifname);
	if (st->other[0])
		printf("  other XDP:   %s (%s mode)\n", st->other,
		       flit_xdp_mode_str(st->mode));
	if (st->multiprog) {
		printf("  run order:   libxdp's dispatcher runs, lowest priority first, "
		       "the next while one returns an action of its chain:\n");
		for (unsigned i = 0; i < st->nprogs; i++) {
			const struct flit_xdp_prog_slot *ps = &st->progs[i];
			char b[64];

			printf("    %u. %-16s id %-6u priority %-5u chain %s%s\n", i + 1,
			       ps->name, ps->id, ps->prio,
			       chain_str(ps->chain_actions, b, sizeof(b)),
			       ps->flit ? "  (flit)" : "");
		}
	}
	if (flows >= 0)
		printf("  flows:       %ld\n", flows);
	if (f)
		iface_text(f);
}

/* One interface; with_kernel: the kernel's features too (status IFACE),
 * probed once the interface's status was read (privileges, no such
 * interface: those errors first). */
static int status_one(const char *ifname, bool json, bool listing, bool with_kernel)
{
	struct flit_xdp_iface_feats feats, *f = &feats;
	struct flit_xdp_kernel_feats kf, *k = NULL;
	struct flit_xdp_status st;
	long flows = -1;
	int rc = flit_xdp_status(ifname, &st);

	if (rc < 0) {
		if (!listing)
			fail_rc(rc);
		tool_warn("%s", flit_errmsg());
		return 1;
	}
	if (with_kernel) {
		flit_xdp_kernel_feats(&kf);
		k = &kf;
	}
	if (st.flit && st.version == FLIT_XDP_VERSION)
		flows = flow_count(ifname);
	if (flit_xdp_iface_feats(ifname, f) < 0)
		f = NULL;       /* pins of an interface gone */
	if (json) {
		status_json(ifname, &st, flows, f, k);
	} else {
		status_text(ifname, &st, flows, f);
		if (k) {
			printf("\n");
			kernel_text(k);
		}
	}
	return 0;
}

/* Pin directories, as flit_xdp_pin_dir_each() reports them. */
struct dir_list {
	struct flit_xdp_pin_dir *d;
	int n, cap;
};

static int collect_dir(void *arg, const struct flit_xdp_pin_dir *d)
{
	struct dir_list *l = arg;

	if (l->n == l->cap) {
		int nc = l->cap ? 2 * l->cap : 16;
		struct flit_xdp_pin_dir *e = realloc(l->d, (size_t)nc * sizeof(*e));

		if (!e)
			tool_fail("out of memory");
		l->d = e;
		l->cap = nc;
	}
	l->d[l->n++] = *d;
	return 0;
}

static void other_json(const struct flit_xdp_pin_dir *d)
{
	printf("{\"other_netns\":true,\"pin_dir\":");
	tool_json_str(stdout, d->path);
	printf(",\"ifname\":");
	tool_json_str(stdout, d->ifname);
	printf(",\"netns_cookie\":%llu,\"ifindex\":%u,\"gone\":%s}\n",
	       (unsigned long long)d->netns, d->ifindex, d->gone ? "true" : "false");
}

static void other_text(const struct flit_xdp_pin_dir *d)
{
	if (!d->netns)
		printf("  %-36s %s: no owner pin (leftover: 'flit-loader gc' "
		       "removes it if empty)\n", d->path, d->ifname);
	else
		printf("  %-36s %s, ifindex %u, network namespace %llu%s\n", d->path,
		       d->ifname, d->ifindex, (unsigned long long)d->netns,
		       d->gone ? ": interface gone ('flit-loader gc' removes it)" : "");
}

static int cmd_status(int argc, char **argv)
{
	struct dir_list l = { 0 };
	struct cmd_opts o;
	int rc, bad = 0, shown = 0, others = 0;
	struct flit_xdp_kernel_feats kf;

	parse_cmd(argc, argv, usage_status, "jv", &o);
	max_args(&o, 1);
	if (o.nargs == 1)
		return status_one(need_iface(&o, "status"), o.json, false, true);

	rc = flit_xdp_pin_dir_each(collect_dir, &l);
	if (rc < 0)
		fail_rc(rc);
	/* this namespace's interfaces, each once (sorted by directory name,
	 * so by interface name) */
	for (int i = 0; i < l.n; i++) {
		bool seen = false;

		if (!l.d[i].mine) {
			others++;
			continue;
		}
		for (int k = 0; k < i && !seen; k++)
			seen = l.d[k].mine && !strcmp(l.d[k].ifname, l.d[i].ifname);
		if (seen)
			continue;
		if (shown++ && !o.json)
			printf("\n");
		bad |= status_one(l.d[i].ifname, o.json, true, false);
	}
	if (!o.json && !shown)
		printf("no interface of this network namespace has flit pins under %s\n",
		       FLIT_XDP_PIN_ROOT);
	if (others && !o.json)
		printf("\npins of other network namespaces:\n");
	for (int i = 0; i < l.n; i++) {
		if (l.d[i].mine)
			continue;
		if (o.json)
			other_json(&l.d[i]);
		else
			other_text(&l.d[i]);
	}
	free(l.d);
	flit_xdp_kernel_feats(&kf);
	if (o.json) {
		printf("{\"kernel\":");
		kernel_json_members(&kf);
		printf("}\n");
	} else {
		printf("\n");
		kernel_text(&kf);
	}
	return bad;
}

static void print_removed(void *arg, const char *dir)
{
	(*(int *)arg)++;
	printf("removed %s\n", dir);
}

static int cmd_gc(int argc, char **argv)
{
	struct cmd_opts o;
	int n = 0, rc;

	parse_cmd(argc, argv, usage_gc, "v", &o);
	max_args(&o, 0);
	rc = flit_xdp_gc(print_removed, &n);
	if (rc < 0)
		fail_rc(rc);
	if (!n)
		printf("nothing to remove under %s\n", FLIT_XDP_PIN_ROOT);
	return 0;
}

/* ---- attach / detach ----------------------------------------------------------- */

static int cmd_attach(int argc, char **argv)
{
	enum flit_xdp_mode mode = FLIT_XDP_MODE_AUTO, got;
	struct flit_xdp_status before, st;
	struct cmd_opts o;
	const char *ifname;
	bool already;
	int rc;

	parse_cmd(argc, argv, usage_attach, "mfrv", &o);
	ifname = need_iface(&o, "attach");
	max_args(&o, 1);
	if (o.mode && flit_xdp_mode_parse(o.mode, &mode) < 0)
		tool_usage_exit("--mode: '%s': expected native, skb or auto", o.mode);

	already = flit_xdp_status(ifname, &before) == 0 && before.flit &&
		  before.version == FLIT_XDP_VERSION &&
		  (!o.rx_ts || before.rx_timestamps);
	rc = flit_xdp_attach_flags(ifname, mode,
				   (o.force ? FLIT_XDP_ATTACH_FORCE : 0) |
				   (o.rx_ts ? FLIT_XDP_ATTACH_RX_TS : 0), &got);
	if (rc < 0)
		fail_rc(rc);
	rc = flit_xdp_status(ifname, &st);
	if (rc < 0)
		fail_rc(rc);
	if (already) {
		printf("%s: flit already attached (%s mode, version %u, program id %u)\n",
		       ifname, flit_xdp_mode_str(got), st.version, st.prog_id);
		if (mode != FLIT_XDP_MODE_AUTO && mode != got)
			tool_warn("%s: attached in %s mode, not %s: detach first to "
				  "change the mode", ifname, flit_xdp_mode_str(got),
				  flit_xdp_mode_str(mode));
		return 0;
	}
	printf("%s: flit attached in %s mode, program id %u, version %u\n", ifname,
	       flit_xdp_mode_str(got), st.prog_id, st.version);
	if (st.multiprog)
		printf("%s: through libxdp's dispatcher (multi-program)\n", ifname);
	else
		printf("%s: single program, no dispatcher: %s\n", ifname,
		       st.why_single);
	if (st.rx_timestamps)
		printf("%s: hardware RX stamps in XDP RX metadata (%s)\n", ifname,
		       FLIT_XDP_PROG_NAME_TS);
	printf("%s: pins in %s\n", ifname, st.pin_dir);
	return 0;
}

static int cmd_detach(int argc, char **argv)
{
	struct cmd_opts o;
	const char *ifname;
	int rc;

	struct flit_xdp_status st;

	parse_cmd(argc, argv, usage_detach, "v", &o);
	ifname = need_iface(&o, "detach");
	max_args(&o, 1);
	if (flit_xdp_status(ifname, &st) < 0)
		st.pinned = false;
	rc = flit_xdp_detach(ifname);
	if (rc < 0)
		fail_rc(rc);
	if (st.pinned)
		printf("%s: flit detached, pins removed (%s)\n", ifname, st.pin_dir);
	else
		printf("%s: flit detached\n", ifname);
	return 0;
}

/* ---- flows ----------------------------------------------------------------------- */

static void parse_addr_port(const char *arg, uint32_t *addr, uint16_t *port)
{
	char buf[64], *colon, *end;
	unsigned long p;
	struct in_addr a;

	if (strlen(arg) >= sizeof(buf))
		tool_usage_exit("'%s': expected ADDR:PORT", arg);
	strcpy(buf, arg);
	colon = strrchr(buf, ':');
	if (!colon)
		tool_usage_exit("'%s': expected ADDR:PORT (IPv4)", arg);
	*colon = '\0';
	if (inet_pton(AF_INET, buf, &a) != 1)
		tool_usage_exit("'%s': '%s' is not an IPv4 address", arg, buf);
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p == 0 || p > 65535 ||
	    colon[1] == '-' || colon[1] == '+')
		tool_usage_exit("'%s': port must be 1..65535", arg);
	*addr = a.s_addr;
	*port = htons((uint16_t)p);
}

static void open_maps(const char *ifname, struct flit_xdp_maps *m)
{
	int rc = flit_xdp_maps_open(ifname, m);

	if (rc < 0)
		fail_rc(rc);
}

struct list_state {
	bool json;
	int n;
};

static int print_flow(void *arg, const struct flit_xdp_flow_key *k,
		      const struct flit_xdp_flow *v)
{
	struct list_state *ls = arg;
	char a[INET_ADDRSTRLEN], ap[INET_ADDRSTRLEN + 8];

	inet_ntop(AF_INET, &k->daddr, a, sizeof(a));
	if (ls->json) {
		printf("%s{\"addr\":\"%s\",\"port\":%u,\"slot\":%u}", ls->n ? "," : "",
		       a, ntohs(k->dport), v->slot_base);
	} else {
		snprintf(ap, sizeof(ap), "%s:%u", a, ntohs(k->dport));
		printf("%-22s %u\n", ap, v->slot_base);
	}
	ls->n++;
	return 0;
}

static int cmd_flows(int argc, char **argv)
{
	struct flit_xdp_maps m;
	struct cmd_opts o;
	const char *ifname, *verb;
	uint32_t addr;
	uint16_t port;
	int rc = 0;

	parse_cmd(argc, argv, usage_flows, "sjv", &o);
	ifname = need_iface(&o, "flows");
	if (o.nargs < 2)
		tool_usage_exit("flows: missing add, del or list");
	verb = o.args[1];
	if (!strcmp(verb, "add") || !strcmp(verb, "del")) {
		if (o.nargs < 3)
			tool_usage_exit("flows %s: missing ADDR:PORT", verb);
		max_args(&o, 3);
		if (o.json)
			tool_usage_exit("--json applies to 'flows list'");
		if (o.have_slot && strcmp(verb, "add"))
			tool_usage_exit("--slot applies to 'flows add'");
		parse_addr_port(o.args[2], &addr, &port);
		open_maps(ifname, &m);
		if (!strcmp(verb, "add"))
			rc = flit_xdp_flow_add(&m, addr, port, (uint32_t)o.slot);
		else
			rc = flit_xdp_flow_del(&m, addr, port);
		flit_xdp_maps_close(&m);
		if (rc < 0)
			fail_rc(rc);
		return 0;
	}
	if (!strcmp(verb, "list")) {
		struct list_state ls = { .json = o.json };

		max_args(&o, 2);
		if (o.have_slot)
			tool_usage_exit("--slot applies to 'flows add'");
		open_maps(ifname, &m);
		if (o.json) {
			printf("{\"ifname\":");
			tool_json_str(stdout, ifname);
			printf(",\"flows\":[");
		} else {
			printf("%-22s %s\n", "addr:port", "slot");
		}
		rc = flit_xdp_flow_each(&m, print_flow, &ls);
		flit_xdp_maps_close(&m);
		if (rc < 0)
			fail_rc(rc);
		if (o.json)
			printf("]}\n");
		return 0;
	}
	tool_usage_exit("flows: unknown action '%s' (add, del or list)", verb);
}

/* ---- topics ------------------------------------------------------------------------ */

static uint32_t parse_u32(const char *what, const char *arg, uint32_t max)
{
	char *end;
	unsigned long long v;
	bool hex = arg[0] == '0' && (arg[1] == 'x' || arg[1] == 'X');

	errno = 0;
	v = strtoull(arg, &end, hex ? 16 : 10);
	if (!arg[0] || errno || *end || v > max || arg[0] == '-' || arg[0] == '+' ||
	    (hex && !arg[2]))
		tool_usage_exit("%s: '%s' is not a number in 0..%u (decimal or 0x hex)",
				what, arg, max);
	return (uint32_t)v;
}

static int print_topic(void *arg, uint32_t session, uint32_t topic, uint32_t flags)
{
	struct list_state *ls = arg;
	bool filt = flags & FLIT_XDP_SESS_FILTER;
	/* parted: a session a context here receives, filtered per topic */
	const char *how = !filt ? "off" : (flags & FLIT_XDP_SESS_REPORT) ? "parted" : "on";

	if (ls->json) {
		printf("%s{\"session\":%u,\"session_hex\":\"0x%08x\",\"topic\":", ls->n ? "," : "",
		       session, session);
		if (topic == UINT32_MAX)
			printf("null");
		else
			printf("%u", topic);
		printf(",\"filter\":%s,\"parted\":%s}", filt ? "true" : "false",
		       flags & FLIT_XDP_SESS_REPORT ? "true" : "false");
	} else if (topic == UINT32_MAX) {
		printf("0x%08x  %-8s %s\n", session, "-", how);
	} else {
		printf("0x%08x  %-8u %s\n", session, topic, how);
	}
	ls->n++;
	return 0;
}

static int cmd_topics(int argc, char **argv)
{
	struct flit_xdp_maps m;
	struct cmd_opts o;
	const char *ifname, *verb;
	uint32_t session, topic;
	int rc;

	parse_cmd(argc, argv, usage_topics, "jv", &o);
	ifname = need_iface(&o, "topics");
	if (o.nargs < 2)
		tool_usage_exit("topics: missing add, del, filter or list");
	verb = o.args[1];
	if (o.json && strcmp(verb, "list"))
		tool_usage_exit("--json applies to 'topics list'");
	if (!strcmp(verb, "add")) {
		if (o.nargs < 4)
			tool_usage_exit("topics add: needs SESSION and TOPIC");
		max_args(&o, 4);
		session = parse_u32("SESSION", o.args[2], UINT32_MAX);
		topic = parse_u32("TOPIC", o.args[3], UINT32_MAX - 1);
		open_maps(ifname, &m);
		rc = flit_xdp_topic_set(&m, session, topic, true);
	} else if (!strcmp(verb, "del")) {
		if (o.nargs < 3)
			tool_usage_exit("topics del: missing SESSION");
		max_args(&o, 3);
		session = parse_u32("SESSION", o.args[2], UINT32_MAX);
		open_maps(ifname, &m);
		rc = flit_xdp_session_del(&m, session);
	} else if (!strcmp(verb, "filter")) {
		bool on = true;

		if (o.nargs < 3)
			tool_usage_exit("topics filter: missing SESSION");
		max_args(&o, 4);
		session = parse_u32("SESSION", o.args[2], UINT32_MAX);
		if (o.nargs == 4) {
			if (!strcmp(o.args[3], "off"))
				on = false;
			else if (strcmp(o.args[3], "on"))
				tool_usage_exit("topics filter: '%s': expected on or off",
						o.args[3]);
		}
		open_maps(ifname, &m);
		rc = flit_xdp_session_set(&m, session, on ? FLIT_XDP_SESS_FILTER : 0, 0, 0);
	} else if (!strcmp(verb, "list")) {
		struct list_state ls = { .json = o.json };

		max_args(&o, 2);
		open_maps(ifname, &m);
		if (o.json) {
			printf("{\"ifname\":");
			tool_json_str(stdout, ifname);
			printf(",\"topics\":[");
		} else {
			printf("%-10s  %-8s %s\n", "session", "topic", "filter");
		}
		rc = flit_xdp_topic_each(&m, print_topic, &ls);
		if (rc >= 0 && o.json)
			printf("]}\n");
	} else {
		tool_usage_exit("topics: unknown action '%s' (add, del, filter or list)",
				verb);
	}
	flit_xdp_maps_close(&m);
	if (rc < 0)
		fail_rc(rc);
	return 0;
}

/* ---- stats ------------------------------------------------------------------------- */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void stats_json(const char *ifname, const uint64_t *c, const uint64_t *prev,
		       double dt)
{
	printf("{\"ifname\":");
	tool_json_str(stdout, ifname);
	printf(",\"time\":%ld,\"counters\":{", (long)time(NULL));
	for (unsigned i = 0; i < FLIT_XDP_COUNTERS; i++)
		printf("%s\"%s\":%llu", i ? "," : "", flit_xdp_counter_name(i),
		       (unsigned long long)c[i]);
	printf("}");
	if (prev) {
		printf(",\"interval_s\":%.3f,\"per_sec\":{", dt);
		for (unsigned i = 0; i < FLIT_XDP_COUNTERS; i++)
			printf("%s\"%s\":%.1f", i ? "," : "", flit_xdp_counter_name(i),
			       (double)(c[i] - prev[i]) / dt);
		printf("}");
	}
	printf("}\n");
	fflush(stdout);
}

static void stats_text(const char *ifname, const uint64_t *c, const uint64_t *prev,
		       double dt)
{
	if (!prev) {
		printf("%s: flit XDP counters (sum over %d CPUs)\n", ifname,
		       libbpf_num_possible_cpus());
		for (unsigned i = 0; i < FLIT_XDP_COUNTERS; i++)
			printf("  %-16s %llu\n", flit_xdp_counter_name(i),
			       (unsigned long long)c[i]);
		fflush(stdout);
		return;
	}
	char ts[16];
	time_t t = time(NULL);

	strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&t));
	printf("%s", ts);
	for (unsigned i = 0; i < FLIT_XDP_COUNTERS; i++) {
		uint64_t d = c[i] - prev[i];

		if (d || c[i])
			printf("  %s %llu (%.0f/s)", flit_xdp_counter_name(i),
			       (unsigned long long)c[i], (double)d / dt);
	}
	printf("\n");
	fflush(stdout);
}

static int cmd_stats(int argc, char **argv)
{
	uint64_t cur[FLIT_XDP_COUNTERS], prev[FLIT_XDP_COUNTERS];
	struct flit_xdp_maps m;
	struct sigaction sa;
	struct cmd_opts o;
	const char *ifname;
	double t0, t1;
	int rc;

	parse_cmd(argc, argv, usage_stats, "jwv", &o);
	ifname = need_iface(&o, "stats");
	max_args(&o, 1);
	open_maps(ifname, &m);
	rc = flit_xdp_counters(&m, cur);
	if (rc < 0)
		fail_rc(rc);
	if (o.json)
		stats_json(ifname, cur, NULL, 0);
	else
		stats_text(ifname, cur, NULL, 0);
	if (!o.watch) {
		flit_xdp_maps_close(&m);
		return 0;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	t0 = now_s();
	while (!stop) {
		struct timespec one = { .tv_sec = 1 };

		memcpy(prev, cur, sizeof(cur));
		if (nanosleep(&one, NULL) < 0 || stop)
			break;
		rc = flit_xdp_counters(&m, cur);
		if (rc < 0)
			fail_rc(rc);
		t1 = now_s();
		if (o.json)
			stats_json(ifname, cur, prev, t1 - t0);
		else
			stats_text(ifname, cur, prev, t1 - t0);
		t0 = t1;
	}
	flit_xdp_maps_close(&m);
	return 0;
}

/* ---- main ---------------------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "attach", cmd_attach },
	{ "detach", cmd_detach },
	{ "status", cmd_status },
	{ "gc", cmd_gc },
	{ "flows", cmd_flows },
	{ "topics", cmd_topics },
	{ "stats", cmd_stats },
};

int main(int argc, char **argv)
{
	int i, v = 0;

	tool_init(PROG, usage_main);
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			tool_help_exit();
		else if (!strcmp(a, "--version")) {
			printf("flit-loader (flit %d.%d.%d), XDP program version %u\n",
			       FLIT_VERSION_MAJOR, FLIT_VERSION_MINOR,
			       FLIT_VERSION_PATCH, FLIT_XDP_VERSION);
			return 0;
		} else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
			v++;
		else if (!strcmp(a, "-vv"))
			v += 2;
		else
			tool_usage_exit("unknown option '%s'", a);
	}
	if (i == argc)
		tool_usage_exit("missing COMMAND");
	set_verbose(v);
	for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++)
		if (!strcmp(argv[i], commands[c].name))
			return commands[c].fn(argc - i, argv + i);
	tool_usage_exit("unknown command '%s'", argv[i]);
}
