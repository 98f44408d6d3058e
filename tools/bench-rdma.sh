#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# bench-rdma: flit's rdma transport against the verbs reference, perftest's
# ib_send_lat (RC SEND/RECV ping-pong, polling), same device, same message
# sizes, same CPUs; RTT/2 side by side with the ratio flit / ib_send_lat.
#
# For each size, interleaved in one run (so both see the same machine):
# ib_send_lat server (CPU B) and client (CPU A), then flit-pong -t rdma, ping
# on CPU A and pong on CPU B.  On one host both sides use the one device: the
# adapter loops the traffic back through its port.  With --role, the two sides
# run on two hosts: `--role server --peer CLIENT_ADDR` there (first), `--role
# client --peer SERVER_ADDR` here (addresses of the RDMA devices' interfaces).
# --vm runs the whole benchmark in the Soft-RoCE guest of tests/rdma
# (docs/RDMA.md): a check that it works, not a measurement (software RDMA
# under an emulated CPU).
#
# Every result is a JSON line in the results file (ib_send_lat's too, in
# flit-pong's shape: tool "ib_send_lat"), plus one "bench-rdma" line per size
# with the ratios; the table is printed at the end.
#
#   tools/bench-rdma.sh [-d|--device DEV] [-i|--ib-port N] [-x|--gid-index N]
#                       [-a|--address IP] [--sizes "16 64 256 1024"] [--count N] [--warmup N]
#                       [--cpus A,B] [--port TCP] [--role server|client]
#                       [--peer ADDR] [--only ib_send_lat|flit] [--build DIR]
#                       [--out FILE] [-C|--config LINE]...
#                       [--vm [--vm-two] [--vm-timeout S] [--vm-mtu N]]
#                       [--mode rc|multicast] [--fanout N [--rounds R] [--batch]]
#
#   -d, --device DEV     RDMA device (default $FLIT_RDMA_DEVICE, else the first
#                        one ibv_devices lists)
#   -i, --ib-port N      its port (default $FLIT_RDMA_PORT, else 1)
#   -x, --gid-index N    GID index (default $FLIT_RDMA_GID_INDEX, else on RoCE
#                        the port's RoCE v2 GID of an IPv4 address, on
#                        InfiniBand none: the LID is used)
#   -a, --address IP     the device's IPv4 address, where flit's contexts bind
#                        (rdma_cm: context.rdma.address; default
#                        $FLIT_RDMA_IP, else the address in the RoCE GID, else
#                        the first IPv4 address of the port's netdev, e.g. ib0)
#   --count N            measured round trips per size and tool (default 10000;
#                        1000 with --vm)
#   --warmup N           flit-pong's unmeasured round trips (default 1000;
#                        200 with --vm)
#   --cpus A,B           ping/client on CPU A, pong/server on CPU B (default 0,1;
#                        with --role 0,0: each side on CPU 0 of its host)
#   --port TCP           ib_send_lat's out-of-band TCP port (default 18515)
#   --role R             two hosts: `server` serves every size in turn, `client`
#                        measures; both need --peer
#   --peer ADDR          with --role: the other host's device address (IPv4)
#   --only TOOL          run only ib_send_lat, or only flit-pong (flit)
#   -C, --config LINE    a config line for flit-pong (repeatable)
#   --mode M             rc (default): RC on both sides; multicast: ib_send_lat
#                        -c UD beside flit-pong with source.rdma.mode =
#                        multicast (each direction one UD multicast send;
#                        sizes up to the path MTU less flit's 40 bytes)
#   --fanout N           instead of latency: one publisher and N receivers over
#                        connections (RC) and over multicast, interleaved
#                        --rounds R times (default 3) per size: the sender's
#                        CPU time per message and its rate, and the ratio
#                        multicast / RC (--count messages per run: default
#                        200000, 20000 with --vm; --batch batches them into
#                        frames).  On one host flit-thru --receivers N (the
#                        sender's CPU then includes the device's work for its
#                        receivers); across two hosts (--role, --vm --vm-two)
#                        flit-pub on the client and N flit-sub on the server
#   --vm                 run it all in the Soft-RoCE guest (tests/rdma/vm-exec.sh)
#   --vm-two             with --vm: two guests, the --role server/client pair
#                        across a link between them (1 CPU each)
#   --vm-mtu N           with --vm: the guest's eth0 MTU (default 4200: path
#                        MTU 4096, as on a jumbo-frame RoCE fabric; 1500 gives
#                        1024, where a 1 KiB message plus flit's 32-byte frame
#                        header takes two packets)
#
# Exit: 0 ok, 1 a run failed (or no RDMA device, or a tool missing), 2 misuse.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-build}
DEV=${FLIT_RDMA_DEVICE:-} IBPORT=${FLIT_RDMA_PORT:-1} GID=${FLIT_RDMA_GID_INDEX:-} ADDR=${FLIT_RDMA_IP:-}
SIZES="16 64 256 1024"
COUNT=10000 WARMUP=1000 COUNT_SET= WARMUP_SET= CPUS=  TCPPORT=18515 ROLE= PEER= OUT= VM= VM_TWO= VM_TIMEOUT= VM_MTU= ONLY=
MODE=rc FANOUT= ROUNDS=3 BATCH=
FLIT_CFG=()
ARGS=("$@")

