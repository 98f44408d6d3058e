// SPDX-License-Identifier: BSD-2-Clause
/* Code shared by the flit tools.  See tool.h. */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

/* A CLI's own state: who we are, what to print on misuse, how loud. */
static const char *prog = "flit";
static const char *usage_text = "";
static int verbose;

void tool_init(const char *name, const char *usage)
{
	prog = name;
	usage_text = usage;
	opterr = 0;     /* we report option errors ourselves */
}

const char *tool_name(void)
{
	return prog;
}

noreturn void tool_help_exit(void)
{
	fputs(usage_text, stdout);
	exit(0);
}

noreturn void tool_usage_exit(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fputs(usage_text, stderr);
	exit(2);
}

noreturn void tool_fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void tool_warn(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

noreturn void tool_getopt_error(int c, char *const argv[])
{
	/* getopt_long leaves the offending word at argv[optind - 1] for long
	 * options and for a short option ending its word; optopt names a
	 * short option. */
	const char *word = optind > 0 ? argv[optind - 1] : "?";

	if (c == ':') {
		if (optopt)
			tool_usage_exit("option '-%c' needs an argument", optopt);
		tool_usage_exit("option '%s' needs an argument", word);
	}
	if (optopt)
		tool_usage_exit("unknown option '-%c'", optopt);
	tool_usage_exit("unknown option '%s'", word);
}

/* ---- argument parsing ----------------------------------------------------- */

static uint64_t parse_scaled(const char *what, const char *arg, uint64_t min,
			     uint64_t max, bool binary)
{
	uint64_t v, mult = 1;
	char *end;

	if (!arg || !*arg || *arg == '-' || *arg == '+' || *arg == ' ')
		tool_usage_exit("bad %s '%s': not a number", what, arg ? arg : "");
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg)
		tool_usage_exit("bad %s '%s': not a number", what, arg);
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mult = binary ? 1024 : 1000; end++; break;
	case 'm': case 'M': mult = binary ? 1024 * 1024 : 1000000; end++; break;
	case 'g': case 'G': mult = binary ? 1024ull * 1024 * 1024 : 1000000000; end++; break;
	}
	if (*end)
		tool_usage_exit("bad %s '%s': trailing '%s'", what, arg, end);
	if (v > UINT64_MAX / mult)
		tool_usage_exit("bad %s '%s': too large", what, arg);
	v *= mult;
	if (v < min || v > max)
		tool_usage_exit("bad %s '%s': must be %llu..%llu", what, arg,
				(unsigned long long)min, (unsigned long long)max);
	return v;
}

uint64_t tool_parse_count(const char *what, const char *arg, uint64_t min,
			  uint64_t max)
{
	return parse_scaled(what, arg, min, max, false);
}

uint64_t tool_parse_size(const char *what, const char *arg, uint64_t min,
			 uint64_t max)
{
	return parse_scaled(what, arg, min, max, true);
}

double tool_parse_seconds(const char *what, const char *arg, double min,
			  double max)
{
	char *end;
	double v;

	if (!arg || !*arg)
		tool_usage_exit("bad %s '': not a number", what);
	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(v))
		tool_usage_exit("bad %s '%s': not a number", what, arg);
	if (v < min || v > max)
		tool_usage_exit("bad %s '%s': must be %g..%g", what, arg, min, max);
	return v;
}

void tool_spread_topic(char *buf, size_t len, const char *base, unsigned i, unsigned n)
{
	if (n > 1)
		snprintf(buf, len, "%s.%05u", base, i);
	else
		snprintf(buf, len, "%s", base);
}

void tool_spread_pattern(char *buf, size_t len, const char *base, unsigned n)
{
	snprintf(buf, len, "%s%s", base, n > 1 ? ".*" : "");
}

flit_sub *tool_spread_subscribe(flit_ctx *ctx, const char *transport, const char *base, unsigned n,
				struct flit_sub_opts *opts)
{
	char t[FLIT_TOPIC_MAX + 8];
	flit_sub *first = NULL;

	if (n <= 1 || strcmp(transport, "rdma")) {
		opts->pattern = n > 1;
		tool_spread_pattern(t, sizeof(t), base, n);
		return flit_sub_new(ctx, t, opts);
	}
	opts->pattern = false;
	for (unsigned i = 0; i < n; i++) {
		tool_spread_topic(t, sizeof(t), base, i, n);
		flit_sub *s = flit_sub_new(ctx, t, opts);
		if (!s)
			return NULL;
		if (!first)
			first = s;
	}
	return first;
}

const char *tool_parse_transport(const char *arg)
{
	static const char *const known[] = { "shm", "udp", "xdp", "rdma" };

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (arg && !strcmp(arg, known[i]))
			return known[i];
	tool_usage_exit("bad transport '%s': one of shm, udp, xdp, rdma",
			arg ? arg : "");
}

static int parse_cpu_num(const char *list, const char *s, char **end)
{
	unsigned long v;

	if (*s < '0' || *s > '9')
		tool_usage_exit("bad cpu list '%s': expected a CPU number at '%s'",
				list, s);
	errno = 0;
	v = strtoul(s, end, 10);
	if (errno || v >= CPU_SETSIZE)
		tool_usage_exit("bad cpu list '%s': CPU number out of range", list);
	return (int)v;
}

