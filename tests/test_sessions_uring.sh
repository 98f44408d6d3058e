#!/usr/bin/env bash
# The shared-session suite (tests/test_sessions.c: 20,000-topic sessions,
# paced resolution, killed publishers, forged INFO pages, loss and NAK
# recovery across topics) again with every udp context on the io_uring
# backend: multishot receive into provided buffers, sends through the ring.
set -u
bin="${BUILD:-build}/tests/test_sessions"
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
export FLIT_CONTEXT_UDP_BACKEND=io_uring
exec "$bin"