usage() {
	sed -n '/^#   tools\/bench-rdma.sh/,/^# Exit/p' "$0" | sed 's/^# \{0,1\}//' | sed '$d'
}
bad() { echo "bench-rdma: $*" >&2; usage >&2; exit 2; }
die() { echo "bench-rdma: $*" >&2; exit 1; }
uint() { [[ $2 =~ ^[0-9]+$ ]] || bad "bad $1 '$2' (an unsigned integer)"; }

while [ $# -gt 0 ]; do
	case $1 in
	-d|--device|-i|--ib-port|-x|--gid-index|-a|--address|--sizes|--count|--warmup|--cpus|--port|--role|\
	--peer|--build|--out|-C|--config|--vm-timeout|--vm-mtu|--only|--mode|--fanout|--rounds)
		[ $# -ge 2 ] || bad "$1 needs a value" ;;
	esac
	case $1 in
	-d|--device) DEV=$2; shift ;;
	-i|--ib-port) uint "$1" "$2"; IBPORT=$2; shift ;;
	-x|--gid-index) uint "$1" "$2"; GID=$2; shift ;;
	-a|--address) [[ $2 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || bad "bad --address '$2' (an IPv4 address)"
		ADDR=$2; shift ;;
	--sizes) SIZES=$2; shift
		for s in $SIZES; do uint "size" "$s"; [ "$s" -ge 8 ] || bad "size $s: at least 8 (flit-pong's minimum)"; done
		[ -n "$SIZES" ] || bad "--sizes: empty" ;;
	--count) uint "$1" "$2"; [ "$2" -ge 5 ] || bad "--count: at least 5"; COUNT=$2; COUNT_SET=1; shift ;;
	--warmup) uint "$1" "$2"; WARMUP=$2; WARMUP_SET=1; shift ;;
	--cpus) [[ $2 =~ ^[0-9]+,[0-9]+$ ]] || bad "bad --cpus '$2' (A,B)"; CPUS=$2; shift ;;
	--port) uint "$1" "$2"; TCPPORT=$2; shift ;;
	--role) case $2 in server|client) ROLE=$2 ;; *) bad "bad --role '$2': server or client" ;; esac; shift ;;
	--peer) [[ $2 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || bad "bad --peer '$2' (an IPv4 address)"
		PEER=$2; shift ;;
	--only) case $2 in ib_send_lat|flit) ONLY=$2 ;; *) bad "bad --only '$2': ib_send_lat or flit" ;; esac; shift ;;
	--build) BUILD=$2; shift ;;
	--out) OUT=$2; shift ;;
	-C|--config) FLIT_CFG+=(-C "$2"); shift ;;
	--mode) case $2 in rc|multicast) MODE=$2 ;; *) bad "bad --mode '$2': rc or multicast" ;; esac; shift ;;
	--fanout) uint "$1" "$2"; [ "$2" -ge 1 ] && [ "$2" -le 64 ] || bad "--fanout: 1 .. 64 receivers"
		FANOUT=$2; shift ;;
	--rounds) uint "$1" "$2"; [ "$2" -ge 1 ] || bad "--rounds: at least 1"; ROUNDS=$2; shift ;;
	--batch) BATCH=1 ;;
	--vm) VM=1 ;;
	--vm-two) VM_TWO=1 ;;
	--vm-timeout) uint "$1" "$2"; VM_TIMEOUT=$2; shift ;;
	--vm-mtu) uint "$1" "$2"; VM_MTU=$2; shift ;;
	-h|--help) usage; exit 0 ;;
	*) bad "unknown option '$1'" ;;
	esac
	shift
