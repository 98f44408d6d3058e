// SPDX-License-Identifier: BSD-2-Clause
/*
 * Configuration: loading validates every line into entries (key, parsed
 * value, topic pattern, origin); resolving an object's settings replays the
 * built-in defaults and then the matching entries in precedence order.
 * Nothing is validated late, so an error always names the file and line (or
 * environment variable) that caused it.  Syntax and keys: docs/CONFIG.md.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>

#include "config.h"
#include "error.h"
#include "dgram/dgram.h"

#define LINE_LEN_MAX 4096 /* bytes per line, without the newline */
#define KEY_LEN_MAX  64   /* longer keys cannot name anything in the table */
#define ECHO_MAX     64   /* longest key or value quoted back in a message */

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)

enum cfg_scope {
	SCOPE_CONTEXT,
	SCOPE_SOURCE,
	SCOPE_RECEIVER,
	SCOPE__MAX,
	SCOPE_NONE = SCOPE__MAX, /* top level: keys carry their scope */
};

static const char *const scope_names[SCOPE__MAX] = {
	[SCOPE_CONTEXT] = "context",
	[SCOPE_SOURCE] = "source",
	[SCOPE_RECEIVER] = "receiver",
};

enum cfg_type {
	T_STRING, /* validated by key->valid(), stored into char[size] */
	T_ENUM,   /* one of key->names, stored as int (index) */
	T_BOOL,
	T_U32,    /* decimal, min..max */
	T_SIZE,   /* decimal with K/M/G suffix (binary), min..max, maybe pow2 */
	T_MODE,   /* octal file mode from key->modes */
	T_RATE,   /* decimal with k/M/G suffix (x1000), bits per second */
};

struct cfg_key {
	const char *name;
	enum cfg_scope scope;
	enum cfg_type type;
	const char *def;        /* default, as text: parsed like any value */
	size_t off, size;       /* field in the scope's struct */
	uint64_t min, max;      /* T_U32, T_SIZE */
	bool pow2;              /* T_SIZE, T_U32 */
	const char *const *names;                 /* T_ENUM, NULL-terminated */
	const uint32_t *modes;                    /* T_MODE, 0-terminated */
	bool (*valid)(const char *s, size_t len); /* T_STRING */
	const char *rule;       /* T_STRING: what valid() accepts */
};

/* The enums are stored as int (their index in the names table). */
_Static_assert(sizeof(enum flit_shm_mode) == sizeof(int), "enum size");

static const char *const shm_mode_names[] = {
	[FLIT_SHM_PACED] = "paced",
	[FLIT_SHM_OVERWRITE] = "overwrite",
	NULL,
};

static const char *const log_level_names[] = {
	[FLIT_LOG_ERROR] = "error",
	[FLIT_LOG_WARN] = "warn",
	[FLIT_LOG_INFO] = "info",
	[FLIT_LOG_DEBUG] = "debug",
	NULL,
};

static const uint32_t shm_file_modes[] = { 0600, 0640, 0660, 0 };

static const char *const udp_mode_names[] = {
	[FLIT_UDP_MULTICAST] = "multicast",
	[FLIT_UDP_UNICAST] = "unicast",
	NULL,
};
static const char *const udp_topic_numbers_names[] = {
	[FLIT_UDP_TSEQ_SHORT] = "short",
	[FLIT_UDP_TSEQ_LONG] = "long",
	NULL,
};
static const char *const udp_backend_names[] = { "sockets", "io_uring", NULL };
static const char *const udp_uring_send_names[] = {
	[FLIT_UDP_URING_SEND_SOCKET] = "socket",
	[FLIT_UDP_URING_SEND_RING] = "ring",
	NULL,
};
static const char *const udp_uring_recv_names[] = {
	[FLIT_UDP_URING_RECV_RECVMSG] = "recvmsg",
	[FLIT_UDP_URING_RECV_POLL] = "poll",
	NULL,
};
static const char *const udp_ts_names[] = { "off", "software", "hardware", NULL };
static const char *const udp_service_names[] = { "thread", "poll", NULL };

/* Transports a source may name; keep in step with transports/. */
static const char *const transport_names[] = { "shm", "udp", "xdp", "rdma", NULL };
static const char *const xdp_mode_names[] = { "auto", "native", "skb", NULL };
static const char *const xdp_attach_names[] = { "auto", "pinned", "self", NULL };
static const char *const xdp_zc_names[] = { "auto", "off", "on", NULL };
static const char *const rdma_mode_names[] = { "send", "write", "multicast", NULL };
static const char *const xdp_rx_ts_names[] = { "off", "hardware", NULL };
static const char *const xdp_txq_names[] = { "shared", "own", NULL };

