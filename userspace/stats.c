// SPDX-License-Identifier: BSD-2-Clause
/* The counters file of a context: writer (the library) and reader
 * (flit-stat).  Contract and memory-ordering argument: stats.h; the format
 * byte by byte: docs/STATS.md. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "stats.h"

/* flit_counters' fields after sz, as an array (slots 0..20 of a row) */
#define NCTR_CORE 21
_Static_assert(offsetof(struct flit_counters, rate_limited) -
	       offsetof(struct flit_counters, msgs_sent) == (NCTR_CORE - 1) * sizeof(uint64_t),
	       "flit_counters is 21 consecutive uint64_t after sz");
_Static_assert(FLIT_STATS_RATE_LIMITED == NCTR_CORE - 1, "counter slots follow flit_counters");
_Static_assert(offsetof(struct flit_counters, msgs_filtered) ==
	       offsetof(struct flit_counters, rate_limited) + sizeof(uint64_t) &&
	       FLIT_STATS_MSGS_FILTERED == NCTR_CORE + 1, "msgs_filtered: the field after, slot 22");
_Static_assert(FLIT_STATS_COUNTERS_USED <= FLIT_STATS_NCOUNTERS, "counter slots");

/* Most transports a context has (ctx.c's table is shorter). */
#define TP_MAX 8
/* Longest period between clock checks of a tick, in calls: a clock read
 * (~25 ns, vDSO) every 1024 calls costs nothing measurable, and a publisher
 * that never polls and slows down sharply after a burst is at most this
 * many calls behind in the file. */
#define TICK_PERIOD_MAX 1024u
#define ENDIAN_MARK 0x01020304u

static const char *const counter_names[FLIT_STATS_COUNTERS_USED] = {
	"msgs_sent", "bytes_sent", "frames_sent", "back_pressured",
	"msgs_received", "bytes_received", "frames_received", "malformed",
	"duplicates", "msgs_lost", "loss_events", "readers_evicted",
	"sources_joined", "sources_left", "naks_sent", "naks_received",
	"retransmissions", "retx_received", "foreign_dropped",
	"unknown_session", "rate_limited", "sources", "msgs_filtered",
	"msgs_filtered_early",
};

const char *flit_stats_counter_name(unsigned i)
{
	return i < FLIT_STATS_COUNTERS_USED ? counter_names[i] : NULL;
}

const char *flit_stats_kind_name(uint32_t kind)
{
	switch (kind) {
	case FLIT_STATS_ROW_FREE: return "free";
	case FLIT_STATS_ROW_CONTEXT: return "context";
	case FLIT_STATS_ROW_TRANSPORT: return "transport";
	case FLIT_STATS_ROW_PUBLISHER: return "publisher";
	case FLIT_STATS_ROW_SUBSCRIBER: return "subscriber";
	}
	return "?";
}

void flit_stats_counters_add(struct flit_counters *to, const struct flit_counters *c)
{
	uint64_t *t = &to->msgs_sent;
	const uint64_t *f = &c->msgs_sent;

	for (unsigned i = 0; i < NCTR_CORE; i++)
		t[i] += f[i];
}

/* ---- writer ------------------------------------------------------------ */

struct flit_stats {
	void *map;                  /* NULL: no file */
	size_t map_len;
	int fd;
	pid_t pid;                  /* the process that made the file */
	uint32_t row_cap;
	uint64_t interval_ns;
	int err;                    /* why there is no file (0: stats off) */
	char errmsg[256];
	char path[FLIT_PATH_MAX + 32];
	bool warned_full;
	/* no row below this is free (rows are taken lowest first): a context
	 * with many publishers does not scan the taken ones for each new one */
	uint32_t free_hint;
	/* Totals, guarded by the context row's seqlock (taken as a try-lock):
	 * the receive side as the poll thread last saw it, and per transport
	 * the send counters publishers have reported (closed ones included). */
	uint64_t rx[NCTR_CORE];
	uint64_t rx_filtered;       /* flit_counters.msgs_filtered (slot 22) */
	uint64_t rx_filtered_early; /* ... msgs_filtered_early (slot 23) */
	uint64_t tx[TP_MAX][NCTR_CORE];
	_Atomic int tp_row[TP_MAX]; /* -1: none yet; -2: the table was full */
};

static _Atomic unsigned ctx_seq; /* n of <pid>-<n> */

static struct flit_stats_hdr *hdr(const struct flit_stats *st)
{
	return st->map;
}

