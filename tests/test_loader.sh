#!/usr/bin/env bash
# flit-loader end to end, on veths in network namespaces of its own:
#
#   [netns flitldPID]    flPIDa <-veth-> flPIDb
#   [netns flitldPIDy]   flPIDa <-veth-> flPIDz   (same name as in the first:
#                                                   two pin directories)
#
# Cases: usage errors exit 2 with the usage on stderr, --help/--version exit
# 0; attach to a missing interface exits 1 naming it; attach in native and
# in skb mode (and auto = skb on veth), each: status shows the mode, the
# single-program fallback and why, the pins (bpftool reads the flows map
# through them), the kernel shows the program in that mode; attach again is
# a no-op (same program id); status from a new process and status of all
# interfaces (also --json, one object per line) see it; flows add/list/del
# round trip (also seen by bpftool), deleting a missing flow fails; topics
# add/filter/list/del; stats and stats --json, stats --watch until SIGINT;
# detach removes the pins and the program, detach again fails clearly;
# stale pins (program removed behind flit's back) are replaced on attach;
# another XDP program on the interface (xdp-loader with libxdp's bundled
# xdpfilt_alw_all.o) makes attach fail naming it; without CAP_NET_ADMIN/
# CAP_BPF/CAP_SYS_ADMIN commands fail naming them; the same interface name in
# a second namespace attaches alongside (pins in flPIDa@COOKIE/, status
# says so, flows apart, detaching one leaves the other, either order); a
# namespace deleted without detaching leaves pins that status shows gone and
# gc removes, and whose canonical name the next attach takes; an interface
# with a dot in its name has its pins at flPIDa:5/ (bpffs refuses dots); under
# `ip netns exec` (no bpffs there) attach refuses to pin into a private
# mount.  status also lists what the kernel gives flit's XDP paths, each
# answer checked against an oracle of the test's own (this machine: bpffs,
# RX-metadata kfunc, device-bound programs and TX metadata yes, freplace no
# with EPERM) and the interface's zero-copy (veth: no), in text and JSON;
# the RX-metadata program on lo (no XDP driver) is refused naming that.
# Uses $BUILD/loader/flit-loader (BUILD as tests/run-tests.sh sets it).
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
L=${FLIT_LOADER:-$PWD/${BUILD:-build}/loader/flit-loader}
[ -x "$L" ] || skip "$L not built (make loader)"
need_root "network namespaces, XDP"
for c in ip nsenter bpftool python3; do
	command -v "$c" >/dev/null 2>&1 || skip "$c not found"
done

id=$(($$ % 100000))
NS="flitld$id"; NS2="flitld${id}y"; NS3="flitld${id}x"
A="fl${id}a"; B="fl${id}b"; Z="fl${id}z"
PINS=/sys/fs/bpf/flit
cleanup() {
	for n in "$NS" "$NS2" "$NS3"; do
		[ -e "/run/netns/$n" ] || continue
		for i in "$A" "$B"; do
			nsenter --net="/run/netns/$n" "$L" detach "$i" >/dev/null 2>&1
		done
		ip netns del "$n" 2>/dev/null
	done
	# pins whose interface is gone (any failure above): remove them
	for d in "$PINS/$A" "$PINS/$A"@* "$PINS/$A:5" "$PINS/$B" "$PINS/$B"@*; do
		[ -d "$d" ] && rm -rf "$d"
	done
}
on_exit cleanup

if ! ip netns add "$NS" 2>"$tmp/err"; then
	skip "cannot create a network namespace: $(cat "$tmp/err")"
fi
ip -n "$NS" link add "$A" type veth peer name "$B" &&
ip -n "$NS" link set "$A" up && ip -n "$NS" link set "$B" up || {
	skip "cannot create a veth pair in $NS"; }

# run [NETNS] ARGS...: flit-loader in a namespace (default $NS), output in
# $tmp/out and $tmp/err, exit status in $rc
rc=0
run_in() {
	local ns=$1; shift
	timeout 20 nsenter --net="/run/netns/$ns" "$L" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
}
run() { run_in "$NS" "$@"; }

