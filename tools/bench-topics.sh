#!/usr/bin/env bash
# Many topics in one context, measured (tools/flit-topics): per transport
# and N, a publishing process creates N topics md.sym00000.. (one source
# each) and idles polling every 1 ms, while a pattern subscriber ('md.*')
# in another process (udp, xdp: on the other host of a direct two-host
# testbed) counts the topics it finds.  Columns: time to create all N and
# the cost per topic in the first and the last tenth (linear: equal), file
# descriptors, RSS, CPU of the idle publishing process, the library's share
# of it (its threads and the time in flit_ctx_poll()) and the floor (the
# same 1 ms sleep loop without the library), how many of the N the
# subscriber found within the timeout (and when it had them all), and
# (udp, xdp) the resolution traffic once stable: INFO and QUERY bytes/s on
# the subscriber host's link (multicast adverts, queries, answers), counted
# for -R seconds (default 10; 0: not counted) after the subscriber found
# them all and resolution settled (--settle, default 6 s: the adverts' and
# queries' backoff reaches context.udp.resolver_max_ms, 5 s), and over the
# same seconds (shm too) the CPU of the publishing process at rest (rest%:
# every thread, /proc/PID/task/*/schedstat, its subscriber still there).
#
#   tools/bench-topics.sh [-n "1 1000 10000 100000"] [-t "shm shm+own udp udp+own xdp xdp+own rdma rdma+own"]
#                         [-T SECONDS] [-R SECONDS] [--settle SECONDS]
#                         [--spread N] [--rounds R] [--exact N] [--one N] [--one-rounds R]
#                         [--json FILE]
#
# Then, for shm, udp and xdp (those -t names), one topic against the messages
# spread over --spread N topics of one session (default 10,000; 0: not
# run), --rounds R times interleaved (default 2), medians: 1:1 throughput
# (flit-thru -s 32 -d 2, unbatched and batched) and RTT/2 p50 under load
# (flit-load -s 32 -r 100k -d 2), with the cache-line floor (flit-floor)
# of each round beside them.
#
# Then, for shm, udp and xdp, an exact subscriber of one topic among
# --exact N (default 100,000; 0: not run): started before the publisher, of
# its last topic (how long after that topic was made it had it), and
# started after all N exist, of the middle one and the two after it, one
# after another (how long after its flit_sub_new() each had it: a BOS or a
# message; the slowest of the three).
#
# Then, for udp and xdp, one wanted topic among --one N of a session
# (default 100,000; 0: not run): a subscriber of md.sym00042 alone, the
# publisher sending --one-rounds R rounds (default 10) of one message on
# every topic, unbatched, then batched (rows "+b": source.batch, frames
# of ~60 messages): what reached the subscriber, how many of the
# other topics' messages reached its user space (copied up and dropped
# there), NAKs and loss, and over xdp the program's counters meanwhile
# (frames dropped in XDP, frames steered up).
#
# "rdma", "rdma+own": over rdma on this host's RDMA device, publisher and
# subscriber on this host, the subscriber finding the topics through the
# udp resolver channel of the device's interface (FLIT_RDMA_IP: its
# address; without a device: not run; tests/rdma/vm-exec.sh -- tools/
# bench-topics.sh -t rdma runs it in a Soft-RoCE guest, slow: ratios only);
# in the spread section flit-thru only (flit-load has no static map).
#
# "shm", "udp", "xdp": the topics share sessions (the default: a session
# holds 65,536); "shm+own", "udp+own", "xdp+own": each topic a session (shm:
# a ring) of its own
# (flit-topics --session own); "udp+s", "xdp+s": named sessions
# (flit-topics --session md: source.session, a session per 50,000 topics);
# "shm+np", "udp+np", "xdp+np": the publisher never polls (flit-topics
# --no-poll: it need not; idle and floor are then of a 100 ms sleep loop).
#
# An N that cannot run here is not started, and the row says why: the RSS
# or file descriptors the previous N measured per topic would exceed half
# the memory available (shm: or of /dev/shm) or the fd limit, or its creation time, grown as
# measured, would exceed the creation budget (-T, default 60 s).  Needs
# root for udp/xdp (network namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
D=$PWD/$BUILD/tools
NS="1 1000 10000 100000" TRANSPORTS="shm shm+own udp udp+own xdp xdp+own" BUDGET=60 JSON= FIND_S=20 RES_W=10 SETTLE=6 SPREAD=10000 ROUNDS=2
ONE=100000 ONE_R=10 EXACT=100000
usage() { sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
	case $1 in
	-n) NS=$2; shift 2 ;;
	-t) TRANSPORTS=$2; shift 2 ;;
	-T) BUDGET=$2; shift 2 ;;
	-R) RES_W=$2; shift 2 ;;
	--settle) SETTLE=$2; shift 2 ;;
	--spread) SPREAD=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--one) ONE=$2; shift 2 ;;
	--exact) EXACT=$2; shift 2 ;;
	--one-rounds) ONE_R=$2; shift 2 ;;
	--json) JSON=$2; shift 2 ;;
	-h|--help) usage 0 ;;
	*) echo "bench-topics: unknown argument '$1'" >&2; usage ;;
	esac
