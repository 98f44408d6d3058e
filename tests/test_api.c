// SPDX-License-Identifier: BSD-2-Clause
/* The public API contract of include/flit/flit.h, independent of what a
 * transport does with the bytes: destructors take NULL; options structs grow
 * (older, smaller structs work, newer ones with unknown settings are refused);
 * constructors fail with NULL + errno and a trail that names the culprit
 * (topic, transport, config file and line, $FLIT_CONFIG); per-object config;
 * the print callback; the per-thread error trail; statuses; counters; the
 * accessors of a publisher.  Uses the shm transport, in the test's own shm
 * directory (tests/testlib.h). */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "testlib.h"

/* ---- helpers ------------------------------------------------------------ */

struct rx {
	uint64_t data, bos, eos, bytes;
	uint64_t seqs[16];  /* flit seq of the first 16 DATA messages */
	void *arg;          /* the arg the callback was given */
	int done;
	uint64_t want;      /* done when this many DATA messages arrived */
};

static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct rx *r = arg;

	switch (m->kind) {
	case FLIT_MSG_BOS: r->bos++; return;
	case FLIT_MSG_EOS: r->eos++; return;
	case FLIT_MSG_LOSS: return;
	case FLIT_MSG_DATA: break;
	}
	if (r->data < 16)
		r->seqs[r->data] = m->seq;
	r->bytes += m->len;
	if (++r->data == r->want)
		r->done = 1;
}

static flit_sub *sub_new(flit_ctx *ctx, const char *topic, struct rx *r)
{
	return tl_sub(ctx, topic, on_msg, r);
}

/* A callback that records nothing but the arg it was handed. */
static void *seen_arg;
static int seen_calls;
static void on_msg_arg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	seen_arg = arg;
	seen_calls++;
}

static int poll_until_bos(flit_ctx *ctx, struct rx *r, uint64_t n)
{
	for (uint64_t end = tl_now_ms() + 2000; r->bos < n && tl_now_ms() < end;)
		flit_ctx_poll(ctx, 0);
	return r->bos >= n;
}

/* The test's shm directory (the transport makes it only when first used),
 * and optionally a subdirectory of it. */
static void make_test_dir(const char *sub)
{
	char p[512];
	mkdir(tl_shm_dir(), 01777);
	if (sub) {
		snprintf(p, sizeof(p), "%s/%s", tl_shm_dir(), sub);
		mkdir(p, 01777);
	}
}

/* Write `text` to a file in the test's shm directory (removed at exit). */
static void write_file(char *path, size_t cap, const char *name, const char *text)
{
	make_test_dir(NULL);
	snprintf(path, cap, "%s/%s", tl_shm_dir(), name);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void assert_trail_has(const char *what)
{
	if (!strstr(flit_errmsg(), what))
		fail_msg("trail \"%s\" does not mention \"%s\"", flit_errmsg(), what);
}

/* Captured print-callback output. */
static char logbuf[16384];
static int log_warns;
__attribute__((format(printf, 2, 0)))
static void capture(enum flit_log_level l, const char *fmt, va_list ap)
{
	size_t n = strlen(logbuf);
	if (l == FLIT_LOG_WARN)
		log_warns++;
	if (n < sizeof(logbuf) - 2) {
		vsnprintf(logbuf + n, sizeof(logbuf) - n - 1, fmt, ap);
		strcat(logbuf, "\n");
	}
}
__attribute__((format(printf, 2, 0)))
static void capture2(enum flit_log_level l, const char *fmt, va_list ap)
{
	capture(l, fmt, ap);
}

static int reset_print(void **state)
{
	flit_set_print(NULL);
	return 0;
}

static int reset_env(void **state)
{
	unsetenv("FLIT_CONFIG");
	return 0;
}

/* ---- destructors, constructors ------------------------------------------ */

static void destructors_accept_null(void **state)
{
	flit_ctx_close(NULL);
	flit_pub_close(NULL);
	flit_sub_close(NULL);
}

static void constructors_reject_null_context(void **state)
{
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg);

	errno = 0;
	assert_null(flit_pub_new(NULL, "t.nullctx", NULL));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("flit_pub_new");
	errno = 0;
	assert_null(flit_sub_new(NULL, "t.nullctx", &so));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("flit_sub_new");
}

/* ---- growing options structs -------------------------------------------- */

/* What a program built against a newer header passes: the struct we know,
 * then a field this library has never heard of. */
struct ctx_opts_next { struct flit_ctx_opts o; uint64_t future; };
struct pub_opts_next { struct flit_pub_opts o; uint64_t future; };
struct sub_opts_next { struct flit_sub_opts o; uint64_t future; };

