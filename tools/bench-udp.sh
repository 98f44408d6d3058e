#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# bench-udp: flit's udp transport against kernel UDP measured by sockperf,
# across two hosts of a testbed (tools/testbed: two network namespaces cabled
# back to back, or with --link bridge through the testbed's switch, a
# software bridge on the same CPUs; see docs/TESTBED.md).  Needs root,
# sockperf and python3.
#
# For each size, interleaved in one run (so both see the same machine):
#   sockperf server in host 2 (CPU 1) and sockperf ping-pong from host 1
#   (CPU 0), both spinning (--nonblocked: recvfrom() returns EAGAIN and is
#   called again, no sleeping), RTT/2 percentiles as sockperf prints them;
#   then flit-pong -t udp, ping in host 1 on CPU 0, pong in host 2 on CPU 1,
#   and right after it the same path's floor for that backend: a bare UDP
#   ping-pong with the calls flit makes, without flit (flit-floor -l udp:
#   recvfrom/sendto, or io_uring's multishot recvmsg or poll, and sendto or
#   a SEND through the ring, as the flit run's configuration has them).
# Then, per size, sockperf throughput (one datagram per message: the kernel's
# rate, the server's count of what it received) and flit-thru -t udp 1:1
# (publisher host 1 CPU 0, receiver host 2 CPU 1), unbatched and batched,
# messages per second received.
#
# With --backend io_uring (or both) every flit run is made with each backend,
# one right after the other, and the tables give io_uring's ratio to the
# sockets backend of the same round.  --backend all adds io_uring's
# readiness receive (io_uring+poll: context.udp.uring_recv = poll); a list
# ("sockets io_uring+poll io_uring+ring-send") names the paths to run, as
# flit-floor -b names them (+ring-send: context.udp.uring_send = ring).  --rounds N repeats everything N times,
# interleaved, each round after the cache-line floor between CPUs 0 and 1
# (flit-floor: the machine's state, near or far cores), and ends with the
# medians of the per-round ratios.
#
# Every result is a JSON line in the results file (sockperf's too, in the
# same shape: tool "sockperf"); the table is printed at the end.
#
#   tools/bench-udp.sh [--build DIR] [--backend sockets|io_uring|both|all|"LIST"]
#                      [--rounds N] [--sizes "32 64"]
#                      [--count N] [--time S] [--thru-sizes "32 256"]
#                      [--thru-duration S] [--sockperf-unicast] [--out FILE]
#                      [--link direct|bridge]
#                      [-C|--config LINE]...  (passed to flit-pong and flit-thru,
#                      e.g. -C 'context.udp.service = poll')
#
# Exit: 0 ok, 1 failure (a run failed, or no root / no sockperf / no testbed).
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-build}
SIZES="32 64 256 1024"
THRU_SIZES="32 256"
COUNT=50000                 # flit-pong round trips per size
SP_TIME=3                   # sockperf seconds per size
THRU_DURATION=2             # flit-thru seconds per run
BACKENDS="sockets"
ROUNDS=1
SP_MCAST=1
LINK=direct
OUT=
PORT=11111
# Like for like: sockperf leaves multicast loopback off (its default,
# --mc-loopback-enable turns it on); flit's default is on (same-host
# subscribers hear the group), which costs the sender a looped copy of every
# datagram.  A later -C can turn it back on.
FLIT_CFG=(-C "context.udp.loopback = false")