static bool valid_domain(const char *s, size_t len)
{
	if (len < 1 || len > 63)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

static bool valid_session(const char *s, size_t len)
{
	return len == 0 || valid_domain(s, len);
}

static bool valid_abs_path(const char *s, size_t len)
{
	return len >= 1 && len < FLIT_PATH_MAX && s[0] == '/';
}

static bool valid_transport(const char *s, size_t len)
{
	for (const char *const *n = transport_names; *n; n++)
		if (strlen(*n) == len && !memcmp(*n, s, len))
			return true;
	return false;
}

/* "shm,udp": one or more transport names separated by commas or spaces;
 * udp and xdp carry the same sessions on the same groups, so a context has
 * one of them, not both */
static bool valid_transport_list(const char *s, size_t len)
{
	size_t i = 0, n = 0;
	bool udp = false, xdp = false;

	while (i < len) {
		size_t j = i;
		while (j < len && s[j] != ',' && s[j] != ' ')
			j++;
		if (j > i) {
			if (!valid_transport(s + i, j - i))
				return false;
			udp |= j - i == 3 && !memcmp(s + i, "udp", 3);
			xdp |= j - i == 3 && !memcmp(s + i, "xdp", 3);
			n++;
		}
		i = j + 1;
	}
	return n > 0 && !(udp && xdp);
}



static bool parse_decimal(const char *s, size_t len, uint64_t *out);

/* Copy s[0..len) to a NUL-terminated buffer; false if it does not fit. */
static bool cstr(char *buf, size_t n, const char *s, size_t len)
{
	if (len >= n)
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return true;
}

static bool parse_ipv4(const char *s, size_t len, struct in_addr *a)
{
	char b[16];
	return cstr(b, sizeof(b), s, len) && inet_pton(AF_INET, b, a) == 1;
}

static bool is_mcast(struct in_addr a)
{
	return IN_MULTICAST(ntohl(a.s_addr));
}

/* "a.b.c.d:port", port 1..65535; mcast: 1 must be multicast, 0 unicast, -1 any */
static bool valid_endpoint_kind(const char *s, size_t len, int mcast)
{
	const char *colon = memchr(s, ':', len);
	struct in_addr a;
	uint64_t port;

	if (!colon || !parse_ipv4(s, (size_t)(colon - s), &a) ||
	    !parse_decimal(colon + 1, len - (size_t)(colon + 1 - s), &port) ||
	    port < 1 || port > 65535)
		return false;
	return mcast < 0 || (mcast == 1) == is_mcast(a);
}

static bool valid_resolver(const char *s, size_t len)
{
	return (len == 3 && !memcmp(s, "off", 3)) || valid_endpoint_kind(s, len, 1);
}

static bool valid_static(const char *s, size_t len)
{
	return len == 0 || valid_endpoint_kind(s, len, -1);
}

/* rdma: empty, or a unicast IPv4 address:port (a source's rdma_cm listener) */
static bool valid_rdma_static(const char *s, size_t len)
{
	return len == 0 || valid_endpoint_kind(s, len, 0);
}

/* rdma: empty (every device), or a unicast IPv4 address */
static bool valid_rdma_addr(const char *s, size_t len)
{
	struct in_addr a;
	return len == 0 || (parse_ipv4(s, len, &a) && !is_mcast(a));
}

/* a multicast group, or a range "a.b.c.d/nn" (nn 16..32) of groups */
static bool valid_group(const char *s, size_t len)
{
	const char *slash = memchr(s, '/', len);
	struct in_addr a;
	uint64_t bits;

	if (!slash)
		return parse_ipv4(s, len, &a) && is_mcast(a);
	if (!parse_ipv4(s, (size_t)(slash - s), &a) || !is_mcast(a) ||
	    !parse_decimal(slash + 1, len - (size_t)(slash + 1 - s), &bits))
		return false;
	return bits >= 16 && bits <= 32;
}

/* empty, or the name of an interface that exists (in this namespace) */
static bool valid_ifname(const char *s, size_t len)
{
	char b[IF_NAMESIZE];
	if (len == 0)
		return true;
	return cstr(b, sizeof(b), s, len) && if_nametoindex(b) != 0;
}

static bool valid_impair(const char *s, size_t len)
{
	char b[64];
	struct flit_dgram_impair im;
	if (len == 0)
		return true;
	if (!cstr(b, sizeof(b), s, len))
		return false;
	return flit_dgram_impair_parse(b, &im) == 0;
}

#define FIELD(type, member) \
	.off = offsetof(struct type, member), \
	.size = sizeof(((struct type *)0)->member)

/* Every key, its default and its rule; docs/CONFIG.md mirrors this table. */
static const struct cfg_key keys[] = {
	{ .name = "context.domain", .scope = SCOPE_CONTEXT, .type = T_STRING,
	  .def = "default", FIELD(flit_cfg_context, domain),
	  .valid = valid_domain,
	  .rule = "must be 1 to 63 characters from A-Z a-z 0-9 _ . -" },
	{ .name = "context.shm_dir", .scope = SCOPE_CONTEXT, .type = T_STRING,
	  .def = "/dev/shm/flit", FIELD(flit_cfg_context, shm_dir),
	  .valid = valid_abs_path,
	  .rule = "must be an absolute path shorter than 256 characters" },
	{ .name = "context.log_level", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "warn", FIELD(flit_cfg_context, log_level),
	  .names = log_level_names },
	{ .name = "context.stats", .scope = SCOPE_CONTEXT, .type = T_BOOL,
	  .def = "on", FIELD(flit_cfg_context, stats) },
	{ .name = "context.stats_dir", .scope = SCOPE_CONTEXT, .type = T_STRING,
	  .def = "/dev/shm/flit-stats", FIELD(flit_cfg_context, stats_dir),
	  .valid = valid_abs_path,
	  .rule = "must be an absolute path shorter than 256 characters" },
	{ .name = "context.stats_interval_ms", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "100", FIELD(flit_cfg_context, stats_interval_ms),
	  .min = 1, .max = 60000 },
	{ .name = "context.stats_rows", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "256", FIELD(flit_cfg_context, stats_rows),
	  .min = 16, .max = 65536 },
	{ .name = "context.stats_file_mode", .scope = SCOPE_CONTEXT, .type = T_MODE,
	  .def = "0600", FIELD(flit_cfg_context, stats_file_mode),
	  .modes = shm_file_modes },

	{ .name = "context.transports", .scope = SCOPE_CONTEXT, .type = T_STRING,
	  .def = "shm,udp", FIELD(flit_cfg_context, transports),
	  .valid = valid_transport_list,
	  .rule = "must list transports from shm, udp, xdp (comma-separated; udp or xdp, not both) and rdma" },
	{ .name = "context.udp.interface", .scope = SCOPE_CONTEXT, .type = T_STRING,
	  .def = "", FIELD(flit_cfg_context, udp_interface),
	  .valid = valid_ifname,
	  .rule = "must name an existing network interface (or be empty)" },
	{ .name = "context.udp.resolver", .scope = SCOPE_CONTEXT, .type = T_STRING,
	  .def = "239.192.76.1:14400", FIELD(flit_cfg_context, udp_resolver),
	  .valid = valid_resolver,
	  .rule = "must be a multicast group:port (e.g. 239.192.76.1:14400) or off" },
	{ .name = "context.udp.resolver_max_ms", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "5000", FIELD(flit_cfg_context, udp_resolver_max_ms),
	  .min = 100, .max = 600000 },
	{ .name = "context.udp.resolver_rate_limit", .scope = SCOPE_CONTEXT, .type = T_RATE,
	  .def = "16M", FIELD(flit_cfg_context, udp_resolver_rate_limit),
	  .min = 0, .max = 1000000000000ull },
	{ .name = "context.udp.backend", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "sockets", FIELD(flit_cfg_context, udp_backend),
	  .names = udp_backend_names },
	{ .name = "context.udp.uring_send", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "socket", FIELD(flit_cfg_context, udp_uring_send),
	  .names = udp_uring_send_names },
	{ .name = "context.udp.uring_recv", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "recvmsg", FIELD(flit_cfg_context, udp_uring_recv),
	  .names = udp_uring_recv_names },
	{ .name = "context.udp.rx_batch", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "32", FIELD(flit_cfg_context, udp_rx_batch),
	  .min = 1, .max = 256 },
	{ .name = "context.udp.busy_poll_us", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "0", FIELD(flit_cfg_context, udp_busy_poll_us),
	  .min = 0, .max = 1000000 },
	{ .name = "context.udp.rcvbuf", .scope = SCOPE_CONTEXT, .type = T_SIZE,
	  .def = "4M", FIELD(flit_cfg_context, udp_rcvbuf),
	  .min = 4 * KIB, .max = GIB },
	{ .name = "context.udp.sndbuf", .scope = SCOPE_CONTEXT, .type = T_SIZE,
	  .def = "1M", FIELD(flit_cfg_context, udp_sndbuf),
	  .min = 4 * KIB, .max = GIB },
	{ .name = "context.udp.ttl", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "16", FIELD(flit_cfg_context, udp_ttl),
	  .min = 1, .max = 255 },
	{ .name = "context.udp.loopback", .scope = SCOPE_CONTEXT, .type = T_BOOL,
	  .def = "true", FIELD(flit_cfg_context, udp_loopback) },
	{ .name = "context.udp.timestamps", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "off", FIELD(flit_cfg_context, udp_timestamps),
	  .names = udp_ts_names },
	{ .name = "context.udp.tx_timestamps", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "off", FIELD(flit_cfg_context, udp_tx_timestamps),
	  .names = udp_ts_names },
	{ .name = "context.udp.service", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "thread", FIELD(flit_cfg_context, udp_service),
	  .names = udp_service_names },
	{ .name = "context.udp.impair", .scope = SCOPE_CONTEXT, .type = T_STRING,
	  .def = "", FIELD(flit_cfg_context, udp_impair),
	  .valid = valid_impair,
	  .rule = "must be like loss=5%,dup=1%,reorder=2%,seed=7 (tests only)" },
	{ .name = "context.xdp.mode", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "auto", FIELD(flit_cfg_context, xdp_mode),
	  .names = xdp_mode_names },
	{ .name = "context.xdp.attach", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "auto", FIELD(flit_cfg_context, xdp_attach),
	  .names = xdp_attach_names },
	{ .name = "context.xdp.queues", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "0", FIELD(flit_cfg_context, xdp_queues),
	  .min = 0, .max = 64 },
	{ .name = "context.xdp.frames", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "4096", FIELD(flit_cfg_context, xdp_frames),
	  .min = 64, .max = 1u << 20, .pow2 = true },
	{ .name = "context.xdp.frame_size", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "2048", FIELD(flit_cfg_context, xdp_frame_size),
	  .min = 2048, .max = 4096, .pow2 = true },
	{ .name = "context.xdp.ring_size", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "1024", FIELD(flit_cfg_context, xdp_ring_size),
	  .min = 64, .max = 1u << 16, .pow2 = true },
	{ .name = "context.xdp.hugepages", .scope = SCOPE_CONTEXT, .type = T_BOOL,
	  .def = "false", FIELD(flit_cfg_context, xdp_hugepages) },
	{ .name = "context.xdp.zerocopy", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "auto", FIELD(flit_cfg_context, xdp_zerocopy),
	  .names = xdp_zc_names },
	{ .name = "context.xdp.need_wakeup", .scope = SCOPE_CONTEXT, .type = T_BOOL,
	  .def = "true", FIELD(flit_cfg_context, xdp_need_wakeup) },
	{ .name = "context.xdp.tx_queue", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "shared", FIELD(flit_cfg_context, xdp_tx_queue),
	  .names = xdp_txq_names },
	{ .name = "context.xdp.busy_poll_us", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "0", FIELD(flit_cfg_context, xdp_busy_poll_us),
	  .min = 0, .max = 1000000 },
	{ .name = "context.xdp.busy_poll_budget", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "0", FIELD(flit_cfg_context, xdp_busy_poll_budget),
	  .min = 0, .max = 65535 },
	{ .name = "context.xdp.verify_checksums", .scope = SCOPE_CONTEXT, .type = T_BOOL,
	  .def = "true", FIELD(flit_cfg_context, xdp_verify_checksums) },
	{ .name = "context.xdp.filter", .scope = SCOPE_CONTEXT, .type = T_BOOL,
	  .def = "true", FIELD(flit_cfg_context, xdp_filter) },
	{ .name = "context.xdp.rx_timestamps", .scope = SCOPE_CONTEXT, .type = T_ENUM,
	  .def = "off", FIELD(flit_cfg_context, xdp_rx_timestamps),
	  .names = xdp_rx_ts_names },
	{ .name = "context.xdp.tx_timestamps", .scope = SCOPE_CONTEXT, .type = T_BOOL,
	  .def = "false", FIELD(flit_cfg_context, xdp_tx_timestamps) },
	{ .name = "context.rdma.address", .scope = SCOPE_CONTEXT, .type = T_STRING,
	  .def = "", FIELD(flit_cfg_context, rdma_address),
	  .valid = valid_rdma_addr,
	  .rule = "must be a unicast IPv4 address of an RDMA device's interface (or empty: all)" },
	{ .name = "context.rdma.port", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "14500", FIELD(flit_cfg_context, rdma_port),
	  .min = 0, .max = 65535 },
	{ .name = "context.rdma.multicast_depth", .scope = SCOPE_CONTEXT, .type = T_U32,
	  .def = "1024", FIELD(flit_cfg_context, rdma_mc_depth),
	  .min = 16, .max = 16384 },

	{ .name = "source.transport", .scope = SCOPE_SOURCE, .type = T_STRING,
	  .def = "shm", FIELD(flit_cfg_source, transport),
	  .valid = valid_transport, .rule = "must be shm, udp or xdp, or rdma" },
	{ .name = "source.shm.mode", .scope = SCOPE_SOURCE, .type = T_ENUM,
	  .def = "paced", FIELD(flit_cfg_source, shm_mode),
	  .names = shm_mode_names },
	{ .name = "source.shm.capacity", .scope = SCOPE_SOURCE, .type = T_SIZE,
	  .def = "1M", FIELD(flit_cfg_source, shm_capacity),
	  .min = 64 * KIB, .max = GIB, .pow2 = true },
	{ .name = "source.shm.max_readers", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "16", FIELD(flit_cfg_source, shm_max_readers),
	  .min = 1, .max = 1024 },
	{ .name = "source.shm.file_mode", .scope = SCOPE_SOURCE, .type = T_MODE,
	  .def = "0600", FIELD(flit_cfg_source, shm_file_mode),
	  .modes = shm_file_modes },
	{ .name = "source.shm.liveness_ms", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "10", FIELD(flit_cfg_source, shm_liveness_ms),
	  .min = 1, .max = 10000 },
	{ .name = "source.timestamps", .scope = SCOPE_SOURCE, .type = T_BOOL,
	  .def = "false", FIELD(flit_cfg_source, timestamps) },
	{ .name = "source.late_join", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "0", FIELD(flit_cfg_source, late_join),
	  .min = 0, .max = 16777216 },
	{ .name = "source.session", .scope = SCOPE_SOURCE, .type = T_STRING,
	  .def = "", FIELD(flit_cfg_source, session),
	  .valid = valid_session,
	  .rule = "must be empty or 1 to 63 characters from A-Z a-z 0-9 _ . -" },
	{ .name = "source.batch", .scope = SCOPE_SOURCE, .type = T_BOOL,
	  .def = "false", FIELD(flit_cfg_source, batch) },
	{ .name = "source.batch_max", .scope = SCOPE_SOURCE, .type = T_SIZE,
	  .def = "8K", FIELD(flit_cfg_source, batch_max),
	  .min = 256, .max = MIB },

	{ .name = "source.udp.mode", .scope = SCOPE_SOURCE, .type = T_ENUM,
	  .def = "multicast", FIELD(flit_cfg_source, udp_mode),
	  .names = udp_mode_names },
	{ .name = "source.udp.group", .scope = SCOPE_SOURCE, .type = T_STRING,
	  .def = "239.192.77.0/24", FIELD(flit_cfg_source, udp_group),
	  .valid = valid_group,
	  .rule = "must be a multicast group or range a.b.c.d/nn (nn 16..32)" },
	{ .name = "source.udp.port", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "14401", FIELD(flit_cfg_source, udp_port),
	  .min = 1, .max = 65535 },
	{ .name = "source.udp.ctl_port", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "0", FIELD(flit_cfg_source, udp_ctl_port),
	  .min = 0, .max = 65535 },
	{ .name = "source.udp.max_datagram", .scope = SCOPE_SOURCE, .type = T_SIZE,
	  .def = "1472", FIELD(flit_cfg_source, udp_max_datagram),
	  .min = 128, .max = 65507 },
	{ .name = "source.udp.batch_min", .scope = SCOPE_SOURCE, .type = T_SIZE,
	  .def = "0", FIELD(flit_cfg_source, udp_batch_min),
	  .min = 0, .max = 65507 },
	{ .name = "source.udp.batch_interval_us", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "1000", FIELD(flit_cfg_source, udp_batch_interval_us),
	  .min = 1, .max = 10000000 },
	{ .name = "source.udp.rate_limit", .scope = SCOPE_SOURCE, .type = T_RATE,
	  .def = "0", FIELD(flit_cfg_source, udp_rate_limit),
	  .min = 0, .max = 1000000000000ull },
	{ .name = "source.udp.retx_rate_limit", .scope = SCOPE_SOURCE, .type = T_RATE,
	  .def = "0", FIELD(flit_cfg_source, udp_retx_rate_limit),
	  .min = 0, .max = 1000000000000ull },
	{ .name = "source.udp.retain", .scope = SCOPE_SOURCE, .type = T_SIZE,
	  .def = "16M", FIELD(flit_cfg_source, udp_retain),
	  .min = 64 * KIB, .max = GIB },
	{ .name = "source.udp.retain_ms", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "5000", FIELD(flit_cfg_source, udp_retain_ms),
	  .min = 1, .max = 600000 },
	{ .name = "source.udp.hb_min_ms", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "5", FIELD(flit_cfg_source, udp_hb_min_ms),
	  .min = 1, .max = 60000 },
	{ .name = "source.udp.hb_max_ms", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "1000", FIELD(flit_cfg_source, udp_hb_max_ms),
	  .min = 1, .max = 600000 },
	{ .name = "source.udp.topic_numbers", .scope = SCOPE_SOURCE, .type = T_ENUM,
	  .def = "short", FIELD(flit_cfg_source, udp_topic_numbers),
	  .names = udp_topic_numbers_names },
	{ .name = "source.rdma.mode", .scope = SCOPE_SOURCE, .type = T_ENUM,
	  .def = "send", FIELD(flit_cfg_source, rdma_mode),
	  .names = rdma_mode_names },
	{ .name = "source.rdma.frame_max", .scope = SCOPE_SOURCE, .type = T_SIZE,
	  .def = "8K", FIELD(flit_cfg_source, rdma_frame_max),
	  .min = 256, .max = 16 * MIB },
	{ .name = "source.rdma.slots", .scope = SCOPE_SOURCE, .type = T_U32,
	  .def = "64", FIELD(flit_cfg_source, rdma_slots),
	  .min = 8, .max = 4096, .pow2 = true },
	{ .name = "source.rdma.inline", .scope = SCOPE_SOURCE, .type = T_SIZE,
	  .def = "256", FIELD(flit_cfg_source, rdma_inline),
	  .min = 0, .max = 4096 },

	{ .name = "receiver.timestamps", .scope = SCOPE_RECEIVER, .type = T_BOOL,
	  .def = "false", FIELD(flit_cfg_receiver, timestamps) },
	{ .name = "receiver.late_join", .scope = SCOPE_RECEIVER, .type = T_BOOL,
	  .def = "false", FIELD(flit_cfg_receiver, late_join) },
	{ .name = "receiver.shm.liveness_ms", .scope = SCOPE_RECEIVER, .type = T_U32,
	  .def = "10", FIELD(flit_cfg_receiver, shm_liveness_ms),
	  .min = 1, .max = 10000 },
	{ .name = "receiver.discovery_ms", .scope = SCOPE_RECEIVER, .type = T_U32,
	  .def = "100", FIELD(flit_cfg_receiver, discovery_ms),
	  .min = 1, .max = 60000 },
	{ .name = "receiver.udp.nak_backoff_us", .scope = SCOPE_RECEIVER, .type = T_U32,
	  .def = "2000", FIELD(flit_cfg_receiver, udp_nak_backoff_us),
	  .min = 0, .max = 10000000 },
	{ .name = "receiver.udp.nak_interval_ms", .scope = SCOPE_RECEIVER, .type = T_U32,
	  .def = "10", FIELD(flit_cfg_receiver, udp_nak_interval_ms),
	  .min = 1, .max = 60000 },
	{ .name = "receiver.udp.nak_timeout_ms", .scope = SCOPE_RECEIVER, .type = T_U32,
	  .def = "2000", FIELD(flit_cfg_receiver, udp_nak_timeout_ms),
	  .min = 1, .max = 3600000 },
	{ .name = "receiver.udp.reorder", .scope = SCOPE_RECEIVER, .type = T_SIZE,
	  .def = "4M", FIELD(flit_cfg_receiver, udp_reorder),
	  .min = 64 * KIB, .max = GIB },
	{ .name = "receiver.udp.session_timeout_ms", .scope = SCOPE_RECEIVER, .type = T_U32,
	  .def = "5000", FIELD(flit_cfg_receiver, udp_session_timeout_ms),
	  .min = 100, .max = 3600000 },
	{ .name = "receiver.udp.static", .scope = SCOPE_RECEIVER, .type = T_STRING,
	  .def = "", FIELD(flit_cfg_receiver, udp_static),
	  .valid = valid_static,
	  .rule = "must be address:port (a multicast group to listen on, or a source's unicast control address)" },
	{ .name = "receiver.rdma.static", .scope = SCOPE_RECEIVER, .type = T_STRING,
	  .def = "", FIELD(flit_cfg_receiver, rdma_static),
	  .valid = valid_rdma_static,
	  .rule = "must be a unicast address:port (where the source's context listens: context.rdma.address/port)" },
	{ .name = "receiver.rdma.depth", .scope = SCOPE_RECEIVER, .type = T_U32,
	  .def = "64", FIELD(flit_cfg_receiver, rdma_depth),
	  .min = 4, .max = 4096 },
	{ .name = "receiver.rdma.frame_max", .scope = SCOPE_RECEIVER, .type = T_SIZE,
	  .def = "16K", FIELD(flit_cfg_receiver, rdma_frame_max),
	  .min = 256, .max = 16 * MIB },
	{ .name = "receiver.rdma.retry_ms", .scope = SCOPE_RECEIVER, .type = T_U32,
	  .def = "200", FIELD(flit_cfg_receiver, rdma_retry_ms),
	  .min = 1, .max = 60000 },
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

struct flit_cfg_entry {
	unsigned key;           /* index in keys[] */
	char *glob;             /* topic pattern of its section, NULL: any */
	char *origin;           /* file name, "environment FLIT_X", ... */
	unsigned line;          /* 0: the origin has no lines */
	uint64_t u;             /* T_ENUM, T_BOOL, T_U32, T_SIZE, T_MODE */
	char *s;                /* T_STRING */
};

/* A value checked against its key; s points into the text it came from. */
struct cfg_value {
	uint64_t u;
	const char *s;
	size_t len;
};

/* ---- values ------------------------------------------------------------ */

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* s[0..len) equals the NUL-terminated word, ignoring ASCII case. */
static bool word_eq(const char *s, size_t len, const char *word)
{
	size_t i = 0;

	for (; i < len && word[i]; i++)
		if (lower(s[i]) != lower(word[i]))
			return false;
	return i == len && !word[i];
}

static bool parse_decimal(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (!len)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return true;
}

static bool parse_value(const struct cfg_key *k, const char *s, size_t len,
			struct cfg_value *v)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	uint64_t u, mult = 1;

	v->s = s;
	v->len = len;
	v->u = 0;
	switch (k->type) {
	case T_STRING:
		return len < k->size && k->valid(s, len);
	case T_ENUM:
		for (unsigned i = 0; k->names[i]; i++) {
			if (word_eq(s, len, k->names[i])) {
				v->u = i;
				return true;
			}
		}
		return false;
	case T_BOOL:
		for (unsigned i = 0; i < 4; i++) {
			if (word_eq(s, len, yes[i])) {
				v->u = 1;
				return true;
			}
			if (word_eq(s, len, no[i]))
				return true;
		}
		return false;
	case T_U32:
		if (!parse_decimal(s, len, &u) || u < k->min || u > k->max ||
		    (k->pow2 && (u & (u - 1))))
			return false;
		v->u = u;
		return true;
	case T_SIZE:
		if (len) {
			switch (s[len - 1]) {
			case 'K': case 'k': mult = KIB; break;
			case 'M': case 'm': mult = MIB; break;
			case 'G': case 'g': mult = GIB; break;
			}
			if (mult != 1)
				len--;
		}
		if (!parse_decimal(s, len, &u) || u > UINT64_MAX / mult)
			return false;
		u *= mult;
		if (u < k->min || u > k->max || (k->pow2 && (u & (u - 1))))
			return false;
		v->u = u;
		return true;
	case T_RATE:
		if (len) {
			switch (s[len - 1]) {
			case 'K': case 'k': mult = 1000; break;
			case 'M': case 'm': mult = 1000000; break;
			case 'G': case 'g': mult = 1000000000; break;
			}
			if (mult != 1)
				len--;
		}
		if (!parse_decimal(s, len, &u) || u > UINT64_MAX / mult)
			return false;
		u *= mult;
		if (u < k->min || u > k->max)
			return false;
		v->u = u;
		return true;
	case T_MODE:
		/* "0640" or "640"; at most 5 digits keeps the value small */
		if (len < 1 || len > 5)
			return false;
		u = 0;
		for (size_t i = 0; i < len; i++) {
			if (s[i] < '0' || s[i] > '7')
				return false;
			u = u * 8 + (uint64_t)(s[i] - '0');
		}
		for (const uint32_t *m = k->modes; *m; m++) {
			if (*m == u) {
				v->u = u;
				return true;
			}
		}
		return false;
	}
	return false;
}

static void fmt_size(char *buf, size_t n, uint64_t v)
{
	if (v && !(v % GIB))
		snprintf(buf, n, "%lluG", (unsigned long long)(v / GIB));
	else if (v && !(v % MIB))
		snprintf(buf, n, "%lluM", (unsigned long long)(v / MIB));
	else if (v && !(v % KIB))
		snprintf(buf, n, "%lluK", (unsigned long long)(v / KIB));
	else
		snprintf(buf, n, "%llu", (unsigned long long)v);
}

/* "must be ...": what key k accepts, for error messages. */
static void describe(const struct cfg_key *k, char *buf, size_t n)
{
	char lo[32], hi[32];
	size_t cnt = 0, off;

	switch (k->type) {
	case T_STRING:
		snprintf(buf, n, "%s", k->rule);
		return;
	case T_BOOL:
		snprintf(buf, n, "must be true or false (or yes/no, on/off, 1/0)");
		return;
	case T_RATE:
		snprintf(buf, n, "must be bits per second, e.g. 100M or 2.5G as 2500M (0: no limit)");
		return;
	case T_U32:
		snprintf(buf, n, "must be %san integer between %llu and %llu",
			 k->pow2 ? "a power of two, " : "", (unsigned long long)k->min,
			 (unsigned long long)k->max);
		return;
	case T_SIZE:
		fmt_size(lo, sizeof(lo), k->min);
		fmt_size(hi, sizeof(hi), k->max);
		snprintf(buf, n, "must be %sbetween %s and %s",
			 k->pow2 ? "a power of two " : "", lo, hi);
		return;
	case T_ENUM:
		while (k->names[cnt])
			cnt++;
		break;
	case T_MODE:
		while (k->modes[cnt])
			cnt++;
		break;
	}
	/* "must be a, b or c" */
	off = (size_t)snprintf(buf, n, "must be ");
	for (size_t i = 0; i < cnt && off < n; i++) {
		const char *sep = i == 0 ? "" : i + 1 == cnt ? " or " : ", ";
		if (k->type == T_ENUM)
			off += (size_t)snprintf(buf + off, n - off, "%s%s", sep,
						k->names[i]);
		else
			off += (size_t)snprintf(buf + off, n - off, "%s0%o", sep,
						(unsigned)k->modes[i]);
	}
}

static void store(const struct cfg_key *k, void *base, const struct cfg_value *v)
{
	char *p = (char *)base + k->off;

	switch (k->type) {
	case T_STRING:
		memcpy(p, v->s, v->len); /* len < size: checked by parse_value */
		p[v->len] = '\0';
		break;
	case T_ENUM: {
		int x = (int)v->u;
		memcpy(p, &x, sizeof(x));
		break;
	}
	case T_BOOL: {
		bool b = v->u != 0;
		memcpy(p, &b, sizeof(b));
		break;
	}
	case T_U32:
	case T_SIZE:
	case T_MODE:
	case T_RATE:
		if (k->size == sizeof(uint64_t)) {
			uint64_t x = v->u;
			memcpy(p, &x, sizeof(x));
		} else {
			uint32_t x = (uint32_t)v->u;
			memcpy(p, &x, sizeof(x));
		}
		break;
	}
}

static int lookup_key(const char *name, size_t len)
{
	for (unsigned i = 0; i < NKEYS; i++)
		if (word_eq(name, len, keys[i].name))
			return (int)i;
	return -1;
}

/* ---- entries ----------------------------------------------------------- */

static void entry_free(struct flit_cfg_entry *e)
{
	free(e->glob);
	free(e->origin);
	free(e->s);
}

static void truncate_entries(struct flit_cfg *cfg, unsigned n)
{
	while (cfg->n > n)
		entry_free(&cfg->entries[--cfg->n]);
}

void flit_cfg_init(struct flit_cfg *cfg)
{
	cfg->entries = NULL;
	cfg->n = cfg->cap = 0;
}

void flit_cfg_free(struct flit_cfg *cfg)
{
	if (!cfg)
		return;
	truncate_entries(cfg, 0);
	free(cfg->entries);
	flit_cfg_init(cfg);
}

/* What is being parsed and where: the source of every error message. */
struct parser {
	struct flit_cfg *cfg;
	const char *origin;
	unsigned line;          /* 0: the origin has no lines (environment) */
	enum cfg_scope scope;   /* current section, SCOPE_NONE before any */
	char *glob;             /* current topic section's pattern, or NULL */
	bool object;            /* an object's options: one scope, no sections */
};

__attribute__((format(printf, 2, 3)))
static int parse_err(const struct parser *ps, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ps->line)
		return flit_err(EINVAL, "%s:%u: %s", ps->origin, ps->line, msg);
	return flit_err(EINVAL, "%s: %s", ps->origin, msg);
}

