#!/usr/bin/env bash
# tools/flit-plot on crafted JSON lines: every kind (size, rate, cdf, compare)
# and "all" write valid PNGs (magic bytes, non-trivial size, the paths printed
# on stdout); standard input and a named file; a results file with lines of
# other tools; --title; a kind without matching data exits 1 (and is skipped
# with a message under all); a malformed JSON line exits 1 naming file and
# line; a field that is not a number exits 1 naming file and line; misuse
# (unknown option, bad kind, no file, missing value, FILE.png with all) exits
# 2 with the usage on stderr; --help exits 0.
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
P=${FLIT_PLOT:-$PWD/tools/flit-plot}
[ -x "$P" ] || { echo "FAIL: $P not found or not executable"; exit 1; }
command -v python3 >/dev/null 2>&1 || skip "python3 not found"
command -v gnuplot >/dev/null 2>&1 || skip "gnuplot not found (make deps installs it)"

# ---- crafted input ----------------------------------------------------------------
python3 - "$tmp" <<'EOF'
import json, sys
d = sys.argv[1]
def cdf(b):
    pts = [0] + list(range(1, 100)) + [99.5, 99.9, 99.95, 99.99, 100]
    return [[p, round(b * (1 + (p / 100) ** 8 * 20), 1)] for p in pts]
def lat(tool, t, size, b, **kw):
    r = {"tool": tool, "transport": t, "size": size, "count": 50000, "min_ns": b * 0.8,
         "avg_ns": b * 1.1, "p50_ns": b, "p99_ns": b * 2, "p999_ns": b * 5, "max_ns": b * 50,
         "stddev_ns": b / 3, "clock": "tsc", "mode": "spin,pinned=0,1"}
    r.update(kw)
    return r
pong, load, compare = [], [], []
for size in (16, 64, 256, 1024):
    pong.append(lat("flit-pong", "shm", size, 90 + size / 8, cdf=cdf(90 + size / 8)))
for size in (32, 256):
    for t, b in (("udp", 6000), ("xdp", 4000)):
        compare.append(lat("flit-pong", t, size, b + size, cdf=cdf(b + size)))
    compare.append(lat("sockperf", "udp", size, 5900, clock="sockperf", cdf=cdf(5900)))
    compare.append({"tool": "flit-thru", "transport": "xdp", "size": size, "count": 10,
                    "msgs_per_sec": 250000.0, "side": "receiver", "clock": "tsc"})
    compare.append({"tool": "sockperf", "transport": "udp", "size": size, "count": 10,
                    "msgs_per_sec": 190000.0, "side": "receiver", "clock": "sockperf"})