int tool_parse_cpus(const char *arg, int *cpus, int max)
{
	cpu_set_t allowed;
	const char *s = arg;
	int n = 0;

	if (!arg || !*arg)
		tool_usage_exit("bad cpu list '': empty");
	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		CPU_ZERO(&allowed);
	while (*s) {
		char *end;
		int lo = parse_cpu_num(arg, s, &end), hi = lo;

		if (*end == '-')
			hi = parse_cpu_num(arg, end + 1, &end);
		if (hi < lo)
			tool_usage_exit("bad cpu list '%s': range %d-%d is backwards",
					arg, lo, hi);
		for (int c = lo; c <= hi; c++) {
			if (!CPU_ISSET(c, &allowed))
				tool_usage_exit("bad cpu list '%s': CPU %d is not "
						"available to this process (%d allowed)",
						arg, c, CPU_COUNT(&allowed));
			if (n == max)
				tool_usage_exit("bad cpu list '%s': more than %d CPUs",
						arg, max);
			cpus[n++] = c;
		}
		if (*end == ',' && end[1])
			end++;
		else if (*end)
			tool_usage_exit("bad cpu list '%s': unexpected '%s'", arg, end);
		s = end;
	}
	return n;
}

int tool_default_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 0;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

const char *tool_cpus_str(const int *cpus, int n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && off < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%d", i ? "," : "", cpus[i]);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	return buf;
}

/* ---- pinning and processes -------------------------------------------------- */

int tool_pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* pid 0: the calling thread. */
	if (sched_setaffinity(0, sizeof(set), &set))
		return -errno;
	return 0;
}

void tool_child_init(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)        /* the parent died before prctl() */
		_exit(1);
}

int tool_child_exited(pid_t pid, int *status)
{
	pid_t r = waitpid(pid, status, WNOHANG);

	if (r < 0)
		return -errno;
	return r == pid;
}

