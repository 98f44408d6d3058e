#!/usr/bin/env bash
# tools/testbed, the namespace network every integration test runs on:
# up with 3 hosts; unicast ICMP echo h1 -> h3; UDP multicast from h1 reaches
# both h2 and h3; up again is idempotent (same interfaces); status lists it;
# --loss 20 on h2's link drops roughly that share and --clear restores it;
# --dup duplicates (each copy exactly once); --reorder works (netem) or exits
# 3 with the sch_netem message; a failing up leaves nothing behind; a new
# shape rebuilds; --link direct cables 2 hosts back to back (no switch,
# impairments refused with exit 3); down removes every namespace; gc
# removes a testbed whose owner is dead and keeps a live one; misuse exits
# 2, non-root exits 4.
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
T=${FLIT_TESTBED:-$PWD/tools/testbed}
[ -x "$T" ] || { echo "FAIL: $T not found or not executable"; exit 1; }
need_root "network namespaces"
if ! command -v ip >/dev/null 2>&1 || ! ip netns list >/dev/null 2>&1; then
	skip "ip netns unavailable (iproute2)"
fi
command -v python3 >/dev/null 2>&1 || skip "python3 not found (traffic generator)"

id=$(($$ % 100000))
N="tbt$id"      # main testbed
G="tbg$id"      # gc victim
R="tbr$id"      # up that must fail and leave nothing
cleanup() {
	local j
	for j in $(jobs -p); do kill "$j" 2>/dev/null; done
	wait 2>/dev/null
	for n in "$N" "$G" "$R"; do "$T" down --name "$n" >/dev/null 2>&1; done
}
on_exit cleanup

netns_of() { ip netns list | awk '{print $1}' | grep -E "^$1-(sw|h[0-9]+)$" | sort | tr '\n' ' '; }

# ---- traffic generator, run inside the host namespaces ------------------------
cat >"$tmp/tg.py" <<'EOF'
import os, select, socket, struct, sys, time

def csum(b):
    if len(b) % 2:
        b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff

