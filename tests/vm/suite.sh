# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=bash
# Sourced by the tests that run a suite in a guest (tests/test_*_vm.sh,
# tests/test_xdp_kernels.sh): the script runs itself with --suite inside the
# guest (vm_test_run, on the host), and the suite uses the rest.  Brings
# tests/vm/lib.sh, and sets ROOT (the repository) and BUILD (default build).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROOT=$(cd "$VM_HOME/../.." && pwd)
BUILD=${BUILD:-build}

# ---- on the host ----------------------------------------------------------------

# vm_test_need FILE...: exit 77 naming the first that is not built, or the
# reason no guest can be booted here
vm_test_need() {
	local f why
	for f; do
		[ -x "$f" ] || { echo "SKIP: $f not built (make)"; exit 77; }
	done
	if why=$(vm_missing); then echo "SKIP: no guest can be booted here: $why"; exit 77; fi
}

# vm_test_budget SCRIPT MARGIN: the seconds of the script's "# timeout: S"
# header line (the runner's limit for it) less MARGIN
vm_test_budget() {
	echo $(( $(sed -n 's/^# timeout: *//p' "$1" | head -1) - $2 ))
}

# vm_test_run NAME VM-EXEC-OPTIONS...: `vm-exec.sh OPTIONS -- bash $0
# --suite`, its console and run files kept in $BUILD/test-logs/NAME/ and its
# output (also on stdout) in $BUILD/test-logs/NAME.out.  Returns the suite's
# status (0, 1, 77); a guest that failed or ran out of time is 1, said so.
vm_test_run() {
	local name=$1 rc; shift
	mkdir -p "$BUILD/test-logs"
	rm -rf "$BUILD/test-logs/$name"
	"$VM_HOME/vm-exec.sh" -q "$@" --logdir "$BUILD/test-logs/$name" -- bash "$0" --suite 2>&1 |
		tee "$BUILD/test-logs/$name.out"
	rc=${PIPESTATUS[0]}
	case $rc in
	0|1|77) return "$rc" ;;
	124) echo "FAIL: the guest ran out of time (logs in $BUILD/test-logs/$name)" ;;
	125) echo "FAIL: the guest failed (logs in $BUILD/test-logs/$name)" ;;
	*) echo "FAIL: the guest run ended with $rc (logs in $BUILD/test-logs/$name)" ;;
	esac
	return 1
}

# ---- inside the guest (--suite) ------------------------------------------------------

# vm_suite_begin NAME: a temporary directory $tmp, removed at exit with the
# testbed NAME; the test NICs in VM_NIC1, VM_NIC2 (a failure without two)
vm_suite_begin() {
	tbn=$1 failures=0
	tmp=$(mktemp -d "/tmp/flit-$1.XXXXXX")
	trap 'jobs -p | xargs -r kill 2>/dev/null; "$ROOT/tools/testbed" down --name "$tbn" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
	echo "# kernel $(uname -r)"
	read -r VM_NIC1 VM_NIC2 _ <<<"${FLIT_VM_NICS:-}"
	[ -n "${VM_NIC2:-}" ] ||
		{ echo "FAIL: the guest has no two test NICs (FLIT_VM_NICS='${FLIT_VM_NICS:-}')"; exit 1; }
}

# vm_testbed_up: hosts $tbn-h1 and $tbn-h2, cabled by the two test NICs
# (eth0 10.77.0.1 <-> 10.77.0.2); exits 1 if that fails
vm_testbed_up() {
	"$ROOT/tools/testbed" up --name "$tbn" --hosts 2 --link direct --devices "$VM_NIC1,$VM_NIC2" \
		>"$tmp/tb.log" 2>&1 || { echo "FAIL: testbed over $VM_NIC1,$VM_NIC2:"; show "$tmp/tb.log"; exit 1; }
	echo "# $(cat "$tmp/tb.log"); driver $(h 1 ethtool -i eth0 2>/dev/null | sed -n 's/^driver: //p')"
}

