#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# test_xdp_zerocopy_vm — the xdp transport on NICs that bind AF_XDP in
# zero-copy mode, and the same checks in copy mode on the same NICs (the
# code paths that differ: bind flags, need_wakeup on transmit, the copy-mode
# transmit budget, the frames the kernel holds):
#
#   guest: Debian's newest kernel (trixie-backports, tests/vm/), two modern
#   virtio-net-pci NICs behind the platform IOMMU interface (vm-exec.sh
#   --zerocopy: the virtio_net of Linux 6.15+ advertises xsk-zerocopy there)
#   on one qemu hub; tools/testbed --link direct --devices moves them into
#   h1 and h2 (eth0 10.77.0.1 <-> 10.77.0.2), the XDP program in native mode.
#
# For zero-copy (context.xdp.zerocopy = on: a refusal is an error, never a
# silent copy mode) and then copy mode (= off):
#   - the tools' set-up lines name the mode ("zero-copy" / "copy mode"):
#     flit-pong's header, flit-pub -v, flit-sub -v;
#   - 100,000 messages h1 -> h2 and 100,000 h2 -> h1 (20,000 in copy
#     mode, which runs the same code with fewer), every one in order,
#     through a UMEM of 256 frames and rings of 64: the fill and completion
#     rings wrap thousands of times, and a frame not given back would stall
#     the stream within 256 messages;
#   - back-pressure: the subscriber stopped (SIGSTOP) for 1 s under a
#     stream of 100,000, then resumed: every message arrives, in order (the kernel
#     drops what the full rx ring cannot take; NAKs recover it), and its
#     frames still cycle (a second stream after it);
#   - kernel udp -> xdp and xdp -> kernel udp, UDP checksum errors unchanged;
#   - a subscriber killed (SIGKILL) and a new one on the same queue (its
#     zero-copy bind may meet EBUSY while the old socket is torn down).
#
# Skips (exit 77, with the reason) where no guest can be booted, or where
# the guest's NICs do not bind zero-copy (then nothing here can be checked).
#
# timeout: 360
set -u -o pipefail
. "$(dirname "$0")/vm/suite.sh"
D=$ROOT/$BUILD/tools
N=${FLIT_ZC_MESSAGES:-100000}     # per stream in zero-copy mode
NC=${FLIT_COPY_MESSAGES:-20000}   # in copy mode, where the same code paths need fewer

