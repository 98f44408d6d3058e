// SPDX-License-Identifier: BSD-2-Clause
/* shm robustness: SIGKILL of a reader or of the writer never wedges the
 * others; a new writer takes over a dead writer's topic; corrupted,
 * truncated and foreign ring files give a clear error, never a crash. */
#include <fcntl.h>
#include <poll.h>
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

struct ev { uint64_t data, bos, eos, died, loss; int done; uint64_t stop_at; };

static void on_ev(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct ev *e = arg;
	switch (m->kind) {
	case FLIT_MSG_DATA: if (++e->data == e->stop_at) e->done = 1; break;
	case FLIT_MSG_BOS: e->bos++; break;
	case FLIT_MSG_EOS: e->eos++; e->died += !!(m->flags & FLIT_MSGF_SOURCE_DIED); e->done = 1; break;
	case FLIT_MSG_LOSS: e->loss += m->lost; break;
	}
}

static flit_sub *ev_sub(flit_ctx *ctx, const char *topic, struct ev *e)
{
	return tl_sub(ctx, topic, on_ev, e);
}

static char logbuf[8192];
__attribute__((format(printf, 2, 0)))
static void capture(enum flit_log_level l, const char *fmt, va_list ap)
{
	size_t n = strlen(logbuf);
	if (n < sizeof(logbuf) - 2) {
		vsnprintf(logbuf + n, sizeof(logbuf) - n - 1, fmt, ap);
		strcat(logbuf, "\n");
	}
}

static void reader_killed_mid_stream_writer_goes_on_within_100ms(void **state)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = tl_fork();
	assert_true(pid >= 0);
	if (pid == 0) { /* reader: takes some messages, then stops reading */
		flit_ctx *ctx = tl_ctx(NULL);
		struct ev e = { .stop_at = 1000 };
		flit_sub *s = ev_sub(ctx, "r.kill", &e);
		if (!s)
			_exit(3);
		tl_poll_until(ctx, &e.done, 10000);
		if (write(pfd[1], "x", 1) != 1)
			_exit(4);
		for (;;)
			pause();
	}
	flit_ctx *ctx = tl_ctx(NULL);
	FLIT_OPTS(flit_pub_opts, po, .config = "shm.capacity = 64K\nshm.liveness_ms = 10");
	flit_pub *p = flit_pub_new(ctx, "r.kill", &po);
	char buf[200] = { 0 }, c;
	int rc = 0;
	assert_non_null(p);
	uint64_t end = tl_now_ms() + 5000;
	while (flit_pub_receivers(p) < 1 && tl_now_ms() < end)
		usleep(1000);
	assert_int_equal(flit_pub_receivers(p), 1);
	/* send until the reader has taken its 1000 messages and stalled, then
	 * fill the ring: a stalled (live) reader holds the writer back */
	end = tl_now_ms() + 10000;
	while (flit_pub_send(p, buf, sizeof(buf)) >= 0 && tl_now_ms() < end) {
		struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
		if (poll(&pf, 1, 0) == 1)
			break;
	}
	assert_int_equal(read(pfd[0], &c, 1), 1);
	while ((rc = flit_pub_send(p, buf, sizeof(buf))) == 0 && tl_now_ms() < end)
		;
	assert_int_equal(rc, FLIT_BACK_PRESSURED);
	uint64_t t_bp = tl_now_ms();
	while (tl_now_ms() - t_bp < 50)
		assert_int_equal(flit_pub_send(p, buf, sizeof(buf)), FLIT_BACK_PRESSURED);

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	uint64_t t0 = tl_now_ms();
	while ((rc = flit_pub_send(p, buf, sizeof(buf))) == FLIT_BACK_PRESSURED && tl_now_ms() - t0 < 1000)
		;
	uint64_t took = tl_now_ms() - t0;
	assert_int_equal(rc, 0);
	printf("writer resumed %llu ms after the reader's death\n", (unsigned long long)took);
	assert_true(took < 100);
	assert_int_equal(flit_pub_receivers(p), 0);
	struct flit_counters cn = { .sz = sizeof(cn) };
	flit_ctx_counters(ctx, &cn);
	assert_int_equal(cn.readers_evicted, 1);
	assert_true(cn.back_pressured > 0);
	flit_pub_close(p);
	flit_ctx_close(ctx);
	close(pfd[0]);
	close(pfd[1]);
}

static pid_t spawn_writer(const char *topic)
{
	pid_t pid = tl_fork();
	if (pid == 0) {
		flit_ctx *ctx = tl_ctx(NULL);
		FLIT_OPTS(flit_pub_opts, po, .config = "shm.mode = overwrite");
		flit_pub *p = flit_pub_new(ctx, topic, &po);
		char buf[32] = { 0 };
		if (!p)
			_exit(3);
		for (;;) {
			flit_pub_send(p, buf, sizeof(buf));
			usleep(100);
		}
	}
	return pid;
}

