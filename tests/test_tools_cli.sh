#!/usr/bin/env bash
# The tools' command lines: --help exits 0; every misuse (unknown option,
# missing argument, bad size, bad transport, bad cpu list, missing operand,
# bad --netns, --peer-netns with --role, a -C argument of two lines) exits 2
# with the usage on stderr; a missing network namespace and a -C line the
# library rejects exit 1 with a message naming them; flit-pub -> flit-sub
# carries one message over shm; flit-pong, flit-floor and flit-thru emit JSON
# with the required keys; flit-compare's misuse exits 2 with its usage.
# Uses the binaries in $FLIT_TOOLS_DIR (set by tests/run-tests.sh).
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
TOOLS="flit-floor flit-pong flit-thru flit-pub flit-sub flit-load flit-topics"
need_tools $TOOLS
bg=
on_exit '[ -n "$bg" ] && kill "$bg" 2>/dev/null'

# ---- --help ----------------------------------------------------------------
for t in $TOOLS; do
  expect 0 "$t" --help && { grep -q '^Usage: ' "$tmp/out" || fail "$t --help: no usage on stdout"; }
done

# ---- misuse ----------------------------------------------------------------
for t in $TOOLS; do
  expect 2 "$t" --no-such-option
  expect 2 "$t" -Q
done
# missing argument
expect 2 flit-floor -n
expect 2 flit-pong --count
expect 2 flit-thru -s
expect 2 flit-pub topic msg --wait-receivers
expect 2 flit-sub topic --timeout
expect 2 flit-load --rates
# missing operand / extra operand
expect 2 flit-pub
expect 2 flit-pub topic
expect 2 flit-sub
expect 2 flit-floor extra
expect 2 flit-pong extra
# bad numbers and sizes
expect 2 flit-floor -n 0
expect 2 flit-floor -n 12x
expect 2 flit-pong -s 0
expect 2 flit-pong -s 4
expect 2 flit-pong -s abc
expect 2 flit-pong -s -16
expect 2 flit-thru -s 3
expect 2 flit-thru -s 99G
expect 2 flit-thru -n 10 -d 1
expect 2 flit-sub -n nope topic
# bad transport
expect 2 flit-pong -t nosuch
expect 2 flit-thru -t tcp
expect 2 flit-pub -t bogus topic msg
expect 2 flit-sub -t '' topic
# bad cpu lists
expect 2 flit-floor --cpus 0,x
expect 2 flit-floor --cpus 0
expect 2 flit-floor --cpus 0,99999
expect 2 flit-floor --cpus 0,0
expect 2 flit-pong --cpus a
expect 2 flit-pong --cpus 1-0
expect 2 flit-thru --cpus 0-
expect 2 flit-thru --cpus ,
# bad enumerations
expect 2 flit-pong --mode sideways
expect 2 flit-pong --role both
expect 2 flit-floor --lines 3
expect 2 flit-floor --size 16
# the udp floor's options belong to --lines udp
expect 2 flit-floor --backend io_uring
expect 2 flit-floor --lines udp --backend bogus
expect 2 flit-floor --lines udp --backend io_uring+bogus
expect 2 flit-floor --lines udp --backend io_uring+poll+poll
expect 2 flit-floor --lines udp --size 0
expect 2 flit-floor --lines udp --size 1473
expect 2 flit-floor --lines 1 --peer 127.0.0.1
expect 2 flit-floor --lines ring --size 4097

# network namespaces, -C
expect 2 flit-pong -t udp --netns
expect 2 flit-thru -t udp --peer-netns
expect 2 flit-pong --netns a/b
expect 2 flit-thru --peer-netns ''
expect 2 flit-pong -t udp --role ping --peer-netns x
expect 2 flit-thru -t shm --window 16
expect 2 flit-pong -C
expect 2 flit-thru -C "$(printf 'source.batch = true\ncontext.domain = x')"

# expect_err RC REGEX TOOL ARGS...: as expect, and stderr must match REGEX.
expect_err() {
  local want=$1 re=$2; shift 2
  expect "$want" "$@" || return 1
  if ! grep -Eq -- "$re" "$tmp/err"; then
    fail "$*: stderr does not say /$re/:"; sed 's/^/    | /' "$tmp/err" | head -5
    return 1
  fi
}
ns="flit-test-no-such-ns-$$"
expect_err 1 "network namespace '$ns' does not exist" flit-pong -t udp --netns "$ns" -n 10
expect_err 1 "network namespace '$ns' does not exist" flit-pong -t udp --peer-netns "$ns" -n 10
expect_err 1 "network namespace '$ns' does not exist" flit-thru -t udp --netns "$ns" -n 10
expect_err 1 "network namespace '$ns' does not exist" flit-thru -t udp --peer-netns "$ns" -n 10
# a -C line the library rejects: exit 1, the message quotes the line
expect_err 1 "'source\.batch = maybe'" flit-pong -C 'source.batch = maybe' -n 10
expect_err 1 "'context\.no_such_key = 1'" flit-thru -C 'context.no_such_key = 1' -n 10
expect_err 1 "'context\.udp\.backend = fast'" flit-pub -C 'context.udp.backend = fast' topic msg
expect_err 1 "'receiver\.udp\.nak_timeout_ms = 0'" flit-sub -C 'receiver.udp.nak_timeout_ms = 0' -T 1 topic