done
[ -x "$D/flit-topics" ] || { echo "bench-topics: $D/flit-topics not built (make tools)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/flit-bench-topics.XXXXXX)
tb=bt$$; tb=${tb:0:8}
up=0
cleanup() { jobs -p | xargs -r kill 2>/dev/null; [ $up -eq 1 ] && tools/testbed down --name "$tb" >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

fdmax=$(ulimit -Hn)
memavail=$(( $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) * 1024 ))
shmfree=$(df -B1 --output=avail /dev/shm | tail -1)
printf '# flit-topics, %s; fd limit %s, %s GiB available, /dev/shm %s GiB free; creation budget %s s\n' \
	"$(date -u +%F)" "$fdmax" $((memavail >> 30)) $((shmfree >> 30)) "$BUDGET"
printf '%-5s %7s  %9s %8s %8s %7s %9s %6s %6s %6s %6s %9s  %s\n' transport topics create_s us/first us/last fds rss_MiB cpu% lib% floor% rest% res_B/s "found by 'md.*'"
# what resolution sends once stable, seen on a host's link: IPv4/UDP
# datagrams that are flit INFO (5) or QUERY (6) frames, in and out
cat >"$tmp/rescount.py" <<'EOF'
import socket, sys, time
iface, secs = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
s.settimeout(0.2)
n = {5: [0, 0], 6: [0, 0]}
end = time.monotonic() + secs
while time.monotonic() < end:
    try:
        p = s.recv(65536)
    except socket.timeout:
        continue
    if len(p) < 14 + 20 + 8 + 24 or p[12:14] != b"\x08\x00" or p[23] != 17:
        continue
    f = 14 + (p[14] & 15) * 4 + 8
    if p[f:f + 2] == b"FL" and p[f + 3] in n:
        n[p[f + 3]][0] += 1
        n[p[f + 3]][1] += len(p) - 14
print(f'{{"secs":{secs},"info_frames":{n[5][0]},"info_bytes":{n[5][1]},'
      f'"query_frames":{n[6][0]},"query_bytes":{n[6][1]},'
      f'"bytes_per_s":{(n[5][1] + n[6][1]) / secs:.1f}}}')
EOF
# what the tables' scripts share (PYTHONPATH=$tmp)
cat >"$tmp/btlib.py" <<'EOF'
import json
def first(path):
    """The first JSON line of a tool's output ({}: none)."""
    try:
        return json.loads(open(path).read().splitlines()[0])
    except Exception:
        return {}
def lines(path):
    """Every JSON line of a tool's output."""
    try:
        return [json.loads(l) for l in open(path).read().splitlines()]
    except Exception:
        return []
EOF
export PYTHONPATH="$tmp${PYTHONPATH:+:$PYTHONPATH}"
: >"$tmp/all.json"

# host H CMD...: CMD in testbed host H (udp/xdp) or here (shm, rdma)
host() {
	local h=$1; shift
	# exec: the caller's $! is the tool itself, for the signal that ends it
	if [ "$t" = shm ] || [ "$t" = rdma ]; then exec "$@"; else exec tools/testbed exec --name "$tb" --host "$h" -- "$@"; fi
}
# CPU time (ns on a CPU, every thread: schedstat) of process $1 so far
proc_cpu_ns() { [ -d "/proc/$1/task" ] && cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s }'; }
# rdma: this host's RDMA address and its interface (the resolver's)
rdma_ip= rdma_if=eth0
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	rdma_ip=${FLIT_RDMA_IP:-$(ip -4 -o addr show scope global | awk '{ sub(/\/.*/, "", $4); print $4; exit }')}
	rdma_if=$(ip -4 -o addr show | awk -v a="$rdma_ip" '{ sub(/\/.*/, "", $4) } $4 == a { print $2; exit }')
fi

for tt in $TRANSPORTS; do
	t=${tt%+*} cfg=() pcfg=()
	case $tt in *+own) pcfg=(--session own) ;; *+s) pcfg=(--session md) ;; *+np) pcfg=(--no-poll) ;; esac
	case $t in
	shm) ;;
	rdma)
		if [ -z "$rdma_ip" ] || [ -z "$rdma_if" ]; then
			echo "rdma: not run: no RDMA device with an IPv4 address here (tests/rdma/vm-exec.sh -- tools/bench-topics.sh -t rdma: in a Soft-RoCE guest)"
			continue
		fi
		cfg=(-C "context.transports = udp,rdma" -C "context.udp.interface = $rdma_if" -C "context.rdma.address = $rdma_ip") ;;
	udp|xdp)
		if [ "$(id -u)" -ne 0 ]; then echo "$t: not run: the testbed needs root"; continue; fi
		if [ $up -eq 0 ]; then
			tools/testbed up --name "$tb" --hosts 2 --link direct --owner-pid $$ >/dev/null
			up=1
		fi
		cfg=(-C context.udp.interface=eth0) ;;
	*) echo "bench-topics: unknown transport '$tt'" >&2; exit 2 ;;
	esac
	prev_n=0 prev_rss=0 prev_fds=0 prev_s=0
	for n in $NS; do
		why=
		# extrapolated from the last N of 100 or more (below that the
		# process's own size and start-up would dominate)
		if [ "$prev_n" -ge 100 ]; then
			rss_need=$(( prev_rss / prev_n * n ))
			fds_need=$(( prev_fds * n / prev_n ))
			s_need=$(awk -v s="$prev_s" -v a="$prev_n" -v b="$n" 'BEGIN { printf "%d", s * b / a }')
			room=$memavail
			[ "$t" = shm ] && [ "$shmfree" -lt "$room" ] && room=$shmfree   # the rings live in /dev/shm
			if [ "$rss_need" -gt $((room / 2)) ]; then
				why="would need ~$((rss_need >> 30)) GiB ($((prev_rss / prev_n >> 10)) KiB per topic at $prev_n)"
			elif [ "$fds_need" -gt "$fdmax" ]; then
				why="would need ~$fds_need fds (limit $fdmax; $prev_fds at $prev_n)"
			elif [ "$s_need" -gt "$BUDGET" ]; then
				why="would take ~${s_need} s to create, more than -T $BUDGET ($(printf '%.1f' "$prev_s") s at $prev_n)"
			fi
		fi
		if [ -n "$why" ]; then
			printf '%-5s %7s  not run: %s\n' "$tt" "$n" "$why"
			printf '{"tool":"bench-topics","transport":"%s","topics":%s,"not_run":"%s"}\n' "$tt" "$n" "$why" >>"$tmp/all.json"
			continue
		fi
		# the subscriber first (it finds the topics as they come), then
		# the publisher, which stays up until the subscriber is done
		rm -f "$tmp/sub.json" "$tmp/pub.json" "$tmp/res.json"
		# both stay (-l) until killed: the resolution traffic is
		# counted with the subscriber there, as it stays
		linger=$((BUDGET + FIND_S + SETTLE + RES_W))
		host 2 "$D/flit-topics" -t "$t" "${cfg[@]}" -n "$n" -T $((BUDGET + FIND_S)) -l "$linger" --json sub 'md.*' \
			>"$tmp/sub.json" 2>"$tmp/sub.err" &
		sp=$!
		sleep 0.3
		host 1 "$D/flit-topics" -t "$t" "${cfg[@]}" "${pcfg[@]}" -n "$n" -T "$BUDGET" -i 2 -l "$linger" --send --json pub \
			>"$tmp/pub.json" 2>"$tmp/pub.err" &
		pp=$!
		# the subscriber's line: when it found them all (or gave up);
		# the publisher's: after its idle measurement
		for f in sub pub; do
			p=$sp; [ $f = pub ] && p=$pp
			while [ ! -s "$tmp/$f.json" ] && kill -0 "$p" 2>/dev/null; do sleep 0.1; done
		done
		# at rest: resolution settled, the subscriber still there; the
		# resolution traffic (udp, xdp) and the publishing process's CPU
		# (all its threads, schedstat) over the same -R seconds
		rm -f "$tmp/rest.json"
		if [ "$RES_W" != 0 ] && [ -s "$tmp/sub.json" ] && kill -0 "$pp" 2>/dev/null; then
			sleep "$SETTLE"
			c0=$(proc_cpu_ns "$pp") w0=$(date +%s.%N)
			if [ "$t" != shm ]; then
				ifc=eth0; [ "$t" = rdma ] && ifc=$rdma_if
				(host 2 python3 "$tmp/rescount.py" "$ifc" "$RES_W") >"$tmp/res.json" 2>"$tmp/res.err" || true
			else
				sleep "$RES_W"
			fi
			c1=$(proc_cpu_ns "$pp") w1=$(date +%s.%N)
			[ -n "$c0" ] && [ -n "$c1" ] &&
				awk -v a="$c0" -v b="$c1" -v w0="$w0" -v w1="$w1" \
					'BEGIN { printf "{\"rest_cpu_pct\":%.2f,\"rest_s\":%.2f}\n", 100 * (b - a) / 1e9 / (w1 - w0), w1 - w0 }' \
					>"$tmp/rest.json"
		fi
		kill -TERM "$sp" "$pp" 2>/dev/null || true
		wait "$sp" || true
		wait "$pp" || true
		if [ ! -s "$tmp/pub.json" ]; then
			printf '%-5s %7s  failed: %s\n' "$tt" "$n" "$(tail -1 "$tmp/pub.err")"
			continue
		fi
		python3 - "$tmp/pub.json" "$tmp/sub.json" "$tmp/res.json" "$tt" "$n" "$tmp/rest.json" >>"$tmp/all.json" <<'EOF'