# vm_suite_end: exit 0 if no check failed, else 1
vm_suite_end() {
	[ "$failures" -eq 0 ] || { echo "$failures check(s) failed on $(uname -r)"; exit 1; }
	echo "all checks pass on $(uname -r)"
	exit 0
}

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
show() { sed 's/^/    | /' "$@" | tail -20; }
h() { local i=$1; shift; nsenter --net="/run/netns/$tbn-h$i" -- "$@"; }
got() { grep -c ' seq=' "$1"; }

# in_order FILE N TRANSPORT: FILE holds flit-sub's lines of messages
# seq=0..N-1, payload seq+1, from a TRANSPORT: source (nothing lost)
in_order() {
	awk -v n="$2" -v t="$3" 'BEGIN { k = 0 }
		/ seq=/ { if ($2 != "seq=" k || $3 !~ "^source=" t ":" || $5 != "\"" k + 1 "\"") { bad = 1; exit }
		          k++ }
		END { exit bad || k != n }' "$1"
}

# csum_errors HOST: the UDP InCsumErrors of the host
csum_errors() {
	h "$1" awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "InCsumErrors") c = i; h = 1 }
		else print $c }' /proc/net/snmp
}

# stream NAME FROM PUB_T TO SUB_T N [--stop] [CONFIG-LINE...]: flit-sub
# -t SUB_T in host TO first, then flit-pub -t PUB_T in host FROM waiting
# for it, N messages on eth0 (and the config lines, for both): every one
# must arrive, in order.  The source lingers until the subscriber has them
# all (NAKs may need it).  --stop: the subscriber is stopped (SIGSTOP) for
# 1 s once it has a quarter.
stream() {
	local name=$1 from=$2 pt=$3 to=$4 st=$5 n=$6 stop= topic t0 c sp pp rc i sub
	shift 6
	[ "${1:-}" = --stop ] && { stop=1; shift; }
	local cfg=(-C context.udp.interface=eth0)
	for c; do cfg+=(-C "$c"); done
	topic="$tbn.$pt.$st.$RANDOM"
	[ -f "$tmp/msgs.$n" ] || seq 1 "$n" >"$tmp/msgs.$n"
	t0=$(now_ms)
	h "$to" timeout 200 "$ROOT/$BUILD/tools/flit-sub" -t "$st" "${cfg[@]}" -n "$n" -T 180 "$topic" \
		>"$tmp/sub.out" 2>"$tmp/sub.err" &
	sp=$!
	h "$from" timeout 200 "$ROOT/$BUILD/tools/flit-pub" -t "$pt" "${cfg[@]}" -w 1 -T 120 -l 150000 \
		-f "$tmp/msgs.$n" "$topic" >"$tmp/pub.out" 2>"$tmp/pub.err" &
	pp=$!
	if [ -n "$stop" ]; then
		i=0
		while [ "$(got "$tmp/sub.out")" -lt $((n / 4)) ] && [ $i -lt 600 ] && kill -0 "$sp" 2>/dev/null; do
			sleep 0.1; i=$((i + 1))
		done
		# (the subscriber is timeout's child, in h()'s nsenter)
		sub=$(pgrep -f -- "flit-sub -t $st .*$topic" | tail -1)
		if [ -n "$sub" ] && kill -STOP "$sub"; then
			sleep 1; kill -CONT "$sub"
			echo "# $name: subscriber stopped for 1 s at $(got "$tmp/sub.out") messages"
		else
			fail "$name: could not stop the subscriber"
		fi
	fi
	wait "$sp"; rc=$?
	if ! kill -0 "$pp" 2>/dev/null; then
		wait "$pp"; fail "$name: flit-pub ended (exit $?) before the subscriber"; show "$tmp/pub.err"
		return 1
	fi
	pkill -TERM -f -- "flit-pub -t $pt .*$topic"; wait "$pp"
	if [ $rc -eq 0 ] && in_order "$tmp/sub.out" "$n" "$st"; then
		ok "$name: $n messages in order ($(grep -m1 -o 'source=[^ ]*' "$tmp/sub.out"), $(( $(now_ms) - t0 )) ms)"
	else
		fail "$name: flit-sub exited $rc, $(got "$tmp/sub.out") of $n messages"
		show "$tmp/sub.err"; grep -v ' seq=' "$tmp/sub.out" | head -5 | sed 's/^/    | /'
		return 1
	fi
}