# ---- pub -> sub over shm ---------------------------------------------------
[ -w /dev/shm ] || skip "/dev/shm not writable"
topic="flit-test-cli.$$"
timeout 20 "$D/flit-sub" -t shm --count 1 --timeout 5 -C 'receiver.discovery_ms = 20' \
  "$topic" >"$tmp/sub.out" 2>"$tmp/sub.err" &
bg=$!
if ! timeout 20 "$D/flit-pub" -t shm --wait-receivers 1 --timeout 5 -C 'shm.capacity = 64K' \
    "$topic" 'hello "cli"' 2>"$tmp/pub.err"; then
  fail "flit-pub exited $?"; sed 's/^/    | /' "$tmp/pub.err"
fi
wait "$bg"; rc=$?; bg=
if [ "$rc" -ne 0 ]; then
  fail "flit-sub exited $rc"; sed 's/^/    | /' "$tmp/sub.err"
elif ! grep -q "^$topic seq=0 source=shm:.* len=11 \"hello \\\\\"cli\\\\\"\"\$" "$tmp/sub.out"; then
  fail "flit-sub printed something else:"; sed 's/^/    | /' "$tmp/sub.out"
else
  echo "ok: flit-pub -> flit-sub: $(grep seq= "$tmp/sub.out")"
fi

# Pattern subscription, JSON output, timeout before --count: exit 1.
timeout 20 "$D/flit-sub" --json --count 2 --timeout 5 "flit-test-cli.$$.*" >"$tmp/sub.out" 2>"$tmp/sub.err" &
bg=$!
timeout 20 "$D/flit-pub" --wait-receivers 1 --timeout 5 "flit-test-cli.$$.a" one 2>"$tmp/pub.err" || fail "flit-pub (pattern) exited $?"
wait "$bg"; rc=$?; bg=
[ "$rc" -eq 1 ] || fail "flit-sub --count 2 with one message exited $rc, expected 1 (timeout)"
grep -q '"kind":"data".*"payload":"one"' "$tmp/sub.out" || { fail "pattern subscription: no JSON data line"; sed 's/^/    | /' "$tmp/sub.out"; }

# SIGTERM/SIGINT: flit-pub closes its source cleanly (the subscriber gets a
# plain EOS, not source-died); exit 0 when everything was sent (it ends the
# linger), 1 with a message before
topic="flit-test-cli.$$.sig"
timeout 20 "$D/flit-sub" -t shm --timeout 8 -C 'receiver.discovery_ms = 20' "$topic" >"$tmp/sub.out" 2>"$tmp/sub.err" &
bg=$!
timeout 20 "$D/flit-pub" -t shm --wait-receivers 1 --timeout 5 --linger 60000 "$topic" one >"$tmp/pub.out" 2>"$tmp/pub.err" &
pp=$!
i=0; while ! grep -q ' seq=0 ' "$tmp/sub.out" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
t0=$(date +%s%N); kill -TERM "$pp"; wait "$pp"; rc=$?; ms=$(( ($(date +%s%N) - t0) / 1000000 ))
i=0; while ! grep -q ' EOS ' "$tmp/sub.out" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
kill -INT "$bg" 2>/dev/null; wait "$bg"; bg=
if [ $rc -eq 0 ] && [ $ms -lt 2000 ] && grep -q "^$topic EOS source=shm:[^ ]*\$" "$tmp/sub.out"; then
  echo "ok: SIGTERM ends flit-pub's linger at once (exit 0, $ms ms), the subscriber gets a clean EOS"
else
  fail "SIGTERM while lingering: exit $rc after $ms ms"; sed 's/^/    | /' "$tmp/sub.out" "$tmp/pub.err"
fi
timeout 20 "$D/flit-pub" -t shm --wait-receivers 1 --timeout 10 "$topic.none" one >"$tmp/pub.out" 2>"$tmp/pub.err" &
pp=$!
sleep 0.3; kill -INT "$pp"; wait "$pp"; rc=$?
if [ $rc -eq 1 ] && grep -q "interrupted while waiting for receivers (the source closed cleanly)" "$tmp/pub.err"; then
  echo "ok: SIGINT while waiting for receivers: exit 1, said"
else
  fail "SIGINT while waiting for receivers: exit $rc"; sed 's/^/    | /' "$tmp/pub.err"
fi