static int echo_len(size_t len)
{
	return (int)(len > ECHO_MAX ? ECHO_MAX : len);
}

static const char *echo_more(size_t len)
{
	return len > ECHO_MAX ? "..." : "";
}

static int add_entry(struct parser *ps, unsigned key, const struct cfg_value *v)
{
	struct flit_cfg *cfg = ps->cfg;
	struct flit_cfg_entry *e;

	if (cfg->n == cfg->cap) {
		unsigned cap = cfg->cap ? cfg->cap * 2 : 16;
		void *p;

		if (cap < cfg->cap)
			return parse_err(ps, "too many configuration entries");
		p = realloc(cfg->entries, (size_t)cap * sizeof(*e));
		if (!p)
			goto nomem;
		cfg->entries = p;
		cfg->cap = cap;
	}
	e = &cfg->entries[cfg->n];
	memset(e, 0, sizeof(*e));
	e->key = key;
	e->line = ps->line;
	e->u = v->u;
	e->origin = strdup(ps->origin);
	if (ps->glob)
		e->glob = strdup(ps->glob);
	if (keys[key].type == T_STRING)
		e->s = strndup(v->s, v->len);
	if (!e->origin || (ps->glob && !e->glob) ||
	    (keys[key].type == T_STRING && !e->s)) {
		entry_free(e);
		goto nomem;
	}
	cfg->n++;
	return 0;
nomem:
	if (ps->line)
		return flit_err(ENOMEM, "%s:%u: out of memory", ps->origin, ps->line);
	return flit_err(ENOMEM, "%s: out of memory", ps->origin);
}