uint64_t tool_cpu_ns(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

void tool_sleep_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int tool_reap(pid_t pid, unsigned timeout_ms, int *status)
{
	uint64_t deadline = flit_monotonic_raw_ns() + (uint64_t)timeout_ms * 1000000u;
	int r;

	for (;;) {
		r = tool_child_exited(pid, status);
		if (r)
			return r < 0 ? r : 0;
		if (flit_monotonic_raw_ns() >= deadline)
			break;
		tool_sleep_us(1000);
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

const char *tool_wstatus_str(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "wait status 0x%x", status);
	return buf;
}

/* ---- configuration lines ---------------------------------------------------- */

void tool_config_init(struct tool_config *c)
{
	memset(c, 0, sizeof(*c));
}

static bool config_append(struct tool_config *c, const char *line, const char *user)
{
	size_t n = strlen(line);

	if (c->nlines == TOOL_CONFIG_LINES || c->len + n + 2 > sizeof(c->text))
		return false;
	memcpy(c->text + c->len, line, n);
	c->len += n;
	c->text[c->len++] = '\n';
	c->text[c->len] = '\0';
	c->user[c->nlines++] = user;
	return true;
}

void tool_config_add(struct tool_config *c, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!config_append(c, line, NULL))
		tool_fail("internal: configuration lines overflow");
}

static const char *skip_blanks(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* Does key text [k, k+n) start with a scope name and a dot? */
static bool has_scope(const char *k, size_t n)
{
	static const char *const scopes[] = { "context.", "source.", "receiver." };

	for (size_t i = 0; i < 3; i++) {
		size_t m = strlen(scopes[i]);
		if (n > m && !strncasecmp(k, scopes[i], m))
			return true;
	}
	return false;
}

void tool_config_defer(const char **lines, int *n, const char *arg)
{
	if (*n == TOOL_CONFIG_LINES - 1)
		tool_usage_exit("--config: at most %d lines", TOOL_CONFIG_LINES - 1);
	lines[(*n)++] = arg;
}

void tool_config_add_user(struct tool_config *c, const char *arg,
			  const char *scope)
{
	const char *p = skip_blanks(arg), *eq = strchr(arg, '=');
	char line[1024];
	size_t kn;

	if (strchr(arg, '\n') || strchr(arg, '\r'))
		tool_usage_exit("bad --config '%s': one line per -C", arg);
	if (strlen(arg) >= sizeof(line) - 32)
		tool_usage_exit("bad --config: line longer than %zu bytes",
				sizeof(line) - 32);
	/* Comments, section headers and lines that are not key = value go
	 * as they are (the library judges them). */
	kn = eq ? (size_t)(eq - p) : 0;
	while (kn && (p[kn - 1] == ' ' || p[kn - 1] == '\t'))
		kn--;
	if (scope && eq && kn && *p != '#' && *p != ';' && *p != '[' &&
	    !has_scope(p, kn))
		snprintf(line, sizeof(line), "%s.%s", scope, p);
	else
		snprintf(line, sizeof(line), "%s", arg);
	if (!config_append(c, line, arg))
		tool_usage_exit("--config: too many lines or too much text "
				"(at most %d lines, %d bytes)", TOOL_CONFIG_LINES,
				TOOL_CONFIG_MAX);
}

/* Copy [s, s+n) trimmed of blanks, without quotes and trailing comment. */
static void config_value(const char *s, char *buf, size_t len)
{
	size_t n;

	s = skip_blanks(s);
	if (*s == '"') {
		const char *e = strchr(s + 1, '"');
		n = e ? (size_t)(e - s - 1) : strlen(s + 1);
		s++;
	} else {
		n = 0;
		while (s[n] && s[n] != '\n' && !((s[n] == '#' || s[n] == ';') &&
						   n && (s[n - 1] == ' ' || s[n - 1] == '\t')))
			n++;
		while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
			n--;
	}
	if (n >= len)
		n = len - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
}

const char *tool_config_get(const struct tool_config *c, const char *key,
			    char *buf, size_t len)
{
	char section[16] = "", env[128];
	const char *found = NULL, *line = c->text, *e;
	size_t i;

	while (*line) {
		const char *nl = strchr(line, '\n'), *p = skip_blanks(line);
		const char *end = nl ? nl : line + strlen(line);
		const char *eq = memchr(p, '=', (size_t)(end - p));

		if (*p == '[') {
			/* [scope] sets the scope; a topic section hides its keys */
			size_t n = strcspn(p + 1, "]\n");
			section[0] = '\0';
			if (n < sizeof(section) && !memchr(p + 1, '"', n)) {
				memcpy(section, p + 1, n);
				section[n] = '\0';
			} else {
				strcpy(section, "-");
			}
		} else if (eq && *p != '#' && *p != ';' && strcmp(section, "-")) {
			char k[160];
			size_t kn = (size_t)(eq - p);

			while (kn && (p[kn - 1] == ' ' || p[kn - 1] == '\t'))
				kn--;
			if (*section && !has_scope(p, kn))
				snprintf(k, sizeof(k), "%s.%.*s", section, (int)kn, p);
			else
				snprintf(k, sizeof(k), "%.*s", (int)kn, p);
			if (!strcasecmp(k, key)) {
				config_value(eq + 1, buf, len);
				found = buf;
			}
		}
		line = nl ? nl + 1 : end;
	}
	if (found)
		return found;
	/* FLIT_CONTEXT_UDP_BACKEND for context.udp.backend */
	snprintf(env, sizeof(env), "FLIT_%s", key);
	for (i = 5; env[i]; i++)
		env[i] = env[i] == '.' ? '_' : (char)toupper((unsigned char)env[i]);
	e = getenv(env);
	if (!e)
		return NULL;
	snprintf(buf, len, "%s", e);
	return buf;
}

const char *tool_udp_path_label(const struct tool_config *c, char *buf, size_t len)
{
	char b[32], r[32], s[32];
	const char *ub = tool_config_get(c, "context.udp.backend", b, sizeof(b));
	const char *ur = tool_config_get(c, "context.udp.uring_recv", r, sizeof(r));
	const char *us = tool_config_get(c, "context.udp.uring_send", s, sizeof(s));

	if (!ub || strcasecmp(ub, "io_uring")) {
		snprintf(buf, len, "sockets");
		return buf;
	}
	snprintf(buf, len, "io_uring%s%s", ur && !strcasecmp(ur, "poll") ? "+poll" : "",
		 us && !strcasecmp(us, "ring") ? "+ring-send" : "");
	return buf;
}

int tool_udp_path_parse(const char *label, bool *uring, bool *poll_recv, bool *ring_send)
{
	*uring = *poll_recv = *ring_send = false;
	if (!strcmp(label, "sockets"))
		return 0;
	if (strncmp(label, "io_uring", 8))
		return -1;
	*uring = true;
	for (const char *p = label + 8; *p;) {
		if (!strncmp(p, "+poll", 5) && !*poll_recv) {
			*poll_recv = true;
			p += 5;
		} else if (!strncmp(p, "+ring-send", 10) && !*ring_send) {
			*ring_send = true;
			p += 10;
		} else {
			return -1;
		}
	}
	return 0;
}

const char *tool_config_user(const struct tool_config *c, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < c->nlines; i++) {
		int w;

		if (!c->user[i])
			continue;
		w = snprintf(buf + off, len - off, "%s%s", off ? "; " : "", c->user[i]);
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += (size_t)w;
	}
	return off ? buf : NULL;
}

flit_ctx *tool_ctx_new(const struct tool_config *c, char *errbuf, size_t len)
{
	FLIT_OPTS(flit_ctx_opts, copts, .config = c->len ? c->text : NULL);
	flit_ctx *ctx = flit_ctx_new(&copts);
	const char *msg, *at;
	int line;

	if (ctx)
		return ctx;
	msg = flit_errmsg();
	at = strstr(msg, "<context options>:");
	if (at && sscanf(at + strlen("<context options>:"), "%d", &line) == 1 &&
	    line >= 1 && line <= c->nlines && c->user[line - 1])
		snprintf(errbuf, len, "bad -C line '%s': %s", c->user[line - 1], msg);
	else
		snprintf(errbuf, len, "%s", msg);
	return NULL;
}

void tool_config_check(const struct tool_config *c)
{
	char err[768];
	flit_ctx *ctx = tool_ctx_new(c, err, sizeof(err));

	if (!ctx)
		tool_fail("creating a context: %s", err);
	flit_ctx_close(ctx);
}

/* ---- network namespaces ------------------------------------------------------ */

const char *tool_parse_netns(const char *opt, const char *arg)
{
	if (!*arg || strlen(arg) > 200 || (strchr(arg, '/') && *arg != '/') ||
	    !strcmp(arg, ".") || !strcmp(arg, ".."))
		tool_usage_exit("bad %s '%s': a name from 'ip netns list' (or an "
				"absolute path such as /proc/PID/ns/net)", opt, arg);
	return arg;
}

int tool_netns_open(const char *name, char *errbuf, size_t len)
{
	char path[256];
	int fd, e;

	if (*name == '/')
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	e = errno;
	if (e == ENOENT)
		snprintf(errbuf, len, "network namespace '%s' does not exist (%s: %s); "
			 "'ip netns list' shows the namespaces, and 'tools/testbed up "
			 "--name N --hosts 2' makes N-h1 and N-h2", name, path, strerror(e));
	else if (e == EACCES || e == EPERM)
		snprintf(errbuf, len, "network namespace '%s': %s: %s (entering a "
			 "namespace needs CAP_SYS_ADMIN: run as root)", name, path,
			 strerror(e));
	else
		snprintf(errbuf, len, "network namespace '%s': %s: %s", name, path,
			 strerror(e));
	return -1;
}

int tool_netns_enter(int fd, const char *name, char *errbuf, size_t len)
{
	int e;

	if (setns(fd, CLONE_NEWNET) == 0)
		return 0;
	e = errno;
	if (e == EPERM)
		snprintf(errbuf, len, "entering network namespace '%s': %s (setns "
			 "needs CAP_SYS_ADMIN: run as root)", name, strerror(e));
	else if (e == EINVAL)
		snprintf(errbuf, len, "entering network namespace '%s': %s (not a "
			 "network namespace?)", name, strerror(e));
	else
		snprintf(errbuf, len, "entering network namespace '%s': %s", name,
			 strerror(e));
	return -1;
}

void tool_netns_enter_name(const char *name)
{
	char err[512];
	int fd = tool_netns_open(name, err, sizeof(err));

	if (fd < 0)
		tool_fail("%s", err);
	if (tool_netns_enter(fd, name, err, sizeof(err)))
		tool_fail("%s", err);
	close(fd);
}

int tool_udp_route_check(const struct tool_config *c, const char *netns,
			 char *errbuf, size_t len)
{
	char where[256] = "this network namespace";
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(14400) };
	char val[128], group[64] = "239.192.76.1";
	const char *v;
	int fd, rc, e;

	v = tool_config_get(c, "context.udp.interface", val, sizeof(val));
	if (v && *v)
		return 0;       /* the interface decides; the library checks it */
	v = tool_config_get(c, "context.udp.resolver", val, sizeof(val));
	if (v && *v && strcasecmp(v, "off")) {
		size_t n = strcspn(v, ":");
		if (n < sizeof(group)) {
			memcpy(group, v, n);
			group[n] = '\0';
		}
	}
	if (inet_pton(AF_INET, group, &sa.sin_addr) != 1)
		inet_pton(AF_INET, "239.192.76.1", &sa.sin_addr);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;       /* let the library say what is wrong */
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));   /* a route lookup */
	e = errno;
	close(fd);
	if (rc == 0 || (e != ENETUNREACH && e != EHOSTUNREACH && e != ENODEV))
		return 0;
	if (netns)
		snprintf(where, sizeof(where), "network namespace '%s'", netns);
	snprintf(errbuf, len, "udp: no route for multicast (%s) in %s "
		 "(%s): add one ('ip route add 224.0.0.0/4 dev IFACE'), name "
		 "the interface (-C context.udp.interface=IFACE), or run across the "
		 "testbed: 'tools/testbed up --name tb --hosts 2', then --netns tb-h1 "
		 "--peer-netns tb-h2", group, where, strerror(e));
	return -1;
}