static struct flit_stats_row *row_at(const struct flit_stats *st, int i)
{
	return (struct flit_stats_row *)((char *)st->map + FLIT_STATS_HDR_SIZE +
					 (size_t)i * FLIT_STATS_ROW_SIZE);
}

/* Take a row for writing: even -> odd by CAS (false: another thread of
 * this process is writing it; the caller skips).  The release fence orders
 * the odd value before the data stores that follow (smp_wmb of a seqlock). */
static bool row_lock(struct flit_stats_row *r, uint64_t *seq)
{
	uint64_t s = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);

	if (s & 1)
		return false;
	if (!__atomic_compare_exchange_n(&r->seq, &s, s + 1, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*seq = s;
	return true;
}

/* The data stores before the even value (release). */
static void row_unlock(struct flit_stats_row *r, uint64_t seq)
{
	__atomic_store_n(&r->seq, seq + 2, __ATOMIC_RELEASE);
}

/* Slow paths (creating and removing rows, closing): the only other
 * writers are threads of this process holding a row for a few hundred
 * nanoseconds, so yield until it is free. */
static uint64_t row_lock_wait(struct flit_stats_row *r)
{
	uint64_t s;

	while (!row_lock(r, &s))
		sched_yield();
	return s;
}

static void st32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static void st64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static uint64_t ld64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void put_str(char *dst, size_t cap, const char *s)
{
	size_t n = s ? strnlen(s, cap - 1) : 0;

	memcpy(dst, s ? s : "", n);
	memset(dst + n, 0, cap - n);
}

/* Counters of a locked row: each the larger of the row's and v[i] (two
 * threads may hold snapshots of different ages), except the gauge. */
static void row_fill(struct flit_stats_row *r, const uint64_t *v, unsigned n,
		     uint64_t now)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t x = v[i];
		if (i != FLIT_STATS_SOURCES) {
			uint64_t old = ld64(&r->c[i]);
			if (old > x)
				x = old;
		}
		st64(&r->c[i], x);
	}
	st64(&r->updated_ns, now);
}

static void hdr_touch(struct flit_stats *st, uint64_t now)
{
	st64(&hdr(st)->updated_ns, now);
}

/* A free row (never row 0, the context's), set up; -1 if the table is full. */
static int row_new(struct flit_stats *st, uint32_t kind, uint32_t flags,
		   const char *tname, const char *name, const char *what)
{
	struct flit_stats_hdr *h = hdr(st);
	uint64_t now = flit_monotonic_now();

	uint32_t from = __atomic_load_n(&st->free_hint, __ATOMIC_RELAXED);
	for (uint32_t i = from > 1 ? from : 1; i < st->row_cap; i++) {
		struct flit_stats_row *r = row_at(st, (int)i);
		if (__atomic_load_n(&r->kind, __ATOMIC_RELAXED) != FLIT_STATS_ROW_FREE)
			continue;
		__atomic_store_n(&st->free_hint, i + 1, __ATOMIC_RELAXED);
		uint64_t s = row_lock_wait(r);
		st32(&r->flags, flags);
		st64(&r->created_ns, now);
		st64(&r->updated_ns, now);
		put_str(r->transport, sizeof(r->transport), tname);
		put_str(r->name, sizeof(r->name), name);
		for (unsigned c = 0; c < FLIT_STATS_NCOUNTERS; c++)
			st64(&r->c[c], 0);
		st32(&r->kind, kind);
		row_unlock(r, s);
		if (i >= __atomic_load_n(&h->rows_used, __ATOMIC_RELAXED))
			__atomic_store_n(&h->rows_used, i + 1, __ATOMIC_RELEASE);
		return (int)i;
	}
	__atomic_store_n(&st->free_hint, st->row_cap, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->rows_dropped, 1, __ATOMIC_RELAXED);
	if (!st->warned_full) {
		st->warned_full = true;
		flit_warn("stats: %s is full (%u rows): %s '%s' has no row there; "
			  "raise context.stats_rows", st->path, st->row_cap, what, name);
	}
	return -1;
}

static void row_free(struct flit_stats *st, int i)
{
	struct flit_stats_row *r = row_at(st, i);
	uint64_t s = row_lock_wait(r);

	st32(&r->kind, FLIT_STATS_ROW_FREE);
	row_unlock(r, s);
	if ((uint32_t)i < __atomic_load_n(&st->free_hint, __ATOMIC_RELAXED))
		__atomic_store_n(&st->free_hint, (uint32_t)i, __ATOMIC_RELAXED);
}

