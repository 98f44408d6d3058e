#!/usr/bin/env bash
# flit-stat end to end.  A live flit-pub (shm, a line every 10 ms from a
# shell loop on its stdin, so it keeps publishing and never polls between
# messages) and a flit-sub ('md.*'), their counters files in a directory of
# the test's own:
#   - misuse exits 2 with the usage; a pid without counters exits 1 saying so;
#   - the listing finds both processes, live;
#   - flit-stat PID: the publisher's row counts messages and bytes, growing
#     between two reads; the subscriber's row counts what it received; the
#     context and transport rows agree; --topic filters rows; --json parses
#     (python3) and carries the same numbers; --all shows both;
#   - --watch prints updates with per-second rates (text and JSON);
#   - a watched process that exits ends the watch;
#   - kill -9 of the publisher leaves a stale file: listed as stale ("pid N
#     is gone"), flit-stat PID exits 1 saying so, --gc removes it;
#   - XDP (root only, else skipped with the reason): a 2-host testbed, flit's
#     program attached on host 1's eth0 by build/loader/flit-loader, host 2
#     sends UDP datagrams to host 1 (no flit flow: passed, "no_flow");
#     flit-stat --xdp eth0 --netns TB-h1 shows the verdicts and
#     pass reasons growing (text, --json, --watch); without CAP_BPF/
#     CAP_NET_ADMIN it exits 1 naming them; an interface without the program
#     exits 1 saying so.
# Uses $FLIT_TOOLS_DIR (tests/run-tests.sh sets it), tools/testbed and
# $BUILD/loader/flit-loader.
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
L=${FLIT_LOADER:-$PWD/${BUILD:-build}/loader/flit-loader}
TB=${FLIT_TESTBED:-$PWD/tools/testbed}
need_tools flit-stat flit-pub flit-sub
command -v python3 >/dev/null 2>&1 || skip "python3 not found (JSON checks)"

export FLIT_CONTEXT_STATS_DIR="$tmp/stats" FLIT_CONTEXT_SHM_DIR="$tmp/shm"
export FLIT_CONTEXT_TRANSPORTS=shm FLIT_CONTEXT_STATS_INTERVAL_MS=50
tbname="st$(($$ % 100000))"
tb_up=0
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [ "$tb_up" = 1 ]; then
		"$TB" exec --name "$tbname" --host 1 -- "$L" detach eth0 >/dev/null 2>&1
		"$TB" down --name "$tbname" >/dev/null 2>&1
	fi
}
on_exit cleanup

S() { timeout 20 "$D/flit-stat" "$@"; }
EXPECT_TIMEOUT=20       # expect RC flit-stat ARGS...: as S

# json_get FILE EXPR: evaluate EXPR (python, over `o`, the last JSON line
# of FILE) and print it; exit status 1 if the file does not parse
json_get() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
objs = [json.loads(l) for l in lines]
o = objs[-1]
print(eval(sys.argv[2]))
EOF
}

# ---- misuse --------------------------------------------------------------------
expect 0 flit-stat --help
grep -q '^Usage: flit-stat' "$tmp/out" || fail "--help: no usage on stdout"
expect 2 flit-stat --no-such-option
expect 2 flit-stat notapid
expect 2 flit-stat 0
expect 2 flit-stat 12 34
expect 2 flit-stat --all 1234
expect 2 flit-stat --netns x
expect 2 flit-stat --watch=0
expect 2 flit-stat --watch=abc
expect 2 flit-stat --topic ''
expect 2 flit-stat --dir relative/path
expect 2 flit-stat --gc 1234
expect 2 flit-stat --xdp ''
expect 2 flit-stat --xdp 'a/b'
expect 2 flit-stat --xdp
# no such process; a process without a counters file
nopid=4194000
while [ -e "/proc/$nopid" ]; do nopid=$((nopid + 1)); done
expect 1 flit-stat "$nopid" && grep -q "no process $nopid" "$tmp/err" || fail "no process: $(cat "$tmp/err")"
expect 1 flit-stat $$ && grep -q "no counters file for pid $$" "$tmp/err" || fail "no file: $(cat "$tmp/err")"
expect 0 flit-stat
grep -q 'no counters files' "$tmp/out" || fail "empty listing: $(cat "$tmp/out")"

# ---- a live publisher and subscriber ---------------------------------------------
"$D/flit-sub" 'md.*' >"$tmp/sub.out" 2>"$tmp/sub.err" &
SUB=$!; pids+=("$SUB")
(i=0; while :; do i=$((i + 1)); echo "1.08$i"; sleep 0.01; done) 2>/dev/null |
	"$D/flit-pub" --file - md.eur 2>"$tmp/pub.err" &