cmd = sys.argv[1]
if cmd == 'ping':                       # ping DST COUNT: ICMP echo, exit 0 if all answered
    dst, n = sys.argv[2], int(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident, got = os.getpid() & 0xffff, 0
    for seq in range(n):
        data = b'flit-testbed'
        hdr = struct.pack('!BBHHH', 8, 0, 0, ident, seq)
        s.sendto(struct.pack('!BBHHH', 8, 0, csum(hdr + data), ident, seq) + data, (dst, 0))
        end = time.time() + 1.0
        while time.time() < end:
            r, _, _ = select.select([s], [], [], max(0, end - time.time()))
            if not r:
                break
            pkt, addr = s.recvfrom(2048)
            ihl = (pkt[0] & 15) * 4
            t, _, _, i, sq = struct.unpack('!BBHHH', pkt[ihl:ihl + 8])
            if t == 0 and i == ident and sq == seq and addr[0] == dst:
                got += 1
                break
    print(got)
    sys.exit(0 if got == n else 1)
elif cmd == 'recv':                     # recv PORT READYFILE [GROUP]: count until the end
                                        # marker (or 3 s quiet: every marker lost)
    port, ready = int(sys.argv[2]), sys.argv[3]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # 4 MiB past rmem_max (SO_RCVBUFFORCE, root): at the default ~200 KiB a
    # receiver this VM stalls for the 0.1 s of a run holds only ~190 datagrams
    try:
        s.setsockopt(socket.SOL_SOCKET, getattr(socket, 'SO_RCVBUFFORCE', 33), 1 << 22)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind(('', port))
    if len(sys.argv) > 4:
        mreq = struct.pack('4s4s', socket.inet_aton(sys.argv[4]), socket.inet_aton('0.0.0.0'))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    open(ready, 'w').close()
    # 10 s for the first datagram; then to the end marker, or 5 s quiet (a
    # stalled sender on this VM is not a loss: no deadline while data flows)
    n, seen, inversions, top = 0, set(), 0, -1
    end, first, how = time.time() + 10, None, 'deadline'
    while first or time.time() < end:
        r, _, _ = select.select([s], [], [], 5 if first else max(0, end - time.time()))
        if not r:
            if first:
                how = 'quiet'
                break
            continue
        d = s.recv(2048)
        if d == b'tb:end':
            how = 'end'
            break
        if not d.startswith(b'tb:'):
            continue
        seq = int(d[3:])
        n += 1
        seen.add(seq)
        if seq < top:
            inversions += 1
        top = max(top, seq)
        first = first or time.time()
    print(n, len(seen), inversions, how, '%.2fs' % (time.time() - (first or time.time())))
elif cmd == 'send':                     # send DST PORT COUNT
    dst, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    for i in range(n):
        s.sendto(b'tb:%d' % i, (dst, port))
        time.sleep(0.0002)
    # the end, 20 times over (links that lose 20 %): a receiver stops at the
    # first, not after a quiet spell a stalled sender (this VM's) could make
    for _ in range(20):
        time.sleep(0.001)
        s.sendto(b'tb:end', (dst, port))
EOF

# wait_file FILE: up to 5 s
wait_file() { local i; for ((i = 0; i < 100; i++)); do [ -e "$1" ] && return 0; sleep 0.05; done; return 1; }

# udp_run FROM DST COUNT TO...: receivers on hosts TO... (port 15000, joined to
# DST if it is multicast), COUNT datagrams from host FROM; leaves
# "received unique inversions how secs" of each receiver (how: end
# marker, quiet or deadline; secs: first datagram to the end) in $tmp/rx.HOST
udp_run() {
	local from=$1 dst=$2 count=$3 h; shift 3
	local group=""; [[ $dst == 239.* ]] && group=$dst
	local -a pids=()
	for h in "$@"; do
		rm -f "$tmp/ready.$h" "$tmp/rx.$h"
		# shellcheck disable=SC2086
		"$T" exec --name "$N" --host "$h" -- python3 "$tmp/tg.py" recv 15000 "$tmp/ready.$h" $group \
			>"$tmp/rx.$h" 2>&1 &
		pids+=($!)
	done
	for h in "$@"; do wait_file "$tmp/ready.$h" || { fail "receiver on h$h did not start: $(cat "$tmp/rx.$h")"; }; done
	"$T" exec --name "$N" --host "$from" -- python3 "$tmp/tg.py" send "$dst" 15000 "$count" ||
		fail "sender on h$from failed"
	wait "${pids[@]}"
}
rx() { awk '{print $1}' "$tmp/rx.$1"; }
rx_unique() { awk '{print $2}' "$tmp/rx.$1"; }

# ---- misuse and help -----------------------------------------------------------
expect_rc() {   # expect_rc RC ARGS...: usage on stderr for 2
	local want=$1; shift
	"$T" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	local rc=$?
	if [ "$rc" -ne "$want" ]; then fail "testbed $* exited $rc, expected $want: $(head -3 "$tmp/err")"; return 1; fi
	if [ "$want" -eq 2 ] && ! grep -q '^Usage: ' "$tmp/err"; then fail "testbed $*: no usage on stderr"; return 1; fi
	return 0
}
expect_rc 0 --help && { grep -q '^Usage: ' "$tmp/out" || fail "--help: no usage on stdout"; }
expect_rc 2
expect_rc 2 frobnicate
expect_rc 2 up --hosts 2
expect_rc 2 up --name "$N"
expect_rc 2 up --name BAD --hosts 2
expect_rc 2 up --name toolongname --hosts 2
expect_rc 2 up --name "$N" --hosts 0
expect_rc 2 up --name "$N" --hosts 17
expect_rc 2 up --name "$N" --hosts 2 --loss 150
expect_rc 2 up --name "$N" --hosts 2 --loss abc
expect_rc 2 up --name "$N" --hosts 2 --subnet 10.77.0.1/24
expect_rc 2 up --name "$N" --hosts 2 --bogus
expect_rc 2 down
expect_rc 2 impair --name "$N"
expect_rc 2 exec --name "$N" --host 1
expect_rc 2 status --name
ok "misuse exits 2 with usage"
if command -v setpriv >/dev/null 2>&1; then
	setpriv --reuid=65534 --regid=65534 --clear-groups "$T" up --name "$N" --hosts 1 >/dev/null 2>"$tmp/err"
	rc=$?
	if [ $rc -eq 4 ] && grep -q 'needs root' "$tmp/err"; then ok "non-root exits 4"
	elif [ $rc -eq 126 ]; then echo "note: cannot run $T as nobody; non-root check skipped"
	else fail "non-root up exited $rc: $(cat "$tmp/err")"; fi
fi

# ---- up ---------------------------------------------------------------------------
start=$(date +%s%N)
"$T" up --name "$N" --hosts 3 --owner-pid $$ >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 4 ] && skip "$(tail -1 "$tmp/out")"
[ $rc -eq 0 ] || { echo "FAIL: up exited $rc: $(cat "$tmp/out")"; exit 1; }
ok "up 3 hosts in $((($(date +%s%N) - start) / 1000000)) ms"
[ "$(netns_of "$N")" = "$N-h1 $N-h2 $N-h3 $N-sw " ] || fail "namespaces after up: '$(netns_of "$N")'"
[ -f "/run/flit-testbed/$N.state" ] || fail "no state file"
for h in 1 2 3; do
	"$T" exec --name "$N" --host "$h" -- ip -4 -o addr show dev eth0 | grep -q "inet 10.77.0.$h/24" ||
		fail "h$h has no 10.77.0.$h/24"