usage() {
  sed -n '/^#   tools\/bench-udp.sh/,/^# Exit/p' "$0" | sed 's/^# \{0,1\}//' | sed '$d'
}
die() { echo "bench-udp: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --backend)
      case $2 in
        io_uring|both) BACKENDS="sockets io_uring" ;;
        all) BACKENDS="sockets io_uring io_uring+poll" ;;
        sockets) BACKENDS="sockets" ;;
        *) BACKENDS="sockets"
           for b in ${2//,/ }; do
             case $b in
               sockets) ;;
               io_uring|io_uring+poll|io_uring+ring-send|io_uring+poll+ring-send) BACKENDS="$BACKENDS $b" ;;
               *) echo "bench-udp: bad --backend '$2': sockets, io_uring, both, all, or a list of" \
                       "sockets, io_uring, io_uring+poll, io_uring+ring-send, io_uring+poll+ring-send" >&2
                  usage >&2; exit 2 ;;
             esac
           done ;;
      esac
      shift 2 ;;
    --rounds)
      case ${2:-} in
        ''|*[!0-9]*|0) echo "bench-udp: bad --rounds '${2:-}': a count from 1" >&2; usage >&2; exit 2 ;;
      esac
      ROUNDS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --thru-sizes) THRU_SIZES=$2; shift 2 ;;
    --count) COUNT=$2; shift 2 ;;
    --time) SP_TIME=$2; shift 2 ;;
    --thru-duration) THRU_DURATION=$2; shift 2 ;;
    --sockperf-unicast) SP_MCAST=0; shift ;;
    --link)
      case ${2:-} in
        direct|bridge) LINK=$2 ;;
        *) echo "bench-udp: bad --link '${2:-}': direct or bridge" >&2; usage >&2; exit 2 ;;
      esac
      shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -C|--config) FLIT_CFG+=(-C "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench-udp: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

T="$BUILD/tools"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces: CAP_SYS_ADMIN and CAP_NET_ADMIN)"
command -v sockperf >/dev/null 2>&1 || die "sockperf not found (make deps installs it)"
command -v python3 >/dev/null 2>&1 || die "python3 not found"
for t in flit-pong flit-thru flit-floor; do
  [ -x "$T/$t" ] || die "$T/$t not built (make BUILD=$BUILD tools)"
done
[ "$(nproc)" -ge 2 ] || die "needs two CPUs (ping on 0, pong on 1)"

