#!/usr/bin/env bash
# The whole udp integration suite (tests/test_udp.c) again with every
# context on the io_uring backend (cases that name a backend keep theirs):
# "the io_uring backend passes the same tests as the socket backend".
# Receives and sends go as the defaults have them (multishot recvmsg,
# sendmmsg on the socket); test_sessions_uring runs its suite with the
# other two (readiness by a poll, sends through the ring).
set -u
bin="${BUILD:-build}/tests/test_udp"
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
export FLIT_CONTEXT_UDP_BACKEND=io_uring
exec "$bin"
