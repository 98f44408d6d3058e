#!/usr/bin/env bash
# The shared-session suite (tests/test_sessions.c: 20,000-topic sessions,
# paced resolution, killed publishers, forged INFO pages, loss and NAK
# recovery across topics) again with every udp context on the io_uring
# backend, its two ways that are not the default: readiness by a multishot
# poll with recvmmsg (context.udp.uring_recv = poll) and sends through the
# ring (context.udp.uring_send = ring); test_udp_uring runs the udp suite
# with the defaults (multishot recvmsg into provided buffers, sendmmsg).
set -u
bin="${BUILD:-build}/tests/test_sessions"
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
export FLIT_CONTEXT_UDP_BACKEND=io_uring FLIT_CONTEXT_UDP_URING_SEND=ring FLIT_CONTEXT_UDP_URING_RECV=poll
exec "$bin"
