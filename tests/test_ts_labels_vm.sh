#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# test_ts_labels_vm — flit-pong's timestamp labels say what the samples'
# stamps were, not what the driver accepted, on a NIC that accepts hardware
# stamping and never stamps: qemu's e1000e (qemu 7.2: SIOCSHWTSTAMP is
# accepted, `ethtool -T` lists hardware modes and a PTP clock, the clock is
# frozen and no hardware stamp arrives; a transmit stamp request times out
# in the driver, or the driver skips it and the kernel's software stamp
# comes).  The veth case (the driver refuses) is tests/test_pong_timestamps.sh.
#
# A guest (tests/vm/, Debian 12's 6.1 kernel under qemu; docs/VM.md) with two
# e1000e NICs on one qemu hub, moved into two namespaces by `tools/testbed up
# --link direct --devices xnic1,xnic2`:
#
#   ts-h1 (ping) eth0 10.77.0.1 <--- e1000e, qemu hub ---> ts-h2 (pong) eth0 10.77.0.2
#
# runs, chrooted on this host's / (the same build), `flit-pong -t udp
# --timestamps hardware -C context.udp.interface=eth0` (pong forked into
# ts-h2) and checks:
#   - the set-up is named as such: "set up on eth0: receive hardware,
#     transmit hardware (the driver accepted ...)", JSON ts_rx_set_up and
#     ts_tx_set_up "hardware", no "ts_hw_unavailable";
#   - the samples are counted as what they were: "stamps seen, receive (ping
#     side): hardware asked for and accepted by the driver, but 0 of N
#     samples carried a hardware stamp: N software (kernel)", likewise the
#     pong side's receive stamps and the ping's transmit stamps; JSON
#     ts_rx/ts_tx "software", ts_rx_seen/ts_pong_rx_seen/ts_tx_seen with 0
#     hardware, "ts_hw_missing";
#   - nothing claims hardware: no "stamps seen" count of hardware stamps, no
#     one-way series from or to a hardware stamp, every one-way figure on
#     CLOCK_REALTIME (ts_clock "realtime").
# The guest's `ethtool -T` and the driver's stamp counters are printed.
# `--suite` runs the checks inside the guest (or by hand on a host with two
# cabled NICs: FLIT_VM_NICS="if1 if2").
# Exit: 0 pass, 77 skip ("SKIP: reason": no guest can be booted here), 1 fail.
#
# timeout: 240
set -u -o pipefail
. "$(dirname "$0")/vm/suite.sh"
P=$ROOT/$BUILD/tools/flit-pong
N=500

# ---- inside the guest -------------------------------------------------------
if [ "${1:-}" = --suite ]; then
	vm_suite_begin ts
	command -v ethtool >/dev/null 2>&1 || { echo "SKIP: ethtool not found (apt-get install ethtool)"; exit 77; }
	n1=$VM_NIC1
	echo "# $n1: driver $(ethtool -i "$n1" | sed -n 's/^driver: //p'); ethtool -T $n1:"
	ethtool -T "$n1" 2>&1 | sed 's/^/#   /'
	ethtool -T "$n1" 2>/dev/null | grep -q "hardware-receive" ||
		{ echo "SKIP: $n1 ($(ethtool -i "$n1" | sed -n 's/^driver: //p')) offers no hardware receive stamps: the refused case is test_pong_timestamps"; exit 77; }
	vm_testbed_up

	# ping in h1, the forked pong in h2; the pong's header is the ping's
	timeout 150 "$P" -t udp --netns "$tbn-h1" --peer-netns "$tbn-h2" -n "$N" -w 50 -T 40 \
		-C "context.domain = $tbn" -C "context.udp.interface = eth0" \
		--timestamps hardware --json >"$tmp/hw.json" 2>"$tmp/hw.err"
	rc=$?
	sed 's/^/# /' "$tmp/hw.err" | grep -E "stamps|timestamps|one-way|1w-"
	for i in 1 2; do
		echo "# h$i eth0: $(h "$i" ethtool -S eth0 | grep -E 'hwtstamp' | tr -s ' \n' ' ')"
	done
	if [ $rc -ne 0 ]; then
		fail "flit-pong -t udp --timestamps hardware exited $rc"; show "$tmp/hw.err"
		exit 1
	fi

	# the header: the set-up named as a set-up, the samples as what they were
	grep -q "^# timestamps: hardware asked for; set up on eth0: receive hardware, transmit hardware (the driver accepted hardware stamping" "$tmp/hw.err" &&
		ok "header: hardware stamping set up, named as a set-up" ||
		{ fail "header: no 'set up on eth0: receive hardware, transmit hardware (the driver accepted' line"; show "$tmp/hw.err"; }
	if grep -q "hardware stamps asked for but not available" "$tmp/hw.err"; then
		fail "header: says not available, but the driver accepted"
	fi
	want="hardware asked for and accepted by the driver, but 0 of $N samples carried a hardware stamp"
	if grep -qxF "# stamps seen, receive (ping side): $want: $N software (kernel)" "$tmp/hw.err"; then
		ok "header: receive (ping side): 0 of $N hardware, $N software (kernel)"
	else
		fail "header: no 'stamps seen, receive (ping side): $want: $N software (kernel)'"; grep "stamps seen" "$tmp/hw.err" | show
	fi
	if grep -qxF "# stamps seen, receive (pong side): hardware asked for, but 0 of $N samples carried a hardware stamp: $N software (kernel)" "$tmp/hw.err"; then
		ok "header: receive (pong side): 0 of $N hardware, $N software (kernel)"
	else
		fail "header: no 'stamps seen, receive (pong side): ... 0 of $N ...: $N software (kernel)'"; grep "stamps seen" "$tmp/hw.err" | show
	fi
	# transmit: the driver stamps one packet at a time and gives up after a
	# while; the packets it skipped get the kernel's software stamp
	if grep -qE "^# stamps seen, transmit \(ping side\): $want: ([0-9]+ software \(kernel\))?(, )?([0-9]+ none)?$" "$tmp/hw.err"; then
		ok "header: $(grep -o 'transmit (ping side): .*' "$tmp/hw.err")"
	else
		fail "header: no 'stamps seen, transmit (ping side): $want: ...'"; grep "stamps seen" "$tmp/hw.err" | show
	fi
	# nothing claims hardware stamps were seen or used
	if grep -E "stamps seen|^# 1w-|one-way" "$tmp/hw.err" | grep -E "[1-9][0-9]* hardware|rx hardware|tx hardware|clock (phc|realtime\+phc)" >"$tmp/claims"; then
		fail "header: claims hardware stamps"; show "$tmp/claims"
	else
		ok "header: no line claims a hardware stamp"
	fi

	if python3 - "$tmp/hw.json" "$N" <<'EOF'; then