# expect RC ARGS...: flit-loader in $NS exits RC (2: usage on stderr); not
# lib.sh's expect, which runs a tool of $D here
expect() {
	local want=$1; shift
	run "$@"
	if [ "$rc" -ne "$want" ]; then
		fail "flit-loader $* exited $rc, expected $want"
		sed 's/^/    | /' "$tmp/err" "$tmp/out" | head -8
		return 1
	fi
	if [ "$want" -eq 2 ] && ! grep -q '^Usage: ' "$tmp/err"; then
		fail "flit-loader $*: no usage on stderr"; return 1
	fi
	echo "ok: flit-loader $* -> $rc"
}

out_has() {  # PATTERN WHAT: stdout matches (grep -E)
	grep -Eq -- "$1" "$tmp/out" && return 0
	fail "$2: stdout lacks /$1/"; sed 's/^/    | /' "$tmp/out" | head -12
	return 1
}
err_has() {  # PATTERN WHAT: stderr matches (grep -E)
	grep -Eq -- "$1" "$tmp/err" && return 0
	fail "$2: stderr lacks /$1/"; sed 's/^/    | /' "$tmp/err" | head -6
	return 1
}

prog_id() { sed -n 's/^ *program id: *\([0-9]*\).*/\1/p' "$tmp/out" | head -1; }

# JSON: one object per line, each parses and has the keys
json_lines() {  # FILE KEY...
	python3 - "$@" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
if not lines:
    sys.exit("no JSON lines")
for l in lines:
    o = json.loads(l)
    for k in sys.argv[2:]:
        if k not in o:
            sys.exit("key %s missing in %s" % (k, l.strip()))
EOF
}

# ---- usage -------------------------------------------------------------------
expect 0 --help && out_has '^Usage: ' "--help"
expect 0 attach --help && out_has '^Usage: flit-loader attach' "attach --help"
expect 0 flows "$A" --help
expect 0 --version && out_has 'XDP program version [0-9]+' "--version"
expect 2
expect 2 --bogus
expect 2 frobnicate
expect 2 attach
expect 2 attach "$A" --mode turbo
expect 2 attach "$A" extra
expect 2 attach "$A" --json
expect 2 attach "$A@1"
expect 2 status "$A:1"
expect 2 gc extra
expect 2 detach
expect 2 status "$A" extra
expect 2 flows "$A"
expect 2 flows "$A" frob
expect 2 flows "$A" add 239.1.1.1
expect 2 flows "$A" add 239.1.1.1:0
expect 2 flows "$A" add 300.1.1.1:5
expect 2 flows "$A" add 239.1.1.1:5 --slot 64
expect 2 flows "$A" del 239.1.1.1:5 --slot 1
expect 2 topics "$A" add 0xzz 1
expect 2 topics "$A" add 1
expect 2 topics "$A" filter 1 maybe
expect 2 stats "$A" --slot 1
expect 2 stats "$A" --mode skb

# ---- missing interface ----------------------------------------------------------
expect 1 attach "nosuch$id" && err_has "no interface nosuch$id" "attach to a missing interface"

# ---- native, then skb, then auto -------------------------------------------------
check_attached() {  # MODE (native|skb) WHAT
	local mode=$1 what=$2 kmode
	expect 0 status "$A" || return
	out_has "^$A: flit attached" "$what: status"
	out_has "mode: +$mode" "$what: status mode"
	out_has "single program, no dispatcher: .*(freplace|dispatcher)" "$what: single program and why"
	out_has "pins: +$PINS/$A\$" "$what: pin dir"
	out_has "flows: +0" "$what: flows count"
	[ -n "$(prog_id)" ] || fail "$what: no program id in status"
	if bpftool map dump pinned "$PINS/$A/flows" >"$tmp/bt" 2>&1; then
		ok "$what: bpftool map dump pinned $PINS/$A/flows"
	else
		fail "$what: bpftool map dump pinned: $(head -2 "$tmp/bt")"
	fi
	[ "$mode" = skb ] && kmode=xdpgeneric || kmode='xdp'
	ip -n "$NS" link show dev "$A" | grep -Eq "$kmode[ /]" &&
		ok "$what: the kernel has it in $mode mode" ||
		fail "$what: ip link does not show $kmode on $A: $(ip -n "$NS" link show dev "$A" | head -3)"
}

