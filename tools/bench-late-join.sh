#!/usr/bin/env bash
# Late join, measured: a source has sent N messages with source.late_join =
# K (flit-pub -L K, batched) and lingers; a subscriber (flit-sub, late join
# on by default) starts then.  Per transport: the time from starting the
# subscriber to its first retained message (process start, context,
# discovery, the join itself), how long the K retained messages took to
# arrive and at what rate, and whether the live stream followed without a
# gap.  shm on this host; udp and xdp across a direct two-host testbed.
#
#   tools/bench-late-join.sh [-n N] [-k K] [-t "shm udp xdp"] [--json FILE]
#
# Needs root for udp/xdp (network namespaces).  Timings come from reading
# flit-sub's output lines as they arrive (a pipe: tens of microseconds per
# line at most), so they are an upper bound on what the library takes.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
D=$PWD/$BUILD/tools
N=1000000 K=10000 TRANSPORTS="shm udp xdp" JSON=
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
	case $1 in
	-n) N=$2; shift 2 ;;
	-k) K=$2; shift 2 ;;
	-t) TRANSPORTS=$2; shift 2 ;;
	--json) JSON=$2; shift 2 ;;
	-h|--help) usage 0 ;;
	*) echo "bench-late-join: unknown argument '$1'" >&2; usage ;;
	esac
done
for t in flit-pub flit-sub; do [ -x "$D/$t" ] || { echo "bench-late-join: $D/$t not built (make tools)" >&2; exit 1; }; done
tmp=$(mktemp -d /tmp/flit-bench-lj.XXXXXX)
tb=lj$$; tb=${tb:0:8}
up=0
cleanup() { jobs -p | xargs -r kill 2>/dev/null; [ $up -eq 1 ] && tools/testbed down --name "$tb" >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
seq 0 $((N - 1)) > "$tmp/msgs"

# measure SUB_CMD...: run the subscriber, stamp each line; print one JSON object
measure() {
	python3 - "$K" "$@" <<'EOF'
import json, subprocess, sys, time
k = int(sys.argv[1]); cmd = sys.argv[2:]
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
first = last = live = None; late = 0; prev = None; gaps = 0
for line in p.stdout:
    now = time.monotonic()
    if ' LOSS ' in line:
        gaps += 1
        sys.stderr.write(line)
        continue
    if ' seq=' not in line:
        continue
    seq = int(line.split(' seq=')[1].split()[0])
    if prev is not None and seq != prev + 1:
        gaps += 1
    prev = seq
    if ' late-join ' in line:
        late += 1
        if first is None: first = now
        last = now
    elif live is None:
        live = (now, seq)
        p.terminate()
        break
p.wait()
r = {"retained": late, "join_to_first_ms": round((first - t0) * 1e3, 1) if first else None,
     "catch_up_ms": round((last - first) * 1e3, 2) if first else None,
     "catch_up_msgs_per_sec": round(late / (last - first)) if first and last > first else None,
     "first_live_seq": live[1] if live else None, "gaps": gaps}
print(json.dumps(r))
EOF
}

results=()
for t in $TRANSPORTS; do
	if [ "$t" = shm ]; then
		pub=("$D/flit-pub" -t shm -L "$K" -l 8000 -C 'batch = true' -C 'source.shm.capacity = 4M' --file "$tmp/msgs" bench.lj)
		sub=("$D/flit-sub" -t shm -B 16 bench.lj)
		pubh=() subh=()
	else
		if [ $up -eq 0 ]; then
			[ "$(id -u)" -eq 0 ] || { echo "bench-late-join: udp/xdp need root (network namespaces)" >&2; continue; }
			tools/testbed up --name "$tb" --hosts 2 --link direct >/dev/null; up=1
		fi
		cfg=(-C context.udp.interface=eth0)
		pub=("$D/flit-pub" -t "$t" "${cfg[@]}" -L "$K" -l 8000 -C 'batch = true' -C 'source.udp.retain_ms = 60000' --file "$tmp/msgs" bench.lj)
		sub=("$D/flit-sub" -t "$t" "${cfg[@]}" -B 16 bench.lj)
		pubh=(tools/testbed exec --name "$tb" --host 1 --) subh=(tools/testbed exec --name "$tb" --host 2 --)
	fi
	# the source sends everything, then lingers: the subscriber joins then
	"${pubh[@]}" "${pub[@]}" > "$tmp/pub.log" 2>&1 &
	pp=$!
	sleep 3
	# live messages after the join: a second publisher would be another
	# source, so the lingering one's heartbeat is the end; the live seam is
	# checked by the tests (test_late_join, test_udp)
	r=$(measure "${subh[@]}" "${sub[@]}" -T 3)
	wait $pp || true
	echo "$t: $r"
	results+=("{\"transport\":\"$t\",\"sent\":$N,\"late_join\":$K,${r#\{}")
done
printf '\n%-6s %10s %10s %16s %14s %16s\n' transport sent retained "join->first ms" "catch-up ms" "catch-up msg/s"
for j in "${results[@]}"; do
	python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%-6s %10d %10d %16s %14s %16s" % (r["transport"], r["sent"], r["retained"], r["join_to_first_ms"], r["catch_up_ms"], r["catch_up_msgs_per_sec"]))' "$j"
done
[ -n "$JSON" ] && printf '%s\n' "${results[@]}" > "$JSON"
exit 0