done
[ -z "$ROLE" ] || [ -n "$PEER" ] || bad "--role $ROLE needs --peer ADDR (the other host's address)"
[ -z "$PEER" ] || [ -n "$ROLE" ] || bad "--peer is for --role server|client"
[ -z "$VM" ] || [ -z "$ROLE" ] || bad "--vm sets the sides up itself: no --role"
[ -z "$VM_TWO" ] || [ -n "$VM" ] || bad "--vm-two goes with --vm"
[ -z "$VM_MTU" ] || [ -n "$VM" ] || bad "--vm-mtu goes with --vm (elsewhere the fabric's MTU is the interface's)"
[ -z "$FANOUT" ] || [ "$MODE" = rc ] || bad "--fanout runs both modes itself: no --mode"
[ -n "$FANOUT" ] || [ -z "$BATCH" ] || bad "--batch goes with --fanout"
# one host: two CPUs; two hosts: each side on CPU 0 of its host by default
[ -n "$CPUS" ] || { if [ -n "$ROLE" ]; then CPUS=0,0; else CPUS=0,1; fi; }
CPU_A=${CPUS%,*} CPU_B=${CPUS#*,}
[ -z "$FANOUT" ] || [ -n "$COUNT_SET" ] || COUNT=200000
T="$BUILD/tools"

# ---- --vm: the same command, in the guest -------------------------------------
if [ -n "$VM" ]; then
	args=()
	skip_next=
	for a in "${ARGS[@]}"; do   # drop --vm and --vm-timeout S; keep the rest
		if [ -n "$skip_next" ]; then skip_next=; continue; fi
		case $a in --vm|--vm-two) continue ;; --vm-timeout|--vm-mtu) skip_next=1; continue ;; esac
		args+=("$a")
	done
	if [ -n "$FANOUT" ]; then
		[ -n "$COUNT_SET" ] || { COUNT=20000; args+=(--count "$COUNT"); }
	else
		[ -n "$COUNT_SET" ] || { COUNT=1000; args+=(--count "$COUNT"); }
	fi
	[ -n "$WARMUP_SET" ] || args+=(--warmup 200)
	# the results file is written from inside the guest: its directory is
	# shared writable, at the same path
	if [ -n "$OUT" ]; then
		outdir=$(cd "$(dirname "$OUT")" && pwd) || die "no directory for --out $OUT"
		OUT=$outdir/$(basename "$OUT")
	else
		outdir=$(mktemp -d "${TMPDIR:-/tmp}/flit-bench-rdma.XXXXXX") || die "mktemp failed"
		OUT=$outdir/results.json
	fi
	n=$(echo "$SIZES" | wc -w)
	# boot ~15 s; per size two runs of COUNT round trips, at 20 us to 1 ms
	# each under TCG on a busy host, plus start-up
	tmo=${VM_TIMEOUT:-$(( 90 + n * (40 + COUNT / 50) ))}
	[ -z "$FANOUT" ] || tmo=${VM_TIMEOUT:-$(( 120 + n * ROUNDS * 2 * (40 + FANOUT * 5 + COUNT / 1000) ))}
	echo "bench-rdma: --vm: in a Soft-RoCE guest (rdma_rxe under qemu; limit ${tmo}s)." \
	     "Software RDMA on an emulated CPU: these numbers check the path, they measure nothing."
	if [ -n "$VM_TWO" ]; then
		# guest 2 serves (192.168.50.2), guest 1 measures (192.168.50.1)
		peer=$(printf '%q ' "$0" "${args[@]}" --build "$BUILD" --role server --peer 192.168.50.1 \
			--out /dev/null)
		BUILD=$BUILD "$here/../tests/rdma/vm-exec.sh" --timeout "$tmo" --mtu "${VM_MTU:-4200}" --two --peer-cmd "$peer" \
			--out "$outdir" -- "$0" "${args[@]}" --build "$BUILD" --role client \
			--peer 192.168.50.2 --out "$OUT"
	else
		BUILD=$BUILD "$here/../tests/rdma/vm-exec.sh" --timeout "$tmo" --mtu "${VM_MTU:-4200}" --out "$outdir" -- \
			"$0" "${args[@]}" --build "$BUILD" --out "$OUT"
	fi
	exit
fi