/* Validate `s` as the value of key `key` and append it. */
static int set_value(struct parser *ps, unsigned key, const char *s, size_t len)
{
	const struct cfg_key *k = &keys[key];
	struct cfg_value v;
	char rule[256];

	if (!parse_value(k, s, len, &v)) {
		describe(k, rule, sizeof(rule));
		return parse_err(ps, "bad value '%.*s%s' for %s: %s",
				 echo_len(len), s, echo_more(len), k->name, rule);
	}
	return add_entry(ps, key, &v);
}

/* ---- syntax ------------------------------------------------------------ */

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static char *skip_ws(char *p)
{
	while (is_ws(*p))
		p++;
	return p;
}

static bool is_comment(char c)
{
	return c == '#' || c == ';';
}

static void section_name(const struct parser *ps, char *buf, size_t n)
{
	if (ps->object)
		snprintf(buf, n, "%s options", scope_names[ps->scope]);
	else if (ps->glob)
		snprintf(buf, n, "[%s \"%.*s%s\"]", scope_names[ps->scope],
			 echo_len(strlen(ps->glob)), ps->glob,
			 echo_more(strlen(ps->glob)));
	else
		snprintf(buf, n, "[%s]", scope_names[ps->scope]);
}

/* Unquote, in place, the string that starts at the '"' p points to: \" and
 * \\ are escapes, any other backslash is kept (fnmatch patterns use it).
 * *start gets the unquoted NUL-terminated text, *end what follows it. */