PUB=$!; pids+=("$PUB")
pids+=("$(jobs -p | tail -1)")

# both listed, live
for _ in $(seq 100); do
	S >"$tmp/list" 2>&1
	grep -q "^$PUB .* live " "$tmp/list" && grep -q "^$SUB .* live " "$tmp/list" && break
	sleep 0.1
done
if grep -q "^$PUB .*flit-pub .* live " "$tmp/list" && grep -q "^$SUB .*flit-sub .* live " "$tmp/list"; then
	ok "listing finds flit-pub ($PUB) and flit-sub ($SUB), live"
else
	fail "listing: $(cat "$tmp/list")"
fi
S --json >"$tmp/list.json" 2>&1
[ "$(json_get "$tmp/list.json" "sorted(str(x['pid']) + x['state'] for x in objs)")" = \
  "$(python3 -c "print(sorted(['${PUB}live', '${SUB}live']))")" ] &&
	ok "listing --json: both, live" || fail "listing --json: $(cat "$tmp/list.json")"

# the publisher's counters, growing
sleep 0.5
expect 0 flit-stat "$PUB" && cp "$tmp/out" "$tmp/pub1"
m1=$(sed -n 's/^  pub  *shm  *md\.eur .*msgs_sent=\([0-9]*\).*/\1/p' "$tmp/pub1")
sleep 0.6
expect 0 flit-stat "$PUB" && cp "$tmp/out" "$tmp/pub2"
m2=$(sed -n 's/^  pub  *shm  *md\.eur .*msgs_sent=\([0-9]*\).*/\1/p' "$tmp/pub2")
if [ -n "$m1" ] && [ -n "$m2" ] && [ "$m1" -gt 0 ] && [ "$m2" -gt "$m1" ]; then
	ok "publisher row: msgs_sent $m1 -> $m2"
else
	fail "publisher row not growing ($m1 -> $m2): $(cat "$tmp/pub1" "$tmp/pub2")"
fi
grep -q "^pid $PUB (flit-pub) context 0: domain default, transports shm" "$tmp/pub2" &&
grep -q "^  total .*msgs_sent=" "$tmp/pub2" && grep -q "^  transport  *shm " "$tmp/pub2" &&
	ok "context and transport rows shown" || fail "header/total/transport rows: $(cat "$tmp/pub2")"

# JSON: the same numbers, and they agree across rows
S "$PUB" --json >"$tmp/pub.json" 2>"$tmp/err" || fail "flit-stat $PUB --json: $(cat "$tmp/err")"
if r=$(json_get "$tmp/pub.json" "(o['pid'], o['comm'], o['publishers'][0]['topic'], o['publishers'][0]['transport'], o['publishers'][0]['counters']['msgs_sent'] > 0, o['publishers'][0]['counters']['bytes_sent'] >= o['publishers'][0]['counters']['msgs_sent'], o['total']['counters']['msgs_sent'] >= o['publishers'][0]['counters']['msgs_sent'] - 0, o['transports'][0]['transport'], o['subscribers'])" 2>"$tmp/err") &&
   [ "$r" = "($PUB, 'flit-pub', 'md.eur', 'shm', True, True, True, 'shm', [])" ]; then
	ok "flit-stat $PUB --json: $r"
else
	fail "flit-stat $PUB --json: $r $(cat "$tmp/err") $(cat "$tmp/pub.json")"
fi

# the subscriber's counters, growing
S "$SUB" --json >"$tmp/sub1.json" 2>&1
sleep 0.6
S "$SUB" --json >"$tmp/sub2.json" 2>&1
r1=$(json_get "$tmp/sub1.json" "o['subscribers'][0]['counters']['msgs_received']" 2>&1)
r2=$(json_get "$tmp/sub2.json" "o['subscribers'][0]['counters']['msgs_received']" 2>&1)
sub=$(json_get "$tmp/sub2.json" "(o['subscribers'][0]['topic'], o['subscribers'][0]['pattern'], o['subscribers'][0]['counters']['sources'], o['total']['counters']['msgs_received'] >= o['subscribers'][0]['counters']['msgs_received'], o['publishers'])" 2>&1)
if [[ "$r1" =~ ^[0-9]+$ ]] && [[ "$r2" =~ ^[0-9]+$ ]] && [ "$r1" -gt 0 ] && [ "$r2" -gt "$r1" ] &&
   [ "$sub" = "('md.*', True, 1, True, [])" ]; then
	ok "subscriber row: msgs_received $r1 -> $r2, $sub"
