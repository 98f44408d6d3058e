// SPDX-License-Identifier: BSD-2-Clause
/* The counters file (userspace/stats.c, docs/STATS.md): a context makes one
 * (mode, header, pid and start time) and removes it at close; rows come and
 * go with publishers and subscribers and count what they do (also in a
 * process that never polls; losses of an overwrite ring); a full table is
 * reported and harms nothing; the tick reads the clock rarely; a reader
 * racing a writer never sees a torn row; a row left mid-write counts as
 * torn; truncated, foreign, corrupt and randomly damaged files give a clear
 * error and never a crash; a file left by a dead process is stale (pid
 * gone) and gc removes it, never a live one.  Files go to a directory of
 * the test's own (tests/testlib.h). */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "testlib.h"
#include "stats.h"

static char stats_dir[300];

static void dirs(void)
{
	mkdir(tl_shm_dir(), 0700);
	snprintf(stats_dir, sizeof(stats_dir), "%s/stats", tl_shm_dir());
}

/* A context whose counters file goes to the test's directory. */
static flit_ctx *ctx_with(const char *extra)
{
	char cfg[1024];

	dirs();
	snprintf(cfg, sizeof(cfg), "context.stats_dir = %s\ncontext.transports = shm\n%s",
		 stats_dir, extra ? extra : "");
	return tl_ctx(cfg);
}

static void path_of(flit_ctx *ctx, char *buf, size_t len)
{
	int n = flit_ctx_stats_path(ctx, buf, len);
	if (n < 0)
		fprintf(stderr, "flit_ctx_stats_path: %s\n", flit_errmsg());
	assert_true(n > 0 && (size_t)n < len);
}

static const struct flit_stats_row *find(const struct flit_stats_snap *s, uint32_t kind,
					 const char *name)
{
	for (unsigned i = 0; i < s->nrows; i++)
		if (s->rows[i].kind == kind && (!name || !strcmp(s->rows[i].name, name)))
			return &s->rows[i];
	return NULL;
}

static unsigned count_kind(const struct flit_stats_snap *s, uint32_t kind)
{
	unsigned n = 0;
	for (unsigned i = 0; i < s->nrows; i++)
		n += s->rows[i].kind == kind;
	return n;
}

static void snap(const char *path, struct flit_stats_snap *s)
{
	int rc = flit_stats_read(path, s);
	if (rc)
		fprintf(stderr, "flit_stats_read: %s\n", flit_errmsg());
	assert_int_equal(rc, 0);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

/* Rows are refreshed at a call that finds the interval passed (the calls
 * read the clock every `period` calls): poll ctx (if not NULL) or send on
 * pub (if not NULL, counting in *sent) once a millisecond until row
 * (kind, name)'s counter reaches want; its last value. */
static uint64_t wait_row(const char *path, flit_ctx *ctx, flit_pub *pub, uint64_t *sent,
			 uint32_t kind, const char *name, unsigned slot, uint64_t want)
{
	uint64_t v = 0, end = tl_now_ms() + 3000;

	for (;;) {
		struct flit_stats_snap s;
		snap(path, &s);
		for (unsigned i = 0; i < s.nrows; i++)
			if (s.rows[i].kind == kind && (!name || !strcmp(s.rows[i].name, name)))
				v = s.rows[i].c[slot];
		flit_stats_snap_free(&s);
		if (v >= want || tl_now_ms() > end)
			return v;
		sleep_ms(1);
		if (ctx)
			flit_ctx_poll(ctx, 0);
		if (pub && flit_pub_send(pub, "w", 1) == 0)
			(*sent)++;
	}
}

struct rx {
	uint64_t data, lost, loss_events;
};

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct rx *r = arg;
	if (m->kind == FLIT_MSG_DATA)
		r->data++;
	else if (m->kind == FLIT_MSG_LOSS) {
		r->lost += m->lost;
		r->loss_events++;
	}
}

/* ---- the file of a context ------------------------------------------------ */

