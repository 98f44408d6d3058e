// SPDX-License-Identifier: BSD-2-Clause
/* shm sessions: the publishers of a context share one ring with a topic
 * table; each topic is its own stream to its subscribers (BOS, numbers from
 * 0, EOS when its publisher closes), the others' messages are dropped and
 * counted; a killed process ends every topic; a damaged table entry is
 * refused and counted, never read out of bounds. */
#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "testlib.h"
#include "shm/shm_ring.h"

#define NT 8 /* topics a test tells apart */

struct log {
	uint64_t data[NT], next[NT], bos[NT], eos[NT], died[NT], lost[NT];
	uint64_t bad, total;
	int done;
	uint64_t stop_at;
	char prefix[32];
};

/* topics are PREFIX0 .. PREFIX7: each message's payload is its seq */
static void on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct log *l = arg;
	size_t pl = strlen(l->prefix);
	unsigned i = (unsigned)(m->topic[pl] - '0');

	(void)sub;
	if (strncmp(m->topic, l->prefix, pl) || i >= NT) {
		l->bad++;
		return;
	}
	switch (m->kind) {
	case FLIT_MSG_DATA: {
		uint64_t seq = 0;
		if (m->len != 16 || tl_check(m->data, 16, &seq) || seq != m->seq ||
		    m->seq != l->next[i])
			l->bad++;
		l->next[i] = m->seq + 1;
		l->data[i]++;
		if (++l->total == l->stop_at)
			l->done = 1;
		break;
	}
	case FLIT_MSG_BOS: l->bos[i]++; break;
	case FLIT_MSG_EOS:
		l->eos[i]++;
		l->died[i] += !!(m->flags & FLIT_MSGF_SOURCE_DIED);
		break;
	case FLIT_MSG_LOSS:
		l->lost[i] += m->lost;
		l->next[i] = m->seq + m->lost;
		break;
	}
}

static flit_sub *sub_of(flit_ctx *ctx, struct log *l, const char *topic, bool pattern)
{
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg, .arg = l, .pattern = pattern);
	flit_sub *s = flit_sub_new(ctx, topic, &so);
	if (!s)
		fail_msg("flit_sub_new(%s): %s", topic, flit_errmsg());
	return s;
}

static flit_pub *pub_of(flit_ctx *ctx, const char *prefix, unsigned i, const char *cfg)
{
	char t[64];
	snprintf(t, sizeof(t), "%s%u", prefix, i);
	FLIT_OPTS(flit_pub_opts, po, .config = cfg);
	flit_pub *p = flit_pub_new(ctx, t, &po);
	if (!p)
		fail_msg("flit_pub_new(%s): %s", t, flit_errmsg());
	return p;
}

/* Send n messages on p, spinning through back-pressure (a reader in the
 * same thread: poll it meanwhile). */
static void send_n(flit_pub *p, flit_ctx *rx, uint64_t n)
{
	unsigned char b[16];

	for (uint64_t k = 0; k < n; k++) {
		uint64_t seq = flit_pub_next_seq(p);
		tl_fill(b, sizeof(b), seq);
		int rc;
		while ((rc = flit_pub_send(p, b, sizeof(b))) == FLIT_BACK_PRESSURED)
			if (rx)
				flit_ctx_poll(rx, 0);
		assert_int_equal(rc, 0);
	}
}

/* Ring files of the test's domain whose name starts with c. */
static unsigned rings(char c)
{
	char dir[512];
	unsigned n = 0;
	struct dirent *de;

	snprintf(dir, sizeof(dir), "%s/default", tl_shm_dir());
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] == c && strstr(de->d_name, ".ring") != NULL;
	closedir(d);
	return n;
}

static void poll_ms(flit_ctx *ctx, unsigned ms)
{
	uint64_t end = tl_now_ms() + ms;
	while (tl_now_ms() < end)
		flit_ctx_poll(ctx, 0);
}

