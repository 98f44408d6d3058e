#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# vm-exec.sh — run a command of this host inside a throwaway guest (one of
# Debian's kernels under qemu) and return its exit code.  See docs/VM.md;
# the Soft-RoCE set-up (--rdma) is docs/RDMA.md.
#
#   tests/vm/vm-exec.sh [options] -- CMD [ARGS...]
#
#   --kernel SPEC   the guest's kernel: 6.1 (Debian 12's, the default), 6.12
#                   (bookworm-backports), newest (trixie-backports) or a
#                   linux-image-...-amd64 package (tests/vm/lib.sh)
#   --rdma          a Soft-RoCE device rxe0 on the guest's eth0
#   --nics N        N more NICs (N 0..4; default 0), all on one qemu hub of
#                   their own (they see each other, nothing else), named
#                   xnic1..xnicN in the guest, down and without an address:
#                   for tests that build their own topology (tools/testbed
#                   up --devices xnic1,xnic2)
#   --nic-model M   those NICs' model: virtio (virtio-net-pci, the default)
#                   or e1000e
#   --zerocopy      those NICs as modern virtio devices behind the platform
#                   IOMMU interface (disable-legacy=on,iommu_platform=on):
#                   the virtio_net of Linux 6.15+ binds AF_XDP zero-copy there
#   --timeout S     wall-clock limit of the whole run: image check, boot,
#                   command, power-off (default 300).  The guest's own
#                   watchdog stops the command 25 s before, so its output
#                   and a clean verdict still come back.
#   --two           two guests joined by a qemu dgram link (unix datagram
#                   sockets: no host interface, no host address): CMD runs in
#                   guest 1 (192.168.50.1), --peer-cmd in guest 2
#                   (192.168.50.2); each waits until the other answers a ping
#   --peer-cmd LINE bash command line for guest 2 (same cwd and environment
#                   as CMD); without it guest 2 is up but idle.  Its output is
#                   shown prefixed "[peer] "; it gets 30 s after CMD ends
#   --out DIR       host directory the command may write to, at the same path
#                   (everything else it writes lands in a RAM overlay and is
#                   discarded)
#   --mem MB        guest memory (default 1024; 768 each with --two)
#   --smp N         guest CPUs (default 2; 1 each with --two)
#   --mtu N         the guest's eth0 MTU (default 1500: rxe0's path MTU is
#                   then 1024; 4200 or more gives the 4096 of a jumbo-frame
#                   RoCE fabric)
#   --logdir DIR    keep the run's files (console logs, output) in DIR
#   --shell         console on this terminal, a shell after the command
#   -q, --quiet     no progress lines of the harness
#
# Inside the guest the command runs chrooted into this host's / (read-only
# 9p with a tmpfs overlay; bpffs at /sys/fs/bpf), in the caller's cwd, with
# the caller's exported environment, ulimit -l unlimited, and FLIT_VM=1
# FLIT_VM_GUEST=1|2 FLIT_VM_IP FLIT_VM_PEER_IP FLIT_VM_NICS="xnic1 ..."
# FLIT_VM_NIC_MODEL; with --rdma also FLIT_RDMA_VM=1 FLIT_RDMA_DEVICE=rxe0
# FLIT_RDMA_PORT=1 FLIT_RDMA_GID_INDEX=N FLIT_RDMA_IP FLIT_RDMA_PEER_IP
# FLIT_RDMA_VM_GUEST.  Its output (stdout and stderr, merged) is shown as it
# runs.  The image is built or refreshed first (build-image.sh; cache
# FLIT_VM_CACHE, default $BUILD/vm).
#
# Exit: CMD's exit code (with --two: guest 1's, else guest 2's when that
# failed); 124 time limit; 125 the guest failed (qemu error, set-up failure,
# no valid exit code); 77 with "SKIP: reason" when the guest cannot be built
# here; 2 misuse.  qemu is killed on every way out.
set -u -o pipefail
. "$(dirname "$0")/lib.sh"
PROG=vm-exec