TB="$here/testbed"
NAME="bu$(( $$ % 1000000 ))"
H1="$NAME-h1"; H2="$NAME-h2"
work=$(mktemp -d /tmp/flit-bench-udp.XXXXXX)
[ -n "$OUT" ] || OUT="$work/results.json"
: >"$OUT" || die "cannot write $OUT"
srv=
cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  "$TB" down --name "$NAME" >/dev/null 2>&1
  [ "$OUT" = "$work/results.json" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$TB" up --name "$NAME" --hosts 2 --link "$LINK" --owner-pid $$ >"$work/testbed.log" 2>&1 ||
  { cat "$work/testbed.log" >&2; die "testbed up failed"; }
A1=10.77.0.1; A2=10.77.0.2
# sockperf: multicast both ways, as flit sends (or unicast to host 2)
if [ "$SP_MCAST" = 1 ]; then
  SP_DEST=239.192.78.1
  SP_SRV=(-i "$SP_DEST" --mc-rx-if "$A2" --mc-tx-if "$A2")
  SP_CLI=(-i "$SP_DEST" --mc-rx-if "$A1" --mc-tx-if "$A1")
  SP_DESC="multicast $SP_DEST"
else
  SP_SRV=(-i "$A2"); SP_CLI=(-i "$A2"); SP_DESC="unicast to $A2"
fi

echo "bench-udp — $(date '+%F %T'), kernel $(uname -r), $(nproc) CPUs, testbed $NAME ($H1 $A1, $H2 $A2, $LINK link)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); host 1 side on CPU 0, host 2 side on CPU 1; every side spins"
echo "sockperf $(sockperf --version 2>&1 | sed -n 's/.*version \([^ ]*\).*/\1/p' | head -1): UDP $SP_DESC, --nonblocked, RTT/2 (no --full-rtt), ${SP_TIME} s per size"
[ ${#FLIT_CFG[@]} -gt 0 ] && echo "flit config lines: ${FLIT_CFG[*]}"
echo "results: $OUT"
echo

# sockperf_server: start a sockperf server in host 2 (pid in $srv) and wait
# until it listens (its "[SERVER] listen on" line).
sockperf_server() {
  "$TB" exec --name "$NAME" --host 2 -- taskset -c 1 \
    sockperf sr "${SP_SRV[@]}" -p "$PORT" --nonblocked >"$work/sockperf-sr.log" 2>&1 &
  srv=$!
  for _ in $(seq 1 50); do
    grep -q 'listen on' "$work/sockperf-sr.log" 2>/dev/null && break
    sleep 0.1
  done
}

# sockperf_run SIZE: one server/client pair; appends one JSON line to $OUT.
sockperf_run() {
  local size=$1 log="$work/sockperf-$1.log"
  sockperf_server
  if ! "$TB" exec --name "$NAME" --host 1 -- taskset -c 0 \
      sockperf pp "${SP_CLI[@]}" -p "$PORT" --nonblocked -m "$size" -t "$SP_TIME" \
      >"$log" 2>&1; then
    kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=
    sed 's/^/  | /' "$log" >&2
    die "sockperf ping-pong -m $size failed"
  fi
  kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=
  "$here/sockperf-json" pp "$log" "$size" "udp,${SP_DESC%% *},nonblocked,spin,pinned=0,1" >>"$OUT" ||
    die "cannot parse sockperf's output ($log)"
}

# sockperf_tp SIZE: sockperf throughput for THRU_DURATION s; appends one JSON
# line (what the server received) to $OUT.
sockperf_tp() {
  local size=$1 log="$work/sockperf-tp-$1.log"
  sockperf_server
  if ! "$TB" exec --name "$NAME" --host 1 -- taskset -c 0 \
      sockperf tp "${SP_CLI[@]}" -p "$PORT" --nonblocked -m "$size" -t "$THRU_DURATION" \
      >"$log" 2>&1; then
    kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=
    sed 's/^/  | /' "$log" >&2
    die "sockperf throughput -m $size failed"
  fi
  sleep 0.2                         # the last datagrams
  kill -INT "$srv" 2>/dev/null      # SIGINT: the server prints its count
  for _ in $(seq 1 30); do
    grep -q 'messages received' "$work/sockperf-sr.log" && break
    sleep 0.1
  done
  kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=
  "$here/sockperf-json" tp "$log" "$work/sockperf-sr.log" "$size" \
    "udp,${SP_DESC%% *},nonblocked,spin,throughput,pinned=0,1" >>"$OUT" ||
    die "cannot parse sockperf's throughput output ($log)"
}

# flit RUN NAME ARGS...: run a tool, its JSON lines to $OUT; show stderr on failure.
flit() {
  local what=$1; shift
  if ! "$@" --json >>"$OUT" 2>"$work/$what.err"; then
    sed 's/^/  | /' "$work/$what.err" >&2
    die "failed: $*"
  fi
}

# the -C lines of a path's label (flit-floor -b names it the same)
be_cfg() {
  case $1 in
    sockets) printf '%s\n' -C "context.udp.backend = sockets" ;;
    *) printf '%s\n' -C "context.udp.backend = io_uring"
       case $1 in *+poll*) printf '%s\n' -C "context.udp.uring_recv = poll" ;; esac
       case $1 in *+ring-send*) printf '%s\n' -C "context.udp.uring_send = ring" ;; esac ;;
  esac
}

for round in $(seq 1 "$ROUNDS"); do
[ "$ROUNDS" -gt 1 ] && echo "  round $round of $ROUNDS"
printf '  floor (flit-floor, one cache line between CPUs 0 and 1)\n'
flit "floor-$round" "$T/flit-floor" -c 0,1 -n 200000
for size in $SIZES; do
  printf '  size %5s: sockperf' "$size"
  sockperf_run "$size"
  for be in $BACKENDS; do
    printf ', flit-pong (%s), bare (%s)' "$be" "$be"
    mapfile -t bec < <(be_cfg "$be")
    flit "pong-$size-$be" "$T/flit-pong" -t udp --netns "$H1" --peer-netns "$H2" \
      -s "$size" -n "$COUNT" -c 0,1 "${bec[@]}" "${FLIT_CFG[@]}"
    flit "bare-$size-$be" "$T/flit-floor" -l udp -b "$be" --netns "$H1" --peer-netns "$H2" \
      --peer "$A2" -s "$size" -n "$COUNT" -c 0,1
  done
  echo