import json, sys
from btlib import first
p, s, r = first(sys.argv[1]), first(sys.argv[2]), first(sys.argv[3])
rest = first(sys.argv[6])
found = (f"{s['found']} of {s['topics']}" + (f", all in {s['find_s']:.2f} s" if s.get('complete') else f" in {s['find_s']:.0f} s")) if s else "?"
res = f"{r['bytes_per_s']:.0f}" if r else "-"
line = (f"{sys.argv[4]:<5} {p['topics']:>7}  {p['create_s']:>9.3f} {p['us_per_topic_first']:>8.1f} "
        f"{p['us_per_topic_last']:>8.1f} {p['fds']:>7} {p['rss_bytes'] / 1048576:>9.1f} {p['idle_cpu_pct']:>6.1f} "
        f"{p.get('idle_lib_pct', 0):>6.1f} {p.get('idle_floor_pct', 0):>6.1f} "
        f"{(format(rest['rest_cpu_pct'], '.2f') if rest else '-'):>6} {res:>9}  {found}")
if p['created'] != p['topics']:
    line += f"\n{'':14}created {p['created']}: {p.get('error', '')}"
sys.stderr.write(line + "\n")
print(json.dumps({"tool": "bench-topics", "transport": sys.argv[4], "pub": p, "sub": s, "resolution": r,
                  "rest": rest}))
