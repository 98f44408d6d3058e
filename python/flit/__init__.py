# SPDX-License-Identifier: BSD-2-Clause
"""flit: low-latency topic publish/subscribe, from Python.

A thin binding of the C library libflit.so.0 through ctypes: the standard
library only, so installing it needs no compiler and no other package
(``pip install ./python`` works offline).  Every message goes through the C
API (flit.h); nothing of the wire protocol is reimplemented here.

    import flit
    with flit.Context(transports="shm") as ctx:
        sub = ctx.subscribe("prices.*")              # no callback: a queue
        pub = ctx.publisher("prices.eur")
        pub.wait_receivers(1)
        pub.send(b"1.0842")
        for msg in sub.iter(timeout=1.0):
            if msg.kind == flit.DATA:
                print(msg.topic, msg.seq, msg.payload)
                break

Conventions, as in C:
  * A context belongs to the thread that polls it (one context per thread;
    contexts find each other).  Callbacks run inside Context.poll() (and
    the waits built on it: Subscriber.receive/iter, Publisher.wait_receivers,
    send(timeout=...)), on that thread.
  * Failures raise FlitError, an OSError whose errno is the C error and whose
    text is flit_errmsg(): what failed, where, why.
  * A send that is refused without an error returns a Status
    (BACK_PRESSURED, NOT_CONNECTED): nothing was sent; retry.
  * An exception raised by a callback never crosses the C library: it is
    kept and raised again by the poll that ran the callback, once the C
    call has returned.
  * Publishers and subscribers live until closed or until their context
    closes (a subscription whose object was dropped keeps delivering to its
    callback, as in C).
"""
import atexit
import collections
import ctypes
import enum
import errno as _errno
import logging
import os
import sys
import time
import types
import weakref

from . import _lib

__all__ = [
    "Context", "Publisher", "Subscriber", "Message", "FlitError",
    "MsgKind", "MsgFlag", "Status", "LogLevel",
    "DATA", "BOS", "EOS", "LOSS", "OK", "BACK_PRESSURED", "NOT_CONNECTED",
    "TOPIC_MAX", "set_print", "log_to_logging", "errmsg", "library_path",
]

__version__ = "0.1.0"

try:
    _C, library_path = _lib.load()
except OSError as _e:
    raise ImportError(str(_e)) from None

TOPIC_MAX = 255


class MsgKind(enum.IntEnum):
    """What a delivered Message is (enum flit_msg_kind)."""
    DATA = 0
    BOS = 1     # a source of the topic was found: beginning of session
    EOS = 2     # the source ended (closed, or died: MsgFlag.SOURCE_DIED)
    LOSS = 3    # messages seq .. seq + lost - 1 of that source are lost


DATA, BOS, EOS, LOSS = MsgKind.DATA, MsgKind.BOS, MsgKind.EOS, MsgKind.LOSS


class MsgFlag(enum.IntFlag):
    """FLIT_MSGF_* bits of Message.flags."""
    SOURCE_DIED = 1 << 0
    SEND_TS = 1 << 1
    RECV_TS = 1 << 2
    RECV_TS_KERNEL = 1 << 3
    RECV_TS_HW = 1 << 4
    RETX = 1 << 5
    LATE_JOIN = 1 << 6  # retained by the source, given to a receiver that joined late


class Status(enum.IntEnum):
    """Outcomes of a send that are not errors (enum flit_status)."""
    OK = 0
    BACK_PRESSURED = 1  # the slowest receiver has not made room: retry
    NOT_CONNECTED = 2   # no connected receiver and no buffer: retry or drop


OK, BACK_PRESSURED, NOT_CONNECTED = Status.OK, Status.BACK_PRESSURED, Status.NOT_CONNECTED


class LogLevel(enum.IntEnum):
    ERROR = 0
    WARN = 1
    INFO = 2
    DEBUG = 3


class FlitError(OSError):
    """A flit call failed.  ``errno`` is the C error (e.g. errno.EINVAL),
    ``strerror`` and ``errmsg`` the library's description (flit_errmsg():
    "what failed: where: why"), ``call`` the C function."""

    def __init__(self, err, message, call=None):
        super().__init__(err, message)
        self.errmsg = message
        self.call = call