done
for size in $THRU_SIZES; do
  printf '  sockperf throughput %s B\n' "$size"
  sockperf_tp "$size"
  for batch in "" --batch; do
    for be in $BACKENDS; do
      label=unbatched; [ -n "$batch" ] && label=batched
      printf '  flit-thru %s B, %s, %s\n' "$size" "$label" "$be"
      mapfile -t bec < <(be_cfg "$be")
      flit "thru-$size-$be$batch" "$T/flit-thru" -t udp --netns "$H1" --peer-netns "$H2" \
        -s "$size" -d "$THRU_DURATION" -c 0,1 "${bec[@]}" "${FLIT_CFG[@]}" $batch
    done
  done
done
done
echo

python3 - "$OUT" <<'EOF'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# rounds: each starts with its floor row
r = 0
is_floor = lambda x: x["tool"] == "flit-floor" and not x["mode"].startswith("udp,")
for x in rows:
    if is_floor(x):
        r += 1
    x["round"] = r
nrounds = r
floors = {x["round"]: x for x in rows if is_floor(x)}
bare = {(x["round"], x["size"], x["mode"].split(",")[1]): x for x in rows
        if x["tool"] == "flit-floor" and x["mode"].startswith("udp,")}
sp = {(x["round"], x["size"]): x for x in rows if x["tool"] == "sockperf" and "p50_ns" in x}
sptp = {(x["round"], x["size"]): x for x in rows if x["tool"] == "sockperf" and "msgs_per_sec" in x}
pong = [x for x in rows if x["tool"] == "flit-pong"]
thru = [x for x in rows if x["tool"] == "flit-thru"]
backend = lambda x: x["mode"].split(",")[2]
def generic(mode):   # the mode without the backend (a column of its own)
    f = mode.split(",")
    return ",".join(f[:2] + ["<backend>"] + f[3:])
def floor_of(rd):
    f = floors.get(rd)
    return f"{f['p50_ns']:.0f}" if f else "-"
ratios = {}          # (path, what, size) -> [path / sockets, per round]
print("udp ping-pong latency across the testbed, RTT/2 in ns (sockperf: %s; flit: %s); "
      "bare: the same path without flit, the backend's calls alone (flit-floor -l udp); "
      "floor: RTT/2 p50 of one cache line between CPUs 0 and 1 (flit-floor)"
      % (next(iter(sp.values()))["mode"] if sp else "-", generic(pong[0]["mode"]) if pong else "-"))
if pong and pong[0].get("config"):
    print("flit config: %s" % pong[0]["config"])
hdr = (f"{'round':>5} {'size':>6} {'backend':>13} | {'sockperf p50':>12} {'p99':>9} {'p99.9':>9} | "
       f"{'flit p50':>9} {'p99':>9} {'p99.9':>9} | {'flit/sockperf p50':>17} | "
       f"{'path/sockets p50':>20} {'p99.9':>6} | {'bare p50':>8} {'p99.9':>7} {'path/sockets':>16} | {'floor':>5}")
print(hdr); print("-" * len(hdr))
for x in pong:
    s = sp.get((x["round"], x["size"]))
    sps = (f"{s['p50_ns']:12.0f} {s['p99_ns']:9.0f} {s['p999_ns']:9.0f}" if s else f"{'-':>12} {'-':>9} {'-':>9}")
    ratio = f"{x['p50_ns'] / s['p50_ns']:16.2f}x" if s else f"{'-':>17}"
    so = next((y for y in pong if y["round"] == x["round"] and y["size"] == x["size"]
               and backend(y) == "sockets"), None)
    if backend(x) != "sockets" and so:
        ur = f"{x['p50_ns'] / so['p50_ns']:19.2f}x {x['p999_ns'] / so['p999_ns']:5.2f}x"
        ratios.setdefault((backend(x), "p50", x["size"]), []).append(x["p50_ns"] / so["p50_ns"])
        ratios.setdefault((backend(x), "p99.9", x["size"]), []).append(x["p999_ns"] / so["p999_ns"])
    else:
        ur = f"{'-':>20} {'-':>6}"
    b = bare.get((x["round"], x["size"], backend(x)))
    bs = bare.get((x["round"], x["size"], "sockets"))
    if b and bs and backend(x) != "sockets":
        bar = f"{b['p50_ns']:8.0f} {b['p999_ns']:7.0f} {b['p50_ns'] / bs['p50_ns']:15.2f}x"
        ratios.setdefault((backend(x), "bare p50", x["size"]), []).append(b["p50_ns"] / bs["p50_ns"])
    elif b:
        bar = f"{b['p50_ns']:8.0f} {b['p999_ns']:7.0f} {'-':>16}"
    else:
        bar = f"{'-':>8} {'-':>7} {'-':>16}"
    print(f"{x['round']:>5} {x['size']:>6} {backend(x):>13} | {sps} | {x['p50_ns']:9.0f} {x['p99_ns']:9.0f} "
          f"{x['p999_ns']:9.0f} | {ratio} | {ur} | {bar} | {floor_of(x['round']):>5}")
