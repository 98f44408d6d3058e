/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the rdma tests share (tests/test_rdma.c: connections,
 * tests/test_rdma_mc.c: multicast): CHECK() inside a case's child, the
 * library's captured messages, a receiver's bookkeeping of sequence-numbered
 * messages (struct rx, on_msg), polling and sending helpers, child processes
 * forked before any verbs object exists (kid_*, isolated()), and this host's
 * RDMA address.  Include after testlib.h, with FLIT_HAVE_RDMA.
 */
#ifndef FLIT_TESTS_RDMATEST_H
#define FLIT_TESTS_RDMATEST_H

#include <dirent.h>
#include <ifaddrs.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <arpa/inet.h>

/* each test uses some of these */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

#define CHECK(cond, ...)                                                         \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "CHECK failed at %s:%d (%s): ", __FILE__, \
				__LINE__, #cond);                                \
			fprintf(stderr, __VA_ARGS__);                            \
			fprintf(stderr, " [flit: %s]\n", flit_errmsg());         \
			_exit(1);                                                \
		}                                                                \
	} while (0)

static char addr[64];         /* this host's RDMA address */
static unsigned port_next;    /* a fresh listening port per case */

static unsigned new_port(void)
{
	return port_next++;
}

/* ---- captured library messages (the connection thread logs too) ------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];
static size_t log_len;

static void capture(enum flit_log_level lvl, const char *fmt, va_list ap)
{
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	if (getenv("FLIT_TEST_VERBOSE"))
		fprintf(stderr, "  [flit %d] %s\n", lvl, line);
	pthread_mutex_lock(&log_lock);
	int n = snprintf(log_text + log_len, sizeof(log_text) - log_len, "%s\n", line);
	if (n > 0 && (size_t)n < sizeof(log_text) - log_len)
		log_len += (size_t)n;
	pthread_mutex_unlock(&log_lock);
}

static bool logged(const char *needle)
{
	pthread_mutex_lock(&log_lock);
	bool r = strstr(log_text, needle) != NULL;
	pthread_mutex_unlock(&log_lock);
	return r;
}

struct rx {
	size_t size;            /* expected payload length */
	uint64_t next;          /* payload sequence number expected next */
	uint64_t got, bos, eos, died, bad, first;
	uint64_t late, first_live;  /* FLIT_MSGF_LATE_JOIN messages; the first unmarked */
	bool started, live;
	uint32_t session;
	char why[160];          /* the first bad message */
};

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct rx *r = arg;
	uint64_t seq;

	(void)sub;
	switch (m->kind) {
	case FLIT_MSG_BOS: r->bos++; r->session = m->session_id; return;
	case FLIT_MSG_EOS:
		r->eos++;
		r->died += !!(m->flags & FLIT_MSGF_SOURCE_DIED);
		return;
	case FLIT_MSG_LOSS:
		if (!r->bad++)
			snprintf(r->why, sizeof(r->why), "loss of %llu at %llu",
				 (unsigned long long)m->lost, (unsigned long long)m->seq);
		return;
	case FLIT_MSG_DATA: break;
	}
	if (m->len != r->size || tl_check(m->data, m->len, &seq)) {
		if (!r->bad++)
			snprintf(r->why, sizeof(r->why), "bad payload (%zu bytes) at #%llu",
				 m->len, (unsigned long long)m->seq);
		return;
	}
	if (!r->started) {
		r->started = true;
		r->first = seq;
		r->next = seq;
	}
	if (seq != r->next || m->seq != seq) {
		if (!r->bad++)
			snprintf(r->why, sizeof(r->why), "payload %llu (flit seq %llu) where %llu was due",
				 (unsigned long long)seq, (unsigned long long)m->seq,
				 (unsigned long long)r->next);
		r->next = seq;
	}
	r->next++;
	r->got++;
	if (m->flags & FLIT_MSGF_LATE_JOIN) {
		r->late++;
		if (r->live && !r->bad++)
			snprintf(r->why, sizeof(r->why), "late-join message %llu after the live stream",
				 (unsigned long long)seq);
	} else if (!r->live) {
		r->live = true;
		r->first_live = seq;
	}
}

/* Poll until *v >= want or ms pass. */
static bool poll_until(flit_ctx *ctx, const uint64_t *v, uint64_t want, unsigned ms)
{
	for (uint64_t end = tl_now_ms() + ms; *(volatile const uint64_t *)v < want;) {
		if (tl_now_ms() > end)
			return false;
		if (flit_ctx_poll(ctx, 0) <= 0)
			sched_yield();
	}
	return true;
}

/* Wait until the publisher has n receivers (polling `ctx` meanwhile, an
 * in-process receiver's context, or NULL). */
static bool wait_receivers(flit_pub *p, flit_ctx *ctx, int n, unsigned ms)
{
	for (uint64_t end = tl_now_ms() + ms; tl_now_ms() < end;) {
		if (flit_pub_receivers(p) == n)
			return true;
		if (ctx)
			flit_ctx_poll(ctx, 0);
		else
			usleep(1000);
	}
	return false;
}

/* Send one sequence-numbered message, spinning (polling ctx, if any)
 * while back-pressured or not connected; false after ms. */