static int unquote(const struct parser *ps, char *p, char **start, char **end)
{
	char *r = p + 1, *w = p + 1;

	for (;;) {
		if (*r == '\0')
			return parse_err(ps, "unterminated quoted string");
		if (*r == '"')
			break;
		if (*r == '\\' && (r[1] == '"' || r[1] == '\\'))
			r++;
		*w++ = *r++;
	}
	*start = p + 1;
	*end = r + 1;
	*w = '\0'; /* may overwrite the closing quote: *end is past it */
	return 0;
}

/* "[scope]" or "[scope "topic pattern"]", p at the '['. */
static int parse_section(struct parser *ps, char *p)
{
	char *name, *glob = NULL, *copy = NULL;
	size_t nlen;
	int rc, scope = -1;

	if (ps->object)
		return parse_err(ps, "sections are not allowed in %s options",
				 scope_names[ps->scope]);
	name = p = skip_ws(p + 1);
	while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
	       (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-')
		p++;
	nlen = (size_t)(p - name);
	p = skip_ws(p);
	if (*p == '"') {
		if ((rc = unquote(ps, p, &glob, &p)))
			return rc;
		p = skip_ws(p);
	}
	if (*p != ']') {
		if (!strchr(p, ']'))
			return parse_err(ps, "unterminated section header (missing ']')");
		return parse_err(ps, "bad section header: expected [scope] or [scope \"topic pattern\"]");
	}
	p = skip_ws(p + 1);
	if (*p && !is_comment(*p))
		return parse_err(ps, "unexpected text after section header");

	for (int i = 0; i < SCOPE__MAX; i++)
		if (word_eq(name, nlen, scope_names[i]))
			scope = i;
	if (scope < 0)
		return parse_err(ps, "unknown section '%.*s%s' (expected context, source or receiver)",
				 echo_len(nlen), name, echo_more(nlen));
	if (glob) {
		if (scope == SCOPE_CONTEXT)
			return parse_err(ps, "section [context] cannot be topic-specific");
		if (!*glob)
			return parse_err(ps, "empty topic pattern in section header");
		if (!(copy = strdup(glob)))
			return flit_err(ENOMEM, "%s:%u: out of memory", ps->origin, ps->line);
	}
	free(ps->glob);
	ps->glob = copy;
	ps->scope = (enum cfg_scope)scope;
	return 0;
}

/* Map a key as written to the key table, given the current section.  Inside
 * a section a key is relative ("shm.mode") or qualified with the section's
 * own scope ("source.shm.mode").  Returns the key index or -EINVAL. */
static int resolve_key(const struct parser *ps, const char *key, size_t klen)
{
	int qual = -1, idx;
	char where[128];

	for (int i = 0; i < SCOPE__MAX; i++) {
		size_t sl = strlen(scope_names[i]);
		if (klen > sl && key[sl] == '.' && word_eq(key, sl, scope_names[i]))
			qual = i;
	}
	if (qual < 0 && ps->scope != SCOPE_NONE) {
		char full[KEY_LEN_MAX + 1];
		int n = snprintf(full, sizeof(full), "%s.%.*s",
				 scope_names[ps->scope], (int)klen, key);

		idx = n > 0 && (size_t)n < sizeof(full) ? lookup_key(full, (size_t)n) : -1;
		if (idx < 0)
			return parse_err(ps, "unknown key '%s.%.*s%s'",
					 scope_names[ps->scope], echo_len(klen),
					 key, echo_more(klen));
		return idx;
	}
	idx = lookup_key(key, klen);
	if (idx < 0)
		return parse_err(ps, "unknown key '%.*s%s'", echo_len(klen), key,
				 echo_more(klen));
	if (ps->scope != SCOPE_NONE && qual != (int)ps->scope) {
		section_name(ps, where, sizeof(where));
		if (qual == SCOPE_CONTEXT && ps->glob)
			return parse_err(ps, "context key '%s' not allowed in topic section %s",
					 keys[idx].name, where);
		return parse_err(ps, "key '%s' not allowed in %s", keys[idx].name,
				 where);
	}
	return idx;
}

/* "key = value", s at the first non-blank character. */
static int parse_kv(struct parser *ps, char *s)
{
	char *eq = strchr(s, '='), *kend, *v, *vend;
	int idx, rc;

	if (!eq)
		return parse_err(ps, "expected 'key = value'");
	kend = eq;
	while (kend > s && is_ws(kend[-1]))
		kend--;
	if (kend == s)
		return parse_err(ps, "expected 'key = value'");

	v = skip_ws(eq + 1);
	if (*v == '"') {
		char *rest;

		if ((rc = unquote(ps, v, &v, &rest)))
			return rc;
		rest = skip_ws(rest);
		if (*rest && !is_comment(*rest))
			return parse_err(ps, "unexpected text after quoted value");
		vend = v + strlen(v);
	} else {
		/* '#' or ';' starts a comment at the start of the value or
		 * after a blank; "a#b" is a value. */
		for (vend = v; *vend; vend++)
			if (is_comment(*vend) && (vend == v || is_ws(vend[-1])))
				break;
		while (vend > v && is_ws(vend[-1]))
			vend--;
	}

	idx = resolve_key(ps, s, (size_t)(kend - s));
	if (idx < 0)
		return idx;
	return set_value(ps, (unsigned)idx, v, (size_t)(vend - v));
}

/* One line, NUL-terminated at len in a writable buffer. */
static int parse_line(struct parser *ps, char *line, size_t len)
{
	char *s;

	if (strlen(line) != len)
		return parse_err(ps, "NUL byte in line");
	s = skip_ws(line);
	if (!*s || is_comment(*s))
		return 0;
	if (*s == '[')
		return parse_section(ps, s);
	return parse_kv(ps, s);
}

static int line_too_long(const struct parser *ps)
{
	return parse_err(ps, "line too long (more than %d bytes)", LINE_LEN_MAX);
}

/* Parse text into cfg, all or nothing.  object_scope != SCOPE_NONE: an
 * object's options, whose keys are in that scope. */
static int load_text(struct flit_cfg *cfg, const char *text, const char *origin,
		     enum cfg_scope object_scope)
{
	struct parser ps = {
		.cfg = cfg,
		.origin = origin,
		.scope = object_scope,
		.object = object_scope != SCOPE_NONE,
	};
	unsigned n0 = cfg->n;
	char buf[LINE_LEN_MAX + 1];
	int rc = 0;

	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t len = nl ? (size_t)(nl - text) : strlen(text);

		ps.line++;
		if (len > LINE_LEN_MAX) {
			rc = line_too_long(&ps);
			break;
		}
		memcpy(buf, text, len);
		buf[len] = '\0';
		if ((rc = parse_line(&ps, buf, len)) || !nl)
			break;
		text = nl + 1;
	}
	free(ps.glob);
	if (rc)
		truncate_entries(cfg, n0);
	return rc;
}

