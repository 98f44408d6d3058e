#!/usr/bin/env bash
# tools/flit-compare end to end, small: on its own 2-host testbed (cabled
# back to back) it runs sockperf, flit-pong -t udp and -t xdp, flit-thru -t
# udp and -t xdp for 32 B and prints the table: the three latency rows with
# numbers, the xdp row labelled with the mode it ran in (skb, copy: veth has
# no zero-copy), the ratio line, the cache-line floor line, throughput with
# the receive work on the receiver's CPU; the results file holds a JSON line
# per tool and transport with its numbers, --json adds the floor lines; the
# plot is a PNG (when gnuplot is there); no testbed is left behind.  Without
# an RDMA device the table says so; with --rdma vm the Soft-RoCE guest adds
# ib_send_lat and flit rdma rows and their ratio (or says why it could not).
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
C="$(cd "$(dirname "$0")/.." && pwd)/tools/flit-compare"
BUILD=${BUILD:-build}
need_root "namespaces, XDP, AF_XDP"
command -v sockperf >/dev/null 2>&1 || skip "sockperf not found (make deps installs it)"
command -v python3 >/dev/null 2>&1 || skip "python3 not found"
for t in flit-pong flit-thru flit-floor; do  # the ones flit-compare --build runs
	[ -x "$BUILD/tools/$t" ] || skip "$BUILD/tools/$t not built (make tools)"
done
[ "$(nproc)" -ge 2 ] || skip "needs two CPUs"
testbeds() { ip netns list | awk '{print $1}' | grep -cE '^fc[0-9]+-(h[0-9]+|sw)$'; }

before=$(testbeds)
"$C" --build "$BUILD" --sizes 32 --count 300 --time 1 --thru-sizes 32 --thru-duration 1 \
	--out "$tmp/r.json" --plot "$tmp/c.png" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ]; then
	sed 's/^/    | /' "$tmp/out" "$tmp/err" | tail -30
	echo "FAIL: flit-compare exited $rc"; exit 1
fi
sed 's/^/    | /' "$tmp/out"
num='[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+$'
num5='[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +-$'
grep -qE "^ +32 sockperf +kernel, nonblocked +$num" "$tmp/out" || fail "no sockperf row with numbers"
grep -qE "^ +32 flit udp +kernel, sockets +$num" "$tmp/out" || fail "no flit udp row with numbers"
grep -qE "^ +32 flit xdp +skb, copy, no busy-poll +$num" "$tmp/out" ||
	fail "no flit xdp row labelled 'skb, copy, no busy-poll' with numbers"
grep -qE "ratio: xdp/udp p50 [0-9.]+x p99.9 [0-9.]+x; xdp/sockperf p50 [0-9.]+x p99.9 [0-9.]+x; xdp/udp msgs/s [0-9.]+x" \
	"$tmp/out" || fail "no ratio line with all five ratios"
grep -qE "cache-line floor CPU 0<->1 \(RTT/2 p50\) before [0-9]+ ns, after [0-9]+ ns" "$tmp/out" ||
	fail "no cache-line floor line"
grep -q "one veth pair: cabled back to back" "$tmp/out" || fail "the header does not name the direct link"
grep -q "receive work on the receiver's CPU" "$tmp/out" || fail "throughput does not say where the receive work ran"
if ! ibv_devices 2>/dev/null | awk 'NR > 2 && NF >= 1' | grep -q .; then
	grep -q "rdma: no RDMA device on this host" "$tmp/out" || fail "no word on the missing RDMA device"
fi
[ $failures -eq 0 ] && ok "the table: three rows, modes, ratios, floor, link"

python3 - "$tmp/r.json" <<'EOF' || fail "results file"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def one(**kw):
    m = [r for r in rows if all(r.get(k) == v for k, v in kw.items())]
    assert m, f"no row {kw}"
    return m[0]
for tool, tp in (("sockperf", "udp"), ("flit-pong", "udp"), ("flit-pong", "xdp")):
    r = one(tool=tool, transport=tp, size=32) if tool != "sockperf" else \
        [r for r in rows if r["tool"] == "sockperf" and "p50_ns" in r][0]
    assert 0 < r["min_ns"] <= r["p50_ns"] <= r["p999_ns"], r
for tp in ("udp", "xdp"):
    r = one(tool="flit-thru", transport=tp, side="receiver")
    assert r["msgs_per_sec"] > 0 and r["gaps"] == 0 and r["dupes"] == 0, r
assert "copy mode" in one(tool="flit-pong", transport="xdp")["setup"]
print("ok: results file: sockperf, flit-pong udp/xdp, flit-thru udp/xdp, numbers in order")
EOF

if command -v gnuplot >/dev/null 2>&1; then
	if [ "$(head -c 8 "$tmp/c.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then ok "plot is a PNG"
	else fail "no PNG at $tmp/c.png"; fi
fi
[ "$(testbeds)" = "$before" ] || fail "a testbed was left behind: $(ip netns list | grep -E '^fc[0-9]+-')"

"$C" --build "$BUILD" --sizes 32 --count 200 --time 1 --no-thru --json --plot "$tmp/c2.png" \
	>"$tmp/j" 2>"$tmp/err" || fail "--json exited $?: $(tail -3 "$tmp/err")"
n=$(grep -c '"tool":"flit-floor"' "$tmp/j")
[ "$n" = 2 ] && ok "--json: the floor before and after the size" || fail "--json: $n flit-floor lines, want 2"

# rdma rows from the Soft-RoCE guest (software RDMA: the path, not a measure)
"$C" --build "$BUILD" --sizes 32 --count 200 --time 1 --no-thru --rdma vm --rdma-count 300 \
	--out "$tmp/r3.json" --plot "$tmp/c3.png" >"$tmp/out3" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ]; then
	fail "--rdma vm exited $rc: $(tail -5 "$tmp/err")"
elif grep -q "rdma: skipped:" "$tmp/out3"; then
	echo "note: rdma rows not checked: $(grep -o 'rdma: skipped:.*' "$tmp/out3")"
else
	sed -n '/ib_send_lat\|flit rdma\|rdma\//p' "$tmp/out3" | sed 's/^/    | /'
	grep -qE "^ +32 ib_send_lat +perftest, RC send, Soft-RoCE +$num5" "$tmp/out3" || fail "no ib_send_lat row"
	grep -qE "^ +32 flit rdma +RC send, Soft-RoCE +$num5" "$tmp/out3" || fail "no flit rdma row"
	grep -qE "ratio: rdma/ib_send_lat p50 [0-9.]+x p99 [0-9.]+x" "$tmp/out3" || fail "no rdma ratio line"
	grep -q "rdma: in the Soft-RoCE guest" "$tmp/out3" || fail "the rdma rows are not marked as the guest's"
	[ $failures -eq 0 ] && ok "--rdma vm: ib_send_lat and flit rdma rows with their ratio"
fi

finish