done
snoop=$("$T" exec --name "$N" --host sw -- ip -d link show br0 | grep -o 'mcast_snooping [0-9]')
[ "$snoop" = "mcast_snooping 0" ] || fail "br0: '$snoop', want mcast_snooping 0"

# ---- unicast and multicast ------------------------------------------------------------
if "$T" exec --name "$N" --host 1 -- python3 "$tmp/tg.py" ping 10.77.0.3 3 >/dev/null; then
	ok "ping h1 -> h3"
else
	fail "ping h1 -> h3"
fi
udp_run 1 239.77.1.1 20 2 3
if [ "$(rx 2)" = 20 ] && [ "$(rx 3)" = 20 ]; then ok "multicast h1 -> h2, h3: 20/20 each"
else fail "multicast h1 -> h2: '$(cat "$tmp/rx.2")', h3: '$(cat "$tmp/rx.3")' (want 20 each)"; fi

# ---- idempotent up, status --------------------------------------------------------------
idx=$("$T" exec --name "$N" --host 1 -- cat /sys/class/net/eth0/ifindex 2>/dev/null)
mac=$("$T" exec --name "$N" --host 1 -- ip -o link show eth0 | grep -o 'link/ether [0-9a-f:]*')
"$T" up --name "$N" --hosts 3 --owner-pid $$ >"$tmp/out" 2>&1 || fail "second up: $(cat "$tmp/out")"
mac2=$("$T" exec --name "$N" --host 1 -- ip -o link show eth0 | grep -o 'link/ether [0-9a-f:]*')
if [ -n "$mac" ] && [ "$mac" = "$mac2" ] && grep -q 'already up' "$tmp/out"; then ok "up again is idempotent"
else fail "up again rebuilt the testbed ($mac / $mac2 ifindex $idx): $(cat "$tmp/out")"; fi
"$T" status >"$tmp/status" || fail "status exited $?"
if ! grep -q "^testbed $N: 3 hosts" "$tmp/status" || ! grep -q "$N-h3 .*10.77.0.3" "$tmp/status"; then
	fail "status does not list $N: $(cat "$tmp/status")"
fi
"$T" status --name "$N" --json >"$tmp/json" || fail "status --json exited $?"
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["testbeds"][0]; assert d["name"]==sys.argv[2] and d["hosts"]==3 and len(d["links"])==3 and d["mechanism"] in ("netem","nftables"), d' \
	"$tmp/json" "$N" 2>"$tmp/err"; then
	ok "status lists it (impairments via $(grep -o '"mechanism":"[a-z]*"' "$tmp/json" | cut -d\" -f4))"
else
	fail "status --json: $(cat "$tmp/err")"
fi

# ---- loss ---------------------------------------------------------------------------------
# h1 learns h2's MAC first, so that the count is the datagrams' loss alone
# (an ARP request lost with the loss on would hold them for the 1 s retry)
"$T" exec --name "$N" --host 1 -- python3 "$tmp/tg.py" ping 10.77.0.2 3 >/dev/null || fail "ping h1 -> h2"
"$T" impair --name "$N" --host 2 --loss 20 || fail "impair --loss 20 exited $?"
udp_run 1 10.77.0.2 500 2
got=$(rx 2)
if [ -n "$got" ] && [ "$got" -ge 325 ] && [ "$got" -le 460 ]; then ok "loss 20%: $got/500 arrived"
else fail "loss 20%: '$(cat "$tmp/rx.2")' of 500 arrived, want 325..460"; fi
grep -q "h2 .*loss 20%" <("$T" status --name "$N") || fail "status does not show loss 20% on h2"
"$T" impair --name "$N" --host 2 --clear || fail "impair --clear exited $?"
udp_run 1 10.77.0.2 500 2
got=$(rx 2)
if [ -n "$got" ] && [ "$got" -ge 495 ] && [ "$got" -le 500 ]; then ok "--clear: $got/500 arrived"
else fail "after --clear: '$(cat "$tmp/rx.2")' of 500 arrived"; fi