import json, sys
o = json.loads(open(sys.argv[1]).read())
n = int(sys.argv[2])
assert o["timestamps"] == "hardware", o
assert o["ts_rx_set_up"] == "hardware" and o["ts_tx_set_up"] == "hardware", o
assert "ts_hw_unavailable" not in o, o
# the library's description names a set-up, not the stamps
assert "stamps set up: rx hardware, tx hardware on eth0 (the NIC's where it gives one, else the kernel's)" in o["setup"], o["setup"]
# what the samples were: software, never hardware
assert o["ts_rx"] == "software" and o["ts_tx"] == "software", o
assert o["ts_rx_seen"] == {"hardware": 0, "software": n, "library": 0, "none": 0}, o["ts_rx_seen"]
assert o["ts_pong_rx_seen"] == {"hardware": 0, "software": n, "library": 0, "none": 0}, o["ts_pong_rx_seen"]
tx = o["ts_tx_seen"]
assert tx["hardware"] == 0 and tx["library"] == 0 and tx["software"] + tx["none"] == n, tx
assert tx["software"] > 0, tx
m = o["ts_hw_missing"]
for s in ("receive (ping side): hardware asked for and accepted by the driver, but 0 of %d" % n,
          "receive (pong side): hardware asked for, but 0 of %d" % n,
          "transmit (ping side): hardware asked for and accepted by the driver, but 0 of %d" % n):
    assert s in m, (s, m)
# the one-way rows: the clock the samples had (CLOCK_REALTIME), no hardware pair
assert o["ts_clock"] == "realtime", o
for k, d in o["one_way"].items():
    assert d["n"] > 0, (k, d)
    assert "hardware" not in d["from"] + d["to"] and d["clock"] == "realtime", (k, d)
    assert "left_out" not in d, (k, d)
assert o["one_way"]["ping_to_pong_wire"]["n"] == tx["software"], (o["one_way"], tx)
print("# ts_rx_seen %s, ts_pong_rx_seen %s, ts_tx_seen %s" % (o["ts_rx_seen"], o["ts_pong_rx_seen"], tx))
EOF
		ok "JSON: set up hardware, samples software (0 hardware), one-way on realtime"
	else
		fail "JSON"; grep -v '"cdf"' "$tmp/hw.json" | head -c 3000; echo
	fi

	vm_suite_end
fi

# ---- on the host: one guest with two e1000e NICs ------------------------------
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found (JSON checks)"; exit 77; }
command -v ethtool >/dev/null 2>&1 || { echo "SKIP: ethtool not found (apt-get install ethtool)"; exit 77; }
vm_test_need "$P"
vm_test_run ts-labels-vm --kernel "${FLIT_VM_KERNEL:-6.1}" --nics 2 --nic-model e1000e --timeout "$(vm_test_budget "$0" 10)"
