# SPDX-License-Identifier: BSD-2-Clause
"""The Python API in one process over shm: pub/sub, patterns, events,
claim/commit, statuses, errors, counters, logging, callbacks' exceptions,
the iterator and its timeout."""
import array
import errno
import logging
import os
import time

import pytest

import flit


def data_of(sub, n, timeout=5.0):
    """The payloads of the next n DATA messages of a queued subscriber."""
    out = []
    for m in sub.iter(timeout=timeout):
        if m.kind == flit.DATA:
            out.append(m.payload)
            if len(out) == n:
                break
    return out


def test_library_is_the_one_asked_for():
    want = os.environ.get("FLIT_LIBRARY")
    if want:
        assert os.path.realpath(flit.library_path) == os.path.realpath(want)
    if os.environ.get("FLIT_EXPECT_INSTALLED"):
        assert "site-packages" in flit.__file__, flit.__file__


def test_pubsub_in_order_with_events(ctx, topic):
    sub = ctx.subscribe(topic)
    pub = ctx.publisher(topic)
    assert pub.topic == topic and pub.max_msg > 1000 and pub.next_seq == 0
    assert pub.wait_receivers(1, timeout=5)
    assert pub.receivers == 1
    for i in range(100):
        assert pub.send(b"m%03d" % i) == flit.OK
    assert pub.next_seq == 100
    msgs = list(sub.iter(timeout=0.3))
    assert msgs[0].kind == flit.BOS and msgs[0].topic == topic
    data = [m for m in msgs if m.kind == flit.DATA]
    assert [m.payload for m in data] == [b"m%03d" % i for i in range(100)]
    assert [m.seq for m in data] == list(range(100))
    assert all(m.topic == topic and m.source.startswith("shm:pid=%d" % os.getpid()) for m in data)
    assert isinstance(data[0].payload, bytes)
    pub.close()
    eos = sub.receive(timeout=5)
    assert eos is not None and eos.kind == flit.EOS and not eos.source_died
    assert "EOS" in repr(eos) and "DATA" in repr(data[0])


def test_send_accepts_buffers(ctx, topic):
    sub = ctx.subscribe(topic, events=False)
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1)
    a = array.array("I", [1, 2, 3])
    for d in (b"bytes", bytearray(b"bytearray"), memoryview(b"view-ro"),
              memoryview(bytearray(b"view-rw"))[1:], "text é", a, b""):
        assert pub.send(d) == flit.OK
    got = data_of(sub, 7)
    assert got == [b"bytes", b"bytearray", b"view-ro", b"iew-rw", "text é".encode(),
                   a.tobytes(), b""]
    with pytest.raises(TypeError):
        pub.send(12345)


def test_patterns(ctx, topic):
    sub = ctx.subscribe(topic + ".md.*", events=False)
    exact = ctx.subscribe(topic + ".md.[e]ur", pattern=True, events=False)
    assert sub.pattern and exact.pattern
    literal = ctx.subscribe(topic + ".other", events=False)
    assert not literal.pattern
    pubs = [ctx.publisher(topic + t) for t in (".md.eur", ".md.usd", ".mx.eur")]
    for p in pubs[:2]:
        assert p.wait_receivers(1)
    for p in pubs:
        p.send(p.topic.encode())
    got = []
    end = time.monotonic() + 1.0
    while time.monotonic() < end and len(got) < 2:
        m = sub.receive(timeout=0.1)
        if m:
            got.append((m.topic, m.payload))
    assert sorted(got) == [(topic + ".md.eur", (topic + ".md.eur").encode()),
                           (topic + ".md.usd", (topic + ".md.usd").encode())]
    m = exact.receive(timeout=1)
    assert m.topic == topic + ".md.eur"
    assert exact.receive(timeout=0.1) is None
    assert literal.receive(timeout=0) is None


def test_pattern_finds_topics_created_later(ctx, topic):
    sub = ctx.subscribe(topic + ".*", events=False)
    ctx.poll_for(0.05)
    pub = ctx.publisher(topic + ".late")
    assert pub.wait_receivers(1)
    pub.send(b"late")
    m = sub.receive(timeout=2)
    assert m.payload == b"late" and m.topic == topic + ".late"