TMO=300 TWO= PEER_CMD= OUTDIR= MEM= SMP= LOGDIR= SHELL_MODE= QUIET= MTU=1500
KSPEC= RDMA= NICS=0 NIC_MODEL=virtio ZC=
usage() { sed -n '/^#   tests\/vm\/vm-exec.sh/,/^# Exit/p' "$0" | sed 's/^# \{0,1\}//; $d'; }
bad() { echo "$PROG: $*" >&2; usage >&2; exit 2; }
num() { [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] || bad "bad $1 '$2' (an integer >= $3)"; }
while [ $# -gt 0 ]; do
	case $1 in
	--timeout) [ $# -ge 2 ] || bad "$1 needs a value"; num --timeout "$2" 30; TMO=$2; shift ;;
	--kernel) [ $# -ge 2 ] || bad "$1 needs a value"
		valid_kernel_spec "$2" || bad "bad --kernel '$2' (6.1, 6.12, newest or linux-image-...-amd64)"
		KSPEC=$2; shift ;;
	--rdma) RDMA=1 ;;
	--nics) [ $# -ge 2 ] || bad "$1 needs a value"; num --nics "$2" 0
		[ "$2" -le 4 ] || bad "bad --nics '$2' (0..4)"; NICS=$2; shift ;;
	--nic-model) [ $# -ge 2 ] || bad "$1 needs a value"
		[[ $2 =~ ^(virtio|e1000e)$ ]] || bad "bad --nic-model '$2' (virtio or e1000e)"; NIC_MODEL=$2; shift ;;
	--zerocopy) ZC=1 ;;
	--two) TWO=1 ;;
	--peer-cmd) [ $# -ge 2 ] || bad "$1 needs a value"; PEER_CMD=$2; shift ;;
	--out) [ $# -ge 2 ] || bad "$1 needs a value"; OUTDIR=$2; shift ;;
	--mem) [ $# -ge 2 ] || bad "$1 needs a value"; num --mem "$2" 256; MEM=$2; shift ;;
	--smp) [ $# -ge 2 ] || bad "$1 needs a value"; num --smp "$2" 1; SMP=$2; shift ;;
	--mtu) [ $# -ge 2 ] || bad "$1 needs a value"; num --mtu "$2" 576
		[ "$2" -le 9000 ] || bad "bad --mtu '$2' (576..9000)"; MTU=$2; shift ;;
	--logdir) [ $# -ge 2 ] || bad "$1 needs a value"; LOGDIR=$2; shift ;;
	--shell) SHELL_MODE=1 ;;
	-q|--quiet) QUIET=1 ;;
	-h|--help) usage; exit 0 ;;
	--) shift; break ;;
	*) bad "unknown option '$1'" ;;
	esac
	shift
