#!/usr/bin/env bash
# flit-pong --timestamps across a 2-host testbed (tools/testbed: namespaces
# NAME-h1, NAME-h2 behind a bridge, veth links without hardware clocks):
#
#   - --timestamps software: the run reports one-way latencies separately from
#     RTT/2 (JSON "one_way" with ping_to_pong, pong_to_ping and
#     ping_to_pong_wire samples, "ts_clock": "realtime", the same host's
#     clock: "one_way_valid"), and the table shows the 1w-* rows; the
#     header's "stamps seen" lines and JSON "ts_rx_seen", "ts_pong_rx_seen",
#     "ts_tx_seen" count every sample's stamps as software (kernel);
#   - --timestamps hardware: veth has no hardware stamps: the run still
#     completes (exit 0) with software stamps, and says "hardware stamps
#     asked for but not available" with the reason (driver refuses
#     SIOCSHWTSTAMP on eth0; without context.udp.interface: that it is
#     needed), in the header and in JSON "ts_hw_unavailable"; what the
#     samples were is counted (0 hardware, all software, "ts_hw_missing"),
#     and nothing in the header or JSON says hardware was set up or seen
#     (tests/test_ts_labels_vm.sh: the same where the driver accepts);
#   - --timestamps on shm uses the library's stamps and says so;
#   - a bad --timestamps value is a usage error (exit 2).
# Uses $FLIT_TOOLS_DIR/flit-pong (tests/run-tests.sh sets it).
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
P="$D/flit-pong"
TB=${FLIT_TESTBED:-tools/testbed}
need_tools flit-pong
command -v python3 >/dev/null 2>&1 || skip "python3 not found (JSON checks)"

name="pts$(($$ % 100000))"
up=
on_exit '[ -n "$up" ] && "$TB" down --name "$name" >/dev/null 2>&1'

# usage errors need no privilege
timeout 30 "$P" --timestamps sometimes >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "bad --timestamps 'sometimes'" "$tmp/err"; then
  fail "--timestamps sometimes: exit $rc, expected 2 with a message"; sed 's/^/    | /' "$tmp/err" | head -3
else
  echo "ok: --timestamps sometimes -> 2"
fi
timeout 30 "$P" --timestamps >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && echo "ok: --timestamps without a value -> 2" || fail "--timestamps without a value"

# shm: no kernel stamps; the library's, named as such
if timeout 60 "$P" -t shm --timestamps software -n 2000 -w 100 --json >"$tmp/shm.json" 2>"$tmp/shm.err"; then
  python3 - "$tmp/shm.json" <<'EOF' && echo "ok: shm --timestamps software: library stamps, one-way reported" || fail "shm --timestamps software JSON"
import json, sys
o = json.loads(open(sys.argv[1]).read())
ow = o["one_way"]
assert o["timestamps"] == "software" and o["ts_rx"] == "library", o
assert ow["pong_to_ping"]["n"] == 2000 and ow["pong_to_ping"]["to"] == "ping rx library", ow
assert ow["ping_to_pong"]["n"] == 2000, ow
assert ow["ping_to_pong_wire"]["n"] == 0, ow
assert o["ts_clock"] == "realtime", o
assert o["ts_rx_seen"] == {"hardware": 0, "software": 0, "library": 2000, "none": 0}, o
assert o["ts_tx"] == "none" and "ts_tx_seen" not in o, o
EOF
  grep -q "no stamp settings of its own" "$tmp/shm.err" || fail "shm: the header does not say the transport has no stamps"
else
  fail "flit-pong -t shm --timestamps software exited $?"; sed 's/^/    | /' "$tmp/shm.err" | tail -5
fi

[ "$(id -u)" -eq 0 ] || skip "needs root for the testbed (network namespaces); the shm and usage checks passed"
"$TB" up --name "$name" --hosts 2 --owner-pid $$ >"$tmp/tb" 2>&1
rc=$?
[ $rc -eq 4 ] && skip "testbed: $(tail -1 "$tmp/tb")"
[ $rc -eq 0 ] || { echo "FAIL: testbed up exited $rc"; cat "$tmp/tb"; exit 1; }
up=1