static bool send_one(flit_pub *p, flit_ctx *ctx, uint64_t seq, size_t size, unsigned ms,
		     uint64_t *bp)
{
	unsigned char buf[4096];
	uint64_t end = 0;

	tl_fill(buf, size, seq);
	for (unsigned spins = 0;; spins++) {
		int rc = flit_pub_send(p, buf, size);
		if (rc == FLIT_OK)
			return true;
		CHECK(rc > 0, "send #%llu", (unsigned long long)seq);
		if (bp)
			(*bp)++;
		if (ctx)
			flit_ctx_poll(ctx, 0);
		else if (spins % 64 == 63)
			sched_yield();
		if ((spins & 255) == 0) {
			if (!end)
				end = tl_now_ms() + ms;
			else if (tl_now_ms() > end)
				return false;
		}
	}
}

/* Flush until it went, polling ctx meanwhile (a receiver in this process,
 * whose credits the flush may wait for; NULL: none). */
static bool flush_poll(flit_pub *p, flit_ctx *ctx, unsigned ms)
{
	for (uint64_t end = tl_now_ms() + ms; tl_now_ms() < end;) {
		int rc = flit_pub_flush(p);
		CHECK(rc >= 0, "flush");
		if (rc == FLIT_OK)
			return true;
		if (ctx)
			flit_ctx_poll(ctx, 0);
		else
			sched_yield();
	}
	return false;
}

static bool flush_all(flit_pub *p, unsigned ms)
{
	return flush_poll(p, NULL, ms);
}

/* ---- processes ---------------------------------------------------------------- */

/* A child that waits for a byte on fd before it runs body(arg). */
struct kid {
	pid_t pid;
	int go;                 /* write end: start it */
	int done;               /* read end: a status byte when it finished */
};

static struct kid kid_fork(int (*body)(void *arg, int done_fd), void *arg)
{
	int go[2], done[2];
	struct kid k;

	CHECK(pipe(go) == 0 && pipe(done) == 0, "pipe");
	fflush(NULL);
	k.pid = tl_fork();
	CHECK(k.pid >= 0, "fork");
	if (k.pid == 0) {
		char c;
		close(go[1]);
		close(done[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		exit(body(arg, done[1]));
	}
	close(go[0]);
	close(done[1]);
	k.go = go[1];
	k.done = done[0];
	return k;
}

static void kid_start(struct kid *k)
{
	CHECK(write(k->go, "g", 1) == 1, "start child");
}

/* Wait up to ms for a child's byte on its done pipe. */
static bool kid_signalled(struct kid *k, unsigned ms)
{
	struct pollfd pf = { .fd = k->done, .events = POLLIN };
	char c;
	return poll(&pf, 1, (int)ms) == 1 && read(k->done, &c, 1) == 1;
}

/* Reap a child within ms; its exit status (or -1: killed after ms). */
static int kid_wait(struct kid *k, unsigned ms)
{
	int st;
	for (uint64_t end = tl_now_ms() + ms; tl_now_ms() < end;) {
		pid_t r = waitpid(k->pid, &st, WNOHANG);
		if (r == k->pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(2000);
	}
	kill(k->pid, SIGKILL);
	waitpid(k->pid, &st, 0);
	return -1;
}

/* Run a case in a child of its own (no verbs state is ever inherited);
 * its exit status must be 0. */
static void isolated(int (*body)(void), unsigned ms)
{
	int st;
	fflush(NULL);
	pid_t pid = tl_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		flit_set_print(capture);
		exit(body()); /* exit, not _exit: the sanitizer's leak check runs */
	}
	port_next += 8; /* the next case listens elsewhere */
	for (uint64_t end = tl_now_ms() + ms;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (tl_now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			fail_msg("the case did not finish within %u ms", ms);
		}
		usleep(5000);
	}
	if (!WIFEXITED(st))
		fail_msg("the case died of signal %d", WTERMSIG(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* This host's RDMA address: $FLIT_RDMA_IP, else the IPv4-mapped GID of the
 * first active port (RoCE). */
static bool local_addr(char *buf, size_t len)
{
	const char *e = getenv("FLIT_RDMA_IP");
	char path[512], line[128];
	unsigned a, b, c, d;
	struct dirent *de;
	DIR *dir;
	bool found = false;

	if (e && *e) {
		snprintf(buf, len, "%s", e);
		return true;
	}
	dir = opendir("/sys/class/infiniband");
	while (dir && !found && (de = readdir(dir))) {
		for (int g = 0; de->d_name[0] != '.' && !found && g < 16; g++) {
			snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gids/%d", de->d_name, g);
			FILE *f = fopen(path, "r");
			if (!f)
				break;
			if (fgets(line, sizeof(line), f) &&
			    sscanf(line, "0000:0000:0000:0000:0000:ffff:%2x%2x:%2x%2x", &a, &b, &c, &d) == 4) {
				snprintf(buf, len, "%u.%u.%u.%u", a, b, c, d);
				found = true;
			}
			fclose(f);
		}
	}
	if (dir)
		closedir(dir);
	return found;
}

/* The name of the interface that has IPv4 address a (the resolver's
 * multicast goes out there). */
static bool iface_of(const char *a, char *name, size_t cap)
{
	struct ifaddrs *ifs;
	bool found = false;

	if (getifaddrs(&ifs))
		return false;
	for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
		char b[INET_ADDRSTRLEN];
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    !inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, b, sizeof(b)) ||
		    strcmp(b, a))
			continue;
		snprintf(name, cap, "%s", i->ifa_name);
		found = true;
	}
	freeifaddrs(ifs);
	return found;
}

#pragma GCC diagnostic pop

#endif /* FLIT_TESTS_RDMATEST_H */
