// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_flit_hpp: the C++ header <flit/flit.hpp> over shm, one process.
 * Run by tests/test_cpp.sh (which builds it with -Werror -pedantic).
 * Topics carry the pid: shm topics are host-wide.
 *
 * Payloads: an 8-byte sequence number, then bytes derived from it, so a
 * lost, repeated, reordered or damaged message is caught.
 */
#include <flit/flit.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c)) {                                                        \
			std::fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, \
				     __LINE__, __func__, #c);                      \
			failures++;                                                \
		}                                                                  \
	} while (0)

static std::string topic(const char *name)
{
	return "cpp." + std::to_string(getpid()) + "." + name;
}

/* poll until cond() or 5 s */
template <class C>
static bool poll_until(flit::context &ctx, C cond)
{
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	while (!cond()) {
		if (ctx.poll() < 0 || std::chrono::steady_clock::now() > end)
			return false;
	}
	return true;
}

static std::vector<std::byte> payload(std::uint64_t seq, std::size_t len)
{
	std::vector<std::byte> p(len);
	std::memcpy(p.data(), &seq, std::min(len, sizeof(seq)));
	for (std::size_t i = sizeof(seq); i < len; i++)
		p[i] = std::byte(static_cast<unsigned char>(seq * 31 + i));
	return p;
}

struct recv_log {
	std::vector<std::string> msgs; // DATA payloads
	std::vector<std::uint64_t> seqs;
	std::vector<std::string> topics;
	int bos = 0, eos = 0, died = 0;
	void operator()(flit::message m)
	{
		switch (m.kind()) {
		case flit::msg_kind::data:
			msgs.emplace_back(m.text());
			seqs.push_back(m.seq());
			topics.emplace_back(m.topic());
			break;
		case flit::msg_kind::bos: bos++; break;
		case flit::msg_kind::eos: eos++; died += m.source_died(); break;
		case flit::msg_kind::loss: break;
		}
	}
};

/* every send overload, a lambda holding a reference, order and contents */
static void lambda_receives_every_send_overload_in_order()
{
	flit::context ctx;
	recv_log log;
	flit::subscriber sub(ctx, topic("ovl"), [&log](flit::message m) { log(m); });
	flit::publisher pub(ctx, topic("ovl"));
	CHECK(pub.topic() == topic("ovl"));
	CHECK(pub.max_msg() >= 4096);
	CHECK(poll_until(ctx, [&] { return pub.receivers() >= 1; }));

	std::uint64_t seq0 = pub.next_seq();
	auto p0 = payload(0, 40);
	CHECK(pub.send(std::span<const std::byte>(p0)).ok());         // span
	CHECK(pub.send("hello"));                                       // literal: 5 bytes, no NUL
	CHECK(pub.send(std::string("a string")).ok());                  // std::string
	std::vector<std::uint32_t> v{ 1, 2, 3 };
	CHECK(pub.send(v).ok());                                        // 12 bytes
	std::array<std::byte, 3> a{ std::byte{ 7 }, std::byte{ 8 }, std::byte{ 9 } };
	CHECK(pub.send(a).ok());
	CHECK(pub.send("raw!", 4).ok());                                // pointer + length
	CHECK(pub.send(std::span<std::byte>(p0).first(8)).ok());        // a mutable span
	CHECK(pub.next_seq() == seq0 + 7);
	for (std::uint64_t i = 0; i < 1000; i++) {
		auto p = payload(i, 8 + i % 200);
		flit::result rc;
		while ((rc = pub.send(p)) == flit::status::back_pressured)
			ctx.poll();
		CHECK(rc.ok());
	}
	CHECK(pub.flush().ok());
	CHECK(poll_until(ctx, [&] { return log.msgs.size() == 1007; }));
	CHECK(log.bos == 1);
	if (log.msgs.size() != 1007)
		return;
	auto bytes = [](const auto &c) {
		auto s = std::as_bytes(std::span(c));
		return std::string(reinterpret_cast<const char *>(s.data()), s.size());
	};
	CHECK(log.msgs[0] == bytes(p0));
	CHECK(log.msgs[1] == "hello");
	CHECK(log.msgs[2] == "a string");
	CHECK(log.msgs[3] == bytes(v) && log.msgs[3].size() == 12);
	CHECK(log.msgs[4] == bytes(a));
	CHECK(log.msgs[5] == "raw!");
	CHECK(log.msgs[6] == bytes(p0).substr(0, 8));
	for (std::uint64_t i = 0; i < 1000; i++)
		CHECK(log.msgs[7 + i] == bytes(payload(i, 8 + i % 200)));
	for (std::size_t i = 0; i < log.seqs.size(); i++)
		CHECK(log.seqs[i] == seq0 + i);
	CHECK(log.topics[0] == topic("ovl"));

	auto c = ctx.counters();
	CHECK(c.sz == sizeof(flit_counters));
	CHECK(c.msgs_sent == 1007 && c.msgs_received == 1007);
	auto d = ctx.describe("shm");
	CHECK(d && !d->empty());
	CHECK(!ctx.describe("udp"));        // not open in this context: nullopt
	auto sp = ctx.stats_path();
	CHECK(sp && sp->find("flit-stats") != std::string::npos);
}

