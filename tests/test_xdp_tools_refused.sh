#!/usr/bin/env bash
# flit-pub -t xdp and flit-sub -t xdp when the xdp transport cannot start:
# both exit 1 at once with the library's reason on stderr, never a
# subscriber that waits and hears nothing.  Real refusals of this kernel:
#   - without CAP_NET_ADMIN/CAP_BPF/CAP_SYS_ADMIN (capsh --drop): loading
#     flit's XDP program gets EPERM; the reason names the capabilities;
#   - hardware RX stamps (context.xdp.rx_timestamps = hardware) on lo, whose
#     driver has no XDP: the device-bound RX-metadata program is refused,
#     and the reason says so (or names Linux 6.3 on an older kernel).
# The verifier's own reasons, from canned logs and from this kernel, are
# tests/test_verifier_log.c's.  A control: the same subscriber with its
# privileges starts, runs out its --timeout and exits 0.
#
#   [netns flxrPID]   flPIDr (10.97.0.1/24, multicast route) <-veth-> flPIDs
#
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
PUB=$D/flit-pub SUB=$D/flit-sub
need_tools flit-pub flit-sub
need_root "network namespaces, XDP"
command -v nsenter >/dev/null 2>&1 || skip "nsenter not found"

id=$(($$ % 100000))
NS="flxr$id"; R="fl${id}r"; S="fl${id}s"
cleanup() {
	ip netns del "$NS" 2>/dev/null
	rm -rf "/sys/fs/bpf/flit/$R"
}
on_exit cleanup

if ! ip netns add "$NS" 2>"$tmp/err"; then
	skip "cannot create a network namespace: $(cat "$tmp/err")"
fi
ip -n "$NS" link add "$R" type veth peer name "$S" &&
ip -n "$NS" addr add 10.97.0.1/24 dev "$R" &&
ip -n "$NS" link set "$R" up && ip -n "$NS" link set "$S" up &&
ip -n "$NS" link set lo up &&
ip -n "$NS" route add 224.0.0.0/4 dev "$R" || skip "cannot build the veth pair in $NS"
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf 2>/dev/null

# tool NAME PREFIX ARGS...: run flit-NAME in the namespace (PREFIX: a
# command to run it under, or ""), at most 20 s; rc, ms, $tmp/out, $tmp/err
rc=0 ms=0
tool() {
	local bin=$1 pre=$2 t0; shift 2
	t0=$(date +%s%N)
	if [ -n "$pre" ]; then
		timeout 20 nsenter --net="/run/netns/$NS" $pre -- -c "exec $bin $*" \
			>"$tmp/out" 2>"$tmp/err" </dev/null
	else
		timeout 20 nsenter --net="/run/netns/$NS" "$bin" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	fi
	rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}

# refused WHAT PATTERN: the last tool run exited 1 within 3 s, its stderr
# matching PATTERN (grep -E) and naming the xdp transport
refused() {
	if [ "$rc" -eq 1 ] && [ "$ms" -lt 3000 ] && grep -Eq -- "$2" "$tmp/err" &&
	   grep -q "transport xdp" "$tmp/err"; then
		ok "$1: exit 1 after $ms ms: $(cat "$tmp/err")"
	else
		fail "$1: exit $rc after $ms ms, stderr: $(cat "$tmp/err")"
	fi
}

IFCFG="-C 'context.udp.interface = $R'"

# ---- without the capabilities -------------------------------------------------------
if command -v capsh >/dev/null 2>&1; then
	DROP="capsh --drop=cap_net_admin,cap_bpf,cap_sys_admin,cap_perfmon"
	tool "$PUB" "$DROP" -t xdp "$IFCFG" md.eur 1.0842
	refused "flit-pub -t xdp without CAP_BPF" "CAP_BPF"
	tool "$SUB" "$DROP" -t xdp "$IFCFG" -T 10 "'md.*'"
	refused "flit-sub -t xdp without CAP_BPF" "CAP_BPF"
	[ -e "/sys/fs/bpf/flit/$R" ] && fail "an unprivileged try left pins in /sys/fs/bpf/flit/$R"
else
	echo "skip: capsh not found (libcap2-bin): no unprivileged case"
fi

# ---- hardware RX stamps on an interface whose driver has no XDP --------------------------
RXTS=(-C 'context.udp.interface = lo' -C 'context.xdp.rx_timestamps = hardware')
tool "$SUB" "" -t xdp "${RXTS[@]}" -T 10 'md.*'
refused "flit-sub -t xdp, RX stamps on lo" "RX-metadata program for lo: .*(no XDP|Linux 6\.3)"
tool "$PUB" "" -t xdp "${RXTS[@]}" md.eur 1.0842
refused "flit-pub -t xdp, RX stamps on lo" "RX-metadata program for lo: .*(no XDP|Linux 6\.3)"

# ---- the control: privileged, the subscriber starts and waits out --timeout ---------------
tool "$SUB" "" -t xdp -C "context.udp.interface = $R" -T 1 'md.*'
if [ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ]; then
	ok "flit-sub -t xdp with its privileges: ran ${ms} ms, exit 0"
else
	fail "flit-sub -t xdp with its privileges: exit $rc: $(cat "$tmp/err")"
fi
ip -n "$NS" link show dev "$R" | grep -q 'prog/xdp' && fail "the control left a program on $R"

finish
