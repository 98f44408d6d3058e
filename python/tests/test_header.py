# SPDX-License-Identifier: BSD-2-Clause
"""The ctypes mirrors of flit.h's structures and constants against the
header itself (include/flit/flit.h of the source tree), so that a field
added to the C API cannot leave the binding silently out of step."""
import ctypes
import os
import re

import pytest

import flit
from flit import _lib

from conftest import ROOT

HEADER = os.path.join(ROOT, "include", "flit", "flit.h")


@pytest.fixture(scope="module")
def header():
    if not os.path.exists(HEADER):
        pytest.skip("%s not found (tests run outside the source tree)" % HEADER)
    with open(HEADER) as f:
        text = f.read()
    # comments out, so that field lists read cleanly
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def fields(header, name):
    body = re.search(r"struct %s \{(.*?)\n\};" % name, header, re.S).group(1)
    out = []
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl or decl.startswith("size_t :0"):
            continue
        m = re.search(r"\(\*(\w+)\)|(\w+)\s*(\[\w*\])?$", decl)
        out.append(m.group(1) or m.group(2))
    return out


@pytest.mark.parametrize("cname, pytype", [
    ("flit_ctx_opts", _lib.CtxOpts), ("flit_pub_opts", _lib.PubOpts),
    ("flit_sub_opts", _lib.SubOpts), ("flit_msg", _lib.Msg),
    ("flit_counters", _lib.Counters)])
def test_struct_fields_match_the_header(header, cname, pytype):
    assert [f[0] for f in pytype._fields_] == fields(header, cname)


def test_sizes_on_this_abi():
    # x86-64 / aarch64 (LP64): checked once against gcc's sizeof/offsetof
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        pytest.skip("not an LP64 ABI")
    assert ctypes.sizeof(_lib.CtxOpts) == 24
    assert ctypes.sizeof(_lib.PubOpts) == 24
    assert ctypes.sizeof(_lib.SubOpts) == 40 and _lib.SubOpts.config.offset == 32
    assert ctypes.sizeof(_lib.Msg) == 80 and _lib.Msg.source.offset == 56
    assert ctypes.sizeof(_lib.Counters) == 192


def constants(header, prefix):
    return {m.group(1): int(m.group(2), 0) for m in
            re.finditer(r"\b%s(\w+)\s*=\s*(\w+)" % prefix, header)}


def test_enums_match_the_header(header):
    assert constants(header, "FLIT_MSG_") == {k.name: k.value for k in flit.MsgKind}
    assert {k: v for k, v in constants(header, "FLIT_").items()
            if k in ("OK", "BACK_PRESSURED", "NOT_CONNECTED")} == {k.name: k.value for k in flit.Status}
    assert constants(header, "FLIT_LOG_") == {k.name: k.value for k in flit.LogLevel}
    flags = {m.group(1): 1 << int(m.group(2)) for m in
             re.finditer(r"#define FLIT_MSGF_(\w+)\s+\(1u << (\d+)\)", header)}
    assert flags == {k.name: k.value for k in flit.MsgFlag}
    assert int(re.search(r"#define FLIT_TOPIC_MAX (\d+)", header).group(1)) == flit.TOPIC_MAX


def test_every_function_declared_exists(header):
    # the binding declares a subset; each of them must be in the header
    declared = set(re.findall(r"FLIT_API [^;]*?\b(flit_\w+)\(", header))
    for name, _, _ in _lib._PROTOS:
        assert name in declared, name
