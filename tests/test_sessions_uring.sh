#!/usr/bin/env bash
# The shared-session suite (tests/test_sessions.c: 20,000-topic sessions,
# paced resolution, killed publishers, forged INFO pages, loss and NAK
# recovery across topics) again with every udp context on the io_uring
# backend: multishot receive into provided buffers, sends through the ring
# (context.udp.uring_send = ring; test_udp_uring runs the udp suite with
# the default, sendmmsg on the socket).
set -u
bin="${BUILD:-build}/tests/test_sessions"
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
export FLIT_CONTEXT_UDP_BACKEND=io_uring FLIT_CONTEXT_UDP_URING_SEND=ring
exec "$bin"