static void options_struct_with_unknown_nonzero_tail_is_rejected(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct ctx_opts_next co;
	struct pub_opts_next po;
	struct sub_opts_next so;
	flit_ctx *c2;
	flit_pub *p;
	flit_sub *s;
	struct rx r = { 0 };

	assert_non_null(ctx);
	memset(&co, 0, sizeof(co));
	co.o.sz = sizeof(co);
	co.future = 1;
	errno = 0;
	assert_null(flit_ctx_new(&co.o));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("flit_ctx_opts");
	co.future = 0; /* a newer caller that left the new field unset */
	c2 = flit_ctx_new(&co.o);
	assert_non_null(c2);
	flit_ctx_close(c2);

	memset(&po, 0, sizeof(po));
	po.o.sz = sizeof(po);
	po.future = 1ull << 63; /* only the last byte is set */
	errno = 0;
	assert_null(flit_pub_new(ctx, "t.tail", &po.o));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("flit_pub_opts");
	po.future = 0;
	p = flit_pub_new(ctx, "t.tail", &po.o);
	assert_non_null(p);
	flit_pub_close(p);

	memset(&so, 0, sizeof(so));
	so.o.sz = sizeof(so);
	so.o.on_msg = on_msg;
	so.o.arg = &r;
	so.future = 0x100;
	errno = 0;
	assert_null(flit_sub_new(ctx, "t.tail", &so.o));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("flit_sub_opts");
	so.future = 0;
	s = flit_sub_new(ctx, "t.tail", &so.o);
	assert_non_null(s);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

static void options_sz_too_small_rejected(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct flit_ctx_opts co = { 0 };
	struct flit_pub_opts po = { 0 };
	struct flit_sub_opts so = { .on_msg = on_msg };
	const size_t bad[] = { 0, 1, sizeof(size_t) - 1 };

	assert_non_null(ctx);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		co.sz = po.sz = so.sz = bad[i];
		errno = 0;
		assert_null(flit_ctx_new(&co));
		assert_int_equal(errno, EINVAL);
		assert_trail_has("flit_ctx_opts: sz");
		errno = 0;
		assert_null(flit_pub_new(ctx, "t.sz", &po));
		assert_int_equal(errno, EINVAL);
		assert_trail_has("flit_pub_opts: sz");
		errno = 0;
		assert_null(flit_sub_new(ctx, "t.sz", &so));
		assert_int_equal(errno, EINVAL);
		assert_trail_has("flit_sub_opts: sz");
	}
	flit_ctx_close(ctx);
}

/* A program built against an older header passes a struct that ends before
 * the newer fields: whatever lies past sz is not the library's to read. */
static void older_smaller_options_struct_accepted(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct rx r = { 0 };
	struct flit_ctx_opts co = {
		.sz = offsetof(struct flit_ctx_opts, config),
		.config = "this = would not parse",
	};
	struct flit_pub_opts po = {
		.sz = offsetof(struct flit_pub_opts, config),
		.config = "shm.capacity = 3M",  /* invalid if it were read */
	};
	struct flit_pub_opts po_old = {
		.sz = offsetof(struct flit_pub_opts, transport),
		.transport = "no-such-transport",
	};
	struct flit_sub_opts so_arg = {
		.sz = offsetof(struct flit_sub_opts, arg),
		.on_msg = on_msg_arg,
		.arg = &seen_arg,     /* past sz: the callback must get NULL */
		.config = "no such key = 1",
	};
	struct flit_sub_opts so_pat = {
		.sz = offsetof(struct flit_sub_opts, pattern),
		.on_msg = on_msg,
		.arg = &r,
		.pattern = true,      /* past sz: "t.old*" is an exact topic */
		.config = "no such key = 1",
	};
	flit_ctx *c2;
	flit_pub *p, *q;
	flit_sub *s, *sp;

	assert_non_null(ctx);
	c2 = flit_ctx_new(&co);
	if (!c2)
		fail_msg("flit_ctx_new: %s", flit_errmsg());
	flit_ctx_close(c2);

	p = flit_pub_new(ctx, "t.old", &po);
	if (!p)
		fail_msg("flit_pub_new: %s", flit_errmsg());
	q = flit_pub_new(ctx, "t.old2", &po_old);
	if (!q)
		fail_msg("flit_pub_new: %s", flit_errmsg());
	seen_arg = (void *)1;
	seen_calls = 0;
	s = flit_sub_new(ctx, "t.old", &so_arg);
	if (!s)
		fail_msg("flit_sub_new: %s", flit_errmsg());
	sp = flit_sub_new(ctx, "t.old*", &so_pat);
	if (!sp)
		fail_msg("flit_sub_new: %s", flit_errmsg());
	for (int i = 0; i < 100; i++)
		flit_ctx_poll(ctx, 0);
	assert_int_equal(seen_calls, 1); /* BOS of t.old */
	assert_null(seen_arg);
	assert_int_equal(r.bos, 0);      /* as a pattern it would match both */
	assert_int_equal(flit_pub_send(p, "x", 1), 0);
	for (int i = 0; i < 100 && seen_calls < 2; i++)
		flit_ctx_poll(ctx, 0);
	assert_int_equal(seen_calls, 2);
	assert_null(seen_arg);
	assert_int_equal(r.data, 0);
	flit_sub_close(sp);
	flit_sub_close(s);
	flit_pub_close(q);
	flit_pub_close(p);
	flit_ctx_close(ctx);
}