# ---- the device -----------------------------------------------------------------
command -v ibv_devices >/dev/null 2>&1 || die "ibv_devices not found (apt-get install ibverbs-utils)"
command -v ib_send_lat >/dev/null 2>&1 || die "ib_send_lat not found (apt-get install perftest)"
command -v python3 >/dev/null 2>&1 || die "python3 not found"
[ "$ONLY" = ib_send_lat ] || [ -x "$T/flit-pong" ] || die "$T/flit-pong not built (make BUILD=$BUILD tools)"
devs=$(ibv_devices 2>/dev/null | awk 'NR > 2 && NF >= 1 { print $1 }')
[ -n "$devs" ] || die "no RDMA device on this host (ibv_devices lists none); --vm runs the benchmark in a Soft-RoCE guest"
[ -n "$DEV" ] || DEV=$(echo "$devs" | head -1)
echo "$devs" | grep -qx -- "$DEV" || die "no RDMA device '$DEV' (this host has: $(echo $devs))"
SYS=/sys/class/infiniband/$DEV/ports/$IBPORT
[ -d "$SYS" ] || die "$DEV has no port $IBPORT"
LINK=$(cat "$SYS/link_layer" 2>/dev/null || echo unknown)
STATE=$(cat "$SYS/state" 2>/dev/null)
case $STATE in *ACTIVE*) ;; *) die "$DEV port $IBPORT is not ACTIVE (${STATE:-no state})" ;; esac
if [ -z "$GID" ] && [ "$LINK" = Ethernet ]; then
	# RoCE: the RoCE v2 GID of an IPv4 address (::ffff:a.b.c.d), else any RoCE v2
	for f in "$SYS"/gids/*; do
		i=${f##*/}
		g=$(cat "$f" 2>/dev/null) || continue
		t=$(cat "$SYS/gid_attrs/types/$i" 2>/dev/null)
		case $g in 0000:0000:0000:0000:0000:0000:0000:0000) continue ;; esac
		case $t in *[vV]2*|"") ;; *) continue ;; esac
		case $g in 0000:0000:0000:0000:0000:ffff:*) GID=$i; break ;; esac
		[ -n "$GID" ] || GID=$i
	done
	[ -n "$GID" ] || die "$DEV port $IBPORT (RoCE) has no usable GID: give --gid-index"
