/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * flit.hpp — header-only C++ over the C API of <flit/flit.h>.
 *
 *	flit::context ctx;                                  // $FLIT_CONFIG if set
 *	flit::subscriber sub(ctx, "prices.eur", [](flit::message m) {
 *		if (m.kind() == flit::msg_kind::data)
 *			std::cout << m.topic() << ": " << m.text() << '\n';
 *	});
 *	flit::publisher pub(ctx, "prices.eur");
 *	while (pub.receivers() < 1)                         // discovery is asynchronous
 *		ctx.poll();
 *	if (auto rc = pub.send("1.0842"); !rc)
 *		std::cerr << "send: " << rc.str() << '\n';
 *	ctx.poll();                                         // callbacks run here
 *
 * Build: g++ -std=c++20 app.cpp $(pkg-config --cflags --libs flit)
 *
 * Language level: C++20.  Payloads are std::span<const std::byte> and claims
 * std::span<std::byte>, the vocabulary type the standard has for "bytes
 * somewhere else"; a home-made span for C++17 would be a second, incompatible
 * vocabulary (no subspan()/as_bytes() interplay with callers' spans), and
 * every compiler of the distributions flit targets has std::span (g++ >= 10,
 * clang >= 10 with libstdc++ 10).  Concepts keep the convenience overloads
 * from swallowing string literals (see send()).  g++ 12 defaults to
 * -std=gnu++17, hence the #error below naming the flag.  C++17 programs can
 * use <flit/flit.h> directly: it is C with an extern "C" block.
 *
 * Error model.
 *  - Setup and queries throw flit::error (a std::system_error): the
 *    constructors of context, publisher and subscriber, counters(),
 *    describe(), stats_path().  code() is the errno (std::system_category),
 *    errmsg() and what() are flit_errmsg()'s text at the time of the
 *    failure: what failed, where, why ("<call>: <strerror>" if flit left
 *    no text).
 *  - The hot path never throws and is noexcept: send, claim, commit, abort,
 *    flush return a flit::result, a wrapped int with the C convention (0, a
 *    positive flit::status: nothing sent, retry or drop; -errno), as cheap as
 *    the int (it is returned in a register).  poll() returns the C int.
 *    result is [[nodiscard]]: a send whose outcome is ignored is a bug.
 *  - Callbacks cannot throw into flit: an exception escaping a subscriber's
 *    callable calls std::terminate (its trampoline is noexcept; the frames
 *    in between are C).  The print hook is a C function pointer: same rule.
 *
 * Cost.  Each hot-path member is an inline call of the C function with the
 * same arguments: publisher::send(span) compiles to the same instructions
 * as the C call (a tail jump to flit_pub_send at -O2); tests/test_cpp.sh
 * checks that on the disassembly (tools/bench-cpp.sh --zerocost, which
 * also compares claim+commit and the callback).  A subscriber's callable is stored
 * inline in a heap block (see below) and called through a per-type
 * trampoline: no std::function, no virtual call per message.
 *
 * Ownership.  context, publisher and subscriber own their C handle, are
 * move-only, close it in the destructor, and a moved-from object is inert
 * (get() == nullptr, destructor does nothing; do not call other members).
 * A context must outlive its publishers and subscribers, as in C.
 * A subscriber's callable lives in a heap block whose address is the C
 * callback's user pointer, so moving the subscriber moves only the pointer
 * to that block: the callback keeps working after a move.  Do not destroy
 * (or move-assign over) a subscriber from a callback of its own context
 * (flit_sub_close's rule).  Threads: as in C, a context and its subscribers
 * belong to the thread that polls it.
 */
#ifndef FLIT_FLIT_HPP
#define FLIT_FLIT_HPP

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "flit.hpp needs C++20 (std::span, concepts): compile with -std=c++20 (or use <flit/flit.h>)"
#else

#include <cerrno>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include <flit/flit.h>

/* The publisher's hot-path calls are C and call no user code, so nothing
 * can be thrown through them: say so to the compiler (as glibc's __THROW
 * does).  Without it, a noexcept wrapper must keep an exception region
 * around the call (to reach std::terminate) and loses the tail call:
 * publisher::send() would be call+ret instead of the C caller's jmp.
 * (flit_ctx_poll() is not among them: it runs callbacks.) */
extern "C" {
__attribute__((nothrow)) int flit_pub_send(flit_pub *, const void *, size_t);
__attribute__((nothrow)) int flit_pub_claim(flit_pub *, size_t, void **);
__attribute__((nothrow)) int flit_pub_commit(flit_pub *, size_t);
__attribute__((nothrow)) int flit_pub_abort(flit_pub *);
__attribute__((nothrow)) int flit_pub_flush(flit_pub *);
}

namespace flit {

/* ---- errors ---------------------------------------------------------------- */

class error : public std::system_error {
public:
	/* err: positive errno; call: the C function that failed.  The text of
	 * flit_errmsg() is captured now. */
	error(int err, const char *call)
		: std::system_error(err, std::system_category(), call),
		  errmsg_(flit_errmsg()),
		  what_(errmsg_.empty() ? std::string(call) + ": " + std::strerror(err)
				       : errmsg_) {}

	/* flit_errmsg() at the time of the failure ("" if flit left none) */
	const std::string &errmsg() const noexcept { return errmsg_; }
	/* errmsg(), which already says what failed, where and why (with the
	 * errno's text); "<call>: <strerror>" when flit left no text */
	const char *what() const noexcept override { return what_.c_str(); }

private:
	std::string errmsg_;
	std::string what_;
};

namespace detail {
/* a constructor returned NULL: errno says why */
[[noreturn]] inline void throw_errno(const char *call)
{
	int e = errno ? errno : EINVAL;
	throw error(e, call);
}
/* a call returned -errno */
[[noreturn]] inline void throw_rc(int rc, const char *call)
{
	throw error(-rc, call);
}
/* FLIT_OPTS() for C++ (that macro is C: a statement expression around a
 * compound literal): zeroed, padding included, with sz filled in */
template <class T>
T make_opts() noexcept
{
	T o;
	std::memset(static_cast<void *>(&o), 0, sizeof(o));
	o.sz = sizeof(o);
	return o;
}
/* NULL for an empty string: the C API's "not given" */
inline const char *opt_cstr(const std::string &s) noexcept
{
	return s.empty() ? nullptr : s.c_str();
}
} // namespace detail

/* ---- hot-path outcomes ------------------------------------------------------- */

enum class status : int {
	ok = FLIT_OK,
	back_pressured = FLIT_BACK_PRESSURED, /* nothing sent: poll your work, retry */
	not_connected = FLIT_NOT_CONNECTED,   /* nothing sent: retry later or drop */
};

/* The int a hot-path C call returned: 0, a positive status, or -errno. */
class [[nodiscard]] result {
public:
	constexpr result() noexcept = default;
	constexpr explicit result(int rc) noexcept : rc_(rc) {}

	/* taken (sent, claimed, committed...) */
	constexpr bool ok() const noexcept { return rc_ == 0; }
	constexpr explicit operator bool() const noexcept { return rc_ == 0; }
	/* not taken, not an error: status() says what to do */
	constexpr bool is_status() const noexcept { return rc_ > 0; }
	/* an error: errc() is the errno */
	constexpr bool failed() const noexcept { return rc_ < 0; }

	constexpr flit::status status() const noexcept
	{
		return rc_ > 0 ? static_cast<flit::status>(rc_) : flit::status::ok;
	}
	constexpr int errc() const noexcept { return rc_ < 0 ? -rc_ : 0; }
	std::error_code error_code() const noexcept
	{
		return std::error_code(errc(), std::system_category());
	}
	/* the C return value */
	constexpr int value() const noexcept { return rc_; }
	/* "ok", "back-pressured", "Message too long"...: flit_strstatus() */
	const char *str() const noexcept { return flit_strstatus(rc_); }

	constexpr bool operator==(flit::status s) const noexcept
	{
		return rc_ == static_cast<int>(s);
	}

private:
	int rc_ = 0;
};

/* ---- logging ----------------------------------------------------------------- */

enum class log_level : int {
	error = FLIT_LOG_ERROR,
	warn = FLIT_LOG_WARN,
	info = FLIT_LOG_INFO,
	debug = FLIT_LOG_DEBUG,
};

/* The process-wide print callback of flit_set_print() (nullptr: silence).
 * A plain function pointer: it is process-wide, called from any thread, with
 * a printf format and its va_list, so it cannot own state safely.  Returns
 * the previous one. */
inline flit_print_fn set_print(flit_print_fn fn) noexcept
{
	return flit_set_print(fn);
}

/* flit_errmsg() of the calling thread */
inline std::string_view errmsg() noexcept { return flit_errmsg(); }

/* ---- messages ---------------------------------------------------------------- */

enum class msg_kind : int {
	data = FLIT_MSG_DATA,
	bos = FLIT_MSG_BOS,   /* a source of the topic was found */
	eos = FLIT_MSG_EOS,   /* it ended (source_died(): its process died) */
	loss = FLIT_MSG_LOSS, /* seq() .. seq() + lost() - 1 cannot be delivered */
};

/* A message or event as seen by a subscriber callable: one pointer to the C
 * view, passed by value.  It and the memory it points to are valid only
 * during the callback (copy the bytes out to keep them). */
class message {
public:
	explicit message(const flit_msg &m) noexcept : m_(&m) {}

	msg_kind kind() const noexcept { return static_cast<msg_kind>(m_->kind); }
	bool is_data() const noexcept { return m_->kind == FLIT_MSG_DATA; }
	std::uint32_t flags() const noexcept { return m_->flags; } /* FLIT_MSGF_* */
	bool source_died() const noexcept { return m_->flags & FLIT_MSGF_SOURCE_DIED; }

	std::span<const std::byte> data() const noexcept
	{
		return { static_cast<const std::byte *>(m_->data), m_->len };
	}
	std::string_view text() const noexcept
	{
		return { static_cast<const char *>(m_->data), m_->len };
	}
	std::size_t size() const noexcept { return m_->len; }

	std::string_view topic() const noexcept { return m_->topic; }
	std::uint64_t seq() const noexcept { return m_->seq; }
	std::uint64_t lost() const noexcept { return m_->lost; }
	std::uint32_t session_id() const noexcept { return m_->session_id; }
	std::string_view source() const noexcept { return m_->source ? m_->source : ""; }
	/* 0 unless flags() has FLIT_MSGF_SEND_TS / FLIT_MSGF_RECV_TS */
	std::uint64_t send_ts_ns() const noexcept
	{
		return m_->flags & FLIT_MSGF_SEND_TS ? m_->send_ts_ns : 0;
	}
	std::uint64_t recv_ts_ns() const noexcept
	{
		return m_->flags & FLIT_MSGF_RECV_TS ? m_->recv_ts_ns : 0;
	}

	const flit_msg &c_msg() const noexcept { return *m_; }

private:
	const flit_msg *m_;
};

/* ---- context ----------------------------------------------------------------- */

/* Options: aggregates for designated initialisers,
 *	flit::context ctx({ .config = "context.transports = shm" });
 * every member with a default initialiser (so -Wextra stays quiet about the
 * ones left out); an empty string means "not given" (NULL in C). */
struct context_options {
	std::string config_file{}; /* empty: $FLIT_CONFIG, if set */
	std::string config{};      /* "scope.key = value" lines after the file */
};

using counters = flit_counters;

class context {
public:
	/* Throws flit::error (bad config: EINVAL, errmsg() names file and line). */
	context() : context(context_options{}) {}
	explicit context(const context_options &o)
	{
		auto co = detail::make_opts<flit_ctx_opts>();
		co.config_file = detail::opt_cstr(o.config_file);
		co.config = detail::opt_cstr(o.config);
		errno = 0;
		ctx_ = flit_ctx_new(&co);
		if (!ctx_)
			detail::throw_errno("flit_ctx_new");
	}

	context(context &&o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}
	context &operator=(context &&o) noexcept
	{
		if (this != &o) {
			flit_ctx_close(ctx_);
			ctx_ = std::exchange(o.ctx_, nullptr);
		}
		return *this;
	}
	context(const context &) = delete;
	context &operator=(const context &) = delete;
	~context() { flit_ctx_close(ctx_); }

	/* Hot path: flit_ctx_poll().  Messages delivered plus events, or -errno;
	 * never throws (a callable that throws is the caller's: see subscriber). */
	int poll(int limit = 0) noexcept { return flit_ctx_poll(ctx_, limit); }

	/* Throws flit::error. */
	flit::counters counters() const
	{
		flit_counters c{};
		c.sz = sizeof(c);
		if (int rc = flit_ctx_counters(ctx_, &c); rc < 0)
			detail::throw_rc(rc, "flit_ctx_counters");
		return c;
	}

	/* How `transport` is set up, in one line; nullopt if it is not open in
	 * this context (-ENOENT); other errors throw. */
	std::optional<std::string> describe(const std::string &transport) const
	{
		return fetch_text("flit_ctx_describe", [&](char *b, std::size_t n) {
			return flit_ctx_describe(ctx_, transport.c_str(), b, n);
		});
	}

	/* The counters file's path; nullopt when context.stats is off (-ENOENT);
	 * throws the error that kept the file from being made. */
	std::optional<std::string> stats_path() const
	{
		return fetch_text("flit_ctx_stats_path", [&](char *b, std::size_t n) {
			return flit_ctx_stats_path(ctx_, b, n);
		});
	}

	flit_ctx *get() const noexcept { return ctx_; }
	explicit operator bool() const noexcept { return ctx_ != nullptr; }

private:
	template <class Fn>
	static std::optional<std::string> fetch_text(const char *call, Fn fn)
	{
		std::string s(128, '\0');
		int n = fn(s.data(), s.size() + 1);
		if (n >= 0 && static_cast<std::size_t>(n) > s.size()) {
			s.assign(static_cast<std::size_t>(n), '\0');
			n = fn(s.data(), s.size() + 1);
		}
		if (n == -ENOENT)
			return std::nullopt;
		if (n < 0)
			detail::throw_rc(n, call);
		s.resize(static_cast<std::size_t>(n));
		return s;
	}

	flit_ctx *ctx_ = nullptr;
};

/* ---- publisher --------------------------------------------------------------- */

struct publisher_options {
	std::string transport{}; /* empty: source.transport from the config */
	std::string config{};    /* "key = value" lines in source scope */
};

/* A contiguous range of trivially copyable elements that is not text: sent
 * as its bytes.  Text (anything convertible to std::string_view, including
 * a string literal, whose array would carry the NUL) goes to the
 * string_view overload instead. */
template <class R>
concept byte_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
		     std::is_trivially_copyable_v<std::ranges::range_value_t<R>> &&
		     !std::is_convertible_v<const R &, std::string_view>;

/* A claimed buffer: `buf` to write, `rc` whether the claim was granted.
 * auto [buf, rc] = pub.claim(n); */
struct claimed {
	std::span<std::byte> buf;
	flit::result rc;
	explicit operator bool() const noexcept { return rc.ok(); }
};

class publisher {
public:
	/* Throws flit::error (EADDRINUSE: another live writer of the topic
	 * where the transport allows one). */
	publisher(context &ctx, const std::string &topic, const publisher_options &o = {})
	{
		auto po = detail::make_opts<flit_pub_opts>();
		po.transport = detail::opt_cstr(o.transport);
		po.config = detail::opt_cstr(o.config);
		errno = 0;
		pub_ = flit_pub_new(ctx.get(), topic.c_str(), &po);
		if (!pub_)
			detail::throw_errno("flit_pub_new");
	}

	publisher(publisher &&o) noexcept : pub_(std::exchange(o.pub_, nullptr)) {}
	publisher &operator=(publisher &&o) noexcept
	{
		if (this != &o) {
			flit_pub_close(pub_);
			pub_ = std::exchange(o.pub_, nullptr);
		}
		return *this;
	}
	publisher(const publisher &) = delete;
	publisher &operator=(const publisher &) = delete;
	/* flush, tell receivers the source ended (EOS), free */
	~publisher() { flit_pub_close(pub_); }

	/* ---- hot path: noexcept, C return convention in a flit::result ---- */

	/* Copy and send one message: ok, status (nothing sent), or -errno
	 * (-EMSGSIZE: larger than max_msg()). */
	result send(std::span<const std::byte> msg) noexcept
	{
		return result(flit_pub_send(pub_, msg.data(), msg.size()));
	}
	result send(const void *data, std::size_t len) noexcept
	{
		return result(flit_pub_send(pub_, data, len));
	}
	/* the characters, without a terminating NUL */
	result send(std::string_view text) noexcept
	{
		return result(flit_pub_send(pub_, text.data(), text.size()));
	}
	/* the bytes of a contiguous container: std::vector<T>, std::array... */
	template <byte_range R>
	result send(const R &r) noexcept
	{
		return result(flit_pub_send(pub_, std::ranges::data(r),
					    std::ranges::size(r) *
						    sizeof(std::ranges::range_value_t<R>)));
	}

	/* Zero-copy: reserve `len` bytes, write them, then commit (possibly
	 * fewer) or abort.  One claim open per publisher.  On a status or an
	 * error, buf is empty. */
	claimed claim(std::size_t len) noexcept
	{
		void *p;        /* not zeroed: set when rc == 0, the only read */
		int rc = flit_pub_claim(pub_, len, &p);
		if (rc != 0)
			return { {}, result(rc) };
		return { { static_cast<std::byte *>(p), len }, result(0) };
	}
	result commit(std::size_t len) noexcept { return result(flit_pub_commit(pub_, len)); }
	result abort() noexcept { return result(flit_pub_abort(pub_)); }
	/* make everything sent visible (closes an open batch) */
	result flush() noexcept { return result(flit_pub_flush(pub_)); }

	/* ---- queries ---- */
	std::size_t max_msg() const noexcept { return flit_pub_max_msg(pub_); }
	std::uint64_t next_seq() const noexcept { return flit_pub_next_seq(pub_); }
	std::string_view topic() const noexcept { return flit_pub_topic(pub_); }
	/* receivers attached where the transport knows (shm), or -EOPNOTSUPP */
	int receivers() const noexcept { return flit_pub_receivers(pub_); }

	flit_pub *get() const noexcept { return pub_; }
	explicit operator bool() const noexcept { return pub_ != nullptr; }

private:
	flit_pub *pub_ = nullptr;
};

/* ---- subscriber -------------------------------------------------------------- */

struct subscriber_options {
	/* the topic is an fnmatch(3) pattern ('*', '?', [set]), also matching
	 * topics created later */
	bool pattern = false;
	std::string config{}; /* "key = value" lines in receiver scope */
};

/* What a subscriber calls for each message and event: fn(flit::message). */
template <class F>
concept message_handler = std::invocable<std::decay_t<F> &, message>;

namespace detail {
/* A subscriber's callable, in a heap block whose address is the C
 * callback's arg: stable while the subscriber object moves. */
template <class F>
struct sub_holder {
	explicit sub_holder(F &&f) : fn(std::move(f)) {}
	explicit sub_holder(const F &f) : fn(f) {}
	F fn;
};

/* The C callback for callables of type F: the call is direct and can be
 * inlined; noexcept, as an exception cannot cross flit's C frames. */
template <class F>
void sub_trampoline(flit_sub *, const flit_msg *m, void *arg) noexcept
{
	static_cast<sub_holder<F> *>(arg)->fn(message(*m));
}

template <class F>
void sub_destroy(void *p) noexcept
{
	delete static_cast<sub_holder<F> *>(p);
}
} // namespace detail

class subscriber {
public:
	/* Subscribe to `topic` (a pattern with o.pattern); `fn(flit::message)`
	 * runs from ctx.poll() on the polling thread.  Throws flit::error (a
	 * transport that cannot start: errmsg() names it and why).
	 *
	 * fn must not let an exception out: it cannot cross flit's C frames
	 * (the poll would be left half done), so the trampoline is noexcept and
	 * an escaping exception calls std::terminate.  Catch inside. */
	template <message_handler F>
	subscriber(context &ctx, const std::string &topic, F &&fn,
		   const subscriber_options &o = {})
		: state_(new detail::sub_holder<std::decay_t<F>>(std::forward<F>(fn)),
			 &detail::sub_destroy<std::decay_t<F>>)
	{
		auto so = detail::make_opts<flit_sub_opts>();
		so.on_msg = &detail::sub_trampoline<std::decay_t<F>>;
		so.arg = state_.get();      /* the heap block: stable across moves */
		so.pattern = o.pattern;
		so.config = detail::opt_cstr(o.config);
		errno = 0;
		sub_ = flit_sub_new(ctx.get(), topic.c_str(), &so);
		if (!sub_)
			detail::throw_errno("flit_sub_new");
	}

	subscriber(subscriber &&o) noexcept
		: state_(std::move(o.state_)), sub_(std::exchange(o.sub_, nullptr)) {}
	subscriber &operator=(subscriber &&o) noexcept
	{
		if (this != &o) {
			close();
			state_ = std::move(o.state_);
			sub_ = std::exchange(o.sub_, nullptr);
		}
		return *this;
	}
	subscriber(const subscriber &) = delete;
	subscriber &operator=(const subscriber &) = delete;
	~subscriber() { close(); }

	/* Stop delivery now (the destructor does it too).  Not from a callback
	 * of the same context. */
	void close() noexcept
	{
		flit_sub_close(std::exchange(sub_, nullptr));
		state_.reset();     /* after: no callback can run any more */
	}

	flit_sub *get() const noexcept { return sub_; }
	explicit operator bool() const noexcept { return sub_ != nullptr; }

private:
	std::unique_ptr<void, void (*)(void *)> state_{ nullptr, nullptr };
	flit_sub *sub_ = nullptr;
};

} // namespace flit

#endif /* C++20 */
#endif /* FLIT_FLIT_HPP */