/* ---- names -------------------------------------------------------------- */

static void invalid_topic_names_rejected(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg);
	char long_topic[FLIT_TOPIC_MAX + 2];
	const char *bad[] = { NULL, "", long_topic, "a\nb", "tab\there", "\x01",
			      "del\x7f", "\x1b[31m" };

	assert_non_null(ctx);
	memset(long_topic, 'a', FLIT_TOPIC_MAX + 1);
	long_topic[FLIT_TOPIC_MAX + 1] = 0;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		assert_null(flit_pub_new(ctx, bad[i], NULL));
		assert_int_equal(errno, EINVAL);
		assert_trail_has("invalid topic name");
		errno = 0;
		assert_null(flit_sub_new(ctx, bad[i], &so));
		assert_int_equal(errno, EINVAL);
		assert_trail_has("invalid topic name");
	}
	flit_ctx_close(ctx);
}

/* Any printable name of 1..255 bytes is a topic, whatever the transport has
 * to do to store it (shm: %XX escapes, a hashed file name when long). */
static void unusual_valid_topic_names_round_trip(void **state)
{
	static char longest[FLIT_TOPIC_MAX + 1], long_escaped[FLIT_TOPIC_MAX + 1];
	const char *names[] = { "a", ".hidden", "..", "a/b c", "100%", "#x",
				"caf\xc3\xa9", longest, long_escaped };
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);

	assert_non_null(pc);
	assert_non_null(sc);
	memset(longest, 'L', FLIT_TOPIC_MAX);
	memset(long_escaped, '/', FLIT_TOPIC_MAX);
	long_escaped[0] = 'e';
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct rx r = { .want = 1 };
		flit_pub *p = flit_pub_new(pc, names[i], NULL);
		if (!p)
			fail_msg("flit_pub_new(\"%s\"): %s", names[i], flit_errmsg());
		assert_string_equal(flit_pub_topic(p), names[i]);
		flit_sub *s = sub_new(sc, names[i], &r);
		assert_non_null(s);
		if (!poll_until_bos(sc, &r, 1))
			fail_msg("topic \"%s\" was not discovered", names[i]);
		assert_int_equal(flit_pub_send(p, names[i], strlen(names[i])), 0);
		tl_poll_until(sc, &r.done, 2000);
		assert_int_equal(r.data, 1);
		assert_int_equal(r.bytes, strlen(names[i]));
		flit_sub_close(s);
		flit_pub_close(p);
	}
	flit_ctx_close(pc);
	flit_ctx_close(sc);
}

static void unknown_transport_is_EPROTONOSUPPORT_and_named(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	FLIT_OPTS(flit_pub_opts, po, .transport = "carrier-pigeon");
	FLIT_OPTS(flit_pub_opts, ok, .transport = "shm");
	flit_pub *p;

	assert_non_null(ctx);
	errno = 0;
	assert_null(flit_pub_new(ctx, "t.tp", &po));
	assert_int_equal(errno, EPROTONOSUPPORT);
	assert_trail_has("carrier-pigeon");
	p = flit_pub_new(ctx, "t.tp", &ok);
	assert_non_null(p);
	flit_pub_close(p);
	flit_ctx_close(ctx);
}

static void subscriber_requires_callback(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct rx r = { 0 };
	FLIT_OPTS(flit_sub_opts, no_cb, .arg = &r);
	/* a struct too old to hold on_msg has no callback either */
	struct flit_sub_opts old = { .sz = offsetof(struct flit_sub_opts, on_msg),
				     .on_msg = on_msg };

	assert_non_null(ctx);
	errno = 0;
	assert_null(flit_sub_new(ctx, "t.cb", NULL));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("on_msg");
	errno = 0;
	assert_null(flit_sub_new(ctx, "t.cb", &no_cb));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("on_msg");
	errno = 0;
	assert_null(flit_sub_new(ctx, "t.cb", &old));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("on_msg");
	flit_ctx_close(ctx);
}

