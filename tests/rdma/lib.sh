# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=bash
# Sourced by the RDMA tests (tests/test_rdma_vm.sh) and tools/bench-rdma.sh:
# the guest harness (tests/vm/lib.sh) plus what RDMA adds to it.  set -u safe.

RDMA_VM_HOME=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$RDMA_VM_HOME/../vm/lib.sh"

# The RDMA devices libibverbs finds on this host, one name per line (none on
# a kernel without an RDMA stack: ibv_devices then fails or lists nothing).
rdma_host_devices() {
	command -v ibv_devices >/dev/null 2>&1 || return 0
	ibv_devices 2>/dev/null | awk 'NR > 2 && NF >= 1 { print $1 }'
}

# Print why the Soft-RoCE guest cannot be had and return 0; return 1 when it
# can: the guest harness's needs (vm_missing) and the rxe set-up's.
rdma_vm_missing() {
	vm_missing && return 0
	command -v rdma >/dev/null 2>&1 || [ -x /usr/sbin/rdma ] || [ -x /sbin/rdma ] ||
		{ echo "rdma (iproute2) not found: the guest creates its Soft-RoCE device with it"; return 0; }
	[ -e /etc/libibverbs.d/rxe.driver ] ||
		{ echo "the rxe verbs provider is not installed (apt-get install ibverbs-providers)"; return 0; }
	return 1
}
