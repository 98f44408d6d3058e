#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# build-image.sh — build the Soft-RoCE guest's image: the guest harness's
# image (tests/vm/build-image.sh, which documents the options), whose
# initramfs carries rdma_rxe, ib_uverbs, rdma_ucm and the rxe provider.
#
#   tests/rdma/build-image.sh [--kernel SPEC] [--force] [--quiet]
. "$(dirname "$0")/lib.sh"
if why=$(rdma_vm_missing); then echo "SKIP: $why"; exit 77; fi
exec "$VM_HOME/build-image.sh" "$@"