done
[ $# -gt 0 ] || bad "no command (vm-exec.sh [options] -- CMD [ARGS...])"
[ -z "$PEER_CMD" ] || [ -n "$TWO" ] || bad "--peer-cmd needs --two"
[ -z "$SHELL_MODE" ] || [ -z "$TWO" ] || bad "--shell is for one guest"
[ -z "$ZC" ] || [ "$NIC_MODEL" = virtio ] || bad "--zerocopy is for virtio NICs"
[ -z "$ZC" ] || [ "$NICS" -gt 0 ] || bad "--zerocopy needs --nics"
KSPEC=$(vm_kernel_spec "$KSPEC")
if [ -n "$OUTDIR" ]; then
	[ -d "$OUTDIR" ] || bad "--out $OUTDIR: no such directory"
	OUTDIR=$(cd "$OUTDIR" && pwd)
	[[ $OUTDIR != *[[:space:]]* ]] || bad "--out: a path without white space, please"
fi
if [ -n "$TWO" ]; then MEM=${MEM:-768}; SMP=${SMP:-1}; else MEM=${MEM:-1024}; SMP=${SMP:-2}; fi

say() { [ -n "$QUIET" ] || echo "$PROG: $*" >&2; }
T0=$(now_ms)
elapsed() { echo $(( ($(now_ms) - T0) / 1000 )); }

# ---- state and the one way out -------------------------------------------------
RUN= SOCKDIR= QPIDS=() TAILS=()
cleanup() {
	local p i
	trap - EXIT INT TERM HUP
	for p in "${QPIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for i in 1 2 3 4 5 6 7 8 9 10; do
		local alive=
		for p in "${QPIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ -z "$alive" ] && break
		sleep 0.3
	done
	for p in "${QPIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for p in "${TAILS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "$SOCKDIR" ] && rm -rf "$SOCKDIR"
	if [ -n "$RUN" ]; then
		if [ -n "$LOGDIR" ]; then
			# (not env.sh: the caller's environment has no place in logs)
			mkdir -p "$LOGDIR" && cp -r "$RUN"/. "$LOGDIR"/ 2>/dev/null && rm -f "$LOGDIR"/g*/env.sh
		fi
		rm -rf "$RUN"
	fi
}
trap cleanup EXIT
trap 'echo "$PROG: interrupted" >&2; exit 130' INT
trap 'echo "$PROG: terminated" >&2; exit 143' TERM HUP

# ---- the image --------------------------------------------------------------------
if [ -n "$RDMA" ]; then
	. "$VM_HOME/../rdma/lib.sh"
	if why=$(rdma_vm_missing); then echo "SKIP: no Soft-RoCE guest: $why"; exit 77; fi
fi
img=$("$VM_HOME/build-image.sh" --kernel "$KSPEC" ${QUIET:+--quiet} 2>&1)
rc=$?
case $rc in
0) [ -z "$img" ] || echo "$img" >&2 ;;
77) echo "$img" | grep -v '^SKIP:' >&2; echo "$img" | grep '^SKIP:' | tail -1; exit 77 ;;
*) echo "$img" >&2; echo "$PROG: building the guest image failed (exit $rc)" >&2; exit 125 ;;
esac
IMG=$(readlink -f "$(vm_cache)/images/$KSPEC")
ACCEL=$(vm_accel)
KERNEL=$IMG/vmlinuz
[ -s "$IMG/vmlinux" ] && KERNEL=$IMG/vmlinux   # PVH entry: no decompression
left=$(( TMO - $(elapsed) ))
[ "$left" -ge 20 ] || { echo "$PROG: no time left to boot (--timeout $TMO)" >&2; exit 124; }
GUEST_TMO=$(( left - 25 )); [ "$GUEST_TMO" -ge 10 ] || GUEST_TMO=10

RUN=$(mktemp -d "${TMPDIR:-/tmp}/flit-vm.XXXXXX") || { echo "$PROG: mktemp failed" >&2; exit 125; }

# write_share DIR CMDLINE: the run directory a guest gets as "host0"
write_share() {
	local d=$1 line=$2 n
	mkdir -p "$d"
	: >"$d/out.log"
	{
		for n in $(compgen -e); do
			case $n in
			BASH_*|SHLVL|PWD|OLDPWD|_|HOSTNAME|SSH_*|DISPLAY|XAUTHORITY|TMUX*|MAIL) continue ;;
			FLIT_RDMA_DEVICE|FLIT_RDMA_PORT|FLIT_RDMA_GID_INDEX|FLIT_RDMA_IP|FLIT_RDMA_PEER_IP) continue ;;
			FLIT_RDMA_VM|FLIT_RDMA_VM_GUEST) continue ;;
			FLIT_VM|FLIT_VM_GUEST|FLIT_VM_IP|FLIT_VM_PEER_IP|FLIT_VM_NICS|FLIT_VM_NIC_MODEL) continue ;;
			esac
			printf 'export %s=%q\n' "$n" "${!n}"
		done
	} >"$d/env.sh"
	{
		echo '#!/bin/bash'
		echo '. /run/flit-vm/env.sh'
		echo '. /run/flit-vm/guest.env'
		echo 'ulimit -l unlimited 2>/dev/null'
		printf 'cd %q || { echo "vm-exec: no directory %q in the guest"; exit 126; }\n' "$PWD" "$PWD"
		echo "exec $line"
	} >"$d/cmd.sh"
	[ -z "$OUTDIR" ] || echo "$OUTDIR" >"$d/outdir"
}
write_share "$RUN/g1" "$(printf '%q ' "$@")"
[ -z "$TWO" ] || write_share "$RUN/g2" "${PEER_CMD:+bash -c $(printf %q "$PEER_CMD")}"
[ -n "$TWO" ] && [ -z "$PEER_CMD" ] && rm -f "$RUN/g2/cmd.sh"