for mode in native skb; do
	if expect 0 attach "$A" --mode "$mode"; then
		out_has "attached in $mode mode" "attach --mode $mode"
		out_has "single program, no dispatcher" "attach --mode $mode"
		check_attached "$mode" "$mode attach"
		run status "$A"; id1=$(prog_id)
		expect 0 attach "$A" --mode "$mode" && out_has "already attached" "re-attach ($mode)"
		run status "$A"; [ "$(prog_id)" = "$id1" ] && ok "re-attach kept program $id1" ||
			fail "re-attach changed the program ($id1 -> $(prog_id))"
		expect 0 detach "$A"
		[ -e "$PINS/$A" ] && fail "detach left $PINS/$A" || ok "detach removed $PINS/$A"
		ip -n "$NS" link show dev "$A" | grep -q 'prog/xdp' &&
			fail "detach left a program on $A" || ok "no XDP program left on $A"
	fi
done
expect 1 detach "$A" && err_has "not attached" "detach when not attached"
expect 1 flows "$A" list && err_has "not attached" "flows without flit"

expect 0 attach "$A" && out_has "attached in skb mode" "auto mode on veth"

# ---- a new process sees the pinned program; status of all; JSON --------------------
run status "$A"; id1=$(prog_id)
run status
grep -q "^$A: flit attached" "$tmp/out" && ok "status without IFACE lists $A" ||
	fail "status without IFACE: $(head -3 "$tmp/out")"
if expect 0 status --json; then
	grep "\"ifname\":\"$A\"" "$tmp/out" >"$tmp/st.json"
	if json_lines "$tmp/st.json" ifname attached flit mode multiprog why_single \
	   prog_id version pin_dir flows 2>"$tmp/jerr" &&
	   python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); sys.exit(not (o["flit"] and o["mode"]=="skb" and o["prog_id"]==int(sys.argv[2]) and not o["multiprog"] and o["why_single"]))' \
		"$tmp/st.json" "$id1"; then
		ok "status --json: $(cat "$tmp/st.json")"
	else
		fail "status --json: $(cat "$tmp/jerr") $(cat "$tmp/st.json")"
	fi
fi

# ---- what the kernel and the interface give ---------------------------------------
# Oracles, each found another way than flit-loader's probes: the kfunc in
# bpftool's dump of the kernel's BTF; device-bound programs and TX metadata
# from the version (6.3, 6.8: fine for a test, not for the probes); freplace
# from libxdp's choice (status says single program because of freplace, or
# shows the dispatcher); veth never has zero-copy AF_XDP.
want_yn() { [ "$1" -eq 0 ] && echo yes || echo no; }
kv=$(uname -r | awk -F. '{ printf "%d", $1 * 1000 + $2 }')
bpftool btf dump file /sys/kernel/btf/vmlinux 2>/dev/null | grep -q "FUNC 'bpf_xdp_metadata_rx_timestamp'"
w_kfunc=$(want_yn $?)
w_devb=$(want_yn "$([ "$kv" -ge 6003 ]; echo $?)")
w_txmd=$(want_yn "$([ "$kv" -ge 6008 ]; echo $?)")
run status "$A"
if grep -Eq "programs: +single program, no dispatcher: .*freplace" "$tmp/out"; then w_frep=no
elif grep -Eq "programs: +libxdp dispatcher" "$tmp/out"; then w_frep=yes
else w_frep='(yes|no)'; fi
if expect 0 status "$A"; then
	out_has "^kernel [^ ]+, for flit's XDP paths:$" "status: the kernel's section"
	out_has "^  bpffs: +yes: " "status: bpffs"
	out_has "^  rx-meta kfunc: +$w_kfunc: .*bpf_xdp_metadata_rx_timestamp" "status: RX-metadata kfunc ($w_kfunc)"
	out_has "^  device-bound: +$w_devb: " "status: device-bound programs ($w_devb)"
	out_has "^  tx metadata: +$w_txmd: " "status: AF_XDP TX metadata ($w_txmd)"
	out_has "^  freplace: +$w_frep: " "status: freplace ($w_frep)"
	[ "$w_frep" = no ] && out_has "^  freplace: +no: .*(EPERM|EACCES|EINVAL|ENOTSUPP|EOPNOTSUPP)" "status: why no freplace"
	for w in "$w_kfunc" "$w_devb" "$w_txmd"; do
		[ "$w" = no ] && ! grep -Eq "^  [a-z -]+: +no: .*Linux [0-9]+\.[0-9]+" "$tmp/out" &&
			fail "status: a missing feature without the Linux version that has it"
	done
	out_has "^  xdp: +veth driver, xdp-features [a-z -]+" "status: the interface's xdp-features"
	out_has "^  zero-copy: +no: .*xsk-zerocopy" "status: no zero-copy on veth"
	out_has "^  dev-bound: +$w_devb: " "status: a program bound to $A ($w_devb)"
