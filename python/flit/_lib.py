# SPDX-License-Identifier: BSD-2-Clause
"""Loading libflit.so and declaring its C API for ctypes.

Nothing here knows the wire protocol: every structure below mirrors
include/flit/flit.h, and tests/test_header.py checks the field names and
order against that header when the source tree is at hand.

Where the library comes from, in order:
  1. $FLIT_LIBRARY, a full path (nothing else is tried when it is set);
  2. the system's: ctypes.util.find_library("flit"), then "libflit.so.0"
     through the dynamic loader's search path (LD_LIBRARY_PATH, ld.so.cache);
  3. the source tree's build/libflit.so.0, when this package is imported
     from python/flit/ of a built tree.
"""
import ctypes
import ctypes.util
import os

c_size_t = ctypes.c_size_t
c_uint64 = ctypes.c_uint64
c_uint32 = ctypes.c_uint32
c_int = ctypes.c_int
c_void_p = ctypes.c_void_p
c_char_p = ctypes.c_char_p


class CtxOpts(ctypes.Structure):
    _fields_ = [("sz", c_size_t),
                ("config_file", c_char_p),
                ("config", c_char_p)]


class PubOpts(ctypes.Structure):
    _fields_ = [("sz", c_size_t),
                ("transport", c_char_p),
                ("config", c_char_p)]


# void (*flit_msg_fn)(flit_sub *sub, const struct flit_msg *msg, void *arg);
# The message is passed as a bare address (c_void_p): Msg.from_address()
# is cheaper than a ctypes POINTER object per message.  Msg's strings are
# c_char_p fields: reading one makes the bytes in C (strlen, copy), far
# cheaper than ctypes.string_at(), which is a foreign call.
MSG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, c_void_p)


class SubOpts(ctypes.Structure):
    _fields_ = [("sz", c_size_t),
                ("on_msg", MSG_FN),
                ("arg", c_void_p),
                ("pattern", ctypes.c_bool),
                ("config", c_char_p)]


class Msg(ctypes.Structure):
    _fields_ = [("kind", c_int),
                ("flags", c_uint32),
                ("data", c_void_p),
                ("len", c_size_t),
                ("topic", c_char_p),
                ("seq", c_uint64),
                ("lost", c_uint64),
                ("session_id", c_uint32),
                ("source", c_char_p),
                ("send_ts_ns", c_uint64),
                ("recv_ts_ns", c_uint64)]


COUNTER_FIELDS = (
    "msgs_sent", "bytes_sent", "frames_sent", "back_pressured",
    "msgs_received", "bytes_received", "frames_received", "malformed",
    "duplicates", "msgs_lost", "loss_events", "readers_evicted",
    "sources_joined", "sources_left", "naks_sent", "naks_received",
    "retransmissions", "retx_received", "foreign_dropped", "unknown_session",
    "rate_limited", "msgs_filtered", "msgs_filtered_early",
)


class Counters(ctypes.Structure):
    _fields_ = [("sz", c_size_t)] + [(n, c_uint64) for n in COUNTER_FIELDS]


# void (*flit_print_fn)(enum flit_log_level level, const char *fmt, va_list ap);
# va_list is taken as a pointer: on x86-64 it is an array type, which decays
# to a pointer as a parameter; on aarch64 it is a 32-byte struct, which the
# ABI passes by reference.  Either way it goes to vsnprintf() unchanged.
PRINT_FN = ctypes.CFUNCTYPE(None, c_int, c_char_p, c_void_p)

# (name, restype, argtypes)
_PROTOS = (
    ("flit_set_print", c_void_p, [PRINT_FN]),
    ("flit_errmsg", c_char_p, []),
    ("flit_strstatus", c_char_p, [c_int]),
    ("flit_ctx_new", c_void_p, [ctypes.POINTER(CtxOpts)]),
    ("flit_ctx_close", None, [c_void_p]),
    ("flit_ctx_poll", c_int, [c_void_p, c_int]),
    ("flit_ctx_counters", c_int, [c_void_p, ctypes.POINTER(Counters)]),
    ("flit_ctx_describe", c_int, [c_void_p, c_char_p, c_char_p, c_size_t]),
    ("flit_ctx_stats_path", c_int, [c_void_p, c_char_p, c_size_t]),
    ("flit_pub_new", c_void_p, [c_void_p, c_char_p, ctypes.POINTER(PubOpts)]),
    ("flit_pub_close", None, [c_void_p]),
    ("flit_pub_send", c_int, [c_void_p, c_void_p, c_size_t]),
    ("flit_pub_claim", c_int, [c_void_p, c_size_t, ctypes.POINTER(c_void_p)]),
    ("flit_pub_commit", c_int, [c_void_p, c_size_t]),
    ("flit_pub_abort", c_int, [c_void_p]),
    ("flit_pub_flush", c_int, [c_void_p]),
    ("flit_pub_max_msg", c_size_t, [c_void_p]),
    ("flit_pub_next_seq", c_uint64, [c_void_p]),
    ("flit_pub_topic", c_char_p, [c_void_p]),
    ("flit_pub_receivers", c_int, [c_void_p]),
    ("flit_sub_new", c_void_p, [c_void_p, c_char_p, ctypes.POINTER(SubOpts)]),
    ("flit_sub_close", None, [c_void_p]),
)


def _candidates():
    """The paths to try, in order, each with where it came from."""
    env = os.environ.get("FLIT_LIBRARY")
    if env:
        return [(env, "$FLIT_LIBRARY")]
    out = []
    found = ctypes.util.find_library("flit")
    out.append((found, "ctypes.util.find_library('flit')"))
    out.append(("libflit.so.0", "the dynamic loader's search path"))
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", "..", "build", "libflit.so.0"))
    out.append((tree, "the source tree's build directory"))
    return out


def load():
    """Open libflit and declare its functions.  Returns (lib, path).
    Raises OSError naming every place tried and why each failed."""
    tried = []
    for path, where in _candidates():
        if path is None:
            tried.append("%s: not found" % where)
            continue
        try:
            lib = ctypes.CDLL(path, use_errno=True)
        except OSError as e:
            tried.append("%s (%s): %s" % (path, where, e))
            continue
        try:
            for name, res, args in _PROTOS:
                f = getattr(lib, name)
                f.restype = res
                f.argtypes = args
        except AttributeError as e:
            tried.append("%s (%s): not flit's library or too old: %s" % (path, where, e))
            continue
        return lib, getattr(lib, "_name", path)
    raise OSError(
        "flit: cannot load the C library libflit.so.0; tried:\n  " +
        "\n  ".join(tried) +
        "\nInstall flit (make install), build it in the source tree (make lib), "
        "or set FLIT_LIBRARY to the full path of libflit.so.0")
