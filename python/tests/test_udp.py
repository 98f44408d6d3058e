# SPDX-License-Identifier: BSD-2-Clause
"""udp across a 2-host testbed (tools/testbed, hosts cabled back to back):

    NAME-h1 (10.77.0.1) eth0 <--- veth ---> eth0 (10.77.0.2) NAME-h2

Python publisher on h1 -> flit-sub -t udp on h2; flit-pub -t udp on h1 ->
Python subscriber on h2; Python -> Python, 2000 messages in order with their
payloads checked, through a pattern subscription.  Every context is given
context.transports = udp.  Uses the testbed named by $FLIT_PY_TESTBED, or
brings one up itself (root only; skips otherwise) and takes it down.
"""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, running

TESTBED = os.environ.get("FLIT_TESTBED") or os.path.join(ROOT, "tools", "testbed")


@pytest.fixture(scope="module")
def testbed():
    name = os.environ.get("FLIT_PY_TESTBED")
    if name:
        yield name
        return
    if os.geteuid() != 0:
        pytest.skip("udp across a testbed needs root (network namespaces)")
    if not os.access(TESTBED, os.X_OK):
        pytest.skip("%s not found" % TESTBED)
    name = "py%d" % (os.getpid() % 100000)
    r = subprocess.run([TESTBED, "up", "--name", name, "--hosts", "2", "--link", "direct",
                        "--owner-pid", str(os.getpid())], capture_output=True, text=True)
    if r.returncode == 4:
        pytest.skip(r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0, r.stderr
    try:
        yield name
    finally:
        subprocess.run([TESTBED, "down", "--name", name], capture_output=True)


def on_host(tb, host, argv):
    return [TESTBED, "exec", "--name", tb, "--host", str(host), "--"] + argv


def py(code, *args):
    return [sys.executable, "-c", code] + [str(a) for a in args]


PUB = r"""
import sys, flit
topic, n = sys.argv[1], int(sys.argv[2])
with flit.Context(transports="udp") as ctx:
    pub = ctx.publisher(topic, transport="udp")
    assert pub.wait_receivers(1, timeout=20), "no receiver joined"
    for i in range(n):
        body = i.to_bytes(8, "little") + bytes([i & 0xff]) * (i % 100)
        assert pub.send(body, timeout=10) == flit.OK
    pub.flush()
    ctx.poll_for(0.5)       # answer NAKs before the source ends
print("sent", n, flush=True)
"""

SUB = r"""
import sys, flit
pattern, n = sys.argv[1], int(sys.argv[2])
with flit.Context(transports="udp") as ctx:
    sub = ctx.subscribe(pattern, events=False)
    print("ready", flush=True)
    got = []
    for m in sub.iter(timeout=20):
        if m.kind == flit.LOSS:
            print("LOSS", m.seq, m.lost, flush=True)
            continue
        got.append(m)
        if len(got) == n:
            break
    bad = 0
    for k, m in enumerate(got):
        ok = m.payload[:8] == k.to_bytes(8, "little") and m.seq == k and \
            m.payload[8:] == bytes([k & 0xff]) * (k % 100)
        if not ok and n > 3:
            bad += 1
    print("got", len(got), "bad", bad, "source", got[0].source if got else "-", flush=True)
    for m in got[:3]:
        print("msg", m.topic, m.seq, m.payload.decode("latin-1") if n <= 3 else len(m.payload))
"""


def test_python_publisher_to_flit_sub_over_udp(testbed, tool, topic):
    with running(on_host(testbed, 2, [tool("flit-sub"), "-t", "udp", "--count", "3",
                                      "--timeout", "20", topic + ".*"])) as s:
        r = subprocess.run(on_host(testbed, 1, py(PUB, topic + ".py", 3)),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        out, err = s.communicate(timeout=30)
    assert s.returncode == 0, err
    lines = [l for l in out.splitlines() if " seq=" in l]
    assert len(lines) == 3, out
    for k, line in enumerate(lines):
        assert line.startswith("%s.py seq=%d source=udp:10.77.0.1:" % (topic, k)), line
        assert "len=%d" % (8 + k % 100) in line


def test_flit_pub_to_python_subscriber_over_udp(testbed, tool, topic):
    with running(on_host(testbed, 2, py(SUB, topic, 3))) as s:
        assert s.stdout.readline().strip() == "ready"
        r = subprocess.run(on_host(testbed, 1, [tool("flit-pub"), "-t", "udp", "-w", "1", "-T", "20",
                                                topic, "one", "two", "three"]),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        out, err = s.communicate(timeout=30)
    assert s.returncode == 0, err
    assert "got 3 bad 0 source udp:10.77.0.1:" in out, out
    assert "msg %s 0 one\nmsg %s 1 two\nmsg %s 2 three" % (topic, topic, topic) in out, out


def test_python_to_python_over_udp(testbed, topic):
    n = 2000
    with running(on_host(testbed, 2, py(SUB, topic + ".*", n))) as s:
        assert s.stdout.readline().strip() == "ready"
        r = subprocess.run(on_host(testbed, 1, py(PUB, topic + ".x", n)),
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, r.stderr
        out, err = s.communicate(timeout=30)
    assert s.returncode == 0, err
    assert "got %d bad 0 source udp:10.77.0.1:" % n in out, out
    assert "LOSS" not in out