static void topics_of_a_context_share_one_ring_and_stay_apart(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct log l = { .prefix = "ss.a", .stop_at = 4 * 500 };
	flit_pub *p[4];
	FLIT_OPTS(flit_counters, c);

	(void)state;
	sub_of(sc, &l, "ss.a*", true);
	for (unsigned i = 0; i < 4; i++)
		p[i] = pub_of(pc, "ss.a", i, NULL);
	assert_int_equal(rings('@'), 1);
	/* interleaved: one ring, each topic numbered on its own from 0 */
	for (int k = 0; k < 500; k++)
		for (unsigned i = 0; i < 4; i++)
			send_n(p[i], sc, 1);
	assert_true(tl_poll_until(sc, &l.done, 5000));
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(l.bos[i], 1);
		assert_int_equal(l.data[i], 500);
		assert_int_equal(l.lost[i], 0);
		assert_int_equal(flit_pub_next_seq(p[i]), 500);
		assert_int_equal(flit_pub_receivers(p[i]), 1);
	}
	assert_int_equal(l.bad, 0);
	assert_int_equal(flit_ctx_counters(pc, &c), 0);
	assert_true(c.msgs_sent == 2000);
	for (unsigned i = 0; i < 4; i++)
		flit_pub_close(p[i]);
	poll_ms(sc, 100);
	assert_int_equal(rings('@'), 0);  /* the session ended with its last topic */
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(l.eos[i], 1);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