# ---- duplication: every duplicate exactly once ---------------------------------------------
"$T" impair --name "$N" --host 3 --dup 50 || fail "impair --dup 50 exited $?"
udp_run 1 10.77.0.3 400 3
got=$(rx 3); uniq=$(rx_unique 3)
if [ -n "$got" ] && [ "$got" -ge 520 ] && [ "$got" -le 680 ] && [ "$uniq" = 400 ]; then
	ok "dup 50%: $got received for 400 sent ($uniq distinct)"
else fail "dup 50%: '$(cat "$tmp/rx.3")' (received distinct) for 400 sent, want 520..680 and 400 distinct"; fi
"$T" impair --name "$N" --clear || fail "impair --clear (all) exited $?"

# ---- reorder / delay: netem or a clean refusal ---------------------------------------------------
"$T" impair --name "$N" --host 2 --reorder 25 --delay 5 >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
	grep -q '"mechanism":"netem"' <("$T" status --name "$N" --json) || fail "reorder accepted without netem"
	udp_run 1 10.77.0.2 200 2
	read -r got uniq inv <"$tmp/rx.2"
	if [ "${got:-0}" -ge 195 ] && [ "${inv:-0}" -gt 0 ]; then ok "reorder 25% (netem): $inv inversions in $got"
	else fail "reorder 25%: '$(cat "$tmp/rx.2")' (received distinct inversions) for 200"; fi
	"$T" impair --name "$N" --clear || fail "impair --clear exited $?"
elif [ $rc -eq 3 ] && grep -q 'reorder/delay need sch_netem (CONFIG_NET_SCH_NETEM), not in this kernel' "$tmp/out"; then
	ok "reorder: no sch_netem, exit 3 with the message"
	# a fresh up asking for reorder must fail the same way and leave nothing
	"$T" up --name "$R" --hosts 2 --delay 1 --owner-pid $$ >"$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 3 ] || fail "up --delay without netem exited $rc: $(cat "$tmp/out")"
	if [ -n "$(netns_of "$R")" ] || [ -e "/run/flit-testbed/$R.state" ]; then
		fail "failed up left '$(netns_of "$R")' behind"
	fi
else
	fail "impair --reorder exited $rc: $(cat "$tmp/out")"
fi

# ---- another shape rebuilds; down removes everything ------------------------------------------
"$T" up --name "$N" --hosts 2 --owner-pid $$ >"$tmp/out" 2>&1 || fail "up with 2 hosts: $(cat "$tmp/out")"
[ "$(netns_of "$N")" = "$N-h1 $N-h2 $N-sw " ] || fail "after reshaping to 2 hosts: '$(netns_of "$N")'"
# ---- a direct link: two hosts back to back, no switch, no impairments -------------------------
"$T" up --name "$N" --hosts 2 --link direct --owner-pid $$ >"$tmp/out" 2>&1 ||
	fail "up --link direct (rebuilding from the bridge): $(cat "$tmp/out")"
[ "$(netns_of "$N")" = "$N-h1 $N-h2 " ] || fail "direct link namespaces: '$(netns_of "$N")'"
peer=$("$T" exec --name "$N" --host 1 -- ip -o link show eth0 | grep -o 'link-netns [^ ]*')
[ "$peer" = "link-netns $N-h2" ] || fail "h1 eth0 is not cabled to $N-h2: '$peer'"
"$T" exec --name "$N" --host 1 -- python3 "$tmp/tg.py" ping 10.77.0.2 3 >/dev/null || fail "direct: ping h1 -> h2"
udp_run 1 239.77.1.1 20 2
[ "$(rx 2)" = 20 ] || fail "direct: multicast h1 -> h2: '$(cat "$tmp/rx.2")' (want 20)"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["testbeds"][0]; assert d["link"]=="direct" and d["switch"] is None and d["mechanism"]=="none", d' \
	<("$T" status --name "$N" --json) 2>"$tmp/err" || fail "direct: status --json: $(cat "$tmp/err")"