EOF
		# what the next N is extrapolated from (N 0: it could not create them all)
		read -r prev_n prev_rss prev_fds prev_s <<<"$(python3 -c 'import json,sys; p=json.loads(open(sys.argv[1]).readline()); print(p["created"] if p["created"] == p["topics"] else 0, p["rss_bytes"], p["fds"], p["create_s"])' "$tmp/pub.json")"
		[ "$prev_n" -gt 0 ] || break   # it could not create them all: no larger N
	done
done 2>&1

# ---- one topic against N topics of one session -----------------------------------
spread_ts=
for tt in $TRANSPORTS; do
	t=${tt%+*}
	case " $spread_ts " in *" $t "*) continue ;; esac
	[ "$t" = rdma ] && [ -z "$rdma_ip" ] && continue
	spread_ts="$spread_ts $t"
done
# the one-of-N section: the datagram transports (shm's reader drops the
# other topics' records in place, in its process, as udp does)
one_ts=
for t in $spread_ts; do { [ "$t" = udp ] || [ "$t" = xdp ]; } && one_ts="$one_ts $t"; done
if [ "$SPREAD" != 0 ] && [ -n "$spread_ts" ] && [ "$(id -u)" -eq 0 ]; then
	if [ $up -eq 0 ] && [[ " $spread_ts " = *" udp "* || " $spread_ts " = *" xdp "* ]]; then
		tools/testbed up --name "$tb" --hosts 2 --link direct --owner-pid $$ >/dev/null
		up=1
	fi
	NETUDP=(--netns "$tb-h1" --peer-netns "$tb-h2" -C context.udp.interface=eth0)
	echo
	echo "# one topic against $SPREAD topics of one session: $ROUNDS rounds interleaved, medians; 32-byte messages"
	echo "# $(uname -r), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
	: >"$tmp/spread.json"
	for r in $(seq "$ROUNDS"); do
		fl=$("$D/flit-floor" -n 200000 --json 2>/dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["p50_ns"])' 2>/dev/null || echo 0)
		for t in $spread_ts; do
			NET=("${NETUDP[@]}"); { [ "$t" = shm ] || [ "$t" = rdma ]; } && NET=()
			for n in 1 "$SPREAD"; do
				for b in "" -b; do
					v=$("$D/flit-thru" -t "$t" "${NET[@]}" -s 32 -d 2 $b --topics "$n" --json 2>"$tmp/thru.err" |
						python3 -c 'import json,sys; print([d for d in map(json.loads, sys.stdin) if d.get("side") == "aggregate"][0]["msgs_per_sec"])' 2>/dev/null || echo 0)
					[ "$v" = 0 ] && echo "# flit-thru -t $t --topics $n $b failed (not in the medians): $(tail -2 "$tmp/thru.err" | tr '\n' ' ')" >>"$tmp/spread.fail"
					printf '{"round":%s,"floor_ns":%s,"transport":"%s","topics":%s,"what":"thru%s","value":%s}\n' \
						"$r" "$fl" "$t" "$n" "${b:+,batched}" "$v" >>"$tmp/spread.json"
				done
				[ "$t" = rdma ] && continue   # flit-load: no static map for rdma
				v=$("$D/flit-load" -t "$t" "${NET[@]}" -s 32 -r 100k -d 2 --topics "$n" --json 2>"$tmp/load.err" |
					python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["p50_ns"])' 2>/dev/null || echo 0)
				[ "$v" = 0 ] && echo "# flit-load -t $t --topics $n failed (not in the medians): $(tail -2 "$tmp/load.err" | tr '\n' ' ')" >>"$tmp/spread.fail"
				printf '{"round":%s,"floor_ns":%s,"transport":"%s","topics":%s,"what":"p50","value":%s}\n' \
					"$r" "$fl" "$t" "$n" "$v" >>"$tmp/spread.json"
			done
		done
	done
	python3 - "$tmp/spread.json" "$SPREAD" >>"$tmp/all.json" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[2])