def test_callback_and_copy_false(ctx, topic):
    seen, views = [], []

    def cb(m):
        seen.append((m.kind, bytes(m.payload) if m.kind == flit.DATA else None))
        if m.kind == flit.DATA:
            assert isinstance(m.payload, memoryview) and m.payload.readonly
            views.append(m.payload)
    sub = ctx.subscribe(topic, cb, copy=False)
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1)
    pub.send(b"zero-copy")
    ctx.wait(lambda: len(seen) >= 2, 2)
    assert seen == [(flit.BOS, None), (flit.DATA, b"zero-copy")]
    with pytest.raises(ValueError):      # the view was released after the callback
        bytes(views[0])
    with pytest.raises(ValueError):
        ctx.subscribe(topic, copy=False)     # a queue needs copies
    with pytest.raises(flit.FlitError) as e:
        sub.receive(timeout=0)
    assert e.value.errno == errno.EINVAL


def test_claim_commit_memoryview(ctx, topic):
    sub = ctx.subscribe(topic, events=False)
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1)
    mv = pub.claim(64)
    assert isinstance(mv, memoryview) and len(mv) == 64 and not mv.readonly
    mv[:5] = b"hello"
    mv[5:11] = b" world"
    with pytest.raises(flit.FlitError) as e:
        pub.claim(8)                        # one claim at a time
    assert e.value.errno == errno.EBUSY
    assert pub.commit(11) == flit.OK
    with pytest.raises(ValueError):
        mv[0] = 0                           # released by commit
    mv = pub.claim(16)
    mv[:] = b"x" * 16
    pub.abort()                             # nothing sent
    mv = pub.claim(3)
    mv[:] = b"end"
    pub.commit()                            # all claimed
    with pytest.raises(flit.FlitError):
        pub.commit()                        # no claim open
    assert data_of(sub, 2) == [b"hello world", b"end"]
    assert pub.next_seq == 2


def test_claim_larger_than_max_msg(ctx, topic):
    pub = ctx.publisher(topic)
    with pytest.raises(flit.FlitError) as e:
        pub.claim(pub.max_msg + 1)
    assert e.value.errno == errno.EMSGSIZE
    assert "exceeds the maximum" in e.value.errmsg and str(pub.max_msg) in str(e.value)
    assert isinstance(e.value, OSError)
    with pytest.raises(flit.FlitError) as e:
        pub.send(bytes(pub.max_msg + 1))
    assert e.value.errno == errno.EMSGSIZE
    mv = pub.claim(pub.max_msg)             # the largest is fine
    assert len(mv) == pub.max_msg
    pub.abort()


def test_bad_transport_name():
    with pytest.raises(flit.FlitError) as e:
        flit.Context(transports="carrier-pigeon")
    assert e.value.errno == errno.EINVAL
    assert "bad value 'carrier-pigeon' for context.transports" in str(e.value)
    with flit.Context() as ctx:
        with pytest.raises(flit.FlitError) as e:
            ctx.publisher("pyt.bad", transport="tcp")
        assert e.value.errno == errno.EPROTONOSUPPORT
        assert "unknown transport 'tcp'" in e.value.errmsg


def test_bad_config_key_and_value(tmp_path):
    with pytest.raises(flit.FlitError) as e:
        flit.Context(config={"context.no_such_key": 1})
    assert e.value.errno == errno.EINVAL
    assert "unknown key 'context.no_such_key'" in str(e.value)
    assert e.value.errmsg == flit.errmsg()     # flit_errmsg()'s text
    with pytest.raises(flit.FlitError) as e:
        flit.Context(config=["context.log_level = loud"])
    assert "context.log_level" in str(e.value)
    bad = tmp_path / "flit.conf"
    bad.write_text("context.domain = ok\nsource.shm.capacity = 3\n")
    with pytest.raises(flit.FlitError) as e:
        flit.Context(config_file=str(bad))
    assert "flit.conf:2" in str(e.value)
    with flit.Context() as ctx:
        with pytest.raises(flit.FlitError) as e:
            ctx.publisher("pyt.x", config={"shm.mode": "sideways"})
        assert "sideways" in str(e.value)
        with pytest.raises(flit.FlitError) as e:
            ctx.subscribe("pyt.x", config="no_such = 1")
        assert e.value.errno == errno.EINVAL and "no_such" in str(e.value)
    with pytest.raises(ValueError):
        flit.Context(config=["a = 1\nb = 2"])


