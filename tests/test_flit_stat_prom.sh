#!/usr/bin/env bash
# flit-stat --prometheus and --serve end to end.  Counters files in a
# directory of the test's own, from two kinds of writers:
#   - real ones: a flit-sub ('md.*') and a flit-pub (shm) whose topic holds
#     a double quote and a backslash (md.q"b\x), fed a line every 10 ms;
#   - fixtures: files written by python3 from docs/STATS.md's layout, held
#     live by their writer's lock (as the library holds its own): FIX1 with
#     five publisher and four subscriber rows (two of one topic), a topic
#     that is not UTF-8 and a domain with a newline and a quote; FIX2 with
#     100,000 topic rows over two contexts; and a stale file (no lock).
# Checks:
#   - misuse exits 2 with the usage; --prometheus of a pid without a file 1;
#   - every output passes `promtool check metrics` (part skipped, with the
#     reason, when promtool is missing: apt-get install prometheus);
#   - the series and values: publisher, subscriber, transport and context
#     rows of the real processes, labels escaped, flit_sources a gauge,
#     --topic filtering, PID selecting one process, HELP/TYPE once per family;
#   - --max-topics 2: the two oldest rows keep their series, the rest sum
#     into topic="_other" (per transport for publishers); the subscribers of
#     one topic are one series; 100,000 topics give a bounded output;
#   - the text table's --rows: the busiest rows of each kind, the rest summed
#     in one line ("... N more"), --rows 0 all; 100,000 topics in 20 rows a
#     context; --rows with --json or --prometheus is a usage error;
#   - --serve 127.0.0.1:0: GET /metrics (Content-Type, the same exposition),
#     HEAD, /, 404, 405, 400, 431, a silent client does not hold up a scrape,
#     a second server on the port exits 1 saying it is in use, SIGTERM ends
#     it with status 0; [::1] when the host has IPv6 loopback; a port below
#     1024 without CAP_NET_BIND_SERVICE (capsh) exits 1 naming it;
#   - XDP (root only, else skipped with the reason): a 2-host testbed,
#     flit's program attached on host 1's eth0 by flit-loader, datagrams
#     from host 2: flit_xdp_packets_total{verdict="passed"} and
#     flit_xdp_passed_total{reason="no_flow"} count them; served, the
#     interface reads flit_xdp_up 1, and 0 once the program is detached.
# Uses $FLIT_TOOLS_DIR (tests/run-tests.sh sets it), tools/testbed and
# $BUILD/loader/flit-loader.
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
D=${FLIT_TOOLS_DIR:-$PWD/${BUILD:-build}/tools}
L=${FLIT_LOADER:-$PWD/${BUILD:-build}/loader/flit-loader}
TB=${FLIT_TESTBED:-$PWD/tools/testbed}
for t in flit-stat flit-pub flit-sub; do
	[ -x "$D/$t" ] || { echo "SKIP: $D/$t not built (make tools)"; exit 77; }
done
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found (fixtures, HTTP client)"; exit 77; }
PROMTOOL=$(command -v promtool 2>/dev/null)
[ -n "$PROMTOOL" ] || echo "skip: promtool checks: promtool not found (apt-get install prometheus)"

tmp=$(mktemp -d /tmp/flit-test-prom.XXXXXX)
export FLIT_CONTEXT_STATS_DIR="$tmp/stats" FLIT_CONTEXT_SHM_DIR="$tmp/shm"
export FLIT_CONTEXT_TRANSPORTS=shm FLIT_CONTEXT_STATS_INTERVAL_MS=50
tbname="sp$(($$ % 100000))"
tb_up=0
pids=()
failures=0

cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [ "$tb_up" = 1 ]; then
		"$TB" exec --name "$tbname" --host 1 -- "$L" detach eth0 >/dev/null 2>&1
		"$TB" down --name "$tbname" >/dev/null 2>&1
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

S() { timeout 20 "$D/flit-stat" "$@"; }

# expect RC ARGS...: flit-stat's exit status; for 2, the usage on stderr
expect() {
	local want=$1; shift
	S "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		fail "flit-stat $* exited $rc, expected $want: $(head -3 "$tmp/err")"; return 1
	fi
	if [ "$want" -eq 2 ] && ! grep -q '^Usage: ' "$tmp/err"; then
		fail "flit-stat $*: no usage on stderr"; return 1
	fi
	ok "flit-stat $* -> $rc"
}

