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
#   - flit-pong's set-up line names the mode ("zero-copy" / "copy mode");
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
BUILD=${BUILD:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
. "$HERE/vm/lib.sh"
D=$ROOT/$BUILD/tools
TB=$ROOT/tools/testbed
N=${FLIT_ZC_MESSAGES:-100000}     # per stream in zero-copy mode
NC=${FLIT_COPY_MESSAGES:-20000}   # in copy mode, where the same code paths need fewer

if [ "${1:-}" = --suite ]; then
	tmp=$(mktemp -d /tmp/flit-zc.XXXXXX)
	tbn=zc
	cleanup() { jobs -p | xargs -r kill 2>/dev/null; "$TB" down --name "$tbn" >/dev/null 2>&1; rm -rf "$tmp"; }
	trap cleanup EXIT
	failures=0
	fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
	ok() { echo "ok: $*"; }
	show() { sed 's/^/    | /' "$@" | tail -12; }
	h() { local i=$1; shift; nsenter --net="/run/netns/$tbn-h$i" -- "$@"; }
	echo "# kernel $(uname -r)"
	read -r n1 n2 <<<"${FLIT_VM_NICS:-}"
	[ -n "${n2:-}" ] || { echo "FAIL: the guest has no two test NICs (FLIT_VM_NICS='${FLIT_VM_NICS:-}')"; exit 1; }
	"$ROOT/$BUILD/loader/flit-loader" status "$n1" 2>&1 | grep -E '^ *(xdp|zero-copy):' | sed 's/^ */# /'
	if ! "$ROOT/$BUILD/loader/flit-loader" status "$n1" 2>&1 | grep -q '^ *zero-copy: *yes'; then
		echo "SKIP: $n1 does not offer AF_XDP zero-copy on $(uname -r) (flit-loader status)"
		exit 77
	fi
	"$TB" up --name "$tbn" --hosts 2 --link direct --devices "$n1,$n2" >"$tmp/tb.log" 2>&1 ||
		{ echo "FAIL: testbed over $n1,$n2:"; show "$tmp/tb.log"; exit 1; }

	# The small UMEM: 256 frames of which the sending socket gives half to
	# transmit, rings of 64
	small=(-C "context.xdp.frames = 256" -C "context.xdp.ring_size = 64")

	# in_order FILE N TRANSPORT: FILE holds flit-sub's lines seq=0..N-1,
	# payload seq+1, from a TRANSPORT: source
	in_order() {
		awk -v n="$2" -v t="$3" 'BEGIN { k = 0 }
			/ seq=/ { if ($2 != "seq=" k || $3 !~ "^source=" t ":" || $5 != "\"" k + 1 "\"") { bad = 1; exit }
			          k++ }
			END { exit bad || k != n }' "$1"
	}
	got() { grep -c ' seq=' "$1"; }

	# stream NAME FROM PUB_T TO SUB_T N [--stop] [CFG...]: flit-sub in host
	# TO first, flit-pub in FROM waiting for it; with --stop the subscriber
	# is stopped for 1 s once it has 1/4 of the messages
	stream() {
		local name=$1 from=$2 pt=$3 to=$4 st=$5 n=$6 stop= topic t0; shift 6
		[ "${1:-}" = --stop ] && { stop=1; shift; }
		topic="zc.$pt.$st.$RANDOM"
		# (every message must arrive: a subscriber overrun under TCG loses
		# datagrams, and NAKs get time and retained data to repair them)
		local cfg=(-C context.udp.interface=eth0 -C "context.xdp.mode = native"
			   -C "receiver.udp.nak_timeout_ms = 60000" -C "source.udp.retain = 64M"
			   -C "source.udp.retain_ms = 120000" "$@")
		[ -f "$tmp/msgs.$n" ] || seq 1 "$n" >"$tmp/msgs.$n"
		t0=$(now_ms)
		h "$to" timeout 200 "$D/flit-sub" -t "$st" "${cfg[@]}" -n "$n" -T 180 "$topic" >"$tmp/sub.out" 2>"$tmp/sub.err" &
		local sp=$!
		# the source lingers until the subscriber has everything
		h "$from" timeout 200 "$D/flit-pub" -t "$pt" "${cfg[@]}" -w 1 -T 120 -l 150000 \
			-f "$tmp/msgs.$n" "$topic" >"$tmp/pub.out" 2>"$tmp/pub.err" &
		local pp=$!
		if [ -n "$stop" ]; then
			local i=0
			while [ "$(got "$tmp/sub.out")" -lt $((n / 4)) ] && [ $i -lt 600 ] && kill -0 "$sp" 2>/dev/null; do
				sleep 0.1; i=$((i + 1))
			done
			# (the subscriber is timeout's child, in h()'s nsenter)
			local sub; sub=$(pgrep -f -- "flit-sub -t $st .*$topic" | tail -1)
			if [ -n "$sub" ] && kill -STOP "$sub"; then
				sleep 1; kill -CONT "$sub"
				echo "# $name: subscriber stopped for 1 s at $(got "$tmp/sub.out") messages"
			else
				fail "$name: could not stop the subscriber"
			fi
		fi
		wait "$sp"; local rc=$?
		if ! kill -0 "$pp" 2>/dev/null; then
			wait "$pp"; fail "$name: flit-pub ended (exit $?) before the subscriber"; show "$tmp/pub.err"
			return 1
		fi
		pkill -TERM -f -- "flit-pub -t $pt .*$topic"; wait "$pp"
		if [ $rc -eq 0 ] && in_order "$tmp/sub.out" "$n" "$st"; then
			ok "$name: $n messages in order ($(( $(now_ms) - t0 )) ms)"
		else
			fail "$name: flit-sub exited $rc, $(got "$tmp/sub.out") of $n messages"
			show "$tmp/sub.err"; grep -v ' seq=' "$tmp/sub.out" | head -5 | sed 's/^/    | /'
			return 1
		fi
	}
	csum_errors() { h "$1" awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "InCsumErrors") c = i; h = 1 } else print $c }' /proc/net/snmp; }

	for zc in on off; do
		mode=$([ $zc = on ] && echo zero-copy || echo "copy mode")
		n=$([ $zc = on ] && echo "$N" || echo "$NC")
		echo "== context.xdp.zerocopy = $zc"
		zcfg=(-C "context.xdp.zerocopy = $zc")
		# the tools' set-up line
		if timeout 120 "$D/flit-pong" -t xdp --netns "$tbn-h1" --peer-netns "$tbn-h2" -n 2000 -w 200 -T 60 \
			-C context.udp.interface=eth0 -C "context.xdp.mode = native" "${zcfg[@]}" >"$tmp/pong.out" 2>"$tmp/pong.err"; then
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

		# a subscriber killed, a new one on the same queue
		topic="zc.restart.$RANDOM"
		cfg=(-C context.udp.interface=eth0 -C "context.xdp.mode = native" "${zcfg[@]}")
		h 2 timeout 100 "$D/flit-sub" -t xdp "${cfg[@]}" -T 90 "$topic" >"$tmp/s1.out" 2>"$tmp/s1.err" &
		s1=$!
		h 1 timeout 100 "$D/flit-pub" -t xdp "${cfg[@]}" -w 1 -T 60 -l 0 "$topic" a b c >"$tmp/p1.out" 2>&1 ||
			fail "$mode: flit-pub before the restart: $(tail -1 "$tmp/p1.out")"
		sleep 0.5
		pkill -KILL -f -- "flit-sub -t xdp .*$topic"; wait "$s1" 2>/dev/null
		seq 1 1000 >"$tmp/m1k"
		h 2 timeout 100 "$D/flit-sub" -t xdp "${cfg[@]}" -n 1000 -T 90 "$topic" >"$tmp/sub.out" 2>"$tmp/sub.err" &
		s2=$!
		h 1 timeout 100 "$D/flit-pub" -t xdp "${cfg[@]}" -w 1 -T 60 -f "$tmp/m1k" "$topic" >"$tmp/p2.out" 2>&1
		wait "$s2"; rc=$?
		if [ "$(got "$tmp/s1.out")" = 3 ] && [ $rc -eq 0 ] && in_order "$tmp/sub.out" 1000 xdp; then
			ok "$mode: subscriber killed after 3 messages; a new one on the same queue gets 1000 in order"
		else
			fail "$mode: restart: first subscriber $(got "$tmp/s1.out")/3, second exit $rc with $(got "$tmp/sub.out")/1000"
			show "$tmp/sub.err"
		fi
	done
	[ $failures -eq 0 ] || { echo "$failures check(s) failed on $(uname -r)"; exit 1; }
	echo "all checks pass on $(uname -r)"
	exit 0
fi

for b in "$D/flit-pub" "$D/flit-sub" "$D/flit-pong" "$ROOT/$BUILD/loader/flit-loader"; do
	[ -x "$b" ] || { echo "SKIP: $b not built (make)"; exit 77; }
done
if why=$(vm_missing); then echo "SKIP: no guest can be booted here: $why"; exit 77; fi
tmo=$(( $(sed -n 's/^# timeout: *//p' "$0" | head -1) - 6 ))
mkdir -p "$BUILD/test-logs"
rm -rf "$BUILD/test-logs/xdp-zerocopy-vm"
"$HERE/vm/vm-exec.sh" -q --kernel "${FLIT_VM_KERNEL:-newest}" --nics 2 --zerocopy --timeout "$tmo" \
	--logdir "$BUILD/test-logs/xdp-zerocopy-vm" -- bash "$0" --suite