def errmsg():
    """The calling thread's description of its most recent flit failure."""
    return _C.flit_errmsg().decode("utf-8", "replace")


def _fail(err, call, what=None):
    """FlitError for -errno `err` (or errno err) of C function `call`."""
    err = abs(err) or _errno.EIO
    msg = errmsg() or os.strerror(err)
    if what:
        msg = "%s: %s" % (what, msg)
    return FlitError(err, msg, call)


def _closed(what):
    return FlitError(_errno.EBADF, "%s is closed" % what)


def _enc(s, what="topic"):
    if isinstance(s, str):
        s = s.encode("utf-8", "surrogateescape")
    elif not isinstance(s, (bytes, bytearray)):
        raise TypeError("%s must be str or bytes, not %s" % (what, type(s).__name__))
    return bytes(s)


def _cfg_value(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


def _config_text(config):
    """Config lines from a str ("key = value" lines, as a file), a mapping
    {"key": value} or an iterable of "key=value" strings (as the tools' -C)."""
    if config is None:
        return None
    if isinstance(config, (str, bytes)):
        return config.decode() if isinstance(config, bytes) else config
    if hasattr(config, "items"):
        return "".join("%s = %s\n" % (k, _cfg_value(v)) for k, v in config.items())
    lines = []
    for line in config:
        if "\n" in line:
            raise ValueError("config line %r holds a newline: give one line each" % line)
        lines.append(line + "\n")
    return "".join(lines)


# ---- logging ----------------------------------------------------------------

_libc = ctypes.CDLL(None)
_vsnprintf = _libc.vsnprintf
_vsnprintf.restype = ctypes.c_int
_vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]
_print_state = {"fn": None}


def _unraisable(msg, obj):
    exc = sys.exc_info()
    try:
        sys.unraisablehook(types.SimpleNamespace(
            exc_type=exc[0], exc_value=exc[1], exc_traceback=exc[2],
            err_msg=msg, object=obj))
    except Exception:
        pass


def _print_tramp(level, fmt, ap):
    # Called by the library, possibly from one of its own threads: format
    # with the C library's vsnprintf (one call: a va_list is read once).
    fn = _print_state["fn"]
    if fn is None:
        return
    try:
        buf = ctypes.create_string_buffer(4096)
        _vsnprintf(buf, len(buf), fmt, ap)
        text = buf.value.decode("utf-8", "replace").rstrip("\n")
        try:
            lvl = LogLevel(level)
        except ValueError:
            lvl = level
        fn(lvl, text)
    except BaseException:
        # never into C: report like an exception in __del__
        _unraisable("Exception ignored in the flit print callback", fn)


_print_cfn = _lib.PRINT_FN(_print_tramp)    # lives as long as the module


def set_print(fn):
    """Route the library's messages to fn(level: LogLevel, text: str), or
    silence them (None, the default).  Process-wide, like flit_set_print();
    fn may be called from any thread and must not raise (an exception is
    reported through sys.unraisablehook).  Which levels come is set by the
    contexts' context.log_level (default warn).  Returns the previous fn."""
    prev = _print_state["fn"]
    _print_state["fn"] = fn
    _C.flit_set_print(_print_cfn if fn is not None else _lib.PRINT_FN())
    return prev


# No call into Python once the interpreter is going away (a context left
# open may still log from its own thread).
atexit.register(lambda: _C.flit_set_print(_lib.PRINT_FN()))

_LEVELS = {LogLevel.ERROR: logging.ERROR, LogLevel.WARN: logging.WARNING,
           LogLevel.INFO: logging.INFO, LogLevel.DEBUG: logging.DEBUG}


def log_to_logging(logger="flit"):
    """Send the library's messages to a logging.Logger (or its name):
    error, warn, info, debug map to ERROR, WARNING, INFO, DEBUG.  Returns
    the logger.  For debug messages also set context.log_level = debug."""
    if not isinstance(logger, logging.Logger):
        logger = logging.getLogger(logger)

    def emit(level, text):
        logger.log(_LEVELS.get(level, logging.INFO), "%s", text)
    set_print(emit)
    return logger


# ---- messages -----------------------------------------------------------------

