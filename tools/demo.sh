#!/usr/bin/env bash
# flit demo (`make demo`): the core-to-core floor, shm ping-pong latency for
# a few message sizes, and shm throughput 1:1 unbatched and batched, all
# pinned, printed as one table; then the udp rows: ping-pong (32 and 256 B)
# and throughput 1:1 (32 B, unbatched and batched) across a 2-host testbed
# (tools/testbed; needs root, else "udp rows skipped: <reason>"); then
# tools/flit-compare: AF_XDP against kernel UDP (flit xdp, flit udp,
# sockperf) in one table, its plot written to results/compare.png; then
# latency under load (flit-load: shm, rates 100k..2M with reflected pings, the
# seeds' table) and every plot of tools/flit-plot over the run's JSON, written
# to results/.  Runs in about two minutes.
#
#   BUILD=build tools/demo.sh        environment: CPUS=A,B  COUNT=N  THRU_COUNT=N
#                                    ROUNDS=N (make bench: 5 rounds, each with its
#                                    own floor, then the spread of the ratios)
#                                    UDP=0 (no udp rows)  UDP_COUNT=N  UDP_SECS=S
#                                    (tools/bench-udp.sh compares udp with sockperf)
#                                    XDP=0 (no xdp comparison)  XDP_COUNT=N
#                                    RESULTS=dir (default results: compare.png, .json)
#                                    LOAD=0 (no flit-load table)  LOAD_SECS=S per point
set -u
BUILD=${BUILD:-build}
T="$BUILD/tools"
CPUS=${CPUS:-0,1}
COUNT=${COUNT:-200000}          # round trips per ping-pong size
THRU_COUNT=${THRU_COUNT:-5000000}
SIZES="16 64 256 512"
ROUNDS=${ROUNDS:-1}
UDP=${UDP:-1}
UDP_COUNT=${UDP_COUNT:-50000}   # round trips per udp ping-pong size
UDP_SECS=${UDP_SECS:-2}         # seconds per udp throughput run
UDP_SIZES="32 256"
XDP=${XDP:-1}
XDP_COUNT=${XDP_COUNT:-30000}   # round trips per flit-compare ping-pong size
RESULTS=${RESULTS:-results}
LOAD=${LOAD:-1}
LOAD_SECS=${LOAD_SECS:-1}       # seconds per flit-load (size, rate) point
here=$(cd "$(dirname "$0")" && pwd)

out=$(mktemp -d /tmp/flit-demo.XXXXXX)
base=$out
tb=
cleanup() {
  [ -n "$tb" ] && "$here/testbed" down --name "$tb" >/dev/null 2>&1
  rm -rf "$base"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run NAME CMD...: append CMD's JSON lines to $out/NAME.json; on failure show
# its stderr and stop.
run() {
  local name=$1; shift
  if ! "$@" >>"$out/$name.json" 2>"$out/$name.err"; then
    echo "demo: failed: $*" >&2
    sed 's/^/  | /' "$out/$name.err" >&2
    exit 1
  fi
}

for t in flit-floor flit-pong flit-thru; do
  [ -x "$T/$t" ] || { echo "demo: $T/$t not built (make BUILD=$BUILD tools)" >&2; exit 1; }
done

echo "flit demo — $(date '+%F %T'), kernel $(uname -r), $(nproc) CPUs online"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); threads/processes pinned to CPUs $CPUS; all waits spin"
echo

measure() {  # one round: floor, ping-pong per size, throughput
  out=$1
  run floor "$T/flit-floor" --cpus "$CPUS" -n 1000000 --json
  for s in $SIZES; do
    # the VM may move its vCPUs between host cores at any time: every size is
    # compared with a floor measured right before it
    run "floor_$s" "$T/flit-floor" --cpus "$CPUS" -n 300000 --json
    run pong "$T/flit-pong" -t shm -s "$s" -n "$COUNT" --cpus "$CPUS" --json
  done
  run thru "$T/flit-thru" -t shm -s 16 -n "$THRU_COUNT" --cpus "$CPUS" --json
  run thru "$T/flit-thru" -t shm -s 16 -n "$((THRU_COUNT * 2))" --batch --cpus "$CPUS" --json
  run floor2 "$T/flit-floor" --cpus "$CPUS" -n 1000000 --lines 2 --json
}