int tool_rdma_local_addr(char *buf, size_t len)
{
	char path[512], line[128];
	unsigned a, b, c, d;
	struct dirent *de;
	DIR *dir = opendir("/sys/class/infiniband");
	int rc = -2, ndev = 0;

	/* rdma_cm cannot loop back through 127.0.0.1: the device's own
	 * address it is.  Ports 1 and 2, GIDs 0..15 of each. */
	while (dir && rc && (de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		ndev++;
		for (int port = 1; port <= 2 && rc; port++) {
			FILE *f;
			snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/state",
				 de->d_name, port);
			if (!(f = fopen(path, "r")))
				continue;
			bool active = fgets(line, sizeof(line), f) && strstr(line, "ACTIVE");
			fclose(f);
			for (int g = 0; active && rc && g < 16; g++) {
				snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gids/%d",
					 de->d_name, port, g);
				if (!(f = fopen(path, "r")))
					break;
				if (fgets(line, sizeof(line), f) &&
				    sscanf(line, "0000:0000:0000:0000:0000:ffff:%2x%2x:%2x%2x",
					   &a, &b, &c, &d) == 4) {
					snprintf(buf, len, "%u.%u.%u.%u", a, b, c, d);
					rc = 0;
				}
				fclose(f);
			}
		}
	}
	if (dir)
		closedir(dir);
	return rc && ndev ? -1 : rc;
}

void tool_rdma_addr_default(char *buf, size_t len)
{
	int ra = buf[0] ? 0 : tool_rdma_local_addr(buf, len);

	if (ra == -2)   /* no device: the library's "no RDMA device" says it */
		snprintf(buf, len, "127.0.0.1");
	else if (ra)
		tool_fail("rdma: no active RDMA port with an IPv4 address here "
			  "(/sys/class/infiniband): give the address with --rdma-addr");
}