fi
if expect 0 status "$A" --json; then
	if python3 - "$tmp/out" "$w_kfunc" "$w_devb" "$w_txmd" "$w_frep" <<'EOF'
import json, re, sys
o = json.load(open(sys.argv[1]))
k = o["kernel"]
want = {"rx_metadata_kfunc": sys.argv[2], "dev_bound": sys.argv[3], "tx_metadata": sys.argv[4],
        "freplace": sys.argv[5], "bpffs": "yes"}
for key, w in want.items():
    if not re.fullmatch(w, k[key]["state"]) or not k[key]["how"]:
        sys.exit("kernel.%s: %s, expected %s" % (key, k[key], w))
if o["zerocopy"]["state"] != "no" or o["driver"] != "veth" or "basic" not in o["xdp_features"]:
    sys.exit("interface: %s %s %s" % (o["driver"], o["xdp_features"], o["zerocopy"]))
if not k["release"]:
    sys.exit("no release")
EOF
	then ok "status --json: kernel and interface features"
	else fail "status --json features: $(cat "$tmp/out")"; fi
fi
run status --json
if tail -1 "$tmp/out" | python3 -c 'import json,sys; k=json.load(sys.stdin)["kernel"]; sys.exit(not k["freplace"]["state"])'; then
	ok "status --json of all ends with the kernel's features"
else
	fail "status --json of all: no kernel line last: $(tail -1 "$tmp/out")"
fi
run status
grep -q "^kernel .*, for flit's XDP paths:" "$tmp/out" && ok "status of all lists the kernel's features" ||
	fail "status of all: no kernel section: $(tail -8 "$tmp/out")"
# the RX-metadata program on an interface without XDP (the namespace's lo):
# refused, naming that
expect 1 attach lo --rx-timestamps &&
	err_has "RX-metadata program for lo: .*(no XDP|Linux 6\.3)" "RX-metadata program on lo"
[ -e "$PINS/lo" ] && fail "refused attach left $PINS/lo"

# ---- flows ---------------------------------------------------------------------------
expect 0 flows "$A" add 239.1.2.3:4000 --slot 3
expect 0 flows "$A" add 10.9.8.7:5000
expect 0 flows "$A" list && out_has '^239\.1\.2\.3:4000 +3$' "flows list" &&
	out_has '^10\.9\.8\.7:5000 +0$' "flows list"
if expect 0 flows "$A" list --json; then
	python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); f=o["flows"]; sys.exit(not (len(f)==2 and {"addr":"239.1.2.3","port":4000,"slot":3} in f))' "$tmp/out" &&
		ok "flows list --json: $(cat "$tmp/out")" || fail "flows list --json: $(cat "$tmp/out")"
fi
# bpftool sees the same entry: key 239.1.2.3 (network order) port 4000
if bpftool -j map dump pinned "$PINS/$A/flows" >"$tmp/bt" 2>&1 &&
   python3 - "$tmp/bt" <<'EOF'
import json, socket, struct, sys
d = json.load(open(sys.argv[1]))
want = (struct.unpack("=I", socket.inet_aton("239.1.2.3"))[0], struct.unpack("=H", struct.pack("!H", 4000))[0])
ok = any((e["formatted"]["key"]["daddr"], e["formatted"]["key"]["dport"]) == want and e["formatted"]["value"]["slot_base"] == 3
         for e in d)
