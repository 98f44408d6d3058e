# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=bash
# Sourced by flit's guest harness (tests/vm/*.sh), its users (tests/rdma/,
# tests/test_*_vm.sh, tools/bench-rdma.sh).  Defines no state beyond the
# functions, VM_HOME (this directory) and VM_QEMU; set -u safe.
#
# The guests boot Debian's own kernels (docs/VM.md):
#   6.1      Debian 12's kernel (bookworm; linux-image-amd64's dependency)
#   6.12     the newest 6.12 of bookworm-backports
#   newest   the newest kernel of trixie-backports
#   linux-image-...   that package (from any of those suites)
# fetched with `apt-get download` through an apt state of the harness's own
# (the cache's apt/: bookworm, bookworm-backports and trixie-backports), so
# the host's sources and package lists are neither needed nor changed.

VM_HOME=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_KERNELS="6.1 6.12 newest"

# qemu: FLIT_VM_QEMU (or FLIT_RDMA_VM_QEMU), default qemu-system-x86_64.
VM_QEMU=${FLIT_VM_QEMU:-${FLIT_RDMA_VM_QEMU:-qemu-system-x86_64}}

# The image cache: the kernel .debs (kept: rebuilds need no network), the
# harness's apt state, one image per kernel.  FLIT_VM_CACHE (or the older
# FLIT_RDMA_VM_CACHE), else $BUILD/vm; made absolute, created if missing.
vm_cache() {
	local c=${FLIT_VM_CACHE:-${FLIT_RDMA_VM_CACHE:-${BUILD:-build}/vm}}
	mkdir -p "$c" 2>/dev/null || { echo "$c"; return 1; }
	(cd "$c" && pwd)
}

# The kernel to boot: $1, else FLIT_VM_KERNEL, else FLIT_RDMA_VM_KPKG (a
# package name), else 6.1.
vm_kernel_spec() {
	echo "${1:-${FLIT_VM_KERNEL:-${FLIT_RDMA_VM_KPKG:-6.1}}}"
}

# valid_kernel_spec SPEC: 0 when SPEC names a kernel this harness can fetch
valid_kernel_spec() {
	case $1 in
	6.1|6.12|newest) return 0 ;;
	linux-image-[0-9]*-amd64) [[ $1 =~ ^[a-z0-9.+~-]+$ ]] ;;
	*) return 1 ;;
	esac
}

# busybox that needs no shared library (the initramfs has no libc for it):
# FLIT_VM_BUSYBOX (or FLIT_RDMA_VM_BUSYBOX), else the first static one of the
# usual places.
vm_busybox() {
	local b want=${FLIT_VM_BUSYBOX:-${FLIT_RDMA_VM_BUSYBOX:-}}
	local list=(/bin/busybox /usr/bin/busybox "$(command -v busybox 2>/dev/null)")
	[ -n "$want" ] && list=("$want")
	for b in "${list[@]}"; do
		[ -n "$b" ] && [ -x "$b" ] || continue
		# a static binary: ldd says "not a dynamic executable" and fails
		ldd "$b" >/dev/null 2>&1 || { echo "$b"; return 0; }
	done
	return 1
}

# Print why no guest can be built or booted on this host and return 0;
# return 1 (printing nothing) when everything it needs is here.  Missing
# network access to Debian's archive is found later, by build-image.sh.
vm_missing() {
	local c want=${FLIT_VM_BUSYBOX:-${FLIT_RDMA_VM_BUSYBOX:-}}
	# (root is not needed: qemu, depmod, cpio and apt-get download run as
	# any user, and the guest reads this host's files with the caller's rights)
	command -v "$VM_QEMU" >/dev/null 2>&1 ||
		{ echo "$VM_QEMU not found (apt-get install qemu-system-x86)"; return 0; }
	if ! vm_busybox >/dev/null; then
		if [ -n "$want" ] && [ -x "$want" ]; then
			echo "$want is dynamically linked; the guest needs a static busybox (apt-get install busybox-static)"
		elif [ -z "$want" ] && command -v busybox >/dev/null 2>&1; then
			echo "busybox is dynamically linked; the guest needs a static one (apt-get install busybox-static)"
		else
			echo "${want:-busybox} not found; the guest needs a static busybox (apt-get install busybox-static)"
		fi
		return 0
	fi
	for c in cpio gzip xz zstd depmod modprobe dpkg-deb apt-get; do
		command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || [ -x "/sbin/$c" ] || {
			case $c in
			depmod|modprobe) echo "$c not found (apt-get install kmod)" ;;
			dpkg-deb|apt-get) echo "$c not found: the guest kernel comes from Debian's .debs" ;;
			xz) echo "xz not found (apt-get install xz-utils): Debian's kernel modules are compressed" ;;
			*) echo "$c not found (apt-get install $c)" ;;
			esac
			return 0
		}
	done
	return 1
}

# The accelerator: FLIT_VM_ACCEL (or FLIT_RDMA_VM_ACCEL) = tcg|kvm|auto
# (default auto).  auto takes KVM only when /dev/kvm is usable and is not PVM
# (kvm_pvm: a stock kernel hangs or dies on emulation failures there); else
# TCG, which always works.
vm_accel() {
	case ${FLIT_VM_ACCEL:-${FLIT_RDMA_VM_ACCEL:-auto}} in
	kvm) echo kvm ;;
	tcg) echo tcg ;;
	*) if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then echo kvm; else echo tcg; fi ;;
	esac
}

# now_ms: milliseconds of CLOCK_REALTIME (for elapsed times).
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