floors = sorted({(r["round"], r["floor_ns"]) for r in rows})
sys.stderr.write("# cache-line floor (flit-floor RTT/2 p50) per round: " +
                 ", ".join(f"{f} ns" for _, f in floors) + "\n")
sys.stderr.write(f"{'transport':<9} {'measure':<28} {'1 topic':>12} {f'{n} topics':>14} {'ratio':>7}"
                 f"  {'per round: median (min-max)'}\n")
for t in dict.fromkeys(r["transport"] for r in rows):
    for what, label in (("thru", "msgs/s, unbatched"), ("thru,batched", "msgs/s, batched"),
                        ("p50", "RTT/2 p50 at 100k/s, us")):
        one = [r["value"] for r in rows if r["transport"] == t and r["what"] == what and r["topics"] == 1 and r["value"]]
        many = [r["value"] for r in rows if r["transport"] == t and r["what"] == what and r["topics"] == n and r["value"]]
        if not one or not many:
            continue
        a, b = statistics.median(one), statistics.median(many)
        sc = 1e-3 if what == "p50" else 1
        ratio = b / a if a else 0
        # each round's N against its own 1 topic, measured seconds apart
        # (the vCPUs' placement drifts between rounds, less within one)
        by = {}
        for r in rows:
            if r["transport"] == t and r["what"] == what and r["value"]:
                by.setdefault(r["round"], {})[r["topics"]] = r["value"]
        rr = sorted(v[n] / v[1] for v in by.values() if 1 in v and n in v)
        per = f"{statistics.median(rr):.2f} ({rr[0]:.2f}-{rr[-1]:.2f})" if rr else "-"
        sys.stderr.write(f"{t:<9} {label:<28} {a * sc:>12,.1f} {b * sc:>14,.1f} {ratio:>7.2f}  {per}\n")
        print(json.dumps({"tool": "bench-topics", "spread": n, "transport": t, "measure": what,
                          "one": one, "many": many, "ratio": ratio, "round_ratios": rr}))