void tool_parse_rdma_addr(const char *arg, char *buf, size_t len)
{
	struct in_addr a;

	if (inet_pton(AF_INET, arg, &a) != 1)
		tool_usage_exit("bad --rdma-addr '%s': an IPv4 address", arg);
	snprintf(buf, len, "%s", arg);
}

void tool_net_check(const char *transport, const struct tool_config *c,
		    const char *netns)
{
	char err[512];

	if (!strcmp(transport, "xdp")) {
		char v[64];
		const char *i = tool_config_get(c, "context.udp.interface", v, sizeof(v));
		if (!i || !*i)
			tool_usage_exit("-t xdp needs the interface: -C 'context.udp.interface = IFACE'");
	}
	if (!strcmp(transport, "udp") && tool_udp_route_check(c, netns, err, sizeof(err)))
		tool_fail("%s", err);
}

/* ---- the options the measuring tools share ------------------------------------ */

void tool_opts_init(struct tool_opts *t, const struct tool_shape *shape)
{
	*t = (struct tool_opts){
		.shape = shape, .transport = "shm", .size = 16, .timeout_s = 10,
		.cpus = { 0, 1 }, .ncpus = 2, .role = TOOL_SIDES_BOTH,
	};
}

static bool two_sided(const struct tool_opts *t)
{
	return t->shape->role[0] != NULL;
}

void tool_opts_parse(struct tool_opts *t, int opt, const char *arg,
		     char *const argv[])
{
	switch (opt) {
	case 't': t->transport = tool_parse_transport(arg); break;
	case 's': t->size = tool_parse_size("size", arg, 8, 16 << 20); break;
	case 'm':
		if (!strcmp(arg, "paced"))
			t->overwrite = false;
		else if (!strcmp(arg, "overwrite"))
			t->overwrite = true;
		else
			tool_usage_exit("bad mode '%s': paced or overwrite", arg);
		break;
	case 'c':
		t->cpus_set = true;
		if (!two_sided(t)) {
			t->ncpus = tool_parse_cpus(arg, t->cpus, TOOL_MAX_CPUS);
			break;
		}
		t->ncpus = tool_parse_cpus(arg, t->cpus, 2);
		if (t->ncpus == 1)
			t->cpus[1] = t->cpus[0];
		break;
	case 'T': t->timeout_s = tool_parse_seconds("timeout", arg, 0.01, 3600); break;
	case 'C': tool_config_defer(t->cfg, &t->ncfg, arg); break;
	case 'p':
		if (!*arg || strlen(arg) >= sizeof(t->prefix))
			tool_usage_exit("bad topic prefix '%s': 1..%zu bytes",
					arg, sizeof(t->prefix) - 1);
		snprintf(t->prefix, sizeof(t->prefix), "%s", arg);
		t->prefix_set = true;
		break;
	case 'j': t->json = true; break;
	case 'H': t->hist = true; break;
	case 'v': t->verbose++; break;
	case 'h': tool_help_exit();
	case TOOL_OPT_NETNS: t->netns = tool_parse_netns("--netns", arg); break;
	case TOOL_OPT_PEER_NETNS:
		t->peer_netns = tool_parse_netns("--peer-netns", arg);
		break;
	case TOOL_OPT_RDMA_ADDR:
		tool_parse_rdma_addr(arg, t->rdma_addr, sizeof(t->rdma_addr));
		break;
	case TOOL_OPT_RDMA_PORT: {
		unsigned n = t->shape->rdma_ports ? t->shape->rdma_ports : 1;
		t->rdma_port = (unsigned)tool_parse_count("rdma-port", arg, 1, 65536 - n);
		break;
	}
	default: tool_getopt_error(opt, argv);
	}
}

void tool_opts_role(struct tool_opts *t, const char *arg)
{
	const char *const *r = t->shape->role;

	if (!strcmp(arg, r[0]))
		t->role = TOOL_SIDE_A;
	else if (!strcmp(arg, r[1]))
		t->role = TOOL_SIDE_B;
	else
		tool_usage_exit("bad role '%s': %s or %s", arg, r[0], r[1]);
}

void tool_opts_end(struct tool_opts *t, int argc, char *const argv[])
{
	if (optind < argc)
		tool_usage_exit("unexpected argument '%s'", argv[optind]);
	if (t->peer_netns && t->role != TOOL_SIDES_BOTH)
		tool_usage_exit("--peer-netns is for the forked %s: not with --role "
				"(use --netns on each side)", t->shape->side[1]);
	t->net = strcmp(t->transport, "shm") != 0;
	tool_config_init(&t->config);
	tool_config_add(&t->config, "context.transports = %s", t->transport);
}

void tool_opts_finish(struct tool_opts *t)
{
	const char *const *side = t->shape->side;

	for (int i = 0; i < t->ncfg; i++)
		tool_config_add_user(&t->config, t->cfg[i], NULL);
	if (!t->cpus_set) {
		t->ncpus = tool_default_cpus(t->cpus, two_sided(t) ? 2 : TOOL_MAX_CPUS);
		if (t->ncpus == 0)
			tool_fail("no CPU to run on (sched_getaffinity)");
		if (two_sided(t) && t->ncpus == 1) {
			if (t->role == TOOL_SIDES_BOTH)
				tool_fail("needs two CPUs; this process may use only one");
			t->cpus[1] = t->cpus[0];
		}
	}
	/* Both sides spin: on one CPU each would wait for the other's turn. */
	if (two_sided(t) && t->role == TOOL_SIDES_BOTH && t->ncpus == 2 &&
	    t->cpus[0] == t->cpus[1])
		tool_usage_exit("bad cpu list: %s and %s spin, so they need two "
				"different CPUs", side[0], side[1]);
	if (!t->prefix_set)
		snprintf(t->prefix, sizeof(t->prefix), t->role == TOOL_SIDES_BOTH ?
			 "%s.%d" : "%s", tool_name(), (int)getpid());
}

