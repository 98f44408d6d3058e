#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# bench-python: ping-pong over shm from Python (python -m flit.pong, the
# ctypes binding in python/) against the C flit-pong, interleaved round after
# round, with the cache-line floor measured in the same round.  Per round:
#   floor      flit-floor: one shared cache line, the physical bound
#   C  <-> C   flit-pong -t shm (ping and pong in C)
#   C  <-> Py  flit-pong --role ping against python -m flit.pong --role pong
#              (Python reflects; the C ping measures, TSC clock)
#   Py <-> C   python -m flit.pong --role ping against flit-pong --role pong
#              (Python measures, perf_counter_ns)
#   Py <-> Py  both sides Python
# Every side spins and is pinned (ping on A, pong on B); publishers are
# unbatched on a receiver-paced ring.  Prints each run's p50/p99 (RTT/2, ns),
# then per path the median p50 and p99 over the rounds and the median of each
# round's p50 ratio to C<->C and to the floor.
#
#   tools/bench-python.sh [--rounds N] [--size S] [--count N] [--py-count N] [--cpus A,B]
#
#   --rounds N     rounds (default 3)
#   --size S       message size in bytes, >= 8 (default 16)
#   --count N      round trips of flit-floor and C <-> C (default 200000)
#   --py-count N   round trips of the runs with a Python side (default 50000)
#   --cpus A,B     the two CPUs (default 0,1)
# BUILD (environment) names the build directory (default build); PYTHON the
# interpreter (default Debian's /usr/bin/python3, else python3).  The package
# is used from python/ of the tree, with FLIT_LIBRARY=$BUILD/libflit.so.0.
# Exit: 0 ok, 1 a run failed, 2 misuse.
set -u -o pipefail
BUILD=${BUILD:-build}
PY=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)}
ROUNDS=3 SIZE=16 COUNT=200000 PYCOUNT=50000 CPUS=0,1
usage() { sed -n '3,28p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
num() { [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]]; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) num "$@" || usage; ROUNDS=$2; shift 2 ;;
    --size) num "$@" && [ "$2" -ge 8 ] || usage; SIZE=$2; shift 2 ;;
    --count) num "$@" || usage; COUNT=$2; shift 2 ;;
    --py-count) num "$@" || usage; PYCOUNT=$2; shift 2 ;;
    --cpus) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+,[0-9]+$ ]] || usage; CPUS=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "bench-python: unknown argument '$1'" >&2; usage ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=$BUILD/tools
for t in flit-floor flit-pong; do
  [ -x "$D/$t" ] || { echo "bench-python: $D/$t not built (make tools)" >&2; exit 1; }