static void subscriber_fails_naming_a_transport_that_cannot_start(void **state)
{
	/* xdp listed without the interface it needs: the subscriber would
	 * hear nothing from the network, so it is refused, naming why (an
	 * XDP program the verifier refuses fails the same way) */
	flit_ctx *ctx = tl_ctx("context.transports = shm,xdp\n");
	flit_ctx *shm = tl_ctx("context.transports = shm\n");
	struct rx r = { 0 };
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg, .arg = &r);
	flit_sub *s;

	assert_non_null(ctx);
	assert_non_null(shm);
	errno = 0;
	assert_null(flit_sub_new(ctx, "t.fail", &so));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("transport xdp");
	assert_trail_has("context.udp.interface");
	/* and again: nothing was left half made */
	errno = 0;
	assert_null(flit_sub_new(ctx, "t.fail", &so));
	assert_int_equal(errno, EINVAL);
	s = flit_sub_new(shm, "t.fail", &so);
	assert_non_null(s);
	flit_sub_close(s);
	flit_ctx_close(shm);
	flit_ctx_close(ctx);
}

/* ---- configuration -------------------------------------------------------- */

static void bad_config_file_line_named_in_trail(void **state)
{
	char path[512], where[600];
	FLIT_OPTS(flit_ctx_opts, o, .config_file = path);

	write_file(path, sizeof(path), "bad-line3.conf",
		   "# a comment\ncontext.domain = cfgtest\nsource.shm.capacity = 3M\n"
		   "source.shm.mode = paced\n");
	snprintf(where, sizeof(where), "%s:3", path);
	errno = 0;
	assert_null(flit_ctx_new(&o));
	assert_int_equal(errno, EINVAL);
	assert_trail_has(where);
	assert_trail_has("source.shm.capacity");

	/* the same file, fixed, is accepted */
	write_file(path, sizeof(path), "bad-line3.conf",
		   "# a comment\ncontext.domain = cfgtest\nsource.shm.capacity = 4M\n");
	flit_ctx *ctx = flit_ctx_new(&o);
	if (!ctx)
		fail_msg("flit_ctx_new: %s", flit_errmsg());
	flit_ctx_close(ctx);

	/* a bad line of the context's own options string is named too */
	FLIT_OPTS(flit_ctx_opts, inl, .config = "context.domain = ok\ncontext.bogus = 1");
	errno = 0;
	assert_null(flit_ctx_new(&inl));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("<context options>:2");
}

static void FLIT_CONFIG_env_names_the_file(void **state)
{
	char bad[512], good[512], where[600], text[700], ring[700];
	struct stat st;
	flit_ctx *ctx;

	write_file(bad, sizeof(bad), "env-bad.conf", "[context]\ndomian = typo\n");
	snprintf(text, sizeof(text), "context.shm_dir = %s\ncontext.domain = fromenv\n",
		 tl_shm_dir());
	write_file(good, sizeof(good), "env-good.conf", text);

	/* $FLIT_CONFIG is read when no file is given, and named on error */
	assert_int_equal(setenv("FLIT_CONFIG", bad, 1), 0);
	snprintf(where, sizeof(where), "%s:2", bad);
	errno = 0;
	assert_null(flit_ctx_new(NULL));
	assert_int_equal(errno, EINVAL);
	assert_trail_has(where);

	/* an explicit config_file wins over $FLIT_CONFIG */
	FLIT_OPTS(flit_ctx_opts, o, .config_file = good);
	ctx = flit_ctx_new(&o);
	if (!ctx)
		fail_msg("flit_ctx_new: %s", flit_errmsg());
	flit_ctx_close(ctx);

	/* settings from $FLIT_CONFIG apply: the ring lands in its domain */
	assert_int_equal(setenv("FLIT_CONFIG", good, 1), 0);
	ctx = flit_ctx_new(NULL);
	if (!ctx)
		fail_msg("flit_ctx_new: %s", flit_errmsg());
	FLIT_OPTS(flit_pub_opts, own, .config = "source.session = own");
	flit_pub *p = flit_pub_new(ctx, "t.env", &own);
	assert_non_null(p);
	snprintf(ring, sizeof(ring), "%s/fromenv/t.env.ring", tl_shm_dir());
	assert_int_equal(stat(ring, &st), 0);
	flit_pub_close(p);
	flit_ctx_close(ctx);

	/* a missing file: the errno of the open, and the trail names it */
	snprintf(where, sizeof(where), "%s/no-such-dir/flit.conf", tl_shm_dir());
	assert_int_equal(setenv("FLIT_CONFIG", where, 1), 0);
	errno = 0;
	assert_null(flit_ctx_new(NULL));
	assert_int_equal(errno, ENOENT);
	assert_trail_has(where);

	/* empty: no file */
	assert_int_equal(setenv("FLIT_CONFIG", "", 1), 0);
	ctx = flit_ctx_new(NULL);
	assert_non_null(ctx);
	flit_ctx_close(ctx);
	unsetenv("FLIT_CONFIG");
}