# boot N IP MAC NET: start qemu for guest N in the background (pid in QPIDS)
boot() {
	local n=$1 ip=$2 mac=$3 peer=$4 netdev=$5 append args
	append="console=ttyS0 panic=-1 quiet loglevel=4 flit.guest=$n flit.ip=$ip flit.mtu=$MTU flit.timeout=$GUEST_TMO"
	append="$append flit.rdma=${RDMA:-0} flit.nics=$NICS flit.nicmodel=$NIC_MODEL"
	[ -n "$peer" ] && append="$append flit.peer=$peer"
	# Under TCG the guest kernel finds the vCPUs' TSCs "unsynchronized" at
	# boot and falls back to the HPET: every clock_gettime() is then a
	# system call and an emulated device read (tens of us).  QEMU derives
	# every vCPU's TSC from one host clock, so trust it: clocks read in the
	# vDSO, as on hardware (and as ib_send_lat's rdtsc does).
	[ "$ACCEL" = kvm ] || append="$append tsc=reliable clocksource=tsc"
	[ -n "$SHELL_MODE" ] && append="$append flit.shell=1"
	args=(-nodefaults -no-user-config -display none -no-reboot -m "$MEM" -smp "$SMP"
	      -kernel "$KERNEL" -initrd "$IMG/initramfs.cpio.gz" -append "$append"
	      -device isa-debug-exit,iobase=0xf4,iosize=0x01
	      -netdev "$netdev" -device "virtio-net-pci,netdev=n0,mac=$mac"
	      -fsdev "local,id=fs0,path=$RUN/g$n,security_model=none"
	      -device virtio-9p-pci,fsdev=fs0,mount_tag=host0
	      -fsdev "local,id=fs1,path=/,security_model=none,readonly=on,multidevs=remap"
	      -device virtio-9p-pci,fsdev=fs1,mount_tag=hostroot)
	# the test NICs: hub 1, MACs 52:54:00:f1:18:0I (the guest names them by MAC)
	local i dev
	for ((i = 1; i <= NICS; i++)); do
		if [ "$NIC_MODEL" = e1000e ]; then dev=e1000e
		elif [ -n "$ZC" ]; then dev=virtio-net-pci,disable-legacy=on,iommu_platform=on
		else dev=virtio-net-pci; fi
		args+=(-netdev "hubport,id=x$i,hubid=1" -device "$dev,netdev=x$i,mac=52:54:00:f1:18:0$i")
	done
	# SINK: a hub whose only port is the NIC's never takes a frame (QEMU
	# queues them, the guest's transmit queue stops, its watchdog fires,
	# and rxe stalls once 64 of a queue pair's packets wait to be freed);
	# a second port, a datagram socket addressed to a path nobody binds,
	# takes each one and drops it
	[[ $netdev == hubport* ]] && rm -f "$SOCKDIR/sink$n" &&
		args+=(-netdev "dgram,id=sink0,local.type=unix,local.path=$SOCKDIR/sink$n,remote.type=unix,remote.path=$SOCKDIR/none"
		       -netdev "hubport,id=n0sink,hubid=0,netdev=sink0")
	[ -n "$OUTDIR" ] && args+=(-fsdev "local,id=fs2,path=$OUTDIR,security_model=none"
	                          -device virtio-9p-pci,fsdev=fs2,mount_tag=out0)
	if [ "$ACCEL" = kvm ]; then args+=(-accel kvm -cpu host); else args+=(-accel tcg -cpu max); fi
	if [ -n "$SHELL_MODE" ]; then   # in the foreground: it owns the terminal
		timeout -k 3 "$left" "$VM_QEMU" "${args[@]}" -serial mon:stdio
		exit $?
	fi
	: >"$RUN/g$n.console"
	# timeout(1) is the host's watchdog: TERM at the limit (status 124; the
	# debug-exit statuses are odd), KILL 3 s later; a TERM sent to it is
	# passed on to qemu.  --foreground keeps qemu in our process group, so a
	# signal to the group (the test runner's timeout) reaches it directly.
	timeout --foreground -k 3 "$left" "$VM_QEMU" "${args[@]}" -serial "file:$RUN/g$n.console" \
		</dev/null 2>"$RUN/g$n.qemu.err" &
	QPIDS+=($!)
}