int tool_opts_start(const struct tool_opts *t, struct tool_clock *clk)
{
	char err[512];
	int peer_fd = -1;

	if (t->netns)
		tool_netns_enter_name(t->netns);
	if (t->peer_netns && (peer_fd = tool_netns_open(t->peer_netns, err, sizeof(err))) < 0)
		tool_fail("%s", err);
	tool_net_check(t->transport, &t->config, t->netns);
	tool_config_check(&t->config);      /* a bad -C line fails here, once */
	tool_clock_init(clk);
	return peer_fd;
}

void tool_opts_enter_peer(const struct tool_opts *t, int peer_fd)
{
	char err[512];

	if (peer_fd < 0)
		return;
	if (tool_netns_enter(peer_fd, t->peer_netns, err, sizeof(err)))
		tool_fail("%s", err);
	close(peer_fd);
	tool_net_check(t->transport, &t->config, t->peer_netns);
}

/* ---- the measurement clock -------------------------------------------------- */

void tool_pin_or_fail(int cpu)
{
	int rc = tool_pin_cpu(cpu);

	if (rc)
		tool_fail("pinning to CPU %d: %s", cpu, strerror(-rc));
}

noreturn void tool_sides_fail(pid_t *child, const char *peer, flit_sub *sub,
			      flit_pub *pub, flit_ctx *ctx, const char *msg)
{
	char why[96];
	int status;

	why[0] = '\0';
	if (*child > 0) {
		if (tool_child_exited(*child, &status) == 1) {
			tool_wstatus_str(status, why, sizeof(why));
		} else {
			kill(*child, SIGKILL);
			waitpid(*child, &status, 0);
		}
		*child = 0;
	}
	flit_sub_close(sub);
	flit_pub_close(pub);
	flit_ctx_close(ctx);
	if (*why)
		tool_fail("%s (the %s process %s)", msg, peer, why);
	tool_fail("%s", msg);
}

int tool_run_sides(const struct tool_sides *s)
{
	const struct tool_opts *t = s->opts;
	static char b_name[64];
	int peer_fd = tool_opts_start(t, s->clk);
	pid_t parent, child;

	switch (t->role) {
	case TOOL_SIDE_A:
		tool_pin_or_fail(t->cpus[0]);
		return s->run_a(s->arg, 0);
	case TOOL_SIDE_B:
		tool_pin_or_fail(t->cpus[1]);
		return s->run_b(s->arg);
	case TOOL_SIDES_BOTH:
		break;
	}
	tool_pin_or_fail(t->cpus[0]);
	fflush(NULL);
	parent = getpid();
	child = fork();
	if (child < 0)
		tool_fail("fork: %s", strerror(errno));
	if (child == 0) {
		tool_child_init(parent);
		snprintf(b_name, sizeof(b_name), "%s (%s)", tool_name(), t->shape->role[1]);
		tool_init(b_name, usage_text);
		tool_opts_enter_peer(t, peer_fd);
		tool_pin_or_fail(t->cpus[1]);
		exit(s->run_b(s->arg));
	}
	if (peer_fd >= 0)
		close(peer_fd);
	return s->run_a(s->arg, child);
}

void tool_clock_init(struct tool_clock *clk)
{
	memset(clk, 0, sizeof(*clk));
	if (flit_tsc_calibrate(&clk->tsc, 100) == 0) {
		clk->use_tsc = true;
		clk->name = "tsc";
		return;
	}
	if (verbose)
		tool_warn("TSC unusable (%s); timing with CLOCK_MONOTONIC_RAW",
			  flit_errmsg());
	clk->tsc.ns_per_tick = 1.0;
	clk->name = "monotonic_raw";
}

const char *tool_clock_desc(const struct tool_clock *clk, char *buf, size_t len)
{
	if (clk->use_tsc)
		snprintf(buf, len, "tsc %.4f GHz, invariant, calibrated against "
			 "CLOCK_MONOTONIC_RAW", 1.0 / clk->tsc.ns_per_tick);
	else
		snprintf(buf, len, "monotonic_raw (TSC not invariant or not present)");
	return buf;
}