static int mkdir_shared(const char *path)
{
	if (mkdir(path, 01777) == 0) {
		chmod(path, 01777); /* umask applies to mkdir */
		return 0;
	}
	return errno == EEXIST ? 0 : -errno;
}

static void read_small(const char *path, char *buf, size_t cap, bool nul_to_blank)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, cap - 1);

	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
		buf[--n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0' || (nul_to_blank && buf[i] == '\n'))
			buf[i] = ' ';
}

int64_t flit_stats_proc_start(int pid)
{
	char path[64], buf[1024];
	unsigned long long start;
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold blanks and ')', so count
	 * fields after the last ')'; starttime is field 22, the 20th after it */
	char *p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	for (int field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EIO;
	}
	if (sscanf(p + 1, "%llu", &start) != 1)
		return -EIO;
	return (int64_t)start;
}

static uint64_t pidns_ino(void)
{
	struct stat sb;

	return stat("/proc/self/ns/pid", &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

static int ofd_lock(int fd, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };

	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

/* 1 if a process holds the file's lock, 0 if not, -errno. */
static int ofd_held(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };

	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

/* "<pid>-<n>" or ".<pid>-<n>.new" (a creation that did not finish) */
static bool stats_name(const char *name, int *pid, bool *staging)
{
	const char *p = name;
	char *end;
	long v;

	*staging = *p == '.';
	if (*staging)
		p++;
	if (*p < '1' || *p > '9')
		return false;
	v = strtol(p, &end, 10);
	if (v <= 0 || v > INT32_MAX || *end != '-' || end[1] < '0' || end[1] > '9')
		return false;
	strtol(end + 1, &end, 10);
	if (*staging ? strcmp(end, ".new") : *end != '\0')
		return false;
	*pid = (int)v;
	return true;
}

/* Counters files in dir whose writer died: removed.  The lock decides (a
 * dead process holds none); kill(pid, 0) first spares live ones an open(). */
static int gc_dir(const char *dir, bool only_dead_pids,
		  void (*fn)(void *arg, const char *path, const char *why), void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return errno == ENOENT ? 0 : flit_err(errno, "stats: cannot read %s", dir);
	while ((e = readdir(d))) {
		char path[FLIT_PATH_MAX + 300], why[128] = "";
		bool staging;
		int pid, fd, held;

		if (!stats_name(e->d_name, &pid, &staging) || pid == (int)getpid())
			continue;
		/* a staging file is unlocked for a moment after its open():
		 * only a dead creator's goes */
		if ((only_dead_pids || staging) && !(kill(pid, 0) < 0 && errno == ESRCH))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		held = ofd_held(fd);
		if (held == 0) {
			struct flit_stats_hdr h;
			if (!staging && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
			    !memcmp(h.magic, FLIT_STATS_MAGIC, 8))
				flit_stats_liveness(path, &h, why, sizeof(why));
			else
				snprintf(why, sizeof(why), "%s", staging ? "an unfinished creation" : "its writer died");
		}
		close(fd);
		if (held == 0 && unlink(path) == 0) {
			n++;
			if (fn)
				fn(arg, path, why);
		}
	}
	closedir(d);
	return n;
}

int flit_stats_gc(const char *dir, void (*fn)(void *arg, const char *path, const char *why),
		  void *arg)
{
	return gc_dir(dir, false, fn, arg);
}

static const char *const udp_backends[] = { "sockets", "io_uring" };

static void fill_header(struct flit_stats *st, const struct flit_cfg_context *cfg,
			unsigned n)
{
	struct flit_stats_hdr *h = hdr(st);
	int64_t start = flit_stats_proc_start((int)getpid());

	memcpy(h->magic, FLIT_STATS_MAGIC, 8);
	h->version = FLIT_STATS_VERSION;
	h->hdr_size = FLIT_STATS_HDR_SIZE;
	h->row_size = FLIT_STATS_ROW_SIZE;
	h->row_cap = st->row_cap;
	h->ncounters = FLIT_STATS_NCOUNTERS;
	h->endian = ENDIAN_MARK;
	h->pid = (uint32_t)getpid();
	h->ctx_index = n;
	h->start_time = start > 0 ? (uint64_t)start : 0;
	h->pidns = pidns_ino();
	h->created_mono_ns = flit_monotonic_now();
	h->created_real_ns = flit_realtime_now();
	h->interval_ms = (uint32_t)(st->interval_ns / 1000000u);
	h->updated_ns = h->created_mono_ns;
	h->rows_used = 1;
	put_str(h->clock, sizeof(h->clock), "monotonic");
	read_small("/proc/self/comm", h->comm, sizeof(h->comm), false);
	put_str(h->domain, sizeof(h->domain), cfg->domain);
	put_str(h->transports, sizeof(h->transports), cfg->transports);
	/* a long shm_dir cuts the summary short: it is a summary */
	if (snprintf(h->config, sizeof(h->config),
		 "shm_dir=%s udp.interface=%s udp.resolver=%s udp.backend=%s stats_interval_ms=%u stats_rows=%u",
		 cfg->shm_dir, cfg->udp_interface[0] ? cfg->udp_interface : "-",
		 cfg->udp_resolver, (unsigned)cfg->udp_backend < 2 ? udp_backends[cfg->udp_backend] : "?",
		 (unsigned)cfg->stats_interval_ms, (unsigned)cfg->stats_rows) >= (int)sizeof(h->config))
		h->config[sizeof(h->config) - 1] = '\0';
	read_small("/proc/self/cmdline", h->cmdline, sizeof(h->cmdline), true);

	struct flit_stats_row *r = row_at(st, 0);
	r->kind = FLIT_STATS_ROW_CONTEXT;
	r->created_ns = r->updated_ns = h->created_mono_ns;
	snprintf(r->name, sizeof(r->name), "%s", cfg->domain);
}

/* Create, lock, size, map and fill the file under a staging name, then give
 * it its name: a reader never sees a half-made file. */
static int create_file(struct flit_stats *st, const struct flit_cfg_context *cfg)
{
	char tmp[sizeof(st->path) + 8];
	unsigned n = atomic_fetch_add(&ctx_seq, 1);
	int err;

	if ((err = mkdir_shared(cfg->stats_dir)))
		return flit_err(-err, "stats: cannot create the directory %s", cfg->stats_dir);
	gc_dir(cfg->stats_dir, true, NULL, NULL);
	snprintf(st->path, sizeof(st->path), "%s/%d-%u", cfg->stats_dir, (int)st->pid, n);
	snprintf(tmp, sizeof(tmp), "%s/.%d-%u.new", cfg->stats_dir, (int)st->pid, n);
	st->map_len = FLIT_STATS_HDR_SIZE + (size_t)st->row_cap * FLIT_STATS_ROW_SIZE;
	unlink(tmp); /* debris of an earlier process with our pid */
	st->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		      cfg->stats_file_mode);
	if (st->fd < 0)
		return flit_err(errno, "stats: cannot create %s", tmp);
	if ((err = ofd_lock(st->fd, F_WRLCK))) {
		err = flit_err(-err, "stats: cannot lock %s", tmp);
		goto fail;
	}
	if (fchmod(st->fd, cfg->stats_file_mode) < 0 ||
	    ftruncate(st->fd, (off_t)st->map_len) < 0) {
		err = flit_err(errno, "stats: cannot size %s to %zu bytes", tmp, st->map_len);
		goto fail;
	}
	st->map = mmap(NULL, st->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, st->fd, 0);
	if (st->map == MAP_FAILED) {
		st->map = NULL;
		err = flit_err(errno, "stats: cannot map %s (%zu bytes)", tmp, st->map_len);
		goto fail;
	}
	fill_header(st, cfg, n);
	if (rename(tmp, st->path) < 0) {
		err = flit_err(errno, "stats: cannot rename %s to %s", tmp, st->path);
		goto fail;
	}
	return 0;
fail:
	if (st->map)
		munmap(st->map, st->map_len);
	st->map = NULL;
	close(st->fd);
	st->fd = -1;
	unlink(tmp);
	return err;
}

struct flit_stats *flit_stats_open(const struct flit_cfg_context *cfg)
{
	struct flit_stats *st = calloc(1, sizeof(*st));
	int err;

	if (!st)
		return flit_err_null(ENOMEM, "stats: out of memory");
	st->fd = -1;
	st->pid = getpid();
	st->row_cap = cfg->stats_rows;
	st->interval_ns = (uint64_t)cfg->stats_interval_ms * 1000000u;
	for (unsigned t = 0; t < TP_MAX; t++)
		atomic_init(&st->tp_row[t], -1);
	if (!cfg->stats) {
		st->err = ENOENT;
		snprintf(st->errmsg, sizeof(st->errmsg), "stats: context.stats is off");
		return st;
	}
	if ((err = create_file(st, cfg))) {
		st->err = -err;
		snprintf(st->errmsg, sizeof(st->errmsg), "%s", flit_errmsg());
		flit_warn("%s; the context works without a counters file", st->errmsg);
	}
	return st;
}

void flit_stats_close(struct flit_stats *st)
{
	if (!st)
		return;
	if (st->map) {
		/* a forked child closing its copy leaves the parent's file */
		if (getpid() == st->pid)
			unlink(st->path);
		munmap(st->map, st->map_len);
	}
	if (st->fd >= 0)
		close(st->fd);
	free(st);
}

bool flit_stats_on(const struct flit_stats *st)
{
	return st && st->map;
}

int flit_stats_path(const struct flit_stats *st, char *buf, size_t len)
{
	if (!st || (!buf && len))
		return flit_err(EINVAL, "stats: bad arguments");
	if (!st->map)
		return flit_err(st->err ? st->err : ENOENT, "%s", st->errmsg);
	return snprintf(buf, len, "%s", st->path);
}

void flit_stats_closing(struct flit_stats *st)
{
	if (st->map)
		__atomic_fetch_or(&hdr(st)->flags, FLIT_STATS_HF_CLOSING, __ATOMIC_RELAXED);
}

void flit_stats_tick_init(const struct flit_stats *st, struct flit_stats_tick *t,
			  struct flit_stats_when *w)
{
	t->period = 1;
	t->countdown = st && st->map ? 1 : UINT32_MAX;
	w->checked_ns = 0;
	w->written_ns = 0;
}

bool flit_stats_tick_due(const struct flit_stats *st, struct flit_stats_tick *t,
			 struct flit_stats_when *w, unsigned every, uint64_t *now)
{
	if (!st->map) {
		t->countdown = UINT32_MAX;
		return false;
	}
	uint64_t ns = flit_monotonic_now(), since = ns - w->checked_ns;
	uint64_t interval = st->interval_ns * (every ? every : 1);

	/* about four clock checks per interval: the period doubles while the
	 * checks come too often; when they come too late it is set from the
	 * call rate just measured (a burst followed by a trickle is caught up
	 * at the first late check, not after halvings) */
	w->checked_ns = ns;
	if (since < interval / 8) {
		if (t->period < TICK_PERIOD_MAX)
			t->period <<= 1;
	} else if (since > interval / 2) {
		uint64_t p = (uint64_t)t->period * (interval / 4) / since;
		t->period = p < 1 ? 1 : (uint32_t)p;
	}
	t->countdown = t->period;
	if (ns - w->written_ns < interval)
		return false;
	w->written_ns = ns;
	*now = ns;
	return true;
}

static void ctr_array(const struct flit_counters *c, uint64_t *v)
{
	memcpy(v, &c->msgs_sent, NCTR_CORE * sizeof(uint64_t));
}

/* The context row from the totals; the caller holds its lock. */
static void ctx_row_fill(struct flit_stats *st, uint64_t now)
{
	uint64_t v[FLIT_STATS_COUNTERS_USED] = { 0 };

	memcpy(v, st->rx, NCTR_CORE * sizeof(uint64_t));
	for (unsigned t = 0; t < TP_MAX; t++)
		for (unsigned i = 0; i < NCTR_CORE; i++)
			v[i] += st->tx[t][i];
	v[FLIT_STATS_MSGS_FILTERED] = st->rx_filtered;
	v[FLIT_STATS_MSGS_FILTERED_EARLY] = st->rx_filtered_early;
	row_fill(row_at(st, 0), v, FLIT_STATS_COUNTERS_USED, now);
}

/* Move what publisher p counted since its last report (cur - p->rep) into
 * its transport's totals, the transport row and the context row.  `wait`:
 * take the context row's lock even if that means waiting (closing a
 * publisher); else skip when another thread holds it -- the difference
 * stays pending for the next write. */
static void totals_add(struct flit_stats *st, struct flit_stats_pub *p,
		       const uint64_t *cur, uint64_t now, bool wait)
{
	struct flit_stats_row *cr = row_at(st, 0);
	uint64_t s, *tx = st->tx[p->transport];
	bool moved = false;

	if (wait)
		s = row_lock_wait(cr);
	else if (!row_lock(cr, &s))
		return;
	for (unsigned i = 0; i < NCTR_CORE; i++) {
		uint64_t v = cur[i] > p->rep[i] ? cur[i] : p->rep[i];
		if (v != p->rep[i]) {
			tx[i] += v - p->rep[i];
			p->rep[i] = v;
			moved = true;
		}
	}
	if (moved) {
		int tr = atomic_load(&st->tp_row[p->transport]);
		if (tr >= 0) {
			/* transport rows are written only under the context
			 * row's lock: this never waits */
			struct flit_stats_row *r = row_at(st, tr);
			uint64_t ts = row_lock_wait(r);
			row_fill(r, tx, NCTR_CORE, now);
			row_unlock(r, ts);
		}
		ctx_row_fill(st, now);
	}
	row_unlock(cr, s);
}

void flit_stats_transport_write(struct flit_stats *st, unsigned t,
				const char *tname, const char *desc, uint64_t now)
{
	struct flit_stats_row *cr, *r;
	uint64_t s, ts;
	int tr;

	if (!st->map || t >= TP_MAX)
		return;
	cr = row_at(st, 0);
	tr = atomic_load(&st->tp_row[t]);
	if (tr < 0) {
		/* made under the context row's lock, like every write of it */
		s = row_lock_wait(cr);
		tr = row_new(st, FLIT_STATS_ROW_TRANSPORT, 0, tname, desc, "transport");
		atomic_store(&st->tp_row[t], tr < 0 ? -2 : tr);
		row_unlock(cr, s);
		if (tr < 0)
			return;
	}
	if (tr == -2 || !row_lock(cr, &s))
		return;
	r = row_at(st, tr);
	ts = row_lock_wait(r);
	/* the description can change (an xdp program detached under a live
	 * context: kernel sockets take over) */
	if (strncmp(r->name, desc, sizeof(r->name) - 1))
		put_str(r->name, sizeof(r->name), desc);
	row_fill(r, st->tx[t], NCTR_CORE, now);
	row_unlock(r, ts);
	row_unlock(cr, s);
}

void flit_stats_ctx_write(struct flit_stats *st, const struct flit_counters *rx,
			  uint64_t now)
{
	struct flit_stats_row *cr;
	uint64_t s;

	if (!st->map)
		return;
	cr = row_at(st, 0);
	if (!row_lock(cr, &s))
		return;
	ctr_array(rx, st->rx);
	st->rx_filtered = rx->msgs_filtered;
	st->rx_filtered_early = rx->msgs_filtered_early;
	ctx_row_fill(st, now);
	row_unlock(cr, s);
	__atomic_fetch_add(&hdr(st)->refreshes, 1, __ATOMIC_RELAXED);
	hdr_touch(st, now);
}

void flit_stats_pub_add(struct flit_stats *st, struct flit_stats_pub *p,
			struct flit_stats_tick *tick, unsigned transport,
			const char *tname, const char *topic)
{
	memset(p, 0, sizeof(*p));
	p->row = -1;
	p->transport = transport < TP_MAX ? transport : TP_MAX - 1;
	flit_stats_tick_init(st, tick, &p->when);
	if (!st->map)
		return;
	p->row = row_new(st, FLIT_STATS_ROW_PUBLISHER, 0, tname, topic, "publisher");
}

void flit_stats_pub_write(struct flit_stats *st, struct flit_stats_pub *p,
			  const struct flit_counters *c, uint64_t now)
{
	uint64_t v[NCTR_CORE], s;

	if (!st->map)
		return;
	ctr_array(c, v);
	/* unchanged since the last write: nothing to write (100,000 idle
	 * publishers cost no row writes; a reader's rate over its
	 * updated_ns is 0 as it should be) */
	if (p->written && !memcmp(v, p->rep, sizeof(v)))
		return;
	if (p->row >= 0) {
		struct flit_stats_row *r = row_at(st, p->row);
		if (!row_lock(r, &s))
			return; /* the other thread writes it now */
		row_fill(r, v, NCTR_CORE, now);
		row_unlock(r, s);
	}
	p->written = true;
	totals_add(st, p, v, now, false);
	hdr_touch(st, now);
}

void flit_stats_pub_remove(struct flit_stats *st, struct flit_stats_pub *p,
			   const struct flit_counters *last)
{
	uint64_t v[NCTR_CORE], now;

	if (!st->map)
		return;
	now = flit_monotonic_now();
	ctr_array(last, v);
	totals_add(st, p, v, now, true);
	if (p->row >= 0)
		row_free(st, p->row);
	p->row = -1;
	hdr_touch(st, now);
}

void flit_stats_sub_add(struct flit_stats *st, struct flit_stats_sub *s,
			const char *topic, bool pattern)
{
	memset(s, 0, sizeof(*s));
	s->row = -1;
	if (!st->map)
		return;
	s->row = row_new(st, FLIT_STATS_ROW_SUBSCRIBER, pattern ? FLIT_STATS_RF_PATTERN : 0,
			 "", topic, "subscriber");
}

void flit_stats_sub_write(struct flit_stats *st, struct flit_stats_sub *s,
			  uint64_t now)
{
	uint64_t v[FLIT_STATS_COUNTERS_USED] = { 0 }, seq;
	struct flit_stats_row *r;

	if (!st->map || s->row < 0)
		return;
	v[FLIT_STATS_MSGS_RECEIVED] = s->msgs;
	v[FLIT_STATS_BYTES_RECEIVED] = s->bytes;
	v[FLIT_STATS_DUPLICATES] = s->dups;
	v[FLIT_STATS_MSGS_LOST] = s->lost;
	v[FLIT_STATS_LOSS_EVENTS] = s->loss_events;
	v[FLIT_STATS_SOURCES_JOINED] = s->bos;
	v[FLIT_STATS_SOURCES_LEFT] = s->eos;
	v[FLIT_STATS_SOURCES] = s->bos > s->eos ? s->bos - s->eos : 0;
	r = row_at(st, s->row);
	if (!row_lock(r, &seq))
		return;
	row_fill(r, v, FLIT_STATS_COUNTERS_USED, now);
	row_unlock(r, seq);
}

void flit_stats_sub_remove(struct flit_stats *st, struct flit_stats_sub *s)
{
	if (st->map && s->row >= 0)
		row_free(st, s->row);
	s->row = -1;
}

/* ---- reader ------------------------------------------------------------ */

__attribute__((format(printf, 3, 4)))
static int bad(int err, const char *path, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return flit_err(err, "%s: %s", path, msg);
}

static void nul_end(char *s, size_t cap)
{
	s[cap - 1] = '\0';
}

/* A consistent copy of row i: seq before, the row, seq after, all even and
 * equal.  0, 1 (free row: nothing copied), -EAGAIN (still being written
 * after every retry), -EBADMSG (short read: truncated under us). */
static int read_row(int fd, const struct flit_stats_hdr *h, uint32_t i,
		    struct flit_stats_row *out)
{
	off_t off = (off_t)h->hdr_size + (off_t)i * h->row_size;
	uint64_t s1, s2;

	for (unsigned tries = 0; tries < FLIT_STATS_READ_RETRIES; tries++) {
		if (pread(fd, &s1, sizeof(s1), off) != (ssize_t)sizeof(s1))
			return -EBADMSG;
		if (s1 & 1) {
			if (tries > 8)
				sched_yield();
			continue;
		}
		if (pread(fd, out, sizeof(*out), off) != (ssize_t)sizeof(*out) ||
		    pread(fd, &s2, sizeof(s2), off) != (ssize_t)sizeof(s2))
			return -EBADMSG;
		if (s1 == s2 && out->seq == s1)
			return out->kind == FLIT_STATS_ROW_FREE ? 1 : 0;
	}
	return -EAGAIN;
}

int flit_stats_read(const char *path, struct flit_stats_snap *snap)
{
	struct flit_stats_hdr *h = &snap->hdr;
	struct stat sb;
	ssize_t n;
	int fd, err = 0;

	memset(snap, 0, sizeof(*snap));
	snprintf(snap->path, sizeof(snap->path), "%s", path);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return flit_err(errno, "%s: cannot open", path);
	if (fstat(fd, &sb) < 0) {
		err = bad(errno, path, "cannot stat");
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		err = bad(EBADMSG, path, "not a regular file");
		goto out;
	}
	n = pread(fd, h, sizeof(*h), 0);
	if (n < 0) {
		err = bad(errno, path, "cannot read");
		goto out;
	}
	if (n < 8 || memcmp(h->magic, FLIT_STATS_MAGIC, 8)) {
		err = bad(EPROTO, path, "not a flit counters file (no %s magic)", FLIT_STATS_MAGIC);
		goto out;
	}
	if ((size_t)n < sizeof(*h)) {
		err = bad(EBADMSG, path, "truncated: %zd bytes, the header alone is %zu",
			  n, sizeof(*h));
		goto out;
	}
	if (h->endian != ENDIAN_MARK) {
		err = bad(EPROTO, path, "written with another byte order (endian mark %#x)", h->endian);
		goto out;
	}
	if (h->version != FLIT_STATS_VERSION) {
		err = bad(EPROTONOSUPPORT, path, "format version %u; this reader knows version %u",
			  h->version, FLIT_STATS_VERSION);
		goto out;
	}
	if (h->hdr_size < sizeof(*h) || h->hdr_size > (1u << 20) || h->hdr_size % 8 ||
	    h->row_size < sizeof(struct flit_stats_row) || h->row_size > (1u << 16) ||
	    h->row_size % 8 || h->row_cap < 1 || h->row_cap > (1u << 16) ||
	    h->ncounters < 1 || h->ncounters > (h->row_size - offsetof(struct flit_stats_row, c)) / 8) {
		err = bad(EBADMSG, path, "impossible sizes (header %u, row %u, %u rows, %u counters)",
			  h->hdr_size, h->row_size, h->row_cap, h->ncounters);
		goto out;
	}
	uint64_t want = h->hdr_size + (uint64_t)h->row_cap * h->row_size;
	if ((uint64_t)sb.st_size < want) {
		err = bad(EBADMSG, path, "truncated: %lld bytes, the header says %llu",
			  (long long)sb.st_size, (unsigned long long)want);
		goto out;
	}
	uint32_t used = __atomic_load_n(&h->rows_used, __ATOMIC_RELAXED);
	if (used > h->row_cap) {
		err = bad(EBADMSG, path, "corrupt: %u rows in use, of %u", used, h->row_cap);
		goto out;
	}
	nul_end(h->clock, sizeof(h->clock));
	nul_end(h->comm, sizeof(h->comm));
	nul_end(h->domain, sizeof(h->domain));
	nul_end(h->transports, sizeof(h->transports));
	nul_end(h->config, sizeof(h->config));
	nul_end(h->cmdline, sizeof(h->cmdline));

	snap->rows = calloc(used ? used : 1, sizeof(*snap->rows));
	if (!snap->rows) {
		err = flit_err(ENOMEM, "%s: out of memory", path);
		goto out;
	}
	for (uint32_t i = 0; i < used; i++) {
		struct flit_stats_row *r = &snap->rows[snap->nrows];
		int rc = read_row(fd, h, i, r);
		if (rc == -EAGAIN) {
			snap->torn++;
			continue;
		}
		if (rc == -EBADMSG) {
			err = bad(EBADMSG, path, "truncated while reading row %u", i);
			goto out;
		}
		if (rc == 1)
			continue;
		if (r->kind > FLIT_STATS_ROW_SUBSCRIBER || (i == 0) != (r->kind == FLIT_STATS_ROW_CONTEXT)) {
			err = bad(EBADMSG, path, "corrupt: row %u has kind %u", i, r->kind);
			goto out;
		}
		nul_end(r->transport, sizeof(r->transport));
		nul_end(r->name, sizeof(r->name));
		for (unsigned c = h->ncounters; c < FLIT_STATS_NCOUNTERS; c++)
			r->c[c] = 0;
		snap->nrows++;
	}
out:
	close(fd);
	if (err) {
		free(snap->rows);
		snap->rows = NULL;
		snap->nrows = 0;
	}
	return err;
}

void flit_stats_snap_free(struct flit_stats_snap *snap)
{
	if (!snap)
		return;
	free(snap->rows);
	snap->rows = NULL;
	snap->nrows = 0;
}

int flit_stats_liveness(const char *path, const struct flit_stats_hdr *h,
			char *why, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), held;
	char dummy[8];

	if (!why) {
		why = dummy;
		len = sizeof(dummy);
	}
	if (len)
		why[0] = '\0';
	if (fd < 0)
		return flit_err(errno, "%s: cannot open", path);
	held = ofd_held(fd);
	close(fd);
	if (held < 0)
		return flit_err(-held, "%s: cannot test its lock", path);
	if (held)
		return FLIT_STATS_LIVE;
	if (h->pidns && h->pidns == pidns_ino()) {
		int64_t start = flit_stats_proc_start((int)h->pid);
		if (start == -ENOENT)
			snprintf(why, len, "pid %u is gone", h->pid);
		else if (start >= 0 && (uint64_t)start != h->start_time)
			snprintf(why, len, "pid %u is another process now (start time differs)", h->pid);
		else
			snprintf(why, len, "pid %u no longer holds it (its context did not close)", h->pid);
	} else {
		snprintf(why, len, "its writer (pid %u of another pid namespace) is gone", h->pid);
	}
	return FLIT_STATS_STALE;
}