fi
GIDSTR=$([ -n "$GID" ] && cat "$SYS/gids/$GID" 2>/dev/null)
PT_ARGS=(-d "$DEV" -i "$IBPORT" -p "$TCPPORT" -F)
[ "$MODE" = multicast ] && PT_ARGS+=(-c UD)
[ -n "$GID" ] && PT_ARGS+=(-x "$GID")
# flit sets connections up with rdma_cm, which picks the device by address:
# the IPv4 address of this device's port
if [ -z "$ADDR" ] && [ "$ONLY" != ib_send_lat ]; then
	case $GIDSTR in
	0000:0000:0000:0000:0000:ffff:*)
		h=${GIDSTR#0000:0000:0000:0000:0000:ffff:}; h=${h//:/}
		ADDR=$(printf '%d.%d.%d.%d' 0x${h:0:2} 0x${h:2:2} 0x${h:4:2} 0x${h:6:2}) ;;
	esac
	if [ -z "$ADDR" ]; then
		nd=$(rdma link show "$DEV/$IBPORT" 2>/dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
		[ -n "$nd" ] && ADDR=$(ip -4 -o addr show dev "$nd" 2>/dev/null | awk '{ sub("/.*", "", $4); print $4; exit }')
	fi
	[ -n "$ADDR" ] || die "no IPv4 address found for $DEV port $IBPORT (flit's rdma_cm needs one): give --address"
fi
# flit-pong: contexts bound to this device's address; the peer's source is
# found at --rdma-addr (this device's own address on one host)
FLIT_DEV_CFG=(-C "context.rdma.address = $ADDR" --rdma-addr "${PEER:-$ADDR}")
[ "$MODE" = multicast ] && FLIT_DEV_CFG+=(-C "source.rdma.mode = multicast")

for c in "$CPU_A" "$CPU_B"; do
	taskset -c "$c" true 2>/dev/null || die "cannot run on CPU $c (this host has $(nproc): --cpus A,B)"
done
memlock=$(ulimit -l)
if [ "$memlock" != unlimited ] && [ "$(id -u)" -ne 0 ]; then
	echo "bench-rdma: warning: ulimit -l is $memlock KiB; memory registration may fail (docs/RDMA.md)" >&2
fi
ulimit -l unlimited 2>/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/flit-bench-rdma.XXXXXX") || die "mktemp failed"
[ -n "$OUT" ] || OUT="$work/results.json"
: >"$OUT" || die "cannot write $OUT"
srv=
cleanup() {
	[ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
	[ "$OUT" = "$work/results.json" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

LOAD() { cut -d' ' -f1-3 /proc/loadavg; }
echo "bench-rdma — $(date '+%F %T'), kernel $(uname -r), $(nproc) CPUs$([ -n "${FLIT_RDMA_VM:-}" ] && echo ", Soft-RoCE guest")"
echo "device $DEV port $IBPORT: link layer $LINK$([ "$LINK" = Ethernet ] && echo " (RoCE)"), $(ibv_devinfo -d "$DEV" -i "$IBPORT" 2>/dev/null | awk '/active_mtu/ { print "active MTU " $2 }')${GID:+, GID index $GID ($GIDSTR)}${ADDR:+, address $ADDR}"
echo "load before: $(LOAD); ${ROLE:-both sides on this host}; client/ping on CPU $CPU_A, server/pong on CPU $CPU_B; $COUNT round trips per size"
echo "ib_send_lat $(ib_send_lat -V 2>/dev/null | head -1 | awk '{print $NF}'): RC, SEND/RECV, polling, perftest's inline default; RTT/2"
[ ${#FLIT_CFG[@]} -gt 0 ] && echo "flit config lines: ${FLIT_CFG[*]}"
echo "results: $OUT"
echo

# ---- --fanout N: connections against multicast, the sender's CPU per message ----
# fan_run SIZE MODE ROUND: flit-thru -t rdma --receivers N; its sender's JSON
# line (with the round and mode) to $OUT
fan_run() {
	local size=$1 mode=$2 round=$3 cfg=() b=()
	[ "$mode" = multicast ] && cfg=(-C "source.rdma.mode = multicast")
	[ -n "$BATCH" ] && b=(--batch)
	if ! timeout 600 "$T/flit-thru" -t rdma -s "$size" -n "$COUNT" --receivers "$FANOUT" "${b[@]}" -T 60 \
		-C "context.rdma.address = $ADDR" --rdma-addr "$ADDR" "${cfg[@]}" "${FLIT_CFG[@]}" --json \
		>"$work/fan-$size-$mode-$round.json" 2>"$work/fan-$size-$mode-$round.err"; then
		sed 's/^/  | /' "$work/fan-$size-$mode-$round.err" >&2
		die "flit-thru -t rdma --receivers $FANOUT ($mode) -s $size failed"
	fi
	python3 - "$work/fan-$size-$mode-$round.json" "$mode" "$round" >>"$OUT" <<'EOF'
import json, sys
path, mode, rnd = sys.argv[1:]
for l in open(path):
    r = json.loads(l)
    if r.get("side") == "sender":
        r["fanout_mode"], r["round"] = mode, int(rnd)
        print(json.dumps(r))
EOF
}

# ---- --fanout N across two hosts (--role): flit-pub here, N flit-sub there ----
# The publisher's CPU time and rate are flit-pub -v's: its process's, from
# the first send to the flush; the receivers check that each got every
# message.  Both sides walk the same runs: size, round, mode.
fan_runs() {    # prints "K SIZE ROUND MODE" per run, the order alternating by round
	local k=0 size round m order
	for size in $SIZES; do
		for ((round = 1; round <= ROUNDS; round++)); do
			if [ $((round % 2)) = 1 ]; then order="rc multicast"; else order="multicast rc"; fi
			for m in $order; do k=$((k + 1)); echo "$k $size $round $m"; done
		done
	done
}
fan2_cfg() {    # K MODE: the flit config of run K, in cfg
	cfg=(-C "context.rdma.address = $ADDR")
	[ -n "$BATCH" ] && cfg+=(-C "source.batch = true")
	if [ "$2" = multicast ]; then cfg+=(-C "source.rdma.mode = multicast")
	else cfg+=(-C "context.rdma.port = $((15000 + $1))"); fi
}
if [ -n "$FANOUT" ] && [ -n "$ROLE" ]; then
	if [ "$ROLE" = server ]; then
		echo "fan-out receivers: $FANOUT flit-sub per run, publisher at $PEER"
		while read -r k size round m; do
			fan2_cfg "$k" "$m"
			[ "$m" = rc ] && cfg+=(-C "receiver.rdma.static = $PEER:$((15000 + k))")
			pids=()
			for ((i = 1; i <= FANOUT; i++)); do
				"$T/flit-sub" -t rdma "${cfg[@]}" -e -T 300 "fan.$k" >"$work/sub-$k-$i" 2>&1 & pids+=($!)
			done
			bad=0
			for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
			got=$(for ((i = 1; i <= FANOUT; i++)); do grep -c ' len=' "$work/sub-$k-$i"; done | tr '\n' ' ')
			echo "  run $k (size $size, round $round, $m): messages per receiver: $got${bad:+ ($bad failed)}"
			for ((i = 1; i <= FANOUT; i++)); do
				[ "$(grep -c ' len=' "$work/sub-$k-$i")" = "$COUNT" ] && continue
				# flit-pub lingers 10 s after its last message: what is
				# not repaired by then is reported lost (LOSS lines)
				echo "  warning: run $k: receiver $i got $(grep -c ' len=' "$work/sub-$k-$i") of $COUNT;" \
				     "$(grep -v ' len=' "$work/sub-$k-$i" | head -3 | tr '\n' ' ')" >&2
			done
		done <<<"$(fan_runs)"
		exit 0
	fi
	echo "fan-out publisher: flit-pub -t rdma, $COUNT messages a run to $FANOUT receivers at $PEER; rounds alternate the order"
	while read -r k size round m; do
		fan2_cfg "$k" "$m"
		[ -f "$work/lines-$size" ] || python3 -c "
import sys; n, s = int(sys.argv[1]), int(sys.argv[2])
sys.stdout.write(''.join(('%0*d' % (s, i))[-s:] + '\n' for i in range(n)))" "$COUNT" "$size" >"$work/lines-$size"
		printf '  size %5s round %d: %s' "$size" "$round" "$m"
		python3 - "$OUT" "$k" "$size" "$round" "$m" "$COUNT" "$FANOUT" "$T/flit-pub" -t rdma "${cfg[@]}" \
			-v -w "$FANOUT" -T 300 -L 0 -l 10000 -f "$work/lines-$size" "fan.$k" <<'EOF' || die "flit-pub run $k ($m) failed"
import json, re, subprocess, sys
out, k, size, rnd, mode, count, fanout = sys.argv[1:8]
cmd = sys.argv[8:]
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
# flit-pub -v: "sent N messages ... in S s, CPU C ns/msg (this process,
# from the first send to the flush)"
m = re.search(r"sent (\d+) messages? .* in ([0-9.]+) s, CPU ([0-9.]+) ns/msg", p.stdout)
if p.returncode or not m:
    sys.stderr.write(p.stdout)
    sys.exit(1)
sent, secs, cpu = int(m.group(1)), float(m.group(2)), float(m.group(3))
row = {"tool": "bench-rdma", "transport": "rdma", "side": "publisher", "fanout": int(fanout),
       "fanout_mode": mode, "round": int(rnd), "size": int(size), "count": sent,
       "cpu_ns_per_msg": cpu, "secs": secs, "msgs_per_sec": round(sent / secs, 1) if secs else 0}
open(out, "a").write(json.dumps(row) + "\n")
print(f" {row['cpu_ns_per_msg']:.0f} ns/msg", end="")
EOF
		echo
	done <<<"$(fan_runs)"
fi
if [ -n "$FANOUT" ] && [ -z "$ROLE" ]; then
	echo "fan-out: one publisher (CPU $CPU_A), $FANOUT receivers; flit-thru -t rdma, $COUNT messages a run$([ -n "$BATCH" ] && echo ", batched"); rounds alternate the order"
	while read -r k size round m; do
		printf '  size %5s round %d: %s' "$size" "$round" "$m"
		fan_run "$size" "$m" "$round"
		echo
	done <<<"$(fan_runs)"
fi
if [ -n "$FANOUT" ]; then
	echo
	python3 - "$OUT" "$FANOUT" <<'EOF'
import json, statistics, sys
out, n = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(out) if l.strip()]
runs = {}
for r in rows:
    if r.get("side") in ("sender", "publisher") and "fanout_mode" in r:
        runs[(r["size"], r["round"], r["fanout_mode"])] = r
if not runs:
    sys.exit("bench-rdma: no fan-out run recorded in " + out)
print(f"sender with {n} receivers: CPU ns per message (all its threads) and messages/s"
      + ("" if any(r.get("side") == "publisher" for r in runs.values()) else
         "; one host: the sender's CPU includes the device's work for the receivers"))
hdr = (f"{'size':>6} {'round':>5} | {'RC cpu/msg':>10} {'RC msgs/s':>10} | "
       f"{'mcast cpu/msg':>13} {'mcast msgs/s':>12} | {'cpu mcast/RC':>12}")
print(hdr); print("-" * len(hdr))
summary = []
for size in sorted({k[0] for k in runs}):
    ratios = []
    for rnd in sorted({k[1] for k in runs if k[0] == size}):
        rc, mc = runs.get((size, rnd, "rc")), runs.get((size, rnd, "multicast"))
        if not rc or not mc:
            continue
        ratio = mc["cpu_ns_per_msg"] / rc["cpu_ns_per_msg"] if rc["cpu_ns_per_msg"] else float("nan")
        ratios.append(ratio)
        rate = lambda r: f"{r['msgs_per_sec']:.0f}"
        print(f"{size:>6} {rnd:>5} | {rc['cpu_ns_per_msg']:10.0f} {rate(rc):>10} | "
              f"{mc['cpu_ns_per_msg']:13.0f} {rate(mc):>12} | {ratio:11.2f}x")
    if ratios:
        med = statistics.median(ratios)
        print(f"{size:>6} {'med':>5} | {'':>10} {'':>10} | {'':>13} {'':>12} | {med:11.2f}x")
        summary.append({"tool": "bench-rdma", "transport": "rdma", "size": size, "fanout": int(n),
                        "cpu_ratio_multicast_rc_median": round(med, 3),
                        "cpu_ratios": [round(x, 3) for x in ratios]})
with open(out, "a") as o:
    for r in summary:
        o.write(json.dumps(r) + "\n")
EOF
	echo "results: $OUT"
	exit 0
fi

# ib_send_lat_run SIZE: one server/client pair (or this host's side of it);
# the client's line appended to $OUT.
pt_json() {   # LOG SIZE: ib_send_lat's result row -> a JSON line
	python3 - "$1" "$2" "$COUNT" "$DEV" "$IBPORT" "${GID:--}" "$CPUS" "$(LOAD)" "$LINK" \
		"$([ "$MODE" = multicast ] && echo ud || echo rc)" <<'EOF'
import json, re, sys
log, size, count, dev, port, gid, cpus, load, link = sys.argv[1:10]
row = None
for line in open(log, errors="replace"):
    f = line.split()
    if len(f) == 9 and f[0] == size:
        if not re.fullmatch(r"[0-9.]+", f[2]):
            # "inf": perftest could not calibrate its cycle counter (it
            # says "Correlation coefficient r^2 < 0.9": a busy machine)
            sys.exit(3)
        row = [float(x) for x in f]
if row is None:
    sys.exit("no result row for size %s in %s" % (size, log))
us = lambda v: round(v * 1000.0, 1)
print(json.dumps({"tool": "ib_send_lat", "transport": "rdma", "size": int(size), "count": int(row[1]),
    "min_ns": us(row[2]), "max_ns": us(row[3]), "p50_ns": us(row[4]), "avg_ns": us(row[5]),
    "stddev_ns": us(row[6]), "p99_ns": us(row[7]), "p999_ns": us(row[8]),
    "clock": "perftest cycles", "mode": "%s,send,poll,device=%s,port=%s,gid=%s,link=%s,pinned=%s"
    % (sys.argv[10], dev, port, gid, link, cpus), "load": load}))
EOF
}
pt_server() {
	taskset -c "$CPU_B" timeout 120 ib_send_lat "${PT_ARGS[@]}" -s "$1" -n "$COUNT" >"$work/pt-srv-$1.log" 2>&1
}
pt_client() {   # SIZE HOST: retry for 30 s until the server listens
	local end=$((SECONDS + 30))
	while :; do
		taskset -c "$CPU_A" timeout 120 ib_send_lat "${PT_ARGS[@]}" -s "$1" -n "$COUNT" "$2" \
			>"$work/pt-$1.log" 2>&1 && return 0
		grep -q "Couldn't connect\|Unable to open file descriptor\|Connection refused" "$work/pt-$1.log" || return 1
		[ $SECONDS -lt $end ] || return 1
		sleep 0.25
	done
}
ib_send_lat_run() {
	local size=$1 try rc
	if [ "$ROLE" = server ]; then
		pt_server "$size" ||
			{ sed 's/^/  | /' "$work/pt-srv-$size.log" >&2; die "ib_send_lat server -s $size failed"; }
		return
	fi
	for try in 1 2 3; do
		if [ "$ROLE" = client ]; then
			pt_client "$size" "$PEER" ||
				{ sed 's/^/  | /' "$work/pt-$size.log" >&2; die "ib_send_lat -s $size failed"; }
		else
			pt_server "$size" & srv=$!
			if ! pt_client "$size" localhost; then
				kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=
				sed 's/^/  | /' "$work/pt-$size.log" "$work/pt-srv-$size.log" >&2
				die "ib_send_lat -s $size failed"
			fi
			wait "$srv"; srv=
		fi
		pt_json "$work/pt-$size.log" "$size" >>"$OUT"; rc=$?
		[ $rc -eq 3 ] || break
		# a two-host run cannot be repeated from one side
		[ "$ROLE" = client ] && break
		printf ' (clock calibration failed, again)'
	done
	case $rc in
	0) ;;
	3) die "ib_send_lat -s $size: perftest could not calibrate its clock (r^2 < 0.9: the machine is too busy)" ;;
	*) die "cannot parse ib_send_lat's output ($work/pt-$size.log)" ;;
	esac
}

# flit_run SIZE: flit-pong -t rdma; its JSON line to $OUT.
flit_run() {
	local size=$1 role=()
	case $ROLE in
	server) role=(--role pong) ;;
	client) role=(--role ping) ;;
	esac
	# -T 30: start-up across two hosts, or under a busy emulated guest, can
	# take longer than flit-pong's default 10 s (rdma_cm retries back off)
	if ! timeout 300 "$T/flit-pong" -t rdma -s "$size" -n "$COUNT" -w "$WARMUP" -c "$CPUS" -T 30 \
		"${role[@]}" "${FLIT_DEV_CFG[@]}" "${FLIT_CFG[@]}" --json \
		>"$work/flit-$size.json" 2>"$work/flit-$size.err"; then
		sed 's/^/  | /' "$work/flit-$size.err" >&2
		die "flit-pong -t rdma -s $size failed"
	fi
	[ "$ROLE" = server ] || cat "$work/flit-$size.json" >>"$OUT"
}

for size in $SIZES; do
	printf '  size %5s:' "$size"
	if [ "$ONLY" != flit ]; then printf ' ib_send_lat'; ib_send_lat_run "$size"; fi
	if [ "$ONLY" != ib_send_lat ]; then printf ' flit-pong -t rdma'; flit_run "$size"; fi
	echo
done
echo
[ "$ROLE" = server ] && { echo "served ${SIZES// /, } B"; exit 0; }

python3 - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(out) if l.strip()]
pt = {r["size"]: r for r in rows if r.get("tool") == "ib_send_lat"}
fl = {r["size"]: r for r in rows if r.get("tool") == "flit-pong"}
print("RTT/2 in ns, ib_send_lat (%s) and flit-pong -t rdma (%s)"
      % (next(iter(pt.values()))["mode"] if pt else "-", next(iter(fl.values())).get("mode", "-") if fl else "-"))