/* ---- statistics ---------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Nearest rank: the ceil(p/100 * n)-th smallest value (1-based). */
static uint64_t nearest_rank(const uint64_t *sorted, size_t n, double p)
{
	double r = ceil(p / 100.0 * (double)n);
	size_t rank = r < 1 ? 1 : (size_t)r;

	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

void tool_stats_compute(uint64_t *v, size_t n, double scale,
			struct tool_stats *st)
{
	double sum = 0, mean, m2 = 0;

	memset(st, 0, sizeof(*st));
	st->n = n;
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	mean = sum / (double)n;
	for (size_t i = 0; i < n; i++) {
		double d = (double)v[i] - mean;
		m2 += d * d;
	}
	st->min = (double)v[0] * scale;
	st->max = (double)v[n - 1] * scale;
	st->avg = mean * scale;
	st->stddev = sqrt(m2 / (double)n) * scale;
	st->p50 = (double)nearest_rank(v, n, 50.0) * scale;
	st->p99 = (double)nearest_rank(v, n, 99.0) * scale;
	st->p999 = (double)nearest_rank(v, n, 99.9) * scale;
}

void tool_stats_from_hist(const flit_hist *h, double scale,
			  struct tool_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->n = flit_hist_count(h);
	if (!st->n)
		return;
	st->min = (double)flit_hist_min(h) * scale;
	st->max = (double)flit_hist_max(h) * scale;
	st->avg = flit_hist_mean(h) * scale;
	st->stddev = flit_hist_stddev(h) * scale;
	st->p50 = (double)flit_hist_percentile(h, 50.0) * scale;
	st->p99 = (double)flit_hist_percentile(h, 99.0) * scale;
	st->p999 = (double)flit_hist_percentile(h, 99.9) * scale;
}

static int log2_bucket(double ns)
{
	int b = 0;

	while (ns >= 2.0 && b < 62) {
		ns /= 2.0;
		b++;
	}
	return b;       /* [2^b, 2^(b+1)); bucket 0 also holds [0, 1) */
}

void tool_hist_print(FILE *f, const uint64_t *sorted, size_t n, double scale)
{
	uint64_t count[64] = { 0 }, peak = 0, cum = 0;
	int lo = 63, hi = 0;

	if (!n)
		return;
	for (size_t i = 0; i < n; i++) {
		int b = log2_bucket((double)sorted[i] * scale);
		count[b]++;
		lo = b < lo ? b : lo;
		hi = b > hi ? b : hi;
	}
	for (int b = lo; b <= hi; b++)
		peak = count[b] > peak ? count[b] : peak;
	fprintf(f, "# histogram (ns, log2 buckets)\n");
	fprintf(f, "# %21s %12s %8s %8s\n", "range", "count", "%", "cum %");
	for (int b = lo; b <= hi; b++) {
		char bar[41];
		int w = (int)((double)count[b] * 40.0 / (double)peak + 0.5);

		cum += count[b];
		memset(bar, '#', (size_t)w);
		bar[w] = '\0';
		fprintf(f, "  %10llu .. %-10llu %12llu %8.3f %8.3f  %s\n",
			b ? 1ull << b : 0ull, 1ull << (b + 1),
			(unsigned long long)count[b],
			100.0 * (double)count[b] / (double)n,
			100.0 * (double)cum / (double)n, bar);
	}
}

/* ---- payloads ----------------------------------------------------------------- */

static inline uint64_t pattern_word(uint64_t seq, size_t k)
{
	/* Golden-ratio multiply: every byte changes with seq and position. */
	return (seq + k + 1) * 0x9e3779b97f4a7c15ull;
}

void tool_payload_fill(void *buf, size_t len, uint64_t seq)
{
	uint8_t *p = buf;
	size_t off = 8, k = 0;

	memcpy(p, &seq, 8);
	for (; off + 8 <= len; off += 8, k++) {
		uint64_t w = pattern_word(seq, k);
		memcpy(p + off, &w, 8);
	}
	if (off < len) {
		uint64_t w = pattern_word(seq, k);
		memcpy(p + off, &w, len - off);
	}
}

long tool_payload_check(const void *buf, size_t len, uint64_t seq)
{
	const uint8_t *p = buf;
	size_t off = 8, k = 0;

	if (len < 8 || memcmp(p, &seq, 8))
		return 0;
	for (; off < len; off += 8, k++) {
		uint64_t w = pattern_word(seq, k);
		size_t m = len - off < 8 ? len - off : 8;

		if (memcmp(p + off, &w, m)) {
			const uint8_t *e = (const uint8_t *)&w;
			for (size_t i = 0; i < m; i++)
				if (p[off + i] != e[i])
					return (long)(off + i);
		}
	}
	return -1;
}

/* ---- output ---------------------------------------------------------------------- */

void tool_result_init(struct tool_result *r, const char *tool)
{
	memset(r, 0, sizeof(*r));
	r->tool = tool;
	r->label = "";
	r->size = -1;
	r->count = -1;
	r->rate = -1;
	r->msgs_per_sec = -1;
}

void tool_escape(FILE *f, const void *data, size_t len, unsigned flags)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = p[i];
		switch (c) {
		case '"':  fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (c >= 0x20 && c != 0x7f && (c < 0x80 || !(flags & TOOL_ESC_HIGH)))
				fputc(c, f);
			else if (flags & TOOL_ESC_JSON)
				fprintf(f, "\\u%04x", c);
			else
				fprintf(f, "\\x%02x", c);
		}
	}
}

void tool_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	tool_escape(f, s, strlen(s), TOOL_ESC_JSON);
	fputc('"', f);
}

size_t tool_json_member(char *buf, size_t len, const char *key, const char *val)
{
	char *mem = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&mem, &n);

	if (!f)
		return 0;
	fprintf(f, ",\"%s\":", key);
	tool_json_str(f, val);
	fclose(f);
	if (!mem || n >= len) {
		free(mem);
		return 0;
	}
	memcpy(buf, mem, n + 1);
	free(mem);
	return n;
}

static void json_key_str(FILE *f, const char *key, const char *val)
{
	fprintf(f, ",\"%s\":", key);
	tool_json_str(f, val);
}

