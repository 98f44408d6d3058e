#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# vm-exec.sh — run a command of this host inside a throwaway Soft-RoCE guest
# (Debian's kernel with rdma_rxe under qemu; device rxe0 on the guest's eth0)
# and return its exit code: tests/vm/vm-exec.sh --rdma, which documents the
# options (--help).  See docs/RDMA.md.
#
#   tests/rdma/vm-exec.sh [options] -- CMD [ARGS...]
exec "$(dirname "$0")/../vm/vm-exec.sh" --rdma "$@"