static void context_file_has_header_and_goes_at_close(void **state)
{
	flit_ctx *ctx = ctx_with("context.domain = statsdom\n");
	struct flit_stats_snap s;
	struct stat sb;
	char path[512], want[512];

	assert_non_null(ctx);
	path_of(ctx, path, sizeof(path));
	snprintf(want, sizeof(want), "%s/%d-", stats_dir, (int)getpid());
	assert_memory_equal(path, want, strlen(want));
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	snap(path, &s);
	assert_memory_equal(s.hdr.magic, FLIT_STATS_MAGIC, 8);
	assert_int_equal(s.hdr.version, FLIT_STATS_VERSION);
	assert_int_equal(s.hdr.pid, getpid());
	assert_int_equal((int64_t)s.hdr.start_time, flit_stats_proc_start(getpid()));
	assert_int_equal(s.hdr.interval_ms, 100);
	assert_int_equal(s.hdr.row_cap, 256);
	assert_string_equal(s.hdr.clock, "monotonic");
	assert_string_equal(s.hdr.domain, "statsdom");
	assert_string_equal(s.hdr.transports, "shm");
	assert_string_equal(s.hdr.comm, "test_stats");
	assert_non_null(strstr(s.hdr.cmdline, "test_stats"));
	assert_non_null(find(&s, FLIT_STATS_ROW_CONTEXT, NULL));
	assert_int_equal(flit_stats_liveness(path, &s.hdr, NULL, 0), FLIT_STATS_LIVE);
	flit_stats_snap_free(&s);

	/* truncated path: the full length, NUL-terminated */
	char small[8];
	assert_int_equal(flit_ctx_stats_path(ctx, small, sizeof(small)), (int)strlen(path));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_int_equal(flit_ctx_stats_path(NULL, small, sizeof(small)), -EINVAL);

	flit_ctx_close(ctx);
	assert_int_equal(stat(path, &sb), -1);
	assert_int_equal(errno, ENOENT);
}

static void stats_off_makes_no_file(void **state)
{
	flit_ctx *ctx = ctx_with("context.stats = off\n");
	char path[512];

	assert_non_null(ctx);
	assert_int_equal(flit_ctx_stats_path(ctx, path, sizeof(path)), -ENOENT);
	assert_non_null(strstr(flit_errmsg(), "context.stats is off"));
	/* the hot paths still work, with no file */
	flit_pub *pub = flit_pub_new(ctx, "off.t", NULL);
	assert_non_null(pub);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(flit_pub_send(pub, "x", 1), 0);
	flit_pub_close(pub);
	flit_ctx_close(ctx);
}

static void file_mode_and_rows_follow_config(void **state)
{
	flit_ctx *ctx = ctx_with("context.stats_file_mode = 0640\ncontext.stats_rows = 32\n"
				 "context.stats_interval_ms = 7\n");
	struct flit_stats_snap s;
	struct stat sb;
	char path[512];

	assert_non_null(ctx);
	path_of(ctx, path, sizeof(path));
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0640);
	assert_int_equal(sb.st_size, FLIT_STATS_HDR_SIZE + 32 * FLIT_STATS_ROW_SIZE);
	snap(path, &s);
	assert_int_equal(s.hdr.row_cap, 32);
	assert_int_equal(s.hdr.interval_ms, 7);
	flit_stats_snap_free(&s);
	flit_ctx_close(ctx);

	/* bad values are refused by the config, naming the key */
	assert_null(ctx_with("context.stats_file_mode = 0644\n"));
	assert_non_null(strstr(flit_errmsg(), "context.stats_file_mode"));
	assert_null(ctx_with("context.stats_dir = relative\n"));
	assert_non_null(strstr(flit_errmsg(), "context.stats_dir"));
	assert_null(ctx_with("context.stats_interval_ms = 0\n"));
	assert_null(ctx_with("context.stats_rows = 8\n"));
}

static void unusable_directory_leaves_a_working_context(void **state)
{
	flit_ctx *ctx = tl_ctx("context.stats_dir = /proc/flit-no-such-dir\ncontext.transports = shm\n");
	char path[512];

	assert_non_null(ctx);
	assert_true(flit_ctx_stats_path(ctx, path, sizeof(path)) < 0);
	assert_non_null(strstr(flit_errmsg(), "/proc/flit-no-such-dir"));
	flit_pub *pub = flit_pub_new(ctx, "nodir.t", NULL);
	assert_non_null(pub);
	assert_int_equal(flit_pub_send(pub, "x", 1), 0);
	flit_pub_close(pub);
	flit_ctx_close(ctx);
}

/* ---- rows ----------------------------------------------------------------- */