static void claim_commit_and_abort_through_spans()
{
	flit::context ctx;
	recv_log log;
	flit::subscriber sub(ctx, topic("claim"), std::ref(log));
	flit::publisher pub(ctx, topic("claim"));
	CHECK(poll_until(ctx, [&] { return pub.receivers() >= 1; }));

	auto want = payload(42, 64);
	auto [buf, rc] = pub.claim(64);
	CHECK(rc.ok() && buf.size() == 64 && buf.data());
	std::memcpy(buf.data(), want.data(), 64);
	CHECK(pub.commit(40).ok());          // shorter than claimed

	if (auto c = pub.claim(16)) {
		std::memset(c.buf.data(), 0xee, c.buf.size());
		CHECK(pub.abort().ok());     // nothing sent
	} else {
		CHECK(!"claim of 16 refused");
	}
	auto big = pub.claim(pub.max_msg() + 1);
	CHECK(!big && big.rc.failed() && big.rc.errc() == EMSGSIZE && big.buf.empty());
	CHECK(big.rc.error_code() == std::errc::message_size);
	CHECK(std::string(big.rc.str()) == std::strerror(EMSGSIZE));

	std::vector<std::byte> huge(pub.max_msg() + 1);
	auto r = pub.send(huge);
	CHECK(r.failed() && r.value() == -EMSGSIZE && !r.is_status() && !r);

	CHECK(pub.send("after").ok());
	CHECK(poll_until(ctx, [&] { return log.msgs.size() == 2; }));
	if (log.msgs.size() == 2) {
		CHECK(log.msgs[0] == std::string(reinterpret_cast<const char *>(want.data()), 40));
		CHECK(log.msgs[1] == "after");
	}
}

static void pattern_subscriber_sees_matching_topics_only()
{
	flit::context ctx;
	std::vector<std::string> seen;
	flit::subscriber sub(ctx, topic("pat.*"), [&](flit::message m) {
		if (m.is_data())
			seen.push_back(std::string(m.topic()) + "=" + std::string(m.text()));
	}, { .pattern = true });
	flit::subscriber exact(ctx, topic("pat.*"), [](flit::message) {});   // literal name
	flit::publisher a(ctx, topic("pat.a")), b(ctx, topic("pat.b")), o(ctx, topic("other"));
	CHECK(poll_until(ctx, [&] { return a.receivers() >= 1 && b.receivers() >= 1; }));
	for (int i = 0; i < 20; i++)
		ctx.poll();
	CHECK(o.receivers() == 0);
	CHECK(a.send("1").ok() && b.send("2").ok());
	(void)o.send("3");
	CHECK(poll_until(ctx, [&] { return seen.size() == 2; }));
	for (int i = 0; i < 100; i++)
		ctx.poll();
	CHECK(seen.size() == 2);
	std::sort(seen.begin(), seen.end());
	CHECK(seen.size() == 2 && seen[0] == topic("pat.a") + "=1" && seen[1] == topic("pat.b") + "=2");
}

