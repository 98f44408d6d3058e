# SPDX-License-Identifier: BSD-2-Clause
"""shm between two Python processes: every message in order with its
payload checked, both start orders, a publisher killed (-9) seen as
EOS with source-died."""
import os
import signal
import struct

import flit

from conftest import run_py, spawn_py

N = 20000

# Publisher child: waits for a receiver, sends N messages (seq, then a
# pattern from it), closes (the receiver reads the rest, then gets EOS).
PUB = r"""
import struct, sys, flit
topic, n = sys.argv[1], int(sys.argv[2])
with flit.Context(transports="shm") as ctx:
    pub = ctx.publisher(topic)
    assert pub.wait_receivers(1, timeout=20), "no receiver"
    for i in range(n):
        body = struct.pack("<QQ", i, i * 2654435761 % (1 << 64)) + bytes([i & 0xff]) * (i % 50)
        st = pub.send(body, timeout=10)
        assert st == flit.OK, st
    pub.flush()
print("sent", n)
"""

# Subscriber child: prints a summary line when n messages arrived.
SUB = r"""
import struct, sys, flit
topic, n = sys.argv[1], int(sys.argv[2])
with flit.Context(transports="shm") as ctx:
    sub = ctx.subscribe(topic)
    print("ready", flush=True)
    want, bad = 0, 0
    for m in sub.iter(timeout=20):
        if m.kind != flit.DATA:
            continue
        i, h = struct.unpack_from("<QQ", m.payload)
        if i != want or m.seq != want or h != i * 2654435761 % (1 << 64) or \
                m.payload[16:] != bytes([i & 0xff]) * (i % 50):
            bad += 1
        want += 1
        if want == n:
            break
print("got", want, "bad", bad)
"""


def check_body(m, want):
    i, h = struct.unpack_from("<QQ", m.payload)
    assert i == want and m.seq == want
    assert h == i * 2654435761 % (1 << 64)
    assert m.payload[16:] == bytes([i & 0xff]) * (i % 50)


def test_python_publisher_process_to_subscriber(topic):
    with flit.Context(transports="shm") as ctx:
        sub = ctx.subscribe(topic)
        child = spawn_py(PUB, topic, N)
        want = 0
        kinds = []
        for m in sub.iter(timeout=20):
            kinds.append(m.kind)
            if m.kind == flit.DATA:
                check_body(m, want)
                want += 1
            elif m.kind == flit.EOS:
                assert not m.source_died
                break
        out, err = child.communicate(timeout=30)
        assert child.returncode == 0, err
        assert want == N and kinds[0] == flit.BOS and kinds[-1] == flit.EOS
        assert "sent %d" % N in out
        assert ctx.counters()["msgs_lost"] == 0


def test_subscriber_process_from_python_publisher(topic):
    child = spawn_py(SUB, topic, N)
    assert child.stdout.readline().strip() == "ready"
    with flit.Context(transports="shm") as ctx:
        pub = ctx.publisher(topic)
        assert pub.wait_receivers(1, timeout=20)
        for i in range(N):
            body = struct.pack("<QQ", i, i * 2654435761 % (1 << 64)) + bytes([i & 0xff]) * (i % 50)
            assert pub.send(body, timeout=10) == flit.OK
        pub.flush()
        out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert out.strip().endswith("got %d bad 0" % N), out


def test_killed_publisher_is_eos_source_died(topic):
    code = r"""
import sys, time, flit
ctx = flit.Context(transports="shm")
pub = ctx.publisher(sys.argv[1])
pub.wait_receivers(1, timeout=20)
pub.send(b"alive")
pub.flush()
print("sent", flush=True)
time.sleep(60)
"""
    with flit.Context(transports="shm") as ctx:
        sub = ctx.subscribe(topic)
        child = spawn_py(code, topic)
        try:
            m = sub.receive(timeout=20)
            assert m.kind == flit.BOS
            m = sub.receive(timeout=20)
            assert m.kind == flit.DATA and m.payload == b"alive"
            assert child.stdout.readline().strip() == "sent"
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
            m = sub.receive(timeout=10)
            assert m is not None and m.kind == flit.EOS and m.source_died
            assert m.flags & flit.MsgFlag.SOURCE_DIED
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()


def test_import_error_names_what_was_tried():
    env = dict(os.environ, FLIT_LIBRARY="/nonexistent/libflit.so.0")
    r = run_py("import flit", env=env)
    assert r.returncode != 0
    assert "ImportError" in r.stderr
    assert "/nonexistent/libflit.so.0 ($FLIT_LIBRARY)" in r.stderr
    assert "FLIT_LIBRARY" in r.stderr
