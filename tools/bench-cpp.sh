#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# bench-cpp: what the C++ header (include/flit/flit.hpp) costs.
#  1. Zero-cost check: tests/cpp/zerocost.c and its twin zerocost.cpp, the
#     same functions in C and through flit.hpp, compiled at -O2 and
#     disassembled (objdump) side by side.  send, send-with-retry and
#     claim+commit must be the same instructions (in any block order, padding
#     aside); a subscriber trampoline no more instructions than the C
#     callback, and no call.  Exit 1 otherwise.
#  2. Latency (not with --zerocost): flit-pong --role ping against the C
#     pong (flit-pong --role pong) and against the C++ pong
#     (docs/examples/pong.cpp, linked like the tools: the static library),
#     interleaved round after round with the one-line floor (flit-floor);
#     each round's p50 and p99 RTT/2, then per path the median p50 and p99
#     and the median (best-worst) of the C++/C ratio of p50 within a round.
#
#   tools/bench-cpp.sh [--zerocost] [--rounds N] [--sizes "16 512"] [--count N] [--cpus A,B]
#
#   --zerocost   part 1 only (tests/test_cpp.sh runs this)
#   --rounds N   rounds (default 6)
#   --sizes L    message sizes (default "16 512")
#   --count N    round trips per run (default 200000)
#   --cpus A,B   ping on A, pong on B (default 0,1)
# BUILD (environment) names the build directory (default build); CC and CXX
# the compilers (default gcc, g++).
# Exit: 0 ok, 1 a check or run failed, 2 misuse.
set -u -o pipefail
BUILD=${BUILD:-build}
CC=${CC:-gcc} CXX=${CXX:-g++}
ROUNDS=6 SIZES="16 512" COUNT=200000 CPUS=0,1 ZC_ONLY=0
usage() { sed -n '3,27p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --zerocost) ZC_ONLY=1; shift ;;
    --rounds) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || usage; ROUNDS=$2; shift 2 ;;
    --sizes) [ $# -ge 2 ] && [[ $2 =~ ^[0-9\ ]+$ ]] || usage; SIZES=$2; shift 2 ;;
    --count) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || usage; COUNT=$2; shift 2 ;;
    --cpus) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+,[0-9]+$ ]] || usage; CPUS=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "bench-cpp: unknown argument '$1'" >&2; usage ;;
  esac
done
for t in "$CC" "$CXX" objdump nm c++filt; do
  command -v "$t" >/dev/null || { echo "bench-cpp: $t not found" >&2; exit 1; }
done
W=$BUILD/cpp; mkdir -p "$W"

# ---- 1. zero-cost check ------------------------------------------------------
# Each twin goes into a shared object of its own (calls to flit resolve to
# the PLT, named in the listing).  -fPIC as any library user's code might be.
$CC -std=gnu11 -O2 -fPIC -Wall -Wextra -Werror -Iinclude -c tests/cpp/zerocost.c -o "$W/zc_c.o" &&
  $CXX -std=c++20 -O2 -fPIC -Wall -Wextra -Werror -pedantic -Iinclude -c tests/cpp/zerocost.cpp -o "$W/zc_cpp.o" &&
  $CC -shared -o "$W/zc_c.so" "$W/zc_c.o" && $CXX -shared -o "$W/zc_cpp.so" "$W/zc_cpp.o" ||
  { echo "bench-cpp: building the zero-cost twins failed" >&2; exit 1; }

# A function's instructions, addresses dropped, jumps within it as <+off>.
body() {
  objdump -d --no-show-raw-insn --disassemble="$2" "$1" | awk -v f="$2" '
    index($0, "<" f ">:") { p = 1; next }
    p && /^$/ { exit }
    p { sub(/^ *[0-9a-f]+:[ \t]*/, ""); gsub(/[0-9a-f]+ <[^>+]*\+/, "<+"); gsub(/[0-9a-f]+ </, "<");
        gsub(/[ \t]+/, " "); print }'
}
# the instructions as a multiset: jump offsets, a branch's sense (which side
# falls through) and alignment padding left out
bag() { sed -E 's/<\+0x[0-9a-f]*>/<+>/; s/^jmp /JMP /; s/^j[a-z]+ <\+>/jcc <+>/; s/^JMP /jmp /' |
        grep -vE '^(nop|xchg %ax,%ax|cs nop)' | sort; }
side_by_side() {
  printf '  %-44s | %s\n' "C: $3" "C++: $4"
  paste -d'\t' <(printf '%s\n' "$1") <(printf '%s\n' "$2") |
    awk -F'\t' '{ printf "    %-42s | %s\n", $1, $2 }'
}
zc_fail=0
echo "# zero-cost check: $($CC --version | head -1) / $($CXX --version | head -1), -O2 -fPIC"
for f in zc_send zc_send_retry zc_claim_commit; do
  c=$(body "$W/zc_c.so" "$f"); x=$(body "$W/zc_cpp.so" "$f")
  nc=$(printf '%s\n' "$c" | grep -c .); nx=$(printf '%s\n' "$x" | grep -c .)
  [ "$nc" -gt 0 ] && [ "$nx" -gt 0 ] || { echo "bench-cpp: $f not found in the objects" >&2; exit 1; }
  if [ "$c" = "$x" ]; then
    verdict="identical ($nc instructions)"
  elif [ "$(bag <<<"$c")" = "$(bag <<<"$x")" ]; then
    verdict="the same $nc instructions, blocks in another order"
  else
    verdict="DIFFERENT (C $nc, C++ $nx instructions)"; zc_fail=1
  fi
  echo "RESULT: $f: $verdict"
  side_by_side "$c" "$x" "$f" "$f"