sys.exit(0 if ok and len(d) == 2 else 1)
EOF
then ok "bpftool sees the flows"; else fail "bpftool does not see the flows: $(head -c 300 "$tmp/bt")"; fi
expect 0 status "$A" && out_has "flows: +2" "status flow count"
expect 0 flows "$A" del 10.9.8.7:5000
expect 1 flows "$A" del 10.9.8.7:5000 && err_has "no flow 10\.9\.8\.7:5000" "deleting a missing flow"
expect 0 flows "$A" list
[ "$(grep -c ':' "$tmp/out")" -eq 2 ] && ok "one flow left" || fail "flows after del: $(cat "$tmp/out")"

# ---- topics ---------------------------------------------------------------------------
expect 0 topics "$A" add 0x1a2b3c4d 7
expect 0 topics "$A" add 439041101 9
expect 0 topics "$A" filter 0x1a2b3c4d
expect 0 topics "$A" filter 42 off
expect 0 topics "$A" list && out_has '^0x1a2b3c4d +7 +on$' "topics list" &&
	out_has '^0x1a2b3c4d +9 +on$' "topics list" && out_has '^0x0000002a +- +off$' "topics list"
if expect 0 topics "$A" list --json; then
	python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["topics"]; sys.exit(not (len(t)==3 and {"session":439041101,"session_hex":"0x1a2b3c4d","topic":7,"filter":True,"parted":False} in t))' "$tmp/out" &&
		ok "topics list --json" || fail "topics list --json: $(cat "$tmp/out")"
fi
expect 0 topics "$A" del 0x1a2b3c4d
expect 0 topics "$A" list
grep -q 1a2b3c4d "$tmp/out" && fail "topics del left: $(cat "$tmp/out")" || ok "topics del removed the session and its topics"
expect 1 topics "$A" del 0x1a2b3c4d && err_has "no session" "deleting a missing session"

# ---- stats ------------------------------------------------------------------------------
expect 0 stats "$A" && out_has '^  passed +[0-9]+$' "stats" && out_has 'walk_limit' "stats"
if expect 0 stats "$A" --json; then
	python3 -m json.tool "$tmp/out" >/dev/null && json_lines "$tmp/out" ifname counters &&
		ok "stats --json parses" || fail "stats --json: $(cat "$tmp/out")"
fi
timeout -s INT --preserve-status 2.5 nsenter --net="/run/netns/$NS" "$L" stats "$A" --watch --json \
	>"$tmp/w" 2>"$tmp/werr"
wrc=$?
n=$(wc -l <"$tmp/w")
if [ "$wrc" -eq 0 ] && [ "$n" -ge 2 ] && json_lines "$tmp/w" counters && grep -q per_sec "$tmp/w"; then
	ok "stats --watch: $n lines, exit 0 on SIGINT"
else
	fail "stats --watch: exit $wrc, $n lines: $(cat "$tmp/werr")"
fi

# ---- stale pins: the program removed behind flit's back -----------------------------------
ip -n "$NS" link set dev "$A" xdpgeneric off
expect 0 status "$A" && out_has "stale pins" "status after xdpgeneric off"
expect 0 attach "$A" && out_has "attached in skb mode" "attach over stale pins"
run status "$A"
[ -n "$(prog_id)" ] && [ "$(prog_id)" != "$id1" ] && ok "fresh program $(prog_id) replaced stale $id1" ||
	fail "attach over stale pins: program id $(prog_id) (stale was $id1)"
out_has "flows: +0" "fresh maps after stale pins"

# ---- pins of another program version ------------------------------------------------------
run status "$A"; idv=$(prog_id)
if bpftool map update pinned "$PINS/$A/version" key 0 0 0 0 value 1 0 0 0 2>"$tmp/bt"; then
	expect 1 attach "$A" && err_has "version 1 .*this is version [0-9]+" "attach over version-1 pins"
	expect 1 flows "$A" list && err_has "version 1, this is version" "flows over version-1 pins"
	expect 0 status "$A" && out_has "version: +1 \\(not this" "status of version-1 pins"
	expect 0 attach "$A" --force && out_has "attached in skb mode" "attach --force over version 1"
	run status "$A"
	[ "$(prog_id)" != "$idv" ] && out_has "version: +[0-9]+\$" "version after --force" &&
		ok "--force replaced program $idv by $(prog_id)"