_MessageBase = collections.namedtuple(
    "_MessageBase", ("kind", "flags", "topic", "payload", "seq", "lost",
                     "session_id", "source", "send_ts_ns", "recv_ts_ns"))


class Message(_MessageBase):
    """One message or event as delivered to a subscriber (a named tuple).

    kind        MsgKind: DATA, BOS, EOS or LOSS
    topic       str
    payload     bytes, a copy (DATA; b"" for events); with
                subscribe(..., copy=False) a read-only memoryview into the
                transport's buffer, valid only during the callback and
                released when it returns
    seq         the source's sequence number (LOSS: the first one lost)
    lost        LOSS: how many messages from seq are lost
    session_id  the source's session id
    source      str naming the source, e.g. "shm:pid=123,session=1a2b3c4d"
    flags       MsgFlag bits (an int)
    send_ts_ns, recv_ts_ns  CLOCK_REALTIME, valid when flags has SEND_TS / RECV_TS
    """
    __slots__ = ()

    @property
    def source_died(self):
        return bool(self.flags & MsgFlag.SOURCE_DIED)

    def __repr__(self):
        if self.kind == DATA:
            p = self.payload
            return "<flit.Message DATA %s #%d %d bytes %r from %s>" % (
                self.topic, self.seq, len(p), bytes(p[:32]), self.source)
        extra = " lost=%d" % self.lost if self.kind == LOSS else ""
        if self.source_died:
            extra += " source-died"
        return "<flit.Message %s %s #%d%s from %s>" % (
            MsgKind(self.kind).name, self.topic, self.seq, extra, self.source)


_KINDS = tuple(MsgKind)
_Msg_from = _lib.Msg.from_address
# A window over memory, for copying a payload out: from_address() reads
# nothing and the slice copies len bytes, cheaper than ctypes.string_at().
_window = (ctypes.c_char * (1 << 40)).from_address
_new_message = tuple.__new__
_strings = {}       # decoded topics and sources by their bytes


def _str(b):
    s = _strings.get(b)
    if s is None:
        if len(_strings) > 4096:
            _strings.clear()
        s = _strings[b] = b.decode("utf-8", "surrogateescape")
    return s


# id -> weak reference to the Subscriber: the one C trampoline's registry.
# Weak, so that a context and its subscribers that the program dropped
# without closing are still collected (their finalizers close them).
_subs = {}
_next_sub_id = [1]


def _on_msg(subp, msgp, arg):
    # The C callback of every subscription: as little work as can be, it
    # is the per-message cost.  Nothing may escape into C: an exception is
    # kept on the context and raised by its poll.
    ref = _subs.get(arg)
    sub = ref() if ref is not None else None
    if sub is None or sub._h is None:
        return
    try:
        m = _Msg_from(msgp)
        kind = m.kind
        view = None
        if kind == 0:
            n = m.len
            if not n:
                payload = b""
            elif sub._copy:
                payload = _window(m.data)[:n]
            else:
                view = payload = memoryview(_window(m.data)).cast("B")[:n].toreadonly()
            kind = DATA
        else:
            if not sub._events and kind != 3:
                return
            payload = b""
            kind = _KINDS[kind] if kind < 4 else kind
        src = m.source
        # an exact subscription's topic is its own: no string to read
        msg = _new_message(Message, (kind, m.flags, _str(m.topic) if sub.pattern else sub.topic,
                                     payload, m.seq, m.lost, m.session_id,
                                     _str(src) if src else "", m.send_ts_ns, m.recv_ts_ns))
        cb = sub._callback
        if cb is None:
            sub._queue.append(msg)
        elif view is None:
            cb(msg)
        else:
            try:
                cb(msg)
            finally:
                view.release()
    except BaseException as e:
        ctx = sub._ctx
        if ctx._exc is None:
            ctx._exc = e


_on_msg_c = _lib.MSG_FN(_on_msg)
_poll = _C.flit_ctx_poll
_send = _C.flit_pub_send   # one trampoline for all, never freed


# ---- context --------------------------------------------------------------------