pong() { # ARGS... -> runs flit-pong -t udp across h1 (ping) and h2 (pong)
  timeout 90 "$P" -t udp --netns "$name-h1" --peer-netns "$name-h2" -n 3000 -w 300 -T 20 \
    -C "context.domain = $name" "$@"
}

# ---- software -----------------------------------------------------------------
if pong --timestamps software --json >"$tmp/sw.json" 2>"$tmp/sw.err"; then
  python3 - "$tmp/sw.json" <<'EOF' && echo "ok: udp --timestamps software: one-way in JSON beside RTT/2" || { fail "udp --timestamps software JSON"; cat "$tmp/sw.json"; }
import json, sys
o = json.loads(open(sys.argv[1]).read())
assert o["p50_ns"] > 0 and o["count"] == 3000, o          # RTT/2 as before
assert o["timestamps"] == "software" and o["ts_clock"] == "realtime", o
assert o["ts_rx"] == "software" and o["ts_tx"] == "software", o
assert o["ts_rx_set_up"] == "software" and o["ts_tx_set_up"] == "software", o
assert "ts_hw_unavailable" not in o and "ts_hw_missing" not in o, o
# what each sample's stamps were: the kernel's software ones
assert o["ts_rx_seen"] == {"hardware": 0, "software": 3000, "library": 0, "none": 0}, o
assert o["ts_pong_rx_seen"] == {"hardware": 0, "software": 3000, "library": 0, "none": 0}, o
tx = o["ts_tx_seen"]
assert tx["hardware"] == 0 and tx["library"] == 0 and tx["software"] >= 2900, o
assert tx["software"] + tx["none"] == 3000, o
assert o["one_way_valid"].startswith("same host"), o
ow = o["one_way"]
for k, to in (("ping_to_pong", "pong rx kernel"), ("pong_to_ping", "ping rx kernel"),
              ("ping_to_pong_wire", "pong rx kernel")):
    s = ow[k]
    assert s["n"] >= 2900 and s["to"] == to and s["clock"] == "realtime", (k, s)
    # same host, same clock: a one-way latency is positive
    assert s["negative"] == 0 and s["min_ns"] > 0, (k, s)
    assert s["min_ns"] <= s["p50_ns"] <= s["p99_ns"] <= s["max_ns"], (k, s)
assert ow["ping_to_pong_wire"]["from"] == "ping tx kernel", ow
assert ow["pong_to_ping"]["from"] == "pong send", ow
print("# one-way p50 (ns): fwd %.0f, back %.0f, wire %.0f; RTT/2 p50 %.0f" % (
    ow["ping_to_pong"]["p50_ns"], ow["pong_to_ping"]["p50_ns"],
    ow["ping_to_pong_wire"]["p50_ns"], o["p50_ns"]))
EOF
  grep -q "timestamps: software asked for; set up: receive software, transmit software$" "$tmp/sw.err" ||
    fail "software: header does not name the stamps set up"
  for site in "receive (ping side)" "receive (pong side)"; do
    grep -qxF "# stamps seen, $site: 3000 software (kernel)" "$tmp/sw.err" ||
      { fail "software: no 'stamps seen, $site: 3000 software (kernel)'"; grep "stamps seen" "$tmp/sw.err" | sed 's/^/    | /'; }
  done
  grep -qE "^# stamps seen, transmit \(ping side\): [0-9]+ software \(kernel\)(, [0-9]+ none)?$" "$tmp/sw.err" ||
    { fail "software: no 'stamps seen, transmit' line"; grep "stamps seen" "$tmp/sw.err" | sed 's/^/    | /'; }
  grep -q "clock realtime" "$tmp/sw.err" || fail "software: header does not name the one-way clock"
else
  fail "flit-pong -t udp --timestamps software exited $?"; sed 's/^/    | /' "$tmp/sw.err" | tail -8
fi

# the table: RTT/2 row, then the one-way rows
if pong --timestamps software -n 1000 >"$tmp/sw.txt" 2>&1; then
  for r in udp 1w-fwd 1w-back 1w-wire; do
    grep -q "^$r " "$tmp/sw.txt" || fail "software table: no '$r' row"
  done
  grep -q "^# one-way (ns, separate from RTT/2)" "$tmp/sw.txt" || fail "software table: no one-way header"
  echo "ok: udp --timestamps software: table rows"
