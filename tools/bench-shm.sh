#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# bench-shm: where shm latency goes.  Interleaves, round after round, the
# one-line and two-line floors (flit-floor), the shm record protocol alone
# (flit-floor --lines ring) and flit-pong -t shm, at each size, so that every
# ratio compares runs made seconds apart; prints each round's p50s and, per
# path, the median p50 and the median (best-worst) ratio to the one-line
# floor of the same round.
#
#   tools/bench-shm.sh [--rounds N] [--sizes "16 512"] [--count N] [--cpus A,B]
#
#   --rounds N   rounds (default 8)
#   --sizes L    message sizes (default "16 512")
#   --count N    round trips per run (default 200000)
#   --cpus A,B   the two CPUs (default 0,1)
# BUILD (environment) names the build directory (default build).
# Exit: 0 ok, 1 a run failed, 2 misuse.
set -u -o pipefail
BUILD=${BUILD:-build}
ROUNDS=8 SIZES="16 512" COUNT=200000 CPUS=0,1
usage() { sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || usage; ROUNDS=$2; shift 2 ;;
    --sizes) [ $# -ge 2 ] && [[ $2 =~ ^[0-9\ ]+$ ]] || usage; SIZES=$2; shift 2 ;;
    --count) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || usage; COUNT=$2; shift 2 ;;
    --cpus) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+,[0-9]+$ ]] || usage; CPUS=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "bench-shm: unknown argument '$1'" >&2; usage ;;
  esac
done
D=$BUILD/tools
for t in flit-floor flit-pong; do
  [ -x "$D/$t" ] || { echo "bench-shm: $D/$t not built (make)" >&2; exit 1; }
done
p50() { "$@" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["p50_ns"])'; }
names="floor-1-line floor-2-lines"
for s in $SIZES; do names="$names ring-${s}B flit-pong-${s}B"; done
echo "# bench-shm: $ROUNDS rounds, $COUNT round trips per run, CPUs $CPUS; p50 RTT/2 in ns"
echo "# $names"
for r in $(seq "$ROUNDS"); do
  row="$(p50 "$D/flit-floor" -c "$CPUS" -n "$COUNT") $(p50 "$D/flit-floor" -c "$CPUS" -l 2 -n "$COUNT")" || exit 1
  for s in $SIZES; do
    row="$row $(p50 "$D/flit-floor" -c "$CPUS" -l ring -s "$s" -n "$COUNT") $(p50 "$D/flit-pong" -t shm -s "$s" -c "$CPUS" -n "$COUNT")" || exit 1
  done
  echo "$row"
done | NAMES="$names" python3 -c '
import os, sys, statistics as st
names = os.environ["NAMES"].split()
rows = []
for l in sys.stdin:
    if l.startswith("#"):
        continue
    v = l.split()
    if len(v) != len(names):
        sys.exit("bench-shm: a run failed (round %d)" % (len(rows) + 1))
    rows.append([float(x) for x in v]); print(l.rstrip())
print()
print("%-18s %10s   %s" % ("path", "p50 median", "/ one-line floor: median (best-worst)"))
for i, n in enumerate(names):
    q = [r[i] / r[0] for r in rows]
    print("%-18s %10.1f   %.2f (%.2f-%.2f)" % (n, st.median(r[i] for r in rows), st.median(q), min(q), max(q)))
'