if [ "${1:-}" = --suite ]; then
	vm_suite_begin zc
	"$ROOT/$BUILD/loader/flit-loader" status "$VM_NIC1" 2>&1 | grep -E '^ *(xdp|zero-copy):' | sed 's/^ */# /'
	if ! "$ROOT/$BUILD/loader/flit-loader" status "$VM_NIC1" 2>&1 | grep -q '^ *zero-copy: *yes'; then
		echo "SKIP: $VM_NIC1 does not offer AF_XDP zero-copy on $(uname -r) (flit-loader status)"
		exit 77
	fi
	vm_testbed_up

	# The small UMEM: 256 frames of which the sending socket gives half to
	# transmit, rings of 64
	small=("context.xdp.frames = 256" "context.xdp.ring_size = 64")

	# every message must arrive: a subscriber overrun under TCG loses
	# datagrams, and NAKs get time and retained data to repair them
	rel=("context.xdp.mode = native" "receiver.udp.nak_timeout_ms = 60000"
	     "source.udp.retain = 64M" "source.udp.retain_ms = 120000")

	for zc in on off; do
		mode=$([ $zc = on ] && echo zero-copy || echo "copy mode")
		n=$([ $zc = on ] && echo "$N" || echo "$NC")
		echo "== context.xdp.zerocopy = $zc"
		zcfg=("context.xdp.zerocopy = $zc" "${rel[@]}")
		# the tools' set-up line
		if timeout 120 "$D/flit-pong" -t xdp --netns "$tbn-h1" --peer-netns "$tbn-h2" -n 2000 -w 200 -T 60 \
			-C context.udp.interface=eth0 -C "context.xdp.mode = native" -C "context.xdp.zerocopy = $zc" \
			>"$tmp/pong.out" 2>"$tmp/pong.err"; then
			line=$(grep -m1 -i 'xdp.*copy' "$tmp/pong.out" "$tmp/pong.err" | cut -d: -f2-)
			if [ $zc = on ] && grep -q 'zero-copy' <<<"$line" && ! grep -q 'copy mode' <<<"$line"; then
				ok "flit-pong's set-up line says zero-copy:$line"
			elif [ $zc = off ] && grep -q 'copy mode' <<<"$line"; then
				ok "flit-pong's set-up line says copy mode:$line"
			else
				fail "flit-pong's set-up line with zerocopy = $zc:$line"; show "$tmp/pong.err"
			fi
		else
			fail "flit-pong -t xdp, zerocopy = $zc: exit $?"; show "$tmp/pong.err"
			if [ $zc = on ] && grep -q "zero-copy bind.*refused" "$tmp/pong.err"; then
				echo "SKIP: these NICs refuse AF_XDP zero-copy on $(uname -r): $(grep -m1 -o 'zero-copy bind.*' "$tmp/pong.err")"
				exit 77
			fi
		fi
		stream "$mode: h1 -> h2, small UMEM" 1 xdp 2 xdp "$n" "${zcfg[@]}" "${small[@]}"
		stream "$mode: h2 -> h1, small UMEM" 2 xdp 1 xdp "$n" "${zcfg[@]}" "${small[@]}"
		stream "$mode: subscriber stopped 1 s" 1 xdp 2 xdp "$N" --stop "${zcfg[@]}"
		stream "$mode: the stream after it" 1 xdp 2 xdp 2000 "${zcfg[@]}"
		stream "$mode: kernel udp -> xdp" 1 udp 2 xdp 20000 "${zcfg[@]}"
		e0=$(csum_errors 2)
		stream "$mode: xdp -> kernel udp" 1 xdp 2 udp 20000 "${zcfg[@]}"
		e1=$(csum_errors 2)
		if [ -n "$e0" ] && [ "$e0" = "$e1" ]; then ok "$mode: h2's UDP InCsumErrors unchanged ($e1)"
		else fail "$mode: h2's UDP InCsumErrors $e0 -> $e1"; fi

		# a subscriber killed, a new one on the same queue (its bind may
		# meet EBUSY while the old socket is torn down)
		topic="zc.restart.$RANDOM"
		cfg=(-C context.udp.interface=eth0)
		for c in "${zcfg[@]}"; do cfg+=(-C "$c"); done
		h 2 timeout 100 "$D/flit-sub" -v -t xdp "${cfg[@]}" -T 90 "$topic" >"$tmp/s1.out" 2>"$tmp/s1.err" &
		s1=$!
		h 1 timeout 100 "$D/flit-pub" -v -t xdp "${cfg[@]}" -w 1 -T 60 -l 0 "$topic" a b c >"$tmp/p1.out" 2>&1 ||
			fail "$mode: flit-pub before the restart: $(tail -1 "$tmp/p1.out")"
		# their -v set-up lines name the mode too
		want=$([ $zc = on ] && echo '; zero-copy,' || echo '; copy mode')
		for f in "$tmp/s1.err" "$tmp/p1.out"; do
			line=$(grep -m1 '^flit-[a-z]*: set-up: xdp on eth0' "$f")
			if grep -qF -- "$want" <<<"$line"; then ok "$mode: ${line%%:*} -v: set-up line says '${want#; }'"
			else fail "$mode: ${f##*/}: set-up line without '${want#; }': ${line:-none}"; fi
		done
		sleep 0.5
		pkill -KILL -f -- "flit-sub .*$topic" || fail "$mode: no subscriber to kill"; wait "$s1" 2>/dev/null
		[ "$(got "$tmp/s1.out")" = 3 ] && ok "$mode: a subscriber got 3 messages and was killed" ||
			fail "$mode: the subscriber to be killed got $(got "$tmp/s1.out") of 3"
		stream "$mode: a new subscriber on the killed one's queue" 1 xdp 2 xdp 1000 "${zcfg[@]}"
	done
	vm_suite_end
fi

vm_test_need "$D/flit-pub" "$D/flit-sub" "$D/flit-pong" "$ROOT/$BUILD/loader/flit-loader"
vm_test_run xdp-zerocopy-vm --kernel "${FLIT_VM_KERNEL:-newest}" --nics 2 --zerocopy --timeout "$(vm_test_budget "$0" 6)"