int flit_cfg_load_string(struct flit_cfg *cfg, const char *text,
			 const char *origin)
{
	if (!text)
		return 0;
	return load_text(cfg, text, origin ? origin : "<string>", SCOPE_NONE);
}

int flit_cfg_load_file(struct flit_cfg *cfg, const char *path)
{
	struct parser ps = { .cfg = cfg, .origin = path, .scope = SCOPE_NONE };
	unsigned n0 = cfg->n;
	char buf[LINE_LEN_MAX + 1];
	int rc = 0;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return flit_err(errno, "config file %s: cannot open", path);
	for (;;) {
		bool too_long = false;
		size_t len = 0;
		int c;

		while ((c = getc_unlocked(f)) != EOF && c != '\n') {
			if (len == LINE_LEN_MAX) {
				too_long = true;
				break;
			}
			buf[len++] = (char)c;
		}
		if (c == EOF && ferror(f)) {
			rc = flit_err(errno ? errno : EIO, "config file %s: cannot read", path);
			break;
		}
		if (c == EOF && len == 0)
			break;
		ps.line++;
		if (too_long) {
			rc = line_too_long(&ps);
			break;
		}
		buf[len] = '\0';
		if ((rc = parse_line(&ps, buf, len)) || c == EOF)
			break;
	}
	fclose(f);
	free(ps.glob);
	if (rc)
		truncate_entries(cfg, n0);
	return rc;
}