else
	fail "bpftool map update of the version pin: $(cat "$tmp/bt")"
fi

# ---- missing privileges -----------------------------------------------------------------
if command -v capsh >/dev/null 2>&1; then
	for args in "attach $B" "status $A" "flows $A list" "detach $A"; do
		nsenter --net="/run/netns/$NS" capsh --drop=cap_net_admin,cap_bpf,cap_sys_admin,cap_perfmon \
			-- -c "exec $L $args" >"$tmp/out" 2>"$tmp/err" </dev/null
		rc=$?
		if [ "$rc" -eq 1 ] && grep -q 'CAP_NET_ADMIN' "$tmp/err" && grep -q 'CAP_BPF' "$tmp/err"; then
			ok "unprivileged $args -> 1: $(cat "$tmp/err")"
		else
			fail "unprivileged $args: exit $rc: $(cat "$tmp/err")"
		fi
	done
	run status "$A"; out_has "^$A: flit attached" "still attached after the unprivileged tries"
else
	echo "skip: capsh not found (libcap2-bin): no unprivileged case"
fi

# ---- another XDP program on the interface ---------------------------------------------------
other=$(ls /usr/lib/*/bpf/xdpfilt_alw_all.o /usr/lib/bpf/xdpfilt_alw_all.o 2>/dev/null | head -1)
if command -v xdp-loader >/dev/null 2>&1 && [ -n "$other" ]; then
	if nsenter --net="/run/netns/$NS" xdp-loader load -m skb "$B" "$other" >"$tmp/xl" 2>&1; then
		expect 1 attach "$B" && err_has "another XDP program is attached: xdpfilt_alw_all" "attach over another program"
		[ -e "$PINS/$B" ] && fail "refused attach left $PINS/$B" || ok "refused attach pinned nothing"
		expect 0 status "$B" && out_has "other XDP: +xdpfilt_alw_all" "status names the other program"
		expect 1 detach "$B"
		nsenter --net="/run/netns/$NS" xdp-loader unload "$B" --all >/dev/null 2>&1 ||
			ip -n "$NS" link set dev "$B" xdpgeneric off
	else
		fail "xdp-loader load $other on $B: $(head -3 "$tmp/xl")"
	fi
else
	echo "skip: no xdp-loader or libxdp's xdpfilt_alw_all.o: no other-program case"
fi

# ---- the same interface name in two namespaces at once ---------------------------
# (tools/testbed gives every host an eth0, each attaching flit to its own)
mkns() {  # NETNS: with $A <-veth-> $Z, both up
	ip netns add "$1" 2>/dev/null &&
	ip -n "$1" link add "$A" type veth peer name "$Z" &&
	ip -n "$1" link set "$A" up && ip -n "$1" link set "$Z" up
}
# wait_gone DIR: status (from $NS) shows DIR gone once the kernel has
# cleaned up the deleted namespace (asynchronous)
wait_gone() {
	for _ in $(seq 50); do
		run status
		grep -Eq "^  $1 .*interface gone" "$tmp/out" && return 0
		sleep 0.1
	done
	fail "status never showed $1 gone: $(cat "$tmp/out")"
	return 1
}
pins_line() { sed -n "s|^$A: pins in ||p" "$tmp/out"; }

if mkns "$NS2"; then
	run status "$A"; idA=$(prog_id)
	run_in "$NS2" status "$A"
	out_has "^$A: flit not attached" "status in $NS2 before attaching"
	out_has "pins: +none \(attach would make $PINS/$A@[0-9]+\)" "status in $NS2 names its pin dir"
	out_has "note: +$PINS/$A holds the pins of another interface named $A \(in another network namespace" "status in $NS2"
	run_in "$NS2" flows "$A" list
	[ "$rc" -eq 1 ] && grep -q "not attached" "$tmp/err" && ok "flows in $NS2 before attaching: $(cat "$tmp/err")" ||
		fail "flows in $NS2 before attaching: exit $rc: $(cat "$tmp/err")"

	run_in "$NS2" attach "$A"
	alt=$(pins_line)
	if [ "$rc" -eq 0 ] && [[ "$alt" =~ ^$PINS/$A@[0-9]+$ ]] && [ -d "$alt" ]; then
		ok "attach of $A in $NS2 alongside $NS: pins in $alt"
	else
		fail "attach of $A in $NS2: exit $rc, pins '$alt': $(cat "$tmp/err" "$tmp/out")"
		alt=$PINS/$A@none
	fi
	run_in "$NS2" status "$A"; idB=$(prog_id)
	out_has "^$A: flit attached" "status in $NS2" && out_has "pins: +$alt\$" "status in $NS2: pin dir"
	run status "$A"
	out_has "^$A: flit attached" "$NS alongside $NS2" && out_has "pins: +$PINS/$A\$" "$NS keeps $PINS/$A"
	[ "$(prog_id)" = "$idA" ] && [ -n "$idB" ] && [ "$idB" != "$idA" ] &&
		ok "two programs: $idA in $NS, $idB in $NS2" || fail "program ids: $NS $(prog_id) (was $idA), $NS2 $idB"
	run_in "$NS2" status "$A" --json
	python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); sys.exit(not (o["flit"] and o["foreign"] and o["pin_dir"]==sys.argv[2]))' \
		"$tmp/out" "$alt" && ok "status --json in $NS2: pin_dir $alt" || fail "status --json in $NS2: $(cat "$tmp/out")"

	# flows apart
	expect 0 flows "$A" add 239.7.7.7:7000
	run_in "$NS2" flows "$A" add 239.8.8.8:8000
	[ "$rc" -eq 0 ] || fail "flows add in $NS2: $(cat "$tmp/err")"
	run_in "$NS2" flows "$A" list
	grep -q '^239\.8\.8\.8:8000' "$tmp/out" && ! grep -q 239.7.7.7 "$tmp/out" &&
		ok "$NS2 sees its flow only" || fail "flows in $NS2: $(cat "$tmp/out")"
	expect 0 flows "$A" list
	grep -q '^239\.7\.7\.7:7000' "$tmp/out" && ! grep -q 239.8.8.8 "$tmp/out" &&
		ok "$NS sees its flow only" || fail "flows in $NS: $(cat "$tmp/out")"
	bpftool -j map dump pinned "$alt/flows" >"$tmp/bt" 2>&1 &&
		python3 -c 'import json,sys; sys.exit(len(json.load(open(sys.argv[1]))) != 1)' "$tmp/bt" &&
		ok "bpftool: one flow in $alt/flows" || fail "bpftool $alt/flows: $(head -c 300 "$tmp/bt")"

	# status of all, from $NS: its interface, then $NS2's directory
	run status
	out_has "^$A: flit attached" "status of all in $NS" &&
		out_has "^  $alt +$A, ifindex [0-9]+, network namespace [0-9]+\$" "status of all lists $NS2's pins"
	run status --json
	grep -q "\"other_netns\":true,\"pin_dir\":\"$alt\"" "$tmp/out" &&
		grep -v '^{"kernel":' "$tmp/out" >"$tmp/nk" && json_lines "$tmp/nk" pin_dir &&
		ok "status --json lists $NS2's pins as other_netns" || fail "status --json: $(cat "$tmp/out")"

	# detaching in $NS2 leaves $NS alone
	run_in "$NS2" detach "$A"
	[ "$rc" -eq 0 ] && [ ! -e "$alt" ] && ok "detach in $NS2 removed $alt" || fail "detach in $NS2: exit $rc, $(ls "$PINS")"
	run status "$A"
	[ "$(prog_id)" = "$idA" ] && out_has "^$A: flit attached" "$NS after $NS2 detached" &&
		out_has "flows: +1\$" "$NS keeps its flow" && ok "$NS still has program $idA and its flow"

	# and the other way round
	run_in "$NS2" attach "$A"
	[ "$(pins_line)" = "$alt" ] || fail "re-attach in $NS2: pins '$(pins_line)', expected $alt"
	expect 0 detach "$A"
	[ -e "$PINS/$A" ] && fail "detach in $NS left $PINS/$A" || ok "detach in $NS removed $PINS/$A"
	run_in "$NS2" status "$A"
	out_has "^$A: flit attached" "$NS2 after $NS detached" && out_has "pins: +$alt\$" "$NS2 keeps $alt"
	ip -n "$NS2" link show dev "$A" | grep -q 'prog/xdp' && ok "$NS2 still has its program" ||
		fail "$NS2 lost its program when $NS detached"

	# $NS2 deleted without detaching: its pins are seen gone, gc removes them
	expect 0 attach "$A" && out_has "pins in $PINS/$A\$" "$NS takes the free canonical name"
	ip netns del "$NS2"
	if wait_gone "$alt"; then
		ok "pins of the deleted $NS2 shown gone"
		expect 0 gc && out_has "^removed $alt\$" "gc" && [ ! -e "$alt" ] && ok "gc removed $alt"
		expect 0 gc && out_has "nothing to remove" "gc again"
		[ -d "$PINS/$A" ] && ok "gc kept the live $PINS/$A" || fail "gc removed the live $PINS/$A"
	fi

	# a deleted namespace that held the canonical name: the next attach
	# removes its pins and takes the name
	expect 0 detach "$A"
	if mkns "$NS3"; then
		run_in "$NS3" attach "$A"
		[ "$rc" -eq 0 ] && [ "$(pins_line)" = "$PINS/$A" ] && ok "$NS3 holds $PINS/$A" ||
			fail "attach in $NS3: exit $rc, pins '$(pins_line)': $(cat "$tmp/err")"
		expect 0 attach "$A" && alt=$(pins_line) && [[ "$alt" =~ @ ]] &&
			ok "$NS next to $NS3: $alt"
		ip netns del "$NS3"
		if wait_gone "$PINS/$A"; then
			expect 0 detach "$A"
			expect 0 attach "$A" && out_has "pins in $PINS/$A\$" "attach after $NS3 was deleted takes $PINS/$A"
			run status
			grep -q "interface gone" "$tmp/out" && fail "attach left gone pins: $(cat "$tmp/out")" ||
				ok "attach removed the deleted namespace's pins"
		fi
	else
		fail "cannot build the namespace $NS3"
	fi
	expect 0 detach "$A"
else
	fail "cannot build the second namespace $NS2"
fi

# ---- a dot in the name (VLAN-style eth0.100): bpffs refuses dots, ':' stands in
D="$A.5"
if ip -n "$NS" link add "$D" type veth peer name "$B.5" && ip -n "$NS" link set "$D" up; then
	expect 0 attach "$D" && out_has "pins in $PINS/$A:5\$" "attach to $D"
	expect 0 status "$D" && out_has "^$D: flit attached" "status of $D" && out_has "pins: +$PINS/$A:5\$" "status of $D"
	run status; out_has "^$D: flit attached" "status of all shows $D by its name"
	expect 0 flows "$D" add 239.5.5.5:5
	expect 0 detach "$D"
	[ -e "$PINS/$A:5" ] && fail "detach left $PINS/$A:5" || ok "detach removed $PINS/$A:5"
	ip -n "$NS" link del "$D"
else
	fail "cannot make the veth $D"
fi

# ---- ip netns exec: no bpffs there ---------------------------------------------------------------
if ip netns exec "$NS" sh -c '[ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" != bpf_fs ]'; then
	ip netns exec "$NS" "$L" attach "$A" >"$tmp/out" 2>"$tmp/err"; rc=$?
	if [ "$rc" -eq 1 ] && grep -q "mount namespace" "$tmp/err" && [ ! -e "$PINS/$A" ]; then
		ok "attach under ip netns exec refused: $(cat "$tmp/err")"
	else
		fail "attach under ip netns exec: exit $rc: $(cat "$tmp/err")"
	fi
	ip -n "$NS" link show dev "$A" | grep -q 'prog/xdp' && fail "ip netns exec attach left a program"
fi

finish