say "booting $([ -n "$TWO" ] && echo "two guests" || echo "a guest") ($ACCEL, ${SMP} CPU, ${MEM} MiB," \
    "kernel $(cat "$IMG/kernel.version" 2>/dev/null)$([ "$NICS" -gt 0 ] && echo ", $NICS $NIC_MODEL NIC$([ "$NICS" -gt 1 ] && echo s)${ZC:+ (zero-copy capable)}")); limit ${TMO}s, command watchdog ${GUEST_TMO}s"
if [ -n "$TWO" ]; then
	SOCKDIR=$(mktemp -d /tmp/flit-wire.XXXXXX)
	boot 1 192.168.50.1/24 52:54:00:f1:17:01 192.168.50.2 \
		"dgram,id=n0,local.type=unix,local.path=$SOCKDIR/1,remote.type=unix,remote.path=$SOCKDIR/2"
	boot 2 192.168.50.2/24 52:54:00:f1:17:02 192.168.50.1 \
		"dgram,id=n0,local.type=unix,local.path=$SOCKDIR/2,remote.type=unix,remote.path=$SOCKDIR/1"
else
	# a NIC on a hub of its own: nothing leaves the guest (rxe loops its own
	# traffic back inside it); the hub's second port drops what the guest
	# sends (boot: SINK)
	SOCKDIR=$(mktemp -d /tmp/flit-wire.XXXXXX)
	boot 1 192.168.50.1/24 52:54:00:f1:17:01 "" "hubport,id=n0,hubid=0"
fi

tail -n +1 -f --pid="${QPIDS[0]}" "$RUN/g1/out.log" 2>/dev/null & TAILS+=($!)
if [ -n "$TWO" ]; then
	tail -n +1 -f --pid="${QPIDS[1]}" "$RUN/g2/out.log" 2>/dev/null | sed -u 's/^/[peer] /' & TAILS+=($!)
fi

# verdict N QEMU_STATUS: the guest's exit code, or 124/125
verdict() {
	local n=$1 q=$2 m st
	m=$(grep -a -o 'FLIT_VM_EXIT=[0-9]*' "$RUN/g$n.console" 2>/dev/null | tail -1 | cut -d= -f2)
	st=$(cat "$RUN/g$n/status" 2>/dev/null)
	if [ "$q" -eq 124 ] || [ "$q" -eq 137 ]; then
		echo "$PROG: guest $n: time limit (${TMO}s) reached after $(elapsed)s: qemu killed" >&2; return 124
	fi
	case $st in
	setup-failed*) echo "$PROG: guest $n: ${st/setup-failed/set-up failed:}" >&2; return 125 ;;
	timeout*) echo "$PROG: guest $n: the command hit the guest's watchdog (${GUEST_TMO}s)" >&2; return 124 ;;
	esac
	# qemu exits 1 on its own errors too, which reads like debug-exit code 0:
	# the console's marker must agree with the debug-exit status
	if [ -n "$m" ] && [ $((q % 2)) -eq 1 ] && [ $(((q - 1) / 2)) -eq $((m > 127 ? 127 : m)) ]; then
		return $((m > 127 ? 127 : m))
	fi
	echo "$PROG: guest $n: no valid exit code (qemu exit $q, marker '${m:-none}', status '${st:-none}')" >&2
	return 125
}
show_failure() {
	local n=$1
	echo "--- $PROG: guest $n console (tail) ---" >&2
	tail -25 "$RUN/g$n.console" >&2 2>/dev/null
	[ -s "$RUN/g$n.qemu.err" ] && { echo "--- qemu stderr ---" >&2; tail -10 "$RUN/g$n.qemu.err" >&2; }
}