done
# the subscriber trampolines (mangled names: found through c++filt)
tramp() { nm "$W/zc_cpp.so" | awk '{print $3}' | grep sub_trampoline |
          while read -r m; do c++filt "$m" | grep -q "$1" && echo "$m"; done | head -1; }
c=$(body "$W/zc_c.so" zc_on_msg)
t_own=$(tramp 'sub_trampoline<tally>'); t_ref=$(tramp 'sub_trampoline<zc_ref_probe')
[ -n "$t_own" ] && [ -n "$t_ref" ] || { echo "bench-cpp: trampolines not found" >&2; exit 1; }
x=$(body "$W/zc_cpp.so" "$t_own"); r=$(body "$W/zc_cpp.so" "$t_ref")
nc=$(grep -c . <<<"$c"); nx=$(grep -c . <<<"$x"); nr=$(grep -c . <<<"$r")
if ! grep -q call <<<"$x$r" && [ "$nx" -le "$nc" ]; then
  echo "RESULT: callback: C $nc instructions, C++ trampoline $nx (callable owning its state), $nr (lambda capturing by reference: +1 load), no call"
else
  echo "RESULT: callback: C++ trampoline worse than the C callback (C $nc, C++ $nx instructions)"; zc_fail=1
fi
side_by_side "$c" "$x" "zc_on_msg" "sub_trampoline<tally>"
side_by_side "$c" "$r" "zc_on_msg" "sub_trampoline<lambda [&t]>"
[ "$zc_fail" = 0 ] || { echo "bench-cpp: the C++ wrappers cost instructions the C calls do not" >&2; exit 1; }
[ "$ZC_ONLY" = 1 ] && exit 0

# ---- 2. latency: C pong against C++ pong ---------------------------------------
D=$BUILD/tools
for t in flit-floor flit-pong; do
  [ -x "$D/$t" ] || { echo "bench-cpp: $D/$t not built (make tools)" >&2; exit 1; }
done
[ -f "$BUILD/libflit.a" ] || { echo "bench-cpp: $BUILD/libflit.a not built (make lib)" >&2; exit 1; }
# the library's own link dependencies (Makefile LIB_LIBS)
libs="$(pkg-config --libs liburing libxdp libbpf 2>/dev/null || echo -luring -lxdp -lbpf)"
if pkg-config --exists libibverbs librdmacm 2>/dev/null; then
  libs="$libs $(pkg-config --libs libibverbs librdmacm)"
fi
# shellcheck disable=SC2086
$CXX -std=c++20 -O2 -g -Wall -Wextra -Werror -pedantic -Iinclude docs/examples/pong.cpp \
  -o "$W/pong" "$BUILD/libflit.a" $libs -pthread ||
  { echo "bench-cpp: building docs/examples/pong.cpp failed" >&2; exit 1; }
A=${CPUS%,*} B=${CPUS#*,}
export FLIT_CONTEXT_TRANSPORTS=shm
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["p50_ns"], d["p99_ns"])'; }
# run_pong c|cpp SIZE PREFIX: "p50 p99" of the ping against that pong
run_pong() {
  local pid out
  if [ "$1" = c ]; then "$D/flit-pong" --role pong -p "$3" -s "$2" -c "$CPUS" >/dev/null 2>&1 &
  else taskset -c "$B" "$W/pong" "$3" >/dev/null 2>&1 & fi
  pid=$!
  out=$("$D/flit-pong" --role ping -p "$3" -s "$2" -c "$CPUS" -n "$COUNT" --json 2>/dev/null | field)
  wait "$pid" || out=""
  echo "${out:-x x}"
}
names="floor"
for s in $SIZES; do names="$names c-${s}B cpp-${s}B"; done
echo
echo "# bench-cpp: $ROUNDS rounds, $COUNT round trips per run, ping on CPU $A, pong on CPU $B, shm paced;"
echo "# RTT/2 p50 and p99 in ns; the C and C++ pongs alternate which runs first"
echo "# $(uname -r), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $names"
for r in $(seq "$ROUNDS"); do
  row=$("$D/flit-floor" -c "$CPUS" -n "$COUNT" --json 2>/dev/null | field) || exit 1
  for s in $SIZES; do
    if [ $((r % 2)) = 1 ]; then
      c=$(run_pong c "$s" "bench-cpp.$$.$r.$s.c"); x=$(run_pong cpp "$s" "bench-cpp.$$.$r.$s.x")
    else
      x=$(run_pong cpp "$s" "bench-cpp.$$.$r.$s.x"); c=$(run_pong c "$s" "bench-cpp.$$.$r.$s.c")
    fi
    row="$row $c $x"
  done
  echo "$row"
done | NAMES="$names" python3 -c '
import os, sys, statistics as st
names = os.environ["NAMES"].split()
rows = []
for l in sys.stdin:
    v = l.split()
    if len(v) != 2 * len(names) or "x" in v:
        sys.exit("bench-cpp: a run failed (round %d): %s" % (len(rows) + 1, l.strip()))
    rows.append([float(x) for x in v]); print("round %d: %s" % (len(rows), l.rstrip()))
print()
print("%-12s %11s %11s   %s" % ("path", "p50 median", "p99 median", "p50 C++/C within a round: median (best-worst)"))
for i, n in enumerate(names):
    p50 = [r[2 * i] for r in rows]; p99 = [r[2 * i + 1] for r in rows]
    extra = ""
    if n.startswith("cpp-"):
        q = sorted(r[2 * i] / r[2 * i - 2] for r in rows)
        extra = "%.2f (%.2f-%.2f)" % (st.median(q), q[0], q[-1])
    print("%-12s %11.1f %11.1f   %s" % (n, st.median(p50), st.median(p99), extra))
'