static void rows_count_what_publishers_and_subscribers_do(void **state)
{
	flit_ctx *ctx = ctx_with("context.stats_interval_ms = 1\n");
	struct flit_stats_snap s;
	struct rx r = { 0 };
	char path[512];
	const int n = 500;

	assert_non_null(ctx);
	path_of(ctx, path, sizeof(path));
	flit_sub *sub = tl_sub(ctx, "rows.a", on_msg, &r);
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg, .arg = &r, .pattern = true);
	flit_sub *psub = flit_sub_new(ctx, "rows.*", &so);
	flit_pub *pub = flit_pub_new(ctx, "rows.a", NULL);
	assert_non_null(sub);
	assert_non_null(psub);
	assert_non_null(pub);
	while (flit_pub_receivers(pub) < 1)
		flit_ctx_poll(ctx, 0);
	for (int i = 0; i < n; i++) {
		while (flit_pub_send(pub, "0123456789", 10) == FLIT_BACK_PRESSURED)
			flit_ctx_poll(ctx, 0);
		flit_ctx_poll(ctx, 0);
	}
	while (r.data < 2 * (uint64_t)n)
		flit_ctx_poll(ctx, 0);
	/* a poll writes every row */
	assert_int_equal(wait_row(path, ctx, NULL, NULL, FLIT_STATS_ROW_SUBSCRIBER, "rows.*",
				  FLIT_STATS_MSGS_RECEIVED, n), n);
	assert_int_equal(wait_row(path, ctx, NULL, NULL, FLIT_STATS_ROW_PUBLISHER, "rows.a",
				  FLIT_STATS_MSGS_SENT, n), n);

	snap(path, &s);
	const struct flit_stats_row *pr = find(&s, FLIT_STATS_ROW_PUBLISHER, "rows.a");
	const struct flit_stats_row *sr = find(&s, FLIT_STATS_ROW_SUBSCRIBER, "rows.a");
	const struct flit_stats_row *pp = find(&s, FLIT_STATS_ROW_SUBSCRIBER, "rows.*");
	const struct flit_stats_row *tr = find(&s, FLIT_STATS_ROW_TRANSPORT, NULL);
	const struct flit_stats_row *cr = find(&s, FLIT_STATS_ROW_CONTEXT, NULL);
	assert_non_null(pr);
	assert_non_null(sr);
	assert_non_null(pp);
	assert_non_null(tr);
	assert_non_null(cr);
	assert_string_equal(pr->transport, "shm");
	assert_int_equal(pr->c[FLIT_STATS_MSGS_SENT], n);
	assert_int_equal(pr->c[FLIT_STATS_BYTES_SENT], 10 * n);
	assert_int_equal(pr->c[FLIT_STATS_FRAMES_SENT], n);
	assert_int_equal(sr->c[FLIT_STATS_MSGS_RECEIVED], n);
	assert_int_equal(sr->c[FLIT_STATS_BYTES_RECEIVED], 10 * n);
	assert_int_equal(sr->c[FLIT_STATS_SOURCES], 1);
	assert_int_equal(sr->c[FLIT_STATS_SOURCES_JOINED], 1);
	assert_int_equal(sr->flags & FLIT_STATS_RF_PATTERN, 0);
	assert_int_equal(pp->c[FLIT_STATS_MSGS_RECEIVED], n);
	assert_true(pp->flags & FLIT_STATS_RF_PATTERN);
	assert_string_equal(tr->transport, "shm");
	assert_int_equal(tr->c[FLIT_STATS_MSGS_SENT], n);
	assert_int_equal(cr->c[FLIT_STATS_MSGS_SENT], n);
	assert_int_equal(cr->c[FLIT_STATS_MSGS_RECEIVED], n); /* once per message */
	assert_true(pr->updated_ns >= pr->created_ns);
	flit_stats_snap_free(&s);

	/* the publisher goes: its row too, its counts stay in the totals */
	flit_pub_close(pub);
	flit_sub_close(psub);
	snap(path, &s);
	assert_null(find(&s, FLIT_STATS_ROW_PUBLISHER, NULL));
	assert_null(find(&s, FLIT_STATS_ROW_SUBSCRIBER, "rows.*"));
	assert_non_null(find(&s, FLIT_STATS_ROW_SUBSCRIBER, "rows.a"));
	assert_int_equal(find(&s, FLIT_STATS_ROW_TRANSPORT, NULL)->c[FLIT_STATS_MSGS_SENT], n);
	assert_int_equal(find(&s, FLIT_STATS_ROW_CONTEXT, NULL)->c[FLIT_STATS_MSGS_SENT], n);
	flit_stats_snap_free(&s);

	/* a new publisher reuses a free row */
	pub = flit_pub_new(ctx, "rows.b", NULL);
	assert_non_null(pub);
	snap(path, &s);
	assert_non_null(find(&s, FLIT_STATS_ROW_PUBLISHER, "rows.b"));
	assert_int_equal(count_kind(&s, FLIT_STATS_ROW_PUBLISHER), 1);
	assert_true(s.hdr.rows_used <= 5);
	flit_stats_snap_free(&s);
	flit_pub_close(pub);
	flit_sub_close(sub);
	flit_ctx_close(ctx);
}

/* The publisher's thread refreshes its row, its transport's and the
 * context's: no flit_ctx_poll() needed. */