grep -q 'cabled directly' <("$T" status --name "$N") || fail "direct: status does not say so"
"$T" impair --name "$N" --loss 5 >"$tmp/out" 2>&1
rc=$?
{ [ $rc -eq 3 ] && grep -q 'takes no impairments' "$tmp/out"; } || fail "direct: impair exited $rc: $(cat "$tmp/out")"
"$T" exec --name "$N" --host sw -- true >"$tmp/out" 2>&1 && fail "direct: exec --host sw succeeded"
expect_rc 2 up --name "$N" --hosts 3 --link direct
expect_rc 2 up --name "$N" --hosts 2 --link star
expect_rc 3 up --name "$R" --hosts 2 --link direct --loss 1
[ -z "$(netns_of "$R")" ] || fail "refused direct up left '$(netns_of "$R")'"
"$T" up --name "$N" --hosts 2 --link direct --owner-pid $$ 2>&1 | grep -q 'already up' ||
	fail "direct: up again is not idempotent"
[ "$failures" -eq 0 ] && ok "direct link: h1 <-> h2 cabled, unicast and multicast pass, impairments refused (exit 3)"
# ---- a direct link over existing interfaces (a guest's NICs): a veth pair of the root
# namespace stands in for them here -------------------------------------------------------------
"$T" down --name "$N" >/dev/null 2>&1
d1=ftb$$a d2=ftb$$b
d1=${d1:0:15} d2=${d2:0:15}
if ip link add "$d1" type veth peer name "$d2" 2>"$tmp/err"; then
	expect_rc 2 up --name "$N" --hosts 2 --devices "$d1,$d2"           # needs --link direct
	expect_rc 2 up --name "$N" --hosts 2 --link direct --devices "$d1"   # two of them
	"$T" up --name "$N" --hosts 2 --link direct --devices "$d1,nosuch0" >"$tmp/out" 2>&1
	rc=$?
	{ [ $rc -eq 1 ] && grep -q 'no interface nosuch0' "$tmp/out"; } || fail "--devices with a missing interface exited $rc: $(cat "$tmp/out")"
	ip link show "$d1" >/dev/null 2>&1 || fail "a refused --devices up took $d1 away"
	if "$T" up --name "$N" --hosts 2 --link direct --devices "$d1,$d2" --owner-pid $$ >"$tmp/out" 2>&1; then
		ip link show "$d1" >/dev/null 2>&1 && fail "--devices: $d1 still in the root namespace"
		"$T" exec --name "$N" --host 1 -- python3 "$tmp/tg.py" ping 10.77.0.2 3 >/dev/null ||
			fail "--devices: ping h1 -> h2 over $d1/$d2"
		grep -q "devices $d1, $d2" <("$T" status --name "$N") || fail "--devices: status does not name them"
		"$T" down --name "$N" || fail "--devices: down exited $?"
		if ip link show "$d1" >/dev/null 2>&1 && ip link show "$d2" >/dev/null 2>&1 &&
		   [ -z "$(ip -o addr show dev "$d1" | grep inet)" ]; then
			ok "--devices: a direct link over $d1,$d2; down gives them back to the root namespace, named as before, without addresses"
		else
			fail "--devices: after down: $(ip -br link | grep -c ftb) of 2 back"
		fi
	else
		fail "up --link direct --devices $d1,$d2: $(cat "$tmp/out")"
	fi
	ip link del "$d1" 2>/dev/null
	"$T" up --name "$N" --hosts 2 --link direct --owner-pid $$ >/dev/null 2>&1
else
	echo "# --devices not tested: no veth pair in the root namespace: $(cat "$tmp/err")"
fi

"$T" down --name "$N" || fail "down exited $?"
if [ -z "$(netns_of "$N")" ] && [ ! -e "/run/flit-testbed/$N.state" ]; then ok "down removes every namespace"
else fail "after down: '$(netns_of "$N")'"; fi
"$T" down --name "$N" || fail "second down exited $?"

# ---- gc ---------------------------------------------------------------------------------------
sh -c 'exit 0' &
dead=$!
wait "$dead"
"$T" up --name "$G" --hosts 1 --owner-pid "$dead" >/dev/null 2>&1 || fail "up $G failed"
"$T" up --name "$N" --hosts 1 --owner-pid $$ >/dev/null 2>&1 || fail "up $N failed"
"$T" gc >"$tmp/out" 2>&1 || fail "gc exited $?: $(cat "$tmp/out")"
if [ -n "$(netns_of "$G")" ] || [ -e "/run/flit-testbed/$G.state" ]; then fail "gc left $G: '$(netns_of "$G")'"; fi
[ -n "$(netns_of "$N")" ] || fail "gc removed $N, whose owner is alive"
[ -z "$(netns_of "$G")" ] && [ -n "$(netns_of "$N")" ] && ok "gc removes only dead owners' testbeds"
"$T" down --name "$N" || fail "down exited $?"

finish
