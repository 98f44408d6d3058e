# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=bash
# Sourced by the Soft-RoCE guest harness (tests/rdma/*.sh), tests/test_rdma_vm.sh
# and tools/bench-rdma.sh.  Defines no state beyond the functions and
# RDMA_VM_HOME (this directory); set -u safe.

RDMA_VM_HOME=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The image cache: kernel .deb, vmlinuz, initramfs.  FLIT_RDMA_VM_CACHE, else
# $BUILD/rdma-vm (BUILD defaults to build), made absolute; created if missing.
rdma_vm_cache() {
	local c=${FLIT_RDMA_VM_CACHE:-${BUILD:-build}/rdma-vm}
	mkdir -p "$c" 2>/dev/null || { echo "$c"; return 1; }
	(cd "$c" && pwd)
}

# The RDMA devices libibverbs finds on this host, one name per line (none on
# a kernel without an RDMA stack: ibv_devices then fails or lists nothing).
rdma_host_devices() {
	command -v ibv_devices >/dev/null 2>&1 || return 0
	ibv_devices 2>/dev/null | awk 'NR > 2 && NF >= 1 { print $1 }'
}

# qemu: FLIT_RDMA_VM_QEMU, default qemu-system-x86_64 on PATH.
RDMA_VM_QEMU=${FLIT_RDMA_VM_QEMU:-qemu-system-x86_64}

# busybox that needs no shared library (the initramfs has no libc for it):
# FLIT_RDMA_VM_BUSYBOX, else the first static one of the usual places.
rdma_vm_busybox() {
	local b list=(/bin/busybox /usr/bin/busybox "$(command -v busybox 2>/dev/null)")
	[ -n "${FLIT_RDMA_VM_BUSYBOX:-}" ] && list=("$FLIT_RDMA_VM_BUSYBOX")
	for b in "${list[@]}"; do
		[ -n "$b" ] && [ -x "$b" ] || continue
		# a static binary: ldd says "not a dynamic executable" and fails
		ldd "$b" >/dev/null 2>&1 || { echo "$b"; return 0; }
	done
	return 1
}

# Print why the guest cannot be built or booted on this host and return 0;
# return 1 (printing nothing) when everything it needs is here.  Missing
# network access to Debian's archive is found later, by build-image.sh.
rdma_vm_missing() {
	local c
	# (root is not needed: qemu, depmod, cpio and apt-get download run as
	# any user, and the guest reads this host's files with the caller's rights)
	command -v "$RDMA_VM_QEMU" >/dev/null 2>&1 ||
		{ echo "$RDMA_VM_QEMU not found (apt-get install qemu-system-x86)"; return 0; }
	if ! rdma_vm_busybox >/dev/null; then
		if [ -n "${FLIT_RDMA_VM_BUSYBOX:-}" ] && [ -x "$FLIT_RDMA_VM_BUSYBOX" ]; then
			echo "$FLIT_RDMA_VM_BUSYBOX is dynamically linked; the guest needs a static busybox (apt-get install busybox-static)"
		elif [ -z "${FLIT_RDMA_VM_BUSYBOX:-}" ] && command -v busybox >/dev/null 2>&1; then
			echo "busybox is dynamically linked; the guest needs a static one (apt-get install busybox-static)"
		else
			echo "${FLIT_RDMA_VM_BUSYBOX:-busybox} not found; the guest needs a static busybox (apt-get install busybox-static)"
		fi
		return 0
	fi
	for c in cpio gzip depmod modprobe dpkg-deb; do
		command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || [ -x "/sbin/$c" ] || {
			case $c in
			depmod|modprobe) echo "$c not found (apt-get install kmod)" ;;
			dpkg-deb) echo "dpkg-deb not found: the guest kernel comes from Debian's linux-image .deb" ;;
			*) echo "$c not found (apt-get install $c)" ;;
			esac
			return 0
		}
	done
	command -v rdma >/dev/null 2>&1 || [ -x /usr/sbin/rdma ] || [ -x /sbin/rdma ] ||
		{ echo "rdma (iproute2) not found: the guest creates its Soft-RoCE device with it"; return 0; }
	[ -e /etc/libibverbs.d/rxe.driver ] ||
		{ echo "the rxe verbs provider is not installed (apt-get install ibverbs-providers)"; return 0; }
	return 1
}

# The accelerator: FLIT_RDMA_VM_ACCEL=tcg|kvm|auto (default auto).  auto takes
# KVM only when /dev/kvm is usable and is not PVM (kvm_pvm: a stock kernel
# hangs or dies on emulation failures there); else TCG, which always works.
rdma_vm_accel() {
	case ${FLIT_RDMA_VM_ACCEL:-auto} in
	kvm) echo kvm ;;
	tcg) echo tcg ;;
	*) if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then echo kvm; else echo tcg; fi ;;
	esac
}

# now_ms: milliseconds of CLOCK_REALTIME (for elapsed times).
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