static void publisher_that_never_polls_shows_live_counters(void **state)
{
	flit_ctx *ctx = ctx_with("context.stats_interval_ms = 1\n");
	struct flit_stats_snap s;
	char path[512];
	uint64_t last = 0, sent = 0;

	assert_non_null(ctx);
	path_of(ctx, path, sizeof(path));
	flit_pub *pub = flit_pub_new(ctx, "nopoll.t", NULL);
	assert_non_null(pub);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 100; i++, sent++)
			assert_int_equal(flit_pub_send(pub, "abcd", 4), 0);
		/* the sends themselves refresh the rows (a send writes what
		 * was sent before it) */
		uint64_t want = sent;
		assert_true(wait_row(path, NULL, pub, &sent, FLIT_STATS_ROW_PUBLISHER, "nopoll.t",
				     FLIT_STATS_MSGS_SENT, want) >= want);
		snap(path, &s);
		const struct flit_stats_row *pr = find(&s, FLIT_STATS_ROW_PUBLISHER, "nopoll.t");
		const struct flit_stats_row *cr = find(&s, FLIT_STATS_ROW_CONTEXT, NULL);
		assert_non_null(pr);
		if (pr->c[FLIT_STATS_MSGS_SENT] <= last)
			fprintf(stderr, "round %d: msgs_sent %llu, before %llu, sent %llu\n", round,
				(unsigned long long)pr->c[FLIT_STATS_MSGS_SENT],
				(unsigned long long)last, (unsigned long long)sent);
		assert_true(pr->c[FLIT_STATS_MSGS_SENT] > last);
		assert_true(pr->c[FLIT_STATS_MSGS_SENT] >= 100u * (unsigned)(round + 1));
		assert_int_equal(cr->c[FLIT_STATS_MSGS_SENT], pr->c[FLIT_STATS_MSGS_SENT]);
		assert_int_equal(find(&s, FLIT_STATS_ROW_TRANSPORT, NULL)->c[FLIT_STATS_MSGS_SENT],
				 pr->c[FLIT_STATS_MSGS_SENT]);
		last = pr->c[FLIT_STATS_MSGS_SENT];
		flit_stats_snap_free(&s);
	}
	/* claim/commit and flush tick too: after a millisecond between calls
	 * every call reads the clock */
	void *buf;
	assert_int_equal(flit_pub_claim(pub, 8, &buf), 0);
	memcpy(buf, "claimed!", 8);
	sleep_ms(2);
	assert_int_equal(flit_pub_commit(pub, 8), 0);
	sleep_ms(2);
	assert_int_equal(flit_pub_flush(pub), 0);
	snap(path, &s);
	assert_int_equal(find(&s, FLIT_STATS_ROW_PUBLISHER, "nopoll.t")->c[FLIT_STATS_MSGS_SENT],
			 sent + 1);
	flit_stats_snap_free(&s);
	flit_pub_close(pub);
	flit_ctx_close(ctx);
}

static void subscriber_row_counts_losses_of_an_overwrite_ring(void **state)
{
	flit_ctx *ctx = ctx_with("context.stats_interval_ms = 1\n"
				 "source.shm.mode = overwrite\nsource.shm.capacity = 64K\n");
	struct flit_stats_snap s;
	struct rx r = { 0 };
	char path[512], msg[200];
	uint64_t end;

	assert_non_null(ctx);
	path_of(ctx, path, sizeof(path));
	flit_sub *sub = tl_sub(ctx, "lossy", on_msg, &r);
	flit_pub *pub = flit_pub_new(ctx, "lossy", NULL);
	assert_non_null(sub);
	assert_non_null(pub);
	while (flit_pub_receivers(pub) < 1)
		flit_ctx_poll(ctx, 0);
	memset(msg, 'x', sizeof(msg));
	for (int i = 0; i < 5000; i++) /* 1 MB through a 64 KB ring, unread */
		assert_int_equal(flit_pub_send(pub, msg, sizeof(msg)), 0);
	end = tl_now_ms() + 5000;
	while (r.data + r.lost < 5000 && tl_now_ms() < end)
		flit_ctx_poll(ctx, 0);
	assert_true(r.loss_events > 0);
	assert_int_equal(wait_row(path, ctx, NULL, NULL, FLIT_STATS_ROW_SUBSCRIBER, "lossy",
				  FLIT_STATS_MSGS_LOST, r.lost), r.lost);
	assert_int_equal(wait_row(path, ctx, NULL, NULL, FLIT_STATS_ROW_CONTEXT, NULL,
				  FLIT_STATS_MSGS_LOST, r.lost), r.lost);
	snap(path, &s);
	const struct flit_stats_row *sr = find(&s, FLIT_STATS_ROW_SUBSCRIBER, "lossy");
	assert_non_null(sr);
	assert_int_equal(sr->c[FLIT_STATS_MSGS_LOST], r.lost);
	assert_int_equal(sr->c[FLIT_STATS_LOSS_EVENTS], r.loss_events);
	assert_int_equal(sr->c[FLIT_STATS_MSGS_RECEIVED], r.data);
	assert_int_equal(find(&s, FLIT_STATS_ROW_CONTEXT, NULL)->c[FLIT_STATS_MSGS_LOST], r.lost);
	flit_stats_snap_free(&s);
	flit_pub_close(pub);
	flit_sub_close(sub);
	flit_ctx_close(ctx);
}

