#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# PID 1 of flit's test guests (busybox sh; built into the initramfs by
# tests/vm/build-image.sh, booted by tests/vm/vm-exec.sh).
#
# Sets up: /proc /sys /dev /dev/shm /tmp /run; ulimit -l unlimited (memory
# registration, UMEMs); modules virtio, 9p, overlay, veth; eth0 with flit.ip;
# with flit.rdma=1 the Soft-RoCE device rxe0 on eth0 (rdma_rxe, ib_uverbs,
# rdma_ucm), waited for until its port is ACTIVE; the test NICs (flit.nics),
# found by their MACs 52:54:00:f1:18:0I and named xnicI; the 9p share "host0" (the run directory) at /mnt/host; this
# host's / ("hostroot", read-only 9p) with a tmpfs overlay at /mnt/hostroot,
# the guest's /proc /sys /dev bound into it and the run directory at
# /run/flit-vm, bpffs at its /sys/fs/bpf; the optional share "out0" (a writable host directory) at its
# own host path.  Then runs, chrooted there, /run/flit-vm/cmd.sh (written by
# vm-exec.sh) under a watchdog, its output appended to /mnt/host/out.log
# (which the host follows while it grows).
#
# Kernel command line (dotted words, so the kernel keeps them out of init's
# environment):
#   flit.ip=A/P       eth0 address (default 192.168.50.1/24)
#   flit.peer=IP      the other guest (two-guest mode): wait until it answers
#   flit.guest=N      this guest's number (1, or 2 for the peer)
#   flit.timeout=S    watchdog on the command (default 240)
#   flit.shell=1      a shell on the console after the command (debugging)
#   flit.rdma=1       the Soft-RoCE device rxe0 on eth0
#   flit.nics=N       N test NICs to wait for and name (xnic1..xnicN)
#   flit.nicmodel=M   their driver: virtio (virtio_net) or e1000e
#
# Result: /mnt/host/status ("ran RC", "timeout RC" or "setup-failed REASON"),
# the line FLIT_VM_EXIT=N on the console, N written to the isa-debug-exit port
# (qemu then exits with 2N+1), power off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
ulimit -l unlimited

up() { cut -d' ' -f1 /proc/uptime; }
log() { echo "vm-init: [$(up)] $*"; }
IP=192.168.50.1/24 PEER= GUEST=1 TMO=240 SHELL_AFTER= SHARE= STATUS= MTU=1500 RDMA=0 NICS=0 NICMODEL=virtio
for w in $(cat /proc/cmdline); do
	case $w in
	flit.ip=*) IP=${w#*=} ;;
	flit.mtu=*) MTU=${w#*=} ;;
	flit.peer=*) PEER=${w#*=} ;;
	flit.guest=*) GUEST=${w#*=} ;;
	flit.timeout=*) TMO=${w#*=} ;;
	flit.shell=*) SHELL_AFTER=${w#*=} ;;
	flit.rdma=*) RDMA=${w#*=} ;;
	flit.nics=*) NICS=${w#*=} ;;
	flit.nicmodel=*) NICMODEL=${w#*=} ;;
	esac
done
hostname "flit-vm$GUEST"

fail() { STATUS="setup-failed $*"; log "SETUP FAILED: $*"; }

setup() {
	modprobe virtio_pci; modprobe virtio_net; modprobe 9pnet_virtio; modprobe 9p; modprobe overlay
	if grep -q host0 /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag 2>/dev/null; then
		mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host0 /mnt/host && SHARE=1
	fi
	[ -n "$SHARE" ] || { fail "no 9p share host0"; return 1; }
	modprobe veth
	[ "$NICMODEL" = e1000e ] && [ "$NICS" -gt 0 ] && { modprobe e1000e || { fail "modprobe e1000e"; return 1; }; }
	ip link set lo up
	# the test NICs first (by MAC: eth0 is the one that is not theirs)
	n=1
	while [ "$n" -le "$NICS" ]; do
		mac=52:54:00:f1:18:0$n dev= i=0
		while [ -z "$dev" ] && [ $i -lt 100 ]; do
			for f in /sys/class/net/*/address; do
				[ "$(cat "$f")" = "$mac" ] && { dev=${f%/address}; dev=${dev##*/}; }
			done
			[ -n "$dev" ] || { sleep 0.1; i=$((i + 1)); }
		done
		[ -n "$dev" ] || { fail "no test NIC with MAC $mac ($NICMODEL)"; return 1; }
		[ "$dev" = "xnic$n" ] || ip link set "$dev" name "xnic$n" || { fail "rename $dev to xnic$n"; return 1; }
		n=$((n + 1))
	done
	i=0; while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ -e /sys/class/net/eth0 ] || { fail "no eth0"; return 1; }
	# Alone on its qemu hub (one guest, no Soft-RoCE), eth0 has nobody to
	# talk to: no IPv6 on it, whose router solicitations and MLD reports
	# would sit in its transmit queue until the TX watchdog complains
	[ "$RDMA" = 1 ] || [ -n "$PEER" ] || echo 1 >/proc/sys/net/ipv6/conf/eth0/disable_ipv6
	ip link set eth0 mtu "$MTU" || { fail "eth0 mtu $MTU"; return 1; }
	ip addr add "$IP" dev eth0 && ip link set eth0 up || { fail "eth0 address $IP"; return 1; }
	[ "$RDMA" = 1 ] && { setup_rdma || return 1; }
	setup_root
}