class _Closable:
    """What Context, Publisher and Subscriber share: a context manager, the
    `closed` property and a close when garbage-collected (their close() is
    idempotent; _del_ok() says when the collector may call it)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return self._h is None

    def _del_ok(self):
        return True

    def __del__(self):
        try:
            if self._del_ok():
                self.close()
        except Exception:
            pass


class Context(_Closable):
    """A flit context (flit_ctx): owns the transports; polled by one thread.

    Context(config=None, *, transports=None, config_file=None, idle_sleep=100e-6)

    config       settings as a str of "scope.key = value" lines (the syntax of
                 a config file), a dict {"context.domain": "lab", ...} or a
                 list of "key = value" strings (like the tools' -C)
    transports   shorthand for context.transports: "shm", "udp", "shm,udp"
                 or a list of names (wins over the same key in config)
    config_file  a config file; None: the file named by $FLIT_CONFIG
    idle_sleep   the waits built on poll() (receive, iter, wait_receivers,
                 send with a timeout) sleep this long after an empty poll;
                 0 busy-polls

    Raises FlitError (EINVAL with the file/line or key for bad config).
    """

    def __init__(self, config=None, *, transports=None, config_file=None,
                 idle_sleep=100e-6):
        self._h = None
        self._children = {}     # id(obj) -> Publisher/Subscriber, open ones
        self._exc = None
        self._polling = False
        self._deferred = []
        self.idle_sleep = idle_sleep
        text = _config_text(config) or ""
        if transports is not None:
            if not isinstance(transports, str):
                transports = ",".join(transports)
            text += "context.transports = %s\n" % transports
        # keep the bytes alive for the duration of the call
        self._cfg = text.encode() if text else None
        self._cfg_file = os.fsencode(config_file) if config_file is not None else None
        opts = _lib.CtxOpts(ctypes.sizeof(_lib.CtxOpts), self._cfg_file, self._cfg)
        h = _C.flit_ctx_new(ctypes.byref(opts))
        if not h:
            raise _fail(ctypes.get_errno(), "flit_ctx_new")
        self._h = h
        self._hv = ctypes.c_void_p(h)   # passed as is: no conversion per call

    # -- life cycle
    def close(self):
        """Close every publisher and subscriber of the context, then the
        context.  Idempotent.  Not from a callback of this context."""
        if self._h is None:
            return
        if self._polling:
            raise FlitError(_errno.EBUSY, "Context.close() called from a callback of the same context")
        for obj in list(self._children.values()):
            if isinstance(obj, Subscriber):
                obj.close()
        for obj in list(self._children.values()):
            obj.close()
        h, self._h = self._h, None
        _C.flit_ctx_close(h)

    def _del_ok(self):
        return self._h is not None and not self._polling

    def _handle(self):
        if self._h is None:
            raise _closed("context")
        return self._h

    # -- polling
    def poll(self, limit=0):
        """Poll every transport once, running the subscribers' callbacks
        (or filling their queues) on this thread.  `limit` (<= 0: the
        library's default) bounds the messages, whole frames at a time.
        Returns how many messages and events were delivered.  Raises
        FlitError, or the first exception a callback raised."""
        if self._h is None:
            raise _closed("context")
        if self._polling:
            raise FlitError(_errno.EBUSY, "Context.poll() called from a callback of the same context")
        self._polling = True
        try:
            n = _poll(self._hv, limit)
        finally:
            self._polling = False
            if self._deferred:
                self._close_deferred()
        if self._exc is not None:
            e, self._exc = self._exc, None
            raise e
        if n < 0:
            raise _fail(n, "flit_ctx_poll")
        return n

    def _close_deferred(self):
        d, self._deferred = self._deferred, []
        for sub in d:
            sub._close_now()

    def _idle(self):
        if self.idle_sleep:
            time.sleep(self.idle_sleep)

    def poll_for(self, seconds):
        """Poll for `seconds`; returns the number of deliveries."""
        end = time.monotonic() + seconds
        total = 0
        while True:
            n = self.poll()
            total += n
            if time.monotonic() >= end:
                return total
            if not n:
                self._idle()

    def wait(self, predicate, timeout=None):
        """Poll until predicate() is true (checked before each poll) or
        `timeout` seconds pass (None: no limit).  Returns predicate()'s
        last value."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            v = predicate()
            if v or (end is not None and time.monotonic() >= end):
                return v
            if not self.poll():
                self._idle()

    # -- introspection
    def counters(self):
        """The context's counters (struct flit_counters) as a dict."""
        c = _lib.Counters()
        c.sz = ctypes.sizeof(c)
        rc = _C.flit_ctx_counters(self._handle(), ctypes.byref(c))
        if rc < 0:
            raise _fail(rc, "flit_ctx_counters")
        return {name: getattr(c, name) for name in _lib.COUNTER_FIELDS}

    def describe(self, transport):
        """How `transport` is set up here, in one line (flit_ctx_describe);
        FlitError ENOENT if it is not open in this context."""
        return self._string(_C.flit_ctx_describe, "flit_ctx_describe", _enc(transport, "transport"))

    @property
    def stats_path(self):
        """The counters file flit-stat reads, or None when context.stats is off."""
        try:
            return self._string(_C.flit_ctx_stats_path, "flit_ctx_stats_path")
        except FlitError as e:
            if e.errno == _errno.ENOENT:
                return None
            raise

    def _string(self, fn, name, *args):
        size = 256
        while True:
            buf = ctypes.create_string_buffer(size)
            n = fn(self._handle(), *args, buf, size)
            if n < 0:
                raise _fail(n, name)
            if n < size:
                return buf.value.decode("utf-8", "replace")
            size = n + 1

    # -- objects
    def publisher(self, topic, *, transport=None, config=None):
        """A source of `topic` (Publisher).  transport: "shm", "udp", ...
        (None: source.transport from the config); config: source-scope
        settings ("shm.mode": "overwrite", "batch": True), as for Context."""
        return Publisher(self, topic, transport=transport, config=config)

    def subscribe(self, topic, callback=None, *, pattern=None, config=None,
                  events=True, copy=True):
        """Subscribe to `topic`, or to a pattern ('*', '?', [set] as in
        fnmatch(3): "md.*"; pattern=None guesses from those characters).
        callback(msg) runs inside poll(); without one, messages are queued
        for Subscriber.receive() and iteration.  events=False leaves out BOS
        and EOS (LOSS still comes).  copy=False (callback only): payload is
        a memoryview valid during the callback.  config: receiver-scope
        settings."""
        return Subscriber(self, topic, callback, pattern=pattern, config=config,
                          events=events, copy=copy)

    def __repr__(self):
        return "<flit.Context %s>" % ("closed" if self._h is None else "open")


# ---- publishing ---------------------------------------------------------------------

class Publisher(_Closable):
    """A source of one topic (flit_pub).  Make it with Context.publisher()."""

    def __init__(self, ctx, topic, *, transport=None, config=None):
        self._h = None
        self._ctx = ctx
        self._claim = None
        self._claim_len = 0
        t = _enc(topic)
        text = _config_text(config)
        self._keep = (_enc(transport, "transport") if transport is not None else None,
                      text.encode() if text else None)
        opts = _lib.PubOpts(ctypes.sizeof(_lib.PubOpts), *self._keep)
        h = _C.flit_pub_new(ctx._handle(), t, ctypes.byref(opts))
        if not h:
            raise _fail(ctypes.get_errno(), "flit_pub_new")
        self._h = h
        self._hv = ctypes.c_void_p(h)
        self.topic = _C.flit_pub_topic(h).decode("utf-8", "surrogateescape")
        self._max = _C.flit_pub_max_msg(h)
        ctx._children[id(self)] = self

    def close(self):
        """Flush, tell the receivers the source ended (EOS), free.  Idempotent."""
        if self._h is None:
            return
        self._drop_claim()
        h, self._h = self._h, None
        self._ctx._children.pop(id(self), None)
        _C.flit_pub_close(h)


    def _handle(self):
        if self._h is None:
            raise _closed("publisher '%s'" % self.topic)
        return self._h

    @property
    def max_msg(self):
        """Largest message the source accepts, in bytes."""
        self._handle()
        return self._max

    @property
    def next_seq(self):
        """Sequence number the next message will carry."""
        return _C.flit_pub_next_seq(self._handle())

    @property
    def receivers(self):
        """Receivers attached to this source, where the transport knows
        (shm: live reader slots); None where it does not."""
        n = _C.flit_pub_receivers(self._handle())
        if n == -_errno.EOPNOTSUPP:
            return None
        if n < 0:
            raise _fail(n, "flit_pub_receivers")
        return n

    def wait_receivers(self, n=1, timeout=5.0):
        """Poll the context until the source has n receivers or `timeout`
        seconds pass.  Returns True if it has them."""
        return bool(self._ctx.wait(lambda: (self.receivers or 0) >= n, timeout))

    def send(self, data, timeout=None):
        """Copy and send one message: bytes, bytearray, memoryview or any
        contiguous buffer (str is sent as UTF-8).  Returns Status.OK (0) or,
        when nothing was sent, Status.BACK_PRESSURED / NOT_CONNECTED.  With
        a timeout (seconds) it retries those, polling the context, for at
        most that long.  Raises FlitError: EMSGSIZE above max_msg, EBADF
        once closed."""
        h = self._h
        if h is None:
            raise _closed("publisher '%s'" % self.topic)
        if type(data) is bytes:
            buf = data
            n = len(data)
        else:
            buf, n = _as_buffer(data)
        rc = _send(self._hv, buf, n)
        if rc == 0:
            return OK
        if rc < 0:
            raise _fail(rc, "flit_pub_send", "publisher '%s': send of %d bytes" % (self.topic, n))
        if timeout is None:
            return Status(rc)
        end = time.monotonic() + timeout
        while True:
            if not self._ctx.poll():
                self._ctx._idle()
            if self._h is None:
                raise _closed("publisher '%s'" % self.topic)
            rc = _C.flit_pub_send(self._hv, buf, n)
            if rc == 0:
                return OK
            if rc < 0:
                raise _fail(rc, "flit_pub_send", "publisher '%s': send of %d bytes" % (self.topic, n))
            if time.monotonic() >= end:
                return Status(rc)

    def claim(self, n):
        """Zero-copy send: reserve n bytes in the transport's buffer and
        return a writable memoryview of them (None when back-pressured or
        not connected: nothing claimed, retry).  Fill it, then commit() or
        abort(); the view is released then.  One claim at a time.  Raises
        FlitError (EMSGSIZE above max_msg)."""
        h = self._handle()
        if self._claim is not None:
            raise FlitError(_errno.EBUSY, "publisher '%s': a claim is already open" % self.topic)
        p = ctypes.c_void_p()
        rc = _C.flit_pub_claim(h, n, ctypes.byref(p))
        if rc < 0:
            raise _fail(rc, "flit_pub_claim", "publisher '%s': claim of %d bytes" % (self.topic, n))
        if rc > 0:
            return None
        self._claim = memoryview((ctypes.c_char * n).from_address(p.value)).cast("B")
        self._claim_len = n
        return self._claim

    def _drop_claim(self):
        v, self._claim = self._claim, None
        if v is not None:
            try:
                v.release()
            except BufferError:
                pass        # the caller holds an export of it

    def commit(self, n=None):
        """Send the claimed message, its first n bytes (default: all claimed)."""
        h = self._handle()
        if self._claim is None:
            raise FlitError(_errno.EINVAL, "publisher '%s': commit without a claim" % self.topic)
        if n is None:
            n = self._claim_len
        elif n > self._claim_len or n < 0:
            raise ValueError("commit of %d bytes: %d were claimed" % (n, self._claim_len))
        self._drop_claim()
        rc = _C.flit_pub_commit(h, n)
        if rc < 0:
            raise _fail(rc, "flit_pub_commit")
        return Status(rc)

    def abort(self):
        """Give the claimed buffer back unsent."""
        h = self._handle()
        if self._claim is None:
            raise FlitError(_errno.EINVAL, "publisher '%s': abort without a claim" % self.topic)
        self._drop_claim()
        rc = _C.flit_pub_abort(h)
        if rc < 0:
            raise _fail(rc, "flit_pub_abort")

    def flush(self):
        """Make every message sent so far visible (closes an open batch).
        Returns a Status."""
        rc = _C.flit_pub_flush(self._handle())
        if rc < 0:
            raise _fail(rc, "flit_pub_flush")
        return Status(rc)

    def __repr__(self):
        return "<flit.Publisher %s%s>" % (self.topic, " closed" if self._h is None else "")


def _as_buffer(data):
    """(pointer argument, length) for a bytes-like object, without a copy
    where ctypes can take its address (writable buffers)."""
    if isinstance(data, str):
        b = data.encode("utf-8")
        return b, len(b)
    mv = memoryview(data)
    if not mv.c_contiguous:
        raise ValueError("send: the buffer is not contiguous")
    n = mv.nbytes
    if mv.readonly:
        b = mv.tobytes()
        return b, n
    if n == 0:
        return None, 0
    return (ctypes.c_char * n).from_buffer(mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv), n


# ---- subscribing -----------------------------------------------------------------------

class Subscriber(_Closable):
    """A subscription (flit_sub).  Make it with Context.subscribe().

    Without a callback, messages are queued: receive(timeout) returns the
    next one, ``for msg in sub`` (or sub.iter(timeout)) yields them, polling
    the context as needed.  The queue has no bound: consume it.
    """

    def __init__(self, ctx, topic, callback=None, *, pattern=None, config=None,
                 events=True, copy=True):
        self._h = None
        self._ctx = ctx
        if not copy and callback is None:
            raise ValueError("copy=False needs a callback: a queued message outlives the view")
        if callback is not None and not callable(callback):
            raise TypeError("callback must be callable")
        self._callback = callback
        self._events = events
        self._copy = copy
        self._queue = collections.deque()
        t = _enc(topic)
        if pattern is None:
            pattern = any(c in t for c in b"*?[")
        self.pattern = bool(pattern)
        self.topic = t.decode("utf-8", "surrogateescape")
        self._id = _next_sub_id[0]
        _next_sub_id[0] += 1
        text = _config_text(config)
        self._cfg = text.encode() if text else None
        opts = _lib.SubOpts(ctypes.sizeof(_lib.SubOpts), _on_msg_c, self._id,
                            self.pattern, self._cfg)
        _subs[self._id] = weakref.ref(self)
        self._h = -1        # registered: deliveries during flit_sub_new are kept
        h = _C.flit_sub_new(ctx._handle(), t, ctypes.byref(opts))
        if not h:
            self._h = None
            _subs.pop(self._id, None)
            raise _fail(ctypes.get_errno(), "flit_sub_new")
        self._h = h
        ctx._children[id(self)] = self

    def close(self):
        """Stop delivery and free.  From a callback of the same context it
        takes effect at once for delivery and frees when the poll returns.
        Queued messages stay readable.  Idempotent."""
        if self._h is None:
            return
        if self._ctx._polling:
            h, self._h = self._h, None
            self._dead_h = h
            self._ctx._children.pop(id(self), None)
            self._ctx._deferred.append(self)
            return
        h, self._h = self._h, None
        self._dead_h = h
        self._close_now()

    def _close_now(self):
        h, self._dead_h = getattr(self, "_dead_h", None), None
        self._ctx._children.pop(id(self), None)
        if h:
            _C.flit_sub_close(h)
        _subs.pop(self._id, None)

    def _del_ok(self):
        return not self._ctx._polling

    @property
    def pending(self):
        """Messages queued and not yet read."""
        return len(self._queue)

    def receive(self, timeout=None):
        """The next queued message, polling the context until one comes or
        `timeout` seconds pass (None: no limit; 0: poll once).  Returns a
        Message, or None on timeout.  Raises FlitError EBADF once closed
        and the queue is empty."""
        q = self._queue
        if q:
            return q.popleft()
        if self._callback is not None:
            raise FlitError(_errno.EINVAL, "subscriber '%s' has a callback: nothing is queued" % self.topic)
        ctx = self._ctx
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._h is None:
                raise _closed("subscriber '%s'" % self.topic)
            n = ctx.poll()
            if q:
                return q.popleft()
            if end is not None and time.monotonic() >= end:
                return None
            if not n:
                ctx._idle()

    def iter(self, timeout=None):
        """Yield messages as they come; stop after `timeout` seconds without
        one (None: never; also stops once the subscriber is closed)."""
        while True:
            if self._h is None and not self._queue:
                return
            m = self.receive(timeout)
            if m is None:
                return
            yield m

    def __iter__(self):
        return self.iter()

    def __repr__(self):
        return "<flit.Subscriber %s%s%s>" % (self.topic, " (pattern)" if self.pattern else "",
                                             " closed" if self._h is None else "")