static char warned[512];
static void print_capture(enum flit_log_level level, const char *fmt, va_list ap)
{
	if (level == FLIT_LOG_WARN && !warned[0])
		vsnprintf(warned, sizeof(warned), fmt, ap);
}

static void full_table_is_reported_and_objects_still_work(void **state)
{
	flit_ctx *ctx = ctx_with("context.stats_rows = 16\ncontext.stats_interval_ms = 1\n");
	flit_pub *pubs[20];
	struct flit_stats_snap s;
	char path[512], topic[32];

	assert_non_null(ctx);
	path_of(ctx, path, sizeof(path));
	warned[0] = '\0';
	flit_print_fn old = flit_set_print(print_capture);
	for (int i = 0; i < 20; i++) {
		snprintf(topic, sizeof(topic), "full.%02d", i);
		pubs[i] = flit_pub_new(ctx, topic, NULL);
		assert_non_null(pubs[i]);
	}
	flit_set_print(old);
	/* 16 rows: the context's, shm's, 14 publishers */
	assert_non_null(strstr(warned, "context.stats_rows"));
	assert_non_null(strstr(warned, path));
	for (int i = 0; i < 20; i++)
		assert_int_equal(flit_pub_send(pubs[i], "x", 1), 0);
	sleep_ms(2);
	for (int i = 0; i < 20; i++)
		assert_int_equal(flit_pub_send(pubs[i], "y", 1), 0);
	snap(path, &s);
	assert_int_equal(s.hdr.rows_dropped, 6);
	assert_int_equal(count_kind(&s, FLIT_STATS_ROW_PUBLISHER), 14);
	/* publishers without a row still count in the totals (each second
	 * send wrote what the first sent) */
	assert_true(find(&s, FLIT_STATS_ROW_CONTEXT, NULL)->c[FLIT_STATS_MSGS_SENT] >= 20);
	flit_stats_snap_free(&s);
	for (int i = 0; i < 20; i++)
		flit_pub_close(pubs[i]);
	snap(path, &s);
	assert_int_equal(count_kind(&s, FLIT_STATS_ROW_PUBLISHER), 0);
	assert_int_equal(find(&s, FLIT_STATS_ROW_TRANSPORT, NULL)->c[FLIT_STATS_MSGS_SENT], 40);
	flit_stats_snap_free(&s);
	flit_ctx_close(ctx);
}

/* A hot loop reads the clock a handful of times, not once per call. */
static void tick_reads_the_clock_rarely(void **state)
{
	struct flit_cfg cfg;
	struct flit_cfg_context cc;
	struct flit_stats_tick t;
	struct flit_stats_when when;
	char text[512];
	unsigned checks = 0, due = 0;
	uint64_t now;

	dirs();
	flit_cfg_init(&cfg);
	snprintf(text, sizeof(text), "context.stats_dir = %s\n", stats_dir);
	assert_int_equal(flit_cfg_load_string(&cfg, text, "test"), 0);
	assert_int_equal(flit_cfg_context(&cfg, &cc), 0);
	struct flit_stats *st = flit_stats_open(&cc);
	assert_true(flit_stats_on(st));
	flit_stats_tick_init(st, &t, &when);
	for (unsigned i = 0; i < 4000000; i++)
		if (flit_stats_tick_hit(&t)) {
			checks++;
			due += flit_stats_tick_due(st, &t, &when, 1, &now);
		}
	assert_true(due >= 1);      /* the first call */
	assert_true(checks < 20000); /* 10 doublings, then one per 1024 calls */
	flit_stats_close(st);
	flit_cfg_free(&cfg);
}

/* ---- seqlock ----------------------------------------------------------------- */

struct writer {
	struct flit_stats *st;
	struct flit_stats_pub p;
	struct flit_stats_tick tick;
	volatile int stop;
	uint64_t writes;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct flit_counters c;

	/* every counter of every write equal: a torn copy has two values */
	for (uint64_t k = 1; !w->stop; k++) {
		/* a pause between writes: a reader's three preads then often
		 * fall between two writes, and often across one */
		if (k % 4 == 0) {
			struct timespec ts = { .tv_nsec = 20000 };
			nanosleep(&ts, NULL);
		}
		memset(&c, 0, sizeof(c));
		c.sz = sizeof(c);
		uint64_t *v = &c.msgs_sent;
		for (unsigned i = 0; i < 21; i++)
			v[i] = k;
		flit_stats_pub_write(w->st, &w->p, &c, k);
		w->writes++;
	}
	return NULL;
}

