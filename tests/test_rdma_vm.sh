#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# test_rdma_vm — flit's RDMA tests against a real verbs provider.
#
# The suite: the harness's verbs_smoke (tests/rdma/verbs_smoke.c: RC SEND,
# SEND with immediate, RDMA WRITE/READ, UD through an address handle), then
# $BUILD/tests/test_rdma (the rdma transport's cmocka tests) when it is built,
# $BUILD/tests/test_rdma_mc (rdma multicast: source.rdma.mode = multicast),
# and the tools over both.
# Where it runs:
#   - on this host, when `ibv_devices` lists a device (real hardware, or an
#     rxe/siw device set up by hand); FLIT_RDMA_DEVICE, FLIT_RDMA_PORT and
#     FLIT_RDMA_GID_INDEX choose the device, port and GID (docs/RDMA.md);
#   - else in a Soft-RoCE guest: Debian's kernel with rdma_rxe under qemu,
#     chrooted on this host's / (tests/rdma/vm-exec.sh; image cached in
#     FLIT_RDMA_VM_CACHE, default $BUILD/rdma-vm).  Skips, naming what is
#     missing, without root, qemu, a static busybox, or the kernel package.
# FLIT_RDMA_TEST_MODE=host|vm forces one of the two.  The whole run stays
# inside the runner's limit (the "timeout:" line below, or TEST_TIMEOUT if
# larger; FLIT_RDMA_VM_TIMEOUT overrides the guest's share): the guest is
# stopped, with the output so far, before the runner's own timeout would hit.
# Exit: the suite's status (0 pass, 1 fail, 77 skip with "SKIP: reason");
# a guest that fails to boot or times out is a failure.
# timeout: 300
set -u -o pipefail
BUILD=${BUILD:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/rdma/lib.sh"
SMOKE_SRC=$HERE/rdma/verbs_smoke.c
SMOKE=$BUILD/tests/rdma/verbs_smoke
TEST_RDMA=$BUILD/tests/test_rdma
TEST_RDMA_MC=$BUILD/tests/test_rdma_mc

# The tools as a user runs them over rdma (on the device's IPv4 address,
# the subscriber finding the source by receiver.rdma.static): every line
# flit-sub prints, the subscriber started first (with and without flit-pub
# waiting for it: from the first message either way) and second (late
# join: flit-pub keeps what it sends, flit-sub asks for it).
tools_rdma() {
	local D=$BUILD/tools ip port=14577 f=0 n=0 tmp
	ip=${FLIT_RDMA_IP:-$(ip -4 -o addr show scope global | awk '{ sub(/\/.*/, "", $4); print $4; exit }')}
	[ -n "$ip" ] || { echo "FAIL: no IPv4 address for the RDMA device"; return 1; }
	tmp=$(mktemp -d /tmp/flit-rdma-tools.XXXXXX)
	local sub=("$D/flit-sub" -t rdma -C "receiver.rdma.static = $ip:$port" -e -T 30)
	local pub=("$D/flit-pub" -t rdma -C "context.rdma.port = $port" -T 30)
	# rdma_case NAME ORDER MARK PUB_ARGS...: MARK "late-join " or ""
	rdma_case() {
		local name=$1 order=$2 mark=$3 topic=t.rd.$((++n)); shift 3
		if [ "$order" = sub-first ]; then
			"${sub[@]}" "$topic" >"$tmp/out" 2>"$tmp/err" & local s=$!
			sleep 1
			"${pub[@]}" "$@" "$topic" one two three >"$tmp/pub" 2>&1 || echo "pub exit $?" >>"$tmp/err"
			wait $s || echo "sub exit $?" >>"$tmp/err"
		else
			"${pub[@]}" "$@" "$topic" one two three >"$tmp/pub" 2>&1 & local p=$!
			sleep 1
			"${sub[@]}" "$topic" >"$tmp/out" 2>"$tmp/err" || echo "sub exit $?" >>"$tmp/err"
			wait $p || echo "pub exit $?" >>"$tmp/err"
		fi
		local want got
		want=$(printf '%s BOS\n%s seq=0 len=3 %s"one"\n%s seq=1 len=3 %s"two"\n%s seq=2 len=5 %s"three"\n%s EOS' \
			"$topic" "$topic" "$mark" "$topic" "$mark" "$topic" "$mark" "$topic")
		got=$(sed -E 's/ source=[^ ]+//' "$tmp/out")
		if [ "$got" = "$want" ] && ! grep -q 'exit' "$tmp/err"; then
			echo "ok: rdma $name"
		else
			echo "FAIL: rdma $name"; sed 's/^/    | /' "$tmp/out" "$tmp/err" "$tmp/pub" | head -20; f=$((f + 1))
		fi
	}
	rdma_case "subscriber first, flit-pub -w 1" sub-first "" -w 1
	# (the subscriber retries connecting, backing off: flit-pub lingers for it)
	rdma_case "subscriber first, flit-pub not waiting" sub-first "" -l 4000
	rdma_case "flit-pub first and lingering: late join" pub-first "late-join " -l 8000
	# multicast (source.rdma.mode = multicast): found through the
	# resolver channel, no static address; two subscribers
	sub=("$D/flit-sub" -t rdma -C "context.rdma.address = $ip" -e -T 30)
	pub=("$D/flit-pub" -t rdma -C "context.rdma.address = $ip" -C "source.rdma.mode = multicast" -T 30)
	rdma_case "multicast, subscriber first, flit-pub -w 1" sub-first "" -w 1
	rdma_case "multicast, flit-pub first and lingering: late join" pub-first "late-join " -l 8000
	# many topics of one session over one connection: flit-thru --topics
	# (the receiver subscribes to each, by the static map), every message
	# of every topic in order, batched and not
	local a
	for a in "--topics 1000 -n 20000 --batch" "--topics 100 -n 3000"; do
		# shellcheck disable=SC2086
		if "$D/flit-thru" -t rdma -s 32 $a >"$tmp/thru" 2>&1 &&
		   grep -q '^receiver 1 .* gaps 0, dupes 0, lost 0' "$tmp/thru"; then
			echo "ok: rdma flit-thru $a"
		else
			echo "FAIL: rdma flit-thru $a"; sed 's/^/    | /' "$tmp/thru" | head -20; f=$((f + 1))
		fi
	done
	rm -rf "$tmp"
	return $f
}

# --suite: run the programs here, on whatever device this machine (host or
# guest) has; called by the main part below, directly or through vm-exec.sh.
if [ "${1:-}" = --suite ]; then
	ulimit -l unlimited 2>/dev/null ||
		echo "# ulimit -l: $(ulimit -l) KiB (memory registration may fail; docs/RDMA.md)"
	echo "# devices: $(rdma_host_devices | tr '\n' ' ')"
	echo "== verbs_smoke"
	"$SMOKE"; src=$?
	if [ ! -x "$TEST_RDMA" ]; then
		echo "# $TEST_RDMA not built: the harness's verbs smoke test only"
		exit $src
	fi
	echo "== test_rdma"
	"$TEST_RDMA"; trc=$?
	if [ $src -ne 0 ] && [ $src -ne 77 ]; then
		echo "FAIL: verbs_smoke exit $src (the verbs provider itself fails here)"
		exit 1
	fi
	[ $trc -eq 0 ] || exit $trc
	if [ -x "$TEST_RDMA_MC" ]; then
		# 100,000 messages a fan-out case here (the suite's time);
		# FLIT_RDMA_MC_COUNT=1000000 for the issue's million
		echo "== test_rdma_mc"
		FLIT_RDMA_MC_COUNT=${FLIT_RDMA_MC_COUNT:-100000} "$TEST_RDMA_MC" || exit $?
	fi
	echo "== flit-pub -> flit-sub -t rdma"
	tools_rdma
	exit $?
fi

T0=$(now_ms)

# the smoke program: rebuilt when its source is newer
if [ ! -x "$SMOKE" ] || [ "$SMOKE_SRC" -nt "$SMOKE" ]; then
	[ -e /usr/include/infiniband/verbs.h ] ||
		{ echo "SKIP: libibverbs headers missing (apt-get install libibverbs-dev)"; exit 77; }
	mkdir -p "$(dirname "$SMOKE")"
	san=; [ "${SAN:-0}" = 1 ] && san="-fsanitize=address,undefined -fno-omit-frame-pointer"
	${CC:-cc} -std=gnu11 -O2 -g -Wall -Wextra -Werror $san -o "$SMOKE" "$SMOKE_SRC" -libverbs ||
		{ echo "FAIL: cannot build $SMOKE"; exit 1; }
fi

mode=${FLIT_RDMA_TEST_MODE:-auto}
case $mode in
auto) if [ -n "$(rdma_host_devices)" ]; then mode=host; else mode=vm; fi ;;
host|vm) ;;
*) echo "FAIL: FLIT_RDMA_TEST_MODE='$mode' (auto, host or vm)"; exit 1 ;;
esac

