#!/usr/bin/env bash
# flit demo (`make demo`): the core-to-core floor, shm ping-pong latency for
# a few message sizes, and shm throughput 1:1 unbatched and batched, all
# pinned, printed as one table.  Runs in well under a minute.
#
#   BUILD=build tools/demo.sh        environment: CPUS=A,B  COUNT=N  THRU_COUNT=N
set -u
BUILD=${BUILD:-build}
T="$BUILD/tools"
CPUS=${CPUS:-0,1}
COUNT=${COUNT:-200000}          # round trips per ping-pong size
THRU_COUNT=${THRU_COUNT:-5000000}
SIZES="16 64 256 512"

out=$(mktemp -d /tmp/flit-demo.XXXXXX)
trap 'rm -rf "$out"' EXIT

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

run floor "$T/flit-floor" --cpus "$CPUS" -n 1000000 --json
for s in $SIZES; do
  run pong "$T/flit-pong" -t shm -s "$s" -n "$COUNT" --cpus "$CPUS" --json
done
run thru "$T/flit-thru" -t shm -s 16 -n "$THRU_COUNT" --cpus "$CPUS" --json
run thru "$T/flit-thru" -t shm -s 16 -n "$((THRU_COUNT * 2))" --batch --cpus "$CPUS" --json

if ! command -v python3 >/dev/null 2>&1; then
  echo "(python3 not found: raw results)"
  cat "$out"/floor.json "$out"/pong.json "$out"/thru.json
  exit 0
fi

python3 - "$out" <<'EOF'
import json, sys, os

d = sys.argv[1]
def load(name):
    with open(os.path.join(d, name + ".json")) as f:
        return [json.loads(l) for l in f if l.strip()]

floor = load("floor")[0]
pong = load("pong")
thru = load("thru")

print(f"shm ping-pong latency, RTT/2 in ns  (clock {pong[0]['clock']}, "
      f"mode {pong[0]['mode']}, {pong[0]['count']} round trips per size)")
print(f"floor = core-to-core cache-line ping-pong on the same CPUs "
      f"({floor['mode']}, {floor['count']} round trips)")
hdr = (f"{'size':>7} {'min':>8} {'avg':>8} {'median':>8} {'p99':>8} {'p99.9':>8} "
       f"{'max':>10} {'stddev':>9}  {'floor p50':>9} {'p50/floor':>9} {'avg/floor':>9}")
print(hdr)
print("-" * len(hdr))
def row(label, r):
    return (f"{label:>7} {r['min_ns']:8.1f} {r['avg_ns']:8.1f} {r['p50_ns']:8.1f} "
            f"{r['p99_ns']:8.1f} {r['p999_ns']:8.1f} {r['max_ns']:10.1f} {r['stddev_ns']:9.1f}")
print(row("floor", floor) + f"  {floor['p50_ns']:9.1f} {1:8.2f}x {1:8.2f}x")
for r in pong:
    print(row(f"{r['size']} B", r) +
          f"  {floor['p50_ns']:9.1f} {r['p50_ns'] / floor['p50_ns']:8.2f}x "
          f"{r['avg_ns'] / floor['avg_ns']:8.2f}x")
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
EOF