/* Does "SOURCE_SHM_MAX_READERS" (any case) name "source.shm.max_readers"? */
static bool env_names_key(const char *var, size_t len, const char *key)
{
	size_t i = 0;

	for (; *key; key++, i++) {
		if (i == len)
			return false;
		if (*key == '.' || *key == '_') {
			if (var[i] != '_')
				return false;
		} else if (lower(var[i]) != *key) {
			return false;
		}
	}
	return i == len;
}

int flit_cfg_load_env(struct flit_cfg *cfg)
{
	static const char *const prefixes[SCOPE__MAX] = {
		[SCOPE_CONTEXT] = "FLIT_CONTEXT_",
		[SCOPE_SOURCE] = "FLIT_SOURCE_",
		[SCOPE_RECEIVER] = "FLIT_RECEIVER_",
	};
	unsigned n0 = cfg->n;
	int rc = 0;

	/* Only the three scope prefixes are ours: FLIT_CONFIG names the file
	 * and other FLIT_ variables may belong to tools or scripts. */
	for (char **ep = environ; ep && *ep && !rc; ep++) {
		const char *var = *ep, *eq = strchr(var, '=');
		char origin[192], shown[KEY_LEN_MAX + 16];
		struct parser ps = { .cfg = cfg, .origin = origin, .scope = SCOPE_NONE };
		int scope = -1, idx = -1;
		size_t nlen, plen, off;

		if (!eq || strncmp(var, "FLIT_", 5))
			continue;
		nlen = (size_t)(eq - var);
		for (int i = 0; i < SCOPE__MAX; i++)
			if (!strncmp(var, prefixes[i], strlen(prefixes[i])))
				scope = i;
		if (scope < 0)
			continue;
		snprintf(origin, sizeof(origin), "environment %.*s%s",
			 (int)(nlen > 160 ? 160 : nlen), var, nlen > 160 ? "..." : "");
		for (unsigned i = 0; i < NKEYS && idx < 0; i++)
			if (env_names_key(var + 5, nlen - 5, keys[i].name))
				idx = (int)i;
		if (idx >= 0) {
			rc = set_value(&ps, (unsigned)idx, eq + 1, strlen(eq + 1));
			continue;
		}
		/* FLIT_SOURCE_FOO_BAR -> "source.foo_bar" */
		plen = strlen(prefixes[scope]);
		off = (size_t)snprintf(shown, sizeof(shown), "%s.", scope_names[scope]);
		for (size_t i = plen; i < nlen && off + 1 < sizeof(shown); i++)
			shown[off++] = lower(var[i]);
		shown[off] = '\0';
		rc = parse_err(&ps, "unknown key '%s'", shown);
	}
	if (rc)
		truncate_entries(cfg, n0);
	return rc;
}