done
[ -e "$BUILD/libflit.so.0" ] || { echo "bench-python: $BUILD/libflit.so.0 not built (make lib)" >&2; exit 1; }
export FLIT_LIBRARY=$(cd "$BUILD" && pwd)/libflit.so.0
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export FLIT_CONTEXT_TRANSPORTS=shm
"$PY" -c 'import flit' || { echo "bench-python: $PY cannot import flit from python/" >&2; exit 1; }
A=${CPUS%,*} B=${CPUS#*,}
W=10000
tmp=$(mktemp -d /tmp/flit-bench-python.XXXXXX)
bg=
cleanup() { [ -n "$bg" ] && kill "$bg" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# one JSON line on stdout, or fail naming the run
json() {
  local what=$1; shift
  if ! "$@" >"$tmp/out" 2>"$tmp/err"; then
    echo "bench-python: $what failed:" >&2; sed 's/^/  | /' "$tmp/err" >&2; return 1
  fi
  tail -1 "$tmp/out"
}
# json of a ping run against a pong started first (in the background)
pair() {
  local what=$1 pong=$2; shift 2
  $pong >"$tmp/pong.out" 2>"$tmp/pong.err" &
  bg=$!
  local out rc=0
  out=$(json "$what" "$@") || rc=1
  if ! wait "$bg"; then
    [ $rc -eq 0 ] && { echo "bench-python: $what: the pong failed:" >&2; sed 's/^/  | /' "$tmp/pong.err" >&2; }
    rc=1
  fi
  bg=
  [ $rc -eq 0 ] && echo "$out"
  return $rc
}

echo "# bench-python: $ROUNDS rounds; shm, $SIZE-byte messages, unbatched, paced, spinning; ping on CPU $A, pong on CPU $B"
echo "# round trips: floor and C<->C $COUNT, with a Python side $PYCOUNT (warm-up $W); RTT/2 in ns"
echo "# $("$PY" -c 'import sys, platform; print("python", platform.python_version(), sys.implementation.name, sys.executable)'); flit binding: ctypes"
echo "# load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cpus online, kernel $(uname -r)"
for r in $(seq "$ROUNDS"); do
  P=benchpy.$$.$r
  echo "floor $(json floor "$D/flit-floor" -c "$CPUS" -n "$COUNT" --json)" || exit 1
  echo "c-c $(json 'C<->C' "$D/flit-pong" -t shm -s "$SIZE" -c "$CPUS" -n "$COUNT" -w "$W" --json)" || exit 1
  echo "c-py $(pair 'C<->Py' "$PY -m flit.pong --role pong -p $P.1 -s $SIZE --cpu $B" \
        "$D/flit-pong" --role ping -p "$P.1" -s "$SIZE" -c "$A" -n "$PYCOUNT" -w "$W" --json)" || exit 1
  echo "py-c $(pair 'Py<->C' "$D/flit-pong --role pong -p $P.2 -s $SIZE -c $B" \
        "$PY" -m flit.pong --role ping -p "$P.2" -s "$SIZE" --cpu "$A" -n "$PYCOUNT" -w "$W" --json)" || exit 1
  echo "py-py $(pair 'Py<->Py' "$PY -m flit.pong --role pong -p $P.3 -s $SIZE --cpu $B" \
        "$PY" -m flit.pong --role ping -p "$P.3" -s "$SIZE" --cpu "$A" -n "$PYCOUNT" -w "$W" --json)" || exit 1
done | ROUNDS=$ROUNDS "$PY" -c '
import json, os, sys, statistics as st
names = {"floor": "floor, one cache line", "c-c": "C  <-> C  (flit-pong)",
         "c-py": "C  <-> Py (Python pong)", "py-c": "Py <-> C  (Python ping)",
         "py-py": "Py <-> Py"}
runs = {k: [] for k in names}
print("%-6s %-26s %8s %8s %8s" % ("round", "path", "p50", "p99", "p99.9"))
for line in sys.stdin:
    if line.startswith("#"):
        print(line.rstrip()); continue
    key, _, js = line.partition(" ")
    if not js.strip():
        sys.exit("bench-python: a run failed")
    d = json.loads(js)
    runs[key].append(d)
    print("%-6d %-26s %8.0f %8.0f %8.0f" % (len(runs[key]), names[key], d["p50_ns"], d["p99_ns"], d["p999_ns"]))
n = int(os.environ["ROUNDS"])
if any(len(v) != n for v in runs.values()):
    sys.exit("bench-python: a run failed")
print()
print("| path | p50 (median of %d) | p99 (median) | p50 / C<->C | p50 / floor |" % n)
print("|---|---|---|---|---|")
for k, label in names.items():
    p50 = st.median(d["p50_ns"] for d in runs[k])
    p99 = st.median(d["p99_ns"] for d in runs[k])
    rc = st.median(a["p50_ns"] / b["p50_ns"] for a, b in zip(runs[k], runs["c-c"]))
    rf = st.median(a["p50_ns"] / b["p50_ns"] for a, b in zip(runs[k], runs["floor"]))
    print("| %s | %.0f | %.0f | %.2f | %.1f |" % (label, p50, p99, rc, rf))
'