else
	fail "subscriber row: $r1 -> $r2, $sub: $(cat "$tmp/sub2.json")"
fi

# --topic filters publisher and subscriber rows only
expect 0 flit-stat "$SUB" --topic 'zz*' && ! grep -q '^  sub ' "$tmp/out" && grep -q '^  total ' "$tmp/out" &&
	ok "--topic 'zz*' hides the subscriber row" || fail "--topic zz*: $(cat "$tmp/out")"
expect 0 flit-stat "$SUB" --topic 'md.*' && grep -q '^  sub  *pat  *md\.\*' "$tmp/out" ||
	fail "--topic md.*: $(cat "$tmp/out")"

# --all: both processes
expect 0 flit-stat --all && grep -q "^pid $PUB (flit-pub)" "$tmp/out" && grep -q "^pid $SUB (flit-sub)" "$tmp/out" ||
	fail "--all: $(cat "$tmp/out")"

# ---- --watch ---------------------------------------------------------------------------
timeout -s INT 3.4 "$D/flit-stat" "$PUB" --watch 1 >"$tmp/watch" 2>"$tmp/err"
n=$(grep -c '^--- ' "$tmp/watch")
rates=$(grep -c '^  pub .*msgs_sent=[0-9]* ([0-9.]*[kMG]*/s)' "$tmp/watch")
if [ "$n" -ge 2 ] && [ "$rates" -ge 2 ] && grep -q '^  pub .*msgs_sent=[0-9]* ([1-9][0-9]*/s)' "$tmp/watch"; then
	ok "--watch 1: $n updates, rates: $(grep '^  pub ' "$tmp/watch" | tail -1 | sed 's/ bytes_sent.*//')"
else
	fail "--watch: $n updates, $rates rates: $(cat "$tmp/watch" "$tmp/err")"
fi
timeout -s INT 2.3 "$D/flit-stat" "$PUB" --watch=0.5 --json >"$tmp/watch.json" 2>"$tmp/err"
w=$(json_get "$tmp/watch.json" "(len(objs) >= 3, 'per_sec' not in objs[0]['publishers'][0], objs[-1]['publishers'][0]['per_sec']['msgs_sent'] > 0, objs[-1]['publishers'][0]['counters']['msgs_sent'] > objs[0]['publishers'][0]['counters']['msgs_sent'])" 2>&1)
[ "$w" = "(True, True, True, True)" ] && ok "--watch=0.5 --json: rates in per_sec" ||
	fail "--watch --json: $w $(cat "$tmp/watch.json" "$tmp/err")"

# a watched process that exits ends the watch
"$D/flit-sub" 'other.*' >/dev/null 2>&1 &
SUB2=$!; pids+=("$SUB2")
for _ in $(seq 50); do S "$SUB2" >/dev/null 2>&1 && break; sleep 0.1; done
timeout 10 "$D/flit-stat" "$SUB2" --watch 0.2 >"$tmp/watch2" 2>&1 &
W=$!
sleep 0.5
kill -TERM "$SUB2"
if wait "$W"; then
	grep -q "pid $SUB2 has no live counters file any more" "$tmp/watch2" &&
		ok "watch of an exiting process ends" || fail "watch end: $(cat "$tmp/watch2")"
else
	fail "watch of an exiting process: exit status $?: $(tail -3 "$tmp/watch2")"
fi

# ---- kill -9: a stale file, --gc ------------------------------------------------------------
pfile=$(ls "$tmp/stats/$PUB"-* 2>/dev/null | head -1)
kill -9 "$PUB"; wait "$PUB" 2>/dev/null
[ -n "$pfile" ] && [ -e "$pfile" ] && ok "kill -9 leaves $pfile" || fail "no file left by the killed publisher"
expect 0 flit-stat && grep -q "^$PUB .* stale .*(pid $PUB is gone)" "$tmp/out" &&
	ok "listed stale: $(grep "^$PUB " "$tmp/out")" || fail "stale listing: $(cat "$tmp/out")"
expect 1 flit-stat "$PUB" && grep -q "stale: pid $PUB is gone" "$tmp/err" ||
	fail "flit-stat of a dead pid: $(cat "$tmp/err")"
expect 0 flit-stat --gc && grep -q "^removed $pfile (pid $PUB is gone)" "$tmp/out" && [ ! -e "$pfile" ] &&
	ok "--gc removed it" || fail "--gc: $(cat "$tmp/out")"
[ -n "$(ls "$tmp/stats/$SUB"-* 2>/dev/null)" ] && ok "--gc left the live subscriber's file" ||
	fail "--gc removed a live file"