/* what() carries flit_errmsg()'s text; code() the errno */
template <class Fn>
static void expect_error(const char *what, int err, Fn fn)
{
	try {
		fn();
		std::fprintf(stderr, "%s: no exception\n", what);
		failures++;
	} catch (const flit::error &e) {
		std::fprintf(stderr, "  %s threw: %s\n", what, e.what());
		CHECK(e.code().value() == err);
		CHECK(e.code().category() == std::system_category());
		CHECK(!e.errmsg().empty());
		CHECK(std::string(e.what()).find(e.errmsg()) != std::string::npos);
		CHECK(std::string(e.what()).find(std::strerror(err)) != std::string::npos);
		CHECK(e.errmsg() == flit::errmsg());   // the trail, unchanged since
		const std::system_error &se = e;       // catchable as the standard type
		CHECK(se.code() == std::errc(err));
	}
}

static void bad_setup_throws_with_errmsg()
{
	expect_error("context bad line", EINVAL, [] {
		flit::context c({ .config = "context.no_such_key = 1" });
	});
	expect_error("context missing file", ENOENT, [] {
		flit::context c({ .config_file = "/nonexistent/flit.conf" });
	});
	flit::context ctx;
	expect_error("publisher bad config", EINVAL, [&] {
		flit::publisher p(ctx, topic("bad"), { .config = "shm.capacity = 3M" });
	});
	expect_error("publisher unknown transport", EPROTONOSUPPORT, [&] {
		flit::publisher p(ctx, topic("bad"), { .transport = "carrier-pigeon" });
	});
	expect_error("subscriber bad config", EINVAL, [&] {
		flit::subscriber s(ctx, topic("bad"), [](flit::message) {},
				   { .config = "discovery_ms = 0" });
	});
	expect_error("bad topic", EINVAL, [&] { flit::publisher p(ctx, "a\nb"); });
	{
		/* a ring of its own is named by its topic: one live writer */
		flit::publisher one(ctx, topic("excl"), { .config = "source.session = own" });
		expect_error("second writer", EADDRINUSE, [&] {
			flit::publisher p(ctx, topic("excl"), { .config = "source.session = own" });
		});
	}
}

static std::string printed;
__attribute__((format(printf, 2, 0)))
static void capture(flit_log_level, const char *fmt, va_list ap)
{
	char b[512];
	std::vsnprintf(b, sizeof(b), fmt, ap);
	printed += b;
}

static void print_hook_receives_library_warnings()
{
	auto prev = flit::set_print(capture);
	CHECK(prev == nullptr);
	{
		// the counters file cannot be made: the context works, a warning says why
		flit::context ctx({ .config = "context.stats_dir = /nonexistent/flit-stats" });
		CHECK(!printed.empty());
		try {
			auto p = ctx.stats_path();
			CHECK(!p);
		} catch (const flit::error &e) {
			CHECK(e.code().value() != 0);
		}
	}
	CHECK(flit::set_print(nullptr) == &capture);
}

/* moved-from objects are inert; a moved subscriber's callback still runs */
static void moves_keep_callbacks_and_leave_inert_objects()
{
	flit::context ctx0;
	flit::context ctx(std::move(ctx0));
	CHECK(!ctx0 && ctx && ctx0.get() == nullptr);

	int got = 0;
	std::vector<flit::subscriber> subs;
	{
		flit::subscriber s(ctx, topic("mv"), [&got](flit::message m) { got += m.is_data(); });
		flit_sub *raw = s.get();
		subs.push_back(std::move(s));
		CHECK(!s && s.get() == nullptr && subs[0].get() == raw);
	}                                  // the moved-from one is destroyed here: harmless
	for (int i = 0; i < 16; i++)       // reallocations move the subscriber again
		subs.emplace_back(ctx, topic("mv.other") + std::to_string(i), [](flit::message) {});

	flit::publisher p0(ctx, topic("mv"));
	flit::publisher pub(std::move(p0));
	CHECK(!p0 && p0.get() == nullptr);
	CHECK(poll_until(ctx, [&] { return pub.receivers() >= 1; }));
	CHECK(pub.send("x").ok());
	CHECK(poll_until(ctx, [&] { return got == 1; }));

	// move-assignment closes the target's own subscriber first: until then
	// both callables run (+1 and +100 per message), after it only +1
	flit::subscriber t(ctx, topic("mv"), [&got](flit::message m) { got += 100 * m.is_data(); });
	CHECK(poll_until(ctx, [&] {
		if (got < 100)
			(void)pub.send("p");
		return got >= 100;
	}));
	t = std::move(subs[0]);            // t's "+100" subscriber closes, subs[0]'s moves in
	CHECK(!subs[0] && t);
	for (int i = 0; i < 50; i++)
		ctx.poll();
	int base = got;
	CHECK(pub.send("y").ok());
	CHECK(poll_until(ctx, [&] { return got == base + 1; }));
	for (int i = 0; i < 50; i++)
		ctx.poll();
	CHECK(got == base + 1);

	t.close();
	t.close();                         // twice: fine
	CHECK(!t);

	// a callable that owns its state (moved into the heap block)
	auto owned = std::make_unique<int>(0);
	int *seen = owned.get();
	flit::subscriber u(ctx, topic("mv"), [o = std::move(owned)](flit::message m) { *o += m.is_data(); });
	flit::subscriber w = std::move(u);
	CHECK(poll_until(ctx, [&] { return pub.receivers() >= 1; }));
	CHECK(pub.send("z").ok());
	CHECK(poll_until(ctx, [&] { return *seen == 1; }));
}

