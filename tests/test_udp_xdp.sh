#!/usr/bin/env bash
# The whole udp integration suite (tests/test_udp.c) again with every side
# on the xdp transport (AF_XDP data path on each testbed host's eth0, flit's
# XDP program attached by each context): "the reliability tests of the udp
# transport also pass over xdp".  Cases about the kernel socket path skip
# there with their reason.
set -u
bin="${BUILD:-build}/tests/test_udp"
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
export FLIT_TEST_NET=xdp
exec "$bin"
