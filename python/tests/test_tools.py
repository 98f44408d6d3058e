# SPDX-License-Identifier: BSD-2-Clause
"""Python against the C tools over shm: flit-pub -> Python subscriber,
Python publisher -> flit-sub (a pattern), and python -m flit.pong against
flit-pong in both roles (the same protocol, replies checked)."""
import json
import subprocess
import sys

import flit
from conftest import running


def test_flit_pub_to_python_subscriber(ctx, tool, topic):
    sub = ctx.subscribe(topic + ".*", events=True)
    ctx.poll_for(0.05)
    p = subprocess.Popen([tool("flit-pub"), "-t", "shm", "-w", "1", "-T", "20",
                          topic + ".c", "one", "two", "three"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got, kinds = [], []
    for m in sub.iter(timeout=20):
        kinds.append(m.kind)
        if m.kind == flit.DATA:
            got.append((m.topic, m.seq, m.payload))
        if m.kind == flit.EOS:
            break
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert got == [(topic + ".c", 0, b"one"), (topic + ".c", 1, b"two"), (topic + ".c", 2, b"three")]
    assert kinds[0] == flit.BOS and kinds[-1] == flit.EOS
    assert m.source.startswith("shm:pid=%d" % p.pid)


def test_python_publisher_to_flit_sub(ctx, tool, topic):
    with running([tool("flit-sub"), "-t", "shm", "--count", "3", "--timeout", "20",
                  topic + ".*"]) as s:
        pub = ctx.publisher(topic + ".py")
        assert pub.wait_receivers(1, timeout=20), "flit-sub did not attach"
        for word in (b"alpha", b"beta", b"gamma"):
            assert pub.send(word) == flit.OK
        pub.flush()
        out, err = s.communicate(timeout=30)
    assert s.returncode == 0, err
    lines = [l for l in out.splitlines() if " seq=" in l]
    assert len(lines) == 3, out
    for i, (line, word) in enumerate(zip(lines, ("alpha", "beta", "gamma"))):
        assert line.startswith("%s.py seq=%d " % (topic, i)), line
        assert 'len=%d "%s"' % (len(word), word) in line, line


def _pong_py(prefix, *extra):
    return running([sys.executable, "-m", "flit.pong", "--role", "pong",
                    "-p", prefix, "-T", "20"] + list(extra))


def test_c_ping_against_python_pong(tool, topic):
    with _pong_py(topic) as pong:
        r = subprocess.run([tool("flit-pong"), "--role", "ping", "-p", topic, "-s", "64",
                            "-n", "2000", "-w", "200", "-T", "20", "--json"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout.strip().splitlines()[-1])
        assert res["tool"] == "flit-pong" and res["count"] == 2000 and res["size"] == 64
        assert 0 < res["min_ns"] <= res["p50_ns"] <= res["p99_ns"]
        out, err = pong.communicate(timeout=20)
        assert pong.returncode == 0, err    # the pong saw BYE and left


def test_python_ping_against_c_pong(tool, topic):
    with running([tool("flit-pong"), "--role", "pong", "-p", topic, "-s", "32",
                  "-T", "20"]) as pong:
        r = subprocess.run([sys.executable, "-m", "flit.pong", "--role", "ping", "-p", topic,
                            "-s", "32", "-n", "2000", "-w", "200", "--json"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["count"] == 2000 and res["size"] == 32 and res["transport"] == "shm"
        assert 0 < res["min_ns"] <= res["p50_ns"] <= res["p99_ns"] <= res["max_ns"]
        out, err = pong.communicate(timeout=20)
        assert pong.returncode == 0, err


def test_python_ping_against_python_pong(topic):
    with _pong_py(topic) as pong:
        r = subprocess.run([sys.executable, "-m", "flit.pong", "--role", "ping", "-p", topic,
                            "-n", "1000", "-w", "100"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "RTT/2 in ns" in r.stdout and "\npython " in r.stdout
        pong.communicate(timeout=20)
        assert pong.returncode == 0


def test_pong_without_peer_times_out(topic):
    r = subprocess.run([sys.executable, "-m", "flit.pong", "--role", "ping", "-p", topic,
                        "-n", "10", "-T", "0.3"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "start-up" in r.stderr
    r = subprocess.run([sys.executable, "-m", "flit.pong", "-s", "4"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "usage" in r.stderr