rounds=()
for r in $(seq 1 "$ROUNDS"); do
  mkdir -p "$base/r$r"
  measure "$base/r$r"
  rounds+=("$base/r$r")
done
out=$base

# ---- udp rows: across a 2-host testbed ----------------------------------------
# udp_rows DIR: fills DIR/udp_pong.json, DIR/udp_thru.json, or DIR/udp_skipped
# with the reason.  Never fails the demo: the shm rows stand on their own.
udp_rows() {
  local d=$1 cpu0 cpu1 s batch
  mkdir -p "$d"
  skip() { echo "$*" >"$d/udp_skipped"; }
  [ "$UDP" = 0 ] && { skip "UDP=0"; return; }
  [ "$(id -u)" -eq 0 ] || { skip "needs root (network namespaces for the testbed)"; return; }
  cpu0=${CPUS%%,*}; cpu1=${CPUS##*,}
  tb="dm$(( $$ % 1000000 ))"
  if ! "$here/testbed" up --name "$tb" --hosts 2 --owner-pid $$ >"$d/testbed.err" 2>&1; then
    skip "testbed: $(grep -v '^ ' "$d/testbed.err" | head -1)"; tb=; return
  fi
  for s in $UDP_SIZES; do
    if ! "$T/flit-pong" -t udp --netns "$tb-h1" --peer-netns "$tb-h2" -s "$s" \
        -n "$UDP_COUNT" -w 5000 --cpus "$cpu0,$cpu1" --json >>"$d/udp_pong.json" 2>"$d/udp.err"; then
      skip "flit-pong -t udp -s $s failed: $(grep -m1 . "$d/udp.err")"; return
    fi
  done
  for batch in "" --batch; do
    if ! "$T/flit-thru" -t udp --netns "$tb-h1" --peer-netns "$tb-h2" -s 32 \
        -d "$UDP_SECS" --cpus "$cpu0,$cpu1" $batch --json >>"$d/udp_thru.json" 2>"$d/udp.err"; then
      skip "flit-thru -t udp ${batch:-(unbatched)} failed: $(grep -m1 . "$d/udp.err")"; return
    fi
  done
  "$here/testbed" down --name "$tb" >/dev/null 2>&1; tb=
}
udp_rows "$out/udp"

if ! command -v python3 >/dev/null 2>&1; then
  echo "(python3 not found: raw results)"
  cat "$out"/r*/*.json
  [ -f "$out/udp/udp_skipped" ] && echo "udp rows skipped: $(cat "$out/udp/udp_skipped")"
  cat "$out"/udp/*.json 2>/dev/null
  exit 0
fi

python3 - "$out/udp" "${rounds[@]}" <<'EOF'
import json, sys, os, statistics
udp_dir = sys.argv.pop(1)

def load(d, name):
    with open(os.path.join(d, name + ".json")) as f:
        return [json.loads(l) for l in f if l.strip()]

ratios = {}
for i, d in enumerate(sys.argv[1:], 1):
  if len(sys.argv) > 2:
    print(f"==== round {i} of {len(sys.argv) - 1}")
  floor = load(d, "floor")[0]
  floor2 = load(d, "floor2")[0]
  pong = load(d, "pong")
  thru = load(d, "thru")
  for r in pong:
    ratios.setdefault(r["size"], []).append(r["p50_ns"] / load(d, f"floor_{r['size']}")[0]["p50_ns"])

  print(f"shm ping-pong latency, RTT/2 in ns  (clock {pong[0]['clock']}, "
        f"mode {pong[0]['mode']}, {pong[0]['count']} round trips per size)")
  print(f"floor = core-to-core cache-line ping-pong on the same CPUs "
        f"({floor['mode']}); each size's ratio is to the floor measured just before it")
  hdr = (f"{'size':>7} {'min':>8} {'avg':>8} {'median':>8} {'p99':>8} {'p99.9':>8} "
         f"{'max':>10} {'stddev':>9}  {'floor p50':>9} {'p50/floor':>9} {'avg/floor':>9}")
  print(hdr)
  print("-" * len(hdr))
  def row(label, r):
      return (f"{label:>7} {r['min_ns']:8.1f} {r['avg_ns']:8.1f} {r['p50_ns']:8.1f} "
              f"{r['p99_ns']:8.1f} {r['p999_ns']:8.1f} {r['max_ns']:10.1f} {r['stddev_ns']:9.1f}")
  print(row("floor", floor) + f"  {floor['p50_ns']:9.1f} {1:8.2f}x {1:8.2f}x")
  print(row("floor2", floor2) + f"  {floor['p50_ns']:9.1f} {floor2['p50_ns'] / floor['p50_ns']:8.2f}x "
        f"{floor2['avg_ns'] / floor['avg_ns']:8.2f}x   (one line per direction)")
  for r in pong:
      fs = load(d, f"floor_{r['size']}")[0]
      print(row(f"{r['size']} B", r) +
            f"  {fs['p50_ns']:9.1f} {r['p50_ns'] / fs['p50_ns']:8.2f}x "
            f"{r['avg_ns'] / fs['avg_ns']:8.2f}x")
  print()
  print("shm throughput, 16-byte messages, 1 publisher : 1 receiver")
  for r in thru:
      if r.get("side") == "receiver":
          batched = "batched" if ",batched," in r["mode"] else "unbatched"
          checks = "ok" if r["gaps"] == r["dupes"] == r["missing"] == 0 else "SEQUENCE ERRORS"
          print(f"  {batched:>9}: received {r['msgs_per_sec'] / 1e6:7.2f} M msgs/s "
                f"({r['mb_per_sec']:7.1f} MB/s), {r['count']} msgs in {r['secs']:.3f} s, "
                f"sequence {checks}")
      elif r.get("side") == "sender":
          print(f"  {'':>9}  sender   {r['msgs_per_sec'] / 1e6:7.2f} M msgs/s, "
                f"back-pressured {r['back_pressured']} times")
  print()
  print(f"load after: {thru[-1]['load']}  (a spinning neighbour on these CPUs shows up in max and avg)")
if len(sys.argv) > 2:
  print(f"==== shm p50 / floor p50 over {len(sys.argv) - 1} rounds (each against the floor measured just before it)")
  for size, rs in sorted(ratios.items()):
    print(f"  {size:>5} B: median {statistics.median(rs):.2f}x  best {min(rs):.2f}x  worst {max(rs):.2f}x")

print()
skipped = os.path.join(udp_dir, "udp_skipped")
if os.path.exists(skipped):
  print("udp rows skipped: " + open(skipped).read().strip())
else:
  upong = load(udp_dir, "udp_pong")
  uthru = load(udp_dir, "udp_thru")
  print(f"udp ping-pong latency across a 2-host testbed (network namespaces, veth + bridge), "
        f"RTT/2 in ns  (mode {upong[0]['mode']}, {upong[0]['count']} round trips per size)")
  print(f"{'size':>7} {'min':>8} {'avg':>8} {'median':>8} {'p99':>8} {'p99.9':>8} "
        f"{'max':>10} {'stddev':>9}  {'NAKs':>5} {'retx':>5}")
  for r in upong:
    print(f"{str(r['size']) + ' B':>7} {r['min_ns']:8.1f} {r['avg_ns']:8.1f} {r['p50_ns']:8.1f} "
          f"{r['p99_ns']:8.1f} {r['p999_ns']:8.1f} {r['max_ns']:10.1f} {r['stddev_ns']:9.1f}  "
          f"{r.get('naks_sent', 0):5} {r.get('retransmissions', 0):5}")
  print()
  print("udp throughput across the testbed, 32-byte messages, 1 publisher : 1 receiver "
        "(messages received; the publisher keeps a window)")
  for r in uthru:
    if r.get("side") == "receiver":
      batched = "batched" if ",batched," in r["mode"] else "unbatched"
      checks = "ok" if r["gaps"] == r["dupes"] == r["missing"] == r["lost"] == 0 else "LOSS OR SEQUENCE ERRORS"
      print(f"  {batched:>9}: received {r['msgs_per_sec'] / 1e6:7.2f} M msgs/s "
            f"({r['mb_per_sec']:7.1f} MB/s), {r['count']} msgs in {r['secs']:.3f} s, "
            f"sequence {checks}, NAKs {r['naks_sent']}, lost {r['msgs_lost']}")
    elif r.get("side") == "sender":
      print(f"  {'':>9}  sender   {r['msgs_per_sec'] / 1e6:7.2f} M msgs/s, "
            f"retransmitted {r['retransmissions']}, window waits {r['window_waits']}")
  print("  (tools/bench-udp.sh: the same against sockperf, more sizes)")
EOF

# ---- AF_XDP against kernel UDP: tools/flit-compare ---------------------------
if [ "$XDP" = 1 ]; then
  echo
  if [ "$(id -u)" -ne 0 ]; then
    echo "xdp comparison skipped: needs root (namespaces, XDP, AF_XDP)"
  elif ! "$here/flit-compare" --build "$BUILD" --sizes "32 256" --count "$XDP_COUNT" --time 2 \
       --thru-sizes 32 --thru-duration "$UDP_SECS" --plot "$RESULTS/compare.png" \
       --out "$RESULTS/compare.json"; then
    echo "xdp comparison failed (see above)"
  fi
fi

# ---- latency under load: flit-load, the seeds' table ---------------------------
mkdir -p "$RESULTS"
cat "$out"/r*/pong.json >"$RESULTS/pong.json" 2>/dev/null
if [ "$LOAD" = 1 ] && [ -x "$T/flit-load" ]; then
  echo
  echo "latency under load: shm, rate-controlled publisher with reflected pings (flit-load)"
  if "$T/flit-load" -t shm --sizes "32 256" --rates "100k 500k 1M 2M" --duration "$LOAD_SECS" \
      --cpus "$CPUS" --json >"$RESULTS/load.json" 2>"$out/load.err"; then
    python3 - "$RESULTS/load.json" <<'EOF2'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
us = lambda r, k: f"{r[k] / 1000:10.3f}" if k in r else f"{'-':>10}"
size = None
for r in rows:
    if r["size"] != size:
        size = r["size"]
        print(f"\n  {r['transport']}, {size}-byte messages; RTT/2 in microseconds (clock {r.get('clock')})")
        print(f"  {'Msgs/sec':>10} {'Min':>10} {'Mean':>10} {'Median':>10} {'99.9%':>10} {'Max':>10} "
              f"{'StdDev':>10} {'achieved':>11} {'pings':>6} {'lost':>5} {'stalled':>7} {'Mean*':>8}")
    u = r.get("unstalled", {})
    print(f"  {r['rate']:10,.0f} " + " ".join(us(r, k) for k in
          ("min_ns", "avg_ns", "p50_ns", "p999_ns", "max_ns", "stddev_ns")) +
          f" {r['msgs_per_sec']:11,.0f} {r.get('count', 0):6} {r.get('pings_lost', 0):5}" +
          f" {r.get('pings_stalled', '-'):>7}" +
          (f" {u['avg_ns'] / 1000:8.3f}" if "avg_ns" in u else f" {'-':>8}") +
          ("  CPU-bound" if r.get("cpu_bound") else ""))
print("\n  stalled: pings that met a stall of either side (a loop turn over 50 us: this VM's"
      "\n  kernel threads, its host); Mean*: the mean RTT/2 of the others (flit-load(1))")
EOF2
    grep -h "CPU-bound after" "$out/load.err" | sed 's/^/  /'
  else
    echo "flit-load failed:"; sed 's/^/  | /' "$out/load.err"
  fi
fi

# ---- plots ----------------------------------------------------------------------
if command -v gnuplot >/dev/null 2>&1; then
  files=()
  for f in pong load compare; do [ -s "$RESULTS/$f.json" ] && files+=("$RESULTS/$f.json"); done
  if [ ${#files[@]} -gt 0 ]; then
    echo
    echo "plots (tools/flit-plot):"
    # compare.png is flit-compare's own (CDF of RTT/2, bars beside it)
    for k in size cdf rate; do
      "$here/flit-plot" --kind "$k" -o "$RESULTS" "${files[@]}" 2>&1 | sed 's/^/  /'
    done
  fi
fi