EOF
	[ -s "$tmp/spread.fail" ] && cat "$tmp/spread.fail"
fi 2>&1
# ---- an exact subscriber of one topic among N ---------------------------------------
exact_ts=
for t in $spread_ts; do [ "$t" != rdma ] && exact_ts="$exact_ts $t"; done
if [ "$EXACT" != 0 ] && [ -n "$exact_ts" ] && [ "$(id -u)" -eq 0 ]; then
	if [ $up -eq 0 ]; then
		tools/testbed up --name "$tb" --hosts 2 --link direct --owner-pid $$ >/dev/null
		up=1
	fi
	last=$(printf 'md.sym%05d' $((EXACT - 1))) mid=$(printf 'md.sym%05d' $((EXACT / 2)))
	echo
	echo "# an exact subscriber of one topic among $EXACT: of $last, started before the publisher (ms after that topic was made), of $mid, and the two after it, one after another, once all exist (ms after flit_sub_new(): the slowest, and each)"
	printf '%-9s %9s %16s %16s\n' transport topics "sub_first" "sub_after"
	for t in $exact_ts; do
		rm -f "$tmp"/ex*.json
		ifc=(-C context.udp.interface=eth0); [ "$t" = shm ] && ifc=()
		(host 2 "$D/flit-topics" -t "$t" "${ifc[@]}" -n 1 -T 30 --json sub "$last") \
			>"$tmp/ex1.json" 2>"$tmp/ex1.err" &
		s1=$!
		sleep 0.5
		(host 1 "$D/flit-topics" -t "$t" "${ifc[@]}" -n "$EXACT" -T "$BUDGET" -i 2 -l 30 \
			--json pub) >"$tmp/exp.json" 2>"$tmp/exp.err" &
		pp=$!
		wait "$s1" || true
		# the publisher's line comes after its idle time: all exist then
		while [ ! -s "$tmp/exp.json" ] && kill -0 "$pp" 2>/dev/null; do sleep 0.1; done
		# three, one after another (the second must not wait for what
		# the first was owed)
		: >"$tmp/ex2.json"
		for k in 0 1 2; do
			(host 2 "$D/flit-topics" -t "$t" "${ifc[@]}" -n 1 -T 30 --json sub \
				"$(printf 'md.sym%05d' $((EXACT / 2 + k)))") >>"$tmp/ex2.json" 2>"$tmp/ex2.err" || true
		done
		kill -TERM "$pp" 2>/dev/null || true
		wait "$pp" || true
		python3 - "$tmp/ex1.json" "$tmp/ex2.json" "$tmp/exp.json" "$t" "$EXACT" >>"$tmp/all.json" <<'EOF'
import json, sys
from btlib import first, lines
s1, p, t = first(sys.argv[1]), first(sys.argv[3]), sys.argv[4]
after_all = lines(sys.argv[2])
s2 = after_all[0] if after_all else {}
if not p or p.get("created") != p.get("topics"):
    sys.stderr.write(f"{t:<9} failed: the publisher: {p.get('error', 'no result') if p else 'no result'}\n")
    sys.exit(0)