/* ---- resolution -------------------------------------------------------- */

static void apply_defaults(enum cfg_scope scope, void *base)
{
	struct cfg_value v;

	for (unsigned i = 0; i < NKEYS; i++)
		if (keys[i].scope == scope &&
		    parse_value(&keys[i], keys[i].def, strlen(keys[i].def), &v))
			store(&keys[i], base, &v);
}

static void apply_entry(const struct flit_cfg_entry *e, void *base)
{
	struct cfg_value v = { .u = e->u, .s = e->s, .len = e->s ? strlen(e->s) : 0 };

	store(&keys[e->key], base, &v);
}

/* Defaults, then cfg's entries for `scope` (unscoped ones, then the topic
 * sections matching `topic`, each in load order), then `extra`.  *out is
 * written only on success. */
static int resolve(const struct flit_cfg *cfg, enum cfg_scope scope,
		   const char *topic, const char *extra, void *out, size_t size)
{
	union {
		struct flit_cfg_context c;
		struct flit_cfg_source s;
		struct flit_cfg_receiver r;
	} tmp;
	struct flit_cfg x;
	int rc;

	memset(&tmp, 0, sizeof(tmp));
	apply_defaults(scope, &tmp);
	for (unsigned i = 0; cfg && i < cfg->n; i++) {
		const struct flit_cfg_entry *e = &cfg->entries[i];
		if (keys[e->key].scope == scope && !e->glob)
			apply_entry(e, &tmp);
	}
	for (unsigned i = 0; cfg && topic && i < cfg->n; i++) {
		const struct flit_cfg_entry *e = &cfg->entries[i];
		if (keys[e->key].scope == scope && e->glob &&
		    !fnmatch(e->glob, topic, 0))
			apply_entry(e, &tmp);
	}
	if (extra) {
		flit_cfg_init(&x);
		rc = load_text(&x, extra, "<object options>", scope);
		for (unsigned i = 0; !rc && i < x.n; i++)
			apply_entry(&x.entries[i], &tmp);
		flit_cfg_free(&x);
		if (rc)
			return rc;
	}
	memcpy(out, &tmp, size);
	return 0;
}

int flit_cfg_context(const struct flit_cfg *cfg, struct flit_cfg_context *out)
{
	return resolve(cfg, SCOPE_CONTEXT, NULL, NULL, out, sizeof(*out));
}

int flit_cfg_source(const struct flit_cfg *cfg, const char *topic,
		    const char *extra, struct flit_cfg_source *out)
{
	return resolve(cfg, SCOPE_SOURCE, topic, extra, out, sizeof(*out));
}

int flit_cfg_receiver(const struct flit_cfg *cfg, const char *topic,
		      const char *extra, struct flit_cfg_receiver *out)
{
	return resolve(cfg, SCOPE_RECEIVER, topic, extra, out, sizeof(*out));
}

void flit_ep_parse(const char *s, struct sockaddr_in *a)
{
	char b[FLIT_ENDPOINT_MAX];
	snprintf(b, sizeof(b), "%s", s);
	char *colon = strchr(b, ':');
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	if (!colon)
		return;
	*colon = '\0';
	inet_pton(AF_INET, b, &a->sin_addr);
	a->sin_port = htons((uint16_t)atoi(colon + 1));
}

const char *flit_ep_str(const struct sockaddr_in *a, char *buf, size_t n)
{
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
	snprintf(buf, n, "%s:%u", ip, ntohs(a->sin_port));
	return buf;
}