kill -TERM "$SUB"; wait "$SUB" 2>/dev/null
[ -z "$(ls "$tmp/stats/$SUB"-* 2>/dev/null)" ] && ok "a subscriber that exits removes its file" ||
	fail "file of $SUB left after SIGTERM"

# ---- the XDP program's counters -------------------------------------------------------------------
xdp_skip() { echo "skip: XDP counters part: $*"; }
if [ "$(id -u)" -ne 0 ]; then
	xdp_skip "needs root (network namespaces, XDP)"
elif [ ! -x "$L" ] || [ ! -x "$TB" ]; then
	xdp_skip "$L or $TB missing"
elif ! "$TB" up --name "$tbname" --hosts 2 --owner-pid $$ >"$tmp/tb" 2>&1; then
	xdp_skip "no testbed: $(tail -1 "$tmp/tb")"
else
	tb_up=1
	NS="$tbname-h1"
	# N datagrams from host 2 to host 1's port 9 (bash's /dev/udp)
	send_udp() {
		"$TB" exec --name "$tbname" --host 2 -- bash -c \
			"for i in \$(seq $1); do echo flit-stat-test >/dev/udp/10.77.0.1/9; sleep 0.05; done" \
			>/dev/null 2>&1
	}
	expect 1 flit-stat --xdp eth0 --netns "$NS" && grep -q "not attached to eth0" "$tmp/err" ||
		fail "--xdp without the program: $(cat "$tmp/err")"
	if ! "$TB" exec --name "$tbname" --host 1 -- "$L" attach eth0 --mode skb >"$tmp/att" 2>&1; then
		fail "flit-loader attach: $(cat "$tmp/att")"
	else
		ok "flit-loader attached the program on $NS eth0"
		send_udp 5
		expect 0 flit-stat --xdp eth0 --netns "$NS" && cp "$tmp/out" "$tmp/x1"
		if grep -q '^xdp eth0 in '"$NS" "$tmp/x1" && grep -q '^  verdicts .* passed=[1-9]' "$tmp/x1" &&
		   grep -q '^  passed because .* no_flow=[1-9]' "$tmp/x1"; then
			ok "flit-stat --xdp: $(grep verdicts "$tmp/x1")"
		else
			fail "flit-stat --xdp: $(cat "$tmp/x1")"
		fi
		S --xdp eth0 --netns "$NS" --json >"$tmp/x.json" 2>"$tmp/err"
		p1=$(json_get "$tmp/x.json" "o['verdicts']['passed']" 2>&1)
		send_udp 3
		S --xdp eth0 --netns "$NS" --json >"$tmp/x.json" 2>"$tmp/err"
		x=$(json_get "$tmp/x.json" "(o['xdp'], o['netns'], o['verdicts']['passed'] > $p1 if '$p1'.isdigit() else 'bad', sorted(o['verdicts']), o['pass_reasons']['pass_no_flow'] > 0, 'vlan' in o['other'])" 2>&1)
		[ "$x" = "('eth0', '$NS', True, ['filtered', 'malformed', 'passed', 'redirected'], True, True)" ] &&
			ok "--xdp --json: passed $p1 -> more, verdicts and reasons" || fail "--xdp --json: $x $(cat "$tmp/x.json")"
		timeout -s INT 2.5 "$D/flit-stat" --xdp eth0 --netns "$NS" --watch 1 >"$tmp/xw" 2>&1 &
		XW=$!
		send_udp 30
		wait "$XW"
		grep -q '^--- ' "$tmp/xw" && grep -q 'passed=[0-9]* ([0-9.]*/s)' "$tmp/xw" &&
			ok "--xdp --watch: rates" || fail "--xdp --watch: $(cat "$tmp/xw")"
		if command -v capsh >/dev/null 2>&1; then
			nsenter --net="/run/netns/$NS" capsh --drop=cap_net_admin,cap_bpf,cap_sys_admin,cap_perfmon \
				-- -c "exec $D/flit-stat --xdp eth0" >"$tmp/out" 2>"$tmp/err" </dev/null
			rc=$?
			[ "$rc" -eq 1 ] && grep -q CAP_BPF "$tmp/err" && grep -q CAP_NET_ADMIN "$tmp/err" &&
				ok "unprivileged --xdp -> 1: $(cat "$tmp/err")" ||
				fail "unprivileged --xdp: exit $rc: $(cat "$tmp/err")"
		else
			echo "skip: capsh not found (libcap2-bin): no unprivileged case"
		fi
	fi
fi

finish