# ---- JSON results ----------------------------------------------------------
KEYS="tool transport size count min_ns avg_ns p50_ns p99_ns p999_ns max_ns stddev_ns clock mode"
check_json() {  # FILE KEY...: one JSON object per line, each with the keys
  local file=$1; shift
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$file" "$@" <<'EOF' || return 1
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
assert lines, "no output"
for l in lines:
    o = json.loads(l)
    missing = [k for k in sys.argv[2:] if k not in o]
    assert not missing, f"missing keys {missing} in {l}"
EOF
  else
    local k
    for k in "$@"; do grep -q "\"$k\":" "$file" || { echo "missing key $k"; return 1; }; done
  fi
}

if [ "$(nproc)" -lt 2 ]; then
  echo "note: one CPU: the pinned ping-pong runs are left out"
else
  if timeout 60 "$D/flit-pong" -t shm -n 2000 --json >"$tmp/pong.json" 2>"$tmp/pong.err"; then
    check_json "$tmp/pong.json" $KEYS && echo "ok: flit-pong JSON: $(cat "$tmp/pong.json")" ||
      { fail "flit-pong JSON"; cat "$tmp/pong.json"; }
  else
    fail "flit-pong -n 2000 exited $?"; sed 's/^/    | /' "$tmp/pong.err"
  fi
  if timeout 60 "$D/flit-floor" -n 2000 -w 100 --json >"$tmp/floor.json" 2>"$tmp/floor.err"; then
    check_json "$tmp/floor.json" tool size count min_ns p50_ns p999_ns clock mode ||
      { fail "flit-floor JSON"; cat "$tmp/floor.json"; }
  else
    fail "flit-floor exited $?"; sed 's/^/    | /' "$tmp/floor.err"
  fi
  # ring mode: 20000 records wrap the 1 MiB rings (512 B: 11 times, 4096 B:
  # 80 times), every record checked for sequence and size
  for s in 0 16 512 4096; do
    if timeout 60 "$D/flit-floor" --lines ring -s $s -n 20000 -w 100 --json >"$tmp/ring.json" 2>"$tmp/ring.err"; then
      check_json "$tmp/ring.json" tool size count min_ns p50_ns clock mode &&
        grep -q "\"size\":$s," "$tmp/ring.json" && grep -q '"mode":"ring,' "$tmp/ring.json" &&
        echo "ok: flit-floor --lines ring -s $s" || { fail "flit-floor ring JSON"; cat "$tmp/ring.json"; }
    else
      fail "flit-floor --lines ring -s $s exited $?"; sed 's/^/    | /' "$tmp/ring.err"
    fi
  done
  # udp mode on loopback: a forked peer answers every datagram, every path
  for b in sockets io_uring io_uring+poll io_uring+ring-send io_uring+poll+ring-send; do
    if timeout 60 "$D/flit-floor" --lines udp -b $b -s 100 -n 3000 -w 100 --port $((20000 + $$ % 20000)) \
        --json >"$tmp/udp.json" 2>"$tmp/udp.err"; then
      check_json "$tmp/udp.json" tool size count min_ns p50_ns clock mode &&
        grep -q '"size":100,' "$tmp/udp.json" && grep -q "\"mode\":\"udp,$b," "$tmp/udp.json" &&
        echo "ok: flit-floor --lines udp -b $b" || { fail "flit-floor udp JSON"; cat "$tmp/udp.json"; }
    else
      fail "flit-floor --lines udp -b $b exited $?"; sed 's/^/    | /' "$tmp/udp.err"
    fi
  done
fi
if timeout 60 "$D/flit-thru" -t shm -n 100000 --json >"$tmp/thru.json" 2>"$tmp/thru.err"; then
  check_json "$tmp/thru.json" tool transport size count msgs_per_sec clock mode side ||
    { fail "flit-thru JSON"; cat "$tmp/thru.json"; }
  grep '"side":"receiver"' "$tmp/thru.json" | grep -q '"gaps":0,"dupes":0' || fail "flit-thru: sequence errors"
else
  fail "flit-thru -n 100000 exited $?"; sed 's/^/    | /' "$tmp/thru.err"
fi

# ---- flit-compare (a script in tools/): misuse exits 2 with usage, before
# it needs root or builds anything
C="$(cd "$(dirname "$0")/.." && pwd)/tools/flit-compare"
compare_misuse() {
  timeout 30 "$C" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -eq 2 ] && grep -q '^Usage: flit-compare' "$tmp/err"; then echo "ok: flit-compare $* -> 2"
  else fail "flit-compare $* exited $rc (want 2 with usage): $(head -2 "$tmp/err")"; fi
}
compare_misuse --no-such-option
compare_misuse --link star
compare_misuse --link
compare_misuse --netns a --peer-netns b --link direct
compare_misuse --netns a
compare_misuse --thru-rps maybe
compare_misuse --rdma maybe
compare_misuse --rdma-count many
compare_misuse --netns a --peer-netns b --thru-rps on
"$C" --help >"$tmp/out" 2>&1 && grep -q '^Usage: flit-compare' "$tmp/out" || fail "flit-compare --help"

finish
