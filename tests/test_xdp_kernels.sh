#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# test_xdp_kernels — flit's XDP program and the xdp transport on the kernels
# users run, each booted in a guest (tests/vm/, qemu; docs/VM.md):
#
#   6.1      Debian 12's own kernel
#   6.12     bookworm-backports
#   newest   trixie-backports (7.x): on request (test_xdp_zerocopy_vm boots it)
#
# Each guest has two NICs on one qemu hub (virtio-net-pci), moved into two
# namespaces by `tools/testbed up --link direct --devices xnic1,xnic2`
# (h1 10.77.0.1 eth0 <-> h2 10.77.0.2 eth0), and runs, chrooted on this
# host's / (the same build):
#
#   - what the kernel gives: `flit-loader status` (its feature lines);
#   - test_xdp_prog: the program verifies and loads on this kernel, and its
#     verdicts (BPF_PROG_TEST_RUN on crafted frames) are this kernel's;
#   - flit-loader attach/status/detach on h1's eth0 in native and skb mode;
#   - flit-pub -t xdp -> flit-sub -t xdp, subscriber first, in native and
#     skb mode: every message, in order, from an "xdp:" source;
#   - kernel udp -> xdp and xdp -> kernel udp (the receiving kernel's UDP
#     checksum error counter unchanged);
#   - beside another XDP program through libxdp's dispatcher (where the
#     kernel has freplace): xdp-filter dropping UDP to one port on h2,
#     flit-loader attach; status gives the dispatcher and the run order;
#     flit's flows reach its sockets, xdp-filter still drops its port and
#     other UDP reaches its socket; detaching either leaves the other
#     working;
#   - what the kernel lacks (RX metadata and device-bound programs before
#     6.3, AF_XDP TX metadata before 6.8) is refused naming that version,
#     and where it has them they work (flit-loader attach --rx-timestamps,
#     xdp with context.xdp.tx_timestamps = on).
#
# A kernel is a PASS, a SKIP naming what is missing (no qemu, no kernel
# package), or a FAIL; the test fails if any kernel fails, skips if all
# skip.  FLIT_VM_KERNELS chooses the kernels (default "6.1 6.12"); the suite
# itself runs with `--suite` inside a guest (or by hand on a host with two
# cabled NICs: FLIT_VM_NICS="if1 if2").
#
# timeout: 540
set -u -o pipefail
. "$(dirname "$0")/vm/suite.sh"
D=$ROOT/$BUILD/tools
LOADER=$ROOT/$BUILD/loader/flit-loader