print()
print("udp throughput 1:1 across the testbed, messages/s received (flit: closed loop, "
      "a window; sockperf: one datagram per message, what its server counted)")
hdr = (f"{'round':>5} {'size':>6} {'backend':>13} {'batching':>9} | {'msgs/s':>10} {'MB/s':>7} | "
       f"{'NAKs':>5} {'retx':>5} {'lost':>5} {'missing':>7} | {'sender msgs/s':>13} {'window waits':>12} | "
       f"{'path/sockets':>16} | {'floor':>5}")
print(hdr); print("-" * len(hdr))
done = set()
for x in thru:
    if x["side"] != "receiver":
        continue
    key = (x["round"], x["size"])
    s = sptp.get(key)
    if s and key not in done:
        done.add(key)
        print(f"{x['round']:>5} {s['size']:>6} {'sockperf':>13} {'-':>9} | {s['msgs_per_sec']:10.0f} {s['mb_per_sec']:7.1f} | "
              f"{'-':>5} {'-':>5} {s['sent'] - s['count']:5} {'-':>7} | "
              f"{s['sent'] / s['secs']:13.0f} {'-':>12} | {'-':>16} | {floor_of(x['round']):>5}")
    snd = next(y for y in thru if y["side"] == "sender" and y["mode"] == x["mode"]
               and y["size"] == x["size"] and y["round"] == x["round"])
    b = "batched" if ",batched," in x["mode"] else "unbatched"
    so = next((y for y in thru if y["side"] == "receiver" and y["round"] == x["round"] and
               y["size"] == x["size"] and backend(y) == "sockets" and
               (",batched," in y["mode"]) == (b == "batched")), None)
    if backend(x) != "sockets" and so:
        ur = f"{x['msgs_per_sec'] / so['msgs_per_sec']:15.2f}x"
        ratios.setdefault((backend(x), b, x["size"]), []).append(x["msgs_per_sec"] / so["msgs_per_sec"])
    else:
        ur = f"{'-':>16}"
    print(f"{x['round']:>5} {x['size']:>6} {backend(x):>13} {b:>9} | {x['msgs_per_sec']:10.0f} {x['mb_per_sec']:7.1f} | "
          f"{x['naks_sent']:5} {snd['retransmissions']:5} {x['msgs_lost']:5} {x['missing']:7} | "
          f"{snd['msgs_per_sec']:13.0f} {snd['window_waits']:12} | {ur} | {floor_of(x['round']):>5}")
if ratios:
    print()
    for path in dict.fromkeys(k[0] for k in ratios):
        print(f"{path} / sockets, median of {nrounds} round(s) (latency: lower is better; throughput: higher):")
        for (p, what, size), v in ratios.items():
            if p != path:
                continue
            label = {"p50": "RTT/2 p50", "p99.9": "RTT/2 p99.9",
                     "bare p50": "bare RTT/2 p50"}.get(what, f"msgs/s {what}")
            print(f"  {size:>5} B {label:<18} {statistics.median(v):5.2f}x   (rounds: {' '.join(f'{q:.2f}' for q in v)})")
print()
print(f"load after: {rows[-1]['load']}  (another busy process on CPU 0 or 1 shows up in p99 and p99.9)")
EOF
echo "results: $OUT"