# promcheck FILE WHAT: promtool finds no problem (and every family has one
# HELP and one TYPE line, in one block)
promcheck() {
	local dup
	dup=$(awk '/^# TYPE /{n[$3]++} END{for (k in n) if (n[k] > 1) print k}' "$1")
	[ -z "$dup" ] || fail "$2: TYPE repeated for $dup"
	[ -n "$PROMTOOL" ] || return 0
	if "$PROMTOOL" check metrics <"$1" >"$tmp/promtool" 2>&1; then
		ok "$2: promtool check metrics: no problem"
	else
		fail "$2: promtool: $(head -5 "$tmp/promtool")"
	fi
}

# value FILE SERIES: the value of the series written exactly so (labels in
# flit-stat's order), empty if absent
value() {
	S_="$2" awk 'index($0, ENVIRON["S_"] " ") == 1 { print substr($0, length(ENVIRON["S_"]) + 2) }' "$1"
}

# http PORT [HOST] REQUEST: send REQUEST (printf escapes), print the reply
# (headers and body); a reply that does not come in 5 s prints TIMEOUT
http() {
	local port=$1 host=127.0.0.1
	[ $# -eq 3 ] && { host=$2; shift; }
	python3 - "$host" "$port" "$2" <<'EOF'
import socket, sys
host, port, req = sys.argv[1], int(sys.argv[2]), sys.argv[3]
req = req.encode().decode('unicode_escape').encode('latin-1')
fam = socket.AF_INET6 if ':' in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect((host, port))
    s.sendall(req)
    out = b''
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    print('TIMEOUT'); sys.exit(0)
except OSError as e:
    print('ERROR', e); sys.exit(0)
sys.stdout.write(out.decode('utf-8', 'replace').replace('\r\n', '\n'))
EOF
}

# ---- misuse --------------------------------------------------------------------
expect 2 --prometheus --json
expect 2 --prometheus --watch 1
expect 2 --prometheus --gc
expect 2 --max-topics 5
expect 2 --prometheus --max-topics x
expect 2 --prometheus --max-topics -1
expect 2 --prometheus 12 34
for a in 127.0.0.1 127.0.0.1:99999 127.0.0.1: '[::1]' '::1:9470' localhost:9470 '1.2.3:9470' '[::1:9470'; do
	expect 2 --serve "$a" && grep -q "is not ADDR:PORT" "$tmp/err" || fail "--serve $a: $(head -1 "$tmp/err")"
done
expect 2 --serve
expect 2 --serve 127.0.0.1:9470 --json
expect 2 --xdp 'a,,b' --prometheus
nopid=4194000
while [ -e "/proc/$nopid" ]; do nopid=$((nopid + 1)); done
expect 1 --prometheus "$nopid" && grep -q "no process $nopid" "$tmp/err" || fail "no process: $(cat "$tmp/err")"

# no counters file at all: a valid, nearly empty exposition
expect 0 --prometheus && [ "$(value "$tmp/out" flit_stat_contexts)" = 0 ] &&
	ok "no process: flit_stat_contexts 0" || fail "empty: $(head -5 "$tmp/out")"
promcheck "$tmp/out" "no process"

# ---- real processes ---------------------------------------------------------------
TOPIC='md.q"b\x'
ETOPIC='md.q\"b\\x'     # as a label value
"$D/flit-sub" 'md.*' >"$tmp/sub.out" 2>"$tmp/sub.err" &
SUB=$!; pids+=("$SUB")
(i=0; while :; do i=$((i + 1)); echo "1.08$i"; sleep 0.01; done) 2>/dev/null |
	"$D/flit-pub" --file - "$TOPIC" 2>"$tmp/pub.err" &
PUB=$!; pids+=("$PUB")
pids+=("$(jobs -p | tail -1)")

PS="flit_msgs_sent_total{pid=\"$PUB\",context=\"0\",role=\"pub\",transport=\"shm\",topic=\"$ETOPIC\"}"
SS="flit_msgs_received_total{pid=\"$SUB\",context=\"0\",role=\"sub\",topic=\"md.*\"}"
for _ in $(seq 100); do
	S --prometheus >"$tmp/p1" 2>"$tmp/err"
	[ "$(value "$tmp/p1" "$PS")" -gt 0 ] 2>/dev/null && [ "$(value "$tmp/p1" "$SS")" -gt 0 ] 2>/dev/null && break
	sleep 0.1
done
promcheck "$tmp/p1" "two live processes"
m1=$(value "$tmp/p1" "$PS"); r1=$(value "$tmp/p1" "$SS")
if [ -n "$m1" ] && [ "$m1" -gt 0 ] && [ -n "$r1" ] && [ "$r1" -gt 0 ]; then
	ok "publisher msgs_sent $m1, subscriber msgs_received $r1 (topic label escaped: $ETOPIC)"
else
	fail "no publisher/subscriber series: $(grep -E 'msgs_(sent|received)_total' "$tmp/p1")"
fi
sleep 0.5
S --prometheus >"$tmp/p2" 2>&1
m2=$(value "$tmp/p2" "$PS")
[ -n "$m2" ] && [ -n "$m1" ] && [ "$m2" -gt "$m1" ] && ok "msgs_sent grows: $m1 -> $m2" ||
	fail "msgs_sent not growing: $m1 -> $m2"
ctx=$(value "$tmp/p2" "flit_msgs_sent_total{pid=\"$PUB\",context=\"0\",role=\"context\"}")
tr=$(value "$tmp/p2" "flit_msgs_sent_total{pid=\"$PUB\",context=\"0\",role=\"transport\",transport=\"shm\"}")
[ -n "$ctx" ] && [ -n "$tr" ] && [ "$ctx" -ge "$m2" ] && [ "$tr" -ge "$m2" ] &&
	ok "context ($ctx) and transport ($tr) rows >= the publisher's ($m2)" ||
	fail "context/transport rows: '$ctx' '$tr' vs $m2"
[ "$(value "$tmp/p2" "flit_sources{pid=\"$SUB\",context=\"0\",role=\"sub\",topic=\"md.*\"}")" = 1 ] &&
	grep -q '^# TYPE flit_sources gauge$' "$tmp/p2" && grep -q '^# TYPE flit_msgs_sent_total counter$' "$tmp/p2" &&
	ok "flit_sources is a gauge (1), flit_msgs_sent_total a counter" || fail "flit_sources: $(grep flit_sources "$tmp/p2")"
grep -q "^flit_context_info{pid=\"$PUB\",context=\"0\",comm=\"flit-pub\",domain=\"default\",transports=\"shm\"} 1$" "$tmp/p2" &&
	ok "flit_context_info of the publisher" || fail "flit_context_info: $(grep flit_context_info "$tmp/p2")"
n=$(grep -c '^# HELP ' "$tmp/p2"); t=$(grep -c '^# TYPE ' "$tmp/p2")
[ "$n" = "$t" ] && [ "$n" -ge 30 ] && ok "$n families, each with HELP and TYPE" || fail "HELP $n, TYPE $t"
# no sample carries a timestamp (the textfile collector refuses them)
awk '!/^#/ && NF != 2 { bad = 1 } END { exit bad }' "$tmp/p2" && ok "no timestamps" ||
	fail "a sample line with more than a value: $(awk '!/^#/ && NF != 2' "$tmp/p2" | head -2)"

# PID: that process only; --topic: rows filtered, totals kept
expect 0 --prometheus "$PUB"
! grep -q "pid=\"$SUB\"" "$tmp/out" && grep -q "pid=\"$PUB\"" "$tmp/out" &&
	[ "$(value "$tmp/out" flit_stat_contexts)" = 1 ] && ok "--prometheus PID: one process" ||
	fail "--prometheus $PUB: $(grep -c "pid=\"$SUB\"" "$tmp/out") lines of $SUB"
expect 0 --prometheus --topic 'zz*'
! grep -v '^#' "$tmp/out" | grep -q ',topic="' &&
	grep -q "^flit_msgs_sent_total{pid=\"$PUB\",context=\"0\",role=\"context\"}" "$tmp/out" &&
	[ "$(value "$tmp/out" "flit_topics{pid=\"$PUB\",context=\"0\",role=\"pub\"}")" = 0 ] &&
	ok "--topic 'zz*': no topic rows, totals kept" || fail "--topic: $(grep topic= "$tmp/out" | head -3)"
promcheck "$tmp/out" "--topic 'zz*'"

# ---- fixtures: caps, merging, escaping, 100,000 topics ------------------------------
# fixture.py N_CTX ROWS_PER_CTX KIND: write <stats>/<own pid>-<n> files per
# docs/STATS.md, hold them live (a write lock on byte 0, as the library's),
# print "ready", wait for stdin to close.  KIND small: FIX1's rows; big:
# ROWS publishers per context.  KIND stale: one file, no lock, pid of a
# process that is gone, then exit.
cat >"$tmp/fixture.py" <<'EOF'
import fcntl, os, struct, sys, time
d = os.environ['FLIT_CONTEXT_STATS_DIR']
nctx, nrows, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
pid = int(sys.argv[4]) if kind == 'stale' else os.getpid()
os.makedirs(d, exist_ok=True)
HDR = '=8sIIIIIIIIQQQQIIQIIQ24s16s16s64s32s256s512s'
ROW = '=QIIQQ16s256s26Q'
assert struct.calcsize(HDR) == 1024 and struct.calcsize(ROW) == 512
now = time.monotonic_ns()
def row(k, name, transport, created, counters, flags=0):
    c = [0] * 26
    for i, v in counters.items():
        c[i] = v
    return struct.pack(ROW, 2, k, flags, now, created, transport, name, *c)
fds = []
for n in range(nctx):
    rows = [row(1, b'dom', b'', 1, {0: 1000, 4: 2000, 21: 0})]
    rows.append(row(2, b'shm ring', b'shm', 2, {0: 1000}))
    if kind == 'small':
        # publishers t0..t4, oldest first; msgs_sent 10, 20, .., 50
        for i in range(5):
            rows.append(row(3, b't%d' % i, b'shm', 1000 + 10 * i, {0: 10 * (i + 1)}))
        # subscribers s0..s2 (msgs_received 100, 200, 300) and a second of s2
        for i in range(3):
            rows.append(row(4, b's%d' % i, b'', 1005 + 10 * i, {4: 100 * (i + 1), 21: 1}))
        rows.append(row(4, b's2', b'', 1100, {4: 7, 21: 1}))
        # escaping: a quote, a backslash, bytes that are not UTF-8
        rows.append(row(3, b'q"b\\s', b'shm', 2000, {0: 5}))
        rows.append(row(3, b'bad\xff\xfez', b'shm', 2001, {0: 6}))
        rows.append(row(4, 'caf\u00e9*'.encode(), b'', 2002, {4: 8}, 1))
        domain = b'dom\nwith "quote"'
    else:
        for i in range(nrows):
            rows.append(row(3, b'big.%d.%06d' % (n, i), b'shm', 10 + i, {0: 1}))
        domain = b'dom'
    hdr = struct.pack(HDR, b'FLITSTAT', 1, 1024, 512, len(rows), 26, 0x01020304, pid, n,
                      0, 0, now, time.time_ns(), 100, 0, now, len(rows), 0, 5, b'',
                      b'monotonic', b'fixture', domain, b'shm', b'', b'fixture.py')
    path = '%s/%d-%d' % (d, pid, n)
    with open(path + '.tmp', 'wb') as f:
        f.write(hdr + b''.join(rows))
    os.rename(path + '.tmp', path)
    if kind != 'stale':
        fd = os.open(path, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        fds.append(fd)
print('ready', flush=True)
if kind != 'stale':
    sys.stdin.read()
EOF
# fixture NAME ARGS: start one; its pid in $FIXPID
fixture() {
	local name=$1; shift
	mkfifo "$tmp/$name.in"
	python3 "$tmp/fixture.py" "$@" <"$tmp/$name.in" >"$tmp/$name.out" 2>&1 &
	FIXPID=$!; pids+=("$FIXPID")
	exec {fd}>"$tmp/$name.in"   # held open: the fixture lives until the test ends
	for _ in $(seq 200); do grep -q ready "$tmp/$name.out" && return 0; sleep 0.05; done
	fail "fixture $name: $(cat "$tmp/$name.out")"
}
fixture fix1 1 0 small; FIX1=$FIXPID
python3 "$tmp/fixture.py" 1 0 stale "$nopid" >/dev/null 2>&1 || fail "stale fixture"

expect 0 --prometheus "$FIX1" --max-topics 2 && cp "$tmp/out" "$tmp/f1"
promcheck "$tmp/f1" "fixture, --max-topics 2"
L1="pid=\"$FIX1\",context=\"0\""
got=$(grep -o "^flit_msgs_sent_total{$L1,role=\"pub\"[^ ]* [0-9]*" "$tmp/f1" | sed 's/.*role="pub",//' | tr '\n' ' ')
want='transport="shm",topic="_other"} 151 transport="shm",topic="t0"} 10 '
[ "$got" = "$want" ] && ok "--max-topics 2: t0 kept, 7 publishers summed into _other (151)" ||
	fail "--max-topics 2 publishers: '$got', expected '$want'"
got=$(grep -o "^flit_msgs_received_total{$L1,role=\"sub\"[^ ]* [0-9]*" "$tmp/f1" | sed 's/.*role="sub",//' | tr '\n' ' ')
want='topic="_other"} 515 topic="s0"} 100 '
[ "$got" = "$want" ] && ok "--max-topics 2: s0 kept, the rest summed into _other (515)" ||
	fail "--max-topics 2 subscribers: '$got', expected '$want'"
[ "$(value "$tmp/f1" "flit_topics{$L1,role=\"pub\"}") $(value "$tmp/f1" "flit_topics_other{$L1,role=\"pub\"}") $(value "$tmp/f1" "flit_topics{$L1,role=\"sub\"}") $(value "$tmp/f1" "flit_topics_other{$L1,role=\"sub\"}")" = "7 6 5 4" ] &&
	ok "flit_topics / flit_topics_other: pub 7/6, sub 5/4" || fail "flit_topics: $(grep "^flit_topics" "$tmp/f1")"
grep -q '^# HELP flit_msgs_sent_total .*topic="_other".*--max-topics' "$tmp/f1" &&
	ok "the HELP line says what _other is" || fail "HELP: $(grep '^# HELP flit_msgs_sent_total' "$tmp/f1")"

expect 0 --prometheus "$FIX1" && cp "$tmp/out" "$tmp/f2"
promcheck "$tmp/f2" "fixture, escaping"
for s in "flit_msgs_sent_total{$L1,role=\"pub\",transport=\"shm\",topic=\"q\\\"b\\\\s\"} 5" \
	 "flit_msgs_sent_total{$L1,role=\"pub\",transport=\"shm\",topic=\"bad"$'\xef\xbf\xbd\xef\xbf\xbd'"z\"} 6" \
	 "flit_msgs_received_total{$L1,role=\"sub\",topic=\"café*\"} 8" \
	 "flit_msgs_received_total{$L1,role=\"sub\",topic=\"s2\"} 307" \
	 "flit_sources{$L1,role=\"sub\",topic=\"s2\"} 2" \
	 "flit_context_info{$L1,comm=\"fixture\",domain=\"dom\\nwith \\\"quote\\\"\",transports=\"shm\"} 1"; do
	grep -qxF "$s" "$tmp/f2" && ok "series: $s" || fail "no series: $s"
done

# the text table, busiest rows first (--rows): FIX1's publishers t4 (50),
# t3 (40), the other five summed (10+20+30+5+6); its subscribers s2 (300),
# s1 (200), the other three summed (100+8+7)
expect 2 "$FIX1" --rows x
expect 2 "$FIX1" --rows 2 --json
expect 2 --prometheus --rows 2
expect 0 "$FIX1" --rows 2 && cp "$tmp/out" "$tmp/rows2"
got=$(grep -E '^  (pub|sub)s? ' "$tmp/rows2" | sed -E 's/^  (pubs?|subs?) +(shm|pat)? *([^ ]+( [0-9]+ more)?) +(msgs_sent|msgs_received)=([0-9]+).*/\1 \3 \6/' | tr '\n' ';')
want='pub t4 50;pub t3 40;pubs ... 5 more 71;sub s2 300;sub s1 200;subs ... 3 more 115;'
[ "$got" = "$want" ] && grep -q -- '--rows 0 for all' "$tmp/rows2" &&
	ok "--rows 2: the two busiest of each kind, the rest summed in one line" ||
	fail "--rows 2: '$got', expected '$want': $(cat "$tmp/rows2")"
expect 0 "$FIX1" --rows 0
[ "$(grep -c '^  pub ' "$tmp/out") $(grep -c '^  sub ' "$tmp/out")" = "7 5" ] && ! grep -q 'more' "$tmp/out" &&
	ok "--rows 0: every row" || fail "--rows 0: $(cat "$tmp/out")"

# 100,000 topics in one process (two contexts): at most 1000 series per family
fixture fix2 2 50000 big; FIX2=$FIXPID
start=$(date +%s%N)
expect 0 --prometheus && cp "$tmp/out" "$tmp/big"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
promcheck "$tmp/big" "100,000 topics"
L2="pid=\"$FIX2\""
nt=$(grep -c "^flit_msgs_sent_total{$L2,context=\"[01]\",role=\"pub\",transport=\"shm\",topic=\"big" "$tmp/big")
other=$(grep "^flit_msgs_sent_total{$L2,context=\"[01]\",role=\"pub\",transport=\"shm\",topic=\"_other\"}" "$tmp/big" | awk '{s += $2} END {print s}')
lines=$(wc -l <"$tmp/big")
if [ "$nt" = 1000 ] && [ "$other" = 99000 ] && [ "$lines" -lt 20000 ]; then
	ok "100,000 topics: 1000 series, 99000 messages in _other, $lines lines in $ms ms"
else
	fail "100,000 topics: $nt series, _other $other, $lines lines"
fi
[ "$(value "$tmp/big" flit_stat_stale_files)" = 1 ] && ! grep -q "pid=\"$nopid\"" "$tmp/big" &&
	ok "the stale file is counted, not shown" || fail "flit_stat_stale_files: $(grep flit_stat_stale "$tmp/big")"
# the 1000 kept are the oldest: each context's first 500
grep -q "topic=\"big.0.000499\"" "$tmp/big" && grep -q "topic=\"big.1.000499\"" "$tmp/big" &&
	! grep -q "topic=\"big.0.000500\"" "$tmp/big" && ok "the oldest rows keep their series" ||
	fail "kept rows: $(grep -o 'topic="big[^"]*"' "$tmp/big" | sort -u | tail -2)"
# the text table of 100,000 topics: 20 rows a context and a line for the rest
start=$(date +%s%N)
expect 0 "$FIX2" && cp "$tmp/out" "$tmp/bigtext"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
more=$(sed -n 's/^  pubs  *\.\.\. \([0-9]*\) more .*msgs_sent=\([0-9]*\).*/\1 \2/p' "$tmp/bigtext" | tr '\n' ' ')
if [ "$(grep -c '^  pub ' "$tmp/bigtext")" = 40 ] && [ "$more" = "49980 49980 49980 49980 " ] &&
   [ "$(wc -l <"$tmp/bigtext")" -lt 60 ]; then
	ok "flit-stat of 100,000 topics: 20 rows a context and the rest summed, $(wc -l <"$tmp/bigtext") lines in $ms ms"
else
	fail "flit-stat of 100,000 topics: $(grep -c '^  pub ' "$tmp/bigtext") rows, more '$more': $(head -30 "$tmp/bigtext")"
fi
expect 0 --prometheus --max-topics 0 "$FIX2"
[ "$(grep -c 'topic="big' "$tmp/out")" = 0 ] && ok "--max-topics 0: every topic in _other" ||
	fail "--max-topics 0 shows topics"
kill "$FIX2" 2>/dev/null

# ---- --serve ---------------------------------------------------------------------------
# serve ADDR: start a server; its pid in $SRV, its port in $PORT
serve() {
	"$D/flit-stat" --serve "$@" >"$tmp/srv.out" 2>"$tmp/srv.err" &
	SRV=$!; pids+=("$SRV")
	PORT=
	for _ in $(seq 100); do
		PORT=$(sed -n 's|^# serving .* at http://.*:\([0-9]*\)/metrics$|\1|p' "$tmp/srv.out")
		[ -n "$PORT" ] && return 0
		kill -0 "$SRV" 2>/dev/null || break
		sleep 0.05
	done
	return 1
}
if ! serve 127.0.0.1:0 -v; then
	fail "--serve 127.0.0.1:0: $(cat "$tmp/srv.out" "$tmp/srv.err")"
else
	ok "serving on 127.0.0.1:$PORT"
	http "$PORT" 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n' >"$tmp/r"
	head -1 "$tmp/r" | grep -q '^HTTP/1.1 200 OK$' &&
		grep -qx 'Content-Type: text/plain; version=0.0.4; charset=utf-8' "$tmp/r" &&
		ok "GET /metrics: 200, text/plain; version=0.0.4" || fail "GET /metrics: $(head -5 "$tmp/r")"
	sed '1,/^$/d' "$tmp/r" >"$tmp/rbody"
	len=$(sed -n 's/^Content-Length: //p' "$tmp/r")
	[ "$len" = "$(wc -c <"$tmp/rbody")" ] && ok "Content-Length $len" || fail "Content-Length $len, body $(wc -c <"$tmp/rbody")"
	promcheck "$tmp/rbody" "GET /metrics"
	v=$(value "$tmp/rbody" "$PS")
	[ -n "$v" ] && [ "$v" -gt "$m2" ] && grep -q "^flit_msgs_received_total{$L1,role=\"sub\",topic=\"s0\"} 100$" "$tmp/rbody" &&
		ok "the scrape carries the live counters ($PS $v)" || fail "scrape: '$v'"
	http "$PORT" 'HEAD /metrics HTTP/1.1\r\n\r\n' >"$tmp/r"
	head -1 "$tmp/r" | grep -q ' 200 ' && [ -z "$(sed '1,/^$/d' "$tmp/r")" ] && ok "HEAD: 200, no body" ||
		fail "HEAD: $(cat "$tmp/r")"
	http "$PORT" 'GET / HTTP/1.0\r\n\r\n' >"$tmp/r"
	head -1 "$tmp/r" | grep -q ' 200 ' && grep -q 'href="/metrics"' "$tmp/r" && ok "GET /: a pointer to /metrics" ||
		fail "GET /: $(cat "$tmp/r")"
	http "$PORT" 'GET /nope HTTP/1.1\r\n\r\n' >"$tmp/r"
	head -1 "$tmp/r" | grep -q '^HTTP/1.1 404 ' && ok "GET /nope: 404" || fail "404: $(head -1 "$tmp/r")"
	http "$PORT" 'POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello' >"$tmp/r"
	head -1 "$tmp/r" | grep -q '^HTTP/1.1 405 ' && grep -q '^Allow: GET, HEAD' "$tmp/r" && ok "POST: 405, Allow: GET, HEAD" ||
		fail "405: $(head -3 "$tmp/r")"
	http "$PORT" 'hello there\r\n\r\n' >"$tmp/r"
	head -1 "$tmp/r" | grep -q '^HTTP/1.1 400 ' && ok "not HTTP: 400" || fail "400: $(head -1 "$tmp/r")"
	http "$PORT" "GET /metrics HTTP/1.1\\r\\nX-Big: $(head -c 9000 /dev/zero | tr '\0' a)\\r\\n\\r\\n" >"$tmp/r"
	head -1 "$tmp/r" | grep -q '^HTTP/1.1 431 ' && ok "a 9000-byte request head: 431" || fail "431: $(head -1 "$tmp/r")"
	# a client that connects and says nothing holds a slot, not the server
	python3 -c "import socket,time; s=socket.create_connection(('127.0.0.1',$PORT)); time.sleep(30)" &
	SLOW=$!; pids+=("$SLOW")
	sleep 0.3
	start=$(date +%s%N)
	http "$PORT" 'GET /metrics HTTP/1.1\r\n\r\n' >"$tmp/r"
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	head -1 "$tmp/r" | grep -q ' 200 ' && [ "$ms" -lt 2000 ] && ok "a silent client does not hold up a scrape ($ms ms)" ||
		fail "scrape beside a silent client: $ms ms, $(head -1 "$tmp/r")"
	expect 1 --serve "127.0.0.1:$PORT" && grep -q "127.0.0.1:$PORT: the address is in use" "$tmp/err" ||
		fail "a second server: $(cat "$tmp/err")"
	kill -TERM "$SRV"
	for _ in $(seq 40); do kill -0 "$SRV" 2>/dev/null || break; sleep 0.05; done
	if kill -0 "$SRV" 2>/dev/null; then
		fail "--serve still runs 2 s after SIGTERM"
	else
		wait "$SRV"; rc=$?
		[ "$rc" = 0 ] && ok "SIGTERM: the server exits 0" || fail "SIGTERM: exit $rc"
	fi
	grep -q '"GET /metrics HTTP/1.1" 200' "$tmp/srv.err" && ok "-v: a line per request" ||
		fail "-v log: $(head -3 "$tmp/srv.err")"
	kill "$SLOW" 2>/dev/null
fi

# IPv6 loopback
if ! python3 -c "import socket; s=socket.socket(socket.AF_INET6); s.bind(('::1', 0))" 2>/dev/null; then
	echo "skip: [::1]: no IPv6 loopback on this host"
elif ! serve '[::1]:0'; then
	fail "--serve [::1]:0: $(cat "$tmp/srv.err")"
else
	http "$PORT" ::1 'GET /metrics HTTP/1.1\r\n\r\n' >"$tmp/r"
	head -1 "$tmp/r" | grep -q ' 200 ' && grep -q '^flit_stat_contexts ' "$tmp/r" && ok "[::1]:$PORT serves" ||
		fail "[::1]: $(head -3 "$tmp/r")"
	kill -INT "$SRV"; wait "$SRV"; rc=$?
	[ "$rc" = 0 ] && ok "SIGINT: the server exits 0" || fail "SIGINT: exit $rc"
fi

# a privileged port without CAP_NET_BIND_SERVICE
low=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start 2>/dev/null || echo 1024)
if ! command -v capsh >/dev/null 2>&1; then
	echo "skip: privileged port: capsh not found (libcap2-bin)"
elif [ "$low" -le 1 ]; then
	echo "skip: privileged port: net.ipv4.ip_unprivileged_port_start is $low"
else
	capsh --drop=cap_net_bind_service -- -c "exec $D/flit-stat --serve 127.0.0.1:1" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
	[ "$rc" = 1 ] && grep -q 'CAP_NET_BIND_SERVICE' "$tmp/err" && ok "port 1 without the capability: $(cat "$tmp/err")" ||
		fail "port 1: exit $rc: $(cat "$tmp/err")"
fi
kill "$PUB" "$SUB" 2>/dev/null

# ---- the XDP program's counters -----------------------------------------------------------
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
	send_udp() {
		"$TB" exec --name "$tbname" --host 2 -- bash -c \
			"for i in \$(seq $1); do echo flit-stat-test >/dev/udp/10.77.0.1/9; sleep 0.02; done" \
			>/dev/null 2>&1
	}
	expect 1 --prometheus --xdp eth0 --netns "$NS" && grep -q "not attached to eth0" "$tmp/err" ||
		fail "--prometheus --xdp without the program: $(cat "$tmp/err")"
	if ! "$TB" exec --name "$tbname" --host 1 -- "$L" attach eth0 --mode skb >"$tmp/att" 2>&1; then
		fail "flit-loader attach: $(cat "$tmp/att")"
	else
		send_udp 5
		expect 0 --prometheus --xdp eth0 --netns "$NS" && cp "$tmp/out" "$tmp/x"
		promcheck "$tmp/x" "--xdp"
		XL="interface=\"eth0\",netns=\"$NS\""
		p=$(value "$tmp/x" "flit_xdp_packets_total{$XL,verdict=\"passed\"}")
		nf=$(value "$tmp/x" "flit_xdp_passed_total{$XL,reason=\"no_flow\"}")
		if [ -n "$p" ] && [ "$p" -ge 5 ] && [ -n "$nf" ] && [ "$nf" -ge 5 ] &&
		   [ "$(value "$tmp/x" "flit_xdp_up{$XL}")" = 1 ] &&
		   [ -n "$(value "$tmp/x" "flit_xdp_packets_total{$XL,verdict=\"redirected\"}")" ] &&
		   [ -n "$(value "$tmp/x" "flit_xdp_vlan_total{$XL}")" ]; then
			ok "--prometheus --xdp: passed $p, no_flow $nf"
		else
			fail "--prometheus --xdp: $(grep '^flit_xdp' "$tmp/x")"
		fi
		if serve 127.0.0.1:0 --xdp eth0 --netns "$NS"; then
			send_udp 3
			http "$PORT" 'GET /metrics HTTP/1.0\r\n\r\n' | sed '1,/^$/d' >"$tmp/x2"
			p2=$(value "$tmp/x2" "flit_xdp_packets_total{$XL,verdict=\"passed\"}")
			[ -n "$p2" ] && [ "$p2" -gt "$p" ] && [ "$(value "$tmp/x2" "flit_xdp_up{$XL}")" = 1 ] &&
				ok "served --xdp: passed $p -> $p2" || fail "served --xdp: $(grep '^flit_xdp' "$tmp/x2")"
			"$TB" exec --name "$tbname" --host 1 -- "$L" detach eth0 >/dev/null 2>&1
			http "$PORT" 'GET /metrics HTTP/1.0\r\n\r\n' | sed '1,/^$/d' >"$tmp/x3"
			[ "$(value "$tmp/x3" "flit_xdp_up{$XL}")" = 0 ] &&
				[ -z "$(value "$tmp/x3" "flit_xdp_packets_total{$XL,verdict=\"passed\"}")" ] &&
				ok "program detached: flit_xdp_up 0, its counters gone" ||
				fail "after detach: $(grep '^flit_xdp' "$tmp/x3")"
			promcheck "$tmp/x3" "--xdp, detached"
			kill -TERM "$SRV"; wait "$SRV"
		else
			fail "--serve --xdp: $(cat "$tmp/srv.err")"
		fi
	fi
fi

if [ "$failures" -gt 0 ]; then
	echo "$failures failure(s)"
	exit 1
fi
echo "all flit-stat --prometheus checks passed"
exit 0