# ---- inside the guest -------------------------------------------------------
if [ "${1:-}" = --suite ]; then
	vm_suite_begin xk

	"$LOADER" status 2>&1 | sed 's/^/# /'

	echo "== test_xdp_prog"
	if "$ROOT/$BUILD/tests/test_xdp_prog" >"$tmp/prog.log" 2>&1; then
		grep -m1 '^flit_xdp_steer:' "$tmp/prog.log" | sed 's/^/# /'
		ok "test_xdp_prog: $(grep -c '^\[       OK \]' "$tmp/prog.log") cases pass" \
		   "($(grep -c '^\[  SKIPPED \]' "$tmp/prog.log" | awk '{ print $1 - 1 < 0 ? 0 : $1 - 1 }') skipped)"
	else
		fail "test_xdp_prog"; grep -E 'FAIL|verifier|libbpf|\[  ERROR|unbounded|invalid' "$tmp/prog.log" | head -20 | sed 's/^/    | /'
	fi

	vm_testbed_up

	echo "== flit-loader"
	for mode in native skb; do
		if ! h 1 "$LOADER" attach eth0 --mode "$mode" >"$tmp/att" 2>&1; then
			fail "flit-loader attach eth0 --mode $mode"; show "$tmp/att"; continue
		fi
		h 1 "$LOADER" status eth0 >"$tmp/st" 2>&1
		want=$([ "$mode" = native ] && echo "native (driver XDP)" || echo "skb")
		if grep -q "mode: *$want" "$tmp/st"; then ok "attach --mode $mode: status says $want"
		else fail "attach --mode $mode: status"; show "$tmp/st"; fi
		sed -n 's/^ *programs: */# programs: /p' "$tmp/st" | head -1
		if h 1 "$LOADER" detach eth0 >"$tmp/det" 2>&1 && h 1 "$LOADER" status eth0 2>&1 | grep -q "not attached"; then
			ok "detach after $mode"
		else
			fail "detach after $mode"; show "$tmp/det"
		fi
	done

	echo "== pub/sub"
	stream "xdp -> xdp (native)" 1 xdp 2 xdp 2000 "context.xdp.mode = native"
	stream "xdp -> xdp (skb)" 1 xdp 2 xdp 2000 "context.xdp.mode = skb"
	stream "kernel udp -> xdp" 1 udp 2 xdp 2000
	e0=$(csum_errors 2)
	stream "xdp -> kernel udp" 1 xdp 2 udp 2000
	e1=$(csum_errors 2)
	if [ -n "$e0" ] && [ "$e0" = "$e1" ]; then ok "h2's UDP InCsumErrors unchanged ($e1)"
	else fail "h2's UDP InCsumErrors $e0 -> $e1: AF_XDP sent bad checksums"; fi

	# Beside another XDP program, through libxdp's dispatcher (where the
	# kernel has freplace): xdp-filter (xdp-tools) dropping UDP to port
	# 7777 on h2's eth0, and flit's program
	# other_traffic WHAT: h1 sends 5 UDP datagrams to h2's port 7777 and 5 to
	# 7778 (kernel sockets): xdp-filter drops the first (its hit counter
	# goes up 5), the others reach their socket
	other_traffic() {
		local hits0 hits1 i=0 got
		rm -f "$tmp/ready" "$tmp/done"
		hits0=$(h 2 xdp-filter status 2>/dev/null | awk '$1 == "7777" { print $NF }')
		h 2 python3 -c 'import os, select, socket, sys, time
ss = {}
for p in (7777, 7778):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", p)); ss[s] = p
n = {7777: 0, 7778: 0}
open(sys.argv[1], "w").close()
end = time.time() + 60
while time.time() < end:
    for s in select.select(list(ss), [], [], 0.2)[0]:
        s.recv(64); n[ss[s]] += 1
    if os.path.exists(sys.argv[2]) and end > time.time() + 1:
        end = time.time() + 1   # what is still on its way
print(n[7777], n[7778])' "$tmp/ready" "$tmp/done" >"$tmp/got" &
		local r=$!
		while [ ! -e "$tmp/ready" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
		h 1 python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for p in (7777, 7778):
    for _ in range(5): s.sendto(b"x", ("10.77.0.2", p))'
		touch "$tmp/done"; wait $r
		got=$(cat "$tmp/got")
		hits1=$(h 2 xdp-filter status 2>/dev/null | awk '$1 == "7777" { print $NF }')
		if [ "$got" = "0 5" ] && [ $((hits1 - hits0)) -eq 5 ]; then
			ok "$1: xdp-filter drops UDP to 7777 (hits +5), UDP to 7778 reaches its socket (5 of 5)"
		else
			fail "$1: ports 7777 7778 got '$got' (want '0 5'), xdp-filter hits $hits0 -> $hits1"
		fi
	}
	echo "== beside another XDP program"
	if ! grep -q 'freplace: *yes' <<<"$("$LOADER" status 2>&1)"; then
		echo "# skipped: this kernel refuses freplace: libxdp has no dispatcher here"
	elif ! command -v xdp-filter >/dev/null || ! command -v python3 >/dev/null; then
		echo "# skipped: needs xdp-filter (xdp-tools) and python3"
	elif ! h 2 xdp-filter load eth0 -m native -f udp >"$tmp/xf" 2>&1 || ! h 2 xdp-filter port 7777 >>"$tmp/xf" 2>&1; then
		fail "xdp-filter load on h2's eth0"; show "$tmp/xf"
	else
		if h 2 "$LOADER" attach eth0 >"$tmp/att" 2>&1; then
			h 2 "$LOADER" status eth0 >"$tmp/st" 2>&1
			if grep -q 'libxdp dispatcher' "$tmp/st" && grep -q '1\. xdpfilt_alw_udp' "$tmp/st" &&
			   grep -q '2\. flit_xdp_steer .*(flit)' "$tmp/st"; then
				ok "flit-loader attach beside xdp-filter; status gives the dispatcher and the run order"
				sed -n '/run order/,/^  [a-z]/p' "$tmp/st" | grep '^    [0-9]' | sed 's/^ */#   /'
			else
				fail "status beside xdp-filter"; show "$tmp/st"
			fi
			stream "beside xdp-filter: xdp -> xdp" 1 xdp 2 xdp 1000
			other_traffic "beside flit"
			if h 2 "$LOADER" detach eth0 >"$tmp/det" 2>&1 && h 2 xdp-loader status eth0 2>&1 | grep -q xdpfilt_alw_udp; then
				ok "flit-loader detach leaves xdp-filter attached"
				other_traffic "after flit's detach"
			else
				fail "flit-loader detach beside xdp-filter"; show "$tmp/det"
			fi
			h 2 "$LOADER" attach eth0 >"$tmp/att" 2>&1 || { fail "attach again"; show "$tmp/att"; }
		else
			fail "flit-loader attach beside xdp-filter"; show "$tmp/att"
		fi
		if h 2 xdp-filter unload eth0 >"$tmp/xf" 2>&1 && h 2 "$LOADER" status eth0 2>&1 | grep -q 'flit attached'; then
			ok "xdp-filter unload leaves flit attached"
			stream "after xdp-filter's unload: xdp -> xdp" 1 xdp 2 xdp 1000
		else
			fail "xdp-filter unload beside flit"; show "$tmp/xf"
		fi
		h 2 "$LOADER" detach eth0 >/dev/null 2>&1
	fi

	# Features this kernel lacks are refused naming the version that has
	# them; where it has them, they work
	echo "== features"
	kst=$("$LOADER" status 2>&1)
	if grep -q 'rx-meta kfunc: *no' <<<"$kst" || grep -q 'device-bound: *no' <<<"$kst"; then
		if h 1 "$LOADER" attach eth0 --rx-timestamps >"$tmp/rxts" 2>&1; then
			fail "attach --rx-timestamps succeeded on a kernel without RX metadata"; show "$tmp/rxts"
			h 1 "$LOADER" status eth0 >"$tmp/rxts" 2>&1; show "$tmp/rxts"
			h 1 "$LOADER" detach eth0 >/dev/null 2>&1
		elif grep -q 'Linux 6\.3' "$tmp/rxts"; then ok "attach --rx-timestamps refused, naming Linux 6.3: $(tail -1 "$tmp/rxts")"
		else fail "attach --rx-timestamps refused without naming the version"; show "$tmp/rxts"; fi
	elif h 1 "$LOADER" attach eth0 --rx-timestamps >"$tmp/rxts" 2>&1; then
		ok "attach --rx-timestamps: the RX-metadata program loads device-bound and attaches natively"
		h 1 "$LOADER" detach eth0 >/dev/null 2>&1
	else
		fail "attach --rx-timestamps on a kernel that has RX metadata"; show "$tmp/rxts"
	fi
	if grep -q 'tx metadata: *no' <<<"$kst"; then
		if h 1 timeout 60 "$D/flit-pub" -t xdp -C context.udp.interface=eth0 -C "context.xdp.tx_timestamps = on" \
			xk.txts one >"$tmp/txts" 2>&1; then
			fail "context.xdp.tx_timestamps = on accepted on a kernel without AF_XDP TX metadata"
		elif grep -q 'Linux 6\.8' "$tmp/txts"; then ok "xdp TX stamps refused, naming Linux 6.8: $(tail -1 "$tmp/txts")"
		else fail "xdp TX stamps refused without naming the version"; show "$tmp/txts"; fi
	else
		stream "xdp -> xdp with TX metadata stamps" 1 xdp 2 xdp 500 "context.xdp.tx_timestamps = on"
	fi

	vm_suite_end
fi

# ---- on the host: one guest per kernel ---------------------------------------
vm_test_need "$ROOT/$BUILD/tests/test_xdp_prog" "$D/flit-pub" "$D/flit-sub" "$LOADER"
kernels=${FLIT_VM_KERNELS:-6.1 6.12}
# the runner's limit is the header's "timeout:" line; the guests share it
T0=$(now_ms) BUDGET=$(vm_test_budget "$0" 6)
nk=$(wc -w <<<"$kernels")
pass=0 failed=0 skipped=0 summary=()
for k in $kernels; do
	valid_kernel_spec "$k" || { echo "FAIL: FLIT_VM_KERNELS: bad kernel '$k'"; exit 1; }
	opts=(--nics 2)
	# the newest kernel's virtio_net binds AF_XDP zero-copy on modern
	# virtio devices behind the platform IOMMU interface; copy mode works
	# there too
	[ "$k" = newest ] && opts+=(--zerocopy)
	echo "=== kernel $k"
	t0=$(now_ms)
	# what is left, shared by the kernels still to run (at least 60 s)
	tmo=$(( (BUDGET - (t0 - T0) / 1000) / nk )); nk=$((nk - 1))
	[ "$tmo" -ge 60 ] || tmo=60
	vm_test_run "xdp-kernels-$k" --kernel "$k" "${opts[@]}" --timeout "$tmo"
	rc=$?
	rel=$(sed -n 's/^# kernel //p' "$BUILD/test-logs/xdp-kernels-$k.out" | head -1)
	secs=$(( ($(now_ms) - t0) / 1000 ))
	case $rc in
	0) pass=$((pass + 1)); summary+=("kernel $k: PASS on ${rel:-?} (${secs}s)") ;;
	77) skipped=$((skipped + 1))
	    summary+=("kernel $k: SKIP: $(grep -h '^SKIP:' "$BUILD/test-logs/xdp-kernels-$k.out" | tail -1 | sed 's/^SKIP: *//')") ;;
	*) failed=$((failed + 1)); summary+=("kernel $k: FAIL on ${rel:-?}, exit $rc (${secs}s; logs in $BUILD/test-logs/xdp-kernels-$k*)") ;;
	esac
done
echo "=== kernel matrix"
printf 'RESULT: %s\n' "${summary[@]}"
[ $failed -eq 0 ] || exit 1
[ $pass -gt 0 ] || { echo "SKIP: no kernel could be booted (${summary[*]})"; exit 77; }
exit 0