static void reader_racing_a_writer_never_sees_a_torn_row(void **state)
{
	struct flit_cfg cfg;
	struct flit_cfg_context cc;
	struct writer w = { 0 };
	pthread_t th;
	char text[512], path[512];
	unsigned reads = 0, seen_moving = 0, skipped = 0;
	uint64_t prev = 0, end;

	dirs();
	flit_cfg_init(&cfg);
	snprintf(text, sizeof(text), "context.stats_dir = %s\n", stats_dir);
	assert_int_equal(flit_cfg_load_string(&cfg, text, "test"), 0);
	assert_int_equal(flit_cfg_context(&cfg, &cc), 0);
	w.st = flit_stats_open(&cc);
	assert_true(flit_stats_on(w.st));
	assert_true(flit_stats_path(w.st, path, sizeof(path)) > 0);
	flit_stats_transport_write(w.st, 0, "shm", "shm", 1);
	flit_stats_pub_add(w.st, &w.p, &w.tick, 0, "shm", "race");
	assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
	end = tl_now_ms() + 1500;
	while ((reads < 3000 || w.writes < 100000) && tl_now_ms() < end) {
		struct flit_stats_snap s;
		snap(path, &s);
		for (unsigned i = 0; i < s.nrows; i++) {
			const struct flit_stats_row *r = &s.rows[i];
			for (unsigned c = 1; c < 21; c++)
				if (r->c[c] != r->c[0]) {
					fprintf(stderr, "row %s: counter %u = %llu, counter 0 = %llu\n",
						flit_stats_kind_name(r->kind), c,
						(unsigned long long)r->c[c], (unsigned long long)r->c[0]);
					fail();
				}
			if (r->kind == FLIT_STATS_ROW_PUBLISHER) {
				assert_true(r->c[0] >= prev); /* never backwards */
				seen_moving += r->c[0] != prev;
				prev = r->c[0];
				if (r->c[0])
					assert_int_equal(r->updated_ns, r->c[0]);
			}
		}
		/* a row its writer was rewriting through every retry is skipped
		 * and counted, never returned torn (checked above); under a
		 * loaded machine (CI) that happens now and then */
		skipped += s.torn;
		flit_stats_snap_free(&s);
		reads++;
	}
	if (skipped * 100 > reads)
		fail_msg("%u of %u reads skipped a row still being written", skipped, reads);
	w.stop = 1;
	pthread_join(th, NULL);
	assert_true(seen_moving > 1);
	flit_stats_close(w.st);
	flit_cfg_free(&cfg);
}

/* ---- bad files ----------------------------------------------------------------- */

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* A valid file's bytes (a context with a publisher and a subscriber). */
static size_t good_bytes(unsigned char **out)
{
	flit_ctx *ctx = ctx_with(NULL);
	char path[512];
	struct stat sb;

	assert_non_null(ctx);
	flit_pub *pub = flit_pub_new(ctx, "good.t", NULL);
	flit_sub *sub = tl_sub(ctx, "good.*", on_msg, NULL);
	path_of(ctx, path, sizeof(path));
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	*out = malloc((size_t)sb.st_size);
	assert_int_equal(read(fd, *out, (size_t)sb.st_size), sb.st_size);
	close(fd);
	flit_sub_close(sub);
	flit_pub_close(pub);
	flit_ctx_close(ctx);
	return (size_t)sb.st_size;
}

static void expect_bad(const char *path, int err, const char *phrase)
{
	struct flit_stats_snap s;
	int rc = flit_stats_read(path, &s);

	if (rc != -err || !strstr(flit_errmsg(), phrase) || !strstr(flit_errmsg(), path))
		fprintf(stderr, "%s: rc %d (want %d), message: %s (want '%s')\n", path, rc, -err,
			flit_errmsg(), phrase);
	assert_int_equal(rc, -err);
	assert_non_null(strstr(flit_errmsg(), phrase));
	assert_non_null(strstr(flit_errmsg(), path));
	assert_null(s.rows);
}