def test_config_forms(topic):
    for cfg in ("context.stats = off\n", {"context.stats": False}, ["context.stats=off"]):
        with flit.Context(cfg, transports=["shm"]) as ctx:
            assert ctx.stats_path is None
    with flit.Context() as ctx:
        assert ctx.stats_path and os.path.exists(ctx.stats_path)


def test_use_after_close(topic):
    ctx = flit.Context()
    pub = ctx.publisher(topic)
    sub = ctx.subscribe(topic)
    pub.close()
    pub.close()                             # idempotent
    for call in (lambda: pub.send(b"x"), lambda: pub.claim(1), pub.flush,
                 lambda: pub.next_seq, lambda: pub.max_msg):
        with pytest.raises(flit.FlitError) as e:
            call()
        assert e.value.errno == errno.EBADF and "closed" in str(e.value)
    pub2 = ctx.publisher(topic + ".2")
    ctx.close()                             # closes its objects too
    assert sub.closed and pub2.closed and ctx.closed
    with pytest.raises(flit.FlitError) as e:
        pub2.send(b"x")
    assert e.value.errno == errno.EBADF
    with pytest.raises(flit.FlitError):
        ctx.poll()
    with pytest.raises(flit.FlitError):
        ctx.publisher(topic)
    ctx.close()


def test_iterator_timeout(ctx, topic):
    sub = ctx.subscribe(topic)
    t0 = time.monotonic()
    assert list(sub.iter(timeout=0.2)) == []
    dt = time.monotonic() - t0
    assert 0.2 <= dt < 1.5
    assert sub.receive(timeout=0) is None
    # the timeout is one of silence: messages keep it going
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1)
    pub.send(b"1")
    got = [m.kind for m in sub.iter(timeout=0.2)]
    assert got == [flit.BOS, flit.DATA]


def test_iterator_ends_when_closed(ctx, topic):
    sub = ctx.subscribe(topic)
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1)
    pub.send(b"a")
    pub.send(b"b")
    out = []
    for m in sub:                           # no timeout
        out.append(m.kind)
        if m.kind == flit.DATA and len(out) == 2:
            sub.close()                     # queued messages stay readable
    assert out == [flit.BOS, flit.DATA, flit.DATA]


def test_callback_exception_reraised_by_poll(ctx, topic):
    calls = []

    def cb(m):
        calls.append(m.kind)
        if m.kind == flit.DATA:
            raise ZeroDivisionError("in the callback")
    ctx.subscribe(topic, cb)
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1)
    pub.send(b"x")
    with pytest.raises(ZeroDivisionError):
        ctx.wait(lambda: False, 2)
    # the context still works
    pub.send(b"y")
    with pytest.raises(ZeroDivisionError):
        ctx.wait(lambda: False, 2)
    assert calls == [flit.BOS, flit.DATA, flit.DATA]


def test_close_from_callback_is_deferred(ctx, topic):
    got = []
    subs = []

    def cb(m):
        got.append(m.kind)
        if m.kind == flit.DATA:
            subs[0].close()
            with pytest.raises(flit.FlitError) as e:
                ctx.poll()
            assert e.value.errno == errno.EBUSY
    subs.append(ctx.subscribe(topic, cb))
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1)
    for i in range(5):
        pub.send(b"%d" % i)
    ctx.poll_for(0.2)
    assert got == [flit.BOS, flit.DATA]
    assert subs[0].closed
    assert ctx.wait(lambda: pub.receivers == 0, 2)


def test_back_pressure_status_and_send_timeout(ctx, topic):
    sub = ctx.subscribe(topic, events=False)
    pub = ctx.publisher(topic, config={"shm.capacity": "64K", "shm.mode": "paced"})
    assert pub.wait_receivers(1)
    statuses = [pub.send(bytes(100)) for _ in range(2000)]
    assert flit.BACK_PRESSURED in statuses
    first = statuses.index(flit.BACK_PRESSURED)
    assert all(s == flit.OK for s in statuses[:first])
    # with a timeout, send polls the context (which drains our own reader)
    assert pub.send(b"after", timeout=5) == flit.OK
    while sub.receive(timeout=0.5) is not None:
        pass
    assert ctx.counters()["back_pressured"] >= 1