static void per_object_config_override_applies(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	flit_ctx *small_ctx = tl_ctx("source.shm.capacity = 64K");
	FLIT_OPTS(flit_pub_opts, small, .config = "shm.capacity = 64K");
	FLIT_OPTS(flit_pub_opts, big, .config = "source.shm.capacity = 1M");
	FLIT_OPTS(flit_pub_opts, bad1, .config = "shm.capacity = 3M");
	FLIT_OPTS(flit_pub_opts, bad2, .config = "shm.mode = paced\nshm.nope = 1");
	FLIT_OPTS(flit_pub_opts, wrong_scope, .config = "receiver.timestamps = true");
	FLIT_OPTS(flit_sub_opts, sbad, .on_msg = on_msg, .config = "discovery_ms = 0");
	flit_pub *d1, *s1, *d2, *b1;

	assert_non_null(ctx);
	assert_non_null(small_ctx);
	s1 = flit_pub_new(ctx, "t.cfg.small", &small);
	d1 = flit_pub_new(ctx, "t.cfg.default", NULL);
	assert_non_null(s1);
	assert_non_null(d1);
	assert_true(flit_pub_max_msg(s1) < flit_pub_max_msg(d1));
	/* the object's options beat the context's configuration */
	d2 = flit_pub_new(small_ctx, "t.cfg.ctxsmall", NULL);
	b1 = flit_pub_new(small_ctx, "t.cfg.ctxbig", &big);
	assert_non_null(d2);
	assert_non_null(b1);
	assert_int_equal(flit_pub_max_msg(d2), flit_pub_max_msg(s1));
	assert_int_equal(flit_pub_max_msg(b1), flit_pub_max_msg(d1));

	errno = 0;
	assert_null(flit_pub_new(ctx, "t.cfg.bad", &bad1));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("<object options>:1");
	assert_trail_has("3M");
	errno = 0;
	assert_null(flit_pub_new(ctx, "t.cfg.bad", &bad2));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("<object options>:2");
	errno = 0;
	assert_null(flit_pub_new(ctx, "t.cfg.bad", &wrong_scope));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("<object options>:1");
	errno = 0;
	assert_null(flit_sub_new(ctx, "t.cfg.bad", &sbad));
	assert_int_equal(errno, EINVAL);
	assert_trail_has("<object options>:1");
	assert_trail_has("t.cfg.bad");

	flit_pub_close(b1);
	flit_pub_close(d2);
	flit_pub_close(d1);
	flit_pub_close(s1);
	flit_ctx_close(small_ctx);
	flit_ctx_close(ctx);
}

/* ---- logging and the error trail ---------------------------------------- */

/* Run fn with stdout and stderr sent to a file; returns what was written. */
static size_t bytes_printed_by(void (*fn)(void))
{
	char path[512];
	int fd, saved1, saved2;
	struct stat st;

	make_test_dir(NULL);
	snprintf(path, sizeof(path), "%s/stdio-capture", tl_shm_dir());
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	assert_true(fd >= 0);
	fflush(stdout);
	fflush(stderr);
	saved1 = dup(1);
	saved2 = dup(2);
	dup2(fd, 1);
	dup2(fd, 2);
	fn();
	fflush(stdout);
	fflush(stderr);
	dup2(saved1, 1);
	dup2(saved2, 2);
	close(saved1);
	close(saved2);
	fstat(fd, &st);
	close(fd);
	return (size_t)st.st_size;
}

/* A context that discovers the corrupted ring "p.bad" of domain "print",
 * which the transport reports as a warning. */