static void eos_when_publisher_destroyed()
{
	flit::context ctx;
	recv_log log;
	flit::subscriber sub(ctx, topic("eos"), std::ref(log));
	{
		flit::publisher pub(ctx, topic("eos"));
		CHECK(poll_until(ctx, [&] { return pub.receivers() >= 1; }));
		CHECK(pub.send("last").ok());
	}
	CHECK(poll_until(ctx, [&] { return log.eos == 1; }));
	CHECK(log.msgs.size() == 1 && log.bos == 1 && log.died == 0);
}

/* an exception escaping the callable cannot cross flit's C frames: terminate.
 * The child only subscribes, so the ring (the parent's) is removed at close. */
static void throwing_callback_terminates()
{
	const std::string name = topic("throw");   // the parent's pid
	flit::context ctx;
	flit::publisher pub(ctx, name);
	std::fflush(nullptr);
	pid_t pid = fork();
	if (pid == 0) {
		std::set_terminate([] { _exit(42); });
		flit::context cctx;
		flit::subscriber s(cctx, name, [](flit::message m) {
			if (m.is_data())
				throw std::runtime_error("from a callback");
		});
		poll_until(cctx, [] { return false; });
		_exit(0);
	}
	int st = 0;
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (std::chrono::steady_clock::now() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		(void)pub.send("boom");
		ctx.poll();
		usleep(1000);
	}
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 42))
		std::fprintf(stderr, "child status 0x%x\n", st);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
}

int main()
{
	static_assert(!std::is_copy_constructible_v<flit::subscriber>);
	static_assert(!std::is_copy_constructible_v<flit::publisher>);
	static_assert(!std::is_copy_constructible_v<flit::context>);
	static_assert(std::is_nothrow_move_constructible_v<flit::subscriber>);
	static_assert(std::is_nothrow_move_assignable_v<flit::publisher>);
	static_assert(sizeof(flit::result) == sizeof(int));
	static_assert(std::is_trivially_copyable_v<flit::result>);
	static_assert(sizeof(flit::publisher) == sizeof(void *));
	static_assert(noexcept(std::declval<flit::publisher &>().send(std::span<const std::byte>())));
	static_assert(noexcept(std::declval<flit::context &>().poll()));

	struct { const char *name; void (*fn)(); } cases[] = {
		{ "lambda_receives_every_send_overload_in_order", lambda_receives_every_send_overload_in_order },
		{ "claim_commit_and_abort_through_spans", claim_commit_and_abort_through_spans },
		{ "pattern_subscriber_sees_matching_topics_only", pattern_subscriber_sees_matching_topics_only },
		{ "bad_setup_throws_with_errmsg", bad_setup_throws_with_errmsg },
		{ "print_hook_receives_library_warnings", print_hook_receives_library_warnings },
		{ "moves_keep_callbacks_and_leave_inert_objects", moves_keep_callbacks_and_leave_inert_objects },
		{ "eos_when_publisher_destroyed", eos_when_publisher_destroyed },
		{ "throwing_callback_terminates", throwing_callback_terminates },
	};
	for (auto &c : cases) {
		int before = failures;
		try {
			c.fn();
		} catch (const std::exception &e) {
			std::fprintf(stderr, "%s: unexpected exception: %s\n", c.name, e.what());
			failures++;
		}
		std::printf("%s %s\n", failures == before ? "ok  " : "FAIL", c.name);
	}
	std::printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