if [ "$mode" = host ]; then
	echo "# on this host's RDMA device(s): $(rdma_host_devices | tr '\n' ' ')"
	exec bash "$0" --suite
fi

if why=$(rdma_vm_missing); then
	echo "SKIP: no RDMA device here, and no Soft-RoCE guest: $why"
	exit 77
fi
# the runner's limit is the header's "timeout:" line (TEST_TIMEOUT if larger)
hdr=$(sed -n 's/^# timeout: *//p' "$0" | head -1)
[ "${TEST_TIMEOUT:-0}" -gt "$hdr" ] && hdr=$TEST_TIMEOUT
budget=${FLIT_RDMA_VM_TIMEOUT:-$(( hdr - 6 ))}
echo "# no RDMA device on this host: running the suite in a Soft-RoCE guest (limit ${budget}s)"
out=$("$HERE/rdma/build-image.sh" 2>&1); rc=$?
echo "$out" | sed 's/^/# /'
case $rc in
0) ;;
77) echo "$out" | grep '^SKIP:' | tail -1; exit 77 ;;
*) echo "FAIL: the guest image could not be built (exit $rc)"; exit 1 ;;
esac
left=$(( budget - ($(now_ms) - T0) / 1000 ))
[ "$left" -ge 30 ] || left=30
rm -rf "$BUILD/test-logs/rdma-vm"
"$HERE/rdma/vm-exec.sh" --timeout "$left" --logdir "$BUILD/test-logs/rdma-vm" -- bash "$0" --suite
rc=$?
secs=$(( ($(now_ms) - T0) / 1000 ))
case $rc in
0|1|77) ;;
124) echo "FAIL: the guest ran out of time after ${secs}s (limit ${left}s: raise TEST_TIMEOUT;" \
          "console in $BUILD/test-logs/rdma-vm)"; exit 1 ;;
125) echo "FAIL: the Soft-RoCE guest failed (console in $BUILD/test-logs/rdma-vm)"; exit 1 ;;
esac
echo "# guest run: ${secs}s in all, exit $rc"
exit $rc