static void subscriber_of_one_topic_gets_it_alone_others_counted_filtered(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct log l = { .prefix = "ss.b", .stop_at = 300 };
	flit_pub *p[3];
	FLIT_OPTS(flit_counters, c);

	(void)state;
	sub_of(sc, &l, "ss.b1", false);
	for (unsigned i = 0; i < 3; i++)
		p[i] = pub_of(pc, "ss.b", i, NULL);
	/* the others: no receiver; this one: the subscriber */
	for (int t = 0; t < 1000 && flit_pub_receivers(p[1]) < 1; t++)
		flit_ctx_poll(sc, 0);
	assert_int_equal(flit_pub_receivers(p[1]), 1);
	assert_int_equal(flit_pub_receivers(p[0]), 0);
	assert_int_equal(flit_pub_receivers(p[2]), 0);
	for (int k = 0; k < 300; k++)
		for (unsigned i = 0; i < 3; i++)
			send_n(p[i], sc, 1);
	assert_true(tl_poll_until(sc, &l.done, 5000));
	poll_ms(sc, 50);
	assert_int_equal(l.data[1], 300);
	assert_int_equal(l.data[0] + l.data[2], 0);
	assert_int_equal(l.bos[0] + l.bos[2], 0);
	assert_int_equal(l.bad, 0);
	assert_int_equal(flit_ctx_counters(sc, &c), 0);
	assert_true(c.msgs_received == 300);
	assert_true(c.msgs_filtered == 600);
	assert_true(c.msgs_lost == 0);
	for (unsigned i = 0; i < 3; i++)
		flit_pub_close(p[i]);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

static void closing_one_publisher_ends_its_topic_after_its_last_message(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct log l = { .prefix = "ss.c" };
	flit_pub *a = pub_of(pc, "ss.c", 0, "batch = true"), *b = pub_of(pc, "ss.c", 1, "batch = true");

	(void)state;
	sub_of(sc, &l, "ss.c*", true);
	for (int t = 0; t < 1000 && flit_pub_receivers(a) < 1; t++)
		flit_ctx_poll(sc, 0);
	/* batched: a's last messages sit in the open frame when it closes */
	send_n(a, sc, 100);
	send_n(b, sc, 10);
	send_n(a, sc, 7);
	flit_pub_close(a);
	send_n(b, sc, 10);
	flit_pub_flush(b);
	l.stop_at = 127;
	assert_true(tl_poll_until(sc, &l.done, 5000));
	poll_ms(sc, 50);
	assert_int_equal(l.data[0], 107);
	assert_int_equal(l.eos[0], 1);   /* after its 107th message */
	assert_int_equal(l.died[0], 0);
	assert_int_equal(l.lost[0], 0);
	assert_int_equal(l.data[1], 20);
	assert_int_equal(l.eos[1], 0);   /* the session goes on */
	assert_int_equal(rings('@'), 1);
	/* a topic added to the running session: the pattern learns it */
	flit_pub *c = pub_of(pc, "ss.c", 2, "batch = true");
	send_n(c, sc, 5);
	flit_pub_flush(c);
	l.stop_at = 132;
	l.done = 0;
	assert_true(tl_poll_until(sc, &l.done, 5000));
	assert_int_equal(l.bos[2], 1);
	assert_int_equal(l.data[2], 5);
	assert_int_equal(l.bad, 0);
	flit_pub_close(b);
	flit_pub_close(c);
	poll_ms(sc, 100);
	assert_int_equal(l.eos[1], 1);
	assert_int_equal(l.eos[2], 1);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

static void killed_process_ends_every_topic_and_its_ring_goes(void **state)
{
	flit_ctx *sc = tl_ctx(NULL);
	struct log l = { .prefix = "ss.d", .stop_at = 60 };
	int pfd[2];

	(void)state;
	sub_of(sc, &l, "ss.d*", true);
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = tl_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		flit_ctx *pc = tl_ctx(NULL);
		flit_pub *p[3];
		for (unsigned i = 0; i < 3; i++)
			p[i] = pub_of(pc, "ss.d", i, NULL);
		for (int t = 0; t < 5000 && flit_pub_receivers(p[2]) < 1; t++)
			usleep(1000);
		for (unsigned i = 0; i < 3; i++)
			send_n(p[i], NULL, 20);
		(void)!write(pfd[1], "x", 1);
		pause(); /* killed here, nothing closed */
		_exit(0);
	}
	char x;
	assert_true(tl_poll_until(sc, &l.done, 5000));
	assert_int_equal(read(pfd[0], &x, 1), 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	uint64_t end = tl_now_ms() + 3000;
	while ((l.eos[0] + l.eos[1] + l.eos[2] < 3) && tl_now_ms() < end)
		flit_ctx_poll(sc, 0);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(l.data[i], 20);
		assert_int_equal(l.eos[i], 1);
		assert_int_equal(l.died[i], 1);
	}
	assert_int_equal(rings('@'), 0); /* the dead ring was removed */
	close(pfd[0]);
	close(pfd[1]);
	flit_ctx_close(sc);
}

/* Overwrite: a reader lapped in a session ring is told each topic's loss
 * in that topic's numbers; every number is a message or inside one LOSS. */
static void a_lapped_reader_is_told_each_topic_s_loss(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct log l = { .prefix = "ss.h" };
	const char *cfg = "shm.mode = overwrite\nshm.capacity = 64K";
	flit_pub *p[3];
	FLIT_OPTS(flit_counters, c);

	(void)state;
	sub_of(sc, &l, "ss.h*", true);
	for (unsigned i = 0; i < 3; i++)
		p[i] = pub_of(pc, "ss.h", i, cfg);
	for (int t = 0; t < 1000 && flit_pub_receivers(p[2]) < 1; t++)
		flit_ctx_poll(sc, 0);
	assert_int_equal(flit_pub_receivers(p[2]), 1);
	/* ~30 laps before the reader looks again, then a last message each */
	for (int k = 0; k < 10000; k++)
		for (unsigned i = 0; i < 3; i++)
			send_n(p[i], NULL, 1);
	poll_ms(sc, 200);
	for (unsigned i = 0; i < 3; i++)
		send_n(p[i], NULL, 1);
	poll_ms(sc, 200);
	assert_int_equal(l.bad, 0);
	for (unsigned i = 0; i < 3; i++) {
		print_message("topic %u: %llu delivered, %llu lost\n", i,
			      (unsigned long long)l.data[i], (unsigned long long)l.lost[i]);
		assert_int_equal(l.next[i], 10001);
		assert_int_equal(l.data[i] + l.lost[i], 10001);
		assert_true(l.lost[i] > 0);
	}
	assert_int_equal(flit_ctx_counters(sc, &c), 0);
	assert_true(c.malformed == 0 && c.duplicates == 0);
	for (unsigned i = 0; i < 3; i++)
		flit_pub_close(p[i]);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

/* No subscriber found it: the next session's writer removes it. */
static void a_killed_process_s_ring_goes_with_the_next_session(void **state)
{
	int pfd[2];
	char x;

	(void)state;
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = tl_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		flit_ctx *pc = tl_ctx(NULL);
		flit_pub *p = pub_of(pc, "ss.g", 0, NULL);
		send_n(p, NULL, 5);
		(void)!write(pfd[1], "x", 1);
		pause();
		_exit(0);
	}
	assert_int_equal(read(pfd[0], &x, 1), 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_int_equal(rings('@'), 1);
	flit_ctx *pc = tl_ctx(NULL);
	flit_pub *p = pub_of(pc, "ss.g", 1, NULL);
	assert_int_equal(rings('@'), 1); /* ours: the dead one went */
	flit_pub_close(p);
	assert_int_equal(rings('@'), 0);
	flit_ctx_close(pc);
	close(pfd[0]);
	close(pfd[1]);
}

static void named_session_refuses_other_settings_and_own_gets_a_ring(void **state)
{
	flit_ctx *pc = tl_ctx(NULL);

	(void)state;
	FLIT_OPTS(flit_pub_opts, named, .config = "source.session = md");
	FLIT_OPTS(flit_pub_opts, named_big, .config = "source.session = md\nshm.capacity = 4M");
	FLIT_OPTS(flit_pub_opts, own, .config = "source.session = own");
	flit_pub *a = flit_pub_new(pc, "ss.e0", &named);
	flit_pub *b = flit_pub_new(pc, "ss.e1", &named_big);
	assert_non_null(a);
	assert_null(b);
	assert_int_equal(errno, EINVAL);
	assert_non_null(strstr(flit_errmsg(), "other source settings"));
	/* the default session and a ring of its own are other rings */
	flit_pub *c = flit_pub_new(pc, "ss.e2", NULL);
	flit_pub *d = flit_pub_new(pc, "ss.e3", &own);
	flit_pub *e = flit_pub_new(pc, "ss.e4", &named);
	assert_non_null(c);
	assert_non_null(d);
	assert_non_null(e);
	assert_int_equal(rings('@'), 2);
	assert_int_equal(rings('s'), 1);  /* ss.e3.ring */
	flit_pub_close(a);
	flit_pub_close(c);
	flit_pub_close(d);
	flit_pub_close(e);
	assert_int_equal(rings('@') + rings('s'), 0);
	flit_ctx_close(pc);
}

/* The writer's table, damaged: a name running out of the names area is
 * refused (counted malformed, a warning naming the ring), the topic's
 * messages are dropped, the other topics flow. */
static char logbuf[4096];
__attribute__((format(printf, 2, 0)))
static void capture(enum flit_log_level lv, const char *fmt, va_list ap)
{
	size_t n = strlen(logbuf);
	(void)lv;
	if (n < sizeof(logbuf) - 2) {
		vsnprintf(logbuf + n, sizeof(logbuf) - n - 1, fmt, ap);
		strcat(logbuf, "\n");
	}
}

static void damaged_table_entry_is_refused_and_counted(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct log l = { .prefix = "ss.f", .stop_at = 10 };
	FLIT_OPTS(flit_counters, c);
	char dir[512], path[1024];
	struct dirent *de;

	(void)state;
	flit_pub *a = pub_of(pc, "ss.f", 0, NULL);
	flit_pub *b = pub_of(pc, "ss.f", 1, NULL);
	snprintf(dir, sizeof(dir), "%s/default", tl_shm_dir());
	DIR *d = opendir(dir);
	path[0] = 0;
	while ((de = readdir(d)))
		if (de->d_name[0] == '@')
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
	closedir(d);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	fstat(fd, &st);
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	const struct shm_hdr *h = m;
	shm_topic_ents(m)[1].name_off = h->geom.names_size - 2;

	logbuf[0] = 0;
	flit_set_print(capture);
	sub_of(sc, &l, "ss.f*", true);
	poll_ms(sc, 50);
	send_n(a, sc, 10);
	send_n(b, sc, 10);
	assert_true(tl_poll_until(sc, &l.done, 5000));
	poll_ms(sc, 50);
	flit_set_print(NULL);
	assert_int_equal(l.data[0], 10);
	assert_int_equal(l.data[1], 0);
	assert_int_equal(l.bad, 0);
	assert_non_null(strstr(logbuf, "topic 1: bad name"));
	assert_non_null(strstr(logbuf, path));
	assert_int_equal(flit_ctx_counters(sc, &c), 0);
	assert_true(c.malformed >= 1);
	assert_true(c.msgs_filtered == 10);
	munmap(m, (size_t)st.st_size);
	close(fd);
	flit_pub_close(a);
	flit_pub_close(b);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

/* ---- what a review found: each case once ---- */

struct claimer { flit_pub *p; int step; };

static void *claim_then_close(void *arg)
{
	struct claimer *c = arg;
	void *buf;
	if (flit_pub_claim(c->p, 16, &buf) == 0)
		c->step = 1;
	flit_pub_close(c->p);   /* the claim still open */
	c->step = 2;
	return NULL;
}

static void *send_one(void *arg)
{
	struct claimer *c = arg;
	unsigned char b[16];
	tl_fill(b, sizeof(b), 0);
	c->step = flit_pub_send(c->p, b, sizeof(b)) == 0 ? 1 : -1;
	return NULL;
}

/* Closing a publisher with its claim open gives the session back: another
 * thread's send goes through. */
static void closing_a_publisher_with_a_claim_open_frees_the_session(void **state)
{
	flit_ctx *pc = tl_ctx(NULL);
	struct claimer a = { .p = pub_of(pc, "ss.j", 0, NULL) }, b = { .p = pub_of(pc, "ss.j", 1, NULL) };
	pthread_t t1, t2;

	(void)state;
	assert_int_equal(pthread_create(&t1, NULL, claim_then_close, &a), 0);
	pthread_join(t1, NULL);
	assert_int_equal(a.step, 2);
	assert_int_equal(pthread_create(&t2, NULL, send_one, &b), 0);
	for (int i = 0; i < 200 && !b.step; i++)
		usleep(5000);
	assert_int_equal(b.step, 1);   /* not spinning on a lock nobody holds */
	pthread_join(t2, NULL);
	flit_pub_close(b.p);
	flit_ctx_close(pc);
}

struct handoff { flit_pub *p; void *buf; int rc; char why[256]; };

static void *commit_elsewhere(void *arg)
{
	struct handoff *h = arg;
	tl_fill(h->buf, 16, 0);
	h->rc = flit_pub_commit(h->p, 16);
	snprintf(h->why, sizeof(h->why), "%s", flit_errmsg()); /* the thread's own */
	return NULL;
}

/* A shared session's claim holds its lock until the commit: a commit on
 * another thread is refused, clearly, and the claiming thread's goes
 * through; a ring of its own takes a commit from any thread. */
static void a_claim_is_committed_on_its_own_thread_in_a_shared_session(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct log l = { .prefix = "ss.k", .stop_at = 3 };
	flit_pub *a = pub_of(pc, "ss.k", 0, NULL), *b = pub_of(pc, "ss.k", 1, NULL);
	flit_pub *o = pub_of(pc, "ss.k", 2, "source.session = own");
	struct handoff h = { .p = a, .rc = 1 }, ho = { .p = o, .rc = 1 };
	pthread_t t;

	(void)state;
	sub_of(sc, &l, "ss.k*", true);
	for (int i = 0; i < 1000 && (flit_pub_receivers(b) < 1 || flit_pub_receivers(o) < 1); i++)
		flit_ctx_poll(sc, 0);
	assert_int_equal(flit_pub_claim(a, 16, &h.buf), 0);
	assert_int_equal(pthread_create(&t, NULL, commit_elsewhere, &h), 0);
	pthread_join(t, NULL);
	assert_int_equal(h.rc, -EBUSY);
	assert_non_null(strstr(h.why, "claiming thread"));
	assert_int_equal(flit_pub_commit(a, 16), 0);
	send_n(b, sc, 1);  /* the session is free again */
	assert_int_equal(flit_pub_claim(o, 16, &ho.buf), 0);
	assert_int_equal(pthread_create(&t, NULL, commit_elsewhere, &ho), 0);
	pthread_join(t, NULL);
	assert_int_equal(ho.rc, 0);
	assert_true(tl_poll_until(sc, &l.done, 5000));
	assert_int_equal(l.data[0], 1);
	assert_int_equal(l.data[1], 1);
	assert_int_equal(l.data[2], 1);
	assert_int_equal(l.bad, 0);
	flit_pub_close(a);
	flit_pub_close(b);
	flit_pub_close(o);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

/* Threads writing their own topics of one session at once (the lock's
 * bias taken from the first by the others): every message of every topic
 * once, in order. */
struct blaster { flit_pub *p; uint64_t n; int bp; };

static void *blast(void *arg)
{
	struct blaster *b = arg;
	unsigned char buf[16];
	for (uint64_t k = 0; k < b->n; k++) {
		tl_fill(buf, sizeof(buf), k);
		int rc;
		while ((rc = flit_pub_send(b->p, buf, sizeof(buf))) == FLIT_BACK_PRESSURED)
			b->bp++;
		if (rc)
			return NULL;
	}
	return NULL;
}

static void threads_writing_one_session_keep_every_topic_whole(void **state)
{
	enum { TH = 3, N = 200000 };
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct log l = { .prefix = "ss.q", .stop_at = (uint64_t)TH * N };
	struct blaster b[TH];
	pthread_t th[TH];

	(void)state;
	sub_of(sc, &l, "ss.q*", true);
	for (unsigned i = 0; i < TH; i++)
		b[i] = (struct blaster){ .p = pub_of(pc, "ss.q", i, i == 1 ? "batch = true" : NULL), .n = N };
	for (int i = 0; i < 1000 && flit_pub_receivers(b[TH - 1].p) < 1; i++)
		flit_ctx_poll(sc, 0);
	/* the main thread takes the lock first (the bias is its) */
	flit_pub_flush(b[0].p);
	for (unsigned i = 0; i < TH; i++)
		assert_int_equal(pthread_create(&th[i], NULL, blast, &b[i]), 0);
	uint64_t end = tl_now_ms() + 30000;
	while (!l.done && tl_now_ms() < end) {
		flit_ctx_poll(sc, 0);
		if (l.total >= (uint64_t)(TH - 1) * N + N - 200) /* the batch's tail */
			for (unsigned i = 0; i < TH; i++)
				flit_pub_flush(b[i].p);
	}
	for (unsigned i = 0; i < TH; i++)
		pthread_join(th[i], NULL);
	for (unsigned i = 0; i < TH; i++)
		flit_pub_flush(b[i].p);
	poll_ms(sc, 100);
	for (unsigned i = 0; i < TH; i++) {
		assert_int_equal(l.data[i], N);
		assert_int_equal(l.lost[i], 0);
	}
	assert_int_equal(l.bad, 0);
	for (unsigned i = 0; i < TH; i++)
		flit_pub_close(b[i].p);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

/* A topic added, sent on and closed while the reader is inside its poll
 * (its callback does it): BOS, its message, and its EOS. */
static flit_ctx *cb_pc;
static struct log cb_log = { .prefix = "ss.l" };
static void on_msg_then_topic(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	on_msg(sub, m, arg);
	if (m->kind == FLIT_MSG_DATA && m->topic[4] == '0' && cb_pc) {
		flit_pub *x = pub_of(cb_pc, "ss.l", 5, NULL);
		send_n(x, NULL, 1);
		flit_pub_close(x);
		cb_pc = NULL;
	}
}

static void a_topic_born_and_ended_during_a_poll_gets_its_eos(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	flit_pub *a = pub_of(pc, "ss.l", 0, NULL);

	(void)state;
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_msg_then_topic, .arg = &cb_log, .pattern = true);
	assert_non_null(flit_sub_new(sc, "ss.l*", &so));
	for (int i = 0; i < 1000 && flit_pub_receivers(a) < 1; i++)
		flit_ctx_poll(sc, 0);
	cb_pc = pc;
	send_n(a, NULL, 2);
	for (int i = 0; i < 2000; i++)
		flit_ctx_poll(sc, 1);
	assert_int_equal(cb_log.data[0], 2);
	assert_int_equal(cb_log.bos[5], 1);
	assert_int_equal(cb_log.data[5], 1);
	assert_int_equal(cb_log.eos[5], 1);
	assert_int_equal(cb_log.bad, 0);
	flit_pub_close(a);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

/* A subscriber of a topic that ended takes no slot: the paced writer of
 * the session's other topic is not held back by it, though it never
 * polls again. */
static void a_subscriber_of_an_ended_topic_holds_nothing_back(void **state)
{
	const char *cfg = "shm.capacity = 64K";
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct log l = { .prefix = "ss.m" };
	flit_pub *x = pub_of(pc, "ss.m", 0, cfg), *y = pub_of(pc, "ss.m", 1, cfg);
	unsigned char b[200] = { 0 };

	(void)state;
	send_n(x, NULL, 3);
	flit_pub_close(x);
	sub_of(sc, &l, "ss.m0", false);
	poll_ms(sc, 100);
	/* sc never polls again; ~30 laps of y's ring */
	for (int i = 0; i < 10000; i++)
		assert_int_equal(flit_pub_send(y, b, sizeof(b)), 0);
	assert_int_equal(flit_pub_receivers(y), 0);
	flit_pub_close(y);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

/* All slots taken: the refused subscriber gets one once it frees up. */
static void a_subscriber_refused_a_slot_gets_one_when_it_frees(void **state)
{
	const char *cfg = "shm.max_readers = 1";
	flit_ctx *pc = tl_ctx(NULL), *s1 = tl_ctx(NULL), *s2 = tl_ctx("receiver.discovery_ms = 50\n");
	struct log l1 = { .prefix = "ss.n" }, l2 = { .prefix = "ss.n" };
	flit_pub *p = pub_of(pc, "ss.n", 0, cfg);

	(void)state;
	flit_sub *a = sub_of(s1, &l1, "ss.n0", false);
	poll_ms(s1, 50);
	assert_int_equal(l1.bos[0], 1);
	sub_of(s2, &l2, "ss.n0", false);
	poll_ms(s2, 50);
	assert_int_equal(l2.bos[0], 0);   /* no slot */
	flit_sub_close(a);
	poll_ms(s1, 20);
	poll_ms(s2, 500);
	assert_int_equal(l2.bos[0], 1);
	flit_pub_close(p);
	flit_ctx_close(s2);
	flit_ctx_close(s1);
	flit_ctx_close(pc);
}

/* The largest message: a ring of its own's as before sessions; a
 * session's does not shrink when a second publisher comes. */
static void largest_message_is_stable(void **state)
{
	flit_ctx *pc = tl_ctx(NULL);
	FLIT_OPTS(flit_pub_opts, own, .config = "source.session = own");
	flit_pub *o = flit_pub_new(pc, "ss.o", &own);
	flit_pub *a = pub_of(pc, "ss.o", 0, NULL);
	size_t m1 = flit_pub_max_msg(a);

	(void)state;
	assert_int_equal(flit_pub_max_msg(o), (1u << 20) / 4 - 24 - 8 - 8);
	flit_pub *b = pub_of(pc, "ss.o", 1, NULL);
	assert_int_equal(flit_pub_max_msg(a), m1);
	assert_int_equal(flit_pub_max_msg(b), m1);
	void *big = calloc(1, m1);
	assert_int_equal(flit_pub_send(b, big, m1), 0);
	free(big);
	flit_pub_close(o);
	flit_pub_close(a);
	flit_pub_close(b);
	flit_ctx_close(pc);
}

/* Frames are counted once, across the lead publisher's close. */
static void frames_are_counted_across_the_lead_s_close(void **state)
{
	flit_ctx *pc = tl_ctx(NULL);
	flit_pub *a = pub_of(pc, "ss.p", 0, "batch = true"), *b = pub_of(pc, "ss.p", 1, "batch = true");
	FLIT_OPTS(flit_counters, c);

	(void)state;
	send_n(a, NULL, 1);
	flit_pub_close(a);      /* publishes the batch: one frame */
	send_n(b, NULL, 1);
	flit_pub_flush(b);      /* another */
	assert_int_equal(flit_ctx_counters(pc, &c), 0);
	assert_true(c.msgs_sent == 2);
	assert_true(c.frames_sent == 2);
	flit_pub_close(b);
	flit_ctx_close(pc);
}

/* A subscriber older than its topics, that did not poll while the ring
 * lapped: each topic's messages the ring no longer holds are told as that
 * topic's loss, from its number 0; so with one topic alone. */
static void lapped_before_the_first_look(unsigned ntopics, const char *prefix)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	struct log l = { 0 };
	flit_pub *p[3];

	snprintf(l.prefix, sizeof(l.prefix), "%s", prefix);
	char pat[32];
	snprintf(pat, sizeof(pat), "%s*", prefix);
	sub_of(sc, &l, pat, true);
	for (unsigned i = 0; i < ntopics; i++)
		p[i] = pub_of(pc, prefix, i, "shm.capacity = 64K");
	/* ~20 laps, nobody reading (a watcher holds no slot) */
	for (int k = 0; k < 20000 / (int)ntopics; k++)
		for (unsigned i = 0; i < ntopics; i++)
			send_n(p[i], NULL, 1);
	poll_ms(sc, 100);
	for (unsigned i = 0; i < ntopics; i++)
		send_n(p[i], NULL, 1);
	l.stop_at = ntopics;
	assert_true(tl_poll_until(sc, &l.done, 5000));
	uint64_t sent = 20000 / ntopics + 1;
	for (unsigned i = 0; i < ntopics; i++) {
		assert_int_equal(l.bos[i], 1);
		assert_int_equal(l.data[i], 1);
		assert_int_equal(l.lost[i], sent - 1);   /* 0 .. its last but one */
		assert_int_equal(l.next[i], sent);
	}
	assert_int_equal(l.bad, 0);
	for (unsigned i = 0; i < ntopics; i++)
		flit_pub_close(p[i]);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

static void a_topic_lapped_before_its_older_subscriber_looked_is_told_lost(void **state)
{
	(void)state;
	lapped_before_the_first_look(3, "ss.r");
	lapped_before_the_first_look(1, "ss.s");
}

/* 100,000 topics of one context: two rings (65,536 topics a ring), every
 * message of every topic delivered in order to a pattern subscriber, an
 * exact subscriber of one topic gets it alone, and every topic ends. */
#define HT 100000
static uint32_t ht_next[HT];
static uint64_t ht_bos, ht_eos, ht_msgs, ht_bad, ht_one;

static void ht_cb(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	(void)sub;
	if (arg) {      /* the exact subscriber */
		ht_one += m->kind == FLIT_MSG_DATA;
		return;
	}
	unsigned k = (unsigned)atoi(m->topic + 3);
	if (strncmp(m->topic, "sz.", 3) || k >= HT) {
		ht_bad++;
		return;
	}
	switch (m->kind) {
	case FLIT_MSG_BOS: ht_bos++; break;
	case FLIT_MSG_EOS: ht_eos++; break;
	case FLIT_MSG_DATA: {
		uint32_t v;
		memcpy(&v, m->data, 4);
		if (v != k || m->seq != ht_next[k])
			ht_bad++;
		ht_next[k]++;
		ht_msgs++;
		break;
	}
	default: ht_bad++;
	}
}

static void a_hundred_thousand_topics_share_two_rings_and_stay_apart(void **state)
{
	flit_ctx *pc = tl_ctx(NULL), *sc = tl_ctx(NULL);
	static flit_pub *p[HT];
	char t[32];
	int one = 1;

	(void)state;
	FLIT_OPTS(flit_sub_opts, so, .on_msg = ht_cb, .pattern = true);
	FLIT_OPTS(flit_sub_opts, so1, .on_msg = ht_cb, .arg = &one);
	assert_non_null(flit_sub_new(sc, "sz.*", &so));
	assert_non_null(flit_sub_new(sc, "sz.00042", &so1));
	uint64_t t0 = tl_now_ms();
	for (unsigned k = 0; k < HT; k++) {
		snprintf(t, sizeof(t), "sz.%05u", k);
		p[k] = flit_pub_new(pc, t, NULL);
		if (!p[k])
			fail_msg("flit_pub_new(%s): %s", t, flit_errmsg());
	}
	print_message("created %u publishers in %llu ms\n", HT, (unsigned long long)(tl_now_ms() - t0));
	assert_int_equal(rings('@'), 2);
	/* the subscriber finds both rings and takes a slot in each (a paced
	 * writer waits for a reader, not for a watcher) */
	uint64_t end = tl_now_ms() + 20000;
	while (ht_bos < HT && tl_now_ms() < end)
		flit_ctx_poll(sc, 0);
	assert_int_equal(ht_bos, HT);
	for (uint32_t round = 0; round < 2; round++)
		for (uint32_t k = 0; k < HT; k++) {
			uint32_t v[2] = { k, round };
			int rc;
			while ((rc = flit_pub_send(p[k], v, sizeof(v))) == FLIT_BACK_PRESSURED)
				flit_ctx_poll(sc, 0);
			assert_int_equal(rc, 0);
		}
	end = tl_now_ms() + 20000;
	while (ht_msgs < 2u * HT && tl_now_ms() < end)
		flit_ctx_poll(sc, 0);
	assert_int_equal(ht_bos, HT);
	assert_int_equal(ht_msgs, 2u * HT);
	assert_int_equal(ht_one, 2);
	assert_int_equal(ht_bad, 0);
	for (unsigned k = 0; k < HT; k++)
		flit_pub_close(p[k]);
	end = tl_now_ms() + 20000;
	while (ht_eos < HT && tl_now_ms() < end)
		flit_ctx_poll(sc, 0);
	assert_int_equal(ht_eos, HT);
	assert_int_equal(rings('@'), 0);
	flit_ctx_close(sc);
	flit_ctx_close(pc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(topics_of_a_context_share_one_ring_and_stay_apart),
		cmocka_unit_test(subscriber_of_one_topic_gets_it_alone_others_counted_filtered),
		cmocka_unit_test(closing_one_publisher_ends_its_topic_after_its_last_message),
		cmocka_unit_test(killed_process_ends_every_topic_and_its_ring_goes),
		cmocka_unit_test(a_lapped_reader_is_told_each_topic_s_loss),
		cmocka_unit_test(a_killed_process_s_ring_goes_with_the_next_session),
		cmocka_unit_test(named_session_refuses_other_settings_and_own_gets_a_ring),
		cmocka_unit_test(damaged_table_entry_is_refused_and_counted),
		cmocka_unit_test(closing_a_publisher_with_a_claim_open_frees_the_session),
		cmocka_unit_test(a_claim_is_committed_on_its_own_thread_in_a_shared_session),
		cmocka_unit_test(threads_writing_one_session_keep_every_topic_whole),
		cmocka_unit_test(a_topic_born_and_ended_during_a_poll_gets_its_eos),
		cmocka_unit_test(a_subscriber_of_an_ended_topic_holds_nothing_back),
		cmocka_unit_test(a_subscriber_refused_a_slot_gets_one_when_it_frees),
		cmocka_unit_test(largest_message_is_stable),
		cmocka_unit_test(frames_are_counted_across_the_lead_s_close),
		cmocka_unit_test(a_hundred_thousand_topics_share_two_rings_and_stay_apart),
		cmocka_unit_test(a_topic_lapped_before_its_older_subscriber_looked_is_told_lost),
	};
	setenv("FLIT_CONTEXT_TRANSPORTS", "shm", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
