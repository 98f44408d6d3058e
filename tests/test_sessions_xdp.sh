#!/usr/bin/env bash
# The shared-session suite (tests/test_sessions.c) again with every side on
# the xdp transport (AF_XDP data path on each testbed host's eth0, flit's
# XDP program attached by each context).
set -u
bin="${BUILD:-build}/tests/test_sessions"
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
export FLIT_TEST_NET=xdp
exec "$bin"
