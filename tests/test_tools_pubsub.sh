#!/usr/bin/env bash
# flit-pub -> flit-sub as a user runs them, checking every line the
# subscriber prints: over shm on this host, and across a direct two-host
# testbed with every pairing of udp and xdp on the two sides (an xdp
# subscriber of a udp source and the reverse: one wire format); the
# subscriber started first and started second; an exact topic and a
# pattern; flit-pub waiting for its receiver (-w 1) or not: a subscriber
# started first gets everything from the first message, one started while
# flit-pub lingers gets what it sent as late join (marked late-join), one
# with --live gets nothing of it.
# Uses the binaries in $FLIT_TOOLS_DIR (set by tests/run-tests.sh).
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
# timeout: 300
set -u
cd "$(dirname "$0")/.."
D=${FLIT_TOOLS_DIR:-$PWD/${BUILD:-build}/tools}
for t in flit-pub flit-sub; do
  [ -x "$D/$t" ] || { echo "SKIP: $D/$t not built (make tools)"; exit 77; }
done
tmp=$(mktemp -d /tmp/flit-test-pubsub.XXXXXX)
tb=ps$$; tb=${tb:0:8}
up=0
cleanup() {
  jobs -p | xargs -r kill 2>/dev/null
  [ $up -eq 1 ] && tools/testbed down --name "$tb" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

MSGS=(one "two words" three)

# check OUT TOPIC [late|none]: BOS, the three messages in order with seq 0..2
# and their payloads (marked late-join with "late"; none of them with
# "none"), EOS; nothing else
check() {
  local out=$1 topic=$2 how=${3:-} want got mark=
  [ "$how" = late ] && mark="late-join "
  want=$(printf '%s BOS\n' "$topic"
         [ "$how" = none ] ||
         for i in 0 1 2; do printf '%s seq=%d len=%d %s"%s"\n' "$topic" $i ${#MSGS[$i]} "$mark" "${MSGS[$i]}"; done
         printf '%s EOS\n' "$topic")
  # drop the source=... the check does not pin down
  got=$(sed -E -e 's/ source=[^ ]+//' -e 's/ (\[source-died\])$//' "$out")
  [ "$got" = "$want" ] && return 0
  echo "    want:"; echo "$want" | sed 's/^/    | /'
  echo "    got:";  sed 's/^/    | /' "$out"
  return 1
}

# run_case NAME ORDER TOPIC [HOW] PUB_CMD... -- SUB_CMD...: ORDER
# sub-first|pub-first; HOW as for check (late, none), "-" for neither
run_case() {
  local name=$1 order=$2 topic=$3 how=$4; shift 4
  local pub=() sub=()
  while [ "$1" != -- ]; do pub+=("$1"); shift; done; shift
  sub=("$@")
  local out="$tmp/$name.out" perr="$tmp/$name.pub"
  if [ "$order" = sub-first ]; then
    "${sub[@]}" > "$out" 2>"$tmp/$name.sub" & local s=$!
    sleep 0.5
    "${pub[@]}" > "$perr" 2>&1; local prc=$?
    wait $s; local src=$?
  else
    "${pub[@]}" > "$perr" 2>&1 & local p=$!
    sleep 0.5
    "${sub[@]}" > "$out" 2>"$tmp/$name.sub"; local src=$?
    wait $p; local prc=$?
  fi
  if [ $prc -ne 0 ]; then fail "$name: flit-pub exited $prc: $(head -3 "$perr")"; return; fi
  if [ $src -ne 0 ]; then fail "$name: flit-sub exited $src: $(head -3 "$tmp/$name.sub")"; fi
  if check "$out" "$topic" "$how"; then echo "ok: $name"; else fail "$name: lines differ"; fi
}

# flit-sub -e ends at the EOS of its one source, -T bounds it
SUBT=(-e -T 8)

# ---- shm, this host ---------------------------------------------------------
for order in sub-first pub-first; do
  run_case "shm-exact-$order" $order ps.shm - \
    "$D/flit-pub" -t shm -w 1 -T 8 ps.shm "${MSGS[@]}" -- \
    timeout 10 "$D/flit-sub" -t shm "${SUBT[@]}" ps.shm
  run_case "shm-pattern-$order" $order ps.shm2 - \
    "$D/flit-pub" -t shm -w 1 -T 8 ps.shm2 "${MSGS[@]}" -- \
    timeout 10 "$D/flit-sub" -t shm "${SUBT[@]}" 'ps.shm?'
done
# without waiting: the subscriber there first gets it all; one that comes
# while flit-pub lingers gets it as late join, or nothing with --live
run_case "shm-nowait-sub-first" sub-first ps.nw1 - \
  "$D/flit-pub" -t shm ps.nw1 "${MSGS[@]}" -- timeout 10 "$D/flit-sub" -t shm "${SUBT[@]}" ps.nw1
run_case "shm-nowait-pub-first-late-join" pub-first ps.nw2 late \
  "$D/flit-pub" -t shm -l 2000 ps.nw2 "${MSGS[@]}" -- timeout 10 "$D/flit-sub" -t shm "${SUBT[@]}" ps.nw2
run_case "shm-nowait-pub-first-live" pub-first ps.nw3 none \
  "$D/flit-pub" -t shm -l 2000 ps.nw3 "${MSGS[@]}" -- timeout 10 "$D/flit-sub" -t shm --live "${SUBT[@]}" ps.nw3

# ---- udp and xdp across a direct testbed ------------------------------------
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP-PART: udp/xdp across the testbed need root (network namespaces)"
elif ! tools/testbed up --name "$tb" --hosts 2 --link direct >"$tmp/tb.log" 2>&1; then
  echo "SKIP-PART: no testbed here: $(tail -1 "$tmp/tb.log")"
else
  up=1
  H() { local h=$1; shift; tools/testbed exec --name "$tb" --host "$h" -- "$@"; }
  cfg=(-C context.udp.interface=eth0)
  n=0
  for pt in udp xdp; do
    for st in udp xdp; do
      for order in sub-first pub-first; do
        for kind in exact pattern; do
          n=$((n + 1)); topic=ps.$pt$st.$n
          pat=$topic; [ $kind = pattern ] && pat="ps.$pt$st.*"
          run_case "$pt-to-$st-$kind-$order" $order "$topic" - \
            H 1 "$D/flit-pub" -t $pt "${cfg[@]}" -w 1 -T 10 "$topic" "${MSGS[@]}" -- \
            H 2 timeout 12 "$D/flit-sub" -t $st "${cfg[@]}" -e -T 10 "$pat"
        done
      done
      # without waiting for the receiver
      n=$((n + 1)); topic=ps.nw$pt$st.$n
      run_case "$pt-to-$st-nowait-sub-first" sub-first "$topic" - \
        H 1 "$D/flit-pub" -t $pt "${cfg[@]}" "$topic" "${MSGS[@]}" -- \
        H 2 timeout 12 "$D/flit-sub" -t $st "${cfg[@]}" -e -T 10 "$topic"
      n=$((n + 1)); topic=ps.nw$pt$st.$n
      run_case "$pt-to-$st-nowait-pub-first-late-join" pub-first "$topic" late \
        H 1 "$D/flit-pub" -t $pt "${cfg[@]}" -l 3000 "$topic" "${MSGS[@]}" -- \
        H 2 timeout 12 "$D/flit-sub" -t $st "${cfg[@]}" -e -T 10 "$topic"
    done
  done
fi

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "PASS"
