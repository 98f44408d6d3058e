#!/usr/bin/env bash
# tools/bench-udp.sh as a user runs it to compare the udp backends: misuse
# exits 2 with its usage; one short round of --backend all (sockets,
# io_uring, io_uring+poll) across its own testbed prints the latency and
# throughput tables with each io_uring path's ratio to the sockets backend
# of the same round, the bare path's (flit-floor -l udp)
# and the cache-line floor beside them, the medians
# at the end, and writes every run as a JSON line (every flit-thru run
# complete: nothing lost or missing).  The figures themselves are the
# benchmark's business (README, Performance), not this test's.
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
# timeout: 120
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_tools flit-pong flit-thru flit-floor

# ---- misuse -----------------------------------------------------------------
for args in "--backend bogus" "--backend io_uring+bogus" "--rounds 0" "--rounds x" "--link nowhere" "--bogus"; do
	# shellcheck disable=SC2086
	BUILD=${BUILD:-build} tools/bench-udp.sh $args >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "bench-udp.sh $args exited $rc, want 2"
	grep -q 'tools/bench-udp.sh' "$tmp/err" || fail "bench-udp.sh $args: no usage on stderr"
done
ok "misuse exits 2 with usage"

need_root "network namespaces for the testbed"
command -v sockperf >/dev/null || skip "sockperf is not installed (make deps installs it)"

# ---- one round of every path ------------------------------------------------------
BUILD=${BUILD:-build} tools/bench-udp.sh --backend all --rounds 1 --sizes 32 --count 3000 --time 1 \
	--thru-sizes 32 --thru-duration 1 --out "$tmp/r.json" >"$tmp/out" 2>&1 ||
	{ sed 's/^/  | /' "$tmp/out"; fail "bench-udp.sh exited $?"; finish; }
sed 's/^/  | /' "$tmp/out" | tail -30
for p in 'io_uring' 'io_uring\+poll'; do
	grep -Eq "^ +1 +32 +$p \\|.*\\| +[0-9.]+x +[0-9.]+x \\| +[0-9]+ +[0-9]+ +[0-9.]+x \\| +[0-9]+\$" "$tmp/out" ||
		fail "no $p latency row with its ratios to sockets, the bare path's and the floor"
	for b in unbatched batched; do
		grep -Eq "^ +1 +32 +$p +$b \\|.*\\| +[0-9.]+x \\| +[0-9]+\$" "$tmp/out" ||
			fail "no $p $b throughput row with its ratio to sockets"
	done
	grep -Eq "^$p / sockets, median of 1 round" "$tmp/out" || fail "no medians of $p / sockets"
done
for b in unbatched batched; do
	[ "$(grep -Ec "32 B msgs/s $b +[0-9.]+x" "$tmp/out")" -eq 2 ] || fail "not two medians of the $b throughput ratio"
done
[ "$(grep -Ec '32 B RTT/2 p50 +[0-9.]+x' "$tmp/out")" -eq 2 ] || fail "not two medians of the latency ratio"
[ "$(grep -Ec '32 B bare RTT/2 p50 +[0-9.]+x' "$tmp/out")" -eq 2 ] || fail "not two medians of the bare path's latency ratio"
python3 - "$tmp/r.json" <<'PY' || fail "the JSON lines"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tools = [r["tool"] for r in rows]
floors = [r["mode"].split(",")[0:2] for r in rows if r["tool"] == "flit-floor"]
assert sorted(floors) == [["single-line", "spin"], ["udp", "io_uring"], ["udp", "io_uring+poll"],
                          ["udp", "sockets"]], floors
pong = [r for r in rows if r["tool"] == "flit-pong"]
assert sorted(r["mode"].split(",")[2] for r in pong) == ["io_uring", "io_uring+poll", "sockets"], pong
recv = [r for r in rows if r["tool"] == "flit-thru" and r["side"] == "receiver"]
assert len(recv) == 6, recv
assert sorted(r["mode"].split(",")[2] for r in recv) == ["io_uring"] * 2 + ["io_uring+poll"] * 2 + ["sockets"] * 2, recv
for r in recv:
    assert r["msgs_lost"] == 0 and r["missing"] == 0 and r["msgs_per_sec"] > 0, r
PY
ok "one round of every path: tables, ratios, floor, medians, JSON"
finish