hdr = (f"{'size':>6} | {'ib_send_lat min':>15} {'p50':>9} {'p99':>9} {'p99.9':>9} | "
       f"{'flit min':>9} {'p50':>9} {'p99':>9} {'p99.9':>9} | {'flit/ib_send_lat p50':>20} {'p99':>6}")
print(hdr); print("-" * len(hdr))
ratios = []
for size in sorted(set(pt) | set(fl)):
    p, f = pt.get(size), fl.get(size)
    cell = lambda r: (f"{r['min_ns']:9.0f} {r['p50_ns']:9.0f} {r['p99_ns']:9.0f} {r['p999_ns']:9.0f}"
                      if r else f"{'-':>9} {'-':>9} {'-':>9} {'-':>9}")
    r50 = f["p50_ns"] / p["p50_ns"] if p and f and p["p50_ns"] else None
    r99 = f["p99_ns"] / p["p99_ns"] if p and f and p["p99_ns"] else None
    print(f"{size:>6} | {'':>6}{cell(p)} | {cell(f)} | "
          f"{(f'{r50:19.2f}x' if r50 else '-'):>20} {(f'{r99:5.2f}x' if r99 else '-'):>6}")
    if r50:
        ratios.append({"tool": "bench-rdma", "transport": "rdma", "size": size,
                       "ib_send_lat_p50_ns": p["p50_ns"], "flit_p50_ns": f["p50_ns"],
                       "ratio_p50": round(r50, 3), "ratio_p99": round(r99, 3) if r99 else None,
                       "load": f.get("load")})
with open(out, "a") as o:
    for r in ratios:
        o.write(json.dumps(r) + "\n")
print()
print("load after: %s" % (rows[-1].get("load") if rows else "-"))
EOF
echo "results: $OUT"