for size in (32, 256):
    for t, b in (("udp", 6000), ("xdp", 4000)):
        for rate in (1000, 10000, 100000, 500000, 2000000):
            row = lat("flit-load", t, size, b * (1 + rate / 3e5), rate=rate,
                      msgs_per_sec=min(rate, 600000), cpu_bound=rate > 600000,
                      count=rate // 100)
            if t == "xdp":      # flit-load's stall accounting: a dashed avg line
                row["pings_stalled"] = 3
                row["unstalled"] = {"count": rate // 100 - 3, "avg_ns": b, "p50_ns": b,
                                    "p999_ns": 2 * b, "max_ns": 3 * b}
            load.append(row)
for name, rows in (("pong", pong), ("load", load), ("compare", compare)):
    with open(f"{d}/{name}.json", "w") as f:
        f.write("# a header line the tools print on stderr, skipped\n\n")
        for r in rows:
            f.write(json.dumps(r) + "\n")
EOF

# is_png FILE: PNG signature and more than 2 KB (a real plot, not an empty canvas)
is_png() {
  [ -f "$1" ] || { fail "$1 not written"; return 1; }
  local magic size
  magic=$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')
  size=$(stat -c %s "$1")
  [ "$magic" = "89504e470d0a1a0a" ] || { fail "$1 is not a PNG (starts $magic)"; return 1; }
  [ "$size" -gt 2048 ] || { fail "$1 is only $size bytes"; return 1; }
}

# run WANT ARGS...: flit-plot with a timeout; stdout in $tmp/out, stderr in $tmp/err
run() {
  local want=$1; shift
  timeout 60 "$P" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "flit-plot $* exited $rc, expected $want"; sed 's/^/    | /' "$tmp/err" | head -5
    return 1
  fi
  if [ "$want" -eq 2 ] && ! grep -q '^Usage: ' "$tmp/err"; then
    fail "flit-plot $*: no usage on stderr"; return 1
  fi
  return 0
}

# ---- every kind -----------------------------------------------------------------
run 0 --kind size -o "$tmp/size.png" "$tmp/pong.json" "$tmp/compare.json" &&
  is_png "$tmp/size.png" && grep -qx "$tmp/size.png" "$tmp/out" && ok "size plot" ||
  fail "size plot"
run 0 --kind rate -o "$tmp/rate.png" "$tmp/load.json" &&
  is_png "$tmp/rate.png" && ok "rate plot (two sizes, CPU-bound points)" ||
  fail "rate plot (two sizes, CPU-bound points)"
run 0 --kind cdf -o "$tmp/cdf.png" "$tmp/pong.json" "$tmp/compare.json" &&
  is_png "$tmp/cdf.png" && ok "cdf plot" ||
  fail "cdf plot"
run 0 --kind compare -o "$tmp/compare.png" --title "xdp vs kernel" "$tmp/compare.json" &&
  is_png "$tmp/compare.png" && ok "compare plot (flit-thru and sockperf throughput lines ignored)" ||
  fail "compare plot (flit-thru and sockperf throughput lines ignored)"
# standard input
# (no pipe into run: its failure count must stay in this shell)
run 0 -k cdf -o "$tmp/stdin.png" - <"$tmp/pong.json" &&
  is_png "$tmp/stdin.png" && ok "reads standard input" ||
  fail "reads standard input"
# all, into a directory that does not exist yet
if run 0 -o "$tmp/all" --title "run 1" "$tmp/pong.json" "$tmp/load.json" "$tmp/compare.json"; then
  n=0
  for f in latency-size latency-rate cdf compare; do
    is_png "$tmp/all/$f.png" && grep -qx "$tmp/all/$f.png" "$tmp/out" && n=$((n + 1))
  done
  [ "$n" -eq 4 ] && ok "--kind all writes the four plots and prints their paths" ||
  fail "--kind all writes the four plots and prints their paths"
fi
# all, where only some kinds have data: the others are skipped with a message
if run 0 -o "$tmp/some" "$tmp/load.json"; then
  is_png "$tmp/some/latency-rate.png"
  [ ! -e "$tmp/some/cdf.png" ] || fail "cdf.png written without cdf data"
  grep -q "skipping cdf" "$tmp/err" && grep -q "skipping compare" "$tmp/err" &&
    ok "--kind all skips kinds without data, saying so" || fail "no skip message: $(cat "$tmp/err")"
fi

# ---- no data, malformed input: exit 1 -------------------------------------------------
run 1 --kind rate -o "$tmp/x.png" "$tmp/pong.json" &&
  grep -q "nothing to plot for --kind rate" "$tmp/err" && ok "a kind without data exits 1 saying so" ||
  fail "a kind without data exits 1 saying so"
run 1 --kind compare -o "$tmp/x.png" "$tmp/pong.json" && ok "compare without xdp lines exits 1" ||
  fail "compare without xdp lines exits 1"
echo '{"tool":"flit-thru","size":1}' >"$tmp/none.json"
run 1 -o "$tmp/none" "$tmp/none.json" && grep -q "nothing to plot" "$tmp/err" &&
  ok "all without any usable line exits 1" || fail "all without any usable line exits 1"
{ head -3 "$tmp/pong.json"; echo '{"tool":"flit-pong","size":64,'; } >"$tmp/bad.json"
run 1 -k size -o "$tmp/x.png" "$tmp/bad.json" &&
  grep -q "bad.json:4: malformed JSON line" "$tmp/err" && ok "malformed JSON named by file and line" ||
  fail "malformed message: $(cat "$tmp/err")"
printf '{"a":1}\n[1,2]\n' >"$tmp/list.json"
run 1 -k cdf -o "$tmp/x.png" - <"$tmp/list.json" &&
  grep -q "<stdin>:2: malformed JSON line" "$tmp/err" && ok "a non-object line on stdin named" ||
  fail "a non-object line on stdin named"
echo '{"tool":"flit-pong","transport":"shm","size":64,"p50_ns":"fast","p999_ns":1}' >"$tmp/nan.json"
run 1 -k size -o "$tmp/x.png" "$tmp/nan.json" &&
  grep -q 'nan.json:1: "p50_ns" is "fast", not a number' "$tmp/err" && ok "a non-numeric field named" ||
  fail "a non-numeric field named"
echo '{"tool":"flit-pong","transport":"shm","size":64,"cdf":[[1,"x"]]}' >"$tmp/cdf-bad.json"
run 1 -k cdf -o "$tmp/x.png" "$tmp/cdf-bad.json" && grep -q 'cdf-bad.json:1: "cdf"' "$tmp/err" &&
  ok "a bad cdf named" || fail "a bad cdf named"
run 1 -k cdf -o "$tmp/x.png" "$tmp/no-such-file.json" && grep -q "no-such-file.json" "$tmp/err" &&
  ok "an unreadable file named" || fail "an unreadable file named"

# ---- misuse: exit 2 with the usage ----------------------------------------------------
run 2 && ok "no input file -> 2" ||
  fail "no input file -> 2"
run 2 --no-such-option "$tmp/pong.json" && ok "unknown option -> 2" ||
  fail "unknown option -> 2"
run 2 --kind bogus "$tmp/pong.json" && ok "bad kind -> 2" ||
  fail "bad kind -> 2"
run 2 "$tmp/pong.json" --title && ok "missing value -> 2" ||
  fail "missing value -> 2"
run 2 -o "$tmp/all.png" "$tmp/pong.json" && ok "FILE.png with --kind all -> 2" ||
  fail "FILE.png with --kind all -> 2"
run 2 --width 5 "$tmp/pong.json" && ok "bad width -> 2" ||
  fail "bad width -> 2"
run 0 --help && grep -q '^Usage: flit-plot' "$tmp/out" && ok "--help -> 0, usage on stdout" ||
  fail "--help -> 0, usage on stdout"

finish