setup_rdma() {
	modprobe rdma_rxe || { fail "modprobe rdma_rxe"; return 1; }
	modprobe ib_uverbs || { fail "modprobe ib_uverbs"; return 1; }
	modprobe rdma_ucm
	rdma link add rxe0 type rxe netdev eth0 || { fail "rdma link add rxe0 type rxe netdev eth0"; return 1; }
	i=0
	while [ "$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)" != "4: ACTIVE" ] && [ $i -lt 200 ]; do
		sleep 0.1; i=$((i + 1))
	done
	st=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
	[ "$st" = "4: ACTIVE" ] || { fail "rxe0 port 1 not ACTIVE (${st:-no state})"; return 1; }
	# the GID of eth0's IPv4 address (RoCEv2): ::ffff:a.b.c.d; index 0 is the
	# IPv6 link-local one
	GID=
	for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		case $(cat "$f" 2>/dev/null) in
		0000:0000:0000:0000:0000:ffff:*) GID=${f##*/}; break ;;
		esac
	done
	[ -n "$GID" ] || { fail "rxe0 has no IPv4 GID"; return 1; }
	log "rxe0 ACTIVE on eth0 ${IP%/*} (MTU $MTU, path MTU $(ibv_devinfo -d rxe0 2>/dev/null | sed -n 's/.*active_mtu:[[:space:]]*//p')), GID index $GID ($(cat /sys/class/infiniband/rxe0/ports/1/gids/$GID))"
}

setup_root() {
	mkdir -p /mnt/hostro /mnt/hostroot /run/ovl
	grep -q hostroot /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag 2>/dev/null ||
		{ fail "no 9p share hostroot"; return 1; }
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro hostroot /mnt/hostro ||
		{ fail "mount hostroot"; return 1; }
	mount -t tmpfs ovl /run/ovl && mkdir -p /run/ovl/u /run/ovl/w
	mount -t overlay -o lowerdir=/mnt/hostro,upperdir=/run/ovl/u,workdir=/run/ovl/w ovl /mnt/hostroot ||
		{ fail "overlay of tmpfs on the host's /"; return 1; }
	# (not /tmp: a cwd or build directory under the host's /tmp must stay
	# visible; the overlay makes it writable)
	for d in proc sys dev dev/pts dev/shm; do
		mkdir -p "/mnt/hostroot/$d" && mount --bind "/$d" "/mnt/hostroot/$d" ||
			{ fail "bind /$d"; return 1; }
	done
	mkdir -p /mnt/hostroot/run/flit-vm && mount --bind /mnt/host /mnt/hostroot/run/flit-vm ||
		{ fail "bind the run directory"; return 1; }
	if [ -s /mnt/host/outdir ]; then
		o=$(cat /mnt/host/outdir)
		grep -q out0 /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag 2>/dev/null &&
		mkdir -p "/mnt/hostroot$o" &&
		mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out0 "/mnt/hostroot$o" ||
			{ fail "mount the output directory $o"; return 1; }
	fi
	if [ -n "$PEER" ]; then
		i=0; while ! ping -c 1 -W 1 "$PEER" >/dev/null 2>&1 && [ $i -lt 90 ]; do i=$((i + 1)); done
		ping -c 1 -W 2 "$PEER" >/dev/null 2>&1 || { fail "peer $PEER does not answer"; return 1; }
		log "peer $PEER answers"
	fi
	mount -t bpf bpf /mnt/hostroot/sys/fs/bpf 2>/dev/null
	nics= n=1
	while [ "$n" -le "$NICS" ]; do nics="$nics xnic$n"; n=$((n + 1)); done
	{
		echo "export FLIT_VM=1 FLIT_VM_GUEST=$GUEST FLIT_VM_IP=${IP%/*} FLIT_VM_PEER_IP=$PEER"
		echo "export FLIT_VM_NICS='${nics# }' FLIT_VM_NIC_MODEL=$NICMODEL"
		if [ "$RDMA" = 1 ]; then
			echo "export FLIT_RDMA_VM=1 FLIT_RDMA_VM_GUEST=$GUEST"
			echo "export FLIT_RDMA_DEVICE=rxe0 FLIT_RDMA_PORT=1 FLIT_RDMA_GID_INDEX=$GID"
			echo "export FLIT_RDMA_IP=${IP%/*} FLIT_RDMA_PEER_IP=$PEER"
		fi
	} >/mnt/host/guest.env
	log "up: kernel $(uname -r), eth0 ${IP%/*}${nics:+, test NICs$nics ($NICMODEL)}"
}

rc=125
if setup; then
	if [ -f /mnt/host/cmd.sh ]; then
		log "running the command (watchdog ${TMO}s)"
		chroot /mnt/hostroot /bin/bash /run/flit-vm/cmd.sh >>/mnt/host/out.log 2>&1 </dev/null &
		cpid=$!
		(
			sleep "$TMO"
			echo timeout >/tmp/timedout
			echo "vm-init: the command ran longer than ${TMO}s: killed" >>/mnt/host/out.log
			kill -TERM $cpid 2>/dev/null; sleep 3; kill -KILL $cpid 2>/dev/null
		) &
		wpid=$!
		wait $cpid; rc=$?
		kill $wpid 2>/dev/null
		if [ -f /tmp/timedout ]; then STATUS="timeout $rc"; rc=124; else STATUS="ran $rc"; fi
		log "command finished: $STATUS"
	else
		STATUS="ran 0"; rc=0
	fi
fi
echo "FLIT_VM_EXIT=$rc"
[ -n "$SHELL_AFTER" ] && setsid cttyhack sh
if [ -n "$SHARE" ]; then
	echo "$STATUS" >/mnt/host/status
	sync
fi
for d in run/flit-vm dev/shm dev/pts dev sys proc; do umount "/mnt/hostroot/$d" 2>/dev/null; done
[ -n "$SHARE" ] && umount /mnt/host 2>/dev/null
[ "$rc" -gt 127 ] && rc=127
# isa-debug-exit: qemu exits with (rc << 1) | 1
printf "\\$(printf %o "$rc")" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