static void truncated_foreign_and_corrupt_files_are_refused_by_name(void **state)
{
	unsigned char *good, *b;
	size_t len = good_bytes(&good);
	struct flit_stats_snap s;
	char path[512];
	struct flit_stats_hdr *h;

	snprintf(path, sizeof(path), "%s/bad-file", stats_dir);
	b = malloc(len);

	/* the copy itself reads fine */
	write_file(path, good, len);
	snap(path, &s);
	assert_int_equal(s.nrows, 4);
	flit_stats_snap_free(&s);

	write_file(path, "", 0);
	expect_bad(path, EPROTO, "not a flit counters file");
	write_file(path, "hello, world: this is not a counters file at all\n", 49);
	expect_bad(path, EPROTO, "not a flit counters file");
	write_file(path, good, 512);
	expect_bad(path, EBADMSG, "truncated: 512 bytes");
	write_file(path, good, len - 1);
	expect_bad(path, EBADMSG, "truncated");

#define MUTATE(stmt) do { memcpy(b, good, len); h = (struct flit_stats_hdr *)b; stmt; \
			  write_file(path, b, len); } while (0)
	MUTATE(h->version = 99);
	expect_bad(path, EPROTONOSUPPORT, "format version 99");
	MUTATE(h->endian = 0x04030201);
	expect_bad(path, EPROTO, "byte order");
	MUTATE(h->row_size = 7);
	expect_bad(path, EBADMSG, "impossible sizes");
	MUTATE(h->hdr_size = 0xfffffff0);
	expect_bad(path, EBADMSG, "impossible sizes");
	MUTATE(h->row_cap = 0);
	expect_bad(path, EBADMSG, "impossible sizes");
	MUTATE(h->row_cap = 60000);
	expect_bad(path, EBADMSG, "truncated");
	MUTATE(h->row_cap = 100000);
	expect_bad(path, EBADMSG, "impossible sizes");
	MUTATE(h->ncounters = 1000);
	expect_bad(path, EBADMSG, "impossible sizes");
	MUTATE(h->rows_used = 100000);
	expect_bad(path, EBADMSG, "rows in use");
	MUTATE(((struct flit_stats_row *)(b + FLIT_STATS_HDR_SIZE + FLIT_STATS_ROW_SIZE))->kind = 77);
	expect_bad(path, EBADMSG, "row 1 has kind 77");
	MUTATE(((struct flit_stats_row *)(b + FLIT_STATS_HDR_SIZE))->kind = FLIT_STATS_ROW_PUBLISHER);
	expect_bad(path, EBADMSG, "row 0 has kind 3");

	/* strings without their NUL are cut, not overrun */
	MUTATE(memset(h->comm, 'c', sizeof(h->comm));
	       memset(((struct flit_stats_row *)(b + FLIT_STATS_HDR_SIZE + FLIT_STATS_ROW_SIZE))->name,
		      'n', 256));
	snap(path, &s);
	assert_int_equal(strlen(s.hdr.comm), sizeof(s.hdr.comm) - 1);
	for (unsigned i = 0; i < s.nrows; i++)
		assert_true(strlen(s.rows[i].name) < sizeof(s.rows[i].name));
	flit_stats_snap_free(&s);

	/* a row whose writer died mid-write: counted as torn, the rest read */
	MUTATE(((struct flit_stats_row *)(b + FLIT_STATS_HDR_SIZE + FLIT_STATS_ROW_SIZE))->seq |= 1);
	snap(path, &s);
	assert_int_equal(s.torn, 1);
	assert_int_equal(s.nrows, 3);
	flit_stats_snap_free(&s);

	/* not a file; no file */
	expect_bad(stats_dir, EBADMSG, "not a regular file");
	unlink(path);
	assert_int_equal(flit_stats_read(path, &s), -ENOENT);
	assert_non_null(strstr(flit_errmsg(), path));

	/* random damage to the header and the first rows: an error or a
	 * valid snapshot, never a fault */
	srand(7);
	for (int i = 0; i < 2000; i++) {
		memcpy(b, good, len);
		int flips = 1 + rand() % 8;
		for (int f = 0; f < flips; f++)
			b[rand() % (FLIT_STATS_HDR_SIZE + 3 * FLIT_STATS_ROW_SIZE)] ^= (unsigned char)(1u << (rand() % 8));
		size_t l = (rand() % 4) ? len : (size_t)rand() % len;
		write_file(path, b, l);
		int rc = flit_stats_read(path, &s);
		if (rc == 0) {
			assert_true(s.nrows + s.torn <= s.hdr.rows_used);
			flit_stats_snap_free(&s);
		} else {
			assert_true(rc == -EPROTO || rc == -EPROTONOSUPPORT || rc == -EBADMSG);
			assert_null(s.rows);
		}
	}
	unlink(path);
	free(b);
	free(good);
}

/* ---- liveness and gc ------------------------------------------------------------- */

/* A child that makes a context and dies without closing it; its file. */
static void dead_child_file(char *path, size_t len, pid_t *pid)
{
	int pfd[2], status;

	assert_int_equal(pipe(pfd), 0);
	*pid = tl_fork();
	if (*pid == 0) {
		flit_ctx *c = ctx_with(NULL);
		char p[512] = "";
		if (c)
			flit_ctx_stats_path(c, p, sizeof(p));
		if (write(pfd[1], p, sizeof(p)) < 0)
			_exit(2);
		_exit(0);
	}
	assert_int_equal(read(pfd[0], path, len), (ssize_t)len);
	assert_int_equal(waitpid(*pid, &status, 0), *pid);
	assert_true(path[0]);
	assert_int_equal(access(path, F_OK), 0);
	close(pfd[0]);
	close(pfd[1]);
}

