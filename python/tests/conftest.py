# SPDX-License-Identifier: BSD-2-Clause
"""Shared set-up of the flit Python tests.

Every test runs in its own flit domain (FLIT_CONTEXT_DOMAIN, inherited by
the child processes and the C tools), so that nothing here meets the topics
of other runs on the host; contexts stay off the network
(FLIT_CONTEXT_TRANSPORTS=shm) unless a test asks for udp.
Environment: FLIT_LIBRARY (the library under test), FLIT_TOOLS_DIR (the C
tools, for the interoperability tests), FLIT_TESTBED (tools/testbed) and
FLIT_PY_TESTBED (a 2-host testbed brought up by the caller).
"""
import contextlib
import itertools
import os
import shutil
import subprocess
import sys

import pytest

_own_domain = "FLIT_CONTEXT_DOMAIN" not in os.environ
os.environ.setdefault("FLIT_CONTEXT_DOMAIN", "pytest-%d" % os.getpid())
os.environ.setdefault("FLIT_CONTEXT_TRANSPORTS", "shm")

# child processes import the same flit as this one (installed or in the tree)
import flit  # noqa: E402
_pkgdir = os.path.dirname(os.path.dirname(os.path.abspath(flit.__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_pkgdir] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
_n = itertools.count()


@pytest.fixture(scope="session", autouse=True)
def _domain_dir():
    """Remove this run's domain directory of shm files at the end."""
    yield
    if _own_domain:
        shm_dir = os.environ.get("FLIT_CONTEXT_SHM_DIR", "/dev/shm/flit")
        shutil.rmtree(os.path.join(shm_dir, os.environ["FLIT_CONTEXT_DOMAIN"]), ignore_errors=True)


@pytest.fixture
def topic():
    """A topic name no other test uses."""
    return "pyt.%d.%d" % (os.getpid(), next(_n))


@pytest.fixture
def ctx():
    import flit
    c = flit.Context(transports="shm")
    yield c
    c.close()


def tools_dir():
    d = os.environ.get("FLIT_TOOLS_DIR") or os.path.join(ROOT, "build", "tools")
    return d


@pytest.fixture
def tool():
    """tool("flit-pub") -> path of a C tool, or skip."""
    def get(name):
        p = os.path.join(tools_dir(), name)
        if not os.access(p, os.X_OK):
            pytest.skip("%s not built (make tools, or set FLIT_TOOLS_DIR)" % p)
        return p
    return get


def run_py(code, *args, timeout=60, **kw):
    """Run a Python snippet in a child process (the same interpreter, env)."""
    return subprocess.run([sys.executable, "-c", code] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout, **kw)


@contextlib.contextmanager
def running(cmd):
    """A child process (text pipes) for the block; killed if still running
    when the block ends, by an assertion or otherwise."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def spawn_py(code, *args, **kw):
    return subprocess.Popen([sys.executable, "-c", code] + [str(a) for a in args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