# CLOCK_MONOTONIC_RAW: the testbed's hosts are network namespaces of one
# kernel, one clock
before = (s1["found_at_s"] - p["created_at_s"]) * 1e3 if s1.get("found_at_s") else None
afters = [s["find_s"] * 1e3 if s.get("complete") else None for s in after_all]
after = max(afters) if afters and None not in afters else None
fmt = lambda v, s: f"{v:.1f} ms" if v is not None else (f"not in {s.get('find_s', 0):.0f} s" if s else "failed")
each = ", ".join(f"{v:.1f}" if v is not None else "-" for v in afters)
sys.stderr.write(f"{t:<9} {p['topics']:>9} {fmt(before, s1):>16} {fmt(after, s2):>16}  ({each})\n")
print(json.dumps({"tool": "bench-topics", "exact_of": int(sys.argv[5]), "transport": t,
                  "before_ms": before, "after_ms": after, "after_each_ms": afters,
                  "sub_before": s1, "sub_after": s2, "pub": p}))
EOF
	done
fi 2>&1
# ---- one wanted topic among N of a session ----------------------------------------
if [ "$ONE" != 0 ] && [ -n "$one_ts" ] && [ "$(id -u)" -eq 0 ]; then
	if [ $up -eq 0 ]; then
		tools/testbed up --name "$tb" --hosts 2 --link direct --owner-pid $$ >/dev/null
		up=1
	fi
	echo
	echo "# one wanted topic (md.sym00042) among $ONE of a session: $ONE_R rounds of one message on every topic, unbatched and (+b) batched (source.batch: frames of ~60 messages)"
	printf '%-9s %9s %12s %12s %12s %6s %6s %12s %12s\n' transport delivered "others(sess)" "copied_up" "dropped_xdp" naks lost xdp_frames xdp_steered
	for t in $one_ts; do for bat in "" +b; do
		rm -f "$tmp/one.json" "$tmp/onep.json"
		bcfg=(); [ -n "$bat" ] && bcfg=(-C "source.batch = true")
		tools/testbed exec --name "$tb" --host 2 -- "$D/flit-topics" -t "$t" -C context.udp.interface=eth0 \
			-n 1 -m "$ONE_R" -l 2 -T $((BUDGET + 60)) --json sub md.sym00042 >"$tmp/one.json" 2>"$tmp/one.err" &
		sp=$!
		sleep 0.3
		tools/testbed exec --name "$tb" --host 1 -- "$D/flit-topics" -t "$t" -C context.udp.interface=eth0 \
			"${bcfg[@]}" -n "$ONE" -T "$BUDGET" -i 2 -r "$ONE_R" -l 3 --json pub >"$tmp/onep.json" 2>"$tmp/onep.err" &
		pp=$!
		wait "$sp" || true
		kill -TERM "$pp" 2>/dev/null || true
		wait "$pp" || true
		python3 - "$tmp/one.json" "$tmp/onep.json" "$t$bat" "$ONE" "$ONE_R" >>"$tmp/all.json" <<'EOF'
import json, sys
from btlib import first
s, p, t = first(sys.argv[1]), first(sys.argv[2]), sys.argv[3]
if not s or not p:
    sys.stderr.write(f"{t:<9} failed (subscriber {'ok' if s else 'none'}, publisher {'ok' if p else 'none'})\n")
    sys.exit(0)
# the other topics' messages of the subscriber's session (msgs_filtered;
# a session holds 65,536 topics: the others' sessions it never joins), how
# many of them were copied into its process and dropped there, and how many
# the XDP program dropped before (msgs_filtered_early; xdp_frames: the
# frames, a full ring's are steered up instead)
others = s.get("msgs_filtered", 0)
early = s.get("msgs_filtered_early", 0)
up = others - early
xd, xs = s.get("xdp_filtered"), s.get("xdp_redirected")
sys.stderr.write(f"{t:<9} {s['msgs']:>9} {others:>12} {up:>12} {early:>12} {s.get('naks_sent', 0):>6} "
                 f"{s.get('msgs_lost', 0):>6} {xd if xd is not None else '-':>12} {xs if xs is not None else '-':>12}"
                 f"{'' if s.get('complete') else '  (incomplete: ' + str(s['msgs']) + ' of ' + sys.argv[5] + ')'}\n")
print(json.dumps({"tool": "bench-topics", "one_of": int(sys.argv[4]), "transport": t.removesuffix("+b"),
                  "batched": t.endswith("+b"), "sub": s,
                  "pub": p, "others_in_session": others, "others_in_user_space": up}))
EOF
	done; done
fi 2>&1
[ -n "$JSON" ] && cp "$tmp/all.json" "$JSON" && echo "# JSON: $JSON"
exit 0