static void file_of_a_dead_process_is_stale_and_gc_removes_it(void **state)
{
	char dead[512], live[512] = "", mine[512], why[160], want[64];
	struct flit_stats_snap s;
	int status, pfd[2], go[2];
	pid_t p1, p3;

	dead_child_file(dead, sizeof(dead), &p1);
	snap(dead, &s);
	assert_int_equal(s.hdr.pid, p1);
	assert_int_equal(flit_stats_liveness(dead, &s.hdr, why, sizeof(why)), FLIT_STATS_STALE);
	snprintf(want, sizeof(want), "pid %d is gone", (int)p1);
	assert_string_equal(why, want);
	/* the pid of a live process with another start time: a recycled pid */
	s.hdr.start_time++;
	s.hdr.pid = (uint32_t)getpid();
	assert_int_equal(flit_stats_liveness(dead, &s.hdr, why, sizeof(why)), FLIT_STATS_STALE);
	assert_non_null(strstr(why, "another process now"));
	flit_stats_snap_free(&s);
	assert_int_equal(flit_stats_gc(stats_dir, NULL, NULL), 1);
	assert_int_equal(access(dead, F_OK), -1);

	/* a live child's file, and ours, survive gc */
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(pipe(go), 0);
	pid_t p2 = tl_fork();
	if (p2 == 0) {
		flit_ctx *c = ctx_with(NULL);
		char p[512] = "", x;
		if (c)
			flit_ctx_stats_path(c, p, sizeof(p));
		if (write(pfd[1], p, sizeof(p)) < 0 || read(go[0], &x, 1) < 0)
			_exit(2);
		flit_ctx_close(c);
		_exit(0);
	}
	assert_int_equal(read(pfd[0], live, sizeof(live)), (ssize_t)sizeof(live));
	assert_true(live[0]);
	snap(live, &s);
	assert_int_equal(flit_stats_liveness(live, &s.hdr, why, sizeof(why)), FLIT_STATS_LIVE);
	flit_stats_snap_free(&s);

	/* a new context sweeps the files of pids that are gone */
	dead_child_file(dead, sizeof(dead), &p3);
	flit_ctx *ctx = ctx_with(NULL);
	assert_non_null(ctx);
	path_of(ctx, mine, sizeof(mine));
	assert_int_equal(access(dead, F_OK), -1);
	assert_int_equal(flit_stats_gc(stats_dir, NULL, NULL), 0);
	assert_int_equal(access(live, F_OK), 0);
	assert_int_equal(access(mine, F_OK), 0);

	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(waitpid(p2, &status, 0), p2);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(access(live, F_OK), -1); /* removed by its close */
	flit_ctx_close(ctx);
	close(pfd[0]);
	close(pfd[1]);
	close(go[0]);
	close(go[1]);
}

/* A forked child that closes its copy of the parent's context leaves the
 * parent's file alone. */
static void forked_copy_closing_keeps_the_parent_file(void **state)
{
	flit_ctx *ctx = ctx_with(NULL);
	char path[512];
	int status;

	assert_non_null(ctx);
	path_of(ctx, path, sizeof(path));
	pid_t p = tl_fork();
	if (p == 0) {
		flit_ctx_close(ctx);
		_exit(0);
	}
	assert_int_equal(waitpid(p, &status, 0), p);
	assert_int_equal(access(path, F_OK), 0);
	flit_ctx_close(ctx);
	assert_int_equal(access(path, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(context_file_has_header_and_goes_at_close),
		cmocka_unit_test(stats_off_makes_no_file),
		cmocka_unit_test(file_mode_and_rows_follow_config),
		cmocka_unit_test(unusable_directory_leaves_a_working_context),
		cmocka_unit_test(rows_count_what_publishers_and_subscribers_do),
		cmocka_unit_test(publisher_that_never_polls_shows_live_counters),
		cmocka_unit_test(subscriber_row_counts_losses_of_an_overwrite_ring),
		cmocka_unit_test(full_table_is_reported_and_objects_still_work),
		cmocka_unit_test(tick_reads_the_clock_rarely),
		cmocka_unit_test(reader_racing_a_writer_never_sees_a_torn_row),
		cmocka_unit_test(truncated_foreign_and_corrupt_files_are_refused_by_name),
		cmocka_unit_test(file_of_a_dead_process_is_stale_and_gc_removes_it),
		cmocka_unit_test(forked_copy_closing_keeps_the_parent_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