size_t tool_cdf_member(char *buf, size_t len, const uint64_t *sorted, size_t n,
		       double scale)
{
	static const double tail[] = { 99.5, 99.9, 99.95, 99.99 };
	double pct[1 + 99 + 4 + 1];
	size_t np = 0, off;
	int w;

	if (!n || len < 16)
		return 0;
	pct[np++] = 0;
	for (int i = 1; i <= 99; i++)
		pct[np++] = i;
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		pct[np++] = tail[i];
	pct[np++] = 100;
	off = (size_t)snprintf(buf, len, ",\"cdf\":[");
	for (size_t i = 0; i < np; i++) {
		/* nearest rank: the smallest value with >= p % at or below */
		size_t rank = (size_t)ceil(pct[i] / 100.0 * (double)n);
		size_t k = rank ? rank - 1 : 0;
		if (k >= n)
			k = n - 1;
		w = snprintf(buf + off, len - off, "%s[%g,%.1f]", i ? "," : "", pct[i],
			     (double)sorted[k] * scale);
		if (w < 0 || (size_t)w >= len - off)
			goto full;
		off += (size_t)w;
	}
	w = snprintf(buf + off, len - off, "]");
	if (w < 0 || (size_t)w >= len - off)
		goto full;
	return off + 1;
full:
	buf[0] = '\0';
	return 0;
}

void tool_json_print(FILE *f, const struct tool_result *r)
{
	char load[64];

	fputs("{\"tool\":", f);
	tool_json_str(f, r->tool);
	if (r->transport)
		json_key_str(f, "transport", r->transport);
	if (r->size >= 0)
		fprintf(f, ",\"size\":%lld", (long long)r->size);
	if (r->count >= 0)
		fprintf(f, ",\"count\":%lld", (long long)r->count);
	if (r->rate >= 0)
		fprintf(f, ",\"rate\":%.1f", r->rate);
	if (r->lat && r->lat->n) {
		const struct tool_stats *s = r->lat;
		fprintf(f, ",\"min_ns\":%.1f,\"avg_ns\":%.1f,\"p50_ns\":%.1f,"
			"\"p99_ns\":%.1f,\"p999_ns\":%.1f,\"max_ns\":%.1f,"
			"\"stddev_ns\":%.1f", s->min, s->avg, s->p50, s->p99,
			s->p999, s->max, s->stddev);
	}
	if (r->msgs_per_sec >= 0)
		fprintf(f, ",\"msgs_per_sec\":%.1f", r->msgs_per_sec);
	if (r->clock)
		json_key_str(f, "clock", r->clock);
	if (r->mode)
		json_key_str(f, "mode", r->mode);
	json_key_str(f, "load", tool_loadavg(load, sizeof(load)));
	if (r->extra && *r->extra)
		fprintf(f, ",%s", r->extra);
	fputs("}\n", f);
	fflush(f);
}

void tool_lat_header(FILE *f)
{
	fprintf(f, "%-10s %6s %10s %9s %9s %9s %9s %9s %10s %9s\n", "#", "size",
		"count", "min", "avg", "median", "p99", "p99.9", "max", "stddev");
}

void tool_lat_row(FILE *f, const struct tool_result *r)
{
	const struct tool_stats *s = r->lat;

	if (!s)
		return;
	fprintf(f, "%-10s %6lld %10llu %9.1f %9.1f %9.1f %9.1f %9.1f %10.1f %9.1f\n",
		r->label && *r->label ? r->label : "ns", (long long)r->size,
		(unsigned long long)s->n, s->min, s->avg, s->p50, s->p99, s->p999,
		s->max, s->stddev);
	fflush(f);
}

const char *tool_loadavg(char *buf, size_t len)
{
	double l1, l5, l15;
	FILE *f = fopen("/proc/loadavg", "re");
	int ok = f && fscanf(f, "%lf %lf %lf", &l1, &l5, &l15) == 3;

	if (f)
		fclose(f);
	if (ok)
		snprintf(buf, len, "%.2f %.2f %.2f", l1, l5, l15);
	else
		snprintf(buf, len, "?");
	return buf;
}

void tool_header(FILE *f, const char *fmt, ...)
{
	char load[64];
	struct utsname u;
	va_list ap;

	fprintf(f, "# %s: ", prog);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	if (uname(&u))
		strcpy(u.release, "?");
	fprintf(f, "# load %s, %ld cpus online, kernel %s\n",
		tool_loadavg(load, sizeof(load)), sysconf(_SC_NPROCESSORS_ONLN),
		u.release);
	fflush(f);
}

/* ---- library messages ---------------------------------------------------------------- */

static TOOL_FMT(2, 0) void print_stderr(enum flit_log_level level,
					 const char *fmt, va_list ap)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	int max = verbose >= 2 ? FLIT_LOG_DEBUG : FLIT_LOG_INFO;

	if ((int)level > max)
		return;
	fprintf(stderr, "%s: flit %s: ", prog,
		(unsigned)level < 4 ? names[level] : "?");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void tool_set_verbose(int level)
{
	verbose = level;
	flit_set_print(level > 0 ? print_stderr : NULL);
}

void tool_print_setup(const flit_ctx *ctx)
{
	static const char *const names[] = { "shm", "udp", "xdp", "rdma" };
	char buf[1024];

	if (verbose <= 0)
		return;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (flit_ctx_describe(ctx, names[i], buf, sizeof(buf)) >= 0)
			fprintf(stderr, "%s: set-up: %s\n", tool_name(), buf);
}