else
  fail "flit-pong -t udp --timestamps software (table) exited $?"; tail -5 "$tmp/sw.txt"
fi

# ---- hardware: not available on veth ----------------------------------------------
if pong --timestamps hardware -C "context.udp.interface = eth0" --json >"$tmp/hw.json" 2>"$tmp/hw.err"; then
  grep -q "hardware stamps asked for but not available: .*eth0: no hardware timestamping (driver refuses SIOCSHWTSTAMP" "$tmp/hw.err" ||
    { fail "hardware: no 'not available' line naming the reason"; sed 's/^/    | /' "$tmp/hw.err"; }
  python3 - "$tmp/hw.json" <<'EOF' && echo "ok: udp --timestamps hardware on veth: not available, run completes with software stamps" || { fail "udp --timestamps hardware JSON"; cat "$tmp/hw.json"; }
import json, sys
o = json.loads(open(sys.argv[1]).read())
assert o["timestamps"] == "hardware", o
assert "no hardware timestamping" in o["ts_hw_unavailable"], o
assert o["ts_rx"] == "software" and o["ts_tx"] == "software", o
assert o["ts_rx_set_up"] == "software" and o["ts_tx_set_up"] == "software", o
assert o["one_way"]["ping_to_pong_wire"]["n"] >= 2900, o
assert o["one_way"]["ping_to_pong_wire"]["clock"] == "realtime", o
# the samples: software, none hardware, and said so
for k in ("ts_rx_seen", "ts_pong_rx_seen", "ts_tx_seen"):
    assert o[k]["hardware"] == 0 and o[k]["software"] >= 2900, (k, o[k])
for site in ("receive (ping side): hardware asked for, not available: 0 of 3000",
             "receive (pong side): hardware asked for, but 0 of 3000",
             "transmit (ping side): hardware asked for, not available: 0 of 3000"):
    assert site in o["ts_hw_missing"], (site, o["ts_hw_missing"])
assert "rx hardware" not in o["setup"] and "tx hardware" not in o["setup"], o
for d in o["one_way"].values():
    assert "hardware" not in d.get("from", "") + d.get("to", "") and d.get("clock", "realtime") == "realtime", d
EOF
  # the header: no line says hardware was set up or seen
  grep -q "timestamps: hardware asked for; set up on eth0: receive software, transmit software$" "$tmp/hw.err" ||
    { fail "hardware: the set-up line does not say software"; grep "timestamps:" "$tmp/hw.err" | sed 's/^/    | /'; }
  grep -qxF "# stamps seen, receive (ping side): hardware asked for, not available: 0 of 3000 samples carried a hardware stamp: 3000 software (kernel)" "$tmp/hw.err" ||
    { fail "hardware: no 'stamps seen' line saying the samples were software"; grep "stamps seen" "$tmp/hw.err" | sed 's/^/    | /'; }
  if grep -E "(receive|transmit|rx|tx) hardware|[0-9] hardware" "$tmp/hw.err" >"$tmp/claims"; then
    fail "hardware: the header claims hardware stamps"; sed 's/^/    | /' "$tmp/claims"
  fi
else
  fail "flit-pong -t udp --timestamps hardware exited $?"; sed 's/^/    | /' "$tmp/hw.err" | tail -8
fi
# without context.udp.interface: the reason is that it is needed
if pong --timestamps hardware -n 500 >"$tmp/hw2.txt" 2>&1; then
  grep -q "hardware stamps asked for but not available: hardware timestamps need context.udp.interface" "$tmp/hw2.txt" &&
    echo "ok: udp --timestamps hardware without an interface: says it is needed" ||
    { fail "hardware without interface: no reason"; sed 's/^/    | /' "$tmp/hw2.txt" | head -12; }
else
  fail "flit-pong -t udp --timestamps hardware (no interface) exited $?"; tail -5 "$tmp/hw2.txt"
fi

finish