static void discover_bad_ring(void)
{
	flit_ctx *ctx = tl_ctx("context.domain = print");
	struct rx r = { 0 };
	flit_sub *s = ctx ? sub_new(ctx, "p.bad", &r) : NULL;

	for (int i = 0; i < 10; i++)
		flit_ctx_poll(ctx, 0);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

static void print_callback_receives_library_messages_and_can_be_removed(void **state)
{
	char path[512];

	assert_null(flit_set_print(capture));
	assert_ptr_equal(flit_set_print(capture2), capture);
	assert_ptr_equal(flit_set_print(capture), capture2);

	make_test_dir("print");
	write_file(path, sizeof(path), "print/p.bad.ring", "this is not a flit ring\n");
	logbuf[0] = 0;
	log_warns = 0;
	discover_bad_ring();
	if (!strstr(logbuf, "p.bad.ring"))
		fail_msg("the warning about p.bad.ring did not reach the callback: \"%s\"", logbuf);
	assert_true(log_warns > 0);

	/* removed: the library stays silent, and nothing reaches the old one */
	assert_ptr_equal(flit_set_print(NULL), capture);
	logbuf[0] = 0;
	assert_int_equal(bytes_printed_by(discover_bad_ring), 0);
	assert_string_equal(logbuf, "");
	assert_trail_has("p.bad.ring"); /* the problem was found all the same */
	assert_null(flit_set_print(NULL));
}

struct thr_err { char before[64], after[1024]; };

static void *other_thread(void *arg)
{
	struct thr_err *t = arg;

	snprintf(t->before, sizeof(t->before), "%s", flit_errmsg());
	flit_sub_new(NULL, "t.thread", NULL);
	snprintf(t->after, sizeof(t->after), "%s", flit_errmsg());
	return NULL;
}

static void errmsg_is_thread_local(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct thr_err t;
	pthread_t th;
	char mine[1024];

	assert_non_null(ctx);
	assert_null(flit_pub_new(ctx, "", NULL));
	snprintf(mine, sizeof(mine), "%s", flit_errmsg());
	assert_non_null(strstr(mine, "invalid topic name"));
	assert_int_equal(pthread_create(&th, NULL, other_thread, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_string_equal(t.before, ""); /* nothing failed in that thread yet */
	assert_non_null(strstr(t.after, "flit_sub_new: NULL context"));
	assert_string_equal(flit_errmsg(), mine);
	flit_ctx_close(ctx);
}

static void strstatus_names_statuses_and_errors(void **state)
{
	const char *ok = flit_strstatus(FLIT_OK);
	const char *bp = flit_strstatus(FLIT_BACK_PRESSURED);
	const char *nc = flit_strstatus(FLIT_NOT_CONNECTED);

	assert_non_null(ok);
	assert_non_null(bp);
	assert_non_null(nc);
	assert_string_equal(ok, "ok");
	assert_non_null(strstr(bp, "back"));
	assert_non_null(strstr(nc, "connected"));
	assert_string_not_equal(bp, nc);
	assert_string_equal(flit_strstatus(-EINVAL), strerror(EINVAL));
	assert_string_equal(flit_strstatus(-EMSGSIZE), strerror(EMSGSIZE));
	assert_string_equal(flit_strstatus(-EPROTONOSUPPORT), strerror(EPROTONOSUPPORT));
	/* a status this library does not know still gets a name with its value */
	assert_non_null(flit_strstatus(77));
	assert_non_null(strstr(flit_strstatus(77), "77"));
}

/* ---- context: counters, poll -------------------------------------------- */

static void counters_count_sends_and_receives(void **state)
{
	const uint64_t n = 100, len = 10;
	flit_ctx *ctx = tl_ctx(NULL);
	struct rx r1 = { .want = n }, r2 = { .want = n };
	flit_sub *s1 = sub_new(ctx, "t.count", &r1);
	flit_sub *s2 = sub_new(ctx, "t.count", &r2); /* same ctx, same messages */
	flit_pub *p = flit_pub_new(ctx, "t.count", NULL);
	struct flit_counters c = { .sz = sizeof(c) };
	unsigned char buf[16];

	assert_non_null(s1);
	assert_non_null(s2);
	assert_non_null(p);
	assert_int_equal(flit_ctx_counters(ctx, &c), 0);
	assert_int_equal(c.sz, sizeof(c));
	assert_int_equal(c.msgs_sent, 0);
	assert_int_equal(c.msgs_received, 0);
	assert_true(poll_until_bos(ctx, &r1, 1));
	for (uint64_t i = 0; i < n; i++) {
		tl_fill(buf, len, i);
		assert_int_equal(flit_pub_send(p, buf, len), 0);
	}
	tl_poll_until(ctx, &r2.done, 2000);
	assert_int_equal(r1.data, n);
	assert_int_equal(r2.data, n);

	memset(&c, 0xee, sizeof(c));
	c.sz = sizeof(c);
	assert_int_equal(flit_ctx_counters(ctx, &c), 0);
	assert_int_equal(c.msgs_sent, n);
	assert_int_equal(c.bytes_sent, n * len);
	assert_int_equal(c.frames_sent, n); /* unbatched: a frame per message */
	assert_int_equal(c.back_pressured, 0);
	assert_int_equal(c.msgs_received, n); /* once, not once per subscriber */
	assert_int_equal(c.bytes_received, n * len);
	assert_int_equal(c.frames_received, n);
	assert_int_equal(c.malformed, 0);
	assert_int_equal(c.duplicates, 0);
	assert_int_equal(c.msgs_lost, 0);
	assert_int_equal(c.loss_events, 0);
	assert_int_equal(c.readers_evicted, 0);
	assert_int_equal(c.sources_joined, 1);
	assert_int_equal(c.sources_left, 0);

	/* an older caller's smaller struct gets the prefix it knows, no more */
	struct { struct flit_counters c; uint64_t canary; } old;
	memset(&old, 0xa5, sizeof(old));
	old.c.sz = offsetof(struct flit_counters, msgs_received);
	assert_int_equal(flit_ctx_counters(ctx, &old.c), 0);
	assert_int_equal(old.c.sz, offsetof(struct flit_counters, msgs_received));
	assert_int_equal(old.c.msgs_sent, n);
	assert_int_equal(old.c.back_pressured, 0);
	assert_int_equal(old.c.msgs_received, 0xa5a5a5a5a5a5a5a5ull);
	assert_int_equal(old.c.sources_left, 0xa5a5a5a5a5a5a5a5ull);
	/* a newer caller's larger struct: sz says how much was filled */
	memset(&old, 0xa5, sizeof(old));
	old.c.sz = sizeof(old);
	assert_int_equal(flit_ctx_counters(ctx, &old.c), 0);
	assert_int_equal(old.c.sz, sizeof(struct flit_counters));
	assert_int_equal(old.c.sources_left, 0);
	assert_int_equal(old.canary, 0xa5a5a5a5a5a5a5a5ull);

	/* closing the publisher keeps its sends; its end is counted */
	flit_pub_close(p);
	for (uint64_t end = tl_now_ms() + 2000; r1.eos < 1 && tl_now_ms() < end;)
		flit_ctx_poll(ctx, 0);
	assert_int_equal(r1.eos, 1);
	c.sz = sizeof(c);
	assert_int_equal(flit_ctx_counters(ctx, &c), 0);
	assert_int_equal(c.msgs_sent, n);
	assert_int_equal(c.bytes_sent, n * len);
	assert_int_equal(c.sources_left, 1);

	c.sz = 0;
	assert_int_equal(flit_ctx_counters(ctx, &c), -EINVAL);
	c.sz = sizeof(c);
	assert_int_equal(flit_ctx_counters(NULL, &c), -EINVAL);
	assert_int_equal(flit_ctx_counters(ctx, NULL), -EINVAL);
	flit_sub_close(s2);
	flit_sub_close(s1);
	flit_ctx_close(ctx);
}

static void ctx_poll_with_nothing_returns_zero(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct rx r = { 0 };
	flit_sub *s;

	assert_non_null(ctx);
	assert_int_equal(flit_ctx_poll(ctx, 0), 0);     /* no transport yet */
	assert_int_equal(flit_ctx_poll(ctx, -1), 0);
	s = sub_new(ctx, "t.nothing", &r);
	assert_non_null(s);
	for (int i = 0; i < 1000; i++)                  /* housekeeping included */
		assert_int_equal(flit_ctx_poll(ctx, 1), 0);
	assert_int_equal(r.bos + r.data + r.eos, 0);
	assert_int_equal(flit_ctx_poll(NULL, 0), -EINVAL);
	assert_trail_has("flit_ctx_poll");
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

static void ctx_poll_delivers_at_most_limit_messages(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct rx r = { .want = 10 };
	flit_sub *s = sub_new(ctx, "t.limit", &r);
	flit_pub *p = flit_pub_new(ctx, "t.limit", NULL);
	int got;

	assert_non_null(s);
	assert_non_null(p);
	assert_true(poll_until_bos(ctx, &r, 1));
	for (int i = 0; i < 10; i++)
		assert_int_equal(flit_pub_send(p, "m", 1), 0);
	assert_int_equal(flit_ctx_poll(ctx, 3), 3);
	assert_int_equal(r.data, 3);
	assert_int_equal(flit_ctx_poll(ctx, 1), 1);
	assert_int_equal(r.data, 4);
	got = flit_ctx_poll(ctx, 0);
	assert_int_equal(got, 6);
	assert_int_equal(r.data, 10);
	assert_int_equal(flit_ctx_poll(ctx, 0), 0);
	flit_pub_close(p);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

/* ---- publisher accessors -------------------------------------------------- */

static void pub_topic_and_next_seq(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	char topic[32] = "t.seq";
	struct rx r = { 0 };
	flit_sub *s = sub_new(ctx, "t.seq", &r);
	flit_pub *p = flit_pub_new(ctx, topic, NULL);
	void *buf;

	assert_non_null(s);
	assert_non_null(p);
	topic[0] = 'X'; /* the publisher keeps its own copy */
	assert_string_equal(flit_pub_topic(p), "t.seq");
	assert_true(poll_until_bos(ctx, &r, 1));

	assert_int_equal(flit_pub_next_seq(p), 0);
	assert_int_equal(flit_pub_send(p, "a", 1), 0);
	assert_int_equal(flit_pub_send(p, "b", 1), 0);
	assert_int_equal(flit_pub_next_seq(p), 2);
	/* refused and aborted messages take no sequence number */
	assert_int_equal(flit_pub_send(p, NULL, flit_pub_max_msg(p) + 1), -EMSGSIZE);
	assert_int_equal(flit_pub_claim(p, 8, &buf), 0);
	assert_int_equal(flit_pub_next_seq(p), 2);
	assert_int_equal(flit_pub_abort(p), 0);
	assert_int_equal(flit_pub_next_seq(p), 2);
	assert_int_equal(flit_pub_claim(p, 8, &buf), 0);
	memcpy(buf, "claimed!", 8);
	assert_int_equal(flit_pub_commit(p, 8), 0);
	assert_int_equal(flit_pub_next_seq(p), 3);

	r.want = 3;
	tl_poll_until(ctx, &r.done, 2000);
	assert_int_equal(r.data, 3);
	assert_int_equal(r.seqs[0], 0);
	assert_int_equal(r.seqs[1], 1);
	assert_int_equal(r.seqs[2], 2);
	flit_pub_close(p);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

static void back_pressured_send_takes_no_sequence_number(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL), *sc = tl_ctx(NULL);
	FLIT_OPTS(flit_pub_opts, po, .config = "shm.capacity = 64K");
	flit_pub *p = flit_pub_new(ctx, "t.bp", &po);
	struct rx r = { 0 };
	flit_sub *s = sub_new(sc, "t.bp", &r); /* attached, never polled */
	char buf[100] = { 0 };
	uint64_t sent = 0;
	int rc;

	assert_non_null(p);
	assert_non_null(s);
	assert_int_equal(flit_pub_receivers(p), 1);
	while ((rc = flit_pub_send(p, buf, sizeof(buf))) == 0 && sent < 100000)
		sent++;
	assert_int_equal(rc, FLIT_BACK_PRESSURED);
	assert_int_equal(flit_pub_next_seq(p), sent);
	assert_int_equal(flit_pub_send(p, buf, sizeof(buf)), FLIT_BACK_PRESSURED);
	assert_int_equal(flit_pub_next_seq(p), sent);
	struct flit_counters c = { .sz = sizeof(c) };
	assert_int_equal(flit_ctx_counters(ctx, &c), 0);
	assert_int_equal(c.msgs_sent, sent);
	assert_int_equal(c.back_pressured, 2);
	flit_sub_close(s);
	flit_pub_close(p);
	flit_ctx_close(sc);
	flit_ctx_close(ctx);
}

static void pub_receivers_counts_attached_subscribers(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *c1 = tl_ctx(NULL), *c2 = tl_ctx(NULL);
	flit_pub *p = flit_pub_new(pc, "t.rcv", NULL);
	struct rx r1 = { 0 }, r2 = { 0 };
	FLIT_OPTS(flit_sub_opts, pat, .on_msg = on_msg, .arg = &r2, .pattern = true);
	flit_sub *s1, *s2;

	assert_non_null(p);
	assert_int_equal(flit_pub_receivers(p), 0);
	s1 = sub_new(c1, "t.rcv", &r1);
	assert_non_null(s1);
	assert_int_equal(flit_pub_receivers(p), 1);
	s2 = flit_sub_new(c2, "t.rc?", &pat);
	assert_non_null(s2);
	assert_int_equal(flit_pub_receivers(p), 2);
	flit_sub_close(s1);
	assert_int_equal(flit_pub_receivers(p), 1);
	flit_ctx_close(c2); /* closes s2 */
	assert_int_equal(flit_pub_receivers(p), 0);
	flit_pub_close(p);
	flit_ctx_close(c1);
	flit_ctx_close(pc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(destructors_accept_null),
		cmocka_unit_test(constructors_reject_null_context),
		cmocka_unit_test(options_struct_with_unknown_nonzero_tail_is_rejected),
		cmocka_unit_test(options_sz_too_small_rejected),
		cmocka_unit_test(older_smaller_options_struct_accepted),
		cmocka_unit_test(invalid_topic_names_rejected),
		cmocka_unit_test(unusual_valid_topic_names_round_trip),
		cmocka_unit_test(unknown_transport_is_EPROTONOSUPPORT_and_named),
		cmocka_unit_test(subscriber_requires_callback),
		cmocka_unit_test(subscriber_fails_naming_a_transport_that_cannot_start),
		cmocka_unit_test(bad_config_file_line_named_in_trail),
		cmocka_unit_test_teardown(FLIT_CONFIG_env_names_the_file, reset_env),
		cmocka_unit_test(per_object_config_override_applies),
		cmocka_unit_test_teardown(print_callback_receives_library_messages_and_can_be_removed,
					  reset_print),
		cmocka_unit_test(errmsg_is_thread_local),
		cmocka_unit_test(strstatus_names_statuses_and_errors),
		cmocka_unit_test(counters_count_sends_and_receives),
		cmocka_unit_test(ctx_poll_with_nothing_returns_zero),
		cmocka_unit_test(ctx_poll_delivers_at_most_limit_messages),
		cmocka_unit_test(pub_topic_and_next_seq),
		cmocka_unit_test(back_pressured_send_takes_no_sequence_number),
		cmocka_unit_test(pub_receivers_counts_attached_subscribers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