wait "${QPIDS[0]}"; q1=$?
verdict 1 "$q1"; rc1=$?
# A lone guest whose kernel died while booting, before the command started
# (no "running the command" line; under TCG a newer kernel's boot-time
# text patching has oopsed at random, e.g. 7.3's int3 in
# set_next_task_fair): boot it once more, keeping the first console.
if [ "$rc1" -eq 125 ] && [ -z "$TWO" ] && [ -z "$SHELL_MODE" ] &&
   ! grep -aq 'running the command' "$RUN/g1.console" 2>/dev/null &&
   grep -aqE 'Kernel panic|Oops:' "$RUN/g1.console" 2>/dev/null &&
   [ $(( TMO - $(elapsed) )) -ge 60 ]; then
	say "guest 1: its kernel died while booting, before the command ($(grep -aoE 'Oops: [^[]*|Kernel panic - [^[]*' "$RUN/g1.console" | head -1)); booting it again"
	mv "$RUN/g1.console" "$RUN/g1.console.boot1"
	rm -f "$RUN/g1/status"
	: >"$RUN/g1/out.log"
	kill "${TAILS[@]}" 2>/dev/null
	TAILS=() QPIDS=()
	left=$(( TMO - $(elapsed) ))
	boot 1 192.168.50.1/24 52:54:00:f1:17:01 "" "hubport,id=n0,hubid=0"
	tail -n +1 -f --pid="${QPIDS[0]}" "$RUN/g1/out.log" 2>/dev/null & TAILS+=($!)
	wait "${QPIDS[0]}"; q1=$?
	verdict 1 "$q1"; rc1=$?
fi
# guest uptime when the command started (boot, modules, rxe0, 9p mounts)
ready() { sed -n 's/^vm-init: \[\([0-9.]*\)\] running the command.*/, ready at \1 s guest uptime/p' "$RUN/g$1.console" 2>/dev/null; }
say "guest 1 done after $(elapsed)s$(ready 1): $(cat "$RUN/g1/status" 2>/dev/null || echo "exit $rc1")"
rc=$rc1
if [ -n "$TWO" ]; then
	if [ -z "$PEER_CMD" ]; then
		kill -TERM "${QPIDS[1]}" 2>/dev/null
		wait "${QPIDS[1]}" 2>/dev/null
		rc2=0
	else
		# the peer's command gets 30 s more (a server waiting for a client
		# that already failed stops by itself or is stopped here)
		for _ in $(seq 60); do kill -0 "${QPIDS[1]}" 2>/dev/null || break; sleep 0.5; done
		if kill -0 "${QPIDS[1]}" 2>/dev/null; then
			kill -TERM "${QPIDS[1]}"; wait "${QPIDS[1]}"
			echo "$PROG: guest 2 still ran 30 s after guest 1 finished: stopped" >&2; rc2=124
		else
			wait "${QPIDS[1]}"; q2=$?
			verdict 2 "$q2"; rc2=$?
		fi
		say "guest 2 done after $(elapsed)s$(ready 2): $(cat "$RUN/g2/status" 2>/dev/null || echo "exit $rc2")"
	fi
	[ "$rc1" -eq 0 ] && rc=$rc2
	[ "$rc2" -ge 124 ] && show_failure 2
fi
# let the output followers print the last lines
for p in "${TAILS[@]}"; do
	for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
done
[ "$rc1" -ge 124 ] && show_failure 1
exit "$rc"