def test_overwrite_reports_loss(ctx, topic):
    sub = ctx.subscribe(topic)
    pub = ctx.publisher(topic, config={"shm.capacity": "64K", "shm.mode": "overwrite"})
    assert pub.wait_receivers(1)
    assert sub.receive(timeout=1).kind == flit.BOS
    n = 5000
    for i in range(n):
        assert pub.send(i.to_bytes(8, "little") + bytes(56)) == flit.OK
    seqs, lost = [], 0
    for m in sub.iter(timeout=0.3):
        if m.kind == flit.LOSS:
            assert m.lost > 0 and "lost=" in repr(m)
            lost += m.lost
            seqs.extend(range(m.seq, m.seq + m.lost))
        elif m.kind == flit.DATA:
            assert int.from_bytes(m.payload[:8], "little") == m.seq
            seqs.append(m.seq)
    assert lost > 0
    assert seqs == list(range(n))           # every message delivered or reported lost
    c = ctx.counters()
    assert c["msgs_lost"] == lost and c["loss_events"] >= 1


def test_counters(ctx, topic):
    c0 = ctx.counters()
    assert set(c0) == set(flit._lib.COUNTER_FIELDS) and len(c0) == 23
    sub = ctx.subscribe(topic)
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1)
    for _ in range(10):
        pub.send(b"12345")
    assert len(data_of(sub, 10)) == 10
    c = ctx.counters()
    assert c["msgs_sent"] - c0["msgs_sent"] == 10
    assert c["bytes_sent"] - c0["bytes_sent"] == 50
    assert c["msgs_received"] - c0["msgs_received"] == 10
    assert c["sources_joined"] - c0["sources_joined"] == 1
    assert ctx.describe("shm").startswith("shm")
    with pytest.raises(flit.FlitError) as e:
        ctx.describe("udp")                 # not open in this context
    assert e.value.errno == errno.ENOENT


def test_print_callback_to_logging(caplog, topic):
    logger = flit.log_to_logging("flit.test")
    try:
        with caplog.at_level(logging.DEBUG, logger="flit.test"):
            with flit.Context(config={"context.log_level": "debug"}) as ctx:
                pub = ctx.publisher(topic)
                with pytest.raises(flit.FlitError):
                    pub.send(bytes(pub.max_msg + 1))
        assert logger.name == "flit.test"
        texts = [r.getMessage() for r in caplog.records if r.name == "flit.test"]
        assert any("exceeds the maximum" in t for t in texts), texts
    finally:
        flit.set_print(None)


def test_print_callback_exception_does_not_escape(topic):
    import sys
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u.exc_type)

    def bad(level, text):
        raise RuntimeError("in the print callback")
    try:
        flit.set_print(bad)
        with flit.Context(config={"context.log_level": "debug"}) as ctx:
            pub = ctx.publisher(topic)
            with pytest.raises(flit.FlitError):
                pub.claim(pub.max_msg + 1)
    finally:
        flit.set_print(None)
        sys.unraisablehook = old
    assert RuntimeError in seen


def test_status_and_kind_values():
    assert (flit.OK, flit.BACK_PRESSURED, flit.NOT_CONNECTED) == (0, 1, 2)
    assert (flit.DATA, flit.BOS, flit.EOS, flit.LOSS) == (0, 1, 2, 3)
    assert flit.MsgFlag.SOURCE_DIED == 1 and flit.MsgFlag.RETX == 32


def test_subscription_lives_without_a_reference(ctx, topic):
    import gc
    seen = []
    ctx.subscribe(topic, seen.append, events=False)     # the object is dropped
    gc.collect()
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1)
    pub.send(b"still here")
    assert ctx.wait(lambda: seen, 2)
    assert seen[0].payload == b"still here"


def test_dropped_context_is_closed_by_the_collector(topic):
    import gc
    ctx = flit.Context()
    sub = ctx.subscribe(topic, lambda m: None)
    pub = ctx.publisher(topic)
    path = ctx.stats_path
    assert path and os.path.exists(path)
    del ctx, sub, pub
    gc.collect()
    assert not os.path.exists(path)      # flit_ctx_close() removed its counters file