static void writer_killed_readers_see_it_and_a_new_writer_takes_over(void **state)
{
	flit_ctx *ctx = tl_ctx("receiver.shm.liveness_ms = 10");
	struct ev e = { .stop_at = 100 };
	flit_sub *s = ev_sub(ctx, "w.kill", &e);
	pid_t pid = spawn_writer("w.kill");

	assert_non_null(s);
	assert_true(pid > 0);
	assert_true(tl_poll_until(ctx, &e.done, 10000));
	assert_int_equal(e.bos, 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	e.done = 0;
	e.stop_at = 0;
	uint64_t t0 = tl_now_ms();
	assert_true(tl_poll_until(ctx, &e.done, 5000));
	printf("reader saw the writer's death after %llu ms\n", (unsigned long long)(tl_now_ms() - t0));
	assert_int_equal(e.eos, 1);
	assert_int_equal(e.died, 1);

	/* a new writer (another process) takes the topic over */
	pid = spawn_writer("w.kill");
	e.done = 0;
	e.stop_at = e.data + 50;
	assert_true(tl_poll_until(ctx, &e.done, 10000));
	assert_int_equal(e.bos, 2);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	/* and so can this process, once that one is dead too */
	flit_pub *p = NULL;
	for (int i = 0; i < 100 && !p; i++)
		p = flit_pub_new(ctx, "w.kill", NULL);
	assert_non_null(p);
	flit_pub_close(p);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

static void write_file(const char *name, const void *data, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/default/%s", tl_shm_dir(), name);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void corrupted_truncated_and_foreign_files_are_refused_clearly(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	FLIT_OPTS(flit_pub_opts, po, .config = "source.session = own");
	flit_pub *good = flit_pub_new(ctx, "c.good", &po);
	char path[512];
	struct stat st;
	unsigned char *img;
	int fd;

	assert_non_null(good);
	/* take a valid ring image from a live publisher's file */
	snprintf(path, sizeof(path), "%s/default/c.good.ring", tl_shm_dir());
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	fstat(fd, &st);
	img = malloc(st.st_size);
	assert_int_equal(pread(fd, img, st.st_size, 0), st.st_size);
	close(fd);

	write_file("c.foreign.ring", "this is not a ring file at all, just text\n", 43);
	/* a session ring's name: watched by every subscriber, refused alike */
	write_file("@c0ffee.ring", "this is not a ring file at all, just text\n", 43);
	write_file("c.trunc.ring", img, (size_t)st.st_size / 2);
	img[20] ^= 0x40; /* flip a geometry bit: check value no longer matches */
	write_file("c.flip.ring", img, (size_t)st.st_size);
	img[20] ^= 0x40;
	img[8] = 99;     /* version */
	write_file("c.version.ring", img, (size_t)st.st_size);
	free(img);

	logbuf[0] = 0;
	flit_set_print(capture);
	struct ev e = { 0 };
	FLIT_OPTS(flit_sub_opts, so, .on_msg = on_ev, .arg = &e, .pattern = true);
	flit_sub *s = flit_sub_new(ctx, "c.*", &so);
	for (int i = 0; i < 1000; i++)
		flit_ctx_poll(ctx, 0);
	flit_set_print(NULL);
	assert_non_null(s);
	assert_int_equal(e.bos, 1); /* only the good one */
	assert_non_null(strstr(logbuf, "c.foreign.ring: file too short"));
	assert_non_null(strstr(logbuf, "@c0ffee.ring: file too short"));
	assert_non_null(strstr(logbuf, "c.trunc.ring: not a flit shm ring") ?: strstr(logbuf, "c.trunc.ring: shm ring: file is"));
	assert_non_null(strstr(logbuf, "c.flip.ring: shm ring header is corrupted"));
	assert_non_null(strstr(logbuf, "c.version.ring: flit shm ring version 99"));
	assert_int_equal(flit_pub_send(good, "hello", 5), 0);
	e.stop_at = 1;
	assert_true(tl_poll_until(ctx, &e.done, 1000));
	flit_sub_close(s);
	flit_pub_close(good);
	flit_ctx_close(ctx);
}

static void impossible_record_detaches_the_reader_and_is_counted(void **state)
{
	flit_ctx *ctx = tl_ctx(NULL);
	struct ev e = { .stop_at = 1 };
	flit_sub *s = ev_sub(ctx, "c.rec", &e);
	FLIT_OPTS(flit_pub_opts, po, .config = "source.session = own");
	flit_pub *p = flit_pub_new(ctx, "c.rec", &po);
	char path[512];

	assert_non_null(p);
	flit_ctx_poll(ctx, 0);
	assert_int_equal(flit_pub_send(p, "abc", 3), 0);
	assert_true(tl_poll_until(ctx, &e.done, 1000));

	/* scribble a record whose frame length runs past the ring */
	snprintf(path, sizeof(path), "%s/default/c.rec.ring", tl_shm_dir());
	int fd = open(path, O_RDWR);
	struct stat st;
	fstat(fd, &st);
	unsigned char *m = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	uint32_t hdr_size;
	uint64_t tail;
	memcpy(&hdr_size, m + 12, 4);
	memcpy(&tail, m + 0x200, 8);
	unsigned char *rec = m + hdr_size + tail;
	uint32_t huge = 0x7ffffff0;
	memset(rec + 8, 0, 24);
	memcpy(rec + 8 + 8, &huge, 4);
	uint64_t tag = tail | 1;
	__atomic_store_n((uint64_t *)rec, tag, __ATOMIC_RELEASE);

	e.done = 0;
	assert_true(tl_poll_until(ctx, &e.done, 1000));
	assert_int_equal(e.eos, 1);
	assert_int_equal(e.died, 1);
	struct flit_counters cn = { .sz = sizeof(cn) };
	flit_ctx_counters(ctx, &cn);
	assert_int_equal(cn.malformed, 1);
	munmap(m, st.st_size);
	close(fd);
	flit_pub_close(p);
	flit_sub_close(s);
	flit_ctx_close(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reader_killed_mid_stream_writer_goes_on_within_100ms),
		cmocka_unit_test(writer_killed_readers_see_it_and_a_new_writer_takes_over),
		cmocka_unit_test(corrupted_truncated_and_foreign_files_are_refused_clearly),
		cmocka_unit_test(impossible_record_detaches_the_reader_and_is_counted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
